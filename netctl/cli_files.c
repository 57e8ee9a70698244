/*
 * cli_files.c — netctl's commands for a guest's files: cp (streamed both
 * ways), files, mkdir, rm with a path, mv, cat and watch.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <openssl/evp.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

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
	if ((*rp)->status < 200 || (*rp)->status > 299) {
		struct cli_response e;

		e.status = (*rp)->status;
		e.body = (char *)(*rp)->body;
		e.len = (*rp)->len;
		return api_error(&e, NULL);
	}
	return EXIT_OK;
}

/* The bytes of fd (len of them, or -1: chunked, to its end) as the
 * body of method target, what naming it in errors: EXIT_OK with the
 * answer's JSON in *doc (a 2xx), or the error printed. */
int
cli_upload(int fd, const char *what, const char *method, const char *target,
    const char *ctype, long long len, json_t **doc)
{
	struct cli_stream *s;
	struct cli_stream_resp *r;
	char err[512], buf[65536];
	ssize_t n;
	int unreachable, rc;

	*doc = NULL;
	if ((s = cli_stream_open(&tgt, method, target, ctype, len,
	    &unreachable, err, sizeof(err))) == NULL) {
		fail("%s", err);
		out_error("unreachable", err);
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
			fail("%s: %s", what, strerror(errno));
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
	rc = cp_answer(s, &r, -1, NULL, 0);
	if (rc == EXIT_OK)
		*doc = json_loadb((const char *)r->body, r->len, 0, NULL);
	cli_stream_close(s);
	return rc;
}

static int
cp_put(const char *local, const char *id, const char *path)
{
	struct stat st;
	char target[8400], enc[8200];
	json_t *doc;
	long long len = -1;
	int fd, rc;

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
	rc = cli_upload(fd, local, "PUT", target, "application/octet-stream",
	    len, &doc);
	if (fd != STDIN_FILENO)
		close(fd);
	if (doc != NULL)
		out_set(doc);
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

int
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

int
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

int
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

int
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

int
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

int
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

int
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
