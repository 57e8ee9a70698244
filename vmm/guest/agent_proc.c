/*
 * agent_proc.c — the guest agent's detached processes and the clients
 * attached to them.
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
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct procq procs = TAILQ_HEAD_INITIALIZER(procs);
static int nprocs;		/* on the list */
static unsigned next_proc = 1;

/* A 'G' channel lets go of its process: a forgotten one is freed. */
void
proc_unref(struct proc *p)
{
	if (--p->nref > 0 || !p->gone)
		return;
	free(p->ring);
	free(p);
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
void
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
int
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

/* A new process on the list: its number is the next one. */
void
proc_add(struct proc *p)
{
	p->num = next_proc++;
	TAILQ_INSERT_TAIL(&procs, p, entry);
	nprocs++;
}

/* argv joined by spaces, cut at CMD_MAX bytes, '?' for what is not
 * printable (a 'Q' frame is one line of words, cmd last). */
void
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
int
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
 * more is read there (see cmd_finish, agent_exec.c).
 */
void
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
void
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

/* 'L': a 'Q' for each process kept, in their order, then 'X'. */
void
proc_list(uint32_t id)
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
int
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
void
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
void
logs_start(uint32_t id, const unsigned char *p, size_t len)
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
void
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
void
attach_resize(struct chan *c, int rows, int cols)
{
	c->rows = rows;
	c->cols = cols;
	if (attach_newest(c->proc, NULL) == c)
		proc_winsize(c->proc, rows, cols);
}

/* A client goes (chan_end): when it was the newest, the next newest's
 * size, if it gave one, is the terminal's. */
void
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
void
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
void
attach_start(uint32_t id, const unsigned char *p, size_t len)
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
