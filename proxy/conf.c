/*
 * config.c — see config.h. A small line-oriented parser: the grammar is
 * "directive arg..." and every failure says which line and why.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "conf.h"
#include "valid.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define PX_CONF_FIELD(dir, name, field, def, share, zero) \
	{ #dir, #name, #field, offsetof(struct px_config, field), def, share, zero },
const struct px_conf_field px_conf_fields[] = {
	PX_WORKER_FIELDS(PX_CONF_FIELD)
};
#undef PX_CONF_FIELD
const size_t px_conf_nfields = sizeof(px_conf_fields) / sizeof(px_conf_fields[0]);

static unsigned *
conf_slot(struct px_config *c, const struct px_conf_field *f)
{
	return (unsigned *)((char *)c + f->off);
}

unsigned
px_conf_field_value(const struct px_config *c, const struct px_conf_field *f,
    unsigned n)
{
	unsigned v = *conf_slot((struct px_config *)c, f);

	return f->share && n > 1 ? (v + n - 1) / n : v;
}

/* The field directive dir names with name, or NULL. */
static const struct px_conf_field *
conf_field(const char *dir, const char *name)
{
	size_t i;

	for (i = 0; i < px_conf_nfields; i++)
		if (strcmp(px_conf_fields[i].directive, dir) == 0 &&
		    strcmp(px_conf_fields[i].name, name) == 0)
			return &px_conf_fields[i];
	return NULL;
}

void
px_config_defaults(struct px_config *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < px_conf_nfields; i++)
		*conf_slot(c, &px_conf_fields[i]) = px_conf_fields[i].def;
	c->domain = strdup("berth.localhost");
	c->user = strdup("nobody");
	c->access_log = strdup("stderr");
	c->nflog_group = 5;
	c->vm_standby = 8;
	c->vm_max_procs = 64;
	c->vm_jail = 1;
	c->vm_ready_snapshot = 1;
	c->vm_ready_pool = 1;
	c->vm_max_forks = 16;
	c->vm_max_checkpoints = 16;
	c->vm_max_layers = 8;
	c->http2 = 1;
	c->vm_uid_base = 2100000000;
	c->vm_uid_count = 65536;
	c->vm_cpu_quota = 100;
	c->vm_mem_overhead = 256;
	c->vm_pids_max = 1024;
	c->vm_console_max = 4u << 20;
	c->vm_memory = PX_VM_MEMORY_DEFAULT;
	c->vm_max_memory = PX_VM_MAX_MEMORY_DEFAULT;
	c->vm_vcpus = PX_VM_VCPUS_DEFAULT;
	c->vm_max_vcpus = PX_VM_MAX_VCPUS_DEFAULT;
	c->vm_disk = PX_VM_DISK_DEFAULT;
	c->vm_max_disk = PX_VM_MAX_DISK_DEFAULT;
	c->eg_max_rules = 256;
}

void
px_config_free(struct px_config *c)
{
	int i;

	free(c->file);
	free(c->domain);
	free(c->user);
	free(c->acme_dir);
	free(c->access_log);
	free(c->control_listen);
	free(c->vmm_backend);
	free(c->template_dir);
	free(c->tap_prefix);
	free(c->fleet_etcd);
	free(c->fleet_etcd_ca);
	free(c->fleet_etcd_cert);
	free(c->fleet_etcd_key);
	free(c->fleet_etcd_user);
	free(c->fleet_etcd_password);
	free(c->fleet_host);
	free(c->fleet_listen);
	free(c->fleet_advertise);
	free(c->fleet_edge);
	free(c->fleet_ca);
	free(c->fleet_cert);
	free(c->fleet_key);
	free(c->fleet_prefix);
	for (i = 0; i < c->ncerts; i++) {
		free(c->certs[i].cert);
		free(c->certs[i].key);
	}
	for (i = 0; i < c->nhost_suffix; i++)
		free(c->host_suffix[i]);
	memset(c, 0, sizeof(*c));
}

/* vm_memory, vm_vcpus, vm_disk and their maxima: one grammar. */
struct vm_size {
	const char *name;
	const char *unit;
	unsigned min, max;
	size_t off;
};

static const struct vm_size vm_sizes[] = {
	{ "vm_memory", "MiB", PX_VM_MEMORY_MIN, PX_VM_MEMORY_LIMIT,
	  offsetof(struct px_config, vm_memory) },
	{ "vm_max_memory", "MiB", PX_VM_MEMORY_MIN, PX_VM_MEMORY_LIMIT,
	  offsetof(struct px_config, vm_max_memory) },
	{ "vm_vcpus", "a count", 1, PX_VM_VCPUS_LIMIT,
	  offsetof(struct px_config, vm_vcpus) },
	{ "vm_max_vcpus", "a count", 1, PX_VM_VCPUS_LIMIT,
	  offsetof(struct px_config, vm_max_vcpus) },
	{ "vm_disk", "MiB", PX_VM_DISK_MIN, PX_VM_DISK_LIMIT,
	  offsetof(struct px_config, vm_disk) },
	{ "vm_max_disk", "MiB", PX_VM_DISK_MIN, PX_VM_DISK_LIMIT,
	  offsetof(struct px_config, vm_max_disk) },
};

static const struct vm_size *
vm_size_of(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(vm_sizes) / sizeof(vm_sizes[0]); i++)
		if (strcmp(vm_sizes[i].name, name) == 0)
			return &vm_sizes[i];
	return NULL;
}

static unsigned *
vm_size_slot(struct px_config *c, const char *name)
{
	const struct vm_size *z = vm_size_of(name);

	return z ? (unsigned *)(void *)((char *)c + z->off) : NULL;
}

/* The counts with no unit: NAME N, N from min to max. */
struct vm_count {
	const char *name;
	unsigned min, max;
	size_t off;
};

static const struct vm_count vm_counts[] = {
	{ "vm_ready_pool", 0, 64, offsetof(struct px_config, vm_ready_pool) },
	{ "vm_max_forks", 1, 100, offsetof(struct px_config, vm_max_forks) },
	{ "vm_max_checkpoints", 1, 256,
	  offsetof(struct px_config, vm_max_checkpoints) },
	{ "vm_max_layers", 2, 12, offsetof(struct px_config, vm_max_layers) },
	{ "vm_max_procs", 1, 1024, offsetof(struct px_config, vm_max_procs) },
	{ "vm_standby", 0, 4096, offsetof(struct px_config, vm_standby) },
};

static const struct vm_count *
vm_count_of(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(vm_counts) / sizeof(vm_counts[0]); i++)
		if (strcmp(vm_counts[i].name, name) == 0)
			return &vm_counts[i];
	return NULL;
}

/* A default above its maximum could never be created: the error cites
 * the later of the two lines (lines[i]: where vm_sizes[i] was set, 0:
 * not in the file). */
static int
vm_size_check(const struct px_config *c, const char *file, const int *lines,
    char *err, size_t errlen)
{
	static const struct {
		const char *what, *max, *unit;
		size_t a, b;
	} pairs[] = {
		{ "vm_memory", "vm_max_memory", " MiB",
		  offsetof(struct px_config, vm_memory),
		  offsetof(struct px_config, vm_max_memory) },
		{ "vm_vcpus", "vm_max_vcpus", "",
		  offsetof(struct px_config, vm_vcpus),
		  offsetof(struct px_config, vm_max_vcpus) },
		{ "vm_disk", "vm_max_disk", " MiB",
		  offsetof(struct px_config, vm_disk),
		  offsetof(struct px_config, vm_max_disk) },
	};
	size_t i;

	/* vm_sizes lists each default right before its maximum */
	for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		unsigned v = *(const unsigned *)(const void *)((const char *)c +
		    pairs[i].a);
		unsigned max = *(const unsigned *)(const void *)((const char *)c +
		    pairs[i].b);
		int line = lines[2 * i] > lines[2 * i + 1] ? lines[2 * i] :
		    lines[2 * i + 1];

		if (v > max) {
			snprintf(err, errlen, "%s:%d: %s %u%s is above %s %u%s",
			    file, line, pairs[i].what, v, pairs[i].unit,
			    pairs[i].max, max, pairs[i].unit);
			return -1;
		}
	}
	return 0;
}

long
px_parse_duration(const char *s)
{
	char *end;
	long v, mul = 1000;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || v < 0 || *s == '+' || *s == '-')
		return -1;
	if (strcmp(end, "ms") == 0)
		mul = 1;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		mul = 1000;
	else if (strcmp(end, "m") == 0)
		mul = 60000;
	else if (strcmp(end, "h") == 0)
		mul = 3600000;
	else
		return -1;
	if (v > LONG_MAX / mul || v * mul > 7L * 24 * 3600000)
		return -1;
	return v * mul;
}

int
px_parse_sockaddr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    unsigned *portp)
{
	char host[64];
	const char *colon;
	size_t hlen;
	uint16_t port;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL || rb[1] != ':')
			return -1;
		hlen = rb - s - 1;
		if (hlen >= sizeof(host))
			return -1;
		memcpy(host, s + 1, hlen);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		hlen = colon - s;
		if (hlen >= sizeof(host))
			return -1;
		memcpy(host, s, hlen);
	}
	host[hlen] = '\0';
	if ((port = px_parse_port(colon + 1, strlen(colon + 1))) == 0)
		return -1;
	if (s[0] != '[') {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -1;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -1;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof(*sin6);
	}
	*portp = port;
	return 0;
}

unsigned
px_config_https_port(const struct px_config *c)
{
	int i;

	for (i = 0; i < c->nlisten; i++)
		if (c->listen[i].https == 1)
			return c->listen[i].port;
	return 443;
}

static int
add_listen(struct px_config *c, int https, const char *addr)
{
	struct px_listen *l;

	if (c->nlisten >= PX_MAX_LISTEN)
		return -1;
	l = &c->listen[c->nlisten];
	if (px_parse_sockaddr(addr, &l->ss, &l->sslen, &l->port) != 0)
		return -1;
	l->https = https;
	snprintf(l->text, sizeof(l->text), "%s", addr);
	c->nlisten++;
	return 0;
}

static int
set_str(char **dst, const char *v)
{
	char *n = strdup(v);

	if (n == NULL)
		return -1;
	free(*dst);
	*dst = n;
	return 0;
}

#define ERR(...) do {							\
	int _n = snprintf(err, errlen, "%s:%d: ", file, lineno);	\
	if (_n > 0 && (size_t)_n < errlen)				\
		snprintf(err + _n, errlen - _n, __VA_ARGS__);		\
	goto fail;							\
} while (0)

/* "a, b, c": the names directive dir takes, into out. */
static const char *
conf_names(const char *dir, char *out, size_t outlen)
{
	size_t i, o = 0;

	out[0] = '\0';
	for (i = 0; i < px_conf_nfields; i++)
		if (strcmp(px_conf_fields[i].directive, dir) == 0 && o < outlen)
			o += (size_t)snprintf(out + o, outlen - o, "%s%s",
			    o ? ", " : "", px_conf_fields[i].name);
	return out;
}

static int
addr_ok(const char *s)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned port;

	return px_parse_sockaddr(s, &ss, &sl, &port) == 0;
}

/* fleet_* directives; -1 with "file:line: what" in err. */
/* A DNS query type by name (those nc_dns_qtype_parse knows) or number,
 * meta types (128-255: ANY, AXFR...) excepted. */
static int
dns_qtype(const char *s, uint16_t *out)
{
	static const struct {
		const char *name;
		uint16_t type;
	} names[] = {
		{ "A", 1 }, { "NS", 2 }, { "CNAME", 5 }, { "SOA", 6 },
		{ "PTR", 12 }, { "MX", 15 }, { "TXT", 16 }, { "AAAA", 28 },
		{ "SRV", 33 }, { "NAPTR", 35 }, { "DS", 43 }, { "DNSKEY", 48 },
		{ "SVCB", 64 }, { "HTTPS", 65 }, { "CAA", 257 },
	};
	unsigned long v;
	char *end;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(s, names[i].name) == 0) {
			*out = names[i].type;
			return 0;
		}
	if (*s < '1' || *s > '9')
		return -1;
	v = strtoul(s, &end, 10);
	if (*end != '\0' || v > 65535 || (v >= 128 && v <= 255))
		return -1;
	*out = (uint16_t)v;
	return 0;
}

static int
fleet_directive(struct px_config *c, int argc, char **argv, char *err,
    size_t errlen, const char *file, int lineno)
{
	const char *d = argv[0] + 6, *v = argv[1];

	int two = strcmp(d, "cert") == 0 || strcmp(d, "etcd_cert") == 0 ||
	    strcmp(d, "etcd_user") == 0;

	if (argc != (two ? 3 : 2))
		ERR("'%s' takes %d argument%s", argv[0], two ? 2 : 1, two ? "s" : "");
	if (strcmp(d, "etcd") == 0) {
		c->fleet_etcd_tls = 0;
		if (strncmp(v, "http://", 7) == 0)
			v += 7;
		else if (strncmp(v, "https://", 8) == 0) {
			v += 8;
			c->fleet_etcd_tls = 1;
		}
		if (!addr_ok(v))
			ERR("fleet_etcd: expected http://ADDR:PORT or https://ADDR:PORT "
			    "of etcd's gateway, got '%s'", argv[1]);
		set_str(&c->fleet_etcd, v);
	} else if (strcmp(d, "etcd_ca") == 0) {
		set_str(&c->fleet_etcd_ca, v);
	} else if (strcmp(d, "etcd_cert") == 0) {
		set_str(&c->fleet_etcd_cert, v);
		set_str(&c->fleet_etcd_key, argv[2]);
	} else if (strcmp(d, "etcd_user") == 0) {
		size_t i, n = strlen(v);

		for (i = 0; i < n; i++)
			if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
			    (v[i] >= '0' && v[i] <= '9') || v[i] == '-' || v[i] == '_' ||
			    v[i] == '.'))
				break;
		if (n == 0 || n > 64 || i != n)
			ERR("fleet_etcd_user: a user name of 1-64 letters, digits, "
			    "'-', '_', '.' expected, then its password file");
		set_str(&c->fleet_etcd_user, v);
		set_str(&c->fleet_etcd_password, argv[2]);
	} else if (strcmp(d, "host") == 0) {
		size_t i, n = strlen(v);

		for (i = 0; i < n; i++)
			if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') ||
			    (v[i] == '-' && i > 0 && i < n - 1)))
				break;
		if (n == 0 || n > 32 || i != n)
			ERR("fleet_host: 1-32 lower-case letters, digits and inner '-' expected");
		set_str(&c->fleet_host, v);
	} else if (strcmp(d, "listen") == 0 || strcmp(d, "advertise") == 0 ||
	    strcmp(d, "edge") == 0) {
		if (!addr_ok(v))
			ERR("%s: invalid address '%s' (want ADDR:PORT or [V6]:PORT)", argv[0], v);
		set_str(d[0] == 'l' ? &c->fleet_listen : d[0] == 'a' ?
		    &c->fleet_advertise : &c->fleet_edge, v);
	} else if (strcmp(d, "ca") == 0) {
		set_str(&c->fleet_ca, v);
	} else if (strcmp(d, "cert") == 0) {
		set_str(&c->fleet_cert, argv[1]);
		set_str(&c->fleet_key, argv[2]);
	} else if (strcmp(d, "prefix") == 0) {
		if (v[0] != '/' || strlen(v) > 64 || strpbrk(v, " \t\"\\") != NULL ||
		    v[strlen(v) - 1] == '/')
			ERR("fleet_prefix: a key prefix such as /berth expected");
		set_str(&c->fleet_prefix, v);
	} else if (strcmp(d, "ttl") == 0) {
		long ms = px_parse_duration(v);

		if (ms < 1000 || ms > 3600000)
			ERR("fleet_ttl: a duration from 1s to 1h expected, got '%s'", v);
		c->fleet_ttl = (unsigned)ms;
	} else if (strcmp(d, "capacity") == 0) {
		char *end;
		long n = strtol(v, &end, 10);

		if (*end != '\0' || n < 1 || n > 1000000)
			ERR("fleet_capacity: expected 1-1000000, got '%s'", v);
		c->fleet_capacity = (unsigned)n;
	} else {
		ERR("unknown directive '%s'", argv[0]);
	}
	return 0;
fail:
	return -1;
}

/* Fleet mode needs all of its parts, and adds the mTLS listener. */
static int
fleet_check(struct px_config *c, const char *file, char *err, size_t errlen)
{
	const char *miss = NULL;

	if (c->fleet_etcd == NULL) {
		if (c->fleet_host || c->fleet_listen || c->fleet_ca || c->fleet_cert ||
		    c->fleet_advertise || c->fleet_edge || c->fleet_prefix ||
		    c->fleet_etcd_ca || c->fleet_etcd_cert || c->fleet_etcd_user) {
			snprintf(err, errlen, "%s: fleet_* directives without fleet_etcd", file);
			return -1;
		}
		return 0;
	}
	if (c->fleet_host == NULL)
		miss = "fleet_host";
	else if (c->fleet_listen == NULL)
		miss = "fleet_listen";
	else if (c->fleet_ca == NULL)
		miss = "fleet_ca";
	else if (c->fleet_cert == NULL)
		miss = "fleet_cert";
	if (miss != NULL) {
		snprintf(err, errlen, "%s: fleet_etcd is set but %s is missing", file, miss);
		return -1;
	}
	if (c->fleet_etcd_tls && c->fleet_etcd_ca == NULL) {
		snprintf(err, errlen, "%s: fleet_etcd https://%s needs fleet_etcd_ca (the "
		    "CA of etcd's server certificate)", file, c->fleet_etcd);
		return -1;
	}
	if (!c->fleet_etcd_tls && (c->fleet_etcd_ca || c->fleet_etcd_cert ||
	    c->fleet_etcd_user)) {
		snprintf(err, errlen, "%s: fleet_etcd_ca, fleet_etcd_cert and "
		    "fleet_etcd_user are for etcd over TLS: fleet_etcd https://%s", file,
		    c->fleet_etcd);
		return -1;
	}
	if (c->fleet_prefix == NULL)
		c->fleet_prefix = strdup("/berth");
	if (c->fleet_ttl == 0)
		c->fleet_ttl = 10000;
	if (add_listen(c, PX_LISTEN_FLEET, c->fleet_listen) != 0) {
		snprintf(err, errlen, "%s: too many listeners with fleet_listen", file);
		return -1;
	}
	return 0;
}

int
px_config_load(struct px_config *c, const char *file, char *err, size_t errlen)
{
	char line[4096];
	int lineno = 0, listen_seen = 0, sfx_line[PX_MAX_HOST_SUFFIX];
	int vm_lines[sizeof(vm_sizes) / sizeof(vm_sizes[0])] = { 0 };
	struct stat st;
	FILE *f;

	px_config_defaults(c);
	if (file == NULL) {
		add_listen(c, 1, "127.0.0.1:8443");
		add_listen(c, 0, "127.0.0.1:8080");
		return 0;
	}
	if ((f = fopen(file, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", file, strerror(errno));
		return -1;
	}
	/* a directory opens and reads as nothing: the defaults would serve
	 * while the operator believes their file does */
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s", file, S_ISDIR(st.st_mode) ?
		    "is a directory, not a configuration file" :
		    "not a regular file");
		fclose(f);
		return -1;
	}
	c->file = strdup(file);
	while (fgets(line, sizeof(line), f) != NULL) {
		char *argv[8], *p, *hash;
		int argc = 0;

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f))
			ERR("line too long");
		if ((hash = strchr(line, '#')) != NULL)
			*hash = '\0';
		for (p = strtok(line, " \t\r\n"); p != NULL; p = strtok(NULL, " \t\r\n")) {
			if (argc == 8)
				ERR("too many arguments");
			argv[argc++] = p;
		}
		if (argc == 0)
			continue;
#define NARGS(n) do { if (argc != (n) + 1) ERR("'%s' takes %d argument%s", argv[0], (n), (n) == 1 ? "" : "s"); } while (0)
		if (strcmp(argv[0], "domain") == 0) {
			NARGS(1);
			if (!px_valid_hostname(argv[1], strlen(argv[1])))
				ERR("invalid domain '%s': lower-case DNS name expected", argv[1]);
			set_str(&c->domain, argv[1]);
		} else if (strcmp(argv[0], "listen") == 0) {
			NARGS(2);
			if (strcmp(argv[1], "https") != 0 && strcmp(argv[1], "http") != 0)
				ERR("listen: expected 'https' or 'http', got '%s'", argv[1]);
			if (!listen_seen)
				c->nlisten = 0;
			listen_seen = 1;
			if (add_listen(c, argv[1][4] == 's', argv[2]) != 0)
				ERR("listen: invalid address '%s' (want ADDR:PORT or [V6]:PORT)", argv[2]);
		} else if (strcmp(argv[0], "workers") == 0) {
			char *end;
			long n;

			NARGS(1);
			n = strtol(argv[1], &end, 10);
			if (strcmp(argv[1], "auto") == 0)
				n = 0;
			else if (*end != '\0' || n < 1 || n > 64)
				ERR("workers: expected 1-64 or 'auto', got '%s'", argv[1]);
			c->workers = (int)n;
		} else if (strcmp(argv[0], "user") == 0) {
			NARGS(1);
			set_str(&c->user, argv[1]);
		} else if (strcmp(argv[0], "acme_dir") == 0) {
			NARGS(1);
			if (argv[1][0] != '/')
				ERR("acme_dir: absolute path expected");
			set_str(&c->acme_dir, argv[1]);
		} else if (strcmp(argv[0], "access_log") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "stderr") != 0 && strcmp(argv[1], "off") != 0 &&
			    argv[1][0] != '/')
				ERR("access_log: expected 'stderr', 'off' or an absolute path");
			set_str(&c->access_log, argv[1]);
		} else if (strcmp(argv[0], "vmm") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "auto") == 0)
				c->vmm = PX_VMM_AUTO;
			else if (strcmp(argv[1], "on") == 0)
				c->vmm = PX_VMM_ON;
			else if (strcmp(argv[1], "off") == 0)
				c->vmm = PX_VMM_OFF;
			else
				ERR("vmm: expected 'auto', 'on' or 'off', got '%s'", argv[1]);
		} else if (strcmp(argv[0], "egress") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "auto") == 0)
				c->egress = PX_VMM_AUTO;
			else if (strcmp(argv[1], "on") == 0)
				c->egress = PX_VMM_ON;
			else if (strcmp(argv[1], "off") == 0)
				c->egress = PX_VMM_OFF;
			else
				ERR("egress: expected 'auto', 'on' or 'off', got '%s'", argv[1]);
		} else if (strcmp(argv[0], "dns_upstream") == 0) {
			NARGS(1);
			if (!px_valid_ip(argv[1]) || strchr(argv[1], ':') != NULL)
				ERR("dns_upstream: an IPv4 address expected, got '%s'", argv[1]);
			if (c->ndns >= 4)
				ERR("dns_upstream: at most 4");
			snprintf(c->dns_upstream[c->ndns++], sizeof(c->dns_upstream[0]), "%s", argv[1]);
		} else if (strcmp(argv[0], "nflog_group") == 0) {
			char *end;
			long n;

			NARGS(1);
			n = strtol(argv[1], &end, 10);
			if (*end != '\0' || n < 1 || n > 65535)
				ERR("nflog_group: expected 1-65535, got '%s'", argv[1]);
			c->nflog_group = (uint16_t)n;
		} else if (strcmp(argv[0], "egress_max_rules") == 0 ||
		    strcmp(argv[0], "egress_conn_limit") == 0 ||
		    strcmp(argv[0], "egress_new_conn_rate") == 0) {
			/* ops' policy defaults; limits may be 'off' (0) */
			int rules = strcmp(argv[0], "egress_max_rules") == 0;
			unsigned long n;
			char *end;

			NARGS(1);
			if (!rules && strcmp(argv[1], "off") == 0)
				n = 0;
			else {
				n = strtoul(argv[1], &end, 10);
				if (argv[1][0] < '0' || argv[1][0] > '9' || *end != '\0' ||
				    (rules && n > PX_EG_MAX_RULES) ||
				    (!rules && (n == 0 || n > PX_EG_LIMIT_MAX)))
					ERR("%s: expected %s, got '%s'", argv[0], rules ?
					    "0-1024" : "1-1000000 or 'off'", argv[1]);
			}
			if (rules)
				c->eg_max_rules = (unsigned)n;
			else if (strcmp(argv[0], "egress_conn_limit") == 0)
				c->eg_conn_limit = (unsigned)n;
			else
				c->eg_new_conn_rate = (unsigned)n;
		} else if (strcmp(argv[0], "dns_qtypes") == 0) {
			int i;

			if (argc < 2)
				ERR("dns_qtypes: at least one query type (A, AAAA, "
				    "CNAME, HTTPS, SVCB, TXT, MX, SRV... or a number)");
			for (i = 1; i < argc; i++) {
				if (c->ndns_qtypes >= 16)
					ERR("dns_qtypes: at most 16 types");
				if (dns_qtype(argv[i], &c->dns_qtypes[c->ndns_qtypes++]) < 0)
					ERR("dns_qtypes: '%s' is not a query type (a name "
					    "such as TXT or MX, or a number 1-65535 but "
					    "128-255)", argv[i]);
			}
		} else if (strcmp(argv[0], "dns_query_rate") == 0 ||
		    strcmp(argv[0], "dns_label_max") == 0 ||
		    strcmp(argv[0], "dns_wildcard_names") == 0) {
			unsigned long n;
			char *end;
			uint32_t v;

			NARGS(1);
			if (strcmp(argv[1], "off") == 0)
				v = UINT32_MAX;
			else {
				n = strtoul(argv[1], &end, 10);
				if (argv[1][0] < '1' || argv[1][0] > '9' || *end != '\0' ||
				    n > 1000000 || (strcmp(argv[0], "dns_label_max") == 0 &&
				    n > 63))
					ERR("%s: expected %s or 'off', got '%s'", argv[0],
					    strcmp(argv[0], "dns_label_max") == 0 ? "1-63" :
					    "1-1000000", argv[1]);
				v = (uint32_t)n;
			}
			if (strcmp(argv[0], "dns_query_rate") == 0)
				c->dns_query_rate = v;
			else if (strcmp(argv[0], "dns_label_max") == 0)
				c->dns_label_max = v;
			else
				c->dns_wildcard_names = v;
		} else if (strcmp(argv[0], "egress_dns_deny") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "nxdomain") == 0)
				c->eg_dns_refused = 0;
			else if (strcmp(argv[1], "refused") == 0)
				c->eg_dns_refused = 1;
			else
				ERR("egress_dns_deny: expected 'nxdomain' or 'refused', got '%s'",
				    argv[1]);
		} else if (strcmp(argv[0], "vmm_backend") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "qemu") != 0 && strcmp(argv[1], "firecracker") != 0)
				ERR("vmm_backend: expected 'qemu' or 'firecracker', got '%s'", argv[1]);
			set_str(&c->vmm_backend, argv[1]);
		} else if (strcmp(argv[0], "accel") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "auto") == 0)
				c->accel = PX_ACCEL_AUTO;
			else if (strcmp(argv[1], "tcg") == 0)
				c->accel = PX_ACCEL_TCG;
			else if (strcmp(argv[1], "kvm") == 0)
				c->accel = PX_ACCEL_KVM;
			else
				ERR("accel: expected 'auto', 'tcg' or 'kvm', got '%s'", argv[1]);
		} else if (strcmp(argv[0], "vm_template") == 0 ||
		    strcmp(argv[0], "template") == 0) {
			/* template /dir is vm_template's older spelling */
			NARGS(1);
			if (strcmp(argv[0], "vm_template") == 0 &&
			    strcmp(argv[1], "debian") == 0) {
				c->vm_template = PX_TEMPLATE_DEBIAN;
				free(c->template_dir);
				c->template_dir = NULL;
			} else if (strcmp(argv[0], "vm_template") == 0 &&
			    strcmp(argv[1], "minimal") == 0) {
				c->vm_template = PX_TEMPLATE_MINIMAL;
				free(c->template_dir);
				c->template_dir = NULL;
			} else if (argv[1][0] == '/') {
				c->vm_template = PX_TEMPLATE_DIR;
				set_str(&c->template_dir, argv[1]);
			} else if (strcmp(argv[0], "vm_template") == 0) {
				ERR("vm_template: expected 'debian', 'minimal' or "
				    "an absolute directory, got '%s'", argv[1]);
			} else {
				ERR("template: absolute path expected");
			}
		} else if (strcmp(argv[0], "tap_prefix") == 0) {
			size_t i, n;

			NARGS(1);
			n = strlen(argv[1]);
			for (i = 0; i < n; i++)
				if (!((argv[1][i] >= 'a' && argv[1][i] <= 'z') ||
				    (argv[1][i] >= '0' && argv[1][i] <= '9')))
					break;
			if (n == 0 || n > 6 || i != n)
				ERR("tap_prefix: 1-6 lower-case letters or digits expected");
			set_str(&c->tap_prefix, argv[1]);
		} else if (strcmp(argv[0], "vm_pool") == 0) {
			unsigned a, b, c2, d, plen;
			char extra;

			NARGS(1);
			if (sscanf(argv[1], "%u.%u.%u.%u/%u%c", &a, &b, &c2, &d, &plen, &extra) != 5 ||
			    a > 255 || b > 255 || c2 > 255 || d > 255 || plen < 8 || plen > 30)
				ERR("vm_pool: expected an IPv4 CIDR such as 10.200.0.0/16 (prefix 8-30)");
			snprintf(c->vm_pool, sizeof(c->vm_pool), "%s", argv[1]);
		} else if (vm_size_slot(c, argv[0]) != NULL) {
			const struct vm_size *z = vm_size_of(argv[0]);
			char *end;
			long n;

			NARGS(1);
			errno = 0;
			n = strtol(argv[1], &end, 10);
			if (errno != 0 || end == argv[1] || *end != '\0' ||
			    n < (long)z->min || n > (long)z->max)
				ERR("%s: expected %s between %u and %u, got '%s'",
				    argv[0], z->unit, z->min, z->max, argv[1]);
			*vm_size_slot(c, argv[0]) = (unsigned)n;
			vm_lines[z - vm_sizes] = lineno;
		} else if (strcmp(argv[0], "http2") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "on") == 0)
				c->http2 = 1;
			else if (strcmp(argv[1], "off") == 0)
				c->http2 = 0;
			else
				ERR("http2: expected 'on' or 'off', got '%s'", argv[1]);
		} else if (strcmp(argv[0], "vm_jail") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "on") == 0)
				c->vm_jail = 1;
			else if (strcmp(argv[1], "off") == 0)
				c->vm_jail = 0;
			else
				ERR("vm_jail: expected 'on' or 'off', got '%s'", argv[1]);
		} else if (vm_count_of(argv[0]) != NULL) {
			const struct vm_count *k = vm_count_of(argv[0]);
			char *end;
			long n;

			NARGS(1);
			n = strtol(argv[1], &end, 10);
			if (*end != '\0' || end == argv[1] || n < (long)k->min ||
			    n > (long)k->max)
				ERR("%s: expected a count between %u and %u, got '%s'",
				    argv[0], k->min, k->max, argv[1]);
			*(unsigned *)(void *)((char *)c + k->off) = (unsigned)n;
		} else if (strcmp(argv[0], "vm_ready_snapshot") == 0) {
			NARGS(1);
			if (strcmp(argv[1], "on") == 0)
				c->vm_ready_snapshot = 1;
			else if (strcmp(argv[1], "off") == 0)
				c->vm_ready_snapshot = 0;
			else
				ERR("vm_ready_snapshot: expected 'on' or 'off', got '%s'", argv[1]);
		} else if (strcmp(argv[0], "vm_uid_range") == 0) {
			unsigned long a, b;
			char extra;

			NARGS(1);
			if (sscanf(argv[1], "%lu-%lu%c", &a, &b, &extra) != 2 ||
			    a < 1000 || b < a || b >= 4294967295UL)
				ERR("vm_uid_range: expected FIRST-LAST uids such as "
				    "2100000000-2100065535 (not below 1000), got '%s'",
				    argv[1]);
			c->vm_uid_base = (unsigned)a;
			c->vm_uid_count = (unsigned)(b - a + 1);
		} else if (strcmp(argv[0], "vm_cpu_quota") == 0 ||
		    strcmp(argv[0], "vm_mem_overhead") == 0 ||
		    strcmp(argv[0], "vm_pids_max") == 0 ||
		    strcmp(argv[0], "vm_console_max") == 0) {
			/* NAME, what it takes, bounds, where */
			static const struct {
				const char *name, *what;
				long min, max;
				size_t off;
			} lim[] = {
				{ "vm_cpu_quota", "a percentage of one core per vCPU (e.g. 50%)",
				  5, 100, offsetof(struct px_config, vm_cpu_quota) },
				{ "vm_mem_overhead", "MiB", 16, 65536,
				  offsetof(struct px_config, vm_mem_overhead) },
				{ "vm_pids_max", "a count", 64, 1000000,
				  offsetof(struct px_config, vm_pids_max) },
				{ "vm_console_max", "KiB", 64, 1048576,
				  offsetof(struct px_config, vm_console_max) },
			};
			size_t k;
			char *end;
			long n;

			NARGS(1);
			for (k = 0; strcmp(lim[k].name, argv[0]) != 0; k++)
				;
			errno = 0;
			n = strtol(argv[1], &end, 10);
			if (k == 0 && *end == '%')
				end++;
			if (errno != 0 || end == argv[1] || *end != '\0' ||
			    n < lim[k].min || n > lim[k].max)
				ERR("%s: expected %s between %ld and %ld, got '%s'",
				    argv[0], lim[k].what, lim[k].min, lim[k].max, argv[1]);
			if (k == 3)
				n *= 1024;	/* KiB -> bytes */
			*(unsigned *)(void *)((char *)c + lim[k].off) = (unsigned)n;
		} else if (strcmp(argv[0], "idle_pause") == 0 ||
		    strcmp(argv[0], "idle_suspend") == 0) {
			uint64_t *slot = argv[0][5] == 'p' ? &c->idle_pause : &c->idle_suspend;
			long ms;

			NARGS(1);
			if (strcmp(argv[1], "never") == 0)
				*slot = UINT64_MAX;
			else if ((ms = px_parse_duration(argv[1])) <= 0)
				ERR("%s: expected a duration (e.g. 5m) or 'never', got '%s'",
				    argv[0], argv[1]);
			else
				*slot = (uint64_t)ms;
		} else if (strcmp(argv[0], "control_listen") == 0) {
			struct sockaddr_storage ss;
			socklen_t sl;
			unsigned port;

			NARGS(1);
			if (px_parse_sockaddr(argv[1], &ss, &sl, &port) != 0)
				ERR("control_listen: invalid address '%s' (want ADDR:PORT or [V6]:PORT)", argv[1]);
			set_str(&c->control_listen, argv[1]);
		} else if (strncmp(argv[0], "fleet_", 6) == 0) {
			if (fleet_directive(c, argc, argv, err, errlen, file, lineno) != 0)
				goto fail;
		} else if (strcmp(argv[0], "custom_host_suffix") == 0) {
			const char *sfx;

			NARGS(1);
			sfx = argv[1][0] == '.' ? argv[1] + 1 : argv[1];
			if (!px_valid_hostname(sfx, strlen(sfx)))
				ERR("custom_host_suffix: '%s' is not a lower-case DNS name", argv[1]);
			if (px_host_is_ip(sfx) || px_host_is_localhost(sfx))
				ERR("custom_host_suffix: '%s' names addresses or loopback, not DNS names", argv[1]);
			if (c->nhost_suffix >= PX_MAX_HOST_SUFFIX)
				ERR("custom_host_suffix: at most %d", PX_MAX_HOST_SUFFIX);
			if ((c->host_suffix[c->nhost_suffix] = strdup(sfx)) == NULL)
				ERR("out of memory");
			sfx_line[c->nhost_suffix++] = lineno;
		} else if (strcmp(argv[0], "certificate") == 0) {
			NARGS(2);
			if (c->ncerts >= PX_MAX_CERTS)
				ERR("too many certificates (max %d)", PX_MAX_CERTS);
			c->certs[c->ncerts].cert = strdup(argv[1]);
			c->certs[c->ncerts].key = strdup(argv[2]);
			c->certs[c->ncerts].line = lineno;
			c->ncerts++;
		} else if (strcmp(argv[0], "timeout") == 0) {
			const struct px_conf_field *fl;
			char names[512];
			long ms;

			NARGS(2);
			if ((fl = conf_field("timeout", argv[1])) == NULL)
				ERR("timeout: unknown timeout '%s' (%s)", argv[1],
				    conf_names("timeout", names, sizeof(names)));
			if ((ms = px_parse_duration(argv[2])) < 0)
				ERR("timeout %s: invalid duration '%s' (e.g. 10s, 250ms, 5m, 1h)", argv[1], argv[2]);
			if (ms == 0 && !fl->zero)
				ERR("timeout %s: must be more than 0", argv[1]);
			*conf_slot(c, fl) = (unsigned)ms;
		} else if (strcmp(argv[0], "limit") == 0) {
			const struct px_conf_field *fl;
			char names[512], *end;
			long n;

			NARGS(2);
			n = strtol(argv[2], &end, 10);
			if (*end != '\0' || n < 1 || n > 1000000)
				ERR("limit %s: expected 1-1000000, got '%s'", argv[1], argv[2]);
			if ((fl = conf_field("limit", argv[1])) == NULL)
				ERR("limit: unknown limit '%s' (%s)", argv[1],
				    conf_names("limit", names, sizeof(names)));
			*conf_slot(c, fl) = (unsigned)n;
		} else {
			ERR("unknown directive '%s'", argv[0]);
		}
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s:%d: read error: %s", file, lineno + 1,
		    strerror(errno));
		goto fail;
	}
	fclose(f);
	{
		const char *d = c->domain;
		int i;

		/* names under berth's domain are berth's (<port>-<sandbox>) */
		for (i = 0; i < c->nhost_suffix; i++)
			if (strcmp(c->host_suffix[i], d) == 0 ||
			    px_host_under(c->host_suffix[i], d)) {
				snprintf(err, errlen, "%s:%d: custom_host_suffix: '%s' "
				    "is inside berth's domain '%s', whose names are "
				    "berth's", file, sfx_line[i], c->host_suffix[i], d);
				return -1;
			}
	}
	if (c->nlisten == 0) {
		add_listen(c, 1, "127.0.0.1:8443");
		add_listen(c, 0, "127.0.0.1:8080");
	}
	{
		int i, https = 0;

		for (i = 0; i < c->nlisten; i++)
			https |= c->listen[i].https;
		if (!https) {
			snprintf(err, errlen, "%s: no 'listen https' line", file);
			return -1;
		}
	}
	if (vm_size_check(c, file, vm_lines, err, errlen) != 0)
		return -1;
	return fleet_check(c, file, err, errlen);
fail:
	fclose(f);
	return -1;
}
