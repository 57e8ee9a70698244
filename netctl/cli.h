/*
 * cli.h — pieces of the netctl command-line client shared between its
 * files: a blocking HTTP/1.1 client for berthd's control socket.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CLI_H
#define BERTH_CLI_H

#include <stddef.h>

/* How long a request may wait for berthd's answer (default 30 s):
 * operations that boot a VM answer only once it runs. */
extern unsigned cli_timeout_secs;

struct cli_response {
	int status;		/* HTTP status code */
	char *body;		/* NUL-terminated; malloc'd, may be "" */
	size_t len;
	char content_type[128];
};

/*
 * Sends one request (body may be NULL) over the unix socket at sock_path
 * and reads the whole response (Content-Length, chunked or until close).
 * 0 on success with *resp filled (free it with cli_response_free), -1 with
 * err filled when berthd cannot be reached or answers something that is
 * not HTTP; *connect_failed tells the two apart.
 */
int cli_http_request(const char *sock_path, const char *method,
    const char *target, const char *body, struct cli_response *resp,
    int *connect_failed, char *err, size_t errlen);
void cli_response_free(struct cli_response *);

/* Where to send requests: url (http[s]://host:port) when not NULL, else
 * the unix socket. token: sent as a bearer token when not NULL. cacert:
 * CA file for https (NULL: the system's). */
struct cli_target {
	const char *sock_path;
	const char *url;
	const char *token;
	const char *cacert;
};

/* cli_http_request for any target. */
int cli_http_do(const struct cli_target *, const char *method,
    const char *target, const char *body, struct cli_response *resp,
    int *connect_failed, char *err, size_t errlen);

/*
 * One JSON request: body (may be NULL) is sent as JSON; *status gets the
 * HTTP status and *doc the parsed answer (NULL when empty or not JSON).
 * 0 when berthd answered (whatever the status), -1 with err filled when it
 * could not be reached (*unreachable 1) or answered garbage.
 */
struct json_t;
int cli_api(const struct cli_target *, const char *method,
    const char *target, struct json_t *body, int *status,
    struct json_t **doc, int *unreachable, char *err, size_t errlen);

/*
 * A streamed request (exec ?stream=1, files): opened with its head
 * queued; the body is queued with cli_stream_write (chunked when length
 * is -1; len 0 queues the last chunk) and sent by cli_stream_flush as
 * the socket takes it (non-blocking: poll cli_stream_fd for POLLOUT
 * while cli_stream_pending, for POLLIN always, and read without polling
 * while cli_stream_readable). cli_stream_recv appends the answer's body
 * to resp->body (the caller consumes it from the front: memmove and
 * lower len) and says 1 once it is complete.
 */
struct cli_stream;
struct cli_stream_resp {
	int status;		/* 0 until the head came */
	long long wake_ms;	/* Berth-Wake-Ms, -1 when absent */
	char content_type[128];
	unsigned char *body;
	size_t len, cap;
	int done;
};
struct cli_stream *cli_stream_open(const struct cli_target *,
    const char *method, const char *target, const char *ctype,
    long long length, int *connect_failed, char *err, size_t errlen);
int cli_stream_write(struct cli_stream *, const void *, size_t);
size_t cli_stream_pending(const struct cli_stream *);
int cli_stream_fd(const struct cli_stream *);
int cli_stream_readable(const struct cli_stream *);
int cli_stream_flush(struct cli_stream *, char *err, size_t errlen);
int cli_stream_recv(struct cli_stream *, struct cli_stream_resp **,
    char *err, size_t errlen);
void cli_stream_close(struct cli_stream *);

/* Percent-encodes s into out (outlen bytes, always NUL-terminated; what
 * does not fit is cut): letters, digits and the bytes in keep stay, any
 * other byte becomes %XX. */
void cli_pct_encode(const char *s, const char *keep, char *out,
    size_t outlen);
/* The same for a path in a query's ?path= ('/' stays). */
void cli_pct_path(const char *p, char *out, size_t outlen);

/* netctl mcp: serves MCP (JSON-RPC 2.0 over stdio lines) until EOF.
 * sandbox: default sandbox for tools that take one (may be NULL). */
int cli_mcp_serve(const struct cli_target *, const char *sandbox);

#endif
