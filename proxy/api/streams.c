/*
 * api/streams.c — streamed requests: exec?stream=1, PUT and GET of files, watch
 * and attach, whose bodies and answers are frames or bytes as they come.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

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

/* exec?stream=1 and a process's attach: the exec framing both ways */
#define CS_FRAMED(cs)	((cs)->kind == CS_EXEC || (cs)->kind == CS_ATTACH)

void
api_cs_free(struct cstream *cs)
{
	if (cs->tpl != NULL && cs->kind == CS_MOVE)
		cs->c->ctl->hooks.move_spool_abort(cs->tpl);
	else if (cs->tpl != NULL)	/* the client went before the body's end */
		cs->c->ctl->hooks.template_spool_abort(cs->tpl);
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
		api_cs_free(cs);
		api_conn_resume(c);
		return;
	}
	api_cs_free(cs);
	c->closing = 1;
	c->waiting = 0;		/* nothing more to answer: conn_write closes */
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		api_conn_free(c);	/* nothing left to flush */
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
	    api_json_set_bytes(o, "path", ev->path, ev->pathlen) == 0) {
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
		if (res->status != 200 && res->code != NULL)
			api_reply_error_code(&r, res->status, res->code, "%s",
			    res->message ? res->message : "failed");
		else if (res->status != 200)
			api_reply_error_hdr(&r, res->status, hdr, "%s",
			    res->message ? res->message : "failed");
		else if (cs->kind == CS_PUT)
			api_reply_json_hdr(&r, 200, json_pack("{s:s, s:I, s:s, "
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
	api_conn_read(c->bev, c);
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
int
api_cs_run(struct cstream *cs, struct req *r, const struct px_exec_req *er)
{
	struct px_control *ctl = cs->c->ctl;
	struct px_exec_sink sink = { .start = cs_start, .output = cs_output,
	    .done = cs_done, .drained = cs_drained, .event = cs_event,
	    .arg = cs };
	struct px_exec_req req = *er;
	char err[512];
	int status = 503;

	req.token_id = cs->by_token;
	cs->h = ctl->hooks.exec_stream(cs->id, &req, &sink, &status, err,
	    sizeof(err), ctl->hooks.arg);
	if (cs->h == NULL) {
		if (status == 429)
			api_reply_error_hdr(r, 429, "Retry-After: 1\r\n", "%s", err);
		else
			api_reply_error(r, status, NULL, NULL, "%s", err);
		return -1;
	}
	return 0;
}

/* A new stream on r's connection; NULL after replying why not. */
struct cstream *
api_cs_new(struct req *r, const char *id, enum cs_kind kind)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	struct cstream *cs;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return NULL;
	}
	if (sb.external || ctl->hooks.exec_stream == NULL) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest%s", id, kind == CS_EXEC ?
		    " to run a command in" : " to hold files");
		return NULL;
	}
	if (!r->auth.admin && r->c->tcp) {
		struct conn *o;
		int n = 0;

		/* a sandbox token's budget of streams at once */
		TAILQ_FOREACH(o, &ctl->conns, entry)
			n += o->st != NULL &&
			    strcmp(o->st->token_id, r->auth.token_id) == 0;
		if (n >= CTL_STREAMS_PER_TOKEN) {
			api_reply_error_hdr(r, 429, "Retry-After: 1\r\n",
			    "token %s already holds %d streamed requests, the "
			    "most a sandbox token may hold at once",
			    r->auth.token_id, n);
			return NULL;
		}
	}
	if ((cs = calloc(1, sizeof(*cs))) == NULL ||
	    ((kind == CS_EXEC || kind == CS_ATTACH) &&
	    (cs->fbuf = evbuffer_new()) == NULL)) {
		free(cs);
		api_reply_error(r, 503, NULL, NULL, "out of memory");
		return NULL;
	}
	cs->c = r->c;
	if (!r->auth.admin)
		snprintf(cs->token_id, sizeof(cs->token_id), "%s",
		    r->auth.token_id);
	cs->kind = kind;
	cs->method = r->method;
	snprintf(cs->id, sizeof(cs->id), "%s", id);
	snprintf(cs->by_token, sizeof(cs->by_token), "%s", r->auth.token_id);
	return cs;
}

/* The stream answers later; a long transfer is not an idle client. */
void
api_cs_attach(struct cstream *cs)
{
	cs->c->st = cs;
	cs->c->waiting = 1;
	bufferevent_set_timeouts(cs->c->bev, NULL, NULL);
}

void
api_cs_exec_begin(struct req *r, const char *id)
{
	struct cstream *cs;

	if ((cs = api_cs_new(r, id, CS_EXEC)) != NULL)
		api_cs_attach(cs);	/* runs at its 'J' frame */
}

/* The 'J' frame: the exec request; -1 after replying. */
static int
cs_exec_json(struct cstream *cs, const char *p, size_t len)
{
	static const char *const allowed[] = { "argv", "env", "cwd",
	    "timeout", "user", "tty", NULL };
	struct exec_parsed ep;
	struct px_sandbox sb;
	struct req r;
	char err[256];
	json_t *obj;
	int rc;

	memset(&r, 0, sizeof(r));
	r.c = cs->c;
	r.method = cs->method;
	r.body = p;
	r.bodylen = len;
	if ((obj = api_body_object(&r, allowed, 0)) == NULL)
		return -1;
	/* its env under the command's (gone meanwhile: the run says so) */
	if (px_store_sandbox_get(cs->c->ctl->store, cs->id, &sb, err,
	    sizeof(err)) != PX_STORE_OK)
		sb.env[0] = '\0';
	if (api_exec_parse(&r, obj, 1, sb.env, &ep) < 0) {
		json_decref(obj);
		return -1;
	}
	rc = api_cs_run(cs, &r, &ep.er);
	api_exec_parsed_free(&ep);
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
	if ((obj = api_body_object(&r, allowed, 1)) == NULL)
		return -1;
	memset(&er, 0, sizeof(er));
	er.op = PX_PROC_ATTACH;
	er.proc = cs->proc;
	er.timeout_ms = 0;	/* until the client detaches */
	er.tty = 1;
	if ((v = json_object_get(obj, "rows")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1000) {
			api_reply_error(&r, 400, NULL, "rows", "must be 1 to 1000");
			goto out;
		}
		er.rows = (int)json_integer_value(v);
	}
	if ((v = json_object_get(obj, "cols")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1000) {
			api_reply_error(&r, 400, NULL, "cols", "must be 1 to 1000");
			goto out;
		}
		er.cols = (int)json_integer_value(v);
	}
	if ((er.rows == 0) != (er.cols == 0)) {
		api_reply_error(&r, 400, NULL, er.rows == 0 ? "rows" : "cols",
		    "rows and cols go together");
		goto out;
	}
	if ((v = json_object_get(obj, "offset")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			api_reply_error(&r, 400, NULL, "offset", "must be a byte "
			    "offset in the process's output");
			goto out;
		}
		er.offset = (uint64_t)json_integer_value(v);
	}
	rc = api_cs_run(cs, &r, &er);
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
		api_reply_error(&r, 400, NULL, NULL, "%s", msg);
	}
	cs_finish(cs);
}

/* ---- a template build's source (CS_TPL) ---- */

/* An error from the spool: answered, the connection closed (the rest of
 * the body is not read). */
static void
tpl_fail(struct cstream *cs, int status, const char *err)
{
	struct req r;

	memset(&r, 0, sizeof(r));
	r.c = cs->c;
	r.method = cs->method;
	api_reply_error(&r, status, NULL, NULL, "%s", err);
	cs->c->closing = 1;
	cs_finish(cs);
}

static void
tpl_body(struct cstream *cs, const char *at, size_t len)
{
	int status = 500;
	char err[512];

	if (cs->tpl == NULL)
		return;
	cs->bytes += len;
	if (cs->c->ctl->hooks.template_spool_write(cs->tpl, at, len, &status,
	    err, sizeof(err)) < 0) {
		cs->tpl = NULL;		/* gone with the error */
		tpl_fail(cs, status, err);
	}
}

/* The body is whole: the build starts, 202 with its state. */
static void
tpl_end(struct cstream *cs)
{
	struct px_control *ctl = cs->c->ctl;
	int status = 500;
	char err[512];
	json_t *doc;
	struct req r;
	void *h = cs->tpl;

	if (h == NULL)
		return;
	cs->tpl = NULL;
	if (ctl->hooks.template_spool_end(h, &status, err, sizeof(err)) < 0) {
		tpl_fail(cs, status, err);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.c = cs->c;
	r.method = cs->method;
	if ((doc = ctl->hooks.template_build_status(cs->id, 0,
	    ctl->hooks.arg)) == NULL)
		api_reply_error(&r, 500, NULL, NULL, "the build of %s started "
		    "but has no state", cs->id);
	else
		api_reply_json(&r, 202, doc);
	cs_finish(cs);
}

/* ---- a moved sandbox's file (CS_MOVE, move.c) ---- */

static void
mv_body(struct cstream *cs, const char *at, size_t len)
{
	int status = 500;
	char err[512];

	if (cs->tpl == NULL)
		return;
	cs->bytes += len;
	if (cs->c->ctl->hooks.move_spool_write(cs->tpl, at, len, &status,
	    err, sizeof(err)) < 0) {
		cs->tpl = NULL;		/* gone with the error */
		tpl_fail(cs, status, err);
	}
}

/* The file is whole: 200 once its size and sha256 are the manifest's. */
static void
mv_end(struct cstream *cs)
{
	struct px_control *ctl = cs->c->ctl;
	int status = 500;
	char err[512];
	struct req r;
	void *h = cs->tpl;

	if (h == NULL)
		return;
	cs->tpl = NULL;
	if (ctl->hooks.move_spool_end(h, &status, err, sizeof(err)) < 0) {
		tpl_fail(cs, status, err);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.c = cs->c;
	r.method = cs->method;
	api_reply_json(&r, 200, json_pack("{s:s, s:s, s:I}", "id", cs->id,
	    "name", cs->path, "bytes", (json_int_t)cs->bytes));
	cs_finish(cs);
}

/* Body bytes of a streamed request. */
void
api_cs_body(struct cstream *cs, const char *at, size_t len)
{
	struct px_control *ctl = cs->c->ctl;
	unsigned char h[BA_HDR], *p;
	size_t n, queued = 0;
	uint32_t flen;

	if (cs->kind == CS_TPL) {
		tpl_body(cs, at, len);
		return;
	}
	if (cs->kind == CS_MOVE) {
		mv_body(cs, at, len);
		return;
	}
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
void
api_cs_eof(struct cstream *cs)
{
	cs->body_done = 1;
	if (cs->kind == CS_TPL) {
		tpl_end(cs);
		return;
	}
	if (cs->kind == CS_MOVE) {
		mv_end(cs);
		return;
	}
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
