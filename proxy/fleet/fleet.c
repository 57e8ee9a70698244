/*
 * fleet.c — see fleet.h. One evhttp connection carries the unary calls
 * (grant, keepalive, put, delete, range) in order, so a range sent after
 * a put sees it; a second one carries the watch stream. The watch only
 * says "something changed": the answer is always a full read of the
 * prefix (small: a few keys per host and sandbox), which never needs
 * deltas or compaction handling to be right. A watch starts from the
 * revision after the last full read, so a change between the read and
 * the watch is not left for the next tick.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet.h"
#include "conf.h"
#include "fleet_tls.h"
#include "fleet_view.h"
#include "log.h"
#include "valid.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>

static struct {
	struct event_base *base;
	int		 on;
	char		 host[33];
	char		 prefix[72];
	char		 etcd[80];		/* host:port, for Host: */
	char		 etcd_addr[64];
	unsigned short	 etcd_port;
	char		 edge[80], fleet[80];
	unsigned	 ttl_ms, capacity;
	char		*ca, *cert, *key;	/* PEM text for the workers */
	void		(*changed)(void);
	struct evhttp_connection *conn, *wconn;
	int		 conn_dead, wconn_dead;	/* closed: a new one next time */
	SSL_CTX		*etcd_tls;		/* NULL: plain HTTP */
	char		*user, *password;	/* etcd auth; NULL: none */
	char		 token[512];		/* etcd's auth token, "": none yet */
	int		 authenticating;
	struct evhttp_request *wreq;
	struct event	*tick;
	char		 lease[24];		/* "": not registered */
	int		 granting;
	int		 etcd_ok;		/* the last call was answered */
	int		 inflight;
	int		 refreshing, refresh_again;
	/* from etcd, checked (fleet_view.h): what failed is in bad */
	json_t		*hosts;			/* id -> host value */
	json_t		*sbs;			/* "<host>/<id>" -> value, with "rev" */
	json_t		*claims;		/* "<host>/<id>/<name>" -> revision */
	json_t		*bad;			/* key -> why it is not used (logged) */
	json_t		*desired;		/* id -> sandbox: this host's store */
	json_t		*moved;			/* id -> {"from","to","ports","until"} */
	json_t		*known;			/* id -> sandbox: what etcd holds of ours */
	json_t		*kclaims;		/* "<id>/<name>": our names' keys there */
	json_t		*clashes;		/* the lost claims logged */
	char		 domain[256];
	long long	 rev;			/* etcd revision of the last full read */
	long long	 started;
	int		 stopping;
	int		 revoking;		/* the revoke at stop is under way */
	char		 zone[33];		/* fleet_zone, "": none */
	char		 api[64];		/* fleet_api_listen, "": none */
	json_t		*(*room)(void);		/* what the VMs leave, or NULL */
	char		*last_host;		/* the host value etcd has */
	int		 drained;		/* fleet drain: placed on no more */
	char		 drain_file[PATH_MAX];	/* kept across restarts, or "" */
} F;

static void refresh(void);
static int routes_equal(json_t *, json_t *);
static void put_host(int);

/* obj[key] as a string, "" when absent */
static const char *
str(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s != NULL ? s : "";
}
static void publish(void);
static void moved_expire(void);

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- etcd's JSON gateway ---- */

static char *
b64(const char *s)
{
	size_t n = strlen(s);
	char *o = malloc(4 * ((n + 2) / 3) + 1);

	if (o != NULL)
		EVP_EncodeBlock((unsigned char *)o, (const unsigned char *)s, (int)n);
	return o;
}

/* Decodes base64 text into a NUL-terminated string; NULL if invalid. */
static char *
unb64(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	unsigned char *o;
	int r;

	if (s == NULL || n % 4 != 0 || (o = malloc(n / 4 * 3 + 1)) == NULL)
		return NULL;
	if ((r = EVP_DecodeBlock(o, (const unsigned char *)s, (int)n)) < 0) {
		free(o);
		return NULL;
	}
	if (n > 0 && s[n - 1] == '=')
		r--;
	if (n > 1 && s[n - 2] == '=')
		r--;
	o[r] = '\0';
	return (char *)o;
}

static void
note_etcd(int answered)
{
	if (answered && !F.etcd_ok) {
		log_info("fleet: etcd %s answers", F.etcd);
		F.etcd_ok = 1;
	} else if (!answered && F.etcd_ok) {
		log_warnx("fleet: etcd %s unreachable: serving this host's sandboxes, "
		    "the others' from the last view", F.etcd);
		F.etcd_ok = 0;
		/* the stream is dead too; the next tick starts a new one */
		if (F.wconn != NULL) {
			evhttp_connection_free(F.wconn);	/* frees wreq, no callback */
			F.wconn = NULL;
			F.wreq = NULL;
		}
	}
}

/* ---- the connections to etcd: plain, or TLS with a client certificate ---- */

static void
conn_closed(struct evhttp_connection *conn, void *arg)
{
	/* A TLS connection is not reconnected in place (its SSL state is
	 * spent): the next call makes a new one. */
	if (conn == F.conn)
		F.conn_dead = 1;
	else if (conn == F.wconn)
		F.wconn_dead = 1;
}

static struct evhttp_connection *
etcd_conn(void)
{
	struct evhttp_connection *conn;
	struct bufferevent *bev;
	SSL *ssl;

	if (F.etcd_tls == NULL)
		return evhttp_connection_base_new(F.base, NULL, F.etcd_addr, F.etcd_port);
	if ((ssl = SSL_new(F.etcd_tls)) == NULL)
		return NULL;
	{
		/* the server's name or address is what its certificate must say */
		X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
		struct in6_addr a6;
		struct in_addr a4;

		if (inet_pton(AF_INET, F.etcd_addr, &a4) == 1 ||
		    inet_pton(AF_INET6, F.etcd_addr, &a6) == 1)
			X509_VERIFY_PARAM_set1_ip_asc(vp, F.etcd_addr);
		else {
			X509_VERIFY_PARAM_set1_host(vp, F.etcd_addr, 0);
			SSL_set_tlsext_host_name(ssl, F.etcd_addr);
		}
	}
	if ((bev = bufferevent_openssl_socket_new(F.base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE |
	    BEV_OPT_DEFER_CALLBACKS)) == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	if ((conn = evhttp_connection_base_bufferevent_new(F.base, NULL, bev,
	    F.etcd_addr, F.etcd_port)) == NULL) {
		bufferevent_free(bev);
		return NULL;
	}
	evhttp_connection_set_closecb(conn, conn_closed, NULL);
	return conn;
}

/* The TLS context for etcd: its server checked against ca, this host's
 * client certificate shown when given. NULL with err. */
static SSL_CTX *
etcd_tls_ctx(const struct px_config *c, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	unsigned long e;

	if (ctx == NULL)
		goto fail;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_load_verify_locations(ctx, c->fleet_etcd_ca, NULL) != 1) {
		e = ERR_get_error();
		snprintf(err, errlen, "fleet_etcd_ca %s: %s", c->fleet_etcd_ca,
		    e ? ERR_reason_error_string(e) : "cannot load");
		goto out;
	}
	if (c->fleet_etcd_cert != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, c->fleet_etcd_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, c->fleet_etcd_key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1)) {
		e = ERR_get_error();
		snprintf(err, errlen, "fleet_etcd_cert %s %s: %s", c->fleet_etcd_cert,
		    c->fleet_etcd_key, e ? ERR_reason_error_string(e) : "cannot load");
		goto out;
	}
	ERR_clear_error();
	return ctx;
fail:
	snprintf(err, errlen, "TLS context for etcd: out of memory");
out:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

struct call {
	void		(*cb)(json_t *, void *);
	void		*arg;
};

static void
call_done(struct evhttp_request *req, void *arg)
{
	struct call *c = arg;
	json_t *j = NULL;
	int code = req ? evhttp_request_get_response_code(req) : 0;

	F.inflight--;
	if (code == 200) {
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(b);

		j = json_loadb((const char *)evbuffer_pullup(b, (ev_ssize_t)n), n, 0, NULL);
	} else if (code == 401 && F.user != NULL) {
		/* the token expired (or etcd restarted): a new one first */
		if (F.token[0] != '\0')
			log_info("fleet: etcd token refused: authenticating again");
		F.token[0] = '\0';
	} else if (code != 0) {
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(b);
		json_t *e = json_loadb((const char *)evbuffer_pullup(b, (ev_ssize_t)n),
		    n, 0, NULL);
		const char *m = json_string_value(json_object_get(e, "error"));
		char shown[160];
		size_t i;

		/* etcd's own words, shown safely */
		snprintf(shown, sizeof(shown), "%s", m ? m : "");
		for (i = 0; shown[i] != '\0'; i++)
			if ((unsigned char)shown[i] < 0x20 || (unsigned char)shown[i] > 0x7e)
				shown[i] = '?';
		log_warnx("fleet: etcd answered %d to a request%s%s", code,
		    shown[0] ? ": " : "", shown);
		json_decref(e);
	}
	note_etcd(code != 0);
	if (c->cb != NULL)
		c->cb(j, c->arg);
	json_decref(j);
	free(c);
}

static struct evhttp_request *
new_request(struct evhttp_connection *conn, const char *path, json_t *body,
    void (*done)(struct evhttp_request *, void *), void *arg)
{
	struct evhttp_request *req;
	char *text;

	if ((req = evhttp_request_new(done, arg)) == NULL)
		return NULL;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Host", F.etcd);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	if (F.token[0] != '\0')
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Authorization", F.token);
	if ((text = json_dumps(body, JSON_COMPACT)) != NULL) {
		evbuffer_add(evhttp_request_get_output_buffer(req), text, strlen(text));
		free(text);
	}
	if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, path) != 0)
		return NULL;	/* not queued: done never runs */
	return req;
}

static int etcd_call(const char *, json_t *, void (*)(json_t *, void *), void *);

static void
authenticated(json_t *res, void *arg)
{
	const char *t = json_string_value(json_object_get(res, "token"));

	F.authenticating = 0;
	if (t == NULL || strlen(t) >= sizeof(F.token)) {
		if (res != NULL)
			log_warnx("fleet: etcd refused user %s", F.user);
		return;
	}
	snprintf(F.token, sizeof(F.token), "%s", t);
	log_info("fleet: authenticated to etcd as %s", F.user);
}

/* etcd auth: the calls made before the token arrives fail and are made
 * again at the next tick, with it. */
static void
authenticate(void)
{
	if (F.user == NULL || F.token[0] != '\0' || F.authenticating)
		return;
	F.authenticating = 1;
	if (etcd_call("/v3/auth/authenticate", json_pack("{s:s,s:s}", "name", F.user,
	    "password", F.password), authenticated, NULL) != 0)
		F.authenticating = 0;
}

/* POSTs body (stolen) to path; cb(response or NULL, arg) runs once. */
static int
etcd_call(const char *path, json_t *body, void (*cb)(json_t *, void *), void *arg)
{
	struct call *c;

	if (strcmp(path, "/v3/auth/authenticate") != 0)
		authenticate();
	c = calloc(1, sizeof(*c));
	struct timeval tv;
	unsigned t = F.ttl_ms / 3 < 500 ? 500 : F.ttl_ms / 3;

	if (c == NULL || body == NULL)
		goto fail;
	if (F.conn != NULL && F.conn_dead) {
		evhttp_connection_free(F.conn);
		F.conn = NULL;
	}
	F.conn_dead = 0;
	if (F.conn == NULL) {
		if ((F.conn = etcd_conn()) == NULL)
			goto fail;
		tv.tv_sec = t / 1000;
		tv.tv_usec = (t % 1000) * 1000;
		evhttp_connection_set_timeout_tv(F.conn, &tv);
		evhttp_connection_set_retries(F.conn, 0);
	}
	c->cb = cb;
	c->arg = arg;
	if (new_request(F.conn, path, body, call_done, c) == NULL)
		goto fail;
	F.inflight++;
	json_decref(body);
	return 0;
fail:
	free(c);
	json_decref(body);
	return -1;
}

static char *
key_of(const char *kind, const char *a, const char *b)
{
	char k[512];

	snprintf(k, sizeof(k), "%s/%s/%s%s%s", F.prefix, kind, a, b ? "/" : "", b ? b : "");
	return b64(k);
}

/* P/sandboxes/<us>/<id>/name/<name>: made when a port of ours takes the
 * name, so its create revision says who took it first */
static char *
claim_key(const char *id, const char *name)
{
	char k[512];

	snprintf(k, sizeof(k), "%s/sandboxes/%s/%s/name/%s", F.prefix, F.host, id, name);
	return b64(k);
}

/* Text from etcd (a key), fit for one log line. */
static const char *
shown(const char *s, char *buf, size_t len)
{
	size_t i;

	snprintf(buf, len, "%s", s);
	for (i = 0; buf[i] != '\0'; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	return buf;
}

/* Puts key (text) = value (JSON, stolen), under our lease if lease. */
static void
put(char *key64, json_t *value, int lease)
{
	char *v = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS), *v64;

	json_decref(value);
	if (key64 == NULL || v == NULL || (v64 = b64(v)) == NULL) {
		free(key64);
		free(v);
		return;
	}
	etcd_call("/v3/kv/put", json_pack("{s:s,s:s,s:s?}", "key", key64, "value", v64,
	    "lease", lease ? F.lease : NULL), NULL, NULL);
	free(key64);
	free(v);
	free(v64);
}

/* ---- registration ---- */

/*
 * This host as the others see it: its addresses, and what it has room
 * for (issue 33, for placement): how many sandboxes it holds, how many
 * more fleet_capacity leaves, and with VMs what its measured costs leave
 * (more running, paused, suspended sandboxes of the default size, free
 * memory and disk, the accelerator); its fleet_zone.
 */
static json_t *
host_value(void)
{
	json_t *v, *room, *vm;
	json_int_t n = (json_int_t)json_object_size(F.desired);

	v = json_pack("{s:s,s:s,s:s,s:i,s:I}", "id", F.host, "edge", F.edge,
	    "fleet", F.fleet, "capacity", (int)F.capacity, "started",
	    (json_int_t)F.started);
	room = json_pack("{s:I}", "sandboxes", n);
	if (F.capacity > 0)
		json_object_set_new(room, "free", json_integer(
		    (json_int_t)F.capacity > n ? (json_int_t)F.capacity - n : 0));
	if (F.room != NULL && (vm = F.room()) != NULL) {
		json_object_update(room, vm);
		json_decref(vm);
	}
	json_object_set_new(v, "room", room);
	if (F.zone[0] != '\0')
		json_object_set_new(v, "zone", json_string(F.zone));
	if (F.api[0] != '\0')
		json_object_set_new(v, "api", json_string(F.api));
	if (F.drained)
		json_object_set_new(v, "drained", json_true());
	return v;
}

void
px_fleet_drain_file(const char *path)
{
	struct stat st;

	snprintf(F.drain_file, sizeof(F.drain_file), "%s", path);
	F.drained = lstat(path, &st) == 0;
}

int
px_fleet_drained(void)
{
	return F.drained;
}

int
px_fleet_set_drained(int on, char *err, size_t errlen)
{
	int fd;

	if (!F.on) {
		snprintf(err, errlen, "fleet mode is not configured on this host");
		return -1;
	}
	if (on && !F.drained && F.drain_file[0] != '\0') {
		if ((fd = open(F.drain_file, O_WRONLY | O_CREAT | O_NOFOLLOW |
		    O_CLOEXEC, 0600)) < 0) {
			snprintf(err, errlen, "%s: %s", F.drain_file,
			    strerror(errno));
			return -1;
		}
		(void)fsync(fd);
		close(fd);
	} else if (!on && F.drained && F.drain_file[0] != '\0' &&
	    unlink(F.drain_file) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", F.drain_file, strerror(errno));
		return -1;
	}
	if (F.drained != on) {
		F.drained = on;
		/* the others stop placing here now (before registration:
		 * the registration's value says it) */
		if (F.lease[0] != '\0')
			put_host(1);
	}
	return 0;
}

void
px_fleet_set_room(json_t *(*room)(void))
{
	F.room = room;
}

/* Puts this host's value when it is not what etcd has (at registration,
 * then at each tick: its room changes as sandboxes come and go). */
static void
put_host(int force)
{
	json_t *v = host_value();
	char *text = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) :
	    NULL;

	if (text == NULL || (!force && F.last_host != NULL &&
	    strcmp(text, F.last_host) == 0)) {
		free(text);
		json_decref(v);
		return;
	}
	free(F.last_host);
	F.last_host = text;
	put(key_of("hosts", F.host, NULL), v, 1);
}

static void watch_start(void);

static void
granted(json_t *j, void *arg)
{
	json_t *r = json_object_get(j, "ID");

	F.granting = 0;
	if (json_is_string(r))
		snprintf(F.lease, sizeof(F.lease), "%s", json_string_value(r));
	else if (json_is_integer(r))
		snprintf(F.lease, sizeof(F.lease), "%lld", (long long)json_integer_value(r));
	else
		return;		/* the next tick tries again */
	log_info("fleet: registered host %s (lease %s, TTL %u s, fleet %s, edge %s)",
	    F.host, F.lease, (F.ttl_ms + 999) / 1000, F.fleet, F.edge);
	put_host(1);
	/* reconcile: everything ours is put again, stale keys go (refresh);
	 * the read's answer starts the watch at its revision */
	json_object_clear(F.known);
	publish();
	refresh();
}

static void
grant(void)
{
	if (F.granting || F.stopping)
		return;
	F.granting = 1;
	if (etcd_call("/v3/lease/grant", json_pack("{s:i}", "TTL",
	    (int)((F.ttl_ms + 999) / 1000)), granted, NULL) != 0)
		F.granting = 0;
}

static void
kept(json_t *j, void *arg)
{
	json_t *r = json_object_get(j, "result");
	const char *ttl = json_string_value(json_object_get(r, "TTL"));

	if (j == NULL || F.lease[0] == '\0')
		return;		/* unreachable: noted; retried next tick */
	if ((ttl == NULL || atoi(ttl) <= 0) &&
	    json_integer_value(json_object_get(r, "TTL")) <= 0) {
		log_warnx("fleet: lease %s expired: registering again", F.lease);
		F.lease[0] = '\0';
		grant();
	}
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	if (F.stopping)
		return;
	/* a host cut off etcd must not pile up requests on the connection */
	if (F.inflight > 8)
		return;
	if (F.lease[0] == '\0') {
		grant();
		return;
	}
	etcd_call("/v3/lease/keepalive", json_pack("{s:s}", "ID", F.lease), kept, NULL);
	put_host(0);
	publish();
	refresh();
	watch_start();
}

/* ---- this host's sandboxes ---- */

static void
publish(void)
{
	const char *id;
	json_t *v;
	void *tmp;

	if (F.lease[0] == '\0' || F.stopping)
		return;
	json_object_foreach(F.desired, id, v) {
		json_t *p;
		size_t i;

		/* a name's claim goes before the sandbox that uses it */
		json_array_foreach(json_object_get(v, "ports"), i, p) {
			const char *name = str(p, "host");
			char ck[320];

			if (*name == '\0')
				continue;
			snprintf(ck, sizeof(ck), "%s/%s", id, name);
			if (json_object_get(F.kclaims, ck) != NULL)
				continue;
			put(claim_key(id, name), json_pack("{s:s,s:s,s:s}", "host", F.host,
			    "sandbox", id, "name", name), 0);
			json_object_set_new(F.kclaims, ck, json_true());
		}
		if (json_equal(json_object_get(F.known, id), v))
			continue;
		put(key_of("sandboxes", F.host, id), json_pack("{s:s,s:O}", "host", F.host,
		    "sandbox", v), 0);
		json_object_set(F.known, id, v);
	}
	json_object_foreach_safe(F.known, tmp, id, v) {
		char *k;

		if (json_object_get(F.desired, id) != NULL)
			continue;
		if ((k = key_of("sandboxes", F.host, id)) != NULL)
			etcd_call("/v3/kv/deleterange", json_pack("{s:s}", "key", k), NULL, NULL);
		free(k);
		json_object_del(F.known, id);
	}
	json_object_foreach_safe(F.kclaims, tmp, id, v) {
		const char *name = strchr(id, '/') + 1;
		char sid[PX_SANDBOX_ID_MAX + 1], *k;
		json_t *p;
		size_t i;
		int held = 0;

		snprintf(sid, sizeof(sid), "%.*s", (int)(name - 1 - id), id);
		json_array_foreach(json_object_get(json_object_get(F.desired, sid), "ports"), i, p)
			held |= strcmp(str(p, "host"), name) == 0;
		if (held)
			continue;
		if ((k = claim_key(sid, name)) != NULL)
			etcd_call("/v3/kv/deleterange", json_pack("{s:s}", "key", k), NULL, NULL);
		free(k);
		json_object_del(F.kclaims, id);
	}
}

static void
rev_text(json_int_t rev, char *buf, size_t len)
{
	if (rev == PX_FLEET_REV_NONE)
		snprintf(buf, len, "not in etcd yet");
	else
		snprintf(buf, len, "revision %lld", (long long)rev);
}

/* Each claim that lost (px_fleet_resolve) is logged once. */
static void
log_lost(json_t *lost)
{
	json_t *now = json_object(), *l;
	char k[640], r1[40], r2[40];
	size_t i;

	json_array_foreach(lost, i, l) {
		snprintf(k, sizeof(k), "%s %s %s/%s", str(l, "kind"), str(l, "what"),
		    str(l, "host"), str(l, "id"));
		json_object_set_new(now, k, json_true());
		if (json_object_get(F.clashes, k) != NULL)
			continue;
		rev_text(json_integer_value(json_object_get(l, "rev")), r1, sizeof(r1));
		rev_text(json_integer_value(json_object_get(l, "winner_rev")), r2, sizeof(r2));
		if (strcmp(str(l, "kind"), "id") == 0)
			log_warnx("fleet: sandbox %s is claimed by host %s (%s) and, first, "
			    "by host %s (%s): every edge routes it to host %s", str(l, "what"),
			    str(l, "host"), r1, str(l, "winner"), r2, str(l, "winner"));
		else
			log_warnx("fleet: custom host %s is claimed by host %s for sandbox "
			    "%s (%s) and, first, by host %s (%s): every edge routes it to "
			    "host %s", str(l, "what"), str(l, "host"), str(l, "id"), r1,
			    str(l, "winner"), r2, str(l, "winner"));
	}
	json_decref(F.clashes);
	F.clashes = now;
}

void
px_fleet_routes(json_t *msg)
{
	json_t *r = json_object_get(msg, "routes"), *sbs, *sb, *want, *win, *lost, *v;
	const char *key;
	size_t i;

	if (!F.on || r == NULL)
		return;
	json_object_set_new(r, "fleet_host", json_string(F.host));
	sbs = json_object_get(r, "sandboxes");
	want = json_object();
	moved_expire();
	json_array_foreach(sbs, i, sb) {
		const char *id = json_string_value(json_object_get(sb, "id"));
		json_t *mv = json_object_get(F.moved, id);

		json_object_set_new(want, id, json_pack("{s:s,s:O,s:O}", "id", id,
		    "state", json_object_get(sb, "state"), "ports",
		    json_object_get(sb, "ports")));
		if (mv != NULL && strcmp(str(mv, "to"), F.host) == 0)
			json_object_set_new(json_object_get(want, id), "moved_from",
			    json_string(str(mv, "from")));
	}
	json_decref(F.desired);
	F.desired = want;
	publish();
	/* the hosts whose fleet certificates the fleet listener accepts:
	 * those holding a live lease */
	{
		json_t *hl = json_array();

		json_object_foreach(F.hosts, key, v)
			if (strcmp(key, F.host) != 0)
				json_array_append_new(hl, json_string(key));
		json_object_set_new(r, "fleet_hosts", hl);
	}
	/* every id and custom host name to its first claim (fleet_view.h):
	 * ours lose theirs too, then this edge forwards to the winner */
	lost = json_array();
	win = px_fleet_resolve(F.sbs, F.claims, want, F.host, lost);
	log_lost(lost);
	json_decref(lost);
	for (i = 0; i < json_array_size(sbs); ) {
		const char *id;

		sb = json_array_get(sbs, i);
		id = json_string_value(json_object_get(sb, "id"));
		v = id ? json_object_get(win, id) : NULL;
		if (v == NULL || !json_is_true(json_object_get(v, "local"))) {
			json_array_remove(sbs, i);
			continue;
		}
		json_object_set(sb, "ports", json_object_get(json_object_get(v, "sandbox"),
		    "ports"));
		i++;
	}
	json_object_foreach(win, key, v) {
		const char *host = str(v, "host");
		json_t *s = json_object_get(v, "sandbox"), *h;

		if (json_is_true(json_object_get(v, "local")))
			continue;
		h = json_object_get(F.hosts, host);
		json_array_append_new(sbs, json_pack("{s:s,s:s,s:O,s:O,s:s,s:b,s:s,s:b}",
		    "id", key, "address", "", "state", json_object_get(s, "state"),
		    "ports", json_object_get(s, "ports"), "host", host, "remote", 1,
		    "fleet", h ? str(h, "fleet") : "", "host_up", h != NULL));
	}
	/* moved off here, the target's claim not seen yet: routed there */
	json_object_foreach(F.moved, key, v) {
		const char *to = str(v, "to");
		json_t *h = json_object_get(F.hosts, to);

		if (strcmp(to, F.host) == 0 || json_object_get(win, key) != NULL ||
		    json_object_get(want, key) != NULL || h == NULL)
			continue;
		json_array_append_new(sbs, json_pack("{s:s,s:s,s:s,s:O,s:s,s:b,s:s,s:b}",
		    "id", key, "address", "", "state", "suspended", "ports",
		    json_object_get(v, "ports"), "host", to, "remote", 1, "fleet",
		    str(h, "fleet"), "host_up", 1));
	}
	json_decref(win);
}

/* the moves older than PX_FLEET_MOVED_MS forgotten */
static void
moved_expire(void)
{
	json_int_t now = (json_int_t)now_ms();
	const char *id;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(F.moved, tmp, id, v)
		if (json_integer_value(json_object_get(v, "until")) <= now)
			json_object_del(F.moved, id);
}

void
px_fleet_moved(const char *id, const char *from, const char *to)
{
	json_t *ports;

	if (!F.on || F.moved == NULL)
		return;
	ports = json_object_get(json_object_get(F.desired, id), "ports");
	json_object_set_new(F.moved, id, json_pack("{s:s,s:s,s:o,s:I}", "from",
	    from, "to", to, "ports", ports != NULL ? json_deep_copy(ports) :
	    json_array(), "until", (json_int_t)(now_ms() + PX_FLEET_MOVED_MS)));
}

/* ---- the view of the fleet ---- */

static void
ranged(json_t *j, void *arg)
{
	json_t *hosts, *sbs, *claims, *bad, *kv;
	size_t i, plen = strlen(F.prefix);
	int changed;

	F.refreshing = 0;
	if (j == NULL)
		return;
	{
		json_t *rv = json_object_get(json_object_get(j, "header"), "revision");
		long long v = json_is_string(rv) ? atoll(json_string_value(rv)) :
		    json_integer_value(rv);

		if (v > 0)
			F.rev = v;
	}
	/* a watch from this read's revision on: nothing that changed after
	 * the read is missed until the next tick */
	watch_start();
	hosts = json_object();
	sbs = json_object();
	claims = json_object();
	bad = json_object();
	json_array_foreach(json_object_get(j, "kvs"), i, kv) {
		char *k = unb64(json_string_value(json_object_get(kv, "key")));
		char *v = unb64(json_string_value(json_object_get(kv, "value")));
		json_t *cr = json_object_get(kv, "create_revision"), *e = NULL;
		json_int_t rev = json_is_string(cr) ? atoll(json_string_value(cr)) :
		    json_integer_value(cr);
		char why[160], sk[240], ck[512];
		int kind;

		if (k == NULL || strncmp(k, F.prefix, plen) != 0)
			goto next;
		if (strncmp(k + plen, "/hosts/", 7) == 0) {
			if ((e = px_fleet_check_host(k + plen + 7, v ? v : "", why,
			    sizeof(why))) != NULL)
				json_object_set_new(hosts, k + plen + 7, e);
			else
				json_object_set_new(bad, shown(k, sk, sizeof(sk)), json_string(why));
		} else if (strncmp(k + plen, "/sandboxes/", 11) == 0) {
			if (rev <= 0)
				rev = PX_FLEET_REV_NONE;
			kind = px_fleet_check_sandbox(k + plen + 11, v ? v : "", rev,
			    F.domain, &e, why, sizeof(why));
			if (kind == 1) {
				json_object_set_new(sbs, k + plen + 11, e);
			} else if (kind == 2) {
				snprintf(ck, sizeof(ck), "%s/%s/%s", str(e, "host"), str(e, "id"),
				    str(e, "name"));
				json_object_set_new(claims, ck, json_integer(rev));
				json_decref(e);
			} else
				json_object_set_new(bad, shown(k, sk, sizeof(sk)), json_string(why));
		}
next:
		free(k);
		free(v);
	}
	/* a bad key is skipped, and said once: never fatal to anything */
	{
		const char *key;
		json_t *why;

		json_object_foreach(bad, key, why)
			if (!json_equal(json_object_get(F.bad, key), why))
				log_warnx("fleet: etcd key %s is not used: %s", key,
				    json_string_value(why));
		json_decref(F.bad);
		F.bad = bad;
	}
	changed = !routes_equal(hosts, F.hosts) || !json_equal(sbs, F.sbs) ||
	    !json_equal(claims, F.claims);
	json_decref(F.hosts);
	json_decref(F.sbs);
	json_decref(F.claims);
	F.hosts = hosts;
	F.sbs = sbs;
	F.claims = claims;
	/* what etcd really holds of ours: publish() mends the difference */
	if (F.lease[0] != '\0') {
		const char *key;
		json_t *v, *s;
		size_t n = strlen(F.host);

		json_object_clear(F.known);
		json_object_foreach(sbs, key, v)
			if (strcmp(str(v, "host"), F.host) == 0) {
				s = json_object_get(v, "sandbox");
				json_object_set(F.known, str(s, "id"), s);
			}
		json_object_clear(F.kclaims);
		json_object_foreach(claims, key, v)
			if (strncmp(key, F.host, n) == 0 && key[n] == '/')
				json_object_set_new(F.kclaims, key + n + 1, json_true());
		publish();
		if (json_object_get(hosts, F.host) == NULL && !F.granting) {
			/* our host key is gone (lease revoked or expired):
			 * the keepalive will say so; re-put meanwhile */
			put(key_of("hosts", F.host, NULL), host_value(), 1);
		}
	}
	if (changed && F.changed != NULL) {
		log_debug("fleet: view changed: %zu hosts, %zu sandboxes",
		    json_object_size(hosts), json_object_size(sbs));
		F.changed();
	}
	if (F.refresh_again) {
		F.refresh_again = 0;
		refresh();
	}
}

/* Two views of the hosts alike for routing: their room and zone aside
 * (they change as sandboxes come and go; routes do not). */
static int
routes_equal(json_t *a, json_t *b)
{
	const char *key;
	json_t *v, *w, *x, *y;
	int eq;

	if (json_object_size(a) != json_object_size(b))
		return 0;
	json_object_foreach(a, key, v) {
		if ((w = json_object_get(b, key)) == NULL)
			return 0;
		x = json_deep_copy(v);
		y = json_deep_copy(w);
		json_object_del(x, "room");
		json_object_del(y, "room");
		json_object_del(x, "zone");
		json_object_del(y, "zone");
		eq = json_equal(x, y);
		json_decref(x);
		json_decref(y);
		if (!eq)
			return 0;
	}
	return 1;
}

static void
refresh(void)
{
	char a[96], b[96], *k, *e;

	if (F.refreshing) {
		F.refresh_again = 1;
		return;
	}
	snprintf(a, sizeof(a), "%s/", F.prefix);
	snprintf(b, sizeof(b), "%s0", F.prefix);	/* '/' + 1 */
	k = b64(a);
	e = b64(b);
	if (k != NULL && e != NULL && etcd_call("/v3/kv/range",
	    json_pack("{s:s,s:s}", "key", k, "range_end", e), ranged, NULL) == 0)
		F.refreshing = 1;
	free(k);
	free(e);
}

static void
watch_chunk(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evhttp_request_get_input_buffer(req);
	struct evbuffer_ptr p = evbuffer_search(b, "\"events\"", 8, NULL);
	size_t n = evbuffer_get_length(b);

	if (p.pos >= 0) {
		log_debug("fleet: watch event");
		refresh();
	}
	/* etcd cancels a watch whose start revision was compacted: read
	 * again, and the next watch starts from that read */
	if (evbuffer_search(b, "\"canceled\":true", 15, NULL).pos >= 0) {
		log_debug("fleet: watch canceled");
		F.rev = 0;
		refresh();
	}
	/* keep a tail: the word may straddle two chunks */
	if (n > 16)
		evbuffer_drain(b, n - 16);
}

static void
watch_done(struct evhttp_request *req, void *arg)
{
	F.wreq = NULL;	/* evhttp frees it; the next tick starts another */
}

static void
watch_start(void)
{
	char a[96], b[96], *k, *e;
	json_t *body;

	if (F.wreq != NULL || F.lease[0] == '\0' || F.stopping || !F.etcd_ok)
		return;
	if (F.wconn != NULL && F.wconn_dead) {
		evhttp_connection_free(F.wconn);
		F.wconn = NULL;
	}
	F.wconn_dead = 0;
	if (F.wconn == NULL) {
		if ((F.wconn = etcd_conn()) == NULL)
			return;
		/* a quiet watch ends after this; the next tick renews it */
		evhttp_connection_set_timeout(F.wconn, 300);
		evhttp_connection_set_retries(F.wconn, 0);
	}
	snprintf(a, sizeof(a), "%s/", F.prefix);
	snprintf(b, sizeof(b), "%s0", F.prefix);
	k = b64(a);
	e = b64(b);
	body = json_pack("{s:{s:s,s:s}}", "create_request", "key", k ? k : "",
	    "range_end", e ? e : "");
	if (F.rev > 0) {
		char rv[24];

		/* from just after the last full read: the changes between
		 * that read and this watch are delivered too */
		snprintf(rv, sizeof(rv), "%lld", F.rev + 1);
		json_object_set_new(json_object_get(body, "create_request"),
		    "start_revision", json_string(rv));
	}
	free(k);
	free(e);
	if ((F.wreq = evhttp_request_new(watch_done, NULL)) != NULL) {
		char *text = json_dumps(body, JSON_COMPACT);

		evhttp_request_set_chunked_cb(F.wreq, watch_chunk);
		evhttp_add_header(evhttp_request_get_output_headers(F.wreq), "Host", F.etcd);
		if (F.token[0] != '\0')
			evhttp_add_header(evhttp_request_get_output_headers(F.wreq),
			    "Authorization", F.token);
		if (text != NULL)
			evbuffer_add(evhttp_request_get_output_buffer(F.wreq), text,
			    strlen(text));
		free(text);
		if (evhttp_make_request(F.wconn, F.wreq, EVHTTP_REQ_POST, "/v3/watch") != 0)
			F.wreq = NULL;
	}
	json_decref(body);
}

/* ---- the rest of berthd ---- */

static char *
slurp(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    n > 1 << 20 || fseek(f, 0, SEEK_SET) != 0 ||
	    (buf = malloc(n + 1)) == NULL || fread(buf, 1, n, f) != (size_t)n) {
		snprintf(err, errlen, "%s: cannot read", path);
		free(buf);
		if (f != NULL)
			fclose(f);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	return buf;
}

int
px_fleet_init(struct event_base *base, const struct px_config *c, const char *edge,
    void (*changed)(void), char *err, size_t errlen)
{
	struct timeval tv;
	const char *colon;
	char e2[256];
	void *ctx;

	if (c->fleet_etcd == NULL)
		return 0;
	memset(&F, 0, sizeof(F));
	F.base = base;
	F.changed = changed;
	snprintf(F.host, sizeof(F.host), "%s", c->fleet_host);
	snprintf(F.prefix, sizeof(F.prefix), "%s", c->fleet_prefix);
	snprintf(F.etcd, sizeof(F.etcd), "%s", c->fleet_etcd);
	snprintf(F.edge, sizeof(F.edge), "%s", c->fleet_edge ? c->fleet_edge : edge);
	snprintf(F.fleet, sizeof(F.fleet), "%s", c->fleet_advertise ?
	    c->fleet_advertise : c->fleet_listen);
	F.ttl_ms = c->fleet_ttl;
	F.capacity = c->fleet_capacity;
	snprintf(F.zone, sizeof(F.zone), "%s", c->fleet_zone ? c->fleet_zone : "");
	snprintf(F.api, sizeof(F.api), "%s", c->fleet_api_listen ?
	    c->fleet_api_listen : "");
	colon = strrchr(c->fleet_etcd, ':');
	snprintf(F.etcd_addr, sizeof(F.etcd_addr), "%.*s", (int)(colon - c->fleet_etcd),
	    c->fleet_etcd);
	if (F.etcd_addr[0] == '[') {	/* evhttp wants a bare v6 address */
		memmove(F.etcd_addr, F.etcd_addr + 1, strlen(F.etcd_addr));
		F.etcd_addr[strlen(F.etcd_addr) - 1] = '\0';
	}
	F.etcd_port = (unsigned short)atoi(colon + 1);
	if (c->fleet_etcd_tls &&
	    (F.etcd_tls = etcd_tls_ctx(c, err, errlen)) == NULL)
		return -1;
	if (c->fleet_etcd_user != NULL) {
		char *pw = slurp(c->fleet_etcd_password, err, errlen);
		size_t n;

		if (pw == NULL)
			return -1;
		for (n = strlen(pw); n > 0 && (pw[n - 1] == '\n' || pw[n - 1] == '\r'); n--)
			pw[n - 1] = '\0';
		F.user = strdup(c->fleet_etcd_user);
		F.password = pw;
	}
	if ((F.ca = slurp(c->fleet_ca, err, errlen)) == NULL ||
	    (F.cert = slurp(c->fleet_cert, err, errlen)) == NULL ||
	    (F.key = slurp(c->fleet_key, err, errlen)) == NULL)
		return -1;
	/* prove the workers can build both contexts */
	if ((ctx = px_fleet_tls_ctx(F.ca, F.cert, F.key, 1, e2, sizeof(e2))) == NULL) {
		snprintf(err, errlen, "fleet certificates: %s", e2);
		return -1;
	}
	px_fleet_tls_ctx_free(ctx);
	/* this process's own context: placement's forwards (fleet_api.c;
	 * fleet_api_listen is the control helper's, controld.c) */
	if (px_fleet_tls_set(F.host, F.ca, F.cert, F.key, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "fleet certificates: %s", e2);
		return -1;
	}
	F.hosts = json_object();
	F.sbs = json_object();
	F.desired = json_object();
	F.moved = json_object();
	F.known = json_object();
	F.claims = json_object();
	F.kclaims = json_object();
	F.bad = json_object();
	snprintf(F.domain, sizeof(F.domain), "%s", c->domain ? c->domain : "");
	F.started = (long long)time(NULL);
	F.etcd_ok = 1;		/* until a call says otherwise */
	F.on = 1;
	F.tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	tv.tv_sec = F.ttl_ms / 3 / 1000;
	tv.tv_usec = (F.ttl_ms / 3 % 1000) * 1000;
	evtimer_add(F.tick, &tv);
	grant();
	return 0;
}

int
px_fleet_reload(const struct px_config *c, char *err, size_t errlen)
{
	char *ca, *cert = NULL, *key = NULL, e2[256];
	const char *adv;
	SSL_CTX *ctx;

	if (!F.on)
		return 0;
	if (c->fleet_etcd == NULL) {
		snprintf(err, errlen, "fleet mode cannot be turned off by a reload");
		return -1;
	}
	adv = c->fleet_advertise ? c->fleet_advertise : c->fleet_listen;
	if (strcmp(c->fleet_host, F.host) != 0 || strcmp(c->fleet_etcd, F.etcd) != 0 ||
	    strcmp(c->fleet_prefix, F.prefix) != 0 || c->fleet_ttl != F.ttl_ms ||
	    strcmp(adv, F.fleet) != 0)
		log_warnx("SIGHUP: fleet host, etcd, prefix, TTL or address changed: "
		    "takes effect on restart");
	if ((ca = slurp(c->fleet_ca, err, errlen)) == NULL ||
	    (cert = slurp(c->fleet_cert, err, errlen)) == NULL ||
	    (key = slurp(c->fleet_key, err, errlen)) == NULL)
		goto fail;
	if ((ctx = px_fleet_tls_ctx(ca, cert, key, 1, e2, sizeof(e2))) == NULL) {
		snprintf(err, errlen, "fleet certificates: %s", e2);
		goto fail;
	}
	px_fleet_tls_ctx_free(ctx);
	free(F.ca);
	free(F.cert);
	if (F.key != NULL)
		memset(F.key, 0, strlen(F.key));
	free(F.key);
	F.ca = ca;
	F.cert = cert;
	F.key = key;
	if (px_fleet_tls_set(F.host, F.ca, F.cert, F.key, e2, sizeof(e2)) != 0)
		log_warnx("SIGHUP: fleet certificates for forwarded creates: %s", e2);
	return 0;
fail:
	free(ca);
	free(cert);
	free(key);
	return -1;
}

/* Prometheus lines for GET /metrics. */
void
px_fleet_metrics(struct evbuffer *out)
{
	const char *key;
	json_t *v;
	size_t remote = 0;

	if (!F.on)
		return;
	json_object_foreach(F.sbs, key, v)
		remote += strcmp(str(v, "host"), F.host) != 0;
	evbuffer_add_printf(out,
	    "# HELP berth_fleet_etcd_up Whether etcd answered the last call.\n"
	    "# TYPE berth_fleet_etcd_up gauge\nberth_fleet_etcd_up %d\n"
	    "# HELP berth_fleet_registered Whether this host holds a live lease.\n"
	    "# TYPE berth_fleet_registered gauge\nberth_fleet_registered %d\n"
	    "# HELP berth_fleet_hosts Hosts with a live lease.\n"
	    "# TYPE berth_fleet_hosts gauge\nberth_fleet_hosts %zu\n"
	    "# HELP berth_fleet_remote_sandboxes Other hosts' sandboxes routed here.\n"
	    "# TYPE berth_fleet_remote_sandboxes gauge\nberth_fleet_remote_sandboxes %zu\n",
	    F.etcd_ok, F.lease[0] != '\0', json_object_size(F.hosts), remote);
}

int
px_fleet_enabled(void)
{
	return F.on;
}

int
px_fleet_host_live(const char *host)
{
	return F.on && json_object_get(F.hosts, host) != NULL;
}

unsigned
px_fleet_ttl_ms(void)
{
	return F.ttl_ms;
}

int
px_fleet_etcd_ok(void)
{
	return F.on && F.etcd_ok;
}

const char *
px_fleet_self(void)
{
	return F.on ? F.host : NULL;
}

int
px_fleet_peer_host(const char (*names)[33], size_t n, char *host,
    size_t hostlen)
{
	size_t i;

	if (!F.on)
		return 0;
	/* host ids are one label of [a-z0-9-]: X509_check_host's match
	 * (no wildcard can stand for a single label) is this one */
	for (i = 0; i < n; i++)
		if (memchr(names[i], '\0', 33) != NULL &&
		    strcmp(names[i], F.host) != 0 &&
		    json_object_get(F.hosts, names[i]) != NULL) {
			snprintf(host, hostlen, "%s", names[i]);
			return 1;
		}
	return 0;
}

int
px_fleet_host_api(const char *host, char *addr, size_t addrlen)
{
	const char *a;

	if (!F.on || (a = json_string_value(json_object_get(json_object_get(
	    F.hosts, host), "api"))) == NULL)
		return 0;
	snprintf(addr, addrlen, "%s", a);
	return 1;
}

json_t *
px_fleet_tls_msg(void)
{
	if (!F.on)
		return NULL;
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "fleet", "host", F.host,
	    "ca", F.ca, "cert", F.cert, "key", F.key);
}

json_t *
px_fleet_json(const char *what)
{
	json_t *out, *arr = json_array(), *v;
	const char *key;

	if (!F.on)
		return NULL;
	if (strcmp(what, "hosts") == 0) {
		json_t *counts = json_object();

		json_object_foreach(F.sbs, key, v) {
			const char *h = json_string_value(json_object_get(v, "host"));

			if (h != NULL)
				json_object_set_new(counts, h, json_integer(1 +
				    json_integer_value(json_object_get(counts, h))));
		}
		json_object_foreach(F.hosts, key, v) {
			/* its own top level, the room shared (read only) */
			json_t *h = json_copy(v);

			json_object_set_new(h, "up", json_true());
			json_object_set_new(h, "self", json_boolean(strcmp(key, F.host) == 0));
			json_object_set_new(h, "sandboxes", strcmp(key, F.host) == 0 ?
			    json_integer((json_int_t)json_object_size(F.desired)) :
			    json_integer(json_integer_value(json_object_get(counts, key))));
			/* ours as it is now, not as etcd last said */
			if (strcmp(key, F.host) == 0 && F.drained)
				json_object_set_new(h, "drained", json_true());
			else if (strcmp(key, F.host) == 0)
				json_object_del(h, "drained");
			json_array_append_new(arr, h);
		}
		/* hosts with placement but no live lease: lost */
		json_object_foreach(counts, key, v)
			if (json_object_get(F.hosts, key) == NULL && strcmp(key, F.host) != 0)
				json_array_append_new(arr, json_pack("{s:s,s:b,s:b,s:O}", "id", key,
				    "up", 0, "self", 0, "sandboxes", v));
		if (json_object_get(F.hosts, F.host) == NULL) {
			json_t *h = host_value();

			json_object_set_new(h, "up", json_false());
			json_object_set_new(h, "self", json_true());
			json_object_set_new(h, "sandboxes",
			    json_integer((json_int_t)json_object_size(F.desired)));
			json_array_append_new(arr, h);
		}
		json_decref(counts);
		out = json_pack("{s:s,s:s,s:s?,s:b,s:o}", "self", F.host, "etcd",
		    F.etcd_ok ? "ok" : "unreachable", "lease", F.lease[0] ? F.lease : NULL,
		    "drained", F.drained, "hosts", arr);
		return out;
	}
	/* sandboxes: ours from the store, the others' from etcd */
	json_object_foreach(F.desired, key, v)
		json_array_append_new(arr, json_pack("{s:s,s:s,s:O,s:b,s:O}", "id", key,
		    "host", F.host, "state", json_object_get(v, "state"), "host_up", 1,
		    "ports", json_object_get(v, "ports")));
	/* the others': each id to its owner by the fleet's rules */
	{
		json_t *win = px_fleet_resolve(F.sbs, F.claims, F.desired, F.host, NULL);

		json_object_foreach(win, key, v) {
			const char *h = str(v, "host");
			json_t *s = json_object_get(v, "sandbox");

			if (json_is_true(json_object_get(v, "local")))
				continue;
			json_array_append_new(arr, json_pack("{s:s,s:s,s:O,s:b,s:O}", "id",
			    key, "host", h, "state", json_object_get(s, "state"),
			    "host_up", json_object_get(F.hosts, h) != NULL, "ports",
			    json_object_get(s, "ports")));
		}
		json_decref(win);
	}
	return json_pack("{s:s,s:o}", "self", F.host, "sandboxes", arr);
}

static void
revoked(json_t *res, void *arg)
{
	F.revoking = 0;
}

int
px_fleet_revoking(void)
{
	return F.on && F.revoking;
}

void
px_fleet_stop(void)
{
	if (!F.on || F.stopping)
		return;
	if (F.lease[0] != '\0' && etcd_call("/v3/lease/revoke",
	    json_pack("{s:s}", "ID", F.lease), revoked, NULL) == 0)
		F.revoking = 1;
	F.stopping = 1;
	if (F.wconn != NULL) {
		evhttp_connection_free(F.wconn);
		F.wconn = NULL;
		F.wreq = NULL;
	}
	evtimer_del(F.tick);
}
