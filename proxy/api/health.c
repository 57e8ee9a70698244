/*
 * api/health.c — GET /v1/health and GET /metrics.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <http_parser.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <strings.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- handlers ---- */

void
api_health(struct req *r)
{
	json_t *doc = json_pack("{s:s}", "status", "ok"), *x;

	if (r->c->ctl->hooks.health != NULL &&
	    (x = r->c->ctl->hooks.health(r->c->ctl->hooks.arg)) != NULL) {
		json_object_update_missing(doc, x);
		json_decref(x);
	}
	api_reply_json(r, 200, doc);
}

void
api_metrics(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	struct evbuffer *buf = evbuffer_new();
	size_t len;
	int i;

	if (buf == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	if (ctl->hooks.metrics != NULL)
		ctl->hooks.metrics(buf, ctl->hooks.arg);
	evbuffer_add_printf(buf, "# HELP berth_control_responses_total "
	    "Control API responses by status class.\n"
	    "# TYPE berth_control_responses_total counter\n");
	for (i = 2; i <= 5; i++)
		evbuffer_add_printf(buf, "berth_control_responses_total"
		    "{class=\"%dxx\"} %llu\n", i, ctl->responses[i]);
	evbuffer_add_printf(buf, "# HELP berth_control_connections Open "
	    "control API connections.\n# TYPE berth_control_connections gauge\n"
	    "berth_control_connections %d\n"
	    "# HELP berth_control_connections_by_listener Open control API "
	    "connections by listener.\n"
	    "# TYPE berth_control_connections_by_listener gauge\n"
	    "berth_control_connections_by_listener{listener=\"unix\"} %d\n"
	    "berth_control_connections_by_listener{listener=\"tcp\"} %d\n"
	    "# HELP berth_control_refused_total TCP control connections refused "
	    "at accept (budget, per-address cap) or closed unauthenticated "
	    "(handshake or authentication deadline).\n"
	    "# TYPE berth_control_refused_total counter\n"
	    "berth_control_refused_total{reason=\"budget\"} %llu\n"
	    "berth_control_refused_total{reason=\"address\"} %llu\n"
	    "berth_control_refused_total{reason=\"deadline\"} %llu\n",
	    ctl->nconns, ctl->nconns - ctl->nconns_tcp, ctl->nconns_tcp,
	    ctl->refused_budget, ctl->refused_addr, ctl->closed_deadline);
	len = evbuffer_get_length(buf);
	api_respond(r->c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL,
	    evbuffer_pullup(buf, -1), len, r->method == HTTP_HEAD);
	evbuffer_free(buf);
}
