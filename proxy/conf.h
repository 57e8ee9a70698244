/*
 * config.h — berth.conf: one directive per line, '#' comments. The parent
 * alone parses it; workers get the parts they need as a message. Errors
 * name file:line and what was wrong. With no file, the embedded default
 * serves (HTTPS 127.0.0.1:8443, HTTP 127.0.0.1:8080, berth.localhost).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CONFIG_H
#define BERTH_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PX_MAX_LISTEN	8
#define PX_MAX_CERTS	32
#define PX_MAX_HOST_SUFFIX 32

/* px_listen.https: 0 plain HTTP (redirects), 1 HTTPS, PX_LISTEN_FLEET the
 * fleet's mutual-TLS listener (other hosts' edges forward to it). */
#define PX_LISTEN_FLEET	2

struct px_listen {
	int		 https;
	char		 text[80];		/* as written: addr:port */
	struct sockaddr_storage ss;
	socklen_t	 sslen;
	unsigned	 port;
};

enum { PX_VMM_AUTO, PX_VMM_ON, PX_VMM_OFF };
enum { PX_ACCEL_AUTO, PX_ACCEL_TCG, PX_ACCEL_KVM };
/* vm_template: what a sandbox created without a template boots */
enum { PX_TEMPLATE_DEBIAN, PX_TEMPLATE_MINIMAL, PX_TEMPLATE_DIR };

struct px_certspec {
	char		*cert;
	char		*key;
	int		 line;		/* of its directive, for errors */
};

struct px_config {
	char		*file;			/* NULL: embedded default */
	char		*domain;
	struct px_listen listen[PX_MAX_LISTEN];
	int		 nlisten;
	int		 workers;		/* 0: one per core */
	char		*user;			/* its group: the workers' and
						 * helpers'; unjailed VMMs run
						 * as it */
	unsigned	 helper_uid_base, helper_uid_count;	/* a uid per
						 * helper and per worker */
	unsigned	 heartbeat;		/* ms between pings of each
						 * helper and worker; 0: none */
	char		*acme_dir;
	char		*access_log;		/* "stderr", "off" or a path */
	char		*control_listen;	/* ADDR:PORT of the TLS control API, or NULL */
	struct px_certspec certs[PX_MAX_CERTS];
	int		 ncerts;
	/* custom_host_suffix: the names under which a sandbox token may set
	 * a port's custom host (none: only the admin token may) */
	char		*host_suffix[PX_MAX_HOST_SUFFIX];
	int		 nhost_suffix;
	/* milliseconds */
	unsigned	 t_head, t_keepalive, t_connect, t_response, t_tunnel;
	unsigned	 t_drain, t_retry, t_wake, t_wake_backoff;
	unsigned	 t_body, t_send;	/* client idle mid-body / not reading */
	unsigned	 max_parked;		/* parked requests per sandbox */
	unsigned	 max_conns, max_conns_sandbox;
	unsigned	 max_req_sandbox;	/* requests in flight per sandbox */
	unsigned	 rate_sandbox;		/* requests/s per sandbox, 0: no cap */
	int		 http2;			/* ALPN h2 on the HTTPS listeners */
	unsigned	 h2_streams;		/* concurrent streams per connection */
	unsigned	 h2_header_list;	/* bytes of a request's header list */
	unsigned	 h2_resets;		/* client resets per 10 s */
	/* VMs */
	int		 vmm;			/* PX_VMM_* */
	char		*vmm_backend;		/* NULL: qemu */
	int		 accel;			/* PX_ACCEL_* */
	int		 vm_template;		/* PX_TEMPLATE_*; default debian */
	char		*template_dir;		/* PX_TEMPLATE_DIR's, else NULL */
	char		*tap_prefix;		/* NULL: libvmm's ("bth") */
	int		 egress;		/* PX_VMM_* (auto: with VMs) */
	uint16_t	 nflog_group;		/* denial log; default 5 */
	char		 dns_upstream[4][46];	/* resolvers; none: /etc/resolv.conf */
	int		 ndns;
	/* ops' global egress policy: defaults for what the stored policy
	 * (PUT /v1/policy) does not set */
	unsigned	 eg_max_rules;		/* egress rules per sandbox */
	unsigned	 eg_conn_limit;		/* concurrent connections per sandbox, 0: none */
	unsigned	 eg_new_conn_rate;	/* new connections/s per sandbox, 0: none */
	int		 eg_dns_refused;	/* denied names: REFUSED, not NXDOMAIN */
	/* the filtering resolver's limits against tunnels (nc_dns.h) */
	uint16_t	 dns_qtypes[16];	/* types answered; none: the default */
	int		 ndns_qtypes;
	uint32_t	 dns_query_rate;	/* 0: default, UINT32_MAX: off */
	uint32_t	 dns_label_max;
	uint32_t	 dns_wildcard_names;
	char		 vm_pool[20];		/* "": 10.200.0.0/16 */
	/* per-sandbox resources: the defaults a create gets, and the
	 * maxima ops allow one to ask for (read at each create: a SIGHUP
	 * applies them to the sandboxes created after it) */
	unsigned	 vm_memory, vm_max_memory;	/* MiB */
	unsigned	 vm_vcpus, vm_max_vcpus;
	unsigned	 vm_disk, vm_max_disk;		/* MiB, the persistent disk */
	unsigned	 vm_standby;		/* standby VMMs for suspended
						 * sandboxes; 0: none */
	unsigned	 vm_standby_memory;	/* MiB of them (PSS); 0: any */
	unsigned	 vm_max_running;	/* caps; 0: none (libvmm's */
	unsigned	 vm_max_resident;	/* max_running, max_resident) */
	int		 vm_room_cpu;		/* 1 (default): the running room
						 * is bound by idle CPU too */
	unsigned	 vm_max_procs;		/* commands and file transfers
						 * at once per sandbox */
	unsigned	 exec_max_per_token;	/* ... per API token */
	uint64_t	 exec_queue_timeout;	/* ms a job may wait to start */
	/* the VMM jail (libvmm's jail.c, cgroup.c) */
	int		 vm_jail;		/* 1 (default) or 0 */
	unsigned	 vm_max_forks;		/* new sandboxes per fork call */
	unsigned	 vm_max_checkpoints;	/* per sandbox */
	unsigned	 vm_max_layers;		/* disk layers before a merge */
	unsigned	 vm_ready_pool;		/* clones kept restored and
						 * paused per ready snapshot
						 * (1) */
	int		 vm_free_page_reporting; /* 1 (default 0): new
					 * sandboxes get a balloon device
					 * with free page reporting */
	int		 vm_drop_caches;	/* 1 (default): the guest drops
					 * its clean page cache before a
					 * pause or suspend */
	/* templates built from an image (issue 31) */
	unsigned	 template_max_context;	/* MiB of source, at most */
	unsigned	 template_max_size;	/* MiB of image root, at most */
	uint64_t	 template_build_timeout;	/* ms */
	char		*template_build_allow;	/* the builder's egress rules,
						 * comma-separated; "none" */
	int		 template_build_ready;	/* 1 (default): the builder
						 * sandboxes' shape has its
						 * ready snapshot made in the
						 * background */
	int		 vm_ready_snapshot;	/* 1 (default): creates restore
						 * their template's ready
						 * snapshot instead of booting */
	unsigned	 vm_uid_base, vm_uid_count;	/* per-sandbox uids */
	unsigned	 vm_cpu_quota;		/* % of a core per vCPU */
	unsigned	 vm_mem_overhead;	/* MiB over guest RAM */
	unsigned	 vm_pids_max;
	unsigned	 vm_console_max;	/* bytes of console kept */
	unsigned	 vm_console_rate;	/* bytes of console copied a second */
	uint64_t	 idle_pause, idle_suspend;	/* ms; 0 default, UINT64_MAX never */
	/* fleet mode: on when fleet_etcd is set (then host, listen, ca and
	 * cert are required); off, nothing below is used */
	char		*fleet_etcd;		/* ADDR:PORT of etcd's HTTP gateway */
	int		 fleet_etcd_tls;	/* https://: TLS, the server checked
						 * against fleet_etcd_ca */
	char		*fleet_etcd_ca;		/* CA of etcd's server certificate */
	char		*fleet_etcd_cert, *fleet_etcd_key;	/* client certificate */
	char		*fleet_etcd_user;	/* etcd auth (RBAC): user name */
	char		*fleet_etcd_password;	/* its password file */
	char		*fleet_host;		/* this host's id */
	char		*fleet_listen;		/* ADDR:PORT of the mTLS listener */
	char		*fleet_advertise;	/* ADDR:PORT others dial; NULL: listen */
	char		*fleet_edge;		/* edge address published; NULL: 1st https */
	char		*fleet_ca;		/* CA of the host certificates */
	char		*fleet_cert, *fleet_key;
	char		*fleet_prefix;		/* etcd key prefix, default /berth */
	unsigned	 fleet_ttl;		/* ms, lease TTL; default 10 s */
	unsigned	 fleet_capacity;	/* sandboxes; 0: not said */
	char		*fleet_zone;		/* a label, NULL: none */
	char		*fleet_api_listen;	/* ADDR:PORT of the peers' API (placement) */
};

#define PX_EG_MAX_RULES		1024	/* most egress_max_rules may say */
#define PX_EG_LIMIT_MAX		1000000	/* most conn_limit / new_conn_rate */
/* Defaults of vm_* (also what the control API assumes without a
 * configuration), what they may say at most, and the smallest sandbox
 * one may ask for. */
#define PX_VM_MEMORY_DEFAULT	256	/* MiB */
#define PX_VM_MAX_MEMORY_DEFAULT 4096
#define PX_VM_VCPUS_DEFAULT	1
#define PX_VM_MAX_VCPUS_DEFAULT	4
#define PX_VM_DISK_DEFAULT	1024	/* MiB */
#define PX_VM_MAX_DISK_DEFAULT	16384
#define PX_VM_MEMORY_MIN	64	/* MiB */
#define PX_VM_MEMORY_LIMIT	1048576	/* MiB: 1 TiB */
#define PX_VM_VCPUS_LIMIT	64
#define PX_VM_DISK_MIN		64	/* MiB */
#define PX_VM_DISK_LIMIT	16777216	/* MiB: 16 TiB */

void px_config_defaults(struct px_config *);
/* Loads file over the defaults (file NULL: defaults only). On error
 * returns -1 with "file:line: what" in err; cfg is then undefined. */
int px_config_load(struct px_config *, const char *file, char *err, size_t errlen);
void px_config_free(struct px_config *);
/* The https port URLs use (the first https listener). */
unsigned px_config_https_port(const struct px_config *);

/*
 * The settings the workers get, in one list: X(directive, name, field,
 * default, share, zero). directive name: the config line
 * ("timeout head 10s", "limit connections 10000"); field: the unsigned
 * of struct px_config that holds it, of struct px_wcfg (session.h) that
 * gets it, and its key in the parent's "config" message; share: each
 * worker gets 1/n of it (rounded up); zero: 0 is a valid value. The
 * table it makes (px_conf_fields) drives the parsing, the message and
 * the worker's apply.
 */
#define PX_WORKER_FIELDS(X) \
	X(timeout, head, t_head, 10000, 0, 0) \
	X(timeout, keepalive, t_keepalive, 75000, 0, 0) \
	X(timeout, connect, t_connect, 5000, 0, 0) \
	X(timeout, response, t_response, 60000, 0, 0) \
	X(timeout, tunnel, t_tunnel, 3600000, 0, 0) \
	X(timeout, drain, t_drain, 10000, 0, 0) \
	X(timeout, retry, t_retry, 1000, 0, 1) \
	X(timeout, wake, t_wake, 30000, 0, 0) \
	X(timeout, wake_backoff, t_wake_backoff, 5000, 0, 0) \
	X(timeout, body, t_body, 30000, 0, 0) \
	X(timeout, send, t_send, 60000, 0, 0) \
	X(limit, connections, max_conns, 10000, 1, 0) \
	X(limit, connections_per_sandbox, max_conns_sandbox, 1000, 1, 0) \
	X(limit, requests_per_sandbox, max_req_sandbox, 1000, 1, 0) \
	X(limit, rate_per_sandbox, rate_sandbox, 0, 1, 0) \
	X(limit, parked_per_sandbox, max_parked, 1000, 0, 0) \
	X(limit, h2_streams, h2_streams, 100, 0, 0) \
	X(limit, h2_header_list, h2_header_list, 16384, 0, 0) \
	X(limit, h2_resets, h2_resets, 200, 0, 0)

struct px_conf_field {
	const char	*directive;	/* "timeout", "limit" */
	const char	*name;		/* its first argument */
	const char	*key;		/* the field's name */
	size_t		 off;		/* offsetof(struct px_config, field) */
	unsigned	 def;		/* its default */
	int		 share;		/* divided among the workers */
	int		 zero;		/* 0 allowed */
};
extern const struct px_conf_field px_conf_fields[];
extern const size_t px_conf_nfields;
/* The value of f in c, or each worker's share of it among n. */
unsigned px_conf_field_value(const struct px_config *c,
    const struct px_conf_field *f, unsigned n);
/*
 * The directives of berth.conf, one row each: px_config_load parses with
 * them, px_config_defaults takes its defaults from them and the unit test
 * checks each is in berth.conf(5). A row's parser gets the line's words
 * (argv[0] the directive) once their count is checked against nargs; the
 * generic parsers (a number, a duration, a word among a few, on/off, a
 * string, a path, an address) read the columns below, the others are
 * the directive's own. def is the default as one would write it in the
 * file (NULL: the field stays 0 or NULL, which the docs say what means).
 */
#define PX_NARGS_MANY	-1		/* one or more; the parser checks */

/* px_directive.flags: how a number is written and kept */
#define PX_DF_DIGIT	0x01		/* begins with a digit (no sign) */
#define PX_DF_DIGIT1	0x02		/* begins with 1-9 */
#define PX_DF_PERCENT	0x04		/* may end in '%' */
#define PX_DF_KIB	0x08		/* written in KiB, kept in bytes */
#define PX_DF_ALTMAX	0x10		/* alt keeps all ones (UINT*_MAX), not 0 */

struct px_conf_ctx;			/* conf.c's state while parsing */
struct px_directive {
	const char	*name;
	int		 nargs;		/* arguments it takes, or PX_NARGS_MANY */
	int		(*parse)(struct px_conf_ctx *, const struct px_directive *,
			    int, char **);
	size_t		 off, size;	/* the field of struct px_config it sets */
	size_t		 off2;		/* a second one (cert, then key) */
	long		 min, max;	/* a number's bounds (durations: ms) */
	const char	*unit;		/* a number's unit in errors; or the words
					 * it takes, "a|b|c" */
	const char	*alt;		/* a word that means 0 (or all ones) */
	int		 flags;		/* PX_DF_* */
	const char	*def;		/* default, as written; NULL: none */
	const char	*doc;		/* one line for docs */
};
extern const struct px_directive px_directives[];
extern const size_t px_ndirectives;

/* Parses "10s", "250ms", "5m", "1h" or plain seconds; -1 if invalid. */
long px_parse_duration(const char *);
/* Parses host:port / [v6]:port into ss; -1 if invalid. */
int px_parse_sockaddr(const char *, struct sockaddr_storage *, socklen_t *, unsigned *port);

#endif
