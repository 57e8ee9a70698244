/*
 * fleet_api.h — the hosts of a fleet asking each other to create a
 * sandbox (placement, issue 33): a host's control API that placed a
 * create on another host forwards it there, over mutual TLS with the
 * fleet certificates, to that host's fleet_api_listen. That listener is
 * served by the unprivileged control helper (privsep/controld.c: TLS,
 * HTTP, JSON); the parent takes from it only POST /v1/sandboxes, only
 * from a peer whose certificate names a host of the fleet holding a
 * live lease, never with a token, and hands it to the local control
 * API (which creates it here, never places it again).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_API_H
#define BERTH_FLEET_API_H

#include <stddef.h>

struct event_base;

/* what a forward or a local create answered: status 0 when no HTTP
 * answer came (err says why: refused, timed out, TLS) */
typedef void px_fleet_api_done_fn(void *arg, int status, const char *body,
    size_t len, const char *err);

/* Forwards a create (a JSON body) to host's fleet_api_listen; done is
 * called once, always later (timeout PX_FLEET_API_TIMEOUT seconds).
 * -1 with err when it cannot start (no address published). */
#define PX_FLEET_API_TIMEOUT	90
#define PX_FLEET_API_BODY_MAX	(64 * 1024)
int px_fleet_api_forward(struct event_base *, const char *host,
    const char *body, size_t len, px_fleet_api_done_fn *done, void *arg,
    char *err, size_t errlen);

#endif
