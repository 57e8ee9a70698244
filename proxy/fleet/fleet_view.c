/*
 * fleet_view.c — see fleet_view.h. Every check rebuilds what it keeps
 * from the fields it checked, so nothing a host added to its values
 * reaches the workers' route table.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_view.h"
#include "fleet_place.h"
#include "conf.h"
#include "valid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PORTS_MAX	1024	/* published ports of one sandbox, at most */

int
px_fleet_valid_host(const char *s)
{
	return px_fleet_place_name_ok(s);	/* one rule (fleet_place.c) */
}

static const char *
str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* a template's name: [a-z0-9][a-z0-9-]{0,31} (store.h) */
static int
template_name_ok(const char *s)
{
	size_t i, n;

	if (s == NULL || (n = strlen(s)) == 0 || n > 32 || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '-'))
			return 0;
	return 1;
}

#define WHY(...) do { snprintf(why, whylen, __VA_ARGS__); goto fail; } while (0)

/* A host's "room" (issue 33): only the fields placement reads, each a
 * count or a size within reason, the accelerator one of a few words; a
 * field that is not (a newer host's, a bad one) is left out, never the
 * host: its sandboxes stay routed. A new object (empty for an older
 * host). */
static json_t *
room_check(json_t *r)
{
	static const char *const nums[] = { "sandboxes", "free", "running_more",
	    "paused_more", "suspended_more", "memory_available_bytes",
	    "disk_free_bytes" };
	static const char *const accels[] = { "kvm", "tcg", "none", NULL };
	json_t *out = json_object(), *n;
	const char *a;
	size_t i;

	if (!json_is_object(r))
		return out;
	for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if ((n = json_object_get(r, nums[i])) != NULL &&
		    json_is_integer(n) && json_integer_value(n) >= 0 &&
		    json_integer_value(n) <= (1LL << 50))
			json_object_set_new(out, nums[i], json_integer(
			    json_integer_value(n)));
	/* the templates it holds: names (fleet_place.c reads them), a
	 * bad one left out */
	if ((n = json_object_get(r, "templates")) != NULL && json_is_array(n)) {
		json_t *ts = json_array(), *t;

		json_array_foreach(n, i, t)
			if (json_array_size(ts) < PX_FLEET_TEMPLATES_MAX &&
			    template_name_ok(json_string_value(t)))
				json_array_append_new(ts, json_string(
				    json_string_value(t)));
		json_object_set_new(out, "templates", ts);
	}
	if ((a = str(r, "accel")) != NULL) {
		for (i = 0; accels[i] != NULL && strcmp(a, accels[i]) != 0; i++)
			;
		if (accels[i] != NULL)
			json_object_set_new(out, "accel", json_string(a));
	}
	return out;
}

json_t *
px_fleet_check_host(const char *rest, const char *value, char *why, size_t whylen)
{
	json_t *v = json_loads(value, JSON_REJECT_DUPLICATES, NULL), *out = NULL;
	json_t *room;
	const char *id = str(v, "id"), *edge = str(v, "edge"), *fleet = str(v, "fleet");
	const char *zone, *api;
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned port;

	if (!px_fleet_valid_host(rest))
		WHY("its host part is not a fleet host id");
	if (!json_is_object(v))
		WHY("its value is not a JSON object");
	if (id == NULL || strcmp(id, rest) != 0)
		WHY("its value's \"id\" is not its key's host");
	if (fleet == NULL || strlen(fleet) >= 56 ||
	    px_parse_sockaddr(fleet, &ss, &sl, &port) != 0)
		WHY("its \"fleet\" is not ADDR:PORT");
	if (edge == NULL || strlen(edge) >= 80)
		WHY("its \"edge\" is missing or too long");
	zone = str(v, "zone");
	room = room_check(json_object_get(v, "room"));
	out = json_pack("{s:s,s:s,s:s,s:I,s:I,s:o}", "id", id, "edge", edge,
	    "fleet", fleet, "capacity", json_integer_value(json_object_get(v,
	    "capacity")), "started", json_integer_value(json_object_get(v,
	    "started")), "room", room);
	api = str(v, "api");
	if (api != NULL && strlen(api) < 56 &&
	    px_parse_sockaddr(api, &ss, &sl, &port) == 0)	/* placement's */
		json_object_set_new(out, "api", json_string(api));
	if (zone != NULL && px_fleet_valid_host(zone))	/* a label, or none */
		json_object_set_new(out, "zone", json_string(zone));
	if (json_is_true(json_object_get(v, "drained")))	/* fleet drain */
		json_object_set_new(out, "drained", json_true());
fail:
	json_decref(v);
	return out;
}

/* A custom host name sandbox id may hold: what route.c would route. */
static int
name_ok(const char *name, const char *domain, const char *id)
{
	if (strlen(name) > PX_HOSTNAME_MAX || !px_valid_hostname(name, strlen(name)) ||
	    px_host_is_ip(name))
		return 0;
	if (domain != NULL && (strcmp(name, domain) == 0 || px_host_under(name, domain)))
		return px_host_own_name(name, domain, id);
	return !px_host_is_localhost(name);
}

static int
one_of(const char *s, const char *const *set)
{
	for (; s != NULL && *set != NULL; set++)
		if (strcmp(s, *set) == 0)
			return 1;
	return 0;
}

static json_t *
check_ports(json_t *ports, const char *domain, const char *id, char *why, size_t whylen)
{
	static const char *const hh[] = { "preserve", "upstream", NULL };
	static const char *const vis[] = { "public", "private", NULL };
	json_t *out = json_array(), *p, *q;
	size_t i, j;

	if (!json_is_array(ports) || json_array_size(ports) > PORTS_MAX)
		WHY("its \"ports\" is not an array of at most %d", PORTS_MAX);
	json_array_foreach(ports, i, p) {
		json_t *pj = json_object_get(p, "port"), *hj = json_object_get(p, "host");
		json_int_t port = json_integer_value(pj);

		if (!json_is_integer(pj) || port < 1 || port > 65535)
			WHY("port %zu is not 1-65535", i);
		json_array_foreach(out, j, q)
			if (json_integer_value(json_object_get(q, "port")) == port)
				WHY("port %d is published twice", (int)port);
		if (!one_of(str(p, "host_header"), hh) || !one_of(str(p, "visibility"), vis))
			WHY("port %d: bad host_header or visibility", (int)port);
		if (!json_is_null(hj) && hj != NULL && (!json_is_string(hj) ||
		    !name_ok(json_string_value(hj), domain, id)))
			WHY("port %d: a custom host this sandbox may not hold", (int)port);
		json_array_append_new(out, json_pack("{s:I,s:s,s:s,s:s?}", "port", port,
		    "host_header", str(p, "host_header"), "visibility", str(p, "visibility"),
		    "host", json_string_value(hj)));
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

int
px_fleet_check_sandbox(const char *rest, const char *value, json_int_t rev,
    const char *domain, json_t **out, char *why, size_t whylen)
{
	static const char *const states[] = { "creating", "running", "paused",
	    "suspended", "stopped", "failed", NULL };
	const char *slash = strchr(rest, '/'), *idp, *tail;
	char host[33], id[PX_SANDBOX_ID_MAX + 1];
	json_t *v = NULL, *sb, *ports;
	size_t n;

	*out = NULL;
	if (slash == NULL || (size_t)(slash - rest) >= sizeof(host))
		WHY("its host part is not a fleet host id");
	snprintf(host, sizeof(host), "%.*s", (int)(slash - rest), rest);
	if (!px_fleet_valid_host(host))
		WHY("its host part is not a fleet host id");
	idp = slash + 1;
	tail = strchr(idp, '/');
	n = tail ? (size_t)(tail - idp) : strlen(idp);
	if (n == 0 || n > PX_SANDBOX_ID_MAX || !px_valid_sandbox_id(idp, n))
		WHY("its id part is not a sandbox id");
	snprintf(id, sizeof(id), "%.*s", (int)n, idp);
	v = json_loads(value, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(v))		/* a macro: v, not the call, in it */
		WHY("its value is not a JSON object");
	if (str(v, "host") == NULL || strcmp(str(v, "host"), host) != 0)
		WHY("its value's \"host\" is not its key's host %s", host);
	if (tail != NULL) {
		const char *name = tail + 6;

		if (strncmp(tail, "/name/", 6) != 0 || !name_ok(name, domain, id))
			WHY("neither a sandbox nor a custom host name sandbox %s may hold", id);
		if (str(v, "sandbox") == NULL || strcmp(str(v, "sandbox"), id) != 0 ||
		    str(v, "name") == NULL || strcmp(str(v, "name"), name) != 0)
			WHY("its value's \"sandbox\" or \"name\" is not its key's");
		*out = json_pack("{s:s,s:s,s:s,s:I}", "host", host, "id", id, "name", name,
		    "rev", rev);
		json_decref(v);
		return 2;
	}
	sb = json_object_get(v, "sandbox");
	if (str(sb, "id") == NULL || strcmp(str(sb, "id"), id) != 0)
		WHY("its value's sandbox id is not its key's %s", id);
	if (!one_of(str(sb, "state"), states))
		WHY("its sandbox state is not one of berth's");
	if (json_object_get(sb, "moved_from") != NULL &&
	    (str(sb, "moved_from") == NULL || !px_fleet_valid_host(str(sb,
	    "moved_from"))))
		WHY("its sandbox's moved_from is not a fleet host id");
	if ((ports = check_ports(json_object_get(sb, "ports"), domain, id, why,
	    whylen)) == NULL)
		goto fail;
	*out = json_pack("{s:s,s:{s:s,s:s,s:o},s:I}", "host", host, "sandbox", "id", id,
	    "state", str(sb, "state"), "ports", ports, "rev", rev);
	if (str(sb, "moved_from") != NULL)
		json_object_set_new(json_object_get(*out, "sandbox"), "moved_from",
		    json_string(str(sb, "moved_from")));
	json_decref(v);
	return 1;
fail:
	json_decref(v);
	return -1;
}

/*
 * Two claims of one id, e (host he, revision re) and w: 1 when e wins for
 * a move, 0 when w does, -1 when no move says. A claim that says the
 * sandbox moved from the other's host wins (the move's target holds it:
 * the source's claim goes as soon as its copy does); both saying so (a
 * move there and back), the newer.
 */
static int
moved_over(json_t *se, const char *he, json_int_t re, json_t *sw,
    const char *hw, json_int_t rw)
{
	const char *fe = str(se, "moved_from"), *fw = str(sw, "moved_from");
	int em = fe != NULL && strcmp(fe, hw) == 0;
	int wm = fw != NULL && strcmp(fw, he) == 0;

	if (em && wm)
		return re > rw;
	return em ? 1 : wm ? 0 : -1;
}

/* 1 if claim (r1, h1) came before (r2, h2): etcd's revision, and the host
 * id between two keys one transaction made (one host's, then). */
static int
before(json_int_t r1, const char *h1, json_int_t r2, const char *h2)
{
	return r1 < r2 || (r1 == r2 && strcmp(h1, h2) < 0);
}

static void
lose(json_t *lost, const char *kind, const char *what, const char *host,
    const char *id, json_int_t rev, const char *winner, json_int_t wrev)
{
	if (lost != NULL)
		json_array_append_new(lost, json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:I}",
		    "kind", kind, "what", what, "host", host, "id", id, "rev", rev,
		    "winner", winner, "winner_rev", wrev));
}

static json_int_t
rev_of(json_t *j)
{
	return json_is_integer(j) ? json_integer_value(j) : PX_FLEET_REV_NONE;
}

/* The custom host names of the winners: each to its first claim; strip
 * gets id -> {"<port index>": true} for the ports that lost theirs. */
static void
resolve_names(json_t *winners, json_t *claims, json_t *strip, json_t *lost)
{
	json_t *names = json_object(), *w, *p;
	const char *id;
	size_t i;

	json_object_foreach(winners, id, w) {
		const char *host = str(w, "host");
		json_int_t srev = json_integer_value(json_object_get(w, "rev"));

		json_array_foreach(json_object_get(json_object_get(w, "sandbox"), "ports"), i, p) {
			const char *name = str(p, "host");
			char ck[512], ix[24];
			json_int_t crev;
			json_t *cur;
			int wins;

			if (name == NULL || *name == '\0')
				continue;
			snprintf(ck, sizeof(ck), "%s/%s/%s", host, id, name);
			crev = rev_of(json_object_get(claims, ck));
			if ((cur = json_object_get(names, name)) == NULL) {
				json_object_set_new(names, name, json_pack("{s:s,s:s,s:I,s:I,s:I}",
				    "host", host, "id", id, "rev", crev, "srev", srev,
				    "port", (json_int_t)i));
				continue;
			}
			/* the name's claim, then the sandbox's, then the host id;
			 * within one sandbox the first port keeps it */
			if (strcmp(str(cur, "host"), host) == 0 && strcmp(str(cur, "id"), id) == 0)
				wins = 0;
			else if (rev_of(json_object_get(cur, "rev")) != crev)
				wins = crev < rev_of(json_object_get(cur, "rev"));
			else
				wins = before(srev, host, json_integer_value(json_object_get(cur,
				    "srev")), str(cur, "host"));
			if (!wins) {
				snprintf(ix, sizeof(ix), "%zu", i);
				if (json_object_get(strip, id) == NULL)
					json_object_set_new(strip, id, json_object());
				json_object_set_new(json_object_get(strip, id), ix, json_true());
				lose(lost, "name", name, host, id, crev, str(cur, "host"),
				    rev_of(json_object_get(cur, "rev")));
				continue;
			}
			snprintf(ix, sizeof(ix), "%lld",
			    (long long)json_integer_value(json_object_get(cur, "port")));
			if (json_object_get(strip, str(cur, "id")) == NULL)
				json_object_set_new(strip, str(cur, "id"), json_object());
			json_object_set_new(json_object_get(strip, str(cur, "id")), ix, json_true());
			lose(lost, "name", name, str(cur, "host"), str(cur, "id"),
			    rev_of(json_object_get(cur, "rev")), host, crev);
			json_object_set_new(names, name, json_pack("{s:s,s:s,s:I,s:I,s:I}",
			    "host", host, "id", id, "rev", crev, "srev", srev,
			    "port", (json_int_t)i));
		}
	}
	json_decref(names);
}

json_t *
px_fleet_resolve(json_t *view, json_t *claims, json_t *local, const char *self,
    json_t *lost)
{
	json_t *winners = json_object(), *strip = json_object(), *e, *w, *ix;
	const char *id, *key;
	char k[96];

	/* this host's sandboxes, with the revisions of their keys */
	json_object_foreach(local, id, e) {
		snprintf(k, sizeof(k), "%s/%s", self, id);
		json_object_set_new(winners, id, json_pack("{s:s,s:b,s:O,s:I}", "host", self,
		    "local", 1, "sandbox", e, "rev",
		    rev_of(json_object_get(json_object_get(view, k), "rev"))));
	}
	json_object_foreach(view, key, e) {
		const char *host = str(e, "host");
		json_int_t rev = rev_of(json_object_get(e, "rev")), wrev;

		if (host == NULL || strcmp(host, self) == 0)
			continue;	/* ours: the store says, not etcd */
		id = str(json_object_get(e, "sandbox"), "id");
		if (id == NULL)
			continue;
		if ((w = json_object_get(winners, id)) != NULL) {
			int mv;

			wrev = rev_of(json_object_get(w, "rev"));
			mv = moved_over(json_object_get(e, "sandbox"), host, rev,
			    json_object_get(w, "sandbox"), str(w, "host"), wrev);
			if (mv == 0 || (mv < 0 && !before(rev, host, wrev,
			    str(w, "host")))) {
				lose(lost, "id", id, host, id, rev, str(w, "host"), wrev);
				continue;
			}
			lose(lost, "id", id, str(w, "host"), id, wrev, host, rev);
		}
		json_object_set_new(winners, id, json_pack("{s:s,s:b,s:O,s:I}", "host", host,
		    "local", 0, "sandbox", json_object_get(e, "sandbox"), "rev", rev));
	}
	resolve_names(winners, claims, strip, lost);
	/* the names lost: off a copy of the winner's ports */
	json_object_foreach(strip, id, ix) {
		json_t *sb, *ports;
		const char *i;
		json_t *t;

		w = json_object_get(winners, id);
		sb = json_deep_copy(json_object_get(w, "sandbox"));
		ports = json_object_get(sb, "ports");
		json_object_foreach(ix, i, t)
			json_object_del(json_array_get(ports, (size_t)strtoull(i, NULL, 10)),
			    "host");
		json_object_set_new(w, "sandbox", sb);
	}
	json_decref(strip);
	return winners;
}
