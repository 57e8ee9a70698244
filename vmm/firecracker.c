/*
 * firecracker.c — libvmm backend "firecracker": one `firecracker
 * --api-sock <dir>/fc.sock --id <id>` per sandbox, configured and driven
 * through its HTTP API on that unix socket, as Firecracker's published
 * OpenAPI description (firecracker.yaml) defines it:
 *
 *   boot   PUT /machine-config, /boot-source, /drives/data,
 *          /network-interfaces/eth0, then PUT /actions InstanceStart;
 *          running when the guest's ready line shows on the serial
 *          console (Firecracker's stdout, here <dir>/vmm.log)
 *   pause  PATCH /vm {"state": "Paused"}      resume PATCH /vm "Resumed"
 *   suspend  pause, PUT /snapshot/create (Full: snap/state + snap/mem),
 *          then end the process (Firecracker has no quit call)
 *   restore  a new process, PUT /snapshot/load with mem_backend File,
 *          resume_vm and network_overrides (the tap by name)
 *   stop   PUT /actions SendCtrlAltDel, SIGKILL after a deadline
 *   adopt  GET / (instance info: state Running / Paused)
 *
 * Firecracker cannot run on the build machines; this backend is tested
 * against a fake that answers as the OpenAPI description says
 * (tests/unit/test_vmm_mock_firecracker.c). Each request uses its own
 * connection, so a response is complete at Content-Length (204 carries
 * none) and nothing is pipelined.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include "backend.h"
#include "nc_link.h"
#include "qmp.h"		/* vmm_qmp_connect_unix: any unix stream */

#define FC_RETRY_MS	5
#define FC_CONSOLE_MS	20
#define FC_QUIT_MS	5000
#define FC_RESP_MAX	(256 * 1024)

enum fc_op {
	FC_IDLE = 0, FC_BOOT, FC_RESTORE, FC_ADOPT, FC_PAUSE, FC_CONT,
	FC_SUSPEND, FC_STOP, FC_KILL,
};

/*
 * Where the operation in flight stands, named by what firecracker is to
 * answer next. Every operation starts at FC_FIRST; a pause, a resume, a
 * restore and an adoption are one request and its answer. Boot's are in
 * the order they come (fc_deadline compares them).
 */
enum fc_state {
	FC_FIRST = 0,	/* nothing sent yet (or no operation) */
	FR_LOAD,	/* restore: PUT /snapshot/load's answer */
	FA_INFO,	/* adopt: GET /'s answer (the instance's state) */
	FP_VM,		/* pause, resume: PATCH /vm's answer */
	FB_MACHINE,	/* boot: PUT /machine-config's answer */
	FB_BOOT_SOURCE,	/* boot: PUT /boot-source's answer */
	FB_DATA,	/* boot: PUT /drives/data's answer */
	FB_ROOTFS,	/* boot: PUT /drives/rootfs's answer */
	FB_NET,		/* boot: PUT /network-interfaces/eth0's answer */
	FB_START,	/* boot: PUT /actions InstanceStart's answer */
	FB_READY,	/* boot: the guest's ready line (console poller) */
	FS_PAUSE,	/* suspend: PATCH /vm Paused's answer */
	FS_SNAPSHOT,	/* suspend: PUT /snapshot/create's answer */
	FS_EXIT,	/* suspend: snapshot in place; the killed VMM's exit */
	FS_RESUME,	/* suspend failed: PATCH /vm Resumed's answer */
};

struct fc {
	struct vmm_sandbox *sb;
	enum fc_op op;
	enum fc_state step;
	int expect_exit;
	enum vmm_state exit_state;
	int was_running;
	int ready_seen;
	off_t con_off;
	char carry[128];
	char kill_why[VMM_ERRLEN];
	char sock[PATH_MAX];

	struct vmm_child *watch;
	struct event *poll_ev, *deadline_ev, *retry_ev;

	/* the one request in flight */
	struct bufferevent *bev;
	char *req;			/* kept for a retry while starting */
	char req_what[128];
};

static void fc_step(struct fc *f, int status, json_t *body, const char *err);
static void fc_kill_now(struct fc *f, const char *why);

static void
fc_timer(struct event *ev, unsigned ms)
{
	vmm_timer_ms(ev, ms);
}

static void
fc_http_reset(struct fc *f)
{
	if (f->bev != NULL)
		bufferevent_free(f->bev);
	f->bev = NULL;
	free(f->req);
	f->req = NULL;
	event_del(f->retry_ev);
}

static void
fc_done(struct fc *f, int ok, enum vmm_state st, const char *reason)
{
	if (f->op == FC_IDLE)
		return;
	event_del(f->poll_ev);
	event_del(f->deadline_ev);
	fc_http_reset(f);
	f->op = FC_IDLE;
	f->step = FC_FIRST;
	vmm_backend_done(f->sb, ok, st, reason);
}

static void
fc_unlink(struct vmm_sandbox *sb, const char *name)
{
	char p[PATH_MAX];

	if (vmm_path(sb, name, p, sizeof(p)) == 0)
		(void)unlink(p);
}

/* ---- HTTP over the API socket ---- */

/* Parse a complete response in buf: -1 incomplete, else the status, and
 * *body the parsed JSON (or NULL). */
static int
fc_parse(struct evbuffer *in, json_t **body, char *err, size_t errlen)
{
	struct evbuffer_ptr end;
	size_t hlen, clen = 0, total = evbuffer_get_length(in);
	char *head, *p, *line;
	int status;

	end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0)
		return total > FC_RESP_MAX ? -2 : -1;
	hlen = (size_t)end.pos + 4;
	head = malloc(hlen + 1);
	if (head == NULL)
		return -2;
	evbuffer_copyout(in, head, hlen);
	head[hlen] = '\0';
	if (sscanf(head, "HTTP/1.%*d %d", &status) != 1) {
		snprintf(err, errlen, "bad HTTP status line from firecracker");
		free(head);
		return -2;
	}
	for (line = strstr(head, "\r\n"); line != NULL;
	    line = strstr(line + 2, "\r\n")) {
		p = line + 2;
		if (strncasecmp(p, "Content-Length:", 15) == 0)
			clen = (size_t)strtoul(p + 15, NULL, 10);
	}
	free(head);
	if (clen > FC_RESP_MAX)
		return -2;
	if (total < hlen + clen)
		return -1;
	evbuffer_drain(in, hlen);
	*body = NULL;
	if (clen > 0) {
		char *b = malloc(clen + 1);

		if (b == NULL)
			return -2;
		evbuffer_remove(in, b, clen);
		b[clen] = '\0';
		*body = json_loads(b, 0, NULL);
		free(b);
	}
	return status;
}

static void
fc_http_read(struct bufferevent *bev, void *arg)
{
	struct fc *f = arg;
	json_t *body = NULL;
	char err[256] = "bad response from firecracker";
	int status;

	status = fc_parse(bufferevent_get_input(bev), &body, err, sizeof(err));
	if (status == -1)
		return;
	fc_http_reset(f);
	if (status < 0) {
		fc_step(f, 0, NULL, err);
		return;
	}
	fc_step(f, status, body, NULL);
	json_decref(body);
}

static void
fc_http_event(struct bufferevent *bev, short what, void *arg)
{
	struct fc *f = arg;
	char why[300];

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	snprintf(why, sizeof(why), "%s: connection to firecracker %s",
	    f->req_what, (what & BEV_EVENT_EOF) ? "closed" : strerror(errno));
	fc_http_reset(f);
	fc_step(f, 0, NULL, why);
}

static void
fc_http_send(evutil_socket_t fd0, short what, void *arg)
{
	struct fc *f = arg;
	char err[VMM_ERRLEN];
	int fd;

	(void)fd0;
	(void)what;
	fd = vmm_qmp_connect_unix(f->sock, err, sizeof(err));
	if (fd == -ENOENT || fd == -ECONNREFUSED || fd == -EAGAIN) {
		/* firecracker is still starting: its deadline bounds this */
		fc_timer(f->retry_ev, FC_RETRY_MS);
		return;
	}
	if (fd < 0) {
		fc_kill_now(f, err);
		return;
	}
	f->bev = bufferevent_socket_new(f->sb->m->base, fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (f->bev == NULL) {
		close(fd);
		fc_kill_now(f, "out of memory");
		return;
	}
	bufferevent_setcb(f->bev, fc_http_read, NULL, fc_http_event, f);
	bufferevent_enable(f->bev, EV_READ | EV_WRITE);
	evbuffer_add(bufferevent_get_output(f->bev), f->req, strlen(f->req));
}

/* Send METHOD PATH with a JSON body (stolen, may be NULL). */
static void
fc_http(struct fc *f, const char *method, const char *path, json_t *body)
{
	char *js = NULL;
	int n;

	fc_http_reset(f);
	snprintf(f->req_what, sizeof(f->req_what), "%s %s", method, path);
	if (body != NULL) {
		js = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (js == NULL) {
			fc_kill_now(f, "out of memory");
			return;
		}
	}
	if (js != NULL)
		n = asprintf(&f->req, "%s %s HTTP/1.1\r\nHost: localhost\r\n"
		    "Accept: application/json\r\nContent-Type: application/json"
		    "\r\nContent-Length: %zu\r\n\r\n%s", method, path,
		    strlen(js), js);
	else
		n = asprintf(&f->req, "%s %s HTTP/1.1\r\nHost: localhost\r\n"
		    "Accept: application/json\r\n\r\n", method, path);
	free(js);
	if (n < 0) {
		f->req = NULL;
		fc_kill_now(f, "out of memory");
		return;
	}
	fc_http_send(-1, 0, f);
}

/* "PUT /x: 400 fault_message" */
static void
fc_fault(struct fc *f, int status, json_t *body, const char *err, char *buf,
    size_t len)
{
	const char *fm = json_string_value(json_object_get(body,
	    "fault_message"));

	if (err != NULL)
		snprintf(buf, len, "%s", err);
	else
		snprintf(buf, len, "%s: HTTP %d%s%s", f->req_what, status,
		    fm != NULL ? ": " : "", fm != NULL ? fm : "");
}

/* ---- process ---- */

static void
fc_exited(pid_t pid, int status, void *arg)
{
	struct fc *f = arg;
	struct vmm_sandbox *sb = f->sb;
	char st[128], tail[300], why[VMM_ERRLEN], logp[PATH_MAX];

	(void)pid;
	f->watch = NULL;
	sb->pid = 0;
	fc_http_reset(f);
	(void)unlink(f->sock);
	if (f->expect_exit) {
		f->expect_exit = 0;
		f->kill_why[0] = '\0';
		if (f->exit_state == VMM_STOPPED) {
			fc_unlink(sb, "snap/state");
			fc_unlink(sb, "snap/mem");
		}
		fc_done(f, 1, f->exit_state, "");
		return;
	}
	if (f->kill_why[0] != '\0') {
		snprintf(why, sizeof(why), "%s", f->kill_why);
		f->kill_why[0] = '\0';
	} else {
		vmm_status_text(status, st, sizeof(st));
		(void)vmm_path(sb, "vmm.log", logp, sizeof(logp));
		/* vmm.log is also the guest console: its last line explains
		 * only an exit Firecracker chose, not a signal. */
		tail[0] = '\0';
		if (status != -1 && WIFEXITED(status))
			vmm_tail_line(logp, tail, sizeof(tail));
		snprintf(why, sizeof(why), "firecracker %s%s%s", st,
		    tail[0] ? ": " : "", tail);
	}
	if (f->op != FC_IDLE) {
		fc_done(f, 0, VMM_FAILED, why);
		return;
	}
	vmm_backend_exited(sb, why);
}

static void
fc_kill_now(struct fc *f, const char *why)
{
	struct vmm_sandbox *sb = f->sb;

	if (sb->pid > 0) {
		snprintf(f->kill_why, sizeof(f->kill_why), "%s", why);
		event_del(f->poll_ev);
		event_del(f->deadline_ev);
		fc_http_reset(f);
		f->expect_exit = 0;
		kill(sb->pid, SIGKILL);
		return;
	}
	fc_done(f, 0, VMM_FAILED, why);
}

static void
fc_console_poll(evutil_socket_t fd, short what, void *arg)
{
	struct fc *f = arg;
	struct vmm_sandbox *sb = f->sb;
	char path[PATH_MAX];

	(void)fd;
	(void)what;
	if (f->op != FC_BOOT || f->ready_seen)
		return;
	(void)vmm_path(sb, "vmm.log", path, sizeof(path));
	if (vmm_scan_file(path, &f->con_off, f->carry, sizeof(f->carry),
	    sb->tpl.ready_line)) {
		f->ready_seen = 1;
		fc_step(f, 0, NULL, NULL);
		return;
	}
	fc_timer(f->poll_ev, FC_CONSOLE_MS);
}

static void
fc_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct fc *f = arg;
	struct vmm_sandbox *sb = f->sb;
	char why[VMM_ERRLEN];

	(void)fd;
	(void)what;
	if (f->expect_exit && sb->pid > 0) {
		kill(sb->pid, SIGKILL);
		return;
	}
	if (f->op == FC_BOOT)
		snprintf(why, sizeof(why), "guest not ready within %u ms%s",
		    sb->m->cfg.ready_timeout_ms, f->step < FB_NET ?
		    " (firecracker API did not finish the configuration)" : "");
	else
		snprintf(why, sizeof(why), "%s: no answer from firecracker "
		    "within %u ms", vmm_op_name(sb->op), sb->m->cfg.op_timeout_ms);
	fc_kill_now(f, why);
}

static int
fc_spawn(struct fc *f, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = f->sb;
	char *argv[8], logp[PATH_MAX], snap[PATH_MAX];
	pid_t pid;

	if (sb->pid > 0) {
		snprintf(err, errlen, "firecracker (pid %d) still running",
		    (int)sb->pid);
		return -EBUSY;
	}
	if (vmm_path(sb, "snap", snap, sizeof(snap)) < 0 ||
	    (mkdir(snap, 0750) < 0 && errno != EEXIST)) {
		snprintf(err, errlen, "%s: %s", snap, strerror(errno));
		return -EIO;
	}
	/* Firecracker refuses to start on an existing socket path. */
	(void)unlink(f->sock);
	(void)vmm_path(sb, "vmm.log", logp, sizeof(logp));
	(void)truncate(logp, 0);
	f->con_off = 0;
	f->carry[0] = '\0';
	f->ready_seen = 0;
	argv[0] = sb->m->vmm_binary;
	argv[1] = "--api-sock";
	argv[2] = f->sock;
	argv[3] = "--id";
	argv[4] = sb->id;
	argv[5] = NULL;
	if (vmm_own(sb, err, errlen) < 0)
		return -EPERM;
	if ((pid = vmm_spawn(argv, logp, sb->m->cfg.vmm_uid, sb->m->cfg.vmm_gid,
	    err, errlen)) < 0)
		return -EIO;
	sb->pid = pid;
	f->watch = vmm_child_watch(sb->m->base, pid, fc_exited, f, err, errlen);
	if (f->watch == NULL) {
		kill(pid, SIGKILL);
		sb->pid = 0;
		return -EIO;
	}
	f->expect_exit = 0;
	return 0;
}

static json_t *
fc_path_json(struct vmm_sandbox *sb, const char *name)
{
	char p[PATH_MAX];

	(void)vmm_path(sb, name, p, sizeof(p));
	return json_string(p);
}

/* Boot: the configuration, one PUT per answer, then InstanceStart; then
 * the console poller's ready line. */
static void
fc_boot_step(struct fc *f, int status, json_t *body, const char *err)
{
	struct vmm_sandbox *sb = f->sb;
	char why[VMM_ERRLEN], mac[18], cmdline[2048];
	int good = err == NULL && status >= 200 && status < 300;

	/* a response (not the first call, not the console poller) */
	if ((status != 0 || err != NULL) && !good) {
		fc_fault(f, status, body, err, why, sizeof(why));
		fc_kill_now(f, why);
		return;
	}
	switch (f->step) {
	case FC_FIRST:
		f->step = FB_MACHINE;
		fc_http(f, "PUT", "/machine-config", json_pack(
		    "{s:i,s:i,s:b}", "vcpu_count", (int)sb->vcpus,
		    "mem_size_mib", (int)sb->mem_mib, "smt", 0));
		return;
	case FB_MACHINE:
		f->step = FB_BOOT_SOURCE;
		if (vmm_kernel_cmdline(sb, cmdline, sizeof(cmdline)) < 0) {
			fc_kill_now(f, "kernel command line too long");
			return;
		}
		if (sb->tpl.initrd != NULL)
			fc_http(f, "PUT", "/boot-source", json_pack(
			    "{s:s,s:s,s:s}", "kernel_image_path",
			    sb->tpl.kernel, "initrd_path", sb->tpl.initrd,
			    "boot_args", cmdline));
		else
			fc_http(f, "PUT", "/boot-source", json_pack(
			    "{s:s,s:s}", "kernel_image_path",
			    sb->tpl.kernel, "boot_args", cmdline));
		return;
	case FB_BOOT_SOURCE:
		f->step = FB_DATA;
		fc_http(f, "PUT", "/drives/data", json_pack(
		    "{s:s,s:s,s:b,s:b}", "drive_id", "data",
		    "path_on_host", sb->disk, "is_root_device", 0,
		    "is_read_only", 0));
		return;
	case FB_DATA:
		if (sb->tpl.rootfs != NULL) {
			f->step = FB_ROOTFS;
			fc_http(f, "PUT", "/drives/rootfs", json_pack(
			    "{s:s,s:s,s:b,s:b}", "drive_id", "rootfs",
			    "path_on_host", sb->tpl.rootfs,
			    "is_root_device", 1, "is_read_only", 1));
			return;
		}
		/* no root drive: the network next */
		/* fall through */
	case FB_ROOTFS:
		f->step = FB_NET;
		nc_link_mac_format(sb->mac, mac, sizeof(mac));
		fc_http(f, "PUT", "/network-interfaces/eth0", json_pack(
		    "{s:s,s:s,s:s}", "iface_id", "eth0",
		    "host_dev_name", sb->tap, "guest_mac", mac));
		return;
	case FB_NET:
		f->step = FB_START;
		fc_http(f, "PUT", "/actions", json_pack("{s:s}",
		    "action_type", "InstanceStart"));
		return;
	case FB_START:		/* started: wait for the ready line */
		f->step = FB_READY;
		fc_timer(f->poll_ev, 0);
		return;
	default:		/* FB_READY: the console poller */
		if (f->ready_seen)
			fc_done(f, 1, VMM_RUNNING, "");
		return;
	}
}

/* Suspend: pause (if it ran), snapshot, rename into place, then end the
 * process; a failed snapshot resumes a guest that ran. */
static void
fc_suspend_step(struct fc *f, int status, json_t *body, const char *err)
{
	struct vmm_sandbox *sb = f->sb;
	char why[VMM_ERRLEN], path[PATH_MAX];
	int good = err == NULL && status >= 200 && status < 300;

	switch (f->step) {
	case FC_FIRST:
		f->step = FS_PAUSE;
		if (f->was_running) {
			fc_http(f, "PATCH", "/vm", json_pack("{s:s}",
			    "state", "Paused"));
			return;
		}
		/* already paused: the snapshot now */
		/* fall through */
	case FS_PAUSE:
		if (f->was_running && !good) {
			fc_fault(f, status, body, err, why, sizeof(why));
			fc_done(f, 0, VMM_RUNNING, why);
			return;
		}
		f->step = FS_SNAPSHOT;
		fc_unlink(sb, "snap/state.new");
		fc_unlink(sb, "snap/mem.new");
		fc_http(f, "PUT", "/snapshot/create", json_pack(
		    "{s:s,s:o,s:o}", "snapshot_type", "Full",
		    "snapshot_path", fc_path_json(sb, "snap/state.new"),
		    "mem_file_path", fc_path_json(sb, "snap/mem.new")));
		return;
	case FS_SNAPSHOT:
		if (good) {
			char a[PATH_MAX], b[PATH_MAX];

			(void)vmm_path(sb, "snap/state.new", a, sizeof(a));
			(void)vmm_path(sb, "snap/state", b, sizeof(b));
			(void)vmm_path(sb, "snap/mem.new", path, sizeof(path));
			if (access(a, R_OK) < 0 || access(path, R_OK) < 0) {
				snprintf(why, sizeof(why), "snapshot/create "
				    "answered but wrote no files");
			} else if (rename(a, b) < 0) {
				snprintf(why, sizeof(why), "snapshot rename: "
				    "%s", strerror(errno));
			} else {
				(void)vmm_path(sb, "snap/mem", b, sizeof(b));
				if (rename(path, b) == 0) {
					f->step = FS_EXIT;
					f->expect_exit = 1;
					f->exit_state = VMM_SUSPENDED;
					event_del(f->deadline_ev);
					fc_timer(f->deadline_ev, FC_QUIT_MS);
					kill(sb->pid, SIGKILL);
					return;
				}
				snprintf(why, sizeof(why), "snapshot rename: "
				    "%s", strerror(errno));
				fc_unlink(sb, "snap/state");
			}
		} else {
			char e[VMM_ERRLEN];

			fc_fault(f, status, body, err, e, sizeof(e));
			snprintf(why, sizeof(why), "snapshot failed: %s", e);
		}
		fc_unlink(sb, "snap/state.new");
		fc_unlink(sb, "snap/mem.new");
		snprintf(sb->reason, sizeof(sb->reason), "%s", why);
		if (!f->was_running) {
			fc_done(f, 0, VMM_PAUSED, why);
			return;
		}
		f->step = FS_RESUME;
		fc_http(f, "PATCH", "/vm", json_pack("{s:s}", "state",
		    "Resumed"));
		return;
	case FS_RESUME:
		if (!good) {
			char e[VMM_ERRLEN], e2[VMM_ERRLEN];

			fc_fault(f, status, body, err, e, sizeof(e));
			snprintf(e2, sizeof(e2), "%s; then resume: %s",
			    sb->reason, e);
			fc_kill_now(f, e2);
			return;
		}
		snprintf(why, sizeof(why), "%s", sb->reason);
		fc_done(f, 0, VMM_RUNNING, why);
		return;
	default:	/* FS_EXIT: the exit handler ends it */
		return;
	}
}

/* Advance the operation in flight with an answer (status and body, or
 * err), or start it (status 0, no err). */
static void
fc_step(struct fc *f, int status, json_t *body, const char *err)
{
	struct vmm_sandbox *sb = f->sb;
	char why[VMM_ERRLEN];
	int good = err == NULL && status >= 200 && status < 300;
	const char *s;

	switch (f->op) {
	case FC_BOOT:
		fc_boot_step(f, status, body, err);
		return;

	case FC_RESTORE:
		if (f->step == FC_FIRST) {
			json_t *req;

			f->step = FR_LOAD;
			req = json_pack("{s:o,s:{s:s,s:o},s:b,s:b,s:[{s:s,s:s}]}",
			    "snapshot_path", fc_path_json(sb, "snap/state"),
			    "mem_backend", "backend_type", "File",
			    "backend_path", fc_path_json(sb, "snap/mem"),
			    "enable_diff_snapshots", 0, "resume_vm", 1,
			    "network_overrides", "iface_id", "eth0",
			    "host_dev_name", sb->tap);
			fc_http(f, "PUT", "/snapshot/load", req);
			return;
		}
		if (!good) {
			char e[VMM_ERRLEN];

			fc_fault(f, status, body, err, e, sizeof(e));
			snprintf(why, sizeof(why), "restore from snapshot failed: "
			    "%s", e);
			fc_kill_now(f, why);
			return;
		}
		/* Firecracker maps the memory file: unlinking keeps the
		 * pages, and a stale snapshot must never be loaded twice. */
		fc_unlink(sb, "snap/state");
		fc_unlink(sb, "snap/mem");
		fc_done(f, 1, VMM_RUNNING, "");
		return;

	case FC_ADOPT:
		if (f->step == FC_FIRST) {
			f->step = FA_INFO;
			fc_http(f, "GET", "/", NULL);
			return;
		}
		s = json_string_value(json_object_get(body, "state"));
		if (good && s != NULL && strcmp(s, "Running") == 0)
			fc_done(f, 1, VMM_RUNNING, "");
		else if (good && s != NULL && strcmp(s, "Paused") == 0)
			fc_done(f, 1, VMM_PAUSED, "");
		else
			fc_kill_now(f, "adopted firecracker in an unusable state");
		return;

	case FC_PAUSE:
	case FC_CONT:
		if (f->step == FC_FIRST) {
			f->step = FP_VM;
			fc_http(f, "PATCH", "/vm", json_pack("{s:s}", "state",
			    f->op == FC_PAUSE ? "Paused" : "Resumed"));
			return;
		}
		if (good) {
			fc_done(f, 1, f->op == FC_PAUSE ? VMM_PAUSED :
			    VMM_RUNNING, "");
			return;
		}
		fc_fault(f, status, body, err, why, sizeof(why));
		fc_done(f, 0, f->op == FC_PAUSE ? VMM_RUNNING : VMM_PAUSED, why);
		return;

	case FC_SUSPEND:
		fc_suspend_step(f, status, body, err);
		return;

	case FC_STOP:
		/* SendCtrlAltDel answered (or not): the exit decides. */
		if (!good && sb->pid > 0)
			kill(sb->pid, SIGTERM);
		return;

	default:
		return;
	}
}

/* ---- the table ---- */

static struct fc *
fc_get(struct vmm_sandbox *sb)
{
	struct event_base *base = sb->m->base;
	struct fc *f;

	if (sb->priv != NULL)
		return sb->priv;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return NULL;
	f->sb = sb;
	f->poll_ev = evtimer_new(base, fc_console_poll, f);
	f->deadline_ev = evtimer_new(base, fc_deadline, f);
	f->retry_ev = evtimer_new(base, fc_http_send, f);
	if (f->poll_ev == NULL || f->deadline_ev == NULL || f->retry_ev == NULL) {
		if (f->poll_ev) event_free(f->poll_ev);
		if (f->deadline_ev) event_free(f->deadline_ev);
		if (f->retry_ev) event_free(f->retry_ev);
		free(f);
		return NULL;
	}
	snprintf(f->sock, sizeof(f->sock), "%s/fc.sock", sb->dir);
	sb->priv = f;
	return f;
}

static int
fc_begin(struct vmm_sandbox *sb, enum fc_op op, unsigned deadline_ms,
    char *err, size_t errlen)
{
	struct fc *f = fc_get(sb);

	if (f == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->op = op;
	f->step = FC_FIRST;
	if (deadline_ms != 0)
		fc_timer(f->deadline_ev, deadline_ms);
	return 0;
}

static int
fe_boot(struct vmm_sandbox *sb, int restore, char *err, size_t errlen)
{
	struct fc *f;
	char snap[PATH_MAX];
	int rc;

	if ((f = fc_get(sb)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (restore) {
		(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
		if (access(snap, R_OK) < 0) {
			snprintf(err, errlen, "no snapshot %s: %s", snap,
			    strerror(errno));
			return -ENOENT;
		}
	} else {
		fc_unlink(sb, "snap/state");
		fc_unlink(sb, "snap/mem");
	}
	if ((rc = fc_spawn(f, err, errlen)) < 0)
		return rc;
	fc_begin(sb, restore ? FC_RESTORE : FC_BOOT, restore ?
	    sb->m->cfg.op_timeout_ms : sb->m->cfg.ready_timeout_ms, err, errlen);
	fc_step(f, 0, NULL, NULL);
	return 0;
}

static int
fe_simple(struct vmm_sandbox *sb, enum fc_op op, char *err, size_t errlen)
{
	int rc;

	if (sb->pid <= 0) {
		snprintf(err, errlen, "no firecracker process for %s", sb->id);
		return -ENOTCONN;
	}
	if ((rc = fc_begin(sb, op, sb->m->cfg.op_timeout_ms, err, errlen)) < 0)
		return rc;
	if (op == FC_SUSPEND)
		((struct fc *)sb->priv)->was_running = sb->state == VMM_RUNNING;
	fc_step(sb->priv, 0, NULL, NULL);
	return 0;
}

static int
fe_pause(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return fe_simple(sb, FC_PAUSE, err, errlen);
}

static int
fe_cont(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return fe_simple(sb, FC_CONT, err, errlen);
}

static int
fe_suspend(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return fe_simple(sb, FC_SUSPEND, err, errlen);
}

static int
fe_stop(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct fc *f;
	int rc;

	if ((rc = fc_begin(sb, FC_STOP, 0, err, errlen)) < 0)
		return rc;
	f = sb->priv;
	f->exit_state = VMM_STOPPED;
	if (sb->pid <= 0) {
		fc_unlink(sb, "snap/state");
		fc_unlink(sb, "snap/mem");
		f->op = FC_IDLE;
		vmm_backend_done_later(sb, 1, VMM_STOPPED, "");
		return 0;
	}
	f->expect_exit = 1;
	fc_timer(f->deadline_ev, FC_QUIT_MS);
	fc_http(f, "PUT", "/actions", json_pack("{s:s}", "action_type",
	    "SendCtrlAltDel"));
	return 0;
}

static int
fe_kill(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct fc *f;
	int rc;

	if ((f = fc_get(sb)) != NULL) {
		event_del(f->poll_ev);
		event_del(f->deadline_ev);
		fc_http_reset(f);
	}
	if ((rc = fc_begin(sb, FC_KILL, 0, err, errlen)) < 0)
		return rc;
	f = sb->priv;
	f->exit_state = VMM_STOPPED;
	if (sb->pid <= 0) {
		f->op = FC_IDLE;
		vmm_backend_done_later(sb, 1, VMM_STOPPED, "");
		return 0;
	}
	f->expect_exit = 1;
	kill(sb->pid, SIGKILL);
	return 0;
}

static int
fe_adopt(struct vmm_sandbox *sb, pid_t pid, char *err, size_t errlen)
{
	struct fc *f;
	int rc;

	if ((rc = fc_begin(sb, FC_ADOPT, sb->m->cfg.op_timeout_ms, err,
	    errlen)) < 0)
		return rc;
	f = sb->priv;
	sb->pid = pid;
	f->watch = vmm_child_watch(sb->m->base, pid, fc_exited, f, err, errlen);
	if (f->watch == NULL) {
		sb->pid = 0;
		f->op = FC_IDLE;
		event_del(f->deadline_ev);
		return -ESRCH;
	}
	fc_step(f, 0, NULL, NULL);
	return 0;
}

static void
fe_release(struct vmm_sandbox *sb)
{
	struct fc *f = sb->priv;

	if (f == NULL)
		return;
	vmm_child_unwatch(f->watch);
	fc_http_reset(f);
	event_free(f->poll_ev);
	event_free(f->deadline_ev);
	event_free(f->retry_ev);
	free(f);
	sb->priv = NULL;
}

const struct vmm_backend vmm_backend_firecracker = {
	.name = "firecracker",
	.boot = fe_boot,
	.pause = fe_pause,
	.cont = fe_cont,
	.suspend = fe_suspend,
	.stop = fe_stop,
	.kill = fe_kill,
	.adopt = fe_adopt,
	.release = fe_release,
};
