/*
 * control.c — the control API server (see control.h for the resources).
 * A small HTTP/1.1 server of its own on bufferevents and http-parser
 * rather than evhttp: every answer, including 413 and malformed
 * requests, must be the JSON error document, and the same code will later
 * sit behind a TLS listener. Requests are handled one at a time per
 * connection, synchronously (the store is local SQLite); pipelined
 * requests are answered in order. Everything a client sends is bounded:
 * head 16 KB, body 64 KB, 128 connections, 60 s idle.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control.h"
#include "store.h"
#include "valid.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <http_parser.h>
#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
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

#define CTL_MAX_HEAD		(16 * 1024)
#define CTL_MAX_CONNS		128
#define CTL_IDLE_SECS		60
#define CTL_MAX_SEGS		6
#define CTL_OUT_HIGH		(256 * 1024)	/* stop reading above this */

struct conn;

struct px_control {
	struct event_base *base;
	struct px_store *store;
	struct px_control_hooks hooks;
	char *domain;
	char *sock_path;
	dev_t sock_dev;
	ino_t sock_ino;
	struct evconnlistener *listener;
	struct event *accept_retry;
	TAILQ_HEAD(, conn) conns;
	int nconns;
	unsigned long long responses[6];	/* by status class, [2]=2xx */
	unsigned long long accept_errors;
};

struct conn {
	TAILQ_ENTRY(conn) entry;
	struct px_control *ctl;
	struct bufferevent *bev;
	http_parser parser;
	struct evbuffer *url;
	struct evbuffer *body;
	size_t head_bytes;
	int error_status;	/* set by a parser callback refusing input */
	int complete;		/* a whole request is waiting to be served */
	int closing;		/* free once the output is flushed */
	int throttled;		/* reading paused: output above CTL_OUT_HIGH */
};

/* One request being served. */
struct req {
	struct conn *c;
	enum http_method method;
	const char *body;
	size_t bodylen;
	char path[2048];	/* shown in messages */
	char segbuf[2048];	/* path split in place */
	char *seg[CTL_MAX_SEGS];
	int nseg;
};

static const struct http_parser_settings parser_settings;

/* ---- small helpers ---- */

/* Copies s for use inside messages: printable ASCII only, at most max. */
static const char *
shown(char *buf, size_t size, const char *s)
{
	size_t i, max = size - 1;

	for (i = 0; s[i] != '\0' && i < max; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (s[i] != '\0' && i >= 3)
		memcpy(buf + i - 3, "...", 3);
	buf[i] = '\0';
	return buf;
}

static const char *
reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
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

static void
respond(struct conn *c, int status, const char *ctype, const char *extra,
    const void *body, size_t len, int head_only)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	int cls = status / 100;

	if (cls >= 1 && cls <= 5)
		c->ctl->responses[cls]++;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, reason(status));
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
static void
reply_json_hdr(struct req *r, int status, json_t *obj, const char *extra)
{
	char *text;

	if (obj == NULL ||
	    (text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII)) == NULL) {
		static const char oom[] = "{\"error\":{\"status\":500,\"code\":"
		    "\"internal\",\"message\":\"cannot encode the response\"}}\n";

		json_decref(obj);
		respond(r->c, 500, "application/json", NULL, oom,
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
		respond(r->c, status, "application/json", extra, text, n,
		    r->method == HTTP_HEAD);
	}
	free(text);
}

static void
reply_json(struct req *r, int status, json_t *obj)
{
	reply_json_hdr(r, status, obj, NULL);
}

static const char *
error_code(int status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 408: return "timeout";
	case 409: return "conflict";
	case 413: return "payload_too_large";
	case 431: return "header_too_large";
	case 501: return "not_implemented";
	default: return status >= 500 ? "internal" : "bad_request";
	}
}

static void __attribute__((format(printf, 5, 6)))
reply_error(struct req *r, int status, const char *allow, const char *field,
    const char *fmt, ...)
{
	char msg[512], clean[512], hdr[128] = "";
	va_list ap;
	json_t *e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Messages quote client input: keep them valid UTF-8 (ASCII). */
	shown(clean, sizeof(clean), msg);
	e = json_pack("{s:{s:i, s:s}}", "error", "status", status,
	    "code", error_code(status));
	if (e != NULL && field != NULL)
		json_object_set_new(json_object_get(e, "error"), "field",
		    json_string(field));
	if (e != NULL)
		json_object_set_new(json_object_get(e, "error"), "message",
		    json_string(clean));
	if (allow != NULL)
		snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
	reply_json_hdr(r, status, e, hdr);
}

static void
reply_empty(struct req *r, int status)
{
	respond(r->c, status, "application/json", NULL, "", 0, 1);
}

/* Maps a store failure to a reply; err is the store's message. */
static void
reply_store(struct req *r, int rc, const char *field, const char *err)
{
	switch (rc) {
	case PX_STORE_NOTFOUND:
		reply_error(r, 404, NULL, NULL, "%s", err);
		break;
	case PX_STORE_EXISTS:
		reply_error(r, 409, NULL, field, "%s", err);
		break;
	case PX_STORE_CONFLICT:
		reply_error(r, 409, NULL, field, "%s", err);
		break;
	default:
		reply_error(r, 500, NULL, NULL, "state store: %s", err);
		break;
	}
}

/* ---- JSON documents ---- */

static json_t *
sandbox_json(const struct px_sandbox *sb)
{
	return json_pack("{s:s, s:s?, s:b, s:s, s:I}", "id", sb->id,
	    "address", sb->address[0] ? sb->address : NULL,
	    "external", sb->external, "state", sb->state,
	    "created", (json_int_t)sb->created);
}

static json_t *
port_json(struct px_control *ctl, const struct px_port *p)
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

struct list_ctx {
	struct px_control *ctl;
	json_t *array;
};

static int
add_sandbox(const struct px_sandbox *sb, void *arg)
{
	struct list_ctx *lc = arg;

	return json_array_append_new(lc->array, sandbox_json(sb)) == 0 ? 0 : 1;
}

static int
add_port(const struct px_port *p, void *arg)
{
	struct list_ctx *lc = arg;

	return json_array_append_new(lc->array, port_json(lc->ctl, p)) == 0 ?
	    0 : 1;
}

/* ---- request bodies ---- */

/*
 * Parses the body as a JSON object whose keys all appear in allowed
 * (NULL-terminated). An empty body is {} when empty_ok. NULL after
 * replying 400.
 */
static json_t *
body_object(struct req *r, const char *const *allowed, int empty_ok)
{
	json_error_t jerr;
	json_t *obj;
	const char *key, *const *a;
	json_t *val;
	char buf[64];

	if (r->bodylen == 0) {
		if (empty_ok)
			return json_object();
		reply_error(r, 400, NULL, NULL, "a JSON object is required "
		    "as the request body");
		return NULL;
	}
	obj = json_loadb(r->body, r->bodylen, JSON_REJECT_DUPLICATES, &jerr);
	if (obj == NULL) {
		reply_error(r, 400, NULL, NULL, "invalid JSON at line %d, "
		    "column %d: %s", jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(obj)) {
		json_decref(obj);
		reply_error(r, 400, NULL, NULL, "the request body must be a "
		    "JSON object");
		return NULL;
	}
	json_object_foreach(obj, key, val) {
		for (a = allowed; *a != NULL; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (*a == NULL) {
			shown(buf, sizeof(buf), key);
			reply_error(r, 400, NULL, buf, "unknown field '%s'", buf);
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
static int
string_field(struct req *r, json_t *obj, const char *name, int null_ok,
    const char **out)
{
	json_t *v = json_object_get(obj, name);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (json_is_null(v) && null_ok)
		return 1;
	if (!json_is_string(v)) {
		reply_error(r, 400, NULL, name, "must be a string%s",
		    null_ok ? " or null" : "");
		return -1;
	}
	*out = json_string_value(v);
	if (strlen(*out) != json_string_length(v)) {
		reply_error(r, 400, NULL, name, "must not contain NUL");
		return -1;
	}
	return 1;
}

static int
check_sandbox_id(struct req *r, const char *id)
{
	char buf[64];

	if (px_valid_sandbox_id(id, strlen(id)))
		return 0;
	reply_error(r, 400, NULL, "id", "not a valid sandbox id: '%s' (1-%d "
	    "lower-case letters, digits or '-', not starting with '-')",
	    shown(buf, sizeof(buf), id), PX_SANDBOX_ID_MAX);
	return -1;
}

/* ---- handlers ---- */

static void
h_health(struct req *r)
{
	reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void
h_metrics(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	struct evbuffer *buf = evbuffer_new();
	size_t len;
	int i;

	if (buf == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
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
	    "berth_control_connections %d\n", ctl->nconns);
	len = evbuffer_get_length(buf);
	respond(r->c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL,
	    evbuffer_pullup(buf, -1), len, r->method == HTTP_HEAD);
	evbuffer_free(buf);
}

static void
h_sandbox_list(struct req *r)
{
	struct list_ctx lc = { r->c->ctl, json_array() };
	char err[256];
	int rc;

	if (lc.array == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_sandbox_list(r->c->ctl->store, add_sandbox, &lc, err,
	    sizeof(err));
	if (rc != 0) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	reply_json(r, 200, json_pack("{s:o}", "sandboxes", lc.array));
}

static void
h_sandbox_create(struct req *r)
{
	static const char *const fields[] = { "id", "address", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	const char *id, *addr;
	char err[256], buf[64];
	json_t *obj;
	int rc;

	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = string_field(r, obj, "id", 0, &id)) <= 0) {
		if (rc == 0)
			reply_error(r, 400, NULL, "id", "required");
		goto out;
	}
	if (check_sandbox_id(r, id) == -1)
		goto out;
	if ((rc = string_field(r, obj, "address", 0, &addr)) <= 0) {
		if (rc == 0)
			reply_error(r, 400, NULL, "address", "VM-backed sandboxes "
			    "are not available yet; give the address of an "
			    "externally managed sandbox");
		goto out;
	}
	if (!px_valid_ip(addr)) {
		reply_error(r, 400, NULL, "address", "not an IP address: '%s'",
		    shown(buf, sizeof(buf), addr));
		goto out;
	}
	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	snprintf(sb.address, sizeof(sb.address), "%s", addr);
	sb.external = 1;
	snprintf(sb.state, sizeof(sb.state), "%s", PX_STATE_RUNNING);
	sb.created = (int64_t)time(NULL);
	rc = px_store_sandbox_add(ctl->store, &sb, err, sizeof(err));
	if (rc != PX_STORE_OK) {
		reply_store(r, rc, "id", err);
		goto out;
	}
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	reply_json(r, 201, sandbox_json(&sb));
out:
	json_decref(obj);
}

static void
h_sandbox_show(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct list_ctx lc = { ctl, NULL };
	struct px_sandbox sb;
	char err[256];
	json_t *obj;
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if ((lc.array = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_port_list(ctl->store, id, add_port, &lc, err, sizeof(err));
	if (rc != 0) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	if ((obj = sandbox_json(&sb)) == NULL ||
	    json_object_set_new(obj, "ports", lc.array) == -1) {
		json_decref(obj);
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	reply_json(r, 200, obj);
}

static void
h_sandbox_delete(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_rm(ctl->store, id, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	reply_empty(r, 204);
}

static void
h_port_list(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct list_ctx lc = { ctl, json_array() };
	char err[256];
	int rc;

	if (lc.array == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_port_list(ctl->store, id, add_port, &lc, err, sizeof(err));
	if (rc != 0) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	reply_json(r, 200, json_pack("{s:o}", "ports", lc.array));
}

/* 0 if host may be a custom host name, else -1 after replying 400. */
static int
check_custom_host(struct req *r, const char *host)
{
	const char *domain = r->c->ctl->domain;
	size_t hl = strlen(host), dl = strlen(domain);
	char buf[80];

	if (!px_valid_hostname(host, hl)) {
		reply_error(r, 400, NULL, "host", "not a valid host name: '%s' "
		    "(lower-case letters, digits, '-' and '.', no trailing dot)",
		    shown(buf, sizeof(buf), host));
		return -1;
	}
	/* Names under berth's domain are generated (<port>-<sandbox>):
	 * letting a custom name shadow them would hijack another route. */
	if (dl > 0 && (strcmp(host, domain) == 0 || (hl > dl &&
	    host[hl - dl - 1] == '.' && strcmp(host + hl - dl, domain) == 0))) {
		reply_error(r, 400, NULL, "host", "'%s' is under berth's domain "
		    "'%s', whose names are generated", shown(buf, sizeof(buf),
		    host), domain);
		return -1;
	}
	return 0;
}

static void
h_port_show(struct req *r, const char *id, uint16_t port)
{
	struct px_control *ctl = r->c->ctl;
	struct px_port p;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK ||
	    (rc = px_store_port_get(ctl->store, id, port, &p, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	reply_json(r, 200, port_json(ctl, &p));
}

static void
h_port_put(struct req *r, const char *id, uint16_t port)
{
	static const char *const fields[] = { "host_header", "visibility",
	    "host", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_port p;
	const char *hh, *vis, *host;
	char err[256], buf[64];
	json_t *obj;
	int rc, has_host, created = 0;

	if ((obj = body_object(r, fields, 1)) == NULL)
		return;
	if (string_field(r, obj, "host_header", 0, &hh) < 0 ||
	    string_field(r, obj, "visibility", 0, &vis) < 0 ||
	    (has_host = string_field(r, obj, "host", 1, &host)) < 0)
		goto out;

	/* Unknown sandbox first, so its 404 wins over field errors below
	 * only when the body itself was well formed. */
	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
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
		reply_store(r, rc, NULL, err);
		goto out;
	}
	if (hh != NULL && px_host_header_parse(hh, &p.host_header) == -1) {
		reply_error(r, 400, NULL, "host_header", "must be 'preserve' or "
		    "'upstream', not '%s'", shown(buf, sizeof(buf), hh));
		goto out;
	}
	if (vis != NULL && px_visibility_parse(vis, &p.visibility) == -1) {
		reply_error(r, 400, NULL, "visibility", "must be 'public' or "
		    "'private', not '%s'", shown(buf, sizeof(buf), vis));
		goto out;
	}
	if (has_host) {
		if (host == NULL || host[0] == '\0')
			p.custom_host[0] = '\0';
		else if (check_custom_host(r, host) == -1)
			goto out;
		else
			snprintf(p.custom_host, sizeof(p.custom_host), "%s", host);
	}
	rc = px_store_port_set(ctl->store, &p, &created, err, sizeof(err));
	if (rc != PX_STORE_OK) {
		reply_store(r, rc, "host", err);
		goto out;
	}
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	if (px_store_port_get(ctl->store, id, port, &p, err, sizeof(err)) !=
	    PX_STORE_OK)
		reply_error(r, 500, NULL, NULL, "state store: %s", err);
	else
		reply_json(r, created ? 201 : 200, port_json(ctl, &p));
out:
	json_decref(obj);
}

static void
h_port_delete(struct req *r, const char *id, uint16_t port)
{
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK ||
	    (rc = px_store_port_rm(ctl->store, id, port, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	reply_empty(r, 204);
}

/* ---- routing ---- */

static int
is_get(const struct req *r)
{
	return r->method == HTTP_GET || r->method == HTTP_HEAD;
}

static void
not_allowed(struct req *r, const char *allow)
{
	reply_error(r, 405, allow, NULL, "%s is not allowed on %s (allowed: %s)",
	    http_method_str(r->method), r->path, allow);
}

static int
seg_is(const struct req *r, int i, const char *s)
{
	return i < r->nseg && strcmp(r->seg[i], s) == 0;
}

static void
route(struct req *r)
{
	char buf[64];
	uint16_t port = 0;
	const char *id;

	if (r->nseg == 1 && seg_is(r, 0, "metrics")) {
		if (is_get(r))
			h_metrics(r);
		else
			not_allowed(r, "GET, HEAD");
		return;
	}
	if (r->nseg < 2 || !seg_is(r, 0, "v1"))
		goto notfound;
	if (r->nseg == 2 && seg_is(r, 1, "health")) {
		if (is_get(r))
			h_health(r);
		else
			not_allowed(r, "GET, HEAD");
		return;
	}
	if (r->nseg == 2 && seg_is(r, 1, "ports")) {
		if (is_get(r))
			h_port_list(r, NULL);
		else
			not_allowed(r, "GET, HEAD");
		return;
	}
	if (!seg_is(r, 1, "sandboxes"))
		goto notfound;
	if (r->nseg == 2) {
		if (is_get(r))
			h_sandbox_list(r);
		else if (r->method == HTTP_POST)
			h_sandbox_create(r);
		else
			not_allowed(r, "GET, HEAD, POST");
		return;
	}
	if (r->nseg == 4 && !seg_is(r, 3, "ports"))
		goto notfound;
	if (r->nseg == 5 && !seg_is(r, 3, "ports"))
		goto notfound;
	if (r->nseg > 5)
		goto notfound;
	id = r->seg[2];
	if (r->nseg == 5 && (port = px_parse_port(r->seg[4],
	    strlen(r->seg[4]))) == 0) {
		reply_error(r, 400, NULL, "port", "not a port number: '%s' "
		    "(1-65535, no leading zero)", shown(buf, sizeof(buf),
		    r->seg[4]));
		return;
	}
	switch (r->nseg) {
	case 3:
		if (!is_get(r) && r->method != HTTP_DELETE) {
			not_allowed(r, "GET, HEAD, DELETE");
			return;
		}
		break;
	case 4:
		if (!is_get(r)) {
			not_allowed(r, "GET, HEAD");
			return;
		}
		break;
	case 5:
		if (!is_get(r) && r->method != HTTP_PUT &&
		    r->method != HTTP_DELETE) {
			not_allowed(r, "GET, HEAD, PUT, DELETE");
			return;
		}
		break;
	}
	if (check_sandbox_id(r, id) == -1)
		return;
	if (r->nseg == 3) {
		if (is_get(r))
			h_sandbox_show(r, id);
		else
			h_sandbox_delete(r, id);
	} else if (r->nseg == 4)
		h_port_list(r, id);
	else if (is_get(r))
		h_port_show(r, id, port);
	else if (r->method == HTTP_PUT)
		h_port_put(r, id, port);
	else
		h_port_delete(r, id, port);
	return;
notfound:
	reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
}

/* Splits the request target's path into segments; -1 after replying. */
static int
parse_target(struct req *r, const char *url, size_t len)
{
	struct http_parser_url u;
	const char *path;
	size_t plen;
	char *p, *save = NULL;

	http_parser_url_init(&u);
	if (http_parser_parse_url(url, len, 0, &u) != 0 ||
	    !(u.field_set & (1 << UF_PATH))) {
		snprintf(r->path, sizeof(r->path), "?");
		reply_error(r, 400, NULL, NULL, "bad request target");
		return -1;
	}
	path = url + u.field_data[UF_PATH].off;
	plen = u.field_data[UF_PATH].len;
	if (plen >= sizeof(r->path)) {
		snprintf(r->path, sizeof(r->path), "?");
		reply_error(r, 404, NULL, NULL, "no such resource (path of %zu "
		    "bytes)", plen);
		return -1;
	}
	memcpy(r->path, path, plen);
	r->path[plen] = '\0';
	shown(r->path, sizeof(r->path), r->path);
	/* One trailing slash is forgiven: /v1/sandboxes/ = /v1/sandboxes. */
	if (plen > 1 && r->path[plen - 1] == '/')
		r->path[plen - 1] = '\0';

	memcpy(r->segbuf, r->path, sizeof(r->segbuf));
	r->nseg = 0;
	for (p = strtok_r(r->segbuf, "/", &save); p != NULL;
	    p = strtok_r(NULL, "/", &save)) {
		if (r->nseg == CTL_MAX_SEGS) {
			reply_error(r, 404, NULL, NULL, "no such resource: %s",
			    r->path);
			return -1;
		}
		r->seg[r->nseg++] = p;
	}
	return 0;
}

/* ---- connections ---- */

static void conn_read(struct bufferevent *, void *);

static void
conn_free(struct conn *c)
{
	struct px_control *ctl = c->ctl;

	TAILQ_REMOVE(&ctl->conns, c, entry);
	ctl->nconns--;
	bufferevent_free(c->bev);
	evbuffer_free(c->url);
	evbuffer_free(c->body);
	free(c);
}

static void
conn_reset_request(struct conn *c)
{
	evbuffer_drain(c->url, evbuffer_get_length(c->url));
	evbuffer_drain(c->body, evbuffer_get_length(c->body));
	c->head_bytes = 0;
	c->complete = 0;
}

/* Answers a request the parser refused, then closes. */
static void
conn_fail(struct conn *c, int status, const char *msg)
{
	struct req r;

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = HTTP_GET;
	c->closing = 1;
	reply_error(&r, status, NULL, NULL, "%s", msg);
	bufferevent_disable(c->bev, EV_READ);
}

static void
conn_serve(struct conn *c)
{
	struct req r;
	size_t ulen = evbuffer_get_length(c->url);

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = (enum http_method)c->parser.method;
	r.bodylen = evbuffer_get_length(c->body);
	r.body = r.bodylen ? (const char *)evbuffer_pullup(c->body, -1) : "";
	if (!http_should_keep_alive(&c->parser) || c->parser.upgrade)
		c->closing = 1;
	if (parse_target(&r, (const char *)evbuffer_pullup(c->url, -1),
	    ulen) == 0)
		route(&r);
	conn_reset_request(c);
	if (c->closing)
		bufferevent_disable(c->bev, EV_READ);
}

static void
conn_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n, used;
	enum http_errno e;
	char *data;

	while (!c->closing && !c->throttled &&
	    (n = evbuffer_get_contiguous_space(in)) > 0) {
		data = (char *)evbuffer_pullup(in, (ev_ssize_t)n);
		used = http_parser_execute(&c->parser, &parser_settings, data, n);
		e = HTTP_PARSER_ERRNO(&c->parser);
		evbuffer_drain(in, used);
		if (c->complete) {
			/* on_message_complete paused the parser */
			http_parser_pause(&c->parser, 0);
			conn_serve(c);
			if (evbuffer_get_length(bufferevent_get_output(bev)) >
			    CTL_OUT_HIGH) {
				c->throttled = 1;
				bufferevent_disable(bev, EV_READ);
			}
			continue;
		}
		if (e != HPE_OK) {
			if (c->error_status == 413)
				conn_fail(c, 413, "request body larger than "
				    "64 KB");
			else if (c->error_status == 431)
				conn_fail(c, 431, "request head larger than "
				    "16 KB");
			else {
				char msg[160];

				snprintf(msg, sizeof(msg), "malformed HTTP "
				    "request: %s", http_errno_description(e));
				conn_fail(c, 400, msg);
			}
			return;
		}
		if (c->parser.upgrade)
			break;	/* served at message complete; never tunneled */
	}
}

static void
conn_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->closing) {
		conn_free(c);
		return;
	}
	if (c->throttled) {
		c->throttled = 0;
		bufferevent_enable(bev, EV_READ);
		conn_read(bev, c);
	}
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if ((what & BEV_EVENT_TIMEOUT) && !c->closing &&
	    (evbuffer_get_length(c->url) > 0 || c->head_bytes > 0)) {
		/* a request started and stalled: say so, then close */
		conn_fail(c, 408, "request not received in time");
		bufferevent_enable(bev, EV_WRITE);
		return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		/* The client half closed after its requests: finish
		 * writing the answers, then close. */
		c->closing = 1;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	conn_free(c);
}

/* ---- http-parser callbacks ---- */

static int
head_bytes(struct conn *c, size_t len)
{
	c->head_bytes += len;
	if (c->head_bytes > CTL_MAX_HEAD) {
		c->error_status = 431;
		return -1;
	}
	return 0;
}

static int
on_message_begin(http_parser *p)
{
	struct conn *c = p->data;

	conn_reset_request(c);
	return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (head_bytes(c, len) == -1)
		return -1;
	return evbuffer_add(c->url, at, len);
}

static int
on_header(http_parser *p, const char *at, size_t len)
{
	return head_bytes(p->data, len);
}

static int
on_headers_complete(http_parser *p)
{
	struct conn *c = p->data;

	/* Refuse a declared oversize body before reading any of it. */
	if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX &&
	    p->content_length > PX_CONTROL_MAX_BODY) {
		c->error_status = 413;
		return -1;
	}
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (evbuffer_get_length(c->body) + len > PX_CONTROL_MAX_BODY) {
		c->error_status = 413;
		return -1;
	}
	return evbuffer_add(c->body, at, len);
}

static int
on_message_complete(http_parser *p)
{
	struct conn *c = p->data;

	c->complete = 1;
	http_parser_pause(p, 1);
	return 0;
}

static const struct http_parser_settings parser_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header,
	.on_header_value = on_header,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- listener ---- */

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct px_control *ctl = arg;
	struct conn *c;
	struct timeval idle = { CTL_IDLE_SECS, 0 };

	if (ctl->nconns >= CTL_MAX_CONNS || (c = calloc(1, sizeof(*c))) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	c->ctl = ctl;
	c->url = evbuffer_new();
	c->body = evbuffer_new();
	c->bev = bufferevent_socket_new(ctl->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->url == NULL || c->body == NULL || c->bev == NULL) {
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		if (c->url)
			evbuffer_free(c->url);
		if (c->body)
			evbuffer_free(c->body);
		free(c);
		return;
	}
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	TAILQ_INSERT_TAIL(&ctl->conns, c, entry);
	ctl->nconns++;
	bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
	bufferevent_set_timeouts(c->bev, &idle, &idle);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void
accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_control *ctl = arg;

	evconnlistener_enable(ctl->listener);
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct px_control *ctl = arg;
	struct timeval later = { 1, 0 };

	/* Out of descriptors most likely: a level-triggered listener would
	 * spin, so pause accepting for a second. */
	ctl->accept_errors++;
	evconnlistener_disable(l);
	event_add(ctl->accept_retry, &later);
}

/* Binds and listens on path; -1 with err filled. */
static int
listen_unix(struct px_control *ctl, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int fd, probe;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "control socket path too long (%zu bytes, "
		    "at most %zu): %s", strlen(path), sizeof(sun.sun_path) - 1,
		    path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket",
			    path);
			return -1;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (probe == -1) {
			snprintf(err, errlen, "socket: %s", strerror(errno));
			return -1;
		}
		if (connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0 ||
		    errno == EAGAIN || errno == EINPROGRESS) {
			close(probe);
			snprintf(err, errlen, "another server is listening on %s",
			    path);
			return -1;
		}
		if (errno != ECONNREFUSED) {
			snprintf(err, errlen, "probing %s: %s", path,
			    strerror(errno));
			close(probe);
			return -1;
		}
		close(probe);
		if (unlink(path) == -1 && errno != ENOENT) {
			snprintf(err, errlen, "removing stale socket %s: %s",
			    path, strerror(errno));
			return -1;
		}
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* The socket file's mode comes from the umask at bind(); chmod
	 * afterwards alone would leave a window. */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int saved = errno;

		umask(old);
		snprintf(err, errlen, "bind %s: %s", path, strerror(saved));
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(path, 0600) == -1 || listen(fd, 64) == -1 ||
	    stat(path, &st) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(path);
		close(fd);
		return -1;
	}
	ctl->sock_dev = st.st_dev;
	ctl->sock_ino = st.st_ino;
	return fd;
}

struct px_control *
px_control_new(struct event_base *base, struct px_store *store,
    const char *sock_path, const struct px_control_hooks *hooks,
    char *err, size_t errlen)
{
	struct px_control *ctl;
	int fd;

	if ((ctl = calloc(1, sizeof(*ctl))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	TAILQ_INIT(&ctl->conns);
	ctl->base = base;
	ctl->store = store;
	if (hooks != NULL)
		ctl->hooks = *hooks;
	ctl->domain = strdup(ctl->hooks.domain ? ctl->hooks.domain :
	    "berth.localhost");
	ctl->sock_path = strdup(sock_path);
	ctl->hooks.domain = ctl->domain;
	if (ctl->domain == NULL || ctl->sock_path == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (ctl->hooks.https_port == 0 || ctl->hooks.https_port > 65535) {
		snprintf(err, errlen, "invalid HTTPS port %u",
		    ctl->hooks.https_port);
		goto fail;
	}
	if ((ctl->accept_retry = evtimer_new(base, accept_retry_cb, ctl)) ==
	    NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if ((fd = listen_unix(ctl, sock_path, err, errlen)) == -1) {
		free(ctl->sock_path);
		ctl->sock_path = NULL;	/* not ours: do not unlink */
		goto fail;
	}
	ctl->listener = evconnlistener_new(base, accept_cb, ctl,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (ctl->listener == NULL) {
		snprintf(err, errlen, "cannot listen on %s", sock_path);
		close(fd);
		goto fail;
	}
	evconnlistener_set_error_cb(ctl->listener, accept_error_cb);
	return ctl;
fail:
	px_control_free(ctl);
	return NULL;
}

void
px_control_free(struct px_control *ctl)
{
	struct conn *c;
	struct stat st;

	if (ctl == NULL)
		return;
	while ((c = TAILQ_FIRST(&ctl->conns)) != NULL)
		conn_free(c);
	if (ctl->listener != NULL)
		evconnlistener_free(ctl->listener);
	if (ctl->accept_retry != NULL)
		event_free(ctl->accept_retry);
	/* Unlink only the socket we made, not a successor's. */
	if (ctl->sock_path != NULL && ctl->sock_ino != 0 &&
	    lstat(ctl->sock_path, &st) == 0 && st.st_dev == ctl->sock_dev &&
	    st.st_ino == ctl->sock_ino)
		unlink(ctl->sock_path);
	free(ctl->sock_path);
	free(ctl->domain);
	free(ctl);
}
