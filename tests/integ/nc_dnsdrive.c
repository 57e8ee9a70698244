/*
 * nc_dnsdrive.c — runs libnetctl's filtering DNS resolver for shell tests
 * (tests/integ/egress-dns.sh), and asks DNS questions like a tiny dig.
 *   nc_dnsdrive serve --guest IP --gw IP [--id ID] [--mode MODE]
 *       [--allow RULE]... [--deny RULE]... --resolver IP[:PORT]...
 *       [--grace-ms N] [--ttl-min S] [--ttl-max S] [--timeout-ms N]
 *       [--attempts N] [--max-inflight N] [--refused] [--no-nft]
 *       [--tap IF --mac MAC --rules FILE]
 *     prints "ready", then one line per event:
 *       denial SEC.USEC SANDBOX GUEST NAME QTYPE REASON
 *       error MESSAGE
 *     and on SIGUSR1 "stats k=v ..."; SIGTERM/SIGINT end it. With
 *     --rules, SIGHUP re-applies the sandbox the way berthd does when
 *     its rules or the policy change (see reapply() below) from FILE:
 *     lines "mode MODE", "allow RULE", "deny RULE", and optionally
 *     "global [--uplink IF] [--tap-prefix P] [--group N]
 *     [--host-addr A]... [--deny CIDR]..." to rebuild the whole table,
 *     "restore yes" to put the learned addresses back after the batch
 *     (berthd's fallback) rather than in it.
 *   nc_dnsdrive query SERVER NAME [TYPE] [--tcp] [--timeout MS]
 *     prints "RCODE ancount=N tc=0|1" then "NAME TTL TYPE DATA" lines.
 *   nc_dnsdrive raw SERVER HEX     send HEX over UDP, print the rcode
 *     of the answer ("none" after 1 s).
 *   nc_dnsdrive burst SERVER NAME N   N A queries at once from one UDP
 *     socket; prints how they were answered: "NOERROR a REFUSED b ...
 *     none c" (none: no answer within 2 s)
 * serve also takes the tunnel limits: --qtypes T,T... --query-rate N
 *   --label-max N --wildcard-names N (see nc_dns.h).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>

#include "netctl.h"
#include "nc_dns.h"

static char err[NC_ERRLEN];

static void __attribute__((noreturn))
usage(const char *why)
{
	fprintf(stderr, "nc_dnsdrive: %s (see the top of nc_dnsdrive.c)\n",
	    why);
	exit(2);
}

static struct in_addr
ip_arg(const char *s)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		usage("bad address");
	return a;
}

static void
sockaddr_arg(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strchr(s, ':');

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	snprintf(host, sizeof(host), "%.*s",
	    (int)(colon ? (size_t)(colon - s) : strlen(s)), s);
	sa->sin_addr = ip_arg(host);
	sa->sin_port = htons(colon ? (uint16_t)atoi(colon + 1) : 53);
}

static const char *
type_name(uint16_t t)
{
	switch (t) {
	case NC_DNS_T_A: return "A";
	case NC_DNS_T_AAAA: return "AAAA";
	case NC_DNS_T_CNAME: return "CNAME";
	case NC_DNS_T_MX: return "MX";
	case NC_DNS_T_TXT: return "TXT";
	case NC_DNS_T_NS: return "NS";
	case NC_DNS_T_SRV: return "SRV";
	case NC_DNS_T_PTR: return "PTR";
	case NC_DNS_T_SOA: return "SOA";
	}
	return "TYPE?";
}

static uint16_t
type_arg(const char *s)
{
	static const uint16_t t[] = { NC_DNS_T_A, NC_DNS_T_AAAA,
	    NC_DNS_T_CNAME, NC_DNS_T_MX, NC_DNS_T_TXT, NC_DNS_T_NS,
	    NC_DNS_T_SRV, NC_DNS_T_PTR, NC_DNS_T_SOA };
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcasecmp(s, type_name(t[i])) == 0)
			return t[i];
	if (strcasecmp(s, "ANY") == 0)
		return NC_DNS_T_ANY;
	return (uint16_t)atoi(s);
}

static const char *
rcode_name(int r)
{
	static const char *n[] = { "NOERROR", "FORMERR", "SERVFAIL",
	    "NXDOMAIN", "NOTIMP", "REFUSED" };

	return r >= 0 && r < 6 ? n[r] : "RCODE?";
}

/* ---- serve ---- */

static void
on_denial(const struct nc_dns_denial *d, void *arg)
{
	char g[INET_ADDRSTRLEN];

	(void)arg;
	inet_ntop(AF_INET, &d->guest, g, sizeof(g));
	printf("denial %lld.%06ld %s %s %s %s %s\n", (long long)d->when.tv_sec,
	    d->when.tv_nsec / 1000, d->sandbox, g, d->name,
	    type_name(d->qtype), d->reason);
	fflush(stdout);
}

static void
on_error(const char *msg, void *arg)
{
	(void)arg;
	printf("error %s\n", msg);
	fflush(stdout);
}

static struct nc_dns *the_dns;
static void reapply(void);

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct nc_dns_stats s;

	(void)what;
	if (sig == SIGHUP) {
		reapply();
		return;
	}
	if (sig != SIGUSR1) {
		event_base_loopbreak(arg);
		return;
	}
	nc_dns_get_stats(the_dns, &s);
	printf("stats queries=%llu allowed=%llu denied=%llu answered=%llu "
	    "servfail=%llu formerr=%llu dropped=%llu upstream_sent=%llu "
	    "upstream_tcp=%llu upstream_fail=%llu inserted=%llu "
	    "insert_fail=%llu limited=%llu rechecks=%llu\n",
	    (unsigned long long)s.queries, (unsigned long long)s.allowed,
	    (unsigned long long)s.denied, (unsigned long long)s.answered,
	    (unsigned long long)s.servfail, (unsigned long long)s.formerr,
	    (unsigned long long)s.dropped,
	    (unsigned long long)s.upstream_sent,
	    (unsigned long long)s.upstream_tcp,
	    (unsigned long long)s.upstream_fail,
	    (unsigned long long)s.inserted,
	    (unsigned long long)s.insert_fail, (unsigned long long)s.limited,
	    (unsigned long long)s.rechecks);
	fflush(stdout);
}

/* ---- re-apply, as berthd does (proxy/sandbox/egress.c apply / init_table) ----
 * On SIGHUP the rules file is read and the sandbox applied afresh in one
 * batch: its clear (or, with a "global" line, the whole table rebuilt
 * with those always-deny ranges, which also join the deny rules as the
 * policy's do), attach, address rules, and the DNS-learned addresses the
 * new rules still allow; then the resolver gets the new rules. Prints
 * "applied N learned=K" or "error apply: ...". */

static struct {
	const char *file, *tap;
	uint8_t mac[6];
	struct in_addr guest, gw;
	struct nc_ctx *ctx;
	int gen;
} R;

struct policy {
	enum nc_mode mode;
	struct nc_rule allow[32], deny[48];
	size_t nallow, ndeny;
	int global, restore;
	struct nc_global g;
	char uplink[32], prefix[32];
	struct in_addr host[8];
	struct nc_cidr gdeny[16];
};

static int
cidr_parse(const char *s, struct nc_cidr *c)
{
	struct nc_rule r;

	if (nc_rule_parse(s, &r, err, sizeof(err)) < 0 ||
	    r.kind != NC_RULE_ADDR)
		return -1;
	c->addr = r.addr;
	c->plen = r.plen;
	return 0;
}

static int
global_line(char *args, struct policy *p)
{
	char *o, *v, *save = NULL;

	p->global = 1;
	memset(&p->g, 0, sizeof(p->g));
	p->g.deny = p->gdeny;
	p->g.host_addrs = p->host;
	for (o = strtok_r(args, " \t\n", &save); o != NULL;
	    o = strtok_r(NULL, " \t\n", &save)) {
		if ((v = strtok_r(NULL, " \t\n", &save)) == NULL)
			return -1;
		if (strcmp(o, "--uplink") == 0) {
			snprintf(p->uplink, sizeof(p->uplink), "%s", v);
			p->g.uplink = p->uplink;
		} else if (strcmp(o, "--tap-prefix") == 0) {
			snprintf(p->prefix, sizeof(p->prefix), "%s", v);
			p->g.tap_prefix = p->prefix;
		} else if (strcmp(o, "--group") == 0)
			p->g.nflog_group = (uint16_t)atoi(v);
		else if (strcmp(o, "--host-addr") == 0 && p->g.nhost_addrs < 8) {
			if (inet_pton(AF_INET, v, &p->host[p->g.nhost_addrs++])
			    != 1)
				return -1;
		} else if (strcmp(o, "--deny") == 0 && p->g.ndeny < 16 &&
		    p->ndeny < 48) {
			if (cidr_parse(v, &p->gdeny[p->g.ndeny++]) < 0 ||
			    nc_rule_parse(v, &p->deny[p->ndeny++], err,
			    sizeof(err)) < 0)
				return -1;
		} else
			return -1;
	}
	return 0;
}

static int
policy_read(const char *file, struct policy *p)
{
	char line[512], *v;
	FILE *f;
	int ret = 0;

	memset(p, 0, sizeof(*p));
	p->mode = NC_MODE_ALLOWLIST;
	if ((f = fopen(file, "r")) == NULL) {
		snprintf(err, sizeof(err), "%s: %s", file, strerror(errno));
		return -1;
	}
	while (ret == 0 && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((v = strchr(line, ' ')) == NULL)
			continue;
		*v++ = '\0';
		if (strcmp(line, "mode") == 0)
			ret = nc_mode_parse(v, &p->mode);
		else if (strcmp(line, "allow") == 0 && p->nallow < 32)
			ret = nc_rule_parse(v, &p->allow[p->nallow++], err,
			    sizeof(err));
		else if (strcmp(line, "deny") == 0 && p->ndeny < 48)
			ret = nc_rule_parse(v, &p->deny[p->ndeny++], err,
			    sizeof(err));
		else if (strcmp(line, "global") == 0)
			ret = global_line(v, p);
		else if (strcmp(line, "restore") == 0)
			p->restore = 1;
		if (ret < 0 && err[0] == '\0')
			snprintf(err, sizeof(err), "%s: bad line", file);
	}
	fclose(f);
	return ret < 0 ? -1 : 0;
}

static int
apply_txn(struct nc_txn *t, const struct policy *p, int *learned)
{
	struct nc_sandbox sb;
	size_t i;
	int ret;

	memset(&sb, 0, sizeof(sb));
	sb.ifname = R.tap;
	sb.ip = R.guest;
	sb.gw = R.gw;
	memcpy(sb.mac, R.mac, 6);
	sb.mode = p->mode;
	ret = p->global ? nc_txn_egress_init(t, &p->g, err, sizeof(err)) :
	    nc_txn_sandbox_clear(t, R.tap, R.guest, err, sizeof(err));
	if (ret == 0)
		ret = nc_txn_sandbox_attach(t, &sb, err, sizeof(err));
	for (i = 0; ret == 0 && i < p->nallow; i++)
		if (p->allow[i].kind == NC_RULE_ADDR)
			ret = nc_txn_allow_add(t, R.guest, &p->allow[i], 0, err,
			    sizeof(err));
	for (i = 0; ret == 0 && i < p->ndeny; i++)
		if (p->deny[i].kind == NC_RULE_ADDR)
			ret = nc_txn_deny_add(t, R.guest, &p->deny[i], 0, err,
			    sizeof(err));
	if (ret == 0 && !p->restore)
		ret = *learned = nc_dns_queue_learned(the_dns, t, R.guest,
		    p->mode, p->allow, p->nallow, p->deny, p->ndeny, err,
		    sizeof(err));
	return ret < 0 ? ret : 0;
}

static void
reapply(void)
{
	static struct policy p;
	struct nc_txn *t;
	int ret = -EAGAIN, tries, learned = 0;

	err[0] = '\0';
	if (R.file == NULL)
		return;
	if (policy_read(R.file, &p) < 0) {
		printf("error apply: %s\n", err);
		fflush(stdout);
		return;
	}
	for (tries = 0; tries < 8; tries++) {
		if ((t = nc_txn_new(R.ctx, err, sizeof(err))) == NULL) {
			ret = -EIO;
			break;
		}
		if ((ret = apply_txn(t, &p, &learned)) == 0)
			ret = nc_txn_commit(t, err, sizeof(err));
		nc_txn_free(t);
		if (ret != -ERESTART && ret != -EINTR && ret != -ENOENT)
			break;
	}
	if (ret == 0)
		ret = nc_dns_set_rules(the_dns, R.guest, p.mode, p.allow,
		    p.nallow, p.deny, p.ndeny, err, sizeof(err));
	if (ret == 0 && p.restore)
		ret = learned = nc_dns_restore_learned(the_dns, R.guest, err,
		    sizeof(err));
	if (ret < 0)
		printf("error apply: %s\n", err);
	else
		printf("applied %d learned=%d%s\n", ++R.gen, learned,
		    p.restore ? " restored" : "");
	fflush(stdout);
}

static int
serve(int argc, char **argv)
{
	struct nc_dns_config c;
	struct sockaddr_in res[8];
	struct nc_rule allow[32], deny[32];
	size_t nres = 0, nallow = 0, ndeny = 0;
	struct in_addr guest = { 0 }, gw = { 0 };
	const char *id = "sb-test";
	enum nc_mode mode = NC_MODE_ALLOWLIST;
	struct event_base *base;
	struct event *sig[4];
	struct nc_ctx *ctx = NULL;
	int i, nft = 1;

	nc_dns_config_init(&c);
	for (i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--no-nft") == 0) {
			nft = 0;
			continue;
		}
		if (strcmp(o, "--refused") == 0) {
			c.deny_rcode = NC_DNS_REFUSED;
			continue;
		}
		if (v == NULL)
			usage("option without value");
		i++;
		if (strcmp(o, "--guest") == 0)
			guest = ip_arg(v);
		else if (strcmp(o, "--gw") == 0)
			gw = ip_arg(v);
		else if (strcmp(o, "--id") == 0)
			id = v;
		else if (strcmp(o, "--mode") == 0) {
			if (nc_mode_parse(v, &mode) < 0)
				usage("bad mode");
		} else if (strcmp(o, "--allow") == 0 && nallow < 32) {
			if (nc_rule_parse(v, &allow[nallow++], err,
			    sizeof(err)) < 0)
				usage(err);
		} else if (strcmp(o, "--deny") == 0 && ndeny < 32) {
			if (nc_rule_parse(v, &deny[ndeny++], err,
			    sizeof(err)) < 0)
				usage(err);
		} else if (strcmp(o, "--resolver") == 0 && nres < 8)
			sockaddr_arg(v, &res[nres++]);
		else if (strcmp(o, "--grace-ms") == 0)
			c.grace_ms = (uint32_t)atoi(v);
		else if (strcmp(o, "--ttl-min") == 0)
			c.ttl_min = (uint32_t)atoi(v);
		else if (strcmp(o, "--ttl-max") == 0)
			c.ttl_max = (uint32_t)atoi(v);
		else if (strcmp(o, "--timeout-ms") == 0)
			c.timeout_ms = (uint32_t)atoi(v);
		else if (strcmp(o, "--attempts") == 0)
			c.attempts = (uint32_t)atoi(v);
		else if (strcmp(o, "--max-inflight") == 0)
			c.max_inflight = (uint32_t)atoi(v);
		else if (strcmp(o, "--query-rate") == 0)
			c.query_rate = (uint32_t)atoi(v);
		else if (strcmp(o, "--label-max") == 0)
			c.label_max = (uint32_t)atoi(v);
		else if (strcmp(o, "--wildcard-names") == 0)
			c.wildcard_names = (uint32_t)atoi(v);
		else if (strcmp(o, "--qtypes") == 0) {
			static uint16_t qt[16];
			char *copy = strdup(v), *t;

			c.nqtypes = 0;
			for (t = strtok(copy, ","); t != NULL && c.nqtypes < 16;
			    t = strtok(NULL, ","))
				if (nc_dns_qtype_parse(t, &qt[c.nqtypes++]) < 0)
					usage("bad query type");
			c.qtypes = qt;
			free(copy);
		}
		else if (strcmp(o, "--tap") == 0)
			R.tap = v;
		else if (strcmp(o, "--rules") == 0)
			R.file = v;
		else if (strcmp(o, "--mac") == 0) {
			unsigned int m[6];
			int k;

			if (sscanf(v, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2],
			    &m[3], &m[4], &m[5]) != 6)
				usage("bad MAC");
			for (k = 0; k < 6; k++)
				R.mac[k] = (uint8_t)m[k];
		}
		else
			usage("unknown option");
	}
	if (R.file != NULL && (R.tap == NULL || !nft))
		usage("--rules needs --tap, --mac and nftables");
	c.resolvers = res;
	c.nresolvers = nres;
	c.on_denial = on_denial;
	c.on_error = on_error;
	if ((base = event_base_new()) == NULL)
		usage("event_base_new failed");
	if (nft && (ctx = nc_ctx_new(err, sizeof(err))) == NULL) {
		fprintf(stderr, "nc_dnsdrive: %s\n", err);
		return 1;
	}
	if ((the_dns = nc_dns_new(base, ctx, &c, err, sizeof(err))) == NULL ||
	    nc_dns_sandbox_add(the_dns, guest, gw, id, err, sizeof(err)) < 0 ||
	    nc_dns_set_rules(the_dns, guest, mode, allow, nallow, deny, ndeny,
	    err, sizeof(err)) < 0) {
		fprintf(stderr, "nc_dnsdrive: %s\n", err);
		return 1;
	}
	R.ctx = ctx;
	R.guest = guest;
	R.gw = gw;
	sig[0] = evsignal_new(base, SIGTERM, on_signal, base);
	sig[1] = evsignal_new(base, SIGINT, on_signal, base);
	sig[2] = evsignal_new(base, SIGUSR1, on_signal, base);
	sig[3] = evsignal_new(base, SIGHUP, on_signal, base);
	for (i = 0; i < 4; i++)
		evsignal_add(sig[i], NULL);
	printf("ready\n");
	fflush(stdout);
	event_base_dispatch(base);
	for (i = 0; i < 4; i++)
		event_free(sig[i]);
	nc_dns_free(the_dns);
	event_base_free(base);
	nc_ctx_free(ctx);
	return 0;
}

/* ---- query ---- */

static int
exchange(const struct sockaddr_in *sa, int tcp, const uint8_t *q,
    size_t qlen, uint8_t *ans, size_t cap, int timeout)
{
	struct pollfd p;
	uint8_t l[2];
	size_t got = 0, want = 0;
	ssize_t n;
	int fd;

	fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)sa,
	    sizeof(*sa)) < 0)
		return -errno;
	if (tcp) {
		l[0] = (uint8_t)(qlen >> 8);
		l[1] = (uint8_t)qlen;
		if (write(fd, l, 2) != 2)
			return -errno;
	}
	if (write(fd, q, qlen) != (ssize_t)qlen)
		return -errno;
	p.fd = fd;
	p.events = POLLIN;
	for (;;) {
		if (poll(&p, 1, timeout) <= 0) {
			close(fd);
			return -ETIMEDOUT;
		}
		n = read(fd, ans + got, cap - got);
		if (n <= 0) {
			close(fd);
			return n == 0 ? -ECONNRESET : -errno;
		}
		if (!tcp) {
			close(fd);
			return (int)n;
		}
		got += (size_t)n;
		if (got >= 2)
			want = (size_t)ans[0] << 8 | ans[1];
		if (got >= 2 && got >= 2 + want) {
			memmove(ans, ans + 2, want);
			close(fd);
			return (int)want;
		}
	}
}

static int
query(int argc, char **argv)
{
	static struct nc_dns_answer a;
	static uint8_t buf[65537];
	struct sockaddr_in sa;
	uint8_t q[600], name[NC_DNS_NAME_MAX + 1];
	size_t nl = 0, i;
	uint16_t type = NC_DNS_T_A, id;
	const char *s;
	int tcp = 0, timeout = 3000, len, qlen, r;
	char txt[NC_DNS_TEXT_MAX];

	if (argc < 3)
		usage("query SERVER NAME [TYPE]");
	sockaddr_arg(argv[1], &sa);
	for (i = 3; i < (size_t)argc; i++) {
		if (strcmp(argv[i], "--tcp") == 0)
			tcp = 1;
		else if (strcmp(argv[i], "--timeout") == 0 &&
		    i + 1 < (size_t)argc)
			timeout = atoi(argv[++i]);
		else
			type = type_arg(argv[i]);
	}
	/* text -> wire */
	for (s = argv[2]; *s;) {
		size_t l = strcspn(s, ".");

		if (l == 0 || l > 63 || nl + l + 2 > NC_DNS_NAME_MAX)
			usage("bad name");
		name[nl++] = (uint8_t)l;
		memcpy(name + nl, s, l);
		nl += l;
		s += l;
		if (*s == '.')
			s++;
	}
	name[nl++] = 0;
	id = (uint16_t)(getpid() ^ time(NULL));
	qlen = nc_dns_build(q, sizeof(q), id, 0x0100, 0, name, nl, type,
	    NULL, NULL, 0, 0, 0, 0);
	if (qlen < 0)
		usage("cannot build the query");
	len = exchange(&sa, tcp, q, (size_t)qlen, buf, sizeof(buf), timeout);
	if (len < 0) {
		printf("error %s\n", strerror(-len));
		return 1;
	}
	if (len >= 4 && (buf[3] & 0xf) != 0 && (buf[5] == 0)) {
		printf("%s ancount=0 tc=0\n", rcode_name(buf[3] & 0xf));
		return 0;
	}
	if ((r = nc_dns_answer_parse(buf, (size_t)len, id, name, nl, type,
	    &a)) < 0) {
		printf("error bad answer: %s\n", strerror(-r));
		return 1;
	}
	printf("%s ancount=%zu tc=%d\n", rcode_name(a.rcode), a.nrr, a.tc);
	for (i = 0; i < a.nrr; i++) {
		const struct nc_dns_rr *rr = &a.rr[i];
		const uint8_t *rd = a.rd + rr->rdoff;
		char data[NC_DNS_TEXT_MAX];

		nc_dns_name_text(rr->name, txt, sizeof(txt));
		if (rr->type == NC_DNS_T_A)
			inet_ntop(AF_INET, rd, data, sizeof(data));
		else if (rr->type == NC_DNS_T_CNAME)
			nc_dns_name_text(rd, data, sizeof(data));
		else
			snprintf(data, sizeof(data), "(%u bytes)", rr->rdlen);
		printf("%s %u %s %s\n", txt, rr->ttl, type_name(rr->type),
		    data);
	}
	return 0;
}

static int
raw(int argc, char **argv)
{
	struct sockaddr_in sa;
	uint8_t q[1024], ans[4096];
	size_t n = 0;
	const char *h;
	int len;

	if (argc != 3)
		usage("raw SERVER HEX");
	sockaddr_arg(argv[1], &sa);
	for (h = argv[2]; h[0] && h[1] && n < sizeof(q); h += 2) {
		unsigned int b;

		if (sscanf(h, "%2x", &b) != 1)
			usage("bad hex");
		q[n++] = (uint8_t)b;
	}
	len = exchange(&sa, 0, q, n, ans, sizeof(ans), 1000);
	if (len == -ETIMEDOUT)
		printf("none\n");
	else if (len < 4)
		printf("error %s\n", len < 0 ? strerror(-len) : "short");
	else
		printf("%s id=%u qd=%u\n", rcode_name(ans[3] & 0xf),
		    (unsigned)(ans[0] << 8 | ans[1]),
		    (unsigned)(ans[4] << 8 | ans[5]));
	return 0;
}

/* name in wire form into out; its length. */
static size_t
wire_name(const char *s, uint8_t *out)
{
	size_t nl = 0, l;

	while (*s) {
		l = strcspn(s, ".");
		if (l == 0 || l > 63 || nl + l + 2 > NC_DNS_NAME_MAX)
			usage("bad name");
		out[nl++] = (uint8_t)l;
		memcpy(out + nl, s, l);
		nl += l;
		s += l;
		if (*s == '.')
			s++;
	}
	out[nl++] = 0;
	return nl;
}

static int
burst(int argc, char **argv)
{
	struct sockaddr_in sa;
	uint8_t q[600], name[NC_DNS_NAME_MAX + 1], ans[4096];
	unsigned counts[16] = { 0 }, got = 0;
	struct pollfd p;
	size_t nl;
	int n, i, fd, qlen;
	ssize_t r;

	if (argc != 4)
		usage("burst SERVER NAME N");
	sockaddr_arg(argv[1], &sa);
	nl = wire_name(argv[2], name);
	n = atoi(argv[3]);
	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return perror("socket"), 1;
	for (i = 0; i < n; i++) {
		qlen = nc_dns_build(q, sizeof(q), (uint16_t)i, 0x0100, 0, name,
		    nl, NC_DNS_T_A, NULL, NULL, 0, 0, 0, 0);
		if (qlen < 0 || send(fd, q, (size_t)qlen, 0) < 0)
			return perror("send"), 1;
	}
	p.fd = fd;
	p.events = POLLIN;
	while (got < (unsigned)n && poll(&p, 1, 2000) > 0) {
		if ((r = recv(fd, ans, sizeof(ans), 0)) < 4)
			continue;
		counts[ans[3] & 0xf]++;
		got++;
	}
	for (i = 0; i < 16; i++)
		if (counts[i])
			printf("%s %u ", rcode_name(i), counts[i]);
	printf("none %u\n", (unsigned)n - got);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		usage("no command");
	if (strcmp(argv[1], "burst") == 0)
		return burst(argc - 1, argv + 1);
	if (strcmp(argv[1], "serve") == 0)
		return serve(argc - 1, argv + 1);
	if (strcmp(argv[1], "query") == 0)
		return query(argc - 1, argv + 1);
	if (strcmp(argv[1], "raw") == 0)
		return raw(argc - 1, argv + 1);
	usage("unknown command");
}
