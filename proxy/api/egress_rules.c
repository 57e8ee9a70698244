/*
 * api/egress_rules.c — a sandbox's egress rules (/v1/sandboxes/ID/egress) and its
 * denial log.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

/* ---- egress ---- */

static json_t *
egress_rule_json(const struct px_egress_rule *e)
{
	json_t *o = json_pack("{s:s, s:s}", "action",
	    px_egress_action_name(e->action), "rule", e->rule);

	if (o != NULL)
		json_object_set_new(o, "expires", e->expires ?
		    json_integer((json_int_t)e->expires) : json_null());
	return o;
}

static int
add_egress_rule(const struct px_egress_rule *e, void *arg)
{
	return json_array_append_new(arg, egress_rule_json(e)) == 0 ? 0 : 1;
}

static void
egress_show(struct req *r, const char *id)
{
	struct px_control *ctl = r->c->ctl;
	struct px_sandbox sb;
	json_t *rules, *pol;
	char err[256];
	int rc;

	if ((rc = px_store_sandbox_get(ctl->store, id, &sb, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if ((pol = api_policy_load(r)) == NULL)
		return;
	if ((rules = json_array()) == NULL) {
		json_decref(pol);
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_egress_list(ctl->store, id, add_egress_rule, rules, err,
	    sizeof(err));
	if (rc != 0) {
		json_decref(rules);
		json_decref(pol);
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, rc > 0 ?
		    "out of memory" : err);
		return;
	}
	api_reply_json(r, 200, json_pack("{s:s, s:s?, s:s, s:o}", "sandbox", id,
	    "mode", sb.egress_mode[0] ? sb.egress_mode : NULL,
	    "effective_mode", sb.egress_mode[0] ? sb.egress_mode :
	    json_string_value(json_object_get(pol, "default_mode")),
	    "rules", rules));
	json_decref(pol);
}

void
api_egress_get(struct req *r)
{
	egress_show(r, r->id);
}

/*
 * Reads one {"action","rule","ttl"?} object (prefix names its fields in
 * messages) into e, checking an allow rule against the policy. 0, or -1
 * after replying.
 */
static int
egress_rule_arg(struct req *r, json_t *o, const char *prefix, json_t *pol,
    struct px_egress_rule *e)
{
	static const char *const fields[] = { "action", "rule", "ttl", NULL };
	const char *action, *text, *ttl, *key, *const *a;
	struct nc_rule rule;
	char f[48], err[512], buf[64];
	uint64_t ms;
	json_t *v;

	memset(e, 0, sizeof(*e));
	if (!json_is_object(o)) {
		api_reply_error(r, 400, NULL, prefix[0] ? prefix : NULL, "must be "
		    "an object {\"action\", \"rule\", \"ttl\"?}");
		return -1;
	}
	json_object_foreach(o, key, v) {
		for (a = fields; *a != NULL; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (*a == NULL) {
			snprintf(f, sizeof(f), "%s%s", prefix, api_shown(buf,
			    sizeof(buf), key));
			api_reply_error(r, 400, NULL, f, "unknown field '%s'", buf);
			return -1;
		}
	}
#define FIELD(name) (snprintf(f, sizeof(f), "%s%s", prefix, name), f)
	v = json_object_get(o, "action");
	if ((action = json_string_value(v)) == NULL ||
	    px_egress_action_parse(action, &e->action) == -1) {
		api_reply_error(r, 400, NULL, FIELD("action"), "%s", v == NULL ?
		    "required: 'allow' or 'deny'" : "must be 'allow' or 'deny'");
		return -1;
	}
	v = json_object_get(o, "rule");
	if ((text = json_string_value(v)) == NULL) {
		api_reply_error(r, 400, NULL, FIELD("rule"), "%s", v == NULL ?
		    "required, as in example.com:443/tcp" : "must be a string");
		return -1;
	}
	if (api_rule_arg(r, FIELD("rule"), text, &rule, e->rule,
	    sizeof(e->rule)) == -1)
		return -1;
	v = json_object_get(o, "ttl");
	if (v != NULL && !json_is_null(v)) {
		if ((ttl = json_string_value(v)) == NULL ||
		    px_rule_duration(ttl, &ms, err, sizeof(err)) < 0) {
			api_reply_error(r, 400, NULL, FIELD("ttl"), "%s", ttl ? err :
			    "must be a duration such as 90s, 10m, 2h or 1d");
			return -1;
		}
		e->expires = (int64_t)time(NULL) + (int64_t)((ms + 999) / 1000);
	}
	if (e->action == PX_EGRESS_ALLOW &&
	    api_policy_permits(r, pol, FIELD("rule"), &rule, e->rule) == -1)
		return -1;
#undef FIELD
	return 0;
}

void
api_egress_changed(struct px_control *ctl, const char *id)
{
	if (ctl->hooks.egress_changed != NULL)
		ctl->hooks.egress_changed(id, ctl->hooks.arg);
}

void
api_egress_add(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	struct px_egress_rule e;
	json_t *obj = NULL, *pol;
	char err[256];
	int rc, created = 0;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if ((pol = api_policy_load(r)) == NULL)
		return;
	if (r->bodylen == 0) {
		api_reply_error(r, 400, NULL, NULL, "a JSON object is required "
		    "as the request body");
		goto out;
	}
	if ((obj = json_loadb(r->body, r->bodylen, JSON_REJECT_DUPLICATES,
	    NULL)) == NULL) {
		api_reply_error(r, 400, NULL, NULL, "invalid JSON");
		goto out;
	}
	if (egress_rule_arg(r, obj, "", pol, &e) == -1)
		goto out;
	snprintf(e.sandbox, sizeof(e.sandbox), "%s", id);
	if (api_rules_permitted(r, pol, id, &e, 0, "rule") == -1)
		goto out;
	if ((rc = px_store_egress_add(ctl->store, &e, &created, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	api_egress_changed(ctl, id);
	api_reply_json(r, created ? 201 : 200, egress_rule_json(&e));
out:
	json_decref(obj);
	json_decref(pol);
}

void
api_egress_put(struct req *r)
{
	const char *id = r->id;
	static const char *const fields[] = { "mode", "rules", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_egress_rule *rules = NULL;
	json_t *obj, *pol = NULL, *arr, *v;
	const char *mode;
	char err[256], f[32], buf[64];
	size_t i, n;
	int rc, has_mode;

	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	if ((pol = api_policy_load(r)) == NULL)
		goto out;
	if ((has_mode = api_string_field(r, obj, "mode", 1, &mode)) < 0)
		goto out;
	if (mode != NULL && px_mode_rank(mode) < 0) {
		api_reply_error(r, 400, NULL, "mode", "must be 'open', 'allowlist', "
		    "'closed' or null, not '%s'", api_shown(buf, sizeof(buf), mode));
		goto out;
	}
	if (mode != NULL && api_mode_permitted(r, pol, "mode", mode) == -1)
		goto out;
	arr = json_object_get(obj, "rules");
	if (arr == NULL && has_mode) {
		/* only the mode */
		rc = px_store_egress_mode_set(ctl->store, id, mode ? mode : "",
		    err, sizeof(err));
		if (rc != PX_STORE_OK) {
			api_reply_store(r, rc, NULL, err);
			goto out;
		}
		api_egress_changed(ctl, id);
		egress_show(r, id);
		goto out;
	}
	if (!json_is_array(arr)) {
		api_reply_error(r, 400, NULL, "rules", arr == NULL ? "required (an "
		    "array; [] removes every rule), unless only \"mode\" "
		    "changes" : "must be an array");
		goto out;
	}
	n = json_array_size(arr);
	if (api_rules_permitted(r, pol, id, NULL, n, "rules") == -1)
		goto out;
	if (n > 0 && (rules = calloc(n, sizeof(*rules))) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		goto out;
	}
	json_array_foreach(arr, i, v) {
		snprintf(f, sizeof(f), "rules[%zu].", i);
		if (egress_rule_arg(r, v, f, pol, &rules[i]) == -1)
			goto out;
	}
	rc = px_store_egress_replace(ctl->store, id, has_mode ? (mode ? mode :
	    "") : NULL, rules, n, err, sizeof(err));
	if (rc != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	api_egress_changed(ctl, id);
	egress_show(r, id);
out:
	free(rules);
	json_decref(pol);
	json_decref(obj);
}

void
api_egress_reset(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	char err[256];
	int rc;

	if ((rc = px_store_egress_replace(ctl->store, id, "", NULL, 0, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	api_egress_changed(ctl, id);
	api_reply_empty(r, 204);
}

void
api_egress_rm(struct req *r)
{
	const char *id = r->id;
	const char *action = r->seg[4];
	const char *text = r->seg[5];
	struct px_control *ctl = r->c->ctl;
	enum px_egress_action a;
	struct nc_rule rule;
	char canon[300], err[256];
	int rc;

	if (px_egress_action_parse(action, &a) == -1) {
		api_reply_error(r, 400, NULL, "action", "must be 'allow' or 'deny'");
		return;
	}
	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (api_rule_arg(r, "rule", text, &rule, canon, sizeof(canon)) == -1)
		return;
	if ((rc = px_store_egress_rm(ctl->store, id, a, canon, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	api_egress_changed(ctl, id);
	api_reply_empty(r, 204);
}

void
api_egress_log(struct req *r)
{
	const char *id = r->id;
	struct px_control *ctl = r->c->ctl;
	json_t *entries = NULL;
	char err[256];
	int rc, avail = 0;

	if ((rc = px_store_sandbox_get(ctl->store, id, NULL, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.egress_log != NULL &&
	    ctl->hooks.egress_log(id, &entries, ctl->hooks.arg) == 0 &&
	    json_is_array(entries))
		avail = 1;
	if (!avail) {
		json_decref(entries);
		entries = json_array();
	}
	api_reply_json(r, 200, json_pack("{s:s, s:b, s:o}", "sandbox", id,
	    "available", avail, "entries", entries));
}
