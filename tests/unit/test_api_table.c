/*
 * test_api_table.c — the control API's route table (proxy/api/table.c)
 * and what is derived from it: which route a method and path reach (404,
 * 405 and the Allow list), who may call each route (every route, for an
 * admin, a token of the sandbox, of another sandbox, and a token with no
 * scope), which requests stream their body, and that a table whose
 * route says nothing of who may call it, or is otherwise incomplete,
 * cannot be registered.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "../../proxy/api/api.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

static struct px_auth admin = { 1, "", "tok-a", 0 };
static struct px_auth fleet = { 0, "", "", 1 };
static struct px_auth sb1 = { 0, "sb-1", "tok-1", 0 };
static char why[256];

static int
split(char *buf, char **seg)
{
	char *p, *save = NULL;
	int n = 0;

	for (p = strtok_r(buf, "/", &save); p && n < 8;
	    p = strtok_r(NULL, "/", &save))
		seg[n++] = p;
	return n;
}

static unsigned
method_of(const char *m)
{
	static const struct { const char *name; enum http_method m; } t[] = {
		{ "GET", HTTP_GET }, { "HEAD", HTTP_HEAD }, { "PUT", HTTP_PUT },
		{ "POST", HTTP_POST }, { "PATCH", HTTP_PATCH },
		{ "DELETE", HTTP_DELETE }, { "OPTIONS", HTTP_OPTIONS },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(t[i].name, m) == 0)
			return (unsigned)t[i].m;
	return (unsigned)HTTP_TRACE;
}

/* What the router answers a for method on path before the handler:
 * 0 (the handler runs), 404, 405 or 403 (why says why). */
static int
authz(const struct px_auth *a, const char *method, const char *path)
{
	const struct api_route *rt;
	char buf[256], *seg[8];
	unsigned allowed;
	int n;

	snprintf(buf, sizeof(buf), "%s", path);
	n = split(buf, seg);
	why[0] = '\0';
	rt = api_route_find(method_of(method), seg, n, &allowed);
	if (allowed == 0)
		return 404;
	if (rt == NULL)
		return 405;
	return api_scope_check(rt, a, seg, n, why, sizeof(why));
}

/* The route's pattern with its parameters filled in for sandbox sb. */
static void
fill(const char *pat, const char *sb, char *out, size_t size)
{
	const char *p = pat, *e;
	size_t n = 0;

	out[0] = '\0';
	while (*p != '\0' && n < size) {
		if (*p == '{') {
			e = strchr(p, '}');
			n += (size_t)snprintf(out + n, size - n, "%s",
			    strncmp(p, "{id}", 4) == 0 ? sb :
			    strncmp(p, "{token}", 7) == 0 ? "tok-1" :
			    strncmp(p, "{port}", 6) == 0 ? "80" : "x");
			p = e + 1;
		} else
			out[n++] = *p++, out[n] = '\0';
	}
}

static const char *const mnames[] = { "GET", "HEAD", "PATCH", "PUT", "POST",
	"DELETE" };

static void
every_route(void)
{
	char path[256], path2[256];
	size_t i, k;
	int bad = 0, n = 0;

	for (i = 0; i < api_nroutes; i++) {
		const struct api_route *rt = &api_routes[i];

		fill(rt->pattern, "sb-1", path, sizeof(path));
		fill(rt->pattern, "sb-2", path2, sizeof(path2));
		for (k = 0; k < 6; k++) {
			int own, other, want_own;

			if (!(rt->methods & (1u << k)))
				continue;
			n++;
			/* the fleet's own routes: a fleet peer, never a
			 * token, admin's neither; a peer nothing else */
			if ((authz(&fleet, mnames[k], path) == 0) !=
			    (rt->scope == API_FLEET)) {
				diag("fleet peer on %s %s", mnames[k], path);
				bad++;
			}
			if ((authz(&admin, mnames[k], path) != 0) !=
			    (rt->scope == API_FLEET)) {
				diag("admin on %s %s", mnames[k], path);
				bad++;
			}
			own = authz(&sb1, mnames[k], path);
			other = authz(&sb1, mnames[k], path2);
			want_own = rt->scope == API_OWN || rt->scope == API_ANY ||
			    rt->scope == API_OWN_TOKEN;
			if ((own == 0) != want_own) {
				diag("sandbox token on %s %s: %d (%s)",
				    mnames[k], path, own, why);
				bad++;
			}
			/* another sandbox's id, or the sandbox token's own
			 * token id in place of another's: only routes open
			 * to any token let it through */
			if (strcmp(path, path2) != 0 &&
			    (other == 0) != (rt->scope == API_ANY)) {
				diag("sb-1's token on %s %s: %d", mnames[k],
				    path2, other);
				bad++;
			}
		}
	}
	is_int(bad, 0, "every route (%d route-methods): admin always but on "
	    "the fleet's own routes, which a fleet peer alone may use; a "
	    "sandbox token as its scope says, never on another sandbox", n);
}

/* Route 0 of berth's table broken one way each: never registered. */
static void
registration(void)
{
	static const struct {
		const char *what, *says;
	} cases[] = {
		{ "a route without a scope", "no scope" },
		{ "a route without a handler", "no handler" },
		{ "an own-sandbox scope off /v1/sandboxes/{id}",
		    "/v1/sandboxes/{id}" },
		{ "a streamed GET", "stream" },
		{ "a pattern not from /", "pattern" },
		{ "an unknown method", "methods" },
		{ "two routes of one path and method", "two routes" },
		{ "a route without a summary", "summary" },
	};
	struct api_route t[2];
	char err[256];
	size_t i;

	is_int(api_table_check(api_routes, api_nroutes, err, sizeof(err)), 0,
	    "berth's own table registers");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		t[0] = t[1] = api_routes[0];
		switch (i) {
		case 0: t[0].scope = API_SCOPE_UNSET; break;
		case 1: t[0].fn = NULL; break;
		case 2: t[0].scope = API_OWN; break;
		case 3: t[0].body = API_BODY_STREAM; break;
		case 4: t[0].pattern = "v1/x"; break;
		case 5: t[0].methods = 64; break;
		case 7: t[0].summary = NULL; break;
		}
		err[0] = '\0';
		ok(api_table_check(t, i == 6 ? 2 : 1, err, sizeof(err)) == -1 &&
		    strstr(err, cases[i].says) != NULL, "%s cannot be "
		    "registered: %s", cases[i].what, err);
	}
}

/*
 * The OpenAPI document against the table, both ways: every method of
 * every route is an operation of its path with the route's summary, and
 * every operation of the document reaches, by the router, the route of
 * its path (its {parameters} given values).
 */
static void
openapi(void)
{
	static const struct { const char *name; unsigned bit; } m[] = {
		{ "get", API_GET }, { "head", API_HEAD }, { "put", API_PUT },
		{ "post", API_POST }, { "patch", API_PATCH },
		{ "delete", API_DELETE },
	};
	static const struct { const char *name; enum http_method m; } hm[] = {
		{ "get", HTTP_GET }, { "head", HTTP_HEAD }, { "put", HTTP_PUT },
		{ "post", HTTP_POST }, { "patch", HTTP_PATCH },
		{ "delete", HTTP_DELETE },
	};
	json_t *doc = api_openapi_doc(), *paths, *item, *op;
	const char *path, *method, *p;
	char buf[512], *seg[8];
	size_t i, k, n, ops = 0, missing = 0, wrong = 0;
	unsigned allowed;
	int nseg;

	paths = json_object_get(doc, "paths");
	ok(json_is_object(paths), "openapi: a document with paths");
	is_str(json_string_value(json_object_get(doc, "openapi")), "3.1.0",
	    "openapi: 3.1.0");
	for (i = 0; i < api_nroutes; i++)
		for (k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
			if (!(api_routes[i].methods & m[k].bit))
				continue;
			op = json_object_get(json_object_get(paths,
			    api_routes[i].pattern), m[k].name);
			if (op == NULL || strcmp(json_string_value(
			    json_object_get(op, "summary")),
			    api_routes[i].summary) != 0) {
				diag("not in the document: %s %s", m[k].name,
				    api_routes[i].pattern);
				missing++;
			}
		}
	is_int((int)missing, 0, "openapi: every route's every method is an "
	    "operation with its summary");
	json_object_foreach(paths, path, item) {
		json_object_foreach(item, method, op) {
			const struct api_route *rt;
			enum http_method hmeth = HTTP_OPTIONS;

			ops++;
			/* {id} -> x1 and so on: a value for each parameter */
			for (n = 0, p = path; *p != '\0' && n + 3 < sizeof(buf);
			    p++) {
				if (*p == '{') {
					buf[n++] = '1';
					while (*p != '\0' && *p != '}')
						p++;
					continue;
				}
				buf[n++] = *p;
			}
			buf[n] = '\0';
			nseg = split(buf, seg);
			for (k = 0; k < sizeof(hm) / sizeof(hm[0]); k++)
				if (strcmp(hm[k].name, method) == 0)
					hmeth = hm[k].m;
			rt = api_route_find((unsigned)hmeth, seg, nseg, &allowed);
			if (rt == NULL || strcmp(rt->pattern, path) != 0) {
				diag("not a route of the server: %s %s", method,
				    path);
				wrong++;
			}
		}
	}
	is_int((int)wrong, 0, "openapi: each of its %zu operations is a route "
	    "of the server", ops);
	json_decref(doc);
}

static void
allow(const char *path, const char *want)
{
	char buf[256], *seg[8], text[64];
	unsigned allowed;
	int n;

	snprintf(buf, sizeof(buf), "%s", path);
	n = split(buf, seg);
	(void)api_route_find((unsigned)HTTP_OPTIONS, seg, n, &allowed);
	api_allow_text(allowed, text, sizeof(text));
	is_str(text, want, "Allow of %s", path);
}

static int
streamed(const char *method, const char *target)
{
	return px_control_streamed(method_of(method), target, strlen(target));
}

int
main(void)
{
	openapi();
	/* scoping: admin */
	is_int(authz(&admin, "PUT", "/v1/policy"), 0, "admin: policy");
	is_int(authz(&admin, "POST", "/v1/sandboxes"), 0, "admin: create");
	is_int(authz(&admin, "GET", "/metrics"), 0, "admin: metrics");
	is_int(authz(&admin, "DELETE", "/v1/sandboxes/sb-2"), 0, "admin: rm");
	/* scoping: a sandbox token on its own sandbox */
	is_int(authz(&sb1, "GET", "/v1/health"), 0, "sb: health");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-1"), 0, "sb: show own");
	is_int(authz(&sb1, "PUT", "/v1/sandboxes/sb-1/ports/80"), 0,
	    "sb: publish own");
	is_int(authz(&sb1, "DELETE", "/v1/sandboxes/sb-1/ports/80"), 0,
	    "sb: unpublish own");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-1/ports"), 0, "sb: ports");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/egress"), 0,
	    "sb: add egress rule");
	is_int(authz(&sb1, "DELETE", "/v1/sandboxes/sb-1/egress/allow/x.com"),
	    0, "sb: remove egress rule");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-1/egress/log"), 0,
	    "sb: egress log");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/pause"), 0, "sb: pause");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/resume"), 0, "sb: resume");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-1/events"), 0, "sb: events");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/exec"), 0, "sb: exec");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-1/files"), 0, "sb: get file");
	is_int(authz(&sb1, "PUT", "/v1/sandboxes/sb-1/files"), 0, "sb: put file");
	is_int(authz(&sb1, "DELETE", "/v1/sandboxes/sb-1/files"), 0,
	    "sb: delete file");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/files/mkdir"), 0,
	    "sb: mkdir");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/files/move"), 0,
	    "sb: move");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/files/chmod"), 404,
	    "sb: files/chmod: no such route (404)");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-1/watch"), 0, "sb: watch");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-2/files/move"), 403,
	    "sb: another's move 403");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-2/watch"), 403,
	    "sb: another's watch 403");
	is_int(authz(&sb1, "PUT", "/v1/sandboxes/sb-2/files"), 403,
	    "sb: another's files 403");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-2/exec"), 403,
	    "sb: another's exec 403");
	is_int(authz(&sb1, "GET", "/v1/policy"), 0, "sb: read policy");
	is_int(authz(&sb1, "POST", "/v1/tokens/tok-1/rotate"), 0,
	    "sb: rotate itself");
	/* scoping: refused */
	is_int(authz(&sb1, "PUT", "/v1/policy"), 403, "sb: set policy 403");
	is_int(authz(&sb1, "GET", "/v1/sandboxes/sb-2"), 403,
	    "sb: other sandbox 403");
	is_int(authz(&sb1, "PUT", "/v1/sandboxes/sb-2/ports/80"), 403,
	    "sb: publish on other 403");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-10/egress"), 403,
	    "sb: prefix-sharing id 403");
	is_int(authz(&sb1, "GET", "/v1/sandboxes"), 403, "sb: list 403");
	is_int(authz(&sb1, "POST", "/v1/sandboxes"), 403, "sb: create 403");
	is_int(authz(&sb1, "DELETE", "/v1/sandboxes/sb-1"), 403,
	    "sb: delete own 403");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/suspend"), 403,
	    "sb: suspend 403");
	is_int(authz(&sb1, "POST", "/v1/sandboxes/sb-1/events"), 405,
	    "sb: write events: no such method (405)");
	is_int(authz(&sb1, "GET", "/v1/tokens"), 403, "sb: tokens 403");
	is_int(authz(&sb1, "POST", "/v1/tokens"), 403, "sb: make token 403");
	is_int(authz(&sb1, "POST", "/v1/tokens/tok-2/rotate"), 403,
	    "sb: rotate another 403");
	is_int(authz(&sb1, "DELETE", "/v1/tokens/tok-1"), 403,
	    "sb: revoke 403");
	is_int(authz(&sb1, "GET", "/v1/ports"), 403, "sb: all ports 403");
	is_int(authz(&sb1, "GET", "/metrics"), 403, "sb: metrics 403");
	{
		struct px_auth none = { 0, "", "", 0 };

		is_int(authz(&none, "GET", "/v1/health"), 403,
		    "no scope at all: 403");
	}

	{
		struct px_auth none = { 0, "", "", 0 };

		is_int(authz(&none, "GET", "/v1/health"), 403,
		    "no scope at all: 403");
	}
	/* the reasons a sandbox token is given */
	authz(&sb1, "PUT", "/v1/policy");
	is_str(why, "a sandbox token cannot change the global policy",
	    "403 says why: policy");
	authz(&sb1, "GET", "/metrics");
	is_str(why, "a sandbox token cannot use /metrics", "metrics");
	authz(&sb1, "GET", "/v1/sandboxes/sb-2/ports");
	is_str(why, "this token belongs to sandbox 'sb-1'", "another's");
	authz(&sb1, "GET", "/v1/sandboxes/sb-1/console");
	is_str(why, "a sandbox token cannot use 'console' on its sandbox",
	    "console");
	authz(&sb1, "GET", "/v1/tokens");
	is_str(why, "a token of sandbox 'sb-1' may only use "
	    "/v1/sandboxes/<its id>/...", "outside its sandbox");

	every_route();
	registration();

	/* 404 and 405 with the methods of the path */
	is_int(authz(&admin, "GET", "/v1/nothing"), 404, "unknown path: 404");
	is_int(authz(&admin, "GET", "/v1/sandboxes/sb-1/ports/80/x"), 404,
	    "too deep: 404");
	is_int(authz(&admin, "PATCH", "/v1/policy"), 405, "PATCH policy: 405");
	allow("/v1/sandboxes", "GET, HEAD, POST");
	allow("/v1/sandboxes/sb-1", "GET, HEAD, PATCH, DELETE");
	allow("/v1/sandboxes/sb-1/ports/80", "GET, HEAD, PUT, DELETE");
	allow("/v1/sandboxes/sb-1/egress", "GET, HEAD, PUT, POST, DELETE");
	allow("/v1/sandboxes/sb-1/files", "GET, PUT, DELETE");
	allow("/v1/sandboxes/sb-1/watch", "GET");
	allow("/v1/sandboxes/sb-1/processes/3/kill", "POST");
	allow("/v1/templates/t/build", "GET, HEAD, POST");
	allow("/v1/policy", "GET, HEAD, PUT");

	/* bodies read as they come */
	is_int(streamed("PUT", "/v1/sandboxes/sb-1/files?path=/x"), 1,
	    "PUT files streams");
	is_int(streamed("GET", "/v1/sandboxes/sb-1/files?path=/x"), 0,
	    "GET files does not");
	is_int(streamed("POST", "/v1/sandboxes/sb-1/exec?stream=1"), 1,
	    "exec?stream=1 streams");
	is_int(streamed("POST", "/v1/sandboxes/sb-1/exec?a=b&stream=1"), 1,
	    "exec?...&stream=1 streams");
	is_int(streamed("POST", "/v1/sandboxes/sb-1/exec"), 0,
	    "exec alone does not");
	is_int(streamed("POST", "/v1/sandboxes/sb-1/exec?stream=10"), 0,
	    "exec?stream=10 does not");
	is_int(streamed("POST", "/v1/sandboxes/sb-1/processes/12/attach"), 1,
	    "attach streams");
	is_int(streamed("POST", "/v1/sandboxes/sb-1/processes/12/wait"), 0,
	    "wait does not");
	is_int(streamed("PUT", "/v1/sandboxes/sb-1/fil%65s"), 0,
	    "an encoded path does not (as written only)");
	is_int(streamed("PUT", "/v1/sandboxes//files"), 0,
	    "an empty id does not");
	is_int(streamed("PUT", "/v1/sandboxes/a/b/c/d/e/f/g/h/i"), 0,
	    "deeper than any route does not");
	return done_testing();
}
