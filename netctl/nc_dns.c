/*
 * nc_dns.c — the filtering DNS resolver of libnetctl (see nc_dns.h for
 * what each query gets). Two halves:
 *
 *   wire: a strict parser for guests' queries, a parser for upstream
 *     answers that decompresses every name it keeps, CNAME chain
 *     selection, and a builder. Answers to guests are always rebuilt
 *     from parsed records, never relayed raw, so whatever an upstream
 *     sends, a guest sees only the question, the chain and records of
 *     the type it asked for.
 *   server: per sandbox a UDP socket and a TCP listener on the tap
 *     gateway; per allowed query an upstream exchange (connected UDP
 *     socket, fresh random id and source port per attempt; TCP when the
 *     answer comes back truncated; the next resolver on timeout, error
 *     or SERVFAIL/REFUSED), CNAME targets the upstream left out asked
 *     for in turn, and, for A, the nftables insert before the answer is
 *     released.
 *
 * Each sandbox remembers every (name asked, address, expiry) it answered
 * ("learned"), for two reasons. An address's allow element is only ever
 * lengthened: two names with different TTLs on one address (CDNs) must
 * not let the shorter TTL cut the longer one's access short, so a
 * re-insert uses the latest expiry the names give that element (the
 * kernel replaces the timeout of an element added again). And a
 * re-apply of the sandbox, which clears its elements and rebuilds them
 * from its stored rules, puts back the addresses of names its new rules
 * still allow, with what remains of their timeouts
 * (nc_dns_queue_learned): the guest may still hold them in its cache.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <ctype.h>
#include <strings.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "netctl.h"
#include "nc_dns.h"

#define F_QR	0x8000
#define F_AA	0x0400
#define F_TC	0x0200
#define F_RD	0x0100
#define F_RA	0x0080
#define OPCODE(f) (((f) >> 11) & 0xf)

#define QUERY_MAX 4096		/* largest query a guest may send */
#define UP_EDNS 1232		/* our UDP size to upstreams */
#define MAX_MATCH 16		/* allow rules applied to one name */
#define LEARN_BUCKETS 256

/* ---- wire -------------------------------------------------------------- */

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int
nc_dns_name_read(const uint8_t *msg, size_t len, size_t *off, uint8_t *out,
    size_t *outlen)
{
	size_t p = *off, o = 0, end = 0, lowest = *off;
	int jumped = 0;

	for (;;) {
		uint8_t l;

		if (p >= len)
			return -EBADMSG;
		l = msg[p];
		if ((l & 0xc0) == 0xc0) {
			size_t to;

			if (p + 1 >= len)
				return -EBADMSG;
			to = (size_t)(l & 0x3f) << 8 | msg[p + 1];
			/* Only strictly backwards, below everything read so
			 * far: no loop can form, each jump makes progress. */
			if (to >= lowest)
				return -ELOOP;
			if (!jumped)
				end = p + 2;
			jumped = 1;
			lowest = to;
			p = to;
			continue;
		}
		if (l & 0xc0)
			return -EINVAL;	/* 0x40 / 0x80: extended labels */
		if (o + 1 + l > NC_DNS_NAME_MAX)
			return -EMSGSIZE;
		if (p + 1 + l > len)
			return -EBADMSG;
		memcpy(out + o, msg + p, 1 + (size_t)l);
		o += 1 + (size_t)l;
		p += 1 + (size_t)l;
		if (l == 0)
			break;
	}
	*off = jumped ? end : p;
	*outlen = o;
	return 0;
}

/* Wire names, case-insensitively. Length bytes are below 64, so a byte
 * compare with tolower() is exact. */
static int
name_eq(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t i;

	if (al != bl)
		return 0;
	for (i = 0; i < al; i++)
		if (tolower(a[i]) != tolower(b[i]))
			return 0;
	return 1;
}

int
nc_dns_name_text(const uint8_t *wire, char *buf, size_t len)
{
	size_t p = 0, o = 0;
	int clean = 1;
	char tmp[8];

	if (len == 0)
		return 0;
	if (wire[0] == 0) {
		snprintf(buf, len, ".");
		return 0;
	}
	while (wire[p] != 0) {
		size_t l = wire[p++], i;

		if (o > 0 && o + 1 < len)
			buf[o++] = '.';
		for (i = 0; i < l; i++, p++) {
			unsigned char c = (unsigned char)tolower(wire[p]);
			size_t n;

			if (isalnum(c) || c == '-' || c == '_') {
				tmp[0] = (char)c;
				n = 1;
			} else if (c == '.' || c == '\\') {
				clean = 0;
				tmp[0] = '\\';
				tmp[1] = (char)c;
				n = 2;
			} else {
				clean = 0;
				n = (size_t)snprintf(tmp, sizeof(tmp),
				    "\\%03u", (unsigned)c);
			}
			if (o + n < len) {
				memcpy(buf + o, tmp, n);
				o += n;
			}
		}
	}
	buf[o < len ? o : len - 1] = '\0';
	return clean;
}

int
nc_dns_name_match(const char *name, const struct nc_rule *r)
{
	size_t nl = strlen(name), dl = strlen(r->domain);

	if (r->kind == NC_RULE_DOMAIN)
		return strcmp(name, r->domain) == 0;
	if (r->kind != NC_RULE_WILDCARD)
		return 0;
	/* exactly one label below: "x.example.com", not "a.b.example.com"
	 * nor "example.com" itself */
	if (nl < dl + 2 || name[nl - dl - 1] != '.' ||
	    strcmp(name + nl - dl, r->domain) != 0)
		return 0;
	return memchr(name, '.', nl - dl - 1) == NULL;
}

int
nc_dns_decide(enum nc_mode mode, const struct nc_rule *allow, size_t nallow,
    const struct nc_rule *deny, size_t ndeny, const char *name, int clean,
    const char **reason)
{
	size_t i;

	if (mode == NC_MODE_CLOSED) {
		*reason = "closed";
		return 0;
	}
	if (!clean || strcmp(name, ".") == 0) {
		*reason = "bad-name";
		return 0;
	}
	for (i = 0; i < ndeny; i++)
		if (nc_dns_name_match(name, &deny[i])) {
			*reason = "deny-rule";
			return 0;
		}
	if (mode == NC_MODE_OPEN)
		return 1;
	for (i = 0; i < nallow; i++)
		if (nc_dns_name_match(name, &allow[i]))
			return 1;
	*reason = mode == NC_MODE_ALLOWLIST ? "not-allowed" : "closed";
	return 0;
}

/* ---- tunnel limits: query types, a wildcard's labels ---- */

static const uint16_t default_qtypes[] = {
	NC_DNS_T_A, NC_DNS_T_AAAA, NC_DNS_T_CNAME, NC_DNS_T_HTTPS,
	NC_DNS_T_SVCB,
};

int
nc_dns_qtype_ok(const struct nc_dns_config *c, uint16_t qtype)
{
	const uint16_t *v = c->qtypes ? c->qtypes : default_qtypes;
	size_t n = c->qtypes ? c->nqtypes : sizeof(default_qtypes) /
	    sizeof(default_qtypes[0]), i;

	for (i = 0; i < n; i++)
		if (v[i] == qtype)
			return 1;
	return 0;
}

static const struct {
	const char *name;
	uint16_t type;
} qtype_names[] = {
	{ "A", 1 }, { "NS", 2 }, { "CNAME", 5 }, { "SOA", 6 }, { "PTR", 12 },
	{ "MX", 15 }, { "TXT", 16 }, { "AAAA", 28 }, { "SRV", 33 },
	{ "NAPTR", 35 }, { "DS", 43 }, { "DNSKEY", 48 }, { "SVCB", 64 },
	{ "HTTPS", 65 }, { "CAA", 257 },
};

int
nc_dns_qtype_parse(const char *s, uint16_t *out)
{
	char *end;
	unsigned long v;
	size_t i;

	for (i = 0; i < sizeof(qtype_names) / sizeof(qtype_names[0]); i++)
		if (strcasecmp(s, qtype_names[i].name) == 0) {
			*out = qtype_names[i].type;
			return 0;
		}
	if (*s < '1' || *s > '9')
		return -1;
	v = strtoul(s, &end, 10);
	/* not the meta types (ANY, AXFR...): those get NOTIMP anyway */
	if (*end != '\0' || v == 0 || v > 65535 || (v >= 128 && v <= 255))
		return -1;
	*out = (uint16_t)v;
	return 0;
}

const struct nc_rule *
nc_dns_wildcard_of(const char *name, const struct nc_rule *allow,
    size_t nallow)
{
	const struct nc_rule *w = NULL;
	size_t i;

	for (i = 0; i < nallow; i++) {
		if (!nc_dns_name_match(name, &allow[i]))
			continue;
		if (allow[i].kind == NC_RULE_DOMAIN)
			return NULL;
		if (w == NULL)
			w = &allow[i];
	}
	return w;
}

uint32_t
nc_dns_ttl_clamp(uint32_t ttl, uint32_t lo, uint32_t hi)
{
	if (ttl & 0x80000000U)	/* RFC 2181 8: "treated as zero" */
		ttl = 0;
	if (ttl < lo)
		ttl = lo;
	if (hi >= lo && ttl > hi)
		ttl = hi;
	return ttl;
}

int
nc_dns_query_parse(const uint8_t *msg, size_t len, struct nc_dns_query *q)
{
	size_t off = 12, nl;
	uint16_t qd, an, ns, ar;

	memset(q, 0, sizeof(*q));
	if (len < 12)
		return -1;
	q->id = get16(msg);
	q->flags = get16(msg + 2);
	if (q->flags & F_QR)
		return -1;	/* never answer an answer (reflection) */
	if (OPCODE(q->flags) != 0)
		return NC_DNS_NOTIMP;
	qd = get16(msg + 4);
	an = get16(msg + 6);
	ns = get16(msg + 8);
	ar = get16(msg + 10);
	if (qd != 1 || an != 0 || ns != 0 || ar > 1)
		return NC_DNS_FORMERR;
	if (nc_dns_name_read(msg, len, &off, q->qname, &nl) < 0 ||
	    off + 4 > len)
		return NC_DNS_FORMERR;
	q->qnamelen = nl;
	q->qtype = get16(msg + off);
	q->qclass = get16(msg + off + 2);
	off += 4;
	if (ar == 1) {
		/* only an OPT record: root name, type 41, 8 more bytes,
		 * then its options (ignored) */
		if (off + 11 > len || msg[off] != 0 ||
		    get16(msg + off + 1) != NC_DNS_T_OPT)
			return NC_DNS_FORMERR;
		q->edns = 1;
		q->edns_size = get16(msg + off + 3);
		if (q->edns_size < 512)
			q->edns_size = 512;
		off += 11 + (size_t)get16(msg + off + 9);
		if (off > len)
			return NC_DNS_FORMERR;
	}
	if (off != len)
		return NC_DNS_FORMERR;	/* trailing bytes */
	if (q->qtype == 0 || q->qtype == NC_DNS_T_OPT)
		return NC_DNS_FORMERR;
	if (q->qtype >= 251 && q->qtype <= 255)
		return NC_DNS_NOTIMP;	/* IXFR AXFR MAILB MAILA ANY */
	if (q->qclass != NC_DNS_C_IN)
		return NC_DNS_REFUSED;
	return 0;
}

/* Types whose rdata may carry compressed names we do not expand
 * (RFC 3597 section 4): such records are dropped. */
static int
opaque_names(uint16_t t)
{
	switch (t) {
	case 3: case 4: case 7: case 8: case 9: case 14: case 17: case 18:
	case 21: case 24: case 26: case 30: case 35:
		return 1;
	}
	return 0;
}

/* Append rdata of an upstream record to a->rd, expanding names.
 * Returns 1 kept, 0 skipped, <0 malformed. */
static int
rdata_copy(const uint8_t *msg, size_t len, size_t off, uint16_t rdlen,
    uint16_t type, struct nc_dns_answer *a, struct nc_dns_rr *rr)
{
	uint8_t tmp[2 * (NC_DNS_NAME_MAX + 1) + 32], nm[NC_DNS_NAME_MAX + 1];
	size_t end = off + rdlen, p = off, o = 0, nl, pre = 0, names = 0,
	    post = 0, i;

	switch (type) {
	case NC_DNS_T_A:
		if (rdlen != 4)
			return -EBADMSG;
		break;
	case NC_DNS_T_CNAME: case NC_DNS_T_NS: case NC_DNS_T_PTR:
		names = 1;
		break;
	case NC_DNS_T_MX:
		pre = 2, names = 1;
		break;
	case NC_DNS_T_SRV:
		pre = 6, names = 1;
		break;
	case NC_DNS_T_SOA:
		names = 2, post = 20;
		break;
	case NC_DNS_T_OPT:
		return 0;
	default:
		if (opaque_names(type))
			return 0;
	}
	if (names == 0) {
		if (a->rdused + rdlen > sizeof(a->rd))
			return 0;
		memcpy(a->rd + a->rdused, msg + off, rdlen);
	} else {
		if (p + pre > end)
			return -EBADMSG;
		memcpy(tmp, msg + p, pre);
		o = pre, p += pre;
		for (i = 0; i < names; i++) {
			int r = nc_dns_name_read(msg, len, &p, nm, &nl);

			if (r < 0)
				return r;
			if (p > end)
				return -EBADMSG;
			memcpy(tmp + o, nm, nl);
			o += nl;
		}
		if (p + post != end)
			return -EBADMSG;
		memcpy(tmp + o, msg + p, post);
		o += post;
		if (a->rdused + o > sizeof(a->rd))
			return 0;
		memcpy(a->rd + a->rdused, tmp, o);
		rdlen = (uint16_t)o;
	}
	rr->rdoff = a->rdused;
	rr->rdlen = rdlen;
	a->rdused += rdlen;
	return 1;
}

int
nc_dns_answer_parse(const uint8_t *msg, size_t len, uint16_t id,
    const uint8_t *qname, size_t qnamelen, uint16_t qtype,
    struct nc_dns_answer *a)
{
	uint8_t nm[NC_DNS_NAME_MAX + 1];
	size_t off = 12, nl, i;
	uint16_t flags, an;

	a->rcode = 0;
	a->tc = 0;
	a->nrr = 0;
	a->rdused = 0;
	if (len < 12)
		return -EBADMSG;
	flags = get16(msg + 2);
	if (get16(msg) != id || !(flags & F_QR) || OPCODE(flags) != 0)
		return -EPROTO;
	if (get16(msg + 4) != 1)
		return -EPROTO;
	if (nc_dns_name_read(msg, len, &off, nm, &nl) < 0 || off + 4 > len)
		return -EBADMSG;
	if (!name_eq(nm, nl, qname, qnamelen) || get16(msg + off) != qtype ||
	    get16(msg + off + 2) != NC_DNS_C_IN)
		return -EPROTO;	/* not the answer to our question */
	off += 4;
	a->rcode = flags & 0xf;
	if (flags & F_TC) {
		a->tc = 1;	/* the rest may be cut anywhere */
		return 0;
	}
	an = get16(msg + 6);
	for (i = 0; i < an; i++) {
		struct nc_dns_rr *rr = &a->rr[a->nrr];
		uint16_t type, cls, rdlen;
		uint32_t ttl;
		int r;

		if ((r = nc_dns_name_read(msg, len, &off, nm, &nl)) < 0)
			return r;
		if (off + 10 > len)
			return -EBADMSG;
		type = get16(msg + off);
		cls = get16(msg + off + 2);
		ttl = get32(msg + off + 4);
		rdlen = get16(msg + off + 8);
		off += 10;
		if (off + rdlen > len)
			return -EBADMSG;
		if (cls == NC_DNS_C_IN && a->nrr < NC_DNS_MAX_RR) {
			if ((r = rdata_copy(msg, len, off, rdlen, type, a,
			    rr)) < 0)
				return r;
			if (r == 1) {
				memcpy(rr->name, nm, nl);
				rr->namelen = nl;
				rr->type = type;
				rr->ttl = ttl & 0x80000000U ? 0 : ttl;
				a->nrr++;
			}
		}
		off += rdlen;
	}
	return 0;
}

int
nc_dns_chain(const struct nc_dns_answer *a, const uint8_t *qname,
    size_t qnamelen, uint16_t qtype, size_t *idx, size_t maxidx,
    uint8_t *final, size_t *finallen)
{
	const uint8_t *cur = qname;
	size_t curlen = qnamelen, n = 0, i;
	int hops = 0, found;

	if (qtype != NC_DNS_T_CNAME) {
		do {
			found = 0;
			for (i = 0; i < a->nrr; i++) {
				const struct nc_dns_rr *rr = &a->rr[i];

				if (rr->type != NC_DNS_T_CNAME ||
				    !name_eq(rr->name, rr->namelen, cur,
				    curlen))
					continue;
				if (++hops > NC_DNS_MAX_CHAIN)
					return -ELOOP;
				if (n < maxidx)
					idx[n++] = i;
				cur = a->rd + rr->rdoff;
				curlen = rr->rdlen;
				found = 1;
				break;
			}
		} while (found);
	}
	for (i = 0; i < a->nrr; i++)
		if (a->rr[i].type == qtype && n < maxidx &&
		    name_eq(a->rr[i].name, a->rr[i].namelen, cur, curlen))
			idx[n++] = i;
	memmove(final, cur, curlen);
	*finallen = curlen;
	return (int)n;
}

/* Output with name compression: every name written (uncompressed part)
 * is remembered; a later name that ends in a remembered name's suffix
 * points there. */
struct wbuf {
	uint8_t *b;
	size_t cap, len;
	int over;
	struct {
		const uint8_t *name;	/* full wire name */
		size_t namelen, off, lit; /* lit: bytes written as labels */
	} tab[2 * NC_DNS_MAX_RR + 2];
	size_t ntab;
};

static void
w_bytes(struct wbuf *w, const void *p, size_t n)
{
	if (w->over || w->len + n > w->cap) {
		w->over = 1;
		return;
	}
	memcpy(w->b + w->len, p, n);
	w->len += n;
}

static void
w_16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2];

	put16(b, v);
	w_bytes(w, b, 2);
}

static void
w_name(struct wbuf *w, const uint8_t *name, size_t namelen, int compress)
{
	size_t i = 0, t, j, start = w->len;

	while (compress && name[i] != 0) {
		for (t = 0; t < w->ntab; t++) {
			for (j = 0; j < w->tab[t].lit;
			    j += 1 + (size_t)w->tab[t].name[j]) {
				if (!name_eq(name + i, namelen - i,
				    w->tab[t].name + j, w->tab[t].namelen - j))
					continue;
				w_bytes(w, name, i);
				w_16(w, (uint16_t)(0xc000 |
				    (w->tab[t].off + j)));
				goto remember;
			}
		}
		i += 1 + (size_t)name[i];
	}
	i = namelen;
	w_bytes(w, name, namelen);
remember:
	if (!w->over && start < 0x3fff && w->ntab <
	    sizeof(w->tab) / sizeof(w->tab[0])) {
		w->tab[w->ntab].name = name;
		w->tab[w->ntab].namelen = namelen;
		w->tab[w->ntab].off = start;
		w->tab[w->ntab].lit = i == namelen ? namelen - 1 : i;
		w->ntab++;
	}
}

static int
build(uint8_t *buf, size_t cap, uint16_t id, uint16_t flags, int rcode,
    const uint8_t *qname, size_t qnamelen, uint16_t qtype,
    const struct nc_dns_answer *a, const size_t *idx, size_t n,
    uint32_t lo, uint32_t hi, uint16_t opt_size)
{
	struct wbuf w;
	uint8_t b[10];
	size_t i;

	memset(&w, 0, sizeof(w));
	w.b = buf;
	w.cap = cap;
	w_16(&w, id);
	w_16(&w, (uint16_t)((flags & ~0xfU) | ((unsigned)rcode & 0xf)));
	w_16(&w, qname != NULL);
	w_16(&w, (uint16_t)n);
	w_16(&w, 0);
	w_16(&w, opt_size != 0);
	if (qname != NULL) {
		w_name(&w, qname, qnamelen, 0);
		w_16(&w, qtype);
		w_16(&w, NC_DNS_C_IN);
	}
	for (i = 0; i < n; i++) {
		const struct nc_dns_rr *rr = &a->rr[idx[i]];
		const uint8_t *rd = a->rd + rr->rdoff;
		size_t lenpos;

		w_name(&w, rr->name, rr->namelen, 1);
		put16(b, rr->type);
		put16(b + 2, NC_DNS_C_IN);
		put32(b + 4, nc_dns_ttl_clamp(rr->ttl, lo, hi));
		put16(b + 8, rr->rdlen);
		w_bytes(&w, b, 10);
		lenpos = w.len - 2;
		if (rr->type == NC_DNS_T_CNAME) {
			w_name(&w, rd, rr->rdlen, 1);
			if (!w.over)
				put16(w.b + lenpos,
				    (uint16_t)(w.len - lenpos - 2));
		} else
			w_bytes(&w, rd, rr->rdlen);
	}
	if (opt_size != 0) {
		memset(b, 0, sizeof(b));
		w_bytes(&w, b, 1);
		put16(b, NC_DNS_T_OPT);
		put16(b + 2, opt_size);
		memset(b + 4, 0, 6);
		w_bytes(&w, b, 10);
	}
	return w.over ? -ENOSPC : (int)w.len;
}

int
nc_dns_build(uint8_t *buf, size_t cap, uint16_t id, uint16_t flags,
    int rcode, const uint8_t *qname, size_t qnamelen, uint16_t qtype,
    const struct nc_dns_answer *a, const size_t *idx, size_t n,
    uint32_t lo, uint32_t hi, uint16_t opt_size)
{
	int r = build(buf, cap, id, flags, rcode, qname, qnamelen, qtype, a,
	    idx, n, lo, hi, opt_size);

	if (r == -ENOSPC && n > 0)
		r = build(buf, cap, id, (uint16_t)(flags | F_TC), rcode,
		    qname, qnamelen, qtype, NULL, NULL, 0, lo, hi, opt_size);
	return r;
}

/* ---- learned addresses ---------------------------------------------------
 *
 * Per sandbox, each (name asked, address) the resolver answered, with the
 * expiry it gave it, hashed by address. What a name may reach (ports,
 * protocols) is not stored: it is derived from the rules in force, so a
 * re-apply with changed rules puts back what the new rules say. */

struct lrec {
	struct lrec *next;
	uint32_t addr;			/* network order */
	uint64_t expires;
	char name[];
};

struct nc_dns_learn {
	struct lrec *b[LEARN_BUCKETS];
	size_t n, max;
};

static size_t
learn_bucket(uint32_t addr)
{
	return (addr ^ addr >> 8 ^ addr >> 16 ^ addr >> 24) % LEARN_BUCKETS;
}

struct nc_dns_learn *
nc_dns_learn_new(size_t max)
{
	struct nc_dns_learn *l = calloc(1, sizeof(*l));

	if (l != NULL)
		l->max = max;
	return l;
}

void
nc_dns_learn_free(struct nc_dns_learn *l)
{
	struct lrec *r, *n;
	size_t i;

	if (l == NULL)
		return;
	for (i = 0; i < LEARN_BUCKETS; i++)
		for (r = l->b[i]; r != NULL; r = n) {
			n = r->next;
			free(r);
		}
	free(l);
}

size_t
nc_dns_learn_count(const struct nc_dns_learn *l)
{
	return l->n;
}

uint64_t
nc_dns_learn_next(const struct nc_dns_learn *l, uint64_t now)
{
	const struct lrec *r;
	uint64_t best = 0;
	size_t i;

	for (i = 0; i < LEARN_BUCKETS; i++)
		for (r = l->b[i]; r != NULL; r = r->next)
			if (r->expires > now && (best == 0 || r->expires < best))
				best = r->expires;
	return best;
}

/* Drop what keep() refuses; returns how many went. */
static size_t
learn_sweep(struct nc_dns_learn *l, uint64_t now, enum nc_mode mode,
    const struct nc_rule *allow, size_t nallow, const struct nc_rule *deny,
    size_t ndeny, int policy)
{
	struct lrec **pp, *r;
	const char *reason;
	size_t i, gone = 0;

	for (i = 0; i < LEARN_BUCKETS; i++) {
		pp = &l->b[i];
		while ((r = *pp) != NULL) {
			if (r->expires > now && (!policy ||
			    nc_dns_decide(mode, allow, nallow, deny, ndeny,
			    r->name, 1, &reason))) {
				pp = &r->next;
				continue;
			}
			*pp = r->next;
			free(r);
			l->n--;
			gone++;
		}
	}
	return gone;
}

size_t
nc_dns_learn_prune(struct nc_dns_learn *l, uint64_t now, enum nc_mode mode,
    const struct nc_rule *allow, size_t nallow, const struct nc_rule *deny,
    size_t ndeny)
{
	return learn_sweep(l, now, mode, allow, nallow, deny, ndeny, 1);
}

int
nc_dns_learn_note(struct nc_dns_learn *l, uint64_t now, const char *name,
    struct in_addr addr, uint64_t expires)
{
	struct lrec **head = &l->b[learn_bucket(addr.s_addr)], **pp, *r;
	size_t nl = strlen(name);

	for (pp = head; (r = *pp) != NULL;) {
		if (r->expires <= now) {	/* prune as we go */
			*pp = r->next;
			free(r);
			l->n--;
			continue;
		}
		if (r->addr == addr.s_addr && strcmp(r->name, name) == 0) {
			if (expires > r->expires)
				r->expires = expires;
			return 0;
		}
		pp = &r->next;
	}
	if (l->n >= l->max &&
	    learn_sweep(l, now, NC_MODE_OPEN, NULL, 0, NULL, 0, 0) == 0)
		return -ENOSPC;
	if ((r = malloc(sizeof(*r) + nl + 1)) == NULL)
		return -ENOMEM;
	r->addr = addr.s_addr;
	r->expires = expires;
	memcpy(r->name, name, nl + 1);
	r->next = *head;
	*head = r;
	l->n++;
	return 0;
}

/* The distinct (proto, ports) of the allow rules that name `name`, in
 * rule order, at most max: what its addresses are inserted with. */
static size_t
name_matches(const char *name, const struct nc_rule *allow, size_t nallow,
    struct nc_rule *out, size_t max)
{
	size_t i, k, n = 0;

	for (i = 0; i < nallow && n < max; i++) {
		const struct nc_rule *ar = &allow[i];

		if (!nc_dns_name_match(name, ar))
			continue;
		for (k = 0; k < n; k++)
			if (out[k].proto == ar->proto &&
			    out[k].port_lo == ar->port_lo &&
			    out[k].port_hi == ar->port_hi)
				break;
		if (k < n)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].kind = NC_RULE_ADDR;
		out[n].plen = 32;
		out[n].proto = ar->proto;
		out[n].port_lo = ar->port_lo;
		out[n].port_hi = ar->port_hi;
		n++;
	}
	return n;
}

uint64_t
nc_dns_learn_expiry(const struct nc_dns_learn *l, uint64_t now,
    const struct nc_rule *e, const struct nc_rule *allow, size_t nallow)
{
	struct nc_rule m[MAX_MATCH];
	const struct lrec *r;
	uint64_t best = 0;
	size_t n, k;

	for (r = l->b[learn_bucket(e->addr.s_addr)]; r != NULL; r = r->next) {
		if (r->addr != e->addr.s_addr || r->expires <= now ||
		    r->expires <= best)
			continue;
		n = name_matches(r->name, allow, nallow, m, MAX_MATCH);
		for (k = 0; k < n; k++)
			if (m[k].proto == e->proto &&
			    m[k].port_lo == e->port_lo &&
			    m[k].port_hi == e->port_hi)
				best = r->expires;
	}
	return best;
}

/* A rule as the boxes nc_egress.c makes of it (rule_elems): guest .
 * address range . protocol range . port range, in allow_ip (exact) or
 * allow_net (an interval set, where the kernel refuses overlaps). */
struct box {
	uint32_t alo, ahi;		/* host order */
	uint8_t plo, phi;
	uint16_t lo, hi;
	int net;
};

static size_t
boxes(const struct nc_rule *r, struct box b[2])
{
	uint32_t a = ntohl(r->addr.s_addr), mask;
	int any_port = r->port_lo == 0 && r->port_hi == 65535;
	size_t n = 0;

	mask = r->plen == 0 ? 0 : ~0U << (32 - r->plen);
	memset(b, 0, 2 * sizeof(*b));
	b[0].alo = a & mask;
	b[0].ahi = (a & mask) | ~mask;
	if (r->proto == NC_PROTO_ANY && any_port) {
		b[0].phi = 255;
		b[0].hi = 65535;
		b[0].net = 1;
		return 1;
	}
	if (r->proto != NC_PROTO_ANY)
		b[n++].plo = (uint8_t)r->proto;
	else {
		b[n++].plo = IPPROTO_TCP;
		b[1] = b[0];
		b[n++].plo = IPPROTO_UDP;
	}
	for (size_t i = 0; i < n; i++) {
		b[i].phi = b[i].plo;
		b[i].lo = r->port_lo;
		b[i].hi = r->port_hi;
		b[i].net = !(r->plen == 32 && r->port_lo == r->port_hi);
	}
	return n;
}

static int
box_in(const struct box *x, const struct box *y)	/* x inside y */
{
	return x->alo >= y->alo && x->ahi <= y->ahi && x->plo >= y->plo &&
	    x->phi <= y->phi && x->lo >= y->lo && x->hi <= y->hi;
}

/* Every box of e inside some box of r: r already says all e would. */
static int
covers(const struct nc_rule *r, const struct nc_rule *e)
{
	struct box rb[2], eb[2];
	size_t nr, ne, i, j;

	if (r->kind != NC_RULE_ADDR)
		return 0;
	nr = boxes(r, rb);
	ne = boxes(e, eb);
	for (i = 0; i < ne; i++) {
		for (j = 0; j < nr && !box_in(&eb[i], &rb[j]); j++)
			;
		if (j == nr)
			return 0;
	}
	return 1;
}

/* Would the kernel refuse e beside x in allow_net? Overlapping but not
 * identical boxes there, counted generously: a false alarm only leaves
 * an address to be asked for again. */
static int
clashes(const struct nc_rule *x, const struct nc_rule *e)
{
	struct box xb[2], eb[2];
	size_t nx, ne, i, j;

	if (x->kind != NC_RULE_ADDR)
		return 0;
	nx = boxes(x, xb);
	ne = boxes(e, eb);
	for (i = 0; i < ne; i++)
		for (j = 0; j < nx; j++) {
			const struct box *a = &eb[i], *b = &xb[j];

			if (!a->net || !b->net)
				continue;
			if (a->alo > b->ahi || b->alo > a->ahi ||
			    a->plo > b->phi || b->plo > a->phi ||
			    a->lo > b->hi || b->lo > a->hi)
				continue;
			if (memcmp(a, b, sizeof(*a)) != 0)
				return 1;
		}
	return 0;
}

static int
elem_cmp(const void *pa, const void *pb)
{
	const struct nc_dns_elem *a = pa, *b = pb;
	uint32_t x = ntohl(a->r.addr.s_addr), y = ntohl(b->r.addr.s_addr);

	if (x != y)
		return x < y ? -1 : 1;
	if (a->r.proto != b->r.proto)
		return a->r.proto < b->r.proto ? -1 : 1;
	if (a->r.port_lo != b->r.port_lo)
		return a->r.port_lo < b->r.port_lo ? -1 : 1;
	if (a->r.port_hi != b->r.port_hi)
		return a->r.port_hi < b->r.port_hi ? -1 : 1;
	return 0;
}

int
nc_dns_learn_elems(const struct nc_dns_learn *l, uint64_t now,
    enum nc_mode mode, const struct nc_rule *allow, size_t nallow,
    const struct nc_rule *deny, size_t ndeny, struct nc_dns_elem **out)
{
	struct nc_dns_elem *e = NULL, *ne;
	struct nc_rule m[MAX_MATCH];
	const struct lrec *r;
	const char *reason;
	size_t n = 0, cap = 0, i, j, k, nm, kept;

	*out = NULL;
	/* open: the table admits every public address anyway; closed:
	 * nothing */
	if (mode != NC_MODE_ALLOWLIST)
		return 0;
	for (i = 0; i < LEARN_BUCKETS; i++)
		for (r = l->b[i]; r != NULL; r = r->next) {
			if (r->expires <= now || !nc_dns_decide(mode, allow,
			    nallow, deny, ndeny, r->name, 1, &reason))
				continue;
			nm = name_matches(r->name, allow, nallow, m,
			    MAX_MATCH);
			if (n + nm > cap) {
				cap = cap ? 2 * cap : 64;
				if (cap < n + nm)
					cap = n + nm;
				if ((ne = realloc(e, cap * sizeof(*e))) ==
				    NULL) {
					free(e);
					return -ENOMEM;
				}
				e = ne;
			}
			for (k = 0; k < nm; k++) {
				e[n].r = m[k];
				e[n].r.addr.s_addr = r->addr;
				e[n].timeout_ms = r->expires;	/* for now */
				e[n].name = r->name;
				n++;
			}
		}
	if (n == 0) {
		free(e);
		return 0;
	}
	qsort(e, n, sizeof(*e), elem_cmp);
	for (i = 0, kept = 0; i < n; i++) {
		struct nc_dns_elem *x = &e[i];

		if (kept > 0 && elem_cmp(&e[kept - 1], x) == 0) {
			/* one element, several names: the latest expiry */
			if (x->timeout_ms > e[kept - 1].timeout_ms) {
				e[kept - 1].timeout_ms = x->timeout_ms;
				e[kept - 1].name = x->name;
			}
			continue;
		}
		/* deny beats allow anyway; a rule that already allows it
		 * all needs no element of its own (learned elements have
		 * sets of their own: they never clash with the rules') */
		for (j = 0; j < ndeny && !covers(&deny[j], &x->r); j++)
			;
		if (j < ndeny)
			continue;
		for (j = 0; j < nallow && !covers(&allow[j], &x->r); j++)
			;
		if (j < nallow)
			continue;
		/* kept elements of the same address come right before */
		for (j = kept; j > 0 && e[j - 1].r.addr.s_addr ==
		    x->r.addr.s_addr && !clashes(&e[j - 1].r, &x->r); j--)
			;
		if (j > 0 && e[j - 1].r.addr.s_addr == x->r.addr.s_addr)
			continue;
		e[kept++] = *x;
	}
	for (i = 0; i < kept; i++)
		e[i].timeout_ms -= now;
	*out = e;
	return (int)kept;
}

/* ---- server ------------------------------------------------------------- */

struct tconn;
struct query;

struct sandbox {
	TAILQ_ENTRY(sandbox) entry;
	struct nc_dns *dns;
	struct in_addr guest, gw;
	char id[64];
	enum nc_mode mode;
	struct nc_rule *allow, *deny;
	size_t nallow, ndeny;
	int ufd;
	struct event *uev;
	struct evconnlistener *lis;
	TAILQ_HEAD(, tconn) conns;
	unsigned nconns;
	TAILQ_HEAD(, query) queries;
	unsigned nq;
	struct nc_dns_learn *learn;	/* what it was answered */
	struct event *recheck;		/* after an inserted address expires */
	uint64_t recheck_at;		/* its expiry (monotonic ms), 0: none */
	double tokens;			/* query_rate bucket */
	uint64_t refill;		/* ms */
	struct wc_seen *seen;		/* names asked under wildcards, the
					 * last minute */
	size_t nseen, capseen;
};

struct wc_seen {
	uint64_t at;			/* ms */
	uint32_t wc, name;		/* hashes */
};

struct tconn {
	TAILQ_ENTRY(tconn) entry;
	struct sandbox *sb;
	struct bufferevent *bev;
};

struct query {
	TAILQ_ENTRY(query) entry;
	struct sandbox *sb;
	uint64_t token;			/* waiting for c.insert's answer, 0: not */
	struct tconn *conn;		/* NULL: UDP from peer */
	struct sockaddr_in peer;
	struct nc_dns_query q;
	char name[NC_DNS_TEXT_MAX];
	uint8_t cur[NC_DNS_NAME_MAX + 1];	/* name asked upstream now */
	size_t curlen;
	int hops;
	struct nc_dns_answer *acc;	/* chain and records so far */
	uint16_t upid;
	uint8_t upq[NC_DNS_NAME_MAX + 64];
	size_t upqlen;
	int fd;
	struct event *uev, *timer;
	struct bufferevent *bev;
	unsigned tries;
	size_t ri;
};

struct nc_dns {
	struct event_base *base;
	struct nc_ctx *ctx;
	struct nc_dns_config c;
	struct sockaddr_in *res;
	uint16_t *qtypes;		/* c.qtypes' copy */
	size_t preferred;
	TAILQ_HEAD(, sandbox) sbs;
	struct nc_dns_stats st;
	uint64_t next_token;
};

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint16_t
rand16(void)
{
	uint16_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint16_t)random();
	return v;
}

static void __attribute__((format(printf, 2, 3)))
report(struct nc_dns *dns, const char *fmt, ...)
{
	char msg[NC_ERRLEN];
	va_list ap;

	if (dns->c.on_error == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dns->c.on_error(msg, dns->c.arg);
}

void
nc_dns_config_init(struct nc_dns_config *c)
{
	memset(c, 0, sizeof(*c));
	c->port = 53;
	c->timeout_ms = 1000;
	c->attempts = 2;
	c->ttl_min = 5;
	c->ttl_max = 3600;
	c->grace_ms = 30000;
	c->max_inflight = 64;
	c->max_tcp = 16;
	c->tcp_idle_ms = 10000;
	c->max_udp = 1232;
	c->deny_rcode = NC_DNS_NXDOMAIN;
}

struct nc_dns *
nc_dns_new(struct event_base *base, struct nc_ctx *ctx,
    const struct nc_dns_config *c, char *err, size_t errlen)
{
	struct nc_dns *dns;
	size_t i;

	if (c->nresolvers == 0 || c->resolvers == NULL) {
		snprintf(err, errlen, "DNS resolver: no upstream resolvers");
		return NULL;
	}
	if (c->deny_rcode != NC_DNS_NXDOMAIN &&
	    c->deny_rcode != NC_DNS_REFUSED) {
		snprintf(err, errlen, "DNS resolver: deny rcode %d is "
		    "neither NXDOMAIN (3) nor REFUSED (5)", c->deny_rcode);
		return NULL;
	}
	if (c->timeout_ms == 0 || c->attempts == 0 || c->max_inflight == 0 ||
	    c->max_udp < 512 || c->ttl_min > c->ttl_max) {
		snprintf(err, errlen, "DNS resolver: invalid limits (timeout, "
		    "attempts and in-flight must be > 0, max UDP >= 512, "
		    "ttl_min <= ttl_max)");
		return NULL;
	}
	if ((dns = calloc(1, sizeof(*dns))) == NULL ||
	    (dns->res = calloc(c->nresolvers, sizeof(*dns->res))) == NULL) {
		free(dns);
		snprintf(err, errlen, "DNS resolver: %s", strerror(ENOMEM));
		return NULL;
	}
	dns->base = base;
	dns->ctx = ctx;
	dns->c = *c;
	for (i = 0; i < c->nresolvers; i++) {
		dns->res[i] = c->resolvers[i];
		dns->res[i].sin_family = AF_INET;
		if (dns->res[i].sin_port == 0)
			dns->res[i].sin_port = htons(53);
	}
	dns->c.resolvers = dns->res;
	if (dns->c.port == 0)
		dns->c.port = 53;
	if (c->qtypes != NULL) {
		if ((dns->qtypes = calloc(c->nqtypes + 1,
		    sizeof(*dns->qtypes))) == NULL) {
			free(dns->res);
			free(dns);
			snprintf(err, errlen, "DNS resolver: %s",
			    strerror(ENOMEM));
			return NULL;
		}
		memcpy(dns->qtypes, c->qtypes, c->nqtypes *
		    sizeof(*dns->qtypes));
		dns->c.qtypes = dns->qtypes;
	}
	if (dns->c.query_rate == 0)
		dns->c.query_rate = NC_DNS_QUERY_RATE;
	if (dns->c.label_max == 0)
		dns->c.label_max = NC_DNS_LABEL_MAX;
	if (dns->c.wildcard_names == 0)
		dns->c.wildcard_names = NC_DNS_WILDCARD_NAMES;
	TAILQ_INIT(&dns->sbs);
	return dns;
}

static struct sandbox *
sb_find(struct nc_dns *dns, struct in_addr guest)
{
	struct sandbox *sb;

	TAILQ_FOREACH(sb, &dns->sbs, entry)
		if (sb->guest.s_addr == guest.s_addr)
			return sb;
	return NULL;
}

/* ---- queries: end ---- */

static void
up_close(struct query *qr)
{
	if (qr->uev != NULL)
		event_free(qr->uev);
	qr->uev = NULL;
	if (qr->fd >= 0)
		close(qr->fd);
	qr->fd = -1;
	if (qr->bev != NULL)
		bufferevent_free(qr->bev);
	qr->bev = NULL;
	if (qr->timer != NULL)
		event_del(qr->timer);
}

static void
query_free(struct query *qr)
{
	up_close(qr);
	if (qr->timer != NULL)
		event_free(qr->timer);
	TAILQ_REMOVE(&qr->sb->queries, qr, entry);
	qr->sb->nq--;
	free(qr->acc);
	free(qr);
}

static void
send_reply(struct sandbox *sb, struct tconn *conn,
    const struct sockaddr_in *peer, const uint8_t *msg, size_t len)
{
	uint8_t l[2];

	if (conn != NULL) {
		put16(l, (uint16_t)len);
		bufferevent_write(conn->bev, l, 2);
		bufferevent_write(conn->bev, msg, len);
	} else {
		(void)sendto(sb->ufd, msg, len, MSG_DONTWAIT,
		    (const struct sockaddr *)peer, sizeof(*peer));
	}
}

/* Answer a guest: rcode, and the records idx[0..n) of a. */
static void
reply(struct sandbox *sb, struct tconn *conn, const struct sockaddr_in *peer,
    const struct nc_dns_query *q, int rcode, const struct nc_dns_answer *a,
    const size_t *idx, size_t n)
{
	struct nc_dns *dns = sb->dns;
	static uint8_t buf[65535];
	size_t cap;
	uint16_t flags = F_QR | F_RA | (q->flags & F_RD);
	int len;

	if (conn != NULL)
		cap = sizeof(buf);
	else if (q->edns)
		cap = q->edns_size < dns->c.max_udp ? q->edns_size :
		    dns->c.max_udp;
	else
		cap = 512;
	len = nc_dns_build(buf, cap, q->id, flags, rcode,
	    q->qnamelen ? q->qname : NULL, q->qnamelen, q->qtype, a, idx, n,
	    dns->c.ttl_min, dns->c.ttl_max, q->edns ? dns->c.max_udp : 0);
	if (len < 0)	/* the question alone does not fit: header only */
		len = nc_dns_build(buf, cap, q->id, flags, rcode, NULL, 0, 0,
		    NULL, NULL, 0, 0, 0, 0);
	if (len < 0)
		return;
	if (rcode == NC_DNS_SERVFAIL)
		dns->st.servfail++;
	dns->st.answered++;
	send_reply(sb, conn, peer, buf, (size_t)len);
}

static void
finish(struct query *qr, int rcode)
{
	size_t idx[NC_DNS_MAX_RR], i, n = qr->acc->nrr;

	for (i = 0; i < n; i++)
		idx[i] = i;
	reply(qr->sb, qr->conn, &qr->peer, &qr->q, rcode, qr->acc, idx,
	    rcode == NC_DNS_SERVFAIL ? 0 : n);
	query_free(qr);
}

/* ---- an inserted address expired: the sandbox's flows checked again ---- */

/*
 * The kernel drops an allow_dns_* element when its timeout ends, but a
 * flow it admitted carries on until its sandbox's generation changes
 * (see netctl.h). So once an address this resolver inserted has expired,
 * the sandbox gets a new generation (nc_recheck): each of its flows is
 * checked again at its next packet, and one to an address no longer
 * allowed is reset. The timer runs at the earliest expiry it remembers
 * (plus a margin for the batch's own time), then at the next.
 */
#define RECHECK_MARGIN_MS 250

static void recheck_cb(evutil_socket_t fd, short what, void *arg);

static void
recheck_arm(struct sandbox *sb, uint64_t at, uint64_t now)
{
	struct timeval tv;
	uint64_t d;

	if (at == 0 || sb->dns->ctx == NULL ||
	    (sb->recheck_at != 0 && sb->recheck_at <= at))
		return;
	if (sb->recheck == NULL && (sb->recheck = evtimer_new(sb->dns->base,
	    recheck_cb, sb)) == NULL)
		return;
	sb->recheck_at = at;
	d = (at > now ? at - now : 0) + RECHECK_MARGIN_MS;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	evtimer_add(sb->recheck, &tv);
}

static void
recheck_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	struct nc_dns *dns = sb->dns;
	char err[NC_ERRLEN], a[INET_ADDRSTRLEN];
	uint64_t now = now_ms();

	(void)fd;
	(void)what;
	sb->recheck_at = 0;
	if (sb->mode == NC_MODE_ALLOWLIST) {
		if (nc_recheck(dns->ctx, sb->guest, err, sizeof(err)) < 0) {
			inet_ntop(AF_INET, &sb->guest, a, sizeof(a));
			report(dns, "DNS %s (%s): an address expired, but its "
			    "flows cannot be checked again: %s", sb->id, a,
			    err);
			/* try again soon rather than leave them running */
			recheck_arm(sb, now + 1000, now);
			return;
		}
		dns->st.rechecks++;
	}
	recheck_arm(sb, nc_dns_learn_next(sb->learn, now), now);
}

/* ---- nftables: the answer's addresses, before the answer ---- */

struct ins {
	struct nc_rule r;
	uint64_t expires;
	const char *name;		/* learned for it */
};

static int
insert_batch(struct nc_dns *dns, struct sandbox *sb, const struct ins *in,
    size_t n, uint64_t now, char *err, size_t errlen)
{
	struct nc_txn *t;
	size_t i;
	int ret = -EAGAIN, k;

	for (k = 0; k < 4; k++) {
		if ((t = nc_txn_new(dns->ctx, err, errlen)) == NULL)
			return -EIO;
		for (ret = 0, i = 0; i < n && ret == 0; i++)
			ret = nc_txn_learned_add(t, sb->guest, &in[i].r,
			    in[i].name, in[i].expires - now, err, errlen);
		if (ret == 0)
			ret = nc_txn_commit(t, err, errlen);
		nc_txn_free(t);
		if (ret != -ERESTART && ret != -EINTR)
			break;
	}
	return ret;
}

/* One batch; when the kernel refuses it because one element overlaps
 * another learned one (allow_dns_net refuses overlaps), the others one
 * by one, skipping those. Returns how many went in, or <0. */
static int
insert_all(struct nc_dns *dns, struct sandbox *sb, const struct ins *in,
    size_t n, uint64_t now, char *err, size_t errlen)
{
	size_t i;
	int ret, done = 0;

	ret = insert_batch(dns, sb, in, n, now, err, errlen);
	if (ret == 0)
		return (int)n;
	if (ret != -EEXIST && ret != -ENOTEMPTY)
		return ret;
	for (i = 0; i < n; i++) {
		ret = insert_batch(dns, sb, &in[i], 1, now, err, errlen);
		if (ret == 0)
			done++;
		else if (ret != -EEXIST && ret != -ENOTEMPTY)
			return ret;
	}
	return done;
}

/* The addresses an A answer to name gave (exp: their expiry, ms): into
 * the sandbox's learned sets before the answer leaves (mode allowlist,
 * with a table), and remembered for a re-apply. */
static int
insert_core(struct sandbox *sb, const char *name, const struct in_addr *addrs,
    const uint64_t *exp, size_t na, uint64_t now, char *err, size_t errlen)
{
	struct nc_dns *dns = sb->dns;
	struct ins in[NC_DNS_MAX_RR];
	struct nc_rule m[MAX_MATCH];
	uint64_t e;
	size_t i, j, n = 0, nm;
	int ret;

	if (na == 0)
		return 0;
	if (dns->ctx != NULL && sb->mode == NC_MODE_ALLOWLIST) {
		/* the ports and protocols of every allow rule naming it */
		nm = name_matches(name, sb->allow, sb->nallow, m,
		    MAX_MATCH);
		for (i = 0; i < na; i++)
			for (j = 0; j < nm && n < NC_DNS_MAX_RR; j++) {
				struct ins *x = &in[n++];

				x->r = m[j];
				x->r.addr = addrs[i];
				x->expires = exp[i];
				x->name = name;
				/* only ever lengthened (see the top) */
				e = nc_dns_learn_expiry(sb->learn, now, &x->r,
				    sb->allow, sb->nallow);
				if (e > x->expires)
					x->expires = e;
			}
		if (n > 0 && (ret = insert_all(dns, sb, in, n, now, err,
		    errlen)) < 0) {
			dns->st.insert_fail++;
			return ret;
		}
		dns->st.inserted += n;
		for (i = 0, e = 0; i < n; i++)
			if (e == 0 || in[i].expires < e)
				e = in[i].expires;
		recheck_arm(sb, e, now);
	}
	/* Remembered (in mode open too) for a re-apply of the sandbox:
	 * the guest may cache the answer until its TTL ends. A pair that
	 * does not fit is only lost to a re-apply. */
	for (i = 0; i < na; i++)
		(void)nc_dns_learn_note(sb->learn, now, name, addrs[i],
		    exp[i]);
	return 0;
}

/* The A records of the answer: addresses and TTLs as answered. */
static size_t
answer_addrs(const struct nc_dns_answer *a, struct in_addr *addrs,
    uint32_t *ttl)
{
	size_t i, na = 0;

	for (i = 0; i < a->nrr && na < NC_DNS_MAX_RR; i++) {
		const struct nc_dns_rr *rr = &a->rr[i];

		if (rr->type != NC_DNS_T_A)
			continue;
		memcpy(&addrs[na].s_addr, a->rd + rr->rdoff, 4);
		ttl[na++] = rr->ttl;
	}
	return na;
}

static int
insert_addrs(struct query *qr, char *err, size_t errlen)
{
	struct nc_dns *dns = qr->sb->dns;
	struct in_addr addrs[NC_DNS_MAX_RR];
	uint32_t ttl[NC_DNS_MAX_RR];
	uint64_t now = now_ms(), exp[NC_DNS_MAX_RR];
	size_t i, na = answer_addrs(qr->acc, addrs, ttl);

	for (i = 0; i < na; i++)
		exp[i] = now + (uint64_t)nc_dns_ttl_clamp(ttl[i],
		    dns->c.ttl_min, dns->c.ttl_max) * 1000 + dns->c.grace_ms;
	return insert_core(qr->sb, qr->name, addrs, exp, na, now, err, errlen);
}

int
nc_dns_insert(struct nc_dns *dns, struct in_addr guest, const char *name,
    const struct in_addr *addrs, const uint32_t *ttl, size_t n, char *err,
    size_t errlen)
{
	struct sandbox *sb = sb_find(dns, guest);
	uint64_t now = now_ms(), exp[NC_DNS_MAX_RR];
	const char *reason = NULL;
	char a[INET_ADDRSTRLEN];
	size_t i;

	inet_ntop(AF_INET, &guest, a, sizeof(a));
	if (sb == NULL) {
		snprintf(err, errlen, "no sandbox has guest address %s", a);
		return -ENOENT;
	}
	if (n > NC_DNS_MAX_RR) {
		snprintf(err, errlen, "%zu addresses, at most %d", n,
		    NC_DNS_MAX_RR);
		return -E2BIG;
	}
	/* the same decision the resolver made, under the rules as they
	 * are now: a name they do not allow gets nothing */
	for (i = 0; name[i] != '\0'; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
		    name[i] == '_' || name[i] == '.'))
			break;
	if (i == 0 || name[i] != '\0' || i >= NC_DNS_TEXT_MAX) {
		snprintf(err, errlen, "sandbox %s: not a host name", sb->id);
		return -EINVAL;
	}
	if (!nc_dns_decide(sb->mode, sb->allow, sb->nallow, sb->deny,
	    sb->ndeny, name, 1, &reason)) {
		snprintf(err, errlen, "sandbox %s (%s): %s is not allowed (%s)",
		    sb->id, a, name, reason);
		return -EPERM;
	}
	for (i = 0; i < n; i++)
		exp[i] = now + (uint64_t)nc_dns_ttl_clamp(ttl[i],
		    dns->c.ttl_min, dns->c.ttl_max) * 1000 + dns->c.grace_ms;
	return insert_core(sb, name, addrs, exp, n, now, err, errlen);
}

static void deny_record(struct sandbox *sb, const struct nc_dns_query *q,
    const char *name, const char *reason);

static void
complete(struct query *qr, int rcode)
{
	struct sandbox *sb = qr->sb;
	char err[NC_ERRLEN], a[INET_ADDRSTRLEN];
	const char *reason = NULL;

	/* The rules may have changed while the upstream answered: a name
	 * they no longer allow gets neither its answer nor an insert
	 * (removing a rule cuts access at once). */
	if (!nc_dns_decide(sb->mode, sb->allow, sb->nallow, sb->deny,
	    sb->ndeny, qr->name, 1, &reason)) {
		sb->dns->st.denied++;
		deny_record(sb, &qr->q, qr->name, reason);
		reply(sb, qr->conn, &qr->peer, &qr->q, sb->dns->c.deny_rcode,
		    NULL, NULL, 0);
		query_free(qr);
		return;
	}
	if (rcode == NC_DNS_NOERROR && qr->q.qtype == NC_DNS_T_A &&
	    sb->dns->c.insert != NULL) {
		struct in_addr addrs[NC_DNS_MAX_RR];
		uint32_t ttl[NC_DNS_MAX_RR];
		size_t na = answer_addrs(qr->acc, addrs, ttl);

		if (na > 0) {
			/* held until nc_dns_insert_done() */
			qr->token = ++sb->dns->next_token;
			if (sb->dns->c.insert(qr->token, sb->guest, qr->name,
			    addrs, ttl, na, sb->dns->c.arg) == 0) {
				struct timeval tv = { NC_DNS_INSERT_WAIT_MS / 1000,
				    (NC_DNS_INSERT_WAIT_MS % 1000) * 1000 };

				if (qr->timer != NULL)
					evtimer_add(qr->timer, &tv);
				return;
			}
			qr->token = 0;
			rcode = NC_DNS_SERVFAIL;
		}
	} else if (rcode == NC_DNS_NOERROR && qr->q.qtype == NC_DNS_T_A &&
	    insert_addrs(qr, err, sizeof(err)) < 0) {
		inet_ntop(AF_INET, &sb->guest, a, sizeof(a));
		report(sb->dns, "DNS %s (%s): %s: cannot allow its "
		    "addresses, answering SERVFAIL: %s", sb->id, a,
		    qr->name, err);
		rcode = NC_DNS_SERVFAIL;
	}
	finish(qr, rcode);
}

int
nc_dns_insert_done(struct nc_dns *dns, uint64_t token, int ok,
    const char *why)
{
	struct sandbox *sb;
	struct query *qr;
	char a[INET_ADDRSTRLEN];

	if (token == 0)
		return -ENOENT;
	TAILQ_FOREACH(sb, &dns->sbs, entry)
		TAILQ_FOREACH(qr, &sb->queries, entry)
			if (qr->token == token) {
				qr->token = 0;
				if (!ok) {
					dns->st.insert_fail++;
					inet_ntop(AF_INET, &sb->guest, a, sizeof(a));
					report(dns, "DNS %s (%s): %s: cannot allow "
					    "its addresses, answering SERVFAIL: %s",
					    sb->id, a, qr->name, why ? why : "refused");
				} else
					dns->st.inserted++;
				finish(qr, ok ? NC_DNS_NOERROR : NC_DNS_SERVFAIL);
				return 0;
			}
	return -ENOENT;	/* the query went meanwhile (sandbox removed) */
}

/* ---- re-applying a sandbox: what it learned, put back ---- */

int
nc_dns_queue_learned(struct nc_dns *dns, struct nc_txn *t,
    struct in_addr guest, enum nc_mode mode, const struct nc_rule *allow,
    size_t nallow, const struct nc_rule *deny, size_t ndeny, char *err,
    size_t errlen)
{
	struct sandbox *sb = sb_find(dns, guest);
	struct nc_dns_elem *e;
	int n, i, ret = 0;

	if (sb == NULL)
		return 0;
	if ((n = nc_dns_learn_elems(sb->learn, now_ms(), mode, allow, nallow,
	    deny, ndeny, &e)) < 0) {
		snprintf(err, errlen, "DNS-learned addresses of sandbox %s: "
		    "%s", sb->id, strerror(-n));
		return n;
	}
	for (i = 0; i < n && ret == 0; i++)
		ret = nc_txn_learned_add(t, guest, &e[i].r, e[i].name,
		    e[i].timeout_ms, err, errlen);
	free(e);
	return ret < 0 ? ret : n;
}

int
nc_dns_restore_learned(struct nc_dns *dns, struct in_addr guest, char *err,
    size_t errlen)
{
	struct sandbox *sb = sb_find(dns, guest);
	struct nc_dns_elem *e;
	struct ins *in;
	uint64_t now = now_ms();
	int n, i, ret;

	if (sb == NULL || dns->ctx == NULL)
		return 0;
	if ((n = nc_dns_learn_elems(sb->learn, now, sb->mode, sb->allow,
	    sb->nallow, sb->deny, sb->ndeny, &e)) <= 0) {
		if (n < 0)
			snprintf(err, errlen, "DNS-learned addresses of "
			    "sandbox %s: %s", sb->id, strerror(-n));
		return n;
	}
	if ((in = calloc((size_t)n, sizeof(*in))) == NULL) {
		free(e);
		snprintf(err, errlen, "DNS-learned addresses of sandbox %s: "
		    "%s", sb->id, strerror(ENOMEM));
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		in[i].r = e[i].r;
		in[i].expires = now + e[i].timeout_ms;
		in[i].name = e[i].name;
	}
	ret = insert_all(dns, sb, in, (size_t)n, now, err, errlen);
	free(in);
	free(e);
	return ret;
}

/* ---- upstream ---- */

static void up_start(struct query *qr);
static void up_attempt(struct query *qr);

static void
up_next(struct query *qr)
{
	struct nc_dns *dns = qr->sb->dns;

	up_close(qr);
	if (++qr->tries >= dns->c.nresolvers * dns->c.attempts) {
		dns->st.upstream_fail++;
		finish(qr, NC_DNS_SERVFAIL);
		return;
	}
	qr->ri = (qr->ri + 1) % dns->c.nresolvers;
	up_attempt(qr);
}

static void
up_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct query *qr = arg;

	(void)fd;
	(void)what;
	if (qr->token != 0) {	/* the table never said: SERVFAIL */
		(void)nc_dns_insert_done(qr->sb->dns, qr->token, 0,
		    "no answer from the table in time");
		return;
	}
	up_next(qr);
}

static void
up_answer(struct query *qr, const uint8_t *msg, size_t len, int tcp);

static void
up_tcp_read(struct bufferevent *bev, void *arg)
{
	struct query *qr = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t l[2], *m;
	size_t n;

	if (evbuffer_copyout(in, l, 2) < 2)
		return;
	n = get16(l);
	if (evbuffer_get_length(in) < 2 + n)
		return;
	if ((m = evbuffer_pullup(in, (ssize_t)(2 + n))) == NULL) {
		up_next(qr);
		return;
	}
	up_answer(qr, m + 2, n, 1);
}

static void
up_tcp_event(struct bufferevent *bev, short what, void *arg)
{
	struct query *qr = arg;
	uint8_t l[2];

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		put16(l, (uint16_t)qr->upqlen);
		bufferevent_write(qr->bev, l, 2);
		bufferevent_write(qr->bev, qr->upq, qr->upqlen);
		return;
	}
	up_next(qr);
}

static void
up_tcp(struct query *qr)
{
	struct nc_dns *dns = qr->sb->dns;
	struct timeval tv;

	up_close(qr);
	dns->st.upstream_tcp++;
	qr->bev = bufferevent_socket_new(dns->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (qr->bev == NULL) {
		up_next(qr);
		return;
	}
	bufferevent_setcb(qr->bev, up_tcp_read, NULL, up_tcp_event, qr);
	bufferevent_enable(qr->bev, EV_READ);
	tv.tv_sec = dns->c.timeout_ms * 2 / 1000;
	tv.tv_usec = (dns->c.timeout_ms * 2 % 1000) * 1000;
	evtimer_add(qr->timer, &tv);
	if (bufferevent_socket_connect(qr->bev,
	    (struct sockaddr *)&dns->res[qr->ri], sizeof(dns->res[0])) < 0)
		up_next(qr);
}

static void
up_udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct query *qr = arg;
	static uint8_t buf[65535];
	ssize_t n;

	(void)what;
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		up_next(qr);	/* ECONNREFUSED: nobody on port 53 there */
		return;
	}
	up_answer(qr, buf, (size_t)n, 0);
}

static void
up_answer(struct query *qr, const uint8_t *msg, size_t len, int tcp)
{
	struct sandbox *sb = qr->sb;
	struct nc_dns *dns = sb->dns;
	struct nc_dns_answer *a;
	uint8_t final[NC_DNS_NAME_MAX + 1];
	size_t idx[NC_DNS_MAX_RR], flen, i, nq = 0;
	int n, r, hops = 0;

	if ((a = malloc(sizeof(*a))) == NULL) {
		up_next(qr);
		return;
	}
	r = nc_dns_answer_parse(msg, len, qr->upid, qr->cur, qr->curlen,
	    qr->q.qtype, a);
	if (r == -EPROTO && !tcp) {
		free(a);	/* not ours (late or forged): keep waiting */
		return;
	}
	if (r < 0 || (a->rcode != NC_DNS_NOERROR &&
	    a->rcode != NC_DNS_NXDOMAIN)) {
		free(a);
		up_next(qr);
		return;
	}
	if (a->tc) {
		free(a);
		if (tcp)
			up_next(qr);
		else
			up_tcp(qr);
		return;
	}
	dns->preferred = qr->ri;
	n = nc_dns_chain(a, qr->cur, qr->curlen, qr->q.qtype, idx,
	    NC_DNS_MAX_RR, final, &flen);
	if (n < 0) {
		free(a);
		up_close(qr);
		finish(qr, NC_DNS_SERVFAIL);
		return;
	}
	/* keep the chain and the final records, in order */
	for (i = 0; i < (size_t)n; i++) {
		const struct nc_dns_rr *rr = &a->rr[idx[i]];
		struct nc_dns_answer *acc = qr->acc;

		if (rr->type == NC_DNS_T_CNAME && qr->q.qtype !=
		    NC_DNS_T_CNAME)
			hops++;
		else
			nq++;
		if (acc->nrr >= NC_DNS_MAX_RR ||
		    acc->rdused + rr->rdlen > sizeof(acc->rd))
			continue;
		acc->rr[acc->nrr] = *rr;
		acc->rr[acc->nrr].rdoff = acc->rdused;
		memcpy(acc->rd + acc->rdused, a->rd + rr->rdoff, rr->rdlen);
		acc->rdused += rr->rdlen;
		acc->nrr++;
	}
	r = a->rcode;
	free(a);
	up_close(qr);
	qr->hops += hops;
	if (qr->hops > NC_DNS_MAX_CHAIN) {
		finish(qr, NC_DNS_SERVFAIL);
		return;
	}
	if (r == NC_DNS_NOERROR && nq == 0 && hops > 0) {
		/* the upstream stopped at a CNAME: ask for its target */
		memcpy(qr->cur, final, flen);
		qr->curlen = flen;
		up_start(qr);
		return;
	}
	complete(qr, r);
}

static void
up_attempt(struct query *qr)
{
	struct nc_dns *dns = qr->sb->dns;
	struct timeval tv;
	int fd;

	dns->st.upstream_sent++;
	/* fresh id and socket (random source port) per attempt */
	qr->upid = rand16();
	put16(qr->upq, qr->upid);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	qr->fd = fd;
	if (connect(fd, (struct sockaddr *)&dns->res[qr->ri],
	    sizeof(dns->res[0])) < 0 ||
	    send(fd, qr->upq, qr->upqlen, MSG_DONTWAIT) < 0)
		goto fail;
	qr->uev = event_new(dns->base, fd, EV_READ | EV_PERSIST, up_udp_read,
	    qr);
	if (qr->uev == NULL || event_add(qr->uev, NULL) < 0)
		goto fail;
	tv.tv_sec = dns->c.timeout_ms / 1000;
	tv.tv_usec = (dns->c.timeout_ms % 1000) * 1000;
	evtimer_add(qr->timer, &tv);
	return;
fail:
	/* try the next one, from the loop rather than recursively */
	up_close(qr);
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	evtimer_add(qr->timer, &tv);
}

static void
up_start(struct query *qr)
{
	struct nc_dns *dns = qr->sb->dns;
	int len;

	len = nc_dns_build(qr->upq, sizeof(qr->upq), 0, F_RD, 0, qr->cur,
	    qr->curlen, qr->q.qtype, NULL, NULL, 0, 0, 0, UP_EDNS);
	if (len < 0) {
		finish(qr, NC_DNS_SERVFAIL);
		return;
	}
	qr->upqlen = (size_t)len;
	qr->tries = 0;
	qr->ri = dns->preferred % dns->c.nresolvers;
	up_attempt(qr);
}

/* ---- guests' messages ---- */

static void
deny_record(struct sandbox *sb, const struct nc_dns_query *q,
    const char *name, const char *reason)
{
	struct nc_dns_denial d;

	if (sb->dns->c.on_denial == NULL)
		return;
	memset(&d, 0, sizeof(d));
	clock_gettime(CLOCK_REALTIME, &d.when);
	d.guest = sb->guest;
	snprintf(d.sandbox, sizeof(d.sandbox), "%s", sb->id);
	snprintf(d.name, sizeof(d.name), "%s", name);
	d.qtype = q->qtype;
	d.reason = reason;
	sb->dns->c.on_denial(&d, sb->dns->c.arg);
}

/* ---- tunnel limits, per sandbox ---- */

/* One query of the sandbox's bucket (query_rate a second, two seconds
 * deep), or 0. */
static int
rate_take(struct sandbox *sb)
{
	uint32_t rate = sb->dns->c.query_rate;
	uint64_t now = now_ms();

	if (rate == NC_DNS_UNLIMITED)
		return 1;
	if (sb->refill == 0)
		sb->tokens = 2.0 * rate;
	else {
		sb->tokens += (double)(now - sb->refill) * rate / 1000.0;
		if (sb->tokens > 2.0 * rate)
			sb->tokens = 2.0 * rate;
	}
	sb->refill = now;
	if (sb->tokens < 1)
		return 0;
	sb->tokens -= 1;
	return 1;
}

static uint32_t
hash32(const char *s)
{
	uint32_t h = 2166136261U;	/* FNV-1a */

	while (*s != '\0')
		h = (h ^ (uint8_t)*s++) * 16777619U;
	return h;
}

/*
 * What the rules allow can still carry data out: any query type's
 * answers (TXT), and under a wildcard rule a label the guest makes up
 * for each query. So only the usual types are answered, and a name that
 * only a wildcard allows has a label of at most label_max characters and
 * is one of at most wildcard_names distinct names under that wildcard a
 * minute. Open mode is exempt from the wildcard limits (no rule is
 * needed there: it reaches any public address anyway).
 */
static int
tunnel_ok(struct sandbox *sb, const struct nc_dns_query *q, const char *name,
    const char **reason)
{
	const struct nc_dns_config *c = &sb->dns->c;
	const struct nc_rule *w;
	uint32_t max, wc, nh;
	uint64_t now;
	size_t i, k, n;
	const char *dot;

	if (!nc_dns_qtype_ok(c, q->qtype)) {
		*reason = "qtype";
		return 0;
	}
	if (sb->mode != NC_MODE_ALLOWLIST ||
	    (w = nc_dns_wildcard_of(name, sb->allow, sb->nallow)) == NULL)
		return 1;
	max = c->label_max;
	dot = strchr(name, '.');
	if (max != NC_DNS_UNLIMITED && dot != NULL &&
	    (uint32_t)(dot - name) > max) {
		*reason = "label-length";
		return 0;
	}
	if (c->wildcard_names == NC_DNS_UNLIMITED)
		return 1;
	now = now_ms();
	wc = hash32(w->domain);
	nh = hash32(name);
	for (i = 0, k = 0, n = 0; i < sb->nseen; i++) {
		if (now - sb->seen[i].at >= 60000)
			continue;			/* forgotten */
		sb->seen[k++] = sb->seen[i];
		if (sb->seen[i].wc != wc)
			continue;
		if (sb->seen[i].name == nh)
			return 1;		/* asked this minute: not new */
		n++;
	}
	sb->nseen = k;
	if (n >= c->wildcard_names) {
		*reason = "wildcard-names";
		return 0;
	}
	if (sb->nseen == sb->capseen) {
		size_t cap = sb->capseen ? 2 * sb->capseen : 64;
		struct wc_seen *v;

		if (cap > 65536 || (v = realloc(sb->seen, cap *
		    sizeof(*v))) == NULL) {
			*reason = "wildcard-names";
			return 0;
		}
		sb->seen = v;
		sb->capseen = cap;
	}
	sb->seen[sb->nseen].at = now;
	sb->seen[sb->nseen].wc = wc;
	sb->seen[sb->nseen++].name = nh;
	return 1;
}

static void
handle(struct sandbox *sb, struct tconn *conn, const struct sockaddr_in *peer,
    const uint8_t *msg, size_t len)
{
	struct nc_dns *dns = sb->dns;
	struct nc_dns_query q;
	struct query *qr;
	char name[NC_DNS_TEXT_MAX];
	const char *reason = NULL;
	int r, clean;

	dns->st.queries++;
	r = nc_dns_query_parse(msg, len, &q);
	if (r < 0) {
		dns->st.dropped++;
		return;
	}
	if (r > 0) {
		if (r == NC_DNS_FORMERR) {
			dns->st.formerr++;
			q.qnamelen = 0;	/* echo no question we doubt */
			q.edns = 0;
		}
		if (q.qclass != NC_DNS_C_IN)
			q.qnamelen = 0;	/* the builder writes class IN */
		reply(sb, conn, peer, &q, r, NULL, NULL, 0);
		return;
	}
	clean = nc_dns_name_text(q.qname, name, sizeof(name));
	if (!rate_take(sb)) {
		dns->st.tunnel_refused++;
		deny_record(sb, &q, name, "rate-limit");
		reply(sb, conn, peer, &q, NC_DNS_REFUSED, NULL, NULL, 0);
		return;
	}
	if (!nc_dns_decide(sb->mode, sb->allow, sb->nallow, sb->deny,
	    sb->ndeny, name, clean, &reason) ||
	    !tunnel_ok(sb, &q, name, &reason)) {
		dns->st.denied++;
		deny_record(sb, &q, name, reason);
		reply(sb, conn, peer, &q, strcmp(reason, "qtype") == 0 ?
		    NC_DNS_REFUSED : dns->c.deny_rcode, NULL, NULL, 0);
		return;
	}
	dns->st.allowed++;
	if (q.qtype == NC_DNS_T_AAAA) {
		reply(sb, conn, peer, &q, NC_DNS_NOERROR, NULL, NULL, 0);
		return;
	}
	if (sb->nq >= dns->c.max_inflight) {
		dns->st.limited++;
		reply(sb, conn, peer, &q, NC_DNS_SERVFAIL, NULL, NULL, 0);
		return;
	}
	if ((qr = calloc(1, sizeof(*qr))) == NULL ||
	    (qr->acc = calloc(1, sizeof(*qr->acc))) == NULL ||
	    (qr->timer = evtimer_new(dns->base, up_timeout, qr)) == NULL) {
		if (qr != NULL) {
			free(qr->acc);
			free(qr);
		}
		reply(sb, conn, peer, &q, NC_DNS_SERVFAIL, NULL, NULL, 0);
		return;
	}
	qr->sb = sb;
	qr->conn = conn;
	if (peer != NULL)
		qr->peer = *peer;
	qr->q = q;
	qr->fd = -1;
	snprintf(qr->name, sizeof(qr->name), "%s", name);
	memcpy(qr->cur, q.qname, q.qnamelen);
	qr->curlen = q.qnamelen;
	TAILQ_INSERT_TAIL(&sb->queries, qr, entry);
	sb->nq++;
	up_start(qr);
}

static void
udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	uint8_t buf[QUERY_MAX];
	struct sockaddr_in peer;
	socklen_t pl;
	ssize_t n;
	int i;

	(void)what;
	for (i = 0; i < 32; i++) {
		pl = sizeof(peer);
		n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
		    (struct sockaddr *)&peer, &pl);
		if (n < 0)
			return;
		if ((size_t)n > sizeof(buf) || peer.sin_family != AF_INET ||
		    peer.sin_addr.s_addr != sb->guest.s_addr ||
		    peer.sin_port == 0) {
			sb->dns->st.dropped++;
			continue;
		}
		handle(sb, NULL, &peer, buf, (size_t)n);
	}
}

static void
conn_free(struct tconn *c)
{
	struct sandbox *sb = c->sb;
	struct query *qr, *tmp;

	for (qr = TAILQ_FIRST(&sb->queries); qr != NULL; qr = tmp) {
		tmp = TAILQ_NEXT(qr, entry);
		if (qr->conn == c)
			query_free(qr);
	}
	TAILQ_REMOVE(&sb->conns, c, entry);
	sb->nconns--;
	bufferevent_free(c->bev);
	free(c);
}

static void
conn_read(struct bufferevent *bev, void *arg)
{
	struct tconn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t l[2], buf[QUERY_MAX];
	size_t n;

	/* A guest that does not read its answers stops being read. */
	while (evbuffer_get_length(bufferevent_get_output(bev)) < 65536) {
		if (evbuffer_copyout(in, l, 2) < 2)
			return;
		n = get16(l);
		if (n < 12 || n > sizeof(buf)) {
			c->sb->dns->st.dropped++;
			conn_free(c);
			return;
		}
		if (evbuffer_get_length(in) < 2 + n)
			return;
		evbuffer_drain(in, 2);
		evbuffer_remove(in, buf, n);
		handle(c->sb, c, NULL, buf, n);
	}
	bufferevent_disable(bev, EV_READ);
}

static void
conn_write(struct bufferevent *bev, void *arg)
{
	/* output drained below the watermark: read again */
	if (!(bufferevent_get_enabled(bev) & EV_READ)) {
		bufferevent_enable(bev, EV_READ);
		conn_read(bev, arg);
	}
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);	/* EOF, error or idle timeout */
}

static void
tcp_accept(struct evconnlistener *lis, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct sandbox *sb = arg;
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;
	struct tconn *c;
	struct timeval tv;

	(void)lis;
	if (salen < (int)sizeof(*sin) || sin->sin_family != AF_INET ||
	    sin->sin_addr.s_addr != sb->guest.s_addr ||
	    sb->nconns >= sb->dns->c.max_tcp ||
	    (c = calloc(1, sizeof(*c))) == NULL) {
		sb->dns->st.dropped++;
		evutil_closesocket(fd);
		return;
	}
	c->sb = sb;
	c->bev = bufferevent_socket_new(sb->dns->base, fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		evutil_closesocket(fd);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&sb->conns, c, entry);
	sb->nconns++;
	tv.tv_sec = sb->dns->c.tcp_idle_ms / 1000;
	tv.tv_usec = (sb->dns->c.tcp_idle_ms % 1000) * 1000;
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_setwatermark(c->bev, EV_WRITE, 16384, 0);
	bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static int
bind_sock(int type, struct in_addr gw, uint16_t port)
{
	struct sockaddr_in sa;
	int fd, one = 1, e;

	fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr = gw;
	sa.sin_port = htons(port);
	/* FREEBIND: the tap and its address may come up after us */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 64) < 0)) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static void
sb_free(struct sandbox *sb)
{
	struct query *qr;

	while ((qr = TAILQ_FIRST(&sb->queries)) != NULL)
		query_free(qr);
	while (!TAILQ_EMPTY(&sb->conns))
		conn_free(TAILQ_FIRST(&sb->conns));
	if (sb->uev != NULL)
		event_free(sb->uev);
	if (sb->ufd >= 0)
		close(sb->ufd);
	if (sb->lis != NULL)
		evconnlistener_free(sb->lis);
	if (sb->recheck != NULL)
		event_free(sb->recheck);
	free(sb->seen);
	nc_dns_learn_free(sb->learn);
	free(sb->allow);
	free(sb->deny);
	free(sb);
}

int
nc_dns_bind(struct in_addr gw, uint16_t port, int *udp, int *tcp, char *err,
    size_t errlen)
{
	char w[INET_ADDRSTRLEN];
	int fd;

	inet_ntop(AF_INET, &gw, w, sizeof(w));
	if ((fd = bind_sock(SOCK_DGRAM, gw, port)) < 0) {
		snprintf(err, errlen, "DNS: UDP %s:%u: %s", w, port,
		    strerror(-fd));
		return fd;
	}
	*udp = fd;
	if ((fd = bind_sock(SOCK_STREAM, gw, port)) < 0) {
		snprintf(err, errlen, "DNS: TCP %s:%u: %s", w, port,
		    strerror(-fd));
		close(*udp);
		return fd;
	}
	*tcp = fd;
	return 0;
}

static int sb_add(struct nc_dns *dns, struct in_addr guest, struct in_addr gw,
    const char *sandbox_id, int ufd, int tfd, char *err, size_t errlen);

int
nc_dns_sandbox_add(struct nc_dns *dns, struct in_addr guest,
    struct in_addr gw, const char *sandbox_id, char *err, size_t errlen)
{
	int ufd = -1, tfd = -1, ret;

	if (sb_find(dns, guest) != NULL)	/* before binding its sockets */
		return sb_add(dns, guest, gw, sandbox_id, -1, -1, err, errlen);
	if (!dns->c.no_listen && (ret = nc_dns_bind(gw, dns->c.port, &ufd,
	    &tfd, err, errlen)) < 0)
		return ret;
	return sb_add(dns, guest, gw, sandbox_id, ufd, tfd, err, errlen);
}

int
nc_dns_sandbox_adopt(struct nc_dns *dns, struct in_addr guest,
    struct in_addr gw, const char *sandbox_id, int udp, int tcp, char *err,
    size_t errlen)
{
	return sb_add(dns, guest, gw, sandbox_id, udp, tcp, err, errlen);
}

/* Takes ufd and tfd (-1: none), closed on failure. */
static int
sb_add(struct nc_dns *dns, struct in_addr guest, struct in_addr gw,
    const char *sandbox_id, int ufd, int tfd, char *err, size_t errlen)
{
	struct sandbox *sb;
	char g[INET_ADDRSTRLEN];
	int fd;

	inet_ntop(AF_INET, &guest, g, sizeof(g));
	if (sb_find(dns, guest) != NULL || (sb = calloc(1, sizeof(*sb))) == NULL) {
		int e = sb_find(dns, guest) != NULL ? EEXIST : ENOMEM;

		if (e == EEXIST)
			snprintf(err, errlen, "DNS for sandbox %s (%s): already "
			    "added", sandbox_id, g);
		else
			snprintf(err, errlen, "DNS for sandbox %s: %s",
			    sandbox_id, strerror(ENOMEM));
		if (ufd >= 0)
			close(ufd);
		if (tfd >= 0)
			close(tfd);
		return -e;
	}
	sb->dns = dns;
	sb->guest = guest;
	sb->gw = gw;
	sb->mode = NC_MODE_CLOSED;
	sb->ufd = -1;
	snprintf(sb->id, sizeof(sb->id), "%s", sandbox_id);
	TAILQ_INIT(&sb->conns);
	TAILQ_INIT(&sb->queries);
	sb->ufd = ufd;
	if ((sb->learn = nc_dns_learn_new(NC_DNS_LEARN_MAX)) == NULL) {
		snprintf(err, errlen, "DNS for sandbox %s: %s", sandbox_id,
		    strerror(ENOMEM));
		if (tfd >= 0)
			close(tfd);
		sb_free(sb);
		return -ENOMEM;
	}
	if (ufd < 0) {	/* the table's side only (no_listen) */
		TAILQ_INSERT_TAIL(&dns->sbs, sb, entry);
		return 0;
	}
	fd = ufd;
	evutil_make_socket_nonblocking(ufd);
	evutil_make_socket_nonblocking(tfd);
	if ((sb->uev = event_new(dns->base, fd, EV_READ | EV_PERSIST,
	    udp_read, sb)) == NULL || event_add(sb->uev, NULL) < 0) {
		snprintf(err, errlen, "DNS for sandbox %s: event: %s",
		    sandbox_id, strerror(ENOMEM));
		close(tfd);
		sb_free(sb);
		return -ENOMEM;
	}
	fd = tfd;
	if ((sb->lis = evconnlistener_new(dns->base, tcp_accept, sb,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd)) == NULL) {
		close(fd);
		snprintf(err, errlen, "DNS for sandbox %s: listener: %s",
		    sandbox_id, strerror(ENOMEM));
		sb_free(sb);
		return -ENOMEM;
	}
	TAILQ_INSERT_TAIL(&dns->sbs, sb, entry);
	return 0;
}

int
nc_dns_sandbox_del(struct nc_dns *dns, struct in_addr guest)
{
	struct sandbox *sb = sb_find(dns, guest);

	if (sb == NULL)
		return -ENOENT;
	TAILQ_REMOVE(&dns->sbs, sb, entry);
	sb_free(sb);
	return 0;
}

static int
copy_rules(const struct nc_rule *in, size_t n, struct nc_rule **out,
    size_t *nout)
{
	size_t i;

	*out = NULL;
	*nout = 0;
	if (n == 0)
		return 0;
	if ((*out = calloc(n, sizeof(**out))) == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		if (in[i].kind == NC_RULE_DOMAIN ||
		    in[i].kind == NC_RULE_WILDCARD)
			(*out)[(*nout)++] = in[i];
	return 0;
}

int
nc_dns_set_rules(struct nc_dns *dns, struct in_addr guest, enum nc_mode mode,
    const struct nc_rule *allow, size_t nallow, const struct nc_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct sandbox *sb = sb_find(dns, guest);
	struct nc_rule *na, *nd;
	size_t nna, nnd;
	char g[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &guest, g, sizeof(g));
	if (sb == NULL) {
		snprintf(err, errlen, "DNS rules for %s: no such sandbox", g);
		return -ENOENT;
	}
	if (mode != NC_MODE_OPEN && mode != NC_MODE_ALLOWLIST &&
	    mode != NC_MODE_CLOSED) {
		snprintf(err, errlen, "DNS rules for sandbox %s: bad mode %d",
		    sb->id, (int)mode);
		return -EINVAL;
	}
	if (copy_rules(allow, nallow, &na, &nna) < 0 ||
	    copy_rules(deny, ndeny, &nd, &nnd) < 0) {
		free(na);
		snprintf(err, errlen, "DNS rules for sandbox %s: %s", sb->id,
		    strerror(ENOMEM));
		return -ENOMEM;
	}
	free(sb->allow);
	free(sb->deny);
	sb->allow = na;
	sb->nallow = nna;
	sb->deny = nd;
	sb->ndeny = nnd;
	sb->mode = mode;
	/* what was learned for a name no longer allowed never comes back */
	nc_dns_learn_prune(sb->learn, now_ms(), mode, na, nna, nd, nnd);
	/* what the caller put back (nc_dns_queue_learned) expires too */
	if (mode == NC_MODE_ALLOWLIST)
		recheck_arm(sb, nc_dns_learn_next(sb->learn, now_ms()),
		    now_ms());
	return 0;
}

int
nc_dns_learned_seed(struct nc_dns *dns, struct in_addr guest,
    const char *name, struct in_addr addr, uint64_t left_ms)
{
	struct sandbox *sb = sb_find(dns, guest);
	uint64_t now = now_ms();

	if (sb == NULL)
		return -ENOENT;
	return nc_dns_learn_note(sb->learn, now, name, addr, now + left_ms);
}

void
nc_dns_get_stats(const struct nc_dns *dns, struct nc_dns_stats *st)
{
	*st = dns->st;
}

void
nc_dns_free(struct nc_dns *dns)
{
	struct sandbox *sb;

	if (dns == NULL)
		return;
	while ((sb = TAILQ_FIRST(&dns->sbs)) != NULL) {
		TAILQ_REMOVE(&dns->sbs, sb, entry);
		sb_free(sb);
	}
	free(dns->res);
	free(dns->qtypes);
	free(dns);
}
