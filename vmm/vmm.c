/*
 * vmm.c — the sandbox manager: owns the sandbox list, the address pool,
 * taps (through libnetctl), disks and state directories, and turns the
 * public operations into backend calls. It is the only place that
 * changes a sandbox's state, sends events and runs completion callbacks,
 * so every path — success, failure, a VMM that died, a delete that
 * overtook an operation — ends in the same op_finish().
 *
 * Why one operation at a time per sandbox: the VMM itself serializes
 * (QMP answers in order, a snapshot must not race a cont), and callers
 * are simpler when "busy" is a definite answer. The one exception is a
 * request for the operation already in flight, which joins it: many
 * parked HTTP requests share one wake.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <event2/event.h>
#include <jansson.h>

#include "backend.h"
#include "nc_link.h"
#include "vmm.h"

#define DEF_READY_LINE "berth-guest: ready"

static const char *const state_names[] = {
	"creating", "running", "paused", "suspended", "stopped", "failed",
};
static const char *const op_names[] = {
	"create", "start", "pause", "suspend", "resume", "stop", "delete",
	"exit", "adopt", "accel", "guest", "jail", "snapshot", "fork",
	"checkpoint", "restore", "merge", "standby",
};

const char *
vmm_state_name(enum vmm_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ?
	    state_names[s] : "unknown";
}

const char *
vmm_op_name(enum vmm_op op)
{
	return (unsigned)op < sizeof(op_names) / sizeof(op_names[0]) ?
	    op_names[op] : "unknown";
}

const char *
vmm_accel_name(enum vmm_accel a)
{
	return a == VMM_ACCEL_KVM ? "kvm" : a == VMM_ACCEL_TCG ? "tcg" :
	    "auto";
}

const struct vmm_backend *
vmm_backend_lookup(const char *name)
{
	if (name == NULL || strcmp(name, "qemu") == 0)
		return &vmm_backend_qemu;
	if (strcmp(name, "firecracker") == 0)
		return &vmm_backend_firecracker;
	return NULL;
}

static int
errf(char *err, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
errf(char *err, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static char *
xstrdup(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

/* ---- templates ---- */

void
vmm_template_free(struct vmm_template *t)
{
	free((char *)t->name);
	free((char *)t->kernel);
	free((char *)t->initrd);
	free((char *)t->rootfs);
	free((char *)t->cmdline);
	free((char *)t->ready_line);
	free((char *)t->settled_line);
	free((char *)t->agent);
	memset(t, 0, sizeof(*t));
}

static char *
tpl_path(const char *dir, const char *f)
{
	char *p;

	if (f == NULL)
		return NULL;
	if (f[0] == '/')
		return strdup(f);
	if (asprintf(&p, "%s/%s", dir, f) < 0)
		return NULL;
	return p;
}

int
vmm_template_load(const char *dir, struct vmm_template *t, char *err,
    size_t errlen)
{
	char path[PATH_MAX], real[PATH_MAX];
	json_error_t jerr;
	json_t *j;

	memset(t, 0, sizeof(*t));
	/* the real directory: a template name may be a link to the current
	 * version, and a sandbox must keep the version it was made from */
	if (realpath(dir, real) != NULL)
		dir = real;
	snprintf(path, sizeof(path), "%s/template.json", dir);
	if ((j = json_load_file(path, 0, &jerr)) == NULL)
		return errf(err, errlen, -EINVAL, "%s:%d: %s", path, jerr.line,
		    jerr.text);
	if (json_string_value(json_object_get(j, "kernel")) == NULL) {
		json_decref(j);
		return errf(err, errlen, -EINVAL, "%s: no \"kernel\"", path);
	}
	t->name = xstrdup(json_string_value(json_object_get(j, "name")));
	t->kernel = tpl_path(dir, json_string_value(json_object_get(j, "kernel")));
	t->initrd = tpl_path(dir, json_string_value(json_object_get(j, "initrd")));
	t->rootfs = tpl_path(dir, json_string_value(json_object_get(j, "rootfs")));
	t->cmdline = xstrdup(json_string_value(json_object_get(j, "cmdline")));
	t->ready_line = xstrdup(json_string_value(json_object_get(j,
	    "ready_line")));
	t->settled_line = xstrdup(json_string_value(json_object_get(j,
	    "settled_line")));
	t->agent = xstrdup(json_string_value(json_object_get(j, "agent")));
	t->root_overlay = json_is_true(json_object_get(j, "root_overlay"));
	if (json_integer_value(json_object_get(j, "memory_mib")) >= 64 &&
	    json_integer_value(json_object_get(j, "memory_mib")) <= 65536)
		t->mem_mib = (unsigned)json_integer_value(json_object_get(j,
		    "memory_mib"));
	json_decref(j);
	if (t->kernel == NULL) {
		vmm_template_free(t);
		return errf(err, errlen, -ENOMEM, "out of memory");
	}
	/* it goes into the VMM's command line: a name, not options */
	if (t->agent != NULL && (t->agent[0] == '\0' || strlen(t->agent) > 63 ||
	    strspn(t->agent, "abcdefghijklmnopqrstuvwxyz0123456789._-") !=
	    strlen(t->agent))) {
		vmm_template_free(t);
		return errf(err, errlen, -EINVAL, "%s: \"agent\" must be a port "
		    "name of at most 63 of a-z 0-9 . _ -", path);
	}
	if (t->root_overlay && t->rootfs == NULL) {
		vmm_template_free(t);
		return errf(err, errlen, -EINVAL, "%s: \"root_overlay\" needs "
		    "a \"rootfs\"", path);
	}
	if (access(t->kernel, R_OK) < 0 ||
	    (t->initrd != NULL && access(t->initrd, R_OK) < 0) ||
	    (t->rootfs != NULL && access(t->rootfs, R_OK) < 0)) {
		int e = -errno;

		errf(err, errlen, e, "template %s: %s: %s", dir,
		    access(t->kernel, R_OK) < 0 ? t->kernel :
		    t->initrd != NULL && access(t->initrd, R_OK) < 0 ?
		    t->initrd : t->rootfs, strerror(-e));
		vmm_template_free(t);
		return e;
	}
	return 0;
}

static int
tpl_copy(struct vmm_template *dst, const struct vmm_template *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->name = xstrdup(src->name != NULL ? src->name : "custom");
	dst->kernel = xstrdup(src->kernel);
	dst->initrd = xstrdup(src->initrd);
	dst->rootfs = xstrdup(src->rootfs);
	dst->cmdline = xstrdup(src->cmdline != NULL ? src->cmdline :
	    "console=ttyS0 earlyprintk=ttyS0 reboot=t panic=-1");
	dst->ready_line = xstrdup(src->ready_line != NULL ? src->ready_line :
	    DEF_READY_LINE);
	dst->settled_line = xstrdup(src->settled_line);
	dst->agent = xstrdup(src->agent);
	dst->root_overlay = src->root_overlay && src->rootfs != NULL;
	dst->mem_mib = src->mem_mib;
	dst->balloon = src->balloon;
	if (dst->kernel == NULL || dst->cmdline == NULL ||
	    dst->ready_line == NULL) {
		vmm_template_free(dst);
		return -ENOMEM;
	}
	return 0;
}

int
vmm_template_copy(struct vmm_template *dst, const struct vmm_template *src)
{
	return tpl_copy(dst, src);
}

/* ---- files ---- */

static int
mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX], *p;

	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* rm -r for a sandbox directory: one level of plain files plus snap/. A
 * mount point under it (a test's tmpfs) is left, and reported. */
static int
rmtree(const char *path);

void
vmm_rmtree(const char *path)
{
	(void)rmtree(path);
}

static int
rmtree(const char *path)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0;

	if ((d = opendir(path)) == NULL)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >=
		    (int)sizeof(sub))
			continue;
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			int r = rmtree(sub);

			if (r < 0 && rc == 0)
				rc = r;
		} else if (unlink(sub) < 0 && errno != ENOENT && rc == 0) {
			rc = -errno;
		}
	}
	closedir(d);
	if (rmdir(path) < 0 && errno != ENOENT && rc == 0)
		rc = -errno;
	return rc;
}

/* What adoption needs; rewritten atomically after every state change
 * and whenever a VMM process is spawned. */
static void
meta_write(struct vmm_sandbox *sb)
{
	char path[PATH_MAX], tmp[PATH_MAX], ip[INET_ADDRSTRLEN], n[32][24];
	const char *kv[][2] = {
		{ "id", sb->id }, { "state", vmm_state_name(sb->state) },
		{ "pid", n[0] }, { "standby_pid", n[1] }, { "tap", sb->tap },
		{ "guest_ip", ip }, { "mem_mib", n[2] }, { "vcpus", n[3] },
		{ "disk_mib", n[4] }, { "created_ms", n[5] },
		{ "template", sb->tpl.name }, { "kernel", sb->tpl.kernel },
		{ "initrd", sb->tpl.initrd ? sb->tpl.initrd : "" },
		{ "rootfs", sb->tpl.rootfs ? sb->tpl.rootfs : "" },
		{ "cmdline", sb->tpl.cmdline }, { "ready_line", sb->tpl.ready_line },
		{ "reason", sb->reason }, { "accel", vmm_accel_name(sb->accel) },
		{ "disk_ready", n[6] }, { "jailed", n[7] }, { "uid", n[8] },
		{ "agent", sb->tpl.agent != NULL ? sb->tpl.agent : "" },
		{ "root_overlay", n[9] }, { "ready_key", sb->ready_key },
		{ "from_snapshot", n[10] }, { "ram_shared", n[11] },
		{ "snap_ram", n[12] }, { "ram_anon", n[13] },
		{ "cgroup_name", sb->cg_name }, { "layered", n[14] },
		{ "layer_gen", n[15] }, { "balloon", n[16] },
		{ "snap_dev", n[17] }, { "readdress", n[18] },
		{ "moved_key", sb->moved_key },
	};
	size_t i;
	FILE *f;
	int bad = 0;

	if (sb->deleting)
		return;
	if (vmm_path(sb, "sandbox.conf", path, sizeof(path)) < 0 ||
	    vmm_path(sb, ".sandbox.conf.new", tmp, sizeof(tmp)) < 0)
		return;
	inet_ntop(AF_INET, &sb->guest_ip, ip, sizeof(ip));
	snprintf(n[0], sizeof(n[0]), "%d", (int)sb->pid);
	snprintf(n[1], sizeof(n[1]), "%d", (int)sb->standby_pid);
	snprintf(n[2], sizeof(n[2]), "%u", sb->mem_mib);
	snprintf(n[3], sizeof(n[3]), "%u", sb->vcpus);
	snprintf(n[4], sizeof(n[4]), "%u", sb->disk_mib);
	snprintf(n[5], sizeof(n[5]), "%llu", (unsigned long long)sb->created_ms);
	snprintf(n[6], sizeof(n[6]), "%d", sb->disk_ready);
	snprintf(n[7], sizeof(n[7]), "%d", sb->jailed);
	snprintf(n[8], sizeof(n[8]), "%u", (unsigned)sb->uid);
	snprintf(n[9], sizeof(n[9]), "%d", sb->tpl.root_overlay);
	snprintf(n[10], sizeof(n[10]), "%d", sb->from_snapshot);
	snprintf(n[11], sizeof(n[11]), "%d", sb->ram_shared);
	snprintf(n[12], sizeof(n[12]), "%d", sb->snap_ram);
	snprintf(n[13], sizeof(n[13]), "%d", sb->ram_anon);
	snprintf(n[14], sizeof(n[14]), "%d", sb->layered);
	snprintf(n[15], sizeof(n[15]), "%u", sb->layer_gen);
	snprintf(n[16], sizeof(n[16]), "%d", sb->tpl.balloon);
	snprintf(n[17], sizeof(n[17]), "%d", sb->snap_dev);
	snprintf(n[18], sizeof(n[18]), "%d", sb->readdress_pending);
	if ((f = fopen(tmp, "we")) == NULL)
		return;
	/* every value escaped (kv.c): a reason a VMM made up cannot add
	 * a line of its own */
	for (i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (vmm_kv_write(f, kv[i][0], kv[i][1]) < 0)
			bad = 1;
	if (fclose(f) == 0 && !bad)
		(void)rename(tmp, path);
	else
		(void)unlink(tmp);
}

void
vmm_meta_save(struct vmm_sandbox *sb)
{
	meta_write(sb);
}

int
vmm_own(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	static const char *const names[] = { "", "snap", "disk.raw",
	    "disk.qcow2", "console.log", "mem", "snap/state" };
	uid_t uid = sb->uid;
	gid_t gid = sb->gid;
	char p[PATH_MAX];
	size_t i;
	int dfd, fd, rc;

	if (sb->jailed) {
		/* Only the files the VMM opens, under the root-owned jail
		 * directory, by descriptor: nothing here can be a link. */
		if ((rc = vmm_jail_prepare(sb, err, errlen)) < 0)
			return rc;
		if ((dfd = open(sb->jdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC)) < 0)
			return errf(err, errlen, -errno, "%s: %s", sb->jdir,
			    strerror(errno));
		(void)fd;
		rc = vmm_jail_own(dfd, vmm_disk_name(sb), uid, gid, 0600, err,
		    errlen);
		if (rc == 0 && faccessat(dfd, "mem", F_OK,
		    AT_SYMLINK_NOFOLLOW) == 0)
			rc = vmm_jail_own(dfd, "mem", uid, gid, 0600, err,
			    errlen);
		close(dfd);
		return rc;
	}
	if (uid == 0)
		return 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (vmm_path(sb, names[i], p, sizeof(p)) < 0)
			continue;
		if (fchownat(AT_FDCWD, p, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno != ENOENT)
			return errf(err, errlen, -errno, "chown %s to %u:%u: %s",
			    p, (unsigned)uid, (unsigned)gid, strerror(errno));
	}
	return 0;
}

/* Where sandbox sb's files go and who its VMM is: a jail of its own and
 * a uid from the range by its pool block, when the manager jails. */
static void
sb_layout(struct vmm_sandbox *sb, int jailed)
{
	struct vmm *m = sb->m;

	if (sb->hidden && sb->pooled)
		snprintf(sb->dir, sizeof(sb->dir), "%s/.ready/%s", m->state_dir,
		    sb->id);
	else if (sb->hidden)
		(void)vmm_ready_path(m, sb->build_key, NULL, sb->dir,
		    sizeof(sb->dir) - 8), strcat(sb->dir, ".build");
	else
		snprintf(sb->dir, sizeof(sb->dir), "%s/%s", m->state_dir,
		    sb->id);
	sb->jailed = jailed;
	if (jailed)
		snprintf(sb->jdir, sizeof(sb->jdir), "%s/jail", sb->dir);
	else
		snprintf(sb->jdir, sizeof(sb->jdir), "%s", sb->dir);
	snprintf(sb->disk, sizeof(sb->disk), "%s/%s", sb->jdir,
	    vmm_disk_name(sb));
	if (jailed && m->cfg.uid_base != 0) {
		sb->uid = m->cfg.uid_base + (uid_t)sb->pool_idx;
		sb->gid = (gid_t)sb->uid;
	} else {
		sb->uid = m->cfg.vmm_uid;
		sb->gid = m->cfg.vmm_gid;
	}
}

int
vmm_kernel_cmdline(const struct vmm_sandbox *sb, char *buf, size_t len)
{
	const struct vmm *m = sb->m;
	char gw[INET_ADDRSTRLEN], ip[INET_ADDRSTRLEN], tsc[32] = "";
	int n;

	inet_ntop(AF_INET, &sb->gateway, gw, sizeof(gw));
	inet_ntop(AF_INET, &sb->guest_ip, ip, sizeof(ip));
	/* TCG can hang calibrating the TSC against the PIT without it */
	if (m->cfg.tsc_khz != 0)
		snprintf(tsc, sizeof(tsc), " tsc_early_khz=%u", m->cfg.tsc_khz);
	/*
	 * TCG executes no guest instruction speculatively, so the guest
	 * kernel's Spectre-class mitigations (retpolines, RSB filling, lfence
	 * barriers) guard nothing there and only slow every syscall and
	 * context switch, and the cold start after a restore most of all.
	 * Under KVM they stay on.
	 */
	n = snprintf(buf, len, "%s%s%s berth.ip=%s/%u berth.gw=%s berth.dns=%s "
	    "berth.id=%s", sb->tpl.cmdline, tsc,
	    (sb->accel != VMM_ACCEL_AUTO ? sb->accel : m->accel) ==
	    VMM_ACCEL_TCG ? " mitigations=off" : "", ip, sb->prefix, gw,
	    m->cfg.dns != NULL ? m->cfg.dns : gw, sb->id);
	return n < 0 || (size_t)n >= len ? -E2BIG : 0;
}

/* ---- manager ---- */

static uint32_t
host_tsc_khz(void)
{
	char line[256];
	double mhz = 0;
	FILE *f;

	if ((f = fopen("/proc/cpuinfo", "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "cpu MHz", 7) == 0) {
			char *c = strchr(line, ':');

			if (c != NULL)
				mhz = strtod(c + 1, NULL);
			break;
		}
	}
	fclose(f);
	return (uint32_t)(mhz * 1000);
}

struct vmm *
vmm_new(struct event_base *base, const struct vmm_config *cfg, char *err,
    size_t errlen)
{
	struct vmm *m;
	int rc;

	if (cfg->state_dir == NULL || cfg->state_dir[0] != '/') {
		errf(err, errlen, -EINVAL, "state_dir must be an absolute path");
		return NULL;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL) {
		errf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	m->base = base;
	m->cfg = *cfg;
	if ((m->be = vmm_backend_lookup(cfg->backend)) == NULL) {
		errf(err, errlen, -EINVAL, "unknown VMM backend '%s' (qemu, "
		    "firecracker)", cfg->backend);
		goto fail;
	}
	snprintf(m->state_dir, sizeof(m->state_dir), "%s", cfg->state_dir);
	if (strpbrk(cfg->state_dir, "'\"\\ \t\n,") != NULL) {
		/* paths go into qemu options and exec: shell commands */
		errf(err, errlen, -EINVAL, "state_dir %s: no quotes, blanks, "
		    "backslashes or commas", cfg->state_dir);
		goto fail;
	}
	if (strlen(cfg->state_dir) > 60) {
		/* unix socket paths: <state_dir>/<id up to 48>/qmp.sock < 108 */
		errf(err, errlen, -ENAMETOOLONG, "state_dir %s longer than 60 "
		    "characters: VMM control socket paths would not fit",
		    cfg->state_dir);
		goto fail;
	}
	snprintf(m->vmm_binary, sizeof(m->vmm_binary), "%s",
	    cfg->vmm_binary != NULL ? cfg->vmm_binary :
	    strcmp(m->be->name, "qemu") == 0 ? "qemu-system-x86_64" :
	    "firecracker");
	snprintf(m->tap_prefix, sizeof(m->tap_prefix), "%s",
	    cfg->tap_prefix != NULL ? cfg->tap_prefix : "bth");
	snprintf(m->mkfs, sizeof(m->mkfs), "%s",
	    cfg->mkfs != NULL ? cfg->mkfs : "mkfs.ext4");
	snprintf(m->dns, sizeof(m->dns), "%s", cfg->dns != NULL ? cfg->dns : "");
	m->cfg.state_dir = m->state_dir;
	m->cfg.vmm_binary = m->vmm_binary;
	m->cfg.tap_prefix = m->tap_prefix;
	m->cfg.mkfs = m->mkfs;
	m->cfg.dns = m->dns[0] != '\0' ? m->dns : NULL;
	m->cfg.backend = m->be->name;
	if (m->cfg.pool.s_addr == 0)
		inet_pton(AF_INET, "10.200.0.0", &m->cfg.pool);
	if (m->cfg.pool_plen == 0)
		m->cfg.pool_plen = 16;
	if (m->cfg.mem_mib == 0)
		m->cfg.mem_mib = 256;
	if (m->cfg.vcpus == 0)
		m->cfg.vcpus = 1;
	if (m->cfg.max_mem_mib == 0)
		m->cfg.max_mem_mib = 4096;
	if (m->cfg.max_vcpus == 0)
		m->cfg.max_vcpus = 4;
	if (m->cfg.disk_mib == 0)
		m->cfg.disk_mib = 1024;
	if (m->cfg.ready_timeout_ms == 0)
		m->cfg.ready_timeout_ms = 90000;
	if (m->cfg.op_timeout_ms == 0)
		m->cfg.op_timeout_ms = 30000;
	if (m->cfg.idle_pause_ms == 0)
		m->cfg.idle_pause_ms = 5 * 60 * 1000;
	if (m->cfg.max_checkpoints == 0)
		m->cfg.max_checkpoints = 16;
	if (m->cfg.max_layers == 0)
		m->cfg.max_layers = 8;
	if (m->cfg.max_layers < 2)
		m->cfg.max_layers = 2;
	if (m->cfg.idle_suspend_ms == 0)
		m->cfg.idle_suspend_ms = 30 * 60 * 1000;
	if (m->cfg.max_lifetime_ms == 0)
		m->cfg.max_lifetime_ms = VMM_NEVER;
	if (m->cfg.idle_net_bytes == 0)
		m->cfg.idle_net_bytes = 64 * 1024;
	if (m->cfg.console_max == 0)
		m->cfg.console_max = 4 << 20;
	if (m->cfg.console_rate == 0)
		m->cfg.console_rate = 1 << 20;
	if (m->cfg.cpu_pct == 0)
		m->cfg.cpu_pct = 100;
	if (m->cfg.mem_overhead_mib == 0)
		m->cfg.mem_overhead_mib = 256;
	if (m->cfg.pids_max == 0)
		m->cfg.pids_max = 1024;
	if (m->cfg.idle_cpu_pct == 0)
		m->cfg.idle_cpu_pct = 10;
	else if (m->cfg.idle_cpu_pct >= VMM_IDLE_CPU_OFF)
		m->cfg.idle_cpu_pct = 0;	/* cpu_busy: never */
	if (m->cfg.tsc_khz == 0)
		m->cfg.tsc_khz = host_tsc_khz();
	if (strlen(m->tap_prefix) > 6) {
		errf(err, errlen, -EINVAL, "tap_prefix '%s' longer than 6",
		    m->tap_prefix);
		goto fail;
	}
	if ((m->pool = vmm_pool_new(m->cfg.pool, m->cfg.pool_plen, err,
	    errlen)) == NULL)
		goto fail;
	if (m->cfg.jail && m->cfg.uid_base != 0 &&
	    (m->cfg.uid_count < vmm_pool_size(m->pool) ||
	    m->cfg.uid_base + (uint64_t)m->cfg.uid_count > UINT32_MAX - 1)) {
		errf(err, errlen, -EINVAL, "VM uid range %u-%u: %zu sandboxes "
		    "(the address pool's size) need as many uids",
		    (unsigned)m->cfg.uid_base, (unsigned)(m->cfg.uid_base +
		    m->cfg.uid_count - 1), vmm_pool_size(m->pool));
		vmm_pool_free(m->pool);
		m->pool = NULL;
		goto fail;
	}
	if ((rc = mkdirs(m->state_dir, 0750)) < 0) {
		errf(err, errlen, rc, "state dir %s: %s", m->state_dir,
		    strerror(-rc));
		goto fail;
	}
	/* An unprivileged VMM must pass through (not list) the state dir
	 * to reach its own sandbox dir. */
	if (m->cfg.vmm_uid != 0 && chmod(m->state_dir, 0711) < 0) {
		errf(err, errlen, -errno, "state dir %s: %s", m->state_dir,
		    strerror(errno));
		goto fail;
	}
	if (m->cfg.kvm_trial_ms == 0)
		m->cfg.kvm_trial_ms = 20000;
	switch (cfg->accel) {
	case VMM_ACCEL_TCG:
	case VMM_ACCEL_KVM:
		m->accel = cfg->accel;
		m->accel_known = 1;
		snprintf(m->accel_why, sizeof(m->accel_why), "forced by config");
		break;
	default: {
		char why[200];

		/* The probe can only rule KVM out (cheaply, before any VM
		 * is booted); proving it takes a real boot (accel.c). */
		if (cfg->kvm_probe_skip) {
			m->kvm_possible = 1;
			snprintf(why, sizeof(why), "skipped");
		} else {
			m->kvm_possible = vmm_kvm_probe(800, why,
			    sizeof(why)) == 1;
		}
		if (m->kvm_possible) {
			m->accel = VMM_ACCEL_KVM;
			snprintf(m->accel_why, sizeof(m->accel_why), "not "
			    "proven yet: the first boot of a template under "
			    "KVM decides, TCG if it fails (probe: %s)", why);
		} else {
			m->accel = VMM_ACCEL_TCG;
			m->accel_known = 1;
			snprintf(m->accel_why, sizeof(m->accel_why),
			    "probe: %s", why);
		}
		break;
	}
	}
	if (m->be->init != NULL && (rc = m->be->init(m, err, errlen)) < 0)
		goto fail;
	vmm_cap_init(m);
	return m;
fail:
	vmm_pool_free(m->pool);
	free(m);
	return NULL;
}

enum vmm_accel
vmm_accel(const struct vmm *m, const char **why)
{
	if (why != NULL)
		*why = m->accel_why;
	return m->accel;
}

const char *
vmm_backend_name(const struct vmm *m)
{
	return m->be->name;
}

static void
sb_free(struct vmm_sandbox *sb)
{
	struct vmm_waiter *w;

	if (sb->m->be->release != NULL)
		sb->m->be->release(sb);
	if (sb->mkfs_watch != NULL)
		vmm_child_unwatch(sb->mkfs_watch);
	if (sb->idle_ev != NULL)
		event_free(sb->idle_ev);
	if (sb->later_ev != NULL)
		event_free(sb->later_ev);
	if (sb->prep_ev != NULL)
		event_free(sb->prep_ev);
	if (sb->merge_ev != NULL)
		event_free(sb->merge_ev);
	vmm_ident_cancel(sb);
	if (sb->ram_image >= 0)
		close(sb->ram_image);
	while ((w = sb->waiters) != NULL) {
		sb->waiters = w->next;
		free(w);
	}
	vmm_template_free(&sb->tpl);
	free(sb);
}

void
vmm_free(struct vmm *m)
{
	struct vmm_sandbox *sb;

	if (m == NULL)
		return;
	while ((sb = m->list) != NULL) {
		m->list = sb->next;
		sb_free(sb);
	}
	vmm_cap_free(m);
	if (m->room_ev != NULL)
		event_free(m->room_ev);
	vmm_ready_free_all(m);
	vmm_pool_free(m->pool);
	if (m->cfg.cgroups)
		vmm_cgroup_parent_remove(m);
	free(m);
}

struct vmm_sandbox *
vmm_sandbox_find(struct vmm *m, const char *id)
{
	struct vmm_sandbox *sb;

	for (sb = m->list; sb != NULL; sb = sb->next)
		if (strcmp(sb->id, id) == 0 && !sb->hidden)
			return sb;
	return NULL;
}

/* A ready snapshot's build is nobody's sandbox: not listed. */
struct vmm_sandbox *
vmm_sandbox_next(struct vmm *m, struct vmm_sandbox *prev)
{
	struct vmm_sandbox *sb = prev == NULL ? m->list : prev->next;

	while (sb != NULL && sb->hidden)
		sb = sb->next;
	return sb;
}

void
vmm_sandbox_info(const struct vmm_sandbox *sb, struct vmm_info *out)
{
	memset(out, 0, sizeof(*out));
	out->id = sb->id;
	out->state = sb->state;
	out->reason = sb->reason;
	out->tap = sb->tap;
	out->guest_ip = sb->guest_ip;
	out->gateway = sb->gateway;
	out->prefix = sb->prefix;
	memcpy(out->mac, sb->mac, 6);
	out->disk = sb->disk;
	out->dir = sb->dir;
	out->pid = sb->pid;
	out->standby_pid = sb->standby_pid;
	out->standby_ready = sb->standby_ready;
	out->mem_mib = sb->mem_mib;
	out->vcpus = sb->vcpus;
	out->accel = sb->accel;
	out->jailed = sb->jailed;
	out->resumable = sb->state == VMM_FAILED && (sb->pid > 0 ||
	    sb->restore_failed);
	out->uid = sb->uid;
	out->gid = sb->gid;
	out->created_ms = sb->created_ms;
	out->last_activity_ms = sb->last_activity_ms;
	out->busy = sb->busy;
	out->op = sb->op;
	out->preparing = sb->busy && sb->preparing;
	out->ready_key = sb->ready_key;
	out->moving = sb->moving;
	out->from_snapshot = sb->from_snapshot;
	out->ram_shared = sb->ram_shared;
	out->balloon = sb->tpl.balloon;
	out->cap_refused = sb->cap_refused;
}

void
vmm_sandbox_usage(const struct vmm_sandbox *sb, struct vmm_usage *u)
{
	if (!sb->jailed) {
		memset(u, 0, sizeof(*u));
		return;
	}
	vmm_cgroup_usage(sb, u);
	u->console_paused = sb->console_paused;
}

const char *
vmm_sandbox_id(const struct vmm_sandbox *sb)
{
	return sb->id;
}

enum vmm_state
vmm_sandbox_state(const struct vmm_sandbox *sb)
{
	return sb->state;
}

void
vmm_sandbox_set_user(struct vmm_sandbox *sb, void *user)
{
	sb->user = user;
}

void *
vmm_sandbox_user(const struct vmm_sandbox *sb)
{
	return sb->user;
}

/* ---- idle policy ---- */

static uint64_t
lim(uint64_t v, uint64_t dflt)
{
	return v == 0 ? dflt : v;
}

static void idle_arm(struct vmm_sandbox *sb);

/* CPU time of the VMM process so far, in ms (utime + stime); -1 if
 * unknown. */
static int64_t
vmm_cpu_ms(pid_t pid)
{
	static long hz;
	char path[64], buf[1024], *p;
	unsigned long long ut, st;

	if (pid <= 0)
		return -1;
	if (hz <= 0 && (hz = sysconf(_SC_CLK_TCK)) <= 0)
		hz = 100;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (vmm_read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	/* after "(comm)": state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime */
	if ((p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %*c %*d %*d "
	    "%*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (int64_t)((ut + st) * 1000 / (unsigned long long)hz);
}

/* Bytes through the sandbox's tap both ways (its own network use: the
 * connections it opens, what it downloads), -1 if unknown. */
static int64_t
tap_bytes(const struct vmm_sandbox *sb)
{
	static const char *const f[] = { "rx_bytes", "tx_bytes" };
	char path[96], buf[32];
	int64_t sum = 0;
	int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s",
		    sb->tap, f[i]);
		if (vmm_read_small(path, buf, sizeof(buf)) < 0)
			return -1;
		sum += strtoll(buf, NULL, 10);
	}
	return sum;
}

/* Start a new CPU and network sampling window (the sandbox just began to
 * run). */
static void
cpu_sample(struct vmm_sandbox *sb)
{
	sb->cpu_ms = vmm_cpu_ms(sb->pid);
	sb->cpu_at_ms = vmm_now_ms();
	sb->net_bytes = tap_bytes(sb);
}

/* Did the guest use the network since the last sample (more than
 * idle_net_bytes through its tap, either way)? Starts the next window. */
static int
net_busy(struct vmm_sandbox *sb)
{
	int64_t was = sb->net_bytes, now = tap_bytes(sb);

	sb->net_bytes = now;
	return was >= 0 && now >= was &&
	    (uint64_t)(now - was) > sb->m->cfg.idle_net_bytes;
}

/* Did the guest work by itself since the last sample: its VMM used at
 * least idle_cpu_pct of one core per vCPU over the window? A guest that
 * compiles with nobody watching is not idle (one busy vCPU is a whole
 * core). Per vCPU: an idle guest's own floor grows with them (under TCG
 * each vCPU's timer ticks cost its thread ~5 % of a core: a 2-vCPU
 * guest doing nothing sat at 10 % and was never paused). Starts the
 * next window. */
static int
cpu_busy(struct vmm_sandbox *sb)
{
	int64_t was = sb->cpu_ms, now_cpu = vmm_cpu_ms(sb->pid);
	uint64_t at = sb->cpu_at_ms, now = vmm_now_ms();

	sb->cpu_ms = now_cpu;
	sb->cpu_at_ms = now;
	if (sb->m->cfg.idle_cpu_pct == 0 || was < 0 || now_cpu < 0 ||
	    now <= at || now_cpu < was)
		return 0;
	return (uint64_t)(now_cpu - was) * 100 >=
	    (now - at) * sb->m->cfg.idle_cpu_pct * (sb->vcpus ? sb->vcpus : 1);
}

static int op_begin(struct vmm_sandbox *sb, enum vmm_op op, const char *cause,
    vmm_done_cb cb, void *arg, char *err, size_t errlen);

static void
idle_fire(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_sandbox *sb = arg;
	struct vmm *m = sb->m;
	uint64_t now = vmm_now_ms(), idle = now - sb->last_activity_ms;
	uint64_t ip = lim(sb->idle_pause_ms, m->cfg.idle_pause_ms);
	uint64_t is = lim(sb->idle_suspend_ms, m->cfg.idle_suspend_ms);
	uint64_t life = lim(sb->max_lifetime_ms, m->cfg.max_lifetime_ms);
	char err[VMM_ERRLEN];

	(void)fd;
	(void)what;
	if (sb->busy || sb->deleting)
		return;		/* op_finish re-arms */
	if (life != VMM_NEVER && now - sb->created_mono_ms >= life &&
	    (sb->state == VMM_RUNNING || sb->state == VMM_PAUSED ||
	    sb->state == VMM_SUSPENDED)) {
		(void)op_begin(sb, VMM_OP_STOP, "lifetime", NULL, NULL, err,
		    sizeof(err));
		return;
	}
	if (sb->state == VMM_RUNNING && sb->holds > 0) {
		/* a command runs in it for the API (exec) */
		sb->last_activity_ms = now;
		idle_arm(sb);
		return;
	}
	if (sb->state == VMM_RUNNING && ((ip != VMM_NEVER && idle >= ip) ||
	    (is != VMM_NEVER && idle >= is)) && (cpu_busy(sb) | net_busy(sb))) {
		/* no visitor, but the guest is at work or on the network:
		 * that is activity */
		sb->last_activity_ms = now;
		idle_arm(sb);
		return;
	}
	if (sb->state == VMM_RUNNING && ip != VMM_NEVER && idle >= ip) {
		(void)op_begin(sb, VMM_OP_PAUSE, "idle", NULL, NULL, err,
		    sizeof(err));
		return;
	}
	if ((sb->state == VMM_RUNNING || sb->state == VMM_PAUSED) &&
	    is != VMM_NEVER && idle >= is) {
		(void)op_begin(sb, VMM_OP_SUSPEND, "idle", NULL, NULL, err,
		    sizeof(err));
		return;
	}
	idle_arm(sb);
}

/* One timer per sandbox, armed for its next deadline. Activity only
 * moves a timestamp; the timer finds out when it fires and re-arms, so
 * the proxy can report activity per read without touching the heap. */
static void
idle_arm(struct vmm_sandbox *sb)
{
	struct vmm *m = sb->m;
	uint64_t now = vmm_now_ms(), next = VMM_NEVER, t;
	uint64_t ip = lim(sb->idle_pause_ms, m->cfg.idle_pause_ms);
	uint64_t is = lim(sb->idle_suspend_ms, m->cfg.idle_suspend_ms);
	uint64_t life = lim(sb->max_lifetime_ms, m->cfg.max_lifetime_ms);

	if (sb->idle_ev == NULL)
		return;
	event_del(sb->idle_ev);
	if (sb->deleting)
		return;
	if (sb->state == VMM_RUNNING && ip != VMM_NEVER)
		next = sb->last_activity_ms + ip;
	if ((sb->state == VMM_RUNNING || sb->state == VMM_PAUSED) &&
	    is != VMM_NEVER && (t = sb->last_activity_ms + is) < next)
		next = t;
	if ((sb->state == VMM_RUNNING || sb->state == VMM_PAUSED ||
	    sb->state == VMM_SUSPENDED) && life != VMM_NEVER &&
	    (t = sb->created_mono_ms + life) < next)
		next = t;
	if (next == VMM_NEVER)
		return;
	vmm_timer_ms(sb->idle_ev, next > now ? next - now : 0);
}

void
vmm_activity_hold(struct vmm_sandbox *sb, int on)
{
	if (on)
		sb->holds++;
	else if (sb->holds > 0)
		sb->holds--;
	vmm_activity(sb);
}

/* A pause or suspend waiting for its guest's reclaim is given up: the
 * caller finishes the operation (VMM_ABANDONED, not the sandbox's
 * failure). */
static void
prepare_abandon(struct vmm_sandbox *sb)
{
	sb->preparing = 0;
	sb->abandoned = 1;
	if (sb->prep_ev != NULL)
		event_del(sb->prep_ev);
}

void
vmm_activity(struct vmm_sandbox *sb)
{
	uint64_t now = vmm_now_ms();

	/* a visitor, or a command of someone's, while the guest gives
	 * memory back for the idle policy's pause or suspend: it is not
	 * idle after all. (One asked for through the API goes on: what it
	 * sees may be the activity that came before it, reported late.) */
	if (sb->busy && sb->preparing && sb->prep_idle) {
		prepare_abandon(sb);
		vmm_backend_done_later(sb, 0, VMM_RUNNING, VMM_ABANDONED);
	}

	/* The guest's own network use is counted from here: the bytes of
	 * the visitors' traffic so far are not its own work. (At most
	 * once a second: two sysfs reads.) */
	if (now - sb->net_at_ms >= 1000) {
		sb->net_bytes = tap_bytes(sb);
		sb->net_at_ms = now;
	}
	sb->last_activity_ms = now;
}

void
vmm_sandbox_set_idle(struct vmm_sandbox *sb, uint64_t idle_pause_ms,
    uint64_t idle_suspend_ms, uint64_t max_lifetime_ms)
{
	sb->idle_pause_ms = idle_pause_ms;
	sb->idle_suspend_ms = idle_suspend_ms;
	sb->max_lifetime_ms = max_lifetime_ms;
	if (!sb->busy)
		idle_arm(sb);
}

/* ---- operations ---- */

static void
set_state(struct vmm_sandbox *sb, enum vmm_state st)
{
	enum vmm_state old = sb->state;

	if (old == st)
		return;
	sb->state = st;
	vmm_cap_soon(sb->m);
	if (sb->m->cfg.on_state != NULL && !sb->hidden)
		sb->m->cfg.on_state(sb, old, st, sb->m->cfg.cb_arg);
}

static void
emit(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, const char *cause)
{
	struct vmm_event ev;

	if (sb->m->cfg.on_event == NULL || sb->hidden)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.time_ms = vmm_wall_ms();
	ev.id = sb->id;
	ev.op = op;
	ev.ok = ok;
	ev.reason = reason != NULL ? reason : "";
	ev.duration_ms = dur;
	ev.state = sb->state;
	ev.cause = cause != NULL ? cause : "api";
	sb->m->cfg.on_event(sb, &ev, sb->m->cfg.cb_arg);
}

static void
run_waiters(struct vmm_sandbox *sb, struct vmm_waiter *w, enum vmm_op op,
    int ok, const char *reason, uint64_t dur)
{
	struct vmm_waiter *next;

	for (; w != NULL; w = next) {
		next = w->next;
		if (w->cb != NULL)
			w->cb(sb, op, ok, reason, dur, w->arg);
		free(w);
	}
}

static void sb_destroy(struct vmm_sandbox *sb);

/*
 * The caps (cfg.max_running, max_resident): the VMMs there (running,
 * paused, and those still being suspended, stopped or deleted: a VMM
 * suspending holds its memory until it is gone) never pass a cap.
 * An operation that would take self (NULL: a sandbox being created)
 * past one is admitted and first suspends the least recently active idle
 * sandboxes counted against it (tagged evict_for with its room_seq),
 * then waits (room_gate) until their suspends have ended. Admitted
 * operations without a VMM yet are pending: each counts in the balance
 * (room for all once those going have gone, or one more must go), and
 * room now goes to them in the order they were admitted, so no two
 * count on one suspend and a late one (a victim woken meanwhile among
 * them) queues behind. 1: room comes (wait), 0: room now, -EUSERS with
 * err naming the cap when every candidate is busy or held (a command
 * runs in it).
 */
#define CAP_TRIES 8

static int
cap_going(const struct vmm_sandbox *o)
{
	return !o->hidden && o->pid > 0 && (o->deleting || (o->busy &&
	    (o->op == VMM_OP_SUSPEND || o->op == VMM_OP_STOP ||
	    o->op == VMM_OP_DELETE)));
}

/* admitted (a create, start, wake or restore) and no VMM started yet
 * (one whose suspend failed will fail: it wants no room) */
static int
cap_pending(const struct vmm_sandbox *o)
{
	return !o->hidden && !o->deleting && o->busy && o->room_pending &&
	    o->room_err[0] == '\0';
}

int
vmm_cap_room(struct vmm *m, struct vmm_sandbox *self, const char *id,
    const char *what, char *err, size_t errlen)
{
	struct vmm_sandbox *o, **who = NULL, *failed[CAP_TRIES];
	struct vmm_evict_cand *c = NULL;
	struct vmm_cap_count cnt;
	size_t n, i;
	int nfailed = 0, pick, resident_cap, k, rc = 0;
	unsigned seq = self != NULL ? self->room_seq : m->room_seq + 1;
	char e[VMM_ERRLEN];

	if ((m->cfg.max_running == 0 && m->cfg.max_resident == 0) ||
	    (self != NULL && self->hidden))
		return 0;
	for (n = 0, o = m->list; o != NULL; o = o->next)
		n++;
	if (n > 0 && ((c = calloc(n, sizeof(*c))) == NULL ||
	    (who = calloc(n, sizeof(*who))) == NULL)) {
		free(c);
		return errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (;;) {
		memset(&cnt, 0, sizeof(cnt));
		for (i = 0, o = m->list; o != NULL; o = o->next) {
			int cls = o == self ? VMM_CAPC_NONE : vmm_cap_class(o);

			if (o != self && cap_going(o)) {
				/* as it was: its VMM is still there */
				int run = o->state == VMM_RUNNING ||
				    o->state == VMM_CREATING;

				cls = run ? VMM_CAPC_RUNNING : VMM_CAPC_PAUSED;
				cnt.going_running += run;
				cnt.going_resident++;
			} else if (o != self && cap_pending(o)) {
				/* it will run; a paused one waking is resident
				 * already (cls) */
				int ahead = self == NULL ||
				    o->room_seq < self->room_seq;

				cnt.pending_running++;
				cnt.ahead_running += ahead;
				if (cls == VMM_CAPC_NONE) {
					cnt.pending_resident++;
					cnt.ahead_resident += ahead;
				}
			}
			cnt.running += cls == VMM_CAPC_RUNNING;
			cnt.resident += cls != VMM_CAPC_NONE;
			who[i] = o;
			c[i].last_activity_ms = o->last_activity_ms;
			c[i].state = cls == VMM_CAPC_RUNNING ? VMM_RUNNING :
			    cls == VMM_CAPC_PAUSED ? VMM_PAUSED : VMM_STOPPED;
			c[i].busy = o->busy;
			c[i].held = o->holds > 0;
			c[i].hidden = o->hidden || o->deleting;
			c[i].skip = o == self;
			for (k = 0; k < nfailed; k++)
				c[i].skip |= failed[k] == o;
			i++;
		}
		switch (vmm_cap_decide(&cnt, m->cfg.max_running,
		    m->cfg.max_resident, &resident_cap)) {
		case VMM_CAP_ROOM:
			rc = 0;
			goto out;
		case VMM_CAP_WAIT:
			rc = 1;
			goto out;
		default:
			break;
		}
		if ((pick = vmm_evict_pick(c, i, resident_cap)) < 0 ||
		    nfailed == CAP_TRIES) {
			rc = errf(err, errlen, -EUSERS, "cannot %s sandbox %s: "
			    "%s %u reached, and no %s sandbox can be suspended "
			    "to make room (each is busy with an operation or "
			    "runs a command)", what, id, resident_cap ?
			    "vm_max_resident" : "vm_max_running", resident_cap ?
			    m->cfg.max_resident : m->cfg.max_running,
			    resident_cap ? "running or paused" : "running");
			break;
		}
		o = who[pick];
		snprintf(o->op_why, sizeof(o->op_why), "%s %u reached (a %s "
		    "of %s)", resident_cap ? "vm_max_resident" :
		    "vm_max_running", resident_cap ? m->cfg.max_resident :
		    m->cfg.max_running, what, id);
		if (op_begin(o, VMM_OP_SUSPEND, "capacity", NULL, NULL, e,
		    sizeof(e)) < 0) {
			o->op_why[0] = '\0';
			failed[nfailed++] = o;
		} else
			o->evict_for = seq;
	}
out:
	free(c);
	free(who);
	return rc;
}

/* A suspend a cap asked for (victim, for the operation of room_seq seq;
 * cap: "vm_max_resident 2 reached (a wake of s7)") failed and its VMM is
 * still there: that operation fails, at the cap, rather than count on
 * room that does not come (or take another's). */
static void room_kick(struct vmm *);

static void
room_evict_failed(struct vmm_sandbox *victim, unsigned seq,
    const char *cap, const char *reason)
{
	struct vmm *m = victim->m;
	struct vmm_sandbox *o;
	size_t n = strcspn(cap, "(");

	for (o = m->list; o != NULL; o = o->next)
		if (o != victim && o->room_seq == seq && cap_pending(o))
			break;
	if (o == NULL)
		return;
	while (n > 0 && cap[n - 1] == ' ')
		n--;
	snprintf(o->room_err, sizeof(o->room_err), "cannot %s sandbox %s: "
	    "%.*s, and suspending %s to make room failed: %s",
	    o->room_what[0] ? o->room_what : "create", o->id, (int)n, cap,
	    victim->id, reason);
	room_kick(m);
}

/*
 * sb's operation goes on with go now, or, when the caps make it wait
 * (vmm_cap_room: 1), once the suspends under way have ended (room_poll,
 * at each end of an operation and every VMM_ROOM_POLL_MS), failing to
 * state fail when no room came within VMM_ROOM_MS. 0: gone on or
 * waiting; <0 with err: nothing done.
 */
#define VMM_ROOM_MS	60000
#define VMM_ROOM_POLL_MS 250

static void room_fire(evutil_socket_t, short, void *);

static int
room_gate(struct vmm_sandbox *sb, const char *what, vmm_room_go go,
    enum vmm_state fail, char *err, size_t errlen)
{
	struct vmm *m = sb->m;
	int rc;

	/* past a gate already in this operation (a start's disk made, a
	 * ready snapshot's restore fallen back to a boot): its slot is
	 * counted, it keeps it */
	if (sb->room_passed)
		return go(sb, err, errlen);
	if (!sb->room_pending) {
		sb->room_seq = ++m->room_seq;
		sb->room_pending = 1;
	}
	snprintf(sb->room_what, sizeof(sb->room_what), "%s", what);
	if (sb->room_err[0] != '\0') {
		rc = errf(err, errlen, -EUSERS, "%s", sb->room_err);
		sb->room_err[0] = '\0';
		sb->room_pending = 0;
		sb->cap_refused = 1;
		return rc;
	}
	if ((rc = vmm_cap_room(m, sb, sb->id, what, err, errlen)) < 0) {
		sb->room_pending = 0;
		sb->cap_refused = rc == -EUSERS;
		return rc;
	}
	if (rc == 0) {
		sb->room_pending = 0;
		sb->room_passed = 1;
		return go(sb, err, errlen);
	}
	if (m->room_ev == NULL &&
	    (m->room_ev = evtimer_new(m->base, room_fire, m)) == NULL)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->room_go = go;
	sb->room_fail = fail;
	sb->room_until = vmm_now_ms() + VMM_ROOM_MS;
	m->room_waiting = 1;
	vmm_timer_ms(m->room_ev, VMM_ROOM_POLL_MS);
	return 0;
}

/* an operation ended (or a sandbox went): those waiting look again */
static void
room_kick(struct vmm *m)
{
	if (m->room_ev != NULL && m->room_waiting)
		vmm_timer_ms(m->room_ev, 0);
}

static void op_finish(struct vmm_sandbox *, int, enum vmm_state,
    const char *);

/* Each one waiting, in the order admitted, once: go on, wait on, or
 * fail (at a cap: no room in time, or the suspend that was to make it
 * failed). (Looked up afresh each time: an operation's end may end
 * others.) */
static void
room_fire(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *m = arg;
	struct vmm_sandbox *sb, *o;
	char err[VMM_ERRLEN];
	vmm_room_go go;
	int rc;

	(void)fd;
	(void)what;
	m->room_pass++;
	for (;;) {
		for (sb = NULL, o = m->list; o != NULL; o = o->next)
			if (o->room_go != NULL && o->room_pass != m->room_pass &&
			    (sb == NULL || o->room_seq < sb->room_seq))
				sb = o;
		if (sb == NULL)
			break;
		sb->room_pass = m->room_pass;
		if (sb->room_err[0] != '\0') {
			rc = errf(err, sizeof(err), -EUSERS, "%s", sb->room_err);
			sb->room_err[0] = '\0';
		} else
			rc = vmm_cap_room(m, sb, sb->id, sb->room_what, err,
			    sizeof(err));
		if (rc == 1 && vmm_now_ms() < sb->room_until)
			continue;
		go = sb->room_go;
		sb->room_go = NULL;
		sb->room_pending = 0;
		if (rc == 1)
			rc = errf(err, sizeof(err), -ETIMEDOUT, "cannot %s "
			    "sandbox %s: the caps (vm_max_running %u, "
			    "vm_max_resident %u) left no room within %d s: "
			    "the suspends to make it have not ended",
			    sb->room_what, sb->id, m->cfg.max_running,
			    m->cfg.max_resident, VMM_ROOM_MS / 1000);
		else if (rc == 0) {
			sb->room_passed = 1;
			rc = go(sb, err, sizeof(err));
		}
		if (rc < 0) {
			/* a cap's refusal (not the go's): say so */
			sb->cap_refused = !sb->room_passed;
			if (sb->op == VMM_OP_RESTORE) {
				sb->fork_pending = 0;
				sb->restoring[0] = '\0';
			}
			op_finish(sb, 0, sb->room_fail, err);
		}
	}
	m->room_waiting = 0;
	for (o = m->list; o != NULL; o = o->next)
		m->room_waiting |= o->room_go != NULL;
	if (m->room_waiting)
		vmm_timer_ms(m->room_ev, VMM_ROOM_POLL_MS);
}

static void merge_check(struct vmm_sandbox *);
static int merge_inline(struct vmm_sandbox *, enum vmm_state, const char *);
static int add_waiter(struct vmm_sandbox *, vmm_done_cb, void *);
static int op_refused(struct vmm_sandbox *, enum vmm_state, int);

/* The single end of every operation. */
static void
op_finish(struct vmm_sandbox *sb, int ok, enum vmm_state st,
    const char *reason)
{
	struct vmm_waiter *w = sb->waiters;
	enum vmm_op op = sb->op;
	uint64_t dur = vmm_now_ms() - sb->op_t0;
	unsigned evict_for = sb->evict_for;
	char why[VMM_ERRLEN], cap[sizeof(sb->op_why)];

	snprintf(why, sizeof(why), "%s", reason != NULL ? reason : "");
	snprintf(cap, sizeof(cap), "%s", sb->op_why);
	sb->evict_for = 0;
	if (sb->op_why[0] != '\0') {
		/* the manager began it (a cap made room): the event says why */
		char r[VMM_ERRLEN];

		if (!ok)
			snprintf(r, sizeof(r), "%s (asked because %s)", why,
			    sb->op_why);
		else
			snprintf(r, sizeof(r), "%s: %s%s%s",
			    op == VMM_OP_SUSPEND ? "suspended" :
			    vmm_op_name(op), sb->op_why, why[0] ? "; " : "",
			    why);
		snprintf(why, sizeof(why), "%s", r);
		sb->op_why[0] = '\0';
	}
	sb->waiters = NULL;
	sb->busy = 0;
	sb->room_go = NULL;
	sb->room_pending = sb->room_passed = 0;
	sb->room_err[0] = '\0';
	room_kick(sb->m);
	/* an operation ended: the standby budget looks at it afresh */
	sb->standby_mine = sb->standby_lost = 0;
	if (sb->abandoned)
		sb->abandoned = 0;	/* nothing failed: it runs */
	else if (!ok)
		snprintf(sb->reason, sizeof(sb->reason), "%s", why);
	else if (st != VMM_FAILED)
		sb->reason[0] = '\0';
	if (op == VMM_OP_DELETE) {
		emit(sb, op, ok, why, dur, sb->cause);
		run_waiters(sb, w, op, ok, why, dur);
		sb_destroy(sb);
		return;
	}
	if (st == VMM_RUNNING && sb->state != VMM_RUNNING)
		sb->last_activity_ms = vmm_now_ms();	/* a wake is activity */
	if (st == VMM_RUNNING)
		cpu_sample(sb);
	/* a retried restore that fails again leaves the snapshot the latest */
	sb->restore_failed = !ok && st == VMM_FAILED && op == VMM_OP_RESUME &&
	    (sb->op_from == VMM_SUSPENDED ||
	    (sb->op_from == VMM_FAILED && sb->restore_failed));
	set_state(sb, st);
	/* a cap's suspend that failed with the VMM still there made no
	 * room: the operation it was for fails rather than wait on it */
	if (evict_for != 0 && !ok && op == VMM_OP_SUSPEND && sb->pid > 0)
		room_evict_failed(sb, evict_for, cap, reason != NULL ?
		    reason : "");
	vmm_standby_rebalance(sb->m);
	meta_write(sb);
	emit(sb, op, ok, why, dur, sb->cause);
	idle_arm(sb);
	run_waiters(sb, w, op, ok, why, dur);
	sb->cap_refused = 0;
	if (op == VMM_OP_MERGE && ok)
		vmm_layers_gc(sb->m);	/* what it no longer stands on */
	else if (ok)
		merge_check(sb);
	/* a create took what the ready pool had: it makes the next one */
	if (op == VMM_OP_CREATE && ok && sb->from_snapshot && !sb->hidden)
		vmm_ready_pool_refill(sb->m, sb->ready_key);
}

static int disk_start(struct vmm_sandbox *sb, char *err, size_t errlen);

/*
 * Disk layer chains stay bounded: every fork and checkpoint puts a layer
 * under the source (and a fork stands one deeper than its source). Past
 * cfg.max_layers qcow2 files, a running or paused sandbox's layers above
 * the deepest one are merged into its top by its VMM (block-stream: the
 * guest runs on, reads and writes go on meanwhile); the frozen layers it
 * left go once nobody else stands on them. A sandbox that is not running
 * is merged when it runs next. The merge starts from the loop, after the
 * operation that made the chain deep has answered.
 */
/* How many layers sb's chain has when it is past cfg.max_layers and its
 * VMM (in state st) can merge it, base set to the layer merged down to;
 * 0 when no merge is due. */
static unsigned
merge_due(struct vmm_sandbox *sb, enum vmm_state st, char *base,
    size_t baselen)
{
	int n;

	if (!sb->layered || sb->hidden || sb->m->be->merge == NULL ||
	    (st != VMM_RUNNING && st != VMM_PAUSED))
		return 0;
	if ((n = vmm_chain_base(sb->disk, base, baselen)) <= 0 ||
	    (unsigned)n <= sb->m->cfg.max_layers)
		return 0;
	return (unsigned)n;
}

static void
merge_fire(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_sandbox *sb = arg;
	char base[PATH_MAX], err[VMM_ERRLEN];
	enum vmm_state st = sb->state;
	unsigned n;

	(void)fd;
	(void)what;
	if (sb->busy || sb->deleting ||
	    (n = merge_due(sb, st, base, sizeof(base))) == 0)
		return;
	if (add_waiter(sb, NULL, NULL) < 0)
		return;
	sb->busy = 1;
	sb->op = VMM_OP_MERGE;
	sb->cause = "vmm";
	sb->op_from = st;
	sb->op_t0 = vmm_now_ms();
	if (sb->m->be->merge(sb, base, n, err, sizeof(err)) < 0) {
		(void)op_refused(sb, st, -EIO);
		emit(sb, VMM_OP_MERGE, 0, err, 0, "vmm");
	}
}

/*
 * An operation that made the chain deep (a capture, a fork's create, a
 * restore to a checkpoint) merges before it answers, as its last step:
 * the sandbox is busy once, not twice, so a request that follows it does
 * not find a merge in progress. 0 when the merge is under way.
 */
static int
merge_inline(struct vmm_sandbox *sb, enum vmm_state st, const char *reason)
{
	char base[PATH_MAX], err[VMM_ERRLEN];
	unsigned n;

	if ((sb->op != VMM_OP_FORK && sb->op != VMM_OP_CHECKPOINT &&
	    sb->op != VMM_OP_RESTORE && sb->op != VMM_OP_CREATE) ||
	    (n = merge_due(sb, st, base, sizeof(base))) == 0)
		return -1;
	snprintf(sb->merge_reason, sizeof(sb->merge_reason), "%s",
	    reason != NULL ? reason : "");
	sb->merge_t0 = vmm_now_ms();
	sb->merge_st = st;
	sb->merge_tail = 1;
	if (sb->m->be->merge(sb, base, n, err, sizeof(err)) < 0) {
		sb->merge_tail = 0;
		emit(sb, VMM_OP_MERGE, 0, err, 0, "vmm");
		return -1;
	}
	return 0;
}

static void
merge_check(struct vmm_sandbox *sb)
{
	struct timeval tv = { 0, 0 };

	if (!sb->layered || sb->hidden || sb->m->be->merge == NULL ||
	    (sb->state != VMM_RUNNING && sb->state != VMM_PAUSED))
		return;
	if (sb->merge_ev == NULL &&
	    (sb->merge_ev = event_new(sb->m->base, -1, 0, merge_fire, sb)) ==
	    NULL)
		return;
	event_add(sb->merge_ev, &tv);
}

/* A create that was to restore the ready snapshot and could not: it
 * boots instead (its VMM is gone by now), and an event says why. 0 when
 * the boot is under way. */
static int
ready_fallback(struct vmm_sandbox *sb, const char *reason)
{
	char why[VMM_ERRLEN * 2], err[VMM_ERRLEN];

	sb->ready_pending = 0;
	sb->from_snapshot = 0;
	sb->ram_shared = 0;
	sb->ready_key[0] = '\0';
	sb->ready_memfd = -1;
	sb->disk_ready = 0;
	if (unlink(sb->disk) < 0 && errno != ENOENT)
		return -1;
	snprintf(why, sizeof(why), "restoring the ready snapshot failed, "
	    "booting instead: %s", reason);
	emit(sb, VMM_OP_SNAPSHOT, 0, why, 0, "vmm");
	meta_write(sb);
	if (disk_start(sb, err, sizeof(err)) < 0)
		return -1;
	return 0;
}

void
vmm_backend_done(struct vmm_sandbox *sb, int ok, enum vmm_state state,
    const char *reason)
{
	if (!sb->busy)
		return;
	if (sb->op == VMM_OP_DELETE) {
		sb_destroy(sb);
		return;
	}
	if ((sb->op == VMM_OP_CREATE || sb->op == VMM_OP_RESTORE) &&
	    sb->fork_pending) {
		sb->fork_pending = 0;
		sb->fork_base[0] = '\0';
		sb->restoring[0] = '\0';
	}
	if (sb->merge_tail) {
		/* the merge that ended an operation: an event of its own,
		 * then the operation's answer as it was */
		char r[VMM_ERRLEN];

		sb->merge_tail = 0;
		emit(sb, VMM_OP_MERGE, ok, reason, vmm_now_ms() - sb->merge_t0,
		    "vmm");
		if (ok)
			vmm_layers_gc(sb->m);
		snprintf(r, sizeof(r), "%s", sb->merge_reason);
		op_finish(sb, 1, state == VMM_FAILED ? state : sb->merge_st, r);
		return;
	}
	if (sb->op == VMM_OP_CREATE && sb->ready_pending) {
		if (!ok && sb->pid <= 0 && ready_fallback(sb, reason) == 0)
			return;
		sb->ready_pending = 0;
		if (ok)
			sb->from_snapshot = 1;
	}
	if (ok && merge_inline(sb, state, reason) == 0)
		return;
	op_finish(sb, ok, state, reason);
}

void
vmm_backend_exited(struct vmm_sandbox *sb, const char *reason)
{
	sb->merge_tail = 0;
	if (sb->busy) {
		if (sb->op == VMM_OP_DELETE)
			return;
		op_finish(sb, 0, VMM_FAILED, reason);
		return;
	}
	snprintf(sb->reason, sizeof(sb->reason), "%s", reason);
	set_state(sb, VMM_FAILED);
	meta_write(sb);
	emit(sb, VMM_OP_EXIT, 0, reason, 0, "vmm");
	idle_arm(sb);
}

void
vmm_emit(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    const char *cause)
{
	emit(sb, op, ok, reason, 0, cause);
}

void
vmm_backend_failed(struct vmm_sandbox *sb, const char *reason)
{
	snprintf(sb->reason, sizeof(sb->reason), "%s", reason);
	if (sb->busy) {
		if (sb->op != VMM_OP_DELETE)
			op_finish(sb, 0, VMM_FAILED, reason);
		return;
	}
	set_state(sb, VMM_FAILED);
	meta_write(sb);
	emit(sb, VMM_OP_GUEST, 0, reason, 0, "vmm");
	idle_arm(sb);
}

/* Delete's last step, when the VMM process is gone. */
static void
sb_destroy(struct vmm_sandbox *sb)
{
	struct vmm *m = sb->m;
	struct vmm_sandbox **pp;
	struct vmm_waiter *w;
	char err[VMM_ERRLEN], why[VMM_ERRLEN];
	uint64_t dur;
	int ok = 1, rc;

	why[0] = '\0';
	if (sb->tap[0] != '\0' && !m->cfg.external_taps &&
	    (rc = nc_link_delete(sb->tap, err,
	    sizeof(err))) < 0 && rc != -ENODEV) {
		ok = 0;
		snprintf(why, sizeof(why), "%s", err);
	}
	if (sb->jailed)
		vmm_cgroup_remove(sb);
	if ((rc = rmtree(sb->dir)) < 0 && ok) {
		ok = 0;
		snprintf(why, sizeof(why), "remove %s: %s", sb->dir,
		    strerror(-rc));
	}
	if (sb->guest_ip.s_addr != 0)
		vmm_pool_release(m->pool, sb->guest_ip);
	for (pp = &m->list; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == sb) {
			*pp = sb->next;
			break;
		}
	}
	sb->deleting = 1;
	w = sb->waiters;
	sb->waiters = NULL;
	sb->busy = 0;
	dur = vmm_now_ms() - sb->op_t0;
	sb->pid = 0;
	set_state(sb, VMM_STOPPED);
	emit(sb, VMM_OP_DELETE, ok, why, dur, sb->cause);
	run_waiters(sb, w, VMM_OP_DELETE, ok, why, dur);
	if (!sb->hidden) {
		char cd[PATH_MAX];

		/* its checkpoints go with it */
		if (vmm_checkpoint_dir(m, sb->id, cd, sizeof(cd)) == 0)
			(void)rmtree(cd);
	}
	if (sb->layered && !sb->hidden) {
		sb_free(sb);
		vmm_layers_gc(m);	/* the layers it stood on may go */
		vmm_ready_gc(m);
	} else if (sb->ready_key[0] != '\0' && !sb->hidden) {
		sb_free(sb);
		vmm_ready_gc(m);	/* its base layer may go now */
	} else
		sb_free(sb);
	/* its standby's place may go to another */
	vmm_standby_rebalance(m);
}

static int
add_waiter(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg)
{
	struct vmm_waiter *w, **pp;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -ENOMEM;
	w->cb = cb;
	w->arg = arg;
	for (pp = &sb->waiters; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = w;
	return 0;
}

static void
later_fire(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_sandbox *sb = arg;
	char why[VMM_ERRLEN];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "%s", sb->later_reason);
	vmm_backend_done(sb, sb->later_ok, sb->later_state, why);
}

static int
sb_events(struct vmm_sandbox *sb)
{
	sb->idle_ev = event_new(sb->m->base, -1, 0, idle_fire, sb);
	sb->later_ev = event_new(sb->m->base, -1, 0, later_fire, sb);
	return sb->idle_ev != NULL && sb->later_ev != NULL ? 0 : -ENOMEM;
}

void
vmm_backend_done_later(struct vmm_sandbox *sb, int ok, enum vmm_state state,
    const char *reason)
{
	struct timeval tv = { 0, 0 };

	sb->later_ok = ok;
	sb->later_state = state;
	snprintf(sb->later_reason, sizeof(sb->later_reason), "%s",
	    reason != NULL ? reason : "");
	event_add(sb->later_ev, &tv);
}

static void mkfs_exited(pid_t pid, int status, void *arg);
static int disk_boot(struct vmm_sandbox *, char *, size_t);

/* Disk: a sparse file formatted by mkfs in a child process, so a slow
 * mkfs never holds the event loop. */
static int
disk_start(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	char size[32], logp[PATH_MAX];
	char *argv[] = { sb->m->mkfs, "-F", "-q", "-L", "berth-data", "-E",
	    "lazy_itable_init=1,lazy_journal_init=1", sb->disk, NULL };
	/* A root overlay: an empty qcow2 over the template's image (its
	 * size), which qemu opens with the backing named explicitly (the
	 * path in the header is not what a jailed qemu sees). */
	char qsize[32];
	char *qargv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F",
	    "raw", "-b", (char *)sb->tpl.rootfs, sb->disk, qsize, NULL };
	/* Over a ready snapshot's frozen layer instead: unsafe (-u) since
	 * its size is known, so qemu-img opens no backing file. */
	char base[PATH_MAX];
	char *rargv[] = { "qemu-img", "create", "-q", "-u", "-f", "qcow2",
	    "-F", "qcow2", "-b", base, sb->disk, qsize, NULL };
	int fd, ov = sb->tpl.root_overlay;

	if (sb->fork_base[0] != '\0')
		snprintf(base, sizeof(base), "%s", sb->fork_base);
	else if (sb->ready_key[0] != '\0' && vmm_ready_path(sb->m,
	    sb->ready_key, "disk.qcow2", base, sizeof(base)) < 0)
		return errf(err, errlen, -ENAMETOOLONG, "path too long");

	snprintf(size, sizeof(size), "%u", sb->disk_mib);
	snprintf(qsize, sizeof(qsize), "%uM", sb->disk_mib);
	fd = open(sb->disk, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd < 0)
		return errf(err, errlen, -errno, "disk %s: %s", sb->disk,
		    strerror(errno));
	if ((sb->jailed && sb->uid != 0 && fchown(fd, sb->uid, sb->gid) < 0) ||
	    (!ov && ftruncate(fd, (off_t)sb->disk_mib << 20) < 0)) {
		int e = errno;

		close(fd);
		return errf(err, errlen, -e, "disk %s: %s", sb->disk,
		    strerror(e));
	}
	close(fd);
	(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
	sb->mkfs_pid = vmm_spawn(sb->ready_key[0] != '\0' ||
	    sb->fork_base[0] != '\0' ? rargv : ov ? qargv : argv, logp, 0, 0,
	    err, errlen);
	if (sb->mkfs_pid < 0)
		return -EIO;
	sb->mkfs_watch = vmm_child_watch(sb->m->base, sb->mkfs_pid,
	    mkfs_exited, sb, err, errlen);
	if (sb->mkfs_watch == NULL) {
		kill(sb->mkfs_pid, SIGKILL);
		return -EIO;
	}
	return 0;
}

static void
mkfs_exited(pid_t pid, int status, void *arg)
{
	struct vmm_sandbox *sb = arg;
	char why[VMM_ERRLEN], st[128], tail[256], logp[PATH_MAX];

	(void)pid;
	sb->mkfs_watch = NULL;
	sb->mkfs_pid = 0;
	if (status != 0) {
		vmm_status_text(status, st, sizeof(st));
		(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
		vmm_tail_line(logp, tail, sizeof(tail));
		snprintf(why, sizeof(why), "%s of the disk %s%s%s",
		    sb->tpl.root_overlay ? "qemu-img create" : "mkfs", st,
		    tail[0] ? ": " : "", tail);
		op_finish(sb, 0, VMM_FAILED, why);
		return;
	}
	(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
	(void)unlink(logp);
	sb->disk_ready = 1;
	meta_write(sb);
	if (room_gate(sb, sb->op == VMM_OP_CREATE ? "create" : "start",
	    disk_boot, VMM_FAILED, why, sizeof(why)) < 0)
		op_finish(sb, 0, VMM_FAILED, why);
}

/* Its disk made, a sandbox boots (restores its ready snapshot, a fork's
 * capture): room_gate's go, 0 also when a ready snapshot's failure
 * fell back to a boot. */
static int
disk_boot(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	int rc;

	rc = sb->m->be->boot(sb, sb->ready_pending ? 2 : sb->fork_pending ? 1 :
	    0, err, errlen);
	if (rc < 0 && sb->ready_pending && ready_fallback(sb, err) == 0)
		return 0;
	return rc;
}

/* Does anyone on this host hold tap name or address gw? */
static int
host_holds(const char *tap, struct in_addr gw)
{
	struct ifaddrs *ifa, *i;
	int held = if_nametoindex(tap) != 0;

	if (!held && getifaddrs(&ifa) == 0) {
		for (i = ifa; i != NULL && !held; i = i->ifa_next)
			held = i->ifa_addr != NULL &&
			    i->ifa_addr->sa_family == AF_INET &&
			    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
			    gw.s_addr;
		freeifaddrs(ifa);
	}
	return held;
}

/* A pool index (and the tap name, gateway and guest address from it)
 * whose tap name and gateway address nobody on this host holds; the
 * indexes passed over go back to the pool. With external taps the test
 * or operator made the tap: it must exist, so nothing is passed over. */
int
vmm_pool_alloc_free(struct vmm *m, struct in_addr *gw, struct in_addr *ip,
    char *tap, size_t taplen)
{
	struct in_addr passed[64];
	size_t n = 0, i;
	int idx;

	for (;;) {
		if ((idx = vmm_pool_alloc(m->pool, gw, ip)) < 0)
			break;
		snprintf(tap, taplen, "%s%d", m->tap_prefix, idx);
		if (m->cfg.external_taps || n == sizeof(passed) /
		    sizeof(passed[0]) || !host_holds(tap, *gw))
			break;
		passed[n++] = *ip;
	}
	for (i = 0; i < n; i++)
		vmm_pool_release(m->pool, passed[i]);
	return idx;
}

static int
pool_alloc_free(struct vmm *m, struct vmm_sandbox *sb)
{
	return vmm_pool_alloc_free(m, &sb->gateway, &sb->guest_ip, sb->tap,
	    sizeof(sb->tap));
}

/* Bring the host side of the network up; idempotent (restart, start).
 * The guest's address gets a permanent neighbour entry for its MAC (both
 * fixed for the sandbox's life, one guest per tap): the host never asks
 * by ARP, so the first packet to a guest just resumed from a snapshot
 * (or paused past the neighbour cache's timers) waits for no ARP answer
 * from a guest that is only starting to run again. */
static int
net_setup(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	int rc;

	if (sb->m->cfg.external_taps)
		return 0;
	uid_t owner = sb->uid != 0 ? sb->uid :
	    sb->m->cfg.tap_owner != 0 ? sb->m->cfg.tap_owner : (uid_t)-1;

	if ((rc = nc_link_tap_setup(sb->tap, owner, sb->host_mac,
	    sb->gateway, sb->prefix, err, errlen)) < 0)
		return rc;
	return nc_link_neigh_set(sb->tap, sb->guest_ip, sb->mac, err, errlen);
}

/* An operation refused at once, after its waiter was added: no event
 * (the caller has the error), the state it had; rc passed on. */
static int
op_refused(struct vmm_sandbox *sb, enum vmm_state st, int rc)
{
	struct vmm_waiter *w = sb->waiters;

	sb->waiters = NULL;
	sb->busy = 0;
	sb->room_pending = sb->room_passed = sb->cap_refused = 0;
	sb->room_err[0] = '\0';
	if (sb->state != st)
		set_state(sb, st);
	while (w != NULL) {
		struct vmm_waiter *n = w->next;

		free(w);
		w = n;
	}
	return rc;
}

static int op_backend(struct vmm_sandbox *, enum vmm_op, enum vmm_state,
    char *, size_t);
static int prepare_begin(struct vmm_sandbox *);
static int op_go(struct vmm_sandbox *, char *, size_t);
static void prepare_deadline(evutil_socket_t, short, void *);

static int
op_begin(struct vmm_sandbox *sb, enum vmm_op op, const char *cause,
    vmm_done_cb cb, void *arg, char *err, size_t errlen)
{
	enum vmm_state st = sb->state, target;
	int rc = 0, noop = 0;

	if (sb->deleting)
		return errf(err, errlen, -ENOENT, "sandbox %s is being deleted",
		    sb->id);
	if (sb->busy && sb->preparing && sb->prep_idle &&
	    op == VMM_OP_RESUME) {
		/* Woken while its guest drops its cache for the idle
		 * policy's pause or suspend: the guest still runs, so that
		 * operation is abandoned and the wake is at once, not after
		 * a sleep it would have to undo. (A wake during one the API
		 * asked for joins it, as it joins any sleep under way.) */
		prepare_abandon(sb);
		op_finish(sb, 0, VMM_RUNNING, VMM_ABANDONED);
	}
	if (sb->moving && op != VMM_OP_DELETE)
		return errf(err, errlen, -EBUSY, "sandbox %s: moving to "
		    "another host", sb->id);
	if (sb->busy) {
		if (sb->op == op && op != VMM_OP_DELETE)
			return add_waiter(sb, cb, arg);
		/* A wake that arrives while the sandbox is being paused or
		 * suspended would otherwise fail: callers retry on -EBUSY. */
		return errf(err, errlen, -EBUSY, "sandbox %s: %s in progress",
		    sb->id, vmm_op_name(sb->op));
	}
	switch (op) {
	case VMM_OP_START:
		target = VMM_RUNNING;
		if (st == VMM_RUNNING)
			noop = 1;
		else if (st != VMM_STOPPED && st != VMM_FAILED)
			rc = -EPERM;
		break;
	case VMM_OP_PAUSE:
		target = VMM_PAUSED;
		if (st == VMM_PAUSED)
			noop = 1;
		else if (st != VMM_RUNNING)
			rc = -EPERM;
		break;
	case VMM_OP_SUSPEND:
		target = VMM_SUSPENDED;
		if (st == VMM_SUSPENDED)
			noop = 1;
		else if (st != VMM_RUNNING && st != VMM_PAUSED)
			rc = -EPERM;
		break;
	case VMM_OP_RESUME:
		target = VMM_RUNNING;
		if (st == VMM_RUNNING)
			noop = 1;
		else if (st != VMM_PAUSED && st != VMM_SUSPENDED &&
		    !(st == VMM_FAILED && (sb->restore_failed || sb->pid > 0)))
			rc = -EPERM;
		break;
	case VMM_OP_STOP:
		target = VMM_STOPPED;
		if (st == VMM_STOPPED)
			noop = 1;
		break;
	default:
		return errf(err, errlen, -EINVAL, "bad operation");
	}
	if (rc == -EPERM && op == VMM_OP_RESUME && (st == VMM_FAILED ||
	    st == VMM_STOPPED))
		return errf(err, errlen, rc, "sandbox %s is %s%s%s: nothing to "
		    "resume; start boots it again from its template, keeping "
		    "its disk", sb->id, vmm_state_name(st),
		    sb->reason[0] ? " - " : "", sb->reason);
	if (rc == -EPERM)
		return errf(err, errlen, rc, "sandbox %s is %s: cannot %s",
		    sb->id, vmm_state_name(st), vmm_op_name(op));
	(void)target;
	if (add_waiter(sb, cb, arg) < 0)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->busy = 1;
	sb->op = op;
	sb->cause = cause;
	sb->op_from = st;
	sb->op_t0 = vmm_now_ms();
	if (noop) {
		/* nothing to do, but the answer still comes from the loop */
		vmm_backend_done_later(sb, 1, st, "");
		goto out;
	}
	/* a suspend to make room under a cap is urgent (an operation goes
	 * on past the cap until it ends): no reclaim first */
	if ((op == VMM_OP_PAUSE || op == VMM_OP_SUSPEND) &&
	    st == VMM_RUNNING && strcmp(cause, "capacity") != 0 &&
	    prepare_begin(sb) == 0)
		goto out;
	if (op == VMM_OP_START || op == VMM_OP_RESUME)
		rc = room_gate(sb, op == VMM_OP_START ? "start" : "wake", op_go,
		    st, err, errlen);
	else
		rc = op_backend(sb, op, st, err, errlen);
out:
	if (rc < 0)
		return op_refused(sb, st, rc);
	if (sb->idle_ev != NULL)
		event_del(sb->idle_ev);
	return 0;
}

/* room_gate's go of op_begin: the backend's turn */
static int
op_go(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return op_backend(sb, sb->op, sb->op_from, err, errlen);
}

/* What op asks of the backend (and of the network first, for what
 * boots), the sandbox busy with it, from state st. */
static int
op_backend(struct vmm_sandbox *sb, enum vmm_op op, enum vmm_state st,
    char *err, size_t errlen)
{
	const struct vmm_backend *be = sb->m->be;
	int rc = 0;

	switch (op) {
	case VMM_OP_START:
		if ((rc = net_setup(sb, err, errlen)) < 0)
			break;
		set_state(sb, VMM_CREATING);
		if (!sb->disk_ready) {
			/* its create never finished formatting the disk:
			 * nothing on it is worth keeping */
			if (unlink(sb->disk) < 0 && errno != ENOENT) {
				rc = errf(err, errlen, -errno, "disk %s: %s",
				    sb->disk, strerror(errno));
				break;
			}
			rc = disk_start(sb, err, errlen);	/* boots */
			break;
		}
		rc = be->boot(sb, 0, err, errlen);
		break;
	case VMM_OP_PAUSE:
		rc = be->pause(sb, err, errlen);
		break;
	case VMM_OP_SUSPEND:
		rc = be->suspend(sb, err, errlen);
		break;
	case VMM_OP_RESUME:
		if (st == VMM_PAUSED || (st == VMM_FAILED && sb->pid > 0)) {
			rc = be->cont(sb, err, errlen);
		} else {
			if ((rc = net_setup(sb, err, errlen)) < 0)
				break;
			rc = be->boot(sb, 1, err, errlen);
		}
		break;
	case VMM_OP_STOP:
		rc = be->stop(sb, err, errlen);
		break;
	default:
		break;
	}
	return rc;
}

/* The pause or suspend of a running sandbox, its guest asked first to
 * give memory back (vmm_config's sleep_prepare): 0 when that began
 * (the backend's turn comes in vmm_sleep_prepared), -1 when there is
 * nothing to ask. */
static int
prepare_begin(struct vmm_sandbox *sb)
{
	struct vmm *m = sb->m;

	if (m->cfg.sleep_prepare == NULL || sb->hidden ||
	    sb->tpl.agent == NULL)
		return -1;
	if (sb->prep_ev == NULL &&
	    (sb->prep_ev = evtimer_new(m->base, prepare_deadline, sb)) == NULL)
		return -1;
	sb->preparing = 1;
	sb->prep_idle = sb->cause != NULL && strcmp(sb->cause, "idle") == 0;
	sb->prep_activity_ms = sb->last_activity_ms;
	vmm_timer_ms(sb->prep_ev, VMM_PREPARE_MS);
	if (m->cfg.sleep_prepare(sb->id, m->cfg.cb_arg) < 0) {
		event_del(sb->prep_ev);
		sb->preparing = 0;
		return -1;
	}
	return 0;
}

static void
prepare_end(struct vmm_sandbox *sb)
{
	char err[VMM_ERRLEN];
	enum vmm_state st = sb->state;
	int rc;

	if (!sb->preparing)
		return;
	sb->preparing = 0;
	event_del(sb->prep_ev);
	/* the reclaim ran a command in the guest: not a visitor's */
	if (sb->last_activity_ms > sb->prep_activity_ms)
		sb->last_activity_ms = sb->prep_activity_ms;
	if (sb->deleting || !sb->busy ||
	    (sb->op != VMM_OP_PAUSE && sb->op != VMM_OP_SUSPEND))
		return;
	if (sb->state != VMM_RUNNING || sb->pid <= 0) {
		/* it stopped meanwhile (the backend's watcher said so) */
		op_finish(sb, 0, sb->state, "the sandbox stopped before it "
		    "could sleep");
		return;
	}
	if ((rc = op_backend(sb, sb->op, st, err, sizeof(err))) < 0)
		op_finish(sb, 0, st, err);
}

static void
prepare_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	prepare_end(arg);
}

void
vmm_sleep_prepared(struct vmm *m, const char *id)
{
	struct vmm_sandbox *sb = vmm_sandbox_find(m, id);

	if (sb != NULL)
		prepare_end(sb);
}

/* The source's side of a fork: an operation like the others (one at a
 * time, an event, a definite state after it). */
int
vmm_fork_begin(struct vmm_sandbox *sb, enum vmm_op op, const char *layer,
    const char *stream, vmm_done_cb cb, void *arg, char *err, size_t errlen)
{
	enum vmm_state st = sb->state;
	int rc;

	if (add_waiter(sb, cb, arg) < 0)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->busy = 1;
	sb->op = op;
	sb->cause = "api";
	sb->op_from = st;
	sb->op_t0 = vmm_now_ms();
	if ((rc = st == VMM_SUSPENDED ? vmm_freeze_suspended(sb, layer, stream,
	    err, errlen) : sb->m->be->capture(sb, layer, stream, err,
	    errlen)) < 0) {
		rc = op_refused(sb, st, rc);
		if (st == VMM_SUSPENDED)
			vmm_standby_rebalance(sb->m);
		return rc;
	}
	if (sb->idle_ev != NULL)
		event_del(sb->idle_ev);
	return 0;
}

/* room_gate's go of a checkpoint's restore */
static int
restore_boot(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return sb->m->be->boot(sb, 1, err, errlen);
}

/* A checkpoint's restore, in place: the stopped sandbox's snap/state
 * is the checkpoint's, its disk a new layer over the checkpoint's; the
 * backend restores it as it does a fork (identity included). */
int
vmm_restore_begin(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	enum vmm_state st = sb->state;
	int rc;

	if (add_waiter(sb, cb, arg) < 0)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->busy = 1;
	sb->op = VMM_OP_RESTORE;
	sb->cause = "api";
	sb->op_from = st;
	sb->op_t0 = vmm_now_ms();
	sb->fork_pending = 1;
	if ((rc = room_gate(sb, "restore", restore_boot, st, err,
	    errlen)) < 0) {
		sb->fork_pending = 0;
		sb->restoring[0] = '\0';
		return op_refused(sb, st, rc);
	}
	return 0;
}

int
vmm_sandbox_start(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	return op_begin(sb, VMM_OP_START, "api", cb, arg, err, errlen);
}

int
vmm_sandbox_pause(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	return op_begin(sb, VMM_OP_PAUSE, "api", cb, arg, err, errlen);
}

int
vmm_sandbox_suspend(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	return op_begin(sb, VMM_OP_SUSPEND, "api", cb, arg, err, errlen);
}

int
vmm_sandbox_resume(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	return op_begin(sb, VMM_OP_RESUME, "api", cb, arg, err, errlen);
}

int
vmm_sandbox_stop(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	return op_begin(sb, VMM_OP_STOP, "api", cb, arg, err, errlen);
}

int
vmm_sandbox_delete(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen)
{
	if (sb->busy && sb->op == VMM_OP_DELETE)
		return add_waiter(sb, cb, arg) < 0 ?
		    errf(err, errlen, -ENOMEM, "out of memory") : 0;
	if (sb->busy) {
		/* Abandon the operation in flight: its callers learn now. */
		struct vmm_waiter *w = sb->waiters;
		enum vmm_op op = sb->op;
		uint64_t dur = vmm_now_ms() - sb->op_t0;

		sb->waiters = NULL;
		sb->op_why[0] = '\0';
		sb->room_go = NULL;
		sb->room_pending = sb->room_passed = 0;
		sb->evict_for = 0;
		emit(sb, op, 0, "deleted", dur, sb->cause);
		run_waiters(sb, w, op, 0, "deleted", dur);
	}
	if (sb->mkfs_watch != NULL) {
		/* SIGKILL ends mkfs at once: reaping it here is short. */
		kill(sb->mkfs_pid, SIGKILL);
		vmm_child_unwatch(sb->mkfs_watch);
		sb->mkfs_watch = NULL;
		(void)waitpid(sb->mkfs_pid, NULL, 0);
		sb->mkfs_pid = 0;
	}
	if (add_waiter(sb, cb, arg) < 0)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->busy = 1;
	sb->op = VMM_OP_DELETE;
	sb->cause = "api";
	sb->op_from = sb->state;
	sb->op_t0 = vmm_now_ms();
	if (sb->idle_ev != NULL)
		event_del(sb->idle_ev);
	event_del(sb->later_ev);
	/* Kill now, not later: the backend forgets the abandoned operation
	 * at once, so a late reply to it cannot end the delete early. */
	if (sb->m->be->kill(sb, err, errlen) < 0)
		vmm_backend_done_later(sb, 1, VMM_STOPPED, "");
	return 0;
}

/* 0 is the manager's default (berthd's vm_disk, what its API gives a
 * create that names none), so a ready snapshot or pool member made with
 * 0 has the disk of such a create, also for an image smaller than it */
unsigned
vmm_disk_effective(const struct vmm *m, const struct vmm_template *t,
    unsigned disk_mib)
{
	unsigned img, d = disk_mib ? disk_mib : m->cfg.disk_mib;
	struct stat st;

	if (t->root_overlay && t->rootfs != NULL && stat(t->rootfs, &st) == 0) {
		img = (unsigned)((st.st_size + (1 << 20) - 1) >> 20);
		if (d <= img)
			return img;
	}
	return d;
}

/* Should sb (not yet listed) restore its shape's ready snapshot? Yes:
 * ready_key and ready_pending set. No: why (empty when ready snapshots
 * are off or the template cannot have one), and a build of it started
 * when there is none. */
static void
ready_choose(struct vmm_sandbox *sb, const struct vmm_sandbox_spec *spec,
    char *why, size_t whylen)
{
	struct vmm *m = sb->m;
	struct vmm_ready_info ri;
	char key[VMM_READY_KEY], err[VMM_ERRLEN];
	int fd = -1, rc;

	why[0] = '\0';
	sb->ready_memfd = -1;
	if (!m->cfg.ready_snapshots || spec->boot ||
	    (sb->hidden && !sb->pooled) ||
	    !sb->tpl.root_overlay || sb->tpl.agent == NULL ||
	    strcmp(m->be->name, "qemu") != 0)
		return;
	/* the shape: memory, vCPUs and disk (sb's, as sb_create made them) */
	vmm_ready_key(m, spec->tpl, sb->mem_mib, sb->vcpus, sb->disk_mib, key);
	if (vmm_ready_lookup(m, key, &ri) < 0) {
		if (sb->pooled)
			return;
		rc = vmm_ready_build(m, spec->tpl, sb->mem_mib, sb->vcpus,
		    sb->disk_mib, NULL, NULL, NULL, err, sizeof(err));
		snprintf(why, whylen, "booted: no ready snapshot of template "
		    "%s with %u MiB, %u vCPUs and a %u MiB disk yet (%s)",
		    sb->tpl.name, sb->mem_mib, sb->vcpus, sb->disk_mib,
		    rc == 0 ? "building it now" : rc == -EBUSY ?
		    "another one is being built" : err);
		return;
	}
	/* the key has the disk: a safety net (a ready.conf of before) */
	if (ri.disk_mib != sb->disk_mib) {
		snprintf(why, whylen, "booted: a disk of %u MiB, the ready "
		    "snapshot's is %u MiB", sb->disk_mib, ri.disk_mib);
		return;
	}
	if (m->cfg.jail && (fd = vmm_ready_memfd(m, key, err,
	    sizeof(err))) < 0) {
		snprintf(why, whylen, "booted: the ready snapshot %s: %s", key,
		    err);
		return;
	}
	snprintf(sb->ready_key, sizeof(sb->ready_key), "%s", key);
	sb->ready_pending = 1;
	sb->ram_shared = 1;
	sb->ready_memfd = fd;
}

static int sb_create(struct vmm *m, const struct vmm_sandbox_spec *spec,
    const char *hidden_key, const struct vmm_sandbox *fork_src,
    const char *fork_base, const char *fork_stream, vmm_done_cb cb,
    void *arg, struct vmm_sandbox **out, char *err, size_t errlen);

/*
 * A create served by the ready pool: a member of its shape's pool
 * (restored, identified as itself, paused) becomes the sandbox: its
 * directory renamed to the id's, its MAC the id's, its create op the
 * cont and the identity request (qemu.c, boot mode 3). 0 when claimed,
 * 1 when there is none to claim (the create goes on as usual).
 */
/* room_gate's go of a ready pool member's claim: it runs on */
static int
claim_boot(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return sb->m->be->boot(sb, 3, err, errlen);
}

static int
ready_claim(struct vmm *m, const struct vmm_sandbox_spec *spec,
    unsigned mem, unsigned vcpus, vmm_done_cb cb, void *arg,
    struct vmm_sandbox **out)
{
	struct vmm_sandbox *sb;
	struct vmm_ready_info ri;
	char key[VMM_READY_KEY], nd[PATH_MAX], od[PATH_MAX], err[VMM_ERRLEN];
	unsigned disk;

	if (!m->cfg.ready_snapshots || m->cfg.ready_pool == 0 || spec->boot ||
	    !spec->tpl->root_overlay || spec->tpl->agent == NULL ||
	    strcmp(m->be->name, "qemu") != 0 || m->be->moved == NULL)
		return 1;
	/* pools are of the default disk's key: another disk finds none */
	disk = vmm_disk_effective(m, spec->tpl, spec->disk_mib);
	vmm_ready_key(m, spec->tpl, mem, vcpus, disk, key);
	if (vmm_ready_lookup(m, key, &ri) < 0)
		return 1;
	if (disk != ri.disk_mib)	/* the key has it: a safety net */
		return 1;
	for (sb = m->list; sb != NULL; sb = sb->next)
		if (sb->pooled && sb->pool_ready && !sb->busy &&
		    sb->state == VMM_PAUSED && sb->pid > 0 &&
		    strcmp(sb->build_key, key) == 0)
			break;
	if (sb == NULL)
		return 1;
	snprintf(od, sizeof(od), "%s", sb->dir);
	snprintf(nd, sizeof(nd), "%s/%s", m->state_dir, spec->id);
	if (rename(od, nd) < 0)
		return 1;
	snprintf(sb->id, sizeof(sb->id), "%s", spec->id);
	sb->hidden = sb->pooled = sb->pool_ready = 0;
	sb_layout(sb, sb->jailed);
	m->be->moved(sb);
	nc_link_mac_guest(sb->id, sb->mac);
	if (!m->cfg.external_taps)
		(void)nc_link_neigh_set(sb->tap, sb->guest_ip, sb->mac, err,
		    sizeof(err));
	sb->idle_pause_ms = spec->idle_pause_ms;
	sb->idle_suspend_ms = spec->idle_suspend_ms;
	sb->max_lifetime_ms = spec->max_lifetime_ms;
	sb->created_ms = vmm_wall_ms();
	sb->created_mono_ms = sb->last_activity_ms = vmm_now_ms();
	sb->ready_pending = 1;
	sb->state = VMM_CREATING;
	sb->busy = 1;
	sb->op = VMM_OP_CREATE;
	sb->cause = "api";
	sb->op_from = VMM_CREATING;
	sb->op_t0 = vmm_now_ms();
	sb->room_seq = m->room_seq;
	sb->room_pending = 1;
	if (add_waiter(sb, cb, arg) < 0 ||
	    room_gate(sb, "create", claim_boot, VMM_FAILED, err,
	    sizeof(err)) < 0) {
		/* its qemu is gone or the loop cannot say: the sandbox fails
		 * as a create would */
		snprintf(sb->reason, sizeof(sb->reason), "%s", err);
		vmm_backend_done_later(sb, 0, VMM_FAILED, err);
	}
	meta_write(sb);
	if (m->cfg.on_state != NULL)
		m->cfg.on_state(sb, VMM_STOPPED, VMM_CREATING, m->cfg.cb_arg);
	if (out != NULL)
		*out = sb;
	return 0;
}

int
vmm_sandbox_create(struct vmm *m, const struct vmm_sandbox_spec *spec,
    vmm_done_cb cb, void *arg, struct vmm_sandbox **out, char *err,
    size_t errlen)
{
	return sb_create(m, spec, NULL, NULL, NULL, NULL, cb, arg, out, err,
	    errlen);
}

int
vmm_sandbox_create_hidden(struct vmm *m, const struct vmm_sandbox_spec *spec,
    const char *key, vmm_done_cb cb, void *arg, struct vmm_sandbox **out,
    char *err, size_t errlen)
{
	return sb_create(m, spec, key, NULL, NULL, NULL, cb, arg, out, err,
	    errlen);
}

int
vmm_sandbox_create_fork(struct vmm *m, const struct vmm_sandbox_spec *spec,
    const struct vmm_sandbox *src, const char *base, const char *stream,
    vmm_done_cb cb, void *arg, struct vmm_sandbox **out, char *err,
    size_t errlen)
{
	return sb_create(m, spec, NULL, src, base, stream, cb, arg, out, err,
	    errlen);
}

static int
sb_create(struct vmm *m, const struct vmm_sandbox_spec *spec,
    const char *hidden_key, const struct vmm_sandbox *fork_src,
    const char *fork_base, const char *fork_stream, vmm_done_cb cb,
    void *arg, struct vmm_sandbox **out, char *err, size_t errlen)
{
	struct vmm_sandbox *sb;
	unsigned mem, vcpus;
	char rwhy[VMM_ERRLEN];
	int rc, idx;

	if (!vmm_id_valid(spec->id))
		return errf(err, errlen, -EINVAL, "bad sandbox id '%s': 1-%d of "
		    "a-z, 0-9 and '-' (not first)", spec->id ? spec->id : "",
		    VMM_ID_MAX);
	if (vmm_sandbox_find(m, spec->id) != NULL)
		return errf(err, errlen, -EEXIST, "sandbox %s exists", spec->id);
	if (hidden_key != NULL) {
		struct vmm_sandbox *o;

		for (o = m->list; o != NULL; o = o->next)
			if (strcmp(o->id, spec->id) == 0)
				return errf(err, errlen, -EEXIST, "sandbox %s "
				    "exists", spec->id);
	}
	if (spec->tpl == NULL || spec->tpl->kernel == NULL)
		return errf(err, errlen, -EINVAL, "sandbox %s: no template",
		    spec->id);
	mem = spec->mem_mib ? spec->mem_mib : spec->tpl->mem_mib ?
	    spec->tpl->mem_mib : m->cfg.mem_mib;
	vcpus = spec->vcpus ? spec->vcpus : m->cfg.vcpus;
	if (mem < 64 || mem > m->cfg.max_mem_mib)
		return errf(err, errlen, -EINVAL, "memory %u MiB outside "
		    "64..%u", mem, m->cfg.max_mem_mib);
	if (vcpus > m->cfg.max_vcpus)
		return errf(err, errlen, -EINVAL, "%u vCPUs over the maximum %u",
		    vcpus, m->cfg.max_vcpus);
	if (hidden_key == NULL && (rc = vmm_cap_room(m, NULL, spec->id,
	    "create", err, errlen)) < 0)
		return rc;
	if (hidden_key == NULL)
		m->room_seq++;	/* admitted: its place among those waiting */
	if (hidden_key == NULL && fork_src == NULL && (rc = ready_claim(m, spec,
	    mem, vcpus, cb, arg, out)) == 0)
		return 0;
	if ((sb = calloc(1, sizeof(*sb))) == NULL)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->m = m;
	sb->ram_image = -1;
	snprintf(sb->id, sizeof(sb->id), "%s", spec->id);
	if (hidden_key != NULL) {
		sb->hidden = 1;
		snprintf(sb->build_key, sizeof(sb->build_key), "%s", hidden_key);
		/* a pool member: its cgroup keeps this name once claimed */
		if ((sb->pooled = strncmp(spec->id, "pool-", 5) == 0))
			snprintf(sb->cg_name, sizeof(sb->cg_name), "%s",
			    spec->id);
	}
	sb->state = VMM_CREATING;
	sb->mem_mib = mem;
	sb->vcpus = vcpus;
	sb->disk_mib = spec->disk_mib ? spec->disk_mib : m->cfg.disk_mib;
	sb->idle_pause_ms = spec->idle_pause_ms;
	sb->idle_suspend_ms = spec->idle_suspend_ms;
	sb->max_lifetime_ms = spec->max_lifetime_ms;
	sb->created_ms = vmm_wall_ms();
	sb->created_mono_ms = sb->last_activity_ms = vmm_now_ms();
	nc_link_mac_guest(sb->id, sb->mac);
	nc_link_mac_host(sb->id, sb->host_mac);
	sb->prefix = 30;
	if (tpl_copy(&sb->tpl, spec->tpl) < 0) {
		free(sb);
		return errf(err, errlen, -ENOMEM, "out of memory");
	}
	/* a fork keeps its source's devices (spec->tpl is the source's) */
	/* ... jailed only: qemu punches reported pages out of the file
	 * behind the RAM even when it maps it private (a clone's: the
	 * ready snapshot's image), and only the jail's sealed memfd
	 * refuses that; unjailed, the image of every clone would be hit */
	if (fork_src == NULL)
		sb->tpl.balloon = m->cfg.free_page_reporting &&
		    m->cfg.jail && strcmp(m->be->name, "qemu") == 0;
	if (sb->tpl.root_overlay) {
		struct stat st;

		if (strcmp(m->be->name, "qemu") != 0) {
			sb_free(sb);
			return errf(err, errlen, -ENOTSUP, "template %s: a root "
			    "overlay needs the qemu backend", spec->tpl->name ?
			    spec->tpl->name : "");
		}
		if (stat(sb->tpl.rootfs, &st) < 0) {
			rc = -errno;
			sb_free(sb);
			return errf(err, errlen, rc, "template root %s: %s",
			    spec->tpl->rootfs, strerror(-rc));
		}
		/* at least the image; a larger disk (--disk, or the default)
		 * grows the root (the guest's init resizes its file system
		 * to the disk) */
		sb->disk_mib = vmm_disk_effective(m, &sb->tpl, spec->disk_mib);
	}
	if (fork_src != NULL) {
		/* a fork: its disk a layer over the frozen one, its RAM and
		 * devices the capture's (snap/state, a link to the stream),
		 * then its own identity */
		rwhy[0] = '\0';
		sb->ready_memfd = -1;
		snprintf(sb->fork_base, sizeof(sb->fork_base), "%s", fork_base);
		snprintf(sb->ready_key, sizeof(sb->ready_key), "%s",
		    fork_src->ready_key);
		snprintf(sb->forked_from, sizeof(sb->forked_from), "%s",
		    fork_src->id);
		sb->layered = 1;
		sb->snap_ram = 1;
		sb->fork_pending = 1;
		sb->accel = fork_src->accel;
		sb->disk_mib = fork_src->disk_mib;
	} else
		ready_choose(sb, spec, rwhy, sizeof(rwhy));
	if (sb_events(sb) < 0) {
		sb_free(sb);
		return errf(err, errlen, -ENOMEM, "out of memory");
	}
	/* Tap names come from the pool index: unique while the address is
	 * held, short enough for IFNAMSIZ, and stable across restarts. So
	 * do jailed VMMs' uids. An index whose tap name or gateway address
	 * someone else on this host holds (another berthd with another
	 * state dir and the same tap_prefix or vm_pool) is passed over. */
	if ((idx = pool_alloc_free(m, sb)) < 0) {
		sb_free(sb);
		return errf(err, errlen, idx, "address pool exhausted (%zu "
		    "sandboxes)", vmm_pool_size(m->pool));
	}
	sb->pool_idx = idx;
	sb_layout(sb, m->cfg.jail && strcmp(m->be->name, "qemu") == 0);
	if (mkdir(sb->dir, sb->jailed ? 0700 : 0750) < 0) {
		rc = -errno;
		vmm_pool_release(m->pool, sb->guest_ip);
		sb_free(sb);
		return errf(err, errlen, rc, "%s/%s: %s", m->state_dir, spec->id,
		    rc == -EEXIST ? "exists (left from an earlier sandbox? "
		    "vmm_adopt_all)" : strerror(-rc));
	}
	if (fork_stream != NULL) {
		char sd[PATH_MAX], st[PATH_MAX];

		(void)vmm_path(sb, "snap", sd, sizeof(sd));
		(void)vmm_path(sb, "snap/state", st, sizeof(st));
		if ((mkdir(sd, sb->jailed ? 0700 : 0750) < 0 && errno != EEXIST) ||
		    link(fork_stream, st) < 0) {
			rc = -errno;
			rmtree(sb->dir);
			vmm_pool_release(m->pool, sb->guest_ip);
			sb_free(sb);
			return errf(err, errlen, rc, "fork %s: its state: %s",
			    spec->id, strerror(-rc));
		}
	}
	sb->busy = 1;
	sb->op = VMM_OP_CREATE;
	sb->cause = "api";
	sb->op_from = VMM_CREATING;
	sb->op_t0 = vmm_now_ms();
	if (!sb->hidden) {
		/* admitted under the caps: no slot until its gate (its
		 * disk made), its place kept meanwhile */
		sb->room_seq = m->room_seq;
		sb->room_pending = 1;
		snprintf(sb->room_what, sizeof(sb->room_what), "create");
	}
	/* Tap and disk are set up here, so a create that cannot even start
	 * leaves nothing behind and says why at once. mkfs and the boot
	 * run on: their outcome comes through cb. */
	if ((rc = add_waiter(sb, cb, arg)) < 0)
		errf(err, errlen, rc, "out of memory");
	else if ((!sb->jailed || (rc = vmm_jail_prepare(sb, err,
	    errlen)) == 0) && (rc = net_setup(sb, err, errlen)) == 0 &&
	    (rc = disk_start(sb, err, errlen)) < 0 && !m->cfg.external_taps)
		(void)nc_link_delete(sb->tap, NULL, 0);
	if (rc < 0) {
		rmtree(sb->dir);
		vmm_pool_release(m->pool, sb->guest_ip);
		sb_free(sb);
		return rc;
	}
	sb->next = m->list;
	m->list = sb;
	meta_write(sb);
	if (m->cfg.on_state != NULL && !sb->hidden)
		m->cfg.on_state(sb, VMM_STOPPED, VMM_CREATING, m->cfg.cb_arg);
	if (rwhy[0] != '\0')
		emit(sb, VMM_OP_SNAPSHOT, 1, rwhy, 0, "vmm");
	if (out != NULL)
		*out = sb;
	return 0;
}

/* ---- restart safety ---- */

struct meta {
	char state[32], tap[16], ip[INET_ADDRSTRLEN], tpl_name[64];
	char kernel[PATH_MAX], initrd[PATH_MAX], rootfs[PATH_MAX];
	char cmdline[1024], ready[128], reason[VMM_ERRLEN], accel[8];
	char agent[64], ready_key[VMM_READY_KEY], cg_name[VMM_ID_MAX + 1];
	char moved_key[VMM_READY_KEY];
	int pid, standby_pid, disk_ready, jailed, root_overlay;
	int from_snapshot, ram_shared, snap_ram, ram_anon, layered, balloon;
	int snap_dev, readdress;
	unsigned mem, vcpus, disk, layer_gen;
	unsigned long long created;
};

static int
meta_line(const char *k, const char *v, void *arg)
{
	struct meta *mt = arg;
	static const struct {
		const char *key;
		size_t off, size;
	} text[] = {
#define T(k_, f_) { k_, offsetof(struct meta, f_), sizeof(((struct meta *)0)->f_) }
		T("state", state), T("tap", tap), T("guest_ip", ip),
		T("template", tpl_name), T("kernel", kernel),
		T("initrd", initrd), T("rootfs", rootfs), T("cmdline", cmdline),
		T("ready_line", ready), T("reason", reason), T("accel", accel),
		T("agent", agent), T("ready_key", ready_key),
		T("cgroup_name", cg_name), T("moved_key", moved_key),
#undef T
	};
	static const struct {
		const char *key;
		size_t off;
	} ints[] = {
#define I(k_, f_) { k_, offsetof(struct meta, f_) }
		I("from_snapshot", from_snapshot), I("ram_shared", ram_shared),
		I("snap_ram", snap_ram), I("ram_anon", ram_anon),
		I("layered", layered), I("pid", pid),
		I("standby_pid", standby_pid), I("disk_ready", disk_ready),
		I("jailed", jailed), I("root_overlay", root_overlay),
		I("balloon", balloon), I("snap_dev", snap_dev),
		I("readdress", readdress),
#undef I
	};
	size_t i;

	for (i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		if (strcmp(k, text[i].key) == 0) {
			snprintf((char *)mt + text[i].off, text[i].size, "%s", v);
			return 0;
		}
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (strcmp(k, ints[i].key) == 0) {
			*(int *)(void *)((char *)mt + ints[i].off) = atoi(v);
			return 0;
		}
	if (strcmp(k, "layer_gen") == 0)
		mt->layer_gen = (unsigned)strtoul(v, NULL, 10);
	else if (strcmp(k, "mem_mib") == 0)
		mt->mem = (unsigned)strtoul(v, NULL, 10);
	else if (strcmp(k, "vcpus") == 0)
		mt->vcpus = (unsigned)strtoul(v, NULL, 10);
	else if (strcmp(k, "disk_mib") == 0)
		mt->disk = (unsigned)strtoul(v, NULL, 10);
	else if (strcmp(k, "created_ms") == 0)
		mt->created = strtoull(v, NULL, 10);
	return 0;
}

/* sandbox.conf into mt: 0, or -errno with err (a key given twice, a
 * broken line: the file is not used at all). */
static int
meta_read(const char *path, struct meta *mt, char *err, size_t errlen)
{
	FILE *f;
	int rc;

	memset(mt, 0, sizeof(*mt));
	mt->disk_ready = 1;	/* not recorded before 2026-12: it was */
	if ((f = fopen(path, "re")) == NULL) {
		rc = -errno;
		snprintf(err, errlen, "%s", strerror(errno));
		return rc;
	}
	rc = vmm_kv_read(f, meta_line, mt, err, errlen);
	fclose(f);
	return rc;
}

/* Does process pid run as uid (its real uid)? */
static int
pid_uid_is(pid_t pid, uid_t uid)
{
	char path[64], line[256];
	unsigned long u;
	FILE *f;
	int yes = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Uid: %lu", &u) == 1) {
			yes = (uid_t)u == uid;
			break;
		}
	fclose(f);
	return yes;
}

/* Is pid the VMM of this sandbox (not a recycled pid)? Its command line
 * holds the sandbox directory; a jailed one's root is the jail. */
static int
pid_is_ours(pid_t pid, const struct vmm_sandbox *sb)
{
	const char *dir = sb->dir;
	char path[64], buf[8192], name[VMM_ID_MAX + 16];
	ssize_t n, i;
	int fd;

	if (pid <= 0)
		return 0;
	if (sb->jailed) {
		snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
		if ((n = readlink(path, buf, sizeof(buf) - 1)) > 0) {
			buf[n] = '\0';
			if (strcmp(buf, sb->jdir) != 0)
				return 0;
		} else if (errno != EACCES && errno != EPERM) {
			return 0;	/* gone */
		} else if (!pid_uid_is(pid, sb->uid)) {
			/* without CAP_SYS_PTRACE the root cannot be read:
			 * its uid, the sandbox's own, and its name tell */
			return 0;
		}
		/* a clone claimed from the ready pool keeps its qemu's
		 * name, the pool member's (its cgroup's) */
		snprintf(name, sizeof(name), "berth-%s ", sb->cg_name[0] ?
		    sb->cg_name : sb->id);
		dir = name;
	} else if (sb->cg_name[0] != '\0') {
		/* not jailed: its command line names the pool's directory */
		snprintf(name, sizeof(name), "berth-%s ", sb->cg_name);
		dir = name;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	for (i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return strstr(buf, dir) != NULL;
}

/* End a process that is not our child (left by a previous manager) and
 * wait a little for it to be gone, so what it held is free again. */
static void
reap_orphan(pid_t pid)
{
	struct pollfd pfd;
	int i, pidfd;

	/* A pidfd is readable once the whole thread group is gone (a zombie
	 * leader whose threads still run may hold the tap): up to 5 s, as
	 * a loaded host may take that long to tear a VM down. */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (kill(pid, SIGKILL) < 0) {
		if (pidfd >= 0)
			close(pidfd);
		return;
	}
	if (pidfd >= 0) {
		pfd.fd = pidfd;
		pfd.events = POLLIN;
		while (poll(&pfd, 1, 5000) < 0 && errno == EINTR)
			;
		close(pidfd);
		return;
	}
	for (i = 0; i < 1000 && kill(pid, 0) == 0; i++) {
		char path[64], buf[256];
		ssize_t n;
		int fd;

		/* a zombie (its parent has not reaped it) holds nothing */
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			char *p;

			buf[n] = '\0';
			if ((p = strrchr(buf, ')')) != NULL && p[1] == ' ' &&
			    p[2] == 'Z')
				return;
		}
		usleep(5000);
	}
}

void
vmm_kill_if_ours(pid_t pid, const char *name_prefix)
{
	char path[64], buf[4096], want[128];
	ssize_t n, i;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	for (i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	snprintf(want, sizeof(want), " -name %s", name_prefix);
	if (strstr(buf, want) != NULL)
		reap_orphan(pid);
}

int
vmm_adopt_one(struct vmm *m, const char *id, char *err, size_t errlen)
{
	struct vmm_sandbox *sb;
	struct vmm_template t;
	struct meta mt;
	char path[PATH_MAX], snap[PATH_MAX], why[256];
	int rc, idx;

	snprintf(path, sizeof(path), "%s/%s/sandbox.conf", m->state_dir, id);
	if ((rc = meta_read(path, &mt, why, sizeof(why))) < 0)
		return errf(err, errlen, rc, "%s: %s", path, why);
	if ((sb = calloc(1, sizeof(*sb))) == NULL)
		return errf(err, errlen, -ENOMEM, "out of memory");
	sb->m = m;
	sb->ram_image = -1;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->tap, sizeof(sb->tap), "%s", mt.tap);
	snprintf(sb->reason, sizeof(sb->reason), "%s", mt.reason);
	sb->mem_mib = mt.mem ? mt.mem : m->cfg.mem_mib;
	sb->vcpus = mt.vcpus ? mt.vcpus : m->cfg.vcpus;
	sb->disk_mib = mt.disk ? mt.disk : m->cfg.disk_mib;
	sb->created_ms = mt.created;
	sb->disk_ready = mt.disk_ready;
	sb->accel = strcmp(mt.accel, "kvm") == 0 ? VMM_ACCEL_KVM :
	    strcmp(mt.accel, "tcg") == 0 ? VMM_ACCEL_TCG : VMM_ACCEL_AUTO;
	sb->created_mono_ms = sb->last_activity_ms = vmm_now_ms();
	sb->prefix = 30;
	nc_link_mac_guest(id, sb->mac);
	nc_link_mac_host(id, sb->host_mac);
	memset(&t, 0, sizeof(t));
	t.name = mt.tpl_name;
	t.kernel = mt.kernel;
	t.initrd = mt.initrd[0] ? mt.initrd : NULL;
	t.rootfs = mt.rootfs[0] ? mt.rootfs : NULL;
	t.cmdline = mt.cmdline;
	t.ready_line = mt.ready[0] ? mt.ready : NULL;
	/* none before 2027-01: such a VM's device set has no agent port,
	 * and a restore must see the devices it was saved with */
	t.agent = mt.agent[0] ? mt.agent : NULL;
	t.root_overlay = mt.root_overlay;
	t.balloon = mt.balloon;	/* none before 2026-12 */
	snprintf(sb->ready_key, sizeof(sb->ready_key), "%s", mt.ready_key);
	snprintf(sb->moved_key, sizeof(sb->moved_key), "%s", mt.moved_key);
	sb->from_snapshot = mt.from_snapshot;
	sb->ram_shared = mt.ram_shared;
	sb->snap_ram = mt.snap_ram;
	sb->snap_dev = mt.snap_dev;
	sb->readdress_pending = mt.readdress;
	sb->ram_anon = mt.ram_anon;
	sb->layered = mt.layered;
	sb->layer_gen = mt.layer_gen;
	snprintf(sb->cg_name, sizeof(sb->cg_name), "%s", mt.cg_name);
	sb->ready_memfd = -1;
	if (tpl_copy(&sb->tpl, &t) < 0 || sb_events(sb) < 0) {
		sb_free(sb);
		return errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (inet_pton(AF_INET, mt.ip, &sb->guest_ip) != 1 ||
	    (idx = vmm_pool_claim(m->pool, sb->guest_ip)) < 0) {
		sb_free(sb);
		return errf(err, errlen, -ERANGE, "sandbox %s: address %s not "
		    "free in the pool", id, mt.ip);
	}
	sb->gateway.s_addr = htonl(ntohl(sb->guest_ip.s_addr) - 1);
	sb->pool_idx = idx;
	sb_layout(sb, mt.jailed);
	sb->next = m->list;
	m->list = sb;
	(void)net_setup(sb, err, errlen);	/* reconcile the tap */
	snprintf(snap, sizeof(snap), "%s/snap/state", sb->dir);
	if (pid_is_ours(mt.pid, sb) && (strcmp(mt.state, "running") == 0 ||
	    strcmp(mt.state, "paused") == 0 || strcmp(mt.state, "suspended") == 0)) {
		/* Its VMM lives: running, paused, or in the middle of an
		 * operation the previous manager did not see end (the
		 * backend finds out which from the VMM itself). */
		sb->state = strcmp(mt.state, "paused") == 0 ? VMM_PAUSED :
		    strcmp(mt.state, "suspended") == 0 ? VMM_SUSPENDED :
		    VMM_RUNNING;
		sb->adopt_from = sb->state;
		sb->busy = 1;
		sb->op = VMM_OP_ADOPT;
		sb->cause = "restart";
		sb->op_t0 = vmm_now_ms();
		if (m->be->adopt(sb, mt.pid, err, errlen) < 0)
			op_finish(sb, 0, VMM_FAILED, err);
		return 0;
	}
	/* A VMM whose boot (or any operation but those above) the previous
	 * manager did not see end is in no state worth keeping: it goes,
	 * and the sandbox says why (start boots it again, disk kept). */
	if (pid_is_ours(mt.pid, sb)) {
		reap_orphan(mt.pid);
		snprintf(sb->reason, sizeof(sb->reason), "the manager restarted "
		    "while the sandbox was %s; its VMM (pid %d) was ended: "
		    "start boots it again", mt.state, mt.pid);
		snprintf(mt.state, sizeof(mt.state), "interrupted");
	}
	/* A standby VMM left by the previous manager holds the disk and
	 * the control socket path: it goes, a new one is started below. */
	if (pid_is_ours(mt.standby_pid, sb))
		reap_orphan(mt.standby_pid);
	if (strcmp(mt.state, "suspended") == 0 && access(snap, R_OK) == 0)
		sb->state = VMM_SUSPENDED;
	else if (strcmp(mt.state, "stopped") == 0)
		sb->state = VMM_STOPPED;
	else {
		sb->state = VMM_FAILED;
		if (strcmp(mt.state, "failed") != 0 &&
		    strcmp(mt.state, "interrupted") != 0)
			snprintf(sb->reason, sizeof(sb->reason), "VMM (pid %d) "
			    "gone while the manager was down (was %s)%s", mt.pid,
			    mt.state, strcmp(mt.state, "suspended") == 0 ?
			    " and no snapshot" : "");
	}
	meta_write(sb);
	emit(sb, VMM_OP_ADOPT, sb->state != VMM_FAILED, sb->reason, 0,
	    "restart");
	idle_arm(sb);
	return 0;
}

int
vmm_adopt_all(struct vmm *m, char *err, size_t errlen)
{
	struct dirent *de;
	DIR *d;
	int n = 0;

	if ((d = opendir(m->state_dir)) == NULL)
		return errf(err, errlen, -errno, "%s: %s", m->state_dir,
		    strerror(errno));
	vmm_ready_cleanup(m);
	while ((de = readdir(d)) != NULL) {
		char e[VMM_ERRLEN];

		if (!vmm_id_valid(de->d_name) ||
		    vmm_sandbox_find(m, de->d_name) != NULL)
			continue;
		if (vmm_adopt_one(m, de->d_name, e, sizeof(e)) == 0)
			n++;
		else
			errf(err, errlen, -EIO, "%s", e);	/* last one */
	}
	closedir(d);
	vmm_layers_orphans(m);	/* a capture cut short; then what no
				 * adopted sandbox stands on */
	vmm_ready_gc(m);
	/* standbys for the suspended ones, all of them listed now */
	vmm_standby_rebalance(m);
	return n;
}
