/*
 * netctl.c — the netctl command-line client of berthd's control API:
 * parses `netctl [options] <noun> <verb> [args]`, checks every argument
 * locally (so a typo gets a precise message before any request), sends
 * requests over <state>/control.sock (or --url with --token) and prints
 * a table, a URL, or with --json the API's JSON. `netctl mcp` serves the
 * same API to coding agents over MCP (cli_mcp.c).
 *
 * Exit codes: 0 done, 1 berthd refused (4xx/5xx other than below),
 * 2 usage error, 3 berthd cannot be reached, 4 not authenticated or not
 * allowed (401/403).
 *
 * --json prints exactly one JSON document for every command, success or
 * not: the API's answer (or, for commands made of several requests, one
 * document gathering them), the API's error document, or one netctl
 * writes itself ({"error":{"status":null,"code":"usage"|"unreachable",
 * "message"}}). Everything goes through out_set(); main prints it once.
 * Only `egress log --follow` and `sandbox watch` stream (one object a
 * line); `sandbox cat` prints the file's bytes and takes no --json.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli.h"
#include "valid.h"

#include <jansson.h>
#include <openssl/evp.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <time.h>

#ifndef BERTH_STATE_DIR_DEFAULT
#define BERTH_STATE_DIR_DEFAULT "/var/lib/berth"
#endif

enum {
	EXIT_OK = 0,
	EXIT_REFUSED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
	EXIT_DENIED = 4
};

/* Options, and which commands may take them. */
enum {
	O_ADDRESS = 1 << 0,
	O_HOST_HEADER = 1 << 1,
	O_PRIVATE = 1 << 2,
	O_PUBLIC = 1 << 3,
	O_HOST = 1 << 4,
	O_TTL = 1 << 5,
	O_ADMIN = 1 << 6,
	O_SANDBOX = 1 << 7,
	O_NAME = 1 << 8,
	O_DEFAULT_MODE = 1 << 9,
	O_MAX_MODE = 1 << 10,
	O_DENY = 1 << 11,
	O_ALLOW = 1 << 12,
	O_MAX_RULES = 1 << 13,
	O_CONN_LIMIT = 1 << 14,
	O_NEW_CONN_RATE = 1 << 15,
	O_FOLLOW = 1 << 16,
	O_PERMIT = 1 << 17,
	O_MEMORY = 1 << 18,
	O_VCPUS = 1 << 19,
	O_DISK = 1 << 20,
	O_TEMPLATE = 1 << 21,
	O_IDLE_PAUSE = 1 << 22,
	O_IDLE_SUSPEND = 1 << 23,
	O_MAX_LIFETIME = 1 << 24,
	O_ENV = 1 << 25,
	O_CWD = 1 << 26,
	O_TIMEOUT = 1 << 27,
	O_USER = 1 << 28,
	O_TTY = 1 << 29
};
/* past an int's bits */
#define O_DETACH	(1ULL << 30)
#define O_KEEP_AWAKE	(1ULL << 31)
#define O_RING		(1ULL << 32)
#define O_SIGNAL	(1ULL << 33)
#define O_OFFSET	(1ULL << 34)
#define O_LIMIT		(1ULL << 35)
#define O_PARENTS	(1ULL << 36)
#define O_MODE		(1ULL << 37)
#define O_RECURSIVE	(1ULL << 38)
#define O_OVERWRITE	(1ULL << 39)
#define O_LENGTH	(1ULL << 40)
#define O_FROM		(1ULL << 41)
#define O_LAST		O_FROM

/* What only a microVM sandbox takes (not one with --address). */
#define O_VM_ONLY (O_MEMORY | O_VCPUS | O_DISK | O_TEMPLATE | O_IDLE_PAUSE | \
	O_IDLE_SUSPEND | O_MAX_LIFETIME)

/* long-only options */
enum { OPT_MAX_RULES = 256, OPT_CONN_LIMIT, OPT_NEW_CONN_RATE, OPT_FOLLOW,
	OPT_PERMIT, OPT_MEMORY, OPT_VCPUS, OPT_DISK, OPT_TEMPLATE,
	OPT_IDLE_PAUSE, OPT_IDLE_SUSPEND, OPT_MAX_LIFETIME, OPT_ENV, OPT_CWD,
	OPT_TIMEOUT, OPT_USER, OPT_TTY, OPT_DETACH, OPT_KEEP_AWAKE, OPT_RING,
	OPT_SIGNAL, OPT_OFFSET, OPT_LIMIT, OPT_MODE, OPT_OVERWRITE,
	OPT_LENGTH, OPT_FROM };	/* --parents and --recursive are -p and -r */

#define MAX_RULE_OPTS 64

struct opts {
	const char *state_dir;
	int json;
	uint64_t given;		/* O_* seen */
	const char *address;
	const char *host_header;
	char host[PX_HOSTNAME_MAX + 2];
	int private_;
	const char *ttl;
	const char *sandbox;
	const char *name;
	const char *default_mode;
	const char *max_mode;
	const char *deny[MAX_RULE_OPTS];
	int ndeny;
	const char *allow[MAX_RULE_OPTS];
	int nallow;
	const char *permit[MAX_RULE_OPTS];
	int npermit;
	const char *max_rules, *conn_limit, *new_conn_rate;
	const char *memory, *vcpus, *disk, *template_;
	const char *idle_pause, *idle_suspend, *max_lifetime;
	const char *env[MAX_RULE_OPTS];
	int nenv;
	const char *cwd, *timeout;
	const char *user;
	int tty;
	const char *ring, *signal, *offset;
	const char *limit, *mode, *length;
	const char *from;
};

struct cmd;
typedef int (*cmd_fn)(const struct cmd *, struct opts *, char **args, int n);

struct cmd {
	const char *noun;
	const char *verb;	/* NULL: the noun alone */
	const char *alias;	/* another verb for the same command */
	const char *args;	/* usage after "netctl noun verb" */
	int min, max;		/* positional arguments */
	uint64_t opts;		/* O_* allowed */
	cmd_fn fn;
	const char *help;
};

static const char *progname = "netctl";
static char sock_path[4096];
static struct cli_target tgt;
static json_t *out_doc;		/* what --json prints at the end */
static int out_streamed;	/* the command printed its own lines */
static char last_fail[1024];	/* the last error line, for --json */

static void __attribute__((format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_fail, sizeof(last_fail), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", progname, last_fail);
}

/* The document --json prints (reference stolen; replaces the last). */
static void
out_set(json_t *doc)
{
	json_decref(out_doc);
	out_doc = doc;
}

/* An error document of netctl's own (no HTTP status behind it). */
static void
out_error(const char *code, const char *msg)
{
	out_set(json_pack("{s:{s:n, s:s, s:s}}", "error", "status", "code",
	    code, "message", msg));
}

/*
 * API fields that stand for a command-line option: an error about
 * memory_mib is about --memory to the one who typed it.
 */
static const char *
field_option(const char *field)
{
	static const char *const map[][2] = {
		{ "memory_mib", "--memory" }, { "vcpus", "--vcpus" },
		{ "disk_mib", "--disk" }, { "template", "--template" },
		{ "idle_pause", "--idle-pause" },
		{ "idle_suspend", "--idle-suspend" },
		{ "max_lifetime", "--max-lifetime" },
		{ "address", "--address" },
	};
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i][0], field) == 0)
			return map[i][1];
	return field;
}

/* ---- talking to berthd ---- */

/* Prints the API's error as one line; returns the exit code for it. */
static int
api_error(const struct cli_response *r, const struct opts *o)
{
	json_t *doc, *e;
	const char *msg = NULL, *field = NULL;

	doc = json_loadb(r->body, r->len, 0, NULL);
	if ((e = json_object_get(doc, "error")) != NULL) {
		msg = json_string_value(json_object_get(e, "message"));
		field = json_string_value(json_object_get(e, "field"));
	}
	if (msg != NULL && field != NULL)
		fail("%s: %s", field_option(field), msg);
	else if (msg != NULL)
		fail("%s", msg);
	else
		fail("berthd answered HTTP %d", r->status);
	if (json_is_object(e))
		out_set(doc);
	else {
		json_decref(doc);
		out_set(json_pack("{s:{s:i, s:s, s:s}}", "error", "status",
		    r->status, "code", "http", "message", last_fail));
	}
	return r->status == 401 || r->status == 403 ? EXIT_DENIED :
	    EXIT_REFUSED;
}

/*
 * One request. On a 2xx answer returns EXIT_OK with *doc the parsed JSON
 * (NULL for an empty body), which is also what --json will print unless
 * the command sets another. Otherwise prints the one-line error, makes
 * the error document --json's, and returns the exit code.
 */
static int
call(const struct opts *o, const char *method, const char *target,
    json_t *body, json_t **doc)
{
	struct cli_response r;
	char err[512], *text = NULL;
	int unreachable, rc;
	json_error_t jerr;

	*doc = NULL;
	if (body != NULL && (text = json_dumps(body, JSON_COMPACT)) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	rc = cli_http_do(&tgt, method, target, text, &r, &unreachable, err,
	    sizeof(err));
	free(text);
	if (rc == -1) {
		fail("%s", err);
		out_error("unreachable", err);
		return EXIT_UNREACHABLE;
	}
	if (r.status < 200 || r.status > 299) {
		rc = api_error(&r, o);
		cli_response_free(&r);
		return rc;
	}
	if (r.len > 0) {
		if ((*doc = json_loadb(r.body, r.len, 0, &jerr)) == NULL) {
			fail("berthd answered something that is not JSON: %s",
			    jerr.text);
			out_error("unreachable", last_fail);
			cli_response_free(&r);
			return EXIT_UNREACHABLE;
		}
		out_set(json_incref(*doc));
	} else
		out_set(NULL);
	cli_response_free(&r);
	return EXIT_OK;
}

static int call_list(const struct opts *, const char *, const char *,
    json_t **);

/* ---- output helpers ---- */

static const char *
jstr(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "-";
}

static const char *
jtime(json_t *obj, const char *key, char *buf, size_t len)
{
	json_t *v = json_object_get(obj, key);
	time_t t;
	struct tm tm;

	if (!json_is_integer(v))
		return "-";
	t = (time_t)json_integer_value(v);
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return "-";
	return buf;
}

#define MAX_COLS 8

struct table {
	int ncols;
	size_t width[MAX_COLS];
	char **cells;		/* rows * ncols strings */
	size_t nrows, cap;
};

static void
table_add(struct table *t, const char *const *row)
{
	int i;

	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **nc = realloc(t->cells, cap * (size_t)t->ncols *
		    sizeof(char *));

		if (nc == NULL)
			return;
		t->cells = nc;
		t->cap = cap;
	}
	for (i = 0; i < t->ncols; i++) {
		char *s = strdup(row[i] ? row[i] : "-");

		t->cells[t->nrows * (size_t)t->ncols + (size_t)i] = s;
		if (s != NULL && strlen(s) > t->width[i])
			t->width[i] = strlen(s);
	}
	t->nrows++;
}

static void
table_print(struct table *t)
{
	size_t r;
	int i;

	for (r = 0; r < t->nrows; r++) {
		for (i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * (size_t)t->ncols + (size_t)i];

			if (s == NULL)
				s = "?";
			if (i == t->ncols - 1)
				printf("%s\n", s);
			else
				printf("%-*s  ", (int)t->width[i], s);
		}
		free(t->cells[r * (size_t)t->ncols]);
		for (i = 1; i < t->ncols; i++)
			free(t->cells[r * (size_t)t->ncols + (size_t)i]);
	}
	free(t->cells);
	t->cells = NULL;
	t->nrows = t->cap = 0;
}

/* Ports as a table; with_sandbox adds the SANDBOX column. */
static void
print_ports(json_t *ports, int with_sandbox, const char *indent)
{
	struct table t = { 0 };
	const char *row[MAX_COLS];
	char portbuf[8];
	json_t *p;
	size_t i;
	int hosts = 0, n;

	json_array_foreach(ports, i, p)
		if (json_is_string(json_object_get(p, "host")))
			hosts = 1;
	n = 0;
	if (indent[0] != '\0')
		row[n++] = "";
	if (with_sandbox)
		row[n++] = "SANDBOX";
	row[n++] = "PORT";
	row[n++] = "VISIBILITY";
	row[n++] = "HOST-HEADER";
	if (hosts)
		row[n++] = "HOST";
	row[n++] = "URL";
	t.ncols = n;
	table_add(&t, row);
	json_array_foreach(ports, i, p) {
		n = 0;
		if (indent[0] != '\0')
			row[n++] = "";
		if (with_sandbox)
			row[n++] = jstr(p, "sandbox");
		snprintf(portbuf, sizeof(portbuf), "%d",
		    (int)json_integer_value(json_object_get(p, "port")));
		row[n++] = portbuf;
		row[n++] = jstr(p, "visibility");
		row[n++] = jstr(p, "host_header");
		if (hosts)
			row[n++] = jstr(p, "host");
		row[n++] = jstr(p, "url");
		table_add(&t, row);
	}
	table_print(&t);
}

/* ---- argument checks ---- */

static int
check_id(const char *id)
{
	if (px_valid_sandbox_id(id, strlen(id)))
		return 0;
	fail("invalid sandbox id '%s': use 1-%d lower-case letters, digits or "
	    "'-', starting with a letter or digit", id, PX_SANDBOX_ID_MAX);
	return -1;
}

static int
check_port(const char *s, unsigned *port)
{
	if ((*port = px_parse_port(s, strlen(s))) != 0)
		return 0;
	fail("invalid port '%s': use a number from 1 to 65535 (no sign, no "
	    "leading zero)", s);
	return -1;
}

/* ---- commands ---- */

static int
c_status(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *doc;
	int rc;

	if ((rc = call(o, "GET", "/v1/health", NULL, &doc)) != EXIT_OK)
		return rc;
	if (!o->json) {
		printf("berthd is %s (%s %s)\n",
		    strcmp(jstr(doc, "status"), "ok") == 0 ? "up" :
		    jstr(doc, "status"), tgt.url ? "control API" :
		    "control socket", tgt.url ? tgt.url : sock_path);
		if (json_is_string(json_object_get(doc, "egress")))
			printf("egress: %s\n", jstr(doc, "egress"));
		if (json_is_string(json_object_get(doc, "vms")))
			printf("vms: %s\n", jstr(doc, "vms"));
		if (json_is_string(json_object_get(doc, "template")))
			printf("default template: %s\n", jstr(doc, "template"));
	}
	json_decref(doc);
	return EXIT_OK;
}

/*
 * A VM-backed sandbox answers "creating" at once; its VM boots for a few
 * seconds. Wait for the outcome (up to 5 minutes) so that the command
 * ends running or with the reason it failed; *doc keeps the token.
 */
static int
wait_created(struct opts *o, const char *id, json_t **doc)
{
	char target[128];
	int i;

	snprintf(target, sizeof(target), "/v1/sandboxes/%s", id);
	for (i = 0; i < 1200; i++) {
		json_t *now = NULL;
		const char *st;
		int rc;

		if ((rc = call(o, "GET", target, NULL, &now)) != EXIT_OK) {
			json_decref(now);
			return rc;
		}
		st = jstr(now, "state");
		if (strcmp(st, "creating") != 0) {
			json_object_set(*doc, "state", json_object_get(now, "state"));
			json_object_set(*doc, "address", json_object_get(now, "address"));
			json_decref(now);
			if (strcmp(st, "running") == 0)
				return EXIT_OK;
			fail("sandbox %s is %s: see 'netctl sandbox events %s'", id, st, id);
			return EXIT_REFUSED;
		}
		json_decref(now);
		usleep(250000);
	}
	fail("sandbox %s is still being created: see 'netctl sandbox show %s'", id, id);
	return EXIT_REFUSED;
}

/* netctl sandbox fork SRC NEW [NEW...]: the forks, each waited for until
 * it runs; their tokens printed once (or the API's document). */
static int
c_sandbox_fork(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc = NULL, *ids, *f;
	char target[128];
	size_t i;
	int rc = EXIT_OK, r;

	(void)c;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	ids = json_array();
	for (i = 1; i < (size_t)n; i++) {
		if (check_id(a[i]) == -1) {
			json_decref(ids);
			return EXIT_USAGE;
		}
		json_array_append_new(ids, json_string(a[i]));
	}
	body = json_pack("{s:o}", "ids", ids);
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/fork", a[0]);
	r = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (r != EXIT_OK) {
		if (doc != NULL)
			out_set(doc);
		return r;
	}
	json_array_foreach(json_object_get(doc, "forks"), i, f) {
		const char *id = jstr(f, "id");

		if ((r = wait_created(o, id, &f)) != EXIT_OK)
			rc = r;
		if (!o->json)
			printf("sandbox %s forked from %s (%s, %s)\ntoken: %s\n"
			    "# its token (id %s) is shown only now\n", id, a[0],
			    jstr(f, "address"), jstr(f, "state"),
			    jstr(f, "token"), jstr(f, "token_id"));
	}
	out_set(doc);
	return rc;
}

static int
check_name(const char *what, const char *name)
{
	if (px_valid_sandbox_id(name, strlen(name)))
		return 0;
	fail("invalid %s name '%s': use 1-%d lower-case letters, digits or "
	    "'-', starting with a letter or digit", what, name,
	    PX_SANDBOX_ID_MAX);
	return -1;
}

/* 1.5 GiB, 312 MiB, 4.0 KiB: a size for people (static buffer) */
static const char *
human_bytes(json_int_t v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	static char buf[32];
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, sizeof(buf), "%lld B", (long long)v);
	else
		snprintf(buf, sizeof(buf), d < 10 ? "%.1f %s" : "%.0f %s", d,
		    unit[u]);
	return buf;
}

static int delete_one(struct opts *, const char *, const char *, json_t *);

/* netctl sandbox create NEW --from ID:NAME: a fork of that checkpoint
 * (the API's fork with "checkpoint"), waited for until it runs. */
static int
sandbox_from(struct opts *o, const char *id)
{
	char src[PX_SANDBOX_ID_MAX + 1], target[128];
	const char *colon = strchr(o->from, ':');
	json_t *body, *doc = NULL, *f;
	int rc;

	if (o->given & (O_VM_ONLY | O_ADDRESS)) {
		fail("--from: the sandbox is made from the checkpoint, with its "
		    "template and sizes; --address, --memory, --vcpus, --disk, "
		    "--template and the idle options do not apply");
		return EXIT_USAGE;
	}
	if (colon == NULL || colon == o->from ||
	    (size_t)(colon - o->from) > PX_SANDBOX_ID_MAX ||
	    !px_valid_sandbox_id(colon + 1, strlen(colon + 1))) {
		fail("--from: expected <sandbox>:<checkpoint>, not '%s'",
		    o->from);
		return EXIT_USAGE;
	}
	snprintf(src, sizeof(src), "%.*s", (int)(colon - o->from), o->from);
	if (check_id(src) == -1)
		return EXIT_USAGE;
	body = json_pack("{s:[s], s:s}", "ids", id, "checkpoint", colon + 1);
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/fork", src);
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc != EXIT_OK) {
		if (doc != NULL)
			out_set(doc);
		return rc;
	}
	f = json_array_get(json_object_get(doc, "forks"), 0);
	if (f == NULL) {
		fail("berthd's answer names no new sandbox");
		json_decref(doc);
		return EXIT_REFUSED;
	}
	rc = wait_created(o, id, &f);
	if (!o->json)
		printf("sandbox %s created from checkpoint %s of %s (%s, %s)\n"
		    "token: %s\n# its token (id %s) is shown only now\n", id,
		    colon + 1, src, jstr(f, "address"), jstr(f, "state"),
		    jstr(f, "token"), jstr(f, "token_id"));
	out_set(doc);
	return rc;
}

/*
 * netctl sandbox checkpoint|restore ID NAME: POST {"KEY": NAME} to
 * /v1/sandboxes/ID/SUB; the answer, when it is a success and --json is
 * not given, printed by say().
 */
static int
sandbox_post_checkpoint(struct opts *o, char **a, const char *sub,
    const char *key, void (*say)(char **, json_t *))
{
	char target[128];
	json_t *body, *doc = NULL;
	int rc;

	if (check_id(a[0]) == -1 || check_name("checkpoint", a[1]) == -1)
		return EXIT_USAGE;
	body = json_pack("{s:s}", key, a[1]);
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/%s", a[0], sub);
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		say(a, doc);
	out_set(doc);
	return rc;
}

static void
say_checkpoint(char **a, json_t *doc)
{
	printf("checkpoint %s of sandbox %s taken: %s on disk%s%s\n",
	    a[1], a[0], human_bytes(json_integer_value(json_object_get(
	    doc, "size_bytes"))), jstr(doc, "detail")[0] != '-' ?
	    "; " : "", jstr(doc, "detail")[0] != '-' ?
	    jstr(doc, "detail") : "");
}

/* netctl sandbox checkpoint ID NAME: taken, then its size printed. */
static int
c_sandbox_checkpoint(const struct cmd *c, struct opts *o, char **a, int n)
{
	(void)c;
	(void)n;
	return sandbox_post_checkpoint(o, a, "checkpoints", "name",
	    say_checkpoint);
}

/* netctl checkpoint ls ID */
static int
c_checkpoint_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc = NULL, *k;
	size_t i;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/checkpoints", a[0]);
	rc = call(o, "GET", target, NULL, &doc);
	if (rc == EXIT_OK && !o->json) {
		printf("%-24s %-20s %10s\n", "NAME", "CREATED", "SIZE");
		json_array_foreach(json_object_get(doc, "checkpoints"), i, k) {
			char when[32];
			time_t t = (time_t)json_integer_value(json_object_get(k,
			    "created"));
			struct tm tm;

			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S",
			    gmtime_r(&t, &tm));
			printf("%-24s %-20s %10s\n", jstr(k, "name"), when,
			    human_bytes(json_integer_value(json_object_get(k,
			    "size_bytes"))));
		}
	}
	out_set(doc);
	return rc;
}

/* netctl checkpoint rm ID NAME */
static int
c_checkpoint_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[192], done[192];

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_name("checkpoint", a[1]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/checkpoints/%s",
	    a[0], a[1]);
	snprintf(done, sizeof(done), "checkpoint %s of sandbox %s removed",
	    a[1], a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:s}", "sandbox",
	    a[0], "removed", a[1]));
}

static void
say_restore(char **a, json_t *doc)
{
	printf("sandbox %s restored to checkpoint %s (%s)\n", a[0], a[1],
	    jstr(doc, "state"));
}

/* netctl sandbox restore ID NAME: back to the checkpoint, running. */
static int
c_sandbox_restore(const struct cmd *c, struct opts *o, char **a, int n)
{
	(void)c;
	(void)n;
	return sandbox_post_checkpoint(o, a, "restore", "checkpoint",
	    say_restore);
}

/* A size option: a whole number from 1 up (berthd checks the range). */
static int
size_arg(const char *opt, const char *s, json_t *body, const char *key)
{
	char *end;
	long long v;

	if (s == NULL)
		return 0;
	v = strtoll(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || v < 1 ||
	    v > 1LL << 40) {
		fail("%s: expected a whole number%s, not '%s'", opt,
		    strcmp(key, "vcpus") == 0 ? "" : " of MiB", s);
		return -1;
	}
	json_object_set_new(body, key, json_integer(v));
	return 0;
}

/*
 * A duration option: "90s", "10m", "2h", "1d", "never", or (default_ok)
 * "default", which sends null (berth.conf's value). berthd checks the
 * range.
 */
static int
span_arg(const char *opt, const char *s, int default_ok, json_t *body,
    const char *key)
{
	const char *p = s;

	if (s == NULL)
		return 0;
	if (strcmp(s, "default") == 0 && default_ok) {
		json_object_set_new(body, key, json_null());
		return 0;
	}
	if (strcmp(s, "never") != 0) {
		while (isdigit((unsigned char)*p))
			p++;
		if (p == s || (*p != '\0' && strcmp(p, "ms") != 0 &&
		    strcmp(p, "s") != 0 && strcmp(p, "m") != 0 &&
		    strcmp(p, "h") != 0 && strcmp(p, "d") != 0)) {
			fail("%s: expected a duration (90s, 10m, 2h, 1d), 'never'"
			    "%s, not '%s'", opt, default_ok ? " or 'default'" : "",
			    s);
			return -1;
		}
	}
	json_object_set_new(body, key, json_string(s));
	return 0;
}

/* The idle options of create and set into body; -1 after saying why. */
static int
idle_args(const struct opts *o, int default_ok, json_t *body)
{
	return span_arg("--idle-pause", o->idle_pause, default_ok, body,
	    "idle_pause") == -1 || span_arg("--idle-suspend", o->idle_suspend,
	    default_ok, body, "idle_suspend") == -1 ||
	    span_arg("--max-lifetime", o->max_lifetime, default_ok, body,
	    "max_lifetime") == -1 ? -1 : 0;
}

static int
check_template_name(const char *name)
{
	if (px_valid_sandbox_id(name, strlen(name)) && strlen(name) <= 32)
		return 0;
	fail("invalid template name '%s': use 1-32 lower-case letters, digits "
	    "or '-', starting with a letter or digit", name);
	return -1;
}

static int
c_sandbox_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (o->from != NULL)
		return sandbox_from(o, a[0]);
	if (o->address != NULL && !px_valid_ip(o->address)) {
		fail("--address: not an IP address: '%s'", o->address);
		return EXIT_USAGE;
	}
	if (o->address != NULL && (o->given & O_VM_ONLY)) {
		fail("--memory, --vcpus, --disk, --template and the idle options "
		    "apply to a microVM sandbox, not to an external one "
		    "(--address)");
		return EXIT_USAGE;
	}
	if (o->template_ != NULL && check_template_name(o->template_) == -1)
		return EXIT_USAGE;
	body = json_pack("{s:s}", "id", a[0]);
	if (o->address != NULL)
		json_object_set_new(body, "address", json_string(o->address));
	if (o->template_ != NULL)
		json_object_set_new(body, "template", json_string(o->template_));
	if (size_arg("--memory", o->memory, body, "memory_mib") == -1 ||
	    size_arg("--vcpus", o->vcpus, body, "vcpus") == -1 ||
	    size_arg("--disk", o->disk, body, "disk_mib") == -1 ||
	    idle_args(o, 0, body) == -1) {
		json_decref(body);
		return EXIT_USAGE;
	}
	rc = call(o, "POST", "/v1/sandboxes", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && o->address == NULL)
		rc = wait_created(o, a[0], &doc);
	/* The token is shown only now: print it even when the VM failed. */
	if (doc != NULL && !o->json && jstr(doc, "token")[0] != '-')
		printf("sandbox %s %s (%s, %s)\ntoken: %s\n# its token "
		    "(id %s) is shown only now\n", jstr(doc, "id"),
		    o->address ? "added" : "created",
		    jstr(doc, "address"), jstr(doc, "state"), jstr(doc, "token"),
		    jstr(doc, "token_id"));
	if (doc != NULL)
		out_set(doc);
	return rc;
}

/*
 * DELETE of target; on success prints done (a line), or with --json
 * what (reference stolen), since the API answers 204 without a body.
 */
static int
delete_one(struct opts *o, const char *target, const char *done,
    json_t *what)
{
	json_t *doc;
	int rc;

	rc = call(o, "DELETE", target, NULL, &doc);
	if (rc == EXIT_OK && !o->json && done != NULL)
		puts(done);
	if (rc == EXIT_OK)
		out_set(what);
	else
		json_decref(what);
	json_decref(doc);
	return rc;
}

static int
c_sandbox_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s", a[0]);
	snprintf(done, sizeof(done), "sandbox %s removed", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "id", a[0],
	    "removed", 1));
}

/*
 * Fleet mode: marks doc's sandboxes with this host's id and adds the
 * other hosts' sandboxes (host_up false: the host's lease expired).
 * 0 when berthd is not in fleet mode (doc unchanged), 1 when merged.
 */
static int
fleet_merge(json_t *doc)
{
	json_t *fl = NULL, *sb, *all = json_object_get(doc, "sandboxes");
	const char *self;
	char err[256];
	int status = 0, unreachable;
	size_t i;

	if (cli_api(&tgt, "GET", "/v1/fleet/sandboxes", NULL, &status, &fl,
	    &unreachable, err, sizeof(err)) != 0 || status != 200 ||
	    (self = json_string_value(json_object_get(fl, "self"))) == NULL) {
		json_decref(fl);
		return 0;
	}
	json_array_foreach(all, i, sb)
		json_object_set_new(sb, "host", json_string(self));
	json_array_foreach(json_object_get(fl, "sandboxes"), i, sb) {
		const char *h = json_string_value(json_object_get(sb, "host"));

		if (h == NULL || strcmp(h, self) == 0)
			continue;
		json_array_append_new(all, json_pack("{s:O,s:O,s:s,s:O,s:n,s:n,s:n}",
		    "id", json_object_get(sb, "id"), "state", json_object_get(sb, "state"),
		    "host", h, "host_up", json_object_get(sb, "host_up"), "address",
		    "external", "created"));
	}
	json_decref(fl);
	return 1;
}

static int
c_sandbox_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[6] = { "ID", "STATE", "ADDRESS", "EXTERNAL", "CREATED", "HOST" };
	char tbuf[32], hbuf[64];
	const struct opts q = *o;
	json_t *doc, *sb;
	size_t i;
	int rc, fleet;

	if ((rc = call_list(&q, "/v1/sandboxes", "sandboxes", &doc)) != EXIT_OK) {
		json_decref(doc);
		return rc;
	}
	fleet = fleet_merge(doc);
	if (o->json) {
		out_set(doc);
		return EXIT_OK;
	}
	t.ncols = fleet ? 6 : 5;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "sandboxes"), i, sb) {
		row[0] = jstr(sb, "id");
		row[1] = jstr(sb, "state");
		row[2] = jstr(sb, "address");
		row[3] = json_is_boolean(json_object_get(sb, "external")) ?
		    json_is_true(json_object_get(sb, "external")) ? "yes" : "no" : "-";
		row[4] = jtime(sb, "created", tbuf, sizeof(tbuf));
		snprintf(hbuf, sizeof(hbuf), "%s%s", jstr(sb, "host"),
		    json_is_false(json_object_get(sb, "host_up")) ? " (down)" : "");
		row[5] = hbuf;
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

static int
c_fleet_hosts(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[6] = { "HOST", "STATE", "EDGE", "FLEET", "SANDBOXES", "CAPACITY" };
	char nbuf[16], cbuf[16];
	json_t *doc, *h;
	size_t i;
	int rc;

	if ((rc = call(o, "GET", "/v1/fleet/hosts", NULL, &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	printf("this host: %s, etcd: %s\n", jstr(doc, "self"), jstr(doc, "etcd"));
	t.ncols = 6;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "hosts"), i, h) {
		row[0] = jstr(h, "id");
		row[1] = json_is_true(json_object_get(h, "up")) ?
		    json_is_true(json_object_get(h, "self")) ? "up (this host)" : "up" :
		    json_is_true(json_object_get(h, "self")) ? "unregistered (this host)" :
		    "down";
		row[2] = jstr(h, "edge");
		row[3] = jstr(h, "fleet");
		snprintf(nbuf, sizeof(nbuf), "%lld",
		    (long long)json_integer_value(json_object_get(h, "sandboxes")));
		row[4] = nbuf;
		snprintf(cbuf, sizeof(cbuf), "%lld",
		    (long long)json_integer_value(json_object_get(h, "capacity")));
		row[5] = json_integer_value(json_object_get(h, "capacity")) > 0 ? cbuf : "-";
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

/* A size of a VM-backed sandbox, "-" when berth did not record it. */
static const char *
jnum(json_t *obj, const char *key, const char *unit, char *buf, size_t len)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v))
		return "-";
	snprintf(buf, len, "%lld%s", (long long)json_integer_value(v), unit);
	return buf;
}

/* What only a VM-backed sandbox has: resources, template, idle policy. */
static void
print_vm(json_t *doc)
{
	static const char *const idle[][2] = {
		{ "idle_pause", "idle-pause:" },
		{ "idle_suspend", "idle-suspend:" },
		{ "max_lifetime", "max-lifetime:" },
	};
	char b1[32], b2[32], b3[32], key[64];
	size_t i;

	printf("template:  %s\n", jstr(doc, "template"));
	printf("resources: %s, %s vCPU%s, disk %s\n",
	    jnum(doc, "memory_mib", " MiB", b1, sizeof(b1)),
	    jnum(doc, "vcpus", "", b2, sizeof(b2)),
	    json_integer_value(json_object_get(doc, "vcpus")) == 1 ? "" : "s",
	    jnum(doc, "disk_mib", " MiB", b3, sizeof(b3)));
	for (i = 0; i < sizeof(idle) / sizeof(idle[0]); i++) {
		snprintf(key, sizeof(key), "effective_%s", idle[i][0]);
		printf("%-14s %s%s\n", idle[i][1], jstr(doc, key),
		    json_is_string(json_object_get(doc, idle[i][0])) ? "" :
		    " (berth.conf's)");
	}
}

static int
c_sandbox_show(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], tbuf[32];
	json_t *doc, *ports;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	printf("id:        %s\n", jstr(doc, "id"));
	printf("state:     %s\n", jstr(doc, "state"));
	if (json_string_value(json_object_get(doc, "standby")) != NULL)
		printf("standby:   %s (a VMM waits with the snapshot loaded)\n",
		    jstr(doc, "standby"));
	printf("address:   %s\n", jstr(doc, "address"));
	printf("external:  %s\n", json_is_true(json_object_get(doc,
	    "external")) ? "yes" : "no");
	printf("created:   %s\n", jtime(doc, "created", tbuf, sizeof(tbuf)));
	if (json_object_get(doc, "template") != NULL)
		print_vm(doc);
	ports = json_object_get(doc, "ports");
	if (json_array_size(ports) == 0)
		printf("ports:     none published\n");
	else {
		printf("ports:\n");
		print_ports(ports, 0, "  ");
	}
	json_decref(doc);
	return EXIT_OK;
}

static int
c_port_publish(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	unsigned port;
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1 || check_port(a[1], &port) == -1)
		return EXIT_USAGE;
	if ((o->given & O_PRIVATE) && (o->given & O_PUBLIC)) {
		fail("--private and --public contradict each other");
		return EXIT_USAGE;
	}
	if (o->host_header != NULL && strcmp(o->host_header, "preserve") != 0 &&
	    strcmp(o->host_header, "upstream") != 0) {
		fail("--host-header: use 'preserve' or 'upstream', not '%s'",
		    o->host_header);
		return EXIT_USAGE;
	}
	if ((o->given & O_HOST) && o->host[0] != '\0' &&
	    !px_valid_hostname(o->host, strlen(o->host))) {
		fail("--host: not a valid host name: '%s' (letters, digits, "
		    "'-' and '.', no trailing dot)", o->host);
		return EXIT_USAGE;
	}
	if ((body = json_object()) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	if (o->host_header != NULL)
		json_object_set_new(body, "host_header",
		    json_string(o->host_header));
	if (o->given & (O_PRIVATE | O_PUBLIC))
		json_object_set_new(body, "visibility", json_string(
		    (o->given & O_PRIVATE) ? "private" : "public"));
	if (o->given & O_HOST)
		json_object_set_new(body, "host", json_string(o->host));
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%u", a[0], port);
	rc = call(o, "PUT", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("%s\n", jstr(doc, "url"));
	json_decref(doc);
	return rc;
}

static int
c_port_unpublish(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	unsigned port;

	if (check_id(a[0]) == -1 || check_port(a[1], &port) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%u", a[0], port);
	return delete_one(o, target, NULL, json_pack("{s:s, s:i, s:b}",
	    "sandbox", a[0], "port", (int)port, "unpublished", 1));
}

static int
c_port_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	int rc;

	if (n == 1) {
		if (check_id(a[0]) == -1)
			return EXIT_USAGE;
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports", a[0]);
	} else
		snprintf(target, sizeof(target), "/v1/ports");
	if ((rc = call_list(o, target, "ports", &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	print_ports(json_object_get(doc, "ports"), 1, "");
	json_decref(doc);
	return EXIT_OK;
}

/*
 * A whole list: follows "next" page by page (1000 rows a page) and
 * returns {key: [...all rows]} in *doc, which --json prints.
 */
static int
call_list(const struct opts *o, const char *base, const char *key,
    json_t **doc)
{
	char target[1024], after[512] = "";
	json_t *page, *all;
	const char *next;
	int rc;

	*doc = NULL;
	if ((all = json_array()) == NULL)
		return EXIT_REFUSED;
	for (;;) {
		char enc[sizeof(after) * 3];

		cli_pct_encode(after, "-._", enc, sizeof(enc));
		snprintf(target, sizeof(target), "%s%slimit=1000%s%s", base,
		    strchr(base, '?') ? "&" : "?", enc[0] ? "&after=" : "", enc);
		if ((rc = call(o, "GET", target, NULL, &page)) != EXIT_OK) {
			json_decref(page);
			json_decref(all);
			return rc;
		}
		json_array_extend(all, json_object_get(page, key));
		next = json_string_value(json_object_get(page, "next"));
		if (next == NULL || strlen(next) >= sizeof(after)) {
			json_decref(page);
			break;
		}
		snprintf(after, sizeof(after), "%s", next);
		json_decref(page);
	}
	*doc = json_pack("{s:o}", key, all);
	out_set(json_incref(*doc));
	return EXIT_OK;
}

static int
c_lifecycle(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc, *body;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/%s", a[0], c->verb);
	/* berthd answers once the VM is where it was asked to be: a boot
	 * (start, restart, resume from disk) takes seconds to minutes */
	cli_timeout_secs = 600;
	body = json_object();	/* call() does not take it */
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("sandbox %s is %s\n", a[0], jstr(doc, "state"));
	json_decref(doc);
	return rc;
}

static int
c_sandbox_events(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[6] = { "SEQ", "TIME", "OPERATION", "RESULT",
	    "DURATION", "REASON" };
	char target[128], seq[24], tbuf[40], dur[24];
	json_t *doc, *ev;
	size_t i;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/events", a[0]);
	if ((rc = call_list(o, target, "events", &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 6;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "events"), i, ev) {
		long long ms = (long long)json_integer_value(json_object_get(ev,
		    "time_ms"));
		long long d = (long long)json_integer_value(json_object_get(ev,
		    "duration_ms"));
		time_t secs = (time_t)(ms / 1000);
		struct tm tm;

		snprintf(seq, sizeof(seq), "%lld", (long long)json_integer_value(
		    json_object_get(ev, "seq")));
		if (gmtime_r(&secs, &tm) == NULL ||
		    strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
			snprintf(tbuf, sizeof(tbuf), "-");
		else
			snprintf(tbuf + strlen(tbuf), sizeof(tbuf) - strlen(tbuf),
			    ".%03lldZ", ms % 1000);
		if (d >= 0)
			snprintf(dur, sizeof(dur), "%lldms", d);
		else
			snprintf(dur, sizeof(dur), "-");
		row[0] = seq;
		row[1] = tbuf;
		row[2] = jstr(ev, "operation");
		row[3] = jstr(ev, "result");
		row[4] = dur;
		row[5] = json_string_length(json_object_get(ev, "reason")) ?
		    jstr(ev, "reason") : "-";
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

#define EXEC_STDIN_MAX	(48 * 1024)	/* base64 within the API's 64 KiB */

/* Prints one stream of an exec answer as the command wrote it. */
static void
exec_print(json_t *doc, const char *key, FILE *f)
{
	char enc_key[32];
	const char *s = json_string_value(json_object_get(doc, key));
	const char *enc;
	unsigned char *raw;
	size_t n, pad;
	int len;

	snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
	enc = json_string_value(json_object_get(doc, enc_key));
	if (s == NULL)
		return;
	if (enc == NULL || strcmp(enc, "base64") != 0) {
		fwrite(s, 1, json_string_length(json_object_get(doc, key)), f);
		return;
	}
	n = strlen(s);
	for (pad = 0; pad < 2 && pad < n && s[n - 1 - pad] == '='; pad++)
		;
	if ((raw = malloc(n / 4 * 3 + 3)) == NULL)
		return;
	if ((len = EVP_DecodeBlock(raw, (const unsigned char *)s, (int)n)) >= 0)
		fwrite(raw, 1, (size_t)len - pad, f);
	free(raw);
}

/* ---- streamed exec ---- */

static volatile sig_atomic_t got_winch;

static void
on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

/* Queues one frame of the agent's format (agent_proto.h). */
static int
frame_out(struct cli_stream *s, int type, const void *p, size_t len)
{
	unsigned char *b;
	int rc;

	if ((b = malloc(len + 5)) == NULL)
		return -1;
	b[0] = (unsigned char)(len >> 24);
	b[1] = (unsigned char)(len >> 16);
	b[2] = (unsigned char)(len >> 8);
	b[3] = (unsigned char)len;
	b[4] = (unsigned char)type;
	if (len > 0)
		memcpy(b + 5, p, len);
	rc = cli_stream_write(s, b, len + 5);
	free(b);
	return rc;
}

static void
write_all(int fd, const unsigned char *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;	/* stdout closed: the rest is dropped */
		p += n;
		len -= (size_t)n;
	}
}

/* The answer's frames so far: output printed, the end taken into *rc.
 * 1 once the end frame came. */
static int
exec_frames(struct cli_stream_resp *r, int *rc)
{
	size_t off = 0, len;
	json_t *doc, *v;
	int end = 0;

	while (!end && r->len - off >= 5) {
		len = (size_t)r->body[off] << 24 | (size_t)r->body[off + 1] <<
		    16 | (size_t)r->body[off + 2] << 8 | r->body[off + 3];
		if (r->len - off - 5 < len)
			break;
		switch (r->body[off + 4]) {
		case 'O':
			write_all(STDOUT_FILENO, r->body + off + 5, len);
			break;
		case 'R':
			write_all(STDERR_FILENO, r->body + off + 5, len);
			break;
		case 'X':
		case 'F':
			end = 1;
			doc = json_loadb((const char *)r->body + off + 5, len, 0,
			    NULL);
			if (r->body[off + 4] == 'F') {
				v = json_object_get(doc, "message");
				fail("%s", json_is_string(v) ?
				    json_string_value(v) : "exec failed");
				*rc = EXIT_REFUSED;
			} else if (json_is_true(json_object_get(doc,
			    "detached"))) {
				/* an attach's end: the client detached */
				fprintf(stderr, "%s: detached; process %lld "
				    "runs on\n", progname, (long long)
				    json_integer_value(json_object_get(doc,
				    "process")));
				*rc = EXIT_OK;
			} else {
				if (json_is_true(json_object_get(doc,
				    "timed_out")))
					fprintf(stderr, "%s: the command timed "
					    "out and was killed\n", progname);
				if ((v = json_object_get(doc, "exit_code")) !=
				    NULL && json_is_integer(v))
					*rc = (int)json_integer_value(v) & 0xff;
				else if ((v = json_object_get(doc, "signal")) !=
				    NULL && json_is_integer(v))
					*rc = 128 + ((int)json_integer_value(v) &
					    0x7f);
			}
			json_decref(doc);
			break;
		default:
			break;
		}
		off += 5 + len;
	}
	if (off > 0) {
		memmove(r->body, r->body + off, r->len - off);
		r->len -= off;
	}
	return end;
}

/*
 * netctl sandbox exec without --json: POST .../exec?stream=1, output
 * printed as it comes, stdin sent as it is read (a terminal's only with
 * --tty, then in raw mode with its size, and again on SIGWINCH).
 */
static int exec_stream_at(const char *target, json_t *body, int tty,
    int detach_keys);

static int
exec_stream(const char *id, json_t *body, int tty)
{
	char target[160];

	snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec?stream=1", id);
	return exec_stream_at(target, body, tty, 0);
}

/* The detach keys of 'sandbox attach' on a terminal: ^P ^Q (docker's). */
#define DETACH_1	0x10
#define DETACH_2	0x11

/*
 * A streamed exec or a process's attach at target: output printed as it
 * comes, stdin sent as it is read (a terminal's only with tty, then in
 * raw mode with its size, and again on SIGWINCH). detach_keys: on a
 * terminal ^P ^Q ends stdin (the attach detaches).
 */
static int
exec_stream_at(const char *target, json_t *body, int tty, int detach_keys)
{
	struct cli_stream *s;
	struct cli_stream_resp *r = NULL;
	struct termios saved, raw;
	struct sigaction sa, old_sa;
	struct pollfd pfd[2];
	struct winsize ws;
	unsigned char buf[32768];
	char err[512], sz[32], *j, sent_err[512] = "";
	int unreachable, rc = EXIT_REFUSED, in_open, is_raw = 0, k, end = 0;
	int held = 0;		/* a ^P read, not sent yet */
	ssize_t n;

	s = cli_stream_open(&tgt, "POST", target,
	    "application/vnd.berth.exec-stream", -1, &unreachable, err,
	    sizeof(err));
	if (s == NULL) {
		fail("%s", err);
		out_error("unreachable", err);
		return EXIT_UNREACHABLE;
	}
	if ((j = json_dumps(body, JSON_COMPACT)) == NULL ||
	    frame_out(s, 'J', j, strlen(j)) < 0) {
		free(j);
		cli_stream_close(s);
		fail("out of memory");
		return EXIT_REFUSED;
	}
	free(j);
	in_open = tty || !isatty(STDIN_FILENO);
	if (!in_open)
		frame_out(s, 'I', NULL, 0);
	if (tty && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO,
	    &saved) == 0) {
		raw = saved;
		cfmakeraw(&raw);
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
			is_raw = 1;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_winch;	/* no SA_RESTART: poll wakes */
		sigemptyset(&sa.sa_mask);
		sigaction(SIGWINCH, &sa, &old_sa);
	}
	while (!end) {
		if (got_winch) {
			got_winch = 0;
			if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 &&
			    ws.ws_row > 0) {
				snprintf(sz, sizeof(sz), "%u %u",
				    (unsigned)ws.ws_row, (unsigned)ws.ws_col);
				frame_out(s, 'W', sz, strlen(sz));
			}
		}
		/* A command that ended at once: berthd may have answered
		 * all and closed before the stdin frames went out. What it
		 * sent is read before the broken send counts. */
		if (sent_err[0] == '\0' &&
		    cli_stream_flush(s, err, sizeof(err)) < 0) {
			snprintf(sent_err, sizeof(sent_err), "%s", err);
			in_open = 0;
		}
		pfd[0].fd = cli_stream_fd(s);
		pfd[0].events = POLLIN | (cli_stream_pending(s) &&
		    sent_err[0] == '\0' ? POLLOUT : 0);
		pfd[0].revents = 0;
		/* stdin waits while berthd has not taken what was read */
		pfd[1].fd = in_open && cli_stream_pending(s) < 1024 * 1024 ?
		    STDIN_FILENO : -1;
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		if (!cli_stream_readable(s) && poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail("poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(STDIN_FILENO, buf + held, sizeof(buf) - 1);
			if (n > 0 && detach_keys && is_raw) {
				unsigned char *d;
				size_t m = (size_t)n + (size_t)held;

				held = 0;
				d = memchr(buf, DETACH_1, m);
				if (d != NULL && d + 1 < buf + m &&
				    d[1] == DETACH_2) {
					/* what came before, then the end */
					if (d > buf)
						frame_out(s, 'I', buf,
						    (size_t)(d - buf));
					in_open = 0;
					frame_out(s, 'I', NULL, 0);
					continue;
				}
				if (buf[m - 1] == DETACH_1) {
					held = 1;	/* its pair may follow */
					m--;
				}
				if (m > 0)
					frame_out(s, 'I', buf, m);
				if (held)
					buf[0] = DETACH_1;
			} else if (n > 0)
				frame_out(s, 'I', buf, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				in_open = 0;
				frame_out(s, 'I', NULL, 0);
			}
		}
		if (!cli_stream_readable(s) && !(pfd[0].revents &
		    (POLLIN | POLLHUP | POLLERR)))
			continue;
		if ((k = cli_stream_recv(s, &r, err, sizeof(err))) < 0) {
			fail("%s", sent_err[0] ? sent_err : err);
			rc = EXIT_UNREACHABLE;
			break;
		}
		if (r->status != 0 && r->status != 200) {
			if (k == 1) {	/* an API error, in JSON */
				struct cli_response e;

				e.status = r->status;
				e.body = (char *)r->body;
				e.len = r->len;
				rc = api_error(&e, NULL);
				end = 1;
			}
			continue;
		}
		if (r->status == 200 && exec_frames(r, &rc))
			end = 1;
		else if (k == 1) {
			if (sent_err[0] != '\0') {
				fail("%s", sent_err);
				rc = EXIT_UNREACHABLE;
			} else
				fail("berthd ended the answer without the "
				    "command's end");
			end = 1;
		}
	}
	if (is_raw) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		sigaction(SIGWINCH, &old_sa, NULL);
	}
	cli_stream_close(s);
	return rc;
}

/* ---- netctl sandbox cp ---- */

/* "ID:/PATH": the id and the path, 1; a local path: 0; -1 after saying
 * what is wrong. */
static int
cp_side(const char *arg, char *id, size_t idlen, const char **path)
{
	const char *colon = strchr(arg, ':'), *slash = strchr(arg, '/');
	size_t n;

	if (colon == NULL || (slash != NULL && slash < colon)) {
		*path = arg;
		return 0;
	}
	n = (size_t)(colon - arg);
	if (n == 0 || n >= idlen) {
		fail("'%s': a sandbox side is ID:/PATH", arg);
		return -1;
	}
	memcpy(id, arg, n);
	id[n] = '\0';
	if (check_id(id) == -1)
		return -1;
	*path = colon + 1;
	if (**path != '/') {
		fail("'%s': the path in the sandbox must be absolute", arg);
		return -1;
	}
	return 1;
}

/* Waits until the stream can go on (sent some, or has answered). */
static int
cp_wait(struct cli_stream *s, int want_out)
{
	struct pollfd pfd;

	if (cli_stream_readable(s))
		return 0;
	pfd.fd = cli_stream_fd(s);
	pfd.events = POLLIN | (want_out ? POLLOUT : 0);
	pfd.revents = 0;
	while (poll(&pfd, 1, (int)cli_timeout_secs * 1000) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

/* Reads the answer to its end; EXIT_OK with *r complete, or the error
 * printed. For a GET, out (when >= 0) takes the body as it comes, at
 * most max bytes of it: once they came, the rest is not waited for. */
static int
cp_answer(struct cli_stream *s, struct cli_stream_resp **rp, int out,
    unsigned long long *got, unsigned long long max)
{
	char err[512];
	size_t n;
	int k;

	for (;;) {
		if ((k = cli_stream_recv(s, rp, err, sizeof(err))) < 0) {
			fail("%s", err);
			return EXIT_UNREACHABLE;
		}
		if (out >= 0 && (*rp)->status == 200 && (*rp)->len > 0) {
			n = (*rp)->len;
			if (n > max - *got)
				n = (size_t)(max - *got);
			write_all(out, (*rp)->body, n);
			*got += n;
			(*rp)->len = 0;
		}
		if (k == 1 || (out >= 0 && (*rp)->status == 200 &&
		    *got >= max))
			break;
		if (cp_wait(s, 0) < 0) {
			fail("poll: %s", strerror(errno));
			return EXIT_UNREACHABLE;
		}
	}
	if ((*rp)->status != 200) {
		struct cli_response e;

		e.status = (*rp)->status;
		e.body = (char *)(*rp)->body;
		e.len = (*rp)->len;
		return api_error(&e, NULL);
	}
	return EXIT_OK;
}

static int
cp_put(const char *local, const char *id, const char *path)
{
	struct cli_stream *s;
	struct cli_stream_resp *r;
	struct stat st;
	char target[8400], enc[8200], err[512], buf[65536];
	json_t *doc;
	long long len = -1;
	ssize_t n;
	int fd, unreachable, rc;

	if (strcmp(local, "-") == 0)
		fd = STDIN_FILENO;
	else if ((fd = open(local, O_RDONLY | O_CLOEXEC)) < 0) {
		fail("%s: %s", local, strerror(errno));
		return EXIT_USAGE;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		len = (long long)st.st_size;
	else if (fd != STDIN_FILENO) {
		fail("%s: not a regular file", local);
		close(fd);
		return EXIT_USAGE;
	}
	cli_pct_path(path, enc, sizeof(enc));
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files?path=%s"
	    "&mode=%04o", id, enc, fd == STDIN_FILENO ? 0644u :
	    (unsigned)(st.st_mode & 07777));
	/* a wake comes on top of the transfer */
	cli_timeout_secs = cli_timeout_secs < 300 ? 300 : cli_timeout_secs;
	if ((s = cli_stream_open(&tgt, "PUT", target,
	    "application/octet-stream", len, &unreachable, err,
	    sizeof(err))) == NULL) {
		fail("%s", err);
		out_error("unreachable", err);
		if (fd != STDIN_FILENO)
			close(fd);
		return EXIT_UNREACHABLE;
	}
	for (;;) {
		if (cli_stream_flush(s, err, sizeof(err)) < 0)
			break;	/* berthd may have answered: read it */
		if (cli_stream_pending(s) > 256 * 1024) {
			if (cp_wait(s, 1) < 0)
				break;
			if (cli_stream_readable(s))
				break;
			continue;
		}
		if ((n = read(fd, buf, sizeof(buf))) < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fail("%s: %s", local, strerror(errno));
			cli_stream_close(s);
			return EXIT_REFUSED;
		}
		if (n == 0) {
			cli_stream_write(s, NULL, 0);	/* chunked: the end */
			while (cli_stream_pending(s) > 0 &&
			    cli_stream_flush(s, err, sizeof(err)) == 0 &&
			    cli_stream_pending(s) > 0)
				if (cp_wait(s, 1) < 0)
					break;
			break;
		}
		cli_stream_write(s, buf, (size_t)n);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	rc = cp_answer(s, &r, -1, NULL, 0);
	if (rc == EXIT_OK && (doc = json_loadb((const char *)r->body, r->len,
	    0, NULL)) != NULL)
		out_set(doc);
	cli_stream_close(s);
	return rc;
}

static int
cp_get(const char *id, const char *path, const char *local)
{
	struct cli_stream *s;
	struct cli_stream_resp *r;
	struct stat st;
	char target[8400], enc[8200], err[512], dst[8192], tmp[8300];
	const char *base;
	unsigned long long got = 0;
	int fd = STDOUT_FILENO, unreachable, rc, tofile;

	tofile = strcmp(local, "-") != 0;
	snprintf(dst, sizeof(dst), "%s", local);
	if (tofile && stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
		base = strrchr(path, '/') + 1;
		snprintf(dst, sizeof(dst), "%s/%s", local, *base ? base : "file");
	}
	cli_pct_path(path, enc, sizeof(enc));
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files?path=%s",
	    id, enc);
	cli_timeout_secs = cli_timeout_secs < 300 ? 300 : cli_timeout_secs;
	if ((s = cli_stream_open(&tgt, "GET", target, NULL, 0, &unreachable,
	    err, sizeof(err))) == NULL) {
		fail("%s", err);
		out_error("unreachable", err);
		return EXIT_UNREACHABLE;
	}
	/* the request goes out whole first (a GET head is small) */
	while (cli_stream_pending(s) > 0) {
		if (cli_stream_flush(s, err, sizeof(err)) < 0) {
			fail("%s", err);
			cli_stream_close(s);
			return EXIT_UNREACHABLE;
		}
		if (cli_stream_pending(s) > 0)
			cp_wait(s, 1);
	}
	/* into a temporary file beside dst, renamed once complete */
	if (tofile) {
		snprintf(tmp, sizeof(tmp), "%s.netctl-XXXXXX", dst);
		if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
			fail("%s: %s", dst, strerror(errno));
			cli_stream_close(s);
			return EXIT_USAGE;
		}
	}
	rc = cp_answer(s, &r, fd, &got, ~0ULL);
	if (tofile) {
		if (rc == EXIT_OK && (fchmod(fd, 0644) < 0 || close(fd) < 0 ||
		    rename(tmp, dst) < 0)) {
			fail("%s: %s", dst, strerror(errno));
			rc = EXIT_REFUSED;
		} else if (rc != EXIT_OK)
			close(fd);
		if (rc != EXIT_OK)
			unlink(tmp);
	}
	if (rc == EXIT_OK)
		out_set(json_pack("{s:s, s:s, s:I, s:I}", "path", path, "to",
		    tofile ? dst : "-", "size", (json_int_t)got, "wake_ms",
		    (json_int_t)(r->wake_ms < 0 ? 0 : r->wake_ms)));
	cli_stream_close(s);
	return rc;
}

static int
c_sandbox_cp(const struct cmd *c, struct opts *o, char **a, int n)
{
	char sid[PX_SANDBOX_ID_MAX + 2], did[PX_SANDBOX_ID_MAX + 2];
	const char *sp, *dp;
	int sr, dr;

	(void)c;
	(void)o;
	(void)n;
	if ((sr = cp_side(a[0], sid, sizeof(sid), &sp)) < 0 ||
	    (dr = cp_side(a[1], did, sizeof(did), &dp)) < 0)
		return EXIT_USAGE;
	if (sr == dr) {
		fail("cp: one side must be in a sandbox (ID:/PATH), the other "
		    "here");
		return EXIT_USAGE;
	}
	return sr ? cp_get(sid, sp, dp) : cp_put(sp, did, dp);
}

/* ---- the guest's files: files, mkdir, rm, mv, cat, watch ---- */

#define GUEST_PATH_MAX	4096	/* as berthd takes it */
#define LIST_MAX	100000	/* entries berthd lists at most */

/* A path in the guest: absolute, at most GUEST_PATH_MAX bytes. */
static int
check_guest_path(const char *p)
{
	if (p[0] != '/') {
		fail("'%s': the path in the sandbox must be absolute", p);
		return -1;
	}
	if (strlen(p) > GUEST_PATH_MAX) {
		fail("path longer than %d bytes", GUEST_PATH_MAX);
		return -1;
	}
	return 0;
}

/* A whole number option from min to max. */
static int
count_arg(const char *opt, const char *s, unsigned long long min,
    unsigned long long max, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 ||
	    *v < min || *v > max) {
		fail("%s: use a number from %llu to %llu, not '%s'", opt, min,
		    max, s);
		return -1;
	}
	return 0;
}

/*
 * Bytes from the guest (a name, a path) made safe to print: valid UTF-8
 * stays, but control characters, C1 controls, the bidirectional
 * overrides and line separators, bytes that are not UTF-8 and '\' are
 * written \xNN (and \\), so that what is shown is one line and what it
 * looks like. malloc'd.
 */
static char *
shown_bytes(const unsigned char *p, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char *out, *o;
	size_t i = 0, k, n;
	unsigned cp;

	if ((out = malloc(len * 4 + 1)) == NULL)
		return NULL;
	o = out;
	while (i < len) {
		unsigned char b = p[i];

		n = 0;
		if (b >= 0x20 && b < 0x7f && b != '\\')
			n = 1;
		else if (b >= 0xc2 && b <= 0xf4) {
			n = b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
			cp = b & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
			for (k = 1; k < n; k++) {
				if (i + k >= len || (p[i + k] & 0xc0) != 0x80)
					break;
				cp = cp << 6 | (p[i + k] & 0x3f);
			}
			if (k < n || (n == 3 && cp < 0x800) || (n == 4 &&
			    (cp < 0x10000 || cp > 0x10ffff)) ||
			    (cp >= 0xd800 && cp <= 0xdfff) ||
			    (cp >= 0x80 && cp <= 0x9f) ||
			    (cp >= 0x2028 && cp <= 0x202e) ||
			    (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff)
				n = 0;
		}
		if (n > 0) {
			memcpy(o, p + i, n);
			o += n;
			i += n;
		} else if (b == '\\') {
			*o++ = '\\';
			*o++ = '\\';
			i++;
		} else {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hex[b >> 4];
			*o++ = hex[b & 15];
			i++;
		}
	}
	*o = '\0';
	return out;
}

/* obj's key (a string), or key_base64 (bytes that are not UTF-8), made
 * safe to print; "?" when neither is there. malloc'd. */
static char *
shown_field(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	unsigned char *raw;
	const char *b64;
	char k[48], *s;
	size_t n;
	int rl;

	if (json_is_string(v))
		return shown_bytes((const unsigned char *)json_string_value(v),
		    json_string_length(v));
	snprintf(k, sizeof(k), "%s_base64", key);
	if ((b64 = json_string_value(json_object_get(obj, k))) == NULL)
		return strdup("?");
	n = strlen(b64);
	if ((raw = malloc(n / 4 * 3 + 3)) == NULL)
		return NULL;
	if (n % 4 != 0 || (rl = EVP_DecodeBlock(raw,
	    (const unsigned char *)b64, (int)n)) < 0) {
		free(raw);
		return strdup("?");
	}
	while (n > 0 && b64[n - 1] == '=' && rl > 0)
		n--, rl--;
	s = shown_bytes(raw, (size_t)rl);
	free(raw);
	return s;
}

/* The files API's target: /v1/sandboxes/ID/files?path=P then extra. */
static void
files_target(char *buf, size_t len, const char *id, const char *path,
    const char *extra)
{
	char enc[GUEST_PATH_MAX * 3 + 1];

	cli_pct_path(path, enc, sizeof(enc));
	snprintf(buf, len, "/v1/sandboxes/%s/files?path=%s%s", id, enc, extra);
}

static int
c_sandbox_files(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t;
	char target[GUEST_PATH_MAX * 3 + 200], extra[40] = "&list=1";
	char size[32], *name;
	unsigned long long limit = 0;
	json_t *doc, *e;
	size_t i;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_guest_path(a[1]) == -1)
		return EXIT_USAGE;
	if (o->limit != NULL) {
		if (count_arg("--limit", o->limit, 1, LIST_MAX, &limit) == -1)
			return EXIT_USAGE;
		snprintf(extra, sizeof(extra), "&list=1&limit=%llu", limit);
	}
	files_target(target, sizeof(target), a[0], a[1], extra);
	cli_timeout_secs = 900;		/* a wake, then the agent's 10 min */
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json)
		goto out;
	memset(&t, 0, sizeof(t));
	t.ncols = 5;
	table_add(&t, (const char *const[]){ "TYPE", "MODE", "SIZE", "MTIME",
	    "NAME", NULL });
	json_array_foreach(json_object_get(doc, "entries"), i, e) {
		snprintf(size, sizeof(size), "%lld", (long long)
		    json_integer_value(json_object_get(e, "size")));
		name = shown_field(e, "name");
		table_add(&t, (const char *const[]){ jstr(e, "type"),
		    jstr(e, "mode"), size, jstr(e, "mtime"), name, NULL });
		free(name);
	}
	table_print(&t);
out:
	/* said on stderr: stdout stays the table (or the document) */
	if (rc == EXIT_OK && json_is_true(json_object_get(doc, "truncated")))
		fprintf(stderr, "%s: the listing was cut at %llu entries; "
		    "--limit N shows more (at most %d)\n", progname,
		    limit ? limit : (unsigned long long)json_array_size(
		    json_object_get(doc, "entries")), LIST_MAX);
	json_decref(doc);
	return rc;
}

/* An octal mode as the API takes it: "0" to "7777" (leading 0 or not). */
static int
check_mode(const char *m)
{
	if (m[0] == '\0' || strlen(m) > 5 || strspn(m, "01234567") !=
	    strlen(m) || strtoul(m, NULL, 8) > 07777) {
		fail("--mode: an octal mode from 0 to 7777 (e.g. 0755), not "
		    "'%s'", m);
		return -1;
	}
	return 0;
}

static int
c_sandbox_mkdir(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[160];
	json_t *body, *doc;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_guest_path(a[1]) == -1 ||
	    (o->mode != NULL && check_mode(o->mode) == -1))
		return EXIT_USAGE;
	body = json_pack("{s:s, s:b}", "path", a[1], "parents",
	    (o->given & O_PARENTS) != 0);
	if (body != NULL && o->mode != NULL)
		json_object_set_new(body, "mode", json_string(o->mode));
	if (body == NULL) {
		fail("'%s': the path is not UTF-8", a[1]);
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files/mkdir", a[0]);
	cli_timeout_secs = 900;
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	json_decref(doc);
	return rc;
}

static int
c_sandbox_rm_path(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[GUEST_PATH_MAX * 3 + 200];
	json_t *doc;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_guest_path(a[1]) == -1)
		return EXIT_USAGE;
	files_target(target, sizeof(target), a[0], a[1],
	    (o->given & O_RECURSIVE) ? "&recursive=1" : "");
	cli_timeout_secs = 900;
	rc = call(o, "DELETE", target, NULL, &doc);
	json_decref(doc);
	return rc;
}

static int
c_sandbox_mv(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[160];
	json_t *body, *doc;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_guest_path(a[1]) == -1 ||
	    check_guest_path(a[2]) == -1)
		return EXIT_USAGE;
	if ((body = json_pack("{s:s, s:s, s:b}", "from", a[1], "to", a[2],
	    "overwrite", (o->given & O_OVERWRITE) != 0)) == NULL) {
		fail("the paths must be UTF-8");
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files/move", a[0]);
	cli_timeout_secs = 900;
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	json_decref(doc);
	return rc;
}

/* A GET streamed: opened, its head sent. NULL after saying why. */
static struct cli_stream *
get_open(const char *target)
{
	struct cli_stream *s;
	char err[512];
	int unreachable;

	if ((s = cli_stream_open(&tgt, "GET", target, NULL, 0, &unreachable,
	    err, sizeof(err))) == NULL) {
		fail("%s", err);
		out_error("unreachable", err);
		return NULL;
	}
	while (cli_stream_pending(s) > 0) {
		if (cli_stream_flush(s, err, sizeof(err)) < 0) {
			fail("%s", err);
			out_error("unreachable", err);
			cli_stream_close(s);
			return NULL;
		}
		if (cli_stream_pending(s) > 0)
			cp_wait(s, 1);
	}
	return s;
}

static int
c_sandbox_cat(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct cli_stream *s;
	struct cli_stream_resp *r;
	char target[GUEST_PATH_MAX * 3 + 200], extra[80] = "";
	unsigned long long off = 0, len = ~0ULL, got = 0;
	size_t k;
	int rc;

	(void)c;
	(void)n;
	if (o->json) {
		fail("--json does not apply to cat: it prints the file's bytes "
		    "(the MCP tool read_file gives them in JSON)");
		return EXIT_USAGE;
	}
	if (check_id(a[0]) == -1 || check_guest_path(a[1]) == -1)
		return EXIT_USAGE;
	if ((o->offset != NULL && count_arg("--offset", o->offset, 0,
	    (unsigned long long)INT64_MAX, &off) == -1) ||
	    (o->length != NULL && count_arg("--length", o->length, 0,
	    (unsigned long long)INT64_MAX, &len) == -1))
		return EXIT_USAGE;
	/* berthd reads ?length=0 as "to the end": a length of 0 is asked
	 * as 1 byte (the file must be there all the same) and none kept */
	if (o->offset != NULL || o->length != NULL) {
		k = (size_t)snprintf(extra, sizeof(extra), "&offset=%llu", off);
		if (o->length != NULL)
			snprintf(extra + k, sizeof(extra) - k, "&length=%llu",
			    len > 0 ? len : 1ULL);
	}
	files_target(target, sizeof(target), a[0], a[1], extra);
	cli_timeout_secs = cli_timeout_secs < 300 ? 300 : cli_timeout_secs;
	if ((s = get_open(target)) == NULL)
		return EXIT_UNREACHABLE;
	rc = cp_answer(s, &r, STDOUT_FILENO, &got, len);
	cli_stream_close(s);
	return rc;
}

/* One line of a watch: printed; *rc and 1 once it says the watch ended
 * (the directory went, or an error). */
static int
watch_line(const struct opts *o, const char *line, size_t len, int *rc)
{
	json_t *ev;
	const char *what;
	char *path;
	int end = 0;

	if (o->json) {
		fwrite(line, 1, len, stdout);
		fputc('\n', stdout);
	}
	if ((ev = json_loadb(line, len, 0, NULL)) == NULL ||
	    (what = json_string_value(json_object_get(ev, "event"))) == NULL) {
		json_decref(ev);
		fail("berthd sent a watch line that is not an event");
		*rc = EXIT_UNREACHABLE;
		return 1;
	}
	if (strcmp(what, "error") == 0) {
		json_t *st = json_object_get(ev, "status");

		fail("the watch broke off: %s", jstr(ev, "message"));
		*rc = json_integer_value(st) == 401 || json_integer_value(st) ==
		    403 ? EXIT_DENIED : EXIT_REFUSED;
		json_decref(ev);
		return 1;
	}
	path = shown_field(ev, "path");
	if (!o->json && strcmp(what, "ready") != 0) {
		if (strcmp(what, "overflow") == 0)
			printf("overflow %s (events were lost)\n", path ? path :
			    "?");
		else
			printf("%s %s%s\n", what, path ? path : "?",
			    json_is_true(json_object_get(ev, "dir")) &&
			    path != NULL && strcmp(path, "/") != 0 ? "/" : "");
	}
	/* a note on stderr comes after the line it is about */
	if (strcmp(what, "overflow") == 0 || strcmp(what, "unwatched") == 0)
		fflush(stdout);
	if (strcmp(what, "overflow") == 0)
		fprintf(stderr, "%s: events under %s were lost (the guest's "
		    "queue overflowed): look at it again\n", progname,
		    path ? path : "?");
	else if (strcmp(what, "unwatched") == 0)
		fprintf(stderr, "%s: %s could not be watched (out of inotify "
		    "watches?): its events are missed\n", progname,
		    path ? path : "?");
	if (strcmp(what, "delete_self") == 0) {
		*rc = EXIT_OK;
		end = 1;
	}
	free(path);
	json_decref(ev);
	return end;
}

static int
c_sandbox_watch(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct cli_stream *s;
	struct cli_stream_resp *r;
	struct pollfd pfd;
	char target[GUEST_PATH_MAX * 3 + 200], err[512];
	unsigned char *nl;
	size_t off;
	int k, rc = EXIT_REFUSED, end = 0;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_guest_path(a[1]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/watch?path=", a[0]);
	cli_pct_path(a[1], target + strlen(target), sizeof(target) -
	    strlen(target) - 16);
	if (o->given & O_RECURSIVE)
		strcat(target, "&recursive=1");
	cli_timeout_secs = cli_timeout_secs < 300 ? 300 : cli_timeout_secs;
	if ((s = get_open(target)) == NULL)
		return EXIT_UNREACHABLE;
	for (;;) {
		if ((k = cli_stream_recv(s, &r, err, sizeof(err))) < 0) {
			fail("%s", err);
			rc = EXIT_UNREACHABLE;
			break;
		}
		if (r->status != 0 && r->status != 200) {
			if (k == 1) {	/* refused before it started: JSON */
				struct cli_response e;

				e.status = r->status;
				e.body = (char *)r->body;
				e.len = r->len;
				rc = api_error(&e, o);
				break;
			}
		} else if (r->status == 200) {
			out_streamed = 1;	/* --json: the lines as they come */
			for (off = 0; !end && (nl = memchr(r->body + off, '\n',
			    r->len - off)) != NULL; off = (size_t)(nl -
			    r->body) + 1)
				if (nl > r->body + off)
					end = watch_line(o, (const char *)
					    r->body + off, (size_t)(nl - r->body -
					    off), &rc);
			memmove(r->body, r->body + off, r->len - off);
			r->len -= off;
			fflush(stdout);
			if (end)
				break;
			if (k == 1) {
				fail("the watch ended without its directory "
				    "going (berthd closed it)");
				rc = EXIT_REFUSED;
				break;
			}
		}
		if (k == 1)
			break;
		pfd.fd = cli_stream_fd(s);
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (!cli_stream_readable(s) && poll(&pfd, 1, -1) < 0 &&
		    errno != EINTR) {
			fail("poll: %s", strerror(errno));
			break;
		}
	}
	cli_stream_close(s);
	return rc;
}

static int
c_sandbox_exec(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *argv, *env = NULL, *doc, *v;
	unsigned char buf[EXEC_STDIN_MAX + 1];
	char *b64;
	size_t got = 0;
	ssize_t r;
	uint64_t secs = 600;
	int i, rc;

	(void)c;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if ((body = json_object()) == NULL || (argv = json_array()) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	json_object_set_new(body, "argv", argv);
	for (i = 1; i < n; i++)
		json_array_append_new(argv, json_string(a[i]));
	for (i = 0; i < o->nenv; i++) {
		const char *eq = strchr(o->env[i], '=');
		char name[257];

		if (eq == NULL || eq == o->env[i] ||
		    (size_t)(eq - o->env[i]) >= sizeof(name)) {
			fail("--env: '%s' is not NAME=VALUE", o->env[i]);
			json_decref(body);
			return EXIT_USAGE;
		}
		memcpy(name, o->env[i], (size_t)(eq - o->env[i]));
		name[eq - o->env[i]] = '\0';
		if (env == NULL)
			json_object_set_new(body, "env", env = json_object());
		json_object_set_new(env, name, json_string(eq + 1));
	}
	if (o->cwd != NULL)
		json_object_set_new(body, "cwd", json_string(o->cwd));
	if (o->user != NULL)
		json_object_set_new(body, "user", json_string(o->user));
	if (o->tty) {
		struct winsize ws;
		int fd;

		/* the size of the terminal netctl runs in, if any */
		memset(&ws, 0, sizeof(ws));
		for (fd = 0; fd < 3; fd++)
			if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 &&
			    ws.ws_row > 0)
				break;
		if (ws.ws_row == 0 || ws.ws_col == 0) {
			ws.ws_row = 24;
			ws.ws_col = 80;
		}
		json_object_set_new(body, "tty", json_pack("{s:i, s:i}",
		    "rows", (int)ws.ws_row, "cols", (int)ws.ws_col));
	}
	if (o->timeout != NULL) {
		json_t *t = json_object();

		/* checked here so the answer wait fits the command's */
		if (strcmp(o->timeout, "never") == 0) {
			fail("--timeout: a command needs a deadline (at most 24h)");
			json_decref(t);
			json_decref(body);
			return EXIT_USAGE;
		}
		if (span_arg("--timeout", o->timeout, 0, t, "t") != 0) {
			json_decref(t);
			json_decref(body);
			return EXIT_USAGE;
		}
		json_decref(t);
		secs = strtoull(o->timeout, NULL, 10);
		switch (o->timeout[strspn(o->timeout, "0123456789")]) {
		case 'm':
			secs = strstr(o->timeout, "ms") != NULL ? secs / 1000 :
			    secs * 60;
			break;
		case 'h': secs *= 3600; break;
		case 'd': secs *= 86400; break;
		default: break;
		}
		json_object_set_new(body, "timeout", json_string(o->timeout));
	}
	if (o->given & O_DETACH) {
		char target[160];

		json_object_set_new(body, "detach", json_true());
		if (o->given & O_KEEP_AWAKE)
			json_object_set_new(body, "keep_awake", json_true());
		if (o->ring != NULL) {
			char *end;
			unsigned long long rb = strtoull(o->ring, &end, 10);

			/* bytes, or with K or M (KiB, MiB) */
			if (*end == 'K' || *end == 'k')
				rb <<= 10, end++;
			else if (*end == 'M' || *end == 'm')
				rb <<= 20, end++;
			if (!isdigit((unsigned char)o->ring[0]) || *end != '\0' ||
			    rb < 1024 || rb > 16ULL << 20) {
				fail("--ring: expected 1K to 16M (bytes, or with "
				    "K or M), not '%s'", o->ring);
				json_decref(body);
				return EXIT_USAGE;
			}
			json_object_set_new(body, "ring", json_integer(
			    (json_int_t)rb));
		}
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", a[0]);
		cli_timeout_secs = 300;		/* a wake at most */
		rc = call(o, "POST", target, body, &doc);
		json_decref(body);
		if (rc != EXIT_OK)
			return rc;
		if (!o->json)
			printf("%lld\n", (long long)json_integer_value(
			    json_object_get(doc, "process")));
		json_decref(doc);
		return EXIT_OK;
	}
	if (o->given & (O_KEEP_AWAKE | O_RING)) {
		fail("%s: only with --detach", (o->given & O_RING) ? "--ring" :
		    "--keep-awake");
		json_decref(body);
		return EXIT_USAGE;
	}
	/* a wake, and commands queued before this one, come on top */
	cli_timeout_secs = (unsigned)(secs > 86400 ? 86400 : secs) + 300;
	if (!o->json) {
		rc = exec_stream(a[0], body, o->tty);
		json_decref(body);
		return rc;
	}
	if (!isatty(STDIN_FILENO)) {
		while (got <= EXEC_STDIN_MAX && (r = read(STDIN_FILENO,
		    buf + got, sizeof(buf) - got)) != 0) {
			if (r < 0) {
				if (errno == EINTR)
					continue;
				break;	/* no stdin (closed): none sent */
			}
			got += (size_t)r;
		}
		if (got > EXEC_STDIN_MAX) {
			fail("stdin: more than %d bytes; streaming stdin is not "
			    "supported yet", EXEC_STDIN_MAX);
			json_decref(body);
			return EXIT_USAGE;
		}
		if (got > 0) {
			if ((b64 = malloc(4 * ((got + 2) / 3) + 1)) == NULL) {
				fail("out of memory");
				json_decref(body);
				return EXIT_REFUSED;
			}
			EVP_EncodeBlock((unsigned char *)b64, buf, (int)got);
			json_object_set_new(body, "stdin", json_string(b64));
			free(b64);
		}
	}
	{
		char target[160];

		snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", a[0]);
		rc = call(o, "POST", target, body, &doc);
	}
	json_decref(body);
	if (rc != EXIT_OK)
		return rc;
	if (!o->json) {
		fflush(stdout);
		exec_print(doc, "stdout", stdout);
		fflush(stdout);
		exec_print(doc, "stderr", stderr);
	}
	if (json_is_true(json_object_get(doc, "timed_out")))
		fprintf(stderr, "%s: the command timed out and was killed\n",
		    progname);
	if (json_is_true(json_object_get(doc, "truncated")))
		fprintf(stderr, "%s: output over 4 MiB a stream was dropped\n",
		    progname);
	if ((v = json_object_get(doc, "exit_code")) != NULL &&
	    json_is_integer(v))
		rc = (int)json_integer_value(v) & 0xff;
	else if ((v = json_object_get(doc, "signal")) != NULL &&
	    json_is_integer(v))
		rc = 128 + ((int)json_integer_value(v) & 0x7f);
	else
		rc = EXIT_REFUSED;
	json_decref(doc);
	return rc;
}

/* ---- detached processes ---- */

/* A process number argument: 1 to 2^32-1. */
static int
check_proc(const char *s)
{
	char *end;
	unsigned long long v;

	v = strtoull(s, &end, 10);
	if (*s < '1' || *s > '9' || *end != '\0' || v > 4294967295ULL) {
		fail("'%s' is not a process number (see 'netctl sandbox ps')",
		    s);
		return -1;
	}
	return 0;
}

static const char *
proc_state(json_t *p, char *buf, size_t len)
{
	json_t *v;

	if (strcmp(jstr(p, "state"), "running") == 0)
		return "running";
	if ((v = json_object_get(p, "exit_code")) != NULL && json_is_integer(v))
		snprintf(buf, len, "exit %lld", (long long)json_integer_value(v));
	else
		snprintf(buf, len, "signal %lld", (long long)json_integer_value(
		    json_object_get(p, "signal")));
	return buf;
}

static int
c_sandbox_ps(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t;
	char target[160], num[4][32], st[32];
	json_t *doc, *p;
	size_t i;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json)
		return rc;
	memset(&t, 0, sizeof(t));
	t.ncols = 6;
	table_add(&t, (const char *const[]){ "PROC", "PID", "STATE",
	    "OUTPUT", "KEEP-AWAKE", "COMMAND", NULL });
	json_array_foreach(json_object_get(doc, "processes"), i, p) {
		snprintf(num[0], sizeof(num[0]), "%lld", (long long)
		    json_integer_value(json_object_get(p, "process")));
		snprintf(num[1], sizeof(num[1]), "%lld", (long long)
		    json_integer_value(json_object_get(p, "pid")));
		snprintf(num[2], sizeof(num[2]), "%lld", (long long)
		    json_integer_value(json_object_get(p, "output_bytes")));
		table_add(&t, (const char *const[]){ num[0], num[1],
		    proc_state(p, st, sizeof(st)), num[2],
		    json_is_true(json_object_get(p, "keep_awake")) ? "yes" :
		    "no", jstr(p, "command"), NULL });
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

static int
c_sandbox_logs(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200], *end;
	unsigned long long next = 0;
	int rc, follow = (o->given & O_FOLLOW) != 0;
	json_t *doc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	if (o->offset != NULL) {
		next = strtoull(o->offset, &end, 10);
		if (*o->offset < '0' || *o->offset > '9' || *end != '\0') {
			fail("--offset: '%s' is not a byte offset", o->offset);
			return EXIT_USAGE;
		}
	}
	if (follow)
		out_streamed = 1;
	for (;;) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/"
		    "%s/logs?offset=%llu", a[0], a[1], next);
		if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK)
			return rc;
		if (o->json && !follow) {
			json_decref(doc);	/* call printed it */
			return EXIT_OK;
		}
		if (json_is_true(json_object_get(doc, "lost")))
			fprintf(stderr, "%s: output before byte %lld is gone (the "
			    "process's ring holds the last of it)\n", progname,
			    (long long)json_integer_value(json_object_get(doc,
			    "first")));
		if (o->json) {
			char *line = json_dumps(doc, JSON_COMPACT);

			printf("%s\n", line != NULL ? line : "{}");
			free(line);
		} else
			exec_print(doc, "output", stdout);
		fflush(stdout);
		next = (unsigned long long)json_integer_value(
		    json_object_get(doc, "next_offset"));
		if (!follow || strcmp(jstr(doc, "state"), "running") != 0) {
			json_decref(doc);
			return EXIT_OK;
		}
		json_decref(doc);
		usleep(500000);
	}
}

static int
c_sandbox_kill(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200], *end;
	json_t *body, *doc;
	long v;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	body = json_object();
	if (o->signal != NULL) {
		v = strtol(o->signal, &end, 10);
		if (*o->signal >= '0' && *o->signal <= '9') {
			if (*end != '\0' || v < 1 || v > 64) {
				fail("--signal: '%s' is not a signal number (1 "
				    "to 64) or name", o->signal);
				json_decref(body);
				return EXIT_USAGE;
			}
			json_object_set_new(body, "signal", json_integer(v));
		} else
			json_object_set_new(body, "signal", json_string(
			    o->signal));
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/%s/kill",
	    a[0], a[1]);
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK)
		json_decref(doc);
	return rc;
}

static int
c_sandbox_wait(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200], st[32];
	json_t *doc, *v;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/%s/wait",
	    a[0], a[1]);
	cli_timeout_secs = 86400 + 300;
	if ((rc = call(o, "POST", target, NULL, &doc)) != EXIT_OK)
		return rc;
	if (!o->json)
		printf("%s\n", proc_state(doc, st, sizeof(st)));
	/* the process's status, as exec gives a command's */
	if ((v = json_object_get(doc, "exit_code")) != NULL && json_is_integer(v))
		rc = (int)json_integer_value(v) & 0xff;
	else
		rc = 128 + ((int)json_integer_value(json_object_get(doc,
		    "signal")) & 0x7f);
	json_decref(doc);
	return rc;
}

/* netctl sandbox attach ID PROC: a client of a detached process's
 * terminal (POST .../processes/N/attach, streamed). */
static int
c_sandbox_attach(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200];
	struct winsize ws;
	json_t *body;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	if (o->json) {
		fail("attach is a terminal: no --json");
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/%s/"
	    "attach", a[0], a[1]);
	if ((body = json_object()) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	/* the terminal's size when netctl runs in one: the newest client's
	 * is the process's */
	memset(&ws, 0, sizeof(ws));
	if (isatty(STDIN_FILENO) && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 &&
	    ws.ws_row > 0 && ws.ws_col > 0) {
		json_object_set_new(body, "rows", json_integer(ws.ws_row));
		json_object_set_new(body, "cols", json_integer(ws.ws_col));
	}
	if (o->offset != NULL) {
		char *end;
		unsigned long long off = strtoull(o->offset, &end, 10);

		if (*o->offset < '0' || *o->offset > '9' || *end != '\0' ||
		    off > INT64_MAX) {
			fail("--offset: '%s' is not a byte offset", o->offset);
			json_decref(body);
			return EXIT_USAGE;
		}
		json_object_set_new(body, "offset", json_integer(
		    (json_int_t)off));
	}
	if (isatty(STDIN_FILENO))
		fprintf(stderr, "%s: attached to process %s; ^P ^Q detaches\r\n",
		    progname, a[1]);
	cli_timeout_secs = 86400 + 300;
	rc = exec_stream_at(target, body, 1, 1);
	json_decref(body);
	return rc;
}

static void
print_rules(json_t *rules)
{
	struct table t = { 0 };
	const char *row[3] = { "ACTION", "RULE", "EXPIRES" };
	char tbuf[32];
	json_t *r;
	size_t i;

	t.ncols = 3;
	table_add(&t, row);
	json_array_foreach(rules, i, r) {
		row[0] = jstr(r, "action");
		row[1] = jstr(r, "rule");
		row[2] = json_is_integer(json_object_get(r, "expires")) ?
		    jtime(r, "expires", tbuf, sizeof(tbuf)) : "never";
		table_add(&t, row);
	}
	table_print(&t);
}

static int
c_egress_show(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	printf("sandbox:  %s\nmode:     %s%s\n", a[0], jstr(doc,
	    "effective_mode"), json_is_null(json_object_get(doc, "mode")) ?
	    " (global policy default)" : "");
	if (json_array_size(json_object_get(doc, "rules")) == 0)
		printf("rules:    none\n");
	else
		print_rules(json_object_get(doc, "rules"));
	json_decref(doc);
	return EXIT_OK;
}

/* egress allow|deny <id> <rule>... : one request per rule, in order. */
static int
c_egress_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc, *done;
	int i, rc = EXIT_OK;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	/* --json: one document for all the rules, {"sandbox","rules"};
	 * when one is refused, its error document with the rules stored
	 * before it ("rules") */
	done = json_array();
	for (i = 1; i < n && rc == EXIT_OK; i++) {
		body = json_pack("{s:s, s:s}", "action", c->verb, "rule", a[i]);
		if (o->ttl != NULL)
			json_object_set_new(body, "ttl", json_string(o->ttl));
		rc = call(o, "POST", target, body, &doc);
		json_decref(body);
		if (rc == EXIT_OK && !o->json)
			printf("%s %s%s%s\n", jstr(doc, "action"), jstr(doc,
			    "rule"), o->ttl ? " for " : "", o->ttl ? o->ttl : "");
		if (rc == EXIT_OK && doc != NULL)
			json_array_append(done, doc);
		json_decref(doc);
	}
	if (rc == EXIT_OK)
		out_set(json_pack("{s:s, s:o}", "sandbox", a[0], "rules", done));
	else if (json_is_object(out_doc) && json_object_get(out_doc, "error"))
		json_object_set_new(out_doc, "rules", done);
	else
		json_decref(done);
	return rc;
}

static int
c_egress_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[1024], enc[800];

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (strcmp(a[1], "allow") != 0 && strcmp(a[1], "deny") != 0) {
		fail("egress rm: say 'allow' or 'deny' before the rule, not "
		    "'%s'", a[1]);
		return EXIT_USAGE;
	}
	cli_pct_encode(a[2], "-._*:", enc, sizeof(enc));
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress/%s/%s", a[0],
	    a[1], enc);
	return delete_one(o, target, NULL, json_pack("{s:s, s:s, s:s, s:b}",
	    "sandbox", a[0], "action", a[1], "rule", a[2], "removed", 1));
}

static int
c_egress_reset(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	snprintf(done, sizeof(done), "egress of %s reset to the global policy's "
	    "default", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "sandbox",
	    a[0], "reset", 1));
}

static int
c_egress_mode(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (strcmp(a[1], "open") != 0 && strcmp(a[1], "allowlist") != 0 &&
	    strcmp(a[1], "closed") != 0 && strcmp(a[1], "default") != 0) {
		fail("egress mode: use open, allowlist, closed or default, "
		    "not '%s'", a[1]);
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", a[0]);
	body = json_pack("{s:o}", "mode", strcmp(a[1], "default") == 0 ?
	    json_null() : json_string(a[1]));
	rc = call(o, "PUT", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("egress mode of %s: %s\n", a[0], jstr(doc,
		    "effective_mode"));
	json_decref(doc);
	return rc;
}

/* Prints the entries after seq *last (all for 0); moves *last on. */
static void
print_denials(const struct opts *o, json_t *entries, long long *last)
{
	json_t *e;
	size_t i;

	json_array_foreach(entries, i, e) {
		long long seq = json_integer_value(json_object_get(e, "seq"));
		char *line;

		if (seq != 0 && seq <= *last)
			continue;
		if ((line = json_dumps(e, JSON_COMPACT)) != NULL)
			printf("%s\n", line);
		free(line);
		if (seq > *last)
			*last = seq;
	}
	fflush(stdout);
}

static int
c_egress_log(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	long long last = 0;
	int rc, follow = (o->given & O_FOLLOW) != 0;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress/log", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK ||
	    (o->json && !follow)) {
		json_decref(doc);
		return rc;
	}
	if (!json_is_true(json_object_get(doc, "available"))) {
		if (!o->json)
			printf("no denial log for %s (egress filtering is not "
			    "active for it)\n", a[0]);
		json_decref(doc);
		return follow ? EXIT_REFUSED : EXIT_OK;
	}
	/* --follow prints entries one per line, in both output modes */
	if (follow)
		out_streamed = 1;
	if (json_array_size(json_object_get(doc, "entries")) == 0 && !follow)
		printf("no denied connections\n");
	print_denials(o, json_object_get(doc, "entries"), &last);
	json_decref(doc);
	/* Follow: poll (the log keeps the last 256 entries of each
	 * sandbox, numbered) until interrupted or the sandbox is gone. */
	while (follow) {
		usleep(500000);
		if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK)
			return rc;
		print_denials(o, json_object_get(doc, "entries"), &last);
		json_decref(doc);
	}
	return EXIT_OK;
}

static int
c_sandbox_console(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[160];
	long long next = -1, size;
	json_t *doc;
	int rc, follow = (o->given & O_FOLLOW) != 0;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (follow)
		out_streamed = 1;
	for (;;) {
		if (next < 0)
			snprintf(target, sizeof(target), "/v1/sandboxes/%s/console",
			    a[0]);
		else
			snprintf(target, sizeof(target), "/v1/sandboxes/%s/console"
			    "?from=%lld", a[0], next);
		if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK)
			return rc;
		if (o->json && !follow) {
			json_decref(doc);	/* call printed it */
			return EXIT_OK;
		}
		size = (long long)json_integer_value(json_object_get(doc, "size"));
		if (o->json) {
			char *line = json_dumps(doc, JSON_COMPACT);

			printf("%s\n", line != NULL ? line : "{}");
			free(line);
		} else
			fputs(json_string_value(json_object_get(doc, "text")) ?
			    json_string_value(json_object_get(doc, "text")) : "",
			    stdout);
		fflush(stdout);
		json_decref(doc);
		if (!follow)
			return EXIT_OK;
		/* the kept console shrank: it rotated, read it anew */
		next = next >= 0 && size < next ? 0 : size;
		usleep(500000);
	}
}

static void
print_policy(json_t *doc)
{
	json_t *v;
	size_t i;

	printf("default_mode: %s\nmax_mode:     %s\n", jstr(doc,
	    "default_mode"), jstr(doc, "max_mode"));
	printf("deny:        %s", json_array_size(json_object_get(doc,
	    "deny")) ? "" : " none");
	json_array_foreach(json_object_get(doc, "deny"), i, v)
		printf(" %s", json_string_value(v));
	printf("\nallow:       %s", json_array_size(json_object_get(doc,
	    "allow")) ? "" : " anything not denied");
	json_array_foreach(json_object_get(doc, "allow"), i, v)
		printf(" %s", json_string_value(v));
	printf("\npermit:      %s", json_array_size(json_object_get(doc,
	    "permit")) ? "" : " no private range");
	json_array_foreach(json_object_get(doc, "permit"), i, v)
		printf(" %s", json_string_value(v));
	printf("\nmax_rules:     %lld per sandbox\n", (long long)
	    json_integer_value(json_object_get(doc, "max_rules")));
	v = json_object_get(doc, "conn_limit");
	if (json_integer_value(v) > 0)
		printf("conn_limit:    %lld concurrent connections per "
		    "sandbox\n", (long long)json_integer_value(v));
	else
		printf("conn_limit:    none\n");
	v = json_object_get(doc, "new_conn_rate");
	if (json_integer_value(v) > 0)
		printf("new_conn_rate: %lld new connections/s per sandbox\n",
		    (long long)json_integer_value(v));
	else
		printf("new_conn_rate: none\n");
}

/*
 * A limit option: a number (0 to max), "off" (0, limits only) or
 * "default" (null: berth.conf's value). 0, or -1 after saying why.
 */
static int
limit_arg(const char *opt, const char *s, long long max, int off_ok,
    json_t **out)
{
	char *end;
	long long n;

	if (strcmp(s, "default") == 0) {
		*out = json_null();
		return 0;
	}
	if (off_ok && strcmp(s, "off") == 0) {
		*out = json_integer(0);
		return 0;
	}
	n = strtoll(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || n > max) {
		fail("%s: use a number from 0 to %lld%s or 'default' (berth.conf's), "
		    "not '%s'", opt, max, off_ok ? ", 'off'" : "", s);
		return -1;
	}
	*out = json_integer(n);
	return 0;
}

static int
c_policy_show(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *doc;
	int rc;

	if ((rc = call(o, "GET", "/v1/policy", NULL, &doc)) == EXIT_OK &&
	    !o->json)
		print_policy(doc);
	json_decref(doc);
	return rc;
}

static json_t *
strings(const char *const *v, int n)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < n; i++)
		if (v[i][0] != '\0')	/* --deny '' clears the list */
			json_array_append_new(a, json_string(v[i]));
	return a;
}

static int
c_policy_set(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc;
	int rc;

	static const struct {
		unsigned bit;
		const char *opt, *key;
		long long max;
		int off_ok;
	} lim[] = {
		{ O_MAX_RULES, "--max-rules", "max_rules", 1024, 0 },
		{ O_CONN_LIMIT, "--conn-limit", "conn_limit", 1000000, 1 },
		{ O_NEW_CONN_RATE, "--new-conn-rate", "new_conn_rate", 1000000,
		  1 },
	};
	const char *val[3] = { o->max_rules, o->conn_limit, o->new_conn_rate };
	json_t *v;
	size_t i;

	if (!(o->given & (O_DEFAULT_MODE | O_MAX_MODE | O_DENY | O_ALLOW |
	    O_PERMIT | O_MAX_RULES | O_CONN_LIMIT | O_NEW_CONN_RATE))) {
		fail("policy set: give at least one of --default-mode, "
		    "--max-mode, --deny, --allow, --permit, --max-rules, "
		    "--conn-limit, --new-conn-rate");
		return EXIT_USAGE;
	}
	body = json_object();
	for (i = 0; i < 3; i++) {
		if (!(o->given & lim[i].bit))
			continue;
		if (limit_arg(lim[i].opt, val[i], lim[i].max, lim[i].off_ok,
		    &v) == -1) {
			json_decref(body);
			return EXIT_USAGE;
		}
		json_object_set_new(body, lim[i].key, v);
	}
	if (o->default_mode != NULL)
		json_object_set_new(body, "default_mode",
		    json_string(o->default_mode));
	if (o->max_mode != NULL)
		json_object_set_new(body, "max_mode", json_string(o->max_mode));
	if (o->given & O_DENY)
		json_object_set_new(body, "deny", strings(o->deny, o->ndeny));
	if (o->given & O_ALLOW)
		json_object_set_new(body, "allow", strings(o->allow, o->nallow));
	if (o->given & O_PERMIT)
		json_object_set_new(body, "permit", strings(o->permit,
		    o->npermit));
	rc = call(o, "PUT", "/v1/policy", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		print_policy(doc);
	json_decref(doc);
	return rc;
}

static int
c_token_create(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc;
	int rc;

	if (((o->given & O_ADMIN) != 0) == (o->sandbox != NULL)) {
		fail("token create: give either --admin or --sandbox <id>");
		return EXIT_USAGE;
	}
	if (o->sandbox != NULL && check_id(o->sandbox) == -1)
		return EXIT_USAGE;
	body = o->sandbox ? json_pack("{s:s}", "sandbox", o->sandbox) :
	    json_pack("{s:b}", "admin", 1);
	if (o->name != NULL)
		json_object_set_new(body, "name", json_string(o->name));
	rc = call(o, "POST", "/v1/tokens", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("%s\n# id %s (%s); the token is shown only now\n",
		    jstr(doc, "token"), jstr(doc, "id"), o->sandbox ?
		    o->sandbox : "admin");
	json_decref(doc);
	return rc;
}

static int
c_token_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[4] = { "ID", "SCOPE", "NAME", "CREATED" };
	char tbuf[32];
	json_t *doc, *k;
	size_t i;
	int rc;

	if ((rc = call_list(o, "/v1/tokens", "tokens", &doc)) != EXIT_OK ||
	    o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 4;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "tokens"), i, k) {
		row[0] = jstr(k, "id");
		row[1] = json_is_true(json_object_get(k, "admin")) ? "admin" :
		    jstr(k, "sandbox");
		row[2] = json_string_length(json_object_get(k, "name")) ?
		    jstr(k, "name") : "-";
		row[3] = jtime(k, "created", tbuf, sizeof(tbuf));
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

static int
check_token_id(const char *id)
{
	size_t i, len = strlen(id);

	for (i = 0; i < len; i++)
		if (!islower((unsigned char)id[i]) &&
		    !isdigit((unsigned char)id[i]) && id[i] != '-')
			break;
	if (len > 0 && len < 24 && i == len)
		return 0;
	fail("invalid token id '%s': see 'netctl token ls' (tok-...)", id);
	return -1;
}

static int
c_token_rotate(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc, *body;
	int rc;

	if (check_token_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/tokens/%s/rotate", a[0]);
	body = json_object();	/* call() does not take it */
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("%s\n# the old secret of %s no longer works\n",
		    jstr(doc, "token"), a[0]);
	json_decref(doc);
	return rc;
}

static int
c_token_revoke(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_token_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/tokens/%s", a[0]);
	snprintf(done, sizeof(done), "token %s revoked", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "id", a[0],
	    "revoked", 1));
}

static int
c_sandbox_set(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (!(o->given & (O_IDLE_PAUSE | O_IDLE_SUSPEND | O_MAX_LIFETIME))) {
		fail("sandbox set: give at least one of --idle-pause, "
		    "--idle-suspend, --max-lifetime");
		return EXIT_USAGE;
	}
	body = json_object();
	if (idle_args(o, 1, body) == -1) {
		json_decref(body);
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s", a[0]);
	rc = call(o, "PATCH", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json) {
		printf("sandbox %s:\n", a[0]);
		print_vm(doc);
	}
	json_decref(doc);
	return rc;
}

static int
c_template_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[4] = { "NAME", "SANDBOXES", "CREATED", "DIR" };
	char tbuf[32], nbuf[16];
	json_t *doc, *k;
	size_t i;
	int rc;

	if ((rc = call_list(o, "/v1/templates", "templates", &doc)) != EXIT_OK ||
	    o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 4;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "templates"), i, k) {
		row[0] = jstr(k, "name");
		snprintf(nbuf, sizeof(nbuf), "%lld", (long long)
		    json_integer_value(json_object_get(k, "sandboxes")));
		row[1] = nbuf;
		row[2] = json_is_true(json_object_get(k, "builtin")) ?
		    "(built in)" : jtime(k, "created", tbuf, sizeof(tbuf));
		row[3] = jstr(k, "dir");
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

static int
c_template_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	char dir[4096];
	json_t *body, *doc;
	int rc;

	if (check_template_name(a[0]) == -1)
		return EXIT_USAGE;
	/* berthd resolves nothing relative: send an absolute path */
	if (a[1][0] != '/') {
		if (getcwd(dir, sizeof(dir)) == NULL ||
		    strlen(dir) + 1 + strlen(a[1]) >= sizeof(dir)) {
			fail("template add: cannot make '%s' an absolute path",
			    a[1]);
			return EXIT_USAGE;
		}
		strcat(dir, "/");
		strcat(dir, a[1]);
	} else
		snprintf(dir, sizeof(dir), "%s", a[1]);
	body = json_pack("{s:s, s:s}", "name", a[0], "dir", dir);
	rc = call(o, "POST", "/v1/templates", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("template %s: %s\n", jstr(doc, "name"), jstr(doc, "dir"));
	json_decref(doc);
	return rc;
}

/* POST .../build, then its progress every half second (GET ?after=N)
 * onto stderr until it ends: exit 0 built, 1 failed. */
static int
c_template_build(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct timespec ts = { 0, 500 * 1000 * 1000 };
	char target[160], poll[200];
	json_int_t next = 0;
	json_t *doc, *l;
	const char *st;
	size_t i;
	int rc;

	if (check_template_name(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/templates/%s/build", a[0]);
	if ((rc = call(o, "POST", target, NULL, &doc)) != EXIT_OK)
		return rc;
	for (;;) {
		json_array_foreach(json_object_get(doc, "lines"), i, l)
			if (!o->json)
				fprintf(stderr, "%s\n", json_string_value(l));
		next = json_integer_value(json_object_get(doc, "next"));
		st = jstr(doc, "state");
		if (strcmp(st, "running") != 0)
			break;
		json_decref(doc);
		nanosleep(&ts, NULL);
		snprintf(poll, sizeof(poll), "%s?after=%lld", target,
		    (long long)next);
		if ((rc = call(o, "GET", poll, NULL, &doc)) != EXIT_OK)
			return rc;
	}
	if (strcmp(st, "ok") != 0) {
		fail("template %s: build failed: %s", a[0], jstr(doc, "reason"));
		json_decref(doc);
		return EXIT_REFUSED;
	}
	if (!o->json)
		printf("template %s: %s\n", a[0], jstr(doc, "dir"));
	json_decref(doc);
	return EXIT_OK;
}

static int
c_template_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128], done[128];

	if (check_template_name(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/templates/%s", a[0]);
	snprintf(done, sizeof(done), "template %s removed", a[0]);
	return delete_one(o, target, done, json_pack("{s:s, s:b}", "name",
	    a[0], "removed", 1));
}

static int
c_mcp(const struct cmd *c, struct opts *o, char **a, int n)
{
	if (o->json) {
		fail("--json does not apply to mcp: it speaks JSON-RPC on "
		    "stdout already");
		return EXIT_USAGE;
	}
	if (o->sandbox != NULL && check_id(o->sandbox) == -1)
		return EXIT_USAGE;
	return cli_mcp_serve(&tgt, o->sandbox) == 0 ? EXIT_OK : EXIT_REFUSED;
}

static int c_help(const struct cmd *, struct opts *, char **, int);

static const struct cmd cmds[] = {
	{ "sandbox", "create", "add", "<id> [--address <ip>] [--memory MiB] "
	  "[--vcpus N] [--disk MiB] [--template NAME] [--idle-pause D|never] "
	  "[--idle-suspend D|never] [--max-lifetime D|never]", 1, 1,
	  O_ADDRESS | O_VM_ONLY | O_FROM, c_sandbox_add,
	  "Create a sandbox: a microVM (waits until it runs), or with --address,\n"
	  "register an externally managed one (a container or another host)\n"
	  "reachable at <ip>. A microVM gets --memory MiB of RAM, --vcpus\n"
	  "vCPUs and a persistent disk of --disk MiB (defaults and maxima:\n"
	  "berth.conf's vm_memory, vm_vcpus, vm_disk and vm_max_*), boots\n"
	  "from --template NAME (see 'template ls'; default: default), and\n"
	  "is paused after --idle-pause without traffic, suspended to disk\n"
	  "after --idle-suspend and stopped --max-lifetime after it was\n"
	  "created (durations: 90s, 10m, 2h, 1d, or never; default: berth.conf's\n"
	  "idle_pause and idle_suspend, no lifetime limit). Prints the\n"
	  "sandbox's token once: it may manage only this sandbox (ports,\n"
	  "egress, pause, resume, events, exec)." },
	{ "sandbox", "fork", NULL, "<id> <new-id> [<new-id>...]", 2, 101, 0,
	  c_sandbox_fork,
	  "Fork a running, paused or suspended microVM sandbox into new ones\n"
	  "(at most vm_max_forks, up to 100): each starts from its memory and\n"
	  "disk as they are now (files, running processes) with an identity of\n"
	  "its own (hostname, address, machine id), its own disk layer, and the\n"
	  "source's template, sizes, idle limits and egress rules, not its ports\n"
	  "or tokens. A running source pauses briefly while its state is\n"
	  "captured and runs on; a suspended one is not woken. Waits until the\n"
	  "forks run; prints each one's token once." },
	{ "sandbox", "checkpoint", NULL, "<id> <name>", 2, 2, 0,
	  c_sandbox_checkpoint,
	  "Keep the running, paused or suspended microVM sandbox's memory and\n"
	  "disk as they are now under <name> (a running one pauses as briefly\n"
	  "as for a fork and runs on; a suspended one is not woken). 'sandbox restore' goes back to it, 'sandbox create NEW\n"
	  "--from <id>:<name>' makes a new sandbox from it; 'checkpoint ls'\n"
	  "lists them with their size on disk. At most vm_max_checkpoints\n"
	  "per sandbox (berth.conf); they go with the sandbox." },
	{ "sandbox", "restore", NULL, "<id> <checkpoint>", 2, 2, 0,
	  c_sandbox_restore,
	  "Put the sandbox back to its checkpoint, in place: what it wrote\n"
	  "and ran since is gone, its files and processes are as they were\n"
	  "then; same id, address, ports and tokens. Waits until it runs." },
	{ "checkpoint", "ls", "list", "<id>", 1, 1, 0, c_checkpoint_ls,
	  "List a sandbox's checkpoints, oldest first, with their size on\n"
	  "disk (the disk layer and memory each one keeps)." },
	{ "checkpoint", "rm", "remove", "<id> <name>", 2, 2, 0, c_checkpoint_rm,
	  "Remove a checkpoint; the disk layers only it kept are freed\n"
	  "(sandboxes made from it keep theirs)." },
	{ "sandbox", "set", NULL, "<id> [--idle-pause D|never|default] "
	  "[--idle-suspend D|never|default] [--max-lifetime D|never|default]",
	  1, 1, O_IDLE_PAUSE | O_IDLE_SUSPEND | O_MAX_LIFETIME, c_sandbox_set,
	  "Change a microVM sandbox's idle policy; 'default' follows berth.conf\n"
	  "again. Applies at once to the running VM; recorded as an event." },
	{ "sandbox", "rm", "delete", "<id>", 1, 1, 0, c_sandbox_rm,
	  "Remove a sandbox with its ports, egress rules, tokens and events\n"
	  "(and its disk). With a path after the id, 'sandbox rm' removes\n"
	  "that path in the guest instead (see below)." },
	{ "sandbox", "ls", "list", "", 0, 0, 0, c_sandbox_ls,
	  "List sandboxes: ID STATE ADDRESS EXTERNAL CREATED; in fleet mode\n"
	  "every host's, with a HOST column (\"(down)\": its lease expired)." },
	{ "sandbox", "show", NULL, "<id>", 1, 1, 0, c_sandbox_show,
	  "Show one sandbox and its published ports." },
	{ "sandbox", "pause", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Pause a VM-backed sandbox (memory kept). Refused (exit 1) for an\n"
	  "external sandbox; the attempt is recorded in its events." },
	{ "sandbox", "suspend", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Snapshot a VM-backed sandbox to disk and free its memory." },
	{ "sandbox", "resume", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Resume a paused or suspended sandbox. A failed or stopped one has\n"
	  "nothing to resume: start it." },
	{ "sandbox", "start", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Boot a stopped or failed sandbox again from its template, keeping\n"
	  "its disk (/data and its files); waits until it runs." },
	{ "sandbox", "stop", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Power a sandbox's VM off; its disk, ports and rules stay." },
	{ "sandbox", "restart", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Stop a sandbox (unless it is stopped or failed) and start it again\n"
	  "from its template, keeping its disk; waits until it runs." },
	{ "sandbox", "console", NULL, "<id> [--follow]", 1, 1, O_FOLLOW,
	  c_sandbox_console,
	  "Print the guest console berthd keeps (the last 64 KiB; at most\n"
	  "vm_console_max in all); --follow keeps printing what comes." },
	{ "sandbox", "exec", NULL, "<id> [--user U] [--tty] [--env NAME=VALUE]... "
	  "[--cwd DIR] [--timeout D] [--detach [--keep-awake] [--ring SIZE]] "
	  "-- CMD [ARG]...", 2, 4096, O_ENV | O_CWD |
	  O_TIMEOUT | O_USER | O_TTY | O_DETACH | O_KEEP_AWAKE | O_RING,
	  c_sandbox_exec,
	  "Run CMD in the sandbox's guest (as root, or --user U: a name or uid\n"
	  "of the guest's /etc/passwd, with its groups) and print its stdout and\n"
	  "stderr as they were; netctl exits with the command's status (128+N\n"
	  "when signal N ended it; netctl's own failures keep their codes, so\n"
	  "1-4 may be either: --json tells). A paused or suspended sandbox is\n"
	  "woken first. stdin is sent when it is not a terminal (at most 48\n"
	  "KiB for now; output is returned once the command ends, at most 4\n"
	  "MiB a stream). --timeout (default 10m, at most 24h) kills the\n"
	  "command after D. --tty runs it on a terminal in the guest (its size\n"
	  "netctl's own, else 24x80; output is one stream, stdout). A sandbox\n"
	  "token may exec only in its sandbox. --detach starts CMD as a\n"
	  "process that outlives netctl (and pause, suspend, resume and a\n"
	  "berthd restart) and prints its number: see 'sandbox ps', 'logs',\n"
	  "'kill', 'wait'. Its stdin is /dev/null (with --tty: a terminal,\n"
	  "see 'sandbox attach'), its output is kept in a\n"
	  "ring of --ring SIZE (default 1M, at most 16M), it has no timeout\n"
	  "unless given, and with --keep-awake it keeps the sandbox from\n"
	  "being paused for idleness while it runs." },
	{ "sandbox", "ps", NULL, "<id>", 1, 1, 0, c_sandbox_ps,
	  "The sandbox's detached processes, running and ended (the guest\n"
	  "agent keeps the last 256): PROC PID STATE OUTPUT KEEP-AWAKE COMMAND." },
	{ "sandbox", "logs", NULL, "<id> <proc> [--follow] [--offset N]", 2, 2,
	  O_FOLLOW | O_OFFSET, c_sandbox_logs,
	  "Print a detached process's output (what its ring holds, from byte\n"
	  "--offset N of all it wrote); --follow keeps printing what comes\n"
	  "until it ends." },
	{ "sandbox", "kill", NULL, "<id> <proc> [--signal S]", 2, 2, O_SIGNAL,
	  c_sandbox_kill,
	  "Send a detached process's process group a signal (default TERM; a\n"
	  "number or a name: TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP,\n"
	  "CONT)." },
	{ "sandbox", "wait", NULL, "<id> <proc>", 2, 2, 0, c_sandbox_wait,
	  "Wait for a detached process to end; print how it ended and exit\n"
	  "with its status (128+N for signal N)." },
	{ "sandbox", "attach", NULL, "<id> <proc> [--offset N]", 2, 2, O_OFFSET,
	  c_sandbox_attach,
	  "Attach to a detached process's terminal (exec --detach --tty): the\n"
	  "screen so far (its output ring, from --offset N), then its output\n"
	  "as it comes, and what you type goes to it. ^P ^Q (or the end of\n"
	  "stdin when it is not a terminal) detaches: the process runs on,\n"
	  "attach again any time; a dropped client detaches too. Several\n"
	  "clients may attach at once; the terminal's size is the newest's.\n"
	  "Exits 0 when detached, else with the process's status." },
	{ "sandbox", "cp", NULL, "SRC DST", 2, 2, 0, c_sandbox_cp,
	  "Copy a file into or out of a sandbox's guest: one side is\n"
	  "ID:/PATH, the other a local path ('-': stdin or stdout; a\n"
	  "directory: the same name in it). Streamed both ways; written to a\n"
	  "temporary file and renamed, with the local file's mode going in.\n"
	  "A paused or suspended sandbox is woken first (--json: wake_ms)." },
	{ "sandbox", "files", NULL, "<id> <dir> [--limit N]", 2, 2, O_LIMIT,
	  c_sandbox_files,
	  "List a directory of the sandbox's guest, by name: TYPE (file, dir,\n"
	  "link, fifo, socket, char, block, other; a link is not followed)\n"
	  "MODE SIZE MTIME NAME (a name's bytes that are not printable UTF-8\n"
	  "shown \\xNN). At most --limit N entries (default 10000, at most\n"
	  "100000); a listing cut there is said so on stderr. --json: the\n"
	  "API's document (a name that is not UTF-8 as name_base64)." },
	{ "sandbox", "mkdir", NULL, "<id> <path> [--parents|-p] [--mode M]", 2,
	  2, O_PARENTS | O_MODE, c_sandbox_mkdir,
	  "Make a directory in the sandbox's guest, of octal --mode M (default\n"
	  "0755). An existing path is an error, as is a missing parent;\n"
	  "--parents makes the missing parents and takes an existing\n"
	  "directory as done." },
	{ "sandbox", "rm", NULL, "<id> <path> [--recursive|-r]", 2, 2,
	  O_RECURSIVE, c_sandbox_rm_path,
	  "With a path: remove it in the sandbox's guest (a file, a symbolic\n"
	  "link, never what it points to, or an empty directory); --recursive\n"
	  "removes a directory with all under it. \"/\" is refused. (Without a\n"
	  "path, 'sandbox rm <id>' removes the sandbox itself.)" },
	{ "sandbox", "mv", NULL, "<id> <from> <to> [--overwrite]", 3, 3,
	  O_OVERWRITE, c_sandbox_mv,
	  "Rename or move a path in the sandbox's guest. An existing <to> is\n"
	  "an error unless --overwrite (then replaced as rename(2) does). <to>\n"
	  "is the new path itself, not a directory to move into." },
	{ "sandbox", "cat", NULL, "<id> <path> [--offset N] [--length N]", 2, 2,
	  O_OFFSET | O_LENGTH, c_sandbox_cat,
	  "Print a file of the sandbox's guest to stdout, byte for byte: all\n"
	  "of it, or from byte --offset N (past the end: nothing) at most\n"
	  "--length N bytes. Streamed, of any size. No --json (see 'cp' to a\n"
	  "file, or the MCP tool read_file)." },
	{ "sandbox", "watch", NULL, "<id> <dir> [--recursive|-r]", 2, 2,
	  O_RECURSIVE, c_sandbox_watch,
	  "Watch a directory of the sandbox's guest and print a line per\n"
	  "change as it happens: EVENT PATH, EVENT one of create, modify,\n"
	  "attrib, delete, move_from, move_to, a directory's path ending in\n"
	  "'/'. --recursive watches its subdirectories too (those made later\n"
	  "as well; 'unwatched PATH' when one could not be). 'overflow DIR\n"
	  "(events were lost)' says the guest's queue overflowed: look again.\n"
	  "Runs until the directory is removed ('delete_self DIR', exit 0),\n"
	  "interrupted, or the watch fails (exit 1, saying why). --json prints\n"
	  "each event as the API's JSON line, the first {\"event\":\"ready\"}\n"
	  "once the watch is in place." },
	{ "sandbox", "events", NULL, "<id>", 1, 1, 0, c_sandbox_events,
	  "Lifecycle events of a sandbox, oldest first:\n"
	  "SEQ TIME OPERATION RESULT DURATION REASON." },
	{ "port", "publish", NULL, "<id> <port> [--host-header preserve|upstream]"
	  " [--private|--public] [--host NAME]", 2, 2,
	  O_HOST_HEADER | O_PRIVATE | O_PUBLIC | O_HOST, c_port_publish,
	  "Publish a guest port and print its URL,\n"
	  "https://<port>-<id>.<domain>[:<https port>]/. Publishing again\n"
	  "changes only the options given. --host-header upstream rewrites Host\n"
	  "to localhost:<port> (for dev servers that check it); --private needs\n"
	  "the sandbox's token; --host NAME also routes a custom host name\n"
	  "(--host '' removes it)." },
	{ "port", "unpublish", NULL, "<id> <port>", 2, 2, 0, c_port_unpublish,
	  "Stop publishing a guest port." },
	{ "port", "ls", "list", "[<id>]", 0, 1, 0, c_port_ls,
	  "List published ports, of one sandbox or all:\n"
	  "SANDBOX PORT VISIBILITY HOST-HEADER URL." },
	{ "egress", "show", NULL, "<id>", 1, 1, 0, c_egress_show,
	  "Show a sandbox's egress mode and rules." },
	{ "egress", "allow", NULL, "<id> <rule>... [--ttl DURATION]", 2,
	  MAX_RULE_OPTS, O_TTL, c_egress_add,
	  "Allow destinations: example.com, *.example.com, 1.2.3.4,\n"
	  "10.1.0.0/16, each optionally with :443 or :8000-8100 and /tcp or\n"
	  "/udp. --ttl 10m makes the rules expire. Allow rules must stay inside\n"
	  "the global policy (exit 4 otherwise)." },
	{ "egress", "deny", NULL, "<id> <rule>... [--ttl DURATION]", 2,
	  MAX_RULE_OPTS, O_TTL, c_egress_add,
	  "Deny destinations (same rule syntax as allow)." },
	{ "egress", "rm", NULL, "<id> allow|deny <rule>", 3, 3, 0, c_egress_rm,
	  "Remove one rule." },
	{ "egress", "mode", NULL, "<id> open|allowlist|closed|default", 2, 2, 0,
	  c_egress_mode, "Set a sandbox's egress mode (default: follow the "
	  "global policy).\nIt cannot be wider than the policy's max_mode." },
	{ "egress", "reset", NULL, "<id>", 1, 1, 0, c_egress_reset,
	  "Remove every rule and return to the global policy's default mode." },
	{ "egress", "log", NULL, "<id> [--follow]", 1, 1, O_FOLLOW,
	  c_egress_log,
	  "Recent denied connections and names of a sandbox (the last 256),\n"
	  "one JSON object a line: time, destination, port, protocol and the\n"
	  "reason (not-allowed, deny-rule, always-deny, conn-limit, rate-limit,\n"
	  "dns, host, sandbox, spoof-ip...). --follow keeps printing new ones." },
	{ "policy", "show", NULL, "", 0, 0, 0, c_policy_show,
	  "Show the global egress policy." },
	{ "policy", "set", NULL, "[--default-mode M] [--max-mode M] "
	  "[--deny RULE]... [--allow RULE]... [--permit CIDR]... [--max-rules N] "
	  "[--conn-limit N|off] [--new-conn-rate N|off]", 0, 0,
	  O_DEFAULT_MODE | O_MAX_MODE | O_DENY | O_ALLOW | O_PERMIT | O_MAX_RULES |
	  O_CONN_LIMIT | O_NEW_CONN_RATE, c_policy_set,
	  "Change the global policy (admin only). Modes: closed < allowlist <\n"
	  "open; max_mode caps every sandbox. --deny rules are always denied\n"
	  "and no sandbox may allow them; a non-empty --allow list bounds\n"
	  "what sandboxes may allow. Giving --deny or --allow replaces that\n"
	  "list ('' empties it). --permit lists the private ranges (10/8,\n"
	  "172.16/12, 192.168/16, 100.64/10...) sandboxes may allow; others\n"
	  "are refused. --max-rules caps each sandbox's egress\n"
	  "rules; --conn-limit its concurrent connections and --new-conn-rate\n"
	  "its new connections per second (over: reset, and logged). 'default'\n"
	  "returns a limit to berth.conf's value." },
	{ "token", "create", NULL, "--admin | --sandbox <id> [--name TEXT]", 0,
	  0, O_ADMIN | O_SANDBOX | O_NAME, c_token_create,
	  "Create a token for the TCP control API and private URLs and print\n"
	  "it (only now). Admin tokens may do everything; a sandbox token\n"
	  "only that sandbox's ports, egress, pause/resume, events and exec." },
	{ "token", "ls", "list", "", 0, 0, 0, c_token_ls,
	  "List tokens (never their secrets): ID SCOPE NAME CREATED." },
	{ "token", "rotate", NULL, "<token-id>", 1, 1, 0, c_token_rotate,
	  "Give a token a new secret and print it; the old one stops working." },
	{ "token", "revoke", "rm", "<token-id>", 1, 1, 0, c_token_revoke,
	  "Revoke a token." },
	{ "template", "ls", "list", "", 0, 0, 0, c_template_ls,
	  "List guest templates sandboxes can boot from: NAME SANDBOXES\n"
	  "CREATED DIR. 'default' is built in (berth.conf's template)." },
	{ "template", "add", NULL, "<name> <dir>", 2, 2, 0, c_template_add,
	  "Register a template directory (template.json as vmm/guest/mktemplate\n"
	  "writes it, with its kernel and initramfs) under a name for\n"
	  "'sandbox create --template'. berthd loads it first and says what is\n"
	  "wrong if it cannot." },
	{ "template", "build", NULL, "<debian|minimal>", 1, 1, 0,
	  c_template_build,
	  "Build a template berth knows into berthd's state dir and register\n"
	  "it under its name: 'debian' (Debian 12 with apt and Docker, from\n"
	  "the host's apt sources with mmdebstrap; minutes, cached) or\n"
	  "'minimal' (busybox, seconds). Prints progress on stderr. Each\n"
	  "build is a new version: sandboxes made before keep theirs." },
	{ "template", "rm", "delete", "<name>", 1, 1, 0, c_template_rm,
	  "Forget a template name (its files stay). Refused while a sandbox\n"
	  "uses it." },
	{ "fleet", "hosts", NULL, "", 0, 0, 0, c_fleet_hosts,
	  "Fleet mode: the hosts registered in etcd and the ones whose lease\n"
	  "expired: HOST STATE EDGE FLEET SANDBOXES CAPACITY." },
	{ "status", NULL, NULL, "", 0, 0, 0, c_status,
	  "Check that berthd answers on its control socket (or --url)." },
	{ "mcp", NULL, NULL, "[--sandbox <id>]", 0, 0, O_SANDBOX, c_mcp,
	  "Serve the Model Context Protocol on stdin/stdout (JSON-RPC 2.0,\n"
	  "one message a line) so a coding agent can publish ports, manage\n"
	  "egress and pause or resume, acting with netctl's socket or --token.\n"
	  "--sandbox names the sandbox tools use when the agent names none." },
	{ "help", NULL, NULL, "[<command>]", 0, 2, 0, c_help,
	  "Show help for all commands or one." },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* The command's verb or its alias is word. */
static int
verb_is(const struct cmd *k, const char *word)
{
	return k->verb != NULL && (strcmp(k->verb, word) == 0 ||
	    (k->alias != NULL && strcmp(k->alias, word) == 0));
}

static void
usage_line(FILE *f, const struct cmd *c)
{
	fprintf(f, "%s %s%s%s%s%s\n", progname, c->noun, c->verb ? " " : "",
	    c->verb ? c->verb : "", c->args[0] ? " " : "", c->args);
}

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: %s [-s STATE_DIR | --url URL --token TOKEN] [--json] "
	    "<noun> <verb> [args]\n\n"
	    "commands:\n", progname);
	for (i = 0; i < NCMDS; i++) {
		fputs("  ", f);
		usage_line(f, &cmds[i]);
	}
	fprintf(f, "\noptions:\n"
	    "  -s, --state-dir DIR  berthd's state directory (default: "
	    "$BERTH_STATE_DIR,\n"
	    "                       else %s); the control socket is\n"
	    "                       DIR/control.sock\n"
	    "      --url URL        use berthd's TCP control API at URL "
	    "(https://HOST:PORT)\n"
	    "                       instead of the socket; also $BERTH_URL\n"
	    "      --token TOKEN    bearer token for --url; also $BERTH_TOKEN\n"
	    "      --cacert FILE    CA to verify --url with; also $BERTH_CACERT\n"
	    "      --json           print the API's JSON instead of tables\n"
	    "  -h, --help           this help; '%s help <command>' for one "
	    "command\n\n"
	    "exit status: 0 done, 1 berthd refused the request, 2 usage error, "
	    "3 berthd\ncannot be reached, 4 not authenticated or not allowed.\n", BERTH_STATE_DIR_DEFAULT, progname);
}

/* help --json: the commands as data. */
static json_t *
cmd_json(const struct cmd *k)
{
	char name[64];

	snprintf(name, sizeof(name), "%s%s%s", k->noun, k->verb ? " " : "",
	    k->verb ? k->verb : "");
	return json_pack("{s:s, s:s?, s:s, s:s}", "command", name, "alias",
	    k->alias, "args", k->args, "help", k->help);
}

static int
c_help(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *list = o->json ? json_array() : NULL;
	size_t i;
	int found = 0;

	if (n == 0) {
		if (list == NULL) {
			usage(stdout);
			return EXIT_OK;
		}
		for (i = 0; i < NCMDS; i++)
			json_array_append_new(list, cmd_json(&cmds[i]));
		out_set(json_pack("{s:o}", "commands", list));
		return EXIT_OK;
	}
	for (i = 0; i < NCMDS; i++) {
		const struct cmd *k = &cmds[i];

		if (strcmp(k->noun, a[0]) != 0)
			continue;
		if (n == 2 && (k->verb == NULL || (strcmp(k->verb, a[1]) != 0 &&
		    (k->alias == NULL || strcmp(k->alias, a[1]) != 0))))
			continue;
		if (list != NULL) {
			json_array_append_new(list, cmd_json(k));
			found = 1;
			continue;
		}
		printf("%susage: ", found ? "\n" : "");
		usage_line(stdout, k);
		if (k->alias != NULL)
			printf("   (also: %s %s %s)\n", progname, k->noun, k->alias);
		printf("\n%s\n", k->help);
		found = 1;
	}
	if (!found) {
		json_decref(list);
		fail("no command '%s%s%s'; try '%s help'", a[0], n == 2 ? " " :
		    "", n == 2 ? a[1] : "", progname);
		return EXIT_USAGE;
	}
	if (list != NULL)
		out_set(json_pack("{s:o}", "commands", list));
	return EXIT_OK;
}

static const char *
opt_name(uint64_t o)
{
	switch (o) {
	case O_ADDRESS: return "--address";
	case O_HOST_HEADER: return "--host-header";
	case O_PRIVATE: return "--private";
	case O_PUBLIC: return "--public";
	case O_HOST: return "--host";
	case O_TTL: return "--ttl";
	case O_ADMIN: return "--admin";
	case O_SANDBOX: return "--sandbox";
	case O_NAME: return "--name";
	case O_DEFAULT_MODE: return "--default-mode";
	case O_MAX_MODE: return "--max-mode";
	case O_DENY: return "--deny";
	case O_ALLOW: return "--allow";
	case O_MAX_RULES: return "--max-rules";
	case O_CONN_LIMIT: return "--conn-limit";
	case O_NEW_CONN_RATE: return "--new-conn-rate";
	case O_FOLLOW: return "--follow";
	case O_PERMIT: return "--permit";
	case O_MEMORY: return "--memory";
	case O_VCPUS: return "--vcpus";
	case O_DISK: return "--disk";
	case O_TEMPLATE: return "--template";
	case O_IDLE_PAUSE: return "--idle-pause";
	case O_IDLE_SUSPEND: return "--idle-suspend";
	case O_MAX_LIFETIME: return "--max-lifetime";
	case O_ENV: return "--env";
	case O_CWD: return "--cwd";
	case O_TIMEOUT: return "--timeout";
	case O_USER: return "--user";
	case O_TTY: return "--tty";
	case O_DETACH: return "--detach";
	case O_KEEP_AWAKE: return "--keep-awake";
	case O_RING: return "--ring";
	case O_SIGNAL: return "--signal";
	case O_OFFSET: return "--offset";
	case O_LIMIT: return "--limit";
	case O_PARENTS: return "--parents";
	case O_MODE: return "--mode";
	case O_RECURSIVE: return "--recursive";
	case O_OVERWRITE: return "--overwrite";
	case O_LENGTH: return "--length";
	case O_FROM: return "--from";
	default: return "?";
	}
}

static int json_mode;		/* --json was given */

/* With --json, prints the one document; returns the exit code. */
static int
finish(int rc)
{
	static const char *const codes[] = { "ok", "refused", "usage",
	    "unreachable", "denied" };
	char *text;

	if (json_mode && !out_streamed) {
		if (out_doc == NULL && rc == EXIT_OK)
			out_set(json_pack("{s:b}", "ok", 1));
		else if (out_doc == NULL)
			out_error(rc >= 0 && rc <= EXIT_DENIED ? codes[rc] :
			    "error", last_fail[0] ? last_fail : "failed");
		if ((text = json_dumps(out_doc, JSON_COMPACT)) != NULL) {
			fputs(text, stdout);
			fputc('\n', stdout);
			free(text);
		}
	}
	json_decref(out_doc);
	out_doc = NULL;
	if (fflush(stdout) != 0 && rc == EXIT_OK)
		rc = EXIT_REFUSED;
	return rc;
}

static int netctl_main(int, char **);

int
main(int argc, char **argv)
{
	return finish(netctl_main(argc, argv));
}

static int
netctl_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "state-dir", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "address", required_argument, NULL, 'a' },
		{ "host-header", required_argument, NULL, 'H' },
		{ "private", no_argument, NULL, 'P' },
		{ "public", no_argument, NULL, 'U' },
		{ "host", required_argument, NULL, 'n' },
		{ "url", required_argument, NULL, 'u' },
		{ "token", required_argument, NULL, 't' },
		{ "cacert", required_argument, NULL, 'c' },
		{ "ttl", required_argument, NULL, 'T' },
		{ "admin", no_argument, NULL, 'A' },
		{ "sandbox", required_argument, NULL, 'S' },
		{ "name", required_argument, NULL, 'N' },
		{ "default-mode", required_argument, NULL, 'D' },
		{ "max-mode", required_argument, NULL, 'M' },
		{ "deny", required_argument, NULL, 'd' },
		{ "allow", required_argument, NULL, 'w' },
		{ "max-rules", required_argument, NULL, OPT_MAX_RULES },
		{ "conn-limit", required_argument, NULL, OPT_CONN_LIMIT },
		{ "new-conn-rate", required_argument, NULL, OPT_NEW_CONN_RATE },
		{ "follow", no_argument, NULL, OPT_FOLLOW },
		{ "permit", required_argument, NULL, OPT_PERMIT },
		{ "memory", required_argument, NULL, OPT_MEMORY },
		{ "vcpus", required_argument, NULL, OPT_VCPUS },
		{ "disk", required_argument, NULL, OPT_DISK },
		{ "template", required_argument, NULL, OPT_TEMPLATE },
		{ "idle-pause", required_argument, NULL, OPT_IDLE_PAUSE },
		{ "idle-suspend", required_argument, NULL, OPT_IDLE_SUSPEND },
		{ "max-lifetime", required_argument, NULL, OPT_MAX_LIFETIME },
		{ "env", required_argument, NULL, OPT_ENV },
		{ "cwd", required_argument, NULL, OPT_CWD },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "user", required_argument, NULL, OPT_USER },
		{ "tty", no_argument, NULL, OPT_TTY },
		{ "detach", no_argument, NULL, OPT_DETACH },
		{ "keep-awake", no_argument, NULL, OPT_KEEP_AWAKE },
		{ "ring", required_argument, NULL, OPT_RING },
		{ "signal", required_argument, NULL, OPT_SIGNAL },
		{ "offset", required_argument, NULL, OPT_OFFSET },
		{ "limit", required_argument, NULL, OPT_LIMIT },
		{ "parents", no_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "recursive", no_argument, NULL, 'r' },
		{ "overwrite", no_argument, NULL, OPT_OVERWRITE },
		{ "length", required_argument, NULL, OPT_LENGTH },
		{ "from", required_argument, NULL, OPT_FROM },
		{ NULL, 0, NULL, 0 }
	};
	struct opts o;
	const struct cmd *c = NULL;
	const char *env;
	char **args;
	size_t i, k;
	int ch, nargs, want_help = 0, used, twin = 0;
	uint64_t bit;

	memset(&o, 0, sizeof(o));
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":s:hpr", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.state_dir = optarg;
			break;
		case 'j':
			o.json = json_mode = 1;
			break;
		case 'h':
			want_help = 1;
			break;
		case 'a':
			o.address = optarg;
			o.given |= O_ADDRESS;
			break;
		case 'H':
			o.host_header = optarg;
			o.given |= O_HOST_HEADER;
			break;
		case 'P':
			o.given |= O_PRIVATE;
			break;
		case 'U':
			o.given |= O_PUBLIC;
			break;
		case 'n':
			if (strlen(optarg) > PX_HOSTNAME_MAX) {
				fail("--host: name longer than %d bytes",
				    PX_HOSTNAME_MAX);
				return EXIT_USAGE;
			}
			/* DNS names are case-insensitive; berth stores them
			 * in lower case. */
			for (k = 0; optarg[k] != '\0'; k++)
				o.host[k] = (char)tolower((unsigned char)optarg[k]);
			o.host[k] = '\0';
			o.given |= O_HOST;
			break;
		case 'u':
			tgt.url = optarg;
			break;
		case 't':
			tgt.token = optarg;
			break;
		case 'c':
			tgt.cacert = optarg;
			break;
		case 'T':
			o.ttl = optarg;
			o.given |= O_TTL;
			break;
		case 'A':
			o.given |= O_ADMIN;
			break;
		case 'S':
			o.sandbox = optarg;
			o.given |= O_SANDBOX;
			break;
		case 'N':
			o.name = optarg;
			o.given |= O_NAME;
			break;
		case 'D':
			o.default_mode = optarg;
			o.given |= O_DEFAULT_MODE;
			break;
		case 'M':
			o.max_mode = optarg;
			o.given |= O_MAX_MODE;
			break;
		case OPT_MAX_RULES:
			o.max_rules = optarg;
			o.given |= O_MAX_RULES;
			break;
		case OPT_CONN_LIMIT:
			o.conn_limit = optarg;
			o.given |= O_CONN_LIMIT;
			break;
		case OPT_FOLLOW:
			o.given |= O_FOLLOW;
			break;
		case OPT_PERMIT:
			if (o.npermit == MAX_RULE_OPTS) {
				fail("at most %d rules per option", MAX_RULE_OPTS);
				return EXIT_USAGE;
			}
			o.permit[o.npermit++] = optarg;
			o.given |= O_PERMIT;
			break;
		case OPT_NEW_CONN_RATE:
			o.new_conn_rate = optarg;
			o.given |= O_NEW_CONN_RATE;
			break;
		case OPT_MEMORY:
			o.memory = optarg;
			o.given |= O_MEMORY;
			break;
		case OPT_VCPUS:
			o.vcpus = optarg;
			o.given |= O_VCPUS;
			break;
		case OPT_DISK:
			o.disk = optarg;
			o.given |= O_DISK;
			break;
		case OPT_TEMPLATE:
			o.template_ = optarg;
			o.given |= O_TEMPLATE;
			break;
		case OPT_IDLE_PAUSE:
			o.idle_pause = optarg;
			o.given |= O_IDLE_PAUSE;
			break;
		case OPT_IDLE_SUSPEND:
			o.idle_suspend = optarg;
			o.given |= O_IDLE_SUSPEND;
			break;
		case OPT_MAX_LIFETIME:
			o.max_lifetime = optarg;
			o.given |= O_MAX_LIFETIME;
			break;
		case OPT_ENV:
			if (o.nenv == MAX_RULE_OPTS) {
				fail("at most %d --env options", MAX_RULE_OPTS);
				return EXIT_USAGE;
			}
			o.env[o.nenv++] = optarg;
			o.given |= O_ENV;
			break;
		case OPT_CWD:
			o.cwd = optarg;
			o.given |= O_CWD;
			break;
		case OPT_TIMEOUT:
			o.timeout = optarg;
			o.given |= O_TIMEOUT;
			break;
		case OPT_USER:
			o.user = optarg;
			o.given |= O_USER;
			break;
		case OPT_TTY:
			o.tty = 1;
			o.given |= O_TTY;
			break;
		case OPT_DETACH:
			o.given |= O_DETACH;
			break;
		case OPT_KEEP_AWAKE:
			o.given |= O_KEEP_AWAKE;
			break;
		case OPT_RING:
			o.ring = optarg;
			o.given |= O_RING;
			break;
		case OPT_SIGNAL:
			o.signal = optarg;
			o.given |= O_SIGNAL;
			break;
		case OPT_OFFSET:
			o.offset = optarg;
			o.given |= O_OFFSET;
			break;
		case OPT_LIMIT:
			o.limit = optarg;
			o.given |= O_LIMIT;
			break;
		case 'p':
			o.given |= O_PARENTS;
			break;
		case OPT_MODE:
			o.mode = optarg;
			o.given |= O_MODE;
			break;
		case 'r':
			o.given |= O_RECURSIVE;
			break;
		case OPT_OVERWRITE:
			o.given |= O_OVERWRITE;
			break;
		case OPT_LENGTH:
			o.length = optarg;
			o.given |= O_LENGTH;
			break;
		case OPT_FROM:
			o.from = optarg;
			o.given |= O_FROM;
			break;
		case 'd':
		case 'w':
			if ((ch == 'd' ? o.ndeny : o.nallow) == MAX_RULE_OPTS) {
				fail("at most %d rules per option", MAX_RULE_OPTS);
				return EXIT_USAGE;
			}
			if (ch == 'd') {
				o.deny[o.ndeny++] = optarg;
				o.given |= O_DENY;
			} else {
				o.allow[o.nallow++] = optarg;
				o.given |= O_ALLOW;
			}
			break;
		case ':':
			fail("option %s needs a value", argv[optind - 1]);
			return EXIT_USAGE;
		default:
			if (optopt != 0)
				fail("unknown option -%c; try '%s help'", optopt,
				    progname);
			else
				fail("unknown option %s; try '%s help'",
				    argv[optind - 1], progname);
			return EXIT_USAGE;
		}
	}
	args = argv + optind;
	nargs = argc - optind;

	if (nargs == 0) {
		if (want_help)
			return c_help(NULL, &o, NULL, 0);
		usage(stderr);
		snprintf(last_fail, sizeof(last_fail), "no command given; try "
		    "'%s help'", progname);
		return EXIT_USAGE;
	}
	for (i = 0; i < NCMDS && c == NULL; i++) {
		const struct cmd *k2 = &cmds[i];

		if (strcmp(k2->noun, args[0]) != 0)
			continue;
		if (k2->verb == NULL)
			c = k2;
		else if (nargs >= 2 && verb_is(k2, args[1]))
			c = k2;
	}
	/* A verb of two forms told apart by the number of arguments
	 * (sandbox rm <id>, sandbox rm <id> <path>): the one they fit;
	 * options are then checked against that form alone. */
	for (i = 0; c != NULL && c->verb != NULL && i < NCMDS; i++) {
		const struct cmd *k2 = &cmds[i];

		if (k2 == c || strcmp(k2->noun, c->noun) != 0 ||
		    k2->verb == NULL || !verb_is(k2, args[1]))
			continue;
		twin = 1;
		if ((nargs - 2 < c->min || nargs - 2 > c->max) &&
		    nargs - 2 >= k2->min && nargs - 2 <= k2->max)
			c = k2;
	}
	if (c == NULL) {
		int noun_known = 0;

		for (i = 0; i < NCMDS; i++)
			if (strcmp(cmds[i].noun, args[0]) == 0)
				noun_known = 1;
		if (noun_known && nargs >= 2)
			fail("'%s' has no verb '%s'; try '%s help %s'", args[0],
			    args[1], progname, args[0]);
		else if (noun_known)
			fail("'%s' needs a verb; try '%s help %s'", args[0],
			    progname, args[0]);
		else
			fail("unknown command '%s'; try '%s help'", args[0],
			    progname);
		return EXIT_USAGE;
	}
	used = c->verb ? 2 : 1;
	args += used;
	nargs -= used;

	if (want_help) {
		char *h[2] = { (char *)c->noun, (char *)c->verb };

		return c_help(c, &o, h, c->verb ? 2 : 1);
	}
	if (nargs < c->min || nargs > c->max) {
		fail("%s arguments; usage:", nargs < c->min ? "missing" :
		    "too many");
		fputs("  ", stderr);
		usage_line(stderr, c);
		for (i = 0; twin && i < NCMDS; i++)
			if (&cmds[i] != c && strcmp(cmds[i].noun, c->noun) ==
			    0 && verb_is(&cmds[i], c->verb)) {
				fputs("  ", stderr);
				usage_line(stderr, &cmds[i]);
			}
		/* --json's message carries the usage too */
		snprintf(last_fail + strlen(last_fail), sizeof(last_fail) -
		    strlen(last_fail), " %s %s%s%s%s%s", progname, c->noun,
		    c->verb ? " " : "", c->verb ? c->verb : "", c->args[0] ?
		    " " : "", c->args);
		return EXIT_USAGE;
	}
	for (bit = 1; bit <= O_LAST; bit <<= 1)
		if ((o.given & bit) && !(c->opts & bit)) {
			fail("option %s does not apply to '%s%s%s%s%s'",
			    opt_name(bit), c->noun, c->verb ? " " : "",
			    c->verb ? c->verb : "", twin ? " " : "",
			    twin ? c->args : "");
			return EXIT_USAGE;
		}

	if (o.state_dir == NULL && (env = getenv("BERTH_STATE_DIR")) != NULL &&
	    env[0] != '\0')
		o.state_dir = env;
	if (o.state_dir == NULL)
		o.state_dir = BERTH_STATE_DIR_DEFAULT;
	if ((size_t)snprintf(sock_path, sizeof(sock_path), "%s/control.sock",
	    o.state_dir) >= sizeof(sock_path)) {
		fail("state directory path too long");
		return EXIT_USAGE;
	}
	tgt.sock_path = sock_path;
	if (tgt.url == NULL && (env = getenv("BERTH_URL")) != NULL &&
	    env[0] != '\0')
		tgt.url = env;
	if (tgt.token == NULL && (env = getenv("BERTH_TOKEN")) != NULL &&
	    env[0] != '\0')
		tgt.token = env;
	if (tgt.cacert == NULL && (env = getenv("BERTH_CACERT")) != NULL &&
	    env[0] != '\0')
		tgt.cacert = env;
	if (tgt.url != NULL && (tgt.token == NULL || tgt.token[0] == '\0') &&
	    strcmp(c->noun, "help") != 0) {
		fail("--url needs a token: --token or $BERTH_TOKEN");
		return EXIT_USAGE;
	}
	return c->fn(c, &o, args, nargs);
}
