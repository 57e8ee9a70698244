/*
 * reqhead.c — the control API's request reader (see reqhead.h), shared
 * by the control API server and the TCP control helper: http1.c's
 * strict head lexer, framing rules and chunked decoder, driven one
 * request at a time.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "reqhead.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* the lexer's bound is the control API's */
_Static_assert(PX_CONTROL_MAX_HEAD == PX_HEAD_MAX,
    "the control API's head bound is http1.c's");

/* where the reader stands */
enum {
	RH_IDLE,	/* between requests (empty lines are skipped) */
	RH_HEAD,	/* a head is being read */
	RH_BODY,	/* its body is being read (kind, remain, chunk) */
	RH_CLOSED,	/* after a request that ends the connection */
	RH_FAILED,	/* refused: nothing more is read */
};

int
px_reqhead_init(struct px_reqhead *r, const struct px_reqhead_hooks *hooks,
    void *arg, int authz_printable)
{
	memset(r, 0, sizeof(*r));
	r->hooks = hooks;
	r->arg = arg;
	r->authz_printable = authz_printable;
	r->keepalive = 1;
	px_head_init(&r->head, 1);
	r->hbuf = evbuffer_new();
	r->url = evbuffer_new();
	r->body = evbuffer_new();
	if (r->hbuf == NULL || r->url == NULL || r->body == NULL) {
		px_reqhead_free(r);
		return -1;
	}
	return 0;
}

void
px_reqhead_free(struct px_reqhead *r)
{
	if (r->hbuf != NULL)
		evbuffer_free(r->hbuf);
	if (r->url != NULL)
		evbuffer_free(r->url);
	if (r->body != NULL)
		evbuffer_free(r->body);
	r->hbuf = r->url = r->body = NULL;
	px_head_reset(&r->head);
}

void
px_reqhead_reset(struct px_reqhead *r)
{
	evbuffer_drain(r->url, evbuffer_get_length(r->url));
	evbuffer_drain(r->body, evbuffer_get_length(r->body));
	r->complete = 0;
	r->expect = 0;
	r->authz_bad = 0;
	r->authzlen = 0;
	r->authz[0] = '\0';
}

int
px_reqhead_ready(const struct px_reqhead *r)
{
	return r->state == RH_BODY && r->kind == PX_BODY_NONE;
}

int
px_reqhead_started(const struct px_reqhead *r)
{
	return evbuffer_get_length(r->url) > 0 ||
	    evbuffer_get_length(r->hbuf) > 0;
}

int
px_reqhead_error(const struct px_reqhead *r, char *msg, size_t len)
{
	const char *why = r->why != NULL ? r->why : "refused";

	switch (r->error_status) {
	case 413:
		snprintf(msg, len, "request body larger than 64 KB");
		return 413;
	case 431:
		if (strcmp(why, "head too large") == 0)
			snprintf(msg, len, "request head larger than 16 KB");
		else
			snprintf(msg, len, "request head: %s", why);
		return 431;
	case 0:
	case 400:
		snprintf(msg, len, "malformed HTTP request: %s", why);
		return 400;
	default:
		snprintf(msg, len, "%s", why);
		return r->error_status;
	}
}

/* ---- reading ---- */

static enum px_reqhead_stop
fail(struct px_reqhead *r, int status, const char *why)
{
	r->state = RH_FAILED;
	r->error_status = status;
	r->why = why;
	px_head_reset(&r->head);
	evbuffer_drain(r->hbuf, evbuffer_get_length(r->hbuf));
	return PX_REQHEAD_ERROR;
}

static void
begin(struct px_reqhead *r)
{
	px_reqhead_reset(r);
	r->streamed = 0;
	r->state = RH_HEAD;
	if (r->hooks->begin != NULL)
		r->hooks->begin(r->arg);
}

/* Its Authorization header: one, at most PX_CONTROL_MAX_AUTHZ bytes
 * (printable ASCII with authz_printable), else authz_bad. */
static void
take_authz(struct px_reqhead *r, const struct px_hdr *f, int *seen)
{
	size_t i;

	if ((*seen)++ > 0) {
		r->authz_bad = 1;	/* two of them */
		return;
	}
	if (f->vlen > PX_CONTROL_MAX_AUTHZ) {
		r->authz_bad = 1;
		return;
	}
	for (i = 0; r->authz_printable && i < f->vlen; i++)
		if ((unsigned char)f->value[i] < 0x20 ||
		    (unsigned char)f->value[i] >= 0x7f)
			r->authz_bad = 1;
	memcpy(r->authz, f->value, f->vlen);
	r->authzlen = f->vlen;
	r->authz[r->authzlen] = '\0';
}

/* The lexer accepted a head: what the caller reads of it is copied out
 * and the head forgotten; its body comes next. */
static enum px_reqhead_stop
take_head(struct px_reqhead *r)
{
	struct px_head *h = &r->head;
	int i, seen = 0, streamed;

	r->method = h->method;
	r->expect = h->expect_continue;
	/* an Upgrade is served as a request, then the connection ends:
	 * never a tunnel */
	r->keepalive = px_head_keepalive(h) && h->upgrade == NULL;
	if (evbuffer_add(r->url, h->target, h->target_len) != 0)
		return fail(r, 503, "out of memory");
	for (i = 0; i < h->nhdr; i++)
		if (h->hdr[i].nlen == 13 &&
		    strncasecmp(h->hdr[i].name, "authorization", 13) == 0)
			take_authz(r, &h->hdr[i], &seen);
	r->kind = px_request_body(h);
	r->remain = r->kind == PX_BODY_LENGTH ? (uint64_t)h->content_length : 0;
	px_chunk_init(&r->chunk);
	/* a body the control API streams: not JSON, any size; its head
	 * is served first */
	streamed = px_control_streamed((unsigned)h->method, h->target,
	    h->target_len);
	px_head_reset(h);
	r->state = RH_BODY;
	if (streamed) {
		r->streamed = 1;
		if (r->hooks->stream_head != NULL)
			r->hooks->stream_head(r->arg);
		return PX_REQHEAD_HEAD;
	}
	/* a declared oversize body is refused before any of it is read */
	if (r->kind == PX_BODY_LENGTH && r->remain > PX_CONTROL_MAX_BODY)
		return fail(r, 413, "request body too large");
	return PX_REQHEAD_MORE;
}

static enum px_reqhead_stop
read_head(struct px_reqhead *r, const char *p, size_t n, size_t *used)
{
	size_t have = evbuffer_get_length(r->hbuf), take = n, total;
	const char *buf = p, *why = "malformed request";
	int status = 400;
	ssize_t hl;

	/* most heads come whole: read in place; a split one is gathered
	 * (the lexer resumes where it stopped) */
	if (take > PX_HEAD_MAX - have)
		take = PX_HEAD_MAX - have;
	*used = take;
	total = have + take;
	if (have > 0) {
		if (evbuffer_add(r->hbuf, p, take) != 0)
			return fail(r, 503, "out of memory");
		buf = (const char *)evbuffer_pullup(r->hbuf, -1);
	}
	hl = px_head_parse(&r->head, buf, total, &status, &why);
	if (hl < 0)
		return fail(r, status, why);
	if (hl == 0) {
		if (have == 0 && evbuffer_add(r->hbuf, p, take) != 0)
			return fail(r, 503, "out of memory");
		return PX_REQHEAD_MORE;
	}
	/* the head ends in these bytes: the rest is not the head's */
	*used = (size_t)hl - have;
	evbuffer_drain(r->hbuf, evbuffer_get_length(r->hbuf));
	return take_head(r);
}

/* The request's end: the reader stops, the caller serves it. */
static enum px_reqhead_stop
finish(struct px_reqhead *r)
{
	r->state = r->keepalive ? RH_IDLE : RH_CLOSED;
	if (r->streamed && r->hooks->stream_end != NULL) {
		r->streamed = 0;
		r->hooks->stream_end(r->arg);
		return PX_REQHEAD_END;
	}
	r->streamed = 0;
	r->complete = 1;
	return PX_REQHEAD_COMPLETE;
}

/* Body bytes: to the stream, or gathered within PX_CONTROL_MAX_BODY. */
static int
deliver(struct px_reqhead *r, const char *at, size_t len)
{
	if (r->streamed) {
		if (r->hooks->stream_body(r->arg, at, len) == 0)
			return 0;
		fail(r, 400, "the body's reader stopped");
		return -1;
	}
	if (evbuffer_get_length(r->body) + len > PX_CONTROL_MAX_BODY) {
		fail(r, 413, "request body too large");
		return -1;
	}
	if (evbuffer_add(r->body, at, len) != 0) {
		fail(r, 503, "out of memory");
		return -1;
	}
	return 0;
}

static enum px_reqhead_stop
read_body(struct px_reqhead *r, const char *p, size_t n, size_t *used)
{
	const char *why = NULL;
	size_t i = 0, dlen;
	ssize_t s;

	*used = 0;
	switch (r->kind) {
	case PX_BODY_LENGTH:
		i = n < r->remain ? n : (size_t)r->remain;
		*used = i;
		if (i > 0 && deliver(r, p, i) != 0)
			return PX_REQHEAD_ERROR;
		r->remain -= i;
		return r->remain > 0 ? PX_REQHEAD_MORE : finish(r);
	case PX_BODY_CHUNKED:
		while (!px_chunk_done(&r->chunk)) {
			if (i == n)
				return PX_REQHEAD_MORE;
			s = px_chunk_step(&r->chunk, p + i, n - i, &dlen, &why);
			if (s < 0)
				return fail(r, 400, why);
			i += (size_t)s;
			*used = i;
			if (dlen > 0 && deliver(r, p + i - dlen, dlen) != 0)
				return PX_REQHEAD_ERROR;
			if (s == 0)
				return PX_REQHEAD_MORE;	/* (never: bytes left) */
		}
		return finish(r);
	default:
		return finish(r);
	}
}

enum px_reqhead_stop
px_reqhead_execute(struct px_reqhead *r, const char *data, size_t n,
    size_t *used)
{
	enum px_reqhead_stop st = PX_REQHEAD_MORE;
	size_t i = 0, k;

	while (st == PX_REQHEAD_MORE) {
		switch (r->state) {
		case RH_FAILED:
			st = PX_REQHEAD_ERROR;
			break;
		case RH_CLOSED:
			i = n;		/* after the last request: dropped */
			goto out;
		case RH_IDLE:
			/* RFC 9112 2.2: empty lines (CRLF) before a request
			 * line are ignored */
			for (;;) {
				if (i == n)
					goto out;
				if (r->cr) {
					if (data[i] != '\n') {
						st = fail(r, 400,
						    "bare CR before a request line");
						goto out;
					}
					r->cr = 0;
				} else if (data[i] == '\r')
					r->cr = 1;
				else
					break;
				i++;
			}
			begin(r);
			break;
		case RH_HEAD:
			if (i == n)
				goto out;
			st = read_head(r, data + i, n - i, &k);
			i += k;
			break;
		case RH_BODY:
			if (i == n && r->kind != PX_BODY_NONE)
				goto out;
			st = read_body(r, data != NULL ? data + i : NULL,
			    n - i, &k);
			i += k;
			break;
		}
	}
out:
	*used = i;
	return st;
}

int
px_reqhead_run(struct px_reqhead *r, struct evbuffer *in,
    const struct px_reqhead_loop *l, void *arg)
{
	enum px_reqhead_stop st;
	size_t n, room, used;
	char *data;
	int rc;

	for (;;) {
		n = evbuffer_get_contiguous_space(in);
		if (n == 0 && !px_reqhead_ready(r))
			return 0;		/* more bytes needed */
		if ((room = l->room(arg)) == 0)
			return 0;		/* the caller holds back */
		if (n > room)
			n = room;
		data = n > 0 ? (char *)evbuffer_pullup(in, (ev_ssize_t)n) : NULL;
		st = px_reqhead_execute(r, data, n, &used);
		if (l->gone != NULL && l->gone(arg))
			return -1;
		evbuffer_drain(in, used);
		switch (st) {
		case PX_REQHEAD_MORE:
			continue;
		case PX_REQHEAD_HEAD:
			rc = l->head(arg);
			break;
		case PX_REQHEAD_END:
			rc = l->end != NULL ? l->end(arg) : 0;
			break;
		case PX_REQHEAD_COMPLETE:
			rc = l->complete(arg);
			break;
		case PX_REQHEAD_ERROR:
		default:
			l->refused(arg);
			return -1;
		}
		if (rc < 0)
			return -1;
	}
}
