/*
 * api/lifecycle.c — pause, suspend, resume, start, stop, restart: answered once the
 * VMM is done; a sandbox's events and its console.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

static int vm_resumable(struct px_control *, const char *);

/* A deferred answer (lifecycle, exec) was written: the connection reads
 * again, with its idle timeout back (pipelined requests waited). */
void
api_conn_resume(struct conn *c)
{
	c->waiting = 0;
	bufferevent_set_timeouts(c->bev, &api_idle, &api_idle);
	if (c->closing)
		bufferevent_disable(c->bev, EV_READ);
	else
		api_conn_read(c->bev, c);
}
json_t *
api_checkpoint_json(const char *id, const struct px_checkpoint *k)
{
	return json_pack("{s:s, s:s, s:I, s:I}", "sandbox", id, "name",
	    k->name, "created", (json_int_t)k->created, "size_bytes",
	    (json_int_t)k->bytes);
}

/* 201 with the checkpoint just taken (and how long the sandbox paused) */
static void
reply_checkpoint(struct px_control *ctl, struct req *r, const char *id,
    const char *name, const char *detail)
{
	struct px_checkpoint k;
	char err[256];
	json_t *doc;
	int rc;

	rc = ctl->hooks.vm_checkpoint_get(id, name, &k, err, sizeof(err),
	    ctl->hooks.arg);
	if (rc == -2) {
		api_reply_error(r, 500, NULL, NULL, "checkpoint '%s' of sandbox '%s' "
		    "was taken but is not listed", name, id);
		return;
	}
	if (rc < 0) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	doc = api_checkpoint_json(id, &k);
	if (detail != NULL && detail[0] != '\0')
		json_object_set_new(doc, "detail", json_string(detail));
	api_reply_json(r, 201, doc);
}

void
api_lifecycle_done(void *arg, int ok, const char *reason)
{
	struct pending *p = arg;
	struct px_control *ctl = p->ctl;
	struct px_sandbox sb;
	struct conn *c;
	struct req r;
	char err[256];

	api_record_event(ctl, p->id, p->op, ok > 0 ? "ok" : "failed", ok > 0 ?
	    "" : reason, api_now_ms() - p->t0);
	api_routes_changed(ctl);
	/* the client may have gone meanwhile */
	if ((c = api_pending_req(p, &r)) == NULL)
		return;
	if (ok < 0)	/* a cap: no room came while it waited */
		api_reply_capacity(&r, "%s of sandbox '%s' refused: %s", p->op,
		    p->id, reason ? reason : "unknown error");
	else if (!ok)
		api_reply_error(&r, 503, NULL, NULL, "%s of sandbox '%s' failed: %s",
		    p->op, p->id, reason ? reason : "unknown error");
	else if (strcmp(p->op, "checkpoint") == 0)
		reply_checkpoint(ctl, &r, p->id, p->name, reason);
	else if (px_store_sandbox_get(ctl->store, p->id, &sb, err, sizeof(err)) !=
	    PX_STORE_OK)
		api_reply_error(&r, 500, NULL, NULL, "state store: %s", err);
	else
		api_reply_json(&r, 200, api_sandbox_json(ctl, &sb));
	free(p);
	api_conn_resume(c);
}

/* An answer that comes later (lifecycle_done): read no further request
 * on this connection meanwhile, so answers stay in order. A boot may take
 * longer than the idle timeout: the client is not idle, we are. NULL
 * (answered) when out of memory. */
struct pending *
api_pending_new(struct req *r, const char *id, const char *op)
{
	struct pending *p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		api_reply_error(r, 503, NULL, NULL, "out of memory");
		return NULL;
	}
	p->ctl = r->c->ctl;
	p->c = r->c;
	p->serial = r->c->serial;
	p->method = r->method;
	p->t0 = api_now_ms();
	snprintf(p->id, sizeof(p->id), "%s", id);
	snprintf(p->op, sizeof(p->op), "%s", op);
	r->c->waiting = 1;
	bufferevent_set_timeouts(r->c->bev, NULL, NULL);
	return p;
}

/* The connection p waits to answer on, with r made to answer there;
 * NULL (p freed) if its client went meanwhile. */
struct conn *
api_pending_req(struct pending *p, struct req *r)
{
	struct conn *c = api_conn_find(p->ctl, p->c, p->serial);

	if (c == NULL) {
		free(p);
		return NULL;
	}
	memset(r, 0, sizeof(*r));
	r->c = c;
	r->method = p->method;
	return c;
}

/* The operation did not start after all: the connection reads on. */
void
api_pending_drop(struct req *r, struct pending *p)
{
	r->c->waiting = 0;
	bufferevent_set_timeouts(r->c->bev, &api_idle, &api_idle);
	free(p);
}

void
api_lifecycle(struct req *r)
{
	const char *id = r->id;
	const char *op = r->seg[3];
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct pending *p;
	char err[256] = "";
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (sb.external || ctl->hooks.lifecycle == NULL) {
		api_record_event(ctl, id, op, "refused", "not a VM-backed sandbox",
		    -1);
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it cannot %s", id, op);
		return;
	}
	/* resume continues a guest (memory kept); start boots one anew:
	 * asking for the wrong one says which is right */
	if (strcmp(op, "resume") == 0 && (strcmp(sb.state, PX_STATE_FAILED) ==
	    0 || strcmp(sb.state, PX_STATE_STOPPED) == 0) &&
	    !vm_resumable(ctl, id)) {
		snprintf(err, sizeof(err), "sandbox is %s: use start", sb.state);
		api_record_event(ctl, id, op, "refused", err, -1);
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: there is "
		    "nothing to resume; start it (netctl sandbox start %s, or "
		    "POST /v1/sandboxes/%s/start) to boot it again from its "
		    "template, keeping its disk", id, sb.state, id, id);
		return;
	}
	if (strcmp(op, "start") == 0 && (strcmp(sb.state, PX_STATE_PAUSED) ==
	    0 || strcmp(sb.state, PX_STATE_SUSPENDED) == 0)) {
		snprintf(err, sizeof(err), "sandbox is %s: use resume", sb.state);
		api_record_event(ctl, id, op, "refused", err, -1);
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: resume it "
		    "(netctl sandbox resume %s) to continue where it was, or "
		    "restart it to boot it anew", id, sb.state, id);
		return;
	}
	if ((p = api_pending_new(r, id, op)) == NULL)
		return;
	rc = ctl->hooks.lifecycle(id, op, api_lifecycle_done, p, err, sizeof(err),
	    ctl->hooks.arg);
	if (rc != 0) {
		api_pending_drop(r, p);
		api_record_event(ctl, id, op, "failed", err, 0);
		if (rc == -3)	/* a cap, nothing idle to suspend */
			api_reply_capacity(r, "%s of sandbox '%s' refused: %s",
			    op, id, err);
		else
			api_reply_error(r, 503, NULL, NULL, "%s of sandbox "
			    "'%s' failed: %s", op, id, err);
	}
}

struct ev_ctx {
	json_t *array;
	int n, limit;
	int more;
	int64_t last;
};

static int
add_event(const struct px_event *ev, void *arg)
{
	struct ev_ctx *ec = arg;

	if (ec->n == ec->limit) {
		ec->more = 1;
		return PAGE_FULL;
	}
	ec->n++;
	ec->last = ev->seq;
	return json_array_append_new(ec->array, json_pack("{s:I, s:I, s:s, "
	    "s:s, s:s, s:I}", "seq", (json_int_t)ev->seq, "time_ms",
	    (json_int_t)ev->time_ms, "operation", ev->operation, "result",
	    ev->result, "reason", ev->reason, "duration_ms",
	    (json_int_t)ev->duration_ms)) == 0 ? 0 : 1;
}

void
api_events(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	struct page pg;
	struct ev_ctx ec = { NULL, 0, 0, 0, 0 };
	long long after = 0;
	char err[256], *end;
	int rc;

	if (api_page_parse(r, &pg) == -1)
		return;
	if (pg.have_after) {
		after = strtoll(pg.after, &end, 10);
		if (*end != '\0' || after < 0) {
			api_reply_error(r, 400, NULL, "after", "must be an event seq");
			return;
		}
	}
	if ((ec.array = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	ec.limit = pg.limit;
	rc = px_store_event_list(ctl->store, id, (int64_t)after, pg.limit + 1,
	    add_event, &ec, err, sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(ec.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	snprintf(pg.next, sizeof(pg.next), "%lld", (long long)ec.last);
	pg.more = ec.more;
	api_reply_json(r, 200, api_page_doc("events", ec.array, &pg));
}

/* A failed sandbox that resume may still continue: its VMM holds the
 * guest stopped on a disk error, or its snapshot is intact (libvmm). */
static int
vm_resumable(struct px_control *ctl, const char *id)
{
	json_t *vm;
	int yes;

	if (ctl->hooks.vm_info == NULL ||
	    (vm = ctl->hooks.vm_info(id, ctl->hooks.arg)) == NULL)
		return 0;
	yes = json_is_true(json_object_get(vm, "resumable"));
	json_decref(vm);
	return yes;
}

/* GET /v1/sandboxes/{id}/console[?from=N]: the guest console berthd
 * kept (bounded by vm_console_max), from byte N of it. */
void
api_console(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	long long from = -1;
	char buf[32], err[256], *end;
	json_t *doc;
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if ((rc = api_query_get(r, "from", buf, sizeof(buf))) == -1 ||
	    (rc == 1 && ((from = strtoll(buf, &end, 10)) < 0 || *end != '\0' ||
	    end == buf))) {
		api_reply_error(r, 400, NULL, "from", "must be a byte offset (0 or "
		    "more)");
		return;
	}
	if (ctl->hooks.vm_console == NULL ||
	    (doc = ctl->hooks.vm_console(id, from, ctl->hooks.arg)) == NULL) {
		api_reply_error(r, 404, NULL, NULL, "sandbox %s has no console: it "
		    "is not a VM of this host", id);
		return;
	}
	api_reply_json(r, 200, doc);
}
