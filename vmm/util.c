/*
 * util.c — libvmm helpers with no policy in them: clocks, child processes
 * (spawn with a confirmed exec, exit watching through a pidfd), paths,
 * the address pool, id rules, and deferred calls on the event loop.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <event2/event.h>

#include "backend.h"
#include "vmm.h"

uint64_t
vmm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ev (a timer) fires in ms milliseconds */
void
vmm_timer_ms(struct event *ev, uint64_t ms)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	event_add(ev, &tv);
}

uint64_t
vmm_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int
vmm_id_valid(const char *id)
{
	size_t i, n;

	if (id == NULL || (n = strlen(id)) == 0 || n > VMM_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    (c == '-' && i > 0)))
			return 0;
	}
	return 1;
}

ssize_t
vmm_read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

int
vmm_path(const struct vmm_sandbox *sb, const char *name, char *buf,
    size_t len)
{
	int n;

	/* What the VMM opens lives in its jail; what only root touches
	 * (sandbox.conf, logs, snapshots) beside it. */
	if ((strcmp(name, "qmp.sock") == 0 ||
	    strcmp(name, "console.sock") == 0 ||
	    strcmp(name, "agent.sock") == 0) && sb->jailed)
		n = snprintf(buf, len, "%s/run/%s", sb->jdir, name);
	else if (strcmp(name, "disk.raw") == 0 ||
	    strcmp(name, "disk.qcow2") == 0 || strcmp(name, "mem") == 0 ||
	    (strcmp(name, "console.log") == 0 && !sb->jailed))
		n = snprintf(buf, len, "%s/%s", sb->jdir, name);
	else
		n = snprintf(buf, len, "%s/%s", sb->dir, name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

const char *
vmm_disk_name(const struct vmm_sandbox *sb)
{
	static char gen[32];

	if (sb->layer_gen > 0) {	/* a fork's source: its new top */
		snprintf(gen, sizeof(gen), "disk.%u.qcow2", sb->layer_gen);
		return gen;
	}
	return sb->tpl.root_overlay ? "disk.qcow2" : "disk.raw";
}

void
vmm_status_text(int status, char *buf, size_t len)
{
	if (status == -1)
		snprintf(buf, len, "exited (not our child: status unknown)");
	else if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
		    strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "ended (status 0x%x)", (unsigned)status);
}

void
vmm_tail_line(const char *path, char *buf, size_t len)
{
	char chunk[2048], *p, *end;
	ssize_t n;
	off_t size;
	int fd;

	if (len == 0)
		return;
	buf[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)sizeof(chunk) - 1)
		(void)lseek(fd, size - (off_t)sizeof(chunk) + 1, SEEK_SET);
	else
		(void)lseek(fd, 0, SEEK_SET);
	n = read(fd, chunk, sizeof(chunk) - 1);
	close(fd);
	if (n <= 0)
		return;
	chunk[n] = '\0';
	end = chunk + n;
	while (end > chunk && (end[-1] == '\n' || end[-1] == '\r' ||
	    end[-1] == ' '))
		*--end = '\0';
	for (p = end; p > chunk && p[-1] != '\n'; p--)
		;
	snprintf(buf, len, "%s", p);
	for (p = buf; *p != '\0'; p++)
		if (*p == '\r' || *p == '\t')
			*p = ' ';
}

int
vmm_scan_file(const char *path, off_t *off, char *carry, size_t carrylen,
    const char *needle)
{
	char buf[8192 + 256];
	size_t nl = strlen(needle), cl, i;
	ssize_t n;
	int fd, found = 0;

	if (nl == 0 || carrylen > 256)
		return 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	for (;;) {
		cl = strlen(carry);
		memcpy(buf, carry, cl);
		n = pread(fd, buf + cl, sizeof(buf) - cl - 1, *off);
		if (n <= 0)
			break;
		*off += n;
		cl += (size_t)n;
		buf[cl] = '\0';
		/* NULs from a serial port would end strstr early */
		for (i = 0; i < cl; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		if (strstr(buf, needle) != NULL) {
			found = 1;
			break;
		}
		if (nl > 1 && nl - 1 < carrylen) {
			size_t keep = cl < nl - 1 ? cl : nl - 1;

			memcpy(carry, buf + cl - keep, keep);
			carry[keep] = '\0';
		} else {
			carry[0] = '\0';
		}
	}
	close(fd);
	return found;
}

/* ---- child processes ---- */

struct vmm_child {
	pid_t pid;
	int pidfd;
	struct event *ev;
	vmm_child_cb cb;
	void *arg;
};

static void
child_ready(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_child *c = arg;
	vmm_child_cb cb = c->cb;
	void *cbarg = c->arg;
	pid_t pid = c->pid;
	int status = -1;
	pid_t r;

	(void)fd;
	(void)what;
	do
		r = waitpid(pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return;		/* spurious: not exited yet */
	if (r < 0)
		status = -1;	/* not our child (adopted), or reaped elsewhere */
	vmm_child_unwatch(c);
	cb(pid, status, cbarg);
}

struct vmm_child *
vmm_child_watch(struct event_base *base, pid_t pid, vmm_child_cb cb,
    void *arg, char *err, size_t errlen)
{
	struct vmm_child *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->pid = pid;
	c->cb = cb;
	c->arg = arg;
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (c->pidfd < 0) {
		snprintf(err, errlen, "pidfd_open %d: %s", (int)pid,
		    strerror(errno));
		free(c);
		return NULL;
	}
	(void)fcntl(c->pidfd, F_SETFD, FD_CLOEXEC);
	c->ev = event_new(base, c->pidfd, EV_READ | EV_PERSIST, child_ready, c);
	if (c->ev == NULL || event_add(c->ev, NULL) < 0) {
		snprintf(err, errlen, "cannot watch pid %d", (int)pid);
		if (c->ev != NULL)
			event_free(c->ev);
		close(c->pidfd);
		free(c);
		return NULL;
	}
	return c;
}

void
vmm_child_unwatch(struct vmm_child *c)
{
	if (c == NULL)
		return;
	event_free(c->ev);
	close(c->pidfd);
	free(c);
}

int
vmm_spawn_prepare(const char *logpath, int *logfd, int pfd[2], char *err,
    size_t errlen)
{
	*logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
	    O_CLOEXEC, 0640);
	if (*logfd < 0) {
		snprintf(err, errlen, "%s: %s", logpath, strerror(errno));
		return -1;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(*logfd);
		return -1;
	}
	return 0;
}

void
vmm_spawn_child_stdio(int logfd)
{
	sigset_t all;
	int n, fd;

	/* The VMM must outlive berthd and not get its terminal's signals:
	 * own session, default signal state, stdin /dev/null, stdout and
	 * stderr to its log. */
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (n = 1; n < NSIG; n++)
		if (n != SIGKILL && n != SIGSTOP)
			signal(n, SIG_DFL);
	setsid();
	if ((fd = open("/dev/null", O_RDONLY)) >= 0 && fd != 0) {
		dup2(fd, 0);
		close(fd);
	}
	dup2(logfd, 1);
	dup2(logfd, 2);
}

int
vmm_spawn_confirm(pid_t pid, int pfd[2], int logfd)
{
	int e, n;

	close(pfd[1]);
	close(logfd);
	do
		n = (int)read(pfd[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	if (n != (int)sizeof(e))
		return 0;
	waitpid(pid, NULL, 0);
	return e;
}

pid_t
vmm_spawn(char *const argv[], const char *logpath, uid_t uid, gid_t gid,
    char *err, size_t errlen)
{
	int pfd[2], e, fd, logfd;
	pid_t pid;

	if (vmm_spawn_prepare(logpath, &logfd, pfd, err, errlen) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		vmm_spawn_child_stdio(logfd);
		/* Nothing of berthd (listeners, client connections, netlink
		 * sockets) may leak into the VMM: keep 0-2 and the exec
		 * report pipe (moved to 3, close-on-exec), close the rest. */
		if (pfd[1] != 3) {
			dup2(pfd[1], 3);
			pfd[1] = 3;
		}
		(void)fcntl(3, F_SETFD, FD_CLOEXEC);
		if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
			for (fd = 4; fd < 65536; fd++)
				close(fd);
		if (uid != 0 && (setgroups(0, NULL) < 0 || setgid(gid) < 0 ||
		    setuid(uid) < 0)) {
			e = errno;
			if (write(pfd[1], &e, sizeof(e)) < 0)
				_exit(127);
			_exit(127);
		}
		execvp(argv[0], argv);
		e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	if ((e = vmm_spawn_confirm(pid, pfd, logfd)) != 0) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(e));
		return -1;
	}
	return pid;
}

/* ---- address pool ---- */

struct vmm_pool {
	uint32_t base;		/* host order, /plen aligned */
	size_t nblocks;
	size_t used;
	unsigned char *bits;
};

struct vmm_pool *
vmm_pool_new(struct in_addr base, uint8_t plen, char *err, size_t errlen)
{
	struct vmm_pool *p;
	uint32_t b = ntohl(base.s_addr), mask;

	if (plen < 8 || plen > 30) {
		snprintf(err, errlen, "address pool /%u: prefix must be 8..30",
		    plen);
		return NULL;
	}
	mask = ~0U << (32 - plen);
	if (b & ~mask) {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &base, a, sizeof(a));
		snprintf(err, errlen, "address pool %s/%u has host bits set", a,
		    plen);
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->base = b;
	p->nblocks = (size_t)1 << (30 - plen);
	p->bits = calloc((p->nblocks + 7) / 8, 1);
	if (p->bits == NULL) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return p;
}

void
vmm_pool_free(struct vmm_pool *p)
{
	if (p == NULL)
		return;
	free(p->bits);
	free(p);
}

static void
pool_addrs(const struct vmm_pool *p, size_t i, struct in_addr *gw,
    struct in_addr *guest)
{
	uint32_t net = p->base + (uint32_t)(i * 4);

	if (gw != NULL)
		gw->s_addr = htonl(net + 1);
	if (guest != NULL)
		guest->s_addr = htonl(net + 2);
}

int
vmm_pool_alloc(struct vmm_pool *p, struct in_addr *gw, struct in_addr *guest)
{
	size_t i;

	for (i = 0; i < p->nblocks; i++) {
		if (p->bits[i / 8] & (1U << (i % 8)))
			continue;
		p->bits[i / 8] |= (unsigned char)(1U << (i % 8));
		p->used++;
		pool_addrs(p, i, gw, guest);
		return (int)i;
	}
	return -ENOSPC;
}

static int
pool_index(const struct vmm_pool *p, struct in_addr guest, size_t *i)
{
	uint32_t a = ntohl(guest.s_addr);

	if (a < p->base || a - p->base >= p->nblocks * 4)
		return -ERANGE;
	*i = (a - p->base) / 4;
	return 0;
}

int
vmm_pool_claim(struct vmm_pool *p, struct in_addr guest)
{
	size_t i;

	if (pool_index(p, guest, &i) < 0)
		return -ERANGE;
	if (p->bits[i / 8] & (1U << (i % 8)))
		return -EEXIST;
	p->bits[i / 8] |= (unsigned char)(1U << (i % 8));
	p->used++;
	return (int)i;
}

void
vmm_pool_release(struct vmm_pool *p, struct in_addr guest)
{
	size_t i;

	if (p == NULL || pool_index(p, guest, &i) < 0)
		return;
	if (p->bits[i / 8] & (1U << (i % 8))) {
		p->bits[i / 8] &= (unsigned char)~(1U << (i % 8));
		p->used--;
	}
}

size_t
vmm_pool_size(const struct vmm_pool *p)
{
	return p->nblocks;
}

size_t
vmm_pool_used(const struct vmm_pool *p)
{
	return p->used;
}
