/*
 * bare.c — the ceiling of berthd's own stack, for `make bench`: a TLS
 * keep-alive HTTP responder on libevent + OpenSSL with nothing else.
 * Every request head (up to its blank line) gets the same 200 with a
 * 1 KiB body, the size the bench's upstream answers; no parsing, no
 * upstream, no routing, no logging.
 *
 *   bare CERT KEY PORT
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static SSL_CTX *ctx;
static char resp[2048];
static size_t resplen;

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr p;

	(void)arg;
	for (;;) {
		p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (p.pos < 0)
			break;
		evbuffer_drain(in, (size_t)p.pos + 4);
		bufferevent_write(bev, resp, resplen);
	}
	if (evbuffer_get_length(in) > 65536)
		bufferevent_free(bev);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct event_base *base = arg;
	struct bufferevent *bev;
	SSL *ssl;
	int one = 1;

	(void)l; (void)sa; (void)salen;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((ssl = SSL_new(ctx)) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	bev = bufferevent_openssl_socket_new(base, fd, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		evutil_closesocket(fd);
		return;
	}
	bufferevent_setcb(bev, on_read, NULL, on_event, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int
main(int argc, char **argv)
{
	struct event_base *base;
	struct evconnlistener *l;
	struct sockaddr_in sin;
	int n;

	if (argc != 4) {
		fprintf(stderr, "usage: bare CERT KEY PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL ||
	    SSL_CTX_use_certificate_chain_file(ctx, argv[1]) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, argv[2], SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);	/* as nginx, berthd */
	n = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nServer: bare\r\n"
	    "Content-Type: text/plain\r\nContent-Length: 1024\r\n\r\n");
	memset(resp + n, 'x', 1023);
	resp[n + 1023] = '\n';
	resplen = (size_t)n + 1024;

	base = event_base_new();
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)atoi(argv[3]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(base, on_accept, base,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 1024,
	    (struct sockaddr *)&sin, sizeof(sin));
	if (l == NULL) {
		perror("bare: listen");
		return 1;
	}
	fprintf(stderr, "bare: listening on 127.0.0.1:%s\n", argv[3]);
	event_base_dispatch(base);
	return 0;
}
