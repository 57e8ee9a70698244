/*
 * ready.c — ready snapshots: a template version booted once to its
 * settled state (its "settled_line", else its ready line) and suspended,
 * kept in <state_dir>/.ready/<key>/ as three files no sandbox writes:
 *   state       the VMM's device state (the migration stream, no RAM)
 *   mem         the guest's RAM image (sparse)
 *   disk.qcow2  the frozen disk layer over the template's root image
 * plus ready.conf, written last (its presence means the rest is whole).
 * The key covers what a restore must match: the template's files and
 * command line, memory, vCPUs, the disk (as a create gets it: one key,
 * one disk size), the accelerator and the VMM binary.
 *
 * A create of that shape restores it instead of booting (qemu.c): its
 * disk a new qcow2 layer over disk.qcow2, its RAM a private copy-on-write
 * mapping of the image, so clones share every page none of them wrote.
 * Jailed VMMs map it through a sealed memfd (F_SEAL_WRITE: none of them
 * can change what the others start from, whatever runs in it), which the
 * manager fills once per key from mem, skipping zero pages; a VMM
 * without a jail maps mem itself.
 *
 * The build is a hidden sandbox (not listed, no callbacks to the
 * application) in .ready/<key>.build: created, suspended at its settled
 * line, its three files moved into .tmp then renamed to .ready/<key>, and
 * deleted. One build at a time; a manager that dies mid-build leaves a
 * .build directory the next one clears (vmm_ready_cleanup).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "nc_link.h"
#include "vmm.h"

struct vmm_ready {
	struct vmm_ready *next;
	char key[VMM_READY_KEY];
	int memfd;			/* sealed copy of mem, -1 not loaded */
	/* the pool: what its members are made from */
	struct vmm_template tpl;
	int have_tpl;
	unsigned mem_mib, vcpus;
	int filling;			/* a member being made */
	struct event *refill_ev;	/* ... after a claim, a little later */
	struct vmm *m;
	/* a build in flight */
	struct vmm_sandbox *sb;
	vmm_ready_cb cb;
	void *arg;
	uint64_t t0;
	char why[VMM_ERRLEN];
};

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n-- > 0) {
		h ^= *c++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t
fnv_s(uint64_t h, const char *s)
{
	h = fnv(h, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
	return fnv(h, "\n", 1);
}

static uint64_t
fnv_file(uint64_t h, const char *path)
{
	struct stat st;

	h = fnv_s(h, path);
	if (path != NULL && stat(path, &st) == 0) {
		h = fnv(h, &st.st_size, sizeof(st.st_size));
		h = fnv(h, &st.st_mtim.tv_sec, sizeof(st.st_mtim.tv_sec));
		h = fnv(h, &st.st_ino, sizeof(st.st_ino));
	}
	return h;
}

void
vmm_ready_key(struct vmm *m, const struct vmm_template *t, unsigned mem_mib,
    unsigned vcpus, unsigned disk_mib, char key[VMM_READY_KEY])
{
	uint64_t h = 0xcbf29ce484222325ULL;
	char exe[PATH_MAX], n[64];

	vmm_exe_path(m->vmm_binary, exe, sizeof(exe));
	h = fnv_file(h, t->kernel);
	h = fnv_file(h, t->initrd);
	h = fnv_file(h, t->rootfs);
	h = fnv_file(h, exe);
	h = fnv_s(h, t->cmdline);
	h = fnv_s(h, t->agent);
	h = fnv_s(h, t->settled_line);
	/* a restored clone's disk is a layer over the snapshot's, of its
	 * size: the disk is the shape's as much as memory and vCPUs are */
	snprintf(n, sizeof(n), "%u %u %s %u %d %d disk %u", mem_mib ? mem_mib :
	    t->mem_mib ? t->mem_mib : m->cfg.mem_mib,
	    vcpus ? vcpus : m->cfg.vcpus,
	    vmm_accel_name(vmm_accel_template(m, t)), m->cfg.tsc_khz,
	    m->cfg.jail, m->cfg.free_page_reporting,
	    vmm_disk_effective(m, t, disk_mib));
	h = fnv_s(h, n);
	snprintf(key, VMM_READY_KEY, "%016llx", (unsigned long long)h);
}

int
vmm_ready_path(const struct vmm *m, const char *key, const char *name,
    char *buf, size_t len)
{
	int n = key == NULL ? snprintf(buf, len, "%s/.ready", m->state_dir) :
	    snprintf(buf, len, "%s/.ready/%s%s%s", m->state_dir, key,
	    name != NULL ? "/" : "", name != NULL ? name : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
vmm_ready_lookup(const struct vmm *m, const char *key,
    struct vmm_ready_info *ri)
{
	char p[PATH_MAX], line[256];
	FILE *f;

	memset(ri, 0, sizeof(*ri));
	if (vmm_ready_path(m, key, "ready.conf", p, sizeof(p)) < 0)
		return -ENAMETOOLONG;
	if ((f = fopen(p, "re")) == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned v;

		if (sscanf(line, "disk_mib=%u", &v) == 1)
			ri->disk_mib = v;
		else if (sscanf(line, "mem_mib=%u", &v) == 1)
			ri->mem_mib = v;
		else if (sscanf(line, "vcpus=%u", &v) == 1)
			ri->vcpus = v;
		else if (sscanf(line, "build_ms=%u", &v) == 1)
			ri->build_ms = v;
	}
	fclose(f);
	return ri->disk_mib != 0 && ri->mem_mib != 0 ? 0 : -EINVAL;
}

static struct vmm_ready *
ready_get(struct vmm *m, const char *key, int make)
{
	struct vmm_ready *r;

	for (r = m->ready; r != NULL; r = r->next)
		if (strcmp(r->key, key) == 0)
			return r;
	if (!make || (r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->memfd = -1;
	r->next = m->ready;
	m->ready = r;
	return r;
}

static int
all_zero(const unsigned char *p, size_t n)
{
	static const unsigned char z[4096];

	return memcmp(p, z, n) == 0;
}

/*
 * The sealed memfd of key's RAM image, made on first use: only the pages
 * that hold data are copied, the rest allocated zeroed (below). Blocks the loop for
 * the copy, once per key and manager. The descriptor stays the
 * manager's; callers pass it on and do not close it.
 */
int
vmm_ready_memfd(struct vmm *m, const char *key, char *err, size_t errlen)
{
	struct vmm_ready *r = ready_get(m, key, 1);
	char p[PATH_MAX];
	unsigned char *buf = NULL;
	struct stat st;
	off_t off = 0, data, hole;
	int src = -1, fd = -1, e = 0;

	if (r == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (r->memfd >= 0)
		return r->memfd;
	(void)vmm_ready_path(m, key, "mem", p, sizeof(p));
	if ((src = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(src, &st) < 0) {
		e = errno;
		snprintf(err, errlen, "ready snapshot RAM %s: %s", p, strerror(e));
		goto out;
	}
	if ((fd = memfd_create("berth-ready", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING)) < 0 || ftruncate(fd, st.st_size) < 0) {
		e = errno;
		snprintf(err, errlen, "memfd for the ready snapshot's %lld "
		    "bytes of RAM: %s", (long long)st.st_size, strerror(e));
		goto out;
	}
	if ((buf = malloc(1 << 20)) == NULL) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	while (off < st.st_size) {
		if ((data = lseek(src, off, SEEK_DATA)) < 0)
			break;		/* ENXIO: only a hole is left */
		if ((hole = lseek(src, data, SEEK_HOLE)) < 0)
			hole = st.st_size;
		while (data < hole) {
			size_t want = (size_t)(hole - data) < (1u << 20) ?
			    (size_t)(hole - data) : (1u << 20), i;
			ssize_t n = pread(src, buf, want, data);

			if (n <= 0) {
				e = n < 0 ? errno : EIO;
				snprintf(err, errlen, "reading %s: %s", p,
				    strerror(e));
				goto out;
			}
			for (i = 0; i < (size_t)n; i += 4096) {
				size_t k = (size_t)n - i < 4096 ?
				    (size_t)n - i : 4096;

				if (all_zero(buf + i, k))
					continue;
				if (pwrite(fd, buf + i, k, data + (off_t)i) !=
				    (ssize_t)k) {
					e = errno ? errno : EIO;
					snprintf(err, errlen, "filling the "
					    "ready snapshot's memfd: %s",
					    strerror(e));
					goto out;
				}
			}
			data += n;
		}
		off = hole;
	}
	/* The holes too, now and here: a read through a private mapping
	 * of a shmem hole allocates a page for it, charged to whoever
	 * reads. A clone's suspend or fork reads all of its RAM; without
	 * this, the first clone that did so would be charged the zero
	 * pages of everyone's image (hundreds of MiB of its memory limit,
	 * unreclaimable: it was OOM-killed restoring its own RAM). So the
	 * image costs its full size once, the manager's, shared by all. */
	if (fallocate(fd, 0, 0, st.st_size) < 0) {
		e = errno;
		snprintf(err, errlen, "the ready snapshot's memfd (%lld "
		    "bytes): %s", (long long)st.st_size, strerror(e));
		goto out;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK |
	    F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		e = errno;
		snprintf(err, errlen, "sealing the ready snapshot's memfd: %s",
		    strerror(e));
		goto out;
	}
	r->memfd = fd;
	fd = -1;
out:
	free(buf);
	if (src >= 0)
		close(src);
	if (fd >= 0)
		close(fd);
	return e != 0 ? -e : r->memfd;
}

void
vmm_ready_free_all(struct vmm *m)
{
	struct vmm_ready *r, *n;

	for (r = m->ready; r != NULL; r = n) {
		n = r->next;
		if (r->memfd >= 0)
			close(r->memfd);
		if (r->have_tpl)
			vmm_template_free(&r->tpl);
		if (r->refill_ev != NULL)
			event_free(r->refill_ev);
		free(r);
	}
	m->ready = NULL;
}

unsigned
vmm_ready_pool_members(const struct vmm *m)
{
	const struct vmm_sandbox *sb;
	unsigned n = 0;

	for (sb = m->list; sb != NULL; sb = sb->next)
		if (sb->pooled && sb->pool_ready)
			n++;
	return n;
}

int
vmm_ready_building(const struct vmm *m)
{
	const struct vmm_ready *r;

	for (r = m->ready; r != NULL; r = r->next)
		if (r->sb != NULL)
			return 1;
	return 0;
}

/* ---- the build ---- */

static void
build_end(struct vmm_ready *r, int ok, const char *why)
{
	vmm_ready_cb cb = r->cb;
	void *arg = r->arg;
	uint64_t dur = vmm_now_ms() - r->t0;

	r->sb = NULL;
	r->cb = NULL;
	if (cb != NULL)
		cb(r->key, ok, why, dur, arg);
}

static void
build_deleted(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct vmm_ready *r = arg;

	(void)sb;
	(void)op;
	(void)ok;
	(void)reason;
	(void)dur;
	build_end(r, r->why[0] == '\0', r->why);
}

static void
build_fail(struct vmm_ready *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
build_fail(struct vmm_ready *r, const char *fmt, ...)
{
	char err[VMM_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	if (r->why[0] == '\0')
		snprintf(r->why, sizeof(r->why), "failed");
	if (vmm_sandbox_delete(r->sb, build_deleted, r, err,
	    sizeof(err)) < 0)
		build_end(r, 0, r->why);
}

/* Move the suspended builder's files into .ready/<key>.tmp, write
 * ready.conf, rename to .ready/<key>. */
static int
harvest(struct vmm_ready *r, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = r->sb;
	struct vmm *m = sb->m;
	char tmp[PATH_MAX], fin[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];
	static const char *const names[] = { "snap/state", "mem",
	    "disk.qcow2" };
	static const char *const to[] = { "state", "mem", "disk.qcow2" };
	uid_t owner = sb->jailed ? 0 : m->cfg.vmm_uid;
	gid_t group = sb->jailed ? 0 : m->cfg.vmm_gid;
	char k[VMM_READY_KEY];
	size_t i;
	FILE *f;

	/* The key names the accelerator the snapshot was made under. A
	 * first build under a KVM not yet proven that fell back to TCG ran
	 * under TCG: kept under the key it was started with, no create
	 * would ever find it (each computes the key with the verdict) and
	 * the next create built another one. */
	vmm_ready_key(m, &sb->tpl, sb->mem_mib, sb->vcpus, sb->disk_mib, k);
	if (strcmp(k, r->key) != 0 && ready_get(m, k, 0) == NULL)
		snprintf(r->key, sizeof(r->key), "%s", k);
	(void)vmm_ready_path(m, r->key, NULL, fin, sizeof(fin));
	snprintf(tmp, sizeof(tmp), "%s.tmp", fin);
	vmm_rmtree(tmp);
	if (mkdir(tmp, 0755) < 0)
		return snprintf(err, errlen, "%s: %s", tmp, strerror(errno)),
		    -1;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		(void)vmm_path(sb, names[i], src, sizeof(src));
		snprintf(dst, sizeof(dst), "%s/%s", tmp, to[i]);
		if (rename(src, dst) < 0)
			return snprintf(err, errlen, "%s: %s", src,
			    strerror(errno)), -1;
		/* no sandbox's VMM may write them: root's and read-only,
		 * except the RAM image a VMM without a jail maps itself
		 * (its own user then, as all of them are) */
		if (chown(dst, owner, group) < 0 ||
		    chmod(dst, i == 1 && owner != 0 ? 0600 : 0444) < 0)
			return snprintf(err, errlen, "%s: %s", dst,
			    strerror(errno)), -1;
	}
	snprintf(dst, sizeof(dst), "%s/ready.conf", tmp);
	if ((f = fopen(dst, "we")) == NULL)
		return snprintf(err, errlen, "%s: %s", dst, strerror(errno)),
		    -1;
	fprintf(f, "key=%s\ntemplate=%s\nkernel=%s\ninitrd=%s\nrootfs=%s\n"
	    "mem_mib=%u\nvcpus=%u\ndisk_mib=%u\naccel=%s\nbuild_ms=%llu\n"
	    "created_ms=%llu\n", r->key, sb->tpl.name, sb->tpl.kernel,
	    sb->tpl.initrd ? sb->tpl.initrd : "",
	    sb->tpl.rootfs ? sb->tpl.rootfs : "", sb->mem_mib, sb->vcpus,
	    sb->disk_mib, vmm_accel_name(sb->accel),
	    (unsigned long long)(vmm_now_ms() - r->t0),
	    (unsigned long long)vmm_wall_ms());
	if (fflush(f) != 0 || fsync(fileno(f)) < 0) {
		fclose(f);
		return snprintf(err, errlen, "%s: %s", dst, strerror(errno)),
		    -1;
	}
	fclose(f);
	vmm_rmtree(fin);
	if (rename(tmp, fin) < 0)
		return snprintf(err, errlen, "%s: %s", fin, strerror(errno)),
		    -1;
	return 0;
}

static void
build_suspended(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct vmm_ready *r = arg;
	char err[VMM_ERRLEN];

	(void)op;
	(void)dur;
	if (!ok) {
		build_fail(r, "suspending the built sandbox: %s", reason);
		return;
	}
	if (sb->standby_pid > 0 || harvest(r, err, sizeof(err)) < 0) {
		build_fail(r, "keeping the snapshot: %s", sb->standby_pid > 0 ?
		    "a standby VMM holds it" : err);
		return;
	}
	r->why[0] = '\0';
	if (vmm_sandbox_delete(sb, build_deleted, r, err, sizeof(err)) < 0)
		build_end(r, 1, "");
}

static void
build_created(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct vmm_ready *r = arg;
	char err[VMM_ERRLEN];

	(void)op;
	(void)dur;
	(void)sb;
	if (!ok) {
		build_fail(r, "booting the template: %s", reason);
		return;
	}
	if (vmm_sandbox_suspend(sb, build_suspended, r, err, sizeof(err)) < 0)
		build_fail(r, "suspending the built sandbox: %s", err);
}

int
vmm_ready_build(struct vmm *m, const struct vmm_template *t,
    unsigned mem_mib, unsigned vcpus, unsigned disk_mib, vmm_ready_cb cb,
    void *arg, char *key, char *err, size_t errlen)
{
	struct vmm_sandbox_spec spec;
	struct vmm_template bt;
	struct vmm_ready_info ri;
	struct vmm_ready *r;
	char k[VMM_READY_KEY], id[VMM_ID_MAX + 1], p[PATH_MAX];
	int rc;

	if (strcmp(m->be->name, "qemu") != 0 || !t->root_overlay ||
	    t->agent == NULL) {
		snprintf(err, errlen, "template %s: ready snapshots need the "
		    "qemu backend, a root overlay and a guest agent",
		    t->name ? t->name : "");
		return -ENOTSUP;
	}
	vmm_ready_key(m, t, mem_mib, vcpus, disk_mib, k);
	if (key != NULL)
		snprintf(key, VMM_READY_KEY, "%s", k);
	if (vmm_ready_lookup(m, k, &ri) == 0)
		return 1;			/* there already */
	if (vmm_ready_building(m)) {
		snprintf(err, errlen, "a ready snapshot is being built");
		return -EBUSY;
	}
	(void)vmm_ready_path(m, NULL, NULL, p, sizeof(p));
	if (mkdir(p, 0711) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		return -errno;
	}
	if ((r = ready_get(m, k, 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* what qemu.c waits for before the snapshot: the settled line */
	bt = *t;
	if (t->settled_line != NULL)
		bt.ready_line = t->settled_line;
	snprintf(id, sizeof(id), "ready-%.12s", k);
	memset(&spec, 0, sizeof(spec));
	spec.id = id;
	spec.tpl = &bt;
	spec.mem_mib = mem_mib;
	spec.vcpus = vcpus;
	spec.disk_mib = disk_mib;	/* ready.conf's disk_mib, as made */
	spec.boot = 1;
	spec.idle_pause_ms = spec.idle_suspend_ms = VMM_NEVER;
	r->cb = cb;
	r->arg = arg;
	r->t0 = vmm_now_ms();
	r->why[0] = '\0';
	(void)vmm_ready_path(m, k, NULL, p, sizeof(p));
	snprintf(p + strlen(p), sizeof(p) - strlen(p), ".build");
	vmm_rmtree(p);
	rc = vmm_sandbox_create_hidden(m, &spec, k, build_created, r, &r->sb,
	    err, errlen);
	if (rc < 0) {
		r->sb = NULL;
		r->cb = NULL;
	}
	return rc;
}

/* ---- the pool ---- */

static void
pool_gone(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	(void)sb;
	(void)op;
	(void)ok;
	(void)reason;
	(void)dur;
	(void)arg;
}

static void
pool_drop(struct vmm_ready *r, struct vmm_sandbox *sb)
{
	char err[VMM_ERRLEN];

	r->filling = 0;
	(void)vmm_sandbox_delete(sb, pool_gone, NULL, err, sizeof(err));
}

static void
pool_paused(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct vmm_ready *r = arg;

	(void)op;
	(void)reason;
	(void)dur;
	if (!ok || !sb->pooled) {
		if (sb->pooled)
			pool_drop(r, sb);
		return;
	}
	sb->pool_ready = 1;
	r->filling = 0;
	vmm_ready_pool_fill(sb->m, r->key, NULL, 0, 0);	/* the next one */
}

static void
pool_created(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct vmm_ready *r = arg;
	char err[VMM_ERRLEN];

	(void)op;
	(void)reason;
	(void)dur;
	/* restored from the snapshot and identified as itself (its first
	 * identity request translated the paths the claim's will take) */
	if (!ok || !sb->from_snapshot ||
	    vmm_sandbox_pause(sb, pool_paused, r, err, sizeof(err)) < 0)
		pool_drop(r, sb);
}

void
vmm_ready_pool_fill(struct vmm *m, const char *key,
    const struct vmm_template *t, unsigned mem_mib, unsigned vcpus)
{
	struct vmm_ready *r = ready_get(m, key, t != NULL);
	struct vmm_ready_info ri;
	struct vmm_sandbox_spec spec;
	struct vmm_sandbox *sb;
	char id[VMM_ID_MAX + 1], err[VMM_ERRLEN];
	unsigned n = 0;
	static unsigned seq;

	if (r == NULL)
		return;
	if (t != NULL && !r->have_tpl) {
		if (vmm_template_copy(&r->tpl, t) < 0)
			return;
		r->have_tpl = 1;
		r->mem_mib = mem_mib;
		r->vcpus = vcpus;
	}
	if (!r->have_tpl || r->filling || r->sb != NULL ||
	    m->cfg.ready_pool == 0 || !m->cfg.ready_snapshots ||
	    vmm_ready_lookup(m, key, &ri) < 0)
		return;
	for (sb = m->list; sb != NULL; sb = sb->next)
		if (sb->pooled && strcmp(sb->build_key, key) == 0)
			n++;
	if (n >= m->cfg.ready_pool)
		return;
	/* unique across restarts too: a claimed member keeps this name
	 * (its qemu's, its cgroup's) for the sandbox's life */
	snprintf(id, sizeof(id), "pool-%.8s-%llx-%u", key,
	    (unsigned long long)vmm_wall_ms(), ++seq);
	memset(&spec, 0, sizeof(spec));
	spec.id = id;
	spec.tpl = &r->tpl;
	spec.mem_mib = r->mem_mib;
	spec.vcpus = r->vcpus;
	spec.disk_mib = 0;		/* the default: key's, as its caller's */
	spec.idle_pause_ms = spec.idle_suspend_ms = VMM_NEVER;
	r->filling = 1;
	if (vmm_sandbox_create_hidden(m, &spec, key, pool_created, r, NULL,
	    err, sizeof(err)) < 0)
		r->filling = 0;
}

static void
refill_fire(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_ready *r = arg;

	(void)fd;
	(void)what;
	vmm_ready_pool_fill(r->m, r->key, NULL, 0, 0);
}

/* A create just took a pool member: the next one is made a moment
 * later, not beside the claimed sandbox's first commands (a restore
 * under TCG takes a core for a second). */
void
vmm_ready_pool_refill(struct vmm *m, const char *key)
{
	struct vmm_ready *r = ready_get(m, key, 0);

	if (r == NULL || !r->have_tpl)
		return;
	r->m = m;
	if (r->refill_ev == NULL &&
	    (r->refill_ev = evtimer_new(m->base, refill_fire, r)) == NULL)
		return;
	vmm_timer_ms(r->refill_ev, VMM_POOL_REFILL_MS);
}

/* What the manager runs for itself goes with it: builds and pool
 * members, killed and reaped now, their taps, groups and files removed
 * (the application is stopping: no loop turns after this). So does a
 * sandbox being deleted (its row is gone: a delete's answer does not
 * wait for its VMM's end), which would else leave its group behind. */
void
vmm_ready_drain(struct vmm *m)
{
	struct vmm_sandbox *sb;

	for (sb = m->list; sb != NULL; sb = sb->next) {
		if (!sb->hidden && !(sb->busy && sb->op == VMM_OP_DELETE))
			continue;
		if (m->be->release != NULL)
			m->be->release(sb);	/* ends a standby */
		if (sb->pid > 0) {
			int rc, i;

			kill(sb->pid, SIGKILL);
			while ((rc = waitpid(sb->pid, NULL, 0)) < 0 &&
			    errno == EINTR)
				;
			/* one adopted at a start is not our child: its end
			 * (it leaves its group then) seen by its pid, 2 s */
			for (i = 0; rc < 0 && i < 200 && kill(sb->pid, 0) == 0;
			    i++)
				usleep(10000);
			sb->pid = 0;
		}
		if (sb->tap[0] != '\0' && !m->cfg.external_taps)
			(void)nc_link_delete(sb->tap, NULL, 0);
		if (sb->jailed)
			vmm_cgroup_remove(sb);
		vmm_rmtree(sb->dir);
		sb->deleting = 1;
	}
}

/* A ready snapshot whose template version is gone (its kernel no
 * longer there: a rebuild removed the version) and whose disk layer no
 * sandbox stands on goes, with its memfd. */
void
vmm_ready_gc(struct vmm *m)
{
	char dir[PATH_MAX], p[PATH_MAX + 300], line[PATH_MAX + 16];
	struct vmm_sandbox *sb;
	struct vmm_ready *r, **pp;
	struct dirent *de;
	DIR *d;

	(void)vmm_ready_path(m, NULL, NULL, dir, sizeof(dir));
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char kernel[PATH_MAX] = "";
		FILE *f;

		if (strlen(de->d_name) != VMM_READY_KEY - 1 ||
		    strspn(de->d_name, "0123456789abcdef") != VMM_READY_KEY - 1)
			continue;
		snprintf(p, sizeof(p), "%s/%s/ready.conf", dir, de->d_name);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL)
			if (strncmp(line, "kernel=", 7) == 0) {
				line[strcspn(line, "\n")] = '\0';
				snprintf(kernel, sizeof(kernel), "%s", line + 7);
			}
		fclose(f);
		if (kernel[0] == '\0' || access(kernel, F_OK) == 0)
			continue;
		for (sb = m->list; sb != NULL; sb = sb->next)
			if (strcmp(sb->ready_key, de->d_name) == 0 ||
			    strcmp(sb->build_key, de->d_name) == 0)
				break;
		if (sb != NULL)
			continue;
		for (pp = &m->ready; (r = *pp) != NULL; pp = &r->next) {
			if (strcmp(r->key, de->d_name) != 0)
				continue;
			if (r->sb != NULL || r->filling)
				break;
			*pp = r->next;
			if (r->memfd >= 0)
				close(r->memfd);
			if (r->have_tpl)
				vmm_template_free(&r->tpl);
			if (r->refill_ev != NULL)
				event_free(r->refill_ev);
			free(r);
			r = NULL;
			break;
		}
		if (r != NULL)
			continue;	/* a build or a fill of it under way */
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		vmm_rmtree(p);
	}
	closedir(d);
}

/* A manager that died mid-build left .ready/<key>.build (its VMM maybe
 * still running) and perhaps .tmp: both go. */
void
vmm_ready_cleanup(struct vmm *m)
{
	char dir[PATH_MAX], p[PATH_MAX + 300], line[PATH_MAX];
	struct dirent *de;
	DIR *d;

	(void)vmm_ready_path(m, NULL, NULL, dir, sizeof(dir));
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		FILE *f;

		if ((n > 6 && strcmp(de->d_name + n - 6, ".build") == 0) ||
		    strncmp(de->d_name, "pool-", 5) == 0) {
			/* a build or a pool member: its qemu, tap, group */
			struct vmm_sandbox fake;
			int jailed = 0, pids[2] = { 0, 0 };
			char nm[VMM_ID_MAX + 16];

			memset(&fake, 0, sizeof(fake));
			fake.m = m;
			snprintf(p, sizeof(p), "%s/%s/sandbox.conf", dir,
			    de->d_name);
			if ((f = fopen(p, "re")) != NULL) {
				while (fgets(line, sizeof(line), f) != NULL) {
					int pid;
					char tap[32];

					line[strcspn(line, "\n")] = '\0';
					if (sscanf(line, "pid=%d", &pid) == 1)
						pids[0] = pid;
					else if (sscanf(line, "standby_pid=%d",
					    &pid) == 1)
						pids[1] = pid;
					else if (sscanf(line, "tap=%31s", tap) ==
					    1 && !m->cfg.external_taps)
						(void)nc_link_delete(tap, NULL, 0);
					else if (strncmp(line, "id=", 3) == 0)
						snprintf(fake.id, sizeof(fake.id),
						    "%s", line + 3);
					else if (strncmp(line, "cgroup_name=",
					    12) == 0)
						snprintf(fake.cg_name,
						    sizeof(fake.cg_name), "%s",
						    line + 12);
					else if (strcmp(line, "jailed=1") == 0)
						jailed = 1;
				}
				fclose(f);
			}
			/* its qemu by its exact -name, not a process that
			 * took the number since */
			snprintf(nm, sizeof(nm), "berth-%s ", fake.id);
			if (fake.id[0] != '\0' && pids[0] > 0)
				vmm_kill_if_ours(pids[0], nm);
			if (fake.id[0] != '\0' && pids[1] > 0)
				vmm_kill_if_ours(pids[1], nm);
			if (jailed && fake.id[0] != '\0')
				vmm_cgroup_remove(&fake);
		} else if (!(n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		vmm_rmtree(p);
	}
	closedir(d);
}
