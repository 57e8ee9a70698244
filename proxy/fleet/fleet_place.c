/*
 * fleet_place.c — see fleet_place.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_place.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAND_MAX	256	/* hosts ranked, at most (a fleet is smaller) */

struct cand {
	const char	*id;
	json_int_t	 running_more, memory, sandboxes;
	int		 self;
};

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static json_int_t
num(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* appends to e->msg, "; " between hosts, "..." once it is full */
static void
why(struct px_place_err *e, const char *fmt, ...)
{
	size_t n = strlen(e->msg);
	va_list ap;

	if (n + 8 >= sizeof(e->msg))
		return;
	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof(e->msg) - n, fmt, ap);
	va_end(ap);
	if (strlen(e->msg) + 5 >= sizeof(e->msg))
		snprintf(e->msg + sizeof(e->msg) - 5, 5, "...");
}

static int
has_template(json_t *room, const char *tmpl)
{
	json_t *ts = json_object_get(room, "templates"), *t;
	size_t i;

	json_array_foreach(ts, i, t)
		if (json_is_string(t) && strcmp(json_string_value(t), tmpl) == 0)
			return 1;
	return 0;
}

int
px_fleet_place_name_ok(const char *s)
{
	size_t i, n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > 32)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    (s[i] == '-' && i > 0 && i < n - 1)))
			return 0;
	return 1;
}

/* 1 if a comes before b */
static int
better(const struct cand *a, const struct cand *b)
{
	int ar = a->running_more > 0, br = b->running_more > 0;

	if (ar != br)
		return ar;
	if (a->running_more != b->running_more)
		return a->running_more > b->running_more;
	if (a->memory != b->memory)
		return a->memory > b->memory;
	if (a->sandboxes != b->sandboxes)
		return a->sandboxes < b->sandboxes;
	if (a->self != b->self)
		return a->self;
	return strcmp(a->id, b->id) < 0;
}

static void
fail(struct px_place_err *e, int status, const char *code)
{
	e->status = status;
	snprintf(e->code, sizeof(e->code), "%s", code);
}

json_t *
px_fleet_place(json_t *hosts, const char *self, const char *tmpl,
    const char *host, const char *zone, struct px_place_err *e)
{
	struct cand c[CAND_MAX], t;
	size_t i, j, n = 0, known_host = 0, known_zone = 0, with_tmpl = 0;
	json_t *h, *out;
	char head[256];

	memset(e, 0, sizeof(*e));
	json_array_foreach(hosts, i, h) {
		const char *id = str(h, "id"), *z = str(h, "zone");
		json_t *room = json_object_get(h, "room");

		if (id == NULL)
			continue;
		if (host != NULL && strcmp(id, host) != 0)
			continue;
		known_host++;
		if (zone != NULL && (z == NULL || strcmp(z, zone) != 0))
			continue;
		known_zone++;
		if (!json_is_true(json_object_get(h, "up"))) {
			why(e, "%s%s: down (no fleet lease)", *e->msg ? "; " : "", id);
			continue;
		}
		if (json_is_true(json_object_get(h, "drained"))) {
			why(e, "%s%s: drained", *e->msg ? "; " : "", id);
			continue;
		}
		if ((self == NULL || strcmp(id, self) != 0) &&
		    json_object_get(h, "api") == NULL) {
			why(e, "%s%s: publishes no fleet_api_listen", *e->msg ? "; " : "",
			    id);
			continue;
		}
		if (!has_template(room, tmpl)) {
			why(e, "%s%s: no template %s", *e->msg ? "; " : "", id, tmpl);
			continue;
		}
		with_tmpl++;
		if (num(room, "running_more") == 0 && num(room, "suspended_more") == 0) {
			why(e, "%s%s: 0 more running, 0 more suspended", *e->msg ?
			    "; " : "", id);
			continue;
		}
		if (n == CAND_MAX)
			continue;
		c[n].id = id;
		c[n].running_more = num(room, "running_more");
		c[n].memory = num(room, "memory_available_bytes");
		c[n].sandboxes = num(h, "sandboxes");
		c[n].self = self != NULL && strcmp(id, self) == 0;
		n++;
	}
	if (host != NULL && known_host == 0) {
		fail(e, 404, "unknown_host");
		snprintf(e->msg, sizeof(e->msg), "no fleet host '%s' (netctl fleet "
		    "hosts lists them)", host);
		return NULL;
	}
	if (zone != NULL && known_zone == 0) {
		fail(e, 404, "unknown_zone");
		snprintf(e->msg, sizeof(e->msg), "no fleet host%s%s in zone '%s' "
		    "(fleet_zone; netctl fleet hosts lists them)", host ? " " : "",
		    host ? host : "", zone);
		return NULL;
	}
	if (n == 0) {
		if (host != NULL && known_zone == 1 && with_tmpl == 0 &&
		    strstr(e->msg, ": down") != NULL)
			fail(e, 503, "host_down");
		else
			fail(e, 507, with_tmpl == 0 ? "no_template" : "no_room");
		snprintf(head, sizeof(head), "no fleet host%s%s%s%s can take a "
		    "sandbox of template %s: ", host ? " " : "", host ? host : "",
		    zone ? " in zone " : "", zone ? zone : "", tmpl);
		if (strlen(head) + strlen(e->msg) < sizeof(e->msg)) {
			memmove(e->msg + strlen(head), e->msg, strlen(e->msg) + 1);
			memcpy(e->msg, head, strlen(head));
		}
		return NULL;
	}
	/* insertion sort: a fleet is tens of hosts */
	for (i = 1; i < n; i++) {
		t = c[i];
		for (j = i; j > 0 && better(&t, &c[j - 1]); j--)
			c[j] = c[j - 1];
		c[j] = t;
	}
	if ((out = json_array()) == NULL) {
		fail(e, 500, "internal");
		snprintf(e->msg, sizeof(e->msg), "out of memory");
		return NULL;
	}
	for (i = 0; i < n; i++)
		json_array_append_new(out, json_string(c[i].id));
	return out;
}
