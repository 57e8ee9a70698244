/*
 * place.c — the placement decision's cost (issue 33's target: <= 5 ms),
 * printed by `make bench-fleet`: for fleets of 3, 100 and 1000 hosts,
 * what a create through the API does before it forwards: the fleet's
 * host view as px_fleet_json("hosts") builds one per create (each host's
 * top level copied, its room shared) and px_fleet_place over it. Each host has a room, a zone of four, a few
 * templates (one in ten lacks the asked one, one in twenty is drained or
 * down). Prints one line per size: "place N p50_us p99_us max_us".
 *
 *   tests/bench/place [ROUNDS]
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static json_t *
fleet(int n)
{
	json_t *hosts = json_array();
	char id[33], zone[8];
	int i;

	for (i = 0; i < n; i++) {
		json_t *h, *ts = json_array();

		snprintf(id, sizeof(id), "host-%04d", i);
		snprintf(zone, sizeof(zone), "z%d", i % 4);
		json_array_append_new(ts, json_string("default"));
		json_array_append_new(ts, json_string(i % 10 == 3 ? "other" :
		    "debian"));
		json_array_append_new(ts, json_string("web"));
		h = json_pack("{s:s,s:s,s:b,s:I,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:o}}",
		    "id", id, "zone", zone, "up", i % 20 != 7, "sandboxes",
		    (json_int_t)(i * 7 % 50), "api", "127.0.0.1:9444", "room",
		    "sandboxes", (json_int_t)(i * 7 % 50), "running_more",
		    (json_int_t)(i * 13 % 9), "suspended_more",
		    (json_int_t)(i * 5 % 40), "memory_available_bytes",
		    (json_int_t)((i * 37 % 20000) + 1000) << 20, "disk_free_bytes",
		    (json_int_t)100 << 30, "templates", ts);
		if (i % 20 == 11)
			json_object_set_new(h, "drained", json_true());
		json_array_append_new(hosts, h);
	}
	return hosts;
}

/* what px_fleet_json("hosts") gives a create: each host's top level
 * copied (its room shared) with what the view adds */
static json_t *
view_copy(json_t *hosts)
{
	json_t *out = json_array(), *h, *c;
	size_t i;

	json_array_foreach(hosts, i, h) {
		c = json_copy(h);
		json_object_set_new(c, "self", json_boolean(i == 1));
		json_object_set_new(c, "sandboxes", json_integer((json_int_t)i));
		json_array_append_new(out, c);
	}
	return out;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	static const int sizes[] = { 3, 100, 1000 };
	int rounds = argc > 1 ? atoi(argv[1]) : 2000;
	struct px_place_err e;
	struct timespec t0, t1;
	double *us;
	size_t s;
	int i;

	if (rounds < 10)
		rounds = 10;
	if ((us = calloc((size_t)rounds, sizeof(*us))) == NULL)
		return 1;
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		json_t *view = fleet(sizes[s]);

		for (i = 0; i < rounds; i++) {
			json_t *copy, *order;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			copy = view_copy(view);
			order = px_fleet_place(copy, "host-0001", "debian", NULL,
			    NULL, &e);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			if (order == NULL) {
				fprintf(stderr, "place: %d hosts: %s\n", sizes[s],
				    e.msg);
				return 1;
			}
			json_decref(order);
			json_decref(copy);
			us[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
			    (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
		}
		qsort(us, (size_t)rounds, sizeof(*us), cmp);
		printf("place %d %.1f %.1f %.1f\n", sizes[s], us[rounds / 2],
		    us[rounds * 99 / 100], us[rounds - 1]);
		json_decref(view);
	}
	free(us);
	return 0;
}
