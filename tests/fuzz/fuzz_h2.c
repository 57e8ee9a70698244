/*
 * fuzz_h2.c — libFuzzer target for the HTTP/2 session glue (proxy/h2.c)
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
 * port. The upstream answers by path like tests/unit/test_session.c:
 * /hello, /len (the request body's length), /head, /204, /304,
 * /chunked, /close, /drop, /100 (100 Continue first), /big (256 KiB:
 * the client's window matters), /upgrade (a 101 h2 must not pass on);
 * anything else gets 500.
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

static void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Closes with a reset: no TIME_WAIT left behind by thousands of runs. */
static void
close_hard(int fd)
{
	struct linger l = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static int
listen_lo(unsigned *port)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	int fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 256) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
		die("listen");
	nonblock(fd);
	if (port != NULL)
		*port = ntohs(a.sin_port);
	return fd;
}

/* ---- the scripted upstream ---- */

#define MAXUP 128
static int up_lfd = -1;
static unsigned up_port;
static struct upc {
	int	 fd;		/* -1: none */
	char	*in;
	size_t	 len, cap;
	size_t	 big_left;
	int	 continued;
} ups[MAXUP];

static void
up_close(struct upc *u)
{
	close_hard(u->fd);
	u->fd = -1;
	u->len = 0;
	u->big_left = 0;
}

static void
up_send(struct upc *u, const char *s, size_t n)
{
	size_t off = 0;
	ssize_t w;

	while (off < n && (w = write(u->fd, s + off, n - off)) > 0)
		off += (size_t)w;
}

static void
up_sends(struct upc *u, const char *s)
{
	up_send(u, s, strlen(s));
}

/* Where the request in u->in ends, or 0: incomplete. */
static size_t
up_request_end(struct upc *u)
{
	char *h = memmem(u->in, u->len, "\r\n\r\n", 4), *cl, *z;
	size_t head;

	if (h == NULL)
		return 0;
	head = (size_t)(h - u->in) + 4;
	*h = '\0';
	cl = strcasestr(u->in, "\r\nContent-Length: ");
	z = strcasestr(u->in, "\r\nTransfer-Encoding: chunked");
	*h = '\r';
	if (cl != NULL) {
		size_t n = strtoul(cl + 18, NULL, 10);

		return u->len >= head + n ? head + n : 0;
	}
	if (z != NULL) {
		if (u->len >= head + 5 && memcmp(u->in + head, "0\r\n\r\n", 5) == 0)
			return head + 5;
		z = memmem(u->in + head, u->len - head, "\r\n0\r\n\r\n", 7);
		return z != NULL ? (size_t)(z - u->in) + 7 : 0;
	}
	return head;
}

static void
up_answer(struct upc *u, const char *req, size_t len)
{
	char out[256];
	const char *h = memmem(req, len, "\r\n\r\n", 4);
	const char *sp = memchr(req, ' ', len);
	char path[16] = "";
	size_t i;

	if (sp != NULL) {
		for (i = 0; i + 1 < sizeof(path) && sp + 1 + i < req + len &&
		    sp[1 + i] != ' ' && sp[1 + i] != '?'; i++)
			path[i] = sp[1 + i];
		path[i] = '\0';
	}
	if (strcmp(path, "/hello") == 0) {
		up_sends(u, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
	} else if (strcmp(path, "/len") == 0) {
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"
		    "got %8zu", len - (size_t)(h + 4 - req));
		up_sends(u, out);
	} else if (strcmp(path, "/head") == 0) {
		up_sends(u, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
	} else if (strcmp(path, "/204") == 0) {
		up_sends(u, "HTTP/1.1 204 No Content\r\n\r\n");
	} else if (strcmp(path, "/304") == 0) {
		up_sends(u, "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n");
	} else if (strcmp(path, "/chunked") == 0) {
		up_sends(u, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "3;ext=1\r\nabc\r\n00002\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n");
	} else if (strcmp(path, "/close") == 0) {
		up_sends(u, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-eof");
		up_close(u);
	} else if (strcmp(path, "/drop") == 0) {
		up_close(u);
	} else if (strcmp(path, "/100") == 0) {
		up_sends(u, "HTTP/1.1 100 Continue\r\n\r\n"
		    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	} else if (strcmp(path, "/upgrade") == 0) {
		up_sends(u, "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
		    "Upgrade: test\r\n\r\nraw bytes");
	} else if (strcmp(path, "/big") == 0) {
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG);
		up_sends(u, out);
		u->big_left = BIG;
	} else {
		up_sends(u, "HTTP/1.1 500 Unscripted\r\nContent-Length: 0\r\n\r\n");
	}
}

/* One look at the upstream side; 1 if anything moved. */
static int
up_poll(void)
{
	static char chunk[16384];
	int i, fd, moved = 0;

	while ((fd = accept(up_lfd, NULL, NULL)) >= 0) {
		for (i = 0; i < MAXUP && ups[i].fd >= 0; i++)
			;
		if (i == MAXUP)
			die("too many upstream connections");
		nonblock(fd);
		ups[i].fd = fd;
		ups[i].len = 0;
		ups[i].big_left = 0;
		ups[i].continued = 0;
		moved = 1;
	}
	for (i = 0; i < MAXUP; i++) {
		struct upc *u = &ups[i];
		char rb[16384];
		ssize_t n;
		size_t end;

		if (u->fd < 0)
			continue;
		while (u->big_left > 0) {
			size_t k = u->big_left < sizeof(chunk) ? u->big_left : sizeof(chunk);

			if ((n = write(u->fd, chunk, k)) <= 0)
				break;
			u->big_left -= (size_t)n;
			moved = 1;
		}
		while ((n = read(u->fd, rb, sizeof(rb))) > 0) {
			if (u->len + (size_t)n > u->cap) {
				u->cap = (u->len + (size_t)n) * 2;
				if ((u->in = realloc(u->in, u->cap)) == NULL)
					die("out of memory");
			}
			memcpy(u->in + u->len, rb, (size_t)n);
			u->len += (size_t)n;
			moved = 1;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			up_close(u);
			moved = 1;
			continue;
		}
		while (u->fd >= 0 && u->big_left == 0 && u->len > 0 &&
		    (end = up_request_end(u)) > 0) {
			char *req = malloc(end);

			if (req == NULL)
				die("out of memory");
			memcpy(req, u->in, end);
			memmove(u->in, u->in + end, u->len - end);
			u->len -= end;
			up_answer(u, req, end);
			free(req);
			moved = 1;
		}
	}
	return moved;
}

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
	char json[1024], err[256];
	int i;

	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < MAXUP; i++)
		ups[i].fd = -1;
	up_lfd = listen_lo(&up_port);
	cl_lfd = listen_lo(NULL);
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
	nonblock(cfd);
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
	nonblock(sfd);
	if ((xp = px_xport_accept(base, sfd, PX_XPORT_PLAIN, NULL, NULL)) == NULL)
		die("px_xport_accept");
	px_h2_start(&env, xp);

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
		moved |= up_poll();
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
	close_hard(cfd);
	for (turns = 0; turns < MAX_TURNS; turns++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		up_poll();
		if (env.nconns == 0 && TAILQ_EMPTY(&env.sessions))
			break;
		if (turns == IDLE_TURNS)	/* what the upstream still holds */
			for (i = 0; i < MAXUP; i++)
				if (ups[i].fd >= 0)
					up_close(&ups[i]);
	}
	if (env.nconns != 0 || !TAILQ_EMPTY(&env.sessions))
		die("a connection or session outlived its client");
	px_pool_flush(&env);
	for (i = 0; i < MAXUP; i++)
		if (ups[i].fd >= 0)
			up_close(&ups[i]);
	for (turns = 0; turns < IDLE_TURNS; turns++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	if (fds0 < 0)
		fds0 = nfds();
	else if (nfds() != fds0)
		die("a descriptor outlived its input");
	return 0;
}
