/*
 * session.c — one client connection through berthd: request heads,
 * routing, access checks, both bodies with backpressure, the response,
 * Upgrade tunnels. Its transport (TLS or plain HTTP for the redirect
 * listener) is tls.c's; upstream connections and their pool are
 * upstream.c's, parking for a wake wake.c's, error pages and the access
 * log respond.c's.
 *
 * Shape: a session reads one request head at a time. Bodies are framed
 * by berthd (Content-Length counted, chunked decoded strictly and
 * re-encoded), so a peer's framing bytes never cross to the other side.
 * Backpressure: when the destination's output passes PX_HIWAT the source
 * stops reading; the destination's write callback (low watermark) starts
 * it again. TLS bufferevents get no read watermark (libevent 2.1 stalls
 * with one); the source is paused from the other side instead.
 * Pipelined requests wait in the input buffer (reading paused) until the
 * response before them is finished.
 *
 * Ownership: a session owns its client transport and, while bound, its
 * upstream; px_sess_free() is the one function that frees them. Callbacks
 * are deferred (BEV_OPT_DEFER_CALLBACKS), so a callback never runs inside
 * another and may free its session as its last act.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "session.h"
#include "evprio.h"
#include "fleet_tls.h"
#include "h2.h"
#include "http1.h"
#include "route.h"
#include "tls.h"
#include "log.h"
#include "wake.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/util.h>

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

static void client_read(struct bufferevent *, void *);
static void client_write(struct bufferevent *, void *);
static void client_event(struct bufferevent *, short, void *);
static void up_read(struct bufferevent *, void *);
static void up_write(struct bufferevent *, void *);
static void up_event(struct bufferevent *, short, void *);
static void up_connect(struct px_sess *);
static void pump_request(struct px_sess *);
static void up_flush(struct px_sess *);
static void pump_response(struct px_sess *);

void
px_tv_ms(struct timeval *tv, unsigned ms)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

long
px_ms_since(const struct timespec *t)
{
	struct timespec now;

	if (t->tv_sec == 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

uint64_t
px_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void
px_sess_timer_set(struct px_sess *s, int kind, unsigned ms)
{
	struct timeval tv;

	px_tv_ms(&tv, ms);
	s->timer_kind = kind;
	evtimer_add(s->timer, &tv);
}

void
px_sess_timer_clear(struct px_sess *s)
{
	s->timer_kind = T_NONE;
	evtimer_del(s->timer);
}

/*
 * The client's read timeout (0: none) and, always, the send timeout: a
 * client that leaves what berthd sends unread for t_send is dropped, so
 * slow readers cannot hold buffers and upstreams forever.
 */
static void
cl_timeouts(struct px_sess *s, unsigned read_ms)
{
	struct timeval rt, wt;

	px_tv_ms(&rt, read_ms);
	px_tv_ms(&wt, s->w->cfg.t_send);
	bufferevent_set_timeouts(s->c, read_ms ? &rt : NULL, &wt);
}

/*
 * Moves n bytes between buffers. Small pieces are copied so they join
 * the chain before them: over TLS every chain becomes its own SSL_write,
 * record and system call, so a head and a small body must share one.
 * Large pieces move without copying.
 */
static void
move_bytes(struct evbuffer *in, struct evbuffer *out, size_t n)
{
	if (n <= 16384) {
		evbuffer_add(out, evbuffer_pullup(in, (ev_ssize_t)n), n);
		evbuffer_drain(in, n);
	} else {
		evbuffer_remove_buffer(in, out, n);
	}
}

/* Writing to the client: while an upstream read is handled, response
 * bytes are staged for one write (px_xport_stage, tls.c). */
static struct evbuffer *
cl_out(struct px_sess *s)
{
	return px_xport_out(s->xp);
}

static void
cl_stage(struct px_sess *s)
{
	px_xport_stage(s->xp);
}

static void
cl_flush(struct px_sess *s)
{
	px_xport_flush(s->xp);
}

/*
 * One step of a chunked body from in to out: framing is decoded strictly
 * and a data piece re-framed as a chunk of our own. Returns the bytes of
 * in consumed, 0 when in is empty, -1 with *why on invalid framing;
 * *data gets the data bytes moved.
 */
static ssize_t
move_chunk(struct px_chunk *ch, struct evbuffer *in, struct evbuffer *out,
    size_t *data, const char **why)
{
	struct evbuffer_iovec v;
	ssize_t n;

	*data = 0;
	if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return 0;
	if ((n = px_chunk_step(ch, v.iov_base, v.iov_len, data, why)) < 0)
		return -1;
	evbuffer_drain(in, (size_t)n - *data);
	if (*data > 0) {
		evbuffer_add_printf(out, "%zx\r\n", *data);
		move_bytes(in, out, *data);
		evbuffer_add(out, "\r\n", 2);
	}
	return n;
}

/* Moves what in holds of a Content-Length body (*left bytes to go). */
static size_t
move_length(struct evbuffer *in, struct evbuffer *out, uint64_t *left)
{
	size_t n = evbuffer_get_length(in);

	if (n > *left)
		n = (size_t)*left;
	move_bytes(in, out, n);
	*left -= n;
	return n;
}

/* ---- client reads ---- */

/* Records the TLS layer read ahead are handed to the bufferevent
 * whenever the session reads (px_xport_kick, tls.c). */
static void
cl_kick(struct px_sess *s)
{
	px_xport_kick(s->xp);
}

static void
cl_read_on(struct px_sess *s)
{
	px_xport_read_on(s->xp);
}

/* ---- session lifetime ---- */

static void
sb_unbind(struct px_sess *s)
{
	if (s->sb != NULL) {
		s->sb->conns--;
		s->sb = NULL;
	}
}

/* Its handshake no longer counts toward a flood (PX_HS_CALM). */
static void
hs_done(struct px_sess *s)
{
	if (s->hs) {
		s->hs = 0;
		s->w->nhs--;
	}
}

/*
 * The session's events run at the normal priority from now on. libevent
 * cannot move a queued event: then it stays low, and the session's next
 * callback (sess_prio) or the age timer tries again.
 */
static void
hs_raise(struct px_sess *s)
{
	if (!s->hs_low || px_bev_priority(s->c, PX_PRIO_NORMAL) != 0)
		return;
	s->hs_low = 0;
	s->w->nhs_low--;
}

/*
 * Handshakes wait behind established traffic, but not forever: one that
 * has waited PX_HS_AGE_MS gets the normal priority, so a saturated worker
 * still lets new clients in (slowly) instead of starving them until
 * their head timeout. Sessions are listed in accept order, so the scan
 * stops at the first low-priority one that is still young.
 */
void
px_sess_age_handshakes(struct px_sessenv *w)
{
	struct px_sess *s;

	TAILQ_FOREACH(s, &w->sessions, entry) {
		if (w->nhs_low == 0)
			return;
		if (!s->hs_low)
			continue;
		if (px_ms_since(&s->t0) < PX_HS_AGE_MS)
			return;
		hs_raise(s);
	}
}

/*
 * Slow exchanges run after everything else when there are many. An
 * exchange (a request and its response) is slow once it has lasted
 * PX_SLOW_MS with its head or body still coming in or its response still
 * going out: slow heads, slow or large bodies, slow readers, long
 * downloads and event streams. While a worker has more than PX_SLOW_CALM
 * of them, they move to PX_PRIO_BULK, each with its upstream. The
 * worker's loop runs that priority PX_BULK_BATCH callbacks at a time and
 * polls in between (worker.c), so a burst from a thousand slow clients
 * delays a new client's handshake or request by one batch, not by the
 * whole burst. libevent's priorities are strict, hence the threshold: a
 * few long transfers on a busy worker are no attack and keep their
 * share. The connection's next request starts at the normal priority.
 * Tunnels (WebSocket) stay interactive; requests waiting for a response
 * head or a wake have nothing to run.
 *
 * libevent cannot move an event that is already queued, so a change that
 * fails is simply tried again at the session's next callback.
 */
static void
sess_prio(struct px_sess *s)
{
	int slow = 0, bulk;

	if (s->hs_low && !s->hs)
		hs_raise(s);	/* its handshake is over: a retry */
	if (s->hs_low)
		return;		/* a handshake in a flood: hs_raise ends it */
	switch (s->state) {
	case S_HEAD:
		slow = evbuffer_get_length(bufferevent_get_input(s->c)) > 0;
		break;
	case S_BODY:
		slow = 1;
		break;
	case S_WAIT:
		slow = !s->req_done || s->resp_head_sent;
		break;
	default:
		break;
	}
	if (slow && px_ms_since(&s->t0) < PX_SLOW_MS)
		slow = 0;
	if (slow != s->slow) {
		s->slow = slow;
		if (slow)
			s->w->nslow++;
		else
			s->w->nslow--;
	}
	bulk = slow && s->w->nslow > PX_SLOW_CALM;
	if (bulk != s->bulk &&
	    px_bev_priority(s->c, bulk ? PX_PRIO_BULK : PX_PRIO_NORMAL) == 0) {
		s->bulk = bulk;
		if (bulk)
			s->w->nbulk++;
		else
			s->w->nbulk--;
	}
	if (s->up != NULL && s->up->bulk != s->bulk)
		(void)px_up_prio(s->up, s->bulk ? PX_PRIO_BULK : PX_PRIO_NORMAL);
}

/* The request in flight no longer counts against its sandbox's cap. */
static void
req_unbind(struct px_sess *s)
{
	if (s->active != NULL) {
		s->active->active--;
		s->active = NULL;
	}
}

void
px_sess_conns_dec(struct px_sessenv *w)
{
	if (w->nconns-- == w->hard_conns)
		w->accepting(1);
	w->closed();
}

void
px_sess_free(struct px_sess *s)
{
	struct px_sessenv *w = s->w;
	int handed = s->handed;

	if (s->busy) {
		s->dead = 1;	/* the callback on the stack frees it */
		return;
	}
	TAILQ_REMOVE(&w->sessions, s, entry);
	/* A request that ends here unlogged was cut: by its client (499, as
	 * nginx logs it, or the status already sent), by a drain or by an
	 * upstream failure mid-response (px_respond_error logs those itself). */
	if (s->req.raw != NULL && !s->logged && s->state != S_HEAD) {
		if (!s->resp_head_sent)
			s->status = 499;
		px_respond_log(s);
	}
	if (s->park != NULL)
		px_wake_unpark(s);
	hs_done(s);
	if (s->hs_low) {
		s->hs_low = 0;
		w->nhs_low--;
	}
	if (s->bulk)
		w->nbulk--;
	if (s->slow)
		w->nslow--;
	req_unbind(s);
	sb_unbind(s);
	if (s->up != NULL)
		px_up_free(s->up);
	if (s->routes != NULL)
		px_routes_unref(s->routes);
	px_head_reset(&s->req);
	px_head_reset(&s->resp);
	event_free(s->timer);
	px_xport_free(s->xp);	/* the bufferevent, the SSL, the socket */
	free(s);
	if (!handed)
		px_sess_conns_dec(w);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_sess *s = arg;
	int kind = s->timer_kind;

	s->timer_kind = T_NONE;
	switch (kind) {
	case T_HEAD:
		if (evbuffer_get_length(bufferevent_get_input(s->c)) == 0 &&
		    s->req.raw == NULL && s->req.scanned == 0 && s->state == S_HEAD &&
		    s->tries == 0 && s->bytes_in == 0) {
			/* nothing arrived at all: just close */
			px_sess_free(s);
			return;
		}
		px_respond_error(s, 408, "the request head did not arrive in time", NULL);
		return;
	case T_IDLE:
		px_sess_free(s);
		return;
	case T_RETRY:
		up_connect(s);
		return;
	case T_WAKE:
		px_wake_timeout(s);
		return;
	}
}

/* An accepted connection with no byte yet (px_sess_accept). */
struct px_pend {
	struct px_sessenv *w;
	struct event	 ev;		/* EV_READ, with the head's deadline */
	struct timespec	 t0;		/* the accept */
	int		 https;
	int		 over;		/* accepted past the limit: 503 only */
	socklen_t	 salen;
	struct sockaddr_in6 sa;		/* IPv4 or IPv6 */
	TAILQ_ENTRY(px_pend) entry;
};

static struct px_sess *sess_begin(struct px_sessenv *, struct px_xport *,
    const struct sockaddr *, int socklen, int https,
    const struct px_pend *);

static void
pend_free(struct px_pend *p, int close_fd)
{
	struct px_sessenv *w = p->w;

	TAILQ_REMOVE(&w->pending, p, entry);
	event_del(&p->ev);
	if (close_fd)
		close(event_get_fd(&p->ev));
	free(p);
}

/* Its first byte (or the head's deadline, or EOF) came: the session is
 * made now; the deadline keeps running from the accept. */
static void
pend_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_pend *p = arg, copy;
	struct px_sessenv *w = p->w;
	struct px_xport *xp;

	if (what & EV_TIMEOUT) {	/* nothing arrived at all: just close */
		pend_free(p, 1);
		px_sess_conns_dec(w);
		return;
	}
	copy = *p;
	pend_free(p, 0);
	xp = px_xport_accept(w->base, fd, copy.https == 0 ? PX_XPORT_PLAIN :
	    copy.https == PX_LISTEN_FLEET ? PX_XPORT_FLEET : PX_XPORT_TLS,
	    w->tls, NULL);
	if (xp == NULL) {		/* fd closed */
		px_sess_conns_dec(w);
		return;
	}
	sess_begin(w, xp, (const struct sockaddr *)&copy.sa, (int)copy.salen,
	    copy.https, &copy);
}

void
px_sess_accept(struct px_sessenv *w, int fd, struct sockaddr *sa, int socklen,
    int https)
{
	struct px_pend *p;
	struct timeval tv;
	int one = 1;
	unsigned ms;

	if (w->draining || (size_t)socklen > sizeof(p->sa) ||
	    (p = calloc(1, sizeof(*p))) == NULL) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evutil_make_socket_nonblocking(fd);
	p->w = w;
	p->https = https;
	p->salen = (socklen_t)socklen;
	memcpy(&p->sa, sa, (size_t)socklen);
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
	/* Past the limit: answered 503 as soon as its head is read, with
	 * a short deadline for that head. */
	p->over = w->nconns >= w->cfg.max_conns;
	if (p->over)
		w->stats.overload++;
	ms = p->over && w->cfg.t_head > 2000 ? 2000 : w->cfg.t_head;
	event_assign(&p->ev, w->base, fd, EV_READ, pend_cb, p);
	px_tv_ms(&tv, ms);
	if (event_add(&p->ev, &tv) != 0) {
		free(p);
		close(fd);
		return;
	}
	TAILQ_INSERT_TAIL(&w->pending, p, entry);
	w->nconns++;
	w->stats.conns_total++;
	if (w->nconns >= w->hard_conns)
		w->accepting(0);	/* the rest wait in the backlog */
}

struct px_sess *
px_sess_start(struct px_sessenv *w, struct px_xport *xp,
    const struct sockaddr *sa, int socklen, int https)
{
	return sess_begin(w, xp, sa, socklen, https, NULL);
}

/* The session of a new connection; pend: what px_sess_accept decided and
 * counted (NULL: px_sess_start, counted here). */
static struct px_sess *
sess_begin(struct px_sessenv *w, struct px_xport *xp,
    const struct sockaddr *sa, int socklen, int https,
    const struct px_pend *pend)
{
	struct px_sess *s;
	long left;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		px_xport_free(xp);
		if (pend != NULL)
			px_sess_conns_dec(w);
		return NULL;
	}
	s->w = w;
	s->https = https;
	s->xp = xp;
	s->c = px_xport_bev(xp);
	px_xport_set_owner(xp, s);
	px_head_init(&s->req, 1);
	px_head_init(&s->resp, 0);
	getnameinfo(sa, socklen, s->peer, sizeof(s->peer), s->peer_port,
	    sizeof(s->peer_port), NI_NUMERICHOST | NI_NUMERICSERV);
	if ((s->timer = evtimer_new(w->base, timer_cb, s)) == NULL)
		goto fail;
	bufferevent_setcb(s->c, client_read, client_write, client_event, s);
	bufferevent_setwatermark(s->c, EV_WRITE, PX_LOWAT, 0);
	/* In a flood of handshakes (more than PX_HS_CALM at once), a new TLS
	 * connection waits behind the established ones until its handshake
	 * ends: the flood cannot starve them. Fewer handshakes than that are
	 * no flood: they run at the normal priority, so a client arriving
	 * while many established connections are busy (slow bodies, say) is
	 * not kept waiting behind their traffic. */
	if (px_xport_tls(s->xp)) {
		s->hs = 1;
		if (w->nhs++ >= PX_HS_CALM &&
		    px_bev_priority(s->c, PX_PRIO_HANDSHAKE) == 0) {
			s->hs_low = 1;
			w->nhs_low++;
		}
	}
	cl_timeouts(s, 0);
	bufferevent_enable(s->c, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&w->sessions, s, entry);
	s->wake_ms = -1;
	if (pend != NULL) {
		s->over = pend->over;
		s->t0 = pend->t0;
	} else {
		/* Past the limit: answered 503 as soon as its head is
		 * read, with a short deadline for that head. */
		s->over = w->nconns >= w->cfg.max_conns;
		if (s->over)
			w->stats.overload++;
		w->nconns++;
		w->stats.conns_total++;
		if (w->nconns >= w->hard_conns)
			w->accepting(0);	/* the rest wait in the backlog */
		clock_gettime(CLOCK_MONOTONIC, &s->t0);
	}
	left = (long)(s->over && w->cfg.t_head > 2000 ? 2000 : w->cfg.t_head) -
	    px_ms_since(&s->t0);
	px_sess_timer_set(s, T_HEAD, left > 1 ? (unsigned)left : 1);
	if (w->nhs_low > 0)
		w->handshakes_wait();
	return s;
fail:
	px_xport_free(s->xp);
	free(s);
	if (pend != NULL)
		px_sess_conns_dec(w);
	return NULL;
}

/* Ends one exchange and gets ready for the next request (keep-alive). */
void
px_sess_next(struct px_sess *s)
{
	req_unbind(s);
	if (s->close_after || s->w->draining || !px_head_keepalive(&s->req)) {
		s->state = S_CLOSING;
		bufferevent_disable(s->c, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(s->c)) == 0)
			px_sess_free(s);
		return;
	}
	px_head_reset(&s->req);
	px_head_reset(&s->resp);
	memset(&s->m, 0, sizeof(s->m));
	s->req_done = s->resp_done = s->resp_head_sent = s->resp_reframe = 0;
	s->upgrade = s->replayable = s->tries = 0;
	s->auth_used = NULL;
	s->cookie_used = 0;
	s->wake_ms = -1;
	s->woken = 0;
	s->fleet_back = 0;
	s->bytes_in = s->bytes_out = 0;
	s->status = 0;
	s->logged = 0;
	s->t_up.tv_sec = 0;
	s->t_resp.tv_sec = 0;
	s->state = S_HEAD;
	cl_timeouts(s, 0);
	if (s->slow || s->bulk) {
		clock_gettime(CLOCK_MONOTONIC, &s->t0);
		sess_prio(s);	/* a new exchange starts at the normal priority */
	}
	cl_read_on(s);
	if (evbuffer_get_length(bufferevent_get_input(s->c)) > 0) {
		clock_gettime(CLOCK_MONOTONIC, &s->t0);
		px_sess_timer_set(s, T_HEAD, s->w->cfg.t_head);
		client_read(s->c, s);	/* a pipelined request is waiting */
	} else {
		px_sess_timer_set(s, T_IDLE, s->w->cfg.t_keepalive);
	}
}

/* ---- request side ---- */

/* Request ids need to be unique, not secret: a splitmix64 sequence
 * seeded once from the CSPRNG costs no system call per request. */
static void
make_reqid(struct px_sess *s)
{
	static const char hex[] = "0123456789abcdef";
	static uint64_t state;
	uint64_t z;
	int i;

	if (state == 0 && px_tls_random(&state, sizeof(state)) != 0)
		state = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	z = (state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	for (i = 15; i >= 0; i--, z >>= 4)
		s->reqid[i] = hex[z & 15];
	s->reqid[16] = '\0';
}

#define PX_COOKIE "__Host-berth_token"

static int
token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
}

/* Finds name=value in a list separated by sep (query or cookie); the
 * value must be token characters. */
static int
find_param(const char *v, size_t vlen, char sep, const char *name,
    const char **val, size_t *len, size_t *start, size_t *end)
{
	size_t i = 0, nlen = strlen(name);

	while (i < vlen) {
		size_t s0, e;

		while (i < vlen && (v[i] == ' ' || v[i] == sep))
			i++;
		s0 = i;
		while (i < vlen && v[i] != sep)
			i++;
		e = i;
		if (e - s0 > nlen && memcmp(v + s0, name, nlen) == 0 && v[s0 + nlen] == '=') {
			size_t k;

			*val = v + s0 + nlen + 1;
			*len = e - s0 - nlen - 1;
			for (k = 0; k < *len; k++)
				if (!token_char((*val)[k]))
					return 0;
			*start = s0;
			*end = e;
			return 1;
		}
	}
	return 0;
}

/*
 * A head assembled in one contiguous piece, without printf or a chain
 * per field: in the space reserved at the end of an evbuffer (hb_start)
 * or in memory of the caller's (hb_mem).
 */
struct hb {
	char		*p;
	size_t		 cap, len;
	int		 over;
	struct evbuffer	*buf;		/* hb_start */
	struct evbuffer_iovec v;
};

static int
hb_start(struct hb *b, struct evbuffer *buf, size_t cap)
{
	memset(b, 0, sizeof(*b));
	if (evbuffer_reserve_space(buf, cap, &b->v, 1) != 1)
		return -1;
	b->buf = buf;
	b->p = b->v.iov_base;
	b->cap = b->v.iov_len;
	return 0;
}

static void
hb_mem(struct hb *b, char *mem, size_t cap)
{
	memset(b, 0, sizeof(*b));
	b->p = mem;
	b->cap = cap;
}

static void
hb_add(struct hb *b, const void *d, size_t n)
{
	if (b->over || n > b->cap - b->len) {
		b->over = 1;
		return;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

#define hb_lit(b, lit)	hb_add((b), (lit), sizeof(lit) - 1)

static void
hb_str(struct hb *b, const char *str)
{
	hb_add(b, str, strlen(str));
}

static void
hb_num(struct hb *b, unsigned long long n)
{
	char t[24];
	size_t i = sizeof(t);

	do {
		t[--i] = '0' + n % 10;
		n /= 10;
	} while (n > 0);
	hb_add(b, t + i, sizeof(t) - i);
}

static void
hb_field(struct hb *b, const char *name, size_t nlen, const char *v, size_t vlen)
{
	hb_add(b, name, nlen);
	hb_lit(b, ": ");
	hb_add(b, v, vlen);
	hb_lit(b, "\r\n");
}

/* Commits what hb_start assembled; -1 (nothing added) if it did not fit. */
static int
hb_end(struct hb *b)
{
	b->v.iov_len = b->over ? 0 : b->len;
	evbuffer_commit_space(b->buf, &b->v, 1);
	return b->over ? -1 : 0;
}

/*
 * What a guest never sees of berth's credentials, whichever one (if any)
 * this request was let in with: every berth_token query parameter, the
 * __Host-berth_token cookie, a Bearer token of berth's. Only the owner of
 * a sandbox drops them: a fleet edge forwards them for the owner to check.
 */
static void
hb_target(struct hb *b, const char *t, size_t len)
{
	if (b->over || len > b->cap - b->len) {
		b->over = 1;
		return;
	}
	b->len += px_target_strip_param(t, len, "berth_token", b->p + b->len, NULL);
}

/* Authorization: Bearer berth_...: berth's token namespace. */
static int
berth_credential(const struct px_hdr *f)
{
	return f->nlen == 13 && strncasecmp(f->name, "authorization", 13) == 0 &&
	    f->vlen >= 13 && strncasecmp(f->value, "bearer ", 7) == 0 &&
	    memcmp(f->value + 7, "berth_", 6) == 0;
}

/* A Cookie header without any of berth's cookies (and none at all if
 * nothing else is left). Cookie names compare ignoring case: a guest
 * framework that folds them must not find the token either. */
static void
hb_cookie(struct hb *b, const struct px_hdr *f)
{
	const char *v = f->value, *end = v + f->vlen;
	size_t cl = sizeof(PX_COOKIE) - 1;
	int kept = 0;

	while (v < end) {
		const char *e = memchr(v, ';', (size_t)(end - v)), *s = v, *t;

		if (e == NULL)
			e = end;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		t = e;
		while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		v = e + 1;
		if (t == s || ((size_t)(t - s) > cl && s[cl] == '=' &&
		    strncasecmp(s, PX_COOKIE, cl) == 0))
			continue;
		hb_str(b, kept++ ? "; " : "Cookie: ");
		hb_add(b, s, (size_t)(t - s));
	}
	if (kept)
		hb_lit(b, "\r\n");
}

/* What berthd adds to a request head at most: Host, forwarding headers,
 * framing. Each of their values is bounded (host 300, address 46, ...). */
#define PX_UP_HEAD_EXTRA 2048

/*
 * The request head berthd sends upstream, in one piece, into mem (room
 * for PX_UP_HEAD_MAX); *len gets its length. It depends only on the
 * parsed request and its route, so a retry on a fresh connection builds
 * the same bytes again instead of keeping a copy.
 */
#define PX_UP_HEAD_MAX (PX_HEAD_MAX + PX_UP_HEAD_EXTRA)

static int
build_up_head(struct px_sess *s, char *mem, size_t *len)
{
	const struct px_head *h = &s->req;
	struct hb hb, *b = &hb;
	const char *proto = s->https ? "https" : "http";
	unsigned port = s->https ? s->w->cfg.https_port : 80;
	size_t hlen = h->host->vlen < 300 ? h->host->vlen : 299;
	int i, v6 = strchr(s->peer, ':') != NULL;

	hb_mem(b, mem, h->rawlen + PX_UP_HEAD_EXTRA < PX_UP_HEAD_MAX ?
	    h->rawlen + PX_UP_HEAD_EXTRA : PX_UP_HEAD_MAX);
	hb_add(b, h->method_str, h->method_len);
	hb_lit(b, " ");
	if (s->m.sb->remote)	/* its owner checks the token, then drops it */
		hb_add(b, h->target, h->target_len);
	else
		hb_target(b, h->target, h->target_len);
	hb_lit(b, " HTTP/1.1\r\nHost: ");
	if (s->m.port->host_upstream && !s->m.sb->remote) {	/* the owner rewrites */
		hb_lit(b, "localhost:");
		hb_num(b, s->m.guest_port);
	} else {
		hb_add(b, h->host->value, hlen);
	}
	hb_lit(b, "\r\n");
	for (i = 0; i < h->nhdr; i++) {
		const struct px_hdr *f = &h->hdr[i];

		if (f->hop || f == s->auth_used)
			continue;	/* berth's own token never reaches a guest */
		if (f->nlen == 16 && strncasecmp(f->name, "berth-fleet-back",
		    16) == 0)
			continue;	/* fleet_route's, between edges only */
		if (!s->m.sb->remote && berth_credential(f))
			continue;	/* nor one it did not need (public port) */
		if (!s->m.sb->remote && f->nlen == 6 &&
		    strncasecmp(f->name, "cookie", 6) == 0) {
			hb_cookie(b, f);
			continue;
		}
		/* berthd is the edge: forwarding headers are its own; behind
		 * another host's edge (fleet, mTLS-proven) they are that edge's */
		if (s->https != PX_LISTEN_FLEET &&
		    ((f->nlen == 15 && strncasecmp(f->name, "x-forwarded-for", 15) == 0) ||
		    (f->nlen == 17 && strncasecmp(f->name, "x-forwarded-proto", 17) == 0) ||
		    (f->nlen == 16 && strncasecmp(f->name, "x-forwarded-host", 16) == 0) ||
		    (f->nlen == 16 && strncasecmp(f->name, "x-forwarded-port", 16) == 0) ||
		    (f->nlen == 9 && strncasecmp(f->name, "forwarded", 9) == 0) ||
		    (f->nlen == 12 && strncasecmp(f->name, "x-request-id", 12) == 0)))
			continue;
		hb_field(b, f->name, f->nlen, f->value, f->vlen);
	}
	if (s->https != PX_LISTEN_FLEET) {
		hb_lit(b, "X-Forwarded-For: ");
		hb_str(b, s->peer);
		hb_lit(b, "\r\nX-Forwarded-Proto: ");
		hb_str(b, proto);
		hb_lit(b, "\r\nX-Forwarded-Host: ");
		hb_add(b, h->host->value, hlen);
		hb_lit(b, "\r\nX-Forwarded-Port: ");
		hb_num(b, port);
		hb_lit(b, "\r\nForwarded: for=");
		if (v6)
			hb_lit(b, "\"[");
		hb_str(b, s->peer);
		if (v6)
			hb_lit(b, "]\"");
		hb_lit(b, ";host=\"");
		hb_add(b, h->host->value, hlen);
		hb_lit(b, "\";proto=");
		hb_str(b, proto);
		hb_lit(b, "\r\nX-Request-Id: ");
		hb_str(b, s->reqid);
		hb_lit(b, "\r\n");
	}
	if (s->fleet_back)
		hb_lit(b, "Berth-Fleet-Back: 1\r\n");
	if (s->upgrade) {
		hb_lit(b, "Connection: upgrade\r\n");
		hb_field(b, "Upgrade", 7, h->upgrade->value, h->upgrade->vlen);
	}
	if (s->req_kind == PX_BODY_CHUNKED) {
		hb_lit(b, "Transfer-Encoding: chunked\r\n");
	} else if (h->content_length >= 0) {
		hb_lit(b, "Content-Length: ");
		hb_num(b, (unsigned long long)h->content_length);
		hb_lit(b, "\r\n");
	}
	hb_lit(b, "\r\n");
	*len = b->len;
	return b->over ? -1 : 0;
}

static void
serve_acme(struct px_sess *s, const char *tok, size_t len)
{
	char name[256];
	struct evbuffer *out = bufferevent_get_output(s->c);
	struct stat st;
	size_t i;
	int fd;

	if (s->w->acme_fd < 0 || len == 0 || len >= sizeof(name)) {
		px_respond_error(s, 404, "no such ACME challenge", NULL);
		return;
	}
	for (i = 0; i < len; i++) {
		char ch = tok[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')) {
			px_respond_error(s, 404, "no such ACME challenge", NULL);
			return;
		}
	}
	memcpy(name, tok, len);
	name[len] = '\0';
	fd = openat(s->w->acme_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > 65536) {
		if (fd >= 0)
			close(fd);
		px_respond_error(s, 404, "no such ACME challenge", NULL);
		return;
	}
	evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "Content-Length: %lld\r\n\r\n", (long long)st.st_size);
	evbuffer_add_file(out, fd, 0, st.st_size);	/* takes fd */
	s->status = 200;
	s->bytes_out = st.st_size;
	px_respond_log(s);
	px_sess_next(s);
}

static const char acme_prefix[] = "/.well-known/acme-challenge/";

static int
is_acme(const struct px_sess *s)
{
	return s->req.target_len > sizeof(acme_prefix) - 1 &&
	    memcmp(s->req.target, acme_prefix, sizeof(acme_prefix) - 1) == 0;
}

static void
redirect_https(struct px_sess *s)
{
	struct evbuffer *out = bufferevent_get_output(s->c);
	char port[16] = "";

	if (s->w->cfg.https_port != 443)
		snprintf(port, sizeof(port), ":%u", s->w->cfg.https_port);
	evbuffer_add_printf(out, "HTTP/1.1 308 Permanent Redirect\r\n"
	    "Location: https://%s%s%.*s\r\nContent-Length: 0\r\n%s\r\n",
	    s->m.host, port, (int)s->req.target_len, s->req.target,
	    px_head_keepalive(&s->req) ? "" : "Connection: close\r\n");
	s->status = 308;
	px_respond_log(s);
	px_sess_next(s);
}

/*
 * Private routes: a berth token in Authorization: Bearer, in the
 * host-scoped cookie, or once in ?berth_token= (then exchanged for the
 * cookie with a redirect, so the token leaves the URL and the browser
 * history). Returns 1 when the request was answered here.
 */
static int
access_check(struct px_sess *s)
{
	const struct px_head *h = &s->req;
	const char *tok = NULL, *q;
	size_t tlen = 0, qs, qe;
	int i, from_query = 0;
	char why[256];
	enum px_token_result tr;

	for (i = 0; i < h->nhdr && tok == NULL; i++) {
		const struct px_hdr *f = &h->hdr[i];

		if (f->nlen == 13 && strncasecmp(f->name, "authorization", 13) == 0 &&
		    f->vlen > 7 && strncasecmp(f->value, "bearer ", 7) == 0) {
			tok = f->value + 7;
			tlen = f->vlen - 7;
			s->auth_used = f;
		}
	}
	for (i = 0; i < h->nhdr && tok == NULL; i++) {
		const struct px_hdr *f = &h->hdr[i];

		if (f->nlen == 6 && strncasecmp(f->name, "cookie", 6) == 0 &&
		    find_param(f->value, f->vlen, ';', PX_COOKIE, &tok, &tlen, &qs, &qe))
			s->cookie_used = 1;
	}
	q = memchr(h->target, '?', h->target_len);
	if (tok == NULL && q != NULL &&
	    find_param(q + 1, h->target + h->target_len - q - 1, '&', "berth_token",
	    &tok, &tlen, &qs, &qe))
		from_query = 1;
	if (tok == NULL) {
		s->auth_used = NULL;
		snprintf(why, sizeof(why), "port %u of sandbox %s is private: a token is required",
		    s->m.guest_port, s->m.sandbox);
		px_respond_error(s, 401, why, "WWW-Authenticate: Bearer realm=\"berth\"\r\n");
		return 1;
	}
	tr = px_route_token(s->routes, s->m.sandbox, tok, tlen);
	if (tr != PX_TOKEN_OK) {
		s->auth_used = NULL;
		s->cookie_used = 0;
		snprintf(why, sizeof(why), tr == PX_TOKEN_OTHER ?
		    "this token belongs to another sandbox, not %s" :
		    "the token for sandbox %s is not valid", s->m.sandbox);
		px_respond_error(s, tr == PX_TOKEN_OTHER ? 403 : 401, why,
		    tr == PX_TOKEN_OTHER ? NULL :
		    "WWW-Authenticate: Bearer realm=\"berth\", error=\"invalid_token\"\r\n");
		return 1;
	}
	if (from_query) {
		static char loc[PX_HEAD_MAX];	/* one worker, one thread */
		struct evbuffer *out = bufferevent_get_output(s->c);
		size_t llen;

		/* every berth_token goes, not only the one used: a second
		 * would reach the guest with the next request */
		llen = px_target_strip_param(h->target, h->target_len,
		    "berth_token", loc, NULL);
		evbuffer_add_printf(out, "HTTP/1.1 302 Found\r\nLocation: %.*s\r\n"
		    "Set-Cookie: " PX_COOKIE "=%.*s; Path=/; Secure; HttpOnly; SameSite=Lax\r\n"
		    "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n"
		    "Content-Length: 0\r\n\r\n",
		    (int)llen, loc, (int)tlen, tok);
		s->status = 302;
		px_respond_log(s);
		px_sess_next(s);
		return 1;
	}
	return 0;
}


/* Whether the request has a Berth-Fleet-Back field (fleet_route). */
static int
fleet_bounced(const struct px_head *h)
{
	int i;

	for (i = 0; i < h->nhdr; i++)
		if (h->hdr[i].nlen == 16 &&
		    strncasecmp(h->hdr[i].name, "berth-fleet-back", 16) == 0)
			return 1;
	return 0;
}

/*
 * Fleet: a sandbox of another host. That host checks access, wakes it
 * and answers; this edge only forwards (up_connect), unless the host is
 * lost. A request that came over the fleet listener is not forwarded
 * again (the two hosts' views disagree for a moment at most), but once
 * back to the host that sent it when this one says the sandbox is
 * there now: a request parked here for a move to it (Berth-Fleet-Back
 * says so; that host serves it, or answers 503, never sends it on).
 * Returns 1 when the request was answered here.
 */
static int
fleet_route(struct px_sess *s)
{
	char why[256];

	if (s->https == PX_LISTEN_FLEET && s->m.sb->host_up &&
	    strcmp(s->fleet_peer, s->m.sb->host) == 0 &&
	    !fleet_bounced(&s->req)) {
		s->fleet_back = 1;
		return 0;
	}
	if (s->https == PX_LISTEN_FLEET) {
		snprintf(why, sizeof(why), "sandbox %s is not on host %s but on %s",
		    s->m.sandbox, px_fleet_tls_host(), s->m.sb->host);
		px_respond_error(s, 503, why, "Retry-After: 1\r\n");
		return 1;
	}
	if (!s->m.sb->host_up) {
		snprintf(why, sizeof(why), "sandbox %s is on host %s, which is down "
		    "(it holds no fleet lease)", s->m.sandbox, s->m.sb->host);
		px_respond_error(s, 503, why, "Retry-After: 5\r\n");
		return 1;
	}
	return 0;
}

/*
 * Fleet listener: the client's certificate (the fleet CA vouched for it)
 * must name a host that holds a live lease, the one it registered as; a
 * valid certificate of a host that is not (or no longer) in the fleet
 * forwards nothing, and its X-Forwarded-* are never trusted. Returns 1
 * when the request was answered here.
 */
static int
fleet_peer_check(struct px_sess *s)
{
	char host[40], why[256];
	const void *peer = px_xport_peer_cert(s->xp);

	if (px_route_fleet_peer(s->routes, peer, host, sizeof(host))) {
		snprintf(s->fleet_peer, sizeof(s->fleet_peer), "%s", host);
		return 0;
	}
	snprintf(why, sizeof(why), "the fleet peer's certificate names no host "
	    "of this fleet holding a live lease");
	s->close_after = 1;
	px_respond_error(s, 403, why, NULL);
	return 1;
}

/*
 * Per-sandbox caps of this worker: requests in flight, and a token
 * bucket of rate_sandbox requests a second (a second's worth of burst).
 * Returns 1 with the reason when this request is over one of them.
 */
static int
sb_over_cap(struct px_sess *s, char *why, size_t whylen)
{
	struct px_sbstat *st = s->m.sb->stat;
	unsigned rate = s->w->cfg.rate_sandbox;

	if (s->w->cfg.max_req_sandbox > 0 && st->active >= s->w->cfg.max_req_sandbox) {
		snprintf(why, whylen, "sandbox %s has too many requests in progress",
		    s->m.sandbox);
		return 1;
	}
	if (rate > 0) {
		uint64_t now = px_now_ms();

		if (st->rate_ms == 0) {
			st->tokens = rate;
		} else if (now > st->rate_ms) {
			uint64_t add = (now - st->rate_ms) * rate / 1000;

			if (add == 0)
				now = st->rate_ms;	/* keep the fraction */
			st->tokens = st->tokens + add > rate ? rate : st->tokens + (unsigned)add;
		}
		st->rate_ms = now;
		if (st->tokens == 0) {
			snprintf(why, whylen, "sandbox %s is over its rate of %u requests a second",
			    s->m.sandbox, rate);
			return 1;
		}
		st->tokens--;
	}
	return 0;
}

static void
handle_request(struct px_sess *s)
{
	px_sess_timer_clear(s);
	make_reqid(s);
	if (s->req.host == NULL) {	/* HTTP/1.0 without Host */
		px_respond_error(s, 400, "missing Host header", NULL);
		return;
	}
	if (s->over) {
		s->close_after = 1;
		px_respond_error(s, 503, "berthd is at its connection limit",
		    "Retry-After: 1\r\n");
		return;
	}
	px_sess_route(s);
}

void
px_sess_route(struct px_sess *s)
{
	enum px_route_result rr;
	const char *sni;
	char why[256];

	if (s->routes != NULL)
		px_routes_unref(s->routes);
	s->routes = s->w->routes;
	px_routes_ref(s->routes);
	if (s->https == PX_LISTEN_FLEET && fleet_peer_check(s))
		return;
	rr = px_route_lookup(s->routes, s->req.host->value, s->req.host->vlen, &s->m);
	if (rr == PX_ROUTE_BAD_HOST) {
		px_respond_error(s, 400, "invalid Host header", NULL);
		return;
	}
	if (!s->https && is_acme(s)) {	/* any Host: the CA asks for it */
		serve_acme(s, s->req.target + sizeof(acme_prefix) - 1,
		    s->req.target_len - (sizeof(acme_prefix) - 1));
		return;
	}
	if ((sni = px_xport_sni(s->xp)) != NULL &&
	    strcasecmp(sni, s->m.host) != 0) {
		px_respond_error(s, 421, "the Host header does not match the TLS server name", NULL);
		return;
	}
	switch (rr) {
	case PX_ROUTE_UNKNOWN_HOST:
		snprintf(why, sizeof(why), "no sandbox is published at %s", s->m.host);
		px_respond_error(s, 404, why, NULL);
		return;
	case PX_ROUTE_NO_SANDBOX:
		snprintf(why, sizeof(why), "no such sandbox: %s", s->m.sandbox);
		px_respond_error(s, 404, why, NULL);
		return;
	case PX_ROUTE_NO_PORT:
		snprintf(why, sizeof(why), "port %u of sandbox %s is not published",
		    s->m.guest_port, s->m.sandbox);
		px_respond_error(s, 404, why, NULL);
		return;
	default:
		break;
	}
	/* plain HTTP redirects only names berth serves: an open redirect
	 * for any Host would lend berth's address to anyone's links */
	if (!s->https) {
		redirect_https(s);
		return;
	}
	if (s->m.sb->remote && fleet_route(s))
		return;
	if (s->m.port->private_ && !s->m.sb->remote && access_check(s))
		return;
	/* woken: the parent said it runs, whatever these routes still say */
	if (strcmp(s->m.sb->state, "running") != 0 && !s->woken &&
	    !px_wake_awake(s->m.sb->stat) && !s->m.sb->remote) {
		/* failed too: a resume may repair it (a restore that failed
		 * is retried), at most once per back-off interval */
		if ((strcmp(s->m.sb->state, "paused") == 0 ||
		    strcmp(s->m.sb->state, "suspended") == 0 ||
		    strcmp(s->m.sb->state, "failed") == 0)) {
			px_wake_park(s);
			return;
		}
		snprintf(why, sizeof(why), "sandbox %s is %s", s->m.sandbox, s->m.sb->state);
		px_respond_error(s, 503, why, "Retry-After: 5\r\n");
		return;
	}
	if (s->sni_woke)
		px_wake_sni_took(s);
	if (s->sb != s->m.sb->stat) {
		sb_unbind(s);
		if (s->m.sb->stat->conns >= s->w->cfg.max_conns_sandbox) {
			s->w->stats.overload++;
			snprintf(why, sizeof(why), "sandbox %s has too many open connections",
			    s->m.sandbox);
			s->close_after = 1;
			px_respond_error(s, 429, why, "Retry-After: 1\r\n");
			return;
		}
		s->sb = s->m.sb->stat;
		s->sb->conns++;
	}
	if (sb_over_cap(s, why, sizeof(why))) {
		s->w->stats.overload++;
		px_respond_error(s, 429, why, "Retry-After: 1\r\n");
		return;
	}
	s->active = s->m.sb->stat;
	s->active->active++;
	s->req_kind = px_request_body(&s->req);
	s->req_left = s->req_kind == PX_BODY_LENGTH ? (uint64_t)s->req.content_length : 0;
	px_chunk_init(&s->req_ch);
	s->req_done = s->req_kind == PX_BODY_NONE;
	s->upgrade = s->req.upgrade != NULL && s->req_kind == PX_BODY_NONE;
	s->replayable = s->req_kind == PX_BODY_NONE;
	s->state = s->req_done ? S_WAIT : S_BODY;
	/* Reading goes on (bounded in client_read): pipelined bytes and an
	 * early body wait in the input buffer; leaving the event alone
	 * saves two epoll_ctl calls a request. */
	cl_timeouts(s, s->req_done ? 0 : s->w->cfg.t_body);
	up_connect(s);
}

static void
parse_head(struct px_sess *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c);
	size_t len;
	ssize_t n;
	int status = 400;
	const char *why = "bad request";
	unsigned char *p;

	/* RFC 9112 2.2: ignore empty lines before a request line. */
	while (s->req.scanned == 0 && evbuffer_get_length(in) >= 2) {
		p = evbuffer_pullup(in, 2);
		if (p[0] != '\r' || p[1] != '\n')
			break;
		evbuffer_drain(in, 2);
	}
	len = evbuffer_get_length(in);
	if (len == 0)
		return;
	if (s->timer_kind == T_IDLE) {
		clock_gettime(CLOCK_MONOTONIC, &s->t0);
		px_sess_timer_set(s, T_HEAD, s->w->cfg.t_head);
	}
	if (len > PX_HEAD_MAX)
		len = PX_HEAD_MAX;
	p = evbuffer_pullup(in, len);
	n = px_head_parse(&s->req, (const char *)p, len, &status, &why);
	if (n == 0)
		return;
	if (n < 0) {
		s->w->stats.rejected++;
		if (s->req.raw == NULL)
			px_head_reset(&s->req);	/* keep the error page simple */
		make_reqid(s);
		s->close_after = 1;
		px_respond_error(s, status, why, NULL);
		return;
	}
	evbuffer_drain(in, n);
	s->bytes_in += n;
	handle_request(s);
}

static void
req_body_finished(struct px_sess *s)
{
	struct evbuffer *out = bufferevent_get_output(s->up->bev);

	if (s->req_kind == PX_BODY_CHUNKED)
		evbuffer_add(out, "0\r\n\r\n", 5);
	s->req_done = 1;
	if (s->state == S_BODY)
		s->state = S_WAIT;
}

/*
 * Writes what the upstream's output holds right away. Upstream
 * bufferevents keep EV_WRITE disabled while their output is empty, so a
 * request costs one writev and no epoll_ctl; only a write that would
 * block hands the rest to the bufferevent (and its write timeout).
 */
static void
up_flush(struct px_sess *s)
{
	struct evbuffer *out = bufferevent_get_output(s->up->bev);

	if (evbuffer_get_length(out) == 0)
		return;
	if (s->up->tls) {	/* OpenSSL must write it: the bufferevent does */
		bufferevent_enable(s->up->bev, EV_WRITE);
		return;
	}
	(void)evbuffer_write(out, bufferevent_getfd(s->up->bev));
	/* errors too: the bufferevent meets them again and reports them */
	if (evbuffer_get_length(out) > 0)
		bufferevent_enable(s->up->bev, EV_WRITE);
}

/* Moves request body bytes from the client to the upstream. */
static void
pump_request(struct px_sess *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c);
	struct evbuffer *out;

	if (s->up == NULL || !s->up->connected || s->req_done)
		return;
	out = bufferevent_get_output(s->up->bev);
	while (!s->req_done && evbuffer_get_length(in) > 0) {
		if (evbuffer_get_length(out) >= PX_HIWAT) {
			bufferevent_disable(s->c, EV_READ);
			return;	/* up_write resumes */
		}
		if (s->req_kind == PX_BODY_LENGTH) {
			s->bytes_in += move_length(in, out, &s->req_left);
			if (s->req_left == 0)
				req_body_finished(s);
		} else {
			const char *why = NULL;
			size_t dlen;
			ssize_t n;

			if ((n = move_chunk(&s->req_ch, in, out, &dlen, &why)) == 0)
				break;
			if (n < 0) {
				s->w->stats.rejected++;
				s->close_after = 1;
				/* the upstream saw half a body: never reuse it */
				px_up_free(s->up);
				s->up = NULL;
				px_respond_error(s, 400, why, NULL);
				return;
			}
			s->bytes_in += n;
			if (px_chunk_done(&s->req_ch))
				req_body_finished(s);
		}
	}
	up_flush(s);
	if (!s->req_done)
		cl_read_on(s);
}

/* ---- upstream side ---- */

static void
up_fail(struct px_sess *s, int status, const char *why)
{
	if (s->up != NULL) {
		px_up_free(s->up);
		s->up = NULL;
	}
	s->close_after |= !s->req_done;
	s->w->stats.upstream_errors++;
	px_respond_error(s, status, why, NULL);
}

static void
up_connect(struct px_sess *s)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	char key[64];
	struct px_up *u;
	struct timeval tv;

	if (s->m.sb->remote)	/* fleet: the owner's listener, over mTLS */
		snprintf(key, sizeof(key), "f:%s", s->m.sb->fleet);
	else
		snprintf(key, sizeof(key), strchr(s->m.sb->address, ':') ? "[%s]:%u" : "%s:%u",
		    s->m.sb->address, s->m.guest_port);
	if (s->tries == 0 && (u = px_pool_get(s->w, key)) != NULL) {
		u->s = s;
		s->up = u;
		bufferevent_setcb(u->bev, up_read, up_write, up_event, s);
		clock_gettime(CLOCK_MONOTONIC, &s->t_up);
		up_event(u->bev, BEV_EVENT_CONNECTED, s);
		return;
	}
	if (evutil_parse_sockaddr_port(s->m.sb->remote ? s->m.sb->fleet : key,
	    (struct sockaddr *)&ss, &sslen) != 0) {
		up_fail(s, 502, "the sandbox address is invalid");
		return;
	}
	if ((u = px_up_new(s->w, key, s->m.sb->remote ? s->m.sb->host : NULL)) == NULL) {
		up_fail(s, 503, "out of memory");
		return;
	}
	u->s = s;
	s->up = u;
	bufferevent_setcb(u->bev, up_read, up_write, up_event, s);
	bufferevent_setwatermark(u->bev, EV_WRITE, PX_LOWAT, 0);
	px_tv_ms(&tv, s->w->cfg.t_connect);
	/* with TLS, the handshake's reads count against t_connect too */
	bufferevent_set_timeouts(u->bev, u->tls ? &tv : NULL, &tv);
	s->tries++;
	if (s->t_up.tv_sec == 0)
		clock_gettime(CLOCK_MONOTONIC, &s->t_up);
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&ss, sslen) != 0) {
		/* immediate failure (e.g. refused on loopback) arrives as an
		 * error event through the deferred callback path */
		up_event(u->bev, BEV_EVENT_ERROR, s);
	}
}

static void
up_connected(struct px_sess *s)
{
	struct px_up *u = s->up;
	struct evbuffer *out = bufferevent_get_output(u->bev);
	struct timeval rt, wt;
	char head[PX_UP_HEAD_MAX];
	size_t len;
	ssize_t n = 0;
	int one = 1;

	if (!u->connected) {
		int fd = bufferevent_getfd(u->bev), idle = 10, intvl = 3, cnt = 3;

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* A guest that vanishes (VM gone, tap removed) sends no RST:
		 * keepalive probes end a silent stream in ~20 s instead of
		 * holding the client until the tunnel timeout. */
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
	u->connected = 1;
	if (build_up_head(s, head, &len) != 0) {
		up_fail(s, 502, "the request head is too large to forward");
		return;
	}
	/* One piece: the head is one write, hence one TCP segment. With
	 * nothing queued before it, straight from here: no buffer to fill
	 * and drain. What the socket does not take (or an error, which the
	 * bufferevent meets again and reports) goes through the output. */
	if (!u->tls && evbuffer_get_length(out) == 0 &&
	    (n = write(bufferevent_getfd(u->bev), head, len)) < 0)
		n = 0;
	if ((size_t)n < len)
		evbuffer_add(out, head + n, len - (size_t)n);
	px_tv_ms(&rt, s->w->cfg.t_response);
	px_tv_ms(&wt, s->w->cfg.t_response);
	px_up_timeouts(u, &rt, &wt);
	bufferevent_disable(u->bev, EV_WRITE);
	px_up_rd(u, 1);
	up_flush(s);
	if (!s->req_done) {
		/* a body that stalls for t_body gets 408 (client_event) */
		cl_timeouts(s, s->w->cfg.t_body);
		pump_request(s);
	}
}

static void
up_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_sess *s = arg;
	struct px_up *u = s->up;
	char why[256];

	if (what & BEV_EVENT_CONNECTED) {
		up_connected(s);
		return;
	}
	if (s->state == S_TUNNEL) {
		/* one side ended the tunnel: flush the rest, then close */
		s->state = S_CLOSING;
		bufferevent_disable(s->c, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
			evbuffer_add_buffer(bufferevent_get_output(s->c),
			    bufferevent_get_input(bev));
		px_up_free(u);
		s->up = NULL;
		if (evbuffer_get_length(bufferevent_get_output(s->c)) == 0)
			px_sess_free(s);
		return;
	}
	if (!u->connected) {
		int err = EVUTIL_SOCKET_ERROR();

		px_up_free(u);
		s->up = NULL;
		if (s->m.sb->remote) {
			/* the owner's berthd is gone (its lease not yet) */
			snprintf(why, sizeof(why), "sandbox %s is on host %s, which cannot "
			    "be reached", s->m.sandbox, s->m.sb->host);
			up_fail(s, 503, why);
			return;
		}
		if ((what & BEV_EVENT_TIMEOUT) == 0 &&
		    (err == ECONNREFUSED || err == 0) &&
		    px_ms_since(&s->t_up) + 100 < (long)s->w->cfg.t_retry) {
			/* A server that just started or resumed may not be
			 * listening yet: retry for a short window. */
			px_sess_timer_set(s, T_RETRY, 100);
			return;
		}
		if (what & BEV_EVENT_TIMEOUT)
			snprintf(why, sizeof(why), "sandbox %s did not accept a connection on port %u in time",
			    s->m.sandbox, s->m.guest_port);
		else if (err == ECONNREFUSED || err == 0)
			snprintf(why, sizeof(why), "sandbox %s is running but nothing listens on port %u",
			    s->m.sandbox, s->m.guest_port);
		else if (err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN)
			snprintf(why, sizeof(why), "sandbox %s cannot be reached: its network is down (%s)",
			    s->m.sandbox, strerror(err));
		else
			snprintf(why, sizeof(why), "connecting to port %u of sandbox %s failed: %s",
			    s->m.guest_port, s->m.sandbox, strerror(err));
		up_fail(s, (what & BEV_EVENT_TIMEOUT) ? 504 : 502, why);
		return;
	}
	if ((what & BEV_EVENT_EOF) && s->resp_kind == PX_BODY_CLOSE &&
	    s->resp_head_sent && !s->resp_done) {
		/* close-delimited response: EOF is its end */
		up_read(bev, s);
		s->resp_done = 1;
		if (s->resp_reframe)
			evbuffer_add(bufferevent_get_output(s->c), "0\r\n\r\n", 5);
		px_up_free(u);
		s->up = NULL;
		if (!s->resp_reframe)
			s->close_after = 1;
		s->close_after |= !s->req_done;
		px_respond_log(s);
		px_sess_next(s);
		return;
	}
	if (!s->resp_head_sent && s->resp.scanned == 0 &&
	    evbuffer_get_length(bufferevent_get_input(bev)) == 0 &&
	    u->reused && s->replayable && !(what & BEV_EVENT_TIMEOUT)) {
		/* A pooled connection the upstream closed meanwhile: the
		 * request never reached it, send it on a fresh one. */
		px_up_free(u);
		s->up = NULL;
		up_connect(s);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		snprintf(why, sizeof(why), "sandbox %s did not answer on port %u in time",
		    s->m.sandbox, s->m.guest_port);
		up_fail(s, 504, why);
		return;
	}
	snprintf(why, sizeof(why), "sandbox %s closed the connection on port %u without a complete response",
	    s->m.sandbox, s->m.guest_port);
	up_fail(s, 502, why);
}

static void
up_write(struct bufferevent *bev, void *arg)
{
	struct px_sess *s = arg;

	if (s->state == S_TUNNEL) {
		if (s->client_eof) {
			if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
				px_sess_free(s);
			return;
		}
		cl_read_on(s);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_disable(bev, EV_WRITE);	/* see up_flush() */
	if (!s->req_done)
		pump_request(s);
}

/*
 * Response headers berth owns: Berth-* (Berth-Host says which host
 * served, so a guest naming one would mislead clients and the fleet),
 * and a Set-Cookie of berth's token cookie. Dropped whatever the guest
 * sent; berthd adds its own after. Hop-by-hop ones are f->hop already.
 */
#define NAME_IS(f, lit) ((f)->nlen == sizeof(lit) - 1 && \
	strncasecmp((f)->name, (lit), sizeof(lit) - 1) == 0)

static int
berth_owned(const struct px_hdr *f)
{
	const char *v = f->value;
	size_t n = f->vlen, cl = sizeof(PX_COOKIE) - 1;

	if (f->nlen >= 6 && strncasecmp(f->name, "berth-", 6) == 0)
		return 1;
	if (f->nlen != 10 || strncasecmp(f->name, "set-cookie", 10) != 0)
		return 0;
	return n > cl && v[cl] == '=' && strncasecmp(v, PX_COOKIE, cl) == 0;
}

/* Writes the response head to the client, rewritten. */
static void
send_resp_head(struct px_sess *s)
{
	const struct px_head *h = &s->resp;
	const char *fleet = px_fleet_tls_host();
	struct hb hb, *b = &hb;
	size_t hint = 0;
	int i, interim = h->status >= 100 && h->status < 200;

	/* room for the start of the body in the head's chain */
	if (!interim && h->status != 101)
		hint = s->resp_kind == PX_BODY_LENGTH ?
		    (h->content_length < 16384 ? (size_t)h->content_length + 16 : 16384) :
		    s->resp_kind == PX_BODY_NONE ? 0 : 4096;
	/* what is added to the upstream's head fits in 512 bytes and the
	 * fleet host name */
	if (hb_start(b, cl_out(s), h->rawlen + 512 + strlen(fleet) + hint) != 0)
		return;
	hb_lit(b, "HTTP/1.1 ");
	hb_num(b, (unsigned)h->status);
	hb_lit(b, " ");
	hb_add(b, h->reason, h->reason_len);
	hb_lit(b, "\r\n");
	for (i = 0; i < h->nhdr; i++) {
		const struct px_hdr *f = &h->hdr[i];

		if (f->hop)
			continue;
		/* another host's fleet listener names itself, and the edge
		 * checks it is the owner its route table forwarded to (or
		 * this host: the owner sent it back here, fleet_route) */
		if (s->m.sb->remote && NAME_IS(f, "berth-host") &&
		    ((f->vlen == strlen(s->m.sb->host) &&
		    memcmp(f->value, s->m.sb->host, f->vlen) == 0) ||
		    (*fleet != '\0' && f->vlen == strlen(fleet) &&
		    memcmp(f->value, fleet, f->vlen) == 0)))
			hb_field(b, f->name, f->nlen, f->value, f->vlen);
		else if (!berth_owned(f))
			hb_field(b, f->name, f->nlen, f->value, f->vlen);
	}
	if (h->status == 101) {
		hb_lit(b, "Connection: upgrade\r\n");
		hb_field(b, "Upgrade", 7, h->upgrade->value, h->upgrade->vlen);
	} else if (!interim) {
		if (s->resp_kind == PX_BODY_CHUNKED || s->resp_reframe) {
			hb_lit(b, "Transfer-Encoding: chunked\r\n");
		} else if (h->content_length >= 0 && h->status != 304 &&
		    h->status != 204) {
			hb_lit(b, "Content-Length: ");
			hb_num(b, (unsigned long long)h->content_length);
			hb_lit(b, "\r\n");
		}
		if (s->wake_ms >= 0) {
			hb_lit(b, "Server-Timing: wake;dur=");
			hb_num(b, (unsigned long long)s->wake_ms);
			hb_lit(b, "\r\n");
		}
		/* from the upstream connection's start (the first try's, or
		 * taking one from the pool) to the response's first byte */
		if (s->t_up.tv_sec != 0 && s->t_resp.tv_sec != 0) {
			long long us = (s->t_resp.tv_sec - s->t_up.tv_sec) * 1000000LL +
			    (s->t_resp.tv_nsec - s->t_up.tv_nsec) / 1000;
			char frac[4];

			if (us < 0)
				us = 0;
			frac[0] = '.';	/* milliseconds, to the microsecond */
			frac[1] = (char)('0' + us / 100 % 10);
			frac[2] = (char)('0' + us / 10 % 10);
			frac[3] = (char)('0' + us % 10);
			hb_lit(b, "Server-Timing: upstream;dur=");
			hb_num(b, (unsigned long long)us / 1000);
			hb_add(b, frac, sizeof(frac));
			hb_lit(b, "\r\n");
		}
		if (*fleet != '\0' && !s->m.sb->remote)
			hb_field(b, "Berth-Host", 10, fleet, strlen(fleet));
		if (s->close_after || s->w->draining)
			hb_lit(b, "Connection: close\r\n");
		else if (s->req.minor == 0)
			hb_lit(b, "Connection: keep-alive\r\n");
	}
	hb_lit(b, "\r\n");
	s->bytes_out += b->over ? 0 : b->len;
	(void)hb_end(b);
}

static void
resp_finished(struct px_sess *s)
{
	struct px_up *u = s->up;

	cl_flush(s);	/* before anything of the next exchange */
	s->resp_done = 1;
	s->up = NULL;
	u->s = NULL;
	if (s->req_done && px_head_keepalive(&s->resp) && !s->upgrade &&
	    evbuffer_get_length(bufferevent_get_input(u->bev)) == 0) {
		px_pool_put(u);
	} else {
		px_up_free(u);
	}
	if (!s->req_done)
		s->close_after = 1;	/* body unread: stream out of sync */
	px_respond_log(s);
	px_sess_next(s);
}

static void
start_tunnel(struct px_sess *s)
{
	struct timeval tv;

	cl_flush(s);
	s->state = S_TUNNEL;
	px_tv_ms(&tv, s->w->cfg.t_tunnel);
	cl_timeouts(s, s->w->cfg.t_tunnel);
	/* the tunnel's both sides are bufferevents (tunnel_move) */
	px_up_rd(s->up, 0);
	s->up->bevread = 1;
	bufferevent_set_timeouts(s->up->bev, &tv, NULL);
	px_respond_log(s);
	cl_read_on(s);
	bufferevent_enable(s->up->bev, EV_READ | EV_WRITE);
	/* bytes that followed the 101, and any the client sent early */
	if (evbuffer_get_length(bufferevent_get_input(s->up->bev)) > 0)
		evbuffer_add_buffer(bufferevent_get_output(s->c),
		    bufferevent_get_input(s->up->bev));
	if (evbuffer_get_length(bufferevent_get_input(s->c)) > 0)
		evbuffer_add_buffer(bufferevent_get_output(s->up->bev),
		    bufferevent_get_input(s->c));
}

static void
tunnel_move(struct bufferevent *from, struct bufferevent *to)
{
	struct evbuffer *out = bufferevent_get_output(to);

	evbuffer_add_buffer(out, bufferevent_get_input(from));
	if (evbuffer_get_length(out) >= PX_HIWAT)
		bufferevent_disable(from, EV_READ);
}

static void
pump_response(struct px_sess *s)
{
	struct evbuffer *in = bufferevent_get_input(s->up->bev);
	struct evbuffer *out = cl_out(s);
	/* an HTTP/2 stream's (h2.c) holds less: its connection has
	 * h2_streams of them */
	size_t hiwat = px_xport_is_pair(s->xp) ? PX_PAIR_HIWAT : PX_HIWAT;

	while (!s->resp_done && evbuffer_get_length(in) > 0) {
		if (evbuffer_get_length(out) >= hiwat) {
			if (out != bufferevent_get_output(s->c)) {	/* staged */
				cl_flush(s);
				out = bufferevent_get_output(s->c);
				continue;
			}
			px_up_rd(s->up, 0);
			return;	/* client_write resumes */
		}
		if (s->resp_kind == PX_BODY_LENGTH) {
			s->bytes_out += move_length(in, out, &s->resp_left);
			if (s->resp_left == 0) {
				resp_finished(s);
				return;
			}
		} else if (s->resp_kind == PX_BODY_CLOSE) {
			size_t n = evbuffer_get_length(in);

			if (s->resp_reframe)
				evbuffer_add_printf(out, "%zx\r\n", n);
			move_bytes(in, out, n);
			if (s->resp_reframe)
				evbuffer_add(out, "\r\n", 2);
			s->bytes_out += n;
		} else {
			const char *why = NULL;
			size_t dlen;
			ssize_t n;

			if ((n = move_chunk(&s->resp_ch, in, out, &dlen, &why)) == 0)
				break;
			if (n < 0) {
				log_debug("%s: upstream %s: %s", __func__, s->up->key, why);
				up_fail(s, 502, why);	/* head sent: closes */
				return;
			}
			s->bytes_out += dlen;
			if (px_chunk_done(&s->resp_ch)) {
				evbuffer_add(out, "0\r\n\r\n", 5);
				resp_finished(s);
				return;
			}
		}
	}
}

static void up_read_msg(struct px_sess *, struct bufferevent *);

static void
up_read(struct bufferevent *bev, void *arg)
{
	struct px_sess *s = arg;

	if (s->state == S_TUNNEL) {
		tunnel_move(bev, s->c);
		return;
	}
	s->busy++;
	cl_stage(s);
	up_read_msg(s, bev);
	s->busy--;
	if (s->dead) {
		px_sess_free(s);
		return;
	}
	sess_prio(s);
	cl_flush(s);
}

static void
up_read_msg(struct px_sess *s, struct bufferevent *bev)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	if (s->state == S_TUNNEL) {
		tunnel_move(bev, s->c);
		return;
	}
	while (!s->resp_head_sent) {
		size_t len = evbuffer_get_length(in);
		int status;
		const char *why;
		ssize_t n;
		unsigned char *p;

		if (len == 0)
			return;
		if (s->t_resp.tv_sec == 0)
			clock_gettime(CLOCK_MONOTONIC, &s->t_resp);
		if (len > PX_HEAD_MAX)
			len = PX_HEAD_MAX;
		p = evbuffer_pullup(in, len);
		n = px_head_parse(&s->resp, (const char *)p, len, &status, &why);
		if (n == 0)
			return;
		if (n < 0) {
			char msg[256];

			snprintf(msg, sizeof(msg), "sandbox %s sent an invalid response: %s",
			    s->m.sandbox, why);
			up_fail(s, 502, msg);
			return;
		}
		evbuffer_drain(in, n);
		if (s->resp.status == 101) {
			if (!s->upgrade || s->resp.upgrade == NULL) {
				up_fail(s, 502, "upstream switched protocols unasked");
				return;
			}
			s->resp_head_sent = 1;
			s->status = 101;
			send_resp_head(s);
			start_tunnel(s);
			return;
		}
		if (s->resp.status < 200) {
			/* interim (100 Continue, 103): pass on to 1.1 clients */
			if (s->req.minor == 1) {
				s->resp_kind = PX_BODY_NONE;
				send_resp_head(s);
			}
			px_head_reset(&s->resp);
			continue;
		}
		s->status = s->resp.status;
		s->resp_kind = px_response_body(&s->resp, s->req.method);
		s->resp_left = s->resp_kind == PX_BODY_LENGTH ? (uint64_t)s->resp.content_length : 0;
		px_chunk_init(&s->resp_ch);
		if (s->resp_kind == PX_BODY_CLOSE) {
			if (s->req.minor == 1)
				s->resp_reframe = 1;
			else
				s->close_after = 1;
		}
		if (s->upgrade)
			s->upgrade = 0;	/* refused upgrade: plain HTTP goes on */
		if (!s->req_done)
			s->close_after = 1;	/* answered before the body ended */
		s->resp_head_sent = 1;
		send_resp_head(s);
		{
			/* the head came in time; a body (SSE) may idle longer */
			struct timeval tv;

			px_tv_ms(&tv, s->w->cfg.t_tunnel);
			bufferevent_set_timeouts(bev, &tv, NULL);
		}
		if (s->resp_kind == PX_BODY_NONE) {
			resp_finished(s);
			return;
		}
	}
	pump_response(s);
}

/* ---- client side ---- */

static void
client_read(struct bufferevent *bev, void *arg)
{
	struct px_sess *s = arg;

	switch (s->state) {
	case S_HEAD:
		parse_head(s);
		break;
	case S_BODY:
		if (s->up == NULL || !s->up->connected) {
			/* the body waits for the upstream, within bounds */
			if (evbuffer_get_length(bufferevent_get_input(bev)) >= PX_HIWAT)
				bufferevent_disable(bev, EV_READ);
			break;
		}
		pump_request(s);
		break;
	case S_TUNNEL:
		if (s->up != NULL)
			tunnel_move(bev, s->up->bev);
		break;
	case S_WAIT:
	case S_PARK:
		/* pipelined requests wait their turn, within bounds */
		if (evbuffer_get_length(bufferevent_get_input(bev)) > 2 * PX_HEAD_MAX)
			bufferevent_disable(bev, EV_READ);
		break;
	case S_CLOSING:
		bufferevent_disable(bev, EV_READ);
		break;
	}
	sess_prio(s);
	cl_kick(s);
}

static void
client_write(struct bufferevent *bev, void *arg)
{
	struct px_sess *s = arg;

	if (s->state == S_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			px_sess_free(s);
		return;
	}
	sess_prio(s);
	if (s->up != NULL && s->up->connected &&
	    (s->state == S_TUNNEL || s->resp_head_sent))
		px_up_rd(s->up, 1);
	if (s->state != S_TUNNEL && s->up != NULL && s->resp_head_sent &&
	    evbuffer_get_length(bufferevent_get_input(s->up->bev)) > 0)
		pump_response(s);
}

static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_sess *s = arg;

	if (what & BEV_EVENT_CONNECTED) {
		/* handshake done: an established connection from now on */
		hs_done(s);
		hs_raise(s);
		if (px_xport_h2(s->xp)) {	/* h2.c serves it from now on */
			struct px_sessenv *w = s->w;
			struct px_xport *xp = s->xp;
			int woke = s->sni_woke;

			/* the connection stays counted, now as h2.c's: no
			 * moment at zero connections for a drain to end at,
			 * nor under the hard limit for accepting to resume */
			bufferevent_setcb(s->c, NULL, NULL, NULL, NULL);
			s->xp = NULL;
			s->handed = 1;
			px_sess_free(s);
			px_h2_start(w, xp, woke);
			return;
		}
		cl_kick(s);	/* a request that came with the Finished */
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
	    s->state == S_BODY && !s->resp_head_sent) {
		/* the body stalled: the upstream saw half of it, drop that */
		if (s->up != NULL) {
			px_up_free(s->up);
			s->up = NULL;
		}
		s->close_after = 1;
		px_respond_error(s, 408, "the request body did not arrive in time", NULL);
		return;
	}
	if (s->state == S_TUNNEL && (what & BEV_EVENT_EOF) && s->up != NULL) {
		struct evbuffer *out = bufferevent_get_output(s->up->bev);

		/* client done: pass on what it sent, then close both */
		evbuffer_add_buffer(out, bufferevent_get_input(bev));
		if (evbuffer_get_length(out) > 0) {
			s->client_eof = 1;
			bufferevent_disable(bev, EV_READ);
			bufferevent_setwatermark(s->up->bev, EV_WRITE, 0, 0);
			return;	/* up_write frees once flushed */
		}
	}
	/* Like nginx's default: a client that goes away aborts its request
	 * (a write to it fails, or its EOF arrives), upstream included. */
	px_sess_free(s);
}

void
px_sess_env_init(struct px_sessenv *env)
{
	int i;

	TAILQ_INIT(&env->sessions);
	TAILQ_INIT(&env->pending);
	for (i = 0; i < PX_POOL_BUCKETS; i++)
		TAILQ_INIT(&env->pool[i]);
}

void
px_sess_drain_all(struct px_sessenv *w, int hard)
{
	struct px_sess *s, *t;
	struct px_pend *p;

	px_h2_drain_all(w, hard);
	while ((p = TAILQ_FIRST(&w->pending)) != NULL) {
		pend_free(p, 1);	/* no byte yet: nothing to finish */
		px_sess_conns_dec(w);
	}
	TAILQ_FOREACH_SAFE(s, &w->sessions, entry, t) {
		if (hard || (s->state == S_HEAD && s->req.scanned == 0 &&
		    evbuffer_get_length(bufferevent_get_input(s->c)) == 0))
			px_sess_free(s);
		else
			s->close_after = 1;
	}
}
