/*
 * agent.c — berth's guest agent: runs commands for berthd (exec with argv,
 * env, cwd, timeout, stdin; stdout and stderr streamed back; the exit
 * status or signal), moves files in and out of the guest and answers a
 * health ping. Static, it sits in the initramfs as /bin/berth-agent; the
 * guest's /init starts it and restarts it if it dies. The frames are in
 * agent_proto.h: protocol 2, where every command and file transfer is a
 * channel of its own, many at once, each flow controlled on its own.
 *
 * The agent is one program in files by concern, sharing agent.h:
 * agent_exec.c runs commands (their pipes or terminal, stdin, signals,
 * the exit), agent_proc.c keeps the detached processes and the clients
 * attached to them, agent_files.c puts, gets and lists files and makes
 * directories, agent_fswork.c removes and moves in a worker process,
 * agent_watch.c watches directories with inotify and agent_ident.c makes
 * a restored clone its own ('U'). agent_image.c reads the defaults of a
 * guest made from an image (its Env, WorkingDir, User). agent_ondemand.c
 * is a program of its own in the same binary (`berth-agent --on-demand`:
 * a daemon such as dockerd started on its socket's first client), and so
 * is agent_image.c's `berth-agent --service` (an image's command, run by
 * its init). This file holds the
 * port, the channels' life, the frames' dispatch and the poll loop.
 *
 * One poll loop serves them all: the port, a signalfd (SIGCHLD, SIGIO)
 * and every channel's descriptors. A command is read only while its
 * channel has window credit, so one whose output nobody takes stops in
 * its own pipe and slows nobody else; its stdin waits in a buffer of its
 * channel, never in the port, which is always read. Only writes to the
 * port block (the host always reads them).
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
 *
 * For tests: with BERTH_AGENT_PORT_FD=<n> in the environment, descriptor
 * n (already open: one end of a socketpair, a pty) is the port, and no
 * virtio port is looked for. Its peer is taken as connected from the
 * start; when it closes (read returns 0) the agent ends every channel as
 * for a host that went away, then exits: nobody can connect again. With
 * BERTH_AGENT_PORT_LISTEN=<n> instead, descriptor n is a listening
 * socket and each connection accepted on it is the port in turn, as a
 * virtio port's host comes and goes: one closing is a host gone away,
 * the next a host back (what outlives a host can be seen so); the agent
 * then runs until it is killed.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <ctype.h>
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
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NPOLL		(2 + 3 * BA_MAX_CHANS + BA_MAX_PROCS)

struct chanq chans = TAILQ_HEAD_INITIALIZER(chans);
static int nlive;		/* channels not dead */

static int port = -1;		/* the virtio-serial port */
static int sigfd = -1;		/* SIGCHLD, SIGIO */

/* A pong the port refused (see ping): sent when the host is back. */
static unsigned char owed[64 + 1];
static size_t owedlen;

/* The requests being read from the port. */
static unsigned char *rbuf;
static size_t rlen, rcap;

/* The poll set: the port, sigfd, then channels' descriptors, each with
 * its channel and which of its descriptors it is, and the detached
 * processes' outputs (with their process instead). */
static struct pollfd pfds[NPOLL];
static struct {
	struct chan *c;
	struct proc *p;
	int *fd;
} pmap[NPOLL];

void
say(const char *fmt, ...)
{
	va_list ap;

	fputs("berth-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long
realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
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
 * Writes a whole frame to the port: its type, the channel id (0: none,
 * the pong) and the payload, a then b. The port is non-blocking: a full
 * ring waits in poll, and a host that goes away meanwhile (POLLHUP) ends
 * the write with -1: the frame is lost with the connection.
 */
int
port_frame(int type, uint32_t id, const void *a, size_t alen, const void *b,
    size_t blen)
{
	unsigned char h[BA_HDR + BA_CHAN];
	struct iovec iov[3], *v = iov;
	struct pollfd pfd;
	size_t hlen = id != 0 ? BA_HDR + BA_CHAN : BA_HDR;
	ssize_t n;
	int niov = 0;

	ba_hdr_put(h, (uint32_t)(hlen - BA_HDR + alen + blen), type);
	if (id != 0)
		ba_put32(h + BA_HDR, id);
	iov[niov].iov_base = h;
	iov[niov++].iov_len = hlen;
	if (alen > 0) {
		iov[niov].iov_base = (void *)(uintptr_t)a;
		iov[niov++].iov_len = alen;
	}
	if (blen > 0) {
		iov[niov].iov_base = (void *)(uintptr_t)b;
		iov[niov++].iov_len = blen;
	}
	while (niov > 0) {
		n = writev(port, v, niov);
		if (n > 0) {
			while (niov > 0 && (size_t)n >= v->iov_len) {
				n -= (ssize_t)v->iov_len;
				v++;
				niov--;
			}
			if (niov > 0) {
				v->iov_base = (char *)v->iov_base + n;
				v->iov_len -= (size_t)n;
			}
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
	return 0;
}

int
chan_send(struct chan *c, int type, const void *buf, size_t len)
{
	return port_frame(type, c->id, buf, len, NULL, 0);
}

/* 'F' on channel id: the request is refused (the caller ends the
 * channel, if it was one). */
void
failf(uint32_t id, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)port_frame(BA_FAIL, id, msg, strlen(msg), NULL, 0);
}

void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void
close_pair(int p[2])
{
	close_fd(&p[0]);
	close_fd(&p[1]);
}

/*
 * The fields of a request, each a tag byte then its text, NUL-terminated:
 * f[tag] points at the text of the last of that tag, NULL when absent.
 * -1 when one is not terminated.
 */
int
req_fields(const unsigned char *p, size_t len, const char *f[256])
{
	size_t off = 0, l;
	const char *s;

	memset(f, 0, 256 * sizeof(*f));
	while (off < len) {
		s = (const char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off)
			return -1;
		off += l + 1;
		if (l > 0)
			f[(unsigned char)s[0]] = s + 1;
	}
	return 0;
}

/* A field's decimal number into *v (left as it is when absent); -1
 * when it is not one. */
int
req_num(const char *s, unsigned long long *v)
{
	char *end;

	if (s == NULL)
		return 0;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return *end != '\0' || errno != 0 ? -1 : 0;
}

struct chan *
chan_new(uint32_t id, int kind)
{
	struct chan *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->id = id;
	c->kind = kind;
	c->out = c->err = c->in = c->fd = -1;
	TAILQ_INSERT_TAIL(&chans, c, entry);
	nlive++;
	return c;
}

static struct chan *
chan_find(uint32_t id)
{
	struct chan *c;

	TAILQ_FOREACH(c, &chans, entry)
		if (!c->dead && c->id == id)
			return c;
	return NULL;
}

/*
 * Ends a channel: a command (or a remove's or move's worker) not reaped
 * yet has its process group killed and is waited for (nobody will read
 * it), a put's temporary file goes, a logs channel or an attached client
 * lets go of its process (which runs on), a listing's directory and a
 * watch's inotify descriptor close. Nothing is sent: the caller has sent
 * 'X' or 'F', or nobody listens.
 */
void
chan_end(struct chan *c)
{
	if (c->dead)
		return;
	if (c->kind == CH_ATTACH)
		attach_leave(c);	/* the newest gone: the next's size */
	if ((c->kind == CH_CMD || c->kind == CH_FS) && !c->reaped &&
	    c->pid > 0) {
		kill(-c->pid, SIGKILL);
		if (c->kind == CH_FS)
			kill(c->pid, SIGKILL);	/* before its setsid */
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
		c->reaped = 1;
	}
	close_fd(&c->out);
	close_fd(&c->err);
	close_fd(&c->in);
	free(c->ibuf);
	c->ibuf = NULL;
	c->ioff = c->ilen = c->icap = 0;
	if (c->fd >= 0 && c->kind == CH_PUT)
		unlink(c->tmp);		/* not renamed: dropped */
	close_fd(&c->fd);
	if (c->proc != NULL)
		proc_unref(c->proc);	/* the process itself goes on */
	c->proc = NULL;
	if (c->dir != NULL)
		closedir(c->dir);
	c->dir = NULL;
	watch_free(c->w);
	c->w = NULL;
	c->dead = 1;
	nlive--;
}

/* A ping, or the host gone: every channel of the connection ends. */
static void
chans_end_all(void)
{
	struct chan *c;

	TAILQ_FOREACH(c, &chans, entry)
		chan_end(c);
}

/* Frees the dead channels: the poll set no longer points at them. */
static void
sweep(void)
{
	struct chan *c, *next;

	for (c = TAILQ_FIRST(&chans); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (!c->dead)
			continue;
		TAILQ_REMOVE(&chans, c, entry);
		free(c->path);
		free(c->tmp);
		free(c);
	}
}

/*
 * 'P': a session starts. Every channel still here is an earlier
 * connection's, whose close we missed (a close and a connect while the
 * guest was paused or being restored reach us as one state). Nobody reads
 * them now.
 */
static void
ping(const unsigned char *p, size_t len)
{
	static const unsigned char proto = BA_PROTO;

	chans_end_all();
	if (len + 1 > BA_MAX_PAYLOAD)
		return;		/* no room for the answer: not a nonce */
	/* The ping's bytes can reach us before the kernel has taken qemu's
	 * "host connected" message (a data interrupt against a work
	 * queue): the port still says closed and refuses the write. The
	 * host is there (it just wrote); answer once the port says so, in
	 * serve(). A stale pong is harmless: the host ignores a nonce not
	 * its own. */
	if (port_frame(BA_PONG, 0, p, len, &proto, 1) < 0 &&
	    len + 1 <= sizeof(owed)) {
		memcpy(owed, p, len);
		owed[len] = proto;
		owedlen = len + 1;
	} else
		owedlen = 0;
}

/* A frame from the host; -1 when it broke the protocol (start over). */
static int
handle(int type, const unsigned char *p, size_t len)
{
	struct chan *c;
	uint32_t id;

	if (type == BA_PING) {
		ping(p, len);
		return 0;
	}
	if (len < BA_CHAN || (id = ba_get32(p)) == 0)
		return 0;	/* no channel: nobody to answer */
	p += BA_CHAN;
	len -= BA_CHAN;
	c = chan_find(id);
	switch (type) {
	case BA_EXEC:
	case BA_FILE_PUT:
	case BA_FILE_GET:
	case BA_LIST:
	case BA_LOGS:
	case BA_SIGNAL:
	case BA_LS:
	case BA_MKDIR:
	case BA_REMOVE:
	case BA_MOVE:
	case BA_WATCH:
	case BA_ATTACH:
	case BA_IDENTITY:
		if (c != NULL)
			failf(id, "400 channel %u is in use", id);
		else if (nlive >= BA_MAX_CHANS)
			failf(id, "429 too many commands at once (%d)",
			    BA_MAX_CHANS);
		else if (type == BA_EXEC)
			cmd_start(id, p, len);
		else if (type == BA_FILE_PUT)
			file_put(id, p, len);
		else if (type == BA_FILE_GET)
			file_get(id, p, len);
		else if (type == BA_LIST)
			proc_list(id);
		else if (type == BA_LOGS)
			logs_start(id, p, len);
		else if (type == BA_SIGNAL)
			proc_signal(id, p, len);
		else if (type == BA_LS)
			ls_start(id, p, len);
		else if (type == BA_MKDIR)
			fs_mkdir(id, p, len);
		else if (type == BA_WATCH)
			watch_start(id, p, len);
		else if (type == BA_ATTACH)
			attach_start(id, p, len);
		else if (type == BA_IDENTITY)
			ident_apply(id, p, len);
		else
			fs_work(id, type, p, len);
		return 0;
	case BA_STDIN:
	case BA_RESIZE:
	case BA_KILL:
	case BA_ACK:
		break;
	default:
		/* A request of a newer host, opening a channel we do not
		 * know: refused. On a live channel: not ours to end. */
		if (c == NULL)
			failf(id, "400 unknown request '%c'",
			    isprint(type) ? type : '?');
		return 0;
	}
	if (c == NULL)
		return 0;	/* ended: the host did not know yet */
	switch (type) {
	case BA_STDIN:
		if (c->kind == CH_PUT)
			put_data(c, p, len);
		else if (c->kind == CH_CMD)
			return stdin_add(c, p, len);
		else if (c->kind == CH_ATTACH && len == 0)
			attach_end(c);		/* detaches */
		else if (c->kind == CH_ATTACH)
			return stdin_add(c, p, len);
		break;
	case BA_RESIZE:
		chan_resize(c, p, len);
		break;
	case BA_KILL:
		chan_kill(c, p, len);
		break;
	case BA_ACK:
		if (len >= 4) {
			uint32_t n = ba_get32(p);

			/* more than outstanding: a confused host; clamped */
			c->unacked -= n < c->unacked ? n : c->unacked;
		}
		break;
	}
	return 0;
}

/* Reads from the port; -1 when the host is gone (or broke the
 * protocol). */
static int
port_read(void)
{
	uint32_t plen;
	ssize_t n;
	size_t done;

	for (;;) {
		if (rcap - rlen < BA_CHUNK) {
			unsigned char *b = realloc(rbuf, rcap + 2 * BA_CHUNK);

			if (b == NULL)
				return -1;
			rbuf = b;
			rcap += 2 * BA_CHUNK;
		}
		n = read(port, rbuf + rlen, rcap - rlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		rlen += (size_t)n;
		for (done = 0; rlen - done >= BA_HDR; done += BA_HDR + plen) {
			plen = ba_hdr_len(rbuf + done);
			if (plen > BA_MAX_PAYLOAD)
				return -1;	/* out of step: start over */
			if (rlen - done < BA_HDR + plen)
				break;
			if (handle(rbuf[done + 4], rbuf + done + BA_HDR,
			    plen) < 0) {
				say("the host broke the protocol");
				return -1;
			}
		}
		memmove(rbuf, rbuf + done, rlen - done);
		rlen -= done;
	}
}

static void
signals(void)
{
	struct signalfd_siginfo si;
	struct chan *c;
	struct proc *p;
	int st;
	pid_t pid;

	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	/* Reap ours (commands', detached processes); anything else was
	 * re-parented to init, not us. */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		TAILQ_FOREACH(c, &chans, entry)
			if (!c->dead && (c->kind == CH_CMD ||
			    c->kind == CH_FS) && !c->reaped && c->pid == pid) {
				if (c->kind == CH_CMD)
					cmd_reaped(c, st);
				else {
					c->reaped = 1;	/* fs_finish tells */
					c->status = st;
				}
				break;
			}
		if (c != NULL)
			continue;
		TAILQ_FOREACH(p, &procs, entry)
			if (!p->reaped && p->pid == pid) {
				proc_reaped(p, st);
				break;
			}
	}
}

static void
poll_add(nfds_t *n, struct chan *c, int *fd, short events)
{
	pfds[*n].fd = *fd;
	pfds[*n].events = events;
	pfds[*n].revents = 0;
	pmap[*n].c = c;
	pmap[*n].p = NULL;
	pmap[*n].fd = fd;
	(*n)++;
}

/* The processes' outputs to the poll set from *n on (always: the rings
 * take whatever comes), their nearest deadline folded into *to. */
static void
procs_poll(nfds_t *n, int *to, long long now)
{
	struct proc *p;
	long long left;

	TAILQ_FOREACH(p, &procs, entry) {
		if (p->out >= 0) {
			pfds[*n].fd = p->out;
			pfds[*n].events = POLLIN;
			pfds[*n].revents = 0;
			pmap[*n].c = NULL;
			pmap[*n].p = p;
			pmap[*n].fd = &p->out;
			(*n)++;
		}
		if (!p->reaped && !p->timed_out && p->deadline > 0) {
			left = p->deadline - now;
			left = left < 0 ? 0 : left > 60000 ? 60000 : left;
			if (*to < 0 || left < *to)
				*to = (int)left;
		}
	}
}

/* The detached processes' outputs the poll found ready, from k on. */
static void
procs_read(nfds_t k, nfds_t n)
{
	for (; k < n; k++)
		if (pmap[k].p != NULL && pfds[k].revents != 0 &&
		    *pmap[k].fd == pfds[k].fd)
			(void)proc_read(pmap[k].p, (size_t)-1);
}

/* Serves one host connection until it goes away. */
static void
serve(void)
{
	struct chan *c;
	nfds_t n, k;
	long long now, left;
	int to, *fd;

	rlen = 0;
	if (owedlen > 0 && port_frame(BA_PONG, 0, owed, owedlen, NULL, 0) == 0)
		owedlen = 0;
	for (;;) {
		n = 0;
		poll_add(&n, NULL, &port, POLLIN);
		poll_add(&n, NULL, &sigfd, POLLIN);
		to = -1;
		now = now_ms();
		TAILQ_FOREACH(c, &chans, entry) {
			if (c->dead)
				continue;
			if (c->kind == CH_GET && (c->unacked < BA_WINDOW ||
			    c->fleft == 0))
				to = 0;		/* get_step has work */
			if ((c->kind == CH_LOGS || c->kind == CH_ATTACH) &&
			    logs_due(c))
				to = 0;		/* so has logs_step */
			if (c->kind == CH_ATTACH && c->in >= 0 && c->ilen > 0)
				poll_add(&n, c, &c->in, POLLOUT);
			if (c->kind == CH_LS && ls_due(c))
				to = 0;		/* so has ls_step */
			if (c->kind == CH_WATCH) {
				if (watch_due(c))
					to = 0;
				else if (watch_polls(c))
					poll_add(&n, c, &c->fd, POLLIN);
			}
			if ((c->kind == CH_CMD || c->kind == CH_FS) &&
			    !c->reaped && !c->timed_out && c->deadline > 0) {
				left = c->deadline - now;
				left = left < 0 ? 0 : left > 60000 ? 60000 :
				    left;
				if (to < 0 || left < to)
					to = (int)left;
			}
			if (c->kind != CH_CMD)
				continue;
			/* Read only with credit: a pipe at EOF polls ready
			 * for ever, and output nobody takes stays in it. */
			if (c->unacked < BA_WINDOW && c->out >= 0 &&
			    (!c->reaped || c->left[0] > 0))
				poll_add(&n, c, &c->out, POLLIN);
			if (c->unacked < BA_WINDOW && c->err >= 0 &&
			    (!c->reaped || c->left[1] > 0))
				poll_add(&n, c, &c->err, POLLIN);
			if (c->in >= 0 && c->ilen > 0)
				poll_add(&n, c, &c->in, POLLOUT);
		}
		procs_poll(&n, &to, now);
		if (poll(pfds, n, to) < 0 && errno != EINTR)
			return;
		now = now_ms();
		TAILQ_FOREACH(c, &chans, entry)
			if (!c->dead && (c->kind == CH_CMD ||
			    c->kind == CH_FS) && !c->reaped &&
			    !c->timed_out && c->deadline > 0 &&
			    now >= c->deadline) {
				c->timed_out = 1;
				kill(-c->pid, SIGKILL);
				if (c->kind == CH_FS)
					kill(c->pid, SIGKILL);
			}
		procs_deadlines(now);
		if (pfds[1].revents & POLLIN)
			signals();
		procs_read(2, n);
		for (k = 2; k < n; k++) {
			c = pmap[k].c;
			fd = pmap[k].fd;
			if (c == NULL || pfds[k].revents == 0 || c->dead ||
			    *fd != pfds[k].fd)
				continue;
			if (c->kind == CH_WATCH)
				watch_read(c);
			else if (fd == &c->in)
				stdin_flush(c);
			else
				chan_read(c, fd == &c->err);
		}
		if ((pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    port_read() < 0)
			return;
		/* What each channel owes: stdin acks, the file gets' data,
		 * the rings' new bytes, the listings' entries, the watches'
		 * events, the reaped commands' and workers' answers. */
		TAILQ_FOREACH(c, &chans, entry) {
			if (c->dead)
				continue;
			stdin_ack(c);
			if (c->kind == CH_GET)
				get_step(c);
			else if (c->kind == CH_LOGS || c->kind == CH_ATTACH)
				logs_step(c);
			else if (c->kind == CH_LS)
				ls_step(c);
			else if (c->kind == CH_WATCH)
				watch_step(c);
			else if (c->kind == CH_FS && c->reaped)
				fs_finish(c);
			else if (c->kind == CH_CMD && c->reaped)
				cmd_finish(c);
		}
		sweep();
	}
}

int
main(int argc, char **argv)
{
	struct pollfd pfd;
	char path[128], *s, *end;
	sigset_t set;
	nfds_t n, k;
	int i, to, testing = 0, listener = -1;

	if (argc > 1 && strcmp(argv[1], "--on-demand") == 0)
		return agent_ondemand_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "--service") == 0)
		return agent_service_main(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		say("signalfd: %s", strerror(errno));
		return 1;
	}
	if ((s = getenv("BERTH_AGENT_PORT_FD")) != NULL) {
		/* for tests: the port is given, connected (see the top) */
		port = (int)strtol(s, &end, 10);
		if (*s == '\0' || *end != '\0' || port < 0 ||
		    fcntl(port, F_SETFD, FD_CLOEXEC) < 0) {
			say("BERTH_AGENT_PORT_FD=%s: not an open descriptor",
			    s);
			return 1;
		}
		nonblock(port);
		snprintf(path, sizeof(path), "descriptor %d", port);
		testing = 1;
	} else if ((s = getenv("BERTH_AGENT_PORT_LISTEN")) != NULL) {
		/* for tests: connections accepted in turn (see the top) */
		listener = (int)strtol(s, &end, 10);
		if (*s == '\0' || *end != '\0' || listener < 0 ||
		    fcntl(listener, F_SETFD, FD_CLOEXEC) < 0) {
			say("BERTH_AGENT_PORT_LISTEN=%s: not an open "
			    "descriptor", s);
			return 1;
		}
		nonblock(listener);
		snprintf(path, sizeof(path), "connections to descriptor %d",
		    listener);
	} else {
		/* The port appears with the virtio_console module (loaded
		 * by /init before us, but its devices are registered
		 * asynchronously). */
		for (i = 0; find_port(path, sizeof(path)) < 0 ||
		    access(path, R_OK | W_OK) < 0; i++) {
			if (i == 100) {
				/* a VMM that gives no port (an older sandbox,
				 * another backend): /init stops restarting us
				 * on 3 */
				say("no virtio port named %s", BA_PORT_NAME);
				return 3;
			}
			usleep(100000);
		}
		if ((port = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
			say("%s: %s", path, strerror(errno));
			return 1;
		}
	}
	if (port >= 0) {
		/* SIGIO when the host end connects (or data comes) */
		fcntl(port, F_SETOWN, getpid());
		fcntl(port, F_SETFL, fcntl(port, F_GETFL) | O_ASYNC);
	}
	say("listening on %s", path);
	for (;;) {
		if (port >= 0) {
			pfd.fd = port;
			pfd.events = POLLIN;
			if (poll(&pfd, 1, 0) >= 0 && !(pfd.revents & POLLHUP))
				serve();
			/* No host, or it left: whatever ran for it is ended
			 * (the detached processes run on). */
			chans_end_all();
			sweep();
			rlen = 0;
			if (testing)
				return 0;	/* nobody can connect again */
			if (listener >= 0)
				close_fd(&port);	/* the next is accepted */
		}
		/* wait for SIGIO (a connect; or the test's connection); 1 s
		 * bounds a lost one. The detached processes' outputs are read
		 * meanwhile, their deadlines kept. */
		n = 0;
		to = 1000;
		poll_add(&n, NULL, &sigfd, POLLIN);
		if (listener >= 0)
			poll_add(&n, NULL, &listener, POLLIN);
		k = n;
		procs_poll(&n, &to, now_ms());
		(void)poll(pfds, n, to);
		procs_deadlines(now_ms());
		signals();
		procs_read(k, n);
		if (listener >= 0 && (pfds[1].revents & POLLIN) &&
		    (port = accept4(listener, NULL, NULL, SOCK_NONBLOCK |
		    SOCK_CLOEXEC)) < 0 && errno != EAGAIN && errno != EINTR)
			say("accept: %s", strerror(errno));
	}
}
