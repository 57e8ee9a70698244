/*
 * reqhead.c — the control API's request reader (see reqhead.h), shared
 * by the control API server and the TCP control helper.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "reqhead.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct http_parser_settings rh_settings;

int
px_reqhead_init(struct px_reqhead *r, const struct px_reqhead_hooks *hooks,
    void *arg, int authz_printable)
{
	memset(r, 0, sizeof(*r));
	r->hooks = hooks;
	r->arg = arg;
	r->authz_printable = authz_printable;
	r->url = evbuffer_new();
	r->body = evbuffer_new();
	if (r->url == NULL || r->body == NULL) {
		px_reqhead_free(r);
		return -1;
	}
	http_parser_init(&r->parser, HTTP_REQUEST);
	r->parser.data = r;
	return 0;
}

void
px_reqhead_free(struct px_reqhead *r)
{
	if (r->url != NULL)
		evbuffer_free(r->url);
	if (r->body != NULL)
		evbuffer_free(r->body);
	r->url = r->body = NULL;
}

void
px_reqhead_reset(struct px_reqhead *r)
{
	evbuffer_drain(r->url, evbuffer_get_length(r->url));
	evbuffer_drain(r->body, evbuffer_get_length(r->body));
	r->head_bytes = 0;
	r->complete = 0;
	r->expect = 0;
	r->fieldlen = 0;
	r->field[0] = '\0';
	r->in_value = r->is_authz = r->authz_bad = 0;
	r->authzlen = 0;
	r->authz[0] = '\0';
}

size_t
px_reqhead_execute(struct px_reqhead *r, const char *data, size_t n)
{
	return http_parser_execute(&r->parser, &rh_settings, data, n);
}

int
px_reqhead_started(const struct px_reqhead *r)
{
	return evbuffer_get_length(r->url) > 0 || r->head_bytes > 0;
}

int
px_reqhead_error(const struct px_reqhead *r, enum http_errno e, char *msg,
    size_t len)
{
	if (r->error_status == 413) {
		snprintf(msg, len, "request body larger than 64 KB");
		return 413;
	}
	if (r->error_status == 431) {
		snprintf(msg, len, "request head larger than 16 KB");
		return 431;
	}
	snprintf(msg, len, "malformed HTTP request: %s",
	    http_errno_description(e));
	return 400;
}

/* ---- http-parser callbacks ---- */

static int
head_bytes(struct px_reqhead *r, size_t len)
{
	r->head_bytes += len;
	if (r->head_bytes > PX_CONTROL_MAX_HEAD) {
		r->error_status = 431;
		return -1;
	}
	return 0;
}

static int
on_message_begin(http_parser *p)
{
	struct px_reqhead *r = p->data;

	px_reqhead_reset(r);
	r->streamed = 0;
	if (r->hooks->begin != NULL)
		r->hooks->begin(r->arg);
	return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
	struct px_reqhead *r = p->data;

	if (head_bytes(r, len) == -1)
		return -1;
	return evbuffer_add(r->url, at, len);
}

static int
on_header_field(http_parser *p, const char *at, size_t len)
{
	struct px_reqhead *r = p->data;
	size_t n = len;

	if (r->in_value) {
		r->in_value = 0;
		r->fieldlen = 0;
	}
	if (r->fieldlen + n > sizeof(r->field) - 1)
		n = sizeof(r->field) - 1 - r->fieldlen;
	memcpy(r->field + r->fieldlen, at, n);
	r->fieldlen += n;
	r->field[r->fieldlen] = '\0';
	return head_bytes(r, len);
}

static int
on_header_value(http_parser *p, const char *at, size_t len)
{
	struct px_reqhead *r = p->data;
	size_t i;

	if (!r->in_value) {
		r->in_value = 1;
		r->is_authz = strcasecmp(r->field, "authorization") == 0;
		if (r->is_authz && r->authzlen > 0)
			r->authz_bad = 1;	/* two of them */
		/* curl sends it before a larger upload (a streamed PUT) */
		if (strcasecmp(r->field, "expect") == 0 && len >= 12 &&
		    strncasecmp(at, "100-continue", 12) == 0)
			r->expect = 1;
	}
	if (r->is_authz && !r->authz_bad) {
		if (r->authzlen + len > PX_CONTROL_MAX_AUTHZ)
			r->authz_bad = 1;
		else {
			for (i = 0; r->authz_printable && i < len; i++)
				if ((unsigned char)at[i] < 0x20 ||
				    (unsigned char)at[i] >= 0x7f)
					r->authz_bad = 1;
			memcpy(r->authz + r->authzlen, at, len);
			r->authzlen += len;
			r->authz[r->authzlen] = '\0';
		}
	}
	return head_bytes(r, len);
}

static int
on_headers_complete(http_parser *p)
{
	struct px_reqhead *r = p->data;
	size_t n = evbuffer_get_length(r->url);

	/* a body the control API streams: not JSON, any size; its head
	 * is served first, the parser paused here */
	if (n > 0 && px_control_streamed(p->method,
	    (const char *)evbuffer_pullup(r->url, -1), n)) {
		r->streamed = 1;
		if (r->hooks->stream_head != NULL)
			r->hooks->stream_head(r->arg);
		http_parser_pause(p, 1);
		return 0;
	}
	/* Refuse a declared oversize body before reading any of it. */
	if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX &&
	    p->content_length > PX_CONTROL_MAX_BODY) {
		r->error_status = 413;
		return -1;
	}
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct px_reqhead *r = p->data;

	if (r->streamed)
		return r->hooks->stream_body(r->arg, at, len);
	if (evbuffer_get_length(r->body) + len > PX_CONTROL_MAX_BODY) {
		r->error_status = 413;
		return -1;
	}
	return evbuffer_add(r->body, at, len);
}

static int
on_message_complete(http_parser *p)
{
	struct px_reqhead *r = p->data;

	if (r->streamed && r->hooks->stream_end != NULL) {
		r->streamed = 0;
		r->hooks->stream_end(r->arg);
	} else {
		r->streamed = 0;
		r->complete = 1;
	}
	http_parser_pause(p, 1);	/* answers stay in order */
	return 0;
}

static const struct http_parser_settings rh_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};
