/*
 * nflogd.c — the NFLOG reader helper ("berthd: nflog"): unprivileged and
 * chrooted (proc.h), it reads the denial log from the netlink socket the
 * parent bound to the NFLOG group (binding needs CAP_NET_ADMIN; reading
 * does not), parses each logged packet (nc_nflog_parse: kernel-made
 * bytes about a guest's packet, headers included) and sends the parent
 * one typed struct nc_denial per denial. The parent checks each field
 * and attributes it (egress.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "helper.h"
#include "log.h"
#include "proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

static struct {
	struct event_base *base;
	struct px_chan	*ch;
	struct nc_nflog	*nflog;
	struct event	*ev;
	unsigned long long lost;
} N;

static void
on_denial(const struct nc_denial *d, void *arg)
{
	(void)arg;
	px_chan_send(N.ch, HM_NFLOG_DENIAL, d, sizeof(*d), NULL, 0);
}

static void
readable(evutil_socket_t fd, short what, void *arg)
{
	char err[NC_ERRLEN];
	int r;

	if ((r = nc_nflog_read(N.nflog, on_denial, NULL, err, sizeof(err))) < 0) {
		/* ENOBUFS: the kernel dropped entries; say so now and then */
		if (r == -ENOBUFS)
			N.lost++;
		if (r != -ENOBUFS || (N.lost & (N.lost - 1)) == 0)
			log_warnx("denial log: %s", err);
	}
}

static void
on_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct hm_nflog_socket s;
	char err[NC_ERRLEN];

	if (type != HM_NFLOG_SOCKET || len != sizeof(s) || nfds != 1 ||
	    N.nflog != NULL)
		fatalx("unexpected message %u from the parent", type);
	memcpy(&s, p, sizeof(s));
	if ((N.nflog = nc_nflog_adopt(fds[0], s.group, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	fds[0] = -1;	/* the reader's now */
	N.ev = event_new(N.base, nc_nflog_fd(N.nflog), EV_READ | EV_PERSIST,
	    readable, NULL);
	if (N.ev == NULL || event_add(N.ev, NULL) != 0)
		fatalx("event_new");
	log_debug("reading NFLOG group %u", s.group);
}

static void
on_close(struct px_chan *ch, int corrupt, void *arg)
{
	/* the parent is gone (or mad): nobody wants the denials */
	exit(corrupt ? 1 : 0);
}

int
px_nflogd_main(int fd)
{
	if ((N.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((N.ch = px_chan_new(N.base, fd, on_msg, on_close, NULL)) == NULL)
		fatalx("channel");
	event_base_dispatch(N.base);
	return 0;
}
