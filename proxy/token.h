/*
 * token.h — access tokens of the control API and of private URLs: making
 * them, hashing them, finding one among stored hashes in constant time,
 * and what each may do (scoping). A token is "berth_" followed by the
 * base64url text (no padding) of 32 random bytes; only its SHA-256 is
 * ever stored or sent to the workers.
 * Scoping: an admin token (and the unix socket) may do everything. A
 * sandbox token may read its own sandbox, read and change its ports and
 * egress rules (the handler keeps those inside the global policy), pause
 * and resume it, read its events and the global policy, and rotate
 * itself; nothing else.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_TOKEN_H
#define BERTH_TOKEN_H

#include <stddef.h>

#define PX_TOKEN_PREFIX		"berth_"
#define PX_TOKEN_PREFIX_LEN	6
#define PX_TOKEN_LEN		(PX_TOKEN_PREFIX_LEN + 43)	/* 49 */
#define PX_TOKEN_DIGEST_LEN	32

/* Who is asking. */
struct px_auth {
	int admin;		/* 1: admin token or the unix socket */
	char sandbox[41];	/* a sandbox token's sandbox, else "" */
	char token_id[24];	/* the token used, "" for the unix socket */
};

/* A new secret (out must hold PX_TOKEN_LEN + 1) and public id ("tok-" +
 * 16 hex, id must hold 24). 0, or -1 with err filled. */
int px_token_generate(char *out, char *id, char *err, size_t errlen);
/* 1 if s[0..len) has the shape of a token. */
int px_token_well_formed(const char *s, size_t len);
void px_token_digest(const char *s, size_t len,
    unsigned char out[PX_TOKEN_DIGEST_LEN]);
/* Lower-case hex of the digest of s[0..len): hex holds 65. */
void px_token_hash_hex(const char *s, size_t len, char *hex);
/* 0 and out filled if hex is 64 hex digits, else -1. */
int px_token_hex_decode(const char *hex, unsigned char out[PX_TOKEN_DIGEST_LEN]);

/*
 * Compares digest with every one of n digests with CRYPTO_memcmp and no
 * early exit; returns the index of the match or -1. The time taken
 * depends on n only.
 */
int px_token_find(const unsigned char digest[PX_TOKEN_DIGEST_LEN],
    const unsigned char (*digests)[PX_TOKEN_DIGEST_LEN], size_t n);

/*
 * Whether a may send method to the path whose segments are seg[0..nseg)
 * ("v1", "sandboxes", "sb-1", "ports", "80"). 0 when allowed, else 403
 * with a one-line reason in why.
 */
int px_token_authorize(const struct px_auth *a, const char *method,
    char *const *seg, int nseg, char *why, size_t whylen);

#endif
