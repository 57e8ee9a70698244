/*
 * cli_cmd.h — what netctl's command files share: the parsed options, the
 * command table's row, the exit codes, the output state --json prints
 * once (cli_util.c), the helpers every command uses to talk to berthd
 * and to check its arguments, and each family's handlers.
 *
 * netctl.c parses the options and dispatches through its table (cmds[]);
 * the handlers live one family a file: cli_sandbox.c, cli_exec.c,
 * cli_files.c, cli_port.c, cli_egress.c (with the policy), cli_token.c,
 * cli_template.c. Not a library: the helpers print and keep state for
 * main to finish with.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CLI_CMD_H
#define BERTH_CLI_CMD_H

#include "cli.h"
#include "valid.h"
#include "sandbox_fields.h"

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

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
#define O_DOCKERFILE	(1ULL << 42)
#define O_IMAGE		(1ULL << 43)
#define O_FILE		(1ULL << 44)
#define O_BUILD_ARG	(1ULL << 45)
#define O_PUBLISH_EXPOSED (1ULL << 46)
#define O_ZONE		(1ULL << 47)
#define O_TO		(1ULL << 48)
#define O_STAY		(1ULL << 49)
#define O_LAST		O_STAY

/* What only a microVM sandbox takes (not one with --address). */
#define O_VM_ONLY (O_MEMORY | O_VCPUS | O_DISK | O_TEMPLATE | O_IDLE_PAUSE | \
	O_IDLE_SUSPEND | O_MAX_LIFETIME | O_ENV | O_PUBLISH_EXPOSED)

#define MAX_RULE_OPTS 64

struct opts {
	const char *state_dir;
	int json;
	uint64_t given;		/* O_* seen */
	const char *address;
	const char *zone;	/* sandbox create --zone: placement */
	const char *to;		/* sandbox move --to: the fleet host */
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
	const char *dockerfile, *image, *file;	/* template build */
	const char *build_arg[MAX_RULE_OPTS];
	int nbuild_arg;
};

struct cmd;
typedef int (*cmd_fn)(const struct cmd *, struct opts *, char **args, int n);

/* A row of the command table (netctl.c). */
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

/* cli_files.c: fd's bytes (len, or -1 chunked) as a request's body */
int cli_upload(int fd, const char *what, const char *method,
    const char *target, const char *ctype, long long len, json_t **doc);

/* ---- cli_util.c: output state, talking to berthd, checks ---- */

extern const char *progname;
extern struct cli_target tgt;
extern int json_mode;		/* --json was given */
extern json_t *out_doc;	/* what --json prints at the end */
extern int out_streamed;	/* the command printed its own lines */
extern char last_fail[1024];	/* the last error line, for --json */

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void out_set(json_t *doc);
void out_error(const char *code, const char *msg);
int finish(int rc);

int api_error(const struct cli_response *, const struct opts *);
int call(const struct opts *, const char *method, const char *target,
    json_t *body, json_t **doc);
int call_list(const struct opts *, const char *base, const char *key,
    json_t **doc);
int delete_one(struct opts *, const char *target, const char *done,
    json_t *doc);

const char *jstr(json_t *obj, const char *key);
const char *jtime(json_t *obj, const char *key, char *buf, size_t len);

#define MAX_COLS 8

struct table {
	int ncols;
	size_t width[MAX_COLS];
	char **cells;		/* rows * ncols strings */
	size_t nrows, cap;
};

void table_add(struct table *, const char *const *row);
void table_print(struct table *);
void print_ports(json_t *ports, int with_sandbox, const char *indent);
const char *human_bytes(json_int_t v);
void write_all(int fd, const unsigned char *p, size_t len);

int check_id(const char *id);
int check_port(const char *s, unsigned *port);
int check_name(const char *what, const char *name);
int check_template_name(const char *name);
int span_arg(const char *opt, const char *s, int default_ok, json_t *body,
    const char *key);

/* ---- the commands, one family a file ---- */

/* (status, mcp and help are netctl.c's own) */

/* cli_sandbox.c */
int c_sandbox_add(const struct cmd *, struct opts *, char **, int);
int c_sandbox_fork(const struct cmd *, struct opts *, char **, int);
int c_sandbox_checkpoint(const struct cmd *, struct opts *, char **, int);
int c_sandbox_restore(const struct cmd *, struct opts *, char **, int);
int c_sandbox_move(const struct cmd *, struct opts *, char **, int);
int c_checkpoint_ls(const struct cmd *, struct opts *, char **, int);
int c_checkpoint_rm(const struct cmd *, struct opts *, char **, int);
int c_sandbox_set(const struct cmd *, struct opts *, char **, int);
int c_sandbox_rm(const struct cmd *, struct opts *, char **, int);
int c_sandbox_ls(const struct cmd *, struct opts *, char **, int);
int c_sandbox_show(const struct cmd *, struct opts *, char **, int);
int c_lifecycle(const struct cmd *, struct opts *, char **, int);
int c_sandbox_console(const struct cmd *, struct opts *, char **, int);
int c_sandbox_events(const struct cmd *, struct opts *, char **, int);
int c_fleet_hosts(const struct cmd *, struct opts *, char **, int);
int c_fleet_drain(const struct cmd *, struct opts *, char **, int);

/* cli_exec.c */
int c_sandbox_exec(const struct cmd *, struct opts *, char **, int);
int c_sandbox_ps(const struct cmd *, struct opts *, char **, int);
int c_sandbox_logs(const struct cmd *, struct opts *, char **, int);
int c_sandbox_kill(const struct cmd *, struct opts *, char **, int);
int c_sandbox_wait(const struct cmd *, struct opts *, char **, int);
int c_sandbox_attach(const struct cmd *, struct opts *, char **, int);

/* cli_files.c */
int c_sandbox_cp(const struct cmd *, struct opts *, char **, int);
int c_sandbox_files(const struct cmd *, struct opts *, char **, int);
int c_sandbox_mkdir(const struct cmd *, struct opts *, char **, int);
int c_sandbox_rm_path(const struct cmd *, struct opts *, char **, int);
int c_sandbox_mv(const struct cmd *, struct opts *, char **, int);
int c_sandbox_cat(const struct cmd *, struct opts *, char **, int);
int c_sandbox_watch(const struct cmd *, struct opts *, char **, int);

/* cli_port.c */
int c_port_publish(const struct cmd *, struct opts *, char **, int);
int c_port_unpublish(const struct cmd *, struct opts *, char **, int);
int c_port_ls(const struct cmd *, struct opts *, char **, int);

/* cli_egress.c */
int c_egress_show(const struct cmd *, struct opts *, char **, int);
int c_egress_add(const struct cmd *, struct opts *, char **, int);
int c_egress_rm(const struct cmd *, struct opts *, char **, int);
int c_egress_mode(const struct cmd *, struct opts *, char **, int);
int c_egress_reset(const struct cmd *, struct opts *, char **, int);
int c_egress_log(const struct cmd *, struct opts *, char **, int);
int c_policy_show(const struct cmd *, struct opts *, char **, int);
int c_policy_set(const struct cmd *, struct opts *, char **, int);

/* cli_token.c */
int c_token_create(const struct cmd *, struct opts *, char **, int);
int c_token_ls(const struct cmd *, struct opts *, char **, int);
int c_token_rotate(const struct cmd *, struct opts *, char **, int);
int c_token_revoke(const struct cmd *, struct opts *, char **, int);

/* cli_template.c */
int c_template_ls(const struct cmd *, struct opts *, char **, int);
int c_template_add(const struct cmd *, struct opts *, char **, int);
int c_template_build(const struct cmd *, struct opts *, char **, int);
int c_template_rm(const struct cmd *, struct opts *, char **, int);

/* --env NAME=VALUE options into body's "env" (clear_ok: "--env -" is
 * null); -1 after saying why */
int env_arg(const struct opts *, int clear_ok, json_t *body);
/* the sandbox fields' flags (sandbox_fields.h) with one of flags */
const char *field_flags(unsigned flags, char *buf, size_t size);

/* Control bytes in s (server text) made '?' in place (keep_lines: not
 * newlines and tabs): nothing printed can drive a terminal. */
void text_clean(char *s, int keep_lines);

#endif
