/*
 * upstream.c — connections from berthd to the sandboxes (and to other
 * hosts' fleet listeners): making them, reading them, their timeouts and
 * priorities, and the pool of idle keep-alive ones per address:port.
 * What is said on them (request heads, bodies, responses) is the
 * session's business (session.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "session.h"
#include "evprio.h"
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#define PX_POOL_MAX_PER_KEY 256
#define PX_POOL_MAX	4096
#define PX_POOL_IDLE_MS	30000

/* A new upstream connection to key (address:port), not yet connected:
 * plain TCP, or with fleet_host TLS that proves both hosts' fleet
 * certificates (to that host's fleet listener). */
struct px_up *
px_up_new(struct px_sessenv *env, const char *key, const char *fleet_host)
{
	struct px_up *u;

	if ((u = calloc(1, sizeof(*u))) == NULL)
		return NULL;
	u->env = env;
	snprintf(u->key, sizeof(u->key), "%s", key);
	if (fleet_host == NULL) {
		u->bev = bufferevent_socket_new(env->base, -1,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	} else if ((u->bev = px_xport_fleet_client(env->base, fleet_host)) != NULL) {
		u->tls = 1;
		u->bevread = 1;
	}
	if (u->bev == NULL) {
		free(u);
		return NULL;
	}
	return u;
}

static unsigned
key_hash(const char *k)
{
	unsigned h = 2166136261u;

	while (*k)
		h = (h ^ (unsigned char)*k++) * 16777619u;
	return h % PX_POOL_BUCKETS;
}

/* Takes u off its key's idle list; a key left empty goes away. */
static void
pool_unlink(struct px_up *u)
{
	struct px_poolkey *pk = u->pk;

	TAILQ_REMOVE(&pk->idle, u, entry);
	u->env->pool_idle--;
	u->pooled = 0;
	u->pk = NULL;
	if (--pk->n == 0) {
		TAILQ_REMOVE(&u->env->pool[key_hash(pk->key)], pk, entry);
		free(pk);
	}
}

void
px_up_free(struct px_up *u)
{
	if (u == NULL)
		return;
	if (u->pooled)
		pool_unlink(u);
	if (u->rev != NULL)
		event_free(u->rev);
	bufferevent_free(u->bev);
	free(u);
}

static void
pool_idle_read(struct bufferevent *bev, void *arg)
{
	/* An idle upstream has nothing to say: data or EOF ends it. */
	px_up_free(arg);
}

static void
pool_idle_event(struct bufferevent *bev, short what, void *arg)
{
	px_up_free(arg);
}

/*
 * Reading from upstreams. libevent's socket bufferevent asks the kernel
 * how much is waiting (ioctl FIONREAD) before every read: a sixth of the
 * system calls of a keep-alive request. Plain upstreams are read by an
 * event of ours instead, straight into the bufferevent's input, which
 * then goes through the same callbacks. TLS upstreams (OpenSSL reads
 * them) and tunnels leave reading to the bufferevent (u->bevread).
 */
#define PX_UP_READ	65536
static char up_rbuf[PX_UP_READ];	/* one worker, one thread */

static void
up_rev(evutil_socket_t fd, short what, void *arg)
{
	struct px_up *u = arg;
	bufferevent_data_cb rcb;
	bufferevent_event_cb ecb;
	void *cbarg;
	short ev = BEV_EVENT_READING;
	ssize_t n;

	/* the session's callbacks, or the pool's while idle */
	bufferevent_getcb(u->bev, &rcb, NULL, &ecb, &cbarg);
	if (what & EV_TIMEOUT) {
		ev |= BEV_EVENT_TIMEOUT;
	} else {
		/* Read into one buffer, then copy what came: a chain sized
		 * to it costs less than reserving room for the largest read
		 * in every upstream's input (a 128 KiB chain each time). */
		n = read(fd, up_rbuf, sizeof(up_rbuf));
		if (n > 0 && evbuffer_add(bufferevent_get_input(u->bev), up_rbuf, n) != 0)
			n = -1, errno = ENOMEM;
		if (n > 0) {
			rcb(u->bev, cbarg);
			return;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		ev |= n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR;
	}
	event_del(u->rev);	/* as the bufferevent stops reading */
	ecb(u->bev, ev, cbarg);
}

/* Starts (on) or stops reading the upstream. */
void
px_up_rd(struct px_up *u, int on)
{
	if (!u->bevread && u->rev == NULL && on) {
		u->rev = event_new(u->env->base, bufferevent_getfd(u->bev),
		    EV_READ | EV_PERSIST, up_rev, u);
		if (u->rev == NULL ||
		    event_priority_set(u->rev, u->bulk ? PX_PRIO_BULK : PX_PRIO_NORMAL) != 0) {
			if (u->rev != NULL)
				event_free(u->rev);
			u->rev = NULL;
			u->bevread = 1;	/* out of memory: the slow way */
			bufferevent_set_timeouts(u->bev,
			    timerisset(&u->rtmo) ? &u->rtmo : NULL, NULL);
		}
	}
	if (u->bevread) {
		if (on)
			bufferevent_enable(u->bev, EV_READ);
		else
			bufferevent_disable(u->bev, EV_READ);
	} else if (on) {
		event_add(u->rev, timerisset(&u->rtmo) ? &u->rtmo : NULL);
	} else if (u->rev != NULL) {
		event_del(u->rev);
	}
}

/* The upstream's read (rt) and write (wt) timeouts; NULL: none. */
void
px_up_timeouts(struct px_up *u, const struct timeval *rt, const struct timeval *wt)
{
	if (u->bevread) {
		bufferevent_set_timeouts(u->bev, rt, wt);
		return;
	}
	bufferevent_set_timeouts(u->bev, NULL, wt);
	if (rt != NULL)
		u->rtmo = *rt;
	else
		timerclear(&u->rtmo);
	if (u->rev != NULL && event_pending(u->rev, EV_READ, NULL))
		event_add(u->rev, rt);
}

/* Moves the upstream's events to priority prio; -1: one is queued. */
int
px_up_prio(struct px_up *u, int prio)
{
	int old = u->bulk ? PX_PRIO_BULK : PX_PRIO_NORMAL;

	if (px_bev_priority(u->bev, prio) != 0)
		return -1;
	if (u->rev != NULL && event_priority_set(u->rev, prio) != 0) {
		(void)px_bev_priority(u->bev, old);	/* just moved: not queued */
		return -1;
	}
	u->bulk = prio == PX_PRIO_BULK;
	return 0;
}

static struct px_poolkey *
pool_key(struct px_sessenv *env, const char *key)
{
	struct px_poolkey *pk;

	TAILQ_FOREACH(pk, &env->pool[key_hash(key)], entry)
		if (strcmp(pk->key, key) == 0)
			return pk;
	return NULL;
}

void
px_pool_put(struct px_up *u)
{
	struct px_poolkey *pk = pool_key(u->env, u->key);
	struct timeval tv;

	if ((pk != NULL && pk->n >= PX_POOL_MAX_PER_KEY) ||
	    u->env->pool_idle >= PX_POOL_MAX || u->env->draining) {
		px_up_free(u);
		return;
	}
	if (pk == NULL) {
		if ((pk = calloc(1, sizeof(*pk))) == NULL) {
			px_up_free(u);
			return;
		}
		snprintf(pk->key, sizeof(pk->key), "%s", u->key);
		TAILQ_INIT(&pk->idle);
		TAILQ_INSERT_HEAD(&u->env->pool[key_hash(pk->key)], pk, entry);
	}
	u->s = NULL;
	u->reused = 1;
	u->pooled = 1;
	if (u->bulk)
		(void)px_up_prio(u, PX_PRIO_NORMAL);	/* or its next session's sess_prio */
	u->pk = pk;
	TAILQ_INSERT_HEAD(&pk->idle, u, entry);
	pk->n++;
	u->env->pool_idle++;
	bufferevent_setcb(u->bev, pool_idle_read, NULL, pool_idle_event, u);
	px_tv_ms(&tv, PX_POOL_IDLE_MS);
	px_up_timeouts(u, &tv, NULL);
	bufferevent_disable(u->bev, EV_WRITE);
	px_up_rd(u, 1);
}

struct px_up *
px_pool_get(struct px_sessenv *env, const char *key)
{
	struct px_poolkey *pk = pool_key(env, key);
	struct px_up *u;

	if (pk == NULL)
		return NULL;
	u = TAILQ_FIRST(&pk->idle);
	pool_unlink(u);
	return u;
}

void
px_pool_flush(struct px_sessenv *w)
{
	struct px_poolkey *pk;
	int i;

	/* freeing a key's last connection frees the key */
	for (i = 0; i < PX_POOL_BUCKETS; i++)
		while ((pk = TAILQ_FIRST(&w->pool[i])) != NULL)
			px_up_free(TAILQ_FIRST(&pk->idle));
}

