/*
 * fleet_tls.c — see fleet_tls.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_tls.h"

#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static SSL_CTX *server_ctx, *client_ctx;
static char self[64];

static void
ssl_err(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[200];

	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errlen, "%s: %s", what, e ? buf : "failed");
	ERR_clear_error();
}

SSL_CTX *
px_fleet_tls_ctx(const char *ca_pem, const char *cert_pem, const char *key_pem,
    int server, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	X509_STORE *store;
	X509 *x = NULL;
	EVP_PKEY *key = NULL;
	BIO *bio = NULL;
	int nca = 0;

	if ((ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method())) == NULL) {
		ssl_err(err, errlen, "SSL_CTX_new");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	/* the fleet CA alone vouches for hosts, not the system's roots */
	store = SSL_CTX_get_cert_store(ctx);
	if ((bio = BIO_new_mem_buf(ca_pem, -1)) == NULL)
		goto ssl_fail;
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (X509_STORE_add_cert(store, x) != 1)
			goto ssl_fail;
		X509_free(x);
		x = NULL;
		nca++;
	}
	ERR_clear_error();
	BIO_free(bio);
	bio = NULL;
	if (nca == 0) {
		snprintf(err, errlen, "fleet CA: no certificate");
		goto fail;
	}
	if ((bio = BIO_new_mem_buf(cert_pem, -1)) == NULL ||
	    (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) == NULL ||
	    SSL_CTX_use_certificate(ctx, x) != 1)
		goto ssl_fail;
	X509_free(x);
	x = NULL;
	BIO_free(bio);
	if ((bio = BIO_new_mem_buf(key_pem, -1)) == NULL ||
	    (key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)) == NULL ||
	    SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1)
		goto ssl_fail;
	EVP_PKEY_free(key);
	BIO_free(bio);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
	    (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
	if (server) {
		static const unsigned char sid[] = "berth-fleet";

		SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	}
	return ctx;
ssl_fail:
	ssl_err(err, errlen, "fleet certificate");
fail:
	X509_free(x);
	EVP_PKEY_free(key);
	BIO_free(bio);
	SSL_CTX_free(ctx);
	return NULL;
}

void
px_fleet_tls_ctx_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

int
px_fleet_tls_set(const char *host, const char *ca_pem, const char *cert_pem,
    const char *key_pem, char *err, size_t errlen)
{
	SSL_CTX *s, *c;

	if ((s = px_fleet_tls_ctx(ca_pem, cert_pem, key_pem, 1, err, errlen)) == NULL)
		return -1;
	if ((c = px_fleet_tls_ctx(ca_pem, cert_pem, key_pem, 0, err, errlen)) == NULL) {
		SSL_CTX_free(s);
		return -1;
	}
	/* SSLs in flight hold their own references */
	SSL_CTX_free(server_ctx);
	SSL_CTX_free(client_ctx);
	server_ctx = s;
	client_ctx = c;
	snprintf(self, sizeof(self), "%s", host);
	return 0;
}

const char *
px_fleet_tls_host(void)
{
	return self;
}

SSL *
px_fleet_tls_server(void)
{
	return server_ctx ? SSL_new(server_ctx) : NULL;
}

SSL *
px_fleet_tls_client(const char *peer_host)
{
	SSL *ssl;

	if (client_ctx == NULL || (ssl = SSL_new(client_ctx)) == NULL)
		return NULL;
	/* the certificate must name the host that owns the sandbox */
	if (SSL_set1_host(ssl, peer_host) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(ssl),
	    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return ssl;
}

size_t
px_fleet_tls_peer_names(SSL *ssl, char (*names)[33], size_t max)
{
	X509 *peer;
	size_t n;

	if (ssl == NULL || SSL_get_verify_result(ssl) != X509_V_OK ||
	    (peer = SSL_get_peer_certificate(ssl)) == NULL)
		return 0;
	n = px_fleet_tls_cert_names(peer, names, max);
	X509_free(peer);
	return n;
}

size_t
px_fleet_tls_cert_names(X509 *x, char (*names)[33], size_t max)
{
	GENERAL_NAMES *sans;
	size_t n = 0;
	int i, k, len;

	/* only DNS names: the subject's CN is never a host id here, as
	 * X509_CHECK_FLAG_NEVER_CHECK_SUBJECT says for the fleet listener */
	sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	for (i = 0; sans != NULL && i < sk_GENERAL_NAME_num(sans) && n < max; i++) {
		GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		const unsigned char *s;

		if (g->type != GEN_DNS)
			continue;
		s = ASN1_STRING_get0_data(g->d.dNSName);
		len = ASN1_STRING_length(g->d.dNSName);
		if (len < 1 || len > 32)
			continue;
		for (k = 0; k < len; k++) {
			unsigned char ch = (unsigned char)s[k];

			if (ch >= 'A' && ch <= 'Z')
				ch += 'a' - 'A';
			if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
			    (ch == '-' && k > 0 && k < len - 1)))
				break;
			names[n][k] = (char)ch;
		}
		if (k != len)
			continue;
		names[n++][len] = '\0';
	}
	GENERAL_NAMES_free(sans);
	return n;
}
