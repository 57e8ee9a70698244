/*
 * store.h — berth's durable state: sandboxes and their published ports.
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
 * PX_STORE_* codes). Callbacks must not modify the store. Row pointers are
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

struct px_sandbox {
	char id[41];		/* [a-z0-9][a-z0-9-]{0,39} */
	char address[46];	/* guest IP literal; "" if not known yet */
	int external;		/* 1: managed outside berth (no VM) */
	char state[16];		/* one of PX_STATE_* */
	int64_t created;	/* unix seconds; 0 on add means "now" */
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
	PX_STORE_ERR = -1,	/* I/O, corruption, busy, bad argument */
	PX_STORE_NOTFOUND = -2,	/* no such sandbox or port */
	PX_STORE_EXISTS = -3,	/* sandbox id already taken */
	PX_STORE_CONFLICT = -4	/* custom host used by another port */
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

/* Text names used by the API and the database. */
const char *px_host_header_name(enum px_host_header);
int px_host_header_parse(const char *, enum px_host_header *);	/* 0 / -1 */
const char *px_visibility_name(enum px_visibility);
int px_visibility_parse(const char *, enum px_visibility *);	/* 0 / -1 */
int px_state_valid(const char *);				/* 1 / 0 */

#endif
