/*
 * test_http1.c — the strict head lexer, framing rules and chunked decoder
 * (proxy/edge/http1.c), and a replay of the smuggling corpus: for every file
 * in tests/smuggling, reading it the way berthd does must never yield
 * the smuggled second request.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "http1.h"

#include <dirent.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses s as one request head: status 0 when accepted, else the HTTP
 * status berthd would answer. */
static int
req_status(const char *s, struct px_head *h)
{
	int status = 0;
	const char *why = NULL;
	ssize_t n;

	px_head_init(h, 1);
	n = px_head_parse(h, s, strlen(s), &status, &why);
	if (n > 0)
		return 0;
	if (n == 0)
		return -1;	/* incomplete */
	return status;
}

static void
check_req(const char *s, int want, const char *what)
{
	struct px_head h;
	int got = req_status(s, &h);

	is_int(got, want, "%s", what);
	px_head_reset(&h);
}

static void
test_heads(void)
{
	struct px_head h;
	const struct px_hdr *f;
	int status;
	const char *why;
	const char *ok_req = "GET /a?b=c HTTP/1.1\r\nHost: x.example\r\n"
	    "Connection: keep-alive, X-Foo\r\nX-Foo: 1\r\nAccept:  text/html \r\n\r\n";

	is_int(req_status(ok_req, &h), 0, "valid request accepted");
	is_int(h.method, HTTP_GET, "method GET");
	ok(h.target_len == 6 && memcmp(h.target, "/a?b=c", 6) == 0, "target");
	ok(h.host != NULL && h.host->vlen == 9, "Host found");
	f = px_head_get(&h, "accept");
	ok(f != NULL && f->vlen == 9 && memcmp(f->value, "text/html", 9) == 0,
	    "value trimmed of OWS");
	f = px_head_get(&h, "x-foo");
	ok(f != NULL && f->hop, "header named in Connection is hop-by-hop");
	ok(px_head_keepalive(&h), "1.1 keeps alive");
	px_head_reset(&h);

	/* incremental: bytes arrive one at a time */
	{
		size_t i, len = strlen(ok_req);
		ssize_t n = 0;

		px_head_init(&h, 1);
		for (i = 1; i <= len && n == 0; i++)
			n = px_head_parse(&h, ok_req, i, &status, &why);
		is_int(n, (long long)len, "head complete exactly at its last byte");
		px_head_reset(&h);
	}

	check_req("GET / HTTP/1.1\r\nHost: a\r\n", -1, "incomplete head waits");
	check_req("GET / HTTP/1.1\nHost: a\r\n\r\n", 400, "bare LF after request line");
	check_req("GET / HTTP/1.1\r\nHost: a\n\r\n", 400, "bare LF after a field");
	check_req("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400, "bare CR");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", 400, "obs-fold");
	check_req("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "space before colon");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nX: a\001b\r\n\r\n", 400, "control byte in value");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n", 0, "HTAB in value is fine");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nX\x7f: b\r\n\r\n", 400, "DEL in name");
	check_req("GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", 400, "empty name");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "duplicate Host");
	check_req("GET / HTTP/1.1\r\n\r\n", 400, "1.1 without Host");
	check_req("GET / HTTP/1.0\r\n\r\n", 0, "1.0 without Host parses");
	check_req("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "double space in request line");
	check_req("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "HTTP/2.0 on the wire");
	check_req("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400, "trailing space after version");
	check_req("GET http://b/ HTTP/1.1\r\nHost: a\r\n\r\n", 400,
	    "absolute-form naming another host refused");
	check_req("GET https://a:8443/x HTTP/1.1\r\nHost: a\r\n\r\n", 400,
	    "absolute-form: the port is part of the authority");
	check_req("GET https://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400,
	    "absolute-form with user information refused");
	check_req("GET https://a?x HTTP/1.1\r\nHost: a\r\n\r\n", 400,
	    "absolute-form without a path refused");
	check_req("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400,
	    "absolute-form of another scheme refused");
	is_int(req_status("GET HTTPS://A.example:8443/p?q=1 HTTP/1.1\r\n"
	    "Host: a.example:8443\r\n\r\n", &h), 0,
	    "absolute-form whose authority is Host: accepted (RFC 9112 3.2.2)");
	ok(h.target_len == 6 && memcmp(h.target, "/p?q=1", 6) == 0,
	    "...its target becomes the origin-form path");
	px_head_reset(&h);
	is_int(req_status("GET http://a HTTP/1.1\r\nHost: a\r\n\r\n", &h), 0,
	    "absolute-form without a path: accepted");
	ok(h.target_len == 1 && h.target[0] == '/', "...as /");
	px_head_reset(&h);
	check_req("GET /a%00.html HTTP/1.1\r\nHost: a\r\n\r\n", 400, "%00 in the path");
	check_req("GET https://a/%00 HTTP/1.1\r\nHost: a\r\n\r\n", 400,
	    "%00 in an absolute-form path");
	check_req("GET /a?x=%00 HTTP/1.1\r\nHost: a\r\n\r\n", 0, "%00 in the query is data");
	check_req("GET /a%000 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "%000 in the path");
	check_req("GET /a%0a HTTP/1.1\r\nHost: a\r\n\r\n", 0, "%0a is not NUL");
	check_req("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, "HTTP/2 preface");
	/* underscore look-alikes of framing and hop-by-hop headers */
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n"
	    "Content-Length: 3\r\n\r\n", 400, "Transfer_Encoding");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nContent_Length: 3\r\n\r\n", 400,
	    "Content_Length");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nkeep_alive: 1\r\n\r\n", 400, "keep_alive");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nProxy_Connection: close\r\n\r\n", 400,
	    "Proxy_Connection");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nProxy_Authorization: x\r\n\r\n", 400,
	    "Proxy_Authorization");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nX_Custom: 1\r\nContent_Type: x\r\n\r\n", 0,
	    "other names with '_' pass");
	is_int(req_status("GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 6.6.6.6\r\n"
	    "x-request_id: 1\r\n\r\n", &h), 0, "look-alikes of forwarding headers parse");
	f = px_head_get(&h, "x_forwarded_for");
	ok(f != NULL && f->hop, "...and are dropped (berthd writes those)");
	f = px_head_get(&h, "x-request_id");
	ok(f != NULL && f->hop, "...x-request_id too");
	px_head_reset(&h);
	check_req("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 0, "asterisk-form for OPTIONS");
	check_req("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 405, "CONNECT refused");
	check_req("BREW / HTTP/1.1\r\nHost: a\r\n\r\n", 501, "unknown method");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	    400, "duplicate Content-Length, same value");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n", 400, "CL list");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400, "CL sign");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", 400, "CL hex");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
	    400, "CL overflow");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 5\r\n\r\n", 400, "CL with TE");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", 400, "duplicate TE");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
	    400, "TE xchunked");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
	    400, "TE with chunked not final");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	    501, "TE gzip, chunked: valid but not implemented");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
	    400, "TE chunked twice");
	check_req("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "TE in 1.0");
	check_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n",
	    0, "TE is case-insensitive");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", 0, "Expect 100-continue");
	check_req("GET / HTTP/1.1\r\nHost: a\r\nExpect: tea\r\n\r\n", 417, "other Expect");

	/* limits */
	{
		char *big = malloc(PX_HEAD_MAX + 64);
		int i;
		size_t o;

		o = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
		memset(big + o, 'a', PX_HEAD_MAX);
		big[o + PX_HEAD_MAX] = '\0';
		check_req(big, 431, "head over 16 KB");
		memset(big, 'G', PX_HEAD_MAX + 32);
		big[PX_HEAD_MAX + 32] = '\0';
		check_req(big, 400, "an endless method: a malformed request line, 400");
		o = (size_t)sprintf(big, "GET /");
		memset(big + o, 'a', PX_REQLINE_MAX);
		strcpy(big + o + PX_REQLINE_MAX, " HTTP/1.1\r\nHost: a\r\n\r\n");
		check_req(big, 400, "request line over 8 KB: 400");
		o = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\n");
		for (i = 0; i < PX_HEADERS_MAX; i++)
			o += (size_t)sprintf(big + o, "X%d: y\r\n", i);
		strcpy(big + o, "\r\n");
		check_req(big, 431, "over 100 header fields");
		free(big);
	}

	/* responses */
	px_head_init(&h, 0);
	ok(px_head_parse(&h, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 38,
	    &status, &why) == 38, "response parsed");
	is_int(h.status, 200, "status");
	is_int(px_response_body(&h, HTTP_GET), PX_BODY_LENGTH, "CL body");
	is_int(px_response_body(&h, HTTP_HEAD), PX_BODY_NONE, "no body for HEAD");
	px_head_reset(&h);
	ok(px_head_parse(&h, "HTTP/1.1 204\r\n\r\n", 16, &status, &why) == 16,
	    "status line without reason");
	is_int(px_response_body(&h, HTTP_GET), PX_BODY_NONE, "no body for 204");
	px_head_reset(&h);
	ok(px_head_parse(&h, "HTTP/1.0 200 OK\r\n\r\n", 19, &status, &why) == 19 &&
	    px_response_body(&h, HTTP_GET) == PX_BODY_CLOSE, "close-delimited response");
	px_head_reset(&h);
	ok(px_head_parse(&h, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	    66, &status, &why) < 0 && status == 502, "response with CL and TE is a 502");
	px_head_reset(&h);
}

static int
chunk_all(const char *in, size_t len, char *out, size_t *outlen, const char **why)
{
	struct px_chunk c;
	size_t i = 0, o = 0, dlen;
	ssize_t n;

	px_chunk_init(&c);
	while (i < len && !px_chunk_done(&c)) {
		/* feed in small pieces to exercise resumption */
		size_t piece = len - i < 3 ? len - i : 3;

		n = px_chunk_step(&c, in + i, piece, &dlen, why);
		if (n < 0)
			return -1;
		memcpy(out + o, in + i + n - dlen, dlen);
		o += dlen;
		i += n;
	}
	*outlen = o;
	return px_chunk_done(&c) ? (int)i : 0;
}

static void
check_chunk(const char *in, int want_ok, const char *what)
{
	char out[256];
	size_t olen;
	const char *why = NULL;
	int r = chunk_all(in, strlen(in), out, &olen, &why);

	ok(want_ok ? r > 0 : r < 0, "chunked: %s%s%s", what, why ? ": " : "", why ? why : "");
}

static void
test_chunked(void)
{
	char out[256];
	size_t olen;
	const char *why;
	const char *body = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
	int r = chunk_all(body, strlen(body), out, &olen, &why);

	is_int(r, (long long)strlen(body) - 4, "chunked body ends before the next message");
	ok(olen == 12 && memcmp(out, "hello, world", 12) == 0, "data decoded");
	check_chunk("0\r\n\r\n", 1, "empty body");
	check_chunk("A\r\n0123456789\r\n0\r\n\r\n", 1, "upper-case hex");
	check_chunk("0x5\r\nhello\r\n0\r\n\r\n", 0, "0x prefix");
	check_chunk("+5\r\nhello\r\n0\r\n\r\n", 0, "sign");
	check_chunk("5 \r\nhello\r\n0\r\n\r\n", 0, "space after size");
	check_chunk("5\nhello\r\n0\r\n\r\n", 0, "bare LF after size");
	check_chunk("5\r\nhelloXX0\r\n\r\n", 0, "data longer than size");
	check_chunk("5;a\nb\r\nhello\r\n0\r\n\r\n", 0, "bare LF in extension");
	check_chunk("5;a\001\r\nhello\r\n0\r\n\r\n", 0, "control byte in extension");
	/* extensions: RFC 9112 7.1.1's grammar, nothing else */
	check_chunk("5;\r\nhello\r\n0\r\n\r\n", 0, "extension without a name");
	check_chunk("5;bad[=x\r\nhello\r\n0\r\n\r\n", 0, "'[' in an extension name");
	check_chunk("5;a=\r\nhello\r\n0\r\n\r\n", 0, "'=' without a value");
	check_chunk("5;a=b c\r\nhello\r\n0\r\n\r\n", 0, "two tokens as a value");
	check_chunk("5;a=\"b\r\nhello\r\n0\r\n\r\n", 0, "unterminated quoted value");
	check_chunk("5;a=\"b\"c\r\nhello\r\n0\r\n\r\n", 0, "bytes after a quoted value");
	check_chunk("5;a \r\nhello\r\n0\r\n\r\n", 0, "whitespace before CRLF");
	check_chunk("5;;a\r\nhello\r\n0\r\n\r\n", 0, "empty extension");
	check_chunk("5;a=b;\r\nhello\r\n0\r\n\r\n", 0, "trailing ';'");
	check_chunk("5;a\r\nhello\r\n0\r\n\r\n", 1, "name only");
	check_chunk("5;a=b;c=d\r\nhello\r\n0\r\n\r\n", 1, "two extensions");
	check_chunk("5 ; a = b ;c\r\nhello\r\n0\r\n\r\n", 1, "BWS around ';' and '='");
	check_chunk("5;a=\"b \\\" ;=c\"\r\nhello\r\n0\r\n\r\n", 1,
	    "quoted value with a quoted-pair and separators");
	check_chunk("0;last\r\n\r\n", 1, "extension on the last chunk");
	check_chunk("5;a=\"b\001\"\r\nhello\r\n0\r\n\r\n", 0,
	    "control byte in a quoted value");
	check_chunk("1000000000000000\r\n", 0, "size over 15 hex digits");
	check_chunk("0\r\nX: 1\nY: 2\r\n\r\n", 0, "bare LF in trailers");
	check_chunk("0\r\nX: 1\r\n folded\r\n\r\n", 0, "obs-fold in trailers");
}

/*
 * Reads a corpus stream as berthd does: one head, then its body per the
 * framing berthd derived; then the next head. Returns 1 if a request for
 * /smuggled would be parsed as a request of its own.
 */
static int
replays_smuggled(const char *buf, size_t len, char *verdict, size_t vlen)
{
	size_t off = 0;
	int round;

	for (round = 0; round < 4 && off < len; round++) {
		struct px_head h;
		int status = 0;
		const char *why = NULL;
		ssize_t n;

		px_head_init(&h, 1);
		n = px_head_parse(&h, buf + off, len - off, &status, &why);
		if (n <= 0) {
			snprintf(verdict, vlen, n < 0 ? "rejected %d (%s)" : "incomplete head",
			    status, why ? why : "");
			px_head_reset(&h);
			return 0;
		}
		if (round > 0 && h.target_len >= 9 && memcmp(h.target, "/smuggled", 9) == 0) {
			px_head_reset(&h);
			return 1;
		}
		off += n;
		if (h.chunked) {
			struct px_chunk c;
			size_t dlen;

			px_chunk_init(&c);
			while (off < len && !px_chunk_done(&c)) {
				n = px_chunk_step(&c, buf + off, len - off, &dlen, &why);
				if (n < 0) {
					snprintf(verdict, vlen, "chunked body rejected (%s)", why);
					px_head_reset(&h);
					return 0;
				}
				off += n;
			}
			if (!px_chunk_done(&c)) {
				snprintf(verdict, vlen, "body incomplete");
				px_head_reset(&h);
				return 0;
			}
		} else if (h.content_length > 0) {
			if ((size_t)h.content_length > len - off) {
				snprintf(verdict, vlen, "body incomplete");
				px_head_reset(&h);
				return 0;
			}
			off += (size_t)h.content_length;
		}
		px_head_reset(&h);
	}
	snprintf(verdict, vlen, "no smuggled request");
	return 0;
}

static void
test_corpus(void)
{
	const char *top = getenv("top_srcdir");
	char dir[1024];
	struct dirent **ents;
	int n, i, files = 0;

	snprintf(dir, sizeof(dir), "%s/tests/smuggling", top ? top : ".");
	n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0) {
		ok(0, "smuggling corpus at %s", dir);
		return;
	}
	for (i = 0; i < n; i++) {
		char path[2048], verdict[256], *buf;
		size_t len;
		FILE *f;

		if (strstr(ents[i]->d_name, ".http") == NULL) {
			free(ents[i]);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		f = fopen(path, "rb");
		buf = malloc(1 << 20);
		len = f ? fread(buf, 1, 1 << 20, f) : 0;
		if (f)
			fclose(f);
		ok(f != NULL && !replays_smuggled(buf, len, verdict, sizeof(verdict)),
		    "corpus %s: %s", ents[i]->d_name, verdict);
		files++;
		free(buf);
		free(ents[i]);
	}
	free(ents);
	ok(files >= 30, "corpus has %d inputs (>= 30)", files);
}

/* Every berth_token query parameter goes, whatever its shape. */
static void
test_strip(void)
{
	static const struct {
		const char *in, *out;
		int removed;
	} t[] = {
		{ "/a", "/a", 0 },
		{ "/a?", "/a?", 0 },
		{ "/a?b=1", "/a?b=1", 0 },
		{ "/a?berth_token=T", "/a", 1 },
		{ "/a?berth_token=T&berth_token=T", "/a", 2 },
		{ "/a?x=1&berth_token=T&y=2", "/a?x=1&y=2", 1 },
		{ "/a?berth_token=T&x=1", "/a?x=1", 1 },
		{ "/a?x=1&berth_token=T", "/a?x=1", 1 },
		{ "/a?berth%5Ftoken=T", "/a", 1 },
		{ "/a?berth%5ftoken=T&x=%41", "/a?x=%41", 1 },
		{ "/a?%62%65rth_token=T", "/a", 1 },
		{ "/a?berth%255Ftoken=T", "/a", 1 },	/* decoded twice */
		{ "/a?Berth_Token=T", "/a", 1 },
		{ "/a?berth_token", "/a", 1 },
		{ "/a?berth_token=", "/a", 1 },
		{ "/a?x=1;berth_token=T;y=2", "/a?x=1;y=2", 1 },
		{ "/a?x=1&&berth_token=T", "/a?x=1&", 1 },
		{ "/a?berth_tokens=T&xberth_token=U", "/a?berth_tokens=T&xberth_token=U", 0 },
		{ "/a?x=berth_token", "/a?x=berth_token", 0 },
		{ "/a?berth_token=T&berth_token=U&z=%26", "/a?z=%26", 2 },
		{ "/berth_token=x", "/berth_token=x", 0 },
	};
	char out[256];
	size_t i, n;
	int removed;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		n = px_target_strip_param(t[i].in, strlen(t[i].in), "berth_token",
		    out, &removed);
		ok(n == strlen(t[i].out) && memcmp(out, t[i].out, n) == 0 &&
		    removed == t[i].removed, "strip %s -> %s (got %.*s, %d removed)",
		    t[i].in, t[i].out, (int)n, out, removed);
	}
}

int
main(void)
{
	test_heads();
	test_strip();
	test_chunked();
	test_corpus();
	return done_testing();
}
