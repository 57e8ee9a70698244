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
