/*
 * token.h — access tokens of the control API and of private URLs: making
 * them, hashing them, finding one among stored hashes in constant time,
 * and what each may do (scoping). A token is "berth_" followed by the
 * base64url text (no padding) of 32 random bytes; only its SHA-256 is
 * ever stored or sent to the workers.
 * What each may do (scoping) is the route table's (api/table.c): an
 * admin token (and the unix socket) may do everything; a sandbox token
 * what each route's scope lets it on its own sandbox (read it, its ports,
 * egress rules, commands, files, processes, checkpoints, forks), read the
 * global policy and rotate itself; nothing else.
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
	int fleet;		/* a fleet peer (fleet_api_listen): API_FLEET
				 * routes only */
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


#endif
