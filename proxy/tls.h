/*
 * tls.h — the worker's TLS contexts: one SSL_CTX per certificate, SNI
 * picks among them (exact name, then wildcard, then the default), ALPN
 * offers http/1.1 only, TLS 1.2-1.3, X25519:P-256, session tickets under
 * keys the parent generates and rotates so every worker can resume every
 * other worker's sessions. HTTP code never sees OpenSSL: sessions only
 * ask for a fresh SSL and the SNI name.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_TLS_H
#define BERTH_TLS_H

#include <stddef.h>
#include <openssl/ssl.h>

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
SSL_CTX *px_tls_default_ctx(struct px_tls *);
/* A new server-side SSL on the default context (SNI may switch it). It
 * reads ahead: session.c hands libevent what OpenSSL read (cl_kick). */
SSL *px_tls_ssl(struct px_tls *);
/* Called with each server name a client sends (before the certificate
 * is chosen); NULL: none. */
void px_tls_set_sni_hook(void (*)(SSL *, const char *name));
/* Installs ticket keys (keys[0] encrypts, all decrypt); all workers
 * share them. */
void px_tls_set_ticket_keys(const unsigned char keys[][PX_TICKET_KEY_LEN], int n);
/* SNI name the client sent, or NULL. */
const char *px_tls_sni(SSL *);
/* Counts of full and resumed handshakes since start. */
void px_tls_counts(unsigned long long *full, unsigned long long *resumed);

#endif
