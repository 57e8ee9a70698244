/*
 * test_bufpool.c — unit tests for proxy/edge/bufpool.c: buffers come back for
 * reuse, within bounds, and stay interchangeable with malloc and free.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "bufpool.h"
#include "tap.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static size_t
kept(void)
{
	size_t n, bytes;

	px_bufpool_stats(&n, &bytes);
	return n;
}

int
main(void)
{
	char *p, *q, *r, *many[70];
	size_t n, bytes;
	int i, same;

	p = px_bufpool_alloc(4096);
	ok(p != NULL && malloc_usable_size(p) >= 4096, "a 4 KiB buffer");
	memset(p, 'x', 4096);
	px_bufpool_free(p);
	px_bufpool_stats(&n, &bytes);
	ok(n == 1 && bytes == 4096, "freed: kept for reuse (%zu, %zu bytes)", n, bytes);
	q = px_bufpool_alloc(4000);
	ok(q == p, "a request a little smaller gets it back");
	is_int((long long)kept(), 0, "... and the pool is empty again");

	/* interchangeable with malloc and free */
	free(q);		/* a pooled buffer, freed with free() (ASan checks) */
	r = malloc(8192);
	px_bufpool_free(r);
	is_int((long long)kept(), 1, "a malloc()ed buffer of a class size is kept");
	q = px_bufpool_alloc(8192);
	ok(q == r, "... and handed out again");
	px_bufpool_free(q);
	q = px_bufpool_alloc(8192);
	free(q);

	/* what is no I/O buffer is left to malloc */
	p = px_bufpool_alloc(100);
	px_bufpool_free(p);
	is_int((long long)kept(), 0, "a small allocation is not kept");
	p = px_bufpool_alloc(600);
	ok(p != NULL && malloc_usable_size(p) < 1024, "600 bytes are not rounded up to 1 KiB");
	px_bufpool_free(p);
	is_int((long long)kept(), 0, "... nor kept");
	p = px_bufpool_alloc(1 << 20);
	ok(p != NULL, "a large allocation is served");
	px_bufpool_free(p);
	is_int((long long)kept(), 0, "... and really freed");

	/* bounded */
	for (i = 0; i < 70; i++)
		many[i] = px_bufpool_alloc(2048);
	for (i = 0; i < 70; i++)
		px_bufpool_free(many[i]);
	is_int((long long)kept(), 64, "at most 64 buffers of a size are kept");
	for (i = 0; i < 64; i++)
		many[i] = px_bufpool_alloc(2048);
	is_int((long long)kept(), 0, "all of them are handed out again");
	for (i = 0; i < 64; i++)
		free(many[i]);
	for (i = 0; i < 20; i++)
		many[i] = px_bufpool_alloc(65536);
	for (i = 0; i < 20; i++)
		px_bufpool_free(many[i]);
	px_bufpool_stats(&n, &bytes);
	ok(n == 16 && bytes == 1024 * 1024, "of a large size, at most 1 MiB (%zu kept)", n);
	for (i = 0; i < 16; i++)
		free(px_bufpool_alloc(65536));

	/* realloc keeps the bytes */
	p = px_bufpool_alloc(1024);
	for (i = 0; i < 1024; i++)
		p[i] = (char)i;
	q = px_bufpool_realloc(p, 5000);
	for (i = 0, same = 1; q != NULL && i < 1024; i++)
		same &= q[i] == (char)i;
	ok(q != NULL && same && malloc_usable_size(q) >= 5000, "realloc to a larger class keeps the bytes");
	r = px_bufpool_realloc(q, 100);
	ok(r == q, "realloc to a smaller size keeps the buffer");
	px_bufpool_free(r);
	p = px_bufpool_realloc(NULL, 2048);
	ok(p != NULL, "realloc(NULL) allocates");
	free(p);
	px_bufpool_free(NULL);
	return done_testing();
}
