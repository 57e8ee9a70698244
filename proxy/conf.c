/*
 * conf.c — see conf.h. A small line-oriented parser: the grammar is
 * "directive arg..." and every failure says which line and why. The
 * directives are a table (px_directives, at the end): its rows drive
 * the parse, the defaults and the check that berth.conf(5) has them all.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "conf.h"
#include "proc.h"		/* PX_UID_HELPERS */
#include "valid.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
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
	free(c->fleet_zone);
	free(c->fleet_api_listen);
	free(c->template_build_allow);
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

/* Fleet mode needs all of its parts, and adds the mTLS listener. */
static int
fleet_check(struct px_config *c, const char *file, char *err, size_t errlen)
{
	const char *miss = NULL;

	if (c->fleet_etcd == NULL) {
		if (c->fleet_host || c->fleet_listen || c->fleet_ca || c->fleet_cert ||
		    c->fleet_advertise || c->fleet_edge || c->fleet_prefix ||
		    c->fleet_api_listen ||
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

/*
 * The parse of one file: where it is, where the error goes, and what
 * the directives remember between lines.
 */
struct px_conf_ctx {
	struct px_config *c;
	const char	*file;
	int		 lineno;
	char		*err;
	size_t		 errlen;
	int		 listen_seen;	/* the first listen drops the defaults */
	int		 sfx_line[PX_MAX_HOST_SUFFIX];	/* each suffix's line */
	int		*line;		/* [i]: px_directives[i]'s last line */
};

/* "file:line: what" in the error; returns -1. */
static int __attribute__((format(printf, 2, 3)))
conf_err(struct px_conf_ctx *x, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(x->err, x->errlen, "%s:%d: ", x->file, x->lineno);

	if (n > 0 && (size_t)n < x->errlen) {
		va_start(ap, fmt);
		vsnprintf(x->err + n, x->errlen - n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static char **
conf_str(struct px_config *c, size_t off)
{
	return (char **)(void *)((char *)c + off);
}

/* v into d's field, whatever its width (all ones stays all ones). */
static void
conf_store(struct px_config *c, const struct px_directive *d,
    unsigned long long v)
{
	char *p = (char *)c + d->off;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;
	uint64_t v64 = v;

	if (d->size == sizeof(v16))
		memcpy(p, &v16, sizeof(v16));
	else if (d->size == sizeof(v32))
		memcpy(p, &v32, sizeof(v32));
	else if (d->size == sizeof(v64))
		memcpy(p, &v64, sizeof(v64));
}

/* The index of word v in "a|b|c", or -1. */
static int
conf_choice(const char *list, const char *v)
{
	size_t n = strlen(v);
	const char *e;
	int i;

	for (i = 0;; i++, list = e + 1) {
		e = strchr(list, '|');
		if ((e ? (size_t)(e - list) : strlen(list)) == n &&
		    strncmp(list, v, n) == 0)
			return i;
		if (e == NULL)
			return -1;
	}
}

/* "'a', 'b' or 'c'" from "a|b|c", then last unquoted if not NULL. */
static const char *
conf_choices(const char *list, const char *last, char *out, size_t outlen)
{
	const char *p, *e;
	size_t o = 0;
	int n = last != NULL, i;

	for (p = list; p != NULL; p = e ? e + 1 : NULL, n++)
		e = strchr(p, '|');
	out[0] = '\0';
	for (i = 0, p = list; i < n && o < outlen; i++) {
		const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";

		if (p == NULL) {
			o += (size_t)snprintf(out + o, outlen - o, "%s%s", sep, last);
			break;
		}
		e = strchr(p, '|');
		o += (size_t)snprintf(out + o, outlen - o, "%s'%.*s'", sep,
		    (int)(e ? e - p : (long)strlen(p)), p);
		p = e ? e + 1 : NULL;
	}
	return out;
}

/* "1s", "1h": a bound of a duration as one would write it. */
static const char *
conf_ms(long ms, char *out, size_t outlen)
{
	if (ms >= 3600000 && ms % 3600000 == 0)
		snprintf(out, outlen, "%ldh", ms / 3600000);
	else if (ms >= 60000 && ms % 60000 == 0)
		snprintf(out, outlen, "%ldm", ms / 60000);
	else if (ms >= 1000 && ms % 1000 == 0)
		snprintf(out, outlen, "%lds", ms / 1000);
	else
		snprintf(out, outlen, "%ldms", ms);
	return out;
}

/*
 * The generic parsers: argv[1] (and argv[2]) into d's field.
 */

/* A number from min to max, or the word alt. Errors say the unit
 * ("expected MiB between 64 and 1048576") or else the range
 * ("expected 1-64 or 'auto'"). */
static int
p_uint(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	const char *v = argv[1];
	char *end;
	long n;

	if (d->alt != NULL && strcmp(v, d->alt) == 0) {
		conf_store(x->c, d, d->flags & PX_DF_ALTMAX ? ~0ULL : 0);
		return 0;
	}
	errno = 0;
	n = strtol(v, &end, 10);
	if (d->flags & PX_DF_PERCENT && *end == '%')
		end++;
	if (errno != 0 || end == v || *end != '\0' || n < d->min ||
	    n > d->max || (d->flags & PX_DF_DIGIT && (*v < '0' || *v > '9')) ||
	    (d->flags & PX_DF_DIGIT1 && (*v < '1' || *v > '9'))) {
		if (d->unit != NULL)
			return conf_err(x, "%s: expected %s between %ld and %ld, "
			    "got '%s'", d->name, d->unit, d->min, d->max, v);
		return conf_err(x, "%s: expected %ld-%ld%s%s%s, got '%s'",
		    d->name, d->min, d->max, d->alt ? " or '" : "",
		    d->alt ? d->alt : "", d->alt ? "'" : "", v);
	}
	conf_store(x->c, d, (unsigned long long)n *
	    (d->flags & PX_DF_KIB ? 1024 : 1));
	return 0;
}

/* A duration (kept in ms) from min to max, or the word alt. */
static int
p_duration(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	char lo[16], hi[16];
	long ms;

	if (d->alt != NULL && strcmp(argv[1], d->alt) == 0) {
		conf_store(x->c, d, d->flags & PX_DF_ALTMAX ? ~0ULL : 0);
		return 0;
	}
	ms = px_parse_duration(argv[1]);
	if (ms < d->min || ms > d->max) {
		if (d->alt != NULL)
			return conf_err(x, "%s: expected a duration (e.g. 5m) or "
			    "'%s', got '%s'", d->name, d->alt, argv[1]);
		return conf_err(x, "%s: a duration from %s to %s expected, got "
		    "'%s'", d->name, conf_ms(d->min, lo, sizeof(lo)),
		    conf_ms(d->max, hi, sizeof(hi)), argv[1]);
	}
	conf_store(x->c, d, (unsigned long long)ms);
	return 0;
}

/* One of the words of unit ("auto|on|off"): its index. */
static int
p_choice(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	char words[128];
	int i;

	if ((i = conf_choice(d->unit, argv[1])) < 0)
		return conf_err(x, "%s: expected %s, got '%s'", d->name,
		    conf_choices(d->unit, NULL, words, sizeof(words)), argv[1]);
	conf_store(x->c, d, (unsigned long long)i);
	return 0;
}

/* One of the words of unit, kept as a string. */
static int
p_word(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	char words[128];

	if (conf_choice(d->unit, argv[1]) < 0)
		return conf_err(x, "%s: expected %s, got '%s'", d->name,
		    conf_choices(d->unit, NULL, words, sizeof(words)), argv[1]);
	set_str(conf_str(x->c, d->off), argv[1]);
	return 0;
}

/* on (1) or off (0). */
static int
p_onoff(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	if (strcmp(argv[1], "on") == 0)
		conf_store(x->c, d, 1);
	else if (strcmp(argv[1], "off") == 0)
		conf_store(x->c, d, 0);
	else
		return conf_err(x, "%s: expected 'on' or 'off', got '%s'",
		    d->name, argv[1]);
	return 0;
}

static int
p_string(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	set_str(conf_str(x->c, d->off), argv[1]);
	return 0;
}

/* Two strings: off gets the first, off2 the second (cert, key). */
static int
p_pair(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	set_str(conf_str(x->c, d->off), argv[1]);
	set_str(conf_str(x->c, d->off2), argv[2]);
	return 0;
}

/* An absolute path, or one of the words of unit if any. */
static int
p_path(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	char words[128];

	if (argv[1][0] != '/' &&
	    (d->unit == NULL || conf_choice(d->unit, argv[1]) < 0)) {
		if (d->unit != NULL)
			return conf_err(x, "%s: expected %s", d->name, conf_choices(
			    d->unit, "an absolute path", words, sizeof(words)));
		return conf_err(x, "%s: absolute path expected", d->name);
	}
	set_str(conf_str(x->c, d->off), argv[1]);
	return 0;
}

/* ADDR:PORT or [V6]:PORT, kept as written. */
static int
p_address(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned port;

	if (px_parse_sockaddr(argv[1], &ss, &sl, &port) != 0)
		return conf_err(x, "%s: invalid address '%s' (want ADDR:PORT or "
		    "[V6]:PORT)", d->name, argv[1]);
	set_str(conf_str(x->c, d->off), argv[1]);
	return 0;
}

/*
 * The directives' own parsers.
 */

static int
p_domain(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	if (!px_valid_hostname(argv[1], strlen(argv[1])))
		return conf_err(x, "invalid domain '%s': lower-case DNS name "
		    "expected", argv[1]);
	set_str(conf_str(x->c, d->off), argv[1]);
	return 0;
}

/* The first listen line replaces the default listeners. */
static int
p_listen(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	if (strcmp(argv[1], "https") != 0 && strcmp(argv[1], "http") != 0)
		return conf_err(x, "listen: expected 'https' or 'http', got '%s'",
		    argv[1]);
	if (!x->listen_seen)
		x->c->nlisten = 0;
	x->listen_seen = 1;
	if (add_listen(x->c, argv[1][4] == 's', argv[2]) != 0)
		return conf_err(x, "listen: invalid address '%s' (want ADDR:PORT "
		    "or [V6]:PORT)", argv[2]);
	return 0;
}

static int
p_host_suffix(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	struct px_config *c = x->c;
	const char *sfx = argv[1][0] == '.' ? argv[1] + 1 : argv[1];

	if (!px_valid_hostname(sfx, strlen(sfx)))
		return conf_err(x, "custom_host_suffix: '%s' is not a lower-case "
		    "DNS name", argv[1]);
	if (px_host_is_ip(sfx) || px_host_is_localhost(sfx))
		return conf_err(x, "custom_host_suffix: '%s' names addresses or "
		    "loopback, not DNS names", argv[1]);
	if (c->nhost_suffix >= PX_MAX_HOST_SUFFIX)
		return conf_err(x, "custom_host_suffix: at most %d",
		    PX_MAX_HOST_SUFFIX);
	if ((c->host_suffix[c->nhost_suffix] = strdup(sfx)) == NULL)
		return conf_err(x, "out of memory");
	x->sfx_line[c->nhost_suffix++] = x->lineno;
	return 0;
}

static int
p_certificate(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	struct px_config *c = x->c;

	if (c->ncerts >= PX_MAX_CERTS)
		return conf_err(x, "too many certificates (max %d)", PX_MAX_CERTS);
	c->certs[c->ncerts].cert = strdup(argv[1]);
	c->certs[c->ncerts].key = strdup(argv[2]);
	c->certs[c->ncerts].line = x->lineno;
	c->ncerts++;
	return 0;
}

/* timeout NAME DURATION: NAME one of px_conf_fields' */
static int
p_timeout(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	const struct px_conf_field *fl;
	char names[512];
	long ms;

	if ((fl = conf_field("timeout", argv[1])) == NULL)
		return conf_err(x, "timeout: unknown timeout '%s' (%s)", argv[1],
		    conf_names("timeout", names, sizeof(names)));
	if ((ms = px_parse_duration(argv[2])) < 0)
		return conf_err(x, "timeout %s: invalid duration '%s' (e.g. 10s, "
		    "250ms, 5m, 1h)", argv[1], argv[2]);
	if (ms == 0 && !fl->zero)
		return conf_err(x, "timeout %s: must be more than 0", argv[1]);
	*conf_slot(x->c, fl) = (unsigned)ms;
	return 0;
}

/* limit NAME N: the number is checked before the name */
static int
p_limit(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	const struct px_conf_field *fl;
	char names[512], *end;
	long n;

	n = strtol(argv[2], &end, 10);
	if (*end != '\0' || n < 1 || n > 1000000)
		return conf_err(x, "limit %s: expected 1-1000000, got '%s'",
		    argv[1], argv[2]);
	if ((fl = conf_field("limit", argv[1])) == NULL)
		return conf_err(x, "limit: unknown limit '%s' (%s)", argv[1],
		    conf_names("limit", names, sizeof(names)));
	*conf_slot(x->c, fl) = (unsigned)n;
	return 0;
}

/* vm_template debian|minimal|/dir, and template /dir (its older
 * spelling, unit NULL): the last of the two wins. */
static int
p_template(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	struct px_config *c = x->c;
	char words[128];
	int i;

	if (d->unit != NULL && (i = conf_choice(d->unit, argv[1])) >= 0) {
		c->vm_template = i;
		free(c->template_dir);
		c->template_dir = NULL;
	} else if (argv[1][0] == '/') {
		c->vm_template = PX_TEMPLATE_DIR;
		set_str(&c->template_dir, argv[1]);
	} else if (d->unit != NULL) {
		return conf_err(x, "%s: expected %s, got '%s'", d->name,
		    conf_choices(d->unit, "an absolute directory", words,
		    sizeof(words)), argv[1]);
	} else
		return conf_err(x, "%s: absolute path expected", d->name);
	return 0;
}

static int
p_tap_prefix(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	size_t i, n = strlen(argv[1]);

	for (i = 0; i < n; i++)
		if (!((argv[1][i] >= 'a' && argv[1][i] <= 'z') ||
		    (argv[1][i] >= '0' && argv[1][i] <= '9')))
			break;
	if (n == 0 || n > 6 || i != n)
		return conf_err(x, "tap_prefix: 1-6 lower-case letters or digits "
		    "expected");
	set_str(conf_str(x->c, d->off), argv[1]);
	return 0;
}

static int
p_vm_pool(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	unsigned a, b, c, e, plen;
	char extra;

	if (sscanf(argv[1], "%u.%u.%u.%u/%u%c", &a, &b, &c, &e, &plen,
	    &extra) != 5 || a > 255 || b > 255 || c > 255 || e > 255 ||
	    plen < 8 || plen > 30)
		return conf_err(x, "vm_pool: expected an IPv4 CIDR such as "
		    "10.200.0.0/16 (prefix 8-30)");
	snprintf(x->c->vm_pool, sizeof(x->c->vm_pool), "%s", argv[1]);
	return 0;
}

/* FIRST-LAST uids: FIRST into d's field, the count into its second */
static int
p_uid_range(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	unsigned long a, b;
	char extra;

	if (sscanf(argv[1], "%lu-%lu%c", &a, &b, &extra) != 2 ||
	    a < 1000 || b < a || b >= 4294967295UL ||
	    b - a + 1 < (unsigned long)d->min)
		return conf_err(x, "%s: expected FIRST-LAST uids such as %s (not "
		    "below 1000, at least %ld), got '%s'", d->name, d->def,
		    d->min, argv[1]);
	*(unsigned *)(void *)((char *)x->c + d->off) = (unsigned)a;
	*(unsigned *)(void *)((char *)x->c + d->off2) = (unsigned)(b - a + 1);
	return 0;
}

static int
p_dns_upstream(struct px_conf_ctx *x, const struct px_directive *d,
    int argc, char **argv)
{
	struct px_config *c = x->c;

	if (!px_valid_ip(argv[1]) || strchr(argv[1], ':') != NULL)
		return conf_err(x, "dns_upstream: an IPv4 address expected, got "
		    "'%s'", argv[1]);
	if (c->ndns >= 4)
		return conf_err(x, "dns_upstream: at most 4");
	snprintf(c->dns_upstream[c->ndns++], sizeof(c->dns_upstream[0]), "%s",
	    argv[1]);
	return 0;
}

static int
p_dns_qtypes(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	struct px_config *c = x->c;
	int i;

	if (argc < 2)
		return conf_err(x, "dns_qtypes: at least one query type (A, AAAA, "
		    "CNAME, HTTPS, SVCB, TXT, MX, SRV... or a number)");
	for (i = 1; i < argc; i++) {
		if (c->ndns_qtypes >= 16)
			return conf_err(x, "dns_qtypes: at most 16 types");
		if (dns_qtype(argv[i], &c->dns_qtypes[c->ndns_qtypes++]) < 0)
			return conf_err(x, "dns_qtypes: '%s' is not a query type (a "
			    "name such as TXT or MX, or a number 1-65535 but "
			    "128-255)", argv[i]);
	}
	return 0;
}

/* http://ADDR:PORT or https://ADDR:PORT (or a bare ADDR:PORT: http) */
static int
p_fleet_etcd(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	struct px_config *c = x->c;
	const char *v = argv[1];

	c->fleet_etcd_tls = 0;
	if (strncmp(v, "http://", 7) == 0)
		v += 7;
	else if (strncmp(v, "https://", 8) == 0) {
		v += 8;
		c->fleet_etcd_tls = 1;
	}
	if (!addr_ok(v))
		return conf_err(x, "fleet_etcd: expected http://ADDR:PORT or "
		    "https://ADDR:PORT of etcd's gateway, got '%s'", argv[1]);
	set_str(&c->fleet_etcd, v);
	return 0;
}

/* fleet_etcd_user NAME PASSWORD-FILE */
static int
p_etcd_user(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	const char *v = argv[1];
	size_t i, n = strlen(v);

	for (i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
		    (v[i] >= '0' && v[i] <= '9') || v[i] == '-' || v[i] == '_' ||
		    v[i] == '.'))
			break;
	if (n == 0 || n > 64 || i != n)
		return conf_err(x, "fleet_etcd_user: a user name of 1-64 letters, "
		    "digits, '-', '_', '.' expected, then its password file");
	return p_pair(x, d, argc, argv);
}

static int
p_fleet_host(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	const char *v = argv[1];
	size_t i, n = strlen(v);

	for (i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') ||
		    (v[i] == '-' && i > 0 && i < n - 1)))
			break;
	if (n == 0 || n > 32 || i != n)
		return conf_err(x, "%s: 1-32 lower-case letters, digits and "
		    "inner '-' expected", d->name);
	set_str(conf_str(x->c, d->off), v);
	return 0;
}

static int
p_fleet_prefix(struct px_conf_ctx *x, const struct px_directive *d, int argc,
    char **argv)
{
	const char *v = argv[1];

	if (v[0] != '/' || strlen(v) > 64 || strpbrk(v, " \t\"\\") != NULL ||
	    v[strlen(v) - 1] == '/')
		return conf_err(x, "fleet_prefix: a key prefix such as /berth "
		    "expected");
	set_str(conf_str(x->c, d->off), v);
	return 0;
}

/*
 * The table. F(field) is the field a row sets; def is parsed by the
 * row's own parser, so a default is written as in the file. p_choice
 * keeps a word's index: its words follow the enum's order (PX_VMM_*,
 * PX_ACCEL_*), as vm_template's do PX_TEMPLATE_*.
 */
#define F(f)	.off = offsetof(struct px_config, f), \
		.size = sizeof(((struct px_config *)0)->f)
#define F2(f)	.off2 = offsetof(struct px_config, f)
#define STR_(x)	#x
#define STR(x)	STR_(x)
#define DAY_MS	(7L * 24 * 3600000)	/* px_parse_duration's most */

const struct px_directive px_directives[] = {
	/* the proxy */
	{ "domain", 1, p_domain, F(domain), .def = "berth.localhost",
	  .doc = "sandbox URLs are https://<port>-<sandbox>.<name>/" },
	{ "custom_host_suffix", 1, p_host_suffix, F(host_suffix),
	  .doc = "a suffix under which a sandbox token may set custom hosts "
	  "(repeatable)" },
	{ "listen", 2, p_listen, F(listen),
	  .doc = "a listener: https or http, then ADDR:PORT (repeatable)" },
	{ "workers", 1, p_uint, F(workers), .min = 1, .max = 64, .alt = "auto",
	  .def = "auto", .doc = "proxy worker processes; auto: one per core" },
	{ "user", 1, p_string, F(user), .def = "nobody",
	  .doc = "the workers' and helpers' group (its own), unjailed VMMs' user" },
	{ "helper_uid_range", 1, p_uid_range, F(helper_uid_base),
	  F2(helper_uid_count), .min = PX_UID_HELPERS + 1,
	  .def = "2099999872-2099999999",
	  .doc = "a uid per helper and per worker, FIRST-LAST" },
	{ "heartbeat", 1, p_duration, F(heartbeat), .min = 100,
	  .max = 600000, .alt = "off", .def = "10s",
	  .doc = "the parent pings each helper and worker this often" },
	{ "certificate", 2, p_certificate, F(certs),
	  .doc = "a certificate and its key; SNI picks among them" },
	{ "acme_dir", 1, p_path, F(acme_dir),
	  .doc = "served under /.well-known/acme-challenge/ over HTTP" },
	{ "access_log", 1, p_path, F(access_log), .unit = "stderr|off",
	  .def = "stderr", .doc = "where the access log goes" },
	{ "timeout", 2, p_timeout, F(t_head),
	  .doc = "a timeout of the proxy by name, then its duration" },
	{ "http2", 1, p_onoff, F(http2), .def = "on",
	  .doc = "HTTP/2 (ALPN h2) on the https listeners" },
	{ "limit", 2, p_limit, F(max_conns),
	  .doc = "a limit of the proxy by name, then its value" },
	/* sandboxes' VMs */
	{ "vmm", 1, p_choice, F(vmm), .unit = "auto|on|off", .def = "auto",
	  .doc = "VM-backed sandboxes; auto: when the host can run them" },
	{ "vmm_backend", 1, p_word, F(vmm_backend), .unit = "qemu|firecracker",
	  .doc = "the VMM sandboxes run in (default qemu)" },
	{ "accel", 1, p_choice, F(accel), .unit = "auto|tcg|kvm",
	  .def = "auto", .doc = "the accelerator qemu sandboxes boot with" },
	{ "vm_template", 1, p_template, F(vm_template), .unit = "debian|minimal",
	  .def = "debian", .doc = "what a sandbox created without a template "
	  "boots" },
	{ "template", 1, p_template, F(template_dir),
	  .doc = "the older spelling of vm_template DIRECTORY" },
	{ "vm_memory", 1, p_uint, F(vm_memory), .min = PX_VM_MEMORY_MIN,
	  .max = PX_VM_MEMORY_LIMIT, .unit = "MiB",
	  .def = STR(PX_VM_MEMORY_DEFAULT),
	  .doc = "a sandbox's RAM when its create does not say" },
	{ "vm_max_memory", 1, p_uint, F(vm_max_memory), .min = PX_VM_MEMORY_MIN,
	  .max = PX_VM_MEMORY_LIMIT, .unit = "MiB",
	  .def = STR(PX_VM_MAX_MEMORY_DEFAULT),
	  .doc = "the most RAM a sandbox may ask for" },
	{ "vm_vcpus", 1, p_uint, F(vm_vcpus), .min = 1, .max = PX_VM_VCPUS_LIMIT,
	  .unit = "a count", .def = STR(PX_VM_VCPUS_DEFAULT),
	  .doc = "a sandbox's vCPUs when its create does not say" },
	{ "vm_max_vcpus", 1, p_uint, F(vm_max_vcpus), .min = 1,
	  .max = PX_VM_VCPUS_LIMIT, .unit = "a count",
	  .def = STR(PX_VM_MAX_VCPUS_DEFAULT),
	  .doc = "the most vCPUs a sandbox may ask for" },
	{ "vm_disk", 1, p_uint, F(vm_disk), .min = PX_VM_DISK_MIN,
	  .max = PX_VM_DISK_LIMIT, .unit = "MiB", .def = STR(PX_VM_DISK_DEFAULT),
	  .doc = "a sandbox's persistent disk when its create does not say" },
	{ "vm_max_disk", 1, p_uint, F(vm_max_disk), .min = PX_VM_DISK_MIN,
	  .max = PX_VM_DISK_LIMIT, .unit = "MiB",
	  .def = STR(PX_VM_MAX_DISK_DEFAULT),
	  .doc = "the largest persistent disk a sandbox may ask for" },
	{ "vm_max_procs", 1, p_uint, F(vm_max_procs), .min = 1, .max = 1024,
	  .unit = "a count", .def = "64",
	  .doc = "commands and file transfers at once per sandbox" },
	{ "exec_max_per_token", 1, p_uint, F(exec_max_per_token), .min = 1,
	  .max = 65536, .unit = "a count", .def = "256",
	  .doc = "commands and file transfers at once per API token" },
	{ "exec_queue_timeout", 1, p_duration, F(exec_queue_timeout),
	  .min = 1000, .max = 3600000, .def = "5m",
	  .doc = "the longest a command waits in its sandbox's queue" },
	{ "vm_ready_snapshot", 1, p_onoff, F(vm_ready_snapshot), .def = "on",
	  .doc = "creates restore their template's ready snapshot, not boot" },
	{ "vm_ready_pool", 1, p_uint, F(vm_ready_pool), .min = 0, .max = 64,
	  .unit = "a count", .def = "1",
	  .doc = "clones kept restored and paused per ready snapshot" },
	{ "vm_max_forks", 1, p_uint, F(vm_max_forks), .min = 1, .max = 100,
	  .unit = "a count", .def = "16",
	  .doc = "new sandboxes one fork call may make" },
	{ "vm_max_checkpoints", 1, p_uint, F(vm_max_checkpoints), .min = 1,
	  .max = 256, .unit = "a count", .def = "16",
	  .doc = "checkpoints one sandbox may hold" },
	{ "vm_max_layers", 1, p_uint, F(vm_max_layers), .min = 2, .max = 12,
	  .unit = "a count", .def = "8",
	  .doc = "disk layers past which a sandbox's are merged" },
	{ "vm_standby", 1, p_uint, F(vm_standby), .min = 0, .max = 4096,
	  .unit = "a count", .def = "8",
	  .doc = "suspended sandboxes with a VMM started, waiting" },
	{ "vm_free_page_reporting", 1, p_onoff, F(vm_free_page_reporting),
	  .def = "off",
	  .doc = "new sandboxes give the host the pages their guest frees" },
	{ "vm_drop_caches", 1, p_onoff, F(vm_drop_caches), .def = "on",
	  .doc = "a guest drops its clean page cache before a pause or suspend" },
	{ "template_max_context", 1, p_uint, F(template_max_context), .min = 1,
	  .max = 1048576, .unit = "MiB", .def = "2048",
	  .doc = "the source of a template built from an image, at most" },
	{ "template_max_size", 1, p_uint, F(template_max_size), .min = 16,
	  .max = 1048576, .unit = "MiB", .def = "8192",
	  .doc = "the root file system of a template built from an image" },
	{ "template_build_timeout", 1, p_duration, F(template_build_timeout),
	  .min = 5000, .max = DAY_MS, .def = "1h",
	  .doc = "a template build that takes longer is ended" },
	{ "template_build_allow", 1, p_string, F(template_build_allow),
	  .def = "deb.debian.org,security.debian.org",
	  .doc = "what a template's builder sandbox may reach (egress rules, "
	  "comma-separated; none: nothing)" },
	{ "template_build_ready", 1, p_onoff, F(template_build_ready),
	  .def = "on",
	  .doc = "the template builders' ready snapshot is made in the "
	  "background (debian, vm_ready_snapshot on)" },
	{ "vm_standby_memory", 1, p_uint, F(vm_standby_memory), .min = 0,
	  .max = PX_VM_MEMORY_LIMIT, .unit = "MiB", .def = "512",
	  .doc = "the standby VMMs' memory (PSS) at most; 0: no limit" },
	{ "vm_max_running", 1, p_uint, F(vm_max_running), .min = 0,
	  .max = 1000000, .unit = "a count", .def = "0",
	  .doc = "running sandboxes at most (0: no cap): past it the least "
	  "recently active idle one is suspended" },
	{ "vm_room_cpu", 1, p_onoff, F(vm_room_cpu), .def = "on",
	  .doc = "the room for more running sandboxes is bound by the CPU the "
	  "host measures idle (off: by memory, addresses and caps only)" },
	{ "vm_max_resident", 1, p_uint, F(vm_max_resident), .min = 0,
	  .max = 1000000, .unit = "a count", .def = "0",
	  .doc = "running and paused sandboxes at most (0: no cap)" },
	{ "vm_jail", 1, p_onoff, F(vm_jail), .def = "on",
	  .doc = "every VMM runs in a jail of its own" },
	{ "vm_uid_range", 1, p_uid_range, F(vm_uid_base), F2(vm_uid_count),
	  .min = 1, .def = "2100000000-2100065535",
	  .doc = "the jailed VMMs' uids and gids, FIRST-LAST" },
	{ "vm_cpu_quota", 1, p_uint, F(vm_cpu_quota), .min = 5, .max = 100,
	  .unit = "a percentage of one core per vCPU (e.g. 50%)",
	  .flags = PX_DF_PERCENT, .def = "100",
	  .doc = "share of one core per vCPU a jailed VMM may use" },
	{ "vm_mem_overhead", 1, p_uint, F(vm_mem_overhead), .min = 16,
	  .max = 65536, .unit = "MiB", .def = "256",
	  .doc = "a jailed VMM's memory limit over its guest's RAM" },
	{ "vm_pids_max", 1, p_uint, F(vm_pids_max), .min = 64, .max = 1000000,
	  .unit = "a count", .def = "1024",
	  .doc = "tasks (qemu's threads) a jailed VMM may have" },
	{ "vm_console_max", 1, p_uint, F(vm_console_max), .min = 64,
	  .max = 1048576, .unit = "KiB", .flags = PX_DF_KIB, .def = "4096",
	  .doc = "the guest console kept per sandbox" },
	{ "vm_console_rate", 1, p_uint, F(vm_console_rate), .min = 16,
	  .max = 1048576, .unit = "KiB", .flags = PX_DF_KIB, .def = "1024",
	  .doc = "the guest console copied per sandbox and second" },
	{ "vm_pool", 1, p_vm_pool, F(vm_pool),
	  .doc = "the sandboxes' addresses, an IPv4 CIDR (10.200.0.0/16)" },
	{ "tap_prefix", 1, p_tap_prefix, F(tap_prefix),
	  .doc = "the start of the sandboxes' tap names (bth)" },
	{ "idle_pause", 1, p_duration, F(idle_pause), .min = 1, .max = DAY_MS,
	  .alt = "never", .flags = PX_DF_ALTMAX,
	  .doc = "an idle sandbox is paused after this long" },
	{ "idle_suspend", 1, p_duration, F(idle_suspend), .min = 1,
	  .max = DAY_MS, .alt = "never", .flags = PX_DF_ALTMAX,
	  .doc = "a paused sandbox is suspended to disk after this long" },
	/* egress */
	{ "egress", 1, p_choice, F(egress), .unit = "auto|on|off",
	  .def = "auto", .doc = "the sandboxes' egress policy; auto: with VMs" },
	{ "egress_max_rules", 1, p_uint, F(eg_max_rules), .min = 0,
	  .max = PX_EG_MAX_RULES, .flags = PX_DF_DIGIT, .def = "256",
	  .doc = "egress rules per sandbox" },
	{ "egress_conn_limit", 1, p_uint, F(eg_conn_limit), .min = 1,
	  .max = PX_EG_LIMIT_MAX, .alt = "off", .flags = PX_DF_DIGIT,
	  .doc = "concurrent outbound connections per sandbox" },
	{ "egress_new_conn_rate", 1, p_uint, F(eg_new_conn_rate), .min = 1,
	  .max = PX_EG_LIMIT_MAX, .alt = "off", .flags = PX_DF_DIGIT,
	  .doc = "new outbound connections per second per sandbox" },
	{ "egress_dns_deny", 1, p_choice, F(eg_dns_refused),
	  .unit = "nxdomain|refused", .def = "nxdomain",
	  .doc = "what the resolver answers for a denied name" },
	{ "dns_qtypes", PX_NARGS_MANY, p_dns_qtypes, F(dns_qtypes),
	  .doc = "the query types the resolver answers (repeatable)" },
	{ "dns_query_rate", 1, p_uint, F(dns_query_rate), .min = 1,
	  .max = 1000000, .alt = "off", .flags = PX_DF_DIGIT1 | PX_DF_ALTMAX,
	  .doc = "queries per second a sandbox may send the resolver" },
	{ "dns_label_max", 1, p_uint, F(dns_label_max), .min = 1, .max = 63,
	  .alt = "off", .flags = PX_DF_DIGIT1 | PX_DF_ALTMAX,
	  .doc = "the longest label of a name the resolver answers" },
	{ "dns_wildcard_names", 1, p_uint, F(dns_wildcard_names), .min = 1,
	  .max = 1000000, .alt = "off", .flags = PX_DF_DIGIT1 | PX_DF_ALTMAX,
	  .doc = "names a sandbox may ask under one wildcard rule" },
	{ "dns_upstream", 1, p_dns_upstream, F(dns_upstream),
	  .doc = "a resolver the filtering resolver asks (up to 4)" },
	{ "nflog_group", 1, p_uint, F(nflog_group), .min = 1, .max = 65535,
	  .def = "5", .doc = "the NFLOG group of egress denials" },
	{ "control_listen", 1, p_address, F(control_listen),
	  .doc = "ADDR:PORT of the TLS control API" },
	/* fleet mode */
	{ "fleet_etcd", 1, p_fleet_etcd, F(fleet_etcd),
	  .doc = "http:// or https://ADDR:PORT of etcd's gateway: fleet mode" },
	{ "fleet_etcd_ca", 1, p_string, F(fleet_etcd_ca),
	  .doc = "the CA of etcd's server certificate" },
	{ "fleet_etcd_cert", 2, p_pair, F(fleet_etcd_cert), F2(fleet_etcd_key),
	  .doc = "the client certificate and key berthd gives etcd" },
	{ "fleet_etcd_user", 2, p_etcd_user, F(fleet_etcd_user),
	  F2(fleet_etcd_password),
	  .doc = "etcd's user name, then the file of its password" },
	{ "fleet_host", 1, p_fleet_host, F(fleet_host),
	  .doc = "this host's id in the fleet" },
	{ "fleet_listen", 1, p_address, F(fleet_listen),
	  .doc = "ADDR:PORT of the fleet's mutual-TLS listener" },
	{ "fleet_advertise", 1, p_address, F(fleet_advertise),
	  .doc = "ADDR:PORT other hosts dial (default fleet_listen)" },
	{ "fleet_edge", 1, p_address, F(fleet_edge),
	  .doc = "the edge address published (default the first https)" },
	{ "fleet_ca", 1, p_string, F(fleet_ca),
	  .doc = "the CA of the hosts' certificates" },
	{ "fleet_cert", 2, p_pair, F(fleet_cert), F2(fleet_key),
	  .doc = "this host's certificate and key" },
	{ "fleet_ttl", 1, p_duration, F(fleet_ttl), .min = 1000,
	  .max = 3600000, .doc = "the TTL of this host's lease (default 10s)" },
	{ "fleet_prefix", 1, p_fleet_prefix, F(fleet_prefix),
	  .doc = "the prefix of berth's etcd keys (default /berth)" },
	{ "fleet_capacity", 1, p_uint, F(fleet_capacity), .min = 1,
	  .max = 1000000, .doc = "sandboxes this host takes" },
	{ "fleet_zone", 1, p_fleet_host, F(fleet_zone),
	  .doc = "a label placement can ask for (a rack, a site)" },
	{ "fleet_api_listen", 1, p_address, F(fleet_api_listen),
	  .doc = "ADDR:PORT where peers forward creates (mutual TLS)" },
};
const size_t px_ndirectives = sizeof(px_directives) / sizeof(px_directives[0]);

#undef F
#undef F2

/* The row of directive name, or NULL. */
static const struct px_directive *
conf_directive(const char *name)
{
	size_t i;

	for (i = 0; i < px_ndirectives; i++)
		if (strcmp(px_directives[i].name, name) == 0)
			return &px_directives[i];
	return NULL;
}

void
px_config_defaults(struct px_config *c)
{
	struct px_conf_ctx x;
	char err[256], arg[64], *argv[2];
	size_t i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < px_conf_nfields; i++)
		*conf_slot(c, &px_conf_fields[i]) = px_conf_fields[i].def;
	memset(&x, 0, sizeof(x));
	x.c = c;
	x.file = "(defaults)";
	x.err = err;
	x.errlen = sizeof(err);
	for (i = 0; i < px_ndirectives; i++) {
		const struct px_directive *d = &px_directives[i];

		if (d->def == NULL)
			continue;
		snprintf(arg, sizeof(arg), "%s", d->def);
		argv[0] = (char *)d->name;
		argv[1] = arg;
		(void)d->parse(&x, d, 2, argv);	/* test_conf: each parses */
	}
}

/* A default above its maximum could never be created: the error cites
 * the later of the two lines (0: neither is in the file). */
static int
vm_size_check(struct px_conf_ctx *x)
{
	static const struct {
		const char *what, *max, *unit;
	} pairs[] = {
		{ "vm_memory", "vm_max_memory", " MiB" },
		{ "vm_vcpus", "vm_max_vcpus", "" },
		{ "vm_disk", "vm_max_disk", " MiB" },
	};
	size_t i;

	for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		const struct px_directive *a = conf_directive(pairs[i].what);
		const struct px_directive *b = conf_directive(pairs[i].max);
		unsigned v = *(const unsigned *)(const void *)((const char *)x->c +
		    a->off);
		unsigned max = *(const unsigned *)(const void *)((const char *)x->c +
		    b->off);
		int la = x->line[a - px_directives], lb = x->line[b - px_directives];

		if (v > max) {
			snprintf(x->err, x->errlen, "%s:%d: %s %u%s is above %s %u%s",
			    x->file, la > lb ? la : lb, pairs[i].what, v,
			    pairs[i].unit, pairs[i].max, max, pairs[i].unit);
			return -1;
		}
	}
	return 0;
}

/* The helpers' and workers' uids are none of the VMMs'. */
static int
uid_range_check(struct px_conf_ctx *x)
{
	const struct px_config *c = x->c;
	const struct px_directive *a = conf_directive("helper_uid_range");
	const struct px_directive *b = conf_directive("vm_uid_range");
	unsigned long long h0 = c->helper_uid_base, v0 = c->vm_uid_base;
	unsigned long long h1 = h0 + c->helper_uid_count;
	unsigned long long v1 = v0 + c->vm_uid_count;
	int la = x->line[a - px_directives], lb = x->line[b - px_directives];

	if (h0 < v1 && v0 < h1) {
		snprintf(x->err, x->errlen, "%s:%d: helper_uid_range %llu-%llu "
		    "overlaps vm_uid_range %llu-%llu: a helper could signal a "
		    "VMM", x->file, la > lb ? la : lb, h0, h1 - 1, v0, v1 - 1);
		return -1;
	}
	return 0;
}

/* What holds across lines, once the file is read. */
static int
conf_finish(struct px_conf_ctx *x)
{
	struct px_config *c = x->c;
	int i, https = 0;

	/* names under berth's domain are berth's (<port>-<sandbox>) */
	for (i = 0; i < c->nhost_suffix; i++)
		if (strcmp(c->host_suffix[i], c->domain) == 0 ||
		    px_host_under(c->host_suffix[i], c->domain)) {
			snprintf(x->err, x->errlen, "%s:%d: custom_host_suffix: '%s' "
			    "is inside berth's domain '%s', whose names are "
			    "berth's", x->file, x->sfx_line[i], c->host_suffix[i],
			    c->domain);
			return -1;
		}
	if (c->nlisten == 0) {
		add_listen(c, 1, "127.0.0.1:8443");
		add_listen(c, 0, "127.0.0.1:8080");
	}
	for (i = 0; i < c->nlisten; i++)
		https |= c->listen[i].https;
	if (!https) {
		snprintf(x->err, x->errlen, "%s: no 'listen https' line", x->file);
		return -1;
	}
	if (vm_size_check(x) != 0)
		return -1;
	if (uid_range_check(x) != 0)
		return -1;
	return fleet_check(c, x->file, x->err, x->errlen);
}

int
px_config_load(struct px_config *c, const char *file, char *err, size_t errlen)
{
	int lines[sizeof(px_directives) / sizeof(px_directives[0])] = { 0 };
	struct px_conf_ctx x = { .c = c, .file = file, .err = err,
	    .errlen = errlen, .line = lines };
	const struct px_directive *d;
	char line[4096], *argv[8], *p, *hash;
	struct stat st;
	int argc;
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
		x.lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			conf_err(&x, "line too long");
			goto fail;
		}
		if ((hash = strchr(line, '#')) != NULL)
			*hash = '\0';
		argc = 0;
		for (p = strtok(line, " \t\r\n"); p != NULL;
		    p = strtok(NULL, " \t\r\n")) {
			if (argc == 8) {
				conf_err(&x, "too many arguments");
				goto fail;
			}
			argv[argc++] = p;
		}
		if (argc == 0)
			continue;
		if ((d = conf_directive(argv[0])) == NULL) {
			conf_err(&x, "unknown directive '%s'", argv[0]);
			goto fail;
		}
		if (d->nargs != PX_NARGS_MANY && argc != d->nargs + 1) {
			conf_err(&x, "'%s' takes %d argument%s", argv[0], d->nargs,
			    d->nargs == 1 ? "" : "s");
			goto fail;
		}
		if (d->parse(&x, d, argc, argv) != 0)
			goto fail;
		lines[d - px_directives] = x.lineno;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s:%d: read error: %s", file, x.lineno + 1,
		    strerror(errno));
		goto fail;
	}
	fclose(f);
	return conf_finish(&x);
fail:
	fclose(f);
	return -1;
}
