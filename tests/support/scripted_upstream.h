/*
 * scripted_upstream.h — a scripted HTTP/1.1 upstream on a loopback
 * socket for the session layer's harnesses (tests/unit/test_session.c,
 * tests/fuzz/fuzz_h2.c). Non-blocking, no event loop of its own: the
 * harness calls su_poll() on every turn of its loop.
 *
 * It answers by path (the request target up to '?'): /hello (says which
 * connection, X-Conn: n, from 1), /len (the request body's length),
 * /head (a HEAD answer that names 1000 bytes), /204, /304, /chunked
 * (with a chunk extension, a zero-padded size and a trailer), /close
 * (delimited by its close), /drop (closes unanswered), /100 (100
 * Continue, then 200), /upgrade (101; what follows depends on the
 * harness, see su_conf), /big (su_conf.big bytes); anything else gets
 * 500. A connection answers its next request once /big is all written.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_TESTS_SCRIPTED_UPSTREAM_H
#define BERTH_TESTS_SCRIPTED_UPSTREAM_H

#include <stddef.h>

struct su_conf {
	size_t	big;		/* /big: its body's length */
	int	upgrade_echo;	/* /upgrade: echoes what follows the 101
				 * (else "raw bytes" after it, and HTTP on) */
	int	auto_continue;	/* a head with Expect: 100-continue gets
				 * 100 Continue before its body */
	int	reset_close;	/* close with a reset: no TIME_WAIT left by
				 * thousands of runs (the bytes not yet read
				 * by the peer may be lost) */
};

/* Listens on loopback; returns the port. Aborts on failure. */
unsigned su_start(const struct su_conf *);
/* One look: accept, read, answer, write /big; 1 if anything moved. */
int	 su_poll(void);
/* Closes every upstream connection (not the listener). */
void	 su_close_all(void);
/* Connections accepted so far; /big body bytes written so far. */
extern int	su_nconns;
extern size_t	su_big_sent;

/* A non-blocking loopback listener (*port, if not NULL, gets its port);
 * aborts on failure. */
int	 su_listen_lo(unsigned *port);
/* O_NONBLOCK on fd. */
void	 su_nonblock(int fd);
/* Closes fd with a reset (SO_LINGER 0). */
void	 su_close_hard(int fd);

#endif
