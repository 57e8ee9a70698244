/*
 * path.h — finding berth's helper programs (berth-mkcert, mktemplate,
 * the guest test app) installed, in a build tree, or in the source tree.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_PATH_H
#define BERTH_PATH_H

#include <stddef.h>

/*
 * Writes the path of an executable helper to out: $env if set, else
 * PKGDATADIR/name, else each of rel[] (relative to the directory of the
 * running binary), else SRCDIR/srcrel. 0 when the result is executable.
 */
int px_find_exe(const char *env, const char *name, const char *const *rel,
    const char *srcrel, char *out, size_t len);

#endif
