/*
 * agent.c — berth's guest agent: runs commands for berthd (exec with argv,
 * env, cwd, timeout, stdin; stdout and stderr streamed back; the exit
 * status or signal), moves files in and out of the guest and answers a
 * health ping. Static, it sits in the initramfs as /bin/berth-agent; the
 * guest's /init starts it and restarts it if it dies. The frames are in
 * agent_proto.h: protocol 2, where every command and file transfer is a
 * channel of its own, many at once, each flow controlled on its own.
 *
 * Detached processes ('E' with 'D') are the agent's, not a channel's:
 * their output goes to a ring of theirs, read whenever it is readable (the
 * ring absorbs it, oldest bytes first), they outlive channels, sessions
 * and hosts, and their records (state, ring) stay until a new one needs
 * the room. 'L' lists them, 'G' reads (and follows) a ring through a
 * channel's window like a command's output, 'Z' signals one, 'H'
 * attaches a client to one: a follower of its ring whose 'I' goes to its
 * terminal (several clients at once; the size is the newest's). A
 * detached process on a terminal has it as its stdin too, read by the
 * agent into the ring whether or not anybody is attached.
 *
 * The guest's files beyond put and get: 'l' lists a directory a bounded
 * number of entries a turn, 'm' makes one at once, 'x' and 'v' remove
 * and move in a worker process (a big tree or a copy across filesystems
 * takes its time there, not the loop's), 'V' watches with inotify. A
 * listing's 'N' and a watch's 'Y' frames draw on the channel's window
 * like output: a watch nobody acknowledges stops reading its inotify
 * descriptor, the kernel's queue overflows, and that is told.
 *
 * A clone restored from a snapshot is made its own by 'U' (identity):
 * its clock, random pool, machine id, hostname, network (through
 * rtnetlink, each answer awaited at most 2 s: there is no `ip` a
 * static binary can lean on) and resolv.conf, a few system calls done
 * inline, all fields checked before anything changes.
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
#include "../proto/agent_proto.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS	4096
#define MAX_GROUPS	64
#define STDIN_MAX	(2 * BA_WINDOW)	/* a channel's stdin held: the host
					 * sends at most BA_WINDOW unacked,
					 * more is a broken host */
#define NPOLL		(2 + 3 * BA_MAX_CHANS + BA_MAX_PROCS)
#define RING_MIN	1024
#define CMD_MAX		200	/* a process's cmd as listed */

enum { CH_CMD, CH_PUT, CH_GET, CH_LOGS, CH_LS, CH_FS, CH_WATCH, CH_ATTACH };

struct watch;

/*
 * A detached process: its output (stdout and stderr on one pipe, or its
 * terminal) goes to ring, the byte at offset x of it at ring[x % size]
 * while x >= total - held. Once reaped, what its pipe held then is read
 * and the pipe closed: total is final. A forgotten one (evicted to make
 * room) is off the list; it is freed when no 'G' or 'H' channel reads
 * it.
 */
struct proc {
	TAILQ_ENTRY(proc) entry;
	unsigned num;
	pid_t pid;
	int reaped, status;
	int timed_out;
	long long deadline;	/* monotonic ms, 0: none */
	long long start;	/* CLOCK_REALTIME ms */
	int keep;		/* 'k': only recorded and listed */
	int tty;		/* out is its pty's master */
	int out;		/* the read end, -1 once at EOF or reaped */
	unsigned char *ring;
	size_t size;
	uint64_t total;		/* bytes ever written */
	char cmd[CMD_MAX + 1];
	int nref;		/* 'G' and 'H' channels reading it */
	int gone;		/* forgotten: off the list */
};

static TAILQ_HEAD(, proc) procs = TAILQ_HEAD_INITIALIZER(procs);
static int nprocs;		/* on the list */
static unsigned next_proc = 1;

/*
 * A channel: a command ('E'), a file put ('w'), a file get ('g'), a
 * detached process's logs ('G'), a listing ('l'), a remove or move done
 * by a worker process ('x', 'v': CH_FS), a watch ('V') or a client
 * attached to a detached process ('H'), named by the host's id. An ended
 * channel
 * is dead: it stays on the list until the end of the loop's turn (the
 * poll set may still point at it) and is invisible to the host's frames
 * meanwhile.
 */
struct chan {
	TAILQ_ENTRY(chan) entry;
	uint32_t id;
	int kind;
	int dead;
	size_t unacked;		/* 'O'/'R'/'N'/'Y' payload sent, not 'A'cked
				 * yet */
	size_t iack;		/* 'I' payload taken, not 'a'cked yet */

	/* a command, or a CH_FS worker (its message pipe in out) */
	pid_t pid;
	int reaped, status;
	int timed_out;
	long long deadline;	/* monotonic ms, 0: none */
	int tty;		/* out is the pty's master, in a dup of it */
	int out, err;		/* its stdout and stderr (read ends), -1 */
	int in;			/* its stdin (write end), -1 */
	size_t left[2];		/* once reaped: what out, err still hold */
	int tailed;		/* a tty's last read, once reaped, done */
	unsigned char *ibuf;	/* its stdin not written yet, at ioff */
	size_t ioff, ilen, icap;
	int ieof;		/* EOF asked: close in once ibuf is out */

	/* a file put or get (or a watch's inotify descriptor) */
	int fd;			/* put: the temporary file; get: the file */
	int ferr;		/* put: the first write error */
	unsigned mode;		/* put: the file's; CH_FS: its request */
	char *path, *tmp;
	uint64_t fleft;		/* get: the bytes still to send at most */

	/* a listing */
	DIR *dir;
	uint64_t nleft;		/* the entries still to send at most */

	/* a watch */
	struct watch *w;

	/* logs, and an attached client (in: a dup of its pty's master) */
	struct proc *proc;
	uint64_t pos;		/* the next offset to send */
	uint64_t end;		/* without follow: the total when asked */
	int follow;
	unsigned long long seq;	/* attached: the newer, the higher */
	int rows, cols;		/* attached: its size ('T', 'W'), 0: none */
};

static TAILQ_HEAD(, chan) chans = TAILQ_HEAD_INITIALIZER(chans);
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
 * Writes a whole frame to the port: its type, the channel id (0: none,
 * the pong) and the payload, a then b. The port is non-blocking: a full
 * ring waits in poll, and a host that goes away meanwhile (POLLHUP) ends
 * the write with -1: the frame is lost with the connection.
 */
static int
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

static int
chan_send(struct chan *c, int type, const void *buf, size_t len)
{
	return port_frame(type, c->id, buf, len, NULL, 0);
}

/* 'F' on channel id: the request is refused (the caller ends the
 * channel, if it was one). */
static void __attribute__((format(printf, 2, 3)))
failf(uint32_t id, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)port_frame(BA_FAIL, id, msg, strlen(msg), NULL, 0);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A 'G' channel lets go of its process: a forgotten one is freed. */
static void
proc_unref(struct proc *p)
{
	if (--p->nref > 0 || !p->gone)
		return;
	free(p->ring);
	free(p);
}

static struct chan *
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

static void watch_free(struct watch *);
static void attach_leave(struct chan *);

/*
 * Ends a channel: a command (or a remove's or move's worker) not reaped
 * yet has its process group killed and is waited for (nobody will read
 * it), a put's temporary file goes, a logs channel or an attached client
 * lets go of its process (which runs on), a listing's directory and a
 * watch's inotify descriptor close. Nothing is sent: the caller has sent
 * 'X' or 'F', or nobody listens.
 */
static void
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

/* "ROWS COLS" (len bytes) into *rows and *cols, each 1 to 10000, or
 * both 0 for "0 0" (no size); -1 when it is neither. */
static int
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
static void
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

static void attach_resize(struct chan *, int, int);
static void attach_end(struct chan *);

/* 'W': "ROWS COLS" for a command's terminal, or an attached client's. */
static void
resize(struct chan *c, const unsigned char *p, size_t len)
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
static void
stdin_ack(struct chan *c)
{
	unsigned char b[4];

	if (c->dead || c->iack == 0)
		return;
	ba_put32(b, (uint32_t)c->iack);
	(void)chan_send(c, BA_STDIN_ACK, b, sizeof(b));
	c->iack = 0;
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

/* 'w': a channel whose 'I' frames go to a temporary file beside path. */
static void
file_put(uint32_t id, const unsigned char *p, size_t len)
{
	char path[4096], *slash;
	struct chan *c;
	unsigned mode;

	if (file_fields(p, len, path, sizeof(path), &mode) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if ((c = chan_new(id, CH_PUT)) == NULL) {
		failf(id, "out of memory");
		return;
	}
	slash = strrchr(path, '/');
	c->mode = mode;
	if ((c->path = strdup(path)) == NULL ||
	    asprintf(&c->tmp, "%.*s/.%s.berth-XXXXXX", (int)(slash - path),
	    path, slash + 1) < 0) {
		c->tmp = NULL;
		failf(id, "out of memory");
		chan_end(c);
		return;
	}
	if ((c->fd = mkostemp(c->tmp, O_CLOEXEC)) < 0) {
		failf(id, "%d cannot write %s: %s", errno == ENOENT ? 404 : 400,
		    path, strerror(errno));
		chan_end(c);
	}
}

/* 'I' of a put: written now (a regular file does not keep us waiting
 * long), so each is taken at once; empty: the end. */
static void
put_data(struct chan *c, const unsigned char *p, size_t len)
{
	ssize_t n;

	if (len == 0) {
		if (c->ferr == 0 && (fchmod(c->fd, c->mode) < 0 ||
		    fsync(c->fd) < 0))
			c->ferr = errno;
		if (c->ferr == 0 && rename(c->tmp, c->path) < 0)
			c->ferr = errno;
		if (c->ferr != 0) {
			chan_end(c);	/* first: no temporary file to see */
			failf(c->id, "400 cannot write %s: %s", c->path,
			    strerror(c->ferr));
			return;
		}
		close_fd(&c->fd);	/* renamed: chan_end keeps it */
		stdin_ack(c);
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
		return;
	}
	c->iack += len;		/* taken: written, or dropped after an error */
	while (len > 0 && c->ferr == 0) {
		if ((n = write(c->fd, p, len)) < 0) {
			if (errno != EINTR)
				c->ferr = errno;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
}

/*
 * The fields of a request, each a tag byte then its text, NUL-terminated:
 * f[tag] points at the text of the last of that tag, NULL when absent.
 * -1 when one is not terminated.
 */
static int
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
static int
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

/* 'g': a channel that sends the file as its window allows (get_step),
 * from 'o' on, at most 'n' bytes. */
static void
file_get(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long off = 0, max = UINT64_MAX;
	const char *f[256];
	char path[4096];
	struct stat st;
	struct chan *c;
	int fd;

	if (req_fields(p, len, f) < 0 || req_num(f['o'], &off) < 0 ||
	    req_num(f['n'], &max) < 0) {
		failf(id, "400 malformed get: a field is not terminated, or "
		    "an offset or length not a decimal number");
		return;
	}
	if (f['p'] == NULL || f['p'][0] != '/' ||
	    strlen(f['p']) >= sizeof(path)) {
		failf(id, "400 the path must be absolute");
		return;
	}
	snprintf(path, sizeof(path), "%s", f['p']);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			failf(id, "404 no file %s in the guest", path);
		else
			failf(id, "400 cannot read %s: %s", path,
			    strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		failf(id, "400 %s is not a regular file", path);
		close(fd);
		return;
	}
	if ((c = chan_new(id, CH_GET)) == NULL ||
	    (c->path = strdup(path)) == NULL) {
		failf(id, "out of memory");
		close(fd);
		if (c != NULL)
			chan_end(c);
		return;
	}
	c->fd = fd;
	c->fleft = max;
	/* past what lseek takes is past any end: no bytes */
	if (off > 0 && (off > (unsigned long long)INT64_MAX ||
	    lseek(fd, (off_t)off, SEEK_SET) < 0))
		c->fleft = 0;
}

/*
 * One read of a get, as far as its credit goes. A regular file is always
 * readable: serve() calls this every turn while the channel has credit
 * (and does not sleep meanwhile), never while it has none.
 */
static void
get_step(struct chan *c)
{
	char buf[BA_CHUNK];
	size_t want = BA_WINDOW - c->unacked;
	ssize_t n;

	if (c->fleft == 0) {
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
		return;
	}
	if (want == 0)
		return;
	if (want > sizeof(buf))
		want = sizeof(buf);
	if (want > c->fleft)
		want = (size_t)c->fleft;
	n = read(c->fd, buf, want);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0) {
		failf(c->id, "500 reading %s: %s", c->path, strerror(errno));
		chan_end(c);
	} else if (n == 0) {
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
	} else {
		(void)chan_send(c, BA_STDOUT, buf, (size_t)n);
		c->unacked += (size_t)n;
		c->fleft -= (uint64_t)n;
	}
}

/*
 * One read of a command's stdout (i 0) or stderr (1) into a frame: at
 * most BA_CHUNK, at most its credit, and once it is reaped at most what
 * the pipe held then. EOF (or a tty's EIO) closes the descriptor.
 */
static void
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
static void
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
static void
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
static void
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
static int
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
static void
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
	kill(-c->pid, (int)sig);
}

/* ---- detached processes ('E' with 'D', 'L', 'G', 'Z') ---- */

static long long
realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How many of the last bytes of p's output its ring holds. */
static size_t
ring_held(const struct proc *p)
{
	return p->total < p->size ? (size_t)p->total : p->size;
}

/* "running", "exit:N" or "signal:N": one word (a timeout is not told
 * apart: killed at its deadline, it is "signal:9"). */
static const char *
proc_state(const struct proc *p, char *buf, size_t len)
{
	if (!p->reaped)
		return "running";
	if (WIFSIGNALED(p->status))
		snprintf(buf, len, "signal:%d", WTERMSIG(p->status));
	else
		snprintf(buf, len, "exit:%d", WEXITSTATUS(p->status));
	return buf;
}

static struct proc *
proc_find(unsigned long long num)
{
	struct proc *p;

	TAILQ_FOREACH(p, &procs, entry)
		if (p->num == num)
			return p;
	return NULL;
}

/* Off the list; freed now, or by the last 'G' channel reading it. */
static void
proc_forget(struct proc *p)
{
	TAILQ_REMOVE(&procs, p, entry);
	nprocs--;
	p->gone = 1;
	if (p->nref == 0) {
		free(p->ring);
		free(p);
	}
}

/* Room for one more process: 0, with *victim the ended one to forget
 * first (oldest first) or NULL; -1 when all BA_MAX_PROCS kept run. */
static int
proc_room(struct proc **victim)
{
	struct proc *p;

	*victim = NULL;
	if (nprocs < BA_MAX_PROCS)
		return 0;
	TAILQ_FOREACH(p, &procs, entry)
		if (p->reaped) {
			*victim = p;
			return 0;
		}
	return -1;
}

/* argv joined by spaces, cut at CMD_MAX bytes, '?' for what is not
 * printable (a 'Q' frame is one line of words, cmd last). */
static void
cmd_line(char *dst, size_t cap, char **argv)
{
	size_t n = 0;
	const char *s;
	int i;

	for (i = 0; argv[i] != NULL && n + 1 < cap; i++) {
		if (i > 0)
			dst[n++] = ' ';
		for (s = argv[i]; *s != '\0' && n + 1 < cap; s++)
			dst[n++] = isprint((unsigned char)*s) ? *s : '?';
	}
	dst[n] = '\0';
}

/* Appends to p's ring: of more than it holds, the last bytes. */
static void
ring_put(struct proc *p, const unsigned char *b, size_t n)
{
	size_t at, a;

	if (n > p->size) {
		p->total += n - p->size;
		b += n - p->size;
		n = p->size;
	}
	at = (size_t)(p->total % p->size);
	a = p->size - at < n ? p->size - at : n;
	memcpy(p->ring + at, b, a);
	memcpy(p->ring, b + a, n - a);
	p->total += n;
}

/*
 * One read of a detached process's output, at most max bytes (and
 * BA_CHUNK), into its ring. No window: the oldest bytes are overwritten.
 * EOF (or a tty's EIO) closes the descriptor. 0 when it read something.
 */
static int
proc_read(struct proc *p, size_t max)
{
	unsigned char buf[BA_CHUNK];
	ssize_t n;

	if (max > sizeof(buf))
		max = sizeof(buf);
	if (p->out < 0 || max == 0)
		return -1;
	n = read(p->out, buf, max);
	if (n > 0) {
		ring_put(p, buf, (size_t)n);
		return 0;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return -1;
	close_fd(&p->out);
	return -1;
}

/*
 * A detached process was reaped: what its pipe holds now is what it
 * wrote; that is read and the pipe closed, so its total is final (as
 * for a command, a background child of it that writes on is not
 * waited for). A pty's last output can still be in the kernel's flip
 * buffer, which FIONREAD does not count and a read flushes: a chunk
 * more is read there (see cmd_finish).
 */
static void
proc_reaped(struct proc *p, int st)
{
	uint64_t before;
	size_t left = 0, got;
	int n;

	p->reaped = 1;
	p->status = st;
	if (p->out >= 0 && ioctl(p->out, FIONREAD, &n) == 0 && n > 0)
		left = (size_t)n;
	if (p->tty)
		left += BA_CHUNK;
	while (left > 0) {
		before = p->total;
		if (proc_read(p, left) < 0)
			break;
		got = (size_t)(p->total - before);
		left -= got < left ? got : left;
	}
	close_fd(&p->out);
}

/* The deadlines passed: the group is killed, the state "signal:9". */
static void
procs_deadlines(long long now)
{
	struct proc *p;

	TAILQ_FOREACH(p, &procs, entry)
		if (!p->reaped && !p->timed_out && p->deadline > 0 &&
		    now >= p->deadline) {
			p->timed_out = 1;
			kill(-p->pid, SIGKILL);
		}
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

/* 'L': a 'Q' for each process kept, in their order, then 'X'. */
static void
list(uint32_t id)
{
	char msg[CMD_MAX + 128], st[32];
	struct proc *p;

	TAILQ_FOREACH(p, &procs, entry) {
		snprintf(msg, sizeof(msg), "%u %d %s %lld %d %llu %s", p->num,
		    (int)p->pid, proc_state(p, st, sizeof(st)), p->start,
		    p->keep, (unsigned long long)p->total, p->cmd);
		(void)port_frame(BA_PROC, id, msg, strlen(msg), NULL, 0);
	}
	(void)port_frame(BA_EXIT, id, "exit 0", 6, NULL, 0);
}

/* The fields of 'G' and 'Z': 'i<proc>', 'o<offset>', 's<signal>' (in
 * v[0], v[1], v[2]: decimal, 0 when absent), 'f'; -1 when malformed. */
static int
proc_fields(const unsigned char *p, size_t len, unsigned long long v[3],
    int *follow)
{
	static const char tags[] = "ios";
	const char *s, *t;
	size_t off = 0, l;
	char *end;

	v[0] = v[1] = v[2] = 0;
	*follow = 0;
	while (off < len) {
		s = (const char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off)
			return -1;
		off += l + 1;
		if (s[0] == 'f') {
			*follow = 1;
			continue;
		}
		if (s[0] == '\0' || (t = strchr(tags, s[0])) == NULL)
			continue;	/* unknown fields: a newer host */
		if (!isdigit((unsigned char)s[1]))
			return -1;
		errno = 0;
		v[t - tags] = strtoull(s + 1, &end, 10);
		if (*end != '\0' || errno != 0)
			return -1;
	}
	return 0;
}

/* 'M' on a logs channel: what the ring holds now, and the state. */
static void
ring_send(struct chan *c)
{
	struct proc *p = c->proc;
	char msg[96], st[32];

	snprintf(msg, sizeof(msg), "%llu %llu %s",
	    (unsigned long long)(p->total - ring_held(p)),
	    (unsigned long long)p->total, proc_state(p, st, sizeof(st)));
	(void)chan_send(c, BA_RING, msg, strlen(msg));
}

/* Where a logs channel's bytes end for now: the total when asked, or
 * (following) the total so far. */
static uint64_t
logs_upto(const struct chan *c)
{
	return c->follow ? c->proc->total : c->end;
}

/* Whether logs_step has something to do now (serve() does not sleep). */
static int
logs_due(const struct chan *c)
{
	const struct proc *p = c->proc;
	uint64_t first = p->total - ring_held(p);
	uint64_t pos = c->pos > first ? c->pos : first;

	if (pos < logs_upto(c))
		return c->unacked < BA_WINDOW;
	return !c->follow || p->reaped;
}

/*
 * One 'O' of a logs channel (or an attached client: it follows), as its
 * credit goes: the ring's bytes from its position. Bytes the ring
 * overwrote before they were sent are skipped (the reader sees a jump:
 * the ring is all there is). Done, it ends: without follow once at the
 * total it was asked at; following, once the process has ended and its
 * final total is out, with 'M' (the final state) first. serve() calls
 * this every turn.
 */
static void
logs_step(struct chan *c)
{
	struct proc *p = c->proc;
	uint64_t first = p->total - ring_held(p), upto = logs_upto(c);
	size_t n, at, a;

	if (c->pos < first)
		c->pos = first;
	if (c->pos < upto) {
		if (c->unacked >= BA_WINDOW)
			return;
		n = BA_WINDOW - c->unacked;
		if (n > BA_CHUNK)
			n = BA_CHUNK;
		if (upto - c->pos < n)
			n = (size_t)(upto - c->pos);
		at = (size_t)(c->pos % p->size);
		a = p->size - at < n ? p->size - at : n;
		(void)port_frame(BA_STDOUT, c->id, p->ring + at, a, p->ring,
		    n - a);
		c->unacked += n;
		c->pos += n;
		if (c->pos < upto)
			return;
	}
	if (c->follow && !p->reaped)
		return;		/* waits for more */
	if (c->kind == CH_ATTACH) {
		attach_end(c);
		return;
	}
	if (c->follow)
		ring_send(c);
	(void)chan_send(c, BA_EXIT, "exit 0", 6);
	chan_end(c);
}

/* 'G': 'M', then a channel that sends the ring (logs_step). */
static void
logs(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long v[3];
	struct proc *pr;
	struct chan *c;
	int follow;

	if (proc_fields(p, len, v, &follow) < 0) {
		failf(id, "400 malformed logs request");
		return;
	}
	if ((pr = proc_find(v[0])) == NULL) {
		failf(id, "404 no process %llu", v[0]);
		return;
	}
	if ((c = chan_new(id, CH_LOGS)) == NULL) {
		failf(id, "out of memory");
		return;
	}
	c->proc = pr;
	pr->nref++;
	c->pos = v[1];
	c->end = pr->total;
	c->follow = follow;
	ring_send(c);
}

/* 'Z': a signal for a process's group, while it runs. */
static void
proc_signal(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long v[3];
	struct proc *pr;
	char st[32];
	int follow;

	if (proc_fields(p, len, v, &follow) < 0 || v[2] < 1 || v[2] > 64) {
		failf(id, "400 malformed signal request (a signal is 1 to "
		    "64)");
		return;
	}
	if ((pr = proc_find(v[0])) == NULL) {
		failf(id, "404 no process %llu", v[0]);
		return;
	}
	if (pr->reaped) {
		failf(id, "409 process %u has ended (%s)", pr->num,
		    proc_state(pr, st, sizeof(st)));
		return;
	}
	kill(-pr->pid, (int)v[2]);
	(void)port_frame(BA_EXIT, id, "exit 0", 6, NULL, 0);
}

/* ---- attached clients ('H') ----
 *
 * A client is a logs channel that follows (logs_step sends it the ring
 * from its offset, then the output as it comes, within its own window:
 * one that does not ack stalls only itself, the ring goes on) and whose
 * 'I' goes to the process's terminal, through a dup of the pty's master
 * (non-blocking: what the terminal does not take yet waits in the
 * channel's stdin buffer, acknowledged once written, as a command's
 * stdin). The terminal's size is the newest client's: the one attached
 * last (seq) of those still here, whether or not it gave one.
 */
static unsigned long long attach_seq;

/* The newest client attached to p, but one (NULL: none). */
static struct chan *
attach_newest(const struct proc *p, const struct chan *but)
{
	struct chan *c, *best = NULL;

	TAILQ_FOREACH(c, &chans, entry)
		if (!c->dead && c != but && c->kind == CH_ATTACH &&
		    c->proc == p && (best == NULL || c->seq > best->seq))
			best = c;
	return best;
}

/* The size of p's terminal, while it runs. */
static void
proc_winsize(const struct proc *p, int rows, int cols)
{
	if (p->tty && !p->reaped)
		winsize_set(p->out, rows, cols);
}

/* A client's 'W': kept, and the terminal's size if it is the newest. */
static void
attach_resize(struct chan *c, int rows, int cols)
{
	c->rows = rows;
	c->cols = cols;
	if (attach_newest(c->proc, NULL) == c)
		proc_winsize(c->proc, rows, cols);
}

/* A client goes (chan_end): when it was the newest, the next newest's
 * size, if it gave one, is the terminal's. */
static void
attach_leave(struct chan *c)
{
	struct chan *next;

	if (attach_newest(c->proc, NULL) != c ||
	    (next = attach_newest(c->proc, c)) == NULL || next->rows == 0)
		return;
	proc_winsize(next->proc, next->rows, next->cols);
}

/*
 * A client's end: it detached (an empty 'I', 'K'), or its process ended
 * and its output is out. What of its input the terminal does not take
 * now is dropped (and acknowledged: nobody will send it); then 'M' and
 * 'X' "exit 0". The process runs on, untouched.
 */
static void
attach_end(struct chan *c)
{
	stdin_flush(c);
	c->iack += c->ilen;
	c->ioff = c->ilen = 0;
	stdin_ack(c);
	ring_send(c);
	(void)chan_send(c, BA_EXIT, "exit 0", 6);
	chan_end(c);
}

/* 'H': 'M', then a client of the process (see above); with 'T', the
 * terminal takes its size. */
static void
attach(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long num = 0, off = 0;
	const char *f[256];
	struct proc *pr;
	struct chan *c;
	int rows = 0, cols = 0;

	if (req_fields(p, len, f) < 0 || req_num(f['i'], &num) < 0 ||
	    req_num(f['o'], &off) < 0 || (f['T'] != NULL &&
	    size_parse(f['T'], strlen(f['T']), &rows, &cols) < 0)) {
		failf(id, "400 malformed attach request");
		return;
	}
	if ((pr = proc_find(num)) == NULL) {
		failf(id, "404 no process %llu", num);
		return;
	}
	if ((c = chan_new(id, CH_ATTACH)) == NULL) {
		failf(id, "out of memory");
		return;
	}
	c->proc = pr;
	pr->nref++;
	c->pos = off;
	c->follow = 1;
	c->seq = ++attach_seq;
	c->rows = rows;
	c->cols = cols;
	/* no terminal (or none left): 'I' is dropped (stdin_add) */
	if (pr->tty && !pr->reaped && pr->out >= 0 &&
	    (c->in = fcntl(pr->out, F_DUPFD_CLOEXEC, 0)) < 0) {
		failf(id, "dup failed: %s", strerror(errno));
		chan_end(c);
		return;
	}
	c->tty = c->in >= 0;
	proc_winsize(pr, rows, cols);
	ring_send(c);
}

static void
close_pair(int p[2])
{
	close_fd(&p[0]);
	close_fd(&p[1]);
}

/* ---- the filesystem: 'l' list, 'm' mkdir, 'x' remove, 'v' move, 'V'
 * watch ---- */

#define LS_TURN		256	/* entries a listing sends per turn */
#define ENTRY_MAX	(64 + NAME_MAX)		/* an 'N' payload, at most */
#define EVENT_MAX	(32 + BA_EVENT_PATH)	/* a 'Y' payload, at most */
#define WATCH_MAX	65536	/* inotify watches of one watch channel */
#define SCAN_TURN	1024	/* directory entries a watch scans per turn */
#define WBUF		(16 * 1024)	/* a watch's inotify reads */
/* A watched directory's path, at most: any event's path in it (the
 * directory's, '/', a name) fits in BA_EVENT_PATH. */
#define WDIR_PATH	(BA_EVENT_PATH - 1 - NAME_MAX)
#define WATCH_MASK	(IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | \
			 IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF)
#define STD_PATH	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:" \
			"/sbin:/bin"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* The HTTP-like code of a failure: 404 a path is absent, 409 it is in
 * the way (exists, not empty, busy), 400 otherwise the request's fault,
 * 500 the guest's (out of space, I/O errors, ...). */
static int
err_code(int e)
{
	switch (e) {
	case ENOENT:
		return 404;
	case EEXIST:
	case ENOTEMPTY:
	case EBUSY:
	case ETXTBSY:
		return 409;
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case ENAMETOOLONG:
	case ELOOP:
	case EACCES:
	case EPERM:
	case EROFS:
	case EXDEV:
	case EMLINK:
		return 400;
	default:
		return 500;
	}
}

/* An absolute path field into buf without its trailing slashes ("/"
 * stays); -1 when absent, relative or too long. */
static int
req_path(const char *s, char *buf, size_t len)
{
	size_t n;

	if (s == NULL || s[0] != '/' || (n = strlen(s)) >= len)
		return -1;
	memcpy(buf, s, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	return 0;
}

/* dir + '/' + name into buf (of BA_EVENT_PATH + 1 bytes at least); -1
 * when too long. */
static int
path_join(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir,
	    name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static long long
mtime_ms(const struct stat *st)
{
	long long ms = (long long)st->st_mtim.tv_sec * 1000 +
	    st->st_mtim.tv_nsec / 1000000;

	return ms < 0 ? 0 : ms;
}

static const char *
file_type(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "link" :
	    S_ISFIFO(m) ? "fifo" : S_ISSOCK(m) ? "socket" : S_ISCHR(m) ?
	    "char" : S_ISBLK(m) ? "block" : "other";
}

/* 'l': a channel that sends the directory's entries as its window
 * allows (ls_step). */
static void
ls_start(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long max = UINT64_MAX;
	const char *f[256];
	char path[4096];
	struct chan *c;
	DIR *d;
	int fd, e;

	if (req_fields(p, len, f) < 0 || req_num(f['n'], &max) < 0 ||
	    max == 0) {
		failf(id, "400 malformed list: a field is not terminated, or "
		    "'n' is not a number of at least 1");
		return;
	}
	if (req_path(f['p'], path, sizeof(path)) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
	    O_NONBLOCK)) < 0 || (d = fdopendir(fd)) == NULL) {
		e = errno;
		if (fd >= 0)
			close(fd);
		if (e == ENOENT)
			failf(id, "404 no directory %s in the guest", path);
		else if (e == ENOTDIR)
			failf(id, "400 %s is not a directory", path);
		else
			failf(id, "%d cannot list %s: %s", err_code(e), path,
			    strerror(e));
		return;
	}
	if ((c = chan_new(id, CH_LS)) == NULL) {
		failf(id, "out of memory");
		closedir(d);
		return;
	}
	c->dir = d;
	c->nleft = max;
}

/* Whether ls_step has something to do now (serve() does not sleep). */
static int
ls_due(const struct chan *c)
{
	return c->nleft == 0 || BA_WINDOW - c->unacked >= ENTRY_MAX;
}

/*
 * A listing's next entries, 'N' each: at most LS_TURN a turn (a huge
 * directory does not hold the other channels up), only while the window
 * has room for the largest entry. Done (or at its max), 'X'.
 */
static void
ls_step(struct chan *c)
{
	char buf[ENTRY_MAX];
	struct dirent *e;
	struct stat st;
	size_t nlen;
	int i, n;

	for (i = 0; i < LS_TURN && c->nleft > 0; i++) {
		if (BA_WINDOW - c->unacked < ENTRY_MAX)
			return;		/* waits for credit ('A') */
		errno = 0;
		if ((e = readdir(c->dir)) == NULL) {
			if (errno != 0) {
				failf(c->id, "500 reading the directory: %s",
				    strerror(errno));
				chan_end(c);
				return;
			}
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(c->dir), e->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;	/* gone meanwhile */
			memset(&st, 0, sizeof(st));	/* "other 0 0 0" */
		}
		n = snprintf(buf, sizeof(buf), "%s %o %llu %lld ",
		    file_type(st.st_mode), (unsigned)(st.st_mode & 07777),
		    (unsigned long long)st.st_size, mtime_ms(&st));
		nlen = strlen(e->d_name);
		(void)port_frame(BA_ENTRY, c->id, buf, (size_t)n, e->d_name,
		    nlen);
		c->unacked += (size_t)n + nlen;
		c->nleft--;
	}
	if (i < LS_TURN || c->nleft == 0) {
		(void)chan_send(c, BA_EXIT, "exit 0", 6);
		chan_end(c);
	}
}

/* A new directory with exactly mode (whatever the umask): made 0700,
 * then given its mode through a descriptor (not a path a link could
 * replace meanwhile). 0, or -1 with errno. */
static int
mkdir_mode(const char *path, unsigned mode)
{
	int fd, e;

	if (mkdir(path, 0700) < 0)
		return -1;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return -1;
	if (fchmod(fd, mode) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

/* mkdir_mode, where an existing directory (or a link to one) is no
 * error: 0, or -1 with errno (EEXIST: it exists, not a directory). */
static int
mkdir_exist(const char *path, unsigned mode)
{
	struct stat st;

	if (mkdir_mode(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -1;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	errno = EEXIST;
	return -1;
}

/* 'm': done here (a few system calls), answered at once. With 'r',
 * like mkdir -p: the parents made are 0755, the directory mode. */
static void
fs_mkdir(uint32_t id, const unsigned char *p, size_t len)
{
	unsigned long long mode = 0755;
	const char *f[256];
	char path[4096], *s, *end;
	int e;

	if (req_fields(p, len, f) < 0) {
		failf(id, "400 malformed mkdir: a field is not terminated");
		return;
	}
	if (f['m'] != NULL) {
		errno = 0;
		mode = strtoull(f['m'], &end, 8);
		if (!isdigit((unsigned char)f['m'][0]) || *end != '\0' ||
		    errno != 0 || mode > 07777) {
			failf(id, "400 the mode must be octal, at most 7777");
			return;
		}
	}
	if (req_path(f['p'], path, sizeof(path)) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if (f['r'] != NULL) {
		for (s = strchr(path + 1, '/'); s != NULL;
		    s = strchr(s + 1, '/')) {
			*s = '\0';
			if (mkdir_exist(path, 0755) < 0) {
				e = errno;
				if (e == EEXIST || e == ENOTDIR)
					failf(id, "400 %s is not a directory",
					    path);
				else
					failf(id, "%d cannot make %s: %s",
					    err_code(e), path, strerror(e));
				return;
			}
			*s = '/';
		}
		if (mkdir_exist(path, (unsigned)mode) < 0) {
			e = errno;
			if (e == EEXIST)
				failf(id, "409 %s exists, not a directory",
				    path);
			else
				failf(id, "%d cannot make %s: %s",
				    err_code(e), path, strerror(e));
			return;
		}
	} else if (mkdir_mode(path, (unsigned)mode) < 0) {
		e = errno;
		if (e == EEXIST)
			failf(id, "409 %s exists", path);
		else if (e == ENOENT)
			failf(id, "404 a parent of %s is missing", path);
		else if (e == ENOTDIR)
			failf(id, "400 a parent of %s is not a directory",
			    path);
		else
			failf(id, "%d cannot make %s: %s", err_code(e), path,
			    strerror(e));
		return;
	}
	(void)port_frame(BA_EXIT, id, "exit 0", 6, NULL, 0);
}

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
static void
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
static void
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

/*
 * A watch: one inotify descriptor, a watch per directory (with 'r', the
 * subdirectories too, found by a scan in bounded steps and added as they
 * are made or moved in). Events are read only while the window has room
 * for them: a host that takes none leaves them in the kernel's queue,
 * which overflows (told as "overflow" once read again).
 */
struct wdir {
	struct wdir *next;	/* in its bucket */
	int wd;
	size_t len;
	char path[];		/* absolute, at most WDIR_PATH bytes */
};

struct watch {
	int recursive;
	int top;		/* the watched directory's wd */
	char *toppath;
	struct wdir **tab;	/* by wd */
	size_t ntab, n;		/* buckets (a power of 2), watches */
	unsigned char *buf;	/* events read, from boff to blen not yet
				 * handled */
	size_t boff, blen;
	char **stack;		/* directories to scan for subdirectories */
	size_t nstack, capstack;
	DIR *sd;		/* the one being scanned, at spath */
	char *spath;
	int rescan;		/* an overflow: known ones are scanned again */
	int ready;		/* "ready" sent: the first scan is done */
};

static void
watch_free(struct watch *w)
{
	struct wdir *d, *next;
	size_t i;

	if (w == NULL)
		return;
	for (i = 0; i < w->ntab; i++)
		for (d = w->tab[i]; d != NULL; d = next) {
			next = d->next;
			free(d);
		}
	free(w->tab);
	while (w->nstack > 0)
		free(w->stack[--w->nstack]);
	free(w->stack);
	if (w->sd != NULL)
		closedir(w->sd);
	free(w->spath);
	free(w->toppath);
	free(w->buf);
	free(w);
}

static struct wdir *
wdir_find(const struct watch *w, int wd)
{
	struct wdir *d;

	for (d = w->tab[(unsigned)wd & (w->ntab - 1)]; d != NULL; d = d->next)
		if (d->wd == wd)
			return d;
	return NULL;
}

static int
wdir_add(struct watch *w, int wd, const char *path, size_t len)
{
	struct wdir *d, **tab, *next;
	size_t i, ntab;

	if (w->n >= 2 * w->ntab) {
		ntab = 2 * w->ntab;
		if ((tab = calloc(ntab, sizeof(*tab))) == NULL)
			return -1;
		for (i = 0; i < w->ntab; i++)
			for (d = w->tab[i]; d != NULL; d = next) {
				next = d->next;
				d->next = tab[(unsigned)d->wd & (ntab - 1)];
				tab[(unsigned)d->wd & (ntab - 1)] = d;
			}
		free(w->tab);
		w->tab = tab;
		w->ntab = ntab;
	}
	if ((d = malloc(sizeof(*d) + len + 1)) == NULL)
		return -1;
	d->wd = wd;
	d->len = len;
	memcpy(d->path, path, len + 1);
	d->next = w->tab[(unsigned)wd & (w->ntab - 1)];
	w->tab[(unsigned)wd & (w->ntab - 1)] = d;
	w->n++;
	return 0;
}

/* Forgets wd (the kernel dropped it); with rmfd >= 0, drops it there
 * too. */
static void
wdir_del(struct watch *w, int wd, int rmfd)
{
	struct wdir **dp, *d;

	for (dp = &w->tab[(unsigned)wd & (w->ntab - 1)]; (d = *dp) != NULL;
	    dp = &d->next)
		if (d->wd == wd) {
			*dp = d->next;
			if (rmfd >= 0)
				(void)inotify_rm_watch(rmfd, wd);
			free(d);
			w->n--;
			return;
		}
}

/* A directory moved away: its watches and its subdirectories' go (their
 * paths are wrong now; where it went, if watched, it is watched anew). */
static void
watch_forget(struct chan *c, const char *path)
{
	struct watch *w = c->w;
	struct wdir *d, *next;
	size_t i, len = strlen(path);

	for (i = 0; i < w->ntab; i++)
		for (d = w->tab[i]; d != NULL; d = next) {
			next = d->next;
			if (d->wd != w->top && d->len >= len &&
			    memcmp(d->path, path, len) == 0 &&
			    (d->path[len] == '\0' || d->path[len] == '/'))
				wdir_del(w, d->wd, c->fd);
		}
}

static void
scan_push(struct watch *w, const char *path)
{
	char **s, *p;
	size_t cap;

	if (w->nstack == w->capstack) {
		cap = w->capstack ? 2 * w->capstack : 64;
		if ((s = realloc(w->stack, cap * sizeof(*s))) == NULL)
			return;		/* not scanned: out of memory */
		w->stack = s;
		w->capstack = cap;
	}
	if ((p = strdup(path)) != NULL)
		w->stack[w->nstack++] = p;
}

/* 'Y' "<event> <dir> <cookie> <path>". */
static void
watch_send(struct chan *c, const char *ev, int dir, uint32_t cookie,
    const char *path)
{
	char head[64];
	size_t plen = strlen(path);
	int n;

	n = snprintf(head, sizeof(head), "%s %d %u ", ev, dir, cookie);
	(void)port_frame(BA_EVENT, c->id, head, (size_t)n, path, plen);
	c->unacked += (size_t)n + plen;
}

/*
 * A watch on the directory path (sub: a subdirectory found, not followed
 * if a link). A new one is scanned for subdirectories (recursive); a
 * known one only in a rescan and at its own path (a bind mount of a
 * directory above is not a loop). 0, or -1 when it is not watched (the
 * caller says "unwatched"); one gone meanwhile is no failure.
 */
static int
watch_add(struct chan *c, const char *path, int sub)
{
	struct watch *w = c->w;
	struct wdir *d;
	size_t len = strlen(path);
	int wd;

	if (len > WDIR_PATH || w->n >= WATCH_MAX)
		return -1;
	if ((wd = inotify_add_watch(c->fd, path, WATCH_MASK | IN_ONLYDIR |
	    (sub ? IN_DONT_FOLLOW : 0))) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	if ((d = wdir_find(w, wd)) != NULL) {
		if (w->rescan && w->recursive && d->len == len &&
		    memcmp(d->path, path, len) == 0)
			scan_push(w, path);
		return 0;
	}
	if (wdir_add(w, wd, path, len) < 0) {
		(void)inotify_rm_watch(c->fd, wd);
		return -1;
	}
	if (w->recursive)
		scan_push(w, path);
	return 0;
}

/* 'V': a channel that sends the directory's events (watch_step). */
static void
watch_start(uint32_t id, const unsigned char *p, size_t len)
{
	const char *f[256];
	char path[4096];
	struct watch *w;
	struct stat st;
	struct chan *c;
	int fd, wd;

	if (req_fields(p, len, f) < 0) {
		failf(id, "400 malformed watch: a field is not terminated");
		return;
	}
	if (req_path(f['p'], path, sizeof(path)) < 0) {
		failf(id, "400 the path must be absolute");
		return;
	}
	if (strlen(path) > WDIR_PATH) {
		failf(id, "400 the path is too long to watch (%d bytes at "
		    "most)", WDIR_PATH);
		return;
	}
	if (stat(path, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			failf(id, "404 no directory %s in the guest", path);
		else
			failf(id, "%d cannot watch %s: %s", err_code(errno),
			    path, strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		failf(id, "400 %s is not a directory", path);
		return;
	}
	if ((fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		failf(id, "%d no inotify: %s", errno == EMFILE ||
		    errno == ENFILE ? 429 : 500, strerror(errno));
		return;
	}
	if ((wd = inotify_add_watch(fd, path, WATCH_MASK | IN_ONLYDIR)) < 0) {
		failf(id, "%d cannot watch %s: %s", errno == ENOSPC ? 429 :
		    err_code(errno), path, errno == ENOSPC ?
		    "out of inotify watches" : strerror(errno));
		close(fd);
		return;
	}
	if ((c = chan_new(id, CH_WATCH)) == NULL ||
	    (c->w = w = calloc(1, sizeof(*w))) == NULL ||
	    (w->tab = calloc(64, sizeof(*w->tab))) == NULL ||
	    (w->buf = malloc(WBUF)) == NULL ||
	    (w->toppath = strdup(path)) == NULL) {
		failf(id, "out of memory");
		close(fd);
		if (c != NULL)
			chan_end(c);
		return;
	}
	c->fd = fd;
	w->ntab = 64;
	w->top = wd;
	w->recursive = f['r'] != NULL;
	if (wdir_add(w, wd, path, strlen(path)) < 0) {
		failf(id, "out of memory");
		chan_end(c);
		return;
	}
	if (w->recursive)
		scan_push(w, path);
}

/* One inotify event of a watch: its 'Y' frames (two at most). */
static void
watch_event(struct chan *c, const struct inotify_event *ev)
{
	struct watch *w = c->w;
	char path[BA_EVENT_PATH + 1];
	const char *what;
	struct wdir *d;
	uint32_t m = ev->mask;
	int isdir = (m & IN_ISDIR) != 0, unwatched = 0;

	if (m & IN_Q_OVERFLOW) {
		watch_send(c, "overflow", 1, 0, w->toppath);
		if (w->recursive) {
			/* the directories made meanwhile are looked for */
			w->rescan = 1;
			scan_push(w, w->toppath);
		}
		return;
	}
	if ((d = wdir_find(w, ev->wd)) == NULL)
		return;		/* dropped meanwhile */
	if (ev->len == 0 || ev->name[0] == '\0') {
		/* the watched directory's own: only the top one's are
		 * told (a subdirectory's are its parent's, with its name) */
		if (ev->wd == w->top && (m & (IN_DELETE_SELF | IN_IGNORED |
		    IN_UNMOUNT))) {
			watch_send(c, "delete_self", 1, 0, w->toppath);
			(void)chan_send(c, BA_EXIT, "exit 0", 6);
			chan_end(c);
		} else if (ev->wd == w->top && (m & IN_ATTRIB))
			watch_send(c, "attrib", 1, 0, w->toppath);
		else if (m & IN_IGNORED)
			wdir_del(w, ev->wd, -1);
		return;
	}
	if (path_join(path, sizeof(path), d->path, ev->name) < 0)
		return;		/* cannot be: d->path is short enough */
	if (m & IN_CREATE)
		what = "create";
	else if (m & IN_MODIFY)
		what = "modify";
	else if (m & IN_ATTRIB)
		what = "attrib";
	else if (m & IN_DELETE)
		what = "delete";
	else if (m & IN_MOVED_FROM)
		what = "move_from";
	else if (m & IN_MOVED_TO)
		what = "move_to";
	else
		return;
	if (isdir && w->recursive) {
		/* a new directory is watched before its event goes: the
		 * host may rely on its events from then on */
		if (m & IN_MOVED_FROM)
			watch_forget(c, path);
		else if (m & (IN_CREATE | IN_MOVED_TO))
			unwatched = watch_add(c, path, 1) < 0;
	}
	watch_send(c, what, isdir, m & (IN_MOVED_FROM | IN_MOVED_TO) ?
	    ev->cookie : 0, path);
	if (unwatched)
		watch_send(c, "unwatched", 1, 0, path);
}

/* Reads a watch's inotify descriptor (serve() polls it only while its
 * buffer is handled and the window has room). */
static void
watch_read(struct chan *c)
{
	struct watch *w = c->w;
	ssize_t n;

	if (w->boff < w->blen)
		return;
	n = read(c->fd, w->buf, WBUF);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		failf(c->id, "500 reading inotify: %s", n < 0 ?
		    strerror(errno) : "end of file");
		chan_end(c);
		return;
	}
	w->boff = 0;
	w->blen = (size_t)n;
}

/* One entry of a scan for subdirectories to watch; 0 when there is no
 * more to scan. */
static int
watch_scan_one(struct chan *c)
{
	struct watch *w = c->w;
	char path[BA_EVENT_PATH + 1];
	struct dirent *e;
	struct stat st;
	int fd;

	if (w->sd == NULL) {
		if (w->nstack == 0) {
			w->rescan = 0;
			return 0;
		}
		w->spath = w->stack[--w->nstack];
		fd = open(w->spath, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
		    O_NONBLOCK | (strcmp(w->spath, w->toppath) != 0 ?
		    O_NOFOLLOW : 0));
		if (fd < 0 || (w->sd = fdopendir(fd)) == NULL) {
			if (fd >= 0)
				close(fd);
			free(w->spath);
			w->spath = NULL;
		}
		return 1;
	}
	if ((e = readdir(w->sd)) == NULL) {
		closedir(w->sd);
		w->sd = NULL;
		free(w->spath);
		w->spath = NULL;
		return 1;
	}
	if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
		return 1;
	if (e->d_type != DT_DIR && (e->d_type != DT_UNKNOWN ||
	    fstatat(dirfd(w->sd), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode)))
		return 1;
	if (path_join(path, sizeof(path), w->spath, e->d_name) == 0 &&
	    watch_add(c, path, 1) < 0)
		watch_send(c, "unwatched", 1, 0, path);
	return 1;
}

static int
watch_room(const struct chan *c, size_t frames)
{
	return BA_WINDOW - c->unacked >= frames * EVENT_MAX;
}

/* Whether watch_step has something to do now (serve() does not sleep);
 * reading inotify is for the poll. */
static int
watch_due(const struct chan *c)
{
	const struct watch *w = c->w;

	return (w->boff < w->blen && watch_room(c, 2)) ||
	    ((w->sd != NULL || w->nstack > 0 || !w->ready) &&
	    watch_room(c, 1));
}

/* The events read, then the scan, as the window allows (bounded a
 * turn); once the first scan is done, "ready". */
static void
watch_step(struct chan *c)
{
	struct watch *w = c->w;
	const struct inotify_event *ev;
	int i;

	while (!c->dead && w->boff < w->blen && watch_room(c, 2)) {
		ev = (const struct inotify_event *)(const void *)(w->buf +
		    w->boff);
		w->boff += sizeof(*ev) + ev->len;
		watch_event(c, ev);
	}
	for (i = 0; i < SCAN_TURN && !c->dead && watch_room(c, 1); i++)
		if (!watch_scan_one(c))
			break;
	if (!c->dead && !w->ready && w->sd == NULL && w->nstack == 0 &&
	    watch_room(c, 1)) {
		/* every directory found is watched: what happens from now
		 * on is told */
		w->ready = 1;
		watch_send(c, "ready", 1, 0, w->toppath);
	}
}

/* 'E': a command on channel id; with 'D', a detached process (the
 * channel is answered 'S' and ends). */
static void
start(uint32_t id, const unsigned char *p, size_t len)
{
	char *argv[MAX_ARGS + 1], *envp[MAX_ARGS + 8], *cwd = NULL, *s;
	char *user = NULL, slave[128], msg[512], *end;
	static char e_home[300], e_user[80], e_logname[90], e_shell[300];
	struct user u;
	struct chan *c;
	struct proc *pr = NULL, *victim = NULL;
	int argc = 0, envc = 0, i, rows = 0, cols = 0, tty = 0, m = -1;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, pi[2] = { -1, -1 };
	int keep = 0;
	unsigned long long ring = 0;
	long long timeout = 0;
	size_t off = 0, l;
	pid_t pid;

	envp[envc++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	envp[envc++] = "HOME=/root";
	envp[envc++] = "TERM=dumb";
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
	if (user != NULL && *user != '\0' && strcmp(user, "root") != 0 &&
	    strcmp(user, "0") != 0) {
		if (user_find(user, &u, msg, sizeof(msg)) < 0) {
			failf(id, "%s", msg);
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
	close_fd(&po[1]);
	close_fd(&pe[1]);
	close_fd(&pi[0]);
	if (pr != NULL) {
		if (victim != NULL)
			proc_forget(victim);
		pr->num = next_proc++;
		pr->pid = pid;
		pr->start = realtime_ms();
		pr->deadline = timeout > 0 ? now_ms() + timeout : 0;
		pr->keep = keep;
		pr->tty = tty;
		pr->out = po[0];
		nonblock(pr->out);
		pr->size = (size_t)ring;
		cmd_line(pr->cmd, sizeof(pr->cmd), argv);
		TAILQ_INSERT_TAIL(&procs, pr, entry);
		nprocs++;
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

/* ---- identity: 'U' ---- */

/*
 * A guest restored from a snapshot is its template's twin: the same
 * hostname, machine id, MAC, address, random pool state and the
 * snapshot's clock. 'U' gives it its own before berthd reports it
 * running. Everything is a few system calls (the network through
 * rtnetlink: this binary is static, no `ip` to lean on), done inline;
 * each netlink answer is waited for at most NL_TIMEOUT seconds.
 */
#define NL_TIMEOUT	2	/* seconds: one netlink answer, at most */
#define ID_NS_MAX	3	/* 'n' fields */
#define HOSTS_MAX	(1024 * 1024)	/* /etc/hosts read, at most */
#define ENTROPY		64	/* 'r' bytes */
#define ID_ADDRS	64	/* addresses deleted per listing */
#define ID_ROUTES	16	/* default routes deleted per listing */
#define CLOCK_MAX	253402300799999LL	/* 9999-12-31, in ms */

struct ident {
	const char *host;	/* 'h' */
	const char *mid;	/* 'i' */
	const char *ifname;	/* 'f', or NULL: the first ethernet one */
	const char *mac_s, *addr_s, *gw_s;	/* as given, for messages */
	unsigned char mac[6];
	struct in_addr addr, gw, ns[ID_NS_MAX];
	int prefix, nns;
	long long clock;	/* 'c', ms; -1: not given */
	unsigned char rnd[ENTROPY];
	int has_rnd;
};

static int
hex_digit(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
	    c - 'a' + 10 : -1;
}

/* n bytes from 2n lowercase hex digits (all of s); -1 otherwise. */
static int
hex_bytes(const char *s, unsigned char *b, size_t n)
{
	size_t i;

	if (strlen(s) != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		if (hex_digit(s[2 * i]) < 0 || hex_digit(s[2 * i + 1]) < 0)
			return -1;
		b[i] = (unsigned char)(hex_digit(s[2 * i]) << 4 |
		    hex_digit(s[2 * i + 1]));
	}
	return 0;
}

/* aa:bb:cc:dd:ee:ff (either case), unicast and not all zero. */
static int
mac_parse(const char *s, unsigned char mac[6])
{
	char low[18];
	size_t i;

	if (strlen(s) != 17)
		return -1;
	for (i = 0; i < 17; i++) {
		low[i] = (char)tolower((unsigned char)s[i]);
		if ((i % 3 == 2) != (low[i] == ':'))
			return -1;
	}
	for (i = 0; i < 6; i++) {
		if (hex_digit(low[3 * i]) < 0 || hex_digit(low[3 * i + 1]) < 0)
			return -1;
		mac[i] = (unsigned char)(hex_digit(low[3 * i]) << 4 |
		    hex_digit(low[3 * i + 1]));
	}
	return (mac[0] & 1) || memcmp(mac, "\0\0\0\0\0\0", 6) == 0 ? -1 : 0;
}

/* "a.b.c.d/p", p 1 to 32. */
static int
cidr_parse(const char *s, struct in_addr *a, int *prefix)
{
	const char *slash = strchr(s, '/');
	char ip[INET_ADDRSTRLEN];
	unsigned long long p;

	if (slash == NULL || (size_t)(slash - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(slash - s));
	ip[slash - s] = '\0';
	if (inet_pton(AF_INET, ip, a) != 1 || strlen(slash + 1) > 2 ||
	    req_num(slash + 1, &p) < 0 || slash[1] == '\0' || p < 1 ||
	    p > 32)
		return -1;
	*prefix = (int)p;
	return 0;
}

/* The 'U' fields into d, all checked; -1 with why in msg. */
static int
ident_parse(const unsigned char *p, size_t len, struct ident *d, char *msg,
    size_t mlen)
{
	unsigned long long ms;
	size_t off = 0, l, i;
	const char *s, *v;

	memset(d, 0, sizeof(*d));
	d->clock = -1;
	while (off < len) {
		s = (const char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off) {
			snprintf(msg, mlen, "a field is not terminated");
			return -1;
		}
		off += l + 1;
		if (l == 0)
			continue;
		v = s + 1;
		switch (s[0]) {
		case 'h':
			for (i = 0; (v[i] >= 'a' && v[i] <= 'z') ||
			    (v[i] >= '0' && v[i] <= '9') ||
			    (i > 0 && v[i] == '-'); i++)
				;
			if (i == 0 || i > 63 || v[i] != '\0') {
				snprintf(msg, mlen, "'h' is not a hostname "
				    "(1 to 63 of a-z, 0-9 and '-', not first)");
				return -1;
			}
			d->host = v;
			break;
		case 'i': {
			unsigned char b[16];

			if (hex_bytes(v, b, sizeof(b)) < 0) {
				snprintf(msg, mlen, "'i' is not a machine id "
				    "(32 lowercase hex digits)");
				return -1;
			}
			d->mid = v;
			break;
		}
		case 'm':
			if (mac_parse(v, d->mac) < 0) {
				snprintf(msg, mlen, "'m' is not a MAC "
				    "(aa:bb:cc:dd:ee:ff, unicast)");
				return -1;
			}
			d->mac_s = v;
			break;
		case 'a':
			if (cidr_parse(v, &d->addr, &d->prefix) < 0) {
				snprintf(msg, mlen, "'a' is not an IPv4 "
				    "address/prefix");
				return -1;
			}
			d->addr_s = v;
			break;
		case 'g':
			if (inet_pton(AF_INET, v, &d->gw) != 1) {
				snprintf(msg, mlen, "'g' is not an IPv4 "
				    "address");
				return -1;
			}
			d->gw_s = v;
			break;
		case 'n':
			if (d->nns == ID_NS_MAX) {
				snprintf(msg, mlen, "more than %d 'n'",
				    ID_NS_MAX);
				return -1;
			}
			if (inet_pton(AF_INET, v, &d->ns[d->nns++]) != 1) {
				snprintf(msg, mlen, "'n' is not an IPv4 "
				    "address");
				return -1;
			}
			break;
		case 'c':
			if (req_num(v, &ms) < 0 || ms > CLOCK_MAX) {
				snprintf(msg, mlen, "'c' is not a time in ms");
				return -1;
			}
			d->clock = (long long)ms;
			break;
		case 'r':
			if (hex_bytes(v, d->rnd, sizeof(d->rnd)) < 0) {
				snprintf(msg, mlen, "'r' is not %d bytes as "
				    "%d lowercase hex digits", ENTROPY,
				    2 * ENTROPY);
				return -1;
			}
			d->has_rnd = 1;
			break;
		case 'f':
			if (l - 1 < 1 || l - 1 >= IFNAMSIZ ||
			    strpbrk(v, "/: \t\n") != NULL) {
				snprintf(msg, mlen, "'f' is not an interface "
				    "name");
				return -1;
			}
			d->ifname = v;
			break;
		default:
			break;	/* unknown fields: a newer host */
		}
	}
	return 0;
}

/* Writes data to path through a temporary file beside it, of mode,
 * renamed over it: 0, or an errno. No fsync: the guest's ext4 orders
 * a file's data before a rename over an older one (auto_da_alloc), and
 * a clone that crashes now is made again, not repaired. */
static int
file_replace(const char *path, const void *data, size_t len, unsigned mode)
{
	const char *slash = strrchr(path, '/'), *b = data;
	char tmp[PATH_MAX];
	ssize_t n;
	int fd, e = 0;

	snprintf(tmp, sizeof(tmp), "%.*s/.%s.berth-XXXXXX",
	    (int)(slash - path), path, slash + 1);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		return errno;
	while (len > 0 && e == 0) {
		if ((n = write(fd, b, len)) < 0) {
			if (errno != EINTR)
				e = errno;
			continue;
		}
		b += n;
		len -= (size_t)n;
	}
	if (e == 0 && fchmod(fd, mode) < 0)
		e = errno;
	if (close(fd) < 0 && e == 0)
		e = errno;
	if (e == 0 && rename(tmp, path) < 0)
		e = errno;
	if (e != 0)
		unlink(tmp);
	return e;
}

/* The kernel's pool gets the host's bytes, credited: a clone's pool
 * is its template's (QEMU's vmgenid makes the kernel reseed too). A
 * kernel that will not credit them (no CAP_SYS_ADMIN, no ioctl) still
 * mixes them in through a write. 0, or an errno. */
static int
entropy_add(const unsigned char *b, size_t len)
{
	union {
		struct rand_pool_info info;
		unsigned char buf[sizeof(struct rand_pool_info) + ENTROPY];
	} u;
	ssize_t n;
	int fd, e = 0;

	if ((fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC)) < 0)
		return errno;
	u.info.entropy_count = (int)len * 8;
	u.info.buf_size = (int)len;
	memcpy(u.info.buf, b, len);
	if (ioctl(fd, RNDADDENTROPY, &u.info) < 0) {
		e = errno;
		if (e == EPERM || e == ENOTTY) {
			e = 0;
			while (len > 0 && e == 0) {
				if ((n = write(fd, b, len)) < 0) {
					if (errno != EINTR)
						e = errno;
					continue;
				}
				b += n;
				len -= (size_t)n;
			}
		}
	}
	explicit_bzero(&u, sizeof(u));
	/* A clone's CRNG keys are its template's until the kernel reseeds:
	 * now, from the pool the bytes just went into (vmgenid does the
	 * same where the machine has one). Refused without CAP_SYS_ADMIN
	 * or before the CRNG is ready: the write above still counts. */
#ifdef RNDRESEEDCRNG
	if (e == 0)
		(void)ioctl(fd, RNDRESEEDCRNG);
#endif
	close(fd);
	return e;
}

/* /etc/hosts with its 127.0.1.1 line "127.0.1.1\t<host>" (the first
 * one's place, the others dropped; added at the end when none), the
 * other lines as they were. 0, or an errno; what in *what. */
static int
hosts_write(const char *host, const char **what)
{
	struct stat st;
	char *old = NULL, *new = NULL, *s, *eol, *w;
	size_t len = 0, nlen, l;
	unsigned mode = 0644;
	ssize_t n;
	int fd, e = 0, done = 0;

	*what = "read /etc/hosts";
	if ((fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC)) >= 0) {
		if (fstat(fd, &st) < 0)
			e = errno;
		else if (st.st_size > HOSTS_MAX)
			e = EFBIG;
		else if ((old = malloc((size_t)st.st_size + 1)) == NULL)
			e = ENOMEM;
		else
			mode = (unsigned)st.st_mode & 07777;
		while (e == 0 && len < (size_t)st.st_size) {
			if ((n = read(fd, old + len, (size_t)st.st_size -
			    len)) < 0 && errno == EINTR)
				continue;
			if (n < 0)
				e = errno;
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		close(fd);
		if (old != NULL)
			old[len] = '\0';	/* strspn stops there */
	} else if (errno != ENOENT)
		e = errno;
	nlen = len + 1 + sizeof("127.0.1.1\t\n") + strlen(host);
	if (e == 0 && (new = malloc(nlen)) == NULL)
		e = ENOMEM;
	if (e != 0)
		goto out;
	w = new;
	for (s = old; s != NULL && s < old + len; s = eol) {
		eol = memchr(s, '\n', (size_t)(old + len - s));
		eol = eol != NULL ? eol + 1 : old + len;
		l = strspn(s, " \t");
		if ((size_t)(eol - s) >= l + 9 && memcmp(s + l, "127.0.1.1",
		    9) == 0 && (s + l + 9 == eol ||
		    strchr(" \t\n#", s[l + 9]) != NULL)) {
			if (!done)
				w += sprintf(w, "127.0.1.1\t%s\n", host);
			done = 1;
			continue;
		}
		memcpy(w, s, (size_t)(eol - s));
		w += eol - s;
		if (eol == old + len && eol[-1] != '\n')
			*w++ = '\n';
	}
	if (!done)
		w += sprintf(w, "127.0.1.1\t%s\n", host);
	*what = "write /etc/hosts";
	e = file_replace("/etc/hosts", new, (size_t)(w - new), mode);
out:
	free(old);
	free(new);
	return e;
}

/* rtnetlink: one request at a time on a socket of ours, its answers
 * matched by sequence number. */
struct nl {
	int fd;
	uint32_t seq;
	char ext[200];		/* the kernel's extended ack message */
};

union nlmsg {
	struct nlmsghdr h;
	unsigned char b[512];
};

static unsigned char nlrbuf[64 * 1024] __attribute__((aligned(8)));

static void *
nl_start(union nlmsg *m, int type, int flags, size_t hdr)
{
	memset(m, 0, sizeof(*m));
	m->h.nlmsg_len = NLMSG_LENGTH(hdr);
	m->h.nlmsg_type = (uint16_t)type;
	m->h.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	return NLMSG_DATA(&m->h);
}

/* Our attributes are a few addresses: they fit. */
static void
nl_attr(union nlmsg *m, int type, const void *data, size_t len)
{
	struct rtattr *a;
	size_t off = NLMSG_ALIGN(m->h.nlmsg_len);

	if (off + RTA_SPACE(len) > sizeof(m->b))
		return;
	a = (struct rtattr *)(m->b + off);
	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	m->h.nlmsg_len = (uint32_t)(off + RTA_ALIGN(a->rta_len));
}

/* The attributes of a message whose header after the nlmsghdr is hdr
 * bytes: tb[type] for type < n (NULL when absent); -1 when it is
 * shorter than its header. */
static int
nl_attrs(const struct nlmsghdr *h, size_t hdr, struct rtattr **tb, int n)
{
	struct rtattr *a;
	int left;

	memset(tb, 0, (size_t)n * sizeof(*tb));
	if (h->nlmsg_len < NLMSG_LENGTH(hdr))
		return -1;
	a = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(hdr));
	left = (int)(h->nlmsg_len - NLMSG_SPACE(hdr));
	if (h->nlmsg_len < NLMSG_SPACE(hdr))
		left = 0;
	for (; RTA_OK(a, left); a = RTA_NEXT(a, left))
		if (a->rta_type < n)
			tb[a->rta_type] = a;
	return 0;
}

static int
nl_open(struct nl *nl)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = NL_TIMEOUT };
	int one = 1;

	nl->seq = (uint32_t)now_ms();
	nl->ext[0] = '\0';
	if ((nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_ROUTE)) < 0)
		return errno;
	if (bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(nl->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
	    sizeof(tv)) < 0) {
		int e = errno;

		close_fd(&nl->fd);
		return e;
	}
	/* the kernel's reason in words, our request not echoed back */
	(void)setsockopt(nl->fd, SOL_NETLINK, NETLINK_EXT_ACK, &one,
	    sizeof(one));
	(void)setsockopt(nl->fd, SOL_NETLINK, NETLINK_CAP_ACK, &one,
	    sizeof(one));
	return 0;
}

/* An error's extended ack message (NLMSGERR_ATTR_MSG) into nl->ext. */
static void
nl_extack(struct nl *nl, const struct nlmsghdr *h)
{
	const struct nlattr *a;
	size_t off = NLMSG_LENGTH(sizeof(struct nlmsgerr)), alen;

	if ((h->nlmsg_flags & (NLM_F_ACK_TLVS | NLM_F_CAPPED)) !=
	    (NLM_F_ACK_TLVS | NLM_F_CAPPED))
		return;
	while (off + NLA_HDRLEN <= h->nlmsg_len) {
		a = (const struct nlattr *)((const char *)h + off);
		if (a->nla_len < NLA_HDRLEN || off + a->nla_len > h->nlmsg_len)
			return;
		alen = a->nla_len - NLA_HDRLEN;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG &&
		    alen > 0) {
			snprintf(nl->ext, sizeof(nl->ext), "%.*s", (int)alen,
			    (const char *)a + NLA_HDRLEN);
			return;
		}
		off += NLA_ALIGN(a->nla_len);
	}
}

/*
 * Sends m and reads the kernel's answers to it: a dump's messages to cb
 * until its end, a request's ack. 0, or an errno (ETIMEDOUT: no answer
 * within NL_TIMEOUT s); the kernel's words, if any, in nl->ext.
 */
static int
nl_talk(struct nl *nl, union nlmsg *m,
    void (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h;
	struct nlmsgerr *err;
	socklen_t salen;
	ssize_t n;
	int left;

	nl->ext[0] = '\0';
	m->h.nlmsg_seq = ++nl->seq;
	if (cb == NULL)
		m->h.nlmsg_flags |= NLM_F_ACK;
	if (sendto(nl->fd, m, m->h.nlmsg_len, 0, (struct sockaddr *)&sa,
	    sizeof(sa)) < 0)
		return errno;
	for (;;) {
		salen = sizeof(sa);
		n = recvfrom(nl->fd, nlrbuf, sizeof(nlrbuf), 0,
		    (struct sockaddr *)&sa, &salen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ?
			    ETIMEDOUT : errno;
		if (sa.nl_pid != 0)
			continue;	/* not the kernel's */
		left = (int)n;
		for (h = (struct nlmsghdr *)nlrbuf; NLMSG_OK(h, left);
		    h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != nl->seq)
				continue;	/* an answer we gave up on */
			if (h->nlmsg_type == NLMSG_DONE) {
				/* a dump's end: its error, if any, after */
				if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(int)) &&
				    *(int *)NLMSG_DATA(h) < 0)
					return -*(int *)NLMSG_DATA(h);
				return 0;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				err = NLMSG_DATA(h);
				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*err)))
					return EPROTO;
				if (err->error != 0)
					nl_extack(nl, h);
				return -err->error;
			}
			if (cb != NULL)
				cb(h, arg);
		}
	}
}

/* An errno and the kernel's words about it. */
static const char *
nl_why(const struct nl *nl, int e, char *buf, size_t len)
{
	if (nl->ext[0] == '\0')
		return strerror(e);
	snprintf(buf, len, "%s (%s)", strerror(e), nl->ext);
	return buf;
}

/* The interface to configure: the one named, or the first ethernet
 * one (lowest ifindex, not loopback). */
struct link_pick {
	const char *want;
	int index;
	char name[IFNAMSIZ];
};

static void
link_seen(const struct nlmsghdr *h, void *arg)
{
	struct link_pick *lp = arg;
	struct rtattr *tb[IFLA_IFNAME + 1];
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	char name[IFNAMSIZ];
	size_t l;

	if (h->nlmsg_type != RTM_NEWLINK ||
	    nl_attrs(h, sizeof(*ifi), tb, IFLA_IFNAME + 1) < 0 ||
	    tb[IFLA_IFNAME] == NULL)
		return;
	l = strnlen(RTA_DATA(tb[IFLA_IFNAME]), RTA_PAYLOAD(tb[IFLA_IFNAME]));
	if (l == 0 || l >= sizeof(name))
		return;
	memcpy(name, RTA_DATA(tb[IFLA_IFNAME]), l);
	name[l] = '\0';
	if (lp->want != NULL ? strcmp(name, lp->want) == 0 :
	    ifi->ifi_type == ARPHRD_ETHER && !(ifi->ifi_flags & IFF_LOOPBACK) &&
	    (lp->index == 0 || ifi->ifi_index < lp->index)) {
		lp->index = ifi->ifi_index;
		memcpy(lp->name, name, l + 1);
	}
}

/* A default route of the main table, to delete. */
struct route {
	unsigned char tos, protocol, scope, type;
	struct in_addr gw;
	uint32_t oif, prio;
	int has_gw, has_oif, has_prio;
};

struct route_list {
	struct route r[ID_ROUTES];
	int n;
};

static void
route_seen(const struct nlmsghdr *h, void *arg)
{
	struct route_list *rl = arg;
	struct rtattr *tb[RTA_TABLE + 1];
	const struct rtmsg *rt = NLMSG_DATA(h);
	struct route *r;
	uint32_t table;

	if (h->nlmsg_type != RTM_NEWROUTE ||
	    nl_attrs(h, sizeof(*rt), tb, RTA_TABLE + 1) < 0 ||
	    rt->rtm_family != AF_INET || rt->rtm_dst_len != 0 ||
	    rl->n == ID_ROUTES)
		return;
	table = rt->rtm_table;
	if (tb[RTA_TABLE] != NULL && RTA_PAYLOAD(tb[RTA_TABLE]) >= 4)
		memcpy(&table, RTA_DATA(tb[RTA_TABLE]), 4);
	if (table != RT_TABLE_MAIN)
		return;
	r = &rl->r[rl->n++];
	memset(r, 0, sizeof(*r));
	r->tos = rt->rtm_tos;
	r->protocol = rt->rtm_protocol;
	r->scope = rt->rtm_scope;
	r->type = rt->rtm_type;
	if ((r->has_gw = tb[RTA_GATEWAY] != NULL &&
	    RTA_PAYLOAD(tb[RTA_GATEWAY]) == 4))
		memcpy(&r->gw, RTA_DATA(tb[RTA_GATEWAY]), 4);
	if ((r->has_oif = tb[RTA_OIF] != NULL && RTA_PAYLOAD(tb[RTA_OIF]) >= 4))
		memcpy(&r->oif, RTA_DATA(tb[RTA_OIF]), 4);
	if ((r->has_prio = tb[RTA_PRIORITY] != NULL &&
	    RTA_PAYLOAD(tb[RTA_PRIORITY]) >= 4))
		memcpy(&r->prio, RTA_DATA(tb[RTA_PRIORITY]), 4);
}

/* An IPv4 address of the interface, to delete. */
struct addr_list {
	int index;
	struct {
		unsigned char prefix;
		struct in_addr local, peer;
		int has_local, has_peer;
	} a[ID_ADDRS];
	int n;
};

static void
addr_seen(const struct nlmsghdr *h, void *arg)
{
	struct addr_list *al = arg;
	struct rtattr *tb[IFA_LOCAL + 1];
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	int i;

	if (h->nlmsg_type != RTM_NEWADDR ||
	    nl_attrs(h, sizeof(*ifa), tb, IFA_LOCAL + 1) < 0 ||
	    ifa->ifa_family != AF_INET || (int)ifa->ifa_index != al->index ||
	    al->n == ID_ADDRS)
		return;
	i = al->n++;
	al->a[i].prefix = ifa->ifa_prefixlen;
	if ((al->a[i].has_local = tb[IFA_LOCAL] != NULL &&
	    RTA_PAYLOAD(tb[IFA_LOCAL]) == 4))
		memcpy(&al->a[i].local, RTA_DATA(tb[IFA_LOCAL]), 4);
	if ((al->a[i].has_peer = tb[IFA_ADDRESS] != NULL &&
	    RTA_PAYLOAD(tb[IFA_ADDRESS]) == 4))
		memcpy(&al->a[i].peer, RTA_DATA(tb[IFA_ADDRESS]), 4);
}

/* RTM_NEWLINK on the interface: its flags (IFF_UP in change), and a
 * MAC when mac is not NULL. */
static int
link_set(struct nl *nl, int index, unsigned flags, const unsigned char *mac)
{
	union nlmsg m;
	struct ifinfomsg *ifi = nl_start(&m, RTM_NEWLINK, 0, sizeof(*ifi));

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = index;
	ifi->ifi_flags = flags;
	ifi->ifi_change = IFF_UP;
	if (mac != NULL) {
		ifi->ifi_change = 0;
		nl_attr(&m, IFLA_ADDRESS, mac, 6);
	}
	return nl_talk(nl, &m, NULL, NULL);
}

/*
 * Step 5: its MAC set (with 'm': live, else down, set, up), up anyway,
 * its IPv4 addresses replaced by 'a', every default route of the main
 * table by one via 'g' on it. 0, or -1 with the failed step in msg.
 */
static int
ident_net(struct nl *nl, const struct ident *d, const struct link_pick *lp,
    char *msg, size_t mlen)
{
	struct addr_list al;
	struct route_list rl;
	union nlmsg m;
	struct ifaddrmsg *ifa;
	struct rtmsg *rt;
	struct in_addr brd;
	char why[320], ip[INET_ADDRSTRLEN];
	uint32_t oif = (uint32_t)lp->index;
	int e, i, round;

	/* virtio-net changes its MAC live (IFF_LIVE_ADDR_CHANGE): no down
	 * and up (each a round of the device's queues) unless refused */
	if (d->mac_s != NULL && link_set(nl, lp->index, 0, d->mac) != 0) {
		if ((e = link_set(nl, lp->index, 0, NULL)) != 0) {
			snprintf(msg, mlen, "500 take %s down: %s", lp->name,
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
		if ((e = link_set(nl, lp->index, 0, d->mac)) != 0) {
			snprintf(msg, mlen, "500 set the MAC %s on %s: %s",
			    d->mac_s, lp->name,
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
	}
	if ((e = link_set(nl, lp->index, IFF_UP, NULL)) != 0) {
		snprintf(msg, mlen, "500 bring %s up: %s", lp->name,
		    nl_why(nl, e, why, sizeof(why)));
		return -1;
	}
	/* Every IPv4 address goes (deleting a primary one can take its
	 * secondaries along: gone already is no error), in rounds of
	 * ID_ADDRS. */
	for (round = 0; d->addr_s != NULL; round++) {
		memset(&al, 0, sizeof(al));
		al.index = lp->index;
		ifa = nl_start(&m, RTM_GETADDR, NLM_F_DUMP, sizeof(*ifa));
		ifa->ifa_family = AF_INET;
		if ((e = nl_talk(nl, &m, addr_seen, &al)) != 0) {
			snprintf(msg, mlen, "500 list the addresses of %s: %s",
			    lp->name, nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
		if (al.n == 0)
			break;
		if (round == 16) {
			snprintf(msg, mlen, "500 delete the addresses of %s: "
			    "they keep coming", lp->name);
			return -1;
		}
		for (i = 0; i < al.n; i++) {
			ifa = nl_start(&m, RTM_DELADDR, 0, sizeof(*ifa));
			ifa->ifa_family = AF_INET;
			ifa->ifa_prefixlen = al.a[i].prefix;
			ifa->ifa_index = (uint32_t)lp->index;
			if (al.a[i].has_local)
				nl_attr(&m, IFA_LOCAL, &al.a[i].local, 4);
			if (al.a[i].has_peer)
				nl_attr(&m, IFA_ADDRESS, &al.a[i].peer, 4);
			e = nl_talk(nl, &m, NULL, NULL);
			if (e != 0 && e != EADDRNOTAVAIL && e != ENOENT) {
				inet_ntop(AF_INET, &al.a[i].local, ip,
				    sizeof(ip));
				snprintf(msg, mlen, "500 delete the address "
				    "%s/%d from %s: %s", ip, al.a[i].prefix,
				    lp->name, nl_why(nl, e, why, sizeof(why)));
				return -1;
			}
		}
	}
	if (d->addr_s != NULL) {
		ifa = nl_start(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL,
		    sizeof(*ifa));
		ifa->ifa_family = AF_INET;
		ifa->ifa_prefixlen = (unsigned char)d->prefix;
		ifa->ifa_scope = RT_SCOPE_UNIVERSE;
		ifa->ifa_index = (uint32_t)lp->index;
		nl_attr(&m, IFA_LOCAL, &d->addr, 4);
		nl_attr(&m, IFA_ADDRESS, &d->addr, 4);
		if (d->prefix < 31) {
			brd.s_addr = d->addr.s_addr |
			    htonl(0xffffffffu >> d->prefix);
			nl_attr(&m, IFA_BROADCAST, &brd, 4);
		}
		if ((e = nl_talk(nl, &m, NULL, NULL)) != 0) {
			snprintf(msg, mlen, "500 set the address %s on %s: %s",
			    d->addr_s, lp->name,
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
	}
	if (d->gw_s == NULL)
		return 0;
	memset(&rl, 0, sizeof(rl));
	rt = nl_start(&m, RTM_GETROUTE, NLM_F_DUMP, sizeof(*rt));
	rt->rtm_family = AF_INET;
	if ((e = nl_talk(nl, &m, route_seen, &rl)) != 0) {
		snprintf(msg, mlen, "500 list the routes: %s",
		    nl_why(nl, e, why, sizeof(why)));
		return -1;
	}
	for (i = 0; i < rl.n; i++) {
		rt = nl_start(&m, RTM_DELROUTE, 0, sizeof(*rt));
		rt->rtm_family = AF_INET;
		rt->rtm_table = RT_TABLE_MAIN;
		rt->rtm_tos = rl.r[i].tos;
		rt->rtm_scope = RT_SCOPE_NOWHERE;
		rt->rtm_type = rl.r[i].type;
		if (rl.r[i].has_gw)
			nl_attr(&m, RTA_GATEWAY, &rl.r[i].gw, 4);
		if (rl.r[i].has_oif)
			nl_attr(&m, RTA_OIF, &rl.r[i].oif, 4);
		if (rl.r[i].has_prio)
			nl_attr(&m, RTA_PRIORITY, &rl.r[i].prio, 4);
		e = nl_talk(nl, &m, NULL, NULL);
		if (e != 0 && e != ESRCH) {
			snprintf(msg, mlen, "500 delete a default route: %s",
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
	}
	rt = nl_start(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
	    sizeof(*rt));
	rt->rtm_family = AF_INET;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_BOOT;
	rt->rtm_scope = RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_UNICAST;
	nl_attr(&m, RTA_GATEWAY, &d->gw, 4);
	nl_attr(&m, RTA_OIF, &oif, 4);
	if ((e = nl_talk(nl, &m, NULL, NULL)) != 0) {
		snprintf(msg, mlen, "500 set the default route via %s on "
		    "%s: %s", d->gw_s, lp->name,
		    nl_why(nl, e, why, sizeof(why)));
		return -1;
	}
	return 0;
}

/*
 * 'U': the fields checked (and the interface found) before anything
 * changes, then the steps in order: clock, entropy, machine id,
 * hostname, network, resolv.conf. The first failure is told and ends
 * it (the steps before it stay done: berthd discards such a clone).
 */
static void
identity(uint32_t id, const unsigned char *p, size_t len)
{
	struct ident d;
	struct link_pick lp = { 0 };
	struct nl nl = { .fd = -1 };
	struct timespec ts;
	struct stat st;
	const char *what;
	char msg[600], buf[INET_ADDRSTRLEN + 16], text[128], *w;
	int e, i, net;

	if (ident_parse(p, len, &d, text, sizeof(text)) < 0) {
		failf(id, "400 malformed identity: %s", text);
		goto out;
	}
	net = d.mac_s != NULL || d.addr_s != NULL || d.gw_s != NULL;
	if (net || d.ifname != NULL) {
		union nlmsg m;
		struct ifinfomsg *ifi;

		if ((e = nl_open(&nl)) != 0) {
			failf(id, "500 open a netlink socket: %s", strerror(e));
			goto out;
		}
		lp.want = d.ifname;
		ifi = nl_start(&m, RTM_GETLINK, NLM_F_DUMP, sizeof(*ifi));
		ifi->ifi_family = AF_UNSPEC;
		if ((e = nl_talk(&nl, &m, link_seen, &lp)) != 0) {
			failf(id, "500 list the network interfaces: %s",
			    nl_why(&nl, e, msg, sizeof(msg)));
			goto out;
		}
		if (lp.index == 0) {
			if (d.ifname != NULL)
				failf(id, "404 no network interface %s",
				    d.ifname);
			else
				failf(id, "500 no ethernet interface to "
				    "configure");
			goto out;
		}
	}
	/* set when it is off by a second or more: a clone's clock is its
	 * snapshot's (minutes or days behind); under a second is the
	 * message's own way here, and a step back for it would do harm */
	if (d.clock >= 0 && clock_gettime(CLOCK_REALTIME, &ts) == 0 &&
	    llabs((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
	    d.clock) >= 1000) {
		ts.tv_sec = (time_t)(d.clock / 1000);
		ts.tv_nsec = (long)(d.clock % 1000) * 1000000;
		if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
			failf(id, "500 set the clock to %lld ms: %s", d.clock,
			    strerror(errno));
			goto out;
		}
	}
	if (d.has_rnd && (e = entropy_add(d.rnd, sizeof(d.rnd))) != 0) {
		failf(id, "500 add entropy to /dev/urandom: %s", strerror(e));
		goto out;
	}
	if (d.mid != NULL) {
		snprintf(text, sizeof(text), "%s\n", d.mid);
		if ((e = file_replace("/etc/machine-id", text, strlen(text),
		    0444)) != 0) {
			failf(id, "500 write /etc/machine-id: %s", strerror(e));
			goto out;
		}
		/* D-Bus's own copy, where it is not a link to ours */
		if (lstat("/var/lib/dbus/machine-id", &st) == 0 &&
		    S_ISREG(st.st_mode) && (e = file_replace(
		    "/var/lib/dbus/machine-id", text, strlen(text), 0444)) !=
		    0) {
			failf(id, "500 write /var/lib/dbus/machine-id: %s",
			    strerror(e));
			goto out;
		}
	}
	if (d.host != NULL) {
		if (sethostname(d.host, strlen(d.host)) < 0) {
			failf(id, "500 set the hostname %s: %s", d.host,
			    strerror(errno));
			goto out;
		}
		snprintf(text, sizeof(text), "%s\n", d.host);
		if ((e = file_replace("/etc/hostname", text, strlen(text),
		    0644)) != 0) {
			failf(id, "500 write /etc/hostname: %s", strerror(e));
			goto out;
		}
		if ((e = hosts_write(d.host, &what)) != 0) {
			failf(id, "500 %s: %s", what, strerror(e));
			goto out;
		}
	}
	if (net && ident_net(&nl, &d, &lp, msg, sizeof(msg)) < 0) {
		failf(id, "%s", msg);
		goto out;
	}
	if (d.nns > 0) {
		w = msg;
		for (i = 0; i < d.nns; i++) {
			inet_ntop(AF_INET, &d.ns[i], buf, sizeof(buf));
			w += sprintf(w, "nameserver %s\n", buf);
		}
		if ((e = file_replace("/etc/resolv.conf", msg,
		    (size_t)(w - msg), 0644)) != 0) {
			failf(id, "500 write /etc/resolv.conf: %s",
			    strerror(e));
			goto out;
		}
	}
	(void)port_frame(BA_EXIT, id, "exit 0", 6, NULL, 0);
out:
	explicit_bzero(d.rnd, sizeof(d.rnd));
	close_fd(&nl.fd);
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
			start(id, p, len);
		else if (type == BA_FILE_PUT)
			file_put(id, p, len);
		else if (type == BA_FILE_GET)
			file_get(id, p, len);
		else if (type == BA_LIST)
			list(id);
		else if (type == BA_LOGS)
			logs(id, p, len);
		else if (type == BA_SIGNAL)
			proc_signal(id, p, len);
		else if (type == BA_LS)
			ls_start(id, p, len);
		else if (type == BA_MKDIR)
			fs_mkdir(id, p, len);
		else if (type == BA_WATCH)
			watch_start(id, p, len);
		else if (type == BA_ATTACH)
			attach(id, p, len);
		else if (type == BA_IDENTITY)
			identity(id, p, len);
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
		resize(c, p, len);
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
				else if (c->w->boff == c->w->blen &&
				    watch_room(c, 2))
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
main(void)
{
	struct pollfd pfd;
	char path[128], *s, *end;
	sigset_t set;
	nfds_t n, k;
	int i, to, testing = 0, listener = -1;

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
