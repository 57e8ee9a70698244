/*
 * http1.c — strict HTTP/1.1 head lexer, framing rules and chunked decoder;
 * see http1.h for the contract. Everything here parses untrusted bytes:
 * every index is checked against a length before use.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "http1.h"

#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 tchar */
static const unsigned char tchar[256] = {
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
	['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
	['`'] = 1, ['|'] = 1, ['~'] = 1,
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1,
	['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
	['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
	['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1,
	['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
	['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
	['Y'] = 1, ['Z'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
	['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1,
	['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
	['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
	['y'] = 1, ['z'] = 1,
};

/* field-value bytes: VCHAR, obs-text, SP, HTAB */
static int
is_vbyte(unsigned char c)
{
	return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

static int
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int
memcaseeq(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);

	return alen == blen && strncasecmp(a, b, blen) == 0;
}

/* A field name against a literal: the length first, no strlen. */
#define NAME_IS(f, lit) ((f)->nlen == sizeof(lit) - 1 && \
	strncasecmp((f)->name, (lit), sizeof(lit) - 1) == 0)

/* Headers berthd never forwards as received (RFC 9110 7.6.1 plus the
 * proxy-specific ones); framing and Host are re-emitted by berthd. */
#define HOP(n)	{ n, sizeof(n) - 1 }
static const struct {
	const char	*name;
	size_t		 len;
} hop_headers[] = {
	HOP("connection"), HOP("keep-alive"), HOP("proxy-connection"),
	HOP("te"), HOP("trailer"), HOP("transfer-encoding"), HOP("upgrade"),
	HOP("proxy-authorization"), HOP("proxy-authenticate"),
	HOP("content-length"), HOP("host"),
};
#undef HOP

/* Request headers berthd writes itself for the guest (forwarding). */
static const struct {
	const char	*name;
	size_t		 len;
} own_headers[] = {
	{ "x-forwarded-for", 15 }, { "x-forwarded-proto", 17 },
	{ "x-forwarded-host", 16 }, { "x-forwarded-port", 16 },
	{ "x-request-id", 12 },
};

/*
 * 1 if the field name differs from name[0..len) only by '_' where name
 * has '-' (at least once): "Transfer_Encoding". CGI, WSGI and PHP map
 * both '-' and '_' to '_', so an application behind such a gateway reads
 * the look-alike as the real header berthd framed the request without.
 */
static int
lookalike(const struct px_hdr *f, const char *name, size_t len)
{
	size_t i;
	int us = 0;

	if (f->nlen != len)
		return 0;
	for (i = 0; i < len; i++) {
		char c = f->name[i];

		if (c == '_' && name[i] == '-')
			us = 1;
		else if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != name[i])
			return 0;
	}
	return us;
}

static int
hop_header(const struct px_hdr *f)
{
	size_t k;

	for (k = 0; k < sizeof(hop_headers) / sizeof(hop_headers[0]); k++)
		if (f->nlen == hop_headers[k].len &&
		    strncasecmp(f->name, hop_headers[k].name, f->nlen) == 0)
			return 1;
	return 0;
}

void
px_head_init(struct px_head *h, int request)
{
	memset(h, 0, sizeof(*h));
	h->request = request;
	h->content_length = -1;
}

void
px_head_reset(struct px_head *h)
{
	int request = h->request;

	free(h->hdr);		/* raw shares its allocation */
	px_head_init(h, request);
}

static int
lex_request_line(const char *p, size_t n)
{
	size_t i = 0, s;

	for (s = i; i < n && tchar[(unsigned char)p[i]]; i++)
		;
	if (i == s || i >= n || p[i] != ' ')
		return -1;
	for (s = ++i; i < n && p[i] >= 0x21 && p[i] <= 0x7e; i++)
		;
	if (i == s || i >= n || p[i] != ' ')
		return -1;
	i++;
	if (n - i != 8 || memcmp(p + i, "HTTP/", 5) != 0 ||
	    !is_digit(p[i + 5]) || p[i + 6] != '.' || !is_digit(p[i + 7]))
		return -1;
	return 0;
}

static int
lex_status_line(const char *p, size_t n)
{
	size_t i;

	if (n < 12 || memcmp(p, "HTTP/", 5) != 0 || !is_digit(p[5]) ||
	    p[6] != '.' || !is_digit(p[7]) || p[8] != ' ' ||
	    !is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]) ||
	    p[9] == '0')	/* 000-099 is no status: berthd would relay "0" */
		return -1;
	if (n == 12)
		return 0;
	if (p[12] != ' ')
		return -1;
	for (i = 13; i < n; i++)
		if (!is_vbyte((unsigned char)p[i]))
			return -1;
	return 0;
}

static int
lex_field_line(const char *p, size_t n, const char **why)
{
	size_t i;

	if (p[0] == ' ' || p[0] == '\t') {
		*why = "obsolete line folding in a header";
		return -1;
	}
	for (i = 0; i < n && tchar[(unsigned char)p[i]]; i++)
		;
	if (i == 0 || i >= n || p[i] != ':') {
		*why = (i < n && (p[i] == ' ' || p[i] == '\t')) ?
		    "whitespace before a header's colon" :
		    "invalid byte in a header name";
		return -1;
	}
	for (i++; i < n; i++)
		if (!is_vbyte((unsigned char)p[i])) {
			*why = "control byte in a header value";
			return -1;
		}
	return 0;
}

/* Fills the field table from h->raw, which passed the lexer. */
static void
split_fields(struct px_head *h)
{
	const char *p = h->raw, *end = h->raw + h->rawlen - 2;
	const char *eol;

	eol = memchr(p, '\r', end - p);
	p = eol + 2;
	h->nhdr = 0;
	while (p < end) {
		struct px_hdr *f = &h->hdr[h->nhdr++];
		const char *colon, *v, *ve;

		eol = memchr(p, '\r', end - p + 1);
		colon = memchr(p, ':', eol - p);
		f->name = p;
		f->nlen = colon - p;
		v = colon + 1;
		ve = eol;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		f->value = v;
		f->vlen = ve - v;
		p = eol + 2;
	}
}

static int
parse_start(struct px_head *h)
{
	const char *p = h->raw, *sp, *eol = memchr(h->raw, '\r', h->rawlen);

	if (h->request) {
		sp = memchr(p, ' ', eol - p);
		h->method_str = p;
		h->method_len = sp - p;
		h->target = sp + 1;
		sp = memchr(h->target, ' ', eol - h->target);
		h->target_len = sp - h->target;
		h->major = sp[6] - '0';
		h->minor = sp[8] - '0';
	} else {
		h->major = p[5] - '0';
		h->minor = p[7] - '0';
		h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
		h->reason = eol - p > 12 ? p + 13 : eol;
		h->reason_len = eol - h->reason;
	}
	return 0;
}

/* Runs http-parser over the accepted head: a second opinion that must
 * agree, and the source of the method number. */
static int
cross_check(struct px_head *h, int *status, const char **why)
{
	static const http_parser_settings settings;
	http_parser hp;
	size_t n;

	http_parser_init(&hp, h->request ? HTTP_REQUEST : HTTP_RESPONSE);
	n = http_parser_execute(&hp, &settings, h->raw, h->rawlen);
	if (HTTP_PARSER_ERRNO(&hp) != HPE_OK || n != h->rawlen) {
		if (HTTP_PARSER_ERRNO(&hp) == HPE_INVALID_METHOD) {
			*status = 501;
			*why = "unknown request method";
		} else {
			*status = h->request ? 400 : 502;
			*why = http_errno_description(HTTP_PARSER_ERRNO(&hp));
		}
		return -1;
	}
	if (h->request)
		h->method = hp.method;
	if (hp.http_major != h->major || hp.http_minor != h->minor ||
	    (!h->request && hp.status_code != (unsigned)h->status)) {
		*status = h->request ? 400 : 502;
		*why = "start line parsed two ways";
		return -1;
	}
	return 0;
}

static int
parse_cl(const char *v, size_t n, int64_t *out)
{
	int64_t x = 0;
	size_t i;

	if (n == 0 || n > 18)
		return -1;
	for (i = 0; i < n; i++) {
		if (!is_digit((unsigned char)v[i]))
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	*out = x;
	return 0;
}

#define FAIL(st, w) do { *status = (st); *why = (w); return -1; } while (0)

/*
 * Absolute-form (RFC 9112 3.2.2), which a server must accept:
 * "http[s]://authority/path". Accepted when its authority is the Host
 * header's value (berthd then checks Host against the TLS name); the
 * target becomes the origin-form path, which is what goes upstream.
 * Returns 0 when the target is not absolute-form (the caller goes on)
 * or was rewritten, -1 with *status and *why when it is refused.
 */
static int
absolute_form(struct px_head *h, int *status, const char **why)
{
	const char *t = h->target, *a, *e, *end = t + h->target_len;
	size_t skip;

	if (h->target_len > 7 && strncasecmp(t, "http://", 7) == 0)
		skip = 7;
	else if (h->target_len > 8 && strncasecmp(t, "https://", 8) == 0)
		skip = 8;
	else
		return 0;
	a = t + skip;
	for (e = a; e < end && *e != '/' && *e != '?' && *e != '#'; e++)
		;
	if (memchr(a, '@', (size_t)(e - a)) != NULL)
		FAIL(400, "user information in the request target");
	if (h->host == NULL || (size_t)(e - a) != h->host->vlen ||
	    strncasecmp(a, h->host->value, h->host->vlen) != 0)
		FAIL(400, "the request target's authority is not the Host header");
	if (e == end) {
		h->target = "/";
		h->target_len = 1;
	} else if (*e != '/') {
		FAIL(400, "absolute-form request target without a path");
	} else {
		h->target = e;
		h->target_len = (size_t)(end - e);
	}
	return 0;
}

static int
semantics(struct px_head *h, int *status, const char **why)
{
	int bad = h->request ? 400 : 502;
	const struct px_hdr *te = NULL, *cl = NULL, *expect = NULL;
	int i;

	if (h->major != 1 || h->minor > 1)
		FAIL(h->request ? 505 : 502, "unsupported HTTP version");
	for (i = 0; i < h->nhdr; i++) {
		struct px_hdr *f = &h->hdr[i];

		if (NAME_IS(f, "host")) {
			if (h->host != NULL)
				FAIL(bad, "duplicate Host header");
			h->host = f;
		} else if (NAME_IS(f, "content-length")) {
			if (cl != NULL)
				FAIL(bad, "duplicate Content-Length header");
			cl = f;
		} else if (NAME_IS(f, "transfer-encoding")) {
			if (te != NULL)
				FAIL(bad, "duplicate Transfer-Encoding header");
			te = f;
		} else if (NAME_IS(f, "connection")) {
			if (px_list_has(f->value, f->vlen, "close"))
				h->conn_close = 1;
			if (px_list_has(f->value, f->vlen, "keep-alive"))
				h->conn_keepalive = 1;
			if (px_list_has(f->value, f->vlen, "upgrade"))
				h->conn_upgrade = 1;
		} else if (NAME_IS(f, "upgrade")) {
			if (h->upgrade != NULL)
				FAIL(bad, "duplicate Upgrade header");
			h->upgrade = f;
		} else if (NAME_IS(f, "expect")) {
			if (expect != NULL)
				FAIL(bad, "duplicate Expect header");
			expect = f;
		}
		f->hop = hop_header(f);
		if (h->request && memchr(f->name, '_', f->nlen) != NULL) {
			size_t k;

			/* Refused, not dropped: no client has a reason to
			 * send one, and the request it came with was built to
			 * be read two ways; a 400 shows it. */
			for (k = 0; k < sizeof(hop_headers) / sizeof(hop_headers[0]); k++)
				if (lookalike(f, hop_headers[k].name, hop_headers[k].len))
					FAIL(400, "header name with '_' for '-' of a "
					    "framing or hop-by-hop header");
			/* dropped: berthd writes these itself */
			for (k = 0; k < sizeof(own_headers) / sizeof(own_headers[0]); k++)
				if (lookalike(f, own_headers[k].name, own_headers[k].len))
					f->hop = 1;
		}
	}
	/* Headers the Connection header names are hop-by-hop too. */
	for (i = 0; i < h->nhdr; i++) {
		const struct px_hdr *c = &h->hdr[i];
		int j;

		if (!NAME_IS(c, "connection"))
			continue;
		for (j = 0; j < h->nhdr; j++) {
			char name[64];

			if (h->hdr[j].nlen >= sizeof(name))
				continue;
			memcpy(name, h->hdr[j].name, h->hdr[j].nlen);
			name[h->hdr[j].nlen] = '\0';
			if (px_list_has(c->value, c->vlen, name))
				h->hdr[j].hop = 1;
		}
	}
	if (te != NULL) {
		if (h->request && h->minor == 0)
			FAIL(400, "Transfer-Encoding in an HTTP/1.0 request");
		if (cl != NULL)
			FAIL(bad, "both Content-Length and Transfer-Encoding");
		if (!memcaseeq(te->value, te->vlen, "chunked")) {
			/* A final chunked after other codings is valid HTTP
			 * that berthd does not implement; anything else is
			 * an attempt at ambiguity. */
			const char *last = te->value + te->vlen;
			size_t n = 0;

			while (n < te->vlen && last[-1 - (ssize_t)n] != ',' &&
			    last[-1 - (ssize_t)n] != ' ')
				n++;
			if (h->request && memcaseeq(last - n, n, "chunked") &&
			    !px_list_has(te->value, te->vlen - n, "chunked"))
				FAIL(501, "transfer coding not implemented");
			FAIL(bad, "Transfer-Encoding other than chunked");
		}
		h->chunked = 1;
	}
	if (cl != NULL && parse_cl(cl->value, cl->vlen, &h->content_length) != 0)
		FAIL(bad, "invalid Content-Length");
	if (!h->request)
		return 0;

	if (h->minor == 1 && h->host == NULL)
		FAIL(400, "missing Host header");
	if (h->method == HTTP_CONNECT)
		FAIL(405, "CONNECT is not supported");
	if (h->target[0] != '/' && absolute_form(h, status, why) != 0)
		return -1;
	if (h->target[0] != '/' &&
	    !(h->method == HTTP_OPTIONS && h->target_len == 1 && h->target[0] == '*'))
		FAIL(400, "request target must be a path");
	{
		const char *q = memchr(h->target, '?', h->target_len);
		size_t plen = q ? (size_t)(q - h->target) : h->target_len, k;

		/* a NUL in a path ends a C string early: the name a guest
		 * opens is not the one its checks saw */
		for (k = 0; k + 2 < plen; k++)
			if (h->target[k] == '%' && h->target[k + 1] == '0' &&
			    h->target[k + 2] == '0')
				FAIL(400, "percent-encoded NUL (%00) in the path");
	}
	if (expect != NULL) {
		if (!memcaseeq(expect->value, expect->vlen, "100-continue"))
			FAIL(417, "unsupported Expect");
		h->expect_continue = h->minor == 1;
	}
	if (h->upgrade != NULL && !h->conn_upgrade)
		h->upgrade = NULL;	/* not a valid upgrade request: ignore */
	return 0;
}

ssize_t
px_head_parse(struct px_head *h, const char *buf, size_t len, int *status,
    const char **why)
{
	size_t pos = h->scanned, lim = len < PX_HEAD_MAX ? len : PX_HEAD_MAX;
	int big = h->request ? 431 : 502;
	size_t tab;

	for (;;) {
		const char *nl, *cr;
		size_t eol, n;

		nl = memchr(buf + pos, '\n', lim - pos);
		cr = memchr(buf + pos, '\r', (nl ? (size_t)(nl - buf) : lim) - pos);
		/* A CR must be immediately followed by LF, and only there. */
		if (cr != NULL && (size_t)(cr - buf) + 1 < lim &&
		    (nl == NULL || cr + 1 != nl))
			FAIL(h->request ? 400 : 502, "bare CR in the head");
		if (nl == NULL) {
			if (memchr(buf + pos, '\0', lim - pos) != NULL)
				FAIL(h->request ? 400 : 502, "NUL byte in the head");
			/* an endless start line is a malformed one, not a
			 * large head */
			if (pos == 0 && h->request && lim > PX_REQLINE_MAX)
				FAIL(400, "request line too long");
			if (len >= PX_HEAD_MAX)
				FAIL(big, "head too large");
			h->scanned = pos;
			return 0;
		}
		eol = nl - buf;
		if (eol == pos || buf[eol - 1] != '\r')
			FAIL(h->request ? 400 : 502, "bare LF in the head");
		n = eol - 1 - pos;
		if (n == 0) {
			if (pos == 0)
				FAIL(h->request ? 400 : 502, "empty start line");
			pos = eol + 1;
			break;
		}
		if (pos == 0) {
			if (h->request && n > PX_REQLINE_MAX)
				FAIL(400, "request line too long");
			/* HTTP/2's connection preface: berthd speaks 1.1 here */
			if (h->request && n == 14 && memcmp(buf, "PRI * HTTP/2.0", 14) == 0)
				FAIL(400, "HTTP/2 connection preface on an HTTP/1.1 connection");
			if ((h->request ? lex_request_line(buf, n) :
			    lex_status_line(buf, n)) != 0)
				FAIL(h->request ? 400 : 502,
				    h->request ? "malformed request line" :
				    "malformed status line");
		} else {
			if (lex_field_line(buf + pos, n, why) != 0) {
				*status = h->request ? 400 : 502;
				return -1;
			}
			if (++h->nhdr > PX_HEADERS_MAX)
				FAIL(big, "too many header fields");
		}
		pos = eol + 1;
	}

	/* Idle connections hold no field table: it exists only while a
	 * message is in flight, sized to the fields the lexer counted, in
	 * one allocation with the head's bytes after it. */
	tab = (size_t)(h->nhdr + 1) * sizeof(*h->hdr);
	if ((h->hdr = malloc(tab + pos + 1)) == NULL)
		FAIL(h->request ? 503 : 502, "out of memory");
	memset(h->hdr, 0, tab);
	h->raw = (char *)h->hdr + tab;
	memcpy(h->raw, buf, pos);
	h->raw[pos] = '\0';
	h->rawlen = pos;
	parse_start(h);
	split_fields(h);
	if (cross_check(h, status, why) != 0 || semantics(h, status, why) != 0)
		return -1;
	return (ssize_t)pos;
}

const struct px_hdr *
px_head_get(const struct px_head *h, const char *name)
{
	int i;

	for (i = 0; i < h->nhdr; i++)
		if (memcaseeq(h->hdr[i].name, h->hdr[i].nlen, name))
			return &h->hdr[i];
	return NULL;
}

int
px_list_has(const char *v, size_t vlen, const char *token)
{
	size_t tlen = strlen(token), i = 0;

	while (i < vlen) {
		size_t s, e;

		while (i < vlen && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < vlen && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tlen && strncasecmp(v + s, token, tlen) == 0)
			return 1;
	}
	return 0;
}

enum px_body_kind
px_request_body(const struct px_head *h)
{
	if (h->chunked)
		return PX_BODY_CHUNKED;
	if (h->content_length > 0)
		return PX_BODY_LENGTH;
	return PX_BODY_NONE;
}

enum px_body_kind
px_response_body(const struct px_head *h, int req_method)
{
	if (req_method == HTTP_HEAD || (h->status >= 100 && h->status < 200) ||
	    h->status == 204 || h->status == 304)
		return PX_BODY_NONE;
	if (h->chunked)
		return PX_BODY_CHUNKED;
	if (h->content_length >= 0)
		return h->content_length > 0 ? PX_BODY_LENGTH : PX_BODY_NONE;
	return PX_BODY_CLOSE;
}

int
px_head_keepalive(const struct px_head *h)
{
	if (h->conn_close)
		return 0;
	if (h->minor == 0)
		return h->conn_keepalive;
	return 1;
}

/* chunked decoder states */
enum {
	CH_SIZE, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF,
	CH_TRAILER, CH_TRAILER_LF, CH_END_LF, CH_DONE,
	/* chunk extensions, RFC 9112 7.1.1:
	 *   chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] )
	 *   name = token, value = token / quoted-string */
	CH_SIZE_WS,	/* BWS after the size: ';' must follow */
	CH_EXT_NAME0,	/* after ';': BWS, then a token */
	CH_EXT_NAME,	/* in the name */
	CH_EXT_NAME_WS,	/* BWS after the name: '=' or ';' must follow */
	CH_EXT_VAL0,	/* after '=': BWS, then a token or a quote */
	CH_EXT_TOKEN,	/* in a token value */
	CH_EXT_QUOTED,	/* in a quoted-string */
	CH_EXT_QPAIR,	/* after '\\' in it */
	CH_EXT_VAL_WS,	/* BWS after a value: ';' must follow */
	CH_EXT_END,	/* right after a closing quote */
};

void
px_chunk_init(struct px_chunk *c)
{
	memset(c, 0, sizeof(*c));
}

int
px_chunk_done(const struct px_chunk *c)
{
	return c->state == CH_DONE;
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#define CFAIL(w) do { *why = (w); return -1; } while (0)

/* One byte of a chunk's extensions (berthd drops them when it
 * re-frames, but a peer that writes them off the grammar is one the
 * next hop may read differently). */
static int
chunk_ext(struct px_chunk *c, unsigned char ch, const char **why)
{
	int ws = ch == ' ' || ch == '\t';

	switch (c->state) {
	case CH_SIZE_WS:
		if (ch == ';')
			c->state = CH_EXT_NAME0;
		else if (!ws)
			CFAIL("invalid byte after chunk size");
		return 0;
	case CH_EXT_NAME0:
		if (tchar[ch])
			c->state = CH_EXT_NAME;
		else if (!ws)
			CFAIL("chunk extension without a name");
		return 0;
	case CH_EXT_NAME:
		if (tchar[ch])
			return 0;
		break;
	case CH_EXT_NAME_WS:
		if (ws)
			return 0;
		if (ch == '=')
			c->state = CH_EXT_VAL0;
		else if (ch == ';')
			c->state = CH_EXT_NAME0;
		else
			CFAIL("invalid byte in a chunk extension");
		return 0;
	case CH_EXT_VAL0:
		if (ch == '"')
			c->state = CH_EXT_QUOTED;
		else if (tchar[ch])
			c->state = CH_EXT_TOKEN;
		else if (!ws)
			CFAIL("chunk extension without a value after '='");
		return 0;
	case CH_EXT_TOKEN:
		if (tchar[ch])
			return 0;
		break;
	case CH_EXT_QUOTED:
		/* qdtext: HTAB, SP, 0x21, 0x23-0x5B, 0x5D-0x7E, obs-text */
		if (ch == '"')
			c->state = CH_EXT_END;
		else if (ch == '\\')
			c->state = CH_EXT_QPAIR;
		else if (!(ws || ch == 0x21 || (ch >= 0x23 && ch != 0x7f)))
			CFAIL("invalid byte in a chunk extension's quoted value");
		return 0;
	case CH_EXT_QPAIR:
		if (!(ws || (ch >= 0x21 && ch != 0x7f)))
			CFAIL("invalid byte in a chunk extension's quoted value");
		c->state = CH_EXT_QUOTED;
		return 0;
	case CH_EXT_VAL_WS:
		if (ch == ';')
			c->state = CH_EXT_NAME0;
		else if (!ws)
			CFAIL("invalid byte in a chunk extension");
		return 0;
	case CH_EXT_END:
		break;
	}
	/* after a name, a token value or a closing quote */
	if (ch == '\r')
		c->state = CH_SIZE_LF;
	else if (ch == ';')
		c->state = CH_EXT_NAME0;
	else if (ch == '=' && c->state == CH_EXT_NAME)
		c->state = CH_EXT_VAL0;
	else if (ws)
		c->state = c->state == CH_EXT_NAME ? CH_EXT_NAME_WS : CH_EXT_VAL_WS;
	else
		CFAIL("invalid byte in a chunk extension");
	return 0;
}

ssize_t
px_chunk_step(struct px_chunk *c, const char *in, size_t len, size_t *dlen,
    const char **why)
{
	size_t i = 0;

	*dlen = 0;
	while (i < len && c->state != CH_DONE) {
		unsigned char ch = in[i];
		int v;

		switch (c->state) {
		case CH_SIZE:
			if ((v = hexval(ch)) >= 0) {
				/* 15 hex digits: far beyond any real body,
				 * and no uint64 overflow. */
				if (++c->digits > 15)
					CFAIL("chunk size too large");
				c->remain = c->remain * 16 + v;
			} else if (c->digits == 0) {
				CFAIL("invalid chunk size");
			} else if (ch == ';') {
				c->state = CH_EXT_NAME0;
				c->linelen = 0;
			} else if (ch == ' ' || ch == '\t') {
				c->state = CH_SIZE_WS;
				c->linelen = 0;
			} else if (ch == '\r') {
				c->state = CH_SIZE_LF;
			} else {
				CFAIL("invalid byte after chunk size");
			}
			i++;
			break;
		case CH_SIZE_WS:
		case CH_EXT_NAME0:
		case CH_EXT_NAME:
		case CH_EXT_NAME_WS:
		case CH_EXT_VAL0:
		case CH_EXT_TOKEN:
		case CH_EXT_QUOTED:
		case CH_EXT_QPAIR:
		case CH_EXT_VAL_WS:
		case CH_EXT_END:
			if (++c->linelen > PX_CHUNK_EXT_MAX)
				CFAIL("chunk extension too long");
			if (chunk_ext(c, ch, why) != 0)
				return -1;
			i++;
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				CFAIL("chunk size line not ended by CRLF");
			i++;
			c->digits = 0;
			if (c->remain == 0) {
				c->state = CH_TRAILER;
				c->linelen = 0;
			} else {
				c->state = CH_DATA;
			}
			break;
		case CH_DATA: {
			size_t n = len - i;

			if (n > c->remain)
				n = (size_t)c->remain;
			c->remain -= n;
			i += n;
			*dlen = n;
			if (c->remain == 0)
				c->state = CH_DATA_CR;
			return (ssize_t)i;
		}
		case CH_DATA_CR:
			if (ch != '\r')
				CFAIL("chunk data not followed by CRLF");
			c->state = CH_DATA_LF;
			i++;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				CFAIL("chunk data not followed by CRLF");
			c->state = CH_SIZE;
			c->remain = 0;
			i++;
			break;
		case CH_TRAILER:
			/* Trailers are checked like header lines and then
			 * dropped: berthd forwards none. */
			if (ch == '\r') {
				c->state = c->linelen == 0 ? CH_END_LF : CH_TRAILER_LF;
			} else if (c->linelen == 0 && (ch == ' ' || ch == '\t')) {
				CFAIL("obsolete line folding in a trailer");
			} else if (ch == '\t' || (ch >= 0x20 && ch != 0x7f)) {
				c->linelen++;
			} else {
				CFAIL("invalid byte in a trailer");
			}
			if (++c->trailer > PX_TRAILER_MAX)
				CFAIL("trailers too large");
			i++;
			break;
		case CH_TRAILER_LF:
			if (ch != '\n')
				CFAIL("trailer not ended by CRLF");
			c->state = CH_TRAILER;
			c->linelen = 0;
			i++;
			break;
		case CH_END_LF:
			if (ch != '\n')
				CFAIL("chunked body not ended by CRLF");
			c->state = CH_DONE;
			i++;
			break;
		}
	}
	return (ssize_t)i;
}

static int
lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* 1 if the query parameter name s[0..n), percent-decoded, is name
 * (ASCII case ignored). Decoded again while that changes it (a few
 * rounds): an application that decodes twice must not see name either. */
static int
param_name_is(const char *s, size_t n, const char *name)
{
	char buf[256];
	size_t i, o, nl = strlen(name);
	int round, changed = 1;

	if (n >= sizeof(buf))
		return 0;
	memcpy(buf, s, n);
	for (round = 0; round < 4 && changed && n > nl; round++) {
		changed = 0;
		for (i = o = 0; i < n; o++) {
			int hi, lo;

			if (buf[i] == '%' && i + 2 < n &&
			    (hi = hexval((unsigned char)buf[i + 1])) >= 0 &&
			    (lo = hexval((unsigned char)buf[i + 2])) >= 0) {
				buf[o] = (char)(hi << 4 | lo);
				i += 3;
				changed = 1;
			} else {
				buf[o] = buf[i++];
			}
		}
		n = o;
	}
	if (n != nl)
		return 0;
	for (i = 0; i < n; i++)
		if (lower((unsigned char)buf[i]) != lower((unsigned char)name[i]))
			return 0;
	return 1;
}

size_t
px_target_strip_param(const char *t, size_t len, const char *name, char *out,
    int *removed)
{
	const char *q = memchr(t, '?', len), *end = t + len, *p;
	size_t o;
	int kept = 0, n = 0;

	if (q == NULL) {
		memcpy(out, t, len);
		if (removed != NULL)
			*removed = 0;
		return len;
	}
	o = (size_t)(q - t);
	memcpy(out, t, o);
	out[o++] = '?';
	for (p = q + 1; p <= end; ) {
		const char *s = p, *e = p, *eq;
		char sep = p > q + 1 ? p[-1] : '\0';

		while (e < end && *e != '&' && *e != ';')
			e++;
		eq = memchr(s, '=', (size_t)(e - s));
		if (param_name_is(s, (size_t)((eq ? eq : e) - s), name)) {
			n++;
		} else {
			if (kept++ > 0)
				out[o++] = sep;
			memcpy(out + o, s, (size_t)(e - s));
			o += (size_t)(e - s);
		}
		p = e + 1;
	}
	if (kept == 0)
		o--;		/* nothing left after the '?' */
	if (removed != NULL)
		*removed = n;
	return o;
}
