/*
 * reqhead.h — the control API's request reader: http-parser callbacks
 * that gather one request (its target, its Authorization value, its
 * Expect: 100-continue, its JSON body) within the control API's bounds
 * (head PX_CONTROL_MAX_HEAD, body PX_CONTROL_MAX_BODY, Authorization
 * PX_CONTROL_MAX_AUTHZ). The control API server (control.c) and the TCP
 * control helper (controld.c) both read requests through it, so both
 * refuse the same requests with the same words.
 *
 * A request whose body the control API streams (px_control_streamed:
 * PUT .../files, POST .../exec?stream=1) stops the parser after its
 * head (hooks->stream_head); its body goes to hooks->stream_body as it
 * is parsed, never to r->body. Any other request's body is gathered in
 * r->body; at its end the parser pauses with r->complete set.
 *
 * Ownership: a reader owns its two evbuffers (px_reqhead_free); the
 * caller owns the struct and reads its fields between parser calls.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_REQHEAD_H
#define BERTH_REQHEAD_H

#include "control.h"

#include <stddef.h>
#include <event2/buffer.h>
#include <http_parser.h>

struct px_reqhead_hooks {
	/* a new request begins (the reader has reset itself); may be NULL */
	void	(*begin)(void *arg);
	/* a streamed request's head is read; the parser is paused; may
	 * be NULL */
	void	(*stream_head)(void *arg);
	/* bytes of its body: 0, or -1 to stop the parser (an error) */
	int	(*stream_body)(void *arg, const char *at, size_t len);
	/* its end; the parser is paused. NULL: it ends as any request
	 * does, with r->complete set */
	void	(*stream_end)(void *arg);
};

struct px_reqhead {
	http_parser	 parser;
	const struct px_reqhead_hooks *hooks;
	void		*arg;
	int		 authz_printable; /* other bytes: authz_bad */
	struct evbuffer	*url, *body;
	size_t		 head_bytes;
	int		 error_status;	/* 413 or 431 when the reader refused */
	int		 complete;	/* a whole request waits to be served */
	int		 streamed;	/* from its head to its end */
	int		 expect;	/* Expect: 100-continue */
	/* the Authorization header, captured while the head is parsed */
	char		 field[16];	/* current header name (prefix) */
	size_t		 fieldlen;
	int		 in_value;	/* the last callback was a header value */
	int		 is_authz;
	int		 authz_bad;	/* too long, repeated (or not printable) */
	char		 authz[PX_CONTROL_MAX_AUTHZ + 1];
	size_t		 authzlen;
};

/* 0, or -1 when out of memory (nothing is left allocated). With
 * authz_printable, an Authorization value with a byte outside printable
 * ASCII is malformed (authz_bad), as one relayed into a head must be. */
int	px_reqhead_init(struct px_reqhead *, const struct px_reqhead_hooks *,
	    void *arg, int authz_printable);
void	px_reqhead_free(struct px_reqhead *);
/* Forgets the request read so far (not its streamed state, nor an
 * error_status: either outlives the head it came from). */
void	px_reqhead_reset(struct px_reqhead *);
/* http_parser_execute with the reader's callbacks. */
size_t	px_reqhead_execute(struct px_reqhead *, const char *data, size_t n);
/* 1 once any of a request's head was read (a stall then earns a 408). */
int	px_reqhead_started(const struct px_reqhead *);
/* After the parser stopped with error e: the status to answer with
 * (400, 413, 431) and its message in msg. */
int	px_reqhead_error(const struct px_reqhead *, enum http_errno e,
	    char *msg, size_t len);

#endif
