/*
 * agent.c — berth's guest agent: runs commands for berthd (exec with argv,
 * env, cwd, timeout, stdin; stdout and stderr streamed back; the exit
 * status or signal) and answers a health ping. Static, it sits in the
 * initramfs as /bin/berth-agent; the guest's /init starts it and restarts
 * it if it dies. The frames are in agent_proto.h.
 *
 * Why virtio-serial and not virtio-vsock: a vsock host end needs
 * /dev/vhost-vsock opened by the VMM, a device node the jail would have to
 * hold and a kernel module the host must load, and its host side is an
 * AF_VSOCK socket root reaches by CID. A virtio-serial port's host end is
 * a unix socket qemu serves in the jail's run/ directory, which berthd
 * connects to like QMP and the console and checks with SO_PEERCRED (the
 * VM's uid): nothing new in the jail. The two cannot be measured side by
 * side on these hosts: their kernel is built without CONFIG_VHOST_VSOCK
 * (no /dev/vhost-vsock, no module to load), so qemu's vhost-vsock-device
 * fails with "failed to open vhost device", and vhost-user-vsock needs a
 * backend daemon Debian 12 does not package. virtio-serial is what runs.
 *
 * The port: the one whose /sys/class/virtio-ports/<dev>/name is
 * "berth.agent", opened as /dev/<dev> (vport0p1...). While no host is
 * connected the port polls POLLHUP and read() returns 0; the agent then
 * waits for SIGIO, which virtio_console sends when the host connects.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent_proto.h"

#include <ctype.h>
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS	4096
#define MAX_GROUPS	64
#define STDIN_CAP	(1024 * 1024)	/* stdin held for a command that does
					 * not read: more waits in the port */

static int port = -1;		/* the virtio-serial port */
static int sigfd = -1;		/* SIGCHLD, SIGIO */

/* A file being written (BA_FILE_PUT): a temporary file beside path. */
static struct {
	int fd;			/* -1: none */
	int err;		/* the first write error */
	unsigned mode;
	char path[4096], tmp[4200];
} put = { -1, 0, 0, "", "" };

/* A pong the port refused (see handle): sent when the host is back. */
static unsigned char owed[64];
static size_t owedlen;

/* The request being read from the port. */
static unsigned char *in;
static size_t inlen, incap;

/* The command running: at most one. */
static struct {
	pid_t pid;
	int status;		/* when reaped: pid becomes 0 */
	int reaped;
	int out, err;		/* its stdout and stderr (read ends), -1 */
	int in;			/* its stdin (write end), -1 */
	unsigned char *stdin_buf;
	size_t stdin_len;
	int stdin_eof;		/* EOF asked: close in once the buffer is out */
	long long deadline;	/* monotonic ms, 0: none */
	int timed_out;
	int active;
	int tty;		/* out is the pty's master, in a dup of it */
} cmd = { 0, 0, 0, -1, -1, -1, NULL, 0, 0, 0, 0, 0, 0 };

static void __attribute__((format(printf, 1, 2)))
say(const char *fmt, ...)
{
	va_list ap;

	fputs("berth-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Finds the port named BA_PORT_NAME: its /dev path, or -1. */
static int
find_port(char *path, size_t len)
{
	char p[512], name[64];
	struct dirent *d;
	DIR *dir;
	FILE *f;
	int found = -1;

	if ((dir = opendir("/sys/class/virtio-ports")) == NULL)
		return -1;
	while (found < 0 && (d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/sys/class/virtio-ports/%s/name",
		    d->d_name);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		if (fgets(name, sizeof(name), f) != NULL) {
			name[strcspn(name, "\n")] = '\0';
			if (strcmp(name, BA_PORT_NAME) == 0) {
				snprintf(path, len, "/dev/%s", d->d_name);
				found = 0;
			}
		}
		fclose(f);
	}
	closedir(dir);
	return found;
}

/*
 * Writes a whole frame to the port. The port is non-blocking: a full ring
 * waits in poll, and a host that goes away meanwhile (POLLHUP) ends the
 * write with -1: the frame is lost with the connection.
 */
static int
port_write(int type, const void *buf, size_t len)
{
	unsigned char h[BA_HDR];
	const unsigned char *parts[2] = { h, buf };
	size_t lens[2] = { BA_HDR, len }, off;
	struct pollfd pfd;
	ssize_t n;
	int i;

	ba_hdr_put(h, (uint32_t)len, type);
	for (i = 0; i < 2; i++) {
		for (off = 0; off < lens[i]; ) {
			n = write(port, parts[i] + off, lens[i] - off);
			if (n > 0) {
				off += (size_t)n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno != EAGAIN)
				return -1;
			pfd.fd = port;
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, 5000) < 0 && errno != EINTR)
				return -1;
			if (pfd.revents & (POLLHUP | POLLERR))
				return -1;
		}
	}
	return 0;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Ends the command (whole process group) and forgets it. */
static void
cmd_drop(void)
{
	if (cmd.active && !cmd.reaped && cmd.pid > 0) {
		kill(-cmd.pid, SIGKILL);
		while (waitpid(cmd.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close_fd(&cmd.out);
	close_fd(&cmd.err);
	close_fd(&cmd.in);
	free(cmd.stdin_buf);
	memset(&cmd, 0, sizeof(cmd));
	cmd.out = cmd.err = cmd.in = -1;
}

/* A user as the command runs: from /etc/passwd and /etc/group, read
 * here (a static binary has no NSS; a Debian guest keeps its users in
 * those files too). */
struct user {
	uid_t uid;
	gid_t gid;
	gid_t groups[MAX_GROUPS];
	int ngroups;
	char name[64], home[256], shell[256];
};

/* Splits a passwd/group line into n ':' fields; 0 when it has them. */
static int
fields(char *line, char **f, int n)
{
	int i;

	line[strcspn(line, "\n")] = '\0';
	for (i = 0; i < n; i++) {
		f[i] = line;
		if ((line = strchr(line, ':')) == NULL)
			return i == n - 1 ? 0 : -1;
		*line++ = '\0';
	}
	return 0;
}

static int
numeric(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* Looks name (or a numeric uid) up; -1 with msg filled when unknown. */
static int
user_find(const char *name, struct user *u, char *msg, size_t msglen)
{
	char line[1024], *f[7], *m;
	FILE *fp;
	int found = 0;

	memset(u, 0, sizeof(*u));
	if ((fp = fopen("/etc/passwd", "re")) == NULL) {
		snprintf(msg, msglen, "400 user '%s': cannot read the guest's "
		    "/etc/passwd: %s", name, strerror(errno));
		return -1;
	}
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		if (fields(line, f, 7) < 0 || !numeric(f[2]) ||
		    !numeric(f[3]))
			continue;
		if (strcmp(f[0], name) == 0 || (numeric(name) &&
		    strtoul(name, NULL, 10) == strtoul(f[2], NULL, 10))) {
			u->uid = (uid_t)strtoul(f[2], NULL, 10);
			u->gid = (gid_t)strtoul(f[3], NULL, 10);
			snprintf(u->name, sizeof(u->name), "%s", f[0]);
			snprintf(u->home, sizeof(u->home), "%s", *f[5] ? f[5] : "/");
			snprintf(u->shell, sizeof(u->shell), "%s", *f[6] ? f[6] :
			    "/bin/sh");
			found = 1;
		}
	}
	fclose(fp);
	if (!found) {
		snprintf(msg, msglen, "400 no user '%s' in the guest's "
		    "/etc/passwd", name);
		return -1;
	}
	/* initgroups: the primary group and every group naming the user */
	u->groups[u->ngroups++] = u->gid;
	if ((fp = fopen("/etc/group", "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp) != NULL &&
	    u->ngroups < MAX_GROUPS) {
		if (fields(line, f, 4) < 0 || !numeric(f[2]))
			continue;
		for (m = strtok(f[3], ","); m != NULL; m = strtok(NULL, ","))
			if (strcmp(m, u->name) == 0 &&
			    (gid_t)strtoul(f[2], NULL, 10) != u->gid) {
				u->groups[u->ngroups++] =
				    (gid_t)strtoul(f[2], NULL, 10);
				break;
			}
	}
	fclose(fp);
	return 0;
}

/* A pty pair: the master (non-blocking) and the slave's path. */
static int
pty_open(char *slave, size_t len, int rows, int cols)
{
	struct winsize ws;
	int m;

	if ((m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return -1;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, len) != 0) {
		close(m);
		return -1;
	}
	if (rows > 0 && cols > 0) {
		memset(&ws, 0, sizeof(ws));
		ws.ws_row = (unsigned short)rows;
		ws.ws_col = (unsigned short)cols;
		(void)ioctl(m, TIOCSWINSZ, &ws);
	}
	return m;
}

/* 'W': "ROWS COLS" for the command's terminal. */
static void
resize(const unsigned char *p, size_t len)
{
	char buf[32];
	struct winsize ws;
	int rows, cols;

	if (!cmd.active || !cmd.tty || cmd.out < 0 || len >= sizeof(buf))
		return;
	memcpy(buf, p, len);
	buf[len] = '\0';
	if (sscanf(buf, "%d %d", &rows, &cols) != 2 || rows <= 0 ||
	    cols <= 0 || rows > 10000 || cols > 10000)
		return;
	memset(&ws, 0, sizeof(ws));
	ws.ws_row = (unsigned short)rows;
	ws.ws_col = (unsigned short)cols;
	(void)ioctl(cmd.out, TIOCSWINSZ, &ws);	/* SIGWINCH to its group */
}

static void
fail(const char *msg)
{
	(void)port_write(BA_FAIL, msg, strlen(msg));
}

static void __attribute__((format(printf, 1, 2)))
failf(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fail(msg);
}

static void
put_drop(void)
{
	if (put.fd < 0)
		return;
	close(put.fd);
	unlink(put.tmp);
	put.fd = -1;
}

/* The fields 'p' and 'm' of a file request; 0 when path is usable. */
static int
file_fields(const unsigned char *p, size_t len, char *path, size_t plen,
    unsigned *mode)
{
	size_t off = 0, l;
	const char *s;

	*path = '\0';
	*mode = 0644;
	while (off < len) {
		s = (const char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off)
			return -1;
		off += l + 1;
		if (s[0] == 'p')
			snprintf(path, plen, "%s", s + 1);
		else if (s[0] == 'm')
			*mode = (unsigned)strtoul(s + 1, NULL, 8) & 07777;
	}
	return path[0] == '/' ? 0 : -1;
}

static void
file_put(const unsigned char *p, size_t len)
{
	char *slash;

	if (cmd.active || put.fd >= 0) {
		fail("busy: a command or a transfer is running");
		return;
	}
	if (file_fields(p, len, put.path, sizeof(put.path), &put.mode) < 0) {
		fail("400 the path must be absolute");
		return;
	}
	slash = strrchr(put.path, '/');
	snprintf(put.tmp, sizeof(put.tmp), "%.*s/.%s.berth-XXXXXX",
	    (int)(slash - put.path), put.path, slash + 1);
	put.err = 0;
	if ((put.fd = mkostemp(put.tmp, O_CLOEXEC)) < 0)
		failf("%d cannot write %s: %s", errno == ENOENT ? 404 : 400,
		    put.path, strerror(errno));
}

static void
put_data(const unsigned char *p, size_t len)
{
	ssize_t n;

	if (len == 0) {		/* the end */
		if (put.err == 0 && (fchmod(put.fd, put.mode) < 0 ||
		    fsync(put.fd) < 0))
			put.err = errno;
		if (put.err == 0 && rename(put.tmp, put.path) < 0)
			put.err = errno;
		if (put.err != 0) {
			failf("400 cannot write %s: %s", put.path,
			    strerror(put.err));
			put_drop();
			return;
		}
		close(put.fd);
		put.fd = -1;
		(void)port_write(BA_EXIT, "exit 0", 6);
		return;
	}
	while (len > 0 && put.err == 0) {
		if ((n = write(put.fd, p, len)) < 0) {
			if (errno != EINTR)
				put.err = errno;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
}

/* Sends a file back; the port's flow control paces it. */
static void
file_get(const unsigned char *p, size_t len)
{
	char path[4096], buf[BA_CHUNK];
	struct stat st;
	unsigned mode;
	ssize_t n;
	int fd;

	if (cmd.active || put.fd >= 0) {
		fail("busy: a command or a transfer is running");
		return;
	}
	if (file_fields(p, len, path, sizeof(path), &mode) < 0) {
		fail("400 the path must be absolute");
		return;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			failf("404 no file %s in the guest", path);
		else
			failf("400 cannot read %s: %s", path, strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		failf("400 %s is not a regular file", path);
		close(fd);
		return;
	}
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			failf("500 reading %s: %s", path, strerror(errno));
			break;
		}
		if (n == 0) {
			(void)port_write(BA_EXIT, "exit 0", 6);
			break;
		}
		if (port_write(BA_STDOUT, buf, (size_t)n) < 0)
			break;	/* the host went away */
	}
	close(fd);
}

/* Reads what a pipe has now into frames of type; 0 at EOF (closed). */
static void
drain(int *fd, int type)
{
	char buf[BA_CHUNK];
	ssize_t n;

	while (*fd >= 0) {
		n = read(*fd, buf, sizeof(buf));
		if (n > 0) {
			(void)port_write(type, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		close_fd(fd);
	}
}

/* The command was reaped: what it wrote is in its pipes; send it and the
 * exit frame. (A background child of it that keeps the pipes open does
 * not hold the answer back: only what is there now is sent.) */
static void
cmd_finish(void)
{
	char msg[64];
	int st = cmd.status;

	drain(&cmd.out, BA_STDOUT);
	drain(&cmd.err, BA_STDERR);
	if (WIFSIGNALED(st))
		snprintf(msg, sizeof(msg), "signal %d%s", WTERMSIG(st),
		    cmd.timed_out ? " timeout" : "");
	else
		snprintf(msg, sizeof(msg), "exit %d%s", WEXITSTATUS(st),
		    cmd.timed_out ? " timeout" : "");
	(void)port_write(BA_EXIT, msg, strlen(msg));
	cmd.reaped = 1;		/* nothing to kill */
	cmd_drop();
}

static void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void
start(const unsigned char *p, size_t len)
{
	char *argv[MAX_ARGS + 1], *envp[MAX_ARGS + 8], *cwd = NULL, *s;
	char *user = NULL, slave[128], msg[512];
	static char e_home[300], e_user[80], e_logname[90], e_shell[300];
	struct user u;
	int argc = 0, envc = 0, po[2], pe[2], pi[2], i, rows = 0, cols = 0;
	int tty = 0, m = -1;
	long long timeout = 0;
	size_t off = 0, l;
	pid_t pid;

	if (cmd.active) {
		fail("busy: a command is running");
		return;
	}
	envp[envc++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	envp[envc++] = "HOME=/root";
	envp[envc++] = "TERM=dumb";
	while (off < len) {
		s = (char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off) {
			fail("malformed exec: a field is not terminated");
			return;
		}
		off += l + 1;
		switch (s[0]) {
		case 't':
			timeout = strtoll(s + 1, NULL, 10);
			break;
		case 'c':
			cwd = s + 1;
			break;
		case 'u':
			user = s + 1;
			break;
		case 'T':	/* a terminal: "ROWS COLS" (0 0: no size) */
			tty = 1;
			if (sscanf(s + 1, "%d %d", &rows, &cols) != 2)
				rows = cols = 0;
			break;
		case 'a':
			if (argc == MAX_ARGS) {
				fail("too many arguments");
				return;
			}
			argv[argc++] = s + 1;
			break;
		case 'e':
			if (envc == MAX_ARGS || strchr(s + 1, '=') == NULL) {
				fail("too many or malformed env entries");
				return;
			}
			/* a later NAME= replaces a default one */
			for (i = 0; i < envc; i++)
				if (strncmp(envp[i], s + 1, strcspn(s + 1, "=") +
				    1) == 0)
					break;
			envp[i] = s + 1;
			if (i == envc)
				envc++;
			break;
		default:
			break;		/* unknown fields: a newer host */
		}
	}
	if (argc == 0) {
		fail("exec without a command");
		return;
	}
	memset(&u, 0, sizeof(u));
	if (user != NULL && *user != '\0' && strcmp(user, "root") != 0 &&
	    strcmp(user, "0") != 0) {
		if (user_find(user, &u, msg, sizeof(msg)) < 0) {
			fail(msg);
			return;
		}
		/* the user's own HOME, USER, LOGNAME, SHELL unless asked */
		snprintf(e_home, sizeof(e_home), "HOME=%s", u.home);
		snprintf(e_user, sizeof(e_user), "USER=%s", u.name);
		snprintf(e_logname, sizeof(e_logname), "LOGNAME=%s", u.name);
		snprintf(e_shell, sizeof(e_shell), "SHELL=%s", u.shell);
		envp[1] = e_home;
		if (envc < MAX_ARGS + 4) {
			char *add[3] = { e_user, e_logname, e_shell };
			int k, j;

			for (k = 0; k < 3; k++) {
				for (j = 0; j < envc; j++)
					if (strncmp(envp[j], add[k],
					    strcspn(add[k], "=") + 1) == 0)
						break;
				if (j == envc)
					envp[envc++] = add[k];
			}
		}
	}
	if (tty)
		for (i = 0; i < envc; i++)
			if (strcmp(envp[i], "TERM=dumb") == 0)
				envp[i] = "TERM=xterm";
	argv[argc] = NULL;
	envp[envc] = NULL;
	if (tty) {
		if ((m = pty_open(slave, sizeof(slave), rows, cols)) < 0) {
			snprintf(msg, sizeof(msg), "no terminal: %s (is "
			    "/dev/pts mounted?)", strerror(errno));
			fail(msg);
			return;
		}
		po[0] = m;
		po[1] = pe[1] = pi[0] = -1;
		if ((pe[0] = fcntl(m, F_DUPFD_CLOEXEC, 0)) < 0 ||
		    (pi[1] = fcntl(m, F_DUPFD_CLOEXEC, 0)) < 0) {
			fail("dup failed");
			return;
		}
		close(pe[0]);	/* a tty's output is one stream */
		pe[0] = -1;
	} else if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
	    pipe2(pi, O_CLOEXEC) < 0) {
		fail("pipe failed");	/* fds leak only on a broken guest */
		return;
	}
	if ((pid = fork()) < 0) {
		fail("fork failed");
		if (tty) {
			close(po[0]), close(pi[1]);
		} else {
			close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
			close(pi[0]), close(pi[1]);
		}
		return;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		setsid();
		if (tty) {
			int sl = open(slave, O_RDWR);

			if (sl < 0 || ioctl(sl, TIOCSCTTY, 0) < 0) {
				dprintf(m, "berth-agent: %s: %s\r\n", slave,
				    strerror(errno));
				_exit(126);
			}
			dup2(sl, 0);
			dup2(sl, 1);
			dup2(sl, 2);
			if (sl > 2)
				close(sl);
		} else {
			dup2(pi[0], 0);
			dup2(po[1], 1);
			dup2(pe[1], 2);
		}
		if (user != NULL && u.uid != 0 &&
		    (setgroups((size_t)u.ngroups, u.groups) < 0 ||
		    setgid(u.gid) < 0 || setuid(u.uid) < 0)) {
			dprintf(2, "berth-agent: user %s: %s\n", u.name,
			    strerror(errno));
			_exit(126);
		}
		if (cwd != NULL && *cwd != '\0' && chdir(cwd) < 0) {
			dprintf(2, "berth-agent: cd %s: %s\n", cwd,
			    strerror(errno));
			_exit(126);
		}
		if ((cwd == NULL || *cwd == '\0') && chdir(u.uid != 0 ?
		    u.home : "/root") < 0)
			(void)!chdir("/");
		/* PATH for the lookup is the command's own */
		for (i = 0; envp[i] != NULL; i++)
			if (strncmp(envp[i], "PATH=", 5) == 0)
				setenv("PATH", envp[i] + 5, 1);
		execvpe(argv[0], argv, envp);
		dprintf(2, "berth-agent: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (!tty) {
		close(po[1]);
		close(pe[1]);
		close(pi[0]);
	}
	memset(&cmd, 0, sizeof(cmd));
	cmd.active = 1;
	cmd.tty = tty;
	cmd.pid = pid;
	cmd.out = po[0];
	cmd.err = pe[0];
	cmd.in = pi[1];
	nonblock(cmd.out);
	if (cmd.err >= 0)
		nonblock(cmd.err);
	nonblock(cmd.in);
	cmd.deadline = timeout > 0 ? now_ms() + timeout : 0;
}

static void
stdin_add(const unsigned char *p, size_t len)
{
	unsigned char *b;

	if (!cmd.active || cmd.in < 0)
		return;		/* the command closed its stdin: drop */
	if (len == 0) {
		cmd.stdin_eof = 1;
		return;
	}
	if ((b = realloc(cmd.stdin_buf, cmd.stdin_len + len)) == NULL)
		return;
	memcpy(b + cmd.stdin_len, p, len);
	cmd.stdin_buf = b;
	cmd.stdin_len += len;
}

static void
stdin_flush(void)
{
	ssize_t n;

	while (cmd.in >= 0 && cmd.stdin_len > 0) {
		n = write(cmd.in, cmd.stdin_buf, cmd.stdin_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {	/* EPIPE: it closed its stdin */
			close_fd(&cmd.in);
			cmd.stdin_len = 0;
			return;
		}
		memmove(cmd.stdin_buf, cmd.stdin_buf + n, cmd.stdin_len - (size_t)n);
		cmd.stdin_len -= (size_t)n;
	}
	if (cmd.in >= 0 && cmd.stdin_len == 0 && cmd.stdin_eof) {
		if (cmd.tty) {
			/* the master stays: it is also the output; EOF on a
			 * terminal is its VEOF character at a line start */
			(void)!write(cmd.in, "\004", 1);
			cmd.stdin_eof = 0;
			cmd.stdin_len = 0;
			return;
		}
		close_fd(&cmd.in);
	}
}

static void
handle(int type, const unsigned char *p, size_t len)
{
	switch (type) {
	case BA_PING:
		/* The host pings once per connection, first: a command still
		 * running is an earlier connection's, whose close we missed
		 * (a close and a connect while the guest was paused or being
		 * restored reach us as one state). Nobody reads it now. */
		if (cmd.active)
			cmd_drop();
		put_drop();
		/* The ping's bytes can reach us before the kernel has taken
		 * qemu's "host connected" message (a data interrupt against
		 * a work queue): the port still says closed and refuses the
		 * write. The host is there (it just wrote); answer once the
		 * port says so, in serve(). A stale pong is harmless: the
		 * host ignores a nonce not its own. */
		if (port_write(BA_PONG, p, len) < 0 && len <= sizeof(owed)) {
			memcpy(owed, p, len);
			owedlen = len;
		} else
			owedlen = 0;
		break;
	case BA_EXEC:
		start(p, len);
		break;
	case BA_STDIN:
		if (put.fd >= 0)
			put_data(p, len);
		else
			stdin_add(p, len);
		break;
	case BA_FILE_PUT:
		file_put(p, len);
		break;
	case BA_FILE_GET:
		file_get(p, len);
		break;
	case BA_RESIZE:
		resize(p, len);
		break;
	default:
		fail("unknown request");
		break;
	}
}

/* Reads from the port; -1 when the host is gone. */
static int
port_read(void)
{
	uint32_t plen;
	ssize_t n;

	for (;;) {
		if (cmd.stdin_len >= STDIN_CAP)
			return 0;	/* serve() polls the port again later */
		if (incap - inlen < BA_CHUNK) {
			unsigned char *b = realloc(in, incap + 2 * BA_CHUNK);

			if (b == NULL)
				return -1;
			in = b;
			incap += 2 * BA_CHUNK;
		}
		n = read(port, in + inlen, incap - inlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		inlen += (size_t)n;
		while (inlen >= BA_HDR) {
			plen = ba_hdr_len(in);
			if (plen > BA_MAX_PAYLOAD)
				return -1;	/* out of step: start over */
			if (inlen < BA_HDR + plen)
				break;
			handle(in[4], in + BA_HDR, plen);
			memmove(in, in + BA_HDR + plen, inlen - BA_HDR - plen);
			inlen -= BA_HDR + plen;
		}
	}
}

static void
signals(void)
{
	struct signalfd_siginfo si;
	int st;
	pid_t pid;

	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	/* Reap ours; anything else was re-parented to init, not us. */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		if (cmd.active && pid == cmd.pid) {
			cmd.status = st;
			cmd_finish();
		}
}

/* Serves one host connection until it goes away. */
static void
serve(void)
{
	struct pollfd pfd[5];
	int n, to;
	long long left;

	inlen = 0;
	if (owedlen > 0 && port_write(BA_PONG, owed, owedlen) == 0)
		owedlen = 0;
	for (;;) {
		n = 0;
		pfd[n].fd = port;
		pfd[n++].events = cmd.stdin_len < STDIN_CAP ? POLLIN : 0;
		pfd[n].fd = sigfd;
		pfd[n++].events = POLLIN;
		pfd[n].fd = cmd.out;
		pfd[n++].events = POLLIN;
		pfd[n].fd = cmd.err;
		pfd[n++].events = POLLIN;
		pfd[n].fd = cmd.stdin_len > 0 ? cmd.in : -1;
		pfd[n++].events = POLLOUT;
		to = -1;
		if (cmd.active && cmd.deadline > 0 && !cmd.timed_out) {
			left = cmd.deadline - now_ms();
			to = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
		}
		if (poll(pfd, (nfds_t)n, to) < 0 && errno != EINTR)
			return;
		if (cmd.active && cmd.deadline > 0 && !cmd.timed_out &&
		    now_ms() >= cmd.deadline) {
			cmd.timed_out = 1;
			kill(-cmd.pid, SIGKILL);
		}
		if (pfd[1].revents & POLLIN)
			signals();
		if (cmd.active && (pfd[2].revents & (POLLIN | POLLHUP)))
			drain(&cmd.out, BA_STDOUT);
		if (cmd.active && (pfd[3].revents & (POLLIN | POLLHUP)))
			drain(&cmd.err, BA_STDERR);
		if (cmd.active && (pfd[4].revents & (POLLOUT | POLLERR)))
			stdin_flush();
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (port_read() < 0)
				return;
			if (cmd.active)
				stdin_flush();
		}
	}
}

int
main(void)
{
	struct pollfd pfd;
	char path[128];
	sigset_t set;
	int i;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		say("signalfd: %s", strerror(errno));
		return 1;
	}
	/* The port appears with the virtio_console module (loaded by /init
	 * before us, but its devices are registered asynchronously). */
	for (i = 0; find_port(path, sizeof(path)) < 0 ||
	    access(path, R_OK | W_OK) < 0; i++) {
		if (i == 100) {
			/* a VMM that gives no port (an older sandbox, another
			 * backend): /init stops restarting us on 3 */
			say("no virtio port named %s", BA_PORT_NAME);
			return 3;
		}
		usleep(100000);
	}
	if ((port = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
		say("%s: %s", path, strerror(errno));
		return 1;
	}
	/* SIGIO when the host end connects (or data comes) */
	fcntl(port, F_SETOWN, getpid());
	fcntl(port, F_SETFL, fcntl(port, F_GETFL) | O_ASYNC);
	say("listening on %s", path);
	for (;;) {
		pfd.fd = port;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) >= 0 && !(pfd.revents & POLLHUP))
			serve();
		/* No host, or it left: whatever ran for it is ended. */
		cmd_drop();
		put_drop();
		inlen = 0;
		/* wait for SIGIO (a connect); 1 s bounds a lost one */
		pfd.fd = sigfd;
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, 1000);
		signals();
	}
}
