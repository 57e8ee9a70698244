/*
 * sbfield.c — sbfield.h's rows as data, with where each field sits in
 * struct px_sandbox.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "sbfield.h"
#include "store.h"

#include <string.h>

#define ROW(m, col, api, kind, flags, arg, cli, help) \
	{ #m, col, api, kind, flags, arg, cli, help, \
	    offsetof(struct px_sandbox, m), \
	    sizeof(((struct px_sandbox *)0)->m) },

const struct px_sbfield px_sbfields[] = {
	PX_SANDBOX_FIELDS(ROW)
};
const size_t px_nsbfields = sizeof(px_sbfields) / sizeof(px_sbfields[0]);

const struct px_sbfield *
px_sbfield_by_api(const char *name)
{
	size_t i;

	for (i = 0; i < px_nsbfields; i++)
		if (strcmp(px_sbfields[i].api, name) == 0)
			return &px_sbfields[i];
	return NULL;
}
