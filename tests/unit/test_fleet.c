/*
 * test_fleet.c — fleet mode's pure parts: the fleet_* directives of
 * berth.conf (proxy/conf.c) and other hosts' sandboxes in the workers'
 * route table (proxy/edge/route.c), and the host ids a fleet peer's
 * certificate names (proxy/fleet/fleet_tls.c).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "conf.h"
#include "route.h"
#include "fleet_view.h"
#include "fleet_tls.h"

#include <openssl/x509v3.h>

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

/* ---- fleet_view.c: what another host's etcd values are worth ---- */

static int
entry(const char *rest, const char *value, json_int_t rev, json_t **out, char *why)
{
	*why = '\0';
	return px_fleet_check_sandbox(rest, value, rev, "berth.localhost", out, why, 160);
}

static void
refused(const char *rest, const char *value, const char *needle)
{
	char why[160];
	json_t *e;

	ok(entry(rest, value, 5, &e, why) == -1 && e == NULL && strstr(why, needle) != NULL,
	    "%s refused: %s", rest, why);
}

#define SB(host, id, extra) "{\"host\":\"" host "\",\"sandbox\":{\"id\":\"" id \
	"\",\"state\":\"running\",\"ports\":[{\"port\":8080,\"host_header\":\"preserve\"," \
	"\"visibility\":\"public\"" extra "}]}}"

static json_t *
sbv(const char *host, const char *id, const char *name, json_int_t rev)
{
	return json_pack("{s:s,s:{s:s,s:s,s:[{s:i,s:s,s:s,s:s?}]},s:I}", "host", host,
	    "sandbox", "id", id, "state", "running", "ports", "port", 8080, "host_header",
	    "preserve", "visibility", "public", "host", name, "rev", rev);
}

static const char *
port_name(json_t *w)
{
	json_t *p = json_array_get(json_object_get(json_object_get(w, "sandbox"), "ports"), 0);

	return json_string_value(json_object_get(p, "host"));
}

static void
fleet_view_tests(void)
{
	char why[160];
	json_t *e, *view, *claims, *local, *lost, *win;

	ok(px_fleet_valid_host("host-a") && !px_fleet_valid_host("-a") &&
	    !px_fleet_valid_host("A") && !px_fleet_valid_host(""), "fleet host ids");
	e = px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"10.0.0.11:8443\",\"fleet\":"
	    "\"10.0.0.11:9443\",\"capacity\":4,\"started\":1,\"evil\":1}", why, sizeof(why));
	ok(e != NULL && json_object_get(e, "evil") == NULL, "a host key: kept, "
	    "its checked fields only: %s", e ? "" : why);
	json_decref(e);
	ok(px_fleet_check_host("a", "{\"id\":\"b\",\"edge\":\"x\",\"fleet\":\"10.0.0.12:9443\"}",
	    why, sizeof(why)) == NULL && strstr(why, "\"id\""), "a host key naming another "
	    "host: %s", why);
	ok(px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"x\",\"fleet\":\"nowhere\"}",
	    why, sizeof(why)) == NULL && strstr(why, "ADDR:PORT"), "a host key without a "
	    "fleet address: %s", why);
	/* its room and zone (issue 33): the fields placement reads, checked */
	e = px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"x\",\"fleet\":"
	    "\"10.0.0.11:9443\",\"zone\":\"rack-1\",\"room\":{\"sandboxes\":3,"
	    "\"free\":7,\"running_more\":12,\"disk_free_bytes\":1000000,"
	    "\"accel\":\"tcg\",\"evil\":1}}", why, sizeof(why));
	ok(e != NULL && json_integer_value(json_object_get(json_object_get(e, "room"),
	    "running_more")) == 12 && json_integer_value(json_object_get(
	    json_object_get(e, "room"), "free")) == 7 && strcmp(json_string_value(
	    json_object_get(json_object_get(e, "room"), "accel")), "tcg") == 0 &&
	    json_object_get(json_object_get(e, "room"), "evil") == NULL &&
	    strcmp(json_string_value(json_object_get(e, "zone")), "rack-1") == 0,
	    "a host's room and zone kept, its checked fields only: %s", e ? "" : why);
	json_decref(e);
	/* placement's: the templates it holds (bad names left out) and
	 * where peers forward creates */
	e = px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"x\",\"fleet\":"
	    "\"10.0.0.11:9443\",\"api\":\"10.0.0.11:9444\",\"room\":{\"templates\":"
	    "[\"default\",\"Bad!\",\"debian\",7,\"-x\"]}}", why, sizeof(why));
	{
		char *t = e ? json_dumps(json_object_get(json_object_get(e, "room"),
		    "templates"), JSON_COMPACT) : NULL;

		ok(t != NULL && strcmp(t, "[\"default\",\"debian\"]") == 0 &&
		    strcmp(json_string_value(json_object_get(e, "api")),
		    "10.0.0.11:9444") == 0, "a host's templates (valid names "
		    "only) and api address kept: %s", t ? t : why);
		free(t);
	}
	json_decref(e);
	e = px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"x\",\"fleet\":"
	    "\"10.0.0.11:9443\",\"api\":\"nowhere\"}", why, sizeof(why));
	ok(e != NULL && json_object_get(e, "api") == NULL, "a bad api address is "
	    "left out, not the host");
	json_decref(e);
	e = px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"x\",\"fleet\":"
	    "\"10.0.0.11:9443\"}", why, sizeof(why));
	ok(e != NULL && json_object_size(json_object_get(e, "room")) == 0 &&
	    json_object_get(e, "zone") == NULL, "a host without room or zone (an "
	    "older one): an empty room");
	json_decref(e);
	/* a bad field is left out, never the host (its sandboxes stay
	 * routed): a newer host may publish what this one does not know */
	e = px_fleet_check_host("a", "{\"id\":\"a\",\"edge\":\"x\",\"fleet\":"
	    "\"10.0.0.11:9443\",\"zone\":\"Rack 1\",\"room\":{\"free\":-1,"
	    "\"running_more\":\"many\",\"sandboxes\":2,\"accel\":\"warp\"}}",
	    why, sizeof(why));
	ok(e != NULL && json_object_size(json_object_get(e, "room")) == 1 &&
	    json_integer_value(json_object_get(json_object_get(e, "room"),
	    "sandboxes")) == 2 && json_object_get(e, "zone") == NULL,
	    "a negative count, a word for a count, an unknown accelerator and a "
	    "zone that is not a label: left out, the host kept: %s",
	    e ? "" : why);
	json_decref(e);

	is_int(entry("a/sba", SB("a", "sba", ",\"host\":\"shop.example\",\"evil\":1"), 7,
	    &e, why), 1, "a sandbox entry is used: %s", why);
	ok(e != NULL && json_integer_value(json_object_get(e, "rev")) == 7 &&
	    strcmp(port_name(e), "shop.example") == 0 && json_object_get(json_array_get(
	    json_object_get(json_object_get(e, "sandbox"), "ports"), 0), "evil") == NULL,
	    "...rebuilt from its checked fields, with its create revision");
	json_decref(e);
	refused("a/sbb", SB("b", "sbb", ""), "not its key's host");
	refused("a/sbb", SB("a", "sbc", ""), "sandbox id is not its key's");
	refused("a/Bad_Id", SB("a", "Bad_Id", ""), "id part");
	refused("A/sba", SB("A", "sba", ""), "host part");
	refused("a/sba", "{\"host\":\"a\",\"sandbox\":{\"id\":\"sba\",\"state\":\"running\","
	    "\"ports\":[{\"port\":0,\"host_header\":\"preserve\",\"visibility\":\"public\"}]}}",
	    "1-65535");
	refused("a/sba", "{\"host\":\"a\",\"sandbox\":{\"id\":\"sba\",\"state\":\"evil\","
	    "\"ports\":[]}}", "state");
	refused("a/sba", SB("a", "sba", ",\"host\":\"10.0.0.1\""), "custom host");
	refused("a/sba", SB("a", "sba", ",\"host\":\"app-sbb.berth.localhost\""),
	    "custom host");
	refused("a/sba", SB("a", "sba", ",\"host\":\"x.localhost\""), "custom host");
	refused("a/sba", "not json", "not a JSON object");
	refused("a/sba", "{\"host\":\"a\",\"host\":\"a\",\"sandbox\":{}}", "not a JSON object");
	is_int(entry("a/sba/name/shop.example", "{\"host\":\"a\",\"sandbox\":\"sba\","
	    "\"name\":\"shop.example\"}", 9, &e, why), 2, "a name's claim: %s", why);
	ok(e != NULL && strcmp(json_string_value(json_object_get(e, "name")),
	    "shop.example") == 0, "...naming it");
	json_decref(e);
	refused("a/sba/name/shop.example", "{\"host\":\"a\",\"sandbox\":\"sbb\","
	    "\"name\":\"shop.example\"}", "not its key's");
	refused("a/sba/name/shop.example", "{\"host\":\"b\",\"sandbox\":\"sba\","
	    "\"name\":\"shop.example\"}", "not its key's host");
	refused("a/sba/other/x", "{\"host\":\"a\"}", "neither a sandbox");

	/* B took sbb and shop.example first; A claims both later, from a
	 * sandbox whose key is older than B's name */
	view = json_object();
	claims = json_object();
	json_object_set_new(view, "a/evil", sbv("a", "evil", "shop.example", 3));
	json_object_set_new(view, "a/sbb", sbv("a", "sbb", NULL, 9));
	json_object_set_new(view, "b/sbb", sbv("b", "sbb", "shop.example", 5));
	json_object_set_new(claims, "b/sbb/shop.example", json_integer(6));
	json_object_set_new(claims, "a/evil/shop.example", json_integer(10));
	local = json_object();
	lost = json_array();
	win = px_fleet_resolve(view, claims, local, "c", lost);
	is_str(json_string_value(json_object_get(json_object_get(win, "sbb"), "host")), "b",
	    "an id two hosts claim: the lower create revision's (on a third host)");
	is_str(port_name(json_object_get(win, "sbb")), "shop.example",
	    "a name two hosts claim: the first claim's");
	ok(port_name(json_object_get(win, "evil")) == NULL,
	    "...the later claim's sandbox is routed without it");
	ok(port_name(json_object_get(view, "a/evil")) != NULL, "...the view is not changed");
	is_int((int)json_array_size(lost), 2, "both lost claims are said");
	json_decref(win);

	/* on B, the honest owner: its own store, and its keys' revisions */
	json_object_set_new(local, "sbb", json_object_get(json_object_get(view, "b/sbb"),
	    "sandbox"));
	json_incref(json_object_get(local, "sbb"));
	win = px_fleet_resolve(view, claims, local, "b", NULL);
	ok(json_is_true(json_object_get(json_object_get(win, "sbb"), "local")),
	    "on B: B's own sbb is served locally");
	is_str(port_name(json_object_get(win, "sbb")), "shop.example", "...with its name");
	json_decref(win);
	/* on A: its own store has sbb too, made after B's */
	win = px_fleet_resolve(view, claims, local, "a", NULL);
	is_str(json_string_value(json_object_get(json_object_get(win, "sbb"), "host")), "b",
	    "on A: a local sandbox whose id B claimed first goes to B");
	json_decref(win);
	/* a claim of ours etcd has not seen yet loses to one it has */
	json_object_del(claims, "b/sbb/shop.example");
	json_object_set_new(claims, "a/evil/shop.example", json_integer(10));
	json_object_del(view, "b/sbb");
	win = px_fleet_resolve(view, claims, local, "b", NULL);
	is_str(json_string_value(json_object_get(json_object_get(win, "sbb"), "host")), "a",
	    "on B before its keys are in etcd: an id A claimed there is A's");
	json_decref(win);
	json_object_del(view, "a/sbb");
	win = px_fleet_resolve(view, claims, local, "b", NULL);
	ok(json_is_true(json_object_get(json_object_get(win, "sbb"), "local")) &&
	    port_name(json_object_get(win, "sbb")) == NULL,
	    "on B before its keys are in etcd: A's claimed name is A's");
	json_decref(win);
	json_decref(view);
	json_decref(claims);
	json_decref(local);
	json_decref(lost);

	/* a move: mv was a's (the older claim); b adopted it, and its claim
	 * says it moved from a */
	is_int(entry("b/mv", "{\"host\":\"b\",\"sandbox\":{\"id\":\"mv\","
	    "\"state\":\"suspended\",\"ports\":[],\"moved_from\":\"a\"}}", 12,
	    &e, why), 1, "a claim saying where it moved from is used: %s", why);
	is_str(json_string_value(json_object_get(json_object_get(e, "sandbox"),
	    "moved_from")), "a", "...and keeps moved_from");
	json_decref(e);
	refused("b/mv", "{\"host\":\"b\",\"sandbox\":{\"id\":\"mv\","
	    "\"state\":\"suspended\",\"ports\":[],\"moved_from\":\"A!\"}}",
	    "moved_from");
	view = json_object();
	claims = json_object();
	json_object_set_new(view, "a/mv", sbv("a", "mv", NULL, 3));
	json_object_set_new(view, "b/mv", sbv("b", "mv", NULL, 12));
	json_object_set_new(json_object_get(json_object_get(view, "b/mv"),
	    "sandbox"), "moved_from", json_string("a"));
	local = json_object();
	win = px_fleet_resolve(view, claims, local, "c", NULL);
	is_str(json_string_value(json_object_get(json_object_get(win, "mv"), "host")),
	    "b", "moved: the target's newer claim wins over the source's (on a third "
	    "host)");
	json_decref(win);
	json_object_set(local, "mv", json_object_get(json_object_get(view, "b/mv"),
	    "sandbox"));
	win = px_fleet_resolve(view, claims, local, "b", NULL);
	ok(json_is_true(json_object_get(json_object_get(win, "mv"), "local")),
	    "...on the target: served there at once, the source's claim still seen");
	json_decref(win);
	json_object_clear(local);
	/* and back: a's new claim says it moved from b, b's (older) still
	 * says from a: the newer */
	json_object_set_new(view, "a/mv", sbv("a", "mv", NULL, 20));
	json_object_set_new(json_object_get(json_object_get(view, "a/mv"),
	    "sandbox"), "moved_from", json_string("b"));
	win = px_fleet_resolve(view, claims, local, "c", NULL);
	is_str(json_string_value(json_object_get(json_object_get(win, "mv"), "host")),
	    "a", "moved there and back: the newer of the two");
	json_decref(win);
	/* a claim saying it moved from a host not in the race: no say */
	json_object_set_new(view, "a/mv", sbv("a", "mv", NULL, 3));
	json_object_set_new(json_object_get(json_object_get(view, "b/mv"),
	    "sandbox"), "moved_from", json_string("z"));
	win = px_fleet_resolve(view, claims, local, "c", NULL);
	is_str(json_string_value(json_object_get(json_object_get(win, "mv"), "host")),
	    "a", "moved from another host: the first claim still wins");
	json_decref(win);
	json_decref(view);
	json_decref(claims);
	json_decref(local);
}

/* A certificate with these subject alternative names (comma-separated,
 * as openssl's "DNS:a,IP:..." says them) and this subject CN. */
static X509 *
cert_with(const char *cn, const char *san)
{
	X509 *x = X509_new();
	X509_EXTENSION *e;
	X509V3_CTX ctx;

	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (san != NULL) {
		e = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, san);
		X509_add_ext(x, e, -1);
		X509_EXTENSION_free(e);
	}
	return x;
}

/* What the control helper tells the parent a fleet peer's certificate
 * names (fleet_tls.c): host ids only, lower-cased, bounded. */
static void
test_cert_names(void)
{
	char names[8][33];
	X509 *x;
	size_t n;

	x = cert_with("c", "DNS:a,DNS:B-2,IP:127.0.0.1,DNS:*.x,DNS:a.b,"
	    "DNS:-a,DNS:a-,DNS:under_score,"
	    "DNS:abcdefghijabcdefghijabcdefghijabc,"
	    "DNS:abcdefghijabcdefghijabcdefghijab");
	n = px_fleet_tls_cert_names(x, names, 8);
	ok(n == 3 && strcmp(names[0], "a") == 0 && strcmp(names[1], "b-2") == 0 &&
	    strcmp(names[2], "abcdefghijabcdefghijabcdefghijab") == 0,
	    "a fleet certificate's names: host ids only (no IP, wildcard, dot, "
	    "edge '-', '_' or 33 characters), lower-cased");
	n = px_fleet_tls_cert_names(x, names, 1);
	ok(n == 1 && strcmp(names[0], "a") == 0, "... at most as many as asked");
	X509_free(x);
	x = cert_with("a", NULL);
	ok(px_fleet_tls_cert_names(x, names, 8) == 0,
	    "... never the subject's CN (no DNS name: none)");
	X509_free(x);
	x = cert_with("a", "DNS:a,DNS:b,DNS:c,DNS:d,DNS:e,DNS:f,DNS:g,DNS:h,DNS:i");
	ok(px_fleet_tls_cert_names(x, names, 8) == 8 && strcmp(names[7], "h") == 0,
	    "... the first 8 of more");
	X509_free(x);
}

int
main(void)
{
	struct px_config c;
	struct px_route_match m;
	struct px_routes *r;
	char err[512] = "";
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
	/* one bad entry is left out, never the whole table (the workers
	 * would exit on it, restart and read the same table again) */
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
			ok(r != NULL && r->nsbs == 0 && r->nskipped == 1 &&
			    strstr(r->skipped, "fleet entry") != NULL,
			    "remote entry without host or fleet left out: %s",
			    r ? r->skipped : err);
			px_routes_unref(r);
		}
	}
	{
		static const char *mixed =
		    "{\"domain\":\"berth.localhost\",\"sandboxes\":["
		    "{\"id\":\"Bad_Id\",\"address\":\"\",\"ports\":[]},"
		    "{\"id\":\"good\",\"address\":\"10.0.0.2\",\"ports\":["
		    "{\"port\":0,\"host\":\"zero.example\"},{\"port\":8080,\"host\":\"shop.example\"},"
		    "{\"port\":8080},{\"port\":9090,\"host\":\"Bad..Name\"}]},"
		    "{\"id\":\"good\",\"address\":\"10.0.0.9\",\"ports\":[]},"
		    "{\"id\":\"other\",\"address\":\"10.0.0.3\",\"ports\":["
		    "{\"port\":80,\"host\":\"shop.example\"}]}],"
		    "\"tokens\":[{\"sha256\":\"xyz\"}],\"fleet_hosts\":[\"ok\",\"No!\"]}";

		r = px_routes_from_json(mixed, strlen(mixed), err, sizeof(err));
		ok(r != NULL, "a table with bad entries builds: %s", r ? r->skipped : err);
		if (r != NULL) {
			is_int(r->nskipped, 8, "bad id, port 0, port twice, bad name, id twice, "
			    "name twice, bad token, bad fleet host: each left out");
			is_int(px_route_lookup(r, "8080-good.berth.localhost", 25, &m),
			    PX_ROUTE_OK, "the good sandbox is routed");
			is_str(m.sb ? m.sb->address : "", "10.0.0.2", "...its first entry");
			is_int(px_route_lookup(r, "9090-good.berth.localhost", 25, &m),
			    PX_ROUTE_OK, "...its port whose name was bad too");
			is_int(px_route_lookup(r, "shop.example", 12, &m), PX_ROUTE_OK,
			    "a custom host two sandboxes name: routed once");
			is_str(m.sb ? m.sb->id : "", "good", "...to one of them");
			is_int(px_route_lookup(r, "zero.example", 12, &m), PX_ROUTE_UNKNOWN_HOST,
			    "port 0's name is not routed");
			is_int((int)r->nfleet_hosts, 1, "the good fleet host is kept");
			is_int((int)r->ntokens, 0, "the bad token is not");
		}
		px_routes_unref(r);
	}
	fleet_view_tests();
	unlink(path);
	test_cert_names();
	return done_testing();
}
