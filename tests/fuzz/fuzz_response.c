/*
 * fuzz_response.c — libFuzzer target for what berthd does with the bytes
 * an upstream (the sandbox) sends back: response heads (proxy/edge/http1.c),
 * interim 1xx heads, body framing for the request method, the chunked
 * decoder, and the head berthd writes to the client instead (rewritten
 * the way send_resp_head() in session.c does), which must parse again.
 * data[0]: bits 0-1 pick the request method (GET, HEAD, POST, CONNECT),
 * bits 2-7 the feeding step; the rest is the upstream's byte stream,
 * possibly several responses on a kept-alive connection.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "http1.h"

#include <http_parser.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The head berthd forwards: status line, the fields that are not
 * hop-by-hop, its own framing. -1 when it would not fit. */
static int
rewrite(const struct px_head *h, enum px_body_kind kind, char *out, size_t cap)
{
	size_t n;
	int i, k;

	k = snprintf(out, cap, "HTTP/1.1 %d %.*s\r\n", h->status,
	    (int)h->reason_len, h->reason);
	if (k < 0 || (size_t)k >= cap)
		return -1;
	n = (size_t)k;
	for (i = 0; i < h->nhdr; i++) {
		const struct px_hdr *f = &h->hdr[i];

		if (f->hop)
			continue;
		if (n + f->nlen + f->vlen + 4 >= cap)
			return -1;
		memcpy(out + n, f->name, f->nlen);
		n += f->nlen;
		memcpy(out + n, ": ", 2);
		n += 2;
		memcpy(out + n, f->value, f->vlen);
		n += f->vlen;
		memcpy(out + n, "\r\n", 2);
		n += 2;
	}
	if (h->status == 101)
		k = snprintf(out + n, cap - n, "Connection: upgrade\r\nUpgrade: %.*s\r\n\r\n",
		    (int)h->upgrade->vlen, h->upgrade->value);
	else if (kind == PX_BODY_CHUNKED || kind == PX_BODY_CLOSE)
		k = snprintf(out + n, cap - n, "Transfer-Encoding: chunked\r\n\r\n");
	else if (h->content_length >= 0 && h->status != 304 && h->status != 204 &&
	    (h->status < 100 || h->status >= 200))
		k = snprintf(out + n, cap - n, "Content-Length: %lld\r\n\r\n",
		    (long long)h->content_length);
	else
		k = snprintf(out + n, cap - n, "\r\n");
	if (k < 0 || (size_t)k >= cap - n)
		return -1;
	return (int)(n + (size_t)k);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int methods[] = { HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_CONNECT };
	static char out[2 * PX_HEAD_MAX];
	const char *buf, *why;
	size_t len, step, pos = 0, i;
	int method, status, msgs = 0;

	if (size < 1)
		return 0;
	buf = (const char *)data + 1;
	len = size - 1;
	method = methods[data[0] & 3];
	step = 1 + (data[0] >> 2);
	while (pos < len && msgs++ < 16) {
		struct px_head h, again;
		enum px_body_kind kind;
		ssize_t n = 0;
		int olen, fields = 0;

		/* the head, as it trickles in */
		px_head_init(&h, 0);
		for (i = step < len - pos ? step : len - pos; ;
		    i = i + step < len - pos ? i + step : len - pos) {
			n = px_head_parse(&h, buf + pos, i, &status, &why);
			if (n != 0 || i == len - pos)
				break;
		}
		if (n <= 0) {
			if (n < 0 && (status < 500 || status > 599 || why == NULL))
				abort();
			px_head_reset(&h);
			break;
		}
		if ((size_t)n > len - pos || h.status < 100 || h.status > 999 ||
		    h.reason + h.reason_len > h.raw + h.rawlen)
			abort();
		pos += (size_t)n;
		(void)px_head_keepalive(&h);
		(void)px_head_get(&h, "content-type");
		kind = px_response_body(&h, method);
		if (kind == PX_BODY_LENGTH && h.content_length <= 0)
			abort();
		if (h.status == 101 && h.upgrade == NULL) {
			/* berthd refuses it: "switched protocols unasked" */
			px_head_reset(&h);
			break;
		}
		/* what the client gets must be a head berthd itself accepts */
		for (i = 0; i < (size_t)h.nhdr; i++)
			fields += !h.hdr[i].hop;
		olen = rewrite(&h, kind, out, sizeof(out));
		if (olen > 0 && olen <= PX_HEAD_MAX && fields + 2 <= PX_HEADERS_MAX) {
			px_head_init(&again, 0);
			if (px_head_parse(&again, out, (size_t)olen, &status, &why) != olen ||
			    again.status != h.status)
				abort();
			px_head_reset(&again);
		}
		if (h.status == 101) {
			px_head_reset(&h);
			break;	/* a tunnel from here on */
		}
		if (kind == PX_BODY_CLOSE) {
			px_head_reset(&h);
			break;	/* the rest is body */
		}
		if (kind == PX_BODY_LENGTH) {
			uint64_t left = (uint64_t)h.content_length;

			pos += left < len - pos ? (size_t)left : len - pos;
		} else if (kind == PX_BODY_CHUNKED) {
			struct px_chunk c;
			size_t dlen;

			px_chunk_init(&c);
			while (pos < len && !px_chunk_done(&c)) {
				size_t piece = len - pos < step ? len - pos : step;
				ssize_t m = px_chunk_step(&c, buf + pos, piece, &dlen, &why);

				if (m < 0)
					break;
				if ((size_t)m > piece || dlen > (size_t)m ||
				    (m == 0 && piece > 0))
					abort();
				pos += (size_t)m;
			}
			if (!px_chunk_done(&c)) {
				px_head_reset(&h);
				break;
			}
		}
		px_head_reset(&h);
	}
	return 0;
}
