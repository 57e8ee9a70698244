/*
 * test_nc_rule.c — the egress rule language (nc_rule_parse/format),
 * durations and mode names: every accepted form round-trips to its
 * canonical text, and every refused form says precisely why.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <string.h>

#include "netctl.h"
#include "tap.h"

static const struct {
	const char *in, *canon;
	enum nc_rule_kind kind;
	int proto, lo, hi;
} good[] = {
	{ "example.com", "example.com", NC_RULE_DOMAIN, 0, 0, 65535 },
	{ "Example.COM.", "example.com", NC_RULE_DOMAIN, 0, 0, 65535 },
	{ "*.example.com", "*.example.com", NC_RULE_WILDCARD, 0, 0, 65535 },
	{ "api.example.com:443", "api.example.com:443", NC_RULE_DOMAIN, 0,
	  443, 443 },
	{ "*.pypi.org:443/tcp", "*.pypi.org:443/tcp", NC_RULE_WILDCARD, 6,
	  443, 443 },
	{ "1.2.3.4", "1.2.3.4", NC_RULE_ADDR, 0, 0, 65535 },
	{ "1.2.3.4/32", "1.2.3.4", NC_RULE_ADDR, 0, 0, 65535 },
	{ "10.1.0.0/16", "10.1.0.0/16", NC_RULE_ADDR, 0, 0, 65535 },
	{ "10.1.0.0/16:8000-8100", "10.1.0.0/16:8000-8100", NC_RULE_ADDR, 0,
	  8000, 8100 },
	{ "10.1.0.0/16:53/udp", "10.1.0.0/16:53/udp", NC_RULE_ADDR, 17, 53,
	  53 },
	{ "1.2.3.4/TCP", "1.2.3.4/tcp", NC_RULE_ADDR, 6, 0, 65535 },
	{ ":443", ":443", NC_RULE_ADDR, 0, 443, 443 },
	{ "/udp", "/udp", NC_RULE_ADDR, 17, 0, 65535 },
	{ "0.0.0.0/0", "0.0.0.0/0", NC_RULE_ADDR, 0, 0, 65535 },
	{ "  3com.com  ", "3com.com", NC_RULE_DOMAIN, 0, 0, 65535 },
	{ "xn--bcher-kva.example", "xn--bcher-kva.example", NC_RULE_DOMAIN, 0,
	  0, 65535 },
	{ "1.2.3.4:1-65535", "1.2.3.4:1-65535", NC_RULE_ADDR, 0, 1, 65535 },
};

static const struct {
	const char *in, *why;
} bad[] = {
	{ "", "empty rule" },
	{ "   ", "empty rule" },
	{ "a b.com", "space inside" },
	{ "10.1.2.0/16", "host bits set; did you mean 10.1.0.0/16?" },
	{ "10.1.0.0/33", "prefix length /33 out of range 0-32" },
	{ "1.2.3", "four parts" },
	{ "1.2.3.4.5", "four parts" },
	{ "1.2.3.256", "out of range 0-255" },
	{ "01.2.3.4", "leading zero" },
	{ "1..3.4", "empty part" },
	{ "example.com:0", "port 0 out of range 1-65535" },
	{ "example.com:70000", "port 70000 out of range" },
	{ "example.com:", "':' must be followed by a port" },
	{ "example.com:9000-8000", "ends before it starts" },
	{ "example.com:8000-", "range needs an end" },
	{ "example.com/icmp", "unknown protocol 'icmp' (tcp or udp)" },
	{ "example.com/", "'/' must be followed by tcp or udp" },
	{ "example.com/24", "a prefix length needs an address, not a name" },
	{ "/24", "needs an address before it" },
	{ "1.2.3.4:443/16", "prefix length must come right after" },
	{ "example.com:443x", "unexpected 'x' at column 16" },
	{ "*example.com", "a wildcard is written *.example.com" },
	{ "foo.*.com", "'*' is only allowed as the whole first label" },
	{ "localhost", "at least two labels" },
	{ "a..b", "empty label" },
	{ "-a.com", "starts or ends with '-'" },
	{ "a-.com", "starts or ends with '-'" },
	{ "_dmarc.example.com", "'_' is not allowed" },
	{ "exa!mple.com", "only letters, digits" },
	{ "2001:db8::1", "IPv6 is not supported" },
	{ "[2001:db8::1]:443", "IPv6 is not supported" },
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	  "label longer than 63" },
};

int
main(void)
{
	char err[NC_ERRLEN], buf[300];
	struct nc_rule r, r2;
	uint64_t ms;
	enum nc_mode m;
	size_t i;
	int ret;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		err[0] = '\0';
		ret = nc_rule_parse(good[i].in, &r, err, sizeof(err));
		if (!ok(ret == 0, "parse '%s'", good[i].in)) {
			diag("%s", err);
			continue;
		}
		nc_rule_format(&r, buf, sizeof(buf));
		is_str(buf, good[i].canon, "'%s' formats as '%s'", good[i].in,
		    good[i].canon);
		ok(r.kind == good[i].kind && (int)r.proto == good[i].proto &&
		    r.port_lo == good[i].lo && r.port_hi == good[i].hi,
		    "'%s': kind, protocol and ports", good[i].in);
		ok(nc_rule_parse(buf, &r2, err, sizeof(err)) == 0 &&
		    memcmp(&r, &r2, sizeof(r)) == 0,
		    "'%s' round-trips", buf);
	}
	nc_rule_parse("10.1.0.0/16", &r, err, sizeof(err));
	ok(r.addr.s_addr == htonl(0x0a010000) && r.plen == 16,
	    "10.1.0.0/16: address in network order, plen 16");
	nc_rule_parse("*.Example.com", &r, err, sizeof(err));
	is_str(r.domain, "example.com", "wildcard keeps the parent, lower case");
	nc_rule_parse(":443", &r, err, sizeof(err));
	ok(r.kind == NC_RULE_ADDR && r.plen == 0 && r.addr.s_addr == 0,
	    "':443' means any address");

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ret = nc_rule_parse(bad[i].in, &r, err, sizeof(err));
		ok(ret < 0 && strstr(err, bad[i].why) != NULL,
		    "refuse '%s': %s", bad[i].in, bad[i].why);
		if (ret >= 0 || strstr(err, bad[i].why) == NULL)
			diag("error was: %s", err);
	}
	nc_rule_parse("10.1.2.0/16", &r, err, sizeof(err));
	ok(strncmp(err, "rule '10.1.2.0/16': ", 20) == 0,
	    "errors quote the rule first");
	ok(nc_rule_parse(NULL, &r, err, sizeof(err)) < 0, "NULL is refused");
	ok(nc_rule_parse("x.com", &r, NULL, 0) == 0 &&
	    nc_rule_parse("x", &r, NULL, 0) < 0, "no error buffer is fine");

	ok(nc_duration_parse("10m", &ms, err, sizeof(err)) == 0 &&
	    ms == 600000, "10m = 600000 ms");
	ok(nc_duration_parse("90", &ms, err, sizeof(err)) == 0 &&
	    ms == 90000, "bare 90 = 90 s");
	ok(nc_duration_parse("500ms", &ms, err, sizeof(err)) == 0 &&
	    ms == 500, "500ms");
	ok(nc_duration_parse("2h", &ms, err, sizeof(err)) == 0 &&
	    ms == 7200000, "2h");
	ok(nc_duration_parse("1d", &ms, err, sizeof(err)) == 0 &&
	    ms == 86400000, "1d");
	ok(nc_duration_parse("10x", &ms, err, sizeof(err)) < 0 &&
	    strstr(err, "unknown unit 'x'") != NULL, "10x: unknown unit");
	ok(nc_duration_parse("0s", &ms, err, sizeof(err)) < 0 &&
	    strstr(err, "more than zero") != NULL, "0s refused");
	ok(nc_duration_parse("m", &ms, err, sizeof(err)) < 0,
	    "no number refused");
	ok(nc_duration_parse("99999999999999999999d", &ms, err,
	    sizeof(err)) < 0 && strstr(err, "too long") != NULL,
	    "overflow refused");

	ok(nc_mode_parse("allowlist", &m) == 0 && m == NC_MODE_ALLOWLIST &&
	    strcmp(nc_mode_name(m), "allowlist") == 0, "mode allowlist");
	ok(nc_mode_parse("open", &m) == 0 && m == NC_MODE_OPEN, "mode open");
	ok(nc_mode_parse("closed", &m) == 0 && m == NC_MODE_CLOSED,
	    "mode closed");
	ok(nc_mode_parse("deny", &m) < 0, "mode 'deny' refused");
	return done_testing();
}
