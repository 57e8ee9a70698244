/*
 * nc_host.c — the host settings egress relies on, written through
 * /proc/sys of the caller's network namespace: IPv4 forwarding (guests
 * reach nothing without it), and per tap what keeps a guest to its own
 * link: strict reverse-path filtering, ARP answered and announced only
 * for the tap's own address, no proxy ARP, no redirects, and no router
 * advertisements or autoconfiguration taken from a guest. IPv6 stays
 * up on taps so that what a guest sends over it reaches table inet berth
 * and is denied and logged there, not dropped unseen.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>

#include "netctl.h"
#include "nc_nft.h"

static int
put(const char *path, const char *value, char *err, size_t errlen)
{
	size_t len = strlen(value);
	int fd, e;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, value, len) != (ssize_t)len) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return nc_errf(err, errlen, "%s: %s", path, strerror(e)), -e;
	}
	close(fd);
	return 0;
}

int
nc_host_forwarding(char *err, size_t errlen)
{
	char v[4] = "";
	FILE *f;

	/* already on: nothing to write (a read-only /proc/sys is fine) */
	if ((f = fopen("/proc/sys/net/ipv4/ip_forward", "re")) != NULL) {
		if (fgets(v, sizeof(v), f) == NULL)
			v[0] = '\0';
		fclose(f);
		if (v[0] == '1')
			return 0;
	}
	return put("/proc/sys/net/ipv4/ip_forward", "1", err, errlen);
}

int
nc_tap_harden(const char *ifname, char *err, size_t errlen)
{
	static const struct {
		const char *family, *knob, *value;
	} knobs[] = {
		{ "ipv4", "rp_filter", "1" }, { "ipv4", "arp_ignore", "1" },
		{ "ipv4", "arp_announce", "2" }, { "ipv4", "proxy_arp", "0" },
		{ "ipv4", "send_redirects", "0" },
		{ "ipv4", "accept_redirects", "0" },
		{ "ipv4", "accept_source_route", "0" },
		{ "ipv6", "accept_ra", "0" }, { "ipv6", "autoconf", "0" },
		{ "ipv6", "accept_redirects", "0" },
	};
	char path[128];
	size_t i, n = ifname != NULL ? strlen(ifname) : 0;
	int ret;

	if (n == 0 || n >= IFNAMSIZ || strchr(ifname, '/') != NULL ||
	    strcmp(ifname, ".") == 0 || strcmp(ifname, "..") == 0)
		return nc_errf(err, errlen, "interface name '%s' is not "
		    "valid", ifname ? ifname : ""), -EINVAL;
	for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s",
		    knobs[i].family, ifname, knobs[i].knob);
		/* a kernel without IPv6 has no ipv6 knobs: fine */
		if ((ret = put(path, knobs[i].value, err, errlen)) < 0 &&
		    !(ret == -ENOENT && strstr(path, "/ipv6/") != NULL))
			return ret;
	}
	return 0;
}
