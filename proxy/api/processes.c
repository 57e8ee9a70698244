/*
 * api/processes.c — a guest's detached processes: list, show, logs, kill, wait,
 * attach; and the guest agent calls behind them and the files.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

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
		if (e == NULL || api_json_set_bytes(e, "name", v[i].name,
		    v[i].namelen) < 0 || json_array_append_new(list, e) < 0) {
			json_decref(e);
			json_decref(list);
			free(v);
			return NULL;
		}
	}
	free(v);
	if ((e = json_pack("{s:o, s:b}", "entries", list, "truncated",
	    res->truncated)) != NULL && api_json_set_bytes(e, "path", path,
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
		api_reply_error_code(&r, res->status, res->code, "%s",
		    res->message ? res->message : "failed");
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
			api_reply_error(&r, 404, NULL, NULL, "no process %u in "
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
			if (api_exec_stream(doc, "output", res->out,
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
		if (doc != NULL && api_json_set_bytes(doc, "path", pp->path,
		    strlen(pp->path)) < 0) {
			json_decref(doc);
			doc = NULL;
		}
		break;
	case PK_MOVE:
		if ((doc = json_object()) != NULL && (api_json_set_bytes(doc,
		    "from", pp->path, strlen(pp->path)) < 0 ||
		    api_json_set_bytes(doc, "to", pp->to, strlen(pp->to)) < 0)) {
			json_decref(doc);
			doc = NULL;
		}
		break;
	}
	if (doc == NULL)
		api_reply_error(&r, 503, NULL, NULL, "out of memory");
	else
		api_reply_json(&r, 200, doc);
out:
	free(pp);
	api_conn_resume(c);
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
void
api_agent_call(struct req *r, const char *id, struct px_exec_req *er,
    int kind, uint32_t proc)
{
	struct px_control *ctl = r->c->ctl;
	struct proc_pending *pp;
	char err[512];
	int status = 503;

	if (ctl->hooks.exec == NULL) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest", id);
		return;
	}
	if ((pp = calloc(1, sizeof(*pp))) == NULL) {
		api_reply_error(r, 503, NULL, NULL, "out of memory");
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
	er->token_id = r->auth.token_id;
	if (ctl->hooks.exec(id, er, proc_done, pp, &status, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		r->c->pexec = NULL;
		r->c->waiting = 0;
		bufferevent_set_timeouts(r->c->bev, &api_idle, &api_idle);
		free(pp);
		if (status == 429)
			api_reply_error_hdr(r, 429, "Retry-After: 1\r\n", "%s", err);
		else
			api_reply_error(r, status, NULL, NULL, "%s", err);
	}
}

void
api_procs(struct req *r)
{
	const char *id = r->id;
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
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (r->nseg >= 5) {
		n = strtoul(r->seg[4], &end, 10);
		if (r->seg[4][0] < '1' || r->seg[4][0] > '9' || *end != '\0' ||
		    n > UINT32_MAX) {
			api_reply_error(r, 404, NULL, NULL, "no process '%s': "
			    "processes are numbered 1, 2, ...",
			    api_shown(buf, sizeof(buf), r->seg[4]));
			return;
		}
	}
	memset(&er, 0, sizeof(er));
	er.timeout_ms = 30000;
	er.proc = (uint32_t)n;
	if (r->nseg == 4 && api_is_get(r)) {
		kind = PK_LIST;
		er.op = PX_PROC_LIST;
	} else if (r->nseg == 5 && api_is_get(r)) {
		kind = PK_SHOW;
		er.op = PX_PROC_LIST;
	} else if (r->nseg == 6 && strcmp(r->seg[5], "logs") == 0 &&
	    api_is_get(r)) {
		kind = PK_LOGS;
		er.op = PX_PROC_LOGS;
		if ((rc = api_query_get(r, "offset", buf, sizeof(buf))) != 0) {
			er.offset = rc == 1 && buf[0] >= '0' && buf[0] <= '9' ?
			    strtoull(buf, &end, 10) : 0;
			if (rc == -1 || buf[0] < '0' || buf[0] > '9' ||
			    *end != '\0') {
				api_reply_error(r, 400, NULL, "offset", "must be a "
				    "byte offset in the process's output");
				return;
			}
		}
		if ((rc = api_query_get(r, "follow", buf, sizeof(buf))) == 1 &&
		    strcmp(buf, "1") == 0) {
			struct cstream *cs;

			/* its output as it comes, to the process's end */
			if ((cs = api_cs_new(r, id, CS_GET)) == NULL)
				return;
			er.follow = 1;
			er.timeout_ms = EXEC_TIMEOUT_MAX;
			if (api_cs_run(cs, r, &er) < 0) {
				api_cs_free(cs);
				return;
			}
			cs->body_done = 1;
			api_cs_attach(cs);
			return;
		}
	} else if (r->nseg == 6 && strcmp(r->seg[5], "kill") == 0 &&
	    r->method == HTTP_POST) {
		kind = PK_KILL;
		er.op = PX_PROC_SIGNAL;
		er.signo = 15;
		if (r->bodylen > 0) {
			if ((obj = api_body_object(r, kill_allowed, 0)) == NULL)
				return;
			if ((er.signo = signal_parse(json_object_get(obj,
			    "signal"))) < 0) {
				api_reply_error(r, 400, NULL, "signal", "a signal "
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
			api_reply_error(r, 400, NULL, NULL, "POST .../processes/%lu/"
			    "attach as written here (no encoded path segments): "
			    "its body is frames, 'J' first", n);
			return;
		}
		if ((cs = api_cs_new(r, id, CS_ATTACH)) == NULL)
			return;
		cs->proc = (uint32_t)n;
		api_cs_attach(cs);	/* runs at its 'J' frame */
		return;
	} else {
		/* not in the route table (table.c) */
		api_reply_error(r, 404, NULL, NULL, "no such resource");
		return;
	}
	if (sb.external) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest processes", id);
		goto out;
	}
	api_agent_call(r, id, &er, kind, (uint32_t)n);
out:
	json_decref(obj);
}
