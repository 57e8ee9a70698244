/*
 * api/files.c — a guest's files: GET, PUT, DELETE /v1/sandboxes/ID/files?path=,
 * POST .../files/mkdir and .../files/move, GET .../watch.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

/* ?name=N, a decimal count of bytes: 0 (absent: *v as it was), -1
 * after replying. */
static int
query_u64(struct req *r, const char *name, uint64_t *v)
{
	char buf[32], *end;
	int rc;

	if ((rc = api_query_get(r, name, buf, sizeof(buf))) == 0)
		return 0;
	errno = 0;
	if (rc == 1 && buf[0] >= '0' && buf[0] <= '9')
		*v = strtoull(buf, &end, 10);
	if (rc == -1 || buf[0] < '0' || buf[0] > '9' || *end != '\0' ||
	    errno == ERANGE) {
		api_reply_error(r, 400, NULL, name, "must be a number of bytes "
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

	if ((rc = api_query_get(r, "path", buf, sizeof(buf))) != 1 ||
	    buf[0] != '/' || strlen(buf) > CS_PATH_MAX ||
	    strlen(buf) >= size) {
		api_reply_error(r, 400, NULL, "path", "%s", rc == -1 ? "?path= is "
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
		api_reply_error(r, 400, NULL, field, "must be an absolute path in "
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
		api_reply_store(r, rc, NULL, err);
		return -1;
	}
	if (sb.external) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a "
		    "VM-backed sandbox: it has no guest to hold files", id);
		return -1;
	}
	return 0;
}

/* ?name=1 (or true); 0 absent or 0/false; -1 after replying */
static int
query_flag(struct req *r, const char *name)
{
	char buf[8];
	int rc;

	if ((rc = api_query_get(r, name, buf, sizeof(buf))) == 0)
		return 0;
	if (rc == 1 && (strcmp(buf, "1") == 0 || strcmp(buf, "true") == 0))
		return 1;
	if (rc == 1 && (strcmp(buf, "0") == 0 || strcmp(buf, "false") == 0))
		return 0;
	api_reply_error(r, 400, NULL, name, "must be 1 or 0");
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
			api_reply_error(r, 400, NULL, "limit", "must be 1 to %d "
			    "entries", LIST_MAX);
			return;
		}
		er.max_entries = (uint32_t)limit;
	} else {
		er.op = PX_FILE_REMOVE;
		if ((er.recursive = query_flag(r, "recursive")) < 0)
			return;
		if (strspn(path, "/") == strlen(path)) {
			api_reply_error(r, 400, NULL, "path", "refusing to remove "
			    "the guest's root directory");
			return;
		}
	}
	if (guest_sandbox(r, id) == 0)
		api_agent_call(r, id, &er, kind, 0);
}

/* POST .../files/mkdir {"path", "parents", "mode"} and .../files/move
 * {"from", "to", "overwrite"}. */
void
api_files_post(struct req *r)
{
	const char *id = r->id;
	const char *what = r->seg[4];
	static const char *const mk_allowed[] = { "path", "parents", "mode",
	    NULL };
	static const char *const mv_allowed[] = { "from", "to", "overwrite",
	    NULL };
	struct px_exec_req er;
	json_t *obj, *v;
	const char *mode;
	int mk = strcmp(what, "mkdir") == 0;

	if ((obj = api_body_object(r, mk ? mk_allowed : mv_allowed, 0)) == NULL)
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
			api_reply_error(r, 400, NULL, "parents", "must be true or "
			    "false");
			goto out;
		}
		er.parents = json_is_true(v);
		if ((v = json_object_get(obj, "mode")) != NULL) {
			mode = json_string_value(v);
			if (mode == NULL || mode[0] == '\0' ||
			    strspn(mode, "01234567") != strlen(mode) ||
			    strlen(mode) > 5 || strtoul(mode, NULL, 8) > 07777) {
				api_reply_error(r, 400, NULL, "mode", "an octal mode "
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
			api_reply_error(r, 400, NULL, "overwrite", "must be true or "
			    "false");
			goto out;
		}
		er.overwrite = json_is_true(v);
	}
	if (guest_sandbox(r, id) == 0)
		api_agent_call(r, id, &er, mk ? PK_MKDIR : PK_MOVE, 0);
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
	if ((rc = api_query_get(r, "mode", mode, sizeof(mode))) == -1 ||
	    (rc == 1 && (mode[0] == '\0' || strspn(mode, "01234567") !=
	    strlen(mode) || strtoul(mode, NULL, 8) > 07777))) {
		api_reply_error(r, 400, NULL, "mode", "'%s': an octal mode, 0 to "
		    "7777 (e.g. 0644)", api_shown(buf, sizeof(buf), mode));
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
void
api_watch(struct req *r)
{
	const char *id = r->id;
	struct px_exec_req er;
	struct cstream *cs;

	if ((cs = api_cs_new(r, id, CS_WATCH)) == NULL)
		return;
	memset(&er, 0, sizeof(er));
	if (query_path(r, cs->path, sizeof(cs->path), "?path= must be an "
	    "absolute directory in the guest") < 0) {
		api_cs_free(cs);
		return;
	}
	if ((er.recursive = query_flag(r, "recursive")) < 0) {
		api_cs_free(cs);
		return;
	}
	er.op = PX_FILE_WATCH;
	er.path = cs->path;
	er.timeout_ms = 0;	/* until the client or the directory goes */
	if (api_cs_run(cs, r, &er) < 0) {
		api_cs_free(cs);
		return;
	}
	cs->body_done = 1;
	api_cs_attach(cs);
}

void
api_files(struct req *r)
{
	const char *id = r->id;
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
		api_reply_error(r, 400, NULL, NULL, "PUT the file to "
		    "/v1/sandboxes/%s/files?path=... as written here (no "
		    "encoded path segments)", id);
		return;
	}
	if ((cs = api_cs_new(r, id, r->method == HTTP_PUT ? CS_PUT :
	    CS_GET)) == NULL)
		return;
	if (files_query(r, &er, cs->path, sizeof(cs->path)) < 0 ||
	    api_cs_run(cs, r, &er) < 0) {
		api_cs_free(cs);
		return;
	}
	cs->mode = er.mode;
	cs->body_done = r->method == HTTP_GET;
	api_cs_attach(cs);
}
