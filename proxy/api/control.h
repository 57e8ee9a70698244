/*
 * control.h — berth's control API server: HTTP/1.1 + JSON under /v1/ on
 * a unix socket (<state>/control.sock, mode 0600: whoever can open it is
 * admin). Runs on the parent's libevent loop; every change goes through
 * the px_store and is followed by hooks->routes_changed so the parent can
 * push a new route table to the workers.
 *
 * An optional TCP listener (TLS, or plain for loopback tests) requires
 * "Authorization: Bearer <token>" and applies token scoping (token.h).
 *
 * Resources (all bodies JSON; errors are
 * {"error":{"status","code","field"?,"message"}}; 401 missing or unknown
 * token, 403 outside the token's scope or the global policy). Lists take
 * ?limit=1..1000 (default 100) and ?after=<cursor> and answer "next": the
 * cursor of the following page, or null.
 *   GET    /v1/health                       {"status":"ok"} and the
 *          hooks' fields (berthd: egress, vms, template, capacity)
 *   GET    /v1/sandboxes                    {"sandboxes":[sandbox...],"next"}
 *   POST   /v1/sandboxes {"id","address"?,"egress_mode"?,
 *          "memory_mib"?,"vcpus"?,"disk_mib"?,"template"?,
 *          "idle_pause"?,"idle_suspend"?,"max_lifetime"?}
 *                                           201 sandbox + "token","token_id".
 *                                           Without "address" a microVM
 *                                           (state "creating" until it
 *                                           runs); the sizes are checked
 *                                           against berth.conf's vm_max_*
 *                                           (400 naming the field and the
 *                                           limit); durations are "90s",
 *                                           "10m", "2h", "1d" or "never"
 *   GET    /v1/sandboxes/{id}               sandbox + "ports":[port...]
 *   PATCH  /v1/sandboxes/{id} {"idle_pause"?,"idle_suspend"?,
 *          "max_lifetime"?}                 200 sandbox; null returns a
 *                                           limit to berth.conf's; 409 for
 *                                           an external sandbox; event "set"
 *   DELETE /v1/sandboxes/{id}               204; ports, rules, tokens and
 *                                           events go too
 *   POST   /v1/sandboxes/{id}/pause|suspend|resume|start|stop|restart
 *                                           200 sandbox once the VM is
 *                                           there; 409 for a sandbox that
 *                                           is not VM-backed, for resume of
 *                                           a failed or stopped one (start
 *                                           it) and start of a paused or
 *                                           suspended one (resume it); 503
 *                                           when the operation fails. start
 *                                           boots a stopped or failed
 *                                           sandbox from its template,
 *                                           keeping its disk; restart is
 *                                           stop (unless stopped or failed)
 *                                           then start. Each is an event
 *   POST   /v1/sandboxes/{id}/exec {"argv":[...],"env"?:{NAME:value},
 *          "cwd"?,"timeout"?,"stdin"?}  runs argv in the guest (its agent)
 *                                           and answers once it ended: 200
 *                                           {"exit_code" (null when killed),
 *                                           "signal" (null when it exited),
 *                                           "timed_out","stdout","stderr",
 *                                           "stdout_encoding","stderr_encoding"
 *                                           ("utf-8", or "base64" for other
 *                                           bytes),"truncated" (over 4 MiB a
 *                                           stream: the rest dropped),
 *                                           "wake_ms" (0: it was running),
 *                                           "duration_ms"}. timeout: a
 *                                           duration (default 10m, at most
 *                                           24h); stdin: base64. A paused or
 *                                           suspended sandbox is woken first
 *                                           (one wake for concurrent execs);
 *                                           execs run side by side, at most
 *                                           vm_max_procs (429 past it).
 *                                           409 not VM-backed, stopped,
 *                                           failed or no agent in its
 *                                           template; 502 the agent failed;
 *                                           503 the wake failed; 504 the
 *                                           agent did not answer. With
 *                                           "detach": true (and "ring",
 *                                           "keep_awake"): 201 {"process",
 *                                           "pid","state"} at once
 *   GET    /v1/sandboxes/{id}/processes     {"processes":[process...]}
 *   GET    /v1/sandboxes/{id}/processes/{n} process; 404 none
 *   GET    .../processes/{n}/logs?offset=O  {"output","output_encoding",
 *                                           "first","total","offset",
 *                                           "next_offset","lost","state",
 *                                           "exit_code","signal"};
 *                                           &follow=1: the output streamed
 *                                           (chunked) to its end
 *   POST   .../processes/{n}/kill {"signal"} {"process","signalled"}; 409
 *                                           ended, 404 none
 *   POST   .../processes/{n}/wait           {"process","state","exit_code",
 *                                           "signal"} when it has ended
 *   GET    /v1/templates                    {"templates":[template...],"next"}
 *   POST   /v1/templates {"name","dir"}     201 template; 400 when the
 *                                           directory does not load as a
 *                                           template (the message says why)
 *   GET    /v1/templates/{name}             template
 *   DELETE /v1/templates/{name}             204; 409 for "default" and
 *                                           while a sandbox uses it
 *   GET    /v1/sandboxes/{id}/events        {"events":[event...],"next"}
 *   GET    /v1/sandboxes/{id}/egress        {"sandbox","mode","effective_mode",
 *                                           "rules":[rule...]}
 *   PUT    /v1/sandboxes/{id}/egress {"mode"?,"rules":[{"action","rule",
 *          "ttl"?}]}                        replaces all rules (with only
 *                                           "mode": sets the mode); 200
 *   POST   /v1/sandboxes/{id}/egress {"action","rule","ttl"?}
 *                                           201 added / 200 updated, rule
 *   DELETE /v1/sandboxes/{id}/egress        204, back to the policy default
 *   DELETE /v1/sandboxes/{id}/egress/{action}/{rule}  204 (rule
 *                                           percent-encoded)
 *   GET    /v1/sandboxes/{id}/egress/log    {"sandbox","available","entries"}
 *   GET    /v1/policy                       policy
 *   PUT    /v1/policy {"default_mode"?,"max_mode"?,"deny"?,"allow"?,
 *          "permit"?,"max_rules"?,"conn_limit"?,"new_conn_rate"?}
 *                                           200 policy (admin only); a
 *                                           limit set to null follows
 *                                           berth.conf again
 *   GET    /v1/tokens                       {"tokens":[token...],"next"}
 *   POST   /v1/tokens {"admin":true}|{"sandbox"} + "name"?
 *                                           201 token + "token" (the secret)
 *   GET    /v1/tokens/{id}                  token
 *   POST   /v1/tokens/{id}/rotate           200 token + "token"
 *   DELETE /v1/tokens/{id}                  204
 *   GET    /v1/sandboxes/{id}/ports         {"ports":[port...],"next"}
 *   GET    /v1/sandboxes/{id}/ports/{port}  port
 *   PUT    /v1/sandboxes/{id}/ports/{port}  201 created / 200 updated, port;
 *          body optional {"host_header","visibility","host"}: a field left
 *          out keeps its current value (defaults preserve / public / none
 *          on create), "host": null or "" removes the custom host. A
 *          custom host is a DNS name: no IP address, no localhost name,
 *          under the domain only <name>-<id>.<domain>, held by no other
 *          sandbox, and for a sandbox token under a custom_host_suffix;
 *          else 400 naming the rule
 *   DELETE /v1/sandboxes/{id}/ports/{port}  204
 *   GET    /v1/ports                        {"ports":[port...]}
 *   GET    /v1/fleet/hosts                  fleet mode: {"self","etcd","hosts":[...]}
 *   GET    /v1/fleet/sandboxes              fleet mode: {"self","sandboxes":[
 *                                           {"id","host","state","host_up",
 *                                           "ports"}]} over every host
 *   GET    /metrics                         Prometheus text
 * sandbox = {id, address, external, state, created, egress_mode} and,
 *           VM-backed: memory_mib, vcpus, disk_mib, template,
 *           idle_pause, idle_suspend, max_lifetime (null: berth.conf's),
 *           effective_idle_pause, effective_idle_suspend,
 *           effective_max_lifetime (what applies: a duration or "never")
 * template = {name, dir, builtin, created, sandboxes (how many use it)}
 * event   = {seq, time_ms, operation, result, reason, duration_ms}
 * rule    = {action, rule, expires}   (expires: unix seconds or null)
 * policy  = {default_mode, max_mode, deny:[rule text], allow:[rule text],
 *           permit:[CIDR], max_rules, conn_limit, new_conn_rate}:
 *           max_mode caps every sandbox's mode (closed < allowlist <
 *           open); a sandbox's allow rule may not overlap a deny rule and,
 *           when allow is not empty, must be covered by one of its rules;
 *           an allow rule inside a private or other always-denied range
 *           must be covered by a permit (which opens it in the table);
 *           a sandbox holds at most max_rules egress rules (one more is
 *           403, naming the limit; what is stored stays); conn_limit caps
 *           its concurrent connections and new_conn_rate its new ones per
 *           second (0: no limit; over is a reset / ICMP admin-prohibited
 *           and a denial-log entry). Limits not set here come from
 *           berth.conf (egress_max_rules 256, the others off)
 * token   = {id, admin, sandbox, name, created}
 * port    = {sandbox, port, url, urls, host_header, visibility, host, created}
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CONTROL_H
#define BERTH_CONTROL_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evbuffer;
struct px_store;
struct px_control;
struct px_config;
struct json_t;

#define PX_CONTROL_MAX_BODY	(64 * 1024)	/* larger: 413 */
#define PX_VM_NEVER		UINT64_MAX	/* an idle limit that never fires */

/* What a new VM-backed sandbox asks for (POST /v1/sandboxes). */
#define PX_FORK_MAX 100		/* new sandboxes per fork call */
#define PX_CHECKPOINTS_MAX 256	/* listed per sandbox */

struct px_checkpoint {
	char name[41];			/* PX_SANDBOX_ID_MAX + 1 */
	int64_t created;		/* Unix seconds */
	uint64_t bytes;			/* its disk layer and state on disk */
};

struct px_vm_spec {
	const char *template_name;	/* "default" or a registered name */
	const char *template_dir;	/* NULL: the built-in default */
	unsigned mem_mib, vcpus, disk_mib;	/* resolved: never 0 */
	/* 0: berth.conf's, PX_VM_NEVER: never, else ms */
	uint64_t idle_pause_ms, idle_suspend_ms, max_lifetime_ms;
	int boot;			/* boot, not the ready snapshot */
};

/* One command for a sandbox's guest agent (POST .../exec), checked. */
/* A template built from an image (issue 31): where from, and how. */
#define PX_TPL_BUILD_ARGS	64	/* --build-arg, at most */
struct px_tpl_source {
	const char *from;		/* "dockerfile" or "image" */
	const char *file;		/* the Dockerfile in the context, or
					 * NULL: "Dockerfile" */
	const char *const *build_args;	/* "K=V", nargs of them */
	int nargs;
};

struct px_exec_req {
	char *const *argv;		/* argc >= 1 strings, then NULL */
	int argc;
	char *const *env;		/* "NAME=value", envc of them */
	int envc;
	const char *cwd;		/* NULL: the agent's default */
	uint64_t timeout_ms;		/* > 0 */
	const unsigned char *stdin_data;	/* then EOF; may be empty */
	size_t stdin_len;
	const char *user;		/* NULL: root */
	int tty;			/* on a pty, rows x cols (0: none) */
	int rows, cols;
	/* What to do: run argv, or (streamed only) write or read the
	 * file path with mode (PUT: body to the guest; GET: to the client);
	 * list the detached processes, read one's output (from offset,
	 * following it when follow), or signal it. */
	enum { PX_EXEC_RUN, PX_FILE_PUT, PX_FILE_GET, PX_PROC_LIST,
	    PX_PROC_LOGS, PX_PROC_SIGNAL, PX_FILE_LIST, PX_FILE_MKDIR,
	    PX_FILE_REMOVE, PX_FILE_MOVE, PX_FILE_WATCH, PX_PROC_ATTACH } op;
	const char *path;
	unsigned mode;
	/* PX_FILE_GET: from offset (below), at most length bytes
	 * (UINT64_MAX: to the end); PX_FILE_LIST: at most max_entries
	 * (result "truncated" past them); PX_FILE_MOVE: path to to;
	 * recursive (remove, watch), parents (mkdir), overwrite (move) */
	uint64_t length;
	uint32_t max_entries;
	const char *to;
	int recursive, parents, overwrite;
	/* PX_EXEC_RUN detached: its output kept in a ring of this many
	 * bytes (0: not detached); keep_awake: it holds the sandbox awake */
	uint32_t ring;
	int keep_awake;
	/* PX_PROC_ATTACH: a client of the process's terminal (rows x cols
	 * its size, 0: none), its ring replayed from offset; input 'I'
	 * (empty: detach) and 'W' as for a streamed exec.
	 * PX_PROC_*: the process; where its output is read from; follow it
	 * to its end; discard: the output is not wanted (waiting for the
	 * end); the signal to send */
	uint32_t proc;
	uint64_t offset;
	int follow, discard, signo;
	/* who asked: the API token's id (its jobs are counted together:
	 * exec_max_per_token), NULL or "" for the unix socket */
	const char *token_id;
	/* berthd's own command before its sandbox sleeps (the guest
	 * dropping its page cache): it runs while the pause or suspend
	 * waits for it, where another command would wait for the pause
	 * and wake the sandbox after it */
	int before_sleep;
};

/* A directory's entry, as the guest agent lists it (PX_FILE_LIST). */
struct px_dirent {
	int type;		/* helper.h HM_FT_*: file, dir, link, ... */
	unsigned mode;		/* permission bits */
	uint64_t size;
	int64_t mtime_ms;
	size_t namelen;		/* 1..255; not UTF-8 checked */
	unsigned char name[256];
};

/* A watch's event (PX_FILE_WATCH): helper.h HM_EV_*. */
struct px_watch_event {
	int event;
	int dir;
	uint32_t cookie;
	const char *path;	/* absolute; not UTF-8 checked */
	size_t pathlen;
};

/* A detached process, as the guest agent lists it. */
struct px_proc_info {
	uint32_t proc;
	int pid;
	int state;		/* 0 running, 1 exited (code), 2 signaled */
	int code;
	int keep;
	int64_t start_ms;	/* the guest's clock */
	uint64_t total;		/* bytes of output so far */
	char cmd[256];
};

struct px_exec_result;

/*
 * A streamed exec or file transfer: the caller's side. start: the
 * command (or transfer) begins now, after wake_ms of waking; output:
 * bytes the guest sent (type 'O' stdout or file data, 'R' stderr);
 * done: the end as for a buffered exec (out/err empty), exactly once,
 * after which the stream handle is gone; drained: what was queued
 * toward the guest (exec_input) has been written, send more.
 */
struct px_exec_sink {
	void (*start)(void *arg, int64_t wake_ms);
	void (*output)(void *arg, int type, const unsigned char *p,
	    size_t len);
	void (*done)(void *arg, const struct px_exec_result *res);
	void (*drained)(void *arg);
	/* PX_FILE_WATCH: one event (may be NULL otherwise) */
	void (*event)(void *arg, const struct px_watch_event *ev);
	void *arg;
};
struct px_exec_stream;

/* How it ended: status 200 with the command's end, or an API error
 * status (404, 409, 502, 503, 504) and message. Pointers are valid only
 * during the done callback. */
struct px_exec_result {
	int status;
	const char *message;
	const char *code;		/* the error's code when not the
					 * status's ("capacity": a wake a cap
					 * refused), else NULL */
	int exited, exit_code, signal, timed_out, truncated;
	const unsigned char *out, *err;
	size_t outlen, errlen;
	int64_t wake_ms, duration_ms;
	/* a detached start: its process number and pid (proc 0: none) */
	uint32_t proc;
	int pid;
	/* PX_PROC_LIST: what the agent keeps */
	const struct px_proc_info *procs;
	size_t nprocs;
	/* PX_PROC_LOGS: what the ring held [first, total) and the
	 * process's state (px_proc_info's), the last the agent said */
	int ring_known;
	uint64_t ring_first, ring_total;
	int proc_state, proc_code;
	/* PX_FILE_LIST: the entries; truncated (above) when there were
	 * more than max_entries */
	const struct px_dirent *entries;
	size_t nentries;
};

struct px_control_hooks {
	const char *domain;		/* e.g. "berth.localhost"; copied */
	unsigned https_port;		/* for URLs; ":443" is omitted */
	/* After any successful change to sandboxes or ports. May be NULL. */
	void (*routes_changed)(void *arg);
	/* Appends Prometheus text for GET /metrics. May be NULL. */
	void (*metrics)(struct evbuffer *out, void *arg);
	/*
	 * Starts pausing, suspending, resuming, starting, stopping or
	 * restarting a VM-backed sandbox (op "pause", "suspend", "resume",
	 * "start", "stop", "restart"). Returns 0 when started: then
	 * done(done_arg, ok, reason) is called exactly once, later, from the
	 * event loop (ok 1, 0, or -1 when a cap refused it after it waited
	 * for room: 503 "capacity"), and the API answers the request then.
	 * -1 with err
	 * filled when it cannot start, -3 when a cap (vm_max_running,
	 * vm_max_resident) refused it (503 "capacity"). The caller records
	 * the event.
	 * NULL: such requests answer 409.
	 */
	int (*lifecycle)(const char *sandbox, const char *op,
	    void (*done)(void *done_arg, int ok, const char *reason),
	    void *done_arg, char *err, size_t errlen, void *arg);
	/*
	 * Creates the VM of a new sandbox (stored with state "creating", no
	 * address yet) as spec says; asynchronous: the VMM later sets the
	 * state and the address in the store. 0 when started, -1 with err,
	 * -2 with err when it may succeed later without anyone acting (the
	 * default template is being built): the 503 carries a Retry-After;
	 * -3 a cap refused it (503 "capacity").
	 * NULL: creating a sandbox needs an "address" (externally managed).
	 */
	int (*vm_create)(const char *sandbox, const struct px_vm_spec *spec,
	    char *err, size_t errlen, void *arg);
	/* Forks the VM of sandbox into the new ones (stored already, state
	 * "creating"); asynchronous as vm_create. 0, or -1 with err. NULL:
	 * no forks. */
	int (*vm_fork)(const char *sandbox, const char *const *ids, size_t n,
	    const char *checkpoint, char *err, size_t errlen, void *arg);
	/*
	 * Checkpoints of a VM-backed sandbox. vm_checkpoint: op "checkpoint"
	 * takes one named name, "restore" puts the sandbox back to it;
	 * asynchronous as lifecycle. 0 when started; -1 with err, -2 no such
	 * checkpoint, -3 the name exists, -4 the sandbox holds the most
	 * checkpoints allowed, -5 (restore) a cap refused it.
	 * vm_checkpoints: the list (at most max), its full length or -1
	 * with err. vm_checkpoint_get: checkpoint name
	 * into out, 0, -1 with err, -2 no such checkpoint. vm_checkpoint_rm:
	 * 0, -1 with err, -2 no such checkpoint. NULL (vm_checkpoint; the
	 * others are set with it): 409.
	 */
	unsigned max_forks;		/* new sandboxes per fork call; 0:
					 * PX_FORK_MAX */
	int (*vm_checkpoint)(const char *sandbox, const char *op,
	    const char *name, void (*done)(void *done_arg, int ok,
	    const char *reason), void *done_arg, char *err, size_t errlen,
	    void *arg);
	int (*vm_checkpoints)(const char *sandbox, struct px_checkpoint *out,
	    size_t max, char *err, size_t errlen, void *arg);
	int (*vm_checkpoint_get)(const char *sandbox, const char *name,
	    struct px_checkpoint *out, char *err, size_t errlen, void *arg);
	int (*vm_checkpoint_rm)(const char *sandbox, const char *name,
	    char *err, size_t errlen, void *arg);
	/* A VM-backed sandbox's idle limits changed (values as in
	 * px_vm_spec). May be NULL. */
	void (*vm_set_idle)(const char *sandbox, uint64_t idle_pause_ms,
	    uint64_t idle_suspend_ms, uint64_t max_lifetime_ms, void *arg);
	/* Checks that dir holds a template that loads: 0, or -1 with err
	 * saying what is wrong. NULL: directories are not checked. */
	int (*template_check)(const char *dir, char *err, size_t errlen,
	    void *arg);
	/* POST /v1/templates/{name}/build: starts building it (0; -1 with
	 * err, -2 a name berth cannot build, -3 a build under way), and
	 * GET .../build?after=N: its progress, a new JSON object or NULL
	 * (none). NULL hooks: 409. */
	int (*template_build)(const char *name, char *err, size_t errlen,
	    void *arg);
	struct json_t *(*template_build_status)(const char *name, uint64_t after,
	    void *arg);
	/* POST /v1/templates/{name}/build?from=dockerfile|image: the body
	 * (a build context's tar, an image archive) spooled as it comes,
	 * then the build started at its end. template_spool: a handle, or
	 * NULL with *status (400, 409, 500) and err; _write: 0, or -1 with
	 * *status (413 past template_max_context, 500) and err, the spool
	 * then gone; _end: the build started (0), or -1 likewise, the
	 * handle gone either way; _abort: the client went first. NULL:
	 * 409. */
	void *(*template_spool)(const char *name,
	    const struct px_tpl_source *src, int *status, char *err,
	    size_t errlen, void *arg);
	int (*template_spool_write)(void *h, const void *p, size_t len,
	    int *status, char *err, size_t errlen);
	int (*template_spool_end)(void *h, int *status, char *err,
	    size_t errlen);
	void (*template_spool_abort)(void *h);
	/* A template name was forgotten (DELETE, no sandbox uses it): the
	 * files of a template berthd built under its state dir go (dir: the
	 * path it was registered with). NULL: files stay. */
	void (*template_forget)(const char *name, const char *dir, void *arg);
	/* The built-in "default" template's directory, shown by GET
	 * /v1/templates; NULL when there is none (no VMs). Copied. */
	const char *template_dir;
	/* The sandbox is gone from the store: tear its VM down. May be NULL. */
	void (*vm_delete)(const char *sandbox, void *arg);
	/* A suspended sandbox's standby VMM: "starting", "ready" (it has
	 * loaded the snapshot) or NULL (none). May be NULL. */
	const char *(*vm_standby)(const char *sandbox, void *arg);
	/* The memory (MiB) template dir (NULL: the default) asks for its
	 * sandboxes when a create names none; 0: berth.conf's vm_memory.
	 * May be NULL. */
	unsigned (*vm_template_mem)(const char *dir, void *arg);
	/* A VM-backed sandbox's VMM as a new JSON object (pid, accel,
	 * jail, usage), shown as "vm"; NULL when none. May be NULL. */
	struct json_t *(*vm_info)(const char *sandbox, void *arg);
	/* The guest console kept, from byte offset from (-1: its end):
	 * {size, from, text}; NULL: no console (not a VM). May be NULL. */
	struct json_t *(*vm_console)(const char *sandbox, long long from,
	    void *arg);
	/* After a sandbox's egress rules or mode changed; sandbox NULL:
	 * the global policy changed. May be NULL. */
	void (*egress_changed)(const char *sandbox, void *arg);
	/* Recent egress denials of a sandbox as a new JSON array; -1 when
	 * there is no denial log. May be NULL (no log). */
	int (*egress_log)(const char *sandbox, struct json_t **out, void *arg);
	/* Defaults of the global policy's limits (egress_max_rules,
	 * egress_conn_limit, egress_new_conn_rate), read at every use so
	 * that a reload applies. NULL: 256 rules, no limits. */
	const struct px_config *config;
	/* Fields added to GET /v1/health (a new JSON object, e.g. the
	 * state of egress and of VMs, for `netctl status`). May be NULL. */
	struct json_t *(*health)(void *arg);
	/* Runs a command in a VM-backed sandbox's guest (POST .../exec),
	 * waking it first. 0 when started: done(done_arg, result) is then
	 * called exactly once, later, from the event loop. -1 with *status
	 * and err when it cannot start. NULL: exec answers 409. */
	int (*exec)(const char *sandbox, const struct px_exec_req *req,
	    void (*done)(void *done_arg, const struct px_exec_result *res),
	    void *done_arg, int *status, char *err, size_t errlen, void *arg);
	/* The client of the exec started with done_arg is gone: the command
	 * is killed in the guest, done is never called. May be NULL (done
	 * then comes, to nobody). */
	void (*exec_abandon)(void *done_arg, void *arg);
	/* Fleet mode: a new document for GET /v1/fleet/{what} ("hosts",
	 * "sandboxes"), admin only. NULL hook: those answer 404. */
	struct json_t *(*fleet)(const char *what, void *arg);
	/* Fleet mode, drain (issue 33): this host placed on no more (on) or
	 * again (0); 0, or -1 with err. NULL hook: the routes answer 404. */
	int (*fleet_drain)(int on, char *err, size_t errlen, void *arg);
	/* Fleet mode, placement (issue 33): forwards a create (its JSON
	 * body) to fleet host; 0 when started, done(done_arg, status, body,
	 * len, err) then called exactly once, later (status 0: no answer,
	 * err says why). -1 with err when it cannot start. NULL: every
	 * create is made here. */
	int (*fleet_forward)(const char *host, const char *body, size_t len,
	    void (*done)(void *done_arg, int status, const char *body,
	    size_t len, const char *err), void *done_arg, char *err,
	    size_t errlen, void *arg);
	/*
	 * Fleet mode, move (issue 33; proxy/fleet/fleet_move.c). The
	 * source's side: move sandbox to fleet host to (suspended first if
	 * it runs); 0 when started, done(done_arg, status, err) then called
	 * once, later (status 200: the target has it and this host freed
	 * it; else the HTTP status the API answers, err why: the sandbox
	 * stays here). -1 with *status and err when it cannot start. NULL:
	 * 409.
	 */
	int (*move)(const char *sandbox, const char *to,
	    void (*done)(void *done_arg, int status, const char *err,
	    uint64_t bytes_sent),
	    void *done_arg, int *status, char *err, size_t errlen, void *arg);
	/*
	 * The target's side, asked by fleet peer host only (fleet_api_listen):
	 * move_begin: sandbox is coming with this manifest (JSON text):
	 * a new JSON object ({"need":[names]}) or NULL with *status and
	 * err. move_spool: its file name, size bytes, as it comes, from
	 * byte from of it (the rest of one cut short): a handle or NULL;
	 * _write/_end/_abort as template_spool's (end: 0 when its size and
	 * sha256 are whole; abort keeps what came for a resume), move_part:
	 * how many bytes of one cut short are here ({"id","name","bytes"},
	 * new) or NULL with *status and err. move_commit: adopt it with its records
	 * (JSON text): a new JSON object (the sandbox) or NULL with *status
	 * and err (what came is removed). move_abort: what came goes. NULL
	 * move_begin: 404.
	 */
	struct json_t *(*move_begin)(const char *host, const char *sandbox,
	    const char *body, size_t len, int *status, char *err, size_t errlen,
	    void *arg);
	void *(*move_spool)(const char *host, const char *sandbox,
	    const char *name, uint64_t from, int *status, char *err,
	    size_t errlen, void *arg);
	struct json_t *(*move_part)(const char *host, const char *sandbox,
	    const char *name, int *status, char *err, size_t errlen,
	    void *arg);
	int (*move_spool_write)(void *h, const void *p, size_t len,
	    int *status, char *err, size_t errlen);
	int (*move_spool_end)(void *h, int *status, char *err, size_t errlen);
	void (*move_spool_abort)(void *h);
	struct json_t *(*move_commit)(const char *host, const char *sandbox,
	    const char *body, size_t len, int *status, char *err,
	    size_t errlen, void *arg);
	void (*move_abort)(const char *host, const char *sandbox, void *arg);
	/* move_held: whether sandbox is here (a source whose commit's
	 * answer was lost asks): {"id","held"}, new. */
	struct json_t *(*move_held)(const char *host, const char *sandbox,
	    void *arg);
	/* A streamed exec or file transfer, waking the sandbox first: its
	 * handle, or NULL with *status and err. sink is copied. exec_input
	 * queues a frame toward the guest ('I' stdin or file data, empty:
	 * EOF; 'W' "ROWS COLS") and returns the bytes queued, for the
	 * caller to stop reading its client above a bound until drained;
	 * exec_read(0) stops taking the guest's output (the client reads
	 * slowly), exec_read(1) takes it again; exec_cancel drops it (the
	 * client went away: a running command is killed, done is not
	 * called). NULL exec_stream: streamed requests answer 409. The
	 * sink's done is never called from inside exec_stream, exec_input
	 * or exec_cancel, only later from the event loop: proxy/api's
	 * h_files and cs_body use the stream's state after those calls. */
	struct px_exec_stream *(*exec_stream)(const char *sandbox,
	    const struct px_exec_req *req, const struct px_exec_sink *sink,
	    int *status, char *err, size_t errlen, void *arg);
	size_t (*exec_input)(struct px_exec_stream *, int type,
	    const void *p, size_t len);
	void (*exec_read)(struct px_exec_stream *, int on);
	void (*exec_cancel)(struct px_exec_stream *);
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

/*
 * Also listens on TCP at addr ("127.0.0.1:9443", "[::1]:9443"), where
 * every request needs a bearer token. ssl_ctx (an SSL_CTX *, kept, not
 * freed) makes it TLS; NULL serves plain HTTP, meant for tests on
 * loopback. One TCP listener per px_control. -1 with err filled.
 */
/*
 * The TCP listener's connections as the control helper (controld.c)
 * relays them: the helper terminates TLS and parses each request once;
 * the parent puts it here typed (api/fed.c), and the API serves it as a
 * TCP request (bearer token, deadlines, per-address cap). fd is the
 * parent's end of a socketpair the answers go out on, to be relayed to
 * the client at addr. adopt returns the connection's handle (0: refused
 * or out of memory: fd is closed); taken(tag, n) reports n bytes of a
 * streamed body its operation took. The feed calls return -1 when the
 * connection must end (too much queued, out of memory), 0 otherwise (a
 * connection that ended here meanwhile drops what it is fed). gone: its
 * client went away, nothing queued is served. The helper's own refusals
 * (at accept, at the handshake deadline) are counted here for /metrics.
 */
typedef void px_control_taken_fn(uint64_t tag, size_t n);
struct px_control_req {
	unsigned	 method;	/* enum http_method */
	const char	*target;	/* origin-form, printable */
	const char	*authz;		/* the Authorization value, "" */
	const char	*body;		/* JSON, re-encoded by the helper */
	size_t		 bodylen;
	int		 close;		/* Connection: close */
	int		 stream;	/* px_control_streamed: its body follows */
	int		 expect;	/* Expect: 100-continue (streamed) */
};
uint64_t px_control_adopt(struct px_control *, int fd, const char *addr,
	    px_control_taken_fn *taken, uint64_t tag);
/* A connection whose requests a fleet peer forwarded (fleet_api_listen,
 * served by the control helper) or this host's placement fed: fed like
 * the helper's, it may only create a sandbox here, as the admin, never
 * placed elsewhere again; peer is that host's id. */
uint64_t px_control_adopt_fleet(struct px_control *, int fd, const char *peer,
	    px_control_taken_fn *taken, uint64_t tag);
int	px_control_feed_request(struct px_control *, uint64_t,
	    const struct px_control_req *);
int	px_control_feed_body(struct px_control *, uint64_t, const void *,
	    size_t);
int	px_control_feed_end(struct px_control *, uint64_t, int broken);
int	px_control_feed_shutdown(struct px_control *, uint64_t);
void	px_control_feed_gone(struct px_control *, uint64_t);
enum { PX_CONTROL_REFUSED_BUDGET = 1, PX_CONTROL_REFUSED_ADDRESS,
	PX_CONTROL_REFUSED_DEADLINE };
void px_control_count_refused(struct px_control *, int reason);
/* 1 when the control API streams this request's body (PUT
 * /v1/sandboxes/ID/files, POST /v1/sandboxes/ID/exec?stream=1, the
 * target as written) rather than reading it whole as JSON: the helper
 * relays such a body as it comes (helper.h). */
int px_control_streamed(unsigned method, const char *target, size_t len);
/* The "code" of the control API's error document for an HTTP status. */
const char *px_control_error_code(int status);
/* the limits the helper applies before a connection reaches the parent */
#define PX_CONTROL_MAX_TCP	128
#define PX_CONTROL_MAX_PER_ADDR	16
#define PX_CONTROL_HANDSHAKE_SECS 5
#define PX_CONTROL_IDLE_SECS	60
#define PX_CONTROL_MAX_HEAD	(16 * 1024)
#define PX_CONTROL_MAX_AUTHZ	256
int px_control_listen_tcp(struct px_control *, const char *addr,
    void *ssl_ctx, char *err, size_t errlen);

/*
 * The route table message berthd sends its workers:
 * {"type":"routes","routes":{"domain", "sandboxes":[{"id","address",
 * "state","ports":[{"port","host_header","visibility","host"?}]}],
 * "tokens":[{"sha256":"<hex>","sandbox":"<id>"|null}]}}; sandbox null is
 * an admin token, accepted on every private route. NULL on a store error
 * (err filled); the caller owns the reference.
 */
struct json_t *px_control_routes_json(struct px_store *, const char *domain,
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

/* The control API described as OpenAPI 3.1, made from its table of
 * routes (a new document; NULL out of memory): GET /v1/openapi.json,
 * berthd -O. */
struct json_t *api_openapi_doc(void);

#endif
