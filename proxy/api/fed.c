/*
 * api/fed.c — TCP connections whose requests arrive already parsed.
 *
 * The control helper (privsep/controld.c) terminates TLS and reads each
 * client's HTTP with the request reader (reqhead.c); the parent gets a
 * typed request (method, target, Authorization, a JSON body it
 * re-encoded, or a streamed body's pieces) and puts it here. Nothing in
 * this process reads those clients' HTTP: a request is parsed once, in
 * the unprivileged helper.
 *
 * A fed connection is a struct conn like any other: answers go out on
 * its descriptor (the parent's end of a socketpair the helper's glue
 * relays to the client), deadlines, budgets and authentication are the
 * API's. What differs is where requests come from: a queue of records,
 * served in order under the same rules the reader loop follows
 * (api_conn_read): one request at a time while an answer is deferred,
 * none while the output is above CTL_OUT_HIGH, a streamed body's pieces
 * only while its operation takes them. The bytes of a streamed body the
 * operation took are reported to the caller (its window to the client),
 * so a client that streams faster than its guest reads is held by the
 * helper, not buffered here.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

enum { FED_REQUEST = 1, FED_BODY, FED_END, FED_BROKEN };

/* each record in a connection's queue: this, then len bytes */
struct fed_rec {
	uint32_t	 kind;
	uint32_t	 len;
};

/* a FED_REQUEST's bytes: this, the target, the Authorization value,
 * the body */
struct fed_req {
	uint32_t	 method;
	uint8_t		 close, stream, expect;
	uint32_t	 targetlen, authzlen, bodylen;
};

/* requests queued and not yet served: a client piling up pipelined
 * requests past this loses its connection */
#define FED_QUEUE_MAX	(1024 * 1024)

static struct conn *
fed_find(struct px_control *ctl, uint64_t serial)
{
	struct conn *c;

	/* at most CTL_MAX_TCP + CTL_MAX_UNIX connections: no index */
	TAILQ_FOREACH(c, &ctl->conns, entry)
		if (c->serial == serial)
			return c->fedq != NULL && !c->dead && !c->fed_gone ?
			    c : NULL;
	return NULL;
}

static int
fed_put(struct conn *c, uint32_t kind, const void *a, size_t alen,
    const void *b, size_t blen)
{
	struct fed_rec h = { kind, (uint32_t)(alen + blen) };

	if (evbuffer_add(c->fedq, &h, sizeof(h)) != 0 ||
	    (alen > 0 && evbuffer_add(c->fedq, a, alen) != 0) ||
	    (blen > 0 && evbuffer_add(c->fedq, b, blen) != 0))
		return -1;
	api_conn_read(c->bev, c);	/* serves it now if it may (fed_run) */
	return 0;
}

uint64_t
px_control_adopt(struct px_control *ctl, int fd, const char *addr,
    px_control_taken_fn *taken, uint64_t tag)
{
	struct conn *c;

	evutil_make_socket_nonblocking(fd);
	if ((c = api_accept_conn(ctl, fd, 1, NULL, addr)) == NULL)
		return 0;
	if ((c->fedq = evbuffer_new()) == NULL) {
		api_conn_free(c);
		return 0;
	}
	c->fed_taken = taken;
	c->fed_tag = tag;
	return c->serial;
}

uint64_t
px_control_adopt_fleet(struct px_control *ctl, int fd, const char *peer,
    px_control_taken_fn *taken, uint64_t tag)
{
	uint64_t serial = px_control_adopt(ctl, fd, peer, taken, tag);
	struct conn *c = serial ? fed_find(ctl, serial) : NULL;

	if (c == NULL)
		return 0;
	snprintf(c->fleet_peer, sizeof(c->fleet_peer), "%s", peer);
	c->authed = 1;		/* the peer's certificate said who */
	if (c->deadline != NULL)
		evtimer_del(c->deadline);
	return serial;
}

int
px_control_feed_request(struct px_control *ctl, uint64_t conn,
    const struct px_control_req *q)
{
	struct conn *c;
	struct fed_req r;
	struct evbuffer *b;
	size_t tl = strlen(q->target), al = strlen(q->authz);
	int rc;

	if ((c = fed_find(ctl, conn)) == NULL)
		return 0;	/* it ended here meanwhile */
	if (al > PX_CONTROL_MAX_AUTHZ ||
	    evbuffer_get_length(c->fedq) > FED_QUEUE_MAX)
		return -1;
	memset(&r, 0, sizeof(r));
	r.method = q->method;
	r.close = q->close != 0;
	r.stream = q->stream != 0;
	r.expect = q->expect != 0;
	r.targetlen = (uint32_t)tl;
	r.authzlen = (uint32_t)al;
	r.bodylen = (uint32_t)q->bodylen;
	if ((b = evbuffer_new()) == NULL)
		return -1;
	rc = evbuffer_add(b, &r, sizeof(r)) != 0 ||
	    evbuffer_add(b, q->target, tl) != 0 ||
	    evbuffer_add(b, q->authz, al) != 0 ||
	    (q->bodylen > 0 && evbuffer_add(b, q->body, q->bodylen) != 0) ?
	    -1 : fed_put(c, FED_REQUEST, evbuffer_pullup(b, -1),
	    evbuffer_get_length(b), NULL, 0);
	evbuffer_free(b);
	return rc;
}

int
px_control_feed_body(struct px_control *ctl, uint64_t conn, const void *p,
    size_t len)
{
	struct conn *c = fed_find(ctl, conn);

	return c == NULL ? 0 : fed_put(c, FED_BODY, p, len, NULL, 0);
}

int
px_control_feed_end(struct px_control *ctl, uint64_t conn, int broken)
{
	struct conn *c = fed_find(ctl, conn);

	return c == NULL ? 0 :
	    fed_put(c, broken ? FED_BROKEN : FED_END, NULL, 0, NULL, 0);
}

int
px_control_feed_shutdown(struct px_control *ctl, uint64_t conn)
{
	struct conn *c = fed_find(ctl, conn);

	/* seen as an EOF on its own socket would be: at once, even while
	 * an answer is deferred (a buffered exec whose client went is
	 * abandoned), what is still queued unserved */
	if (c != NULL) {
		c->fed_eof = 1;
		api_conn_read(c->bev, c);
	}
	return 0;
}

void
px_control_feed_gone(struct px_control *ctl, uint64_t conn)
{
	struct conn *c = fed_find(ctl, conn);

	/* its client is gone: what it asked for is not served, and the
	 * connection ends as one whose client closed (its EOF follows) */
	if (c != NULL) {
		c->fed_gone = 1;
		evbuffer_drain(c->fedq, evbuffer_get_length(c->fedq));
	}
}

/* A request, as the reader would leave it in c->rh, served. */
static void
fed_request(struct conn *c, const unsigned char *p, size_t len)
{
	struct fed_req q;
	const char *target, *authz, *body;

	memcpy(&q, p, sizeof(q));
	target = (const char *)p + sizeof(q);
	authz = target + q.targetlen;
	body = authz + q.authzlen;
	px_reqhead_reset(&c->rh);
	c->rh.method = (int)q.method;
	c->rh.keepalive = !q.close;
	c->rh.expect = q.expect;
	evbuffer_add(c->rh.url, target, q.targetlen);
	memcpy(c->rh.authz, authz, q.authzlen);
	c->rh.authz[q.authzlen] = '\0';
	c->rh.authzlen = q.authzlen;
	/* a new request: its connection idles from now (a deferred or
	 * streamed answer sets its own) */
	bufferevent_set_timeouts(c->bev, &api_idle, &api_idle);
	if (q.stream) {
		c->rh.streamed = 1;
		c->early_served = 1;
		api_conn_serve_early(c);
		return;
	}
	evbuffer_add(c->rh.body, body, q.bodylen);
	api_conn_serve(c);
	(void)len;
}

/* Serves what is queued while the connection may take it: api_conn_read
 * for a fed connection. */
void
api_fed_run(struct conn *c)
{
	struct fed_rec h;
	unsigned char *p;
	size_t taken = 0;
	int end = 0;	/* a broken body */

	while (!end && !c->closing && !c->throttled &&
	    (!c->waiting || c->rh.streamed) &&
	    !(c->st != NULL && c->st->in_paused) &&
	    evbuffer_copyout(c->fedq, &h, sizeof(h)) == (ev_ssize_t)sizeof(h)) {
		p = evbuffer_pullup(c->fedq, (ev_ssize_t)(sizeof(h) + h.len));
		p += sizeof(h);
		c->busy++;
		switch (h.kind) {
		case FED_REQUEST:
			fed_request(c, p, h.len);
			if (!c->rh.streamed && evbuffer_get_length(
			    bufferevent_get_output(c->bev)) > CTL_OUT_HIGH)
				c->throttled = 1;	/* (conn_write reads on) */
			break;
		case FED_BODY:
			if (c->rh.streamed)
				api_conn_stream_body(c, (const char *)p, h.len);
			taken += h.len;
			break;
		case FED_END:
			c->rh.streamed = 0;
			api_conn_stream_end(c);
			break;
		case FED_BROKEN:
			c->rh.streamed = 0;
			end = 1;
			break;
		}
		c->busy--;
		if (c->dead) {
			api_conn_free(c);
			return;
		}
		evbuffer_drain(c->fedq, sizeof(h) + h.len);
	}
	if (taken > 0 && c->fed_taken != NULL)
		c->fed_taken(c->fed_tag, taken);
	/* (both may free c) */
	if (end)
		api_conn_broken(c, 400, "malformed HTTP request: the body's "
		    "chunked framing is broken");
	else if (c->fed_eof && !c->closing && !c->throttled &&
	    !(c->st != NULL && c->st->in_paused)) {
		/* its client half closed: as conn_event takes an EOF */
		c->fed_eof = 0;
		api_conn_eof(c);
	}
}
