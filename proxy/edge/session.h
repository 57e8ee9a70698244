/*
 * session.h — the session layer: client connections through berthd and
 * what they share (struct px_sessenv: a worker's, or a unit test's).
 * The owner of an environment fills it, calls px_sess_accept() with each
 * connection and the other px_sess_* functions on its events; sessions
 * call back only through the env's hooks, so they know nothing of the
 * worker process, its IPC or its listeners.
 *
 * The part below "the layer's inside" is for the files of the layer
 * (session.c, h2.c, upstream.c, wake.c, respond.c) only. Those files are
 * one module split for reading: they call each other both ways (a
 * session hands a request to h2 or an upstream and is called back; a
 * wake parks sessions and resumes them), and that is the only place in
 * berth where files do; everywhere else a lower file never calls up,
 * and a callback or a hooks table the caller owns carries what must.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_SESSION_H
#define BERTH_SESSION_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <time.h>

#include "conf.h"
#include "http1.h"
#include "route.h"

struct event_base;
struct event;
struct bufferevent;
struct evbuffer;
struct px_tls;
struct px_xport;
struct px_sess;
struct px_up;

/* What sessions are told: the parent's config (timeouts in ms), of the
 * limits this worker's share (PX_WORKER_FIELDS, conf.h). */
#define PX_WCFG_FIELD(dir, name, field, def, share, zero) unsigned field;
struct px_wcfg {
	char		 domain[256];
	unsigned	 https_port;
	PX_WORKER_FIELDS(PX_WCFG_FIELD)
};
#undef PX_WCFG_FIELD

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
struct px_pend;
TAILQ_HEAD(px_pendlist, px_pend);
TAILQ_HEAD(px_uplist, px_up);

/* The idle upstream connections to one address:port (upstream.c). */
struct px_poolkey {
	char		 key[64];
	unsigned	 n;
	struct px_uplist idle;		/* most recently used first */
	TAILQ_ENTRY(px_poolkey) entry;
};
TAILQ_HEAD(px_pklist, px_poolkey);

#define PX_POOL_BUCKETS 256

/* Event priorities of the sessions' base (lower runs first); the owner
 * initialises the base with PX_PRIO_N of them. */
#define PX_PRIO_N	5
#define PX_PRIO_TIMER	0	/* the timers that keep the others fair */
#define PX_PRIO_NORMAL	2	/* libevent's default for N = 5 */
#define PX_PRIO_BULK	3	/* slow exchanges, when many */
#define PX_PRIO_HANDSHAKE 4
#define PX_BULK_BATCH	32	/* bulk or handshake callbacks between polls */
#define PX_SLOW_MS	200	/* an exchange this old in transit is slow */
#define PX_SLOW_CALM	16	/* slow exchanges at once that are no attack */
#define PX_HS_AGE_MS	50	/* then a handshake runs at PX_PRIO_NORMAL */
#define PX_HS_CALM	2	/* handshakes at once that are no flood */

/* What the sessions of one event loop share. */
struct px_sessenv {
	struct event_base *base;
	struct px_tls	*tls;
	struct px_routes *routes;
	struct px_wcfg	 cfg;
	int		 access_fd;	/* -1: off */
	int		 acme_fd;	/* directory, -1: none */
	unsigned	 nconns;		/* sessions, over-limit ones included */
	unsigned	 hard_conns;	/* accept pauses here (max_conns + slack) */
	unsigned	 nhs;		/* TLS handshakes in progress */
	unsigned	 nhs_low;	/* TLS handshakes waiting at low priority */
	unsigned	 nslow;		/* sessions in a slow exchange */
	unsigned	 nbulk;		/* sessions at PX_PRIO_BULK */
	int		 draining;
	struct px_stats	 stats;
	struct px_sesslist sessions;
	struct px_pendlist pending;	/* accepted, no byte yet (no session) */
	struct px_pklist pool[PX_POOL_BUCKETS];
	unsigned	 pool_idle;
	/* the owner's hooks (none may be NULL) */
	void		(*accepting)(int on);	/* pause (0) or resume accepting */
	void		(*closed)(void);	/* a session ended */
	void		(*handshakes_wait)(void); /* some wait at low priority:
						 * px_sess_age_handshakes soon */
	void		(*wake)(const char *id);	/* wake sandbox id */
};

/* Readies env's lists; the owner sets the rest. */
void px_sess_env_init(struct px_sessenv *);
/* A new client connection on fd (https: 0, 1 or PX_LISTEN_FLEET). Until
 * its first byte arrives it holds an event and its address only (about
 * 0.25 KB): the session, its buffers and the SSL come with that byte, so
 * idle connections that never send one cost little. It counts in nconns
 * from here, and the request head's deadline runs from the accept. */
void px_sess_accept(struct px_sessenv *, int fd, struct sockaddr *, int socklen,
    int https);
/* The same over a transport already made (tls.h): tests pass a plain
 * one on a socketpair with https 1, h2.c one end of a pair per stream.
 * The session, or NULL (the transport freed). */
struct px_sess *px_sess_start(struct px_sessenv *, struct px_xport *,
    const struct sockaddr *, int socklen, int https);
/* Closes idle sessions and lets the rest finish (hard: closes all). */
void px_sess_drain_all(struct px_sessenv *, int hard);
/* Raises handshakes that waited PX_HS_AGE_MS to the normal priority. */
void px_sess_age_handshakes(struct px_sessenv *);
/* The answer to env->wake(id) (wake.c). */
void px_sess_woken(struct px_sessenv *, const char *id, int ok, const char *reason);
/* The SNI hook (px_tls_set_sni_hook; arg: the env): a TLS client named
 * host, sess the session whose handshake it is (or NULL); wakes its
 * sandbox early if that is safe (wake.c). */
void px_sess_sni(void *env, void *sess, const char *host);
/* Frees the idle upstream connections (upstream.c). */
void px_pool_flush(struct px_sessenv *);

/* ---- the layer's inside (session.c, upstream.c, wake.c, respond.c) ---- */

#define PX_HIWAT	(256 * 1024)
#define PX_LOWAT	(64 * 1024)
#define PX_PAIR_HIWAT	(16 * 1024)	/* responses to an h2 stream (h2.c) */

enum sess_state {
	S_HEAD,		/* waiting for / reading a request head */
	S_BODY,		/* forwarding the request body */
	S_WAIT,		/* request sent, waiting for the response */
	S_TUNNEL,	/* after 101: raw bytes both ways */
	S_PARK,		/* waiting for the sandbox to wake */
	S_CLOSING,	/* flushing the last bytes, then free */
};

struct px_up {
	struct px_sessenv *env;
	struct bufferevent *bev;
	char		 key[64];	/* address:port */
	struct px_sess	*s;		/* NULL while idle in the pool */
	int		 connected;
	int		 reused;
	int		 pooled;	/* idle, on a pool list */
	int		 tls;		/* to another host's fleet listener */
	int		 bulk;		/* its events run at PX_PRIO_BULK */
	int		 bevread;	/* the bufferevent reads (TLS, tunnels) */
	struct event	*rev;		/* or this event does (px_up_rd) */
	struct timeval	 rtmo;		/* its timeout; zero: none */
	struct px_poolkey *pk;		/* while pooled */
	TAILQ_ENTRY(px_up) entry;
};

struct px_sess {
	struct px_sessenv *w;
	struct px_xport	*xp;		/* the client's transport (tls.h) */
	struct bufferevent *c;		/* its bufferevent */
	int		 https;
	char		 peer[INET6_ADDRSTRLEN];
	char		 peer_port[8];
	enum sess_state	 state;
	struct event	*timer;		/* head deadline / keep-alive idle / retry */
	int		 timer_kind;

	/* the exchange in progress */
	struct px_head	 req, resp;
	enum px_body_kind req_kind, resp_kind;
	uint64_t	 req_left, resp_left;
	struct px_chunk	 req_ch, resp_ch;
	int		 req_done, resp_done, resp_head_sent;
	int		 resp_reframe;	/* close-delimited → chunked to client */
	int		 close_after;
	int		 upgrade;
	int		 client_eof;	/* tunnel: client done, flushing upstream */
	int		 logged;	/* this exchange has its access-log line */
	int		 sni_woke;	/* its TLS server name started a wake */
	char		 fleet_peer[40];/* fleet listener: the peer host */
	int		 fleet_back;	/* ... this request goes back to it */
	int		 busy;		/* inside a callback: free later */
	int		 dead;
	int		 handed;	/* its connection went on under h2.c,
					   which took over its count */
	struct px_routes *routes;
	struct px_route_match m;
	struct px_sbstat *sb;		/* counted in sb->conns while set */
	struct px_up	*up;
	int		 replayable;
	int		 tries;
	struct timespec	 t0, t_up;
	struct timespec	 t_resp;	/* the response's first byte (Server-Timing) */
	uint64_t	 bytes_in, bytes_out;
	int		 status;
	const struct px_hdr *auth_used;	/* Authorization carrying our token */
	int		 cookie_used;	/* our cookie carried the token */
	char		 reqid[20];
	struct px_sbstat *park;		/* set while parked there */
	struct timespec	 t_park;
	long		 wake_ms;	/* -1: not woken for this request */
	int		 woken;
	int		 over;		/* accepted past the limit: 503 only */
	int		 hs_low;	/* TLS handshake at low priority (w->nhs_low) */
	int		 hs;		/* TLS handshake in progress (w->nhs) */
	int		 slow;		/* in a slow exchange (w->nslow) */
	int		 bulk;		/* its events run at PX_PRIO_BULK */
	struct px_sbstat *active;	/* counted in active->active while set */
	TAILQ_ENTRY(px_sess) park_entry;
	TAILQ_ENTRY(px_sess) entry;
};

enum { T_NONE, T_HEAD, T_IDLE, T_RETRY, T_WAKE };	/* s->timer_kind */

/* session.c */
void px_tv_ms(struct timeval *, unsigned ms);
/* Milliseconds since t (CLOCK_MONOTONIC); -1 if t is unset. */
long px_ms_since(const struct timespec *t);
uint64_t px_now_ms(void);
void px_sess_timer_set(struct px_sess *, int kind, unsigned ms);
void px_sess_timer_clear(struct px_sess *);
/* The one function that frees a session (later if inside a callback). */
void px_sess_free(struct px_sess *);
/* One client connection of w's fewer (h2.c's end too): resumes accepting
 * if that was paused at the hard limit, and tells the owner. */
void px_sess_conns_dec(struct px_sessenv *);
/* Ends one exchange and gets ready for the next request (keep-alive). */
void px_sess_next(struct px_sess *);
/* Routes the request just read (again after a wake). */
void px_sess_route(struct px_sess *);

/* respond.c */
/*
 * Answers the current request with an error page (HTML for browsers,
 * JSON otherwise) naming the sandbox and the reason; extra_hdrs: whole
 * header lines, or NULL. The connection closes afterwards unless the
 * request was fully read and the error leaves the stream in sync.
 */
void px_respond_error(struct px_sess *, int status, const char *reason,
    const char *extra_hdrs);
/* The exchange's access log line and counters. */
void px_respond_log(struct px_sess *);
/* Writes one access log line to fd (respond.c; h2.c for the answers it
 * makes itself): NULL or empty fields are "-", the query is left out. */
void px_access_line(int fd, const char *peer, const char *host, size_t hostlen,
    const char *sandbox, unsigned port, const char *method, size_t mlen,
    const char *target, size_t tlen, int status, unsigned long long bytes,
    long up_ms, long total_ms, const char *reqid);

/* upstream.c */
struct px_up *px_up_new(struct px_sessenv *, const char *key,
    const char *fleet_host);
void px_up_free(struct px_up *);
/* Starts (on) or stops reading the upstream. */
void px_up_rd(struct px_up *, int on);
/* The upstream's read (rt) and write (wt) timeouts; NULL: none. */
void px_up_timeouts(struct px_up *, const struct timeval *rt,
    const struct timeval *wt);
/* Moves the upstream's events to priority prio; -1: one is queued. */
int px_up_prio(struct px_up *, int prio);
/* An idle connection to key, or NULL. */
struct px_up *px_pool_get(struct px_sessenv *, const char *key);
/* Keeps u (its response complete) for the next request, or frees it. */
void px_pool_put(struct px_up *);

#endif
