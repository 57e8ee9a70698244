/*
 * fuzz_dns.c — libFuzzer target for the filtering resolver's wire format
 * and policy (netctl/nc_dns.c), driven the way its server side drives
 * them, without sockets: a guest's query is parsed and judged against a
 * fixed rule set, the upstream query is built, upstream responses are
 * parsed and their CNAME chains followed (a response that stops at a
 * CNAME is followed by the next one), and the guest's answer is built.
 * Every message built is parsed back: the upstream query must be a valid
 * query for the same name, and the guest's answer must be an answer to
 * the guest's question with its records and clamped TTLs.
 * Input: messages, each a 2-byte big-endian length then its bytes; the
 * first is the guest's query, the others upstream responses in turn.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "nc_dns.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nc_rule allow[3], deny[1];
static struct nc_dns_config cfg;
static struct nc_dns_answer a, acc, check;

/* the next length-prefixed message, or NULL */
static const uint8_t *
next(const uint8_t **p, size_t *left, size_t *len)
{
	const uint8_t *m;

	if (*left < 2)
		return NULL;
	*len = (size_t)(*p)[0] << 8 | (*p)[1];
	if (*len > *left - 2)
		*len = *left - 2;
	m = *p + 2;
	*p += 2 + *len;
	*left -= 2 + *len;
	return m;
}

/* What reply() in nc_dns.c sends, parsed back. */
static void
answer(const struct nc_dns_query *q, int tcp, int rcode,
    const struct nc_dns_answer *ans, size_t n)
{
	static uint8_t buf[65535];
	size_t idx[NC_DNS_MAX_RR], i, cap;
	int len;

	for (i = 0; i < n; i++)
		idx[i] = i;
	cap = tcp ? sizeof(buf) : q->edns ?
	    (q->edns_size < cfg.max_udp ? q->edns_size : cfg.max_udp) : 512;
	len = nc_dns_build(buf, cap, q->id, 0x8080 | (q->flags & 0x0100), rcode,
	    q->qnamelen ? q->qname : NULL, q->qnamelen, q->qtype, ans, idx, n,
	    cfg.ttl_min, cfg.ttl_max, q->edns ? cfg.max_udp : 0);
	if (len < 0)
		len = nc_dns_build(buf, cap, q->id, 0x8080, rcode, NULL, 0, 0,
		    NULL, NULL, 0, 0, 0, 0);
	if (len < 12 || (size_t)len > cap)
		abort();
	if (q->qnamelen == 0)
		return;
	if (nc_dns_answer_parse(buf, (size_t)len, q->id, q->qname, q->qnamelen,
	    q->qtype, &check) != 0 || check.rcode != rcode)
		abort();
	if (!check.tc && check.nrr != n)
		abort();
	for (i = 0; i < check.nrr; i++)
		if (check.rr[i].ttl < cfg.ttl_min || check.rr[i].ttl > cfg.ttl_max)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nc_dns_query q, up;
	uint8_t upq[NC_DNS_NAME_MAX + 64], cur[NC_DNS_NAME_MAX + 1],
	    final[NC_DNS_NAME_MAX + 1];
	char name[NC_DNS_TEXT_MAX], err[NC_ERRLEN];
	const char *reason = NULL;
	const uint8_t *msg;
	size_t len, curlen, idx[NC_DNS_MAX_RR], i, flen;
	enum nc_mode mode;
	int r, clean, tcp, hops = 0, round;

	if (cfg.max_udp == 0) {
		nc_dns_config_init(&cfg);
		if (nc_rule_parse("example.com", &allow[0], err, sizeof(err)) ||
		    nc_rule_parse("*.example.org:443/tcp", &allow[1], err, sizeof(err)) ||
		    nc_rule_parse("10.0.0.0/8", &allow[2], err, sizeof(err)) ||
		    nc_rule_parse("*.bad.example", &deny[0], err, sizeof(err)))
			abort();
	}
	if ((msg = next(&data, &size, &len)) == NULL)
		return 0;
	r = nc_dns_query_parse(msg, len, &q);
	if (r < 0)
		return 0;
	tcp = q.id & 1;
	mode = (q.id >> 1) % 3 == 0 ? NC_MODE_OPEN :
	    (q.id >> 1) % 3 == 1 ? NC_MODE_ALLOWLIST : NC_MODE_CLOSED;
	if (r > 0) {
		if (r == NC_DNS_FORMERR) {
			q.qnamelen = 0;
			q.edns = 0;
		}
		if (q.qclass != NC_DNS_C_IN)
			q.qnamelen = 0;
		answer(&q, tcp, r, NULL, 0);
		return 0;
	}
	clean = nc_dns_name_text(q.qname, name, sizeof(name));
	if (strlen(name) >= sizeof(name))
		abort();
	if (!nc_dns_decide(mode, allow, 3, deny, 1, name, clean, &reason)) {
		if (reason == NULL)
			abort();
		answer(&q, tcp, NC_DNS_NXDOMAIN, NULL, 0);
		return 0;
	}
	for (i = 0; i < 3; i++)
		(void)nc_dns_name_match(name, &allow[i]);
	if (q.qtype == NC_DNS_T_AAAA) {
		answer(&q, tcp, NC_DNS_NOERROR, NULL, 0);
		return 0;
	}
	memcpy(cur, q.qname, q.qnamelen);
	curlen = q.qnamelen;
	memset(&acc, 0, sizeof(acc));
	for (round = 0; ; round++) {
		size_t nq = 0;
		int h = 0, n;

		/* the upstream query: a query for cur, as a guest's would be */
		r = nc_dns_build(upq, sizeof(upq), 0, 0x0100, 0, cur, curlen,
		    q.qtype, NULL, NULL, 0, 0, 0, 1232);
		if (r < 0 || nc_dns_query_parse(upq, (size_t)r, &up) != 0 ||
		    up.qnamelen != curlen || memcmp(up.qname, cur, curlen) != 0)
			abort();
		if ((msg = next(&data, &size, &len)) == NULL || len < 2) {
			answer(&q, tcp, NC_DNS_SERVFAIL, NULL, 0);	/* timed out */
			return 0;
		}
		r = nc_dns_answer_parse(msg, len, (uint16_t)(msg[0] << 8 | msg[1]),
		    cur, curlen, q.qtype, &a);
		if (r < 0 || a.tc || (a.rcode != NC_DNS_NOERROR &&
		    a.rcode != NC_DNS_NXDOMAIN)) {
			answer(&q, tcp, NC_DNS_SERVFAIL, NULL, 0);
			return 0;
		}
		if (a.nrr > NC_DNS_MAX_RR || a.rdused > sizeof(a.rd))
			abort();
		n = nc_dns_chain(&a, cur, curlen, q.qtype, idx, NC_DNS_MAX_RR,
		    final, &flen);
		if (n < 0) {
			answer(&q, tcp, NC_DNS_SERVFAIL, &acc, 0);
			return 0;
		}
		for (i = 0; i < (size_t)n; i++) {
			const struct nc_dns_rr *rr;

			if (idx[i] >= a.nrr)
				abort();
			rr = &a.rr[idx[i]];
			if (rr->rdoff + rr->rdlen > a.rdused)
				abort();
			if (rr->type == NC_DNS_T_CNAME && q.qtype != NC_DNS_T_CNAME)
				h++;
			else
				nq++;
			if (acc.nrr >= NC_DNS_MAX_RR ||
			    acc.rdused + rr->rdlen > sizeof(acc.rd))
				continue;
			acc.rr[acc.nrr] = *rr;
			acc.rr[acc.nrr].rdoff = acc.rdused;
			memcpy(acc.rd + acc.rdused, a.rd + rr->rdoff, rr->rdlen);
			acc.rdused += rr->rdlen;
			acc.nrr++;
		}
		hops += h;
		if (hops > NC_DNS_MAX_CHAIN) {
			answer(&q, tcp, NC_DNS_SERVFAIL, &acc, 0);
			return 0;
		}
		if (a.rcode == NC_DNS_NOERROR && nq == 0 && h > 0) {
			if (flen > NC_DNS_NAME_MAX)
				abort();
			memcpy(cur, final, flen);
			curlen = flen;
			continue;
		}
		answer(&q, tcp, a.rcode, &acc, acc.nrr);
		return 0;
	}
}
