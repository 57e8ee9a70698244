/*
 * cli_token.c — netctl's token commands: create, ls, rotate, revoke.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
c_token_create(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc;
	int rc;

	if (((o->given & O_ADMIN) != 0) == (o->sandbox != NULL)) {
		fail("token create: give either --admin or --sandbox <id>");
		return EXIT_USAGE;
	}
	if (o->sandbox != NULL && check_id(o->sandbox) == -1)
		return EXIT_USAGE;
	body = o->sandbox ? json_pack("{s:s}", "sandbox", o->sandbox) :
	    json_pack("{s:b}", "admin", 1);
	if (o->name != NULL)
		json_object_set_new(body, "name", json_string(o->name));
	rc = call(o, "POST", "/v1/tokens", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("%s\n# id %s (%s); the token is shown only now\n",
		    jstr(doc, "token"), jstr(doc, "id"), o->sandbox ?
		    o->sandbox : "admin");
	json_decref(doc);
	return rc;
}

int
c_token_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[4] = { "ID", "SCOPE", "NAME", "CREATED" };
	char tbuf[32];
	json_t *doc, *k;
	size_t i;
	int rc;

	if ((rc = call_list(o, "/v1/tokens", "tokens", &doc)) != EXIT_OK ||
	    o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 4;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "tokens"), i, k) {
		row[0] = jstr(k, "id");
		row[1] = json_is_true(json_object_get(k, "admin")) ? "admin" :
		    jstr(k, "sandbox");
		row[2] = json_string_length(json_object_get(k, "name")) ?
		    jstr(k, "name") : "-";
		row[3] = jtime(k, "created", tbuf, sizeof(tbuf));
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

static int
check_token_id(const char *id)
{
	size_t i, len = strlen(id);

	for (i = 0; i < len; i++)
		if (!islower((unsigned char)id[i]) &&
		    !isdigit((unsigned char)id[i]) && id[i] != '-')
			break;
	if (len > 0 && len < 24 && i == len)
		return 0;
	fail("invalid token id '%s': see 'netctl token ls' (tok-...)", id);
	return -1;
}

int
c_token_rotate(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc, *body;
	int rc;

	if (check_token_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/tokens/%s/rotate", a[0]);
	body = json_object();	/* call() does not take it */
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("%s\n# the old secret of %s no longer works\n",
		    jstr(doc, "token"), a[0]);
	json_decref(doc);
	return rc;
}

int
c_token_revoke(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_token_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/tokens/%s", a[0]);
	snprintf(done, sizeof(done), "token %s revoked", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "id", a[0],
	    "revoked", 1));
}
