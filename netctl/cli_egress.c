/*
 * cli_egress.c — netctl's egress commands (a sandbox's mode and rules, its
 * log of denials) and the global policy that bounds them.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <ctype.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void
print_rules(json_t *rules)
{
	struct table t = { 0 };
	const char *row[3] = { "ACTION", "RULE", "EXPIRES" };
	char tbuf[32];
	json_t *r;
	size_t i;

	t.ncols = 3;
	table_add(&t, row);
	json_array_foreach(rules, i, r) {
		row[0] = jstr(r, "action");
		row[1] = jstr(r, "rule");
		row[2] = json_is_integer(json_object_get(r, "expires")) ?
		    jtime(r, "expires", tbuf, sizeof(tbuf)) : "never";
		table_add(&t, row);
	}
	table_print(&t);
}

int
c_egress_show(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	printf("sandbox:  %s\nmode:     %s%s\n", a[0], jstr(doc,
	    "effective_mode"), json_is_null(json_object_get(doc, "mode")) ?
	    " (global policy default)" : "");
	if (json_array_size(json_object_get(doc, "rules")) == 0)
		printf("rules:    none\n");
	else
		print_rules(json_object_get(doc, "rules"));
	json_decref(doc);
	return EXIT_OK;
}

/* egress allow|deny <id> <rule>... : one request per rule, in order. */
int
c_egress_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc, *done;
	int i, rc = EXIT_OK;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	/* --json: one document for all the rules, {"sandbox","rules"};
	 * when one is refused, its error document with the rules stored
	 * before it ("rules") */
	done = json_array();
	for (i = 1; i < n && rc == EXIT_OK; i++) {
		body = json_pack("{s:s, s:s}", "action", c->verb, "rule", a[i]);
		if (o->ttl != NULL)
			json_object_set_new(body, "ttl", json_string(o->ttl));
		rc = call(o, "POST", target, body, &doc);
		json_decref(body);
		if (rc == EXIT_OK && !o->json)
			printf("%s %s%s%s\n", jstr(doc, "action"), jstr(doc,
			    "rule"), o->ttl ? " for " : "", o->ttl ? o->ttl : "");
		if (rc == EXIT_OK && doc != NULL)
			json_array_append(done, doc);
		json_decref(doc);
	}
	if (rc == EXIT_OK)
		out_set(json_pack("{s:s, s:o}", "sandbox", a[0], "rules", done));
	else if (json_is_object(out_doc) && json_object_get(out_doc, "error"))
		json_object_set_new(out_doc, "rules", done);
	else
		json_decref(done);
	return rc;
}

int
c_egress_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[1024], enc[800];

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (strcmp(a[1], "allow") != 0 && strcmp(a[1], "deny") != 0) {
		fail("egress rm: say 'allow' or 'deny' before the rule, not "
		    "'%s'", a[1]);
		return EXIT_USAGE;
	}
	cli_pct_encode(a[2], "-._*:", enc, sizeof(enc));
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress/%s/%s", a[0],
	    a[1], enc);
	return delete_one(o, target, NULL, json_pack("{s:s, s:s, s:s, s:b}",
	    "sandbox", a[0], "action", a[1], "rule", a[2], "removed", 1));
}

int
c_egress_reset(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	snprintf(done, sizeof(done), "egress of %s reset to the global policy's "
	    "default", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "sandbox",
	    a[0], "reset", 1));
}

int
c_egress_mode(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (strcmp(a[1], "open") != 0 && strcmp(a[1], "allowlist") != 0 &&
	    strcmp(a[1], "closed") != 0 && strcmp(a[1], "default") != 0) {
		fail("egress mode: use open, allowlist, closed or default, "
		    "not '%s'", a[1]);
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	body = json_pack("{s:o}", "mode", strcmp(a[1], "default") == 0 ?
	    json_null() : json_string(a[1]));
	rc = call(o, "PUT", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("egress mode of %s: %s\n", a[0], jstr(doc,
		    "effective_mode"));
	json_decref(doc);
	return rc;
}

/* Prints the entries after seq *last (all for 0); moves *last on. */
static void
print_denials(const struct opts *o, json_t *entries, long long *last)
{
	json_t *e;
	size_t i;

	json_array_foreach(entries, i, e) {
		long long seq = json_integer_value(json_object_get(e, "seq"));
		char *line;

		if (seq != 0 && seq <= *last)
			continue;
		if ((line = json_dumps(e, JSON_COMPACT)) != NULL)
			printf("%s\n", line);
		free(line);
		if (seq > *last)
			*last = seq;
	}
	fflush(stdout);
}

int
c_egress_log(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	long long last = 0;
	int rc, follow = (o->given & O_FOLLOW) != 0;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress/log", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK ||
	    (o->json && !follow)) {
		json_decref(doc);
		return rc;
	}
	if (!json_is_true(json_object_get(doc, "available"))) {
		if (!o->json)
			printf("no denial log for %s (egress filtering is not "
			    "active for it)\n", a[0]);
		json_decref(doc);
		return follow ? EXIT_REFUSED : EXIT_OK;
	}
	/* --follow prints entries one per line, in both output modes */
	if (follow)
		out_streamed = 1;
	if (json_array_size(json_object_get(doc, "entries")) == 0 && !follow)
		printf("no denied connections\n");
	print_denials(o, json_object_get(doc, "entries"), &last);
	json_decref(doc);
	/* Follow: poll (the log keeps the last 256 entries of each
	 * sandbox, numbered) until interrupted or the sandbox is gone. */
	while (follow) {
		usleep(500000);
		if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK)
			return rc;
		print_denials(o, json_object_get(doc, "entries"), &last);
		json_decref(doc);
	}
	return EXIT_OK;
}

static void
print_policy(json_t *doc)
{
	json_t *v;
	size_t i;

	printf("default_mode: %s\nmax_mode:     %s\n", jstr(doc,
	    "default_mode"), jstr(doc, "max_mode"));
	printf("deny:        %s", json_array_size(json_object_get(doc,
	    "deny")) ? "" : " none");
	json_array_foreach(json_object_get(doc, "deny"), i, v)
		printf(" %s", json_string_value(v));
	printf("\nallow:       %s", json_array_size(json_object_get(doc,
	    "allow")) ? "" : " anything not denied");
	json_array_foreach(json_object_get(doc, "allow"), i, v)
		printf(" %s", json_string_value(v));
	printf("\npermit:      %s", json_array_size(json_object_get(doc,
	    "permit")) ? "" : " no private range");
	json_array_foreach(json_object_get(doc, "permit"), i, v)
		printf(" %s", json_string_value(v));
	printf("\nmax_rules:     %lld per sandbox\n", (long long)
	    json_integer_value(json_object_get(doc, "max_rules")));
	v = json_object_get(doc, "conn_limit");
	if (json_integer_value(v) > 0)
		printf("conn_limit:    %lld concurrent connections per "
		    "sandbox\n", (long long)json_integer_value(v));
	else
		printf("conn_limit:    none\n");
	v = json_object_get(doc, "new_conn_rate");
	if (json_integer_value(v) > 0)
		printf("new_conn_rate: %lld new connections/s per sandbox\n",
		    (long long)json_integer_value(v));
	else
		printf("new_conn_rate: none\n");
}

/*
 * A limit option: a number (0 to max), "off" (0, limits only) or
 * "default" (null: berth.conf's value). 0, or -1 after saying why.
 */
static int
limit_arg(const char *opt, const char *s, long long max, int off_ok,
    json_t **out)
{
	char *end;
	long long n;

	if (strcmp(s, "default") == 0) {
		*out = json_null();
		return 0;
	}
	if (off_ok && strcmp(s, "off") == 0) {
		*out = json_integer(0);
		return 0;
	}
	n = strtoll(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || n > max) {
		fail("%s: use a number from 0 to %lld%s or 'default' (berth.conf's), "
		    "not '%s'", opt, max, off_ok ? ", 'off'" : "", s);
		return -1;
	}
	*out = json_integer(n);
	return 0;
}

int
c_policy_show(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *doc;
	int rc;

	if ((rc = call(o, "GET", "/v1/policy", NULL, &doc)) == EXIT_OK &&
	    !o->json)
		print_policy(doc);
	json_decref(doc);
	return rc;
}

static json_t *
strings(const char *const *v, int n)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < n; i++)
		if (v[i][0] != '\0')	/* --deny '' clears the list */
			json_array_append_new(a, json_string(v[i]));
	return a;
}

int
c_policy_set(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc;
	int rc;

	static const struct {
		unsigned bit;
		const char *opt, *key;
		long long max;
		int off_ok;
	} lim[] = {
		{ O_MAX_RULES, "--max-rules", "max_rules", 1024, 0 },
		{ O_CONN_LIMIT, "--conn-limit", "conn_limit", 1000000, 1 },
		{ O_NEW_CONN_RATE, "--new-conn-rate", "new_conn_rate", 1000000,
		  1 },
	};
	const char *val[3] = { o->max_rules, o->conn_limit, o->new_conn_rate };
	json_t *v;
	size_t i;

	if (!(o->given & (O_DEFAULT_MODE | O_MAX_MODE | O_DENY | O_ALLOW |
	    O_PERMIT | O_MAX_RULES | O_CONN_LIMIT | O_NEW_CONN_RATE))) {
		fail("policy set: give at least one of --default-mode, "
		    "--max-mode, --deny, --allow, --permit, --max-rules, "
		    "--conn-limit, --new-conn-rate");
		return EXIT_USAGE;
	}
	body = json_object();
	for (i = 0; i < 3; i++) {
		if (!(o->given & lim[i].bit))
			continue;
		if (limit_arg(lim[i].opt, val[i], lim[i].max, lim[i].off_ok,
		    &v) == -1) {
			json_decref(body);
			return EXIT_USAGE;
		}
		json_object_set_new(body, lim[i].key, v);
	}
	if (o->default_mode != NULL)
		json_object_set_new(body, "default_mode",
		    json_string(o->default_mode));
	if (o->max_mode != NULL)
		json_object_set_new(body, "max_mode", json_string(o->max_mode));
	if (o->given & O_DENY)
		json_object_set_new(body, "deny", strings(o->deny, o->ndeny));
	if (o->given & O_ALLOW)
		json_object_set_new(body, "allow", strings(o->allow, o->nallow));
	if (o->given & O_PERMIT)
		json_object_set_new(body, "permit", strings(o->permit,
		    o->npermit));
	rc = call(o, "PUT", "/v1/policy", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		print_policy(doc);
	json_decref(doc);
	return rc;
}
