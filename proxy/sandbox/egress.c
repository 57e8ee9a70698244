/*
 * egress.c — see egress.h. The store says what a sandbox may reach; this
 * file says it to the kernel (one nftables batch per change) and to the
 * resolver (domain rules), and keeps the last denials of each sandbox
 * for `netctl egress log`. The effective mode is the sandbox's own or the
 * policy's default, never wider than the policy's maximum; the policy's
 * deny rules apply to every sandbox: CIDRs as always-deny ranges in the
 * table, names in every sandbox's resolver deny list.
 *
 * What it promises: no VM runs without it (berthd keeps VMs off when
 * px_eg_init fails); every change that takes access away is one batch
 * that also gives the sandbox a new generation, so its live connections
 * are checked again (libnetctl, netctl.h), and so does a rule's ttl
 * expiring (arm_expiry) and an answer's (the resolver); a denial is the
 * sandbox's whose tap it crossed, never the one whose address it claims;
 * a restart takes the running sandboxes over (carry_over).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "egress.h"
#include "conf.h"
#include "helper.h"
#include "proc.h"
#include "control_rule.h"
#include "log.h"
#include "nc_dns.h"
#include "netctl.h"
#include "store.h"
#include "valid.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#define EG_LOG_MAX	256	/* denials kept per sandbox */
#define EG_MAX_RULES	(PX_EG_MAX_RULES + 256)	/* + the policy's deny rules */
/* Entries a sandbox may add to its log per second (a bucket twice that
 * deep): the kernel already limits packet denials per tap; this bounds
 * the resolver's too, so that a flood keeps its log readable. */
#define EG_LOG_RATE	50
#define EG_IFHASH	1024

struct eg_sb {
	char		 id[PX_SANDBOX_ID_MAX + 1];
	char		 tap[16];
	unsigned	 ifindex;	/* of the tap: denials are its */
	struct in_addr	 ip, gw;
	uint8_t		 mac[6];
	json_t		*log;		/* array, oldest first */
	uint64_t	 seq;		/* of the last entry: `log --follow` */
	double		 tokens;	/* EG_LOG_RATE bucket */
	struct timespec	 refill;
	uint64_t	 sup_user;	/* entries not logged over EG_LOG_RATE */
	uint64_t	 sup_user_shown, sup_kernel;	/* as last logged */
	struct event	*expiry_ev;	/* a rule with a ttl expires */
	int		 dns_fd[2];	/* its gateway's port 53: UDP, TCP */
	double		 ins_tokens;	/* the resolver's inserts, a bucket */
	struct timespec	 ins_refill;
	void		*dns_rules;	/* the last HM_DNS_RULES, to resend */
	size_t		 dns_rules_len;
	struct eg_sb	*next, *next_if;
};

static struct {
	struct nc_ctx	*ctx;
	struct nc_dns	*dns;		/* the table's side of the resolver */
	struct px_proc	*dnsd;		/* the resolver that answers guests */
	struct hm_dns_config dnscfg;
	struct nc_nflog	*nflog;		/* bound here, read by the helper */
	struct px_proc	*nflogd;
	struct px_store	*store;
	const struct px_config *cfg;	/* the parent's, updated by reloads */
	uint32_t	 conn_limit, new_conn_rate;	/* in the table now */
	char		 tap_prefix[16];
	uint16_t	 group;
	struct eg_sb	*sbs;
	struct eg_sb	*by_if[EG_IFHASH];	/* by tap ifindex */
	time_t		 if_refreshed;
	struct event	*retry_ev;	/* re-apply after a refused batch */
	unsigned	 failures;	/* refused batches since the last success */
	struct event_base *base;
	unsigned long long unattributed;	/* denials of no sandbox */
} E;

#define EG_RETRY_MAX_S	30

static void retry_later(void);
static void retry_cb(evutil_socket_t, short, void *);
static void applied(void);
struct eg_sb;
static int apply(struct eg_sb *);

int
px_eg_enabled(void)
{
	return E.ctx != NULL;
}

static struct eg_sb *
find(const char *id)
{
	struct eg_sb *s;

	for (s = E.sbs; s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

/* ---- taps by ifindex: a denial is the sandbox's whose tap it came in
 * on (or, for a reply into a sandbox, went out on), never the one whose
 * address it claims ---- */

static void
if_rehash(void)
{
	struct eg_sb *s;

	memset(E.by_if, 0, sizeof(E.by_if));
	for (s = E.sbs; s != NULL; s = s->next) {
		s->ifindex = if_nametoindex(s->tap);
		if (s->ifindex == 0)
			continue;
		s->next_if = E.by_if[s->ifindex % EG_IFHASH];
		E.by_if[s->ifindex % EG_IFHASH] = s;
	}
}

static struct eg_sb *
find_if(unsigned ifindex)
{
	struct eg_sb *s;

	if (ifindex == 0)
		return NULL;
	for (s = E.by_if[ifindex % EG_IFHASH]; s != NULL; s = s->next_if)
		if (s->ifindex == ifindex)
			return s;
	return NULL;
}

/* The sandbox of a denial: by in-device, else out-device. A tap made
 * again (a new ifindex) is found after a refresh, at most once a second
 * (a flood of foreign indexes must not rescan all the time). */
static struct eg_sb *
find_dev(unsigned indev, unsigned outdev)
{
	struct eg_sb *s;

	if ((s = find_if(indev)) != NULL || (s = find_if(outdev)) != NULL)
		return s;
	if (time(NULL) == E.if_refreshed)
		return NULL;
	E.if_refreshed = time(NULL);
	if_rehash();
	if ((s = find_if(indev)) != NULL || (s = find_if(outdev)) != NULL)
		return s;
	return NULL;
}

static struct eg_sb *
find_ip(struct in_addr ip)
{
	struct eg_sb *s;

	for (s = E.sbs; s != NULL; s = s->next)
		if (s->ip.s_addr == ip.s_addr)
			return s;
	return NULL;
}

/* One token of the sandbox's log bucket, or 0 (counted, not logged). */
static int
log_take(struct eg_sb *s)
{
	struct timespec now;
	double dt;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (s->refill.tv_sec == 0)
		s->tokens = 2 * EG_LOG_RATE;
	else {
		dt = (double)(now.tv_sec - s->refill.tv_sec) +
		    (now.tv_nsec - s->refill.tv_nsec) / 1e9;
		s->tokens += dt * EG_LOG_RATE;
		if (s->tokens > 2 * EG_LOG_RATE)
			s->tokens = 2 * EG_LOG_RATE;
	}
	s->refill = now;
	if (s->tokens < 1) {
		s->sup_user++;
		return 0;
	}
	s->tokens -= 1;
	return 1;
}

static void
log_add(struct eg_sb *s, json_t *entry)
{
	if (entry == NULL)
		return;
	if (s->log == NULL)
		s->log = json_array();
	json_object_set_new(entry, "seq", json_integer((json_int_t)++s->seq));
	json_array_append_new(s->log, entry);
	while (json_array_size(s->log) > EG_LOG_MAX)
		json_array_remove(s->log, 0);
}

static double
ts(const struct timespec *t)
{
	return (double)t->tv_sec + t->tv_nsec / 1e9;
}

static void
on_dns_denial(const struct nc_dns_denial *d, void *arg)
{
	struct eg_sb *s = find_ip(d->guest);

	if (s != NULL && log_take(s))
		log_add(s, json_pack("{s:f,s:s,s:s,s:i,s:s}", "time", ts(&d->when),
		    "kind", "dns", "name", d->name, "qtype", (int)d->qtype,
		    "reason", d->reason));
}

static void
on_dns_error(const char *msg, void *arg)
{
	log_warnx("egress dns: %s", msg);
}

static void
on_nflog(const struct nc_denial *d, void *arg)
{
	struct eg_sb *s = find_dev(d->indev, d->outdev);
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	/* a reply into the sandbox, of a flow its policy no longer allows */
	int in = s != NULL && s->ifindex != d->indev;

	if (s == NULL) {
		E.unattributed++;	/* a tap of no sandbox: fenced anyway */
		return;
	}
	if (!log_take(s))
		return;
	if (d->family == AF_INET6) {
		inet_ntop(AF_INET6, &d->src6, src, sizeof(src));
		inet_ntop(AF_INET6, &d->dst6, dst, sizeof(dst));
	} else {
		inet_ntop(AF_INET, &d->src, src, sizeof(src));
		inet_ntop(AF_INET, &d->dst, dst, sizeof(dst));
	}
	log_add(s, json_pack("{s:f,s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s}", "time",
	    ts(&d->when), "kind", "packet", "direction", in ? "in" : "out",
	    "source", src, "destination", dst,
	    "port", (int)(in ? d->sport : d->dport), "protocol",
	    d->proto == 6 ? "tcp" : d->proto == 17 ? "udp" :
	    d->proto == 1 ? "icmp" : d->proto == 58 ? "icmpv6" : "other",
	    "family", d->family == AF_INET6 ? "ipv6" : "ipv4", "reason",
	    d->reason));
}

/* ---- the NFLOG reader helper (nflogd.c): it parses, this checks ---- */

static int
reason_ok(const char *r, size_t max)
{
	size_t i;

	for (i = 0; i < max && r[i] != '\0'; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') ||
		    r[i] == '-'))
			return 0;
	return i > 0 && i < max;
}

static void
nflogd_start(struct px_proc *pr, void *arg)
{
	struct hm_nflog_socket m = { E.group };
	int fd = nc_nflog_fd(E.nflog);

	px_proc_send(pr, HM_NFLOG_SOCKET, &m, sizeof(m), &fd, 1);
}

static void
nflogd_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct nc_denial d;

	if (type != HM_NFLOG_DENIAL || len != sizeof(d) || nfds != 0) {
		px_proc_bad(arg, "an unexpected message");
		return;
	}
	memcpy(&d, p, sizeof(d));
	if (!reason_ok(d.reason, sizeof(d.reason)) ||
	    (d.family != AF_INET && d.family != AF_INET6)) {
		px_proc_bad(arg, "a malformed denial");
		return;
	}
	on_nflog(&d, NULL);
}

static const struct px_proc_def nflogd_def = {
	.name = "nflog", .uid_slot = PX_UID_NFLOG, .on_start = nflogd_start,
	.on_msg = nflogd_msg
};

/* The policy document with defaults filled (as the control API has it). */
static json_t *
policy(void)
{
	char err[256], *text = NULL;
	json_t *p = NULL;

	if (px_store_policy_get(E.store, &text, err, sizeof(err)) == PX_STORE_OK &&
	    text != NULL)
		p = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(p)) {
		json_decref(p);
		p = json_object();
	}
	return p;
}

static const char *
pol_str(json_t *p, const char *key, const char *dflt)
{
	const char *v = json_string_value(json_object_get(p, key));

	return v ? v : dflt;
}

static int
oom(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* A limit of the policy, else berth.conf's default. */
static uint32_t
pol_limit(json_t *p, const char *key, unsigned dflt)
{
	json_t *v = json_object_get(p, key);

	if (json_is_integer(v) && json_integer_value(v) >= 0 &&
	    json_integer_value(v) <= PX_EG_LIMIT_MAX)
		return (uint32_t)json_integer_value(v);
	return dflt;
}

struct rules {
	struct nc_rule	 allow[EG_MAX_RULES], deny[EG_MAX_RULES];
	uint64_t	 allow_ttl[EG_MAX_RULES], deny_ttl[EG_MAX_RULES];
	size_t		 nallow, ndeny;
	time_t		 next_expiry;	/* of an allow rule; 0: none */
};

static int
rule_cb(const struct px_egress_rule *e, void *arg)
{
	struct rules *r = arg;
	struct nc_rule nr;
	char err[256];
	uint64_t ttl = 0;
	time_t now = time(NULL);

	if (nc_rule_parse(e->rule, &nr, err, sizeof(err)) != 0)
		return 0;	/* the API validated it; skip, never fail */
	if (e->expires > 0) {
		if (e->expires <= now)
			return 0;
		ttl = (uint64_t)(e->expires - now) * 1000;
	}
	if (e->action == PX_EGRESS_ALLOW && e->expires > 0 &&
	    (r->next_expiry == 0 || e->expires < r->next_expiry))
		r->next_expiry = (time_t)e->expires;
	if (e->action == PX_EGRESS_ALLOW && r->nallow < EG_MAX_RULES) {
		r->allow_ttl[r->nallow] = ttl;
		r->allow[r->nallow++] = nr;
	} else if (e->action == PX_EGRESS_DENY && r->ndeny < EG_MAX_RULES) {
		r->deny_ttl[r->ndeny] = ttl;
		r->deny[r->ndeny++] = nr;
	}
	return 0;
}

/* What the store and the policy say for s: its rules (the policy's deny
 * rules included) and its effective mode. -1 with err. */
static int
load(struct eg_sb *s, json_t *pol, struct rules *r, enum nc_mode *mode,
    char *err, size_t errlen)
{
	struct px_sandbox sb;
	enum nc_mode cap;
	json_t *pd;
	size_t i;

	memset(r, 0, sizeof(*r));
	if (px_store_sandbox_get(E.store, s->id, &sb, err, errlen) != PX_STORE_OK ||
	    px_store_egress_list(E.store, s->id, rule_cb, r, err, errlen) != 0)
		return -1;
	/* the policy's deny rules bind every sandbox (names: the resolver) */
	json_array_foreach(json_object_get(pol, "deny"), i, pd) {
		struct nc_rule nr;

		if (r->ndeny < EG_MAX_RULES && nc_rule_parse(json_string_value(pd),
		    &nr, err, errlen) == 0)
			r->deny[r->ndeny++] = nr;
	}
	if (nc_mode_parse(sb.egress_mode[0] ? sb.egress_mode :
	    pol_str(pol, "default_mode", "allowlist"), mode) != 0)
		*mode = NC_MODE_ALLOWLIST;
	if (nc_mode_parse(pol_str(pol, "max_mode", "open"), &cap) == 0 && *mode < cap)
		*mode = cap;	/* enum order: open < allowlist < closed */
	return 0;
}

/* Queues s's elements: its identity, mode and address rules; with clear,
 * first the removal of what the kernel holds for it now (its connection
 * count and rate bucket stay: clear, not detach). */
static int
queue(struct nc_txn *t, struct eg_sb *s, const struct rules *r,
    enum nc_mode mode, int clear, char *err, size_t errlen)
{
	struct nc_sandbox ns;
	size_t i;
	int rc = 0;

	memset(&ns, 0, sizeof(ns));
	ns.ifname = s->tap;
	ns.ip = s->ip;
	ns.gw = s->gw;
	memcpy(ns.mac, s->mac, 6);
	ns.mode = mode;
	if (clear)
		rc = nc_txn_sandbox_clear(t, s->tap, s->ip, err, errlen);
	if (rc == 0)
		rc = nc_txn_sandbox_attach(t, &ns, err, errlen);
	for (i = 0; rc == 0 && i < r->nallow; i++)
		if (r->allow[i].kind == NC_RULE_ADDR)
			rc = nc_txn_allow_add(t, s->ip, &r->allow[i],
			    r->allow_ttl[i], err, errlen);
	for (i = 0; rc == 0 && i < r->ndeny; i++)
		if (r->deny[i].kind == NC_RULE_ADDR)
			rc = nc_txn_deny_add(t, s->ip, &r->deny[i],
			    r->deny_ttl[i], err, errlen);
	return rc;
}

/* The addresses the resolver learned for s whose names r still allows,
 * with what remains of their timeouts: the guest may hold them in its
 * cache, and the clear in this batch removed them. Those of names no
 * longer allowed stay out; deny rules (the policy's too) still win. */
static void
queue_learned(struct nc_txn *t, struct eg_sb *s, const struct rules *r,
    enum nc_mode mode)
{
	char err[NC_ERRLEN];
	int n;

	if (E.dns == NULL)
		return;
	n = nc_dns_queue_learned(E.dns, t, s->ip, mode, r->allow, r->nallow,
	    r->deny, r->ndeny, err, sizeof(err));
	if (n < 0)
		log_warnx("egress %s: %s", s->id, err);
	else if (n > 0)
		log_debug("egress %s: %d DNS-learned address element(s) kept",
		    s->id, n);
}

/* After a batch that had to leave them out: one by one. */
static void
restore_learned(struct eg_sb *s)
{
	char err[NC_ERRLEN];
	int n;

	if (E.dns == NULL)
		return;
	if ((n = nc_dns_restore_learned(E.dns, s->ip, err, sizeof(err))) < 0)
		log_warnx("egress %s: %s", s->id, err);
	else
		log_info("egress %s: %d DNS-learned address element(s) put "
		    "back after the rules", s->id, n);
}

/* ---- the resolver helper (dnsd.c): it answers guests, this inserts ---- */

static void
dnsd_send_sb(struct eg_sb *s)
{
	struct hm_dns_sandbox m;

	if (s->dns_fd[0] < 0)
		return;
	memset(&m, 0, sizeof(m));
	m.guest = s->ip;
	m.gw = s->gw;
	snprintf(m.id, sizeof(m.id), "%s", s->id);
	px_proc_send(E.dnsd, HM_DNS_SANDBOX_ADD, &m, sizeof(m), s->dns_fd, 2);
	if (s->dns_rules != NULL)
		px_proc_send(E.dnsd, HM_DNS_RULES, s->dns_rules, s->dns_rules_len,
		    NULL, 0);
}

/* The sandbox's mode and domain rules, as text, for the helper. */
static void
dnsd_rules(struct eg_sb *s, const struct rules *r, enum nc_mode mode)
{
	struct hm_dns_rules h;
	char *buf, txt[512];
	size_t len, i, cap;
	int k;

	memset(&h, 0, sizeof(h));
	h.guest = s->ip;
	h.mode = mode;
	cap = sizeof(h) + (r->nallow + r->ndeny) * sizeof(txt);
	if ((buf = malloc(cap)) == NULL) {
		log_warnx("egress %s: resolver rules: out of memory", s->id);
		return;
	}
	len = sizeof(h);
	for (k = 0; k < 2; k++) {
		const struct nc_rule *v = k ? r->deny : r->allow;
		size_t n = k ? r->ndeny : r->nallow;

		for (i = 0; i < n; i++) {
			int w;

			if (v[i].kind != NC_RULE_DOMAIN && v[i].kind != NC_RULE_WILDCARD)
				continue;
			w = nc_rule_format(&v[i], txt, sizeof(txt));
			if (w <= 0 || (size_t)w >= sizeof(txt))
				continue;
			memcpy(buf + len, txt, (size_t)w + 1);
			len += (size_t)w + 1;
			if (k)
				h.ndeny++;
			else
				h.nallow++;
		}
	}
	memcpy(buf, &h, sizeof(h));
	free(s->dns_rules);
	s->dns_rules = buf;
	s->dns_rules_len = len;
	px_proc_send(E.dnsd, HM_DNS_RULES, buf, len, NULL, 0);
}

static void
dnsd_start(struct px_proc *pr, void *arg)
{
	struct eg_sb *s;

	px_proc_send(pr, HM_DNS_CONFIG, &E.dnscfg, sizeof(E.dnscfg), NULL, 0);
	for (s = E.sbs; s != NULL; s = s->next)
		dnsd_send_sb(s);
}

/* NUL within max, and printable */
static int
str_ok(const char *p, size_t max)
{
	size_t i;

	for (i = 0; i < max && p[i] != '\0'; i++)
		if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e)
			return 0;
	return i < max;
}

/*
 * Each insert is an nftables batch here; the helper already holds each
 * sandbox to its query rate (dns_query_rate), and this holds the helper
 * (whatever it has become) to twice that, per sandbox, a bucket two
 * seconds deep. Over it: refused (the guest gets SERVFAIL).
 */
static double
insert_rate(void)
{
	uint32_t q = E.cfg->dns_query_rate;

	return 2.0 * (q == 0 ? NC_DNS_QUERY_RATE : q);
}

static int
insert_take(struct eg_sb *s)
{
	struct timespec now;
	double dt, rate = insert_rate();

	if (s == NULL || E.cfg->dns_query_rate == NC_DNS_UNLIMITED)
		return 1;	/* nc_dns_insert refuses an unknown guest */
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (s->ins_refill.tv_sec == 0)
		s->ins_tokens = 2 * rate;
	else {
		dt = (double)(now.tv_sec - s->ins_refill.tv_sec) +
		    (now.tv_nsec - s->ins_refill.tv_nsec) / 1e9;
		s->ins_tokens += dt * rate;
		if (s->ins_tokens > 2 * rate)
			s->ins_tokens = 2 * rate;
	}
	s->ins_refill = now;
	if (s->ins_tokens < 1)
		return 0;
	s->ins_tokens -= 1;
	return 1;
}

static void
dnsd_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	static const char *const reasons[] = { "not-allowed", "deny-rule",
	    "closed", "bad-name", "qtype", "rate-limit", "label-length",
	    "wildcard-names", NULL };
	struct px_proc *pr = arg;

	if (nfds != 0) {
		px_proc_bad(pr, "descriptors");
		return;
	}
	if (type == HM_DNS_INSERT && len == sizeof(struct hm_dns_insert)) {
		struct hm_dns_insert m;
		struct hm_dns_inserted a;

		memcpy(&m, p, sizeof(m));
		if (!str_ok(m.name, sizeof(m.name)) || m.n == 0 ||
		    m.n > NC_DNS_MAX_RR) {
			px_proc_bad(pr, "a malformed insert");
			return;
		}
		memset(&a, 0, sizeof(a));
		a.token = m.token;
		if (!insert_take(find_ip(m.guest)))
			snprintf(a.err, sizeof(a.err), "over %.0f inserts a second",
			    insert_rate());
		else
			a.ok = nc_dns_insert(E.dns, m.guest, m.name, m.addrs, m.ttl,
			    m.n, a.err, sizeof(a.err)) == 0;
		if (!a.ok) {
			struct eg_sb *s = find_ip(m.guest);

			log_warnx("egress %s: resolver: addresses of %s not allowed: %s",
			    s ? s->id : "?", m.name, a.err);
		}
		px_proc_send(pr, HM_DNS_INSERTED, &a, sizeof(a), NULL, 0);
	} else if (type == HM_DNS_DENIAL && len == sizeof(struct hm_dns_denial)) {
		struct hm_dns_denial m;
		struct nc_dns_denial d;
		int i;

		memcpy(&m, p, sizeof(m));
		if (!str_ok(m.name, sizeof(m.name)) ||
		    !str_ok(m.reason, sizeof(m.reason))) {
			px_proc_bad(pr, "a malformed denial");
			return;
		}
		for (i = 0; reasons[i] != NULL && strcmp(reasons[i], m.reason) != 0; i++)
			;
		if (reasons[i] == NULL) {
			px_proc_bad(pr, "a denial with an unknown reason");
			return;
		}
		memset(&d, 0, sizeof(d));
		d.when = m.when;
		d.guest = m.guest;
		snprintf(d.name, sizeof(d.name), "%s", m.name);
		d.qtype = m.qtype;
		d.reason = reasons[i];
		on_dns_denial(&d, NULL);
	} else if (type == HM_DNS_ERROR && len > 0 && len <= 1024 &&
	    str_ok(p, len)) {
		log_warnx("egress dns: %s", (const char *)p);
	} else
		px_proc_bad(pr, "an unexpected message");
}

static const struct px_proc_def dnsd_def = {
	.name = "dns", .uid_slot = PX_UID_DNS, .on_start = dnsd_start,
	.on_msg = dnsd_msg
};

/* The resolver's half: domain rules and mode. */
static void
resolver(struct eg_sb *s, const struct rules *r, enum nc_mode mode)
{
	char err[NC_ERRLEN];

	if (E.dns != NULL && nc_dns_set_rules(E.dns, s->ip, mode, r->allow, r->nallow,
	    r->deny, r->ndeny, err, sizeof(err)) < 0)
		log_warnx("egress %s: resolver rules: %s", s->id, err);
	if (E.dns != NULL)
		dnsd_rules(s, r, mode);
	log_info("egress %s: %s, %zu allow and %zu deny rule(s)", s->id,
	    nc_mode_name(mode), r->nallow, r->ndeny);
}

/*
 * An allow rule with a ttl leaves the kernel by itself, but the flows it
 * admitted go on until the sandbox gets a new generation: so when the
 * first such rule of s expires, s is applied again (a new generation;
 * its flows are checked against what is left). The resolver does the
 * same for the addresses it learned.
 */
static void
expiry_cb(evutil_socket_t fd, short what, void *arg)
{
	if (apply(arg) < 0)
		retry_later();
}

static void
arm_expiry(struct eg_sb *s, time_t next)
{
	struct timeval tv = { 0, 300000 };	/* the kernel's own timer first */
	time_t now = time(NULL);

	if (next == 0 || E.base == NULL)
		return;
	if (s->expiry_ev == NULL &&
	    (s->expiry_ev = evtimer_new(E.base, expiry_cb, s)) == NULL)
		return;
	tv.tv_sec = next > now ? next - now : 0;
	evtimer_add(s->expiry_ev, &tv);
}

/*
 * Test hook, documented in berthd(8): while the file named by
 * $BERTH_TEST_NFT_REJECT exists, each egress batch ends with one message
 * the kernel refuses (removing an allow range no sandbox has), so the
 * kernel rejects the whole batch as it would any bad one. No such file,
 * no change.
 */
static int
test_reject(struct nc_txn *t, char *err, size_t errlen)
{
	const char *f = getenv("BERTH_TEST_NFT_REJECT");
	struct in_addr nobody;
	struct nc_rule r;

	if (f == NULL || *f == '\0' || access(f, F_OK) != 0)
		return 0;
	inet_pton(AF_INET, "192.0.2.1", &nobody);	/* TEST-NET-1: no guest */
	if (nc_rule_parse("192.0.2.0/24", &r, err, errlen) != 0 ||
	    nc_txn_allow_del(t, nobody, &r, err, errlen) < 0)
		return -1;
	return 0;
}

/* Attaches s afresh with its mode and rules, and what its resolver
 * learned that they still allow: one batch, so no packet sees it half
 * done, and a refused batch leaves the rules in force as they were.
 * Rebuilt on a stale generation or an element that expired meanwhile;
 * without the learned addresses (put back right after) when the kernel
 * finds one of them overlapping. 0, or -1 after logging why. */
static int
apply(struct eg_sb *s)
{
	struct nc_txn *t;
	struct rules *r;
	enum nc_mode mode;
	json_t *pol = policy();
	char err[NC_ERRLEN];
	int rc = -EAGAIN, tries, learned = 1;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		json_decref(pol);
		return -1;
	}
	if (load(s, pol, r, &mode, err, sizeof(err)) < 0) {
		log_warnx("egress %s: %s", s->id, err);
		rc = -1;
		goto out;
	}
	for (tries = 0; tries < 8; tries++) {
		if ((t = nc_txn_new(E.ctx, err, sizeof(err))) == NULL) {
			rc = -EIO;
			break;
		}
		if ((rc = queue(t, s, r, mode, 1, err, sizeof(err))) == 0) {
			if (learned)
				queue_learned(t, s, r, mode);
			if ((rc = test_reject(t, err, sizeof(err))) == 0)
				rc = nc_txn_commit(t, err, sizeof(err));
		}
		nc_txn_free(t);
		if ((rc == -EEXIST || rc == -ENOTEMPTY) && learned) {
			learned = 0;
			continue;
		}
		if (rc != -ERESTART && rc != -EINTR && rc != -ENOENT)
			break;
	}
	if (rc < 0)
		log_warnx("egress %s: not applied, the rules in force stay: %s",
		    s->id, err);
	else {
		resolver(s, r, mode);
		if (!learned)
			restore_learned(s);
		arm_expiry(s, r->next_expiry);
	}
out:
	free(r);
	json_decref(pol);
	return rc < 0 ? -1 : 0;
}

static int
init_table(char *err, size_t errlen)
{
	struct nc_global g;
	struct nc_cidr deny[256], permit[64];
	struct in_addr host[64];
	struct ifaddrs *ifa, *i;
	json_t *pol = policy(), *pd;
	struct nc_txn *t;
	struct eg_sb *s;
	struct rules *r;
	enum nc_mode mode;
	size_t k;
	int rc = -EAGAIN, tries, learned = 1;

	memset(&g, 0, sizeof(g));
	g.tap_prefix = E.tap_prefix;
	g.nflog_group = E.group;
	g.conn_limit = pol_limit(pol, "conn_limit", E.cfg->eg_conn_limit);
	g.new_conn_rate = pol_limit(pol, "new_conn_rate",
	    E.cfg->eg_new_conn_rate);
	json_array_foreach(json_object_get(pol, "deny"), k, pd) {
		struct nc_rule nr;

		if (g.ndeny < 256 && nc_rule_parse(json_string_value(pd), &nr, err,
		    errlen) == 0 && nr.kind == NC_RULE_ADDR && nr.proto == NC_PROTO_ANY) {
			deny[g.ndeny].addr = nr.addr;
			deny[g.ndeny++].plen = nr.plen;
		}
	}
	g.deny = deny;
	/* private ranges ops let sandboxes name in allow rules */
	json_array_foreach(json_object_get(pol, "permit"), k, pd) {
		struct nc_rule nr;

		if (g.npermit < 64 && nc_rule_parse(json_string_value(pd), &nr, err,
		    errlen) == 0 && nr.kind == NC_RULE_ADDR) {
			permit[g.npermit].addr = nr.addr;
			permit[g.npermit++].plen = nr.plen;
		}
	}
	g.permit = permit;
	if (getifaddrs(&ifa) == 0) {
		for (i = ifa; i != NULL && g.nhost_addrs < 64; i = i->ifa_next)
			if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
			    strncmp(i->ifa_name, E.tap_prefix, strlen(E.tap_prefix)) != 0)
				host[g.nhost_addrs++] =
				    ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		freeifaddrs(ifa);
	}
	g.host_addrs = host;
	/* The table and every sandbox we know in one batch: at no moment is
	 * a sandbox without its rules (nor, at start, with stale ones), nor
	 * without the DNS answers it may still hold that the new policy
	 * allows (the policy's deny rules and ranges still win). */
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		json_decref(pol);
		return oom(err, errlen);
	}
	for (tries = 0; tries < 8; tries++) {
		if ((t = nc_txn_new(E.ctx, err, errlen)) == NULL) {
			rc = -EIO;
			break;
		}
		rc = nc_txn_egress_init(t, &g, err, errlen);
		for (s = E.sbs; rc == 0 && s != NULL; s = s->next) {
			if (load(s, pol, r, &mode, err, errlen) == 0) {
				rc = queue(t, s, r, mode, 0, err, errlen);
				if (rc == 0 && learned)
					queue_learned(t, s, r, mode);
			} else	/* left out: its tap gets nothing (fail closed) */
				log_warnx("egress %s: %s", s->id, err);
		}
		if (rc == 0)
			rc = test_reject(t, err, errlen);
		if (rc == 0)
			rc = nc_txn_commit(t, err, errlen);
		nc_txn_free(t);
		if ((rc == -EEXIST || rc == -ENOTEMPTY) && learned) {
			learned = 0;
			continue;
		}
		if (rc != -ERESTART && rc != -EINTR)
			break;
	}
	for (s = E.sbs; rc == 0 && s != NULL; s = s->next)
		if (load(s, pol, r, &mode, err, errlen) == 0) {
			resolver(s, r, mode);
			if (!learned)
				restore_learned(s);
			arm_expiry(s, r->next_expiry);
		}
	free(r);
	if (rc == 0) {
		E.conn_limit = g.conn_limit;
		E.new_conn_rate = g.new_conn_rate;
		char c1[32] = "none", c2[32] = "none";

		if (g.conn_limit)
			snprintf(c1, sizeof(c1), "%u", g.conn_limit);
		if (g.new_conn_rate)
			snprintf(c2, sizeof(c2), "%u/s", g.new_conn_rate);
		log_info("egress: per sandbox: connection cap %s, new "
		    "connections %s", c1, c2);
	}
	json_decref(pol);
	return rc;
}

static size_t
resolvers(const struct px_config *c, struct sockaddr_in *out, size_t max)
{
	char line[256];
	size_t n = 0;
	FILE *f;
	int i;

	for (i = 0; i < c->ndns && n < max; i++) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].sin_family = AF_INET;
		if (inet_pton(AF_INET, c->dns_upstream[i], &out[n].sin_addr) == 1)
			n++;
	}
	if (n > 0 || (f = fopen("/etc/resolv.conf", "r")) == NULL)
		return n;
	while (n < max && fgets(line, sizeof(line), f) != NULL) {
		char ip[64];

		if (sscanf(line, "nameserver %63s", ip) != 1)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].sin_family = AF_INET;
		if (inet_pton(AF_INET, ip, &out[n].sin_addr) == 1)
			n++;
	}
	fclose(f);
	return n;
}

static void
sb_close_dns(struct eg_sb *s)
{
	int i;

	for (i = 0; i < 2; i++)
		if (s->dns_fd[i] >= 0)
			close(s->dns_fd[i]);
	s->dns_fd[0] = s->dns_fd[1] = -1;
	free(s->dns_rules);
	s->dns_rules = NULL;
}

/* A sandbox known to egress: in the list, the ifindex hash and the
 * resolver (its gateway's sockets). NULL on ENOMEM. */
static struct eg_sb *
sb_new(const char *id, const char *tap, struct in_addr ip, struct in_addr gw,
    const uint8_t mac[6])
{
	struct eg_sb *s;
	char err[NC_ERRLEN];

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->tap, sizeof(s->tap), "%s", tap);
	s->ip = ip;
	s->gw = gw;
	memcpy(s->mac, mac, 6);
	s->next = E.sbs;
	E.sbs = s;
	if ((s->ifindex = if_nametoindex(tap)) != 0) {
		s->next_if = E.by_if[s->ifindex % EG_IFHASH];
		E.by_if[s->ifindex % EG_IFHASH] = s;
	}
	if (nc_tap_harden(tap, err, sizeof(err)) < 0)
		log_warnx("egress %s: tap settings: %s", id, err);
	s->dns_fd[0] = s->dns_fd[1] = -1;
	if (E.dns != NULL && (nc_dns_sandbox_add(E.dns, ip, gw, id, err,
	    sizeof(err)) < 0 || nc_dns_bind(gw, 53, &s->dns_fd[0], &s->dns_fd[1],
	    err, sizeof(err)) < 0))
		log_warnx("egress %s: resolver: %s", id, err);
	else if (E.dns != NULL)
		dnsd_send_sb(s);
	return s;
}

/*
 * Restart. VMs outlive berthd, and the table in force still fences them
 * and admits their flows; rebuilding it empty would drop every guest
 * packet until each VM is adopted again, and forget what the resolver
 * learned. So the sandboxes attached in it that the store knows (by
 * guest address) are taken over as they are (tap, gateway, MAC), with
 * the names and addresses the resolver had answered and the time they
 * have left: the start-up batch rebuilds the table with all of them in
 * it, under the stored rules, and their flows go on.
 */
struct carry {
	struct px_sandbox *v;
	size_t n, cap;
	int taken;
};

static int
carry_store_cb(const struct px_sandbox *sb, void *arg)
{
	struct carry *c = arg;
	struct px_sandbox *v;

	if (sb->external || sb->address[0] == '\0')
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;

		if ((v = realloc(c->v, cap * sizeof(*v))) == NULL)
			return 1;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = *sb;
	return 0;
}

static int
carry_att_cb(const struct nc_sandbox *nsb, void *arg)
{
	struct carry *c = arg;
	char a[INET_ADDRSTRLEN];
	size_t i;

	inet_ntop(AF_INET, &nsb->ip, a, sizeof(a));
	for (i = 0; i < c->n; i++)
		if (strcmp(c->v[i].address, a) == 0)
			break;
	if (i == c->n || find(c->v[i].id) != NULL)
		return 0;	/* nobody's: its tap gets nothing (fail closed) */
	if (sb_new(c->v[i].id, nsb->ifname, nsb->ip, nsb->gw, nsb->mac) != NULL)
		c->taken++;
	return 0;
}

static int
carry_learned_cb(struct in_addr guest, struct in_addr addr, const char *name,
    uint64_t left_ms, void *arg)
{
	if (E.dns != NULL && find_ip(guest) != NULL &&
	    nc_dns_learned_seed(E.dns, guest, name, addr, left_ms) == 0)
		(*(int *)arg)++;
	return 0;
}

static void
carry_over(void)
{
	struct carry c;
	char err[NC_ERRLEN];
	int learned = 0, rc;

	memset(&c, 0, sizeof(c));
	if (px_store_sandbox_list(E.store, carry_store_cb, &c, err,
	    sizeof(err)) != 0) {
		log_warnx("egress: sandboxes in the store: %s", err);
		free(c.v);
		return;
	}
	rc = nc_egress_attached(E.ctx, carry_att_cb, &c, err, sizeof(err));
	free(c.v);
	if (rc == -ENOENT)
		return;		/* no table: nothing runs fenced */
	if (rc < 0) {
		log_warnx("egress: the table in force: %s", err);
		return;
	}
	if (c.taken > 0 && nc_egress_learned(E.ctx, carry_learned_cb, &learned,
	    err, sizeof(err)) < 0)
		log_warnx("egress: DNS-learned addresses in force: %s", err);
	if (c.taken > 0)
		log_info("egress: %d running sandbox(es) taken over from the table "
		    "in force, with %d DNS-learned address(es)", c.taken, learned);
}

static void
sb_free_all(void)
{
	struct eg_sb *s;

	while ((s = E.sbs) != NULL) {
		E.sbs = s->next;
		sb_close_dns(s);
		if (s->expiry_ev != NULL)
			event_free(s->expiry_ev);
		json_decref(s->log);
		free(s);
	}
	memset(E.by_if, 0, sizeof(E.by_if));
}

int
px_eg_init(struct event_base *base, struct px_store *store,
    const struct px_config *c, char *err, size_t errlen)
{
	struct nc_dns_config dc;
	struct sockaddr_in res[8];

	E.store = store;
	E.cfg = c;
	E.base = base;
	E.group = c->nflog_group;
	snprintf(E.tap_prefix, sizeof(E.tap_prefix), "%s",
	    c->tap_prefix ? c->tap_prefix : "bth");
	if (nc_host_forwarding(err, errlen) < 0) {
		char e2[NC_ERRLEN];

		snprintf(e2, sizeof(e2), "cannot turn IPv4 forwarding on: %s",
		    err);
		snprintf(err, errlen, "%s", e2);
		return -1;
	}
	if ((E.ctx = nc_ctx_new(err, errlen)) == NULL)
		return -1;
	/* the resolver first: the sandboxes taken over use it at once */
	nc_dns_config_init(&dc);
	dc.resolvers = res;
	dc.nresolvers = resolvers(c, res, 8);
	dc.deny_rcode = c->eg_dns_refused ? NC_DNS_REFUSED : NC_DNS_NXDOMAIN;
	if (c->ndns_qtypes > 0) {
		dc.qtypes = c->dns_qtypes;
		dc.nqtypes = (size_t)c->ndns_qtypes;
	}
	dc.query_rate = c->dns_query_rate;
	dc.label_max = c->dns_label_max;
	dc.wildcard_names = c->dns_wildcard_names;
	dc.on_denial = on_dns_denial;
	dc.on_error = on_dns_error;
	/* This process keeps the table's side; guests' queries and the
	 * upstreams' answers are parsed by the helper (dnsd.c), on the
	 * sockets this process binds. */
	dc.no_listen = 1;
	memset(&E.dnscfg, 0, sizeof(E.dnscfg));
	memcpy(E.dnscfg.resolvers, res, sizeof(res));
	E.dnscfg.nresolvers = (uint32_t)dc.nresolvers;
	if (dc.nqtypes > HM_DNS_QTYPES)
		dc.nqtypes = HM_DNS_QTYPES;
	if (dc.qtypes != NULL)
		memcpy(E.dnscfg.qtypes, dc.qtypes, dc.nqtypes * sizeof(*dc.qtypes));
	E.dnscfg.nqtypes = (uint32_t)dc.nqtypes;
	E.dnscfg.query_rate = dc.query_rate;
	E.dnscfg.label_max = dc.label_max;
	E.dnscfg.wildcard_names = dc.wildcard_names;
	E.dnscfg.deny_rcode = dc.deny_rcode;
	if ((E.dns = nc_dns_new(base, E.ctx, &dc, err, errlen)) == NULL)
		log_warnx("egress: no filtering resolver: %s", err);
	else if ((E.dnsd = px_proc_start(base, &dnsd_def)) == NULL)
		log_warnx("egress: no filtering resolver: cannot start its helper");
	carry_over();
	if (init_table(err, errlen) < 0) {
		sb_free_all();
		if (E.dns != NULL)
			nc_dns_free(E.dns);
		E.dns = NULL;
		nc_ctx_free(E.ctx);
		E.ctx = NULL;
		return -1;
	}
	E.retry_ev = evtimer_new(base, retry_cb, NULL);
	if (dc.nresolvers == 0)
		log_warnx("egress: no upstream resolver (dns_upstream, /etc/resolv.conf): "
		    "allowed names will get SERVFAIL");
	else {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &res[0].sin_addr, a, sizeof(a));
		log_info("egress: %zu upstream resolver(s), first %s", dc.nresolvers, a);
	}
	if ((E.nflog = nc_nflog_open(E.group, err, errlen)) == NULL) {
		log_warnx("egress: no denial log: %s", err);
	} else if ((E.nflogd = px_proc_start(base, &nflogd_def)) == NULL)
		log_warnx("egress: no denial log: cannot start its reader");
	return 0;
}

void
px_eg_shutdown(void)
{
	/* the table stays: VMs outlive berthd and must stay fenced */
	if (E.retry_ev != NULL)
		event_free(E.retry_ev);
	if (E.nflog != NULL)
		nc_nflog_close(E.nflog);
	if (E.dns != NULL)
		nc_dns_free(E.dns);
	if (E.ctx != NULL)
		nc_ctx_free(E.ctx);
	sb_free_all();
	memset(&E, 0, sizeof(E));
}

void
px_eg_sandbox_up(const char *id, const char *tap, struct in_addr ip,
    struct in_addr gw, const uint8_t mac[6])
{
	struct eg_sb *s;

	if (E.ctx == NULL)
		return;
	if ((s = find(id)) != NULL) {
		/* taken over at start (or up before): the same tap is the
		 * same sandbox, already applied; anything else is not */
		if (strcmp(s->tap, tap) == 0 && s->ip.s_addr == ip.s_addr &&
		    s->gw.s_addr == gw.s_addr && memcmp(s->mac, mac, 6) == 0)
			return;
		log_info("egress %s: its tap, address or MAC changed: "
		    "attached anew", id);
		px_eg_sandbox_down(id);
	}
	if ((s = sb_new(id, tap, ip, gw, mac)) == NULL)
		return;
	if (apply(s) < 0)
		retry_later();
}

void
px_eg_sandbox_down(const char *id)
{
	struct eg_sb **pp, *s;
	char err[NC_ERRLEN];

	for (pp = &E.sbs; (s = *pp) != NULL; pp = &s->next)
		if (strcmp(s->id, id) == 0)
			break;
	if (s == NULL)
		return;
	*pp = s->next;
	for (pp = &E.by_if[s->ifindex % EG_IFHASH]; *pp != NULL;
	    pp = &(*pp)->next_if)
		if (*pp == s) {
			*pp = s->next_if;
			break;
		}
	/* its elements, and its conntrack entries: the next sandbox on
	 * this address inherits none of its flows */
	if (nc_sandbox_detach(E.ctx, s->tap, s->ip, err, sizeof(err)) < 0)
		log_warnx("egress %s: detach: %s", id, err);
	if (E.dns != NULL) {
		struct hm_dns_sandbox m;

		nc_dns_sandbox_del(E.dns, s->ip);
		memset(&m, 0, sizeof(m));
		m.guest = s->ip;
		px_proc_send(E.dnsd, HM_DNS_SANDBOX_DEL, &m, sizeof(m), NULL, 0);
	}
	sb_close_dns(s);
	if (s->expiry_ev != NULL)
		event_free(s->expiry_ev);
	json_decref(s->log);
	free(s);
}

/* The policy and every sandbox from the store, in one batch (its ranges
 * and limits live in the table itself): 0, or -1 after logging why. */
static int
apply_all(void)
{
	char err[NC_ERRLEN];

	if (init_table(err, sizeof(err)) < 0) {
		log_warnx("egress: policy not applied, the rules in force stay: %s",
		    err);
		return -1;
	}
	return 0;
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	if (apply_all() < 0)
		retry_later();
	else
		applied();
}

/*
 * A refused batch left the kernel behind the store: try the whole state
 * again later, backing off to EG_RETRY_MAX_S, until it is in force.
 */
static void
retry_later(void)
{
	struct timeval tv = { 1, 0 };
	unsigned i;

	E.failures++;
	for (i = 1; i < E.failures && tv.tv_sec < EG_RETRY_MAX_S; i++)
		tv.tv_sec *= 2;
	if (tv.tv_sec > EG_RETRY_MAX_S)
		tv.tv_sec = EG_RETRY_MAX_S;
	if (E.retry_ev != NULL) {
		if (E.failures == 1)
			log_warnx("egress: the kernel is behind the stored rules: "
			    "retrying until it takes them");
		evtimer_add(E.retry_ev, &tv);
	}
}

static void
applied(void)
{
	if (E.failures == 0)
		return;
	log_info("egress: stored rules in force again after %u refused attempt(s)",
	    E.failures);
	E.failures = 0;
	if (E.retry_ev != NULL)
		evtimer_del(E.retry_ev);
}

int
px_eg_pending(void)
{
	return E.failures > 0;
}

void
px_eg_changed(const char *id, void *arg)
{
	struct eg_sb *s;

	if (E.ctx == NULL)
		return;
	/* While behind, one sandbox's batch is not enough: redo it all. */
	if (id != NULL && E.failures == 0) {
		if ((s = find(id)) != NULL && apply(s) < 0)
			retry_later();
		return;
	}
	if (apply_all() < 0)
		retry_later();
	else
		applied();
}

void
px_eg_reload(void)
{
	json_t *pol;
	uint32_t conn, rate;

	if (E.ctx == NULL)
		return;
	pol = policy();
	conn = pol_limit(pol, "conn_limit", E.cfg->eg_conn_limit);
	rate = pol_limit(pol, "new_conn_rate", E.cfg->eg_new_conn_rate);
	json_decref(pol);
	if (conn != E.conn_limit || rate != E.new_conn_rate)
		px_eg_changed(NULL, NULL);
}

/* Denials counted but not logged since the last look, as one entry:
 * the kernel's (over the tap's log rate) and ours (over EG_LOG_RATE). */
static void
log_suppressed(struct eg_sb *s)
{
	char err[NC_ERRLEN];
	uint64_t k = 0, n;
	struct timespec now;

	if (nc_egress_log_suppressed(E.ctx, s->tap, &k, err, sizeof(err)) < 0)
		k = s->sup_kernel;
	if (k < s->sup_kernel)		/* its element was made anew */
		s->sup_kernel = 0;
	n = (k - s->sup_kernel) + (s->sup_user - s->sup_user_shown);
	if (n == 0)
		return;
	s->sup_kernel = k;
	s->sup_user_shown = s->sup_user;
	clock_gettime(CLOCK_REALTIME, &now);
	log_add(s, json_pack("{s:f,s:s,s:I,s:s}", "time", ts(&now), "kind",
	    "suppressed", "count", (json_int_t)n, "reason", "denials over the "
	    "sandbox's log rate: counted, not logged one by one"));
}

unsigned long long
px_eg_unattributed(void)
{
	return E.unattributed;
}

int
px_eg_log(const char *id, json_t **out, void *arg)
{
	struct eg_sb *s;

	if (E.ctx == NULL)
		return -1;
	s = find(id);
	if (s != NULL)
		log_suppressed(s);
	*out = s && s->log ? json_deep_copy(s->log) : json_array();
	return 0;
}
