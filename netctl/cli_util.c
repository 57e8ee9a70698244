/*
 * cli_util.c — netctl's shared plumbing: the output state that --json prints
 * once at the end (out_set, fail, finish), the request helpers every
 * command goes through (call, call_list, delete_one) with the one-line
 * error and exit code for an API error, the table printer, and the
 * argument checks more than one family uses.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *progname = "netctl";
struct cli_target tgt;
int json_mode;
int out_streamed;
char last_fail[1024];
json_t *out_doc;

/* The error line on stderr, kept for --json's error document. */
void
fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_fail, sizeof(last_fail), fmt, ap);
	va_end(ap);
	/* what the server said is in it: no escape sequence of anyone's
	 * reaches the terminal */
	text_clean(last_fail, 0);
	fprintf(stderr, "%s: %s\n", progname, last_fail);
}

void
text_clean(char *s, int keep_lines)
{
	for (; *s != '\0'; s++)
		if (((unsigned char)*s < 0x20 && !(keep_lines && (*s == '\n' ||
		    *s == '\t'))) || (unsigned char)*s == 0x7f)
			*s = '?';
}

/* The document --json prints (reference stolen; replaces the last). */
void
out_set(json_t *doc)
{
	json_decref(out_doc);
	out_doc = doc;
}

/* An error document of netctl's own (no HTTP status behind it). */
void
out_error(const char *code, const char *msg)
{
	out_set(json_pack("{s:{s:n, s:s, s:s}}", "error", "status", "code",
	    code, "message", msg));
}

/* With --json, prints the one document; returns the exit code. */
int
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
int
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
int
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

/*
 * A whole list: follows "next" page by page (1000 rows a page) and
 * returns {key: [...all rows]} in *doc, which --json prints.
 */
int
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

/*
 * DELETE of target; on success prints done (a line), or with --json
 * what (reference stolen), since the API answers 204 without a body.
 */
int
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

/* ---- output helpers ---- */

const char *
jstr(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "-";
}

const char *
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

void
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

void
table_print(struct table *t)
{
	size_t r;
	int i;

	for (r = 0; r < t->nrows; r++) {
		for (i = 0; i < t->ncols; i++) {
			char *s = t->cells[r * (size_t)t->ncols + (size_t)i];

			if (s == NULL)
				s = (char *)"?";
			else
				text_clean(s, 0);	/* server text, one line */
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
void
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

/* 1.5 GiB, 312 MiB, 4.0 KiB: a size for people (static buffer) */
const char *
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

void
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

/* ---- argument checks ---- */

int
check_id(const char *id)
{
	if (px_valid_sandbox_id(id, strlen(id)))
		return 0;
	fail("invalid sandbox id '%s': use 1-%d lower-case letters, digits or "
	    "'-', starting with a letter or digit", id, PX_SANDBOX_ID_MAX);
	return -1;
}

int
check_port(const char *s, unsigned *port)
{
	if ((*port = px_parse_port(s, strlen(s))) != 0)
		return 0;
	fail("invalid port '%s': use a number from 1 to 65535 (no sign, no "
	    "leading zero)", s);
	return -1;
}

int
check_name(const char *what, const char *name)
{
	if (px_valid_sandbox_id(name, strlen(name)))
		return 0;
	fail("invalid %s name '%s': use 1-%d lower-case letters, digits or "
	    "'-', starting with a letter or digit", what, name,
	    PX_SANDBOX_ID_MAX);
	return -1;
}

/*
 * A duration option: "90s", "10m", "2h", "1d", "never", or (default_ok)
 * "default", which sends null (berth.conf's value). berthd checks the
 * range.
 */
int
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

int
check_template_name(const char *name)
{
	if (px_valid_sandbox_id(name, strlen(name)) && strlen(name) <= 32)
		return 0;
	fail("invalid template name '%s': use 1-32 lower-case letters, digits "
	    "or '-', starting with a letter or digit", name);
	return -1;
}

/*
 * The --env NAME=VALUE options into body's "env" object (none given:
 * nothing; clear: a lone "--env -" sets it to null, a sandbox's env
 * removed). -1 after saying which one is wrong.
 */
int
env_arg(const struct opts *o, int clear_ok, json_t *body)
{
	json_t *env = NULL;
	int i;

	if (clear_ok && o->nenv == 1 && strcmp(o->env[0], "-") == 0) {
		json_object_set_new(body, "env", json_null());
		return 0;
	}
	for (i = 0; i < o->nenv; i++) {
		const char *eq = strchr(o->env[i], '=');
		char name[257];

		if (eq == NULL || eq == o->env[i] ||
		    (size_t)(eq - o->env[i]) >= sizeof(name)) {
			fail("--env: '%s' is not NAME=VALUE", o->env[i]);
			return -1;
		}
		memcpy(name, o->env[i], (size_t)(eq - o->env[i]));
		name[eq - o->env[i]] = '\0';
		if (env == NULL)
			json_object_set_new(body, "env", env = json_object());
		json_object_set_new(env, name, json_string(eq + 1));
	}
	return 0;
}

/*
 * The netctl flags of the sandbox fields (sandbox_fields.h) with one of
 * the flags, "--memory, --vcpus, ..." in buf.
 */
const char *
field_flags(unsigned flags, char *buf, size_t size)
{
#define FLAG(m, col, api, kind, fl, arg, cli, help) \
	if (((fl) & flags) && (cli) != NULL) \
		n += (size_t)snprintf(buf + n, n < size ? size - n : 0, \
		    "%s%s", n ? ", " : "", (const char *)(cli));
	size_t n = 0;

	buf[0] = '\0';
	PX_SANDBOX_FIELDS(FLAG)
#undef FLAG
	return buf;
}
