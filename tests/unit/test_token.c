/*
 * test_token.c — tokens (proxy/api/token.c), and the egress rule relations
 * that keep agents inside ops' global policy (proxy/api/control_rule.c):
 * shape and hashing of tokens, constant-time lookup, rule coverage and
 * overlap, mode order. What each token may do is the route table's
 * (test_api_table.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "token.h"
#include "control_rule.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

static int
covers(const char *outer, const char *inner)
{
	struct nc_rule o, i;
	char err[256];

	if (px_rule_parse(outer, &o, err, sizeof(err)) < 0 ||
	    px_rule_parse(inner, &i, err, sizeof(err)) < 0) {
		diag("%s", err);
		return -1;
	}
	return px_rule_covers(&o, &i);
}

static int
overlaps(const char *a, const char *b)
{
	struct nc_rule x, y;
	char err[256];

	if (px_rule_parse(a, &x, err, sizeof(err)) < 0 ||
	    px_rule_parse(b, &y, err, sizeof(err)) < 0) {
		diag("%s", err);
		return -1;
	}
	return px_rule_overlaps(&x, &y) && px_rule_overlaps(&y, &x);
}

int
main(void)
{
	char tok[PX_TOKEN_LEN + 1], tok2[PX_TOKEN_LEN + 1], id[24], id2[24];
	char hex[65], err[256], canon[300];
	unsigned char d[PX_TOKEN_DIGEST_LEN], set[3][PX_TOKEN_DIGEST_LEN];
	struct nc_rule r;
	size_t i;
	int good = 1;

	/* shape */
	ok(px_token_generate(tok, id, err, sizeof(err)) == 0, "generate");
	is_int((long long)strlen(tok), PX_TOKEN_LEN, "49 characters");
	ok(strncmp(tok, "berth_", 6) == 0, "berth_ prefix: %s", tok);
	for (i = 6; i < strlen(tok); i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789-_", tok[i]))
			good = 0;
	ok(good, "base64url alphabet, no padding");
	ok(strncmp(id, "tok-", 4) == 0 && strlen(id) == 20, "id tok-<16 hex>: "
	    "%s", id);
	ok(px_token_well_formed(tok, strlen(tok)), "well formed");
	px_token_generate(tok2, id2, err, sizeof(err));
	ok(strcmp(tok, tok2) != 0 && strcmp(id, id2) != 0, "two differ");
	ok(!px_token_well_formed(tok, strlen(tok) - 1), "short refused");
	tok2[10] = '=';
	ok(!px_token_well_formed(tok2, strlen(tok2)), "'=' refused");
	ok(!px_token_well_formed("bearer_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	    49), "wrong prefix refused");

	/* hashing: SHA-256("abc") */
	px_token_hash_hex("abc", 3, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	    "SHA-256 hex");
	ok(px_token_hex_decode(hex, d) == 0 && d[0] == 0xba && d[31] == 0xad,
	    "hex decode");
	ok(px_token_hex_decode("zz", d) == -1, "bad hex refused");

	/* constant-time find */
	memset(set, 0, sizeof(set));
	px_token_digest("a", 1, set[0]);
	px_token_digest("b", 1, set[1]);
	px_token_digest("c", 1, set[2]);
	px_token_digest("b", 1, d);
	is_int(px_token_find(d, (const unsigned char (*)[32])set, 3), 1,
	    "finds the middle one");
	px_token_digest("x", 1, d);
	is_int(px_token_find(d, (const unsigned char (*)[32])set, 3), -1,
	    "unknown: -1");
	is_int(px_token_find(d, (const unsigned char (*)[32])set, 0), -1,
	    "empty set: -1");

	/* rules: canonical form through libnetctl's parser */
	ok(px_rule_parse("Example.COM:443/TCP", &r, err, sizeof(err)) == 0,
	    "parse");
	px_rule_format(&r, canon, sizeof(canon));
	is_str(canon, "example.com:443/tcp", "canonical text");
	ok(px_rule_parse("10.1.2.0/16", &r, err, sizeof(err)) < 0 &&
	    strstr(err, "host bits") != NULL, "error says why: %s", err);

	/* coverage */
	is_int(covers("*.github.com", "api.github.com:443/tcp"), 1,
	    "wildcard covers a name one label below");
	is_int(covers("*.github.com", "a.b.github.com"), 0,
	    "but not two labels below");
	is_int(covers("*.github.com", "github.com"), 0, "nor the parent");
	is_int(covers("example.com", "example.com:443"), 1, "name covers port");
	is_int(covers("example.com:443", "example.com"), 0,
	    "a port does not cover all ports");
	is_int(covers("example.com:8000-8100", "example.com:8080/udp"), 1,
	    "range covers port");
	is_int(covers("example.com/tcp", "example.com/udp"), 0,
	    "tcp does not cover udp");
	is_int(covers("10.0.0.0/8", "10.1.0.0/16"), 1, "CIDR covers CIDR");
	is_int(covers("10.1.0.0/16", "10.0.0.0/8"), 0, "not the wider one");
	is_int(covers("10.0.0.0/8", "11.0.0.1"), 0, "nor outside");
	is_int(covers(":443", "example.com:443"), 1, "any address covers names");
	is_int(covers("10.0.0.0/8", "example.com"), 0,
	    "addresses do not cover names");

	/* overlap */
	is_int(overlaps("10.0.0.0/8", "10.2.3.4"), 1, "CIDR overlaps address");
	is_int(overlaps("10.0.0.0/8", "192.168.0.0/16"), 0, "disjoint CIDRs");
	is_int(overlaps("example.com:443", "example.com:80"), 0,
	    "different ports");
	is_int(overlaps("*.evil.com", "x.evil.com"), 1, "wildcard overlaps");
	is_int(overlaps("evil.com/udp", "evil.com/tcp"), 0, "protocols");
	is_int(overlaps(":25", "mail.example.com:25"), 1, "any address, port 25");

	/* always-denied ranges (policy permit) */
	{
		static const struct {
			const char *rule, *range;
		} ad[] = {
			{ "10.1.0.0/16:443", "10.0.0.0/8" },
			{ "172.20.1.1", "172.16.0.0/12" },
			{ "169.254.169.254:80/tcp", "169.254.0.0/16" },
			{ "100.64.0.0/10", "100.64.0.0/10" },
			{ "127.0.0.1", "127.0.0.0/8" },
			{ "239.1.2.3/udp", "224.0.0.0/4" },
			{ "8.8.8.8", NULL },
			{ "0.0.0.0/0:443", NULL },	/* any address */
			{ "8.0.0.0/6", NULL },		/* partly private */
			{ "172.32.0.1", NULL },
			{ "example.com", NULL },
		};
		struct nc_rule ar;
		char aerr[256], range[32];
		size_t k;

		for (k = 0; k < sizeof(ad) / sizeof(ad[0]); k++) {
			int got;

			range[0] = '\0';
			px_rule_parse(ad[k].rule, &ar, aerr, sizeof(aerr));
			got = px_rule_always_denied(&ar, range, sizeof(range));
			if (ad[k].range != NULL)
				ok(got == 1 && strcmp(range, ad[k].range) == 0,
				    "%s lies in always-denied %s (%s)",
				    ad[k].rule, ad[k].range, range);
			else
				ok(got == 0, "%s is not an always-denied range",
				    ad[k].rule);
		}
	}

	/* modes */
	ok(px_mode_rank("closed") < px_mode_rank("allowlist") &&
	    px_mode_rank("allowlist") < px_mode_rank("open"), "mode order");
	is_int(px_mode_rank("wide"), -1, "unknown mode");
	return done_testing();
}
