/*
 * nc_rule.c — the egress rule language of issue 5, parsed into struct
 * nc_rule: a destination (name, "*." wildcard name, IPv4 address or CIDR,
 * or nothing = any address), then optional ":port" / ":lo-hi" and
 * "/tcp" / "/udp". Errors quote the rule and say which part is wrong;
 * they are shown to agents, so they suggest the fix when there is one.
 * Domain rules are returned as such: the DNS resolver turns them into
 * addresses later. Also durations ("10m") and mode names.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "netctl.h"
#include "nc_nft.h"
#include <stdarg.h>

/* Lives here, not in nc_nft.c: the rule parser is used without the
 * nftables code (berthd's control API validates rules with it). */
int
nc_errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -1;
}


/* Parse a decimal number of at most maxdig digits; returns chars used. */
static size_t
num(const char *s, size_t maxdig, unsigned long *v)
{
	size_t i = 0;

	*v = 0;
	while (isdigit((unsigned char)s[i]) && i < maxdig + 1) {
		*v = *v * 10 + (unsigned long)(s[i] - '0');
		i++;
	}
	return i;
}

static int
parse_ipv4(const char *s, size_t n, uint32_t *out, const char **why)
{
	unsigned long part;
	uint32_t a = 0;
	size_t i = 0, used;
	int k;

	for (k = 0; k < 4; k++) {
		if (k > 0) {
			if (i >= n || s[i] != '.') {
				*why = "an IPv4 address has four parts";
				return -1;
			}
			i++;
		}
		if (i >= n || !isdigit((unsigned char)s[i])) {
			*why = k < 3 && i >= n ?
			    "an IPv4 address has four parts" :
			    "empty part in IPv4 address";
			return -1;
		}
		used = num(s + i, 3, &part);
		if (used > 3 || part > 255) {
			*why = "IPv4 address part out of range 0-255";
			return -1;
		}
		if (used > 1 && s[i] == '0') {
			*why = "leading zero in IPv4 address part "
			    "(octal is not supported)";
			return -1;
		}
		i += used;
		a = a << 8 | (uint32_t)part;
	}
	if (i != n) {
		*why = "an IPv4 address has four parts";
		return -1;
	}
	*out = a;
	return 0;
}

static int
valid_domain(char *d, const char **why)
{
	size_t len = strlen(d), lab = 0, i;
	int labels = 0, alldigits = 1;

	if (len == 0) {
		*why = "empty name";
		return -1;
	}
	if (len > 253) {
		*why = "name longer than 253 characters";
		return -1;
	}
	for (i = 0; i <= len; i++) {
		char c = d[i];

		if (c == '.' || c == '\0') {
			if (lab == 0) {
				*why = "empty label (two dots in a row, or a "
				    "leading dot)";
				return -1;
			}
			if (d[i - 1] == '-' || d[i - lab] == '-') {
				*why = "a label starts or ends with '-'";
				return -1;
			}
			labels++;
			lab = 0;
			continue;
		}
		if (++lab > 63) {
			*why = "label longer than 63 characters";
			return -1;
		}
		d[i] = (char)tolower((unsigned char)c);
		if (!isalnum((unsigned char)c) && c != '-') {
			*why = c == '_' ? "'_' is not allowed in host names" :
			    c == '*' ? "'*' is only allowed as the whole "
			    "first label, as in *.example.com" :
			    "only letters, digits, '-' and '.' are allowed "
			    "in names";
			return -1;
		}
		if (!isdigit((unsigned char)c))
			alldigits = 0;
	}
	if (labels < 2) {
		*why = "a name needs at least two labels (example.com)";
		return -1;
	}
	if (alldigits) {
		*why = "looks like an IPv4 address but is not one";
		return -1;
	}
	return 0;
}

int
nc_rule_parse(const char *text, struct nc_rule *out, char *err,
    size_t errlen)
{
	const char *s, *e, *p, *why = NULL;
	char host[256];
	size_t hl, used;
	unsigned long v, v2;
	uint32_t a, mask;
	int colons = 0, have_plen = 0;
	unsigned long plen = 32;

	memset(out, 0, sizeof(*out));
	out->port_lo = 0;
	out->port_hi = 65535;
	if (text == NULL)
		text = "";
	for (s = text; isspace((unsigned char)*s); s++)
		;
	for (e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
		;
	if (s == e)
		return nc_errf(err, errlen, "empty rule"), -EINVAL;
	for (p = s; p < e; p++) {
		if (isspace((unsigned char)*p))
			return nc_errf(err, errlen, "rule '%.*s': space inside "
			    "a rule (one rule per argument)", (int)(e - s), s),
			    -EINVAL;
		if (*p == ':')
			colons++;
	}
#define FAIL(...) do {							\
		char m_[640];						\
		snprintf(m_, sizeof(m_), __VA_ARGS__);			\
		nc_errf(err, errlen, "rule '%.*s': %s", (int)(e - s), s, m_); \
		return -EINVAL;						\
	} while (0)
	if (colons > 1 || *s == '[')
		FAIL("IPv6 is not supported (sandboxes have no IPv6)");

	/* destination */
	for (p = s; p < e && *p != ':' && *p != '/'; p++)
		;
	hl = (size_t)(p - s);
	if (hl >= sizeof(host))
		FAIL("name longer than 253 characters");
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (hl > 1 && host[hl - 1] == '.' &&
	    strspn(host, "0123456789.") != hl)
		host[--hl] = '\0';	/* "example.com." */

	if (hl == 0) {
		out->kind = NC_RULE_ADDR;
		out->plen = 0;
		if (p < e && *p == '/' && isdigit((unsigned char)p[1]))
			FAIL("a prefix length needs an address before it, "
			    "as in 10.1.0.0/16");
	} else if (strspn(host, "0123456789.") == hl) {
		if (parse_ipv4(host, hl, &a, &why) < 0)
			FAIL("'%s': %s", host, why);
		out->kind = NC_RULE_ADDR;
		if (p < e && *p == '/' && isdigit((unsigned char)p[1])) {
			used = num(p + 1, 2, &plen);
			if (used > 2 || plen > 32)
				FAIL("prefix length /%.*s out of range 0-32",
				    (int)used, p + 1);
			p += 1 + used;
			have_plen = 1;
		}
		mask = plen == 0 ? 0 : 0xffffffffU << (32 - plen);
		if (a & ~mask) {
			struct in_addr na;
			char buf[INET_ADDRSTRLEN];

			na.s_addr = htonl(a & mask);
			inet_ntop(AF_INET, &na, buf, sizeof(buf));
			FAIL("%s/%lu has host bits set; did you mean %s/%lu?",
			    host, plen, buf, plen);
		}
		out->addr.s_addr = htonl(a);
		out->plen = (uint8_t)plen;
		(void)have_plen;
	} else {
		char *d = host;

		out->kind = NC_RULE_DOMAIN;
		if (d[0] == '*') {
			if (d[1] != '.')
				FAIL("a wildcard is written *.example.com");
			d += 2;
			out->kind = NC_RULE_WILDCARD;
		}
		if (valid_domain(d, &why) < 0)
			FAIL("'%s': %s", host, why);
		if (p < e && *p == '/' && isdigit((unsigned char)p[1]))
			FAIL("a prefix length needs an address, not a name");
		memcpy(out->domain, d, strlen(d) + 1);	/* <= 253 */
	}

	/* ports */
	if (p < e && *p == ':') {
		p++;
		if (p >= e || !isdigit((unsigned char)*p))
			FAIL("':' must be followed by a port or a range "
			    "like 8000-8100");
		used = num(p, 5, &v);
		if (used > 5 || v > 65535 || v == 0)
			FAIL("port %.*s out of range 1-65535", (int)used, p);
		p += used;
		v2 = v;
		if (p < e && *p == '-') {
			p++;
			if (p >= e || !isdigit((unsigned char)*p))
				FAIL("port range needs an end, as in 8000-8100");
			used = num(p, 5, &v2);
			if (used > 5 || v2 > 65535 || v2 == 0)
				FAIL("port %.*s out of range 1-65535",
				    (int)used, p);
			if (v2 < v)
				FAIL("port range %lu-%lu ends before it starts",
				    v, v2);
			p += used;
		}
		out->port_lo = (uint16_t)v;
		out->port_hi = (uint16_t)v2;
	}

	/* protocol */
	if (p < e && *p == '/') {
		const char *q = ++p;

		while (p < e && isalnum((unsigned char)*p))
			p++;
		if (p - q == 3 && strncasecmp(q, "tcp", 3) == 0)
			out->proto = NC_PROTO_TCP;
		else if (p - q == 3 && strncasecmp(q, "udp", 3) == 0)
			out->proto = NC_PROTO_UDP;
		else if (p == q)
			FAIL("'/' must be followed by tcp or udp");
		else if (isdigit((unsigned char)*q))
			FAIL("prefix length must come right after the "
			    "address, before the port");
		else
			FAIL("unknown protocol '%.*s' (tcp or udp)",
			    (int)(p - q), q);
	}
	if (p < e)
		FAIL("unexpected '%c' at column %d", *p, (int)(p - s) + 1);
#undef FAIL
	return 0;
}

int
nc_rule_format(const struct nc_rule *r, char *buf, size_t len)
{
	char host[272] = "", ports[16] = "";
	char a[INET_ADDRSTRLEN];
	int any_port = r->port_lo == 0 && r->port_hi == 65535;

	switch (r->kind) {
	case NC_RULE_ADDR:
		inet_ntop(AF_INET, &r->addr, a, sizeof(a));
		if (r->plen == 32)
			snprintf(host, sizeof(host), "%s", a);
		else if (r->plen != 0 || r->addr.s_addr != 0 ||
		    (any_port && r->proto == NC_PROTO_ANY))
			snprintf(host, sizeof(host), "%s/%u", a, r->plen);
		break;
	case NC_RULE_DOMAIN:
		snprintf(host, sizeof(host), "%s", r->domain);
		break;
	case NC_RULE_WILDCARD:
		snprintf(host, sizeof(host), "*.%s", r->domain);
		break;
	}
	if (!any_port) {
		if (r->port_lo == r->port_hi)
			snprintf(ports, sizeof(ports), ":%u", r->port_lo);
		else
			snprintf(ports, sizeof(ports), ":%u-%u", r->port_lo,
			    r->port_hi);
	}
	return snprintf(buf, len, "%s%s%s", host, ports,
	    r->proto == NC_PROTO_TCP ? "/tcp" :
	    r->proto == NC_PROTO_UDP ? "/udp" : "");
}

int
nc_duration_parse(const char *text, uint64_t *ms, char *err, size_t errlen)
{
	const char *p = text;
	uint64_t v = 0, mult;

	if (text == NULL || !isdigit((unsigned char)*p))
		return nc_errf(err, errlen, "duration '%s': expected a number "
		    "and a unit, as in 90s, 10m, 2h, 1d", text ? text : ""),
		    -EINVAL;
	while (isdigit((unsigned char)*p)) {
		if (v > UINT64_MAX / 10 / 1000 / 86400)
			return nc_errf(err, errlen, "duration '%s': too long",
			    text), -ERANGE;
		v = v * 10 + (uint64_t)(*p++ - '0');
	}
	if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (*p == '\0' || strcmp(p, "s") == 0)
		mult = 1000;
	else if (strcmp(p, "m") == 0)
		mult = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		mult = 3600 * 1000;
	else if (strcmp(p, "d") == 0)
		mult = 86400 * 1000;
	else
		return nc_errf(err, errlen, "duration '%s': unknown unit "
		    "'%s' (ms, s, m, h or d)", text, p), -EINVAL;
	if (v == 0)
		return nc_errf(err, errlen, "duration '%s': must be more "
		    "than zero", text), -EINVAL;
	if (v > UINT64_MAX / mult)	/* the digit loop's bound is for ms */
		return nc_errf(err, errlen, "duration '%s': too long",
		    text), -ERANGE;
	*ms = v * mult;
	return 0;
}

const char *
nc_mode_name(enum nc_mode m)
{
	switch (m) {
	case NC_MODE_OPEN:
		return "open";
	case NC_MODE_ALLOWLIST:
		return "allowlist";
	case NC_MODE_CLOSED:
		return "closed";
	}
	return "?";
}

int
nc_mode_parse(const char *s, enum nc_mode *m)
{
	if (strcmp(s, "open") == 0)
		*m = NC_MODE_OPEN;
	else if (strcmp(s, "allowlist") == 0)
		*m = NC_MODE_ALLOWLIST;
	else if (strcmp(s, "closed") == 0)
		*m = NC_MODE_CLOSED;
	else
		return -EINVAL;
	return 0;
}
