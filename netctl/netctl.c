/*
 * netctl.c — the netctl command-line client of berthd's control API:
 * parses `netctl [options] <noun> <verb> [args]`, checks every argument
 * locally (so a typo gets a precise message before any request), sends
 * one request over <state>/control.sock and prints a table, a URL, or
 * with --json the API's JSON as it came.
 *
 * Exit codes: 0 done, 1 berthd refused (4xx/5xx), 2 usage error,
 * 3 berthd cannot be reached.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli.h"
#include "valid.h"

#include <jansson.h>

#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BERTH_STATE_DIR_DEFAULT
#define BERTH_STATE_DIR_DEFAULT "/var/lib/berth"
#endif

enum {
	EXIT_OK = 0,
	EXIT_REFUSED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3
};

/* Options, and which commands may take them. */
enum {
	O_ADDRESS = 1 << 0,
	O_HOST_HEADER = 1 << 1,
	O_PRIVATE = 1 << 2,
	O_PUBLIC = 1 << 3,
	O_HOST = 1 << 4,
};

struct opts {
	const char *state_dir;
	int json;
	unsigned given;		/* O_* seen */
	const char *address;
	const char *host_header;
	char host[PX_HOSTNAME_MAX + 2];
	int private_;
};

struct cmd;
typedef int (*cmd_fn)(const struct cmd *, struct opts *, char **args, int n);

struct cmd {
	const char *noun;
	const char *verb;	/* NULL: the noun alone */
	const char *alias;	/* another verb for the same command */
	const char *args;	/* usage after "netctl noun verb" */
	int min, max;		/* positional arguments */
	unsigned opts;		/* O_* allowed */
	cmd_fn fn;
	const char *help;
};

static const char *progname = "netctl";
static char sock_path[4096];

static void __attribute__((format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- talking to berthd ---- */

/* Prints the API's error as one line; returns the exit code for it. */
static int
api_error(const struct cli_response *r, const struct opts *o)
{
	json_t *doc, *e;
	const char *msg = NULL, *field = NULL;

	if (o->json && r->len > 0)
		fwrite(r->body, 1, r->len, stdout);
	doc = json_loadb(r->body, r->len, 0, NULL);
	if ((e = json_object_get(doc, "error")) != NULL) {
		msg = json_string_value(json_object_get(e, "message"));
		field = json_string_value(json_object_get(e, "field"));
	}
	if (msg != NULL && field != NULL)
		fail("%s: %s", field, msg);
	else if (msg != NULL)
		fail("%s", msg);
	else
		fail("berthd answered HTTP %d", r->status);
	json_decref(doc);
	return EXIT_REFUSED;
}

/*
 * One request. On a 2xx answer returns EXIT_OK with *doc the parsed JSON
 * (NULL for an empty body) and, with --json, the body already printed.
 * Otherwise prints the one-line error and returns the exit code.
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
	rc = cli_http_request(sock_path, method, target, text, &r, &unreachable,
	    err, sizeof(err));
	free(text);
	if (rc == -1) {
		fail("%s", err);
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
			cli_response_free(&r);
			return EXIT_UNREACHABLE;
		}
		if (o->json)
			fwrite(r.body, 1, r.len, stdout);
	}
	cli_response_free(&r);
	return EXIT_OK;
}

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
	if (!o->json)
		printf("berthd is %s (control socket %s)\n",
		    strcmp(jstr(doc, "status"), "ok") == 0 ? "up" :
		    jstr(doc, "status"), sock_path);
	json_decref(doc);
	return EXIT_OK;
}

static int
c_sandbox_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (o->address == NULL) {
		fail("sandbox add needs --address <ip>: VM-backed sandboxes are "
		    "not available yet");
		return EXIT_USAGE;
	}
	if (!px_valid_ip(o->address)) {
		fail("--address: not an IP address: '%s'", o->address);
		return EXIT_USAGE;
	}
	body = json_pack("{s:s, s:s}", "id", a[0], "address", o->address);
	rc = call(o, "POST", "/v1/sandboxes", body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("sandbox %s added (%s, %s)\n", jstr(doc, "id"),
		    jstr(doc, "address"), jstr(doc, "state"));
	json_decref(doc);
	return rc;
}

static int
c_sandbox_rm(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s", a[0]);
	if ((rc = call(o, "DELETE", target, NULL, &doc)) == EXIT_OK && !o->json)
		printf("sandbox %s removed\n", a[0]);
	json_decref(doc);
	return rc;
}

static int
c_sandbox_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[5] = { "ID", "STATE", "ADDRESS", "EXTERNAL", "CREATED" };
	char tbuf[32];
	json_t *doc, *sb;
	size_t i;
	int rc;

	if ((rc = call(o, "GET", "/v1/sandboxes", NULL, &doc)) != EXIT_OK ||
	    o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 5;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "sandboxes"), i, sb) {
		row[0] = jstr(sb, "id");
		row[1] = jstr(sb, "state");
		row[2] = jstr(sb, "address");
		row[3] = json_is_true(json_object_get(sb, "external")) ?
		    "yes" : "no";
		row[4] = jtime(sb, "created", tbuf, sizeof(tbuf));
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
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
	printf("address:   %s\n", jstr(doc, "address"));
	printf("external:  %s\n", json_is_true(json_object_get(doc,
	    "external")) ? "yes" : "no");
	printf("created:   %s\n", jtime(doc, "created", tbuf, sizeof(tbuf)));
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
	json_t *doc;
	int rc;

	if (check_id(a[0]) == -1 || check_port(a[1], &port) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%u", a[0], port);
	rc = call(o, "DELETE", target, NULL, &doc);
	json_decref(doc);
	return rc;
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
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	print_ports(json_object_get(doc, "ports"), 1, "");
	json_decref(doc);
	return EXIT_OK;
}

static int c_help(const struct cmd *, struct opts *, char **, int);

static const struct cmd cmds[] = {
	{ "sandbox", "add", "create", "<id> --address <ip>", 1, 1, O_ADDRESS,
	  c_sandbox_add, "Register an externally managed sandbox (a container "
	  "or another host)\nreachable at <ip>; its ports can then be "
	  "published." },
	{ "sandbox", "rm", "delete", "<id>", 1, 1, 0, c_sandbox_rm,
	  "Remove a sandbox and unpublish all its ports." },
	{ "sandbox", "ls", "list", "", 0, 0, 0, c_sandbox_ls,
	  "List sandboxes: ID STATE ADDRESS EXTERNAL CREATED." },
	{ "sandbox", "show", NULL, "<id>", 1, 1, 0, c_sandbox_show,
	  "Show one sandbox and its published ports." },
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
	{ "status", NULL, NULL, "", 0, 0, 0, c_status,
	  "Check that berthd answers on its control socket." },
	{ "help", NULL, NULL, "[<command>]", 0, 2, 0, c_help,
	  "Show help for all commands or one." },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

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

	fprintf(f, "usage: %s [-s STATE_DIR] [--json] <noun> <verb> [args]\n\n"
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
	    "      --json           print the API's JSON instead of tables\n"
	    "  -h, --help           this help; '%s help <command>' for one "
	    "command\n\n"
	    "exit status: 0 done, 1 berthd refused the request, 2 usage error, "
	    "3 berthd\ncannot be reached.\n", BERTH_STATE_DIR_DEFAULT, progname);
}

static int
c_help(const struct cmd *c, struct opts *o, char **a, int n)
{
	size_t i;
	int found = 0;

	if (n == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	for (i = 0; i < NCMDS; i++) {
		const struct cmd *k = &cmds[i];

		if (strcmp(k->noun, a[0]) != 0)
			continue;
		if (n == 2 && (k->verb == NULL || (strcmp(k->verb, a[1]) != 0 &&
		    (k->alias == NULL || strcmp(k->alias, a[1]) != 0))))
			continue;
		printf("%susage: ", found ? "\n" : "");
		usage_line(stdout, k);
		if (k->alias != NULL)
			printf("   (also: %s %s %s)\n", progname, k->noun, k->alias);
		printf("\n%s\n", k->help);
		found = 1;
	}
	if (!found) {
		fail("no command '%s%s%s'; try '%s help'", a[0], n == 2 ? " " :
		    "", n == 2 ? a[1] : "", progname);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const char *
opt_name(unsigned o)
{
	switch (o) {
	case O_ADDRESS: return "--address";
	case O_HOST_HEADER: return "--host-header";
	case O_PRIVATE: return "--private";
	case O_PUBLIC: return "--public";
	case O_HOST: return "--host";
	default: return "?";
	}
}

int
main(int argc, char **argv)
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
		{ NULL, 0, NULL, 0 }
	};
	struct opts o;
	const struct cmd *c = NULL;
	const char *env;
	char **args;
	size_t i, k;
	int ch, nargs, want_help = 0, used;
	unsigned bit;

	memset(&o, 0, sizeof(o));
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":s:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.state_dir = optarg;
			break;
		case 'j':
			o.json = 1;
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
		if (want_help) {
			usage(stdout);
			return EXIT_OK;
		}
		usage(stderr);
		return EXIT_USAGE;
	}
	for (i = 0; i < NCMDS && c == NULL; i++) {
		const struct cmd *k2 = &cmds[i];

		if (strcmp(k2->noun, args[0]) != 0)
			continue;
		if (k2->verb == NULL)
			c = k2;
		else if (nargs >= 2 && (strcmp(k2->verb, args[1]) == 0 ||
		    (k2->alias && strcmp(k2->alias, args[1]) == 0)))
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
		return EXIT_USAGE;
	}
	for (bit = 1; bit <= O_HOST; bit <<= 1)
		if ((o.given & bit) && !(c->opts & bit)) {
			fail("option %s does not apply to '%s%s%s'",
			    opt_name(bit), c->noun, c->verb ? " " : "",
			    c->verb ? c->verb : "");
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
	return c->fn(c, &o, args, nargs);
}
