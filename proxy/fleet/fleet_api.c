/*
 * fleet_api.c — see fleet_api.h: the forward of a create to the host
 * placement chose. It runs in the parent, on its event loop, with
 * libevent's evhttp over bufferevent_openssl (the etcd client's
 * transport), and parses the answer of a peer this host chose and
 * authenticated (its certificate must name that host): bounded (16 KiB
 * of headers, 1 MiB of body, PX_FLEET_API_TIMEOUT). The next step is to
 * move this parse into the control helper too, as its listener was
 * (controld.c serves fleet_api_listen: no peer's request is parsed
 * here).
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
#include <openssl/err.h>
#include <openssl/ssl.h>

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
