/*
 * fuzz_host.c — libFuzzer target for Host parsing and routing
 * (proxy/edge/route.c) over a fixed route table.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "route.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct px_routes *table;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char json[] =
	    "{\"domain\":\"berth.localhost\",\"sandboxes\":["
	    "{\"id\":\"sb-1\",\"address\":\"10.0.0.2\",\"ports\":[{\"port\":8080},"
	    "{\"port\":3000,\"host\":\"app.example.com\",\"visibility\":\"private\"}]}],"
	    "\"tokens\":[]}";
	struct px_route_match m;
	char err[128];

	if (table == NULL &&
	    (table = px_routes_from_json(json, sizeof(json) - 1, err, sizeof(err))) == NULL)
		abort();
	if (px_route_lookup(table, (const char *)data, size, &m) == PX_ROUTE_OK &&
	    (m.sb == NULL || m.port == NULL || strlen(m.host) > size))
		abort();
	px_route_token(table, "sb-1", (const char *)data, size);
	return 0;
}
