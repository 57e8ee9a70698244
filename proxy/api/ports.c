/*
 * api/ports.c — a sandbox's published ports (/v1/sandboxes/ID/ports[/PORT],
 * /v1/ports) and the route table the workers load from them.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

void
api_port_list(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	struct page pg;
	struct list_ctx lc = { ctl, NULL, &pg, id };
	char err[256];
	int rc;

	if (api_page_parse(r, &pg) == -1)
		return;
	if ((lc.array = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_port_list(ctl->store, id, api_add_port, &lc, err, sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	api_reply_json(r, 200, api_page_doc("ports", lc.array, &pg));
}

/* Fleet mode: 1 if a sandbox other than id, on another host, has host
 * as a custom host (the store knows only this host's). */
static int
fleet_host_taken(struct px_control *ctl, const char *id, const char *host)
{
	json_t *doc, *sb, *p;
	const char *self;
	size_t i, j;
	int taken = 0;

	if (ctl->hooks.fleet == NULL ||
	    (doc = ctl->hooks.fleet("sandboxes", ctl->hooks.arg)) == NULL)
		return 0;
	self = json_string_value(json_object_get(doc, "self"));
	json_array_foreach(json_object_get(doc, "sandboxes"), i, sb) {
		const char *sid = json_string_value(json_object_get(sb, "id"));
		const char *sh = json_string_value(json_object_get(sb, "host"));

		/* this host's sandboxes are the store's to check */
		if (sid == NULL || strcmp(sid, id) == 0 || sh == NULL ||
		    (self != NULL && strcmp(sh, self) == 0))
			continue;
		json_array_foreach(json_object_get(sb, "ports"), j, p) {
			const char *h = json_string_value(json_object_get(p, "host"));

			if (h != NULL && strcmp(h, host) == 0)
				taken = 1;
		}
	}
	json_decref(doc);
	return taken;
}

/*
 * Whether host may be the custom host name of a port of sandbox id; 0, or
 * -1 after replying 400 naming the rule it breaks. A custom host routes
 * TLS clients to this sandbox, so it must be a DNS name that belongs to
 * nobody else: no address or loopback name (a browser's own machine),
 * nothing under berth's domain but this sandbox's <name>-<id> names,
 * nothing another sandbox holds (the store refuses that, see
 * h_port_put), and for a sandbox token only names under a suffix ops
 * allow (custom_host_suffix). The admin token may pass the suffix rule,
 * not the others.
 */
static int
check_custom_host(struct req *r, const char *id, const char *host)
{
	const struct px_config *cf = r->c->ctl->hooks.config;
	const char *domain = r->c->ctl->domain;
	size_t hl = strlen(host), dl = strlen(domain);
	char buf[80], list[512];
	int k;

	if (!px_valid_hostname(host, hl)) {
		api_reply_error(r, 400, NULL, "host", "not a valid host name: '%s' "
		    "(lower-case letters, digits, '-' and '.', no trailing dot)",
		    api_shown(buf, sizeof(buf), host));
		return -1;
	}
	if (px_host_is_ip(host)) {
		api_reply_error(r, 400, NULL, "host", "'%s' is an IP address: custom "
		    "hosts are DNS names only", api_shown(buf, sizeof(buf), host));
		return -1;
	}
	/* Names under berth's domain are berth's: <port>-<sandbox> for
	 * every port, and <name>-<sandbox> that sandbox may take. Anything
	 * else there would shadow, or squat, another sandbox's names. */
	if (dl > 0 && (strcmp(host, domain) == 0 || px_host_under(host, domain))) {
		if (px_host_own_name(host, domain, id))
			return 0;
		api_reply_error(r, 400, NULL, "host", "'%s' is under berth's domain "
		    "'%s', where sandbox %s may only use <name>-%s.%s (a name "
		    "of letters and digits, starting with a letter)",
		    api_shown(buf, sizeof(buf), host), domain, id, id, domain);
		return -1;
	}
	if (px_host_is_localhost(host)) {
		api_reply_error(r, 400, NULL, "host", "'%s' is a localhost name (it "
		    "means the client's own machine): custom hosts are names "
		    "under allowed suffixes", api_shown(buf, sizeof(buf), host));
		return -1;
	}
	if (fleet_host_taken(r->c->ctl, id, host)) {
		api_reply_error(r, 400, NULL, "host", "'%s' is held by another "
		    "sandbox (on another fleet host)", api_shown(buf, sizeof(buf), host));
		return -1;
	}
	if (r->auth.admin)
		return 0;
	for (k = 0; cf != NULL && k < cf->nhost_suffix; k++)
		if (px_host_under(host, cf->host_suffix[k]))
			return 0;
	if (cf == NULL || cf->nhost_suffix == 0) {
		api_reply_error(r, 400, NULL, "host", "'%s': berth.conf allows no "
		    "custom host suffix (custom_host_suffix), so only the admin "
		    "token may set custom hosts", api_shown(buf, sizeof(buf), host));
		return -1;
	}
	list[0] = '\0';
	for (k = 0; k < cf->nhost_suffix; k++) {
		size_t n = strlen(list);

		snprintf(list + n, sizeof(list) - n, "%s*.%s", k ? ", " : "",
		    cf->host_suffix[k]);
	}
	api_reply_error(r, 400, NULL, "host", "'%s' is not under a suffix ops "
	    "allow for custom hosts (custom_host_suffix): %s",
	    api_shown(buf, sizeof(buf), host), list);
	return -1;
}

void
api_port_show(struct req *r)
{
	const char *id = r->id;
	uint16_t port = r->port;
	struct px_control *ctl = r->c->ctl;
	struct px_port p;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK ||
	    (rc = px_store_port_get(ctl->store, id, port, &p, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	api_reply_json(r, 200, api_port_json(ctl, &p));
}

void
api_port_put(struct req *r)
{
	const char *id = r->id;
	uint16_t port = r->port;
	static const char *const fields[] = { "host_header", "visibility",
	    "host", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_port p;
	const char *hh, *vis, *host;
	char err[256], buf[64];
	json_t *obj;
	int rc, has_host, created = 0;

	if ((obj = api_body_object(r, fields, 1)) == NULL)
		return;
	if (api_string_field(r, obj, "host_header", 0, &hh) < 0 ||
	    api_string_field(r, obj, "visibility", 0, &vis) < 0 ||
	    (has_host = api_string_field(r, obj, "host", 1, &host)) < 0)
		goto out;

	/* Unknown sandbox first, so its 404 wins over field errors below
	 * only when the body itself was well formed. */
	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	rc = px_store_port_get(ctl->store, id, port, &p, err, sizeof(err));
	if (rc == PX_STORE_NOTFOUND) {
		memset(&p, 0, sizeof(p));
		snprintf(p.sandbox, sizeof(p.sandbox), "%s", id);
		p.port = port;
		p.host_header = PX_HOST_PRESERVE;
		p.visibility = PX_VIS_PUBLIC;
	} else if (rc != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	if (hh != NULL && px_host_header_parse(hh, &p.host_header) == -1) {
		api_reply_error(r, 400, NULL, "host_header", "must be 'preserve' or "
		    "'upstream', not '%s'", api_shown(buf, sizeof(buf), hh));
		goto out;
	}
	if (vis != NULL && px_visibility_parse(vis, &p.visibility) == -1) {
		api_reply_error(r, 400, NULL, "visibility", "must be 'public' or "
		    "'private', not '%s'", api_shown(buf, sizeof(buf), vis));
		goto out;
	}
	if (has_host) {
		if (host == NULL || host[0] == '\0')
			p.custom_host[0] = '\0';
		else if (check_custom_host(r, id, host) == -1)
			goto out;
		else
			snprintf(p.custom_host, sizeof(p.custom_host), "%s", host);
	}
	rc = px_store_port_set(ctl->store, &p, &created, err, sizeof(err));
	if (rc == PX_STORE_CONFLICT && r->auth.admin) {
		/* the one conflict a port has: its custom host is taken */
		api_reply_error(r, 400, NULL, "host", "%s: a sandbox may not take "
		    "another's host", err);
		goto out;
	}
	if (rc == PX_STORE_CONFLICT) {
		/* a sandbox token learns no other sandbox's name */
		api_reply_error(r, 400, NULL, "host", "'%s' is held by another "
		    "sandbox", api_shown(buf, sizeof(buf), p.custom_host));
		goto out;
	}
	if (rc != PX_STORE_OK) {
		api_reply_store(r, rc, "host", err);
		goto out;
	}
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	if (px_store_port_get(ctl->store, id, port, &p, err, sizeof(err)) !=
	    PX_STORE_OK)
		api_reply_error(r, 500, NULL, NULL, "state store: %s", err);
	else
		api_reply_json(r, created ? 201 : 200, api_port_json(ctl, &p));
out:
	json_decref(obj);
}

void
api_port_delete(struct req *r)
{
	const char *id = r->id;
	uint16_t port = r->port;
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK ||
	    (rc = px_store_port_rm(ctl->store, id, port, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	api_reply_empty(r, 204);
}

/* ---- the workers' route table ---- */

struct routes_ctx {
	json_t *sbs;		/* array, store order */
	json_t *byid;		/* id -> the same objects */
	json_t *tokens;
};

static int
routes_sb(const struct px_sandbox *sb, void *arg)
{
	struct routes_ctx *rc = arg;
	json_t *o = px_rt_sandbox(sb->id, sb->address, sb->state);

	if (o == NULL || json_object_set(rc->byid, sb->id, o) == -1 ||
	    json_array_append_new(rc->sbs, o) == -1)
		return 1;
	return 0;
}

static int
routes_port(const struct px_port *p, void *arg)
{
	struct routes_ctx *rc = arg;
	json_t *sb = json_object_get(rc->byid, p->sandbox);

	if (sb == NULL)
		return 0;
	return json_array_append_new(px_rt_sandbox_ports(sb),
	    px_rt_port((int)p->port, px_host_header_name(p->host_header),
	    px_visibility_name(p->visibility),
	    p->custom_host[0] ? p->custom_host : NULL)) == 0 ? 0 : 1;
}

static int
routes_token(const struct px_token *t, void *arg)
{
	struct routes_ctx *rc = arg;

	return json_array_append_new(rc->tokens, px_rt_token(t->sha256,
	    t->sandbox[0] ? t->sandbox : NULL)) == 0 ? 0 : 1;
}

json_t *
px_control_routes_json(struct px_store *st, const char *domain, char *err,
    size_t errlen)
{
	struct routes_ctx rc = { json_array(), json_object(), json_array() };
	json_t *msg = NULL;
	int r;

	if (rc.sbs == NULL || rc.byid == NULL || rc.tokens == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if ((r = px_store_sandbox_list(st, routes_sb, &rc, err, errlen)) != 0 ||
	    (r = px_store_port_list(st, NULL, routes_port, &rc, err,
	    errlen)) != 0 ||
	    (r = px_store_token_list(st, NULL, routes_token, &rc, err,
	    errlen)) != 0) {
		if (r > 0)
			snprintf(err, errlen, "out of memory");
		goto out;
	}
	msg = px_rt_msg(domain, rc.sbs, rc.tokens);
	if (msg == NULL)
		snprintf(err, errlen, "out of memory");
out:
	json_decref(rc.sbs);
	json_decref(rc.byid);
	json_decref(rc.tokens);
	return msg;
}
