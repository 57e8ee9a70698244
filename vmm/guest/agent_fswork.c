/*
 * agent_fswork.c — the guest agent's 'x' (remove) and 'v' (move), done in
 * a worker process: a big tree or a copy across filesystems takes its
 * time there, not the loop's.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define STD_PATH	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:" \
			"/sbin:/bin"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/*
 * Removes and moves are a worker's: a child of the agent (in a process
 * group of its own, its descriptors but its message pipe closed) that
 * does the work and exits 0, or writes the 'F' message to its pipe and
 * exits 1. A tree of a million files or a copy across filesystems takes
 * what it takes there, and the agent's loop goes on; 'K', a ping or the
 * 't' deadline kill the worker's group (a removal is left half done).
 */
#define WORKER_MSG	3	/* the worker's message pipe */

static void __attribute__((format(printf, 3, 4)))
msgf(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (msg[0] != '\0')
		return;		/* the first failure is told */
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
}

/*
 * Empties the directory fd (closed here): every entry removed, a
 * subdirectory emptied first, a symbolic link removed, never followed
 * (openat with O_NOFOLLOW); a directory of another filesystem mounted
 * below is not entered (its removal fails: busy). Failures do not stop
 * the rest; the first is told in msg. 0, or -1.
 */
static int
rm_inside(int fd, dev_t dev, const char *top, char *msg, size_t len)
{
	struct dirent *e;
	struct stat st;
	DIR *d;
	int rc = 0, again = 1, sub;

	if ((d = fdopendir(fd)) == NULL) {
		msgf(msg, len, "500 cannot read under %s: %s", top,
		    strerror(errno));
		close(fd);
		return -1;
	}
	/* Again until a pass removes nothing: whether readdir still
	 * returns every entry while others go is up to the filesystem. */
	while (again) {
		again = 0;
		rewinddir(d);
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			if (fstatat(dirfd(d), e->d_name, &st,
			    AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno == ENOENT)
					continue;
				goto fail;
			}
			if (S_ISDIR(st.st_mode)) {
				if (st.st_dev == dev) {
					sub = openat(dirfd(d), e->d_name,
					    O_RDONLY | O_DIRECTORY |
					    O_NOFOLLOW | O_CLOEXEC);
					if (sub < 0 && errno == ENOENT)
						continue;
					if (sub < 0)
						goto fail;
					if (rm_inside(sub, dev, top, msg,
					    len) < 0)
						rc = -1;
				}
				if (unlinkat(dirfd(d), e->d_name,
				    AT_REMOVEDIR) < 0 && errno != ENOENT)
					goto fail;
			} else if (unlinkat(dirfd(d), e->d_name, 0) < 0 &&
			    errno != ENOENT)
				goto fail;
			again = 1;
			continue;
fail:
			msgf(msg, len, "%d cannot remove %s under %s: %s",
			    err_code(errno), e->d_name, top, strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

/* The worker of 'x': 0, or -1 with msg. */
static int
do_remove(const char *path, int recursive, char *msg, size_t len)
{
	char parent[4096];
	const char *name;
	struct stat st, root;
	int pfd, fd, rc = 0;

	name = strrchr(path, '/') + 1;
	if (*name == '\0') {
		msgf(msg, len, "400 refusing to remove /");
		return -1;
	}
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		msgf(msg, len, "400 refusing to remove '.' or '..': %s", path);
		return -1;
	}
	snprintf(parent, sizeof(parent), "%.*s", name - path > 1 ?
	    (int)(name - path - 1) : 1, path);
	if ((pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			msgf(msg, len, "404 no %s in the guest", path);
		else
			msgf(msg, len, "%d cannot remove %s: %s",
			    err_code(errno), path, strerror(errno));
		return -1;
	}
	/* "/" by another name ("/a/..", a bind mount of it) */
	if (stat("/", &root) == 0 && st.st_dev == root.st_dev &&
	    st.st_ino == root.st_ino) {
		msgf(msg, len, "400 refusing to remove /");
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(pfd, name, 0) < 0) {
			msgf(msg, len, "%d cannot remove %s: %s",
			    err_code(errno), path, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (recursive) {
		if ((fd = openat(pfd, name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0) {
			msgf(msg, len, "%d cannot remove %s: %s",
			    err_code(errno), path, strerror(errno));
			return -1;
		}
		rc = rm_inside(fd, st.st_dev, path, msg, len);
	}
	if (unlinkat(pfd, name, AT_REMOVEDIR) < 0) {
		if (errno == ENOTEMPTY || errno == EEXIST)
			msgf(msg, len, "409 %s is a directory, not empty",
			    path);
		else
			msgf(msg, len, "%d cannot remove %s: %s",
			    err_code(errno), path, strerror(errno));
		return -1;
	}
	return rc;
}

static int
rename_noreplace(const char *from, const char *to)
{
#ifdef SYS_renameat2
	return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to,
	    RENAME_NOREPLACE);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* rename(2)'s failure as an 'F' message: -1. */
static int
move_failed(const char *from, const char *to, int e, char *msg, size_t len)
{
	struct stat st;

	switch (e) {
	case ENOENT:
		if (lstat(from, &st) < 0)
			msgf(msg, len, "404 no %s in the guest", from);
		else
			msgf(msg, len, "404 no directory for %s", to);
		break;
	case EEXIST:
		msgf(msg, len, "409 %s exists", to);
		break;
	case ENOTEMPTY:
		msgf(msg, len, "409 %s exists, a directory not empty", to);
		break;
	case EISDIR:
		msgf(msg, len, "409 %s exists, a directory", to);
		break;
	case ENOTDIR:
		/* a directory onto a file, or a path through a file */
		if (lstat(to, &st) == 0 && !S_ISDIR(st.st_mode) &&
		    lstat(from, &st) == 0 && S_ISDIR(st.st_mode))
			msgf(msg, len, "409 %s exists, not a directory", to);
		else
			msgf(msg, len, "400 cannot move %s to %s: %s", from,
			    to, strerror(e));
		break;
	case EINVAL:
		msgf(msg, len, "400 cannot move a directory into itself: %s "
		    "to %s", from, to);
		break;
	default:
		msgf(msg, len, "%d cannot move %s to %s: %s", err_code(e),
		    from, to, strerror(e));
	}
	return -1;
}

/*
 * mv(1) across filesystems, as the worker's child: -T (to is never a
 * directory to move into), -f or -n. Its stderr goes into msg. 0, or -1.
 */
static int
run_mv(const char *from, const char *to, int overwrite, char *msg,
    size_t len)
{
	char err[512], tmp[512];
	size_t got = 0;
	ssize_t n;
	int pe[2], st;
	pid_t pid;

	if (pipe2(pe, O_CLOEXEC) < 0) {
		msgf(msg, len, "500 pipe: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) < 0) {
		msgf(msg, len, "500 fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char *argv[] = { "mv", overwrite ? "-f" : "-n", "-T", "--",
			(char *)(uintptr_t)from, (char *)(uintptr_t)to, NULL };
		char *envp[] = { "PATH=" STD_PATH, "LC_ALL=C", NULL };
		int nul = open("/dev/null", O_RDWR);

		signal(SIGPIPE, SIG_DFL);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		dup2(pe[1], 2);
		setenv("PATH", STD_PATH, 1);
		execvpe("mv", argv, envp);
		dprintf(2, "cannot run mv: %s", strerror(errno));
		_exit(127);
	}
	close(pe[1]);
	/* to its end (mv is not left blocked on a full pipe), the first
	 * bytes kept */
	while ((n = read(pe[0], tmp, sizeof(tmp))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if ((size_t)n > sizeof(err) - 1 - got)
			n = (ssize_t)(sizeof(err) - 1 - got);
		memcpy(err + got, tmp, (size_t)n);
		got += (size_t)n;
	}
	close(pe[0]);
	err[got] = '\0';
	err[strcspn(err, "\n")] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	msgf(msg, len, "500 mv %s %s failed (%s %d): %s", from, to,
	    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ?
	    WEXITSTATUS(st) : WTERMSIG(st), err);
	return -1;
}

/* The worker of 'v': 0, or -1 with msg. */
static int
do_move(const char *from, const char *to, int overwrite, char *msg,
    size_t len)
{
	struct stat sf, st;
	int r;

	if (!overwrite) {
		r = rename_noreplace(from, to);
		if (r < 0 && (errno == EINVAL || errno == ENOSYS)) {
			/* the flag unknown (an old kernel, a filesystem
			 * without it): looked at, then renamed (a creation
			 * in between is replaced) */
			if (lstat(to, &st) == 0)
				return move_failed(from, to, EEXIST, msg, len);
			r = rename(from, to);
		}
	} else
		r = rename(from, to);
	if (r == 0)
		return 0;
	if (errno != EXDEV)
		return move_failed(from, to, errno, msg, len);
	/* Across filesystems: mv(1) copies, then removes. What rename
	 * would refuse is refused first, and the destination is made
	 * absent or a file mv replaces. */
	if (lstat(from, &sf) < 0)
		return move_failed(from, to, errno, msg, len);
	if (lstat(to, &st) == 0) {
		if (!overwrite)
			return move_failed(from, to, EEXIST, msg, len);
		if (S_ISDIR(st.st_mode) && !S_ISDIR(sf.st_mode))
			return move_failed(from, to, EISDIR, msg, len);
		if (!S_ISDIR(st.st_mode) && S_ISDIR(sf.st_mode)) {
			msgf(msg, len, "409 %s exists, not a directory", to);
			return -1;
		}
		/* an empty directory goes as rename would replace it; a
		 * link, lest mv move into the directory it names */
		if ((S_ISDIR(st.st_mode) && rmdir(to) < 0) ||
		    (S_ISLNK(st.st_mode) && unlink(to) < 0))
			return move_failed(from, to, errno, msg, len);
	} else if (errno != ENOENT)
		return move_failed(from, to, errno, msg, len);
	if (run_mv(from, to, overwrite, msg, len) < 0)
		return -1;
	/* mv -n does nothing, successfully, when to appeared meanwhile */
	if (!overwrite && lstat(from, &sf) == 0)
		return move_failed(from, to, EEXIST, msg, len);
	return 0;
}

/* The worker's start: its own process group, no signal blocked, only
 * its message pipe (on WORKER_MSG) besides 0 to 2. */
static void
worker_init(int msgfd)
{
	struct rlimit rl;
	sigset_t none;
	int fd, max;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);	/* SIGPIPE stays ignored */
	setsid();
	if (msgfd != WORKER_MSG) {
		dup2(msgfd, WORKER_MSG);
		close(msgfd);
	}
	fcntl(WORKER_MSG, F_SETFD, FD_CLOEXEC);
	if (syscall(SYS_close_range, WORKER_MSG + 1, ~0U, 0) < 0) {
		max = (int)sysconf(_SC_OPEN_MAX);
		for (fd = WORKER_MSG + 1; fd < (max > 0 && max < 65536 ?
		    max : 65536); fd++)
			close(fd);
	}
	/* a descriptor per level of a deep tree */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* 'x' and 'v': a channel of a worker (fs_finish answers when it is
 * reaped). */
void
fs_work(uint32_t id, int type, const unsigned char *p, size_t len)
{
	const char *f[256], *what = type == BA_REMOVE ? "remove" : "move";
	char from[4096], to[4096];
	struct chan *c;
	int pm[2];
	pid_t pid;

	if (req_fields(p, len, f) < 0) {
		failf(id, "400 malformed %s: a field is not terminated", what);
		return;
	}
	if (req_path(f['p'], from, sizeof(from)) < 0 || (type == BA_MOVE &&
	    req_path(f['d'], to, sizeof(to)) < 0)) {
		failf(id, "400 the %s must be absolute", type == BA_MOVE ?
		    "paths" : "path");
		return;
	}
	if (pipe2(pm, O_CLOEXEC) < 0) {
		failf(id, "pipe failed: %s", strerror(errno));
		return;
	}
	if ((c = chan_new(id, CH_FS)) == NULL || (pid = fork()) < 0) {
		failf(id, "%s failed", c == NULL ? "malloc" : "fork");
		if (c != NULL)
			chan_end(c);
		close_pair(pm);
		return;
	}
	if (pid == 0) {
		char msg[1024] = "";
		int rc;

		worker_init(pm[1]);
		if (type == BA_REMOVE)
			rc = do_remove(from, f['r'] != NULL, msg, sizeof(msg));
		else
			rc = do_move(from, to, f['o'] != NULL, msg,
			    sizeof(msg));
		if (rc < 0)
			(void)!write(WORKER_MSG, msg, strlen(msg));
		_exit(rc < 0 ? 1 : 0);
	}
	close(pm[1]);
	c->pid = pid;
	c->out = pm[0];
	nonblock(c->out);	/* read once it is reaped: all there is */
	c->mode = (unsigned)type;
	if (f['t'] != NULL && strtoll(f['t'], NULL, 10) > 0)
		c->deadline = now_ms() + strtoll(f['t'], NULL, 10);
}

/* A reaped worker: 'X' "exit 0", or 'F' with its message. */
void
fs_finish(struct chan *c)
{
	const char *what = c->mode == BA_REMOVE ? "remove" : "move";
	char msg[1100];
	ssize_t n;
	int st = c->status;

	n = read(c->out, msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
	else if (c->timed_out)
		failf(c->id, "the %s did not end in time: stopped, maybe "
		    "half done", what);
	else if (msg[0] != '\0')
		failf(c->id, "%s", msg);
	else
		failf(c->id, "the %s's worker ended (%s %d)", what,
		    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ?
		    WEXITSTATUS(st) : WTERMSIG(st));
	chan_end(c);
}
