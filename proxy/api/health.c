/*
 * api/health.c — GET /v1/health, GET /metrics and fleet mode's views
 * (/v1/fleet/hosts, /v1/fleet/sandboxes); its drain is drain.c's.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

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

/* Fleet mode's view, from the parent (etcd): hosts or every sandbox. */
void
api_fleet(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	json_t *doc;

	if (ctl->hooks.fleet == NULL ||
	    (doc = ctl->hooks.fleet(r->seg[2], ctl->hooks.arg)) == NULL) {
		api_reply_error(r, 404, NULL, NULL, "fleet mode is not configured on this host");
		return;
	}
	api_reply_json(r, 200, doc);
}
