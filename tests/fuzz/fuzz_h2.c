/*
 * fuzz_h2.c — libFuzzer target for the HTTP/2 session glue (proxy/edge/h2.c)
 * with the real session layer behind it (session.c, upstream.c,
 * respond.c, route.c): client frames in, HTTP/1.1 requests to a
 * scripted upstream on loopback, its responses back out as frames.
 *
 * Each input is one client connection (loopback TCP, so that h2.c sees
 * a real peer address) on a plain transport handed to px_h2_start().
 * data[0] is flags: bits 0-1 how the client writes (all at once, 1, 7
 * or 64 bytes a turn), bit 2 the client reads nothing until it has sent
 * everything (the server's output backs up), bit 3 the client half
 * closes after sending. The client preface is put in front of the rest
 * (data[1..]), which is frames.
 *
 * The route table has custom hosts a.example.com (public) and
 * p.example.com (private; the token "tok" opens it) on the upstream's
 * port. The upstream is tests/unit/test_session.c's too
 * (tests/support/scripted_upstream.c), answering by path: /hello, /len
 * (the request body's length), /head, /204, /304, /chunked, /close,
 * /drop, /100 (100 Continue first), /big (256 KiB here: the client's
 * window matters), /upgrade (a 101 h2 must not pass on); anything else
 * gets 500.
 *
 * Invariants: the server's output is a sequence of well-formed frames
 * (SETTINGS first, each no longer than the default maximum frame size);
 * once the client is gone every h2 connection, stream session and
 * pooled upstream connection is freed within a bounded number of event
 * loop turns; ASan/UBSan/LSan see nothing.
 *
 * The seed corpus (tests/fuzz/corpus/h2/) is made by
 * tests/fuzz/h2seeds.py. FUZZ_H2_DEBUG=1 in the environment says, per
 * input, how many turns it took and how many bytes the client got.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "session.h"
#include "tls.h"
#include "h2.h"
#include "../support/scripted_upstream.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFACE		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define BIG		(256 * 1024)
#define IDLE_TURNS	40	/* turns without progress: quiescent */
#define MAX_TURNS	20000
#define OUT_MAX		(4 << 20)	/* client output kept for the check */

static struct event_base *base;
static struct px_sessenv env;
static int cl_lfd = -1;		/* the client's listener */

static void h_accepting(int on) { (void)on; }
static void h_closed(void) { }
static void h_handshakes_wait(void) { }
static void h_wake(const char *id) { (void)id; }

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "fuzz_h2: %s (errno: %s)\n", what, strerror(errno));
	abort();
}

/* Open descriptors: none may be left behind by an input. */
static int
nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}
static int fds0 = -1;

/* What the open descriptors are, for the report of a leak. */
static void
fds_show(int before)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char p[300], t[256];
	ssize_t n;

	if (d == NULL)
		return;
	fprintf(stderr, "fuzz_h2: %d descriptors open, %d before:\n", nfds(),
	    before);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		if ((n = readlink(p, t, sizeof(t) - 1)) < 0)
			continue;
		t[n] = '\0';
		fprintf(stderr, "  %s -> %s\n", e->d_name, t);
	}
	closedir(d);
}

/* ---- the scripted upstream (tests/support) ---- */

static unsigned up_port;

/* ---- the client's output: frames ---- */

static uint8_t *cout;
static size_t coutlen;

/* The server's bytes must be whole frames, SETTINGS first (the last
 * frame may be cut short when the client stopped reading). */
static void
check_frames(void)
{
	size_t off = 0;

	if (coutlen >= 9 && cout[3] != 0x4)
		die("the server's first frame is not SETTINGS");
	while (off + 9 <= coutlen) {
		size_t flen = (size_t)cout[off] << 16 | (size_t)cout[off + 1] << 8 |
		    cout[off + 2];

		if (flen > 16384)
			die("a frame over the default SETTINGS_MAX_FRAME_SIZE");
		if (cout[off + 3] > 0x9)
			die("a frame of an unknown type");
		off += 9 + flen;
	}
}

/* ---- set-up ---- */

static void
setup(void)
{
	/* /upgrade sends bytes after its 101 (h2 must not pass them on);
	 * connections close with a reset: no TIME_WAIT */
	static const struct su_conf up = { BIG, 0, 0, 1 };
	char json[1024], err[256];

	signal(SIGPIPE, SIG_IGN);
	up_port = su_start(&up);
	cl_lfd = su_listen_lo(NULL);
	if ((base = event_base_new()) == NULL ||
	    event_base_priority_init(base, PX_PRIO_N) != 0)
		die("event base");
	px_sess_env_init(&env);
	env.base = base;
	env.access_fd = env.acme_fd = -1;
	snprintf(env.cfg.domain, sizeof(env.cfg.domain), "test.berth");
	env.cfg.https_port = 443;
	env.cfg.t_head = env.cfg.t_keepalive = env.cfg.t_connect = 5000;
	env.cfg.t_response = env.cfg.t_tunnel = env.cfg.t_body = 5000;
	env.cfg.t_send = env.cfg.t_drain = env.cfg.t_wake = 5000;
	env.cfg.t_retry = 300;
	env.cfg.t_wake_backoff = 1000;
	env.cfg.max_parked = 10;
	env.cfg.max_conns = env.cfg.max_conns_sandbox = 100;
	env.cfg.h2_streams = 16;
	env.cfg.h2_header_list = 16384;
	env.cfg.h2_resets = 100;
	env.hard_conns = 200;
	env.accepting = h_accepting;
	env.closed = h_closed;
	env.handshakes_wait = h_handshakes_wait;
	env.wake = h_wake;
	/* sha256("tok") */
	snprintf(json, sizeof(json), "{\"domain\":\"test.berth\",\"sandboxes\":["
	    "{\"id\":\"sb1\",\"address\":\"127.0.0.1\",\"state\":\"running\",\"ports\":["
	    "{\"port\":%u,\"host_header\":\"preserve\",\"visibility\":\"public\","
	    "\"host\":\"a.example.com\"}]},"
	    "{\"id\":\"sb2\",\"address\":\"127.0.0.1\",\"state\":\"running\",\"ports\":["
	    "{\"port\":%u,\"host_header\":\"upstream\",\"visibility\":\"private\","
	    "\"host\":\"p.example.com\"}]}],"
	    "\"tokens\":[{\"sha256\":\"1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62\"}]}",
	    up_port, up_port);
	if ((env.routes = px_routes_from_json(json, strlen(json), err, sizeof(err))) == NULL)
		die(err);
}

/* ---- one input ---- */

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *msg;
	static const size_t steps[4] = { (size_t)-1, 1, 7, 64 };
	size_t len, sent = 0, step;
	int cfd, sfd, turns = 0, idle = 0, reading, eof = 0, i;
	uint8_t flags;
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	struct px_xport *xp;

	if (base == NULL)
		setup();
	if (size < 1)
		return 0;
	flags = data[0];
	step = steps[flags & 3];
	len = sizeof(PREFACE) - 1 + size - 1;
	if ((msg = realloc(msg, len)) == NULL)
		die("out of memory");
	memcpy(msg, PREFACE, sizeof(PREFACE) - 1);
	memcpy(msg + sizeof(PREFACE) - 1, data + 1, size - 1);
	coutlen = 0;

	if ((cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    getsockname(cl_lfd, (struct sockaddr *)&a, &alen) != 0)
		die("socket");
	su_nonblock(cfd);
	/* non-blocking: libFuzzer's SIGALRM would interrupt a blocking
	 * connect (EINTR) */
	if (connect(cfd, (struct sockaddr *)&a, alen) != 0 &&
	    errno != EINPROGRESS && errno != EINTR) {
		/* the upstream connections berthd closed first sit in
		 * TIME_WAIT: at hundreds of inputs a second the ephemeral
		 * ports can run out for a while; not a finding */
		if (errno != EADDRNOTAVAIL)
			die("connect");
		close(cfd);
		return 0;
	}
	/* small writes go out at once, not held by Nagle for a delayed
	 * ACK that comes after this input is done */
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	for (i = 0; (sfd = accept(cl_lfd, NULL, NULL)) < 0; i++) {
		struct pollfd pfd = { cl_lfd, POLLIN, 0 };

		if ((errno != EAGAIN && errno != EINTR) || i > 100)
			die("accept");
		(void)poll(&pfd, 1, 100);
	}
	su_nonblock(sfd);
	if ((xp = px_xport_accept(base, sfd, PX_XPORT_PLAIN, NULL, NULL)) == NULL)
		die("px_xport_accept");
	env.nconns++;	/* counted, as the session layer counts it, for h2.c */
	px_h2_start(&env, xp, 0);

	while (++turns < MAX_TURNS && idle < IDLE_TURNS) {
		int moved = 0;
		ssize_t n;

		if (sent < len) {
			size_t k = len - sent < step ? len - sent : step;

			if ((n = write(cfd, msg + sent, k)) > 0) {
				sent += (size_t)n;
				moved = 1;
				if (sent == len && (flags & 8))
					shutdown(cfd, SHUT_WR);
			}
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		moved |= su_poll();
		reading = !(flags & 4) || sent == len;
		while (reading && !eof) {
			uint8_t rb[16384];

			if ((n = read(cfd, rb, sizeof(rb))) <= 0) {
				if (n == 0 || errno != EAGAIN)
					eof = 1;
				break;
			}
			if (coutlen + (size_t)n <= OUT_MAX) {
				if (cout == NULL && (cout = malloc(OUT_MAX)) == NULL)
					die("out of memory");
				memcpy(cout + coutlen, rb, (size_t)n);
				coutlen += (size_t)n;
			}
			moved = 1;
		}
		idle = moved ? 0 : idle + 1;
		if (turns % 1000 == 0 && getenv("FUZZ_H2_DEBUG"))
			fprintf(stderr, "turn %d sent %zu/%zu out %zu moved %d\n",
			    turns, sent, len, coutlen, moved);
	}
	check_frames();
	if (getenv("FUZZ_H2_DEBUG"))
		fprintf(stderr, "%d turns, %zu bytes out, \"hello\" %s\n", turns,
		    coutlen, coutlen && memmem(cout, coutlen, "hello", 5) ? "seen" : "not seen");

	/* the client goes; everything must be freed */
	su_close_hard(cfd);
	for (turns = 0; turns < MAX_TURNS; turns++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		su_poll();
		if (env.nconns == 0 && TAILQ_EMPTY(&env.sessions))
			break;
		if (turns == IDLE_TURNS)	/* what the upstream still holds */
			su_close_all();
	}
	if (env.nconns != 0 || !TAILQ_EMPTY(&env.sessions))
		die("a connection or session outlived its client");
	px_pool_flush(&env);
	su_close_all();
	for (turns = 0; turns < IDLE_TURNS; turns++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	if (fds0 < 0)
		fds0 = nfds();
	else if (nfds() != fds0) {
		fds_show(fds0);
		die("a descriptor outlived its input");
	}
	return 0;
}
