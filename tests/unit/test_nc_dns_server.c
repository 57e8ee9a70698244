/*
 * test_nc_dns_server.c — the resolver's event-driven side on loopback,
 * without root and without nftables (ctx NULL): a fake upstream in the
 * same event loop answers from a table (or times out, fails, truncates,
 * sends a forged id first), and a client plays the guest over UDP and
 * TCP. Checks answers, denials, upstream retries and timeouts, the TCP
 * fallback, the in-flight limit, and that a guest closing its TCP
 * connection, or its sandbox going away, mid-query frees cleanly; what
 * a re-apply of the sandbox gets back of the answered addresses, and
 * that an answer for a name whose rule went meanwhile is refused.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "netctl.h"
#include "nc_dns.h"
#include "tap.h"

static struct event_base *base;
static int up_udp, up_tcp, up_queries, up_tcp_queries;
static int denials;
static char last_denial[300];

static void
wire(const char *s, uint8_t *out, size_t *len)
{
	size_t n = 0;

	while (*s) {
		size_t l = strcspn(s, ".");

		out[n++] = (uint8_t)l;
		memcpy(out + n, s, l);
		n += l;
		s += l;
		if (*s == '.')
			s++;
	}
	out[n++] = 0;
	*len = n;
}

static void
add_a(struct nc_dns_answer *a, const uint8_t *name, size_t nl, uint32_t addr,
    uint32_t ttl)
{
	struct nc_dns_rr *rr = &a->rr[a->nrr++];

	memcpy(rr->name, name, nl);
	rr->namelen = nl;
	rr->type = NC_DNS_T_A;
	rr->ttl = ttl;
	rr->rdlen = 4;
	rr->rdoff = a->rdused;
	addr = htonl(addr);
	memcpy(a->rd + a->rdused, &addr, 4);
	a->rdused += 4;
}

/* The fake upstream's answer to q, in out; 0: no answer at all. */
static int
up_answer(const uint8_t *msg, size_t len, int tcp, uint8_t *out,
    size_t cap)
{
	static struct nc_dns_answer a;
	struct nc_dns_query q;
	char name[NC_DNS_TEXT_MAX];
	size_t idx[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	int rcode = 0, flags = 0x8180;

	if (nc_dns_query_parse(msg, len, &q) != 0)
		return 0;
	nc_dns_name_text(q.qname, name, sizeof(name));
	up_queries++;
	if (tcp)
		up_tcp_queries++;
	memset(&a, 0, sizeof(a));
	if (strcmp(name, "ok.test") == 0 || strcmp(name, "spoof.test") == 0 ||
	    strcmp(name, "late.test") == 0)
		add_a(&a, q.qname, q.qnamelen, 0xc0000201, 100000);
	else if (strcmp(name, "big.test") == 0) {
		if (!tcp)
			flags |= 0x0200;
		else {
			add_a(&a, q.qname, q.qnamelen, 0xc0000202, 30);
			add_a(&a, q.qname, q.qnamelen, 0xc0000203, 30);
			add_a(&a, q.qname, q.qnamelen, 0xc0000204, 30);
		}
	} else if (strcmp(name, "slow.test") == 0)
		return 0;
	else if (strcmp(name, "fail.test") == 0)
		rcode = NC_DNS_SERVFAIL;
	else
		rcode = NC_DNS_NXDOMAIN;
	return nc_dns_build(out, cap, q.id, (uint16_t)flags, rcode, q.qname,
	    q.qnamelen, q.qtype, &a, idx, a.nrr, 0, 0xffffffffU, 0);
}

/* late.test: answered 150 ms later, so that rules can change meanwhile */
static struct {
	int fd;
	struct sockaddr_in to;
	uint8_t msg[512];
	int len;
} late;

static void
late_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sendto(late.fd, late.msg, (size_t)late.len, 0,
	    (struct sockaddr *)&late.to, sizeof(late.to));
}

static void
up_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	uint8_t buf[4096], out[4096];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n;
	int len;

	(void)what;
	(void)arg;
	n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
	if (n <= 0 || (len = up_answer(buf, (size_t)n, 0, out,
	    sizeof(out))) <= 0)
		return;
	if (n > 20 && memcmp(buf + 13, "late", 4) == 0 &&
	    len <= (int)sizeof(late.msg)) {
		struct timeval tv = { 0, 150000 };

		late.fd = fd;
		memcpy(&late.to, &from, sizeof(late.to));
		memcpy(late.msg, out, (size_t)len);
		late.len = len;
		event_base_once(base, -1, EV_TIMEOUT, late_cb, NULL, &tv);
		return;
	}
	if (n > 20 && memcmp(buf + 13, "spoof", 5) == 0) {
		out[1] ^= 1;	/* a forged answer first: wrong id */
		sendto(fd, out, (size_t)len, 0, (struct sockaddr *)&from, fl);
		out[1] ^= 1;
	}
	sendto(fd, out, (size_t)len, 0, (struct sockaddr *)&from, fl);
}

static void
up_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	uint8_t buf[4096], out[4098];
	ssize_t n;
	int len;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n > 2 && (len = up_answer(buf + 2, (size_t)n - 2, 1, out + 2,
	    sizeof(out) - 2)) > 0) {
		out[0] = (uint8_t)(len >> 8);
		out[1] = (uint8_t)len;
		(void)!write(fd, out, (size_t)len + 2);
	}
	event_free(arg);
	close(fd);
}

static void
up_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	int c = accept(fd, NULL, NULL);
	struct event *ev;

	(void)what;
	(void)arg;
	if (c < 0)
		return;
	ev = event_new(base, c, EV_READ, up_conn_cb, event_self_cbarg());
	event_add(ev, NULL);
}

static int
bound(int type, uint16_t port, uint16_t *got)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, type, 0), one = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	if (type == SOCK_STREAM)
		listen(fd, 16);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	if (got)
		*got = ntohs(sa.sin_port);
	return fd;
}

static void
on_denial(const struct nc_dns_denial *d, void *arg)
{
	(void)arg;
	denials++;
	snprintf(last_denial, sizeof(last_denial), "%s %s %u %s", d->sandbox,
	    d->name, d->qtype, d->reason);
}

/* ---- the guest ---- */

static uint16_t port;
static uint8_t reply[65536];
static int reply_len;

static void
got_reply(evutil_socket_t fd, short what, void *arg)
{
	(void)arg;
	if (what & EV_READ)
		reply_len = (int)recv(fd, reply, sizeof(reply), 0);
	else
		reply_len = -ETIMEDOUT;
	event_base_loopbreak(base);
}

static int
guest_sock(int type)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, type, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
send_query(int fd, int tcp, const char *name, uint16_t type, uint16_t id)
{
	uint8_t q[600], w[256];
	size_t wl;
	int len;

	wire(name, w, &wl);
	len = nc_dns_build(q + 2, sizeof(q) - 2, id, 0x0100, 0, w, wl, type,
	    NULL, NULL, 0, 0, 0, 0);
	q[0] = (uint8_t)(len >> 8);
	q[1] = (uint8_t)len;
	if (tcp)
		(void)!write(fd, q, (size_t)len + 2);
	else
		(void)!write(fd, q + 2, (size_t)len);
}

/* Run the loop until fd has something (or ms pass). */
static void
wait_reply(int fd, int ms)
{
	struct event *ev = event_new(base, fd, EV_READ, got_reply, NULL);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	reply_len = 0;
	event_add(ev, &tv);
	event_base_dispatch(base);
	event_free(ev);
}

/* Ask over UDP; returns the rcode (-1 no answer) and parses into a. */
static int
ask(const char *name, uint16_t type, struct nc_dns_answer *a)
{
	uint8_t w[256];
	size_t wl;
	int fd = guest_sock(SOCK_DGRAM), r;
	static uint16_t id = 100;

	send_query(fd, 0, name, type, ++id);
	wait_reply(fd, 2000);
	close(fd);
	if (reply_len < 12)
		return -1;
	wire(name, w, &wl);
	if ((reply[5] == 0 && (reply[3] & 0xf) != 0) || a == NULL)
		return reply[3] & 0xf;
	r = nc_dns_answer_parse(reply, (size_t)reply_len, id, w, wl, type, a);
	return r < 0 ? -2 : a->rcode;
}

static void
noop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static void
run_ms(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *t = evtimer_new(base, noop_cb, base);

	evtimer_add(t, &tv);
	event_base_dispatch(base);
	event_free(t);
}

/* Read length-prefixed answers from a TCP guest socket into reply until
 * n of them are complete or ms pass; returns the bytes read. */
static int
tcp_collect(int fd, int n, int ms)
{
	size_t got = 0, off;
	ssize_t r;
	int i, have;

	for (i = 0; i < ms / 10; i++) {
		run_ms(10);
		r = recv(fd, reply + got, sizeof(reply) - got, MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		for (off = 0, have = 0; off + 2 <= got; have++) {
			size_t l = (size_t)(reply[off] << 8 | reply[off + 1]);

			if (off + 2 + l > got)
				break;
			off += 2 + l;
		}
		if (have >= n)
			break;
	}
	return (int)got;
}

int
main(void)
{
	static struct nc_dns_answer a;
	struct nc_dns_config c;
	struct nc_dns_stats st;
	struct sockaddr_in res;
	struct nc_dns *dns;
	struct nc_rule allow[5];
	struct in_addr lo;
	struct event *ue, *te;
	struct nc_txn *t;
	char err[NC_ERRLEN];
	uint16_t upport;
	int fd, fd2, fd3, i, r, tmp, tmp2;
	const char *names[] = { "ok.test", "big.test", "slow.test",
	    "fail.test", "spoof.test" };

	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL)
		skip_all("no event base");
	/* One port number for UDP and TCP each: the UDP port the kernel
	 * picks may be taken for TCP by another test running meanwhile, so
	 * try a few. */
	up_udp = up_tcp = tmp = tmp2 = -1;
	for (i = 0; i < 50 && (up_udp < 0 || up_tcp < 0); i++) {
		if (up_udp >= 0)
			close(up_udp);
		up_udp = bound(SOCK_DGRAM, 0, &upport);
		up_tcp = up_udp < 0 ? -1 : bound(SOCK_STREAM, upport, NULL);
	}
	/* a free port for the resolver, UDP and TCP */
	for (i = 0; i < 50 && (tmp < 0 || tmp2 < 0); i++) {
		if (tmp >= 0)
			close(tmp);
		tmp = bound(SOCK_DGRAM, 0, &port);
		tmp2 = tmp < 0 ? -1 : bound(SOCK_STREAM, port, NULL);
	}
	if (up_udp < 0 || up_tcp < 0 || tmp < 0 || tmp2 < 0)
		skip_all("cannot bind loopback sockets");
	close(tmp);
	close(tmp2);
	ue = event_new(base, up_udp, EV_READ | EV_PERSIST, up_udp_cb, NULL);
	te = event_new(base, up_tcp, EV_READ | EV_PERSIST, up_accept_cb, NULL);
	event_add(ue, NULL);
	event_add(te, NULL);

	nc_dns_config_init(&c);
	memset(&res, 0, sizeof(res));
	res.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	res.sin_port = htons(upport);
	c.resolvers = &res;
	c.nresolvers = 1;
	c.port = port;
	c.timeout_ms = 100;
	c.attempts = 2;
	c.ttl_max = 60;
	c.max_inflight = 2;
	c.on_denial = on_denial;
	c.nresolvers = 0;
	ok(nc_dns_new(base, NULL, &c, err, sizeof(err)) == NULL &&
	    strstr(err, "no upstream") != NULL,
	    "no resolvers: refused with a message");
	c.nresolvers = 1;
	dns = nc_dns_new(base, NULL, &c, err, sizeof(err));
	ok(dns != NULL, "resolver created");
	lo.s_addr = htonl(INADDR_LOOPBACK);
	is_int(nc_dns_sandbox_add(dns, lo, lo, "sb-unit", err, sizeof(err)),
	    0, "sandbox added (listens on its gateway)");
	is_int(nc_dns_sandbox_add(dns, lo, lo, "sb-unit", err, sizeof(err)),
	    -EEXIST, "same guest twice refused");
	is_int(ask("ok.test", NC_DNS_T_A, &a), NC_DNS_NXDOMAIN,
	    "new sandbox is closed until rules come");
	for (i = 0; i < 5; i++)
		nc_rule_parse(names[i], &allow[i], err, sizeof(err));
	is_int(nc_dns_set_rules(dns, lo, NC_MODE_ALLOWLIST, allow, 5, NULL, 0,
	    err, sizeof(err)), 0, "rules set");

	r = ask("ok.test", NC_DNS_T_A, &a);
	ok(r == 0 && a.nrr == 1 && a.rr[0].ttl == 60 &&
	    memcmp(a.rd + a.rr[0].rdoff, "\300\0\2\1", 4) == 0,
	    "allowed A answered, TTL clamped to 60");
	r = ask("denied.test", NC_DNS_T_A, NULL);
	is_int(r, NC_DNS_NXDOMAIN, "denied name: NXDOMAIN");
	is_str(last_denial, "sb-unit denied.test 1 not-allowed",
	    "denial callback got sandbox, name, type, reason");
	i = up_queries;
	r = ask("ok.test", NC_DNS_T_AAAA, &a);
	ok(r == 0 && a.nrr == 0 && up_queries == i,
	    "AAAA: empty NOERROR without asking upstream");
	r = ask("slow.test", NC_DNS_T_A, NULL);
	is_int(r, NC_DNS_SERVFAIL, "upstream silent: SERVFAIL after retries");
	r = ask("fail.test", NC_DNS_T_A, NULL);
	is_int(r, NC_DNS_SERVFAIL, "upstream SERVFAIL: SERVFAIL");
	i = up_tcp_queries;
	r = ask("big.test", NC_DNS_T_A, &a);
	ok(r == 0 && a.nrr == 3 && up_tcp_queries == i + 1,
	    "truncated upstream answer: fetched again over TCP");
	r = ask("spoof.test", NC_DNS_T_A, &a);
	ok(r == 0 && a.nrr == 1, "forged answer (wrong id) ignored, real one "
	    "taken");
	nc_dns_get_stats(dns, &st);
	ok(st.upstream_fail == 2 && st.upstream_tcp == 1 && st.denied >= 2,
	    "stats: 2 upstream failures, 1 TCP fallback");

	/* over TCP */
	fd = guest_sock(SOCK_STREAM);
	send_query(fd, 1, "ok.test", NC_DNS_T_A, 7);
	send_query(fd, 1, "denied.test", NC_DNS_T_A, 8);
	r = tcp_collect(fd, 2, 2000);
	ok(r > 14 && reply[2] == 0 && reply[3] == 8 &&
	    (reply[5] & 0xf) == NC_DNS_NXDOMAIN, "TCP: of two pipelined "
	    "queries the denied one is answered first (no upstream)");
	i = 2 + (reply[0] << 8 | reply[1]);
	ok(r > i + 14 && reply[i + 2] == 0 && reply[i + 3] == 7 &&
	    (reply[i + 5] & 0xf) == 0 && reply[i + 9] == 1,
	    "TCP: then the allowed one, with its record");
	close(fd);

	/* in-flight limit 2: the third slow query is answered at once */
	fd = guest_sock(SOCK_DGRAM);
	fd2 = guest_sock(SOCK_DGRAM);
	fd3 = guest_sock(SOCK_DGRAM);
	send_query(fd, 0, "slow.test", NC_DNS_T_A, 1);
	send_query(fd2, 0, "slow.test", NC_DNS_T_A, 2);
	run_ms(20);
	send_query(fd3, 0, "slow.test", NC_DNS_T_A, 3);
	wait_reply(fd3, 50);
	ok(reply_len >= 12 && (reply[3] & 0xf) == NC_DNS_SERVFAIL,
	    "over the in-flight limit: SERVFAIL at once");
	nc_dns_get_stats(dns, &st);
	is_int((long long)st.limited, 1, "limited counted");
	close(fd);
	close(fd2);
	close(fd3);
	run_ms(300);

	/* TCP guest leaving mid-query, then the sandbox mid-query */
	fd = guest_sock(SOCK_STREAM);
	send_query(fd, 1, "slow.test", NC_DNS_T_A, 9);
	run_ms(30);
	close(fd);
	run_ms(30);
	fd = guest_sock(SOCK_DGRAM);
	send_query(fd, 0, "slow.test", NC_DNS_T_A, 10);
	run_ms(30);
	is_int(nc_dns_sandbox_del(dns, lo), 0,
	    "sandbox removed with a query in flight");
	run_ms(300);
	is_int(nc_dns_sandbox_del(dns, lo), -ENOENT, "and it is gone");
	send_query(fd, 0, "ok.test", NC_DNS_T_A, 11);
	wait_reply(fd, 200);
	ok(reply_len <= 0, "no one answers on its gateway any more");
	close(fd);
	is_int(nc_dns_sandbox_add(dns, lo, lo, "sb-unit", err, sizeof(err)),
	    0, "the address can be taken again");

	/* what a re-apply puts back (a context-less transaction shows it) */
	nc_rule_parse("late.test", &allow[1], err, sizeof(err));
	nc_dns_set_rules(dns, lo, NC_MODE_ALLOWLIST, allow, 2, NULL, 0, err,
	    sizeof(err));
	r = ask("ok.test", NC_DNS_T_A, &a);
	t = nc_txn_new(NULL, err, sizeof(err));
	is_int(nc_dns_queue_learned(dns, t, lo, NC_MODE_ALLOWLIST, allow, 2,
	    NULL, 0, err, sizeof(err)), 1, "ok.test answered: a re-apply "
	    "keeping its rule queues its address");
	ok(nc_txn_size(t) > 0, "into the transaction");
	nc_txn_free(t);
	t = nc_txn_new(NULL, err, sizeof(err));
	is_int(nc_dns_queue_learned(dns, t, lo, NC_MODE_ALLOWLIST, &allow[1],
	    1, NULL, 0, err, sizeof(err)), 0, "one without it: nothing");
	ok(nc_txn_size(t) == 0, "nothing queued");
	nc_txn_free(t);
	/* a rule removed while the upstream answers: no answer released */
	fd = guest_sock(SOCK_DGRAM);
	send_query(fd, 0, "late.test", NC_DNS_T_A, 12);
	run_ms(50);
	nc_dns_set_rules(dns, lo, NC_MODE_ALLOWLIST, allow, 1, NULL, 0, err,
	    sizeof(err));
	wait_reply(fd, 1000);
	ok(reply_len >= 12 && (reply[3] & 0xf) == NC_DNS_NXDOMAIN &&
	    reply[7] == 0, "late.test's rule removed mid-query: its late "
	    "answer is refused");
	is_str(last_denial, "sb-unit late.test 1 not-allowed",
	    "and logged as a denial");
	close(fd);
	/* set_rules without ok.test forgets it; mode open remembers */
	nc_dns_set_rules(dns, lo, NC_MODE_ALLOWLIST, &allow[1], 1, NULL, 0, err,
	    sizeof(err));
	t = nc_txn_new(NULL, err, sizeof(err));
	is_int(nc_dns_queue_learned(dns, t, lo, NC_MODE_ALLOWLIST, allow, 1,
	    NULL, 0, err, sizeof(err)), 0, "forgotten once a rule set "
	    "without it was applied");
	nc_txn_free(t);
	nc_dns_set_rules(dns, lo, NC_MODE_OPEN, NULL, 0, NULL, 0, err,
	    sizeof(err));
	r = ask("ok.test", NC_DNS_T_A, &a);
	t = nc_txn_new(NULL, err, sizeof(err));
	is_int(nc_dns_queue_learned(dns, t, lo, NC_MODE_ALLOWLIST, allow, 1,
	    NULL, 0, err, sizeof(err)), 1, "answered in mode open: back to "
	    "allowlist with its rule, queued");
	nc_txn_free(t);
	nc_dns_free(dns);

	/* The table's side of a split resolver (berthd's parent): no
	 * socket; what the answering side reports is checked against its
	 * own rules before anything is remembered or inserted. */
	{
		struct nc_dns_config tc = c;
		struct in_addr addr = { htonl(0xcb00710a) };	/* 203.0.113.10 */
		uint32_t ttl = 30;

		tc.no_listen = 1;
		dns = nc_dns_new(base, NULL, &tc, err, sizeof(err));
		ok(dns != NULL, "split: the table's side created");
		is_int(nc_dns_sandbox_add(dns, lo, lo, "sb-split", err,
		    sizeof(err)), 0, "split: sandbox added without sockets");
		is_int(nc_dns_insert(dns, lo, "ok.test", &addr, &ttl, 1, err,
		    sizeof(err)), -EPERM, "split: closed until rules come");
		nc_dns_set_rules(dns, lo, NC_MODE_ALLOWLIST, allow, 1, NULL, 0,
		    err, sizeof(err));
		is_int(nc_dns_insert(dns, lo, "other.test", &addr, &ttl, 1, err,
		    sizeof(err)), -EPERM, "split: a name the rules do not allow "
		    "is refused");
		ok(strstr(err, "other.test is not allowed") != NULL,
		    "split: and says so");
		is_int(nc_dns_insert(dns, lo, "OK.test\n", &addr, &ttl, 1, err,
		    sizeof(err)), -EINVAL, "split: not a host name: refused");
		is_int(nc_dns_insert(dns, addr, "ok.test", &addr, &ttl, 1, err,
		    sizeof(err)), -ENOENT, "split: an unknown guest is refused");
		is_int(nc_dns_insert(dns, lo, "ok.test", &addr, &ttl, 1, err,
		    sizeof(err)), 0, "split: an allowed name's addresses taken");
		t = nc_txn_new(NULL, err, sizeof(err));
		is_int(nc_dns_queue_learned(dns, t, lo, NC_MODE_ALLOWLIST, allow,
		    1, NULL, 0, err, sizeof(err)), 1, "split: and remembered for "
		    "a re-apply");
		nc_txn_free(t);
		nc_dns_free(dns);
	}
	event_free(ue);
	event_free(te);
	close(up_udp);
	close(up_tcp);
	event_base_free(base);
	return done_testing();
}
