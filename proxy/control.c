/*
 * control.c — the control API server (see control.h for the resources).
 * A small HTTP/1.1 server of its own on bufferevents (its request
 * reader, reqhead.c, reads with berthd's strict http1.c and is shared
 * with the TCP control helper, controld.c) rather than evhttp: every
 * answer, including 413 and malformed requests, must be the JSON error
 * document, and the same code sits behind a TLS listener. Requests are handled one at a time per
 * connection, synchronously (the store is local SQLite); pipelined
 * requests are answered in order. Everything a client sends is bounded:
 * head 16 KB, body 64 KB, 60 s idle.
 *
 * Nobody on the network can lock ops out: the unix socket (ops, root)
 * and the TCP listener have connection budgets of their own, a TCP
 * client address holds at most CTL_MAX_PER_ADDR of the TCP ones, and a
 * TCP connection must finish its TLS handshake within
 * CTL_HANDSHAKE_SECS and then present a valid token in its first request
 * within CTL_AUTH_SECS, or it is closed; a request refused with 401
 * closes it too. Unauthenticated connections never hold a slot long.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control.h"
#include "conf.h"
#include "control_rule.h"
#include "helper.h"
#include "reqhead.h"
#include "status.h"
#include "routemsg.h"
#include "store.h"
#include "token.h"
#include "valid.h"
#include "../vmm/guest/agent_proto.h"

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

#define CTL_MAX_UNIX		256	/* connections on the unix socket (ops) */
#define CTL_MAX_TCP		PX_CONTROL_MAX_TCP	/* on the TCP listener, all clients */
#define CTL_MAX_PER_ADDR	PX_CONTROL_MAX_PER_ADDR	/* on the TCP listener, per address */
#define CTL_HANDSHAKE_SECS	PX_CONTROL_HANDSHAKE_SECS	/* TCP: accept to TLS handshake done */
#define CTL_AUTH_SECS		5	/* TCP: then to an authenticated request */
#define CTL_IDLE_SECS		PX_CONTROL_IDLE_SECS
#define CTL_MAX_SEGS		7
#define CTL_PAGE_DEFAULT	100
#define CTL_PAGE_MAX		1000
#define CTL_OUT_HIGH		(256 * 1024)	/* stop reading above this */

static const struct timeval ctl_idle = { CTL_IDLE_SECS, 0 };

struct conn;

struct px_control {
	struct event_base *base;
	struct px_store *store;
	struct px_control_hooks hooks;
	uint64_t serial;	/* of the last connection accepted */
	char *domain;
	char *template_dir;	/* the default template's, or NULL */
	char *sock_path;
	dev_t sock_dev;
	ino_t sock_ino;
	struct evconnlistener *listener;
	struct evconnlistener *tcp_listener;	/* optional, bearer tokens */
	SSL_CTX *ssl_ctx;			/* for it; NULL: plain TCP */
	struct event *accept_retry;
	TAILQ_HEAD(, conn) conns;
	int nconns;
	int nconns_tcp;				/* of nconns, TCP ones */
	unsigned long long responses[6];	/* by status class, [2]=2xx */
	unsigned long long accept_errors;
	/* TCP connections refused at accept or closed unauthenticated */
	unsigned long long refused_budget, refused_addr, closed_deadline;
};

struct cstream;

struct exec_pending;
struct conn {
	TAILQ_ENTRY(conn) entry;
	struct px_control *ctl;
	struct bufferevent *bev;
	struct px_reqhead rh;	/* the request being read (reqhead.h) */
	int closing;		/* free once the output is flushed */
	int throttled;		/* reading paused: output above CTL_OUT_HIGH */
	int waiting;		/* a lifecycle operation answers later */
	int early_served;	/* a streamed request (rh.streamed): served
				 * from its head */
	int close_after;	/* a streamed request said Connection: close */
	int busy;		/* the parser runs: its callbacks may end
				 * the connection, conn_read frees it after */
	int dead;		/* ended while busy: freed once it returns */
	struct cstream *st;	/* its stream, while it answers */
	struct exec_pending *pexec;	/* its buffered exec, while it runs */
	uint64_t serial;	/* tells a reused struct from this one */
	int tcp;		/* came through the TCP listener: needs a token */
	int authed;		/* TCP: a request of it carried a valid token */
	struct event *deadline;	/* TCP: handshake, then authentication */
	char addr[INET6_ADDRSTRLEN];	/* TCP: the client's address */
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
	char query[8192];	/* raw query string, "" if none: as long as
				 * a request line may be (http1.h) */
	struct px_auth auth;
};

static const struct px_reqhead_hooks reqhead_hooks;
static int query_get(const struct req *, const char *, char *, size_t);
static int vm_resumable(struct px_control *, const char *);
static void record_event(struct px_control *, const char *, const char *,
    const char *, const char *, int64_t);
static int is_get(const struct req *);
static void not_allowed(struct req *, const char *);

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

static void __attribute__((format(printf, 6, 0)))
vreply_error(struct req *r, int status, const char *allow, const char *field,
    const char *extra, const char *fmt, va_list ap)
{
	char msg[512], clean[512], hdr[192] = "";
	json_t *e;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* Messages quote client input: keep them valid UTF-8 (ASCII). */
	shown(clean, sizeof(clean), msg);
	e = json_pack("{s:{s:i, s:s}}", "error", "status", status,
	    "code", px_control_error_code(status));
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
	reply_json_hdr(r, status, e, hdr);
}

static void __attribute__((format(printf, 5, 6)))
reply_error(struct req *r, int status, const char *allow, const char *field,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply_error(r, status, allow, field, NULL, fmt, ap);
	va_end(ap);
}

/* reply_error with extra header lines (each ending in CRLF). */
static void __attribute__((format(printf, 4, 5)))
reply_error_hdr(struct req *r, int status, const char *extra,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply_error(r, status, NULL, NULL, extra, fmt, ap);
	va_end(ap);
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
	case PX_STORE_BUSY:
		/* Nothing was written: the client may simply try again. */
		reply_error_hdr(r, 503, "Retry-After: 1\r\n",
		    "state store busy, nothing changed, retry: %s", err);
		break;
	case PX_STORE_FULL:
		reply_error_hdr(r, 507, "Retry-After: 10\r\n",
		    "state store full, nothing changed: %s", err);
		break;
	default:
		reply_error(r, 500, NULL, NULL, "state store: %s", err);
		break;
	}
}

/* ---- JSON documents ---- */

/* A duration as the API writes it: the largest unit that is exact. */
static void
span_text(uint64_t ms, char *buf, size_t len)
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
	span_text(ms == PX_IDLE_NEVER ? PX_VM_NEVER : (uint64_t)ms, buf,
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
	span_text(ms, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *
count_json(unsigned v)
{
	return v ? json_integer((json_int_t)v) : json_null();
}

static json_t *
sandbox_json(const struct px_control *ctl, const struct px_sandbox *sb)
{
	json_t *o;

	o = json_pack("{s:s, s:s?, s:b, s:s, s:I, s:s?}", "id", sb->id,
	    "address", sb->address[0] ? sb->address : NULL,
	    "external", sb->external, "state", sb->state,
	    "created", (json_int_t)sb->created,
	    "egress_mode", sb->egress_mode[0] ? sb->egress_mode : NULL);
	if (o == NULL || sb->external)
		return o;
	json_object_set_new(o, "memory_mib", count_json(sb->mem_mib));
	json_object_set_new(o, "vcpus", count_json(sb->vcpus));
	json_object_set_new(o, "disk_mib", count_json(sb->disk_mib));
	json_object_set_new(o, "template", json_string(sb->template_name[0] ?
	    sb->template_name : PX_TEMPLATE_DEFAULT));
	json_object_set_new(o, "idle_pause", idle_json(sb->idle_pause_ms));
	json_object_set_new(o, "idle_suspend", idle_json(sb->idle_suspend_ms));
	json_object_set_new(o, "max_lifetime", idle_json(sb->max_lifetime_ms));
	json_object_set_new(o, "effective_idle_pause", idle_effective(ctl,
	    sb->idle_pause_ms, PX_IDLE_PAUSE));
	json_object_set_new(o, "effective_idle_suspend", idle_effective(ctl,
	    sb->idle_suspend_ms, PX_IDLE_SUSPEND));
	json_object_set_new(o, "effective_max_lifetime", idle_effective(ctl,
	    sb->max_lifetime_ms, PX_IDLE_LIFETIME));
	return o;
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

/* ---- pagination ---- */

#define PAGE_FULL	2	/* list callback: the page is complete */

struct page {
	int limit;
	int have_after;
	char after[300];
	int count;
	int more;		/* a row beyond this page exists */
	char next[300];		/* cursor of the page's last row */
};

/* Reads ?limit= and ?after=; -1 after replying 400. */
static int
page_parse(struct req *r, struct page *pg)
{
	char buf[16], *end;
	long v;
	int rc;

	memset(pg, 0, sizeof(*pg));
	pg->limit = CTL_PAGE_DEFAULT;
	if ((rc = query_get(r, "limit", buf, sizeof(buf))) != 0) {
		v = rc == 1 && buf[0] >= '1' && buf[0] <= '9' ?
		    strtol(buf, &end, 10) : 0;
		if (rc == -1 || v < 1 || v > CTL_PAGE_MAX || *end != '\0') {
			reply_error(r, 400, NULL, "limit", "must be a number "
			    "from 1 to %d", CTL_PAGE_MAX);
			return -1;
		}
		pg->limit = (int)v;
	}
	if ((rc = query_get(r, "after", pg->after, sizeof(pg->after))) == -1) {
		reply_error(r, 400, NULL, "after", "not a valid cursor");
		return -1;
	}
	pg->have_after = rc == 1 && pg->after[0] != '\0';
	return 0;
}

/* For each row in order: 0 add it, 1 skip it (not after the cursor),
 * PAGE_FULL stop. beyond: the row sorts after pg->after. */
static int
page_row(struct page *pg, const char *cursor, int beyond)
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
static json_t *
page_doc(const char *key, json_t *array, const struct page *pg)
{
	return json_pack("{s:o, s:s?}", key, array, "next",
	    pg->more ? pg->next : NULL);
}

struct list_ctx {
	struct px_control *ctl;
	json_t *array;
	struct page *pg;
	const char *one_sandbox;	/* ports of one sandbox: cursor = port */
};

static int
add_sandbox(const struct px_sandbox *sb, void *arg)
{
	struct list_ctx *lc = arg;
	int rc;

	if ((rc = page_row(lc->pg, sb->id, strcmp(sb->id, lc->pg->after) > 0)))
		return rc == 1 ? 0 : rc;
	return json_array_append_new(lc->array, sandbox_json(lc->ctl, sb)) == 0 ?
	    0 : 1;
}

static int
add_port(const struct px_port *p, void *arg)
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
		if ((rc = page_row(lc->pg, cur, beyond)))
			return rc == 1 ? 0 : rc;
	}
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

static int
check_checkpoint_name(struct req *r, const char *field, const char *name)
{
	char buf[64];

	if (name != NULL && px_valid_sandbox_id(name, strlen(name)))
		return 0;
	reply_error(r, 400, NULL, field, "%s: '%s' (1-%d lower-case letters, "
	    "digits or '-', not starting with '-')", name == NULL ?
	    "required: a checkpoint name" : "not a valid checkpoint name",
	    shown(buf, sizeof(buf), name ? name : ""), PX_SANDBOX_ID_MAX);
	return -1;
}

/* ---- handlers ---- */

static void
h_health(struct req *r)
{
	json_t *doc = json_pack("{s:s}", "status", "ok"), *x;

	if (r->c->ctl->hooks.health != NULL &&
	    (x = r->c->ctl->hooks.health(r->c->ctl->hooks.arg)) != NULL) {
		json_object_update_missing(doc, x);
		json_decref(x);
	}
	reply_json(r, 200, doc);
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
	respond(r->c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL,
	    evbuffer_pullup(buf, -1), len, r->method == HTTP_HEAD);
	evbuffer_free(buf);
}

static void
h_sandbox_list(struct req *r)
{
	struct page pg;
	struct list_ctx lc = { r->c->ctl, NULL, &pg, NULL };
	char err[256];
	int rc;

	if (page_parse(r, &pg) == -1)
		return;
	if ((lc.array = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_sandbox_list(r->c->ctl->store, add_sandbox, &lc, err,
	    sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	reply_json(r, 200, page_doc("sandboxes", lc.array, &pg));
}

static void
routes_changed(struct px_control *ctl)
{
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
}

/* The fields only a microVM sandbox takes. */
static const char *const vm_fields[] = { "memory_mib", "vcpus", "disk_mib",
    "template", "idle_pause", "idle_suspend", "max_lifetime", "boot", NULL };

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
		reply_error(r, 400, NULL, f[i].field, "must be a whole number%s",
		    f[i].unit);
		return -1;
	}
	n = json_integer_value(v);
	if (n < (json_int_t)f[i].min) {
		reply_error(r, 400, NULL, f[i].field, "%lld%s is below the "
		    "minimum of %u%s", (long long)n, f[i].unit, f[i].min,
		    f[i].unit);
		return -1;
	}
	if (n > (json_int_t)max[i]) {
		reply_error(r, 400, NULL, f[i].field, "%lld%s is above the "
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
		reply_error(r, 400, NULL, name, "must be a duration such as "
		    "\"10m\", \"never\" or null");
		return -1;
	}
	if (strcmp(text, "never") == 0) {
		*out = PX_IDLE_NEVER;
		return 0;
	}
	if (px_rule_duration(text, &ms, err, sizeof(err)) < 0) {
		reply_error(r, 400, NULL, name, "%s, or \"never\"", err);
		return -1;
	}
	if (ms < 1000 || ms > (uint64_t)3650 * 86400000) {
		reply_error(r, 400, NULL, name, "'%s': use 1s to 3650d, or "
		    "\"never\"", shown(buf, sizeof(buf), text));
		return -1;
	}
	*out = (int64_t)ms;
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
	if ((rc = string_field(r, obj, "template", 1, &v)) < 0)
		return -1;
	if (v == NULL || strcmp(v, PX_TEMPLATE_DEFAULT) == 0)
		return 0;
	if (!px_template_name_valid(v)) {
		reply_error(r, 400, NULL, "template", "not a valid template "
		    "name: '%s'", shown(buf, sizeof(buf), v));
		return -1;
	}
	rc = px_store_template_get(r->c->ctl->store, v, t, err, sizeof(err));
	if (rc == PX_STORE_NOTFOUND) {
		reply_error(r, 400, NULL, "template", "no template '%s' (see "
		    "GET /v1/templates, netctl template ls)", v);
		return -1;
	}
	if (rc != PX_STORE_OK) {
		reply_store(r, rc, "template", err);
		return -1;
	}
	snprintf(name, namelen, "%s", v);
	*dir = t->dir;
	return 0;
}

/* Fleet mode: the id of the live host other than this one that holds
 * sandbox id (malloc'd), or NULL. */
static char *
fleet_sandbox_owner(struct px_control *ctl, const char *id)
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
		    h != NULL && (self == NULL || strcmp(h, self) != 0) &&
		    json_is_true(json_object_get(sb, "host_up")))
			owner = strdup(h);
	}
	json_decref(doc);
	return owner;
}

static void
h_sandbox_create(struct req *r)
{
	static const char *const fields[] = { "id", "address", "egress_mode",
	    "memory_mib", "vcpus", "disk_mib", "template", "idle_pause",
	    "idle_suspend", "max_lifetime", "boot", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct px_token tok;
	struct px_template tpl;
	struct px_vm_spec spec;
	const char *id, *addr, *mode, *const *f;
	char err[256], buf[64], secret[PX_TOKEN_LEN + 1];
	json_t *obj, *doc;
	char *owner;
	int rc, given;

	memset(secret, 0, sizeof(secret));
	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = string_field(r, obj, "id", 0, &id)) <= 0) {
		if (rc == 0)
			reply_error(r, 400, NULL, "id", "required");
		goto out;
	}
	if (check_sandbox_id(r, id) == -1)
		goto out;
	if ((owner = fleet_sandbox_owner(ctl, id)) != NULL) {
		reply_error(r, 409, NULL, "id", "sandbox id '%s' belongs to fleet "
		    "host %s, which is up: sandbox ids are unique in a fleet", id,
		    owner);
		free(owner);
		goto out;
	}
	if ((rc = string_field(r, obj, "address", 0, &addr)) < 0)
		goto out;
	if (rc == 0 && ctl->hooks.vm_create == NULL) {
		reply_error(r, 400, NULL, "address", "this berthd runs no VMM: "
		    "give the address of an externally managed sandbox");
		goto out;
	}
	if (addr != NULL && !px_valid_ip(addr)) {
		reply_error(r, 400, NULL, "address", "not an IP address: '%s'",
		    shown(buf, sizeof(buf), addr));
		goto out;
	}
	if (addr != NULL)
		for (f = vm_fields; *f != NULL; f++)
			if (json_object_get(obj, *f) != NULL) {
				reply_error(r, 400, NULL, *f, "applies only to "
				    "a microVM sandbox, not to an external one "
				    "(address)");
				goto out;
			}
	if (string_field(r, obj, "egress_mode", 1, &mode) < 0)
		goto out;
	if (mode != NULL && px_mode_rank(mode) < 0) {
		reply_error(r, 400, NULL, "egress_mode", "must be 'open', "
		    "'allowlist' or 'closed', not '%s'", shown(buf, sizeof(buf),
		    mode));
		goto out;
	}
	memset(&sb, 0, sizeof(sb));
	memset(&spec, 0, sizeof(spec));
	if (addr == NULL) {
		if (size_field(r, obj, 0, &sb.mem_mib) == -1 ||
		    size_field(r, obj, 1, &sb.vcpus) == -1 ||
		    size_field(r, obj, 2, &sb.disk_mib) == -1 ||
		    idle_field(r, obj, "idle_pause", &sb.idle_pause_ms,
		    &given) == -1 ||
		    idle_field(r, obj, "idle_suspend", &sb.idle_suspend_ms,
		    &given) == -1 ||
		    idle_field(r, obj, "max_lifetime", &sb.max_lifetime_ms,
		    &given) == -1 ||
		    template_field(r, obj, sb.template_name,
		    sizeof(sb.template_name), &tpl, &spec.template_dir) == -1)
			goto out;
		spec.template_name = sb.template_name;
		{
			json_t *bv = json_object_get(obj, "boot");

			if (bv != NULL && !json_is_boolean(bv) &&
			    !json_is_null(bv)) {
				reply_error(r, 400, NULL, "boot", "must be true "
				    "or false");
				goto out;
			}
			spec.boot = json_is_true(bv);
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
		reply_error(r, 500, NULL, NULL, "%s", err);
		goto out;
	}
	px_token_hash_hex(secret, strlen(secret), tok.sha256);
	snprintf(tok.name, sizeof(tok.name), "sandbox %s", sb.id);
	tok.created = sb.created;
	rc = px_store_sandbox_create(ctl->store, &sb, &tok, err, sizeof(err));
	if (rc == PX_STORE_NOTFOUND) {
		/* its template went meanwhile */
		reply_error(r, 400, NULL, "template", "%s", err);
		goto out;
	}
	if (rc != PX_STORE_OK) {
		reply_store(r, rc, "id", err);
		goto out;
	}
	if (!sb.external && (rc = ctl->hooks.vm_create(sb.id, &spec, err,
	    sizeof(err), ctl->hooks.arg)) != 0) {
		char e2[256];

		(void)px_store_sandbox_rm(ctl->store, sb.id, e2, sizeof(e2));
		/* -2: a build under way, minutes long; a failed one is not
		 * retried by waiting, so it gets no Retry-After */
		reply_error_hdr(r, 503, rc == -2 ? "Retry-After: 30\r\n" : NULL,
		    "cannot create sandbox '%s': %s", sb.id, err);
		goto out;
	}
	routes_changed(ctl);
	if ((doc = sandbox_json(ctl, &sb)) != NULL) {
		json_object_set_new(doc, "token", json_string(secret));
		json_object_set_new(doc, "token_id", json_string(tok.id));
	}
	reply_json(r, 201, doc);
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	json_decref(obj);
}

/* PATCH /v1/sandboxes/{id}: the idle limits of a VM-backed sandbox. */
static void
h_sandbox_set(struct req *r, const char *id)
{
	static const char *const fields[] = { "idle_pause", "idle_suspend",
	    "max_lifetime", NULL };
	static const unsigned bits[] = { PX_IDLE_PAUSE, PX_IDLE_SUSPEND,
	    PX_IDLE_LIFETIME };
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	int64_t v[3];
	unsigned which = 0;
	char err[256], why[256] = "", txt[32];
	json_t *obj;
	int i, given, rc;

	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	for (i = 0; i < 3; i++) {
		if (idle_field(r, obj, fields[i], &v[i], &given) == -1)
			goto out;
		if (!given)
			continue;
		which |= bits[i];
		if (v[i] == 0)
			snprintf(txt, sizeof(txt), "berth.conf's");
		else
			span_text(idle_vm(v[i]), txt, sizeof(txt));
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s %s",
		    why[0] ? ", " : "", fields[i], txt);
	}
	if (which == 0) {
		reply_error(r, 400, NULL, NULL, "give at least one of "
		    "idle_pause, idle_suspend, max_lifetime");
		goto out;
	}
	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		goto out;
	}
	if (sb.external) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is external: berth "
		    "runs no VM for it, so it has no idle policy", id);
		goto out;
	}
	if ((rc = px_store_sandbox_set_idle(ctl->store, id, which, v[0], v[1],
	    v[2], &sb, err, sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		goto out;
	}
	if (ctl->hooks.vm_set_idle != NULL)
		ctl->hooks.vm_set_idle(id, idle_vm(sb.idle_pause_ms),
		    idle_vm(sb.idle_suspend_ms), idle_vm(sb.max_lifetime_ms),
		    ctl->hooks.arg);
	record_event(ctl, id, "set", "ok", why, -1);
	reply_json(r, 200, sandbox_json(ctl, &sb));
out:
	json_decref(obj);
}

static void
h_sandbox_show(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct list_ctx lc = { ctl, NULL, NULL, NULL };
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
	if ((obj = sandbox_json(ctl, &sb)) == NULL ||
	    json_object_set_new(obj, "ports", lc.array) == -1) {
		json_decref(obj);
		reply_error(r, 500, NULL, NULL, "out of memory");
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
	if (ctl->hooks.vm_delete != NULL)
		ctl->hooks.vm_delete(id, ctl->hooks.arg);
	if (ctl->hooks.routes_changed != NULL)
		ctl->hooks.routes_changed(ctl->hooks.arg);
	reply_empty(r, 204);
}

static void
h_port_list(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct page pg;
	struct list_ctx lc = { ctl, NULL, &pg, id };
	char err[256];
	int rc;

	if (page_parse(r, &pg) == -1)
		return;
	if ((lc.array = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_port_list(ctl->store, id, add_port, &lc, err, sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(lc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	reply_json(r, 200, page_doc("ports", lc.array, &pg));
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
		reply_error(r, 400, NULL, "host", "not a valid host name: '%s' "
		    "(lower-case letters, digits, '-' and '.', no trailing dot)",
		    shown(buf, sizeof(buf), host));
		return -1;
	}
	if (px_host_is_ip(host)) {
		reply_error(r, 400, NULL, "host", "'%s' is an IP address: custom "
		    "hosts are DNS names only", shown(buf, sizeof(buf), host));
		return -1;
	}
	/* Names under berth's domain are berth's: <port>-<sandbox> for
	 * every port, and <name>-<sandbox> that sandbox may take. Anything
	 * else there would shadow, or squat, another sandbox's names. */
	if (dl > 0 && (strcmp(host, domain) == 0 || px_host_under(host, domain))) {
		if (px_host_own_name(host, domain, id))
			return 0;
		reply_error(r, 400, NULL, "host", "'%s' is under berth's domain "
		    "'%s', where sandbox %s may only use <name>-%s.%s (a name "
		    "of letters and digits, starting with a letter)",
		    shown(buf, sizeof(buf), host), domain, id, id, domain);
		return -1;
	}
	if (px_host_is_localhost(host)) {
		reply_error(r, 400, NULL, "host", "'%s' is a localhost name (it "
		    "means the client's own machine): custom hosts are names "
		    "under allowed suffixes", shown(buf, sizeof(buf), host));
		return -1;
	}
	if (fleet_host_taken(r->c->ctl, id, host)) {
		reply_error(r, 400, NULL, "host", "'%s' is held by another "
		    "sandbox (on another fleet host)", shown(buf, sizeof(buf), host));
		return -1;
	}
	if (r->auth.admin)
		return 0;
	for (k = 0; cf != NULL && k < cf->nhost_suffix; k++)
		if (px_host_under(host, cf->host_suffix[k]))
			return 0;
	if (cf == NULL || cf->nhost_suffix == 0) {
		reply_error(r, 400, NULL, "host", "'%s': berth.conf allows no "
		    "custom host suffix (custom_host_suffix), so only the admin "
		    "token may set custom hosts", shown(buf, sizeof(buf), host));
		return -1;
	}
	list[0] = '\0';
	for (k = 0; k < cf->nhost_suffix; k++) {
		size_t n = strlen(list);

		snprintf(list + n, sizeof(list) - n, "%s*.%s", k ? ", " : "",
		    cf->host_suffix[k]);
	}
	reply_error(r, 400, NULL, "host", "'%s' is not under a suffix ops "
	    "allow for custom hosts (custom_host_suffix): %s",
	    shown(buf, sizeof(buf), host), list);
	return -1;
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
		else if (check_custom_host(r, id, host) == -1)
			goto out;
		else
			snprintf(p.custom_host, sizeof(p.custom_host), "%s", host);
	}
	rc = px_store_port_set(ctl->store, &p, &created, err, sizeof(err));
	if (rc == PX_STORE_CONFLICT && r->auth.admin) {
		/* the one conflict a port has: its custom host is taken */
		reply_error(r, 400, NULL, "host", "%s: a sandbox may not take "
		    "another's host", err);
		goto out;
	}
	if (rc == PX_STORE_CONFLICT) {
		/* a sandbox token learns no other sandbox's name */
		reply_error(r, 400, NULL, "host", "'%s' is held by another "
		    "sandbox", shown(buf, sizeof(buf), p.custom_host));
		goto out;
	}
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

/* ---- lifecycle and events ---- */

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
record_event(struct px_control *ctl, const char *id, const char *op,
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

/* A lifecycle operation whose answer waits for the VMM. */
struct pending {
	struct px_control *ctl;
	struct conn *c;
	uint64_t serial;
	enum http_method method;
	int64_t t0;
	char id[PX_SANDBOX_ID_MAX + 1];
	char op[16];
	char name[PX_SANDBOX_ID_MAX + 1];	/* a checkpoint's */
};

static void conn_read(struct bufferevent *, void *);
static void conn_free(struct conn *);


/* A deferred answer (lifecycle, exec) was written: the connection reads
 * again, with its idle timeout back (pipelined requests waited). */
static void
conn_resume(struct conn *c)
{
	c->waiting = 0;
	bufferevent_set_timeouts(c->bev, &ctl_idle, &ctl_idle);
	if (c->closing)
		bufferevent_disable(c->bev, EV_READ);
	else
		conn_read(c->bev, c);
}
static json_t *
checkpoint_json(const char *id, const struct px_checkpoint *k)
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
		reply_error(r, 500, NULL, NULL, "checkpoint '%s' of sandbox '%s' "
		    "was taken but is not listed", name, id);
		return;
	}
	if (rc < 0) {
		reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	doc = checkpoint_json(id, &k);
	if (detail != NULL && detail[0] != '\0')
		json_object_set_new(doc, "detail", json_string(detail));
	reply_json(r, 201, doc);
}

static void
lifecycle_done(void *arg, int ok, const char *reason)
{
	struct pending *p = arg;
	struct px_control *ctl = p->ctl;
	struct px_sandbox sb;
	struct conn *c;
	struct req r;
	char err[256];

	record_event(ctl, p->id, p->op, ok ? "ok" : "failed", ok ? "" : reason,
	    now_ms() - p->t0);
	routes_changed(ctl);
	/* the client may have gone meanwhile */
	TAILQ_FOREACH(c, &ctl->conns, entry)
		if (c == p->c && c->serial == p->serial)
			break;
	if (c == NULL) {
		free(p);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = p->method;
	if (!ok)
		reply_error(&r, 503, NULL, NULL, "%s of sandbox '%s' failed: %s",
		    p->op, p->id, reason ? reason : "unknown error");
	else if (strcmp(p->op, "checkpoint") == 0)
		reply_checkpoint(ctl, &r, p->id, p->name, reason);
	else if (px_store_sandbox_get(ctl->store, p->id, &sb, err, sizeof(err)) !=
	    PX_STORE_OK)
		reply_error(&r, 500, NULL, NULL, "state store: %s", err);
	else
		reply_json(&r, 200, sandbox_json(ctl, &sb));
	free(p);
	conn_resume(c);
}

/* An answer that comes later (lifecycle_done): read no further request
 * on this connection meanwhile, so answers stay in order. A boot may take
 * longer than the idle timeout: the client is not idle, we are. NULL
 * (answered) when out of memory. */
static struct pending *
pending_new(struct req *r, const char *id, const char *op)
{
	struct pending *p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		reply_error(r, 503, NULL, NULL, "out of memory");
		return NULL;
	}
	p->ctl = r->c->ctl;
	p->c = r->c;
	p->serial = r->c->serial;
	p->method = r->method;
	p->t0 = now_ms();
	snprintf(p->id, sizeof(p->id), "%s", id);
	snprintf(p->op, sizeof(p->op), "%s", op);
	r->c->waiting = 1;
	bufferevent_set_timeouts(r->c->bev, NULL, NULL);
	return p;
}

/* The operation did not start after all: the connection reads on. */
static void
pending_drop(struct req *r, struct pending *p)
{
	r->c->waiting = 0;
	bufferevent_set_timeouts(r->c->bev, &ctl_idle, &ctl_idle);
	free(p);
}

static void
h_lifecycle(struct req *r, const char *id, const char *op)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct pending *p;
	char err[256] = "";
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (sb.external || ctl->hooks.lifecycle == NULL) {
		record_event(ctl, id, op, "refused", "not a VM-backed sandbox",
		    -1);
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it cannot %s", id, op);
		return;
	}
	/* resume continues a guest (memory kept); start boots one anew:
	 * asking for the wrong one says which is right */
	if (strcmp(op, "resume") == 0 && (strcmp(sb.state, PX_STATE_FAILED) ==
	    0 || strcmp(sb.state, PX_STATE_STOPPED) == 0) &&
	    !vm_resumable(ctl, id)) {
		snprintf(err, sizeof(err), "sandbox is %s: use start", sb.state);
		record_event(ctl, id, op, "refused", err, -1);
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: there is "
		    "nothing to resume; start it (netctl sandbox start %s, or "
		    "POST /v1/sandboxes/%s/start) to boot it again from its "
		    "template, keeping its disk", id, sb.state, id, id);
		return;
	}
	if (strcmp(op, "start") == 0 && (strcmp(sb.state, PX_STATE_PAUSED) ==
	    0 || strcmp(sb.state, PX_STATE_SUSPENDED) == 0)) {
		snprintf(err, sizeof(err), "sandbox is %s: use resume", sb.state);
		record_event(ctl, id, op, "refused", err, -1);
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: resume it "
		    "(netctl sandbox resume %s) to continue where it was, or "
		    "restart it to boot it anew", id, sb.state, id);
		return;
	}
	if ((p = pending_new(r, id, op)) == NULL)
		return;
	rc = ctl->hooks.lifecycle(id, op, lifecycle_done, p, err, sizeof(err),
	    ctl->hooks.arg);
	if (rc != 0) {
		pending_drop(r, p);
		record_event(ctl, id, op, "failed", err, 0);
		reply_error(r, 503, NULL, NULL, "%s of sandbox '%s' failed: %s",
		    op, id, err);
	}
}

/* ---- exec: a command in the guest (exec.c in berthd) ---- */

#define EXEC_MAX_ARGS		4096
#define EXEC_TIMEOUT_DEFAULT	(10 * 60 * 1000)
#define EXEC_TIMEOUT_MAX	(24 * 3600 * 1000)
#define EXEC_RING_DEFAULT	(1024 * 1024)	/* a detached command's */

struct exec_pending {
	struct px_control *ctl;
	struct conn *c;
	uint64_t serial;
	enum http_method method;
};

/* Output as JSON text when it is UTF-8 (jansson checks), else base64. */
static int
exec_stream(json_t *doc, const char *key, const unsigned char *p, size_t len)
{
	char enc_key[32];
	json_t *s;
	char *b;

	snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
	if ((s = json_stringn((const char *)p, len)) != NULL) {
		json_object_set_new(doc, key, s);
		json_object_set_new(doc, enc_key, json_string("utf-8"));
		return 0;
	}
	if ((b = malloc(4 * ((len + 2) / 3) + 1)) == NULL)
		return -1;
	EVP_EncodeBlock((unsigned char *)b, p, (int)len);
	json_object_set_new(doc, key, json_string(b));
	json_object_set_new(doc, enc_key, json_string("base64"));
	free(b);
	return 0;
}

static void
exec_done(void *arg, const struct px_exec_result *res)
{
	struct exec_pending *p = arg;
	struct px_control *ctl = p->ctl;
	struct conn *c;
	struct req r;
	json_t *doc;

	/* the client may have gone meanwhile */
	TAILQ_FOREACH(c, &ctl->conns, entry)
		if (c == p->c && c->serial == p->serial)
			break;
	if (c == NULL) {
		free(p);
		return;
	}
	c->pexec = NULL;
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = p->method;
	if (res->status != 200) {
		reply_error(&r, res->status, NULL, NULL, "%s", res->message ?
		    res->message : "exec failed");
	} else if (res->proc != 0) {
		/* detached: its handle */
		if ((doc = json_pack("{s:I, s:I, s:s, s:I}", "process",
		    (json_int_t)res->proc, "pid", (json_int_t)res->pid,
		    "state", "running", "wake_ms", (json_int_t)res->wake_ms)) ==
		    NULL)
			reply_error(&r, 503, NULL, NULL, "out of memory");
		else
			reply_json(&r, 201, doc);
	} else if ((doc = json_pack("{s:o, s:o, s:b, s:b, s:I, s:I}",
	    "exit_code", res->exited ? json_integer(res->exit_code) :
	    json_null(), "signal", res->exited ? json_null() :
	    json_integer(res->signal), "timed_out", res->timed_out,
	    "truncated", res->truncated, "wake_ms", (json_int_t)res->wake_ms,
	    "duration_ms", (json_int_t)res->duration_ms)) == NULL ||
	    exec_stream(doc, "stdout", res->out, res->outlen) < 0 ||
	    exec_stream(doc, "stderr", res->err, res->errlen) < 0) {
		json_decref(doc);
		reply_error(&r, 503, NULL, NULL, "out of memory");
	} else
		reply_json(&r, 200, doc);
	free(p);
	conn_resume(c);
}

/* 1 if s is an environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
static int
env_name_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' &&
		    s[i] <= 'z') || s[i] == '_' || (i > 0 && s[i] >= '0' &&
		    s[i] <= '9')))
			return 0;
	return i > 0 && i <= 256;
}

/* The checked parts of an exec request, and what holds them. */
struct exec_parsed {
	struct px_exec_req er;
	char **argv, **env;
	unsigned char *in;
};

static void
exec_parsed_free(struct exec_parsed *ep)
{
	size_t i;

	if (ep->env != NULL)
		for (i = 0; ep->env[i] != NULL; i++)
			free(ep->env[i]);
	free(ep->env);
	free(ep->argv);
	free(ep->in);
	memset(ep, 0, sizeof(*ep));
}

/*
 * Checks an exec request's JSON into ep (strings point into obj, which
 * must outlive it). streamed: stdin comes as frames, not in the JSON.
 * 0, or -1 after replying the error.
 */
static int
exec_parse(struct req *r, json_t *obj, int streamed, struct exec_parsed *ep)
{
	struct px_exec_req *er = &ep->er;
	json_t *v, *argv_j, *env_j;
	char err[512], buf[64];
	const char *text, *key;
	uint64_t ms;
	size_t i, n, pad;
	int rc, len;

	memset(ep, 0, sizeof(*ep));
	argv_j = json_object_get(obj, "argv");
	if (!json_is_array(argv_j) || json_array_size(argv_j) == 0 ||
	    json_array_size(argv_j) > EXEC_MAX_ARGS) {
		reply_error(r, 400, NULL, "argv", "must be an array of 1 to %d "
		    "strings: the command and its arguments", EXEC_MAX_ARGS);
		goto fail;
	}
	n = json_array_size(argv_j);
	if ((ep->argv = calloc(n + 1, sizeof(*ep->argv))) == NULL)
		goto oom;
	json_array_foreach(argv_j, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) !=
		    json_string_length(v) || (i == 0 &&
		    json_string_length(v) == 0)) {
			reply_error(r, 400, NULL, "argv", "argv[%zu] must be a "
			    "string without NUL%s", i, i == 0 ?
			    ", and not empty" : "");
			goto fail;
		}
		ep->argv[i] = (char *)json_string_value(v);
	}
	er->argv = ep->argv;
	er->argc = (int)n;
	env_j = json_object_get(obj, "env");
	if (env_j != NULL && !json_is_null(env_j)) {
		if (!json_is_object(env_j) || json_object_size(env_j) >
		    EXEC_MAX_ARGS) {
			reply_error(r, 400, NULL, "env", "must be an object of "
			    "at most %d NAME: \"value\" strings", EXEC_MAX_ARGS);
			goto fail;
		}
		if ((ep->env = calloc(json_object_size(env_j) + 1,
		    sizeof(*ep->env))) == NULL)
			goto oom;
		json_object_foreach(env_j, key, v) {
			if (!env_name_ok(key) || !json_is_string(v) ||
			    strlen(json_string_value(v)) != json_string_length(v)) {
				reply_error(r, 400, NULL, "env", "'%s': names are "
				    "[A-Za-z_][A-Za-z0-9_]*, values strings "
				    "without NUL", shown(buf, sizeof(buf), key));
				goto fail;
			}
			if (asprintf(&ep->env[er->envc], "%s=%s", key,
			    json_string_value(v)) < 0) {
				ep->env[er->envc] = NULL;
				goto oom;
			}
			er->envc++;
		}
	}
	er->env = ep->env;
	if (string_field(r, obj, "cwd", 1, &er->cwd) < 0)
		goto fail;
	if (string_field(r, obj, "user", 1, &er->user) < 0)
		goto fail;
	if (er->user != NULL && (*er->user == '\0' || strlen(er->user) > 32 ||
	    strpbrk(er->user, ":\n/") != NULL)) {
		reply_error(r, 400, NULL, "user", "'%s': a user name or uid of "
		    "the guest's /etc/passwd", shown(buf, sizeof(buf),
		    er->user));
		goto fail;
	}
	v = json_object_get(obj, "tty");
	if (json_is_true(v)) {
		er->tty = 1;
	} else if (json_is_object(v)) {
		json_t *rows = json_object_get(v, "rows");
		json_t *cols = json_object_get(v, "cols");

		if (json_object_size(v) != 2 || !json_is_integer(rows) ||
		    !json_is_integer(cols) || json_integer_value(rows) < 1 ||
		    json_integer_value(rows) > 10000 ||
		    json_integer_value(cols) < 1 ||
		    json_integer_value(cols) > 10000) {
			reply_error(r, 400, NULL, "tty", "must be true, false, "
			    "or {\"rows\": R, \"cols\": C} (1 to 10000)");
			goto fail;
		}
		er->tty = 1;
		er->rows = (int)json_integer_value(rows);
		er->cols = (int)json_integer_value(cols);
	} else if (v != NULL && !json_is_false(v) && !json_is_null(v)) {
		reply_error(r, 400, NULL, "tty", "must be true, false, or "
		    "{\"rows\": R, \"cols\": C}");
		goto fail;
	}
	er->timeout_ms = EXEC_TIMEOUT_DEFAULT;
	if ((rc = string_field(r, obj, "timeout", 1, &text)) < 0)
		goto fail;
	if (rc == 1 && text != NULL) {
		if (px_rule_duration(text, &ms, err, sizeof(err)) < 0) {
			reply_error(r, 400, NULL, "timeout", "%s", err);
			goto fail;
		}
		if (ms < 1000 || ms > EXEC_TIMEOUT_MAX) {
			reply_error(r, 400, NULL, "timeout", "'%s': use 1s to "
			    "24h", shown(buf, sizeof(buf), text));
			goto fail;
		}
		er->timeout_ms = ms;
	}
	v = json_object_get(obj, "detach");
	if (v != NULL && !json_is_boolean(v) && !json_is_null(v)) {
		reply_error(r, 400, NULL, "detach", "must be true or false");
		goto fail;
	}
	if (json_is_true(v)) {
		json_t *ring = json_object_get(obj, "ring");

		if (streamed) {
			reply_error(r, 400, NULL, "detach", "a detached command "
			    "is started with a plain POST .../exec (its output "
			    "is read from .../processes/N/logs)");
			goto fail;
		}
		er->ring = EXEC_RING_DEFAULT;
		if (ring != NULL && !json_is_null(ring)) {
			if (!json_is_integer(ring) || json_integer_value(ring) <
			    1024 || json_integer_value(ring) > BA_RING_MAX) {
				reply_error(r, 400, NULL, "ring", "must be the "
				    "bytes of output kept, 1024 to %d",
				    BA_RING_MAX);
				goto fail;
			}
			er->ring = (uint32_t)json_integer_value(ring);
		}
		v = json_object_get(obj, "keep_awake");
		if (v != NULL && !json_is_boolean(v) && !json_is_null(v)) {
			reply_error(r, 400, NULL, "keep_awake", "must be true or "
			    "false");
			goto fail;
		}
		er->keep_awake = json_is_true(v);
		/* a detached command lives until it ends: no timeout unless
		 * one is given */
		if (json_object_get(obj, "timeout") == NULL)
			er->timeout_ms = 0;
	} else if (json_object_get(obj, "ring") != NULL ||
	    json_object_get(obj, "keep_awake") != NULL) {
		reply_error(r, 400, NULL, json_object_get(obj, "ring") != NULL ?
		    "ring" : "keep_awake", "only for a detached command "
		    "(\"detach\": true)");
		goto fail;
	}
	if ((rc = string_field(r, obj, "stdin", 1, &text)) < 0)
		goto fail;
	if (rc == 1 && text != NULL && er->ring != 0) {
		reply_error(r, 400, NULL, "stdin", "a detached command's stdin "
		    "is /dev/null");
		goto fail;
	}
	if (rc == 1 && text != NULL && streamed) {
		reply_error(r, 400, NULL, "stdin", "a streamed exec sends its "
		    "stdin as 'I' frames");
		goto fail;
	}
	if (rc == 1 && text != NULL && (n = strlen(text)) > 0) {
		/* EVP_DecodeBlock counts the padding as zero bytes */
		for (pad = 0; pad < 2 && pad < n && text[n - 1 - pad] == '=';
		    pad++)
			;
		if ((ep->in = malloc(n / 4 * 3 + 3)) == NULL)
			goto oom;
		if (n % 4 != 0 || (len = EVP_DecodeBlock(ep->in,
		    (const unsigned char *)text, (int)n)) < 0) {
			reply_error(r, 400, NULL, "stdin", "must be base64 "
			    "(RFC 4648, with padding)");
			goto fail;
		}
		er->stdin_data = ep->in;
		er->stdin_len = (size_t)len - pad;
	}
	return 0;
oom:
	reply_error(r, 503, NULL, NULL, "out of memory");
fail:
	exec_parsed_free(ep);
	return -1;
}

static void cs_exec_begin(struct req *, const char *id);

static void
h_exec(struct req *r, const char *id)
{
	static const char *const allowed[] = { "argv", "env", "cwd",
	    "timeout", "stdin", "user", "tty", "detach", "ring", "keep_awake",
	    NULL };
	struct px_control *ctl = r->c->ctl;
	struct exec_parsed ep;
	struct px_sandbox sb;
	struct exec_pending *p = NULL;
	json_t *obj;
	char err[512];
	int rc, status = 503;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (r->c->rh.streamed) {	/* ?stream=1: the request comes as frames */
		cs_exec_begin(r, id);
		return;
	}
	if ((obj = body_object(r, allowed, 0)) == NULL)
		return;
	if (exec_parse(r, obj, 0, &ep) < 0) {
		json_decref(obj);
		return;
	}
	if (sb.external || ctl->hooks.exec == NULL) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: there is no guest to run a command in",
		    id);
		goto out;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		reply_error(r, 503, NULL, NULL, "out of memory");
		goto out;
	}
	p->ctl = ctl;
	p->c = r->c;
	p->serial = r->c->serial;
	p->method = r->method;
	/* As for lifecycle operations: the answer comes later, in order,
	 * and a long command is not an idle client. */
	r->c->waiting = 1;
	bufferevent_set_timeouts(r->c->bev, NULL, NULL);
	r->c->pexec = p;
	if (ctl->hooks.exec(id, &ep.er, exec_done, p, &status, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		r->c->pexec = NULL;
		r->c->waiting = 0;
		bufferevent_set_timeouts(r->c->bev, &ctl_idle, &ctl_idle);
		free(p);
		if (status == 429)
			reply_error_hdr(r, 429, "Retry-After: 1\r\n", "%s", err);
		else
			reply_error(r, status, NULL, NULL, "%s", err);
	}
out:
	exec_parsed_free(&ep);
	json_decref(obj);
}

/* ---- streamed exec and files ----
 * POST .../exec?stream=1 and PUT .../files are served from their head
 * (conn_read: early): the body goes to the guest as it comes, with
 * backpressure both ways (CS_IN_HIGH queued toward the guest stops
 * reading the client; CTL_OUT_HIGH unsent to the client stops taking
 * the guest's output, exec_read). GET .../files answers as the guest
 * sends. Framing (README, "Streamed exec"): the agent's own frames, a
 * 4-byte big-endian length, a type byte, the payload; the client sends
 * 'J' (the exec JSON, first), 'I' (stdin; empty: EOF), 'W' ("ROWS
 * COLS"); berthd answers in a chunked body 'O', 'R', and last 'X' (the
 * end, JSON) or 'F' (an error after the answer began, JSON). */

#define CS_IN_HIGH	(256 * 1024)
#define CS_JSON_MAX	(48 * 1024)
#define CS_PATH_MAX	4096

enum cs_kind { CS_EXEC, CS_PUT, CS_GET, CS_WATCH, CS_ATTACH };

/* exec?stream=1 and a process's attach: the exec framing both ways */
#define CS_FRAMED(cs)	((cs)->kind == CS_EXEC || (cs)->kind == CS_ATTACH)

struct cstream {
	struct conn *c;
	struct px_exec_stream *h;	/* NULL: not started, or ended */
	enum cs_kind kind;
	enum http_method method;
	char id[PX_SANDBOX_ID_MAX + 1];
	char path[CS_PATH_MAX + 1];
	unsigned mode;
	uint32_t proc;			/* attach: the process */
	int head_sent, in_paused, out_paused, body_done, eof_sent;
	struct evbuffer *fbuf;		/* exec: a client frame not whole yet */
	uint64_t bytes;
	int64_t wake_ms;
};

static void
cs_free(struct cstream *cs)
{
	if (cs->fbuf != NULL)
		evbuffer_free(cs->fbuf);
	free(cs);
}

static void
cs_head(struct cstream *cs, const char *ctype)
{
	struct evbuffer *out = bufferevent_get_output(cs->c->bev);

	cs->c->ctl->responses[2]++;
	evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
	    "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n"
	    "Berth-Wake-Ms: %lld\r\n%s\r\n", ctype, (long long)cs->wake_ms,
	    cs->c->closing || cs->c->close_after ? "Connection: close\r\n" :
	    "");
	cs->head_sent = 1;
}

/* One chunk: for exec a frame of type, for a file its bytes. */
static void
cs_chunk(struct cstream *cs, int type, const void *p, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(cs->c->bev);
	unsigned char h[BA_HDR];

	if (CS_FRAMED(cs)) {
		evbuffer_add_printf(out, "%zx\r\n", len + BA_HDR);
		ba_hdr_put(h, (uint32_t)len, type);
		evbuffer_add(out, h, sizeof(h));
	} else if (len == 0)
		return;
	else
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, p, len);
	evbuffer_add(out, "\r\n", 2);
}

/* The answer is complete (or abandoned): the connection goes on with
 * its next request, or closes when the body was not all read. */
static void
cs_finish(struct cstream *cs)
{
	struct conn *c = cs->c;

	c->st = NULL;
	if (c->close_after)
		c->closing = 1;
	c->close_after = 0;
	if (cs->body_done && !c->closing) {
		cs_free(cs);
		conn_resume(c);
		return;
	}
	cs_free(cs);
	c->closing = 1;
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_free(c);	/* nothing left to flush */
}

static void
cs_start(void *arg, int64_t wake_ms)
{
	struct cstream *cs = arg;

	cs->wake_ms = wake_ms;
	if (CS_FRAMED(cs))
		cs_head(cs, "application/vnd.berth.exec-stream");
}

static void
cs_output(void *arg, int type, const unsigned char *p, size_t len)
{
	struct cstream *cs = arg;

	if (cs->kind == CS_PUT)
		return;
	if (!cs->head_sent)
		cs_head(cs, "application/octet-stream");
	cs->bytes += len;
	cs_chunk(cs, type, p, len);
	if (!cs->out_paused && evbuffer_get_length(bufferevent_get_output(
	    cs->c->bev)) > CTL_OUT_HIGH && cs->h != NULL) {
		cs->out_paused = 1;
		cs->c->ctl->hooks.exec_read(cs->h, 0);
	}
}

static const char *const event_names[HM_EV_COUNT] = { "create", "modify",
	"attrib", "delete", "move_from", "move_to", "delete_self", "overflow",
	"unwatched", "ready" };

static int json_set_bytes(json_t *, const char *, const void *, size_t);

/* One event of a watch: a line of JSON (application/x-ndjson). */
static void
cs_event(void *arg, const struct px_watch_event *ev)
{
	struct cstream *cs = arg;
	struct evbuffer *out = bufferevent_get_output(cs->c->bev);
	json_t *o;
	char *text = NULL;
	size_t n;

	if (cs->kind != CS_WATCH || ev->event < 0 || ev->event >= HM_EV_COUNT)
		return;
	if ((o = json_pack("{s:s}", "event", event_names[ev->event])) != NULL &&
	    json_set_bytes(o, "path", ev->path, ev->pathlen) == 0) {
		if (ev->event != HM_EV_READY && ev->event != HM_EV_OVERFLOW)
			json_object_set_new(o, "dir", json_boolean(ev->dir));
		if (ev->event == HM_EV_MOVE_FROM || ev->event == HM_EV_MOVE_TO)
			json_object_set_new(o, "cookie",
			    json_integer(ev->cookie));
		text = json_dumps(o, JSON_COMPACT);
	}
	json_decref(o);
	if (text == NULL)
		text = strdup("{\"event\":\"overflow\",\"path\":\"\"}");
	if (!cs->head_sent)
		cs_head(cs, "application/x-ndjson");
	n = text != NULL ? strlen(text) : 0;
	evbuffer_add_printf(out, "%zx\r\n", n + 1);
	evbuffer_add(out, text, n);
	evbuffer_add(out, "\n\r\n", 3);
	free(text);
	cs->bytes += n + 1;
	if (!cs->out_paused && evbuffer_get_length(out) > CTL_OUT_HIGH &&
	    cs->h != NULL) {
		cs->out_paused = 1;
		cs->c->ctl->hooks.exec_read(cs->h, 0);
	}
}

static void
cs_done(void *arg, const struct px_exec_result *res)
{
	struct cstream *cs = arg;
	struct conn *c = cs->c;
	struct req r;
	char hdr[64], mode[8], *text;
	json_t *doc;

	cs->h = NULL;
	snprintf(mode, sizeof(mode), "%04o", cs->mode);
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = cs->method;
	snprintf(hdr, sizeof(hdr), "Berth-Wake-Ms: %lld\r\n",
	    (long long)res->wake_ms);
	if (!cs->head_sent) {
		cs->wake_ms = res->wake_ms;
		if (res->status != 200)
			reply_error_hdr(&r, res->status, hdr, "%s",
			    res->message ? res->message : "failed");
		else if (cs->kind == CS_PUT)
			reply_json_hdr(&r, 200, json_pack("{s:s, s:I, s:s, "
			    "s:I, s:I}", "path", cs->path, "size",
			    (json_int_t)cs->bytes, "mode", mode,
			    "wake_ms", (json_int_t)res->wake_ms, "duration_ms",
			    (json_int_t)res->duration_ms), hdr);
		else {
			cs_head(cs, cs->kind == CS_GET ?
			    "application/octet-stream" : cs->kind == CS_WATCH ?
			    "application/x-ndjson" :
			    "application/vnd.berth.exec-stream");
			evbuffer_add(bufferevent_get_output(c->bev),
			    "0\r\n\r\n", 5);
		}
	} else if (CS_FRAMED(cs)) {
		/* the last frame: X (an exec's end; an attach's: detached, the
		 * process running on, or the process's end) or F */
		if (res->status != 200)
			doc = json_pack("{s:i, s:s}", "status", res->status,
			    "message", res->message ? res->message : "failed");
		else if (cs->kind == CS_ATTACH)
			doc = json_pack("{s:I, s:s, s:o, s:o, s:b, s:I}",
			    "process", (json_int_t)cs->proc, "state",
			    res->proc_state == 0 ? "running" : "exited",
			    "exit_code", res->proc_state == 1 ?
			    json_integer(res->proc_code) : json_null(),
			    "signal", res->proc_state == 2 ?
			    json_integer(res->proc_code) : json_null(),
			    "detached", res->proc_state == 0, "next_offset",
			    (json_int_t)res->ring_total);
		else
			doc = json_pack("{s:o, s:o, s:b, s:I, s:I}",
			    "exit_code", res->exited ?
			    json_integer(res->exit_code) : json_null(),
			    "signal", res->exited ? json_null() :
			    json_integer(res->signal), "timed_out",
			    res->timed_out, "wake_ms", (json_int_t)res->wake_ms,
			    "duration_ms", (json_int_t)res->duration_ms);
		text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
		json_decref(doc);
		cs_chunk(cs, res->status == 200 ? BA_EXIT : BA_FAIL,
		    text != NULL ? text : "{}", text != NULL ? strlen(text) : 2);
		free(text);
		evbuffer_add(bufferevent_get_output(c->bev), "0\r\n\r\n", 5);
	} else if (res->status == 200) {
		evbuffer_add(bufferevent_get_output(c->bev), "0\r\n\r\n", 5);
	} else if (cs->kind == CS_WATCH) {
		/* the watch broke off: said in its last line */
		doc = json_pack("{s:s, s:i, s:s}", "event", "error", "status",
		    res->status, "message", res->message ? res->message :
		    "failed");
		text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
		json_decref(doc);
		if (text != NULL) {
			evbuffer_add_printf(bufferevent_get_output(c->bev),
			    "%zx\r\n%s\n\r\n", strlen(text) + 1, text);
			free(text);
		}
		evbuffer_add(bufferevent_get_output(c->bev), "0\r\n\r\n", 5);
	} else {
		/* the file broke off: no last chunk, the client sees a
		 * truncated body */
		c->closing = 1;
	}
	cs_finish(cs);
}

static void
cs_drained(void *arg)
{
	struct cstream *cs = arg;
	struct conn *c = cs->c;

	if (!cs->in_paused)
		return;
	cs->in_paused = 0;
	bufferevent_enable(c->bev, EV_READ);
	conn_read(c->bev, c);
}

static void
cs_queued(struct cstream *cs, size_t queued)
{
	if (queued > CS_IN_HIGH && !cs->in_paused) {
		cs->in_paused = 1;
		bufferevent_disable(cs->c->bev, EV_READ);
	}
}

/* Starts the stream's operation; -1 after replying why not. */
static int
cs_run(struct cstream *cs, struct req *r, const struct px_exec_req *er)
{
	struct px_control *ctl = cs->c->ctl;
	struct px_exec_sink sink = { .start = cs_start, .output = cs_output,
	    .done = cs_done, .drained = cs_drained, .event = cs_event,
	    .arg = cs };
	char err[512];
	int status = 503;

	cs->h = ctl->hooks.exec_stream(cs->id, er, &sink, &status, err,
	    sizeof(err), ctl->hooks.arg);
	if (cs->h == NULL) {
		if (status == 429)
			reply_error_hdr(r, 429, "Retry-After: 1\r\n", "%s", err);
		else
			reply_error(r, status, NULL, NULL, "%s", err);
		return -1;
	}
	return 0;
}

/* A new stream on r's connection; NULL after replying why not. */
static struct cstream *
cs_new(struct req *r, const char *id, enum cs_kind kind)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct cstream *cs;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return NULL;
	}
	if (sb.external || ctl->hooks.exec_stream == NULL) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest%s", id, kind == CS_EXEC ?
		    " to run a command in" : " to hold files");
		return NULL;
	}
	if ((cs = calloc(1, sizeof(*cs))) == NULL ||
	    ((kind == CS_EXEC || kind == CS_ATTACH) &&
	    (cs->fbuf = evbuffer_new()) == NULL)) {
		free(cs);
		reply_error(r, 503, NULL, NULL, "out of memory");
		return NULL;
	}
	cs->c = r->c;
	cs->kind = kind;
	cs->method = r->method;
	snprintf(cs->id, sizeof(cs->id), "%s", id);
	return cs;
}

/* The stream answers later; a long transfer is not an idle client. */
static void
cs_attach(struct cstream *cs)
{
	cs->c->st = cs;
	cs->c->waiting = 1;
	bufferevent_set_timeouts(cs->c->bev, NULL, NULL);
}

static void
cs_exec_begin(struct req *r, const char *id)
{
	struct cstream *cs;

	if ((cs = cs_new(r, id, CS_EXEC)) != NULL)
		cs_attach(cs);	/* runs at its 'J' frame */
}

/* The 'J' frame: the exec request; -1 after replying. */
static int
cs_exec_json(struct cstream *cs, const char *p, size_t len)
{
	static const char *const allowed[] = { "argv", "env", "cwd",
	    "timeout", "user", "tty", NULL };
	struct exec_parsed ep;
	struct req r;
	json_t *obj;
	int rc;

	memset(&r, 0, sizeof(r));
	r.c = cs->c;
	r.method = cs->method;
	r.body = p;
	r.bodylen = len;
	if ((obj = body_object(&r, allowed, 0)) == NULL)
		return -1;
	if (exec_parse(&r, obj, 1, &ep) < 0) {
		json_decref(obj);
		return -1;
	}
	rc = cs_run(cs, &r, &ep.er);
	exec_parsed_free(&ep);
	json_decref(obj);
	return rc;
}

/* An attach's 'J' frame: {"rows", "cols", "offset"} (all optional);
 * -1 after replying. */
static int
cs_attach_json(struct cstream *cs, const char *p, size_t len)
{
	static const char *const allowed[] = { "rows", "cols", "offset",
	    NULL };
	struct px_exec_req er;
	struct req r;
	json_t *obj, *v;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	r.c = cs->c;
	r.method = cs->method;
	r.body = p;
	r.bodylen = len;
	if ((obj = body_object(&r, allowed, 1)) == NULL)
		return -1;
	memset(&er, 0, sizeof(er));
	er.op = PX_PROC_ATTACH;
	er.proc = cs->proc;
	er.timeout_ms = 0;	/* until the client detaches */
	er.tty = 1;
	if ((v = json_object_get(obj, "rows")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1000) {
			reply_error(&r, 400, NULL, "rows", "must be 1 to 1000");
			goto out;
		}
		er.rows = (int)json_integer_value(v);
	}
	if ((v = json_object_get(obj, "cols")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1000) {
			reply_error(&r, 400, NULL, "cols", "must be 1 to 1000");
			goto out;
		}
		er.cols = (int)json_integer_value(v);
	}
	if ((er.rows == 0) != (er.cols == 0)) {
		reply_error(&r, 400, NULL, er.rows == 0 ? "rows" : "cols",
		    "rows and cols go together");
		goto out;
	}
	if ((v = json_object_get(obj, "offset")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			reply_error(&r, 400, NULL, "offset", "must be a byte "
			    "offset in the process's output");
			goto out;
		}
		er.offset = (uint64_t)json_integer_value(v);
	}
	rc = cs_run(cs, &r, &er);
out:
	json_decref(obj);
	return rc;
}

/* The client's body broke the framing: answer (or cut) and close. */
static void
cs_bad(struct cstream *cs, const char *msg)
{
	struct req r;

	if (cs->h != NULL) {
		cs->c->ctl->hooks.exec_cancel(cs->h);
		cs->h = NULL;
	}
	cs->c->closing = 1;
	if (!cs->head_sent) {
		memset(&r, 0, sizeof(r));
		r.c = cs->c;
		r.method = cs->method;
		reply_error(&r, 400, NULL, NULL, "%s", msg);
	}
	cs_finish(cs);
}

/* Body bytes of a streamed request. */
static void
cs_body(struct cstream *cs, const char *at, size_t len)
{
	struct px_control *ctl = cs->c->ctl;
	unsigned char h[BA_HDR], *p;
	size_t n, queued = 0;
	uint32_t flen;

	if (cs->kind == CS_PUT) {
		for (; len > 0; at += n, len -= n) {
			n = len > BA_CHUNK ? BA_CHUNK : len;
			queued = ctl->hooks.exec_input(cs->h, BA_STDIN, at, n);
			cs->bytes += n;
		}
		cs_queued(cs, queued);
		return;
	}
	evbuffer_add(cs->fbuf, at, len);
	while (evbuffer_copyout(cs->fbuf, h, BA_HDR) == BA_HDR) {
		flen = ba_hdr_len(h);
		if (cs->h == NULL && h[4] != 'J') {
			cs_bad(cs, "a streamed exec starts with its 'J' frame");
			return;
		}
		if (cs->h != NULL && !((h[4] == BA_STDIN && flen <= BA_CHUNK) ||
		    (h[4] == BA_RESIZE && flen <= 32)) ) {
			cs_bad(cs, "frames after 'J' are 'I' (at most 32 KiB) "
			    "or 'W'");
			return;
		}
		if (flen > CS_JSON_MAX) {
			cs_bad(cs, "the 'J' frame is larger than 48 KiB");
			return;
		}
		if (evbuffer_get_length(cs->fbuf) < BA_HDR + (size_t)flen)
			return;
		evbuffer_drain(cs->fbuf, BA_HDR);
		p = evbuffer_pullup(cs->fbuf, (ev_ssize_t)flen);
		if (h[4] == 'J') {
			if ((cs->kind == CS_ATTACH ? cs_attach_json(cs,
			    (const char *)p, flen) : cs_exec_json(cs,
			    (const char *)p, flen)) < 0) {
				cs->c->closing = 1;
				cs_finish(cs);
				return;
			}
		} else {
			if (h[4] == BA_STDIN && flen == 0)
				cs->eof_sent = 1;
			queued = ctl->hooks.exec_input(cs->h, h[4], p, flen);
			cs_queued(cs, queued);
		}
		evbuffer_drain(cs->fbuf, flen);
	}
}

/* The request's body ended. */
static void
cs_eof(struct cstream *cs)
{
	cs->body_done = 1;
	if (cs->h == NULL) {
		if (CS_FRAMED(cs))
			cs_bad(cs, "a streamed exec starts with its 'J' frame");
		return;
	}
	if (!cs->eof_sent) {
		cs->eof_sent = 1;
		cs->c->ctl->hooks.exec_input(cs->h, BA_STDIN, NULL, 0);
	}
}

/* ?path= (absolute) and for PUT ?mode= (octal); -1 after replying. */
/* What a request to the guest agent answers (agent_call, proc_done). */
enum proc_kind { PK_LIST, PK_SHOW, PK_LOGS, PK_KILL, PK_WAIT,
	PK_FLIST, PK_MKDIR, PK_REMOVE, PK_MOVE };

/* ?name=N, a decimal count of bytes: 0 (absent: *v as it was), -1
 * after replying. */
static int
query_u64(struct req *r, const char *name, uint64_t *v)
{
	char buf[32], *end;
	int rc;

	if ((rc = query_get(r, name, buf, sizeof(buf))) == 0)
		return 0;
	errno = 0;
	if (rc == 1 && buf[0] >= '0' && buf[0] <= '9')
		*v = strtoull(buf, &end, 10);
	if (rc == -1 || buf[0] < '0' || buf[0] > '9' || *end != '\0' ||
	    errno == ERANGE) {
		reply_error(r, 400, NULL, name, "must be a number of bytes "
		    "(0 or more)");
		return -1;
	}
	return 0;
}

/* ?path= decoded into path (size > CS_PATH_MAX): 1 when absolute and at
 * most CS_PATH_MAX bytes decoded, else -1 after replying (what names
 * it, e.g. "an absolute directory"). */
static int
query_path(struct req *r, char *path, size_t size, const char *what)
{
	char buf[3 * CS_PATH_MAX + 1];
	int rc;

	if ((rc = query_get(r, "path", buf, sizeof(buf))) != 1 ||
	    buf[0] != '/' || strlen(buf) > CS_PATH_MAX ||
	    strlen(buf) >= size) {
		reply_error(r, 400, NULL, "path", "%s", rc == -1 ? "?path= is "
		    "not valid percent-encoding" : rc == 1 && buf[0] == '/' ?
		    "?path= is longer than 4096 bytes" : what);
		return -1;
	}
	memcpy(path, buf, strlen(buf) + 1);
	return 1;
}

/* A path in the guest from a query or a body: absolute, at most
 * CS_PATH_MAX bytes; -1 after replying. */
static int
guest_path(struct req *r, const char *field, const char *p)
{
	if (p == NULL || p[0] != '/' || strlen(p) > CS_PATH_MAX) {
		reply_error(r, 400, NULL, field, "must be an absolute path in "
		    "the guest (at most %d bytes)", CS_PATH_MAX);
		return -1;
	}
	return 0;
}

/* The sandbox exists and has a guest; -1 after replying. */
static int
guest_sandbox(struct req *r, const char *id)
{
	struct px_sandbox sb;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(r->c->ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return -1;
	}
	if (sb.external) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest to hold files", id);
		return -1;
	}
	return 0;
}

static void agent_call(struct req *, const char *, struct px_exec_req *,
    int, uint32_t);

/* ?name=1 (or true); 0 absent or 0/false; -1 after replying */
static int
query_flag(struct req *r, const char *name)
{
	char buf[8];
	int rc;

	if ((rc = query_get(r, name, buf, sizeof(buf))) == 0)
		return 0;
	if (rc == 1 && (strcmp(buf, "1") == 0 || strcmp(buf, "true") == 0))
		return 1;
	if (rc == 1 && (strcmp(buf, "0") == 0 || strcmp(buf, "false") == 0))
		return 0;
	reply_error(r, 400, NULL, name, "must be 1 or 0");
	return -1;
}

#define LIST_DEFAULT	10000	/* entries of a listing */
#define LIST_MAX	100000

/* GET .../files?path=DIR&list=1[&limit=N] and DELETE
 * .../files?path=P[&recursive=1]: answered when the guest agent is. */
static void
files_simple(struct req *r, const char *id, int kind)
{
	struct px_exec_req er;
	char path[CS_PATH_MAX + 2];
	uint64_t limit = LIST_DEFAULT;

	memset(&er, 0, sizeof(er));
	if (query_path(r, path, sizeof(path), "?path= must be an absolute "
	    "path in the guest") < 0)
		return;
	er.path = path;
	er.timeout_ms = EXEC_TIMEOUT_DEFAULT;
	if (kind == PK_FLIST) {
		er.op = PX_FILE_LIST;
		if (query_u64(r, "limit", &limit) < 0)
			return;
		if (limit < 1 || limit > LIST_MAX) {
			reply_error(r, 400, NULL, "limit", "must be 1 to %d "
			    "entries", LIST_MAX);
			return;
		}
		er.max_entries = (uint32_t)limit;
	} else {
		er.op = PX_FILE_REMOVE;
		if ((er.recursive = query_flag(r, "recursive")) < 0)
			return;
		if (strspn(path, "/") == strlen(path)) {
			reply_error(r, 400, NULL, "path", "refusing to remove "
			    "the guest's root directory");
			return;
		}
	}
	if (guest_sandbox(r, id) == 0)
		agent_call(r, id, &er, kind, 0);
}

/* POST .../files/mkdir {"path", "parents", "mode"} and .../files/move
 * {"from", "to", "overwrite"}. */
static void
files_post(struct req *r, const char *id, const char *what)
{
	static const char *const mk_allowed[] = { "path", "parents", "mode",
	    NULL };
	static const char *const mv_allowed[] = { "from", "to", "overwrite",
	    NULL };
	struct px_exec_req er;
	json_t *obj, *v;
	const char *mode;
	int mk = strcmp(what, "mkdir") == 0;

	if ((obj = body_object(r, mk ? mk_allowed : mv_allowed, 0)) == NULL)
		return;
	memset(&er, 0, sizeof(er));
	er.timeout_ms = EXEC_TIMEOUT_DEFAULT;
	er.path = json_string_value(json_object_get(obj, mk ? "path" :
	    "from"));
	if (guest_path(r, mk ? "path" : "from", er.path) < 0)
		goto out;
	if (mk) {
		er.op = PX_FILE_MKDIR;
		er.mode = 0755;
		if ((v = json_object_get(obj, "parents")) != NULL &&
		    !json_is_boolean(v)) {
			reply_error(r, 400, NULL, "parents", "must be true or "
			    "false");
			goto out;
		}
		er.parents = json_is_true(v);
		if ((v = json_object_get(obj, "mode")) != NULL) {
			mode = json_string_value(v);
			if (mode == NULL || mode[0] == '\0' ||
			    strspn(mode, "01234567") != strlen(mode) ||
			    strlen(mode) > 5 || strtoul(mode, NULL, 8) > 07777) {
				reply_error(r, 400, NULL, "mode", "an octal mode "
				    "as a string, \"0\" to \"7777\" (e.g. "
				    "\"0755\")");
				goto out;
			}
			er.mode = (unsigned)strtoul(mode, NULL, 8);
		}
	} else {
		er.op = PX_FILE_MOVE;
		er.to = json_string_value(json_object_get(obj, "to"));
		if (guest_path(r, "to", er.to) < 0)
			goto out;
		if ((v = json_object_get(obj, "overwrite")) != NULL &&
		    !json_is_boolean(v)) {
			reply_error(r, 400, NULL, "overwrite", "must be true or "
			    "false");
			goto out;
		}
		er.overwrite = json_is_true(v);
	}
	if (guest_sandbox(r, id) == 0)
		agent_call(r, id, &er, mk ? PK_MKDIR : PK_MOVE, 0);
out:
	json_decref(obj);
}

static int
files_query(struct req *r, struct px_exec_req *er, char *path, size_t plen)
{
	char mode[16], buf[64];
	int rc;

	memset(er, 0, sizeof(*er));
	if (query_path(r, path, plen, "?path= must be an absolute path in "
	    "the guest") < 0)
		return -1;
	er->mode = 0644;
	if ((rc = query_get(r, "mode", mode, sizeof(mode))) == -1 ||
	    (rc == 1 && (mode[0] == '\0' || strspn(mode, "01234567") !=
	    strlen(mode) || strtoul(mode, NULL, 8) > 07777))) {
		reply_error(r, 400, NULL, "mode", "'%s': an octal mode, 0 to "
		    "7777 (e.g. 0644)", shown(buf, sizeof(buf), mode));
		return -1;
	}
	if (rc == 1)
		er->mode = (unsigned)strtoul(mode, NULL, 8);
	er->length = UINT64_MAX;
	if (r->method != HTTP_PUT && (query_u64(r, "offset", &er->offset) < 0 ||
	    query_u64(r, "length", &er->length) < 0))
		return -1;
	er->op = r->method == HTTP_PUT ? PX_FILE_PUT : PX_FILE_GET;
	er->path = path;
	er->timeout_ms = EXEC_TIMEOUT_DEFAULT;
	return 0;
}

/* GET .../watch?path=DIR[&recursive=1]: events as lines of JSON, until
 * the client goes or the directory does. */
static void
h_watch(struct req *r, const char *id)
{
	struct px_exec_req er;
	struct cstream *cs;

	if ((cs = cs_new(r, id, CS_WATCH)) == NULL)
		return;
	memset(&er, 0, sizeof(er));
	if (query_path(r, cs->path, sizeof(cs->path), "?path= must be an "
	    "absolute directory in the guest") < 0) {
		cs_free(cs);
		return;
	}
	if ((er.recursive = query_flag(r, "recursive")) < 0) {
		cs_free(cs);
		return;
	}
	er.op = PX_FILE_WATCH;
	er.path = cs->path;
	er.timeout_ms = 0;	/* until the client or the directory goes */
	if (cs_run(cs, r, &er) < 0) {
		cs_free(cs);
		return;
	}
	cs->body_done = 1;
	cs_attach(cs);
}

static void
h_files(struct req *r, const char *id)
{
	struct px_exec_req er;
	struct cstream *cs;
	int list;

	if (r->method == HTTP_DELETE) {
		files_simple(r, id, PK_REMOVE);
		return;
	}
	if (r->method == HTTP_GET) {
		if ((list = query_flag(r, "list")) < 0)
			return;
		if (list) {
			files_simple(r, id, PK_FLIST);
			return;
		}
	}

	if (r->method == HTTP_PUT && !r->c->rh.streamed) {
		reply_error(r, 400, NULL, NULL, "PUT the file to "
		    "/v1/sandboxes/%s/files?path=... as written here (no "
		    "encoded path segments)", id);
		return;
	}
	if ((cs = cs_new(r, id, r->method == HTTP_PUT ? CS_PUT :
	    CS_GET)) == NULL)
		return;
	if (files_query(r, &er, cs->path, sizeof(cs->path)) < 0 ||
	    cs_run(cs, r, &er) < 0) {
		cs_free(cs);
		return;
	}
	cs->mode = er.mode;
	cs->body_done = r->method == HTTP_GET;
	cs_attach(cs);
}

/* ---- detached processes (exec "detach": true) ----
 * GET .../processes, .../processes/N, .../processes/N/logs?offset=O
 * (?follow=1: streamed as it comes, to the process's end), POST
 * .../processes/N/kill {"signal": S} and .../processes/N/wait: each a
 * request to the guest agent (exec.c), answered when it answers. */

struct proc_pending {
	struct exec_pending ep;		/* first: conn->pexec, abandon */
	enum proc_kind kind;
	uint32_t proc;
	uint64_t offset;
	char id[PX_SANDBOX_ID_MAX + 1];
	char path[CS_PATH_MAX + 1], to[CS_PATH_MAX + 1];	/* files */
};

static void proc_done(void *, const struct px_exec_result *);

static json_t *
proc_json(const struct px_proc_info *pi)
{
	return json_pack("{s:I, s:I, s:s, s:o, s:o, s:b, s:I, s:I, s:s}",
	    "process", (json_int_t)pi->proc, "pid", (json_int_t)pi->pid,
	    "state", pi->state == 0 ? "running" : "exited",
	    "exit_code", pi->state == 1 ? json_integer(pi->code) : json_null(),
	    "signal", pi->state == 2 ? json_integer(pi->code) : json_null(),
	    "keep_awake", pi->keep, "started_ms", (json_int_t)pi->start_ms,
	    "output_bytes", (json_int_t)pi->total, "command", pi->cmd);
}

static const char *const ftype_names[] = { "file", "dir", "link", "fifo",
	"socket", "char", "block", "other" };

/* A name or path as JSON: key when UTF-8, else key_base64. */
static int
json_set_bytes(json_t *o, const char *key, const void *p, size_t len)
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

static int
dirent_cmp(const void *a, const void *b)
{
	const struct px_dirent *x = a, *y = b;
	size_t n = x->namelen < y->namelen ? x->namelen : y->namelen;
	int c = memcmp(x->name, y->name, n);

	return c != 0 ? c : (x->namelen > y->namelen) - (x->namelen <
	    y->namelen);
}

/* GET .../files?path=DIR&list=1: the entries, by name. */
static json_t *
dir_json(const char *path, const struct px_exec_result *res)
{
	struct px_dirent *v = NULL;
	json_t *list, *e;
	char mode[8], when[40];
	struct tm tm;
	time_t t;
	size_t i;

	if ((list = json_array()) == NULL)
		return NULL;
	if (res->nentries > 0 && (v = malloc(res->nentries *
	    sizeof(*v))) == NULL) {
		json_decref(list);
		return NULL;
	}
	if (v != NULL) {
		memcpy(v, res->entries, res->nentries * sizeof(*v));
		qsort(v, res->nentries, sizeof(*v), dirent_cmp);
	}
	for (i = 0; i < res->nentries; i++) {
		snprintf(mode, sizeof(mode), "%04o", v[i].mode);
		t = (time_t)(v[i].mtime_ms / 1000);
		gmtime_r(&t, &tm);
		snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d."
		    "%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		    tm.tm_hour, tm.tm_min, tm.tm_sec,
		    (int)(v[i].mtime_ms % 1000));
		e = json_pack("{s:s, s:I, s:s, s:s, s:I}", "type",
		    ftype_names[v[i].type], "size", (json_int_t)v[i].size,
		    "mode", mode, "mtime", when, "mtime_ms",
		    (json_int_t)v[i].mtime_ms);
		if (e == NULL || json_set_bytes(e, "name", v[i].name,
		    v[i].namelen) < 0 || json_array_append_new(list, e) < 0) {
			json_decref(e);
			json_decref(list);
			free(v);
			return NULL;
		}
	}
	free(v);
	if ((e = json_pack("{s:o, s:b}", "entries", list, "truncated",
	    res->truncated)) != NULL && json_set_bytes(e, "path", path,
	    strlen(path)) < 0) {
		json_decref(e);
		e = NULL;
	}
	return e;
}

static void
proc_done(void *arg, const struct px_exec_result *res)
{
	struct proc_pending *pp = arg;
	struct px_control *ctl = pp->ep.ctl;
	struct conn *c;
	struct req r;
	json_t *doc = NULL, *list;
	size_t i;

	TAILQ_FOREACH(c, &ctl->conns, entry)
		if (c == pp->ep.c && c->serial == pp->ep.serial)
			break;
	if (c == NULL) {
		free(pp);
		return;
	}
	c->pexec = NULL;
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = pp->ep.method;
	if (res->status != 200) {
		reply_error(&r, res->status, NULL, NULL, "%s", res->message ?
		    res->message : "failed");
		goto out;
	}
	switch (pp->kind) {
	case PK_LIST:
		if ((list = json_array()) == NULL)
			break;
		for (i = 0; i < res->nprocs; i++)
			json_array_append_new(list, proc_json(&res->procs[i]));
		doc = json_pack("{s:o}", "processes", list);
		break;
	case PK_SHOW:
		for (i = 0; i < res->nprocs; i++)
			if (res->procs[i].proc == pp->proc)
				break;
		if (i == res->nprocs) {
			reply_error(&r, 404, NULL, NULL, "no process %u in "
			    "sandbox '%s' (its guest agent keeps the last %d)",
			    (unsigned)pp->proc, pp->id, BA_MAX_PROCS);
			goto out;
		}
		doc = proc_json(&res->procs[i]);
		break;
	case PK_LOGS:
	case PK_WAIT:
		doc = json_pack("{s:I, s:s, s:o, s:o}", "process",
		    (json_int_t)pp->proc, "state", res->proc_state == 0 ?
		    "running" : "exited", "exit_code", res->proc_state == 1 ?
		    json_integer(res->proc_code) : json_null(), "signal",
		    res->proc_state == 2 ? json_integer(res->proc_code) :
		    json_null());
		if (doc != NULL && pp->kind == PK_LOGS) {
			uint64_t from = pp->offset > res->ring_first ?
			    pp->offset : res->ring_first;

			json_object_set_new(doc, "first", json_integer(
			    (json_int_t)res->ring_first));
			json_object_set_new(doc, "total", json_integer(
			    (json_int_t)res->ring_total));
			json_object_set_new(doc, "offset", json_integer(
			    (json_int_t)(from < res->ring_total ? from :
			    res->ring_total)));
			/* the next read goes on from here */
			json_object_set_new(doc, "next_offset", json_integer(
			    (json_int_t)res->ring_total));
			json_object_set_new(doc, "lost", json_boolean(
			    pp->offset < res->ring_first));
			json_object_set_new(doc, "truncated",
			    json_boolean(res->truncated));
			if (exec_stream(doc, "output", res->out,
			    res->outlen) < 0) {
				json_decref(doc);
				doc = NULL;
			}
		}
		break;
	case PK_KILL:
		doc = json_pack("{s:I, s:b}", "process", (json_int_t)pp->proc,
		    "signalled", 1);
		break;
	case PK_FLIST:
		doc = dir_json(pp->path, res);
		break;
	case PK_MKDIR:
	case PK_REMOVE:
		doc = json_pack("{s:b}", pp->kind == PK_MKDIR ? "created" :
		    "removed", 1);
		if (doc != NULL && json_set_bytes(doc, "path", pp->path,
		    strlen(pp->path)) < 0) {
			json_decref(doc);
			doc = NULL;
		}
		break;
	case PK_MOVE:
		if ((doc = json_object()) != NULL && (json_set_bytes(doc,
		    "from", pp->path, strlen(pp->path)) < 0 ||
		    json_set_bytes(doc, "to", pp->to, strlen(pp->to)) < 0)) {
			json_decref(doc);
			doc = NULL;
		}
		break;
	}
	if (doc == NULL)
		reply_error(&r, 503, NULL, NULL, "out of memory");
	else
		reply_json(&r, 200, doc);
out:
	free(pp);
	conn_resume(c);
}

/* Signal names netctl and the API take (besides numbers). */
static int
signal_parse(json_t *v)
{
	static const struct { const char *name; int n; } sigs[] = {
		{ "HUP", 1 }, { "INT", 2 }, { "QUIT", 3 }, { "KILL", 9 },
		{ "USR1", 10 }, { "USR2", 12 }, { "TERM", 15 }, { "CONT", 18 },
		{ "STOP", 19 },
	};
	const char *s;
	size_t i;

	if (v == NULL || json_is_null(v))
		return 15;
	if (json_is_integer(v))
		return json_integer_value(v) >= 1 && json_integer_value(v) <= 64 ?
		    (int)json_integer_value(v) : -1;
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcmp(s, sigs[i].name) == 0)
			return sigs[i].n;
	return -1;
}

/* A request to the guest agent answered when it answers (proc_done);
 * er->path and er->to are copied for the answer. */
static void
agent_call(struct req *r, const char *id, struct px_exec_req *er,
    int kind, uint32_t proc)
{
	struct px_control *ctl = r->c->ctl;
	struct proc_pending *pp;
	char err[512];
	int status = 503;

	if (ctl->hooks.exec == NULL) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest", id);
		return;
	}
	if ((pp = calloc(1, sizeof(*pp))) == NULL) {
		reply_error(r, 503, NULL, NULL, "out of memory");
		return;
	}
	pp->ep.ctl = ctl;
	pp->ep.c = r->c;
	pp->ep.serial = r->c->serial;
	pp->ep.method = r->method;
	pp->kind = (enum proc_kind)kind;
	snprintf(pp->id, sizeof(pp->id), "%s", id);
	snprintf(pp->path, sizeof(pp->path), "%s", er->path ? er->path : "");
	snprintf(pp->to, sizeof(pp->to), "%s", er->to ? er->to : "");
	pp->proc = proc;
	pp->offset = er->offset;
	r->c->waiting = 1;
	bufferevent_set_timeouts(r->c->bev, NULL, NULL);
	r->c->pexec = &pp->ep;
	if (ctl->hooks.exec(id, er, proc_done, pp, &status, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		r->c->pexec = NULL;
		r->c->waiting = 0;
		bufferevent_set_timeouts(r->c->bev, &ctl_idle, &ctl_idle);
		free(pp);
		if (status == 429)
			reply_error_hdr(r, 429, "Retry-After: 1\r\n", "%s", err);
		else
			reply_error(r, status, NULL, NULL, "%s", err);
	}
}

static void
h_procs(struct req *r, const char *id)
{
	static const char *const kill_allowed[] = { "signal", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_exec_req er;
	struct px_sandbox sb;
	enum proc_kind kind;
	json_t *obj = NULL;
	char err[512], buf[32], *end;
	unsigned long n = 0;
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (r->nseg >= 5) {
		n = strtoul(r->seg[4], &end, 10);
		if (r->seg[4][0] < '1' || r->seg[4][0] > '9' || *end != '\0' ||
		    n > UINT32_MAX) {
			reply_error(r, 404, NULL, NULL, "no process '%s': "
			    "processes are numbered 1, 2, ...",
			    shown(buf, sizeof(buf), r->seg[4]));
			return;
		}
	}
	memset(&er, 0, sizeof(er));
	er.timeout_ms = 30000;
	er.proc = (uint32_t)n;
	if (r->nseg == 4 && is_get(r)) {
		kind = PK_LIST;
		er.op = PX_PROC_LIST;
	} else if (r->nseg == 5 && is_get(r)) {
		kind = PK_SHOW;
		er.op = PX_PROC_LIST;
	} else if (r->nseg == 6 && strcmp(r->seg[5], "logs") == 0 &&
	    is_get(r)) {
		kind = PK_LOGS;
		er.op = PX_PROC_LOGS;
		if ((rc = query_get(r, "offset", buf, sizeof(buf))) != 0) {
			er.offset = rc == 1 && buf[0] >= '0' && buf[0] <= '9' ?
			    strtoull(buf, &end, 10) : 0;
			if (rc == -1 || buf[0] < '0' || buf[0] > '9' ||
			    *end != '\0') {
				reply_error(r, 400, NULL, "offset", "must be a "
				    "byte offset in the process's output");
				return;
			}
		}
		if ((rc = query_get(r, "follow", buf, sizeof(buf))) == 1 &&
		    strcmp(buf, "1") == 0) {
			struct cstream *cs;

			/* its output as it comes, to the process's end */
			if ((cs = cs_new(r, id, CS_GET)) == NULL)
				return;
			er.follow = 1;
			er.timeout_ms = EXEC_TIMEOUT_MAX;
			if (cs_run(cs, r, &er) < 0) {
				cs_free(cs);
				return;
			}
			cs->body_done = 1;
			cs_attach(cs);
			return;
		}
	} else if (r->nseg == 6 && strcmp(r->seg[5], "kill") == 0 &&
	    r->method == HTTP_POST) {
		kind = PK_KILL;
		er.op = PX_PROC_SIGNAL;
		er.signo = 15;
		if (r->bodylen > 0) {
			if ((obj = body_object(r, kill_allowed, 0)) == NULL)
				return;
			if ((er.signo = signal_parse(json_object_get(obj,
			    "signal"))) < 0) {
				reply_error(r, 400, NULL, "signal", "a signal "
				    "number (1 to 64) or name (TERM, KILL, INT, "
				    "HUP, QUIT, USR1, USR2, STOP, CONT)");
				goto out;
			}
		}
	} else if (r->nseg == 6 && strcmp(r->seg[5], "wait") == 0 &&
	    r->method == HTTP_POST) {
		kind = PK_WAIT;
		er.op = PX_PROC_LOGS;
		er.offset = UINT64_MAX;	/* none of its output */
		er.follow = 1;
		er.discard = 1;
		er.timeout_ms = EXEC_TIMEOUT_MAX;
	} else if (r->nseg == 6 && strcmp(r->seg[5], "attach") == 0 &&
	    r->method == HTTP_POST) {
		struct cstream *cs;

		/* its terminal, both ways, until the client detaches (its
		 * body ends) or the process ends */
		if (!r->c->rh.streamed) {
			reply_error(r, 400, NULL, NULL, "POST .../processes/%lu/"
			    "attach as written here (no encoded path segments): "
			    "its body is frames, 'J' first", n);
			return;
		}
		if ((cs = cs_new(r, id, CS_ATTACH)) == NULL)
			return;
		cs->proc = (uint32_t)n;
		cs_attach(cs);	/* runs at its 'J' frame */
		return;
	} else if (r->nseg == 6 && (strcmp(r->seg[5], "kill") == 0 ||
	    strcmp(r->seg[5], "wait") == 0 ||
	    strcmp(r->seg[5], "attach") == 0)) {
		not_allowed(r, "POST");
		return;
	} else if (r->nseg <= 6 && (r->nseg < 6 ||
	    strcmp(r->seg[5], "logs") == 0)) {
		not_allowed(r, "GET, HEAD");
		return;
	} else {
		reply_error(r, 404, NULL, NULL, "no such resource");
		return;
	}
	if (sb.external) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest processes", id);
		goto out;
	}
	agent_call(r, id, &er, kind, (uint32_t)n);
out:
	json_decref(obj);
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

static void
h_events(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct page pg;
	struct ev_ctx ec = { NULL, 0, 0, 0, 0 };
	long long after = 0;
	char err[256], *end;
	int rc;

	if (page_parse(r, &pg) == -1)
		return;
	if (pg.have_after) {
		after = strtoll(pg.after, &end, 10);
		if (*end != '\0' || after < 0) {
			reply_error(r, 400, NULL, "after", "must be an event seq");
			return;
		}
	}
	if ((ec.array = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	ec.limit = pg.limit;
	rc = px_store_event_list(ctl->store, id, (int64_t)after, pg.limit + 1,
	    add_event, &ec, err, sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(ec.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	snprintf(pg.next, sizeof(pg.next), "%lld", (long long)ec.last);
	pg.more = ec.more;
	reply_json(r, 200, page_doc("events", ec.array, &pg));
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
static void
h_console(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	long long from = -1;
	char buf[32], err[256], *end;
	json_t *doc;
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if ((rc = query_get(r, "from", buf, sizeof(buf))) == -1 ||
	    (rc == 1 && ((from = strtoll(buf, &end, 10)) < 0 || *end != '\0' ||
	    end == buf))) {
		reply_error(r, 400, NULL, "from", "must be a byte offset (0 or "
		    "more)");
		return;
	}
	if (ctl->hooks.vm_console == NULL ||
	    (doc = ctl->hooks.vm_console(id, from, ctl->hooks.arg)) == NULL) {
		reply_error(r, 404, NULL, NULL, "sandbox %s has no console: it "
		    "is not a VM of this host", id);
		return;
	}
	reply_json(r, 200, doc);
}

/* ---- global policy ---- */

/* The policy's limits, their defaults (berth.conf) and their ranges. */
static const struct {
	const char *key;
	unsigned max;
} pol_limits[] = {
	{ "max_rules", PX_EG_MAX_RULES },
	{ "conn_limit", PX_EG_LIMIT_MAX },
	{ "new_conn_rate", PX_EG_LIMIT_MAX },
};
#define NPOL_LIMITS (sizeof(pol_limits) / sizeof(pol_limits[0]))

static unsigned
pol_limit_default(const struct px_control *ctl, size_t i)
{
	const struct px_config *c = ctl->hooks.config;

	switch (i) {
	case 0:
		return c ? c->eg_max_rules : 256;
	case 1:
		return c ? c->eg_conn_limit : 0;
	default:
		return c ? c->eg_new_conn_rate : 0;
	}
}

/* The stored policy as stored (only what ops set); NULL after replying
 * 500. */
static json_t *
policy_stored(struct req *r)
{
	char err[256], *text = NULL;
	json_t *doc = NULL;

	if (px_store_policy_get(r->c->ctl->store, &text, err, sizeof(err)) !=
	    PX_STORE_OK) {
		reply_error(r, 500, NULL, NULL, "state store: %s", err);
		return NULL;
	}
	if (text != NULL)
		doc = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(doc)) {
		json_decref(doc);
		doc = json_object();
	}
	return doc;
}

/* Fills in what the stored policy leaves out. */
static json_t *
policy_fill(struct px_control *ctl, json_t *doc)
{
	size_t i;

	if (json_object_get(doc, "default_mode") == NULL)
		json_object_set_new(doc, "default_mode", json_string("allowlist"));
	if (json_object_get(doc, "max_mode") == NULL)
		json_object_set_new(doc, "max_mode", json_string("open"));
	if (!json_is_array(json_object_get(doc, "deny")))
		json_object_set_new(doc, "deny", json_array());
	if (!json_is_array(json_object_get(doc, "allow")))
		json_object_set_new(doc, "allow", json_array());
	if (!json_is_array(json_object_get(doc, "permit")))
		json_object_set_new(doc, "permit", json_array());
	for (i = 0; i < NPOL_LIMITS; i++)
		if (!json_is_integer(json_object_get(doc, pol_limits[i].key)))
			json_object_set_new(doc, pol_limits[i].key, json_integer(
			    (json_int_t)pol_limit_default(ctl, i)));
	return doc;
}

/* The stored policy with defaults filled in; NULL after replying 500. */
static json_t *
policy_load(struct req *r)
{
	json_t *doc = policy_stored(r);

	return doc != NULL ? policy_fill(r->c->ctl, doc) : NULL;
}

/*
 * Parses a rule for field (as "field" or "field[i]" in messages) and
 * writes its canonical text. 0, or -1 after replying 400.
 */
static int
rule_arg(struct req *r, const char *field, const char *text,
    struct nc_rule *rule, char *canon, size_t size)
{
	char err[512];

	if (px_rule_parse(text, rule, err, sizeof(err)) < 0) {
		reply_error(r, 400, NULL, field, "%s", err);
		return -1;
	}
	if (px_rule_format(rule, canon, size) >= (int)size) {
		reply_error(r, 400, NULL, field, "rule too long");
		return -1;
	}
	return 0;
}

/*
 * 0 if an allow rule stays inside the policy, else -1 after replying 403
 * naming field.
 */
static int
policy_permits(struct req *r, json_t *pol, const char *field,
    const struct nc_rule *rule, const char *canon)
{
	struct nc_rule pr;
	json_t *v, *allow = json_object_get(pol, "allow");
	char err[512], range[32];
	size_t i;
	int covered = 0;

	json_array_foreach(json_object_get(pol, "deny"), i, v) {
		if (px_rule_parse(json_string_value(v), &pr, err,
		    sizeof(err)) < 0)
			continue;
		if (px_rule_overlaps(&pr, rule)) {
			reply_error(r, 403, NULL, field, "allow rule '%s' "
			    "overlaps the global deny rule '%s'", canon,
			    json_string_value(v));
			return -1;
		}
	}
	/* Private and other always-denied ranges only where ops permit. */
	if (px_rule_always_denied(rule, range, sizeof(range))) {
		json_array_foreach(json_object_get(pol, "permit"), i, v)
			if (px_rule_parse(json_string_value(v), &pr, err,
			    sizeof(err)) == 0 && px_rule_covers(&pr, rule))
				covered = 1;
		if (!covered) {
			reply_error(r, 403, NULL, field, "allow rule '%s' names "
			    "%s, which sandboxes never reach unless the global "
			    "policy permits it (policy permit)", canon, range);
			return -1;
		}
		covered = 0;
	}
	if (json_array_size(allow) == 0)
		return 0;
	json_array_foreach(allow, i, v)
		if (px_rule_parse(json_string_value(v), &pr, err,
		    sizeof(err)) == 0 && px_rule_covers(&pr, rule))
			covered = 1;
	if (!covered) {
		reply_error(r, 403, NULL, field, "allow rule '%s' is outside "
		    "the global policy's allow list", canon);
		return -1;
	}
	return 0;
}

static int
mode_permitted(struct req *r, json_t *pol, const char *field,
    const char *mode)
{
	const char *max = json_string_value(json_object_get(pol, "max_mode"));

	if (px_mode_rank(mode) <= px_mode_rank(max))
		return 0;
	reply_error(r, 403, NULL, field, "egress mode '%s' is wider than the "
	    "global policy's max_mode '%s'", mode, max);
	return -1;
}

/* Replaces doc[field] by canonical rules; -1 after replying 400. */
static int
rule_list_arg(struct req *r, json_t *doc, const char *field)
{
	json_t *in = json_object_get(doc, field), *out, *v;
	struct nc_rule rule;
	char canon[300], name[32];
	size_t i;

	if (in == NULL)
		return 0;
	if (!json_is_array(in)) {
		reply_error(r, 400, NULL, field, "must be an array of rules");
		return -1;
	}
	if ((out = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return -1;
	}
	json_array_foreach(in, i, v) {
		snprintf(name, sizeof(name), "%s[%zu]", field, i);
		if (!json_is_string(v)) {
			json_decref(out);
			reply_error(r, 400, NULL, name, "must be a string");
			return -1;
		}
		if (rule_arg(r, name, json_string_value(v), &rule, canon,
		    sizeof(canon)) == -1) {
			json_decref(out);
			return -1;
		}
		json_array_append_new(out, json_string(canon));
	}
	json_object_set_new(doc, field, out);
	return 0;
}

static void
h_policy_get(struct req *r)
{
	json_t *pol = policy_load(r);

	if (pol != NULL)
		reply_json(r, 200, pol);
}

static void
h_policy_put(struct req *r)
{
	static const char *const fields[] = { "default_mode", "max_mode",
	    "deny", "allow", "permit", "max_rules", "conn_limit",
	    "new_conn_rate", NULL };
	struct px_control *ctl = r->c->ctl;
	json_t *obj, *pol = NULL, *v;
	const char *key, *m;
	char err[256], buf[64], *text = NULL;
	size_t i;
	int rc;

	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	if (rule_list_arg(r, obj, "deny") == -1 ||
	    rule_list_arg(r, obj, "allow") == -1 ||
	    rule_list_arg(r, obj, "permit") == -1)
		goto out;
	json_array_foreach(json_object_get(obj, "permit"), i, v) {
		struct nc_rule pr;

		snprintf(buf, sizeof(buf), "permit[%zu]", i);
		if (px_rule_parse(json_string_value(v), &pr, err,
		    sizeof(err)) < 0 || pr.kind != NC_RULE_ADDR ||
		    pr.proto != NC_PROTO_ANY || pr.port_lo != 0 ||
		    pr.port_hi != 65535) {
			reply_error(r, 400, NULL, buf, "'%s': a permit is an "
			    "address range only, as in 10.1.0.0/16",
			    json_string_value(v));
			goto out;
		}
	}
	for (rc = 0; rc < 2; rc++) {
		key = rc ? "max_mode" : "default_mode";
		if (string_field(r, obj, key, 0, &m) < 0)
			goto out;
		if (m != NULL && px_mode_rank(m) < 0) {
			reply_error(r, 400, NULL, key, "must be 'open', "
			    "'allowlist' or 'closed', not '%s'",
			    shown(buf, sizeof(buf), m));
			goto out;
		}
	}
	for (i = 0; i < NPOL_LIMITS; i++) {
		v = json_object_get(obj, pol_limits[i].key);
		if (v == NULL || json_is_null(v))
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > (json_int_t)pol_limits[i].max) {
			reply_error(r, 400, NULL, pol_limits[i].key, "must be "
			    "an integer from 0 to %u%s, or null for berth.conf's "
			    "value", pol_limits[i].max, i == 0 ? "" :
			    " (0: no limit)");
			goto out;
		}
	}
	/* Only what ops set is stored: the rest keeps following the
	 * defaults (berth.conf's limits may change on reload). */
	if ((pol = policy_stored(r)) == NULL)
		goto out;
	json_object_foreach(obj, key, v) {
		if (json_is_null(v))
			json_object_del(pol, key);
		else
			json_object_set(pol, key, v);
	}
	if ((text = json_dumps(pol, JSON_COMPACT | JSON_SORT_KEYS)) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		goto out;
	}
	policy_fill(ctl, pol);
	if (px_mode_rank(json_string_value(json_object_get(pol,
	    "default_mode"))) > px_mode_rank(json_string_value(
	    json_object_get(pol, "max_mode")))) {
		reply_error(r, 400, NULL, "default_mode", "is wider than "
		    "max_mode");
		goto out;
	}
	if ((rc = px_store_policy_set(ctl->store, text, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		goto out;
	}
	if (ctl->hooks.egress_changed != NULL)
		ctl->hooks.egress_changed(NULL, ctl->hooks.arg);
	reply_json(r, 200, pol);
	pol = NULL;
out:
	free(text);
	json_decref(pol);
	json_decref(obj);
}

/* ---- max_rules: a sandbox's egress rules ---- */

struct rule_count {
	const struct px_egress_rule *e;	/* NULL: count only */
	size_t n;
	int present;
};

static int
count_rule(const struct px_egress_rule *e, void *arg)
{
	struct rule_count *rc = arg;

	rc->n++;
	if (rc->e != NULL && e->action == rc->e->action &&
	    strcmp(e->rule, rc->e->rule) == 0)
		rc->present = 1;
	return 0;
}

/*
 * 0 if sandbox id may hold n rules (or, with e, one more unless e is
 * stored already) under the policy's max_rules; else -1 after replying
 * 403 naming the limit (nothing is changed).
 */
static int
rules_permitted(struct req *r, json_t *pol, const char *id,
    const struct px_egress_rule *e, size_t n, const char *field)
{
	struct rule_count rc = { e, 0, 0 };
	json_int_t max = json_integer_value(json_object_get(pol, "max_rules"));
	char err[256];
	int st;

	if (e == NULL) {
		if ((json_int_t)n <= max)
			return 0;
		reply_error(r, 403, NULL, field, "%zu egress rules for sandbox "
		    "%s: the global policy's max_rules is %lld per sandbox",
		    n, id, (long long)max);
		return -1;
	}
	if ((st = px_store_egress_list(r->c->ctl->store, id, count_rule, &rc,
	    err, sizeof(err))) != 0) {
		reply_store(r, st > 0 ? PX_STORE_ERR : st, NULL, err);
		return -1;
	}
	if (rc.present || (json_int_t)rc.n < max)
		return 0;
	reply_error(r, 403, NULL, field, "sandbox %s has %zu egress rules, "
	    "the global policy's max_rules (%lld per sandbox): remove one "
	    "first", id, rc.n, (long long)max);
	return -1;
}

/* ---- egress ---- */

static json_t *
egress_rule_json(const struct px_egress_rule *e)
{
	json_t *o = json_pack("{s:s, s:s}", "action",
	    px_egress_action_name(e->action), "rule", e->rule);

	if (o != NULL)
		json_object_set_new(o, "expires", e->expires ?
		    json_integer((json_int_t)e->expires) : json_null());
	return o;
}

static int
add_egress_rule(const struct px_egress_rule *e, void *arg)
{
	return json_array_append_new(arg, egress_rule_json(e)) == 0 ? 0 : 1;
}

static void
h_egress_get(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	json_t *rules, *pol;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if ((pol = policy_load(r)) == NULL)
		return;
	if ((rules = json_array()) == NULL) {
		json_decref(pol);
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_egress_list(ctl->store, id, add_egress_rule, rules, err,
	    sizeof(err));
	if (rc != 0) {
		json_decref(rules);
		json_decref(pol);
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, rc > 0 ?
		    "out of memory" : err);
		return;
	}
	reply_json(r, 200, json_pack("{s:s, s:s?, s:s, s:o}", "sandbox", id,
	    "mode", sb.egress_mode[0] ? sb.egress_mode : NULL,
	    "effective_mode", sb.egress_mode[0] ? sb.egress_mode :
	    json_string_value(json_object_get(pol, "default_mode")),
	    "rules", rules));
	json_decref(pol);
}

/*
 * Reads one {"action","rule","ttl"?} object (prefix names its fields in
 * messages) into e, checking an allow rule against the policy. 0, or -1
 * after replying.
 */
static int
egress_rule_arg(struct req *r, json_t *o, const char *prefix, json_t *pol,
    struct px_egress_rule *e)
{
	static const char *const fields[] = { "action", "rule", "ttl", NULL };
	const char *action, *text, *ttl, *key, *const *a;
	struct nc_rule rule;
	char f[48], err[512], buf[64];
	uint64_t ms;
	json_t *v;

	memset(e, 0, sizeof(*e));
	if (!json_is_object(o)) {
		reply_error(r, 400, NULL, prefix[0] ? prefix : NULL, "must be "
		    "an object {\"action\", \"rule\", \"ttl\"?}");
		return -1;
	}
	json_object_foreach(o, key, v) {
		for (a = fields; *a != NULL; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (*a == NULL) {
			snprintf(f, sizeof(f), "%s%s", prefix, shown(buf,
			    sizeof(buf), key));
			reply_error(r, 400, NULL, f, "unknown field '%s'", buf);
			return -1;
		}
	}
#define FIELD(name) (snprintf(f, sizeof(f), "%s%s", prefix, name), f)
	v = json_object_get(o, "action");
	if ((action = json_string_value(v)) == NULL ||
	    px_egress_action_parse(action, &e->action) == -1) {
		reply_error(r, 400, NULL, FIELD("action"), "%s", v == NULL ?
		    "required: 'allow' or 'deny'" : "must be 'allow' or 'deny'");
		return -1;
	}
	v = json_object_get(o, "rule");
	if ((text = json_string_value(v)) == NULL) {
		reply_error(r, 400, NULL, FIELD("rule"), "%s", v == NULL ?
		    "required, as in example.com:443/tcp" : "must be a string");
		return -1;
	}
	if (rule_arg(r, FIELD("rule"), text, &rule, e->rule,
	    sizeof(e->rule)) == -1)
		return -1;
	v = json_object_get(o, "ttl");
	if (v != NULL && !json_is_null(v)) {
		if ((ttl = json_string_value(v)) == NULL ||
		    px_rule_duration(ttl, &ms, err, sizeof(err)) < 0) {
			reply_error(r, 400, NULL, FIELD("ttl"), "%s", ttl ? err :
			    "must be a duration such as 90s, 10m, 2h or 1d");
			return -1;
		}
		e->expires = (int64_t)time(NULL) + (int64_t)((ms + 999) / 1000);
	}
	if (e->action == PX_EGRESS_ALLOW &&
	    policy_permits(r, pol, FIELD("rule"), &rule, e->rule) == -1)
		return -1;
#undef FIELD
	return 0;
}

static void
egress_changed(struct px_control *ctl, const char *id)
{
	if (ctl->hooks.egress_changed != NULL)
		ctl->hooks.egress_changed(id, ctl->hooks.arg);
}

static void
h_egress_add(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct px_egress_rule e;
	json_t *obj = NULL, *pol;
	char err[256];
	int rc, created = 0;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if ((pol = policy_load(r)) == NULL)
		return;
	if (r->bodylen == 0) {
		reply_error(r, 400, NULL, NULL, "a JSON object is required "
		    "as the request body");
		goto out;
	}
	if ((obj = json_loadb(r->body, r->bodylen, JSON_REJECT_DUPLICATES,
	    NULL)) == NULL) {
		reply_error(r, 400, NULL, NULL, "invalid JSON");
		goto out;
	}
	if (egress_rule_arg(r, obj, "", pol, &e) == -1)
		goto out;
	snprintf(e.sandbox, sizeof(e.sandbox), "%s", id);
	if (rules_permitted(r, pol, id, &e, 0, "rule") == -1)
		goto out;
	if ((rc = px_store_egress_add(ctl->store, &e, &created, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		goto out;
	}
	egress_changed(ctl, id);
	reply_json(r, created ? 201 : 200, egress_rule_json(&e));
out:
	json_decref(obj);
	json_decref(pol);
}

static void
h_egress_put(struct req *r, const char *id)
{
	static const char *const fields[] = { "mode", "rules", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_egress_rule *rules = NULL;
	json_t *obj, *pol = NULL, *arr, *v;
	const char *mode;
	char err[256], f[32], buf[64];
	size_t i, n;
	int rc, has_mode;

	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		goto out;
	}
	if ((pol = policy_load(r)) == NULL)
		goto out;
	if ((has_mode = string_field(r, obj, "mode", 1, &mode)) < 0)
		goto out;
	if (mode != NULL && px_mode_rank(mode) < 0) {
		reply_error(r, 400, NULL, "mode", "must be 'open', 'allowlist', "
		    "'closed' or null, not '%s'", shown(buf, sizeof(buf), mode));
		goto out;
	}
	if (mode != NULL && mode_permitted(r, pol, "mode", mode) == -1)
		goto out;
	arr = json_object_get(obj, "rules");
	if (arr == NULL && has_mode) {
		/* only the mode */
		rc = px_store_egress_mode_set(ctl->store, id, mode ? mode : "",
		    err, sizeof(err));
		if (rc != PX_STORE_OK) {
			reply_store(r, rc, NULL, err);
			goto out;
		}
		egress_changed(ctl, id);
		h_egress_get(r, id);
		goto out;
	}
	if (!json_is_array(arr)) {
		reply_error(r, 400, NULL, "rules", arr == NULL ? "required (an "
		    "array; [] removes every rule), unless only \"mode\" "
		    "changes" : "must be an array");
		goto out;
	}
	n = json_array_size(arr);
	if (rules_permitted(r, pol, id, NULL, n, "rules") == -1)
		goto out;
	if (n > 0 && (rules = calloc(n, sizeof(*rules))) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		goto out;
	}
	json_array_foreach(arr, i, v) {
		snprintf(f, sizeof(f), "rules[%zu].", i);
		if (egress_rule_arg(r, v, f, pol, &rules[i]) == -1)
			goto out;
	}
	rc = px_store_egress_replace(ctl->store, id, has_mode ? (mode ? mode :
	    "") : NULL, rules, n, err, sizeof(err));
	if (rc != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		goto out;
	}
	egress_changed(ctl, id);
	h_egress_get(r, id);
out:
	free(rules);
	json_decref(pol);
	json_decref(obj);
}

static void
h_egress_reset(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_egress_replace(ctl->store, id, "", NULL, 0, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	egress_changed(ctl, id);
	reply_empty(r, 204);
}

static void
h_egress_rm(struct req *r, const char *id, const char *action,
    const char *text)
{
	struct px_control *ctl = r->c->ctl;
	enum px_egress_action a;
	struct nc_rule rule;
	char canon[300], err[256];
	int rc;

	if (px_egress_action_parse(action, &a) == -1) {
		reply_error(r, 400, NULL, "action", "must be 'allow' or 'deny'");
		return;
	}
	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (rule_arg(r, "rule", text, &rule, canon, sizeof(canon)) == -1)
		return;
	if ((rc = px_store_egress_rm(ctl->store, id, a, canon, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	egress_changed(ctl, id);
	reply_empty(r, 204);
}

static void
h_egress_log(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	json_t *entries = NULL;
	char err[256];
	int rc, avail = 0;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.egress_log != NULL &&
	    ctl->hooks.egress_log(id, &entries, ctl->hooks.arg) == 0 &&
	    json_is_array(entries))
		avail = 1;
	if (!avail) {
		json_decref(entries);
		entries = json_array();
	}
	reply_json(r, 200, json_pack("{s:s, s:b, s:o}", "sandbox", id,
	    "available", avail, "entries", entries));
}

/* ---- tokens ---- */

static json_t *
token_json(const struct px_token *t)
{
	return json_pack("{s:s, s:b, s:s?, s:s, s:I}", "id", t->id,
	    "admin", t->sandbox[0] == '\0',
	    "sandbox", t->sandbox[0] ? t->sandbox : NULL, "name", t->name,
	    "created", (json_int_t)t->created);
}

struct tok_ctx {
	json_t *array;
	struct page *pg;
};

static int
add_token(const struct px_token *t, void *arg)
{
	struct tok_ctx *tc = arg;
	int rc;

	if ((rc = page_row(tc->pg, t->id, strcmp(t->id, tc->pg->after) > 0)))
		return rc == 1 ? 0 : rc;
	return json_array_append_new(tc->array, token_json(t)) == 0 ? 0 : 1;
}

static int
check_token_id(struct req *r, const char *id)
{
	size_t i, n = strlen(id);

	for (i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' &&
		    id[i] <= '9') || id[i] == '-'))
			break;
	if (n > 0 && n <= PX_TOKEN_ID_MAX && i == n)
		return 0;
	reply_error(r, 400, NULL, "id", "not a token id (tok-...)");
	return -1;
}

static void
h_token_list(struct req *r)
{
	struct page pg;
	struct tok_ctx tc;
	char err[256], sb[64];
	int rc;

	if (page_parse(r, &pg) == -1)
		return;
	if ((rc = query_get(r, "sandbox", sb, sizeof(sb))) == -1 ||
	    (rc == 1 && sb[0] != '\0' && check_sandbox_id(r, sb) == -1)) {
		if (rc == -1)
			reply_error(r, 400, NULL, "sandbox", "not a sandbox id");
		return;
	}
	tc.pg = &pg;
	if ((tc.array = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_token_list(r->c->ctl->store, rc == 1 ? sb : NULL,
	    add_token, &tc, err, sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(tc.array);
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, rc > 0 ?
		    "out of memory" : err);
		return;
	}
	reply_json(r, 200, page_doc("tokens", tc.array, &pg));
}

static void
h_token_create(struct req *r)
{
	static const char *const fields[] = { "admin", "sandbox", "name", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_token t;
	const char *sb, *name;
	char err[256], secret[PX_TOKEN_LEN + 1] = "";
	json_t *obj, *adm, *doc;
	int rc;

	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	adm = json_object_get(obj, "admin");
	if (adm != NULL && !json_is_boolean(adm)) {
		reply_error(r, 400, NULL, "admin", "must be true or false");
		goto out;
	}
	if (string_field(r, obj, "sandbox", 1, &sb) < 0 ||
	    string_field(r, obj, "name", 0, &name) < 0)
		goto out;
	if (json_is_true(adm) == (sb != NULL)) {
		reply_error(r, 400, NULL, sb ? "admin" : "sandbox", "give either "
		    "\"admin\": true or \"sandbox\": \"<id>\"");
		goto out;
	}
	if (sb != NULL && check_sandbox_id(r, sb) == -1)
		goto out;
	if (name != NULL && strlen(name) >= sizeof(t.name)) {
		reply_error(r, 400, NULL, "name", "longer than %zu bytes",
		    sizeof(t.name) - 1);
		goto out;
	}
	memset(&t, 0, sizeof(t));
	if (px_token_generate(secret, t.id, err, sizeof(err)) == -1) {
		reply_error(r, 500, NULL, NULL, "%s", err);
		goto out;
	}
	px_token_hash_hex(secret, strlen(secret), t.sha256);
	snprintf(t.sandbox, sizeof(t.sandbox), "%s", sb ? sb : "");
	snprintf(t.name, sizeof(t.name), "%s", name ? name : "");
	t.created = (int64_t)time(NULL);
	if ((rc = px_store_token_add(ctl->store, &t, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, "sandbox", err);
		goto out;
	}
	routes_changed(ctl);
	if ((doc = token_json(&t)) != NULL)
		json_object_set_new(doc, "token", json_string(secret));
	reply_json(r, 201, doc);
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	json_decref(obj);
}

static void
h_token_show(struct req *r, const char *id)
{
	struct px_token t;
	char err[256];
	int rc;

	if ((rc = px_store_token_get(r->c->ctl->store, id, &t, err,
	    sizeof(err))) != PX_STORE_OK)
		reply_store(r, rc, NULL, err);
	else
		reply_json(r, 200, token_json(&t));
}

static void
h_token_rotate(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct px_token t;
	char err[256], secret[PX_TOKEN_LEN + 1], unused[24], hex[65];
	json_t *doc;
	int rc;

	if ((rc = px_store_token_get(ctl->store, id, &t, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	if (px_token_generate(secret, unused, err, sizeof(err)) == -1) {
		reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	px_token_hash_hex(secret, strlen(secret), hex);
	if ((rc = px_store_token_rotate(ctl->store, id, hex, err,
	    sizeof(err))) != PX_STORE_OK) {
		OPENSSL_cleanse(secret, sizeof(secret));
		reply_store(r, rc, NULL, err);
		return;
	}
	routes_changed(ctl);
	if ((doc = token_json(&t)) != NULL)
		json_object_set_new(doc, "token", json_string(secret));
	OPENSSL_cleanse(secret, sizeof(secret));
	reply_json(r, 200, doc);
}

static void
h_token_rm(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_token_rm(ctl->store, id, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	routes_changed(ctl);
	reply_empty(r, 204);
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

/* ---- templates ---- */

static json_t *
template_json(struct px_control *ctl, const struct px_template *t, int builtin)
{
	char err[256];
	int n = 0;

	(void)px_store_template_users(ctl->store, t->name, &n, err, sizeof(err));
	return json_pack("{s:s, s:s?, s:b, s:o, s:i}", "name", t->name,
	    "dir", t->dir[0] ? t->dir : NULL, "builtin", builtin, "created",
	    builtin ? json_null() : json_integer((json_int_t)t->created),
	    "sandboxes", n);
}

static void
template_default(struct px_control *ctl, struct px_template *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", PX_TEMPLATE_DEFAULT);
	if (ctl->template_dir != NULL)
		snprintf(t->dir, sizeof(t->dir), "%s", ctl->template_dir);
}

struct tpl_ctx {
	struct px_control *ctl;
	json_t *array;
	struct page *pg;
	int default_done;
};

static int
add_template_row(struct tpl_ctx *tc, const struct px_template *t, int builtin)
{
	int rc;

	if ((rc = page_row(tc->pg, t->name, strcmp(t->name, tc->pg->after) > 0)))
		return rc == 1 ? 0 : rc;
	return json_array_append_new(tc->array, template_json(tc->ctl, t,
	    builtin)) == 0 ? 0 : 1;
}

/* Stored templates come by name; "default" joins them in its place. */
static int
add_template(const struct px_template *t, void *arg)
{
	struct tpl_ctx *tc = arg;
	struct px_template d;
	int rc;

	if (!tc->default_done && strcmp(t->name, PX_TEMPLATE_DEFAULT) > 0) {
		tc->default_done = 1;
		template_default(tc->ctl, &d);
		if ((rc = add_template_row(tc, &d, 1)) != 0)
			return rc;
	}
	return add_template_row(tc, t, 0);
}

static void
h_template_list(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	struct page pg;
	struct tpl_ctx tc = { ctl, NULL, &pg, 0 };
	struct px_template d;
	char err[256];
	int rc;

	if (page_parse(r, &pg) == -1)
		return;
	if ((tc.array = json_array()) == NULL) {
		reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_template_list(ctl->store, add_template, &tc, err,
	    sizeof(err));
	if (rc == 0 && !tc.default_done) {
		template_default(ctl, &d);
		rc = add_template_row(&tc, &d, 1);
	}
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(tc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	reply_json(r, 200, page_doc("templates", tc.array, &pg));
}

static int
check_template_name(struct req *r, const char *name)
{
	char buf[64];

	if (px_template_name_valid(name))
		return 0;
	reply_error(r, 400, NULL, "name", "not a valid template name: '%s' "
	    "(1-%d lower-case letters, digits or '-', not starting with '-')",
	    shown(buf, sizeof(buf), name), PX_TEMPLATE_NAME_MAX);
	return -1;
}

static void
h_template_add(struct req *r)
{
	static const char *const fields[] = { "name", "dir", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_template t;
	const char *name, *dir;
	char err[512], buf[64];
	json_t *obj;
	int rc;

	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = string_field(r, obj, "name", 0, &name)) <= 0) {
		if (rc == 0)
			reply_error(r, 400, NULL, "name", "required");
		goto out;
	}
	if (check_template_name(r, name) == -1)
		goto out;
	if (strcmp(name, PX_TEMPLATE_DEFAULT) == 0) {
		reply_error(r, 409, NULL, "name", "'default' is the built-in "
		    "template (berth.conf's template directive sets it)");
		goto out;
	}
	if ((rc = string_field(r, obj, "dir", 0, &dir)) <= 0) {
		if (rc == 0)
			reply_error(r, 400, NULL, "dir", "required");
		goto out;
	}
	if (dir[0] != '/' || strlen(dir) >= sizeof(t.dir)) {
		reply_error(r, 400, NULL, "dir", "must be an absolute path "
		    "shorter than %zu bytes, not '%s'", sizeof(t.dir),
		    shown(buf, sizeof(buf), dir));
		goto out;
	}
	if (ctl->hooks.template_check != NULL &&
	    ctl->hooks.template_check(dir, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		reply_error(r, 400, NULL, "dir", "not a usable template: %s", err);
		goto out;
	}
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "%s", name);
	snprintf(t.dir, sizeof(t.dir), "%s", dir);
	t.created = (int64_t)time(NULL);
	if ((rc = px_store_template_add(ctl->store, &t, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, "name", err);
		goto out;
	}
	reply_json(r, 201, template_json(ctl, &t, 0));
out:
	json_decref(obj);
}

static void
h_template_show(struct req *r, const char *name)
{
	struct px_control *ctl = r->c->ctl;
	struct px_template t;
	char err[256];
	int rc;

	if (strcmp(name, PX_TEMPLATE_DEFAULT) == 0) {
		template_default(ctl, &t);
		reply_json(r, 200, template_json(ctl, &t, 1));
		return;
	}
	if ((rc = px_store_template_get(ctl->store, name, &t, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	reply_json(r, 200, template_json(ctl, &t, 0));
}

static void
h_template_rm(struct req *r, const char *name)
{
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if (strcmp(name, PX_TEMPLATE_DEFAULT) == 0) {
		reply_error(r, 409, NULL, NULL, "'default' is the built-in "
		    "template: it cannot be removed");
		return;
	}
	if ((rc = px_store_template_rm(ctl->store, name, err, sizeof(err))) !=
	    PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return;
	}
	reply_empty(r, 204);
}

/* POST /v1/templates/{name}/build: 202, the build runs on; GET
 * .../build?after=N: its state and progress lines from N on. */
static void
h_template_build(struct req *r, const char *name)
{
	struct px_control *ctl = r->c->ctl;
	char err[512], buf[24], *end;
	unsigned long long after = 0;
	json_t *doc;
	int rc;

	if (ctl->hooks.template_build == NULL ||
	    ctl->hooks.template_build_status == NULL) {
		reply_error(r, 409, NULL, NULL, "this berthd runs no VMM: it "
		    "builds no templates");
		return;
	}
	if (r->method == HTTP_POST) {
		rc = ctl->hooks.template_build(name, err, sizeof(err),
		    ctl->hooks.arg);
		if (rc != 0) {
			reply_error(r, rc == -2 ? 400 : rc == -3 ? 409 : 500,
			    NULL, rc == -2 ? "name" : NULL, "%s", err);
			return;
		}
		after = 0;
	} else if ((rc = query_get(r, "after", buf, sizeof(buf))) != 0) {
		after = rc == 1 && buf[0] >= '0' && buf[0] <= '9' ?
		    strtoull(buf, &end, 10) : 0;
		if (rc == -1 || buf[0] < '0' || buf[0] > '9' || *end != '\0') {
			reply_error(r, 400, NULL, "after", "must be a line number");
			return;
		}
	}
	if ((doc = ctl->hooks.template_build_status(name, after,
	    ctl->hooks.arg)) == NULL) {
		reply_error(r, 404, NULL, NULL, "no build of template '%s' since "
		    "berthd started (POST to build it)", name);
		return;
	}
	reply_json(r, r->method == HTTP_POST ? 202 : 200, doc);
}

static void
route_templates(struct req *r)
{
	if (r->nseg == 2) {
		if (is_get(r))
			h_template_list(r);
		else if (r->method == HTTP_POST)
			h_template_add(r);
		else
			not_allowed(r, "GET, HEAD, POST");
		return;
	}
	if (r->nseg == 4 && strcmp(r->seg[3], "build") == 0) {
		if (check_template_name(r, r->seg[2]) == -1)
			return;
		if (is_get(r) || r->method == HTTP_POST)
			h_template_build(r, r->seg[2]);
		else
			not_allowed(r, "GET, HEAD, POST");
		return;
	}
	if (r->nseg != 3) {
		reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
		return;
	}
	if (!is_get(r) && r->method != HTTP_DELETE) {
		not_allowed(r, "GET, HEAD, DELETE");
		return;
	}
	if (check_template_name(r, r->seg[2]) == -1)
		return;
	if (is_get(r))
		h_template_show(r, r->seg[2]);
	else
		h_template_rm(r, r->seg[2]);
}

/* ---- fork ---- */

struct egcopy {
	struct px_egress_rule *v;
	size_t n, cap;
};

static int
egress_collect(const struct px_egress_rule *rule, void *arg)
{
	struct egcopy *e = arg;
	struct px_egress_rule *nv;

	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 16;
		if ((nv = realloc(e->v, e->cap * sizeof(*nv))) == NULL)
			return -1;
		e->v = nv;
	}
	e->v[e->n++] = *rule;
	return 0;
}

/*
 * POST /v1/sandboxes/{id}/fork {"ids": ["a", "b", ...]}: the sandbox
 * (running or paused) forked into new ones, each stored like a create
 * (its own token, the source's template, sizes, idle limits, egress mode
 * and rules; not its ports, not its tokens) and made by the VMM from the
 * source's captured state. 201 {"source", "forks": [{"id", "state",
 * "token", "token_id"}]}; the forks are "creating" until their VMs run.
 * With "checkpoint": made from that checkpoint of the sandbox instead
 * (the sandbox in any state; it is not touched): `create --from`.
 */
static void
h_sandbox_fork(struct req *r, const char *id)
{
	static const char *const fields[] = { "ids", "checkpoint", NULL };
	struct px_control *ctl = r->c->ctl;
	unsigned max = ctl->hooks.max_forks ? ctl->hooks.max_forks :
	    PX_FORK_MAX;
	const char *ckpt = NULL;
	struct px_sandbox src, sb;
	struct px_token tok;
	struct egcopy eg;
	const char *ids[PX_FORK_MAX];
	char err[256], secret[PX_FORK_MAX][PX_TOKEN_LEN + 1];
	char tokid[PX_FORK_MAX][sizeof(tok.id)];
	json_t *obj, *arr, *doc = NULL, *list;
	size_t n, i, k, stored = 0;
	int rc;

	memset(secret, 0, sizeof(secret));
	memset(&eg, 0, sizeof(eg));
	if ((obj = body_object(r, fields, 0)) == NULL)
		return;
	arr = json_object_get(obj, "ids");
	if (!json_is_array(arr) || (n = json_array_size(arr)) == 0 ||
	    n > PX_FORK_MAX) {
		reply_error(r, 400, NULL, "ids", "required: an array of 1 to %u "
		    "new sandbox ids", max);
		goto out;
	}
	if (n > max) {
		reply_error(r, 400, NULL, "ids", "%zu new sandboxes in one call: "
		    "vm_max_forks allows %u", n, max);
		goto out;
	}
	if (json_object_get(obj, "checkpoint") != NULL &&
	    check_checkpoint_name(r, "checkpoint", (ckpt = json_string_value(
	    json_object_get(obj, "checkpoint")))) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if ((ids[i] = json_string_value(json_array_get(arr, i))) ==
		    NULL) {
			reply_error(r, 400, NULL, "ids", "item %zu is not a "
			    "string", i);
			goto out;
		}
		if (check_sandbox_id(r, ids[i]) == -1)
			goto out;
		for (k = 0; k < i; k++)
			if (strcmp(ids[k], ids[i]) == 0) {
				reply_error(r, 400, NULL, "ids", "'%s' is given "
				    "twice", ids[i]);
				goto out;
			}
	}
	rc = px_store_sandbox_get(ctl->store, id, &src, err, sizeof(err));
	if (rc != PX_STORE_OK) {
		reply_store(r, rc, "id", err);
		goto out;
	}
	if (src.external || ctl->hooks.vm_fork == NULL) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a microVM "
		    "of this berthd: nothing to fork", id);
		goto out;
	}
	if (ckpt == NULL && strcmp(src.state, PX_STATE_RUNNING) != 0 &&
	    strcmp(src.state, "paused") != 0 &&
	    strcmp(src.state, PX_STATE_SUSPENDED) != 0) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: only a "
		    "running, paused or suspended sandbox can be forked", id,
		    src.state);
		goto out;
	}
	if (px_store_egress_list(ctl->store, id, egress_collect, &eg, err,
	    sizeof(err)) != PX_STORE_OK) {
		reply_error(r, 500, NULL, NULL, "%s", err);
		goto out;
	}
	for (i = 0; i < n; i++, stored++) {
		sb = src;
		snprintf(sb.id, sizeof(sb.id), "%s", ids[i]);
		sb.address[0] = '\0';
		snprintf(sb.state, sizeof(sb.state), "%s", PX_STATE_CREATING);
		sb.created = (int64_t)time(NULL);
		memset(&tok, 0, sizeof(tok));
		if (px_token_generate(secret[i], tok.id, err, sizeof(err)) == -1) {
			reply_error(r, 500, NULL, NULL, "%s", err);
			goto undo;
		}
		px_token_hash_hex(secret[i], strlen(secret[i]), tok.sha256);
		snprintf(tok.name, sizeof(tok.name), "sandbox %s", sb.id);
		tok.created = sb.created;
		snprintf(tokid[i], sizeof(tokid[i]), "%s", tok.id);
		if ((rc = px_store_sandbox_create(ctl->store, &sb, &tok, err,
		    sizeof(err))) != PX_STORE_OK) {
			reply_store(r, rc, "ids", err);
			goto undo;
		}
		for (k = 0; k < eg.n; k++)
			snprintf(eg.v[k].sandbox, sizeof(eg.v[k].sandbox), "%s",
			    sb.id);
		if (px_store_egress_replace(ctl->store, sb.id, src.egress_mode,
		    eg.v, eg.n, err, sizeof(err)) != PX_STORE_OK) {
			stored++;
			reply_error(r, 500, NULL, NULL, "%s", err);
			goto undo;
		}
	}
	if ((rc = ctl->hooks.vm_fork(id, ids, n, ckpt, err, sizeof(err),
	    ctl->hooks.arg)) != 0) {
		if (rc == -2)
			reply_error(r, 404, NULL, "checkpoint", "sandbox '%s' has "
			    "no checkpoint '%s'", id, ckpt);
		else
			reply_error(r, 409, NULL, NULL, "cannot fork sandbox "
			    "'%s': %s", id, err);
		goto undo;
	}
	routes_changed(ctl);
	doc = json_pack("{s:s, s:[]}", "source", id, "forks");
	if (ckpt != NULL)
		json_object_set_new(doc, "checkpoint", json_string(ckpt));
	list = json_object_get(doc, "forks");
	for (i = 0; i < n; i++)
		json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s}",
		    "id", ids[i], "state", PX_STATE_CREATING, "token",
		    secret[i], "token_id", tokid[i]));
	reply_json(r, 201, doc);
	goto out;
undo:
	for (i = 0; i < stored; i++) {
		char e2[256];

		(void)px_store_sandbox_rm(ctl->store, ids[i], e2, sizeof(e2));
	}
out:
	free(eg.v);
	OPENSSL_cleanse(secret, sizeof(secret));
	json_decref(obj);
}

/* ---- checkpoints ---- */

/* The VM-backed sandbox id as stored (into sb), or answered: 404, or
 * 409 for one without a VM. */
static int
vm_sandbox_get(struct req *r, const char *id, struct px_sandbox *sb,
    const char *what)
{
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		reply_store(r, rc, NULL, err);
		return -1;
	}
	if (sb->external || ctl->hooks.vm_checkpoint == NULL) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a microVM "
		    "of this berthd: it has no %s", id, what);
		return -1;
	}
	return 0;
}

/* GET /v1/sandboxes/{id}/checkpoints: {"sandbox", "checkpoints": [{name,
 * created, size_bytes}]}, oldest first. */
static void
h_checkpoint_list(struct req *r, const char *id)
{
	static struct px_checkpoint list[PX_CHECKPOINTS_MAX];
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	char err[256];
	json_t *doc, *arr;
	int n, i;

	if (vm_sandbox_get(r, id, &sb, "checkpoints") < 0)
		return;
	if ((n = ctl->hooks.vm_checkpoints(id, list, PX_CHECKPOINTS_MAX, err,
	    sizeof(err), ctl->hooks.arg)) < 0) {
		reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	doc = json_pack("{s:s, s:[]}", "sandbox", id, "checkpoints");
	arr = json_object_get(doc, "checkpoints");
	for (i = 0; i < n && i < PX_CHECKPOINTS_MAX; i++) {
		json_t *k = checkpoint_json(id, &list[i]);

		json_object_del(k, "sandbox");
		json_array_append_new(arr, k);
	}
	reply_json(r, 200, doc);
}

/*
 * POST /v1/sandboxes/{id}/checkpoints {"name"}: the running, paused or
 * suspended sandbox's memory and disk kept under name (a running one
 * pauses as for a fork, a suspended one is not woken);
 * answered once taken: 201 {sandbox, name, created, size_bytes, detail}.
 * POST /v1/sandboxes/{id}/restore {"checkpoint"}: the sandbox back to
 * it, in place; answered once it runs: 200 with the sandbox.
 */
static void
h_checkpoint_op(struct req *r, const char *id, const char *op)
{
	static const char *const take[] = { "name", NULL };
	static const char *const restore[] = { "checkpoint", NULL };
	int is_take = strcmp(op, "checkpoint") == 0;
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct pending *p;
	const char *name;
	char err[256] = "";
	json_t *obj;
	int rc;

	if ((obj = body_object(r, is_take ? take : restore, 0)) == NULL)
		return;
	name = json_string_value(json_object_get(obj, is_take ? "name" :
	    "checkpoint"));
	if (check_checkpoint_name(r, is_take ? "name" : "checkpoint",
	    name) < 0 || vm_sandbox_get(r, id, &sb, "checkpoints") < 0)
		goto out;
	if (is_take && strcmp(sb.state, PX_STATE_RUNNING) != 0 &&
	    strcmp(sb.state, "paused") != 0 &&
	    strcmp(sb.state, PX_STATE_SUSPENDED) != 0) {
		reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: only a "
		    "running, paused or suspended sandbox can be "
		    "checkpointed", id, sb.state);
		goto out;
	}
	if ((p = pending_new(r, id, op)) == NULL)
		goto out;
	snprintf(p->name, sizeof(p->name), "%s", name);
	rc = ctl->hooks.vm_checkpoint(id, op, name, lifecycle_done, p, err,
	    sizeof(err), ctl->hooks.arg);
	if (rc != 0) {
		pending_drop(r, p);
		record_event(ctl, id, op, "refused", err, -1);
		if (rc == -2)
			reply_error(r, 404, NULL, "checkpoint", "sandbox '%s' has "
			    "no checkpoint '%s'", id, name);
		else if (rc == -3)
			reply_error(r, 409, NULL, "name", "sandbox '%s' has a "
			    "checkpoint '%s' already", id, name);
		else
			reply_error(r, 409, NULL, NULL, "%s of sandbox '%s': %s",
			    op, id, err);
	}
out:
	json_decref(obj);
}

/* DELETE /v1/sandboxes/{id}/checkpoints/{name}: 204; the layers only it
 * kept go. */
static void
h_checkpoint_rm(struct req *r, const char *id, const char *name)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	char err[256];
	int rc;

	if (check_checkpoint_name(r, "name", name) < 0 ||
	    vm_sandbox_get(r, id, &sb, "checkpoints") < 0)
		return;
	rc = ctl->hooks.vm_checkpoint_rm(id, name, err, sizeof(err),
	    ctl->hooks.arg);
	if (rc == -2) {
		reply_error(r, 404, NULL, NULL, "sandbox '%s' has no checkpoint "
		    "'%s'", id, name);
		return;
	}
	if (rc != 0) {
		reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	record_event(ctl, id, "checkpoint-rm", "ok", name, 0);
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

/* /v1/sandboxes/{id}/... below the sandbox itself (nseg >= 4). */
static void
route_sandbox_sub(struct req *r, const char *id)
{
	const char *sub = r->seg[3];
	char buf[64];
	uint16_t port;

	if (strcmp(sub, "ports") == 0 && r->nseg == 4) {
		if (is_get(r))
			h_port_list(r, id);
		else
			not_allowed(r, "GET, HEAD");
	} else if (strcmp(sub, "ports") == 0 && r->nseg == 5) {
		if ((port = px_parse_port(r->seg[4], strlen(r->seg[4]))) == 0) {
			reply_error(r, 400, NULL, "port", "not a port number: "
			    "'%s' (1-65535, no leading zero)", shown(buf,
			    sizeof(buf), r->seg[4]));
			return;
		}
		if (is_get(r))
			h_port_show(r, id, port);
		else if (r->method == HTTP_PUT)
			h_port_put(r, id, port);
		else if (r->method == HTTP_DELETE)
			h_port_delete(r, id, port);
		else
			not_allowed(r, "GET, HEAD, PUT, DELETE");
	} else if (r->nseg == 4 && (strcmp(sub, "pause") == 0 ||
	    strcmp(sub, "suspend") == 0 || strcmp(sub, "resume") == 0 ||
	    strcmp(sub, "start") == 0 || strcmp(sub, "stop") == 0 ||
	    strcmp(sub, "restart") == 0)) {
		if (r->method == HTTP_POST)
			h_lifecycle(r, id, sub);
		else
			not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "fork") == 0) {
		if (r->method == HTTP_POST)
			h_sandbox_fork(r, id);
		else
			not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "checkpoints") == 0) {
		if (is_get(r))
			h_checkpoint_list(r, id);
		else if (r->method == HTTP_POST)
			h_checkpoint_op(r, id, "checkpoint");
		else
			not_allowed(r, "GET, HEAD, POST");
	} else if (r->nseg == 5 && strcmp(sub, "checkpoints") == 0) {
		if (r->method == HTTP_DELETE)
			h_checkpoint_rm(r, id, r->seg[4]);
		else
			not_allowed(r, "DELETE");
	} else if (r->nseg == 4 && strcmp(sub, "restore") == 0) {
		if (r->method == HTTP_POST)
			h_checkpoint_op(r, id, "restore");
		else
			not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "exec") == 0) {
		if (r->method == HTTP_POST)
			h_exec(r, id);
		else
			not_allowed(r, "POST");
	} else if (r->nseg >= 4 && r->nseg <= 6 &&
	    strcmp(sub, "processes") == 0) {
		h_procs(r, id);
	} else if (r->nseg == 4 && strcmp(sub, "files") == 0) {
		if (r->method == HTTP_GET || r->method == HTTP_PUT ||
		    r->method == HTTP_DELETE)
			h_files(r, id);
		else
			not_allowed(r, "GET, PUT, DELETE");
	} else if (r->nseg == 5 && strcmp(sub, "files") == 0 &&
	    (strcmp(r->seg[4], "mkdir") == 0 ||
	    strcmp(r->seg[4], "move") == 0)) {
		if (r->method == HTTP_POST)
			files_post(r, id, r->seg[4]);
		else
			not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "watch") == 0) {
		if (r->method == HTTP_GET)
			h_watch(r, id);
		else
			not_allowed(r, "GET");
	} else if (r->nseg == 4 && strcmp(sub, "console") == 0) {
		if (is_get(r))
			h_console(r, id);
		else
			not_allowed(r, "GET, HEAD");
	} else if (r->nseg == 4 && strcmp(sub, "events") == 0) {
		if (is_get(r))
			h_events(r, id);
		else
			not_allowed(r, "GET, HEAD");
	} else if (strcmp(sub, "egress") == 0 && r->nseg == 4) {
		if (is_get(r))
			h_egress_get(r, id);
		else if (r->method == HTTP_PUT)
			h_egress_put(r, id);
		else if (r->method == HTTP_POST)
			h_egress_add(r, id);
		else if (r->method == HTTP_DELETE)
			h_egress_reset(r, id);
		else
			not_allowed(r, "GET, HEAD, PUT, POST, DELETE");
	} else if (strcmp(sub, "egress") == 0 && r->nseg == 5 &&
	    strcmp(r->seg[4], "log") == 0) {
		if (is_get(r))
			h_egress_log(r, id);
		else
			not_allowed(r, "GET, HEAD");
	} else if (strcmp(sub, "egress") == 0 && r->nseg == 6) {
		if (r->method == HTTP_DELETE)
			h_egress_rm(r, id, r->seg[4], r->seg[5]);
		else
			not_allowed(r, "DELETE");
	} else
		reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
}

/* Fleet mode's view, from the parent (etcd): hosts or every sandbox. */
static void
h_fleet(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	json_t *doc;

	if (r->nseg != 3 || (!seg_is(r, 2, "hosts") && !seg_is(r, 2, "sandboxes"))) {
		reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
		return;
	}
	if (!is_get(r)) {
		not_allowed(r, "GET, HEAD");
		return;
	}
	if (!r->auth.admin) {
		reply_error(r, 403, NULL, NULL, "the fleet view needs an admin token");
		return;
	}
	if (ctl->hooks.fleet == NULL ||
	    (doc = ctl->hooks.fleet(r->seg[2], ctl->hooks.arg)) == NULL) {
		reply_error(r, 404, NULL, NULL, "fleet mode is not configured on this host");
		return;
	}
	reply_json(r, 200, doc);
}

static void
route_tokens(struct req *r)
{
	if (r->nseg == 2) {
		if (is_get(r))
			h_token_list(r);
		else if (r->method == HTTP_POST)
			h_token_create(r);
		else
			not_allowed(r, "GET, HEAD, POST");
		return;
	}
	if (r->nseg > 4 || (r->nseg == 4 && !seg_is(r, 3, "rotate"))) {
		reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
		return;
	}
	if (r->nseg == 3 && !is_get(r) && r->method != HTTP_DELETE) {
		not_allowed(r, "GET, HEAD, DELETE");
		return;
	}
	if (r->nseg == 4 && r->method != HTTP_POST) {
		not_allowed(r, "POST");
		return;
	}
	if (check_token_id(r, r->seg[2]) == -1)
		return;
	if (r->nseg == 4)
		h_token_rotate(r, r->seg[2]);
	else if (is_get(r))
		h_token_show(r, r->seg[2]);
	else
		h_token_rm(r, r->seg[2]);
}

static void
route(struct req *r)
{
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
	if (r->nseg == 2 && seg_is(r, 1, "policy")) {
		if (is_get(r))
			h_policy_get(r);
		else if (r->method == HTTP_PUT)
			h_policy_put(r);
		else
			not_allowed(r, "GET, HEAD, PUT");
		return;
	}
	if (seg_is(r, 1, "tokens")) {
		route_tokens(r);
		return;
	}
	if (seg_is(r, 1, "fleet")) {
		h_fleet(r);
		return;
	}
	if (seg_is(r, 1, "templates")) {
		route_templates(r);
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
	id = r->seg[2];
	if (r->nseg == 3) {
		if (!is_get(r) && r->method != HTTP_DELETE &&
		    r->method != HTTP_PATCH) {
			not_allowed(r, "GET, HEAD, PATCH, DELETE");
			return;
		}
		if (check_sandbox_id(r, id) == -1)
			return;
		if (is_get(r))
			h_sandbox_show(r, id);
		else if (r->method == HTTP_PATCH)
			h_sandbox_set(r, id);
		else
			h_sandbox_delete(r, id);
		return;
	}
	if (check_sandbox_id(r, id) == -1)
		return;
	route_sandbox_sub(r, id);
	return;
notfound:
	reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
}

static int
hexdig(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes %XX in place ('+' stays '+'); -1 on a bad escape or %00. */
static int
pct_decode(char *s)
{
	char *o = s;
	int hi, lo;

	for (; *s != '\0'; s++) {
		if (*s != '%') {
			*o++ = *s;
			continue;
		}
		if ((hi = hexdig(s[1])) < 0 || (lo = hexdig(s[2])) < 0 ||
		    (hi | lo) == 0)
			return -1;
		*o++ = (char)(hi << 4 | lo);
		s += 2;
	}
	*o = '\0';
	return 0;
}

/*
 * Finds name in the query string and copies its decoded value ('+' is a
 * space) to buf. 1 found, 0 absent, -1 bad or too long.
 */
static int
query_get(const struct req *r, const char *name, char *buf, size_t size)
{
	const char *p = r->query, *amp, *eq;
	size_t nl = strlen(name), vl;
	char *q;

	while (*p != '\0') {
		amp = strchr(p, '&');
		if (amp == NULL)
			amp = p + strlen(p);
		eq = memchr(p, '=', (size_t)(amp - p));
		if ((eq ? (size_t)(eq - p) : (size_t)(amp - p)) == nl &&
		    strncmp(p, name, nl) == 0) {
			vl = eq ? (size_t)(amp - eq - 1) : 0;
			if (vl >= size)
				return -1;
			if (eq != NULL)
				memcpy(buf, eq + 1, vl);
			buf[vl] = '\0';
			for (q = buf; *q != '\0'; q++)
				if (*q == '+')
					*q = ' ';
			return pct_decode(buf) == -1 ? -1 : 1;
		}
		p = *amp ? amp + 1 : amp;
	}
	return 0;
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
	if ((u.field_set & (1 << UF_QUERY)) &&
	    u.field_data[UF_QUERY].len >= sizeof(r->query)) {
		snprintf(r->path, sizeof(r->path), "?");
		reply_error(r, 414, NULL, NULL, "the query string is %u bytes: "
		    "at most %zu", (unsigned)u.field_data[UF_QUERY].len,
		    sizeof(r->query) - 1);
		return -1;
	}
	if (u.field_set & (1 << UF_QUERY)) {
		memcpy(r->query, url + u.field_data[UF_QUERY].off,
		    u.field_data[UF_QUERY].len);
		r->query[u.field_data[UF_QUERY].len] = '\0';
	}
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
		if (strchr(p, '%') != NULL && pct_decode(p) == -1) {
			reply_error(r, 400, NULL, NULL, "bad percent-encoding "
			    "in the path: %s", r->path);
			return -1;
		}
		r->seg[r->nseg++] = p;
	}
	return 0;
}

/* ---- authentication ---- */

struct tokscan {
	unsigned char (*digests)[PX_TOKEN_DIGEST_LEN];
	struct px_token *toks;
	size_t n, cap;
};

static int
scan_token(const struct px_token *t, void *arg)
{
	struct tokscan *ts = arg;

	if (ts->n == ts->cap) {
		size_t cap = ts->cap ? ts->cap * 2 : 16;
		void *d = realloc(ts->digests, cap * sizeof(*ts->digests));

		if (d == NULL)
			return 1;
		ts->digests = d;
		if ((d = realloc(ts->toks, cap * sizeof(*ts->toks))) == NULL)
			return 1;
		ts->toks = d;
		ts->cap = cap;
	}
	if (px_token_hex_decode(t->sha256, ts->digests[ts->n]) == -1)
		return 0;	/* cannot match anything: skip */
	ts->toks[ts->n++] = *t;
	return 0;
}

static void __attribute__((format(printf, 2, 3)))
reply_401(struct req *r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	json_t *e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = json_pack("{s:{s:i, s:s, s:s}}", "error", "status", 401, "code",
	    px_control_error_code(401), "message", msg);
	reply_json_hdr(r, 401, e, "WWW-Authenticate: Bearer realm=\"berth\"\r\n");
}

/*
 * The unix socket is admin by itself (its mode is the access control).
 * The TCP listener needs "Authorization: Bearer berth_..." naming a
 * stored token: it is hashed and compared with every stored hash in
 * constant time. 0, or -1 after replying 401.
 */
static int
authenticate(struct req *r)
{
	struct conn *c = r->c;
	struct tokscan ts = { NULL, NULL, 0, 0 };
	unsigned char digest[PX_TOKEN_DIGEST_LEN];
	char err[256];
	const char *v;
	size_t len;
	int rc, i, was_closing;

	memset(&r->auth, 0, sizeof(r->auth));
	if (!c->tcp) {
		r->auth.admin = 1;
		return 0;
	}
	/* a TCP connection that fails to authenticate is closed after the
	 * answer: guessing tokens costs a connection each time, and no
	 * unauthenticated connection keeps a slot */
	was_closing = c->closing;
	c->closing = 1;
	if (c->rh.authz_bad) {
		reply_401(r, "malformed Authorization header");
		return -1;
	}
	if (c->rh.authzlen == 0) {
		reply_401(r, "a token is required: Authorization: Bearer "
		    "berth_...");
		return -1;
	}
	if (c->rh.authzlen < 7 || strncasecmp(c->rh.authz, "Bearer ", 7) != 0) {
		reply_401(r, "only Bearer tokens are accepted");
		return -1;
	}
	for (v = c->rh.authz + 7; *v == ' '; v++)
		;
	for (len = strlen(v); len > 0 && v[len - 1] == ' '; len--)
		;
	if (!px_token_well_formed(v, len)) {
		reply_401(r, "not a berth token");
		return -1;
	}
	px_token_digest(v, len, digest);
	rc = px_store_token_list(c->ctl->store, NULL, scan_token, &ts, err,
	    sizeof(err));
	if (rc != 0) {
		free(ts.digests);
		free(ts.toks);
		reply_error(r, 500, NULL, NULL, "state store: %s",
		    rc > 0 ? "out of memory" : err);
		return -1;
	}
	i = px_token_find(digest, (const unsigned char (*)[PX_TOKEN_DIGEST_LEN])
	    ts.digests, ts.n);
	if (i >= 0) {
		r->auth.admin = ts.toks[i].sandbox[0] == '\0';
		memcpy(r->auth.sandbox, ts.toks[i].sandbox,
		    sizeof(r->auth.sandbox));
		snprintf(r->auth.token_id, sizeof(r->auth.token_id), "%s",
		    ts.toks[i].id);
	}
	free(ts.digests);
	free(ts.toks);
	if (i < 0) {
		reply_401(r, "unknown or revoked token");
		return -1;
	}
	c->closing = was_closing;
	if (!c->authed) {
		c->authed = 1;
		evtimer_del(c->deadline);
	}
	return 0;
}

/* 0, or -1 after replying 403. */
static int
authorize(struct req *r)
{
	char why[256];

	if (px_token_authorize(&r->auth, http_method_str(r->method), r->seg,
	    r->nseg, why, sizeof(why)) == 0)
		return 0;
	reply_error(r, 403, NULL, NULL, "%s", why);
	return -1;
}

/* ---- connections ---- */


/* Frees c, or when a parser callback on the stack (c->busy) ends it, has
 * conn_read free it once the parser returned: the parser's state lives
 * in c. */
static void
conn_free(struct conn *c)
{
	struct px_control *ctl = c->ctl;

	if (c->busy) {
		c->dead = 1;
		return;
	}
	if (c->st != NULL) {
		if (c->st->h != NULL)
			ctl->hooks.exec_cancel(c->st->h);
		cs_free(c->st);
		c->st = NULL;
	}
	/* a buffered exec nobody will read: killed in the guest (without
	 * the hook its answer still comes, and finds no connection) */
	if (c->pexec != NULL && ctl->hooks.exec_abandon != NULL) {
		ctl->hooks.exec_abandon(c->pexec, ctl->hooks.arg);
		free(c->pexec);
	}
	c->pexec = NULL;
	TAILQ_REMOVE(&ctl->conns, c, entry);
	ctl->nconns--;
	if (c->tcp)
		ctl->nconns_tcp--;
	if (c->deadline != NULL)
		event_free(c->deadline);
	bufferevent_free(c->bev);
	px_reqhead_free(&c->rh);
	free(c);
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

/* A streamed request, from its head: its handler takes the body. */
static void
conn_serve_early(struct conn *c)
{
	struct req r;
	size_t ulen = evbuffer_get_length(c->rh.url);

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = (enum http_method)c->rh.method;
	r.body = "";
	/* closing would stop reading the body: close after the answer */
	c->close_after = !c->rh.keepalive;
	if (parse_target(&r, (const char *)evbuffer_pullup(c->rh.url, -1),
	    ulen) == 0 && authenticate(&r) == 0 && authorize(&r) == 0)
		route(&r);
	if (c->st != NULL && c->rh.expect)
		evbuffer_add(bufferevent_get_output(c->bev),
		    "HTTP/1.1 100 Continue\r\n\r\n", 25);
	px_reqhead_reset(&c->rh);
	if (c->st == NULL) {
		/* refused: its body is not read, the connection ends */
		c->closing = 1;
		bufferevent_disable(c->bev, EV_READ);
	}
}

static void
conn_serve(struct conn *c)
{
	struct req r;
	size_t ulen = evbuffer_get_length(c->rh.url);

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = (enum http_method)c->rh.method;
	r.bodylen = evbuffer_get_length(c->rh.body);
	r.body = r.bodylen ? (const char *)evbuffer_pullup(c->rh.body, -1) : "";
	if (!c->rh.keepalive)	/* (an Upgrade too: never tunneled) */
		c->closing = 1;
	if (parse_target(&r, (const char *)evbuffer_pullup(c->rh.url, -1),
	    ulen) == 0 && authenticate(&r) == 0 && authorize(&r) == 0)
		route(&r);
	px_reqhead_reset(&c->rh);
	if (c->closing)
		bufferevent_disable(c->bev, EV_READ);
}

static void
conn_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n, used;
	enum px_reqhead_stop st;
	char *data, msg[160];
	int status;

	while (!c->closing && !c->throttled &&
	    (!c->waiting || c->rh.streamed) &&
	    !(c->st != NULL && c->st->in_paused) &&
	    ((n = evbuffer_get_contiguous_space(in)) > 0 ||
	    px_reqhead_ready(&c->rh))) {
		data = n > 0 ? (char *)evbuffer_pullup(in, (ev_ssize_t)n) : NULL;
		c->busy++;
		st = px_reqhead_execute(&c->rh, data, n, &used);
		c->busy--;
		if (c->dead) {
			/* a stream's callback ended it (cs_finish) */
			conn_free(c);
			return;
		}
		evbuffer_drain(in, used);
		switch (st) {
		case PX_REQHEAD_MORE:
			continue;
		case PX_REQHEAD_HEAD:
			/* a streamed request's head: serve it now */
			if (!c->early_served) {
				c->early_served = 1;
				conn_serve_early(c);
			}
			continue;
		case PX_REQHEAD_END:
			continue;	/* (its stream took the end) */
		case PX_REQHEAD_COMPLETE:
			conn_serve(c);
			if (evbuffer_get_length(bufferevent_get_output(bev)) >
			    CTL_OUT_HIGH) {
				c->throttled = 1;
				bufferevent_disable(bev, EV_READ);
			}
			continue;
		case PX_REQHEAD_ERROR:
			break;
		}
		if (c->st != NULL) {
			/* a streamed request's body broke (its framing):
			 * the operation ends; an answer under way is cut */
			int cut = c->st->head_sent;

			if (c->st->h != NULL)
				c->ctl->hooks.exec_cancel(c->st->h);
			cs_free(c->st);
			c->st = NULL;
			if (cut) {
				c->closing = 1;
				bufferevent_disable(bev, EV_READ);
				if (evbuffer_get_length(bufferevent_get_output(
				    bev)) == 0)
					conn_free(c);
				return;
			}
		}
		status = px_reqhead_error(&c->rh, msg, sizeof(msg));
		conn_fail(c, status, msg);
		return;
	}
}

static void
conn_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	/* (a stream still answering closes once it ended: cs_finish) */
	if (c->closing && c->st == NULL) {
		conn_free(c);
		return;
	}
	if (c->throttled) {
		c->throttled = 0;
		bufferevent_enable(bev, EV_READ);
		conn_read(bev, c);
		return;
	}
	/* a stream's client caught up: take the guest's output again (may
	 * end the stream, and the connection: touch nothing after) */
	if (c->st != NULL && c->st->out_paused && c->st->h != NULL) {
		c->st->out_paused = 0;
		c->ctl->hooks.exec_read(c->st->h, 1);
	}
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		/* TLS handshake done: now the first request's turn */
		if (c->tcp && !c->authed) {
			struct timeval tv = { CTL_AUTH_SECS, 0 };

			evtimer_add(c->deadline, &tv);
		}
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && !c->closing &&
	    px_reqhead_started(&c->rh)) {
		/* a request started and stalled: say so, then close */
		conn_fail(c, 408, "request not received in time");
		bufferevent_enable(bev, EV_WRITE);
		return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
	    c->st != NULL && c->st->body_done) {
		/* a half close after a whole streamed request: the answer
		 * still goes out, then the connection closes */
		c->close_after = 1;
		bufferevent_disable(bev, EV_READ);
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

/* PUT /v1/sandboxes/ID/files and POST /v1/sandboxes/ID/exec?stream=1
 * (as written: anything else takes the buffered path) stream their body. */
int
px_control_streamed(unsigned method, const char *target, size_t n)
{
	size_t il;
	char u[2048], *q, *rest, *tok, *save;

	if ((method != HTTP_PUT && method != HTTP_POST) || n >= sizeof(u))
		return 0;
	memcpy(u, target, n);
	u[n] = '\0';
	if (strncmp(u, "/v1/sandboxes/", 14) != 0)
		return 0;
	if ((q = strchr(u, '?')) != NULL)
		*q++ = '\0';
	rest = u + 14;
	if ((il = strcspn(rest, "/")) == 0)
		return 0;
	rest += il;
	if (method == HTTP_PUT)
		return strcmp(rest, "/files") == 0;
	/* POST .../processes/N/attach */
	if (strncmp(rest, "/processes/", 11) == 0 && rest[11] >= '1' &&
	    rest[11] <= '9') {
		il = 11 + strspn(rest + 11, "0123456789");
		return il <= 21 && strcmp(rest + il, "/attach") == 0;
	}
	if (strcmp(rest, "/exec") != 0 || q == NULL)
		return 0;
	for (tok = strtok_r(q, "&", &save); tok != NULL;
	    tok = strtok_r(NULL, "&", &save))
		if (strcmp(tok, "stream=1") == 0)
			return 1;
	return 0;
}

/* ---- the request reader's hooks (reqhead.h) ---- */

/* body bytes of a streamed request: to its stream; dropped once it
 * ended */
static int
rh_stream_body(void *arg, const char *at, size_t len)
{
	struct conn *c = arg;

	if (c->dead)
		return -1;	/* ended meanwhile: read no further */
	if (c->st != NULL)
		cs_body(c->st, at, len);
	return 0;
}

static void
rh_stream_end(void *arg)
{
	struct conn *c = arg;

	c->early_served = 0;
	if (c->st != NULL)
		cs_eof(c->st);
}

static const struct px_reqhead_hooks reqhead_hooks = {
	.stream_body = rh_stream_body,
	.stream_end = rh_stream_end,
};

/* ---- listener ---- */

/* A TCP connection missed its handshake or authentication deadline. */
static void
conn_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->authed)
		return;
	c->ctl->closed_deadline++;
	conn_free(c);
}

static void
accept_conn(struct px_control *ctl, evutil_socket_t fd, int tcp,
    const struct sockaddr *sa, const char *peer)
{
	char addr[INET6_ADDRSTRLEN] = "";
	struct conn *c, *o;
	SSL *ssl;
	int n = 0, rc;

	if (tcp) {
		if (peer != NULL)	/* relayed by the control helper */
			snprintf(addr, sizeof(addr), "%s", peer);
		else if (sa != NULL && sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->
			    sin6_addr, addr, sizeof(addr));
		else if (sa != NULL && sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->
			    sin_addr, addr, sizeof(addr));
		if (ctl->nconns_tcp >= CTL_MAX_TCP) {
			ctl->refused_budget++;
			evutil_closesocket(fd);
			return;
		}
		/* at most CTL_MAX_TCP connections to compare: no index */
		TAILQ_FOREACH(o, &ctl->conns, entry)
			n += o->tcp && strcmp(o->addr, addr) == 0;
		if (n >= CTL_MAX_PER_ADDR) {
			ctl->refused_addr++;
			evutil_closesocket(fd);
			return;
		}
	} else if (ctl->nconns - ctl->nconns_tcp >= CTL_MAX_UNIX) {
		evutil_closesocket(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	c->ctl = ctl;
	c->serial = ++ctl->serial;
	c->tcp = tcp;
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	if (tcp && (c->deadline = evtimer_new(ctl->base, conn_deadline, c)) ==
	    NULL) {
		evutil_closesocket(fd);
		free(c);
		return;
	}
	rc = px_reqhead_init(&c->rh, &reqhead_hooks, c, 0);
	if (tcp && ctl->ssl_ctx != NULL) {
		if ((ssl = SSL_new(ctl->ssl_ctx)) != NULL) {
			c->bev = bufferevent_openssl_socket_new(ctl->base, fd,
			    ssl, BUFFEREVENT_SSL_ACCEPTING,
			    BEV_OPT_CLOSE_ON_FREE);
			if (c->bev == NULL)
				SSL_free(ssl);
			else
				bufferevent_openssl_set_allow_dirty_shutdown(
				    c->bev, 1);
		} else
			c->bev = NULL;
	} else
		c->bev = bufferevent_socket_new(ctl->base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
	if (rc == -1 || c->bev == NULL) {
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		px_reqhead_free(&c->rh);
		if (c->deadline)
			event_free(c->deadline);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&ctl->conns, c, entry);
	ctl->nconns++;
	if (tcp) {
		/* TLS: the handshake first; plain TCP (tests): the request */
		struct timeval tv = { ctl->ssl_ctx != NULL ?
		    CTL_HANDSHAKE_SECS : CTL_AUTH_SECS, 0 };

		ctl->nconns_tcp++;
		evtimer_add(c->deadline, &tv);
	}
	bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
	bufferevent_set_timeouts(c->bev, &ctl_idle, &ctl_idle);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	accept_conn(arg, fd, 0, NULL, NULL);
}

static void
accept_tcp_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	accept_conn(arg, fd, 1, sa, NULL);
}

void
px_control_adopt(struct px_control *ctl, int fd, const char *addr)
{
	evutil_make_socket_nonblocking(fd);
	accept_conn(ctl, fd, 1, NULL, addr);
}

void
px_control_count_refused(struct px_control *ctl, int reason)
{
	if (reason == PX_CONTROL_REFUSED_BUDGET)
		ctl->refused_budget++;
	else if (reason == PX_CONTROL_REFUSED_ADDRESS)
		ctl->refused_addr++;
	else if (reason == PX_CONTROL_REFUSED_DEADLINE)
		ctl->closed_deadline++;
}

static void
accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_control *ctl = arg;

	evconnlistener_enable(ctl->listener);
	if (ctl->tcp_listener != NULL)
		evconnlistener_enable(ctl->tcp_listener);
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct px_control *ctl = arg;
	struct timeval later = { 1, 0 };

	/* Out of descriptors most likely: a level-triggered listener would
	 * spin, so pause accepting for a second. */
	ctl->accept_errors++;
	evconnlistener_disable(ctl->listener);
	if (ctl->tcp_listener != NULL)
		evconnlistener_disable(ctl->tcp_listener);
	event_add(ctl->accept_retry, &later);
}

int
px_control_listen_tcp(struct px_control *ctl, const char *addr,
    void *ssl_ctx, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss);

	if (ctl->tcp_listener != NULL) {
		snprintf(err, errlen, "the control API already has a TCP "
		    "listener");
		return -1;
	}
	memset(&ss, 0, sizeof(ss));
	if (addr == NULL || evutil_parse_sockaddr_port(addr,
	    (struct sockaddr *)&ss, &len) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    (ss.ss_family == AF_INET ?
	    ((struct sockaddr_in *)&ss)->sin_port :
	    ((struct sockaddr_in6 *)&ss)->sin6_port) == 0) {
		snprintf(err, errlen, "control listen address '%s': use "
		    "ADDRESS:PORT, as in 127.0.0.1:9443 or [::1]:9443",
		    addr ? addr : "");
		return -1;
	}
	ctl->tcp_listener = evconnlistener_new_bind(ctl->base, accept_tcp_cb,
	    ctl, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
	    LEV_OPT_REUSEABLE, 64, (struct sockaddr *)&ss, len);
	if (ctl->tcp_listener == NULL) {
		snprintf(err, errlen, "control listen %s: %s", addr,
		    strerror(errno));
		return -1;
	}
	evconnlistener_set_error_cb(ctl->tcp_listener, accept_error_cb);
	ctl->ssl_ctx = ssl_ctx;
	return 0;
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
	if (ctl->hooks.template_dir != NULL &&
	    (ctl->template_dir = strdup(ctl->hooks.template_dir)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	ctl->hooks.template_dir = ctl->template_dir;
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
	while ((c = TAILQ_FIRST(&ctl->conns)) != NULL) {
		/* berthd is ending: an answer already made (the ones the
		 * shutdown itself gave, say) goes out if the socket takes it
		 * now, without waiting; not through TLS, whose records the
		 * bufferevent would have to make */
		if (bufferevent_openssl_get_ssl(c->bev) == NULL) {
			struct evbuffer *out = bufferevent_get_output(c->bev);

			/* thawed as the bufferevent's own write does */
			evbuffer_unfreeze(out, 1);
			(void)evbuffer_write(out, bufferevent_getfd(c->bev));
			evbuffer_freeze(out, 1);
		}
		conn_free(c);
	}
	if (ctl->listener != NULL)
		evconnlistener_free(ctl->listener);
	if (ctl->tcp_listener != NULL)
		evconnlistener_free(ctl->tcp_listener);
	if (ctl->accept_retry != NULL)
		event_free(ctl->accept_retry);
	/* Unlink only the socket we made, not a successor's. */
	if (ctl->sock_path != NULL && ctl->sock_ino != 0 &&
	    lstat(ctl->sock_path, &st) == 0 && st.st_dev == ctl->sock_dev &&
	    st.st_ino == ctl->sock_ino)
		unlink(ctl->sock_path);
	free(ctl->sock_path);
	free(ctl->domain);
	free(ctl->template_dir);
	free(ctl);
}
