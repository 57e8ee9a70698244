/*
 * cli_sandbox.c — netctl's sandbox commands: create (a microVM, an external
 * sandbox, or --from a checkpoint), fork, checkpoint and restore, set,
 * rm, ls, show, the lifecycle verbs (pause ... restart), events and the
 * console; `checkpoint ls|rm`; and `fleet hosts`, which shares the
 * fleet listing with `sandbox ls`.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * A VM-backed sandbox answers "creating" at once; its VM boots for a few
 * seconds. Wait for the outcome (up to 5 minutes) so that the command
 * ends running or with the reason it failed; *doc keeps the token. Over
 * TCP it asks with the new sandbox's own token when *doc has one: a
 * sandbox's token that forked itself may not read its forks.
 */
static int
wait_created(struct opts *o, const char *id, json_t **doc)
{
	const char *own = json_string_value(json_object_get(*doc, "token"));
	const char *mine = tgt.token;
	char target[128];
	int i, rc = EXIT_OK;

	snprintf(target, sizeof(target), "/v1/sandboxes/%s", id);
	if (tgt.url != NULL && own != NULL && own[0] != '\0')
		tgt.token = own;
	for (i = 0; i < 1200; i++) {
		json_t *now = NULL;
		const char *st;

		if ((rc = call(o, "GET", target, NULL, &now)) != EXIT_OK) {
			json_decref(now);
			break;
		}
		st = jstr(now, "state");
		if (strcmp(st, "creating") != 0) {
			json_object_set(*doc, "state", json_object_get(now, "state"));
			json_object_set(*doc, "address", json_object_get(now, "address"));
			json_decref(now);
			if (strcmp(st, "running") != 0) {
				fail("sandbox %s is %s: see 'netctl sandbox "
				    "events %s'", id, st, id);
				rc = EXIT_REFUSED;
			}
			break;
		}
		json_decref(now);
		usleep(250000);
	}
	if (i == 1200) {
		fail("sandbox %s is still being created: see 'netctl sandbox "
		    "show %s'", id, id);
		rc = EXIT_REFUSED;
	}
	tgt.token = mine;
	return rc;
}

/* Fleet mode: a sandbox placed on another host is not in this host's
 * store; the fleet's view (etcd) says when it left "creating". */
static int
wait_placed(struct opts *o, const char *id, const char *host, json_t **doc)
{
	int i;

	for (i = 0; i < 1200; i++) {
		json_t *now = NULL, *sb;
		const char *st = NULL;
		size_t k;
		int rc;

		if ((rc = call(o, "GET", "/v1/fleet/sandboxes", NULL, &now)) != EXIT_OK) {
			json_decref(now);
			return rc;
		}
		json_array_foreach(json_object_get(now, "sandboxes"), k, sb)
			if (strcmp(jstr(sb, "id"), id) == 0 &&
			    strcmp(jstr(sb, "host"), host) == 0)
				st = jstr(sb, "state");
		if (st != NULL && strcmp(st, "creating") != 0) {
			json_object_set_new(*doc, "state", json_string(st));
			json_decref(now);
			if (strcmp(st, "running") == 0)
				return EXIT_OK;
			fail("sandbox %s is %s on host %s: see 'netctl sandbox "
			    "events %s' there", id, st, host, id);
			return EXIT_REFUSED;
		}
		json_decref(now);
		usleep(250000);
	}
	fail("sandbox %s is still being created on host %s", id, host);
	return EXIT_REFUSED;
}

/* netctl sandbox fork SRC NEW [NEW...]: the forks, each waited for until
 * it runs; their tokens printed once (or the API's document). */
int
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
		char flags[256];

		fail("--from: the sandbox is made from the checkpoint, with its "
		    "template, sizes and env; %s do not apply",
		    field_flags(PF_CREATE, flags, sizeof(flags)));
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
int
c_sandbox_checkpoint(const struct cmd *c, struct opts *o, char **a, int n)
{
	(void)c;
	(void)n;
	return sandbox_post_checkpoint(o, a, "checkpoints", "name",
	    say_checkpoint);
}

/* netctl checkpoint ls ID */
int
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
int
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
int
c_sandbox_restore(const struct cmd *c, struct opts *o, char **a, int n)
{
	(void)c;
	(void)n;
	return sandbox_post_checkpoint(o, a, "restore", "checkpoint",
	    say_restore);
}

/* netctl sandbox move ID --to HOST: answered once the target has it. */
int
c_sandbox_move(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc = NULL;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (o->to == NULL || o->to[0] == '\0') {
		fail("sandbox move: --to HOST (a fleet host id) is required");
		return EXIT_USAGE;
	}
	body = json_pack("{s:s}", "to", o->to);
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/move", a[0]);
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK && !o->json)
		printf("sandbox %s moved to host %s in %lld ms (%.1f MiB "
		    "sent)\n", a[0], jstr(doc, "host"), (long long)
		    json_integer_value(json_object_get(doc, "move_ms")),
		    (double)json_integer_value(json_object_get(doc,
		    "bytes_sent")) / 1048576.0);
	out_set(doc);
	return rc;
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

int
c_sandbox_add(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *doc, *ports, *perr;
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
		char flags[256];

		fail("%s apply to a microVM sandbox, not to an external one "
		    "(--address)", field_flags(PF_VM, flags, sizeof(flags)));
		return EXIT_USAGE;
	}
	if (o->template_ != NULL && check_template_name(o->template_) == -1)
		return EXIT_USAGE;
	body = json_pack("{s:s}", "id", a[0]);
	if (o->address != NULL)
		json_object_set_new(body, "address", json_string(o->address));
	if (o->template_ != NULL)
		json_object_set_new(body, "template", json_string(o->template_));
	if (o->given & O_HOST)
		json_object_set_new(body, "host", json_string(o->host));
	if (o->given & O_ZONE)
		json_object_set_new(body, "zone", json_string(o->zone));
	if (o->given & O_PUBLISH_EXPOSED)
		json_object_set_new(body, "publish_exposed", json_true());
	if (size_arg("--memory", o->memory, body, "memory_mib") == -1 ||
	    size_arg("--vcpus", o->vcpus, body, "vcpus") == -1 ||
	    size_arg("--disk", o->disk, body, "disk_mib") == -1 ||
	    idle_args(o, 0, body) == -1 || env_arg(o, 0, body) == -1) {
		json_decref(body);
		return EXIT_USAGE;
	}
	rc = call(o, "POST", "/v1/sandboxes", body, &doc);
	json_decref(body);
	/* the ports published for it come with the create's answer only */
	ports = json_incref(json_object_get(doc, "ports"));
	perr = json_incref(json_object_get(doc, "ports_error"));
	if (rc == EXIT_OK && o->address == NULL &&
	    json_is_true(json_object_get(doc, "remote")))
		rc = wait_placed(o, a[0], jstr(doc, "host"), &doc);
	else if (rc == EXIT_OK && o->address == NULL)
		rc = wait_created(o, a[0], &doc);
	/* The token is shown only now: print it even when the VM failed. */
	if (doc != NULL && !o->json && jstr(doc, "token")[0] != '-')
		printf("sandbox %s %s (%s, %s)\ntoken: %s\n# its token "
		    "(id %s) is shown only now\n", jstr(doc, "id"),
		    o->address ? "added" : "created",
		    jstr(doc, "address"), jstr(doc, "state"), jstr(doc, "token"),
		    jstr(doc, "token_id"));
	if (doc != NULL && !o->json && json_is_string(json_object_get(doc, "host")))
		printf("placed on fleet host %s%s%s\n", jstr(doc, "host"),
		    json_is_string(json_object_get(doc, "placement_failed")) ?
		    " after: " : "", json_is_string(json_object_get(doc,
		    "placement_failed")) ? jstr(doc, "placement_failed") : "");
	if (doc != NULL && ports != NULL && json_object_get(doc, "ports") == NULL)
		json_object_set(doc, "ports", ports);
	if (!o->json && json_is_string(perr))
		fprintf(stderr, "%s: sandbox %s: its exposed ports not published: "
		    "%s\n", progname, a[0], json_string_value(perr));
	else if (!o->json && (o->given & O_PUBLISH_EXPOSED) && ports != NULL) {
		if (json_array_size(ports) == 0)
			printf("its template exposes no ports\n");
		else
			print_ports(ports, 0, "");
	}
	json_decref(ports);
	json_decref(perr);
	if (doc != NULL)
		out_set(doc);
	return rc;
}

int
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

int
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

int
c_fleet_hosts(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t = { 0 };
	const char *row[8] = { "HOST", "STATE", "EDGE", "FLEET", "SANDBOXES", "CAPACITY",
	    "ZONE", "ROOM" };
	char rbuf[64], sbuf[64];
	json_t *room;
	char nbuf[16], cbuf[16];
	json_t *doc, *h;
	size_t i;
	int rc;

	if ((rc = call(o, "GET", "/v1/fleet/hosts", NULL, &doc)) != EXIT_OK || o->json) {
		json_decref(doc);
		return rc;
	}
	printf("this host: %s, etcd: %s\n", jstr(doc, "self"), jstr(doc, "etcd"));
	t.ncols = 8;
	table_add(&t, row);
	json_array_foreach(json_object_get(doc, "hosts"), i, h) {
		row[0] = jstr(h, "id");
		row[1] = json_is_true(json_object_get(h, "up")) ?
		    json_is_true(json_object_get(h, "self")) ? "up (this host)" : "up" :
		    json_is_true(json_object_get(h, "self")) ? "unregistered (this host)" :
		    "down";
		if (json_is_true(json_object_get(h, "drained"))) {
			snprintf(sbuf, sizeof(sbuf), "%s, drained", row[1]);
			row[1] = sbuf;
		}
		row[2] = jstr(h, "edge");
		row[3] = jstr(h, "fleet");
		snprintf(nbuf, sizeof(nbuf), "%lld",
		    (long long)json_integer_value(json_object_get(h, "sandboxes")));
		row[4] = nbuf;
		snprintf(cbuf, sizeof(cbuf), "%lld",
		    (long long)json_integer_value(json_object_get(h, "capacity")));
		row[5] = json_integer_value(json_object_get(h, "capacity")) > 0 ? cbuf : "-";
		row[6] = json_is_string(json_object_get(h, "zone")) ? jstr(h, "zone") : "-";
		/* what it has room for: more running sandboxes by its VMs'
		 * measured costs, else what fleet_capacity leaves */
		room = json_object_get(h, "room");
		if (json_is_integer(json_object_get(room, "running_more")))
			snprintf(rbuf, sizeof(rbuf), "%lld running, %lld suspended",
			    (long long)json_integer_value(json_object_get(room,
			    "running_more")), (long long)json_integer_value(
			    json_object_get(room, "suspended_more")));
		else if (json_is_integer(json_object_get(room, "free")))
			snprintf(rbuf, sizeof(rbuf), "%lld free", (long long)
			    json_integer_value(json_object_get(room, "free")));
		else
			snprintf(rbuf, sizeof(rbuf), "-");
		row[7] = rbuf;
		table_add(&t, row);
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

/* A drain's progress lines: each sandbox moved or left since *seen. */
static void
drain_lines(json_t *mv, size_t seen[2])
{
	json_t *a, *e;
	size_t i;

	a = json_object_get(mv, "moved");
	for (i = seen[0]; i < json_array_size(a); i++) {
		e = json_array_get(a, i);
		printf("sandbox %s moved to host %s (%.1f s, %.1f MiB sent)\n",
		    jstr(e, "id"), jstr(e, "to"), (double)json_integer_value(
		    json_object_get(e, "ms")) / 1000.0, (double)
		    json_integer_value(json_object_get(e, "bytes_sent")) /
		    1048576.0);
	}
	seen[0] = json_array_size(a);
	a = json_object_get(mv, "failed");
	for (i = seen[1]; i < json_array_size(a); i++) {
		e = json_array_get(a, i);
		printf("sandbox %s stays: %s\n", jstr(e, "id"), jstr(e,
		    "error"));
	}
	seen[1] = json_array_size(a);
	fflush(stdout);
}

/* netctl fleet drain|undrain [HOST] [--stay] [--detach]: this host
 * placed on no more, or again (POST /v1/fleet/drain or /undrain); a
 * drain moves its sandboxes to other hosts (unless --stay) and is
 * followed to its end (GET /v1/fleet/drain), a line per sandbox, unless
 * --detach. Exit 1 when a sandbox could not move. */
int
c_fleet_drain(const struct cmd *c, struct opts *o, char **a, int n)
{
	int on = strcmp(c->verb, "drain") == 0, rc;
	json_t *body = json_object(), *doc = NULL, *mv;
	size_t seen[2] = { 0, 0 };

	if (n == 1)
		json_object_set_new(body, "host", json_string(a[0]));
	if (on && (o->given & O_STAY))
		json_object_set_new(body, "move", json_false());
	rc = call(o, "POST", on ? "/v1/fleet/drain" : "/v1/fleet/undrain",
	    body, &doc);
	json_decref(body);
	if (rc != EXIT_OK || !on) {
		if (rc == EXIT_OK && !o->json)
			printf("fleet host %s undrained: placed on again\n",
			    jstr(doc, "host"));
		if (doc != NULL)
			out_set(doc);
		return rc;
	}
	mv = json_object_get(doc, "move");
	if (!json_is_object(mv) || (o->given & O_DETACH)) {
		if (!o->json)
			printf("fleet host %s drained: placed on no more (%s)\n",
			    jstr(doc, "host"), !json_is_object(mv) ?
			    "its sandboxes stay" : "its sandboxes are moving: "
			    "netctl fleet drain again follows them");
		out_set(doc);
		return EXIT_OK;
	}
	if (!o->json)
		printf("fleet host %s drained: placed on no more; moving its "
		    "%lld sandboxes\n", jstr(doc, "host"), (long long)
		    json_integer_value(json_object_get(mv, "total")));
	while (strcmp(jstr(mv, "state"), "moving") == 0) {
		if (!o->json)
			drain_lines(mv, seen);
		usleep(500000);
		json_decref(doc);
		doc = NULL;
		if ((rc = call(o, "GET", "/v1/fleet/drain", NULL, &doc)) !=
		    EXIT_OK) {
			if (doc != NULL)
				out_set(doc);
			return rc;
		}
		if (!json_is_object(mv = json_object_get(doc, "move")))
			break;
	}
	if (!o->json && json_is_object(mv)) {
		drain_lines(mv, seen);
		printf("fleet host %s: %zu moved, %zu stay%s\n", jstr(doc,
		    "host"), seen[0], seen[1], strcmp(jstr(mv, "state"),
		    "stopped") == 0 ? " (undrained: stopped)" : "");
	}
	rc = json_array_size(json_object_get(mv, "failed")) > 0 ?
	    EXIT_REFUSED : EXIT_OK;
	if (rc != EXIT_OK)
		fail("fleet drain: %zu of its sandboxes could not move (they "
		    "stay here)", json_array_size(json_object_get(mv,
		    "failed")));
	out_set(doc);
	return rc;
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
	if (json_object_size(json_object_get(doc, "env")) > 0) {
		const char *name;
		json_t *v;

		printf("%-14s", "env:");
		json_object_foreach(json_object_get(doc, "env"), name, v)
			printf(" %s=%s", name, json_string_value(v) ?
			    json_string_value(v) : "");
		printf("\n");
	}
}

int
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

int
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

int
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

int
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
		} else {
			const char *t = json_string_value(json_object_get(doc,
			    "text"));
			char *copy;

			/* the guest's console as it came, but on a terminal
			 * no escape sequence of the guest's drives it */
			if (t != NULL && isatty(STDOUT_FILENO) &&
			    (copy = strdup(t)) != NULL) {
				text_clean(copy, 1);
				fputs(copy, stdout);
				free(copy);
			} else
				fputs(t != NULL ? t : "", stdout);
		}
		fflush(stdout);
		json_decref(doc);
		if (!follow)
			return EXIT_OK;
		/* the kept console shrank: it rotated, read it anew */
		next = next >= 0 && size < next ? 0 : size;
		usleep(500000);
	}
}

int
c_sandbox_set(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[128];
	json_t *body, *doc;
	int rc;

	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if (!(o->given & (O_IDLE_PAUSE | O_IDLE_SUSPEND | O_MAX_LIFETIME |
	    O_ENV))) {
		char flags[256];

		fail("sandbox set: give at least one of %s",
		    field_flags(PF_PATCH, flags, sizeof(flags)));
		return EXIT_USAGE;
	}
	body = json_object();
	if (idle_args(o, 1, body) == -1 || env_arg(o, 1, body) == -1) {
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
