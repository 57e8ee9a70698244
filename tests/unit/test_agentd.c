/*
 * test_agentd.c — unit tests for proxy/privsep/agentd.c, the guest agent reader
 * helper, run in a child process as berthd runs it (minus the jail): a
 * socketpair stands for the guest agent's socket, passed as the parent
 * passes it, and this process plays both the guest (writing frames,
 * whole, split byte by byte, malformed) and the parent (reading the
 * helper's typed messages, acknowledging output). Checked: frames before
 * the pong carrying the nonce are dropped; output comes in pieces of at
 * most HM_AGENT_CHUNK, never more than HM_AGENT_WINDOW unacknowledged
 * (the rest comes after the acknowledgement); exit lines are parsed
 * strictly; a refusal's status and text; an oversized frame or an
 * unknown exit line is a protocol error that closes the guest's
 * connection; the guest closing is told; the parent's close closes it.
 * Those run on an agent of protocol 1 (its pong is the nonce alone);
 * protocol 2 (a protocol byte after the nonce) adds a channel to every
 * frame: passed on with the output, exit, refusal (429 too) and stdin
 * acknowledgement, also when split byte by byte; a frame too short to
 * hold its channel is a protocol error.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "helper.h"
#include "log.h"
#include "proc.h"
#include "tap.h"
#include "agent_proto.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <event2/event.h>

/* the messages the helper sent, in order */
struct msg {
	uint32_t type;
	size_t len;
	unsigned char *p;
};
#define QMAX 256
static struct msg q[QMAX];
static int qn, qhead, chan_closed;
static struct event_base *base;
static struct px_chan *ch;

static void
on_msg(struct px_chan *c, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	(void)c;
	(void)fds;
	(void)nfds;
	(void)arg;
	if (qn == QMAX)
		return;
	q[qn].type = type;
	q[qn].len = len;
	q[qn].p = malloc(len + 1);
	memcpy(q[qn].p, p, len);
	qn++;
	event_base_loopbreak(base);
}

static void
on_close(struct px_chan *c, int corrupt, void *arg)
{
	(void)c;
	(void)corrupt;
	(void)arg;
	chan_closed = 1;
	event_base_loopbreak(base);
}

/* The next message, waiting up to ms; NULL when none came. */
static struct msg *
next(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (qhead == qn) {
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return qhead < qn ? &q[qhead++] : NULL;
}

static void
guest_write(int fd, const void *p, size_t len)
{
	const unsigned char *b = p;
	ssize_t n;

	while (len > 0) {
		n = write(fd, b, len);
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = { fd, POLLOUT, 0 };

			/* the helper reads only as the parent takes */
			if (poll(&pfd, 1, 100) == 0)
				event_base_loop(base, EVLOOP_NONBLOCK);
			continue;
		}
		if (n <= 0)
			return;
		b += n;
		len -= (size_t)n;
	}
}

static void
frame(int fd, int type, const void *p, size_t len)
{
	unsigned char h[BA_HDR];

	ba_hdr_put(h, (uint32_t)len, type);
	guest_write(fd, h, sizeof(h));
	if (len > 0)
		guest_write(fd, p, len);
}

static const unsigned char nonce[HM_AGENT_NONCE] = "n0nce-42";

/* A new connection: returns the guest's end, the helper holding the
 * other. */
static int
conn(uint64_t id)
{
	struct hm_agent_conn m;
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.id = id;
	memcpy(m.nonce, nonce, sizeof(m.nonce));
	px_chan_send(ch, HM_AGENT_CONN, &m, sizeof(m), &sp[1], 1);
	close(sp[1]);
	return sp[0];
}

static void
ack(uint64_t id, uint32_t bytes)
{
	struct hm_agent_ack m;

	memset(&m, 0, sizeof(m));
	m.id = id;
	m.bytes = bytes;
	px_chan_send(ch, HM_AGENT_ACK, &m, sizeof(m), NULL, 0);
}

static int
is_type(struct msg *m, uint32_t type, uint64_t id)
{
	uint64_t got;

	if (m == NULL || m->len < sizeof(got) || m->type != type)
		return 0;
	memcpy(&got, m->p, sizeof(got));
	return got == id;
}

/* The guest's end sees its connection closed (EOF) within ms. */
static int
guest_closed(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	char b[64];

	while (poll(&pfd, 1, ms) > 0) {
		ssize_t n = read(fd, b, sizeof(b));

		if (n == 0)
			return 1;
		if (n < 0)
			return errno == ECONNRESET;
	}
	return 0;
}

static void
exit_line(int g, uint64_t id, const char *line, int want_ok, int exited,
    int val, int timed_out)
{
	struct hm_agent_exit e;
	struct msg *m;

	frame(g, BA_EXIT, line, strlen(line));
	m = next(5000);
	if (!want_ok) {
		ok(is_type(m, HM_AGENT_ERROR, id), "exit line '%s': a protocol "
		    "error", line);
		return;
	}
	if (!ok(is_type(m, HM_AGENT_EXIT, id) && m->len == sizeof(e),
	    "exit line '%s': an exit", line))
		return;
	memcpy(&e, m->p, sizeof(e));
	ok(e.exited == exited && (exited ? e.code : e.signal) == val &&
	    e.timed_out == timed_out, "... %s %d%s", exited ? "exit" : "signal",
	    val, timed_out ? ", timed out" : "");
}

/* A new connection past its pong of protocol 2: the guest's end. */
static int
conn2(uint64_t id)
{
	unsigned char pong[HM_AGENT_NONCE + 1];
	int g = conn(id);
	struct msg *m;

	memcpy(pong, nonce, HM_AGENT_NONCE);
	pong[HM_AGENT_NONCE] = BA_PROTO;
	frame(g, BA_PONG, pong, sizeof(pong));
	/* an earlier connection's close may come first */
	while ((m = next(5000)) != NULL && m->type == HM_AGENT_CLOSED)
		;
	if (!is_type(m, HM_AGENT_PONG, id))
		diag("no pong on connection %llu", (unsigned long long)id);
	return g;
}

/* A frame of type on channel chan with text: the message it gives. */
static struct msg *
chan_text(int g, int type, uint32_t chan, const char *text, size_t len)
{
	unsigned char f[BA_CHAN + 4200];

	ba_put32(f, chan);
	memcpy(f + BA_CHAN, text, len);
	frame(g, type, f, BA_CHAN + len);
	return next(5000);
}

int
main(void)
{
	int sp[2], g, st, i;
	pid_t pid, wpid;
	struct msg *m;
	unsigned char *big;
	size_t got, pieces, maxpiece;
	uint64_t id = 1;

	signal(SIGPIPE, SIG_IGN);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) != 0) {
		perror("socketpair");
		return 1;
	}
	if ((pid = fork()) == 0) {
		close(sp[0]);
		log_init("agentd", 0);
		_exit(px_agentd_main(sp[1]));
	}
	close(sp[1]);
	base = event_base_new();
	ch = px_chan_new(base, sp[0], on_msg, on_close, NULL);
	ok(base != NULL && ch != NULL, "the helper runs, a channel to it");

	/* ---- the ping's answer ---- */
	g = conn(id);
	frame(g, BA_STDOUT, "old", 3);		/* an older talk's */
	frame(g, BA_EXIT, "exit 0", 6);
	frame(g, BA_PONG, "wrong-no", 8);
	frame(g, BA_PONG, nonce, 7);		/* short */
	ok(next(300) == NULL, "frames before the pong, and a wrong pong, "
	    "are dropped");
	frame(g, BA_PONG, nonce, sizeof(nonce));
	m = next(5000);
	ok(is_type(m, HM_AGENT_PONG, id) && m->len ==
	    sizeof(struct hm_agent_pong) && memcmp(m->p + 8, nonce, 8) == 0,
	    "the pong with the nonce: HM_AGENT_PONG");
	frame(g, BA_PONG, nonce, sizeof(nonce));	/* a ping sent again */
	ok(next(200) == NULL, "a second pong: nothing");

	/* ---- output ---- */
	frame(g, BA_STDOUT, "hello", 5);
	m = next(5000);
	ok(is_type(m, HM_AGENT_OUTPUT, id) && m->len ==
	    sizeof(struct hm_agent_output) + 5 &&
	    ((struct hm_agent_output *)m->p)->stream == BA_STDOUT &&
	    ((struct hm_agent_output *)m->p)->len == 5 &&
	    memcmp(m->p + sizeof(struct hm_agent_output), "hello", 5) == 0,
	    "5 bytes of stdout: one output message");
	ack(id, 5);
	/* a frame split byte by byte */
	{
		unsigned char f[BA_HDR + 3];

		ba_hdr_put(f, 3, BA_STDERR);
		memcpy(f + BA_HDR, "err", 3);
		for (i = 0; i < (int)sizeof(f); i++) {
			guest_write(g, f + i, 1);
			event_base_loop(base, EVLOOP_NONBLOCK);
			usleep(2000);
		}
		got = 0;
		while ((m = next(5000)) != NULL && is_type(m, HM_AGENT_OUTPUT, id)) {
			struct hm_agent_output o;

			memcpy(&o, m->p, sizeof(o));
			got += o.len;
			if (o.stream != BA_STDERR)
				break;
			if (got == 3)
				break;
		}
		ok(got == 3, "a stderr frame written byte by byte comes whole "
		    "(%zu bytes)", got);
		ack(id, 3);
	}
	/* 256 KiB in one frame: pieces of at most 32 KiB, 128 KiB at most
	 * unacknowledged */
	big = malloc(BA_MAX_PAYLOAD);
	for (i = 0; i < BA_MAX_PAYLOAD; i++)
		big[i] = (unsigned char)(i * 7);
	/* written by a child: the helper takes it only as it is acked */
	if ((wpid = fork()) == 0) {
		frame(g, BA_STDOUT, big, BA_MAX_PAYLOAD);
		_exit(0);
	}
	got = pieces = maxpiece = 0;
	while (got < HM_AGENT_WINDOW && (m = next(5000)) != NULL) {
		struct hm_agent_output o;

		if (!is_type(m, HM_AGENT_OUTPUT, id))
			break;
		memcpy(&o, m->p, sizeof(o));
		if (memcmp(m->p + sizeof(o), big + got, o.len) != 0)
			break;
		got += o.len;
		pieces++;
		if (o.len > maxpiece)
			maxpiece = o.len;
	}
	is_int((long long)got, HM_AGENT_WINDOW, "a 256 KiB frame: the helper "
	    "stops at the 128 KiB window");
	ok(maxpiece <= HM_AGENT_CHUNK, "... in pieces of at most 32 KiB "
	    "(%zu, the largest %zu)", pieces, maxpiece);
	ok(next(300) == NULL, "... and nothing more before it is "
	    "acknowledged");
	ack(id, (uint32_t)got);
	while (got < BA_MAX_PAYLOAD && (m = next(5000)) != NULL &&
	    is_type(m, HM_AGENT_OUTPUT, id)) {
		struct hm_agent_output o;

		memcpy(&o, m->p, sizeof(o));
		if (memcmp(m->p + sizeof(o), big + got, o.len) != 0)
			break;
		got += o.len;
		ack(id, o.len);
	}
	is_int((long long)got, BA_MAX_PAYLOAD, "... acknowledged, the rest "
	    "comes, the same bytes");
	waitpid(wpid, &st, 0);
	free(big);

	/* ---- exits and refusals ---- */
	exit_line(g, id, "exit 0", 1, 1, 0, 0);
	exit_line(g, id, "exit 255", 1, 1, 255, 0);
	exit_line(g, id, "signal 9 timeout", 1, 0, 9, 1);
	frame(g, BA_FAIL, "400 no user 'x\001'", strlen("400 no user 'x\001'"));
	m = next(5000);
	if (ok(is_type(m, HM_AGENT_FAIL, id) && m->len ==
	    sizeof(struct hm_agent_fail), "F \"400 ...\": a refusal")) {
		struct hm_agent_fail f;

		memcpy(&f, m->p, sizeof(f));
		is_int(f.status, 400, "... the request's fault (400)");
		is_str(f.msg, "no user 'x?'", "... its text, printable");
	}
	frame(g, BA_FAIL, "busy", 4);
	m = next(5000);
	ok(is_type(m, HM_AGENT_FAIL, id) &&
	    ((struct hm_agent_fail *)m->p)->status == 0,
	    "F without a status: the agent's (0)");
	exit_line(g, id, "exit 256", 0, 0, 0, 0);
	ok(guest_closed(g, 2000), "... and the guest's connection closed");
	close(g);

	/* more bad exit lines, each on a connection of its own */
	{
		static const char *const bad[] = { "exit", "exit -1", "exit 01",
		    "signal 0", "exit 3 timeout ", "exit 3x", "quit 3",
		    "signal 128" };

		for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
			g = conn(++id);
			frame(g, BA_PONG, nonce, sizeof(nonce));
			m = next(5000);
			if (!is_type(m, HM_AGENT_PONG, id)) {
				ok(0, "pong");
				continue;
			}
			exit_line(g, id, bad[i], 0, 0, 0, 0);
			close(g);
		}
	}

	/* ---- framing limits, ends ---- */
	g = conn(++id);
	{
		unsigned char h[BA_HDR];

		ba_hdr_put(h, BA_MAX_PAYLOAD + 1, BA_STDOUT);
		guest_write(g, h, sizeof(h));
	}
	m = next(5000);
	ok(is_type(m, HM_AGENT_ERROR, id) && strstr((char *)m->p + 8,
	    "a frame of 262145 bytes") != NULL,
	    "a frame over 256 KiB, even before the pong: a protocol error");
	ok(guest_closed(g, 2000), "... the guest's connection closed");
	close(g);

	g = conn(++id);
	frame(g, BA_PONG, nonce, sizeof(nonce));
	m = next(5000);
	ok(is_type(m, HM_AGENT_PONG, id), "a new connection: pong");
	close(g);
	m = next(5000);
	ok(is_type(m, HM_AGENT_CLOSED, id), "the guest closes: HM_AGENT_CLOSED");

	g = conn(++id);
	{
		struct hm_agent_id c = { id };

		px_chan_send(ch, HM_AGENT_CLOSE, &c, sizeof(c), NULL, 0);
	}
	event_base_loop(base, EVLOOP_NONBLOCK);
	ok(guest_closed(g, 2000), "the parent's close: the helper closes "
	    "its end");
	close(g);

	/* ---- protocol 2: channels ---- */
	g = conn(++id);
	{
		unsigned char pong[HM_AGENT_NONCE + 1];

		memcpy(pong, nonce, HM_AGENT_NONCE);
		pong[HM_AGENT_NONCE] = BA_PROTO + 1;	/* none we know */
		frame(g, BA_PONG, pong, sizeof(pong));
		ok(next(300) == NULL, "a pong of protocol %d is not ours",
		    BA_PROTO + 1);
		pong[HM_AGENT_NONCE] = 2;
		frame(g, BA_PONG, pong, sizeof(pong));
	}
	m = next(5000);
	ok(is_type(m, HM_AGENT_PONG, id) && m->len ==
	    sizeof(struct hm_agent_pong) &&
	    ((struct hm_agent_pong *)m->p)->proto == 2,
	    "... the nonce and protocol byte 2: HM_AGENT_PONG, protocol 2");
	{
		unsigned char f[BA_CHAN + 16];
		struct hm_agent_output o;
		struct hm_agent_exit e;
		struct hm_agent_fail fl;
		struct hm_agent_inack ia;

		ba_put32(f, 7);
		memcpy(f + BA_CHAN, "seven", 5);
		frame(g, BA_STDOUT, f, BA_CHAN + 5);
		m = next(5000);
		if (ok(is_type(m, HM_AGENT_OUTPUT, id) && m->len ==
		    sizeof(o) + 5, "stdout on channel 7: an output message")) {
			memcpy(&o, m->p, sizeof(o));
			ok(o.chan == 7 && o.len == 5 &&
			    memcmp(m->p + sizeof(o), "seven", 5) == 0,
			    "... of channel 7, its 5 bytes");
		}
		ack(id, 5);
		/* a channel frame split byte by byte */
		{
			unsigned char w[BA_HDR + BA_CHAN + 6];

			ba_hdr_put(w, BA_CHAN + 6, BA_EXIT);
			ba_put32(w + BA_HDR, 9);
			memcpy(w + BA_HDR + BA_CHAN, "exit 3", 6);
			for (i = 0; i < (int)sizeof(w); i++) {
				guest_write(g, w + i, 1);
				event_base_loop(base, EVLOOP_NONBLOCK);
				usleep(1000);
			}
		}
		m = next(5000);
		if (ok(is_type(m, HM_AGENT_EXIT, id), "an exit of channel 9, "
		    "written byte by byte")) {
			memcpy(&e, m->p, sizeof(e));
			ok(e.chan == 9 && e.exited && e.code == 3,
			    "... channel 9, exit 3");
		}
		ba_put32(f, 3);
		memcpy(f + BA_CHAN, "429 too many", 12);
		frame(g, BA_FAIL, f, BA_CHAN + 12);
		m = next(5000);
		if (ok(is_type(m, HM_AGENT_FAIL, id), "a refusal on channel "
		    "3")) {
			memcpy(&fl, m->p, sizeof(fl));
			ok(fl.chan == 3 && fl.status == 429 &&
			    strcmp(fl.msg, "too many") == 0,
			    "... 429, its text");
		}
		ba_put32(f, 5);
		ba_put32(f + BA_CHAN, 70000);
		frame(g, BA_STDIN_ACK, f, BA_CHAN + 4);
		m = next(5000);
		if (ok(is_type(m, HM_AGENT_INACK, id) && m->len == sizeof(ia),
		    "'a' on channel 5: HM_AGENT_INACK")) {
			memcpy(&ia, m->p, sizeof(ia));
			ok(ia.chan == 5 && ia.bytes == 70000,
			    "... channel 5, 70000 bytes taken");
		}
		frame(g, BA_STDIN_ACK, f, BA_CHAN + 3);
		m = next(5000);
		ok(is_type(m, HM_AGENT_ERROR, id), "a stdin acknowledgement "
		    "of 3 bytes: a protocol error");
		close(g);
	}
	g = conn(++id);
	{
		unsigned char pong[HM_AGENT_NONCE + 1];

		memcpy(pong, nonce, HM_AGENT_NONCE);
		pong[HM_AGENT_NONCE] = BA_PROTO;
		frame(g, BA_PONG, pong, sizeof(pong));
		m = next(5000);
		ok(is_type(m, HM_AGENT_PONG, id), "protocol 2 again");
		frame(g, BA_EXIT, "ex", 2);
		m = next(5000);
		ok(is_type(m, HM_AGENT_ERROR, id) && strstr((char *)m->p + 8,
		    "without its channel") != NULL,
		    "a frame shorter than its channel: a protocol error");
		ok(guest_closed(g, 2000), "... the guest's connection closed");
		close(g);
	}

	/* ---- directory entries ('N') and watch events ('Y') ---- */
	g = conn2(++id);
	{
		static const char ent[] = "file 644 12 1700000000123 a b\xff";
		struct hm_agent_entry en;
		struct hm_agent_event ev;
		char path[BA_EVENT_PATH + 40];

		m = chan_text(g, BA_ENTRY, 4, ent, sizeof(ent) - 1);
		if (ok(is_type(m, HM_AGENT_ENTRY, id) && m->len == sizeof(en),
		    "'N' on channel 4: HM_AGENT_ENTRY")) {
			memcpy(&en, m->p, sizeof(en));
			ok(en.chan == 4 && en.type == HM_FT_FILE &&
			    en.mode == 0644 && en.size == 12 &&
			    en.mtime_ms == 1700000000123LL && en.namelen == 4 &&
			    memcmp(en.name, "a b\xff", 4) == 0 &&
			    en.bytes == sizeof(ent) - 1,
			    "... file, mode 0644, 12 bytes, its mtime, the name "
			    "'a b\\xff' as it was, its frame's bytes");
		}
		m = chan_text(g, BA_ENTRY, 4, "dir 7777 0 0 d", 14);
		ok(is_type(m, HM_AGENT_ENTRY, id) &&
		    ((struct hm_agent_entry *)m->p)->type == HM_FT_DIR &&
		    ((struct hm_agent_entry *)m->p)->mode == 07777,
		    "a directory, mode 7777");
		m = chan_text(g, BA_EVENT, 6, "move_to 0 42 /w/x y", 19);
		if (ok(is_type(m, HM_AGENT_EVENT, id) && m->len ==
		    sizeof(ev) + 6, "'Y' on channel 6: HM_AGENT_EVENT and the "
		    "path")) {
			memcpy(&ev, m->p, sizeof(ev));
			ok(ev.chan == 6 && ev.event == HM_EV_MOVE_TO &&
			    ev.dir == 0 && ev.cookie == 42 && ev.pathlen == 6 &&
			    memcmp(m->p + sizeof(ev), "/w/x y", 6) == 0,
			    "... move_to, a file, cookie 42, the path with its "
			    "space");
		}
		m = chan_text(g, BA_EVENT, 6, "ready 1 0 /w", 12);
		ok(is_type(m, HM_AGENT_EVENT, id) &&
		    ((struct hm_agent_event *)m->p)->event == HM_EV_READY &&
		    ((struct hm_agent_event *)m->p)->dir == 1, "ready, a "
		    "directory");
		/* the longest path there may be */
		memcpy(path, "overflow 0 0 /", 14);
		memset(path + 14, 'p', BA_EVENT_PATH - 1);
		m = chan_text(g, BA_EVENT, 6, path, 13 + BA_EVENT_PATH);
		ok(is_type(m, HM_AGENT_EVENT, id) &&
		    ((struct hm_agent_event *)m->p)->pathlen == BA_EVENT_PATH,
		    "an event with a path of %d bytes", BA_EVENT_PATH);
		close(g);
	}
	{
		static const struct { int type; const char *text, *what; } bad[] = {
			{ BA_ENTRY, "file 644 1 1 a/b", "a name with '/'" },
			{ BA_ENTRY, "file 644 1 1 ", "an empty name" },
			{ BA_ENTRY, "file 648 1 1 a", "a mode not octal" },
			{ BA_ENTRY, "file 17777 1 1 a", "a mode over 7777" },
			{ BA_ENTRY, "door 644 1 1 a", "an unknown type" },
			{ BA_ENTRY, "file 644 -1 1 a", "a negative size" },
			{ BA_EVENT, "create 0 0 rel", "a relative path" },
			{ BA_EVENT, "explode 0 0 /x", "an unknown event" },
			{ BA_EVENT, "create 2 0 /x", "dir not 0 or 1" },
			{ BA_EVENT, "create 0 4294967296 /x", "a cookie over 32 "
			    "bits" },
			{ BA_EVENT, "create 0 0", "no path" },
		};
		char path[BA_EVENT_PATH + 40];
		size_t k;

		for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			g = conn2(++id);
			m = chan_text(g, bad[k].type, 2, bad[k].text,
			    strlen(bad[k].text));
			ok(is_type(m, HM_AGENT_ERROR, id), "'%c' with %s: a "
			    "protocol error", bad[k].type, bad[k].what);
			close(g);
		}
		g = conn2(++id);
		memcpy(path, "create 0 0 /", 12);
		memset(path + 12, 'p', BA_EVENT_PATH);
		m = chan_text(g, BA_EVENT, 2, path, 12 + BA_EVENT_PATH);
		ok(is_type(m, HM_AGENT_ERROR, id), "an event path of %d bytes: "
		    "a protocol error", BA_EVENT_PATH + 1);
		close(g);
		g = conn2(++id);
		{
			unsigned char f[BA_CHAN + 8] = { 0, 0, 0, 2, 'f', 'i',
			    'l', 'e' };

			f[BA_CHAN + 4] = '\0';
			frame(g, BA_ENTRY, f, BA_CHAN + 5);
			m = next(5000);
			ok(is_type(m, HM_AGENT_ERROR, id), "an entry with a NUL: "
			    "a protocol error");
		}
		close(g);
	}

	/* the parent going away ends the helper */
	px_chan_free(ch);
	ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0, "the channel closed: the helper exits 0");
	return done_testing();
}
