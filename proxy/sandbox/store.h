/*
 * store.h — berth's durable state: sandboxes, their published ports,
 * egress rules, access tokens (hashed) and lifecycle events, and ops'
 * global policy.
 * The only implementation today is SQLite (<state_dir>/berth.db, WAL);
 * callers see only this interface so a fleet backend (etcd) can take its
 * place later. Every mutation is one transaction: a crash leaves the old
 * or the new state, never a mix.
 *
 * Conventions: functions return PX_STORE_OK (0) or a negative PX_STORE_*
 * code and, on failure, write a one-line reason into err[errlen] (never
 * printed, never fatal). List functions call cb once per row, in a stable
 * order; cb returns 0 to go on, anything else stops the walk and becomes
 * the return value (use positive values so they cannot be mistaken for
 * PX_STORE_* codes). Callbacks must not call into the store. Rows are
 * valid only during the callback. A px_store is not thread-safe: use it
 * from one thread (berthd's parent event loop).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_STORE_H
#define BERTH_STORE_H

#include <stddef.h>
#include <stdint.h>

struct px_store;

/* Sandbox states (DESIGN.md "Words"). */
#define PX_STATE_CREATING	"creating"
#define PX_STATE_RUNNING	"running"
#define PX_STATE_PAUSED		"paused"
#define PX_STATE_SUSPENDED	"suspended"
#define PX_STATE_STOPPED	"stopped"
#define PX_STATE_FAILED		"failed"

#define PX_TEMPLATE_NAME_MAX	32	/* [a-z0-9][a-z0-9-]{0,31} */
#define PX_TEMPLATE_DEFAULT	"default"	/* built in, never stored */
#define PX_IDLE_NEVER		(-1)	/* an idle limit that never fires */
#define PX_SANDBOX_ENV_MAX	2048	/* a sandbox's env, as JSON text */

struct px_sandbox {
	char id[41];		/* [a-z0-9][a-z0-9-]{0,39} */
	char address[46];	/* guest IP literal; "" if not known yet */
	int external;		/* 1: managed outside berth (no VM) */
	char state[16];		/* one of PX_STATE_* */
	int64_t created;	/* unix seconds; 0 on add means "now" */
	char egress_mode[16];	/* "open", "allowlist", "closed"; "" follows
				 * the global policy's mode */
	/* VM-backed sandboxes: what it was created with (0 / "": not
	 * known, as for sandboxes made before berth recorded it) */
	unsigned mem_mib, vcpus, disk_mib;
	char template_name[PX_TEMPLATE_NAME_MAX + 1];	/* "": default */
	/* idle policy, ms: 0 follows berth.conf, PX_IDLE_NEVER never */
	int64_t idle_pause_ms, idle_suspend_ms, max_lifetime_ms;
	/* environment every command starts with: a JSON object's text,
	 * "" for none */
	char env[PX_SANDBOX_ENV_MAX + 1];
};

enum px_host_header {
	PX_HOST_PRESERVE,	/* forward the client's Host */
	PX_HOST_UPSTREAM	/* rewrite Host to localhost:<port> */
};

enum px_visibility {
	PX_VIS_PUBLIC,
	PX_VIS_PRIVATE		/* needs the sandbox's token */
};

struct px_port {
	char sandbox[41];
	uint16_t port;		/* guest port, 1-65535 */
	enum px_host_header host_header;
	enum px_visibility visibility;
	char custom_host[254];	/* extra host name routed here; "" if none */
	int64_t created;	/* unix seconds; 0 on set means "now" */
};

/* Joined row for the route table: a published port with its sandbox. */
struct px_route_row {
	const struct px_sandbox *sb;
	const struct px_port *port;
};

enum {
	PX_STORE_OK = 0,
	PX_STORE_ERR = -1,	/* I/O, corruption, bad argument */
	PX_STORE_NOTFOUND = -2,	/* no such sandbox or port */
	PX_STORE_EXISTS = -3,	/* sandbox id already taken */
	PX_STORE_CONFLICT = -4,	/* custom host used by another port */
	PX_STORE_BUSY = -5,	/* another process held the write lock past
				 * the busy timeout: nothing changed, retry */
	PX_STORE_FULL = -6	/* no space left: nothing changed, retry once
				 * space is freed */
};

/* Latest schema version this build knows (PRAGMA user_version). */
int px_store_schema_version(void);

/*
 * Opens (creating if needed) <state_dir>/berth.db and migrates its schema.
 * state_dir is created with mode 0700 if missing (its parent must exist).
 * Refuses a database whose schema is newer than this build. NULL on error.
 */
struct px_store *px_store_open(const char *state_dir, char *err, size_t errlen);
void px_store_close(struct px_store *);

/* EXISTS if the id is taken. Validates id, address, state. */
int px_store_sandbox_add(struct px_store *, const struct px_sandbox *,
    char *err, size_t errlen);
int px_store_sandbox_get(struct px_store *, const char *id,
    struct px_sandbox *out, char *err, size_t errlen);
/* Removes the sandbox and, in the same transaction, its ports. */
int px_store_sandbox_rm(struct px_store *, const char *id,
    char *err, size_t errlen);
/* By id. */
int px_store_sandbox_list(struct px_store *,
    int (*cb)(const struct px_sandbox *, void *), void *arg,
    char *err, size_t errlen);

/*
 * Inserts or updates the port (sandbox, port): all of host_header,
 * visibility and custom_host are replaced; created is kept on update.
 * *created (if not NULL) is set to 1 for an insert, 0 for an update.
 * NOTFOUND if the sandbox does not exist; CONFLICT if custom_host is used
 * by another port.
 */
int px_store_port_set(struct px_store *, const struct px_port *, int *created,
    char *err, size_t errlen);
int px_store_port_get(struct px_store *, const char *sandbox, uint16_t port,
    struct px_port *out, char *err, size_t errlen);
/* NOTFOUND if that port is not published (or the sandbox is unknown). */
int px_store_port_rm(struct px_store *, const char *sandbox, uint16_t port,
    char *err, size_t errlen);
/* By sandbox, then port. sandbox NULL lists all; an unknown sandbox is
 * NOTFOUND (an empty list means it has no ports). */
int px_store_port_list(struct px_store *, const char *sandbox,
    int (*cb)(const struct px_port *, void *), void *arg,
    char *err, size_t errlen);

/* Every published port joined with its sandbox, read as one snapshot. */
int px_store_routes(struct px_store *,
    int (*cb)(const struct px_route_row *, void *), void *arg,
    char *err, size_t errlen);

/* The idle limits (sbfield.h's arg of each PF_IDLE row). */
#define PX_IDLE_PAUSE		0x1
#define PX_IDLE_SUSPEND		0x2
#define PX_IDLE_LIFETIME	0x4
/*
 * Sets the fields of sandbox id that which names (bit i: row i of
 * px_sbfields, each PF_PATCH) to their values in v, and keeps the others.
 * *out (may be NULL) gets the sandbox as stored afterwards. NOTFOUND for
 * an unknown id.
 */
int px_store_sandbox_set(struct px_store *, const char *id,
    const struct px_sandbox *v, unsigned long which, struct px_sandbox *out,
    char *err, size_t errlen);

/* Sets the state of a sandbox (the VMM's transitions). */
int px_store_sandbox_set_state(struct px_store *, const char *id,
    const char *state, char *err, size_t errlen);
/* Sets state and, unless address is NULL, the address (the VMM's view
 * of a VM-backed sandbox). */
int px_store_sandbox_set_vm(struct px_store *, const char *id,
    const char *state, const char *address, char *err, size_t errlen);

/* ---- tokens ----
 * A token is "berth_<base64url of 32 random bytes>", shown once; the
 * store keeps only the hex SHA-256 of the whole string. sandbox "" is an
 * admin token. A sandbox's tokens go with it. */
#define PX_TOKEN_ID_MAX		23	/* "tok-" + 16 hex */
struct px_token {
	char id[PX_TOKEN_ID_MAX + 1];	/* public handle: rotate, revoke */
	char sha256[65];		/* lower-case hex */
	char sandbox[41];		/* "" for admin tokens */
	char name[64];			/* free text label, may be "" */
	int64_t created;		/* unix seconds; 0 on add: now */
};

/* EXISTS if the id or the hash is taken; NOTFOUND if the sandbox is. */
int px_store_token_add(struct px_store *, const struct px_token *,
    char *err, size_t errlen);
int px_store_token_get(struct px_store *, const char *id,
    struct px_token *out, char *err, size_t errlen);
/* Replaces the hash (the old secret stops working in the same commit). */
int px_store_token_rotate(struct px_store *, const char *id,
    const char *new_sha256, char *err, size_t errlen);
int px_store_token_rm(struct px_store *, const char *id,
    char *err, size_t errlen);
/* By id. sandbox NULL: all; "": admin tokens only; else that sandbox's. */
int px_store_token_list(struct px_store *, const char *sandbox,
    int (*cb)(const struct px_token *, void *), void *arg,
    char *err, size_t errlen);

/*
 * Adds the sandbox, its token (tok may be NULL; its sandbox field is
 * overwritten) and a "create" event in one transaction. A template the
 * sandbox names must exist (NOTFOUND, err says so).
 */
int px_store_sandbox_create(struct px_store *, const struct px_sandbox *,
    const struct px_token *tok, char *err, size_t errlen);

/* ---- lifecycle events ---- */
struct px_event {
	int64_t seq;		/* assigned by the store, increasing */
	char sandbox[41];
	int64_t time_ms;	/* unix milliseconds; 0 on add: now */
	char operation[16];	/* create, pause, suspend, resume, wake, ... */
	char result[16];	/* ok, failed, refused */
	char reason[256];	/* "" if none */
	int64_t duration_ms;	/* -1: not measured */
};

/* NOTFOUND if the sandbox does not exist. *seq (may be NULL) is set. */
int px_store_event_add(struct px_store *, const struct px_event *,
    int64_t *seq, char *err, size_t errlen);
/* Events with seq > after, oldest first, at most limit (0: no limit).
 * NOTFOUND if the sandbox does not exist. */
int px_store_event_list(struct px_store *, const char *sandbox, int64_t after,
    int limit, int (*cb)(const struct px_event *, void *), void *arg,
    char *err, size_t errlen);

/* ---- egress rules ----
 * Rule text is stored as given (callers store the canonical form of
 * netctl/nc_rule.c); the store checks only its size and characters. An
 * expired rule (expires != 0 and <= now) is not listed. */
enum px_egress_action {
	PX_EGRESS_ALLOW,
	PX_EGRESS_DENY
};

struct px_egress_rule {
	char sandbox[41];
	enum px_egress_action action;
	char rule[280];
	int64_t expires;	/* unix seconds; 0: never */
	int64_t created;	/* 0 on add: now */
};

/* Inserts, or updates the expiry of the same (sandbox, action, rule). */
int px_store_egress_add(struct px_store *, const struct px_egress_rule *,
    int *created, char *err, size_t errlen);
/* NOTFOUND if there is no such rule. */
int px_store_egress_rm(struct px_store *, const char *sandbox,
    enum px_egress_action, const char *rule, char *err, size_t errlen);
/* Replaces all rules of the sandbox and, when mode is not NULL, its
 * egress mode ("" = follow the policy), in one transaction. */
int px_store_egress_replace(struct px_store *, const char *sandbox,
    const char *mode, const struct px_egress_rule *rules, size_t n,
    char *err, size_t errlen);
/* Sets only the egress mode ("" = follow the policy). */
int px_store_egress_mode_set(struct px_store *, const char *sandbox,
    const char *mode, char *err, size_t errlen);
/* sandbox NULL: all, by sandbox; else NOTFOUND for an unknown sandbox.
 * By sandbox, action (allow first), rule. */
int px_store_egress_list(struct px_store *, const char *sandbox,
    int (*cb)(const struct px_egress_rule *, void *), void *arg,
    char *err, size_t errlen);
const char *px_egress_action_name(enum px_egress_action);
int px_egress_action_parse(const char *, enum px_egress_action *);

/* ---- templates: names for guest template directories ----
 * "default" is built in (berth.conf's template) and never stored. A
 * sandbox names its template; a template some sandbox names cannot be
 * removed. The directory is checked by the caller (it must load). */
struct px_template {
	char name[PX_TEMPLATE_NAME_MAX + 1];
	char dir[1024];		/* absolute path */
	int64_t created;	/* unix seconds; 0 on add: now */
};

/* 1 if name is a valid template name (the sandbox id alphabet, at most
 * PX_TEMPLATE_NAME_MAX bytes). */
int px_template_name_valid(const char *name);
/* EXISTS if the name is taken (or is "default"). */
int px_store_template_add(struct px_store *, const struct px_template *,
    char *err, size_t errlen);
int px_store_template_get(struct px_store *, const char *name,
    struct px_template *out, char *err, size_t errlen);
/* NOTFOUND; CONFLICT while a sandbox uses it (err names one). */
int px_store_template_rm(struct px_store *, const char *name,
    char *err, size_t errlen);
/* By name. */
int px_store_template_list(struct px_store *,
    int (*cb)(const struct px_template *, void *), void *arg,
    char *err, size_t errlen);
/* How many sandboxes use the template (name "default" counts those that
 * name none too). */
int px_store_template_users(struct px_store *, const char *name, int *n,
    char *err, size_t errlen);

/* ---- global policy: one JSON document, validated by the caller ---- */
/* *out is malloc'd text, NULL when no policy was ever set. */
int px_store_policy_get(struct px_store *, char **out, char *err,
    size_t errlen);
int px_store_policy_set(struct px_store *, const char *json_text,
    char *err, size_t errlen);

/* Text names used by the API and the database. */
const char *px_host_header_name(enum px_host_header);
int px_host_header_parse(const char *, enum px_host_header *);	/* 0 / -1 */
const char *px_visibility_name(enum px_visibility);
int px_visibility_parse(const char *, enum px_visibility *);	/* 0 / -1 */
int px_state_valid(const char *);				/* 1 / 0 */

#endif
