/*
 * route.h — the worker's route table: which sandbox and guest port a Host
 * names. Built from the JSON the parent pushes; replaced whole on every
 * change (readers hold a reference, so a swap never pulls a table from
 * under a request in flight).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_ROUTE_H
#define BERTH_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "valid.h"

/* Per-sandbox counters that outlive route tables. */
struct px_wake;

struct px_sbstat {
	char		 id[PX_SANDBOX_ID_MAX + 1];
	unsigned	 conns;		/* client sessions bound to it now */
	unsigned	 active;	/* requests in flight (session.c) */
	unsigned	 tokens;	/* rate cap: requests left this second */
	uint64_t	 rate_ms;	/* when tokens were last topped up */
	/* requests served through a bound connection: the idle policy's
	 * activity (a 401 or 404 keeps no sandbox awake) */
	uint64_t	 requests;
	uint64_t	 bytes_in, bytes_out;
	/* /metrics: every request whose Host named it, by status class */
	uint64_t	 m_requests, m_status[6], m_bytes_in, m_bytes_out;
	struct px_wake	*wake;		/* wake on request (wake.c); NULL: none yet */
	struct px_sbstat *next;
};

struct px_rport {
	uint16_t	 port;
	int		 host_upstream;	/* rewrite Host to localhost:<port> */
	int		 private_;
};

struct px_rsb {
	char		 id[PX_SANDBOX_ID_MAX + 1];
	char		 address[46];
	char		 state[16];
	struct px_rport	*ports;
	size_t		 nports;
	struct px_sbstat *stat;
	/* fleet: a sandbox of another host, reached through its fleet
	 * listener (mutual TLS); host_up is 0 once its lease expired */
	int		 remote, host_up;
	char		 host[33];
	char		 fleet[56];	/* ADDR:PORT of its fleet listener */
	/* while the table is built: its index in the message, and each
	 * port's there */
	size_t		 srci;
	size_t		*portsrc;
};

struct px_custom {
	char		*host;
	struct px_rsb *sb;
	struct px_rport	*port;
};

/* A token allowed on private routes: SHA-256 of the token, and the
 * sandbox it belongs to ("" for admin tokens, valid everywhere). */
struct px_rtoken {
	unsigned char	 hash[32];
	char		 sandbox[PX_SANDBOX_ID_MAX + 1];
};

struct px_routes {
	int		 refs;
	struct px_rtoken *tokens;	/* sorted by hash */
	size_t		 ntokens;
	char		*domain;
	struct px_rsb *sbs;		/* sorted by id */
	size_t		 nsbs;
	struct px_custom *customs;	/* sorted by host */
	size_t		 ncustoms;
	/* fleet mode: the other hosts holding a live lease, whose fleet
	 * certificates the fleet listener accepts */
	char		**fleet_hosts;
	size_t		 nfleet_hosts;
	/* entries left out as bad (a table is never refused for one):
	 * how many, and the first few, for the worker's log */
	unsigned	 nskipped;
	char		 skipped[256];
};

enum px_route_result {
	PX_ROUTE_OK,
	PX_ROUTE_BAD_HOST,	/* Host is not a valid host name: 400 */
	PX_ROUTE_UNKNOWN_HOST,	/* not ours: 404 */
	PX_ROUTE_NO_SANDBOX,	/* <port>-<id>.<domain>, no such id: 404 */
	PX_ROUTE_NO_PORT,	/* sandbox exists, port unpublished: 404 */
};

struct px_route_match {
	const struct px_rsb *sb;
	const struct px_rport *port;
	char		 sandbox[PX_SANDBOX_ID_MAX + 1];	/* named, even if unknown */
	uint16_t	 guest_port;
	char		 host[PX_HOSTNAME_MAX + 1];	/* lower case, no port */
};

/* Builds a table from the parent's JSON (the message's "routes" object,
 * routemsg.h). A bad entry (sandbox, port, custom host, token, fleet
 * host) is left out and counted in nskipped; NULL with err only when
 * there is no table at all (no domain or sandboxes, out of memory). */
struct px_routes *px_routes_from_json(const char *json, size_t len,
    char *err, size_t errlen);
struct json_t;
struct px_routes *px_routes_build(struct json_t *root, char *err, size_t errlen);
void px_routes_ref(struct px_routes *);
void px_routes_unref(struct px_routes *);

/*
 * Parses a Host header value (host[:port]) into m->host and, for
 * <port>-<sandbox>.<domain>, m->guest_port and m->sandbox, then looks the
 * route up; any other name (a sandbox's own <name>-<sandbox>.<domain>
 * too) is looked up among custom hosts. Strict: lower-cased DNS names
 * only, no IP literals, no trailing dot, an optional decimal port.
 * Custom hosts that are addresses or loopback names are never routed.
 */
enum px_route_result px_route_lookup(const struct px_routes *, const char *host,
    size_t len, struct px_route_match *m);

enum px_token_result {
	PX_TOKEN_UNKNOWN,	/* 401 */
	PX_TOKEN_OTHER,		/* a valid token of another sandbox: 403 */
	PX_TOKEN_OK,
};

/* Checks token[0..len) for sandbox: hashes it and looks the hash up. */
enum px_token_result px_route_token(const struct px_routes *, const char *sandbox,
    const char *token, size_t len);

/* 1 if peer (an X509 *) names one of r's live fleet hosts; its id goes
 * to host (room for 33). */
int px_route_fleet_peer(const struct px_routes *r, const void *peer,
    char *host, size_t hostlen);

/* Per-sandbox counters: found or made. */
struct px_sbstat *px_sbstat_get(const char *id);
struct px_sbstat *px_sbstat_first(void);

#endif
