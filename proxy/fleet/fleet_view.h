/*
 * fleet_view.h — what this host believes of the other hosts' etcd keys.
 * Every host can write its own keys only (etcd roles), but what it
 * writes there is not to be believed: a value may name another host, an
 * id that is not one, port 0, or a sandbox id or custom host name that
 * another host holds. These pure functions (no I/O, no logging: fleet.c
 * logs what they refuse) check each key and value and decide the owner
 * of every id and custom host name:
 *
 *   - an entry is used only if its key's host part is its value's
 *     "host", its key's id its value's id, and every field is valid;
 *   - an id, or a custom host name, claimed by two hosts goes to the
 *     claim etcd created first (the lower create_revision), on every
 *     edge, this host's own included. An id's claim is its sandbox key;
 *     a name's is its own key, P/sandboxes/<host>/<id>/name/<name>, made
 *     when the name was taken (a sandbox key made long ago must not take
 *     a name given to another sandbox later).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_VIEW_H
#define BERTH_FLEET_VIEW_H

#include <stddef.h>
#include <jansson.h>

/* A claim this host has not seen in etcd yet: later than any there. */
#define PX_FLEET_REV_NONE	((json_int_t)1 << 62)

/* 1 if s is a fleet host id: 1-32 of [a-z0-9-], '-' not first or last. */
int px_fleet_valid_host(const char *s);

/*
 * A key under P/hosts/: rest is the key after "P/hosts/", value its text.
 * Returns the value to keep ({"id","edge","fleet","capacity","started"},
 * only those) or NULL with why.
 */
json_t *px_fleet_check_host(const char *rest, const char *value,
    char *why, size_t whylen);

/*
 * A key under P/sandboxes/: rest is the key after "P/sandboxes/", value
 * its text, rev its create_revision, domain berth's domain (custom host
 * names under it must be the sandbox's own). One of:
 *   1, *out = {"host","sandbox":{"id","state","ports","moved_from"?},
 *      "rev"}: a sandbox (rebuilt from the checked fields only;
 *      moved_from: the host it moved here from, lately);
 *   2, *out = {"host","id","name","rev"}: a custom host name's claim;
 *  -1 with why: not to be used.
 */
int px_fleet_check_sandbox(const char *rest, const char *value, json_int_t rev,
    const char *domain, json_t **out, char *why, size_t whylen);

/*
 * Decides the owners. view: "<host>/<id>" -> a sandbox entry as above;
 * claims: "<host>/<id>/<name>" -> its create_revision (an integer);
 * local: id -> {"id","state","ports","moved_from"?}, this host's store,
 * whose claims count with the revisions view and claims hold under self
 * (none yet: PX_FLEET_REV_NONE). An id's first claim wins, unless the
 * other says it moved from the first's host (the newer of two that say
 * so of each other). Returns id -> {"host","local":bool,"sandbox"} of
 * the winners, each sandbox's ports without the names it lost (a copy
 * when changed). Each lost claim is appended to lost (may be NULL) as
 * {"kind":"id"|"name","what","host","id","rev","winner","winner_rev"}.
 */
json_t *px_fleet_resolve(json_t *view, json_t *claims, json_t *local,
    const char *self, json_t *lost);

#endif
