/*
 * nc_nflog.c — the kernel side of the denial log: binds the NFLOG group
 * that table inet berth's deny rules log to (libmnl, nfnetlink_log), and
 * turns each logged packet into a struct nc_denial (time, guest, dest,
 * protocol, ports, reason from the rule's "berth:<reason>" prefix).
 * Every attribute is validated before use; the copied payload is parsed
 * only as far as its captured length goes.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/ip.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include "netctl.h"
#include "nc_nft.h"

#define NC_LOG_PREFIX "berth:"
#define NC_LOG_COPY 96		/* network + transport headers */

struct nc_nflog {
	struct mnl_socket *nl;
	uint16_t group;
	char buf[64 * 1024] __attribute__((aligned(8)));	/* nlmsghdr */
};

static int
config(struct nc_nflog *l, uint8_t cmd, int mode, char *err, size_t len)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;
	struct nfulnl_msg_config_cmd c = { .command = cmd };
	struct nfulnl_msg_config_mode m;
	int ret;

	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(l->group);
	if (cmd != NFULNL_CFG_CMD_NONE)
		mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(c), &c);
	if (mode) {
		memset(&m, 0, sizeof(m));
		m.copy_mode = NFULNL_COPY_PACKET;
		m.copy_range = htonl(NC_LOG_COPY);
		mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(m), &m);
		/* one message per packet: a denial shows up at once */
		mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));
	}
	if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
		return nc_errf(err, len, "NFLOG group %u: %s", l->group,
		    strerror(errno)), -errno;
	ret = (int)mnl_socket_recvfrom(l->nl, buf, sizeof(buf));
	if (ret < 0 || mnl_cb_run(buf, (size_t)ret, 1,
	    mnl_socket_get_portid(l->nl), NULL, NULL) < 0) {
		ret = errno;
		return nc_errf(err, len, "NFLOG group %u: %s%s", l->group,
		    strerror(ret), ret == EBUSY ?
		    " (another reader has bound this group)" : ""), -ret;
	}
	return 0;
}

struct nc_nflog *
nc_nflog_open(uint16_t group, char *err, size_t errlen)
{
	struct nc_nflog *l = calloc(1, sizeof(*l));

	if (l == NULL) {
		nc_errf(err, errlen, "NFLOG: %s", strerror(ENOMEM));
		return NULL;
	}
	l->group = group;
	if ((l->nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL ||
	    mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		nc_errf(err, errlen, "NFLOG socket: %s", strerror(errno));
		goto fail;
	}
	if (config(l, NFULNL_CFG_CMD_BIND, 0, err, errlen) < 0 ||
	    config(l, NFULNL_CFG_CMD_NONE, 1, err, errlen) < 0)
		goto fail;
	return l;
fail:
	if (l->nl != NULL)
		mnl_socket_close(l->nl);
	free(l);
	return NULL;
}

struct nc_nflog *
nc_nflog_adopt(int fd, uint16_t group, char *err, size_t errlen)
{
	struct nc_nflog *l = calloc(1, sizeof(*l));

	if (l == NULL || (l->nl = mnl_socket_fdopen(fd)) == NULL) {
		nc_errf(err, errlen, "NFLOG socket %d: %s", fd, strerror(errno));
		free(l);
		return NULL;
	}
	l->group = group;
	return l;
}

void
nc_nflog_close(struct nc_nflog *l)
{
	if (l == NULL)
		return;
	mnl_socket_close(l->nl);
	free(l);
}

int
nc_nflog_fd(const struct nc_nflog *l)
{
	return mnl_socket_get_fd(l->nl);
}

static int
attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, NFULA_MAX) < 0)
		return MNL_CB_OK;
	switch (type) {
	case NFULA_PACKET_HDR:
		if (mnl_attr_validate2(a, MNL_TYPE_UNSPEC,
		    sizeof(struct nfulnl_msg_packet_hdr)) < 0)
			return MNL_CB_OK;
		break;
	case NFULA_TIMESTAMP:
		if (mnl_attr_validate2(a, MNL_TYPE_UNSPEC,
		    sizeof(struct nfulnl_msg_packet_timestamp)) < 0)
			return MNL_CB_OK;
		break;
	case NFULA_IFINDEX_INDEV:
	case NFULA_IFINDEX_OUTDEV:
		if (mnl_attr_validate(a, MNL_TYPE_U32) < 0)
			return MNL_CB_OK;
		break;
	case NFULA_PREFIX:
		if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
			return MNL_CB_OK;
		break;
	}
	tb[type] = a;
	return MNL_CB_OK;
}

int
nc_nflog_parse(const struct nlmsghdr *nlh, struct nc_denial *d)
{
	const struct nlattr *tb[NFULA_MAX + 1] = { 0 };
	const struct nfgenmsg *nfg;
	const uint8_t *p;
	const char *prefix;
	size_t plen, ihl;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET) ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*nfg))
		return -1;
	nfg = mnl_nlmsg_get_payload(nlh);
	if (mnl_attr_parse(nlh, sizeof(*nfg), attr_cb, tb) < 0)
		return -1;
	if (tb[NFULA_PREFIX] == NULL)
		return -1;
	prefix = mnl_attr_get_str(tb[NFULA_PREFIX]);
	if (strncmp(prefix, NC_LOG_PREFIX, strlen(NC_LOG_PREFIX)) != 0)
		return -1;
	memset(d, 0, sizeof(*d));
	strncpy(d->reason, prefix + strlen(NC_LOG_PREFIX),
	    sizeof(d->reason) - 1);
	if (tb[NFULA_TIMESTAMP] != NULL) {
		struct nfulnl_msg_packet_timestamp ts;

		/* attributes are only 4-byte aligned */
		memcpy(&ts, mnl_attr_get_payload(tb[NFULA_TIMESTAMP]),
		    sizeof(ts));
		d->when.tv_sec = (time_t)be64toh(ts.sec);
		d->when.tv_nsec = (long)be64toh(ts.usec) * 1000;
	} else
		clock_gettime(CLOCK_REALTIME, &d->when);
	if (tb[NFULA_IFINDEX_INDEV] != NULL)
		d->indev = ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV]));
	if (tb[NFULA_IFINDEX_OUTDEV] != NULL)
		d->outdev = ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_OUTDEV]));
	d->family = nfg->nfgen_family == AF_INET6 ? AF_INET6 : AF_INET;
	if (tb[NFULA_PAYLOAD] == NULL)
		return 0;
	p = mnl_attr_get_payload(tb[NFULA_PAYLOAD]);
	plen = mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]);
	if (plen < 1)
		return 0;
	if ((p[0] >> 4) == 6) {
		d->family = AF_INET6;
		if (plen < 40)
			return 0;
		d->proto = p[6];
		memcpy(&d->src6, p + 8, 16);
		memcpy(&d->dst6, p + 24, 16);
		/* ports when the transport header follows at once (no
		 * extension headers) */
		if (plen >= 44 && (d->proto == IPPROTO_TCP ||
		    d->proto == IPPROTO_UDP || d->proto == IPPROTO_SCTP ||
		    d->proto == IPPROTO_UDPLITE)) {
			d->sport = (uint16_t)(p[40] << 8 | p[41]);
			d->dport = (uint16_t)(p[42] << 8 | p[43]);
		}
		return 0;
	}
	if ((p[0] >> 4) != 4 || plen < 20)
		return 0;
	ihl = (size_t)(p[0] & 0x0f) * 4;
	d->family = AF_INET;
	d->proto = p[9];
	memcpy(&d->src.s_addr, p + 12, 4);
	memcpy(&d->dst.s_addr, p + 16, 4);
	/* ports only in a first fragment that holds them */
	if (ihl >= 20 && plen >= ihl + 4 &&
	    ((p[6] << 8 | p[7]) & 0x1fff) == 0 &&
	    (d->proto == IPPROTO_TCP || d->proto == IPPROTO_UDP ||
	    d->proto == IPPROTO_SCTP || d->proto == IPPROTO_UDPLITE)) {
		d->sport = (uint16_t)(p[ihl] << 8 | p[ihl + 1]);
		d->dport = (uint16_t)(p[ihl + 2] << 8 | p[ihl + 3]);
	}
	return 0;
}

int
nc_nflog_read(struct nc_nflog *l,
    void (*cb)(const struct nc_denial *d, void *arg), void *arg,
    char *err, size_t errlen)
{
	const struct nlmsghdr *nlh;
	struct nc_denial d;
	ssize_t r;
	int n = 0, rem, code, reads;

	for (reads = 0; reads < NC_NFLOG_BATCH; reads++) {
		r = recv(mnl_socket_get_fd(l->nl), l->buf, sizeof(l->buf),
		    MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return n;
			code = errno;
			return nc_errf(err, errlen, "NFLOG group %u: %s%s",
			    l->group, strerror(code), code == ENOBUFS ?
			    " (log entries were lost)" : ""), -code;
		}
		rem = (int)r;
		for (nlh = (const struct nlmsghdr *)l->buf;
		    mnl_nlmsg_ok(nlh, rem); nlh = mnl_nlmsg_next(nlh, &rem)) {
			if (nc_nflog_parse(nlh, &d) == 0) {
				cb(&d, arg);
				n++;
			}
		}
	}
	return n;
}
