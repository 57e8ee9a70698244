/*
 * store.c — the SQLite implementation of store.h. One connection per
 * px_store, WAL journal, foreign keys on, a busy timeout so a second
 * reader (a backup, sqlite3 on the command line) does not fail writes.
 * The schema is a list of migrations; PRAGMA user_version counts how many
 * have run, each in its own transaction together with its version bump.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "store.h"
#include "sbfield.h"
#include "valid.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_FILE		"berth.db"
/* How long a write waits for another process's lock. The parent's event
 * loop waits with it (workers keep serving), so keep it short: past it the
 * API answers 503 and the client retries. */
#define STORE_BUSY_MS		2000

struct px_store {
	sqlite3 *db;
};

/*
 * Append only: a released build's migration never changes, a new one is
 * added at the end. CHECKs mirror what the code validates so a hand-edited
 * database cannot feed garbage to the route table.
 */
static const char *const migrations[] = {
	/* 1: sandboxes and published ports */
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY NOT NULL,"
	"  address TEXT,"
	"  external INTEGER NOT NULL DEFAULT 0 CHECK (external IN (0, 1)),"
	"  state TEXT NOT NULL,"
	"  created INTEGER NOT NULL"
	");"
	"CREATE TABLE ports ("
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
	"  host_header TEXT NOT NULL DEFAULT 'preserve'"
	"    CHECK (host_header IN ('preserve', 'upstream')),"
	"  visibility TEXT NOT NULL DEFAULT 'public'"
	"    CHECK (visibility IN ('public', 'private')),"
	"  custom_host TEXT UNIQUE,"
	"  created INTEGER NOT NULL,"
	"  PRIMARY KEY (sandbox, port)"
	");",
	/* 2: egress mode and rules, tokens, lifecycle events, global policy */
	"ALTER TABLE sandboxes ADD COLUMN egress_mode TEXT"
	"  CHECK (egress_mode IN ('open', 'allowlist', 'closed'));"
	"CREATE TABLE tokens ("
	"  id TEXT PRIMARY KEY NOT NULL,"
	"  sha256 TEXT NOT NULL UNIQUE CHECK (length(sha256) = 64),"
	"  sandbox TEXT REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  name TEXT NOT NULL DEFAULT '',"
	"  created INTEGER NOT NULL"
	");"
	"CREATE INDEX tokens_sandbox ON tokens (sandbox);"
	"CREATE TABLE events ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  time_ms INTEGER NOT NULL,"
	"  operation TEXT NOT NULL,"
	"  result TEXT NOT NULL,"
	"  reason TEXT NOT NULL DEFAULT '',"
	"  duration_ms INTEGER NOT NULL DEFAULT -1"
	");"
	"CREATE INDEX events_sandbox ON events (sandbox, seq);"
	"CREATE TABLE egress_rules ("
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  action TEXT NOT NULL CHECK (action IN ('allow', 'deny')),"
	"  rule TEXT NOT NULL CHECK (length(rule) BETWEEN 1 AND 279),"
	"  expires INTEGER NOT NULL DEFAULT 0,"
	"  created INTEGER NOT NULL,"
	"  PRIMARY KEY (sandbox, action, rule)"
	");"
	"CREATE TABLE policy ("
	"  id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  doc TEXT NOT NULL,"
	"  updated INTEGER NOT NULL"
	");",
	/* 3: per-sandbox resources, template and idle limits (NULL: not
	 * recorded / the default; idle -1: never); named templates */
	"ALTER TABLE sandboxes ADD COLUMN mem_mib INTEGER CHECK (mem_mib > 0);"
	"ALTER TABLE sandboxes ADD COLUMN vcpus INTEGER CHECK (vcpus > 0);"
	"ALTER TABLE sandboxes ADD COLUMN disk_mib INTEGER CHECK (disk_mib > 0);"
	"ALTER TABLE sandboxes ADD COLUMN template TEXT"
	"  CHECK (length(template) BETWEEN 1 AND 32);"
	"ALTER TABLE sandboxes ADD COLUMN idle_pause_ms INTEGER"
	"  CHECK (idle_pause_ms = -1 OR idle_pause_ms > 0);"
	"ALTER TABLE sandboxes ADD COLUMN idle_suspend_ms INTEGER"
	"  CHECK (idle_suspend_ms = -1 OR idle_suspend_ms > 0);"
	"ALTER TABLE sandboxes ADD COLUMN max_lifetime_ms INTEGER"
	"  CHECK (max_lifetime_ms = -1 OR max_lifetime_ms > 0);"
	"CREATE INDEX sandboxes_template ON sandboxes (template);"
	"CREATE TABLE templates ("
	"  name TEXT PRIMARY KEY NOT NULL"
	"    CHECK (length(name) BETWEEN 1 AND 32 AND name != 'default'),"
	"  dir TEXT NOT NULL CHECK (substr(dir, 1, 1) = '/'),"
	"  created INTEGER NOT NULL"
	");",
	/* 4: a sandbox's env, every command's defaults (a JSON object) */
	"ALTER TABLE sandboxes ADD COLUMN env TEXT"
	"  CHECK (length(env) BETWEEN 2 AND 2048);",
};

#define NMIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

static void __attribute__((format(printf, 3, 0)))
vseterr(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err != NULL && errlen != 0)
		vsnprintf(err, errlen, fmt, ap);
}

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vseterr(err, errlen, fmt, ap);
	va_end(ap);
}

/*
 * The PX_STORE_* code for the connection's last failure: the two a caller
 * can wait out (another process holds the write lock past the busy
 * timeout; the file system is full) are told apart from the rest.
 */
static int
store_code(struct px_store *st)
{
	switch (sqlite3_errcode(st->db)) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return PX_STORE_BUSY;
	case SQLITE_FULL:
		return PX_STORE_FULL;
	default:
		return PX_STORE_ERR;
	}
}

static const char *
code_hint(int code)
{
	switch (code) {
	case PX_STORE_BUSY:
		return " (another process holds the database's write lock)";
	case PX_STORE_FULL:
		return " (no space left for the state directory)";
	default:
		return "";
	}
}

static int
dberr(struct px_store *st, char *err, size_t errlen, const char *what)
{
	int code = store_code(st);

	seterr(err, errlen, "%s: %s%s", what, sqlite3_errmsg(st->db),
	    code_hint(code));
	return code;
}

int
px_store_schema_version(void)
{
	return NMIGRATIONS;
}

/* ---- the enums the store keeps as words: one table each ---- */

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

static const char *const host_headers[] = {
	[PX_HOST_PRESERVE] = "preserve", [PX_HOST_UPSTREAM] = "upstream"
};
static const char *const visibilities[] = {
	[PX_VIS_PUBLIC] = "public", [PX_VIS_PRIVATE] = "private"
};
static const char *const egress_actions[] = {
	[PX_EGRESS_ALLOW] = "allow", [PX_EGRESS_DENY] = "deny"
};
/* and two kept as words only: a sandbox's state and its egress mode */
static const char *const states[] = {
	PX_STATE_CREATING, PX_STATE_RUNNING, PX_STATE_PAUSED,
	PX_STATE_SUSPENDED, PX_STATE_STOPPED, PX_STATE_FAILED,
};
static const char *const egress_modes[] = { "open", "allowlist", "closed" };

/* Whether v is one of the enum whose words are the table words. */
#define WORD_OK(words, v)	((size_t)(v) < NELEM(words))

/* The index of s among names[0..n), or -1. */
static int
word_index(const char *const *names, size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

/* px_<fn>_name and px_<fn>_parse of enum <type>, from the table words */
#define WORD_ENUM(type, fn, words)					\
const char *								\
px_##fn##_name(enum type v)						\
{									\
	return WORD_OK(words, v) ? words[v] : words[0];			\
}									\
									\
int									\
px_##fn##_parse(const char *s, enum type *out)				\
{									\
	int i = word_index(words, NELEM(words), s);			\
									\
	if (i >= 0)							\
		*out = (enum type)i;					\
	return i < 0 ? -1 : 0;						\
}

WORD_ENUM(px_host_header, host_header, host_headers)
WORD_ENUM(px_visibility, visibility, visibilities)
WORD_ENUM(px_egress_action, egress_action, egress_actions)

int
px_state_valid(const char *s)
{
	return word_index(states, NELEM(states), s) >= 0;
}

static int
mode_valid(const char *m)
{
	return word_index(egress_modes, NELEM(egress_modes), m) >= 0;
}

/* A fixed-size string field is usable if it is NUL-terminated in place. */
static int
field_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

static int
check_id(const char *id, char *err, size_t errlen)
{
	if (id == NULL || !px_valid_sandbox_id(id, strnlen(id, 41)) ||
	    id[strnlen(id, 41)] != '\0') {
		seterr(err, errlen, "invalid sandbox id");
		return -1;
	}
	return 0;
}

/* Runs SQL without results; on error the message names what (or the SQL). */
static int
exec_what(struct px_store *st, const char *sql, const char *what,
    char *err, size_t errlen)
{
	char *msg = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int code = store_code(st);

		seterr(err, errlen, "%s: %s%s", what ? what : sql,
		    msg ? msg : sqlite3_errmsg(st->db), code_hint(code));
		sqlite3_free(msg);
		return code;
	}
	return 0;
}

static int
exec_sql(struct px_store *st, const char *sql, char *err, size_t errlen)
{
	return exec_what(st, sql, NULL, err, errlen);
}

static int
tx_begin(struct px_store *st, char *err, size_t errlen)
{
	/* IMMEDIATE takes the write lock now, so a read-then-write
	 * transaction cannot fail half way with SQLITE_BUSY. */
	return exec_sql(st, "BEGIN IMMEDIATE", err, errlen);
}

static int
tx_commit(struct px_store *st, char *err, size_t errlen)
{
	int rc;

	if ((rc = exec_sql(st, "COMMIT", err, errlen)) != 0) {
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return 0;
}

static void
tx_rollback(struct px_store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Ends the transaction as rc says: COMMIT after PX_STORE_OK, else
 * ROLLBACK and rc. */
static int
tx_end(struct px_store *st, int rc, char *err, size_t errlen)
{
	if (rc != PX_STORE_OK) {
		tx_rollback(st);
		return rc;
	}
	return tx_commit(st, err, errlen);
}

static sqlite3_stmt *
prepare(struct px_store *st, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *stmt = NULL;

	if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
		seterr(err, errlen, "prepare: %s", sqlite3_errmsg(st->db));
		return NULL;
	}
	return stmt;
}

/*
 * Prepares sql and binds its parameters, one letter each in types: 't' a
 * string (NULL: SQL NULL), 'i' an int, 'I' an int64_t. NULL when it could
 * not be prepared (err says why).
 */
static sqlite3_stmt *
query(struct px_store *st, char *err, size_t errlen, const char *sql,
    const char *types, va_list ap)
{
	sqlite3_stmt *stmt;
	const char *t;
	int i;

	if ((stmt = prepare(st, sql, err, errlen)) == NULL)
		return NULL;
	for (i = 1; types[i - 1] != '\0'; i++)
		switch (types[i - 1]) {
		case 't':
			if ((t = va_arg(ap, const char *)) != NULL)
				sqlite3_bind_text(stmt, i, t, -1, SQLITE_TRANSIENT);
			break;
		case 'i':
			sqlite3_bind_int(stmt, i, va_arg(ap, int));
			break;
		default:
			sqlite3_bind_int64(stmt, i, va_arg(ap, int64_t));
			break;
		}
	return stmt;
}

/*
 * Runs sql once with its parameters (as query()). The step's result
 * (SQLITE_DONE, SQLITE_ROW, a constraint code, ...), or -1 when it could
 * not be prepared (err says why).
 */
static int
run(struct px_store *st, char *err, size_t errlen, const char *sql,
    const char *types, ...)
{
	sqlite3_stmt *stmt;
	va_list ap;
	int rc;

	va_start(ap, types);
	stmt = query(st, err, errlen, sql, types, ap);
	va_end(ap);
	if (stmt == NULL)
		return -1;
	rc = sqlite3_step(stmt);
	sqlite3_finalize(stmt);
	return rc;
}

static int
each_rowv(struct px_store *st, int (*row)(sqlite3_stmt *, void *),
    void *arg, const char *what, char *err, size_t errlen, const char *sql,
    const char *types, va_list ap)
{
	sqlite3_stmt *stmt;
	int rc, ret = PX_STORE_OK;

	if ((stmt = query(st, err, errlen, sql, types, ap)) == NULL)
		return PX_STORE_ERR;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
		if ((ret = row(stmt, arg)) != 0)
			break;
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = dberr(st, err, errlen, what);
	sqlite3_finalize(stmt);
	return ret;
}

/*
 * Runs sql with its parameters (as query()) and hands each row to
 * row(stmt, arg) until one answers non-zero: that answer, PX_STORE_OK
 * after the last row, or a PX_STORE_* code with err ("<what>: ...").
 */
static int
each_row(struct px_store *st, int (*row)(sqlite3_stmt *, void *), void *arg,
    const char *what, char *err, size_t errlen, const char *sql,
    const char *types, ...)
{
	va_list ap;
	int rc;

	va_start(ap, types);
	rc = each_rowv(st, row, arg, what, err, errlen, sql, types, ap);
	va_end(ap);
	return rc;
}

/* get_row()'s reader and where it reads to. */
struct one {
	void (*read)(sqlite3_stmt *, void *);
	void *out;
};

static int
first_row(sqlite3_stmt *stmt, void *arg)
{
	const struct one *o = arg;

	if (o->out != NULL)
		o->read(stmt, o->out);
	return 1;
}

/*
 * The first row sql finds (parameters as query()), read by read() into
 * out (NULL: only whether there is one): 1, 0 when there is none, or a
 * PX_STORE_* code with err ("<what>: ...").
 */
static int
get_row(struct px_store *st, void (*read)(sqlite3_stmt *, void *), void *out,
    const char *what, char *err, size_t errlen, const char *sql,
    const char *types, ...)
{
	struct one o = { read, out };
	va_list ap;
	int rc;

	va_start(ap, types);
	rc = each_rowv(st, first_row, &o, what, err, errlen, sql, types, ap);
	va_end(ap);
	return rc;
}

/* run()'s result as a write: the rows changed (>= 0), or a PX_STORE_*
 * code with err ("<what>: ..."). */
static int
written(struct px_store *st, int rc, const char *what, char *err,
    size_t errlen)
{
	if (rc == -1)
		return PX_STORE_ERR;
	if (rc != SQLITE_DONE)
		return dberr(st, err, errlen, what);
	return sqlite3_changes(st->db);
}

/* run()'s result as a lookup: 1 found, 0 not, else a PX_STORE_* code. */
static int
found(struct px_store *st, int rc, const char *what, char *err,
    size_t errlen)
{
	if (rc == -1)
		return PX_STORE_ERR;
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return dberr(st, err, errlen, what);
}

/*
 * A count of rows read or changed that must not be 0: PX_STORE_OK,
 * NOTFOUND with err from fmt when it is 0, or n itself when it is a
 * failure (< 0).
 */
static int __attribute__((format(printf, 4, 5)))
need_row(int n, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (n < 0)
		return n;
	if (n > 0)
		return PX_STORE_OK;
	va_start(ap, fmt);
	vseterr(err, errlen, fmt, ap);
	va_end(ap);
	return PX_STORE_NOTFOUND;
}

/*
 * A step's result as an INSERT: PX_STORE_OK, EXISTS with err from fmt
 * when its key is taken, or a failure (err: "<what>: ...").
 */
static int __attribute__((format(printf, 6, 7)))
inserted(struct px_store *st, int rc, const char *what, char *err,
    size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE) {
		va_start(ap, fmt);
		vseterr(err, errlen, fmt, ap);
		va_end(ap);
		return PX_STORE_EXISTS;
	}
	return (rc = written(st, rc, what, err, errlen)) < 0 ? rc : PX_STORE_OK;
}

/*
 * The row sql finds for key, read by row() into out (NULL: only
 * whether there is one): OK, NOTFOUND (err: "no <what> '<key>'") or
 * a failure.
 */
static int
get_one(struct px_store *st, const char *sql, const char *key,
    void (*row)(sqlite3_stmt *, void *), void *out, const char *what,
    char *err, size_t errlen)
{
	char why[64];

	snprintf(why, sizeof(why), "reading %s", what);
	return need_row(get_row(st, row, out, why, err, errlen, sql, "t", key),
	    err, errlen, "no %s '%s'", what, key);
}

static void
row_int(sqlite3_stmt *stmt, void *out)
{
	*(int *)out = sqlite3_column_int(stmt, 0);
}

/* A list's caller: its callback (by the type of its rows) and argument. */
struct visit {
	union {
		int (*sandbox)(const struct px_sandbox *, void *);
		int (*port)(const struct px_port *, void *);
		int (*route)(const struct px_route_row *, void *);
		int (*token)(const struct px_token *, void *);
		int (*event)(const struct px_event *, void *);
		int (*egress)(const struct px_egress_rule *, void *);
		int (*tpl)(const struct px_template *, void *);
	} cb;
	void *arg;
};

/* visit_<name>: each_row()'s row for a list of struct <type>: read by
 * read(stmt, &item), handed to the caller's callback cb.<name>. */
#define VISIT(name, type, read)						\
static int								\
visit_##name(sqlite3_stmt *stmt, void *arg)				\
{									\
	const struct visit *v = arg;					\
	struct type item;						\
									\
	read(stmt, &item);						\
	return v->cb.name(&item, v->arg);				\
}

static int
user_version(struct px_store *st, int *out, char *err, size_t errlen)
{
	int rc = get_row(st, row_int, out, "reading schema version", err,
	    errlen, "PRAGMA user_version", "");

	return rc == 1 ? 0 : rc == 0 ? dberr(st, err, errlen,
	    "reading schema version") : rc;
}

static int
migrate(struct px_store *st, char *err, size_t errlen)
{
	char sql[64], what[64];
	int v = 0, rc;

	if (user_version(st, &v, err, errlen) != 0)
		return -1;
	if (v > NMIGRATIONS) {
		seterr(err, errlen, "database schema version %d is newer than "
		    "this berth knows (%d)", v, NMIGRATIONS);
		return -1;
	}
	for (; v < NMIGRATIONS; v++) {
		if (tx_begin(st, err, errlen) != 0)
			return -1;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		snprintf(what, sizeof(what), "schema migration %d", v + 1);
		if ((rc = exec_what(st, migrations[v], what, err, errlen)) == 0)
			rc = exec_sql(st, sql, err, errlen);
		if (tx_end(st, rc, err, errlen) != 0)
			return -1;
	}
	return 0;
}

struct px_store *
px_store_open(const char *state_dir, char *err, size_t errlen)
{
	struct px_store *st;
	char *path;
	size_t n;
	char *mode = NULL, sub[256] = "";
	sqlite3_stmt *stmt;
	int fd;

	if (state_dir == NULL || *state_dir == '\0') {
		seterr(err, errlen, "no state directory");
		return NULL;
	}
	if (mkdir(state_dir, 0700) == -1 && errno != EEXIST) {
		seterr(err, errlen, "mkdir %s: %s", state_dir, strerror(errno));
		return NULL;
	}
	n = strlen(state_dir) + sizeof("/" STORE_FILE);
	if ((path = malloc(n)) == NULL || (st = calloc(1, sizeof(*st))) == NULL) {
		free(path);
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(path, n, "%s/%s", state_dir, STORE_FILE);

	/* Create the file ourselves so it starts 0600 whatever the umask;
	 * SQLite gives the -wal and -shm files the database file's mode. */
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) == -1) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	close(fd);
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		seterr(err, errlen, "%s: %s", path,
		    st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, STORE_BUSY_MS);

	/* journal_mode answers with the mode now in force; a file system
	 * without shared memory support (some network mounts) says "delete". */
	if ((stmt = prepare(st, "PRAGMA journal_mode=WAL", err, errlen)) == NULL)
		goto fail;
	if (sqlite3_step(stmt) == SQLITE_ROW)
		mode = sqlite3_mprintf("%s", sqlite3_column_text(stmt, 0));
	sqlite3_finalize(stmt);
	if (mode == NULL || sqlite3_stricmp(mode, "wal") != 0) {
		seterr(err, errlen, "%s: cannot use WAL journal (%s)", path,
		    mode ? mode : sqlite3_errmsg(st->db));
		sqlite3_free(mode);
		goto fail;
	}
	sqlite3_free(mode);
	/* FULL: a commit is on disk before the API answers 2xx. */
	if (exec_sql(st, "PRAGMA synchronous=FULL", err, errlen) != 0 ||
	    exec_sql(st, "PRAGMA foreign_keys=ON", err, errlen) != 0)
		goto fail;
	if (migrate(st, sub, sizeof(sub)) == -1) {
		seterr(err, errlen, "%s: %s", path, sub);
		goto fail;
	}
	free(path);
	return st;
fail:
	free(path);
	px_store_close(st);
	return NULL;
}

void
px_store_close(struct px_store *st)
{
	if (st == NULL)
		return;
	sqlite3_close_v2(st->db);
	free(st);
}

/* ---- sandboxes ---- */

/* ---- a sandbox's fields (sbfield.h: one row each) ---- */

/* sbfield.h's rows as data, with where each field sits in struct
 * px_sandbox */
#define ROW(m, col, api, kind, flags, arg, cli, help) \
	{ #m, col, api, kind, flags, arg, cli, help, \
	    offsetof(struct px_sandbox, m), \
	    sizeof(((struct px_sandbox *)0)->m) },

const struct px_sbfield px_sbfields[] = {
	PX_SANDBOX_FIELDS(ROW)
};
const size_t px_nsbfields = sizeof(px_sbfields) / sizeof(px_sbfields[0]);

const struct px_sbfield *
px_sbfield_by_api(const char *name)
{
	size_t i;

	for (i = 0; i < px_nsbfields; i++)
		if (strcmp(px_sbfields[i].api, name) == 0)
			return &px_sbfields[i];
	return NULL;
}


#define FIELD(sb, f)	((char *)(sb) + (f)->off)
#define SANDBOX_NCOLS	((int)px_nsbfields)

/* Column i of the row as text into buf ("" for NULL). */
static void
col_text(sqlite3_stmt *stmt, int i, char *buf, size_t size)
{
	const unsigned char *t = sqlite3_column_text(stmt, i);

	snprintf(buf, size, "%s", t != NULL ? (const char *)t : "");
}

/* "s.id, s.address, ..." (alias) or "id, address, ...": the columns,
 * in the table's order. */
static const char *
sandbox_cols(int alias)
{
	static char cols[2][1024];
	char *c = cols[alias != 0];
	size_t i, n = 0;

	if (c[0] == '\0')
		for (i = 0; i < px_nsbfields; i++)
			n += (size_t)snprintf(c + n, sizeof(cols[0]) - n, "%s%s%s",
			    i ? ", " : "", alias ? "s." : "",
			    px_sbfields[i].column);
	return c;
}

static void
row_sandbox(sqlite3_stmt *stmt, int col, struct px_sandbox *sb)
{
	const struct px_sbfield *f;
	size_t i;

	memset(sb, 0, sizeof(*sb));
	for (i = 0; i < px_nsbfields; i++) {
		f = &px_sbfields[i];
		switch (f->kind) {
		case PF_BOOL:
			*(int *)FIELD(sb, f) = sqlite3_column_int(stmt,
			    col + (int)i);
			break;
		case PF_COUNT:
			*(unsigned *)FIELD(sb, f) = (unsigned)
			    sqlite3_column_int64(stmt, col + (int)i);
			break;
		case PF_CREATED:
		case PF_IDLE:
			*(int64_t *)FIELD(sb, f) = sqlite3_column_int64(stmt,
			    col + (int)i);
			break;
		default:	/* text */
			col_text(stmt, col + (int)i, FIELD(sb, f), f->size);
			break;
		}
	}
}

static void
row_sandbox_at0(sqlite3_stmt *stmt, void *arg)
{
	row_sandbox(stmt, 0, arg);
}

/* An idle limit as the API and the database see it. */
static int
idle_valid(int64_t ms)
{
	return ms == 0 || ms == PX_IDLE_NEVER || ms > 0;
}

static void
bind_idle(sqlite3_stmt *stmt, int i, int64_t ms)
{
	if (ms == 0)
		sqlite3_bind_null(stmt, i);
	else
		sqlite3_bind_int64(stmt, i, ms);
}

static void
bind_count(sqlite3_stmt *stmt, int i, unsigned v)
{
	if (v == 0)
		sqlite3_bind_null(stmt, i);
	else
		sqlite3_bind_int64(stmt, i, (sqlite3_int64)v);
}

int
px_template_name_valid(const char *name)
{
	size_t n;

	if (name == NULL || (n = strnlen(name, PX_TEMPLATE_NAME_MAX + 1)) >
	    PX_TEMPLATE_NAME_MAX)
		return 0;
	return px_valid_sandbox_id(name, n);
}

/* 1 if the template is stored, 0 if not, else a PX_STORE_* code. */
static int
template_exists(struct px_store *st, const char *name, char *err,
    size_t errlen)
{
	return found(st, run(st, err, errlen, "SELECT 1 FROM templates WHERE "
	    "name = ?", "t", name), "reading template", err, errlen);
}

/* An env field: "" or a JSON object's text (the API checks its names
 * and values; the store that it fits and looks like one). */
static int
env_valid(const char *e)
{
	size_t n = strlen(e);

	return n == 0 || (n >= 2 && e[0] == '{' && e[n - 1] == '}');
}

/* Whether field f of sb may be stored; 0, or -1 with err. */
static int
field_check(const struct px_sandbox *sb, const struct px_sbfield *f,
    char *err, size_t errlen)
{
	const char *t = FIELD(sb, f);
	int ok = 1;

	switch (f->kind) {
	case PF_ID:
		if (!field_ok(t, f->size))
			ok = 0;
		else
			return check_id(t, err, errlen) ? -1 : 0;
		break;
	case PF_ADDR:
		ok = field_ok(t, f->size) && (*t == '\0' || px_valid_ip(t));
		break;
	case PF_STATE:
		ok = field_ok(t, f->size) && px_state_valid(t);
		break;
	case PF_MODE:
		ok = field_ok(t, f->size) && (*t == '\0' || mode_valid(t));
		break;
	case PF_TEMPLATE:
		ok = field_ok(t, f->size) && (*t == '\0' ||
		    px_template_name_valid(t));
		break;
	case PF_IDLE:
		ok = idle_valid(*(const int64_t *)t);
		break;
	case PF_ENV:
		ok = field_ok(t, f->size) && env_valid(t);
		break;
	case PF_BOOL:
	case PF_CREATED:
	case PF_COUNT:
		break;
	}
	if (!ok) {
		seterr(err, errlen, "invalid %s", f->api);
		return -1;
	}
	return 0;
}

/* Binds field f of sb as parameter i: what is "not set" binds NULL. */
static void
field_bind(sqlite3_stmt *stmt, int i, const struct px_sandbox *sb,
    const struct px_sbfield *f)
{
	const char *t = FIELD(sb, f);

	switch (f->kind) {
	case PF_BOOL:
		sqlite3_bind_int(stmt, i, *(const int *)t ? 1 : 0);
		break;
	case PF_CREATED:
		sqlite3_bind_int64(stmt, i, *(const int64_t *)t ?
		    *(const int64_t *)t : (int64_t)time(NULL));
		break;
	case PF_COUNT:
		bind_count(stmt, i, *(const unsigned *)t);
		break;
	case PF_IDLE:
		bind_idle(stmt, i, *(const int64_t *)t);
		break;
	case PF_TEMPLATE:
		/* "default" is the built-in template: stored as none */
		if (*t != '\0' && strcmp(t, PX_TEMPLATE_DEFAULT) != 0)
			sqlite3_bind_text(stmt, i, t, -1, SQLITE_STATIC);
		break;
	case PF_ID:
	case PF_STATE:
		sqlite3_bind_text(stmt, i, t, -1, SQLITE_STATIC);
		break;
	default:
		if (*t != '\0')
			sqlite3_bind_text(stmt, i, t, -1, SQLITE_STATIC);
		break;
	}
}

/*
 * Runs sql with the fields of sb that which names (bit i: row i) bound in
 * their order, then id when not NULL: the step's result, or -1 when it
 * could not be prepared (err says why).
 */
static int
run_fields(struct px_store *st, const char *sql, const struct px_sandbox *sb,
    unsigned long which, const char *id, char *err, size_t errlen)
{
	sqlite3_stmt *stmt;
	size_t i;
	int k = 0, rc;

	if ((stmt = prepare(st, sql, err, errlen)) == NULL)
		return -1;
	for (i = 0; i < px_nsbfields; i++)
		if (which & (1UL << i))
			field_bind(stmt, ++k, sb, &px_sbfields[i]);
	if (id != NULL)
		sqlite3_bind_text(stmt, k + 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	sqlite3_finalize(stmt);
	return rc;
}

/* The named template exists, or NOTFOUND (none and "default" do). */
static int
template_known(struct px_store *st, const char *tpl, char *err,
    size_t errlen)
{
	int rc;

	if (*tpl == '\0' || strcmp(tpl, PX_TEMPLATE_DEFAULT) == 0)
		return PX_STORE_OK;
	if ((rc = template_exists(st, tpl, err, errlen)) == 1)
		return PX_STORE_OK;
	if (rc == 0) {
		seterr(err, errlen, "no template '%s'", tpl);
		return PX_STORE_NOTFOUND;
	}
	return rc;
}

/* Inside a transaction: the INSERT of one sandbox. */
static int
sandbox_insert(struct px_store *st, const struct px_sandbox *sb,
    char *err, size_t errlen)
{
	char sql[1280];
	size_t i, n;
	int rc;

	for (i = 0; i < px_nsbfields; i++)
		if (field_check(sb, &px_sbfields[i], err, errlen) == -1)
			return PX_STORE_ERR;
	if ((rc = template_known(st, sb->template_name, err, errlen)) !=
	    PX_STORE_OK)
		return rc;
	n = (size_t)snprintf(sql, sizeof(sql), "INSERT INTO sandboxes (%s) "
	    "VALUES (", sandbox_cols(0));
	for (i = 0; i < px_nsbfields; i++)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, "%s?",
		    i ? ", " : "");
	snprintf(sql + n, sizeof(sql) - n, ")");
	return inserted(st, run_fields(st, sql, sb, ~0UL, NULL, err, errlen),
	    "adding sandbox", err, errlen, "sandbox '%s' already exists",
	    sb->id);
}

static int token_insert(struct px_store *, const struct px_token *,
    char *, size_t);
static int event_insert(struct px_store *, const struct px_event *,
    int64_t *, char *, size_t);

int
px_store_sandbox_create(struct px_store *st, const struct px_sandbox *sb,
    const struct px_token *tok, char *err, size_t errlen)
{
	struct px_token t;
	struct px_event ev;
	int rc;

	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	if ((rc = sandbox_insert(st, sb, err, errlen)) != PX_STORE_OK)
		goto end;
	if (tok != NULL) {
		t = *tok;
		memcpy(t.sandbox, sb->id, sizeof(t.sandbox));
		if ((rc = token_insert(st, &t, err, errlen)) != PX_STORE_OK)
			goto end;
	}
	memset(&ev, 0, sizeof(ev));
	memcpy(ev.sandbox, sb->id, sizeof(ev.sandbox));
	snprintf(ev.operation, sizeof(ev.operation), "create");
	snprintf(ev.result, sizeof(ev.result), "ok");
	ev.duration_ms = -1;
	rc = event_insert(st, &ev, NULL, err, errlen);
end:
	return tx_end(st, rc, err, errlen);
}

int
px_store_sandbox_add(struct px_store *st, const struct px_sandbox *sb,
    char *err, size_t errlen)
{
	return px_store_sandbox_create(st, sb, NULL, err, errlen);
}

int
px_store_sandbox_set_state(struct px_store *st, const char *id,
    const char *state, char *err, size_t errlen)
{
	return px_store_sandbox_set_vm(st, id, state, NULL, err, errlen);
}

int
px_store_sandbox_set_vm(struct px_store *st, const char *id,
    const char *state, const char *address, char *err, size_t errlen)
{
	if (check_id(id, err, errlen))
		return PX_STORE_ERR;
	if (state == NULL || !px_state_valid(state)) {
		seterr(err, errlen, "invalid state");
		return PX_STORE_ERR;
	}
	if (address != NULL && *address != '\0' && !px_valid_ip(address)) {
		seterr(err, errlen, "invalid address");
		return PX_STORE_ERR;
	}
	return need_row(written(st, run(st, err, errlen, "UPDATE sandboxes SET "
	    "state = ?, address = COALESCE(?, address) WHERE id = ?", "ttt",
	    state, address, id), "setting state", err, errlen), err, errlen,
	    "no sandbox '%s'", id);
}

static int sandbox_read(struct px_store *, const char *, struct px_sandbox *,
    char *, size_t);

int
px_store_sandbox_set(struct px_store *st, const char *id,
    const struct px_sandbox *v, unsigned long which, struct px_sandbox *out,
    char *err, size_t errlen)
{
	char sql[1280];
	size_t i, n;
	int rc, k;

	if (check_id(id, err, errlen))
		return PX_STORE_ERR;
	n = (size_t)snprintf(sql, sizeof(sql), "UPDATE sandboxes SET ");
	for (i = 0, k = 0; i < px_nsbfields; i++) {
		if (!(which & (1UL << i)))
			continue;
		if (!(px_sbfields[i].flags & PF_PATCH)) {
			seterr(err, errlen, "%s cannot be changed",
			    px_sbfields[i].api);
			return PX_STORE_ERR;
		}
		if (field_check(v, &px_sbfields[i], err, errlen) == -1)
			return PX_STORE_ERR;
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, "%s%s = ?",
		    k++ ? ", " : "", px_sbfields[i].column);
	}
	if (k == 0) {
		seterr(err, errlen, "nothing to change");
		return PX_STORE_ERR;
	}
	snprintf(sql + n, sizeof(sql) - n, " WHERE id = ?");
	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	rc = need_row(written(st, run_fields(st, sql, v, which, id, err,
	    errlen), "changing sandbox", err, errlen), err, errlen,
	    "no sandbox '%s'", id);
	if (rc == PX_STORE_OK && out != NULL)
		rc = sandbox_read(st, id, out, err, errlen);
	return tx_end(st, rc, err, errlen);
}

int
px_store_sandbox_get(struct px_store *st, const char *id,
    struct px_sandbox *out, char *err, size_t errlen)
{
	if (check_id(id, err, errlen))
		return PX_STORE_ERR;
	return sandbox_read(st, id, out, err, errlen);
}

static int
sandbox_read(struct px_store *st, const char *id, struct px_sandbox *out,
    char *err, size_t errlen)
{
	char sql[1280];

	snprintf(sql, sizeof(sql), "SELECT %s FROM sandboxes s WHERE s.id = ?",
	    sandbox_cols(1));
	return get_one(st, sql, id, row_sandbox_at0, out, "sandbox", err,
	    errlen);
}

int
px_store_sandbox_rm(struct px_store *st, const char *id,
    char *err, size_t errlen)
{
	if (check_id(id, err, errlen))
		return PX_STORE_ERR;
	/* One statement: the cascade to ports runs in its transaction. */
	return need_row(written(st, run(st, err, errlen, "DELETE FROM sandboxes "
	    "WHERE id = ?", "t", id), "removing sandbox", err, errlen), err,
	    errlen, "no sandbox '%s'", id);
}

VISIT(sandbox, px_sandbox, row_sandbox_at0)

int
px_store_sandbox_list(struct px_store *st,
    int (*cb)(const struct px_sandbox *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.sandbox = cb, .arg = arg };
	char sql[1280];

	snprintf(sql, sizeof(sql), "SELECT %s FROM sandboxes s ORDER BY s.id",
	    sandbox_cols(1));
	return each_row(st, visit_sandbox, &v, "listing sandboxes", err, errlen,
	    sql, "");
}

/* ---- ports ---- */

#define PORT_COLS "p.sandbox, p.port, p.host_header, p.visibility, " \
	"p.custom_host, p.created"

static void
row_port(sqlite3_stmt *stmt, int col, struct px_port *p)
{
	const unsigned char *t;

	memset(p, 0, sizeof(*p));
	col_text(stmt, col, p->sandbox, sizeof(p->sandbox));
	p->port = (uint16_t)sqlite3_column_int(stmt, col + 1);
	if ((t = sqlite3_column_text(stmt, col + 2)) != NULL)
		(void)px_host_header_parse((const char *)t, &p->host_header);
	if ((t = sqlite3_column_text(stmt, col + 3)) != NULL)
		(void)px_visibility_parse((const char *)t, &p->visibility);
	col_text(stmt, col + 4, p->custom_host, sizeof(p->custom_host));
	p->created = sqlite3_column_int64(stmt, col + 5);
}

static void
row_port_at0(sqlite3_stmt *stmt, void *arg)
{
	row_port(stmt, 0, arg);
}

/* 1 if the sandbox exists, 0 if not, -1 on error. */
static int
sandbox_exists(struct px_store *st, const char *id, char *err, size_t errlen)
{
	return found(st, run(st, err, errlen, "SELECT 1 FROM sandboxes WHERE "
	    "id = ?", "t", id), "reading sandbox", err, errlen);
}

/* In a transaction: NOTFOUND unless the sandbox exists (any failure to
 * read it is PX_STORE_ERR). */
static int
need_sandbox(struct px_store *st, const char *id, char *err, size_t errlen)
{
	int rc;

	if (check_id(id, err, errlen))
		return PX_STORE_ERR;
	rc = sandbox_exists(st, id, err, errlen);
	return need_row(rc < 0 ? PX_STORE_ERR : rc, err, errlen,
	    "no sandbox '%s'", id);
}

/*
 * each_row() in a read transaction, after need_sandbox() when sandbox is
 * not NULL: so "the sandbox exists" and its rows agree.
 */
static int
sandbox_rows(struct px_store *st, const char *sandbox,
    int (*row)(sqlite3_stmt *, void *), void *arg, const char *what,
    char *err, size_t errlen, const char *sql, const char *types, ...)
{
	va_list ap;
	int rc;

	if ((rc = exec_sql(st, "BEGIN", err, errlen)) != 0)
		return rc;
	if (sandbox == NULL ||
	    (rc = need_sandbox(st, sandbox, err, errlen)) == PX_STORE_OK) {
		va_start(ap, types);
		rc = each_rowv(st, row, arg, what, err, errlen, sql, types, ap);
		va_end(ap);
	}
	tx_rollback(st);	/* read only: ending it either way is the same */
	return rc;
}

int
px_store_port_set(struct px_store *st, const struct px_port *p, int *created,
    char *err, size_t errlen)
{
	struct px_port other;
	int rc, isnew = 0;

	if (!field_ok(p->sandbox, sizeof(p->sandbox)) ||
	    check_id(p->sandbox, err, errlen))
		return PX_STORE_ERR;
	if (p->port == 0 || !WORD_OK(host_headers, p->host_header) ||
	    !WORD_OK(visibilities, p->visibility)) {
		seterr(err, errlen, "invalid port, host header or visibility");
		return PX_STORE_ERR;
	}
	if (!field_ok(p->custom_host, sizeof(p->custom_host)) ||
	    (p->custom_host[0] != '\0' &&
	    !px_valid_hostname(p->custom_host, strlen(p->custom_host)))) {
		seterr(err, errlen, "invalid custom host");
		return PX_STORE_ERR;
	}

	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	if ((rc = need_sandbox(st, p->sandbox, err, errlen)) != PX_STORE_OK)
		goto end;
	if (p->custom_host[0] != '\0') {
		rc = get_row(st, row_port_at0, &other, "checking custom host",
		    err, errlen, "SELECT " PORT_COLS " FROM ports p WHERE "
		    "p.custom_host = ? AND NOT (p.sandbox = ? AND p.port = ?)",
		    "tti", p->custom_host, p->sandbox, (int)p->port);
		if (rc == 1) {
			seterr(err, errlen, "host '%s' is already used by port "
			    "%d of sandbox '%s'", p->custom_host,
			    (int)other.port, other.sandbox);
			rc = PX_STORE_CONFLICT;
		}
		if (rc != 0)
			goto end;
	}
	if ((rc = found(st, run(st, err, errlen, "SELECT 1 FROM ports WHERE "
	    "sandbox = ? AND port = ?", "ti", p->sandbox, (int)p->port),
	    "reading port", err, errlen)) < 0)
		goto end;
	isnew = rc == 0;
	rc = run(st, err, errlen, "INSERT INTO ports (sandbox, port, "
	    "host_header, visibility, custom_host, created) VALUES (?, ?, ?, "
	    "?, ?, ?) ON CONFLICT (sandbox, port) DO UPDATE SET host_header = "
	    "excluded.host_header, visibility = excluded.visibility, "
	    "custom_host = excluded.custom_host", "titttI", p->sandbox,
	    (int)p->port, px_host_header_name(p->host_header),
	    px_visibility_name(p->visibility), p->custom_host[0] ?
	    p->custom_host : NULL, p->created ? (int64_t)p->created :
	    (int64_t)time(NULL));
	if (rc == SQLITE_CONSTRAINT_UNIQUE) {
		seterr(err, errlen, "host '%s' is already used by another port",
		    p->custom_host);
		rc = PX_STORE_CONFLICT;
	} else if ((rc = written(st, rc, "publishing port", err, errlen)) > 0)
		rc = PX_STORE_OK;
end:
	if ((rc = tx_end(st, rc, err, errlen)) == PX_STORE_OK && created != NULL)
		*created = isnew;
	return rc;
}

int
px_store_port_get(struct px_store *st, const char *sandbox, uint16_t port,
    struct px_port *out, char *err, size_t errlen)
{
	if (check_id(sandbox, err, errlen))
		return PX_STORE_ERR;
	return need_row(get_row(st, row_port_at0, out, "reading port", err,
	    errlen, "SELECT " PORT_COLS " FROM ports p WHERE p.sandbox = ? AND "
	    "p.port = ?", "ti", sandbox, (int)port), err, errlen,
	    "port %u of sandbox '%s' is not published", port, sandbox);
}

int
px_store_port_rm(struct px_store *st, const char *sandbox, uint16_t port,
    char *err, size_t errlen)
{
	if (check_id(sandbox, err, errlen))
		return PX_STORE_ERR;
	return need_row(written(st, run(st, err, errlen, "DELETE FROM ports "
	    "WHERE sandbox = ? AND port = ?", "ti", sandbox, (int)port),
	    "unpublishing port", err, errlen), err, errlen,
	    "port %u of sandbox '%s' is not published", port, sandbox);
}

VISIT(port, px_port, row_port_at0)

int
px_store_port_list(struct px_store *st, const char *sandbox,
    int (*cb)(const struct px_port *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.port = cb, .arg = arg };

	return sandbox_rows(st, sandbox, visit_port, &v, "listing ports", err,
	    errlen, sandbox != NULL ? "SELECT " PORT_COLS " FROM ports p WHERE "
	    "p.sandbox = ? ORDER BY p.port" : "SELECT " PORT_COLS " FROM ports "
	    "p ORDER BY p.sandbox, p.port", sandbox != NULL ? "t" : "", sandbox);
}

static int
visit_route(sqlite3_stmt *stmt, void *arg)
{
	const struct visit *v = arg;
	struct px_sandbox sb;
	struct px_port p;
	struct px_route_row row = { &sb, &p };

	row_sandbox(stmt, 0, &sb);
	row_port(stmt, SANDBOX_NCOLS, &p);
	return v->cb.route(&row, v->arg);
}

int
px_store_routes(struct px_store *st,
    int (*cb)(const struct px_route_row *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.route = cb, .arg = arg };
	char sql[1536];

	snprintf(sql, sizeof(sql), "SELECT %s, " PORT_COLS " FROM ports p "
	    "JOIN sandboxes s ON s.id = p.sandbox ORDER BY p.sandbox, p.port",
	    sandbox_cols(1));
	return each_row(st, visit_route, &v, "reading routes", err, errlen, sql,
	    "");
}

/* ---- tokens ---- */

static int
hex64_ok(const char *h)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
			return 0;
	return h[64] == '\0';
}

static int
token_id_ok(const char *id)
{
	size_t n = strnlen(id, PX_TOKEN_ID_MAX + 1), i;

	if (n == 0 || n > PX_TOKEN_ID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' &&
		    id[i] <= '9') || id[i] == '-'))
			return 0;
	return 1;
}

static int
token_insert(struct px_store *st, const struct px_token *t, char *err,
    size_t errlen)
{
	int rc;

	if (!field_ok(t->id, sizeof(t->id)) || !token_id_ok(t->id) ||
	    !field_ok(t->sha256, sizeof(t->sha256)) || !hex64_ok(t->sha256) ||
	    !field_ok(t->sandbox, sizeof(t->sandbox)) ||
	    !field_ok(t->name, sizeof(t->name))) {
		seterr(err, errlen, "invalid token record");
		return PX_STORE_ERR;
	}
	if (t->sandbox[0] != '\0' &&
	    (rc = need_sandbox(st, t->sandbox, err, errlen)) != PX_STORE_OK)
		return rc;
	return inserted(st, run(st, err, errlen, "INSERT INTO tokens (id, "
	    "sha256, sandbox, name, created) VALUES (?, ?, ?, ?, ?)", "ttttI",
	    t->id, t->sha256, t->sandbox[0] ? t->sandbox : NULL, t->name,
	    t->created ? t->created : (int64_t)time(NULL)), "adding token",
	    err, errlen, "token '%s' already exists", t->id);
}

int
px_store_token_add(struct px_store *st, const struct px_token *t,
    char *err, size_t errlen)
{
	int rc;

	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	return tx_end(st, token_insert(st, t, err, errlen), err, errlen);
}

#define TOKEN_COLS "id, sha256, sandbox, name, created"

static void
row_token(sqlite3_stmt *stmt, void *arg)
{
	struct px_token *t = arg;

	memset(t, 0, sizeof(*t));
	col_text(stmt, 0, t->id, sizeof(t->id));
	col_text(stmt, 1, t->sha256, sizeof(t->sha256));
	col_text(stmt, 2, t->sandbox, sizeof(t->sandbox));
	col_text(stmt, 3, t->name, sizeof(t->name));
	t->created = sqlite3_column_int64(stmt, 4);
}

int
px_store_token_get(struct px_store *st, const char *id, struct px_token *out,
    char *err, size_t errlen)
{
	if (id == NULL || !token_id_ok(id)) {
		seterr(err, errlen, "invalid token id");
		return PX_STORE_ERR;
	}
	return get_one(st, "SELECT " TOKEN_COLS " FROM tokens WHERE id = ?", id,
	    row_token, out, "token", err, errlen);
}

/* One UPDATE/DELETE by token id; NOTFOUND when no row changed. */
static int
token_change(struct px_store *st, const char *sql, const char *id,
    const char *hash, char *err, size_t errlen)
{
	int rc;

	if (id == NULL || !token_id_ok(id)) {
		seterr(err, errlen, "invalid token id");
		return PX_STORE_ERR;
	}
	rc = hash != NULL ? run(st, err, errlen, sql, "tt", hash, id) :
	    run(st, err, errlen, sql, "t", id);
	if (rc == SQLITE_CONSTRAINT_UNIQUE) {
		seterr(err, errlen, "token hash already in use");
		return PX_STORE_EXISTS;
	}
	return need_row(written(st, rc, "changing token", err, errlen), err,
	    errlen, "no token '%s'", id);
}

int
px_store_token_rotate(struct px_store *st, const char *id,
    const char *new_sha256, char *err, size_t errlen)
{
	if (new_sha256 == NULL || strlen(new_sha256) != 64 ||
	    !hex64_ok(new_sha256)) {
		seterr(err, errlen, "invalid token hash");
		return PX_STORE_ERR;
	}
	return token_change(st, "UPDATE tokens SET sha256 = ? WHERE id = ?",
	    id, new_sha256, err, errlen);
}

int
px_store_token_rm(struct px_store *st, const char *id, char *err,
    size_t errlen)
{
	return token_change(st, "DELETE FROM tokens WHERE id = ?", id, NULL,
	    err, errlen);
}

VISIT(token, px_token, row_token)

int
px_store_token_list(struct px_store *st, const char *sandbox,
    int (*cb)(const struct px_token *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.token = cb, .arg = arg };
	const char *sql;

	if (sandbox == NULL)
		sql = "SELECT " TOKEN_COLS " FROM tokens ORDER BY id";
	else if (sandbox[0] == '\0')
		sql = "SELECT " TOKEN_COLS " FROM tokens WHERE sandbox IS NULL "
		    "ORDER BY id";
	else
		sql = "SELECT " TOKEN_COLS " FROM tokens WHERE sandbox = ? "
		    "ORDER BY id";
	return each_row(st, visit_token, &v, "listing tokens", err, errlen, sql,
	    sandbox != NULL && sandbox[0] != '\0' ? "t" : "", sandbox);
}

/* ---- events ---- */

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
event_insert(struct px_store *st, const struct px_event *ev, int64_t *seq,
    char *err, size_t errlen)
{
	int rc;

	if (!field_ok(ev->sandbox, sizeof(ev->sandbox)) ||
	    check_id(ev->sandbox, err, errlen))
		return PX_STORE_ERR;
	if (!field_ok(ev->operation, sizeof(ev->operation)) ||
	    ev->operation[0] == '\0' || !field_ok(ev->result,
	    sizeof(ev->result)) || ev->result[0] == '\0' ||
	    !field_ok(ev->reason, sizeof(ev->reason))) {
		seterr(err, errlen, "invalid event");
		return PX_STORE_ERR;
	}
	if ((rc = need_sandbox(st, ev->sandbox, err, errlen)) != PX_STORE_OK)
		return rc;
	if ((rc = written(st, run(st, err, errlen, "INSERT INTO events "
	    "(sandbox, time_ms, operation, result, reason, duration_ms) VALUES "
	    "(?, ?, ?, ?, ?, ?)", "tItttI", ev->sandbox, ev->time_ms ?
	    ev->time_ms : now_ms(), ev->operation, ev->result, ev->reason,
	    (int64_t)ev->duration_ms), "adding event", err, errlen)) < 0)
		return rc;
	if (seq != NULL)
		*seq = sqlite3_last_insert_rowid(st->db);
	return PX_STORE_OK;
}

int
px_store_event_add(struct px_store *st, const struct px_event *ev,
    int64_t *seq, char *err, size_t errlen)
{
	int rc;

	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	return tx_end(st, event_insert(st, ev, seq, err, errlen), err, errlen);
}

static void
row_event(sqlite3_stmt *stmt, struct px_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->seq = sqlite3_column_int64(stmt, 0);
	col_text(stmt, 1, ev->sandbox, sizeof(ev->sandbox));
	ev->time_ms = sqlite3_column_int64(stmt, 2);
	col_text(stmt, 3, ev->operation, sizeof(ev->operation));
	col_text(stmt, 4, ev->result, sizeof(ev->result));
	col_text(stmt, 5, ev->reason, sizeof(ev->reason));
	ev->duration_ms = sqlite3_column_int64(stmt, 6);
}

VISIT(event, px_event, row_event)

int
px_store_event_list(struct px_store *st, const char *sandbox, int64_t after,
    int limit, int (*cb)(const struct px_event *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.event = cb, .arg = arg };

	if (check_id(sandbox, err, errlen))
		return PX_STORE_ERR;
	return sandbox_rows(st, sandbox, visit_event, &v, "listing events", err,
	    errlen, "SELECT seq, sandbox, time_ms, operation, result, reason, "
	    "duration_ms FROM events WHERE sandbox = ? AND seq > ? ORDER BY seq "
	    "LIMIT ?", "tIi", sandbox, after, limit > 0 ? limit : -1);
}

/* ---- egress rules ---- */

static int
rule_text_ok(const char *r, size_t size)
{
	size_t i, n;

	if (!field_ok(r, size) || (n = strlen(r)) == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (r[i] <= 0x20 || r[i] >= 0x7f)
			return 0;
	return 1;
}

static int
egress_insert(struct px_store *st, const struct px_egress_rule *e,
    int *created, char *err, size_t errlen)
{
	int rc, existed;

	if (!rule_text_ok(e->rule, sizeof(e->rule)) ||
	    !WORD_OK(egress_actions, e->action) || e->expires < 0) {
		seterr(err, errlen, "invalid egress rule");
		return PX_STORE_ERR;
	}
	if ((existed = found(st, run(st, err, errlen, "SELECT 1 FROM "
	    "egress_rules WHERE sandbox = ? AND action = ? AND rule = ? AND "
	    "(expires = 0 OR expires > ?)", "tttI", e->sandbox,
	    px_egress_action_name(e->action), e->rule, (int64_t)time(NULL)),
	    "reading egress rule", err, errlen)) < 0)
		return existed;
	if ((rc = written(st, run(st, err, errlen, "INSERT INTO egress_rules "
	    "(sandbox, action, rule, expires, created) VALUES (?, ?, ?, ?, ?) "
	    "ON CONFLICT (sandbox, action, rule) DO UPDATE SET expires = "
	    "excluded.expires, created = CASE WHEN egress_rules.expires != 0 "
	    "AND egress_rules.expires <= ? THEN excluded.created ELSE "
	    "egress_rules.created END", "tttIII", e->sandbox,
	    px_egress_action_name(e->action), e->rule, (int64_t)e->expires,
	    e->created ? (int64_t)e->created : (int64_t)time(NULL),
	    (int64_t)time(NULL)), "adding egress rule", err, errlen)) < 0)
		return rc;
	if (created != NULL)
		*created = !existed;
	return PX_STORE_OK;
}

int
px_store_egress_add(struct px_store *st, const struct px_egress_rule *e,
    int *created, char *err, size_t errlen)
{
	int rc;

	if (!field_ok(e->sandbox, sizeof(e->sandbox)))
		return PX_STORE_ERR;
	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	if ((rc = need_sandbox(st, e->sandbox, err, errlen)) == PX_STORE_OK)
		rc = egress_insert(st, e, created, err, errlen);
	return tx_end(st, rc, err, errlen);
}

int
px_store_egress_rm(struct px_store *st, const char *sandbox,
    enum px_egress_action action, const char *rule, char *err, size_t errlen)
{
	if (check_id(sandbox, err, errlen))
		return PX_STORE_ERR;
	return need_row(written(st, run(st, err, errlen, "DELETE FROM "
	    "egress_rules WHERE sandbox = ? AND action = ? AND rule = ?", "ttt",
	    sandbox, px_egress_action_name(action), rule),
	    "removing egress rule", err, errlen), err, errlen,
	    "sandbox '%s' has no %s rule '%s'", sandbox,
	    px_egress_action_name(action), rule);
}

int
px_store_egress_replace(struct px_store *st, const char *sandbox,
    const char *mode, const struct px_egress_rule *rules, size_t n,
    char *err, size_t errlen)
{
	struct px_egress_rule e;
	size_t i;
	int rc;

	if (mode != NULL && mode[0] != '\0' && !mode_valid(mode)) {
		seterr(err, errlen, "invalid egress mode");
		return PX_STORE_ERR;
	}
	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	if ((rc = need_sandbox(st, sandbox, err, errlen)) != PX_STORE_OK)
		goto end;
	if ((rc = written(st, run(st, err, errlen, "DELETE FROM egress_rules "
	    "WHERE sandbox = ?", "t", sandbox), "replacing egress rules", err,
	    errlen)) < 0)
		goto end;
	for (i = 0; i < n; i++) {
		e = rules[i];
		snprintf(e.sandbox, sizeof(e.sandbox), "%s", sandbox);
		if ((rc = egress_insert(st, &e, NULL, err, errlen)) !=
		    PX_STORE_OK)
			goto end;
	}
	if (mode != NULL && (rc = written(st, run(st, err, errlen, "UPDATE "
	    "sandboxes SET egress_mode = ? WHERE id = ?", "tt", mode[0] ? mode :
	    NULL, sandbox), "setting egress mode", err, errlen)) < 0)
		goto end;
	rc = PX_STORE_OK;
end:
	return tx_end(st, rc, err, errlen);
}

int
px_store_egress_mode_set(struct px_store *st, const char *sandbox,
    const char *mode, char *err, size_t errlen)
{
	if (check_id(sandbox, err, errlen))
		return PX_STORE_ERR;
	if (mode == NULL || (mode[0] != '\0' && !mode_valid(mode))) {
		seterr(err, errlen, "invalid egress mode");
		return PX_STORE_ERR;
	}
	return need_row(written(st, run(st, err, errlen, "UPDATE sandboxes SET "
	    "egress_mode = ? WHERE id = ?", "tt", mode[0] ? mode : NULL,
	    sandbox), "setting egress mode", err, errlen), err, errlen,
	    "no sandbox '%s'", sandbox);
}

static void
row_egress(sqlite3_stmt *stmt, struct px_egress_rule *e)
{
	const unsigned char *x;

	memset(e, 0, sizeof(*e));
	col_text(stmt, 0, e->sandbox, sizeof(e->sandbox));
	if ((x = sqlite3_column_text(stmt, 1)) != NULL)
		(void)px_egress_action_parse((const char *)x, &e->action);
	col_text(stmt, 2, e->rule, sizeof(e->rule));
	e->expires = sqlite3_column_int64(stmt, 3);
	e->created = sqlite3_column_int64(stmt, 4);
}

VISIT(egress, px_egress_rule, row_egress)

int
px_store_egress_list(struct px_store *st, const char *sandbox,
    int (*cb)(const struct px_egress_rule *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.egress = cb, .arg = arg };

	/* 'allow' < 'deny': allow rules first. */
	return sandbox_rows(st, sandbox, visit_egress, &v,
	    "listing egress rules", err, errlen, sandbox != NULL ?
	    "SELECT sandbox, action, rule, expires, created FROM egress_rules "
	    "WHERE (expires = 0 OR expires > ?) AND sandbox = ? "
	    "ORDER BY sandbox, action, rule" :
	    "SELECT sandbox, action, rule, expires, created FROM egress_rules "
	    "WHERE (expires = 0 OR expires > ?) ORDER BY sandbox, action, rule",
	    sandbox != NULL ? "It" : "I", (int64_t)time(NULL), sandbox);
}

/* ---- templates ---- */

static int
template_check(const struct px_template *t, char *err, size_t errlen)
{
	if (!field_ok(t->name, sizeof(t->name)) ||
	    !px_template_name_valid(t->name)) {
		seterr(err, errlen, "invalid template name");
		return -1;
	}
	if (!field_ok(t->dir, sizeof(t->dir)) || t->dir[0] != '/') {
		seterr(err, errlen, "template directory must be an absolute path");
		return -1;
	}
	return 0;
}

int
px_store_template_add(struct px_store *st, const struct px_template *t,
    char *err, size_t errlen)
{
	if (template_check(t, err, errlen) != 0)
		return PX_STORE_ERR;
	if (strcmp(t->name, PX_TEMPLATE_DEFAULT) == 0) {
		seterr(err, errlen, "template '%s' is built in", t->name);
		return PX_STORE_EXISTS;
	}
	return inserted(st, run(st, err, errlen, "INSERT INTO templates (name, "
	    "dir, created) VALUES (?, ?, ?)", "ttI", t->name, t->dir,
	    t->created ? (int64_t)t->created : (int64_t)time(NULL)),
	    "adding template", err, errlen, "template '%s' already exists",
	    t->name);
}

static void
row_template(sqlite3_stmt *stmt, void *arg)
{
	struct px_template *t = arg;

	memset(t, 0, sizeof(*t));
	col_text(stmt, 0, t->name, sizeof(t->name));
	col_text(stmt, 1, t->dir, sizeof(t->dir));
	t->created = sqlite3_column_int64(stmt, 2);
}

int
px_store_template_get(struct px_store *st, const char *name,
    struct px_template *out, char *err, size_t errlen)
{
	if (!px_template_name_valid(name)) {
		seterr(err, errlen, "invalid template name");
		return PX_STORE_ERR;
	}
	return get_one(st, "SELECT name, dir, created FROM templates WHERE "
	    "name = ?", name, row_template, out, "template", err, errlen);
}

/* The first sandbox (by id) that uses a template, and how many do. */
struct tpl_users {
	char id[41];
	int n;
};

static void
row_tpl_users(sqlite3_stmt *stmt, void *arg)
{
	struct tpl_users *u = arg;

	col_text(stmt, 0, u->id, sizeof(u->id));
	u->n = sqlite3_column_int(stmt, 1);
}

int
px_store_template_rm(struct px_store *st, const char *name, char *err,
    size_t errlen)
{
	struct tpl_users u;
	int rc;

	if (!px_template_name_valid(name)) {
		seterr(err, errlen, "invalid template name");
		return PX_STORE_ERR;
	}
	if ((rc = tx_begin(st, err, errlen)) != 0)
		return rc;
	/* In the transaction: no sandbox can start using it meanwhile. */
	rc = get_row(st, row_tpl_users, &u, "checking template users", err,
	    errlen, "SELECT id, (SELECT count(*) FROM sandboxes WHERE "
	    "template = ?1) FROM sandboxes WHERE template = ?1 ORDER BY id "
	    "LIMIT 1", "t", name);
	if (rc == 1) {
		seterr(err, errlen, "template '%s' is used by sandbox '%s'%s: "
		    "remove %s first", name, u.id, u.n > 1 ? " and others" : "",
		    u.n > 1 ? "them" : "it");
		rc = PX_STORE_CONFLICT;
	}
	if (rc == 0)
		rc = need_row(written(st, run(st, err, errlen, "DELETE FROM "
		    "templates WHERE name = ?", "t", name), "removing template",
		    err, errlen), err, errlen, "no template '%s'", name);
	return tx_end(st, rc, err, errlen);
}

VISIT(tpl, px_template, row_template)

int
px_store_template_list(struct px_store *st,
    int (*cb)(const struct px_template *, void *), void *arg,
    char *err, size_t errlen)
{
	struct visit v = { .cb.tpl = cb, .arg = arg };

	return each_row(st, visit_tpl, &v, "listing templates", err, errlen,
	    "SELECT name, dir, created FROM templates ORDER BY name", "");
}

int
px_store_template_users(struct px_store *st, const char *name, int *n,
    char *err, size_t errlen)
{
	int rc, dflt = strcmp(name, PX_TEMPLATE_DEFAULT) == 0;

	*n = 0;
	rc = get_row(st, row_int, n, "counting template users", err, errlen,
	    dflt ? "SELECT count(*) FROM sandboxes WHERE external = 0 AND "
	    "template IS NULL" : "SELECT count(*) FROM sandboxes WHERE "
	    "template = ?", dflt ? "" : "t", name);
	return rc == 1 ? PX_STORE_OK : rc == 0 ? dberr(st, err, errlen,
	    "counting template users") : rc;
}

/* ---- global policy ---- */

/* each_row()'s row for the policy: a copy of its text into *(char **)arg;
 * 1, or 2 when out of memory. */
static int
row_policy(sqlite3_stmt *stmt, void *arg)
{
	const unsigned char *x = sqlite3_column_text(stmt, 0);
	char **out = arg;

	if (x != NULL && (*out = strdup((const char *)x)) == NULL)
		return 2;
	return 1;
}

int
px_store_policy_get(struct px_store *st, char **out, char *err, size_t errlen)
{
	int rc;

	*out = NULL;
	rc = each_row(st, row_policy, out, "reading policy", err, errlen,
	    "SELECT doc FROM policy WHERE id = 1", "");
	if (rc == 2) {
		seterr(err, errlen, "out of memory");
		return PX_STORE_ERR;
	}
	return rc < 0 ? rc : PX_STORE_OK;
}

int
px_store_policy_set(struct px_store *st, const char *doc, char *err,
    size_t errlen)
{
	int rc;

	if (doc == NULL || doc[0] == '\0') {
		seterr(err, errlen, "empty policy");
		return PX_STORE_ERR;
	}
	rc = written(st, run(st, err, errlen, "INSERT INTO policy (id, doc, "
	    "updated) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET doc = "
	    "excluded.doc, updated = excluded.updated", "tI", doc,
	    (int64_t)time(NULL)), "setting policy", err, errlen);
	return rc < 0 ? rc : PX_STORE_OK;
}
