/*
 * h2.c — see h2.h.
 *
 * A stream's request is written to its end of a bufferevent pair as an
 * HTTP/1.1 head (":authority" as Host, cookie fields joined with "; ",
 * Transfer-Encoding: chunked when the length is unknown) and its DATA as
 * the body; the session layer on the other end answers it exactly as it
 * answers a TLS client. Its HTTP/1.1 response is parsed with the same
 * strict parser (http1.c), connection-specific fields are dropped, and
 * the body is de-chunked into DATA frames.
 *
 * Memory per stream is bounded: the request body by the stream's receive
 * window (reopened only as the pair drains, nghttp2_session_consume), the
 * response by H2_BODY_MAX decoded here, the pair's read watermark and the
 * session's output bound for a pair (PX_PAIR_HIWAT: it stops reading its
 * upstream past it), about 200 KiB a stream with the upstream's read and
 * socket buffers; the connection's output by PX_HIWAT (frames are made
 * only below it).
 *
 * WebSockets: no RFC 8441. berthd does not send
 * SETTINGS_ENABLE_CONNECT_PROTOCOL, so a browser opens its WebSocket on
 * an HTTP/1.1 connection of its own (Chromium, Firefox and Safari all
 * fall back so; proxy-h2.sh checks Chromium's echo beside a page it
 * loaded over h2), and a CONNECT stream is reset. Why: a WebSocket there
 * is the session layer's Upgrade tunnel, whose idle timeouts, activity
 * reports (an open WebSocket keeps its sandbox awake), wake and limits
 * are those of a connection; carried as an h2 stream it would need a
 * made-up Sec-WebSocket-Key and a 101 turned into 200, would hold one of
 * the connection's h2_streams for hours, be cut by the GOAWAY of a
 * drain or an attack limit meant for the page's streams, and share the
 * page's TCP head-of-line blocking. What it would save is one TLS
 * handshake per WebSocket (one round trip, once per page).
 *
 * HTTP/2 has no 101 (RFC 9113 8.6): Upgrade and Connection fields make a
 * request malformed (nghttp2 resets it), and a guest that switches
 * protocols unasked gets its client a 502 from the session layer.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "h2.h"
#include "evprio.h"
#include "session.h"
#include "http1.h"
#include "log.h"
#include "tls.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#define H2_BODY_MAX	(32 * 1024)	/* response bytes decoded ahead */
#define H2_PAIR_MAX	(16 * 1024)	/* response bytes the pair holds */
#define H2_CONN_WINDOW	(1 << 20)	/* connection receive window */
#define H2_RESET_MS	10000		/* h2_resets counts per this window */
#define H2_METHOD_MAX	32
#define H2_LINGER_MS	1000		/* a closing connection's last reads */
#define H2_STALL_TICK_MS 1000		/* zero-window stalls checked this often */
#define H2_WU_SMALL	1024		/* a WINDOW_UPDATE below this is small */
#define H2_WU_MAX	1000		/* small ones per H2_RESET_MS: a flood */
#define H2_BIG_MAX	10		/* 431s per H2_RESET_MS: an attack */
#define H2_RECV_SLICE	16384		/* input bytes to nghttp2 at a time */
#define H2_TURN_US	2000		/* a connection's input work per turn */
#define H2_TURN_HDR	(1 << 20)	/* header bytes decoded per turn */

struct h2s;
TAILQ_HEAD(h2slist, h2s);

struct h2c {
	struct px_sessenv *w;
	struct px_xport	*xp;
	struct bufferevent *c;
	nghttp2_session	*ng;
	struct sockaddr_storage peer;
	socklen_t	 peerlen;
	char		 peername[64];
	struct event	*timer;		/* idle */
	struct event	*stall;		/* zero-window stalls (H2_STALL_TICK_MS) */
	struct event	*more;		/* input left for the next turn */
	size_t		 turn_hdr;	/* header bytes decoded this turn */
	int		 paused;	/* on_header paused nghttp2 */
	uint64_t	 stall_t0;	/* since when a response waits on the
					 * client's window; 0: none does */
	uint64_t	 wu_t0;
	unsigned	 wu_n;
	uint64_t	 big_t0;	/* header lists over h2_header_list */
	unsigned	 big_n;
	unsigned	 nstreams;
	uint64_t	 rst_t0;
	unsigned	 rst_n;
	int		 closing;	/* flush, then free */
	int		 lingering;	/* flushed: free at the timer */
	int		 sni_woke;	/* its TLS server name started a wake:
					 * the next stream's response says so */
	struct h2slist	 streams;
	TAILQ_ENTRY(h2c) entry;
};

struct h2s {
	struct h2c	*h;
	int32_t		 id;
	struct bufferevent *a;		/* our end of the pair; NULL: gone */
	/* the request */
	char		 method[H2_METHOD_MAX];
	char		*path, *authority;
	struct evbuffer	*hdrs;		/* regular fields, HTTP/1.1 lines */
	struct evbuffer	*cookie;
	size_t		 hsize;		/* header list size (RFC 9113 6.5.2) */
	int		 bad;		/* a field we refuse */
	int		 too_big;	/* over h2_header_list: 431 */
	int		 has_cl, chunked, started, req_end;
	size_t		 unconsumed;	/* DATA bytes not yet given back */
	/* the response */
	struct px_head	 resp;
	int		 head_done, resp_end, deferred;
	int		 a_eof;		/* the session's end is gone */
	int		 a_paused;	/* our end's reading is off: body full */
	enum px_body_kind kind;
	uint64_t	 left;
	struct px_chunk	 ch;
	struct evbuffer	*body;		/* decoded, waiting for DATA frames */
	TAILQ_ENTRY(h2s) entry;
};

static TAILQ_HEAD(, h2c) conns = TAILQ_HEAD_INITIALIZER(conns);

static void h2_send(struct h2c *);
static void resp_read(struct h2s *);

/* ---- streams ---- */

static void
stream_free(struct h2s *st)
{
	struct h2c *h = st->h;

	if (st->a != NULL) {
		bufferevent_setcb(st->a, NULL, NULL, NULL, NULL);
		/* the session sees EOF: a request cut short is aborted */
		bufferevent_flush(st->a, EV_WRITE, BEV_FINISHED);
		bufferevent_free(st->a);
	}
	nghttp2_session_set_stream_user_data(h->ng, st->id, NULL);
	TAILQ_REMOVE(&h->streams, st, entry);
	h->nstreams--;
	free(st->path);
	free(st->authority);
	if (st->hdrs != NULL)
		evbuffer_free(st->hdrs);
	if (st->cookie != NULL)
		evbuffer_free(st->cookie);
	if (st->body != NULL)
		evbuffer_free(st->body);
	px_head_reset(&st->resp);
	free(st);
}

static void
stream_reset(struct h2s *st, uint32_t code)
{
	nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, code);
}

static ssize_t data_read(nghttp2_session *, int32_t, uint8_t *, size_t,
    uint32_t *, nghttp2_data_source *, void *);

/*
 * The access log line and the counters of an answer h2.c made itself
 * (no session saw the request), in the session layer's format (respond.c)
 * with no sandbox, port or request id. The fields come validated by
 * nghttp2 (RFC 9113 8.3: no control bytes); the query stays out.
 */
static void
stream_log(struct h2s *st, int status, size_t bytes)
{
	struct px_sessenv *w = st->h->w;
	char ip[64], *c;
	int cls = status / 100;

	w->stats.requests++;
	w->stats.status[cls >= 1 && cls <= 5 ? cls : 0]++;
	w->stats.bytes_out += bytes;
	if (cls == 4)
		w->stats.rejected++;
	if (w->access_fd < 0)
		return;
	snprintf(ip, sizeof(ip), "%s", st->h->peername);
	if ((c = strrchr(ip, ':')) != NULL)
		*c = '\0';
	px_access_line(w->access_fd, ip, st->authority,
	    st->authority != NULL ? strlen(st->authority) : 0, NULL, 0,
	    st->method, strlen(st->method), st->path,
	    st->path != NULL ? strlen(st->path) : 0, status,
	    (unsigned long long)bytes, 0, 0, NULL);
}

/*
 * berthd's own answer on a stream that no session serves (any session
 * the stream had is let go: it sees EOF). The body is JSON as the
 * session's answer to a head it could not take: nothing of the request
 * (not its Accept) is known. The response ends the stream (END_STREAM);
 * a request still open is then reset with NO_ERROR (on_frame_send).
 */
static void
stream_answer(struct h2s *st, int status, const char *why)
{
	char code[4], clen[8];
	int n;
	nghttp2_data_provider prd;
	nghttp2_nv nv[4] = {
		{ (uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)"content-type", (uint8_t *)"application/json", 12, 16,
		    NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)"content-length", (uint8_t *)clen, 14, 0,
		    NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)"cache-control", (uint8_t *)"no-store", 13, 8,
		    NGHTTP2_NV_FLAG_NONE },
	};

	if (st->a != NULL) {
		bufferevent_setcb(st->a, NULL, NULL, NULL, NULL);
		bufferevent_flush(st->a, EV_WRITE, BEV_FINISHED);
		bufferevent_free(st->a);
		st->a = NULL;
	}
	evbuffer_drain(st->body, evbuffer_get_length(st->body));
	n = evbuffer_add_printf(st->body,
	    "{\"error\":{\"status\":%d,\"sandbox\":null,\"reason\":\"%s\"}}\n",
	    status, why);
	snprintf(code, sizeof(code), "%03d", status % 1000);
	nv[2].valuelen = (size_t)snprintf(clen, sizeof(clen), "%d", n < 0 ? 0 : n);
	st->head_done = st->resp_end = 1;
	stream_log(st, status, n < 0 ? 0 : (size_t)n);
	prd.source.ptr = st;
	prd.read_callback = data_read;
	if (nghttp2_submit_response(st->h->ng, st->id, nv, 4, &prd) != 0)
		stream_reset(st, NGHTTP2_INTERNAL_ERROR);
}

/* Gives back the window of the DATA bytes the session has taken. */
static void
stream_consume(struct h2s *st)
{
	size_t out, n;

	if (st->a == NULL || st->unconsumed == 0)
		return;
	out = evbuffer_get_length(bufferevent_get_output(st->a));
	n = st->unconsumed > out ? st->unconsumed - out : 0;
	if (n > 0) {
		nghttp2_session_consume_stream(st->h->ng, st->id, n);
		st->unconsumed -= n;
	}
}

static void
a_read(struct bufferevent *bev, void *arg)
{
	struct h2s *st = arg;
	struct h2c *h = st->h;

	resp_read(st);
	h2_send(h);
}

static void
a_write(struct bufferevent *bev, void *arg)
{
	struct h2s *st = arg;
	struct h2c *h = st->h;

	stream_consume(st);
	h2_send(h);
}

/* The session's end is gone and all it sent is taken. */
static void
a_gone(struct h2s *st)
{
	struct h2c *h = st->h;

	if (st->head_done && st->kind == PX_BODY_CLOSE)
		st->resp_end = 1;
	bufferevent_setcb(st->a, NULL, NULL, NULL, NULL);
	bufferevent_free(st->a);
	st->a = NULL;
	if (!st->resp_end)
		stream_reset(st, NGHTTP2_INTERNAL_ERROR);
	else if (st->deferred) {
		st->deferred = 0;
		nghttp2_session_resume_data(h->ng, st->id);
	}
}

/* The session on the other end is gone. What it wrote last is all in
 * our input now (the pair's flush ignores the watermark): it is taken
 * as the client's window makes room (resp_read), then a_gone(). */
static void
a_event(struct bufferevent *bev, short what, void *arg)
{
	struct h2s *st = arg;
	struct h2c *h = st->h;

	st->a_eof = 1;
	resp_read(st);
	h2_send(h);
}

/* The request's head is complete: a session on a pair serves it. */
static void
stream_begin(struct h2s *st, int end_stream)
{
	struct h2c *h = st->h;
	struct bufferevent *pair[2];
	struct px_xport *xp;
	struct px_sess *s;
	struct evbuffer *req;

	st->started = 1;
	if (st->too_big) {
		char why[96];

		snprintf(why, sizeof(why), "the request's header list is over %u bytes",
		    h->w->cfg.h2_header_list);
		stream_answer(st, 431, why);
		return;
	}
	if (st->bad || st->method[0] == '\0' || st->path == NULL ||
	    strcmp(st->method, "CONNECT") == 0) {
		/* CONNECT: no RFC 8441 (not advertised); WebSockets fall
		 * back to HTTP/1.1 */
		stream_reset(st, NGHTTP2_PROTOCOL_ERROR);
		return;
	}
	if ((req = evbuffer_new()) == NULL)
		goto fail;
	evbuffer_add_printf(req, "%s %s HTTP/1.1\r\n", st->method, st->path);
	if (st->authority != NULL)
		evbuffer_add_printf(req, "Host: %s\r\n", st->authority);
	evbuffer_add_buffer(req, st->hdrs);
	if (evbuffer_get_length(st->cookie) > 0) {
		evbuffer_add(req, "Cookie: ", 8);
		evbuffer_add_buffer(req, st->cookie);
		evbuffer_add(req, "\r\n", 2);
	}
	if (!end_stream && !st->has_cl) {
		st->chunked = 1;
		evbuffer_add(req, "Transfer-Encoding: chunked\r\n", 28);
	}
	evbuffer_add(req, "\r\n", 2);
	if (bufferevent_pair_new(h->w->base, BEV_OPT_DEFER_CALLBACKS, pair) != 0) {
		evbuffer_free(req);
		goto fail;
	}
	if ((xp = px_xport_pair(pair[1], px_xport_sni(h->xp))) == NULL) {
		bufferevent_free(pair[0]);
		bufferevent_free(pair[1]);
		evbuffer_free(req);
		goto fail;
	}
	st->a = pair[0];
	bufferevent_setcb(st->a, a_read, a_write, a_event, st);
	bufferevent_setwatermark(st->a, EV_READ, 0, H2_PAIR_MAX);
	bufferevent_setwatermark(st->a, EV_WRITE, PX_LOWAT / 2, 0);
	bufferevent_enable(st->a, EV_READ | EV_WRITE);
	if ((s = px_sess_start(h->w, xp, (struct sockaddr *)&h->peer,
	    (int)h->peerlen, 1)) != NULL && h->sni_woke) {
		/* the wake its handshake started (Server-Timing wake;dur,
		 * even when it ended before this request came) */
		s->sni_woke = 1;
		h->sni_woke = 0;
	}
	bufferevent_write_buffer(st->a, req);
	evbuffer_free(req);
	return;
fail:
	stream_reset(st, NGHTTP2_INTERNAL_ERROR);
}

static void
stream_req_end(struct h2s *st)
{
	if (st->req_end)
		return;
	st->req_end = 1;
	if (st->a != NULL && st->chunked)
		bufferevent_write(st->a, "0\r\n\r\n", 5);
}

/* ---- the response: HTTP/1.1 from the pair, HEADERS and DATA out ---- */

static ssize_t
data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2s *st = src->ptr;
	size_t n = evbuffer_get_length(st->body);

	if (n == 0 && !st->resp_end) {
		st->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (n > length)
		n = length;
	if (n > 0)
		evbuffer_remove(st->body, buf, n);
	if (evbuffer_get_length(st->body) == 0 && st->resp_end)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	else if (st->a != NULL)
		resp_read(st);	/* room again: take more */
	return (ssize_t)n;
}

/* Connection-specific fields (RFC 9113 8.2.2) stay behind (the session
 * wrote this head: the guest's hop-by-hop fields are gone already);
 * Content-Length goes on, as over HTTP/1.1. */
static int
h1_only(const struct px_hdr *f)
{
	static const char *const names[] = { "connection", "keep-alive",
	    "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f->nlen == strlen(names[i]) &&
		    strncasecmp(f->name, names[i], f->nlen) == 0)
			return 1;
	return 0;
}

static int
submit_head(struct h2s *st)
{
	struct px_head *r = &st->resp;
	nghttp2_data_provider prd;
	nghttp2_nv *nva;
	char status[4], *names, *p;
	size_t nn = 0, total = 0;
	int i, rv;

	for (i = 0; i < r->nhdr; i++)
		total += r->hdr[i].nlen;
	nva = calloc((size_t)r->nhdr + 1, sizeof(*nva));
	names = malloc(total + 1);
	if (nva == NULL || names == NULL) {
		free(nva);
		free(names);
		return -1;
	}
	snprintf(status, sizeof(status), "%03d", r->status % 1000);
	nva[nn++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7, 3,
	    NGHTTP2_NV_FLAG_NONE };
	p = names;
	for (i = 0; i < r->nhdr; i++) {
		const struct px_hdr *f = &r->hdr[i];
		size_t j;

		if (h1_only(f))
			continue;
		for (j = 0; j < f->nlen; j++)
			p[j] = (char)tolower((unsigned char)f->name[j]);
		nva[nn++] = (nghttp2_nv){ (uint8_t *)p, (uint8_t *)f->value,
		    f->nlen, f->vlen, NGHTTP2_NV_FLAG_NONE };
		p += f->nlen;
	}
	prd.source.ptr = st;
	prd.read_callback = data_read;
	rv = nghttp2_submit_response(st->h->ng, st->id, nva, nn,
	    st->resp_end ? NULL : &prd);
	free(nva);
	free(names);
	return rv == 0 ? 0 : -1;
}

/* The interim 100 (Continue) the session sends for Expect. */
static void
submit_interim(struct h2s *st, int status)
{
	char v[4];
	nghttp2_nv nv = { (uint8_t *)":status", (uint8_t *)v, 7, 3,
	    NGHTTP2_NV_FLAG_NONE };

	snprintf(v, sizeof(v), "%03d", status);
	nghttp2_submit_headers(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NULL,
	    &nv, 1, NULL);
}

static int
resp_head(struct h2s *st)
{
	struct evbuffer *in = bufferevent_get_input(st->a);
	size_t len;
	ssize_t n;
	int status;
	const char *why;
	unsigned char *p;

	while (!st->head_done) {
		if ((len = evbuffer_get_length(in)) == 0)
			return 0;
		if (len > PX_HEAD_MAX)
			len = PX_HEAD_MAX;
		p = evbuffer_pullup(in, (ev_ssize_t)len);
		n = px_head_parse(&st->resp, (const char *)p, len, &status, &why);
		if (n == 0)
			return len == PX_HEAD_MAX ? -1 : 0;
		if (n < 0)
			return -1;
		evbuffer_drain(in, (size_t)n);
		if (st->resp.status == 101) {
			/* HTTP/2 has no 101 (RFC 9113 8.6): no request of
			 * ours asks for an upgrade (nghttp2 refuses the
			 * Upgrade and Connection fields), and the session
			 * answers an unasked one 502; this is the last guard
			 * against a stream that waits for a final head
			 * forever. */
			log_warnx("h2 %s: stream %d: 101 from the session layer: 502",
			    st->h->peername, st->id);
			stream_answer(st, 502, "the sandbox switched protocols "
			    "(101), which HTTP/2 cannot carry");
			return 0;
		}
		if (st->resp.status < 200) {
			if (st->resp.status == 100)
				submit_interim(st, 100);
			px_head_reset(&st->resp);
			px_head_init(&st->resp, 0);
			continue;
		}
		if (strcmp(st->method, "HEAD") == 0 || st->resp.status == 204 ||
		    st->resp.status == 304)
			st->kind = PX_BODY_NONE;
		else if (st->resp.chunked)
			st->kind = PX_BODY_CHUNKED;
		else if (st->resp.content_length >= 0)
			st->kind = PX_BODY_LENGTH;
		else
			st->kind = PX_BODY_CLOSE;
		st->left = st->kind == PX_BODY_LENGTH ?
		    (uint64_t)st->resp.content_length : 0;
		px_chunk_init(&st->ch);
		st->resp_end = st->kind == PX_BODY_NONE ||
		    (st->kind == PX_BODY_LENGTH && st->left == 0);
		st->head_done = 1;
		if (submit_head(st) != 0)
			return -1;
	}
	return 0;
}

/* Takes what the pair holds of the response, within H2_BODY_MAX. */
static void
resp_read(struct h2s *st)
{
	struct evbuffer *in;
	size_t room, n, dlen;
	ssize_t k;
	const char *why;
	struct evbuffer_iovec v;

	if (st->a == NULL)
		return;
	if (resp_head(st) != 0) {
		log_warnx("h2 %s: stream %d: bad response from the session layer",
		    st->h->peername, st->id);
		bufferevent_disable(st->a, EV_READ);
		stream_reset(st, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	if (st->a == NULL)
		return;		/* answered by berthd (stream_answer) */
	in = bufferevent_get_input(st->a);
	while (st->head_done && !st->resp_end &&
	    (room = H2_BODY_MAX - evbuffer_get_length(st->body)) > 0 &&
	    H2_BODY_MAX > evbuffer_get_length(st->body) &&
	    (n = evbuffer_get_length(in)) > 0) {
		switch (st->kind) {
		case PX_BODY_LENGTH:
			if (n > room)
				n = room;
			if (n > st->left)
				n = (size_t)st->left;
			evbuffer_remove_buffer(in, st->body, n);
			st->left -= n;
			st->resp_end = st->left == 0;
			break;
		case PX_BODY_CHUNKED:
			if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
				return;
			n = v.iov_len < room ? v.iov_len : room;
			k = px_chunk_step(&st->ch, v.iov_base, n, &dlen, &why);
			if (k < 0) {
				bufferevent_disable(st->a, EV_READ);
				stream_reset(st, NGHTTP2_INTERNAL_ERROR);
				return;
			}
			evbuffer_drain(in, (size_t)k - dlen);
			if (dlen > 0)
				evbuffer_remove_buffer(in, st->body, dlen);
			st->resp_end = px_chunk_done(&st->ch);
			if (k == 0)
				goto out;
			break;
		default:	/* PX_BODY_CLOSE: until the pair's EOF */
			if (n > room)
				n = room;
			evbuffer_remove_buffer(in, st->body, n);
			break;
		}
	}
out:
	if (st->a_eof) {
		/* done, or nothing more can come of what is left */
		if (evbuffer_get_length(in) == 0 || st->resp_end ||
		    !st->head_done || evbuffer_get_length(st->body) < H2_BODY_MAX)
			a_gone(st);
	} else {
		/* A full body (the client's window is closed): the pair and
		 * the session keep the rest, until DATA frames make room.
		 * Reading stays off meanwhile, for libevent runs a read
		 * callback that leaves the input at the high watermark again
		 * at once (bufferevent_inbuf_wm_check): a busy loop. */
		int full = st->head_done && !st->resp_end &&
		    evbuffer_get_length(st->body) >= H2_BODY_MAX;

		if (full && !st->a_paused) {
			st->a_paused = 1;
			bufferevent_disable(st->a, EV_READ);
		} else if (!full && st->a_paused) {
			st->a_paused = 0;
			bufferevent_enable(st->a, EV_READ);
		}
	}
	if (st->deferred && (evbuffer_get_length(st->body) > 0 || st->resp_end)) {
		st->deferred = 0;
		nghttp2_session_resume_data(st->h->ng, st->id);
	}
}

/* ---- nghttp2's callbacks ---- */

static int
on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2c *h = arg;
	struct h2s *st;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	st->h = h;
	st->id = f->hd.stream_id;
	px_head_init(&st->resp, 0);
	st->hdrs = evbuffer_new();
	st->cookie = evbuffer_new();
	st->body = evbuffer_new();
	TAILQ_INSERT_TAIL(&h->streams, st, entry);
	h->nstreams++;
	if (st->hdrs == NULL || st->cookie == NULL || st->body == NULL) {
		stream_free(st);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	nghttp2_session_set_stream_user_data(ng, st->id, st);
	return 0;
}

static int
name_is(const uint8_t *n, size_t nlen, const char *s)
{
	return nlen == strlen(s) && memcmp(n, s, nlen) == 0;
}

static int
on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *arg)
{
	struct h2c *h = arg;
	struct h2s *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);

	/* An HPACK bomb decodes to megabytes out of a few wire bytes:
	 * that much a turn, then the others' turn (c_read). */
	if ((h->turn_hdr += nlen + vlen) > H2_TURN_HDR) {
		h->paused = 1;
		return NGHTTP2_ERR_PAUSE;	/* this field is taken */
	}
	if (st == NULL || st->started)
		return 0;	/* trailers: not forwarded */
	if (st->too_big)
		return 0;	/* the rest of the block is decoded, not kept */
	st->hsize += nlen + vlen + 32;
	if (st->hsize > h->w->cfg.h2_header_list) {
		/* an oversized list, or an HPACK bomb (a big field in the
		 * dynamic table referenced again and again): 431 */
		uint64_t now = px_now_ms();

		log_warnx("h2 %s: stream %d: header list over %u bytes: 431",
		    h->peername, st->id, h->w->cfg.h2_header_list);
		st->too_big = 1;
		/* one may be a browser's oversized cookies; a connection
		 * that keeps sending them (HPACK bombs) costs decoding
		 * for nothing: GOAWAY */
		if (now - h->big_t0 > H2_RESET_MS) {
			h->big_t0 = now;
			h->big_n = 0;
		}
		if (++h->big_n > H2_BIG_MAX && !h->closing) {
			log_warnx("h2 %s: %u header lists over %u bytes in %u s: GOAWAY",
			    h->peername, h->big_n, h->w->cfg.h2_header_list,
			    H2_RESET_MS / 1000);
			nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
			h->closing = 1;
			/* and not a field more of this block decoded */
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		}
		return 0;
	}
	if (nlen > 0 && name[0] == ':') {
		if (name_is(name, nlen, ":method")) {
			if (vlen >= H2_METHOD_MAX)
				st->bad = 1;
			else {
				memcpy(st->method, value, vlen);
				st->method[vlen] = '\0';
			}
		} else if (name_is(name, nlen, ":path")) {
			free(st->path);
			st->path = strndup((const char *)value, vlen);
		} else if (name_is(name, nlen, ":authority")) {
			free(st->authority);
			st->authority = strndup((const char *)value, vlen);
		} else if (!name_is(name, nlen, ":scheme"))
			st->bad = 1;	/* :protocol (not offered) */
		return 0;
	}
	if (name_is(name, nlen, "host")) {
		if (st->authority == NULL)
			st->authority = strndup((const char *)value, vlen);
		return 0;
	}
	if (name_is(name, nlen, "cookie")) {
		if (evbuffer_get_length(st->cookie) > 0)
			evbuffer_add(st->cookie, "; ", 2);
		evbuffer_add(st->cookie, value, vlen);
		return 0;
	}
	if (name_is(name, nlen, "te"))
		return 0;
	if (name_is(name, nlen, "content-length"))
		st->has_cl = 1;
	evbuffer_add(st->hdrs, name, nlen);
	evbuffer_add(st->hdrs, ": ", 2);
	evbuffer_add(st->hdrs, value, vlen);
	evbuffer_add(st->hdrs, "\r\n", 2);
	return 0;
}

/*
 * A stream reset the client asked for: by RST_STREAM (rapid reset,
 * CVE-2023-44487: streams opened and reset in a loop each cost a session
 * and an upstream connection) or by a frame the server must reset the
 * stream for ("MadeYouReset": a zero WINDOW_UPDATE, DATA past its
 * content-length, a malformed request). Past h2_resets in H2_RESET_MS:
 * GOAWAY.
 */
static void
reset_counted(struct h2c *h, nghttp2_session *ng)
{
	uint64_t now = px_now_ms();

	if (now - h->rst_t0 > H2_RESET_MS) {
		h->rst_t0 = now;
		h->rst_n = 0;
	}
	if (++h->rst_n > h->w->cfg.h2_resets && !h->closing) {
		log_warnx("h2 %s: %u streams reset in %u s: GOAWAY",
		    h->peername, h->rst_n, H2_RESET_MS / 1000);
		nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
		h->closing = 1;
	}
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2c *h = arg;
	struct h2s *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	uint64_t now;

	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (st == NULL)
			break;
		if (!st->started)
			stream_begin(st, f->hd.flags & NGHTTP2_FLAG_END_STREAM);
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			stream_req_end(st);
		break;
	case NGHTTP2_DATA:
		if (st != NULL && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
			stream_req_end(st);
		break;
	case NGHTTP2_WINDOW_UPDATE:
		/* a flood of small increments costs a frame's work each and
		 * gives nothing (big ones overflow the window: an error) */
		if (f->window_update.window_size_increment >= H2_WU_SMALL)
			break;
		now = px_now_ms();
		if (now - h->wu_t0 > H2_RESET_MS) {
			h->wu_t0 = now;
			h->wu_n = 0;
		}
		if (++h->wu_n > H2_WU_MAX && !h->closing) {
			log_warnx("h2 %s: %u small WINDOW_UPDATEs in %u s: GOAWAY",
			    h->peername, h->wu_n, H2_RESET_MS / 1000);
			nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
			h->closing = 1;
		}
		break;
	case NGHTTP2_RST_STREAM:
		reset_counted(h, ng);
		break;
	default:
		break;
	}
	return 0;
}

static int
on_data_chunk_recv(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct h2s *st = nghttp2_session_get_stream_user_data(ng, id);

	/* the connection's window reopens at once: the streams' bound
	 * what is held */
	nghttp2_session_consume_connection(ng, len);
	if (st == NULL || st->a == NULL || st->a_eof || st->req_end) {
		nghttp2_session_consume_stream(ng, id, len);
		return 0;
	}
	if (st->chunked)
		evbuffer_add_printf(bufferevent_get_output(st->a), "%zx\r\n", len);
	evbuffer_add(bufferevent_get_output(st->a), data, len);
	if (st->chunked)
		evbuffer_add(bufferevent_get_output(st->a), "\r\n", 2);
	st->unconsumed += len;
	stream_consume(st);
	return 0;
}

/*
 * A response complete (END_STREAM sent) before its request: RFC 9113
 * 8.1 lets the server ask the client to stop sending with RST_STREAM
 * NO_ERROR, and nghttp2 does not do it by itself. Without it a stream
 * answered early (431, 401 or 413 to a POST, a guest that answers
 * before it reads) stays half-closed for as long as the client likes,
 * holding one of its h2_streams and sending DATA that is thrown away.
 */
static int
on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	/* a reset the client's frames made (not an answer's end, not a
	 * guest's failure: NO_ERROR, CANCEL, INTERNAL_ERROR) counts as
	 * one it sent */
	if (f->hd.type == NGHTTP2_RST_STREAM &&
	    f->rst_stream.error_code != NGHTTP2_NO_ERROR &&
	    f->rst_stream.error_code != NGHTTP2_CANCEL &&
	    f->rst_stream.error_code != NGHTTP2_INTERNAL_ERROR)
		reset_counted(arg, ng);
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    nghttp2_session_get_stream_remote_close(ng, f->hd.stream_id) == 0)
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
		    NGHTTP2_NO_ERROR);
	return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct h2s *st = nghttp2_session_get_stream_user_data(ng, id);

	if (st != NULL)
		stream_free(st);
	return 0;
}

/* ---- the connection ---- */

static void
conn_free(struct h2c *h)
{
	struct px_sessenv *w = h->w;
	struct h2s *st;

	while ((st = TAILQ_FIRST(&h->streams)) != NULL)
		stream_free(st);
	nghttp2_session_del(h->ng);
	if (h->timer != NULL)
		event_free(h->timer);
	if (h->stall != NULL)
		event_free(h->stall);
	if (h->more != NULL)
		event_free(h->more);
	px_xport_free(h->xp);
	TAILQ_REMOVE(&conns, h, entry);
	free(h);
	px_sess_conns_dec(w);
}

/* Frames out while the output is below PX_HIWAT; frees the connection
 * once neither side has anything more to say. */
static void
h2_send(struct h2c *h)
{
	struct evbuffer *out = bufferevent_get_output(h->c);
	const uint8_t *p;
	ssize_t n;

	while (evbuffer_get_length(out) < PX_HIWAT) {
		if ((n = nghttp2_session_mem_send(h->ng, &p)) < 0) {
			log_warnx("h2 %s: %s", h->peername, nghttp2_strerror((int)n));
			conn_free(h);
			return;
		}
		if (n == 0)
			break;
		evbuffer_add(out, p, (size_t)n);
	}
	if (!nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng))
		h->closing = 1;
	if (h->closing && !h->lingering && evbuffer_get_length(out) == 0) {
		struct timeval tv;

		/* Flushed: the socket closes in a moment. Input read and
		 * dropped meanwhile, so that closing over unread bytes does
		 * not reset the connection before the GOAWAY is read. */
		h->lingering = 1;
		px_tv_ms(&tv, H2_LINGER_MS);
		evtimer_add(h->timer, &tv);
	}
}

static void
idle_arm(struct h2c *h)
{
	struct timeval tv;

	px_tv_ms(&tv, h->w->cfg.t_keepalive);
	evtimer_add(h->timer, &tv);
}

static void
idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2c *h = arg;

	if (h->lingering) {
		conn_free(h);
		return;
	}
	if (h->nstreams > 0) {	/* the streams' sessions keep their own time */
		idle_arm(h);
		return;
	}
	nghttp2_session_terminate_session(h->ng, NGHTTP2_NO_ERROR);
	h->closing = 1;
	h2_send(h);
}

/* A client that leaves a response waiting on its flow-control window
 * (a zero-window stall: it reads the socket, so the send timeout never
 * fires) for `timeout send` is closed, as a slow reader over HTTP/1.1. */
static void
stall_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2c *h = arg;
	struct h2s *st;
	int stalled = 0;
	uint64_t now;

	if (h->closing)
		return;
	TAILQ_FOREACH(st, &h->streams, entry)
		if (evbuffer_get_length(st->body) > 0 &&
		    (nghttp2_session_get_stream_remote_window_size(h->ng, st->id) <= 0 ||
		    nghttp2_session_get_remote_window_size(h->ng) <= 0)) {
			stalled = 1;
			break;
		}
	if (!stalled) {
		h->stall_t0 = 0;
		return;
	}
	now = px_now_ms();
	if (h->stall_t0 == 0)
		h->stall_t0 = now;
	else if (now - h->stall_t0 >= h->w->cfg.t_send) {
		log_warnx("h2 %s: stream %d: the client's window stayed shut for %u s: GOAWAY",
		    h->peername, st->id, h->w->cfg.t_send / 1000);
		nghttp2_session_terminate_session(h->ng, NGHTTP2_ENHANCE_YOUR_CALM);
		h->closing = 1;
		h2_send(h);
	}
}

static uint64_t
now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/*
 * Input goes to nghttp2 H2_RECV_SLICE bytes at a time, for at most
 * H2_TURN_US or H2_TURN_HDR decoded header bytes (on_header pauses
 * nghttp2) a turn of the event loop; the rest waits for the next turn
 * (h->more), so that one connection's costly frames (header blocks that
 * decode to megabytes, a burst of them before the GOAWAY) cannot hold
 * up every other client of the worker for longer than about that.
 */
static void
c_read(struct bufferevent *bev, void *arg)
{
	struct h2c *h = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_iovec v;
	uint64_t t0 = now_us();
	size_t len;
	ssize_t n;

	h->turn_hdr = 0;
	while (!h->closing && evbuffer_peek(in, -1, NULL, &v, 1) >= 1 &&
	    v.iov_len > 0) {
		if (now_us() - t0 >= H2_TURN_US || h->paused) {
			/* a timer, not event_active(): the sockets that
			 * became readable meanwhile are polled first */
			struct timeval zero = { 0, 0 };

			h->paused = 0;
			event_add(h->more, &zero);
			break;
		}
		len = v.iov_len < H2_RECV_SLICE ? v.iov_len : H2_RECV_SLICE;
		n = nghttp2_session_mem_recv(h->ng, v.iov_base, len);
		if (n < 0) {
			/* floods and bad frames: what nghttp2 queued
			 * (GOAWAY) goes out, then the connection closes */
			if (!h->closing)	/* else said already */
				log_warnx("h2 %s: %s", h->peername,
				    nghttp2_strerror((int)n));
			/* nghttp2 queues no GOAWAY of its own for these
			 * (a no-op when one is queued already) */
			nghttp2_session_terminate_session(h->ng,
			    n == NGHTTP2_ERR_FLOODED ||
			    n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ?
			    NGHTTP2_ENHANCE_YOUR_CALM :
			    n == NGHTTP2_ERR_BAD_CLIENT_MAGIC ?
			    NGHTTP2_PROTOCOL_ERROR : NGHTTP2_INTERNAL_ERROR);
			h->closing = 1;
			break;
		}
		evbuffer_drain(in, (size_t)n);
	}
	if (h->closing)
		evbuffer_drain(in, evbuffer_get_length(in));
	else
		idle_arm(h);
	px_xport_kick(h->xp);
	h2_send(h);
}

static void
more_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2c *h = arg;

	c_read(h->c, h);
}

static void
c_write(struct bufferevent *bev, void *arg)
{
	h2_send(arg);
}

static void
c_event(struct bufferevent *bev, short what, void *arg)
{
	conn_free(arg);	/* EOF, error, or a client that stopped reading */
}

void
px_h2_start(struct px_sessenv *w, struct px_xport *xp, int sni_woke)
{
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	struct h2c *h;
	struct timeval tv;
	char host[48], port[8];
	nghttp2_settings_entry iv[3];
	int rv;

	if ((h = calloc(1, sizeof(*h))) == NULL) {
		px_xport_free(xp);
		px_sess_conns_dec(w);
		return;
	}
	h->w = w;
	h->xp = xp;
	h->sni_woke = sni_woke;
	h->c = px_xport_bev(xp);
	TAILQ_INIT(&h->streams);
	TAILQ_INSERT_TAIL(&conns, h, entry);
	h->peerlen = sizeof(h->peer);
	if (getpeername(bufferevent_getfd(h->c), (struct sockaddr *)&h->peer,
	    &h->peerlen) != 0 || getnameinfo((struct sockaddr *)&h->peer,
	    h->peerlen, host, sizeof(host), port, sizeof(port),
	    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		conn_free(h);
		return;
	}
	snprintf(h->peername, sizeof(h->peername), "%s:%s", host, port);
	if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
		goto fail;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_outbound_ack(opt, 1000);	/* SETTINGS/PING floods */
	nghttp2_option_set_max_settings(opt, 32);
	nghttp2_option_set_max_continuations(opt, 8);	/* CONTINUATION floods */
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
	nghttp2_option_set_stream_reset_rate_limit(opt, w->cfg.h2_resets,
	    w->cfg.h2_resets * 1000 / H2_RESET_MS + 1);
	rv = nghttp2_session_server_new2(&h->ng, cb, h, opt);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	if (rv != 0)
		goto fail_nocb;
	iv[0] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
	    w->cfg.h2_streams };
	iv[1] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
	    w->cfg.h2_header_list };
	iv[2] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
	    NGHTTP2_INITIAL_WINDOW_SIZE };
	if (nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
	    nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0,
	    H2_CONN_WINDOW) != 0)
		goto fail_nocb;
	if ((h->timer = evtimer_new(w->base, idle_cb, h)) == NULL ||
	    (h->stall = event_new(w->base, -1, EV_PERSIST, stall_cb, h)) == NULL ||
	    (h->more = event_new(w->base, -1, 0, more_cb, h)) == NULL)
		goto fail_nocb;
	px_tv_ms(&tv, H2_STALL_TICK_MS);
	evtimer_add(h->stall, &tv);
	px_xport_set_owner(xp, NULL);
	/* an established connection now, whatever its handshake waited at */
	(void)px_bev_priority(h->c, PX_PRIO_NORMAL);
	bufferevent_setcb(h->c, c_read, c_write, c_event, h);
	bufferevent_setwatermark(h->c, EV_WRITE, PX_LOWAT, 0);
	px_tv_ms(&tv, w->cfg.t_send);	/* a client that stops reading */
	bufferevent_set_timeouts(h->c, NULL, &tv);
	bufferevent_enable(h->c, EV_READ | EV_WRITE);
	px_tv_ms(&tv, w->cfg.t_head);	/* its first request, like HTTP/1.1 */
	evtimer_add(h->timer, &tv);
	if (w->draining)	/* its handshake began before the drain */
		nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, 0,
		    NGHTTP2_NO_ERROR, NULL, 0);
	h2_send(h);	/* our SETTINGS */
	if (evbuffer_get_length(bufferevent_get_input(h->c)) > 0)
		c_read(h->c, h);	/* the preface came with the Finished */
	else
		px_xport_kick(xp);
	return;
fail:
	if (cb != NULL)
		nghttp2_session_callbacks_del(cb);
	if (opt != NULL)
		nghttp2_option_del(opt);
fail_nocb:
	log_warnx("h2 %s: cannot start the session", h->peername);
	conn_free(h);
}

void
px_h2_drain_all(struct px_sessenv *w, int hard)
{
	struct h2c *h, *t;

	for (h = TAILQ_FIRST(&conns); h != NULL; h = t) {
		t = TAILQ_NEXT(h, entry);
		if (h->w != w)
			continue;
		if (hard) {
			conn_free(h);
			continue;
		}
		nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE,
		    nghttp2_session_get_last_proc_stream_id(h->ng),
		    NGHTTP2_NO_ERROR, NULL, 0);
		h2_send(h);
	}
}
