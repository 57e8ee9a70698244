// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * testapp: a small HTTP/1.1 server with a demo page, an SSE stream and a
 * WebSocket echo. It runs on port 8080 inside the default guest template
 * and is also the upstream that the proxy's integration tests talk to on
 * the host, so its HTTP parser is deliberately strict: anything ambiguous
 * (bare LF, obs-fold, CL+TE, odd Transfer-Encoding, bad chunk sizes) is
 * rejected and the connection closed, and every request head it accepts is
 * logged (-L) so tests can count what really reached the upstream.
 *
 * libc + pthreads only, so it links -static into the guest initramfs.
 * One thread per connection; requests on a connection are handled in
 * order, which is what makes pipelining answer in order for free.
 *
 * In the guest, init runs it with -d /data: PUT/GET/DELETE /files/NAME
 * then let host tests write and read back files on the persistent disk,
 * and /info (pid, start time, boot id) shows whether the process and the
 * boot survived a pause, suspend or resume; its mem_total_kib and cpus
 * (MemTotal, the CPUs it may run on) what the VM was given.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../proto/status.h"

#define RBUF_SIZE	65536	/* input buffer per connection */
#define HEAD_MAX	65536	/* whole request head, all lines */
#define LINE_MAX_	8192	/* one request line or header line */
#define MAX_HDRS	100

struct hdr {
	char		*name;
	char		*value;
};

struct req {
	char		*method;
	char		*target;
	char		*path;		/* target without query, NUL-terminated copy */
	char		*query;		/* after '?', or "" */
	int		 minor;		/* HTTP/1.<minor> */
	struct hdr	 hdrs[MAX_HDRS];
	int		 nhdrs;
	int		 head;		/* HEAD: no response body */
	int		 keepalive;
	int		 upgrade_ws;	/* Upgrade: websocket + Connection: upgrade */
	int		 expect;	/* Expect: 100-continue, not yet answered */
	int		 chunked;
	uint64_t	 left;		/* CL bytes left, or bytes left in chunk */
	int		 in_chunk;	/* chunk data read, its CRLF not yet */
	int		 body_done;
	uint64_t	 body_bytes;
};

struct conn {
	int		 fd;
	unsigned long	 id;
	size_t		 rbeg, rend;
	char		 rbuf[RBUF_SIZE];
	size_t		 headlen;
	char		 head[HEAD_MAX];	/* NUL-separated copies of head lines */
	char		 pathbuf[LINE_MAX_ + 1];
};

static int log_fd = -1;
static int data_dirfd = -1;		/* -d: /files/NAME lives here */
static unsigned long conns_accepted;	/* connection ids come from here */
static time_t started;

/* ---- small helpers ---------------------------------------------------- */

static void
msleep(unsigned long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static int
is_tchar(unsigned char ch)
{
	if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
	    (ch >= 'A' && ch <= 'Z'))
		return 1;
	return ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static int
is_token(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!is_tchar((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Is `tok` one of the comma-separated tokens of header value `v`? */
static int
list_has(const char *v, const char *tok)
{
	size_t tl = strlen(tok);

	while (*v) {
		const char *e;
		size_t n;

		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		e = v;
		while (*e && *e != ',')
			e++;
		n = (size_t)(e - v);
		while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		if (n == tl && strncasecmp(v, tok, tl) == 0)
			return 1;
		v = e;
	}
	return 0;
}

static const char *
req_header(const struct req *r, const char *name)
{
	int i;

	for (i = 0; i < r->nhdrs; i++)
		if (strcasecmp(r->hdrs[i].name, name) == 0)
			return r->hdrs[i].value;
	return NULL;
}

/* Strict decimal: digits only, no sign, no spaces, bounded. */
static int
parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 19)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/*
 * Query parameter lookup: 1 found (value in *v, length *vn), 0 absent.
 * No percent-decoding: every parameter this app takes is a number.
 */
static int
query_get(const char *q, const char *name, const char **v, size_t *vn)
{
	size_t nl = strlen(name);

	while (*q) {
		const char *e = strchr(q, '&');

		if (!e)
			e = q + strlen(q);
		if ((size_t)(e - q) >= nl && strncmp(q, name, nl) == 0 &&
		    (q[nl] == '=' || q + nl == e)) {
			*v = q[nl] == '=' ? q + nl + 1 : e;
			*vn = (size_t)(e - *v);
			return 1;
		}
		q = *e ? e + 1 : e;
	}
	return 0;
}

/* -1: present but not a number <= max; 0: absent (def used); 1: parsed. */
static int
query_num(const char *q, const char *name, uint64_t def, uint64_t max,
    uint64_t *out)
{
	const char *v;
	size_t vn;

	*out = def;
	if (!query_get(q, name, &v, &vn))
		return 0;
	return parse_u64(v, vn, max, out) == 0 ? 1 : -1;
}

/* ---- output ----------------------------------------------------------- */

static int
send_iov(struct conn *c, struct iovec *iov, int cnt)
{
	while (cnt > 0) {
		struct msghdr mh;
		ssize_t n;

		memset(&mh, 0, sizeof mh);
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)cnt;
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int
send_all(struct conn *c, const void *p, size_t n)
{
	struct iovec iov = { (void *)(uintptr_t)p, n };

	return send_iov(c, &iov, 1);
}


/*
 * Status line and headers. clen < 0 means the body is streamed: chunked
 * for HTTP/1.1, close-delimited for HTTP/1.0 (which has no chunking).
 */
static int
send_head(struct conn *c, struct req *r, int code, const char *ctype,
    const char *extra, long long clen)
{
	char h[1024];
	int n;

	if (clen < 0 && r->minor == 0)
		r->keepalive = 0;
	n = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nServer: berth-testapp\r\n"
	    "%s%s%s%s",
	    code, px_status_text(code),
	    ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "",
	    extra ? extra : "");
	if (code != 204 && code != 304 && code >= 200) {
		if (clen >= 0)
			n += snprintf(h + n, sizeof h - (size_t)n,
			    "Content-Length: %lld\r\n", clen);
		else if (r->minor == 1)
			n += snprintf(h + n, sizeof h - (size_t)n,
			    "Transfer-Encoding: chunked\r\n");
	}
	n += snprintf(h + n, sizeof h - (size_t)n, "%s\r\n",
	    r->keepalive ? "" : "Connection: close\r\n");
	if (n >= (int)sizeof h)
		return -1;
	return send_all(c, h, (size_t)n);
}

static int
respond(struct conn *c, struct req *r, int code, const char *ctype,
    const char *extra, const char *body, size_t len)
{
	if (code == 204 || code == 304)
		len = 0;
	if (send_head(c, r, code, ctype, extra, (long long)len) < 0)
		return -1;
	if (r->head || len == 0)
		return 0;
	return send_all(c, body, len);
}

static int respond_text(struct conn *, struct req *, int, const char *, ...)
    __attribute__((format(printf, 4, 5)));

static int
respond_text(struct conn *c, struct req *r, int code, const char *fmt, ...)
{
	char body[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof body)
		n = 0;
	return respond(c, r, code, "text/plain; charset=utf-8", NULL, body,
	    (size_t)n);
}

/* One chunk of a chunked body (or raw bytes for a close-delimited one). */
static int
send_chunk(struct conn *c, struct req *r, const void *p, size_t n)
{
	char pre[24];
	struct iovec iov[3];

	if (n == 0)
		return 0;
	if (r->minor == 0)
		return send_all(c, p, n);
	iov[0].iov_base = pre;
	iov[0].iov_len = (size_t)snprintf(pre, sizeof pre, "%zx\r\n", n);
	iov[1].iov_base = (void *)(uintptr_t)p;
	iov[1].iov_len = n;
	iov[2].iov_base = (void *)(uintptr_t)"\r\n";
	iov[2].iov_len = 2;
	return send_iov(c, iov, 3);
}

static int
send_last_chunk(struct conn *c, struct req *r)
{
	if (r->minor == 0)
		return 0;
	return send_all(c, "0\r\n\r\n", 5);
}

/* ---- input ------------------------------------------------------------ */

/* >0 bytes added, 0 EOF, -1 error or timeout. */
static ssize_t
rd_fill(struct conn *c)
{
	ssize_t n;

	if (c->rbeg == c->rend) {
		c->rbeg = c->rend = 0;
	} else if (c->rend == sizeof c->rbuf) {
		if (c->rbeg == 0)
			return -1;
		memmove(c->rbuf, c->rbuf + c->rbeg, c->rend - c->rbeg);
		c->rend -= c->rbeg;
		c->rbeg = 0;
	}
	do
		n = recv(c->fd, c->rbuf + c->rend, sizeof c->rbuf - c->rend, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		c->rend += (size_t)n;
	return n;
}

/*
 * One CRLF-terminated line of at most `max` bytes, NUL-terminated in place
 * (valid until the next read). 1 ok; 0 clean EOF before any byte; -1 I/O
 * error or EOF mid-line; -2 malformed (bare LF, too long).
 */
static int
rd_line(struct conn *c, size_t max, char **out, size_t *outlen)
{
	size_t scanned = 0;

	for (;;) {
		char *s = c->rbuf + c->rbeg;
		char *lf = memchr(s + scanned, '\n', c->rend - c->rbeg - scanned);
		ssize_t r;

		if (lf) {
			size_t n = (size_t)(lf - s);

			/* A bare LF is where parsers disagree: refuse it. */
			if (n == 0 || s[n - 1] != '\r')
				return -2;
			if (n - 1 > max)
				return -2;
			s[n - 1] = '\0';
			*out = s;
			*outlen = n - 1;
			c->rbeg += n + 1;
			return 1;
		}
		scanned = c->rend - c->rbeg;
		if (scanned > max + 1)
			return -2;
		r = rd_fill(c);
		if (r == 0)
			return scanned == 0 ? 0 : -1;
		if (r < 0)
			return -1;
	}
}

/* Up to n bytes: >0 read, -1 error or EOF (callers know how much is due). */
static ssize_t
rd_some(struct conn *c, void *buf, size_t n)
{
	size_t have;

	if (c->rbeg == c->rend && rd_fill(c) <= 0)
		return -1;
	have = c->rend - c->rbeg;
	if (n > have)
		n = have;
	memcpy(buf, c->rbuf + c->rbeg, n);
	c->rbeg += n;
	return (ssize_t)n;
}

static int
rd_exact(struct conn *c, void *buf, size_t n)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = rd_some(c, p, n);

		if (r < 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Header field syntax (also used for chunked trailers). 0 ok, -1 bad. */
static int
split_field(char *line, size_t len, char **name, char **value)
{
	char *colon, *v, *e;
	size_t i;

	/* obs-fold (a continuation line) is rejected, not joined. */
	if (line[0] == ' ' || line[0] == '\t')
		return -1;
	colon = memchr(line, ':', len);
	/* No whitespace before the colon: RFC 9112 section 5.1. */
	if (!colon || !is_token(line, (size_t)(colon - line)))
		return -1;
	*colon = '\0';
	for (i = (size_t)(colon - line) + 1; i < len; i++) {
		unsigned char ch = (unsigned char)line[i];

		if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
			return -1;
	}
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	e = line + len;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*e = '\0';
	*name = line;
	*value = v;
	return 0;
}

static void
log_request(struct conn *c, const struct req *r)
{
	char line[LINE_MAX_ + 128];
	int n;

	if (log_fd < 0)
		return;
	n = snprintf(line, sizeof line, "%lu %s %s\n", c->id, r->method,
	    r->target);
	if (n > 0 && n < (int)sizeof line) {
		/* One write on an O_APPEND fd: lines from threads never mix. */
		if (write(log_fd, line, (size_t)n) < 0)
			perror("testapp: request log");
	}
}

/*
 * Read and check one request head. Returns 1 ok, 0 clean EOF, -1 close
 * silently (I/O error), or an HTTP status to answer before closing.
 */
static int
read_head(struct conn *c, struct req *r)
{
	char *line, *sp1, *sp2, *ver, *q;
	const char *te = NULL, *cl = NULL, *v;
	size_t len;
	int rc, empties = 0, nhost = 0, nte = 0;
	uint64_t clen = 0;

	memset(r, 0, sizeof *r);
	c->headlen = 0;

	/* RFC 9112 2.2: ignore a few empty lines before a request line. */
	for (;;) {
		rc = rd_line(c, LINE_MAX_, &line, &len);
		if (rc == 0)
			return 0;
		if (rc == -1)
			return -1;
		if (rc == -2)
			return 400;
		if (len)
			break;
		if (++empties > 4)
			return 400;
	}
	memcpy(c->head, line, len + 1);
	c->headlen = len + 1;
	line = c->head;

	sp1 = memchr(line, ' ', len);
	if (!sp1 || !is_token(line, (size_t)(sp1 - line)))
		return 400;
	*sp1 = '\0';
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2 || sp2 == sp1 + 1)
		return 400;
	*sp2 = '\0';
	for (q = sp1 + 1; q < sp2; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return 400;
	ver = sp2 + 1;
	if (strcmp(ver, "HTTP/1.1") == 0)
		r->minor = 1;
	else if (strcmp(ver, "HTTP/1.0") == 0)
		r->minor = 0;
	else if (strncmp(ver, "HTTP/", 5) == 0 && ver[5] >= '0' &&
	    ver[5] <= '9' && ver[6] == '.' && ver[7] >= '0' && ver[7] <= '9' &&
	    ver[8] == '\0')
		return 505;
	else
		return 400;
	r->method = line;
	r->target = sp1 + 1;

	for (;;) {
		char *name, *value;

		rc = rd_line(c, LINE_MAX_, &line, &len);
		if (rc == 0 || rc == -1)
			return -1;
		if (rc == -2)
			return 431;
		if (len == 0)
			break;
		if (r->nhdrs == MAX_HDRS || c->headlen + len + 1 > HEAD_MAX)
			return 431;
		memcpy(c->head + c->headlen, line, len + 1);
		line = c->head + c->headlen;
		c->headlen += len + 1;
		if (split_field(line, len, &name, &value) < 0)
			return 400;
		r->hdrs[r->nhdrs].name = name;
		r->hdrs[r->nhdrs].value = value;
		r->nhdrs++;
		if (strcasecmp(name, "host") == 0) {
			nhost++;
		} else if (strcasecmp(name, "transfer-encoding") == 0) {
			nte++;
			te = value;
		} else if (strcasecmp(name, "content-length") == 0) {
			uint64_t n;

			/* Differing duplicates are a smuggling vector. */
			if (parse_u64(value, strlen(value), (uint64_t)1 << 50, &n) < 0)
				return 400;
			if (cl && n != clen)
				return 400;
			cl = value;
			clen = n;
		}
	}

	/* Framing: exactly one way to find the end of the body. */
	if (te) {
		if (r->minor == 0 || cl || nte > 1)
			return 400;
		if (strcasecmp(te, "chunked") != 0)
			return 501;
		r->chunked = 1;
	} else {
		r->left = clen;
		if (clen == 0)
			r->body_done = 1;
	}
	if (r->minor == 1 && nhost != 1)
		return 400;
	if (nhost > 1)
		return 400;

	v = req_header(r, "connection");
	r->keepalive = r->minor == 1 && !(v && list_has(v, "close"));
	if ((v = req_header(r, "expect")) != NULL) {
		if (strcasecmp(v, "100-continue") != 0)
			return 417;
		if (!r->body_done)
			r->expect = 1;
	}
	v = req_header(r, "upgrade");
	if (v && list_has(v, "websocket") && r->minor == 1) {
		const char *cv = req_header(r, "connection");

		r->upgrade_ws = cv && list_has(cv, "upgrade");
	}
	r->head = strcmp(r->method, "HEAD") == 0;

	/* Origin-form is what proxies send; accept absolute-form too. */
	q = r->target;
	if (strncasecmp(q, "http://", 7) == 0 || strncasecmp(q, "https://", 8) == 0) {
		q = strstr(q, "://") + 3;
		q += strcspn(q, "/?");
	}
	len = strcspn(q, "?");
	memcpy(c->pathbuf, q, len);
	c->pathbuf[len] = '\0';
	if (len == 0) {
		c->pathbuf[0] = '/';
		c->pathbuf[1] = '\0';
	}
	r->path = c->pathbuf;
	r->query = q[len] == '?' ? q + len + 1 : q + len;
	log_request(c, r);
	return 1;
}

/*
 * Read body bytes: >0 read, 0 end of body, -1 malformed or I/O error.
 * Sends "100 Continue" the first time a client that asked for it is read.
 */
static ssize_t
body_read(struct conn *c, struct req *r, void *buf, size_t n)
{
	ssize_t got;

	if (r->body_done)
		return 0;
	if (r->expect) {
		r->expect = 0;
		if (send_all(c, "HTTP/1.1 100 Continue\r\n\r\n", 25) < 0)
			return -1;
	}
	if (r->chunked && r->left == 0) {
		char *line, *p;
		size_t len;
		uint64_t size = 0;
		int digits = 0;

		if (r->in_chunk) {
			/* The CRLF that must follow chunk data, nothing else. */
			if (rd_line(c, 0, &line, &len) != 1)
				return -1;
			r->in_chunk = 0;
		}
		if (rd_line(c, 1024, &line, &len) != 1)
			return -1;
		for (p = line; *p; p++, digits++) {
			int d;

			if (*p >= '0' && *p <= '9')
				d = *p - '0';
			else if (*p >= 'a' && *p <= 'f')
				d = *p - 'a' + 10;
			else if (*p >= 'A' && *p <= 'F')
				d = *p - 'A' + 10;
			else
				break;
			if (digits >= 15)	/* no overflow games */
				return -1;
			size = size * 16 + (uint64_t)d;
		}
		if (digits == 0)
			return -1;
		/* Only chunk extensions may follow the size: BWS ";" ... */
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p && *p != ';')
			return -1;
		for (; *p; p++)
			if (*p != '\t' && ((unsigned char)*p < 0x20 || *p == 0x7f))
				return -1;
		if (size == 0) {
			int ntrail = 0;

			for (;;) {
				char *name, *value;

				if (rd_line(c, LINE_MAX_, &line, &len) != 1)
					return -1;
				if (len == 0)
					break;
				if (++ntrail > MAX_HDRS ||
				    split_field(line, len, &name, &value) < 0)
					return -1;
			}
			r->body_done = 1;
			return 0;
		}
		r->left = size;
		r->in_chunk = 1;
	}
	if (n > r->left)
		n = (size_t)r->left;
	got = rd_some(c, buf, n);
	if (got < 0)
		return -1;
	r->left -= (uint64_t)got;
	r->body_bytes += (uint64_t)got;
	if (!r->chunked && r->left == 0)
		r->body_done = 1;
	return got;
}

static int
drain_body(struct conn *c, struct req *r)
{
	char buf[16384];
	ssize_t n;

	while ((n = body_read(c, r, buf, sizeof buf)) > 0)
		;
	return n < 0 ? -1 : 0;
}

/* ---- SHA-1 and base64, for Sec-WebSocket-Accept ------------------------ */

struct sha1 {
	uint32_t	h[5];
	uint64_t	len;
	unsigned char	buf[64];
	size_t		n;
};

static uint32_t
rol32(uint32_t v, int s)
{
	return (v << s) | (v >> (32 - s));
}

static void
sha1_block(struct sha1 *s, const unsigned char *p)
{
	uint32_t w[80], a, b, c, d, e, f, k, t;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		    (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 80; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3]; e = s->h[4];
	for (i = 0; i < 80; i++) {
		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		t = rol32(a, 5) + f + e + k + w[i];
		e = d; d = c; c = rol32(b, 30); b = a; a = t;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d; s->h[4] += e;
}

static void
sha1_init(struct sha1 *s)
{
	static const uint32_t iv[5] = {
		0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0
	};

	memcpy(s->h, iv, sizeof iv);
	s->len = 0;
	s->n = 0;
}

static void
sha1_update(struct sha1 *s, const void *data, size_t n)
{
	const unsigned char *p = data;

	s->len += n;
	while (n > 0) {
		size_t take = 64 - s->n;

		if (take > n)
			take = n;
		memcpy(s->buf + s->n, p, take);
		s->n += take;
		p += take;
		n -= take;
		if (s->n == 64) {
			sha1_block(s, s->buf);
			s->n = 0;
		}
	}
}

static void
sha1_final(struct sha1 *s, unsigned char out[20])
{
	uint64_t bits = s->len * 8;
	unsigned char pad[72];
	size_t padlen = (s->n < 56 ? 56 : 120) - s->n;
	int i;

	memset(pad, 0, sizeof pad);
	pad[0] = 0x80;
	for (i = 0; i < 8; i++)
		pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_update(s, pad, padlen + 8);
	for (i = 0; i < 20; i++)
		out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

static void
base64(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		*out++ = tab[v >> 18];
		*out++ = tab[(v >> 12) & 63];
		*out++ = tab[(v >> 6) & 63];
		*out++ = tab[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 |
		    (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);

		*out++ = tab[v >> 18];
		*out++ = tab[(v >> 12) & 63];
		*out++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*out++ = '=';
	}
	*out = '\0';
}

static void
ws_accept_key(const char *key, char out[29])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char d[20];
	struct sha1 s;

	sha1_init(&s);
	sha1_update(&s, key, strlen(key));
	sha1_update(&s, guid, sizeof guid - 1);
	sha1_final(&s, d);
	base64(d, 20, out);
}

/* ---- WebSocket echo (RFC 6455) ---------------------------------------- */

/* Incremental UTF-8 check: text messages may split characters over frames. */
struct u8state {
	int		need;
	unsigned char	lo, hi;
};

static int
u8_feed(struct u8state *s, const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char b = p[i];

		if (s->need) {
			if (b < s->lo || b > s->hi)
				return -1;
			s->lo = 0x80;
			s->hi = 0xbf;
			s->need--;
			continue;
		}
		if (b < 0x80)
			continue;
		s->lo = 0x80;
		s->hi = 0xbf;
		if (b >= 0xc2 && b <= 0xdf)
			s->need = 1;
		else if (b == 0xe0)
			s->need = 2, s->lo = 0xa0;
		else if (b == 0xed)
			s->need = 2, s->hi = 0x9f;	/* no surrogates */
		else if (b >= 0xe1 && b <= 0xef)
			s->need = 2;
		else if (b == 0xf0)
			s->need = 3, s->lo = 0x90;
		else if (b >= 0xf1 && b <= 0xf3)
			s->need = 3;
		else if (b == 0xf4)
			s->need = 3, s->hi = 0x8f;
		else
			return -1;
	}
	return 0;
}

static int
ws_send_head(struct conn *c, int fin, int op, uint64_t len)
{
	unsigned char h[10];
	size_t n = 2;

	h[0] = (unsigned char)((fin ? 0x80 : 0) | op);
	if (len < 126) {
		h[1] = (unsigned char)len;
	} else if (len <= 0xffff) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		n = 4;
	} else {
		int i;

		h[1] = 127;
		for (i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)(len >> (56 - 8 * i));
		n = 10;
	}
	return send_all(c, h, n);
}

static void
ws_close(struct conn *c, int code)
{
	unsigned char p[2] = { (unsigned char)(code >> 8), (unsigned char)code };

	if (ws_send_head(c, 1, 8, code ? 2 : 0) == 0 && code)
		send_all(c, p, 2);
}

static int
ws_close_code_ok(int code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) ||
	    (code >= 3000 && code <= 4999);
}

/*
 * Echo frames as they come, one out for one in, so fragmentation is
 * preserved and memory stays constant whatever the message size.
 */
static void
ws_loop(struct conn *c)
{
	struct u8state u8 = { 0, 0x80, 0xbf };
	int in_msg = 0, msg_op = 0;

	for (;;) {
		unsigned char h[2], ext[8], key[4], buf[16384];
		uint64_t len, off = 0;
		int fin, op, i;

		if (rd_exact(c, h, 2) < 0)
			return;
		fin = h[0] & 0x80;
		op = h[0] & 0x0f;
		len = h[1] & 0x7f;
		/* No extension was negotiated, and clients must mask. */
		if ((h[0] & 0x70) || !(h[1] & 0x80)) {
			ws_close(c, 1002);
			return;
		}
		if (len == 126) {
			if (rd_exact(c, ext, 2) < 0)
				return;
			len = (uint64_t)ext[0] << 8 | ext[1];
		} else if (len == 127) {
			if (rd_exact(c, ext, 8) < 0)
				return;
			for (len = 0, i = 0; i < 8; i++)
				len = len << 8 | ext[i];
			if (len >> 63) {
				ws_close(c, 1002);
				return;
			}
		}
		if (rd_exact(c, key, 4) < 0)
			return;

		if (op & 8) {
			unsigned char p[125];

			if (!fin || len > 125) {
				ws_close(c, 1002);
				return;
			}
			if (rd_exact(c, p, (size_t)len) < 0)
				return;
			for (i = 0; i < (int)len; i++)
				p[i] ^= key[i & 3];
			if (op == 8) {
				struct u8state rs = { 0, 0x80, 0xbf };
				int code;

				if (len == 0) {
					ws_close(c, 0);
					return;
				}
				code = len >= 2 ? p[0] << 8 | p[1] : 0;
				if (len == 1 || !ws_close_code_ok(code)) {
					ws_close(c, 1002);
					return;
				}
				if (u8_feed(&rs, p + 2, (size_t)len - 2) < 0 ||
				    rs.need) {
					ws_close(c, 1007);
					return;
				}
				ws_close(c, code);
				return;
			} else if (op == 9) {
				if (ws_send_head(c, 1, 10, len) < 0 ||
				    (len && send_all(c, p, (size_t)len) < 0))
					return;
			} else if (op != 10) {
				ws_close(c, 1002);
				return;
			}
			continue;
		}

		if (op == 0) {
			if (!in_msg) {
				ws_close(c, 1002);
				return;
			}
		} else if (op == 1 || op == 2) {
			if (in_msg) {
				ws_close(c, 1002);
				return;
			}
			in_msg = 1;
			msg_op = op;
			u8.need = 0;
		} else {
			ws_close(c, 1002);
			return;
		}
		if (ws_send_head(c, fin, op, len) < 0)
			return;
		while (off < len) {
			size_t want = sizeof buf;
			ssize_t got;

			if (want > len - off)
				want = (size_t)(len - off);
			got = rd_some(c, buf, want);
			if (got < 0)
				return;
			for (i = 0; i < (int)got; i++)
				buf[i] ^= key[(off + (uint64_t)i) & 3];
			off += (uint64_t)got;
			/* Mid-frame we cannot send a close frame: just drop. */
			if (msg_op == 1 && u8_feed(&u8, buf, (size_t)got) < 0)
				return;
			if (send_all(c, buf, (size_t)got) < 0)
				return;
		}
		if (fin) {
			in_msg = 0;
			if (msg_op == 1 && u8.need) {
				ws_close(c, 1007);
				return;
			}
		}
	}
}

/* ---- handlers --------------------------------------------------------- */

static const char index_html[] =
    "<!doctype html>\n"
    "<html><head><meta charset=\"utf-8\"><title>berth test app</title></head>\n"
    "<body>\n"
    "<h1>berth test app</h1>\n"
    "<p>WebSocket echo:</p>\n"
    "<div id=\"echo\">(waiting)</div>\n"
    "<script>\n"
    "(function () {\n"
    "  var el = document.getElementById('echo');\n"
    "  var url = (location.protocol == 'https:' ? 'wss' : 'ws') + '://' +\n"
    "      location.host + '/ws';\n"
    "  var ws = new WebSocket(url);\n"
    "  ws.onopen = function () { ws.send('hello from browser'); };\n"
    "  ws.onmessage = function (e) {\n"
    "    el.textContent = e.data;\n"
    "    document.title = 'echo: ' + e.data;\n"
    "  };\n"
    "  ws.onerror = function () { el.textContent = 'websocket error'; };\n"
    "})();\n"
    "</script>\n"
    "</body></html>\n";

static int
h_ws(struct conn *c, struct req *r)
{
	const char *key, *ver, *v;
	char accept[29], h[256];
	size_t vn;
	int n;

	if (!r->upgrade_ws)
		return respond(c, r, 426, "text/plain; charset=utf-8",
		    "Upgrade: websocket\r\nConnection: Upgrade\r\n",
		    "websocket upgrade required\n", 27);
	/* Lets tests check that a proxy does not tunnel a refused upgrade. */
	if (query_get(r->query, "refuse", &v, &vn) && !(vn == 1 && v[0] == '0'))
		return respond_text(c, r, 403, "upgrade refused\n");
	ver = req_header(r, "sec-websocket-version");
	if (!ver || strcmp(ver, "13") != 0)
		return respond(c, r, 426, "text/plain; charset=utf-8",
		    "Sec-WebSocket-Version: 13\r\n",
		    "websocket version 13 required\n", 30);
	key = req_header(r, "sec-websocket-key");
	if (!key || strlen(key) != 24 || key[22] != '=' || key[23] != '=')
		return respond_text(c, r, 400, "bad Sec-WebSocket-Key\n");
	ws_accept_key(key, accept);
	n = snprintf(h, sizeof h, "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
	if (send_all(c, h, (size_t)n) < 0)
		return -1;
	ws_loop(c);
	return -1;	/* the connection is done either way */
}

static int
h_sse(struct conn *c, struct req *r)
{
	uint64_t count, interval, i;

	if (query_num(r->query, "count", 5, 1000000, &count) < 0 ||
	    query_num(r->query, "interval", 100, 3600000, &interval) < 0)
		return respond_text(c, r, 400, "bad count or interval\n");
	if (send_head(c, r, 200, "text/event-stream",
	    "Cache-Control: no-cache\r\n", -1) < 0)
		return -1;
	if (r->head)
		return 0;
	for (i = 1; i <= count; i++) {
		char ev[64];
		int n = snprintf(ev, sizeof ev, "data: event %llu\n\n",
		    (unsigned long long)i);

		if (i > 1)
			msleep(interval);
		if (send_chunk(c, r, ev, (size_t)n) < 0)
			return -1;
	}
	return send_last_chunk(c, r);
}

/* A growable string for the /echo JSON. */
struct sbuf {
	char	*p;
	size_t	 n, cap;
	int	 oom;
};

static void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->cap ? b->cap * 2 : 1024);
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		if ((p = realloc(b->p, cap)) == NULL) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void
sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* JSON string; bytes >= 0x80 become \u00XX so the output is always valid. */
static void
sb_json(struct sbuf *b, const char *s)
{
	sb_add(b, "\"", 1);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		char e[8];

		if (ch == '"' || ch == '\\') {
			e[0] = '\\';
			e[1] = (char)ch;
			sb_add(b, e, 2);
		} else if (ch < 0x20 || ch >= 0x7f) {
			snprintf(e, sizeof e, "\\u%04x", ch);
			sb_add(b, e, 6);
		} else {
			sb_add(b, s, 1);
		}
	}
	sb_add(b, "\"", 1);
}

static int
h_echo(struct conn *c, struct req *r)
{
	struct sbuf b = { NULL, 0, 0, 0 };
	char num[64];
	int i, rc;

	if (drain_body(c, r) < 0)
		return -2;
	snprintf(num, sizeof num, "{\"conn\":%lu,\"method\":", c->id);
	sb_str(&b, num);
	sb_json(&b, r->method);
	sb_str(&b, ",\"target\":");
	sb_json(&b, r->target);
	sb_str(&b, r->minor ? ",\"version\":\"1.1\"" : ",\"version\":\"1.0\"");
	sb_str(&b, ",\"headers\":[");
	for (i = 0; i < r->nhdrs; i++) {
		sb_str(&b, i ? ",[" : "[");
		sb_json(&b, r->hdrs[i].name);
		sb_str(&b, ",");
		sb_json(&b, r->hdrs[i].value);
		sb_str(&b, "]");
	}
	snprintf(num, sizeof num, "],\"body_bytes\":%llu}\n",
	    (unsigned long long)r->body_bytes);
	sb_str(&b, num);
	if (b.oom)
		rc = respond_text(c, r, 500, "out of memory\n");
	else
		rc = respond(c, r, 200, "application/json", NULL, b.p, b.n);
	free(b.p);
	return rc;
}

static int
h_upload(struct conn *c, struct req *r)
{
	char buf[65536];
	ssize_t n;

	while ((n = body_read(c, r, buf, sizeof buf)) > 0)
		;
	if (n < 0)
		return -2;
	return respond_text(c, r, 200, "{\"bytes\":%llu}\n",
	    (unsigned long long)r->body_bytes);
}

/* Byte i of /bytes is pattern[i % 64]: clients can check any range. */
static const char pattern64[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";

static char block[65536];	/* a multiple of 64: stays in phase */

static void
block_init(void)
{
	size_t i;

	for (i = 0; i < sizeof block; i++)
		block[i] = pattern64[i % 64];
}

static int
h_bytes(struct conn *c, struct req *r)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint64_t n, chunked;

	if (query_num(r->query, "n", 0, (uint64_t)1 << 40, &n) < 0 ||
	    query_num(r->query, "chunked", 0, 1, &chunked) < 0)
		return respond_text(c, r, 400, "bad n or chunked\n");
	pthread_once(&once, block_init);
	if (send_head(c, r, 200, "application/octet-stream", NULL,
	    chunked ? -1 : (long long)n) < 0)
		return -1;
	if (r->head)
		return 0;
	while (n > 0) {
		size_t k = n > sizeof block ? sizeof block : (size_t)n;

		if ((chunked ? send_chunk(c, r, block, k) : send_all(c, block, k)) < 0)
			return -1;
		n -= k;
	}
	return chunked ? send_last_chunk(c, r) : 0;
}

static int
h_status(struct conn *c, struct req *r)
{
	uint64_t code;

	if (query_num(r->query, "code", 200, 599, &code) < 0 || code < 200)
		return respond_text(c, r, 400, "code must be 200..599\n");
	return respond_text(c, r, (int)code, "status %d\n", (int)code);
}

static int
h_slow(struct conn *c, struct req *r)
{
	uint64_t ms;

	if (query_num(r->query, "ms", 1000, 3600000, &ms) < 0)
		return respond_text(c, r, 400, "bad ms\n");
	msleep((unsigned long)ms);
	return respond_text(c, r, 200, "slept %llu ms\n", (unsigned long long)ms);
}

/* Plain names only: no path separators, no dot files, no ".." games. */
static int
file_name_ok(const char *n)
{
	size_t i, len = strlen(n);

	if (len == 0 || len > 128 || n[0] == '.')
		return 0;
	for (i = 0; i < len; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		    (n[i] >= '0' && n[i] <= '9') || n[i] == '.' || n[i] == '_' ||
		    n[i] == '-'))
			return 0;
	return 1;
}

static int
h_file_put(struct conn *c, struct req *r, const char *name)
{
	char tmp[160], buf[65536];
	ssize_t n;
	int fd, err = 0;

	snprintf(tmp, sizeof tmp, ".%s.%lu.tmp", name, c->id);
	fd = openat(data_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	while ((n = body_read(c, r, buf, sizeof buf)) > 0)
		if (fd >= 0 && !err && write(fd, buf, (size_t)n) != n)
			err = errno ? errno : EIO;
	if (fd < 0)
		err = errno;
	if (n < 0) {
		if (fd >= 0) {
			close(fd);
			unlinkat(data_dirfd, tmp, 0);
		}
		return -2;
	}
	/*
	 * Durable before we answer: a test may cut the VM's power right
	 * after the response and expect the file after the next boot.
	 */
	if (!err && (fsync(fd) < 0 || renameat(data_dirfd, tmp, data_dirfd, name) < 0 ||
	    fsync(data_dirfd) < 0))
		err = errno;
	if (fd >= 0)
		close(fd);
	if (err) {
		unlinkat(data_dirfd, tmp, 0);
		return respond_text(c, r, 500, "write %s: %s\n", name, strerror(err));
	}
	return respond_text(c, r, 201, "{\"bytes\":%llu}\n",
	    (unsigned long long)r->body_bytes);
}

static int
h_file_get(struct conn *c, struct req *r, const char *name)
{
	char buf[65536];
	struct stat st;
	off_t left;
	int fd;

	fd = openat(data_dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		if (fd < 0 && e == ENOENT)
			return respond_text(c, r, 404, "no such file\n");
		return respond_text(c, r, 500, "%s: not readable\n", name);
	}
	if (send_head(c, r, 200, "application/octet-stream", NULL,
	    (long long)st.st_size) < 0 || r->head) {
		close(fd);
		return r->head ? 0 : -1;
	}
	/* The length is promised: if the file shrinks meanwhile, close. */
	for (left = st.st_size; left > 0;) {
		ssize_t n = read(fd, buf, left < (off_t)sizeof buf ?
		    (size_t)left : sizeof buf);

		if (n <= 0 || send_all(c, buf, (size_t)n) < 0) {
			close(fd);
			return -1;
		}
		left -= n;
	}
	close(fd);
	return 0;
}

static int
h_files(struct conn *c, struct req *r)
{
	const char *name = r->path + 7;		/* after "/files/" */

	if (data_dirfd < 0 || !file_name_ok(name)) {
		if (drain_body(c, r) < 0)
			return -2;
		return respond_text(c, r, 404, data_dirfd < 0 ?
		    "no data directory (-d)\n" : "bad file name\n");
	}
	if (strcmp(r->method, "PUT") == 0)
		return h_file_put(c, r, name);
	if (drain_body(c, r) < 0)
		return -2;
	if (strcmp(r->method, "GET") == 0 || r->head)
		return h_file_get(c, r, name);
	if (strcmp(r->method, "DELETE") == 0) {
		if (unlinkat(data_dirfd, name, 0) < 0)
			return respond_text(c, r, errno == ENOENT ? 404 : 500,
			    "%s: %s\n", name, strerror(errno));
		fsync(data_dirfd);
		return respond(c, r, 204, NULL, NULL, NULL, 0);
	}
	return respond(c, r, 405, "text/plain; charset=utf-8",
	    "Allow: GET, HEAD, PUT, DELETE\r\n", "method not allowed\n", 19);
}

/* MemTotal of /proc/meminfo in KiB, or -1: what the guest was given
 * (less what the kernel keeps for itself). */
static long
mem_total_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f;

	if ((f = fopen("/proc/meminfo", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "MemTotal: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* CPUs this process may run on: the guest's vCPUs (nproc). */
static int
cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return -1;
	return CPU_COUNT(&set);
}

static int
h_info(struct conn *c, struct req *r)
{
	char boot[64] = "", body[320];
	int fd, n;

	/* The kernel's boot id changes on every boot, not on suspend/resume. */
	if ((fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)) >= 0) {
		n = (int)read(fd, boot, sizeof boot - 1);
		boot[n > 0 ? n : 0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		close(fd);
	}
	n = snprintf(body, sizeof body, "{\"pid\":%ld,\"started\":%lld,"
	    "\"boot_id\":\"%.40s\",\"conns\":%lu,\"data\":%s,"
	    "\"mem_total_kib\":%ld,\"cpus\":%d}\n",
	    (long)getpid(), (long long)started, boot,
	    __atomic_load_n(&conns_accepted, __ATOMIC_RELAXED),
	    data_dirfd >= 0 ? "true" : "false", mem_total_kib(), cpus());
	return respond(c, r, 200, "application/json", NULL, body, (size_t)n);
}

static int
is_get(const struct req *r)
{
	return strcmp(r->method, "GET") == 0 || r->head;
}

/* 0 keep going, -1 close, -2 malformed body (answer 400, close). */
static int h_connect(struct conn *, struct req *);
static int h_resolve(struct conn *, struct req *);
static int h_spin(struct conn *, struct req *);
static int h_console(struct conn *, struct req *);
static uint64_t mono_ms(void);

static int
dispatch(struct conn *c, struct req *r)
{
	const char *p = r->path;

	if (strncmp(p, "/echo", 5) == 0)
		return h_echo(c, r);
	if (strncmp(p, "/files/", 7) == 0)
		return h_files(c, r);
	if (strcmp(p, "/upload") == 0) {
		if (strcmp(r->method, "POST") != 0 && strcmp(r->method, "PUT") != 0) {
			if (drain_body(c, r) < 0)
				return -2;
			return respond(c, r, 405, "text/plain; charset=utf-8",
			    "Allow: POST, PUT\r\n", "method not allowed\n", 19);
		}
		return h_upload(c, r);
	}
	/* Everything else ignores a request body, but must still consume it. */
	if (drain_body(c, r) < 0)
		return -2;
	if (strcmp(p, "/ws") == 0 || strcmp(p, "/") == 0 ||
	    strcmp(p, "/sse") == 0 || strcmp(p, "/bytes") == 0 ||
	    strcmp(p, "/status") == 0 || strcmp(p, "/slow") == 0 ||
	    strcmp(p, "/healthz") == 0 || strcmp(p, "/info") == 0) {
		if (!is_get(r))
			return respond(c, r, 405, "text/plain; charset=utf-8",
			    "Allow: GET, HEAD\r\n", "method not allowed\n", 19);
	}
	if (strcmp(p, "/") == 0)
		return respond(c, r, 200, "text/html; charset=utf-8",
		    "Cache-Control: no-cache\r\n", index_html,
		    sizeof index_html - 1);
	if (strcmp(p, "/ws") == 0)
		return h_ws(c, r);
	if (strcmp(p, "/sse") == 0)
		return h_sse(c, r);
	if (strcmp(p, "/bytes") == 0)
		return h_bytes(c, r);
	if (strcmp(p, "/status") == 0)
		return h_status(c, r);
	if (strcmp(p, "/slow") == 0)
		return h_slow(c, r);
	if (strcmp(p, "/healthz") == 0)
		return respond(c, r, 200, "text/plain", NULL, "ok", 2);
	if (strcmp(p, "/info") == 0)
		return h_info(c, r);
	if (strcmp(p, "/connect") == 0)
		return h_connect(c, r);
	if (strcmp(p, "/resolve") == 0)
		return h_resolve(c, r);
	if (strcmp(p, "/spin") == 0)
		return h_spin(c, r);
	if (strcmp(p, "/console") == 0)
		return h_console(c, r);
	return respond_text(c, r, 404, "not found\n");
}

/*
 * GET /console?kib=N: print N KiB of numbered lines on the guest's
 * console (1-1048576), from a child process, and answer at once: a
 * guest flooding its console, which the host must keep bounded.
 */
static int
h_console(struct conn *c, struct req *r)
{
	uint64_t kib, done;
	char line[64];
	pid_t pid;
	int fd, n;

	if (query_num(r->query, "kib", 0, 1048576, &kib) != 1 || kib == 0)
		return respond_text(c, r, 400, "want ?kib=N (1-1048576)\n");
	if ((pid = fork()) < 0)
		return respond_text(c, r, 500, "fork: %s\n", strerror(errno));
	if (pid == 0) {
		if (fork() != 0)
			_exit(0);
		if ((fd = open("/dev/console", O_WRONLY | O_NOCTTY)) < 0)
			_exit(1);
		for (done = 0; done < kib * 1024; done += (uint64_t)n) {
			n = snprintf(line, sizeof(line), "berth-flood %020llu "
			    "..............................\n",
			    (unsigned long long)done);
			if (write(fd, line, (size_t)n) != n)
				_exit(1);
		}
		n = snprintf(line, sizeof(line), "berth-flood done %llu KiB\n",
		    (unsigned long long)kib);
		_exit(write(fd, line, (size_t)n) == n ? 0 : 1);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return respond_text(c, r, 202, "printing %llu KiB on the console\n",
	    (unsigned long long)kib);
}

/*
 * GET /spin?s=N: keep one CPU of the guest busy for N seconds (1-600) in
 * a child process, and answer at once: a guest at work with no visitor,
 * which the host's idle policy must not take for idle.
 */
static int
h_spin(struct conn *c, struct req *r)
{
	volatile unsigned long x = 0;
	uint64_t secs, end;
	pid_t pid;

	if (query_num(r->query, "s", 0, 600, &secs) != 1 || secs == 0)
		return respond_text(c, r, 400, "want ?s=N (1-600)\n");
	/* twice: the spinner is init's child, so init reaps it */
	if ((pid = fork()) < 0)
		return respond_text(c, r, 500, "fork: %s\n", strerror(errno));
	if (pid == 0) {
		if (fork() != 0)
			_exit(0);
		end = mono_ms() + secs * 1000;
		while (mono_ms() < end)
			for (int i = 0; i < 100000; i++)
				x += (unsigned long)i;
		_exit(0);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return respond_text(c, r, 202, "spinning for %llu s\n",
	    (unsigned long long)secs);
}

/* ---- egress probes: what the sandbox may reach ------------------------ */

static uint64_t
mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/*
 * GET /connect?ip=A.B.C.D&port=N[&ms=T]: opens a TCP connection from the
 * guest and says how it went and how fast: {"result":"connected" |
 * "refused" | "unreachable" | "timeout" | "error","errno","ms"}. Egress
 * tests use it to see allowed, rejected (fast) and dropped (slow).
 */
static int
h_connect(struct conn *c, struct req *r)
{
	const char *v;
	size_t vn;
	char ip[64], body[256];
	uint64_t port, ms, t0;
	struct sockaddr_in sa;
	struct pollfd pfd;
	int fd, rc, err = 0, n;
	socklen_t el = sizeof(err);
	const char *res;

	if (!query_get(r->query, "ip", &v, &vn) || vn == 0 || vn >= sizeof(ip) ||
	    query_num(r->query, "port", 0, 65535, &port) != 1 || port == 0 ||
	    query_num(r->query, "ms", 3000, 60000, &ms) < 0)
		return respond_text(c, r, 400, "want ?ip=A.B.C.D&port=N[&ms=T]\n");
	memcpy(ip, v, vn);
	ip[vn] = '\0';
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return respond_text(c, r, 400, "bad ip\n");
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) < 0)
		return respond_text(c, r, 500, "socket failed\n");
	t0 = mono_ms();
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc < 0 && errno != EINPROGRESS) {
		err = errno;
	} else if (rc < 0) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, (int)ms) == 0)
			err = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
	}
	close(fd);
	res = err == 0 ? "connected" : err == ECONNREFUSED ? "refused" :
	    err == ETIMEDOUT ? "timeout" : (err == EHOSTUNREACH || err == ENETUNREACH ||
	    err == EACCES || err == EPERM) ? "unreachable" : "error";
	n = snprintf(body, sizeof(body), "{\"result\":\"%s\",\"errno\":%d,\"ms\":%llu}\n",
	    res, err, (unsigned long long)(mono_ms() - t0));
	return respond(c, r, 200, "application/json", NULL, body, (size_t)n);
}

/*
 * GET /resolve?name=host.example: one A query to the first nameserver of
 * /etc/resolv.conf (berth's filtering resolver on the tap gateway),
 * without libc's resolver (this binary is static). Answers
 * {"rcode":N,"addrs":["A.B.C.D",...]} or {"error":...}.
 */
static int
h_resolve(struct conn *c, struct req *r)
{
	const char *v;
	size_t vn, i, qlen;
	unsigned char q[512], a[1500];
	char ns[64] = "", line[256], body[1024], addr[INET_ADDRSTRLEN];
	struct sockaddr_in sa;
	struct timeval tv = { 3, 0 };
	FILE *f;
	int fd, n, off, anc, k, rcode;

	if (!query_get(r->query, "name", &v, &vn) || vn == 0 || vn > 253)
		return respond_text(c, r, 400, "want ?name=host\n");
	if ((f = fopen("/etc/resolv.conf", "r")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "nameserver %63s", ns) == 1)
				break;
		fclose(f);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(53);
	if (inet_pton(AF_INET, ns, &sa.sin_addr) != 1)
		return respond_text(c, r, 500, "no nameserver in /etc/resolv.conf\n");
	/* header: id 0x4242, RD, one question */
	memset(q, 0, 12);
	q[0] = 0x42; q[1] = 0x42; q[2] = 0x01; q[5] = 1;
	qlen = 12;
	for (i = 0; i < vn; ) {
		size_t j = i;

		while (j < vn && v[j] != '.')
			j++;
		if (j == i || j - i > 63)
			return respond_text(c, r, 400, "bad name\n");
		q[qlen++] = (unsigned char)(j - i);
		memcpy(q + qlen, v + i, j - i);
		qlen += j - i;
		i = j + 1;
	}
	q[qlen++] = 0;
	q[qlen++] = 0; q[qlen++] = 1;	/* A */
	q[qlen++] = 0; q[qlen++] = 1;	/* IN */
	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
		return respond_text(c, r, 500, "socket failed\n");
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(fd, q, qlen, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (n = (int)recv(fd, a, sizeof(a), 0)) < 12 || a[0] != 0x42 || a[1] != 0x42) {
		close(fd);
		n = snprintf(body, sizeof(body), "{\"error\":\"no answer from %s\"}\n", ns);
		return respond(c, r, 200, "application/json", NULL, body, (size_t)n);
	}
	close(fd);
	rcode = a[3] & 0x0f;
	anc = (a[6] << 8) | a[7];
	off = (int)qlen;	/* the question comes back as sent */
	n = snprintf(body, sizeof(body), "{\"rcode\":%d,\"addrs\":[", rcode);
	for (k = 0; k < anc && off + 12 <= (int)sizeof(a); k++) {
		int type, rdlen;

		/* name: a pointer or labels */
		while (off < 1500 && a[off] != 0 && (a[off] & 0xc0) != 0xc0)
			off += a[off] + 1;
		off += off < 1500 && a[off] == 0 ? 1 : 2;
		if (off + 10 > 1500)
			break;
		type = (a[off] << 8) | a[off + 1];
		rdlen = (a[off + 8] << 8) | a[off + 9];
		off += 10;
		if (type == 1 && rdlen == 4 && off + 4 <= 1500 && n < (int)sizeof(body) - 40) {
			inet_ntop(AF_INET, a + off, addr, sizeof(addr));
			n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"%s\"",
			    body[n - 1] == '[' ? "" : ",", addr);
		}
		off += rdlen;
	}
	n += snprintf(body + n, sizeof(body) - (size_t)n, "]}\n");
	return respond(c, r, 200, "application/json", NULL, body, (size_t)n);
}

/* ---- connections ------------------------------------------------------ */

/*
 * Close without losing the last response: unread input at close() makes
 * the kernel send RST, which can destroy data still in flight.
 */
static void
lingering_close(int fd)
{
	struct timeval tv = { 2, 0 };
	char buf[4096];
	int i;

	shutdown(fd, SHUT_WR);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	for (i = 0; i < 256; i++)
		if (recv(fd, buf, sizeof buf, 0) <= 0)
			break;
	close(fd);
}

static void *
conn_main(void *arg)
{
	struct conn *c = arg;
	struct req r;

	for (;;) {
		int rc = read_head(c, &r);

		if (rc == 0 || rc == -1)
			break;
		if (rc > 1) {
			/* Malformed head: answer, and never guess where the next request starts. */
			r.keepalive = 0;
			r.head = 0;
			r.minor = 1;
			respond_text(c, &r, rc, "%d %s\n", rc, px_status_text(rc));
			break;
		}
		rc = dispatch(c, &r);
		if (rc == -2) {
			r.keepalive = 0;
			r.head = 0;
			respond_text(c, &r, 400, "malformed body\n");
			break;
		}
		if (rc < 0 || !r.keepalive)
			break;
	}
	lingering_close(c->fd);
	free(c);
	return NULL;
}

/*
 * Connections are served by threads that wait in accept(2) beforehand: a
 * new connection costs no thread creation (under TCG, and right after a
 * restore, a clone and a fresh stack are many milliseconds of cold code).
 * When the last waiting thread takes a connection it starts another, so
 * long-lived ones (SSE, WebSockets) never leave nobody accepting; a thread
 * that finds enough others waiting exits.
 */
#define ACC_SPARE	4	/* threads waiting in accept(2) at start */
#define ACC_MAX_IDLE	16	/* more waiting than this: a thread exits */

static struct {
	int		 fd;
	int		 idle_secs;
	pthread_attr_t	 attr;
	pthread_mutex_t	 mu;
	int		 waiting;
} acc = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void *acceptor_main(void *);

static void
acceptor_spawn(void)
{
	pthread_t t;

	pthread_mutex_lock(&acc.mu);
	acc.waiting++;
	pthread_mutex_unlock(&acc.mu);
	if (pthread_create(&t, &acc.attr, acceptor_main, NULL) != 0) {
		pthread_mutex_lock(&acc.mu);
		acc.waiting--;
		pthread_mutex_unlock(&acc.mu);
	}
}

static void *
acceptor_main(void *arg)
{
	int one = 1;

	(void)arg;
	for (;;) {
		struct conn *c;
		int cfd = accept4(acc.fd, NULL, NULL, SOCK_CLOEXEC), last;

		if (cfd < 0) {
			/* Out of fds: back off instead of spinning. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				msleep(100);
			continue;
		}
		pthread_mutex_lock(&acc.mu);
		last = --acc.waiting == 0;
		pthread_mutex_unlock(&acc.mu);
		if (last)
			acceptor_spawn();
		/* SSE events and small answers must leave at once. */
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (acc.idle_secs > 0) {
			struct timeval tv = { acc.idle_secs, 0 };

			setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		}
		if ((c = malloc(sizeof *c)) == NULL) {
			close(cfd);
		} else {
			c->fd = cfd;
			c->id = __atomic_add_fetch(&conns_accepted, 1, __ATOMIC_RELAXED);
			c->rbeg = c->rend = 0;
			conn_main(c);
		}
		pthread_mutex_lock(&acc.mu);
		if (acc.waiting >= ACC_MAX_IDLE) {
			pthread_mutex_unlock(&acc.mu);
			return NULL;
		}
		acc.waiting++;
		pthread_mutex_unlock(&acc.mu);
	}
}

static int
self_test(void)
{
	static const struct {
		const char *in, *hex;
	} v[] = {
		{ "", "da39a3ee5e6b4b0d3255bfef95601890afd80709" },
		{ "abc", "a9993e364706816aba3e25717850c26c9cd0d89d" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "84983e441c3bd26ebaae4aa1f95129e5e54670f1" },
	};
	unsigned char d[20];
	char hex[41], b64[32];
	struct sha1 s;
	size_t i;
	int j, fail = 0;
	uint64_t n;

	printf("1..%d\n", (int)(sizeof v / sizeof v[0]) + 4);
	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		sha1_init(&s);
		sha1_update(&s, v[i].in, strlen(v[i].in));
		sha1_final(&s, d);
		for (j = 0; j < 20; j++)
			snprintf(hex + 2 * j, 3, "%02x", d[j]);
		j = strcmp(hex, v[i].hex) == 0;
		fail |= !j;
		printf("%s %d - sha1(\"%s\")\n", j ? "ok" : "not ok", (int)i + 1, v[i].in);
	}
	ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", b64);
	j = strcmp(b64, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0;
	fail |= !j;
	printf("%s %d - RFC 6455 accept key (%s)\n", j ? "ok" : "not ok", (int)i + 1, b64);
	base64((const unsigned char *)"fo", 2, b64);
	j = strcmp(b64, "Zm8=") == 0;
	fail |= !j;
	printf("%s %d - base64 padding\n", j ? "ok" : "not ok", (int)i + 2);
	j = query_num("a=1&n=42&x", "n", 0, 100, &n) == 1 && n == 42 &&
	    query_num("n=4x", "n", 0, 100, &n) == -1 &&
	    query_num("nn=4", "n", 7, 100, &n) == 0 && n == 7;
	fail |= !j;
	printf("%s %d - query parsing\n", j ? "ok" : "not ok", (int)i + 3);
	{
		struct u8state u = { 0, 0x80, 0xbf };
		const unsigned char good[] = "h\xc3\xa9llo \xf0\x9f\x98\x80";
		const unsigned char sur[] = "\xed\xa0\x80";

		j = u8_feed(&u, good, 5) == 0 && u8_feed(&u, good + 5, sizeof good - 6) == 0 &&
		    u.need == 0;
		u.need = 0;
		j = j && u8_feed(&u, sur, 3) < 0;
	}
	fail |= !j;
	printf("%s %d - utf-8 check\n", j ? "ok" : "not ok", (int)i + 4);
	return fail;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: testapp [-l ADDR] [-p PORT] [-L REQLOG] [-d DIR] [-t IDLE_SECS]\n"
	    "       testapp --self-test\n"
	    "Serves /, /ws, /sse, /echo, /upload, /bytes, /status, /slow, /healthz,\n"
	    "/info, and with -d DIR also /files/NAME (GET, PUT, DELETE in DIR).\n"
	    "PORT 0 picks a free port; the listening line shows which.\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *addr = "0.0.0.0", *logpath = NULL, *datadir = NULL;
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned long port = 8080;
	char host[INET6_ADDRSTRLEN + 2];
	int fd, one = 1, ch, v6, idle = 0, i;

	if (argc == 2 && strcmp(argv[1], "--self-test") == 0)
		return self_test();
	while ((ch = getopt(argc, argv, "l:p:L:d:t:h")) != -1) {
		char *end;

		switch (ch) {
		case 'l':
			addr = optarg;
			break;
		case 'p':
			port = strtoul(optarg, &end, 10);
			if (*optarg == '\0' || *end || port > 65535)
				usage();
			break;
		case 'L':
			logpath = optarg;
			break;
		case 'd':
			datadir = optarg;
			break;
		case 't':
			idle = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();

	signal(SIGPIPE, SIG_IGN);
	started = time(NULL);
	if (datadir) {
		data_dirfd = open(datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (data_dirfd < 0) {
			fprintf(stderr, "testapp: %s: %s\n", datadir, strerror(errno));
			return 1;
		}
	}
	if (logpath) {
		log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			fprintf(stderr, "testapp: %s: %s\n", logpath, strerror(errno));
			return 1;
		}
	}

	/* Accept "[::1]" as well as "::1". */
	snprintf(host, sizeof host, "%s", addr);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	memset(&ss, 0, sizeof ss);
	v6 = strchr(host, ':') != NULL;
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			goto badaddr;
		sl = sizeof *s6;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			goto badaddr;
		sl = sizeof *s4;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 512) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		fprintf(stderr, "testapp: %s port %lu: %s\n", addr, port,
		    strerror(errno));
		return 1;
	}
	port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	fprintf(stderr, v6 ? "testapp: listening on [%s]:%lu\n" :
	    "testapp: listening on %s:%lu\n", host, port);
	fflush(stderr);

	acc.fd = fd;
	acc.idle_secs = idle;
	pthread_attr_init(&acc.attr);
	pthread_attr_setdetachstate(&acc.attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&acc.attr, 512 * 1024);
	for (i = 0; i < ACC_SPARE; i++)
		acceptor_spawn();
	for (;;)
		pause();

badaddr:
	fprintf(stderr, "testapp: bad listen address %s\n", addr);
	return 2;
}
