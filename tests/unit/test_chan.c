/*
 * test_chan.c — unit tests for proxy/privsep/chan.c, the parent<->helper
 * channel: messages keep their type, length and bytes, in order, with the
 * descriptors they carry (usable on the other side); a large message
 * passes whole; a datagram that is not a well-formed message (shorter
 * than a header, a header whose length disagrees) ends the channel as
 * corrupt; the peer going away ends it as closed; a message over the
 * limit is refused at the sender. Heartbeats: a ping is answered by the
 * channel itself with a pong of its number (on_msg sees neither), the
 * pinging end gets pongs; a ping sent to the pinging end, a pong to an
 * end that never pinged, or either with a wrong length, is corrupt. The
 * heartbeat's bookkeeping (px_beat) calls a ping unanswered by the next
 * tick missed, and a pong of a number never sent a lie.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "proc.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/event.h>

static struct event_base *base;
static int nmsg, closed, corrupt;
static uint32_t last_type;
static size_t last_len;
static unsigned char last[4096];
static int fdok;
static int npong;
static uint64_t last_pong;

static void
on_pong(struct px_chan *ch, uint64_t seq, void *arg)
{
	npong++;
	last_pong = seq;
	event_base_loopbreak(base);
}

static void
on_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	char buf[8] = "";

	nmsg++;
	last_type = type;
	last_len = len;
	memcpy(last, p, len < sizeof(last) ? len : sizeof(last));
	fdok = 0;
	if (nfds == 1 && read(fds[0], buf, 5) == 5 && memcmp(buf, "hello", 5) == 0)
		fdok = 1;
	if (len >= 64 * 1024 || nmsg == 3)
		event_base_loopbreak(base);
}

static void
on_close(struct px_chan *ch, int bad, void *arg)
{
	closed++;
	corrupt = bad;
	event_base_loopbreak(base);
}

static void
run(void)
{
	struct timeval tv = { 2, 0 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

int
main(void)
{
	int sp[2], pp[2];
	struct px_chan *a, *b;
	unsigned char *big;
	uint32_t raw[2];

	base = event_base_new();
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "socketpair");
	a = px_chan_new(base, sp[0], on_msg, on_close, NULL);
	b = px_chan_new(base, sp[1], on_msg, on_close, NULL);
	ok(a != NULL && b != NULL, "two ends");

	/* three messages, one with a descriptor */
	ok(pipe(pp) == 0 && write(pp[1], "hello", 5) == 5, "a pipe with bytes in it");
	is_int(px_chan_send(a, 7, "abc", 3, NULL, 0), 0, "send type 7");
	is_int(px_chan_send(a, 8, "", 0, NULL, 0), 0, "send an empty one");
	is_int(px_chan_send(a, 9, "xyz", 3, &pp[0], 1), 0, "send one with the pipe");
	close(pp[0]);	/* dup'ed by the channel */
	run();
	is_int(nmsg, 3, "three messages arrive");
	ok(last_type == 9 && last_len == 3 && memcmp(last, "xyz", 3) == 0,
	    "the last one whole, in order");
	ok(fdok, "its descriptor reads the pipe's bytes on the other side");
	close(pp[1]);

	/* a large one */
	big = malloc(512 * 1024);
	memset(big, 'q', 512 * 1024);
	is_int(px_chan_send(a, 10, big, 512 * 1024, NULL, 0), 0, "send 512 KiB");
	run();
	ok(last_type == 10 && last_len == 512 * 1024, "it arrives whole");
	is_int(px_chan_send(a, 11, big, PX_PROC_MSG_MAX + 1, NULL, 0), -1,
	    "over the limit: refused at the sender");
	free(big);

	/* not a message: a header whose length lies */
	raw[0] = 12;
	raw[1] = 100;
	ok(send(sp[0], raw, sizeof(raw) + 0, 0) == (ssize_t)sizeof(raw),
	    "a raw datagram: header says 100 bytes, none follow");
	run();
	ok(closed == 1 && corrupt == 1, "ends the channel as corrupt");
	px_chan_free(b);
	px_chan_free(a);

	/* the peer goes away */
	closed = corrupt = 0;
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "another pair");
	b = px_chan_new(base, sp[1], on_msg, on_close, NULL);
	close(sp[0]);
	run();
	ok(closed == 1 && corrupt == 0, "the peer closing ends it, not corrupt");
	px_chan_free(b);

	/* shorter than a header */
	closed = corrupt = 0;
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "a third pair");
	b = px_chan_new(base, sp[1], on_msg, on_close, NULL);
	ok(send(sp[0], "xy", 2, 0) == 2, "two bytes");
	run();
	ok(closed == 1 && corrupt == 1, "shorter than a header: corrupt");
	px_chan_free(b);
	close(sp[0]);

	/* heartbeats */
	closed = corrupt = nmsg = 0;
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "a pair for pings");
	a = px_chan_new(base, sp[0], on_msg, on_close, NULL);	/* the parent */
	b = px_chan_new(base, sp[1], on_msg, on_close, NULL);	/* a helper */
	px_chan_on_pong(a, on_pong);
	is_int(px_chan_ping(a, 41), 0, "ping 41");
	run();
	ok(npong == 1 && last_pong == 41, "the pong of 41 comes back");
	ok(nmsg == 0 && closed == 0, "neither end's on_msg saw the ping or pong");
	is_int(px_chan_ping(a, 42), 0, "ping 42");
	run();
	ok(npong == 2 && last_pong == 42, "and of 42");
	is_int(px_chan_send(b, PX_CHAN_PING, "\0\0\0\0\0\0\0\1", 8, NULL, 0), 0,
	    "the helper pings the parent");
	run();
	ok(closed == 1 && corrupt == 1, "a ping to the pinging end is corrupt");
	px_chan_free(b);
	px_chan_free(a);

	closed = corrupt = 0;
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "another pair");
	a = px_chan_new(base, sp[0], on_msg, on_close, NULL);
	b = px_chan_new(base, sp[1], on_msg, on_close, NULL);
	is_int(px_chan_send(a, PX_CHAN_PONG, "\0\0\0\0\0\0\0\1", 8, NULL, 0), 0,
	    "a pong nobody asked for");
	run();
	ok(closed == 1 && corrupt == 1, "is corrupt at an end that does not ping");
	px_chan_free(b);
	px_chan_free(a);

	closed = corrupt = 0;
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "another pair");
	a = px_chan_new(base, sp[0], on_msg, on_close, NULL);
	b = px_chan_new(base, sp[1], on_msg, on_close, NULL);
	is_int(px_chan_send(a, PX_CHAN_PING, "abc", 3, NULL, 0), 0,
	    "a ping of 3 bytes");
	run();
	ok(closed == 1 && corrupt == 1, "is corrupt");
	px_chan_free(b);
	px_chan_free(a);

	{
		struct px_beat bt;
		uint64_t seq = 0;

		px_beat_reset(&bt);
		ok(px_beat_tick(&bt, 0, &seq) == PX_BEAT_PING && seq == 1,
		    "first tick: ping 1");
		is_int(px_beat_tick(&bt, 0, &seq), PX_BEAT_MISSED,
		    "unanswered by the next: missed");
		px_beat_reset(&bt);
		ok(px_beat_tick(&bt, 0, &seq) == PX_BEAT_PING && seq == 1,
		    "after a restart: ping 1");
		is_int(px_beat_pong(&bt, 1), 0, "pong 1");
		ok(px_beat_tick(&bt, 0, &seq) == PX_BEAT_PING && seq == 2,
		    "answered: ping 2");
		is_int(px_beat_pong(&bt, 3), -1, "a pong of a number never sent: a lie");
		is_int(px_beat_pong(&bt, 0), -1, "so is 0");
		is_int(px_beat_pong(&bt, 1), 0, "a late pong of 1 is no answer to 2");
		is_int(px_beat_tick(&bt, 1, &seq), PX_BEAT_WAIT,
		    "unanswered, its messages unread here: one more interval");
		is_int(px_beat_tick(&bt, 1, &seq), PX_BEAT_MISSED,
		    "but only one per ping: missed");
		px_beat_reset(&bt);
		(void)px_beat_tick(&bt, 0, &seq);
		is_int(px_beat_tick(&bt, 1, &seq), PX_BEAT_WAIT, "ping 1 waits");
		is_int(px_beat_pong(&bt, 1), 0, "then is answered");
		ok(px_beat_tick(&bt, 1, &seq) == PX_BEAT_PING && seq == 2, "ping 2");
		is_int(px_beat_tick(&bt, 1, &seq), PX_BEAT_WAIT,
		    "which may wait once too");
	}
	{
		/* px_chan_pending: a message unread is seen */
		ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "a pair");
		a = px_chan_new(base, sp[0], on_msg, on_close, NULL);
		b = px_chan_new(base, sp[1], on_msg, on_close, NULL);
		is_int(px_chan_pending(b), 0, "nothing pending");
		is_int(px_chan_send(a, 7, "x", 1, NULL, 0), 0, "a message");
		is_int(px_chan_pending(b), 1, "pending before the loop reads it");
		is_int(px_chan_pending(NULL), 0, "no channel: nothing pending");
		px_chan_free(b);
		px_chan_free(a);
	}
	event_base_free(base);
	return done_testing();
}
