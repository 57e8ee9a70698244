/*
 * export.c — a suspended sandbox leaves this host as files and arrives
 * on another one (issue 33, item 3: move). The design, end to end:
 *
 *   source berthd                          target berthd
 *   POST /v1/sandboxes/ID/move {"to":B}
 *   suspend it (if running or paused),
 *   mark it moving (wakes parked)
 *   vmm_move_export: its files ---------> POST /v1/fleet/move/ID/begin
 *                                          (the manifest: vmm_move_parse)
 *                                  <------ vmm_move_needs: which to send
 *   PUT /v1/fleet/move/ID/NAME ----------> each streamed to
 *     (size, sha256 as it goes;            <state>/.move/ID/NAME
 *      mem and disk.raw sparse: vmm.h)
 *   POST /v1/fleet/move/ID/commit -------> vmm_move_adopt: checked,
 *     (berthd's records: egress,           renamed into place, listed
 *      ports, token hashes, env)           suspended; records stored
 *                                  <------ 200: restorable
 *   the route switches in etcd (the target claims, the source releases)
 *   the source deletes its copy (vmm_sandbox_delete)
 *
 * Until the target's 200 the sandbox is the source's, suspended, whole:
 * any failure before it ends in vmm_move_end (the source keeps it) and
 * the target's .move/ID removed.
 *
 * What moves. A suspended sandbox is sandbox.conf, its disk's top
 * (disk.qcow2, a root overlay; disk.raw else), snap/state (the device
 * state, and the RAM when its RAM was a stream's or the ready
 * snapshot's: snap_ram) and the RAM file mem (unless snap/state holds
 * it); a stopped one sandbox.conf and its disk only (it boots on the
 * target, stopped until started there). Its disk's top may stand on a ready snapshot's frozen layer
 * (.ready/KEY/disk.qcow2), which is not its own: every host builds its
 * own ready snapshot of a key, so another host's layer of the same key
 * holds other bytes and only the same sha256 makes it the same layer:
 * the base's identity (base_id) is that sha256 as its host made it.
 * The source names it by its sha256 up front (the layer never changes:
 * hashed once per process). When the target's differs (the usual case)
 * and no sandbox moved there over it before, the layer is sent as
 * base.qcow2 and kept in the target's .layers (moved-SHA.qcow2, shared
 * by every sandbox moved there over it, sent once): the sandbox's disk is then a
 * chain read from the qcow2 headers (layered), whose names are
 * rewritten to the target's paths. Such a sandbox moves on with that
 * base, named by its identity (its bytes differ now: its header names
 * this host's image) with the key it was made as (moved_key): the host
 * that made it is not sent it back. The template's files are not sent:
 * the target must hold that version of it, the same by content (the
 * manifest's template_sha256, over its kernel's, initramfs's and image's
 * sha256s; each file hashed once per process), and the same command
 * line, agent and kind of disk: a guest restored over an image with
 * other bytes would read blocks its page cache does not expect. So the
 * version's files are listed too (tpl.*, each named by its sparse form's
 * sha256): a target that lacks the version asks for them and its caller
 * makes them a template directory before the adoption (libvmm neither
 * asks for nor places them). A fork's chain of layers does not move:
 * vmm_move_flatten rebases its top onto the base under it first.
 *
 * The guest keeps its address (its network was configured at its boot
 * and is in its RAM) when it is free in the target's pool; else it is
 * given the target's next free one: sandbox.conf says readdress, and
 * its next restore gives the guest that address, gateway and resolver
 * through its agent (the network part of a clone's identity request,
 * its name and machine id kept) before anyone reaches it.
 *
 * What is read here on the target is a peer's: the manifest (bounded
 * JSON, names from a fixed list), the files (regular, not links, their
 * sizes and sha256 checked before anything moves), sandbox.conf (kv.c's
 * reader, then every field that matters compared with the manifest, the
 * template and this manager). The library never logs.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "backend.h"
#include "vmm.h"

#define MOVE_JSON_MAX	(64 * 1024)
#define CONF_KEYS	64

static int
errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* The names a moved sandbox's files may have, and where each goes on
 * the target: in its jail directory (what the VMM opens) or beside it. */
static const struct {
	const char *name;
	int in_jail;
} names[] = {
	{ "sandbox.conf", 0 }, { "disk.qcow2", 1 }, { "disk.raw", 1 },
	{ "snap/state", 0 }, { "mem", 1 }, { "base.qcow2", 0 },
	/* the template version's: the caller's to place */
	{ "tpl.json", 0 }, { "tpl.kernel", 0 }, { "tpl.initrd", 0 },
	{ "tpl.rootfs", 0 },
};

static const char *const tpl_names[] = { "tpl.json", "tpl.kernel",
    "tpl.initrd", "tpl.rootfs" };

int
vmm_move_template_file(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(tpl_names) / sizeof(tpl_names[0]); i++)
		if (strcmp(name, tpl_names[i]) == 0)
			return (int)i;
	return -1;
}

static int
name_known(const char *n)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(names[i].name, n) == 0)
			return (int)i;
	return -1;
}

int
vmm_move_index(const struct vmm_move *mv, const char *name)
{
	size_t i;

	for (i = 0; i < mv->n; i++)
		if (strcmp(mv->f[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* ctx's sha256 as lower-case hex; ctx freed */
static void
final_hex(EVP_MD_CTX *ctx, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0, i;

	(void)EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	for (i = 0; i < mdlen && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[64] = '\0';
}

static int
sha_fd(int fd, uint64_t *size, char hex[65], char *err, size_t errlen,
    const char *what)
{
	static unsigned char buf[1 << 20];
	EVP_MD_CTX *ctx;
	uint64_t total = 0;
	ssize_t n;

	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return errf(err, errlen, -ENOMEM, "sha256: no context");
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		(void)EVP_DigestUpdate(ctx, buf, (size_t)n);
		total += (uint64_t)n;
	}
	if (n < 0) {
		int e = errno;

		EVP_MD_CTX_free(ctx);
		return errf(err, errlen, -e, "%s: %s", what, strerror(e));
	}
	final_hex(ctx, hex);
	*size = total;
	return 0;
}

int
vmm_move_sha256(const char *path, uint64_t *size, char hex[65], char *err,
    size_t errlen)
{
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errf(err, errlen, -errno, "%s: %s", path,
		    strerror(errno));
	rc = sha_fd(fd, size, hex, err, errlen, path);
	close(fd);
	return rc;
}

static int hex64(const char *s);
static int moved_path(const struct vmm *m, const char *sha, char *buf,
    size_t len);

/* ---- the sparse form (vmm.h) ---- */

int
vmm_move_sparse(const char *name)
{
	/* (a template's kernel, initramfs and image: as its version is
	 * named, vmm_move_template_id) */
	return strcmp(name, "mem") == 0 || strcmp(name, "disk.raw") == 0 ||
	    vmm_move_template_file(name) > 0;
}

static int
zero_block(const unsigned char *p, size_t n)
{
	static const unsigned char zeros[VMM_SPARSE_BLK];

	return memcmp(p, zeros, n) == 0;
}

static void
put_be64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

int
vmm_sparse_next(int fd, uint64_t size, uint64_t *pos, unsigned char *buf,
    vmm_sparse_emit_fn *emit, void *arg, char *err, size_t errlen)
{
	unsigned char hdr[VMM_SPARSE_HDR];
	uint64_t start, wlen, got = 0;
	size_t b, from = 0, run = 0, n;
	off_t d;
	ssize_t r;

	if (*pos >= size)
		return 0;
	if ((d = lseek(fd, (off_t)*pos, SEEK_DATA)) < 0) {
		if (errno != ENXIO)
			return errf(err, errlen, -errno, "SEEK_DATA: %s",
			    strerror(errno));
		*pos = size;		/* a hole to the end */
		return 0;
	}
	if ((uint64_t)d >= size) {
		*pos = size;
		return 0;
	}
	start = (uint64_t)d - (uint64_t)d % VMM_SPARSE_WIN;
	if (start < *pos)	/* (windows are aligned: *pos is one's start) */
		start = *pos;
	wlen = size - start < VMM_SPARSE_WIN ? size - start : VMM_SPARSE_WIN;
	while (got < wlen) {
		r = pread(fd, buf + got, (size_t)(wlen - got),
		    (off_t)(start + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return errf(err, errlen, r < 0 ? -errno : -EIO, "read: "
			    "%s", r < 0 ? strerror(errno) : "the file shrank");
		got += (uint64_t)r;
	}
	/* runs of blocks not all zeros; the last block may be short */
	for (b = 0;; b += VMM_SPARSE_BLK) {
		n = b >= wlen ? 0 : wlen - b < VMM_SPARSE_BLK ?
		    (size_t)(wlen - b) : VMM_SPARSE_BLK;
		if (n > 0 && !zero_block(buf + b, n)) {
			if (run == 0)
				from = b;
			run += n;
			continue;
		}
		if (run > 0) {
			put_be64(hdr, start + from);
			put_be64(hdr + 8, run);
			emit(arg, hdr, sizeof(hdr));
			emit(arg, buf + from, run);
			run = 0;
		}
		if (n == 0)
			break;
	}
	*pos = start + wlen;
	return 1;
}

void
vmm_sparse_wr_init(struct vmm_sparse_wr *w, int fd, uint64_t size)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->size = size;
}

int
vmm_sparse_write(struct vmm_sparse_wr *w, const void *p, size_t len,
    char *err, size_t errlen)
{
	const unsigned char *at = p;
	size_t n;
	ssize_t r;

	while (len > 0) {
		if (w->left == 0) {
			n = VMM_SPARSE_HDR - w->hlen;
			if (n > len)
				n = len;
			memcpy(w->hdr + w->hlen, at, n);
			w->hlen += n;
			at += n;
			len -= n;
			if (w->hlen < VMM_SPARSE_HDR)
				break;
			w->hlen = 0;
			w->off = vmm_be64(w->hdr);
			w->left = vmm_be64(w->hdr + 8);
			if (w->left == 0 || w->off % VMM_SPARSE_BLK != 0 ||
			    w->off < w->end || w->off > w->size ||
			    w->left > w->size - w->off ||
			    w->off / VMM_SPARSE_WIN != (w->off + w->left - 1) /
			    VMM_SPARSE_WIN)
				return errf(err, errlen, -EINVAL, "a record "
				    "at %llu of %llu bytes: out of order or "
				    "bounds", (unsigned long long)w->off,
				    (unsigned long long)w->left);
			w->end = w->off + w->left;
			continue;
		}
		n = len < w->left ? len : (size_t)w->left;
		if ((r = pwrite(w->fd, at, n, (off_t)w->off)) < 0) {
			if (errno == EINTR)
				continue;
			return errf(err, errlen, -errno, "%s",
			    strerror(errno));
		}
		at += r;
		len -= (size_t)r;
		w->off += (uint64_t)r;
		w->left -= (uint64_t)r;
	}
	return 0;
}

int
vmm_sparse_finish(struct vmm_sparse_wr *w, char *err, size_t errlen)
{
	if (w->left > 0 || w->hlen > 0)
		return errf(err, errlen, -EINVAL, "its last record cut "
		    "short");
	if (ftruncate(w->fd, (off_t)w->size) < 0)
		return errf(err, errlen, -errno, "%s", strerror(errno));
	return 0;
}

static void
emit_md(void *arg, const void *p, size_t len)
{
	(void)EVP_DigestUpdate(arg, p, len);
}

/* sha256 of fd's sparse form */
static int
sparse_sha_fd(int fd, uint64_t *size, char hex[65], char *err, size_t errlen,
    const char *what)
{
	unsigned char *buf;
	char why[VMM_ERRLEN];
	EVP_MD_CTX *ctx;
	uint64_t pos = 0;
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		return errf(err, errlen, -errno, "%s: %s", what,
		    strerror(errno));
	if ((buf = malloc(VMM_SPARSE_WIN)) == NULL ||
	    (ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		if (buf != NULL)
			EVP_MD_CTX_free(ctx);
		free(buf);
		return errf(err, errlen, -ENOMEM, "sha256: no memory");
	}
	while ((rc = vmm_sparse_next(fd, (uint64_t)st.st_size, &pos, buf,
	    emit_md, ctx, why, sizeof(why))) > 0)
		;
	free(buf);
	if (rc < 0) {
		EVP_MD_CTX_free(ctx);
		return errf(err, errlen, rc, "%s: %s", what, why);
	}
	final_hex(ctx, hex);
	*size = (uint64_t)st.st_size;
	return 0;
}

/* files of template versions already hashed: they never change
 * (sparse: the sparse form's sha256) */
#define TPL_CACHE 32
static struct {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int sparse;
	char hex[65];
} tcache[TPL_CACHE];
static unsigned tcache_next;

static int
sha_cached(const char *path, int sparse, char hex[65], char *err,
    size_t errlen)
{
	struct stat st;
	uint64_t size;
	size_t i;
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return errf(err, errlen, rc, "%s: %s", path, strerror(-rc));
	}
	for (i = 0; i < TPL_CACHE; i++)
		if (tcache[i].ino == st.st_ino && tcache[i].dev == st.st_dev &&
		    tcache[i].size == st.st_size && tcache[i].hex[0] != '\0' &&
		    tcache[i].sparse == sparse &&
		    tcache[i].mtime.tv_sec == st.st_mtim.tv_sec &&
		    tcache[i].mtime.tv_nsec == st.st_mtim.tv_nsec) {
			close(fd);
			memcpy(hex, tcache[i].hex, 65);
			return 0;
		}
	rc = (sparse ? sparse_sha_fd : sha_fd)(fd, &size, hex, err, errlen,
	    path);
	close(fd);
	if (rc < 0)
		return rc;
	i = tcache_next++ % TPL_CACHE;
	tcache[i].sparse = sparse;
	tcache[i].dev = st.st_dev;
	tcache[i].ino = st.st_ino;
	tcache[i].size = st.st_size;
	tcache[i].mtime = st.st_mtim;
	memcpy(tcache[i].hex, hex, 65);
	return 0;
}

int
vmm_move_prehash_ready(struct vmm *m, const char *key)
{
	char p[PATH_MAX], hex[65], why[VMM_ERRLEN];
	struct dirent *de;
	DIR *d;

	if (key != NULL)
		return vmm_ready_path(m, key, "disk.qcow2", p, sizeof(p)) < 0 ?
		    -ENAMETOOLONG : sha_cached(p, 0, hex, why, sizeof(why));
	if (vmm_ready_path(m, NULL, NULL, p, sizeof(p)) < 0 ||
	    (d = opendir(p)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (strlen(de->d_name) == VMM_READY_KEY - 1 &&
		    strspn(de->d_name, "0123456789abcdef") ==
		    VMM_READY_KEY - 1)
			(void)vmm_move_prehash_ready(m, de->d_name);
	closedir(d);
	return 0;
}

int
vmm_move_template_id(const struct vmm_template *t, char hex[65], char *err,
    size_t errlen)
{
	const char *files[3] = { t->kernel, t->initrd, t->rootfs };
	unsigned i;
	char one[65];
	EVP_MD_CTX *ctx;
	int rc = 0;

	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return errf(err, errlen, -ENOMEM, "sha256: no context");
	}
	for (i = 0; i < 3 && rc == 0; i++) {
		if (files[i] == NULL || files[i][0] == '\0')
			snprintf(one, sizeof(one), "-");
		else if ((rc = sha_cached(files[i], 1, one, err, errlen)) < 0)
			break;
		(void)EVP_DigestUpdate(ctx, one, strlen(one));
		(void)EVP_DigestUpdate(ctx, "\n", 1);
	}
	if (rc == 0)
		final_hex(ctx, hex);
	else
		EVP_MD_CTX_free(ctx);
	return rc;
}

static int
add_file(struct vmm_move *mv, const char *name, const char *path, int shared,
    int hash, char *err, size_t errlen)
{
	struct vmm_move_file *f;
	struct stat st;

	if (mv->n == VMM_MOVE_FILES)
		return errf(err, errlen, -E2BIG, "more than %d files",
		    VMM_MOVE_FILES);
	f = &mv->f[mv->n];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	if (snprintf(f->path, sizeof(f->path), "%s", path) >=
	    (int)sizeof(f->path))
		return errf(err, errlen, -ENAMETOOLONG, "%s: too long", path);
	f->shared = shared;
	if (lstat(path, &st) < 0)
		return errf(err, errlen, -errno, "%s: %s", path,
		    strerror(errno));
	if (!S_ISREG(st.st_mode))
		return errf(err, errlen, -EINVAL, "%s: not a regular file",
		    path);
	f->size = (uint64_t)st.st_size;
	if (hash) {
		uint64_t sz;
		int rc;

		if (vmm_move_sparse(name)) {
			int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

			if (fd < 0)
				return errf(err, errlen, -errno, "%s: %s", path,
				    strerror(errno));
			rc = sparse_sha_fd(fd, &sz, f->sha256, err, errlen,
			    path);
			close(fd);
		} else
			rc = vmm_move_sha256(path, &sz, f->sha256, err, errlen);
		if (rc < 0)
			return rc;
		if (sz != f->size)
			return errf(err, errlen, -EAGAIN, "%s: changed while "
			    "read", path);
	}
	mv->n++;
	return 0;
}

/*
 * The template version sb was made from, for a target that lacks it:
 * its template.json (beside its kernel, where every template directory
 * has it) and its kernel, initramfs and image, each named by the sha256
 * of its sparse form (cached: vmm_move_template_id). A template without
 * a template.json there is not listed (a target lacking it refuses).
 */
static int
add_template(struct vmm_move *mv, const struct vmm_template *t, char *err,
    size_t errlen)
{
	const char *files[3] = { t->kernel, t->initrd, t->rootfs };
	char json[PATH_MAX], *slash;
	struct stat st;
	size_t i;
	int rc;

	if (t->kernel == NULL || snprintf(json, sizeof(json), "%s",
	    t->kernel) >= (int)sizeof(json) - 16 ||
	    (slash = strrchr(json, '/')) == NULL)
		return 0;
	snprintf(slash + 1, sizeof(json) - (size_t)(slash + 1 - json),
	    "template.json");
	if (lstat(json, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > VMM_MOVE_TPL_JSON_MAX)
		return 0;
	if ((rc = add_file(mv, "tpl.json", json, 0, 1, err, errlen)) < 0)
		return rc;
	for (i = 0; i < 3; i++) {
		if (files[i] == NULL || files[i][0] == '\0')
			continue;
		if ((rc = add_file(mv, tpl_names[i + 1], files[i], 0, 0, err,
		    errlen)) < 0 ||
		    (rc = sha_cached(files[i], 1, mv->f[mv->n - 1].sha256, err,
		    errlen)) < 0)
			return rc;
	}
	return 0;
}

/*
 * A layered sb's base when a move brought it: its disk's chain the top,
 * .layers/moved-SHA.qcow2, the template's image, and the key it was
 * made as known (moved_key). Its path and SHA; -1 else (a fork's).
 */
static int
moved_base(struct vmm_sandbox *sb, char *base, size_t len, char id[65])
{
	static char chain[VMM_CHAIN_MAX][PATH_MAX];
	char err[VMM_ERRLEN], want[PATH_MAX];
	const char *slash, *name;

	if (sb->moved_key[0] == '\0' || vmm_chain(sb->disk, chain,
	    VMM_CHAIN_MAX, err, sizeof(err)) != 3)
		return -1;
	slash = strrchr(chain[1], '/');
	name = slash != NULL ? slash + 1 : chain[1];
	if (strncmp(name, "moved-", 6) != 0 || strlen(name) != 6 + 64 + 6 ||
	    strcmp(name + 70, ".qcow2") != 0)
		return -1;
	memcpy(id, name + 6, 64);
	id[64] = '\0';
	if (!hex64(id))
		return -1;
	if (moved_path(sb->m, id, want, sizeof(want)) < 0 ||
	    strcmp(want, chain[1]) != 0)
		return -1;
	snprintf(base, len, "%s", chain[1]);
	return 0;
}

int
vmm_move_export(struct vmm_sandbox *sb, struct vmm_move *mv, int hash,
    char *err, size_t errlen)
{
	struct vmm *m = sb->m;
	char p[PATH_MAX], base[PATH_MAX], bid[65];
	int rc;

	memset(mv, 0, sizeof(*mv));
	if (sb->hidden || sb->deleting)
		return errf(err, errlen, -ENOENT, "no sandbox %s", sb->id);
	if (sb->busy || (sb->moving && !sb->flattened))
		return errf(err, errlen, -EBUSY, "sandbox %s: %s in progress",
		    sb->id, sb->moving ? "a move" : vmm_op_name(sb->op));
	sb->flattened = 0;
	if (sb->state != VMM_SUSPENDED && sb->state != VMM_STOPPED)
		return errf(err, errlen, -EPERM, "sandbox %s is %s, not "
		    "suspended or stopped", sb->id, vmm_state_name(sb->state));
	if (sb->layer_gen > 0 || (sb->layered && moved_base(sb, base,
	    sizeof(base), bid) < 0))
		return errf(err, errlen, -ENOTSUP, "sandbox %s stands on a "
		    "fork's layers: flattened first (vmm_move_flatten)", sb->id);
	if (sb->state == VMM_SUSPENDED && sb->ram_shared)
		return errf(err, errlen, -ENOTSUP, "sandbox %s: its RAM is "
		    "still the ready snapshot's", sb->id);
	/* Nothing may write its files while they are read: its standby
	 * (which rewrites sandbox.conf, holds the disk) goes, and none
	 * comes back while it is moving. */
	sb->moving = 1;
	if (sb->standby_pid > 0 && m->be->standby_stop != NULL) {
		m->be->standby_stop(sb);
		sb->standby_mine = 0;
		vmm_meta_save(sb);
	}
	snprintf(mv->id, sizeof(mv->id), "%s", sb->id);
	snprintf(mv->tpl, sizeof(mv->tpl), "%s", sb->tpl.name);
	if ((rc = vmm_move_template_id(&sb->tpl, mv->tpl_sha256, err,
	    errlen)) < 0)
		goto fail;
	mv->mem_mib = sb->mem_mib;
	mv->vcpus = sb->vcpus;
	mv->disk_mib = sb->disk_mib;
	if (sb->layered) {
		/* over a base a move brought: it goes on as that base,
		 * named as it was made */
		snprintf(mv->ready_key, sizeof(mv->ready_key), "%s",
		    sb->moved_key);
		snprintf(mv->base_id, sizeof(mv->base_id), "%s", bid);
	} else if (sb->tpl.root_overlay && sb->ready_key[0] != '\0')
		snprintf(mv->ready_key, sizeof(mv->ready_key), "%s",
		    sb->ready_key);
	if ((rc = vmm_path(sb, "sandbox.conf", p, sizeof(p))) < 0 ||
	    (rc = add_file(mv, "sandbox.conf", p, 0, hash, err, errlen)) < 0)
		goto fail;
	if ((rc = add_file(mv, vmm_disk_name(sb), sb->disk, 0, hash, err,
	    errlen)) < 0)
		goto fail;
	/* a stopped one is its disk and sandbox.conf: it boots there */
	if (sb->state == VMM_SUSPENDED && ((rc = vmm_path(sb, "snap/state",
	    p, sizeof(p))) < 0 || (rc = add_file(mv, "snap/state", p, 0, hash,
	    err, errlen)) < 0))
		goto fail;
	if (sb->state == VMM_SUSPENDED && (!sb->snap_ram || sb->snap_dev)) {
		if ((rc = vmm_path(sb, "mem", p, sizeof(p))) < 0 ||
		    (rc = add_file(mv, "mem", p, 0, hash, err, errlen)) < 0)
			goto fail;
	}
	if (mv->ready_key[0] != '\0') {
		/* named by its bytes up front (a ready snapshot's layer
		 * never changes: hashed once per process), so that a target
		 * holding it already is not sent it */
		if ((rc = sb->layered ? (snprintf(p, sizeof(p), "%s", base),
		    0) : vmm_ready_path(m, mv->ready_key, "disk.qcow2", p,
		    sizeof(p))) < 0 ||
		    (rc = add_file(mv, "base.qcow2", p, 1, 0, err,
		    errlen)) < 0 ||
		    (rc = sha_cached(p, 0, mv->f[mv->n - 1].sha256, err,
		    errlen)) < 0)
			goto fail;
		if (mv->base_id[0] == '\0')
			snprintf(mv->base_id, sizeof(mv->base_id), "%s",
			    mv->f[mv->n - 1].sha256);
	}
	if ((rc = add_template(mv, &sb->tpl, err, errlen)) < 0)
		goto fail;
	return 0;
fail:
	sb->moving = 0;
	return rc;
}

void
vmm_move_end(struct vmm_sandbox *sb)
{
	sb->flattened = 0;
	if (!sb->moving)
		return;
	sb->moving = 0;
	vmm_standby_rebalance(sb->m);
}

/* ---- a fork's layers flattened before it moves ---- */

struct flat_ctx {
	struct vmm *m;
	char id[VMM_ID_MAX + 1];
	char top[PATH_MAX], dst[PATH_MAX];
	char key[VMM_READY_KEY];	/* the ready layer it stands on, "" */
	int moved;			/* ... or the moved base (moved_key) */
	struct vmm_child *watch;
	void (*done)(void *, int, const char *);
	void *arg;
};

/* is p dir/<n hex>suffix? */
static int
hex_path(const char *p, const char *dir, size_t n, const char *suffix)
{
	size_t dl = strlen(dir), sl = strlen(suffix);

	return strncmp(p, dir, dl) == 0 && strlen(p) == dl + n + sl &&
	    strspn(p + dl, "0123456789abcdef") == n &&
	    strcmp(p + dl + n, suffix) == 0;
}

static void
flat_exited(pid_t pid, int status, void *arg)
{
	struct flat_ctx *f = arg;
	struct vmm_sandbox *sb = vmm_sandbox_find(f->m, f->id);
	char why[VMM_ERRLEN], st[64];

	(void)pid;
	if (sb == NULL) {
		f->done(f->arg, 0, "the sandbox was deleted meanwhile");
		free(f);
		return;
	}
	why[0] = '\0';
	if (status != 0) {
		vmm_status_text(status, st, sizeof(st));
		snprintf(why, sizeof(why), "flattening its layers: qemu-img "
		    "rebase %s", st);
	} else if (strcmp(f->top, f->dst) != 0 && rename(f->top, f->dst) < 0)
		snprintf(why, sizeof(why), "flattening its layers: %s: %s",
		    f->dst, strerror(errno));
	if (why[0] != '\0') {
		f->done(f->arg, 0, why);
		free(f);
		return;
	}
	/* as one made without a fork: its top over the base */
	snprintf(sb->disk, sizeof(sb->disk), "%s", f->dst);
	sb->layer_gen = 0;
	sb->layered = f->moved;
	if (!f->moved)
		snprintf(sb->ready_key, sizeof(sb->ready_key), "%s", f->key);
	sb->flattened = 1;
	vmm_meta_save(sb);
	vmm_layers_gc(f->m);	/* what no sandbox stands on now */
	f->done(f->arg, 1, NULL);
	free(f);
}

int
vmm_move_flatten(struct vmm_sandbox *sb,
    void (*done)(void *arg, int ok, const char *why), void *arg, char *err,
    size_t errlen)
{
	static char chain[VMM_CHAIN_MAX][PATH_MAX];
	struct vmm *m = sb->m;
	char ready[PATH_MAX], layers[PATH_MAX], base[PATH_MAX], logp[PATH_MAX];
	char *argv[] = { "qemu-img", "rebase", "-q", "-f", "qcow2", "-b", NULL,
	    "-F", NULL, NULL, NULL };
	struct flat_ctx *f;
	int n, i;
	pid_t pid;

	if (sb->hidden || sb->deleting)
		return errf(err, errlen, -ENOENT, "no sandbox %s", sb->id);
	if (sb->busy || sb->moving)
		return errf(err, errlen, -EBUSY, "sandbox %s: %s in progress",
		    sb->id, sb->moving ? "a move" : vmm_op_name(sb->op));
	if (sb->state != VMM_SUSPENDED && sb->state != VMM_STOPPED)
		return errf(err, errlen, -EPERM, "sandbox %s is %s, not "
		    "suspended or stopped", sb->id, vmm_state_name(sb->state));
	if (sb->layer_gen == 0 && (!sb->layered ||
	    moved_base(sb, base, sizeof(base), ready) == 0))
		return 0;	/* no fork's layers under it */
	if ((n = vmm_chain(sb->disk, chain, VMM_CHAIN_MAX, err, errlen)) < 2)
		return n < 0 ? -EIO : errf(err, errlen, -EINVAL, "sandbox %s: "
		    "a layered disk without layers", sb->id);
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return errf(err, errlen, -ENOMEM, "out of memory");
	f->m = m;
	snprintf(f->id, sizeof(f->id), "%s", sb->id);
	snprintf(f->top, sizeof(f->top), "%s", sb->disk);
	snprintf(ready, sizeof(ready), "%s/.ready/", m->state_dir);
	snprintf(layers, sizeof(layers), "%s/.layers/moved-", m->state_dir);
	/* the deepest base a move names: its ready layer (of its key), or
	 * the base a move brought (known by the key it was made as); else
	 * the template's image, the chain's end */
	snprintf(base, sizeof(base), "%s", chain[n - 1]);
	for (i = 1; i < n; i++) {
		if (hex_path(chain[i], ready, VMM_READY_KEY - 1,
		    "/disk.qcow2") && sb->ready_key[0] != '\0' &&
		    strncmp(chain[i] + strlen(ready), sb->ready_key,
		    VMM_READY_KEY - 1) == 0) {
			snprintf(f->key, sizeof(f->key), "%s", sb->ready_key);
			snprintf(base, sizeof(base), "%s", chain[i]);
			break;
		}
		if (hex_path(chain[i], layers, 64, ".qcow2") &&
		    sb->moved_key[0] != '\0') {
			f->moved = 1;
			snprintf(base, sizeof(base), "%s", chain[i]);
			break;
		}
	}
	if (strcmp(base, chain[n - 1]) == 0 && (!sb->tpl.root_overlay ||
	    sb->tpl.rootfs == NULL || strcmp(base, sb->tpl.rootfs) != 0)) {
		free(f);
		return errf(err, errlen, -ENOTSUP, "sandbox %s: its layers end "
		    "on %s, not its template's image", sb->id, base);
	}
	if (snprintf(f->dst, sizeof(f->dst), "%s/disk.qcow2", sb->jdir) >=
	    (int)sizeof(f->dst)) {
		free(f);
		return errf(err, errlen, -ENAMETOOLONG, "path too long");
	}
	/* nothing may hold the disk while it is rewritten: its standby
	 * goes, none comes back (moving) */
	sb->moving = 1;
	if (sb->standby_pid > 0 && m->be->standby_stop != NULL) {
		m->be->standby_stop(sb);
		sb->standby_mine = 0;
		vmm_meta_save(sb);
	}
	argv[6] = base;
	argv[8] = f->key[0] != '\0' || f->moved ? "qcow2" : "raw";
	argv[9] = f->top;
	f->done = done;
	f->arg = arg;
	(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
	if ((pid = vmm_spawn(argv, logp, 0, 0, err, errlen)) < 0 ||
	    (f->watch = vmm_child_watch(m->base, pid, flat_exited, f, err,
	    errlen)) == NULL) {
		if (pid > 0) {
			(void)kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		free(f);
		sb->moving = 0;
		return -EIO;
	}
	return 1;
}

/* ---- the manifest on the wire ---- */

char *
vmm_move_json(const struct vmm_move *mv)
{
	json_t *o, *files;
	char *s;
	size_t i;

	if ((files = json_array()) == NULL)
		return NULL;
	for (i = 0; i < mv->n; i++)
		if (json_array_append_new(files, json_pack("{s:s, s:I, s:s, "
		    "s:b}", "name", mv->f[i].name, "size",
		    (json_int_t)mv->f[i].size, "sha256", mv->f[i].sha256,
		    "shared", mv->f[i].shared)) < 0) {
			json_decref(files);
			return NULL;
		}
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o}", "id",
	    mv->id, "template", mv->tpl, "template_sha256", mv->tpl_sha256,
	    "ready_key", mv->ready_key, "base_id", mv->base_id, "mem_mib",
	    (int)mv->mem_mib, "vcpus", (int)mv->vcpus, "disk_mib",
	    (int)mv->disk_mib, "files", files);
	if (o == NULL)
		return NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static int
hex64(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[64] == '\0';
}

static int
key_ok(const char *k)
{
	size_t i, n = strlen(k);

	if (n == 0)
		return 1;
	if (n != VMM_READY_KEY - 1)
		return 0;
	for (i = 0; i < n; i++)
		if (!((k[i] >= '0' && k[i] <= '9') ||
		    (k[i] >= 'a' && k[i] <= 'f')))
			return 0;
	return 1;
}

static int
tpl_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n >= 64)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return 0;
	return s[0] != '.';
}

int
vmm_move_parse(const char *text, size_t len, struct vmm_move *mv, char *err,
    size_t errlen)
{
	json_t *o, *files, *f;
	json_error_t je;
	const char *id, *tpl, *tsha, *key, *bid = "";
	json_int_t mem, vcpus, disk;
	size_t i, j;
	int rc = -EINVAL;

	memset(mv, 0, sizeof(*mv));
	if (len > MOVE_JSON_MAX)
		return errf(err, errlen, -EINVAL, "manifest: more than %d "
		    "bytes", MOVE_JSON_MAX);
	if ((o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je)) == NULL)
		return errf(err, errlen, -EINVAL, "manifest: %s", je.text);
	if (json_unpack_ex(o, &je, JSON_STRICT, "{s:s, s:s, s:s, s:s, s?s, "
	    "s:I, s:I, s:I, s:o}", "id", &id, "template", &tpl,
	    "template_sha256", &tsha, "ready_key", &key, "base_id", &bid,
	    "mem_mib", &mem, "vcpus", &vcpus, "disk_mib", &disk, "files",
	    &files) < 0) {
		errf(err, errlen, rc, "manifest: %s", je.text);
		goto out;
	}
	if (!vmm_id_valid(id)) {
		errf(err, errlen, rc, "manifest: a bad id");
		goto out;
	}
	if (!tpl_name_ok(tpl)) {
		errf(err, errlen, rc, "manifest: a bad template name");
		goto out;
	}
	if (!key_ok(key)) {
		errf(err, errlen, rc, "manifest: a bad ready_key");
		goto out;
	}
	if (strlen(tsha) != 64 || !hex64(tsha)) {
		errf(err, errlen, rc, "manifest: a bad template_sha256");
		goto out;
	}
	if (bid[0] != '\0' && (strlen(bid) != 64 || !hex64(bid))) {
		errf(err, errlen, rc, "manifest: a bad base_id");
		goto out;
	}
	if (mem <= 0 || mem > 1 << 20 || vcpus <= 0 || vcpus > 1024 ||
	    disk <= 0 || disk > 1 << 24) {
		errf(err, errlen, rc, "manifest: a size out of bounds");
		goto out;
	}
	if (!json_is_array(files) || json_array_size(files) == 0 ||
	    json_array_size(files) > VMM_MOVE_FILES) {
		errf(err, errlen, rc, "manifest: files: 1 to %d of them",
		    VMM_MOVE_FILES);
		goto out;
	}
	snprintf(mv->id, sizeof(mv->id), "%s", id);
	snprintf(mv->tpl, sizeof(mv->tpl), "%s", tpl);
	snprintf(mv->tpl_sha256, sizeof(mv->tpl_sha256), "%s", tsha);
	snprintf(mv->ready_key, sizeof(mv->ready_key), "%s", key);
	snprintf(mv->base_id, sizeof(mv->base_id), "%s", bid);
	mv->mem_mib = (unsigned)mem;
	mv->vcpus = (unsigned)vcpus;
	mv->disk_mib = (unsigned)disk;
	json_array_foreach(files, i, f) {
		const char *name, *sha;
		json_int_t size;
		int shared;

		if (json_unpack_ex(f, &je, JSON_STRICT, "{s:s, s:I, s:s, s:b}",
		    "name", &name, "size", &size, "sha256", &sha, "shared",
		    &shared) < 0) {
			errf(err, errlen, rc, "manifest: file %zu: %s", i,
			    je.text);
			goto out;
		}
		if (name_known(name) < 0) {
			errf(err, errlen, rc, "manifest: file %zu: not a name "
			    "a sandbox's file has", i);
			goto out;
		}
		for (j = 0; j < mv->n; j++)
			if (strcmp(mv->f[j].name, name) == 0) {
				errf(err, errlen, rc, "manifest: %s twice",
				    name);
				goto out;
			}
		if (size < 0 || (uint64_t)size > (1ULL << 44) ||
		    (strcmp(name, "tpl.json") == 0 &&
		    size > VMM_MOVE_TPL_JSON_MAX)) {
			errf(err, errlen, rc, "manifest: %s: a bad size", name);
			goto out;
		}
		/* "": not known yet (a move's manifest before the files
		 * were read); adoption wants every one */
		if (sha[0] != '\0' && (strlen(sha) != 64 || !hex64(sha))) {
			errf(err, errlen, rc, "manifest: %s: a bad sha256",
			    name);
			goto out;
		}
		if (shared != (strcmp(name, "base.qcow2") == 0)) {
			errf(err, errlen, rc, "manifest: %s: shared is only "
			    "base.qcow2", name);
			goto out;
		}
		snprintf(mv->f[mv->n].name, sizeof(mv->f[0].name), "%s", name);
		snprintf(mv->f[mv->n].sha256, sizeof(mv->f[0].sha256), "%s",
		    sha);
		mv->f[mv->n].size = (uint64_t)size;
		mv->f[mv->n].shared = shared;
		mv->n++;
	}
	for (j = 0; j < sizeof(tpl_names) / sizeof(tpl_names[0]); j++)
		if (vmm_move_index(mv, tpl_names[j]) >= 0 &&
		    (vmm_move_index(mv, "tpl.json") < 0 ||
		    vmm_move_index(mv, "tpl.kernel") < 0)) {
			errf(err, errlen, rc, "manifest: a template's files "
			    "are its tpl.json and tpl.kernel at least");
			goto out;
		}
	if ((mv->ready_key[0] != '\0') != (vmm_move_index(mv, "base.qcow2") >= 0)) {
		errf(err, errlen, rc, "manifest: base.qcow2 goes with a "
		    "ready_key, and only with one");
		goto out;
	}
	/* (a manifest without one: the base is named by its bytes) */
	if ((i = (size_t)vmm_move_index(mv, "base.qcow2")) < mv->n &&
	    mv->base_id[0] == '\0')
		snprintf(mv->base_id, sizeof(mv->base_id), "%s",
		    mv->f[i].sha256);
	if (mv->base_id[0] != '\0' && mv->ready_key[0] == '\0') {
		errf(err, errlen, rc, "manifest: a base_id without a base");
		goto out;
	}
	rc = 0;
out:
	json_decref(o);
	if (rc < 0)
		memset(mv, 0, sizeof(*mv));
	return rc;
}

/* ---- the target's side ---- */

/* Where a base received with this sha256 is kept: .layers, by its
 * bytes as they came (its header names this host's image then). */
static int
moved_path(const struct vmm *m, const char *sha, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/.layers/moved-%s.qcow2", m->state_dir,
	    sha);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
vmm_move_needs(struct vmm *m, const struct vmm_move *mv,
    int need[VMM_MOVE_FILES], char *err, size_t errlen)
{
	char p[PATH_MAX], hex[65], why[VMM_ERRLEN];
	struct stat st;
	size_t i;

	for (i = 0; i < VMM_MOVE_FILES; i++)
		need[i] = i < mv->n && vmm_move_template_file(mv->f[i].name) < 0;
	for (i = 0; i < mv->n; i++) {
		if (!mv->f[i].shared || mv->base_id[0] == '\0')
			continue;
		/* one moved here before over the same base */
		if (moved_path(m, mv->base_id, p, sizeof(p)) == 0 &&
		    access(p, F_OK) == 0) {
			need[i] = 0;
			continue;
		}
		if (vmm_ready_path(m, mv->ready_key, "disk.qcow2", p,
		    sizeof(p)) < 0)
			return errf(err, errlen, -ENAMETOOLONG, "ready path "
			    "too long");
		/* a layer of ours with other bytes (or none) is no match */
		if (sha_cached(p, 0, hex, why, sizeof(why)) == 0 &&
		    lstat(p, &st) == 0 && strcmp(hex, mv->base_id) == 0)
			need[i] = 0;
	}
	return 0;
}

/* sandbox.conf, all of its lines, to check and rewrite */
struct conf {
	size_t n;
	char *k[CONF_KEYS], *v[CONF_KEYS];
};

static int
conf_line(const char *k, const char *v, void *arg)
{
	struct conf *c = arg;

	if (c->n == CONF_KEYS)
		return -E2BIG;
	if ((c->k[c->n] = strdup(k)) == NULL ||
	    (c->v[c->n] = strdup(v)) == NULL) {
		free(c->k[c->n]);
		return -ENOMEM;
	}
	c->n++;
	return 0;
}

static void
conf_free(struct conf *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		free(c->k[i]);
		free(c->v[i]);
	}
	c->n = 0;
}

static const char *
conf_get(const struct conf *c, const char *k)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (strcmp(c->k[i], k) == 0)
			return c->v[i];
	return "";
}

static int
conf_set(struct conf *c, const char *k, const char *v)
{
	size_t i;
	char *d;

	if ((d = strdup(v)) == NULL)
		return -ENOMEM;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->k[i], k) == 0) {
			free(c->v[i]);
			c->v[i] = d;
			return 0;
		}
	if (c->n == CONF_KEYS || (c->k[c->n] = strdup(k)) == NULL) {
		free(d);
		return -ENOMEM;
	}
	c->v[c->n++] = d;
	return 0;
}

static int
conf_int(const struct conf *c, const char *k)
{
	return atoi(conf_get(c, k));
}

/* A file received at dir/name: a regular file, not a link, of its size
 * and sha256. */
static int
check_file(int dfd, const struct vmm_move_file *f, char *err, size_t errlen)
{
	char hex[65], why[VMM_ERRLEN];
	const char *base = f->name;
	uint64_t size;
	struct stat st;
	int fd, sub = -1, rc;

	if (strncmp(f->name, "snap/", 5) == 0) {
		if ((sub = openat(dfd, "snap", O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0)
			return errf(err, errlen, -errno, "snap/: %s",
			    strerror(errno));
		base = f->name + 5;
	}
	fd = openat(sub >= 0 ? sub : dfd, base, O_RDONLY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (sub >= 0)
		close(sub);
	if (fd < 0)
		return errf(err, errlen, -errno, "%s: %s", f->name,
		    strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return errf(err, errlen, -EINVAL, "%s: not a regular file",
		    f->name);
	}
	if ((uint64_t)st.st_size != f->size) {
		close(fd);
		return errf(err, errlen, -EINVAL, "%s: %llu bytes, not %llu",
		    f->name, (unsigned long long)st.st_size,
		    (unsigned long long)f->size);
	}
	if (f->verified) {
		close(fd);
		return 0;
	}
	rc = (vmm_move_sparse(f->name) ? sparse_sha_fd : sha_fd)(fd, &size,
	    hex, why, sizeof(why), f->name);
	close(fd);
	if (rc < 0)
		return errf(err, errlen, rc, "%s", why);
	if (size != f->size || strcmp(hex, f->sha256) != 0)
		return errf(err, errlen, -EINVAL, "%s: its sha256 is not the "
		    "manifest's", f->name);
	return 0;
}

/* Nothing in dir but the files expected (need[]), snap/ for snap/state. */
static int
check_entries(int dfd, const struct vmm_move *mv, const int *need, char *err,
    size_t errlen)
{
	struct dirent *de;
	DIR *d;
	int fd, i, rc = 0;

	if ((fd = dup(dfd)) < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return errf(err, errlen, -errno, "%s", strerror(errno));
	}
	rewinddir(d);
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (strcmp(de->d_name, "snap") == 0)
			continue;	/* its one file checked by name */
		i = vmm_move_index(mv, de->d_name);
		if (i < 0 || !need[i])
			rc = errf(err, errlen, -EINVAL, "%s: not a file of "
			    "the manifest", de->d_name);
	}
	closedir(d);
	return rc;
}

/* Where file name of a sandbox laid out in dir/jdir goes. */
static int
dest_path(struct vmm *m, const char *id, const char *name, char *buf,
    size_t len)
{
	int i = name_known(name), n;

	n = snprintf(buf, len, "%s/%s%s/%s", m->state_dir, id,
	    i >= 0 && names[i].in_jail && m->cfg.jail ? "/jail" : "", name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
vmm_move_adopt(struct vmm *m, const char *dir, const struct vmm_move *mv,
    const struct vmm_template *tpl, struct vmm_sandbox **out, char *err,
    size_t errlen)
{
	char p[PATH_MAX], q[PATH_MAX], base[PATH_MAX] = "", sdir[PATH_MAX];
	char hex[65], why[VMM_ERRLEN], n[32], tap[16];
	const char *disk = tpl->root_overlay ? "disk.qcow2" : "disk.raw";
	int need[VMM_MOVE_FILES], placed[VMM_MOVE_FILES];
	int dfd = -1, rc, idx, jailed = m->cfg.jail, base_new = 0, bi;
	int layered = 0, stopped = 0;
	struct conf c = { 0 };
	struct in_addr ip;
	struct stat st;
	size_t i;
	FILE *f;

	memset(placed, 0, sizeof(placed));
	if (out != NULL)
		*out = NULL;
	/* ---- checks: nothing is touched ---- */
	if (!vmm_id_valid(mv->id))
		return errf(err, errlen, -EINVAL, "a bad sandbox id");
	if (vmm_sandbox_find(m, mv->id) != NULL)
		return errf(err, errlen, -EEXIST, "sandbox %s exists here",
		    mv->id);
	if (snprintf(sdir, sizeof(sdir), "%s/%s", m->state_dir, mv->id) >=
	    (int)sizeof(sdir))
		return errf(err, errlen, -ENAMETOOLONG, "state path too long");
	if (lstat(sdir, &st) == 0 || errno != ENOENT)
		return errf(err, errlen, -EEXIST, "%s exists here", sdir);
	if (strcmp(tpl->name, mv->tpl) != 0)
		return errf(err, errlen, -EINVAL, "template %s, not %s",
		    mv->tpl, tpl->name);
	if ((rc = vmm_move_template_id(tpl, hex, why, sizeof(why))) < 0)
		return errf(err, errlen, rc, "template %s here: %s", tpl->name,
		    why);
	if (strcmp(hex, mv->tpl_sha256) != 0)
		return errf(err, errlen, -EINVAL, "template %s here is another "
		    "version (its files differ): it must be copied first",
		    tpl->name);
	if (mv->ready_key[0] != '\0' && !tpl->root_overlay)
		return errf(err, errlen, -EINVAL, "a ready snapshot's layer "
		    "under a disk that is no root overlay");
	if (mv->mem_mib > (m->cfg.max_mem_mib ? m->cfg.max_mem_mib : 4096) ||
	    mv->vcpus > (m->cfg.max_vcpus ? m->cfg.max_vcpus : 4))
		return errf(err, errlen, -EINVAL, "%u MiB and %u vCPUs: past "
		    "this host's vm_max_memory or vm_max_vcpus", mv->mem_mib,
		    mv->vcpus);
	if (vmm_move_index(mv, "sandbox.conf") < 0 || vmm_move_index(mv, disk) < 0)
		return errf(err, errlen, -EINVAL, "sandbox.conf and %s are "
		    "needed", disk);
	if (vmm_move_index(mv, tpl->root_overlay ? "disk.raw" : "disk.qcow2") >= 0)
		return errf(err, errlen, -EINVAL, "a disk of another kind "
		    "than template %s's", tpl->name);
	if ((rc = vmm_move_needs(m, mv, need, err, errlen)) < 0)
		return rc;
	bi = vmm_move_index(mv, "base.qcow2");
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return errf(err, errlen, -errno, "%s: %s", dir,
		    strerror(errno));
	if ((rc = check_entries(dfd, mv, need, err, errlen)) < 0)
		goto fail;
	for (i = 0; i < mv->n; i++)
		if (need[i] && (rc = check_file(dfd, &mv->f[i], err,
		    errlen)) < 0)
			goto fail;
	/* sandbox.conf: what the rest of the files are */
	{
		int cfd = openat(dfd, "sandbox.conf", O_RDONLY | O_NOFOLLOW |
		    O_CLOEXEC);

		if (cfd < 0 || (f = fdopen(cfd, "r")) == NULL) {
			rc = -errno;
			if (cfd >= 0)
				close(cfd);
			errf(err, errlen, rc, "sandbox.conf: %s",
			    strerror(-rc));
			goto fail;
		}
		rc = vmm_kv_read(f, conf_line, &c, why, sizeof(why));
		fclose(f);
		if (rc != 0) {
			errf(err, errlen, -EINVAL, "sandbox.conf: %s", rc < 0 &&
			    why[0] ? why : "unreadable");
			rc = -EINVAL;
			goto fail;
		}
	}
	rc = -EINVAL;
#define BAD(...) do { errf(err, errlen, -EINVAL, "sandbox.conf: " \
	__VA_ARGS__); goto fail; } while (0)
	if (strcmp(conf_get(&c, "id"), mv->id) != 0)
		BAD("its id is not %s", mv->id);
	/* suspended: its snapshot comes (snap/state, and mem unless that
	 * holds its RAM); stopped: no snapshot, it boots here */
	stopped = strcmp(conf_get(&c, "state"), "stopped") == 0;
	if (!stopped && strcmp(conf_get(&c, "state"), "suspended") != 0)
		BAD("state %.32s, not suspended or stopped",
		    conf_get(&c, "state"));
	if ((vmm_move_index(mv, "snap/state") >= 0) == stopped)
		BAD("%s, but %s snap/state", stopped ? "stopped" : "suspended",
		    stopped ? "a" : "no");
	if (stopped && vmm_move_index(mv, "mem") >= 0)
		BAD("stopped, but a RAM file");
	if (conf_int(&c, "layer_gen") || (conf_int(&c, "layered") &&
	    bi < 0))
		BAD("a fork's layers: its source flattens them first");
	if (!stopped && conf_int(&c, "ram_shared"))
		BAD("its RAM is a ready snapshot's");
	if (strcmp(conf_get(&c, "template"), tpl->name) != 0)
		BAD("template %.64s, not %s", conf_get(&c, "template"),
		    tpl->name);
	if (strcmp(conf_get(&c, "cmdline"), tpl->cmdline ? tpl->cmdline :
	    "") != 0 ||
	    strcmp(conf_get(&c, "agent"), tpl->agent ? tpl->agent : "") != 0 ||
	    conf_int(&c, "root_overlay") != tpl->root_overlay)
		BAD("another version of template %s (its command line, agent "
		    "or disk)", tpl->name);
	if (strcmp(conf_get(&c, conf_int(&c, "layered") ? "moved_key" :
	    "ready_key"), mv->ready_key) != 0)
		BAD("its ready_key is not the manifest's");
	if ((unsigned)conf_int(&c, "mem_mib") != mv->mem_mib ||
	    (unsigned)conf_int(&c, "vcpus") != mv->vcpus ||
	    (unsigned)conf_int(&c, "disk_mib") != mv->disk_mib)
		BAD("its size is not the manifest's");
	if (!stopped && (!conf_int(&c, "snap_ram") ||
	    conf_int(&c, "snap_dev")) != (vmm_move_index(mv, "mem") >= 0))
		BAD("its RAM file is %s", vmm_move_index(mv, "mem") >= 0 ?
		    "not its" : "missing");
	if (!stopped && strcmp(conf_get(&c, "accel"), "kvm") == 0 &&
	    vmm_accel_template(m, tpl) != VMM_ACCEL_KVM)
		BAD("saved under KVM, which this host does not use");
	if (inet_pton(AF_INET, conf_get(&c, "guest_ip"), &ip) != 1)
		BAD("a bad guest_ip");
#undef BAD
	/* its address, if free here; else this host's next one, which its
	 * guest is given through its agent as it is restored (the network
	 * part of a clone's identity: readdress), or a stopped one's on
	 * its kernel's command line at its next boot */
	if ((idx = vmm_pool_claim(m->pool, ip)) < 0) {
		struct in_addr gw;
		char a[INET_ADDRSTRLEN];

		if (!stopped && conf_get(&c, "agent")[0] == '\0') {
			rc = errf(err, errlen, -EADDRNOTAVAIL, "its address %s "
			    "is not free in this host's pool, and its guest "
			    "has no agent to be given another",
			    conf_get(&c, "guest_ip"));
			goto fail;
		}
		if ((idx = vmm_pool_alloc_free(m, &gw, &ip, tap,
		    sizeof(tap))) < 0) {
			rc = errf(err, errlen, -EADDRNOTAVAIL, "this host's "
			    "address pool is full");
			goto fail;
		}
		inet_ntop(AF_INET, &ip, a, sizeof(a));
		if (conf_set(&c, "guest_ip", a) < 0 ||
		    conf_set(&c, "readdress", stopped ? "0" : "1") < 0) {
			vmm_pool_release(m->pool, ip);
			rc = errf(err, errlen, -ENOMEM, "out of memory");
			goto fail;
		}
	}
	vmm_pool_release(m->pool, ip);
	snprintf(tap, sizeof(tap), "%s%d", m->tap_prefix, idx);
	/* its base: received now, or kept from a move before (both in
	 * .layers: its disk a chain of layers then), or the ready
	 * snapshot's own layer here, the same bytes */
	if (bi >= 0) {
		if ((rc = moved_path(m, mv->base_id, base,
		    sizeof(base))) < 0) {
			errf(err, errlen, rc, "path too long");
			goto fail;
		}
		layered = need[bi] || access(base, F_OK) == 0;
		if (!layered)
			(void)vmm_ready_path(m, mv->ready_key, "disk.qcow2",
			    base, sizeof(base));
	}
	if (base[0] != '\0') {
		/* the top's header will name the base's path here, and a
		 * received base's the template's image */
		snprintf(p, sizeof(p), "%s/%s", dir, disk);
		if ((rc = vmm_qcow2_set_backing(p, base, 1, err, errlen)) < 0)
			goto fail;
		if (need[bi]) {
			snprintf(p, sizeof(p), "%s/base.qcow2", dir);
			if (tpl->rootfs == NULL || (rc = vmm_qcow2_set_backing(p,
			    tpl->rootfs, 1, err, errlen)) < 0) {
				if (tpl->rootfs == NULL)
					rc = errf(err, errlen, -EINVAL,
					    "template %s has no image",
					    tpl->name);
				goto fail;
			}
		}
	}
	/* the new sandbox.conf: this host's names for what is the host's */
	snprintf(n, sizeof(n), "%d", jailed);
	if (conf_set(&c, "pid", "0") < 0 || conf_set(&c, "standby_pid", "0") <
	    0 || conf_set(&c, "tap", tap) < 0 || conf_set(&c, "jailed", n) < 0 ||
	    conf_set(&c, "kernel", tpl->kernel) < 0 ||
	    conf_set(&c, "initrd", tpl->initrd ? tpl->initrd : "") < 0 ||
	    conf_set(&c, "rootfs", tpl->rootfs ? tpl->rootfs : "") < 0 ||
	    conf_set(&c, "cgroup_name", "") < 0 ||
	    conf_set(&c, "reason", "") < 0 ||
	    conf_set(&c, "disk_ready", "1") < 0 ||
	    conf_set(&c, "layered", layered ? "1" : "0") < 0 ||
	    conf_set(&c, "moved_key", layered ? mv->ready_key : "") < 0 ||
	    (layered && conf_set(&c, "ready_key", "") < 0) ||
	    (!layered && bi >= 0 && conf_set(&c, "ready_key",
	    mv->ready_key) < 0)) {
		rc = errf(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}

	/* ---- placement: from here a failure undoes what it did ---- */
	if (mkdir(sdir, jailed ? 0700 : 0750) < 0) {
		rc = errf(err, errlen, -errno, "%s: %s", sdir, strerror(errno));
		goto fail;
	}
	snprintf(p, sizeof(p), "%s/snap", sdir);
	if ((jailed && (snprintf(q, sizeof(q), "%s/jail", sdir),
	    mkdir(q, 0755) < 0)) || mkdir(p, jailed ? 0700 : 0750) < 0) {
		rc = errf(err, errlen, -errno, "%s: %s", sdir, strerror(errno));
		goto undo;
	}
	if (base[0] != '\0' && need[bi]) {
		snprintf(p, sizeof(p), "%s/.layers", m->state_dir);
		if (mkdir(p, 0711) < 0 && errno != EEXIST) {
			rc = errf(err, errlen, -errno, "%s: %s", p,
			    strerror(errno));
			goto undo;
		}
		/* named by its bytes: one already there (another move's,
		 * meanwhile) is the same */
		if (access(base, F_OK) == 0) {
			snprintf(p, sizeof(p), "%s/base.qcow2", dir);
			(void)unlink(p);
		} else {
			snprintf(p, sizeof(p), "%s/base.qcow2", dir);
			if ((rc = vmm_qcow2_set_backing(p, tpl->rootfs, 0, err,
			    errlen)) < 0)
				goto undo;
			(void)chmod(p, 0644);
			if (rename(p, base) < 0) {
				rc = errf(err, errlen, -errno, "%s: %s", base,
				    strerror(errno));
				goto undo;
			}
			base_new = 1;
		}
	}
	for (i = 0; i < mv->n; i++) {
		if (mv->f[i].shared || strcmp(mv->f[i].name,
		    "sandbox.conf") == 0 ||
		    vmm_move_template_file(mv->f[i].name) >= 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, mv->f[i].name);
		if ((rc = dest_path(m, mv->id, mv->f[i].name, q,
		    sizeof(q))) < 0) {
			errf(err, errlen, rc, "path too long");
			goto undo;
		}
		if (rename(p, q) < 0) {
			rc = errf(err, errlen, -errno, "%s: %s", q,
			    strerror(errno));
			goto undo;
		}
		placed[i] = 1;
		if (strcmp(mv->f[i].name, disk) == 0 && base[0] != '\0' &&
		    (rc = vmm_qcow2_set_backing(q, base, 0, err, errlen)) < 0)
			goto undo;
	}
	snprintf(p, sizeof(p), "%s/sandbox.conf", sdir);
	if ((f = fopen(p, "wex")) == NULL) {
		rc = errf(err, errlen, -errno, "%s: %s", p, strerror(errno));
		goto undo;
	}
	rc = 0;
	for (i = 0; i < c.n; i++)
		if (vmm_kv_write(f, c.k[i], c.v[i]) < 0)
			rc = -EIO;
	if (fclose(f) != 0 || rc < 0) {
		rc = errf(err, errlen, -EIO, "%s: %s", p, strerror(errno));
		goto undo;
	}
	if ((rc = vmm_adopt_one(m, mv->id, err, errlen)) < 0)
		goto undo;
	snprintf(p, sizeof(p), "%s/sandbox.conf", dir);
	(void)unlink(p);
	conf_free(&c);
	close(dfd);
	if (out != NULL)
		*out = vmm_sandbox_find(m, mv->id);
	return 0;
undo:
	/* the files back where they came from, then what was made */
	for (i = 0; i < mv->n; i++) {
		if (!placed[i])
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, mv->f[i].name);
		if (dest_path(m, mv->id, mv->f[i].name, q, sizeof(q)) == 0)
			(void)rename(q, p);
	}
	if (base_new) {
		snprintf(p, sizeof(p), "%s/base.qcow2", dir);
		(void)rename(base, p);
	}
	snprintf(p, sizeof(p), "%s/sandbox.conf", sdir);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/snap", sdir);
	(void)rmdir(p);
	snprintf(p, sizeof(p), "%s/jail", sdir);
	(void)rmdir(p);
	(void)rmdir(sdir);
fail:
	conf_free(&c);
	if (dfd >= 0)
		close(dfd);
	return rc;
}
