/*
 * fleet_move.h — a sandbox moved between two hosts of a fleet (issue 33,
 * item 3), berthd's side of it (libvmm's is vmm/export.c, whose header
 * comment has the whole design). The source (px_fleet_move) suspends
 * it, lists its files, streams those the target lacks to the target's
 * fleet_api_listen over mutual TLS (the routes of api/move.c, which the
 * control helper parses), then commits with the sandbox's records; the
 * target (px_fleet_move_begin ... _commit) receives into the VMM state
 * dir's .move/ID, checks, adopts and stores it. Answered restorable, the
 * source frees its copy (api/move.c), which releases its claim in etcd:
 * the target's claim is then the one the fleet routes to.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_MOVE_H
#define BERTH_FLEET_MOVE_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct px_store;
struct json_t;

/* 1 when an HTTP request target is one of a move's fleet routes
 * (/v1/fleet/move/...): the control helper and the parent let a fleet
 * peer stream a body there and nowhere else. Pure. */
int px_fleet_move_target(const char *target, size_t len);

void px_fleet_move_init(struct event_base *, struct px_store *,
    void (*changed)(void));
/* berthd stops: what the module still holds for itself goes. */
void px_fleet_move_shutdown(void);
/* What arrived of moves never committed (a restart): removed. */
void px_fleet_move_sweep(void);

/* the control API's hooks (control.h: move, move_begin ... move_abort) */
int px_fleet_move(const char *id, const char *to,
    void (*done)(void *, int, const char *, uint64_t), void *done_arg,
    int *status,
    char *err, size_t errlen, void *arg);
struct json_t *px_fleet_move_begin(const char *host, const char *id,
    const char *body, size_t len, int *status, char *err, size_t errlen,
    void *arg);
void *px_fleet_move_spool(const char *host, const char *id, const char *name,
    uint64_t from, int *status, char *err, size_t errlen, void *arg);
int px_fleet_move_spool_write(void *h, const void *p, size_t len, int *status,
    char *err, size_t errlen);
int px_fleet_move_spool_end(void *h, int *status, char *err, size_t errlen);
void px_fleet_move_spool_abort(void *h);
struct json_t *px_fleet_move_part(const char *host, const char *id,
    const char *name, int *status, char *err, size_t errlen, void *arg);
struct json_t *px_fleet_move_commit(const char *host, const char *id,
    const char *body, size_t len, int *status, char *err, size_t errlen,
    void *arg);
void px_fleet_move_abort(const char *host, const char *id, void *arg);
struct json_t *px_fleet_move_held(const char *host, const char *id,
    void *arg);

#endif
