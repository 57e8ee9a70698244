/*
 * nc_link.h — libnetctl's link side: one persistent tap device per sandbox
 * (created through /dev/net/tun), its host-side address, MAC and state set
 * over rtnetlink with libmnl, and deletion with RTM_DELLINK. No `ip`
 * command is ever run.
 *
 * Conventions as in netctl.h: nothing logs or exits; functions return 0 or
 * a negative errno value and write one line into (err, errlen). Everything
 * acts in the calling thread's network namespace.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_NC_LINK_H
#define BERTH_NC_LINK_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Create tap `ifname` (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR) and make it
 * persistent, so that a VMM opens it later by name and the device outlives
 * both berth and the VMM. owner: uid allowed to attach to it without
 * CAP_NET_ADMIN, or (uid_t)-1 for root only. An existing tap of that name
 * is reused (EEXIST is not an error: restart safety). */
int nc_link_tap_create(const char *ifname, uid_t owner, char *err,
    size_t errlen);
/* RTM_DELLINK. -ENODEV when there is no such link. */
int nc_link_delete(const char *ifname, char *err, size_t errlen);
/* 1 if the link exists, 0 if not, negative errno on failure. */
int nc_link_exists(const char *ifname, char *err, size_t errlen);
/* RTM_NEWADDR addr/plen on ifname (replace: an existing one is fine). */
int nc_link_addr_add(const char *ifname, struct in_addr addr, uint8_t plen,
    char *err, size_t errlen);
/* RTM_NEWNEIGH: a permanent neighbour entry addr -> mac on ifname
 * (replace: an existing one is fine). */
int nc_link_neigh_set(const char *ifname, struct in_addr addr,
    const uint8_t mac[6], char *err, size_t errlen);
/* RTM_NEWLINK: MAC address (NULL: leave) and IFF_UP on or off. */
int nc_link_set(const char *ifname, const uint8_t *mac, int up, char *err,
    size_t errlen);

/* The whole host side of a sandbox link in one call: tap, MAC, gateway
 * address gw/plen, up. On failure a tap this call created is removed. */
int nc_link_tap_setup(const char *ifname, uid_t owner, const uint8_t mac[6],
    struct in_addr gw, uint8_t plen, char *err, size_t errlen);

/* Deterministic, locally administered unicast MACs from a sandbox id:
 * 02:xx:xx:xx:xx:xx for the guest, fe:xx:... (same tail) for the host side
 * of its tap. */
void nc_link_mac_guest(const char *id, uint8_t mac[6]);
void nc_link_mac_host(const char *id, uint8_t mac[6]);
/* "02:ab:..." into buf (at least 18 bytes). */
char *nc_link_mac_format(const uint8_t mac[6], char *buf, size_t len);

#endif
