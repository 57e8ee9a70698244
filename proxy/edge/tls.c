/*
 * tls.c — see tls.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tls.h"
#include "fleet_tls.h"

#include <limits.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct px_sni {
	char		*name;		/* lower case; "*.x" for wildcards */
	SSL_CTX		*ctx;
};

struct px_tls {
	int		 refs;
	SSL_CTX		**ctxs;
	int		 nctx;
	struct px_sni	*names;
	int		 nnames;
};

static unsigned char ticket_keys[PX_TICKET_KEYS][PX_TICKET_KEY_LEN];
static int nticket_keys;
static unsigned long long hs_full, hs_resumed;

void
px_tls_set_ticket_keys(const unsigned char keys[][PX_TICKET_KEY_LEN], int n)
{
	if (n > PX_TICKET_KEYS)
		n = PX_TICKET_KEYS;
	memcpy(ticket_keys, keys, (size_t)n * PX_TICKET_KEY_LEN);
	nticket_keys = n;
}

void
px_tls_counts(unsigned long long *full, unsigned long long *resumed)
{
	*full = hs_full;
	*resumed = hs_resumed;
}

static int
ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv,
    EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
	OSSL_PARAM params[2];
	const unsigned char *k = NULL;
	int i;

	if (nticket_keys == 0)
		return 0;	/* no ticket, no resumption: never an error */
	if (enc) {
		k = ticket_keys[0];
		memcpy(name, k, 16);
		if (RAND_bytes(iv, 16) != 1)
			return -1;
	} else {
		for (i = 0; i < nticket_keys; i++)
			if (memcmp(name, ticket_keys[i], 16) == 0)
				k = ticket_keys[i];
		if (k == NULL)
			return 0;	/* unknown key: full handshake */
	}
	if (EVP_CipherInit_ex(cctx, EVP_aes_256_cbc(), NULL, k + 16, iv, enc) != 1)
		return -1;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (EVP_MAC_init(hctx, k + 48, 32, params) != 1)
		return -1;
	/* Ask for a new ticket when the key used is no longer current. */
	return (!enc && k != ticket_keys[0]) ? 2 : 1;
}

static int
sni_match(const char *pattern, const char *name)
{
	if (pattern[0] == '*' && pattern[1] == '.') {
		const char *dot = strchr(name, '.');

		return dot != NULL && dot != name && strcasecmp(dot + 1, pattern + 2) == 0;
	}
	return strcasecmp(pattern, name) == 0;
}

static void (*sni_hook)(void *, void *, const char *);
static void *sni_arg;
static int xport_idx = -1;	/* the transport on its SSL */
static void *xport_owner(const struct px_xport *);

void
px_tls_set_sni_hook(void (*fn)(void *, void *, const char *), void *arg)
{
	sni_hook = fn;
	sni_arg = arg;
}

static int
servername_cb(SSL *ssl, int *alert, void *arg)
{
	struct px_tls *t = arg;
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	int i, pass;

	if (name == NULL)
		return SSL_TLSEXT_ERR_OK;
	if (sni_hook != NULL) {
		struct px_xport *x = xport_idx >= 0 ?
		    SSL_get_ex_data(ssl, xport_idx) : NULL;

		sni_hook(sni_arg, x != NULL ? xport_owner(x) : NULL, name);
	}
	/* exact names first, then wildcards */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < t->nnames; i++) {
			int wild = t->names[i].name[0] == '*';

			if (wild == pass && sni_match(t->names[i].name, name)) {
				SSL_set_SSL_CTX(ssl, t->names[i].ctx);
				return SSL_TLSEXT_ERR_OK;
			}
		}
	return SSL_TLSEXT_ERR_OK;	/* default certificate */
}

static int alpn_h2;	/* px_tls_set_h2 */

void
px_tls_set_h2(int on)
{
	alpn_h2 = on;
}

/* h2 when on and offered (in any place: it is the better protocol) to
 * a proxy transport (the control API over TLS, on the same contexts,
 * speaks HTTP/1.1 only), else http/1.1. */
static int
alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned int i = 0;
	int h2 = alpn_h2 && xport_idx >= 0 && SSL_get_ex_data(ssl, xport_idx) != NULL;

	while (h2 && i < inlen) {
		unsigned int n = in[i];

		if (i + 1 + n > inlen)
			break;
		if (n == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
			*out = in + i + 1;
			*outlen = 2;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	i = 0;
	while (i < inlen) {
		unsigned int n = in[i];

		if (i + 1 + n > inlen)
			break;
		if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

static void
info_cb(const SSL *ssl, int where, int ret)
{
	if (where & SSL_CB_HANDSHAKE_DONE) {
		if (SSL_session_reused((SSL *)ssl))
			hs_resumed++;
		else
			hs_full++;
	}
}

static void
ssl_err(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256];

	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errlen, "%s: %s", what, e ? buf : "unknown error");
	ERR_clear_error();
}

static int
add_names(struct px_tls *t, SSL_CTX *ctx, X509 *x)
{
	GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	int i, n = sans ? sk_GENERAL_NAME_num(sans) : 0;
	struct px_sni *nn;

	nn = realloc(t->names, sizeof(*nn) * (t->nnames + n + 1));
	if (nn == NULL) {
		GENERAL_NAMES_free(sans);
		return -1;
	}
	t->names = nn;
	for (i = 0; i < n; i++) {
		GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		const unsigned char *s;
		int len;

		if (g->type != GEN_DNS)
			continue;
		s = ASN1_STRING_get0_data(g->d.dNSName);
		len = ASN1_STRING_length(g->d.dNSName);
		if (len <= 0 || len > 253 || memchr(s, '\0', len) != NULL)
			continue;
		if ((t->names[t->nnames].name = strndup((const char *)s, len)) == NULL)
			break;
		t->names[t->nnames++].ctx = ctx;
	}
	GENERAL_NAMES_free(sans);
	return 0;
}

static SSL_CTX *
make_ctx(struct px_tls *t, const struct px_tls_cert *c, char *err, size_t errlen)
{
	static const unsigned char sid_ctx[] = "berth";
	SSL_CTX *ctx;
	BIO *bio = NULL;
	X509 *x = NULL, *chain;
	EVP_PKEY *key = NULL;

	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		ssl_err(err, errlen, "SSL_CTX_new");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
	/* Peers that close without close_notify are judged by HTTP framing,
	 * not reported as errors (OpenSSL 3 + libevent 2.1). */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF |
	    SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
	    SSL_OP_NO_COMPRESSION);
	/* Idle connections keep no read/write buffers. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	/* No read-ahead here: evhttp (the control API) would stall on
	 * records OpenSSL read ahead. px_tls_ssl() turns it on. */
	if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256") != 1 ||
	    SSL_CTX_set_cipher_list(ctx,
	    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305:"
	    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256:"
	    "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384") != 1 ||
	    /* TLS 1.3 in the same order as 1.2 (and as Go and Cloudflare):
	     * AES-128-GCM first, fewer AES rounds per record and SHA-256
	     * for the key schedule; OpenSSL's default puts AES-256 first. */
	    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:"
	    "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384") != 1) {
		ssl_err(err, errlen, "TLS parameters");
		goto fail;
	}
	SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 1);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
	SSL_CTX_set_tlsext_servername_callback(ctx, servername_cb);
	SSL_CTX_set_tlsext_servername_arg(ctx, t);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
	SSL_CTX_set_info_callback(ctx, info_cb);

	if ((bio = BIO_new_mem_buf(c->cert_pem, (int)c->cert_len)) == NULL ||
	    (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) == NULL ||
	    SSL_CTX_use_certificate(ctx, x) != 1) {
		ssl_err(err, errlen, "certificate");
		goto fail;
	}
	while ((chain = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
		if (SSL_CTX_add0_chain_cert(ctx, chain) != 1) {
			X509_free(chain);
			ssl_err(err, errlen, "certificate chain");
			goto fail;
		}
	ERR_clear_error();	/* the end of the chain reads as an error */
	BIO_free(bio);
	if ((bio = BIO_new_mem_buf(c->key_pem, (int)c->key_len)) == NULL ||
	    (key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)) == NULL ||
	    SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		ssl_err(err, errlen, "private key");
		goto fail;
	}
	if (add_names(t, ctx, x) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	BIO_free(bio);
	X509_free(x);
	EVP_PKEY_free(key);
	return ctx;
fail:
	BIO_free(bio);
	X509_free(x);
	EVP_PKEY_free(key);
	SSL_CTX_free(ctx);
	return NULL;
}

static void
tls_free(struct px_tls *t)
{
	int i;

	for (i = 0; i < t->nctx; i++)
		SSL_CTX_free(t->ctxs[i]);
	for (i = 0; i < t->nnames; i++)
		free(t->names[i].name);
	free(t->ctxs);
	free(t->names);
	free(t);
}

struct px_tls *
px_tls_new(const struct px_tls_cert *certs, int n, char *err, size_t errlen)
{
	struct px_tls *t;
	int i;

	if (n < 1) {
		snprintf(err, errlen, "no certificate");
		return NULL;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->ctxs = calloc(n, sizeof(*t->ctxs))) == NULL) {
		free(t);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->refs = 1;
	for (i = 0; i < n; i++) {
		char e[256];

		if ((t->ctxs[i] = make_ctx(t, &certs[i], e, sizeof(e))) == NULL) {
			snprintf(err, errlen, "certificate %d: %s", i, e);
			tls_free(t);
			return NULL;
		}
		t->nctx++;
	}
	return t;
}

void
px_tls_ref(struct px_tls *t)
{
	t->refs++;
}

void
px_tls_unref(struct px_tls *t)
{
	if (t != NULL && --t->refs == 0)
		tls_free(t);
}

SSL_CTX *
px_tls_default_ctx(struct px_tls *t)
{
	return t->ctxs[0];
}

int
px_tls_random(void *buf, size_t n)
{
	return n <= INT_MAX && RAND_bytes(buf, (int)n) == 1 ? 0 : -1;
}

/* ---- the client transport ---- */

struct px_xport {
	struct bufferevent *bev;
	SSL		*ssl;		/* NULL: plain */
	struct px_tls	*tls;		/* its contexts, held */
	void		*owner;
	struct evbuffer	*stage;		/* bytes gathered for one SSL_write */
	int		 staging;
	char		*sni;		/* px_xport_pair's: its server name */
	int		 pair;		/* over one end of a bufferevent pair */
};

static void *
xport_owner(const struct px_xport *x)
{
	return x->owner;
}

/* A new server-side SSL on the default context (SNI may switch it). */
static SSL *
tls_ssl(struct px_tls *t)
{
	SSL *ssl = SSL_new(t->ctxs[0]);

	/* One read(2) per request instead of two (record header, then the
	 * record). libevent 2.1 does not look at what OpenSSL read ahead:
	 * px_xport_kick() hands it over. */
	if (ssl != NULL)
		SSL_set_read_ahead(ssl, 1);
	return ssl;
}

struct px_xport *
px_xport_accept(struct event_base *base, int fd, enum px_xport_kind kind,
    struct px_tls *tls, void *owner)
{
	struct px_xport *x;

	if ((x = calloc(1, sizeof(*x))) == NULL) {
		close(fd);
		return NULL;
	}
	x->owner = owner;
	if (kind == PX_XPORT_PLAIN) {
		x->bev = bufferevent_socket_new(base, fd,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		if (x->bev == NULL)
			goto fail;
		return x;
	}
	if (kind == PX_XPORT_FLEET) {
		x->ssl = px_fleet_tls_server();	/* clients must show a fleet cert */
	} else if (tls != NULL) {
		x->tls = tls;
		px_tls_ref(tls);
		x->ssl = tls_ssl(tls);
		if (xport_idx < 0)
			xport_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		if (x->ssl != NULL && xport_idx >= 0)
			SSL_set_ex_data(x->ssl, xport_idx, x);
	}
	if (x->ssl == NULL)
		goto fail;
	x->bev = bufferevent_openssl_socket_new(base, fd, x->ssl,
	    BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (x->bev == NULL) {
		SSL_free(x->ssl);
		goto fail;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(x->bev, 1);
	return x;
fail:
	close(fd);
	px_tls_unref(x->tls);
	free(x);
	return NULL;
}

struct px_xport *
px_xport_pair(struct bufferevent *bev, const char *sni)
{
	struct px_xport *x;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		return NULL;
	if (sni != NULL && (x->sni = strdup(sni)) == NULL) {
		free(x);
		return NULL;
	}
	x->bev = bev;
	x->pair = 1;
	return x;
}

int
px_xport_is_pair(const struct px_xport *x)
{
	return x->pair;
}

int
px_xport_h2(const struct px_xport *x)
{
	const unsigned char *p;
	unsigned int n = 0;

	if (x->ssl == NULL)
		return 0;
	SSL_get0_alpn_selected(x->ssl, &p, &n);
	return n == 2 && memcmp(p, "h2", 2) == 0;
}

void
px_xport_set_owner(struct px_xport *x, void *owner)
{
	x->owner = owner;
}

void
px_xport_free(struct px_xport *x)
{
	if (x == NULL)
		return;
	if (x->stage != NULL)
		evbuffer_free(x->stage);
	if (x->pair)	/* the other end sees EOF */
		bufferevent_flush(x->bev, EV_WRITE, BEV_FINISHED);
	bufferevent_free(x->bev);	/* frees the SSL too */
	free(x->sni);
	px_tls_unref(x->tls);
	free(x);
}

struct bufferevent *
px_xport_bev(const struct px_xport *x)
{
	return x->bev;
}

int
px_xport_tls(const struct px_xport *x)
{
	return x->ssl != NULL;
}

const char *
px_xport_sni(const struct px_xport *x)
{
	if (x->pair)
		return x->sni;
	return x->ssl != NULL ?
	    SSL_get_servername(x->ssl, TLSEXT_NAMETYPE_host_name) : NULL;
}

const void *
px_xport_peer_cert(const struct px_xport *x)
{
	return x->ssl != NULL ? SSL_get0_peer_certificate(x->ssl) : NULL;
}

/*
 * Writing to the client. libevent 2.1's TLS bufferevent never writes when
 * data is added: it waits for EPOLLOUT, costing an epoll_ctl pair and a
 * loop turn per response. While an upstream read is handled, response
 * bytes gather in x->stage instead and go out in one SSL_write at its
 * end; only what SSL_write cannot take goes to the bufferevent. This is
 * safe only when the bufferevent has nothing queued and OpenSSL wants
 * nothing, so that the byte order and OpenSSL's retry rules hold.
 */
struct evbuffer *
px_xport_out(struct px_xport *x)
{
	return x->staging ? x->stage : bufferevent_get_output(x->bev);
}

void
px_xport_stage(struct px_xport *x)
{
	if (x->ssl == NULL || x->staging || !SSL_is_init_finished(x->ssl) ||
	    SSL_want(x->ssl) != SSL_NOTHING ||
	    evbuffer_get_length(bufferevent_get_output(x->bev)) != 0)
		return;
	if (x->stage == NULL && (x->stage = evbuffer_new()) == NULL)
		return;
	x->staging = 1;
}

void
px_xport_flush(struct px_xport *x)
{
	struct evbuffer *out = bufferevent_get_output(x->bev);
	size_t len;
	int n;

	if (!x->staging)
		return;
	x->staging = 0;
	if ((len = evbuffer_get_length(x->stage)) == 0)
		return;
	if (evbuffer_get_length(out) == 0 && len <= INT_MAX) {
		n = SSL_write(x->ssl, evbuffer_pullup(x->stage, (ev_ssize_t)len), (int)len);
		if (n > 0)
			evbuffer_drain(x->stage, (size_t)n);
		else
			ERR_clear_error();	/* libevent meets it again */
	}
	if (evbuffer_get_length(x->stage) > 0)
		evbuffer_add_buffer(out, x->stage);
}

/*
 * TLS reads ahead (tls_ssl): one read(2) takes the record header, the
 * record and whatever followed it. libevent 2.1 only asks OpenSSL for
 * more when the socket is readable (it looks at SSL_pending(), not
 * SSL_has_pending()), so records that OpenSSL already holds would wait
 * for the client's next packet. Whenever the session reads, hand them
 * over: activating the bufferevent's read event makes it SSL_read() them.
 */
void
px_xport_kick(struct px_xport *x)
{
	if (x->ssl != NULL && SSL_has_pending(x->ssl) &&
	    (bufferevent_get_enabled(x->bev) & EV_READ))
		event_active(&x->bev->ev_read, EV_READ, 1);
}

void
px_xport_read_on(struct px_xport *x)
{
	bufferevent_enable(x->bev, EV_READ);
	px_xport_kick(x);
}

struct bufferevent *
px_xport_fleet_client(struct event_base *base, const char *peer_host)
{
	struct bufferevent *bev;
	SSL *ssl;

	if ((ssl = px_fleet_tls_client(peer_host)) == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}
