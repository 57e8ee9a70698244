/*
 * test_store.c — unit tests for proxy/sandbox/store.c on a real SQLite file in a
 * temporary directory: sandboxes, ports, custom host conflicts, cascade,
 * persistence across reopen, schema versioning.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "store.h"
#include "sbfield.h"
#include "tap.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64], dir[80];	/* mkdtemp's, and the state dir in it */
static char err[256];

/* The bit px_store_sandbox_set takes for the field the API calls name. */
static unsigned long
field_bit(const char *name)
{
	const struct px_sbfield *f = px_sbfield_by_api(name);

	return f ? 1UL << (f - px_sbfields) : 0;
}

static void
cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		diag("could not remove %s", base);
}

static struct px_sandbox
mksb(const char *id, const char *addr)
{
	struct px_sandbox sb;

	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	snprintf(sb.address, sizeof(sb.address), "%s", addr);
	sb.external = 1;
	snprintf(sb.state, sizeof(sb.state), "%s", PX_STATE_RUNNING);
	return sb;
}

static struct px_port
mkport(const char *sb, uint16_t port, const char *host)
{
	struct px_port p;

	memset(&p, 0, sizeof(p));
	snprintf(p.sandbox, sizeof(p.sandbox), "%s", sb);
	p.port = port;
	snprintf(p.custom_host, sizeof(p.custom_host), "%s", host);
	return p;
}

struct collect {
	char text[1024];
	int n;
};

static int
collect_sb(const struct px_sandbox *sb, void *arg)
{
	struct collect *c = arg;
	size_t len = strlen(c->text);

	snprintf(c->text + len, sizeof(c->text) - len, "%s%s", len ? "," : "",
	    sb->id);
	c->n++;
	return 0;
}

static int
collect_port(const struct px_port *p, void *arg)
{
	struct collect *c = arg;
	size_t len = strlen(c->text);

	snprintf(c->text + len, sizeof(c->text) - len, "%s%s:%u", len ? "," :
	    "", p->sandbox, p->port);
	c->n++;
	return 0;
}

static int
collect_route(const struct px_route_row *r, void *arg)
{
	struct collect *c = arg;
	size_t len = strlen(c->text);

	snprintf(c->text + len, sizeof(c->text) - len, "%s%s@%s:%u", len ?
	    "," : "", r->sb->id, r->sb->address, r->port->port);
	c->n++;
	return 0;
}

static int
stop_at_first(const struct px_sandbox *sb, void *arg)
{
	(*(int *)arg)++;
	return 7;
}

static int
count_ports(struct px_store *st, const char *sb)
{
	struct collect c = { "", 0 };

	if (px_store_port_list(st, sb, collect_port, &c, err, sizeof(err)) != 0)
		return -1;
	return c.n;
}

int
main(void)
{
	struct px_store *st;
	struct px_sandbox sb, got, chg;
	struct px_port p, gp;
	struct collect c;
	int created, calls;
	char path[128];
	struct stat sst;
	sqlite3 *db;

	snprintf(base, sizeof(base), "/tmp/berth-test-store.XXXXXX");
	if (mkdtemp(base) == NULL)
		skip_all("mkdtemp failed");
	atexit(cleanup);
	/* not there yet: open creates it */
	snprintf(dir, sizeof(dir), "%s/state", base);

	st = px_store_open(dir, err, sizeof(err));
	if (!ok(st != NULL, "open creates the store"))
		diag("%s", err);
	if (st == NULL)
		return done_testing();
	ok(stat(dir, &sst) == 0 && (sst.st_mode & 0777) == 0700,
	    "state dir created 0700");
	snprintf(path, sizeof(path), "%s/berth.db", dir);
	ok(stat(path, &sst) == 0 && (sst.st_mode & 0777) == 0600,
	    "database file is 0600");

	/* sandboxes */
	sb = mksb("sb-1", "10.0.0.2");
	is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)), PX_STORE_OK,
	    "add sb-1");
	is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)), PX_STORE_EXISTS,
	    "add sb-1 again: EXISTS");
	ok(strstr(err, "sb-1") != NULL, "EXISTS message names it: %s", err);
	sb = mksb("sb-0", "fd00::2");
	sb.created = 1234;
	is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)), PX_STORE_OK,
	    "add sb-0 (IPv6)");
	sb = mksb("Bad", "10.0.0.3");
	is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)), PX_STORE_ERR,
	    "bad id refused");
	sb = mksb("sb-x", "nope");
	is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)), PX_STORE_ERR,
	    "bad address refused");
	sb = mksb("sb-x", "10.0.0.9");
	strcpy(sb.state, "dancing");
	is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)), PX_STORE_ERR,
	    "bad state refused");

	is_int(px_store_sandbox_get(st, "sb-1", &got, err, sizeof(err)),
	    PX_STORE_OK, "get sb-1");
	is_str(got.address, "10.0.0.2", "address kept");
	is_int(got.external, 1, "external kept");
	is_str(got.state, "running", "state kept");
	ok(got.created > 1600000000, "created filled with now");
	is_int(px_store_sandbox_get(st, "sb-0", &got, err, sizeof(err)),
	    PX_STORE_OK, "get sb-0");
	is_int(got.created, 1234, "explicit created kept");
	is_int(px_store_sandbox_get(st, "sb-9", &got, err, sizeof(err)),
	    PX_STORE_NOTFOUND, "get unknown: NOTFOUND");

	memset(&c, 0, sizeof(c));
	is_int(px_store_sandbox_list(st, collect_sb, &c, err, sizeof(err)), 0,
	    "list");
	is_str(c.text, "sb-0,sb-1", "list is ordered by id");
	calls = 0;
	is_int(px_store_sandbox_list(st, stop_at_first, &calls, err,
	    sizeof(err)), 7, "callback's nonzero return stops and is returned");
	is_int(calls, 1, "walk stopped after one row");

	/* a VM-backed sandbox: resources, template, idle limits */
	{
		struct px_template t, tg;
		int n = -1;

		memset(&t, 0, sizeof(t));
		strcpy(t.name, "tpl-a");
		strcpy(t.dir, "/srv/tpl-a");
		is_int(px_store_template_add(st, &t, err, sizeof(err)),
		    PX_STORE_OK, "add template tpl-a");
		is_int(px_store_template_add(st, &t, err, sizeof(err)),
		    PX_STORE_EXISTS, "again: EXISTS");
		strcpy(t.name, "default");
		is_int(px_store_template_add(st, &t, err, sizeof(err)),
		    PX_STORE_EXISTS, "'default' is built in: EXISTS");
		strcpy(t.name, "x");
		strcpy(t.dir, "relative");
		is_int(px_store_template_add(st, &t, err, sizeof(err)),
		    PX_STORE_ERR, "relative dir refused");
		strcpy(t.name, "Bad");
		strcpy(t.dir, "/x");
		is_int(px_store_template_add(st, &t, err, sizeof(err)),
		    PX_STORE_ERR, "bad name refused");
		is_int(px_store_template_get(st, "tpl-a", &tg, err, sizeof(err)),
		    PX_STORE_OK, "get tpl-a");
		is_str(tg.dir, "/srv/tpl-a", "its dir");
		ok(tg.created > 0, "created filled");

		sb = mksb("vm-1", "");
		sb.external = 0;
		strcpy(sb.state, PX_STATE_CREATING);
		sb.mem_mib = 512;
		sb.vcpus = 2;
		sb.disk_mib = 2048;
		strcpy(sb.template_name, "tpl-b");
		is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)),
		    PX_STORE_NOTFOUND, "unknown template: NOTFOUND");
		is_int(px_store_sandbox_get(st, "vm-1", &got, err, sizeof(err)),
		    PX_STORE_NOTFOUND, "... and nothing stored");
		strcpy(sb.template_name, "tpl-a");
		sb.idle_pause_ms = 60000;
		sb.idle_suspend_ms = PX_IDLE_NEVER;
		sb.max_lifetime_ms = -7;
		is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)),
		    PX_STORE_ERR, "a negative lifetime refused");
		sb.max_lifetime_ms = 0;
		is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)),
		    PX_STORE_OK, "add vm-1");
		is_int(px_store_sandbox_get(st, "vm-1", &got, err, sizeof(err)),
		    PX_STORE_OK, "get vm-1");
		ok(got.mem_mib == 512 && got.vcpus == 2 && got.disk_mib == 2048,
		    "resources read back");
		is_str(got.template_name, "tpl-a", "template read back");
		ok(got.idle_pause_ms == 60000 && got.idle_suspend_ms ==
		    PX_IDLE_NEVER && got.max_lifetime_ms == 0,
		    "idle limits read back (0: berth.conf's)");
		memset(&chg, 0, sizeof(chg));
		chg.idle_suspend_ms = 5;
		chg.max_lifetime_ms = 3600000;
		is_int(px_store_sandbox_set(st, "vm-1", &chg, field_bit("idle_pause") |
		    field_bit("max_lifetime"), &got, err, sizeof(err)),
		    PX_STORE_OK, "set pause and lifetime");
		ok(got.idle_pause_ms == 0 && got.idle_suspend_ms ==
		    PX_IDLE_NEVER && got.max_lifetime_ms == 3600000,
		    "those two changed, suspend kept");
		is_int(px_store_sandbox_set(st, "vm-9", &chg, field_bit("idle_pause"),
		    NULL, err, sizeof(err)), PX_STORE_NOTFOUND,
		    "set of unknown: NOTFOUND");
		chg.idle_pause_ms = -3;
		is_int(px_store_sandbox_set(st, "vm-1", &chg, field_bit("idle_pause"),
		    NULL, err, sizeof(err)), PX_STORE_ERR, "bad limit refused");
		is_int(px_store_sandbox_set(st, "vm-1", &chg, field_bit("vcpus"),
		    NULL, err, sizeof(err)), PX_STORE_ERR, "a field PATCH does "
		    "not change refused");
		is_str(err, "vcpus cannot be changed", "... saying which");
		is_int(px_store_sandbox_set(st, "vm-1", &chg, 0, NULL, err,
		    sizeof(err)), PX_STORE_ERR, "nothing to change refused");
		strcpy(chg.env, "{\"A\":\"1\"}");
		is_int(px_store_sandbox_set(st, "vm-1", &chg, field_bit("env"),
		    &got, err, sizeof(err)), PX_STORE_OK, "set env");
		is_str(got.env, "{\"A\":\"1\"}", "env read back");
		strcpy(chg.env, "not json");
		is_int(px_store_sandbox_set(st, "vm-1", &chg, field_bit("env"),
		    NULL, err, sizeof(err)), PX_STORE_ERR, "an env not an "
		    "object refused");
		chg.env[0] = '\0';
		is_int(px_store_sandbox_set(st, "vm-1", &chg, field_bit("env"),
		    &got, err, sizeof(err)), PX_STORE_OK, "env cleared");
		is_str(got.env, "", "... read back as none");
		is_int(px_store_sandbox_get(st, "vm-1", &got, err, sizeof(err)),
		    PX_STORE_OK, "get vm-1 again");
		ok(got.idle_pause_ms == 0 && got.max_lifetime_ms == 3600000,
		    "a refused change changed nothing");

		sb = mksb("vm-2", "");
		sb.external = 0;
		strcpy(sb.template_name, "default");
		is_int(px_store_sandbox_add(st, &sb, err, sizeof(err)),
		    PX_STORE_OK, "add vm-2 from 'default'");
		px_store_sandbox_get(st, "vm-2", &got, err, sizeof(err));
		is_str(got.template_name, "", "'default' is stored as none");
		px_store_template_users(st, "tpl-a", &n, err, sizeof(err));
		is_int(n, 1, "tpl-a has one user");
		px_store_template_users(st, "default", &n, err, sizeof(err));
		is_int(n, 1, "default has one (external ones do not count)");
		is_int(px_store_template_rm(st, "tpl-a", err, sizeof(err)),
		    PX_STORE_CONFLICT, "rm of a template in use: CONFLICT");
		ok(strstr(err, "vm-1") != NULL, "names the sandbox: %s", err);
		is_int(px_store_sandbox_rm(st, "vm-1", err, sizeof(err)),
		    PX_STORE_OK, "rm vm-1");
		is_int(px_store_template_rm(st, "tpl-a", err, sizeof(err)),
		    PX_STORE_OK, "rm tpl-a now");
		is_int(px_store_template_rm(st, "tpl-a", err, sizeof(err)),
		    PX_STORE_NOTFOUND, "again: NOTFOUND");
		is_int(px_store_sandbox_rm(st, "vm-2", err, sizeof(err)),
		    PX_STORE_OK, "rm vm-2");
	}

	/* ports */
	p = mkport("sb-1", 8080, "");
	created = -1;
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_OK, "publish sb-1:8080");
	is_int(created, 1, "reported as created");
	is_int(px_store_port_get(st, "sb-1", 8080, &gp, err, sizeof(err)),
	    PX_STORE_OK, "get sb-1:8080");
	ok(gp.host_header == PX_HOST_PRESERVE && gp.visibility == PX_VIS_PUBLIC
	    && gp.custom_host[0] == '\0', "defaults read back");
	p.host_header = PX_HOST_UPSTREAM;
	p.visibility = PX_VIS_PRIVATE;
	strcpy(p.custom_host, "app.example.com");
	p.created = 5;
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_OK, "update sb-1:8080");
	is_int(created, 0, "reported as updated");
	px_store_port_get(st, "sb-1", 8080, &gp, err, sizeof(err));
	ok(gp.host_header == PX_HOST_UPSTREAM && gp.visibility ==
	    PX_VIS_PRIVATE, "update read back");
	is_str(gp.custom_host, "app.example.com", "custom host read back");
	ok(gp.created != 5, "created kept on update");

	p = mkport("sb-1", 3000, "app.example.com");
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_CONFLICT, "same custom host on another port: CONFLICT");
	ok(strstr(err, "8080") != NULL, "conflict names the owner: %s", err);
	is_int(count_ports(st, "sb-1"), 1, "conflicting publish left nothing");
	p = mkport("sb-0", 3000, "app.example.com");
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_CONFLICT, "same custom host on another sandbox: CONFLICT");
	p = mkport("sb-1", 8080, "app.example.com");
	p.visibility = PX_VIS_PRIVATE;
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_OK, "same port keeps its own custom host");
	p = mkport("sb-9", 80, "");
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_NOTFOUND, "publish on unknown sandbox: NOTFOUND");
	p = mkport("sb-1", 0, "");
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_ERR, "port 0 refused");
	p = mkport("sb-1", 80, "Bad.Host");
	is_int(px_store_port_set(st, &p, &created, err, sizeof(err)),
	    PX_STORE_ERR, "bad custom host refused");

	p = mkport("sb-1", 3000, "");
	px_store_port_set(st, &p, NULL, err, sizeof(err));
	p = mkport("sb-0", 443, "");
	px_store_port_set(st, &p, NULL, err, sizeof(err));
	memset(&c, 0, sizeof(c));
	is_int(px_store_port_list(st, NULL, collect_port, &c, err, sizeof(err)),
	    0, "list all ports");
	is_str(c.text, "sb-0:443,sb-1:3000,sb-1:8080", "ordered by sandbox, port");
	is_int(count_ports(st, "sb-1"), 2, "list one sandbox's ports");
	is_int(px_store_port_list(st, "sb-9", collect_port, &c, err,
	    sizeof(err)), PX_STORE_NOTFOUND, "list ports of unknown: NOTFOUND");
	memset(&c, 0, sizeof(c));
	is_int(px_store_routes(st, collect_route, &c, err, sizeof(err)), 0,
	    "routes");
	is_str(c.text, "sb-0@fd00::2:443,sb-1@10.0.0.2:3000,sb-1@10.0.0.2:8080",
	    "routes join sandbox and port");

	is_int(px_store_port_rm(st, "sb-1", 3000, err, sizeof(err)),
	    PX_STORE_OK, "unpublish sb-1:3000");
	is_int(px_store_port_rm(st, "sb-1", 3000, err, sizeof(err)),
	    PX_STORE_NOTFOUND, "unpublish again: NOTFOUND");
	is_int(px_store_port_get(st, "sb-1", 3000, &gp, err, sizeof(err)),
	    PX_STORE_NOTFOUND, "get unpublished: NOTFOUND");

	/* cascade */
	is_int(px_store_sandbox_rm(st, "sb-0", err, sizeof(err)), PX_STORE_OK,
	    "rm sb-0");
	is_int(px_store_sandbox_rm(st, "sb-0", err, sizeof(err)),
	    PX_STORE_NOTFOUND, "rm sb-0 again: NOTFOUND");
	is_int(count_ports(st, NULL), 1, "sb-0's port went with it");

	/* persistence */
	px_store_close(st);
	st = px_store_open(dir, err, sizeof(err));
	if (!ok(st != NULL, "reopen"))
		diag("%s", err);
	if (st == NULL)
		return done_testing();
	is_int(px_store_port_get(st, "sb-1", 8080, &gp, err, sizeof(err)),
	    PX_STORE_OK, "port survives reopen");
	is_str(gp.custom_host, "app.example.com", "with its custom host");
	is_int(px_store_sandbox_get(st, "sb-0", &got, err, sizeof(err)),
	    PX_STORE_NOTFOUND, "removed sandbox stays removed");
	is_int(px_store_sandbox_rm(st, "sb-1", err, sizeof(err)), PX_STORE_OK,
	    "rm sb-1");
	is_int(count_ports(st, NULL), 0, "no ports left");
	px_store_close(st);

	/* schema version, journal mode, a newer schema refused */
	snprintf(path, sizeof(path), "%s/berth.db", dir);
	if (sqlite3_open(path, &db) == SQLITE_OK) {
		sqlite3_stmt *stmt;
		int v = -1;
		char mode[16] = "";

		if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt,
		    NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
			v = sqlite3_column_int(stmt, 0);
		sqlite3_finalize(stmt);
		is_int(v, px_store_schema_version(), "user_version is latest");
		if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt,
		    NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
			snprintf(mode, sizeof(mode), "%s",
			    (const char *)sqlite3_column_text(stmt, 0));
		sqlite3_finalize(stmt);
		is_str(mode, "wal", "journal mode is WAL");
		sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL);
		sqlite3_close(db);
	} else
		ok(0, "open db with sqlite3");
	st = px_store_open(dir, err, sizeof(err));
	ok(st == NULL && strstr(err, "newer") != NULL,
	    "newer schema refused: %s", err);
	px_store_close(st);

	return done_testing();
}
