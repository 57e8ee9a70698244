/*
 * route.c — see route.h. Lookups are two binary searches over arrays
 * sorted once per table build; no allocation on the request path.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "route.h"
#include "routemsg.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct px_sbstat *sbstats;

struct px_sbstat *
px_sbstat_get(const char *id)
{
	struct px_sbstat *s;

	for (s = sbstats; s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0)
			return s;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->next = sbstats;
	sbstats = s;
	return s;
}

struct px_sbstat *
px_sbstat_first(void)
{
	return sbstats;
}

static int
cmp_custom(const void *a, const void *b)
{
	return strcmp(((const struct px_custom *)a)->host,
	    ((const struct px_custom *)b)->host);
}

static void
routes_free(struct px_routes *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->nsbs; i++) {
		free(r->sbs[i].ports);
		free(r->sbs[i].portsrc);
	}
	for (i = 0; i < r->ncustoms; i++)
		free(r->customs[i].host);
	for (i = 0; i < r->nfleet_hosts; i++)
		free(r->fleet_hosts[i]);
	free(r->fleet_hosts);
	free(r->sbs);
	free(r->customs);
	free(r->tokens);
	free(r->domain);
	free(r);
}

void
px_routes_ref(struct px_routes *r)
{
	r->refs++;
}

void
px_routes_unref(struct px_routes *r)
{
	if (r != NULL && --r->refs == 0)
		routes_free(r);
}

static int
cmp_token(const void *a, const void *b)
{
	return memcmp(((const struct px_rtoken *)a)->hash,
	    ((const struct px_rtoken *)b)->hash, 32);
}

static int
unhex(const char *hex, unsigned char *out, size_t n)
{
	size_t i;

	if (hex == NULL || strlen(hex) != 2 * n)
		return -1;
	for (i = 0; i < 2 * n; i++) {
		char c = hex[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
		    c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (v < 0)
			return -1;
		out[i / 2] = (unsigned char)(i % 2 ? out[i / 2] | v : v << 4);
	}
	return 0;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* An entry left out of the table: counted, and the first few said in
 * r->skipped for the worker's log. Never a reason to refuse the table:
 * one bad route must not take the others (and the worker) down. */
static void
skip(struct px_routes *r, const char *fmt, ...)
{
	size_t n = strlen(r->skipped);
	va_list ap;

	r->nskipped++;
	if (n + 4 >= sizeof(r->skipped))
		return;
	if (n > 0) {
		snprintf(r->skipped + n, sizeof(r->skipped) - n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(r->skipped + n, sizeof(r->skipped) - n, fmt, ap);
	va_end(ap);
}

static int
build_tokens(struct px_routes *r, json_t *toks, char *err, size_t errlen)
{
	json_t *t;
	size_t i;

	if ((r->tokens = calloc(json_array_size(toks) + 1, sizeof(*r->tokens))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	json_array_foreach(toks, i, t) {
		const char *sb = json_string_value(json_object_get(t, PX_RT_TOKEN_SANDBOX));
		struct px_rtoken *k = &r->tokens[r->ntokens];

		if (unhex(json_string_value(json_object_get(t, PX_RT_TOKEN_SHA256)),
		    k->hash, 32) != 0 ||
		    (sb != NULL && !px_valid_sandbox_id(sb, strlen(sb)))) {
			skip(r, "bad token entry %zu", i);
			continue;
		}
		snprintf(k->sandbox, sizeof(k->sandbox), "%s", sb ? sb : "");
		r->ntokens++;
	}
	qsort(r->tokens, r->ntokens, sizeof(*r->tokens), cmp_token);
	return 0;
}

enum px_token_result
px_route_token(const struct px_routes *r, const char *sandbox, const char *token,
    size_t len)
{
	struct px_rtoken key;
	const struct px_rtoken *t;
	size_t i;

	if (len == 0 || len > 512)
		return PX_TOKEN_UNKNOWN;
	SHA256((const unsigned char *)token, len, key.hash);
	/* A hash of a secret leaks nothing through the search's timing;
	 * the final equality check is constant-time anyway. */
	t = bsearch(&key, r->tokens, r->ntokens, sizeof(*r->tokens), cmp_token);
	if (t == NULL || CRYPTO_memcmp(t->hash, key.hash, 32) != 0)
		return PX_TOKEN_UNKNOWN;
	if (t->sandbox[0] == '\0')
		return PX_TOKEN_OK;
	/* the same token may not appear twice, but be exact about it */
	for (i = 0; sandbox[i] == t->sandbox[i] && sandbox[i] != '\0'; i++)
		;
	return sandbox[i] == t->sandbox[i] ? PX_TOKEN_OK : PX_TOKEN_OTHER;
}

struct px_routes *
px_routes_from_json(const char *json, size_t len, char *err, size_t errlen)
{
	struct px_routes *r;
	json_error_t jerr;
	json_t *root;

	if ((root = json_loadb(json, len, 0, &jerr)) == NULL) {
		snprintf(err, errlen, "routes: %s", jerr.text);
		return NULL;
	}
	r = px_routes_build(root, err, errlen);
	json_decref(root);
	return r;
}

/* Fills sb from the message's entry sbj; 0, or -1 with the entry
 * skipped (said in r->skipped). A bad port is left out alone. */
static int
build_sb(struct px_routes *r, struct px_rsb *sb, json_t *sbj, size_t i)
{
	const char *id = json_string_value(json_object_get(sbj, PX_RT_SB_ID));
	const char *addr = json_string_value(json_object_get(sbj, PX_RT_SB_ADDRESS));
	const char *state = json_string_value(json_object_get(sbj, PX_RT_SB_STATE));
	json_t *ports = json_object_get(sbj, PX_RT_SB_PORTS), *pj;
	size_t j, k;

	if (id == NULL || !px_valid_sandbox_id(id, strlen(id)) ||
	    addr == NULL || strlen(addr) >= sizeof(sb->address) ||
	    (ports != NULL && !json_is_array(ports))) {
		skip(r, "bad sandbox entry %zu", i);
		return -1;
	}
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->address, sizeof(sb->address), "%s", addr);
	snprintf(sb->state, sizeof(sb->state), "%s", state ? state : "running");
	sb->srci = i;
	if (json_is_true(json_object_get(sbj, PX_RT_SB_REMOTE))) {
		const char *host = json_string_value(json_object_get(sbj, PX_RT_SB_HOST));
		const char *fleet = json_string_value(json_object_get(sbj, PX_RT_SB_FLEET));

		if (host == NULL || fleet == NULL || *host == '\0' ||
		    strlen(host) >= sizeof(sb->host) || strlen(fleet) >= sizeof(sb->fleet)) {
			skip(r, "bad fleet entry %zu (%s)", i, id);
			return -1;
		}
		sb->remote = 1;
		sb->host_up = json_is_true(json_object_get(sbj, PX_RT_SB_HOST_UP)) && *fleet;
		snprintf(sb->host, sizeof(sb->host), "%s", host);
		snprintf(sb->fleet, sizeof(sb->fleet), "%s", fleet);
	}
	if ((sb->stat = px_sbstat_get(id)) == NULL ||
	    (sb->ports = calloc(json_array_size(ports) + 1, sizeof(*sb->ports))) == NULL) {
		skip(r, "sandbox %s: out of memory", id);
		return -1;
	}
	sb->portsrc = calloc(json_array_size(ports) + 1, sizeof(*sb->portsrc));
	json_array_foreach(ports, j, pj) {
		json_t *pn = json_object_get(pj, PX_RT_PORT);
		json_int_t port = json_integer_value(pn);
		const char *hh = json_string_value(json_object_get(pj, PX_RT_PORT_HOST_HEADER));
		const char *vis = json_string_value(json_object_get(pj, PX_RT_PORT_VISIBILITY));
		struct px_rport *p = &sb->ports[sb->nports];

		for (k = 0; k < sb->nports && sb->ports[k].port != port; k++)
			;
		if (!json_is_integer(pn) || port < 1 || port > 65535 || k < sb->nports) {
			skip(r, "bad port in %s", id);
			continue;
		}
		p->port = (uint16_t)port;
		p->host_upstream = hh && strcmp(hh, "upstream") == 0;
		p->private_ = vis && strcmp(vis, "private") == 0;
		if (sb->portsrc != NULL)
			sb->portsrc[sb->nports] = j;
		sb->nports++;
	}
	return 0;
}

/* The same id twice (the parent never sends it): the first one. */
static int
cmp_sb_src(const void *a, const void *b)
{
	const struct px_rsb *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	return c != 0 ? c : x->srci < y->srci ? -1 : x->srci > y->srci;
}

static int
cmp_custom_src(const void *a, const void *b)
{
	const struct px_custom *x = a, *y = b;
	int c = strcmp(x->host, y->host);

	return c != 0 ? c : x->sb < y->sb ? -1 : x->sb > y->sb ? 1 :
	    x->port < y->port ? -1 : x->port > y->port;
}

struct px_routes *
px_routes_build(json_t *root, char *err, size_t errlen)
{
	struct px_routes *r;
	json_t *sbs, *sbj, *pj;
	size_t i, j, k, nc = 0;
	const char *domain;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->refs = 1;
	domain = json_string_value(json_object_get(root, PX_RT_DOMAIN));
	sbs = json_object_get(root, PX_RT_SANDBOXES);
	if (domain == NULL || !json_is_array(sbs))
		BAD("routes: missing domain or sandboxes");
	if ((r->domain = strdup(domain)) == NULL)
		BAD("out of memory");
	if ((r->sbs = calloc(json_array_size(sbs) + 1, sizeof(*r->sbs))) == NULL)
		BAD("out of memory");
	json_array_foreach(sbs, i, sbj) {
		struct px_rsb *sb = &r->sbs[r->nsbs];

		if (build_sb(r, sb, sbj, i) == 0) {
			r->nsbs++;
			nc += json_array_size(json_object_get(sbj, PX_RT_SB_PORTS));
			continue;
		}
		free(sb->ports);
		free(sb->portsrc);
		memset(sb, 0, sizeof(*sb));
	}
	qsort(r->sbs, r->nsbs, sizeof(*r->sbs), cmp_sb_src);
	for (i = k = 0; i < r->nsbs; i++) {
		if (k > 0 && strcmp(r->sbs[k - 1].id, r->sbs[i].id) == 0) {
			skip(r, "sandbox %s listed twice", r->sbs[i].id);
			free(r->sbs[i].ports);
			free(r->sbs[i].portsrc);
			continue;
		}
		if (k != i)
			r->sbs[k] = r->sbs[i];
		k++;
	}
	r->nsbs = k;
	if ((r->customs = calloc(nc + 1, sizeof(*r->customs))) == NULL)
		BAD("out of memory");
	/* Second pass after sorting, so custom entries point at final slots. */
	for (i = 0; i < r->nsbs; i++) {
		struct px_rsb *sb = &r->sbs[i];
		json_t *ports = json_object_get(json_array_get(sbs, sb->srci), PX_RT_SB_PORTS);

		for (j = 0; sb->portsrc != NULL && j < sb->nports; j++) {
			const char *host;

			pj = json_array_get(ports, sb->portsrc[j]);
			host = json_string_value(json_object_get(pj, PX_RT_PORT_HOST));
			if (host == NULL || *host == '\0')
				continue;
			if (!px_valid_hostname(host, strlen(host))) {
				skip(r, "bad custom host in %s", sb->id);
				continue;
			}
			/* the control API refuses these; a name stored before
			 * it did is not routed (an address, loopback, or
			 * another sandbox's name under berth's domain) */
			if (px_host_is_ip(host) || (px_host_under(host, domain) ?
			    !px_host_own_name(host, domain, sb->id) :
			    px_host_is_localhost(host)))
				continue;
			if ((r->customs[r->ncustoms].host = strdup(host)) == NULL)
				BAD("out of memory");
			r->customs[r->ncustoms].sb = sb;
			r->customs[r->ncustoms].port = &sb->ports[j];
			r->ncustoms++;
		}
		free(sb->portsrc);
		sb->portsrc = NULL;
	}
	qsort(r->customs, r->ncustoms, sizeof(*r->customs), cmp_custom_src);
	for (i = k = 0; i < r->ncustoms; i++) {
		if (k > 0 && strcmp(r->customs[k - 1].host, r->customs[i].host) == 0) {
			skip(r, "custom host %s of %s held by %s too", r->customs[i].host,
			    r->customs[i].sb->id, r->customs[k - 1].sb->id);
			free(r->customs[i].host);
			continue;
		}
		if (k != i)
			r->customs[k] = r->customs[i];
		k++;
	}
	r->ncustoms = k;
	if (build_tokens(r, json_object_get(root, PX_RT_TOKENS), err, errlen) != 0)
		goto fail;
	{
		json_t *hl = json_object_get(root, PX_RT_FLEET_HOSTS), *h;

		if ((r->fleet_hosts = calloc(json_array_size(hl) + 1,
		    sizeof(*r->fleet_hosts))) == NULL)
			BAD("out of memory");
		json_array_foreach(hl, i, h) {
			const char *id = json_string_value(h);

			if (id == NULL || strlen(id) > 32 ||
			    !px_valid_sandbox_id(id, strlen(id))) {
				skip(r, "bad fleet host %zu", i);
				continue;
			}
			if ((r->fleet_hosts[r->nfleet_hosts] = strdup(id)) == NULL)
				BAD("out of memory");
			r->nfleet_hosts++;
		}
	}
	return r;
fail:
	routes_free(r);
	return NULL;
}

static int
cmp_sb_id(const void *id, const void *sb)
{
	return strcmp(id, ((const struct px_rsb *)sb)->id);
}

static const struct px_rsb *
find_sb(const struct px_routes *r, const char *id)
{
	return bsearch(id, r->sbs, r->nsbs, sizeof(*r->sbs), cmp_sb_id);
}

static const struct px_rport *
find_port(const struct px_rsb *sb, uint16_t port)
{
	size_t i;

	for (i = 0; i < sb->nports; i++)
		if (sb->ports[i].port == port)
			return &sb->ports[i];
	return NULL;
}

int
px_route_fleet_peer(const struct px_routes *r, const void *peer, char *host,
    size_t hostlen)
{
	size_t i;

	if (peer == NULL)
		return 0;
	for (i = 0; i < r->nfleet_hosts; i++)
		if (X509_check_host((X509 *)peer, r->fleet_hosts[i],
		    strlen(r->fleet_hosts[i]), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
		    X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, NULL) == 1) {
			snprintf(host, hostlen, "%s", r->fleet_hosts[i]);
			return 1;
		}
	return 0;
}

enum px_route_result
px_route_lookup(const struct px_routes *r, const char *host, size_t len,
    struct px_route_match *m)
{
	size_t hlen = len, dlen, i;
	const char *colon, *dash;
	struct px_custom key, *c;

	memset(m, 0, sizeof(*m));
	colon = memchr(host, ':', len);
	if (colon != NULL) {
		hlen = colon - host;
		if (px_parse_port(colon + 1, len - hlen - 1) == 0)
			return PX_ROUTE_BAD_HOST;
	}
	if (hlen == 0 || hlen > PX_HOSTNAME_MAX)
		return PX_ROUTE_BAD_HOST;
	for (i = 0; i < hlen; i++) {
		char ch = host[i];

		m->host[i] = (ch >= 'A' && ch <= 'Z') ? ch - 'A' + 'a' : ch;
	}
	m->host[hlen] = '\0';
	if (!px_valid_hostname(m->host, hlen))
		return PX_ROUTE_BAD_HOST;

	dlen = strlen(r->domain);
	if (hlen > dlen + 1 && m->host[hlen - dlen - 1] == '.' &&
	    memcmp(m->host + hlen - dlen, r->domain, dlen) == 0) {
		size_t llen = hlen - dlen - 1;

		/* exactly one label: <port>-<sandbox>, or a sandbox's own
		 * <name>-<sandbox> (a custom host) */
		if (memchr(m->host, '.', llen) != NULL)
			return PX_ROUTE_UNKNOWN_HOST;
		dash = memchr(m->host, '-', llen);
		if (dash == NULL)
			return PX_ROUTE_UNKNOWN_HOST;
		m->guest_port = px_parse_port(m->host, dash - m->host);
		i = llen - (dash + 1 - m->host);
		if (m->guest_port == 0 && m->host[0] >= 'a' && m->host[0] <= 'z')
			goto custom;
		if (m->guest_port == 0 || !px_valid_sandbox_id(dash + 1, i))
			return PX_ROUTE_UNKNOWN_HOST;
		memcpy(m->sandbox, dash + 1, i);
		m->sandbox[i] = '\0';
		if ((m->sb = find_sb(r, m->sandbox)) == NULL)
			return PX_ROUTE_NO_SANDBOX;
		if ((m->port = find_port(m->sb, m->guest_port)) == NULL)
			return PX_ROUTE_NO_PORT;
		return PX_ROUTE_OK;
	}
custom:
	key.host = m->host;
	c = bsearch(&key, r->customs, r->ncustoms, sizeof(*r->customs), cmp_custom);
	if (c == NULL)
		return PX_ROUTE_UNKNOWN_HOST;
	m->sb = c->sb;
	m->port = c->port;
	m->guest_port = c->port->port;
	snprintf(m->sandbox, sizeof(m->sandbox), "%s", c->sb->id);
	return PX_ROUTE_OK;
}
