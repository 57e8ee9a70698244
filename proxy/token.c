/*
 * token.c — see token.h. OpenSSL supplies the randomness (RAND_bytes),
 * SHA-256 and the constant-time comparison (CRYPTO_memcmp).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int
px_token_generate(char *out, char *id, char *err, size_t errlen)
{
	unsigned char raw[32], idraw[8];
	size_t i, o = PX_TOKEN_PREFIX_LEN;
	unsigned v;
	int bits = 0;

	if (RAND_bytes(raw, sizeof(raw)) != 1 ||
	    RAND_bytes(idraw, sizeof(idraw)) != 1) {
		snprintf(err, errlen, "no randomness for a token");
		return -1;
	}
	memcpy(out, PX_TOKEN_PREFIX, PX_TOKEN_PREFIX_LEN);
	v = 0;
	for (i = 0; i < sizeof(raw); i++) {
		v = (v << 8) | raw[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = b64url[(v >> bits) & 63];
		}
	}
	if (bits > 0)
		out[o++] = b64url[(v << (6 - bits)) & 63];
	out[o] = '\0';
	memcpy(id, "tok-", 4);
	for (i = 0; i < sizeof(idraw); i++)
		snprintf(id + 4 + 2 * i, 3, "%02x", idraw[i]);
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

int
px_token_well_formed(const char *s, size_t len)
{
	size_t i;

	if (len != PX_TOKEN_LEN || memcmp(s, PX_TOKEN_PREFIX,
	    PX_TOKEN_PREFIX_LEN) != 0)
		return 0;
	for (i = PX_TOKEN_PREFIX_LEN; i < len; i++)
		if (s[i] == '\0' || strchr(b64url, s[i]) == NULL)
			return 0;
	return 1;
}

void
px_token_digest(const char *s, size_t len, unsigned char out[PX_TOKEN_DIGEST_LEN])
{
	SHA256((const unsigned char *)s, len, out);
}

void
px_token_hash_hex(const char *s, size_t len, char *hex)
{
	unsigned char d[PX_TOKEN_DIGEST_LEN];
	size_t i;

	px_token_digest(s, len, d);
	for (i = 0; i < sizeof(d); i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int
px_token_hex_decode(const char *hex, unsigned char out[PX_TOKEN_DIGEST_LEN])
{
	int i, hi, lo;

	for (i = 0; i < PX_TOKEN_DIGEST_LEN; i++) {
		if ((hi = hexval(hex[2 * i])) < 0 ||
		    (lo = hexval(hex[2 * i + 1])) < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return hex[2 * PX_TOKEN_DIGEST_LEN] == '\0' ? 0 : -1;
}

int
px_token_find(const unsigned char digest[PX_TOKEN_DIGEST_LEN],
    const unsigned char (*digests)[PX_TOKEN_DIGEST_LEN], size_t n)
{
	size_t i;
	int found = -1, eq;

	for (i = 0; i < n; i++) {
		eq = CRYPTO_memcmp(digest, digests[i], PX_TOKEN_DIGEST_LEN) == 0;
		/* Branch-free select keeps the loop's time independent of
		 * where (or whether) the match is. */
		found = eq ? (int)i : found;
	}
	return found;
}

static int __attribute__((format(printf, 3, 4)))
deny(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return 403;
}

int
px_token_authorize(const struct px_auth *a, const char *method,
    char *const *seg, int nseg, char *why, size_t whylen)
{
	int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	int post = strcmp(method, "POST") == 0;

	if (a->admin)
		return 0;
	if (a->sandbox[0] == '\0')
		return deny(why, whylen, "%s", "no access");
	if (nseg < 2 || strcmp(seg[0], "v1") != 0)
		return deny(why, whylen, "a sandbox token cannot use %s",
		    nseg > 0 && strcmp(seg[0], "metrics") == 0 ? "/metrics" :
		    "this resource");
	if (nseg == 2 && strcmp(seg[1], "health") == 0)
		return 0;
	if (nseg == 2 && strcmp(seg[1], "policy") == 0) {
		if (get)
			return 0;
		return deny(why, whylen, "%s", "a sandbox token cannot change "
		    "the global policy");
	}
	if (nseg == 4 && strcmp(seg[1], "tokens") == 0 &&
	    strcmp(seg[3], "rotate") == 0 && post &&
	    strcmp(seg[2], a->token_id) == 0)
		return 0;
	if (strcmp(seg[1], "sandboxes") != 0 || nseg < 3)
		return deny(why, whylen, "a token of sandbox '%s' may only use "
		    "/v1/sandboxes/<its id>/...", a->sandbox);
	if (strcmp(seg[2], a->sandbox) != 0)
		return deny(why, whylen, "this token belongs to sandbox '%s'",
		    a->sandbox);
	if (nseg == 3) {
		if (get)
			return 0;
		return deny(why, whylen, "%s", "a sandbox token cannot change "
		    "or delete its sandbox");
	}
	if (strcmp(seg[3], "ports") == 0 || strcmp(seg[3], "egress") == 0)
		return 0;
	if (nseg == 4 && (strcmp(seg[3], "pause") == 0 ||
	    strcmp(seg[3], "resume") == 0))
		return 0;
	if (nseg == 4 && strcmp(seg[3], "events") == 0 && get)
		return 0;
	/* commands in its own guest (POST .../exec) */
	if (nseg == 4 && strcmp(seg[3], "exec") == 0 && post)
		return 0;
	/* its detached processes: list, show, logs; kill, wait */
	if (strcmp(seg[3], "processes") == 0 && ((get && nseg <= 6) ||
	    (post && nseg == 6)))
		return 0;
	/* and its files: GET, PUT and DELETE .../files?path=, POST
	 * .../files/mkdir and .../files/move, GET .../watch?path= */
	if (nseg == 4 && strcmp(seg[3], "files") == 0 && (get ||
	    strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0))
		return 0;
	if (nseg == 5 && strcmp(seg[3], "files") == 0 && post &&
	    (strcmp(seg[4], "mkdir") == 0 || strcmp(seg[4], "move") == 0))
		return 0;
	if (nseg == 4 && strcmp(seg[3], "watch") == 0 && get)
		return 0;
	/* its checkpoints: list, take, remove; and back to one */
	if (strcmp(seg[3], "checkpoints") == 0 && ((nseg == 4 && (get ||
	    post)) || (nseg == 5 && strcmp(method, "DELETE") == 0)))
		return 0;
	if (nseg == 4 && strcmp(seg[3], "restore") == 0 && post)
		return 0;
	/* and forks of itself (also from its checkpoints): each fork's
	 * own token is in the answer, so the new sandboxes are held by
	 * whoever holds this one (vm_max_forks bounds a call) */
	if (nseg == 4 && strcmp(seg[3], "fork") == 0 && post)
		return 0;
	return deny(why, whylen, "a sandbox token cannot use '%s' on its "
	    "sandbox", seg[3]);
}
