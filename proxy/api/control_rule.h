/*
 * control_rule.h — egress rules and the global policy for the control
 * API. The rule language is libnetctl's (netctl/nc_rule.c, issue 5);
 * its nc_rule.o needs no libnftnl, so the control library links it from
 * libnetctl.a. On top of it: what "inside the global policy" means (rule
 * coverage and overlap, and mode order).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CONTROL_RULE_H
#define BERTH_CONTROL_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "netctl.h"	/* struct nc_rule */

#define px_rule_parse	nc_rule_parse
#define px_rule_format	nc_rule_format
#define px_rule_duration nc_duration_parse

/* 1 if every destination (address or name, port, protocol) inner allows
 * is one outer allows too. A name is covered only by itself, its "*."
 * parent or an any-address rule. */
int px_rule_covers(const struct nc_rule *outer, const struct nc_rule *inner);
/* 1 if some destination matches both (names vs addresses: never, as the
 * names' addresses are not known here). */
int px_rule_overlaps(const struct nc_rule *a, const struct nc_rule *b);

/* If every address of an address rule lies in one of the ranges the
 * table always denies unless ops permit them (private, CGNAT,
 * link-local, loopback, multicast, reserved: netctl/nc_egress.c's
 * default_deny), writes that range as text and returns 1; else 0 (any
 * rule reaching public addresses, names: 0). */
int px_rule_always_denied(const struct nc_rule *r, char *range, size_t len);

/* closed 0 < allowlist 1 < open 2; -1 for anything else. */
int px_mode_rank(const char *mode);

#endif
