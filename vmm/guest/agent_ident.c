/*
 * agent_ident.c — the guest agent's 'U' (identity). A clone restored
 * from a snapshot is made its own: its clock, random pool, machine id,
 * hostname, network (through rtnetlink, each answer awaited at most 2 s:
 * there is no `ip` a static binary can lean on) and resolv.conf, a few
 * system calls done inline, all fields checked before anything changes.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "agent.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * A guest restored from a snapshot is its template's twin: the same
 * hostname, machine id, MAC, address, random pool state and the
 * snapshot's clock. 'U' gives it its own before berthd reports it
 * running. Everything is a few system calls (the network through
 * rtnetlink: this binary is static, no `ip` to lean on), done inline;
 * each netlink answer is waited for at most NL_TIMEOUT seconds.
 */
#define NL_TIMEOUT	2	/* seconds: one netlink answer, at most */
#define ID_NS_MAX	3	/* 'n' fields */
#define HOSTS_MAX	(1024 * 1024)	/* /etc/hosts read, at most */
#define ENTROPY		64	/* 'r' bytes */
#define ID_ADDRS	64	/* addresses deleted per listing */
#define ID_ROUTES	16	/* default routes deleted per listing */
#define CLOCK_MAX	253402300799999LL	/* 9999-12-31, in ms */

struct ident {
	const char *host;	/* 'h' */
	const char *mid;	/* 'i' */
	const char *ifname;	/* 'f', or NULL: the first ethernet one */
	const char *mac_s, *addr_s, *gw_s;	/* as given, for messages */
	unsigned char mac[6];
	struct in_addr addr, gw, ns[ID_NS_MAX];
	int prefix, nns;
	long long clock;	/* 'c', ms; -1: not given */
	unsigned char rnd[ENTROPY];
	int has_rnd;
};

static int
hex_digit(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
	    c - 'a' + 10 : -1;
}

/* n bytes from 2n lowercase hex digits (all of s); -1 otherwise. */
static int
hex_bytes(const char *s, unsigned char *b, size_t n)
{
	size_t i;

	if (strlen(s) != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		if (hex_digit(s[2 * i]) < 0 || hex_digit(s[2 * i + 1]) < 0)
			return -1;
		b[i] = (unsigned char)(hex_digit(s[2 * i]) << 4 |
		    hex_digit(s[2 * i + 1]));
	}
	return 0;
}

/* aa:bb:cc:dd:ee:ff (either case), unicast and not all zero. */
static int
mac_parse(const char *s, unsigned char mac[6])
{
	char low[18];
	size_t i;

	if (strlen(s) != 17)
		return -1;
	for (i = 0; i < 17; i++) {
		low[i] = (char)tolower((unsigned char)s[i]);
		if ((i % 3 == 2) != (low[i] == ':'))
			return -1;
	}
	for (i = 0; i < 6; i++) {
		if (hex_digit(low[3 * i]) < 0 || hex_digit(low[3 * i + 1]) < 0)
			return -1;
		mac[i] = (unsigned char)(hex_digit(low[3 * i]) << 4 |
		    hex_digit(low[3 * i + 1]));
	}
	return (mac[0] & 1) || memcmp(mac, "\0\0\0\0\0\0", 6) == 0 ? -1 : 0;
}

/* "a.b.c.d/p", p 1 to 32. */
static int
cidr_parse(const char *s, struct in_addr *a, int *prefix)
{
	const char *slash = strchr(s, '/');
	char ip[INET_ADDRSTRLEN];
	unsigned long long p;

	if (slash == NULL || (size_t)(slash - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(slash - s));
	ip[slash - s] = '\0';
	if (inet_pton(AF_INET, ip, a) != 1 || strlen(slash + 1) > 2 ||
	    req_num(slash + 1, &p) < 0 || slash[1] == '\0' || p < 1 ||
	    p > 32)
		return -1;
	*prefix = (int)p;
	return 0;
}

/* The 'U' fields into d, all checked; -1 with why in msg. */
static int
ident_parse(const unsigned char *p, size_t len, struct ident *d, char *msg,
    size_t mlen)
{
	unsigned long long ms;
	size_t off = 0, l, i;
	const char *s, *v;

	memset(d, 0, sizeof(*d));
	d->clock = -1;
	while (off < len) {
		s = (const char *)p + off;
		if ((l = strnlen(s, len - off)) == len - off) {
			snprintf(msg, mlen, "a field is not terminated");
			return -1;
		}
		off += l + 1;
		if (l == 0)
			continue;
		v = s + 1;
		switch (s[0]) {
		case 'h':
			for (i = 0; (v[i] >= 'a' && v[i] <= 'z') ||
			    (v[i] >= '0' && v[i] <= '9') ||
			    (i > 0 && v[i] == '-'); i++)
				;
			if (i == 0 || i > 63 || v[i] != '\0') {
				snprintf(msg, mlen, "'h' is not a hostname "
				    "(1 to 63 of a-z, 0-9 and '-', not first)");
				return -1;
			}
			d->host = v;
			break;
		case 'i': {
			unsigned char b[16];

			if (hex_bytes(v, b, sizeof(b)) < 0) {
				snprintf(msg, mlen, "'i' is not a machine id "
				    "(32 lowercase hex digits)");
				return -1;
			}
			d->mid = v;
			break;
		}
		case 'm':
			if (mac_parse(v, d->mac) < 0) {
				snprintf(msg, mlen, "'m' is not a MAC "
				    "(aa:bb:cc:dd:ee:ff, unicast)");
				return -1;
			}
			d->mac_s = v;
			break;
		case 'a':
			if (cidr_parse(v, &d->addr, &d->prefix) < 0) {
				snprintf(msg, mlen, "'a' is not an IPv4 "
				    "address/prefix");
				return -1;
			}
			d->addr_s = v;
			break;
		case 'g':
			if (inet_pton(AF_INET, v, &d->gw) != 1) {
				snprintf(msg, mlen, "'g' is not an IPv4 "
				    "address");
				return -1;
			}
			d->gw_s = v;
			break;
		case 'n':
			if (d->nns == ID_NS_MAX) {
				snprintf(msg, mlen, "more than %d 'n'",
				    ID_NS_MAX);
				return -1;
			}
			if (inet_pton(AF_INET, v, &d->ns[d->nns++]) != 1) {
				snprintf(msg, mlen, "'n' is not an IPv4 "
				    "address");
				return -1;
			}
			break;
		case 'c':
			if (req_num(v, &ms) < 0 || ms > CLOCK_MAX) {
				snprintf(msg, mlen, "'c' is not a time in ms");
				return -1;
			}
			d->clock = (long long)ms;
			break;
		case 'r':
			if (hex_bytes(v, d->rnd, sizeof(d->rnd)) < 0) {
				snprintf(msg, mlen, "'r' is not %d bytes as "
				    "%d lowercase hex digits", ENTROPY,
				    2 * ENTROPY);
				return -1;
			}
			d->has_rnd = 1;
			break;
		case 'f':
			if (l - 1 < 1 || l - 1 >= IFNAMSIZ ||
			    strpbrk(v, "/: \t\n") != NULL) {
				snprintf(msg, mlen, "'f' is not an interface "
				    "name");
				return -1;
			}
			d->ifname = v;
			break;
		default:
			break;	/* unknown fields: a newer host */
		}
	}
	return 0;
}

/* Writes data to path through a temporary file beside it, of mode,
 * renamed over it: 0, or an errno. No fsync: the guest's ext4 orders
 * a file's data before a rename over an older one (auto_da_alloc), and
 * a clone that crashes now is made again, not repaired. */
static int
file_replace(const char *path, const void *data, size_t len, unsigned mode)
{
	const char *slash = strrchr(path, '/'), *b = data;
	char tmp[PATH_MAX];
	ssize_t n;
	int fd, e = 0;

	snprintf(tmp, sizeof(tmp), "%.*s/.%s.berth-XXXXXX",
	    (int)(slash - path), path, slash + 1);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		/* a guest made from an image may have no /etc: its files
		 * are conveniences there, nothing to fail a clone for */
		if (errno == ENOENT && image_get() != NULL)
			return 0;
		return errno;
	}
	while (len > 0 && e == 0) {
		if ((n = write(fd, b, len)) < 0) {
			if (errno != EINTR)
				e = errno;
			continue;
		}
		b += n;
		len -= (size_t)n;
	}
	if (e == 0 && fchmod(fd, mode) < 0)
		e = errno;
	if (close(fd) < 0 && e == 0)
		e = errno;
	if (e == 0 && rename(tmp, path) < 0)
		e = errno;
	if (e != 0)
		unlink(tmp);
	return e;
}

/* The kernel's pool gets the host's bytes, credited: a clone's pool
 * is its template's (QEMU's vmgenid makes the kernel reseed too). A
 * kernel that will not credit them (no CAP_SYS_ADMIN, no ioctl) still
 * mixes them in through a write. 0, or an errno. */
static int
entropy_add(const unsigned char *b, size_t len)
{
	union {
		struct rand_pool_info info;
		unsigned char buf[sizeof(struct rand_pool_info) + ENTROPY];
	} u;
	ssize_t n;
	int fd, e = 0;

	if ((fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC)) < 0)
		return errno;
	u.info.entropy_count = (int)len * 8;
	u.info.buf_size = (int)len;
	memcpy(u.info.buf, b, len);
	if (ioctl(fd, RNDADDENTROPY, &u.info) < 0) {
		e = errno;
		if (e == EPERM || e == ENOTTY) {
			e = 0;
			while (len > 0 && e == 0) {
				if ((n = write(fd, b, len)) < 0) {
					if (errno != EINTR)
						e = errno;
					continue;
				}
				b += n;
				len -= (size_t)n;
			}
		}
	}
	explicit_bzero(&u, sizeof(u));
	/* A clone's CRNG keys are its template's until the kernel reseeds:
	 * now, from the pool the bytes just went into (vmgenid does the
	 * same where the machine has one). Refused without CAP_SYS_ADMIN
	 * or before the CRNG is ready: the write above still counts. */
#ifdef RNDRESEEDCRNG
	if (e == 0)
		(void)ioctl(fd, RNDRESEEDCRNG);
#endif
	close(fd);
	return e;
}

/* /etc/hosts with its 127.0.1.1 line "127.0.1.1\t<host>" (the first
 * one's place, the others dropped; added at the end when none), the
 * other lines as they were. 0, or an errno; what in *what. */
static int
hosts_write(const char *host, const char **what)
{
	struct stat st;
	char *old = NULL, *new = NULL, *s, *eol, *w;
	size_t len = 0, nlen, l;
	unsigned mode = 0644;
	ssize_t n;
	int fd, e = 0, done = 0;

	*what = "read /etc/hosts";
	if ((fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC)) >= 0) {
		if (fstat(fd, &st) < 0)
			e = errno;
		else if (st.st_size > HOSTS_MAX)
			e = EFBIG;
		else if ((old = malloc((size_t)st.st_size + 1)) == NULL)
			e = ENOMEM;
		else
			mode = (unsigned)st.st_mode & 07777;
		while (e == 0 && len < (size_t)st.st_size) {
			if ((n = read(fd, old + len, (size_t)st.st_size -
			    len)) < 0 && errno == EINTR)
				continue;
			if (n < 0)
				e = errno;
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		close(fd);
		if (old != NULL)
			old[len] = '\0';	/* strspn stops there */
	} else if (errno != ENOENT)
		e = errno;
	nlen = len + 1 + sizeof("127.0.1.1\t\n") + strlen(host);
	if (e == 0 && (new = malloc(nlen)) == NULL)
		e = ENOMEM;
	if (e != 0)
		goto out;
	w = new;
	for (s = old; s != NULL && s < old + len; s = eol) {
		eol = memchr(s, '\n', (size_t)(old + len - s));
		eol = eol != NULL ? eol + 1 : old + len;
		l = strspn(s, " \t");
		if ((size_t)(eol - s) >= l + 9 && memcmp(s + l, "127.0.1.1",
		    9) == 0 && (s + l + 9 == eol ||
		    strchr(" \t\n#", s[l + 9]) != NULL)) {
			if (!done)
				w += sprintf(w, "127.0.1.1\t%s\n", host);
			done = 1;
			continue;
		}
		memcpy(w, s, (size_t)(eol - s));
		w += eol - s;
		if (eol == old + len && eol[-1] != '\n')
			*w++ = '\n';
	}
	if (!done)
		w += sprintf(w, "127.0.1.1\t%s\n", host);
	*what = "write /etc/hosts";
	e = file_replace("/etc/hosts", new, (size_t)(w - new), mode);
out:
	free(old);
	free(new);
	return e;
}

/* rtnetlink: one request at a time on a socket of ours, its answers
 * matched by sequence number. */
struct nl {
	int fd;
	uint32_t seq;
	char ext[200];		/* the kernel's extended ack message */
};

union nlmsg {
	struct nlmsghdr h;
	unsigned char b[512];
};

static unsigned char nlrbuf[64 * 1024] __attribute__((aligned(8)));

static void *
nl_start(union nlmsg *m, int type, int flags, size_t hdr)
{
	memset(m, 0, sizeof(*m));
	m->h.nlmsg_len = NLMSG_LENGTH(hdr);
	m->h.nlmsg_type = (uint16_t)type;
	m->h.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	return NLMSG_DATA(&m->h);
}

/* Our attributes are a few addresses: they fit. */
static void
nl_attr(union nlmsg *m, int type, const void *data, size_t len)
{
	struct rtattr *a;
	size_t off = NLMSG_ALIGN(m->h.nlmsg_len);

	if (off + RTA_SPACE(len) > sizeof(m->b))
		return;
	a = (struct rtattr *)(m->b + off);
	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	m->h.nlmsg_len = (uint32_t)(off + RTA_ALIGN(a->rta_len));
}

/* The attributes of a message whose header after the nlmsghdr is hdr
 * bytes: tb[type] for type < n (NULL when absent); -1 when it is
 * shorter than its header. */
static int
nl_attrs(const struct nlmsghdr *h, size_t hdr, struct rtattr **tb, int n)
{
	struct rtattr *a;
	int left;

	memset(tb, 0, (size_t)n * sizeof(*tb));
	if (h->nlmsg_len < NLMSG_LENGTH(hdr))
		return -1;
	a = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(hdr));
	left = (int)(h->nlmsg_len - NLMSG_SPACE(hdr));
	if (h->nlmsg_len < NLMSG_SPACE(hdr))
		left = 0;
	for (; RTA_OK(a, left); a = RTA_NEXT(a, left))
		if (a->rta_type < n)
			tb[a->rta_type] = a;
	return 0;
}

static int
nl_open(struct nl *nl)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = NL_TIMEOUT };
	int one = 1;

	nl->seq = (uint32_t)now_ms();
	nl->ext[0] = '\0';
	if ((nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_ROUTE)) < 0)
		return errno;
	if (bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(nl->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
	    sizeof(tv)) < 0) {
		int e = errno;

		close_fd(&nl->fd);
		return e;
	}
	/* the kernel's reason in words, our request not echoed back */
	(void)setsockopt(nl->fd, SOL_NETLINK, NETLINK_EXT_ACK, &one,
	    sizeof(one));
	(void)setsockopt(nl->fd, SOL_NETLINK, NETLINK_CAP_ACK, &one,
	    sizeof(one));
	return 0;
}

/* An error's extended ack message (NLMSGERR_ATTR_MSG) into nl->ext. */
static void
nl_extack(struct nl *nl, const struct nlmsghdr *h)
{
	const struct nlattr *a;
	size_t off = NLMSG_LENGTH(sizeof(struct nlmsgerr)), alen;

	if ((h->nlmsg_flags & (NLM_F_ACK_TLVS | NLM_F_CAPPED)) !=
	    (NLM_F_ACK_TLVS | NLM_F_CAPPED))
		return;
	while (off + NLA_HDRLEN <= h->nlmsg_len) {
		a = (const struct nlattr *)((const char *)h + off);
		if (a->nla_len < NLA_HDRLEN || off + a->nla_len > h->nlmsg_len)
			return;
		alen = a->nla_len - NLA_HDRLEN;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG &&
		    alen > 0) {
			snprintf(nl->ext, sizeof(nl->ext), "%.*s", (int)alen,
			    (const char *)a + NLA_HDRLEN);
			return;
		}
		off += NLA_ALIGN(a->nla_len);
	}
}

/*
 * Sends m and reads the kernel's answers to it: a dump's messages to cb
 * until its end, a request's ack. 0, or an errno (ETIMEDOUT: no answer
 * within NL_TIMEOUT s); the kernel's words, if any, in nl->ext.
 */
static int
nl_talk(struct nl *nl, union nlmsg *m,
    void (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h;
	struct nlmsgerr *err;
	socklen_t salen;
	ssize_t n;
	int left;

	nl->ext[0] = '\0';
	m->h.nlmsg_seq = ++nl->seq;
	if (cb == NULL)
		m->h.nlmsg_flags |= NLM_F_ACK;
	if (sendto(nl->fd, m, m->h.nlmsg_len, 0, (struct sockaddr *)&sa,
	    sizeof(sa)) < 0)
		return errno;
	for (;;) {
		salen = sizeof(sa);
		n = recvfrom(nl->fd, nlrbuf, sizeof(nlrbuf), 0,
		    (struct sockaddr *)&sa, &salen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ?
			    ETIMEDOUT : errno;
		if (sa.nl_pid != 0)
			continue;	/* not the kernel's */
		left = (int)n;
		for (h = (struct nlmsghdr *)nlrbuf; NLMSG_OK(h, left);
		    h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != nl->seq)
				continue;	/* an answer we gave up on */
			if (h->nlmsg_type == NLMSG_DONE) {
				/* a dump's end: its error, if any, after */
				if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(int)) &&
				    *(int *)NLMSG_DATA(h) < 0)
					return -*(int *)NLMSG_DATA(h);
				return 0;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				err = NLMSG_DATA(h);
				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*err)))
					return EPROTO;
				if (err->error != 0)
					nl_extack(nl, h);
				return -err->error;
			}
			if (cb != NULL)
				cb(h, arg);
		}
	}
}

/* An errno and the kernel's words about it. */
static const char *
nl_why(const struct nl *nl, int e, char *buf, size_t len)
{
	if (nl->ext[0] == '\0')
		return strerror(e);
	snprintf(buf, len, "%s (%s)", strerror(e), nl->ext);
	return buf;
}

/* The interface to configure: the one named, or the first ethernet
 * one (lowest ifindex, not loopback). */
struct link_pick {
	const char *want;
	int index;
	char name[IFNAMSIZ];
};

static void
link_seen(const struct nlmsghdr *h, void *arg)
{
	struct link_pick *lp = arg;
	struct rtattr *tb[IFLA_IFNAME + 1];
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	char name[IFNAMSIZ];
	size_t l;

	if (h->nlmsg_type != RTM_NEWLINK ||
	    nl_attrs(h, sizeof(*ifi), tb, IFLA_IFNAME + 1) < 0 ||
	    tb[IFLA_IFNAME] == NULL)
		return;
	l = strnlen(RTA_DATA(tb[IFLA_IFNAME]), RTA_PAYLOAD(tb[IFLA_IFNAME]));
	if (l == 0 || l >= sizeof(name))
		return;
	memcpy(name, RTA_DATA(tb[IFLA_IFNAME]), l);
	name[l] = '\0';
	if (lp->want != NULL ? strcmp(name, lp->want) == 0 :
	    ifi->ifi_type == ARPHRD_ETHER && !(ifi->ifi_flags & IFF_LOOPBACK) &&
	    (lp->index == 0 || ifi->ifi_index < lp->index)) {
		lp->index = ifi->ifi_index;
		memcpy(lp->name, name, l + 1);
	}
}

/* A default route of the main table, to delete. */
struct route {
	unsigned char tos, protocol, scope, type;
	struct in_addr gw;
	uint32_t oif, prio;
	int has_gw, has_oif, has_prio;
};

struct route_list {
	struct route r[ID_ROUTES];
	int n;
};

static void
route_seen(const struct nlmsghdr *h, void *arg)
{
	struct route_list *rl = arg;
	struct rtattr *tb[RTA_TABLE + 1];
	const struct rtmsg *rt = NLMSG_DATA(h);
	struct route *r;
	uint32_t table;

	if (h->nlmsg_type != RTM_NEWROUTE ||
	    nl_attrs(h, sizeof(*rt), tb, RTA_TABLE + 1) < 0 ||
	    rt->rtm_family != AF_INET || rt->rtm_dst_len != 0 ||
	    rl->n == ID_ROUTES)
		return;
	table = rt->rtm_table;
	if (tb[RTA_TABLE] != NULL && RTA_PAYLOAD(tb[RTA_TABLE]) >= 4)
		memcpy(&table, RTA_DATA(tb[RTA_TABLE]), 4);
	if (table != RT_TABLE_MAIN)
		return;
	r = &rl->r[rl->n++];
	memset(r, 0, sizeof(*r));
	r->tos = rt->rtm_tos;
	r->protocol = rt->rtm_protocol;
	r->scope = rt->rtm_scope;
	r->type = rt->rtm_type;
	if ((r->has_gw = tb[RTA_GATEWAY] != NULL &&
	    RTA_PAYLOAD(tb[RTA_GATEWAY]) == 4))
		memcpy(&r->gw, RTA_DATA(tb[RTA_GATEWAY]), 4);
	if ((r->has_oif = tb[RTA_OIF] != NULL && RTA_PAYLOAD(tb[RTA_OIF]) >= 4))
		memcpy(&r->oif, RTA_DATA(tb[RTA_OIF]), 4);
	if ((r->has_prio = tb[RTA_PRIORITY] != NULL &&
	    RTA_PAYLOAD(tb[RTA_PRIORITY]) >= 4))
		memcpy(&r->prio, RTA_DATA(tb[RTA_PRIORITY]), 4);
}

/* An IPv4 address of the interface, to delete. */
struct addr_list {
	int index;
	struct {
		unsigned char prefix;
		struct in_addr local, peer;
		int has_local, has_peer;
	} a[ID_ADDRS];
	int n;
};

static void
addr_seen(const struct nlmsghdr *h, void *arg)
{
	struct addr_list *al = arg;
	struct rtattr *tb[IFA_LOCAL + 1];
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	int i;

	if (h->nlmsg_type != RTM_NEWADDR ||
	    nl_attrs(h, sizeof(*ifa), tb, IFA_LOCAL + 1) < 0 ||
	    ifa->ifa_family != AF_INET || (int)ifa->ifa_index != al->index ||
	    al->n == ID_ADDRS)
		return;
	i = al->n++;
	al->a[i].prefix = ifa->ifa_prefixlen;
	if ((al->a[i].has_local = tb[IFA_LOCAL] != NULL &&
	    RTA_PAYLOAD(tb[IFA_LOCAL]) == 4))
		memcpy(&al->a[i].local, RTA_DATA(tb[IFA_LOCAL]), 4);
	if ((al->a[i].has_peer = tb[IFA_ADDRESS] != NULL &&
	    RTA_PAYLOAD(tb[IFA_ADDRESS]) == 4))
		memcpy(&al->a[i].peer, RTA_DATA(tb[IFA_ADDRESS]), 4);
}

/* RTM_NEWLINK on the interface: its flags (IFF_UP in change), and a
 * MAC when mac is not NULL. */
static int
link_set(struct nl *nl, int index, unsigned flags, const unsigned char *mac)
{
	union nlmsg m;
	struct ifinfomsg *ifi = nl_start(&m, RTM_NEWLINK, 0, sizeof(*ifi));

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = index;
	ifi->ifi_flags = flags;
	ifi->ifi_change = IFF_UP;
	if (mac != NULL) {
		ifi->ifi_change = 0;
		nl_attr(&m, IFLA_ADDRESS, mac, 6);
	}
	return nl_talk(nl, &m, NULL, NULL);
}

/*
 * Step 5: its MAC set (with 'm': live, else down, set, up), up anyway,
 * its IPv4 addresses replaced by 'a', every default route of the main
 * table by one via 'g' on it. 0, or -1 with the failed step in msg.
 */
static int
ident_net(struct nl *nl, const struct ident *d, const struct link_pick *lp,
    char *msg, size_t mlen)
{
	struct addr_list al;
	struct route_list rl;
	union nlmsg m;
	struct ifaddrmsg *ifa;
	struct rtmsg *rt;
	struct in_addr brd;
	char why[320], ip[INET_ADDRSTRLEN];
	uint32_t oif = (uint32_t)lp->index;
	int e, i, round;

	/* virtio-net changes its MAC live (IFF_LIVE_ADDR_CHANGE): no down
	 * and up (each a round of the device's queues) unless refused */
	if (d->mac_s != NULL && link_set(nl, lp->index, 0, d->mac) != 0) {
		if ((e = link_set(nl, lp->index, 0, NULL)) != 0) {
			snprintf(msg, mlen, "500 take %s down: %s", lp->name,
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
		if ((e = link_set(nl, lp->index, 0, d->mac)) != 0) {
			snprintf(msg, mlen, "500 set the MAC %s on %s: %s",
			    d->mac_s, lp->name,
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
	}
	if ((e = link_set(nl, lp->index, IFF_UP, NULL)) != 0) {
		snprintf(msg, mlen, "500 bring %s up: %s", lp->name,
		    nl_why(nl, e, why, sizeof(why)));
		return -1;
	}
	/* Every IPv4 address goes (deleting a primary one can take its
	 * secondaries along: gone already is no error), in rounds of
	 * ID_ADDRS. */
	for (round = 0; d->addr_s != NULL; round++) {
		memset(&al, 0, sizeof(al));
		al.index = lp->index;
		ifa = nl_start(&m, RTM_GETADDR, NLM_F_DUMP, sizeof(*ifa));
		ifa->ifa_family = AF_INET;
		if ((e = nl_talk(nl, &m, addr_seen, &al)) != 0) {
			snprintf(msg, mlen, "500 list the addresses of %s: %s",
			    lp->name, nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
		if (al.n == 0)
			break;
		if (round == 16) {
			snprintf(msg, mlen, "500 delete the addresses of %s: "
			    "they keep coming", lp->name);
			return -1;
		}
		for (i = 0; i < al.n; i++) {
			ifa = nl_start(&m, RTM_DELADDR, 0, sizeof(*ifa));
			ifa->ifa_family = AF_INET;
			ifa->ifa_prefixlen = al.a[i].prefix;
			ifa->ifa_index = (uint32_t)lp->index;
			if (al.a[i].has_local)
				nl_attr(&m, IFA_LOCAL, &al.a[i].local, 4);
			if (al.a[i].has_peer)
				nl_attr(&m, IFA_ADDRESS, &al.a[i].peer, 4);
			e = nl_talk(nl, &m, NULL, NULL);
			if (e != 0 && e != EADDRNOTAVAIL && e != ENOENT) {
				inet_ntop(AF_INET, &al.a[i].local, ip,
				    sizeof(ip));
				snprintf(msg, mlen, "500 delete the address "
				    "%s/%d from %s: %s", ip, al.a[i].prefix,
				    lp->name, nl_why(nl, e, why, sizeof(why)));
				return -1;
			}
		}
	}
	if (d->addr_s != NULL) {
		ifa = nl_start(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL,
		    sizeof(*ifa));
		ifa->ifa_family = AF_INET;
		ifa->ifa_prefixlen = (unsigned char)d->prefix;
		ifa->ifa_scope = RT_SCOPE_UNIVERSE;
		ifa->ifa_index = (uint32_t)lp->index;
		nl_attr(&m, IFA_LOCAL, &d->addr, 4);
		nl_attr(&m, IFA_ADDRESS, &d->addr, 4);
		if (d->prefix < 31) {
			brd.s_addr = d->addr.s_addr |
			    htonl(0xffffffffu >> d->prefix);
			nl_attr(&m, IFA_BROADCAST, &brd, 4);
		}
		if ((e = nl_talk(nl, &m, NULL, NULL)) != 0) {
			snprintf(msg, mlen, "500 set the address %s on %s: %s",
			    d->addr_s, lp->name,
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
	}
	if (d->gw_s == NULL)
		return 0;
	memset(&rl, 0, sizeof(rl));
	rt = nl_start(&m, RTM_GETROUTE, NLM_F_DUMP, sizeof(*rt));
	rt->rtm_family = AF_INET;
	if ((e = nl_talk(nl, &m, route_seen, &rl)) != 0) {
		snprintf(msg, mlen, "500 list the routes: %s",
		    nl_why(nl, e, why, sizeof(why)));
		return -1;
	}
	for (i = 0; i < rl.n; i++) {
		rt = nl_start(&m, RTM_DELROUTE, 0, sizeof(*rt));
		rt->rtm_family = AF_INET;
		rt->rtm_table = RT_TABLE_MAIN;
		rt->rtm_tos = rl.r[i].tos;
		rt->rtm_scope = RT_SCOPE_NOWHERE;
		rt->rtm_type = rl.r[i].type;
		if (rl.r[i].has_gw)
			nl_attr(&m, RTA_GATEWAY, &rl.r[i].gw, 4);
		if (rl.r[i].has_oif)
			nl_attr(&m, RTA_OIF, &rl.r[i].oif, 4);
		if (rl.r[i].has_prio)
			nl_attr(&m, RTA_PRIORITY, &rl.r[i].prio, 4);
		e = nl_talk(nl, &m, NULL, NULL);
		if (e != 0 && e != ESRCH) {
			snprintf(msg, mlen, "500 delete a default route: %s",
			    nl_why(nl, e, why, sizeof(why)));
			return -1;
		}
	}
	rt = nl_start(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
	    sizeof(*rt));
	rt->rtm_family = AF_INET;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_BOOT;
	rt->rtm_scope = RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_UNICAST;
	nl_attr(&m, RTA_GATEWAY, &d->gw, 4);
	nl_attr(&m, RTA_OIF, &oif, 4);
	if ((e = nl_talk(nl, &m, NULL, NULL)) != 0) {
		snprintf(msg, mlen, "500 set the default route via %s on "
		    "%s: %s", d->gw_s, lp->name,
		    nl_why(nl, e, why, sizeof(why)));
		return -1;
	}
	return 0;
}

/*
 * 'U': the fields checked (and the interface found) before anything
 * changes, then the steps in order: clock, entropy, machine id,
 * hostname, network, resolv.conf. The first failure is told and ends
 * it (the steps before it stay done: berthd discards such a clone).
 */
void
ident_apply(uint32_t id, const unsigned char *p, size_t len)
{
	struct ident d;
	struct link_pick lp = { 0 };
	struct nl nl = { .fd = -1 };
	struct timespec ts;
	struct stat st;
	const char *what;
	char msg[600], buf[INET_ADDRSTRLEN + 16], text[128], *w;
	int e, i, net;

	if (ident_parse(p, len, &d, text, sizeof(text)) < 0) {
		failf(id, "400 malformed identity: %s", text);
		goto out;
	}
	net = d.mac_s != NULL || d.addr_s != NULL || d.gw_s != NULL;
	if (net || d.ifname != NULL) {
		union nlmsg m;
		struct ifinfomsg *ifi;

		if ((e = nl_open(&nl)) != 0) {
			failf(id, "500 open a netlink socket: %s", strerror(e));
			goto out;
		}
		lp.want = d.ifname;
		ifi = nl_start(&m, RTM_GETLINK, NLM_F_DUMP, sizeof(*ifi));
		ifi->ifi_family = AF_UNSPEC;
		if ((e = nl_talk(&nl, &m, link_seen, &lp)) != 0) {
			failf(id, "500 list the network interfaces: %s",
			    nl_why(&nl, e, msg, sizeof(msg)));
			goto out;
		}
		if (lp.index == 0) {
			if (d.ifname != NULL)
				failf(id, "404 no network interface %s",
				    d.ifname);
			else
				failf(id, "500 no ethernet interface to "
				    "configure");
			goto out;
		}
	}
	/* set when it is off by a second or more: a clone's clock is its
	 * snapshot's (minutes or days behind); under a second is the
	 * message's own way here, and a step back for it would do harm */
	if (d.clock >= 0 && clock_gettime(CLOCK_REALTIME, &ts) == 0 &&
	    llabs((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
	    d.clock) >= 1000) {
		ts.tv_sec = (time_t)(d.clock / 1000);
		ts.tv_nsec = (long)(d.clock % 1000) * 1000000;
		if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
			failf(id, "500 set the clock to %lld ms: %s", d.clock,
			    strerror(errno));
			goto out;
		}
	}
	if (d.has_rnd && (e = entropy_add(d.rnd, sizeof(d.rnd))) != 0) {
		failf(id, "500 add entropy to /dev/urandom: %s", strerror(e));
		goto out;
	}
	if (d.mid != NULL) {
		snprintf(text, sizeof(text), "%s\n", d.mid);
		if ((e = file_replace("/etc/machine-id", text, strlen(text),
		    0444)) != 0) {
			failf(id, "500 write /etc/machine-id: %s", strerror(e));
			goto out;
		}
		/* D-Bus's own copy, where it is not a link to ours */
		if (lstat("/var/lib/dbus/machine-id", &st) == 0 &&
		    S_ISREG(st.st_mode) && (e = file_replace(
		    "/var/lib/dbus/machine-id", text, strlen(text), 0444)) !=
		    0) {
			failf(id, "500 write /var/lib/dbus/machine-id: %s",
			    strerror(e));
			goto out;
		}
	}
	if (d.host != NULL) {
		if (sethostname(d.host, strlen(d.host)) < 0) {
			failf(id, "500 set the hostname %s: %s", d.host,
			    strerror(errno));
			goto out;
		}
		snprintf(text, sizeof(text), "%s\n", d.host);
		if ((e = file_replace("/etc/hostname", text, strlen(text),
		    0644)) != 0) {
			failf(id, "500 write /etc/hostname: %s", strerror(e));
			goto out;
		}
		if ((e = hosts_write(d.host, &what)) != 0) {
			failf(id, "500 %s: %s", what, strerror(e));
			goto out;
		}
	}
	if (net && ident_net(&nl, &d, &lp, msg, sizeof(msg)) < 0) {
		failf(id, "%s", msg);
		goto out;
	}
	if (d.nns > 0) {
		w = msg;
		for (i = 0; i < d.nns; i++) {
			inet_ntop(AF_INET, &d.ns[i], buf, sizeof(buf));
			w += sprintf(w, "nameserver %s\n", buf);
		}
		if ((e = file_replace("/etc/resolv.conf", msg,
		    (size_t)(w - msg), 0644)) != 0) {
			failf(id, "500 write /etc/resolv.conf: %s",
			    strerror(e));
			goto out;
		}
	}
	(void)port_frame(BA_EXIT, id, "exit 0", 6, NULL, 0);
out:
	explicit_bzero(d.rnd, sizeof(d.rnd));
	close_fd(&nl.fd);
}
