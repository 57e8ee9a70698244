/*
 * api/health.c — GET /v1/health, GET /metrics and fleet mode's views
 * (/v1/fleet/hosts, /v1/fleet/sandboxes).
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

/*
 * POST /v1/fleet/drain, /v1/fleet/undrain {"host"?}: this host is
 * placed on no more (its value in etcd says "drained"), or again; kept
 * across restarts. A host drains itself: another one's name is a 409
 * saying to ask that host's API. Its sandboxes stay where they are
 * (moving them off is `sandbox move`'s).
 */
void
api_fleet_drain(struct req *r)
{
	static const char *const fields[] = { "host", NULL };
	struct px_control *ctl = r->c->ctl;
	int on = strcmp(r->seg[2], "drain") == 0;
	const char *host = NULL, *self;
	json_t *obj, *doc;
	char err[256], buf[64];

	if ((obj = api_body_object(r, fields, 1)) == NULL)
		return;
	if (api_string_field(r, obj, "host", 1, &host) < 0)
		goto out;
	if (ctl->hooks.fleet == NULL || ctl->hooks.fleet_drain == NULL ||
	    (doc = ctl->hooks.fleet("hosts", ctl->hooks.arg)) == NULL) {
		api_reply_error(r, 404, NULL, NULL, "fleet mode is not configured "
		    "on this host");
		goto out;
	}
	self = json_string_value(json_object_get(doc, "self"));
	if (host != NULL && (self == NULL || strcmp(host, self) != 0)) {
		api_reply_error(r, 409, NULL, "host", "this is fleet host %s: "
		    "%s host '%s' through its own API", self ? self : "?",
		    on ? "drain" : "undrain", api_shown(buf, sizeof(buf), host));
	} else if (ctl->hooks.fleet_drain(on, err, sizeof(err),
	    ctl->hooks.arg) != 0)
		api_reply_error(r, 500, NULL, NULL, "%s", err);
	else
		api_reply_json(r, 200, json_pack("{s:s?,s:b}", "host", self,
		    "drained", on));
	json_decref(doc);
out:
	json_decref(obj);
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
