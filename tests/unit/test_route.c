/*
 * test_route.c — Host parsing and routing (proxy/edge/route.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "route.h"

#include <string.h>

static const char *table =
    "{\"domain\":\"berth.localhost\",\"sandboxes\":["
    "{\"id\":\"sb-1\",\"address\":\"10.0.0.2\",\"state\":\"running\",\"ports\":["
    "{\"port\":8080,\"host_header\":\"upstream\",\"visibility\":\"public\"},"
    "{\"port\":3000,\"host_header\":\"preserve\",\"visibility\":\"private\",\"host\":\"app.example.com\"}]},"
    "{\"id\":\"a\",\"address\":\"::1\",\"state\":\"paused\",\"ports\":[]}],"
    "\"tokens\":[{\"sha256\":\"8766b9cb08e6040b704f1e3ee1e186efccf2635b1d2634d6525333007e6aeae1\",\"sandbox\":\"sb-1\"},"
    "{\"sha256\":\"fd31e09e2f8a2d8b4a0abc727de9e123352c6839ac4ae08577223addfe7cc132\",\"sandbox\":null},"
    "{\"sha256\":\"8c3310fc190c0549408bbdedb46b7107da5e3db277d152c86ae5885fc7652745\",\"sandbox\":\"a\"}]}";

static enum px_route_result
look(struct px_routes *r, const char *host, struct px_route_match *m)
{
	return px_route_lookup(r, host, strlen(host), m);
}

int
main(void)
{
	struct px_route_match m;
	struct px_routes *r;
	char err[256];

	r = px_routes_from_json(table, strlen(table), err, sizeof(err));
	ok(r != NULL, "table builds");
	if (r == NULL)
		return done_testing();

	is_int(look(r, "8080-sb-1.berth.localhost", &m), PX_ROUTE_OK, "port-sandbox host");
	ok(m.port && m.port->host_upstream && m.guest_port == 8080, "route fields");
	is_str(m.sb ? m.sb->address : "", "10.0.0.2", "address");
	is_int(look(r, "8080-SB-1.Berth.LocalHost:8443", &m), PX_ROUTE_OK,
	    "case-insensitive, with port");
	is_str(m.host, "8080-sb-1.berth.localhost", "host lower-cased, port stripped");
	is_int(look(r, "3000-sb-1.berth.localhost", &m), PX_ROUTE_OK, "second port");
	ok(m.port && m.port->private_, "private");
	is_int(look(r, "9999-sb-1.berth.localhost", &m), PX_ROUTE_NO_PORT, "unpublished port");
	is_str(m.sandbox, "sb-1", "sandbox named even when the port is not");
	is_int(look(r, "80-nope.berth.localhost", &m), PX_ROUTE_NO_SANDBOX, "unknown sandbox");
	is_int(look(r, "app.example.com", &m), PX_ROUTE_OK, "custom host");
	ok(m.guest_port == 3000 && strcmp(m.sandbox, "sb-1") == 0, "custom host target");
	is_int(look(r, "other.example.com", &m), PX_ROUTE_UNKNOWN_HOST, "unknown host");
	is_int(look(r, "berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST, "bare domain");
	is_int(look(r, "x.8080-sb-1.berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST, "extra label");
	is_int(look(r, "0-sb-1.berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST, "port 0");
	is_int(look(r, "65536-sb-1.berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST, "port 65536");
	is_int(look(r, "08080-sb-1.berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST, "leading zero port");
	is_int(look(r, "8080--x.berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST, "sandbox id starting with '-'");
	is_int(look(r, "8080-sb-1.berth.localhost.", &m), PX_ROUTE_BAD_HOST, "trailing dot");
	is_int(look(r, "8080-sb_1.berth.localhost", &m), PX_ROUTE_BAD_HOST, "underscore");
	is_int(look(r, "[::1]:8443", &m), PX_ROUTE_BAD_HOST, "IP literal");
	is_int(look(r, "127.0.0.1", &m), PX_ROUTE_UNKNOWN_HOST, "IPv4 address is no route");
	is_int(look(r, "a.berth.localhost:0", &m), PX_ROUTE_BAD_HOST, "port 0 in Host");
	is_int(look(r, "a.berth.localhost:", &m), PX_ROUTE_BAD_HOST, "empty port");
	is_int(look(r, "", &m), PX_ROUTE_BAD_HOST, "empty Host");
	is_int(px_route_lookup(r, "a\0b.berth.localhost", 19, &m), PX_ROUTE_BAD_HOST, "NUL in Host");
	is_int(look(r, "1-a.berth.localhost", &m), PX_ROUTE_NO_PORT, "sandbox with no ports");

	is_int(px_route_token(r, "sb-1", "secret-a", 8), PX_TOKEN_OK, "sandbox token");
	is_int(px_route_token(r, "sb-1", "admin-tok", 9), PX_TOKEN_OK, "admin token works everywhere");
	is_int(px_route_token(r, "sb-1", "other-tok", 9), PX_TOKEN_OTHER, "another sandbox's token");
	is_int(px_route_token(r, "sb-1", "secret-b", 8), PX_TOKEN_UNKNOWN, "unknown token");
	is_int(px_route_token(r, "sb-1", "", 0), PX_TOKEN_UNKNOWN, "empty token");
	is_int(px_route_token(r, "a", "secret-a", 8), PX_TOKEN_OTHER, "sb-1's token on sandbox a");
	{
		static const char bad[] = "{\"domain\":\"d\",\"sandboxes\":"
		    "[{\"id\":\"-x\",\"address\":\"1.1.1.1\",\"ports\":[]}]}";

		struct px_routes *b = px_routes_from_json(bad, sizeof(bad) - 1, err,
		    sizeof(err));

		/* left out, not the whole table: a worker keeps serving */
		ok(b != NULL && b->nsbs == 0 && b->nskipped == 1 &&
		    strstr(b->skipped, "bad sandbox entry") != NULL,
		    "bad sandbox id left out: %s", b ? b->skipped : err);
		px_routes_unref(b);
	}
	ok(px_routes_from_json("nope", 4, err, sizeof(err)) == NULL, "bad JSON rejected");
	{
		/* custom hosts stored before the control API refused them
		 * are not routed; a sandbox's own <name>-<id> name is */
		static const char t2[] = "{\"domain\":\"berth.localhost\",\"sandboxes\":["
		    "{\"id\":\"sb-1\",\"address\":\"10.0.0.2\",\"ports\":["
		    "{\"port\":1,\"host\":\"web-sb-1.berth.localhost\"},"
		    "{\"port\":2,\"host\":\"127.0.0.1\"},"
		    "{\"port\":3,\"host\":\"localhost\"},"
		    "{\"port\":4,\"host\":\"app.localhost\"},"
		    "{\"port\":5,\"host\":\"web-a.berth.localhost\"},"
		    "{\"port\":6,\"host\":\"ok.example.com\"}]},"
		    "{\"id\":\"a\",\"address\":\"10.0.0.6\",\"ports\":[]}],\"tokens\":[]}";
		struct px_routes *r2 = px_routes_from_json(t2, sizeof(t2) - 1, err, sizeof(err));

		ok(r2 != NULL, "table with odd custom hosts builds: %s", err);
		if (r2 != NULL) {
			is_int(look(r2, "web-sb-1.berth.localhost", &m), PX_ROUTE_OK,
			    "a sandbox's own name under the domain routes");
			ok(m.guest_port == 1 && strcmp(m.sandbox, "sb-1") == 0,
			    "...to its port");
			is_int(look(r2, "127.0.0.1", &m), PX_ROUTE_UNKNOWN_HOST,
			    "a stored IP custom host is not routed");
			is_int(look(r2, "localhost", &m), PX_ROUTE_UNKNOWN_HOST,
			    "nor localhost");
			is_int(look(r2, "app.localhost", &m), PX_ROUTE_UNKNOWN_HOST,
			    "nor *.localhost");
			is_int(look(r2, "web-a.berth.localhost", &m), PX_ROUTE_UNKNOWN_HOST,
			    "nor another sandbox's name under the domain");
			is_int(look(r2, "ok.example.com", &m), PX_ROUTE_OK,
			    "a DNS name routes");
			is_int(look(r2, "1-sb-1.berth.localhost", &m), PX_ROUTE_OK,
			    "generated names still route");
			px_routes_unref(r2);
		}
	}
	px_routes_unref(r);
	return done_testing();
}
