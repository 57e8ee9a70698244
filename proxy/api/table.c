/*
 * api/table.c — the control API as data: one table of routes (method,
 * path pattern, handler, who may call it, what its body is), and what is
 * derived from it: the router (404, 405 with Allow, 403 for a token
 * outside its scope, 400 for a malformed path parameter), which requests
 * stream their body (px_control_streamed, asked by the request reader and
 * the TCP control helper before the body is read), and the check every
 * table passes before the server starts (a route with no scope cannot be
 * registered). Adding an endpoint is one row here and its handler.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

#define R	API_READ
#define SB	"/v1/sandboxes/{id}"

/* "why" texts of 403 where the generic one is not the whole truth */
#define W_POLICY	"a sandbox token cannot change the global policy"
#define W_SANDBOX	"a sandbox token cannot change or delete its sandbox"

const struct api_route api_routes[] = {
	/* this API described (OpenAPI 3.1), generated from this table */
	{ R, "/v1/openapi.json", api_openapi, API_ANY, API_BODY_NONE, NULL,
	    NULL, "This API's OpenAPI 3.1 description, made from its table "
	    "of routes" },
	{ R, "/metrics", api_metrics, API_ADMIN, API_BODY_NONE, NULL, NULL,
	    "Prometheus metrics: requests, sandboxes per state, capacity" },
	{ R, "/v1/health", api_health, API_ANY, API_BODY_NONE, NULL, NULL,
	    "Whether berthd answers, and what it runs (VMs, egress)" },
	{ R, "/v1/ports", api_port_list, API_ADMIN, API_BODY_NONE, NULL, NULL,
	    "Every published port of every sandbox, with its URL" },
	{ R, "/v1/policy", api_policy_get, API_ANY, API_BODY_NONE, NULL, NULL,
	    "The global egress policy no sandbox can widen" },
	{ API_PUT, "/v1/policy", api_policy_put, API_ADMIN, API_BODY_JSON,
	    NULL, W_POLICY,
	    "Replace the global egress policy" },
	{ R, "/v1/tokens", api_token_list, API_ADMIN, API_BODY_NONE, NULL, NULL,
	    "List tokens (never their secrets)" },
	{ API_POST, "/v1/tokens", api_token_create, API_ADMIN, API_BODY_JSON,
	    NULL, NULL,
	    "Create a token; its secret is in this answer only" },
	{ R, "/v1/tokens/{token}", api_token_show, API_ADMIN, API_BODY_NONE,
	    NULL, NULL,
	    "One token" },
	{ API_DELETE, "/v1/tokens/{token}", api_token_rm, API_ADMIN,
	    API_BODY_NONE, NULL, NULL,
	    "Revoke a token" },
	{ API_POST, "/v1/tokens/{token}/rotate", api_token_rotate,
	    API_OWN_TOKEN, API_BODY_NONE, NULL, NULL,
	    "Give a token a new secret (the old one stops working)" },
	{ R, "/v1/fleet/hosts", api_fleet, API_ADMIN, API_BODY_NONE, NULL, NULL,
	    "Fleet mode: the hosts in etcd and the lost ones" },
	{ R, "/v1/fleet/sandboxes", api_fleet, API_ADMIN, API_BODY_NONE, NULL,
	    NULL,
	    "Fleet mode: where each sandbox of the fleet is placed" },
	{ R, "/v1/fleet/drain", api_fleet_drain, API_ADMIN, API_BODY_NONE,
	    NULL, NULL,
	    "Fleet mode: whether this host is drained, and its drain's moves" },
	{ API_POST, "/v1/fleet/drain", api_fleet_drain, API_ADMIN,
	    API_BODY_JSON, NULL, NULL,
	    "Fleet mode: this host is placed on no more (kept across "
	    "restarts) and its sandboxes move to other hosts (\"move\": "
	    "false: they stay)" },
	{ API_POST, "/v1/fleet/undrain", api_fleet_drain, API_ADMIN,
	    API_BODY_JSON, NULL, NULL,
	    "Fleet mode: this host is placed on again (a drain's moves "
	    "stop)" },
	/* a move's target side: only a fleet peer, on fleet_api_listen */
	{ API_POST | API_DELETE, "/v1/fleet/move/{id}", api_fleet_move,
	    API_FLEET, API_BODY_JSON, NULL, NULL,
	    "Fleet hosts only: a sandbox moving here, its manifest (POST: "
	    "which files to send); DELETE: the move given up" },
	{ R, "/v1/fleet/move/{id}", api_fleet_move, API_FLEET, API_BODY_NONE,
	    NULL, NULL,
	    "Fleet hosts only: whether the sandbox is here (a source whose "
	    "commit's answer was lost asks)" },
	{ API_PUT, "/v1/fleet/move/{id}/file", api_fleet_move, API_FLEET,
	    API_BODY_STREAM, NULL, NULL,
	    "Fleet hosts only: one file of a moving sandbox (?name=), its "
	    "bytes as the body (from byte ?from= of it: the rest of one cut "
	    "short)" },
	{ R, "/v1/fleet/move/{id}/file", api_fleet_move, API_FLEET,
	    API_BODY_NONE, NULL, NULL,
	    "Fleet hosts only: how many bytes of a file cut short (?name=) "
	    "are here, for the source to go on from" },
	{ API_POST, "/v1/fleet/move/{id}/commit", api_fleet_move, API_FLEET,
	    API_BODY_JSON, NULL, NULL,
	    "Fleet hosts only: the moved sandbox adopted here with its "
	    "records; restorable when this answers" },
	{ R, "/v1/templates", api_template_list, API_ADMIN, API_BODY_NONE, NULL,
	    NULL,
	    "List guest templates: version, size, source" },
	{ API_POST, "/v1/templates", api_template_add, API_ADMIN, API_BODY_JSON,
	    NULL, NULL,
	    "Register a template directory under a name" },
	{ R, "/v1/templates/{template}", api_template_show, API_ADMIN,
	    API_BODY_NONE, NULL, NULL,
	    "One template" },
	{ API_DELETE, "/v1/templates/{template}", api_template_rm, API_ADMIN,
	    API_BODY_NONE, NULL, NULL,
	    "Forget a template name (refused while a sandbox uses it)" },
	{ R, "/v1/templates/{template}/build", api_template_build,
	    API_ADMIN, API_BODY_NONE, NULL, NULL,
	    "A template build's state and its progress lines from ?after=N" },
	/* ?from=dockerfile|image: the source as the body (streamed);
	 * without: debian or minimal, no body */
	{ API_POST, "/v1/templates/{template}/build", api_template_build,
	    API_ADMIN, API_BODY_STREAM, "from=*", NULL,
	    "Build a template: debian or minimal, or with "
	    "?from=dockerfile|image the body is the build context's tar or "
	    "the image archive" },
	{ R, "/v1/sandboxes", api_sandbox_list, API_ADMIN, API_BODY_NONE, NULL,
	    NULL,
	    "List sandboxes" },
	{ API_POST, "/v1/sandboxes", api_sandbox_create, API_ADMIN,
	    API_BODY_JSON, NULL, NULL,
	    "Create a sandbox (a microVM, or an external one with address); "
	    "its token is in this answer only; in fleet mode placed on the "
	    "host with room (host, zone)" },
	{ R, SB, api_sandbox_show, API_OWN, API_BODY_NONE, NULL, NULL,
	    "One sandbox, its ports and its VM" },
	{ API_PATCH, SB, api_sandbox_set, API_ADMIN, API_BODY_JSON, NULL,
	    W_SANDBOX,
	    "Change a sandbox's idle limits and env" },
	{ API_DELETE, SB, api_sandbox_delete, API_ADMIN, API_BODY_NONE, NULL,
	    W_SANDBOX,
	    "Remove a sandbox and everything it holds" },
	{ R, SB "/ports", api_port_list, API_OWN, API_BODY_NONE, NULL, NULL,
	    "The sandbox's published ports" },
	{ R, SB "/ports/{port}", api_port_show, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "One published port" },
	{ API_PUT, SB "/ports/{port}", api_port_put, API_OWN, API_BODY_JSON,
	    NULL, NULL,
	    "Publish a port of the sandbox on an HTTPS URL" },
	{ API_DELETE, SB "/ports/{port}", api_port_delete, API_OWN,
	    API_BODY_NONE, NULL, NULL,
	    "Stop publishing a port" },
	{ API_POST, SB "/pause", api_lifecycle, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "Pause the sandbox (memory kept)" },
	{ API_POST, SB "/resume", api_lifecycle, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "Resume a paused or suspended sandbox" },
	{ API_POST, SB "/suspend", api_lifecycle, API_ADMIN, API_BODY_NONE,
	    NULL, NULL,
	    "Suspend the sandbox to disk" },
	{ API_POST, SB "/start", api_lifecycle, API_ADMIN, API_BODY_NONE, NULL,
	    NULL,
	    "Boot a stopped or failed sandbox from its template, keeping "
	    "its disk" },
	{ API_POST, SB "/stop", api_lifecycle, API_ADMIN, API_BODY_NONE, NULL,
	    NULL,
	    "Stop the sandbox (its disk kept)" },
	{ API_POST, SB "/restart", api_lifecycle, API_ADMIN, API_BODY_NONE,
	    NULL, NULL,
	    "Stop the sandbox and boot it again" },
	/* fleet mode: to another host, suspended, its files streamed
	 * over the fleet channel (fleet_move.c) */
	{ API_POST, SB "/move", api_sandbox_move, API_ADMIN, API_BODY_JSON,
	    NULL, W_SANDBOX,
	    "Fleet mode: move the sandbox to another host (\"to\"): it is "
	    "suspended, its files copied there, its route switched; it stays "
	    "here if anything fails" },
	/* forks of itself (also from its checkpoints): each fork's own
	 * token is in the answer, so the new sandboxes are held by whoever
	 * holds this one (vm_max_forks bounds a call) */
	{ API_POST, SB "/fork", api_sandbox_fork, API_OWN, API_BODY_JSON, NULL,
	    NULL,
	    "Fork the sandbox (or one of its checkpoints) into new "
	    "sandboxes; their tokens are in this answer only" },
	{ R, SB "/checkpoints", api_checkpoint_list, API_OWN, API_BODY_NONE,
	    NULL, NULL,
	    "The sandbox's checkpoints" },
	{ API_POST, SB "/checkpoints", api_checkpoint_op, API_OWN,
	    API_BODY_JSON, NULL, NULL,
	    "Take a checkpoint of the sandbox's memory and disk" },
	{ API_DELETE, SB "/checkpoints/{name}", api_checkpoint_rm, API_OWN,
	    API_BODY_NONE, NULL, NULL,
	    "Remove a checkpoint" },
	{ API_POST, SB "/restore", api_checkpoint_op, API_OWN, API_BODY_JSON,
	    NULL, NULL,
	    "Put the sandbox back to a checkpoint" },
	/* a command in its guest: one JSON document, or with ?stream=1
	 * frames both ways as they come */
	{ API_POST, SB "/exec", api_exec, API_OWN, API_BODY_STREAM, "stream=1",
	    NULL,
	    "Run a command in the guest: one JSON answer, or with ?stream=1 "
	    "frames both ways as they come" },
	{ R, SB "/processes", api_procs, API_OWN, API_BODY_NONE, NULL, NULL,
	    "The sandbox's background processes" },
	{ R, SB "/processes/{n}", api_procs, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "One background process" },
	{ R, SB "/processes/{n}/logs", api_procs, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "A background process's output from ?offset=" },
	{ API_POST, SB "/processes/{n}/kill", api_procs, API_OWN, API_BODY_JSON,
	    NULL, NULL,
	    "Send a background process a signal" },
	{ API_POST, SB "/processes/{n}/wait", api_procs, API_OWN, API_BODY_NONE,
	    NULL, NULL,
	    "Wait for a background process to end" },
	{ API_POST, SB "/processes/{n}/attach", api_procs, API_OWN,
	    API_BODY_STREAM, NULL, NULL,
	    "Attach to a background process: its input and output as frames" },
	{ API_GET, SB "/files", api_files, API_OWN, API_BODY_NONE, NULL, NULL,
	    "Read a file (?path=) or list a directory (?list=1)" },
	{ API_DELETE, SB "/files", api_files, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "Remove a file or directory (?path=, ?recursive=1)" },
	{ API_PUT, SB "/files", api_files, API_OWN, API_BODY_STREAM, NULL,
	    NULL,
	    "Write a file (?path=): the body is its bytes" },
	{ API_POST, SB "/files/mkdir", api_files_post, API_OWN, API_BODY_JSON,
	    NULL, NULL,
	    "Make a directory" },
	{ API_POST, SB "/files/move", api_files_post, API_OWN, API_BODY_JSON,
	    NULL, NULL,
	    "Rename or move a file or directory" },
	{ API_GET, SB "/watch", api_watch, API_OWN, API_BODY_NONE, NULL, NULL,
	    "Watch a directory: its changes as a stream of events" },
	{ R, SB "/console", api_console, API_ADMIN, API_BODY_NONE, NULL, NULL,
	    "The guest's console as kept for ops" },
	{ R, SB "/events", api_events, API_OWN, API_BODY_NONE, NULL, NULL,
	    "The sandbox's lifecycle events" },
	/* its egress rules: the handlers keep them inside the global
	 * policy, so a sandbox token may change them */
	{ R, SB "/egress", api_egress_get, API_OWN, API_BODY_NONE, NULL, NULL,
	    "The sandbox's egress mode and rules" },
	{ API_PUT, SB "/egress", api_egress_put, API_OWN, API_BODY_JSON, NULL,
	    NULL,
	    "Replace the sandbox's egress mode and rules" },
	{ API_POST, SB "/egress", api_egress_add, API_OWN, API_BODY_JSON, NULL,
	    NULL,
	    "Add an egress rule (allow or deny, optionally with a ttl)" },
	{ API_DELETE, SB "/egress", api_egress_reset, API_OWN, API_BODY_NONE,
	    NULL, NULL,
	    "Reset the sandbox's egress to the policy's default" },
	{ R, SB "/egress/log", api_egress_log, API_OWN, API_BODY_NONE, NULL,
	    NULL,
	    "Recent denied and allowed outbound connections" },
	{ API_DELETE, SB "/egress/{action}/{value}", api_egress_rm, API_OWN,
	    API_BODY_NONE, NULL, NULL,
	    "Remove one egress rule" },
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);

static const struct {
	unsigned bit;
	const char *name;
	enum http_method method;
} methods[] = {		/* in the order Allow lists them */
	{ API_GET, "GET", HTTP_GET },
	{ API_HEAD, "HEAD", HTTP_HEAD },
	{ API_PATCH, "PATCH", HTTP_PATCH },
	{ API_PUT, "PUT", HTTP_PUT },
	{ API_POST, "POST", HTTP_POST },
	{ API_DELETE, "DELETE", HTTP_DELETE },
};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

unsigned
api_method_bit(unsigned method)
{
	size_t i;

	for (i = 0; i < NMETHODS; i++)
		if ((unsigned)methods[i].method == method)
			return methods[i].bit;
	return 0;
}

/* "GET, HEAD, POST" for an Allow header. */
void
api_allow_text(unsigned bits, char *buf, size_t size)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < NMETHODS && n < size; i++)
		if (bits & methods[i].bit)
			n += (size_t)snprintf(buf + n, size - n, "%s%s",
			    n ? ", " : "", methods[i].name);
}

/*
 * Whether the pattern's segments match seg[0..nseg): a literal segment
 * matches itself, a {parameter} any non-empty segment.
 */
static int
pattern_match(const char *pat, char *const *seg, int nseg)
{
	const char *p = pat + 1, *e;
	size_t len;
	int i;

	for (i = 0; i < nseg; i++) {
		if (*p == '\0')
			return 0;
		e = strchr(p, '/');
		len = e ? (size_t)(e - p) : strlen(p);
		if (seg[i][0] == '\0')
			return 0;
		if (p[0] != '{' && (strlen(seg[i]) != len ||
		    memcmp(seg[i], p, len) != 0))
			return 0;
		p += len;
		if (*p == '/')
			p++;
	}
	return *p == '\0';
}

/* The index of the pattern's segment named {name}, or -1. */
static int
param_index(const char *pat, const char *name)
{
	size_t len = strlen(name);
	const char *p;
	int i;

	for (i = 0, p = pat + 1; *p != '\0'; i++) {
		if (*p == '{' && strncmp(p + 1, name, len) == 0 &&
		    p[1 + len] == '}')
			return i;
		if ((p = strchr(p, '/')) == NULL)
			break;
		p++;
	}
	return -1;
}

/*
 * The route for method on seg[0..nseg); NULL when none. *allowed: the
 * methods routes of that path take (0: no such path).
 */
const struct api_route *
api_route_find(unsigned method, char *const *seg, int nseg, unsigned *allowed)
{
	const struct api_route *hit = NULL;
	unsigned bit = api_method_bit(method);
	size_t i;

	*allowed = 0;
	for (i = 0; i < api_nroutes; i++) {
		if (!pattern_match(api_routes[i].pattern, seg, nseg))
			continue;
		*allowed |= api_routes[i].methods;
		if (api_routes[i].methods & bit)
			hit = &api_routes[i];
	}
	return hit;
}

static int __attribute__((format(printf, 3, 4)))
deny(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return 403;
}

/*
 * Whether a may call rt on seg[0..nseg) (a path rt matches): 0, or 403
 * with a one-line reason. Admin tokens and the unix socket may call
 * everything; a sandbox token what the route's scope lets it.
 */
int
api_scope_check(const struct api_route *rt, const struct px_auth *a,
    char *const *seg, int nseg, char *why, size_t whylen)
{
	int own = param_index(rt->pattern, "id") == 2;

	/* the fleet's own routes: a peer host's, nobody else's; a peer
	 * nothing else */
	if (rt->scope == API_FLEET)
		return a->fleet ? 0 : deny(why, whylen, "%s", "only a fleet "
		    "host may use this, on fleet_api_listen");
	if (a->fleet)
		return deny(why, whylen, "%s", "a fleet host may not use this");
	if (a->admin)
		return 0;
	if (a->sandbox[0] == '\0')
		return deny(why, whylen, "%s", "no access");
	if (own && strcmp(seg[2], a->sandbox) != 0)
		return deny(why, whylen, "this token belongs to sandbox '%s'",
		    a->sandbox);
	switch (rt->scope) {
	case API_ANY:
		return 0;
	case API_OWN:
		return 0;	/* its sandbox: checked above */
	case API_OWN_TOKEN:
		if (strcmp(seg[2], a->token_id) == 0)
			return 0;
		break;
	case API_ADMIN:
	case API_FLEET:
	case API_SCOPE_UNSET:
		break;
	}
	if (rt->why != NULL)
		return deny(why, whylen, "%s", rt->why);
	if (own)
		return deny(why, whylen, "a sandbox token cannot use '%s' on "
		    "its sandbox", seg[3]);
	if (nseg < 1 || strcmp(seg[0], "v1") != 0)
		return deny(why, whylen, "a sandbox token cannot use %s",
		    rt->pattern);
	return deny(why, whylen, "a token of sandbox '%s' may only use "
	    "/v1/sandboxes/<its id>/...", a->sandbox);
}

/* The path's parameters checked and set on r; -1 after replying 400. */
static int
route_params(struct req *r, const struct api_route *rt)
{
	char buf[64];
	int i;

	if ((i = param_index(rt->pattern, "id")) >= 0) {
		if (api_check_sandbox_id(r, "id", -1, r->seg[i]) == -1)
			return -1;
		r->id = r->seg[i];
	}
	if ((i = param_index(rt->pattern, "token")) >= 0) {
		if (api_check_token_id(r, r->seg[i]) == -1)
			return -1;
		r->id = r->seg[i];
	}
	if ((i = param_index(rt->pattern, "template")) >= 0) {
		if (api_check_template_name(r, r->seg[i]) == -1)
			return -1;
		r->id = r->seg[i];
	}
	if ((i = param_index(rt->pattern, "port")) >= 0 &&
	    (r->port = px_parse_port(r->seg[i], strlen(r->seg[i]))) == 0) {
		api_reply_error(r, 400, NULL, "port", "not a port number: "
		    "'%s' (1-65535, no leading zero)", api_shown(buf,
		    sizeof(buf), r->seg[i]));
		return -1;
	}
	return 0;
}

void
api_route(struct req *r)
{
	const struct api_route *rt;
	char allow[64], why[256];
	unsigned allowed;

	rt = api_route_find((unsigned)r->method, r->seg, r->nseg, &allowed);
	if (allowed == 0) {
		api_reply_error(r, 404, NULL, NULL, "no such resource: %s",
		    r->path);
		return;
	}
	if (rt == NULL) {
		api_allow_text(allowed, allow, sizeof(allow));
		api_reply_error(r, 405, allow, NULL, "%s is not allowed on %s "
		    "(allowed: %s)", http_method_str(r->method), r->path,
		    allow);
		return;
	}
	if (api_scope_check(rt, &r->auth, r->seg, r->nseg, why,
	    sizeof(why)) != 0) {
		api_reply_error(r, 403, NULL, NULL, "%s", why);
		return;
	}
	if (route_params(r, rt) == -1)
		return;
	rt->fn(r);
}

/*
 * Whether the request streams its body, from its head as written (no
 * decoding: an encoded path takes the buffered path): its route's body
 * is a stream, and the query says so when the route wants it to
 * (exec: stream=1; a template build's from=, any value).
 */
int
px_control_streamed(unsigned method, const char *target, size_t n)
{
	const struct api_route *rt;
	char u[2048], *seg[CTL_MAX_SEGS + 1], *q, *p, *tok, *save;
	unsigned allowed;
	size_t sq;
	int nseg = 0;

	if (n >= sizeof(u) || n == 0 || target[0] != '/')
		return 0;
	memcpy(u, target, n);
	u[n] = '\0';
	if ((q = strchr(u, '?')) != NULL)
		*q++ = '\0';
	for (p = u + 1; nseg <= CTL_MAX_SEGS; p++) {
		seg[nseg++] = p;
		if ((p = strchr(p, '/')) == NULL)
			break;
		*p = '\0';
	}
	if (p != NULL)
		return 0;	/* more segments than any route has */
	rt = api_route_find(method, seg, nseg, &allowed);
	if (rt == NULL || rt->body != API_BODY_STREAM)
		return 0;
	if (rt->stream_query == NULL)
		return 1;
	if (q == NULL)
		return 0;
	/* "name=value", or "name=*": any value */
	sq = strlen(rt->stream_query);
	for (tok = strtok_r(q, "&", &save); tok != NULL;
	    tok = strtok_r(NULL, "&", &save))
		if (strcmp(tok, rt->stream_query) == 0 ||
		    (sq > 0 && rt->stream_query[sq - 1] == '*' &&
		    strncmp(tok, rt->stream_query, sq - 1) == 0))
			return 1;
	return 0;
}

/*
 * A table is registered only if every route is whole: a path pattern of
 * at most CTL_MAX_SEGS segments, known methods, a handler, a scope (a
 * route nobody said who may call cannot exist), an own-sandbox scope
 * only under /v1/sandboxes/{id}, a streamed body only on PUT or POST,
 * and no two routes of one pattern sharing a method. 0, or -1 with err.
 */
int
api_table_check(const struct api_route *t, size_t n, char *err,
    size_t errlen)
{
	unsigned all = 0;
	size_t i, j, k;
	const char *p;
	int segs;

	for (k = 0; k < NMETHODS; k++)
		all |= methods[k].bit;
	for (i = 0; i < n; i++) {
		const struct api_route *rt = &t[i];
		const char *pat = rt->pattern ? rt->pattern : "(none)";

		for (segs = 0, p = pat; p != NULL && *p == '/'; segs++)
			p = strchr(p + 1, '/');
		if (rt->pattern == NULL || rt->pattern[0] != '/' ||
		    segs > CTL_MAX_SEGS || strstr(rt->pattern, "//") != NULL) {
			snprintf(err, errlen, "route %zu: bad path pattern '%s'",
			    i, pat);
			return -1;
		}
		if (rt->methods == 0 || (rt->methods & ~all) != 0) {
			snprintf(err, errlen, "route %s: no or unknown methods",
			    pat);
			return -1;
		}
		if (rt->fn == NULL) {
			snprintf(err, errlen, "route %s: no handler", pat);
			return -1;
		}
		if (rt->summary == NULL || rt->summary[0] == '\0') {
			snprintf(err, errlen, "route %s: no summary (its "
			    "OpenAPI operation says what it does)", pat);
			return -1;
		}
		if (rt->scope != API_ADMIN && rt->scope != API_OWN &&
		    rt->scope != API_OWN_TOKEN && rt->scope != API_ANY &&
		    rt->scope != API_FLEET) {
			snprintf(err, errlen, "route %s: no scope (who may call "
			    "it: admin, own sandbox, own token or any)", pat);
			return -1;
		}
		if (rt->scope == API_OWN && param_index(pat, "id") != 2) {
			snprintf(err, errlen, "route %s: an own-sandbox scope "
			    "needs /v1/sandboxes/{id}", pat);
			return -1;
		}
		if (rt->scope == API_OWN_TOKEN && param_index(pat, "token") != 2) {
			snprintf(err, errlen, "route %s: an own-token scope "
			    "needs /v1/tokens/{token}", pat);
			return -1;
		}
		if (rt->body == API_BODY_STREAM &&
		    (rt->methods & ~(unsigned)(API_PUT | API_POST)) != 0) {
			snprintf(err, errlen, "route %s: only PUT and POST may "
			    "stream a body", pat);
			return -1;
		}
		for (j = 0; j < i; j++)
			if (strcmp(t[j].pattern, pat) == 0 &&
			    (t[j].methods & rt->methods) != 0) {
				snprintf(err, errlen, "route %s: two routes for "
				    "one method", pat);
				return -1;
			}
	}
	return 0;
}
