/*
 * routemsg.h — the route-table message the parent sends every worker:
 * its one definition, shared by the writer (proxy/api/ports.c,
 * px_control_routes_json; fleet.c adds other hosts' sandboxes with the
 * same names) and the reader (route.c, px_routes_build).
 *
 *   { "type": "routes", "routes": {
 *       "domain": "<domain>",
 *       "sandboxes": [ { "id", "address", "state",
 *           "ports": [ { "port": n, "host_header": "upstream"|...,
 *                        "visibility": "private"|..., "host"?: "<name>" } ],
 *           fleet only: "remote": true, "host", "fleet": "ADDR:PORT",
 *                       "host_up": bool } ],
 *       "tokens": [ { "sha256": "<64 hex>", "sandbox"?: "<id>" } ],
 *       fleet only: "fleet_hosts": [ "<host id>", ... ] } }
 *
 * The builders are inline so that both sides (berthd's proxy files and
 * the control library) take them from here without a shared object.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_ROUTEMSG_H
#define BERTH_ROUTEMSG_H

#include <jansson.h>

#define PX_RT_TYPE		"routes"	/* the message's "type" */
#define PX_RT_ROUTES		"routes"	/* the table, in the message */
#define PX_RT_DOMAIN		"domain"
#define PX_RT_SANDBOXES		"sandboxes"
#define PX_RT_TOKENS		"tokens"
#define PX_RT_FLEET_HOSTS	"fleet_hosts"
/* a sandbox */
#define PX_RT_SB_ID		"id"
#define PX_RT_SB_ADDRESS	"address"
#define PX_RT_SB_STATE		"state"
#define PX_RT_SB_PORTS		"ports"
#define PX_RT_SB_REMOTE		"remote"
#define PX_RT_SB_HOST		"host"
#define PX_RT_SB_FLEET		"fleet"
#define PX_RT_SB_HOST_UP	"host_up"
/* a published port */
#define PX_RT_PORT		"port"
#define PX_RT_PORT_HOST_HEADER	"host_header"
#define PX_RT_PORT_VISIBILITY	"visibility"
#define PX_RT_PORT_HOST		"host"		/* a custom host name */
/* a token */
#define PX_RT_TOKEN_SHA256	"sha256"
#define PX_RT_TOKEN_SANDBOX	"sandbox"	/* absent: an admin token */

/* A sandbox entry with no ports yet (px_rt_sandbox_ports to add them). */
static inline json_t *
px_rt_sandbox(const char *id, const char *address, const char *state)
{
	return json_pack("{s:s, s:s, s:s, s:[]}", PX_RT_SB_ID, id,
	    PX_RT_SB_ADDRESS, address, PX_RT_SB_STATE, state, PX_RT_SB_PORTS);
}

static inline json_t *
px_rt_sandbox_ports(json_t *sandbox)
{
	return json_object_get(sandbox, PX_RT_SB_PORTS);
}

/* host: a custom host name, or NULL. */
static inline json_t *
px_rt_port(int port, const char *host_header, const char *visibility,
    const char *host)
{
	return json_pack("{s:i, s:s, s:s, s:s?}", PX_RT_PORT, port,
	    PX_RT_PORT_HOST_HEADER, host_header,
	    PX_RT_PORT_VISIBILITY, visibility, PX_RT_PORT_HOST, host);
}

/* sandbox: the token's sandbox, or NULL for an admin token. */
static inline json_t *
px_rt_token(const char *sha256, const char *sandbox)
{
	return json_pack("{s:s, s:s?}", PX_RT_TOKEN_SHA256, sha256,
	    PX_RT_TOKEN_SANDBOX, sandbox);
}

/* The whole message; sandboxes and tokens are kept (not stolen). */
static inline json_t *
px_rt_msg(const char *domain, json_t *sandboxes, json_t *tokens)
{
	return json_pack("{s:s, s:{s:s, s:O, s:O}}", "type", PX_RT_TYPE,
	    PX_RT_ROUTES, PX_RT_DOMAIN, domain, PX_RT_SANDBOXES, sandboxes,
	    PX_RT_TOKENS, tokens);
}

#endif
