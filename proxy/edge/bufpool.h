/*
 * bufpool.h — recycled I/O buffers for libevent and OpenSSL.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_BUFPOOL_H
#define BERTH_BUFPOOL_H

#include <stddef.h>

/* Routes OpenSSL's and libevent's allocations through the pool. Call it
 * first thing in main(): OpenSSL refuses once it has allocated. Returns
 * -1 if OpenSSL refused (libevent's still go through the pool). */
int	 px_bufpool_install(void);

/* The pool's functions, plain malloc/free semantics: what they return
 * may be freed with free(), and they free what malloc returned. */
void	*px_bufpool_alloc(size_t);
void	 px_bufpool_free(void *);
void	*px_bufpool_realloc(void *, size_t);

/* Buffers kept for reuse, and their bytes (for tests). */
void	 px_bufpool_stats(size_t *nbufs, size_t *bytes);

#endif
