/*
 * vm.c — see vm.h. libvmm owns the VMs; this file translates: libvmm
 * states and events into the store (so the API, netctl and the route
 * table see them), API and wake requests into libvmm operations.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "vm.h"
#include "conf.h"
#include "control.h"
#include "log.h"
#include "path.h"
#include "store.h"
#include "egress.h"
#include "valid.h"
#include "vmm.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * The template builders' sandbox (mktemplate-source's tpl-build-NAME, from
 * the debian template, default vCPUs): its memory and disk, given to the
 * script (ts_env) and the shape of the ready snapshot made for it
 * (builder_kick), so its create restores instead of booting.
 */
#define TB_BUILDER_MEMORY_MIB	2048
#define TB_BUILDER_DISK_MIB	16384

/* Sandboxes a worker is waiting for: told the moment their VM runs. */
struct waking {
	char		 id[PX_SANDBOX_ID_MAX + 1];
	struct waking	*next;
};

static void prehash(const char *name, const char *dir);
static void noop_done(struct vmm_sandbox *, enum vmm_op, int, const char *,
    uint64_t, void *);

static struct {
	struct waking	*waking;
	struct waking	*move_waits;		/* wakes of moving sandboxes */
	struct vmm	*m;
	struct vmm_template tpl;
	int		 have_tpl;		/* tpl loaded */
	int		 ready_on;		/* vm_ready_snapshot */
	int		 build_ready;		/* template_build_ready */
	int		 drop_caches;		/* vm_drop_caches */
	uint64_t	 tpl_max_source;	/* template_max_context, bytes */
	unsigned	 tpl_max_mib;		/* template_max_size */
	uint64_t	 tpl_timeout_ms;	/* template_build_timeout */
	char		 tpl_allow[512];	/* template_build_allow, spaces */
	char		 tdir[PATH_MAX];	/* where tpl came from */
	/* vm_template debian: the default is <state>/templates/debian/current
	 * (tdir), read at each create, built in the background when missing;
	 * def_fail says why its last build failed ("" since one worked) */
	int		 def_debian;
	char		 def_fail[512];
	int		 prehash;	/* moves: versions hashed as built */
	struct px_store	*store;
	struct px_vm_hooks hooks;
	char		 describe[768];
	struct event_base *base;
	char		 state_dir[PATH_MAX];
} V;

int
px_vm_enabled(void)
{
	return V.m != NULL;
}

static void builder_kick(void);

static void
ready_built(const char *key, int ok, const char *reason, uint64_t dur,
    void *arg)
{
	(void)arg;
	if (ok) {
		struct vmm_template t;
		char e[VMM_ERRLEN];

		log_info("the default template's ready snapshot %s built in "
		    "%llu ms: creates restore it", key,
		    (unsigned long long)dur);
		if (V.prehash && V.m != NULL)	/* not at its first move */
			(void)vmm_move_prehash_ready(V.m, key);
		if (V.m != NULL && vmm_template_load(V.tdir, &t, e,
		    sizeof(e)) == 0) {
			vmm_ready_pool_fill(V.m, key, &t, 0, 0);
			vmm_template_free(&t);
		}
		builder_kick();		/* the next one: the builders' */
	} else
		log_warnx("the default template's ready snapshot %s: %s "
		    "(creates boot)", key, reason);
}

static void
ready_built_other(const char *key, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	(void)arg;
	if (ok) {
		log_info("ready snapshot %s built in %llu ms: creates restore it",
		    key, (unsigned long long)dur);
		if (V.prehash && V.m != NULL)
			(void)vmm_move_prehash_ready(V.m, key);
	} else
		log_warnx("ready snapshot %s: %s (creates boot)", key, reason);
}

static void
ready_built_builder(const char *key, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	(void)arg;
	if (ok)
		log_info("the template builders' ready snapshot %s built in "
		    "%llu ms: builders restore it", key,
		    (unsigned long long)dur);
	else
		log_warnx("the template builders' ready snapshot %s: %s "
		    "(builders boot)", key, reason);
}

/*
 * The template builders' ready snapshot (the debian template with
 * TB_BUILDER_MEMORY_MIB, default vCPUs, a TB_BUILDER_DISK_MIB disk),
 * built in the background after the default template's (one at a time:
 * it follows that one's), when debian is the default and
 * template_build_ready says so: else the first builder of a version
 * boots and its create builds it (libvmm), for the next.
 */
static void
builder_kick(void)
{
	struct vmm_template t;
	char e[VMM_ERRLEN], key[VMM_READY_KEY];
	int rc;

	if (V.m == NULL || !V.ready_on || !V.def_debian || !V.build_ready)
		return;
	if (vmm_template_load(V.tdir, &t, e, sizeof(e)) < 0)
		return;
	rc = vmm_ready_build(V.m, &t, TB_BUILDER_MEMORY_MIB, 0,
	    TB_BUILDER_DISK_MIB, ready_built_builder, NULL, key, e, sizeof(e));
	if (rc == 0)
		log_info("the template builders' ready snapshot %s (%u MiB, a "
		    "%u MiB disk): building it (one boot, in the background)",
		    key, TB_BUILDER_MEMORY_MIB, TB_BUILDER_DISK_MIB);
	else if (rc == 1)
		log_info("the template builders' ready snapshot %s is there: "
		    "builders restore it", key);
	else
		log_warnx("the template builders' ready snapshot: %s (the "
		    "first builder boots and builds it)", e);
	vmm_template_free(&t);
}

/* A template's ready snapshot (default memory, vCPUs and disk), built in
 * the background when missing, so the first create already restores it:
 * the default template's at start and after its builds (then the
 * template builders', builder_kick), a template built from an image's
 * after its build. Other shapes are built by the first create that
 * misses them (libvmm). */
static void
ready_kick_dir(const char *dir, int is_default)
{
	struct vmm_template t;
	char e[VMM_ERRLEN], key[VMM_READY_KEY];
	int rc;

	if (V.m == NULL || !V.ready_on)
		return;
	if (vmm_template_load(dir, &t, e, sizeof(e)) < 0)
		return;
	if (t.root_overlay && t.agent != NULL) {
		rc = vmm_ready_build(V.m, &t, 0, 0, 0, is_default ?
		    ready_built : ready_built_other, NULL, key, e, sizeof(e));
		if (rc == 0)
			log_info("template %s: ready snapshot %s: building it "
			    "(one boot, in the background)", t.name, key);
		else if (rc == 1) {
			log_info("template %s: ready snapshot %s is there: "
			    "creates restore it", t.name, key);
			if (is_default) {
				vmm_ready_pool_fill(V.m, key, &t, 0, 0);
				builder_kick();
			}
		}
		else if (rc != -EBUSY)
			log_warnx("template %s: no ready snapshot: %s", t.name, e);
	}
	vmm_template_free(&t);
}

static void
ready_kick(void)
{
	if (V.have_tpl)
		ready_kick_dir(V.tdir, 1);
}

/* The backend and the accelerator with why: it changes when KVM's trial
 * boot decides, so it is read anew each time. */
const char *
px_vm_describe(void)
{
	const char *why = "";
	enum vmm_accel a;

	if (V.m == NULL)	/* with why when px_vm_init turned VMs off */
		return V.describe[0] != '\0' ? V.describe : "off";
	a = vmm_accel(V.m, &why);
	snprintf(V.describe, sizeof(V.describe), "%s, %s%s%s",
	    vmm_backend_name(V.m), a == VMM_ACCEL_KVM ? "KVM" : "TCG",
	    why != NULL && *why ? ": " : "", why != NULL ? why : "");
	return V.describe;
}

/* The accelerator VMs run under now: "kvm", "tcg", or "none" without
 * VMs. */
const char *
px_vm_accel(void)
{
	const char *why = "";

	if (V.m == NULL)
		return "none";
	return vmm_accel(V.m, &why) == VMM_ACCEL_KVM ? "kvm" : "tcg";
}

int
px_vm_wanted(const struct px_config *c, char *why, size_t whylen)
{
	if (c->vmm == PX_VMM_OFF) {
		snprintf(why, whylen, "vmm off in the configuration");
		return 0;
	}
	if (c->vmm == PX_VMM_ON)
		return 1;
	if (geteuid() != 0) {
		snprintf(why, whylen, "not root: no tap devices");
		return 0;
	}
	if (access("/dev/net/tun", R_OK | W_OK) != 0) {
		snprintf(why, whylen, "/dev/net/tun: %s", strerror(errno));
		return 0;
	}
	if (system("command -v qemu-system-x86_64 >/dev/null 2>&1") != 0) {
		snprintf(why, whylen, "qemu-system-x86_64 is not installed");
		return 0;
	}
	return 1;
}

/*
 * The template builder (mktemplate, with the guest's init beside it) and
 * the guest test app it packs. `make install` puts all three in
 * PKGLIBEXECDIR, and an installed berthd uses those. A berthd that runs
 * from its build tree (tests, .ci/demo) uses the source tree's scripts and
 * the build tree's testapp instead, so that an older install never stands
 * in for the code under test; each falls back on the other.
 * $BERTH_MKTEMPLATE and $BERTH_TESTAPP override both.
 */
static int
from_build_tree(void)
{
	char self[PATH_MAX], built[PATH_MAX];
	ssize_t n;

	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
		return 0;
	self[n] = '\0';
	return realpath(BUILDDIR "/proxy/berthd", built) != NULL &&
	    strcmp(self, built) == 0;
}

static int
find_helper(const char *env, const char *installed, const char *built,
    char *out, size_t len)
{
	const char *e = env != NULL ? getenv(env) : NULL;
	const char *c[2];
	int i, b = from_build_tree();

	if (e != NULL && *e != '\0') {
		snprintf(out, len, "%s", e);
		return access(out, X_OK);
	}
	c[0] = b ? built : installed;
	c[1] = b ? installed : built;
	for (i = 0; i < 2; i++) {
		snprintf(out, len, "%s", c[i]);
		if (access(out, X_OK) == 0)
			return 0;
	}
	snprintf(out, len, "%s", c[0]);
	return -1;
}

/*
 * The template builders: mktemplate ("minimal", the busybox guest) and
 * mktemplate-debian ("debian"), each with the guest test app it packs.
 * 0 with mk and app set; -1 (err says what is missing) or -2 (a name
 * berth does not build).
 */
static int
find_builder(const char *name, char *mk, char *app, char *err, size_t errlen)
{
	const char *env;
	int i;

	if (strcmp(name, "debian") == 0) {
		env = "BERTH_MKTEMPLATE_DEBIAN";
		i = find_helper(env, PKGLIBEXECDIR "/mktemplate-debian",
		    SRCDIR "/vmm/guest/mktemplate-debian", mk, PATH_MAX);
	} else if (strcmp(name, "minimal") == 0) {
		env = "BERTH_MKTEMPLATE";
		i = find_helper(env, PKGLIBEXECDIR "/mktemplate",
		    SRCDIR "/vmm/guest/mktemplate", mk, PATH_MAX);
	} else {
		snprintf(err, errlen, "berth builds the templates 'debian' and "
		    "'minimal', not '%s' (netctl template add registers a "
		    "directory)", name);
		return -2;
	}
	if (i != 0) {
		snprintf(err, errlen, "cannot find the template builder %s "
		    "(make install, or set %s)", mk, env);
		return -1;
	}
	if (find_helper("BERTH_TESTAPP", PKGLIBEXECDIR "/testapp",
	    BUILDDIR "/vmm/guest/testapp", app, PATH_MAX) != 0) {
		snprintf(err, errlen, "cannot find the guest test app %s "
		    "(make install, or set BERTH_TESTAPP)", app);
		return -1;
	}
	return 0;
}

/*
 * Starts builder argv (argv[0] the program; its arguments, the last the
 * directory to build or --guest-fingerprint): stdin /dev/null, stdout and stderr into a pipe
 * whose read end (close-on-exec) is *out, in a process group of its own
 * (a timeout kills all of it), holding nothing of berthd's (listeners,
 * clients). The pid, or -1 with err.
 */
static pid_t
spawn_builder(char *const argv[], char *const envs[], const char *app,
    int *out, char *err, size_t errlen)
{
	char agent[PATH_MAX];
	pid_t pid;
	int pfd[2], i, nul;

	/* the guest agent, found as the test app is (the builders' own
	 * search depends on the directory berthd was started in) */
	if (find_helper("BERTH_AGENT", PKGLIBEXECDIR "/berth-agent",
	    BUILDDIR "/vmm/guest/berth-agent", agent, sizeof(agent)) != 0)
		agent[0] = '\0';

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		(void)setpgid(0, 0);
		if ((nul = open("/dev/null", O_RDONLY)) >= 0)
			dup2(nul, STDIN_FILENO);
		dup2(pfd[1], STDOUT_FILENO);
		dup2(pfd[1], STDERR_FILENO);
		if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0)
			for (i = 3; i < 65536; i++)
				close(i);
		setenv("BERTH_TESTAPP", app, 1);
		if (agent[0] != '\0')
			setenv("BERTH_AGENT", agent, 1);
		for (i = 0; envs != NULL && envs[i] != NULL; i++)
			(void)putenv(envs[i]);
		execv(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	*out = pfd[0];
	return pid;
}

/* Builds the default template with mktemplate, waiting for it; on
 * failure err ends with the last line mktemplate wrote (its output also
 * goes on to our stderr). */
static int
build_template(const char *dir, char *err, size_t errlen)
{
	char mk[PATH_MAX], app[PATH_MAX], buf[512], last[256] = "", line[256];
	size_t ll = 0;
	ssize_t n, i;
	pid_t pid;
	int st, fd;

	if (find_builder("minimal", mk, app, err, errlen) != 0)
		return -1;
	if ((pid = spawn_builder((char *[]){ mk, (char *)dir, NULL }, NULL, app,
	    &fd, err, errlen)) < 0)
		return -1;
	/* its last line is the reason */
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		(void)!write(STDERR_FILENO, buf, (size_t)n);
		for (i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				if (ll > 0) {
					line[ll] = '\0';
					memcpy(last, line, ll + 1);
				}
				ll = 0;
			} else if (ll < sizeof(line) - 1) {
				line[ll++] = buf[i];
			}
		}
	}
	close(fd);
	if (ll > 0) {
		line[ll] = '\0';
		memcpy(last, line, ll + 1);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(err, errlen, "waitpid %s: %s", mk, strerror(errno));
			return -1;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "%s %s failed%s%s", mk, dir,
		    last[0] ? ": " : "", last);
		return -1;
	}
	return 0;
}

/*
 * The fingerprint of berth's guest programs (init, agent, test app) as
 * the debian builder would pack them now: mktemplate-debian
 * --guest-fingerprint, run with the environment of a build, so that the
 * one script that packs them is the one place that lists them. A
 * version's template.json records the one it packed ("guest"). 0 with
 * fp (64 hex digits), or -1 with err. At most GF_TIMEOUT_S: a builder
 * that hangs is killed, and berthd starts on without the check.
 */
#define GF_TIMEOUT_S	20

static int
guest_fingerprint(char *fp, size_t fplen, char *err, size_t errlen)
{
	char mk[PATH_MAX], app[PATH_MAX], out[256], buf[256], *nl;
	struct pollfd pfd;
	size_t len = 0;
	ssize_t n;
	time_t t0 = time(NULL);
	pid_t pid;
	int st, fd, i, timedout = 0;

	if (find_builder("debian", mk, app, err, errlen) != 0)
		return -1;
	if ((pid = spawn_builder((char *[]){ mk, "--guest-fingerprint", NULL },
	    NULL, app, &fd, err, errlen)) < 0)
		return -1;
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (time(NULL) - t0 >= GF_TIMEOUT_S) {
			timedout = 1;
			break;
		}
		pfd.revents = 0;
		if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
			break;
		if (pfd.revents == 0)
			continue;
		if ((n = read(fd, buf, sizeof(buf))) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* what does not fit is read and dropped: the builder must
		 * not block on a full pipe */
		for (i = 0; i < n && len < sizeof(out) - 1; i++)
			out[len++] = buf[i];
	}
	close(fd);
	if (timedout) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(err, errlen, "waitpid %s: %s", mk,
			    strerror(errno));
			return -1;
		}
	out[len] = '\0';
	while (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	if ((nl = strrchr(out, '\n')) != NULL)	/* the last line says */
		memmove(out, nl + 1, strlen(nl + 1) + 1);
	if (timedout) {
		snprintf(err, errlen, "%s --guest-fingerprint took more than "
		    "%d s: killed", mk, GF_TIMEOUT_S);
		return -1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "%s --guest-fingerprint failed%s%s", mk,
		    out[0] ? ": " : "", out);
		return -1;
	}
	if (strlen(out) != 64 || strspn(out, "0123456789abcdef") != 64) {
		snprintf(err, errlen, "%s --guest-fingerprint printed '%s', "
		    "not a sha256", mk, out);
		return -1;
	}
	snprintf(fp, fplen, "%s", out);
	return 0;
}

/*
 * 1 if the current debian version (V.tdir) was built from guest
 * programs other than the installed ones (why says which version and
 * how), 0 if they are the same, -1 when that cannot be told (why says
 * why).
 */
static int
debian_stale(char *why, size_t whylen)
{
	char fp[65], e[VMM_ERRLEN], path[PATH_MAX + 16], real[PATH_MAX];
	const char *ver, *had;
	json_error_t jerr;
	json_t *j;
	int rc;

	if (guest_fingerprint(fp, sizeof(fp), e, sizeof(e)) != 0) {
		snprintf(why, whylen, "%s", e);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/template.json", V.tdir);
	if ((j = json_load_file(path, 0, &jerr)) == NULL) {
		snprintf(why, whylen, "%s: %s", path, jerr.text);
		return -1;
	}
	ver = realpath(V.tdir, real) != NULL && strrchr(real, '/') != NULL ?
	    strrchr(real, '/') + 1 : "current";
	had = json_string_value(json_object_get(j, "guest"));
	rc = had == NULL || strcmp(had, fp) != 0;
	if (!rc)
		why[0] = '\0';
	else if (had == NULL)
		snprintf(why, whylen, "version %s records no fingerprint of "
		    "berth's guest programs (an older berth built it): "
		    "building a new version in the background; sandboxes "
		    "are made from %s meanwhile", ver, ver);
	else
		snprintf(why, whylen, "berth's guest programs changed since "
		    "version %s: building a new version in the background; "
		    "sandboxes are made from %s meanwhile", ver, ver);
	json_decref(j);
	return rc;
}

static void
record(const char *id, const char *op, int ok, const char *reason, int64_t dur)
{
	struct px_event ev;
	char err[256];

	memset(&ev, 0, sizeof(ev));
	snprintf(ev.sandbox, sizeof(ev.sandbox), "%s", id);
	snprintf(ev.operation, sizeof(ev.operation), "%s", op);
	snprintf(ev.result, sizeof(ev.result), "%s", ok ? "ok" : "failed");
	snprintf(ev.reason, sizeof(ev.reason), "%s", reason ? reason : "");
	ev.duration_ms = dur;
	if (px_store_event_add(V.store, &ev, NULL, err, sizeof(err)) != PX_STORE_OK)
		log_warnx("sandbox %s: event not recorded: %s", id, err);
}

/* A wake ended: the workers' parked requests (the woken hook: the one
 * sender of the workers' "woken", berthd.c) and the execs waiting
 * (exec.c) go on, or fail with reason. Every answer vm.c gives a wake
 * comes through here: at once from px_vm_wake, or when it ends from
 * wake_finished. */
static void
tell_woken(const char *id, int ok, const char *reason)
{
	/* the workers answer 503 with the reason either way; the control
	 * API tells a refusal at a cap (ok < 0) by its code */
	V.hooks.woken(id, ok > 0, reason);
	V.hooks.exec_woken(id, ok, reason);
}

/* 1 if id was waited for (and is no longer). */
static int
waking_take(const char *id)
{
	struct waking **pp, *w;

	for (pp = &V.waking; (w = *pp) != NULL; pp = &w->next)
		if (strcmp(w->id, id) == 0) {
			*pp = w->next;
			free(w);
			return 1;
		}
	return 0;
}

/* A resume px_vm_wake started has ended (the first of: the sandbox runs,
 * or the operation failed): answer it, once. */
static void
wake_finished(const char *id, int ok, const char *reason)
{
	if (waking_take(id))
		tell_woken(id, ok, ok > 0 ? NULL : reason);
}

static void
on_state(struct vmm_sandbox *sb, enum vmm_state old, enum vmm_state now, void *arg)
{
	struct vmm_info info;
	char addr[INET_ADDRSTRLEN] = "", err[256];

	vmm_sandbox_info(sb, &info);
	/* Parked requests go on first: the store write (fsync) and the new
	 * route table follow, and the workers need neither to proceed. */
	if (now == VMM_RUNNING)
		wake_finished(info.id, 1, NULL);
	if (info.guest_ip.s_addr != 0)
		inet_ntop(AF_INET, &info.guest_ip, addr, sizeof(addr));
	if (px_store_sandbox_set_vm(V.store, info.id, vmm_state_name(now),
	    addr[0] ? addr : NULL, err, sizeof(err)) == PX_STORE_NOTFOUND) {
		/* deleted meanwhile: nothing to record */
		return;
	}
	if (now == VMM_RUNNING && info.tap != NULL && info.guest_ip.s_addr != 0)
		px_eg_sandbox_up(info.id, info.tap, info.guest_ip, info.gateway, info.mac);
	log_info("sandbox %s: %s -> %s%s%s", info.id, vmm_state_name(old),
	    vmm_state_name(now), info.reason && *info.reason ? ": " : "",
	    info.reason ? info.reason : "");
	if (V.hooks.changed != NULL)
		V.hooks.changed();
}

/*
 * libvmm's own decisions (idle pause and suspend, lifetime, a VMM that
 * died) become events here; operations the API or a wake asked for are
 * recorded by whoever asked, with their own names.
 */
static void
on_event(struct vmm_sandbox *sb, const struct vmm_event *ev, void *arg)
{
	if (ev->cause != NULL && strcmp(ev->cause, "api") == 0 &&
	    ev->op != VMM_OP_EXIT)
		return;
	record(ev->id, vmm_op_name(ev->op), ev->ok, ev->reason,
	    (int64_t)ev->duration_ms);
	if (!ev->ok)
		log_warnx("sandbox %s: %s failed: %s", ev->id, vmm_op_name(ev->op),
		    ev->reason);
	else if (ev->op == VMM_OP_MERGE)
		log_info("sandbox %s: merged its disk's layers in %llu ms, "
		    "running on: %s", ev->id,
		    (unsigned long long)ev->duration_ms, ev->reason);
	else if (ev->cause != NULL && strcmp(ev->cause, "capacity") == 0)
		log_info("sandbox %s: %s", ev->id, ev->reason);
}

/* A stored idle limit (0: the default, PX_IDLE_NEVER) as libvmm's. */
static uint64_t
idle_ms(int64_t v)
{
	return v == PX_IDLE_NEVER ? VMM_NEVER : v > 0 ? (uint64_t)v : 0;
}

const char *
px_vm_template_dir(void)
{
	return V.tdir[0] != '\0' ? V.tdir : NULL;
}

int
px_vm_template_check(const char *dir, char *err, size_t errlen, void *arg)
{
	struct vmm_template t;
	char e[VMM_ERRLEN];

	(void)arg;
	if (vmm_template_load(dir, &t, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "%s", e);
		return -1;
	}
	vmm_template_free(&t);
	return 0;
}

void
px_vm_set_idle(const char *id, uint64_t idle_pause_ms,
    uint64_t idle_suspend_ms, uint64_t max_lifetime_ms, void *arg)
{
	struct vmm_sandbox *sb;

	(void)arg;
	if (V.m != NULL && (sb = vmm_sandbox_find(V.m, id)) != NULL)
		vmm_sandbox_set_idle(sb, idle_pause_ms, idle_suspend_ms,
		    max_lifetime_ms);
}

/* ---- template builds (POST /v1/templates/{name}/build) ----
 *
 * One build at a time, in a child process on the event loop: the
 * builder (mktemplate for "minimal", mktemplate-debian for "debian")
 * writes <state>/templates/<name>/v<time>/ and its progress lines, which
 * are kept (the last TB_LINES) for GET .../build?after=N. Done, the
 * version becomes <state>/templates/<name>/current (a symbolic link,
 * swapped atomically) and the name is registered with that path: new
 * sandboxes get the new version, and each existing one keeps the files
 * it was made from (libvmm records their real paths in sandbox.conf);
 * an old version goes once no sandbox.conf names it.
 */
#define TB_LINES	256
#define TB_LINE_MAX	400
#define TB_TIMEOUT_S	3600	/* a build that takes longer is killed */

static struct {
	char		 name[PX_TEMPLATE_NAME_MAX + 1];
	char		 vdir[PATH_MAX];	/* the version being built */
	char		 state[16];		/* "", running, ok, failed */
	char		 reason[512];
	pid_t		 pid;
	int		 fd;
	struct event	*rev, *tev;
	time_t		 t0;
	uint64_t	 seq;			/* lines so far */
	char		 lines[TB_LINES][TB_LINE_MAX];
	char		 part[TB_LINE_MAX];
	size_t		 partlen;
	int		 status;
	int		 to_log;		/* progress lines go to the log too */
	time_t		 timeout_s;		/* killed past this */
	time_t		 term_at;		/* ... asked to end then */
	int		 upgrade;		/* replaces a current version that
						 * serves creates meanwhile */
	char		 source[512];		/* source.json for the version
						 * (a build from an image), "" */
	FILE		*log;			/* every line, kept after it */
	char		 logpath[PATH_MAX];	/* templates/<name>/build.log */
	uint64_t	 logbytes;
} TB = { .fd = -1 };

#define TB_LOG_MAX	(8 << 20)	/* of a build's whole log */

static struct tspool *TS;	/* a source coming in (one at a time) */
static const char *ts_name(const struct tspool *);

static void
tb_line(const char *s)
{
	snprintf(TB.lines[TB.seq % TB_LINES], TB_LINE_MAX, "%s", s);
	TB.seq++;
	/* the whole log (the lines above are the last TB_LINES of it) */
	if (TB.log != NULL && TB.logbytes < TB_LOG_MAX) {
		TB.logbytes += strlen(s) + 1;
		if (TB.logbytes >= TB_LOG_MAX)
			fprintf(TB.log, "(the log stops here: %d MiB)\n",
			    TB_LOG_MAX >> 20);
		else
			fprintf(TB.log, "%s\n", s);
		fflush(TB.log);
	}
	if (TB.to_log)
		log_info("template %s: %s", TB.name, s);
}

/* 1 if a sandbox's sandbox.conf names a file under vdir (or cannot be
 * read: then the version stays). */
static int
tb_version_used(const char *vdir)
{
	char p[PATH_MAX], line[PATH_MAX + 64], *v;
	struct dirent *de;
	size_t n = strlen(vdir);
	int used = 0;
	FILE *f;
	DIR *d;

	snprintf(p, sizeof(p), "%s/vms", V.state_dir);
	if ((d = opendir(p)) == NULL)
		return errno != ENOENT;
	while (!used && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/vms/%s/sandbox.conf", V.state_dir,
		    de->d_name);
		if ((f = fopen(p, "re")) == NULL) {
			used = errno != ENOENT;
			continue;
		}
		while (!used && fgets(line, sizeof(line), f) != NULL)
			if ((v = strchr(line, '=')) != NULL &&
			    strncmp(v + 1, vdir, n) == 0 && v[1 + n] == '/')
				used = 1;
		fclose(f);
	}
	closedir(d);
	return used;
}

/* Versions of name other than keep (NULL: none kept) that no sandbox
 * uses: gone (their files only: a version directory holds nothing
 * else). How many are left. */
static int
tb_gc(const char *name, const char *keep)
{
	char dir[PATH_MAX], v[PATH_MAX], f[PATH_MAX * 2];
	struct dirent *de, *fe;
	int left = 0;
	DIR *d, *vd;

	snprintf(dir, sizeof(dir), "%s/templates/%s", V.state_dir, name);
	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != 'v')
			continue;
		snprintf(v, sizeof(v), "%s/%s", dir, de->d_name);
		left++;
		if ((keep != NULL && strcmp(v, keep) == 0) || tb_version_used(v))
			continue;
		if ((vd = opendir(v)) == NULL)
			continue;
		while ((fe = readdir(vd)) != NULL) {
			if (fe->d_name[0] == '.' && (fe->d_name[1] == '\0' ||
			    (fe->d_name[1] == '.' && fe->d_name[2] == '\0')))
				continue;
			snprintf(f, sizeof(f), "%s/%s", v, fe->d_name);
			(void)unlink(f);
		}
		closedir(vd);
		if (rmdir(v) == 0) {
			left--;
			log_info("template %s: version %s removed (no sandbox "
			    "uses it)", name, de->d_name);
		}
	}
	closedir(d);
	return left;
}

void
px_vm_template_forget(const char *name, const char *dir, void *arg)
{
	char own[PATH_MAX], p[PATH_MAX];

	(void)arg;
	snprintf(own, sizeof(own), "%s/templates/%s/current", V.state_dir, name);
	if (V.state_dir[0] == '\0' || strcmp(dir, own) != 0 ||
	    (TB.pid > 0 && strcmp(TB.name, name) == 0) ||
	    (V.def_debian && strcmp(name, "debian") == 0))
		return;		/* not berthd's to remove, being built, or
				 * the default's own files */
	if (tb_gc(name, NULL) > 0)
		return;		/* a sandbox made before still uses one */
	(void)unlink(own);
	snprintf(p, sizeof(p), "%s/templates/%s/build.log", V.state_dir, name);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s/templates/%s", V.state_dir, name);
	if (rmdir(p) == 0)
		log_info("template %s: forgotten, its files removed", name);
}

static void
tb_finish(int ok, const char *why)
{
	char cur[PATH_MAX], tmp[PATH_MAX], err[256], l2[VMM_ERRLEN];
	struct px_template t;
	const char *base;
	FILE *f;

	if (TB.rev != NULL)
		event_free(TB.rev);
	if (TB.tev != NULL)
		event_free(TB.tev);
	TB.rev = TB.tev = NULL;
	if (TB.fd >= 0)
		close(TB.fd);
	TB.fd = -1;
	TB.pid = 0;
	if (ok && TB.source[0] != '\0') {
		/* what it was built of: the cache's key, template ls's source */
		snprintf(tmp, sizeof(tmp), "%s/source.json", TB.vdir);
		int bad = (f = fopen(tmp, "we")) == NULL;

		if (!bad) {
			bad = fprintf(f, "%s\n", TB.source) < 0;
			bad |= fclose(f) != 0;
		}
		if (bad)
			log_warn("template %s: %s (the next build of the same "
			    "source is not cached)", TB.name, tmp);
	}
	TB.source[0] = '\0';
	if (ok) {
		/* current -> v<time>, swapped with a rename */
		base = strrchr(TB.vdir, '/') + 1;
		snprintf(cur, sizeof(cur), "%s/templates/%s/current",
		    V.state_dir, TB.name);
		snprintf(tmp, sizeof(tmp), "%s/templates/%s/.current.new",
		    V.state_dir, TB.name);
		(void)unlink(tmp);
		if (symlink(base, tmp) < 0 || rename(tmp, cur) < 0) {
			ok = 0;
			snprintf(TB.reason, sizeof(TB.reason), "%s: %s", cur,
			    strerror(errno));
		} else if (px_store_template_get(V.store, TB.name, &t, err,
		    sizeof(err)) != PX_STORE_OK || strcmp(t.dir, cur) != 0) {
			(void)px_store_template_rm(V.store, TB.name, err,
			    sizeof(err));
			memset(&t, 0, sizeof(t));
			snprintf(t.name, sizeof(t.name), "%s", TB.name);
			snprintf(t.dir, sizeof(t.dir), "%s", cur);
			if (px_store_template_add(V.store, &t, err,
			    sizeof(err)) != PX_STORE_OK) {
				ok = 0;
				snprintf(TB.reason, sizeof(TB.reason),
				    "registering template %s: %s", TB.name, err);
			}
		}
	} else if (why != TB.reason) {	/* tb_reap's is there already */
		snprintf(TB.reason, sizeof(TB.reason), "%s", why);
	}
	snprintf(TB.state, sizeof(TB.state), "%s", ok ? "ok" : "failed");
	if (ok) {
		char l[TB_LINE_MAX];

		TB.to_log = 0;
		snprintf(l, sizeof(l), "template %s built in %lld s: %s", TB.name,
		    (long long)(time(NULL) - TB.t0), TB.vdir);
		tb_line(l);
		log_info("%s", l);
		(void)tb_gc(TB.name, TB.vdir);
		if (V.prehash)		/* not at its first move */
			prehash(TB.name, cur);
		/* the default's comes below, once it is the default */
		if (!V.def_debian || strcmp(TB.name, "debian") != 0)
			ready_kick_dir(cur, 0);
	} else {
		log_warnx("template %s: build failed: %s", TB.name, TB.reason);
	}
	TB.to_log = 0;
	if (!ok && TB.log != NULL)
		fprintf(TB.log, "failed: %s\n", TB.reason);
	if (TB.log != NULL)
		fclose(TB.log);
	TB.log = NULL;
	/* a build from an image: its source goes with it */
	{
		char src[PATH_MAX];

		snprintf(src, sizeof(src), "%s/templates/.source/%s",
		    V.state_dir, TB.name);
		(void)unlink(src);
	}
	if (V.def_debian && strcmp(TB.name, "debian") == 0) {
		snprintf(V.def_fail, sizeof(V.def_fail), "%s", ok ? "" :
		    TB.reason);
		if (ok && TB.upgrade)
			log_info("the default template debian: new sandboxes are "
			    "made from %s (each sandbox keeps its own version)",
			    strrchr(TB.vdir, '/') + 1);
		else if (ok)
			log_info("the default template debian is ready: sandboxes "
			    "can be created");
		else if (TB.upgrade)
			log_warnx("the default template debian: its rebuild for "
			    "berth's new guest programs failed: sandboxes are "
			    "still made from the version before ('netctl "
			    "template build debian' tries again, and so does "
			    "the next start)");
		else
			log_warnx("the default template debian is not built: every "
			    "sandbox create fails until 'netctl template build "
			    "debian' succeeds");
		/* KVM's cached verdict for the default, as at start */
		if (ok && V.m != NULL && !V.have_tpl && vmm_template_load(V.tdir,
		    &V.tpl, l2, sizeof(l2)) == 0) {
			V.have_tpl = 1;
			(void)vmm_accel_template(V.m, &V.tpl);
		}
		if (ok)
			ready_kick();
	}
}

/*
 * Before a running sandbox sleeps (libvmm's sleep_prepare): its guest
 * drops its clean page cache and reclaimable slab, which its balloon
 * then reports free and the host takes back, so a paused sandbox holds
 * and a suspended one's RAM image keeps what its guest uses, not what it
 * once read. Free page reporting runs 2 s after pages are freed (the
 * guest kernel's PAGE_REPORTING_DELAY): with the balloon's driver bound,
 * the command waits 3 s for it. At most VM_RECLAIM_MS; whatever the
 * answer, the pause or suspend goes on (libvmm has its own deadline).
 */
#define VM_RECLAIM_MS	8000
#define VM_RECLAIM_SH	"sync; echo 3 >/proc/sys/vm/drop_caches; " \
	"for d in /sys/bus/virtio/drivers/virtio_balloon/virtio*; do " \
	"[ -e \"$d\" ] && exec sleep 3; done; exit 0"

static void
reclaim_answered(void *arg, const struct px_exec_result *res)
{
	char *id = arg;

	(void)res;
	if (V.m != NULL)
		vmm_sleep_prepared(V.m, id);
	free(id);
}

static int
reclaim_start(const char *id, void *arg)
{
	static char *const argv[] = { "/bin/sh", "-c", VM_RECLAIM_SH, NULL };
	struct px_exec_req req;
	struct vmm_sandbox *sb;
	struct vmm_info info;
	char err[128], *copy;
	int status;

	(void)arg;
	if (!V.drop_caches || V.hooks.exec_start == NULL || V.m == NULL ||
	    (sb = vmm_sandbox_find(V.m, id)) == NULL)
		return -1;
	/* Only where the host gets the freed pages back: a VM with free
	 * page reporting (without it they stay in its RAM file), and not a
	 * clone whose RAM is still its image's private mapping (the ready
	 * snapshot's, a fork's: the sealed image refuses the discards
	 * reporting asks for, and a drop would only copy more of it:
	 * paused, such a sandbox held 92 MiB after one, 59 running). From
	 * its first wake on its RAM is a file of its own. */
	vmm_sandbox_info(sb, &info);
	if (!info.balloon || info.ram_shared || (copy = strdup(id)) == NULL)
		return -1;
	memset(&req, 0, sizeof(req));
	req.argv = argv;
	req.argc = 3;
	req.timeout_ms = VM_RECLAIM_MS;
	req.op = PX_EXEC_RUN;
	req.before_sleep = 1;
	log_info("sandbox %s: its guest gives memory back first (drops its "
	    "page cache; at most %d s)", id, VM_RECLAIM_MS / 1000);
	/* its answer may come before this returns */
	if (V.hooks.exec_start(id, &req, reclaim_answered, copy, &status,
	    err, sizeof(err), NULL) < 0) {
		free(copy);
		return -1;
	}
	return 0;
}

/* The builder closed its output: reap it (it exits right after). */
static void
tb_reap(evutil_socket_t fd, short what, void *arg)
{
	char st[64];
	int s;
	pid_t r;

	(void)fd;
	(void)arg;
	/* past its time: SIGTERM (a builder cleans up: mktemplate-source
	 * removes its builder sandbox), SIGKILL 30 s later */
	if (what & EV_TIMEOUT && TB.pid > 0 &&
	    time(NULL) - TB.t0 > TB.timeout_s) {
		int sig = TB.term_at != 0 && time(NULL) - TB.term_at > 30 ?
		    SIGKILL : SIGTERM;

		if (TB.term_at == 0 || sig == SIGKILL) {
			kill(-TB.pid, sig);
			kill(TB.pid, sig);
		}
		if (TB.term_at == 0)
			TB.term_at = time(NULL);
	}
	if (TB.pid <= 0)
		return;
	r = waitpid(TB.pid, &s, WNOHANG);
	if (r == 0 || (r < 0 && errno == EINTR))
		return;		/* the timer comes back */
	if (r < 0) {
		tb_finish(0, "the builder vanished");
		return;
	}
	if (WIFEXITED(s) && WEXITSTATUS(s) == 0) {
		tb_finish(1, NULL);
		return;
	}
	if (WIFEXITED(s))
		snprintf(st, sizeof(st), "exit %d", WEXITSTATUS(s));
	else
		snprintf(st, sizeof(st), "signal %d", WTERMSIG(s));
	if (TB.term_at != 0)	/* it was ended: say why first */
		snprintf(TB.reason, sizeof(TB.reason), "the build took longer "
		    "than %lld s (template_build_timeout) and was ended (%s)",
		    (long long)TB.timeout_s, st);
	else
		snprintf(TB.reason, sizeof(TB.reason), "the builder failed "
		    "(%s): %s", st, TB.seq > 0 ?
		    TB.lines[(TB.seq - 1) % TB_LINES] : "");
	tb_finish(0, TB.reason);
}

static void
tb_read(evutil_socket_t fd, short what, void *arg)
{
	char buf[4096];
	ssize_t n, i;

	(void)what;
	(void)arg;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		if (TB.partlen > 0) {
			TB.part[TB.partlen] = '\0';
			tb_line(TB.part);
			TB.partlen = 0;
		}
		event_del(TB.rev);
		close(TB.fd);
		TB.fd = -1;
		tb_reap(-1, 0, NULL);
		return;
	}
	for (i = 0; i < n; i++) {
		if (buf[i] == '\n' || buf[i] == '\r') {
			if (TB.partlen > 0) {
				TB.part[TB.partlen] = '\0';
				tb_line(TB.part);
			}
			TB.partlen = 0;
		} else if (TB.partlen < TB_LINE_MAX - 1) {
			/* what a terminal would not show goes */
			TB.part[TB.partlen++] = (unsigned char)buf[i] < 0x20 ||
			    buf[i] == 0x7f ? '?' : buf[i];
		}
	}
}

static void tpl_conf(const struct px_config *);
static int tb_vdir(const char *, char *, size_t);
static int tb_start(const char *, char *const [], char *const [],
    const char *, char *, size_t);

int
px_vm_template_build(const char *name, char *err, size_t errlen,
    void *arg)
{
	char mk[PATH_MAX], app[PATH_MAX];
	int i;

	(void)arg;
	if (V.state_dir[0] == '\0') {
		snprintf(err, errlen, "this berthd runs no VMM");
		return -1;
	}
	if ((i = find_builder(name, mk, app, err, errlen)) != 0)
		return i;
	if (TB.pid > 0 && strcmp(TB.name, name) == 0) {
		/* the same build asked again: follow the one running */
		log_info("template %s: build asked for again: joining the one "
		    "running since %lld s", name, (long long)(time(NULL) - TB.t0));
		return 0;
	}
	if (TB.pid > 0 || TS != NULL) {
		snprintf(err, errlen, "template %s is being built (one build at "
		    "a time)", TB.pid > 0 ? TB.name : ts_name(TS));
		return -3;
	}
	if (tb_vdir(name, err, errlen) < 0)
		return -1;
	TB.source[0] = '\0';
	return tb_start(name, (char *[]){ mk, TB.vdir, NULL }, NULL, app, err,
	    errlen);
}

/* TB.vdir: a new version directory's name under templates/name (made
 * there by the builder). 0, or -1 with err. */
static int
tb_vdir(const char *name, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int i;

	snprintf(dir, sizeof(dir), "%s/templates/%s", V.state_dir, name);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < 100; i++) {
		snprintf(TB.vdir, sizeof(TB.vdir), "%s/v%lld%s%.0d", dir,
		    (long long)time(NULL), i ? "-" : "", i);
		if (access(TB.vdir, F_OK) != 0)
			break;
	}
	return 0;
}

/* A build's whole log: <state>/templates/<name>/build.log, new at each
 * build of the name and kept after it (the API keeps its last lines). */
static void
tb_log_open(const char *name)
{
	int fd;

	if (TB.log != NULL)
		fclose(TB.log);
	TB.log = NULL;
	TB.logbytes = 0;
	snprintf(TB.logpath, sizeof(TB.logpath), "%s/templates/%s/build.log",
	    V.state_dir, name);
	if ((fd = open(TB.logpath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) < 0 || (TB.log = fdopen(fd, "w")) == NULL) {
		if (fd >= 0)
			close(fd);
		TB.logpath[0] = '\0';
	}
}

/* The build of name into TB.vdir by builder argv, followed from the loop
 * (its lines, its end, its timeout). 0, or -1 with err. */
static int
tb_start(const char *name, char *const argv[], char *const envs[],
    const char *app, char *err, size_t errlen)
{
	struct timeval tv = { 1, 0 };
	pid_t pid;
	int fd;

	if ((pid = spawn_builder(argv, envs, app, &fd, err, errlen)) < 0)
		return -1;
	TB.timeout_s = envs != NULL && V.tpl_timeout_ms > 0 ?
	    (time_t)(V.tpl_timeout_ms / 1000) : TB_TIMEOUT_S;
	TB.term_at = 0;
	(void)fcntl(fd, F_SETFL, O_NONBLOCK);
	snprintf(TB.name, sizeof(TB.name), "%s", name);
	snprintf(TB.state, sizeof(TB.state), "running");
	TB.reason[0] = '\0';
	TB.upgrade = 0;
	tb_log_open(name);
	TB.pid = pid;
	TB.fd = fd;
	TB.t0 = time(NULL);
	TB.seq = 0;
	TB.partlen = 0;
	TB.rev = event_new(V.base, TB.fd, EV_READ | EV_PERSIST, tb_read, NULL);
	TB.tev = event_new(V.base, -1, EV_PERSIST, tb_reap, NULL);
	if (TB.rev == NULL || TB.tev == NULL || event_add(TB.rev, NULL) < 0 ||
	    event_add(TB.tev, &tv) < 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		tb_finish(0, "out of memory");
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	log_info("template %s: building in %s with %s", name, TB.vdir,
	    argv[0]);
	return 0;
}

/* ---- templates from an image (issue 31): the source spooled, then
 * mktemplate-source builds it in a builder sandbox ---- */

#define TS_ARGS_MAX	(PX_TPL_BUILD_ARGS * 2 + 8)

struct tspool {
	char name[PX_TEMPLATE_NAME_MAX + 1];
	char path[PATH_MAX];
	int fd;
	uint64_t bytes;
	char from[16];
	char file[256];
	int nargs;
	char (*args)[1024];
	EVP_MD_CTX *md;		/* sha256 of what the build is made of */
};


static const char *
ts_name(const struct tspool *ts)
{
	return ts->name;
}

static void
ts_free(struct tspool *ts, int keep)
{
	if (ts->fd >= 0)
		close(ts->fd);
	if (!keep)
		(void)unlink(ts->path);
	EVP_MD_CTX_free(ts->md);
	free(ts->args);
	free(ts);
	if (TS == ts)
		TS = NULL;
}

void *
px_vm_template_spool(const char *name, const struct px_tpl_source *src,
    int *status, char *err, size_t errlen, void *arg)
{
	struct tspool *ts;
	char dir[PATH_MAX];
	int i;

	(void)arg;
	*status = 409;
	if (V.m == NULL) {
		snprintf(err, errlen, "this berthd runs no VMM");
		return NULL;
	}
	*status = 400;
	if (!px_template_name_valid(name) || strcmp(name, "debian") == 0 ||
	    strcmp(name, "minimal") == 0 || strcmp(name, "default") == 0) {
		snprintf(err, errlen, "bad template name '%s': [a-z0-9][a-z0-9-]"
		    "{0,31}, not debian, minimal or default", name);
		return NULL;
	}
	*status = 409;
	if (TB.pid > 0 || TS != NULL) {
		snprintf(err, errlen, "template %s is being built (one build at "
		    "a time)", TB.pid > 0 ? TB.name : TS->name);
		return NULL;
	}
	*status = 500;
	if ((ts = calloc(1, sizeof(*ts))) == NULL ||
	    (src->nargs > 0 && (ts->args = calloc((size_t)src->nargs,
	    sizeof(*ts->args))) == NULL)) {
		free(ts);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ts->fd = -1;
	snprintf(ts->name, sizeof(ts->name), "%s", name);
	snprintf(ts->from, sizeof(ts->from), "%s", src->from);
	snprintf(ts->file, sizeof(ts->file), "%s", src->file != NULL ?
	    src->file : "");
	for (i = 0; i < src->nargs; i++)
		snprintf(ts->args[i], sizeof(ts->args[i]), "%s",
		    src->build_args[i]);
	ts->nargs = src->nargs;
	/* The cache key: how it is built (from, -f, the build args, each
	 * with its NUL), then the source's bytes. */
	if ((ts->md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ts->md, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ts->md, ts->from, strlen(ts->from) + 1) != 1 ||
	    EVP_DigestUpdate(ts->md, ts->file, strlen(ts->file) + 1) != 1) {
		snprintf(err, errlen, "out of memory");
		EVP_MD_CTX_free(ts->md);
		free(ts->args);
		free(ts);
		return NULL;
	}
	for (i = 0; i < ts->nargs; i++)
		(void)EVP_DigestUpdate(ts->md, ts->args[i],
		    strlen(ts->args[i]) + 1);
	snprintf(dir, sizeof(dir), "%s/templates/.source", V.state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		EVP_MD_CTX_free(ts->md);
		free(ts->args);
		free(ts);
		return NULL;
	}
	snprintf(ts->path, sizeof(ts->path), "%s/%s", dir, name);
	(void)unlink(ts->path);
	if ((ts->fd = open(ts->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		snprintf(err, errlen, "%s: %s", ts->path, strerror(errno));
		EVP_MD_CTX_free(ts->md);
		free(ts->args);
		free(ts);
		return NULL;
	}
	TS = ts;
	log_info("template %s: its source (from=%s) coming in", name,
	    ts->from);
	return ts;
}

int
px_vm_template_spool_write(void *h, const void *p, size_t len, int *status,
    char *err, size_t errlen)
{
	struct tspool *ts = h;
	const char *q = p;
	ssize_t w;

	if (ts->bytes + len > V.tpl_max_source) {
		*status = 413;
		snprintf(err, errlen, "the source of template %s is over %llu "
		    "MiB (template_max_context)", ts->name,
		    (unsigned long long)(V.tpl_max_source >> 20));
		ts_free(ts, 0);
		return -1;
	}
	while (len > 0) {
		if ((w = write(ts->fd, q, len)) < 0) {
			if (errno == EINTR)
				continue;
			*status = errno == ENOSPC ? 507 : 500;
			snprintf(err, errlen, "the source of template %s: %s",
			    ts->name, strerror(errno));
			ts_free(ts, 0);
			return -1;
		}
		(void)EVP_DigestUpdate(ts->md, q, (size_t)w);
		q += w;
		len -= (size_t)w;
		ts->bytes += (uint64_t)w;
	}
	return 0;
}

/* mktemplate-source's environment (its header): "K=V" strings, static
 * (putenv keeps them), NULL-terminated in envs. 0, or -1 with err. */
static int
ts_env(char *envs[10], char *err, size_t errlen)
{
	static char e[9][PATH_MAX + 32];
	static const struct {
		const char *var, *installed, *built;
	} prog[] = {
		{ "BERTH_NETCTL", BINDIR "/netctl", BUILDDIR "/netctl/netctl" },
		{ "BERTH_IMAGEBUILD", PKGLIBEXECDIR "/berth-imagebuild",
		    SRCDIR "/vmm/guest/berth-imagebuild" },
		{ "BERTH_MKTEMPLATE_IMAGE", PKGLIBEXECDIR "/mktemplate-image",
		    SRCDIR "/vmm/guest/mktemplate-image" },
	};
	char p[PATH_MAX];
	size_t i, n = 0;

	for (i = 0; i < sizeof(prog) / sizeof(prog[0]); i++) {
		if (find_helper(prog[i].var, prog[i].installed, prog[i].built, p,
		    sizeof(p)) != 0) {
			snprintf(err, errlen, "cannot find %s (make install, or "
			    "set %s)", p, prog[i].var);
			return -1;
		}
		snprintf(e[n], sizeof(e[n]), "%s=%s", prog[i].var, p);
		envs[n] = e[n];
		n++;
	}
	snprintf(e[n], sizeof(e[n]), "BERTH_STATE=%s", V.state_dir);
	envs[n] = e[n];
	n++;
	/* what the builder may reach (template_build_allow) */
	snprintf(e[n], sizeof(e[n]), "BERTH_BUILD_ALLOW=%s", V.tpl_allow);
	envs[n] = e[n];
	n++;
	snprintf(e[n], sizeof(e[n]), "BERTH_BUILD_MAX_MIB=%u", V.tpl_max_mib);
	envs[n] = e[n];
	n++;
	/* the builder's shape: that of its ready snapshot (builder_kick) */
	snprintf(e[n], sizeof(e[n]), "BERTH_BUILD_MEMORY_MIB=%u",
	    TB_BUILDER_MEMORY_MIB);
	envs[n] = e[n];
	n++;
	snprintf(e[n], sizeof(e[n]), "BERTH_BUILD_DISK_MIB=%u",
	    TB_BUILDER_DISK_MIB);
	envs[n] = e[n];
	n++;
	envs[n] = NULL;
	return 0;
}

/* The source's sha256 in hex, and what the version built of it will
 * record (TB.source, written as its source.json by tb_finish). */
static int
ts_record(struct tspool *ts, char hex[65], char *err, size_t errlen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	json_t *o;
	char *j;

	if (EVP_DigestFinal_ex(ts->md, md, &mdlen) != 1 || mdlen != 32) {
		snprintf(err, errlen, "cannot hash the source of %s", ts->name);
		return -1;
	}
	for (i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	o = json_pack("{s:s, s:s, s:I, s:s?}", "from", ts->from, "sha256", hex,
	    "bytes", (json_int_t)ts->bytes, "file", ts->file[0] ? ts->file :
	    NULL);
	j = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (j == NULL || strlen(j) >= sizeof(TB.source)) {
		free(j);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(TB.source, sizeof(TB.source), "%s", j);
	free(j);
	return 0;
}

/* 1 with its directory in vdir if a whole version of name was built from
 * the source hashed hex (its source.json says so, its template.json is
 * there); the current version first. */
static int
ts_cached(const char *name, const char *hex, char *vdir, size_t len)
{
	char dir[PATH_MAX], p[PATH_MAX + 32], cur[PATH_MAX];
	struct dirent *de;
	const char *h;
	json_t *o;
	ssize_t n;
	DIR *d;
	int found = 0, pass;

	snprintf(dir, sizeof(dir), "%s/templates/%s", V.state_dir, name);
	snprintf(p, sizeof(p), "%s/current", dir);
	if ((n = readlink(p, cur, sizeof(cur) - 1)) < 0)
		n = 0;
	cur[n] = '\0';
	for (pass = 0; pass < 2 && !found; pass++) {
		if ((d = opendir(dir)) == NULL)
			return 0;
		while (!found && (de = readdir(d)) != NULL) {
			if (de->d_name[0] != 'v' ||
			    (pass == 0) != (strcmp(de->d_name, cur) == 0))
				continue;
			snprintf(p, sizeof(p), "%s/%s/template.json", dir,
			    de->d_name);
			if (access(p, F_OK) != 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s/source.json", dir,
			    de->d_name);
			if ((o = json_load_file(p, 0, NULL)) == NULL)
				continue;
			h = json_string_value(json_object_get(o, "sha256"));
			if (h != NULL && strcmp(h, hex) == 0) {
				snprintf(vdir, len, "%s/%s", dir, de->d_name);
				found = 1;
			}
			json_decref(o);
		}
		closedir(d);
	}
	return found;
}

/* A source built before: its version (TB.vdir) becomes current again at
 * once, as a build that took no time. */
static void
tb_cached(const char *name, const char *hex, uint64_t bytes)
{
	char l[TB_LINE_MAX];

	snprintf(TB.name, sizeof(TB.name), "%s", name);
	snprintf(TB.state, sizeof(TB.state), "running");
	TB.reason[0] = TB.source[0] = '\0';
	TB.upgrade = 0;
	tb_log_open(name);
	TB.pid = 0;
	TB.t0 = time(NULL);
	TB.seq = 0;
	TB.partlen = 0;
	snprintf(l, sizeof(l), "the same source (%llu bytes, sha256 %.12s...) "
	    "built %s before: cached", (unsigned long long)bytes, hex,
	    strrchr(TB.vdir, '/') + 1);
	tb_line(l);
	log_info("template %s: %s", name, l);
	tb_finish(1, NULL);
}

int
px_vm_template_spool_end(void *h, int *status, char *err, size_t errlen)
{
	struct tspool *ts = h;
	char mk[PATH_MAX], app[PATH_MAX], *argv[TS_ARGS_MAX], *envs[10];
	char hex[2 * 32 + 1];
	int i, a = 0, rc;

	*status = 500;
	if (find_helper("BERTH_MKTEMPLATE_SOURCE", PKGLIBEXECDIR
	    "/mktemplate-source", SRCDIR "/vmm/guest/mktemplate-source", mk,
	    sizeof(mk)) != 0 || find_helper("BERTH_TESTAPP", PKGLIBEXECDIR
	    "/testapp", BUILDDIR "/vmm/guest/testapp", app, sizeof(app)) != 0) {
		snprintf(err, errlen, "cannot find the builder %s or the guest "
		    "test app (make install)", mk);
		ts_free(ts, 0);
		return -1;
	}
	if (ts->bytes == 0) {
		*status = 400;
		snprintf(err, errlen, "no source: POST the build context's tar "
		    "(from=dockerfile) or the image archive (from=image) as the "
		    "body");
		ts_free(ts, 0);
		return -1;
	}
	close(ts->fd);
	ts->fd = -1;
	if (TB.pid > 0) {	/* started while this source came in */
		*status = 409;
		snprintf(err, errlen, "template %s is being built (one build "
		    "at a time)", TB.name);
		ts_free(ts, 0);
		return -1;
	}
	if (ts_record(ts, hex, err, errlen) < 0) {
		ts_free(ts, 0);
		return -1;
	}
	if (ts_cached(ts->name, hex, TB.vdir, sizeof(TB.vdir))) {
		tb_cached(ts->name, hex, ts->bytes);
		ts_free(ts, 0);
		return 0;
	}
	if (tb_vdir(ts->name, err, errlen) < 0) {
		ts_free(ts, 0);
		return -1;
	}
	argv[a++] = mk;
	argv[a++] = ts->name;
	argv[a++] = ts->from;
	argv[a++] = ts->path;
	argv[a++] = TB.vdir;
	if (ts->file[0] != '\0') {
		argv[a++] = "-f";
		argv[a++] = ts->file;
	}
	for (i = 0; i < ts->nargs && a + 3 < TS_ARGS_MAX; i++) {
		argv[a++] = "--build-arg";
		argv[a++] = ts->args[i];
	}
	argv[a] = NULL;
	if (ts_env(envs, err, errlen) < 0) {
		ts_free(ts, 0);
		return -1;
	}
	rc = tb_start(ts->name, argv, envs, app, err, errlen);
	log_info("template %s: its source taken (%llu bytes)%s", ts->name,
	    (unsigned long long)ts->bytes, rc < 0 ? ": the build did not "
	    "start" : "");
	/* the builder read it at its start or not at all: it goes once the
	 * build ends (tb_finish), the name kept meanwhile */
	ts_free(ts, rc == 0);
	return rc;
}

void
px_vm_template_spool_abort(void *h)
{
	struct tspool *ts = h;

	log_info("template %s: its source was not sent whole (%llu bytes): "
	    "no build", ts->name, (unsigned long long)ts->bytes);
	ts_free(ts, 0);
}

const char *
px_vm_template_default(void)
{
	static char buf[640];

	if (V.m == NULL)
		return NULL;
	if (!V.def_debian)
		snprintf(buf, sizeof(buf), "%s", V.tdir);
	else if (TB.pid > 0 && strcmp(TB.name, "debian") == 0 && TB.upgrade)
		snprintf(buf, sizeof(buf), "debian (a new version for berth's "
		    "new guest programs is being built: %lld s)",
		    (long long)(time(NULL) - TB.t0));
	else if (TB.pid > 0 && strcmp(TB.name, "debian") == 0)
		snprintf(buf, sizeof(buf), "debian: building (%lld s)",
		    (long long)(time(NULL) - TB.t0));
	else if (access(V.tdir, F_OK) == 0)	/* built; a rebuild may have failed */
		snprintf(buf, sizeof(buf), "debian%s%s%s", V.def_fail[0] ?
		    " (its last build failed: " : "", V.def_fail,
		    V.def_fail[0] ? ")" : "");
	else if (V.def_fail[0] != '\0')
		snprintf(buf, sizeof(buf), "debian: build failed: %s",
		    V.def_fail);
	else
		snprintf(buf, sizeof(buf), "debian: not built");
	return buf;
}

json_t *
px_vm_template_build_status(const char *name, uint64_t after, void *arg)
{
	json_t *doc, *lines;
	uint64_t i, first;

	(void)arg;
	if (TB.state[0] == '\0' || strcmp(TB.name, name) != 0)
		return NULL;
	if ((lines = json_array()) == NULL)
		return NULL;
	first = TB.seq > TB_LINES ? TB.seq - TB_LINES : 0;
	for (i = after > first ? after : first; i < TB.seq; i++)
		json_array_append_new(lines, json_string(TB.lines[i % TB_LINES]));
	doc = json_pack("{s:s, s:s, s:s?, s:s?, s:o, s:I, s:I, s:s?}", "name",
	    TB.name, "state", TB.state, "reason", TB.reason[0] ? TB.reason :
	    NULL, "dir", strcmp(TB.state, "ok") == 0 ? TB.vdir : NULL,
	    "lines", lines, "next", (json_int_t)TB.seq,
	    "seconds", (json_int_t)(time(NULL) - TB.t0),
	    "log", TB.logpath[0] ? TB.logpath : NULL);
	return doc;
}

static void unmade_fail(struct px_store *);

int
px_vm_init(struct event_base *base, struct px_store *store,
    const struct px_config *c, const char *state_dir,
    const struct px_vm_hooks *hooks, char *err, size_t errlen)
{
	struct vmm_config vc;
	char vdir[PATH_MAX], tdir[PATH_MAX], e[VMM_ERRLEN];
	const char *ev;
	int n;

	V.store = store;
	V.hooks = *hooks;
	V.base = base;
	snprintf(V.state_dir, sizeof(V.state_dir), "%s", state_dir);
	snprintf(vdir, sizeof(vdir), "%s/vms", state_dir);
	/*
	 * The default template (vm_template). A directory is loaded as it
	 * is. minimal, the busybox guest, is built here before berthd is
	 * ready if it is missing (seconds). debian takes minutes the first
	 * time: berthd is ready at once and builds it in the background
	 * (below, once the VMM runs); a create meanwhile is refused, naming
	 * the build (px_vm_create).
	 */
	if (c->vm_template == PX_TEMPLATE_DIR && c->template_dir != NULL) {
		snprintf(tdir, sizeof(tdir), "%s", c->template_dir);
	} else if (c->vm_template == PX_TEMPLATE_MINIMAL) {
		snprintf(tdir, sizeof(tdir), "%s/templates/default", state_dir);
		snprintf(e, sizeof(e), "%s/template.json", tdir);
		if (access(e, R_OK) != 0) {
			log_info("building the default guest template in %s", tdir);
			if (build_template(tdir, e, sizeof(e)) != 0)
				goto notemplate;
		}
	} else {
		char mk[PATH_MAX], app[PATH_MAX];

		V.def_debian = 1;
		snprintf(tdir, sizeof(tdir), "%s/templates/debian/current",
		    state_dir);
		snprintf(V.tdir, sizeof(V.tdir), "%s", tdir);
		if (vmm_template_load(tdir, &V.tpl, e, sizeof(e)) == 0)
			V.have_tpl = 1;
		else if (find_builder("debian", mk, app, e, sizeof(e)) != 0)
			goto notemplate;	/* not even a builder */
		snprintf(e, sizeof(e), "%s/templates", state_dir);
		if (mkdir(e, 0755) < 0 && errno != EEXIST) {
			snprintf(e, sizeof(e), "%s/templates: %s", state_dir,
			    strerror(errno));
			goto notemplate;
		}
	}
	if (!V.def_debian) {
		if (vmm_template_load(tdir, &V.tpl, e, sizeof(e)) < 0)
			goto notemplate;
		V.have_tpl = 1;
		snprintf(V.tdir, sizeof(V.tdir), "%s", tdir);
	}
	memset(&vc, 0, sizeof(vc));
	vc.state_dir = vdir;
	vc.backend = c->vmm_backend;
	vc.accel = c->accel == PX_ACCEL_TCG ? VMM_ACCEL_TCG :
	    c->accel == PX_ACCEL_KVM ? VMM_ACCEL_KVM : VMM_ACCEL_AUTO;
	/* Test and ops knobs of the accelerator choice (berthd(8)). */
	if ((ev = getenv("BERTH_KVM_PROBE")) != NULL && strcmp(ev, "skip") == 0)
		vc.kvm_probe_skip = 1;
	if ((ev = getenv("BERTH_KVM_TRIAL_MS")) != NULL)
		vc.kvm_trial_ms = (unsigned)strtoul(ev, NULL, 10);
	vc.mem_mib = c->vm_memory;
	vc.vcpus = c->vm_vcpus;
	vc.disk_mib = c->vm_disk;
	/* The control API checks each create against berth.conf's vm_max_*
	 * as they are now (a SIGHUP changes them); libvmm's own bounds are
	 * only what berth.conf could ever allow. */
	vc.max_mem_mib = PX_VM_MEMORY_LIMIT;
	vc.max_vcpus = PX_VM_VCPUS_LIMIT;
	vc.standby_max = c->vm_standby;
	vc.free_page_reporting = c->vm_free_page_reporting;
	vc.sleep_prepare = reclaim_start;
	V.drop_caches = c->vm_drop_caches;
	tpl_conf(c);
	vc.standby_mem_bytes = (uint64_t)c->vm_standby_memory << 20;
	vc.max_running = c->vm_max_running;
	vc.max_resident = c->vm_max_resident;
	vc.room_no_cpu = !c->vm_room_cpu;
	vc.ready_snapshots = c->vm_ready_snapshot;
	vc.ready_pool = c->vm_ready_pool;
	vc.max_checkpoints = c->vm_max_checkpoints;
	vc.max_layers = c->vm_max_layers;
	V.ready_on = c->vm_ready_snapshot;
	vc.tap_prefix = c->tap_prefix;
	/* two berthds on one host (each its own tap_prefix): each its own
	 * cgroup parent, or the same sandbox id in both (a move between
	 * them) would share, and remove, one group */
	if (c->tap_prefix != NULL && strcmp(c->tap_prefix, "bth") != 0) {
		static char cg[16];

		snprintf(cg, sizeof(cg), "berth-%s", c->tap_prefix);
		vc.cgroup = cg;
	}
	if (c->vm_pool[0] != '\0') {
		char net[20], *slash;

		snprintf(net, sizeof(net), "%s", c->vm_pool);
		if ((slash = strchr(net, '/')) != NULL) {
			*slash = '\0';
			inet_pton(AF_INET, net, &vc.pool);
			vc.pool_plen = (uint8_t)atoi(slash + 1);
		}
	}
	vc.tap_owner = (uid_t)-1;
	vc.vmm_uid = hooks->uid;
	vc.vmm_gid = hooks->gid;
	/* each VMM in a jail of its own, as uid_base + its pool block */
	vc.jail = c->vm_jail;
	vc.uid_base = c->vm_uid_base;
	vc.uid_count = c->vm_uid_count;
	vc.cgroups = 1;
	vc.cpu_pct = c->vm_cpu_quota;
	vc.mem_overhead_mib = c->vm_mem_overhead;
	vc.pids_max = c->vm_pids_max;
	vc.console_max = c->vm_console_max;
	vc.console_rate = c->vm_console_rate;
	vc.idle_pause_ms = c->idle_pause;
	vc.idle_suspend_ms = c->idle_suspend;
	vc.on_state = on_state;
	vc.on_event = on_event;
	if ((V.m = vmm_new(base, &vc, e, sizeof(e))) == NULL) {
		snprintf(err, errlen, "%s", e);
		return -1;
	}
	if (V.have_tpl)
		(void)vmm_accel_template(V.m, &V.tpl);
	if (V.def_debian && !V.have_tpl) {
		log_info("the default template debian is not built yet: building "
		    "it in the background (minutes the first time); its progress "
		    "follows here and in GET /v1/templates/debian/build, "
		    "'netctl template build debian' follows it too");
		if (px_vm_template_build("debian", e, sizeof(e), NULL) != 0) {
			snprintf(V.def_fail, sizeof(V.def_fail), "%s", e);
			log_warnx("template debian: cannot start its build: %s", e);
		} else {
			TB.to_log = 1;
		}
	} else if (V.def_debian) {
		/*
		 * Its initramfs holds berth's guest programs (init, agent):
		 * an upgraded berth rebuilds it, or new sandboxes would run
		 * the old ones. The version there serves creates meanwhile
		 * (the root image comes from the builder's cache: seconds
		 * to a minute), and each sandbox keeps its own.
		 */
		switch (debian_stale(e, sizeof(e))) {
		case 1:
			log_info("template debian: %s", e);
			if (px_vm_template_build("debian", e, sizeof(e),
			    NULL) != 0) {
				snprintf(V.def_fail, sizeof(V.def_fail), "%s", e);
				log_warnx("template debian: cannot start its "
				    "build: %s", e);
			} else {
				TB.to_log = 1;
				TB.upgrade = 1;
			}
			break;
		case -1:
			log_warnx("template debian: cannot tell whether berth's "
			    "guest programs changed since its current version "
			    "(it serves on): %s", e);
			break;
		}
	}
	if ((n = vmm_adopt_all(V.m, e, sizeof(e))) < 0)
		log_warnx("vmm: re-adopting VMs: %s", e);
	else if (n > 0)
		log_info("vmm: re-adopted %d sandbox(es)", n);
	ready_kick();
	/* a sandbox stored as creating with no VM: berthd stopped before
	 * its VM was made (a fork whose capture a kill -9 cut short). It
	 * fails, definitely and saying why, rather than create forever. */
	unmade_fail(store);
	/* the store follows what the VMM found; libvmm keeps no idle
	 * limits across restarts, the store does. A VM with no row was
	 * being deleted when berthd stopped (the row goes first: a delete,
	 * a move's end): its delete ends now. */
	{
		struct vmm_sandbox *sb = NULL, *next;
		struct px_sandbox row;
		char *id;

		for (sb = vmm_sandbox_next(V.m, NULL); sb != NULL; sb = next) {
			next = vmm_sandbox_next(V.m, sb);
			switch (px_store_sandbox_get(store, vmm_sandbox_id(sb),
			    &row, e, sizeof(e))) {
			case PX_STORE_OK:
				on_state(sb, vmm_sandbox_state(sb),
				    vmm_sandbox_state(sb), NULL);
				vmm_sandbox_set_idle(sb, idle_ms(row.idle_pause_ms),
				    idle_ms(row.idle_suspend_ms),
				    idle_ms(row.max_lifetime_ms));
				break;
			case PX_STORE_NOTFOUND:
				log_info("sandbox %s: its VM has no record (it was "
				    "being deleted when berthd stopped): deleted",
				    vmm_sandbox_id(sb));
				if ((id = strdup(vmm_sandbox_id(sb))) == NULL ||
				    vmm_sandbox_delete(sb, noop_done, id, e,
				    sizeof(e)) < 0) {
					log_warnx("sandbox %s: delete: %s",
					    vmm_sandbox_id(sb), id ? e :
					    "out of memory");
					free(id);
				}
				break;
			default:
				on_state(sb, vmm_sandbox_state(sb),
				    vmm_sandbox_state(sb), NULL);
				break;
			}
		}
	}
	return 0;

notemplate:
	/* "vmm on" asked for VMs: no template is fatal. With "vmm auto" the
	 * proxy serves on without them and says why (berthd logs
	 * "vmm: <describe>"; px_vm_enabled() stays 0). */
	if (c->vmm == PX_VMM_ON) {
		snprintf(err, errlen, "template: %s", e);
		return -1;
	}
	snprintf(V.describe, sizeof(V.describe),
	    "off (template: %s): only externally managed sandboxes", e);
	return 0;
}

struct unmade {
	char (*id)[PX_SANDBOX_ID_MAX + 1];
	size_t n, cap;
};

static int
unmade_collect(const struct px_sandbox *row, void *arg)
{
	struct unmade *u = arg;
	void *nv;

	if (row->external || strcmp(row->state, PX_STATE_CREATING) != 0 ||
	    vmm_sandbox_find(V.m, row->id) != NULL)
		return 0;
	if (u->n == u->cap) {
		u->cap = u->cap ? u->cap * 2 : 8;
		if ((nv = realloc(u->id, u->cap * sizeof(*u->id))) == NULL)
			return -1;
		u->id = nv;
	}
	snprintf(u->id[u->n++], sizeof(u->id[0]), "%s", row->id);
	return 0;
}

/* Sandboxes stored as creating that have no VM after the adoption. */
static void
unmade_fail(struct px_store *store)
{
	static const char why[] = "its VM was never made: berthd stopped "
	    "before the create or fork finished";
	struct unmade u = { NULL, 0, 0 };
	char e[256];
	size_t i;

	(void)px_store_sandbox_list(store, unmade_collect, &u, e, sizeof(e));
	for (i = 0; i < u.n; i++)
		if (px_store_sandbox_set_state(store, u.id[i], PX_STATE_FAILED,
		    e, sizeof(e)) == PX_STORE_OK) {
			record(u.id[i], "create", 0, why, -1);
			log_warnx("sandbox %s: %s", u.id[i], why);
		}
	free(u.id);
}

/* A template build does not outlive berthd (SIGTERM): the next start
 * begins the default's again; a build asked for is asked again. */
void
px_vm_build_stop(void)
{
	if (TB.pid <= 0)
		return;
	kill(-TB.pid, SIGKILL);
	kill(TB.pid, SIGKILL);
	(void)waitpid(TB.pid, NULL, 0);
	log_info("template %s: build stopped with berthd", TB.name);
	TB.pid = 0;
}

void
px_vm_drain(void)
{
	if (V.m != NULL)
		vmm_ready_drain(V.m);
}

void
px_vm_shutdown(void)
{
	/* VMs outlive berthd (they are re-adopted on start): only let go */
	if (V.m != NULL) {
		vmm_ready_drain(V.m);
		vmm_free(V.m);
		V.m = NULL;
	}
}

/*
 * The debian default for a create, read anew each time (a rebuild moves
 * current to a new version). While its build runs, or after it failed,
 * the create is refused saying so: a build takes minutes, longer than a
 * client should hold a request, and the sandbox is not half made.
 */
static int
default_debian(struct vmm_template *t, char *err, size_t errlen)
{
	char e[VMM_ERRLEN];

	if (TB.pid > 0 && strcmp(TB.name, "debian") == 0 && !TB.upgrade) {
		snprintf(err, errlen, "the default template debian is being "
		    "built (%lld s, %llu lines of progress so far; 'netctl "
		    "template build debian' follows it): try again once it is "
		    "built", (long long)(time(NULL) - TB.t0),
		    (unsigned long long)TB.seq);
		return -2;	/* the 503 says when to try again */
	}
	if (vmm_template_load(V.tdir, t, e, sizeof(e)) == 0)
		return 0;
	if (V.def_fail[0] != '\0')
		snprintf(err, errlen, "the default template debian could not be "
		    "built ('netctl template build debian' tries again): %s",
		    V.def_fail);
	else
		snprintf(err, errlen, "the default template debian: %s", e);
	return -1;
}

struct opctx {
	char		 id[PX_SANDBOX_ID_MAX + 1];
	void		(*done)(void *, int, const char *);
	void		*done_arg;
	struct timespec	 t0;
	int		 joined;	/* shares a wake already asked for */
};

static int64_t
ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static struct opctx *
opctx_new(const char *id)
{
	struct opctx *o = calloc(1, sizeof(*o));

	if (o != NULL) {
		snprintf(o->id, sizeof(o->id), "%s", id);
		clock_gettime(CLOCK_MONOTONIC, &o->t0);
	}
	return o;
}

static void
create_done(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	struct opctx *o = arg;

	record(o->id, "create", ok, reason, (int64_t)dur);
	if (!ok)
		log_warnx("sandbox %s: create failed: %s", o->id, reason);
	else
		log_info("sandbox %s: created in %llu ms%s%s", o->id,
		    (unsigned long long)dur, reason[0] ? ": " : "", reason);
	free(o);
}

int
px_vm_create(const char *id, const struct px_vm_spec *ps, char *err,
    size_t errlen, void *arg)
{
	struct vmm_sandbox_spec spec;
	struct vmm_template t;
	struct vmm_sandbox *sb;
	struct opctx *o;
	char e[VMM_ERRLEN];
	int rc;

	if (V.m == NULL) {
		snprintf(err, errlen, "this berthd runs no VMM");
		return -1;
	}
	memset(&t, 0, sizeof(t));
	/* A named template is read now: its directory may have changed
	 * since it was registered. libvmm copies what it needs. */
	if (ps->template_dir != NULL && vmm_template_load(ps->template_dir, &t,
	    e, sizeof(e)) < 0) {
		snprintf(err, errlen, "template '%s': %s", ps->template_name, e);
		return -1;
	}
	if (ps->template_dir == NULL && V.def_debian &&
	    (rc = default_debian(&t, err, errlen)) != 0)
		return rc;
	if ((o = opctx_new(id)) == NULL) {
		vmm_template_free(&t);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memset(&spec, 0, sizeof(spec));
	spec.id = id;
	spec.tpl = ps->template_dir != NULL || V.def_debian ? &t : &V.tpl;
	spec.mem_mib = ps->mem_mib;
	spec.vcpus = ps->vcpus;
	spec.disk_mib = ps->disk_mib;
	spec.idle_pause_ms = ps->idle_pause_ms;
	spec.idle_suspend_ms = ps->idle_suspend_ms;
	spec.max_lifetime_ms = ps->max_lifetime_ms;
	spec.boot = ps->boot;
	rc = vmm_sandbox_create(V.m, &spec, create_done, o, &sb, err, errlen);
	vmm_template_free(&t);
	if (rc < 0) {
		free(o);
		return rc == -EUSERS ? -3 : -1;
	}
	return 0;
}

static void
noop_done(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	if (!ok)
		log_warnx("sandbox %s: delete: %s", (const char *)arg, reason);
	free(arg);
}

static void
fork_created(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	(void)op;
	(void)arg;
	record(vmm_sandbox_id(sb), "create", ok, reason, (int64_t)dur);
	if (!ok)
		log_warnx("sandbox %s: fork failed: %s", vmm_sandbox_id(sb),
		    reason);
	else
		log_info("sandbox %s: created in %llu ms: %s", vmm_sandbox_id(sb),
		    (unsigned long long)dur, reason);
}

static void
fork_captured(struct vmm_sandbox *src, int ok, const char *reason,
    uint64_t dur, struct vmm_sandbox **forks, size_t n, void *arg)
{
	(void)forks;
	(void)arg;
	record(vmm_sandbox_id(src), "fork", ok, reason, (int64_t)dur);
	if (ok)
		log_info("sandbox %s: forked into %zu sandbox(es) in %llu ms%s%s",
		    vmm_sandbox_id(src), n, (unsigned long long)dur,
		    reason[0] ? ": " : "", reason);
	else
		log_warnx("sandbox %s: fork failed: %s", vmm_sandbox_id(src),
		    reason);
}

int
px_vm_fork(const char *id, const char *const *ids, size_t n,
    const char *checkpoint, char *err, size_t errlen, void *arg)
{
	struct vmm_sandbox *sb;
	int rc;

	(void)arg;
	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL) {
		snprintf(err, errlen, "no VM for sandbox %s", id);
		return -1;
	}
	if (checkpoint != NULL) {
		if ((rc = vmm_checkpoint_fork(sb, checkpoint, ids, n,
		    fork_created, NULL, err, errlen)) < 0)
			return rc == -ENOENT ? -2 : -1;
		log_info("sandbox %s: %zu sandbox(es) made from its checkpoint "
		    "%s", id, n, checkpoint);
		return 0;
	}
	if (vmm_sandbox_fork(sb, ids, n, fork_captured, NULL, fork_created,
	    NULL, err, errlen) < 0)
		return -1;
	return 0;
}

static void op_done(struct vmm_sandbox *, enum vmm_op, int, const char *,
    uint64_t, void *);

/*
 * An operation of the control API on id's sandbox begins: its VM in *sb
 * and, in *o, the context that answers done(done_arg) when it ends (the
 * caller's to free if the operation cannot begin). -1 with err: no VM, or
 * out of memory.
 */
static int
op_begin(const char *id, void (*done)(void *, int, const char *),
    void *done_arg, struct vmm_sandbox **sb, struct opctx **o, char *err,
    size_t errlen)
{
	if (V.m == NULL || (*sb = vmm_sandbox_find(V.m, id)) == NULL) {
		snprintf(err, errlen, "the VMM has no sandbox '%s'", id);
		return -1;
	}
	if ((*o = opctx_new(id)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	(*o)->done = done;
	(*o)->done_arg = done_arg;
	return 0;
}

/* A checkpoint taken or a restore ended: logged, then answered. */
static void
ckpt_done(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	if (!ok)
		log_warnx("sandbox %s: %s failed: %s", vmm_sandbox_id(sb),
		    vmm_op_name(op), reason);
	else
		log_info("sandbox %s: %s done in %llu ms%s%s",
		    vmm_sandbox_id(sb), vmm_op_name(op),
		    (unsigned long long)dur, reason[0] ? ": " : "", reason);
	op_done(sb, op, ok, reason, dur, arg);
}

/* Control API hooks of checkpoints (control.h). */
int
px_vm_checkpoint(const char *id, const char *op, const char *name,
    void (*done)(void *, int, const char *), void *done_arg, char *err,
    size_t errlen, void *arg)
{
	struct vmm_sandbox *sb;
	struct opctx *o;
	int rc;

	(void)arg;
	if (op_begin(id, done, done_arg, &sb, &o, err, errlen) < 0)
		return -1;
	if (strcmp(op, "checkpoint") == 0)
		rc = vmm_checkpoint_take(sb, name, ckpt_done, o, err, errlen);
	else
		rc = vmm_checkpoint_restore(sb, name, ckpt_done, o, err, errlen);
	if (rc < 0) {
		free(o);
		return rc == -ENOENT ? -2 : rc == -EEXIST ? -3 :
		    rc == -EDQUOT ? -4 : rc == -EUSERS ? -5 : -1;
	}
	return 0;
}

/* What the control API shows of checkpoint v. */
static void
ckpt_conv(struct px_checkpoint *out, const struct vmm_checkpoint *v)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", v->name);
	out->created = (int64_t)(v->created_ms / 1000);
	out->bytes = v->bytes;
}

int
px_vm_checkpoints(const char *id, struct px_checkpoint *out, size_t max,
    char *err, size_t errlen, void *arg)
{
	struct vmm_checkpoint *v;
	int n, i;

	(void)arg;
	if (V.m == NULL) {
		snprintf(err, errlen, "no VMM");
		return -1;
	}
	if ((v = calloc(max ? max : 1, sizeof(*v))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((n = vmm_checkpoint_list(V.m, id, v, max, err, errlen)) < 0) {
		free(v);
		return -1;
	}
	for (i = 0; i < n && (size_t)i < max; i++)
		ckpt_conv(&out[i], &v[i]);
	free(v);
	return n;
}

int
px_vm_checkpoint_get(const char *id, const char *name,
    struct px_checkpoint *out, char *err, size_t errlen, void *arg)
{
	struct vmm_checkpoint v;
	int rc;

	(void)arg;
	if (V.m == NULL) {
		snprintf(err, errlen, "no VMM");
		return -1;
	}
	if ((rc = vmm_checkpoint_get(V.m, id, name, &v, err, errlen)) < 0)
		return rc == -ENOENT ? -2 : -1;
	ckpt_conv(out, &v);
	return 0;
}

int
px_vm_checkpoint_rm(const char *id, const char *name, char *err,
    size_t errlen, void *arg)
{
	int rc;

	(void)arg;
	if (V.m == NULL) {
		snprintf(err, errlen, "no VMM");
		return -1;
	}
	if ((rc = vmm_checkpoint_rm(V.m, id, name, err, errlen)) < 0)
		return rc == -ENOENT ? -2 : -1;
	log_info("sandbox %s: checkpoint %s removed", id, name);
	return 0;
}

void
px_vm_delete(const char *id, void *arg)
{
	struct vmm_sandbox *sb;
	char err[VMM_ERRLEN];

	px_eg_sandbox_down(id);
	V.hooks.exec_forget(id);
	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL)
		return;
	if (vmm_sandbox_delete(sb, noop_done, strdup(id), err, sizeof(err)) < 0)
		log_warnx("sandbox %s: delete: %s", id, err);
}

static void
op_done(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	struct opctx *o = arg;
	struct vmm_info info;

	/* -1: a cap refused it while it waited for room (503 "capacity") */
	vmm_sandbox_info(sb, &info);
	o->done(o->done_arg, ok ? 1 : info.cap_refused ? -1 : 0, reason);
	free(o);
}

/* The stop of a restart ended: boot it again, or say why not. */
static void
restart_stopped(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t dur, void *arg)
{
	struct opctx *o = arg;
	char err[VMM_ERRLEN], why[VMM_ERRLEN + 16];

	if (!ok) {
		snprintf(why, sizeof(why), "stop: %s", reason ? reason : "");
		o->done(o->done_arg, 0, why);
		free(o);
		return;
	}
	if (vmm_sandbox_start(sb, op_done, o, err, sizeof(err)) < 0) {
		snprintf(why, sizeof(why), "start: %s", err);
		o->done(o->done_arg, 0, why);
		free(o);
	}
}

/*
 * A stop, or the stop of a restart, of a running guest first has its agent
 * run `sync`: what a command wrote just before (still in the guest's page
 * cache: its init writes dirty pages back only after a second or two) is
 * on the disk when the VMM ends. At most VM_SYNC_MS: a guest without an
 * agent, one that does not answer, or one whose agent is busy with a
 * long command is stopped anyway once that has passed.
 */
#define VM_SYNC_MS	5000

struct syncctx {
	struct opctx	*o;
	int		 restart;
	struct event	*timer;
	int		 waiting;	/* the sync's answer is still to come */
	int		 went;		/* the stop has begun */
};

static void
sync_go(struct syncctx *c)
{
	struct vmm_sandbox *sb;
	struct opctx *o = c->o;
	char err[VMM_ERRLEN];

	if (!c->went) {
		c->went = 1;
		c->o = NULL;
		if (V.hooks.exec_stopping()) {
			/* berthd is shutting down (which failed the sync): the
			 * VM outlives it, and no answer of the VMM's could
			 * reach the asker now */
			o->done(o->done_arg, 0, "berthd is shutting down");
			free(o);
		} else if ((sb = vmm_sandbox_find(V.m, o->id)) == NULL) {
			o->done(o->done_arg, 0, "the sandbox was deleted meanwhile");
			free(o);
		} else if (vmm_sandbox_stop(sb, c->restart ? restart_stopped :
		    op_done, o, err, sizeof(err)) < 0) {
			o->done(o->done_arg, 0, err);
			free(o);
		}
	}
	if (!c->waiting) {
		event_free(c->timer);
		free(c);
	}
}

static void
sync_answered(void *arg, const struct px_exec_result *res)
{
	struct syncctx *c = arg;

	(void)res;	/* whatever it says, the stop goes on */
	c->waiting = 0;
	sync_go(c);
}

static void
sync_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sync_go(arg);
}

/* 0: the stop begins once the guest synced (or VM_SYNC_MS passed);
 * -1: no sync could be asked for (nothing begun, o still the caller's). */
static int
sync_then_stop(struct opctx *o, int restart)
{
	static char *const argv[] = { "sync", NULL };
	struct px_exec_req req;
	struct syncctx *c;
	struct timeval tv;
	char err[128];
	int status;

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->timer = evtimer_new(V.base, sync_timeout, c)) == NULL) {
		free(c);
		return -1;
	}
	c->o = o;
	c->restart = restart;
	log_info("sandbox %s: %s: the guest syncs first (at most %d s)", o->id,
	    restart ? "restart" : "stop", VM_SYNC_MS / 1000);
	memset(&req, 0, sizeof(req));
	req.argv = argv;
	req.argc = 1;
	req.timeout_ms = VM_SYNC_MS;
	req.op = PX_EXEC_RUN;
	tv.tv_sec = VM_SYNC_MS / 1000;
	tv.tv_usec = (VM_SYNC_MS % 1000) * 1000;
	evtimer_add(c->timer, &tv);
	c->waiting = 1;
	/* its answer may come before this returns: c is not touched after */
	if (V.hooks.exec_start(o->id, &req, sync_answered, c, &status, err,
	    sizeof(err), NULL) < 0) {
		c->waiting = 0;
		sync_go(c);
	}
	return 0;
}

int
px_vm_lifecycle(const char *id, const char *op,
    void (*done)(void *, int, const char *), void *done_arg,
    char *err, size_t errlen, void *arg)
{
	struct vmm_sandbox *sb;
	struct opctx *o;
	int rc;

	if (op_begin(id, done, done_arg, &sb, &o, err, errlen) < 0)
		return -1;
	if (strcmp(op, "pause") == 0)
		rc = vmm_sandbox_pause(sb, op_done, o, err, errlen);
	else if (strcmp(op, "suspend") == 0)
		rc = vmm_sandbox_suspend(sb, op_done, o, err, errlen);
	else if (strcmp(op, "resume") == 0)
		rc = vmm_sandbox_resume(sb, op_done, o, err, errlen);
	else if (strcmp(op, "start") == 0)
		rc = vmm_sandbox_start(sb, op_done, o, err, errlen);
	else if (strcmp(op, "stop") == 0 || strcmp(op, "restart") == 0) {
		enum vmm_state st = vmm_sandbox_state(sb);
		int restart = op[0] == 'r';

		if (restart && (st == VMM_STOPPED || st == VMM_FAILED))
			/* nothing to stop */
			rc = vmm_sandbox_start(sb, op_done, o, err, errlen);
		else if (st == VMM_RUNNING && sync_then_stop(o, restart) == 0)
			rc = 0;
		else
			rc = vmm_sandbox_stop(sb, restart ? restart_stopped :
			    op_done, o, err, errlen);
	} else {
		snprintf(err, errlen, "unknown operation '%s'", op);
		rc = -EINVAL;
	}
	if (rc < 0) {
		free(o);
		return rc == -EUSERS ? -3 : -1;
	}
	return 0;
}

static void
wake_done(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	struct opctx *o = arg;
	struct vmm_info info;
	int64_t ms = ms_since(&o->t0);

	/* on a success on_state told the workers already; a cap's refusal
	 * while it waited for room is told as one (503 "capacity") */
	vmm_sandbox_info(sb, &info);
	wake_finished(o->id, ok ? 1 : info.cap_refused ? -1 : 0, reason);
	if (o->joined) {
		free(o);
		return;
	}
	record(o->id, "wake", ok, reason, ms);
	if (ok)
		log_info("sandbox %s: woken in %lld ms", o->id, (long long)ms);
	else
		log_warnx("sandbox %s: wake failed: %s", o->id, reason);
	free(o);
}

/* The pause or suspend a wake met has ended: wake it now. */
static void
wake_after(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t dur, void *arg)
{
	struct opctx *o = arg;
	char id[sizeof(o->id)];

	snprintf(id, sizeof(id), "%s", o->id);
	free(o);
	px_vm_wake(id);
}

void
px_vm_wake(const char *id)
{
	struct vmm_sandbox *sb;
	struct vmm_info info;
	struct opctx *o;
	char err[VMM_ERRLEN];
	const char *fail = NULL;
	int rc = -1;

	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL) {
		fail = "no VM for this sandbox";
		goto answer;
	}
	/* The idle policy is pausing or suspending it right now: join that
	 * operation and wake it when it ends, rather than fail the request
	 * (or, for a pause, let it through to a guest about to stop). */
	vmm_sandbox_info(sb, &info);
	/* Moving to another host: the requests wait for the move's end,
	 * then wake it here (it failed) or go to its new host (the route
	 * table says where by then: px_vm_move_handed). */
	if (info.moving) {
		struct waking *w;

		for (w = V.move_waits; w != NULL; w = w->next)
			if (strcmp(w->id, id) == 0)
				return;
		if ((w = calloc(1, sizeof(*w))) == NULL) {
			fail = "out of memory";
			goto answer;
		}
		snprintf(w->id, sizeof(w->id), "%s", id);
		w->next = V.move_waits;
		V.move_waits = w;
		return;
	}
	/* ... unless its guest is still giving memory back for the idle
	 * policy's: that is given up (libvmm) and the guest runs on. That
	 * ends the operation (and runs its waiters): look again. */
	if (info.busy && info.preparing) {
		(void)vmm_sandbox_resume(sb, NULL, NULL, err, sizeof(err));
		vmm_sandbox_info(sb, &info);
	}
	if (info.busy && (info.op == VMM_OP_PAUSE || info.op == VMM_OP_SUSPEND) &&
	    (o = opctx_new(id)) != NULL) {
		if (info.op == VMM_OP_PAUSE)
			rc = vmm_sandbox_pause(sb, wake_after, o, err, sizeof(err));
		else
			rc = vmm_sandbox_suspend(sb, wake_after, o, err, sizeof(err));
		if (rc == 0)
			return;
		free(o);
	}
	if (vmm_sandbox_state(sb) == VMM_RUNNING) {
		V.hooks.changed();
		goto answer;	/* it runs */
	}
	if ((o = opctx_new(id)) == NULL) {
		fail = "out of memory";
		goto answer;
	}
	if ((rc = vmm_sandbox_resume(sb, wake_done, o, err, sizeof(err))) < 0) {
		free(o);
		record(id, "wake", 0, err, 0);
		if (rc == -EUSERS) {
			log_warnx("sandbox %s: wake refused: %s", id, err);
			tell_woken(id, -1, err);
			return;
		}
		fail = err;
		goto answer;
	}
	{
		struct waking *w;

		for (w = V.waking; w != NULL; w = w->next)
			if (strcmp(w->id, id) == 0)
				break;
		if (w != NULL) {
			o->joined = 1;	/* another worker's wake: one event */
		} else if ((w = calloc(1, sizeof(*w))) != NULL) {
			snprintf(w->id, sizeof(w->id), "%s", id);
			w->next = V.waking;
			V.waking = w;
		}
	}
	return;
answer:
	tell_woken(id, fail == NULL, fail);
}

unsigned
px_vm_template_mem(const char *dir, void *arg)
{
	struct vmm_template t;
	char e[VMM_ERRLEN];
	unsigned mem;

	(void)arg;
	if (dir == NULL && !V.def_debian)
		return V.have_tpl ? V.tpl.mem_mib : 0;
	if (vmm_template_load(dir != NULL ? dir : V.tdir, &t, e,
	    sizeof(e)) < 0)
		return 0;
	mem = t.mem_mib;
	vmm_template_free(&t);
	return mem;
}

/* What a VM-backed sandbox is to ops: its VMM, accelerator, jail and
 * what it used (cgroup), for `netctl sandbox show` (GET the sandbox). */
json_t *
px_vm_info(const char *id, void *arg)
{
	struct vmm_sandbox *sb;
	struct vmm_info info;
	struct vmm_usage u;
	struct vmm_disk_usage d;

	(void)arg;
	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL)
		return NULL;
	vmm_sandbox_info(sb, &info);
	vmm_sandbox_usage(sb, &u);
	if (vmm_sandbox_disk_usage(sb, &d) < 0)
		memset(&d, 0, sizeof(d));
	return json_pack("{s:i, s:s, s:s, s:s, s:b, s:b, s:I, s:s, "
	    "s:{s:f, s:I, s:I, s:I}, s:{s:i, s:I, s:I}, s:I}",
	    "pid", (int)info.pid, "accel", vmm_accel_name(info.accel),
	    /* "snapshot": restored from a ready snapshot, "boot" */
	    "created_from", info.from_snapshot ? "snapshot" : "boot",
	    "base_layer", info.ready_key != NULL ? info.ready_key : "",
	    "resumable", info.resumable,
	    "jailed", info.jailed, "uid", (json_int_t)info.uid,
	    "reason", info.reason != NULL ? info.reason : "",
	    "usage", "cpu_seconds", (double)u.cpu_usec / 1e6,
	    "memory_bytes", (json_int_t)u.mem_bytes,
	    "cpu_throttled_periods", (json_int_t)u.throttled,
	    "console_paused", (json_int_t)u.console_paused,
	    /* its disk's qcow2 layers; bytes its own top holds, and the
	     * frozen layers under it (shared with forks, checkpoints) */
	    "disk", "layers", (int)d.layers, "owned_bytes",
	    (json_int_t)d.owned_bytes, "shared_bytes",
	    (json_int_t)d.shared_bytes,
	    /* a suspended one's standby VMM, once loaded: its PSS (the
	     * vm_standby_memory budget counts it) */
	    "standby_memory_bytes",
	    (json_int_t)vmm_sandbox_standby_bytes(sb));
}

/* The guest console kept for ops (console.log.1 then console.log, at most
 * vm_console_max in all): {"size": bytes kept, "text": what follows
 * offset from (-1: the last 64 KiB)}; bytes other than printable ASCII,
 * tab and newline become '?', so the text is always valid JSON. */
json_t *
px_vm_console(const char *id, long long from, void *arg)
{
	static const char *const names[] = { "console.log.1", "console.log" };
	struct vmm_sandbox *sb;
	struct vmm_info info;
	char path[PATH_MAX], *text = NULL, *t;
	long long size[2] = { 0, 0 }, total, start, pos = 0;
	struct stat st;
	size_t len = 0, cap = 0, i;
	FILE *f;
	json_t *doc;
	int c;

	(void)arg;
	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL)
		return NULL;
	vmm_sandbox_info(sb, &info);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", info.dir, names[i]);
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			size[i] = (long long)st.st_size;
	}
	total = size[0] + size[1];
	start = from >= 0 ? from : total - 65536;
	if (start < 0 || start > total)
		start = from > total ? total : 0;
	if (total - start > (1 << 20))		/* one answer: 1 MiB at most */
		start = total - (1 << 20);
	cap = (size_t)(total - start) + 1;
	if ((text = malloc(cap)) == NULL)
		return NULL;
	for (i = 0; i < 2; i++) {
		if (pos + size[i] <= start) {
			pos += size[i];
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", info.dir, names[i]);
		if ((f = fopen(path, "re")) == NULL) {
			pos += size[i];
			continue;
		}
		if (start > pos)
			(void)fseeko(f, (off_t)(start - pos), SEEK_SET);
		while (len + 1 < cap && (c = getc(f)) != EOF) {
			t = text + len++;
			*t = (char)((c >= 0x20 && c < 0x7f) || c == '\n' ||
			    c == '\t' ? c : '?');
		}
		fclose(f);
		pos += size[i];
	}
	text[len] = '\0';
	doc = json_pack("{s:I, s:I, s:s}", "size", (json_int_t)total, "from",
	    (json_int_t)start, "text", text);
	free(text);
	return doc;
}

static void capacity_metrics(struct evbuffer *);

/* Per-sandbox VMM usage for /metrics. */
void
px_vm_metrics(struct evbuffer *out)
{
	static const char *const help[] = {
	    "berth_sandbox_cpu_seconds_total", "counter",
	    "CPU time of a sandbox's VMM (its cgroup).",
	    "berth_sandbox_memory_bytes", "gauge",
	    "Memory charged to a sandbox's VMM now (guest RAM it touched and "
	    "the VMM's own).",
	    "berth_sandbox_cpu_throttled_total", "counter",
	    "Periods the CPU quota held a sandbox's VMM back.",
	};
	struct vmm_sandbox *sb;
	struct vmm_usage u;
	int i;

	if (V.m == NULL)
		return;
	evbuffer_add_printf(out, "# HELP berth_ready_pool_members Clones of "
	    "ready snapshots kept restored and paused for the next creates.\n"
	    "# TYPE berth_ready_pool_members gauge\n"
	    "berth_ready_pool_members %u\n"
	    "# HELP berth_ready_snapshot_building 1 while a ready snapshot is "
	    "being built (one boot).\n"
	    "# TYPE berth_ready_snapshot_building gauge\n"
	    "berth_ready_snapshot_building %d\n",
	    vmm_ready_pool_members(V.m), vmm_ready_building(V.m));
	for (i = 0; i < 3; i++) {
		evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n",
		    help[3 * i], help[3 * i + 2], help[3 * i], help[3 * i + 1]);
		for (sb = vmm_sandbox_next(V.m, NULL); sb != NULL;
		    sb = vmm_sandbox_next(V.m, sb)) {
			vmm_sandbox_usage(sb, &u);
			if (i == 0)
				evbuffer_add_printf(out, "%s{sandbox=\"%s\"} %.3f\n",
				    help[0], vmm_sandbox_id(sb),
				    (double)u.cpu_usec / 1e6);
			else
				evbuffer_add_printf(out, "%s{sandbox=\"%s\"} %llu\n",
				    help[3 * i], vmm_sandbox_id(sb),
				    (unsigned long long)(i == 1 ? u.mem_bytes :
				    u.throttled));
		}
	}
	/* disk space: what each one's own top holds, and the frozen layers
	 * under it (shared with its forks and checkpoints, or not yet
	 * freed) */
	evbuffer_add_printf(out, "# HELP berth_sandbox_disk_bytes Disk a "
	    "sandbox's layers hold: owned (its top) or shared (the frozen "
	    "layers below it).\n# TYPE berth_sandbox_disk_bytes gauge\n");
	for (sb = vmm_sandbox_next(V.m, NULL); sb != NULL;
	    sb = vmm_sandbox_next(V.m, sb)) {
		struct vmm_disk_usage d;

		if (vmm_sandbox_disk_usage(sb, &d) < 0)
			continue;
		evbuffer_add_printf(out, "berth_sandbox_disk_bytes{sandbox=\"%s\","
		    "kind=\"owned\"} %llu\nberth_sandbox_disk_bytes{sandbox=\"%s\","
		    "kind=\"shared\"} %llu\n", vmm_sandbox_id(sb),
		    (unsigned long long)d.owned_bytes, vmm_sandbox_id(sb),
		    (unsigned long long)d.shared_bytes);
	}
	capacity_metrics(out);
}

/*
 * What the host holds and can take (libvmm's capacity sample: every 30 s
 * and soon after a state change). GET /v1/health's "capacity" (netctl
 * status) and /metrics' berth_host_* show the same sample.
 */
static const char *const more_names[VMM_MORE_KINDS] = {
	"running", "paused", "suspended",
};

static int
more_nominal(const struct vmm_capacity *c, int k)
{
	switch (k) {
	case VMM_MORE_RUNNING:
		return c->nominal_mem[0] || c->nominal_cpu;
	case VMM_MORE_PAUSED:
		return c->nominal_mem[1];
	default:
		return c->nominal_disk;
	}
}

json_t *
px_vm_capacity(void)
{
	struct vmm_capacity c;
	json_t *doc, *st, *more;
	int k;

	if (V.m == NULL)
		return NULL;
	vmm_capacity(V.m, &c);
	st = json_object();
	for (k = 0; k < VMM_CAP_KINDS; k++)
		json_object_set_new(st, vmm_cap_kind_name(k), json_pack("{s:i, "
		    "s:I, s:I, s:f}", "sandboxes", (int)c.st[k].n,
		    "memory_bytes", (json_int_t)c.st[k].mem_bytes, "disk_bytes",
		    (json_int_t)c.st[k].disk_bytes, "cpu_cores", c.st[k].cpu));
	more = json_object();
	for (k = 0; k < VMM_MORE_KINDS; k++)
		json_object_set_new(more, more_names[k], json_pack("{s:i, s:s, "
		    "s:b}", "sandboxes", (int)c.more[k], "bound", c.more_by[k],
		    "nominal", more_nominal(&c, k)));
	doc = json_pack("{s:I, s:I, s:o, s:{s:i, s:i, s:I, s:I}, "
	    "s:{s:I, s:I, s:I, s:I, s:i, s:f, s:i}, "
	    "s:{s:{s:I, s:f, s:b, s:b}, s:{s:I, s:b}, s:{s:I, s:b}}, s:o, "
	    "s:{s:i, s:i, s:i, s:i}}",
	    "sampled_at", (json_int_t)c.at_ms, "interval_ms",
	    (json_int_t)c.interval_ms, "states", st,
	    "standby", "count", (int)c.standby_n, "max", (int)c.standby_max,
	    "memory_bytes", (json_int_t)c.standby_bytes,
	    "memory_limit_bytes", (json_int_t)c.standby_budget,
	    "host", "memory_total_bytes", (json_int_t)c.mem_total,
	    "memory_available_bytes", (json_int_t)c.mem_available,
	    "memory_reserve_bytes", (json_int_t)c.mem_reserve,
	    "disk_free_bytes", (json_int_t)c.disk_free, "cores", (int)c.cores,
	    "cpu_idle_cores", c.cpu_idle, "addresses_free",
	    (int)c.addresses_free,
	    "per_sandbox",
	    "running", "memory_bytes", (json_int_t)c.cost_mem[0], "cpu_cores",
	    c.cost_cpu, "memory_nominal", c.nominal_mem[0], "cpu_nominal",
	    c.nominal_cpu,
	    "paused", "memory_bytes", (json_int_t)c.cost_mem[1], "nominal",
	    c.nominal_mem[1],
	    "suspended", "disk_bytes", (json_int_t)c.cost_disk, "nominal",
	    c.nominal_disk,
	    "more", more,
	    "caps", "vm_max_running", (int)c.max_running, "vm_max_resident",
	    (int)c.max_resident, "running", (int)c.running, "resident",
	    (int)c.resident);
	return doc;
}

/* The per-state gauges of /metrics: one line per state each. */
enum { GAUGE_SANDBOXES, GAUGE_MEMORY, GAUGE_DISK };
static const struct state_gauge {
	const char *name, *help;
	int field;
} state_gauges[] = {
	{ "berth_host_sandboxes", "Sandboxes the host holds, by state "
	    "(creating counts as running).", GAUGE_SANDBOXES },
	{ "berth_host_sandbox_memory_bytes", "Host memory of the sandboxes "
	    "by state: their VMMs' PSS (suspended: their standby VMMs').",
	    GAUGE_MEMORY },
	{ "berth_host_sandbox_disk_bytes", "Disk the sandboxes' directories "
	    "hold (allocated blocks), by state.", GAUGE_DISK },
};

static uint64_t
state_gauge(const struct vmm_capacity *c, int k, int field)
{
	switch (field) {
	case GAUGE_SANDBOXES:
		return c->st[k].n;
	case GAUGE_MEMORY:
		return c->st[k].mem_bytes;
	default:
		return c->st[k].disk_bytes;
	}
}

static void
capacity_metrics(struct evbuffer *out)
{
	const struct state_gauge *g;
	struct vmm_capacity c;
	size_t i;
	int k;

	vmm_capacity(V.m, &c);
	evbuffer_add_printf(out, "# HELP berth_host_sample_timestamp_seconds "
	    "When the capacity figures below were sampled (every 30 s and "
	    "after a state change).\n"
	    "# TYPE berth_host_sample_timestamp_seconds gauge\n"
	    "berth_host_sample_timestamp_seconds %.3f\n",
	    (double)c.at_ms / 1000.0);
	for (i = 0; i < sizeof(state_gauges) / sizeof(state_gauges[0]); i++) {
		g = &state_gauges[i];
		evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n",
		    g->name, g->help, g->name);
		for (k = 0; k < VMM_CAP_KINDS; k++)
			evbuffer_add_printf(out, "%s{state=\"%s\"} %llu\n",
			    g->name, vmm_cap_kind_name(k),
			    (unsigned long long)state_gauge(&c, k, g->field));
	}
	evbuffer_add_printf(out, "# HELP berth_host_sandbox_cpu_ratio Cores "
	    "the running sandboxes' VMMs used over the last sampling "
	    "interval.\n# TYPE berth_host_sandbox_cpu_ratio gauge\n"
	    "berth_host_sandbox_cpu_ratio{state=\"running\"} %.3f\n",
	    c.st[VMM_CAP_RUNNING].cpu);
	evbuffer_add_printf(out, "# HELP berth_host_capacity_more How many "
	    "more sandboxes of the default size the host can take in each "
	    "state (measured mean costs against free memory, disk and CPU, "
	    "within the caps).\n# TYPE berth_host_capacity_more gauge\n");
	for (k = 0; k < VMM_MORE_KINDS; k++)
		evbuffer_add_printf(out, "berth_host_capacity_more"
		    "{state=\"%s\"} %u\n", more_names[k], c.more[k]);
	evbuffer_add_printf(out, "# HELP berth_host_capacity_nominal 1 when "
	    "berth_host_capacity_more of a state uses the configured size, "
	    "no sandbox of that state being there to measure.\n"
	    "# TYPE berth_host_capacity_nominal gauge\n");
	for (k = 0; k < VMM_MORE_KINDS; k++)
		evbuffer_add_printf(out, "berth_host_capacity_nominal"
		    "{state=\"%s\"} %d\n", more_names[k], more_nominal(&c, k));
	evbuffer_add_printf(out, "# HELP berth_host_standby Standby VMMs of "
	    "suspended sandboxes: how many, their PSS, and the budget "
	    "(vm_standby, vm_standby_memory; 0: no memory limit).\n"
	    "# TYPE berth_host_standby gauge\n"
	    "berth_host_standby{kind=\"count\"} %u\n"
	    "berth_host_standby{kind=\"memory_bytes\"} %llu\n"
	    "berth_host_standby{kind=\"max\"} %u\n"
	    "berth_host_standby{kind=\"memory_limit_bytes\"} %llu\n",
	    c.standby_n, (unsigned long long)c.standby_bytes, c.standby_max,
	    (unsigned long long)c.standby_budget);
}

/* berth.conf's template_* options (at start and at a SIGHUP) */
static void
tpl_conf(const struct px_config *c)
{
	char *p;

	V.tpl_max_source = (uint64_t)c->template_max_context << 20;
	V.tpl_max_mib = c->template_max_size;
	V.tpl_timeout_ms = c->template_build_timeout;
	V.build_ready = c->template_build_ready;
	snprintf(V.tpl_allow, sizeof(V.tpl_allow), "%s",
	    c->template_build_allow != NULL &&
	    strcmp(c->template_build_allow, "none") != 0 ?
	    c->template_build_allow : "");
	for (p = V.tpl_allow; *p != '\0'; p++)
		if (*p == ',')
			*p = ' ';
}

void
px_vm_reload(const struct px_config *c)
{
	tpl_conf(c);
	if (V.m == NULL)
		return;
	vmm_set_limits(V.m, c->vm_standby, (uint64_t)c->vm_standby_memory << 20,
	    c->vm_max_running, c->vm_max_resident);
}

const char *
px_vm_standby(const char *id, void *arg)
{
	struct vmm_sandbox *sb;
	struct vmm_info info;

	(void)arg;
	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL)
		return NULL;
	vmm_sandbox_info(sb, &info);
	if (info.standby_pid <= 0)
		return NULL;
	return info.standby_ready ? "ready" : "starting";
}

void
px_vm_hold(const char *id, int on)
{
	struct vmm_sandbox *sb;

	if (V.m != NULL && (sb = vmm_sandbox_find(V.m, id)) != NULL)
		vmm_activity_hold(sb, on);
}

void
px_vm_activity(const char *id)
{
	struct vmm_sandbox *sb;

	if (V.m != NULL && (sb = vmm_sandbox_find(V.m, id)) != NULL)
		vmm_activity(sb);
}

struct vmm_sandbox *
px_vm_sandbox(const char *id)
{
	return V.m != NULL ? vmm_sandbox_find(V.m, id) : NULL;
}

void
px_vm_each(void (*fn)(const char *id))
{
	struct vmm_sandbox *sb = NULL;

	while (V.m != NULL && (sb = vmm_sandbox_next(V.m, sb)) != NULL)
		fn(vmm_sandbox_id(sb));
}

/* ---- moving a suspended sandbox (proxy/fleet/fleet_move.c) ---- */

int
px_vm_move_export(const char *id, struct vmm_move *mv, char *err,
    size_t errlen)
{
	struct vmm_sandbox *sb;

	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL) {
		snprintf(err, errlen, "no VM for sandbox %s", id);
		return -1;
	}
	/* the sender hashes each file as it reads it */
	return vmm_move_export(sb, mv, 0, err, errlen) < 0 ? -1 : 0;
}

int
px_vm_move_flatten(const char *id, void (*done)(void *, int, const char *),
    void *arg, char *err, size_t errlen)
{
	struct vmm_sandbox *sb;
	int rc;

	if (V.m == NULL || (sb = vmm_sandbox_find(V.m, id)) == NULL) {
		snprintf(err, errlen, "no VM for sandbox %s", id);
		return -1;
	}
	if ((rc = vmm_move_flatten(sb, done, arg, err, errlen)) == 1)
		log_info("sandbox %s: flattening its fork's layers to move it",
		    id);
	return rc < 0 ? -1 : rc;
}

/* 1 if a wake of id waits for its move's end (and no longer does). */
static int
move_wait_take(const char *id)
{
	struct waking **pp, *w;

	for (pp = &V.move_waits; (w = *pp) != NULL; pp = &w->next)
		if (strcmp(w->id, id) == 0) {
			*pp = w->next;
			free(w);
			return 1;
		}
	return 0;
}

void
px_vm_move_end(const char *id)
{
	struct vmm_sandbox *sb;

	if (V.m != NULL && (sb = vmm_sandbox_find(V.m, id)) != NULL)
		vmm_move_end(sb);
	if (move_wait_take(id))
		px_vm_wake(id);		/* it stays: woken here */
}

void
px_vm_move_handed(const char *id)
{
	/* the requests go on with the routes that say where it is now */
	if (move_wait_take(id))
		tell_woken(id, 1, NULL);
}

int
px_vm_move_dir(const char *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/vms/.move%s%s", V.state_dir,
	    id != NULL ? "/" : "", id != NULL ? id : "");

	return V.m == NULL || n < 0 || (size_t)n >= len ? -1 : 0;
}

/*
 * ---- template versions a move brings ----
 * A sandbox stays on the template version it was made from. Moved to a
 * host that holds another version of its template (or none of that
 * name), it brings its version's files (libvmm's tpl.*), which become
 * templates/<name>/vm-<sha256>/ here ("default" for the default
 * template's), checked to be that version by content before anything
 * uses them: the sandbox is adopted over it, the host's own version of
 * the name stays what creates use. A name this host did not know is
 * registered with it (templates/<name>/current), as a build would. A
 * copy no sandbox uses and no name names goes at the next move here or
 * the next start.
 */
/* template tname's registered directory ("" or "default": the default's) */
static int
tpl_registered(const char *tname, char *dir, size_t len)
{
	struct px_template tp;
	char e[256];

	if (tname[0] == '\0' || strcmp(tname, PX_TEMPLATE_DEFAULT) == 0) {
		snprintf(dir, len, "%s", V.tdir);
		return 0;
	}
	if (px_store_template_get(V.store, tname, &tp, e, sizeof(e)) !=
	    PX_STORE_OK)
		return -1;
	snprintf(dir, len, "%s", tp.dir);
	return 0;
}

static int
tpl_version_is(const char *dir, const char *sha)
{
	struct vmm_template t;
	char hex[65], e[VMM_ERRLEN];
	int yes;

	if (vmm_template_load(dir, &t, e, sizeof(e)) < 0)
		return 0;
	yes = vmm_move_template_id(&t, hex, e, sizeof(e)) == 0 &&
	    strcmp(hex, sha) == 0;
	vmm_template_free(&t);
	return yes;
}

/* 1 with its directory if this host holds version sha of template
 * tname (its registered one, or a copy a move brought); 0 with where a
 * copy goes */
static int
tpl_held(const char *tname, const char *sha, char *dir, size_t len)
{
	char p[PATH_MAX + 32];
	struct stat st;

	if (tpl_registered(tname, dir, len) == 0 && tpl_version_is(dir, sha))
		return 1;
	snprintf(dir, len, "%s/templates/%s/vm-%s", V.state_dir, tname[0] ?
	    tname : PX_TEMPLATE_DEFAULT, sha);
	snprintf(p, sizeof(p), "%s/template.json", dir);
	return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* files of a version directory, then it */
static void
tpl_rmdir(const char *dir)
{
	char p[PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		(void)unlink(p);
	}
	closedir(d);
	(void)rmdir(dir);
}

/* Copies moves brought that no sandbox uses and no name registers: gone. */
static void
moved_tpl_gc(void)
{
	char top[PATH_MAX], nd[PATH_MAX + 256], v[PATH_MAX * 2], reg[PATH_MAX];
	char real[PATH_MAX], rv[PATH_MAX];
	struct dirent *de, *ve;
	DIR *d, *vd;

	snprintf(top, sizeof(top), "%s/templates", V.state_dir);
	if ((d = opendir(top)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || !px_template_name_valid(de->d_name))
			continue;
		snprintf(nd, sizeof(nd), "%s/%s", top, de->d_name);
		if ((vd = opendir(nd)) == NULL)
			continue;
		real[0] = '\0';
		if (tpl_registered(de->d_name, reg, sizeof(reg)) == 0 &&
		    realpath(reg, real) == NULL)
			real[0] = '\0';
		while ((ve = readdir(vd)) != NULL) {
			if (strncmp(ve->d_name, "vm-", 3) != 0)
				continue;
			snprintf(v, sizeof(v), "%s/%s", nd, ve->d_name);
			if (realpath(v, rv) == NULL || strcmp(rv, real) == 0 ||
			    tb_version_used(rv))
				continue;
			tpl_rmdir(v);
			log_info("template %s: the copy of version %.12s a move "
			    "brought is removed (no sandbox uses it)",
			    de->d_name, ve->d_name + 3);
		}
		closedir(vd);
	}
	closedir(d);
}

/* The copy of version mv->tpl_sha256 made from what came in mdir
 * (tpl.*), checked, at vdir. 0, or -1 with err. */
static int
tpl_install(const char *mdir, const struct vmm_move *mv, const char *tname,
    const char *vdir, char *err, size_t errlen)
{
	static const char *const key[] = { NULL, "kernel", "initrd", "rootfs" };
	static const char *const fixed[] = { "template.json", "vmlinuz",
	    "initrd.img", "root.img" };
	char tmp[PATH_MAX + 8], p[PATH_MAX + 32], q[PATH_MAX + 32];
	char hex[65], e[VMM_ERRLEN];
	struct vmm_template t;
	json_error_t je;
	json_t *j;
	int i, rc = -1;

	snprintf(p, sizeof(p), "%s/templates", V.state_dir);
	(void)mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/templates/%s", V.state_dir, tname[0] ?
	    tname : PX_TEMPLATE_DEFAULT);
	(void)mkdir(p, 0755);
	snprintf(tmp, sizeof(tmp), "%s.tmp", vdir);
	tpl_rmdir(tmp);		/* a copy cut short before */
	if (mkdir(tmp, 0755) < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	snprintf(p, sizeof(p), "%s/tpl.json", mdir);
	if ((j = json_load_file(p, JSON_REJECT_DUPLICATES, &je)) == NULL ||
	    !json_is_object(j)) {
		snprintf(err, errlen, "the template's template.json: %s", j ==
		    NULL ? je.text : "not an object");
		goto out;
	}
	/* its files under this host's names; none of the source's paths */
	for (i = 1; i < 4; i++) {
		static const char *const nm[] = { NULL, "tpl.kernel",
		    "tpl.initrd", "tpl.rootfs" };

		if (vmm_move_index(mv, nm[i]) < 0) {
			(void)json_object_del(j, key[i]);
			continue;
		}
		snprintf(p, sizeof(p), "%s/%s", mdir, nm[i]);
		snprintf(q, sizeof(q), "%s/%s", tmp, fixed[i]);
		if (rename(p, q) < 0 || chmod(q, 0644) < 0 ||
		    json_object_set_new(j, key[i], json_string(fixed[i])) < 0) {
			snprintf(err, errlen, "%s: %s", q, strerror(errno));
			goto out;
		}
	}
	snprintf(q, sizeof(q), "%s/%s", tmp, fixed[0]);
	if (json_dump_file(j, q, JSON_INDENT(2)) < 0 || chmod(q, 0644) < 0) {
		snprintf(err, errlen, "%s: cannot be written", q);
		goto out;
	}
	/* the version the manifest names, by content */
	if (vmm_template_load(tmp, &t, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "the template that came: %s", e);
		goto out;
	}
	i = vmm_move_template_id(&t, hex, e, sizeof(e));
	vmm_template_free(&t);
	if (i < 0 || strcmp(hex, mv->tpl_sha256) != 0) {
		snprintf(err, errlen, "the template that came is not version "
		    "%.12s: %s", mv->tpl_sha256, i < 0 ? e : "other bytes");
		goto out;
	}
	if (rename(tmp, vdir) < 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			snprintf(err, errlen, "%s: %s", vdir, strerror(errno));
			goto out;
		}
		tpl_rmdir(tmp);	/* another move's copy, the same by name */
	}
	rc = 0;
out:
	json_decref(j);
	if (rc < 0)
		tpl_rmdir(tmp);
	return rc;
}

int
px_vm_move_needs(const struct vmm_move *mv, const char *tname, int *need,
    char *err, size_t errlen)
{
	char dir[PATH_MAX];
	size_t i;

	if (V.m == NULL) {
		snprintf(err, errlen, "this berthd runs no VMM");
		return -1;
	}
	if (vmm_move_needs(V.m, mv, need, err, errlen) < 0)
		return -1;
	if (tname == NULL)
		return 0;
	if (tname[0] != '\0' && !px_template_name_valid(tname)) {
		snprintf(err, errlen, "a bad template name");
		return -2;
	}
	if (tpl_held(tname, mv->tpl_sha256, dir, sizeof(dir)))
		return 0;
	if (vmm_move_index(mv, "tpl.json") < 0) {
		snprintf(err, errlen, "template %s: this host holds no "
		    "version %.12s of it, and the move brings none of its "
		    "files", tname[0] ? tname : PX_TEMPLATE_DEFAULT,
		    mv->tpl_sha256);
		return -2;
	}
	for (i = 0; i < mv->n; i++)
		if (vmm_move_template_file(mv->f[i].name) >= 0)
			need[i] = 1;
	return 0;
}

int
px_vm_move_template(const char *mdir, const struct vmm_move *mv,
    const char *tname, char *dir, size_t len, int *copied, char *err,
    size_t errlen)
{
	struct px_template tp;
	char p[PATH_MAX + 32], e[256];
	size_t i;
	int rc = 0;

	*copied = 0;
	if (V.m == NULL) {
		snprintf(err, errlen, "this berthd runs no VMM");
		return -1;
	}
	if (tname[0] != '\0' && !px_template_name_valid(tname)) {
		snprintf(err, errlen, "a bad template name");
		return -1;
	}
	if (!tpl_held(tname, mv->tpl_sha256, dir, len)) {
		if (vmm_move_index(mv, "tpl.json") < 0) {
			snprintf(err, errlen, "template %s: this host holds no "
			    "version %.12s, and none came", tname[0] ? tname :
			    PX_TEMPLATE_DEFAULT, mv->tpl_sha256);
			rc = -1;
		} else {
			moved_tpl_gc();
			if ((rc = tpl_install(mdir, mv, tname, dir, err,
			    errlen)) == 0) {
				*copied = 1;
				log_info("template %s: version %.12s copied here "
				    "by a move (%s)", tname[0] ? tname :
				    PX_TEMPLATE_DEFAULT, mv->tpl_sha256, dir);
			}
		}
	}
	/* what came of the template and is not needed (held meanwhile) */
	for (i = 0; i < mv->n; i++)
		if (vmm_move_template_file(mv->f[i].name) >= 0) {
			snprintf(p, sizeof(p), "%s/%s", mdir, mv->f[i].name);
			(void)unlink(p);
		}
	if (rc < 0 || tname[0] == '\0' ||
	    strcmp(tname, PX_TEMPLATE_DEFAULT) == 0 ||
	    px_store_template_get(V.store, tname, &tp, e, sizeof(e)) !=
	    PX_STORE_NOTFOUND)
		return rc;
	/* a name this host did not know: it is this version here */
	memset(&tp, 0, sizeof(tp));
	snprintf(tp.name, sizeof(tp.name), "%s", tname);
	snprintf(tp.dir, sizeof(tp.dir), "%s/templates/%s/current",
	    V.state_dir, tname);
	(void)unlink(tp.dir);
	if (symlink(strrchr(dir, '/') + 1, tp.dir) < 0 ||
	    px_store_template_add(V.store, &tp, e, sizeof(e)) != PX_STORE_OK) {
		snprintf(err, errlen, "template %s: cannot be registered: %s",
		    tname, e);
		return -1;
	}
	log_info("template %s: registered, the version a move brought",
	    tname);
	return 0;
}

/* One template directory's version by content (vmm_move_template_id,
 * cached for the process), said in the log with the time it took. */
static void
prehash(const char *name, const char *dir)
{
	struct vmm_template t;
	struct timespec t0;
	char hex[65], e[VMM_ERRLEN];

	if (dir == NULL || vmm_template_load(dir, &t, e, sizeof(e)) < 0)
		return;		/* not built yet: hashed at its first move */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (vmm_move_template_id(&t, hex, e, sizeof(e)) < 0)
		log_warnx("fleet: template %s: %s", name, e);
	else
		log_info("fleet: template %s is version %.12s by content "
		    "(hashed in %lld ms, for moves)", name, hex,
		    (long long)ms_since(&t0));
	vmm_template_free(&t);
}

static int
prehash_one(const struct px_template *tp, void *arg)
{
	(void)arg;
	prehash(tp->name, tp->dir);
	return 0;
}

void
px_vm_move_prehash(void)
{
	char e[256];

	if (V.m == NULL)
		return;
	V.prehash = 1;
	moved_tpl_gc();
	prehash(PX_TEMPLATE_DEFAULT, V.tdir);
	(void)vmm_move_prehash_ready(V.m, NULL);
	(void)px_store_template_list(V.store, prehash_one, NULL, e,
	    sizeof(e));
}

int
px_vm_move_adopt(const char *dir, const struct vmm_move *mv,
    const char *template_dir, char *err, size_t errlen)
{
	struct vmm_template t;
	struct vmm_sandbox *sb;
	struct vmm_info info;
	char e[VMM_ERRLEN], addr[INET_ADDRSTRLEN];
	int rc;

	if (V.m == NULL) {
		snprintf(err, errlen, "this berthd runs no VMM");
		return -1;
	}
	if (template_dir == NULL)
		template_dir = V.tdir;
	if (vmm_template_load(template_dir, &t, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "its template here: %s", e);
		return -1;
	}
	rc = vmm_move_adopt(V.m, dir, mv, &t, &sb, err, errlen);
	vmm_template_free(&t);
	if (rc < 0)
		return rc == -EADDRNOTAVAIL || rc == -EEXIST ? -2 : -1;
	vmm_sandbox_info(sb, &info);
	inet_ntop(AF_INET, &info.guest_ip, addr, sizeof(addr));
	(void)px_store_sandbox_set_vm(V.store, info.id, info.state ==
	    VMM_STOPPED ? "stopped" : "suspended", addr, e, sizeof(e));
	return 0;
}
