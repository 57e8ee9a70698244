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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "vmm.h"

uint64_t
vmm_be64(const unsigned char *p)
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
	off = vmm_be64(h + 8);
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

/*
 * Is path a file of some sandbox's chain (the manager's list), or of
 * the chain under a layer someone else keeps (a checkpoint's link, the
 * source's own name for its frozen top: more than one link)? A kept
 * layer is only as good as the layers below it.
 */
static int
layer_used(struct vmm *m, const char *path)
{
	static char chain[VMM_CHAIN_MAX][PATH_MAX];
	struct vmm_sandbox *sb;
	char err[VMM_ERRLEN], dir[PATH_MAX], p[PATH_MAX + 300];
	struct dirent *de;
	struct stat st;
	int n, i, used = 0;
	DIR *d;

	for (sb = m->list; sb != NULL; sb = sb->next) {
		if (!sb->layered && sb->fork_base[0] == '\0')
			continue;
		if (strcmp(sb->fork_base, path) == 0)
			return 1;	/* a fork being made */
		if ((n = vmm_chain(sb->disk, chain, VMM_CHAIN_MAX, err,
		    sizeof(err))) < 0)
			return 1;	/* unreadable: keep what it may need */
		for (i = 1; i < n; i++)
			if (strcmp(chain[i], path) == 0)
				return 1;
	}
	snprintf(dir, sizeof(dir), "%s/.layers", m->state_dir);
	if ((d = opendir(dir)) == NULL)
		return 0;
	while (!used && (de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l < 7 || strcmp(de->d_name + l - 6, ".qcow2") != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (strcmp(p, path) == 0 || lstat(p, &st) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_nlink < 2)
			continue;
		if ((n = vmm_chain(p, chain, VMM_CHAIN_MAX, err,
		    sizeof(err))) < 0) {
			used = 1;	/* unreadable: keep what it may need */
			break;
		}
		for (i = 1; i < n; i++)
			if (strcmp(chain[i], path) == 0)
				used = 1;
	}
	closedir(d);
	return used;
}

/*
 * Frozen layers no one stands on go: a layer's file in .layers has one
 * link unless a checkpoint keeps it (the source drops its own name for
 * it once captured), and then the chains of the sandboxes and of the
 * kept layers say whether anyone still needs it (layer_used). Repeated
 * until nothing more goes (a layer freed can free the one below it).
 */
void
vmm_layers_gc(struct vmm *m)
{
	char dir[PATH_MAX], p[PATH_MAX + 300];
	struct dirent *de;
	struct stat st;
	int gone = 1;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/.layers", m->state_dir);
	while (gone) {
		gone = 0;
		if ((d = opendir(dir)) == NULL)
			return;
		while ((de = readdir(d)) != NULL) {
			size_t n = strlen(de->d_name);

			if (n < 7 || strcmp(de->d_name + n - 6, ".qcow2") != 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode) ||
			    st.st_nlink != 1 || layer_used(m, p))
				continue;
			if (unlink(p) == 0)
				gone = 1;
		}
		closedir(d);
	}
}

/* Is path a qcow2 image (its magic)? */
static int
is_qcow2(const char *path)
{
	unsigned char h[4];
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	r = pread(fd, h, 4, 0) == 4 && memcmp(h, "QFI\xfb", 4) == 0;
	close(fd);
	return r;
}

int
vmm_chain_base(const char *top, char *base, size_t baselen)
{
	static char chain[VMM_CHAIN_MAX][PATH_MAX];
	char err[VMM_ERRLEN];
	int n, i, q = 0;

	if ((n = vmm_chain(top, chain, VMM_CHAIN_MAX, err, sizeof(err))) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!is_qcow2(chain[i]))
			break;
		snprintf(base, baselen, "%s", chain[i]);
		q++;
	}
	return q;
}

int
vmm_sandbox_disk_usage(const struct vmm_sandbox *sb,
    struct vmm_disk_usage *out)
{
	static char chain[VMM_CHAIN_MAX][PATH_MAX];
	char err[VMM_ERRLEN];
	struct stat st;
	int n, i;

	memset(out, 0, sizeof(*out));
	if (sb->disk[0] == '\0' || (n = vmm_chain(sb->disk, chain,
	    VMM_CHAIN_MAX, err, sizeof(err))) < 0)
		return -1;
	for (i = 0; i < n && is_qcow2(chain[i]); i++) {
		if (stat(chain[i], &st) < 0)
			continue;
		out->layers++;
		if (i == 0)
			out->owned_bytes = (uint64_t)st.st_blocks * 512;
		else
			out->shared_bytes += (uint64_t)st.st_blocks * 512;
	}
	return 0;
}

/*
 * After a restart, what a capture cut short left in .layers (nothing is
 * captured then): a stream no fork or checkpoint links (one link), and a
 * layer name that is still some sandbox's live top (its switch never
 * happened). Then the usual collection.
 */
void
vmm_layers_orphans(struct vmm *m)
{
	char dir[PATH_MAX], p[PATH_MAX + 300];
	struct vmm_sandbox *sb;
	struct dirent *de;
	struct stat st, ts;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/.layers", m->state_dir);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (de->d_name[0] == '.' || lstat(p, &st) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n > 6 && strcmp(de->d_name + n - 6, ".state") == 0) {
			if (st.st_nlink == 1)
				(void)unlink(p);
			continue;
		}
		for (sb = m->list; sb != NULL; sb = sb->next)
			if (stat(sb->disk, &ts) == 0 && ts.st_ino == st.st_ino &&
			    ts.st_dev == st.st_dev) {
				(void)unlink(p);
				break;
			}
	}
	closedir(d);
	vmm_layers_gc(m);
}

/*
 * Rewrite a qcow2 file's backing file name in place. qemu writes the
 * header, its extensions and then the backing name into the first
 * cluster and nothing after them there, so a name that still ends in
 * that cluster can replace the old one at the same offset. A moved
 * sandbox's layers name the source's paths; the target's differ.
 */
int
vmm_qcow2_set_backing(const char *path, const char *name, int dry, char *err,
    size_t errlen)
{
	unsigned char h[104], lenb[4];
	uint64_t off, cluster;
	uint32_t ver, cbits, hlen, oldlen;
	size_t nl = strlen(name);
	int fd, rc = 0;

	if ((fd = open(path, (dry ? O_RDONLY : O_RDWR) | O_NOFOLLOW |
	    O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (pread(fd, h, sizeof(h), 0) < 72 || memcmp(h, "QFI\xfb", 4) != 0) {
		snprintf(err, errlen, "%s: not a qcow2 image", path);
		rc = -EINVAL;
		goto out;
	}
	ver = be32(h + 4);
	off = vmm_be64(h + 8);
	oldlen = be32(h + 16);
	cbits = be32(h + 20);
	hlen = ver >= 3 ? be32(h + 100) : 72;
	if ((ver != 2 && ver != 3) || cbits < 9 || cbits > 21 || hlen < 72 ||
	    hlen > (1U << cbits)) {
		snprintf(err, errlen, "%s: a qcow2 header this cannot read",
		    path);
		rc = -EINVAL;
		goto out;
	}
	cluster = 1ULL << cbits;
	if (off == 0 || oldlen == 0) {
		snprintf(err, errlen, "%s: no backing file", path);
		rc = -EINVAL;
		goto out;
	}
	if (nl == 0 || nl > 1023 || off < hlen || off + oldlen > cluster ||
	    off + nl > cluster) {
		snprintf(err, errlen, "%s: no room in its header for a "
		    "backing name of %zu bytes", path, nl);
		rc = -ENOSPC;
		goto out;
	}
	if (dry)
		goto out;
	{
		char zero[1024];

		memset(zero, 0, sizeof(zero));
		lenb[0] = (unsigned char)(nl >> 24);
		lenb[1] = (unsigned char)(nl >> 16);
		lenb[2] = (unsigned char)(nl >> 8);
		lenb[3] = (unsigned char)nl;
		if ((oldlen > nl && pwrite(fd, zero, oldlen - nl,
		    (off_t)(off + nl)) != (ssize_t)(oldlen - nl)) ||
		    pwrite(fd, name, nl, (off_t)off) != (ssize_t)nl ||
		    pwrite(fd, lenb, 4, 16) != 4 || fsync(fd) < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			rc = -EIO;
		}
	}
out:
	close(fd);
	return rc;
}
