/*
 * nc_egress.c — the berth-owned nftables table `inet berth` and the
 * per-sandbox operations on it (attach, detach, mode, allow, deny), each
 * one atomic batch built here and sent by nc_nft.c.
 *
 * Layout. Every per-sandbox fact is an element of a shared set or map
 * keyed by tap name or guest address, so the rules below are the same
 * seventy-odd whether one sandbox is attached or ten thousand, and a
 * packet costs a fixed number of hash / pipapo lookups:
 *
 *   prerouting (filter, raw prio, before conntrack): packets from a berth
 *     tap (@sb_ifaces) must carry that tap's MAC (@sb_mac) and guest IP
 *     (@sb_src); IPv6 from a tap is denied (guests have none). Spoofed
 *     packets are logged (as the tap's, whatever they claim) and
 *     dropped: they never reach conntrack, so they cannot ride another
 *     sandbox's established flows.
 *   input (filter): established/related first (the proxy's own
 *     connections); from a tap only DNS (udp/tcp 53) to that tap's
 *     gateway (@sb_gw: berth's resolver) is let in; anything else to the
 *     host is logged and rejected.
 *   forward (filter): first, packets of a flow admitted under its
 *     sandbox's current generation (ct original ip saddr . ct mark in
 *     @sb_cur), either way; see rules_forward() for why a flow is not
 *     admitted for good. Then nothing opens a flow into a sandbox, and
 *     every other packet of a sandbox's flow (new, or one whose
 *     generation is old) is judged by the flow's original tuple:
 *     sandbox -> sandbox, DNS/DoT to anyone but berth (@dns_ports),
 *     @always_deny (private, CGNAT, link-local incl. 169.254.169.254,
 *     loopback, multicast, reserved, host and ops ranges), per-sandbox
 *     deny rules (@deny_net: deny beats allow), then the sandbox's mode
 *     (@sb_mode: guest IP -> goto mode_open | mode_allowlist |
 *     mode_closed). mode_allowlist admits what the rules' @allow_ip
 *     (exact guest . dst . proto . port) or @allow_net (ranges) hold, or
 *     what the resolver learned (@allow_dns_ip, @allow_dns_net: apart,
 *     so an answer never makes a rule's element expire); mode_open
 *     admits everything that got there but ranges ops permit
 *     (@permitted), which need an allow rule in any mode.
 *   admit (regular chain): ops' per-sandbox limits on new connections:
 *     a connection cap (dynset on @sb_conns with `ct count over N`,
 *     one conntrack list per guest) and a new-connection rate (dynset
 *     on @sb_rate with `limit rate over N/second`, one token bucket per
 *     guest); over either is a logged denial. The rest is accepted and
 *     the flow marked with its sandbox's generation (@sb_gen). Those two
 *     limit sets are filled by the packet path, not by berth.
 *   log_<reason> (regular chains): every denial goes to the chain of its
 *     reason, which logs it through NFLOG (prefix "berth:<reason>", the
 *     denial log's source) within the tap's log rate (@log_rate) and
 *     only counts it above (@log_sup), then rejects it (chain deny: TCP
 *     reset, or ICMP admin-prohibited; never a silent drop, so a denied
 *     connect fails at once) or, before conntrack, drops it.
 *   postrouting (nat): guests (@guests) leaving via the uplink are
 *     masqueraded.
 * Replacing the table (nc_egress_init) is delete + create in one batch:
 * at no moment is a tap without rules.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>

#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_conntrack_tuple_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netlink.h>

#include "netctl.h"
#include "nc_nft.h"
#include "nc_egress.h"

/* nft's datatype ids, so that `nft list` prints keys properly. */
#define T_VERDICT 1
#define T_IPADDR 7
#define T_ETHERADDR 9
#define T_INET_PROTO 12
#define T_INET_SERVICE 13
#define T_MARK 19
#define T_IFNAME 41
#define TC(a, b) ((a) << 6 | (b))
#define BYTEORDER_HOST 1
#define BYTEORDER_BIG 2

#define NC_RETRIES 8

struct nc_ctx {
	struct nc_nft *nft;
};

/* Sandboxes whose generation this transaction replaces (regen()). */
struct regen {
	uint32_t ip;
	int removed;		/* detached here: no generation to replace */
};

struct nc_txn {
	struct nc_ctx *ctx;
	struct nc_batch *b;
	uint32_t gen;		/* ruleset generation the batch commits on */
	int fresh;		/* the batch creates the table anew */
	struct regen *rg;
	size_t nrg, caprg;
};

/* ---- set definitions ---- */

struct setdef {
	const char *name;
	uint32_t keytype, keylen, flags;
	uint8_t fields[4];	/* concatenation field lengths, bytes */
	int byteorder;		/* single-field keys only */
	uint32_t datatype;	/* maps: T_VERDICT or T_MARK; 0: a set */
	const char *comment;
	uint32_t size;		/* dynamic sets: most elements */
	uint64_t timeout_ms;	/* default element timeout */
	uint32_t family;	/* 0: inet; NFPROTO_ARP: table arp berth */
};

#define TUPLE TC(TC(TC(T_IPADDR, T_IPADDR), T_INET_PROTO), T_INET_SERVICE)

static const struct setdef sets[] = {
	{ "sb_ifaces", T_IFNAME, 16, 0, { 0 }, BYTEORDER_HOST, 0,
	  "tap devices of attached sandboxes", 0, 0, 0 },
	{ "sb_src", TC(T_IFNAME, T_IPADDR), 20, 0, { 16, 4 }, 0, 0,
	  "tap . the one source address its guest may use", 0, 0, 0 },
	{ "sb_mac", TC(T_IFNAME, T_ETHERADDR), 24, 0, { 16, 6 }, 0, 0,
	  "tap . the one MAC address its guest may use", 0, 0, 0 },
	{ "sb_gw", TC(T_IFNAME, T_IPADDR), 20, 0, { 16, 4 }, 0, 0,
	  "tap . its gateway address, where berth answers DNS", 0, 0, 0 },
	{ "guests", T_IPADDR, 4, 0, { 0 }, BYTEORDER_BIG, 0,
	  "guest addresses, masqueraded on the way out", 0, 0, 0 },
	{ "sb_mode", T_IPADDR, 4, NFT_SET_MAP, { 0 }, BYTEORDER_BIG, T_VERDICT,
	  "guest address -> its mode chain: open, allowlist or closed", 0, 0, 0 },
	{ "sb_gen", T_IPADDR, 4, NFT_SET_MAP, { 0 }, BYTEORDER_BIG, T_MARK,
	  "guest address -> generation of its policy: admitted flows carry "
	  "it as ct mark", 0, 0, 0 },
	{ "sb_cur", TC(T_IPADDR, T_MARK), 8, 0, { 4, 4 }, 0, 0,
	  "guest . its current generation: flows admitted under an older "
	  "one are checked again", 0, 0, 0 },
	{ "always_deny", T_IPADDR, 4, NFT_SET_INTERVAL, { 0 }, BYTEORDER_BIG,
	  0, "never reachable from a sandbox: private, CGNAT, link-local "
	  "(metadata), loopback, multicast, reserved, host, ops' ranges", 0, 0, 0 },
	{ "permitted", T_IPADDR, 4, NFT_SET_INTERVAL, { 0 }, BYTEORDER_BIG,
	  0, "private ranges ops permit: reachable only with the sandbox's "
	  "own allow rule, in any mode", 0, 0, 0 },
	{ "dns_ports", TC(T_INET_PROTO, T_INET_SERVICE), 8, NFT_SET_CONSTANT,
	  { 1, 2 }, 0, 0, "DNS and DNS over TLS: only berth's resolver", 0, 0, 0 },
	{ "deny_net", TUPLE, 16,
	  NFT_SET_INTERVAL | NFT_SET_TIMEOUT | NFT_SET_CONCAT,
	  { 4, 4, 1, 2 }, 0, 0,
	  "per-sandbox deny: guest . dst . proto . port ranges; beats allow", 0, 0, 0 },
	{ "allow_ip", TUPLE, 16, NFT_SET_TIMEOUT, { 4, 4, 1, 2 }, 0, 0,
	  "per-sandbox allow rules, exact guest . dst . proto . port", 0, 0, 0 },
	{ "allow_net", TUPLE, 16,
	  NFT_SET_INTERVAL | NFT_SET_TIMEOUT | NFT_SET_CONCAT,
	  { 4, 4, 1, 2 }, 0, 0,
	  "per-sandbox allow rules: guest . dst . proto . port ranges", 0, 0, 0 },
	/* What the resolver learned lives apart from the rules: an answer
	 * never turns a rule's permanent element into one that expires. */
	{ "allow_dns_ip", TUPLE, 16, NFT_SET_TIMEOUT, { 4, 4, 1, 2 }, 0, 0,
	  "DNS-learned, exact guest . dst . proto . port (expire with "
	  "TTL + grace)", 0, 0, 0 },
	{ "allow_dns_net", TUPLE, 16,
	  NFT_SET_INTERVAL | NFT_SET_TIMEOUT | NFT_SET_CONCAT,
	  { 4, 4, 1, 2 }, 0, 0,
	  "DNS-learned, guest . dst . proto . port ranges (expire with "
	  "TTL + grace)", 0, 0, 0 },
	/* Filled by the packet path (dynset), one element per guest that
	 * opens connections; guests live in a /16 pool, so 65535 fits. */
	{ "sb_conns", T_IPADDR, 4, NFT_SET_EVAL, { 0 }, BYTEORDER_BIG, 0,
	  "guest address -> its connections in conntrack (ct count cap)",
	  65535, 0, 0 },
	{ "sb_rate", T_IPADDR, 4, NFT_SET_EVAL | NFT_SET_TIMEOUT, { 0 },
	  BYTEORDER_BIG, 0, "guest address -> its new-connection rate "
	  "(limit); idle entries expire", 65535, 60000, 0 },
	{ "log_rate", T_IFNAME, 16, NFT_SET_EVAL | NFT_SET_TIMEOUT, { 0 },
	  BYTEORDER_HOST, 0, "tap -> the rate of its denial log (limit); "
	  "idle entries expire", 65535, 60000, 0 },
	{ "log_sup", T_IFNAME, 16, NFT_SET_EVAL, { 0 }, BYTEORDER_HOST, 0,
	  "tap -> denials not logged, over its log rate (counter)", 65535,
	  0, 0 },
};

/* Table arp berth: a guest sends ARP only as itself (its MAC and
 * address), and only to ask or answer its gateway. */
#define ARP_KEY TC(TC(TC(T_IFNAME, T_ETHERADDR), T_IPADDR), T_IPADDR)
static const struct setdef sets_arp[] = {
	{ "taps", T_IFNAME, 16, 0, { 0 }, BYTEORDER_HOST, 0,
	  "tap devices of attached sandboxes", 0, 0, NFPROTO_ARP },
	{ "sb_arp", ARP_KEY, 32, 0, { 16, 6, 4, 4 }, 0, 0,
	  "tap . guest MAC . guest address . gateway: the one ARP exchange "
	  "a guest has", 0, 0, NFPROTO_ARP },
};

/* Per-sandbox sets and where the sandbox's identity sits in their keys. */
enum { OWN_RULES, OWN_STATE, OWN_GEN };
static const struct {
	const char *set;
	int by_ifname;		/* key starts with the tap name, else the IP */
	int kind;		/* OWN_STATE: run-time state of the limits and
				 * the log (dynset); OWN_GEN: the generation,
				 * replaced by regen(); both survive a clear */
	uint32_t family;	/* 0: inet */
} owned[] = {
	{ "taps", 1, OWN_RULES, NFPROTO_ARP },
	{ "sb_arp", 1, OWN_RULES, NFPROTO_ARP },
	{ "sb_mode", 0, OWN_RULES, 0 }, { "sb_src", 1, OWN_RULES, 0 },
	{ "sb_mac", 1, OWN_RULES, 0 }, { "sb_gw", 1, OWN_RULES, 0 },
	{ "sb_ifaces", 1, OWN_RULES, 0 }, { "guests", 0, OWN_RULES, 0 },
	{ "deny_net", 0, OWN_RULES, 0 }, { "allow_ip", 0, OWN_RULES, 0 },
	{ "allow_net", 0, OWN_RULES, 0 }, { "allow_dns_ip", 0, OWN_RULES, 0 },
	{ "allow_dns_net", 0, OWN_RULES, 0 },
	{ "sb_gen", 0, OWN_GEN, 0 }, { "sb_cur", 0, OWN_GEN, 0 },
	{ "sb_conns", 0, OWN_STATE, 0 }, { "sb_rate", 0, OWN_STATE, 0 },
	{ "log_rate", 1, OWN_STATE, 0 }, { "log_sup", 1, OWN_STATE, 0 },
};

static uint32_t set_id_next = 1;

static struct nftnl_set *
set_new(const struct setdef *d)
{
	struct nftnl_set *s = nftnl_set_alloc();
	struct nftnl_udata_buf *u;
	int nf = 0;

	if (s == NULL)
		return NULL;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, NC_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, d->name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, d->family ? d->family :
	    NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_ID, set_id_next++);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, d->keytype);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, d->keylen);
	while (nf < 4 && d->fields[nf])
		nf++;
	/* Kernels since 6.x want the concat flag with a concat description. */
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS,
	    d->flags | (nf > 1 ? NFT_SET_CONCAT : 0));
	if (d->datatype == T_VERDICT) {
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 0);
	} else if (d->datatype != 0) {
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, d->datatype);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 4);
	}
	if (nf > 1)
		nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, d->fields,
		    (uint32_t)nf);
	if (d->size)
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, d->size);
	if (d->timeout_ms)
		nftnl_set_set_u64(s, NFTNL_SET_TIMEOUT, d->timeout_ms);
	if ((u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN)) != NULL) {
		if (d->byteorder)
			nftnl_udata_put_u32(u, NFTNL_UDATA_SET_KEYBYTEORDER,
			    (uint32_t)d->byteorder);
		if (d->datatype == T_MARK)
			nftnl_udata_put_u32(u, NFTNL_UDATA_SET_DATABYTEORDER,
			    BYTEORDER_HOST);
		nftnl_udata_put_strz(u, NFTNL_UDATA_SET_COMMENT, d->comment);
		nftnl_set_set_data(s, NFTNL_SET_USERDATA,
		    nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
	}
	return s;
}

/* ---- rule building ---- */

static struct nftnl_expr *
ex(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);

	if (e != NULL)
		nftnl_rule_add_expr(r, e);
	return e;
}

/* nftnl setters on a NULL expr would crash; allocation failures are
 * caught once per rule by rule_ok(). */
#define EX(r, name, e) if (((e) = ex((r), (name))) == NULL) return

static void
x_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr *e;

	EX(r, "meta", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
}

static void
x_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len,
    uint32_t dreg)
{
	struct nftnl_expr *e;

	EX(r, "payload", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
}

static void
x_cmp(struct nftnl_rule *r, uint32_t sreg, uint32_t op, const void *data,
    uint32_t len)
{
	struct nftnl_expr *e;

	EX(r, "cmp", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

static void
x_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set, int inv)
{
	struct nftnl_expr *e;

	EX(r, "lookup", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	if (inv)
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS,
		    NFT_LOOKUP_F_INV);
}

static void
x_vmap(struct nftnl_rule *r, uint32_t sreg, const char *set)
{
	struct nftnl_expr *e;

	EX(r, "lookup", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
}

static void
x_ipv4(struct nftnl_rule *r)
{
	uint8_t v = NFPROTO_IPV4;

	x_meta(r, NFT_META_NFPROTO, NFT_REG_1);
	x_cmp(r, NFT_REG_1, NFT_CMP_EQ, &v, 1);
}

static void
x_l4proto(struct nftnl_rule *r, uint8_t proto)
{
	x_meta(r, NFT_META_L4PROTO, NFT_REG_1);
	x_cmp(r, NFT_REG_1, NFT_CMP_EQ, &proto, 1);
}

static void
x_ctstate(struct nftnl_rule *r, uint32_t mask)
{
	struct nftnl_expr *e;
	uint32_t zero = 0;

	EX(r, "ct", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	EX(r, "bitwise", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
	x_cmp(r, NFT_REG_1, NFT_CMP_NEQ, &zero, 4);
}

/* ct KEY [original|reply] into dreg; dir < 0: a key without direction. */
static void
x_ct(struct nftnl_rule *r, uint32_t key, int dir, uint32_t dreg)
{
	struct nftnl_expr *e;

	EX(r, "ct", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
	if (dir >= 0)
		nftnl_expr_set_u8(e, NFTNL_EXPR_CT_DIR, (uint8_t)dir);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, dreg);
}

static void
x_ctdir(struct nftnl_rule *r, uint8_t dir)
{
	x_ct(r, NFT_CT_DIRECTION, -1, NFT_REG_1);
	x_cmp(r, NFT_REG_1, NFT_CMP_EQ, &dir, 1);
}

static void
x_ctmark_set(struct nftnl_rule *r, uint32_t sreg)
{
	struct nftnl_expr *e;

	EX(r, "ct", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, sreg);
}

/* sreg's key looked up in map set; its data into dreg (no match: the
 * rule stops). */
static void
x_map(struct nftnl_rule *r, uint32_t sreg, const char *set, uint32_t dreg)
{
	struct nftnl_expr *e;

	EX(r, "lookup", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, dreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
}

static void
x_counter(struct nftnl_rule *r)
{
	struct nftnl_expr *e;

	EX(r, "counter", e);
	(void)e;
}

static void
x_log(struct nftnl_rule *r, const char *prefix, uint16_t group)
{
	struct nftnl_expr *e;

	EX(r, "log", e);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
	nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
	/* network + transport headers are all the denial log needs */
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, 96);
}

static void
x_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
	struct nftnl_expr *e;

	EX(r, "immediate", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	if (chain != NULL)
		nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
}

static void
x_reject(struct nftnl_rule *r, uint32_t type, uint8_t code)
{
	struct nftnl_expr *e;

	EX(r, "reject", e);
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
}

static void
x_masq(struct nftnl_rule *r)
{
	struct nftnl_expr *e;

	EX(r, "masq", e);
	(void)e;
}

/* A dynset on @set keyed by the guest (ip saddr, reg 1; or what the
 * caller loaded into reg 1 with key_loaded) carrying one
 * stateful expression: the rule goes on only when that expression
 * matches for this guest's element. Without the inner expression the
 * rule would match every packet, so allocation failure leaves the rule
 * empty (rule_add refuses it). */
static void
x_dynset(struct nftnl_rule *r, const char *set, uint32_t op,
    uint64_t timeout_ms, struct nftnl_expr *inner, int key_loaded)
{
	struct nftnl_expr *e;

	if (inner == NULL)
		return;
	if ((e = nftnl_expr_alloc("dynset")) == NULL) {
		nftnl_expr_free(inner);
		return;
	}
	if (!key_loaded)
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, op);
	nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, set);
	if (timeout_ms)
		nftnl_expr_set_u64(e, NFTNL_EXPR_DYNSET_TIMEOUT, timeout_ms);
	nftnl_expr_set(e, NFTNL_EXPR_DYNSET_EXPR, inner, 0);
	nftnl_rule_add_expr(r, e);
}

/* add @set { ip saddr ct count over max }: the guest has more than max
 * connections in conntrack, this new one included. */
static void
x_conncap(struct nftnl_rule *r, const char *set, uint32_t max)
{
	struct nftnl_expr *c = nftnl_expr_alloc("connlimit");

	if (c != NULL) {
		nftnl_expr_set_u32(c, NFTNL_EXPR_CONNLIMIT_COUNT, max);
		nftnl_expr_set_u32(c, NFTNL_EXPR_CONNLIMIT_FLAGS,
		    NFT_CONNLIMIT_F_INV);
	}
	x_dynset(r, set, NFT_DYNSET_OP_ADD, 0, c, 0);
}

/* update @set { ip saddr limit rate over rate/second burst b packets }:
 * the guest's token bucket (b packets deep, refilled at rate/s) is
 * empty. */
static void
x_ratecap(struct nftnl_rule *r, const char *set, uint32_t rate,
    uint32_t burst, uint64_t timeout_ms)
{
	struct nftnl_expr *l = nftnl_expr_alloc("limit");

	if (l != NULL) {
		nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_RATE, rate);
		nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_UNIT, 1);
		nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_BURST, burst);
		nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
		nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
	}
	x_dynset(r, set, NFT_DYNSET_OP_UPDATE, timeout_ms, l, 0);
}

/* The flow's original tuple, whichever way this packet goes: ct original
 * ip saddr . ip daddr . protocol . proto-dst into REG32_00..03. A packet
 * of a new flow is that tuple; a reply of an established one is judged
 * by the flow it belongs to. No conntrack entry: the rule stops. */
static void
x_tuple(struct nftnl_rule *r)
{
	x_ct(r, NFT_CT_SRC_IP, IP_CT_DIR_ORIGINAL, NFT_REG32_00);
	x_ct(r, NFT_CT_DST_IP, IP_CT_DIR_ORIGINAL, NFT_REG32_01);
	x_ct(r, NFT_CT_PROTOCOL, IP_CT_DIR_ORIGINAL, NFT_REG32_02);
	x_ct(r, NFT_CT_PROTO_DST, IP_CT_DIR_ORIGINAL, NFT_REG32_03);
}

/* "oifname/iifname is a sandbox tap" and the log rate of that tap: over
 * it, the denial is counted in @log_sup (netctl egress log shows the
 * count) and not logged. */
static void
x_logcap(struct nftnl_rule *r, uint32_t meta_key, uint32_t rate,
    uint32_t burst, int *failed)
{
	struct nftnl_expr *l = nftnl_expr_alloc("limit");
	struct nftnl_expr *c = nftnl_expr_alloc("counter");

	if (l != NULL) {
		nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_RATE, rate);
		nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_UNIT, 1);
		nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_BURST, burst);
		nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
		nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
	}
	if (l == NULL || c == NULL) {	/* the rule would match anything */
		if (l != NULL)
			nftnl_expr_free(l);
		if (c != NULL)
			nftnl_expr_free(c);
		*failed = 1;
		return;
	}
	x_meta(r, meta_key, NFT_REG_1);
	x_dynset(r, "log_rate", NFT_DYNSET_OP_UPDATE, 60000, l, 1);
	x_dynset(r, "log_sup", NFT_DYNSET_OP_ADD, 0, c, 1);
}

struct rulectx;
static void x_iface(struct rulectx *rc, struct nftnl_rule *r, uint32_t key,
    int inv);

static int
ifname_ok(const char *name, char *err, size_t len)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n == 0 || n >= IFNAMSIZ || strchr(name, '/') != NULL ||
	    strpbrk(name, " \t\n") != NULL)
		return nc_errf(err, len, "interface name '%s' is not valid "
		    "(1-%d characters, no '/' or spaces)", name ? name : "",
		    IFNAMSIZ - 1);
	return 0;
}

/* The rules of one chain, as data the reader of this file can check
 * against the layout comment above. */
struct rulectx {
	struct nc_batch *b;
	uint32_t family;	/* 0: inet */
	const char *chain;
	const struct nc_global *g;
	int failed;
	size_t nrules;
};

/* "iifname/oifname is a sandbox tap": by name prefix when ops set one
 * (an unattached tap is still a tap, and fails closed), else by
 * membership of @sb_ifaces. */
static void
x_iface(struct rulectx *rc, struct nftnl_rule *r, uint32_t key, int inv)
{
	const char *p = rc->g->tap_prefix;

	x_meta(r, key, NFT_REG_1);
	if (p != NULL && p[0] != '\0')
		x_cmp(r, NFT_REG_1, inv ? NFT_CMP_NEQ : NFT_CMP_EQ, p,
		    (uint32_t)strlen(p));
	else
		x_lookup(r, NFT_REG_1, rc->family == NFPROTO_ARP ? "taps" :
		    "sb_ifaces", inv);
}

static struct nftnl_rule *
rule_new(struct rulectx *rc, const char *comment)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nftnl_udata_buf *u;

	if (r == NULL)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NC_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, rc->chain);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, rc->family ? rc->family :
	    NFPROTO_INET);
	if ((u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN)) != NULL) {
		nftnl_udata_put_strz(u, NFTNL_UDATA_RULE_COMMENT, comment);
		nftnl_rule_set_data(r, NFTNL_RULE_USERDATA,
		    nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
	}
	return r;
}

static void
rule_add(struct rulectx *rc, struct nftnl_rule *r, const char *comment)
{
	char what[200];
	struct nftnl_expr_iter *it;
	size_t nexpr = 0;

	if (r == NULL) {
		rc->failed = 1;
		return;
	}
	if ((it = nftnl_expr_iter_create(r)) != NULL) {
		while (nftnl_expr_iter_next(it) != NULL)
			nexpr++;
		nftnl_expr_iter_destroy(it);
	}
	snprintf(what, sizeof(what), "rule %zu of chain %s %s %s (\"%s\")",
	    ++rc->nrules, rc->family == NFPROTO_ARP ? "arp" : "inet",
	    NC_TABLE, rc->chain, comment);
	if (nexpr == 0 || nc_batch_rule(rc->b, NFT_MSG_NEWRULE,
	    NLM_F_CREATE | NLM_F_APPEND, r, what) < 0)
		rc->failed = 1;
	nftnl_rule_free(r);
}

#define RULE(comment, body) do {					\
		struct nftnl_rule *r_ = rule_new(rc, comment);		\
		if (r_ != NULL) { struct nftnl_rule *r = r_; body; }	\
		rule_add(rc, r_, comment);				\
	} while (0)

/*
 * Denials. The deciding rule counts the packet and goes to the chain of
 * its reason, log_<reason>: there each tap's denials pass a rate limit
 * (@log_rate, per tap) before NFLOG "berth:<reason>" logs them; over it
 * they are only counted (@log_sup, per tap), so a guest that floods
 * denied packets cannot flood the reader or push its own log out. Then
 * the verdict: reject (chain deny) or, for spoofed packets before
 * conntrack, drop.
 */
static const struct {
	const char *reason;
	int drop;
} reasons[] = {
	{ "spoof-mac", 1 }, { "ipv6", 1 }, { "spoof-ip", 1 },
	{ "host", 0 }, { "sandbox", 0 }, { "dns", 0 }, { "always-deny", 0 },
	{ "deny-rule", 0 }, { "not-allowed", 0 }, { "closed", 0 },
	{ "no-policy", 0 }, { "conn-limit", 0 }, { "rate-limit", 0 },
};
#define NREASONS (sizeof(reasons) / sizeof(reasons[0]))

static void
log_chain(char *buf, size_t len, const char *reason)
{
	char *p;

	snprintf(buf, len, "log_%s", reason);
	for (p = buf; *p != '\0'; p++)
		if (*p == '-')
			*p = '_';
}

static void
x_deny(struct rulectx *rc, struct nftnl_rule *r, const char *reason)
{
	char chain[64];

	log_chain(chain, sizeof(chain), reason);
	x_counter(r);
	x_verdict(r, NFT_GOTO, chain);
}

static void
x_end(struct nftnl_rule *r, int drop)
{
	if (drop)
		x_verdict(r, NF_DROP, NULL);
	else
		x_verdict(r, NFT_GOTO, "deny");
}

static void
rules_deny(struct rulectx *rc)
{
	const struct nc_global *g = rc->g;
	uint32_t rate = g->log_rate ? g->log_rate : NC_LOG_RATE;
	char chain[64], prefix[64];
	size_t i;

	rc->chain = "deny";
	RULE("denied TCP: reset, the connect fails at once", {
		x_l4proto(r, IPPROTO_TCP);
		x_reject(r, NFT_REJECT_TCP_RST, 0);
	});
	RULE("denied other: ICMP administratively prohibited", {
		x_reject(r, NFT_REJECT_ICMPX_UNREACH,
		    NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	});
	for (i = 0; i < NREASONS; i++) {
		int drop = reasons[i].drop;

		log_chain(chain, sizeof(chain), reasons[i].reason);
		rc->chain = chain;
		snprintf(prefix, sizeof(prefix), "berth:%s", reasons[i].reason);
		RULE("from a tap over its log rate: counted, not logged", {
			x_iface(rc, r, NFT_META_IIFNAME, 0);
			x_logcap(r, NFT_META_IIFNAME, rate, 2 * rate,
			    &rc->failed);
			x_end(r, drop);
		});
		RULE("into a tap (a reply) over its log rate: counted, not "
		    "logged", {
			x_iface(rc, r, NFT_META_IIFNAME, 1);
			x_iface(rc, r, NFT_META_OIFNAME, 0);
			x_logcap(r, NFT_META_OIFNAME, rate, 2 * rate,
			    &rc->failed);
			x_end(r, drop);
		});
		RULE(prefix, {
			x_log(r, prefix, g->nflog_group);
			x_end(r, drop);
		});
	}
}

static void
rules_modes(struct rulectx *rc)
{
	static const struct {
		const char *set, *comment;
	} allow[] = {
		{ "allow_ip", "allowlist: exact guest . dst . proto . port" },
		{ "allow_net", "allowlist: guest . CIDR . proto . port range" },
		{ "allow_dns_ip", "allowlist: DNS-learned, exact" },
		{ "allow_dns_net", "allowlist: DNS-learned, port ranges" },
	};
	size_t i;

	rc->chain = "mode_open";
	RULE("open: a range ops permit still needs the sandbox's allow rule", {
		x_ct(r, NFT_CT_DST_IP, IP_CT_DIR_ORIGINAL, NFT_REG_1);
		x_lookup(r, NFT_REG_1, "permitted", 0);
		x_verdict(r, NFT_GOTO, "mode_allowlist");
	});
	RULE("open: anything that passed always-deny and deny rules", {
		x_verdict(r, NFT_GOTO, "admit");
	});
	rc->chain = "mode_allowlist";
	for (i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		RULE(allow[i].comment, {
			x_tuple(r);
			x_lookup(r, NFT_REG32_00, allow[i].set, 0);
			x_verdict(r, NFT_GOTO, "admit");
		});
	RULE("allowlist: not on this sandbox's list", {
		x_deny(rc, r, "not-allowed");
	});
	rc->chain = "mode_closed";
	RULE("closed: no egress at all", {
		x_deny(rc, r, "closed");
	});
}

/* A new connection the policy allows still has to fit the sandbox's
 * share (ops' global limits): what is over is rejected loudly like any
 * other denial, so the agent sees why at once. Only new connections the
 * policy allows count, so denied attempts never use up a sandbox's
 * quota, and a flow checked again after a policy change is not counted
 * twice. Every admitted flow carries its sandbox's generation as its
 * conntrack mark: the first rule of forward lets it pass while that is
 * current. */
static void
rules_admit(struct rulectx *rc)
{
	const struct nc_global *g = rc->g;
	char c[160];

	rc->chain = "admit";
	if (g->conn_limit > 0) {
		snprintf(c, sizeof(c), "over %u concurrent connections of this "
		    "sandbox (ops' cap, ct count per guest)", g->conn_limit);
		RULE(c, {
			x_ctstate(r, NF_CT_STATE_BIT(IP_CT_NEW));
			x_ipv4(r);
			x_conncap(r, "sb_conns", g->conn_limit);
			x_deny(rc, r, "conn-limit");
		});
	}
	if (g->new_conn_rate > 0) {
		/* The kernel's bucket holds `burst` packets: one second's
		 * worth, so N at once is as fine as N spread over a second. */
		snprintf(c, sizeof(c), "over %u new connections/s of this "
		    "sandbox (ops' rate limit, a bucket of %u)",
		    g->new_conn_rate, g->new_conn_rate);
		RULE(c, {
			x_ctstate(r, NF_CT_STATE_BIT(IP_CT_NEW));
			x_ipv4(r);
			x_ratecap(r, "sb_rate", g->new_conn_rate,
			    g->new_conn_rate, 60000);
			x_deny(rc, r, "rate-limit");
		});
	}
	RULE("allowed: the flow carries its sandbox's policy generation", {
		x_ct(r, NFT_CT_SRC_IP, IP_CT_DIR_ORIGINAL, NFT_REG_1);
		x_map(r, NFT_REG_1, "sb_gen", NFT_REG_1);
		x_ctmark_set(r, NFT_REG_1);
		x_verdict(r, NF_ACCEPT, NULL);
	});
	RULE("allowed, no generation known: checked again at every packet", {
		x_verdict(r, NF_ACCEPT, NULL);
	});
}

static void
rules_prerouting(struct rulectx *rc)
{
	rc->chain = "prerouting";
	RULE("not from a sandbox tap: not berth's business", {
		x_iface(rc, r, NFT_META_IIFNAME, 1);
		x_verdict(r, NFT_RETURN, NULL);
	});
	RULE("spoofed MAC: not the tap's guest MAC", {
		uint16_t ether = ARPHRD_ETHER;

		x_meta(r, NFT_META_IIFTYPE, NFT_REG_1);
		x_cmp(r, NFT_REG_1, NFT_CMP_EQ, &ether, 2);
		x_meta(r, NFT_META_IIFNAME, NFT_REG32_00);
		x_payload(r, NFT_PAYLOAD_LL_HEADER, 6, 6, NFT_REG32_04);
		x_lookup(r, NFT_REG32_00, "sb_mac", 1);
		x_deny(rc, r, "spoof-mac");
	});
	RULE("IPv6 from a guest: sandboxes have no IPv6", {
		uint8_t v6 = NFPROTO_IPV6;

		x_meta(r, NFT_META_NFPROTO, NFT_REG_1);
		x_cmp(r, NFT_REG_1, NFT_CMP_EQ, &v6, 1);
		x_deny(rc, r, "ipv6");
	});
	RULE("spoofed source: not the tap's guest address", {
		x_ipv4(r);
		x_meta(r, NFT_META_IIFNAME, NFT_REG32_00);
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG32_04);
		x_lookup(r, NFT_REG32_00, "sb_src", 1);
		x_deny(rc, r, "spoof-ip");
	});
}

static void
rules_input(struct rulectx *rc)
{
	static const uint8_t proto[2] = { IPPROTO_UDP, IPPROTO_TCP };
	uint16_t dns = htons(53);
	int i;

	rc->chain = "input";
	RULE("replies to the host's own connections (the proxy)", {
		x_ctstate(r, NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
		    NF_CT_STATE_BIT(IP_CT_RELATED));
		x_verdict(r, NF_ACCEPT, NULL);
	});
	RULE("not from a sandbox tap: not berth's business", {
		x_iface(rc, r, NFT_META_IIFNAME, 1);
		x_verdict(r, NFT_RETURN, NULL);
	});
	for (i = 0; i < 2; i++) {
		RULE(i == 0 ? "guest DNS (udp) to berth's resolver on its "
		    "gateway" : "guest DNS (tcp) to berth's resolver on its "
		    "gateway", {
			x_ipv4(r);
			x_meta(r, NFT_META_IIFNAME, NFT_REG32_00);
			x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4,
			    NFT_REG32_04);
			x_lookup(r, NFT_REG32_00, "sb_gw", 0);
			x_l4proto(r, proto[i]);
			x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2,
			    NFT_REG_1);
			x_cmp(r, NFT_REG_1, NFT_CMP_EQ, &dns, 2);
			x_verdict(r, NF_ACCEPT, NULL);
		});
	}
	RULE("sandbox to host: only DNS on the gateway", {
		x_deny(rc, r, "host");
	});
}

/*
 * Every packet of a sandbox's flow, either way, is judged by the flow's
 * original tuple (ct original ...), and a flow admitted once is not
 * admitted for good: it passes at the top only while its conntrack mark
 * is its sandbox's current generation (@sb_cur). Any change that may
 * take access away gives the sandbox a new generation in the same batch
 * (see regen()), so the next packet of each of its flows, from the guest
 * or to it, goes through the policy again: still allowed, it is marked
 * anew and goes on; no longer allowed, it is denied (reset) like a new
 * connection would be. Loosening does not touch generations.
 */
static void
rules_forward(struct rulectx *rc)
{
	rc->chain = "forward";
	RULE("a flow its sandbox's current policy admitted (either way)", {
		x_ct(r, NFT_CT_SRC_IP, IP_CT_DIR_ORIGINAL, NFT_REG32_00);
		x_ct(r, NFT_CT_MARK, -1, NFT_REG32_01);
		x_lookup(r, NFT_REG32_00, "sb_cur", 0);
		x_verdict(r, NF_ACCEPT, NULL);
	});
	RULE("neither from nor to a sandbox tap: not berth's business", {
		x_iface(rc, r, NFT_META_IIFNAME, 1);
		x_iface(rc, r, NFT_META_OIFNAME, 1);
		x_verdict(r, NFT_RETURN, NULL);
	});
	RULE("invalid or untracked at a sandbox tap", {
		x_ctstate(r, NF_CT_STATE_INVALID_BIT |
		    NF_CT_STATE_UNTRACKED_BIT);
		x_counter(r);
		x_verdict(r, NF_DROP, NULL);
	});
	RULE("nothing opens connections into a sandbox by forwarding", {
		x_iface(rc, r, NFT_META_IIFNAME, 1);
		x_ctdir(r, IP_CT_DIR_ORIGINAL);
		x_counter(r);
		x_verdict(r, NF_DROP, NULL);
	});
	RULE("a sandbox answers no flow it did not open", {
		x_iface(rc, r, NFT_META_IIFNAME, 0);
		x_ctdir(r, IP_CT_DIR_REPLY);
		x_counter(r);
		x_verdict(r, NF_DROP, NULL);
	});
	RULE("sandbox to sandbox", {
		x_iface(rc, r, NFT_META_IIFNAME, 0);
		x_iface(rc, r, NFT_META_OIFNAME, 0);
		x_deny(rc, r, "sandbox");
	});
	RULE("DNS or DoT to anyone but berth's resolver", {
		x_ct(r, NFT_CT_PROTOCOL, IP_CT_DIR_ORIGINAL, NFT_REG32_00);
		x_ct(r, NFT_CT_PROTO_DST, IP_CT_DIR_ORIGINAL, NFT_REG32_01);
		x_lookup(r, NFT_REG32_00, "dns_ports", 0);
		x_deny(rc, r, "dns");
	});
	RULE("always-deny destinations (ops' global policy)", {
		x_ct(r, NFT_CT_DST_IP, IP_CT_DIR_ORIGINAL, NFT_REG_1);
		x_lookup(r, NFT_REG_1, "always_deny", 0);
		x_deny(rc, r, "always-deny");
	});
	RULE("this sandbox's deny rules: deny beats allow", {
		x_tuple(r);
		x_lookup(r, NFT_REG32_00, "deny_net", 0);
		x_deny(rc, r, "deny-rule");
	});
	RULE("the sandbox's mode: guest address -> mode chain", {
		x_ct(r, NFT_CT_SRC_IP, IP_CT_DIR_ORIGINAL, NFT_REG_1);
		x_vmap(r, NFT_REG_1, "sb_mode");
	});
	RULE("a tap whose guest has no mode: fail closed", {
		x_deny(rc, r, "no-policy");
	});
}

static void
rules_postrouting(struct rulectx *rc)
{
	char ifn[IFNAMSIZ];

	rc->chain = "postrouting";
	RULE("guests leave with the host's address", {
		x_ipv4(r);
		if (rc->g->uplink != NULL && rc->g->uplink[0] != '\0') {
			memset(ifn, 0, sizeof(ifn));
			strncpy(ifn, rc->g->uplink, sizeof(ifn) - 1);
			x_meta(r, NFT_META_OIFNAME, NFT_REG_1);
			x_cmp(r, NFT_REG_1, NFT_CMP_EQ, ifn, IFNAMSIZ);
		}
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
		x_lookup(r, NFT_REG_1, "guests", 0);
		x_masq(r);
	});
}

/* ARP from a tap: only the guest's MAC and address, and only to or from
 * its gateway (asking for it, answering it). A guest cannot poison the
 * host's neighbour entries for other addresses or fill its table. */
static void
rules_arp(struct rulectx *rc)
{
	static const uint8_t ether_ipv4[6] = { 0, 1, 0x08, 0x00, 6, 4 };

	rc->family = NFPROTO_ARP;
	rc->chain = "input";
	RULE("not from a sandbox tap: not berth's business", {
		x_iface(rc, r, NFT_META_IIFNAME, 1);
		x_verdict(r, NFT_RETURN, NULL);
	});
	RULE("the guest's own MAC and address, with its gateway", {
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 0, 6, NFT_REG_1);
		x_cmp(r, NFT_REG_1, NFT_CMP_EQ, ether_ipv4, 6);
		x_meta(r, NFT_META_IIFNAME, NFT_REG32_00);
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 8, 6, NFT_REG32_04);
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 14, 4, NFT_REG32_06);
		x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 4, NFT_REG32_07);
		x_lookup(r, NFT_REG32_00, "sb_arp", 0);
		x_verdict(r, NF_ACCEPT, NULL);
	});
	RULE("any other ARP from a sandbox tap: dropped", {
		x_counter(r);
		x_verdict(r, NF_DROP, NULL);
	});
	rc->family = 0;
}

/* ---- chains ---- */

static int add_chain_fam(struct nc_batch *b, uint32_t family,
    const char *name, const char *type, int hook, int prio,
    const char *comment);

static int
add_chain(struct nc_batch *b, const char *name, const char *type, int hook,
    int prio, const char *comment)
{
	return add_chain_fam(b, NFPROTO_INET, name, type, hook, prio,
	    comment);
}

static int
add_chain_fam(struct nc_batch *b, uint32_t family, const char *name,
    const char *type, int hook, int prio, const char *comment)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nftnl_udata_buf *u;
	char what[96];
	int ret;

	if (c == NULL)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NC_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, family);
	if (type != NULL) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	if ((u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN)) != NULL) {
		nftnl_udata_put_strz(u, NFTNL_UDATA_CHAIN_COMMENT, comment);
		nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA,
		    nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
	}
	snprintf(what, sizeof(what), "chain %s %s %s", family == NFPROTO_ARP ?
	    "arp" : "inet", NC_TABLE, name);
	ret = nc_batch_chain(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL,
	    c, what);
	nftnl_chain_free(c);
	return ret;
}

static int add_table_fam(struct nc_batch *b, uint32_t family,
    uint16_t type, uint16_t flags, const char *comment);

static int
add_table(struct nc_batch *b, uint16_t type, uint16_t flags,
    const char *comment)
{
	return add_table_fam(b, NFPROTO_INET, type, flags, comment);
}

static int
add_table_fam(struct nc_batch *b, uint32_t family, uint16_t type,
    uint16_t flags, const char *comment)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_udata_buf *u;
	char what[64];
	int ret;

	if (t == NULL)
		return -1;
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, NC_TABLE);
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, family);
	if (comment != NULL &&
	    (u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN)) != NULL) {
		nftnl_udata_put_strz(u, NFTNL_UDATA_TABLE_COMMENT, comment);
		nftnl_table_set_data(t, NFTNL_TABLE_USERDATA,
		    nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
	}
	snprintf(what, sizeof(what), "table %s %s", family == NFPROTO_ARP ?
	    "arp" : "inet", NC_TABLE);
	ret = nc_batch_table(b, type, flags, t, what);
	nftnl_table_free(t);
	return ret;
}

/* ---- elements ---- */

struct elem {
	const char *set;
	uint8_t key[32], kend[32];
	uint32_t klen;
	int has_end;
	int has_data;		/* a map's data: data[0..4) */
	uint8_t data[4];
	uint32_t flags;		/* NFT_SET_ELEM_INTERVAL_END */
	uint64_t timeout_ms;
	const char *gotochain;	/* verdict-map data */
	int open_end;		/* udata: interval runs to the top */
	const char *comment;	/* udata: the name an address was learned
				 * for (read back after a restart) */
	uint32_t family;	/* 0: inet */
};

static int
put_elem(struct nc_batch *b, uint16_t type, const struct elem *el,
    const char *what)
{
	struct nftnl_set *s = nftnl_set_alloc();
	struct nftnl_set_elem *e;
	struct nftnl_udata_buf *u;
	int ret;

	if (s == NULL)
		return -1;
	if ((e = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		return -1;
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, NC_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, el->set);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, el->family ? el->family :
	    NFPROTO_INET);
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, el->key, el->klen);
	if (el->has_end)
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY_END, el->kend,
		    el->klen);
	if (el->flags)
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, el->flags);
	if (el->timeout_ms && type == NFT_MSG_NEWSETELEM)
		nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT,
		    el->timeout_ms);
	if (el->has_data && type == NFT_MSG_NEWSETELEM)
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, el->data, 4);
	if (el->gotochain != NULL && type == NFT_MSG_NEWSETELEM) {
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NFT_GOTO);
		nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, el->gotochain);
	}
	if ((el->open_end || (el->comment != NULL &&
	    type == NFT_MSG_NEWSETELEM)) &&
	    (u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN)) != NULL) {
		if (el->open_end)
			nftnl_udata_put_u32(u, NFTNL_UDATA_SET_ELEM_FLAGS,
			    1 /* NFTNL_SET_ELEM_F_INTERVAL_OPEN */);
		if (el->comment != NULL && type == NFT_MSG_NEWSETELEM)
			nftnl_udata_put_strz(u, NFTNL_UDATA_SET_ELEM_COMMENT,
			    el->comment);
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_USERDATA,
		    nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
		nftnl_udata_buf_free(u);
	}
	nftnl_set_elem_add(s, e);
	ret = nc_batch_elems(b, type,
	    type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, s, what);
	nftnl_set_free(s);
	return ret;
}

static void
key_ifname(uint8_t *k, const char *ifname)
{
	memset(k, 0, IFNAMSIZ);
	memcpy(k, ifname, strlen(ifname));
}

/* guest . dst . proto . port, each field in its own 32-bit register. */
static void
key_tuple(uint8_t *k, struct in_addr guest, uint32_t dst_host,
    uint8_t proto, uint16_t port)
{
	uint32_t d = htonl(dst_host);
	uint16_t p = htons(port);

	memset(k, 0, 16);
	memcpy(k, &guest.s_addr, 4);
	memcpy(k + 4, &d, 4);
	k[8] = proto;
	memcpy(k + 12, &p, 2);
}

static const char *
ip_str(struct in_addr a, char *buf)
{
	return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static const char *
mode_chain(enum nc_mode m)
{
	switch (m) {
	case NC_MODE_OPEN:
		return "mode_open";
	case NC_MODE_ALLOWLIST:
		return "mode_allowlist";
	case NC_MODE_CLOSED:
		return "mode_closed";
	}
	return NULL;
}

/* ---- always-deny ranges: sorted, merged, minus ops' permits ---- */

struct range {
	uint32_t lo, hi;
};

static int
range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static struct range
cidr_range(struct in_addr a, uint8_t plen)
{
	uint32_t h = ntohl(a.s_addr);
	uint32_t m = plen == 0 ? 0 : 0xffffffffU << (32 - (plen > 32 ? 32 :
	    plen));
	struct range r = { h & m, (h & m) | ~m };

	return r;
}

static const struct {
	const char *net;
	uint8_t plen;
} default_deny[] = {
	{ "0.0.0.0", 8 },	/* "this network" */
	{ "10.0.0.0", 8 }, { "172.16.0.0", 12 }, { "192.168.0.0", 16 },
	{ "100.64.0.0", 10 },	/* CGNAT */
	{ "127.0.0.0", 8 },
	{ "169.254.0.0", 16 },	/* link-local, cloud metadata 169.254.169.254 */
	{ "192.0.0.0", 24 },	/* IETF protocol assignments */
	{ "224.0.0.0", 4 },	/* multicast */
	{ "240.0.0.0", 4 },	/* reserved, broadcast */
};

/* Sort and merge v in place; returns the new count. */
static size_t
merge_ranges(struct range *v, size_t n)
{
	size_t i, m;

	qsort(v, n, sizeof(*v), range_cmp);
	for (i = 0, m = 0; i < n; i++) {
		if (m > 0 && (v[i].lo <= v[m - 1].hi ||
		    v[i].lo == v[m - 1].hi + 1)) {
			if (v[i].hi > v[m - 1].hi)
				v[m - 1].hi = v[i].hi;
		} else
			v[m++] = v[i];
	}
	return m;
}

/* Sorted, disjoint ranges as the elements of interval set `set`, the
 * way nft writes them. -1 on ENOMEM. */
static int
put_ranges(struct nc_batch *b, const char *set, const char *name,
    const struct range *rv, size_t nr)
{
	char what[128], a1[INET_ADDRSTRLEN], a2[INET_ADDRSTRLEN];
	struct in_addr x;
	struct elem el;
	uint32_t k;
	size_t i;

	for (i = 0; i < nr; i++) {
		x.s_addr = htonl(rv[i].lo);
		ip_str(x, a1);
		x.s_addr = htonl(rv[i].hi);
		ip_str(x, a2);
		if (i == 0 && rv[i].lo != 0) {
			/* as nft does: an end marker at 0 */
			memset(&el, 0, sizeof(el));
			el.set = set;
			el.klen = 4;
			el.flags = NFT_SET_ELEM_INTERVAL_END;
			snprintf(what, sizeof(what), "%s interval end at "
			    "0.0.0.0", name);
			if (put_elem(b, NFT_MSG_NEWSETELEM, &el, what) < 0)
				return -1;
		}
		memset(&el, 0, sizeof(el));
		el.set = set;
		el.klen = 4;
		k = htonl(rv[i].lo);
		memcpy(el.key, &k, 4);
		el.open_end = rv[i].hi == 0xffffffffU;
		snprintf(what, sizeof(what), "%s range %s-%s (start)", name,
		    a1, a2);
		if (put_elem(b, NFT_MSG_NEWSETELEM, &el, what) < 0)
			return -1;
		if (rv[i].hi == 0xffffffffU)
			continue;
		k = htonl(rv[i].hi + 1);
		memcpy(el.key, &k, 4);
		el.flags = NFT_SET_ELEM_INTERVAL_END;
		el.open_end = 0;
		snprintf(what, sizeof(what), "%s range %s-%s (end)", name, a1,
		    a2);
		if (put_elem(b, NFT_MSG_NEWSETELEM, &el, what) < 0)
			return -1;
	}
	return 0;
}

/* Returns the merged list (caller frees) or NULL on ENOMEM. */
static struct range *
deny_ranges(const struct nc_global *g, size_t *nout)
{
	size_t n = 0, cap, i, j, m;
	struct range *v, *w;
	struct in_addr a;

	cap = sizeof(default_deny) / sizeof(default_deny[0]) + g->ndeny +
	    g->nhost_addrs;
	if ((v = calloc(cap + 1, sizeof(*v))) == NULL)
		return NULL;
	for (i = 0; i < sizeof(default_deny) / sizeof(default_deny[0]); i++) {
		inet_pton(AF_INET, default_deny[i].net, &a);
		v[n++] = cidr_range(a, default_deny[i].plen);
	}
	for (i = 0; i < g->ndeny; i++)
		v[n++] = cidr_range(g->deny[i].addr, g->deny[i].plen);
	for (i = 0; i < g->nhost_addrs; i++)
		v[n++] = cidr_range(g->host_addrs[i], 32);
	n = merge_ranges(v, n);
	/* Subtract permits; each can split one range into two. */
	for (j = 0; j < g->npermit; j++) {
		struct range p = cidr_range(g->permit[j].addr,
		    g->permit[j].plen);

		if ((w = calloc(2 * n + 1, sizeof(*w))) == NULL) {
			free(v);
			return NULL;
		}
		for (i = 0, m = 0; i < n; i++) {
			if (p.hi < v[i].lo || p.lo > v[i].hi) {
				w[m++] = v[i];
				continue;
			}
			if (p.lo > v[i].lo)
				w[m++] = (struct range){ v[i].lo, p.lo - 1 };
			if (p.hi < v[i].hi)
				w[m++] = (struct range){ p.hi + 1, v[i].hi };
		}
		free(v);
		v = w;
		n = m;
	}
	*nout = n;
	return v;
}

/* ---- transactions ---- */

struct nc_ctx *
nc_ctx_new(char *err, size_t errlen)
{
	struct nc_ctx *ctx = calloc(1, sizeof(*ctx));

	if (ctx == NULL) {
		nc_errf(err, errlen, "libnetctl: %s", strerror(ENOMEM));
		return NULL;
	}
	if ((ctx->nft = nc_nft_open(err, errlen)) == NULL) {
		free(ctx);
		return NULL;
	}
	return ctx;
}

void
nc_ctx_free(struct nc_ctx *ctx)
{
	if (ctx == NULL)
		return;
	nc_nft_close(ctx->nft);
	free(ctx);
}

struct nc_nft *
nc_ctx_nft(struct nc_ctx *ctx)
{
	return ctx->nft;
}

struct nc_txn *
nc_txn_new(struct nc_ctx *ctx, char *err, size_t errlen)
{
	struct nc_txn *t = calloc(1, sizeof(*t));

	if (t == NULL || (t->b = nc_batch_new()) == NULL) {
		free(t);
		nc_errf(err, errlen, "libnetctl: %s", strerror(ENOMEM));
		return NULL;
	}
	t->ctx = ctx;
	if (ctx != NULL && nc_nft_getgen(ctx->nft, &t->gen, err, errlen) < 0) {
		nc_txn_free(t);
		return NULL;
	}
	return t;
}

void
nc_txn_free(struct nc_txn *t)
{
	if (t == NULL)
		return;
	nc_batch_free(t->b);
	free(t->rg);
	free(t);
}

size_t
nc_txn_size(const struct nc_txn *t)
{
	return nc_batch_count(t->b);
}

struct nc_batch *
nc_txn_batch(struct nc_txn *t)
{
	return t->b;
}

int
nc_txn_commit(struct nc_txn *t, char *err, size_t errlen)
{
	if (t->ctx == NULL)
		return nc_errf(err, errlen, "transaction has no context"),
		    -EINVAL;
	return nc_nft_commit(t->ctx->nft, t->b, &t->gen, err, errlen);
}

#define NOMEM(t, mark, err, errlen) do {				\
		nc_batch_rewind((t)->b, (mark));			\
		nc_errf((err), (errlen), "libnetctl: %s",		\
		    strerror(ENOMEM));					\
		return -ENOMEM;						\
	} while (0)

/* ---- generations: a flow admitted under an older one is checked again ---- */

/* The ruleset generation this batch makes: the kernel counts one per
 * committed batch (never 0), and the commit is refused unless it is at
 * t->gen still, so no two batches ever hand out the same number, and
 * every flow admitted before carries a smaller one. */
static uint32_t
txn_gen(const struct nc_txn *t)
{
	return t->gen + 1 != 0 ? t->gen + 1 : 1;
}

static int
gen_cb(struct nftnl_set_elem *e, void *arg)
{
	const void *d;
	uint32_t len = 0;

	d = nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &len);
	if (d != NULL && len == 4) {
		memcpy(arg, d, 4);
		((uint32_t *)arg)[1] = 1;
	}
	return 0;
}

/* The sandbox's generation in the kernel: 1 and *gen, 0 when it has
 * none (not attached, or no table), <0 with err. */
static int
gen_get(struct nc_ctx *ctx, struct in_addr ip, uint32_t *gen, char *err,
    size_t errlen)
{
	uint32_t v[2] = { 0, 0 };
	int ret;

	ret = nc_nft_get_elem(ctx->nft, NC_TABLE, "sb_gen", &ip.s_addr, 4,
	    gen_cb, v, err, errlen);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	*gen = v[0];
	return v[1];
}

static int
gen_elems(struct nc_batch *b, uint16_t type, struct in_addr ip, uint32_t gen,
    const char *a)
{
	char what[160];
	struct elem el;

	memset(&el, 0, sizeof(el));
	el.set = "sb_cur";
	el.klen = 8;
	memcpy(el.key, &ip.s_addr, 4);
	memcpy(el.key + 4, &gen, 4);		/* ct mark: host order */
	snprintf(what, sizeof(what), "sandbox %s: %s . generation %u in set "
	    "sb_cur", a, a, gen);
	if (put_elem(b, type, &el, what) < 0)
		return -1;
	memset(&el, 0, sizeof(el));
	el.set = "sb_gen";
	el.klen = 4;
	memcpy(el.key, &ip.s_addr, 4);
	el.has_data = 1;
	memcpy(el.data, &gen, 4);
	snprintf(what, sizeof(what), "sandbox %s: %s : generation %u in map "
	    "sb_gen", a, a, gen);
	return put_elem(b, type, &el, what);
}

static struct regen *
regen_find(struct nc_txn *t, struct in_addr ip)
{
	size_t i;

	for (i = 0; i < t->nrg; i++)
		if (t->rg[i].ip == ip.s_addr)
			return &t->rg[i];
	return NULL;
}

static int
regen_note(struct nc_txn *t, struct in_addr ip, int removed)
{
	struct regen *x = regen_find(t, ip), *v;

	if (x == NULL) {
		if (t->nrg == t->caprg) {
			size_t cap = t->caprg ? 2 * t->caprg : 16;

			if ((v = realloc(t->rg, cap * sizeof(*v))) == NULL)
				return -1;
			t->rg = v;
			t->caprg = cap;
		}
		x = &t->rg[t->nrg++];
		x->ip = ip.s_addr;
	}
	x->removed = removed;
	return 0;
}

/*
 * Give the sandbox of ip this batch's generation (once per batch): its
 * flows admitted before are checked against the policy again at their
 * next packet. create: also when it has none yet (attach); otherwise a
 * sandbox with no generation (not attached) is left alone.
 */
static int
regen(struct nc_txn *t, struct in_addr ip, int create, char *err,
    size_t errlen)
{
	size_t mark = nc_batch_mark(t->b);
	struct regen *x = regen_find(t, ip);
	char a[INET_ADDRSTRLEN];
	uint32_t old = 0;
	int have = 0;

	if (x != NULL && !x->removed)
		return 0;
	if (x == NULL && !t->fresh && t->ctx != NULL &&
	    (have = gen_get(t->ctx, ip, &old, err, errlen)) < 0)
		return have;
	if (!have && !create)
		return 0;
	ip_str(ip, a);
	if ((have && gen_elems(t->b, NFT_MSG_DELSETELEM, ip, old, a) < 0) ||
	    gen_elems(t->b, NFT_MSG_NEWSETELEM, ip, txn_gen(t), a) < 0 ||
	    regen_note(t, ip, 0) < 0)
		NOMEM(t, mark, err, errlen);
	return 0;
}

int
nc_txn_recheck(struct nc_txn *t, struct in_addr ip, char *err, size_t errlen)
{
	return regen(t, ip, 0, err, errlen);
}

int
nc_txn_egress_init(struct nc_txn *t, const struct nc_global *g, char *err,
    size_t errlen)
{
	static const struct nc_global none;
	struct rulectx rcx, *rc = &rcx;
	size_t mark = nc_batch_mark(t->b), i, nr;
	struct range *rv;
	struct nftnl_set *s;
	char what[128];
	struct elem el;
	static const struct {
		uint8_t proto;
		uint16_t port;
	} dnsp[] = { { IPPROTO_UDP, 53 }, { IPPROTO_TCP, 53 },
		     { IPPROTO_UDP, 853 }, { IPPROTO_TCP, 853 } };

	if (g == NULL)
		g = &none;
	if (g->uplink != NULL && g->uplink[0] != '\0' &&
	    ifname_ok(g->uplink, err, errlen) < 0)
		return -EINVAL;
	if (g->tap_prefix != NULL && g->tap_prefix[0] != '\0' &&
	    ifname_ok(g->tap_prefix, err, errlen) < 0)
		return -EINVAL;
	for (i = 0; i < g->ndeny; i++)
		if (g->deny[i].plen > 32)
			return nc_errf(err, errlen, "global deny range %zu: "
			    "prefix length %u > 32", i + 1, g->deny[i].plen),
			    -EINVAL;
	for (i = 0; i < g->npermit; i++)
		if (g->permit[i].plen > 32)
			return nc_errf(err, errlen, "global permit range %zu: "
			    "prefix length %u > 32", i + 1,
			    g->permit[i].plen), -EINVAL;

	/* Create-if-missing, delete, create: replaces atomically. */
	if (add_table(t->b, NFT_MSG_NEWTABLE, NLM_F_CREATE, NULL) < 0 ||
	    add_table(t->b, NFT_MSG_DELTABLE, 0, NULL) < 0 ||
	    add_table(t->b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL,
	    "berth sandbox egress; managed by berthd (libnetctl), "
	    "replaced on start") < 0 ||
	    add_table_fam(t->b, NFPROTO_ARP, NFT_MSG_NEWTABLE, NLM_F_CREATE,
	    NULL) < 0 ||
	    add_table_fam(t->b, NFPROTO_ARP, NFT_MSG_DELTABLE, 0, NULL) < 0 ||
	    add_table_fam(t->b, NFPROTO_ARP, NFT_MSG_NEWTABLE,
	    NLM_F_CREATE | NLM_F_EXCL, "berth sandbox ARP: a guest speaks "
	    "ARP only as itself, only with its gateway; managed by berthd") < 0)
		NOMEM(t, mark, err, errlen);
	for (i = 0; i < sizeof(sets_arp) / sizeof(sets_arp[0]); i++) {
		if ((s = set_new(&sets_arp[i])) == NULL)
			NOMEM(t, mark, err, errlen);
		snprintf(what, sizeof(what), "set arp %s %s", NC_TABLE,
		    sets_arp[i].name);
		if (nc_batch_set(t->b, NFT_MSG_NEWSET,
		    NLM_F_CREATE | NLM_F_EXCL, s, what) < 0) {
			nftnl_set_free(s);
			NOMEM(t, mark, err, errlen);
		}
		nftnl_set_free(s);
	}
	if (add_chain_fam(t->b, NFPROTO_ARP, "input", "filter", 0 /* NF_ARP_IN */,
	    0, "ARP from sandbox taps") < 0)
		NOMEM(t, mark, err, errlen);

	for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		if ((s = set_new(&sets[i])) == NULL)
			NOMEM(t, mark, err, errlen);
		snprintf(what, sizeof(what), "set inet %s %s", NC_TABLE,
		    sets[i].name);
		if (nc_batch_set(t->b, NFT_MSG_NEWSET,
		    NLM_F_CREATE | NLM_F_EXCL, s, what) < 0) {
			nftnl_set_free(s);
			NOMEM(t, mark, err, errlen);
		}
		nftnl_set_free(s);
	}

	/* Elements of constant sets must precede the rules that bind them. */
	for (i = 0; i < sizeof(dnsp) / sizeof(dnsp[0]); i++) {
		uint16_t p = htons(dnsp[i].port);

		memset(&el, 0, sizeof(el));
		el.set = "dns_ports";
		el.klen = 8;
		el.key[0] = dnsp[i].proto;
		memcpy(el.key + 4, &p, 2);
		snprintf(what, sizeof(what), "element %s . %u of set dns_ports",
		    dnsp[i].proto == IPPROTO_TCP ? "tcp" : "udp", dnsp[i].port);
		if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
			NOMEM(t, mark, err, errlen);
	}

	if ((rv = deny_ranges(g, &nr)) == NULL)
		NOMEM(t, mark, err, errlen);
	if (put_ranges(t->b, "always_deny", "always-deny", rv, nr) < 0)
		goto nomem_rv;
	free(rv);
	if ((rv = calloc(g->npermit + 1, sizeof(*rv))) == NULL)
		NOMEM(t, mark, err, errlen);
	for (i = 0; i < g->npermit; i++)
		rv[i] = cidr_range(g->permit[i].addr, g->permit[i].plen);
	nr = merge_ranges(rv, g->npermit);
	if (put_ranges(t->b, "permitted", "permitted", rv, nr) < 0)
		goto nomem_rv;
	free(rv);

	for (i = 0; i < NREASONS; i++) {
		char chain[64];

		log_chain(chain, sizeof(chain), reasons[i].reason);
		snprintf(what, sizeof(what), "denied as %s: logged within the "
		    "tap's log rate, then %s", reasons[i].reason,
		    reasons[i].drop ? "dropped" : "rejected");
		if (add_chain(t->b, chain, NULL, 0, 0, what) < 0)
			NOMEM(t, mark, err, errlen);
	}
	if (add_chain(t->b, "deny", NULL, 0, 0, "logged already (log_*); "
	    "reject loudly, never drop silently") < 0 ||
	    add_chain(t->b, "mode_open", NULL, 0, 0,
	    "mode open: all but always-deny and deny rules") < 0 ||
	    add_chain(t->b, "mode_allowlist", NULL, 0, 0,
	    "mode allowlist: only what allow_* hold") < 0 ||
	    add_chain(t->b, "mode_closed", NULL, 0, 0,
	    "mode closed: nothing") < 0 ||
	    add_chain(t->b, "admit", NULL, 0, 0,
	    "allowed: within the sandbox's connection cap and rate, marked "
	    "with its generation") < 0 ||
	    add_chain(t->b, "prerouting", "filter", NF_INET_PRE_ROUTING,
	    NF_IP_PRI_RAW, "anti-spoofing, before conntrack") < 0 ||
	    add_chain(t->b, "input", "filter", NF_INET_LOCAL_IN,
	    NF_IP_PRI_FILTER, "sandbox to host: DNS on the gateway only") < 0 ||
	    add_chain(t->b, "forward", "filter", NF_INET_FORWARD,
	    NF_IP_PRI_FILTER, "sandbox egress policy") < 0 ||
	    add_chain(t->b, "postrouting", "nat", NF_INET_POST_ROUTING,
	    NF_IP_PRI_NAT_SRC, "masquerade guests outward") < 0)
		NOMEM(t, mark, err, errlen);

	memset(rc, 0, sizeof(*rc));
	rc->b = t->b;
	rc->g = g;
	rc->chain = "deny";
	rules_deny(rc);
	rules_modes(rc);
	rules_admit(rc);
	rules_prerouting(rc);
	rules_input(rc);
	rules_forward(rc);
	rules_postrouting(rc);
	rules_arp(rc);
	if (rc->failed)
		NOMEM(t, mark, err, errlen);
	t->fresh = 1;
	t->nrg = 0;	/* what came before is deleted with the table */
	return 0;
nomem_rv:
	free(rv);
	NOMEM(t, mark, err, errlen);
}

static int
mac_str(const uint8_t *m, char *buf, size_t len)
{
	return snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1],
	    m[2], m[3], m[4], m[5]);
}

int
nc_txn_sandbox_attach(struct nc_txn *t, const struct nc_sandbox *sb,
    char *err, size_t errlen)
{
	size_t mark = nc_batch_mark(t->b);
	char what[160], ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], mac[18];
	struct elem el;
	static const uint8_t zmac[6];
	int ret;

	if (ifname_ok(sb->ifname, err, errlen) < 0)
		return -EINVAL;
	ip_str(sb->ip, ip);
	ip_str(sb->gw, gw);
	mac_str(sb->mac, mac, sizeof(mac));
	if (mode_chain(sb->mode) == NULL)
		return nc_errf(err, errlen, "sandbox %s on %s: unknown mode %d",
		    ip, sb->ifname, (int)sb->mode), -EINVAL;
	if (sb->ip.s_addr == 0 || sb->gw.s_addr == 0 ||
	    sb->ip.s_addr == sb->gw.s_addr)
		return nc_errf(err, errlen, "sandbox on %s: guest %s and "
		    "gateway %s must be distinct, nonzero addresses",
		    sb->ifname, ip, gw), -EINVAL;
	if (memcmp(sb->mac, zmac, 6) == 0 || (sb->mac[0] & 1))
		return nc_errf(err, errlen, "sandbox %s on %s: MAC %s is not "
		    "a unicast address", ip, sb->ifname, mac), -EINVAL;

	memset(&el, 0, sizeof(el));
	el.set = "sb_ifaces";
	el.klen = 16;
	key_ifname(el.key, sb->ifname);
	snprintf(what, sizeof(what), "sandbox %s: tap %s in set sb_ifaces",
	    ip, sb->ifname);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);

	el.set = "sb_src";
	el.klen = 20;
	memcpy(el.key + 16, &sb->ip.s_addr, 4);
	snprintf(what, sizeof(what), "sandbox %s: %s . %s in set sb_src",
	    ip, sb->ifname, ip);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);

	el.set = "sb_gw";
	memcpy(el.key + 16, &sb->gw.s_addr, 4);
	snprintf(what, sizeof(what), "sandbox %s: %s . %s in set sb_gw",
	    ip, sb->ifname, gw);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);

	el.set = "sb_mac";
	el.klen = 24;
	memset(el.key + 16, 0, 8);
	memcpy(el.key + 16, sb->mac, 6);
	snprintf(what, sizeof(what), "sandbox %s: %s . %s in set sb_mac",
	    ip, sb->ifname, mac);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);

	memset(&el, 0, sizeof(el));
	el.set = "guests";
	el.klen = 4;
	memcpy(el.key, &sb->ip.s_addr, 4);
	snprintf(what, sizeof(what), "sandbox %s: %s in set guests", ip, ip);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);

	el.set = "sb_mode";
	el.gotochain = mode_chain(sb->mode);
	snprintf(what, sizeof(what), "sandbox %s: %s : goto %s in map sb_mode",
	    ip, ip, el.gotochain);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);

	memset(&el, 0, sizeof(el));
	el.family = NFPROTO_ARP;
	el.set = "taps";
	el.klen = 16;
	key_ifname(el.key, sb->ifname);
	snprintf(what, sizeof(what), "sandbox %s: tap %s in set arp taps", ip,
	    sb->ifname);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);
	el.set = "sb_arp";
	el.klen = 32;
	memcpy(el.key + 16, sb->mac, 6);
	memcpy(el.key + 24, &sb->ip.s_addr, 4);
	memcpy(el.key + 28, &sb->gw.s_addr, 4);
	snprintf(what, sizeof(what), "sandbox %s: %s . %s . %s . %s in set "
	    "arp sb_arp", ip, sb->ifname, mac, ip, gw);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);
	/* (re)attached with maybe other rules: its flows are checked again */
	if ((ret = regen(t, sb->ip, 1, err, errlen)) < 0) {
		nc_batch_rewind(t->b, mark);
		return ret;
	}
	return 0;
}

int
nc_txn_set_mode(struct nc_txn *t, struct in_addr ip, enum nc_mode mode,
    char *err, size_t errlen)
{
	size_t mark = nc_batch_mark(t->b);
	char what[160], a[INET_ADDRSTRLEN];
	struct elem el;
	int ret;

	ip_str(ip, a);
	if (mode_chain(mode) == NULL)
		return nc_errf(err, errlen, "sandbox %s: unknown mode %d", a,
		    (int)mode), -EINVAL;
	memset(&el, 0, sizeof(el));
	el.set = "sb_mode";
	el.klen = 4;
	memcpy(el.key, &ip.s_addr, 4);
	snprintf(what, sizeof(what), "sandbox %s: its mode in map sb_mode "
	    "(is it attached?)", a);
	if (put_elem(t->b, NFT_MSG_DELSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);
	el.gotochain = mode_chain(mode);
	snprintf(what, sizeof(what), "sandbox %s: %s : goto %s in map sb_mode",
	    a, a, el.gotochain);
	if (put_elem(t->b, NFT_MSG_NEWSETELEM, &el, what) < 0)
		NOMEM(t, mark, err, errlen);
	/* a stricter mode cuts what it no longer allows */
	if ((ret = regen(t, ip, 0, err, errlen)) < 0) {
		nc_batch_rewind(t->b, mark);
		return ret;
	}
	return 0;
}

/* The set elements one rule becomes: "any protocol" with a port means
 * tcp and udp (a port means nothing for other protocols). */
enum { EL_ALLOW, EL_DENY, EL_LEARNED };

static int
rule_elems(const struct nc_rule *r, int kind, struct in_addr guest,
    struct elem *out, size_t *n, char *err, size_t errlen)
{
	int deny = kind == EL_DENY;
	const char *ip_set = kind == EL_LEARNED ? "allow_dns_ip" : "allow_ip";
	const char *net_set = deny ? "deny_net" : kind == EL_LEARNED ?
	    "allow_dns_net" : "allow_net";
	struct range d;
	int any_port = r->port_lo == 0 && r->port_hi == 65535;
	uint8_t protos[2];
	size_t np = 0, i;

	if (r->kind != NC_RULE_ADDR)
		return nc_errf(err, errlen, "rule for %s: domain rules are "
		    "enforced through the DNS resolver, which adds the "
		    "addresses it resolves", r->domain), -EINVAL;
	if (r->plen > 32 || r->port_lo > r->port_hi)
		return nc_errf(err, errlen, "rule: invalid prefix or port "
		    "range"), -EINVAL;
	if (guest.s_addr == 0)
		return nc_errf(err, errlen, "rule: no guest address"),
		    -EINVAL;
	d = cidr_range(r->addr, r->plen);
	if (r->proto != NC_PROTO_ANY)
		protos[np++] = (uint8_t)r->proto;
	else if (!any_port) {
		protos[np++] = IPPROTO_TCP;
		protos[np++] = IPPROTO_UDP;
	}
	*n = 0;
	if (np == 0) {
		/* any protocol, any port: the whole proto and port space */
		memset(&out[0], 0, sizeof(out[0]));
		out[0].set = net_set;
		out[0].klen = 16;
		out[0].has_end = 1;
		key_tuple(out[0].key, guest, d.lo, 0, 0);
		key_tuple(out[0].kend, guest, d.hi, 255, 65535);
		*n = 1;
		return 0;
	}
	for (i = 0; i < np; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].klen = 16;
		key_tuple(out[i].key, guest, d.lo, protos[i], r->port_lo);
		if (!deny && r->plen == 32 && r->port_lo == r->port_hi) {
			out[i].set = ip_set;	/* the hash fast path */
		} else {
			out[i].set = net_set;
			out[i].has_end = 1;
			key_tuple(out[i].kend, guest, d.hi, protos[i],
			    r->port_hi);
		}
	}
	*n = np;
	return 0;
}

static int
txn_rule(struct nc_txn *t, uint16_t type, int kind, struct in_addr guest,
    const struct nc_rule *r, const char *name, uint64_t timeout_ms,
    char *err, size_t errlen)
{
	size_t mark = nc_batch_mark(t->b), n, i;
	struct elem el[2];
	char what[400], rtext[300], a[INET_ADDRSTRLEN];
	int ret;

	if ((ret = rule_elems(r, kind, guest, el, &n, err, errlen)) < 0)
		return ret;
	nc_rule_format(r, rtext, sizeof(rtext));
	ip_str(guest, a);
	for (i = 0; i < n; i++) {
		el[i].timeout_ms = timeout_ms;
		el[i].comment = name != NULL && strlen(name) < 250 ? name :
		    NULL;
		snprintf(what, sizeof(what), "sandbox %s: %s '%s'%s in "
		    "set %s", a, kind == EL_DENY ? "deny rule" :
		    kind == EL_LEARNED ? "DNS-learned address" : "allow rule",
		    rtext, n == 1 ? "" : el[i].key[8] == IPPROTO_TCP ?
		    " (tcp)" : " (udp)", el[i].set);
		if (put_elem(t->b, type, &el[i], what) < 0)
			NOMEM(t, mark, err, errlen);
	}
	/* Access taken away (an allow rule gone, a deny rule added): the
	 * sandbox's flows are checked again. */
	if ((type == NFT_MSG_DELSETELEM) != (kind == EL_DENY) &&
	    (ret = regen(t, guest, 0, err, errlen)) < 0) {
		nc_batch_rewind(t->b, mark);
		return ret;
	}
	return 0;
}

int
nc_txn_allow_add(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen)
{
	return txn_rule(t, NFT_MSG_NEWSETELEM, EL_ALLOW, guest, r, NULL,
	    timeout_ms, err, errlen);
}

int
nc_txn_learned_add(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, const char *name, uint64_t timeout_ms,
    char *err, size_t errlen)
{
	return txn_rule(t, NFT_MSG_NEWSETELEM, EL_LEARNED, guest, r, name,
	    timeout_ms, err, errlen);
}

int
nc_txn_allow_del(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen)
{
	return txn_rule(t, NFT_MSG_DELSETELEM, EL_ALLOW, guest, r, NULL, 0,
	    err, errlen);
}

int
nc_txn_deny_add(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen)
{
	return txn_rule(t, NFT_MSG_NEWSETELEM, EL_DENY, guest, r, NULL,
	    timeout_ms, err, errlen);
}

int
nc_txn_deny_del(struct nc_txn *t, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen)
{
	return txn_rule(t, NFT_MSG_DELSETELEM, EL_DENY, guest, r, NULL, 0,
	    err, errlen);
}

/* Detach: the kernel is the truth (DNS-learned elements come and go), so
 * list every per-sandbox set and delete what belongs to this sandbox. */
struct detach_arg {
	struct nc_batch *b;
	uint32_t family;
	const char *set;
	const uint8_t *match;
	size_t mlen;
	const char *who;
	int nomem;
	size_t found;
};

static int
detach_cb(struct nftnl_set_elem *e, void *data)
{
	struct detach_arg *a = data;
	const void *k;
	uint32_t klen = 0, kelen = 0, flags = 0;
	struct elem el;
	char what[160];

	k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (k == NULL || klen < a->mlen || klen > sizeof(el.key) ||
	    memcmp(k, a->match, a->mlen) != 0)
		return 0;
	memset(&el, 0, sizeof(el));
	el.set = a->set;
	el.family = a->family;
	el.klen = klen;
	memcpy(el.key, k, klen);
	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END)) {
		k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &kelen);
		if (k != NULL && kelen == klen) {
			memcpy(el.kend, k, kelen);
			el.has_end = 1;
		}
	}
	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS))
		flags = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS);
	el.flags = flags & NFT_SET_ELEM_INTERVAL_END;
	snprintf(what, sizeof(what), "sandbox %s: element %zu of set %s",
	    a->who, ++a->found, a->set);
	if (put_elem(a->b, NFT_MSG_DELSETELEM, &el, what) < 0) {
		a->nomem = 1;
		return 1;
	}
	return 0;
}

static int
txn_unbind(struct nc_txn *t, const char *ifname, struct in_addr ip,
    int state, char *err, size_t errlen)
{
	size_t mark = nc_batch_mark(t->b), i;
	uint8_t kif[IFNAMSIZ];
	char a[INET_ADDRSTRLEN], who[64];
	struct detach_arg da;
	int ret;

	if (t->ctx == NULL)
		return nc_errf(err, errlen, "transaction has no context"),
		    -EINVAL;
	if (ifname_ok(ifname, err, errlen) < 0)
		return -EINVAL;
	ip_str(ip, a);
	snprintf(who, sizeof(who), "%s on %s", a, ifname);
	key_ifname(kif, ifname);
	for (i = 0; i < sizeof(owned) / sizeof(owned[0]); i++) {
		if (owned[i].kind != OWN_RULES && !state)
			continue;
		/* its generation: replaced in this batch already, or gone
		 * with the table (the deletes would find nothing) */
		if (owned[i].kind == OWN_GEN && (t->fresh ||
		    (regen_find(t, ip) != NULL && !regen_find(t, ip)->removed)))
			continue;
		memset(&da, 0, sizeof(da));
		da.b = t->b;
		da.set = owned[i].set;
		da.family = owned[i].family;
		da.who = who;
		if (owned[i].by_ifname) {
			da.match = kif;
			da.mlen = IFNAMSIZ;
		} else {
			da.match = (const uint8_t *)&ip.s_addr;
			da.mlen = 4;
		}
		ret = nc_nft_dump_elems_family(t->ctx->nft, owned[i].family ?
		    (uint16_t)owned[i].family : NFPROTO_INET, NC_TABLE,
		    owned[i].set, detach_cb, &da, err, errlen);
		if (da.nomem)
			NOMEM(t, mark, err, errlen);
		if (ret < 0) {
			nc_batch_rewind(t->b, mark);
			return ret;
		}
	}
	if (state && regen_note(t, ip, 1) < 0)
		NOMEM(t, mark, err, errlen);
	return 0;
}

int
nc_txn_sandbox_detach(struct nc_txn *t, const char *ifname,
    struct in_addr ip, char *err, size_t errlen)
{
	return txn_unbind(t, ifname, ip, 1, err, errlen);
}

int
nc_txn_sandbox_clear(struct nc_txn *t, const char *ifname,
    struct in_addr ip, char *err, size_t errlen)
{
	return txn_unbind(t, ifname, ip, 0, err, errlen);
}

/* ---- one-shot wrappers: build, commit, rebuild on a stale generation ---- */

typedef int (*build_fn)(struct nc_txn *, const void *, char *, size_t);

static int
run(struct nc_ctx *ctx, build_fn fn, const void *arg, int retry_enoent,
    char *err, size_t errlen)
{
	struct nc_txn *t;
	int ret = -EAGAIN, i;

	for (i = 0; i < NC_RETRIES; i++) {
		if ((t = nc_txn_new(ctx, err, errlen)) == NULL)
			return -EIO;
		ret = fn(t, arg, err, errlen);
		if (ret == 0)
			ret = nc_txn_commit(t, err, errlen);
		nc_txn_free(t);
		/* ENOENT after a fresh listing: an element expired between
		 * listing and deleting it. */
		if (ret != -ERESTART && ret != -EINTR &&
		    !(retry_enoent && ret == -ENOENT))
			return ret;
	}
	return ret;
}

struct args {
	const struct nc_global *g;
	const struct nc_sandbox *sb;
	const char *ifname;
	struct in_addr ip;
	enum nc_mode mode;
	const struct nc_rule *r;
	uint64_t timeout;
	int op;
};

static int
b_init(struct nc_txn *t, const void *v, char *err, size_t len)
{
	return nc_txn_egress_init(t, ((const struct args *)v)->g, err, len);
}

static int
b_attach(struct nc_txn *t, const void *v, char *err, size_t len)
{
	return nc_txn_sandbox_attach(t, ((const struct args *)v)->sb, err,
	    len);
}

static int
b_detach(struct nc_txn *t, const void *v, char *err, size_t len)
{
	const struct args *a = v;

	return nc_txn_sandbox_detach(t, a->ifname, a->ip, err, len);
}

static int
b_mode(struct nc_txn *t, const void *v, char *err, size_t len)
{
	const struct args *a = v;

	return nc_txn_set_mode(t, a->ip, a->mode, err, len);
}

static int
b_rule(struct nc_txn *t, const void *v, char *err, size_t len)
{
	const struct args *a = v;

	switch (a->op) {
	case 0:
		return nc_txn_allow_add(t, a->ip, a->r, a->timeout, err, len);
	case 1:
		return nc_txn_allow_del(t, a->ip, a->r, err, len);
	case 2:
		return nc_txn_deny_add(t, a->ip, a->r, a->timeout, err, len);
	default:
		return nc_txn_deny_del(t, a->ip, a->r, err, len);
	}
}

static int
b_recheck(struct nc_txn *t, const void *v, char *err, size_t len)
{
	return nc_txn_recheck(t, ((const struct args *)v)->ip, err, len);
}

static int
b_fini(struct nc_txn *t, const void *v, char *err, size_t len)
{
	(void)v;
	if (add_table(t->b, NFT_MSG_DELTABLE, 0, NULL) < 0 ||
	    add_table_fam(t->b, NFPROTO_ARP, NFT_MSG_NEWTABLE, NLM_F_CREATE,
	    NULL) < 0 ||
	    add_table_fam(t->b, NFPROTO_ARP, NFT_MSG_DELTABLE, 0, NULL) < 0)
		return nc_errf(err, len, "libnetctl: %s", strerror(ENOMEM)),
		    -ENOMEM;
	return 0;
}

int
nc_egress_init(struct nc_ctx *ctx, const struct nc_global *g, char *err,
    size_t errlen)
{
	struct args a = { .g = g };

	return run(ctx, b_init, &a, 0, err, errlen);
}

int
nc_egress_fini(struct nc_ctx *ctx, char *err, size_t errlen)
{
	return run(ctx, b_fini, NULL, 0, err, errlen);
}

int
nc_sandbox_attach(struct nc_ctx *ctx, const struct nc_sandbox *sb,
    char *err, size_t errlen)
{
	struct args a = { .sb = sb };

	return run(ctx, b_attach, &a, 0, err, errlen);
}

int
nc_sandbox_detach(struct nc_ctx *ctx, const char *ifname, struct in_addr ip,
    char *err, size_t errlen)
{
	struct args a = { .ifname = ifname, .ip = ip };
	size_t n;
	int ret;

	if ((ret = run(ctx, b_detach, &a, 1, err, errlen)) < 0)
		return ret;
	return nc_ct_flush_guest(ip, &n, err, errlen);
}

int
nc_sandbox_set_mode(struct nc_ctx *ctx, struct in_addr ip, enum nc_mode mode,
    char *err, size_t errlen)
{
	struct args a = { .ip = ip, .mode = mode };

	return run(ctx, b_mode, &a, 0, err, errlen);
}

int
nc_allow_add(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen)
{
	struct args a = { .ip = guest, .r = r, .timeout = timeout_ms, .op = 0 };

	return run(ctx, b_rule, &a, 0, err, errlen);
}

int
nc_allow_del(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen)
{
	struct args a = { .ip = guest, .r = r, .op = 1 };

	return run(ctx, b_rule, &a, 0, err, errlen);
}

int
nc_deny_add(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, uint64_t timeout_ms, char *err, size_t errlen)
{
	struct args a = { .ip = guest, .r = r, .timeout = timeout_ms, .op = 2 };

	return run(ctx, b_rule, &a, 0, err, errlen);
}

int
nc_deny_del(struct nc_ctx *ctx, struct in_addr guest,
    const struct nc_rule *r, char *err, size_t errlen)
{
	struct args a = { .ip = guest, .r = r, .op = 3 };

	return run(ctx, b_rule, &a, 0, err, errlen);
}

int
nc_recheck(struct nc_ctx *ctx, struct in_addr guest, char *err,
    size_t errlen)
{
	struct args a = { .ip = guest };

	return run(ctx, b_recheck, &a, 0, err, errlen);
}

static int
sup_cb(struct nftnl_set_elem *e, void *arg)
{
	struct nftnl_expr *x;
	const char *name;

	if (!nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPR))
		return 0;
	x = (struct nftnl_expr *)nftnl_set_elem_get(e, NFTNL_SET_ELEM_EXPR,
	    NULL);
	name = x != NULL ? nftnl_expr_get_str(x, NFTNL_EXPR_NAME) : NULL;
	if (name != NULL && strcmp(name, "counter") == 0)
		*(uint64_t *)arg = nftnl_expr_get_u64(x, NFTNL_EXPR_CTR_PACKETS);
	return 0;
}

int
nc_egress_log_suppressed(struct nc_ctx *ctx, const char *ifname,
    uint64_t *n, char *err, size_t errlen)
{
	uint8_t k[IFNAMSIZ];
	int ret;

	*n = 0;
	if (ifname_ok(ifname, err, errlen) < 0)
		return -EINVAL;
	key_ifname(k, ifname);
	ret = nc_nft_get_elem(ctx->nft, NC_TABLE, "log_sup", k, IFNAMSIZ,
	    sup_cb, n, err, errlen);
	return ret == -ENOENT ? 0 : ret;
}

int
nc_egress_count_rules(struct nc_ctx *ctx, size_t *n, char *err,
    size_t errlen)
{
	return nc_nft_count_rules(ctx->nft, NC_TABLE, n, err, errlen);
}

static int
count_cb(struct nftnl_set_elem *e, void *arg)
{
	(void)e;
	(*(size_t *)arg)++;
	return 0;
}

int
nc_egress_count_elems(struct nc_ctx *ctx, const char *set, size_t *n,
    char *err, size_t errlen)
{
	*n = 0;
	return nc_nft_dump_elems(ctx->nft, NC_TABLE, set, count_cb, n, err,
	    errlen);
}

/* ---- what a table holds, read back (berthd's restart) ---- */

struct att {
	char tap[IFNAMSIZ];
	struct in_addr ip, gw;
	uint8_t mac[6];
	int has_gw, has_mac;
};

struct att_list {
	struct att *v;
	size_t n, cap;
	const char *set;
	int nomem;
};

static struct att *
att_find(struct att_list *l, const uint8_t *tap)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (memcmp(l->v[i].tap, tap, IFNAMSIZ) == 0)
			return &l->v[i];
	return NULL;
}

static int
att_cb(struct nftnl_set_elem *e, void *arg)
{
	struct att_list *l = arg;
	const uint8_t *k;
	uint32_t klen = 0;
	struct att *a, *v;

	k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (k == NULL || klen < 20 || k[IFNAMSIZ - 1] != '\0')
		return 0;
	if (strcmp(l->set, "sb_src") == 0) {
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 64;

			if ((v = realloc(l->v, cap * sizeof(*v))) == NULL) {
				l->nomem = 1;
				return 1;
			}
			l->v = v;
			l->cap = cap;
		}
		a = &l->v[l->n++];
		memset(a, 0, sizeof(*a));
		memcpy(a->tap, k, IFNAMSIZ);
		memcpy(&a->ip.s_addr, k + IFNAMSIZ, 4);
	} else if ((a = att_find(l, k)) != NULL) {
		if (strcmp(l->set, "sb_gw") == 0) {
			memcpy(&a->gw.s_addr, k + IFNAMSIZ, 4);
			a->has_gw = 1;
		} else if (klen >= 22) {
			memcpy(a->mac, k + IFNAMSIZ, 6);
			a->has_mac = 1;
		}
	}
	return 0;
}

int
nc_egress_attached(struct nc_ctx *ctx,
    int (*cb)(const struct nc_sandbox *sb, void *arg), void *arg,
    char *err, size_t errlen)
{
	static const char *const from[] = { "sb_src", "sb_gw", "sb_mac" };
	struct att_list l;
	struct nc_sandbox sb;
	size_t i;
	int ret = 0;

	memset(&l, 0, sizeof(l));
	for (i = 0; i < 3 && ret == 0; i++) {
		l.set = from[i];
		ret = nc_nft_dump_elems(ctx->nft, NC_TABLE, from[i], att_cb, &l,
		    err, errlen);
		if (l.nomem) {
			nc_errf(err, errlen, "libnetctl: %s", strerror(ENOMEM));
			ret = -ENOMEM;
		}
	}
	for (i = 0; ret == 0 && i < l.n; i++) {
		if (!l.v[i].has_gw || !l.v[i].has_mac)
			continue;	/* half a sandbox: not one */
		memset(&sb, 0, sizeof(sb));
		sb.ifname = l.v[i].tap;
		sb.ip = l.v[i].ip;
		sb.gw = l.v[i].gw;
		memcpy(sb.mac, l.v[i].mac, 6);
		if (cb(&sb, arg) != 0)
			break;
	}
	free(l.v);
	return ret;
}

struct learned_arg {
	int (*cb)(struct in_addr, struct in_addr, const char *, uint64_t,
	    void *);
	void *arg;
};

static int
comment_cb(const struct nftnl_udata *attr, void *data)
{
	const char *v = nftnl_udata_get(attr);
	uint8_t len = nftnl_udata_len(attr);

	if (nftnl_udata_type(attr) == NFTNL_UDATA_SET_ELEM_COMMENT &&
	    len > 1 && len < 255 && v[len - 1] == '\0')
		*(const char **)data = v;
	return 0;
}

static int
learned_cb(struct nftnl_set_elem *e, void *arg)
{
	struct learned_arg *a = arg;
	const uint8_t *k;
	const void *ud;
	const char *name = NULL;
	struct in_addr guest, addr;
	uint32_t klen = 0, ulen = 0;
	uint64_t left;

	k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (k == NULL || klen != 16 ||
	    !nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPIRATION) ||
	    (ud = nftnl_set_elem_get(e, NFTNL_SET_ELEM_USERDATA,
	    &ulen)) == NULL ||
	    nftnl_udata_parse(ud, ulen, comment_cb, &name) < 0 ||
	    name == NULL)
		return 0;
	left = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_EXPIRATION);
	memcpy(&guest.s_addr, k, 4);
	memcpy(&addr.s_addr, k + 4, 4);
	return a->cb(guest, addr, name, left, a->arg);
}

int
nc_egress_learned(struct nc_ctx *ctx,
    int (*cb)(struct in_addr guest, struct in_addr addr, const char *name,
    uint64_t left_ms, void *arg), void *arg, char *err, size_t errlen)
{
	struct learned_arg a = { cb, arg };
	int ret;

	ret = nc_nft_dump_elems(ctx->nft, NC_TABLE, "allow_dns_ip",
	    learned_cb, &a, err, errlen);
	if (ret == 0)
		ret = nc_nft_dump_elems(ctx->nft, NC_TABLE, "allow_dns_net",
		    learned_cb, &a, err, errlen);
	return ret;
}
