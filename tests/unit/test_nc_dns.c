/*
 * test_nc_dns.c — the wire and policy pieces of libnetctl's filtering
 * resolver, without sockets: name decompression and its attacks
 * (pointer loops, forward pointers, oversized names and labels,
 * truncation), strict query parsing, upstream answer parsing and CNAME
 * chain selection, the builder (compression, truncation to TC), rule
 * matching and the allow/deny decision, TTL clamping, and the learned-
 * address bookkeeping a re-apply of a sandbox puts back from.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include "netctl.h"
#include "nc_dns.h"
#include "tap.h"

/* ---- message crafting ---- */

struct msg {
	uint8_t b[4096];
	size_t n;
};

static void
m_bytes(struct msg *m, const void *p, size_t n)
{
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void
m_16(struct msg *m, uint16_t v)
{
	m->b[m->n++] = (uint8_t)(v >> 8);
	m->b[m->n++] = (uint8_t)v;
}

static void
m_32(struct msg *m, uint32_t v)
{
	m_16(m, (uint16_t)(v >> 16));
	m_16(m, (uint16_t)v);
}

/* "www.example.com" -> labels, root */
static void
m_name(struct msg *m, const char *s)
{
	const char *dot;

	while (*s) {
		size_t l;

		dot = strchr(s, '.');
		l = dot ? (size_t)(dot - s) : strlen(s);
		m->b[m->n++] = (uint8_t)l;
		m_bytes(m, s, l);
		s += l;
		if (*s == '.')
			s++;
	}
	m->b[m->n++] = 0;
}

static void
m_ptr(struct msg *m, size_t off)
{
	m_16(m, (uint16_t)(0xc000 | off));
}

static void
m_hdr(struct msg *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
    uint16_t ns, uint16_t ar)
{
	m->n = 0;
	m_16(m, id);
	m_16(m, flags);
	m_16(m, qd);
	m_16(m, an);
	m_16(m, ns);
	m_16(m, ar);
}

static void
wire(const char *s, uint8_t *out, size_t *len)
{
	struct msg m;

	m.n = 0;
	m_name(&m, s);
	memcpy(out, m.b, m.n);
	*len = m.n;
}

static const char *
text(const uint8_t *w)
{
	static char buf[NC_DNS_TEXT_MAX];

	nc_dns_name_text(w, buf, sizeof(buf));
	return buf;
}

/* ---- names ---- */

static void
test_names(void)
{
	struct msg m;
	uint8_t out[NC_DNS_NAME_MAX + 1];
	size_t off, len, i, q2;

	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_name(&m, "WWW.Example.com");
	q2 = m.n;
	m_bytes(&m, "\3api", 4);
	m_ptr(&m, 16);			/* -> "Example.com" */
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), 0, "plain name");
	is_int((long long)off, (long long)q2, "offset moves past it");
	is_str(text(out), "www.example.com", "text is lower case");
	off = q2;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), 0,
	    "label + compression pointer");
	is_str(text(out), "api.example.com", "pointer followed");
	is_int((long long)off, (long long)m.n, "offset ends after pointer");

	/* pointer to itself */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_ptr(&m, 12);
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -ELOOP,
	    "pointer to itself: loop refused");
	/* two pointers pointing at each other */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_ptr(&m, 14);
	m_ptr(&m, 12);
	off = 14;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -ELOOP,
	    "two-pointer loop refused");
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -ELOOP,
	    "forward pointer refused");
	/* label that points back into a label chain that loops */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_bytes(&m, "\1a", 2);
	m_ptr(&m, 12);
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -ELOOP,
	    "label then pointer back to its start: loop refused");

	/* reserved label types */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m.b[m.n++] = 0x41;
	m_bytes(&m, "x", 1);
	m.b[m.n++] = 0;
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EINVAL,
	    "label type 0x40 refused");
	m.b[12] = 0x80;
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EINVAL,
	    "label type 0x80 refused");

	/* truncation */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_bytes(&m, "\7exam", 5);
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EBADMSG,
	    "label cut by the end of the message");
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_bytes(&m, "\3www", 4);
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EBADMSG,
	    "name without its root label");
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m.b[m.n++] = 0xc0;
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EBADMSG,
	    "pointer missing its second byte");

	/* too long: 4 x 63-byte labels = 256 + root */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	for (i = 0; i < 4; i++) {
		m.b[m.n++] = 63;
		memset(m.b + m.n, 'a', 63);
		m.n += 63;
	}
	m.b[m.n++] = 0;
	off = 12;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EMSGSIZE,
	    "name over 255 bytes refused");
	/* too long only once pointers are followed */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	for (i = 0; i < 3; i++) {
		m.b[m.n++] = 63;
		memset(m.b + m.n, 'b', 63);
		m.n += 63;
	}
	m.b[m.n++] = 0;			/* 193 bytes at 12 */
	q2 = m.n;
	m.b[m.n++] = 63;
	memset(m.b + m.n, 'c', 63);
	m.n += 63;
	m_ptr(&m, 12);
	off = q2;
	is_int(nc_dns_name_read(m.b, m.n, &off, out, &len), -EMSGSIZE,
	    "name over 255 bytes through a pointer refused");
	/* exactly 255 is fine: 3x63 + 61 labels */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	for (i = 0; i < 3; i++) {
		m.b[m.n++] = 63;
		memset(m.b + m.n, 'd', 63);
		m.n += 63;
	}
	m.b[m.n++] = 61;
	memset(m.b + m.n, 'e', 61);
	m.n += 61;
	m.b[m.n++] = 0;
	off = 12;
	ok(nc_dns_name_read(m.b, m.n, &off, out, &len) == 0 && len == 255,
	    "name of exactly 255 bytes accepted");

	/* text form */
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	m_bytes(&m, "\5a.b\\c\3com\0", 11);
	m.b[14] = 0x01;
	{
		char buf[NC_DNS_TEXT_MAX];
		int clean;

		off = 12;
		nc_dns_name_read(m.b, m.n, &off, out, &len);
		clean = nc_dns_name_text(out, buf, sizeof(buf));
		ok(clean == 0, "odd bytes make a name unclean");
		is_str(buf, "a\\001b\\\\c.com", "odd bytes escaped");
		out[0] = 0;
		ok(nc_dns_name_text(out, buf, sizeof(buf)) == 0 &&
		    strcmp(buf, ".") == 0, "root is '.' and unclean");
	}
}

/* ---- rules ---- */

static struct nc_rule
rule(const char *s)
{
	struct nc_rule r;
	char err[NC_ERRLEN];

	if (nc_rule_parse(s, &r, err, sizeof(err)) < 0)
		diag("rule %s: %s", s, err);
	return r;
}

static void
test_rules(void)
{
	struct nc_rule ex = rule("example.com"), wc = rule("*.example.com"),
	    ad = rule("1.2.3.4");
	struct nc_rule allow[2], deny[1];
	const char *why = NULL;

	ok(nc_dns_name_match("example.com", &ex), "exact rule: the name");
	ok(!nc_dns_name_match("www.example.com", &ex),
	    "exact rule: not a subdomain");
	ok(!nc_dns_name_match("example.com.evil", &ex) &&
	    !nc_dns_name_match("xexample.com", &ex),
	    "exact rule: no prefix or suffix tricks");
	ok(nc_dns_name_match("www.example.com", &wc),
	    "wildcard: one label below");
	ok(!nc_dns_name_match("a.b.example.com", &wc),
	    "wildcard: not two labels below");
	ok(!nc_dns_name_match("example.com", &wc),
	    "wildcard: not the apex");
	ok(!nc_dns_name_match("wwwexample.com", &wc) &&
	    !nc_dns_name_match(".example.com", &wc),
	    "wildcard: label boundary required");
	ok(!nc_dns_name_match("1.2.3.4", &ad), "address rules match no name");

	allow[0] = ex;
	allow[1] = wc;
	deny[0] = rule("bad.example.com");
	ok(nc_dns_decide(NC_MODE_ALLOWLIST, allow, 2, deny, 1,
	    "www.example.com", 1, &why), "allowlist: wildcard allows");
	ok(!nc_dns_decide(NC_MODE_ALLOWLIST, allow, 2, deny, 1,
	    "bad.example.com", 1, &why) && strcmp(why, "deny-rule") == 0,
	    "deny beats allow");
	ok(!nc_dns_decide(NC_MODE_ALLOWLIST, allow, 2, deny, 1,
	    "other.test", 1, &why) && strcmp(why, "not-allowed") == 0,
	    "allowlist: others not allowed");
	ok(nc_dns_decide(NC_MODE_OPEN, NULL, 0, deny, 1, "other.test", 1,
	    &why), "open: anything");
	ok(!nc_dns_decide(NC_MODE_OPEN, NULL, 0, deny, 1, "bad.example.com",
	    1, &why), "open: deny rules still apply");
	ok(!nc_dns_decide(NC_MODE_CLOSED, allow, 2, NULL, 0, "example.com",
	    1, &why) && strcmp(why, "closed") == 0, "closed: nothing");
	ok(!nc_dns_decide(NC_MODE_OPEN, NULL, 0, NULL, 0, "a\\.b.com", 0,
	    &why) && strcmp(why, "bad-name") == 0,
	    "unclean names denied even in open mode");

	is_int(nc_dns_ttl_clamp(0, 5, 3600), 5, "TTL below min raised");
	is_int(nc_dns_ttl_clamp(86400, 5, 3600), 3600, "TTL above max cut");
	is_int(nc_dns_ttl_clamp(300, 5, 3600), 300, "TTL in range kept");
	is_int(nc_dns_ttl_clamp(0x80000001U, 5, 3600), 5,
	    "TTL with the high bit is zero (RFC 2181)");
}

/* ---- queries ---- */

static void
q_build(struct msg *m, uint16_t flags, const char *name, uint16_t type,
    uint16_t cls, int edns)
{
	m_hdr(m, 0x1234, flags, 1, 0, 0, edns ? 1 : 0);
	m_name(m, name);
	m_16(m, type);
	m_16(m, cls);
	if (edns) {
		m->b[m->n++] = 0;
		m_16(m, NC_DNS_T_OPT);
		m_16(m, 4096);
		m_32(m, 0);
		m_16(m, 0);
	}
}

static void
test_queries(void)
{
	struct nc_dns_query q;
	struct msg m;

	q_build(&m, 0x0100, "Allowed.Test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	ok(nc_dns_query_parse(m.b, m.n, &q) == 0 && q.id == 0x1234 &&
	    q.qtype == NC_DNS_T_A && !q.edns &&
	    strcmp(text(q.qname), "allowed.test") == 0, "A query parsed");
	ok(memcmp(q.qname, "\7Allowed", 8) == 0,
	    "the question keeps its case (echoed to 0x20 clients)");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 1);
	ok(nc_dns_query_parse(m.b, m.n, &q) == 0 && q.edns &&
	    q.edns_size == 4096, "EDNS query parsed with its size");
	is_int(nc_dns_query_parse(m.b, 11, &q), -1, "no header: dropped");
	q_build(&m, 0x8100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	is_int(nc_dns_query_parse(m.b, m.n, &q), -1,
	    "a response (QR) is dropped, never answered");
	q_build(&m, 0x2800, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_NOTIMP,
	    "UPDATE opcode: NOTIMP");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	m.b[5] = 2;
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_FORMERR,
	    "two questions: FORMERR");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	m.b[7] = 1;
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_FORMERR,
	    "answer records in a query: FORMERR");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	m.b[m.n++] = 0;
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_FORMERR,
	    "trailing byte: FORMERR");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 0);
	is_int(nc_dns_query_parse(m.b, m.n - 3, &q), NC_DNS_FORMERR,
	    "question cut short: FORMERR");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_ANY, NC_DNS_C_IN, 0);
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_NOTIMP, "ANY: NOTIMP");
	q_build(&m, 0x0100, "allowed.test", 252, NC_DNS_C_IN, 0);
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_NOTIMP,
	    "AXFR: NOTIMP");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_TXT, 3, 0);
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_REFUSED,
	    "class CH: REFUSED");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 1);
	m.b[m.n - 10] = NC_DNS_T_TXT;	/* the OPT becomes a TXT */
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_FORMERR,
	    "additional record other than OPT: FORMERR");
	q_build(&m, 0x0100, "allowed.test", NC_DNS_T_A, NC_DNS_C_IN, 1);
	m.b[m.n - 1] = 5;		/* OPT rdata runs past the end */
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_FORMERR,
	    "OPT rdata past the end: FORMERR");
	m_hdr(&m, 9, 0x0100, 1, 0, 0, 0);
	m_ptr(&m, 12);
	m_16(&m, 1);
	m_16(&m, 1);
	is_int(nc_dns_query_parse(m.b, m.n, &q), NC_DNS_FORMERR,
	    "question name that loops: FORMERR");
}

/* ---- answers ---- */

/* An upstream answer to "www.allowed.test A": CNAME to edge.cdn.test,
 * two A records there, a stray A record for another name, an MX whose
 * exchange is compressed. */
static size_t
answer_msg(struct msg *m, uint16_t id)
{
	size_t qoff = 12, cnoff;

	m_hdr(m, id, 0x8180, 1, 5, 0, 0);
	m_name(m, "www.allowed.test");
	m_16(m, NC_DNS_T_A);
	m_16(m, 1);
	m_ptr(m, qoff);			/* www.allowed.test CNAME */
	m_16(m, NC_DNS_T_CNAME);
	m_16(m, 1);
	m_32(m, 600);
	m_16(m, 11);
	cnoff = m->n;			/* "edge.cdn" + pointer to "test" */
	m_bytes(m, "\4edge\3cdn", 9);
	m_ptr(m, qoff + 12);
	m_ptr(m, cnoff);		/* edge.cdn.test A 203.0.113.10 */
	m_16(m, NC_DNS_T_A);
	m_16(m, 1);
	m_32(m, 30);
	m_16(m, 4);
	m_bytes(m, "\313\0\161\12", 4);
	m_ptr(m, cnoff);		/* edge.cdn.test A 203.0.113.11 */
	m_16(m, NC_DNS_T_A);
	m_16(m, 1);
	m_32(m, 20);
	m_16(m, 4);
	m_bytes(m, "\313\0\161\13", 4);
	m_name(m, "stray.test");	/* not in the chain */
	m_16(m, NC_DNS_T_A);
	m_16(m, 1);
	m_32(m, 20);
	m_16(m, 4);
	m_bytes(m, "\1\2\3\4", 4);
	m_ptr(m, qoff);			/* www.allowed.test MX 10 mx.<q> */
	m_16(m, NC_DNS_T_MX);
	m_16(m, 1);
	m_32(m, 20);
	m_16(m, 7);
	m_16(m, 10);
	m_bytes(m, "\2mx", 3);
	m_ptr(m, qoff);
	return cnoff;
}

static void
test_answers(void)
{
	static struct nc_dns_answer a, b;
	struct msg m;
	uint8_t q[NC_DNS_NAME_MAX + 1], fin[NC_DNS_NAME_MAX + 1],
	    buf[65535];
	size_t ql, fl, idx[NC_DNS_MAX_RR], i;
	int n, len;

	wire("www.allowed.test", q, &ql);
	answer_msg(&m, 77);
	is_int(nc_dns_answer_parse(m.b, m.n, 77, q, ql, NC_DNS_T_A, &a), 0,
	    "answer parsed");
	is_int((long long)a.nrr, 5, "five IN records kept");
	is_str(text(a.rd + a.rr[0].rdoff), "edge.cdn.test",
	    "CNAME target decompressed");
	ok(a.rr[4].type == NC_DNS_T_MX && a.rr[4].rdlen == 2 + 21 &&
	    strcmp(text(a.rd + a.rr[4].rdoff + 2), "mx.www.allowed.test") ==
	    0, "MX exchange decompressed into its rdata");
	n = nc_dns_chain(&a, q, ql, NC_DNS_T_A, idx, NC_DNS_MAX_RR, fin, &fl);
	ok(n == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 2,
	    "chain: the CNAME and the two A records, not the stray one");
	is_str(text(fin), "edge.cdn.test", "chain ends at the CNAME target");

	is_int(nc_dns_answer_parse(m.b, m.n, 78, q, ql, NC_DNS_T_A, &a),
	    -EPROTO, "wrong id refused");
	wire("other.test", fin, &fl);
	is_int(nc_dns_answer_parse(m.b, m.n, 77, fin, fl, NC_DNS_T_A, &a),
	    -EPROTO, "answer to another question refused");
	is_int(nc_dns_answer_parse(m.b, m.n, 77, q, ql, NC_DNS_T_AAAA, &a),
	    -EPROTO, "answer to another type refused");
	is_int(nc_dns_answer_parse(m.b, m.n - 3, 77, q, ql, NC_DNS_T_A, &a),
	    -EBADMSG, "truncated record refused");
	answer_msg(&m, 77);
	m.b[2] |= 0x02;			/* TC */
	ok(nc_dns_answer_parse(m.b, m.n, 77, q, ql, NC_DNS_T_A, &a) == 0 &&
	    a.tc, "TC seen (the caller retries over TCP)");
	answer_msg(&m, 77);
	m.b[2] &= 0x7f;			/* not a response */
	is_int(nc_dns_answer_parse(m.b, m.n, 77, q, ql, NC_DNS_T_A, &a),
	    -EPROTO, "a query is not an answer");
	{
		size_t cn = answer_msg(&m, 77);

		/* the first A's rdlength 4 -> 5 */
		m.b[cn + 11 + 2 + 8 + 1] = 5;
		is_int(nc_dns_answer_parse(m.b, m.n, 77, q, ql, NC_DNS_T_A,
		    &a), -EBADMSG, "A record with 5 bytes of rdata refused");
	}

	/* a CNAME loop: a -> b -> a */
	m_hdr(&m, 5, 0x8180, 1, 2, 0, 0);
	m_name(&m, "a.test");
	m_16(&m, NC_DNS_T_A);
	m_16(&m, 1);
	m_ptr(&m, 12);
	m_16(&m, NC_DNS_T_CNAME);
	m_16(&m, 1);
	m_32(&m, 5);
	m_16(&m, 8);
	m_name(&m, "b.test");
	m_name(&m, "b.test");
	m_16(&m, NC_DNS_T_CNAME);
	m_16(&m, 1);
	m_32(&m, 5);
	m_16(&m, 2);
	m_ptr(&m, 12);
	wire("a.test", q, &ql);
	is_int(nc_dns_answer_parse(m.b, m.n, 5, q, ql, NC_DNS_T_A, &a), 0,
	    "looping answer parses");
	is_int(nc_dns_chain(&a, q, ql, NC_DNS_T_A, idx, NC_DNS_MAX_RR, fin,
	    &fl), -ELOOP, "CNAME loop detected");

	/* build -> parse round trip, with compression */
	wire("www.allowed.test", q, &ql);
	answer_msg(&m, 77);
	nc_dns_answer_parse(m.b, m.n, 77, q, ql, NC_DNS_T_A, &a);
	n = nc_dns_chain(&a, q, ql, NC_DNS_T_A, idx, NC_DNS_MAX_RR, fin, &fl);
	len = nc_dns_build(buf, 512, 77, 0x8180, 0, q, ql, NC_DNS_T_A, &a,
	    idx, (size_t)n, 5, 25, 0);
	ok(len > 0 && len < 12 + 22 + 12 + 16 + 2 * 31,
	    "built answer is compressed (%d bytes)", len);
	ok(nc_dns_answer_parse(buf, (size_t)len, 77, q, ql, NC_DNS_T_A,
	    &b) == 0 && b.nrr == 3, "built answer parses back");
	ok(b.rr[1].ttl == 25 && b.rr[2].ttl == 20 && b.rr[0].ttl == 25,
	    "TTLs clamped to the max in the answer");
	is_str(text(b.rd + b.rr[0].rdoff), "edge.cdn.test",
	    "CNAME target survives compression");
	ok(memcmp(b.rd + b.rr[1].rdoff, "\313\0\161\12", 4) == 0,
	    "A address survives");

	/* too many records for 512 bytes: TC and the question only */
	m_hdr(&m, 6, 0x8180, 1, 60, 0, 0);
	m_name(&m, "big.test");
	m_16(&m, NC_DNS_T_A);
	m_16(&m, 1);
	for (i = 0; i < 60; i++) {
		m_ptr(&m, 12);
		m_16(&m, NC_DNS_T_A);
		m_16(&m, 1);
		m_32(&m, 60);
		m_16(&m, 4);
		m_32(&m, 0xc6336400U + (uint32_t)i);
	}
	wire("big.test", q, &ql);
	ok(nc_dns_answer_parse(m.b, m.n, 6, q, ql, NC_DNS_T_A, &a) == 0 &&
	    a.nrr == 60, "60 A records parsed");
	n = nc_dns_chain(&a, q, ql, NC_DNS_T_A, idx, NC_DNS_MAX_RR, fin, &fl);
	len = nc_dns_build(buf, 512, 6, 0x8180, 0, q, ql, NC_DNS_T_A, &a,
	    idx, (size_t)n, 5, 3600, 0);
	ok(len == 12 + 10 + 4 && (buf[2] & 0x02) && buf[7] == 0,
	    "over 512 bytes: TC, question only");
	len = nc_dns_build(buf, sizeof(buf), 6, 0x8180, 0, q, ql,
	    NC_DNS_T_A, &a, idx, (size_t)n, 5, 3600, 0);
	ok(len == 12 + 14 + 60 * 16 && !(buf[2] & 0x02),
	    "over TCP all 60 fit (%d bytes)", len);
	is_int(nc_dns_build(buf, 20, 6, 0x8180, 0, q, ql, NC_DNS_T_A, NULL,
	    NULL, 0, 5, 3600, 0), -ENOSPC, "question that cannot fit: ENOSPC");
}

/* Random damage to valid messages: every parser must return, never read
 * outside the message (run under ASan in CI builds). */
static void
test_mutations(void)
{
	static struct nc_dns_answer a;
	struct nc_dns_query qq;
	struct msg m, orig;
	uint8_t q[NC_DNS_NAME_MAX + 1], fin[NC_DNS_NAME_MAX + 1];
	size_t ql, fl, idx[NC_DNS_MAX_RR], k, len;
	uint32_t seed = 12345;
	int i, parsed = 0;

	wire("www.allowed.test", q, &ql);
	answer_msg(&orig, 77);
	for (i = 0; i < 200000; i++) {
		m = orig;
		for (k = 0; k < 1 + (size_t)(i % 4); k++) {
			seed = seed * 1103515245U + 12345U;
			m.b[12 + (seed >> 8) % (m.n - 12)] = (uint8_t)(seed >> 24);
		}
		seed = seed * 1103515245U + 12345U;
		len = i % 3 == 0 ? (seed >> 8) % m.n : m.n;
		if (nc_dns_answer_parse(m.b, len, 77, q, ql, NC_DNS_T_A, &a) ==
		    0) {
			parsed++;
			nc_dns_chain(&a, q, ql, NC_DNS_T_A, idx, NC_DNS_MAX_RR,
			    fin, &fl);
		}
		nc_dns_query_parse(m.b, len, &qq);
	}
	ok(parsed > 0, "200000 damaged answers parsed or refused safely "
	    "(%d parsed)", parsed);
}

/* ---- learned addresses: what a re-apply puts back ---- */

static struct in_addr
ip(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a;
}

/* the element of address a in e[0..n), -1 when none (first match) */
static int
elem_of(const struct nc_dns_elem *e, int n, const char *a)
{
	int i;

	for (i = 0; i < n; i++)
		if (e[i].r.addr.s_addr == ip(a).s_addr)
			return i;
	return -1;
}

static void
test_learned(void)
{
	struct nc_dns_learn *l = nc_dns_learn_new(16);
	struct nc_rule allow[4], deny[2];
	struct nc_dns_elem *e = NULL;
	int n, i;

	/* t = 1000 ms: three answers */
	ok(l != NULL, "learned table created");
	is_int(nc_dns_learn_note(l, 1000, "allowed.test", ip("203.0.113.10"),
	    31000), 0, "allowed.test -> .10 until 31 s noted");
	nc_dns_learn_note(l, 1000, "www.allowed.test", ip("203.0.113.11"),
	    61000);
	nc_dns_learn_note(l, 1000, "short.test", ip("203.0.113.16"), 3000);
	nc_dns_learn_note(l, 1000, "allowed.test", ip("203.0.113.10"), 21000);
	is_int((long long)nc_dns_learn_count(l), 3,
	    "the same pair again is one pair");

	/* the rules change at t = 2000: an unrelated rule added */
	allow[0] = rule("allowed.test");
	allow[1] = rule("www.allowed.test");
	allow[2] = rule("short.test:80/tcp");
	allow[3] = rule("198.51.100.7");
	n = nc_dns_learn_elems(l, 2000, NC_MODE_ALLOWLIST, allow, 4, NULL, 0,
	    &e);
	is_int(n, 3, "still allowed: all three kept");
	i = elem_of(e, n, "203.0.113.10");
	ok(i >= 0 && e[i].r.kind == NC_RULE_ADDR && e[i].r.plen == 32 &&
	    e[i].r.proto == NC_PROTO_ANY && e[i].r.port_lo == 0 &&
	    e[i].r.port_hi == 65535, "allowed.test: .10/32, any port (its rule)");
	ok(i >= 0 && e[i].timeout_ms == 29000,
	    "with the remaining timeout of the later expiry (29 s)");
	i = elem_of(e, n, "203.0.113.16");
	ok(i >= 0 && e[i].r.proto == NC_PROTO_TCP && e[i].r.port_lo == 80 &&
	    e[i].r.port_hi == 80 && e[i].timeout_ms == 1000,
	    "short.test: tcp/80 as its rule says, 1 s left");
	free(e);

	/* the rule now names other ports: the element follows the rule */
	allow[0] = rule("allowed.test:443/tcp");
	n = nc_dns_learn_elems(l, 2000, NC_MODE_ALLOWLIST, allow, 4, NULL, 0,
	    &e);
	i = elem_of(e, n, "203.0.113.10");
	ok(i >= 0 && e[i].r.proto == NC_PROTO_TCP && e[i].r.port_lo == 443 &&
	    e[i].r.port_hi == 443, "rule narrowed to 443/tcp: so is the element");
	free(e);

	/* allowed.test removed: its address must not come back */
	allow[0] = rule("other.test");
	n = nc_dns_learn_elems(l, 2000, NC_MODE_ALLOWLIST, allow, 4, NULL, 0,
	    &e);
	ok(n == 2 && elem_of(e, n, "203.0.113.10") < 0,
	    "no longer allowed: dropped");
	free(e);
	/* expired: short.test's 3 s are over at t = 3000 */
	n = nc_dns_learn_elems(l, 3000, NC_MODE_ALLOWLIST, allow, 4, NULL, 0,
	    &e);
	ok(n == 1 && elem_of(e, n, "203.0.113.11") == 0 &&
	    e[0].timeout_ms == 58000, "expired: dropped; the other has 58 s");
	free(e);
	is_int((long long)nc_dns_learn_prune(l, 3000, NC_MODE_ALLOWLIST, allow,
	    4, NULL, 0), 2, "prune forgets the disallowed and the expired pair");
	is_int((long long)nc_dns_learn_count(l), 1, "one pair left");
	allow[0] = rule("allowed.test");
	n = nc_dns_learn_elems(l, 3000, NC_MODE_ALLOWLIST, allow, 4, NULL, 0,
	    &e);
	ok(n == 1 && elem_of(e, n, "203.0.113.10") < 0,
	    "allowed again after the prune: the forgotten address stays out");
	free(e);

	/* deny rules win: a name (the policy's deny names are in the list)
	 * or a range (ops' always-deny ranges are too) */
	deny[0] = rule("www.allowed.test");
	n = nc_dns_learn_elems(l, 3000, NC_MODE_ALLOWLIST, allow, 4, deny, 1,
	    &e);
	is_int(n, 0, "deny rule on the name: dropped");
	free(e);
	deny[0] = rule("203.0.113.0/24");
	n = nc_dns_learn_elems(l, 3000, NC_MODE_ALLOWLIST, allow, 4, deny, 1,
	    &e);
	is_int(n, 0, "deny range covering the address: dropped");
	free(e);
	deny[0] = rule("203.0.113.11:22/tcp");
	n = nc_dns_learn_elems(l, 3000, NC_MODE_ALLOWLIST, allow, 4, deny, 1,
	    &e);
	is_int(n, 1, "deny rule on one port only: kept (the kernel denies "
	    "that port)");
	free(e);
	n = nc_dns_learn_elems(l, 3000, NC_MODE_OPEN, allow, 4, NULL, 0, &e);
	ok(n == 0 && e == NULL, "mode open: nothing to insert");
	is_int((long long)nc_dns_learn_prune(l, 3000, NC_MODE_OPEN, NULL, 0,
	    NULL, 0), 0, "but open keeps the pairs (for a return to allowlist)");
	n = nc_dns_learn_elems(l, 3000, NC_MODE_CLOSED, allow, 4, NULL, 0, &e);
	is_int(n, 0, "mode closed: nothing");

	/* two names on one address (a CDN): one element, later expiry */
	nc_dns_learn_note(l, 3000, "cdn.allowed.test", ip("203.0.113.11"),
	    90000);
	allow[0] = rule("*.allowed.test");
	n = nc_dns_learn_elems(l, 4000, NC_MODE_ALLOWLIST, allow, 4, NULL, 0,
	    &e);
	ok(n == 1 && e[0].timeout_ms == 86000,
	    "two names, one element: the later expiry (86 s left)");
	free(e);
	{
		struct nc_rule el = rule("203.0.113.11");

		is_int((long long)nc_dns_learn_expiry(l, 4000, &el, allow, 4),
		    90000, "an insert of it must not shorten that");
		el = rule("203.0.113.11:443/tcp");
		is_int((long long)nc_dns_learn_expiry(l, 4000, &el, allow, 4),
		    0, "another element of that address: no such expiry");
	}

	/* address rules: what one covers needs no learned element; one
	 * that only overlaps does (learned elements have sets of their own,
	 * where the rules' elements cannot clash with them) */
	allow[0] = rule("*.allowed.test");
	allow[1] = rule("203.0.113.0/28");
	n = nc_dns_learn_elems(l, 4000, NC_MODE_ALLOWLIST, allow, 2, NULL, 0,
	    &e);
	is_int(n, 0, "covered by an address rule: not added twice");
	free(e);
	allow[1] = rule("203.0.113.0/28:8000-8100/tcp");
	n = nc_dns_learn_elems(l, 4000, NC_MODE_ALLOWLIST, allow, 2, NULL, 0,
	    &e);
	is_int(n, 1, "overlapping an address range rule, not covered by it: "
	    "kept (the learned sets are apart)");
	free(e);
	allow[1] = rule("www.allowed.test:8000-8100/tcp");
	n = nc_dns_learn_elems(l, 4000, NC_MODE_ALLOWLIST, allow, 2, NULL, 0,
	    &e);
	ok(n == 1 && e[0].r.proto == NC_PROTO_ANY,
	    "two rules naming it, overlapping ranges: one element");
	free(e);
	allow[1] = rule("www.allowed.test:443/tcp");
	n = nc_dns_learn_elems(l, 4000, NC_MODE_ALLOWLIST, allow, 2, NULL, 0,
	    &e);
	is_int(n, 2, "a single port (exact set) beside it: both");
	free(e);

	/* full */
	for (i = 0; i < 15; i++) {
		char a[32];

		snprintf(a, sizeof(a), "198.51.100.%d", i + 1);
		nc_dns_learn_note(l, 4000, "x.allowed.test", ip(a), 5000);
	}
	is_int((long long)nc_dns_learn_count(l), 16, "16 pairs");
	is_int(nc_dns_learn_note(l, 4000, "y.allowed.test", ip("198.51.100.99"),
	    9000), -ENOSPC, "full: refused");
	is_int(nc_dns_learn_note(l, 5000, "y.allowed.test", ip("198.51.100.99"),
	    9000), 0, "once some expired: room again");
	is_int((long long)nc_dns_learn_count(l), 3, "the expired went");
	nc_dns_learn_free(l);
}

int
main(void)
{
	test_names();
	test_rules();
	test_queries();
	test_answers();
	test_mutations();
	test_learned();
	/* ---- tunnel limits: query types, a wildcard's label ---- */
	{
		struct nc_dns_config c;
		struct nc_rule al[3];
		uint16_t t, mine[2] = { NC_DNS_T_A, NC_DNS_T_TXT };

		nc_dns_config_init(&c);
		ok(nc_dns_qtype_ok(&c, NC_DNS_T_A) &&
		    nc_dns_qtype_ok(&c, NC_DNS_T_AAAA) &&
		    nc_dns_qtype_ok(&c, NC_DNS_T_CNAME) &&
		    nc_dns_qtype_ok(&c, NC_DNS_T_HTTPS) &&
		    nc_dns_qtype_ok(&c, NC_DNS_T_SVCB),
		    "default types: A, AAAA, CNAME, HTTPS, SVCB");
		ok(!nc_dns_qtype_ok(&c, NC_DNS_T_TXT) &&
		    !nc_dns_qtype_ok(&c, NC_DNS_T_MX) &&
		    !nc_dns_qtype_ok(&c, NC_DNS_T_NS), "... not TXT, MX, NS");
		c.qtypes = mine;
		c.nqtypes = 2;
		ok(nc_dns_qtype_ok(&c, NC_DNS_T_TXT) &&
		    !nc_dns_qtype_ok(&c, NC_DNS_T_AAAA),
		    "ops' list replaces the default");
		ok(nc_dns_qtype_parse("txt", &t) == 0 && t == 16 &&
		    nc_dns_qtype_parse("HTTPS", &t) == 0 && t == 65 &&
		    nc_dns_qtype_parse("99", &t) == 0 && t == 99,
		    "type names (any case) and numbers");
		ok(nc_dns_qtype_parse("ANY", &t) < 0 &&
		    nc_dns_qtype_parse("255", &t) < 0 &&
		    nc_dns_qtype_parse("0", &t) < 0 &&
		    nc_dns_qtype_parse("70000", &t) < 0 &&
		    nc_dns_qtype_parse("TXT2", &t) < 0,
		    "meta types, 0, out of range and junk refused");
		al[0] = rule("*.example.com");
		al[1] = rule("api.example.com");
		al[2] = rule("*.other.test:443/tcp");
		ok(nc_dns_wildcard_of("x.example.com", al, 3) == &al[0],
		    "a name only a wildcard allows: that wildcard");
		ok(nc_dns_wildcard_of("api.example.com", al, 3) == NULL,
		    "an exact rule naming it too: no wildcard limits");
		ok(nc_dns_wildcard_of("y.other.test", al, 3) == &al[2] &&
		    nc_dns_wildcard_of("a.b.example.com", al, 3) == NULL,
		    "one label below only");
	}
	return done_testing();
}
