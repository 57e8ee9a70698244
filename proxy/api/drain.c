/*
 * api/drain.c — fleet drain (issue 33, item 4): POST /v1/fleet/drain
 * marks this host placed on no more (its value in etcd says "drained",
 * kept across restarts) and, unless {"move": false}, moves its
 * sandboxes to other hosts, one at a time: each VM-backed one that is
 * running, paused, suspended or stopped goes where placement would put a new
 * sandbox of its template (fleet_place.c; this host, drained, is never
 * a candidate), through the same move as `sandbox move` (a running one
 * is suspended, moved and resumed there); a move that fails tries the
 * next host once, then the sandbox stays here, said in the progress.
 * GET /v1/fleet/drain: that progress. POST /v1/fleet/undrain: placed on
 * again, and the mover stops after the move under way. A host drains
 * itself: another one's name is a 409 saying to ask that host's API.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"
#include "fleet_place.h"

struct drain {
	struct px_control *ctl;
	int	 live;		/* begun, and not freed since */
	int	 moving;	/* a move is under way */
	int	 stop;		/* undrain: no further move */
	json_t	*todo;		/* ids left, in order */
	json_t	*moved;		/* [{"id","to","ms"}] */
	json_t	*failed;	/* [{"id","error"}]: they stay here */
	size_t	 total;
	char	 cur[41];	/* the one moving */
	char	 to[40];	/* to this host */
	json_t	*order;		/* its hosts, best first */
	size_t	 tried;		/* of order */
	char	 first[512];	/* what the first host said */
	int64_t	 t0, started;
};

/* one drain per berthd: its control API's. Static: a move's done may
 * come after api_drain_free (berthd ending), and finds it not live. */
static struct drain drain_;
static struct drain *const D = &drain_;

static void drain_next(struct drain *);
static void drain_go(evutil_socket_t, short, void *);

static json_t *
drain_progress(const struct drain *d)
{
	json_t *p;

	if (!d->live)
		return json_null();
	p = json_pack("{s:s, s:I, s:O, s:O, s:I, s:I}", "state", d->moving ?
	    "moving" : d->stop ? "stopped" : "done", "total",
	    (json_int_t)d->total, "moved", d->moved, "failed", d->failed,
	    "left", (json_int_t)json_array_size(d->todo), "ms",
	    (json_int_t)(api_now_ms() - d->started));
	if (p != NULL && d->moving)
		json_object_set_new(p, "current", json_pack("{s:s, s:s}", "id",
		    d->cur, "to", d->to));
	return p;
}

static void
drain_fail(struct drain *d, const char *id, const char *why)
{
	json_array_append_new(d->failed, json_pack("{s:s, s:s}", "id", id,
	    "error", why));
	api_record_event(d->ctl, id, "move", "failed", why, -1);
}

static void
drain_moved(void *arg, int status, const char *err, uint64_t sent)
{
	struct drain *d = arg;
	char why[1024];

	if (!d->live)
		return;
	d->moving = 0;
	if (status == 200) {
		int64_t ms = api_now_ms() - d->t0;

		api_move_finished(d->ctl, d->cur, d->to, ms);
		json_array_append_new(d->moved, json_pack("{s:s, s:s, s:I, "
		    "s:I}", "id", d->cur, "to", d->to, "ms", (json_int_t)ms,
		    "bytes_sent", (json_int_t)sent));
	} else {
		snprintf(why, sizeof(why), "%s: %s", d->to, err ? err :
		    "unknown error");
		api_record_event(d->ctl, d->cur, "move", "failed", why,
		    api_now_ms() - d->t0);
		api_routes_changed(d->ctl);
		/* the next host once, as placement does */
		if (d->tried == 1 && d->first[0] == '\0' && !d->stop &&
		    json_array_size(d->order) > 1) {
			snprintf(d->first, sizeof(d->first), "%s", why);
			d->moving = 1;
			drain_next(d);
			return;
		}
		json_array_append_new(d->failed, json_pack("{s:s, s:s++}",
		    "id", d->cur, "error", d->first, d->first[0] ? "; " : "",
		    why));
	}
	json_decref(d->order);
	d->order = NULL;
	d->cur[0] = '\0';
	drain_next(d);
}

/* The next host for d->cur, or the next sandbox. */
static void
drain_next(struct drain *d)
{
	struct px_control *ctl = d->ctl;
	struct px_place_err e;
	struct px_sandbox sb;
	char err[512];
	json_t *doc;
	const char *self, *tmpl;
	int status;

	for (;;) {
		if (d->cur[0] == '\0') {
			if (d->stop || json_array_size(d->todo) == 0) {
				d->moving = 0;
				return;
			}
			snprintf(d->cur, sizeof(d->cur), "%s", json_string_value(
			    json_array_get(d->todo, 0)));
			json_array_remove(d->todo, 0);
			d->first[0] = '\0';
			d->tried = 0;
			d->t0 = api_now_ms();
			if (px_store_sandbox_get(ctl->store, d->cur, &sb, err,
			    sizeof(err)) != PX_STORE_OK) {
				/* removed meanwhile: nothing to move */
				d->cur[0] = '\0';
				d->total--;
				continue;
			}
			if (strcmp(sb.state, PX_STATE_RUNNING) != 0 &&
			    strcmp(sb.state, PX_STATE_PAUSED) != 0 &&
			    strcmp(sb.state, PX_STATE_SUSPENDED) != 0 &&
			    strcmp(sb.state, PX_STATE_STOPPED) != 0) {
				snprintf(err, sizeof(err), "it is %s: only a "
				    "running, paused, suspended or stopped "
				    "sandbox moves", sb.state);
				drain_fail(d, d->cur, err);
				d->cur[0] = '\0';
				continue;
			}
			tmpl = sb.template_name[0] != '\0' ? sb.template_name :
			    PX_TEMPLATE_DEFAULT;
			if ((doc = ctl->hooks.fleet("hosts", ctl->hooks.arg)) ==
			    NULL) {
				drain_fail(d, d->cur, "no fleet view");
				d->cur[0] = '\0';
				continue;
			}
			self = json_string_value(json_object_get(doc, "self"));
			d->order = px_fleet_place(json_object_get(doc, "hosts"),
			    self, tmpl, NULL, NULL, &e);
			/* never this host, drained or not in its own view */
			if (d->order != NULL && self != NULL) {
				size_t i;

				for (i = 0; i < json_array_size(d->order); i++)
					if (strcmp(json_string_value(
					    json_array_get(d->order, i)), self) ==
					    0)
						json_array_remove(d->order, i--);
			}
			json_decref(doc);
			if (d->order == NULL || json_array_size(d->order) == 0) {
				drain_fail(d, d->cur, d->order == NULL ? e.msg :
				    "no other fleet host may take it");
				json_decref(d->order);
				d->order = NULL;
				d->cur[0] = '\0';
				continue;
			}
		}
		snprintf(d->to, sizeof(d->to), "%s", json_string_value(
		    json_array_get(d->order, d->tried)));
		d->tried++;
		d->moving = 1;
		status = 503;
		if (ctl->hooks.move(d->cur, d->to, drain_moved, d, &status, err,
		    sizeof(err), ctl->hooks.arg) == 0)
			return;
		/* it could not start: as a failed move */
		d->moving = 0;
		drain_moved(d, status, err, 0);
		return;
	}
}

/* The VM-backed sandboxes to move, by id. */
static int
drain_add(const struct px_sandbox *sb, void *arg)
{
	struct drain *d = arg;

	if (!sb->external) {
		json_array_append_new(d->todo, json_string(sb->id));
		d->total++;
	}
	return 0;
}

static int
drain_start(struct px_control *ctl, char *err, size_t errlen)
{
	struct drain *d = D;

	if (d->live && (d->moving || d->cur[0] != '\0')) {
		d->stop = 0;		/* drained again: go on */
		return 0;
	}
	api_drain_free();
	if ((d->todo = json_array()) == NULL ||
	    (d->moved = json_array()) == NULL ||
	    (d->failed = json_array()) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	d->ctl = ctl;
	d->started = api_now_ms();
	if (px_store_sandbox_list(ctl->store, drain_add, d, err, errlen) != 0)
		goto fail;
	d->live = 1;
	/* from the loop: the answer says it has begun */
	d->moving = json_array_size(d->todo) > 0;
	if (d->moving)
		event_base_once(ctl->base, -1, EV_TIMEOUT, drain_go, d, NULL);
	return 0;
fail:
	api_drain_free();
	return -1;
}

static void
drain_go(evutil_socket_t fd, short what, void *arg)
{
	struct drain *d = arg;

	(void)fd;
	(void)what;
	if (d->live)
		drain_next(d);
}

/* What a drain kept goes (berthd ending, or a new drain). */
void
api_drain_free(void)
{
	json_decref(D->todo);
	json_decref(D->moved);
	json_decref(D->failed);
	json_decref(D->order);
	memset(D, 0, sizeof(*D));
}

/*
 * POST /v1/fleet/drain {"host"?, "move"?}, POST /v1/fleet/undrain
 * {"host"?}, GET /v1/fleet/drain.
 */
void
api_fleet_drain(struct req *r)
{
	static const char *const fields[] = { "host", "move", NULL };
	struct px_control *ctl = r->c->ctl;
	int on = r->nseg == 3 && strcmp(r->seg[2], "drain") == 0, move = 1;
	const char *host = NULL, *self;
	json_t *obj = NULL, *doc, *v;
	char err[256], buf[64];

	if (r->method != HTTP_GET) {
		if ((obj = api_body_object(r, fields, 1)) == NULL)
			return;
		if (api_string_field(r, obj, "host", 1, &host) < 0)
			goto out;
		if ((v = json_object_get(obj, "move")) != NULL) {
			if (!json_is_boolean(v) || !on) {
				api_reply_error(r, 400, NULL, "move", on ?
				    "move is true or false" : "only a drain "
				    "moves sandboxes");
				goto out;
			}
			move = json_is_true(v);
		}
	}
	if (ctl->hooks.fleet == NULL || ctl->hooks.fleet_drain == NULL ||
	    (doc = ctl->hooks.fleet("hosts", ctl->hooks.arg)) == NULL) {
		api_reply_error(r, 404, NULL, NULL, "fleet mode is not configured "
		    "on this host");
		goto out;
	}
	self = json_string_value(json_object_get(doc, "self"));
	if (r->method == HTTP_GET) {
		api_reply_json(r, 200, json_pack("{s:s?, s:b, s:o}", "host",
		    self, "drained", json_is_true(json_object_get(doc,
		    "drained")), "move", drain_progress(D)));
	} else if (host != NULL && (self == NULL || strcmp(host, self) != 0)) {
		api_reply_error(r, 409, NULL, "host", "this is fleet host %s: "
		    "%s host '%s' through its own API", self ? self : "?",
		    on ? "drain" : "undrain", api_shown(buf, sizeof(buf), host));
	} else if (ctl->hooks.fleet_drain(on, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
	} else {
		if (!on && D->live)
			D->stop = 1;	/* after the move under way */
		if (on && move && ctl->hooks.move != NULL &&
		    drain_start(ctl, err, sizeof(err)) != 0) {
			/* drained; what moves is not known: said */
			api_reply_error(r, 500, NULL, NULL, "fleet host %s is "
			    "drained, but its sandboxes cannot be listed: %s",
			    self ? self : "?", err);
		} else
			api_reply_json(r, 200, json_pack("{s:s?, s:b, s:o}",
			    "host", self, "drained", on, "move", on && move &&
			    ctl->hooks.move != NULL ? drain_progress(D) :
			    json_null()));
	}
	json_decref(doc);
out:
	json_decref(obj);
}
