/*
 * wake.c — see wake.h. A sandbox's wake state is made the first time a
 * wake concerns it (on this worker, or the parent's answer to another's)
 * and lives as long as its counters.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "session.h"
#include "wake.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

struct px_wake {
	TAILQ_HEAD(, px_sess) parked;	/* sessions waiting, in arrival order */
	unsigned	 nparked;
	int		 waking;	/* a wake was asked for */
	int		 awake;		/* woken since the last route table: it runs */
	uint64_t	 wake_t0_ms;	/* when the wake in progress was asked for */
	long		 last_wake_ms;	/* how long the last wake took */
	uint64_t	 fail_until_ms;	/* after a failed wake: answer 503 until */
	char		 fail_reason[200];
	uint64_t	 wakes, wake_failures;
};

/* st's wake state, made if need be; NULL: out of memory. */
static struct px_wake *
wake_of(struct px_sbstat *st)
{
	if (st->wake == NULL && (st->wake = calloc(1, sizeof(*st->wake))) != NULL)
		TAILQ_INIT(&st->wake->parked);
	return st->wake;
}

/* Asks the owner to wake st's sandbox; one wake at a time serves all. */
static void
wake_start(struct px_sessenv *env, struct px_sbstat *st, struct px_wake *wk)
{
	wk->waking = 1;
	wk->wakes++;
	wk->wake_t0_ms = px_now_ms();
	env->wake(st->id);
}

/*
 * The sandbox sleeps: keep the request (and its connection) and ask the
 * parent to wake it, once for all requests waiting. A failed wake makes
 * further requests fail fast until the back-off passes, so a broken
 * sandbox is not resumed over and over.
 */
void
px_wake_park(struct px_sess *s)
{
	struct px_sbstat *st = s->m.sb->stat;
	struct px_wake *wk = wake_of(st);
	char why[300];

	if (wk == NULL) {
		snprintf(why, sizeof(why), "sandbox %s is asleep and berthd is out of memory",
		    s->m.sandbox);
		px_respond_error(s, 503, why, "Retry-After: 5\r\n");
		return;
	}
	if (wk->fail_until_ms > px_now_ms()) {
		snprintf(why, sizeof(why), "sandbox %s could not be woken: %s",
		    s->m.sandbox, wk->fail_reason);
		px_respond_error(s, 503, why, "Retry-After: 5\r\n");
		return;
	}
	if (wk->nparked >= s->w->cfg.max_parked || s->w->draining) {
		snprintf(why, sizeof(why), "sandbox %s is waking and too many requests wait for it",
		    s->m.sandbox);
		px_respond_error(s, 503, why, "Retry-After: 1\r\n");
		return;
	}
	s->state = S_PARK;
	s->park = st;
	TAILQ_INSERT_TAIL(&wk->parked, s, park_entry);
	wk->nparked++;
	clock_gettime(CLOCK_MONOTONIC, &s->t_park);
	bufferevent_disable(s->c, EV_READ);
	px_sess_timer_set(s, T_WAKE, s->w->cfg.t_wake);
	if (!wk->waking)
		wake_start(s->w, st, wk);
}

void
px_wake_unpark(struct px_sess *s)
{
	struct px_wake *wk = s->park->wake;

	TAILQ_REMOVE(&wk->parked, s, park_entry);
	wk->nparked--;
	s->park = NULL;
}

void
px_wake_timeout(struct px_sess *s)
{
	char why[256];

	px_wake_unpark(s);
	snprintf(why, sizeof(why), "sandbox %s did not wake within %u ms",
	    s->m.sandbox, s->w->cfg.t_wake);
	s->state = S_WAIT;	/* not S_HEAD: the page closes if a body waits */
	px_respond_error(s, 503, why, "Retry-After: 5\r\n");
}

int
px_wake_awake(const struct px_sbstat *st)
{
	return st->wake != NULL && st->wake->awake;
}

void
px_wake_sni_took(struct px_sess *s)
{
	struct px_wake *wk = s->m.sb->stat->wake;

	/* the wake its handshake started ended before this request */
	if (s->wake_ms < 0 && wk != NULL && !wk->waking)
		s->wake_ms = wk->last_wake_ms;
	s->sni_woke = 0;
}

void
px_wake_routes_changed(void)
{
	struct px_sbstat *st;

	for (st = px_sbstat_first(); st != NULL; st = st->next)
		if (st->wake != NULL)
			st->wake->awake = 0;	/* the table says what runs now */
}

void
px_sess_woken(struct px_sessenv *w, const char *id, int ok, const char *reason)
{
	struct px_sbstat *st = px_sbstat_get(id);
	struct px_wake *wk;
	struct px_sess *s;

	if (st == NULL || (wk = wake_of(st)) == NULL)
		return;
	wk->waking = 0;
	if (!ok) {
		wk->wake_failures++;
		wk->fail_until_ms = px_now_ms() + w->cfg.t_wake_backoff;
		snprintf(wk->fail_reason, sizeof(wk->fail_reason), "%s",
		    reason ? reason : "unknown error");
	} else {
		wk->fail_until_ms = 0;
		wk->awake = 1;
		wk->last_wake_ms = (long)(px_now_ms() - wk->wake_t0_ms);
	}
	while ((s = TAILQ_FIRST(&wk->parked)) != NULL) {
		px_wake_unpark(s);
		px_sess_timer_clear(s);
		if (!ok) {
			char why[300];

			snprintf(why, sizeof(why), "sandbox %s could not be woken: %s", id,
			    wk->fail_reason);
			s->state = S_WAIT;
			px_respond_error(s, 503, why, "Retry-After: 5\r\n");
			continue;
		}
		s->wake_ms = s->sni_woke ? wk->last_wake_ms : px_ms_since(&s->t_park);
		s->sni_woke = 0;
		s->woken = 1;
		s->state = S_HEAD;
		px_sess_route(s);	/* with the routes that say it runs */
	}
}

/*
 * Wake on connect: a TLS client that names a public port of a paused or
 * suspended sandbox is about to ask it for something, so its wake starts
 * now and runs while the handshake finishes (berthd closes idle client
 * connections long before the idle policy pauses a sandbox, so a request
 * for a sleeping one always comes on a new connection). Only where a
 * request would wake it anyway: a known, public route of a local
 * sandbox, not in a wake back-off. Private ports wait for the request
 * and its token; unknown names wake nothing.
 */
void
px_sess_sni(void *arg, void *sess, const char *host)
{
	struct px_sessenv *env = arg;
	struct px_route_match m;
	struct px_sbstat *st;
	struct px_wake *wk;
	struct px_sess *s;

	if (env->routes == NULL || env->draining ||
	    px_route_lookup(env->routes, host, strlen(host), &m) != PX_ROUTE_OK)
		return;
	st = m.sb->stat;
	if (m.port->private_ || m.sb->remote || st == NULL ||
	    (strcmp(m.sb->state, "paused") != 0 &&
	    strcmp(m.sb->state, "suspended") != 0))
		return;
	if ((wk = wake_of(st)) == NULL || wk->waking || wk->awake ||
	    wk->fail_until_ms > px_now_ms())
		return;
	wake_start(env, st, wk);
	/* its first response says how long the wake took (Server-Timing),
	 * even if the wake ended before the request came */
	if ((s = sess) != NULL)
		s->sni_woke = 1;
	log_debug("%s: %s: TLS server name %s wakes it", __func__, m.sandbox, host);
}
