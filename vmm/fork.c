/*
 * fork.c — a running (or paused) sandbox forked into new ones. The
 * source stops for the capture (qemu.c, QM_CAPTURE): its disk's top is
 * frozen (hard-linked as <state>/vms/.layers/<name>.qcow2, root's and
 * read-only once captured) and a new top goes over it; its RAM and
 * device state go to <state>/vms/.layers/<name>.state; it runs on.
 * Each fork is then created over the frozen layer, restores the stream
 * (a hard link of it as its snap/state: the RAM goes into a RAM file of
 * its own) and gets its own identity (ident.c) before anyone reaches it.
 * The stream's own name goes once every fork links it; a fork drops its
 * link once restored, so the file goes with the last one.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
};

static void
ctx_free(struct fork_ctx *c)
{
	free(c->ids);
	free(c);
}

static void
captured(struct vmm_sandbox *src, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	struct fork_ctx *c = arg;
	struct vmm_sandbox **forks;
	struct vmm_sandbox_spec spec;
	char err[VMM_ERRLEN];
	size_t i, made = 0;

	(void)op;
	if (!ok) {
		/* the frozen name stays only if the source now stands on it */
		if (strcmp(src->disk, c->old_disk) == 0)
			(void)unlink(c->layer);
		(void)unlink(c->stream);
		c->cb(src, 0, reason, dur, NULL, 0, c->arg);
		ctx_free(c);
		return;
	}
	/* frozen: nobody's VMM writes it again (the source's qemu reopened
	 * it read-only) */
	(void)chown(c->layer, 0, 0);
	(void)chmod(c->layer, 0444);
	if ((forks = calloc(c->n, sizeof(*forks))) == NULL) {
		(void)unlink(c->stream);
		c->cb(src, 0, "out of memory", dur, NULL, 0, c->arg);
		ctx_free(c);
		return;
	}
	for (i = 0; i < c->n; i++) {
		memset(&spec, 0, sizeof(spec));
		spec.id = c->ids[i];
		spec.tpl = &src->tpl;
		spec.mem_mib = src->mem_mib;
		spec.vcpus = src->vcpus;
		spec.disk_mib = src->disk_mib;
		spec.boot = 1;
		if (vmm_sandbox_create_fork(c->m, &spec, src, c->layer,
		    c->stream, c->fork_cb, c->fork_arg, &forks[made], err,
		    sizeof(err)) == 0)
			made++;
		else
			snprintf(src->reason, sizeof(src->reason), "fork %s: %s",
			    c->ids[i], err);
	}
	(void)unlink(c->stream);	/* each fork holds a link */
	c->cb(src, made > 0, made == c->n ? reason : src->reason, dur, forks, made,
	    c->arg);
	free(forks);
	ctx_free(c);
}

int
vmm_sandbox_fork(struct vmm_sandbox *src, const char *const *ids, size_t n,
    vmm_fork_cb cb, void *arg, vmm_done_cb fork_cb, void *fork_arg,
    char *err, size_t errlen)
{
	struct vmm *m = src->m;
	struct fork_ctx *c;
	char dir[PATH_MAX];
	size_t i, k;
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
	if (src->state != VMM_RUNNING && src->state != VMM_PAUSED) {
		snprintf(err, errlen, "sandbox %s is %s: only a running or "
		    "paused sandbox can be forked", src->id,
		    vmm_state_name(src->state));
		return -EPERM;
	}
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
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->ids = calloc(n, sizeof(*c->ids))) == NULL) {
		free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->m = m;
	c->n = n;
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
	if ((rc = vmm_fork_begin(src, c->layer, c->stream, captured, c, err,
	    errlen)) < 0) {
		(void)unlink(c->layer);
		ctx_free(c);
		return rc;
	}
	return 0;
}
