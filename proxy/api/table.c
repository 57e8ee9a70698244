/*
 * api/table.c — the router: a request's path and method to its handler.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

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

/* ---- routing ---- */

int
api_is_get(const struct req *r)
{
	return r->method == HTTP_GET || r->method == HTTP_HEAD;
}

void
api_not_allowed(struct req *r, const char *allow)
{
	api_reply_error(r, 405, allow, NULL, "%s is not allowed on %s (allowed: %s)",
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
		if (api_is_get(r))
			api_port_list(r, id);
		else
			api_not_allowed(r, "GET, HEAD");
	} else if (strcmp(sub, "ports") == 0 && r->nseg == 5) {
		if ((port = px_parse_port(r->seg[4], strlen(r->seg[4]))) == 0) {
			api_reply_error(r, 400, NULL, "port", "not a port number: "
			    "'%s' (1-65535, no leading zero)", api_shown(buf,
			    sizeof(buf), r->seg[4]));
			return;
		}
		if (api_is_get(r))
			api_port_show(r, id, port);
		else if (r->method == HTTP_PUT)
			api_port_put(r, id, port);
		else if (r->method == HTTP_DELETE)
			api_port_delete(r, id, port);
		else
			api_not_allowed(r, "GET, HEAD, PUT, DELETE");
	} else if (r->nseg == 4 && (strcmp(sub, "pause") == 0 ||
	    strcmp(sub, "suspend") == 0 || strcmp(sub, "resume") == 0 ||
	    strcmp(sub, "start") == 0 || strcmp(sub, "stop") == 0 ||
	    strcmp(sub, "restart") == 0)) {
		if (r->method == HTTP_POST)
			api_lifecycle(r, id, sub);
		else
			api_not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "fork") == 0) {
		if (r->method == HTTP_POST)
			api_sandbox_fork(r, id);
		else
			api_not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "checkpoints") == 0) {
		if (api_is_get(r))
			api_checkpoint_list(r, id);
		else if (r->method == HTTP_POST)
			api_checkpoint_op(r, id, "checkpoint");
		else
			api_not_allowed(r, "GET, HEAD, POST");
	} else if (r->nseg == 5 && strcmp(sub, "checkpoints") == 0) {
		if (r->method == HTTP_DELETE)
			api_checkpoint_rm(r, id, r->seg[4]);
		else
			api_not_allowed(r, "DELETE");
	} else if (r->nseg == 4 && strcmp(sub, "restore") == 0) {
		if (r->method == HTTP_POST)
			api_checkpoint_op(r, id, "restore");
		else
			api_not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "exec") == 0) {
		if (r->method == HTTP_POST)
			api_exec(r, id);
		else
			api_not_allowed(r, "POST");
	} else if (r->nseg >= 4 && r->nseg <= 6 &&
	    strcmp(sub, "processes") == 0) {
		api_procs(r, id);
	} else if (r->nseg == 4 && strcmp(sub, "files") == 0) {
		if (r->method == HTTP_GET || r->method == HTTP_PUT ||
		    r->method == HTTP_DELETE)
			api_files(r, id);
		else
			api_not_allowed(r, "GET, PUT, DELETE");
	} else if (r->nseg == 5 && strcmp(sub, "files") == 0 &&
	    (strcmp(r->seg[4], "mkdir") == 0 ||
	    strcmp(r->seg[4], "move") == 0)) {
		if (r->method == HTTP_POST)
			api_files_post(r, id, r->seg[4]);
		else
			api_not_allowed(r, "POST");
	} else if (r->nseg == 4 && strcmp(sub, "watch") == 0) {
		if (r->method == HTTP_GET)
			api_watch(r, id);
		else
			api_not_allowed(r, "GET");
	} else if (r->nseg == 4 && strcmp(sub, "console") == 0) {
		if (api_is_get(r))
			api_console(r, id);
		else
			api_not_allowed(r, "GET, HEAD");
	} else if (r->nseg == 4 && strcmp(sub, "events") == 0) {
		if (api_is_get(r))
			api_events(r, id);
		else
			api_not_allowed(r, "GET, HEAD");
	} else if (strcmp(sub, "egress") == 0 && r->nseg == 4) {
		if (api_is_get(r))
			api_egress_get(r, id);
		else if (r->method == HTTP_PUT)
			api_egress_put(r, id);
		else if (r->method == HTTP_POST)
			api_egress_add(r, id);
		else if (r->method == HTTP_DELETE)
			api_egress_reset(r, id);
		else
			api_not_allowed(r, "GET, HEAD, PUT, POST, DELETE");
	} else if (strcmp(sub, "egress") == 0 && r->nseg == 5 &&
	    strcmp(r->seg[4], "log") == 0) {
		if (api_is_get(r))
			api_egress_log(r, id);
		else
			api_not_allowed(r, "GET, HEAD");
	} else if (strcmp(sub, "egress") == 0 && r->nseg == 6) {
		if (r->method == HTTP_DELETE)
			api_egress_rm(r, id, r->seg[4], r->seg[5]);
		else
			api_not_allowed(r, "DELETE");
	} else
		api_reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
}

/* Fleet mode's view, from the parent (etcd): hosts or every sandbox. */
static void
h_fleet(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	json_t *doc;

	if (r->nseg != 3 || (!seg_is(r, 2, "hosts") && !seg_is(r, 2, "sandboxes"))) {
		api_reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
		return;
	}
	if (!api_is_get(r)) {
		api_not_allowed(r, "GET, HEAD");
		return;
	}
	if (!r->auth.admin) {
		api_reply_error(r, 403, NULL, NULL, "the fleet view needs an admin token");
		return;
	}
	if (ctl->hooks.fleet == NULL ||
	    (doc = ctl->hooks.fleet(r->seg[2], ctl->hooks.arg)) == NULL) {
		api_reply_error(r, 404, NULL, NULL, "fleet mode is not configured on this host");
		return;
	}
	api_reply_json(r, 200, doc);
}

static void
route_tokens(struct req *r)
{
	if (r->nseg == 2) {
		if (api_is_get(r))
			api_token_list(r);
		else if (r->method == HTTP_POST)
			api_token_create(r);
		else
			api_not_allowed(r, "GET, HEAD, POST");
		return;
	}
	if (r->nseg > 4 || (r->nseg == 4 && !seg_is(r, 3, "rotate"))) {
		api_reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
		return;
	}
	if (r->nseg == 3 && !api_is_get(r) && r->method != HTTP_DELETE) {
		api_not_allowed(r, "GET, HEAD, DELETE");
		return;
	}
	if (r->nseg == 4 && r->method != HTTP_POST) {
		api_not_allowed(r, "POST");
		return;
	}
	if (api_check_token_id(r, r->seg[2]) == -1)
		return;
	if (r->nseg == 4)
		api_token_rotate(r, r->seg[2]);
	else if (api_is_get(r))
		api_token_show(r, r->seg[2]);
	else
		api_token_rm(r, r->seg[2]);
}

void
api_route(struct req *r)
{
	const char *id;

	if (r->nseg == 1 && seg_is(r, 0, "metrics")) {
		if (api_is_get(r))
			api_metrics(r);
		else
			api_not_allowed(r, "GET, HEAD");
		return;
	}
	if (r->nseg < 2 || !seg_is(r, 0, "v1"))
		goto notfound;
	if (r->nseg == 2 && seg_is(r, 1, "health")) {
		if (api_is_get(r))
			api_health(r);
		else
			api_not_allowed(r, "GET, HEAD");
		return;
	}
	if (r->nseg == 2 && seg_is(r, 1, "ports")) {
		if (api_is_get(r))
			api_port_list(r, NULL);
		else
			api_not_allowed(r, "GET, HEAD");
		return;
	}
	if (r->nseg == 2 && seg_is(r, 1, "policy")) {
		if (api_is_get(r))
			api_policy_get(r);
		else if (r->method == HTTP_PUT)
			api_policy_put(r);
		else
			api_not_allowed(r, "GET, HEAD, PUT");
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
		api_route_templates(r);
		return;
	}
	if (!seg_is(r, 1, "sandboxes"))
		goto notfound;
	if (r->nseg == 2) {
		if (api_is_get(r))
			api_sandbox_list(r);
		else if (r->method == HTTP_POST)
			api_sandbox_create(r);
		else
			api_not_allowed(r, "GET, HEAD, POST");
		return;
	}
	id = r->seg[2];
	if (r->nseg == 3) {
		if (!api_is_get(r) && r->method != HTTP_DELETE &&
		    r->method != HTTP_PATCH) {
			api_not_allowed(r, "GET, HEAD, PATCH, DELETE");
			return;
		}
		if (api_check_sandbox_id(r, id) == -1)
			return;
		if (api_is_get(r))
			api_sandbox_show(r, id);
		else if (r->method == HTTP_PATCH)
			api_sandbox_set(r, id);
		else
			api_sandbox_delete(r, id);
		return;
	}
	if (api_check_sandbox_id(r, id) == -1)
		return;
	route_sandbox_sub(r, id);
	return;
notfound:
	api_reply_error(r, 404, NULL, NULL, "no such resource: %s", r->path);
}
