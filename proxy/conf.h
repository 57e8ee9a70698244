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

struct px_listen {
	int		 https;
	char		 text[80];		/* as written: addr:port */
	struct sockaddr_storage ss;
	socklen_t	 sslen;
	unsigned	 port;
};

enum { PX_VMM_AUTO, PX_VMM_ON, PX_VMM_OFF };
enum { PX_ACCEL_AUTO, PX_ACCEL_TCG, PX_ACCEL_KVM };

struct px_certspec {
	char		*cert;
	char		*key;
};

struct px_config {
	char		*file;			/* NULL: embedded default */
	char		*domain;
	struct px_listen listen[PX_MAX_LISTEN];
	int		 nlisten;
	int		 workers;		/* 0: one per core */
	char		*user;
	char		*acme_dir;
	char		*access_log;		/* "stderr", "off" or a path */
	char		*control_listen;	/* ADDR:PORT of the TLS control API, or NULL */
	struct px_certspec certs[PX_MAX_CERTS];
	int		 ncerts;
	/* milliseconds */
	unsigned	 t_head, t_keepalive, t_connect, t_response, t_tunnel;
	unsigned	 t_drain, t_retry, t_wake, t_wake_backoff;
	unsigned	 t_body, t_send;	/* client idle mid-body / not reading */
	unsigned	 max_parked;		/* parked requests per sandbox */
	unsigned	 max_conns, max_conns_sandbox;
	unsigned	 max_req_sandbox;	/* requests in flight per sandbox */
	unsigned	 rate_sandbox;		/* requests/s per sandbox, 0: no cap */
	/* VMs */
	int		 vmm;			/* PX_VMM_* */
	char		*vmm_backend;		/* NULL: qemu */
	int		 accel;			/* PX_ACCEL_* */
	char		*template_dir;		/* NULL: <state>/templates/default */
	char		*tap_prefix;		/* NULL: libvmm's ("bth") */
	int		 egress;		/* PX_VMM_* (auto: with VMs) */
	uint16_t	 nflog_group;		/* denial log; default 5 */
	char		 dns_upstream[4][46];	/* resolvers; none: /etc/resolv.conf */
	int		 ndns;
	char		 vm_pool[20];		/* "": 10.200.0.0/16 */
	unsigned	 vm_memory;		/* MiB, 0: libvmm default */
	uint64_t	 idle_pause, idle_suspend;	/* ms; 0 default, UINT64_MAX never */
};

void px_config_defaults(struct px_config *);
/* Loads file over the defaults (file NULL: defaults only). On error
 * returns -1 with "file:line: what" in err; cfg is then undefined. */
int px_config_load(struct px_config *, const char *file, char *err, size_t errlen);
void px_config_free(struct px_config *);
/* The https port URLs use (the first https listener). */
unsigned px_config_https_port(const struct px_config *);
/* Parses "10s", "250ms", "5m", "1h" or plain seconds; -1 if invalid. */
long px_parse_duration(const char *);
/* Parses host:port / [v6]:port into ss; -1 if invalid. */
int px_parse_sockaddr(const char *, struct sockaddr_storage *, socklen_t *, unsigned *port);

#endif
