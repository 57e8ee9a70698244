/*
 * api/reply.c — answers (the JSON error document and its codes), the
 * documents and pagination several resources share, request bodies
 * checked against the fields a route accepts, and what every family
 * tells berthd (the routes changed, a sandbox's event).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

/* ---- small helpers ---- */

/* Copies s for use inside messages: printable ASCII only, at most max. */
const char *
api_shown(char *buf, size_t size, const char *s)
{
	size_t i, max = size - 1;

	for (i = 0; s[i] != '\0' && i < max; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (s[i] != '\0' && i >= 3)
		memcpy(buf + i - 3, "...", 3);
	buf[i] = '\0';
	return buf;
}

int
px_control_url(char *buf, size_t len, const char *domain, unsigned https_port,
    const char *sandbox, unsigned port, const char *host)
{
	char portpart[16] = "";

	if (https_port != 443 && https_port != 0)
		snprintf(portpart, sizeof(portpart), ":%u", https_port);
	if (host != NULL)
		return snprintf(buf, len, "https://%s%s/", host, portpart);
	return snprintf(buf, len, "https://%u-%s.%s%s/", port, sandbox, domain,
	    portpart);
}

/* ---- responses ---- */

void
api_respond(struct conn *c, int status, const char *ctype, const char *extra,
    const void *body, size_t len, int head_only)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	int cls = status / 100;

	if (cls >= 1 && cls <= 5)
		c->ctl->responses[cls]++;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, px_status_text(status));
	if (status != 204) {
		evbuffer_add_printf(out, "Content-Type: %s\r\n"
		    "Content-Length: %zu\r\n", ctype, len);
	}
	evbuffer_add_printf(out, "Cache-Control: no-store\r\n%s%s\r\n",
	    extra ? extra : "", c->closing ? "Connection: close\r\n" : "");
	if (!head_only && status != 204 && len > 0)
		evbuffer_add(out, body, len);
}

/* Sends obj (reference stolen) as the JSON body; extra: header lines. */
void
api_reply_json_hdr(struct req *r, int status, json_t *obj, const char *extra)
{
	char *text;

	if (obj == NULL ||
	    (text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII)) == NULL) {
		static const char oom[] = "{\"error\":{\"status\":500,\"code\":"
		    "\"internal\",\"message\":\"cannot encode the response\"}}\n";

		json_decref(obj);
		api_respond(r->c, 500, "application/json", NULL, oom,
		    sizeof(oom) - 1, r->method == HTTP_HEAD);
		return;
	}
	json_decref(obj);
	{
		size_t n = strlen(text);
		char *withnl = realloc(text, n + 2);

		if (withnl != NULL) {
			text = withnl;
			text[n++] = '\n';
			text[n] = '\0';
		}
		api_respond(r->c, status, "application/json", extra, text, n,
		    r->method == HTTP_HEAD);
	}
	free(text);
}

void
api_reply_json(struct req *r, int status, json_t *obj)
{
	api_reply_json_hdr(r, status, obj, NULL);
}

const char *
px_control_error_code(int status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 408: return "timeout";
	case 409: return "conflict";
	case 413: return "payload_too_large";
	case 414: return "uri_too_long";
	case 417: return "expectation_failed";
	case 431: return "header_too_large";
	case 501: return "not_implemented";
	case 505: return "http_version_not_supported";
	case 503: return "unavailable";
	case 507: return "insufficient_storage";
	default: return status >= 500 ? "internal" : "bad_request";
	}
}

static void __attribute__((format(printf, 7, 0)))
vreply_error_code(struct req *r, int status, const char *code,
    const char *allow, const char *field, const char *extra, const char *fmt,
    va_list ap)
{
	char msg[512], clean[512], hdr[192] = "";
	json_t *e;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* Messages quote client input: keep them valid UTF-8 (ASCII). */
	api_shown(clean, sizeof(clean), msg);
	e = json_pack("{s:{s:i, s:s}}", "error", "status", status,
	    "code", code != NULL ? code : px_control_error_code(status));
	if (e != NULL && field != NULL)
		json_object_set_new(json_object_get(e, "error"), "field",
		    json_string(field));
	if (e != NULL)
		json_object_set_new(json_object_get(e, "error"), "message",
		    json_string(clean));
	if (allow != NULL)
		snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
	if (extra != NULL)
		snprintf(hdr + strlen(hdr), sizeof(hdr) - strlen(hdr), "%s", extra);
	api_reply_json_hdr(r, status, e, hdr);
}

static void __attribute__((format(printf, 6, 0)))
vreply_error(struct req *r, int status, const char *allow, const char *field,
    const char *extra, const char *fmt, va_list ap)
{
	vreply_error_code(r, status, NULL, allow, field, extra, fmt, ap);
}

/* 503 "capacity": a cap (vm_max_running, vm_max_resident) is reached and
 * no sandbox could be suspended to make room; another try may find one
 * idle. */
void __attribute__((format(printf, 2, 3)))
api_reply_capacity(struct req *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply_error_code(r, 503, "capacity", NULL, NULL, "Retry-After: 5\r\n",
	    fmt, ap);
	va_end(ap);
}

/* An error with the code the operation gave (NULL: the status's). */
void __attribute__((format(printf, 4, 5)))
api_reply_error_code(struct req *r, int status, const char *code,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply_error_code(r, status, code, NULL, NULL, code != NULL &&
	    strcmp(code, "capacity") == 0 ? "Retry-After: 5\r\n" : NULL, fmt,
	    ap);
	va_end(ap);
}

void __attribute__((format(printf, 5, 6)))
api_reply_error(struct req *r, int status, const char *allow, const char *field,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply_error(r, status, allow, field, NULL, fmt, ap);
	va_end(ap);
}

/* reply_error with extra header lines (each ending in CRLF). */
void __attribute__((format(printf, 4, 5)))
api_reply_error_hdr(struct req *r, int status, const char *extra,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply_error(r, status, NULL, NULL, extra, fmt, ap);
	va_end(ap);
}

void
api_reply_empty(struct req *r, int status)
{
	api_respond(r->c, status, "application/json", NULL, "", 0, 1);
}

/* Maps a store failure to a reply; err is the store's message. */
void
api_reply_store(struct req *r, int rc, const char *field, const char *err)
{
	switch (rc) {
	case PX_STORE_NOTFOUND:
		api_reply_error(r, 404, NULL, NULL, "%s", err);
		break;
	case PX_STORE_EXISTS:
		api_reply_error(r, 409, NULL, field, "%s", err);
		break;
	case PX_STORE_CONFLICT:
		api_reply_error(r, 409, NULL, field, "%s", err);
		break;
	case PX_STORE_BUSY:
		/* Nothing was written: the client may simply try again. */
		api_reply_error_hdr(r, 503, "Retry-After: 1\r\n",
		    "state store busy, nothing changed, retry: %s", err);
		break;
	case PX_STORE_FULL:
		api_reply_error_hdr(r, 507, "Retry-After: 10\r\n",
		    "state store full, nothing changed: %s", err);
		break;
	default:
		api_reply_error(r, 500, NULL, NULL, "state store: %s", err);
		break;
	}
}

/* ---- JSON documents ---- */

/* A duration as the API writes it: the largest unit that is exact. */
void
api_span_text(uint64_t ms, char *buf, size_t len)
{
	static const struct { uint64_t ms; const char *unit; } units[] = {
		{ 86400000, "d" }, { 3600000, "h" }, { 60000, "m" },
		{ 1000, "s" },
	};
	size_t i;

	if (ms == PX_VM_NEVER) {
		snprintf(buf, len, "never");
		return;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ms % units[i].ms == 0) {
			snprintf(buf, len, "%llu%s", (unsigned long long)
			    (ms / units[i].ms), units[i].unit);
			return;
		}
	snprintf(buf, len, "%llums", (unsigned long long)ms);
}

/* A stored idle limit (0: berth.conf's, PX_IDLE_NEVER) as JSON. */
static json_t *
idle_json(int64_t ms)
{
	char buf[32];

	if (ms == 0)
		return json_null();
	api_span_text(ms == PX_IDLE_NEVER ? PX_VM_NEVER : (uint64_t)ms, buf,
	    sizeof(buf));
	return json_string(buf);
}

/*
 * The limit that applies to a sandbox: its own, else berth.conf's, else
 * libvmm's default (5 min pause, 30 min suspend, no lifetime limit).
 */
static json_t *
idle_effective(const struct px_control *ctl, int64_t own, int which)
{
	const struct px_config *c = ctl->hooks.config;
	uint64_t ms;
	char buf[32];

	if (own != 0)
		ms = own == PX_IDLE_NEVER ? PX_VM_NEVER : (uint64_t)own;
	else if (which == PX_IDLE_PAUSE)
		ms = c != NULL && c->idle_pause ? c->idle_pause : 5 * 60000;
	else if (which == PX_IDLE_SUSPEND)
		ms = c != NULL && c->idle_suspend ? c->idle_suspend : 30 * 60000;
	else
		ms = PX_VM_NEVER;
	api_span_text(ms, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *
count_json(unsigned v)
{
	return v ? json_integer((json_int_t)v) : json_null();
}

/* A sandbox as the API shows it: sbfield.h's rows in order (a microVM's
 * only for one), then the idle limits that apply to it. */
json_t *
api_sandbox_json(const struct px_control *ctl, const struct px_sandbox *sb)
{
	const struct px_sbfield *f;
	const char *t;
	char name[64];
	json_t *o, *v;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	for (i = 0; i < px_nsbfields; i++) {
		f = &px_sbfields[i];
		t = (const char *)sb + f->off;
		if ((f->flags & PF_VM) && sb->external)
			continue;
		switch (f->kind) {
		case PF_BOOL:
			v = json_boolean(*(const int *)t);
			break;
		case PF_CREATED:
			v = json_integer((json_int_t)*(const int64_t *)t);
			break;
		case PF_COUNT:
			v = count_json(*(const unsigned *)t);
			break;
		case PF_IDLE:
			v = idle_json(*(const int64_t *)t);
			break;
		case PF_TEMPLATE:
			v = json_string(*t ? t : PX_TEMPLATE_DEFAULT);
			break;
		case PF_ENV:
			v = *t ? json_loads(t, 0, NULL) : json_object();
			break;
		case PF_ID:
		case PF_STATE:
			v = json_string(t);
			break;
		default:
			v = *t ? json_string(t) : json_null();
			break;
		}
		if (json_object_set_new(o, f->api, v) == -1) {
			json_decref(o);
			return NULL;
		}
	}
	if (sb->external)
		return o;
	for (i = 0; i < px_nsbfields; i++) {
		f = &px_sbfields[i];
		if (f->kind != PF_IDLE)
			continue;
		snprintf(name, sizeof(name), "effective_%s", f->api);
		json_object_set_new(o, name, idle_effective(ctl,
		    *(const int64_t *)((const char *)sb + f->off), (int)f->arg));
	}
	return o;
}

json_t *
api_port_json(struct px_control *ctl, const struct px_port *p)
{
	char url[512], hurl[512];
	json_t *urls;

	px_control_url(url, sizeof(url), ctl->domain, ctl->hooks.https_port,
	    p->sandbox, p->port, NULL);
	if (p->custom_host[0] != '\0') {
		px_control_url(hurl, sizeof(hurl), ctl->domain,
		    ctl->hooks.https_port, p->sandbox, p->port, p->custom_host);
		urls = json_pack("[s, s]", url, hurl);
	} else
		urls = json_pack("[s]", url);
	return json_pack("{s:s, s:i, s:s, s:o, s:s, s:s, s:s?, s:I}",
	    "sandbox", p->sandbox, "port", p->port, "url", url, "urls", urls,
	    "host_header", px_host_header_name(p->host_header),
	    "visibility", px_visibility_name(p->visibility),
	    "host", p->custom_host[0] ? p->custom_host : NULL,
	    "created", (json_int_t)p->created);
}

/* ---- pagination ---- */

/* For each row in order: 0 add it, 1 skip it (not after the cursor),
 * PAGE_FULL stop. beyond: the row sorts after pg->after. */
int
api_page_row(struct page *pg, const char *cursor, int beyond)
{
	if (pg->have_after && !beyond)
		return 1;
	if (pg->count == pg->limit) {
		pg->more = 1;
		return PAGE_FULL;
	}
	pg->count++;
	snprintf(pg->next, sizeof(pg->next), "%s", cursor);
	return 0;
}

/* obj[key] = array, plus "next"; reference to array stolen. */
json_t *
api_page_doc(const char *key, json_t *array, const struct page *pg)
{
	return json_pack("{s:o, s:s?}", key, array, "next",
	    pg->more ? pg->next : NULL);
}

int
api_add_sandbox(const struct px_sandbox *sb, void *arg)
{
	struct list_ctx *lc = arg;
	int rc;

	if ((rc = api_page_row(lc->pg, sb->id, strcmp(sb->id, lc->pg->after) > 0)))
		return rc == 1 ? 0 : rc;
	return json_array_append_new(lc->array, api_sandbox_json(lc->ctl, sb)) == 0 ?
	    0 : 1;
}

int
api_add_port(const struct px_port *p, void *arg)
{
	struct list_ctx *lc = arg;
	char cur[64], asb[64] = "";
	unsigned aport = 0;
	int rc, beyond;

	if (lc->pg != NULL) {
		if (lc->one_sandbox != NULL) {
			snprintf(cur, sizeof(cur), "%u", p->port);
			beyond = p->port > (unsigned)atoi(lc->pg->after);
		} else {
			snprintf(cur, sizeof(cur), "%s/%u", p->sandbox, p->port);
			if (sscanf(lc->pg->after, "%40[^/]/%u", asb, &aport) < 1)
				asb[0] = '\0';
			beyond = strcmp(p->sandbox, asb) > 0 ||
			    (strcmp(p->sandbox, asb) == 0 && p->port > aport);
		}
		if ((rc = api_page_row(lc->pg, cur, beyond)))
			return rc == 1 ? 0 : rc;
	}
	return json_array_append_new(lc->array, api_port_json(lc->ctl, p)) == 0 ?
	    0 : 1;
}

/* ---- request bodies ---- */

/*
 * Parses the body as a JSON object whose keys all appear in allowed
 * (NULL-terminated). An empty body is {} when empty_ok. NULL after
 * replying 400.
 */
json_t *
api_body_object(struct req *r, const char *const *allowed, int empty_ok)
{
	json_error_t jerr;
	json_t *obj;
	const char *key, *const *a;
	json_t *val;
	char buf[64];

	if (r->bodylen == 0) {
		if (empty_ok)
			return json_object();
		api_reply_error(r, 400, NULL, NULL, "a JSON object is required "
		    "as the request body");
		return NULL;
	}
	obj = json_loadb(r->body, r->bodylen, JSON_REJECT_DUPLICATES, &jerr);
	if (obj == NULL) {
		api_reply_error(r, 400, NULL, NULL, "invalid JSON at line %d, "
		    "column %d: %s", jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(obj)) {
		json_decref(obj);
		api_reply_error(r, 400, NULL, NULL, "the request body must be a "
		    "JSON object");
		return NULL;
	}
	json_object_foreach(obj, key, val) {
		for (a = allowed; *a != NULL; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (*a == NULL) {
			api_shown(buf, sizeof(buf), key);
			api_reply_error(r, 400, NULL, buf, "unknown field '%s'", buf);
			json_decref(obj);
			return NULL;
		}
	}
	return obj;
}

/*
 * Reads an optional string field: 1 and *out set if present, 0 if absent
 * (or null when null_ok, *out = NULL), -1 after replying 400.
 */
int
api_string_field(struct req *r, json_t *obj, const char *name, int null_ok,
    const char **out)
{
	json_t *v = json_object_get(obj, name);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (json_is_null(v) && null_ok)
		return 1;
	if (!json_is_string(v)) {
		api_reply_error(r, 400, NULL, name, "must be a string%s",
		    null_ok ? " or null" : "");
		return -1;
	}
	*out = json_string_value(v);
	if (strlen(*out) != json_string_length(v)) {
		api_reply_error(r, 400, NULL, name, "must not contain NUL");
		return -1;
	}
	return 1;
}

/* 0 if id is a sandbox id, else -1 with a 400 naming field (the
 * request's: "id" for a path's or a create's, "sandbox", "ids") and,
 * for an item of an array, its index (item >= 0). */
int
api_check_sandbox_id(struct req *r, const char *field, long item,
    const char *id)
{
	char buf[64], at[32] = "";

	if (px_valid_sandbox_id(id, strlen(id)))
		return 0;
	if (item >= 0)
		snprintf(at, sizeof(at), "item %ld is ", item);
	api_reply_error(r, 400, NULL, field, "%snot a valid sandbox id: '%s' "
	    "(1-%d lower-case letters, digits or '-', not starting with '-')",
	    at, api_shown(buf, sizeof(buf), id), PX_SANDBOX_ID_MAX);
	return -1;
}

int
api_check_checkpoint_name(struct req *r, const char *field, const char *name)
{
	char buf[64];

	if (name != NULL && px_valid_sandbox_id(name, strlen(name)))
		return 0;
	api_reply_error(r, 400, NULL, field, "%s: '%s' (1-%d lower-case letters, "
	    "digits or '-', not starting with '-')", name == NULL ?
	    "required: a checkpoint name" : "not a valid checkpoint name",
	    api_shown(buf, sizeof(buf), name ? name : ""), PX_SANDBOX_ID_MAX);
	return -1;
}

int
api_is_get(const struct req *r)
{
	return r->method == HTTP_GET || r->method == HTTP_HEAD;
}

/* ---- lifecycle and events ---- */

int64_t
api_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
api_record_event(struct px_control *ctl, const char *id, const char *op,
    const char *result, const char *why, int64_t duration_ms)
{
	struct px_event ev;
	char err[256];

	memset(&ev, 0, sizeof(ev));
	snprintf(ev.sandbox, sizeof(ev.sandbox), "%s", id);
	snprintf(ev.operation, sizeof(ev.operation), "%s", op);
	snprintf(ev.result, sizeof(ev.result), "%s", result);
	snprintf(ev.reason, sizeof(ev.reason), "%s", why ? why : "");
	ev.duration_ms = duration_ms;
	/* The reply already says what happened; a lost event must not turn
	 * it into an error. */
	(void)px_store_event_add(ctl->store, &ev, NULL, err, sizeof(err));
}

void
api_routes_changed(struct px_control *ctl)
{
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
}

/* A name or path as JSON: key when UTF-8, else key_base64. */
int
api_json_set_bytes(json_t *o, const char *key, const void *p, size_t len)
{
	char k[32], *b;
	json_t *v;
	int rc;

	if ((v = json_stringn((const char *)p, len)) != NULL)
		return json_object_set_new(o, key, v);
	snprintf(k, sizeof(k), "%s_base64", key);
	if ((b = malloc(4 * ((len + 2) / 3) + 1)) == NULL)
		return -1;
	EVP_EncodeBlock((unsigned char *)b, p, (int)len);
	rc = json_object_set_new(o, k, json_string(b));
	free(b);
	return rc;
}
