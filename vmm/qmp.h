/*
 * qmp.h — a QEMU Machine Protocol client on a libevent bufferevent
 * (internal to libvmm). It takes a connected stream socket, reads the
 * greeting, negotiates capabilities, then runs commands asynchronously:
 * each command gets its own reply callback, matched by "id"; events go
 * to one event callback; the end of the connection to one close callback.
 *
 * Callbacks may call vmm_qmp_free() on their own connection: freeing is
 * deferred until the callback returns. After the close callback (or
 * vmm_qmp_free) no callback of this connection runs again; commands still
 * waiting for a reply are dropped silently, the owner learns of the loss
 * from the close callback.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_VMM_QMP_H
#define BERTH_VMM_QMP_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

struct event_base;
struct vmm_qmp;

/* The connection is usable: capabilities were accepted. */
typedef void (*vmm_qmp_ready_cb)(struct vmm_qmp *q, void *arg);
/* ret: the "return" member (borrowed) on success, NULL on error; then
 * error holds "Class: description". */
typedef void (*vmm_qmp_reply_cb)(struct vmm_qmp *q, json_t *ret,
    const char *error, void *arg);
/* An asynchronous event: name and its "data" member (borrowed, may be
 * NULL). */
typedef void (*vmm_qmp_event_cb)(struct vmm_qmp *q, const char *event,
    json_t *data, void *arg);
/* The connection ended (EOF, socket error, protocol error): reason says
 * which. */
typedef void (*vmm_qmp_close_cb)(struct vmm_qmp *q, const char *reason,
    void *arg);

struct vmm_qmp_cbs {
	vmm_qmp_ready_cb ready;
	vmm_qmp_event_cb event;
	vmm_qmp_close_cb close;
	void *arg;
};

/* Takes ownership of fd (made non-blocking here). Never fails but for
 * memory: then NULL and fd is closed. */
struct vmm_qmp *vmm_qmp_new(struct event_base *base, int fd,
    const struct vmm_qmp_cbs *cbs);
void vmm_qmp_free(struct vmm_qmp *q);
/* Queue {"execute": cmd, "arguments": args}. args is stolen (may be NULL).
 * cb may be NULL (reply ignored). Commands sent before the connection is
 * ready wait and go out after qmp_capabilities. -1 and err when the
 * connection is closed or memory runs out. */
int vmm_qmp_command(struct vmm_qmp *q, const char *cmd, json_t *args,
    vmm_qmp_reply_cb cb, void *arg, char *err, size_t errlen);
int vmm_qmp_is_ready(const struct vmm_qmp *q);
/* The same with a file descriptor passed along (getfd, add-fd): sent at
 * once, so only on a ready connection; fd stays the caller's. */
int vmm_qmp_command_fd(struct vmm_qmp *q, const char *cmd, json_t *args,
    int fd, vmm_qmp_reply_cb cb, void *arg, char *err, size_t errlen);
/* 0 when the process at the other end of a unix socket runs as uid (a
 * symlink planted in place of a socket cannot lead to someone else's). */
int vmm_qmp_peer_is(int fd, uid_t uid, char *err, size_t errlen);

/* Connect a non-blocking stream socket to a unix path: fd, or -errno
 * (-ENOENT / -ECONNREFUSED while qemu has not created it yet). */
int vmm_qmp_connect_unix(const char *path, char *err, size_t errlen);

/* Exposed for unit tests: split "Class: desc" from a QMP error object. */
void vmm_qmp_error_text(json_t *error, char *buf, size_t len);

#endif
