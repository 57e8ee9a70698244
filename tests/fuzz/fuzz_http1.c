/*
 * fuzz_http1.c — libFuzzer target for berthd's HTTP/1.1 head lexer and
 * chunked decoder (proxy/edge/http1.c). The first byte picks request or
 * response and the feeding pattern; the head is fed incrementally, as
 * bytes arrive on a socket, and whatever follows it goes through the
 * chunked decoder. Invariants: no crash, consumed <= offered, a head
 * that parses once parses to the same length when fed whole.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "http1.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct px_head h, whole;
	struct px_chunk c;
	const char *buf, *why;
	size_t len, step, i, dlen;
	ssize_t n = 0, m;
	int status;

	if (size < 1)
		return 0;
	buf = (const char *)data + 1;
	len = size - 1;
	step = 1 + (data[0] >> 1) % 64;
	px_head_init(&h, data[0] & 1);
	for (i = step < len ? step : len; ; i = i + step < len ? i + step : len) {
		n = px_head_parse(&h, buf, i, &status, &why);
		if (n != 0 || i == len)
			break;
	}
	if (n > 0) {
		if ((size_t)n > len)
			abort();
		px_head_init(&whole, data[0] & 1);
		m = px_head_parse(&whole, buf, len, &status, &why);
		if (m != n)
			abort();
		px_head_reset(&whole);
		/* the rest as a chunked body, in pieces */
		px_chunk_init(&c);
		for (i = (size_t)n; i < len && !px_chunk_done(&c); ) {
			size_t piece = len - i < step ? len - i : step;

			m = px_chunk_step(&c, buf + i, piece, &dlen, &why);
			if (m < 0)
				break;
			if ((size_t)m > piece || dlen > (size_t)m)
				abort();
			i += (size_t)m;
			if (m == 0 && piece > 0)
				abort();	/* no progress */
		}
	}
	px_head_reset(&h);
	return 0;
}
