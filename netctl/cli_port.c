/*
 * cli_port.c — netctl's port commands: publish, unpublish, ls.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
c_port_publish(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	unsigned port;
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1 || check_port(a[1], &port) == -1)
		return EXIT_USAGE;
	if ((o->given & O_PRIVATE) && (o->given & O_PUBLIC)) {
		fail("--private and --public contradict each other");
		return EXIT_USAGE;
	}
	if (o->host_header != NULL && strcmp(o->host_header, "preserve") != 0 &&
	    strcmp(o->host_header, "upstream") != 0) {
		fail("--host-header: use 'preserve' or 'upstream', not '%s'",
		    o->host_header);
		return EXIT_USAGE;
	}
	if ((o->given & O_HOST) && o->host[0] != '\0' &&
	    !px_valid_hostname(o->host, strlen(o->host))) {
		fail("--host: not a valid host name: '%s' (letters, digits, "
		    "'-' and '.', no trailing dot)", o->host);
		return EXIT_USAGE;
	}
	if ((body = json_object()) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	if (o->host_header != NULL)
		json_object_set_new(body, "host_header",
		    json_string(o->host_header));
	if (o->given & (O_PRIVATE | O_PUBLIC))
		json_object_set_new(body, "visibility", json_string(
		    (o->given & O_PRIVATE) ? "private" : "public"));
	if (o->given & O_HOST)
		json_object_set_new(body, "host", json_string(o->host));
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%u", a[0], port);
	rc = call(o, "PUT", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("%s\n", jstr(doc, "url"));
	json_decref(doc);
	return rc;
}

int
c_port_unpublish(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	unsigned port;

	if (check_id(a[0]) == -1 || check_port(a[1], &port) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%u", a[0], port);
	return delete_one(o, target, NULL, json_pack("{s:s, s:i, s:b}",
	    "sandbox", a[0], "port", (int)port, "unpublished", 1));
}

int
c_port_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	int rc;

	if (n == 1) {
		if (check_id(a[0]) == -1)
			return EXIT_USAGE;
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports", a[0]);
	} else
		snprintf(target, sizeof(target), "/v1/ports");
	if ((rc = call_list(o, target, "ports", &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	print_ports(json_object_get(doc, "ports"), 1, "");
	json_decref(doc);
	return EXIT_OK;
}
