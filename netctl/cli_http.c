/*
 * cli_http.c — netctl's HTTP/1.1 client: one request per connection over
 * a blocking unix socket or TCP (TLS verified against --cacert or the
 * system's CAs, with a bearer token), "Connection: close", the response parsed with
 * http-parser (so Content-Length, chunked and read-until-close bodies all
 * work). Timeouts keep a wedged berthd from hanging the CLI forever.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli.h"

#include <http_parser.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

unsigned cli_timeout_secs = 30;
#define CLI_MAX_BODY		(64u * 1024 * 1024)

struct reader {
	struct cli_response *resp;
	size_t cap;
	int in_ctype;		/* the header being read is Content-Type */
	int done;
	int too_big;
};

static int
on_header_field(http_parser *p, const char *at, size_t len)
{
	struct reader *rd = p->data;

	/* Field names arrive whole here for our small responses; a split
	 * name would only lose the content type, which is advisory. */
	rd->in_ctype = len == 12 && strncasecmp(at, "Content-Type", 12) == 0;
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t len)
{
	struct reader *rd = p->data;
	size_t have;

	if (!rd->in_ctype)
		return 0;
	have = strlen(rd->resp->content_type);
	if (len > sizeof(rd->resp->content_type) - 1 - have)
		len = sizeof(rd->resp->content_type) - 1 - have;
	memcpy(rd->resp->content_type + have, at, len);
	rd->resp->content_type[have + len] = '\0';
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct reader *rd = p->data;
	struct cli_response *r = rd->resp;
	char *nb;

	if (r->len + len > CLI_MAX_BODY) {
		rd->too_big = 1;
		return -1;
	}
	if (r->len + len + 1 > rd->cap) {
		size_t cap = rd->cap ? rd->cap : 4096;

		while (cap < r->len + len + 1)
			cap *= 2;
		if ((nb = realloc(r->body, cap)) == NULL)
			return -1;
		r->body = nb;
		rd->cap = cap;
	}
	memcpy(r->body + r->len, at, len);
	r->len += len;
	r->body[r->len] = '\0';
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct reader *rd = p->data;

	rd->done = 1;
	return 0;
}

/* A connection: a socket, maybe with TLS over it. */
struct link {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	const char *where;	/* for messages */
};

static int
link_send(struct link *l, const char *buf, size_t len)
{
	ssize_t n;
	int k;

	while (len > 0) {
		if (l->ssl != NULL) {
			k = SSL_write(l->ssl, buf, (int)len);
			if (k <= 0)
				return -1;
			n = k;
		} else {
			n = send(l->fd, buf, len, MSG_NOSIGNAL);
			if (n == -1) {
				if (errno == EINTR)
					continue;
				return -1;
			}
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Like recv(); a TLS close without close_notify counts as EOF. */
static ssize_t
link_recv(struct link *l, char *buf, size_t len)
{
	int k, e;

	if (l->ssl == NULL)
		return recv(l->fd, buf, len, 0);
	k = SSL_read(l->ssl, buf, (int)len);
	if (k > 0)
		return k;
	e = SSL_get_error(l->ssl, k);
	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL &&
	    ERR_peek_error() == 0 && errno == 0))
		return 0;
	if (e == SSL_ERROR_SYSCALL && errno == 0)
		return 0;
	if (errno == 0)
		errno = EIO;
	return -1;
}

static void
link_close(struct link *l)
{
	if (l->ssl != NULL)
		SSL_free(l->ssl);
	if (l->ctx != NULL)
		SSL_CTX_free(l->ctx);
	if (l->fd != -1)
		close(l->fd);
	l->ssl = NULL;
	l->ctx = NULL;
	l->fd = -1;
}

static int
open_unix(struct link *l, const char *sock_path, int *connect_failed,
    char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct timeval tv = { (time_t)cli_timeout_secs, 0 };

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(sock_path) >= sizeof(sun.sun_path)) {
		*connect_failed = 1;
		snprintf(err, errlen, "cannot connect to berthd at %s: path too "
		    "long for a unix socket", sock_path);
		return -1;
	}
	memcpy(sun.sun_path, sock_path, strlen(sock_path));
	if ((l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(l->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		*connect_failed = 1;
		snprintf(err, errlen, "cannot connect to berthd at %s: %s",
		    sock_path, strerror(errno));
		link_close(l);
		return -1;
	}
	return 0;
}

/* Splits http[s]://host[:port][/...] ; -1 if it is not such a URL. */
static int
parse_url(const char *url, int *tls, char *host, size_t hostlen, char *port,
    size_t portlen)
{
	const char *p, *end, *colon;
	size_t n;

	if (strncmp(url, "https://", 8) == 0) {
		*tls = 1;
		p = url + 8;
	} else if (strncmp(url, "http://", 7) == 0) {
		*tls = 0;
		p = url + 7;
	} else
		return -1;
	end = p + strcspn(p, "/?#");
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(end - p));

		if (rb == NULL)
			return -1;
		n = (size_t)(rb - p - 1);
		if (n == 0 || n >= hostlen)
			return -1;
		memcpy(host, p + 1, n);
		host[n] = '\0';
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		n = (size_t)((colon ? colon : end) - p);
		if (n == 0 || n >= hostlen)
			return -1;
		memcpy(host, p, n);
		host[n] = '\0';
	}
	if (colon != NULL) {
		n = (size_t)(end - colon - 1);
		if (n == 0 || n >= portlen)
			return -1;
		memcpy(port, colon + 1, n);
		port[n] = '\0';
	} else
		snprintf(port, portlen, "%s", *tls ? "443" : "80");
	return 0;
}

static int
open_url(struct link *l, const struct cli_target *t, int *connect_failed,
    char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct timeval tv = { (time_t)cli_timeout_secs, 0 };
	char host[256], port[16];
	const char *lookup = host;
	int tls, rc, e = 0;

	if (parse_url(t->url, &tls, host, sizeof(host), port,
	    sizeof(port)) == -1) {
		snprintf(err, errlen, "--url '%s': use https://HOST:PORT (or "
		    "http:// on loopback)", t->url);
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	/* RFC 6761: *.localhost is loopback, as curl and browsers have it
	 * (glibc's resolver does not), so https://api.berth.localhost:PORT/
	 * works without DNS set-up and still verifies the wildcard. */
	{
		size_t hl = strlen(host);

		if (hl > 10 && strcasecmp(host + hl - 10, ".localhost") == 0)
			lookup = "127.0.0.1";
	}
	if ((rc = getaddrinfo(lookup, port, &hints, &res)) != 0) {
		*connect_failed = 1;
		snprintf(err, errlen, "cannot connect to berthd at %s: %s",
		    t->url, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		l->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (l->fd == -1)
			continue;
		setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(l->fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		close(l->fd);
		l->fd = -1;
	}
	freeaddrinfo(res);
	if (l->fd == -1) {
		*connect_failed = 1;
		snprintf(err, errlen, "cannot connect to berthd at %s: %s",
		    t->url, strerror(e ? e : ECONNREFUSED));
		return -1;
	}
	if (!tls)
		return 0;
	if ((l->ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(l->ctx, TLS1_2_VERSION) != 1)
		goto tlsfail;
	SSL_CTX_set_verify(l->ctx, SSL_VERIFY_PEER, NULL);
	if (t->cacert != NULL && t->cacert[0] != '\0') {
		if (SSL_CTX_load_verify_locations(l->ctx, t->cacert, NULL) != 1) {
			snprintf(err, errlen, "CA file %s: cannot load it",
			    t->cacert);
			link_close(l);
			return -1;
		}
	} else if (SSL_CTX_set_default_verify_paths(l->ctx) != 1)
		goto tlsfail;
	if ((l->ssl = SSL_new(l->ctx)) == NULL ||
	    SSL_set_fd(l->ssl, l->fd) != 1 ||
	    SSL_set_tlsext_host_name(l->ssl, host) != 1 ||
	    SSL_set1_host(l->ssl, host) != 1)
		goto tlsfail;
	if (SSL_connect(l->ssl) != 1) {
		long v = SSL_get_verify_result(l->ssl);

		*connect_failed = 1;
		snprintf(err, errlen, "TLS with berthd at %s failed: %s", t->url,
		    v != X509_V_OK ? X509_verify_cert_error_string(v) :
		    "handshake error");
		link_close(l);
		return -1;
	}
	return 0;
tlsfail:
	snprintf(err, errlen, "TLS setup for %s failed", t->url);
	link_close(l);
	return -1;
}

void
cli_response_free(struct cli_response *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

int
cli_http_request(const char *sock_path, const char *method, const char *target,
    const char *body, struct cli_response *resp, int *connect_failed,
    char *err, size_t errlen)
{
	struct cli_target t = { sock_path, NULL, NULL, NULL };

	return cli_http_do(&t, method, target, body, resp, connect_failed, err,
	    errlen);
}

int
cli_http_do(const struct cli_target *t, const char *method,
    const char *target, const char *body, struct cli_response *resp,
    int *connect_failed, char *err, size_t errlen)
{
	static const http_parser_settings settings = {
		.on_header_field = on_header_field,
		.on_header_value = on_header_value,
		.on_body = on_body,
		.on_message_complete = on_message_complete,
	};
	struct link l = { -1, NULL, NULL, NULL };
	struct reader rd;
	http_parser parser;
	char head[3 * 4096 + 1024], buf[16384];
	size_t blen = body ? strlen(body) : 0;
	ssize_t n;
	int hlen;

	*connect_failed = 0;
	memset(resp, 0, sizeof(*resp));
	if (t->url != NULL) {
		l.where = t->url;
		if (open_url(&l, t, connect_failed, err, errlen) == -1)
			return -1;
	} else {
		l.where = t->sock_path;
		if (open_unix(&l, t->sock_path, connect_failed, err,
		    errlen) == -1)
			return -1;
	}

	hlen = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\n"
	    "Host: localhost\r\nUser-Agent: netctl\r\n"
	    "Accept: application/json\r\nConnection: close\r\n", method, target);
	if (t->token != NULL && t->token[0] != '\0')
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Authorization: Bearer %s\r\n", t->token);
	if (body != NULL)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Content-Type: application/json\r\nContent-Length: %zu\r\n",
		    blen);
	else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Content-Length: 0\r\n");
	hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen, "\r\n");
	if ((size_t)hlen >= sizeof(head)) {
		snprintf(err, errlen, "request target too long");
		link_close(&l);
		return -1;
	}
	if (link_send(&l, head, (size_t)hlen) == -1 ||
	    (blen > 0 && link_send(&l, body, blen) == -1)) {
		snprintf(err, errlen, "sending to berthd at %s: %s", l.where,
		    strerror(errno));
		link_close(&l);
		return -1;
	}

	memset(&rd, 0, sizeof(rd));
	rd.resp = resp;
	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = &rd;
	while (!rd.done) {
		errno = 0;
		n = link_recv(&l, buf, sizeof(buf));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			snprintf(err, errlen, "reading from berthd at %s: %s",
			    l.where, errno == EAGAIN ? "timed out" :
			    strerror(errno));
			goto fail;
		}
		/* n == 0 tells the parser about EOF (ends a body read until
		 * close, or is an error mid-message). */
		if (http_parser_execute(&parser, &settings, buf, (size_t)n) !=
		    (size_t)n || HTTP_PARSER_ERRNO(&parser) != HPE_OK) {
			snprintf(err, errlen, "bad response from berthd at %s: "
			    "%s", l.where, rd.too_big ? "body too large" :
			    http_errno_description(HTTP_PARSER_ERRNO(&parser)));
			goto fail;
		}
		if (n == 0 && !rd.done) {
			snprintf(err, errlen, "berthd at %s closed the "
			    "connection before answering", l.where);
			goto fail;
		}
	}
	link_close(&l);
	resp->status = parser.status_code;
	if (resp->body == NULL && (resp->body = strdup("")) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
fail:
	link_close(&l);
	cli_response_free(resp);
	return -1;
}

int
cli_api(const struct cli_target *t, const char *method, const char *target,
    json_t *body, int *status, json_t **doc, int *unreachable, char *err,
    size_t errlen)
{
	struct cli_response r;
	char *text = NULL;
	int rc;

	*doc = NULL;
	*status = 0;
	if (body != NULL && (text = json_dumps(body, JSON_COMPACT)) == NULL) {
		*unreachable = 0;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = cli_http_do(t, method, target, text, &r, unreachable, err, errlen);
	free(text);
	if (rc == -1)
		return -1;
	*status = r.status;
	if (r.len > 0)
		*doc = json_loadb(r.body, r.len, 0, NULL);
	cli_response_free(&r);
	return 0;
}

/* ---- streamed requests (exec --stream, cp) ---- */

struct cli_stream {
	struct link l;
	http_parser parser;
	int chunked;		/* the request body is sent chunked */
	int head_done;
	char field[32];		/* header name being read */
	int in_field;
	struct cli_stream_resp r;
	unsigned char *pend;	/* request bytes not yet sent */
	size_t plen, pcap;
};

static int
s_on_field(http_parser *p, const char *at, size_t len)
{
	struct cli_stream *s = p->data;
	size_t have = s->in_field ? strlen(s->field) : 0;

	if (!s->in_field)
		s->field[0] = '\0';
	s->in_field = 1;
	if (have + len < sizeof(s->field)) {
		memcpy(s->field + have, at, len);
		s->field[have + len] = '\0';
	}
	return 0;
}

static int
s_on_value(http_parser *p, const char *at, size_t len)
{
	struct cli_stream *s = p->data;
	char v[64];

	s->in_field = 0;
	if (strcasecmp(s->field, "Berth-Wake-Ms") == 0 && len < sizeof(v)) {
		memcpy(v, at, len);
		v[len] = '\0';
		s->r.wake_ms = strtoll(v, NULL, 10);
	} else if (strcasecmp(s->field, "Content-Type") == 0 &&
	    len < sizeof(s->r.content_type)) {
		memcpy(s->r.content_type, at, len);
		s->r.content_type[len] = '\0';
	}
	return 0;
}

static int
s_on_headers(http_parser *p)
{
	struct cli_stream *s = p->data;

	s->r.status = p->status_code;
	s->head_done = 1;
	return 0;
}

static int
s_on_body(http_parser *p, const char *at, size_t len)
{
	struct cli_stream *s = p->data;
	unsigned char *nb;
	size_t cap;

	if (s->r.len + len > s->r.cap) {
		cap = s->r.cap ? s->r.cap : 65536;
		while (cap < s->r.len + len)
			cap *= 2;
		if (cap > CLI_MAX_BODY || (nb = realloc(s->r.body, cap)) == NULL)
			return -1;
		s->r.body = nb;
		s->r.cap = cap;
	}
	memcpy(s->r.body + s->r.len, at, len);
	s->r.len += len;
	return 0;
}

static int
s_on_done(http_parser *p)
{
	struct cli_stream *s = p->data;

	s->r.done = 1;
	return 0;
}

static const http_parser_settings s_settings = {
	.on_header_field = s_on_field,
	.on_header_value = s_on_value,
	.on_headers_complete = s_on_headers,
	.on_body = s_on_body,
	.on_message_complete = s_on_done,
};

static int
s_queue(struct cli_stream *s, const void *p, size_t len)
{
	unsigned char *nb;
	size_t cap;

	if (s->plen + len > s->pcap) {
		cap = s->pcap ? s->pcap : 65536;
		while (cap < s->plen + len)
			cap *= 2;
		if ((nb = realloc(s->pend, cap)) == NULL)
			return -1;
		s->pend = nb;
		s->pcap = cap;
	}
	memcpy(s->pend + s->plen, p, len);
	s->plen += len;
	return 0;
}

struct cli_stream *
cli_stream_open(const struct cli_target *t, const char *method,
    const char *target, const char *ctype, long long length,
    int *connect_failed, char *err, size_t errlen)
{
	struct cli_stream *s;
	char head[3 * 4096 + 1024];
	int hlen;

	*connect_failed = 0;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->l.fd = -1;
	s->r.wake_ms = -1;
	if (t->url != NULL) {
		s->l.where = t->url;
		if (open_url(&s->l, t, connect_failed, err, errlen) == -1)
			goto fail;
	} else {
		s->l.where = t->sock_path;
		if (open_unix(&s->l, t->sock_path, connect_failed, err,
		    errlen) == -1)
			goto fail;
	}
	if (s->l.ssl != NULL)
		SSL_set_mode(s->l.ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
		    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	s->chunked = length < 0;
	hlen = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\n"
	    "Host: localhost\r\nUser-Agent: netctl\r\nConnection: close\r\n",
	    method, target);
	if (t->token != NULL && t->token[0] != '\0')
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Authorization: Bearer %s\r\n", t->token);
	if (ctype != NULL)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Content-Type: %s\r\n", ctype);
	if (s->chunked)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Transfer-Encoding: chunked\r\n\r\n");
	else if (strcmp(method, "GET") != 0)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Content-Length: %lld\r\n\r\n", length);
	else
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "\r\n");
	if ((size_t)hlen >= sizeof(head)) {
		snprintf(err, errlen, "request target too long");
		goto fail;
	}
	if (s_queue(s, head, (size_t)hlen) < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	http_parser_init(&s->parser, HTTP_RESPONSE);
	s->parser.data = s;
	/* poll-driven from here: neither direction may block the other */
	fcntl(s->l.fd, F_SETFL, fcntl(s->l.fd, F_GETFL) | O_NONBLOCK);
	return s;
fail:
	link_close(&s->l);
	free(s);
	return NULL;
}

int
cli_stream_write(struct cli_stream *s, const void *p, size_t len)
{
	char h[24];
	int n;

	if (!s->chunked)
		return len == 0 ? 0 : s_queue(s, p, len);
	n = snprintf(h, sizeof(h), "%zx\r\n", len);
	if (len == 0)	/* the last chunk */
		return s_queue(s, "0\r\n\r\n", 5);
	if (s_queue(s, h, (size_t)n) < 0 || s_queue(s, p, len) < 0 ||
	    s_queue(s, "\r\n", 2) < 0)
		return -1;
	return 0;
}

size_t
cli_stream_pending(const struct cli_stream *s)
{
	return s->plen;
}

int
cli_stream_fd(const struct cli_stream *s)
{
	return s->l.fd;
}

int
cli_stream_readable(const struct cli_stream *s)
{
	return s->l.ssl != NULL && SSL_pending(s->l.ssl) > 0;
}

/* Sends what it can of the queued request bytes; -1 when the
 * connection broke. */
int
cli_stream_flush(struct cli_stream *s, char *err, size_t errlen)
{
	ssize_t n;
	int k, e;

	while (s->plen > 0) {
		if (s->l.ssl != NULL) {
			ERR_clear_error();
			k = SSL_write(s->l.ssl, s->pend, (int)(s->plen > 65536 ?
			    65536 : s->plen));
			if (k <= 0) {
				e = SSL_get_error(s->l.ssl, k);
				if (e == SSL_ERROR_WANT_WRITE ||
				    e == SSL_ERROR_WANT_READ)
					return 0;
				snprintf(err, errlen, "sending to berthd at %s "
				    "failed", s->l.where);
				return -1;
			}
			n = k;
		} else {
			n = send(s->l.fd, s->pend, s->plen, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			if (n < 0) {
				snprintf(err, errlen, "sending to berthd at %s: "
				    "%s", s->l.where, strerror(errno));
				return -1;
			}
		}
		memmove(s->pend, s->pend + n, s->plen - (size_t)n);
		s->plen -= (size_t)n;
	}
	return 0;
}

/* Reads what has come; the body grows in the response. 1 when the
 * answer is complete, 0 for more, -1 with err. */
int
cli_stream_recv(struct cli_stream *s, struct cli_stream_resp **rp, char *err,
    size_t errlen)
{
	char buf[65536];
	ssize_t n;
	int k, e;

	*rp = &s->r;
	for (;;) {
		if (s->r.done)
			return 1;
		if (s->l.ssl != NULL) {
			ERR_clear_error();
			k = SSL_read(s->l.ssl, buf, sizeof(buf));
			if (k > 0)
				n = k;
			else {
				e = SSL_get_error(s->l.ssl, k);
				if (e == SSL_ERROR_WANT_READ ||
				    e == SSL_ERROR_WANT_WRITE)
					return 0;
				n = 0;	/* closed (or broken): EOF */
			}
		} else {
			n = recv(s->l.fd, buf, sizeof(buf), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			if (n < 0) {
				snprintf(err, errlen, "reading from berthd at "
				    "%s: %s", s->l.where, strerror(errno));
				return -1;
			}
		}
		if (http_parser_execute(&s->parser, &s_settings, buf,
		    (size_t)n) != (size_t)n ||
		    HTTP_PARSER_ERRNO(&s->parser) != HPE_OK) {
			snprintf(err, errlen, "bad response from berthd at %s: "
			    "%s", s->l.where, http_errno_description(
			    HTTP_PARSER_ERRNO(&s->parser)));
			return -1;
		}
		if (n == 0 && !s->r.done) {
			snprintf(err, errlen, "berthd at %s closed the "
			    "connection before the answer was complete",
			    s->l.where);
			return -1;
		}
	}
}

void
cli_stream_close(struct cli_stream *s)
{
	if (s == NULL)
		return;
	link_close(&s->l);
	free(s->pend);
	free(s->r.body);
	free(s);
}

void
cli_pct_encode(const char *s, const char *keep, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s != '\0' && o + 4 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;

		if (isalnum(ch) || strchr(keep, ch) != NULL)
			out[o++] = (char)ch;
		else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o] = '\0';
}

void
cli_pct_path(const char *p, char *out, size_t outlen)
{
	cli_pct_encode(p, "/-._~", out, outlen);
}
