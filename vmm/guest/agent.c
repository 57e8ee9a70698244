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
 * VM's uid): nothing new in the jail. Measuring the two under TCG is still
 * to do (issue #16).
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

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS	4096

static int port = -1;		/* the virtio-serial port */
static int sigfd = -1;		/* SIGCHLD, SIGIO */

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
} cmd = { 0, 0, 0, -1, -1, -1, NULL, 0, 0, 0, 0, 0 };

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

static void
fail(const char *msg)
{
	(void)port_write(BA_FAIL, msg, strlen(msg));
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
	int argc = 0, envc = 0, po[2], pe[2], pi[2], i;
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
	argv[argc] = NULL;
	envp[envc] = NULL;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
	    pipe2(pi, O_CLOEXEC) < 0) {
		fail("pipe failed");	/* fds leak only on a broken guest */
		return;
	}
	if ((pid = fork()) < 0) {
		fail("fork failed");
		close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
		close(pi[0]), close(pi[1]);
		return;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		setsid();
		dup2(pi[0], 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		if (cwd != NULL && *cwd != '\0' && chdir(cwd) < 0) {
			dprintf(2, "berth-agent: cd %s: %s\n", cwd,
			    strerror(errno));
			_exit(126);
		}
		if ((cwd == NULL || *cwd == '\0') && chdir("/root") < 0)
			(void)!chdir("/");
		/* PATH for the lookup is the command's own */
		for (i = 0; envp[i] != NULL; i++)
			if (strncmp(envp[i], "PATH=", 5) == 0)
				setenv("PATH", envp[i] + 5, 1);
		execvpe(argv[0], argv, envp);
		dprintf(2, "berth-agent: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(po[1]);
	close(pe[1]);
	close(pi[0]);
	memset(&cmd, 0, sizeof(cmd));
	cmd.active = 1;
	cmd.pid = pid;
	cmd.out = po[0];
	cmd.err = pe[0];
	cmd.in = pi[1];
	nonblock(cmd.out);
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
	if (cmd.in >= 0 && cmd.stdin_len == 0 && cmd.stdin_eof)
		close_fd(&cmd.in);
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
		stdin_add(p, len);
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
		pfd[n++].events = POLLIN;
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
		inlen = 0;
		/* wait for SIGIO (a connect); 1 s bounds a lost one */
		pfd.fd = sigfd;
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, 1000);
		signals();
	}
}
