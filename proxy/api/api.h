/*
 * api.h — the control API's insides, shared by the files of proxy/api/
 * (its outside, what berthd sees, is control.h). One file per family
 * of resources; conn.c reads requests, table.c routes them. The files
 * call down, never up: the families use reply.c and request.c (answers,
 * documents, bodies, the target, the query); conn.c and streams.c are
 * the one pair that call each other (a connection and the stream that
 * answers on it).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_API_H
#define BERTH_API_H

#include "control.h"
#include "conf.h"
#include "control_rule.h"
#include "helper.h"
#include "reqhead.h"
#include "status.h"
#include "routemsg.h"
#include "store.h"
#include "sbfield.h"
#include "token.h"
#include "valid.h"
#include "agent_proto.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <http_parser.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <strings.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CTL_MAX_UNIX		256	/* connections on the unix socket (ops) */
#define CTL_MAX_TCP		PX_CONTROL_MAX_TCP	/* on the TCP listener, all clients */
#define CTL_MAX_PER_ADDR	PX_CONTROL_MAX_PER_ADDR	/* on the TCP listener, per address */
#define CTL_HANDSHAKE_SECS	PX_CONTROL_HANDSHAKE_SECS	/* TCP: accept to TLS handshake done */
#define CTL_AUTH_SECS		5	/* TCP: then to an authenticated request */
/* TCP slots kept for admin tokens: sandbox tokens' connections hold at
 * most CTL_MAX_TCP - CTL_ADMIN_RESERVE, so ops still get in */
#define CTL_ADMIN_RESERVE	16
/* streamed requests (exec, files, attach) one sandbox token holds at
 * once over TCP: more are 429 */
#define CTL_STREAMS_PER_TOKEN	32
#define CTL_IDLE_SECS		PX_CONTROL_IDLE_SECS
#define CTL_MAX_SEGS		7
#define CTL_PAGE_DEFAULT	100
#define CTL_PAGE_MAX		1000
#define CTL_OUT_HIGH		(256 * 1024)	/* stop reading above this */

/* a connection's idle timeout (conn.c) */
extern const struct timeval api_idle;

struct conn;

struct px_control {
	struct event_base *base;
	struct px_store *store;
	struct px_control_hooks hooks;
	uint64_t serial;	/* of the last connection accepted */
	char *domain;
	char *template_dir;	/* the default template's, or NULL */
	char *sock_path;
	dev_t sock_dev;
	ino_t sock_ino;
	struct evconnlistener *listener;
	struct evconnlistener *tcp_listener;	/* optional, bearer tokens */
	SSL_CTX *ssl_ctx;			/* for it; NULL: plain TCP */
	struct event *accept_retry;
	TAILQ_HEAD(, conn) conns;
	int nconns;
	int nconns_tcp;				/* of nconns, TCP ones */
	unsigned long long responses[6];	/* by status class, [2]=2xx */
	unsigned long long accept_errors;
	/* TCP connections refused at accept or closed unauthenticated */
	unsigned long long refused_budget, refused_addr, closed_deadline;
};

struct cstream;

struct exec_pending;
struct conn {
	TAILQ_ENTRY(conn) entry;
	struct px_control *ctl;
	struct bufferevent *bev;
	struct px_reqhead rh;	/* the request being read (reqhead.h) */
	int closing;		/* free once the output is flushed */
	int throttled;		/* reading paused: output above CTL_OUT_HIGH */
	int waiting;		/* a lifecycle operation answers later */
	int early_served;	/* a streamed request (rh.streamed): served
				 * from its head */
	int close_after;	/* a streamed request said Connection: close */
	int busy;		/* the parser runs: its callbacks may end
				 * the connection, conn_read frees it after */
	int dead;		/* ended while busy: freed once it returns */
	struct cstream *st;	/* its stream, while it answers */
	struct exec_pending *pexec;	/* its buffered exec, while it runs */
	uint64_t serial;	/* tells a reused struct from this one */
	int tcp;		/* came through the TCP listener: needs a token */
	int authed;		/* TCP: a request of it carried a valid token */
	int by_sandbox;		/* TCP: ... a sandbox token (not admin's) */
	struct event *deadline;	/* TCP: handshake, then authentication */
	char addr[INET6_ADDRSTRLEN];	/* TCP: the client's address */
	/* fed.c: requests the control helper parsed, queued */
	struct evbuffer *fedq;		/* NULL: this process reads them */
	px_control_taken_fn *fed_taken;
	uint64_t fed_tag;
	int fed_gone;
	int fed_eof;			/* its client half closed */
	char fleet_peer[40];		/* fed: the fleet host that forwarded */
};

/* One request being served. */
struct req {
	struct conn *c;
	enum http_method method;
	const char *body;
	size_t bodylen;
	char path[2048];	/* shown in messages */
	char segbuf[2048];	/* path split in place */
	char *seg[CTL_MAX_SEGS];
	int nseg;
	char query[8192];	/* raw query string, "" if none: as long as
				 * a request line may be (http1.h) */
	struct px_auth auth;
	const char *id;		/* the path's {id}, {token} or {template} */
	uint16_t port;		/* its {port} */
};

#define PAGE_FULL	2	/* list callback: the page is complete */

struct page {
	int limit;
	int have_after;
	char after[300];
	int count;
	int more;		/* a row beyond this page exists */
	char next[300];		/* cursor of the page's last row */
};

struct list_ctx {
	struct px_control *ctl;
	json_t *array;
	struct page *pg;
	const char *one_sandbox;	/* ports of one sandbox: cursor = port */
};

/* A lifecycle operation whose answer waits for the VMM. */
struct pending {
	struct px_control *ctl;
	struct conn *c;
	uint64_t serial;
	enum http_method method;
	int64_t t0;
	char id[PX_SANDBOX_ID_MAX + 1];
	char op[16];
	char name[PX_SANDBOX_ID_MAX + 1];	/* a checkpoint's */
};

#define EXEC_TIMEOUT_DEFAULT	(10 * 60 * 1000)

#define EXEC_TIMEOUT_MAX	(24 * 3600 * 1000)

struct exec_pending {
	struct px_control *ctl;
	struct conn *c;
	uint64_t serial;
	enum http_method method;
};

/* The checked parts of an exec request, and what holds them. */
struct exec_parsed {
	struct px_exec_req er;
	char **argv, **env;
	unsigned char *in;
};

#define CS_PATH_MAX	4096

/* CS_TPL: a template build's source (POST /v1/templates/{name}/build
 * ?from=...), spooled by berthd (hooks.template_spool*) */
enum cs_kind { CS_EXEC, CS_PUT, CS_GET, CS_WATCH, CS_ATTACH, CS_TPL,
	CS_MOVE };

struct cstream {
	struct conn *c;
	struct px_exec_stream *h;	/* NULL: not started, or ended */
	enum cs_kind kind;
	enum http_method method;
	char token_id[24];		/* its sandbox token's, "" for admin */
	char id[PX_SANDBOX_ID_MAX + 1];
	char path[CS_PATH_MAX + 1];
	unsigned mode;
	uint32_t proc;			/* attach: the process */
	char by_token[24];		/* the token that asked, admin's too
					 * (exec_max_per_token); "" socket */
	int head_sent, in_paused, out_paused, body_done, eof_sent;
	struct evbuffer *fbuf;		/* exec: a client frame not whole yet */
	void *tpl;			/* CS_TPL: the spool (id: the name);
					 * CS_MOVE: a moved file's */
	uint64_t bytes;
	int64_t wake_ms;
};

/* What a request to the guest agent answers (agent_call, proc_done). */
enum proc_kind { PK_LIST, PK_SHOW, PK_LOGS, PK_KILL, PK_WAIT,
	PK_FLIST, PK_MKDIR, PK_REMOVE, PK_MOVE };

/* table.c: the routes */
enum {				/* methods, as bits */
	API_GET = 1, API_HEAD = 2, API_PATCH = 4, API_PUT = 8, API_POST = 16,
	API_DELETE = 32
};
#define API_READ	(API_GET | API_HEAD)

enum api_scope {		/* who may call a route */
	API_SCOPE_UNSET = 0,	/* nobody said: refused by api_table_check */
	API_ADMIN,		/* admin tokens and the unix socket */
	API_OWN,		/* and a token of the sandbox {id} */
	API_OWN_TOKEN,		/* and the token {token} itself */
	API_ANY,		/* any valid token */
	API_FLEET		/* a fleet peer only (fleet_api_listen, its
				 * certificate naming a host with a live
				 * lease): never a token */
};

enum api_body {			/* what a request to it carries */
	API_BODY_NONE,		/* nothing the handler reads */
	API_BODY_JSON,		/* a JSON object (at most 64 KB) */
	API_BODY_STREAM		/* bytes or frames, read as they come */
};

struct api_route {
	unsigned methods;	/* API_GET | ... */
	const char *pattern;	/* "/v1/sandboxes/{id}/ports/{port}" */
	void (*fn)(struct req *);
	enum api_scope scope;
	enum api_body body;
	const char *stream_query;	/* API_BODY_STREAM only when the
					 * query has this ("stream=1") */
	const char *why;	/* a sandbox token's 403, when the generic
				 * one is not the whole truth */
	const char *summary;	/* what it does, for its OpenAPI operation */
};

extern const struct api_route api_routes[];
void api_openapi(struct req *);	/* openapi.c */
extern const size_t api_nroutes;

unsigned api_method_bit(unsigned http_method);
void api_allow_text(unsigned bits, char *buf, size_t size);
const struct api_route *api_route_find(unsigned http_method, char *const *seg,
    int nseg, unsigned *allowed);
int api_scope_check(const struct api_route *, const struct px_auth *,
    char *const *seg, int nseg, char *why, size_t whylen);
int api_table_check(const struct api_route *, size_t n, char *err,
    size_t errlen);
void api_route(struct req *r);

/* reply.c */
int64_t api_now_ms(void);
int api_is_get(const struct req *r);
const char *api_shown(char *buf, size_t size, const char *s);
void api_respond(struct conn *c, int status, const char *ctype, const char *extra,
    const void *body, size_t len, int head_only);
void api_reply_json_hdr(struct req *r, int status, json_t *obj, const char *extra);
void api_reply_json(struct req *r, int status, json_t *obj);
void __attribute__((format(printf, 5, 6)))
api_reply_error(struct req *r, int status, const char *allow, const char *field,
    const char *fmt, ...);
void __attribute__((format(printf, 4, 5)))
api_reply_error_hdr(struct req *r, int status, const char *extra,
    const char *fmt, ...);
void __attribute__((format(printf, 2, 3)))
api_reply_capacity(struct req *r, const char *fmt, ...);
void __attribute__((format(printf, 4, 5)))
api_reply_error_code(struct req *r, int status, const char *code,
    const char *fmt, ...);
void api_reply_empty(struct req *r, int status);
void api_reply_store(struct req *r, int rc, const char *field, const char *err);
void api_span_text(uint64_t ms, char *buf, size_t len);
json_t *api_sandbox_json(const struct px_control *ctl, const struct px_sandbox *sb);
json_t *api_port_json(struct px_control *ctl, const struct px_port *p);
int api_page_row(struct page *pg, const char *cursor, int beyond);
json_t *api_page_doc(const char *key, json_t *array, const struct page *pg);
int api_add_sandbox(const struct px_sandbox *sb, void *arg);
int api_add_port(const struct px_port *p, void *arg);
json_t *api_body_object(struct req *r, const char *const *allowed, int empty_ok);
int api_string_field(struct req *r, json_t *obj, const char *name, int null_ok,
    const char **out);
int api_check_sandbox_id(struct req *r, const char *field, long item,
    const char *id);
int api_check_checkpoint_name(struct req *r, const char *field, const char *name);
void api_routes_changed(struct px_control *ctl);
void api_move_finished(struct px_control *ctl, const char *id,
    const char *to, int64_t ms);
void api_drain_free(void);
/* c, if it is still one of ctl's connections and the same one (serial):
 * a client may go while its answer waits. */
struct conn *api_conn_find(struct px_control *ctl, struct conn *c,
    uint64_t serial);
struct conn *api_pending_req(struct pending *p, struct req *r);
void api_record_event(struct px_control *ctl, const char *id, const char *op,
    const char *result, const char *why, int64_t duration_ms);
int api_json_set_bytes(json_t *o, const char *key, const void *p, size_t len);

/* request.c */
int api_page_parse(struct req *r, struct page *pg);
int api_query_get(const struct req *r, const char *name, char *buf, size_t size);
int api_query_nth(const struct req *r, const char *name, unsigned nth,
    char *buf, size_t size);
int api_parse_target(struct req *r, const char *url, size_t len);
int api_authenticate(struct req *r);

/* conn.c */
/* a connection on fd, accepted (tcp: through the TCP listener, from sa
 * or the helper's peer); the fuzzer's way in too */
struct conn *api_accept_conn(struct px_control *, evutil_socket_t, int tcp,
    const struct sockaddr *sa, const char *peer);
void api_conn_free(struct conn *c);
/* reads and serves what the client sent, as far as it may now (a fed
 * connection: what was queued, fed.c) */
void api_conn_read(struct bufferevent *bev, void *arg);
/* the request in c->rh (a streamed one: from its head) served */
void api_conn_serve(struct conn *c);
void api_conn_serve_early(struct conn *c);
/* a streamed request's body bytes, its end */
int api_conn_stream_body(void *arg, const char *at, size_t len);
void api_conn_stream_end(void *arg);
/* a request refused (status, msg), then the connection closes; the
 * client closed its side. Both may free c. */
void api_conn_broken(struct conn *c, int status, const char *msg);
void api_conn_eof(struct conn *c);

/* fed.c */
void api_fed_run(struct conn *c);

/* health.c */
void api_health(struct req *r);
void api_metrics(struct req *r);
void api_fleet(struct req *r);
void api_fleet_drain(struct req *r);

/* sandboxes.c */
void api_sandbox_list(struct req *r);
void api_sandbox_create(struct req *r);
void api_sandbox_set(struct req *r);
void api_sandbox_show(struct req *r);
void api_sandbox_delete(struct req *r);

/* ports.c */
void api_port_list(struct req *r);
void api_port_show(struct req *r);
void api_port_put(struct req *r);
void api_port_delete(struct req *r);

/* lifecycle.c */
void api_conn_resume(struct conn *c);
json_t *api_checkpoint_json(const char *id, const struct px_checkpoint *k);
void api_lifecycle_done(void *arg, int ok, const char *reason);
struct pending *api_pending_new(struct req *r, const char *id, const char *op);
void api_pending_drop(struct req *r, struct pending *p);
void api_lifecycle(struct req *r);
void api_events(struct req *r);
void api_console(struct req *r);

/* snapshots.c */
void api_sandbox_fork(struct req *r);
void api_sandbox_move(struct req *r);	/* move.c */
void api_fleet_move(struct req *r);
void api_checkpoint_list(struct req *r);
void api_checkpoint_op(struct req *r);
void api_checkpoint_rm(struct req *r);

/* commands.c */
int api_exec_stream(json_t *doc, const char *key, const unsigned char *p, size_t len);
void api_exec(struct req *r);

/* exec_req.c */
void api_exec_parsed_free(struct exec_parsed *ep);
/* env_sb: the sandbox's env (JSON text, "" none), under the request's */
int api_exec_parse(struct req *r, json_t *obj, int streamed,
    const char *env_sb, struct exec_parsed *ep);
int api_env_name_ok(const char *s);

/* streams.c */
void api_cs_free(struct cstream *cs);
int api_cs_run(struct cstream *cs, struct req *r, const struct px_exec_req *er);
struct cstream *api_cs_new(struct req *r, const char *id, enum cs_kind kind);
void api_cs_attach(struct cstream *cs);
void api_cs_exec_begin(struct req *r, const char *id);
void api_cs_body(struct cstream *cs, const char *at, size_t len);
void api_cs_eof(struct cstream *cs);

/* files.c */
void api_files_post(struct req *r);
void api_watch(struct req *r);
void api_files(struct req *r);

/* processes.c */
void api_agent_call(struct req *r, const char *id, struct px_exec_req *er,
    int kind, uint32_t proc);
void api_procs(struct req *r);

/* policy.c */
json_t *api_policy_load(struct req *r);
int api_rule_arg(struct req *r, const char *field, const char *text,
    struct nc_rule *rule, char *canon, size_t size);
int api_policy_permits(struct req *r, json_t *pol, const char *field,
    const struct nc_rule *rule, const char *canon);
int api_mode_permitted(struct req *r, json_t *pol, const char *field,
    const char *mode);
void api_policy_get(struct req *r);
void api_policy_put(struct req *r);
int api_rules_permitted(struct req *r, json_t *pol, const char *id,
    const struct px_egress_rule *e, size_t n, const char *field);

/* egress_rules.c */
void api_egress_get(struct req *r);
void api_egress_changed(struct px_control *ctl, const char *id);
void api_egress_add(struct req *r);
void api_egress_put(struct req *r);
void api_egress_reset(struct req *r);
void api_egress_rm(struct req *r);
void api_egress_log(struct req *r);

/* tokens.c */
int api_check_token_id(struct req *r, const char *id);
void api_token_list(struct req *r);
void api_token_create(struct req *r);
void api_token_show(struct req *r);
void api_token_rotate(struct req *r);
void api_token_rm(struct req *r);

/* templates.c */
int api_check_template_name(struct req *r, const char *name);
void api_template_list(struct req *r);
void api_template_add(struct req *r);
void api_template_show(struct req *r);
void api_template_rm(struct req *r);
void api_template_build(struct req *r);

#endif
