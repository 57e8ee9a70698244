/*
 * console.c — the console of a jailed VMM: its serial port is a socket
 * in run/, and what the guest prints is copied here into
 * <dir>/console.log, outside the jail, which is bounded: at half of
 * cfg.console_max it becomes console.log.1 (the one before goes) and a
 * new file starts. A guest printing in a loop costs at most console_max
 * of disk, and at most cfg.console_rate bytes a second of this process's
 * time (a token bucket holding one second's worth): past it the copier
 * stops reading until the bucket refills, the socket fills, and qemu
 * holds the guest's console back. While nobody reads (berthd
 * restarting) qemu drops the output.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "console.h"
#include "qmp.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#define CON_READ	16384	/* at most this per read */

static size_t
rate(const struct vmm_console *c)
{
	return c->sb->m->cfg.console_rate;
}

void
vmm_console_init(struct vmm_console *c, struct vmm_sandbox *sb)
{
	memset(c, 0, sizeof(*c));
	c->sb = sb;
	c->fd = c->out = -1;
}

void
vmm_console_close(struct vmm_console *c)
{
	if (c->ev != NULL) {
		event_free(c->ev);
		c->ev = NULL;
	}
	if (c->resume != NULL) {
		event_free(c->resume);
		c->resume = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	if (c->out >= 0)
		close(c->out);
	c->fd = c->out = -1;
}

static int
open_out(struct vmm_console *c)
{
	char p[PATH_MAX];
	struct stat st;

	(void)vmm_path(c->sb, "console.log", p, sizeof(p));
	c->out = open(p, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
	    O_CLOEXEC, 0640);
	if (c->out < 0)
		return -1;
	c->size = fstat(c->out, &st) == 0 ? st.st_size : 0;
	return 0;
}

/* The bucket as of now: what the time since it was last looked at
 * added, up to one second's worth. */
static void
refill(struct vmm_console *c)
{
	uint64_t t = vmm_now_ms();
	double cap = (double)rate(c);

	c->tokens += (double)(t - c->last_ms) * cap / 1000.0;
	if (c->tokens > cap)
		c->tokens = cap;
	c->last_ms = t;
}

static void
con_resume(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_console *c = arg;

	(void)fd;
	(void)what;
	if (c->ev != NULL)
		event_add(c->ev, NULL);
}

static void
con_read(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_console *c = arg;
	size_t half = c->sb->m->cfg.console_max / 2, want = CON_READ;
	char buf[CON_READ], p[PATH_MAX], p1[PATH_MAX];
	ssize_t n, w;

	(void)what;
	refill(c);
	if (c->tokens < 1.0) {
		/* spent: read again once a read's worth came back */
		struct timeval tv;
		uint64_t ms = (uint64_t)((double)CON_READ * 1000.0 /
		    (double)rate(c)) + 1;

		if (ms > 1000)
			ms = 1000;
		tv.tv_sec = (time_t)(ms / 1000);
		tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
		event_del(c->ev);
		evtimer_add(c->resume, &tv);
		c->sb->console_paused++;
		return;
	}
	if ((double)want > c->tokens)
		want = (size_t)c->tokens;
	n = read(fd, buf, want);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		vmm_console_close(c);	/* qemu went away */
		return;
	}
	c->tokens -= (double)n;
	if (c->out < 0 && open_out(c) < 0)
		return;
	if (c->size + n > (off_t)half) {
		(void)vmm_path(c->sb, "console.log", p, sizeof(p));
		(void)vmm_path(c->sb, "console.log.1", p1, sizeof(p1));
		close(c->out);
		c->out = -1;
		(void)rename(p, p1);
		c->rotations++;		/* (the boot's ready-line scan) */
		if (open_out(c) < 0)
			return;
		if ((size_t)n > half)	/* keep the end of a huge read */
			memmove(buf, buf + n - half, half), n = (ssize_t)half;
	}
	if ((w = write(c->out, buf, (size_t)n)) > 0)
		c->size += w;
}

int
vmm_console_connect(struct vmm_console *c)
{
	struct vmm_sandbox *sb = c->sb;
	char p[PATH_MAX], err[VMM_ERRLEN];
	int fd;

	if (!sb->jailed || c->fd >= 0)
		return 0;
	(void)vmm_path(sb, "console.sock", p, sizeof(p));
	if ((fd = vmm_qmp_connect_unix(p, err, sizeof(err))) < 0)
		return -1;
	if (sb->uid != 0 && vmm_qmp_peer_is(fd, sb->uid, err,
	    sizeof(err)) < 0) {
		close(fd);
		return -1;
	}
	c->fd = fd;
	c->tokens = (double)rate(c);	/* a boot's burst */
	c->last_ms = vmm_now_ms();
	c->ev = event_new(sb->m->base, fd, EV_READ | EV_PERSIST, con_read, c);
	c->resume = evtimer_new(sb->m->base, con_resume, c);
	if (c->ev == NULL || c->resume == NULL || event_add(c->ev, NULL) < 0) {
		vmm_console_close(c);
		return -1;
	}
	return 0;
}
