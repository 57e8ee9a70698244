/*
 * chan.c — the typed message channel between berthd's parent and its
 * helpers (proc.h): one message per datagram of a SOCK_SEQPACKET pair, a
 * header (type, length) and the payload, descriptors as SCM_RIGHTS. A
 * datagram whose header does not match its length, or that was cut
 * (MSG_TRUNC, MSG_CTRUNC), ends the channel as corrupt. Heartbeats
 * (PX_CHAN_PING, PX_CHAN_PONG) are answered or passed on here.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/event.h>

/* ---- the channel: one message per datagram of a SOCK_SEQPACKET pair ---- */

struct msghdr_px {
	uint32_t	 type;
	uint32_t	 len;
};

struct outmsg {
	TAILQ_ENTRY(outmsg) entry;
	size_t		 len;		/* header + payload */
	int		 fds[PX_PROC_FDS];
	int		 nfds;
	unsigned char	 buf[];
};

struct px_chan {
	int		 fd;
	struct event	*rev, *wev;
	TAILQ_HEAD(, outmsg) q;
	size_t		 queued;
	unsigned long long dropped;	/* too large for the socket */
	px_chan_msg_cb	 on_msg;
	px_chan_close_cb on_close;
	px_chan_pong_cb	 on_pong;	/* this end pings */
	void		*arg;
	unsigned char	*rbuf;
};

/* More than this queued for a peer that does not read: it is stuck. */
#define PX_CHAN_QUEUE_MAX	(16u * 1024 * 1024)

static void chan_write(evutil_socket_t, short, void *);

static void
chan_closed(struct px_chan *c, int corrupt)
{
	event_del(c->rev);
	event_del(c->wev);
	c->on_close(c, corrupt, c->arg);
}

static void
chan_read(evutil_socket_t fd, short what, void *arg)
{
	struct px_chan *c = arg;
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int) * PX_PROC_FDS)];
	} cm;
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *cmh;
	struct msghdr_px h;
	int fds[PX_PROC_FDS], nfds, i, k;
	ssize_t n;

	for (k = 0; k < 64; k++) {	/* then let the loop breathe */
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = c->rbuf;
		iov.iov_len = sizeof(h) + PX_PROC_MSG_MAX;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			chan_closed(c, 0);
			return;
		}
		nfds = 0;
		for (cmh = CMSG_FIRSTHDR(&mh); cmh != NULL;
		    cmh = CMSG_NXTHDR(&mh, cmh)) {
			size_t nb;

			if (cmh->cmsg_level != SOL_SOCKET ||
			    cmh->cmsg_type != SCM_RIGHTS)
				continue;
			nb = (cmh->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < (int)nb; i++) {
				int f;

				memcpy(&f, CMSG_DATA(cmh) + i * sizeof(int), sizeof(int));
				if (nfds < PX_PROC_FDS)
					fds[nfds++] = f;
				else
					close(f);
			}
		}
		memcpy(&h, c->rbuf, (size_t)n < sizeof(h) ? (size_t)n : sizeof(h));
		if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
		    (size_t)n < sizeof(h) || h.len != (size_t)n - sizeof(h)) {
			for (i = 0; i < nfds; i++)
				close(fds[i]);
			chan_closed(c, 1);
			return;
		}
		if (h.type == PX_CHAN_PING || h.type == PX_CHAN_PONG) {
			uint64_t seq;

			for (i = 0; i < nfds; i++)
				close(fds[i]);
			if (nfds != 0 || h.len != sizeof(seq) ||
			    (h.type == PX_CHAN_PING) != (c->on_pong == NULL)) {
				chan_closed(c, 1);
				return;
			}
			memcpy(&seq, c->rbuf + sizeof(h), sizeof(seq));
			if (h.type == PX_CHAN_PING)
				(void)px_chan_send(c, PX_CHAN_PONG, &seq,
				    sizeof(seq), NULL, 0);
			else
				c->on_pong(c, seq, c->arg);
			continue;
		}
		c->on_msg(c, h.type, c->rbuf + sizeof(h), h.len, fds, nfds, c->arg);
		for (i = 0; i < nfds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		/* on_msg may have freed c: it then returns through here
		 * only if it did not (callers free from on_close only) */
	}
}

struct px_chan *
px_chan_new(struct event_base *base, int fd, px_chan_msg_cb on_msg,
    px_chan_close_cb on_close, void *arg)
{
	struct px_chan *c = calloc(1, sizeof(*c));

	if (c == NULL || (c->rbuf = malloc(sizeof(struct msghdr_px) +
	    PX_PROC_MSG_MAX)) == NULL) {
		free(c);
		return NULL;
	}
	{
		/* a datagram larger than the send buffer is EMSGSIZE, never
		 * sent: room for the largest message (the parent's rule
		 * pushes); a root parent may go past wmem_max */
		int sz = 2 * PX_PROC_MSG_MAX + 65536;

		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	c->fd = fd;
	c->on_msg = on_msg;
	c->on_close = on_close;
	c->arg = arg;
	TAILQ_INIT(&c->q);
	evutil_make_socket_nonblocking(fd);
	c->rev = event_new(base, fd, EV_READ | EV_PERSIST, chan_read, c);
	c->wev = event_new(base, fd, EV_WRITE, chan_write, c);
	if (c->rev == NULL || c->wev == NULL) {
		px_chan_free(c);
		return NULL;
	}
	event_add(c->rev, NULL);
	return c;
}

void
px_chan_free(struct px_chan *c)
{
	struct outmsg *m;
	int i;

	if (c == NULL)
		return;
	while ((m = TAILQ_FIRST(&c->q)) != NULL) {
		TAILQ_REMOVE(&c->q, m, entry);
		for (i = 0; i < m->nfds; i++)
			close(m->fds[i]);
		free(m);
	}
	if (c->rev != NULL)
		event_free(c->rev);
	if (c->wev != NULL)
		event_free(c->wev);
	close(c->fd);
	free(c->rbuf);
	free(c);
}

/* 1 sent, 0 would block, 2 too large for this socket, -1 the peer is gone */
static int
send_one(struct px_chan *c, struct outmsg *m)
{
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int) * PX_PROC_FDS)];
	} cm;
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *cmh;

	memset(&mh, 0, sizeof(mh));
	iov.iov_base = m->buf;
	iov.iov_len = m->len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (m->nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * m->nfds);
		cmh = CMSG_FIRSTHDR(&mh);
		cmh->cmsg_level = SOL_SOCKET;
		cmh->cmsg_type = SCM_RIGHTS;
		cmh->cmsg_len = CMSG_LEN(sizeof(int) * m->nfds);
		memcpy(CMSG_DATA(cmh), m->fds, sizeof(int) * m->nfds);
	}
	if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno == EMSGSIZE)
			return 2;	/* can never go: dropped, not stuck */
		return errno == EAGAIN || errno == EINTR || errno == ENOBUFS ? 0 : -1;
	}
	return 1;
}

static int
flush_some(struct px_chan *c)
{
	struct outmsg *m;
	int i, r;

	while ((m = TAILQ_FIRST(&c->q)) != NULL) {
		if ((r = send_one(c, m)) <= 0)
			return r;
		if (r == 2)
			c->dropped++;
		TAILQ_REMOVE(&c->q, m, entry);
		c->queued -= m->len;
		for (i = 0; i < m->nfds; i++)
			close(m->fds[i]);
		free(m);
	}
	return 1;
}

static void
chan_write(evutil_socket_t fd, short what, void *arg)
{
	struct px_chan *c = arg;
	int r = flush_some(c);

	if (r == 0)
		event_add(c->wev, NULL);
	/* r < 0: the read side sees the peer gone and says so */
}

int
px_chan_send(struct px_chan *c, uint32_t type, const void *p, size_t len,
    const int *fds, int nfds)
{
	struct outmsg *m;
	struct msghdr_px h;
	int i;

	if (c == NULL || len > PX_PROC_MSG_MAX || nfds > PX_PROC_FDS ||
	    c->queued + len > PX_CHAN_QUEUE_MAX)
		return -1;
	if ((m = malloc(sizeof(*m) + sizeof(h) + len)) == NULL)
		return -1;
	h.type = type;
	h.len = (uint32_t)len;
	memcpy(m->buf, &h, sizeof(h));
	if (len > 0)
		memcpy(m->buf + sizeof(h), p, len);
	m->len = sizeof(h) + len;
	m->nfds = 0;
	for (i = 0; i < nfds; i++) {
		if ((m->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0) {
			while (--i >= 0)
				close(m->fds[i]);
			free(m);
			return -1;
		}
		m->nfds++;
	}
	TAILQ_INSERT_TAIL(&c->q, m, entry);
	c->queued += m->len;
	if (flush_some(c) == 0)
		event_add(c->wev, NULL);
	return 0;
}

void
px_chan_on_pong(struct px_chan *c, px_chan_pong_cb cb)
{
	c->on_pong = cb;
}

int
px_chan_ping(struct px_chan *c, uint64_t seq)
{
	return px_chan_send(c, PX_CHAN_PING, &seq, sizeof(seq), NULL, 0);
}

int
px_chan_pending(struct px_chan *c)
{
	struct pollfd pfd;

	if (c == NULL)
		return 0;
	pfd.fd = c->fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
}

void
px_chan_flush(struct px_chan *c, int ms)
{
	struct pollfd pfd = { c->fd, POLLOUT, 0 };

	while (!TAILQ_EMPTY(&c->q) && flush_some(c) == 0 &&
	    poll(&pfd, 1, ms) > 0)
		;
}

