/*
 * proc.c — see proc.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "proc.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <event2/buffer.h>
#include <event2/event.h>

/* ---- jails ---- */

static struct {
	char	 root[PATH_MAX];
	uid_t	 uid_base;
	unsigned uid_count;
	gid_t	 gid;
	int	 drop;
	unsigned beat_ms;
	char	 exe[PATH_MAX];
	int	 exe_fd;	/* this very binary, even once replaced on disk */
} J;

void
px_proc_setup(const char *root, uid_t uid_base, unsigned uid_count,
    gid_t gid, int drop, unsigned heartbeat_ms)
{
	ssize_t n;

	snprintf(J.root, sizeof(J.root), "%s", root);
	J.uid_base = uid_base;
	J.uid_count = uid_count;
	J.gid = gid;
	J.drop = drop;
	J.beat_ms = heartbeat_ms;
	/* the binary to exec for a helper, found before anything chroots */
	if ((n = readlink("/proc/self/exe", J.exe, sizeof(J.exe) - 1)) > 0)
		J.exe[n] = '\0';
	/* An upgrade that replaces the file while berthd runs must not
	 * give it helpers of another build (the messages are its structs):
	 * helpers are exec'd from this descriptor of the running image. */
	J.exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
}

pid_t
px_proc_fork(void)
{
	pid_t pid, parent = getpid();
	sigset_t none;
	int i;

	if ((pid = fork()) != 0)
		return pid;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* A parent killed before the line above sends no signal: do not
	 * outlive it (a worker would serve stale routes). */
	if (getppid() != parent)
		_exit(1);
	return 0;
}

void
px_proc_close_fds(const int *keep, int nkeep)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int dfd, i;

	if (d == NULL)
		return;
	dfd = dirfd(d);
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name), k = 0;

		if (e->d_name[0] == '.' || fd <= 2 || fd == dfd)
			continue;
		for (i = 0; i < nkeep; i++)
			k |= keep[i] == fd;
		if (!k)
			close(fd);
	}
	closedir(d);
}

static void
jail_to(const char *what, const char *root, uid_t uid, gid_t gid)
{
	int cap;

	if (chroot(root) != 0 || chdir("/") != 0)
		fatal("%s: chroot %s", what, root);
	/* Empty the bounding set while still root: with no capability left
	 * to gain, not even a setuid binary (were exec possible) or a kernel
	 * bug in the uid change hands CAP_NET_ADMIN back. EINVAL ends the
	 * list of capabilities this kernel knows. */
	for (cap = 0; prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0; cap++)
		;
	if (errno != EINVAL || cap == 0)
		fatal("%s: cannot drop capability %d from the bounding set", what, cap);
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0)
		fatal("%s: cannot drop privileges", what);
	if (setuid(0) == 0)
		fatalx("%s: still root after dropping privileges", what);
}

uid_t
px_proc_uid(unsigned slot)
{
	if (!J.drop)
		return getuid();
	/* A slot past the range would share a uid with something else:
	 * berthd's main checks the range holds every worker's. */
	if (slot >= J.uid_count)
		fatalx("uid slot %u outside helper_uid_range (%u uids)", slot,
		    J.uid_count);
	return J.uid_base + slot;
}

unsigned
px_proc_heartbeat_ms(void)
{
	return J.beat_ms;
}

void
px_proc_jail(const char *what, unsigned slot)
{
	if (J.drop)
		jail_to(what, J.root, px_proc_uid(slot), J.gid);
}

/* ---- helpers, seen from the parent ---- */

struct px_proc {
	const struct px_proc_def *d;
	struct event_base *base;
	pid_t		 pid;
	struct px_chan	*ch;
	unsigned	 fails;		/* quick deaths in a row */
	unsigned long long restarts;
	time_t		 started;
	struct event	*restart_ev;
	struct event	*beat_ev;
	struct px_beat	 beat;
	void		(*on_exit)(struct px_proc *, void *);
	int		 stopped;
	struct px_proc	*next;
};

static struct px_proc *procs;

static void proc_fork(struct px_proc *);

static void
proc_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct px_proc *pr = arg;

	pr->d->on_msg(ch, type, p, len, fds, nfds, pr);
}

static void
proc_close(struct px_chan *ch, int corrupt, void *arg)
{
	struct px_proc *pr = arg;

	if (corrupt)
		px_proc_bad(pr, "a malformed message");
	/* the helper is exiting (or killed above); SIGCHLD restarts it */
	px_chan_free(pr->ch);
	pr->ch = NULL;
}

void
px_proc_bad(struct px_proc *pr, const char *why)
{
	log_warnx("%s helper (pid %d) sent %s: stopping it", pr->d->name,
	    (int)pr->pid, why);
	if (pr->pid > 0)
		kill(pr->pid, SIGKILL);
}

static void
proc_pong(struct px_chan *ch, uint64_t seq, void *arg)
{
	struct px_proc *pr = arg;

	if (px_beat_pong(&pr->beat, seq) != 0)
		px_proc_bad(pr, "a heartbeat answer to no ping");
}

/* Every heartbeat interval: the last ping unanswered (the helper is
 * stopped, wedged, or its channel gone while it lives on) kills it; the
 * SIGCHLD that follows restarts it as any helper that died. Its
 * messages still unread here (this loop was late: chan_read takes 64 at
 * a time) buy it one more interval. */
static void
beat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_proc *pr = arg;
	uint64_t seq;

	if (pr->pid <= 0 || pr->stopped)
		return;
	switch (px_beat_tick(&pr->beat, px_chan_pending(pr->ch), &seq)) {
	case PX_BEAT_MISSED:
		log_warnx("%s helper (pid %d) missed its heartbeat (no answer "
		    "in %u ms): killing it", pr->d->name, (int)pr->pid, J.beat_ms);
		evtimer_del(pr->beat_ev);
		kill(pr->pid, SIGKILL);
		break;
	case PX_BEAT_PING:
		if (pr->ch != NULL)
			(void)px_chan_ping(pr->ch, seq);
		break;
	}
}

static void
restart_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_proc *pr = arg;

	if (!pr->stopped && pr->pid <= 0)
		proc_fork(pr);
}

static void
proc_fork(struct px_proc *pr)
{
	int sp[2], keep[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
		log_warn("%s helper: socketpair", pr->d->name);
		goto retry;
	}
	if ((pid = px_proc_fork()) < 0) {
		log_warn("%s helper: fork", pr->d->name);
		close(sp[0]);
		close(sp[1]);
		goto retry;
	}
	if (pid == 0) {
		static const char *const pass[] = { "ASAN_OPTIONS",
		    "LSAN_OPTIONS", "UBSAN_OPTIONS", NULL };
		char title[64], env[PATH_MAX + 128], *argv[2], *envp[8];
		int ne = 0, k;

		if (J.exe_fd == PX_PROC_CHAN_FD)	/* keep it off fd 3 */
			J.exe_fd = fcntl(J.exe_fd, F_DUPFD_CLOEXEC, 10);
		if (sp[1] == PX_PROC_CHAN_FD) {
			if (fcntl(sp[1], F_SETFD, 0) != 0)
				_exit(1);
		} else if (dup2(sp[1], PX_PROC_CHAN_FD) < 0)
			_exit(1);
		keep[0] = PX_PROC_CHAN_FD;
		keep[1] = J.exe_fd;
		px_proc_close_fds(keep, 2);
		snprintf(title, sizeof(title), "berthd: %s", pr->d->name);
		snprintf(env, sizeof(env), "BERTH_HELPER=%s:%s:%u:%u:%d:%d",
		    pr->d->name, J.root, (unsigned)px_proc_uid(pr->d->uid_slot),
		    (unsigned)J.gid, J.drop, log_verbose());
		argv[0] = title;
		argv[1] = NULL;
		envp[ne++] = env;
		/* only the sanitizers' settings of a test build; nothing else
		 * of the parent's environment */
		for (k = 0; pass[k] != NULL; k++) {
			const char *v = getenv(pass[k]);
			static char buf[3][512];

			if (v != NULL && snprintf(buf[k], sizeof(buf[k]), "%s=%s",
			    pass[k], v) < (int)sizeof(buf[k]))
				envp[ne++] = buf[k];
		}
		envp[ne] = NULL;
		/* a fresh image: nothing of the parent's memory (keys,
		 * the store, tokens) is there to leak */
		if (J.exe_fd >= 0)
			fexecve(J.exe_fd, argv, envp);
		execve(J.exe, argv, envp);
		_exit(127);
	}
	close(sp[1]);
	pr->pid = pid;
	pr->started = time(NULL);
	if ((pr->ch = px_chan_new(pr->base, sp[0], proc_msg, proc_close, pr)) == NULL)
		fatalx("%s helper: out of memory", pr->d->name);
	px_chan_on_pong(pr->ch, proc_pong);
	px_beat_reset(&pr->beat);
	if (J.beat_ms > 0) {
		struct timeval tv = { J.beat_ms / 1000, J.beat_ms % 1000 * 1000 };

		evtimer_add(pr->beat_ev, &tv);
	}
	log_debug("%s helper started (pid %d, uid %u)", pr->d->name, (int)pid,
	    (unsigned)px_proc_uid(pr->d->uid_slot));
	if (pr->d->on_start != NULL)
		pr->d->on_start(pr, pr->d->arg);
	return;
retry:
	{
		struct timeval tv = { 5, 0 };

		evtimer_add(pr->restart_ev, &tv);
	}
}

struct px_proc *
px_proc_start(struct event_base *base, const struct px_proc_def *d)
{
	struct px_proc *pr, *o;

	/* two helpers of one uid could signal each other */
	for (o = procs; o != NULL; o = o->next)
		if (o->d->uid_slot == d->uid_slot)
			fatalx("helpers %s and %s given one uid slot", o->d->name,
			    d->name);
	if (d->uid_slot >= PX_UID_HELPERS)
		fatalx("helper %s: uid slot %u is a worker's", d->name, d->uid_slot);
	if ((pr = calloc(1, sizeof(*pr))) == NULL)
		return NULL;
	pr->d = d;
	pr->base = base;
	if ((pr->restart_ev = evtimer_new(base, restart_cb, pr)) == NULL ||
	    (pr->beat_ev = event_new(base, -1, EV_PERSIST, beat_cb, pr)) == NULL) {
		if (pr->restart_ev != NULL)
			event_free(pr->restart_ev);
		free(pr);
		return NULL;
	}
	pr->next = procs;
	procs = pr;
	proc_fork(pr);
	return pr;
}

void
px_proc_on_exit(struct px_proc *pr, void (*cb)(struct px_proc *, void *))
{
	pr->on_exit = cb;
}

int
px_proc_send(struct px_proc *pr, uint32_t type, const void *p, size_t len,
    const int *fds, int nfds)
{
	if (pr == NULL || pr->ch == NULL)
		return -1;	/* not running: on_start resends state */
	return px_chan_send(pr->ch, type, p, len, fds, nfds);
}

pid_t
px_proc_pid(const struct px_proc *pr)
{
	return pr != NULL ? pr->pid : 0;
}

unsigned long long
px_proc_restarts(const struct px_proc *pr)
{
	return pr != NULL ? pr->restarts : 0;
}

static void
reaped(struct px_proc *pr, pid_t pid, int st)
{
	struct timeval tv = { 0, 0 };

	pr->pid = 0;
	evtimer_del(pr->beat_ev);
	if (pr->ch != NULL) {
		px_chan_free(pr->ch);
		pr->ch = NULL;
	}
	if (pr->stopped)
		return;
	/* A helper that dies within 2 s of starting is crashing on
	 * something persistent: back off 1, 2, 4 ... 30 s. */
	if (time(NULL) - pr->started < 2) {
		pr->fails++;
		tv.tv_sec = pr->fails >= 5 ? 30 : 1 << (pr->fails - 1);
	} else
		pr->fails = 0;
	pr->restarts++;
	if (WIFSIGNALED(st))
		log_warnx("%s helper (pid %d) killed by signal %d: restarting in %ld s",
		    pr->d->name, (int)pid, WTERMSIG(st), (long)tv.tv_sec);
	else
		log_warnx("%s helper (pid %d) exited with status %d: restarting in %ld s",
		    pr->d->name, (int)pid, WEXITSTATUS(st), (long)tv.tv_sec);
	evtimer_add(pr->restart_ev, &tv);
	if (pr->on_exit != NULL)
		pr->on_exit(pr, pr->d->arg);
}

void
px_proc_sigchld(void)
{
	struct px_proc *pr;
	pid_t pid;
	int st;

	for (pr = procs; pr != NULL; pr = pr->next)
		if (pr->pid > 0 && (pid = waitpid(pr->pid, &st, WNOHANG)) > 0)
			reaped(pr, pid, st);
}

void
px_proc_metrics(struct evbuffer *out)
{
	struct px_proc *pr;

	evbuffer_add_printf(out, "# HELP berth_helper_up 1 while the helper "
	    "(berthd: dns, nflog, control, agent) runs.\n# TYPE berth_helper_up gauge\n");
	for (pr = procs; pr != NULL; pr = pr->next)
		evbuffer_add_printf(out, "berth_helper_up{helper=\"%s\"} %d\n",
		    pr->d->name, pr->pid > 0 && pr->ch != NULL);
	evbuffer_add_printf(out, "# HELP berth_helper_restarts_total Helpers "
	    "started again after dying.\n# TYPE berth_helper_restarts_total counter\n");
	for (pr = procs; pr != NULL; pr = pr->next)
		evbuffer_add_printf(out, "berth_helper_restarts_total{helper=\"%s\"} %llu\n",
		    pr->d->name, pr->restarts);
}

void
px_proc_stop_all(void)
{
	struct px_proc *pr;

	for (pr = procs; pr != NULL; pr = pr->next) {
		pr->stopped = 1;
		evtimer_del(pr->restart_ev);
		evtimer_del(pr->beat_ev);
		if (pr->pid > 0)
			kill(pr->pid, SIGTERM);
	}
}

/* ---- a helper, seen from inside ---- */

void
px_proc_helper_main(int argc, char **argv, const struct px_helper *helpers)
{
	const char *env = getenv("BERTH_HELPER");
	char name[32], root[PATH_MAX], role[48], title[16];
	unsigned uid, gid;
	int drop, verbose, n;

	(void)argc;
	(void)argv;
	if (env == NULL)
		return;
	/* name:root:uid:gid:drop:verbose, root having no ':' (berthd's
	 * own <state>/empty) */
	if (sscanf(env, "%31[^:]:%4095[^:]:%u:%u:%d:%d%n", name, root, &uid, &gid,
	    &drop, &verbose, &n) != 6 || env[n] != '\0') {
		fprintf(stderr, "berthd: bad BERTH_HELPER\n");
		exit(1);
	}
	snprintf(role, sizeof(role), "berthd[%s]", name);
	log_init(strdup(role), verbose);
	snprintf(title, sizeof(title), "berthd: %s", name);
	prctl(PR_SET_NAME, title, 0, 0, 0);
	unsetenv("BERTH_HELPER");
	if (drop)
		jail_to(name, root, (uid_t)uid, (gid_t)gid);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0);
	signal(SIGPIPE, SIG_IGN);
	for (; helpers->name != NULL; helpers++)
		if (strcmp(name, helpers->name) == 0)
			exit(helpers->main(PX_PROC_CHAN_FD));
	fatalx("unknown helper %s", name);
}
