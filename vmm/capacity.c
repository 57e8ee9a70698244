/*
 * capacity.c — what the host holds and what it can still take, and the
 * manager's policies that depend on it: standby VMMs within a count and
 * a memory budget (they go to the suspended sandboxes most likely to be
 * woken next: the most recently active), and the arithmetic of the caps
 * on running and resident sandboxes (vmm.c makes room with it).
 *
 * Measuring is cheap and slow, never per request: the VMMs' PSS (from
 * /proc/PID/smaps_rollup, which root reads), the sandbox directories'
 * allocated blocks and the CPU counters are sampled every CAP_SAMPLE_MS
 * and soon after a state change; a standby's PSS as soon as it has
 * loaded its snapshot (polled while one is loading). The status and the
 * metrics both show the one stored sample, so they agree.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"

#define CAP_SAMPLE_MS	30000	/* a full sample this often */
#define CAP_SOON_MS	1000	/* ... and this soon after a state change */
#define CAP_POLL_MS	2000	/* a standby loading: looked at this often */
#define CAP_WALK_MAX	4096	/* entries walked per sandbox directory */
#define CAP_WALK_DEPTH	6
#define CAP_LINKS	64	/* hard-linked files counted once (per dir) */
#define CAP_RESERVE_MIN	(256ULL << 20)	/* memory kept for the host */

static const char *const kind_names[VMM_CAP_KINDS] = {
	"running", "paused", "suspended", "stopped", "failed",
};

const char *
vmm_cap_kind_name(int kind)
{
	return kind >= 0 && kind < VMM_CAP_KINDS ? kind_names[kind] : "?";
}

/* ---- the arithmetic (pure) ---- */

int
vmm_evict_pick(const struct vmm_evict_cand *c, size_t n, int resident)
{
	size_t i;
	int best = -1;

	for (i = 0; i < n; i++) {
		if (c[i].skip || c[i].busy || c[i].held || c[i].hidden)
			continue;
		if (c[i].state != VMM_RUNNING &&
		    !(resident && c[i].state == VMM_PAUSED))
			continue;
		if (best < 0 ||
		    c[i].last_activity_ms < c[best].last_activity_ms)
			best = (int)i;
	}
	return best;
}

/* For each cap: is there room for all admitted (those there, those
 * pending and this one) once the ones going have gone? If not, one more
 * must go. Then: is there room now beside those there and those admitted
 * before this one? (Those after it wait behind it: the room a suspend
 * makes goes to the oldest waiting, and no two count on one suspend.)
 * Running first: a running sandbox suspended for it leaves the resident
 * count too. */
int
vmm_cap_decide(const struct vmm_cap_count *n, unsigned max_running,
    unsigned max_resident, int *resident_cap)
{
	int wait = 0;

	*resident_cap = 0;
	if (max_running != 0) {
		if (n->running + n->pending_running + 1 >
		    max_running + n->going_running)
			return VMM_CAP_EVICT;
		wait |= n->running + n->ahead_running + 1 > max_running;
	}
	if (max_resident != 0) {
		if (n->resident + n->pending_resident + 1 >
		    max_resident + n->going_resident) {
			*resident_cap = 1;
			return VMM_CAP_EVICT;
		}
		wait |= n->resident + n->ahead_resident + 1 > max_resident;
	}
	return wait ? VMM_CAP_WAIT : VMM_CAP_ROOM;
}

struct order {
	uint64_t t;
	size_t i;
};

static int
by_recent(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	/* most recently active first; ties by index, so a plan is stable */
	if (x->t != y->t)
		return x->t > y->t ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

void
vmm_standby_plan(struct vmm_standby_cand *c, size_t n, unsigned max,
    uint64_t budget, uint64_t estimate)
{
	struct order *o;
	uint64_t used = 0, cost;
	unsigned count = 0, unknown = 0;
	size_t i, k;

	for (i = 0; i < n; i++) {
		c[i].want = 0;
		if (c[i].fixed && c[i].holds) {
			/* a restore is promoting it: it stays, and counts */
			c[i].want = 1;
			count++;
			cost = c[i].bytes ? c[i].bytes : estimate;
			used += cost;
			unknown += cost == 0;
		}
	}
	if (max == 0 || (o = calloc(n ? n : 1, sizeof(*o))) == NULL)
		return;
	for (i = 0, k = 0; i < n; i++)
		if (!c[i].fixed) {
			o[k].t = c[i].last_activity_ms;
			o[k++].i = i;
		}
	qsort(o, k, sizeof(*o), by_recent);
	for (i = 0; i < k && count < max; i++) {
		struct vmm_standby_cand *x = &c[o[i].i];

		cost = x->holds && x->bytes ? x->bytes : estimate;
		if (budget != 0) {
			/* an unknown cost: one at a time until one is known */
			if (cost == 0 && unknown > 0)
				continue;
			if (used + cost > budget)
				continue;
		}
		x->want = 1;
		count++;
		used += cost;
		unknown += cost == 0;
	}
	free(o);
}

uint64_t
vmm_cap_mean(uint64_t sum, unsigned n, uint64_t nominal, int *is_nominal)
{
	*is_nominal = n == 0;
	return n == 0 ? nominal : sum / n;
}

/* more = min(more, v), and what bounds it. A cap (cap: 1) names the
 * bound when it is as tight as a measured one: it holds whatever the
 * host's load, where idle CPU, say, comes and goes (a busy host's "0
 * more: cpu" under a cap that already allows none said the wrong why). */
static void
bound_by(unsigned *more, const char **by, uint64_t v, const char *what,
    int cap)
{
	if (v < *more || (cap && v == *more)) {
		*more = (unsigned)v;
		*by = what;
	}
}

#define bound(m_, b_, v_, w_)	bound_by((m_), (b_), (v_), (w_), 0)
#define bound_cap(m_, b_, v_, w_) bound_by((m_), (b_), (v_), (w_), 1)

void
vmm_cap_estimate(const struct vmm_cap_input *in,
    unsigned more[VMM_MORE_KINDS], const char *by[VMM_MORE_KINDS])
{
	int k;

	for (k = 0; k < VMM_MORE_KINDS; k++) {
		more[k] = in->addresses_free;
		by[k] = "addresses";
	}
	/* running: its memory and its CPU */
	if (in->cost_mem[0] > 0)
		bound(&more[VMM_MORE_RUNNING], &by[VMM_MORE_RUNNING],
		    in->mem_free / in->cost_mem[0], "memory");
	if (in->cost_cpu > 0)
		bound(&more[VMM_MORE_RUNNING], &by[VMM_MORE_RUNNING],
		    in->cpu_idle <= 0 ? 0 :
		    (uint64_t)(in->cpu_idle / in->cost_cpu), "cpu");
	if (in->max_running > 0)
		bound_cap(&more[VMM_MORE_RUNNING], &by[VMM_MORE_RUNNING],
		    in->running >= in->max_running ? 0 :
		    in->max_running - in->running, "vm_max_running");
	if (in->max_resident > 0)
		bound_cap(&more[VMM_MORE_RUNNING], &by[VMM_MORE_RUNNING],
		    in->resident >= in->max_resident ? 0 :
		    in->max_resident - in->resident, "vm_max_resident");
	/* paused: its memory (no CPU) */
	if (in->cost_mem[1] > 0)
		bound(&more[VMM_MORE_PAUSED], &by[VMM_MORE_PAUSED],
		    in->mem_free / in->cost_mem[1], "memory");
	if (in->max_resident > 0)
		bound_cap(&more[VMM_MORE_PAUSED], &by[VMM_MORE_PAUSED],
		    in->resident >= in->max_resident ? 0 :
		    in->max_resident - in->resident, "vm_max_resident");
	/* suspended: its disk; no cap counts it */
	if (in->cost_disk > 0)
		bound(&more[VMM_MORE_SUSPENDED], &by[VMM_MORE_SUSPENDED],
		    in->disk_free / in->cost_disk, "disk");
}

/* ---- measuring ---- */

/* "Key:   1234 kB" of a /proc file's text, in bytes; -1 without. */
static int64_t
kb_field(const char *text, const char *key)
{
	size_t kl = strlen(key);
	const char *p = text;

	while ((p = strstr(p, key)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[kl] == ':')
			return strtoll(p + kl + 1, NULL, 10) * 1024;
		p += kl;
	}
	return -1;
}

uint64_t
vmm_proc_pss(pid_t pid)
{
	char path[64], buf[4096];
	int64_t v = -1;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (vmm_read_small(path, buf, sizeof(buf)) > 0)
		v = kb_field(buf, "Pss");
	if (v < 0) {
		/* a kernel without smaps_rollup: RSS counts shared pages
		 * whole, an overestimate on the safe side */
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
		if (vmm_read_small(path, buf, sizeof(buf)) > 0)
			v = kb_field(buf, "VmRSS");
	}
	return v > 0 ? (uint64_t)v : 0;
}

struct walk {
	unsigned entries;
	dev_t dev;
	int nlinks;
	struct {
		dev_t dev;
		ino_t ino;
	} links[CAP_LINKS];
};

/* 1 the first time a hard-linked file is met in this walk */
static int
first_link(struct walk *w, const struct stat *st)
{
	int i;

	if (st->st_nlink < 2)
		return 1;
	for (i = 0; i < w->nlinks; i++)
		if (w->links[i].dev == st->st_dev &&
		    w->links[i].ino == st->st_ino)
			return 0;
	if (w->nlinks < CAP_LINKS) {
		w->links[w->nlinks].dev = st->st_dev;
		w->links[w->nlinks++].ino = st->st_ino;
	}
	return 1;
}

/* Allocated bytes under the directory dfd (closed here): never through
 * a symbolic link (a VMM can write in its jail), never onto another file
 * system, at most CAP_WALK_MAX entries. */
static uint64_t
walk_dir(int dfd, int depth, struct walk *w)
{
	struct dirent *de;
	struct stat st;
	uint64_t sum = 0;
	DIR *d;
	int fd;

	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return 0;
	}
	while ((de = readdir(d)) != NULL && w->entries < CAP_WALK_MAX) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		w->entries++;
		if (fstatat(dirfd(d), de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != w->dev)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth < CAP_WALK_DEPTH && (fd = openat(dirfd(d),
			    de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC)) >= 0)
				sum += walk_dir(fd, depth + 1, w);
			continue;
		}
		if (first_link(w, &st))
			sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

static uint64_t
dir_bytes(const char *path)
{
	struct walk w;
	struct stat st;
	int fd;

	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return 0;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return 0;
	}
	memset(&w, 0, sizeof(w));
	w.dev = st.st_dev;
	return (uint64_t)st.st_blocks * 512 + walk_dir(fd, 0, &w);
}

/* The VMM's CPU counter in µs: its cgroup's (all its threads, across
 * restores), or its process's when it runs without one; 0: none. */
static int
cpu_counter(struct vmm_sandbox *sb, uint64_t *usec, pid_t *who)
{
	struct vmm_usage u;
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	long hz;

	*who = 0;
	if (sb->jailed) {
		vmm_cgroup_usage(sb, &u);
		if (u.cpu_usec > 0) {
			*usec = u.cpu_usec;
			return 1;
		}
	}
	if (sb->pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)sb->pid);
	if (vmm_read_small(path, buf, sizeof(buf)) < 0 ||
	    (p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %*c %*d %*d "
	    "%*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	if ((hz = sysconf(_SC_CLK_TCK)) <= 0)
		hz = 100;
	*usec = (ut + st) * 1000000ULL / (unsigned long long)hz;
	*who = sb->pid;
	return 1;
}

/* The host's CPU time, all and idle (idle + iowait), in ticks. */
static int
host_cpu(uint64_t *total, uint64_t *idle)
{
	char buf[1024];
	unsigned long long v[8];

	if (vmm_read_small("/proc/stat", buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
	    &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		return -1;
	*total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
	*idle = v[3] + v[4];
	return 0;
}

static int
kind_of(const struct vmm_sandbox *sb)
{
	switch (sb->state) {
	case VMM_CREATING:
	case VMM_RUNNING:
		return VMM_CAP_RUNNING;
	case VMM_PAUSED:
		return VMM_CAP_PAUSED;
	case VMM_SUSPENDED:
		return VMM_CAP_SUSPENDED;
	case VMM_STOPPED:
		return VMM_CAP_STOPPED;
	default:
		return VMM_CAP_FAILED;
	}
}

int
vmm_cap_class(const struct vmm_sandbox *sb)
{
	if (sb->hidden || sb->deleting)
		return VMM_CAPC_NONE;
	if (sb->busy && sb->room_pending)
		/* admitted, no VMM started for it yet: what it holds (a
		 * paused one waking holds its paused VMM) */
		return sb->pid > 0 ? VMM_CAPC_PAUSED : VMM_CAPC_NONE;
	if (sb->busy) {
		switch (sb->op) {
		case VMM_OP_CREATE:
		case VMM_OP_START:
		case VMM_OP_RESUME:
		case VMM_OP_RESTORE:
			return VMM_CAPC_RUNNING;
		case VMM_OP_SUSPEND:
		case VMM_OP_STOP:
		case VMM_OP_DELETE:
			return VMM_CAPC_NONE;
		case VMM_OP_PAUSE:
			return VMM_CAPC_PAUSED;
		default:	/* a fork, a checkpoint, a merge: as it is */
			break;
		}
	}
	switch (sb->state) {
	case VMM_CREATING:
	case VMM_RUNNING:
		return VMM_CAPC_RUNNING;
	case VMM_PAUSED:
		return VMM_CAPC_PAUSED;
	default:
		return VMM_CAPC_NONE;
	}
}

/* A loaded standby's PSS, measured once per process (and again at each
 * full sample); 1 when one was measured now. */
static int
standby_measure(struct vmm_sandbox *sb, int again)
{
	if (sb->standby_pid <= 0) {
		sb->standby_pss = 0;
		sb->standby_pss_pid = 0;
		return 0;
	}
	if (!sb->standby_ready ||
	    (!again && sb->standby_pss_pid == sb->standby_pid))
		return 0;
	sb->standby_pss = vmm_proc_pss(sb->standby_pid);
	sb->standby_pss_pid = sb->standby_pid;
	return 1;
}

/* The mean of the measured standbys, kept when they are gone: the
 * estimate of the next one's cost. */
static void
standby_mean_update(struct vmm *m)
{
	struct vmm_sandbox *sb;
	uint64_t sum = 0;
	unsigned n = 0;

	for (sb = m->list; sb != NULL; sb = sb->next)
		if (sb->standby_pid > 0 && sb->standby_pss_pid ==
		    sb->standby_pid && sb->standby_pss > 0) {
			sum += sb->standby_pss;
			n++;
		}
	if (n > 0)
		m->standby_mean = sum / n;
}

static uint64_t
host_meminfo(const char *key)
{
	char buf[4096];
	int64_t v;

	if (vmm_read_small("/proc/meminfo", buf, sizeof(buf)) < 0 ||
	    (v = kb_field(buf, key)) < 0)
		return 0;
	return (uint64_t)v;
}

/* The full sample (see the top of this file). */
static void
cap_sample(struct vmm *m)
{
	struct vmm_capacity *c = &m->cap;
	struct vmm_sandbox *sb;
	struct vmm_cap_input in;
	struct statvfs vfs;
	uint64_t now = vmm_now_ms(), total, idle, usec, n_cpu = 0;
	uint64_t run_pss = 0, pause_pss = 0, susp_disk = 0, all_disk = 0;
	unsigned n_run = 0, n_pause = 0, n_susp = 0, n_disk = 0;
	double run_cpu = 0;
	pid_t who;
	long cores;
	int k;

	memset(c, 0, sizeof(*c));
	c->at_ms = vmm_wall_ms();
	c->interval_ms = m->cap_mono != 0 ? now - m->cap_mono : 0;
	for (sb = m->list; sb != NULL; sb = sb->next) {
		if (sb->hidden)
			continue;
		k = kind_of(sb);
		sb->pss = sb->pid > 0 ? vmm_proc_pss(sb->pid) : 0;
		(void)standby_measure(sb, 1);
		sb->disk_bytes = dir_bytes(sb->dir);
		/* CPU: the rate over the interval, where the counter went
		 * on (a new process without a cgroup starts anew) */
		sb->cpu_rate_known = 0;
		if (cpu_counter(sb, &usec, &who)) {
			if (sb->cpu_usec_ms != 0 && now > sb->cpu_usec_ms &&
			    usec >= sb->cpu_usec && who == sb->cpu_pid) {
				sb->cpu_rate = (double)(usec - sb->cpu_usec) /
				    ((double)(now - sb->cpu_usec_ms) * 1000.0);
				sb->cpu_rate_known = 1;
			}
			sb->cpu_usec = usec;
			sb->cpu_usec_ms = now;
			sb->cpu_pid = who;
		} else
			sb->cpu_usec_ms = 0;
		c->st[k].n++;
		c->st[k].mem_bytes += k == VMM_CAP_SUSPENDED ?
		    sb->standby_pss : sb->pss;
		c->st[k].disk_bytes += sb->disk_bytes;
		if (k == VMM_CAP_RUNNING || k == VMM_CAP_PAUSED) {
			all_disk += sb->disk_bytes;
			n_disk++;
		}
		if (sb->cpu_rate_known)
			c->st[k].cpu += sb->cpu_rate;
		if (k == VMM_CAP_RUNNING && sb->state == VMM_RUNNING) {
			if (sb->pss > 0) {
				run_pss += sb->pss;
				n_run++;
			}
			if (sb->cpu_rate_known) {
				run_cpu += sb->cpu_rate;
				n_cpu++;
			}
		} else if (k == VMM_CAP_PAUSED && sb->pss > 0) {
			pause_pss += sb->pss;
			n_pause++;
		} else if (k == VMM_CAP_SUSPENDED) {
			susp_disk += sb->disk_bytes;
			n_susp++;
		}
		if (sb->standby_pid > 0) {
			c->standby_n++;
			if (sb->standby_pss_pid == sb->standby_pid)
				c->standby_bytes += sb->standby_pss;
		}
		switch (vmm_cap_class(sb)) {
		case VMM_CAPC_RUNNING:
			c->running++;
			c->resident++;
			break;
		case VMM_CAPC_PAUSED:
			c->resident++;
			break;
		}
	}
	standby_mean_update(m);
	c->standby_max = m->cfg.standby_max;
	c->standby_budget = m->cfg.standby_mem_bytes;
	c->max_running = m->cfg.max_running;
	c->max_resident = m->cfg.max_resident;
	/* the host */
	c->mem_total = host_meminfo("MemTotal");
	c->mem_available = host_meminfo("MemAvailable");
	c->mem_reserve = c->mem_total / 20 > CAP_RESERVE_MIN ?
	    c->mem_total / 20 : CAP_RESERVE_MIN;
	if (statvfs(m->state_dir, &vfs) == 0)
		c->disk_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	c->cores = (cores = sysconf(_SC_NPROCESSORS_ONLN)) > 0 ?
	    (unsigned)cores : 1;
	c->cpu_idle = c->cores;
	if (host_cpu(&total, &idle) == 0) {
		/* the first sample: the average since boot */
		uint64_t dt = total - m->cpu_total, di = idle - m->cpu_idle;

		if (total > m->cpu_total && idle >= m->cpu_idle && di <= dt)
			c->cpu_idle = c->cores * (double)di / (double)dt;
		m->cpu_total = total;
		m->cpu_idle = idle;
	}
	c->addresses_free = (unsigned)(vmm_pool_size(m->pool) -
	    vmm_pool_used(m->pool));
	/* one more of the default size: what those there cost on average.
	 * A paused VMM holds what it held running (and the other way
	 * round), and every sandbox's directory holds its disk and RAM
	 * file, suspended or not: with none of a state, the others' mean;
	 * with none at all, what the default size says: its RAM whole, its
	 * disk and RAM file whole, and its vCPUs at the idle policy's
	 * threshold (idle_cpu_pct: a guest using more is at work, which
	 * most are not most of the time; at their quota, the host would
	 * look full with a core idle). */
	c->cost_mem[0] = vmm_cap_mean(run_pss, n_run, n_pause ?
	    pause_pss / n_pause : (uint64_t)m->cfg.mem_mib << 20,
	    &c->nominal_mem[0]);
	c->nominal_mem[0] &= n_pause == 0;
	c->cost_mem[1] = vmm_cap_mean(pause_pss, n_pause, n_run ?
	    run_pss / n_run : (uint64_t)m->cfg.mem_mib << 20,
	    &c->nominal_mem[1]);
	c->nominal_mem[1] &= n_run == 0;
	c->cost_disk = vmm_cap_mean(susp_disk, n_susp, n_disk ?
	    all_disk / n_disk : ((uint64_t)m->cfg.disk_mib + m->cfg.mem_mib) <<
	    20, &c->nominal_disk);
	c->nominal_disk &= n_disk == 0;
	c->nominal_cpu = n_cpu == 0;
	c->cost_cpu = n_cpu > 0 ? run_cpu / (double)n_cpu : m->cfg.vcpus *
	    (m->cfg.idle_cpu_pct ? m->cfg.idle_cpu_pct : m->cfg.cpu_pct) /
	    100.0;
	memset(&in, 0, sizeof(in));
	in.mem_free = c->mem_available > c->mem_reserve ?
	    c->mem_available - c->mem_reserve : 0;
	in.disk_free = c->disk_free;
	in.cpu_idle = c->cpu_idle;
	in.cost_mem[0] = c->cost_mem[0] ? c->cost_mem[0] : 1;
	in.cost_mem[1] = c->cost_mem[1] ? c->cost_mem[1] : 1;
	in.cost_disk = c->cost_disk ? c->cost_disk : 1;
	/* idle guests use next to nothing: a hundredth of a core at least,
	 * or the CPU bound would be a division by almost zero */
	in.cost_cpu = c->cost_cpu < 0.01 ? 0.01 : c->cost_cpu;
	if (m->cfg.room_no_cpu)
		in.cost_cpu = 0;	/* vm_room_cpu off: not a bound */
	in.running = c->running;
	in.resident = c->resident;
	in.max_running = c->max_running;
	in.max_resident = c->max_resident;
	in.addresses_free = c->addresses_free;
	vmm_cap_estimate(&in, c->more, c->more_by);
	m->cap_mono = now;
}

/* ---- standbys within the budget ---- */

void
vmm_standby_rebalance(struct vmm *m)
{
	struct vmm_standby_cand *c;
	struct vmm_sandbox *sb, **who;
	char err[VMM_ERRLEN], why[VMM_ERRLEN];
	uint64_t cost;
	size_t n = 0, i;
	int changed = 0;

	if (m->be->standby == NULL || m->rebalancing)
		return;
	for (sb = m->list; sb != NULL; sb = sb->next) {
		if (sb->standby_mine && sb->standby_pid <= 0) {
			/* it died by itself (the backend said why): not
			 * again before the sandbox's next operation */
			sb->standby_mine = 0;
			sb->standby_lost = 1;
		}
		n++;
	}
	if (n == 0)
		return;
	c = calloc(n, sizeof(*c));
	who = calloc(n, sizeof(*who));
	if (c == NULL || who == NULL) {
		free(c);
		free(who);
		return;
	}
	n = 0;
	for (sb = m->list; sb != NULL; sb = sb->next) {
		if (sb->hidden || sb->deleting || sb->moving)
			continue;
		/* a standby of a sandbox no longer suspended is its VMM now
		 * (promoted) or about to go with its operation */
		if (sb->standby_pid <= 0 && (sb->state != VMM_SUSPENDED ||
		    sb->pid > 0 || sb->standby_lost || sb->busy))
			continue;
		if (sb->standby_pid > 0 && sb->state != VMM_SUSPENDED &&
		    !sb->busy)
			continue;
		(void)standby_measure(sb, 0);
		who[n] = sb;
		c[n].last_activity_ms = sb->last_activity_ms;
		c[n].holds = sb->standby_pid > 0;
		c[n].bytes = sb->standby_pss_pid == sb->standby_pid ?
		    sb->standby_pss : 0;
		c[n].fixed = sb->busy || m->be->standby_stop == NULL;
		n++;
	}
	standby_mean_update(m);
	vmm_standby_plan(c, n, m->cfg.standby_max, m->cfg.standby_mem_bytes,
	    m->standby_mean);
	m->rebalancing = 1;	/* the events below may call back */
	/* stop first: the memory is free before a new one takes it */
	for (i = 0; i < n; i++) {
		sb = who[i];
		if (!c[i].holds || c[i].want || c[i].fixed)
			continue;
		cost = c[i].bytes ? c[i].bytes : m->standby_mean;
		if (m->cfg.standby_max == 0)
			snprintf(why, sizeof(why), "standby stopped: "
			    "vm_standby is 0");
		else if (m->cfg.standby_mem_bytes != 0 &&
		    cost > m->cfg.standby_mem_bytes)
			snprintf(why, sizeof(why), "standby stopped: its %llu "
			    "MiB are more than vm_standby_memory %llu MiB",
			    (unsigned long long)(cost >> 20),
			    (unsigned long long)(m->cfg.standby_mem_bytes >>
			    20));
		else {
			char mem[32] = "off";

			if (m->cfg.standby_mem_bytes != 0)
				snprintf(mem, sizeof(mem), "%llu MiB",
				    (unsigned long long)
				    (m->cfg.standby_mem_bytes >> 20));
			snprintf(why, sizeof(why), "standby stopped: more "
			    "recently active suspended sandboxes take the "
			    "budget (vm_standby %u, vm_standby_memory %s; its "
			    "standby: %llu MiB)", m->cfg.standby_max, mem,
			    (unsigned long long)(cost >> 20));
		}
		m->be->standby_stop(sb);
		changed = 1;
		sb->standby_mine = 0;
		sb->standby_pss = 0;
		sb->standby_pss_pid = 0;
		if (sb->standby_pid <= 0)
			vmm_emit(sb, VMM_OP_STANDBY, 1, why, "capacity");
	}
	for (i = 0; i < n; i++) {
		sb = who[i];
		if (c[i].holds || !c[i].want)
			continue;
		changed = 1;
		if (m->be->standby(sb, err, sizeof(err)) == 0 &&
		    sb->standby_pid > 0)
			sb->standby_mine = 1;
		else
			sb->standby_lost = 1;	/* failing only means a
						 * slower wake: not again
						 * before its next operation */
	}
	m->rebalancing = 0;
	free(c);
	free(who);
	/* standbys came or went: the sample says so soon (a new one is
	 * polled until it has loaded); only then, or sampling would start
	 * this again each time */
	if (changed)
		vmm_cap_soon(m);
}

/* ---- the timer ---- */

static void
cap_arm(struct vmm *m)
{
	struct vmm_sandbox *sb;
	uint64_t now = vmm_now_ms(), next = m->cap_due;
	int any = 0;

	if (m->cap_ev == NULL)
		return;
	for (sb = m->list; sb != NULL; sb = sb->next) {
		any = 1;
		/* a standby loading: measured as soon as it has loaded */
		if (sb->standby_pid > 0 && sb->standby_pss_pid !=
		    sb->standby_pid && now + CAP_POLL_MS < next)
			next = now + CAP_POLL_MS;
	}
	event_del(m->cap_ev);
	if (!any && next > now + CAP_SOON_MS)
		return;		/* nothing to sample (the last one gone was
				 * sampled): no timer keeps the application's
				 * loop going */
	vmm_timer_ms(m->cap_ev, next > now ? next - now : 0);
}

static void
cap_fire(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *m = arg;
	struct vmm_sandbox *sb;
	uint64_t now = vmm_now_ms();
	int measured = 0;

	(void)fd;
	(void)what;
	if (now >= m->cap_due) {
		cap_sample(m);
		m->cap_due = now + CAP_SAMPLE_MS;
		measured = 1;
	} else {
		for (sb = m->list; sb != NULL; sb = sb->next)
			measured |= standby_measure(sb, 0);
	}
	/* a standby measured: does the budget still hold them all? */
	if (measured)
		vmm_standby_rebalance(m);
	cap_arm(m);
}

void
vmm_cap_init(struct vmm *m)
{
	m->cap_ev = event_new(m->base, -1, 0, cap_fire, m);
	m->cap_due = vmm_now_ms() + CAP_SOON_MS;
}

void
vmm_cap_free(struct vmm *m)
{
	if (m->cap_ev != NULL)
		event_free(m->cap_ev);
	m->cap_ev = NULL;
}

void
vmm_cap_soon(struct vmm *m)
{
	uint64_t soon = vmm_now_ms() + CAP_SOON_MS;

	if (soon < m->cap_due)
		m->cap_due = soon;
	cap_arm(m);
}

void
vmm_capacity(struct vmm *m, struct vmm_capacity *out)
{
	if (m->cap.at_ms == 0)
		cap_sample(m);
	*out = m->cap;
}

uint64_t
vmm_sandbox_standby_bytes(const struct vmm_sandbox *sb)
{
	return sb->standby_pid > 0 && sb->standby_pss_pid == sb->standby_pid ?
	    sb->standby_pss : 0;
}

void
vmm_set_limits(struct vmm *m, unsigned standby_max,
    uint64_t standby_mem_bytes, unsigned max_running, unsigned max_resident)
{
	struct vmm_sandbox *sb;

	m->cfg.standby_max = standby_max;
	m->cfg.standby_mem_bytes = standby_mem_bytes;
	m->cfg.max_running = max_running;
	m->cfg.max_resident = max_resident;
	/* a new budget: those a failure kept out may try again */
	for (sb = m->list; sb != NULL; sb = sb->next)
		sb->standby_lost = 0;
	vmm_standby_rebalance(m);
	m->cap.standby_max = standby_max;
	m->cap.standby_budget = standby_mem_bytes;
	m->cap.max_running = max_running;
	m->cap.max_resident = max_resident;
}
