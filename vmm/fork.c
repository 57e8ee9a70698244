/*
 * fork.c — a running (or paused) sandbox forked into new ones. The
 * source stops for the capture (qemu.c, QM_CAPTURE): its disk's top is
 * frozen (hard-linked as <state>/vms/.layers/<name>.qcow2, root's and
 * read-only once captured) and a new top goes over it; its RAM and
 * device state go to <state>/vms/.layers/<name>.state; it runs on.
 * With a jailed qemu, the stream is split (image.c) as QEMU writes it:
 * its RAM becomes an image in a sealed memfd that every fork of the call
 * maps private, copy-on-write (no fork copies the RAM), and the rest a
 * small stream of devices, ready moments after the capture ends. Each fork is then created over the frozen layer,
 * restores that stream (a hard link of it as its snap/state; without an
 * image, the whole stream, its RAM loaded into anonymous memory) and
 * gets its own identity (ident.c) before anyone reaches it. The
 * stream's own name goes once every fork links it; a fork drops its
 * link once restored, so the file goes with the last one. A restore to
 * a checkpoint splits its stream likewise.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "vmm.h"

struct fork_ctx {
	struct vmm *m;
	char src_id[VMM_ID_MAX + 1];
	char old_disk[PATH_MAX];
	char layer[PATH_MAX], stream[PATH_MAX];
	size_t n;
	char (*ids)[VMM_ID_MAX + 1];
	vmm_fork_cb cb;
	void *arg;
	vmm_done_cb fork_cb;		/* each fork's create */
	void *fork_arg;
	unsigned mem_mib, vcpus, disk_mib;	/* the forks' */
	/* the capture's outcome, kept while its stream is split */
	int cap_ok;
	char cap_reason[VMM_ERRLEN];
	uint64_t cap_dur;
	int img;			/* its RAM image, or -1 */
	struct vmm_split *split;	/* under way */
	int followed;			/* split as the capture wrote */
	int cap_done;
	uint64_t cap_end;		/* when it was, ms */
	int keep_stream;		/* a checkpoint's: not ours to drop */
	char split_why[VMM_ERRLEN];
	uint64_t split_ms;
	char dev[PATH_MAX];		/* the devices' stream */
};

static void
ctx_free(struct fork_ctx *c)
{
	if (c->img >= 0)
		close(c->img);
	free(c->ids);
	free(c);
}

/* The forks, created over the frozen layer from stream (the capture's,
 * or the devices' part of it when img, its RAM image, is >= 0); then the
 * caller's answer. */
static void
make_forks(struct vmm_sandbox *src, struct fork_ctx *c, const char *stream,
    int img, const char *reason, uint64_t dur)
{
	struct vmm_sandbox **forks;
	struct vmm_sandbox_spec spec;
	char err[VMM_ERRLEN];
	size_t i, made = 0;
	int fd = -1;

	if ((forks = calloc(c->n, sizeof(*forks))) == NULL) {
		if (c->cb != NULL)
			c->cb(src, 0, "out of memory", dur, NULL, 0, c->arg);
		return;
	}
	for (i = 0; i < c->n; i++) {
		memset(&spec, 0, sizeof(spec));
		spec.id = c->ids[i];
		spec.tpl = &src->tpl;
		spec.mem_mib = c->mem_mib;
		spec.vcpus = c->vcpus;
		spec.disk_mib = c->disk_mib;
		spec.boot = 1;
		if (img >= 0 && (fd = fcntl(img, F_DUPFD_CLOEXEC, 3)) < 0) {
			snprintf(src->reason, sizeof(src->reason), "fork %s: "
			    "its RAM image: %s", c->ids[i], strerror(errno));
			continue;
		}
		if (vmm_sandbox_create_fork(c->m, &spec, src, c->layer,
		    stream, c->fork_cb, c->fork_arg, &forks[made], err,
		    sizeof(err)) < 0) {
			snprintf(src->reason, sizeof(src->reason), "fork %s: %s",
			    c->ids[i], err);
			if (fd >= 0)
				close(fd);
			continue;
		}
		/* its VMM starts from the loop later (after its disk's
		 * layer is made), and maps the image then */
		if (fd >= 0) {
			forks[made]->ram_image = fd;
			forks[made]->ram_shared = 1;
			fd = -1;
		}
		made++;
	}
	if (c->cb != NULL)
		c->cb(src, made > 0, made == c->n ? reason : src->reason, dur,
		    forks, made, c->arg);
	free(forks);
}

/*
 * A jailed qemu's capture is split (image.c) as it is written, the split
 * following the file QEMU writes to its end: the forks map its RAM as an
 * image and load the devices' part. A split that fails costs its time
 * only: the forks load the stream whole. (Feeding the split through a
 * pipe instead was tried: QEMU waited on the pipe, the capture took
 * twice as long.)
 */
static int
split_here(const struct vmm *m)
{
	return m->cfg.jail && strcmp(m->be->name, "qemu") == 0;
}

static void
fork_finish(struct fork_ctx *c)
{
	struct vmm_sandbox *src = vmm_sandbox_find(c->m, c->src_id);
	char reason[VMM_ERRLEN * 3];

	if (src == NULL) {
		/* the source went meanwhile: no forks */
	} else if (!c->cap_ok)
		c->cb(src, 0, c->cap_reason, c->cap_dur, NULL, 0, c->arg);
	else if (c->img >= 0) {
		snprintf(reason, sizeof(reason), "%s; its RAM an image the "
		    "forks share (split in %llu ms)", c->cap_reason,
		    (unsigned long long)c->split_ms);
		make_forks(src, c, c->dev, c->img, reason, c->cap_dur);
	} else {
		snprintf(reason, sizeof(reason), "%s%s%s%s", c->cap_reason,
		    c->split_why[0] ? "; the forks load its RAM (no image: " :
		    "", c->split_why, c->split_why[0] ? ")" : "");
		make_forks(src, c, c->stream, -1, reason, c->cap_dur);
	}
	/* each fork holds its own link */
	if (!c->keep_stream)
		(void)unlink(c->stream);
	if (c->dev[0] != '\0')
		(void)unlink(c->dev);
	ctx_free(c);
}

/* The split's end; a followed one's waits for the capture's (which
 * may have failed it: it is cancelled then). */
static void
fork_split_done(void *arg, int img, const char *why, uint64_t ms)
{
	struct fork_ctx *c = arg;

	c->split = NULL;
	c->img = img;
	c->split_ms = c->followed && c->cap_done ? vmm_now_ms() - c->cap_end :
	    ms;
	snprintf(c->split_why, sizeof(c->split_why), "%s", why);
	if (c->followed && !c->cap_done)
		return;			/* captured() goes on */
	fork_finish(c);
}

/* 0 when a split of the stream is under way (follow: as the capture
 * writes it), -1 with c->split_why. The devices' stream goes in .layers
 * (named .state: a restart's sweep of .layers takes one nobody links). */
static int
fork_split(struct fork_ctx *c, unsigned mem_mib, int follow)
{
	static unsigned seq;

	snprintf(c->dev, sizeof(c->dev), "%s/.layers/%s.%llx.%u.dev.state",
	    c->m->state_dir, c->src_id, (unsigned long long)vmm_wall_ms(),
	    seq++);
	if ((c->split = vmm_split_start(c->m, c->stream, c->dev, mem_mib,
	    follow, -1, fork_split_done, c, c->split_why,
	    sizeof(c->split_why))) == NULL) {
		c->dev[0] = '\0';
		return -1;
	}
	c->followed = follow;
	return 0;
}

static void
captured(struct vmm_sandbox *src, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	struct fork_ctx *c = arg;

	(void)op;
	c->cap_ok = ok;
	c->cap_dur = dur;
	c->cap_done = 1;
	c->cap_end = vmm_now_ms();
	snprintf(c->cap_reason, sizeof(c->cap_reason), "%s", reason);
	if (!ok) {
		/* the frozen name stays only if the source now stands on it */
		if (strcmp(src->disk, c->old_disk) == 0)
			(void)unlink(c->layer);
		if (c->split != NULL) {
			vmm_split_cancel(c->split);
			c->split = NULL;
		}
	} else {
		/* frozen: nobody's VMM writes it again (the source's qemu
		 * reopened it read-only); the source's own name for it goes
		 * (its chain names the layer in .layers), so the layer goes
		 * once no chain or checkpoint needs it, merges included */
		(void)chown(c->layer, 0, 0);
		(void)chmod(c->layer, 0444);
		if (strcmp(src->disk, c->old_disk) != 0)
			(void)unlink(c->old_disk);
		if (c->split != NULL) {
			/* followed: its stream complete now */
			vmm_split_written(c->split);
			return;		/* fork_split_done goes on */
		}
		if (!c->followed && split_here(c->m) &&
		    fork_split(c, src->mem_mib, 0) == 0)
			return;		/* fork_split_done goes on */
	}
	fork_finish(c);
}

/*
 * A suspended sandbox is already a captured state: its snapshot (which
 * carries its RAM: snap_ram; or its devices' part and its RAM file,
 * snap_dev) and its disk. Nothing runs: its standby VMM (which holds the
 * disk) is ended, a new top made over the disk's (now frozen as layer)
 * with qemu-img (watched from the loop), and the snapshot linked as
 * stream (snap_dev: the two joined into one by a child, image.c). It stays suspended; the operation's end
 * (vmm_backend_done) brings a standby back and answers the caller as a
 * capture's does.
 */
struct freeze_ctx {
	struct vmm *m;
	char id[VMM_ID_MAX + 1];
	char layer[PATH_MAX], stream[PATH_MAX], top[PATH_MAX];
	struct vmm_child *watch;
};

/* The freeze's end: ok, or why not (its new top and stream go). */
static void
freeze_end(struct freeze_ctx *f, struct vmm_sandbox *sb, const char *why)
{
	if (why == NULL) {
		snprintf(sb->disk, sizeof(sb->disk), "%s", f->top);
		sb->layer_gen++;
		sb->layered = 1;
		vmm_meta_save(sb);
		(void)chown(f->layer, 0, 0);
		(void)chmod(f->layer, 0444);
		free(f);
		vmm_backend_done(sb, 1, VMM_SUSPENDED,
		    "the sandbox stayed suspended");
		return;
	}
	(void)unlink(f->top);
	(void)unlink(f->stream);
	free(f);
	vmm_backend_done(sb, 0, VMM_SUSPENDED, why);
}

/* A snapshot split by its standby (snap_dev): its devices' part and RAM
 * file joined into the stream the forks or the checkpoint take. */
static void
freeze_joined(void *arg, int img, const char *why, uint64_t ms)
{
	struct freeze_ctx *f = arg;
	struct vmm_sandbox *sb;
	char w[VMM_ERRLEN];

	(void)img;
	(void)ms;
	if ((sb = vmm_sandbox_find(f->m, f->id)) == NULL) {
		(void)unlink(f->top);
		(void)unlink(f->stream);
		free(f);
		return;
	}
	snprintf(w, sizeof(w), "the suspended sandbox's snapshot and RAM "
	    "file, joined: %s", why);
	freeze_end(f, sb, why[0] == '\0' ? NULL : w);
}

static void
freeze_done(pid_t pid, int status, void *arg)
{
	struct freeze_ctx *f = arg;
	struct vmm_sandbox *sb;
	char snap[PATH_MAX], mem[PATH_MAX], why[VMM_ERRLEN], st[64];

	(void)pid;
	if ((sb = vmm_sandbox_find(f->m, f->id)) == NULL) {
		(void)unlink(f->top);
		free(f);
		return;
	}
	(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
	(void)vmm_path(sb, "mem", mem, sizeof(mem));
	if (status != 0) {
		vmm_status_text(status, st, sizeof(st));
		snprintf(why, sizeof(why), "the suspended sandbox's new top: "
		    "qemu-img create %s", st);
	} else if (sb->uid != 0 && chown(f->top, sb->uid, sb->gid) < 0)
		snprintf(why, sizeof(why), "the suspended sandbox's new top: "
		    "%s", strerror(errno));
	else if (sb->snap_dev) {
		if (vmm_join_start(sb->m, snap, mem, f->stream, sb->mem_mib,
		    freeze_joined, f, why, sizeof(why)) != NULL)
			return;
	} else if (link(snap, f->stream) < 0)
		snprintf(why, sizeof(why), "the suspended sandbox's "
		    "snapshot: %s", strerror(errno));
	else
		why[0] = '\0';
	freeze_end(f, sb, why[0] == '\0' ? NULL : why);
}

int
vmm_freeze_suspended(struct vmm_sandbox *sb, const char *layer,
    const char *stream, char *err, size_t errlen)
{
	struct freeze_ctx *f;
	char size[32], logp[PATH_MAX];
	char *argv[] = { "qemu-img", "create", "-q", "-u", "-f", "qcow2", "-F",
	    "qcow2", "-b", NULL, NULL, size, NULL };
	pid_t pid;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->m = sb->m;
	snprintf(f->id, sizeof(f->id), "%s", sb->id);
	snprintf(f->layer, sizeof(f->layer), "%s", layer);
	snprintf(f->stream, sizeof(f->stream), "%s", stream);
	snprintf(f->top, sizeof(f->top), "%s/disk.%u.qcow2", sb->jdir,
	    sb->layer_gen + 1);
	argv[9] = f->layer;
	argv[10] = f->top;
	snprintf(size, sizeof(size), "%uM", sb->disk_mib);
	(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
	sb->m->be->release(sb);		/* its standby goes */
	(void)unlink(f->top);
	if ((pid = vmm_spawn(argv, logp, 0, 0, err, errlen)) < 0) {
		free(f);
		return -EIO;
	}
	if ((f->watch = vmm_child_watch(sb->m->base, pid, freeze_done, f, err,
	    errlen)) == NULL) {
		(void)kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		(void)unlink(f->top);
		free(f);
		return -EIO;
	}
	return 0;
}

/* new ids for a fork or a create --from: each valid, none taken, none
 * twice */
static int
ids_check(struct vmm *m, const char *const *ids, size_t n, char *err,
    size_t errlen)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (!vmm_id_valid(ids[i])) {
			snprintf(err, errlen, "bad sandbox id '%s'", ids[i]);
			return -EINVAL;
		}
		if (vmm_sandbox_find(m, ids[i]) != NULL) {
			snprintf(err, errlen, "sandbox %s exists", ids[i]);
			return -EEXIST;
		}
		for (k = 0; k < i; k++)
			if (strcmp(ids[k], ids[i]) == 0) {
				snprintf(err, errlen, "id %s given twice", ids[i]);
				return -EINVAL;
			}
	}
	return 0;
}

int
vmm_sandbox_fork(struct vmm_sandbox *src, const char *const *ids, size_t n,
    vmm_fork_cb cb, void *arg, vmm_done_cb fork_cb, void *fork_arg,
    char *err, size_t errlen)
{
	struct vmm *m = src->m;
	struct fork_ctx *c;
	char dir[PATH_MAX];
	size_t i;
	int rc;

	if (m->be->capture == NULL || !src->tpl.root_overlay ||
	    src->tpl.agent == NULL) {
		snprintf(err, errlen, "sandbox %s cannot be forked: that needs "
		    "the qemu backend and a template with a root overlay and a "
		    "guest agent", src->id);
		return -ENOTSUP;
	}
	if (n == 0 || n > VMM_FORK_MAX) {
		snprintf(err, errlen, "fork: 1 to %d new ids, not %zu",
		    VMM_FORK_MAX, n);
		return -EINVAL;
	}
	if (src->busy) {
		snprintf(err, errlen, "sandbox %s: %s in progress", src->id,
		    vmm_op_name(src->op));
		return -EBUSY;
	}
	if (src->state == VMM_SUSPENDED && !src->snap_ram && !src->snap_dev) {
		snprintf(err, errlen, "sandbox %s is suspended with its RAM in "
		    "a file of its own (its snapshot holds only device "
		    "state): resume it to fork it",
		    src->id);
		return -EPERM;
	}
	if (src->state != VMM_RUNNING && src->state != VMM_PAUSED &&
	    src->state != VMM_SUSPENDED) {
		snprintf(err, errlen, "sandbox %s is %s: only a running, "
		    "paused or suspended sandbox can be forked", src->id,
		    vmm_state_name(src->state));
		return -EPERM;
	}
	if ((rc = ids_check(m, ids, n, err, errlen)) < 0)
		return rc;
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->ids = calloc(n, sizeof(*c->ids))) == NULL) {
		free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->m = m;
	c->n = n;
	c->img = -1;
	c->mem_mib = src->mem_mib;
	c->vcpus = src->vcpus;
	c->disk_mib = src->disk_mib;
	c->cb = cb;
	c->arg = arg;
	c->fork_cb = fork_cb;
	c->fork_arg = fork_arg;
	for (i = 0; i < n; i++)
		snprintf(c->ids[i], sizeof(c->ids[i]), "%s", ids[i]);
	snprintf(c->src_id, sizeof(c->src_id), "%s", src->id);
	snprintf(c->old_disk, sizeof(c->old_disk), "%s", src->disk);
	snprintf(dir, sizeof(dir), "%s/.layers", m->state_dir);
	if (mkdir(dir, 0711) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		ctx_free(c);
		return rc;
	}
	snprintf(c->layer, sizeof(c->layer), "%s/%s.%llx.qcow2", dir, src->id,
	    (unsigned long long)vmm_wall_ms());
	snprintf(c->stream, sizeof(c->stream), "%.*s.state",
	    (int)(strlen(c->layer) - 6), c->layer);
	if (link(src->disk, c->layer) < 0) {
		rc = -errno;
		snprintf(err, errlen, "fork: %s: %s", c->layer, strerror(errno));
		ctx_free(c);
		return rc;
	}
	/* A capture's stream is split as QEMU writes it (a suspended
	 * source's, already there, once it is linked) */
	if (split_here(m) && src->state != VMM_SUSPENDED)
		(void)fork_split(c, src->mem_mib, 1);
	if ((rc = vmm_fork_begin(src, VMM_OP_FORK, c->layer, c->stream,
	    captured, c, err, errlen)) < 0) {
		if (c->split != NULL)
			vmm_split_cancel(c->split);
		if (c->dev[0] != '\0')
			(void)unlink(c->dev);
		(void)unlink(c->layer);
		ctx_free(c);
		return rc;
	}
	return 0;
}

/* ---- checkpoints ----
 *
 * <state>/.checkpoints/<id>/<name>.qcow2	a link of the frozen layer
 * <state>/.checkpoints/<id>/<name>.state	the captured RAM and devices
 * <state>/.checkpoints/<id>/<name>.conf	layer=<its .layers path>,
 *						created_ms, sizes
 * The layer's link keeps it (layers.c frees a layer with one link that
 * no chain names); chains name it by its .layers path, so a sandbox made
 * from the checkpoint stands on it whether or not the checkpoint stays.
 */

struct ckpt_conf {
	char layer[PATH_MAX];
	uint64_t created_ms;
	unsigned mem_mib, vcpus, disk_mib;
};

int
vmm_checkpoint_dir(const struct vmm *m, const char *id, char *out,
    size_t outlen)
{
	if (!vmm_id_valid(id) || snprintf(out, outlen, "%s/.checkpoints/%s",
	    m->state_dir, id) >= (int)outlen)
		return -1;
	return 0;
}

static int
ckpt_path(const struct vmm *m, const char *id, const char *name,
    const char *ext, char *out, size_t outlen)
{
	char dir[PATH_MAX];

	if (vmm_checkpoint_dir(m, id, dir, sizeof(dir)) < 0 ||
	    snprintf(out, outlen, "%s/%s.%s", dir, name, ext) >= (int)outlen)
		return -1;
	return 0;
}

static int
ckpt_read(const struct vmm *m, const char *id, const char *name,
    struct ckpt_conf *cc)
{
	char p[PATH_MAX], line[PATH_MAX + 32], *v;
	FILE *f;

	memset(cc, 0, sizeof(*cc));
	if (!vmm_id_valid(name) || ckpt_path(m, id, name, "conf", p,
	    sizeof(p)) < 0 || (f = fopen(p, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((v = strchr(line, '=')) == NULL)
			continue;
		*v++ = '\0';
		if (strcmp(line, "layer") == 0)
			snprintf(cc->layer, sizeof(cc->layer), "%s", v);
		else if (strcmp(line, "created_ms") == 0)
			cc->created_ms = strtoull(v, NULL, 10);
		else if (strcmp(line, "mem_mib") == 0)
			cc->mem_mib = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(line, "vcpus") == 0)
			cc->vcpus = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(line, "disk_mib") == 0)
			cc->disk_mib = (unsigned)strtoul(v, NULL, 10);
	}
	fclose(f);
	return cc->layer[0] != '\0' ? 0 : -1;
}

struct ckpt_ctx {
	char name[VMM_ID_MAX + 1];
	char layer[PATH_MAX], stream[PATH_MAX], old_disk[PATH_MAX];
	vmm_done_cb cb;
	void *arg;
};

/* The capture is done: keep it under the name (conf last: a checkpoint
 * without its conf is not one, and the next take or rm clears it). */
static void
ckpt_captured(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct ckpt_ctx *c = arg;
	struct vmm *m = sb->m;
	char q[PATH_MAX], s[PATH_MAX], cf[PATH_MAX], tmp[PATH_MAX + 8];
	char why[VMM_ERRLEN];
	FILE *f;

	if (!ok) {
		if (strcmp(sb->disk, c->old_disk) == 0)
			(void)unlink(c->layer);
		(void)unlink(c->stream);
		c->cb(sb, op, 0, reason, dur, c->arg);
		free(c);
		return;
	}
	(void)chown(c->layer, 0, 0);
	(void)chmod(c->layer, 0444);
	if (strcmp(sb->disk, c->old_disk) != 0)
		(void)unlink(c->old_disk);	/* as a fork's capture */
	(void)ckpt_path(m, sb->id, c->name, "qcow2", q, sizeof(q));
	(void)ckpt_path(m, sb->id, c->name, "state", s, sizeof(s));
	(void)ckpt_path(m, sb->id, c->name, "conf", cf, sizeof(cf));
	snprintf(tmp, sizeof(tmp), "%s.new", cf);
	if (link(c->layer, q) < 0 || link(c->stream, s) < 0 ||
	    (f = fopen(tmp, "we")) == NULL) {
		snprintf(why, sizeof(why), "checkpoint %s: %s", c->name,
		    strerror(errno));
		goto fail;
	}
	(void)chmod(s, 0400);
	fprintf(f, "layer=%s\ncreated_ms=%llu\nmem_mib=%u\nvcpus=%u\n"
	    "disk_mib=%u\n", c->layer, (unsigned long long)vmm_wall_ms(),
	    sb->mem_mib, sb->vcpus, sb->disk_mib);
	if (fflush(f) != 0 || fsync(fileno(f)) < 0 || fclose(f) != 0 ||
	    rename(tmp, cf) < 0) {
		snprintf(why, sizeof(why), "checkpoint %s: %s: %s", c->name,
		    cf, strerror(errno));
		(void)unlink(tmp);
		goto fail;
	}
	(void)unlink(c->stream);	/* its checkpoint's name holds it */
	c->cb(sb, op, 1, reason, dur, c->arg);
	free(c);
	return;
fail:
	(void)unlink(q);
	(void)unlink(s);
	(void)unlink(c->stream);
	vmm_layers_gc(m);
	c->cb(sb, op, 0, why, dur, c->arg);
	free(c);
}

/* Parts of a checkpoint without a conf: a take cut short (berthd died
 * between the links and the conf). */
static void
ckpt_sweep(struct vmm *m, const char *id)
{
	char dir[PATH_MAX], p[PATH_MAX + 300], nm[VMM_ID_MAX + 8];
	struct ckpt_conf cc;
	struct dirent *de;
	DIR *d;

	if (vmm_checkpoint_dir(m, id, dir, sizeof(dir)) < 0 ||
	    (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		const char *dot = strrchr(de->d_name, '.');

		if (de->d_name[0] == '.' || dot == NULL ||
		    strcmp(dot, ".conf") == 0 ||
		    (size_t)(dot - de->d_name) >= sizeof(nm))
			continue;
		snprintf(nm, sizeof(nm), "%.*s", (int)(dot - de->d_name),
		    de->d_name);
		if (ckpt_read(m, id, nm, &cc) == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		(void)unlink(p);
	}
	closedir(d);
}

/* What is listed of checkpoint name: 0, or -1 (none readable). */
static int
ckpt_describe(struct vmm *m, const char *id, const char *name,
    struct vmm_checkpoint *t)
{
	struct ckpt_conf cc;
	struct stat st;
	char p[PATH_MAX];

	memset(t, 0, sizeof(*t));
	if (ckpt_read(m, id, name, &cc) < 0)
		return -1;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->created_ms = cc.created_ms;
	t->mem_mib = cc.mem_mib;
	t->vcpus = cc.vcpus;
	t->disk_mib = cc.disk_mib;
	if (ckpt_path(m, id, name, "qcow2", p, sizeof(p)) == 0 &&
	    stat(p, &st) == 0)
		t->bytes += (uint64_t)st.st_blocks * 512;
	if (ckpt_path(m, id, name, "state", p, sizeof(p)) == 0 &&
	    stat(p, &st) == 0)
		t->bytes += (uint64_t)st.st_blocks * 512;
	return 0;
}

int
vmm_checkpoint_get(struct vmm *m, const char *id, const char *name,
    struct vmm_checkpoint *out, char *err, size_t errlen)
{
	if (!vmm_id_valid(id) || !vmm_id_valid(name)) {
		snprintf(err, errlen, "bad sandbox id '%s' or checkpoint "
		    "name '%s'", id, name);
		return -EINVAL;
	}
	if (ckpt_describe(m, id, name, out) < 0) {
		snprintf(err, errlen, "sandbox %s has no checkpoint '%s'", id,
		    name);
		return -ENOENT;
	}
	return 0;
}

int
vmm_checkpoint_list(struct vmm *m, const char *id, struct vmm_checkpoint *out,
    size_t max, char *err, size_t errlen)
{
	char dir[PATH_MAX], nm[VMM_ID_MAX + 1];
	struct vmm_checkpoint *all = NULL, *nv, t;
	struct dirent *de;
	size_t n = 0, cap = 0, i, k;
	DIR *d;

	if (vmm_checkpoint_dir(m, id, dir, sizeof(dir)) < 0) {
		snprintf(err, errlen, "bad sandbox id '%s'", id);
		return -EINVAL;
	}
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : (snprintf(err, errlen, "%s: %s",
		    dir, strerror(errno)), -errno);
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l < 6 || strcmp(de->d_name + l - 5, ".conf") != 0 ||
		    l - 5 > VMM_ID_MAX)
			continue;
		snprintf(nm, sizeof(nm), "%.*s", (int)(l - 5), de->d_name);
		if (ckpt_describe(m, id, nm, &t) < 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((nv = realloc(all, cap * sizeof(*nv))) == NULL) {
				closedir(d);
				free(all);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			all = nv;
		}
		all[n++] = t;
	}
	closedir(d);
	/* oldest first (insertion sort: a handful) */
	for (i = 1; i < n; i++)
		for (k = i; k > 0 && (all[k - 1].created_ms > all[k].created_ms ||
		    (all[k - 1].created_ms == all[k].created_ms &&
		    strcmp(all[k - 1].name, all[k].name) > 0)); k--) {
			t = all[k];
			all[k] = all[k - 1];
			all[k - 1] = t;
		}
	for (i = 0; i < n && i < max; i++)
		out[i] = all[i];
	free(all);
	return (int)n;
}

int
vmm_checkpoint_take(struct vmm_sandbox *sb, const char *name, vmm_done_cb cb,
    void *arg, char *err, size_t errlen)
{
	struct vmm *m = sb->m;
	struct ckpt_ctx *c;
	struct ckpt_conf cc;
	char dir[PATH_MAX], ld[PATH_MAX];
	int n, rc;

	if (m->be->capture == NULL || !sb->tpl.root_overlay ||
	    sb->tpl.agent == NULL) {
		snprintf(err, errlen, "sandbox %s cannot be checkpointed: that "
		    "needs the qemu backend and a template with a root overlay "
		    "and a guest agent", sb->id);
		return -ENOTSUP;
	}
	if (!vmm_id_valid(name)) {
		snprintf(err, errlen, "bad checkpoint name '%s': 1-%d of a-z, "
		    "0-9 and '-' (not first)", name, VMM_ID_MAX);
		return -EINVAL;
	}
	if (sb->busy) {
		snprintf(err, errlen, "sandbox %s: %s in progress", sb->id,
		    vmm_op_name(sb->op));
		return -EBUSY;
	}
	if (sb->state == VMM_SUSPENDED && !sb->snap_ram && !sb->snap_dev) {
		snprintf(err, errlen, "sandbox %s is suspended with its RAM in "
		    "a file of its own (its snapshot holds only device "
		    "state): resume it to checkpoint it", sb->id);
		return -EPERM;
	}
	if (sb->state != VMM_RUNNING && sb->state != VMM_PAUSED &&
	    sb->state != VMM_SUSPENDED) {
		snprintf(err, errlen, "sandbox %s is %s: only a running, paused "
		    "or suspended sandbox can be checkpointed", sb->id,
		    vmm_state_name(sb->state));
		return -EPERM;
	}
	if (ckpt_read(m, sb->id, name, &cc) == 0) {
		snprintf(err, errlen, "sandbox %s has a checkpoint %s", sb->id,
		    name);
		return -EEXIST;
	}
	ckpt_sweep(m, sb->id);
	if ((n = vmm_checkpoint_list(m, sb->id, NULL, 0, err, errlen)) < 0)
		return n;
	if ((unsigned)n >= m->cfg.max_checkpoints) {
		snprintf(err, errlen, "sandbox %s has %d checkpoints, the most "
		    "vm_max_checkpoints allows: remove one first", sb->id, n);
		return -EDQUOT;
	}
	snprintf(dir, sizeof(dir), "%s/.checkpoints", m->state_dir);
	snprintf(ld, sizeof(ld), "%s/.layers", m->state_dir);
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(ld, 0711) < 0 && errno != EEXIST) ||
	    vmm_checkpoint_dir(m, sb->id, dir, sizeof(dir)) < 0 ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return rc;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->cb = cb;
	c->arg = arg;
	snprintf(c->old_disk, sizeof(c->old_disk), "%s", sb->disk);
	snprintf(c->layer, sizeof(c->layer), "%s/%s.%llx.qcow2", ld, sb->id,
	    (unsigned long long)vmm_wall_ms());
	snprintf(c->stream, sizeof(c->stream), "%.*s.state",
	    (int)(strlen(c->layer) - 6), c->layer);
	if (link(sb->disk, c->layer) < 0) {
		rc = -errno;
		snprintf(err, errlen, "checkpoint: %s: %s", c->layer,
		    strerror(errno));
		free(c);
		return rc;
	}
	if ((rc = vmm_fork_begin(sb, VMM_OP_CHECKPOINT, c->layer, c->stream,
	    ckpt_captured, c, err, errlen)) < 0) {
		(void)unlink(c->layer);
		free(c);
		return rc;
	}
	return 0;
}

int
vmm_checkpoint_rm(struct vmm *m, const char *id, const char *name, char *err,
    size_t errlen)
{
	struct ckpt_conf cc;
	char p[PATH_MAX];

	if (ckpt_read(m, id, name, &cc) < 0) {
		snprintf(err, errlen, "sandbox %s has no checkpoint %s", id,
		    name);
		return -ENOENT;
	}
	/* the conf first: from then on it is not a checkpoint */
	(void)ckpt_path(m, id, name, "conf", p, sizeof(p));
	if (unlink(p) < 0) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		return -errno;
	}
	ckpt_sweep(m, id);
	vmm_layers_gc(m);
	return 0;
}

int
vmm_checkpoint_fork(struct vmm_sandbox *src, const char *name,
    const char *const *ids, size_t n, vmm_done_cb cb, void *arg, char *err,
    size_t errlen)
{
	struct vmm *m = src->m;
	struct vmm_sandbox_spec spec;
	struct vmm_sandbox *made[VMM_FORK_MAX];
	struct fork_ctx *c = NULL;
	struct ckpt_conf cc;
	char st[PATH_MAX], e2[VMM_ERRLEN];
	size_t i, k;
	int rc;

	if (ckpt_read(m, src->id, name, &cc) < 0) {
		snprintf(err, errlen, "sandbox %s has no checkpoint %s", src->id,
		    name);
		return -ENOENT;
	}
	if (n == 0 || n > VMM_FORK_MAX) {
		snprintf(err, errlen, "1 to %d new ids, not %zu", VMM_FORK_MAX,
		    n);
		return -EINVAL;
	}
	if ((rc = ids_check(m, ids, n, err, errlen)) < 0)
		return rc;
	(void)ckpt_path(m, src->id, name, "state", st, sizeof(st));
	/* a jailed qemu's: the checkpoint's stream split first, the forks
	 * made over its image once it is (as a fork's capture) */
	if (split_here(m) && (c = calloc(1, sizeof(*c))) != NULL &&
	    (c->ids = calloc(n, sizeof(*c->ids))) != NULL) {
		c->m = m;
		c->n = n;
		c->img = -1;
		c->cap_ok = 1;
		c->keep_stream = 1;
		c->mem_mib = cc.mem_mib ? cc.mem_mib : src->mem_mib;
		c->vcpus = cc.vcpus ? cc.vcpus : src->vcpus;
		c->disk_mib = cc.disk_mib ? cc.disk_mib : src->disk_mib;
		c->fork_cb = cb;
		c->fork_arg = arg;
		for (i = 0; i < n; i++)
			snprintf(c->ids[i], sizeof(c->ids[i]), "%s", ids[i]);
		snprintf(c->src_id, sizeof(c->src_id), "%s", src->id);
		snprintf(c->layer, sizeof(c->layer), "%s", cc.layer);
		snprintf(c->stream, sizeof(c->stream), "%s", st);
		snprintf(c->cap_reason, sizeof(c->cap_reason), "from its "
		    "checkpoint %s", name);
		if (fork_split(c, c->mem_mib, 0) == 0)
			return 0;	/* fork_split_done makes them */
	}
	if (c != NULL) {
		free(c->ids);
		free(c);
	}
	for (i = 0; i < n; i++) {
		memset(&spec, 0, sizeof(spec));
		spec.id = ids[i];
		spec.tpl = &src->tpl;
		spec.mem_mib = cc.mem_mib ? cc.mem_mib : src->mem_mib;
		spec.vcpus = cc.vcpus ? cc.vcpus : src->vcpus;
		spec.disk_mib = cc.disk_mib ? cc.disk_mib : src->disk_mib;
		spec.boot = 1;
		if ((rc = vmm_sandbox_create_fork(m, &spec, src, cc.layer, st,
		    cb, arg, &made[i], err, errlen)) < 0) {
			/* all or none: the ones made go again */
			for (k = 0; k < i; k++)
				(void)vmm_sandbox_delete(made[k], NULL, NULL, e2,
				    sizeof(e2));
			return rc;
		}
	}
	return 0;
}

/* ---- restore in place ---- */

struct rst_ctx {
	struct vmm *m;
	char id[VMM_ID_MAX + 1];
	char name[VMM_ID_MAX + 1];
	char top[PATH_MAX];
	struct ckpt_conf cc;
	vmm_done_cb cb;
	void *arg;
	struct vmm_child *watch;
	uint64_t t0;
	int img;		/* the checkpoint's RAM image (split), or -1 */
	char dev[PATH_MAX];	/* ... and its devices' stream */
};

static void
rst_free(struct rst_ctx *c)
{
	if (c->img >= 0) {
		close(c->img);
		(void)unlink(c->dev);
	}
	free(c);
}

static void
rst_fail(struct vmm_sandbox *sb, struct rst_ctx *c, const char *why)
{
	c->cb(sb, VMM_OP_RESTORE, 0, why, vmm_now_ms() - c->t0, c->arg);
	rst_free(c);
}

/* The new top is made: the sandbox stands on it, its state is the
 * checkpoint's; then the backend restores it. */
static void
rst_imgdone(pid_t pid, int status, void *arg)
{
	struct rst_ctx *c = arg;
	struct vmm_sandbox *sb;
	char why[VMM_ERRLEN], s[PATH_MAX], sd[PATH_MAX], st[PATH_MAX], t[128];
	char old[PATH_MAX];

	(void)pid;
	c->watch = NULL;
	if ((sb = vmm_sandbox_find(c->m, c->id)) == NULL) {
		(void)unlink(c->top);
		rst_free(c);		/* deleted meanwhile: its cb ran */
		return;
	}
	if (status == 0 && sb->busy) {
		(void)unlink(c->top);
		snprintf(why, sizeof(why), "restore: %s began meanwhile",
		    vmm_op_name(sb->op));
		rst_fail(sb, c, why);
		return;
	}
	if (status != 0) {
		vmm_status_text(status, t, sizeof(t));
		snprintf(why, sizeof(why), "restore: qemu-img create of the new "
		    "top %s", t);
		(void)unlink(c->top);
		rst_fail(sb, c, why);
		return;
	}
	if (c->img >= 0)
		snprintf(s, sizeof(s), "%s", c->dev);
	else
		(void)ckpt_path(c->m, c->id, c->name, "state", s, sizeof(s));
	(void)vmm_path(sb, "snap", sd, sizeof(sd));
	(void)vmm_path(sb, "snap/state", st, sizeof(st));
	(void)unlink(st);
	if ((sb->uid != 0 && chown(c->top, sb->uid, sb->gid) < 0) ||
	    (mkdir(sd, sb->jailed ? 0700 : 0750) < 0 && errno != EEXIST) ||
	    link(s, st) < 0) {
		snprintf(why, sizeof(why), "restore: %s", strerror(errno));
		(void)unlink(c->top);
		rst_fail(sb, c, why);
		return;
	}
	/* From here the sandbox is the checkpoint: its old top goes (no
	 * one stands on a sandbox's own top: a capture froze any other). */
	snprintf(old, sizeof(old), "%s", sb->disk);
	snprintf(sb->disk, sizeof(sb->disk), "%s", c->top);
	sb->layer_gen++;
	sb->layered = 1;
	sb->snap_ram = 1;
	sb->snap_dev = 0;
	/* its RAM: the image split from the checkpoint, mapped as a
	 * fork's; else loaded from the checkpoint's stream */
	sb->ram_shared = c->img >= 0;
	if (sb->ram_image >= 0)
		close(sb->ram_image);
	sb->ram_image = c->img;
	if (c->img >= 0) {
		(void)unlink(c->dev);	/* snap/state links it */
		c->img = -1;
	}
	if (strcmp(old, c->top) != 0)
		(void)unlink(old);
	snprintf(sb->restoring, sizeof(sb->restoring), "%s", c->name);
	vmm_meta_save(sb);
	vmm_layers_gc(c->m);
	if (vmm_restore_begin(sb, c->cb, c->arg, why, sizeof(why)) < 0) {
		rst_fail(sb, c, why);
		return;
	}
	free(c);
}

/* The new top over the checkpoint's layer (rst_imgdone goes on). */
static void
rst_mktop(struct vmm_sandbox *sb, struct rst_ctx *c)
{
	char why[VMM_ERRLEN], size[32], logp[PATH_MAX];
	char *argv[] = { "qemu-img", "create", "-q", "-u", "-f", "qcow2", "-F",
	    "qcow2", "-b", c->cc.layer, c->top, size, NULL };
	pid_t pid;

	snprintf(c->top, sizeof(c->top), "%s/disk.%u.qcow2", sb->jdir,
	    sb->layer_gen + 1);
	(void)unlink(c->top);
	snprintf(size, sizeof(size), "%uM", sb->disk_mib);
	(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
	if ((pid = vmm_spawn(argv, logp, 0, 0, why, sizeof(why))) < 0 ||
	    (c->watch = vmm_child_watch(sb->m->base, pid, rst_imgdone, c, why,
	    sizeof(why))) == NULL) {
		rst_fail(sb, c, why);
		return;
	}
}

static void
rst_split_done(void *arg, int img, const char *why, uint64_t ms)
{
	struct rst_ctx *c = arg;
	struct vmm_sandbox *sb;

	(void)why;		/* no image: the stream is loaded whole */
	(void)ms;
	c->img = img;
	if (img < 0)
		(void)unlink(c->dev);
	if ((sb = vmm_sandbox_find(c->m, c->id)) == NULL) {
		rst_free(c);	/* deleted meanwhile: its cb ran */
		return;
	}
	rst_mktop(sb, c);
}

static void
rst_stopped(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct rst_ctx *c = arg;
	char why[VMM_ERRLEN], s[PATH_MAX], sd[PATH_MAX];

	(void)op;
	(void)dur;
	if (!ok) {
		snprintf(why, sizeof(why), "restore: stop: %s", reason);
		rst_fail(sb, c, why);
		return;
	}
	/* a jailed qemu maps the checkpoint's RAM as an image (split
	 * first, as a fork's capture is) instead of loading it */
	if (sb->jailed && strcmp(sb->m->be->name, "qemu") == 0) {
		(void)ckpt_path(c->m, c->id, c->name, "state", s, sizeof(s));
		(void)vmm_path(sb, "snap", sd, sizeof(sd));
		(void)vmm_path(sb, "snap/state.dev", c->dev, sizeof(c->dev));
		if ((mkdir(sd, 0700) == 0 || errno == EEXIST) &&
		    vmm_split_start(c->m, s, c->dev, sb->mem_mib, 0, -1,
		    rst_split_done, c, why, sizeof(why)) != NULL)
			return;
	}
	rst_mktop(sb, c);
}

int
vmm_checkpoint_restore(struct vmm_sandbox *sb, const char *name,
    vmm_done_cb cb, void *arg, char *err, size_t errlen)
{
	struct rst_ctx *c;
	int rc;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (ckpt_read(sb->m, sb->id, name, &c->cc) < 0) {
		free(c);
		snprintf(err, errlen, "sandbox %s has no checkpoint %s", sb->id,
		    name);
		return -ENOENT;
	}
	if (sb->busy || sb->state == VMM_CREATING) {
		free(c);
		snprintf(err, errlen, "sandbox %s: %s in progress", sb->id,
		    vmm_op_name(sb->busy ? sb->op : VMM_OP_CREATE));
		return -EBUSY;
	}
	/* it runs again after: within the caps (before anything is done) */
	if ((rc = vmm_cap_room(sb->m, sb, sb->id, "restore", err,
	    errlen)) < 0) {
		free(c);
		return rc;
	}
	c->m = sb->m;
	c->t0 = vmm_now_ms();
	c->img = -1;
	snprintf(c->id, sizeof(c->id), "%s", sb->id);
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->cb = cb;
	c->arg = arg;
	/* stop first (a stopped or failed one: the stop answers at once) */
	if ((rc = vmm_sandbox_stop(sb, rst_stopped, c, err, errlen)) < 0) {
		free(c);
		return rc;
	}
	return 0;
}
