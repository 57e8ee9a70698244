/*
 * path.c — see path.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
px_find_exe(const char *env, const char *name, const char *const *rel,
    const char *srcrel, char *out, size_t len)
{
	const char *e = env ? getenv(env) : NULL;
	char self[PATH_MAX], *slash;
	ssize_t n;
	int i;

	if (e != NULL) {
		snprintf(out, len, "%s", e);
		return access(out, X_OK);
	}
	snprintf(out, len, "%s/%s", PKGDATADIR, name);
	if (access(out, X_OK) == 0)
		return 0;
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL)
			*slash = '\0';
		for (i = 0; rel != NULL && rel[i] != NULL; i++) {
			snprintf(out, len, "%s/%s", self, rel[i]);
			if (access(out, X_OK) == 0)
				return 0;
		}
	}
	snprintf(out, len, "%s/%s", SRCDIR, srcrel);
	return access(out, X_OK);
}
