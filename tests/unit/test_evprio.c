/*
 * test_evprio.c — unit tests for proxy/edge/evprio.c: a bufferevent moved
 * between priorities while its callbacks are queued leaves libevent's
 * queues whole (libevent's own bufferevent_priority_set does not).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "evprio.h"
#include "tap.h"

#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>

#define NPRIO	5
#define LOW	4
#define MID	2

static int nread, nlate;

static void
readcb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	(void)arg;
	nread++;
}

static void
latecb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	nlate++;
}

static int
nactive(struct event_base *base)
{
	return event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE);
}

int
main(void)
{
	struct event_config *cfg;
	struct event_base *base;
	struct bufferevent *bev;
	struct event *late;
	int sv[2], i;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		skip_all("socketpair failed");
	evutil_make_socket_nonblocking(sv[0]);
	cfg = event_config_new();
	event_config_avoid_method(cfg, "select");
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base == NULL || event_base_priority_init(base, NPRIO) != 0)
		skip_all("no event base with 5 priorities");
	bev = bufferevent_socket_new(base, sv[0], BEV_OPT_DEFER_CALLBACKS);
	late = event_new(base, -1, 0, latecb, NULL);
	if (bev == NULL || late == NULL || event_priority_set(late, LOW) != 0)
		skip_all("out of memory");
	bufferevent_setcb(bev, readcb, NULL, NULL, NULL);

	is_int(px_bev_priority(bev, LOW), 0, "moved to the low priority");
	is_int(event_get_priority(&bev->ev_read), LOW, "... its read event");
	is_int(event_get_priority(&bev->ev_write), LOW, "... and its write event");
	is_int(px_bev_priority(bev, LOW), 0, "moving it again where it is: nothing to do");

	/* Its read event queued: it cannot move, and neither event does. */
	event_active(&bev->ev_read, EV_READ, 1);
	is_int(px_bev_priority(bev, MID), -1, "a queued read event: refused");
	is_int(event_get_priority(&bev->ev_read), LOW, "... the read event stays");
	is_int(event_get_priority(&bev->ev_write), LOW, "... and so does the write event");
	event_base_loop(base, EVLOOP_NONBLOCK);
	is_int(nactive(base), 0, "its queue ran");

	/* Its write event queued (the read one free): still both or neither. */
	event_active(&bev->ev_write, EV_WRITE, 1);
	is_int(px_bev_priority(bev, MID), -1, "a queued write event: refused");
	is_int(event_get_priority(&bev->ev_read), LOW, "... the read event was not moved alone");
	event_base_loop(base, EVLOOP_NONBLOCK);

	/*
	 * The case libevent gets wrong: the deferred callback (readcb) is
	 * queued, last in its queue, when the bufferevent moves; an event
	 * queued after it must still run.
	 */
	bufferevent_trigger(bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
	ok(nactive(base) == 1 && nread == 0, "the read callback is queued");
	is_int(px_bev_priority(bev, MID), 0, "moved back while it is queued");
	event_base_loop(base, EVLOOP_NONBLOCK);
	is_int(nread, 1, "the read callback ran once");
	event_active(late, EV_READ, 1);
	for (i = 0; i < 3 && nlate == 0; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	is_int(nlate, 1, "an event queued at the low priority afterwards ran");
	is_int(nactive(base), 0, "nothing is left counted as queued (the loop can wait)");
	bufferevent_trigger(bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
	event_active(late, EV_READ, 1);
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ok(nread == 2 && nlate == 2 && nactive(base) == 0, "both run again");

	event_free(late);
	bufferevent_free(bev);
	event_base_free(base);
	close(sv[0]);
	close(sv[1]);
	return done_testing();
}
