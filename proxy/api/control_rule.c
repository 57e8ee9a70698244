/*
 * control_rule.c — see control_rule.h. The parser is libnetctl's
 * (netctl/nc_rule.c), linked as is, so there is one rule language in
 * berth and no second parser to drift from it.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control_rule.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t
mask(unsigned plen)
{
	return plen == 0 ? 0 : 0xffffffffU << (32 - plen);
}

/* 1 if name is exactly one label below domain. */
static int
one_below(const char *name, const char *domain)
{
	size_t n = strlen(name), d = strlen(domain);
	const char *dot;

	if (n <= d + 1 || name[n - d - 1] != '.' ||
	    strcmp(name + n - d, domain) != 0)
		return 0;
	dot = strchr(name, '.');
	return dot == name + n - d - 1;
}

static int
any_addr(const struct nc_rule *r)
{
	return r->kind == NC_RULE_ADDR && r->plen == 0;
}

int
px_rule_covers(const struct nc_rule *o, const struct nc_rule *i)
{
	uint32_t oa, ia;

	if (o->proto != NC_PROTO_ANY && o->proto != i->proto)
		return 0;
	if (i->port_lo < o->port_lo || i->port_hi > o->port_hi)
		return 0;
	if (any_addr(o))
		return 1;
	switch (o->kind) {
	case NC_RULE_ADDR:
		if (i->kind != NC_RULE_ADDR || i->plen < o->plen)
			return 0;
		oa = ntohl(o->addr.s_addr);
		ia = ntohl(i->addr.s_addr);
		return (ia & mask(o->plen)) == oa;
	case NC_RULE_DOMAIN:
		return i->kind == NC_RULE_DOMAIN &&
		    strcmp(o->domain, i->domain) == 0;
	case NC_RULE_WILDCARD:
		if (i->kind == NC_RULE_WILDCARD)
			return strcmp(o->domain, i->domain) == 0;
		return i->kind == NC_RULE_DOMAIN &&
		    one_below(i->domain, o->domain);
	}
	return 0;
}

int
px_rule_overlaps(const struct nc_rule *a, const struct nc_rule *b)
{
	uint32_t m;

	if (a->proto != NC_PROTO_ANY && b->proto != NC_PROTO_ANY &&
	    a->proto != b->proto)
		return 0;
	if (a->port_hi < b->port_lo || b->port_hi < a->port_lo)
		return 0;
	if (any_addr(a) || any_addr(b))
		return 1;
	if (a->kind == NC_RULE_ADDR || b->kind == NC_RULE_ADDR) {
		if (a->kind != b->kind)
			return 0;
		m = mask(a->plen < b->plen ? a->plen : b->plen);
		return (ntohl(a->addr.s_addr) & m) == (ntohl(b->addr.s_addr) & m);
	}
	if (a->kind == b->kind)
		return strcmp(a->domain, b->domain) == 0;
	if (a->kind == NC_RULE_WILDCARD)
		return one_below(b->domain, a->domain);
	return one_below(a->domain, b->domain);
}

/* The table's always-deny ranges before ops' additions; keep in step
 * with default_deny in netctl/nc_egress.c. */
static const struct {
	uint32_t net;
	unsigned plen;
	const char *text;
} always_deny[] = {
	{ 0x00000000, 8, "0.0.0.0/8" },
	{ 0x0a000000, 8, "10.0.0.0/8" },
	{ 0xac100000, 12, "172.16.0.0/12" },
	{ 0xc0a80000, 16, "192.168.0.0/16" },
	{ 0x64400000, 10, "100.64.0.0/10" },
	{ 0x7f000000, 8, "127.0.0.0/8" },
	{ 0xa9fe0000, 16, "169.254.0.0/16" },
	{ 0xc0000000, 24, "192.0.0.0/24" },
	{ 0xe0000000, 4, "224.0.0.0/4" },
	{ 0xf0000000, 4, "240.0.0.0/4" },
};

int
px_rule_always_denied(const struct nc_rule *r, char *range, size_t len)
{
	size_t i;

	if (r->kind != NC_RULE_ADDR || r->plen == 0)
		return 0;
	for (i = 0; i < sizeof(always_deny) / sizeof(always_deny[0]); i++)
		if (r->plen >= always_deny[i].plen &&
		    (ntohl(r->addr.s_addr) & mask(always_deny[i].plen)) ==
		    always_deny[i].net) {
			snprintf(range, len, "%s", always_deny[i].text);
			return 1;
		}
	return 0;
}

int
px_mode_rank(const char *m)
{
	if (m == NULL)
		return -1;
	if (strcmp(m, "closed") == 0)
		return 0;
	if (strcmp(m, "allowlist") == 0)
		return 1;
	if (strcmp(m, "open") == 0)
		return 2;
	return -1;
}
