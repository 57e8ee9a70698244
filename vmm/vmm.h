/*
 * vmm.h — libvmm, berth's embedded VMM manager: sandboxes (microVMs) with
 * a tap device, an address from a /30 pool, a persistent disk and a
 * lifecycle (create, start, pause, suspend, resume, stop, delete) driven
 * asynchronously on a libevent event_base. Nothing here blocks the loop
 * for longer than a syscall; every operation ends in exactly one
 * completion callback and one event, with a definite state.
 *
 * Conventions: the library never logs and never exits. Calls that can
 * fail at once return 0 or a negative errno value and write one line into
 * the caller's (err, errlen). Asynchronous failures arrive in the
 * completion callback (ok == 0, reason) and as an event. Not thread-safe:
 * use one struct vmm from the thread that runs its event_base. The
 * application must ignore SIGPIPE (a VMM that dies mid-write would raise
 * it on the QMP socket), as any libevent server does.
 *
 * Files: every sandbox lives in <state_dir>/<id>/: disk.raw (persistent
 * disk; disk.qcow2, its root's overlay, for a root_overlay template), mem (guest RAM, memory-backend-file: on disk, so a suspended
 * sandbox holds no memory), snap/state (device state of a suspended
 * sandbox), console.log, qmp.sock, vmm.log (the VMM's own stderr),
 * sandbox.conf (what is needed to re-adopt it after a restart).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_VMM_H
#define BERTH_VMM_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct vmm;
struct vmm_sandbox;

#define VMM_ERRLEN 512		/* a comfortable error buffer size */
#define VMM_ID_MAX 48		/* [a-z0-9-], starts with a letter or digit */
#define VMM_NEVER UINT64_MAX	/* idle/lifetime limit that never fires */
#define VMM_IDLE_CPU_OFF 1000	/* idle_cpu_pct: only visitors count */

enum vmm_state {
	VMM_CREATING = 0,	/* being created or booted, not serving yet */
	VMM_RUNNING,		/* guest up (its ready line was seen) */
	VMM_PAUSED,		/* vCPUs stopped, memory kept, process alive */
	VMM_SUSPENDED,		/* snapshot on disk, no process, memory freed */
	VMM_STOPPED,		/* no process; the disk is kept */
	VMM_FAILED,		/* died or could not be resumed; see reason */
};

enum vmm_op {
	VMM_OP_CREATE = 0,
	VMM_OP_START,		/* boot a stopped or failed sandbox */
	VMM_OP_PAUSE,
	VMM_OP_SUSPEND,
	VMM_OP_RESUME,		/* from paused or suspended */
	VMM_OP_STOP,
	VMM_OP_DELETE,
	VMM_OP_EXIT,		/* not requested: the VMM died or hung up */
	VMM_OP_ADOPT,		/* re-adopted after a restart (vmm_adopt_all) */
	VMM_OP_ACCEL,		/* not requested: KVM's trial boot decided */
	VMM_OP_GUEST,		/* not requested: the guest reset, panicked or
				 * hit a disk error */
	VMM_OP_JAIL,		/* not requested: the jail is incomplete */
	VMM_OP_SNAPSHOT,	/* not requested: a create booted instead of
				 * restoring the ready snapshot (why), or
				 * a ready snapshot was built */
	VMM_OP_FORK,		/* the source's side of a fork */
	VMM_OP_CHECKPOINT,	/* a checkpoint taken (a capture, as a fork's) */
	VMM_OP_RESTORE,		/* back to a checkpoint, in place */
	VMM_OP_MERGE,		/* not requested: its disk's layers past
				 * cfg.max_layers merged, the VM running */
	VMM_OP_STANDBY,		/* not requested: a suspended sandbox's
				 * standby VMM died before it was used (its
				 * wake restores without one) */
};

enum vmm_accel {
	VMM_ACCEL_AUTO = 0,	/* KVM if a real boot proves it, else TCG */
	VMM_ACCEL_TCG,
	VMM_ACCEL_KVM,
};

const char *vmm_state_name(enum vmm_state s);
const char *vmm_op_name(enum vmm_op op);
const char *vmm_accel_name(enum vmm_accel a);	/* "kvm", "tcg", "auto" */

/* ---- templates ---- */

struct vmm_template {
	const char *name;
	const char *kernel;		/* absolute paths */
	const char *initrd;		/* may be NULL */
	const char *rootfs;		/* raw root image, may be NULL */
	const char *cmdline;		/* base command line */
	const char *ready_line;		/* console text meaning "guest up";
					 * NULL: "berth-guest: ready" */
	unsigned mem_mib;		/* its sandboxes' memory unless the
					 * spec asks (template.json
					 * "memory_mib"); 0: the manager's */
	int balloon;			/* 1: a virtio-balloon device with
					 * free page reporting (pages the
					 * guest frees leave the host). Set
					 * per sandbox at its create from
					 * the manager's free_page_reporting
					 * and kept with it (sandbox.conf,
					 * forks): a restore must see the
					 * devices it was saved with */
	const char *settled_line;	/* console text meaning "what runs
					 * for good is up" (Docker too): the
					 * ready snapshot is taken there;
					 * NULL: the ready line */
	const char *agent;		/* virtio-serial port name of the
					 * guest agent; NULL: none */
	int root_overlay;		/* 1: rootfs is the root of every
					 * sandbox, each through its own qcow2
					 * copy-on-write overlay (disk.qcow2,
					 * /dev/vda, made with qemu-img) that
					 * replaces the ext4 data disk; the
					 * image itself is only ever read. The
					 * overlay is the image's size, or a
					 * larger disk_mib asked for in the
					 * spec (the guest grows its fs) */
};

/* Read <dir>/template.json as written by vmm/guest/mktemplate (or
 * mktemplate-debian). dir's symbolic links are resolved first: a
 * sandbox keeps the paths of the template version it was made from. The
 * strings are allocated; vmm_template_free() releases them. */
int vmm_template_load(const char *dir, struct vmm_template *t, char *err,
    size_t errlen);
void vmm_template_free(struct vmm_template *t);

/* ---- events ---- */

struct vmm_event {
	uint64_t time_ms;		/* wall clock, ms since the epoch */
	const char *id;			/* sandbox */
	enum vmm_op op;
	int ok;
	const char *reason;		/* "" when ok and nothing to say */
	uint64_t duration_ms;
	enum vmm_state state;		/* state after the operation */
	const char *cause;		/* "api", "idle", "lifetime", "vmm" */
};

/* Completion of one requested operation. sb is valid during the call
 * (for VMM_OP_DELETE it is freed right after). */
typedef void (*vmm_done_cb)(struct vmm_sandbox *sb, enum vmm_op op, int ok,
    const char *reason, uint64_t duration_ms, void *arg);
typedef void (*vmm_state_cb)(struct vmm_sandbox *sb, enum vmm_state old,
    enum vmm_state now, void *arg);
typedef void (*vmm_event_cb)(struct vmm_sandbox *sb,
    const struct vmm_event *ev, void *arg);

/* ---- the manager ---- */

struct vmm_config {
	const char *state_dir;		/* required; created if missing */
	const char *backend;		/* "qemu" (default) or "firecracker" */
	const char *vmm_binary;		/* NULL: qemu-system-x86_64 /
					 * firecracker from PATH */
	enum vmm_accel accel;
	unsigned kvm_trial_ms;		/* auto: KVM's trial boot must be ready
					 * this soon; 0: 20000 */
	int kvm_probe_skip;		/* auto: do not let the long-mode probe
					 * rule KVM out; the trial decides */
	struct in_addr pool;		/* 0: 10.200.0.0 */
	uint8_t pool_plen;		/* 0: 16; /30 blocks are carved out */
	const char *tap_prefix;		/* NULL: "bth" */
	uid_t tap_owner;		/* 0 or (uid_t)-1: root only;
					 * vmm_uid when that is set */
	int jail;			/* qemu: each VMM in a jail of its own
					 * (namespaces, chroot, its own uid,
					 * no_new_privs, seccomp without spawn,
					 * snapshots through descriptors) */
	uid_t uid_base;			/* jail: sandbox i (its pool block)
					 * runs as uid and gid uid_base + i;
					 * 0: all as vmm_uid:vmm_gid */
	unsigned uid_count;		/* the range's size (>= pool blocks) */
	int cgroups;			/* jail: a cgroup per VMM (cgroup.c) */
	const char *cgroup;		/* its parent group; NULL: "berth" */
	unsigned cpu_pct;		/* CPU quota per vCPU, % of a core;
					 * 0: 100 */
	unsigned mem_overhead_mib;	/* memory limit: guest RAM plus this;
					 * 0: 256 (qemu, TCG's code cache) */
	unsigned pids_max;		/* 0: 1024 */
	size_t console_max;		/* jail: console.log + console.log.1 at
					 * most this; 0: 4 MiB */
	size_t console_rate;		/* jail: console bytes copied a second
					 * at most; 0: 1 MiB */
	uid_t vmm_uid;			/* 0: the VMM runs as we do; else it
					 * runs as vmm_uid:vmm_gid, owns its
					 * sandbox dir and disk, and state_dir
					 * (and its parents) must let it pass */
	gid_t vmm_gid;
	unsigned mem_mib;		/* default per sandbox; 0: 256 */
	unsigned vcpus;			/* default; 0: 1 */
	unsigned max_mem_mib;		/* 0: 4096 */
	unsigned max_vcpus;		/* 0: 4 */
	unsigned disk_mib;		/* persistent disk size; 0: 1024 */
	unsigned ready_timeout_ms;	/* boot to ready line; 0: 90000 */
	unsigned op_timeout_ms;		/* QMP ops, restore; 0: 30000 */
	uint64_t idle_pause_ms;		/* 0: 5 min; VMM_NEVER: never */
	uint64_t idle_suspend_ms;	/* 0: 30 min; VMM_NEVER: never */
	uint64_t max_lifetime_ms;	/* 0: VMM_NEVER */
	unsigned idle_cpu_pct;		/* a running guest whose VMM used this
					 * share of one core (percent) per vCPU
					 * since the last look is not idle; 0:
					 * 10; VMM_IDLE_CPU_OFF: CPU never
					 * counts */
	uint64_t idle_net_bytes;	/* a running guest that moved more than
					 * this through its tap since the last
					 * look is not idle; 0: 64 KiB */
	const char *mkfs;		/* NULL: mkfs.ext4 */
	uint32_t tsc_khz;		/* 0: read from /proc/cpuinfo */
	const char *dns;		/* guest resolver; NULL: the gateway */
	unsigned standby_max;		/* at most this many suspended
					 * sandboxes keep a VMM process
					 * started and waiting for their
					 * snapshot, so a wake skips the
					 * VMM's start-up (costs that
					 * process's own memory, not the
					 * guest's); 0: none. They go to the
					 * most recently active ones */
	uint64_t standby_mem_bytes;	/* ... and their memory (PSS, each
					 * measured once it has loaded its
					 * snapshot) at most this; 0: only
					 * standby_max limits them */
	int room_no_cpu;		/* the capacity estimate's room for
					 * more running sandboxes is not
					 * bound by the CPU measured idle
					 * (hosts that overcommit CPU) */
	unsigned max_running;		/* at most this many sandboxes run
					 * (hidden ones not counted): past it
					 * a create, start, resume or restore
					 * first suspends the least recently
					 * active idle one (not busy, no
					 * activity hold), or is refused with
					 * -EUSERS when none is idle; 0: no
					 * cap */
	unsigned max_resident;		/* the same for running + paused */
	unsigned max_checkpoints;	/* per sandbox; 0: 16 */
	unsigned max_layers;		/* disk layers (qcow2 files of its
					 * chain) past which a running one's
					 * are merged; 0: 8 */
	unsigned ready_pool;		/* ready snapshots: keep this many
					 * clones restored, identified and
					 * paused per snapshot a create used,
					 * so the next create only resumes
					 * one and renames it; 0: none */
	int ready_snapshots;		/* 1: a create restores its shape's
					 * ready snapshot when there is one
					 * (and starts building it when not)
					 * instead of booting */
	int free_page_reporting;	/* 1: new sandboxes get a balloon
					 * device that reports the pages
					 * their guest frees (the host
					 * discards them) */
	/* Before a running sandbox is paused or suspended: the caller's
	 * chance to have its guest give memory back (drop its clean page
	 * cache), by id. The operation goes on when the caller says
	 * vmm_sleep_prepared(m, id), whatever happened, or after
	 * VMM_PREPARE_MS. Returns -1 when nothing was begun (the operation
	 * goes on at once). Optional; not for hidden sandboxes. */
	int (*sleep_prepare)(const char *id, void *cb_arg);
	int external_taps;		/* 1: taps are made by someone else
					 * (tests, external network setup);
					 * the manager only names them */
	/* callbacks, all optional */
	vmm_state_cb on_state;
	vmm_event_cb on_event;
	void *cb_arg;
};

#define VMM_PREPARE_MS	10000	/* sleep_prepare's longest */
/* the reason of the idle policy's pause or suspend given up because
 * activity came while the guest gave memory back */
#define VMM_ABANDONED	"abandoned: the sandbox was woken while its guest " \
	"gave memory back"

/* The end of a sleep_prepare (see vmm_config): the pause or suspend of
 * sandbox id goes on. Nothing when it is gone or no longer waiting. */
void vmm_sleep_prepared(struct vmm *m, const char *id);

/* Create the manager (state dir, backend, probe when accel is AUTO). */
struct vmm *vmm_new(struct event_base *base, const struct vmm_config *cfg,
    char *err, size_t errlen);
/* Free the manager and its sandbox objects WITHOUT touching the VMs:
 * running VMs keep running (restart safety). vmm_shutdown() first if
 * they should go. */
void vmm_free(struct vmm *m);
/* Accelerator chosen by vmm_new (never AUTO) and why. */
enum vmm_accel vmm_accel(const struct vmm *m, const char **why);
/* The same, once template t's cached verdict (from an earlier KVM trial
 * boot, <state_dir>/accel.cache) is taken into account. */
enum vmm_accel vmm_accel_template(struct vmm *m, const struct vmm_template *t);
const char *vmm_backend_name(const struct vmm *m);

struct vmm_sandbox *vmm_sandbox_find(struct vmm *m, const char *id);
/* Iterate: first with prev == NULL; NULL at the end. */
struct vmm_sandbox *vmm_sandbox_next(struct vmm *m, struct vmm_sandbox *prev);
/* Re-adopt what <state_dir> holds from a previous run: VMMs still alive
 * are reconnected (pid + QMP), suspended ones are listed, dead ones are
 * marked failed. Taps are recreated if missing. Returns the number
 * adopted or a negative errno. */
int vmm_adopt_all(struct vmm *m, char *err, size_t errlen);

/* ---- sandboxes ---- */

struct vmm_sandbox_spec {
	const char *id;			/* required, see VMM_ID_MAX */
	const struct vmm_template *tpl;	/* required; copied */
	unsigned mem_mib;		/* 0: manager default */
	unsigned vcpus;			/* 0: manager default */
	unsigned disk_mib;		/* 0: manager default */
	uint64_t idle_pause_ms;		/* 0: manager default */
	uint64_t idle_suspend_ms;	/* 0: manager default */
	uint64_t max_lifetime_ms;	/* 0: manager default */
	int boot;			/* 1: boot, even where a ready
					 * snapshot could be restored */
};

/* Read-only view of a sandbox (valid until its next state change). */
struct vmm_info {
	const char *id;
	enum vmm_state state;
	const char *reason;		/* why failed (or last failure), "" */
	const char *tap;
	struct in_addr guest_ip;
	struct in_addr gateway;
	uint8_t prefix;			/* 30 */
	uint8_t mac[6];			/* guest MAC */
	const char *disk;
	const char *dir;		/* <state_dir>/<id> */
	pid_t pid;			/* VMM process, 0 if none */
	pid_t standby_pid;		/* suspended: the standby VMM, 0 */
	int standby_ready;		/* it has loaded the snapshot */
	unsigned mem_mib, vcpus;
	enum vmm_accel accel;		/* its VMM's (or snapshot's), AUTO: none */
	int resumable;			/* failed, but resume may go on: its
					 * VMM holds the stopped guest (a disk
					 * error), or its snapshot is intact */
	int jailed;			/* its VMM runs in a jail ... */
	uid_t uid;			/* ... as this user and group */
	gid_t gid;
	uint64_t created_ms;		/* wall clock */
	uint64_t last_activity_ms;	/* monotonic clock */
	int busy;			/* an operation is in flight: */
	enum vmm_op op;			/* ... this one */
	int preparing;			/* ... a pause or suspend waiting
					 * for the guest's reclaim (the
					 * guest still runs) */
	const char *ready_key;		/* its disk's base layer is this
					 * ready snapshot's, "" none */
	int from_snapshot;		/* created by restoring it */
	int ram_shared;			/* its RAM is still the snapshot's
					 * pages (copy-on-write) */
	int balloon;			/* its VM has a virtio-balloon with
					 * free page reporting */
	int moving;			/* its files are being copied to
					 * another host (vmm_move_export) */
	int cap_refused;		/* in an operation's callback: it
					 * failed at a cap (vm_max_running,
					 * vm_max_resident): no room came in
					 * time or the suspend that was to
					 * make it failed */
};

void vmm_sandbox_info(const struct vmm_sandbox *sb, struct vmm_info *out);

/* Its disk: the qcow2 layers of its chain, the bytes its own top holds
 * and the bytes of the layers below (frozen, perhaps shared with forks
 * and checkpoints; the template's image not counted). 0, or -1. */
struct vmm_disk_usage {
	unsigned layers;
	uint64_t owned_bytes, shared_bytes;
};
int vmm_sandbox_disk_usage(const struct vmm_sandbox *sb,
    struct vmm_disk_usage *out);

/* The guest agent's socket of a running sandbox, connected (non-blocking,
 * close-on-exec) and checked to be its VMM's (SO_PEERCRED when jailed):
 * the descriptor, or -errno with err (-ENOTSUP: the template has no
 * agent; -EAGAIN: not running). Frames: vmm/proto/agent_proto.h. */
int vmm_agent_connect(struct vmm_sandbox *sb, char *err, size_t errlen);

/* What a jailed sandbox's VMM used, from its cgroup (zeros without). */
struct vmm_usage {
	uint64_t cpu_usec;		/* CPU time, all of its threads */
	uint64_t mem_bytes;		/* memory charged now (RAM file pages
					 * the guest touched, qemu's own) */
	uint64_t throttled;		/* periods its CPU quota held it back */
	uint64_t console_paused;	/* times the console's rate limit
					 * stopped copying it */
};
void vmm_sandbox_usage(const struct vmm_sandbox *sb, struct vmm_usage *u);
const char *vmm_sandbox_id(const struct vmm_sandbox *sb);
enum vmm_state vmm_sandbox_state(const struct vmm_sandbox *sb);
void vmm_sandbox_set_user(struct vmm_sandbox *sb, void *user);
void *vmm_sandbox_user(const struct vmm_sandbox *sb);

/* Operations. Each returns 0 when accepted (cb will run exactly once,
 * never from inside this call) or a negative errno at once: -EEXIST (id
 * taken), -EINVAL, -EBUSY (another operation in flight), -EPERM (not
 * allowed from this state; err says which state), -EUSERS (create,
 * start, resume: cfg.max_running or max_resident reached and no
 * sandbox could be suspended to make room; err names the cap). Asking for an
 * operation that is already in flight joins it: both callers get the
 * result (concurrent wakes share one resume). Asking for the state the
 * sandbox is already in succeeds without doing anything. */
int vmm_sandbox_create(struct vmm *m, const struct vmm_sandbox_spec *spec,
    vmm_done_cb cb, void *arg, struct vmm_sandbox **out, char *err,
    size_t errlen);
int vmm_sandbox_start(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);
int vmm_sandbox_pause(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);
int vmm_sandbox_suspend(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);
int vmm_sandbox_resume(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);
int vmm_sandbox_stop(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);
/* Always accepted: an operation in flight is abandoned (its callers get
 * ok == 0, "deleted"). Kills the VMM, removes the tap, the directory and
 * the pool address. */
int vmm_sandbox_delete(struct vmm_sandbox *sb, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);

/* ---- ready snapshots (ready.c) ---- */

#define VMM_READY_KEY 17		/* 16 hex digits and a NUL */

struct vmm_ready_info {
	unsigned mem_mib, vcpus, disk_mib;
	unsigned build_ms;		/* boot to settled, plus the suspend */
};

/* key names the ready snapshot for template t with this memory, vCPUs
 * and disk (0: the manager's defaults; the disk as a create of it gets
 * it, vmm_disk_effective) on this manager (accelerator, VMM binary). */
void vmm_ready_key(struct vmm *m, const struct vmm_template *t,
    unsigned mem_mib, unsigned vcpus, unsigned disk_mib,
    char key[VMM_READY_KEY]);
/* The disk a sandbox of template t asking for disk_mib (0: the
 * manager's default) gets: that, or for a root overlay the root image's
 * size when it is no larger (a --disk below the image is the image). */
unsigned vmm_disk_effective(const struct vmm *m, const struct vmm_template *t,
    unsigned disk_mib);
/* 0 and *ri when key's snapshot is whole, else -errno. */
int vmm_ready_lookup(const struct vmm *m, const char *key,
    struct vmm_ready_info *ri);
/* Build it in the background: a hidden sandbox of that shape (memory,
 * vCPUs, disk as vmm_ready_key's) boots to the template's settled line
 * and is suspended into <state_dir>/.ready/<key>/. 0 when
 * started (cb runs once, from the loop), 1 when it is there already (no
 * cb), -EBUSY while another build runs, -ENOTSUP for a template that
 * cannot have one (qemu, a root overlay and an agent are needed). key
 * (VMM_READY_KEY bytes, may be NULL) gets its key. */
typedef void (*vmm_ready_cb)(const char *key, int ok, const char *reason,
    uint64_t duration_ms, void *arg);
int vmm_ready_build(struct vmm *m, const struct vmm_template *t,
    unsigned mem_mib, unsigned vcpus, unsigned disk_mib, vmm_ready_cb cb,
    void *arg, char *key, char *err, size_t errlen);
/* 1 while a build runs. */
int vmm_ready_building(const struct vmm *m);
/* Make the ready pool of key (template t, memory, vCPUs, the default
 * disk; t NULL: as given before) hold cfg.ready_pool members, one at a
 * time, in the background. */
void vmm_ready_pool_fill(struct vmm *m, const char *key,
    const struct vmm_template *t, unsigned mem_mib, unsigned vcpus);
/* Ready pool members restored, identified and paused now (all keys). */
unsigned vmm_ready_pool_members(const struct vmm *m);
/* End what the manager runs for itself (ready snapshot builds, pool
 * members) now, and the deletes in flight (their VMM killed and reaped,
 * their tap, group and files removed): before vmm_free at shutdown, so
 * nothing of it outlives the application. */
void vmm_ready_drain(struct vmm *m);

/* ---- fork ---- */

#define VMM_FORK_MAX 100
/* The source's side ended: ok when its state was captured (pause_ms is
 * how long the operation took, the source stopped for most of it);
 * forks[0..n-1] are the new sandboxes, being created (their creates end
 * in fork_cb, one each). */
typedef void (*vmm_fork_cb)(struct vmm_sandbox *src, int ok,
    const char *reason, uint64_t pause_ms, struct vmm_sandbox **forks,
    size_t n, void *arg);
/* Fork a running or paused sandbox into n new ones (ids), each with its
 * own disk layer over the captured one, the captured memory and its own
 * identity. 0 when accepted (cb once, from the loop), or -errno: -EINVAL
 * (ids), -EEXIST, -EBUSY, -EPERM (its state), -ENOTSUP. */
int vmm_sandbox_fork(struct vmm_sandbox *src, const char *const *ids,
    size_t n, vmm_fork_cb cb, void *arg, vmm_done_cb fork_cb, void *fork_arg,
    char *err, size_t errlen);

/* ---- checkpoints ----
 * A checkpoint is a fork's capture kept under a name: the frozen disk
 * layer and the RAM and device state, in <state>/.checkpoints/<id>/.
 * It goes with vmm_checkpoint_rm or with its sandbox. */

struct vmm_checkpoint {
	char name[VMM_ID_MAX + 1];
	uint64_t created_ms;		/* wall clock */
	uint64_t bytes;			/* its layer and state on disk */
	unsigned mem_mib, vcpus, disk_mib;
};
/* Take one of a running or paused sandbox (it pauses as for a fork).
 * 0 when accepted (cb once, from the loop, op VMM_OP_CHECKPOINT), or
 * -errno: -EINVAL (name), -EEXIST, -EDQUOT (cfg.max_checkpoints), -EBUSY,
 * -EPERM (its state), -ENOTSUP. */
int vmm_checkpoint_take(struct vmm_sandbox *sb, const char *name,
    vmm_done_cb cb, void *arg, char *err, size_t errlen);
/* The checkpoints of sandbox id, oldest first, at most max of them:
 * how many there are (may exceed max), or -errno. */
int vmm_checkpoint_list(struct vmm *m, const char *id,
    struct vmm_checkpoint *out, size_t max, char *err, size_t errlen);
/* Checkpoint name of sandbox id: 0, -ENOENT, or -EINVAL. */
int vmm_checkpoint_get(struct vmm *m, const char *id, const char *name,
    struct vmm_checkpoint *out, char *err, size_t errlen);
/* 0, -ENOENT, or -errno. The layers it alone kept go. */
int vmm_checkpoint_rm(struct vmm *m, const char *id, const char *name,
    char *err, size_t errlen);
/* Put the sandbox back to the checkpoint, in place: its VMM (if any) is
 * stopped, its disk becomes a new layer over the checkpoint's, its
 * memory and devices the checkpoint's, then it runs (same id, address
 * and MAC). 0 when accepted (cb once, op VMM_OP_RESTORE), or -errno:
 * -ENOENT (no such checkpoint), -EBUSY, -EPERM (creating). */
int vmm_checkpoint_restore(struct vmm_sandbox *sb, const char *name,
    vmm_done_cb cb, void *arg, char *err, size_t errlen);
/* New sandboxes (ids) from a checkpoint of src, as forks are made from
 * a capture; src is not touched. 0 (each create ends in cb), or -errno
 * with nothing made. With a jailed qemu the checkpoint's stream is split
 * first (its RAM an image the new sandboxes share) and they are made
 * after it, from the loop: one that cannot be made then is said in
 * src's reason (no cb for it). */
int vmm_checkpoint_fork(struct vmm_sandbox *src, const char *name,
    const char *const *ids, size_t n, vmm_done_cb cb, void *arg,
    char *err, size_t errlen);

/* ---- moving a suspended sandbox to another host (export.c) ----
 * The source lists the files of a suspended sandbox (its own: the
 * disk's top, the snapshot, the RAM file, sandbox.conf; and the ready
 * snapshot's frozen layer its disk stands on, which the target may
 * already hold byte for byte); the caller copies them into a directory
 * on the target, which checks every byte and adopts the sandbox from
 * there, suspended. Files are named by the names below, never by paths:
 * the target decides where each goes. The template version the sandbox
 * was made from is listed too (tpl.json, its template.json, and
 * tpl.kernel, tpl.initrd, tpl.rootfs): a target that lacks that version
 * asks for them, and its caller makes them a template directory of its
 * own before the adoption (libvmm neither asks for nor places those). */

#define VMM_MOVE_FILES 10
#define VMM_MOVE_NAME 16
#define VMM_MOVE_PATH 4096

struct vmm_move_file {
	char name[VMM_MOVE_NAME];	/* "sandbox.conf", "disk.qcow2" or
					 * "disk.raw", "snap/state", "mem",
					 * "base.qcow2"; the template's:
					 * "tpl.json", "tpl.kernel",
					 * "tpl.initrd", "tpl.rootfs" */
	uint64_t size;
	char sha256[65];		/* lower-case hex; "" not computed */
	int shared;			/* 1: not its own: base.qcow2, the
					 * ready snapshot ready_key's frozen
					 * layer */
	char path[VMM_MOVE_PATH];	/* the source's file (export only) */
	int verified;			/* adopt: the caller hashed these
					 * bytes as it wrote them and found
					 * sha256: not read again (its type
					 * and size still checked) */
};

struct vmm_move {
	char id[VMM_ID_MAX + 1];
	char tpl[64];			/* its template's name */
	char tpl_sha256[65];		/* ... and version: the sha256 of its
					 * kernel's, initramfs's and image's
					 * (vmm_move_template_id) */
	char ready_key[VMM_READY_KEY];	/* its disk's base: "" the image */
	char base_id[65];		/* ... that base's identity: the
					 * sha256 of the ready snapshot's
					 * layer as its host made it (which a
					 * host that received it keeps under
					 * that name, its header rewritten:
					 * base.qcow2's own sha256 may then
					 * differ); "" none */
	unsigned mem_mib, vcpus, disk_mib;
	size_t n;
	struct vmm_move_file f[VMM_MOVE_FILES];
};

/* List suspended sandbox sb's files into mv (sizes; hash: their sha256
 * too, reading every byte: the caller may hash as it sends instead) and
 * mark it moving: no operation but a delete is accepted (-EBUSY), its
 * standby VMM is stopped and none is started, until vmm_move_end (the
 * move failed: it stays here) or its delete (the target has it). 0, or
 * -errno: -EPERM (not suspended), -EBUSY, -ENOTSUP (a fork's layers:
 * vmm_move_flatten first). */
int vmm_move_export(struct vmm_sandbox *sb, struct vmm_move *mv, int hash,
    char *err, size_t errlen);
void vmm_move_end(struct vmm_sandbox *sb);
/* A suspended sandbox that stands on a fork's layers (a fork, or the
 * source of one) is flattened before it moves: its top rebased (qemu-img
 * rebase, which copies into it what the layers between held) onto the
 * ready snapshot's layer or moved base under them, else the template's
 * image; then it moves as any other. It is marked moving from the start
 * (wakes wait); done(arg, 1, NULL) then, and the caller's
 * vmm_move_export takes it; done(arg, 0, why) and the caller's
 * vmm_move_end. 0: nothing to flatten (no done); 1: started; -errno. */
int vmm_move_flatten(struct vmm_sandbox *sb,
    void (*done)(void *arg, int ok, const char *why), void *arg, char *err,
    size_t errlen);
/* A template version's identity by content: the sha256 of its kernel's,
 * initramfs's and root image's sha256s (hex), each of its sparse form
 * (a mostly empty 4 GiB image: its data only). Each file is read once
 * per process (kept by device, inode, size and time): blocking, about a
 * second per GiB of data, the first time. 0, or -errno with err. */
int vmm_move_template_id(const struct vmm_template *t, char hex[65],
    char *err, size_t errlen);
/* A ready snapshot's frozen layer (key; NULL: each there) hashed now,
 * as a move names it (kept for the process): so that neither a source's
 * nor a target's first move reads it (a second on a busy host). 0, or
 * -errno. Blocking. */
int vmm_move_prehash_ready(struct vmm *m, const char *key);
/* sha256 of a whole file (opened without following a link) as hex, and
 * its size. 0, or -errno with err. Reads every byte: blocking. */
int vmm_move_sha256(const char *path, uint64_t *size, char hex[65],
    char *err, size_t errlen);
/*
 * The sparse form. A RAM file (mem) and a raw disk (disk.raw) are mostly
 * zeros, holes or not: they go as their sparse form, and their sha256 in
 * a manifest is the sparse form's. The form is a function of the file's
 * bytes alone (not of where its holes are): the file cut in
 * VMM_SPARSE_WIN windows, each run of VMM_SPARSE_BLK blocks within one
 * window that are not all zeros a record: its offset and length (two
 * big-endian 64-bit numbers), then its bytes. Records come in order,
 * never overlap, and the file's size is the manifest's.
 */
#define VMM_SPARSE_WIN	(1u << 20)
#define VMM_SPARSE_BLK	4096u
#define VMM_SPARSE_HDR	16u
/* Whether the file of that name goes as its sparse form. */
int vmm_move_sparse(const char *name);
/* The index of the file named name in mv, -1 if none. */
int vmm_move_index(const struct vmm_move *mv, const char *name);
/* Which of the template's files a move's file name is: 0 tpl.json,
 * 1 tpl.kernel, 2 tpl.initrd, 3 tpl.rootfs; -1 none. */
int vmm_move_template_file(const char *name);
#define VMM_MOVE_TPL_JSON_MAX	(64 * 1024)
/* The records of the next window of fd (size bytes) holding data, from
 * *pos (0 at the start; moved past it), each given to emit as its head
 * then its bytes (pointers into buf, VMM_SPARSE_WIN bytes the caller
 * owns). Holes are skipped unread (SEEK_DATA). 1: a window done (maybe
 * no records), 0: the end, -errno with err. */
typedef void vmm_sparse_emit_fn(void *arg, const void *p, size_t len);
int vmm_sparse_next(int fd, uint64_t size, uint64_t *pos, unsigned char *buf,
    vmm_sparse_emit_fn *emit, void *arg, char *err, size_t errlen);
/* ... and back: a sparse form arriving in pieces of any length, written
 * into fd (new, empty) as the file it came from, every record checked
 * (in order, in bounds, block-aligned, not empty). vmm_sparse_write: 0,
 * or -errno with err (-EINVAL: not a sparse form of size bytes);
 * vmm_sparse_finish: the form ended whole, the file made size bytes. */
struct vmm_sparse_wr {
	int fd;
	uint64_t size;
	uint64_t off, left;		/* the record being written */
	uint64_t end;			/* where the last one ended */
	unsigned char hdr[VMM_SPARSE_HDR];
	size_t hlen;
};
void vmm_sparse_wr_init(struct vmm_sparse_wr *w, int fd, uint64_t size);
int vmm_sparse_write(struct vmm_sparse_wr *w, const void *p, size_t len,
    char *err, size_t errlen);
int vmm_sparse_finish(struct vmm_sparse_wr *w, char *err, size_t errlen);

/* mv as a JSON object (allocated, the caller frees), NULL without
 * memory; and back, with every field checked (names from the list
 * above, once each; sizes; hex; the id, the key): 0, or -EINVAL with
 * err. The text is a peer's: at most len bytes are read. */
char *vmm_move_json(const struct vmm_move *mv);
int vmm_move_parse(const char *text, size_t len, struct vmm_move *mv,
    char *err, size_t errlen);
/* Which of mv's files this manager must receive: need[i] is 0 for a
 * shared file whose bytes it already holds (its own ready snapshot of
 * that key, the same sha256) and for the template's files (the
 * caller's to ask for), else 1. 0, or -errno. */
int vmm_move_needs(struct vmm *m, const struct vmm_move *mv,
    int need[VMM_MOVE_FILES], char *err, size_t errlen);
/* Adopt the sandbox mv describes from dir (the files received, at their
 * names under it, nothing else there), suspended, as template tpl (this
 * host's version of it: the same name, command line, agent and kind of
 * disk, and its files' bytes: vmm_move_template_id). Everything is
 * checked before anything is touched: the files
 * (regular, sizes, sha256), sandbox.conf's fields against mv, tpl and
 * this manager (its caps, its accelerator, its address pool: the guest
 * keeps its address, which must be free in this host's pool), the id
 * free here. Then the files are moved (renamed: dir must be on the
 * state directory's file system) into place, a base received goes to
 * .layers (its disk then a chain of layers), and the sandbox is listed.
 * 0 and *out, or -errno with err and nothing of dir's moved. */
int vmm_move_adopt(struct vmm *m, const char *dir, const struct vmm_move *mv,
    const struct vmm_template *tpl, struct vmm_sandbox **out, char *err,
    size_t errlen);
/* A qcow2 file's backing file name, rewritten in place (its header's
 * first cluster must have room): 0, or -errno with err. dry: only
 * check that it can be. Exposed for tests. */
int vmm_qcow2_set_backing(const char *path, const char *name, int dry,
    char *err, size_t errlen);

/* ---- idle policy ---- */

/* The proxy saw traffic (bytes, open connections, WebSockets, SSE). */
void vmm_activity(struct vmm_sandbox *sb);
/* Something runs in the guest for a client (an exec): while holds are
 * taken (on 1) and not given back (on 0), the idle policy neither
 * pauses nor suspends it; max_lifetime still applies. */
void vmm_activity_hold(struct vmm_sandbox *sb, int on);
/* Per-sandbox limits; VMM_NEVER disables one, 0 restores the default. */
void vmm_sandbox_set_idle(struct vmm_sandbox *sb, uint64_t idle_pause_ms,
    uint64_t idle_suspend_ms, uint64_t max_lifetime_ms);

/* ---- capacity (capacity.c) ---- */

/* Change the standby budget and the caps of a running manager (a
 * configuration reload): standbys are started or stopped at once to fit;
 * lowered caps apply to the next create or wake (nothing is suspended
 * to meet them now). */
void vmm_set_limits(struct vmm *m, unsigned standby_max,
    uint64_t standby_mem_bytes, unsigned max_running, unsigned max_resident);

/* What the host holds, by state: creating counts as running, hidden
 * sandboxes (ready snapshot builds, pool members) are not counted. */
enum vmm_cap_kind {
	VMM_CAP_RUNNING = 0,
	VMM_CAP_PAUSED,
	VMM_CAP_SUSPENDED,
	VMM_CAP_STOPPED,
	VMM_CAP_FAILED,
	VMM_CAP_KINDS
};
/* What one more sandbox of the default size can be. */
enum vmm_cap_more_kind {
	VMM_MORE_RUNNING = 0,
	VMM_MORE_PAUSED,
	VMM_MORE_SUSPENDED,
	VMM_MORE_KINDS
};
const char *vmm_cap_kind_name(int kind);	/* "running", ... "failed" */

struct vmm_capacity {
	uint64_t at_ms;			/* wall clock of the sample */
	uint64_t interval_ms;		/* since the sample before (the CPU
					 * rates' interval); 0: the first */
	struct {
		unsigned n;
		uint64_t mem_bytes;	/* their VMMs' PSS; suspended: their
					 * standbys' */
		uint64_t disk_bytes;	/* allocated blocks of their dirs */
		double cpu;		/* cores used over the interval */
	} st[VMM_CAP_KINDS];
	/* standby VMMs: how many, their PSS (measured ones), the budget */
	unsigned standby_n, standby_max;
	uint64_t standby_bytes, standby_budget;	/* budget 0: none */
	/* the host */
	uint64_t mem_total, mem_available, mem_reserve;	/* /proc/meminfo */
	uint64_t disk_free;		/* the state dir's file system */
	unsigned cores;
	double cpu_idle;		/* cores idle over the interval */
	unsigned addresses_free;	/* /30 blocks left in the pool */
	/* the cost of one more sandbox, measured means (or nominal: the
	 * default size, when there is none of that state to measure) */
	uint64_t cost_mem[2];		/* running, paused: PSS */
	uint64_t cost_disk;		/* suspended: its directory */
	double cost_cpu;		/* running: cores */
	int nominal_mem[2], nominal_disk, nominal_cpu;
	/* how many more the host can take, and what bounds each figure:
	 * "memory", "cpu", "disk", "vm_max_running", "vm_max_resident",
	 * "addresses" */
	unsigned more[VMM_MORE_KINDS];
	const char *more_by[VMM_MORE_KINDS];
	unsigned max_running, max_resident;	/* the caps, 0: none */
	unsigned running, resident;	/* counted against them now */
};
/* The latest sample (taken every 30 s and soon after a state change;
 * the first call takes one if there is none yet). */
void vmm_capacity(struct vmm *m, struct vmm_capacity *out);
/* A suspended sandbox's standby's PSS, once measured; 0 otherwise. */
uint64_t vmm_sandbox_standby_bytes(const struct vmm_sandbox *sb);

/* Capacity's arithmetic, pure (exposed for tests). */
struct vmm_evict_cand {
	uint64_t last_activity_ms;
	enum vmm_state state;		/* running or paused; others never */
	int busy, held, hidden;
	int skip;			/* the one making room, or chosen */
};
/* The candidate to suspend to make room: the least recently active
 * running one (or paused too, for resident), not busy, held or hidden;
 * -1: none. */
int vmm_evict_pick(const struct vmm_evict_cand *c, size_t n, int resident);

/* The others (not the one that wants to run) by cap: running and
 * resident (running or paused) now, their VMMs there, and of them
 * going_*: a suspend, stop or delete in flight, its VMM still holding
 * its memory; pending_*: operations admitted that have no VMM yet (a
 * create's mkfs, a wake waiting for room), of them ahead_* admitted
 * before this one (the room that comes is theirs first). */
struct vmm_cap_count {
	unsigned running, resident;
	unsigned going_running, going_resident;
	unsigned pending_running, pending_resident;
	unsigned ahead_running, ahead_resident;
};
#define VMM_CAP_ROOM	0		/* one more fits now (beside those
					 * there and those ahead) */
#define VMM_CAP_WAIT	1		/* ... once those going have gone:
					 * they make room for all pending */
#define VMM_CAP_EVICT	2		/* one more must go (*resident_cap:
					 * 1 for vm_max_resident, 0 for
					 * vm_max_running) */
int vmm_cap_decide(const struct vmm_cap_count *n, unsigned max_running,
    unsigned max_resident, int *resident_cap);

struct vmm_standby_cand {
	uint64_t last_activity_ms;
	uint64_t bytes;			/* its standby's PSS; 0: not known */
	int holds;			/* it has a standby now */
	int fixed;			/* busy: it keeps what it has */
	int want;			/* out: it should have one */
};
/* Which suspended sandboxes should hold a standby: the most recently
 * active first, within max and budget (bytes; 0: no limit). A standby
 * not measured yet, and a new one, cost estimate; while no standby was
 * ever measured (estimate 0) only one unmeasured one is admitted, to
 * learn the cost. */
void vmm_standby_plan(struct vmm_standby_cand *c, size_t n, unsigned max,
    uint64_t budget, uint64_t estimate);

struct vmm_cap_input {
	uint64_t mem_free;		/* MemAvailable less the reserve */
	uint64_t disk_free;
	double cpu_idle;		/* cores */
	uint64_t cost_mem[2];		/* running, paused (> 0) */
	uint64_t cost_disk;		/* suspended (> 0) */
	double cost_cpu;		/* running; 0: CPU does not bound */
	unsigned running, resident;	/* counted against the caps now */
	unsigned max_running, max_resident;	/* 0: none */
	unsigned addresses_free;
};
/* How many more sandboxes each state can take (more[VMM_MORE_*]) and
 * what bounds each (by[], static strings). */
void vmm_cap_estimate(const struct vmm_cap_input *in,
    unsigned more[VMM_MORE_KINDS], const char *by[VMM_MORE_KINDS]);
/* sum / n, or nominal (and *is_nominal = 1) when n is 0. */
uint64_t vmm_cap_mean(uint64_t sum, unsigned n, uint64_t nominal,
    int *is_nominal);

/* ---- pieces exposed for tests and tools ---- */

/* KVM probe: 1 when a guest reaches 64-bit long mode with paging and
 * does port I/O within timeout_ms, 0 when not (why says what happened),
 * never longer than about timeout_ms. */
int vmm_kvm_probe(unsigned timeout_ms, char *why, size_t whylen);

/* /30 pool: blocks of 4 addresses, block i = network, gw, guest, bcast. */
struct vmm_pool;
struct vmm_pool *vmm_pool_new(struct in_addr base, uint8_t plen, char *err,
    size_t errlen);
void vmm_pool_free(struct vmm_pool *p);
/* Lowest free block: its index; gw and guest set. -ENOSPC when full. */
int vmm_pool_alloc(struct vmm_pool *p, struct in_addr *gw,
    struct in_addr *guest);
/* Claim the block holding guest (re-adoption). -EEXIST, -ERANGE. */
int vmm_pool_claim(struct vmm_pool *p, struct in_addr guest);
void vmm_pool_release(struct vmm_pool *p, struct in_addr guest);
size_t vmm_pool_size(const struct vmm_pool *p);
size_t vmm_pool_used(const struct vmm_pool *p);

int vmm_id_valid(const char *id);

/* ---- backend interface (vmm/backend.h has the table) ---- */
struct vmm_backend;
const struct vmm_backend *vmm_backend_lookup(const char *name);

#endif
