/*
 * sbfield.h — a sandbox's fields as data: the rows of
 * vmm/proto/sandbox_fields.h with where each sits in struct px_sandbox
 * (store.h). They drive the state store's columns, reads, writes and
 * checks (store.c), the API's JSON in and out and which fields create
 * and PATCH take (api/sandboxes.c, api/reply.c); netctl's flags come
 * from the same rows. Adding a per-sandbox setting is a row there, a
 * member of struct px_sandbox, a migration adding its column (store.c),
 * and the code that acts on it.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_SBFIELD_H
#define BERTH_SBFIELD_H

#include <stddef.h>

#include "sandbox_fields.h"

/* The rows as data (store.c, beside struct px_sandbox). */
struct px_sbfield {
	const char *member;
	const char *column;	/* in table sandboxes */
	const char *api;	/* in the API's JSON */
	enum px_sbkind kind;
	unsigned flags;		/* PF_CREATE | PF_PATCH | PF_VM */
	unsigned arg;
	const char *cli;	/* netctl's flag, or NULL */
	const char *help;
	size_t off, size;	/* in struct px_sandbox */
};

extern const struct px_sbfield px_sbfields[];
extern const size_t px_nsbfields;

/* The row whose API name is name, or NULL. */
const struct px_sbfield *px_sbfield_by_api(const char *name);

#endif
