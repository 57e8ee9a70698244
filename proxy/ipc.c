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
	uint32_t len;

	if (s == NULL)
		return -1;
	len = htonl((uint32_t)strlen(s));
	bufferevent_write(bev, &len, sizeof(len));
	bufferevent_write(bev, s, strlen(s));
	free(s);
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
