/*
 * reqhead.h — the control API's request reader: one request at a time
 * (its target, method, Authorization value, Expect: 100-continue and
 * JSON body) within the control API's bounds (head PX_CONTROL_MAX_HEAD,
 * body PX_CONTROL_MAX_BODY, Authorization PX_CONTROL_MAX_AUTHZ). The
 * control API server (proxy/api/) and the TCP control helper
 * (controld.c) both read requests through it, so both refuse the same
 * requests with the same words.
 *
 * Heads are read by berthd's strict lexer (http1.c: px_head_parse, the
 * same rules as the proxy's: CRLF only, no obs-fold, no ambiguous
 * framing, Host required in HTTP/1.1); bodies by its framing rules
 * (px_request_body) and chunked decoder (px_chunk_step). Empty lines
 * before a request line are skipped (RFC 9112 2.2).
 *
 * px_reqhead_execute() reads from the bytes it is given and stops at
 * each point its caller acts on (enum px_reqhead_stop), having consumed
 * only the bytes before that point:
 *  - a request whose body the control API streams (px_control_streamed:
 *    PUT .../files, POST .../exec?stream=1) stops after its head
 *    (PX_REQHEAD_HEAD, hooks->stream_head ran); its body then goes to
 *    hooks->stream_body as it is read, never to r->body; at its end
 *    hooks->stream_end runs (PX_REQHEAD_END), or without that hook it
 *    ends as any request does;
 *  - any other request's body is gathered in r->body; at its end the
 *    reader stops with r->complete set (PX_REQHEAD_COMPLETE);
 *  - a refused request stops it for good (PX_REQHEAD_ERROR):
 *    px_reqhead_error() says with which status and words.
 * A streamed request with an empty body ends without more bytes: while
 * px_reqhead_ready() says so, call execute even with none.
 * After a request that ends its connection (Connection: close, an
 * HTTP/1.0 one without keep-alive, an Upgrade), the bytes that follow
 * are read and dropped: no further request is taken.
 *
 * Ownership: a reader owns its evbuffers and head (px_reqhead_free);
 * the caller owns the struct and reads its fields between calls.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_REQHEAD_H
#define BERTH_REQHEAD_H

#include "control.h"
#include "http1.h"

#include <stddef.h>
#include <stdint.h>
#include <event2/buffer.h>

struct px_reqhead_hooks {
	/* a new request begins (the reader has reset itself); may be NULL */
	void	(*begin)(void *arg);
	/* a streamed request's head is read; the reader stops; may be NULL */
	void	(*stream_head)(void *arg);
	/* bytes of its body: 0, or -1 to stop the reader (an error) */
	int	(*stream_body)(void *arg, const char *at, size_t len);
	/* its end; the reader stops. NULL: it ends as any request does,
	 * with r->complete set */
	void	(*stream_end)(void *arg);
};

/* why px_reqhead_execute() returned */
enum px_reqhead_stop {
	PX_REQHEAD_MORE,	/* every byte given was read: more needed */
	PX_REQHEAD_HEAD,	/* a streamed request's head */
	PX_REQHEAD_END,		/* a streamed request's end (stream_end) */
	PX_REQHEAD_COMPLETE,	/* r->complete: a whole request waits */
	PX_REQHEAD_ERROR,	/* refused, or stopped by stream_body */
};

struct px_reqhead {
	const struct px_reqhead_hooks *hooks;
	void		*arg;
	int		 authz_printable; /* other bytes: authz_bad */
	int		 state;		/* RH_* (reqhead.c) */
	int		 cr;		/* a CR of an empty line was skipped */
	struct px_head	 head;		/* the lexer's, while a head is read */
	struct evbuffer	*hbuf;		/* a head's bytes split over reads */
	struct evbuffer	*url, *body;
	int		 kind;		/* enum px_body_kind of its body */
	uint64_t	 remain;	/* PX_BODY_LENGTH: bytes left */
	struct px_chunk	 chunk;		/* PX_BODY_CHUNKED: the decoder */
	const char	*why;		/* refused: the lexer's or decoder's */
	int		 error_status;	/* the status when it refused */
	int		 complete;	/* a whole request waits to be served */
	int		 streamed;	/* from its head to its end */
	/* of the last request whose head was read (outlive a reset) */
	int		 method;	/* enum http_method */
	int		 keepalive;	/* another request may follow */
	int		 expect;	/* Expect: 100-continue */
	/* the Authorization header */
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
/* Forgets the request read so far: its target, body, Authorization and
 * complete (not where the reader stands in a streamed body, nor
 * method/keepalive, nor an error: they outlive the head they came
 * from). */
void	px_reqhead_reset(struct px_reqhead *);
/* Reads data[0..n) (data may be NULL when n is 0) up to the next stop;
 * *used gets the bytes consumed. */
enum px_reqhead_stop px_reqhead_execute(struct px_reqhead *,
	    const char *data, size_t n, size_t *used);
/* 1 when execute has a step to take without bytes (an empty streamed
 * body's end). */
int	px_reqhead_ready(const struct px_reqhead *);
/* 1 once any of a request's head was read, until it is reset (a stall
 * then earns a 408). */
int	px_reqhead_started(const struct px_reqhead *);
/* After PX_REQHEAD_ERROR: the status to answer with (400, 405, 413,
 * 417, 431, 501, 505; 503 when out of memory) and its message in msg. */
int	px_reqhead_error(const struct px_reqhead *, char *msg, size_t len);

/*
 * The reader's loop, written once for the control API's sockets
 * (api/conn.c) and the TCP control helper (controld.c): feeds what `in`
 * holds to the reader, step by step, and hands each stop to its caller.
 *  - room: before each step, how many bytes the reader may take now
 *    (0: stop here, the rest stays in `in`);
 *  - gone: after each step, nonzero when the caller's connection ended
 *    inside it (`in` may be gone with it: the loop returns at once);
 *  - head (PX_REQHEAD_HEAD), end (PX_REQHEAD_END, may be NULL) and
 *    complete (PX_REQHEAD_COMPLETE): 0 to read on, -1 to stop;
 *  - refused (PX_REQHEAD_ERROR): the reader stopped for good.
 * Returns 0 when it stopped for room or bytes, -1 otherwise.
 */
struct px_reqhead_loop {
	size_t	(*room)(void *arg);
	int	(*gone)(void *arg);
	int	(*head)(void *arg);
	int	(*end)(void *arg);
	int	(*complete)(void *arg);
	void	(*refused)(void *arg);
};
int	px_reqhead_run(struct px_reqhead *, struct evbuffer *in,
	    const struct px_reqhead_loop *, void *arg);

#endif
