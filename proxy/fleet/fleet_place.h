/*
 * fleet_place.h — placement of a new sandbox in a fleet (issue 33, item
 * 2): which hosts may take it, best first. A pure function over the
 * fleet view (px_fleet_json("hosts")'s "hosts": each host's checked
 * room and zone, fleet_view.c): no I/O, no logging, microseconds.
 *
 * A host is a candidate when it is up (holds a lease), is not drained
 * (the hook for `fleet drain`, item 4: "drained":true in its entry),
 * matches the host and zone asked for, and publishes the template in
 * its room's "templates". Of the candidates, one that can take one more
 * sandbox *running* (room.running_more > 0) comes first; then more
 * running_more, then more memory_available_bytes, then fewer sandboxes,
 * then this host (no network hop), then the host id. A host with
 * running_more 0 that could still suspend an idle sandbox to make room
 * (suspended_more > 0) stays a candidate, last: it may say 507 itself,
 * and the caller tries the next. A host with neither is full.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_PLACE_H
#define BERTH_FLEET_PLACE_H

#include <stddef.h>
#include <jansson.h>

/* templates a host publishes in its room, at most */
#define PX_FLEET_TEMPLATES_MAX	64

struct px_place_err {
	int	 status;	/* 404 unknown host or zone, 503 the host asked
				 * for is down, 507 no room */
	char	 code[32];	/* "unknown_host", "unknown_zone", "host_down",
				 * "no_template", "no_room" */
	char	 msg[1024];	/* names why, host by host */
};

/*
 * hosts: the fleet view's host array ({"id","up","zone"?,"room":{...},
 * "sandboxes","drained"?}); self: this host's id; tmpl: the template
 * ("default" when none is named); host, zone: NULL or what the create
 * asked for. Returns a new array of host ids, best first (never empty),
 * or NULL with *e filled.
 */
/* 1 if s may be a fleet host id or zone: 1-32 of [a-z0-9-], '-' not
 * first or last (fleet_view.c's rule). */
int px_fleet_place_name_ok(const char *s);

json_t *px_fleet_place(json_t *hosts, const char *self, const char *tmpl,
    const char *host, const char *zone, struct px_place_err *e);

#endif
