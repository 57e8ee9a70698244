/*
 * exec.h — commands in a sandbox's guest, for the control API (POST
 * /v1/sandboxes/{id}/exec): berthd's parent talks to the guest agent
 * (vmm/guest/agent.c) over the sandbox's agent socket, one connection per
 * sandbox, one command at a time on it (others queue), waking the sandbox
 * first as the proxy does. Runs on the parent's event loop.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_EXEC_H
#define BERTH_EXEC_H

#include <stddef.h>

struct event_base;
struct px_exec_req;
struct px_exec_result;

#define PX_EXEC_OUT_MAX		(4 * 1024 * 1024)	/* per stream */

void px_exec_init(struct event_base *);
/* The control hook (control.h: exec). */
int px_exec_start(const char *id, const struct px_exec_req *req,
    void (*done)(void *, const struct px_exec_result *), void *done_arg,
    int *status, char *err, size_t errlen, void *arg);
/* The control hooks for streamed execs and files (control.h). */
struct px_exec_sink;
struct px_exec_stream;
struct px_exec_stream *px_exec_stream_start(const char *id,
    const struct px_exec_req *req, const struct px_exec_sink *sink,
    int *status, char *err, size_t errlen, void *arg);
size_t px_exec_stream_input(struct px_exec_stream *, int type,
    const void *p, size_t len);
void px_exec_stream_read(struct px_exec_stream *, int on);
void px_exec_stream_cancel(struct px_exec_stream *);
/* A wake of id ended (vm.c tells every wake, the proxy's too). */
void px_exec_woken(const char *id, int ok, const char *reason);
/* The sandbox is gone: its commands fail, its connection closes. */
void px_exec_forget(const char *id);
void px_exec_shutdown(void);
/* Whether berthd is shutting down (px_exec_shutdown began): the commands
 * it fails then are not the guests' answers. */
int px_exec_stopping(void);

#endif
