/*
 * test_nc_nflog.c — the denial-log parser without a kernel: hand-built
 * NFULNL_MSG_PACKET messages (prefix, timestamp, in-device, copied
 * packet) become struct nc_denial; foreign prefixes, short or odd
 * payloads and malformed attributes are handled safely.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <endian.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include "netctl.h"
#include "tap.h"

static struct nlmsghdr *
packet(char *buf, uint8_t family, const char *prefix, const void *pl,
    size_t pllen, int with_ts, int bad_ts)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;
	struct nfulnl_msg_packet_timestamp ts;

	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = family;
	nfg->res_id = htons(7);
	if (prefix != NULL)
		mnl_attr_put_strz(nlh, NFULA_PREFIX, prefix);
	if (with_ts) {
		ts.sec = htobe64(1700000000);
		ts.usec = htobe64(123456);
		mnl_attr_put(nlh, NFULA_TIMESTAMP, bad_ts ? 4 : sizeof(ts),
		    &ts);
	}
	mnl_attr_put_u32(nlh, NFULA_IFINDEX_INDEV, htonl(5));
	if (family == AF_INET6)
		mnl_attr_put_u32(nlh, NFULA_IFINDEX_OUTDEV, htonl(9));
	if (pl != NULL)
		mnl_attr_put(nlh, NFULA_PAYLOAD, pllen, pl);
	return nlh;
}

int
main(void)
{
	char buf[1024];
	struct nc_denial d;
	/* IPv4 10.200.0.2 -> 203.0.113.2, TCP 40000 -> 443 */
	uint8_t ip4[40] = {
		0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0,
		10, 200, 0, 2, 203, 0, 113, 2,
		0x9c, 0x40, 0x01, 0xbb,
	};
	/* IPv6 2001:db8::2 -> 2001:db8::1, UDP 4000 -> 5555 */
	uint8_t ip6[48] = { 0x60, 0, 0, 0, 0, 8, 17, 64,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0x0f, 0xa0, 0x15, 0xb3, 0, 8, 0, 0 };
	struct in6_addr a6;

	ok(nc_nflog_parse(packet(buf, AF_INET, "berth:not-allowed", ip4,
	    sizeof(ip4), 1, 0), &d) == 0, "a berth denial parses");
	is_str(d.reason, "not-allowed", "reason from the prefix");
	is_int(d.when.tv_sec, 1700000000, "kernel timestamp, seconds");
	is_int(d.when.tv_nsec, 123456000, "... and microseconds");
	is_int(d.indev, 5, "in-device index");
	is_int(d.family, AF_INET, "IPv4");
	is_int(d.proto, 6, "TCP");
	ok(d.src.s_addr == htonl(0x0ac80002) && d.dst.s_addr ==
	    htonl(0xcb007102), "source (guest) and destination");
	ok(d.sport == 40000 && d.dport == 443, "ports in host order");

	ok(nc_nflog_parse(packet(buf, AF_INET, "something-else", ip4,
	    sizeof(ip4), 1, 0), &d) < 0, "foreign prefix skipped");
	ok(nc_nflog_parse(packet(buf, AF_INET, NULL, ip4, sizeof(ip4), 1, 0),
	    &d) < 0, "no prefix skipped");

	ok(nc_nflog_parse(packet(buf, AF_INET, "berth:dns", ip4, 22, 0, 0),
	    &d) == 0 && d.dport == 0 && d.dst.s_addr == htonl(0xcb007102) &&
	    d.when.tv_sec > 1600000000, "truncated copy: no ports, "
	    "read time");
	ip4[6] = 0x20;	/* not a first fragment */
	ip4[7] = 0x10;
	ok(nc_nflog_parse(packet(buf, AF_INET, "berth:x", ip4, sizeof(ip4), 1,
	    0), &d) == 0 && d.dport == 0, "later fragment: no ports");
	ip4[0] = 0x4f;	/* IHL 60 > copy */
	ip4[6] = 0x40;
	ip4[7] = 0;
	ok(nc_nflog_parse(packet(buf, AF_INET, "berth:x", ip4, sizeof(ip4), 1,
	    0), &d) == 0 && d.dport == 0, "options beyond the copy: no ports");
	ok(nc_nflog_parse(packet(buf, AF_INET, "berth:x", ip4, sizeof(ip4), 1,
	    1), &d) == 0 && d.when.tv_sec > 1600000000 &&
	    d.when.tv_sec != 1700000000, "short timestamp attribute ignored");
	ok(nc_nflog_parse(packet(buf, AF_INET6, "berth:ipv6", ip6, sizeof(ip6),
	    1, 0), &d) == 0 && d.family == AF_INET6 && d.proto == 17,
	    "IPv6 packet: family and next header");
	inet_pton(AF_INET6, "2001:db8::2", &a6);
	ok(memcmp(&d.src6, &a6, 16) == 0, "IPv6 source");
	inet_pton(AF_INET6, "2001:db8::1", &a6);
	ok(memcmp(&d.dst6, &a6, 16) == 0, "IPv6 destination");
	ok(d.sport == 4000 && d.dport == 5555, "IPv6 ports");
	ok(d.indev == 5 && d.outdev == 9, "in- and out-device indexes");
	ok(nc_nflog_parse(packet(buf, AF_INET6, "berth:ipv6", ip6, 40, 1, 0),
	    &d) == 0 && d.dport == 0 && d.src6.s6_addr[15] == 2,
	    "IPv6 header only: addresses, no ports");
	ok(nc_nflog_parse(packet(buf, AF_INET, "berth:closed", NULL, 0, 1, 0),
	    &d) == 0 && d.proto == 0, "no payload: reason and time only");
	packet(buf, AF_INET, "berth:x", ip4, sizeof(ip4), 1, 0);
	((struct nlmsghdr *)buf)->nlmsg_type = NLMSG_ERROR;
	ok(nc_nflog_parse((struct nlmsghdr *)buf, &d) < 0,
	    "other message types skipped");
	return done_testing();
}
