/*
 * worker.c — a proxy worker process. Started by the parent with its
 * listening sockets, it waits for its configuration, certificates and
 * routes over the IPC socket, then accepts. It never opens a file: the
 * parent already dropped it into an empty root as an unprivileged user.
 * It reports counters to the parent once a second.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "worker.h"
#include "fleet_tls.h"
#include "ipc.h"
#include "log.h"
#include "route.h"
#include "routemsg.h"
#include "tls.h"
#include "wake.h"

#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <jansson.h>

static struct px_worker *px_w;

static void worker_accepting(int on);
static void worker_closed(void);
static void worker_age_timer(void);
static void worker_wake(const char *id);

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int socklen, void *arg)
{
	int i = (int)(intptr_t)arg;

	px_sess_accept(&px_w->env, fd, sa, socklen, px_w->listen_https[i]);
}

static void
accept_resume(evutil_socket_t fd, short what, void *arg)
{
	worker_accepting(1);
}

static void
accept_error(struct evconnlistener *l, void *arg)
{
	struct timeval tv = { 0, 100000 };

	/* EMFILE and friends: pause a moment rather than spin */
	log_warn("worker %d: accept", px_w->id);
	worker_accepting(0);
	event_base_once(px_w->env.base, -1, EV_TIMEOUT, accept_resume, NULL, &tv);
}

static void
worker_accepting(int on)
{
	int i;

	if (px_w->env.draining || px_w->configured != 7)
		return;
	if (!on) {
		px_w->env.stats.overload++;
		log_warnx("worker %d: %u connections: at the limit, pausing accept",
		    px_w->id, px_w->env.nconns);
	}
	for (i = 0; i < px_w->nlisteners; i++)
		if (on)
			evconnlistener_enable(px_w->listeners[i]);
		else
			evconnlistener_disable(px_w->listeners[i]);
}

static void
worker_wake(const char *id)
{
	json_t *m = json_pack("{s:s,s:s}", "type", "wake", "sandbox", id);

	if (m != NULL) {
		px_ipc_send(px_w->ipc, m);
		json_decref(m);
	}
}

static void
worker_closed(void)
{
	if (px_w->env.draining && px_w->env.nconns == 0)
		event_base_loopexit(px_w->env.base, NULL);
}

static void
drain_hard(evutil_socket_t fd, short what, void *arg)
{
	log_info("worker %d: drain deadline: closing %u connection(s)",
	    px_w->id, px_w->env.nconns);
	px_sess_drain_all(&px_w->env, 1);
	event_base_loopexit(px_w->env.base, NULL);
}

static void
start_drain(void)
{
	struct timeval tv;
	int i;

	if (px_w->env.draining)
		return;
	px_w->env.draining = 1;
	for (i = 0; i < px_w->nlisteners; i++) {
		evconnlistener_free(px_w->listeners[i]);
		px_w->listeners[i] = NULL;
	}
	px_w->nlisteners = 0;
	px_pool_flush(&px_w->env);
	px_sess_drain_all(&px_w->env, 0);
	tv.tv_sec = px_w->env.cfg.t_drain / 1000;
	tv.tv_usec = (px_w->env.cfg.t_drain % 1000) * 1000;
	px_w->drain_timer = evtimer_new(px_w->env.base, drain_hard, NULL);
	evtimer_add(px_w->drain_timer, &tv);
	worker_closed();
}

static void
send_stats(evutil_socket_t fd, short what, void *arg)
{
	struct px_stats *st = &px_w->env.stats;
	struct px_sbstat *sb;
	unsigned long long full, resumed;
	json_t *m, *sbs, *sbm;

	px_tls_counts(&full, &resumed);
	sbs = json_object();
	sbm = json_object();
	for (sb = px_sbstat_first(); sb != NULL; sb = sb->next) {
		/* "sandboxes" is also the idle policy's activity signal */
		json_object_set_new(sbs, sb->id, json_pack("{s:I,s:I,s:I,s:I}",
		    "requests", (json_int_t)sb->requests, "conns", (json_int_t)sb->conns,
		    "bytes_in", (json_int_t)sb->bytes_in, "bytes_out", (json_int_t)sb->bytes_out));
		json_object_set_new(sbm, sb->id, json_pack("{s:I,s:I,s:I,s:[I,I,I,I,I,I]}",
		    "requests", (json_int_t)sb->m_requests,
		    "bytes_in", (json_int_t)sb->m_bytes_in,
		    "bytes_out", (json_int_t)sb->m_bytes_out,
		    "status", (json_int_t)sb->m_status[0], (json_int_t)sb->m_status[1],
		    (json_int_t)sb->m_status[2], (json_int_t)sb->m_status[3],
		    (json_int_t)sb->m_status[4], (json_int_t)sb->m_status[5]));
	}
	m = json_pack("{s:s,s:I,s:[I,I,I,I,I,I],s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}",
	    "type", "stats", "requests", (json_int_t)st->requests,
	    "status", (json_int_t)st->status[0], (json_int_t)st->status[1],
	    (json_int_t)st->status[2], (json_int_t)st->status[3],
	    (json_int_t)st->status[4], (json_int_t)st->status[5],
	    "bytes_in", (json_int_t)st->bytes_in, "bytes_out", (json_int_t)st->bytes_out,
	    "upstream_errors", (json_int_t)st->upstream_errors,
	    "rejected", (json_int_t)st->rejected, "conns_total", (json_int_t)st->conns_total,
	    "overload", (json_int_t)st->overload, "active", (json_int_t)px_w->env.nconns,
	    "pool_idle", (json_int_t)px_w->env.pool_idle, "slow", (json_int_t)px_w->env.nslow,
	    "deferred", (json_int_t)px_w->env.nbulk,
	    "tls_full", (json_int_t)full, "tls_resumed", (json_int_t)resumed,
	    "sandboxes", sbs);
	if (m != NULL)
		json_object_set_new(m, "sandbox_metrics", sbm);
	else
		json_decref(sbm);
	if (m != NULL) {
		px_ipc_send(px_w->ipc, m);
		json_decref(m);
	}
}

static void
age_handshakes(evutil_socket_t fd, short what, void *arg)
{
	px_sess_age_handshakes(&px_w->env);
	worker_age_timer();
}

static void
worker_age_timer(void)
{
	/* armed only while handshakes wait at low priority */
	struct timeval tv = { 0, PX_HS_AGE_MS * 1000 / 2 };

	if (px_w->env.nhs_low > 0 && px_w->age_timer != NULL &&
	    !evtimer_pending(px_w->age_timer, NULL))
		evtimer_add(px_w->age_timer, &tv);
}

static int
hexdecode(const char *hex, unsigned char *out, size_t outlen)
{
	size_t i;

	if (hex == NULL || strlen(hex) != outlen * 2)
		return -1;
	for (i = 0; i < outlen; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (unsigned char)v;
	}
	return 0;
}

static void
set_tickets(json_t *keys)
{
	unsigned char k[PX_TICKET_KEYS][PX_TICKET_KEY_LEN];
	size_t i, n = json_array_size(keys);

	if (n == 0 || n > PX_TICKET_KEYS)
		fatalx("worker %d: bad ticket keys", px_w->id);
	for (i = 0; i < n; i++)
		if (hexdecode(json_string_value(json_array_get(keys, i)), k[i],
		    PX_TICKET_KEY_LEN) != 0)
			fatalx("worker %d: bad ticket key", px_w->id);
	px_tls_set_ticket_keys((const unsigned char (*)[PX_TICKET_KEY_LEN])k, (int)n);
	memset(k, 0, sizeof(k));
}

/* Where each of the parent's settings goes (PX_WORKER_FIELDS). */
#define PX_WFIELD(dir, name, field, def, share, zero) \
	{ #field, offsetof(struct px_wcfg, field) },
static const struct { const char *key; size_t off; } wfields[] = {
	PX_WORKER_FIELDS(PX_WFIELD)
};
#undef PX_WFIELD

static void
handle_msg(json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "type"));
	char err[256];

	if (strcmp(type, "config") == 0) {
		struct px_wcfg *c = &px_w->env.cfg;
		const char *d = json_string_value(json_object_get(m, "domain"));
		size_t i;

		if (d == NULL)
			fatalx("worker %d: config without domain", px_w->id);
		snprintf(c->domain, sizeof(c->domain), "%s", d);
		c->https_port = (unsigned)json_integer_value(json_object_get(m, "https_port"));
		px_tls_set_h2(json_is_true(json_object_get(m, "http2")));
		for (i = 0; i < sizeof(wfields) / sizeof(wfields[0]); i++)
			*(unsigned *)((char *)c + wfields[i].off) = (unsigned)
			    json_integer_value(json_object_get(m, wfields[i].key));
		/* Past max_conns a connection is still accepted, but only to
		 * be told 503 quickly; past this slack accept pauses and the
		 * kernel's backlog holds the rest. */
		px_w->env.hard_conns = c->max_conns + c->max_conns / 4 + 16;
		if (px_w->env.nconns < px_w->env.hard_conns)
			worker_accepting(1);
		px_w->configured |= 1;
	} else if (strcmp(type, "tls") == 0) {
		json_t *certs = json_object_get(m, "certs"), *cj;
		struct px_tls_cert tc[32];
		struct px_tls *t;
		size_t i, n = json_array_size(certs);

		if (n == 0 || n > 32)
			fatalx("worker %d: bad tls message", px_w->id);
		json_array_foreach(certs, i, cj) {
			tc[i].cert_pem = json_string_value(json_object_get(cj, "cert"));
			tc[i].key_pem = json_string_value(json_object_get(cj, "key"));
			if (tc[i].cert_pem == NULL || tc[i].key_pem == NULL)
				fatalx("worker %d: bad tls message", px_w->id);
			tc[i].cert_len = strlen(tc[i].cert_pem);
			tc[i].key_len = strlen(tc[i].key_pem);
		}
		if ((t = px_tls_new(tc, (int)n, err, sizeof(err))) == NULL) {
			log_warnx("worker %d: certificates not changed: %s", px_w->id, err);
			return;
		}
		px_tls_unref(px_w->env.tls);
		px_w->env.tls = t;
		set_tickets(json_object_get(m, "tickets"));
		px_w->configured |= 2;
	} else if (strcmp(type, "tickets") == 0) {
		set_tickets(json_object_get(m, "keys"));
	} else if (strcmp(type, PX_RT_TYPE) == 0) {
		struct px_routes *r = px_routes_build(json_object_get(m, PX_RT_ROUTES),
		    err, sizeof(err));

		/* the parent's table, whatever it holds, is no reason to
		 * exit: a restarted worker would get the same one */
		if (r == NULL) {
			log_warnx("worker %d: routes not changed: %s", px_w->id, err);
			return;
		}
		if (r->nskipped > 0)
			log_warnx("worker %d: routes: %u bad entr%s left out: %s", px_w->id,
			    r->nskipped, r->nskipped == 1 ? "y" : "ies", r->skipped);
		px_routes_unref(px_w->env.routes);
		px_w->env.routes = r;
		px_wake_routes_changed();	/* the table says what runs now */
		px_w->configured |= 4;
	} else if (strcmp(type, "woken") == 0) {
		const char *id = json_string_value(json_object_get(m, "sandbox"));

		if (id == NULL)
			fatalx("worker %d: woken without sandbox", px_w->id);
		px_sess_woken(&px_w->env, id, json_is_true(json_object_get(m, "ok")),
		    json_string_value(json_object_get(m, "reason")));
	} else if (strcmp(type, "fleet") == 0) {
		const char *host = json_string_value(json_object_get(m, "host"));
		const char *ca = json_string_value(json_object_get(m, "ca"));
		const char *cert = json_string_value(json_object_get(m, "cert"));
		const char *key = json_string_value(json_object_get(m, "key"));

		/* fleet mode: this host's certificate for both directions */
		if (host == NULL || ca == NULL || cert == NULL || key == NULL)
			fatalx("worker %d: bad fleet message", px_w->id);
		if (px_fleet_tls_set(host, ca, cert, key, err, sizeof(err)) != 0)
			log_warnx("worker %d: fleet certificates not changed: %s", px_w->id, err);
	} else if (strcmp(type, "ping") == 0) {
		/* the parent's heartbeat: answered from this loop, so a
		 * stopped or wedged worker is noticed (and restarted) */
		json_t *pong = json_pack("{s:s,s:O}", "type", "pong", "seq",
		    json_object_get(m, "seq"));

		if (pong == NULL || !json_is_integer(json_object_get(m, "seq")))
			fatalx("worker %d: bad ping", px_w->id);
		px_ipc_send(px_w->ipc, pong);
		json_decref(pong);
	} else if (strcmp(type, "drain") == 0) {
		start_drain();
	} else {
		fatalx("worker %d: unknown message '%s'", px_w->id, type);
	}
}

static void
ipc_read(struct bufferevent *bev, void *arg)
{
	json_t *m;
	int r, was = px_w->configured;

	while ((r = px_ipc_recv(bev, &m)) == 1) {
		handle_msg(m);
		json_decref(m);
	}
	if (r < 0)
		fatalx("worker %d: corrupt message from the parent", px_w->id);
	if (was != 7 && px_w->configured == 7 && !px_w->env.draining) {
		int i;
		json_t *ready = json_pack("{s:s,s:i}", "type", "ready", "pid", (int)getpid());

		for (i = 0; i < px_w->nlisteners; i++)
			evconnlistener_enable(px_w->listeners[i]);
		px_ipc_send(px_w->ipc, ready);
		json_decref(ready);
	}
}

static void
ipc_event(struct bufferevent *bev, short what, void *arg)
{
	/* The parent is gone: nobody can restart or reload us. */
	log_warnx("worker %d: lost the parent, exiting", px_w->id);
	exit(0);
}

int
px_worker_main(int id, int ipc_fd, int *listen_fds, int *https, int n,
    int access_fd, int acme_fd)
{
	static struct px_worker w;
	struct timeval sec = { 1, 0 };
	int i;

	px_w = &w;
	w.id = id;
	w.ipc_fd = ipc_fd;
	w.env.access_fd = access_fd;
	w.env.acme_fd = acme_fd;
	px_sess_env_init(&w.env);
	w.env.accepting = worker_accepting;
	w.env.closed = worker_closed;
	w.env.handshakes_wait = worker_age_timer;
	w.env.wake = worker_wake;
	px_tls_set_sni_hook(px_sess_sni, &w.env);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);	/* the parent coordinates shutdown */
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	{
		/* The changelist folds the enable/disable churn of a
		 * request's bufferevents into fewer epoll_ctl calls. */
		struct event_config *ec = event_config_new();

		if (ec != NULL) {
			event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
			/* Low-priority callbacks come PX_BULK_BATCH at a time,
			 * then the loop polls again: a burst of a thousand
			 * slow clients' bytes makes a new arrival wait for
			 * one batch, not for the whole burst. */
			event_config_set_max_dispatch_interval(ec, NULL,
			    PX_BULK_BATCH, PX_PRIO_BULK);
		}
		w.env.base = ec ? event_base_new_with_config(ec) : NULL;
		if (ec != NULL)
			event_config_free(ec);
		if (w.env.base == NULL && (w.env.base = event_base_new()) == NULL)
			fatalx("worker %d: event_base_new", id);
		/* Five priorities; events default to the middle one (2).
		 * Exchanges that have lasted PX_SLOW_MS (slow or large
		 * bodies, slow readers, long streams) run at 3, TLS
		 * handshakes in a flood at 4 (session.c). */
		if (event_base_priority_init(w.env.base, PX_PRIO_N) != 0)
			fatalx("worker %d: event priorities", id);
	}
	evutil_make_socket_nonblocking(ipc_fd);
	w.ipc = bufferevent_socket_new(w.env.base, ipc_fd, BEV_OPT_CLOSE_ON_FREE);
	if (w.ipc == NULL)
		fatalx("worker %d: ipc", id);
	bufferevent_setcb(w.ipc, ipc_read, NULL, ipc_event, NULL);
	bufferevent_enable(w.ipc, EV_READ | EV_WRITE);
	for (i = 0; i < n; i++) {
		evutil_make_socket_nonblocking(listen_fds[i]);
		w.listeners[i] = evconnlistener_new(w.env.base, accept_cb,
		    (void *)(intptr_t)i, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_DISABLED,
		    -1, listen_fds[i]);
		if (w.listeners[i] == NULL)
			fatal("worker %d: listener", id);
		evconnlistener_set_error_cb(w.listeners[i], accept_error);
		w.listen_https[i] = https[i];
	}
	w.nlisteners = n;
	w.stats_timer = event_new(w.env.base, -1, EV_PERSIST, send_stats, NULL);
	evtimer_add(w.stats_timer, &sec);
	/* at a higher priority than the traffic it must not wait on */
	w.age_timer = evtimer_new(w.env.base, age_handshakes, NULL);
	if (w.age_timer == NULL || event_priority_set(w.age_timer, PX_PRIO_TIMER) != 0)
		fatalx("worker %d: timer", id);
	event_base_dispatch(w.env.base);
	/* drained */
	send_stats(-1, 0, NULL);
	bufferevent_flush(w.ipc, EV_WRITE, BEV_FLUSH);
	return 0;
}
