/*
 * ipc.c — see ipc.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "ipc.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

int
px_ipc_send(struct bufferevent *bev, json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT);
	evutil_socket_t fd;
	uint32_t len;

	if (s == NULL)
		return -1;
	len = htonl((uint32_t)strlen(s));
	bufferevent_write(bev, &len, sizeof(len));
	bufferevent_write(bev, s, strlen(s));
	free(s);
	/* Out now, not when the loop next polls: a worker's "wake" would
	 * otherwise wait for the rest of the TLS handshake that started it,
	 * and the parent's "woken" for the store write and the route table
	 * that follow it (milliseconds of a wake's time to first byte).
	 * What the socket does not take goes the usual way, in order. */
	if ((fd = bufferevent_getfd(bev)) >= 0) {
		struct evbuffer *out = bufferevent_get_output(bev);

		/* the bufferevent keeps its output's front frozen for itself;
		 * its own write callback thaws it the same way */
		evbuffer_unfreeze(out, 1);
		(void)evbuffer_write(out, fd);
		evbuffer_freeze(out, 1);
	}
	return 0;
}

int
px_ipc_recv(struct bufferevent *bev, json_t **out)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	uint32_t len;
	unsigned char *p;
	json_error_t jerr;

	if (evbuffer_get_length(in) < 4)
		return 0;
	evbuffer_copyout(in, &len, 4);
	len = ntohl(len);
	if (len == 0 || len > PX_IPC_MAX)
		return -1;
	if (evbuffer_get_length(in) < 4 + (size_t)len)
		return 0;
	p = evbuffer_pullup(in, 4 + (ssize_t)len);
	*out = json_loadb((const char *)p + 4, len, 0, &jerr);
	evbuffer_drain(in, 4 + (size_t)len);
	if (*out == NULL || !json_is_object(*out) ||
	    !json_is_string(json_object_get(*out, "type"))) {
		json_decref(*out);
		*out = NULL;
		return -1;
	}
	return 1;
}
