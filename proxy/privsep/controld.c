/*
 * controld.c — the TCP control listener helper ("berthd: control"),
 * unprivileged and chrooted (proc.h), and its glue in the parent.
 *
 * The helper accepts on the socket the parent bound (control_listen),
 * applies the listener's budgets before anything reaches the parent (at
 * most PX_CONTROL_MAX_TCP connections, PX_CONTROL_MAX_PER_ADDR per
 * client address, a TLS handshake within PX_CONTROL_HANDSHAKE_SECS, an
 * idle timeout), terminates TLS with the certificate the parent passed
 * at start, parses HTTP/1.1 with the API server's request reader (reqhead.c:
 * head and body bounded as the control API bounds them) and the JSON
 * body, and sends the parent one
 * typed request per HTTP request: method, target, Authorization value,
 * the body re-serialised (compact JSON). Malformed input is answered by
 * the helper (400, 401 for a malformed Authorization, 413, 431) and never
 * reaches the parent.
 *
 * A streamed request (PUT .../files, POST .../exec?stream=1: a body that
 * is not JSON, of any size; px_control_streamed decides, as the API server
 * does) is sent as its head, then its body as the reader (http1.c's
 * framing) de-chunked it or counted it off its Content-Length, in
 * HM_CTL_BODY pieces, then
 * HM_CTL_BODY_END (helper.h). The helper never lets more than
 * HM_CTL_BODY_WINDOW of a body go unacknowledged: it stops feeding the
 * parser and reading the client until the parent acknowledges what
 * the API server took.
 *
 * The parent checks each field and puts the request, typed, to the
 * control API (px_control_feed_*, api/fed.c), which serves it as a TCP
 * connection's (bearer token, authentication deadline, per-address cap,
 * 100 Continue): no HTTP is parsed in the parent, the request was read
 * once, here in the helper. The API's answer comes out on one end of a
 * socketpair, whose bytes the parent relays back as they come (deferred
 * and streamed answers included), HM_CTL_WINDOW at most not yet taken
 * by the client: it stops reading the socketpair past that, and the API
 * server's own backpressure holds the guest. A streamed body is
 * acknowledged to the helper as the API's operation takes it. So the
 * parent's JSON parser reads only what the helper re-encoded, and
 * neither process buffers what a slow peer has not taken.
 *
 * In fleet mode the helper serves fleet_api_listen too, where other
 * hosts forward the creates that placement sent here (fleet_api.h): a
 * socket of its own, the same budgets (counted apart), TLS with this
 * host's fleet certificate requiring a client certificate of the fleet
 * CA (fleet_tls.c), the same reader. Its HM_CTL_OPEN says fleet and
 * carries the host ids the peer's certificate names; its requests carry
 * no Authorization (a peer is its certificate, never a token's bearer)
 * and are never streamed (the helper answers 404). The parent feeds
 * one only when a named host holds a live lease (px_fleet_peer_host)
 * and it is POST /v1/sandboxes, as that host's create
 * (px_control_adopt_fleet); else it has the helper answer 403 or 404
 * (HM_CTL_FAIL).
 *
 * The other way too: a create placement sent to another host
 * (fleet_api.c) is forwarded by the helper, so that no byte a peer sends
 * is parsed in the parent ("a fleet host may lie"). The parent sends
 * HM_CTL_FORWARD (the peer's fleet_api_listen, its host id, the JSON it
 * built, a tag); the helper connects without blocking, requires the
 * server's certificate (fleet CA) to name that host, posts the create,
 * reads the answer with fleet_answer.c (16 KiB of head, 1 MiB of body,
 * HM_CTL_FORWARD_SECS in all, HM_CTL_FORWARDS at once), checks the body
 * is JSON and sends HM_CTL_FORWARDED: the status and the body re-encoded
 * (compact), or status 0 and why. The parent checks that message, and
 * fails the forwards under way when the helper restarts or stays silent
 * past its deadline. In fleet mode the helper runs for this even with
 * neither listener, and takes the fleet's certificates again on SIGHUP.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control.h"
#include "fleet.h"
#include "fleet_answer.h"
#include "fleet_api.h"
#include "fleet_move.h"
#include "fleet_tls.h"
#include "fleet_view.h"
#include "helper.h"
#include "log.h"
#include "proc.h"
#include "reqhead.h"
#include "status.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <http_parser.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* ======================= the helper ======================= */

/* where a request stands (a streamed one goes through all three) */
enum { ST_NONE, ST_HEAD, ST_BODY };

struct cconn {
	TAILQ_ENTRY(cconn) entry;
	uint64_t	 id;
	struct bufferevent *bev;
	struct evbuffer_cb_entry *outcb;
	struct event	*deadline;	/* the handshake's */
	struct px_reqhead rh;		/* the request being read */
	int		 chan_full;	/* a body piece found the channel full */
	int		 opened;	/* the parent knows it */
	int		 closing;	/* free once the output is flushed */
	int		 in_done;	/* read nothing more: the parent closes */
	int		 stream;	/* ST_*: this request's body is relayed */
	int		 blocked;	/* reading paused: the body window is full */
	int		 eof_pending;	/* the client's EOF, behind what is read */
	int		 untimed;	/* no read timeout: a stream is under way */
	int		 fleet;		/* accepted on fleet_api_listen */
	uint32_t	 body_unacked;	/* HM_CTL_BODY bytes not acknowledged */
	uint32_t	 data_unacked;	/* HM_CTL_DATA bytes not acknowledged */
	uint32_t	 data_written;	/* of them, written to the client */
	char		 addr[INET6_ADDRSTRLEN];
};

/* a create forwarded to a fleet peer (HM_CTL_FORWARD) */
struct fwd {
	TAILQ_ENTRY(fwd) entry;
	uint64_t	 tag;
	struct bufferevent *bev;
	struct event	*deadline;	/* HM_CTL_FORWARD_SECS in all */
	struct px_fleet_answer ans;
	char		 host[33];
};

static struct {
	struct event_base *base;
	struct px_chan	*ch;
	struct evconnlistener *lis;
	struct px_tls	*tls;
	struct evconnlistener *fleet_lis;
	struct ssl_ctx_st *fleet_ctx;	/* the fleet CA's, client certificate
					 * required (fleet_tls.c) */
	struct ssl_ctx_st *fleet_client;	/* the forwards' (HM_CTL_FORWARD) */
	TAILQ_HEAD(, fwd) fwds;
	int		 nfwds;
	TAILQ_HEAD(, cconn) conns;
	int		 nconns;
	uint64_t	 next_id;
} C;

static const struct timeval c_idle = { PX_CONTROL_IDLE_SECS, 0 };
static const struct px_reqhead_hooks c_hooks;
static void c_event(struct bufferevent *, short, void *);

static void
refused(int reason)
{
	struct hm_ctl_refused m = { reason };

	px_chan_send(C.ch, HM_CTL_REFUSED, &m, sizeof(m), NULL, 0);
}

static void
cconn_free(struct cconn *c)
{
	TAILQ_REMOVE(&C.conns, c, entry);
	C.nconns--;
	if (c->opened) {
		struct hm_ctl_id m = { c->id };

		px_chan_send(C.ch, HM_CTL_CLOSE, &m, sizeof(m), NULL, 0);
	}
	if (c->deadline != NULL)
		event_free(c->deadline);
	if (c->outcb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(c->bev),
		    c->outcb);
	bufferevent_free(c->bev);
	px_reqhead_free(&c->rh);
	free(c);
}

static struct cconn *
cconn_find(uint64_t id)
{
	struct cconn *c;

	TAILQ_FOREACH(c, &C.conns, entry)
		if (c->id == id)
			return c;
	return NULL;
}

/* Answers what the helper itself refuses, in the control API's error
 * form, and closes after it. */
static void
c_fail(struct cconn *c, int status, const char *msg)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	json_t *e = json_pack("{s:{s:i, s:s, s:s}}", "error", "status", status,
	    "code", px_control_error_code(status), "message", msg);
	char *text = e ? json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	size_t n = text ? strlen(text) + 1 : 0;

	json_decref(e);
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nCache-Control: no-store\r\n%s"
	    "Connection: close\r\n\r\n%s\n", status, px_status_text(status), n,
	    status == 401 ? "WWW-Authenticate: Bearer realm=\"berth\"\r\n" : "",
	    text ? text : "");
	free(text);
	c->closing = 1;
	bufferevent_disable(c->bev, EV_READ);
}

/* Reads nothing more from the client; the parent answers what it has
 * and closes (HM_CTL_CLOSE), then this connection goes. */
static void
c_stop_reading(struct cconn *c)
{
	c->in_done = 1;
	bufferevent_disable(c->bev, EV_READ);
}

/* the target as the control API reads it: origin-form, printable */
static int
target_ok(const char *t, size_t len)
{
	size_t i;

	if (len == 0 || len >= HM_CTL_TARGET_MAX || t[0] != '/')
		return 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return 0;
	return 1;
}

/* Sends the request (a streamed one: its head); -1 after refusing it. */
static int
c_serve(struct cconn *c)
{
	struct hm_ctl_request *m;
	size_t ulen = evbuffer_get_length(c->rh.url), blen = 0;
	const char *url = (const char *)evbuffer_pullup(c->rh.url, -1);
	char *body = NULL, msg[256];
	int method = c->rh.method;

	switch (method) {
	case HTTP_GET: case HTTP_HEAD: case HTTP_POST: case HTTP_PUT:
	case HTTP_PATCH: case HTTP_DELETE:
		break;
	default:
		c_fail(c, 400, "method not used by the control API");
		return -1;
	}
	if (!target_ok(url, ulen)) {
		c_fail(c, 400, "request target: an absolute path of printable "
		    "characters, shorter than 2048, is required");
		return -1;
	}
	if (c->rh.authz_bad && !c->fleet) {
		c_fail(c, 401, "malformed Authorization header");
		return -1;
	}
	if (c->stream == ST_NONE && evbuffer_get_length(c->rh.body) > 0) {
		json_error_t jerr;
		json_t *doc = json_loadb((const char *)evbuffer_pullup(c->rh.body,
		    -1), evbuffer_get_length(c->rh.body), JSON_REJECT_DUPLICATES,
		    &jerr);

		if (doc == NULL) {
			snprintf(msg, sizeof(msg), "invalid JSON at line %d, "
			    "column %d: %s", jerr.line, jerr.column, jerr.text);
			c_fail(c, 400, msg);
			return -1;
		}
		body = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER |
		    JSON_ENCODE_ANY);
		json_decref(doc);
		if (body == NULL || (blen = strlen(body)) > PX_CONTROL_MAX_BODY) {
			free(body);
			c_fail(c, 413, "request body larger than 64 KB");
			return -1;
		}
	}
	if ((m = calloc(1, sizeof(*m) + blen)) == NULL) {
		free(body);
		c_fail(c, 400, "out of memory");
		return -1;
	}
	m->id = c->id;
	m->method = method;
	m->close = !c->rh.keepalive;	/* (an Upgrade too: never tunneled) */
	memcpy(m->target, url, ulen);
	/* a fleet peer is who its certificate says, never a token's
	 * bearer: its Authorization goes nowhere */
	if (!c->fleet)
		memcpy(m->authz, c->rh.authz, c->rh.authzlen);
	m->bodylen = (uint32_t)blen;
	m->stream = c->stream != ST_NONE;
	m->expect = m->stream && c->rh.expect;
	if (blen > 0)
		memcpy((char *)(m + 1), body, blen);
	free(body);
	px_chan_send(C.ch, HM_CTL_REQUEST, m, sizeof(*m) + blen, NULL, 0);
	/* the parent answers with Connection: close, then closes; a
	 * streamed request's body is still read, up to its end */
	if (m->close && !m->stream)
		c_stop_reading(c);
	free(m);
	return 0;
}

/* A streamed request's body ended, whole or broken (its framing). */
static void
c_body_end(struct cconn *c, int broken)
{
	struct hm_ctl_body_end m;

	memset(&m, 0, sizeof(m));
	m.id = c->id;
	m.broken = broken;
	px_chan_send(C.ch, HM_CTL_BODY_END, &m, sizeof(m), NULL, 0);
	c->stream = ST_NONE;
	if (broken || !c->rh.keepalive)
		c_stop_reading(c);
}

static void
c_reset(struct cconn *c)
{
	px_reqhead_reset(&c->rh);
	c->stream = ST_NONE;
}

/* ---- the reader's loop (reqhead.h: px_reqhead_run) ---- */

static size_t
c_room(void *arg)
{
	struct cconn *c = arg;

	if (c->closing || c->in_done)
		return 0;
	if (c->stream != ST_BODY)
		return SIZE_MAX;
	/* no more body than the window lets through: the reader is given
	 * no more than that */
	if (c->body_unacked >= HM_CTL_BODY_WINDOW) {
		c->blocked = 1;
		bufferevent_disable(c->bev, EV_READ);
		return 0;
	}
	return HM_CTL_BODY_WINDOW - c->body_unacked;
}

static int
c_gone(void *arg)
{
	struct cconn *c = arg;

	if (!c->chan_full)
		return 0;
	cconn_free(c);
	return 1;
}

/* a streamed request's head: to the parent now, the body after it as
 * it comes; the command may run long with nothing said: no read
 * timeout */
static int
c_head(void *arg)
{
	struct cconn *c = arg;

	/* a fleet peer creates sandboxes and moves them here: the one
	 * body it streams is a moved sandbox's file */
	if (c->fleet && !px_fleet_move_target((const char *)evbuffer_pullup(
	    c->rh.url, -1), evbuffer_get_length(c->rh.url))) {
		c_fail(c, 404, "a fleet peer may only POST /v1/sandboxes or "
		    "move a sandbox here");
		return -1;
	}
	if (c_serve(c) < 0)
		return -1;
	c->stream = ST_BODY;
	c->untimed = 1;
	bufferevent_set_timeouts(c->bev, NULL, &c_idle);
	return 0;
}

/* a whole request, or a streamed one's end (no stream_end hook) */
static int
c_complete(void *arg)
{
	struct cconn *c = arg;

	if (c->stream == ST_BODY)
		c_body_end(c, 0);
	else if (c_serve(c) < 0)
		return -1;
	c_reset(c);
	return 0;
}

static void
c_refused(void *arg)
{
	struct cconn *c = arg;
	char msg[160];
	int status;

	if (c->stream == ST_BODY) {
		/* the body broke its framing: the parent's request fails as
		 * the control API fails it (400, or cut once its answer
		 * began) and closes */
		c_body_end(c, 1);
		return;
	}
	status = px_reqhead_error(&c->rh, msg, sizeof(msg));
	c_fail(c, status, msg);
}

static const struct px_reqhead_loop c_loop = {
	.room = c_room, .gone = c_gone, .head = c_head,
	.complete = c_complete, .refused = c_refused,
};

static void
c_read(struct bufferevent *bev, void *arg)
{
	struct cconn *c = arg;

	if (px_reqhead_run(&c->rh, bufferevent_get_input(bev), &c_loop, c) < 0)
		return;
	if (c->eof_pending && !c->blocked) {
		c->eof_pending = 0;
		c_event(bev, BEV_EVENT_READING | BEV_EVENT_EOF, c);
	}
}

static void
c_write(struct bufferevent *bev, void *arg)
{
	struct cconn *c = arg;

	if (c->closing)
		cconn_free(c);
}

/* Answer bytes left for the client: acknowledged to the parent, which
 * then relays more (HM_CTL_WINDOW at most in flight). */
static void
c_out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	struct cconn *c = arg;
	struct hm_ctl_ack m;

	if (info->n_deleted == 0 || c->data_unacked == 0)
		return;
	c->data_written += info->n_deleted;
	if (c->data_written > c->data_unacked)
		c->data_written = c->data_unacked;	/* the helper's own */
	if (c->data_written < HM_CTL_WINDOW / 4 && evbuffer_get_length(b) > 0)
		return;
	memset(&m, 0, sizeof(m));
	m.id = c->id;
	m.bytes = c->data_written;
	if (px_chan_send(C.ch, HM_CTL_DATA_ACK, &m, sizeof(m), NULL, 0) == 0) {
		c->data_unacked -= c->data_written;
		c->data_written = 0;
	}
}

static void
c_event(struct bufferevent *bev, short what, void *arg)
{
	struct cconn *c = arg;

	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && c->blocked &&
	    evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
		c->eof_pending = 1;	/* seen once the rest went (c_read) */
		return;
	}
	if (what & BEV_EVENT_CONNECTED) {
		struct hm_ctl_open m;

		/* handshake done: the parent's connection (and its
		 * authentication deadline) starts now */
		evtimer_del(c->deadline);
		memset(&m, 0, sizeof(m));
		m.id = c->id;
		snprintf(m.addr, sizeof(m.addr), "%s", c->addr);
		if (c->fleet) {
			m.fleet = 1;
			m.nnames = (uint32_t)px_fleet_tls_peer_names(
			    bufferevent_openssl_get_ssl(bev), m.names,
			    HM_CTL_FLEET_NAMES);
		}
		if (px_chan_send(C.ch, HM_CTL_OPEN, &m, sizeof(m), NULL, 0) == 0)
			c->opened = 1;
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
	    !c->closing && !c->in_done && px_reqhead_started(&c->rh)) {
		c_fail(c, 408, "request not received in time");
		bufferevent_enable(bev, EV_WRITE);
		return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
	    c->opened && !c->closing && c->stream == ST_NONE) {
		struct hm_ctl_id m = { c->id };

		/* a half close: the control API sees it as it would on
		 * its own socket (the answers under way, a streamed one
		 * included, still go out) and closes */
		c_stop_reading(c);
		if (px_chan_send(C.ch, HM_CTL_SHUTDOWN, &m, sizeof(m), NULL,
		    0) == 0)
			return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		c->closing = 1;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	cconn_free(c);
}

/* ---- the request reader's hooks (reqhead.h) ---- */

static void
c_on_begin(void *arg)
{
	struct cconn *c = arg;

	c->stream = ST_NONE;
	if (c->untimed) {	/* a new request: its head is timed again */
		c->untimed = 0;
		bufferevent_set_timeouts(c->bev, &c_idle, &c_idle);
	}
}

/* a streamed request's head: to the parent first (c_read) */
static void
c_on_stream_head(void *arg)
{
	struct cconn *c = arg;

	c->stream = ST_HEAD;
}

static int
c_on_stream_body(void *arg, const char *at, size_t len)
{
	struct cconn *c = arg;
	unsigned char buf[sizeof(struct hm_ctl_id) + HM_CTL_CHUNK];
	struct hm_ctl_id m = { c->id };
	size_t n;

	/* c_read fed the parser no more than the window holds */
	for (; len > 0; at += n, len -= n) {
		n = len > HM_CTL_CHUNK ? HM_CTL_CHUNK : len;
		memcpy(buf, &m, sizeof(m));
		memcpy(buf + sizeof(m), at, n);
		if (px_chan_send(C.ch, HM_CTL_BODY, buf, sizeof(m) + n,
		    NULL, 0) != 0) {
			c->chan_full = 1;
			return -1;
		}
		c->body_unacked += (uint32_t)n;
	}
	return 0;
}

/* (its end is reported as complete, like any request's: c_read) */
static const struct px_reqhead_hooks c_hooks = {
	.begin = c_on_begin,
	.stream_head = c_on_stream_head,
	.stream_body = c_on_stream_body,
};

static void
c_deadline(evutil_socket_t fd, short what, void *arg)
{
	refused(PX_CONTROL_REFUSED_DEADLINE);
	cconn_free(arg);
}

static void
c_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct timeval hs = { PX_CONTROL_HANDSHAKE_SECS, 0 };
	char addr[INET6_ADDRSTRLEN] = "";
	struct cconn *c, *o;
	SSL *ssl;
	int n = 0, nkind = 0, fleet = arg != NULL, rc;

	if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr,
		    addr, sizeof(addr));
	else if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr,
		    addr, sizeof(addr));
	/* each listener has the budgets of its own */
	TAILQ_FOREACH(o, &C.conns, entry)
		if (o->fleet == fleet) {
			nkind++;
			n += strcmp(o->addr, addr) == 0;
		}
	if (nkind >= PX_CONTROL_MAX_TCP) {
		refused(PX_CONTROL_REFUSED_BUDGET);
		evutil_closesocket(fd);
		return;
	}
	if (n >= PX_CONTROL_MAX_PER_ADDR) {
		refused(PX_CONTROL_REFUSED_ADDRESS);
		evutil_closesocket(fd);
		return;
	}
	if ((fleet ? C.fleet_ctx == NULL : C.tls == NULL) ||
	    (c = calloc(1, sizeof(*c))) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	c->id = ++C.next_id;
	c->fleet = fleet;
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	rc = px_reqhead_init(&c->rh, &c_hooks, c, 1);
	c->deadline = evtimer_new(C.base, c_deadline, c);
	ssl = SSL_new(fleet ? C.fleet_ctx : px_tls_default_ctx(C.tls));
	c->bev = ssl ? bufferevent_openssl_socket_new(C.base, fd, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE) : NULL;
	if (c->bev != NULL)
		c->outcb = evbuffer_add_cb(bufferevent_get_output(c->bev),
		    c_out_cb, c);
	if (rc == -1 || c->deadline == NULL || c->bev == NULL ||
	    c->outcb == NULL) {
		if (c->bev == NULL) {
			if (ssl != NULL)
				SSL_free(ssl);
			evutil_closesocket(fd);
		} else
			bufferevent_free(c->bev);
		px_reqhead_free(&c->rh);
		if (c->deadline)
			event_free(c->deadline);
		free(c);
		return;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	TAILQ_INSERT_TAIL(&C.conns, c, entry);
	C.nconns++;
	evtimer_add(c->deadline, &hs);
	bufferevent_setcb(c->bev, c_read, c_write, c_event, c);
	bufferevent_set_timeouts(c->bev, &c_idle, &c_idle);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void
c_accept_error(struct evconnlistener *l, void *arg)
{
	log_warn("accept");
}

static void
c_config(const unsigned char *p, size_t len, int fd)
{
	struct hm_ctl_config h;
	struct px_tls_cert tc;
	unsigned char keys[PX_TICKET_KEYS][PX_TICKET_KEY_LEN];
	char *cert, *key, err[256];

	memcpy(&h, p, sizeof(h));
	if (C.tls != NULL || (size_t)h.certlen + h.keylen + sizeof(h) != len)
		fatalx("bad configuration message");
	if ((cert = strndup((const char *)p + sizeof(h), h.certlen)) == NULL ||
	    (key = strndup((const char *)p + sizeof(h) + h.certlen, h.keylen)) == NULL)
		fatalx("out of memory");
	tc.cert_pem = cert;
	tc.cert_len = strlen(cert);
	tc.key_pem = key;
	tc.key_len = strlen(key);
	/* tickets under keys of its own: resumption within this helper */
	if (RAND_bytes(&keys[0][0], sizeof(keys)) != 1)
		fatalx("RAND_bytes");
	px_tls_set_ticket_keys((const unsigned char (*)[PX_TICKET_KEY_LEN])keys,
	    PX_TICKET_KEYS);
	if ((C.tls = px_tls_new(&tc, 1, err, sizeof(err))) == NULL)
		fatalx("certificate: %s", err);
	memset(key, 0, strlen(key));
	free(key);
	free(cert);
	evutil_make_socket_nonblocking(fd);
	C.lis = evconnlistener_new(C.base, c_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (C.lis == NULL)
		fatalx("listener");
	evconnlistener_set_error_cb(C.lis, c_accept_error);
	log_debug("serving the control API over TLS");
}

/* The fleet's certificates: the forwards' client context, and with a
 * socket fleet_api_listen's (the fleet CA's context, a client
 * certificate of that CA required at the handshake) */
static void
c_fleet_config(const unsigned char *p, size_t len, int fd)
{
	struct hm_ctl_fleet_config h;
	char *ca, *cert, *key, err[256];

	struct ssl_ctx_st *client, *server = NULL;
	int reload = C.fleet_client != NULL;

	memcpy(&h, p, sizeof(h));
	/* again (SIGHUP): new certificates, the same socket */
	if ((reload && fd >= 0) || (size_t)h.calen + h.certlen + h.keylen +
	    sizeof(h) != len)
		fatalx("bad fleet configuration message");
	p += sizeof(h);
	if ((ca = strndup((const char *)p, h.calen)) == NULL ||
	    (cert = strndup((const char *)p + h.calen, h.certlen)) == NULL ||
	    (key = strndup((const char *)p + h.calen + h.certlen, h.keylen)) == NULL)
		fatalx("out of memory");
	if ((client = px_fleet_tls_ctx(ca, cert, key, 0, err,
	    sizeof(err))) == NULL || ((fd >= 0 || C.fleet_ctx != NULL) &&
	    (server = px_fleet_tls_ctx(ca, cert, key, 1, err, sizeof(err))) ==
	    NULL))
		fatalx("fleet certificate: %s", err);
	memset(key, 0, strlen(key));
	free(key);
	free(cert);
	free(ca);
	/* the connections under way hold references to the old ones */
	if (C.fleet_client != NULL)
		px_fleet_tls_ctx_free(C.fleet_client);
	C.fleet_client = client;
	if (server != NULL) {
		if (C.fleet_ctx != NULL)
			px_fleet_tls_ctx_free(C.fleet_ctx);
		C.fleet_ctx = server;
	}
	if (reload) {
		log_debug("fleet certificates reloaded");
		return;
	}
	if (fd < 0)
		return;
	evutil_make_socket_nonblocking(fd);
	C.fleet_lis = evconnlistener_new(C.base, c_accept, (void *)1,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (C.fleet_lis == NULL)
		fatalx("fleet listener");
	evconnlistener_set_error_cb(C.fleet_lis, c_accept_error);
	log_debug("serving creates placed by fleet peers (mutual TLS)");
}

/* ---- creates forwarded to fleet peers (HM_CTL_FORWARD) ----
 *
 * The parent chose the host; the bytes of its answer are read here,
 * under fleet_answer.h's bounds, and only its status and re-encoded
 * JSON go back: a peer holding a fleet certificate may still lie. */

/* printable ASCII, as the parent requires of err */
static void
printable_copy(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < size && src[i] != '\0'; i++)
		dst[i] = (unsigned char)src[i] < 0x20 ||
		    (unsigned char)src[i] >= 0x7f ? '?' : src[i];
	dst[i] = '\0';
}

static void
fwd_answer(uint64_t tag, int status, const char *body, size_t len,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
fwd_answer(uint64_t tag, int status, const char *body, size_t len,
    const char *fmt, ...)
{
	struct hm_ctl_forwarded *m;
	char why[sizeof(m->err)];
	va_list ap;

	if ((m = calloc(1, sizeof(*m) + len)) == NULL) {
		status = 0;
		len = 0;
		fmt = "out of memory in the control helper";
		if ((m = calloc(1, sizeof(*m))) == NULL)
			fatalx("out of memory");
	}
	m->tag = tag;
	m->status = status;
	if (status == 0 && fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		printable_copy(m->err, sizeof(m->err), why);
	}
	m->bodylen = (uint32_t)len;
	if (len > 0)
		memcpy(m + 1, body, len);
	px_chan_send(C.ch, HM_CTL_FORWARDED, m, sizeof(*m) + len, NULL, 0);
	free(m);
}

static void
fwd_free(struct fwd *f)
{
	TAILQ_REMOVE(&C.fwds, f, entry);
	C.nfwds--;
	if (f->deadline != NULL)
		event_free(f->deadline);
	if (f->bev != NULL)
		bufferevent_free(f->bev);
	px_fleet_answer_free(&f->ans);
	free(f);
}

/* The whole answer came: its status and compact JSON to the parent. */
static void
fwd_done(struct fwd *f)
{
	char *json, err[200];
	size_t len;

	if (px_fleet_answer_json(&f->ans, PX_PROC_MSG_MAX -
	    sizeof(struct hm_ctl_forwarded), &json, &len, err, sizeof(err)) != 0)
		fwd_answer(f->tag, 0, NULL, 0, "HTTP %d with %s", f->ans.status,
		    err);
	else
		fwd_answer(f->tag, f->ans.status, json, len, NULL);
	free(json);
	fwd_free(f);
}

static void
fwd_read(struct bufferevent *bev, void *arg)
{
	struct fwd *f = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);
	ssize_t used;

	/* a head is parsed whole, from its start: the bytes not consumed
	 * stay (PX_FLEET_ANSWER_HEAD_MAX bounds them); a body is consumed
	 * as it comes */
	used = px_fleet_answer_feed(&f->ans, (const char *)evbuffer_pullup(in,
	    -1), n);
	if (used < 0) {
		fwd_answer(f->tag, 0, NULL, 0, "a malformed answer (%s)",
		    f->ans.why);
		fwd_free(f);
		return;
	}
	evbuffer_drain(in, (size_t)used);
	if (px_fleet_answer_done(&f->ans))
		fwd_done(f);
}

static void
fwd_event(struct bufferevent *bev, short what, void *arg)
{
	struct fwd *f = arg;
	unsigned long e;

	if (what & BEV_EVENT_CONNECTED)
		return;		/* the request goes out now */
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		if (px_fleet_answer_eof(&f->ans) == 0)
			fwd_done(f);
		else {
			fwd_answer(f->tag, 0, NULL, 0, "%s", f->ans.why);
			fwd_free(f);
		}
		return;
	}
	/* (errno is not this connection's by now: callbacks are deferred) */
	if ((e = bufferevent_get_openssl_error(bev)) != 0)
		fwd_answer(f->tag, 0, NULL, 0, "TLS: %s", ERR_reason_error_string(e) ?
		    ERR_reason_error_string(e) : "handshake failed");
	else
		fwd_answer(f->tag, 0, NULL, 0, "connection refused or failed");
	fwd_free(f);
}

static void
fwd_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct fwd *f = arg;

	fwd_answer(f->tag, 0, NULL, 0, "no answer within %d s",
	    HM_CTL_FORWARD_SECS);
	fwd_free(f);
}

/* a host id as fleet_host says one (conf.c), lower-case, terminated
 * within its field */
static int
host_id(const char *s, size_t max)
{
	return strnlen(s, max) < max && px_fleet_valid_host(s);
}

static void
c_forward(const unsigned char *p, size_t len)
{
	struct timeval tv = { HM_CTL_FORWARD_SECS, 0 };
	struct hm_ctl_forward m;
	struct sockaddr_storage ss;
	int sslen = (int)sizeof(ss);
	struct evbuffer *out;
	struct fwd *f;
	SSL *ssl;

	memcpy(&m, p, sizeof(m));
	if (len != sizeof(m) + m.bodylen || m.bodylen == 0 ||
	    m.bodylen > HM_CTL_FORWARD_BODY_MAX ||
	    memchr(m.addr, '\0', sizeof(m.addr)) == NULL ||
	    !host_id(m.host, sizeof(m.host)) || !host_id(m.self, sizeof(m.self)))
		fatalx("a malformed forward");
	if (C.fleet_client == NULL) {
		fwd_answer(m.tag, 0, NULL, 0, "the control helper has no fleet "
		    "certificate");
		return;
	}
	if (C.nfwds >= HM_CTL_FORWARDS) {
		fwd_answer(m.tag, 0, NULL, 0, "%d forwards under way already",
		    HM_CTL_FORWARDS);
		return;
	}
	memset(&ss, 0, sizeof(ss));
	if (evutil_parse_sockaddr_port(m.addr, (struct sockaddr *)&ss,
	    &sslen) != 0 || (ss.ss_family != AF_INET && ss.ss_family !=
	    AF_INET6)) {
		fwd_answer(m.tag, 0, NULL, 0, "a fleet_api_listen that is not "
		    "ADDRESS:PORT");
		return;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		fwd_answer(m.tag, 0, NULL, 0, "out of memory");
		return;
	}
	f->tag = m.tag;
	snprintf(f->host, sizeof(f->host), "%s", m.host);
	px_fleet_answer_init(&f->ans);
	TAILQ_INSERT_TAIL(&C.fwds, f, entry);
	C.nfwds++;
	/* the server's certificate must name the host placement chose */
	if ((ssl = SSL_new(C.fleet_client)) != NULL &&
	    SSL_set1_host(ssl, m.host) != 1) {
		SSL_free(ssl);
		ssl = NULL;
	}
	if (ssl != NULL)
		X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(ssl),
		    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (ssl == NULL || (f->bev = bufferevent_openssl_socket_new(C.base, -1,
	    ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE |
	    BEV_OPT_DEFER_CALLBACKS)) == NULL) {
		if (ssl != NULL)
			SSL_free(ssl);
		fwd_answer(m.tag, 0, NULL, 0, "out of memory");
		fwd_free(f);
		return;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(f->bev, 1);
	if ((f->deadline = evtimer_new(C.base, fwd_deadline, f)) == NULL) {
		fwd_answer(m.tag, 0, NULL, 0, "out of memory");
		fwd_free(f);
		return;
	}
	evtimer_add(f->deadline, &tv);
	bufferevent_setcb(f->bev, fwd_read, NULL, fwd_event, f);
	/* the request waits in the output until the handshake is done */
	out = bufferevent_get_output(f->bev);
	evbuffer_add_printf(out, "POST /v1/sandboxes HTTP/1.1\r\nHost: %s\r\n"
	    "Content-Type: application/json\r\nBerth-Fleet-Placed: %s\r\n"
	    "Content-Length: %u\r\nConnection: close\r\n\r\n", m.host, m.self,
	    m.bodylen);
	evbuffer_add(out, p + sizeof(m), m.bodylen);
	bufferevent_enable(f->bev, EV_READ | EV_WRITE);
	/* non-blocking: refused or unreachable comes as an event; one
	 * that failed at once may have queued one too, which the free
	 * cancels (deferred callbacks: none ran yet) */
	if (bufferevent_socket_connect(f->bev, (struct sockaddr *)&ss, sslen) != 0) {
		fwd_answer(m.tag, 0, NULL, 0, "connection refused or failed");
		fwd_free(f);
	}
}

static void
c_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct hm_ctl_id m;
	struct cconn *c;

	switch (type) {
	case HM_CTL_CONFIG:
		if (len < sizeof(struct hm_ctl_config) || nfds != 1)
			break;
		c_config(p, len, fds[0]);
		fds[0] = -1;
		return;
	case HM_CTL_FLEET_CONFIG:
		if (len < sizeof(struct hm_ctl_fleet_config) || nfds > 1)
			break;
		c_fleet_config(p, len, nfds ? fds[0] : -1);
		if (nfds)
			fds[0] = -1;
		return;
	case HM_CTL_FORWARD:
		if (len <= sizeof(struct hm_ctl_forward) || nfds != 0)
			break;
		c_forward(p, len);
		return;
	case HM_CTL_FAIL: {
		struct hm_ctl_fail f;

		if (len != sizeof(f) || nfds != 0)
			break;
		memcpy(&f, p, sizeof(f));
		if (f.status < 400 || f.status > 599 ||
		    memchr(f.msg, '\0', sizeof(f.msg)) == NULL)
			break;
		if ((c = cconn_find(f.id)) == NULL || c->closing)
			return;		/* gone meanwhile */
		c_fail(c, f.status, f.msg);
		return;
	}
	case HM_CTL_BODY_ACK: {
		struct hm_ctl_ack a;

		if (len != sizeof(a) || nfds != 0)
			break;
		memcpy(&a, p, sizeof(a));
		if ((c = cconn_find(a.id)) == NULL)
			return;		/* gone meanwhile */
		if (a.bytes > c->body_unacked)
			fatalx("the parent acknowledged body bytes never sent");
		c->body_unacked -= a.bytes;
		if (c->blocked && c->body_unacked < HM_CTL_BODY_WINDOW) {
			c->blocked = 0;
			if (!c->closing && !c->in_done) {
				if (!c->eof_pending)
					bufferevent_enable(c->bev, EV_READ);
				c_read(c->bev, c);	/* what is buffered */
			}
		}
		return;
	}
	case HM_CTL_DATA:
	case HM_CTL_CLOSE:
		if (len < sizeof(m) || nfds != 0 ||
		    (type == HM_CTL_CLOSE && len != sizeof(m)) ||
		    (type == HM_CTL_DATA && (len == sizeof(m) ||
		    len - sizeof(m) > HM_CTL_CHUNK)))
			break;
		memcpy(&m, p, sizeof(m));
		if ((c = cconn_find(m.id)) == NULL)
			return;		/* gone meanwhile */
		if (type == HM_CTL_DATA) {
			if (c->data_unacked + (len - sizeof(m)) > HM_CTL_WINDOW)
				fatalx("the parent overran the answer window");
			c->data_unacked += (uint32_t)(len - sizeof(m));
			bufferevent_write(c->bev, (const char *)p + sizeof(m),
			    len - sizeof(m));
			return;
		}
		/* the parent closed it: say what is queued, then close */
		c->opened = 0;
		c->closing = 1;
		bufferevent_disable(c->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
			cconn_free(c);
		return;
	}
	fatalx("unexpected message %u (%zu bytes) from the parent", type, len);
}

static void
c_close(struct px_chan *ch, int corrupt, void *arg)
{
	exit(corrupt ? 1 : 0);
}

int
px_controld_main(int fd)
{
	OPENSSL_init_ssl(0, NULL);
	TAILQ_INIT(&C.conns);
	TAILQ_INIT(&C.fwds);
	if ((C.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((C.ch = px_chan_new(C.base, fd, c_msg, c_close, NULL)) == NULL)
		fatalx("channel");
	event_base_dispatch(C.base);
	return 0;
}

/* ======================= the parent's side ======================= */

struct pconn {
	TAILQ_ENTRY(pconn) entry;
	uint64_t	 id;
	uint64_t	 api;		/* the API's connection (api/fed.c) */
	struct bufferevent *bev;	/* the API's answers come out here */
	int		 in_body;	/* a streamed request's body is coming */
	int		 eof;		/* the API server closed: relay what is left */
	int		 shut;		/* the client half closed */
	uint32_t	 body_unacked;	/* HM_CTL_BODY bytes not acknowledged */
	uint32_t	 body_taken;	/* of them, taken by the API server */
	uint32_t	 data_unacked;	/* HM_CTL_DATA bytes not acknowledged */
	int		 fleet;		/* a fleet peer's (fleet_api_listen) */
	char		 peer[33];	/* its host id, "": no live lease */
	uint32_t	 nnames;
	char		 names[HM_CTL_FLEET_NAMES][33];	/* its certificate's */
};

/* a create forwarded through the helper, waiting for its answer */
struct pfwd {
	TAILQ_ENTRY(pfwd) entry;
	uint64_t	 tag;
	px_fleet_api_done_fn *done;
	void		*arg;
	struct event	*guard;		/* should the helper never answer */
};

static struct {
	struct event_base *base;
	struct px_control *ctl;
	struct px_proc	*proc;
	int		 fd;		/* the listening socket, -1: none */
	char		*cert, *key;	/* PEM */
	int		 fleet_fd;	/* fleet_api_listen's, -1: none */
	char		*fleet_ca, *fleet_cert, *fleet_key;	/* PEM */
	TAILQ_HEAD(, pconn) conns;
	unsigned	 n, nfleet;
	TAILQ_HEAD(, pfwd) fwds;
	uint64_t	 next_tag;
} PC;

static void
pconn_free(struct pconn *pc, int tell)
{
	if (tell) {
		struct hm_ctl_id m = { pc->id };

		px_proc_send(PC.proc, HM_CTL_CLOSE, &m, sizeof(m), NULL, 0);
	}
	TAILQ_REMOVE(&PC.conns, pc, entry);
	if (pc->fleet)
		PC.nfleet--;
	else
		PC.n--;
	if (pc->api != 0)
		px_control_feed_gone(PC.ctl, pc->api);
	if (pc->bev != NULL)	/* the API server sees EOF and lets go */
		bufferevent_free(pc->bev);
	free(pc);
}

static struct pconn *
pconn_find(uint64_t id)
{
	struct pconn *pc;

	TAILQ_FOREACH(pc, &PC.conns, entry)
		if (pc->id == id)
			return pc;
	return NULL;
}

/* The control API's answer, relayed as it comes while the helper has
 * room for it (HM_CTL_WINDOW not yet written to its client): else this
 * end stops reading, the socketpair fills, and the API server's own
 * backpressure (a streamed answer stops taking the guest's output)
 * does the rest. Once the API server closed, the close follows what is
 * left. 1 when pc is gone. */
static int
pc_relay(struct pconn *pc)
{
	struct evbuffer *in = bufferevent_get_input(pc->bev);
	unsigned char buf[sizeof(struct hm_ctl_id) + HM_CTL_CHUNK];
	struct hm_ctl_id m = { pc->id };
	size_t n;

	while ((n = evbuffer_get_length(in)) > 0 &&
	    pc->data_unacked < HM_CTL_WINDOW) {
		if (n > HM_CTL_CHUNK)
			n = HM_CTL_CHUNK;
		if (n > HM_CTL_WINDOW - pc->data_unacked)
			n = HM_CTL_WINDOW - pc->data_unacked;
		memcpy(buf, &m, sizeof(m));
		evbuffer_remove(in, buf + sizeof(m), n);
		if (px_proc_send(PC.proc, HM_CTL_DATA, buf, sizeof(m) + n, NULL, 0) != 0) {
			pconn_free(pc, 1);
			return 1;
		}
		pc->data_unacked += (uint32_t)n;
	}
	if (pc->eof) {
		if (evbuffer_get_length(in) > 0)
			return 0;	/* the rest once acknowledged */
		pconn_free(pc, 1);
		return 1;
	}
	if (evbuffer_get_length(in) > 0)
		bufferevent_disable(pc->bev, EV_READ);
	else
		bufferevent_enable(pc->bev, EV_READ);
	return 0;
}

static void
pc_read(struct bufferevent *bev, void *arg)
{
	pc_relay(arg);
}

static void
pc_event(struct bufferevent *bev, short what, void *arg)
{
	struct pconn *pc = arg;

	pc->eof = 1;
	bufferevent_disable(bev, EV_READ | EV_WRITE);
	pc_relay(pc);	/* what is left, then the close */
}

/* The streamed body the API server took (it stops taking it while its
 * guest lags): acknowledged to the helper, which then reads on. */
static void
pc_taken(uint64_t id, size_t n)
{
	struct pconn *pc = pconn_find(id);
	struct hm_ctl_ack m;

	if (pc == NULL || pc->body_unacked == 0)
		return;
	pc->body_taken += (uint32_t)n;
	if (pc->body_taken > pc->body_unacked)
		pc->body_taken = pc->body_unacked;
	if (pc->body_taken < HM_CTL_BODY_WINDOW / 4 &&
	    pc->body_taken < pc->body_unacked)
		return;
	memset(&m, 0, sizeof(m));
	m.id = pc->id;
	m.bytes = pc->body_taken;
	if (px_proc_send(PC.proc, HM_CTL_BODY_ACK, &m, sizeof(m), NULL, 0) == 0) {
		pc->body_unacked -= pc->body_taken;
		pc->body_taken = 0;
	}
}

static int
printable(const char *s, size_t max, int space_ok)
{
	size_t i;

	for (i = 0; i < max && s[i] != '\0'; i++)
		if ((unsigned char)s[i] < (space_ok ? 0x20 : 0x21) ||
		    (unsigned char)s[i] >= 0x7f)
			return 0;
	return i < max;
}

/* A fleet peer's request refused here: the helper answers and closes. */
static void
pc_fail(struct pconn *pc, int status, const char *msg)
{
	struct hm_ctl_fail f;

	memset(&f, 0, sizeof(f));
	f.id = pc->id;
	f.status = status;
	snprintf(f.msg, sizeof(f.msg), "%s", msg);
	px_proc_send(PC.proc, HM_CTL_FAIL, &f, sizeof(f), NULL, 0);
}

/* A fleet peer's connection: who it is, from its certificate's names,
 * if that host holds a live lease; its requests are then fed as that
 * host's (px_control_adopt_fleet: a create here, as the admin). One
 * whose certificate names no such host gets no API connection: each
 * request of it is refused (pc_request). */
static uint64_t
pc_adopt(struct pconn *pc, int fd, const char *addr)
{
	if (!pc->fleet)
		return px_control_adopt(PC.ctl, fd, addr, pc_taken, pc->id);
	if (!px_fleet_peer_host((const char (*)[33])pc->names, pc->nnames,
	    pc->peer, sizeof(pc->peer))) {
		pc->peer[0] = '\0';
		close(fd);
		return 0;
	}
	return px_control_adopt_fleet(PC.ctl, fd, pc->peer, pc_taken, pc->id);
}

static void
pc_open(struct px_proc *pr, const struct hm_ctl_open *m)
{
	struct in6_addr a6;
	struct in_addr a4;
	struct pconn *pc;
	unsigned *n;
	uint32_t i;
	int sp[2];

	if (!printable(m->addr, sizeof(m->addr), 0) ||
	    (inet_pton(AF_INET, m->addr, &a4) != 1 &&
	    inet_pton(AF_INET6, m->addr, &a6) != 1) || pconn_find(m->id) != NULL ||
	    (m->fleet != 0 && m->fleet != 1) || (m->fleet && PC.fleet_fd < 0) ||
	    (!m->fleet && PC.fd < 0) || m->nnames > HM_CTL_FLEET_NAMES ||
	    (!m->fleet && m->nnames != 0)) {
		px_proc_bad(pr, "a malformed connection");
		return;
	}
	for (i = 0; i < m->nnames; i++)
		if (!host_id(m->names[i], sizeof(m->names[i]))) {
			px_proc_bad(pr, "a malformed fleet peer name");
			return;
		}
	n = m->fleet ? &PC.nfleet : &PC.n;
	if (*n >= PX_CONTROL_MAX_TCP ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0 ||
	    (pc = calloc(1, sizeof(*pc))) == NULL) {
		struct hm_ctl_id c = { m->id };

		if (*n < PX_CONTROL_MAX_TCP)
			log_warn("control helper: connection");
		px_proc_send(pr, HM_CTL_CLOSE, &c, sizeof(c), NULL, 0);
		return;
	}
	pc->id = m->id;
	pc->fleet = m->fleet;
	pc->nnames = m->nnames;
	memcpy(pc->names, m->names, sizeof(pc->names));
	evutil_make_socket_nonblocking(sp[1]);
	if ((pc->bev = bufferevent_socket_new(PC.base, sp[1],
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(sp[0]);
		close(sp[1]);
		free(pc);
		return;
	}
	TAILQ_INSERT_TAIL(&PC.conns, pc, entry);
	(*n)++;
	if ((pc->api = pc_adopt(pc, sp[0], m->addr)) == 0 && pc->fleet &&
	    pc->peer[0] == '\0') {
		/* no API connection: refusals only, nothing to relay */
		bufferevent_free(pc->bev);
		pc->bev = NULL;
		return;
	}
	bufferevent_setcb(pc->bev, pc_read, NULL, pc_event, pc);
	bufferevent_enable(pc->bev, EV_READ);
	/* refused (the API's budgets): its end closes, EOF here closes
	 * the client */
}

/* The request as the helper parsed it, checked, to the API server. */
static void
pc_request(struct px_proc *pr, const unsigned char *p, size_t len)
{
	struct hm_ctl_request m;
	struct px_control_req q;
	struct pconn *pc;

	memcpy(&m, p, sizeof(m));
	switch (m.method) {
	case HTTP_GET: case HTTP_HEAD: case HTTP_POST: case HTTP_PUT:
	case HTTP_PATCH: case HTTP_DELETE:
		break;
	default:
		px_proc_bad(pr, "a request with a bad method");
		return;
	}
	if (len != sizeof(m) + m.bodylen || m.bodylen > PX_CONTROL_MAX_BODY ||
	    !printable(m.target, sizeof(m.target), 0) || m.target[0] != '/' ||
	    !printable(m.authz, sizeof(m.authz), 1)) {
		px_proc_bad(pr, "a malformed request");
		return;
	}
	/* streamed exactly when the API server streams it: else its body would
	 * be taken as what it is not */
	if (m.stream != px_control_streamed((unsigned)m.method, m.target,
	    strlen(m.target)) || (m.stream && m.bodylen != 0) ||
	    (!m.stream && m.expect) ||
	    ((pc = pconn_find(m.id)) != NULL && (pc->in_body || pc->shut))) {
		px_proc_bad(pr, "a request out of turn");
		return;
	}
	if (pc == NULL)
		return;		/* closed here meanwhile */
	if (pc->fleet) {
		char now[33];

		/* what a fleet peer may ask: a create here, while its host
		 * holds its lease (fleet_api.h); no token makes it more */
		if ((m.stream && !px_fleet_move_target(m.target,
		    strlen(m.target))) || m.authz[0] != '\0') {
			px_proc_bad(pr, "a fleet peer's request out of its kind");
			return;
		}
		if (pc->bev == NULL || !px_fleet_peer_host(
		    (const char (*)[33])pc->names, pc->nnames, now, sizeof(now)) ||
		    strcmp(now, pc->peer) != 0) {
			pc_fail(pc, 403, "the fleet peer's certificate names no host "
			    "of this fleet holding a live lease");
			return;
		}
		if (px_fleet_move_target(m.target, strlen(m.target)))
			log_debug("fleet: host %s moves a sandbox here: %s",
			    pc->peer, m.target);
		else if (m.method != HTTP_POST ||
		    strcmp(m.target, "/v1/sandboxes") != 0) {
			pc_fail(pc, 404, "a fleet peer may only POST /v1/sandboxes "
			    "or move a sandbox here");
			return;
		} else
			log_info("fleet: host %s placed a create here", pc->peer);
	}
	memset(&q, 0, sizeof(q));
	q.method = m.method;
	q.target = m.target;
	q.authz = m.authz;
	q.body = (const char *)p + sizeof(m);
	q.bodylen = m.bodylen;
	q.close = m.close;
	q.stream = m.stream;
	q.expect = m.expect;
	pc->in_body = m.stream;
	if (px_control_feed_request(PC.ctl, pc->api, &q) != 0)
		pconn_free(pc, 1);	/* a client piling up requests */
}

/* A streamed request's body bytes. */
static void
pc_body(struct px_proc *pr, const unsigned char *p, size_t len)
{
	struct hm_ctl_id m;
	struct pconn *pc;
	size_t n = len - sizeof(m);

	memcpy(&m, p, sizeof(m));
	if ((pc = pconn_find(m.id)) == NULL)
		return;		/* closed here meanwhile */
	if (!pc->in_body || pc->body_unacked + n > HM_CTL_BODY_WINDOW) {
		px_proc_bad(pr, pc->in_body ? "a body past its window" :
		    "a body out of turn");
		return;
	}
	pc->body_unacked += (uint32_t)n;
	if (px_control_feed_body(PC.ctl, pc->api, p + sizeof(m), n) != 0)
		pconn_free(pc, 1);
}

static void
pc_body_end(struct px_proc *pr, const struct hm_ctl_body_end *m)
{
	struct pconn *pc;

	if ((pc = pconn_find(m->id)) == NULL)
		return;		/* closed here meanwhile */
	if (!pc->in_body) {
		px_proc_bad(pr, "a body end out of turn");
		return;
	}
	pc->in_body = 0;
	/* a client's broken framing fails the request as a broken body on
	 * the API's own socket does */
	if (px_control_feed_end(PC.ctl, pc->api, m->broken) != 0)
		pconn_free(pc, 1);
}

/* ---- creates forwarded to fleet peers through the helper ---- */

static void
pfwd_free(struct pfwd *f)
{
	TAILQ_REMOVE(&PC.fwds, f, entry);
	event_free(f->guard);
	free(f);
}

static void
pfwd_fail_all(const char *why)
{
	struct pfwd *f;
	px_fleet_api_done_fn *done;
	void *arg;

	while ((f = TAILQ_FIRST(&PC.fwds)) != NULL) {
		done = f->done;
		arg = f->arg;
		pfwd_free(f);
		done(arg, 0, "", 0, why);
	}
}

static void
pfwd_guard(evutil_socket_t fd, short what, void *arg)
{
	struct pfwd *f = arg;
	px_fleet_api_done_fn *done = f->done;
	void *darg = f->arg;

	pfwd_free(f);
	done(darg, 0, "", 0, "no answer from the control helper");
}

static void pc_start_fleet(struct px_proc *);

/* SIGHUP: the fleet's new certificates, to the helper as they are to
 * the parent (fleet.c's px_fleet_reload) */
void
px_controld_fleet_reload(const char *ca_pem, const char *cert_pem,
    const char *key_pem)
{
	char *ca, *cert, *key;
	int fd;

	if (PC.fleet_ca == NULL || ca_pem == NULL || cert_pem == NULL ||
	    key_pem == NULL)
		return;
	if ((ca = strdup(ca_pem)) == NULL || (cert = strdup(cert_pem)) == NULL ||
	    (key = strdup(key_pem)) == NULL) {
		log_warnx("control helper: out of memory");
		return;		/* (the leak of one of them, once) */
	}
	free(PC.fleet_ca);
	free(PC.fleet_cert);
	memset(PC.fleet_key, 0, strlen(PC.fleet_key));
	free(PC.fleet_key);
	PC.fleet_ca = ca;
	PC.fleet_cert = cert;
	PC.fleet_key = key;
	if (PC.proc == NULL)
		return;
	fd = PC.fleet_fd;
	PC.fleet_fd = -1;	/* the helper has the socket already */
	pc_start_fleet(PC.proc);
	PC.fleet_fd = fd;
}

int
px_controld_forward(const char *addr, const char *host, const char *self,
    const char *body, size_t len, px_fleet_api_done_fn *done, void *arg,
    char *err, size_t errlen)
{
	/* the helper's deadline, and a margin for the helper itself */
	struct timeval tv = { HM_CTL_FORWARD_SECS + 10, 0 };
	struct hm_ctl_forward *m;
	struct pfwd *f;

	if (PC.proc == NULL || PC.fleet_ca == NULL) {
		snprintf(err, errlen, "the control helper does not forward "
		    "(no fleet mode)");
		return -1;
	}
	if (len == 0 || len > HM_CTL_FORWARD_BODY_MAX ||
	    strlen(addr) >= sizeof(m->addr) || strlen(host) >= sizeof(m->host) ||
	    strlen(self) >= sizeof(m->self)) {
		snprintf(err, errlen, "a create too large to forward to host %s",
		    host);
		return -1;
	}
	if ((m = calloc(1, sizeof(*m) + len)) == NULL ||
	    (f = calloc(1, sizeof(*f))) == NULL) {
		free(m);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((f->guard = evtimer_new(PC.base, pfwd_guard, f)) == NULL) {
		free(f);
		free(m);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	f->tag = m->tag = ++PC.next_tag;
	f->done = done;
	f->arg = arg;
	snprintf(m->addr, sizeof(m->addr), "%s", addr);
	snprintf(m->host, sizeof(m->host), "%s", host);
	snprintf(m->self, sizeof(m->self), "%s", self);
	m->bodylen = (uint32_t)len;
	memcpy(m + 1, body, len);
	if (px_proc_send(PC.proc, HM_CTL_FORWARD, m, sizeof(*m) + len, NULL,
	    0) != 0) {
		free(m);
		event_free(f->guard);
		free(f);
		snprintf(err, errlen, "the control helper is not running");
		return -1;
	}
	free(m);
	evtimer_add(f->guard, &tv);
	TAILQ_INSERT_TAIL(&PC.fwds, f, entry);
	return 0;
}

/* A forward's answer, as the helper read and re-encoded it: checked,
 * then to the caller (its JSON is the helper's, compact). */
static void
pc_forwarded(struct px_proc *pr, const unsigned char *p, size_t len)
{
	struct hm_ctl_forwarded m;
	struct pfwd *f;
	px_fleet_api_done_fn *done;
	void *arg;

	memcpy(&m, p, sizeof(m));
	if (len != sizeof(m) + m.bodylen ||
	    (m.status != 0 && (m.status < 100 || m.status > 599)) ||
	    !printable(m.err, sizeof(m.err), 1) ||
	    (m.status == 0) != (m.err[0] != '\0') ||
	    (m.status == 0 && m.bodylen != 0)) {
		px_proc_bad(pr, "a malformed forward answer");
		return;
	}
	TAILQ_FOREACH(f, &PC.fwds, entry)
		if (f->tag == m.tag)
			break;
	if (f == NULL)
		return;		/* given up meanwhile (pfwd_guard) */
	done = f->done;
	arg = f->arg;
	pfwd_free(f);
	done(arg, m.status, m.bodylen ? (const char *)p + sizeof(m) : "",
	    m.bodylen, m.status ? NULL : m.err);
}

static void
pc_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct px_proc *pr = arg;

	if (nfds != 0) {
		px_proc_bad(pr, "descriptors");
		return;
	}
	if (type == HM_CTL_FORWARDED && len >= sizeof(struct hm_ctl_forwarded)) {
		pc_forwarded(pr, p, len);
	} else if (type == HM_CTL_OPEN && len == sizeof(struct hm_ctl_open)) {
		struct hm_ctl_open m;

		memcpy(&m, p, sizeof(m));
		pc_open(pr, &m);
	} else if (type == HM_CTL_REQUEST && len >= sizeof(struct hm_ctl_request)) {
		pc_request(pr, p, len);
	} else if (type == HM_CTL_BODY && len > sizeof(struct hm_ctl_id) &&
	    len <= sizeof(struct hm_ctl_id) + HM_CTL_CHUNK) {
		pc_body(pr, p, len);
	} else if (type == HM_CTL_BODY_END &&
	    len == sizeof(struct hm_ctl_body_end)) {
		struct hm_ctl_body_end m;

		memcpy(&m, p, sizeof(m));
		pc_body_end(pr, &m);
	} else if (type == HM_CTL_DATA_ACK && len == sizeof(struct hm_ctl_ack)) {
		struct hm_ctl_ack m;
		struct pconn *pc;

		memcpy(&m, p, sizeof(m));
		if ((pc = pconn_find(m.id)) == NULL || pc->bev == NULL)
			return;
		if (m.bytes > pc->data_unacked) {
			px_proc_bad(pr, "an acknowledgement of bytes never sent");
			return;
		}
		pc->data_unacked -= m.bytes;
		pc_relay(pc);
	} else if (type == HM_CTL_SHUTDOWN && len == sizeof(struct hm_ctl_id)) {
		struct hm_ctl_id m;
		struct pconn *pc;

		memcpy(&m, p, sizeof(m));
		if ((pc = pconn_find(m.id)) == NULL || pc->shut || pc->api == 0)
			return;
		if (pc->in_body) {
			px_proc_bad(pr, "a half close inside a body");
			return;
		}
		pc->shut = 1;
		if (px_control_feed_shutdown(PC.ctl, pc->api) != 0)
			pconn_free(pc, 1);
	} else if (type == HM_CTL_CLOSE && len == sizeof(struct hm_ctl_id)) {
		struct hm_ctl_id m;
		struct pconn *pc;

		memcpy(&m, p, sizeof(m));
		if ((pc = pconn_find(m.id)) != NULL)
			pconn_free(pc, 0);
	} else if (type == HM_CTL_REFUSED && len == sizeof(struct hm_ctl_refused)) {
		struct hm_ctl_refused m;

		memcpy(&m, p, sizeof(m));
		if (m.reason < PX_CONTROL_REFUSED_BUDGET ||
		    m.reason > PX_CONTROL_REFUSED_DEADLINE) {
			px_proc_bad(pr, "a bad refusal");
			return;
		}
		px_control_count_refused(PC.ctl, m.reason);
	} else
		px_proc_bad(pr, "an unexpected message");
}

/* the fleet's certificates (the forwards'), and fleet_api_listen's
 * socket if there is one, to a new helper */
static void
pc_start_fleet(struct px_proc *pr)
{
	struct hm_ctl_fleet_config h;
	size_t al = strlen(PC.fleet_ca), cl = strlen(PC.fleet_cert),
	    kl = strlen(PC.fleet_key), n = sizeof(h) + al + cl + kl;
	unsigned char *buf;

	if ((buf = malloc(n)) == NULL) {
		log_warnx("control helper: out of memory");
		return;
	}
	h.calen = (uint32_t)al;
	h.certlen = (uint32_t)cl;
	h.keylen = (uint32_t)kl;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), PC.fleet_ca, al);
	memcpy(buf + sizeof(h) + al, PC.fleet_cert, cl);
	memcpy(buf + sizeof(h) + al + cl, PC.fleet_key, kl);
	px_proc_send(pr, HM_CTL_FLEET_CONFIG, buf, n, &PC.fleet_fd,
	    PC.fleet_fd >= 0 ? 1 : 0);
	memset(buf, 0, n);
	free(buf);
}

static void pc_start_control(struct px_proc *);

static void
pc_start(struct px_proc *pr, void *arg)
{
	/* a new helper: the old one's clients are gone with it */
	while (!TAILQ_EMPTY(&PC.conns))
		pconn_free(TAILQ_FIRST(&PC.conns), 0);
	if (PC.fleet_ca != NULL)
		pc_start_fleet(pr);
	if (PC.fd >= 0)
		pc_start_control(pr);
	/* and the forwards it had under way (after the configuration:
	 * a caller trying the next host forwards through the new one) */
	pfwd_fail_all("the control helper restarted");
}

static void
pc_start_control(struct px_proc *pr)
{
	struct hm_ctl_config h;
	size_t cl, kl;
	unsigned char *buf;

	cl = strlen(PC.cert);
	kl = strlen(PC.key);
	if ((buf = malloc(sizeof(h) + cl + kl)) == NULL) {
		log_warnx("control helper: out of memory");
		return;
	}
	h.certlen = (uint32_t)cl;
	h.keylen = (uint32_t)kl;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), PC.cert, cl);
	memcpy(buf + sizeof(h) + cl, PC.key, kl);
	px_proc_send(pr, HM_CTL_CONFIG, buf, sizeof(h) + cl + kl, &PC.fd, 1);
	memset(buf, 0, sizeof(h) + cl + kl);
	free(buf);
}

static const struct px_proc_def controld_def = {
	.name = "control", .uid_slot = PX_UID_CONTROL, .on_start = pc_start,
	.on_msg = pc_msg
};

/* A listening socket on addr (ADDRESS:PORT); -1 with err. */
static int
pc_listen(const char *what, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss), fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (addr == NULL || evutil_parse_sockaddr_port(addr,
	    (struct sockaddr *)&ss, &len) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    (ss.ss_family == AF_INET ?
	    ((struct sockaddr_in *)&ss)->sin_port :
	    ((struct sockaddr_in6 *)&ss)->sin6_port) == 0) {
		snprintf(err, errlen, "%s address '%s': use "
		    "ADDRESS:PORT, as in 127.0.0.1:9443 or [::1]:9443",
		    what, addr ? addr : "");
		return -1;
	}
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, (socklen_t)len) != 0 ||
	    listen(fd, 64) != 0) {
		snprintf(err, errlen, "%s %s: %s", what, addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int
px_controld_start(struct event_base *base, struct px_control *ctl,
    const struct px_controld_conf *cf, char *err, size_t errlen)
{
	TAILQ_INIT(&PC.conns);
	TAILQ_INIT(&PC.fwds);
	PC.base = base;
	PC.ctl = ctl;
	PC.fd = PC.fleet_fd = -1;
	if (cf->addr != NULL && ((PC.fd = pc_listen("control_listen", cf->addr,
	    err, errlen)) < 0))
		return -1;
	if (cf->fleet_addr != NULL && ((PC.fleet_fd = pc_listen(
	    "fleet_api_listen", cf->fleet_addr, err, errlen)) < 0))
		return -1;
	if ((cf->addr != NULL && ((PC.cert = strdup(cf->cert_pem)) == NULL ||
	    (PC.key = strdup(cf->key_pem)) == NULL)) ||
	    (cf->fleet_ca_pem != NULL && ((PC.fleet_ca = strdup(cf->fleet_ca_pem)) ==
	    NULL || (PC.fleet_cert = strdup(cf->fleet_cert_pem)) == NULL ||
	    (PC.fleet_key = strdup(cf->fleet_key_pem)) == NULL)) ||
	    (PC.proc = px_proc_start(base, &controld_def)) == NULL) {
		snprintf(err, errlen, "cannot start the control helper");
		return -1;
	}
	return 0;
}

void
px_controld_stop(void)
{
	while (PC.conns.tqh_first != NULL)
		pconn_free(TAILQ_FIRST(&PC.conns), 0);
	/* their callers go with ctl: no answer is given */
	while (!TAILQ_EMPTY(&PC.fwds))
		pfwd_free(TAILQ_FIRST(&PC.fwds));
	PC.ctl = NULL;
}
