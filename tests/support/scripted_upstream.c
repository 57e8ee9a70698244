/*
 * scripted_upstream.c — see scripted_upstream.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "scripted_upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXUP 128

int su_nconns;
size_t su_big_sent;

static struct su_conf conf;
static int lfd = -1;
static struct upc {
	int	 fd;		/* -1: none */
	int	 id;		/* its number, from 1 */
	int	 echo;		/* after 101: echoes */
	int	 continued;	/* sent 100 Continue */
	char	*in;		/* NUL-terminated too */
	size_t	 len, cap;
	size_t	 big_left;	/* /big: body bytes still to write */
} ups[MAXUP];

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "scripted upstream: %s (errno: %s)\n", what,
	    strerror(errno));
	abort();
}

void
su_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void
su_close_hard(int fd)
{
	struct linger l = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

int
su_listen_lo(unsigned *port)
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
	su_nonblock(fd);
	if (port != NULL)
		*port = ntohs(a.sin_port);
	return fd;
}

unsigned
su_start(const struct su_conf *c)
{
	unsigned port;
	int i;

	conf = *c;
	for (i = 0; i < MAXUP; i++)
		ups[i].fd = -1;
	lfd = su_listen_lo(&port);
	return port;
}

static void
up_close(struct upc *u)
{
	if (conf.reset_close)
		su_close_hard(u->fd);
	else
		close(u->fd);
	u->fd = -1;
	u->len = 0;
	u->big_left = 0;
}

void
su_close_all(void)
{
	int i;

	for (i = 0; i < MAXUP; i++)
		if (ups[i].fd >= 0)
			up_close(&ups[i]);
}

/* Small answers: what the socket takes now. */
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

/* Where the request in u->in ends (head and body), or 0: incomplete. */
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
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nX-Conn: %d\r\n"
		    "Content-Length: 5\r\n\r\nhello", u->id);
		up_sends(u, out);
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
		/* (one write: the bytes after the 101 come with it) */
		up_sends(u, conf.upgrade_echo ? "HTTP/1.1 101 Switching Protocols\r\n"
		    "Connection: upgrade\r\nUpgrade: test\r\n\r\n" :
		    "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
		    "Upgrade: test\r\n\r\nraw bytes");
		u->echo = conf.upgrade_echo;
	} else if (strcmp(path, "/big") == 0) {
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
		    conf.big);
		up_sends(u, out);
		u->big_left = conf.big;
	} else {
		up_sends(u, "HTTP/1.1 500 Unscripted\r\nContent-Length: 0\r\n\r\n");
	}
}

int
su_poll(void)
{
	static char chunk[65536];
	int i, fd, moved = 0;

	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		for (i = 0; i < MAXUP && ups[i].fd >= 0; i++)
			;
		if (i == MAXUP)
			die("too many upstream connections");
		su_nonblock(fd);
		ups[i].fd = fd;
		ups[i].id = ++su_nconns;
		ups[i].echo = ups[i].continued = 0;
		ups[i].len = 0;
		ups[i].big_left = 0;
		moved = 1;
	}
	for (i = 0; i < MAXUP; i++) {
		struct upc *u = &ups[i];
		char rb[65536];
		ssize_t n;
		size_t end;

		if (u->fd < 0)
			continue;
		while (u->big_left > 0) {
			size_t k = u->big_left < sizeof(chunk) ? u->big_left : sizeof(chunk);

			if ((n = write(u->fd, chunk, k)) <= 0)
				break;
			u->big_left -= (size_t)n;
			su_big_sent += (size_t)n;
			moved = 1;
		}
		while ((n = read(u->fd, rb, sizeof(rb))) > 0) {
			if (u->len + (size_t)n + 1 > u->cap) {
				u->cap = (u->len + (size_t)n + 1) * 2;
				if ((u->in = realloc(u->in, u->cap)) == NULL)
					die("out of memory");
			}
			memcpy(u->in + u->len, rb, (size_t)n);
			u->len += (size_t)n;
			u->in[u->len] = '\0';
			moved = 1;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			up_close(u);
			moved = 1;
			continue;
		}
		if (u->echo) {
			up_send(u, u->in, u->len);
			u->len = 0;
			continue;
		}
		if (conf.auto_continue && !u->continued && u->len > 0 &&
		    strstr(u->in, "\r\n\r\n") != NULL &&
		    strcasestr(u->in, "\r\nExpect: 100-continue") != NULL) {
			up_sends(u, "HTTP/1.1 100 Continue\r\n\r\n");
			u->continued = 1;
		}
		while (u->fd >= 0 && u->big_left == 0 && u->len > 0 &&
		    (end = up_request_end(u)) > 0) {
			char *req = malloc(end);

			if (req == NULL)
				die("out of memory");
			memcpy(req, u->in, end);
			memmove(u->in, u->in + end, u->len - end);
			u->len -= end;
			u->in[u->len] = '\0';
			u->continued = 0;
			up_answer(u, req, end);
			free(req);
			moved = 1;
		}
	}
	return moved;
}
