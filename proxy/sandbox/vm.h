/*
 * vm.h — berthd's parent and its VMM: VM-backed sandboxes through libvmm.
 * Keeps the state store in step with libvmm's states and events, wakes
 * sandboxes for the workers, feeds the idle policy with the workers'
 * activity. Everything runs on the parent's event loop.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_VM_H
#define BERTH_VM_H

#include <stddef.h>

#include <stdint.h>

struct event_base;
struct px_store;
struct px_config;
struct px_vm_spec;

struct px_exec_req;
struct px_exec_result;

struct px_vm_hooks {
	/* a sandbox's state or address changed: push routes */
	void (*changed)(void);
	/* how a wake ended (ok, or the reason it failed) */
	void (*woken)(const char *id, int ok, const char *reason);
	/* the VMM processes run as this user (0: as berthd) */
	unsigned uid, gid;
	/* commands in guests (exec.c, which calls vm.c for wakes): told of
	 * wakes and deletions, asked whether berthd is ending, and running
	 * a guest's sync before a stop. berthd.c wires them, so vm.c never
	 * calls exec.c itself */
	void (*exec_woken)(const char *id, int ok, const char *reason);
				/* ok -1: refused at a cap */
	void (*exec_forget)(const char *id);
	int (*exec_stopping)(void);
	int (*exec_start)(const char *id, const struct px_exec_req *,
	    void (*done)(void *, const struct px_exec_result *), void *done_arg,
	    int *status, char *err, size_t errlen, void *arg);
};

/* 1 when VMs are on (config "vmm on", or "auto" and this host can run
 * them); 0 with why filled when not. */
int px_vm_wanted(const struct px_config *, char *why, size_t whylen);
/* Starts the VMM: builds the default template if it is missing and
 * re-adopts the VMs of a previous run. -1 with err. With "vmm auto" a
 * template that cannot be built or loaded is not an error: VMs stay off
 * (px_vm_enabled() 0) and px_vm_describe() says "off (template: why)". */
int px_vm_init(struct event_base *, struct px_store *, const struct px_config *,
    const char *state_dir, const struct px_vm_hooks *, char *err, size_t errlen);
int px_vm_enabled(void);
/* "starting", "ready" or NULL: the standby VMM of a suspended sandbox */
const char *px_vm_standby(const char *id, void *arg);
int px_vm_fork(const char *id, const char *const *ids, size_t n,
    const char *checkpoint, char *err, size_t errlen, void *arg);
struct px_checkpoint;
int px_vm_checkpoint(const char *id, const char *op, const char *name,
    void (*done)(void *, int, const char *), void *done_arg, char *err,
    size_t errlen, void *arg);
int px_vm_checkpoints(const char *id, struct px_checkpoint *out, size_t max,
    char *err, size_t errlen, void *arg);
int px_vm_checkpoint_get(const char *id, const char *name,
    struct px_checkpoint *out, char *err, size_t errlen, void *arg);
int px_vm_checkpoint_rm(const char *id, const char *name, char *err,
    size_t errlen, void *arg);
/* template.json's "memory_mib" of template dir (NULL: the default), 0 */
unsigned px_vm_template_mem(const char *dir, void *arg);
/* {pid, accel, jailed, uid, reason, usage{cpu_seconds, memory_bytes,
 * cpu_throttled_periods}} of a VM-backed sandbox, NULL otherwise. */
struct json_t *px_vm_info(const char *id, void *arg);
/* The console kept: {size, from, text} from offset from (-1: the last
 * 64 KiB); NULL: not a VM. */
struct json_t *px_vm_console(const char *id, long long from, void *arg);
struct evbuffer;
void px_vm_metrics(struct evbuffer *out);
/* GET /v1/health's "capacity": per state the sandboxes, their memory,
 * disk and CPU; the standbys; the host; how many more it can take (the
 * same sample as /metrics' berth_host_*). NULL without VMs. */
struct json_t *px_vm_capacity(void);
/* A SIGHUP: vm_standby, vm_standby_memory, vm_max_running and
 * vm_max_resident apply now. */
void px_vm_reload(const struct px_config *);
const char *px_vm_describe(void);	/* "qemu, TCG: why" */
const char *px_vm_accel(void);		/* "kvm", "tcg", "none" */

/* Control API hooks (see control.h). */
int px_vm_create(const char *id, const struct px_vm_spec *spec, char *err,
    size_t errlen, void *arg);
void px_vm_delete(const char *id, void *arg);
/* pause, suspend, resume, start, stop; restart = stop (unless stopped
 * or failed) then start */
int px_vm_lifecycle(const char *id, const char *op,
    void (*done)(void *, int, const char *), void *done_arg,
    char *err, size_t errlen, void *arg);
void px_vm_set_idle(const char *id, uint64_t idle_pause_ms,
    uint64_t idle_suspend_ms, uint64_t max_lifetime_ms, void *arg);
/* Loads dir as a template (vmm_template_load): works without VMs too. */
int px_vm_template_check(const char *dir, char *err, size_t errlen,
    void *arg);
/* The default template's directory once px_vm_init ran, else NULL (for
 * the debian default its current link, which may not exist yet). */
const char *px_vm_template_dir(void);
/* The default template and how it is, for GET /v1/health ("debian:
 * building (95 s)", "debian: build failed: ...", "minimal", a
 * directory); NULL without VMs. */
const char *px_vm_template_default(void);
/* Starts building template name ("debian", "minimal") in the state dir
 * (0; also when that name's build runs already: it is joined), or with
 * err -2 (a name berth cannot build), -3 (another template's build is
 * under way), -1 (anything else). */
int px_vm_template_build(const char *name, char *err, size_t errlen,
    void *arg);
/* A template built from an image (issue 31): the control hooks
 * template_spool, _write, _end and _abort (control.h). */
struct px_tpl_source;
void *px_vm_template_spool(const char *name, const struct px_tpl_source *src,
    int *status, char *err, size_t errlen, void *arg);
int px_vm_template_spool_write(void *h, const void *p, size_t len,
    int *status, char *err, size_t errlen);
int px_vm_template_spool_end(void *h, int *status, char *err,
    size_t errlen);
void px_vm_template_spool_abort(void *h);
/* A forgotten template's files, where berthd built them: its versions no
 * sandbox uses, then its directory if that leaves it empty. */
void px_vm_template_forget(const char *name, const char *dir, void *arg);
/* The last (or current) build of name: {name, state (running, ok,
 * failed), reason?, dir?, lines (progress from line after on), next,
 * seconds}; NULL: none since berthd started. */
struct json_t;
struct json_t *px_vm_template_build_status(const char *name, uint64_t after,
    void *arg);

/* A worker holds requests for id: resume it (one resume for all). */
void px_vm_wake(const char *id);
/* libvmm's sandbox of id (exec.c talks to its agent), NULL: none. */
struct vmm_sandbox;
struct vmm_sandbox *px_vm_sandbox(const char *id);
/* fn for every sandbox the VMM has (at start: those re-adopted). */
void px_vm_each(void (*fn)(const char *id));
/* The workers hold connections to id (1) or no longer do (0): a hold on
 * it, which the idle policy does not pause (vmm_activity_hold). */
void px_vm_hold(const char *id, int on);
/* The workers saw traffic for id. */
void px_vm_activity(const char *id);
void px_vm_shutdown(void);
/* End what libvmm runs for itself (builds, the ready pool): at exit. */
void px_vm_drain(void);
/* Kills a template build under way (berthd is ending). */
void px_vm_build_stop(void);
/* Moving a suspended sandbox to another fleet host (fleet_move.c):
 * libvmm's vmm_move_* on berthd's manager. _export marks it moving (0,
 * -1 with err): wakes wait; _end: the move failed, it stays (and the
 * wakes that waited wake it here); _dir: where a moving
 * one's files arrive (vms/.move/ID; id NULL: vms/.move); _adopt: from
 * there, as template_dir's (NULL: the default), its store row's state
 * and address set: 0, -1 with err, -2 the id or its address is taken. */
struct vmm_move;
int px_vm_move_export(const char *id, struct vmm_move *mv, char *err,
    size_t errlen);
void px_vm_move_end(const char *id);
/* One that stands on a fork's layers is flattened first (libvmm's
 * vmm_move_flatten: moving meanwhile, wakes wait): 0 nothing to do,
 * 1 started (done later), -1 with err. */
int px_vm_move_flatten(const char *id, void (*done)(void *, int, const char *),
    void *arg, char *err, size_t errlen);
/* It moved, and the route table says where: the requests that waited
 * for the move go on (there). */
void px_vm_move_handed(const char *id);
int px_vm_move_dir(const char *id, char *buf, size_t len);
/* Moves compare template versions by content (each file's data read
 * once per process): the default template's and each registered one's,
 * at berthd's start, and each version as its build ends from then on, so
 * that a first move does not stop the loop (and the fleet lease's
 * renewal) for the second or two a large image takes. */
void px_vm_move_prehash(void);
/* Which files of mv this host needs: libvmm's answer, and the
 * template's files when this host lacks that version of tname (its
 * store name, "" the default; NULL: not known, none asked). 0; -1 with
 * err; -2 with err: a bad name, or a version lacking that the move
 * cannot bring. */
int px_vm_move_needs(const struct vmm_move *mv, const char *tname, int *need,
    char *err, size_t errlen);
/* The template directory the sandbox mv (of store template tname) is
 * adopted over: this host's version of it when the same by content,
 * else one a move brought, else the copy made now of what came in mdir
 * (*copied 1; a name unknown here registered with it). What came of the
 * template is taken out of mdir either way. 0, or -1 with err. */
int px_vm_move_template(const char *mdir, const struct vmm_move *mv,
    const char *tname, char *dir, size_t len, int *copied, char *err,
    size_t errlen);
int px_vm_move_adopt(const char *dir, const struct vmm_move *mv,
    const char *template_dir, char *err, size_t errlen);

#endif
