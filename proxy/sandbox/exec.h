/*
 * exec.h — commands in a sandbox's guest, for the control API (POST
 * /v1/sandboxes/{id}/exec): berthd's parent talks to the guest agent
 * (vmm/guest/agent.c) over the sandbox's agent socket, one connection per
 * sandbox, many commands at once on it (each on a channel with flow
 * control of its own, at most vm_max_procs per sandbox), waking the
 * sandbox first as the proxy does. Runs on the parent's event loop.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_EXEC_H
#define BERTH_EXEC_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct px_exec_req;
struct px_exec_result;

#define PX_EXEC_OUT_MAX		(4 * 1024 * 1024)	/* per stream */
#define PX_EXEC_PROCS_DEFAULT	64	/* vm_max_procs */
#define PX_EXEC_PER_TOKEN_DEFAULT 256	/* exec_max_per_token */
#define PX_EXEC_QUEUE_MS_DEFAULT (5 * 60 * 1000)	/* exec_queue_timeout */

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
/* The control hook exec_abandon: the buffered exec started with
 * done_arg has no client any more: killed in the guest, never done. */
void px_exec_abandon(void *done_arg, void *arg);
/* At most n commands and file transfers per sandbox, queued and running
 * (berth.conf vm_max_procs); past it px_exec_start answers 429. */
void px_exec_set_max_procs(int n);
/* At most per_token commands and file transfers per API token, in all
 * its sandboxes, queued and running (berth.conf exec_max_per_token;
 * past it a 429); a job waits at most queue_ms to start (the wake, the
 * agent's answer, a free slot: exec_queue_timeout), then fails with 503.
 * 0: the default. */
void px_exec_set_limits(int per_token, uint64_t queue_ms);
/* berthd (re)started: a running sandbox's keep-awake processes (exec
 * --keep-awake) are listed now, and hold it awake again if any run
 * (one not running is listed once it runs again, at its next command). */
void px_exec_keep_check(const char *id);
/* A wake of id ended (vm.c tells every wake, the proxy's too): ok 1,
 * failed 0, or refused at a cap (vm_max_running, vm_max_resident) -1. */
void px_exec_woken(const char *id, int ok, const char *reason);
/* The sandbox is gone: its commands fail, its connection closes. */
void px_exec_forget(const char *id);
void px_exec_shutdown(void);
/* Whether berthd is shutting down (px_exec_shutdown began): the commands
 * it fails then are not the guests' answers. */
int px_exec_stopping(void);

#endif
