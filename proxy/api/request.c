/*
 * api/request.c — a request's target (path segments, query) and who sent it
 * (authentication, authorization).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

static int
hexdig(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes %XX in place ('+' stays '+'); -1 on a bad escape or %00. */
static int
pct_decode(char *s)
{
	char *o = s;
	int hi, lo;

	for (; *s != '\0'; s++) {
		if (*s != '%') {
			*o++ = *s;
			continue;
		}
		if ((hi = hexdig(s[1])) < 0 || (lo = hexdig(s[2])) < 0 ||
		    (hi | lo) == 0)
			return -1;
		*o++ = (char)(hi << 4 | lo);
		s += 2;
	}
	*o = '\0';
	return 0;
}

/*
 * Finds name in the query string and copies its decoded value ('+' is a
 * space) to buf. 1 found, 0 absent, -1 bad or too long.
 */
int
api_query_get(const struct req *r, const char *name, char *buf, size_t size)
{
	return api_query_nth(r, name, 0, buf, size);
}

/* The same for the nth (from 0) of a name given more than once. */
int
api_query_nth(const struct req *r, const char *name, unsigned nth, char *buf,
    size_t size)
{
	const char *p = r->query, *amp, *eq;
	size_t nl = strlen(name), vl;
	char *q;

	while (*p != '\0') {
		amp = strchr(p, '&');
		if (amp == NULL)
			amp = p + strlen(p);
		eq = memchr(p, '=', (size_t)(amp - p));
		if ((eq ? (size_t)(eq - p) : (size_t)(amp - p)) == nl &&
		    strncmp(p, name, nl) == 0 && nth-- == 0) {
			vl = eq ? (size_t)(amp - eq - 1) : 0;
			if (vl >= size)
				return -1;
			if (eq != NULL)
				memcpy(buf, eq + 1, vl);
			buf[vl] = '\0';
			for (q = buf; *q != '\0'; q++)
				if (*q == '+')
					*q = ' ';
			return pct_decode(buf) == -1 ? -1 : 1;
		}
		p = *amp ? amp + 1 : amp;
	}
	return 0;
}

/* Splits the request target's path into segments; -1 after replying. */
int
api_parse_target(struct req *r, const char *url, size_t len)
{
	struct http_parser_url u;
	const char *path;
	size_t plen;
	char *p, *save = NULL;

	http_parser_url_init(&u);
	if (http_parser_parse_url(url, len, 0, &u) != 0 ||
	    !(u.field_set & (1 << UF_PATH))) {
		snprintf(r->path, sizeof(r->path), "?");
		api_reply_error(r, 400, NULL, NULL, "bad request target");
		return -1;
	}
	path = url + u.field_data[UF_PATH].off;
	plen = u.field_data[UF_PATH].len;
	if ((u.field_set & (1 << UF_QUERY)) &&
	    u.field_data[UF_QUERY].len >= sizeof(r->query)) {
		snprintf(r->path, sizeof(r->path), "?");
		api_reply_error(r, 414, NULL, NULL, "the query string is %u bytes: "
		    "at most %zu", (unsigned)u.field_data[UF_QUERY].len,
		    sizeof(r->query) - 1);
		return -1;
	}
	if (u.field_set & (1 << UF_QUERY)) {
		memcpy(r->query, url + u.field_data[UF_QUERY].off,
		    u.field_data[UF_QUERY].len);
		r->query[u.field_data[UF_QUERY].len] = '\0';
	}
	if (plen >= sizeof(r->path)) {
		snprintf(r->path, sizeof(r->path), "?");
		api_reply_error(r, 404, NULL, NULL, "no such resource (path of %zu "
		    "bytes)", plen);
		return -1;
	}
	memcpy(r->path, path, plen);
	r->path[plen] = '\0';
	api_shown(r->path, sizeof(r->path), r->path);
	/* One trailing slash is forgiven: /v1/sandboxes/ = /v1/sandboxes. */
	if (plen > 1 && r->path[plen - 1] == '/')
		r->path[plen - 1] = '\0';

	memcpy(r->segbuf, r->path, sizeof(r->segbuf));
	r->nseg = 0;
	for (p = strtok_r(r->segbuf, "/", &save); p != NULL;
	    p = strtok_r(NULL, "/", &save)) {
		if (r->nseg == CTL_MAX_SEGS) {
			api_reply_error(r, 404, NULL, NULL, "no such resource: %s",
			    r->path);
			return -1;
		}
		if (strchr(p, '%') != NULL && pct_decode(p) == -1) {
			api_reply_error(r, 400, NULL, NULL, "bad percent-encoding "
			    "in the path: %s", r->path);
			return -1;
		}
		r->seg[r->nseg++] = p;
	}
	return 0;
}

/* ---- authentication ---- */

struct tokscan {
	unsigned char (*digests)[PX_TOKEN_DIGEST_LEN];
	struct px_token *toks;
	size_t n, cap;
};

static int
scan_token(const struct px_token *t, void *arg)
{
	struct tokscan *ts = arg;

	if (ts->n == ts->cap) {
		size_t cap = ts->cap ? ts->cap * 2 : 16;
		void *d = realloc(ts->digests, cap * sizeof(*ts->digests));

		if (d == NULL)
			return 1;
		ts->digests = d;
		if ((d = realloc(ts->toks, cap * sizeof(*ts->toks))) == NULL)
			return 1;
		ts->toks = d;
		ts->cap = cap;
	}
	if (px_token_hex_decode(t->sha256, ts->digests[ts->n]) == -1)
		return 0;	/* cannot match anything: skip */
	ts->toks[ts->n++] = *t;
	return 0;
}

static void __attribute__((format(printf, 2, 3)))
reply_401(struct req *r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	json_t *e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = json_pack("{s:{s:i, s:s, s:s}}", "error", "status", 401, "code",
	    px_control_error_code(401), "message", msg);
	api_reply_json_hdr(r, 401, e, "WWW-Authenticate: Bearer realm=\"berth\"\r\n");
}

/*
 * The unix socket is admin by itself (its mode is the access control).
 * The TCP listener needs "Authorization: Bearer berth_..." naming a
 * stored token: it is hashed and compared with every stored hash in
 * constant time. 0, or -1 after replying 401.
 */
int
api_authenticate(struct req *r)
{
	struct conn *c = r->c;
	struct tokscan ts = { NULL, NULL, 0, 0 };
	unsigned char digest[PX_TOKEN_DIGEST_LEN];
	char err[256];
	const char *v;
	size_t len;
	int rc, i, was_closing;

	memset(&r->auth, 0, sizeof(r->auth));
	if (c->fleet_peer[0] != '\0') {
		/* a fleet peer placed a create here: that, and nothing else */
		if (r->method == HTTP_POST && r->nseg == 2 &&
		    strcmp(r->seg[0], "v1") == 0 && strcmp(r->seg[1], "sandboxes") == 0) {
			r->auth.admin = 1;
			return 0;
		}
		/* ... or moves one here: the fleet's own routes (API_FLEET) */
		if (r->nseg >= 3 && strcmp(r->seg[0], "v1") == 0 &&
		    strcmp(r->seg[1], "fleet") == 0 &&
		    strcmp(r->seg[2], "move") == 0) {
			r->auth.fleet = 1;
			return 0;
		}
		c->closing = 1;
		api_reply_error(r, 403, NULL, NULL, "fleet host %s may only create "
		    "a sandbox here", c->fleet_peer);
		return -1;
	}
	if (!c->tcp) {
		r->auth.admin = 1;
		return 0;
	}
	/* a TCP connection that fails to authenticate is closed after the
	 * answer: guessing tokens costs a connection each time, and no
	 * unauthenticated connection keeps a slot */
	was_closing = c->closing;
	c->closing = 1;
	if (c->rh.authz_bad) {
		reply_401(r, "malformed Authorization header");
		return -1;
	}
	if (c->rh.authzlen == 0) {
		reply_401(r, "a token is required: Authorization: Bearer "
		    "berth_...");
		return -1;
	}
	if (c->rh.authzlen < 7 || strncasecmp(c->rh.authz, "Bearer ", 7) != 0) {
		reply_401(r, "only Bearer tokens are accepted");
		return -1;
	}
	for (v = c->rh.authz + 7; *v == ' '; v++)
		;
	for (len = strlen(v); len > 0 && v[len - 1] == ' '; len--)
		;
	if (!px_token_well_formed(v, len)) {
		reply_401(r, "not a berth token");
		return -1;
	}
	px_token_digest(v, len, digest);
	rc = px_store_token_list(c->ctl->store, NULL, scan_token, &ts, err,
	    sizeof(err));
	if (rc != 0) {
		free(ts.digests);
		free(ts.toks);
		api_reply_error(r, 500, NULL, NULL, "state store: %s",
		    rc > 0 ? "out of memory" : err);
		return -1;
	}
	i = px_token_find(digest, (const unsigned char (*)[PX_TOKEN_DIGEST_LEN])
	    ts.digests, ts.n);
	if (i >= 0) {
		r->auth.admin = ts.toks[i].sandbox[0] == '\0';
		memcpy(r->auth.sandbox, ts.toks[i].sandbox,
		    sizeof(r->auth.sandbox));
		snprintf(r->auth.token_id, sizeof(r->auth.token_id), "%s",
		    ts.toks[i].id);
	}
	free(ts.digests);
	free(ts.toks);
	if (i < 0) {
		reply_401(r, "unknown or revoked token");
		return -1;
	}
	if (!r->auth.admin && !c->by_sandbox) {
		struct conn *o;
		int n = 0;

		/* the admin share of the TCP slots stays free */
		TAILQ_FOREACH(o, &c->ctl->conns, entry)
			n += o->by_sandbox;
		if (n >= CTL_MAX_TCP - CTL_ADMIN_RESERVE) {
			api_reply_error_hdr(r, 503, "Retry-After: 1\r\n",
			    "all %d control connections sandbox tokens may hold "
			    "are in use (%d more are kept for admin tokens)",
			    CTL_MAX_TCP - CTL_ADMIN_RESERVE, CTL_ADMIN_RESERVE);
			return -1;
		}
		c->by_sandbox = 1;
	}
	c->closing = was_closing;
	if (!c->authed) {
		c->authed = 1;
		evtimer_del(c->deadline);
	}
	return 0;
}

/* Reads ?limit= and ?after=; -1 after replying 400. */
int
api_page_parse(struct req *r, struct page *pg)
{
	char buf[16], *end;
	long v;
	int rc;

	memset(pg, 0, sizeof(*pg));
	pg->limit = CTL_PAGE_DEFAULT;
	if ((rc = api_query_get(r, "limit", buf, sizeof(buf))) != 0) {
		v = rc == 1 && buf[0] >= '1' && buf[0] <= '9' ?
		    strtol(buf, &end, 10) : 0;
		if (rc == -1 || v < 1 || v > CTL_PAGE_MAX || *end != '\0') {
			api_reply_error(r, 400, NULL, "limit", "must be a number "
			    "from 1 to %d", CTL_PAGE_MAX);
			return -1;
		}
		pg->limit = (int)v;
	}
	if ((rc = api_query_get(r, "after", pg->after, sizeof(pg->after))) == -1) {
		api_reply_error(r, 400, NULL, "after", "not a valid cursor");
		return -1;
	}
	pg->have_after = rc == 1 && pg->after[0] != '\0';
	return 0;
}
