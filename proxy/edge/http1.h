/*
 * http1.h — HTTP/1.1 message heads and body framing for berthd's data
 * path. Knows nothing of sockets or TLS.
 *
 * http-parser 2.9.4 is lenient (bare LF, obs-fold, odd Transfer-Encoding
 * lists), so every head first passes a strict lexer here: CRLF only, no
 * control bytes, no obs-fold, token names, at most PX_HEAD_MAX bytes and
 * PX_HEADERS_MAX fields. http-parser then parses the accepted bytes and
 * must agree. Framing (Content-Length / Transfer-Encoding) is decided by
 * the rules in px_head_parse(), which refuse every ambiguity request
 * smuggling relies on. Chunked bodies are decoded by a strict decoder of
 * our own and re-framed on the way out, so the bytes a peer sent never
 * reach the other side as framing.
 *
 * Ownership: a parsed head owns one copy of its bytes (h->raw); every
 * pointer in it points into that copy and lives until px_head_reset().
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_HTTP1_H
#define BERTH_HTTP1_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PX_HEAD_MAX	16384	/* bytes in a head, request or response */
#define PX_REQLINE_MAX	8192	/* bytes in a request line (longer: 400) */
#define PX_HEADERS_MAX	100	/* fields in a head */
#define PX_TRAILER_MAX	8192	/* bytes of chunked trailers */
#define PX_CHUNK_EXT_MAX 1024	/* bytes of one chunk's extensions */

struct px_hdr {
	const char	*name;
	size_t		 nlen;
	const char	*value;
	size_t		 vlen;
	int		 hop;	/* hop-by-hop: never forwarded as is */
};

struct px_head {
	char		*raw;		/* owned copy of the head */
	size_t		 rawlen;
	size_t		 scanned;	/* lexer position across calls */
	int		 request;

	/* request line */
	int		 method;	/* enum http_method */
	const char	*method_str;
	size_t		 method_len;
	const char	*target;
	size_t		 target_len;
	/* status line */
	int		 status;
	const char	*reason;
	size_t		 reason_len;
	unsigned	 major, minor;

	struct px_hdr	*hdr;		/* nhdr fields, allocated with raw */
	int		 nhdr;

	/* derived framing and connection semantics */
	int		 chunked;
	int64_t		 content_length;	/* -1 when absent */
	int		 conn_close;
	int		 conn_keepalive;
	int		 conn_upgrade;
	int		 expect_continue;
	const struct px_hdr *host;
	const struct px_hdr *upgrade;
};

enum px_body_kind {
	PX_BODY_NONE,		/* no body at all */
	PX_BODY_LENGTH,		/* Content-Length */
	PX_BODY_CHUNKED,	/* Transfer-Encoding: chunked */
	PX_BODY_CLOSE,		/* response delimited by close */
};

void px_head_init(struct px_head *, int request);
void px_head_reset(struct px_head *);

/*
 * Looks for one complete head at the start of buf[0..len) (a request if
 * the head was initialised as one, else a response). Returns the head's
 * length when it is complete and valid, 0 when more bytes are needed, or
 * -1 when these bytes can never become a valid head: then *status is the
 * HTTP status to answer with (400, 413, 431, 501, 505 for requests; 502
 * for responses) and *why a static text naming the reason. The lexer
 * resumes where the previous call stopped, so calling again with more
 * bytes costs only the new bytes.
 */
ssize_t px_head_parse(struct px_head *, const char *buf, size_t len,
    int *status, const char **why);

/* The first field named name (case-insensitive), or NULL. */
const struct px_hdr *px_head_get(const struct px_head *, const char *name);
/* 1 if a comma-separated header list in v[0..vlen) contains token. */
int px_list_has(const char *v, size_t vlen, const char *token);

/* Body framing of a request, or of a response to a request of method
 * req_method (HEAD and CONNECT change it). */
enum px_body_kind px_request_body(const struct px_head *);
enum px_body_kind px_response_body(const struct px_head *, int req_method);
/* 1 if the connection may carry another message after this one. */
int px_head_keepalive(const struct px_head *);

/*
 * Copies the request target t[0..len) to out (room for len bytes) without
 * any query parameter called name: its name percent-decoded and compared
 * ignoring ASCII case, separated from the others by '&' or ';' (some
 * frameworks split on either). A query left empty loses its '?'. Returns
 * the new length; *removed (if not NULL) gets how many were dropped.
 */
size_t px_target_strip_param(const char *t, size_t len, const char *name,
    char *out, int *removed);

/* Strict chunked-body decoder. */
struct px_chunk {
	int		 state;
	uint64_t	 remain;	/* data bytes left in this chunk */
	size_t		 linelen;	/* bytes in the current size/ext/trailer line */
	size_t		 trailer;	/* bytes of trailers so far */
	int		 digits;
};

void px_chunk_init(struct px_chunk *);
/*
 * Consumes framing from in[0..len) up to the next data span or the end of
 * the body. Returns the bytes consumed (0 <= n <= len); the last *dlen of
 * them are body data (starting at in + n - *dlen). Returns -1 with *why
 * set when the framing is invalid. Call again with the rest.
 */
ssize_t px_chunk_step(struct px_chunk *, const char *in, size_t len,
    size_t *dlen, const char **why);
int px_chunk_done(const struct px_chunk *);

#endif
