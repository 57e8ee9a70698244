/*
 * dnsd.c — the guests' DNS resolver helper ("berthd: dns"): unprivileged
 * and chrooted (proc.h). It runs libnetctl's filtering resolver (nc_dns)
 * on the port 53 sockets the parent bound on each sandbox's gateway and
 * passed in, with the domain rules the parent pushes: it parses the
 * guests' queries and the upstreams' answers, which is why it is not the
 * parent. It holds no table: the addresses of each A answer go to the
 * parent as a typed "allow these for this guest" message, which the
 * parent checks against its own copy of the rules before it programs
 * nftables; only its yes releases the answer (a no, or no word within
 * NC_DNS_INSERT_WAIT_MS, is SERVFAIL). Denials and errors go to the
 * parent for the denial log.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "helper.h"
#include "log.h"
#include "proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

static struct {
	struct event_base *base;
	struct px_chan	*ch;
	struct nc_dns	*dns;
} D;

static int
on_insert(uint64_t token, struct in_addr guest, const char *name,
    const struct in_addr *addrs, const uint32_t *ttl, size_t n, void *arg)
{
	struct hm_dns_insert m;

	(void)arg;
	if (n == 0 || n > NC_DNS_MAX_RR || strlen(name) >= sizeof(m.name))
		return -1;
	memset(&m, 0, sizeof(m));
	m.token = token;
	m.guest = guest;
	snprintf(m.name, sizeof(m.name), "%s", name);
	m.n = (uint32_t)n;
	memcpy(m.addrs, addrs, n * sizeof(*addrs));
	memcpy(m.ttl, ttl, n * sizeof(*ttl));
	return px_chan_send(D.ch, HM_DNS_INSERT, &m, sizeof(m), NULL, 0);
}

static void
on_denial(const struct nc_dns_denial *d, void *arg)
{
	struct hm_dns_denial m;
	size_t i;

	memset(&m, 0, sizeof(m));
	m.when = d->when;
	m.guest = d->guest;
	snprintf(m.name, sizeof(m.name), "%s", d->name);
	for (i = 0; m.name[i] != '\0'; i++)	/* \DDD escapes stay */
		if ((unsigned char)m.name[i] < 0x20 || (unsigned char)m.name[i] > 0x7e)
			m.name[i] = '?';
	m.qtype = d->qtype;
	snprintf(m.reason, sizeof(m.reason), "%s", d->reason);
	px_chan_send(D.ch, HM_DNS_DENIAL, &m, sizeof(m), NULL, 0);
}

static void
on_error(const char *msg, void *arg)
{
	char buf[1024];
	size_t i;

	snprintf(buf, sizeof(buf), "%s", msg);
	for (i = 0; buf[i] != '\0'; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	px_chan_send(D.ch, HM_DNS_ERROR, buf, strlen(buf) + 1, NULL, 0);
}

static void
configure(const struct hm_dns_config *m)
{
	struct nc_dns_config dc;
	char err[NC_ERRLEN];

	if (D.dns != NULL || m->nresolvers > HM_DNS_RESOLVERS ||
	    m->nqtypes > HM_DNS_QTYPES)
		fatalx("bad configuration message");
	nc_dns_config_init(&dc);
	dc.resolvers = m->resolvers;
	dc.nresolvers = m->nresolvers;
	if (m->nqtypes > 0) {
		dc.qtypes = m->qtypes;
		dc.nqtypes = m->nqtypes;
	}
	dc.query_rate = m->query_rate;
	dc.label_max = m->label_max;
	dc.wildcard_names = m->wildcard_names;
	dc.deny_rcode = m->deny_rcode;
	dc.insert = on_insert;
	dc.on_denial = on_denial;
	dc.on_error = on_error;
	if ((D.dns = nc_dns_new(D.base, NULL, &dc, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	log_debug("resolver configured: %u upstream(s)", m->nresolvers);
}

/* "allow" and "deny" rule texts after the header: NUL-terminated each */
static void
set_rules(const unsigned char *p, size_t len)
{
	struct hm_dns_rules h;
	struct nc_rule *r = NULL;
	size_t off = sizeof(h), i, n;
	char err[NC_ERRLEN];

	memcpy(&h, p, sizeof(h));
	n = (size_t)h.nallow + h.ndeny;
	if (n > 8192 || (n > 0 && (r = calloc(n, sizeof(*r))) == NULL))
		fatalx("rules: %u + %u", h.nallow, h.ndeny);
	for (i = 0; i < n; i++) {
		const char *t = (const char *)p + off;
		size_t l;

		if (off >= len || (l = strnlen(t, len - off)) == len - off)
			fatalx("rules: truncated");
		if (nc_rule_parse(t, &r[i], err, sizeof(err)) != 0)
			fatalx("rules: %s", err);
		off += l + 1;
	}
	if (D.dns != NULL && nc_dns_set_rules(D.dns, h.guest, (enum nc_mode)h.mode,
	    r, h.nallow, r + h.nallow, h.ndeny, err, sizeof(err)) < 0)
		log_warnx("rules: %s", err);
	free(r);
}

static void
on_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	char err[NC_ERRLEN];

	switch (type) {
	case HM_DNS_CONFIG:
		if (len != sizeof(struct hm_dns_config) || nfds != 0)
			break;
		configure(p);
		return;
	case HM_DNS_SANDBOX_ADD: {
		struct hm_dns_sandbox m;

		if (len != sizeof(m) || nfds != 2 || D.dns == NULL)
			break;
		memcpy(&m, p, sizeof(m));
		m.id[sizeof(m.id) - 1] = '\0';
		if (nc_dns_sandbox_adopt(D.dns, m.guest, m.gw, m.id, fds[0], fds[1],
		    err, sizeof(err)) < 0)
			log_warnx("%s", err);
		fds[0] = fds[1] = -1;	/* taken (closed on failure) */
		log_debug("sandbox %s", m.id);
		return;
	}
	case HM_DNS_SANDBOX_DEL: {
		struct hm_dns_sandbox m;

		if (len != sizeof(m) || nfds != 0 || D.dns == NULL)
			break;
		memcpy(&m, p, sizeof(m));
		(void)nc_dns_sandbox_del(D.dns, m.guest);
		return;
	}
	case HM_DNS_RULES:
		if (len < sizeof(struct hm_dns_rules) || nfds != 0)
			break;
		set_rules(p, len);
		return;
	case HM_DNS_INSERTED: {
		struct hm_dns_inserted m;

		if (len != sizeof(m) || nfds != 0 || D.dns == NULL)
			break;
		memcpy(&m, p, sizeof(m));
		m.err[sizeof(m.err) - 1] = '\0';
		(void)nc_dns_insert_done(D.dns, m.token, m.ok, m.err);
		return;
	}
	}
	fatalx("unexpected message %u (%zu bytes) from the parent", type, len);
}

static void
on_close(struct px_chan *ch, int corrupt, void *arg)
{
	exit(corrupt ? 1 : 0);
}

int
px_dnsd_main(int fd)
{
	if ((D.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((D.ch = px_chan_new(D.base, fd, on_msg, on_close, NULL)) == NULL)
		fatalx("channel");
	event_base_dispatch(D.base);
	return 0;
}
