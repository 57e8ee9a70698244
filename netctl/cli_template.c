/*
 * cli_template.c — netctl's template commands: ls, add, build (progress
 * followed until the build ends), rm.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
c_template_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[4] = { "NAME", "SANDBOXES", "CREATED", "DIR" };
	char tbuf[32], nbuf[16];
	json_t *doc, *k;
	size_t i;
	int rc;

	if ((rc = call_list(o, "/v1/templates", "templates", &doc)) != EXIT_OK ||
	    o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 4;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "templates"), i, k) {
		row[0] = jstr(k, "name");
		snprintf(nbuf, sizeof(nbuf), "%lld", (long long)
		    json_integer_value(json_object_get(k, "sandboxes")));
		row[1] = nbuf;
		row[2] = json_is_true(json_object_get(k, "builtin")) ?
		    "(built in)" : jtime(k, "created", tbuf, sizeof(tbuf));
		row[3] = jstr(k, "dir");
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

int
c_template_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	char dir[4096];
	json_t *body, *doc;
	int rc;

	if (check_template_name(a[0]) == -1)
		return EXIT_USAGE;
	/* berthd resolves nothing relative: send an absolute path */
	if (a[1][0] != '/') {
		if (getcwd(dir, sizeof(dir)) == NULL ||
		    strlen(dir) + 1 + strlen(a[1]) >= sizeof(dir)) {
			fail("template add: cannot make '%s' an absolute path",
			    a[1]);
			return EXIT_USAGE;
		}
		strcat(dir, "/");
		strcat(dir, a[1]);
	} else
		snprintf(dir, sizeof(dir), "%s", a[1]);
	body = json_pack("{s:s, s:s}", "name", a[0], "dir", dir);
	rc = call(o, "POST", "/v1/templates", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("template %s: %s\n", jstr(doc, "name"), jstr(doc, "dir"));
	json_decref(doc);
	return rc;
}

/* POST .../build, then its progress every half second (GET ?after=N)
 * onto stderr until it ends: exit 0 built, 1 failed. */
int
c_template_build(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct timespec ts = { 0, 500 * 1000 * 1000 };
	char target[160], poll[200];
	json_int_t next = 0;
	json_t *doc, *l;
	const char *st;
	size_t i;
	int rc;

	if (check_template_name(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/templates/%s/build", a[0]);
	if ((rc = call(o, "POST", target, NULL, &doc)) != EXIT_OK)
		return rc;
	for (;;) {
		json_array_foreach(json_object_get(doc, "lines"), i, l)
			if (!o->json)
				fprintf(stderr, "%s\n", json_string_value(l));
		next = json_integer_value(json_object_get(doc, "next"));
		st = jstr(doc, "state");
		if (strcmp(st, "running") != 0)
			break;
		json_decref(doc);
		nanosleep(&ts, NULL);
		snprintf(poll, sizeof(poll), "%s?after=%lld", target,
		    (long long)next);
		if ((rc = call(o, "GET", poll, NULL, &doc)) != EXIT_OK)
			return rc;
	}
	if (strcmp(st, "ok") != 0) {
		fail("template %s: build failed: %s", a[0], jstr(doc, "reason"));
		json_decref(doc);
		return EXIT_REFUSED;
	}
	if (!o->json)
		printf("template %s: %s\n", a[0], jstr(doc, "dir"));
	json_decref(doc);
	return EXIT_OK;
}

int
c_template_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_template_name(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/templates/%s", a[0]);
	snprintf(done, sizeof(done), "template %s removed", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "name",
	    a[0], "removed", 1));
}
