/*
 * test_fleet.c — fleet mode's pure parts: the fleet_* directives of
 * berth.conf (proxy/conf.c) and other hosts' sandboxes in the workers'
 * route table (proxy/edge/route.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "conf.h"
#include "route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static const char *base =
    "listen https 127.0.0.1:8443\n";
static const char *full =
    "listen https 127.0.0.1:8443\n"
    "fleet_etcd http://10.0.0.1:2379\n"
    "fleet_host host-a\n"
    "fleet_listen 10.0.0.11:9443\n"
    "fleet_ca /etc/berth/fleet-ca.pem\n"
    "fleet_cert /etc/berth/a.pem /etc/berth/a.key\n";

static int
load(const char *text, const char *more, struct px_config *c, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fputs(more, f);
	fclose(f);
	return px_config_load(c, path, err, errlen);
}

static void
bad(const char *text, const char *more, const char *needle)
{
	struct px_config c;
	char err[512] = "";
	int r = load(text, more, &c, err, sizeof(err));

	ok(r == -1 && strstr(err, needle) != NULL, "refused with '%s': %s", needle, err);
	px_config_free(&c);
}

static const char *table =
    "{\"domain\":\"berth.localhost\",\"fleet_host\":\"b\",\"sandboxes\":["
    "{\"id\":\"mine\",\"address\":\"10.0.0.2\",\"state\":\"running\",\"ports\":["
    "{\"port\":8080,\"host_header\":\"preserve\",\"visibility\":\"public\"}]},"
    "{\"id\":\"theirs\",\"address\":\"\",\"state\":\"paused\",\"ports\":["
    "{\"port\":8080,\"host_header\":\"upstream\",\"visibility\":\"private\"}],"
    "\"host\":\"a\",\"remote\":true,\"fleet\":\"10.0.0.11:9443\",\"host_up\":true},"
    "{\"id\":\"lost\",\"address\":\"\",\"state\":\"running\",\"ports\":["
    "{\"port\":80,\"host_header\":\"preserve\",\"visibility\":\"public\"}],"
    "\"host\":\"c\",\"remote\":true,\"fleet\":\"10.0.0.13:9443\",\"host_up\":false}],"
    "\"tokens\":[]}";

int
main(void)
{
	struct px_config c;
	struct px_route_match m;
	struct px_routes *r;
	char err[512];
	int fd;

	strcpy(path, "/tmp/berth-fleet-XXXXXX");
	fd = mkstemp(path);
	close(fd);

	/* not configured: nothing changes */
	ok(px_config_load(&c, NULL, err, sizeof(err)) == 0, "embedded default");
	ok(c.fleet_etcd == NULL && c.nlisten == 2, "no fleet, two listeners");
	px_config_free(&c);
	ok(load(base, "", &c, err, sizeof(err)) == 0, "a file without fleet_*");
	ok(c.fleet_etcd == NULL && c.nlisten == 1, "no fleet listener");
	px_config_free(&c);

	ok(load(full, "fleet_ttl 3s\nfleet_prefix /prod\nfleet_capacity 40\n"
	    "fleet_advertise 192.0.2.1:9443\n", &c, err, sizeof(err)) == 0,
	    "fleet configuration loads: %s", err);
	is_str(c.fleet_etcd, "10.0.0.1:2379", "etcd address without http://");
	is_str(c.fleet_host, "host-a", "host id");
	is_str(c.fleet_advertise, "192.0.2.1:9443", "advertised address");
	is_int(c.fleet_ttl, 3000, "TTL in ms");
	is_str(c.fleet_prefix, "/prod", "prefix");
	is_int(c.fleet_capacity, 40, "capacity");
	is_int(c.nlisten, 2, "the fleet listener is added");
	ok(c.listen[1].https == PX_LISTEN_FLEET && strcmp(c.listen[1].text,
	    "10.0.0.11:9443") == 0, "as the last listener, of kind fleet");
	is_int(px_config_https_port(&c), 8443, "URLs keep the https port");
	px_config_free(&c);

	ok(load("fleet_listen 10.0.0.11:9443\nlisten https 127.0.0.1:8443\n"
	    "fleet_etcd 10.0.0.1:2379\nfleet_host a\nfleet_ca /x\nfleet_cert /y /z\n",
	    "", &c, err, sizeof(err)) == 0, "fleet_listen before listen lines: %s", err);
	is_int(c.nlisten, 2, "the listen lines do not drop it");
	is_str(c.fleet_prefix, "/berth", "default prefix");
	is_int(c.fleet_ttl, 10000, "default TTL 10 s");
	px_config_free(&c);

	bad(base, "fleet_host a\n", "without fleet_etcd");
	bad(full, "fleet_ttl 500ms\n", "1s to 1h");
	bad(full, "fleet_host Host_A\n", "fleet_host");
	bad(full, "fleet_etcd https://10.0.0.1:2379\n", "needs fleet_etcd_ca");
	bad(full, "fleet_etcd_ca /ca.pem\n", "for etcd over TLS");
	bad(full, "fleet_etcd_cert /c.pem /k.pem\n", "for etcd over TLS");
	bad(full, "fleet_etcd_cert /c.pem\n", "takes 2 arguments");
	bad(full, "fleet_etcd ftp://10.0.0.1:2379\n", "https://ADDR:PORT");
	bad(base, "fleet_etcd_ca /ca.pem\n", "without fleet_etcd");
	bad(full, "fleet_etcd_user a /pw\n", "for etcd over TLS");
	bad(full, "fleet_etcd_user a\n", "takes 2 arguments");
	bad(full, "fleet_etcd https://10.0.0.1:2379\nfleet_etcd_ca /ca.pem\n"
	    "fleet_etcd_user 'a b' /pw\n", "fleet_etcd_user");
	ok(load(full, "fleet_etcd https://10.0.0.1:2379\nfleet_etcd_ca /ca.pem\n"
	    "fleet_etcd_cert /c.pem /k.pem\nfleet_etcd_user host-a /pw\n", &c, err,
	    sizeof(err)) == 0,
	    "etcd over TLS with a client certificate: %s", err);
	ok(c.fleet_etcd_tls && c.fleet_etcd != NULL && strcmp(c.fleet_etcd, "10.0.0.1:2379") == 0,
	    "https:// read as TLS, the address without it");
	is_str(c.fleet_etcd_ca, "/ca.pem", "fleet_etcd_ca");
	ok(c.fleet_etcd_cert && strcmp(c.fleet_etcd_cert, "/c.pem") == 0 && strcmp(c.fleet_etcd_key,
	    "/k.pem") == 0, "fleet_etcd_cert's certificate and key");
	ok(c.fleet_etcd_user && strcmp(c.fleet_etcd_user, "host-a") == 0 &&
	    strcmp(c.fleet_etcd_password, "/pw") == 0, "fleet_etcd_user and its file");
	px_config_free(&c);
	bad(full, "fleet_cert /a.pem\n", "takes 2 arguments");
	bad(full, "fleet_prefix berth/\n", "fleet_prefix");
	bad(full, "fleet_bogus 1\n", "unknown directive");
	bad(base, "fleet_etcd 10.0.0.1:2379\nfleet_host a\nfleet_listen 10.0.0.1:9443\n"
	    "fleet_cert /a /b\n", "fleet_ca is missing");

	/* the workers' view of other hosts' sandboxes */
	r = px_routes_from_json(table, strlen(table), err, sizeof(err));
	ok(r != NULL, "a table with remote sandboxes builds: %s", r ? "" : err);
	if (r == NULL)
		return done_testing();
	is_int(px_route_lookup(r, "8080-mine.berth.localhost", 25, &m), PX_ROUTE_OK, "local");
	ok(m.sb && !m.sb->remote && m.sb->host[0] == '\0', "local: not remote");
	is_int(px_route_lookup(r, "8080-theirs.berth.localhost", 27, &m), PX_ROUTE_OK, "remote");
	ok(m.sb && m.sb->remote && m.sb->host_up, "remote, host up");
	is_str(m.sb ? m.sb->host : "", "a", "owner named");
	is_str(m.sb ? m.sb->fleet : "", "10.0.0.11:9443", "owner's fleet listener");
	is_int(px_route_lookup(r, "80-lost.berth.localhost", 23, &m), PX_ROUTE_OK, "lost host's");
	ok(m.sb && m.sb->remote && !m.sb->host_up, "host down");
	is_int(px_route_lookup(r, "81-theirs.berth.localhost", 25, &m), PX_ROUTE_NO_PORT,
	    "remote ports are known too");
	px_routes_unref(r);
	{
		static const char *badt[] = {
		    "{\"domain\":\"d\",\"sandboxes\":[{\"id\":\"x\",\"address\":\"\",\"ports\":[],"
		    "\"remote\":true,\"fleet\":\"1.2.3.4:1\"}]}",
		    "{\"domain\":\"d\",\"sandboxes\":[{\"id\":\"x\",\"address\":\"\",\"ports\":[],"
		    "\"remote\":true,\"host\":\"a\"}]}",
		};
		size_t i;

		for (i = 0; i < sizeof(badt) / sizeof(badt[0]); i++) {
			r = px_routes_from_json(badt[i], strlen(badt[i]), err, sizeof(err));
			ok(r == NULL && strstr(err, "fleet entry") != NULL,
			    "remote entry without host or fleet refused: %s", err);
			px_routes_unref(r);
		}
	}
	unlink(path);
	return done_testing();
}
