/*
 * nc_link.c — tap devices for sandboxes: created through /dev/net/tun and
 * made persistent (the VMM opens them by name, and a berthd restart must
 * not take a running guest's network away), configured and removed over
 * rtnetlink with libmnl. Each request is sent with NLM_F_ACK and its ack
 * read back synchronously: rtnetlink answers at once, so this never waits
 * on anything but the kernel.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "nc_link.h"

static int
lk_err(char *err, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
lk_err(char *err, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int
lk_name_ok(const char *ifname, char *err, size_t errlen)
{
	size_t n = ifname != NULL ? strlen(ifname) : 0;

	if (n == 0 || n >= IFNAMSIZ || strchr(ifname, '/') != NULL ||
	    strchr(ifname, ' ') != NULL)
		return lk_err(err, errlen, -EINVAL,
		    "bad interface name '%s' (1-%d characters, no '/' or space)",
		    ifname != NULL ? ifname : "", IFNAMSIZ - 1);
	return 0;
}

/* Send one request and read its ack (0 or the kernel's -errno). */
static int
lk_talk(struct nlmsghdr *nlh, const char *what, char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	unsigned int seq, portid;
	int one = 1, rc, n;

	nl = mnl_socket_open(NETLINK_ROUTE);
	if (nl == NULL)
		return lk_err(err, errlen, -errno, "%s: netlink socket: %s",
		    what, strerror(errno));
	(void)mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof(one));
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = -errno;
		mnl_socket_close(nl);
		return lk_err(err, errlen, rc, "%s: netlink bind: %s", what,
		    strerror(-rc));
	}
	portid = mnl_socket_get_portid(nl);
	seq = (unsigned int)time(NULL);
	nlh->nlmsg_seq = seq;
	nlh->nlmsg_flags |= NLM_F_ACK;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		rc = -errno;
		mnl_socket_close(nl);
		return lk_err(err, errlen, rc, "%s: netlink send: %s", what,
		    strerror(-rc));
	}
	rc = 0;
	for (;;) {
		n = (int)mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0) {
			rc = lk_err(err, errlen, -errno, "%s: netlink receive: %s",
			    what, strerror(errno));
			break;
		}
		n = mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL);
		if (n == MNL_CB_STOP)
			break;
		if (n < 0) {
			rc = lk_err(err, errlen, -errno, "%s: %s", what,
			    strerror(errno));
			break;
		}
	}
	mnl_socket_close(nl);
	return rc;
}

static int
lk_index(const char *ifname, const char *what, char *err, size_t errlen)
{
	unsigned int idx = if_nametoindex(ifname);

	if (idx == 0)
		return lk_err(err, errlen, errno == ENODEV ? -ENODEV : -errno,
		    "%s: no interface %s: %s", what, ifname, strerror(errno));
	return (int)idx;
}

int
nc_link_tap_create(const char *ifname, uid_t owner, char *err, size_t errlen)
{
	struct ifreq ifr;
	int fd, rc;

	if ((rc = lk_name_ok(ifname, err, errlen)) < 0)
		return rc;
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return lk_err(err, errlen, -errno, "tap %s: /dev/net/tun: %s",
		    ifname, strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		rc = -errno;
		close(fd);
		/* EBUSY: a tap of this name is attached to a running VMM;
		 * it is ours from a previous berthd (restart safety). */
		if (rc == -EBUSY && nc_link_exists(ifname, NULL, 0) == 1)
			return 0;
		return lk_err(err, errlen, rc, "tap %s: TUNSETIFF: %s", ifname,
		    strerror(-rc));
	}
	if (owner != (uid_t)-1 && ioctl(fd, TUNSETOWNER, (unsigned long)owner) < 0) {
		rc = -errno;
		close(fd);
		return lk_err(err, errlen, rc, "tap %s: TUNSETOWNER %u: %s",
		    ifname, (unsigned)owner, strerror(-rc));
	}
	if (ioctl(fd, TUNSETPERSIST, 1UL) < 0) {
		rc = -errno;
		close(fd);
		return lk_err(err, errlen, rc, "tap %s: TUNSETPERSIST: %s", ifname,
		    strerror(-rc));
	}
	close(fd);
	return 0;
}

int
nc_link_exists(const char *ifname, char *err, size_t errlen)
{
	int rc;

	if ((rc = lk_name_ok(ifname, err, errlen)) < 0)
		return rc;
	if (if_nametoindex(ifname) != 0)
		return 1;
	if (errno == ENODEV || errno == ENXIO)
		return 0;
	return lk_err(err, errlen, -errno, "link %s: %s", ifname,
	    strerror(errno));
}

int
nc_link_delete(const char *ifname, char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	char what[64];
	int idx, rc;

	if ((rc = lk_name_ok(ifname, err, errlen)) < 0)
		return rc;
	snprintf(what, sizeof(what), "delete link %s", ifname);
	if ((idx = lk_index(ifname, what, err, errlen)) < 0)
		return idx;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_DELLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = idx;
	return lk_talk(nlh, what, err, errlen);
}

int
nc_link_addr_add(const char *ifname, struct in_addr addr, uint8_t plen,
    char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], a[INET_ADDRSTRLEN], what[96];
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	struct in_addr brd;
	int idx, rc;

	if ((rc = lk_name_ok(ifname, err, errlen)) < 0)
		return rc;
	if (plen > 32)
		return lk_err(err, errlen, -EINVAL, "prefix /%u out of range",
		    plen);
	inet_ntop(AF_INET, &addr, a, sizeof(a));
	snprintf(what, sizeof(what), "address %s/%u on %s", a, plen, ifname);
	if ((idx = lk_index(ifname, what, err, errlen)) < 0)
		return idx;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)idx;
	mnl_attr_put(nlh, IFA_LOCAL, sizeof(addr), &addr);
	mnl_attr_put(nlh, IFA_ADDRESS, sizeof(addr), &addr);
	if (plen < 31) {
		uint32_t mask = plen == 0 ? 0 : htonl(~0U << (32 - plen));

		brd.s_addr = addr.s_addr | ~mask;
		mnl_attr_put(nlh, IFA_BROADCAST, sizeof(brd), &brd);
	}
	return lk_talk(nlh, what, err, errlen);
}

int
nc_link_neigh_set(const char *ifname, struct in_addr addr,
    const uint8_t mac[6], char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], a[INET_ADDRSTRLEN], what[96];
	struct nlmsghdr *nlh;
	struct ndmsg *nd;
	int idx, rc;

	if ((rc = lk_name_ok(ifname, err, errlen)) < 0)
		return rc;
	inet_ntop(AF_INET, &addr, a, sizeof(a));
	snprintf(what, sizeof(what), "neighbour %s on %s", a, ifname);
	if ((idx = lk_index(ifname, what, err, errlen)) < 0)
		return idx;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWNEIGH;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
	nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
	nd->ndm_family = AF_INET;
	nd->ndm_ifindex = idx;
	nd->ndm_state = NUD_PERMANENT;
	nd->ndm_type = RTN_UNICAST;
	mnl_attr_put(nlh, NDA_DST, sizeof(addr), &addr);
	mnl_attr_put(nlh, NDA_LLADDR, 6, mac);
	return lk_talk(nlh, what, err, errlen);
}

int
nc_link_set(const char *ifname, const uint8_t *mac, int up, char *err,
    size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], what[64];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	int idx, rc;

	if ((rc = lk_name_ok(ifname, err, errlen)) < 0)
		return rc;
	snprintf(what, sizeof(what), "set link %s", ifname);
	if ((idx = lk_index(ifname, what, err, errlen)) < 0)
		return idx;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = idx;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = up ? IFF_UP : 0;
	if (mac != NULL)
		mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
	return lk_talk(nlh, what, err, errlen);
}

int
nc_link_tap_setup(const char *ifname, uid_t owner, const uint8_t mac[6],
    struct in_addr gw, uint8_t plen, char *err, size_t errlen)
{
	int existed, rc;

	if ((existed = nc_link_exists(ifname, err, errlen)) < 0)
		return existed;
	if ((rc = nc_link_tap_create(ifname, owner, err, errlen)) < 0)
		return rc;
	if ((rc = nc_link_set(ifname, mac, 1, err, errlen)) < 0 ||
	    (rc = nc_link_addr_add(ifname, gw, plen, err, errlen)) < 0) {
		if (!existed)
			(void)nc_link_delete(ifname, NULL, 0);
		return rc;
	}
	return 0;
}

/* FNV-1a, 64 bit: stable across hosts and versions, which is all a MAC
 * derivation needs (collisions only matter within one host's /16 pool,
 * and the tap's L2 segment holds exactly one guest anyway). */
static uint64_t
lk_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static void
lk_mac(const char *id, uint8_t first, uint8_t mac[6])
{
	uint64_t h = lk_hash(id != NULL ? id : "");
	int i;

	mac[0] = first;
	for (i = 1; i < 6; i++)
		mac[i] = (uint8_t)(h >> (8 * (i - 1)));
}

void
nc_link_mac_guest(const char *id, uint8_t mac[6])
{
	lk_mac(id, 0x02, mac);
}

void
nc_link_mac_host(const char *id, uint8_t mac[6])
{
	lk_mac(id, 0xfe, mac);
}

char *
nc_link_mac_format(const uint8_t mac[6], char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1],
	    mac[2], mac[3], mac[4], mac[5]);
	return buf;
}
