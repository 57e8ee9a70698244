/*
 * wake.h — wake on request, the session layer's part: requests for a
 * paused or suspended sandbox are parked, one wake (asked of the owner
 * through env->wake) serves them all, and the owner's answer
 * (px_sess_woken, session.h) lets them go on or fail them. Per sandbox,
 * the wake's state hangs off its counters (struct px_sbstat's wake).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_WAKE_H
#define BERTH_WAKE_H

struct px_sess;
struct px_sbstat;

/* Parks s (its route names a sleeping sandbox) or answers 503 at once
 * (a wake that failed lately, too many waiting, draining). */
void px_wake_park(struct px_sess *s);
/* Takes a parked s off its list (it is freed). */
void px_wake_unpark(struct px_sess *s);
/* A parked s waited t_wake: 503. */
void px_wake_timeout(struct px_sess *s);
/* 1 if st's sandbox was woken since the last route table came. */
int px_wake_awake(const struct px_sbstat *st);
/* s's handshake (SNI) started a wake that ended before its request:
 * the request's Server-Timing says how long that wake took. */
void px_wake_sni_took(struct px_sess *s);
/* A new route table says what runs: forget who was woken. */
void px_wake_routes_changed(void);

#endif
