/*
 * api/templates.c — templates (/v1/templates): list, add, show, remove, build.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

#include <dirent.h>

/* ---- templates ---- */

/* What a template's directory holds on disk (its files' blocks: root
 * images are sparse), and its version (a built template's "current"
 * names one). -1 when it cannot be read. */
static long long
template_size(const char *dir, char *version, size_t vlen)
{
	char real[PATH_MAX], p[PATH_MAX + 256];
	const char *base;
	struct dirent *de;
	struct stat st;
	long long sum = 0;
	DIR *d;

	version[0] = '\0';
	if (realpath(dir, real) == NULL || (d = opendir(real)) == NULL)
		return -1;
	base = strrchr(real, '/') + 1;
	if (base[0] == 'v' && base[1] >= '0' && base[1] <= '9')
		snprintf(version, vlen, "%s", base);
	while ((de = readdir(d)) != NULL) {
		snprintf(p, sizeof(p), "%s/%s", real, de->d_name);
		if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
			sum += (long long)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

/* What it was made of: a build from an image records it (source.json:
 * from, sha256, bytes, file); berth's own builds are named for their
 * builder; anything else was added as a directory. */
static json_t *
template_source(const struct px_template *t)
{
	static const char *const own[] = { "debian", "minimal" };
	char p[PATH_MAX], tail[64];
	json_t *o;
	size_t i, n = strlen(t->dir);

	snprintf(p, sizeof(p), "%s/source.json", t->dir);
	if ((o = json_load_file(p, 0, NULL)) != NULL && json_is_object(o))
		return o;
	json_decref(o);
	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		snprintf(tail, sizeof(tail), "/templates/%s/current", own[i]);
		if (n >= strlen(tail) && strcmp(t->dir + n - strlen(tail),
		    tail) == 0)
			return json_pack("{s:s}", "from", own[i]);
	}
	/* vm_template minimal's, built at start */
	if (n > 18 && strcmp(t->dir + n - 18, "/templates/default") == 0)
		return json_pack("{s:s}", "from", "minimal");
	return json_pack("{s:s}", "from", "dir");
}

static json_t *
template_json(struct px_control *ctl, const struct px_template *t, int builtin)
{
	char err[256], version[64];
	long long size;
	int n = 0;

	(void)px_store_template_users(ctl->store, t->name, &n, err, sizeof(err));
	size = t->dir[0] ? template_size(t->dir, version, sizeof(version)) : -1;
	if (!t->dir[0])
		version[0] = '\0';
	return json_pack("{s:s, s:s?, s:b, s:o, s:i, s:s?, s:o, s:o}", "name",
	    t->name, "dir", t->dir[0] ? t->dir : NULL, "builtin", builtin,
	    "created", builtin ? json_null() :
	    json_integer((json_int_t)t->created), "sandboxes", n,
	    "version", version[0] ? version : NULL, "size", size >= 0 ?
	    json_integer((json_int_t)size) : json_null(), "source",
	    t->dir[0] ? template_source(t) : json_null());
}

static void
template_default(struct px_control *ctl, struct px_template *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", PX_TEMPLATE_DEFAULT);
	if (ctl->template_dir != NULL)
		snprintf(t->dir, sizeof(t->dir), "%s", ctl->template_dir);
}

struct tpl_ctx {
	struct px_control *ctl;
	json_t *array;
	struct page *pg;
	int default_done;
};

static int
add_template_row(struct tpl_ctx *tc, const struct px_template *t, int builtin)
{
	int rc;

	if ((rc = api_page_row(tc->pg, t->name, strcmp(t->name, tc->pg->after) > 0)))
		return rc == 1 ? 0 : rc;
	return json_array_append_new(tc->array, template_json(tc->ctl, t,
	    builtin)) == 0 ? 0 : 1;
}

/* Stored templates come by name; "default" joins them in its place. */
static int
add_template(const struct px_template *t, void *arg)
{
	struct tpl_ctx *tc = arg;
	struct px_template d;
	int rc;

	if (!tc->default_done && strcmp(t->name, PX_TEMPLATE_DEFAULT) > 0) {
		tc->default_done = 1;
		template_default(tc->ctl, &d);
		if ((rc = add_template_row(tc, &d, 1)) != 0)
			return rc;
	}
	return add_template_row(tc, t, 0);
}

void
api_template_list(struct req *r)
{
	struct px_control *ctl = r->c->ctl;
	struct page pg;
	struct tpl_ctx tc = { ctl, NULL, &pg, 0 };
	struct px_template d;
	char err[256];
	int rc;

	if (api_page_parse(r, &pg) == -1)
		return;
	if ((tc.array = json_array()) == NULL) {
		api_reply_error(r, 500, NULL, NULL, "out of memory");
		return;
	}
	rc = px_store_template_list(ctl->store, add_template, &tc, err,
	    sizeof(err));
	if (rc == 0 && !tc.default_done) {
		template_default(ctl, &d);
		rc = add_template_row(&tc, &d, 1);
	}
	if (rc != 0 && rc != PAGE_FULL) {
		json_decref(tc.array);
		if (rc > 0)
			snprintf(err, sizeof(err), "out of memory");
		api_reply_store(r, rc > 0 ? PX_STORE_ERR : rc, NULL, err);
		return;
	}
	api_reply_json(r, 200, api_page_doc("templates", tc.array, &pg));
}

int
api_check_template_name(struct req *r, const char *name)
{
	char buf[64];

	if (px_template_name_valid(name))
		return 0;
	api_reply_error(r, 400, NULL, "name", "not a valid template name: '%s' "
	    "(1-%d lower-case letters, digits or '-', not starting with '-')",
	    api_shown(buf, sizeof(buf), name), PX_TEMPLATE_NAME_MAX);
	return -1;
}

void
api_template_add(struct req *r)
{
	static const char *const fields[] = { "name", "dir", NULL };
	struct px_control *ctl = r->c->ctl;
	struct px_template t;
	const char *name, *dir;
	char err[512], buf[64];
	json_t *obj;
	int rc;

	if ((obj = api_body_object(r, fields, 0)) == NULL)
		return;
	if ((rc = api_string_field(r, obj, "name", 0, &name)) <= 0) {
		if (rc == 0)
			api_reply_error(r, 400, NULL, "name", "required");
		goto out;
	}
	if (api_check_template_name(r, name) == -1)
		goto out;
	if (strcmp(name, PX_TEMPLATE_DEFAULT) == 0) {
		api_reply_error(r, 409, NULL, "name", "'default' is the built-in "
		    "template (berth.conf's template directive sets it)");
		goto out;
	}
	if ((rc = api_string_field(r, obj, "dir", 0, &dir)) <= 0) {
		if (rc == 0)
			api_reply_error(r, 400, NULL, "dir", "required");
		goto out;
	}
	if (dir[0] != '/' || strlen(dir) >= sizeof(t.dir)) {
		api_reply_error(r, 400, NULL, "dir", "must be an absolute path "
		    "shorter than %zu bytes, not '%s'", sizeof(t.dir),
		    api_shown(buf, sizeof(buf), dir));
		goto out;
	}
	if (ctl->hooks.template_check != NULL &&
	    ctl->hooks.template_check(dir, err, sizeof(err),
	    ctl->hooks.arg) != 0) {
		api_reply_error(r, 400, NULL, "dir", "not a usable template: %s", err);
		goto out;
	}
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "%s", name);
	snprintf(t.dir, sizeof(t.dir), "%s", dir);
	t.created = (int64_t)time(NULL);
	if ((rc = px_store_template_add(ctl->store, &t, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, "name", err);
		goto out;
	}
	api_reply_json(r, 201, template_json(ctl, &t, 0));
out:
	json_decref(obj);
}

void
api_template_show(struct req *r)
{
	const char *name = r->id;
	struct px_control *ctl = r->c->ctl;
	struct px_template t;
	char err[256];
	int rc;

	if (strcmp(name, PX_TEMPLATE_DEFAULT) == 0) {
		template_default(ctl, &t);
		api_reply_json(r, 200, template_json(ctl, &t, 1));
		return;
	}
	if ((rc = px_store_template_get(ctl->store, name, &t, err,
	    sizeof(err))) != PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	api_reply_json(r, 200, template_json(ctl, &t, 0));
}

void
api_template_rm(struct req *r)
{
	const char *name = r->id;
	struct px_control *ctl = r->c->ctl;
	struct px_template t;
	char err[256];
	int rc;

	if (strcmp(name, PX_TEMPLATE_DEFAULT) == 0) {
		api_reply_error(r, 409, NULL, NULL, "'default' is the built-in "
		    "template: it cannot be removed");
		return;
	}
	if (ctl->hooks.template_forget != NULL &&
	    px_store_template_get(ctl->store, name, &t, err, sizeof(err)) !=
	    PX_STORE_OK)
		t.dir[0] = '\0';
	if ((rc = px_store_template_rm(ctl->store, name, err, sizeof(err))) !=
	    PX_STORE_OK) {
		api_reply_store(r, rc, NULL, err);
		return;
	}
	if (ctl->hooks.template_forget != NULL && t.dir[0] != '\0')
		ctl->hooks.template_forget(name, t.dir, ctl->hooks.arg);
	api_reply_empty(r, 204);
}

/* POST /v1/templates/{name}/build?from=dockerfile|image[&file=F]
 * [&build_arg=K=V...]: the body is the source, spooled as it comes
 * (CS_TPL); its end starts the build and answers 202 (streams.c). */
static void
template_build_from(struct req *r, const char *name)
{
	struct px_control *ctl = r->c->ctl;
	static char args[PX_TPL_BUILD_ARGS][1024];
	const char *argp[PX_TPL_BUILD_ARGS];
	char from[16], file[256], err[512];
	struct px_tpl_source src;
	struct cstream *cs;
	int rc, status = 500, n;
	void *h;

	if (ctl->hooks.template_spool == NULL) {
		api_reply_error(r, 409, NULL, NULL, "this berthd builds no "
		    "templates from images");
		return;
	}
	if (!r->c->rh.streamed) {
		api_reply_error(r, 400, NULL, NULL, "POST the source to "
		    "/v1/templates/%s/build?from=... as written here (no "
		    "encoded path segments)", name);
		return;
	}
	memset(&src, 0, sizeof(src));
	if (api_query_get(r, "from", from, sizeof(from)) != 1 ||
	    (strcmp(from, "dockerfile") != 0 && strcmp(from, "image") != 0)) {
		api_reply_error(r, 400, NULL, "from", "must be dockerfile (the "
		    "body a tar of the build context) or image (the body a "
		    "docker save archive or an OCI layout tarball)");
		return;
	}
	src.from = from;
	if ((rc = api_query_get(r, "file", file, sizeof(file))) == -1 ||
	    (rc == 1 && (file[0] == '\0' || file[0] == '/' ||
	    strstr(file, "..") != NULL))) {
		api_reply_error(r, 400, NULL, "file", "a path in the context "
		    "(relative, no '..', at most 255 bytes)");
		return;
	}
	src.file = rc == 1 ? file : NULL;
	for (n = 0; (rc = api_query_nth(r, "build_arg", (unsigned)n, args[n],
	    sizeof(args[n]))) == 1; n++) {
		if (args[n][0] == '=' || strchr(args[n], '=') == NULL ||
		    n + 1 == PX_TPL_BUILD_ARGS) {
			api_reply_error(r, 400, NULL, "build_arg", "K=V, at "
			    "most %d of them", PX_TPL_BUILD_ARGS - 1);
			return;
		}
		argp[n] = args[n];
	}
	if (rc == -1) {
		api_reply_error(r, 400, NULL, "build_arg", "K=V, at most 1023 "
		    "bytes");
		return;
	}
	if ((src.from[0] == 'i' && (src.file != NULL || n > 0))) {
		api_reply_error(r, 400, NULL, src.file ? "file" : "build_arg",
		    "only for from=dockerfile");
		return;
	}
	src.build_args = argp;
	src.nargs = n;
	if ((cs = calloc(1, sizeof(*cs))) == NULL) {
		api_reply_error(r, 503, NULL, NULL, "out of memory");
		return;
	}
	if ((h = ctl->hooks.template_spool(name, &src, &status, err,
	    sizeof(err), ctl->hooks.arg)) == NULL) {
		free(cs);
		api_reply_error(r, status, NULL, status == 400 ? "name" : NULL,
		    "%s", err);
		return;
	}
	cs->c = r->c;
	cs->kind = CS_TPL;
	cs->method = r->method;
	cs->tpl = h;
	snprintf(cs->id, sizeof(cs->id), "%s", name);
	api_cs_attach(cs);
}

/* POST /v1/templates/{name}/build: 202, the build runs on; GET
 * .../build?after=N: its state and progress lines from N on. */
void
api_template_build(struct req *r)
{
	const char *name = r->id;
	struct px_control *ctl = r->c->ctl;
	char err[512], buf[24], *end;
	unsigned long long after = 0;
	json_t *doc;
	int rc;

	if (ctl->hooks.template_build == NULL ||
	    ctl->hooks.template_build_status == NULL) {
		api_reply_error(r, 409, NULL, NULL, "this berthd runs no VMM: it "
		    "builds no templates");
		return;
	}
	if (r->method == HTTP_POST && api_query_get(r, "from", buf,
	    sizeof(buf)) != 0) {
		template_build_from(r, name);
		return;
	}
	if (r->method == HTTP_POST) {
		rc = ctl->hooks.template_build(name, err, sizeof(err),
		    ctl->hooks.arg);
		if (rc != 0) {
			api_reply_error(r, rc == -2 ? 400 : rc == -3 ? 409 : 500,
			    NULL, rc == -2 ? "name" : NULL, "%s", err);
			return;
		}
		after = 0;
	} else if ((rc = api_query_get(r, "after", buf, sizeof(buf))) != 0) {
		after = rc == 1 && buf[0] >= '0' && buf[0] <= '9' ?
		    strtoull(buf, &end, 10) : 0;
		if (rc == -1 || buf[0] < '0' || buf[0] > '9' || *end != '\0') {
			api_reply_error(r, 400, NULL, "after", "must be a line number");
			return;
		}
	}
	if ((doc = ctl->hooks.template_build_status(name, after,
	    ctl->hooks.arg)) == NULL) {
		api_reply_error(r, 404, NULL, NULL, "no build of template '%s' since "
		    "berthd started (POST to build it)", name);
		return;
	}
	api_reply_json(r, r->method == HTTP_POST ? 202 : 200, doc);
}
