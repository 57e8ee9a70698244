/*
 * nc_dns.h — libnetctl's filtering DNS resolver: the only resolver a
 * sandbox can reach (UDP and TCP 53 on its tap gateway; nftables blocks
 * every other DNS path). It answers names the sandbox's domain rules
 * allow, puts the A addresses it hands out into that sandbox's learned
 * allow sets (nc_txn_learned_add, timeout = TTL + grace) before the
 * answer leaves, and answers everything else NXDOMAIN (or REFUSED) with a
 * denial record through the caller's callback. When such an address
 * expires, the sandbox's flows are checked again (nc_recheck), so a flow
 * to it stops with it.
 *
 * What each query type gets, for a name the rules allow:
 *   A      resolved upstream (UDP, retries across resolvers, TCP when the
 *          answer is truncated); the CNAME chain is followed (only the
 *          queried name must be allowed) and returned with the final A
 *          records, TTLs clamped; every final address is inserted first.
 *   AAAA   NOERROR with no answer, without asking upstream (guests have
 *          no IPv6).
 *   other  (MX, TXT, SRV, CNAME, HTTPS...) passed through upstream: the
 *          CNAME chain and the records of that type, rebuilt (never
 *          relayed raw); nothing is inserted, so an address in such a
 *          record (an HTTPS ipv4hint, say) is reachable only once an A
 *          query for its name has been answered.
 *   ANY, AXFR, IXFR, MAILA/B: NOTIMP. Class other than IN: REFUSED.
 * Mode open: every name allowed but domain deny rules (nothing inserted:
 * the table lets the sandbox reach any public address anyway, but the
 * answers are remembered for a later switch to allowlist, see
 * nc_dns_queue_learned); closed: every name denied; allowlist: deny
 * rules first, then allow rules.
 *
 * Same conventions as netctl.h: no logging, no exit, errors in the
 * caller's buffer; runtime problems (an nftables insert that failed)
 * reach the caller through on_error. Not thread-safe: one event_base.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_NC_DNS_H
#define BERTH_NC_DNS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "netctl.h"

struct event_base;
struct nc_dns;

#define NC_DNS_NAME_MAX 255		/* wire form, with the root label */
#define NC_DNS_TEXT_MAX 1024		/* presentation form, \DDD escaped */
#define NC_DNS_MAX_RR 64		/* records kept from one answer */
#define NC_DNS_RDATA_MAX 8192		/* rdata bytes kept from one answer */
#define NC_DNS_MAX_CHAIN 8		/* CNAME hops followed */

/* RR types and codes used here */
enum {
	NC_DNS_T_A = 1, NC_DNS_T_NS = 2, NC_DNS_T_CNAME = 5,
	NC_DNS_T_SOA = 6, NC_DNS_T_PTR = 12, NC_DNS_T_MX = 15,
	NC_DNS_T_TXT = 16, NC_DNS_T_AAAA = 28, NC_DNS_T_SRV = 33,
	NC_DNS_T_OPT = 41, NC_DNS_T_SVCB = 64, NC_DNS_T_HTTPS = 65,
	NC_DNS_T_ANY = 255,
	NC_DNS_C_IN = 1,
	NC_DNS_NOERROR = 0, NC_DNS_FORMERR = 1, NC_DNS_SERVFAIL = 2,
	NC_DNS_NXDOMAIN = 3, NC_DNS_NOTIMP = 4, NC_DNS_REFUSED = 5,
};

/* One refused name, for the denial log. */
struct nc_dns_denial {
	struct timespec when;		/* CLOCK_REALTIME */
	struct in_addr guest;
	char sandbox[64];
	char name[NC_DNS_TEXT_MAX];	/* lower case, no final dot */
	uint16_t qtype;
	const char *reason;		/* "not-allowed", "deny-rule",
					 * "closed", "bad-name" (static) */
};

struct nc_dns_config {
	const struct sockaddr_in *resolvers;	/* upstreams; port 0 = 53 */
	size_t nresolvers;
	uint16_t port;			/* where guests ask; default 53 */
	uint32_t timeout_ms;		/* one upstream attempt */
	uint32_t attempts;		/* rounds over the resolver list */
	uint32_t ttl_min, ttl_max;	/* seconds; answers and timeouts */
	uint32_t grace_ms;		/* allow-set timeout = TTL + grace */
	uint32_t max_inflight;		/* queries per sandbox */
	uint32_t max_tcp;		/* TCP connections per sandbox */
	uint32_t tcp_idle_ms;		/* idle guest TCP connection closed */
	uint16_t max_udp;		/* largest UDP answer to an EDNS guest
					 * (512 without EDNS) */
	int deny_rcode;			/* NC_DNS_NXDOMAIN or NC_DNS_REFUSED */
	/* Against tunnels through names the rules allow (0: the default;
	 * NC_DNS_UNLIMITED: none): */
	const uint16_t *qtypes;		/* the query types answered, NULL: A,
					 * AAAA, CNAME, HTTPS, SVCB */
	size_t nqtypes;
	uint32_t query_rate;		/* queries/s per sandbox, a bucket two
					 * seconds deep; default 50 */
	uint32_t label_max;		/* longest label a wildcard rule lets
					 * through ("*" of *.example.com);
					 * default 40 */
	uint32_t wildcard_names;	/* distinct names per wildcard rule and
					 * minute; default 120 */
	/* A resolver split in two (berthd: the process that answers guests
	 * holds no table and no privilege): no_listen makes this instance
	 * the table's side only: nc_dns_sandbox_add() opens no socket, and
	 * nc_dns_insert() brings the addresses the other side reports. On
	 * the answering side (ctx NULL), insert gets each A answer's
	 * addresses (TTLs as answered) and returns 0 to hold the answer
	 * until nc_dns_insert_done(token) (SERVFAIL after
	 * NC_DNS_INSERT_WAIT_MS without), or -1 to answer SERVFAIL now. */
	int no_listen;
	int (*insert)(uint64_t token, struct in_addr guest, const char *name,
	    const struct in_addr *addrs, const uint32_t *ttl, size_t n,
	    void *arg);
	void (*on_denial)(const struct nc_dns_denial *d, void *arg);
	void (*on_error)(const char *msg, void *arg);
	void *arg;
};

struct nc_dns_stats {
	uint64_t queries, allowed, denied, answered, servfail, formerr,
	    dropped, upstream_sent, upstream_tcp, upstream_fail, inserted,
	    insert_fail, limited, rechecks, tunnel_refused;
};

/* Defaults: port 53, 1000 ms x 2 rounds, TTL 5..3600 s, grace 30 s,
 * 64 queries and 16 TCP connections per sandbox, TCP idle 10 s, UDP 1232,
 * NXDOMAIN; tunnel limits as above. What they refuse is answered REFUSED
 * (a query type, the rate) or with deny_rcode (a long label, one name
 * too many under a wildcard), and reported with reason "qtype",
 * "rate-limit", "label-length" or "wildcard-names". */
#define NC_DNS_UNLIMITED UINT32_MAX
#define NC_DNS_QUERY_RATE 50
#define NC_DNS_LABEL_MAX 40
#define NC_DNS_WILDCARD_NAMES 120
void nc_dns_config_init(struct nc_dns_config *c);

/* ctx NULL: answer without inserting anything (tests, or a host with no
 * table). The config is copied (resolvers too). */
struct nc_dns *nc_dns_new(struct event_base *base, struct nc_ctx *ctx,
    const struct nc_dns_config *c, char *err, size_t errlen);
/* Closes every socket and drops queries in flight without answering. */
void nc_dns_free(struct nc_dns *dns);

/* Listen on gw:port (UDP and TCP; IP_FREEBIND, so the tap need not carry
 * the address yet) for queries from guest. The sandbox starts in mode
 * closed with no rules until nc_dns_set_rules(). */
int nc_dns_sandbox_add(struct nc_dns *dns, struct in_addr guest,
    struct in_addr gw, const char *sandbox_id, char *err, size_t errlen);
/* The two sockets nc_dns_sandbox_add() would open (UDP, TCP listening),
 * for a caller that hands them to another process. 0, or <0 with err. */
int nc_dns_bind(struct in_addr gw, uint16_t port, int *udp, int *tcp,
    char *err, size_t errlen);
/* nc_dns_sandbox_add() on sockets nc_dns_bind() opened elsewhere (taken,
 * closed on failure too). */
int nc_dns_sandbox_adopt(struct nc_dns *dns, struct in_addr guest,
    struct in_addr gw, const char *sandbox_id, int udp, int tcp, char *err,
    size_t errlen);
/* The table's side (no_listen): the answer to name (lower case, a host
 * name) gave addrs with these TTLs (seconds, clamped here). Checked
 * against the sandbox's rules as they are now (-EPERM when they do not
 * allow name, -ENOENT for an unknown guest, -EINVAL for a bad name),
 * then inserted as an answer of this resolver's own would be. */
int nc_dns_insert(struct nc_dns *dns, struct in_addr guest, const char *name,
    const struct in_addr *addrs, const uint32_t *ttl, size_t n, char *err,
    size_t errlen);
/* The answering side: what the table said about insert's token. The
 * answer is released (ok) or SERVFAIL. -ENOENT when the query is gone. */
#define NC_DNS_INSERT_WAIT_MS 3000
int nc_dns_insert_done(struct nc_dns *dns, uint64_t token, int ok,
    const char *why);
/* Stop listening; queries in flight are dropped. -ENOENT if unknown. */
int nc_dns_sandbox_del(struct nc_dns *dns, struct in_addr guest);
/* Replace a sandbox's mode and domain rules (NC_RULE_DOMAIN/WILDCARD;
 * address rules are nftables' business and are ignored here). A domain
 * allow rule's proto and ports become those of the inserted addresses.
 * Addresses learned for names the new rules no longer allow are
 * forgotten (their elements are the caller's to remove: the sandbox's
 * clear in the batch that applied the rules); an answer still in flight
 * for such a name is refused when it arrives. */
int nc_dns_set_rules(struct nc_dns *dns, struct in_addr guest,
    enum nc_mode mode, const struct nc_rule *allow, size_t nallow,
    const struct nc_rule *deny, size_t ndeny, char *err, size_t errlen);

/* Re-applying a sandbox (its elements cleared and rebuilt from its
 * stored rules, when they or the global policy change) would drop the
 * addresses the resolver inserted while the guest may still hold them
 * in its DNS cache. So the resolver remembers, per sandbox, each (name
 * asked, address, expiry) it answered (in mode open too, without
 * inserting), and the re-apply puts back those whose name is still
 * allowed:
 *
 * nc_dns_queue_learned() queues into t, after the sandbox's clear,
 * attach and address rules, an allow element for each remembered
 * address whose name the given policy (the one t applies) still allows,
 * with the ports and protocols of the allow rules that now name it and
 * the remaining timeout; nothing in mode open or closed, nothing a deny
 * rule or an address allow rule covers, nothing that would overlap
 * another of them in an interval set (the kernel would refuse the
 * batch). The resolver's rules do not change: call
 * nc_dns_set_rules() with the same policy once t is committed. Returns
 * the number of elements queued (0 for a sandbox the resolver does not
 * know), or <0 with err (what was queued before stays valid). */
int nc_dns_queue_learned(struct nc_dns *dns, struct nc_txn *t,
    struct in_addr guest, enum nc_mode mode, const struct nc_rule *allow,
    size_t nallow, const struct nc_rule *deny, size_t ndeny, char *err,
    size_t errlen);
/* The fallback when the kernel refused that batch anyway (EEXIST,
 * ENOTEMPTY): commit it without them, nc_dns_set_rules(), then this
 * inserts the same elements under the sandbox's current rules, one
 * batch each, skipping those the kernel refuses as overlapping. Returns
 * the number inserted, or <0 with err. */
int nc_dns_restore_learned(struct nc_dns *dns, struct in_addr guest,
    char *err, size_t errlen);
/* A daemon that restarts while its sandboxes run: what the table still
 * holds (nc_egress_learned: name, address, time left), remembered again
 * as if answered now, so that nc_dns_queue_learned() puts it back when
 * the sandbox is applied. -ENOENT for a sandbox not added. */
int nc_dns_learned_seed(struct nc_dns *dns, struct in_addr guest,
    const char *name, struct in_addr addr, uint64_t left_ms);
void nc_dns_get_stats(const struct nc_dns *dns, struct nc_dns_stats *st);

/* ---- wire format and policy pieces, exposed for unit tests ---- */

/* Read the (possibly compressed) name at *off into out (wire form,
 * lower-cased, at most NC_DNS_NAME_MAX bytes); *off moves past it.
 * -EBADMSG truncated, -EMSGSIZE longer than 255, -ELOOP a pointer that
 * does not point backwards, -EINVAL a reserved label type. */
int nc_dns_name_read(const uint8_t *msg, size_t len, size_t *off,
    uint8_t *out, size_t *outlen);
/* Presentation form without the final dot ("." for the root). Returns 1
 * when every label is a host-name label (letters, digits, '-', '_'), so
 * the name can match a rule; 0 otherwise (bytes escaped as \DDD). */
int nc_dns_name_text(const uint8_t *wire, char *buf, size_t len);
/* Does the lower-case name match a DOMAIN or WILDCARD rule? */
int nc_dns_name_match(const char *name, const struct nc_rule *r);
/* Policy: 1 allowed, 0 denied with *reason set. */
int nc_dns_decide(enum nc_mode mode, const struct nc_rule *allow,
    size_t nallow, const struct nc_rule *deny, size_t ndeny,
    const char *name, int clean, const char **reason);
uint32_t nc_dns_ttl_clamp(uint32_t ttl, uint32_t lo, uint32_t hi);
/* Is qtype answered under c (its list, or the default one)? */
int nc_dns_qtype_ok(const struct nc_dns_config *c, uint16_t qtype);
/* The wildcard rule that alone lets name through (no exact domain rule
 * names it), or NULL. */
const struct nc_rule *nc_dns_wildcard_of(const char *name,
    const struct nc_rule *allow, size_t nallow);
/* Type names and numbers as berth.conf writes them ("TXT", "65"):
 * 0 and *out, or -1. */
int nc_dns_qtype_parse(const char *s, uint16_t *out);

/* The learned-address bookkeeping behind nc_dns_queue_learned(): times
 * are CLOCK_MONOTONIC milliseconds, passed in. */
#define NC_DNS_LEARN_MAX 8192		/* (name, address) pairs per sandbox */
struct nc_dns_learn;
struct nc_dns_learn *nc_dns_learn_new(size_t max);
void nc_dns_learn_free(struct nc_dns_learn *l);
/* name (lower case, as matched against rules) gave addr until expires;
 * the later expiry wins for a pair already known. 0, -ENOMEM, or
 * -ENOSPC when max pairs are unexpired already. */
int nc_dns_learn_note(struct nc_dns_learn *l, uint64_t now, const char *name,
    struct in_addr addr, uint64_t expires);
size_t nc_dns_learn_count(const struct nc_dns_learn *l);
/* The earliest expiry after now among the pairs, 0 when none. */
uint64_t nc_dns_learn_next(const struct nc_dns_learn *l, uint64_t now);
/* Forget the pairs expired at now or whose name the policy does not
 * allow (every pair in mode closed). Returns how many went. */
size_t nc_dns_learn_prune(struct nc_dns_learn *l, uint64_t now,
    enum nc_mode mode, const struct nc_rule *allow, size_t nallow,
    const struct nc_rule *deny, size_t ndeny);
/* One allow element to put back: an NC_RULE_ADDR /32 rule and the time
 * it has left. */
struct nc_dns_elem {
	struct nc_rule r;
	uint64_t timeout_ms;
	const char *name;	/* the name it was learned for (the latest
				 * expiry's); valid while l is unchanged */
};
/* The elements nc_dns_queue_learned() queues for this policy at now (see
 * there), sorted by address, protocol, ports; an element several names
 * give gets the latest expiry. *out is malloc'ed (NULL when none).
 * Returns the count, or -ENOMEM. */
int nc_dns_learn_elems(const struct nc_dns_learn *l, uint64_t now,
    enum nc_mode mode, const struct nc_rule *allow, size_t nallow,
    const struct nc_rule *deny, size_t ndeny, struct nc_dns_elem **out);
/* The latest expiry the remembered names give element e (an ADDR /32
 * rule) under allow: a new insert of e must not shorten it. 0: none. */
uint64_t nc_dns_learn_expiry(const struct nc_dns_learn *l, uint64_t now,
    const struct nc_rule *e, const struct nc_rule *allow, size_t nallow);

struct nc_dns_query {
	uint16_t id, flags;
	uint8_t qname[NC_DNS_NAME_MAX + 1];
	size_t qnamelen;
	uint16_t qtype, qclass;
	int edns;			/* the query had an OPT record */
	uint16_t edns_size;
};
/* Strict parse of a guest's query: 0 ok; a positive rcode to answer with
 * (FORMERR, NOTIMP) when the header and id could be read; -1 drop (no
 * header, or it is a response). */
int nc_dns_query_parse(const uint8_t *msg, size_t len,
    struct nc_dns_query *q);

struct nc_dns_rr {
	uint8_t name[NC_DNS_NAME_MAX + 1];	/* wire, lower case */
	size_t namelen;
	uint16_t type;
	uint32_t ttl;
	uint16_t rdlen;
	size_t rdoff;			/* into nc_dns_answer.rd */
};
struct nc_dns_answer {
	int rcode, tc;
	size_t nrr;
	struct nc_dns_rr rr[NC_DNS_MAX_RR];
	size_t rdused;
	uint8_t rd[NC_DNS_RDATA_MAX];	/* names inside rdata decompressed */
};
/* Parse an upstream response to a question (id, qname, qtype): checks
 * QR, id and the echoed question; keeps answer-section IN records whose
 * rdata it can carry (names decompressed; types that may hide compressed
 * names it does not know are skipped). 0, or -EBADMSG / -EPROTO. */
int nc_dns_answer_parse(const uint8_t *msg, size_t len, uint16_t id,
    const uint8_t *qname, size_t qnamelen, uint16_t qtype,
    struct nc_dns_answer *a);
/* Select the chain from qname: indices of the CNAME records followed and
 * then of the qtype records of the final name. *final gets that name.
 * Returns the number of indices, or -ELOOP (a loop or too many hops). */
int nc_dns_chain(const struct nc_dns_answer *a, const uint8_t *qname,
    size_t qnamelen, uint16_t qtype, size_t *idx, size_t maxidx,
    uint8_t *final, size_t *finallen);
/* Build a message: header (id, flags, rcode), the question, the records
 * idx[0..n) of a (a may be NULL with n 0) with TTLs clamped to [lo, hi],
 * and an OPT record when opt_size is not 0. When the records do not fit
 * in cap, sets TC and sends the question only. Returns the length, or
 * -ENOSPC when even that does not fit. */
int nc_dns_build(uint8_t *buf, size_t cap, uint16_t id, uint16_t flags,
    int rcode, const uint8_t *qname, size_t qnamelen, uint16_t qtype,
    const struct nc_dns_answer *a, const size_t *idx, size_t n,
    uint32_t lo, uint32_t hi, uint16_t opt_size);

#endif
