/*
 * api/commands.c — POST /v1/sandboxes/ID/exec answered in one JSON document (the
 * command runs in the guest through exec.c in berthd).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

/* ---- exec: a command in the guest (exec.c in berthd) ---- */

/* Output as JSON text when it is UTF-8 (jansson checks), else base64. */
int
api_exec_stream(json_t *doc, const char *key, const unsigned char *p, size_t len)
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
	c = api_conn_find(ctl, p->c, p->serial);
	if (c == NULL) {
		free(p);
		return;
	}
	c->pexec = NULL;
	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = p->method;
	if (res->status != 200) {
		api_reply_error_code(&r, res->status, res->code, "%s",
		    res->message ? res->message : "exec failed");
	} else if (res->proc != 0) {
		/* detached: its handle */
		if ((doc = json_pack("{s:I, s:I, s:s, s:I}", "process",
		    (json_int_t)res->proc, "pid", (json_int_t)res->pid,
		    "state", "running", "wake_ms", (json_int_t)res->wake_ms)) ==
		    NULL)
			api_reply_error(&r, 503, NULL, NULL, "out of memory");
		else
			api_reply_json(&r, 201, doc);
	} else if ((doc = json_pack("{s:o, s:o, s:b, s:b, s:I, s:I}",
	    "exit_code", res->exited ? json_integer(res->exit_code) :
	    json_null(), "signal", res->exited ? json_null() :
	    json_integer(res->signal), "timed_out", res->timed_out,
	    "truncated", res->truncated, "wake_ms", (json_int_t)res->wake_ms,
	    "duration_ms", (json_int_t)res->duration_ms)) == NULL ||
	    api_exec_stream(doc, "stdout", res->out, res->outlen) < 0 ||
	    api_exec_stream(doc, "stderr", res->err, res->errlen) < 0) {
		json_decref(doc);
		api_reply_error(&r, 503, NULL, NULL, "out of memory");
	} else
		api_reply_json(&r, 200, doc);
	free(p);
	api_conn_resume(c);
}

void
api_exec(struct req *r)
{
	const char *id = r->id;
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
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (r->c->rh.streamed) {	/* ?stream=1: the request comes as frames */
		api_cs_exec_begin(r, id);
		return;
	}
	if ((obj = api_body_object(r, allowed, 0)) == NULL)
		return;
	if (api_exec_parse(r, obj, 0, sb.env, &ep) < 0) {
		json_decref(obj);
		return;
	}
	if (sb.external || ctl->hooks.exec == NULL) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: there is no guest to run a command in",
		    id);
		goto out;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		api_reply_error(r, 503, NULL, NULL, "out of memory");
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
	ep.er.token_id = r->auth.token_id;
	if (ctl->hooks.exec(id, &ep.er, exec_done, p, &status, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		r->c->pexec = NULL;
		r->c->waiting = 0;
		bufferevent_set_timeouts(r->c->bev, &api_idle, &api_idle);
		free(p);
		if (status == 429)
			api_reply_error_hdr(r, 429, "Retry-After: 1\r\n", "%s", err);
		else
			api_reply_error(r, status, NULL, NULL, "%s", err);
	}
out:
	api_exec_parsed_free(&ep);
	json_decref(obj);
}
