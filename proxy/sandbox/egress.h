/*
 * egress.h — berthd's parent and libnetctl: the nftables table, the
 * filtering DNS resolver and the denial log for VM-backed sandboxes,
 * kept in step with the store's egress rules, modes and global policy.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_EGRESS_H
#define BERTH_EGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

struct event_base;
struct px_store;
struct px_config;
struct json_t;

/* Turns IPv4 forwarding on, programs the table (replacing a stale one,
 * with the sandboxes running under it taken over in the same batch) and
 * starts the resolver and the denial log. -1 with err: then no VM may
 * run (fail closed). */
int px_eg_init(struct event_base *, struct px_store *, const struct px_config *,
    char *err, size_t errlen);
int px_eg_enabled(void);
/* 1 while a refused batch left the kernel behind the store (retrying). */
int px_eg_pending(void);
void px_eg_shutdown(void);
/* A sandbox's tap is up (idempotent): attach it with its rules. */
void px_eg_sandbox_up(const char *id, const char *tap, struct in_addr ip,
    struct in_addr gw, const uint8_t mac[6]);
/* Gone: nothing of it stays in the table or the resolver. */
void px_eg_sandbox_down(const char *id);
/* Rules or mode of id changed (NULL: the global policy). Control hook. */
void px_eg_changed(const char *id, void *arg);
/* berth.conf was reloaded: its policy defaults may have changed the
 * per-sandbox limits; the table follows when they did. */
void px_eg_reload(void);
/* Recent denials of id as a JSON array (control hook), attributed by the
 * tap a packet came in on (or, for a reply into a sandbox, went out on),
 * whatever address it claims; denials over the log rates are counted in
 * "suppressed" entries. */
int px_eg_log(const char *id, struct json_t **out, void *arg);
/* Denials from a tap of no known sandbox (for /metrics). */
unsigned long long px_eg_unattributed(void);

#endif
