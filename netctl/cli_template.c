/*
 * cli_template.c — netctl's template commands: ls, add, build (progress
 * followed until the build ends), rm.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
c_template_ls(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[7] = { "NAME", "VERSION", "SANDBOXES", "SIZE", "SOURCE",
	    "CREATED", "DIR" };
	char tbuf[32], nbuf[16], sbuf[32], src[96];
	json_t *doc, *k, *so, *sz;
	const char *from, *sha;
	size_t i;
	int rc;

	if ((rc = call_list(o, "/v1/templates", "templates", &doc)) != EXIT_OK ||
	    o->json) {
		json_decref(doc);
		return rc;
	}
	t.ncols = 7;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "templates"), i, k) {
		row[0] = jstr(k, "name");
		row[1] = json_is_string(json_object_get(k, "version")) ?
		    jstr(k, "version") : "-";
		snprintf(nbuf, sizeof(nbuf), "%lld", (long long)
		    json_integer_value(json_object_get(k, "sandboxes")));
		row[2] = nbuf;
		sz = json_object_get(k, "size");
		snprintf(sbuf, sizeof(sbuf), "%s", json_is_integer(sz) ?
		    human_bytes(json_integer_value(sz)) : "-");
		row[3] = sbuf;
		/* dockerfile sha256:0123456789ab, image ..., debian, dir */
		so = json_object_get(k, "source");
		from = json_string_value(json_object_get(so, "from"));
		sha = json_string_value(json_object_get(so, "sha256"));
		snprintf(src, sizeof(src), "%s%s%.12s", from != NULL ? from : "-",
		    sha != NULL ? " sha256:" : "", sha != NULL ? sha : "");
		row[4] = src;
		row[5] = json_is_true(json_object_get(k, "builtin")) ?
		    "(built in)" : jtime(k, "created", tbuf, sizeof(tbuf));
		row[6] = jstr(k, "dir");
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

int
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

/* The source of a build from an image POSTed as the body: --image's
 * file, or --dockerfile's directory as a tar (tar -C DIR -cf - .). The
 * answer's JSON in *doc: EXIT_* */
static int
build_post(struct opts *o, const char *target, json_t **doc)
{
	char t[8192], enc[1200];
	const char *src = o->image != NULL ? o->image : o->dockerfile;
	struct stat st;
	int fd, p[2], rc, i, status;
	long long len = -1;
	pid_t pid = -1;

	snprintf(t, sizeof(t), "%s?from=%s", target, o->image != NULL ?
	    "image" : "dockerfile");
	if (o->file != NULL) {
		cli_pct_path(o->file, enc, sizeof(enc));
		snprintf(t + strlen(t), sizeof(t) - strlen(t), "&file=%s", enc);
	}
	for (i = 0; i < o->nbuild_arg; i++) {
		if (strchr(o->build_arg[i], '=') == NULL) {
			fail("--build-arg %s: K=V", o->build_arg[i]);
			return EXIT_USAGE;
		}
		cli_pct_path(o->build_arg[i], enc, sizeof(enc));
		snprintf(t + strlen(t), sizeof(t) - strlen(t), "&build_arg=%s",
		    enc);
	}
	if (o->image != NULL) {
		if ((fd = open(src, O_RDONLY | O_CLOEXEC)) < 0 ||
		    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			fail("--image %s: %s", src, fd < 0 ? strerror(errno) :
			    "not a file (a docker save archive or an OCI layout "
			    "tarball)");
			if (fd >= 0)
				close(fd);
			return EXIT_USAGE;
		}
		len = (long long)st.st_size;
	} else {
		if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fail("--dockerfile %s: not a directory (the build "
			    "context)", src);
			return EXIT_USAGE;
		}
		if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
			fail("tar: %s", strerror(errno));
			return EXIT_REFUSED;
		}
		if (pid == 0) {
			dup2(p[1], STDOUT_FILENO);
			execlp("tar", "tar", "-C", src, "-cf", "-", ".",
			    (char *)NULL);
			fprintf(stderr, "%s: cannot run tar: %s\n", progname,
			    strerror(errno));
			_exit(127);
		}
		close(p[1]);
		fd = p[0];
	}
	/* the upload, then berthd's answer once it has it all */
	cli_timeout_secs = cli_timeout_secs < 600 ? 600 : cli_timeout_secs;
	rc = cli_upload(fd, src, "POST", t, o->image != NULL ?
	    "application/octet-stream" : "application/x-tar", len, doc);
	close(fd);
	if (pid > 0 && (waitpid(pid, &status, 0) != pid ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0) && rc == EXIT_OK) {
		/* berthd took what tar gave before it failed */
		fail("tar of %s failed: its build was given part of it", src);
		rc = EXIT_REFUSED;
	}
	return rc;
}

/* POST .../build, then its progress every half second (GET ?after=N)
 * onto stderr until it ends: exit 0 built, 1 failed. */
int
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
	if (o->image != NULL && o->dockerfile != NULL) {
		fail("--dockerfile or --image, not both");
		return EXIT_USAGE;
	}
	if (o->image == NULL && o->dockerfile == NULL &&
	    (o->file != NULL || o->nbuild_arg > 0)) {
		fail("-f and --build-arg go with --dockerfile");
		return EXIT_USAGE;
	}
	if (o->image != NULL || o->dockerfile != NULL)
		rc = build_post(o, target, &doc);
	else
		rc = call(o, "POST", target, NULL, &doc);
	if (rc != EXIT_OK)
		return rc;
	if (doc == NULL) {
		fail("template %s: berthd's answer is not JSON", a[0]);
		return EXIT_UNREACHABLE;
	}
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
		fail("template %s: build failed: %s%s%s%s", a[0],
		    jstr(doc, "reason"), json_is_string(json_object_get(doc,
		    "log")) ? " (its whole log: " : "", json_is_string(
		    json_object_get(doc, "log")) ? jstr(doc, "log") : "",
		    json_is_string(json_object_get(doc, "log")) ? ")" : "");
		json_decref(doc);
		return EXIT_REFUSED;
	}
	if (!o->json)
		printf("template %s: %s\n", a[0], jstr(doc, "dir"));
	json_decref(doc);
	return EXIT_OK;
}

int
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
