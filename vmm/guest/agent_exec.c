/*
 * agent_exec.c — the guest agent's commands ('E' without 'D'): the user
 * they run as (from the guest's /etc/passwd and /etc/group), their pipes
 * or terminal, their output read as the channel's window allows, their
 * stdin buffered in the channel and written as they take it, 'W' and
 * 'K', and the exit told once what they wrote is out. cmd_start also
 * starts the detached processes ('E' with 'D') that agent_proc.c keeps.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define STDIN_MAX	(2 * BA_WINDOW)	/* a channel's stdin held: the host
					 * sends at most BA_WINDOW unacked,
					 * more is a broken host */
#define RING_MIN	1024

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

int
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
int
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

/* "ROWS COLS" (len bytes) into *rows and *cols, each 1 to 10000, or
 * both 0 for "0 0" (no size); -1 when it is neither. */
int
size_parse(const void *p, size_t len, int *rows, int *cols)
{
	char buf[32];

	*rows = *cols = 0;
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, p, len);
	buf[len] = '\0';
	if (sscanf(buf, "%d %d", rows, cols) != 2 || *rows < 0 ||
	    *cols < 0 || *rows > 10000 || *cols > 10000 ||
	    (*rows == 0) != (*cols == 0)) {
		*rows = *cols = 0;
		return -1;
	}
	return 0;
}

/* A terminal's size, on its master: SIGWINCH to its foreground group. */
void
winsize_set(int fd, int rows, int cols)
{
	struct winsize ws;

	if (fd < 0 || rows <= 0 || cols <= 0)
		return;
	memset(&ws, 0, sizeof(ws));
	ws.ws_row = (unsigned short)rows;
	ws.ws_col = (unsigned short)cols;
	(void)ioctl(fd, TIOCSWINSZ, &ws);
}

/* A pty pair: the master (non-blocking) and the slave's path. */
static int
pty_open(char *slave, size_t len, int rows, int cols)
{
	int m;

	if ((m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return -1;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, len) != 0) {
		close(m);
		return -1;
	}
	winsize_set(m, rows, cols);
	return m;
}

/* 'W': "ROWS COLS" for a command's terminal, or an attached client's. */
void
chan_resize(struct chan *c, const unsigned char *p, size_t len)
{
	int rows, cols;

	if (size_parse(p, len, &rows, &cols) < 0 || rows == 0)
		return;
	if (c->kind == CH_ATTACH)
		attach_resize(c, rows, cols);
	else if (c->kind == CH_CMD && c->tty)	/* both the pty's master */
		winsize_set(c->out >= 0 ? c->out : c->in, rows, cols);
}

/* Sends 'a' for the channel's stdin taken since the last one. */
void
stdin_ack(struct chan *c)
{
	unsigned char b[4];

	if (c->dead || c->iack == 0)
		return;
	ba_put32(b, (uint32_t)c->iack);
	(void)chan_send(c, BA_STDIN_ACK, b, sizeof(b));
	c->iack = 0;
}

/*
 * One read of a command's stdout (i 0) or stderr (1) into a frame: at
 * most BA_CHUNK, at most its credit, and once it is reaped at most what
 * the pipe held then. EOF (or a tty's EIO) closes the descriptor.
 */
void
chan_read(struct chan *c, int i)
{
	char buf[BA_CHUNK];
	int *fd = i == 0 ? &c->out : &c->err;
	size_t want = BA_WINDOW - c->unacked;
	ssize_t n;

	if (want > sizeof(buf))
		want = sizeof(buf);
	if (c->reaped && want > c->left[i])
		want = c->left[i];
	if (*fd < 0 || want == 0)
		return;
	n = read(*fd, buf, want);
	if (n > 0) {
		(void)chan_send(c, i == 0 ? BA_STDOUT : BA_STDERR, buf,
		    (size_t)n);
		c->unacked += (size_t)n;
		if (c->reaped)
			c->left[i] -= (size_t)n;
		return;
	}
	if (n < 0 && errno == EINTR)
		return;
	if (n < 0 && errno == EAGAIN) {
		if (c->reaped)
			c->left[i] = 0;	/* what was counted is gone */
		return;
	}
	close_fd(fd);
	c->left[i] = 0;
}

/*
 * The command was reaped: what it wrote is in its pipes now. Only that
 * is still sent (a background child of it that keeps the pipes open and
 * writes on does not hold the answer back), then the exit frame.
 */
void
cmd_reaped(struct chan *c, int st)
{
	int n, *fds[2] = { &c->out, &c->err }, i;

	c->reaped = 1;
	c->status = st;
	for (i = 0; i < 2; i++)
		c->left[i] = *fds[i] >= 0 &&
		    ioctl(*fds[i], FIONREAD, &n) == 0 && n > 0 ? (size_t)n : 0;
}

/* A reaped command whose output is out: 'X', and the channel ends. */
void
cmd_finish(struct chan *c)
{
	char msg[64];
	int st = c->status;

	if ((c->out >= 0 && c->left[0] > 0) || (c->err >= 0 && c->left[1] > 0))
		return;			/* waits for credit ('A') */
	if (c->tty && c->out >= 0 && !c->tailed) {
		/* A pty's last output can still be in the kernel's flip
		 * buffer when it is reaped, which FIONREAD does not count;
		 * a read flushes it first: one more, as credit allows. */
		if (c->unacked >= BA_WINDOW)
			return;
		c->tailed = 1;
		c->left[0] = BA_CHUNK;
		chan_read(c, 0);
		c->left[0] = 0;
	}
	if (WIFSIGNALED(st))
		snprintf(msg, sizeof(msg), "signal %d%s", WTERMSIG(st),
		    c->timed_out ? " timeout" : "");
	else
		snprintf(msg, sizeof(msg), "exit %d%s", WEXITSTATUS(st),
		    c->timed_out ? " timeout" : "");
	stdin_ack(c);
	(void)chan_send(c, BA_EXIT, msg, strlen(msg));
	chan_end(c);
}

/* Writes what the channel's stdin buffer holds as the command takes it;
 * what is written (or dropped) is owed an 'a'. */
void
stdin_flush(struct chan *c)
{
	ssize_t n;

	while (c->in >= 0 && c->ilen > 0) {
		n = write(c->in, c->ibuf + c->ioff, c->ilen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* EPIPE: it closed its stdin; EIO: its terminal is
			 * gone. The rest is dropped, and taken. */
			close_fd(&c->in);
			c->iack += c->ilen;
			c->ioff = c->ilen = 0;
			return;
		}
		c->ioff += (size_t)n;
		c->ilen -= (size_t)n;
		c->iack += (size_t)n;
	}
	if (c->ilen == 0)
		c->ioff = 0;
	if (c->in >= 0 && c->ilen == 0 && c->ieof) {
		c->ieof = 0;
		if (c->tty) {
			/* the master stays: it is also the output; EOF on a
			 * terminal is its VEOF character at a line start */
			(void)!write(c->in, "\004", 1);
			return;
		}
		close_fd(&c->in);
	}
}

/* 'I' of a command; -1 when the host is past its window (broken). */
int
stdin_add(struct chan *c, const unsigned char *p, size_t len)
{
	unsigned char *b;
	size_t cap;

	if (len == 0) {
		c->ieof = 1;
		stdin_flush(c);
		return 0;
	}
	if (c->in < 0) {
		c->iack += len;		/* it closed its stdin: dropped */
		return 0;
	}
	if (c->ilen + len > STDIN_MAX)
		return -1;
	if (c->ioff + c->ilen + len > c->icap) {
		if (c->ilen > 0)
			memmove(c->ibuf, c->ibuf + c->ioff, c->ilen);
		c->ioff = 0;
		if (c->ilen + len > c->icap) {
			cap = c->icap * 2 > c->ilen + len ? c->icap * 2 :
			    c->ilen + len;
			if ((b = realloc(c->ibuf, cap)) == NULL) {
				say("out of memory: channel %u's stdin dropped",
				    c->id);
				c->iack += len;
				return 0;
			}
			c->ibuf = b;
			c->icap = cap;
		}
	}
	memcpy(c->ibuf + c->ioff + c->ilen, p, len);
	c->ilen += len;
	stdin_flush(c);
	return 0;
}

/* 'K': a signal for a command's process group (its 'X' follows when it
 * is reaped); a file transfer, a listing, a remove or a move (its worker
 * killed) is cancelled; a watch ends with 'X' "exit 0"; an attached
 * client detaches ('M', 'X' "exit 0": no signal, the process runs on). */
void
chan_kill(struct chan *c, const unsigned char *p, size_t len)
{
	char buf[16], *end;
	long sig;

	if (c->kind == CH_ATTACH) {
		attach_end(c);
		return;
	}
	if (c->kind == CH_WATCH) {
		/* a watch ends so, as asked */
		chan_end(c);
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		return;
	}
	if (c->kind != CH_CMD) {
		/* ended first: once the host reads the answer, a put's
		 * temporary file is gone */
		chan_end(c);
		failf(c->id, "409 cancelled");
		return;
	}
	if (len == 0 || len >= sizeof(buf))
		return;
	memcpy(buf, p, len);
	buf[len] = '\0';
	sig = strtol(buf, &end, 10);
	if (*end != '\0' || sig < 1 || sig > 64 || c->reaped)
		return;		/* reaped: its group leader is gone */
	/* a 'K' right after its 'E' may come before the child made its
	 * group (setsid, in the child after fork): then the child is the
	 * only process, and is signalled itself */
	if (kill(-c->pid, (int)sig) != 0 && errno == ESRCH)
		kill(c->pid, (int)sig);
}

/* 'E': a command on channel id; with 'D', a detached process (the
 * channel is answered 'S' and ends). */
void
cmd_start(uint32_t id, const unsigned char *p, size_t len)
{
	char *argv[MAX_ARGS + 1], *envp[MAX_ARGS + 8], *cwd = NULL, *s;
	char *user = NULL, slave[128], msg[512], *end;
	static char e_home[300], e_user[80], e_logname[90], e_shell[300];
	const struct image *im = image_get();
	const char *dcwd = NULL;
	struct user u;
	struct chan *c;
	struct proc *pr = NULL, *victim = NULL;
	int argc = 0, envc = 0, i, ek, rows = 0, cols = 0, tty = 0, m = -1;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, pi[2] = { -1, -1 };
	int keep = 0, ihome = 0, found = 0;
	unsigned long long ring = 0;
	long long timeout = 0;
	size_t off = 0, l;
	pid_t pid;

	envp[envc++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	envp[envc++] = "HOME=/root";
	envp[envc++] = "TERM=dumb";
	/* an image's Env, WorkingDir and User are the defaults (docker
	 * exec's); without one, nothing changes */
	for (i = 0; im != NULL && i < im->envc; i++) {
		l = strcspn(im->env[i], "=") + 1;
		if (strncmp(im->env[i], "HOME=", 5) == 0)
			ihome = 1;
		for (ek = 0; ek < envc; ek++)
			if (strncmp(envp[ek], im->env[i], l) == 0)
				break;
		envp[ek] = im->env[i];
		if (ek == envc)
			envc++;
	}
	if (im != NULL)
		dcwd = im->workdir;
	while (off < len) {
		s = (char *)(uintptr_t)p + off;
		if ((l = strnlen(s, len - off)) == len - off) {
			failf(id, "400 malformed exec: a field is not "
			    "terminated");
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
		case 'D':	/* detached: its ring's bytes */
			errno = 0;
			ring = strtoull(s + 1, &end, 10);
			if (!isdigit((unsigned char)s[1]) || *end != '\0' ||
			    errno != 0 || ring < RING_MIN ||
			    ring > BA_RING_MAX) {
				failf(id, "400 a detached process's ring is "
				    "%d to %d bytes", RING_MIN, BA_RING_MAX);
				return;
			}
			break;
		case 'k':
			keep = 1;
			break;
		case 'a':
			if (argc == MAX_ARGS) {
				failf(id, "400 too many arguments");
				return;
			}
			argv[argc++] = s + 1;
			break;
		case 'e':
			if (envc == MAX_ARGS || strchr(s + 1, '=') == NULL) {
				failf(id, "400 too many or malformed env "
				    "entries");
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
		failf(id, "400 exec without a command");
		return;
	}
	memset(&u, 0, sizeof(u));
	if (user == NULL && im != NULL && im->user != NULL) {
		/* the image's User (one that is uid 0 runs as root) */
		if (image_user(im->user, &u, msg, sizeof(msg)) < 0) {
			failf(id, "%s (the image's user)", msg);
			return;
		}
		if (u.uid != 0) {
			user = u.name;
			found = 1;
		}
	}
	if (!found && user != NULL && *user != '\0' &&
	    strcmp(user, "root") != 0 && strcmp(user, "0") != 0) {
		if (user_find(user, &u, msg, sizeof(msg)) < 0) {
			failf(id, "%s", msg);
			return;
		}
		found = 1;
	}
	if (found) {
		/* the user's own HOME, USER, LOGNAME, SHELL unless asked */
		snprintf(e_home, sizeof(e_home), "HOME=%s", u.home);
		snprintf(e_user, sizeof(e_user), "USER=%s", u.name);
		snprintf(e_logname, sizeof(e_logname), "LOGNAME=%s", u.name);
		snprintf(e_shell, sizeof(e_shell), "SHELL=%s", u.shell);
		if (!ihome)	/* an image's HOME stays, as in Docker */
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
	if (ring > 0) {
		/* detached: the room first (no process forgotten for
		 * one that could not start) */
		if (proc_room(&victim) < 0) {
			failf(id, "429 too many processes (%d)",
			    BA_MAX_PROCS);
			return;
		}
		if ((pr = calloc(1, sizeof(*pr))) == NULL ||
		    (pr->ring = malloc((size_t)ring)) == NULL) {
			free(pr);
			failf(id, "out of memory (a ring of %llu bytes)", ring);
			return;
		}
	}
	if (tty) {
		if ((m = pty_open(slave, sizeof(slave), rows, cols)) < 0) {
			failf(id, "no terminal: %s (is /dev/pts mounted?)",
			    strerror(errno));
			goto fail;
		}
		po[0] = m;	/* a tty's output is one stream */
		if (pr == NULL &&
		    (pi[1] = fcntl(m, F_DUPFD_CLOEXEC, 0)) < 0) {
			failf(id, "dup failed: %s", strerror(errno));
			goto fail;
		}
	} else if (pipe2(po, O_CLOEXEC) < 0 || (pr == NULL &&
	    (pipe2(pe, O_CLOEXEC) < 0 || pipe2(pi, O_CLOEXEC) < 0))) {
		/* detached: stdout and stderr on one pipe, no stdin */
		failf(id, "pipe failed: %s", strerror(errno));
		goto fail;
	}
	c = pr == NULL ? chan_new(id, CH_CMD) : NULL;
	if ((pr == NULL && c == NULL) || (pid = fork()) < 0) {
		failf(id, "%s failed", pr == NULL && c == NULL ? "malloc" :
		    "fork");
		if (c != NULL)
			chan_end(c);
		goto fail;
	}
	if (pid == 0) {
		sigset_t none;
		int sig;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* every signal as a fresh process has it: the agent ignores
		 * SIGPIPE, and the guest's init started it in the background,
		 * where sh ignores SIGINT and SIGQUIT; an ignored signal would
		 * stay ignored across exec (a kill --signal INT would do
		 * nothing) */
		for (sig = 1; sig < NSIG; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
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
			if (pi[0] >= 0)
				dup2(pi[0], 0);
			dup2(po[1], 1);
			dup2(pe[1] >= 0 ? pe[1] : po[1], 2);
		}
		if (pr != NULL && !tty) {
			/* detached: nobody writes its stdin (on a terminal,
			 * its clients do: 'H') */
			int nul = open("/dev/null", O_RDWR);

			if (nul >= 0 && nul != 0) {
				dup2(nul, 0);
				if (nul > 2)
					close(nul);
			}
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
		/* else the image's WorkingDir, the user's home, / */
		if ((cwd == NULL || *cwd == '\0') &&
		    (dcwd == NULL || chdir(dcwd) < 0) && chdir(u.uid != 0 ?
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
	close_fd(&po[1]);
	close_fd(&pe[1]);
	close_fd(&pi[0]);
	if (pr != NULL) {
		if (victim != NULL)
			proc_forget(victim);
		pr->pid = pid;
		pr->start = realtime_ms();
		pr->deadline = timeout > 0 ? now_ms() + timeout : 0;
		pr->keep = keep;
		pr->tty = tty;
		pr->out = po[0];
		nonblock(pr->out);
		pr->size = (size_t)ring;
		cmd_line(pr->cmd, sizeof(pr->cmd), argv);
		proc_add(pr);
		snprintf(msg, sizeof(msg), "%u %d", pr->num, (int)pid);
		(void)port_frame(BA_STARTED, id, msg, strlen(msg), NULL, 0);
		return;
	}
	c->tty = tty;
	c->pid = pid;
	c->out = po[0];
	c->err = pe[0];
	c->in = pi[1];
	nonblock(c->out);
	if (c->err >= 0)
		nonblock(c->err);
	nonblock(c->in);
	c->deadline = timeout > 0 ? now_ms() + timeout : 0;
	return;
fail:
	close_pair(po);		/* a terminal's master is po[0] */
	close_pair(pe);
	close_pair(pi);
	if (pr != NULL) {
		free(pr->ring);
		free(pr);
	}
}
