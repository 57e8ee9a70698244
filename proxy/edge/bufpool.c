/*
 * bufpool.c — recycled I/O buffers for libevent and OpenSSL.
 *
 * Every keep-alive request allocates and frees the same few buffers:
 * libevent's evbuffer chains (1 to 16 KiB, powers of two) for the TLS
 * client's input, the upstream's input and the staged response, and
 * OpenSSL's record buffers (about 17 KiB each way), which
 * SSL_MODE_RELEASE_BUFFERS hands back after every record so that idle
 * connections hold none. glibc serves sizes above 1 KiB from its bins
 * rather than its per-thread cache: a search, a split or a merge each
 * time. Like HAProxy's pools, freed buffers of those sizes are kept on
 * per-size free lists, a bounded number of each, and handed out again.
 *
 * The pool adds no header: a buffer's size class is read back with
 * malloc_usable_size(), so anything it returns may be freed with free()
 * and anything malloc() returned may be given to px_bufpool_free().
 * That is what makes it safe to install in a process that allocated
 * before (libevent's buffers from before a fork) and for callers that
 * free libevent's strings with free(). One process, one thread: no
 * locks. Sizes outside the classes go straight to malloc.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "bufpool.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <event2/event.h>

/* Sizes allocated for each class: evbuffer chains are powers of two;
 * 16896 fits OpenSSL 3.0's record buffers (16 KiB and their overhead:
 * 16712 bytes to read, 16560 to write). A request is served from a class
 * only if that wastes at most 1/32 of it: a 600-byte structure is no I/O
 * buffer, and idle connections must not grow. */
static const size_t class_size[] = {
	1024, 2048, 4096, 8192, 16384, 16896, 32768, 65536,
};
#define NCLASS	(sizeof(class_size) / sizeof(class_size[0]))
#define PX_BUFPOOL_KEEP 64		/* buffers kept per class, */
#define PX_BUFPOOL_CLASS_BYTES (1024 * 1024)	/* and bytes at most */

struct freebuf {
	struct freebuf	*next;
};

static struct {
	size_t		 usable;	/* malloc_usable_size of the class */
	struct freebuf	*free;
	unsigned	 n;
} cls[NCLASS];
static int ready;

static void
init(void)
{
	size_t i;

	for (i = 0; i < NCLASS; i++) {
		void *p = malloc(class_size[i]);

		/* 0: the class never matches (then everything bypasses it) */
		cls[i].usable = p ? malloc_usable_size(p) : 0;
		free(p);
	}
	ready = 1;
}

void *
px_bufpool_alloc(size_t n)
{
	size_t i;

	if (!ready)
		init();
	if (n > class_size[NCLASS - 1])
		return malloc(n);
	for (i = 0; class_size[i] < n; i++)
		;
	if (class_size[i] - n > class_size[i] / 32)
		return malloc(n);
	if (cls[i].free != NULL) {
		struct freebuf *b = cls[i].free;

		cls[i].free = b->next;
		cls[i].n--;
		return b;
	}
	return malloc(class_size[i]);
}

void
px_bufpool_free(void *p)
{
	size_t u, i;

	if (p == NULL)
		return;
	if (!ready)
		init();
	u = malloc_usable_size(p);
	for (i = 0; i < NCLASS; i++) {
		if (cls[i].usable == u) {
			struct freebuf *b = p;

			if (cls[i].n >= PX_BUFPOOL_KEEP ||
			    (cls[i].n + 1) * class_size[i] > PX_BUFPOOL_CLASS_BYTES)
				break;
			b->next = cls[i].free;
			cls[i].free = b;
			cls[i].n++;
			return;
		}
		if (cls[i].usable > u)
			break;
	}
	free(p);
}

void *
px_bufpool_realloc(void *p, size_t n)
{
	void *q;
	size_t u;

	if (p == NULL)
		return px_bufpool_alloc(n);
	if (n == 0) {
		px_bufpool_free(p);
		return NULL;
	}
	if ((u = malloc_usable_size(p)) >= n)
		return p;
	if ((q = px_bufpool_alloc(n)) == NULL)
		return NULL;
	memcpy(q, p, u);
	px_bufpool_free(p);
	return q;
}

void
px_bufpool_stats(size_t *nbufs, size_t *bytes)
{
	size_t i;

	*nbufs = *bytes = 0;
	for (i = 0; i < NCLASS; i++) {
		*nbufs += cls[i].n;
		*bytes += cls[i].n * class_size[i];
	}
}

/* Under AddressSanitizer (and valgrind, told by BERTH_BUFPOOL=0) every
 * buffer must really be freed, or a use after free goes unseen. */
#if defined(__SANITIZE_ADDRESS__)
#define PX_BUFPOOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PX_BUFPOOL_OFF 1
#endif
#endif

#ifndef PX_BUFPOOL_OFF
static void *
ossl_alloc(size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return px_bufpool_alloc(n);
}

static void *
ossl_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return px_bufpool_realloc(p, n);
}

static void
ossl_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	px_bufpool_free(p);
}

int
px_bufpool_install(void)
{
	const char *e = getenv("BERTH_BUFPOOL");

	if (e != NULL && strcmp(e, "0") == 0)
		return 0;
	event_set_mem_functions(px_bufpool_alloc, px_bufpool_realloc,
	    px_bufpool_free);
	return CRYPTO_set_mem_functions(ossl_alloc, ossl_realloc,
	    ossl_free) == 1 ? 0 : -1;
}
#else
int
px_bufpool_install(void)
{
	return 0;
}
#endif
