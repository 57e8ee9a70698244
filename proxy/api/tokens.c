/*
 * api/tokens.c — access tokens (/v1/tokens): list, create, show, rotate, revoke.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

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

	if ((rc = api_page_row(tc->pg, t->id, strcmp(t->id, tc->pg->after) > 0)))
		return rc == 1 ? 0 : rc;
	return json_array_append_new(tc->array, token_json(t)) == 0 ? 0 : 1;
}

int
api_check_token_id(struct req *r, const char *id)
{
	size_t i, n = strlen(id);

	for (i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' &&
		    id[i] <= '9') || id[i] == '-'))
			break;
	if (n > 0 && n <= PX_TOKEN_ID_MAX && i == n)
		return 0;
	api_reply_error(r, 400, NULL, "id", "not a token id (tok-...)");
	return -1;
}

void
api_token_list(struct req *r)
{
	struct page pg;
	struct tok_ctx tc;
	char err[256], sb[64];
	int rc;

	if (api_page_parse(r, &pg) == -1)
		return;
	if ((rc = api_query_get(r, "sandbox", sb, sizeof(sb))) == -1 ||
	    (rc == 1 && sb[0] != '\0' &&
	    api_check_sandbox_id(r, "sandbox", -1, sb) == -1)) {
		if (rc == -1)
			api_reply_error(r, 400, NULL, "sandbox", "not a sandbox id");
		return;
	}
	tc.pg = &pg;
	if ((tc.array = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_token_list(r->c->ctl->store, rc == 1 ? sb : NULL,
	    add_token, &tc, err, sizeof(err));
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(tc.array);
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, rc > 0 ?
		    "out of memory" : err);
		return;
	}
	api_reply_json(r, 200, api_page_doc("tokens", tc.array, &pg));
}

void
api_token_create(struct req *r)
{
	static const char *const fields[] = { "admin", "sandbox", "name", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_token t;
	const char *sb, *name;
	char err[256], secret[PX_TOKEN_LEN + 1] = "";
	json_t *obj, *adm, *doc;
	int rc;

	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	adm = json_object_get(obj, "admin");
	if (adm != NULL && !json_is_boolean(adm)) {
		api_reply_error(r, 400, NULL, "admin", "must be true or false");
		goto out;
	}
	if (api_string_field(r, obj, "sandbox", 1, &sb) < 0 ||
	    api_string_field(r, obj, "name", 0, &name) < 0)
		goto out;
	if (json_is_true(adm) == (sb != NULL)) {
		api_reply_error(r, 400, NULL, sb ? "admin" : "sandbox", "give either "
		    "\"admin\": true or \"sandbox\": \"<id>\"");
		goto out;
	}
	if (sb != NULL && api_check_sandbox_id(r, "sandbox", -1, sb) == -1)
		goto out;
	if (name != NULL && strlen(name) >= sizeof(t.name)) {
		api_reply_error(r, 400, NULL, "name", "longer than %zu bytes",
		    sizeof(t.name) - 1);
		goto out;
	}
	memset(&t, 0, sizeof(t));
	if (px_token_generate(secret, t.id, err, sizeof(err)) == -1) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
		goto out;
	}
	px_token_hash_hex(secret, strlen(secret), t.sha256);
	snprintf(t.sandbox, sizeof(t.sandbox), "%s", sb ? sb : "");
	snprintf(t.name, sizeof(t.name), "%s", name ? name : "");
	t.created = (int64_t)time(NULL);
	if ((rc = px_store_token_add(ctl->store, &t, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, "sandbox", err);
		goto out;
	}
	api_routes_changed(ctl);
	if ((doc = token_json(&t)) != NULL)
		json_object_set_new(doc, "token", json_string(secret));
	api_reply_json(r, 201, doc);
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	json_decref(obj);
}

void
api_token_show(struct req *r)
{
	const char *id = r->id;
	struct px_token t;
	char err[256];
	int rc;

	if ((rc = px_store_token_get(r->c->ctl->store, id, &t, err,
	    sizeof(err))) != PX_STORE_OK)
		api_reply_store(r, rc, NULL, err);
	else
		api_reply_json(r, 200, token_json(&t));
}

void
api_token_rotate(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	struct px_token t;
	char err[256], secret[PX_TOKEN_LEN + 1], unused[24], hex[65];
	json_t *doc;
	int rc;

	if ((rc = px_store_token_get(ctl->store, id, &t, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (px_token_generate(secret, unused, err, sizeof(err)) == -1) {
		api_reply_error(r, 500, NULL, NULL, "%s", err);
		return;
	}
	px_token_hash_hex(secret, strlen(secret), hex);
	if ((rc = px_store_token_rotate(ctl->store, id, hex, err,
	    sizeof(err))) != PX_STORE_OK) {
		OPENSSL_cleanse(secret, sizeof(secret));
		api_reply_store(r, rc, NULL, err);
		return;
	}
	api_routes_changed(ctl);
	if ((doc = token_json(&t)) != NULL)
		json_object_set_new(doc, "token", json_string(secret));
	OPENSSL_cleanse(secret, sizeof(secret));
	api_reply_json(r, 200, doc);
}

void
api_token_rm(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_token_rm(ctl->store, id, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	api_routes_changed(ctl);
	api_reply_empty(r, 204);
}
