/*
 * api/move.c — moving a sandbox to another fleet host (issue 33, item
 * 3): POST /v1/sandboxes/{id}/move on the source (admin), answered once
 * the move ended; and the target's routes a fleet peer alone may call
 * (API_FLEET, fed by the control helper from fleet_api_listen): the
 * manifest (POST /v1/fleet/move/{id}), each file as a streamed body
 * (PUT .../file?name=, CS_MOVE in streams.c), the commit with the
 * sandbox's records (POST .../commit), DELETE: given up. The work is
 * the hooks' (proxy/fleet/fleet_move.c); here only HTTP.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

#include <limits.h>
#include <stdlib.h>

/* A move that ended well (the target holds it, restorable): this
 * host's copy goes, and with its row its claim in etcd (the target's
 * wins). For `sandbox move` and for a drain's moves. */
void
api_move_finished(struct px_control *ctl, const char *id, const char *to,
    int64_t ms)
{
	char e[256];

	api_record_event(ctl, id, "move", "ok", to, ms);
	(void)px_store_sandbox_rm(ctl->store, id, e, sizeof(e));
	if (ctl->hooks.vm_delete != NULL)
		ctl->hooks.vm_delete(id, ctl->hooks.arg);
	api_routes_changed(ctl);
}

static void
move_done(void *arg, int status, const char *err, uint64_t sent)
{
	struct pending *p = arg;
	struct px_control *ctl = p->ctl;
	struct conn *c;
	struct req r;

	if (status == 200)
		api_move_finished(ctl, p->id, p->name, api_now_ms() - p->t0);
	else {
		api_record_event(ctl, p->id, "move", "failed", err ? err : "",
		    api_now_ms() - p->t0);
		api_routes_changed(ctl);
	}
	/* the client may have gone meanwhile */
	if ((c = api_pending_req(p, &r)) == NULL)
		return;
	if (status == 200)
		api_reply_json(&r, 200, json_pack("{s:s, s:s, s:I, s:I}", "id",
		    p->id, "host", p->name, "move_ms",
		    (json_int_t)(api_now_ms() - p->t0), "bytes_sent",
		    (json_int_t)sent));
	else
		api_reply_error(&r, status ? status : 502, NULL, NULL,
		    "move of sandbox '%s' to host %s failed: %s", p->id,
		    p->name, err ? err : "unknown error");
	free(p);
	api_conn_resume(c);
}

/* POST /v1/sandboxes/{id}/move {"to": HOST} */
void
api_sandbox_move(struct req *r)
{
	static const char *const allowed[] = { "to", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct pending *p;
	const char *to;
	char err[512] = "";
	json_t *obj;
	int rc, status = 503;

	if ((obj = api_body_object(r, allowed, 0)) == NULL)
		return;
	to = json_string_value(json_object_get(obj, "to"));
	if (to == NULL || to[0] == '\0' || strlen(to) > 32) {
		json_decref(obj);
		api_reply_error(r, 400, NULL, "to", "the fleet host to move "
		    "the sandbox to is required (a host id)");
		return;
	}
	if ((rc = px_store_sandbox_get(ctl->store, r->id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		json_decref(obj);
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.move == NULL) {
		json_decref(obj);
		api_reply_error(r, 409, NULL, NULL, "fleet mode is not "
		    "configured on this host: a sandbox moves only between "
		    "fleet hosts");
		return;
	}
	if (sb.external) {
		json_decref(obj);
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it cannot move", r->id);
		return;
	}
	if ((p = api_pending_new(r, r->id, "move")) == NULL) {
		json_decref(obj);
		return;
	}
	snprintf(p->name, sizeof(p->name), "%s", to);
	json_decref(obj);
	if (ctl->hooks.move(r->id, p->name, move_done, p, &status, err,
	    sizeof(err), ctl->hooks.arg) != 0) {
		char host[sizeof(p->name)];

		snprintf(host, sizeof(host), "%s", p->name);
		api_pending_drop(r, p);
		api_record_event(ctl, r->id, "move", "refused", err, -1);
		api_reply_error(r, status, NULL, status == 400 ? "to" : NULL,
		    "move of sandbox '%s' to host %s: %s", r->id, host, err);
	}
}

/* A sandbox past this host's vm_max_memory, vm_max_vcpus or vm_max_disk
 * (berth.conf as it is now) is moved here no more than one would be
 * created: 0, or -1 with err. body: the begin's ({"manifest": {...}}),
 * which the hook parses whole; here only its sizes are read. */
static int
move_fits(struct px_control *ctl, const char *body, size_t len, char *err,
    size_t errlen)
{
	static const struct {
		const char *field, *unit, *directive;
	} f[3] = {
		{ "mem_mib", " MiB of memory", "vm_max_memory" },
		{ "vcpus", " vCPUs", "vm_max_vcpus" },
		{ "disk_mib", " MiB of disk", "vm_max_disk" },
	};
	const struct px_config *c = ctl->hooks.config;
	json_t *doc, *man;
	json_int_t v;
	unsigned max[3];
	int i, rc = 0;

	if (c == NULL)
		return 0;
	max[0] = c->vm_max_memory;
	max[1] = c->vm_max_vcpus;
	max[2] = c->vm_max_disk;
	if ((doc = json_loadb(body, len, 0, NULL)) == NULL)
		return 0;	/* the hook says what is wrong with it */
	man = json_object_get(doc, "manifest");
	for (i = 0; i < 3 && rc == 0; i++) {
		v = json_integer_value(json_object_get(man, f[i].field));
		if (v > (json_int_t)max[i]) {
			snprintf(err, errlen, "%lld%s is more than this host's "
			    "%s (%u)", (long long)v, f[i].unit,
			    f[i].directive, max[i]);
			rc = -1;
		}
	}
	json_decref(doc);
	return rc;
}

/* The target's side: /v1/fleet/move/{id}[/file|/commit] */
void
api_fleet_move(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	const char *peer = r->c->fleet_peer;
	char err[512] = "", name[32], num[24], *end;
	unsigned long long from = 0;
	struct cstream *cs;
	int rc, status = 500;
	json_t *doc;
	void *h;

	if (ctl->hooks.move_begin == NULL) {
		api_reply_error(r, 404, NULL, NULL, "this host takes no moved "
		    "sandboxes (no VMs or no fleet)");
		return;
	}
	if (r->nseg == 4 && r->method == HTTP_GET) {
		api_reply_json(r, 200, ctl->hooks.move_held(peer, r->id,
		    ctl->hooks.arg));
		return;
	}
	if (r->nseg == 4 && r->method == HTTP_DELETE) {
		ctl->hooks.move_abort(peer, r->id, ctl->hooks.arg);
		api_reply_json(r, 200, json_pack("{s:s, s:b}", "id", r->id,
		    "aborted", 1));
		return;
	}
	if (r->nseg == 4 && move_fits(ctl, r->body, r->bodylen, err,
	    sizeof(err)) < 0) {
		api_reply_error(r, 409, NULL, NULL, "sandbox %s: %s", r->id,
		    err);
		return;
	}
	if (r->nseg == 4 || (r->nseg == 5 && strcmp(r->seg[4], "commit") ==
	    0)) {
		doc = r->nseg == 4 ? ctl->hooks.move_begin(peer, r->id, r->body,
		    r->bodylen, &status, err, sizeof(err), ctl->hooks.arg) :
		    ctl->hooks.move_commit(peer, r->id, r->body, r->bodylen,
		    &status, err, sizeof(err), ctl->hooks.arg);
		if (doc == NULL)
			api_reply_error(r, status, NULL, NULL, "%s", err);
		else
			api_reply_json(r, 200, doc);
		if (doc != NULL && r->nseg == 5)
			api_routes_changed(ctl);	/* it is here now */
		return;
	}
	/* GET .../file?name=NAME: how much of one cut short is here */
	if (r->method == HTTP_GET || r->method == HTTP_HEAD) {
		if (api_query_get(r, "name", name, sizeof(name)) != 1) {
			api_reply_error(r, 400, NULL, "name", "which file "
			    "(?name=)");
			return;
		}
		if ((doc = ctl->hooks.move_part(peer, r->id, name, &status,
		    err, sizeof(err), ctl->hooks.arg)) == NULL)
			api_reply_error(r, status, NULL, status == 400 ?
			    "name" : NULL, "%s", err);
		else
			api_reply_json(r, 200, doc);
		return;
	}
	/* PUT .../file?name=NAME[&from=N]: the body is its bytes (from
	 * byte N of it: the rest of one cut short) */
	if (!r->c->rh.streamed) {
		api_reply_error(r, 400, NULL, NULL, "PUT a moved file as a "
		    "streamed body");
		return;
	}
	if (api_query_get(r, "name", name, sizeof(name)) != 1) {
		api_reply_error(r, 400, NULL, "name", "which file (?name=)");
		return;
	}
	if ((rc = api_query_get(r, "from", num, sizeof(num))) == -1 ||
	    (rc == 1 && (num[0] < '0' || num[0] > '9' ||
	    (from = strtoull(num, &end, 10)) == ULLONG_MAX || *end != '\0'))) {
		api_reply_error(r, 400, NULL, "from", "a byte offset (0 or "
		    "more)");
		return;
	}
	if ((cs = calloc(1, sizeof(*cs))) == NULL) {
		api_reply_error(r, 503, NULL, NULL, "out of memory");
		return;
	}
	if ((h = ctl->hooks.move_spool(peer, r->id, name, from, &status, err,
	    sizeof(err), ctl->hooks.arg)) == NULL) {
		free(cs);
		api_reply_error(r, status, NULL, status == 400 ? "name" : NULL,
		    "%s", err);
		return;
	}
	cs->c = r->c;
	cs->kind = CS_MOVE;
	cs->method = r->method;
	cs->tpl = h;
	snprintf(cs->id, sizeof(cs->id), "%s", r->id);
	snprintf(cs->path, sizeof(cs->path), "%s", name);
	api_cs_attach(cs);
}
