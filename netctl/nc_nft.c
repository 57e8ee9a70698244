/*
 * nc_nft.c — nftables transport for libnetctl: one NETLINK_NETFILTER
 * socket (libmnl), batches of messages built with libnftnl, and a commit
 * that is atomic, generation-checked and reads every acknowledgement.
 *
 * Why it reads acks the way it does: nfnetlink processes a batch inside
 * our sendmsg(), so when sendmsg returns every ack is already queued on
 * the socket. Each message carries NLM_F_ACK, so there is one ack per
 * message (error 0 or -errno, in order); BEGIN gets an ack only when the
 * whole batch is refused (-ERESTART on a stale generation id, -EPERM) or
 * the commit phase fails. The receive buffer is sized to the batch so no
 * ack is lost to ENOBUFS.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/gen.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "nc_nft.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* Room guaranteed free before libnftnl writes one message: libnftnl does
 * not bound its writes, and no berth message comes near this. */
#define NC_MSG_ROOM (64 * 1024)
#define NC_ACK_TIMEOUT_MS 10000
#define NC_RBUF (64 * 1024)
#define NC_FIRST_ERR 512

/* ---- batches ---- */

struct nc_msg {
	char *what;
	uint16_t type;		/* NFT_MSG_* */
};

struct nc_batch {
	char *buf;		/* messages, back to back, NLMSG_ALIGNed */
	size_t len, cap;
	struct nc_msg *msg;
	size_t n, nalloc;
	char *out;		/* BEGIN + buf + END after finish */
	size_t outlen;
	uint32_t seq0;
};

struct nc_batch *
nc_batch_new(void)
{
	return calloc(1, sizeof(struct nc_batch));
}

void
nc_batch_free(struct nc_batch *b)
{
	size_t i;

	if (b == NULL)
		return;
	for (i = 0; i < b->n; i++)
		free(b->msg[i].what);
	free(b->msg);
	free(b->buf);
	free(b->out);
	free(b);
}

size_t
nc_batch_count(const struct nc_batch *b)
{
	return b->n;
}

size_t
nc_batch_mark(const struct nc_batch *b)
{
	return b->n;
}

void
nc_batch_rewind(struct nc_batch *b, size_t mark)
{
	const struct nlmsghdr *nlh;
	size_t off = 0, i;

	if (mark >= b->n)
		return;
	for (i = 0; i < mark; i++) {
		nlh = (const struct nlmsghdr *)(b->buf + off);
		off += NLMSG_ALIGN(nlh->nlmsg_len);
	}
	for (i = mark; i < b->n; i++)
		free(b->msg[i].what);
	b->n = mark;
	b->len = off;
}

/* Make room for one more message; returns its header position or NULL. */
static char *
batch_room(struct nc_batch *b)
{
	if (b->cap - b->len < NC_MSG_ROOM) {
		size_t ncap = b->cap ? b->cap * 2 : 4 * NC_MSG_ROOM;
		char *nb;

		while (ncap - b->len < NC_MSG_ROOM)
			ncap *= 2;
		if ((nb = realloc(b->buf, ncap)) == NULL)
			return NULL;
		b->buf = nb;
		b->cap = ncap;
	}
	if (b->n == b->nalloc) {
		size_t na = b->nalloc ? b->nalloc * 2 : 64;
		struct nc_msg *nm = realloc(b->msg, na * sizeof(*nm));

		if (nm == NULL)
			return NULL;
		b->msg = nm;
		b->nalloc = na;
	}
	return b->buf + b->len;
}

static int
batch_commit_msg(struct nc_batch *b, struct nlmsghdr *nlh, uint16_t type,
    const char *what)
{
	char tmp[32];

	if (what == NULL) {
		snprintf(tmp, sizeof(tmp), "message %zu", b->n + 1);
		what = tmp;
	}
	if ((b->msg[b->n].what = strdup(what)) == NULL)
		return -1;
	b->msg[b->n].type = type;
	b->n++;
	b->len += NLMSG_ALIGN(nlh->nlmsg_len);
	return 0;
}

/* The object's own family when it has one set, else inet. */
#define BATCH_ADD(kind, objtype, famattr)				\
int									\
nc_batch_##kind(struct nc_batch *b, uint16_t type, uint16_t flags,	\
    objtype *o, const char *what)					\
{									\
	struct nlmsghdr *nlh;						\
	uint16_t fam = NFPROTO_INET;					\
	char *p;							\
									\
	if ((p = batch_room(b)) == NULL)				\
		return -1;						\
	if (nftnl_##kind##_is_set(o, famattr))				\
		fam = (uint16_t)nftnl_##kind##_get_u32(o, famattr);	\
	nlh = nftnl_nlmsg_build_hdr(p, type, fam, flags | NLM_F_ACK, 0);	\
	nftnl_##kind##_nlmsg_build_payload(nlh, o);			\
	return batch_commit_msg(b, nlh, type, what);			\
}

BATCH_ADD(table, struct nftnl_table, NFTNL_TABLE_FAMILY)
BATCH_ADD(chain, struct nftnl_chain, NFTNL_CHAIN_FAMILY)
BATCH_ADD(rule, struct nftnl_rule, NFTNL_RULE_FAMILY)
BATCH_ADD(set, struct nftnl_set, NFTNL_SET_FAMILY)

int
nc_batch_elems(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_set *s, const char *what)
{
	struct nlmsghdr *nlh;
	char *p;

	if ((p = batch_room(b)) == NULL)
		return -1;
	nlh = nftnl_nlmsg_build_hdr(p, type, nftnl_set_is_set(s,
	    NFTNL_SET_FAMILY) ? (uint16_t)nftnl_set_get_u32(s,
	    NFTNL_SET_FAMILY) : NFPROTO_INET, flags | NLM_F_ACK, 0);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	return batch_commit_msg(b, nlh, type, what);
}

static struct nlmsghdr *
put_batch_hdr(char *p, uint16_t type, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(p);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(NFNL_SUBSYS_NFTABLES);
	return nlh;
}

int
nc_batch_finish(struct nc_batch *b, uint32_t seq0, const uint32_t *genid,
    const void **buf, size_t *len)
{
	struct nlmsghdr *nlh;
	size_t off, i, need;
	char *o;

	need = b->len + 2 * MNL_NLMSG_HDRLEN + 64;
	if ((o = realloc(b->out, need)) == NULL)
		return -1;
	b->out = o;
	memset(o, 0, need);
	b->seq0 = seq0;

	/* BEGIN: with the generation id the batch was computed against,
	 * kernels since 4.20 refuse it with -ERESTART when stale; older
	 * ones ignore the attribute. */
	nlh = put_batch_hdr(o, NFNL_MSG_BATCH_BEGIN, seq0);
	if (genid != NULL)
		mnl_attr_put_u32(nlh, NFNL_BATCH_GENID, htonl(*genid));
	off = NLMSG_ALIGN(nlh->nlmsg_len);

	memcpy(o + off, b->buf, b->len);
	for (i = 0; i < b->n; i++) {
		nlh = (struct nlmsghdr *)(o + off);
		nlh->nlmsg_seq = seq0 + 1 + i;
		off += NLMSG_ALIGN(nlh->nlmsg_len);
	}
	nlh = put_batch_hdr(o + off, NFNL_MSG_BATCH_END, seq0 + b->n + 1);
	off += NLMSG_ALIGN(nlh->nlmsg_len);
	b->outlen = off;
	*buf = o;
	*len = off;
	return 0;
}

static const struct nc_msg *
batch_msg_by_seq(const struct nc_batch *b, uint32_t seq)
{
	if (seq <= b->seq0 || seq - b->seq0 > b->n)
		return NULL;
	return &b->msg[seq - b->seq0 - 1];
}

const char *
nc_batch_what(const struct nc_batch *b, uint32_t seq)
{
	const struct nc_msg *m;

	if (seq == b->seq0)
		return "batch";
	if ((m = batch_msg_by_seq(b, seq)) == NULL)
		return "unknown message";
	return m->what;
}

/* ---- acknowledgements ---- */

struct ack_tlv {
	const char *msg;
	uint32_t offs;
	int has_offs;
	uint32_t miss_type;
	int has_miss;
};

static int
ack_attr_cb(const struct nlattr *a, void *data)
{
	struct ack_tlv *t = data;

	switch (mnl_attr_get_type(a)) {
	case NLMSGERR_ATTR_MSG:
		if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			t->msg = mnl_attr_get_str(a);
		break;
	case NLMSGERR_ATTR_OFFS:
		if (mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			t->offs = mnl_attr_get_u32(a);
			t->has_offs = 1;
		}
		break;
	case NLMSGERR_ATTR_MISS_TYPE:
		if (mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			t->miss_type = mnl_attr_get_u32(a);
			t->has_miss = 1;
		}
		break;
	}
	return MNL_CB_OK;
}

/* What an errno usually means for this kind of nf_tables message. */
static const char *
err_hint(int e, uint16_t type)
{
	switch (e) {
	case EPERM:
		return "needs CAP_NET_ADMIN";
	case ERESTART:
		return "ruleset changed meanwhile; rebuild and retry";
	case ENOENT:
		if (type == NFT_MSG_DELSETELEM)
			return "no such element";
		return "its table, chain or set does not exist";
	case EEXIST:
		if (type == NFT_MSG_NEWSETELEM)
			return "present with other data, or overlaps an "
			    "existing range";
		return NULL;
	case ENOTEMPTY:
		if (type == NFT_MSG_NEWSETELEM)
			return "overlaps an existing range";
		return NULL;
	case EBUSY:
		return "in use";
	case EOPNOTSUPP:
		return "not supported by this kernel";
	case ENOSPC:
		return "set is full";
	}
	return NULL;
}

int
nc_nft_parse_ack(const struct nc_batch *b, const struct nlmsghdr *nlh,
    char *err, size_t len)
{
	const struct nlmsgerr *e;
	const struct nc_msg *m;
	struct ack_tlv t = { 0 };
	const char *hint;
	char extra[96] = "";
	size_t off;
	int code;

	if (nlh->nlmsg_type != NLMSG_ERROR ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*e))
		return 0;
	e = mnl_nlmsg_get_payload(nlh);
	code = -e->error;
	if (code == 0)
		return 0;
	if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
		off = sizeof(*e);
		if (!(nlh->nlmsg_flags & NLM_F_CAPPED) &&
		    e->msg.nlmsg_len >= sizeof(struct nlmsghdr))
			off += NLMSG_ALIGN(e->msg.nlmsg_len -
			    sizeof(struct nlmsghdr));
		if (MNL_NLMSG_HDRLEN + off <= nlh->nlmsg_len)
			mnl_attr_parse(nlh, off, ack_attr_cb, &t);
	}
	m = b != NULL ? batch_msg_by_seq(b, e->msg.nlmsg_seq) : NULL;
	hint = err_hint(code, m != NULL ? m->type : 0);
	if (t.has_offs)
		snprintf(extra, sizeof(extra), ", at byte %u of the message",
		    t.offs);
	else if (t.has_miss)
		snprintf(extra, sizeof(extra), ", missing attribute %u",
		    t.miss_type);
	nc_errf(err, len, "%s: %s%s%s%s%s%s%s",
	    b != NULL ? nc_batch_what(b, e->msg.nlmsg_seq) : "request",
	    strerror(code),
	    hint ? " (" : "", hint ? hint : "", hint ? ")" : "",
	    t.msg ? "; kernel says: " : "", t.msg ? t.msg : "", extra);
	return code;
}

/* ---- socket ---- */

struct nc_nft {
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;
	int rcvbuf, sndbuf;
	char rbuf[NC_RBUF] __attribute__((aligned(8)));	/* nlmsghdr */
};

struct nc_nft *
nc_nft_open(char *err, size_t len)
{
	struct nc_nft *n;
	int one = 1;

	if ((n = calloc(1, sizeof(*n))) == NULL) {
		nc_errf(err, len, "nftables socket: %s", strerror(ENOMEM));
		return NULL;
	}
	if ((n->nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL) {
		nc_errf(err, len, "nftables socket: %s", strerror(errno));
		free(n);
		return NULL;
	}
	if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		nc_errf(err, len, "nftables socket bind: %s", strerror(errno));
		mnl_socket_close(n->nl);
		free(n);
		return NULL;
	}
	/* Both are optional: without them errors still arrive, only
	 * without the kernel's text and with the request echoed. */
	mnl_socket_setsockopt(n->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(n->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	n->portid = mnl_socket_get_portid(n->nl);
	n->seq = (uint32_t)time(NULL) << 8;
	return n;
}

void
nc_nft_close(struct nc_nft *n)
{
	if (n == NULL)
		return;
	mnl_socket_close(n->nl);
	free(n);
}

/* Grow SO_SNDBUF/SO_RCVBUF (FORCE variants when privileged) to fit. */
static void
ensure_buf(struct nc_nft *n, int opt, int forceopt, int *cur, size_t want)
{
	int fd = mnl_socket_get_fd(n->nl), v;

	if (want > 1U << 30)
		want = 1U << 30;
	if ((size_t)*cur >= want)
		return;
	v = (int)want;
	if (setsockopt(fd, SOL_SOCKET, forceopt, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
	*cur = v;
}

static void
drain(struct nc_nft *n)
{
	char buf[8192];

	while (recv(mnl_socket_get_fd(n->nl), buf, sizeof(buf),
	    MSG_DONTWAIT) > 0)
		;
}

int
nc_nft_commit(struct nc_nft *n, struct nc_batch *b, const uint32_t *genid,
    char *err, size_t len)
{
	char *rbuf = n->rbuf, first[NC_FIRST_ERR];
	const struct nlmsghdr *nlh;
	const void *out;
	size_t outlen, got = 0, nerr = 0;
	uint32_t seq0, seq;
	int fd = mnl_socket_get_fd(n->nl), begin_err = 0, first_code = 0;
	int code, flags, rem;
	ssize_t r;
	struct pollfd pfd;

	if (b->n == 0)
		return 0;
	first[0] = '\0';
	seq0 = n->seq;
	n->seq += (uint32_t)b->n + 2;
	if (nc_batch_finish(b, seq0, genid, &out, &outlen) < 0)
		return nc_errf(err, len, "batch: %s", strerror(ENOMEM)), -ENOMEM;
	ensure_buf(n, SO_SNDBUF, SO_SNDBUFFORCE, &n->sndbuf,
	    outlen + 64 * 1024);
	/* An ack skb costs well under 1 KiB of receive buffer. */
	ensure_buf(n, SO_RCVBUF, SO_RCVBUFFORCE, &n->rcvbuf,
	    b->n * 1024 + 256 * 1024);
	drain(n);

	if (mnl_socket_sendto(n->nl, out, outlen) < 0) {
		code = errno;
		nc_errf(err, len, "sending batch of %zu messages (%zu bytes): "
		    "%s", b->n, outlen, strerror(code));
		return -code;
	}

	for (;;) {
		/* Everything is queued by now; waiting only guards against
		 * a kernel that would answer asynchronously. */
		flags = (got == b->n || begin_err) ? MSG_DONTWAIT : 0;
		if (!flags) {
			pfd.fd = fd;
			pfd.events = POLLIN;
			if (poll(&pfd, 1, NC_ACK_TIMEOUT_MS) == 0) {
				nc_errf(err, len, "batch: kernel acknowledged "
				    "%zu of %zu messages, then nothing for "
				    "%d ms", got, b->n, NC_ACK_TIMEOUT_MS);
				return -ETIMEDOUT;
			}
		}
		r = recv(fd, rbuf, NC_RBUF, flags);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			code = errno;
			nc_errf(err, len, "reading acks of a %zu-message batch "
			    "(%zu read): %s; the batch outcome is unknown",
			    b->n, got, strerror(code));
			drain(n);
			return -code;
		}
		nlh = (const struct nlmsghdr *)rbuf;
		rem = (int)r;
		while (mnl_nlmsg_ok(nlh, rem)) {
			seq = nlh->nlmsg_seq;
			if (nlh->nlmsg_type != NLMSG_ERROR ||
			    seq < seq0 || seq > seq0 + b->n + 1 ||
			    nlh->nlmsg_pid != n->portid)
				goto next;
			code = nc_nft_parse_ack(b, nlh,
			    first_code ? NULL : first, sizeof(first));
			if (seq == seq0) {
				begin_err = code ? code : EPROTO;
			} else {
				got++;
			}
			if (code) {
				nerr++;
				if (!first_code)
					first_code = code;
			}
next:
			nlh = mnl_nlmsg_next(nlh, &rem);
		}
	}

	if (first_code) {
		if (nerr > 1)
			nc_errf(err, len, "%s (and %zu more errors in this "
			    "batch; nothing was applied)", first, nerr - 1);
		else
			nc_errf(err, len, "%s", first);
		return -first_code;
	}
	if (got != b->n)
		return nc_errf(err, len, "batch: kernel acknowledged %zu of "
		    "%zu messages", got, b->n), -EPROTO;
	return 0;
}

/* ---- requests answered by a reply or a dump ---- */

struct gen_arg {
	uint32_t gen;
	int found;
};

static int
gen_cb(const struct nlmsghdr *nlh, void *data)
{
	struct gen_arg *g = data;
	struct nftnl_gen *gen;

	if ((gen = nftnl_gen_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_gen_nlmsg_parse(nlh, gen) == 0 &&
	    nftnl_gen_is_set(gen, NFTNL_GEN_ID)) {
		g->gen = nftnl_gen_get_u32(gen, NFTNL_GEN_ID);
		g->found = 1;
	}
	nftnl_gen_free(gen);
	return MNL_CB_OK;
}

/* Send one request and run cb over the replies until DONE or ack. */
static int
request(struct nc_nft *n, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg,
    int *intr, const char *what, char *err, size_t len)
{
	char *rbuf = n->rbuf;
	const struct nlmsghdr *h;
	uint32_t seq = nlh->nlmsg_seq;
	ssize_t r;
	int ret, code, rem;

	drain(n);
	if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0) {
		code = errno;
		return nc_errf(err, len, "%s: %s", what, strerror(code)),
		    -code;
	}
	for (;;) {
		r = mnl_socket_recvfrom(n->nl, rbuf, NC_RBUF);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			code = errno;
			drain(n);
			return nc_errf(err, len, "%s: %s", what,
			    strerror(code)), -code;
		}
		rem = (int)r;
		if (intr != NULL)
			for (h = (const struct nlmsghdr *)rbuf;
			    mnl_nlmsg_ok(h, rem); h = mnl_nlmsg_next(h, &rem))
				if (h->nlmsg_flags & NLM_F_DUMP_INTR)
					*intr = 1;
		ret = mnl_cb_run(rbuf, (size_t)r, seq, n->portid, cb, arg);
		if (ret < 0) {
			code = errno;
			drain(n);
			return nc_errf(err, len, "%s: %s", what,
			    strerror(code)), -code;
		}
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

int
nc_nft_getgen(struct nc_nft *n, uint32_t *gen, char *err, size_t len)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct gen_arg g = { 0, 0 };
	int ret;

	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, AF_UNSPEC,
	    NLM_F_ACK, ++n->seq);
	if ((ret = request(n, nlh, gen_cb, &g, NULL, "ruleset generation",
	    err, len)) < 0)
		return ret;
	if (!g.found)
		return nc_errf(err, len, "ruleset generation: no answer"),
		    -EPROTO;
	*gen = g.gen;
	return 0;
}

struct elem_arg {
	int (*cb)(struct nftnl_set_elem *, void *);
	void *arg;
	int stopped;
};

static int
elem_visit(struct nftnl_set_elem *e, void *data)
{
	struct elem_arg *a = data;

	if (a->stopped)
		return -1;
	if (a->cb(e, a->arg) != 0) {
		a->stopped = 1;
		return -1;
	}
	return 0;
}

static int
elems_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_set *s;

	if ((s = nftnl_set_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		nftnl_set_free(s);
		errno = EPROTO;
		return MNL_CB_ERROR;
	}
	nftnl_set_elem_foreach(s, elem_visit, data);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

int
nc_nft_dump_elems(struct nc_nft *n, const char *table, const char *set,
    int (*cb)(struct nftnl_set_elem *e, void *arg), void *arg,
    char *err, size_t len)
{
	return nc_nft_dump_elems_family(n, NFPROTO_INET, table, set, cb, arg,
	    err, len);
}

int
nc_nft_dump_elems_family(struct nc_nft *n, uint16_t family,
    const char *table, const char *set,
    int (*cb)(struct nftnl_set_elem *e, void *arg), void *arg,
    char *err, size_t len)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], what[128];
	struct nlmsghdr *nlh;
	struct nftnl_set *s;
	struct elem_arg a = { cb, arg, 0 };
	int ret, intr = 0;

	if ((s = nftnl_set_alloc()) == NULL)
		return nc_errf(err, len, "%s", strerror(ENOMEM)), -ENOMEM;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, family,
	    NLM_F_DUMP, ++n->seq);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	snprintf(what, sizeof(what), "listing set %s %s %s",
	    family == NFPROTO_ARP ? "arp" : "inet", table, set);
	ret = request(n, nlh, elems_cb, &a, &intr, what, err, len);
	if (ret < 0)
		return ret;
	if (intr)
		return nc_errf(err, len, "%s: interrupted by a ruleset change",
		    what), -EINTR;
	return 0;
}

int
nc_nft_get_elem(struct nc_nft *n, const char *table, const char *set,
    const void *key, uint32_t klen,
    int (*cb)(struct nftnl_set_elem *e, void *arg), void *arg,
    char *err, size_t len)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], what[128];
	struct nlmsghdr *nlh;
	struct nftnl_set *s;
	struct nftnl_set_elem *e;
	struct elem_arg a = { cb, arg, 0 };

	if ((s = nftnl_set_alloc()) == NULL)
		return nc_errf(err, len, "%s", strerror(ENOMEM)), -ENOMEM;
	if ((e = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		return nc_errf(err, len, "%s", strerror(ENOMEM)), -ENOMEM;
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, klen);
	nftnl_set_elem_add(s, e);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_ACK, ++n->seq);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	snprintf(what, sizeof(what), "reading an element of set inet %s %s",
	    table, set);
	return request(n, nlh, elems_cb, &a, NULL, what, err, len);
}

static int
rule_count_cb(const struct nlmsghdr *nlh, void *data)
{
	if ((nlh->nlmsg_type & 0xff) == NFT_MSG_NEWRULE)
		(*(size_t *)data)++;
	return MNL_CB_OK;
}

int
nc_nft_count_rules(struct nc_nft *n, const char *table, size_t *count,
    char *err, size_t len)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], what[128];
	struct nlmsghdr *nlh;
	struct nftnl_rule *r;

	if ((r = nftnl_rule_alloc()) == NULL)
		return nc_errf(err, len, "%s", strerror(ENOMEM)), -ENOMEM;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETRULE, NFPROTO_INET,
	    NLM_F_DUMP, ++n->seq);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	*count = 0;
	snprintf(what, sizeof(what), "listing rules of table inet %s", table);
	return request(n, nlh, rule_count_cb, count, NULL, what, err, len);
}
