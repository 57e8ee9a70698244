/*
 * test_fleet_place.c — placement of a new sandbox over the fleet view
 * (proxy/fleet/fleet_place.c): the order, its ties, --host, --zone, a
 * full fleet and a missing template; and that one decision takes
 * microseconds.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "fleet_place.h"

#include <string.h>
#include <time.h>

static json_t *
host(const char *id, const char *zone, int up, int running_more,
    int suspended_more, long long mem_mib, int sandboxes, const char *tmpls)
{
	json_t *h = json_pack("{s:s,s:b,s:I,s:{s:I,s:I,s:I,s:I}}", "id", id,
	    "up", up, "sandboxes", (json_int_t)sandboxes, "room", "running_more",
	    (json_int_t)running_more, "suspended_more", (json_int_t)suspended_more,
	    "memory_available_bytes", (json_int_t)mem_mib << 20, "sandboxes",
	    (json_int_t)sandboxes);
	json_t *ts = json_array();
	char buf[256], *p, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", tmpls);
	for (p = strtok_r(buf, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save))
		json_array_append_new(ts, json_string(p));
	json_object_set_new(json_object_get(h, "room"), "templates", ts);
	json_object_set_new(h, "api", json_string("127.0.0.1:9000"));
	if (zone != NULL)
		json_object_set_new(h, "zone", json_string(zone));
	return h;
}

/* the order as "a,b,c", or "ERR <status> <code>: <msg>" */
static const char *
place(json_t *hosts, const char *self, const char *tmpl, const char *h,
    const char *z)
{
	static char out[1200];
	struct px_place_err e;
	json_t *r = px_fleet_place(hosts, self, tmpl, h, z, &e), *v;
	size_t i;

	out[0] = '\0';
	if (r == NULL) {
		snprintf(out, sizeof(out), "ERR %d %s: %s", e.status, e.code, e.msg);
		return out;
	}
	json_array_foreach(r, i, v)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s",
		    i ? "," : "", json_string_value(v));
	json_decref(r);
	return out;
}

int
main(void)
{
	json_t *hs = json_array();
	const char *s;
	struct timespec t0, t1;
	struct px_place_err e;
	double us;
	int i;

	/* a: zone x, 1 more running; b: zone x, 3 more; c: zone y, 2 more */
	json_array_append_new(hs, host("a", "x", 1, 1, 4, 4096, 0, "default,minimal"));
	json_array_append_new(hs, host("b", "x", 1, 3, 4, 4096, 0, "default,minimal"));
	json_array_append_new(hs, host("c", "y", 1, 2, 4, 4096, 0, "default,minimal"));
	is_str(place(hs, "a", "minimal", NULL, NULL), "b,c,a", "most running_more first");
	is_str(place(hs, "a", "minimal", NULL, "y"), "c", "--zone y: c only");
	is_str(place(hs, "a", "minimal", NULL, "x"), "b,a", "--zone x: b then a");
	is_str(place(hs, "a", "minimal", "c", NULL), "c", "--host c");
	is_str(place(hs, "a", "minimal", "a", "x"), "a", "--host a --zone x");
	s = place(hs, "a", "minimal", "d", NULL);
	ok(strncmp(s, "ERR 404 unknown_host", 20) == 0 && strstr(s, "'d'") != NULL,
	    "unknown host: 404 naming it (%s)", s);
	s = place(hs, "a", "minimal", NULL, "z");
	ok(strncmp(s, "ERR 404 unknown_zone", 20) == 0 && strstr(s, "'z'") != NULL,
	    "unknown zone: 404 naming it (%s)", s);
	s = place(hs, "a", "minimal", "c", "x");
	ok(strncmp(s, "ERR 404 unknown_zone", 20) == 0, "host c is not in zone x (%s)", s);
	s = place(hs, "a", "debian", NULL, NULL);
	ok(strncmp(s, "ERR 507 no_template", 19) == 0 && strstr(s, "a: no template debian") &&
	    strstr(s, "c: no template debian"), "missing template: 507 naming hosts (%s)", s);
	json_decref(hs);

	/* ties: running_more, then memory, then fewest sandboxes, then self */
	hs = json_array();
	json_array_append_new(hs, host("a", NULL, 1, 2, 4, 4096, 3, "default"));
	json_array_append_new(hs, host("b", NULL, 1, 2, 4, 8192, 3, "default"));
	json_array_append_new(hs, host("c", NULL, 1, 2, 4, 8192, 1, "default"));
	json_array_append_new(hs, host("d", NULL, 1, 2, 4, 8192, 1, "default"));
	is_str(place(hs, "d", "default", NULL, NULL), "d,c,b,a",
	    "ties: memory, fewest sandboxes, then this host");
	is_str(place(hs, "a", "default", NULL, NULL), "c,d,b,a",
	    "ties without this host: by id");
	json_decref(hs);

	/* a full host (0 and 0) is left out; 0 running but room to suspend
	 * one comes last; a down or drained host never */
	hs = json_array();
	json_array_append_new(hs, host("a", NULL, 1, 0, 0, 8192, 1, "default"));
	json_array_append_new(hs, host("b", NULL, 1, 0, 2, 8192, 3, "default"));
	json_array_append_new(hs, host("c", NULL, 1, 1, 2, 1024, 9, "default"));
	json_array_append_new(hs, host("d", NULL, 0, 9, 9, 8192, 0, "default"));
	json_array_append_new(hs, host("e", NULL, 1, 9, 9, 8192, 0, "default"));
	json_object_set_new(json_array_get(hs, 4), "drained", json_true());
	is_str(place(hs, "a", "default", NULL, NULL), "c,b",
	    "full, down and drained hosts out; suspend-room last");
	s = place(hs, "a", "default", "d", NULL);
	ok(strncmp(s, "ERR 503 host_down", 17) == 0, "the host asked for is down (%s)", s);
	s = place(hs, "a", "default", "a", NULL);
	ok(strncmp(s, "ERR 507 no_room", 15) == 0 && strstr(s, "a: 0 more running") != NULL,
	    "the host asked for is full (%s)", s);
	json_object_set_new(json_object_get(json_array_get(hs, 1), "room"),
	    "suspended_more", json_integer(0));
	json_object_set_new(json_object_get(json_array_get(hs, 2), "room"),
	    "running_more", json_integer(0));
	json_object_set_new(json_object_get(json_array_get(hs, 2), "room"),
	    "suspended_more", json_integer(0));
	s = place(hs, "a", "default", NULL, NULL);
	ok(strncmp(s, "ERR 507 no_room", 15) == 0 && strstr(s, "b: 0 more running") &&
	    strstr(s, "d: down") && strstr(s, "e: drained") &&
	    strstr(s, "template default"), "a full fleet: 507 naming each host (%s)", s);
	json_decref(hs);

	/* another host that publishes no fleet_api_listen cannot be asked;
	 * this one needs none */
	hs = json_array();
	json_array_append_new(hs, host("a", NULL, 1, 1, 4, 4096, 0, "default"));
	json_array_append_new(hs, host("b", NULL, 1, 5, 4, 4096, 0, "default"));
	json_array_append_new(hs, host("c", NULL, 1, 3, 4, 4096, 0, "default"));
	json_object_del(json_array_get(hs, 0), "api");
	json_object_del(json_array_get(hs, 1), "api");
	is_str(place(hs, "a", "default", NULL, NULL), "c,a",
	    "a host without fleet_api_listen is skipped (not this one)");
	s = place(hs, "a", "default", "b", NULL);
	ok(strstr(s, "b: publishes no fleet_api_listen") != NULL, "... and named (%s)", s);
	json_decref(hs);

	/* a host without room (no VMs, or an older berth) holds no template */
	hs = json_array();
	json_array_append_new(hs, json_pack("{s:s,s:b,s:{}}", "id", "old", "up", 1, "room"));
	s = place(hs, "old", "default", NULL, NULL);
	ok(strncmp(s, "ERR 507 no_template", 19) == 0, "a host without templates (%s)", s);
	json_decref(hs);

	/* microseconds: 100 hosts, 1000 decisions */
	hs = json_array();
	for (i = 0; i < 100; i++) {
		char id[16];

		snprintf(id, sizeof(id), "h%d", i);
		json_array_append_new(hs, host(id, i % 2 ? "x" : "y", 1, i % 7, 3,
		    1024 * (i % 5), i % 11, "default,minimal,debian"));
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 1000; i++)
		json_decref(px_fleet_place(hs, "h3", "debian", NULL, NULL, &e));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / 1000;
	diag("one decision over 100 hosts: %.1f us", us);
	ok(us < 5000, "a decision over 100 hosts within 5 ms (%.1f us)", us);
	json_decref(hs);
	return done_testing();
}
