/*
 * nc_bench.c — the C half of tests/bench/nft: loads many fake sandboxes
 * into berth's table through libnetctl, writes the equivalent
 * iptables-style ruleset (one chain per sandbox) as an nft script, and
 * times policy updates of one sandbox in both layouts, in process, so
 * that no fork/exec or ruleset parsing is counted.
 *
 *   nc_bench berth-load N R REAL_IP
 *       attach N-1 fake sandboxes (taps bk0.., guests 10.250.0.0/16, mode
 *       allowlist) with R allow rules each, in batches of 1000, and give
 *       the attached sandbox REAL_IP the R rules of index N-1 (so N in
 *       all, each with R rules, as ipt-script writes them); prints the
 *       time the batches took in ms
 *   nc_bench berth-update GUEST N
 *       N times: nc_allow_add then nc_allow_del of one rule
 *       (198.51.100.x:443/tcp) for GUEST; each call is one sample
 *   nc_bench ipt-script N R REAL_IP REAL_ALLOW UPLINK
 *       print table inet bench_ipt: forward holds N-1 `ip saddr X jump
 *       sb_I` rules for the fake sandboxes, then one for REAL_IP (chain
 *       sb_real, last: the newest sandbox is appended); every sb_* chain is
 *       ct established,related accept; its R allow rules; reject. sb_real
 *       also allows REAL_ALLOW (ADDR:PORT/tcp). Plus masquerade via UPLINK.
 *   nc_bench ipt-update REAL_ALLOW R NSB N
 *       (NSB as ipt-script's N) N times: one batch that flushes chain
 *       sb_real and writes its rules again, alternately with and without
 *       one extra allow rule (the same change berth-update makes),
 *       generation-checked like libnetctl's; each batch is one sample
 * The update commands print "samples S p50 P p99 Q max M" (microseconds).
 * Errors go to stderr; exit 1.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <net/if.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netlink.h>

#include "netctl.h"
#include "nc_nft.h"

#define IPT_TABLE "bench_ipt"
#define WARMUP 20

static char err[NC_ERRLEN];

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "nc_bench: %s: %s\n", what, err);
	exit(1);
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static struct in_addr
ip_arg(const char *s)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1) {
		fprintf(stderr, "nc_bench: bad address '%s'\n", s);
		exit(2);
	}
	return a;
}

static void
rule_arg(const char *s, struct nc_rule *r)
{
	if (nc_rule_parse(s, r, err, sizeof(err)) < 0 ||
	    r->kind != NC_RULE_ADDR)
		die("rule");
}

/* Fake sandbox i: guest 10.250.x.y (as nc_drive bulk). */
static struct in_addr
fake_ip(int i)
{
	struct in_addr a;

	a.s_addr = htonl(0x0afa0000U | (uint32_t)(i * 4 + 2));
	return a;
}

/* Allow rule k of sandbox i: even k a host:443/tcp, odd k a /24 with a
 * port range; no two rules of one sandbox overlap. */
static void
fake_rule(int i, int k, struct nc_rule *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = NC_RULE_ADDR;
	r->proto = NC_PROTO_TCP;
	if (k % 2 == 0) {
		r->addr.s_addr = htonl((93U << 24) | ((184U + k / 2) << 16) |
		    ((uint32_t)(i >> 8 & 255) << 8) | (uint32_t)(i & 255));
		r->plen = 32;
		r->port_lo = r->port_hi = 443;
	} else {
		r->addr.s_addr = htonl((151U << 24) | ((101U + k / 2) << 16) |
		    ((uint32_t)(i & 255) << 8));
		r->plen = 24;
		r->port_lo = 8000;
		r->port_hi = 8100;
	}
}

static void
update_rule(int i, struct nc_rule *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = NC_RULE_ADDR;
	r->proto = NC_PROTO_TCP;
	r->addr.s_addr = htonl((198U << 24) | (51U << 16) | (100U << 8) |
	    (uint32_t)(1 + i % 250));
	r->plen = 32;
	r->port_lo = r->port_hi = 443;
}

static int
dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
report(double *s, int n)
{
	int i99 = (int)(0.99 * n + 0.5) - 1;

	qsort(s, (size_t)n, sizeof(*s), dcmp);
	if (i99 < 0)
		i99 = 0;
	printf("samples %d p50 %.0f p99 %.0f max %.0f\n", n, s[n / 2],
	    s[i99], s[n - 1]);
}

/* ---- berth ---- */

static int
berth_load(int n, int nr, struct in_addr real)
{
	struct nc_ctx *ctx;
	struct nc_txn *t = NULL;
	struct nc_sandbox sb;
	struct nc_rule r;
	char ifn[IFNAMSIZ];
	double t0 = now_us();
	int i, k;

	if ((ctx = nc_ctx_new(err, sizeof(err))) == NULL)
		die("context");
	for (i = 0; i < n; i++) {
		if (t == NULL && (t = nc_txn_new(ctx, err, sizeof(err))) == NULL)
			die("txn");
		memset(&sb, 0, sizeof(sb));
		sb.ip = i == n - 1 ? real : fake_ip(i);
		if (i < n - 1) {
			snprintf(ifn, sizeof(ifn), "bk%d", i);
			sb.ifname = ifn;
			sb.gw.s_addr = htonl(ntohl(sb.ip.s_addr) - 1);
			sb.mac[0] = 0x02;
			sb.mac[4] = (uint8_t)(i >> 8);
			sb.mac[5] = (uint8_t)i;
			sb.mode = NC_MODE_ALLOWLIST;
			if (nc_txn_sandbox_attach(t, &sb, err,
			    sizeof(err)) < 0)
				die("attach");
		}
		for (k = 0; k < nr; k++) {
			fake_rule(i, k, &r);
			if (nc_txn_allow_add(t, sb.ip, &r, 0, err,
			    sizeof(err)) < 0)
				die("allow");
		}
		if ((i + 1) % 1000 == 0 || i == n - 1) {
			if (nc_txn_commit(t, err, sizeof(err)) < 0)
				die("commit");
			nc_txn_free(t);
			t = NULL;
		}
	}
	printf("%.1f\n", (now_us() - t0) / 1e3);
	nc_ctx_free(ctx);
	return 0;
}

static int
berth_update(struct in_addr guest, int n)
{
	struct nc_ctx *ctx;
	struct nc_rule r;
	double *s, t0;
	int i, m = 0;

	if ((ctx = nc_ctx_new(err, sizeof(err))) == NULL)
		die("context");
	if ((s = calloc((size_t)n * 2, sizeof(*s))) == NULL)
		return 1;
	for (i = 0; i < n + WARMUP; i++) {
		update_rule(i, &r);
		t0 = now_us();
		if (nc_allow_add(ctx, guest, &r, 0, err, sizeof(err)) < 0)
			die("allow add");
		if (i >= WARMUP)
			s[m++] = now_us() - t0;
		t0 = now_us();
		if (nc_allow_del(ctx, guest, &r, err, sizeof(err)) < 0)
			die("allow del");
		if (i >= WARMUP)
			s[m++] = now_us() - t0;
	}
	report(s, m);
	free(s);
	nc_ctx_free(ctx);
	return 0;
}

/* ---- iptables-style ---- */

static void
print_rule(const struct nc_rule *r)
{
	char a[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &r->addr, a, sizeof(a));
	if (r->plen == 32)
		printf("\t\tip daddr %s", a);
	else
		printf("\t\tip daddr %s/%u", a, r->plen);
	if (r->port_lo == r->port_hi)
		printf(" tcp dport %u accept\n", r->port_lo);
	else
		printf(" tcp dport %u-%u accept\n", r->port_lo, r->port_hi);
}

static void
print_chain(const char *name, int i, int nr, const struct nc_rule *extra)
{
	struct nc_rule r;
	int k;

	printf("\tchain %s {\n", name);
	printf("\t\tct state established,related accept\n");
	if (extra != NULL)
		print_rule(extra);
	for (k = 0; k < nr; k++) {
		fake_rule(i, k, &r);
		print_rule(&r);
	}
	printf("\t\treject with icmpx admin-prohibited\n\t}\n");
}

static int
ipt_script(int n, int nr, const char *real_ip, const struct nc_rule *real,
    const char *uplink)
{
	char a[INET_ADDRSTRLEN], name[32];
	struct in_addr ip;
	int i;

	printf("table inet %s {\n", IPT_TABLE);
	for (i = 0; i < n - 1; i++) {
		snprintf(name, sizeof(name), "sb_%d", i);
		print_chain(name, i, nr, NULL);
	}
	print_chain("sb_real", n - 1, nr, real);
	printf("\tchain forward {\n"
	    "\t\ttype filter hook forward priority filter; policy accept;\n");
	for (i = 0; i < n - 1; i++) {
		ip = fake_ip(i);
		inet_ntop(AF_INET, &ip, a, sizeof(a));
		printf("\t\tip saddr %s jump sb_%d\n", a, i);
	}
	printf("\t\tip saddr %s jump sb_real\n\t}\n", real_ip);
	printf("\tchain postrouting {\n"
	    "\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
	    "\t\toifname \"%s\" ip saddr 10.0.0.0/8 masquerade\n\t}\n}\n",
	    uplink);
	return 0;
}

static struct nftnl_expr *
ex(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);

	if (e == NULL) {
		fprintf(stderr, "nc_bench: out of memory\n");
		exit(1);
	}
	nftnl_rule_add_expr(r, e);
	return e;
}

static void
x_meta(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = ex(r, "meta");

	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
}

static void
x_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
	struct nftnl_expr *e = ex(r, "payload");

	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
}

static void
x_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = ex(r, "cmp");

	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

static void
x_bitwise(struct nftnl_rule *r, const void *mask, uint32_t len)
{
	struct nftnl_expr *e = ex(r, "bitwise");
	uint32_t zero = 0;

	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, len);
}

static void
x_verdict(struct nftnl_rule *r, int verdict)
{
	struct nftnl_expr *e = ex(r, "immediate");

	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
}

static struct nftnl_rule *
rule_new(void)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	if (r == NULL) {
		fprintf(stderr, "nc_bench: out of memory\n");
		exit(1);
	}
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, IPT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, "sb_real");
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return r;
}

static void
queue(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_rule *r, const char *what)
{
	if (nc_batch_rule(b, type, flags, r, what) < 0) {
		fprintf(stderr, "nc_bench: out of memory\n");
		exit(1);
	}
	nftnl_rule_free(r);
}

/* ip daddr A[/plen] tcp dport LO[-HI] accept */
static void
queue_allow(struct nc_batch *b, const struct nc_rule *a)
{
	struct nftnl_rule *r = rule_new();
	uint8_t v4 = NFPROTO_IPV4, tcp = IPPROTO_TCP;
	uint32_t mask = htonl(a->plen ? ~0U << (32 - a->plen) : 0);
	uint16_t lo = htons(a->port_lo), hi = htons(a->port_hi);

	x_meta(r, NFT_META_NFPROTO);
	x_cmp(r, NFT_CMP_EQ, &v4, 1);
	x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4);
	if (a->plen != 32)
		x_bitwise(r, &mask, 4);
	x_cmp(r, NFT_CMP_EQ, &a->addr, 4);
	x_meta(r, NFT_META_L4PROTO);
	x_cmp(r, NFT_CMP_EQ, &tcp, 1);
	x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
	if (lo == hi) {
		x_cmp(r, NFT_CMP_EQ, &lo, 2);
	} else {
		x_cmp(r, NFT_CMP_GTE, &lo, 2);
		x_cmp(r, NFT_CMP_LTE, &hi, 2);
	}
	x_verdict(r, NF_ACCEPT);
	queue(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r,
	    "rule sb_real allow");
}

static void
queue_chain(struct nc_batch *b, int idx, int nr, const struct nc_rule *real,
    const struct nc_rule *extra)
{
	struct nftnl_rule *r;
	struct nftnl_expr *e;
	uint32_t st = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
	    NF_CT_STATE_BIT(IP_CT_RELATED), zero = 0;
	struct nc_rule fr;
	int k;

	/* DELRULE naming only the chain flushes it */
	queue(b, NFT_MSG_DELRULE, 0, rule_new(), "flush chain sb_real");
	r = rule_new();
	e = ex(r, "ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	x_bitwise(r, &st, 4);
	x_cmp(r, NFT_CMP_NEQ, &zero, 4);
	x_verdict(r, NF_ACCEPT);
	queue(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r,
	    "rule sb_real ct");
	queue_allow(b, real);
	if (extra != NULL)
		queue_allow(b, extra);
	for (k = 0; k < nr; k++) {
		fake_rule(idx, k, &fr);
		queue_allow(b, &fr);
	}
	r = rule_new();
	e = ex(r, "reject");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE,
	    NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	queue(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r,
	    "rule sb_real reject");
}

static int
ipt_update(const struct nc_rule *real, int nr, int idx, int n)
{
	struct nc_nft *nft;
	struct nc_batch *b;
	struct nc_rule x;
	uint32_t gen;
	double *s, t0;
	int i, m = 0, ret;

	if ((nft = nc_nft_open(err, sizeof(err))) == NULL)
		die("netlink");
	if ((s = calloc((size_t)n * 2, sizeof(*s))) == NULL)
		return 1;
	for (i = 0; i < 2 * (n + WARMUP); i++) {
		update_rule(i / 2, &x);
		t0 = now_us();
		if ((b = nc_batch_new()) == NULL)
			return 1;
		queue_chain(b, idx, nr, real, i % 2 == 0 ? &x : NULL);
		if (nc_nft_getgen(nft, &gen, err, sizeof(err)) < 0)
			die("getgen");
		ret = nc_nft_commit(nft, b, &gen, err, sizeof(err));
		nc_batch_free(b);
		if (ret < 0)
			die("commit");
		if (i >= 2 * WARMUP)
			s[m++] = now_us() - t0;
	}
	report(s, m);
	free(s);
	nc_nft_close(nft);
	return 0;
}

int
main(int argc, char **argv)
{
	struct nc_rule r;

	if (argc == 5 && strcmp(argv[1], "berth-load") == 0)
		return berth_load(atoi(argv[2]), atoi(argv[3]),
		    ip_arg(argv[4]));
	if (argc == 4 && strcmp(argv[1], "berth-update") == 0)
		return berth_update(ip_arg(argv[2]), atoi(argv[3]));
	if (argc == 7 && strcmp(argv[1], "ipt-script") == 0) {
		ip_arg(argv[4]);
		rule_arg(argv[5], &r);
		return ipt_script(atoi(argv[2]), atoi(argv[3]), argv[4], &r,
		    argv[6]);
	}
	if (argc == 6 && strcmp(argv[1], "ipt-update") == 0) {
		rule_arg(argv[2], &r);
		/* sb_real is sandbox NSB-1 of the script: its R rules are
		 * those of that index */
		return ipt_update(&r, atoi(argv[3]), atoi(argv[4]) - 1,
		    atoi(argv[5]));
	}
	fprintf(stderr, "usage: see the head of tests/bench/nc_bench.c\n");
	return 2;
}
