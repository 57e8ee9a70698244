/*
 * agentio.h — the parent's end of one connection to a guest agent (its
 * socket, which it alone holds) and the one-way copy of what the guest
 * sends toward the guest agents' reader (agentd.c): a pipe whose read
 * end is all the reader gets. The reader parses the guest's bytes; the
 * parent copies them without looking. A reader that wants to write to a
 * guest has nothing to write on: a pipe's read end takes no write.
 *
 * Backpressure: the parent holds at most PX_AGENTIO_HELD bytes it read
 * from the guest and the pipe has not taken; past that it stops reading
 * the guest until the pipe drained (the reader stops reading when the
 * parent has not acknowledged its output: helper.h HM_AGENT_WINDOW), so
 * the guest's writes block as they did when the reader read its socket.
 * The guest's end closing reaches the reader as the pipe's end, after
 * every byte the guest sent before it.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_AGENTIO_H
#define BERTH_AGENTIO_H

#include <stddef.h>

struct event_base;
struct evbuffer;

#define PX_AGENTIO_HELD	(64 * 1024)

struct px_agentio_cbs {
	/* what was queued toward the guest is written (may be NULL) */
	void	(*written)(void *arg);
	/* a write to the guest failed: its end is gone */
	void	(*lost)(void *arg);
	void	*arg;
};

struct px_agentio;

/* Takes sock (connected, the guest agent's; closed by free) and makes
 * the pipe; *reader is its read end, the caller's to pass on and close.
 * NULL (sock closed) when out of memory or descriptors. */
struct px_agentio *px_agentio_new(struct event_base *, int sock,
    int *reader, const struct px_agentio_cbs *);
/* Bytes toward the guest: append frames here. */
struct evbuffer *px_agentio_output(struct px_agentio *);
/* Bytes read from the guest that the pipe has not taken yet. */
size_t px_agentio_held(const struct px_agentio *);
/* Closes the guest's connection (both ways, at once) and the pipe. */
void px_agentio_free(struct px_agentio *);

#endif
