/*
 * evprio.c — moving a bufferevent between event priorities.
 *
 * libevent 2.1's bufferevent_priority_set() also moves the bufferevent's
 * deferred callback (the one that runs its read, write and event
 * callbacks) without checking whether that callback is queued. A queued
 * one is then unlinked from a queue it is not on: the queue it is on
 * keeps a tail pointer into it, and the next event queued there is lost.
 * libevent still counts lost events as active, so the loop polls without
 * waiting, forever, and never runs them: a worker at 100% CPU whose
 * clients hang. berthd raised handshakes and moved slow exchanges with
 * it, and a handshake flood under load ended that way.
 *
 * px_bev_priority moves the two socket events only, each of which libevent
 * refuses to move while queued. The deferred callbacks stay at the
 * priority libevent gives them (the middle one, PX_PRIO_NORMAL): the work
 * that a priority is meant to hold back (handshakes, TLS reads and
 * writes) runs in the socket events.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "evprio.h"

#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>

int
px_bev_priority(struct bufferevent *bev, int prio)
{
	int old;

	if (bev->ev_read.ev_base == NULL)
		return 0;	/* a pair's (h2.c): no events of its own */
	old = event_get_priority(&bev->ev_read);
	if (old == prio && event_get_priority(&bev->ev_write) == prio)
		return 0;
	if (event_priority_set(&bev->ev_read, prio) != 0)
		return -1;
	if (event_priority_set(&bev->ev_write, prio) != 0) {
		(void)event_priority_set(&bev->ev_read, old);	/* not queued: cannot fail */
		return -1;
	}
	return 0;
}
