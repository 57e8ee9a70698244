/*
 * test_conf.c — berth.conf parsing and its file:line errors
 * (proxy/conf.c), and its table of directives: well formed, its defaults
 * parse, and berth.conf(5) documents every row.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static int
load(const char *text, struct px_config *c, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
	return px_config_load(c, path, err, errlen);
}

static void
bad(const char *text, int line, const char *needle)
{
	struct px_config c;
	char err[512] = "", want[128];
	int r = load(text, &c, err, sizeof(err));

	snprintf(want, sizeof(want), "%s:%d: ", path, line);
	ok(r == -1 && strncmp(err, want, strlen(want)) == 0 && strstr(err, needle) != NULL,
	    "error cites line %d and '%s': %s", line, needle, err);
	px_config_free(&c);
}

/* The man page's ".It Ic NAME ..." lines, one a string; NULL if the
 * page cannot be read. */
static char **
man_items(const char *page, int *n)
{
	char line[1024], **items = NULL;
	FILE *f = fopen(page, "r");

	*n = 0;
	if (f == NULL)
		return NULL;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, ".It Ic ", 7) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		items = realloc(items, (*n + 1) * sizeof(*items));
		items[(*n)++] = strdup(line + 7);
	}
	fclose(f);
	return items;
}

/* Whether word is one of s's words (split at blanks and '|'). */
static int
has_word(const char *s, const char *word)
{
	const char *p;
	size_t n = strlen(word);

	for (p = s; (p = strstr(p, word)) != NULL; p += n)
		if ((p == s || p[-1] == ' ' || p[-1] == '|') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '|'))
			return 1;
	return 0;
}

/* The directive an item names: its first word. */
static int
item_is(const char *item, const char *name)
{
	size_t n = strlen(name);

	return strncmp(item, name, n) == 0 &&
	    (item[n] == '\0' || item[n] == ' ');
}

static void
check_table(void)
{
	size_t i, j, dup = 0, bad_row = 0, bad_def = 0;
	struct px_config c;
	char err[512], text[256];

	for (i = 0; i < px_ndirectives; i++) {
		const struct px_directive *d = &px_directives[i];

		for (j = 0; j < i; j++)
			if (strcmp(d->name, px_directives[j].name) == 0) {
				diag("%s: twice in px_directives", d->name);
				dup++;
			}
		if (d->name[0] == '\0' || d->parse == NULL || d->doc == NULL ||
		    d->doc[0] == '\0' || (d->nargs < 1 && d->nargs != PX_NARGS_MANY) ||
		    d->size == 0) {
			diag("%s: a row without parser, docs, arguments or field",
			    d->name);
			bad_row++;
		}
		if (d->def == NULL)
			continue;
		/* a default is written as in the file, so the file takes it */
		snprintf(text, sizeof(text), "%s %s\n", d->name, d->def);
		if (d->nargs != 1 || load(text, &c, err, sizeof(err)) != 0) {
			diag("%s: its default '%s' does not parse: %s", d->name,
			    d->def, err);
			bad_def++;
		}
		if (d->nargs == 1)
			px_config_free(&c);
	}
	ok(px_ndirectives > 50, "the table has the directives (%zu)",
	    px_ndirectives);
	ok(dup == 0, "no directive twice in the table");
	ok(bad_row == 0, "every row has a parser, docs text, arguments and a field");
	ok(bad_def == 0, "every row's default parses as a line of the file");
}

/* Every directive of the table is an item of berth.conf(5) and every
 * item a directive; timeout's and limit's names are in their items. */
static void
check_man(void)
{
	const char *top = getenv("top_srcdir");
	char page[1024], **items;
	size_t i, missing = 0, extra = 0, names = 0;
	int n, k;

	snprintf(page, sizeof(page), "%s/doc/berth.conf.5", top ? top : "..");
	if ((items = man_items(page, &n)) == NULL) {
		ok(top == NULL, "berth.conf(5) is there (%s)%s", page,
		    top == NULL ? " # SKIP no top_srcdir" : "");
		return;
	}
	for (i = 0; i < px_ndirectives; i++) {
		for (k = 0; k < n && !item_is(items[k], px_directives[i].name); k++)
			;
		if (k == n) {
			diag("%s is not an item of %s", px_directives[i].name, page);
			missing++;
		}
	}
	for (k = 0; k < n; k++) {
		for (i = 0; i < px_ndirectives &&
		    !item_is(items[k], px_directives[i].name); i++)
			;
		if (i == px_ndirectives) {
			diag("berth.conf(5) item '%s' is no directive", items[k]);
			extra++;
		}
	}
	for (i = 0; i < px_conf_nfields; i++) {
		for (k = 0; k < n &&
		    !item_is(items[k], px_conf_fields[i].directive); k++)
			;
		if (k == n || !has_word(items[k], px_conf_fields[i].name)) {
			diag("%s %s is not in berth.conf(5)'s item",
			    px_conf_fields[i].directive, px_conf_fields[i].name);
			names++;
		}
	}
	ok(missing == 0, "berth.conf(5) documents every directive of the table");
	ok(extra == 0, "berth.conf(5) documents no directive the table lacks");
	ok(names == 0, "berth.conf(5) names every timeout and limit");
	for (k = 0; k < n; k++)
		free(items[k]);
	free(items);
}

int
main(void)
{
	struct px_config c;
	char err[512];
	int fd;

	strcpy(path, "/tmp/berth-conf-XXXXXX");
	fd = mkstemp(path);
	close(fd);

	ok(px_config_load(&c, NULL, err, sizeof(err)) == 0, "embedded default");
	is_str(c.domain, "berth.localhost", "default domain");
	is_int(c.nlisten, 2, "two listeners");
	is_str(c.listen[0].text, "127.0.0.1:8443", "https default");
	ok(c.listen[0].https && !c.listen[1].https, "https then http");
	is_int(px_config_https_port(&c), 8443, "https port for URLs");
	is_int(c.t_head, 10000, "head timeout 10 s");
	is_int(c.t_keepalive, 75000, "keep-alive 75 s");
	px_config_free(&c);

	ok(load("# comment\ndomain dev.example.com  # trailing\n"
	    "listen https [::1]:9443\nlisten http 127.0.0.1:9080\nworkers 3\n"
	    "timeout head 500ms\ntimeout tunnel 2h\nlimit connections 50\n"
	    "access_log off\n", &c, err, sizeof(err)) == 0, "full file loads: %s", err);
	is_str(c.domain, "dev.example.com", "domain");
	is_int(c.nlisten, 2, "listeners replace the default");
	is_int(c.listen[0].port, 9443, "v6 listener port");
	is_int(c.workers, 3, "workers");
	is_int(c.t_head, 500, "ms duration");
	is_int(c.t_tunnel, 7200000, "h duration");
	is_int(c.max_conns, 50, "limit");
	px_config_free(&c);

	ok(px_config_load(&c, NULL, err, sizeof(err)) == 0 &&
	    c.eg_max_rules == 256 && c.eg_conn_limit == 0 &&
	    c.eg_new_conn_rate == 0, "egress policy defaults: 256 rules, no limits");
	px_config_free(&c);
	ok(load("egress_max_rules 8\negress_conn_limit 100\n"
	    "egress_new_conn_rate 20\n", &c, err, sizeof(err)) == 0 &&
	    c.eg_max_rules == 8 && c.eg_conn_limit == 100 &&
	    c.eg_new_conn_rate == 20, "egress policy limits: %s", err);
	px_config_free(&c);
	ok(load("egress_conn_limit 100\negress_conn_limit off\n", &c, err,
	    sizeof(err)) == 0 && c.eg_conn_limit == 0, "a limit can be 'off'");
	px_config_free(&c);
	ok(load("egress_dns_deny refused\n", &c, err, sizeof(err)) == 0 &&
	    c.eg_dns_refused == 1, "egress_dns_deny refused");
	px_config_free(&c);
	bad("egress_dns_deny servfail\n", 1, "expected 'nxdomain' or 'refused'");
	ok(load("dns_qtypes A AAAA txt\ndns_qtypes 99\ndns_query_rate 10\n"
	    "dns_label_max 30\ndns_wildcard_names off\n", &c, err,
	    sizeof(err)) == 0 && c.ndns_qtypes == 4 && c.dns_qtypes[2] == 16 &&
	    c.dns_qtypes[3] == 99 && c.dns_query_rate == 10 &&
	    c.dns_label_max == 30 && c.dns_wildcard_names == UINT32_MAX,
	    "the resolver's tunnel limits: %s", err);
	px_config_free(&c);
	bad("dns_qtypes ANY\n", 1, "not a query type");
	bad("dns_qtypes\n", 1, "at least one query type");
	bad("dns_label_max 64\n", 1, "expected 1-63 or 'off'");
	bad("dns_query_rate 0\n", 1, "expected 1-1000000 or 'off'");
	bad("egress_max_rules 1025\n", 1, "expected 0-1024");
	bad("egress_max_rules off\n", 1, "expected 0-1024");
	bad("egress_conn_limit 0\n", 1, "expected 1-1000000 or 'off'");
	bad("egress_new_conn_rate -5\n", 1, "expected 1-1000000 or 'off'");
	ok(load("timeout body 5s\ntimeout send 2m\nlimit requests_per_sandbox 7\n"
	    "limit rate_per_sandbox 300\nlimit connections_per_sandbox 9\n",
	    &c, err, sizeof(err)) == 0, "limits load: %s", err);
	is_int(c.t_body, 5000, "body timeout");
	is_int(c.t_send, 120000, "send timeout");
	is_int(c.max_req_sandbox, 7, "requests per sandbox");
	is_int(c.rate_sandbox, 300, "rate per sandbox");
	is_int(c.max_conns_sandbox, 9, "connections per sandbox");
	px_config_free(&c);
	ok(load("", &c, err, sizeof(err)) == 0 && c.t_body == 30000 && c.t_send == 60000 &&
	    c.rate_sandbox == 0 && c.max_req_sandbox == 1000, "limit defaults");
	px_config_free(&c);

	ok(px_config_load(&c, NULL, err, sizeof(err)) == 0 &&
	    c.vm_memory == 256 && c.vm_max_memory == 4096 && c.vm_vcpus == 1 &&
	    c.vm_max_vcpus == 4 && c.vm_disk == 1024 && c.vm_max_disk == 16384,
	    "sandbox size defaults and maxima");
	px_config_free(&c);
	/* vm_template: debian by default; template /dir its older spelling */
	ok(px_config_load(&c, NULL, err, sizeof(err)) == 0 &&
	    c.vm_template == PX_TEMPLATE_DEBIAN && c.template_dir == NULL,
	    "vm_template: debian by default");
	px_config_free(&c);
	ok(load("vm_template minimal\n", &c, err, sizeof(err)) == 0 &&
	    c.vm_template == PX_TEMPLATE_MINIMAL && c.template_dir == NULL,
	    "vm_template minimal");
	px_config_free(&c);
	ok(load("vm_template /srv/tpl\n", &c, err, sizeof(err)) == 0 &&
	    c.vm_template == PX_TEMPLATE_DIR && c.template_dir != NULL &&
	    strcmp(c.template_dir, "/srv/tpl") == 0, "vm_template /dir");
	px_config_free(&c);
	ok(load("template /srv/tpl\nvm_template debian\n", &c, err,
	    sizeof(err)) == 0 && c.vm_template == PX_TEMPLATE_DEBIAN &&
	    c.template_dir == NULL, "the last of template and vm_template wins");
	px_config_free(&c);
	ok(load("vm_template minimal\ntemplate /srv/tpl\n", &c, err,
	    sizeof(err)) == 0 && c.vm_template == PX_TEMPLATE_DIR &&
	    c.template_dir != NULL, "template /dir is vm_template /dir");
	px_config_free(&c);
	bad("\nvm_template buster\n", 2, "vm_template: expected 'debian', "
	    "'minimal' or an absolute directory, got 'buster'");
	bad("template minimal\n", 1, "template: absolute path expected");
	ok(load("vm_max_memory 8192\nvm_memory 2048\nvm_vcpus 2\n"
	    "vm_max_vcpus 8\nvm_disk 4096\nvm_max_disk 65536\n", &c, err,
	    sizeof(err)) == 0 && c.vm_memory == 2048 && c.vm_max_memory == 8192 &&
	    c.vm_vcpus == 2 && c.vm_max_vcpus == 8 && c.vm_disk == 4096 &&
	    c.vm_max_disk == 65536, "sizes and maxima load: %s", err);
	px_config_free(&c);
	bad("vm_memory 8192\n", 1, "vm_memory 8192 MiB is above vm_max_memory "
	    "4096 MiB");
	bad("vm_vcpus 2\n\nvm_max_vcpus 1\n", 3, "vm_vcpus 2 is above "
	    "vm_max_vcpus 1");
	bad("vm_max_disk 512\n", 1, "vm_disk 1024 MiB is above vm_max_disk");
	bad("vm_max_memory 32\n", 1, "vm_max_memory: expected MiB between 64");
	bad("vm_max_vcpus 0\n", 1, "vm_max_vcpus: expected a count between 1 "
	    "and 64");
	bad("vm_disk 1g\n", 1, "vm_disk: expected MiB");
	bad("vm_memory\n", 1, "takes 1 argument");

	bad("domain Berth.Localhost\n", 1, "invalid domain");
	bad("\n\nlisten https nowhere\n", 3, "invalid address");
	bad("listen tcp 127.0.0.1:1\n", 1, "expected 'https' or 'http'");
	bad("workers 0\n", 1, "workers");
	bad("timeout head ten\n", 1, "invalid duration");
	bad("timeout nap 1s\n", 1, "unknown timeout");
	bad("timeout head 0\n", 1, "more than 0");
	bad("limit connections -1\n", 1, "expected 1-1000000");
	bad("limit rate_per_sandbox 0\n", 1, "expected 1-1000000");
	bad("limit requests 5\n", 1, "unknown limit");
	bad("timeout body 0\n", 1, "more than 0");
	bad("frobnicate yes\n", 1, "unknown directive");
	bad("domain a b\n", 1, "takes 1 argument");
	bad("access_log relative.log\n", 1, "absolute path");
	{
		struct px_config c2;

		ok(load("listen http 127.0.0.1:1\n", &c2, err, sizeof(err)) == -1 &&
		    strstr(err, "no 'listen https'") != NULL, "https listener required: %s", err);
		px_config_free(&c2);
	}
	ok(load("custom_host_suffix apps.example.com\ncustom_host_suffix .dev.example.org\n",
	    &c, err, sizeof(err)) == 0 && c.nhost_suffix == 2 &&
	    strcmp(c.host_suffix[0], "apps.example.com") == 0 &&
	    strcmp(c.host_suffix[1], "dev.example.org") == 0,
	    "custom_host_suffix is repeatable, a leading dot dropped: %s", err);
	px_config_free(&c);
	bad("custom_host_suffix Apps.Example.com\n", 1, "not a lower-case DNS name");
	bad("domain x.example\ncustom_host_suffix 10.0.0.1\n", 2, "addresses or loopback");
	bad("custom_host_suffix localhost\n", 1, "addresses or loopback");
	bad("custom_host_suffix a.localhost\n", 1, "addresses or loopback");
	bad("custom_host_suffix a b\n", 1, "takes 1 argument");
	bad("domain berth.example.com\n\ncustom_host_suffix apps.berth.example.com\n", 3,
	    "inside berth's domain");
	ok(load("domain berth.example.com\ncustom_host_suffix example.com\n", &c, err,
	    sizeof(err)) == 0, "a suffix above berth's domain is fine: %s", err);
	px_config_free(&c);
	{
		struct px_config c2;
		char dir[] = "/tmp/berth-conf-dir-XXXXXX";

		ok(mkdtemp(dir) != NULL && px_config_load(&c2, dir, err, sizeof(err)) == -1 &&
		    strstr(err, dir) != NULL && strstr(err, "is a directory") != NULL,
		    "a directory as the file is an error naming it: %s", err);
		px_config_free(&c2);
		rmdir(dir);
		ok(px_config_load(&c2, "/nonexistent/berth.conf", err, sizeof(err)) == -1 &&
		    strstr(err, "/nonexistent/berth.conf: No such file") != NULL,
		    "a missing file is an error naming it: %s", err);
		px_config_free(&c2);
	}
	is_int(px_parse_duration("90"), 90000, "plain seconds");
	is_int(px_parse_duration("5m"), 300000, "minutes");
	is_int(px_parse_duration("-1s"), -1, "negative");
	is_int(px_parse_duration("1d"), -1, "unknown unit");
	bad("fleet_bogus x\n", 1, "unknown directive 'fleet_bogus'");
	bad("fleet_bogus\n", 1, "unknown directive 'fleet_bogus'");
	bad("dns_qtypes A\nfleet_host a b\n", 2, "'fleet_host' takes 1 argument");
	bad("fleet_cert /c\n", 1, "'fleet_cert' takes 2 arguments");
	bad("vm_cpu_quota 4%\n", 1, "vm_cpu_quota: expected a percentage of one "
	    "core per vCPU (e.g. 50%) between 5 and 100, got '4%'");
	bad("fleet_ttl 2h\n", 1, "fleet_ttl: a duration from 1s to 1h expected, "
	    "got '2h'");
	bad("idle_pause 0\n", 1, "idle_pause: expected a duration (e.g. 5m) or "
	    "'never', got '0'");
	bad("accel hvf\n", 1, "accel: expected 'auto', 'tcg' or 'kvm', got 'hvf'");
	bad("workers 65\n", 1, "workers: expected 1-64 or 'auto', got '65'");
	bad("helper_uid_range 5000-5007\n", 1, "helper_uid_range: expected "
	    "FIRST-LAST uids such as 2099999872-2099999999 (not below 1000, at "
	    "least 9), got '5000-5007'");
	bad("helper_uid_range 500-599\n", 1, "not below 1000");
	/* the later of the two lines is cited */
	bad("vm_uid_range 10000-10999\n\nhelper_uid_range 10900-11100\n", 3,
	    "helper_uid_range 10900-11100 overlaps vm_uid_range 10000-10999");
	bad("helper_uid_range 2100000000-2100000099\n", 1, "overlaps vm_uid_range");
	bad("heartbeat 50ms\n", 1, "heartbeat: expected a duration (e.g. 5m) or "
	    "'off', got '50ms'");
	ok(load("helper_uid_range 5000-5099\nheartbeat 2s\n", &c, err,
	    sizeof(err)) == 0 && c.helper_uid_base == 5000 &&
	    c.helper_uid_count == 100 && c.heartbeat == 2000,
	    "helper_uid_range and heartbeat: %s", err);
	px_config_free(&c);
	ok(load("heartbeat off\n", &c, err, sizeof(err)) == 0 && c.heartbeat == 0,
	    "heartbeat off: %s", err);
	px_config_free(&c);
	ok(load("vm_console_max 64\nvm_cpu_quota 50%\nidle_pause never\n"
	    "dns_label_max off\nnflog_group 7\nworkers auto\n", &c, err,
	    sizeof(err)) == 0 && c.vm_console_max == 65536 &&
	    c.vm_cpu_quota == 50 && c.idle_pause == UINT64_MAX &&
	    c.dns_label_max == UINT32_MAX && c.nflog_group == 7 &&
	    c.workers == 0, "KiB, %%, never, off and auto: %s", err);
	px_config_free(&c);
	ok(px_config_load(&c, NULL, err, sizeof(err)) == 0 &&
	    strcmp(c.user, "nobody") == 0 && strcmp(c.access_log, "stderr") == 0 &&
	    c.nflog_group == 5 && c.http2 == 1 && c.vm_jail == 1 &&
	    c.vm_uid_base == 2100000000 && c.vm_uid_count == 65536 &&
	    c.helper_uid_base == 2099999872 && c.helper_uid_count == 128 &&
	    c.heartbeat == 10000 &&
	    c.vm_console_max == 4u << 20 && c.vm_cpu_quota == 100 &&
	    c.vm_standby == 8 && c.vmm_backend == NULL && c.fleet_ttl == 0,
	    "the table's defaults");
	px_config_free(&c);
	/* p_choice keeps a word's index: the words follow the enums */
	ok(load("vmm on\negress off\naccel kvm\n", &c, err, sizeof(err)) == 0 &&
	    c.vmm == PX_VMM_ON && c.egress == PX_VMM_OFF && c.accel == PX_ACCEL_KVM,
	    "vmm, egress and accel keep their enums: %s", err);
	px_config_free(&c);
	check_table();
	check_man();
	unlink(path);
	return done_testing();
}
