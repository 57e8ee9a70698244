/*
 * ident.c — a clone restored from a ready snapshot is made its own before
 * anyone else reaches it: one session with its guest agent (ping, then
 * the 'U' identity request of vmm/proto/agent_proto.h: hostname, machine
 * id, MAC, address, gateway, resolver, clock, entropy) and the answer.
 * Until the agent says "exit 0" the sandbox is not running: a clone that
 * cannot be given its identity is never served as its template's twin.
 *
 * What is read here is a guest's (an untrusted length, type and bytes):
 * frames are bounded by BA_MAX_PAYLOAD, everything but the pong and the
 * answer on channel 1 is skipped unread, and the whole exchange has a
 * deadline.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend.h"
#include "proto/agent_proto.h"
#include "nc_link.h"
#include "vmm.h"

#define IDENT_CHAN 1

struct vmm_ident {
	struct vmm_sandbox *sb;
	vmm_ident_cb cb;
	void *arg;
	int fd;
	struct event *rd, *wr, *dl, *retry;
	unsigned char out[2048];
	size_t outlen, outoff;
	unsigned char hdr[BA_HDR];
	size_t hdrlen;
	unsigned char *pl;		/* payload being read (kept frames) */
	uint32_t plen, pgot;
	int keep;			/* keep this frame's payload */
	int step;			/* 0 ping sent, 1 identity sent, 2
					 * the warm-up command sent */
	int warm;			/* then run `true` once (a pool
					 * member: the exec paths translated
					 * before the claim's first command) */
	unsigned char nonce[8];
	unsigned tries;
};

static void ident_end(struct vmm_ident *id, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
ident_free(struct vmm_ident *id)
{
	if (id->rd != NULL)
		event_free(id->rd);
	if (id->wr != NULL)
		event_free(id->wr);
	if (id->dl != NULL)
		event_free(id->dl);
	if (id->retry != NULL)
		event_free(id->retry);
	if (id->fd >= 0)
		close(id->fd);
	free(id->pl);
	free(id);
}

static void
ident_end(struct vmm_ident *id, int ok, const char *fmt, ...)
{
	char why[VMM_ERRLEN];
	struct vmm_sandbox *sb = id->sb;
	vmm_ident_cb cb = id->cb;
	void *arg = id->arg;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	sb->ident = NULL;
	ident_free(id);
	cb(sb, ok, why, arg);
}

void
vmm_ident_cancel(struct vmm_sandbox *sb)
{
	if (sb->ident != NULL) {
		ident_free(sb->ident);
		sb->ident = NULL;
	}
}

static void
put_frame(struct vmm_ident *id, char type, const void *p, size_t n)
{
	uint32_t be = htonl((uint32_t)n);

	memcpy(id->out + id->outlen, &be, 4);
	id->out[id->outlen + 4] = (unsigned char)type;
	memcpy(id->out + id->outlen + BA_HDR, p, n);
	id->outlen += BA_HDR + n;
}

/* The 'U' payload: channel 1, then the fields. */
static int
put_identity(struct vmm_ident *id, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = id->sb;
	unsigned char buf[1024], rnd[64 + 16];
	char gw[INET_ADDRSTRLEN], ip[INET_ADDRSTRLEN], mac[18], f[300];
	size_t n = 0, i;
	uint32_t ch = htonl(IDENT_CHAN);
	struct timespec ts;
	int w;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		return -1;
	}
	memcpy(buf, &ch, 4);
	n = 4;
#define FIELD(...) do {							\
	w = snprintf(f, sizeof(f), __VA_ARGS__);			\
	memcpy(buf + n, f, (size_t)w + 1);				\
	n += (size_t)w + 1;						\
} while (0)
	/* a moved guest given its new address keeps its name and machine
	 * id (every field is optional to the agent); a clone gets its own */
	if (!sb->readdress_pending || sb->fork_pending) {
		FIELD("h%s", sb->id);
		/* a version-4 style random id, as systemd-machine-id-setup
		 * does */
		w = 0;
		for (i = 0; i < 16; i++)
			w += snprintf(f + w, sizeof(f) - (size_t)w, "%02x",
			    rnd[64 + i]);
		memcpy(buf + n, "i", 1);
		memcpy(buf + n + 1, f, 33);
		n += 34;
	}
	nc_link_mac_format(sb->mac, mac, sizeof(mac));
	FIELD("m%s", mac);
	inet_ntop(AF_INET, &sb->guest_ip, ip, sizeof(ip));
	inet_ntop(AF_INET, &sb->gateway, gw, sizeof(gw));
	FIELD("a%s/%u", ip, (unsigned)sb->prefix);
	FIELD("g%s", gw);
	FIELD("n%s", sb->m->dns[0] ? sb->m->dns : gw);
	clock_gettime(CLOCK_REALTIME, &ts);
	FIELD("c%llu", (unsigned long long)ts.tv_sec * 1000ULL +
	    (unsigned long long)ts.tv_nsec / 1000000ULL);
	buf[n++] = 'r';
	for (i = 0; i < 64; i++)
		n += (size_t)snprintf((char *)buf + n, 3, "%02x", rnd[i]);
	buf[n++] = '\0';
#undef FIELD
	explicit_bzero(rnd, sizeof(rnd));
	put_frame(id, BA_IDENTITY, buf, n);
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

/* -1 when the exchange ended (id is gone), else 0. */
static int
ident_flush(struct vmm_ident *id)
{
	ssize_t w;

	while (id->outoff < id->outlen) {
		w = write(id->fd, id->out + id->outoff, id->outlen - id->outoff);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			event_add(id->wr, NULL);
			return 0;
		}
		if (w <= 0) {
			ident_end(id, 0, "identity: writing to the guest agent: "
			    "%s", w < 0 ? strerror(errno) : "closed");
			return -1;
		}
		id->outoff += (size_t)w;
	}
	id->outoff = id->outlen = 0;
	return 0;
}

static void
ident_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)ident_flush(arg);
}

/* A whole frame we kept: the pong, or the answer on our channel. -1
 * when that ended the exchange (id is gone), else 0. */
static int
ident_frame(struct vmm_ident *id, char type)
{
	uint32_t ch;

	if (id->step == 0) {
		if (type != BA_PONG || id->plen < sizeof(id->nonce) ||
		    memcmp(id->pl, id->nonce, sizeof(id->nonce)) != 0)
			return 0;	/* an earlier session's */
		if (id->plen != sizeof(id->nonce) + 1 ||
		    id->pl[sizeof(id->nonce)] < BA_PROTO) {
			ident_end(id, 0, "identity: the guest agent speaks "
			    "protocol %u, a clone needs %u",
			    id->plen > sizeof(id->nonce) ?
			    id->pl[sizeof(id->nonce)] : 1u, (unsigned)BA_PROTO);
			return -1;
		}
		id->step = 1;
		{
			char err[VMM_ERRLEN];

			if (put_identity(id, err, sizeof(err)) < 0) {
				ident_end(id, 0, "identity: %s", err);
				return -1;
			}
		}
		return ident_flush(id);
	}
	if (id->plen < 4)
		return 0;
	memcpy(&ch, id->pl, 4);
	if (ntohl(ch) != (id->step == 2 ? IDENT_CHAN + 1u : IDENT_CHAN))
		return 0;
	if (id->step == 2) {		/* the warm-up's end, whatever it was */
		ident_end(id, 1, "%s", "");
		return -1;
	}
	if (type == BA_EXIT && id->warm) {
		static const char cmd[] = "t10000\0atrue";
		unsigned char p[4 + sizeof(cmd)];
		uint32_t c2 = htonl(IDENT_CHAN + 1);

		if (id->plen - 4 != 6 || memcmp(id->pl + 4, "exit 0", 6) != 0) {
			ident_end(id, 0, "identity: the guest agent answered "
			    "'%.*s'", (int)(id->plen - 4 < 40 ? id->plen - 4 :
			    40), (const char *)id->pl + 4);
			return -1;
		}
		id->step = 2;
		memcpy(p, &c2, 4);
		memcpy(p + 4, cmd, sizeof(cmd));
		put_frame(id, BA_EXEC, p, sizeof(p));
		put_frame(id, BA_STDIN, &c2, 4);	/* stdin's EOF */
		return ident_flush(id);
	}
	if (type == BA_EXIT) {
		char t[64];
		size_t n = id->plen - 4 < sizeof(t) - 1 ? id->plen - 4 :
		    sizeof(t) - 1;

		memcpy(t, id->pl + 4, n);
		t[n] = '\0';
		if (strcmp(t, "exit 0") == 0)
			ident_end(id, 1, "%s", "");
		else
			ident_end(id, 0, "identity: the guest agent answered "
			    "'%.40s'", t);
		return -1;
	} else if (type == BA_FAIL) {
		char t[256];
		size_t n = id->plen - 4 < sizeof(t) - 1 ? id->plen - 4 :
		    sizeof(t) - 1, i;

		memcpy(t, id->pl + 4, n);
		t[n] = '\0';
		for (i = 0; i < n; i++)	/* a guest's text, printable */
			if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
				t[i] = '?';
		ident_end(id, 0, "identity refused by the guest agent: %s", t);
		return -1;
	}
	return 0;
}

static void
ident_readable(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_ident *id = arg;
	unsigned char buf[16384];
	ssize_t n;
	size_t off = 0;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		ident_end(id, 0, "identity: the guest agent's port %s",
		    n < 0 ? strerror(errno) : "closed");
		return;
	}
	while (off < (size_t)n) {
		if (id->hdrlen < BA_HDR) {
			size_t k = BA_HDR - id->hdrlen;

			if (k > (size_t)n - off)
				k = (size_t)n - off;
			memcpy(id->hdr + id->hdrlen, buf + off, k);
			id->hdrlen += k;
			off += k;
			if (id->hdrlen < BA_HDR)
				break;
			memcpy(&id->plen, id->hdr, 4);
			id->plen = ntohl(id->plen);
			if (id->plen > BA_MAX_PAYLOAD) {
				ident_end(id, 0, "identity: the guest agent "
				    "sent a frame of %u bytes",
				    (unsigned)id->plen);
				return;
			}
			id->pgot = 0;
			id->keep = id->step == 0 ? id->hdr[4] == BA_PONG :
			    (id->hdr[4] == BA_EXIT || id->hdr[4] == BA_FAIL);
			free(id->pl);
			id->pl = NULL;
			if (id->keep && (id->pl = malloc(id->plen + 1)) == NULL) {
				ident_end(id, 0, "identity: out of memory");
				return;
			}
		}
		{
			size_t k = id->plen - id->pgot;

			if (k > (size_t)n - off)
				k = (size_t)n - off;
			if (id->keep)
				memcpy(id->pl + id->pgot, buf + off, k);
			id->pgot += (uint32_t)k;
			off += k;
		}
		if (id->pgot == id->plen) {
			char type = (char)id->hdr[4];

			id->hdrlen = 0;
			if (id->keep && ident_frame(id, type) < 0)
				return;		/* ended: id is gone */
		}
	}
}

static void
ident_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_ident *id = arg;

	(void)fd;
	(void)what;
	ident_end(id, 0, "identity: the guest agent did not answer %s within "
	    "%u ms", id->step == 0 ? "the ping" : "the identity request",
	    VMM_IDENT_MS);
}

static int
ident_connect(struct vmm_ident *id, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = id->sb;
	int fd;

	if ((fd = vmm_agent_socket(sb, err, errlen)) < 0)
		return fd;
	id->fd = fd;
	id->rd = event_new(sb->m->base, fd, EV_READ | EV_PERSIST,
	    ident_readable, id);
	id->wr = event_new(sb->m->base, fd, EV_WRITE, ident_writable, id);
	if (id->rd == NULL || id->wr == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	event_add(id->rd, NULL);
	if (getrandom(id->nonce, sizeof(id->nonce), 0) !=
	    (ssize_t)sizeof(id->nonce)) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		return -EIO;
	}
	put_frame(id, BA_PING, id->nonce, sizeof(id->nonce));
	return ident_flush(id) < 0 ? 1 : 0;
}

/* qemu's chardev socket may not listen yet right after its start. */
static void
ident_retry(evutil_socket_t fd0, short what, void *arg)
{
	struct vmm_ident *id = arg;
	char err[VMM_ERRLEN];
	struct timeval tv = { 0, 10 * 1000 };
	int rc;

	(void)fd0;
	(void)what;
	if ((rc = ident_connect(id, err, sizeof(err))) >= 0)
		return;		/* under way, or ended (1: id is gone) */
	if (++id->tries < 100) {
		event_add(id->retry, &tv);
		return;
	}
	ident_end(id, 0, "identity: %s", err);
}

int
vmm_ident_start(struct vmm_sandbox *sb, vmm_ident_cb cb, void *arg,
    char *err, size_t errlen)
{
	struct vmm_ident *id;

	if (sb->tpl.agent == NULL) {
		snprintf(err, errlen, "its template has no guest agent to "
		    "give a clone its identity");
		return -ENOTSUP;
	}
	if ((id = calloc(1, sizeof(*id))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	id->sb = sb;
	id->cb = cb;
	id->arg = arg;
	id->fd = -1;
	id->dl = evtimer_new(sb->m->base, ident_deadline, id);
	id->retry = evtimer_new(sb->m->base, ident_retry, id);
	if (id->dl == NULL || id->retry == NULL) {
		ident_free(id);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	sb->ident = id;
	vmm_timer_ms(id->dl, VMM_IDENT_MS);
	vmm_timer_ms(id->retry, 0);
	return 0;
}

int
vmm_ident_start_warm(struct vmm_sandbox *sb, vmm_ident_cb cb, void *arg,
    char *err, size_t errlen)
{
	int rc = vmm_ident_start(sb, cb, arg, err, errlen);

	if (rc == 0)
		sb->ident->warm = 1;
	return rc;
}
