/*
 * worker.h — a proxy worker: an unprivileged process with its own event
 * loop, its SO_REUSEPORT listeners, TLS contexts and route table, all
 * pushed by the parent over a socketpair. Sessions (session.c) do the
 * HTTP work; this file's functions are the worker's shared state.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_WORKER_H
#define BERTH_WORKER_H

#include <stdint.h>
#include <sys/queue.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "conf.h"

struct px_tls;
struct px_routes;
struct px_sess;
struct px_up;

struct px_wcfg {
	char		 domain[256];
	unsigned	 https_port;
	unsigned	 t_head, t_keepalive, t_connect, t_response, t_tunnel;
	unsigned	 t_drain, t_retry, t_wake, t_wake_backoff;
	unsigned	 t_body, t_send;
	unsigned	 max_parked;
	unsigned	 max_conns, max_conns_sandbox;	/* this worker's share */
	unsigned	 max_req_sandbox, rate_sandbox;	/* this worker's share */
};

struct px_stats {
	uint64_t	 requests;
	uint64_t	 status[6];		/* by class: 1xx..5xx, [0] other */
	uint64_t	 bytes_in, bytes_out;
	uint64_t	 upstream_errors;
	uint64_t	 rejected;		/* parse errors */
	uint64_t	 conns_total;
	uint64_t	 overload;		/* refused at a limit */
};

TAILQ_HEAD(px_sesslist, px_sess);
TAILQ_HEAD(px_uplist, px_up);

/* The idle upstream connections to one address:port (session.c). */
struct px_poolkey {
	char		 key[64];
	unsigned	 n;
	struct px_uplist idle;		/* most recently used first */
	TAILQ_ENTRY(px_poolkey) entry;
};
TAILQ_HEAD(px_pklist, px_poolkey);

#define PX_POOL_BUCKETS 256

/* Event priorities of a worker's base (lower runs first). */
#define PX_PRIO_N	5
#define PX_PRIO_TIMER	0	/* the timers that keep the others fair */
#define PX_PRIO_NORMAL	2	/* libevent's default for N = 5 */
#define PX_PRIO_BULK	3	/* slow exchanges, when many (session.c) */
#define PX_PRIO_HANDSHAKE 4
#define PX_BULK_BATCH	32	/* bulk or handshake callbacks between polls */
#define PX_SLOW_MS	200	/* an exchange this old in transit is slow */
#define PX_SLOW_CALM	16	/* slow exchanges at once that are no attack */
#define PX_HS_AGE_MS	50	/* then a handshake runs at PX_PRIO_NORMAL */
#define PX_HS_CALM	2	/* handshakes at once that are no flood */

struct px_worker {
	int		 id;
	struct event_base *base;
	int		 ipc_fd;
	struct bufferevent *ipc;
	struct evconnlistener *listeners[PX_MAX_LISTEN];
	int		 listen_https[PX_MAX_LISTEN];
	int		 nlisteners;
	struct px_tls	*tls;
	struct px_routes *routes;
	struct px_wcfg	 cfg;
	int		 configured;	/* config + tls + routes received */
	int		 access_fd;	/* -1: off */
	int		 acme_fd;	/* directory, -1: none */
	unsigned	 nconns;		/* sessions, over-limit ones included */
	unsigned	 hard_conns;	/* accept pauses here (max_conns + slack) */
	unsigned	 nhs;		/* TLS handshakes in progress */
	unsigned	 nhs_low;	/* TLS handshakes waiting at low priority */
	struct event	*age_timer;	/* raises handshakes that waited too long */
	unsigned	 nslow;		/* sessions in a slow exchange */
	unsigned	 nbulk;		/* sessions at PX_PRIO_BULK */
	int		 draining;
	struct event	*drain_timer;
	struct event	*stats_timer;
	struct px_stats	 stats;
	struct px_sesslist sessions;
	struct px_pklist pool[PX_POOL_BUCKETS];
	unsigned	 pool_idle;
};

extern struct px_worker *px_w;

/* worker.c */
int px_worker_main(int id, int ipc_fd, int *listen_fds, int *https, int n,
    int access_fd, int acme_fd);
void px_worker_maybe_exit(void);
/* Arms the timer that raises handshakes waiting at low priority. */
void px_worker_age_timer(void);
/* Pauses (0) or resumes (1) accepting, at the connection limit. */
void px_worker_accepting(int on);

/* session.c */
void px_sess_accept(struct px_worker *, int fd, struct sockaddr *, int socklen,
    int https);
void px_sess_drain_all(struct px_worker *, int hard);
/* Raises handshakes that waited PX_HS_AGE_MS to the normal priority. */
void px_sess_age_handshakes(struct px_worker *);
/* The parent's answer to a wake request for sandbox id. */
void px_sess_woken(struct px_worker *, const char *id, int ok, const char *reason);
/* A TLS client named host (SNI): wakes its sandbox early if that is
 * safe. sess: the session whose handshake it is, or NULL. */
void px_sess_sni(void *sess, const char *host);
/* Asks the parent to wake sandbox id (worker.c). */
void px_worker_wake(const char *id);
/* Upstream pool: idle keep-alive connections per guest address:port. */
void px_pool_flush(struct px_worker *);

#endif
