/*
 * test_session.c — the session layer (session.c, upstream.c, wake.c,
 * respond.c) over the stand-in transport: the client is one end of a
 * socketpair (a plain px_xport on the other, treated as the https
 * listener), the upstream a scripted server on a loopback socket polled
 * from the same loop. No worker, no parent, no OpenSSL handshake:
 * keep-alive, pipelining, 100-continue, HEAD/204/304, chunked
 * re-framing, upgrade, backpressure, errors and a wake.
 * Every wait is bounded (WAIT_MS); nothing sleeps.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "session.h"
#include "tls.h"
#include "wake.h"
#include "tap.h"
#include "../support/scripted_upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#define WAIT_MS	5000
#define DOMAIN	"test.berth"
#define BIG	(32 * 1024 * 1024)	/* a body larger than all the buffers */

static struct event_base *base;
static struct px_sessenv env;
static int nclosed, nopened;
static char woke[64];

static void h_accepting(int on) { (void)on; }
static void h_closed(void) { nclosed++; }
static void h_handshakes_wait(void) { }
static void h_wake(const char *id) { snprintf(woke, sizeof(woke), "%s", id); }

#define now_ms px_now_ms	/* the layer's clock (session.c) */

/* ---- a growing byte buffer ---- */

struct buf {
	char	*p;
	size_t	 len, cap;
};

static void
buf_add(struct buf *b, const char *d, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		if ((b->p = realloc(b->p, b->cap)) == NULL)
			abort();
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
buf_clear(struct buf *b)
{
	b->len = 0;
	if (b->p != NULL)
		b->p[0] = '\0';
}

/* ---- the scripted upstream (tests/support) ---- */

static unsigned up_port;

/* ---- the client: one end of a socketpair ---- */

static int cfd = -1;
static struct buf cin;		/* what the client received */
static int ceof;

static void
client_open(void)
{
	struct sockaddr_in peer;
	struct px_xport *xp;
	int sv[2];

	if (cfd >= 0)
		close(cfd);
	buf_clear(&cin);
	ceof = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		abort();
	su_nonblock(sv[0]);
	su_nonblock(sv[1]);
	cfd = sv[0];
	nopened++;
	memset(&peer, 0, sizeof(peer));
	peer.sin_family = AF_INET;
	peer.sin_port = htons(40000);
	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((xp = px_xport_accept(base, sv[1], PX_XPORT_PLAIN, NULL, NULL)) == NULL)
		abort();
	px_sess_start(&env, xp, (struct sockaddr *)&peer, sizeof(peer), 1);
}

static void
client_send(const char *s)
{
	size_t n = strlen(s), off = 0;
	uint64_t t0 = now_ms();

	while (off < n && now_ms() - t0 < WAIT_MS) {
		ssize_t w = write(cfd, s + off, n - off);

		if (w > 0)
			off += (size_t)w;
		event_base_loop(base, EVLOOP_NONBLOCK);
		su_poll();
	}
}

/* One turn of everything; reads what the client got if it reads. */
static void
turn(int reading)
{
	char rb[65536];
	ssize_t n;

	event_base_loop(base, EVLOOP_NONBLOCK);
	su_poll();
	while (reading && (n = read(cfd, rb, sizeof(rb))) > 0)
		buf_add(&cin, rb, (size_t)n);
	if (reading && n == 0)
		ceof = 1;
}

/* Turns until the client received needle (or EOF, or WAIT_MS); 1 if it
 * did. */
static int
client_wait(const char *needle)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < WAIT_MS) {
		turn(1);
		if (needle != NULL && strstr(cin.p ? cin.p : "", needle) != NULL)
			return 1;
		if (ceof)
			return needle == NULL;
	}
	return 0;
}

static int
count(const char *hay, const char *needle)
{
	int n = 0;

	while (hay != NULL && (hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* ---- set-up ---- */

static struct px_routes *
routes(const char *state)
{
	char json[1024], err[256];
	struct px_routes *r;

	snprintf(json, sizeof(json), "{\"domain\":\"" DOMAIN "\",\"sandboxes\":["
	    "{\"id\":\"sb1\",\"address\":\"127.0.0.1\",\"state\":\"%s\",\"ports\":["
	    "{\"port\":%u,\"host_header\":\"preserve\",\"visibility\":\"public\"},"
	    "{\"port\":1,\"host_header\":\"preserve\",\"visibility\":\"public\"}]}],"
	    "\"tokens\":[]}", state, up_port);
	if ((r = px_routes_from_json(json, strlen(json), err, sizeof(err))) == NULL) {
		diag("routes: %s", err);
		exit(1);
	}
	return r;
}

static void
set_routes(const char *state)
{
	px_routes_unref(env.routes);
	env.routes = routes(state);
}

static void
setup(void)
{
	/* /upgrade echoes (a tunnel), an Expect: 100-continue is
	 * answered, /close's last bytes must arrive: a plain close */
	static const struct su_conf up = { BIG, 1, 1, 0 };

	signal(SIGPIPE, SIG_IGN);
	up_port = su_start(&up);

	if ((base = event_base_new()) == NULL ||
	    event_base_priority_init(base, PX_PRIO_N) != 0)
		abort();
	px_sess_env_init(&env);
	env.base = base;
	env.access_fd = env.acme_fd = -1;
	snprintf(env.cfg.domain, sizeof(env.cfg.domain), DOMAIN);
	env.cfg.https_port = 443;
	env.cfg.t_head = env.cfg.t_keepalive = env.cfg.t_connect = 5000;
	env.cfg.t_response = env.cfg.t_tunnel = env.cfg.t_body = 5000;
	env.cfg.t_send = env.cfg.t_drain = env.cfg.t_wake = 5000;
	env.cfg.t_retry = 300;
	env.cfg.t_wake_backoff = 1000;
	env.cfg.max_parked = 10;
	env.cfg.max_conns = env.cfg.max_conns_sandbox = 100;
	env.hard_conns = 200;
	env.accepting = h_accepting;
	env.closed = h_closed;
	env.handshakes_wait = h_handshakes_wait;
	env.wake = h_wake;
	set_routes("running");
}

/* A request head for path on the sandbox's published port. */
static const char *
req(const char *method, const char *path, const char *extra)
{
	static char r[1024];

	snprintf(r, sizeof(r), "%s %s HTTP/1.1\r\nHost: %u-sb1." DOMAIN "\r\n%s\r\n",
	    method, path, up_port, extra ? extra : "");
	return r;
}

int
main(void)
{
	char two[2048];
	int c0;

	setup();

	/* keep-alive: two requests, one client connection, one upstream
	 * connection; every proxied response says how long its upstream
	 * took */
	client_open();
	client_send(req("GET", "/hello", NULL));
	ok(client_wait("hello"), "a request through the session is answered");
	ok(strncmp(cin.p, "HTTP/1.1 200 OK\r\n", 17) == 0, "...200");
	ok(strstr(cin.p, "\r\nServer-Timing: upstream;dur=") != NULL,
	    "...with Server-Timing: upstream;dur=");
	ok(strstr(cin.p, "wake;dur=") == NULL, "...and no wake;dur");
	c0 = su_nconns;
	buf_clear(&cin);
	client_send(req("GET", "/hello", NULL));
	ok(client_wait("hello"), "keep-alive: a second request on the connection");
	is_int(su_nconns, c0, "...rides the same upstream connection");
	ok(strstr(cin.p, "X-Conn: 1\r\n") != NULL, "...(the upstream's first)");

	/* pipelining: two requests in one write, answered in order */
	buf_clear(&cin);
	snprintf(two, sizeof(two), "%s", req("GET", "/hello", NULL));
	snprintf(two + strlen(two), sizeof(two) - strlen(two), "%s",
	    req("GET", "/len", NULL));
	client_send(two);
	ok(client_wait("got "), "pipelining: both requests answered");
	ok(strstr(cin.p, "hello") != NULL && strstr(cin.p, "hello") < strstr(cin.p, "got "),
	    "...in order");

	/* HEAD, 204 and 304 have no body: a request after them is answered */
	buf_clear(&cin);
	client_send(req("HEAD", "/head", NULL));
	client_send(req("GET", "/204", NULL));
	client_send(req("GET", "/304", NULL));
	client_send(req("GET", "/hello", NULL));
	ok(client_wait("hello"), "HEAD, 204, 304, then a request: all answered");
	is_int(count(cin.p, "HTTP/1.1 "), 4, "...four responses");
	ok(strstr(cin.p, "Content-Length: 1000\r\n") != NULL,
	    "...HEAD keeps its Content-Length");
	{
		const char *p = strstr(cin.p, "204 No Content\r\n"), *q;

		ok(p != NULL && (q = strstr(p, "\r\n\r\n")) != NULL &&
		    memmem(p, (size_t)(q - p), "Content-Length", 14) == NULL,
		    "...204 gets no Content-Length");
	}

	/* 100-continue: the interim response reaches the client, then the
	 * body goes up */
	buf_clear(&cin);
	client_send(req("POST", "/len", "Expect: 100-continue\r\nContent-Length: 5\r\n"));
	ok(client_wait("HTTP/1.1 100 Continue\r\n\r\n"), "100-continue passed on");
	client_send("abcde");
	ok(client_wait("got        5"), "...then the body reaches the upstream");

	/* chunked re-framing: the upstream's framing (extensions, leading
	 * zeros, trailers) never reaches the client, the data does */
	buf_clear(&cin);
	client_send(req("GET", "/chunked", NULL));
	ok(client_wait("\r\n0\r\n\r\n"), "chunked response re-framed");
	ok(strstr(cin.p, "\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n") != NULL,
	    "...as chunks of berthd's own");
	ok(strstr(cin.p, "ext=") == NULL && strstr(cin.p, "X-Trailer") == NULL,
	    "...no extension, no trailer");
	buf_clear(&cin);
	client_send(req("POST", "/len", "Transfer-Encoding: chunked\r\n"));
	client_send("4;x=y\r\nabcd\r\n1\r\ne\r\n0\r\n\r\n");
	ok(client_wait("got "), "chunked request body forwarded");
	ok(strstr(cin.p, "got       20") != NULL,
	    "...re-framed: no extension (20 bytes of chunks)");

	/* close-delimited response to a 1.1 client: chunked, and the
	 * client connection stays */
	buf_clear(&cin);
	client_send(req("GET", "/close", NULL));
	ok(client_wait("\r\n0\r\n\r\n"), "close-delimited response ends");
	ok(strstr(cin.p, "Transfer-Encoding: chunked\r\n") != NULL &&
	    strstr(cin.p, "\r\n9\r\nuntil-eof\r\n") != NULL, "...re-framed as chunked");
	buf_clear(&cin);
	client_send(req("GET", "/hello", NULL));
	ok(client_wait("hello"), "...and the client connection goes on");

	/* errors: the upstream closes without an answer */
	buf_clear(&cin);
	client_send(req("GET", "/drop", NULL));
	ok(client_wait("\r\n\r\n"), "an upstream that closes without a response...");
	ok(strncmp(cin.p, "HTTP/1.1 502 ", 13) == 0, "...502");
	ok(strstr(cin.p, "\"sandbox\":\"sb1\"") != NULL &&
	    strstr(cin.p, "without a complete response") != NULL,
	    "...naming the sandbox and the reason");

	/* errors: smuggling-shaped framing is refused and the connection
	 * closed */
	client_open();
	client_send(req("POST", "/len", "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"));
	ok(client_wait(NULL), "Content-Length with Transfer-Encoding: closed");
	ok(strncmp(cin.p, "HTTP/1.1 400 ", 13) == 0, "...after a 400");
	ok(strstr(cin.p, "Connection: close\r\n") != NULL, "...saying so");

	/* errors: nothing listens on the port (retried for t_retry) */
	client_open();
	client_send("GET / HTTP/1.1\r\nHost: 1-sb1." DOMAIN "\r\n\r\n");
	ok(client_wait("\r\n\r\n"), "nothing listening on the guest port...");
	ok(strncmp(cin.p, "HTTP/1.1 502 ", 13) == 0 &&
	    strstr(cin.p, "nothing listens on port 1") != NULL, "...502 saying so");

	/* errors: a name berth does not serve */
	buf_clear(&cin);
	client_send("GET / HTTP/1.1\r\nHost: 80-nosuch." DOMAIN "\r\n\r\n");
	ok(client_wait("\r\n\r\n") && strncmp(cin.p, "HTTP/1.1 404 ", 13) == 0,
	    "an unknown sandbox: 404");

	/* upgrade: after the 101, bytes both ways */
	client_open();
	client_send(req("GET", "/upgrade", "Connection: upgrade\r\nUpgrade: test\r\n"));
	ok(client_wait("\r\n\r\n") && strncmp(cin.p, "HTTP/1.1 101 ", 13) == 0,
	    "upgrade: 101 passed on");
	buf_clear(&cin);
	client_send("ping-through-the-tunnel");
	ok(client_wait("ping-through-the-tunnel"), "...then the tunnel carries bytes both ways");

	/* backpressure: a client that reads nothing holds the upstream
	 * back; once it reads, every byte arrives */
	client_open();
	su_big_sent = 0;
	client_send(req("GET", "/big", NULL));
	{
		uint64_t t0 = now_ms();
		size_t got = 0;
		int head_seen = 0;

		while (now_ms() - t0 < 500)
			turn(0);
		ok(su_big_sent < BIG / 2, "backpressure: an unread response stops the upstream "
		    "(%zu of %d bytes sent)", su_big_sent, BIG);
		t0 = now_ms();
		while (got < BIG && now_ms() - t0 < 4 * WAIT_MS) {
			char *h;

			turn(1);
			if (head_seen) {
				got += cin.len;
			} else if ((h = strstr(cin.p ? cin.p : "", "\r\n\r\n")) != NULL) {
				head_seen = 1;
				got += cin.len - (size_t)(h + 4 - cin.p);
			} else {
				continue;
			}
			buf_clear(&cin);
		}
		is_int((long long)got, BIG, "...and once the client reads, every byte arrives");
	}

	/* wake on request: a paused sandbox parks the request, asks for
	 * one wake, and the answer lets it through with wake;dur */
	set_routes("paused");
	woke[0] = '\0';
	client_open();
	client_send(req("GET", "/hello", NULL));
	{
		uint64_t t0 = now_ms();

		while (woke[0] == '\0' && now_ms() - t0 < WAIT_MS)
			turn(1);
	}
	is_str(woke, "sb1", "a paused sandbox: the session asks for a wake");
	is_int((long long)cin.len, 0, "...and holds the request meanwhile");
	px_sess_woken(&env, "sb1", 1, NULL);
	ok(client_wait("hello"), "woken: the parked request is served");
	ok(strstr(cin.p, "\r\nServer-Timing: wake;dur=") != NULL,
	    "...with Server-Timing: wake;dur=");
	set_routes("paused");	/* a new table: no longer known awake */
	px_wake_routes_changed();
	woke[0] = '\0';
	buf_clear(&cin);
	client_open();
	client_send(req("GET", "/hello", NULL));
	{
		uint64_t t0 = now_ms();

		while (woke[0] == '\0' && now_ms() - t0 < WAIT_MS)
			turn(1);
	}
	px_sess_woken(&env, "sb1", 0, "the snapshot is corrupt");
	ok(client_wait("\r\n\r\n") && strncmp(cin.p, "HTTP/1.1 503 ", 13) == 0 &&
	    strstr(cin.p, "the snapshot is corrupt") != NULL,
	    "a failed wake: 503 with the reason");

	/* drain: every session goes, each through the one free */
	close(cfd);
	cfd = -1;
	px_pool_flush(&env);
	px_sess_drain_all(&env, 1);
	ok(TAILQ_EMPTY(&env.sessions) && env.nconns == 0, "a hard drain frees every session");
	is_int(nclosed, nopened, "...each told to the owner once");
	px_routes_unref(env.routes);
	event_base_free(base);
	return done_testing();
}
