/*
 * control.h — berth's control API server: HTTP/1.1 + JSON under /v1/ on
 * a unix socket (<state>/control.sock, mode 0600: whoever can open it is
 * admin). Runs on the parent's libevent loop; every change goes through
 * the px_store and is followed by hooks->routes_changed so the parent can
 * push a new route table to the workers.
 *
 * Resources (all bodies JSON; errors are
 * {"error":{"status","code","field"?,"message"}}):
 *   GET    /v1/health                       {"status":"ok"}
 *   GET    /v1/sandboxes                    {"sandboxes":[sandbox...]}
 *   POST   /v1/sandboxes {"id","address"}   201 sandbox (external, running)
 *   GET    /v1/sandboxes/{id}               sandbox + "ports":[port...]
 *   DELETE /v1/sandboxes/{id}               204, its ports go too
 *   GET    /v1/sandboxes/{id}/ports         {"ports":[port...]}
 *   GET    /v1/sandboxes/{id}/ports/{port}  port
 *   PUT    /v1/sandboxes/{id}/ports/{port}  201 created / 200 updated, port;
 *          body optional {"host_header","visibility","host"}: a field left
 *          out keeps its current value (defaults preserve / public / none
 *          on create), "host": null or "" removes the custom host
 *   DELETE /v1/sandboxes/{id}/ports/{port}  204
 *   GET    /v1/ports                        {"ports":[port...]}
 *   GET    /metrics                         Prometheus text
 * sandbox = {id, address, external, state, created}
 * port    = {sandbox, port, url, urls, host_header, visibility, host, created}
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CONTROL_H
#define BERTH_CONTROL_H

#include <stddef.h>

struct event_base;
struct evbuffer;
struct px_store;
struct px_control;

#define PX_CONTROL_MAX_BODY	(64 * 1024)	/* larger: 413 */

struct px_control_hooks {
	const char *domain;		/* e.g. "berth.localhost"; copied */
	unsigned https_port;		/* for URLs; ":443" is omitted */
	/* After any successful change to sandboxes or ports. May be NULL. */
	void (*routes_changed)(void *arg);
	/* Appends Prometheus text for GET /metrics. May be NULL. */
	void (*metrics)(struct evbuffer *out, void *arg);
	void *arg;
};

/*
 * Listens on sock_path: a stale socket file there is removed; a live
 * server answering there, or a file that is not a socket, is an error.
 * The store stays the caller's (it must outlive the px_control). hooks is
 * copied. NULL with err filled on failure.
 */
struct px_control *px_control_new(struct event_base *, struct px_store *,
    const char *sock_path, const struct px_control_hooks *,
    char *err, size_t errlen);

/* Closes the listener and every client connection, unlinks the socket. */
void px_control_free(struct px_control *);

/*
 * The canonical URL of a published port, https://<port>-<sandbox>.<domain>
 * [:<https_port>]/, or of a custom host when host is not NULL. Returns
 * what snprintf returns.
 */
int px_control_url(char *buf, size_t len, const char *domain,
    unsigned https_port, const char *sandbox, unsigned port, const char *host);

#endif
