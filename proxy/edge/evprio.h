/*
 * evprio.h — moving a bufferevent between the worker's event priorities
 * without corrupting libevent's queues.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_EVPRIO_H
#define BERTH_EVPRIO_H

struct bufferevent;

/* Moves bev's read and write events to prio: both or neither. Returns -1
 * when one of them is queued to run (libevent cannot move it then): try
 * again later. Its deferred callbacks keep their priority. */
int	px_bev_priority(struct bufferevent *bev, int prio);

#endif
