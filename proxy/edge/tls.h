/*
 * tls.h — the worker's TLS contexts: one SSL_CTX per certificate, SNI
 * picks among them (exact name, then wildcard, then the default), ALPN
 * picks h2 (when px_tls_set_h2 says so) or http/1.1, TLS 1.2-1.3, X25519:P-256, session tickets under
 * keys the parent generates and rotates so every worker can resume every
 * other worker's sessions. HTTP code never sees OpenSSL: sessions talk
 * through a transport (px_xport, below) that hides it.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_TLS_H
#define BERTH_TLS_H

#include <stddef.h>

/* OpenSSL's types, by their tags: including this header brings no
 * OpenSSL header along (callers that use OpenSSL include it). */
struct ssl_st;
struct ssl_ctx_st;
struct event_base;
struct bufferevent;
struct evbuffer;

#define PX_TICKET_KEY_LEN 80	/* name 16, AES-256 key 32, HMAC key 32 */
#define PX_TICKET_KEYS	2	/* current, previous */

struct px_tls;

struct px_tls_cert {
	const char	*cert_pem;	/* leaf first, then chain */
	size_t		 cert_len;
	const char	*key_pem;
	size_t		 key_len;
};

/* Builds contexts for certs[0..n); certs[0] is the default. */
struct px_tls *px_tls_new(const struct px_tls_cert *certs, int n,
    char *err, size_t errlen);
void px_tls_ref(struct px_tls *);
void px_tls_unref(struct px_tls *);
/* The default certificate's context (for listeners other than the
 * proxy's, e.g. the control API over TCP). */
struct ssl_ctx_st *px_tls_default_ctx(struct px_tls *);
/* fn(arg, owner, name) is called with each server name a client sends
 * (before the certificate is chosen), with the owner of its transport
 * (px_xport_set_owner) or NULL for a connection that is no transport's
 * (the control API's); fn NULL: none. */
void px_tls_set_sni_hook(void (*fn)(void *arg, void *owner, const char *name),
    void *arg);
/* Installs ticket keys (keys[0] encrypts, all decrypt); all workers
 * share them. */
void px_tls_set_ticket_keys(const unsigned char keys[][PX_TICKET_KEY_LEN], int n);
/* ALPN selects h2 when the client offers it (on) or never (0). */
void px_tls_set_h2(int on);
/* Counts of full and resumed handshakes since start. */
void px_tls_counts(unsigned long long *full, unsigned long long *resumed);
/* n random bytes from the CSPRNG; -1: none to be had. */
int px_tls_random(void *buf, size_t n);

/*
 * The transport of a client connection: a bufferevent over TLS or plain
 * TCP. The HTTP layer reads the bufferevent's input and writes its
 * output (or px_xport_out() while staging) and asks the transport for
 * the rest; it never sees OpenSSL or libevent's internals. A plain
 * transport over one end of a socketpair stands in for it in tests.
 */
struct px_xport;

enum px_xport_kind {
	PX_XPORT_PLAIN,
	PX_XPORT_TLS,		/* server side, on px_tls's contexts */
	PX_XPORT_FLEET,		/* server side of the fleet listener (mTLS) */
};

/* A transport on fd (non-blocking, closed on free or on failure) with
 * deferred callbacks; tls for PX_XPORT_TLS (held until the transport is
 * freed); owner is what the SNI hook gets. NULL on failure. */
struct px_xport *px_xport_accept(struct event_base *, int fd,
    enum px_xport_kind, struct px_tls *tls, void *owner);
void px_xport_set_owner(struct px_xport *, void *owner);
/* A plain transport over bev, one end of a bufferevent pair (h2.c: an
 * HTTP/2 stream as an HTTP/1.1 connection); sni: the server name it
 * reports (copied; NULL: none). Freeing it frees bev after giving the
 * other end EOF. NULL when out of memory (bev is then the caller's). */
struct px_xport *px_xport_pair(struct bufferevent *bev, const char *sni);
/* 1 if made by px_xport_pair. */
int px_xport_is_pair(const struct px_xport *);
/* 1 if ALPN chose h2 (after the handshake). */
int px_xport_h2(const struct px_xport *);
/* Frees the bufferevent, the SSL and the socket. */
void px_xport_free(struct px_xport *);
struct bufferevent *px_xport_bev(const struct px_xport *);
/* 1 over TLS: a handshake comes first (BEV_EVENT_CONNECTED ends it). */
int px_xport_tls(const struct px_xport *);
/* The server name the client sent, or NULL. */
const char *px_xport_sni(const struct px_xport *);
/* The client's certificate (an X509 *), or NULL. */
const void *px_xport_peer_cert(const struct px_xport *);
/*
 * Write staging. While staging (px_xport_stage() to px_xport_flush())
 * px_xport_out() is a buffer of the transport's, written with one
 * SSL_write at the flush; otherwise it is the bufferevent's output.
 * Staging starts only when it keeps the byte order (over TLS, nothing
 * queued, OpenSSL wanting nothing); plain transports never stage.
 */
struct evbuffer *px_xport_out(struct px_xport *);
void px_xport_stage(struct px_xport *);
void px_xport_flush(struct px_xport *);
/* Hands the bufferevent the records OpenSSL read ahead (if reading). */
void px_xport_kick(struct px_xport *);
/* Enables reading, then px_xport_kick(). */
void px_xport_read_on(struct px_xport *);

/* A bufferevent (deferred callbacks, not yet connected) of TLS to
 * another host's fleet listener that accepts only peer_host's
 * certificate; NULL when not configured or out of memory. */
struct bufferevent *px_xport_fleet_client(struct event_base *,
    const char *peer_host);

#endif
