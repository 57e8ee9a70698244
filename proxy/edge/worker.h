/*
 * worker.h — a proxy worker: an unprivileged process with its own event
 * loop, its SO_REUSEPORT listeners, TLS contexts and route table, all
 * pushed by the parent over a socketpair. Its sessions (session.h) do
 * the HTTP work in the environment it keeps for them (env) and call
 * back through that environment's hooks.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_WORKER_H
#define BERTH_WORKER_H

#include <event2/event.h>
#include <event2/listener.h>

#include "conf.h"
#include "session.h"

struct px_worker {
	int		 id;
	int		 ipc_fd;
	struct bufferevent *ipc;
	struct evconnlistener *listeners[PX_MAX_LISTEN];
	int		 listen_https[PX_MAX_LISTEN];
	int		 nlisteners;
	int		 configured;	/* config + tls + routes received */
	struct event	*age_timer;	/* raises handshakes that waited too long */
	struct event	*drain_timer;
	struct event	*stats_timer;
	struct px_sessenv env;		/* what its sessions share */
};

int px_worker_main(int id, int ipc_fd, int *listen_fds, int *https, int n,
    int access_fd, int acme_fd);

#endif
