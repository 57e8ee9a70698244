/*
 * proc.h — berthd's untrusted-input helpers, as relayd's proc.c does
 * them: the parent (root) keeps the store, the VMM and netlink; each
 * helper (the guests' DNS resolver, the NFLOG reader, the TCP control
 * listener, the guest agents' reader) is berthd itself, exec'd afresh
 * (so it holds none of the parent's memory: no keys, no store),
 * chrooted in the empty root-owned directory the workers use, under a
 * uid of its own (helper_uid_range: no helper or worker can signal
 * another) in `user`'s group, with an empty capability bounding set,
 * no_new_privs and not dumpable. It talks to
 * the parent over typed messages on a SOCK_SEQPACKET socketpair (a fixed
 * header, a payload whose layout the type fixes, up to PX_PROC_FDS
 * descriptors). Descriptors it needs but could not open itself (a port
 * 53 socket, the NFLOG netlink socket) come from the parent in messages.
 * A helper that dies is logged and started again with backoff; nothing
 * else stops. A malformed message from a helper ends that helper, and so
 * does a missed heartbeat: the parent pings each helper every heartbeat
 * interval, the helper's channel answers from its event loop, and one
 * that has not answered by the next ping (stopped, or wedged) is killed
 * and restarted as if it had died.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_PROC_H
#define BERTH_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;

#define PX_PROC_MSG_MAX	(1024 * 1024)	/* payload bytes */
#define PX_PROC_FDS	4

struct px_chan;

/* One message: type, payload (len bytes), fds (owned by the callee
 * only for the call: it dups or closes what it keeps; the rest are
 * closed after it returns). */
typedef void (*px_chan_msg_cb)(struct px_chan *, uint32_t type,
    const void *p, size_t len, int *fds, int nfds, void *arg);
/* The other end went away, or sent something malformed (corrupt 1). */
typedef void (*px_chan_close_cb)(struct px_chan *, int corrupt, void *arg);

struct px_chan *px_chan_new(struct event_base *, int fd, px_chan_msg_cb,
    px_chan_close_cb, void *arg);
void px_chan_free(struct px_chan *);
/* Queues one message (fds are dup'ed: the caller keeps its own). 0, or
 * -1 when it is too big or memory ran out. */
int px_chan_send(struct px_chan *, uint32_t type, const void *p, size_t len,
    const int *fds, int nfds);
/* Writes what is queued, blocking up to ms (a helper about to exit). */
void px_chan_flush(struct px_chan *, int ms);

/*
 * Heartbeats. PX_CHAN_PING and PX_CHAN_PONG carry a uint64_t sequence
 * number and no descriptor; the channel handles them itself, never
 * on_msg: an end answers a ping with a pong of the same number at once
 * (from its own event loop, so the answer proves that loop turns),
 * unless it is the end that pings (px_chan_on_pong), which gets pongs
 * instead and finds a ping malformed, as any end finds a pong it did
 * not ask for by px_chan_on_pong, or either with a wrong length.
 */
#define PX_CHAN_PING	0x7fffff01u
#define PX_CHAN_PONG	0x7fffff02u
typedef void (*px_chan_pong_cb)(struct px_chan *, uint64_t seq, void *arg);
void px_chan_on_pong(struct px_chan *, px_chan_pong_cb);
/* Queues a ping; as px_chan_send. */
int px_chan_ping(struct px_chan *, uint64_t seq);
/* 1 when a message from the peer waits unread (0 if c is NULL). */
int px_chan_pending(struct px_chan *);

/*
 * The heartbeat's bookkeeping, the same for helpers (proc.c) and workers
 * (berthd.c). At each tick, px_beat_tick says: PX_BEAT_PING, send the
 * ping it numbered *seq; PX_BEAT_MISSED, the last ping went unanswered
 * (the caller kills the process); or PX_BEAT_WAIT when it went
 * unanswered but pending says the process's messages wait unread on our
 * side (this loop was the slow one: the answer may be among them), once
 * per ping. px_beat_pong takes an answer: 0, or -1 for a number never
 * sent (a peer that lies).
 */
struct px_beat {
	uint64_t	 sent, acked;
	int		 waited;
};
enum { PX_BEAT_PING, PX_BEAT_MISSED, PX_BEAT_WAIT };
static inline void
px_beat_reset(struct px_beat *b)
{
	b->sent = b->acked = 0;
	b->waited = 0;
}
static inline int
px_beat_tick(struct px_beat *b, int pending, uint64_t *seq)
{
	if (b->acked != b->sent) {
		if (pending && !b->waited) {
			b->waited = 1;
			return PX_BEAT_WAIT;
		}
		return PX_BEAT_MISSED;
	}
	b->waited = 0;
	*seq = ++b->sent;
	return PX_BEAT_PING;
}
static inline int
px_beat_pong(struct px_beat *b, uint64_t seq)
{
	if (seq > b->sent || seq == 0)
		return -1;
	if (seq > b->acked)
		b->acked = seq;
	return 0;
}

/* ---- the parent ---- */

/*
 * Where helpers (and workers) are jailed; set once by berthd's main:
 * each runs as a uid of its own, uid_base + its slot below (uid_count of
 * them, checked by the caller against PX_UID_WORKER(workers)), all in
 * group gid; heartbeat_ms: how often the parent pings each (0: never).
 */
void px_proc_setup(const char *root, uid_t uid_base, unsigned uid_count,
    gid_t gid, int drop, unsigned heartbeat_ms);
/* The uid slots: one fixed per helper, then one per worker. */
enum { PX_UID_CONTROL, PX_UID_AGENT, PX_UID_DNS, PX_UID_NFLOG,
	PX_UID_HELPERS = 8 };
#define PX_UID_WORKER(i)	(PX_UID_HELPERS + (unsigned)(i))
/* The uid of a slot (the caller's own when nothing is dropped). */
uid_t px_proc_uid(unsigned slot);
unsigned px_proc_heartbeat_ms(void);
/* fork() for a helper or a worker: the child starts with no signal
 * blocked or handled and gets SIGTERM when the parent dies (it exits
 * at once if the parent is already gone). Returns as fork() does. */
pid_t px_proc_fork(void);
/* Closes every descriptor but stdin/out/err and keep[]. */
void px_proc_close_fds(const int *keep, int nkeep);
/* chroot, empty bounding set, drop to slot's uid and the gid (fatal on
 * failure). */
void px_proc_jail(const char *what, unsigned slot);

struct px_proc;
struct px_proc_def {
	const char	*name;		/* "dns": title "berthd: dns" */
	unsigned	 uid_slot;	/* PX_UID_DNS: its own, no other's */
	/* a new helper runs: send it what it needs (its state) */
	void		(*on_start)(struct px_proc *, void *arg);
	px_chan_msg_cb	 on_msg;	/* a message from the helper */
	void		*arg;
};
/* Starts the helper (exec of berthd with BERTH_HELPER=name). */
struct px_proc *px_proc_start(struct event_base *, const struct px_proc_def *);
/* cb(pr, def's arg) when the helper died (reaped, its restart
 * scheduled): what it was doing fails at once. */
void px_proc_on_exit(struct px_proc *, void (*cb)(struct px_proc *, void *));
int px_proc_send(struct px_proc *, uint32_t type, const void *p, size_t len,
    const int *fds, int nfds);
pid_t px_proc_pid(const struct px_proc *);
unsigned long long px_proc_restarts(const struct px_proc *);
/* SIGCHLD: reaps the helpers that exited (logged, restart scheduled);
 * leaves every other child alone (libvmm reaps its own). */
void px_proc_sigchld(void);
/* berth_helper_up and berth_helper_restarts_total, for /metrics. */
struct evbuffer;
void px_proc_metrics(struct evbuffer *);
/* Stops every helper (SIGTERM) and restarts none. */
void px_proc_stop_all(void);
/* Kills the helper sending a malformed message (it is restarted). */
void px_proc_bad(struct px_proc *, const char *why);

/* ---- a helper ---- */

/* A helper's name (BERTH_HELPER's first field) and its entry point. */
struct px_helper {
	const char *name;
	int (*main)(int chan_fd);
};
/* Called first thing in main: when this process is a helper
 * (BERTH_HELPER), jails it and runs the one of helpers (ended by a NULL
 * name) it names; never returns then. argv is main's (its title). The
 * caller owns the list, so proc.c calls no helper's code itself. */
void px_proc_helper_main(int argc, char **argv, const struct px_helper *);
/* The helper's channel to the parent is fd PX_PROC_CHAN_FD. */
#define PX_PROC_CHAN_FD	3

/* The helpers' entry points (dnsd.c, nflogd.c, controld.c, agentd.c). */
int px_dnsd_main(int chan_fd);
int px_nflogd_main(int chan_fd);
int px_controld_main(int chan_fd);
int px_agentd_main(int chan_fd);

/* The parent's side of the control helper (controld.c): binds the
 * control API's TCP listener (addr) and the fleet's (fleet_addr: creates
 * other hosts placed here), either may be NULL, starts the helper with
 * their certificates (PEM) and relays its requests to ctl. With the
 * fleet's certificates (fleet_ca_pem, even with no fleet_addr) the
 * helper also forwards the creates placed on other hosts
 * (px_controld_forward). -1 with err. */
struct px_control;
struct px_controld_conf {
	const char	*addr, *cert_pem, *key_pem;
	const char	*fleet_addr, *fleet_ca_pem, *fleet_cert_pem,
			*fleet_key_pem;
};
int px_controld_start(struct event_base *, struct px_control *ctl,
    const struct px_controld_conf *, char *err, size_t errlen);
/* Has the helper post a create (JSON) to the fleet peer host at addr
 * (its fleet_api_listen), from this host self, over mutual TLS: done is
 * called once, always later, with the peer's status and its body as
 * the helper re-encoded it (compact JSON), or status 0 and why
 * (fleet_api.h's px_fleet_api_done_fn). -1 with err when it cannot
 * start. */
int px_controld_forward(const char *addr, const char *host, const char *self,
    const char *body, size_t len,
    void (*done)(void *, int, const char *, size_t, const char *), void *arg,
    char *err, size_t errlen);
/* SIGHUP: the fleet's new certificates, to the helper. */
void px_controld_fleet_reload(const char *ca_pem, const char *cert_pem,
    const char *key_pem);
/* Drops the relayed connections (before ctl goes). */
void px_controld_stop(void);

#endif
