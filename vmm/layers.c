/*
 * layers.c — disk layer chains. A sandbox made by a fork stands on
 * frozen qcow2 layers (<state>/vms/.layers/<name>.qcow2) over a ready
 * snapshot's layer over the template's image; each header names the
 * layer below it by its absolute host path. qemu follows the headers
 * itself (backing files read-only), so a jailed VMM must see every file
 * of its chain at the same path: the jail binds each one, read-only.
 *
 * What is read here are qcow2 headers berth wrote itself (qemu-img), in
 * root's state dir: still bounded (a name of at most PATH_MAX - 1 bytes,
 * at most VMM_CHAIN_MAX files, no loops).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "vmm.h"

static uint64_t
be64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/*
 * The backing file path of a qcow2 image into out ("" when it has none
 * or is not qcow2: the end of a chain). 0, or -1 with err.
 */
static int
backing_of(const char *path, char *out, size_t outlen, char *err,
    size_t errlen)
{
	unsigned char h[20];
	char name[PATH_MAX];
	uint64_t off;
	uint32_t len;
	int fd;

	out[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "layer %s: %s", path, strerror(errno));
		return -1;
	}
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, "QFI\xfb", 4) != 0) {
		close(fd);
		return 0;		/* raw (the template's image) */
	}
	off = be64(h + 8);
	len = be32(h + 16);
	if (off == 0 || len == 0) {
		close(fd);
		return 0;
	}
	if (len >= sizeof(name) || pread(fd, name, len, (off_t)off) !=
	    (ssize_t)len) {
		close(fd);
		snprintf(err, errlen, "layer %s: a bad backing file name", path);
		return -1;
	}
	close(fd);
	name[len] = '\0';
	if (name[0] == '/') {
		snprintf(out, outlen, "%s", name);
	} else {
		/* relative to the layer's own directory */
		const char *slash = strrchr(path, '/');
		int dl = slash != NULL ? (int)(slash - path) : 0;

		snprintf(out, outlen, "%.*s%s%s", dl, path, dl ? "/" : "",
		    name);
	}
	return 0;
}

int
vmm_chain(const char *top, char files[][PATH_MAX], int max, char *err,
    size_t errlen)
{
	int n = 0, i;

	snprintf(files[n++], PATH_MAX, "%s", top);
	for (;;) {
		char next[PATH_MAX];

		if (backing_of(files[n - 1], next, sizeof(next), err,
		    errlen) < 0)
			return -1;
		if (next[0] == '\0')
			return n;
		for (i = 0; i < n; i++)
			if (strcmp(files[i], next) == 0) {
				snprintf(err, errlen, "layer %s: a loop in its "
				    "backing chain", next);
				return -1;
			}
		if (n == max) {
			snprintf(err, errlen, "layer %s: a backing chain "
			    "deeper than %d", top, max);
			return -1;
		}
		snprintf(files[n++], PATH_MAX, "%s", next);
	}
}
