/*
 * api/snapshots.c — forks (POST /v1/sandboxes/ID/fork) and checkpoints (list, take,
 * remove, restore).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

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
void
api_sandbox_fork(struct req *r)
{
	const char *id = r->id;
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
	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	arr = json_object_get(obj, "ids");
	if (!json_is_array(arr) || (n = json_array_size(arr)) == 0 ||
	    n > PX_FORK_MAX) {
		api_reply_error(r, 400, NULL, "ids", "required: an array of 1 to %u "
		    "new sandbox ids", max);
		goto out;
	}
	if (n > max) {
		api_reply_error(r, 400, NULL, "ids", "%zu new sandboxes in one call: "
		    "vm_max_forks allows %u", n, max);
		goto out;
	}
	if (json_object_get(obj, "checkpoint") != NULL &&
	    api_check_checkpoint_name(r, "checkpoint", (ckpt = json_string_value(
	    json_object_get(obj, "checkpoint")))) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if ((ids[i] = json_string_value(json_array_get(arr, i))) ==
		    NULL) {
			api_reply_error(r, 400, NULL, "ids", "item %zu is not a "
			    "string", i);
			goto out;
		}
		/* the request's field is "ids" (api_check_sandbox_id names
		 * "id", a path's or a create's) */
		if (!px_valid_sandbox_id(ids[i], strlen(ids[i]))) {
			char shown[64];

			api_reply_error(r, 400, NULL, "ids", "item %zu is not a "
			    "valid sandbox id: '%s' (1-%d lower-case letters, "
			    "digits or '-', not starting with '-')", i,
			    api_shown(shown, sizeof(shown), ids[i]),
			    PX_SANDBOX_ID_MAX);
			goto out;
		}
		for (k = 0; k < i; k++)
			if (strcmp(ids[k], ids[i]) == 0) {
				api_reply_error(r, 400, NULL, "ids", "'%s' is given "
				    "twice", ids[i]);
				goto out;
			}
	}
	rc = px_store_sandbox_get(ctl->store, id, &src, err, sizeof(err));
	if (rc != PX_STORE_OK) {
		api_reply_store(r, rc, "id", err);
		goto out;
	}
	if (src.external || ctl->hooks.vm_fork == NULL) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a microVM "
		    "of this berthd: nothing to fork", id);
		goto out;
	}
	if (ckpt == NULL && strcmp(src.state, PX_STATE_RUNNING) != 0 &&
	    strcmp(src.state, "paused") != 0 &&
	    strcmp(src.state, PX_STATE_SUSPENDED) != 0) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: only a "
		    "running, paused or suspended sandbox can be forked", id,
		    src.state);
		goto out;
	}
	if (px_store_egress_list(ctl->store, id, egress_collect, &eg, err,
	    sizeof(err)) != PX_STORE_OK) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
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
			api_reply_error(r, 500, NULL, NULL, "%s", err);
			goto undo;
		}
		px_token_hash_hex(secret[i], strlen(secret[i]), tok.sha256);
		snprintf(tok.name, sizeof(tok.name), "sandbox %s", sb.id);
		tok.created = sb.created;
		snprintf(tokid[i], sizeof(tokid[i]), "%s", tok.id);
		if ((rc = px_store_sandbox_create(ctl->store, &sb, &tok, err,
		    sizeof(err))) != PX_STORE_OK) {
			api_reply_store(r, rc, "ids", err);
			goto undo;
		}
		for (k = 0; k < eg.n; k++)
			snprintf(eg.v[k].sandbox, sizeof(eg.v[k].sandbox), "%s",
			    sb.id);
		if (px_store_egress_replace(ctl->store, sb.id, src.egress_mode,
		    eg.v, eg.n, err, sizeof(err)) != PX_STORE_OK) {
			stored++;
			api_reply_error(r, 500, NULL, NULL, "%s", err);
			goto undo;
		}
	}
	if ((rc = ctl->hooks.vm_fork(id, ids, n, ckpt, err, sizeof(err),
	    ctl->hooks.arg)) != 0) {
		if (rc == -2)
			api_reply_error(r, 404, NULL, "checkpoint", "sandbox '%s' has "
			    "no checkpoint '%s'", id, ckpt);
		else
			api_reply_error(r, 409, NULL, NULL, "cannot fork sandbox "
			    "'%s': %s", id, err);
		goto undo;
	}
	api_routes_changed(ctl);
	doc = json_pack("{s:s, s:[]}", "source", id, "forks");
	if (ckpt != NULL)
		json_object_set_new(doc, "checkpoint", json_string(ckpt));
	list = json_object_get(doc, "forks");
	for (i = 0; i < n; i++)
		json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s}",
		    "id", ids[i], "state", PX_STATE_CREATING, "token",
		    secret[i], "token_id", tokid[i]));
	api_reply_json(r, 201, doc);
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
		api_reply_store(r, rc, NULL, err);
		return -1;
	}
	if (sb->external || ctl->hooks.vm_checkpoint == NULL) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is not a microVM "
		    "of this berthd: it has no %s", id, what);
		return -1;
	}
	return 0;
}

/* GET /v1/sandboxes/{id}/checkpoints: {"sandbox", "checkpoints": [{name,
 * created, size_bytes}]}, oldest first. */
void
api_checkpoint_list(struct req *r)
{
	const char *id = r->id;
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
		api_reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	doc = json_pack("{s:s, s:[]}", "sandbox", id, "checkpoints");
	arr = json_object_get(doc, "checkpoints");
	for (i = 0; i < n && i < PX_CHECKPOINTS_MAX; i++) {
		json_t *k = api_checkpoint_json(id, &list[i]);

		json_object_del(k, "sandbox");
		json_array_append_new(arr, k);
	}
	api_reply_json(r, 200, doc);
}

/*
 * POST /v1/sandboxes/{id}/checkpoints {"name"}: the running, paused or
 * suspended sandbox's memory and disk kept under name (a running one
 * pauses as for a fork, a suspended one is not woken);
 * answered once taken: 201 {sandbox, name, created, size_bytes, detail}.
 * POST /v1/sandboxes/{id}/restore {"checkpoint"}: the sandbox back to
 * it, in place; answered once it runs: 200 with the sandbox.
 */
void
api_checkpoint_op(struct req *r)
{
	const char *id = r->id;
	const char *op = strcmp(r->seg[3], "restore") == 0 ?
	    "restore" : "checkpoint";
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

	if ((obj = api_body_object(r, is_take ? take : restore, 0)) == NULL)
		return;
	name = json_string_value(json_object_get(obj, is_take ? "name" :
	    "checkpoint"));
	if (api_check_checkpoint_name(r, is_take ? "name" : "checkpoint",
	    name) < 0 || vm_sandbox_get(r, id, &sb, "checkpoints") < 0)
		goto out;
	if (is_take && strcmp(sb.state, PX_STATE_RUNNING) != 0 &&
	    strcmp(sb.state, "paused") != 0 &&
	    strcmp(sb.state, PX_STATE_SUSPENDED) != 0) {
		api_reply_error(r, 409, NULL, NULL, "sandbox '%s' is %s: only a "
		    "running, paused or suspended sandbox can be "
		    "checkpointed", id, sb.state);
		goto out;
	}
	if ((p = api_pending_new(r, id, op)) == NULL)
		goto out;
	snprintf(p->name, sizeof(p->name), "%s", name);
	rc = ctl->hooks.vm_checkpoint(id, op, name, api_lifecycle_done, p, err,
	    sizeof(err), ctl->hooks.arg);
	if (rc != 0) {
		api_pending_drop(r, p);
		api_record_event(ctl, id, op, "refused", err, -1);
		if (rc == -2)
			api_reply_error(r, 404, NULL, "checkpoint", "sandbox '%s' has "
			    "no checkpoint '%s'", id, name);
		else if (rc == -3)
			api_reply_error(r, 409, NULL, "name", "sandbox '%s' has a "
			    "checkpoint '%s' already", id, name);
		else if (rc == -5)
			api_reply_capacity(r, "%s of sandbox '%s' refused: %s",
			    op, id, err);
		else
			api_reply_error(r, 409, NULL, NULL, "%s of sandbox '%s': %s",
			    op, id, err);
	}
out:
	json_decref(obj);
}

/* DELETE /v1/sandboxes/{id}/checkpoints/{name}: 204; the layers only it
 * kept go. */
void
api_checkpoint_rm(struct req *r)
{
	const char *id = r->id;
	const char *name = r->seg[4];
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	char err[256];
	int rc;

	if (api_check_checkpoint_name(r, "name", name) < 0 ||
	    vm_sandbox_get(r, id, &sb, "checkpoints") < 0)
		return;
	rc = ctl->hooks.vm_checkpoint_rm(id, name, err, sizeof(err),
	    ctl->hooks.arg);
	if (rc == -2) {
		api_reply_error(r, 404, NULL, NULL, "sandbox '%s' has no checkpoint "
		    "'%s'", id, name);
		return;
	}
	if (rc != 0) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	api_record_event(ctl, id, "checkpoint-rm", "ok", name, 0);
	api_reply_empty(r, 204);
}
