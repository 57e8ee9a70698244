/*
 * ipc.h — messages between berthd's parent and its workers over a
 * socketpair: a 4-byte big-endian length, then one JSON object with a
 * "type" member. Either side treats a malformed message as fatal for the
 * connection (the parent restarts a worker that sends one).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_IPC_H
#define BERTH_IPC_H

#include <jansson.h>
#include <event2/bufferevent.h>

#define PX_IPC_MAX (64u * 1024 * 1024)

/* Queues obj (not consumed) on bev. 0, or -1 when it cannot be encoded. */
int px_ipc_send(struct bufferevent *, json_t *obj);
/*
 * Takes the next complete message off bev's input: 1 with *out set (the
 * caller decrefs), 0 when none is complete yet, -1 when the stream is
 * corrupt.
 */
int px_ipc_recv(struct bufferevent *, json_t **out);

#endif
