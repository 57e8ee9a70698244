/*
 * fleet_tls.h — mutual TLS between the hosts of a fleet. Every host has a
 * certificate from the fleet CA (certs/berth-fleet-cert) naming its host
 * id. A host's fleet listener accepts only clients with such a
 * certificate; an edge forwarding a request checks that the server's
 * certificate names the host that owns the sandbox. Contexts are built
 * from PEM text, since workers cannot open files.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_TLS_H
#define BERTH_FLEET_TLS_H

#include <stddef.h>

/* OpenSSL's SSL and SSL_CTX by their tags: no OpenSSL header comes
 * along with this one (HTTP code includes it for the host name). */
struct ssl_st;
struct ssl_ctx_st;
struct x509_st;

/* A server (server 1) or client context; NULL with err. */
struct ssl_ctx_st *px_fleet_tls_ctx(const char *ca_pem, const char *cert_pem,
    const char *key_pem, int server, char *err, size_t errlen);
void px_fleet_tls_ctx_free(struct ssl_ctx_st *);

/* Worker side: installs this host's contexts (replacing older ones). */
int px_fleet_tls_set(const char *host, const char *ca_pem, const char *cert_pem,
    const char *key_pem, char *err, size_t errlen);
/* This host's id, "" when not in fleet mode. */
const char *px_fleet_tls_host(void);
/* A server SSL for the fleet listener; NULL when not configured. */
struct ssl_st *px_fleet_tls_server(void);
/* A client SSL that accepts only peer_host's certificate; NULL when not
 * configured. */
struct ssl_st *px_fleet_tls_client(const char *peer_host);
/* The DNS names of a verified peer's certificate that could be host ids
 * (fleet_host's syntax: 1-32 of [a-z0-9-], lower-cased), at most max:
 * their count; 0 when the handshake verified none. */
size_t px_fleet_tls_peer_names(struct ssl_st *, char (*names)[33], size_t max);
/* The same names of a certificate (pure: tests/unit/test_fleet). */
size_t px_fleet_tls_cert_names(struct x509_st *, char (*names)[33], size_t max);

#endif
