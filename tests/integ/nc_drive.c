/*
 * nc_drive.c — drives libnetctl's egress API from shell tests, and plays
 * the small network roles those tests need without extra tools: a
 * listener (TCP banner + UDP echo) and a probe that reports how a
 * connection attempt ended and how long that took.
 *   nc_drive init [--uplink IF] [--tap-prefix P] [--group N] [--host-addr A] [--deny CIDR]
 *                 [--permit CIDR] [--conn-limit N] [--rate N]
 *   nc_drive fini | attach IF IP MAC GW MODE | detach IF IP | mode IP MODE
 *   nc_drive reattach IF IP MAC GW MODE [ALLOW-RULE...]
 *                              clear + attach + allow in one batch (keeps
 *                              the sandbox's limit state)
 *   nc_drive allow|unallow|deny|undeny IP RULE [--for DURATION]
 *   nc_drive bulk N            attach N fake sandboxes in one batch
 *   nc_drive count-rules | count SET
 *   nc_drive listen ADDR tcp:PORT|udp:PORT|hold:PORT...   (prints "ready";
 *                              hold: accept and keep the connection open)
 *   nc_drive conns IP PORT N [--hold] [--timeout MS]
 *     one line per connect (outcome, ms), then "elapsed MS" for all
 *                              N TCP connects one after the other, one
 *                              "outcome ms" line each; --hold keeps them
 *                              open (prints "held") until killed, then
 *                              they end with a reset
 *   nc_drive nflog GROUP       print denials as they come (prints "ready"):
 *                              "time reason src dst dport proto in=IF
 *                              out=IF" (IF "-" for none)
 *   nc_drive probe tcp|udp IP PORT [--bind SRC] [--timeout MS]
 *     prints open|refused|unreach|timeout|error and the elapsed ms
 *   nc_drive stream IP PORT [--interval MS] [--for MS]
 *     connects (prints "open" or "failed ERR"), then sends a line every
 *     MS (default 250) until the connection breaks: prints "cut TIME
 *     ERR" (TIME: CLOCK_REALTIME seconds) and exits; after --for MS
 *     without a break prints "alive N" (lines sent) and exits
 *   nc_drive flood IP PORT N   N UDP datagrams as fast as it can (prints
 *                              "sent N MS")
 *   nc_drive send6 IP6 PORT    one UDP datagram over IPv6
 *   nc_drive ct-count IP | ct-flush IP   conntrack entries from IP
 *   nc_drive recheck IP        a new generation: IP's flows re-checked
 *   nc_drive suppressed IF     denials of tap IF not logged (over rate)
 *   nc_drive harden IF | forwarding   the host settings (nc_host.c)
 * init also takes --sandbox IF,IP,MAC,GW,MODE[,ALLOW-RULE...] (any
 * number): those are attached in the batch that builds the table, as
 * berthd does when the global policy changes; --log-rate N.
 * Errors go to stderr as the library wrote them; exit 1.
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
#include <net/if.h>
#include <sys/socket.h>

#include "netctl.h"

static char err[NC_ERRLEN];

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "nc_drive: %s: %s\n", what, err);
	exit(1);
}

static struct in_addr
ip_arg(const char *s)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1) {
		fprintf(stderr, "nc_drive: bad address '%s'\n", s);
		exit(2);
	}
	return a;
}

static struct nc_cidr
cidr_arg(const char *s)
{
	struct nc_rule r;
	struct nc_cidr c;

	if (nc_rule_parse(s, &r, err, sizeof(err)) < 0 ||
	    r.kind != NC_RULE_ADDR)
		die("cidr");
	c.addr = r.addr;
	c.plen = r.plen;
	return c;
}

static enum nc_mode
mode_arg(const char *s)
{
	enum nc_mode m;

	if (nc_mode_parse(s, &m) < 0) {
		fprintf(stderr, "nc_drive: bad mode '%s'\n", s);
		exit(2);
	}
	return m;
}

static void
mac_arg(const char *s, uint8_t *mac)
{
	unsigned int m[6];
	int i;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4],
	    &m[5]) != 6) {
		fprintf(stderr, "nc_drive: bad MAC '%s'\n", s);
		exit(2);
	}
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)m[i];
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *
outcome(int e)
{
	switch (e) {
	case 0:
		return "open";
	case ECONNREFUSED:
		return "refused";
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EACCES:
	case EPERM:
		return "unreach";
	case ETIMEDOUT:
		return "timeout";
	}
	return "error";
}

static int
probe(int argc, char **argv)
{
	const char *src = NULL;
	int tcp, fd, e = 0, timeout = 2000, i, port;
	struct sockaddr_in sa, sb;
	struct pollfd pfd;
	socklen_t sl = sizeof(e);
	double t0;
	char buf[64];

	if (argc < 4)
		return 2;
	tcp = strcmp(argv[1], "tcp") == 0;
	port = atoi(argv[3]);
	for (i = 4; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--bind") == 0)
			src = argv[i + 1];
		else if (strcmp(argv[i], "--timeout") == 0)
			timeout = atoi(argv[i + 1]);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr = ip_arg(argv[2]);
	sa.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK,
	    0);
	if (fd < 0)
		return perror("socket"), 1;
	if (src != NULL) {
		memset(&sb, 0, sizeof(sb));
		sb.sin_family = AF_INET;
		sb.sin_addr = ip_arg(src);
		if (bind(fd, (struct sockaddr *)&sb, sizeof(sb)) < 0)
			return perror("bind"), 1;
	}
	t0 = now_ms();
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
	    errno != EINPROGRESS) {
		e = errno;
		goto out;
	}
	pfd.fd = fd;
	if (tcp) {
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, timeout) == 0) {
			e = ETIMEDOUT;
			goto out;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl);
	} else {
		/* UDP: the listener echoes; a reject comes back as ICMP */
		if (send(fd, "ping", 4, 0) < 0) {
			e = errno;
			goto out;
		}
		pfd.events = POLLIN;
		if (poll(&pfd, 1, timeout) == 0) {
			e = ETIMEDOUT;
			goto out;
		}
		if (recv(fd, buf, sizeof(buf), 0) < 0)
			e = errno;
	}
out:
	printf("%s %.1f\n", outcome(e), now_ms() - t0);
	close(fd);
	return 0;
}

/* One TCP connect, as probe does: the outcome's errno, 0 when open;
 * *fdp keeps the socket. */
static int
connect_one(struct sockaddr_in *sa, int timeout, int *fdp)
{
	struct pollfd pfd;
	struct linger lg = { 1, 0 };	/* close = reset: conntrack CLOSE */
	socklen_t sl = sizeof(int);
	int fd, e = 0;

	*fdp = -1;
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) < 0)
		return errno;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (connect(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 &&
	    errno != EINPROGRESS)
		e = errno;
	else {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, timeout) == 0)
			e = ETIMEDOUT;
		else
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl);
	}
	*fdp = fd;
	return e;
}

static int
conns_main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int n, i, hold = 0, timeout = 2000, e, *fds;
	double t0, start;

	if (argc < 4)
		return 2;
	for (i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--hold") == 0)
			hold = 1;
		else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
			timeout = atoi(argv[++i]);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr = ip_arg(argv[1]);
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	n = atoi(argv[3]);
	if (n < 1 || (fds = calloc((size_t)n, sizeof(int))) == NULL)
		return 2;
	start = now_ms();
	for (i = 0; i < n; i++) {
		t0 = now_ms();
		e = connect_one(&sa, timeout, &fds[i]);
		printf("%s %.1f\n", outcome(e), now_ms() - t0);
		fflush(stdout);
		if (!hold && fds[i] >= 0)
			close(fds[i]);
	}
	printf("elapsed %.1f\n", now_ms() - start);
	fflush(stdout);
	if (hold) {
		printf("held\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	free(fds);
	return 0;
}

static int
listen_main(int argc, char **argv)
{
	struct pollfd pfd[256];
	int kind[256], n = 0, i, fd, one = 1, c;
	struct sockaddr_in sa;
	struct sockaddr_storage from;
	socklen_t fl;
	char buf[512];
	ssize_t r;

	/* kind: 0 udp, 1 tcp (banner, close), 2 hold (keep open), 3 a held
	 * connection (closed at EOF) */
	for (i = 2; i < argc && n < 32; i++) {
		int tcp = strncmp(argv[i], "tcp:", 4) == 0 ? 1 :
		    strncmp(argv[i], "hold:", 5) == 0 ? 2 : 0;

		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr = ip_arg(argv[1]);
		sa.sin_port = htons((uint16_t)atoi(strchr(argv[i], ':') + 1));
		fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    (tcp && listen(fd, 64) < 0)) {
			fprintf(stderr, "nc_drive listen %s %s: %s\n",
			    argv[1], argv[i], strerror(errno));
			return 1;
		}
		pfd[n].fd = fd;
		pfd[n].events = POLLIN;
		kind[n++] = tcp;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (poll(pfd, (nfds_t)n, -1) < 0)
			continue;
		for (i = 0; i < n; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLERR | POLLHUP)))
				continue;
			fl = sizeof(from);
			if (kind[i] == 3) {
				if (read(pfd[i].fd, buf, sizeof(buf)) <= 0) {
					close(pfd[i].fd);
					pfd[i] = pfd[n - 1];
					kind[i] = kind[n - 1];
					n--;
					i--;
				}
			} else if (kind[i] == 2) {
				c = accept(pfd[i].fd, NULL, NULL);
				if (c >= 0 && n < 256) {
					pfd[n].fd = c;
					pfd[n].events = POLLIN;
					pfd[n].revents = 0;
					kind[n++] = 3;
				} else if (c >= 0)
					close(c);
			} else if (kind[i]) {
				c = accept(pfd[i].fd, NULL, NULL);
				if (c >= 0) {
					(void)!write(c, "hello\n", 6);
					close(c);
				}
			} else {
				r = recvfrom(pfd[i].fd, buf, sizeof(buf), 0,
				    (struct sockaddr *)&from, &fl);
				if (r > 0)
					sendto(pfd[i].fd, buf, (size_t)r, 0,
					    (struct sockaddr *)&from, fl);
			}
		}
	}
}

static void
print_denial(const struct nc_denial *d, void *arg)
{
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	char in[IF_NAMESIZE] = "-", out[IF_NAMESIZE] = "-";

	(void)arg;
	if (d->family == AF_INET6) {
		inet_ntop(AF_INET6, &d->src6, src, sizeof(src));
		inet_ntop(AF_INET6, &d->dst6, dst, sizeof(dst));
	} else {
		inet_ntop(AF_INET, &d->src, src, sizeof(src));
		inet_ntop(AF_INET, &d->dst, dst, sizeof(dst));
	}
	if (d->indev == 0 || if_indextoname(d->indev, in) == NULL)
		strcpy(in, "-");
	if (d->outdev == 0 || if_indextoname(d->outdev, out) == NULL)
		strcpy(out, "-");
	printf("%lld.%06ld %s %s %s %u %s in=%s out=%s\n",
	    (long long)d->when.tv_sec, d->when.tv_nsec / 1000, d->reason,
	    src, dst, d->dport, d->family == AF_INET6 ? "ipv6" :
	    d->proto == IPPROTO_TCP ? "tcp" : d->proto == IPPROTO_UDP ? "udp" :
	    d->proto == IPPROTO_ICMP ? "icmp" : "other", in, out);
	fflush(stdout);
}

static double
wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A connection that sends a line every interval until it breaks. */
static int
stream_main(int argc, char **argv)
{
	struct sockaddr_in sa;
	struct pollfd pfd;
	int interval = 250, forms = 0, fd, e, i, r;
	double t0 = now_ms(), next;
	unsigned long sent = 0;
	char buf[256];

	if (argc < 3)
		return 2;
	for (i = 3; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--interval") == 0)
			interval = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--for") == 0)
			forms = atoi(argv[i + 1]);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr = ip_arg(argv[1]);
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	if ((e = connect_one(&sa, 2000, &fd)) != 0) {
		printf("failed %s\n", outcome(e));
		return 1;
	}
	/* blocking writes from here: a reset shows up as an error */
	printf("open\n");
	fflush(stdout);
	next = now_ms();
	for (;;) {
		if (forms > 0 && now_ms() - t0 >= forms) {
			printf("alive %lu\n", sent);
			return 0;
		}
		if (now_ms() >= next) {
			snprintf(buf, sizeof(buf), "line %lu\n", sent);
			if (send(fd, buf, strlen(buf), MSG_NOSIGNAL) < 0) {
				e = errno;
				break;
			}
			sent++;
			next += interval;
		}
		pfd.fd = fd;
		pfd.events = POLLIN;
		r = poll(&pfd, 1, interval < 10 ? interval : 10);
		if (r > 0) {
			r = (int)recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r == 0) {
				e = 0;
				break;
			}
			if (r < 0 && errno != EAGAIN) {
				e = errno;
				break;
			}
		}
	}
	printf("cut %.3f %s\n", wall(), e ? strerror(e) : "eof");
	return 0;
}

static int
flood_main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int fd, n, i;
	double t0;

	if (argc < 4)
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr = ip_arg(argv[1]);
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	n = atoi(argv[3]);
	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
		return perror("socket"), 1;
	t0 = now_ms();
	for (i = 0; i < n; i++)
		while (sendto(fd, "x", 1, 0, (struct sockaddr *)&sa,
		    sizeof(sa)) < 0 && (errno == ENOBUFS || errno == EAGAIN ||
		    errno == ECONNREFUSED || errno == EHOSTUNREACH))
			;
	printf("sent %d %.0f\n", n, now_ms() - t0);
	close(fd);
	return 0;
}

static int
send6_main(int argc, char **argv)
{
	struct sockaddr_in6 sa;
	int fd;

	if (argc < 3)
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons((uint16_t)atoi(argv[2]));
	if (inet_pton(AF_INET6, argv[1], &sa.sin6_addr) != 1)
		return 2;
	if ((fd = socket(AF_INET6, SOCK_DGRAM, 0)) < 0 ||
	    sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return perror("send6"), 1;
	printf("sent\n");
	return 0;
}

static int
nflog_main(int group)
{
	struct nc_nflog *l;
	struct pollfd pfd;

	if ((l = nc_nflog_open((uint16_t)group, err, sizeof(err))) == NULL)
		die("nflog");
	printf("ready\n");
	fflush(stdout);
	pfd.fd = nc_nflog_fd(l);
	pfd.events = POLLIN;
	for (;;) {
		if (poll(&pfd, 1, -1) < 0)
			continue;
		if (nc_nflog_read(l, print_denial, NULL, err, sizeof(err)) < 0)
			fprintf(stderr, "nc_drive: %s\n", err);
	}
	nc_nflog_close(l);	/* not reached: killed by the test */
	return 0;
}

static int
bulk(struct nc_ctx *ctx, int n)
{
	struct nc_txn *t;
	struct nc_sandbox sb;
	char ifn[16];
	double t0;
	int i, ret;

	if ((t = nc_txn_new(ctx, err, sizeof(err))) == NULL)
		die("bulk");
	for (i = 0; i < n; i++) {
		snprintf(ifn, sizeof(ifn), "bk%d", i);
		memset(&sb, 0, sizeof(sb));
		sb.ifname = ifn;
		sb.ip.s_addr = htonl(0x0afa0000U | (uint32_t)(i * 4 + 2));
		sb.gw.s_addr = htonl(0x0afa0000U | (uint32_t)(i * 4 + 1));
		sb.mac[0] = 0x02;
		sb.mac[4] = (uint8_t)(i >> 8);
		sb.mac[5] = (uint8_t)i;
		sb.mode = i % 3 == 0 ? NC_MODE_OPEN : i % 3 == 1 ?
		    NC_MODE_ALLOWLIST : NC_MODE_CLOSED;
		if (nc_txn_sandbox_attach(t, &sb, err, sizeof(err)) < 0)
			die("bulk attach");
	}
	t0 = now_ms();
	ret = nc_txn_commit(t, err, sizeof(err));
	printf("bulk %d sandboxes, %zu messages, %.1f ms\n", n,
	    nc_txn_size(t), now_ms() - t0);
	nc_txn_free(t);
	if (ret < 0)
		die("bulk commit");
	return 0;
}

/* IF IP MAC GW MODE [RULE...]: what berthd does when a sandbox's rules
 * change — one batch that clears its elements and adds them anew. */
static int
reattach(struct nc_ctx *ctx, int argc, char **argv)
{
	struct nc_sandbox sb;
	struct nc_rule r;
	struct nc_txn *t;
	int i, ret;

	memset(&sb, 0, sizeof(sb));
	sb.ifname = argv[0];
	sb.ip = ip_arg(argv[1]);
	mac_arg(argv[2], sb.mac);
	sb.gw = ip_arg(argv[3]);
	sb.mode = mode_arg(argv[4]);
	if ((t = nc_txn_new(ctx, err, sizeof(err))) == NULL)
		return -1;
	ret = nc_txn_sandbox_clear(t, sb.ifname, sb.ip, err, sizeof(err));
	if (ret == 0)
		ret = nc_txn_sandbox_attach(t, &sb, err, sizeof(err));
	for (i = 5; i < argc && ret == 0; i++) {
		if ((ret = nc_rule_parse(argv[i], &r, err, sizeof(err))) == 0)
			ret = nc_txn_allow_add(t, sb.ip, &r, 0, err,
			    sizeof(err));
	}
	if (ret == 0)
		ret = nc_txn_commit(t, err, sizeof(err));
	nc_txn_free(t);
	return ret;
}

/* "IF,IP,MAC,GW,MODE[,RULE...]" attached into t with its allow rules. */
static int
sandbox_spec(struct nc_txn *t, char *spec)
{
	struct nc_sandbox sb;
	struct nc_rule r;
	char *f[32], *p;
	int n = 0, i, ret;

	for (p = strtok(spec, ","); p != NULL && n < 32; p = strtok(NULL, ","))
		f[n++] = p;
	if (n < 5) {
		fprintf(stderr, "nc_drive: --sandbox IF,IP,MAC,GW,MODE[,RULE...]\n");
		exit(2);
	}
	memset(&sb, 0, sizeof(sb));
	sb.ifname = f[0];
	sb.ip = ip_arg(f[1]);
	mac_arg(f[2], sb.mac);
	sb.gw = ip_arg(f[3]);
	sb.mode = mode_arg(f[4]);
	if ((ret = nc_txn_sandbox_attach(t, &sb, err, sizeof(err))) < 0)
		return ret;
	for (i = 5; i < n; i++) {
		if ((ret = nc_rule_parse(f[i], &r, err, sizeof(err))) < 0 ||
		    (ret = nc_txn_allow_add(t, sb.ip, &r, 0, err,
		    sizeof(err))) < 0)
			return ret;
	}
	return 0;
}

static int
init_with(struct nc_ctx *ctx, const struct nc_global *g, char **specs,
    int nspecs)
{
	struct nc_txn *t;
	char *copy;
	int i, k, ret = -1;

	for (k = 0; k < 8; k++) {
		if ((t = nc_txn_new(ctx, err, sizeof(err))) == NULL)
			return -1;
		ret = nc_txn_egress_init(t, g, err, sizeof(err));
		for (i = 0; i < nspecs && ret == 0; i++) {
			if ((copy = strdup(specs[i])) == NULL)
				return -1;
			ret = sandbox_spec(t, copy);
			free(copy);
		}
		if (ret == 0)
			ret = nc_txn_commit(t, err, sizeof(err));
		nc_txn_free(t);
		if (ret != -ERESTART)
			break;
	}
	return ret;
}

int
main(int argc, char **argv)
{
	struct nc_ctx *ctx;
	struct nc_global g;
	struct nc_cidr deny[16], permit[16];
	struct in_addr host[16];
	struct nc_sandbox sb;
	struct nc_rule r;
	uint64_t ms = 0;
	size_t n;
	int i, ret = 0;
	const char *cmd;

	if (argc < 2) {
		fprintf(stderr, "usage: see the top of nc_drive.c\n");
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "probe") == 0)
		return probe(argc - 1, argv + 1);
	if (strcmp(cmd, "listen") == 0)
		return listen_main(argc - 1, argv + 1);
	if (strcmp(cmd, "conns") == 0)
		return conns_main(argc - 1, argv + 1);
	if (strcmp(cmd, "stream") == 0)
		return stream_main(argc - 1, argv + 1);
	if (strcmp(cmd, "flood") == 0)
		return flood_main(argc - 1, argv + 1);
	if (strcmp(cmd, "send6") == 0)
		return send6_main(argc - 1, argv + 1);
	if ((strcmp(cmd, "ct-count") == 0 || strcmp(cmd, "ct-flush") == 0) &&
	    argc == 3) {
		ret = cmd[3] == 'c' ? nc_ct_count_guest(ip_arg(argv[2]), &n,
		    err, sizeof(err)) : nc_ct_flush_guest(ip_arg(argv[2]), &n,
		    err, sizeof(err));
		if (ret < 0)
			die(cmd);
		printf("%zu\n", n);
		return 0;
	}
	if (strcmp(cmd, "nflog") == 0 && argc == 3)
		return nflog_main(atoi(argv[2]));
	if (strcmp(cmd, "parse") == 0 && argc == 3) {
		char buf[300];

		if (nc_rule_parse(argv[2], &r, err, sizeof(err)) < 0)
			die("parse");
		nc_rule_format(&r, buf, sizeof(buf));
		printf("%s\n", buf);
		return 0;
	}

	if ((ctx = nc_ctx_new(err, sizeof(err))) == NULL)
		die("context");
	if (strcmp(cmd, "init") == 0) {
		char *specs[64];
		int nspecs = 0;

		memset(&g, 0, sizeof(g));
		g.deny = deny;
		g.permit = permit;
		g.host_addrs = host;
		for (i = 2; i + 1 < argc; i += 2) {
			if (strcmp(argv[i], "--uplink") == 0)
				g.uplink = argv[i + 1];
			else if (strcmp(argv[i], "--tap-prefix") == 0)
				g.tap_prefix = argv[i + 1];
			else if (strcmp(argv[i], "--group") == 0)
				g.nflog_group = (uint16_t)atoi(argv[i + 1]);
			else if (strcmp(argv[i], "--host-addr") == 0 &&
			    g.nhost_addrs < 16)
				host[g.nhost_addrs++] = ip_arg(argv[i + 1]);
			else if (strcmp(argv[i], "--deny") == 0 && g.ndeny < 16)
				deny[g.ndeny++] = cidr_arg(argv[i + 1]);
			else if (strcmp(argv[i], "--permit") == 0 &&
			    g.npermit < 16)
				permit[g.npermit++] = cidr_arg(argv[i + 1]);
			else if (strcmp(argv[i], "--conn-limit") == 0)
				g.conn_limit = (uint32_t)atoi(argv[i + 1]);
			else if (strcmp(argv[i], "--rate") == 0)
				g.new_conn_rate = (uint32_t)atoi(argv[i + 1]);
			else if (strcmp(argv[i], "--log-rate") == 0)
				g.log_rate = (uint32_t)atoi(argv[i + 1]);
			else if (strcmp(argv[i], "--sandbox") == 0 &&
			    nspecs < 64)
				specs[nspecs++] = argv[i + 1];
		}
		ret = nspecs > 0 ? init_with(ctx, &g, specs, nspecs) :
		    nc_egress_init(ctx, &g, err, sizeof(err));
	} else if (strcmp(cmd, "fini") == 0) {
		ret = nc_egress_fini(ctx, err, sizeof(err));
	} else if (strcmp(cmd, "attach") == 0 && argc == 7) {
		memset(&sb, 0, sizeof(sb));
		sb.ifname = argv[2];
		sb.ip = ip_arg(argv[3]);
		mac_arg(argv[4], sb.mac);
		sb.gw = ip_arg(argv[5]);
		sb.mode = mode_arg(argv[6]);
		ret = nc_sandbox_attach(ctx, &sb, err, sizeof(err));
	} else if (strcmp(cmd, "reattach") == 0 && argc >= 7) {
		ret = reattach(ctx, argc - 2, argv + 2);
	} else if (strcmp(cmd, "detach") == 0 && argc == 4) {
		ret = nc_sandbox_detach(ctx, argv[2], ip_arg(argv[3]), err,
		    sizeof(err));
	} else if (strcmp(cmd, "mode") == 0 && argc == 4) {
		ret = nc_sandbox_set_mode(ctx, ip_arg(argv[2]),
		    mode_arg(argv[3]), err, sizeof(err));
	} else if ((strcmp(cmd, "allow") == 0 || strcmp(cmd, "unallow") == 0 ||
	    strcmp(cmd, "deny") == 0 || strcmp(cmd, "undeny") == 0) &&
	    argc >= 4) {
		if (nc_rule_parse(argv[3], &r, err, sizeof(err)) < 0)
			die("rule");
		if (argc == 6 && strcmp(argv[4], "--for") == 0 &&
		    nc_duration_parse(argv[5], &ms, err, sizeof(err)) < 0)
			die("duration");
		if (strcmp(cmd, "allow") == 0)
			ret = nc_allow_add(ctx, ip_arg(argv[2]), &r, ms, err,
			    sizeof(err));
		else if (strcmp(cmd, "unallow") == 0)
			ret = nc_allow_del(ctx, ip_arg(argv[2]), &r, err,
			    sizeof(err));
		else if (strcmp(cmd, "deny") == 0)
			ret = nc_deny_add(ctx, ip_arg(argv[2]), &r, ms, err,
			    sizeof(err));
		else
			ret = nc_deny_del(ctx, ip_arg(argv[2]), &r, err,
			    sizeof(err));
	} else if (strcmp(cmd, "harden") == 0 && argc == 3) {
		ret = nc_tap_harden(argv[2], err, sizeof(err));
	} else if (strcmp(cmd, "forwarding") == 0 && argc == 2) {
		ret = nc_host_forwarding(err, sizeof(err));
	} else if (strcmp(cmd, "recheck") == 0 && argc == 3) {
		ret = nc_recheck(ctx, ip_arg(argv[2]), err, sizeof(err));
	} else if (strcmp(cmd, "suppressed") == 0 && argc == 3) {
		uint64_t k;

		if ((ret = nc_egress_log_suppressed(ctx, argv[2], &k, err,
		    sizeof(err))) == 0)
			printf("%llu\n", (unsigned long long)k);
	} else if (strcmp(cmd, "bulk") == 0 && argc == 3) {
		ret = bulk(ctx, atoi(argv[2]));
	} else if (strcmp(cmd, "count-rules") == 0) {
		if ((ret = nc_egress_count_rules(ctx, &n, err,
		    sizeof(err))) == 0)
			printf("%zu\n", n);
	} else if (strcmp(cmd, "count") == 0 && argc == 3) {
		if ((ret = nc_egress_count_elems(ctx, argv[2], &n, err,
		    sizeof(err))) == 0)
			printf("%zu\n", n);
	} else {
		fprintf(stderr, "nc_drive: unknown command or arguments\n");
		ret = 2;
		nc_ctx_free(ctx);
		return ret;
	}
	nc_ctx_free(ctx);
	if (ret < 0)
		die(cmd);
	return 0;
}
