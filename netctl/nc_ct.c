/*
 * nc_ct.c — a sandbox's conntrack entries through ctnetlink (libmnl):
 * listed with the kernel's filter on the original source address (Linux
 * 5.8 and later; an older kernel lists everything and the filter here
 * does the work), then deleted one by one by original tuple and zone.
 * Used when a sandbox goes away, so the next holder of its address
 * inherits none of its flows; tightening a live sandbox's policy is the
 * table's business (generations, see nc_egress.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>

#include "netctl.h"
#include "nc_nft.h"

/* The kernel's CTA_FILTER_F_CTA_IP_SRC (not in the uapi headers). */
#define NC_CT_FILTER_IP_SRC (1U << 0)

struct ct_entry {
	uint8_t tuple[256];	/* CTA_TUPLE_ORIG's payload, as listed */
	uint16_t tlen;
	uint16_t zone;		/* network order */
	int has_zone;
};

struct ct_list {
	uint32_t guest;
	struct ct_entry *v;
	size_t n, cap;
	int nomem;
};

static struct nlmsghdr *
ct_msg(char *buf, uint8_t type, uint16_t flags, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_INET;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;
	return nlh;
}

static int
attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, CTA_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = a;
	return MNL_CB_OK;
}

static int
tuple_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, CTA_TUPLE_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = a;
	return MNL_CB_OK;
}

static int
ip_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, CTA_IP_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = a;
	return MNL_CB_OK;
}

/* One listed entry: kept when its original source is the guest. Every
 * attribute is checked before use. */
static int
list_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ct_list *l = data;
	const struct nlattr *tb[CTA_MAX + 1] = { 0 };
	const struct nlattr *tt[CTA_TUPLE_MAX + 1] = { 0 };
	const struct nlattr *ti[CTA_IP_MAX + 1] = { 0 };
	struct ct_entry *e;
	uint32_t src;

	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, tb) < 0 ||
	    tb[CTA_TUPLE_ORIG] == NULL ||
	    mnl_attr_get_payload_len(tb[CTA_TUPLE_ORIG]) > sizeof(e->tuple) ||
	    mnl_attr_parse_nested(tb[CTA_TUPLE_ORIG], tuple_cb, tt) < 0 ||
	    tt[CTA_TUPLE_IP] == NULL ||
	    mnl_attr_parse_nested(tt[CTA_TUPLE_IP], ip_cb, ti) < 0 ||
	    ti[CTA_IP_V4_SRC] == NULL ||
	    mnl_attr_validate(ti[CTA_IP_V4_SRC], MNL_TYPE_U32) < 0)
		return MNL_CB_OK;
	src = mnl_attr_get_u32(ti[CTA_IP_V4_SRC]);
	if (src != l->guest)
		return MNL_CB_OK;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct ct_entry *v = realloc(l->v, cap * sizeof(*v));

		if (v == NULL) {
			l->nomem = 1;
			return MNL_CB_OK;
		}
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n++];
	e->tlen = (uint16_t)mnl_attr_get_payload_len(tb[CTA_TUPLE_ORIG]);
	memcpy(e->tuple, mnl_attr_get_payload(tb[CTA_TUPLE_ORIG]), e->tlen);
	e->has_zone = tb[CTA_ZONE] != NULL &&
	    mnl_attr_validate(tb[CTA_ZONE], MNL_TYPE_U16) == 0;
	e->zone = e->has_zone ? mnl_attr_get_u16(tb[CTA_ZONE]) : 0;
	return MNL_CB_OK;
}

/* Send nlh and run cb over the answers until DONE or the ack. */
static int
ct_request(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb,
    void *arg)
{
	static char buf[32768] __attribute__((aligned(8)));
	uint32_t portid = mnl_socket_get_portid(nl), seq = nlh->nlmsg_seq;
	ssize_t r;
	int ret;

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		r = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ret = mnl_cb_run(buf, (size_t)r, seq, portid, cb, arg);
		if (ret < 0)
			return -errno;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

static int
ct_list(struct mnl_socket *nl, struct in_addr guest, struct ct_list *l,
    char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct nlattr *f, *t, *ip;
	int ret, filtered;

	for (filtered = 1; filtered >= 0; filtered--) {
		l->n = 0;
		nlh = ct_msg(buf, IPCTNL_MSG_CT_GET, NLM_F_DUMP, 1);
		if (filtered) {
			f = mnl_attr_nest_start(nlh, CTA_FILTER);
			mnl_attr_put_u32(nlh, CTA_FILTER_ORIG_FLAGS,
			    htonl(NC_CT_FILTER_IP_SRC));
			mnl_attr_put_u32(nlh, CTA_FILTER_REPLY_FLAGS, 0);
			mnl_attr_nest_end(nlh, f);
			t = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
			ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
			mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, guest.s_addr);
			mnl_attr_nest_end(nlh, ip);
			mnl_attr_nest_end(nlh, t);
		}
		ret = ct_request(nl, nlh, list_cb, l);
		if (l->nomem)
			return nc_errf(err, errlen, "conntrack: %s",
			    strerror(ENOMEM)), -ENOMEM;
		if (ret == 0)
			return 0;
		/* a kernel without dump filters: list everything */
		if (!filtered || (ret != -EINVAL && ret != -EOPNOTSUPP))
			break;
	}
	return nc_errf(err, errlen, "listing conntrack entries: %s%s",
	    strerror(-ret), ret == -EPROTONOSUPPORT || ret == -ENOENT ?
	    " (no nf_conntrack_netlink?)" : ""), ret;
}

static int
ct_guest(struct in_addr guest, int del, size_t *n, char *err, size_t errlen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], a[INET_ADDRSTRLEN];
	struct mnl_socket *nl;
	struct ct_list l;
	struct nlmsghdr *nlh;
	size_t i;
	int ret = 0;

	*n = 0;
	memset(&l, 0, sizeof(l));
	l.guest = guest.s_addr;
	inet_ntop(AF_INET, &guest, a, sizeof(a));
	if ((nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL ||
	    mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		ret = -errno;
		nc_errf(err, errlen, "conntrack of %s: netlink socket: %s", a,
		    strerror(errno));
		goto out;
	}
	if ((ret = ct_list(nl, guest, &l, err, errlen)) < 0)
		goto out;
	if (!del) {
		*n = l.n;
		goto out;
	}
	for (i = 0; i < l.n; i++) {
		nlh = ct_msg(buf, IPCTNL_MSG_CT_DELETE, NLM_F_ACK,
		    (uint32_t)i + 2);
		mnl_attr_put(nlh, CTA_TUPLE_ORIG | NLA_F_NESTED, l.v[i].tlen,
		    l.v[i].tuple);
		if (l.v[i].has_zone)
			mnl_attr_put_u16(nlh, CTA_ZONE, l.v[i].zone);
		ret = ct_request(nl, nlh, NULL, NULL);
		if (ret == -ENOENT)	/* ended meanwhile */
			continue;
		if (ret < 0) {
			nc_errf(err, errlen, "deleting a conntrack entry of "
			    "%s: %s", a, strerror(-ret));
			goto out;
		}
		(*n)++;
	}
	ret = 0;
out:
	if (nl != NULL)
		mnl_socket_close(nl);
	free(l.v);
	return ret;
}

int
nc_ct_flush_guest(struct in_addr guest, size_t *n, char *err, size_t errlen)
{
	return ct_guest(guest, 1, n, err, errlen);
}

int
nc_ct_count_guest(struct in_addr guest, size_t *n, char *err, size_t errlen)
{
	return ct_guest(guest, 0, n, err, errlen);
}
