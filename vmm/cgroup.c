/*
 * cgroup.c — a control group per sandbox for its VMM: CPU (a quota from
 * its vCPUs and the ops share), memory (guest RAM plus the VMM's own
 * overhead), pids, and block I/O weight; and what it used, for /metrics.
 *
 * cgroup v2 where the host has it (/sys/fs/cgroup/cgroup.controllers),
 * else the v1 hierarchies of each controller (hosts that still mount
 * them, as these build machines do: v2's "unified" tree there has no
 * controllers). Groups are <root>/<cfg.cgroup>/<sandbox id>. The VMM
 * enters them itself, before exec (jail.c); a group is removed once its
 * VMM is gone.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"

#define CG_ROOT "/sys/fs/cgroup"

static const char *const v1_ctrls[] = { "cpu", "memory", "pids", "blkio",
    "cpuacct" };
#define NV1 (sizeof(v1_ctrls) / sizeof(v1_ctrls[0]))

/* 2: cgroup v2 alone; 1: v1 controllers; 0: none usable (no limits,
 * which the caller reports). */
int
vmm_cgroup_mode(void)
{
	static int mode = -1;
	char p[64];

	if (mode >= 0)
		return mode;
	if (access(CG_ROOT "/cgroup.controllers", R_OK) == 0)
		mode = 2;
	else {
		snprintf(p, sizeof(p), "%s/cpu/cgroup.procs", CG_ROOT);
		mode = access(p, W_OK) == 0 ? 1 : 0;
	}
	return mode;
}

static int
wr(const char *dir, const char *file, const char *val)
{
	char p[PATH_MAX];
	int fd, rc = 0;
	size_t n = strlen(val);

	if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		rc = -errno;
	close(fd);
	return rc;
}

static long long
rd(const char *dir, const char *file, const char *key)
{
	char p[PATH_MAX], buf[4096], *s;

	if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p) ||
	    vmm_read_small(p, buf, sizeof(buf)) < 0)
		return -1;
	if (key == NULL)
		return strtoll(buf, NULL, 10);
	for (s = buf; s != NULL && *s != '\0'; s = strchr(s, '\n'), s = s ? s + 1 : s)
		if (strncmp(s, key, strlen(key)) == 0 && s[strlen(key)] == ' ')
			return strtoll(s + strlen(key) + 1, NULL, 10);
	return -1;
}

static void
dir_of(const struct vmm_sandbox *sb, const char *ctrl, char *buf, size_t len)
{
	const char *name = sb->m->cfg.cgroup != NULL ? sb->m->cfg.cgroup :
	    "berth";
	/* a sandbox claimed from the ready pool keeps its group's name */
	const char *g = sb->cg_name[0] != '\0' ? sb->cg_name : sb->id;

	if (ctrl == NULL)
		snprintf(buf, len, "%s/%s/%s", CG_ROOT, name, g);
	else
		snprintf(buf, len, "%s/%s/%s/%s", CG_ROOT, ctrl, name, g);
}

/* mkdir of the group and its parent (the berth slice) */
static int
mk(const char *dir)
{
	char parent[PATH_MAX], *s;

	snprintf(parent, sizeof(parent), "%s", dir);
	if ((s = strrchr(parent, '/')) != NULL) {
		*s = '\0';
		if (mkdir(parent, 0755) < 0 && errno != EEXIST)
			return -errno;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int
vmm_cgroup_setup(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	const struct vmm_config *c = &sb->m->cfg;
	unsigned long long mem = ((unsigned long long)sb->mem_mib +
	    c->mem_overhead_mib) << 20;
	unsigned long long quota = (unsigned long long)sb->vcpus *
	    c->cpu_pct * 1000;	/* us per 100 ms period */
	char d[PATH_MAX], v[64];
	int mode = vmm_cgroup_mode(), rc, n = 0;
	size_t i;

	sb->ncgroups = 0;
	if (mode == 0 || !c->cgroups)
		return 0;
	if (mode == 2) {
		dir_of(sb, NULL, d, sizeof(d));
		/* the slice hands its children the controllers */
		snprintf(v, sizeof(v), "%s/%s", CG_ROOT, c->cgroup != NULL ?
		    c->cgroup : "berth");
		(void)mk(d);
		(void)wr(CG_ROOT, "cgroup.subtree_control", "+cpu +memory +pids +io");
		(void)wr(v, "cgroup.subtree_control", "+cpu +memory +pids +io");
		if ((rc = mk(d)) < 0)
			goto fail;
		snprintf(v, sizeof(v), "%llu 100000", quota);
		if ((rc = wr(d, "cpu.max", v)) < 0)
			goto fail;
		snprintf(v, sizeof(v), "%llu", mem);
		if ((rc = wr(d, "memory.max", v)) < 0)
			goto fail;
		(void)wr(d, "memory.swap.max", "0");
		snprintf(v, sizeof(v), "%u", c->pids_max);
		if ((rc = wr(d, "pids.max", v)) < 0)
			goto fail;
		(void)wr(d, "io.weight", "default 100");
		snprintf(sb->cgroups[n++], sizeof(sb->cgroups[0]),
		    "%s/cgroup.procs", d);
		sb->ncgroups = n;
		return 0;
	}
	for (i = 0; i < NV1; i++) {
		dir_of(sb, v1_ctrls[i], d, sizeof(d));
		if ((rc = mk(d)) < 0) {
			if (strcmp(v1_ctrls[i], "cpu") == 0 ||
			    strcmp(v1_ctrls[i], "memory") == 0)
				goto fail;
			continue;	/* pids, blkio, cpuacct: best effort */
		}
		if (strcmp(v1_ctrls[i], "cpu") == 0) {
			(void)wr(d, "cpu.cfs_period_us", "100000");
			snprintf(v, sizeof(v), "%llu", quota);
			if ((rc = wr(d, "cpu.cfs_quota_us", v)) < 0)
				goto fail;
		} else if (strcmp(v1_ctrls[i], "memory") == 0) {
			snprintf(v, sizeof(v), "%llu", mem);
			if ((rc = wr(d, "memory.limit_in_bytes", v)) < 0)
				goto fail;
			(void)wr(d, "memory.memsw.limit_in_bytes", v);
		} else if (strcmp(v1_ctrls[i], "pids") == 0) {
			snprintf(v, sizeof(v), "%u", c->pids_max);
			(void)wr(d, "pids.max", v);
		} else if (strcmp(v1_ctrls[i], "blkio") == 0) {
			(void)wr(d, "blkio.weight", "100");
		}
		if ((size_t)n < sizeof(sb->cgroups) / sizeof(sb->cgroups[0]))
			snprintf(sb->cgroups[n++], sizeof(sb->cgroups[0]),
			    "%s/cgroup.procs", d);
	}
	sb->ncgroups = n;
	return 0;
fail:
	snprintf(err, errlen, "cgroup %s: %s", d, strerror(-rc));
	sb->ncgroups = 0;
	return rc;
}

void
vmm_cgroup_remove(struct vmm_sandbox *sb)
{
	char d[PATH_MAX];
	size_t i;

	if (vmm_cgroup_mode() == 2) {
		dir_of(sb, NULL, d, sizeof(d));
		(void)rmdir(d);
	} else if (vmm_cgroup_mode() == 1) {
		for (i = 0; i < NV1; i++) {
			dir_of(sb, v1_ctrls[i], d, sizeof(d));
			(void)rmdir(d);
		}
	}
	sb->ncgroups = 0;
	/* the last one out: the parent too (made again with the next) */
	vmm_cgroup_parent_remove(sb->m);
}

void
vmm_cgroup_parent_remove(const struct vmm *m)
{
	const char *name = m->cfg.cgroup != NULL ? m->cfg.cgroup : "berth";
	char d[PATH_MAX];
	size_t i;

	/* (a group still holding a sandbox's, a VMM that outlives berthd:
	 * rmdir fails, it stays) */
	if (vmm_cgroup_mode() == 2) {
		snprintf(d, sizeof(d), "%s/%s", CG_ROOT, name);
		(void)rmdir(d);
	} else if (vmm_cgroup_mode() == 1) {
		for (i = 0; i < NV1; i++) {
			snprintf(d, sizeof(d), "%s/%s/%s", CG_ROOT, v1_ctrls[i],
			    name);
			(void)rmdir(d);
		}
	}
}

void
vmm_cgroup_usage(const struct vmm_sandbox *sb, struct vmm_usage *u)
{
	char d[PATH_MAX];
	long long v;

	memset(u, 0, sizeof(*u));
	if (vmm_cgroup_mode() == 2) {
		dir_of(sb, NULL, d, sizeof(d));
		if ((v = rd(d, "cpu.stat", "usage_usec")) >= 0)
			u->cpu_usec = (uint64_t)v;
		if ((v = rd(d, "memory.current", NULL)) >= 0)
			u->mem_bytes = (uint64_t)v;
		if ((v = rd(d, "cpu.stat", "nr_throttled")) >= 0)
			u->throttled = (uint64_t)v;
		return;
	}
	if (vmm_cgroup_mode() == 1) {
		dir_of(sb, "cpuacct", d, sizeof(d));
		if ((v = rd(d, "cpuacct.usage", NULL)) >= 0)
			u->cpu_usec = (uint64_t)v / 1000;
		dir_of(sb, "memory", d, sizeof(d));
		if ((v = rd(d, "memory.usage_in_bytes", NULL)) >= 0)
			u->mem_bytes = (uint64_t)v;
		dir_of(sb, "cpu", d, sizeof(d));
		if ((v = rd(d, "cpu.stat", "nr_throttled")) >= 0)
			u->throttled = (uint64_t)v;
	}
}
