/*
 * fuzz_rule.c — libFuzzer target for the egress rule language
 * (netctl/nc_rule.c: rules, durations, modes) and the policy relations
 * built on it (proxy/api/control_rule.c). The input is up to three lines:
 * rule A, rule B, a duration. Invariants: a parsed rule formats to text
 * that parses back to the same rule and the same text; a rule covers and
 * overlaps itself; overlap is symmetric; cover implies overlap; a
 * duration is exactly its number times its unit.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control_rule.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
same(const struct nc_rule *a, const struct nc_rule *b)
{
	if (a->kind != b->kind || a->proto != b->proto ||
	    a->port_lo != b->port_lo || a->port_hi != b->port_hi)
		return 0;
	if (a->kind == NC_RULE_ADDR)
		return a->addr.s_addr == b->addr.s_addr && a->plen == b->plen;
	return strcmp(a->domain, b->domain) == 0;
}

/* Parses line; checks the round trip. 1 if it is a rule. */
static int
rule(const char *line, struct nc_rule *r)
{
	struct nc_rule again;
	char err[NC_ERRLEN], text[300], text2[300];
	int n;

	memset(r, 0, sizeof(*r));
	err[0] = '\0';
	if (nc_rule_parse(line, r, err, sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();
		return 0;
	}
	if (r->port_lo > r->port_hi || (r->kind == NC_RULE_ADDR && r->plen > 32) ||
	    (r->kind != NC_RULE_ADDR && r->domain[0] == '\0'))
		abort();
	n = nc_rule_format(r, text, sizeof(text));
	if (n < 0 || (size_t)n >= sizeof(text))
		abort();
	memset(&again, 0, sizeof(again));
	if (nc_rule_parse(text, &again, err, sizeof(err)) != 0 || !same(r, &again))
		abort();
	nc_rule_format(&again, text2, sizeof(text2));
	if (strcmp(text, text2) != 0)
		abort();
	if (!px_rule_covers(r, r) || !px_rule_overlaps(r, r))
		abort();
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[3][512];
	struct nc_rule a, b;
	size_t i, k = 0, n = 0;
	int ra, rb;

	memset(buf, 0, sizeof(buf));
	for (i = 0; i < size && k < 3; i++) {
		if (data[i] == '\n') {
			k++;
			n = 0;
		} else if (n < sizeof(buf[0]) - 1) {
			buf[k][n++] = (char)data[i];
		}
	}
	ra = rule(buf[0], &a);
	rb = rule(buf[1], &b);
	if (ra && rb) {
		int ov = px_rule_overlaps(&a, &b);

		if (ov != px_rule_overlaps(&b, &a) ||
		    (px_rule_covers(&a, &b) && !ov) ||
		    (px_rule_covers(&b, &a) && !ov))
			abort();
	}
	{
		char err[NC_ERRLEN];
		const char *p = buf[2];
		unsigned __int128 v = 0, mult = 1000;
		uint64_t ms;
		enum nc_mode m;

		if (nc_duration_parse(buf[2], &ms, err, sizeof(err)) == 0) {
			while (*p >= '0' && *p <= '9')
				v = v * 10 + (unsigned)(*p++ - '0');
			if (strcmp(p, "ms") == 0)
				mult = 1;
			else if (strcmp(p, "m") == 0)
				mult = 60000;
			else if (strcmp(p, "h") == 0)
				mult = 3600000;
			else if (strcmp(p, "d") == 0)
				mult = 86400000;
			if (v == 0 || v * mult != ms)
				abort();
		}
		if (nc_mode_parse(buf[2], &m) == 0 &&
		    (strcmp(nc_mode_name(m), buf[2]) != 0 ||
		    px_mode_rank(buf[2]) < 0))
			abort();
	}
	return 0;
}
