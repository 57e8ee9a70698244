/*
 * agentio.c — see agentio.h. Two bufferevents: the guest agent's socket
 * (read and write) and the pipe's write end (write only). What the
 * socket reads is moved, as it is, to the pipe's output; above
 * PX_AGENTIO_HELD the socket stops reading until the pipe's output is
 * empty again. The guest's end (EOF, or a read error) stops reading and
 * closes the pipe once what it held is written, so the reader sees every
 * byte and then the end, in that order.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "agentio.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct px_agentio {
	struct bufferevent *sock;	/* the guest agent's connection */
	struct bufferevent *pipe;	/* toward the reader; NULL: closed */
	int eof;			/* the guest's end closed */
	struct px_agentio_cbs cbs;
};

static void
pipe_close(struct px_agentio *io)
{
	if (io->pipe != NULL)
		bufferevent_free(io->pipe);
	io->pipe = NULL;
}

static void
sock_read(struct bufferevent *bev, void *arg)
{
	struct px_agentio *io = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (io->pipe == NULL) {
		/* the reader let go of it: nobody reads these */
		evbuffer_drain(in, evbuffer_get_length(in));
		bufferevent_disable(bev, EV_READ);
		return;
	}
	evbuffer_add_buffer(bufferevent_get_output(io->pipe), in);
	if (px_agentio_held(io) >= PX_AGENTIO_HELD)
		bufferevent_disable(bev, EV_READ);
}

static void
sock_write(struct bufferevent *bev, void *arg)
{
	struct px_agentio *io = arg;

	(void)bev;
	if (io->cbs.written != NULL)
		io->cbs.written(io->cbs.arg);
}

static void
sock_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_agentio *io = arg;

	if (what & BEV_EVENT_READING) {
		/* the guest's end: the reader learns it after the bytes */
		io->eof = 1;
		bufferevent_disable(bev, EV_READ);
		if (px_agentio_held(io) == 0)
			pipe_close(io);
		return;
	}
	if (io->cbs.lost != NULL)	/* writing failed */
		io->cbs.lost(io->cbs.arg);
}

/* The pipe's output is empty (its low watermark, 0). */
static void
pipe_write(struct bufferevent *bev, void *arg)
{
	struct px_agentio *io = arg;

	(void)bev;
	if (io->eof)
		pipe_close(io);
	else
		bufferevent_enable(io->sock, EV_READ);
}

/* The reader closed its end (or died): what the guest sends goes
 * nowhere; the reader's message or its exit tells the parent. */
static void
pipe_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_agentio *io = arg;

	(void)bev;
	(void)what;
	pipe_close(io);
	bufferevent_disable(io->sock, EV_READ);
}

struct px_agentio *
px_agentio_new(struct event_base *base, int sock, int *reader,
    const struct px_agentio_cbs *cbs)
{
	struct px_agentio *io;
	int p[2] = { -1, -1 };

	if ((io = calloc(1, sizeof(*io))) == NULL)
		goto fail;
	io->cbs = *cbs;
	if (pipe2(p, O_CLOEXEC) != 0)
		goto fail;
	if (evutil_make_socket_nonblocking(p[1]) != 0 ||
	    evutil_make_socket_nonblocking(sock) != 0)
		goto fail;
	io->sock = bufferevent_socket_new(base, sock, BEV_OPT_CLOSE_ON_FREE);
	if (io->sock == NULL)
		goto fail;
	sock = -1;
	io->pipe = bufferevent_socket_new(base, p[1], BEV_OPT_CLOSE_ON_FREE);
	if (io->pipe == NULL)
		goto fail;
	p[1] = -1;
	bufferevent_setcb(io->sock, sock_read, sock_write, sock_event, io);
	bufferevent_setcb(io->pipe, NULL, pipe_write, pipe_event, io);
	bufferevent_disable(io->pipe, EV_READ);
	bufferevent_enable(io->pipe, EV_WRITE);
	bufferevent_enable(io->sock, EV_READ | EV_WRITE);
	*reader = p[0];
	return io;
fail:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (io != NULL) {
		if (io->sock != NULL)
			bufferevent_free(io->sock);
		free(io);
	}
	if (sock >= 0)
		close(sock);
	return NULL;
}

struct evbuffer *
px_agentio_output(struct px_agentio *io)
{
	return bufferevent_get_output(io->sock);
}

size_t
px_agentio_held(const struct px_agentio *io)
{
	size_t n = evbuffer_get_length(bufferevent_get_input(io->sock));

	if (io->pipe != NULL)
		n += evbuffer_get_length(bufferevent_get_output(io->pipe));
	return n;
}

void
px_agentio_free(struct px_agentio *io)
{
	if (io == NULL)
		return;
	/* the guest sees its end close now, queued frames or not */
	shutdown(bufferevent_getfd(io->sock), SHUT_RDWR);
	bufferevent_free(io->sock);
	pipe_close(io);
	free(io);
}
