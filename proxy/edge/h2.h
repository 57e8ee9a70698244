/*
 * h2.h — HTTP/2 from browsers (ALPN h2 on the HTTPS listener), through
 * libnghttp2: framing, HPACK and flow control are the library's. Each
 * stream becomes an HTTP/1.1 connection of the session layer (session.h)
 * over a bufferevent pair, so routing, the Host/TLS name check, private
 * URL tokens and cookies, wake, Server-Timing, the access log, limits and
 * error pages are the very code HTTP/1.1 runs; the response comes back
 * as HTTP/1.1 and leaves as HEADERS and DATA. Both directions keep the
 * layer's backpressure: a stream's receive window reopens only as its
 * session takes the body, and a response is read only as fast as the
 * client's window and the connection's output let it go.
 *
 * Limits (struct px_wcfg): h2_streams concurrent streams, h2_header_list
 * bytes of request headers (over: 431; more than 10 such in 10 s:
 * GOAWAY ENHANCE_YOUR_CALM), h2_resets streams reset by the client per
 * 10 s (more: GOAWAY ENHANCE_YOUR_CALM), t_keepalive idle, t_send for
 * a response kept waiting on the client's window (zero-window stall),
 * 1000 small WINDOW_UPDATEs per 10 s; libnghttp2's own limits against
 * CONTINUATION, SETTINGS and PING floods (GOAWAY ENHANCE_YOUR_CALM). A
 * connection's input is worked at most 2 ms or 1 MB of decoded headers
 * a turn of the event loop, so that one client cannot stall the others.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_H2_H
#define BERTH_H2_H

struct px_sessenv;
struct px_xport;

/* Serves HTTP/2 on xp (its TLS handshake done, ALPN h2); takes xp and
 * its place in the owner's count of connections (nconns), which the
 * caller has counted. */
void px_h2_start(struct px_sessenv *, struct px_xport *xp, int sni_woke);
/* Sends GOAWAY to every connection (hard: closes them). */
void px_h2_drain_all(struct px_sessenv *, int hard);

#endif
