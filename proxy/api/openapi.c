/*
 * api/openapi.c — the control API described as OpenAPI 3.1, made from
 * its table of routes (table.c) each time it is asked for: every route's
 * methods, path parameters, who may call it (x-berth-scope and the
 * bearer scheme), what its body is (JSON, or bytes streamed as they
 * come), its summary, and the one error shape every route answers with.
 * Served at GET /v1/openapi.json and printed by `berthd --openapi` (the
 * copy installed under share/berth/). Query parameters are the one part
 * not in the table: the handlers read them; the ones a client needs are
 * listed here by route.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

#include <ctype.h>

/* The query parameters of the routes that take some. */
static const struct {
	unsigned methods;
	const char *pattern;
	const char *name;
	const char *what;
} queries[] = {
	{ API_READ, "/v1/sandboxes", "after", "paging: the id after which "
	    "the page starts" },
	{ API_READ, "/v1/sandboxes", "limit", "paging: at most this many" },
	{ API_READ, "/v1/templates", "after", "paging: the name after which "
	    "the page starts" },
	{ API_READ, "/v1/templates", "limit", "paging: at most this many" },
	{ API_READ, "/v1/tokens", "after", "paging" },
	{ API_READ, "/v1/tokens", "limit", "paging" },
	{ API_READ, "/v1/templates/{template}/build", "after",
	    "progress lines from this one on" },
	{ API_POST, "/v1/templates/{template}/build", "from",
	    "dockerfile (the body a tar of the build context) or image (a "
	    "docker save archive or an OCI layout tarball); without it, the "
	    "name is debian or minimal and there is no body" },
	{ API_POST, "/v1/templates/{template}/build", "file",
	    "from=dockerfile: the Dockerfile's path in the context" },
	{ API_POST, "/v1/templates/{template}/build", "build_arg",
	    "from=dockerfile: K=V, repeated" },
	{ API_POST, "/v1/sandboxes/{id}/exec", "stream",
	    "1: the request and the answer are frames as they come" },
	{ API_READ, "/v1/sandboxes/{id}/processes/{n}/logs", "offset",
	    "the output from this byte of its ring on" },
	{ API_GET, "/v1/sandboxes/{id}/files", "path", "an absolute path in "
	    "the guest" },
	{ API_GET, "/v1/sandboxes/{id}/files", "list", "1: list the "
	    "directory" },
	{ API_GET, "/v1/sandboxes/{id}/files", "limit", "list=1: at most "
	    "this many entries" },
	{ API_GET, "/v1/sandboxes/{id}/files", "offset", "read from this "
	    "byte" },
	{ API_GET, "/v1/sandboxes/{id}/files", "length", "read this many "
	    "bytes" },
	{ API_PUT, "/v1/sandboxes/{id}/files", "path", "an absolute path in "
	    "the guest" },
	{ API_PUT, "/v1/sandboxes/{id}/files", "mode", "its mode, octal" },
	{ API_DELETE, "/v1/sandboxes/{id}/files", "path", "an absolute path "
	    "in the guest" },
	{ API_DELETE, "/v1/sandboxes/{id}/files", "recursive", "1: a "
	    "directory and what it holds" },
	{ API_GET, "/v1/sandboxes/{id}/watch", "path", "the directory "
	    "watched" },
	{ API_READ, "/v1/sandboxes/{id}/events", "after", "the events after "
	    "this sequence number" },
	{ API_READ, "/v1/sandboxes/{id}/console", "from", "the console from "
	    "this byte (0 or more; without it, its last 64 KiB)" },
	{ API_PUT, "/v1/fleet/move/{id}/file", "name", "which file of the "
	    "move's manifest" },
	{ API_PUT, "/v1/fleet/move/{id}/file", "from", "the body is the file "
	    "from this byte (the rest of one cut short)" },
	{ API_READ, "/v1/fleet/move/{id}/file", "name", "which file of the "
	    "move's manifest" },
};

static const char *
scope_name(enum api_scope s)
{
	switch (s) {
	case API_ADMIN:
		return "admin";
	case API_OWN:
		return "sandbox";	/* admin, or the sandbox {id}'s token */
	case API_OWN_TOKEN:
		return "token";		/* admin, or the token {token} itself */
	case API_ANY:
		return "any";
	case API_FLEET:
		return "fleet";		/* a fleet peer's certificate */
	default:
		return "none";
	}
}

/* "get_sandboxes_id_ports_port": unique, since (method, path) is. */
static void
operation_id(const char *method, const char *pattern, char *buf, size_t len)
{
	const char *p = strncmp(pattern, "/v1/", 4) == 0 ? pattern + 4 :
	    pattern + 1;
	size_t n;

	n = (size_t)snprintf(buf, len, "%s_", method);
	for (; *p != '\0' && n + 1 < len; p++) {
		if (*p == '{' || *p == '}')
			continue;
		buf[n++] = isalnum((unsigned char)*p) ? *p : '_';
	}
	buf[n < len ? n : len - 1] = '\0';
}

/* The group a route is listed under: its resource. */
static const char *
tag(const char *pattern, char *buf, size_t len)
{
	static const char *const lifecycle[] = { "pause", "resume", "suspend",
	    "start", "stop", "restart", "fork", "restore", "checkpoints",
	    NULL };
	const char *p = pattern, *e;
	size_t i;

	if (strncmp(p, "/v1/sandboxes/{id}/", 19) == 0) {
		p += 19;
		e = strchr(p, '/');
		snprintf(buf, len, "%.*s", (int)(e ? (size_t)(e - p) :
		    strlen(p)), p);
		for (i = 0; lifecycle[i] != NULL; i++)
			if (strcmp(buf, lifecycle[i]) == 0)
				return "lifecycle";
		if (strcmp(buf, "watch") == 0)
			return "files";
		if (strcmp(buf, "console") == 0 || strcmp(buf, "events") == 0)
			return "sandboxes";
		return buf;
	}
	if (strncmp(p, "/v1/", 4) == 0)
		p += 4;
	else
		p++;
	e = strchr(p, '/');
	snprintf(buf, len, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
	if (strcmp(buf, "openapi.json") == 0 || strcmp(buf, "health") == 0 ||
	    strcmp(buf, "metrics") == 0)
		return "server";
	return buf;
}

static json_t *
parameters(const struct api_route *rt, unsigned bit)
{
	json_t *a = json_array();
	const char *p = rt->pattern, *e;
	char name[32];
	size_t i;
	int num;

	while ((p = strchr(p, '{')) != NULL && (e = strchr(p, '}')) != NULL) {
		snprintf(name, sizeof(name), "%.*s", (int)(e - p - 1), p + 1);
		num = strcmp(name, "port") == 0 || strcmp(name, "n") == 0;
		json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:o}",
		    "name", name, "in", "path", "required", 1, "schema", num ?
		    json_pack("{s:s, s:i}", "type", "integer", "minimum", 1) :
		    json_pack("{s:s}", "type", "string")));
		p = e + 1;
	}
	for (i = 0; i < sizeof(queries) / sizeof(queries[0]); i++)
		if ((queries[i].methods & bit) &&
		    strcmp(queries[i].pattern, rt->pattern) == 0)
			json_array_append_new(a, json_pack("{s:s, s:s, s:s, "
			    "s:{s:s}}", "name", queries[i].name, "in", "query",
			    "description", queries[i].what, "schema", "type",
			    "string"));
	return a;
}

static json_t *
operation(const struct api_route *rt, const char *method, unsigned bit)
{
	char id[128], tb[32];
	json_t *op, *ok, *content;

	operation_id(method, rt->pattern, id, sizeof(id));
	op = json_pack("{s:s, s:s, s:[s], s:o, s:s}", "operationId", id,
	    "summary", rt->summary, "tags", tag(rt->pattern, tb, sizeof(tb)),
	    "parameters", parameters(rt, bit), "x-berth-scope",
	    scope_name(rt->scope));
	if (rt->why != NULL)
		json_object_set_new(op, "x-berth-forbidden-to-sandbox-tokens",
		    json_string(rt->why));
	if (rt->body == API_BODY_JSON)
		json_object_set_new(op, "requestBody", json_pack("{s:b, s:{s:{s:"
		    "{s:s}}}}", "required", 1, "content", "application/json",
		    "schema", "type", "object"));
	else if (rt->body == API_BODY_STREAM)
		json_object_set_new(op, "requestBody", json_pack("{s:s, s:{s:{s:"
		    "{s:s, s:s}}}}", "description", rt->stream_query != NULL ?
		    "streamed as it comes when the query has the parameter "
		    "x-berth-stream-when names; otherwise as the route says" :
		    "the bytes, streamed as they come", "content",
		    "application/octet-stream", "schema", "type", "string",
		    "contentMediaType", "application/octet-stream"));
	if (rt->stream_query != NULL)
		json_object_set_new(op, "x-berth-stream-when",
		    json_string(rt->stream_query));
	if (strcmp(rt->pattern, "/metrics") == 0)
		content = json_pack("{s:{s:{s:s}}}", "text/plain", "schema",
		    "type", "string");
	else
		content = json_pack("{s:{s:{}}}", "application/json", "schema");
	ok = json_pack("{s:s, s:o}", "description", bit == API_HEAD ?
	    "the answer's head, as GET's" : "done", "content", content);
	json_object_set_new(op, "responses", json_pack("{s:o, s:{s:s, s:{s:{s:"
	    "{s:s}}}}}", "2XX", ok, "default", "description", "an error: "
	    "its HTTP status, and the body says which and why", "content",
	    "application/json", "schema", "$ref",
	    "#/components/schemas/Error"));
	return op;
}

json_t *
api_openapi_doc(void)
{
	static const struct {
		unsigned bit;
		const char *name;
	} m[] = { { API_GET, "get" }, { API_HEAD, "head" }, { API_PUT, "put" },
	    { API_POST, "post" }, { API_PATCH, "patch" },
	    { API_DELETE, "delete" } };
	json_t *doc, *paths, *item;
	size_t i, k;

	paths = json_object();
	for (i = 0; i < api_nroutes; i++) {
		const struct api_route *rt = &api_routes[i];

		if ((item = json_object_get(paths, rt->pattern)) == NULL) {
			item = json_object();
			json_object_set_new(paths, rt->pattern, item);
		}
		for (k = 0; k < sizeof(m) / sizeof(m[0]); k++)
			if (rt->methods & m[k].bit)
				json_object_set_new(item, m[k].name,
				    operation(rt, m[k].name, m[k].bit));
	}
	doc = json_pack("{s:s, s:{s:s, s:s, s:s, s:{s:s, s:s}}, s:o, "
	    "s:{s:{s:{s:s, s:s}}, s:{s:{s:s, s:[s], s:b, s:{s:{s:s, s:[s, s, s], "
	    "s:b, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}}}}}}, s:[{s:[]}]}",
	    "openapi", "3.1.0",
	    "info", "title", "berth control API", "version", PACKAGE_VERSION,
	    "description", "Sandboxes (microVMs), their published ports, "
	    "egress, commands, files and templates. Over berthd's unix socket "
	    "(<state>/control.sock) every call is an admin's; over "
	    "control_listen (HTTPS) a bearer token says who calls: an admin "
	    "token, or a sandbox's own, which x-berth-scope 'sandbox' routes "
	    "take for that sandbox only. x-berth-scope 'fleet' routes are "
	    "another fleet host's, on fleet_api_listen (its certificate, "
	    "never a token).",
	    "license", "name", "GPL-2.0-or-later", "identifier",
	    "GPL-2.0-or-later",
	    "paths", paths,
	    "components",
	    "securitySchemes", "bearer", "type", "http", "scheme", "bearer",
	    "schemas", "Error", "type", "object", "required", "error",
	    "additionalProperties", 0,
	    "properties", "error", "type", "object", "required", "status",
	    "code", "message", "additionalProperties", 0, "properties",
	    "status", "type", "integer", "code", "type", "string",
	    "message", "type", "string", "field", "type", "string",
	    "security", "bearer");
	return doc;
}

void
api_openapi(struct req *r)
{
	json_t *doc = api_openapi_doc();

	if (doc == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	api_reply_json(r, 200, doc);
}
