/*
 * api/policy.c — the global egress policy (/v1/policy): what no sandbox's rules
 * may widen.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

/* ---- global policy ---- */

/* The policy's limits, their defaults (berth.conf) and their ranges. */
static const struct {
	const char *key;
	unsigned max;
} pol_limits[] = {
	{ "max_rules", PX_EG_MAX_RULES },
	{ "conn_limit", PX_EG_LIMIT_MAX },
	{ "new_conn_rate", PX_EG_LIMIT_MAX },
};
#define NPOL_LIMITS (sizeof(pol_limits) / sizeof(pol_limits[0]))

static unsigned
pol_limit_default(const struct px_control *ctl, size_t i)
{
	const struct px_config *c = ctl->hooks.config;

	switch (i) {
	case 0:
		return c ? c->eg_max_rules : 256;
	case 1:
		return c ? c->eg_conn_limit : 0;
	default:
		return c ? c->eg_new_conn_rate : 0;
	}
}

/* The stored policy as stored (only what ops set); NULL after replying
 * 500. */
static json_t *
policy_stored(struct req *r)
{
	char err[256], *text = NULL;
	json_t *doc = NULL;

	if (px_store_policy_get(r->c->ctl->store, &text, err, sizeof(err)) !=
	    PX_STORE_OK) {
		api_reply_error(r, 500, NULL, NULL, "state store: %s", err);
		return NULL;
	}
	if (text != NULL)
		doc = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(doc)) {
		json_decref(doc);
		doc = json_object();
	}
	return doc;
}

/* Fills in what the stored policy leaves out. */
static json_t *
policy_fill(struct px_control *ctl, json_t *doc)
{
	size_t i;

	if (json_object_get(doc, "default_mode") == NULL)
		json_object_set_new(doc, "default_mode", json_string("allowlist"));
	if (json_object_get(doc, "max_mode") == NULL)
		json_object_set_new(doc, "max_mode", json_string("open"));
	if (!json_is_array(json_object_get(doc, "deny")))
		json_object_set_new(doc, "deny", json_array());
	if (!json_is_array(json_object_get(doc, "allow")))
		json_object_set_new(doc, "allow", json_array());
	if (!json_is_array(json_object_get(doc, "permit")))
		json_object_set_new(doc, "permit", json_array());
	for (i = 0; i < NPOL_LIMITS; i++)
		if (!json_is_integer(json_object_get(doc, pol_limits[i].key)))
			json_object_set_new(doc, pol_limits[i].key, json_integer(
			    (json_int_t)pol_limit_default(ctl, i)));
	return doc;
}

/* The stored policy with defaults filled in; NULL after replying 500. */
json_t *
api_policy_load(struct req *r)
{
	json_t *doc = policy_stored(r);

	return doc != NULL ? policy_fill(r->c->ctl, doc) : NULL;
}

/*
 * Parses a rule for field (as "field" or "field[i]" in messages) and
 * writes its canonical text. 0, or -1 after replying 400.
 */
int
api_rule_arg(struct req *r, const char *field, const char *text,
    struct nc_rule *rule, char *canon, size_t size)
{
	char err[512];

	if (px_rule_parse(text, rule, err, sizeof(err)) < 0) {
		api_reply_error(r, 400, NULL, field, "%s", err);
		return -1;
	}
	if (px_rule_format(rule, canon, size) >= (int)size) {
		api_reply_error(r, 400, NULL, field, "rule too long");
		return -1;
	}
	return 0;
}

/*
 * 0 if an allow rule stays inside the policy, else -1 after replying 403
 * naming field.
 */
int
api_policy_permits(struct req *r, json_t *pol, const char *field,
    const struct nc_rule *rule, const char *canon)
{
	struct nc_rule pr;
	json_t *v, *allow = json_object_get(pol, "allow");
	char err[512], range[32];
	size_t i;
	int covered = 0;

	json_array_foreach(json_object_get(pol, "deny"), i, v) {
		if (px_rule_parse(json_string_value(v), &pr, err,
		    sizeof(err)) < 0)
			continue;
		if (px_rule_overlaps(&pr, rule)) {
			api_reply_error(r, 403, NULL, field, "allow rule '%s' "
			    "overlaps the global deny rule '%s'", canon,
			    json_string_value(v));
			return -1;
		}
	}
	/* Private and other always-denied ranges only where ops permit. */
	if (px_rule_always_denied(rule, range, sizeof(range))) {
		json_array_foreach(json_object_get(pol, "permit"), i, v)
			if (px_rule_parse(json_string_value(v), &pr, err,
			    sizeof(err)) == 0 && px_rule_covers(&pr, rule))
				covered = 1;
		if (!covered) {
			api_reply_error(r, 403, NULL, field, "allow rule '%s' names "
			    "%s, which sandboxes never reach unless the global "
			    "policy permits it (policy permit)", canon, range);
			return -1;
		}
		covered = 0;
	}
	if (json_array_size(allow) == 0)
		return 0;
	json_array_foreach(allow, i, v)
		if (px_rule_parse(json_string_value(v), &pr, err,
		    sizeof(err)) == 0 && px_rule_covers(&pr, rule))
			covered = 1;
	if (!covered) {
		api_reply_error(r, 403, NULL, field, "allow rule '%s' is outside "
		    "the global policy's allow list", canon);
		return -1;
	}
	return 0;
}

int
api_mode_permitted(struct req *r, json_t *pol, const char *field,
    const char *mode)
{
	const char *max = json_string_value(json_object_get(pol, "max_mode"));

	if (px_mode_rank(mode) <= px_mode_rank(max))
		return 0;
	api_reply_error(r, 403, NULL, field, "egress mode '%s' is wider than the "
	    "global policy's max_mode '%s'", mode, max);
	return -1;
}

/* Replaces doc[field] by canonical rules; -1 after replying 400. */
static int
rule_list_arg(struct req *r, json_t *doc, const char *field)
{
	json_t *in = json_object_get(doc, field), *out, *v;
	struct nc_rule rule;
	char canon[300], name[32];
	size_t i;

	if (in == NULL)
		return 0;
	if (!json_is_array(in)) {
		api_reply_error(r, 400, NULL, field, "must be an array of rules");
		return -1;
	}
	if ((out = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return -1;
	}
	json_array_foreach(in, i, v) {
		snprintf(name, sizeof(name), "%s[%zu]", field, i);
		if (!json_is_string(v)) {
			json_decref(out);
			api_reply_error(r, 400, NULL, name, "must be a string");
			return -1;
		}
		if (api_rule_arg(r, name, json_string_value(v), &rule, canon,
		    sizeof(canon)) == -1) {
			json_decref(out);
			return -1;
		}
		json_array_append_new(out, json_string(canon));
	}
	json_object_set_new(doc, field, out);
	return 0;
}

void
api_policy_get(struct req *r)
{
	json_t *pol = api_policy_load(r);

	if (pol != NULL)
		api_reply_json(r, 200, pol);
}

void
api_policy_put(struct req *r)
{
	static const char *const fields[] = { "default_mode", "max_mode",
	    "deny", "allow", "permit", "max_rules", "conn_limit",
	    "new_conn_rate", NULL };
	struct px_control *ctl = r->c->ctl;
	json_t *obj, *pol = NULL, *v;
	const char *key, *m;
	char err[256], buf[64], *text = NULL;
	size_t i;
	int rc;

	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	if (rule_list_arg(r, obj, "deny") == -1 ||
	    rule_list_arg(r, obj, "allow") == -1 ||
	    rule_list_arg(r, obj, "permit") == -1)
		goto out;
	json_array_foreach(json_object_get(obj, "permit"), i, v) {
		struct nc_rule pr;

		snprintf(buf, sizeof(buf), "permit[%zu]", i);
		if (px_rule_parse(json_string_value(v), &pr, err,
		    sizeof(err)) < 0 || pr.kind != NC_RULE_ADDR ||
		    pr.proto != NC_PROTO_ANY || pr.port_lo != 0 ||
		    pr.port_hi != 65535) {
			api_reply_error(r, 400, NULL, buf, "'%s': a permit is an "
			    "address range only, as in 10.1.0.0/16",
			    json_string_value(v));
			goto out;
		}
	}
	for (rc = 0; rc < 2; rc++) {
		key = rc ? "max_mode" : "default_mode";
		if (api_string_field(r, obj, key, 0, &m) < 0)
			goto out;
		if (m != NULL && px_mode_rank(m) < 0) {
			api_reply_error(r, 400, NULL, key, "must be 'open', "
			    "'allowlist' or 'closed', not '%s'",
			    api_shown(buf, sizeof(buf), m));
			goto out;
		}
	}
	for (i = 0; i < NPOL_LIMITS; i++) {
		v = json_object_get(obj, pol_limits[i].key);
		if (v == NULL || json_is_null(v))
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > (json_int_t)pol_limits[i].max) {
			api_reply_error(r, 400, NULL, pol_limits[i].key, "must be "
			    "an integer from 0 to %u%s, or null for berth.conf's "
			    "value", pol_limits[i].max, i == 0 ? "" :
			    " (0: no limit)");
			goto out;
		}
	}
	/* Only what ops set is stored: the rest keeps following the
	 * defaults (berth.conf's limits may change on reload). */
	if ((pol = policy_stored(r)) == NULL)
		goto out;
	json_object_foreach(obj, key, v) {
		if (json_is_null(v))
			json_object_del(pol, key);
		else
			json_object_set(pol, key, v);
	}
	if ((text = json_dumps(pol, JSON_COMPACT | JSON_SORT_KEYS)) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		goto out;
	}
	policy_fill(ctl, pol);
	if (px_mode_rank(json_string_value(json_object_get(pol,
	    "default_mode"))) > px_mode_rank(json_string_value(
	    json_object_get(pol, "max_mode")))) {
		api_reply_error(r, 400, NULL, "default_mode", "is wider than "
		    "max_mode");
		goto out;
	}
	if ((rc = px_store_policy_set(ctl->store, text, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		goto out;
	}
	if (ctl->hooks.egress_changed != NULL)
		ctl->hooks.egress_changed(NULL, ctl->hooks.arg);
	api_reply_json(r, 200, pol);
	pol = NULL;
out:
	free(text);
	json_decref(pol);
	json_decref(obj);
}

/* ---- max_rules: a sandbox's egress rules ---- */

struct rule_count {
	const struct px_egress_rule *e;	/* NULL: count only */
	size_t n;
	int present;
};

static int
count_rule(const struct px_egress_rule *e, void *arg)
{
	struct rule_count *rc = arg;

	rc->n++;
	if (rc->e != NULL && e->action == rc->e->action &&
	    strcmp(e->rule, rc->e->rule) == 0)
		rc->present = 1;
	return 0;
}

/*
 * 0 if sandbox id may hold n rules (or, with e, one more unless e is
 * stored already) under the policy's max_rules; else -1 after replying
 * 403 naming the limit (nothing is changed).
 */
int
api_rules_permitted(struct req *r, json_t *pol, const char *id,
    const struct px_egress_rule *e, size_t n, const char *field)
{
	struct rule_count rc = { e, 0, 0 };
	json_int_t max = json_integer_value(json_object_get(pol, "max_rules"));
	char err[256];
	int st;

	if (e == NULL) {
		if ((json_int_t)n <= max)
			return 0;
		api_reply_error(r, 403, NULL, field, "%zu egress rules for sandbox "
		    "%s: the global policy's max_rules is %lld per sandbox",
		    n, id, (long long)max);
		return -1;
	}
	if ((st = px_store_egress_list(r->c->ctl->store, id, count_rule, &rc,
	    err, sizeof(err))) != 0) {
		api_reply_store(r, st > 0 ? PX_STORE_ERR : st, NULL, err);
		return -1;
	}
	if (rc.present || (json_int_t)rc.n < max)
		return 0;
	api_reply_error(r, 403, NULL, field, "sandbox %s has %zu egress rules, "
	    "the global policy's max_rules (%lld per sandbox): remove one "
	    "first", id, rc.n, (long long)max);
	return -1;
}
