/*
 * fleet_api.c — see fleet_api.h. Both ends run in the parent, on its
 * event loop, with libevent's evhttp over bufferevent_openssl (the etcd
 * client's transport). The listener's TLS handshake fails without a
 * certificate from the fleet CA, so no one else's HTTP is ever parsed
 * here; the body is bounded (PX_FLEET_API_BODY_MAX), the connection
 * timed out (PX_FLEET_API_TIMEOUT), and what the local API answers is
 * passed back as it is (its status and JSON).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_api.h"
#include "fleet.h"
#include "conf.h"
#include "fleet_tls.h"
#include "valid.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static px_fleet_api_create_fn *create_fn;
static struct evhttp *server;

/* ---- the listener ---- */

static struct bufferevent *
server_bev(struct event_base *base, void *arg)
{
	SSL *ssl = px_fleet_tls_server();

	(void)arg;
	if (ssl == NULL)
		return NULL;
	return bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static void
reply(struct evhttp_request *req, int status, const char *body, size_t len)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add(b, body, len);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	evhttp_send_reply(req, status, NULL, b);
	evbuffer_free(b);
}

static void
reply_error(struct evhttp_request *req, int status, const char *code,
    const char *msg)
{
	char buf[512];
	int n;

	n = snprintf(buf, sizeof(buf), "{\"error\":{\"status\":%d,\"code\":\"%s\","
	    "\"message\":\"%s\"}}\n", status, code, msg);
	reply(req, status, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* the local create answered: to the peer, unless it went (its
 * connection closed: evhttp frees the request, and cancels this) */
struct inbound {
	struct evhttp_request *req;
	struct evhttp_connection *cn;
	int gone;
};

static void
inbound_done(void *arg, int status, const char *body, size_t len, const char *err)
{
	struct inbound *in = arg;

	if (!in->gone) {
		evhttp_connection_set_closecb(in->cn, NULL, NULL);
		if (status == 0)
			reply_error(in->req, 500, "internal", err ? err : "no answer");
		else
			reply(in->req, status, body, len);
	}
	free(in);
}

/* the peer went while the VM booted: evhttp frees its request, the
 * answer has no one to go to */
static void
inbound_gone(struct evhttp_connection *cn, void *arg)
{
	(void)cn;
	((struct inbound *)arg)->gone = 1;
}

static void
serve(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *cn = evhttp_request_get_connection(req);
	struct bufferevent *bev = cn ? evhttp_connection_get_bufferevent(cn) : NULL;
	SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
	X509 *peer = ssl ? SSL_get_peer_certificate(ssl) : NULL;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	const char *uri = evhttp_request_get_uri(req);
	char host[40], *body;
	struct inbound *ib;
	size_t len;
	int ok;

	(void)arg;
	ok = px_fleet_peer_host(peer, host, sizeof(host));
	X509_free(peer);
	if (!ok) {
		reply_error(req, 403, "forbidden", "the fleet peer's certificate "
		    "names no host of this fleet holding a live lease");
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST || uri == NULL ||
	    strcmp(uri, "/v1/sandboxes") != 0) {
		reply_error(req, 404, "not_found", "a fleet peer may only POST "
		    "/v1/sandboxes here");
		return;
	}
	len = evbuffer_get_length(in);
	if (len == 0 || len > PX_FLEET_API_BODY_MAX ||
	    (body = malloc(len + 1)) == NULL ||
	    (ib = calloc(1, sizeof(*ib))) == NULL) {
		if (len > 0 && len <= PX_FLEET_API_BODY_MAX)
			free(body);
		reply_error(req, 400, "invalid_argument", "a JSON body is required");
		return;
	}
	evbuffer_remove(in, body, len);
	body[len] = '\0';
	ib->req = req;
	ib->cn = cn;
	evhttp_connection_set_closecb(cn, inbound_gone, ib);
	create_fn(host, body, len, inbound_done, ib);
	free(body);
}

int
px_fleet_api_listen(struct event_base *base, const char *addr,
    px_fleet_api_create_fn *create, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct evconnlistener *l;
	evutil_socket_t fd;
	unsigned port;

	if (px_parse_sockaddr(addr, &ss, &sl, &port) != 0) {
		snprintf(err, errlen, "fleet_api_listen %s: not ADDR:PORT", addr);
		return -1;
	}
	if ((server = evhttp_new(base)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	create_fn = create;
	evhttp_set_bevcb(server, server_bev, NULL);
	evhttp_set_max_body_size(server, PX_FLEET_API_BODY_MAX);
	evhttp_set_max_headers_size(server, 16 * 1024);
	evhttp_set_timeout(server, PX_FLEET_API_TIMEOUT);
	evhttp_set_allowed_methods(server, EVHTTP_REQ_POST);
	evhttp_set_gencb(server, serve, NULL);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || evutil_make_listen_socket_reuseable(fd) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 64) != 0 ||
	    (l = evconnlistener_new(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE, -1,
	    fd)) == NULL || evhttp_bind_listener(server, l) == NULL) {
		snprintf(err, errlen, "fleet_api_listen %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		evhttp_free(server);
		server = NULL;
		return -1;
	}
	return 0;
}

/* ---- the forward ---- */

struct outbound {
	struct evhttp_connection *cn;
	px_fleet_api_done_fn *done;
	void *arg;
	char host[40];
	char err[256];
	struct event *free_ev;
};

static void
outbound_free(evutil_socket_t fd, short what, void *arg)
{
	struct outbound *o = arg;

	(void)fd;
	(void)what;
	if (o->cn != NULL)
		evhttp_connection_free(o->cn);
	event_free(o->free_ev);
	free(o);
}

static void
outbound_error(enum evhttp_request_error e, void *arg)
{
	struct outbound *o = arg;
	unsigned long ssl_e;

	switch (e) {
	case EVREQ_HTTP_TIMEOUT:
		snprintf(o->err, sizeof(o->err), "no answer within %d s",
		    PX_FLEET_API_TIMEOUT);
		break;
	case EVREQ_HTTP_EOF:
		snprintf(o->err, sizeof(o->err), "the connection closed before "
		    "an answer");
		break;
	case EVREQ_HTTP_INVALID_HEADER:
	case EVREQ_HTTP_DATA_TOO_LONG:
		snprintf(o->err, sizeof(o->err), "a malformed answer");
		break;
	default:
		ssl_e = bufferevent_get_openssl_error(evhttp_connection_get_bufferevent(
		    o->cn));
		if (ssl_e != 0)
			snprintf(o->err, sizeof(o->err), "TLS: %s",
			    ERR_reason_error_string(ssl_e));
		else if (o->err[0] == '\0')
			snprintf(o->err, sizeof(o->err), "connection refused or "
			    "failed");
		break;
	}
}

static void
outbound_done(struct evhttp_request *req, void *arg)
{
	struct outbound *o = arg;
	struct evbuffer *b = req ? evhttp_request_get_input_buffer(req) : NULL;
	int status = req ? evhttp_request_get_response_code(req) : 0;
	size_t len = b ? evbuffer_get_length(b) : 0;
	const char *body = b && len ? (const char *)evbuffer_pullup(b, -1) : "";

	if (status == 0 && o->err[0] == '\0')
		snprintf(o->err, sizeof(o->err), "connection refused or failed");
	o->done(o->arg, status, body, len, status ? NULL : o->err);
	/* the connection is freed outside its own callback */
	event_active(o->free_ev, 0, 0);
}

int
px_fleet_api_forward(struct event_base *base, const char *host, const char *body,
    size_t len, px_fleet_api_done_fn *done, void *arg, char *err, size_t errlen)
{
	char addr[64], *colon, a[64];
	struct outbound *o;
	struct bufferevent *bev;
	struct evhttp_request *req;
	struct evkeyvalq *h;
	SSL *ssl;

	if (!px_fleet_host_api(host, addr, sizeof(addr)) ||
	    (colon = strrchr(addr, ':')) == NULL) {
		snprintf(err, errlen, "host %s publishes no fleet_api_listen", host);
		return -1;
	}
	snprintf(a, sizeof(a), "%.*s", (int)(colon - addr), addr);
	if (a[0] == '[') {	/* evhttp wants a bare v6 address */
		memmove(a, a + 1, strlen(a));
		a[strlen(a) - 1] = '\0';
	}
	if ((o = calloc(1, sizeof(*o))) == NULL ||
	    (o->free_ev = event_new(base, -1, 0, outbound_free, o)) == NULL ||
	    (ssl = px_fleet_tls_client(host)) == NULL) {
		if (o != NULL && o->free_ev != NULL)
			event_free(o->free_ev);
		free(o);
		snprintf(err, errlen, "out of memory or no fleet certificate");
		return -1;
	}
	o->done = done;
	o->arg = arg;
	snprintf(o->host, sizeof(o->host), "%s", host);
	if ((bev = bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE |
	    BEV_OPT_DEFER_CALLBACKS)) == NULL) {
		SSL_free(ssl);
		goto fail;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	if ((o->cn = evhttp_connection_base_bufferevent_new(base, NULL, bev, a,
	    (unsigned short)atoi(colon + 1))) == NULL) {
		bufferevent_free(bev);
		goto fail;
	}
	evhttp_connection_set_timeout(o->cn, PX_FLEET_API_TIMEOUT);
	evhttp_connection_set_retries(o->cn, 0);
	/* a create's answer is a sandbox's JSON: a few KiB */
	evhttp_connection_set_max_headers_size(o->cn, 16 * 1024);
	evhttp_connection_set_max_body_size(o->cn, 1024 * 1024);
	if ((req = evhttp_request_new(outbound_done, o)) == NULL)
		goto fail;
	evhttp_request_set_error_cb(req, outbound_error);
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Berth-Fleet-Placed", px_fleet_self() ?
	    px_fleet_self() : "");
	evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
	if (evhttp_make_request(o->cn, req, EVHTTP_REQ_POST, "/v1/sandboxes") != 0)
		goto fail;	/* it freed req */
	return 0;
fail:
	if (o->cn != NULL)
		evhttp_connection_free(o->cn);
	event_free(o->free_ev);
	free(o);
	snprintf(err, errlen, "cannot start a connection to host %s", host);
	return -1;
}
