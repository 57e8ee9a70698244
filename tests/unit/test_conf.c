/*
 * test_conf.c — berth.conf parsing and its file:line errors
 * (proxy/conf.c).
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
	unlink(path);
	return done_testing();
}
