/*
 * api/sandboxes.c — /v1/sandboxes and /v1/sandboxes/ID: list, create, show, change
 * (PATCH), delete.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"
#include "fleet_place.h"

void
api_sandbox_list(struct req *r)
{
	struct page pg;
	struct list_ctx lc = { r->c->ctl, NULL, &pg, NULL };
	char err[256];
	int rc;

	if (api_page_parse(r, &pg) == -1)
		return;
	if ((lc.array = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_sandbox_list(r->c->ctl->store, api_add_sandbox, &lc, err,
	    sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	api_reply_json(r, 200, api_page_doc("sandboxes", lc.array, &pg));
}

#define FIELD(sb, f)	((char *)(sb) + (f)->off)

/*
 * The API names of the rows of sbfield.h with one of the flags, then
 * extra (or NULL), NULL-terminated: what a create or PATCH body may hold,
 * what only a microVM sandbox takes.
 */
static const char *const *
field_names(const char **buf, size_t size, unsigned flags,
    const char *const *extra)
{
	size_t i, n = 0;

	if (buf[0] != NULL)
		return buf;
	for (i = 0; i < px_nsbfields && n + 4 < size; i++)
		if (px_sbfields[i].flags & flags)
			buf[n++] = px_sbfields[i].api;
	for (i = 0; extra != NULL && extra[i] != NULL && n + 1 < size; i++)
		buf[n++] = extra[i];
	buf[n] = NULL;
	return buf;
}

/* A template's EXPOSEd ports (its template.json's "ports", which
 * mktemplate-image writes from the image's ExposedPorts), published as
 * `port publish` would with its defaults. The ones published, as the
 * API shows ports, or NULL with err. */
static json_t *
publish_exposed(struct px_control *ctl, const char *id, const char *dir,
    char *err, size_t errlen)
{
	char p[PATH_MAX];
	json_t *tj, *ports, *v, *out;
	struct px_port pt;
	size_t i;
	int created;

	if ((out = json_array()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (dir == NULL)
		return out;
	snprintf(p, sizeof(p), "%s/template.json", dir);
	tj = json_load_file(p, 0, NULL);
	ports = json_object_get(tj, "ports");
	json_array_foreach(ports, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 65535)
			continue;
		memset(&pt, 0, sizeof(pt));
		snprintf(pt.sandbox, sizeof(pt.sandbox), "%s", id);
		pt.port = (uint16_t)json_integer_value(v);
		pt.host_header = PX_HOST_PRESERVE;
		pt.visibility = PX_VIS_PUBLIC;
		if (px_store_port_set(ctl->store, &pt, &created, err,
		    errlen) != PX_STORE_OK) {
			json_decref(tj);
			json_decref(out);
			return NULL;
		}
		if (px_store_port_get(ctl->store, id, pt.port, &pt, err,
		    errlen) == PX_STORE_OK)
			json_array_append_new(out, api_port_json(ctl, &pt));
	}
	json_decref(tj);
	return out;
}

/* berth.conf's vm_* (read at each use: a reload applies), or defaults. */
static void
vm_limits(const struct px_control *ctl, unsigned def[3], unsigned max[3])
{
	const struct px_config *c = ctl->hooks.config;

	def[0] = c ? c->vm_memory : PX_VM_MEMORY_DEFAULT;
	def[1] = c ? c->vm_vcpus : PX_VM_VCPUS_DEFAULT;
	def[2] = c ? c->vm_disk : PX_VM_DISK_DEFAULT;
	max[0] = c ? c->vm_max_memory : PX_VM_MAX_MEMORY_DEFAULT;
	max[1] = c ? c->vm_max_vcpus : PX_VM_MAX_VCPUS_DEFAULT;
	max[2] = c ? c->vm_max_disk : PX_VM_MAX_DISK_DEFAULT;
}

/*
 * An optional size field (0: memory_mib, 1: vcpus, 2: disk_mib): *out
 * is the value asked for, or the default when absent. -1 after
 * replying 400 (saying which limit, and the berth.conf directive that
 * sets it).
 */
static int
size_field(struct req *r, json_t *obj, int i, unsigned *out)
{
	static const struct {
		const char *field, *unit, *directive;
		unsigned min;
	} f[3] = {
		{ "memory_mib", " MiB", "vm_max_memory", PX_VM_MEMORY_MIN },
		{ "vcpus", " vCPUs", "vm_max_vcpus", 1 },
		{ "disk_mib", " MiB", "vm_max_disk", PX_VM_DISK_MIN },
	};
	unsigned def[3], max[3];
	json_t *v = json_object_get(obj, f[i].field);
	json_int_t n;

	vm_limits(r->c->ctl, def, max);
	if (v == NULL || json_is_null(v)) {
		*out = def[i];
		return 0;
	}
	if (!json_is_integer(v)) {
		api_reply_error(r, 400, NULL, f[i].field, "must be a whole number%s",
		    f[i].unit);
		return -1;
	}
	n = json_integer_value(v);
	if (n < (json_int_t)f[i].min) {
		api_reply_error(r, 400, NULL, f[i].field, "%lld%s is below the "
		    "minimum of %u%s", (long long)n, f[i].unit, f[i].min,
		    f[i].unit);
		return -1;
	}
	if (n > (json_int_t)max[i]) {
		api_reply_error(r, 400, NULL, f[i].field, "%lld%s is above the "
		    "host's maximum of %u%s (%s in berth.conf)", (long long)n,
		    f[i].unit, max[i], f[i].unit, f[i].directive);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

/*
 * An idle limit field: a duration ("90s", "10m", "2h", "1d"), "never",
 * or null / absent. *out: 0 (absent or null: berth.conf's),
 * PX_IDLE_NEVER or ms; *given: 1 if the field was there. -1 after
 * replying 400.
 */
static int
idle_field(struct req *r, json_t *obj, const char *name, int64_t *out,
    int *given)
{
	json_t *v = json_object_get(obj, name);
	const char *text;
	char err[256], buf[64];
	uint64_t ms;

	*out = 0;
	*given = v != NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if ((text = json_string_value(v)) == NULL) {
		api_reply_error(r, 400, NULL, name, "must be a duration such as "
		    "\"10m\", \"never\" or null");
		return -1;
	}
	if (strcmp(text, "never") == 0) {
		*out = PX_IDLE_NEVER;
		return 0;
	}
	if (px_rule_duration(text, &ms, err, sizeof(err)) < 0) {
		api_reply_error(r, 400, NULL, name, "%s, or \"never\"", err);
		return -1;
	}
	if (ms < 1000 || ms > (uint64_t)3650 * 86400000) {
		api_reply_error(r, 400, NULL, name, "'%s': use 1s to 3650d, or "
		    "\"never\"", api_shown(buf, sizeof(buf), text));
		return -1;
	}
	*out = (int64_t)ms;
	return 0;
}

/*
 * An env field: an object of NAME: "value" strings, or null (none).
 * *out: its compact JSON text, "" for none; *given: 1 if it was there.
 * -1 after replying 400.
 */
static int
env_field(struct req *r, json_t *obj, const char *name, char *out,
    size_t size, int *given)
{
	json_t *v = json_object_get(obj, name), *e;
	const char *key;
	char buf[64];
	size_t n;

	*out = '\0';
	*given = v != NULL;
	if (v == NULL || json_is_null(v) || (json_is_object(v) &&
	    json_object_size(v) == 0))
		return 0;
	if (!json_is_object(v)) {
		api_reply_error(r, 400, NULL, name, "must be an object of NAME: "
		    "\"value\" strings, or null");
		return -1;
	}
	json_object_foreach(v, key, e)
		if (!api_env_name_ok(key) || !json_is_string(e) ||
		    strlen(json_string_value(e)) != json_string_length(e)) {
			api_reply_error(r, 400, NULL, name, "'%s': names are "
			    "[A-Za-z_][A-Za-z0-9_]*, values strings without NUL",
			    api_shown(buf, sizeof(buf), key));
			return -1;
		}
	n = json_dumpb(v, out, size - 1, JSON_COMPACT | JSON_SORT_KEYS);
	if (n == 0 || n >= size - 1) {
		api_reply_error(r, 400, NULL, name, "at most %zu bytes as JSON",
		    size - 2);
		*out = '\0';
		return -1;
	}
	out[n] = '\0';
	return 0;
}

/*
 * The fields of a create (flag PF_CREATE) or PATCH (PF_PATCH) body that
 * sbfield.h's rows describe whole: counts, idle limits, env (the others
 * are create's own). Bit i of *which: row i was given. -1 after
 * replying 400.
 */
static int
fields_parse(struct req *r, json_t *obj, unsigned flag, struct px_sandbox *sb,
    unsigned long *which)
{
	const struct px_sbfield *f;
	size_t i;
	int given, rc;

	for (i = 0; i < px_nsbfields; i++) {
		f = &px_sbfields[i];
		if (!(f->flags & flag))
			continue;
		given = json_object_get(obj, f->api) != NULL;
		switch (f->kind) {
		case PF_COUNT:
			rc = size_field(r, obj, (int)f->arg,
			    (unsigned *)FIELD(sb, f));
			break;
		case PF_IDLE:
			rc = idle_field(r, obj, f->api, (int64_t *)FIELD(sb, f),
			    &given);
			break;
		case PF_ENV:
			rc = env_field(r, obj, f->api, FIELD(sb, f), f->size,
			    &given);
			break;
		default:
			continue;
		}
		if (rc == -1)
			return -1;
		if (given)
			*which |= 1UL << i;
	}
	return 0;
}

/* A stored idle limit as libvmm takes it. */
static uint64_t
idle_vm(int64_t ms)
{
	return ms == PX_IDLE_NEVER ? PX_VM_NEVER : ms > 0 ? (uint64_t)ms : 0;
}

/* The template field of a create: 0 with *dir (NULL: the default) set,
 * -1 after replying. */
static int
template_field(struct req *r, json_t *obj, char *name, size_t namelen,
    struct px_template *t, const char **dir)
{
	const char *v;
	char buf[64], err[256];
	int rc;

	*dir = NULL;
	snprintf(name, namelen, "%s", PX_TEMPLATE_DEFAULT);
	if ((rc = api_string_field(r, obj, "template", 1, &v)) < 0)
		return -1;
	if (v == NULL || strcmp(v, PX_TEMPLATE_DEFAULT) == 0)
		return 0;
	if (!px_template_name_valid(v)) {
		api_reply_error(r, 400, NULL, "template", "not a valid template "
		    "name: '%s'", api_shown(buf, sizeof(buf), v));
		return -1;
	}
	rc = px_store_template_get(r->c->ctl->store, v, t, err, sizeof(err));
	if (rc == PX_STORE_NOTFOUND) {
		api_reply_error(r, 400, NULL, "template", "no template '%s' (see "
		    "GET /v1/templates, netctl template ls)", v);
		return -1;
	}
	if (rc != PX_STORE_OK) {
		api_reply_store(r, rc, "template", err);
		return -1;
	}
	snprintf(name, namelen, "%s", v);
	*dir = t->dir;
	return 0;
}

/* Fleet mode: the id of the host other than this one that holds sandbox
 * id (malloc'd), or NULL; *up: whether that host holds a live lease. A
 * lost host's placement still holds its ids: the first claim of an id
 * wins on every edge (fleet_view.h), so a second one would never be
 * routed. */
static char *
fleet_sandbox_owner(struct px_control *ctl, const char *id, int *up)
{
	json_t *doc, *sb;
	const char *self, *h;
	char *owner = NULL;
	size_t i;

	if (ctl->hooks.fleet == NULL ||
	    (doc = ctl->hooks.fleet("sandboxes", ctl->hooks.arg)) == NULL)
		return NULL;
	self = json_string_value(json_object_get(doc, "self"));
	json_array_foreach(json_object_get(doc, "sandboxes"), i, sb) {
		const char *sid = json_string_value(json_object_get(sb, "id"));

		h = json_string_value(json_object_get(sb, "host"));
		if (owner == NULL && sid != NULL && strcmp(sid, id) == 0 &&
		    h != NULL && (self == NULL || strcmp(h, self) != 0)) {
			owner = strdup(h);
			*up = json_is_true(json_object_get(sb, "host_up"));
		}
	}
	json_decref(doc);
	return owner;
}

/*
 * Fleet placement (issue 33): a create names no host, or another one, or
 * a zone: fleet_place.c ranks the hosts that may take it; the first is
 * asked (this one: created here, no hop), and when it refuses or fails
 * (no answer, 5xx, 507) the next one, once. The answer is the one the
 * host that took it gave, with "host" and what failed first; the
 * sandbox's "create" event, on that host, says the same.
 */
#define PLACE_TRIES	2
#define PLACE_NOTE_MAX	512

struct placing {
	struct px_control *ctl;
	struct conn *c;
	uint64_t serial;
	enum http_method method;
	json_t *obj;		/* the create's body */
	json_t *order;		/* host ids, best first */
	size_t next;		/* the next one to ask */
	int tries;
	int capacity;		/* each failure so far was "no room" */
	char self[40];
	char id[PX_SANDBOX_ID_MAX + 1];
	char failed[PLACE_NOTE_MAX];	/* "b: why; c: why" */
};

static void place_try(struct placing *p);

static void
placing_free(struct placing *p)
{
	json_decref(p->obj);
	json_decref(p->order);
	free(p);
}

/* the connection that asked, if it is still there */
static struct conn *
placing_conn(struct placing *p)
{
	return api_conn_find(p->ctl, p->c, p->serial);
}

static void
place_failed(struct placing *p, const char *host, const char *why, int capacity)
{
	size_t n = strlen(p->failed);

	snprintf(p->failed + n, sizeof(p->failed) - n, "%s%s: %s", n ? "; " : "",
	    host, why);
	p->capacity = p->capacity && capacity;
}

/* the message of an error document, or "" */
static const char *
error_message(json_t *doc)
{
	const char *m = json_string_value(json_object_get(json_object_get(doc,
	    "error"), "message"));

	return m != NULL ? m : "";
}

static void
place_done(void *arg, int status, const char *body, size_t len, const char *err)
{
	struct placing *p = arg;
	const char *host = json_string_value(json_array_get(p->order, p->next - 1));
	json_t *doc = NULL;
	struct conn *c;
	struct req r;
	char why[300], hdr[80];

	if (status != 0 && len > 0)
		doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	if (status == 0 || status >= 500) {
		snprintf(why, sizeof(why), "%s", status == 0 ? (err ? err : "no answer") :
		    error_message(doc));
		if (status != 0 && why[0] == '\0')
			snprintf(why, sizeof(why), "HTTP %d", status);
		place_failed(p, host, why, status == 507 || (status == 503 &&
		    json_string_value(json_object_get(json_object_get(doc, "error"),
		    "code")) != NULL && strcmp(json_string_value(json_object_get(
		    json_object_get(doc, "error"), "code")), "capacity") == 0));
		json_decref(doc);
		place_try(p);
		return;
	}
	if ((c = placing_conn(p)) == NULL) {	/* the caller went */
		json_decref(doc);
		placing_free(p);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = p->method;
	if (!json_is_object(doc)) {
		json_decref(doc);
		api_reply_error(&r, 502, NULL, NULL, "fleet host %s answered the create "
		    "of sandbox '%s' with HTTP %d and no JSON", host, p->id, status);
	} else {
		json_object_set_new(doc, "host", json_string(host));
		if (strcmp(host, p->self) != 0)
			json_object_set_new(doc, "remote", json_true());
		if (p->failed[0] != '\0')
			json_object_set_new(doc, "placement_failed", json_string(p->failed));
		snprintf(hdr, sizeof(hdr), "Berth-Host: %s\r\n", host);
		api_reply_json_hdr(&r, status, doc, hdr);
	}
	placing_free(p);
	api_conn_resume(c);
}

/* Asks the next host, or answers what failed. */
static void
place_try(struct placing *p)
{
	const char *host = json_string_value(json_array_get(p->order, p->next));
	struct conn *c = placing_conn(p);
	char err[256], *text;
	json_t *body;
	struct req r;

	if (c == NULL) {
		placing_free(p);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = p->method;
	if (host == NULL || p->tries == PLACE_TRIES) {
		if (p->capacity)
			api_reply_error_code(&r, 507, "no_room", "no fleet host took "
			    "sandbox '%s': %s", p->id, p->failed);
		else
			api_reply_error_code(&r, 502, "placement_failed", "no fleet "
			    "host took sandbox '%s': %s", p->id, p->failed);
		placing_free(p);
		api_conn_resume(c);
		return;
	}
	p->next++;
	p->tries++;
	body = json_deep_copy(p->obj);
	json_object_set_new(body, "host", json_string(host));
	json_object_del(body, "zone");
	/* this host too: the hook creates it here, with no network hop,
	 * and its answer comes back here, so that a refusal tries the next */
	if (p->failed[0] != '\0')
		json_object_set_new(body, "placement", json_string(p->failed));
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL || p->ctl->hooks.fleet_forward(host, text, strlen(text),
	    place_done, p, err, sizeof(err), p->ctl->hooks.arg) != 0) {
		free(text);
		place_failed(p, host, text == NULL ? "out of memory" : err, 0);
		place_try(p);
		return;
	}
	free(text);
}

/*
 * 0: create it here; 1: answered (an error) or placed elsewhere (the
 * answer comes later).
 */
/* This host's own templates are what its store says now, not what it
 * last published (a template just added is placed on here at once). */
static void
self_template(struct px_control *ctl, json_t *hosts, const char *self,
    const char *tmpl)
{
	struct px_template t;
	json_t *h, *room, *ts;
	char err[256];
	size_t i;

	if (self == NULL || tmpl == NULL ||
	    strcmp(tmpl, PX_TEMPLATE_DEFAULT) == 0 ||
	    px_store_template_get(ctl->store, tmpl, &t, err, sizeof(err)) !=
	    PX_STORE_OK)
		return;
	json_array_foreach(hosts, i, h) {
		if (!json_is_string(json_object_get(h, "id")) ||
		    strcmp(json_string_value(json_object_get(h, "id")),
		    self) != 0 ||
		    !json_is_object(room = json_object_get(h, "room")))
			continue;
		/* (a host that publishes templates: one that runs VMs) */
		if (json_is_array(ts = json_object_get(room, "templates")))
			json_array_append_new(ts, json_string(tmpl));
	}
}

static int
fleet_place(struct req *r, json_t *obj, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct px_place_err e;
	struct placing *p;
	const char *host, *zone, *tmpl, *self, *note;
	json_t *doc, *order;
	char buf[64];

	if (api_string_field(r, obj, "host", 1, &host) < 0 ||
	    api_string_field(r, obj, "zone", 1, &zone) < 0 ||
	    api_string_field(r, obj, "placement", 1, &note) < 0)
		return 1;
	if (note != NULL && r->c->fleet_peer[0] == '\0') {
		api_reply_error(r, 400, NULL, "placement", "only a fleet host says "
		    "this");
		return 1;
	}
	if (ctl->hooks.fleet == NULL || ctl->hooks.fleet_forward == NULL) {
		if (host != NULL || zone != NULL) {
			api_reply_error(r, 400, NULL, host ? "host" : "zone", "fleet "
			    "mode is not configured on this host");
			return 1;
		}
		return 0;
	}
	if ((doc = ctl->hooks.fleet("hosts", ctl->hooks.arg)) == NULL)
		return 0;
	self = json_string_value(json_object_get(doc, "self"));
	if (r->c->fleet_peer[0] != '\0') {
		/* placed here by a peer: made here, never placed again */
		if (host == NULL || self == NULL || strcmp(host, self) != 0 ||
		    zone != NULL) {
			api_reply_error(r, 400, NULL, "host", "a create fleet host %s "
			    "forwarded must name this host", r->c->fleet_peer);
			json_decref(doc);
			return 1;
		}
		/* drained since the peer's view: it tries the next host */
		if (json_is_true(json_object_get(doc, "drained"))) {
			api_reply_error_code(r, 507, "drained", "fleet host %s "
			    "is drained: it takes no new sandbox", self);
			json_decref(doc);
			return 1;
		}
		json_decref(doc);
		return 0;
	}
	/* an external sandbox is where its address is: here */
	if (json_object_get(obj, "address") != NULL &&
	    !json_is_null(json_object_get(obj, "address"))) {
		if ((host != NULL && (self == NULL || strcmp(host, self) != 0)) ||
		    zone != NULL) {
			api_reply_error(r, 400, NULL, host ? "host" : "zone", "an "
			    "external sandbox (address) is created on the host "
			    "whose API is asked");
			json_decref(doc);
			return 1;
		}
		json_decref(doc);
		return 0;
	}
	if (host != NULL && !px_fleet_place_name_ok(host)) {
		api_reply_error(r, 400, NULL, "host", "not a fleet host id: '%s'",
		    api_shown(buf, sizeof(buf), host));
		json_decref(doc);
		return 1;
	}
	if (zone != NULL && !px_fleet_place_name_ok(zone)) {
		api_reply_error(r, 400, NULL, "zone", "not a fleet zone: '%s'",
		    api_shown(buf, sizeof(buf), zone));
		json_decref(doc);
		return 1;
	}
	if (api_string_field(r, obj, "template", 1, &tmpl) < 0) {
		json_decref(doc);
		return 1;
	}
	if (tmpl != NULL && !px_template_name_valid(tmpl)) {
		api_reply_error(r, 400, NULL, "template", "not a valid template "
		    "name: '%s'", api_shown(buf, sizeof(buf), tmpl));
		json_decref(doc);
		return 1;
	}
	self_template(ctl, json_object_get(doc, "hosts"), self, tmpl);
	order = px_fleet_place(json_object_get(doc, "hosts"), self,
	    tmpl != NULL ? tmpl : PX_TEMPLATE_DEFAULT, host, zone, &e);
	if (order == NULL) {
		api_reply_error_code(r, e.status, e.code, "%s", e.msg);
		json_decref(doc);
		return 1;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		api_reply_error(r, 503, NULL, NULL, "out of memory");
		json_decref(order);
		json_decref(doc);
		return 1;
	}
	p->ctl = ctl;
	p->c = r->c;
	p->serial = r->c->serial;
	p->method = r->method;
	p->obj = json_incref(obj);
	p->order = order;
	p->capacity = 1;
	snprintf(p->self, sizeof(p->self), "%s", self ? self : "");
	snprintf(p->id, sizeof(p->id), "%s", id);
	json_decref(doc);
	/* answered later: read no further request meanwhile (lifecycle.c) */
	r->c->waiting = 1;
	bufferevent_set_timeouts(r->c->bev, NULL, NULL);
	place_try(p);
	return 1;
}

/* The sandbox's "create" event in fleet mode: where it was placed,
 * from where, what failed first. */
static void
place_event(struct req *r, json_t *obj, const char *id, const char *self)
{
	const char *note = json_string_value(json_object_get(obj, "placement"));
	char why[PLACE_NOTE_MAX + 128];

	snprintf(why, sizeof(why), "placed on host %s%s%s%s%s", self ? self : "?",
	    r->c->fleet_peer[0] ? " by fleet host " : "", r->c->fleet_peer,
	    note && *note ? " after " : "", note && *note ? note : "");
	api_record_event(r->c->ctl, id, "create", "ok", why, -1);
}

void
api_sandbox_create(struct req *r)
{
	static const char *fbuf[32], *vbuf[32];
	static const char *const vm_only[] = { "boot", "publish_exposed", NULL };
	static const char *const extra[] = { "boot", "publish_exposed", "host",
	    "zone", "placement", NULL };
	const char *const *fields = field_names(fbuf, 32, PF_CREATE, extra);
	const char *const *vm_fields = field_names(vbuf, 32, PF_VM, vm_only);
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct px_token tok;
	struct px_template tpl;
	struct px_vm_spec spec;
	const char *id, *addr, *mode, *const *f;
	char err[256], buf[64], secret[PX_TOKEN_LEN + 1];
	json_t *obj, *doc;
	char *owner;
	unsigned long which = 0;
	int rc, up = 0, exposed = 0;
	json_t *ports = NULL, *fleet = NULL;

	memset(secret, 0, sizeof(secret));
	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = api_string_field(r, obj, "id", 0, &id)) <= 0) {
		if (rc == 0)
			api_reply_error(r, 400, NULL, "id", "required");
		goto out;
	}
	if (api_check_sandbox_id(r, "id", -1, id) == -1)
		goto out;
	if ((owner = fleet_sandbox_owner(ctl, id, &up)) != NULL) {
		api_reply_error(r, 409, NULL, "id", "sandbox id '%s' belongs to fleet "
		    "host %s, which is %s: sandbox ids are unique in a fleet", id,
		    owner, up ? "up" : "down (its placement in etcd still holds the id)");
		free(owner);
		goto out;
	}
	if (fleet_place(r, obj, id) != 0)
		goto out;
	if ((rc = api_string_field(r, obj, "address", 0, &addr)) < 0)
		goto out;
	if (rc == 0 && ctl->hooks.vm_create == NULL) {
		api_reply_error(r, 400, NULL, "address", "this berthd runs no VMM: "
		    "give the address of an externally managed sandbox");
		goto out;
	}
	if (addr != NULL && !px_valid_ip(addr)) {
		api_reply_error(r, 400, NULL, "address", "not an IP address: '%s'",
		    api_shown(buf, sizeof(buf), addr));
		goto out;
	}
	if (addr != NULL)
		for (f = vm_fields; *f != NULL; f++)
			if (json_object_get(obj, *f) != NULL) {
				api_reply_error(r, 400, NULL, *f, "applies only to "
				    "a microVM sandbox, not to an external one "
				    "(address)");
				goto out;
			}
	if (api_string_field(r, obj, "egress_mode", 1, &mode) < 0)
		goto out;
	if (mode != NULL && px_mode_rank(mode) < 0) {
		api_reply_error(r, 400, NULL, "egress_mode", "must be 'open', "
		    "'allowlist' or 'closed', not '%s'", api_shown(buf, sizeof(buf),
		    mode));
		goto out;
	}
	memset(&sb, 0, sizeof(sb));
	memset(&spec, 0, sizeof(spec));
	if (addr == NULL) {
		if (fields_parse(r, obj, PF_CREATE, &sb, &which) == -1 ||
		    template_field(r, obj, sb.template_name,
		    sizeof(sb.template_name), &tpl, &spec.template_dir) == -1)
			goto out;
		spec.template_name = sb.template_name;
		{
			json_t *bv = json_object_get(obj, "boot");

			if (bv != NULL && !json_is_boolean(bv) &&
			    !json_is_null(bv)) {
				api_reply_error(r, 400, NULL, "boot", "must be true "
				    "or false");
				goto out;
			}
			spec.boot = json_is_true(bv);
			bv = json_object_get(obj, "publish_exposed");
			if (bv != NULL && !json_is_boolean(bv) &&
			    !json_is_null(bv)) {
				api_reply_error(r, 400, NULL, "publish_exposed",
				    "must be true or false");
				goto out;
			}
			exposed = json_is_true(bv);
		}
		/* no memory asked for: the template's own (Debian's 1 GiB),
		 * within vm_max_memory, else vm_memory */
		if (json_object_get(obj, "memory_mib") == NULL &&
		    ctl->hooks.vm_template_mem != NULL) {
			unsigned def[3], max[3], tm;

			vm_limits(ctl, def, max);
			tm = ctl->hooks.vm_template_mem(spec.template_dir,
			    ctl->hooks.arg);
			if (tm > 0)
				sb.mem_mib = tm < max[0] ? tm : max[0];
		}
		spec.mem_mib = sb.mem_mib;
		spec.vcpus = sb.vcpus;
		spec.disk_mib = sb.disk_mib;
		spec.idle_pause_ms = idle_vm(sb.idle_pause_ms);
		spec.idle_suspend_ms = idle_vm(sb.idle_suspend_ms);
		spec.max_lifetime_ms = idle_vm(sb.max_lifetime_ms);
	}
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	snprintf(sb.address, sizeof(sb.address), "%s", addr ? addr : "");
	sb.external = addr != NULL;
	snprintf(sb.state, sizeof(sb.state), "%s",
	    addr ? PX_STATE_RUNNING : PX_STATE_CREATING);
	snprintf(sb.egress_mode, sizeof(sb.egress_mode), "%s", mode ? mode : "");
	sb.created = (int64_t)time(NULL);
	memset(&tok, 0, sizeof(tok));
	if (px_token_generate(secret, tok.id, err, sizeof(err)) == -1) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
		goto out;
	}
	px_token_hash_hex(secret, strlen(secret), tok.sha256);
	snprintf(tok.name, sizeof(tok.name), "sandbox %s", sb.id);
	tok.created = sb.created;
	rc = px_store_sandbox_create(ctl->store, &sb, &tok, err, sizeof(err));
	if (rc == PX_STORE_NOTFOUND) {
		/* its template went meanwhile */
		api_reply_error(r, 400, NULL, "template", "%s", err);
		goto out;
	}
	if (rc != PX_STORE_OK) {
		api_reply_store(r, rc, "id", err);
		goto out;
	}
	if (!sb.external && (rc = ctl->hooks.vm_create(sb.id, &spec, err,
	    sizeof(err), ctl->hooks.arg)) != 0) {
		char e2[256];

		(void)px_store_sandbox_rm(ctl->store, sb.id, e2, sizeof(e2));
		/* -2: a build under way, minutes long; a failed one is not
		 * retried by waiting, so it gets no Retry-After; -3: a cap
		 * with nothing idle to suspend */
		if (rc == -3)
			api_reply_capacity(r, "cannot create sandbox '%s': %s",
			    sb.id, err);
		else
			api_reply_error_hdr(r, 503, rc == -2 ?
			    "Retry-After: 30\r\n" : NULL,
			    "cannot create sandbox '%s': %s", sb.id, err);
		goto out;
	}
	/* its image's EXPOSEd ports: a port that cannot be stored is said
	 * (ports_error), the sandbox stays (port publish can try again) */
	if (exposed && (ports = publish_exposed(ctl, sb.id, spec.template_dir !=
	    NULL ? spec.template_dir : ctl->template_dir, err,
	    sizeof(err))) == NULL)
		exposed = 2;
	api_routes_changed(ctl);
	if (ctl->hooks.fleet != NULL && ctl->hooks.fleet_forward != NULL)
		fleet = ctl->hooks.fleet("hosts", ctl->hooks.arg);
	if (fleet != NULL)
		place_event(r, obj, sb.id, json_string_value(json_object_get(fleet,
		    "self")));
	if ((doc = api_sandbox_json(ctl, &sb)) != NULL) {
		if (fleet != NULL)
			json_object_set(doc, "host", json_object_get(fleet, "self"));
		json_object_set_new(doc, "token", json_string(secret));
		json_object_set_new(doc, "token_id", json_string(tok.id));
		if (exposed)
			json_object_set_new(doc, "ports", ports != NULL ? ports :
			    json_array());
		if (exposed == 2)
			json_object_set_new(doc, "ports_error", json_string(err));
	} else
		json_decref(ports);
	api_reply_json(r, 201, doc);
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	json_decref(fleet);
	json_decref(obj);
}

/* PATCH /v1/sandboxes/{id}: what sbfield.h marks PF_PATCH (the idle
 * limits and env of a VM-backed sandbox). */
void
api_sandbox_set(struct req *r)
{
	const char *id = r->id;
	static const char *fbuf[32];
	const char *const *fields = field_names(fbuf, 32, PF_PATCH, NULL);
	struct px_control *ctl = r->c->ctl;
	const struct px_sbfield *f;
	struct px_sandbox sb, v;
	unsigned long which = 0;
	unsigned idle = 0;
	char err[256], why[512] = "", txt[32], names[256] = "";
	json_t *obj;
	size_t i;
	int rc;

	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	memset(&v, 0, sizeof(v));
	if (fields_parse(r, obj, PF_PATCH, &v, &which) == -1)
		goto out;
	for (i = 0; i < px_nsbfields; i++) {
		f = &px_sbfields[i];
		if (!(f->flags & PF_PATCH))
			continue;
		snprintf(names + strlen(names), sizeof(names) - strlen(names),
		    "%s%s", names[0] ? ", " : "", f->api);
		if (!(which & (1UL << i)))
			continue;
		if (f->kind == PF_IDLE) {
			idle |= f->arg;
			if (*(int64_t *)FIELD(&v, f) == 0)
				snprintf(txt, sizeof(txt), "berth.conf's");
			else
				api_span_text(idle_vm(*(int64_t *)FIELD(&v, f)),
				    txt, sizeof(txt));
		} else if (f->kind == PF_ENV)
			snprintf(txt, sizeof(txt), "%s", *FIELD(&v, f) ?
			    "set" : "none");
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s %s",
		    why[0] ? ", " : "", f->api, txt);
	}
	if (which == 0) {
		api_reply_error(r, 400, NULL, NULL, "give at least one of %s",
		    names);
		goto out;
	}
	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	if (sb.external) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is external: berth "
		    "runs no VM for it, so it has no idle policy or env", id);
		goto out;
	}
	if ((rc = px_store_sandbox_set(ctl->store, id, &v, which, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	if (idle != 0 && ctl->hooks.vm_set_idle != NULL)
		ctl->hooks.vm_set_idle(id, idle_vm(sb.idle_pause_ms),
		    idle_vm(sb.idle_suspend_ms), idle_vm(sb.max_lifetime_ms),
		    ctl->hooks.arg);
	api_record_event(ctl, id, "set", "ok", why, -1);
	api_reply_json(r, 200, api_sandbox_json(ctl, &sb));
out:
	json_decref(obj);
}

void
api_sandbox_show(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	struct list_ctx lc = { ctl, NULL, NULL, NULL };
	struct px_sandbox sb;
	char err[256];
	json_t *obj;
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if ((lc.array = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_port_list(ctl->store, id, api_add_port, &lc, err, sizeof(err));
	if (rc != 0) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	if ((obj = api_sandbox_json(ctl, &sb)) == NULL ||
	    json_object_set_new(obj, "ports", lc.array) == -1) {
		json_decref(obj);
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	if (ctl->hooks.vm_standby != NULL) {
		const char *s = ctl->hooks.vm_standby(id, ctl->hooks.arg);

		if (s != NULL)
			json_object_set_new(obj, "standby", json_string(s));
	}
	if (ctl->hooks.vm_info != NULL) {
		json_t *vm = ctl->hooks.vm_info(id, ctl->hooks.arg);

		if (vm != NULL)
			json_object_set_new(obj, "vm", vm);
	}
	api_reply_json(r, 200, obj);
}

void
api_sandbox_delete(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_rm(ctl->store, id, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.vm_delete != NULL)
		ctl->hooks.vm_delete(id, ctl->hooks.arg);
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	api_reply_empty(r, 204);
}
