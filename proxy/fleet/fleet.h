/*
 * fleet.h — fleet mode in the parent: several berth hosts share routes
 * and placement through etcd (its v3 HTTP/JSON gateway, spoken over
 * libevent's evhttp on the parent's loop).
 *
 * Keys under the configured prefix P (default /berth):
 *   P/hosts/<host>              {"id","edge","fleet","capacity","sandboxes",
 *                               "started"} under this host's lease: it
 *                               vanishes TTL after the host stops renewing
 *   P/sandboxes/<host>/<id>     {"host","sandbox":{"id","state","ports"}}
 *                               without a lease: placement outlives the
 *                               host, so its routes can answer 503 naming
 *                               the lost host instead of 404
 *   P/sandboxes/<host>/<id>/name/<name>  {"host","sandbox","name"}: the
 *                               claim of a custom host name, made when a
 *                               port takes it
 * Each host writes only its own keys, and what the others wrote is
 * checked, not believed (fleet_view.h): a bad key is skipped and logged,
 * and an id or name two hosts claim goes to the first claim in etcd. A watch on P (and a full read every
 * TTL/3, which also reconciles this host's keys with its store) keeps the
 * view current; any change re-pushes the route table to the workers, where
 * a remote sandbox is "forward to host X's fleet listener over mutual TLS".
 * Losing etcd changes nothing local: the host serves its own sandboxes
 * from its store, keeps the last view of the others, and re-registers
 * (new lease, every key re-put) when etcd answers again.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_H
#define BERTH_FLEET_H

#include <stddef.h>
#include <jansson.h>

struct event_base;
struct px_config;

/* Starts registering and watching (asynchronously: etcd may be down).
 * edge: the edge address to publish. changed() runs whenever the view of
 * the other hosts changed (the caller re-pushes routes). -1 with err when
 * the configuration cannot work (certificates unreadable). */
int px_fleet_init(struct event_base *, const struct px_config *, const char *edge,
    void (*changed)(void), char *err, size_t errlen);
int px_fleet_enabled(void);
/* 1 if etcd answered this host's last call (the fleet's state can be
 * changed: a move may start), 0 if not or fleet mode is off. */
int px_fleet_etcd_ok(void);
/* Whether host holds a live lease in this host's view. */
int px_fleet_host_live(const char *host);
/* fleet_ttl, in ms: how long a host's lease outlives its last renewal */
unsigned px_fleet_ttl_ms(void);
/* What this host has room for beyond its sandbox count (a JSON object,
 * new each call, or NULL): published in its host value in etcd. */
struct json_t;
void px_fleet_set_room(struct json_t *(*room)(void));
/* fleet drain (issue 33): the file whose presence says this host is
 * drained (placed on no more), read now; whether it is; drain or
 * undrain it (the file written or removed, the host's value put to
 * etcd at once). -1 with err when it cannot be kept. */
void px_fleet_drain_file(const char *path);
int px_fleet_drained(void);
int px_fleet_set_drained(int on, char *err, size_t errlen);
/*
 * msg: the routes message built from this host's store. Publishes this
 * host's sandboxes (what differs from etcd) and appends the other hosts'
 * sandboxes, each with "host", "remote", "fleet" (address) and "host_up";
 * adds "fleet_host" (this host's id). An id or custom host name goes to
 * its first claim (fleet_view.h), this host's own sandboxes included:
 * one that lost is left out, or routed to the winner.
 */
void px_fleet_routes(json_t *msg);
/*
 * Sandbox id moved from host from to host to, one of them this one
 * (PX_FLEET_MOVED_MS long): the target's claim says moved_from, and wins
 * over the source's at once, everywhere; the source routes the id to the
 * target until its view has the target's claim (no 404 between its copy
 * going and that claim reaching it). Its current ports (desired) are
 * kept for that. Call before the source's copy goes.
 */
#define PX_FLEET_MOVED_MS	(60 * 1000)
void px_fleet_moved(const char *id, const char *from, const char *to);
/* {"type":"fleet","host","ca","cert","key"} for the workers: the PEM text
 * they build their mTLS contexts from. NULL when not in fleet mode. */
json_t *px_fleet_tls_msg(void);
/* For the control API: {"self","etcd":"ok"|"unreachable","hosts":[...]}
 * or {"self","sandboxes":[{"id","host","state","host_up","ports"}]}. */
json_t *px_fleet_json(const char *what);
/* SIGHUP: reads the fleet certificates again (then the caller sends
 * px_fleet_tls_msg() to the workers); other fleet settings change only on
 * restart (a warning says so). -1 with err: nothing changed. */
int px_fleet_reload(const struct px_config *, char *err, size_t errlen);
/* Appends the fleet gauges to a /metrics answer. */
struct evbuffer;
void px_fleet_metrics(struct evbuffer *out);
/* This host's id; NULL when not in fleet mode. */
const char *px_fleet_self(void);
/* 1 with its id if one of names (a fleet certificate's DNS names,
 * px_fleet_tls_peer_names) is another host of the fleet holding a live
 * lease. */
int px_fleet_peer_host(const char (*names)[33], size_t n, char *host,
    size_t hostlen);
/* 1 with the fleet_api_listen address host publishes. */
int px_fleet_host_api(const char *host, char *addr, size_t addrlen);
/* Graceful stop: revoke the lease so others see the host leave now. */
void px_fleet_stop(void);
/* 1 while the lease revoke px_fleet_stop() sent is unanswered (a TLS
 * connection may need its handshake first): berthd waits for it, a
 * moment, before it exits. */
int px_fleet_revoking(void);

#endif
