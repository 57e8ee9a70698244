/*
 * test_nc_batch.c — libnetctl's nf_tables batches without a kernel:
 * build transactions (table init, attach, allow/deny), serialize them,
 * walk the netlink stream and parse every message back with libnftnl;
 * then feed hand-made acknowledgements (with extended-ack TLVs) to the
 * ack parser and check the error names the object by sequence number.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>

#include "netctl.h"
#include "nc_nft.h"
#include "nc_egress.h"
#include "tap.h"

#define MSGTYPE(t) ((NFNL_SUBSYS_NFTABLES << 8) | (t))

static char err[NC_ERRLEN];

struct walk {
	size_t n, newrule, newset, newsetelem, newchain, newtable, deltable;
	size_t commented_rules, ack_flagged, seq_ok;
	uint32_t genid;
	int begin_ok, end_ok;
};

static int
udata_comment_cb(const struct nftnl_udata *attr, void *data)
{
	if (nftnl_udata_type(attr) == NFTNL_UDATA_RULE_COMMENT)
		*(int *)data = 1;
	return 0;
}

static void
walk(const void *buf, size_t len, uint32_t seq0, struct walk *w)
{
	const struct nlmsghdr *nlh = buf;
	int rem = (int)len;
	uint32_t expect = seq0;

	memset(w, 0, sizeof(*w));
	while (mnl_nlmsg_ok(nlh, rem)) {
		if (nlh->nlmsg_seq == expect)
			w->seq_ok++;
		expect++;
		if (nlh->nlmsg_type == NFNL_MSG_BATCH_BEGIN) {
			const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
			const struct nlattr *a;

			w->begin_ok = w->n == 0 &&
			    ntohs(g->res_id) == NFNL_SUBSYS_NFTABLES;
			mnl_attr_for_each(a, nlh, sizeof(*g))
				if (mnl_attr_get_type(a) == NFNL_BATCH_GENID)
					w->genid = ntohl(mnl_attr_get_u32(a));
		} else if (nlh->nlmsg_type == NFNL_MSG_BATCH_END) {
			w->end_ok = 1;
		} else {
			if (nlh->nlmsg_flags & NLM_F_ACK)
				w->ack_flagged++;
			switch (nlh->nlmsg_type) {
			case MSGTYPE(NFT_MSG_NEWRULE): {
				struct nftnl_rule *r = nftnl_rule_alloc();
				const void *ud;
				uint32_t udlen;
				int has = 0;

				w->newrule++;
				if (nftnl_rule_nlmsg_parse(nlh, r) == 0 &&
				    (ud = nftnl_rule_get_data(r,
				    NFTNL_RULE_USERDATA, &udlen)) != NULL)
					nftnl_udata_parse(ud, udlen,
					    udata_comment_cb, &has);
				w->commented_rules += has;
				nftnl_rule_free(r);
				break;
			}
			case MSGTYPE(NFT_MSG_NEWSET):
				w->newset++;
				break;
			case MSGTYPE(NFT_MSG_NEWSETELEM):
				w->newsetelem++;
				break;
			case MSGTYPE(NFT_MSG_NEWCHAIN):
				w->newchain++;
				break;
			case MSGTYPE(NFT_MSG_NEWTABLE):
				w->newtable++;
				break;
			case MSGTYPE(NFT_MSG_DELTABLE):
				w->deltable++;
				break;
			}
		}
		w->n++;
		nlh = mnl_nlmsg_next(nlh, &rem);
	}
}

/* Parse the element messages of a batch, calling cb per element. */
struct elemcheck {
	char set[32];
	uint8_t key[32], kend[32];
	uint32_t klen, kelen, verdict;
	char chain[32];
	uint64_t timeout;
	int has_end, has_verdict, has_data;
	uint8_t data[4];
};

static size_t
elems(const void *buf, size_t len, uint16_t type, struct elemcheck *out,
    size_t max)
{
	const struct nlmsghdr *nlh = buf;
	int rem = (int)len;
	size_t n = 0;

	for (; mnl_nlmsg_ok(nlh, rem); nlh = mnl_nlmsg_next(nlh, &rem)) {
		struct nftnl_set *s;
		struct nftnl_set_elems_iter *it;
		struct nftnl_set_elem *e;
		const void *p;
		uint32_t l;

		if (nlh->nlmsg_type != MSGTYPE(type))
			continue;
		s = nftnl_set_alloc();
		if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
			nftnl_set_free(s);
			continue;
		}
		it = nftnl_set_elems_iter_create(s);
		/* _next() returns the current element, then advances */
		for (; n < max && (e = nftnl_set_elems_iter_next(it)) != NULL;
		    n++) {
			memset(&out[n], 0, sizeof(out[n]));
			snprintf(out[n].set, sizeof(out[n].set), "%s",
			    nftnl_set_get_str(s, NFTNL_SET_NAME));
			p = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &l);
			if (p != NULL && l <= 32) {
				memcpy(out[n].key, p, l);
				out[n].klen = l;
			}
			if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END)) {
				p = nftnl_set_elem_get(e,
				    NFTNL_SET_ELEM_KEY_END, &l);
				memcpy(out[n].kend, p, l);
				out[n].kelen = l;
				out[n].has_end = 1;
			}
			if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT)) {
				out[n].has_verdict = 1;
				out[n].verdict = nftnl_set_elem_get_u32(e,
				    NFTNL_SET_ELEM_VERDICT);
				snprintf(out[n].chain, sizeof(out[n].chain),
				    "%s", nftnl_set_elem_get_str(e,
				    NFTNL_SET_ELEM_CHAIN));
			}
			if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)) {
				p = nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA,
				    &l);
				if (p != NULL && l == 4) {
					memcpy(out[n].data, p, 4);
					out[n].has_data = 1;
				}
			}
			if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_TIMEOUT))
				out[n].timeout = nftnl_set_elem_get_u64(e,
				    NFTNL_SET_ELEM_TIMEOUT);
		}
		nftnl_set_elems_iter_destroy(it);
		nftnl_set_free(s);
	}
	return n;
}

static struct in_addr
ip(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a;
}

static size_t
find(struct elemcheck *e, size_t n, const char *set)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(e[i].set, set) == 0)
			return i;
	return n;
}

/* The limits' sets and rules, parsed back. */
struct limits {
	int conns_set_ok, rate_set_ok;
	int conn_rules, conn_ok, conn_log, conn_logchain;
	int rate_rules, rate_ok, rate_log, rate_logchain;
	int admit_gotos, admit_accept, admit_mark;
	int logcap_rules, logcap_ok;	/* the log rate of a tap */
	int first_forward_gen;		/* forward starts with @sb_cur */
	size_t forward_rules;
};

static void
limit_rule(struct nftnl_rule *r, struct limits *lm)
{
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
	struct nftnl_expr *e, *in;
	const char *chain = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
	const char *prefix = NULL, *to = NULL;
	int kind = 0, inner_ok = 0, keyed = 0, to_deny = 0, ctmark = 0;
	int lograte = 0, logsup = 0, curlookup = 0;
	uint32_t l;

	while ((e = nftnl_expr_iter_next(it)) != NULL) {
		const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);

		if (strcmp(name, "payload") == 0 &&
		    nftnl_expr_get_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET) == 12 &&
		    nftnl_expr_get_u32(e, NFTNL_EXPR_PAYLOAD_DREG) == NFT_REG_1)
			keyed = 1;
		if (strcmp(name, "lookup") == 0 && strcmp(nftnl_expr_get_str(e,
		    NFTNL_EXPR_LOOKUP_SET), "sb_cur") == 0)
			curlookup = 1;
		if (strcmp(name, "ct") == 0 &&
		    nftnl_expr_is_set(e, NFTNL_EXPR_CT_SREG) &&
		    nftnl_expr_get_u32(e, NFTNL_EXPR_CT_KEY) == NFT_CT_MARK)
			ctmark = 1;
		if (strcmp(name, "dynset") == 0) {
			const char *set = nftnl_expr_get_str(e,
			    NFTNL_EXPR_DYNSET_SET_NAME);
			uint32_t op = nftnl_expr_get_u32(e,
			    NFTNL_EXPR_DYNSET_OP);

			in = (struct nftnl_expr *)nftnl_expr_get(e,
			    NFTNL_EXPR_DYNSET_EXPR, &l);
			if (strcmp(set, "log_rate") == 0)
				lograte = op == NFT_DYNSET_OP_UPDATE &&
				    in != NULL && strcmp(nftnl_expr_get_str(in,
				    NFTNL_EXPR_NAME), "limit") == 0 &&
				    nftnl_expr_get_u64(in,
				    NFTNL_EXPR_LIMIT_RATE) == 20 &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_LIMIT_BURST) == 40 &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_LIMIT_FLAGS) == NFT_LIMIT_F_INV;
			if (strcmp(set, "log_sup") == 0)
				logsup = op == NFT_DYNSET_OP_ADD &&
				    in != NULL && strcmp(nftnl_expr_get_str(in,
				    NFTNL_EXPR_NAME), "counter") == 0;
			if (strcmp(set, "sb_conns") == 0) {
				kind = 1;
				inner_ok = keyed && op == NFT_DYNSET_OP_ADD &&
				    in != NULL && strcmp(nftnl_expr_get_str(in,
				    NFTNL_EXPR_NAME), "connlimit") == 0 &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_CONNLIMIT_COUNT) == 7 &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_CONNLIMIT_FLAGS) ==
				    NFT_CONNLIMIT_F_INV;
			} else if (strcmp(set, "sb_rate") == 0) {
				kind = 2;
				inner_ok = keyed && op == NFT_DYNSET_OP_UPDATE &&
				    in != NULL && strcmp(nftnl_expr_get_str(in,
				    NFTNL_EXPR_NAME), "limit") == 0 &&
				    nftnl_expr_get_u64(in,
				    NFTNL_EXPR_LIMIT_RATE) == 20 &&
				    nftnl_expr_get_u64(in,
				    NFTNL_EXPR_LIMIT_UNIT) == 1 &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_LIMIT_BURST) == 20 &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_LIMIT_TYPE) == NFT_LIMIT_PKTS &&
				    nftnl_expr_get_u32(in,
				    NFTNL_EXPR_LIMIT_FLAGS) == NFT_LIMIT_F_INV;
			}
		}
		if (strcmp(name, "log") == 0)
			prefix = nftnl_expr_get_str(e, NFTNL_EXPR_LOG_PREFIX);
		if (strcmp(name, "immediate") == 0 &&
		    nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_DREG) ==
		    NFT_REG_VERDICT) {
			int v = (int)nftnl_expr_get_u32(e,
			    NFTNL_EXPR_IMM_VERDICT);

			if (v == NFT_GOTO)
				to = nftnl_expr_get_str(e,
				    NFTNL_EXPR_IMM_CHAIN);
			if (v == NFT_GOTO && strcmp(nftnl_expr_get_str(e,
			    NFTNL_EXPR_IMM_CHAIN), "deny") == 0)
				to_deny = 1;
			if (v == NFT_GOTO && strcmp(nftnl_expr_get_str(e,
			    NFTNL_EXPR_IMM_CHAIN), "admit") == 0)
				lm->admit_gotos++;
			if (v == NF_ACCEPT && strcmp(chain, "admit") == 0)
				lm->admit_accept++;
		}
	}
	nftnl_expr_iter_destroy(it);
	if (kind == 1) {
		lm->conn_rules++;
		lm->conn_ok = inner_ok && strcmp(chain, "admit") == 0;
		lm->conn_log = to != NULL && strcmp(to, "log_conn_limit") == 0;
	} else if (kind == 2) {
		lm->rate_rules++;
		lm->rate_ok = inner_ok && strcmp(chain, "admit") == 0;
		lm->rate_log = to != NULL && strcmp(to, "log_rate_limit") == 0;
	}
	if (strcmp(chain, "log_conn_limit") == 0 && prefix != NULL &&
	    strcmp(prefix, "berth:conn-limit") == 0 && to_deny)
		lm->conn_logchain = 1;
	if (strcmp(chain, "log_rate_limit") == 0 && prefix != NULL &&
	    strcmp(prefix, "berth:rate-limit") == 0 && to_deny)
		lm->rate_logchain = 1;
	if (strcmp(chain, "admit") == 0 && ctmark)
		lm->admit_mark = 1;
	if (lograte || logsup) {
		lm->logcap_rules++;
		if (lograte && logsup)
			lm->logcap_ok++;
	}
	if (strcmp(chain, "forward") == 0 && lm->forward_rules++ == 0)
		lm->first_forward_gen = curlookup;
}

static void
limits(const void *buf, size_t len, struct limits *lm)
{
	const struct nlmsghdr *nlh = buf;
	int rem = (int)len;

	memset(lm, 0, sizeof(*lm));
	for (; mnl_nlmsg_ok(nlh, rem); nlh = mnl_nlmsg_next(nlh, &rem)) {
		if (nlh->nlmsg_type == MSGTYPE(NFT_MSG_NEWRULE)) {
			struct nftnl_rule *r = nftnl_rule_alloc();

			if (nftnl_rule_nlmsg_parse(nlh, r) == 0)
				limit_rule(r, lm);
			nftnl_rule_free(r);
		} else if (nlh->nlmsg_type == MSGTYPE(NFT_MSG_NEWSET)) {
			struct nftnl_set *s = nftnl_set_alloc();
			const char *name;
			uint32_t f;

			if (nftnl_set_nlmsg_parse(nlh, s) == 0) {
				name = nftnl_set_get_str(s, NFTNL_SET_NAME);
				f = nftnl_set_get_u32(s, NFTNL_SET_FLAGS);
				if (strcmp(name, "sb_conns") == 0)
					lm->conns_set_ok = f == NFT_SET_EVAL &&
					    nftnl_set_get_u32(s,
					    NFTNL_SET_KEY_LEN) == 4 &&
					    nftnl_set_get_u32(s,
					    NFTNL_SET_DESC_SIZE) == 65535 &&
					    !nftnl_set_is_set(s,
					    NFTNL_SET_TIMEOUT);
				if (strcmp(name, "sb_rate") == 0)
					lm->rate_set_ok = f == (NFT_SET_EVAL |
					    NFT_SET_TIMEOUT) &&
					    nftnl_set_get_u32(s,
					    NFTNL_SET_KEY_LEN) == 4 &&
					    nftnl_set_get_u64(s,
					    NFTNL_SET_TIMEOUT) == 60000;
			}
			nftnl_set_free(s);
		}
	}
}

/* Build an NLMSG_ERROR for seq with optional extended-ack TLVs. */
static struct nlmsghdr *
make_ack(char *buf, uint32_t seq, int error, const char *msg, int offs)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nlmsgerr *e;

	nlh->nlmsg_type = NLMSG_ERROR;
	nlh->nlmsg_seq = seq;
	nlh->nlmsg_flags = NLM_F_CAPPED;
	e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
	e->error = -error;
	e->msg.nlmsg_seq = seq;
	e->msg.nlmsg_len = sizeof(struct nlmsghdr) + 64;
	if (msg != NULL || offs >= 0) {
		nlh->nlmsg_flags |= NLM_F_ACK_TLVS;
		if (msg != NULL)
			mnl_attr_put_strz(nlh, NLMSGERR_ATTR_MSG, msg);
		if (offs >= 0)
			mnl_attr_put_u32(nlh, NLMSGERR_ATTR_OFFS,
			    (uint32_t)offs);
	}
	return nlh;
}

int
main(void)
{
	struct nc_global g;
	struct nc_cidr permit = { { 0 }, 16 }, extra = { { 0 }, 24 };
	struct in_addr host = ip("203.0.113.1");
	struct nc_sandbox sb;
	struct nc_rule r;
	struct nc_txn *t;
	struct walk w;
	struct elemcheck ec[64];
	const void *buf;
	size_t len, n, i, before;
	char ackbuf[512];
	uint32_t k;
	int code;

	/* ---- init ---- */
	memset(&g, 0, sizeof(g));
	permit.addr = ip("10.1.0.0");
	extra.addr = ip("198.51.100.0");
	g.permit = &permit;
	g.npermit = 1;
	g.deny = &extra;
	g.ndeny = 1;
	g.host_addrs = &host;
	g.nhost_addrs = 1;
	g.nflog_group = 3;
	g.uplink = "eth0";
	t = nc_txn_new(NULL, err, sizeof(err));
	ok(t != NULL, "a context-less transaction for building");
	ok(nc_txn_egress_init(t, &g, err, sizeof(err)) == 0, "init builds");
	n = nc_txn_size(t);
	ok(nc_batch_finish(nc_txn_batch(t), 1000, &(uint32_t){ 42 }, &buf,
	    &len) == 0, "serialize with generation 42");
	walk(buf, len, 1000, &w);
	ok(w.begin_ok, "first message is BATCH_BEGIN for nf_tables");
	is_int(w.genid, 42, "BEGIN carries NFNL_BATCH_GENID");
	ok(w.end_ok, "last message is BATCH_END");
	is_int((long long)w.n, (long long)n + 2, "BEGIN + %zu messages + END",
	    n);
	is_int((long long)w.seq_ok, (long long)w.n,
	    "sequence numbers run 1000, 1001, ... in order");
	is_int((long long)w.ack_flagged, (long long)n,
	    "every message asks for an ack");
	is_int((long long)w.newtable, 4, "create-if-missing + create, for "
	    "inet berth and arp berth");
	is_int((long long)w.deltable, 2, "... with a delete between: "
	    "atomic replace");
	is_int((long long)w.newset, 22, "22 sets and maps (2 of arp berth)");
	is_int((long long)w.newchain, 23, "23 chains (13 of them log_<reason>, "
	    "1 of arp berth)");
	is_int((long long)w.newrule, 75, "75 rules (no limits: admit only "
	    "marks and accepts; 3 in arp berth)");
	is_int((long long)w.commented_rules, 75, "every rule has a comment");
	is_str(nc_batch_what(nc_txn_batch(t), 1000), "batch",
	    "BEGIN's sequence names the batch");
	is_str(nc_batch_what(nc_txn_batch(t), 1001), "table inet berth",
	    "first message names the table");

	/* always_deny: defaults + 198.51.100.0/24 + host, minus 10.1/16 */
	n = elems(buf, len, NFT_MSG_NEWSETELEM, ec, 64);
	{
		int split = 0, extra_seen = 0, hostseen = 0, meta = 0;

		for (i = 0; i < n; i++) {
			if (strcmp(ec[i].set, "always_deny") != 0)
				continue;
			memcpy(&k, ec[i].key, 4);
			k = ntohl(k);
			if (k == 0x0a010000 || k == 0x0a020000)
				split++;	/* end at 10.1/16, start after */
			if (k == 0xc6336400)
				extra_seen = 1;
			if (k == 0xcb007101)
				hostseen = 1;
			if (k == 0xa9fe0000)
				meta = 1;
		}
		is_int(split, 2, "ops' permit 10.1.0.0/16 splits 10.0.0.0/8");
		ok(extra_seen, "ops' extra range 198.51.100.0/24 is denied");
		ok(hostseen, "host address 203.0.113.1 is denied");
		ok(meta, "169.254.0.0/16 (metadata) is denied");
	}
	i = find(ec, n, "dns_ports");
	ok(i < n && ec[i].klen == 8, "dns_ports elements (proto . port)");
	nc_txn_free(t);

	/* ---- ops' limits: a connection cap and a new-connection rate ---- */
	t = nc_txn_new(NULL, err, sizeof(err));
	g.conn_limit = 7;
	g.new_conn_rate = 20;
	ok(nc_txn_egress_init(t, &g, err, sizeof(err)) == 0,
	    "init with conn_limit 7 and new_conn_rate 20 builds");
	nc_batch_finish(nc_txn_batch(t), 1, NULL, &buf, &len);
	walk(buf, len, 1, &w);
	is_int((long long)w.newrule, 77, "two more rules, in chain admit");
	{
		struct limits lm;

		limits(buf, len, &lm);
		ok(lm.conns_set_ok, "set sb_conns: ipv4 key, dynamic, size "
		    "65535, no timeout");
		ok(lm.rate_set_ok, "set sb_rate: ipv4 key, dynamic, 60 s "
		    "timeout");
		is_int(lm.conn_rules, 1, "one ct count rule");
		ok(lm.conn_ok, "... dynset add @sb_conns keyed by ip saddr "
		    "{ ct count over 7 }");
		ok(lm.conn_log, "... goes to log_conn_limit");
		ok(lm.conn_logchain, "... which logs berth:conn-limit, goes "
		    "to deny");
		is_int(lm.rate_rules, 1, "one rate rule");
		ok(lm.rate_ok, "... dynset update @sb_rate keyed by ip saddr "
		    "{ limit rate over 20/second burst 20 packets }");
		ok(lm.rate_log, "... goes to log_rate_limit");
		ok(lm.rate_logchain, "... which logs berth:rate-limit, goes "
		    "to deny");
		is_int(lm.admit_gotos, 5, "mode_open and the four allowlist "
		    "lookups go to admit");
		is_int(lm.admit_accept, 2, "admit accepts, with the generation "
		    "or without");
		ok(lm.admit_mark, "admit sets ct mark (the generation)");
		is_int(lm.logcap_rules, 26, "two log-rate rules per reason "
		    "(from a tap, into a tap)");
		is_int(lm.logcap_ok, 26, "... each: update @log_rate { limit "
		    "rate over 20/second burst 40 } add @log_sup { counter }");
		ok(lm.first_forward_gen, "forward starts with the @sb_cur "
		    "lookup (flows of the current generation)");
	}
	nc_txn_free(t);
	g.conn_limit = g.new_conn_rate = 0;

	/* ---- attach ---- */
	t = nc_txn_new(NULL, err, sizeof(err));
	memset(&sb, 0, sizeof(sb));
	sb.ifname = "tap7";
	sb.ip = ip("10.200.0.2");
	sb.gw = ip("10.200.0.1");
	memcpy(sb.mac, "\x02\x00\x00\x00\x00\x02", 6);
	sb.mode = NC_MODE_ALLOWLIST;
	ok(nc_txn_sandbox_attach(t, &sb, err, sizeof(err)) == 0, "attach");
	is_int((long long)nc_txn_size(t), 10, "attach is 10 element messages");
	nc_batch_finish(nc_txn_batch(t), 1, NULL, &buf, &len);
	walk(buf, len, 1, &w);
	is_int(w.genid, 0, "no genid attribute when none is given");
	n = elems(buf, len, NFT_MSG_NEWSETELEM, ec, 64);
	is_int((long long)n, 10, "10 elements parse back");
	i = find(ec, n, "sb_arp");
	ok(i < n && ec[i].klen == 32 && memcmp(ec[i].key, "tap7\0", 5) == 0 &&
	    memcmp(ec[i].key + 16, sb.mac, 6) == 0 &&
	    memcmp(ec[i].key + 24, &sb.ip.s_addr, 4) == 0 &&
	    memcmp(ec[i].key + 28, &sb.gw.s_addr, 4) == 0,
	    "arp sb_arp: tap . MAC . guest . gateway");
	i = find(ec, n, "sb_gen");
	memcpy(&k, ec[i < n ? i : 0].data, 4);
	ok(i < n && ec[i].has_data && k == 1 && ec[i].klen == 4,
	    "sb_gen: guest -> this batch's generation (ruleset gen 0 + 1)");
	i = find(ec, n, "sb_cur");
	memcpy(&k, ec[i < n ? i : 0].key + 4, 4);
	ok(i < n && ec[i].klen == 8 && memcmp(ec[i].key, &sb.ip.s_addr,
	    4) == 0 && k == 1, "sb_cur: guest . generation (host order)");
	i = find(ec, n, "sb_src");
	ok(i < n && ec[i].klen == 20 && memcmp(ec[i].key, "tap7\0\0\0\0", 8) == 0
	    && memcmp(ec[i].key + 16, &sb.ip.s_addr, 4) == 0,
	    "sb_src key: ifname padded to 16 bytes . guest IP");
	i = find(ec, n, "sb_mac");
	ok(i < n && ec[i].klen == 24 && memcmp(ec[i].key + 16, sb.mac, 6) == 0,
	    "sb_mac key: ifname . MAC (padded to 8)");
	i = find(ec, n, "sb_mode");
	ok(i < n && ec[i].has_verdict && ec[i].verdict == (uint32_t)NFT_GOTO &&
	    strcmp(ec[i].chain, "mode_allowlist") == 0,
	    "sb_mode: guest -> goto mode_allowlist");

	/* ---- a failed add leaves the transaction as it was ---- */
	before = nc_txn_size(t);
	sb.ifname = "a-name-much-too-long";
	ok(nc_txn_sandbox_attach(t, &sb, err, sizeof(err)) == -EINVAL &&
	    strstr(err, "a-name-much-too-long") != NULL,
	    "too long a tap name is refused, by name");
	sb.ifname = "tap8";
	sb.mac[0] = 0x03;
	ok(nc_txn_sandbox_attach(t, &sb, err, sizeof(err)) == -EINVAL &&
	    strstr(err, "unicast") != NULL, "multicast MAC refused");
	is_int((long long)nc_txn_size(t), (long long)before,
	    "nothing of a refused add is queued");
	nc_txn_free(t);

	/* ---- rules ---- */
	t = nc_txn_new(NULL, err, sizeof(err));
	nc_rule_parse("10.1.0.0/16:443", &r, err, sizeof(err));
	ok(nc_txn_allow_add(t, ip("10.200.0.2"), &r, 0, err, sizeof(err)) == 0,
	    "allow 10.1.0.0/16:443");
	nc_rule_parse("1.2.3.4:443/tcp", &r, err, sizeof(err));
	ok(nc_txn_allow_add(t, ip("10.200.0.2"), &r, 5000, err,
	    sizeof(err)) == 0, "allow 1.2.3.4:443/tcp for 5 s");
	nc_rule_parse("1.2.3.0/24", &r, err, sizeof(err));
	ok(nc_txn_deny_add(t, ip("10.200.0.2"), &r, 0, err, sizeof(err)) == 0,
	    "deny 1.2.3.0/24");
	nc_batch_finish(nc_txn_batch(t), 1, NULL, &buf, &len);
	n = elems(buf, len, NFT_MSG_NEWSETELEM, ec, 64);
	is_int((long long)n, 4, "a port without protocol is tcp + udp: 4 "
	    "elements");
	ok(strcmp(ec[0].set, "allow_net") == 0 && ec[0].has_end &&
	    ec[0].key[8] == 6 && ec[1].key[8] == 17,
	    "CIDR rule -> allow_net, tcp and udp");
	memcpy(&k, ec[0].key + 4, 4);
	ok(ntohl(k) == 0x0a010000 &&
	    memcmp(ec[0].kend + 4, "\x0a\x01\xff\xff", 4) == 0,
	    "range 10.1.0.0 - 10.1.255.255");
	ok(memcmp(ec[0].key + 12, "\x01\xbb", 2) == 0 &&
	    memcmp(ec[0].kend + 12, "\x01\xbb", 2) == 0,
	    "port 443 in network order at bytes 12-13");
	ok(strcmp(ec[2].set, "allow_ip") == 0 && !ec[2].has_end &&
	    ec[2].timeout == 5000, "exact rule -> allow_ip, timeout 5000 ms");
	ok(strcmp(ec[3].set, "deny_net") == 0 && ec[3].key[8] == 0 &&
	    ec[3].kend[8] == 255 && memcmp(ec[3].kend + 12, "\xff\xff", 2) == 0,
	    "any-protocol deny: proto 0-255, port 0-65535");

	nc_rule_parse("1.2.3.4:443/tcp", &r, err, sizeof(err));
	before = nc_txn_size(t);
	ok(nc_txn_learned_add(t, ip("10.200.0.2"), &r, "a.example", 3000, err,
	    sizeof(err)) == 0, "a DNS-learned address");
	nc_rule_parse("1.2.3.5:8000-8100/tcp", &r, err, sizeof(err));
	ok(nc_txn_learned_add(t, ip("10.200.0.2"), &r, NULL, 3000, err,
	    sizeof(err)) == 0, "... and one with a port range");
	nc_batch_finish(nc_txn_batch(t), 1, NULL, &buf, &len);
	n = elems(buf, len, NFT_MSG_NEWSETELEM, ec, 64);
	ok(n == 6 && strcmp(ec[4].set, "allow_dns_ip") == 0 &&
	    ec[4].timeout == 3000 && strcmp(ec[5].set, "allow_dns_net") == 0,
	    "learned addresses go to allow_dns_ip / allow_dns_net, never to "
	    "the rules' sets");
	is_int((long long)nc_txn_size(t), (long long)before + 2,
	    "... and take no new generation (loosening)");

	nc_rule_parse("example.com", &r, err, sizeof(err));
	ok(nc_txn_allow_add(t, ip("10.200.0.2"), &r, 0, err, sizeof(err)) < 0 &&
	    strstr(err, "DNS resolver") != NULL,
	    "domain rules are for the resolver");

	/* ---- acks ---- */
	code = nc_nft_parse_ack(nc_txn_batch(t), make_ack(ackbuf, 3, 0, NULL,
	    -1), err, sizeof(err));
	is_int(code, 0, "plain ack: no error");
	err[0] = '\0';
	code = nc_nft_parse_ack(nc_txn_batch(t), make_ack(ackbuf, 4, EEXIST,
	    "Overlapping elements", 52), err, sizeof(err));
	is_int(code, EEXIST, "error ack: errno");
	ok(strstr(err, "sandbox 10.200.0.2: allow rule '1.2.3.4:443/tcp' in "
	    "set allow_ip") == err, "error names the object of seq 4");
	ok(strstr(err, "File exists") != NULL &&
	    strstr(err, "kernel says: Overlapping elements") != NULL &&
	    strstr(err, "at byte 52") != NULL,
	    "strerror, extended-ack message and offset");
	diag("%s", err);
	code = nc_nft_parse_ack(nc_txn_batch(t), make_ack(ackbuf, 1, ERESTART,
	    NULL, -1), err, sizeof(err));
	ok(code == ERESTART && strncmp(err, "batch: ", 7) == 0 &&
	    strstr(err, "retry") != NULL, "stale generation names the batch");
	nc_txn_free(t);

	/* ---- validation ---- */
	t = nc_txn_new(NULL, err, sizeof(err));
	g.uplink = "bad/name";
	ok(nc_txn_egress_init(t, &g, err, sizeof(err)) == -EINVAL &&
	    nc_txn_size(t) == 0, "bad uplink name refused before building");
	ok(nc_txn_commit(t, err, sizeof(err)) == -EINVAL,
	    "a context-less transaction cannot be committed");
	ok(nc_txn_sandbox_detach(t, "tap0", ip("10.200.0.2"), err,
	    sizeof(err)) == -EINVAL, "nor hold a detach");
	nc_txn_free(t);
	return done_testing();
}
