/*
 * valid.h — validation of names and numbers that cross berth's edges:
 * sandbox ids, host names, IP literals, ports. Pure functions, no state;
 * shared by berthd, the control API and netctl.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_VALID_H
#define BERTH_VALID_H

#include <stddef.h>
#include <stdint.h>

#define PX_SANDBOX_ID_MAX 40	/* [a-z0-9][a-z0-9-]{0,39} */
#define PX_HOSTNAME_MAX 253

/* 1 if s[0..len) is a sandbox id: [a-z0-9][a-z0-9-]{0,39}. */
int px_valid_sandbox_id(const char *s, size_t len);

/*
 * 1 if s[0..len) is a DNS host name in lower case: labels of
 * [a-z0-9-], 1-63 bytes, not starting or ending with '-', total <= 253,
 * at least one label; no trailing dot.
 */
int px_valid_hostname(const char *s, size_t len);

/* 1 if s is a numeric IPv4 or IPv6 address literal (no brackets). */
int px_valid_ip(const char *s);

/*
 * 1 if the host name s is an address in disguise: an IP literal in any
 * form inet_aton or inet_pton takes ("127.1", "0x7f000001"), or a name
 * whose last label is all digits (no top-level domain is).
 */
int px_host_is_ip(const char *s);

/* 1 if s is "localhost" or a name under ".localhost" (RFC 6761: these
 * resolve to loopback). */
int px_host_is_localhost(const char *s);

/* 1 if host is strictly below suffix ("a.b.example" under "example"),
 * at a label boundary; a leading '.' on suffix is ignored. */
int px_host_under(const char *host, const char *suffix);

/* 1 if host is <name>-<id>.<domain>, name a letter then letters and
 * digits: a name under berth's domain that sandbox id may hold. */
int px_host_own_name(const char *host, const char *domain, const char *id);

/* Parses a decimal port 1-65535 from s[0..len) with no sign, no leading
 * zero and nothing else; returns the port or 0 when invalid. */
uint16_t px_parse_port(const char *s, size_t len);

#endif
