/*
 * backend.h — libvmm internals shared by the manager (vmm.c) and the
 * backends (qemu.c, firecracker.c): the sandbox object, the backend table
 * of operations, and the few helpers a backend needs (spawning and
 * watching a child, paths, reporting completion).
 *
 * Contract: the manager calls at most one asynchronous backend operation
 * per sandbox at a time and waits for vmm_backend_done(). A backend calls
 * vmm_backend_done() exactly once per accepted operation (never from
 * inside the call that started it: use vmm_backend_done_later() for immediate
 * answers) and says which state the sandbox is in afterwards, because
 * only the backend knows whether, say, a failed snapshot left the guest
 * running. Death of the VMM outside any operation goes to
 * vmm_backend_exited().
 *
 * The manager is one module in three files: vmm.c (sandboxes, their
 * states and operations), fork.c (forks and checkpoints) and ready.c
 * (ready snapshots and the pool), which call each other both ways; the
 * backends and the rest of libvmm only call down into them (a backend
 * reports through vmm_backend_done, accel.c through vmm_emit).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_VMM_BACKEND_H
#define BERTH_VMM_BACKEND_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm.h"

struct event;

struct vmm_backend {
	const char *name;
	/* once per manager; may look at m->cfg */
	int (*init)(struct vmm *m, char *err, size_t errlen);
	/* boot the VMM: fresh (restore == 0, ends RUNNING when the guest's
	 * ready line is seen) or from <dir>/snap/state (restore == 1) */
	int (*boot)(struct vmm_sandbox *sb, int restore, char *err,
	    size_t errlen);
	int (*pause)(struct vmm_sandbox *sb, char *err, size_t errlen);
	int (*cont)(struct vmm_sandbox *sb, char *err, size_t errlen);
	/* snapshot to <dir>/snap/state, then end the VMM process */
	int (*suspend)(struct vmm_sandbox *sb, char *err, size_t errlen);
	/* orderly end of the VMM process (disk kept) */
	int (*stop)(struct vmm_sandbox *sb, char *err, size_t errlen);
	/* end the VMM process now, whatever it is doing; done() follows */
	int (*kill)(struct vmm_sandbox *sb, char *err, size_t errlen);
	/* reconnect to a live VMM (pid) after a restart; done() with the
	 * state found (RUNNING or PAUSED) */
	int (*adopt)(struct vmm_sandbox *sb, pid_t pid, char *err,
	    size_t errlen);
	/* drop every resource of this sandbox in the backend without
	 * touching the VMM process (synchronous; no done()); a standby
	 * VMM process is ended */
	void (*release)(struct vmm_sandbox *sb);
	/* optional: a fork's capture: the guest stopped, the disk's top
	 * frozen (its canonical name layer, a hard link made by the caller)
	 * and a new top over it, RAM and device state to the stream file,
	 * the guest running again if it ran; done() with the state */
	int (*capture)(struct vmm_sandbox *sb, const char *layer,
	    const char *stream, char *err, size_t errlen);
	/* optional: merge the layers of the disk's chain above base into
	 * its top, the VM running or paused (layers: the chain's qcow2
	 * files now, for the event); done() with the state it had */
	int (*merge)(struct vmm_sandbox *sb, const char *base,
	    unsigned layers, char *err, size_t errlen);
	/* optional: the sandbox's directory was renamed (a pool member
	 * claimed): paths the backend keeps are recomputed */
	void (*moved)(struct vmm_sandbox *sb);
	/* optional: the sandbox was just suspended: start a VMM process
	 * that waits for its snapshot (no guest runs, no done()), so that
	 * the next boot(restore) skips the VMM's start-up. A later
	 * stop/kill/release ends it. Failure only means a slower restore. */
	int (*standby)(struct vmm_sandbox *sb, char *err, size_t errlen);
	/* optional: end the standby VMM now and reap it (synchronous, no
	 * done(), no event): the standby budget wants it for another
	 * sandbox. The sandbox stays suspended; only while no operation is
	 * in flight (a restore may be promoting it) */
	void (*standby_stop)(struct vmm_sandbox *sb);
};

extern const struct vmm_backend vmm_backend_qemu;
extern const struct vmm_backend vmm_backend_firecracker;

struct vmm_waiter {
	struct vmm_waiter *next;
	vmm_done_cb cb;
	void *arg;
};

struct vmm_sandbox;
/* what an operation waiting for room goes on with: 0 or -errno, err */
typedef int (*vmm_room_go)(struct vmm_sandbox *sb, char *err, size_t errlen);

struct vmm_sandbox {
	struct vmm *m;
	struct vmm_sandbox *next;
	char id[VMM_ID_MAX + 1];
	enum vmm_state state;
	char reason[VMM_ERRLEN];	/* last failure */
	char tap[16];
	struct in_addr guest_ip, gateway;
	uint8_t prefix;
	uint8_t mac[6], host_mac[6];
	char dir[PATH_MAX];
	char jdir[PATH_MAX];		/* jailed: <dir>/jail, else dir */
	char disk[PATH_MAX];
	int jailed;			/* its VMM runs in the jail (jail.c) */
	uint64_t console_paused;	/* its console copier's rate limit
					 * paused it (console.c) */
	int pool_idx;			/* its /30 block: tap name, uid */
	uid_t uid;			/* its VMM's user and group */
	gid_t gid;
	char cgroups[5][160];		/* cgroup.procs files its VMM enters */
	int ncgroups;
	struct vmm_template tpl;	/* owned copies */
	unsigned mem_mib, vcpus, disk_mib;
	enum vmm_accel accel;		/* of the running VMM or the snapshot
					 * (restores use it); AUTO: unknown */
	uint64_t idle_pause_ms, idle_suspend_ms, max_lifetime_ms; /* 0: dflt */
	uint64_t created_ms, created_mono_ms, last_activity_ms;
	int holds;			/* vmm_activity_hold: never idle */
	int64_t cpu_ms;			/* VMM CPU time at cpu_at_ms (idle) */
	int64_t net_bytes;		/* tap bytes at net_at_ms */
	uint64_t net_at_ms;
	uint64_t cpu_at_ms;
	pid_t pid;			/* VMM process, 0 if none */
	pid_t standby_pid;		/* suspended: a VMM waiting for the
					 * restore (backend's standby()), 0 */
	int standby_ready;		/* ... and it has loaded the snapshot */
	void *user;

	/* the operation in flight */
	int busy;
	enum vmm_op op;
	const char *cause;
	enum vmm_state op_from;
	/* the last operation was a restore from a snapshot that failed: the
	 * snapshot is still the latest, so a resume may try it again (once
	 * it is repaired); any other failure leaves it stale */
	int restore_failed;
	/* adoption: the state sandbox.conf had (an operation may have been
	 * in flight: a restore's qemu that has not run the guest yet is
	 * ended, the snapshot still stands) */
	enum vmm_state adopt_from;
	int disk_ready;			/* mkfs finished (else start redoes it) */
	uint64_t op_t0;
	struct vmm_waiter *waiters;
	int preparing;			/* a pause or suspend waits for the
					 * cfg's sleep_prepare (the guest
					 * giving memory back) */
	uint64_t prep_activity_ms;	/* last_activity_ms before it: the
					 * guest's reclaim is not activity */
	struct event *prep_ev;		/* its deadline */
	int prep_idle;			/* ... for the idle policy: activity
					 * or a wake meanwhile gives it up */
	int abandoned;			/* ... and it was given up: its end
					 * is no failure */
	vmm_room_go room_go;		/* it waits for room under the caps
					 * (vmm.c room_gate): goes on with
					 * this, then */
	enum vmm_state room_fail;	/* ... fails to this state */
	uint64_t room_until;		/* ... when none came by then */
	unsigned room_pass;
	char room_what[16];		/* "wake", "create" ... */
	unsigned room_seq;		/* its place in the queue for room:
					 * the order operations were admitted
					 * in (vmm.c vmm_cap_room) */
	int room_pending;		/* admitted, its VMM not started yet
					 * (a create's mkfs, a wait for room):
					 * it holds no slot, those after it
					 * leave it one */
	int room_passed;		/* ... past its gate in this operation:
					 * its slot counted (a second gate, a
					 * start's after its mkfs, lets it by) */
	unsigned evict_for;		/* a cap suspends it to make room for
					 * the operation of this room_seq */
	char room_err[VMM_ERRLEN];	/* that suspend failed: the operation
					 * waiting for it fails with this */
	int cap_refused;		/* the operation ending failed at a
					 * cap (vmm_info.cap_refused) */

	/* manager helpers */
	pid_t mkfs_pid;
	struct vmm_child *mkfs_watch;
	struct event *idle_ev;
	struct event *later_ev;		/* vmm_backend_done_later */
	int later_ok;
	enum vmm_state later_state;
	char later_reason[VMM_ERRLEN];
	int deleting;

	/* ready snapshots (ready.c) */
	int hidden;			/* a ready snapshot's build: not
					 * listed, no callbacks */
	char build_key[VMM_READY_KEY];	/* ... of this key */
	char moved_key[VMM_READY_KEY];	/* layered over a base a move brought
					 * (.layers/moved-SHA.qcow2): the key
					 * of the ready snapshot it was */
	char ready_key[VMM_READY_KEY];	/* its disk's base layer is that
					 * snapshot's disk.qcow2; "" none */
	int from_snapshot;		/* created by restoring it */
	int ready_pending;		/* the create restores it (else
					 * boots) */
	int ram_shared;			/* RAM: the snapshot's pages, mapped
					 * copy-on-write (no file of its own) */
	int snap_ram;			/* snap/state holds the RAM too (a
					 * suspend of a ram_shared sandbox) */
	int snap_dev;			/* snap/state is the devices' part of
					 * such a snapshot, split (image.c)
					 * by its standby: the RAM is in
					 * the RAM file, whole; loaded
					 * without x-ignore-shared */
	int ram_anon;			/* RAM: anonymous memory, filled from
					 * a stream that carried it (a fork,
					 * a checkpoint, a clone's wake); its
					 * suspends carry it again */
	int ready_memfd;		/* jailed restore: the sealed RAM
					 * image (the manager's; not closed) */
	int ram_image;			/* a fork's: its capture's sealed RAM
					 * image (a memfd of its own, closed
					 * once its VMM maps it); -1 none */
	struct vmm_ident *ident;	/* a clone being given its identity */
	char fork_base[PATH_MAX];	/* a fork being made: its base layer */
	char forked_from[VMM_ID_MAX + 1];	/* ... and its source */
	int fork_pending;		/* the create restores the capture */
	int readdress_pending;		/* moved here with another address
					 * than its guest has: its next
					 * restore gives it this one (the
					 * identity request's network part) */
	char restoring[VMM_ID_MAX + 1];	/* ... or a checkpoint's restore */
	struct event *merge_ev;		/* a merge of its layers, due */
	int merge_tail;			/* the merge ending an operation ... */
	char merge_reason[VMM_ERRLEN];	/* ... whose answer this is */
	uint64_t merge_t0;
	enum vmm_state merge_st;	/* ... and the state it ended in */
	int layered;			/* its disk's chain is read from the
					 * qcow2 headers (a fork or a fork's
					 * source); the jail binds each file */
	unsigned layer_gen;		/* its top is disk.<gen>.qcow2 */
	int pooled;			/* hidden: a ready pool member */
	int pool_ready;			/* ... restored, identified, paused */
	char cg_name[VMM_ID_MAX + 1];	/* its cgroup's name when not its id
					 * (claimed from the pool) */
	int moving;			/* export.c: its files are being
					 * copied to another host: no
					 * operation but a delete, no
					 * standby */
	int flattened;			/* ... its layers merged for it
					 * (vmm_move_flatten): the export
					 * that follows takes it moving */

	/* capacity (capacity.c) */
	uint64_t pss;			/* its VMM's PSS at the last sample */
	uint64_t standby_pss;		/* its standby's, once loaded, 0 */
	pid_t standby_pss_pid;		/* ... of this process */
	int standby_mine;		/* the budget started the one it has */
	int standby_lost;		/* ... and it died by itself: none
					 * again until its next operation */
	uint64_t disk_bytes;		/* its directory's allocated blocks */
	uint64_t cpu_usec;		/* CPU counter at cpu_usec_ms */
	uint64_t cpu_usec_ms;		/* 0: none yet */
	pid_t cpu_pid;			/* not jailed: the process counted */
	double cpu_rate;		/* cores, over the last interval */
	int cpu_rate_known;
	char op_why[VMM_ERRLEN];	/* why the manager began its operation
					 * (a cap made room): the event says */

	void *priv;			/* backend's */
};

struct vmm {
	struct event_base *base;
	struct vmm_config cfg;		/* strings copied below */
	char state_dir[PATH_MAX];
	char vmm_binary[PATH_MAX];
	char tap_prefix[8];
	char mkfs[PATH_MAX];
	char dns[64];
	const struct vmm_backend *be;
	enum vmm_accel accel;		/* the latest verdict (or the guess) */
	int accel_known;		/* accel was proven or forced */
	int kvm_possible;		/* auto: the probe did not rule KVM out,
					 * so a fresh boot may be KVM's trial */
	char accel_why[VMM_ERRLEN];
	struct vmm_pool *pool;
	struct vmm_sandbox *list;
	unsigned tap_seq;
	struct vmm_ready *ready;	/* ready.c: memfds, the build */
	/* capacity.c: the sampling timer and the last sample */
	struct event *cap_ev;
	uint64_t cap_due;		/* next full sample (monotonic) */
	uint64_t cap_mono;		/* monotonic time of the last one */
	struct vmm_capacity cap;
	uint64_t cpu_total, cpu_idle;	/* /proc/stat at the last sample */
	uint64_t standby_mean;		/* a standby's PSS, the mean of the
					 * last measured ones; 0: unknown */
	int rebalancing;
	struct event *room_ev;		/* vmm.c: those waiting for room */
	int room_waiting;
	unsigned room_pass;
	unsigned room_seq;		/* the last room_seq given */
};

/* ---- capacity (capacity.c) ---- */

/* Which cap a sandbox counts against, by where it is heading: a wake or
 * create in flight counts as running once its VMM starts (admitted and
 * still waiting for room or its disk: what it holds now), a suspend,
 * stop or delete in flight no longer counts, hidden ones never. */
#define VMM_CAPC_NONE		0
#define VMM_CAPC_PAUSED		1
#define VMM_CAPC_RUNNING	2
int vmm_cap_class(const struct vmm_sandbox *sb);
void vmm_cap_init(struct vmm *m);
void vmm_cap_free(struct vmm *m);
/* A state changed: sample soon (debounced). */
void vmm_cap_soon(struct vmm *m);
/* Start and stop standby VMMs to fit cfg.standby_max and
 * standby_mem_bytes, the most recently active suspended sandboxes
 * first. */
void vmm_standby_rebalance(struct vmm *m);
/* vmm.c: make room under the caps before self (NULL: a create of id,
 * whose room_seq will be m->room_seq + 1) runs: what is "create",
 * "start", "wake" or "restore" (for the events and err). 0: room now;
 * 1: once the suspends under way end (the operation waits for them);
 * -EUSERS with err. */
int vmm_cap_room(struct vmm *m, struct vmm_sandbox *self, const char *id,
    const char *what, char *err, size_t errlen);
/* PSS of a process (smaps_rollup; RSS when unreadable), bytes; 0. */
uint64_t vmm_proc_pss(pid_t pid);

/* ---- a clone's identity (ident.c) ---- */

/* ping + identity, at most: a restored guest under TCG translates its
 * code anew, and on a loaded host (2 cores, builds beside it) a deep
 * fork's first answer took more than 15 s, then (the CI's chain of
 * twelve forks, merges beside it, another test's VMs) more than 30 s:
 * a clone that answers late is better than a create that failed */
#define VMM_IDENT_MS 60000
typedef void (*vmm_ident_cb)(struct vmm_sandbox *sb, int ok,
    const char *why, void *arg);
/* Give a just-restored clone its identity through its guest agent
 * (hostname = id, machine id, MAC, address, gateway, resolver, clock,
 * entropy): cb once, from the loop. */
/* vmm.c: a free pool block whose tap and gateway no one on this host
 * holds: its index, gw, ip and tap name; -ENOSPC when none. */
int vmm_pool_alloc_free(struct vmm *m, struct in_addr *gw,
    struct in_addr *ip, char *tap, size_t taplen);
int vmm_ident_start(struct vmm_sandbox *sb, vmm_ident_cb cb, void *arg,
    char *err, size_t errlen);
/* the same, then `true` run once (a pool member warms its exec paths) */
int vmm_ident_start_warm(struct vmm_sandbox *sb, vmm_ident_cb cb, void *arg,
    char *err, size_t errlen);
void vmm_ident_cancel(struct vmm_sandbox *sb);
/* agent.c: the agent's socket of sb, connected and checked (SO_PEERCRED
 * when jailed), in any state: fd or -errno with err */
int vmm_agent_socket(struct vmm_sandbox *sb, char *err, size_t errlen);

/* ---- ready snapshots (ready.c) ---- */

int vmm_ready_path(const struct vmm *m, const char *key, const char *name,
    char *buf, size_t len);
/* The sealed memfd of key's RAM image (the manager keeps it). */
int vmm_ready_memfd(struct vmm *m, const char *key, char *err,
    size_t errlen);
void vmm_ready_free_all(struct vmm *m);
#define VMM_POOL_REFILL_MS 2000
void vmm_ready_pool_refill(struct vmm *m, const char *key);
void vmm_ready_cleanup(struct vmm *m);
void vmm_ready_gc(struct vmm *m);
int vmm_fork_begin(struct vmm_sandbox *sb, enum vmm_op op, const char *layer,
    const char *stream, vmm_done_cb cb, void *arg, char *err, size_t errlen);
/* image.c: a captured stream (in) split into the RAM image of its block
 * `block` (img, img_size bytes, zero to start with) and the stream of the
 * rest (out). done: -1, or a descriptor that turns readable once the
 * stream is complete (until then its end is waited at: it is still being
 * written). For a child process: no allocation but mmap. 0, or -errno
 * with err (-ENOTSUP: a stream it does not know: load it whole). */
int vmm_stream_split(int in, int done, int out, int img, uint64_t img_size,
    const char *block, char *err, size_t errlen);
/* The inverse: the devices' stream of a split (in) and its image (img,
 * holes and zero pages left out) into one stream carrying the RAM (out).
 * 0, or -errno with err. */
int vmm_stream_join(int in, int out, int img, uint64_t img_size,
    const char *block, char *err, size_t errlen);
/* The same for the manager: stream (a capture carrying RAM) split by a
 * child into a sealed memfd of mem_mib MiB, all of it allocated (the
 * manager's memory, shared by whoever maps it), and dev, the devices'
 * stream (made here, 0400). follow: the stream is being written (or is
 * about to be made) by a capture under way: the split reads it as it
 * grows, until vmm_split_written says it is complete. img >= 0: the
 * image goes there instead (a RAM file of mem_mib MiB, not sealed; cb
 * gets a descriptor of its own of it). cb runs once from
 * the loop: img >= 0 the image (cb's to close), or -1 and why; ms the
 * time it took. The split under way, or NULL with err (nothing made);
 * vmm_split_cancel ends it without cb. */
typedef void (*vmm_split_cb)(void *arg, int img, const char *why,
    uint64_t ms);
struct vmm_split;
struct vmm_split *vmm_split_start(struct vmm *m, const char *stream,
    const char *dev, unsigned mem_mib, int follow, int img,
    vmm_split_cb cb, void *arg, char *err, size_t errlen);
/* The inverse for the manager: dev (a split's devices' stream) and img
 * (its RAM image, a file of mem_mib MiB) joined by a child into stream
 * (made here, 0400). cb once: img -1 and why "" when it is written and
 * synced; vmm_split_cancel ends it without cb (stream left to the
 * caller). */
struct vmm_split *vmm_join_start(struct vmm *m, const char *dev,
    const char *img, const char *stream, unsigned mem_mib, vmm_split_cb cb,
    void *arg, char *err, size_t errlen);
/* The zero pages of fd (a guest's RAM file that nothing writes now: its
 * VMM stopped or gone) punched out, so that they hold neither disk nor,
 * once mapped again, memory: what its guest's kernel zeroed and never
 * wrote again (its bss, pages freed in blocks too small to report). A
 * read of a hole is zeros: the content is the same. *punched: the bytes.
 * 0, or -errno with err (-EOPNOTSUPP: a file system without holes). */
int vmm_punch_zeros(int fd, uint64_t *punched, char *err, size_t errlen);
/* The same by a child of the manager for the RAM file at path, as how
 * says: VMM_SPARSE_PUNCH its zero pages, then VMM_SPARSE_SYNC flushed to
 * disk. cb once, as a join's (img -1; why "" once done); vmm_split_cancel ends
 * it without cb - and must, for a punch, before anything may write the
 * file again. */
#define VMM_SPARSE_PUNCH	1
#define VMM_SPARSE_SYNC		2
struct vmm_split *vmm_sparse_start(struct vmm *m, const char *path, int how,
    vmm_split_cb cb, void *arg, char *err, size_t errlen);
void vmm_split_written(struct vmm_split *x);
void vmm_split_cancel(struct vmm_split *x);
/* A suspended sandbox's capture, for vmm_fork_begin: its disk's top
 * frozen as layer, its snapshot linked as stream; ends in
 * vmm_backend_done (it stays suspended). 0, or -errno with err. */
int vmm_freeze_suspended(struct vmm_sandbox *sb, const char *layer,
    const char *stream, char *err, size_t errlen);
int vmm_restore_begin(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);
/* <state>/.checkpoints/<id> into out */
int vmm_checkpoint_dir(const struct vmm *m, const char *id, char *out,
    size_t outlen);
int vmm_sandbox_create_fork(struct vmm *m,
    const struct vmm_sandbox_spec *spec, const struct vmm_sandbox *src,
    const char *base, const char *stream, vmm_done_cb cb, void *arg,
    struct vmm_sandbox **out, char *err, size_t errlen);
int vmm_sandbox_create_hidden(struct vmm *m,
    const struct vmm_sandbox_spec *spec, const char *key, vmm_done_cb cb,
    void *arg, struct vmm_sandbox **out, char *err, size_t errlen);
void vmm_rmtree(const char *path);
/* The qcow2 files of top's chain (n, its raw image not counted) and the
 * deepest of them into base; -1 when unreadable. */
int vmm_chain_base(const char *top, char *base, size_t baselen);
void vmm_layers_orphans(struct vmm *m);
/* ---- disk layer chains (layers.c) ---- */
#define VMM_CHAIN_MAX	16
/* top, then each backing file from the qcow2 headers (host paths), the
 * last one raw or without backing: their count, or -1 with err */
int vmm_chain(const char *top, char files[][PATH_MAX], int max, char *err,
    size_t errlen);
/* A big-endian 64-bit number at p (qcow2 headers, sparse forms). */
uint64_t vmm_be64(const unsigned char *p);
/* Remove the frozen layers no sandbox stands on. */
void vmm_layers_gc(struct vmm *m);
int vmm_template_copy(struct vmm_template *dst,
    const struct vmm_template *src);
/* SIGKILL pid (and reap it if ours) when its command line has -name
 * <prefix>...: a VMM of ours, not a process that took its number. */
void vmm_kill_if_ours(pid_t pid, const char *name_prefix);

/* ---- the jail (jail.c) ---- */

#define VMM_JAIL_FDS	4
#define VMM_JAIL_BINDS	32

struct vmm_jail {
	const char *root;		/* chroot here (vmm_jail_prepare) */
	uid_t uid;
	gid_t gid;
	struct {
		const char *src;	/* host path */
		const char *dst;	/* path inside root, no leading / */
		int dev;		/* a device node: not nodev, writable */
	} binds[VMM_JAIL_BINDS];
	int nbinds;
	int fds[VMM_JAIL_FDS];		/* passed as 3, 4, ... */
	int nfds;
	int proc;			/* mount its own proc at /proc */
	const char *const *cgroups;	/* cgroup.procs files to enter, NULL */
	unsigned long nofile, nproc;	/* rlimits; 0: unchanged */
	unsigned long long fsize;
};

/* Make <dir>/jail and its mount points and run/ (root's, once). */
int vmm_jail_prepare(struct vmm_sandbox *sb, char *err, size_t errlen);
/* fchown + fchmod name under dfd, never through a symlink. */
int vmm_jail_own(int dfd, const char *name, uid_t uid, gid_t gid,
    mode_t mode, char *err, size_t errlen);
/* mkdir -p of path (absolute) under jdir, root's 0755 directories. */
int vmm_jail_mkdirs(const char *jdir, const char *path);
/* sb's tap opened for its jailed VMM (fd 3 there): fd, or -1 with err. */
int vmm_jail_tap_open(struct vmm_sandbox *sb, char *err, size_t errlen);
/* vmm_spawn's contract, the child jailed as j says (namespaces, binds,
 * chroot, uid, no_new_privs, rlimits, cgroups) before exec. argv[0] is
 * a path inside the jail. */
pid_t vmm_jail_spawn(char *const argv[], const char *logpath,
    const struct vmm_jail *j, char *err, size_t errlen);

/* ---- cgroups (cgroup.c) ---- */

/* 2: cgroup v2, 1: v1 controllers, 0: none usable here. */
int vmm_cgroup_mode(void);
/* Make sb's groups with its limits; sb->cgroups then names what its VMM
 * enters. 0 also when the host has none (no limits then). */
int vmm_cgroup_setup(struct vmm_sandbox *sb, char *err, size_t errlen);
void vmm_cgroup_remove(struct vmm_sandbox *sb);
/* The parent group of m's sandboxes' groups, when none is left in it. */
void vmm_cgroup_parent_remove(const struct vmm *m);
void vmm_cgroup_usage(const struct vmm_sandbox *sb, struct vmm_usage *u);

/* Completion of the operation in flight; `state` is the state after it. */
void vmm_backend_done(struct vmm_sandbox *sb, int ok, enum vmm_state state,
    const char *reason);
/* The VMM went away (or its control channel did) with no operation in
 * flight: the sandbox becomes FAILED and an EXIT event is sent. */
void vmm_backend_exited(struct vmm_sandbox *sb, const char *reason);

/* The accelerator for a fresh boot of sb (accel.c). *trial = 1 when this
 * boot is KVM's trial: the backend gives it cfg.kvm_trial_ms, and reports
 * the outcome with vmm_accel_verdict() (a failed trial boots again under
 * TCG). */
enum vmm_accel vmm_accel_boot(struct vmm_sandbox *sb, int *trial);
void vmm_accel_verdict(struct vmm_sandbox *sb, enum vmm_accel a,
    const char *why);

/* name as execvp would find it through PATH (name itself if none). */
void vmm_exe_path(const char *name, char *buf, size_t len);

/* An event outside any operation (accelerator verdicts, what the guest
 * did by itself). */
void vmm_emit(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, const char *cause);
/* Rewrite <dir>/sandbox.conf now (a VMM was spawned: its pid must be on
 * disk before anything else can go wrong). */
void vmm_meta_save(struct vmm_sandbox *sb);
/* Something the guest or qemu did leaves the sandbox failed while its
 * VMM lives on (a disk I/O error stopped it): state FAILED, an event. */
void vmm_backend_failed(struct vmm_sandbox *sb, const char *reason);

/* The guest kernel command line: the template's plus tsc_early_khz= and
 * berth.ip= berth.gw= berth.dns= berth.id= (read by the guest's init). */
int vmm_kernel_cmdline(const struct vmm_sandbox *sb, char *buf, size_t len);

/* Hand the sandbox dir, snap/, the disk and the files the VMM reopens
 * to cfg.vmm_uid (no-op when the VMM runs as we do). */
int vmm_own(struct vmm_sandbox *sb, char *err, size_t errlen);

/* A small file (/proc, /sys, cgroupfs) read whole into buf and ended
 * with a NUL: its length, or -1 when it cannot be read or is empty. */
ssize_t vmm_read_small(const char *path, char *buf, size_t len);

/* <dir>/<name> into buf; -ENAMETOOLONG. */
/* "disk.qcow2" (a root overlay) or "disk.raw": the disk's file name */
const char *vmm_disk_name(const struct vmm_sandbox *sb);
int vmm_path(const struct vmm_sandbox *sb, const char *name, char *buf,
    size_t len);
uint64_t vmm_now_ms(void);		/* monotonic */
uint64_t vmm_wall_ms(void);
void vmm_timer_ms(struct event *ev, uint64_t ms);	/* event_add, ms from now */

/* Watch a process: cb runs once when it has exited (reaped if it is our
 * child; status -1 if it is not). Uses a pidfd, so it never collides with
 * a SIGCHLD handler of the application. */
struct vmm_child;
typedef void (*vmm_child_cb)(pid_t pid, int status, void *arg);
struct vmm_child *vmm_child_watch(struct event_base *base, pid_t pid,
    vmm_child_cb cb, void *arg, char *err, size_t errlen);
void vmm_child_unwatch(struct vmm_child *c);
/* "exited with status 1", "killed by signal 9" */
void vmm_status_text(int status, char *buf, size_t len);

/* fork + exec argv[0] (PATH search) in a new session, stdin from
 * /dev/null, stdout and stderr appended to logpath, as uid:gid unless
 * uid is 0 (no supplementary groups then). The exec is confirmed (a
 * failed exec or uid change is reported here, not as an exit). */
pid_t vmm_spawn(char *const argv[], const char *logpath, uid_t uid,
    gid_t gid, char *err, size_t errlen);
/* Pieces of vmm_spawn for other spawners (jail.c): open the log and the
 * exec report pipe; in the child, signals, session, stdin and log; in
 * the parent, 0 when the child reached exec, else its errno (reaped). */
int vmm_spawn_prepare(const char *logpath, int *logfd, int pfd[2],
    char *err, size_t errlen);
void vmm_spawn_child_stdio(int logfd);
int vmm_spawn_confirm(pid_t pid, int pfd[2], int logfd);

/* The last non-empty line of a text file (for error messages). */
void vmm_tail_line(const char *path, char *buf, size_t len);

/* Look for needle in what was appended to path since *off (advanced);
 * carry (carrylen bytes, "" at first) holds the tail of the last read so
 * a needle split across two reads is found. 1 found, 0 not yet. */
int vmm_scan_file(const char *path, off_t *off, char *carry,
    size_t carrylen, const char *needle);

/* vmm_backend_done() from the event loop soon, for an operation with
 * nothing to wait for. The pending call belongs to the sandbox (freed
 * with it), so a delete overtaking it is safe. */
void vmm_backend_done_later(struct vmm_sandbox *sb, int ok,
    enum vmm_state state, const char *reason);

/* vmm.c: adopt <state_dir>/<id>/ as vmm_adopt_all does one sandbox
 * (export.c's adoption of a moved one ends here). */
int vmm_adopt_one(struct vmm *m, const char *id, char *err, size_t errlen);

/* kv.c: sandbox.conf's key=value lines, each value escaped so that it
 * cannot add a key. vmm_kv_write: -1 on a write error. vmm_kv_read calls
 * cb(key, value, arg) per line (cb != 0 stops); -EINVAL with err for a
 * key given twice, a line no value fits in, or a broken escape. */
#include <stdio.h>
int vmm_kv_write(FILE *, const char *key, const char *val);
int vmm_kv_read(FILE *, int (*cb)(const char *key, const char *val, void *),
    void *arg, char *err, size_t errlen);
/* src bounded to size - 1 bytes, each control byte a '?': what a VMM
 * says, made safe for logs, events and files. */
void vmm_text_clean(char *dst, size_t size, const char *src);

#endif
