/*
 * netctl.h — public interface of libnetctl's egress side: the berth-owned
 * nftables table `inet berth` (anti-spoofing, always-deny ranges,
 * per-sandbox mode and allow/deny elements) and the egress rule language.
 *
 * Conventions: the library never logs and never exits. Every function that
 * can fail returns 0 on success or a negative errno value, and writes one
 * line into the caller's (err, errlen) buffer that names the failing object
 * and carries the kernel's message (extended ack) when there is one.
 * Addresses are IPv4 in network byte order (struct in_addr); guests have
 * no IPv6 (what they send is denied and logged). Nothing here is thread-safe: one nc_ctx per thread.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_NETCTL_H
#define BERTH_NETCTL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NC_TABLE "berth"		/* nftables table, family inet */
#define NC_ERRLEN 512			/* a comfortable error buffer size */

/* ---- rule language: "example.com", "*.example.com", "1.2.3.4",
 * "10.1.0.0/16", each optionally followed by ":443" or ":8000-8100" and
 * "/tcp" or "/udp". An empty host (":443", "/udp") means any address. */

enum nc_rule_kind {
	NC_RULE_ADDR = 1,	/* addr/plen */
	NC_RULE_DOMAIN,		/* exactly `domain` */
	NC_RULE_WILDCARD,	/* one label below `domain` ("*.example.com") */
};

enum nc_proto {
	NC_PROTO_ANY = 0,
	NC_PROTO_TCP = IPPROTO_TCP,
	NC_PROTO_UDP = IPPROTO_UDP,
};

struct nc_rule {
	enum nc_rule_kind kind;
	char domain[254];	/* DOMAIN/WILDCARD: lower case, no dot at end;
				 * WILDCARD holds the part after "*." */
	struct in_addr addr;	/* ADDR: network address (host bits zero) */
	uint8_t plen;		/* ADDR: prefix length 0..32 */
	enum nc_proto proto;
	uint16_t port_lo;	/* 0..65535 each; 0-65535 means any port */
	uint16_t port_hi;
};

/* Parse one rule. Errors say what is wrong and where ("port 70000 out of
 * range 1-65535", "10.1.2.0/16 has host bits set (10.1.0.0/16?)"). */
int nc_rule_parse(const char *text, struct nc_rule *out, char *err,
    size_t errlen);
/* Canonical text of a rule (round-trips through nc_rule_parse). Returns the
 * length snprintf would have written. */
int nc_rule_format(const struct nc_rule *r, char *buf, size_t len);
/* "90s", "10m", "2h", "1d", "500ms" or bare seconds -> milliseconds. */
int nc_duration_parse(const char *text, uint64_t *ms, char *err,
    size_t errlen);

/* ---- the table ---- */

enum nc_mode {
	NC_MODE_OPEN = 1,	/* everything except always-deny and deny rules */
	NC_MODE_ALLOWLIST,	/* only allow rules */
	NC_MODE_CLOSED,		/* nothing */
};
const char *nc_mode_name(enum nc_mode m);
int nc_mode_parse(const char *s, enum nc_mode *m);

struct nc_cidr {
	struct in_addr addr;
	uint8_t plen;
};

/* Ops' global policy, what nc_egress_init() builds the table from. */
struct nc_global {
	const char *uplink;		/* masquerade only via this interface;
					 * NULL: via any interface */
	const char *tap_prefix;		/* every interface whose name starts
					 * so is a sandbox tap, and one not
					 * attached gets nothing (fail closed);
					 * NULL: only attached taps count */
	const struct nc_cidr *deny;	/* extra always-deny ranges */
	size_t ndeny;
	const struct in_addr *host_addrs; /* the host's own addresses */
	size_t nhost_addrs;
	const struct nc_cidr *permit;	/* carved out of always-deny (private
					 * ranges sandboxes may name in rules) */
	size_t npermit;
	uint16_t nflog_group;		/* NFLOG group of the denial log */
	uint32_t conn_limit;		/* per-sandbox cap on concurrent
					 * connections (conntrack entries of
					 * allowed flows), 0: none */
	uint32_t new_conn_rate;		/* new allowed connections per second
					 * per sandbox (a token bucket one
					 * second deep), 0: none */
	uint32_t log_rate;		/* denials logged per second per tap
					 * (a bucket two seconds deep); the
					 * rest are only counted (see
					 * nc_egress_log_suppressed); 0:
					 * NC_LOG_RATE */
};
#define NC_LOG_RATE 20
/* A connection over either limit is rejected (TCP reset, else ICMP
 * admin-prohibited) and logged with reason "conn-limit" / "rate-limit".
 * Connections the policy denies count toward neither. */

struct nc_sandbox {
	const char *ifname;		/* tap device on the host */
	struct in_addr ip;		/* guest address */
	uint8_t mac[6];			/* guest MAC */
	struct in_addr gw;		/* tap gateway: host side, berth's DNS */
	enum nc_mode mode;
};

struct nc_ctx;
struct nc_txn;

struct nc_ctx *nc_ctx_new(char *err, size_t errlen);
void nc_ctx_free(struct nc_ctx *ctx);

/*
 * Tightening cuts. A flow is admitted by the policy in force when it
 * starts and again whenever its sandbox gets a new generation: every
 * change that may take access away (detach and attach, a stricter mode,
 * an allow rule removed, a deny rule added, a new table) gives the
 * sandbox one in the same batch, and the next packet of each of its
 * flows, either way, is checked against the policy then in force: a
 * flow no longer allowed is reset like a new connection would be.
 * Loosening (an allow rule or a DNS-learned address added, a deny rule
 * removed) leaves flows alone. What expires by itself in the kernel (a
 * rule with a timeout, a DNS-learned address) is the caller's to follow
 * with nc_recheck() once it has expired (nc_dns does so for what it
 * learned). Flows are marked in conntrack (ct mark) with their
 * generation: berth owns the mark of connections sandboxes open.
 */

/* Create or atomically replace table inet berth: every element is gone
 * afterwards, so a daemon that starts reconciles with a transaction that
 * holds nc_txn_egress_init() and all its sandboxes (one atomic batch). */
int nc_egress_init(struct nc_ctx *ctx, const struct nc_global *g, char *err,
    size_t errlen);
/* Remove table inet berth (ENOENT if there is none). */
int nc_egress_fini(struct nc_ctx *ctx, char *err, size_t errlen);

int nc_sandbox_attach(struct nc_ctx *ctx, const struct nc_sandbox *sb,
    char *err, size_t errlen);
/* Remove every element that belongs to the sandbox (by tap name or guest
 * address), including allow/deny rules and DNS-learned entries; then
 * delete its conntrack entries (nc_ct_flush_guest: an error there comes
 * back after the table changed). */
int nc_sandbox_detach(struct nc_ctx *ctx, const char *ifname,
    struct in_addr ip, char *err, size_t errlen);
int nc_sandbox_set_mode(struct nc_ctx *ctx, struct in_addr ip,
    enum nc_mode mode, char *err, size_t errlen);
/* Give the sandbox with guest address ip a new generation (nothing when
 * it is not attached): its flows are checked again at their next
 * packet. */
int nc_recheck(struct nc_ctx *ctx, struct in_addr ip, char *err,
    size_t errlen);
/* Allow/deny rules must be NC_RULE_ADDR (domain rules go to the resolver,
 * which adds the addresses it resolved as /32 rules with a timeout).
 * timeout_ms 0 means no expiry. Overlapping range rules for one sandbox
 * are refused by the kernel (EEXIST / ENOTEMPTY): merge them first. */
int nc_allow_add(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen);
int nc_allow_del(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen);
int nc_deny_add(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen);
int nc_deny_del(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen);

/* Transactions: many changes, one atomic batch. nc_txn_new() reads the
 * ruleset generation; nc_txn_commit() returns -ERESTART when the ruleset
 * changed since, and the caller rebuilds the transaction. A failed add
 * leaves the transaction usable (nothing of that add is queued). */
struct nc_txn *nc_txn_new(struct nc_ctx *ctx, char *err, size_t errlen);
void nc_txn_free(struct nc_txn *t);
int nc_txn_egress_init(struct nc_txn *t, const struct nc_global *g,
    char *err, size_t errlen);
int nc_txn_sandbox_attach(struct nc_txn *t, const struct nc_sandbox *sb,
    char *err, size_t errlen);
int nc_txn_sandbox_detach(struct nc_txn *t, const char *ifname,
    struct in_addr ip, char *err, size_t errlen);
/* Like detach, but keeps the kernel's run-time state of the sandbox's
 * limits (its connection list and rate bucket): to re-attach it with new
 * rules in the same transaction without resetting its quota. */
int nc_txn_sandbox_clear(struct nc_txn *t, const char *ifname,
    struct in_addr ip, char *err, size_t errlen);
int nc_txn_set_mode(struct nc_txn *t, struct in_addr ip, enum nc_mode mode,
    char *err, size_t errlen);
int nc_txn_allow_add(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen);
int nc_txn_allow_del(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen);
int nc_txn_deny_add(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen);
/* An address the resolver learned for `name` (kept with the element, so
 * a restarted daemon can read it back; NULL: none): like an allow rule,
 * but in sets of their own (allow_dns_*), so that it never turns a
 * rule's element into one that expires, and the clear of a re-apply
 * removes it. */
int nc_txn_learned_add(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, const char *name, uint64_t timeout_ms,
    char *err, size_t errlen);
int nc_txn_recheck(struct nc_txn *t, struct in_addr ip, char *err,
    size_t errlen);
int nc_txn_deny_del(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen);
size_t nc_txn_size(const struct nc_txn *t);	/* queued messages */
int nc_txn_commit(struct nc_txn *t, char *err, size_t errlen);

/* Counts for tests and /metrics: rules in the table, elements in a set. */
int nc_egress_count_rules(struct nc_ctx *ctx, size_t *n, char *err,
    size_t errlen);
int nc_egress_count_elems(struct nc_ctx *ctx, const char *set, size_t *n,
    char *err, size_t errlen);
/* What the table in force holds, for a daemon that starts while its
 * sandboxes run: each attached sandbox (tap, guest, gateway, MAC; mode
 * 0), and each learned address with the name it was learned for and the
 * time it has left. cb returning nonzero stops. -ENOENT: no table. */
int nc_egress_attached(struct nc_ctx *ctx,
    int (*cb)(const struct nc_sandbox *sb, void *arg), void *arg,
    char *err, size_t errlen);
int nc_egress_learned(struct nc_ctx *ctx,
    int (*cb)(struct in_addr guest, struct in_addr addr, const char *name,
    uint64_t left_ms, void *arg), void *arg, char *err, size_t errlen);
/* Denials of the tap's sandbox not logged, over its log rate. */
int nc_egress_log_suppressed(struct nc_ctx *ctx, const char *ifname,
    uint64_t *n, char *err, size_t errlen);

/* ---- the host (/proc/sys of the caller's network namespace) ---- */

/* IPv4 forwarding on (guests reach nothing without it). */
int nc_host_forwarding(char *err, size_t errlen);
/* A sandbox tap's settings: strict rp_filter, arp_ignore 1, arp_announce
 * 2, no proxy ARP or redirects, no router advertisements or address
 * autoconfiguration from the guest (IPv6 stays up: what a guest sends
 * over it is denied and logged by the table). */
int nc_tap_harden(const char *ifname, char *err, size_t errlen);

/* ---- conntrack (ctnetlink) ---- */

/* Delete every conntrack entry whose original source is guest (a
 * sandbox removed, or its address about to serve another): *n gets how
 * many went. Nothing of a flow it cut survives to be ridden by the next
 * holder of the address. */
int nc_ct_flush_guest(struct in_addr guest, size_t *n, char *err,
    size_t errlen);
/* Count them (tests). */
int nc_ct_count_guest(struct in_addr guest, size_t *n, char *err,
    size_t errlen);

/* ---- denial log: NFLOG messages of the table's deny rules ---- */

struct nc_denial {
	struct timespec when;	/* kernel timestamp, else time of reading */
	char reason[32];	/* "not-allowed", "always-deny", "spoof-ip"...:
				 * the rule's prefix after "berth:" */
	int family;		/* AF_INET, or AF_INET6 (always denied) */
	struct in_addr src;	/* IPv4: what the packet claims as source */
	struct in_addr dst;
	struct in6_addr src6, dst6;	/* IPv6 */
	uint8_t proto;		/* IPPROTO_* */
	uint16_t sport, dport;	/* host order; 0 without ports */
	uint32_t indev;		/* ifindex it came in on: the tap, whatever
				 * source it claims (attribute by this) */
	uint32_t outdev;	/* ifindex it was going out on: the tap for
				 * a denied reply into a sandbox; 0: none */
};

struct nc_nflog;

/* Bind NFLOG group `group` (one reader per group and namespace). */
struct nc_nflog *nc_nflog_open(uint16_t group, char *err, size_t errlen);
/* A reader on a socket nc_nflog_open() bound in another process (passed
 * to an unprivileged reader, which cannot bind the group itself): reads
 * only. nc_nflog_close() closes fd. */
struct nc_nflog *nc_nflog_adopt(int fd, uint16_t group, char *err,
    size_t errlen);
void nc_nflog_close(struct nc_nflog *l);
int nc_nflog_fd(const struct nc_nflog *l);	/* poll it for POLLIN */
/* Read what is queued without blocking, at most NC_NFLOG_BATCH datagrams
 * a call (a flood must not hold the caller's loop: poll again); cb gets
 * each berth denial (other prefixes are skipped). Returns the number
 * delivered or -errno; -ENOBUFS means the kernel dropped log entries
 * (the reader keeps working). */
#define NC_NFLOG_BATCH 32
int nc_nflog_read(struct nc_nflog *l,
    void (*cb)(const struct nc_denial *d, void *arg), void *arg,
    char *err, size_t errlen);
/* Parse one NFULNL_MSG_PACKET (exposed for tests): 0, or -1 when it is
 * not a berth denial or is malformed. */
struct nlmsghdr;
int nc_nflog_parse(const struct nlmsghdr *nlh, struct nc_denial *d);

#endif
