/*
 * test_vmm_mock_firecracker.c — libvmm's firecracker backend against a
 * MOCK Firecracker: Firecracker cannot run on the build machines, so
 * this program doubles as a fake `firecracker --api-sock PATH --id ID`
 * that answers its HTTP API as the published OpenAPI description
 * (firecracker.yaml) says: 204 on success, 400 with {"fault_message"} on
 * a bad or out-of-order request, required fields and enums checked,
 * snapshot/create only when Paused, snapshot/load only before any
 * configuration. On InstanceStart it prints the guest's ready line on its
 * stdout (Firecracker's serial console). Every request is appended to
 * <state>/<id>/fc-requests.log so the test can check what was sent.
 *
 * The test drives a real manager through create, pause, resume,
 * suspend, resume from the snapshot (network_overrides), a snapshot that
 * cannot be written, a corrupt snapshot, a killed process and delete;
 * then, for a template with a guest agent, the pause and suspend that
 * wait for the guest's reclaim (vmm_config's sleep_prepare) and are
 * given up when activity or a wake comes meanwhile; a create past
 * vm_max_resident, which waits for the suspend it starts; and, under
 * vm_max_resident 2 with suspends held, two creates at once (a victim
 * each, both counted from admission, each run when its own victim's
 * suspend ends), a wake whose victim's suspend fails (it fails at the
 * cap), and a victim woken the moment its suspend ends (it queues behind
 * the wake it made room for): never more than two VMMs.
 * No root (taps are "external"), no VM.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "tap.h"
#include "vmm.h"

/* ================= the mock Firecracker ================= */

static char fk_id[64], fk_log[PATH_MAX];
static const char *fk_state = "Not started";
static int fk_configured, fk_kernel;

static void
fk_reply(int fd, int status, const char *fault)
{
	char buf[1024], body[700];
	int n;

	if (status == 204) {
		n = snprintf(buf, sizeof(buf), "HTTP/1.1 204 \r\nServer: "
		    "Firecracker API\r\nConnection: keep-alive\r\n\r\n");
	} else {
		json_t *j = json_pack("{s:s}", "fault_message", fault);
		char *s = json_dumps(j, JSON_COMPACT);

		snprintf(body, sizeof(body), "%s", s);
		free(s);
		json_decref(j);
		n = snprintf(buf, sizeof(buf), "HTTP/1.1 %d \r\nServer: "
		    "Firecracker API\r\nConnection: keep-alive\r\nContent-Type: "
		    "application/json\r\nContent-Length: %zu\r\n\r\n%s", status,
		    strlen(body), body);
	}
	if (write(fd, buf, (size_t)n) < 0)
		_exit(3);
}

static void
fk_json(int fd, json_t *j)
{
	char buf[1024], *s = json_dumps(j, JSON_COMPACT);
	int n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 \r\nServer: Firecracker "
	    "API\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n"
	    "%s", strlen(s), s);

	free(s);
	if (write(fd, buf, (size_t)n) < 0)
		_exit(3);
}

#define FAULT(...) do {					\
	snprintf(fault, sizeof(fault), __VA_ARGS__);	\
	fk_reply(fd, 400, fault);			\
	return;						\
} while (0)

static int
is_str_field(json_t *b, const char *k)
{
	return json_is_string(json_object_get(b, k));
}

static void
fk_handle(int fd, const char *method, const char *path, json_t *b)
{
	char fault[600];
	const char *s;
	FILE *f;

	if (strcmp(method, "GET") == 0 && strcmp(path, "/") == 0) {
		json_t *j = json_pack("{s:s,s:s,s:s,s:s}", "id", fk_id, "state",
		    fk_state, "vmm_version", "1.7.0", "app_name", "Firecracker");

		fk_json(fd, j);
		json_decref(j);
		return;
	}
	if (b == NULL && strcmp(method, "GET") != 0)
		FAULT("An error occurred when deserializing the json body of a "
		    "request: expected a JSON object.");
	if (strcmp(method, "PUT") == 0 && strcmp(path, "/machine-config") == 0) {
		if (strcmp(fk_state, "Not started") != 0)
			FAULT("The update operation is not allowed after boot.");
		if (!json_is_integer(json_object_get(b, "vcpu_count")) ||
		    !json_is_integer(json_object_get(b, "mem_size_mib")))
			FAULT("missing field `vcpu_count` or `mem_size_mib`");
		if (json_integer_value(json_object_get(b, "vcpu_count")) < 1 ||
		    json_integer_value(json_object_get(b, "vcpu_count")) > 32)
			FAULT("Invalid vCPU number.");
		fk_configured = 1;
	} else if (strcmp(method, "PUT") == 0 &&
	    strcmp(path, "/boot-source") == 0) {
		if (strcmp(fk_state, "Not started") != 0)
			FAULT("The update operation is not allowed after boot.");
		if (!is_str_field(b, "kernel_image_path"))
			FAULT("missing field `kernel_image_path`");
		s = json_string_value(json_object_get(b, "kernel_image_path"));
		if (access(s, R_OK) < 0)
			FAULT("Cannot open kernel image: %s", strerror(errno));
		fk_configured = fk_kernel = 1;
	} else if (strcmp(method, "PUT") == 0 && strncmp(path, "/drives/", 8) == 0) {
		if (!is_str_field(b, "drive_id") ||
		    strcmp(json_string_value(json_object_get(b, "drive_id")),
		    path + 8) != 0)
			FAULT("The id from the path does not match the id from "
			    "the body!");
		if (!json_is_boolean(json_object_get(b, "is_root_device")))
			FAULT("missing field `is_root_device`");
		s = json_string_value(json_object_get(b, "path_on_host"));
		if (s == NULL || access(s, R_OK | W_OK) < 0)
			FAULT("Unable to open the block device backing file.");
		fk_configured = 1;
	} else if (strcmp(method, "PUT") == 0 &&
	    strncmp(path, "/network-interfaces/", 20) == 0) {
		if (!is_str_field(b, "iface_id") ||
		    strcmp(json_string_value(json_object_get(b, "iface_id")),
		    path + 20) != 0)
			FAULT("The id from the path does not match the id from "
			    "the body!");
		if (!is_str_field(b, "host_dev_name"))
			FAULT("missing field `host_dev_name`");
		s = json_string_value(json_object_get(b, "guest_mac"));
		if (s != NULL && strlen(s) != 17)
			FAULT("Invalid MAC address: %s", s);
		fk_configured = 1;
	} else if (strcmp(method, "PUT") == 0 && strcmp(path, "/actions") == 0) {
		s = json_string_value(json_object_get(b, "action_type"));
		if (s == NULL || (strcmp(s, "InstanceStart") != 0 &&
		    strcmp(s, "SendCtrlAltDel") != 0 &&
		    strcmp(s, "FlushMetrics") != 0))
			FAULT("unknown variant in action_type");
		if (strcmp(s, "InstanceStart") == 0) {
			if (!fk_kernel)
				FAULT("Cannot start microvm without kernel "
				    "configuration.");
			if (strcmp(fk_state, "Not started") != 0)
				FAULT("The requested operation is not supported "
				    "after starting the microVM.");
			fk_state = "Running";
			fk_reply(fd, 204, NULL);
			/* the guest's serial console */
			printf("[    0.000000] Linux version 6.1.0 (mock)\n"
			    "berth-guest: ready 10.200.0.2\n");
			fflush(stdout);
			return;
		}
		if (strcmp(s, "SendCtrlAltDel") == 0) {
			fk_reply(fd, 204, NULL);
			_exit(0);
		}
	} else if (strcmp(method, "PATCH") == 0 && strcmp(path, "/vm") == 0) {
		s = json_string_value(json_object_get(b, "state"));
		if (s == NULL || (strcmp(s, "Paused") != 0 &&
		    strcmp(s, "Resumed") != 0))
			FAULT("unknown variant in state, expected `Paused` or "
			    "`Resumed`");
		if (strcmp(fk_state, "Not started") == 0)
			FAULT("The requested operation is not supported before "
			    "starting the microVM.");
		fk_state = strcmp(s, "Paused") == 0 ? "Paused" : "Running";
	} else if (strcmp(method, "PUT") == 0 &&
	    strcmp(path, "/snapshot/create") == 0) {
		const char *sp = json_string_value(json_object_get(b,
		    "snapshot_path"));
		const char *mp = json_string_value(json_object_get(b,
		    "mem_file_path"));

		s = json_string_value(json_object_get(b, "snapshot_type"));
		if (sp == NULL || mp == NULL)
			FAULT("missing field `snapshot_path` or `mem_file_path`");
		if (s != NULL && strcmp(s, "Full") != 0 && strcmp(s, "Diff") != 0)
			FAULT("unknown variant in snapshot_type");
		if (strcmp(fk_state, "Paused") != 0)
			FAULT("Cannot create snapshot: the microVM is not paused.");
		{
			/* the test holds the snapshot's end while this file
			 * is there (a slow suspend, for the caps) */
			char hold[PATH_MAX + 16], *sl;

			snprintf(hold, sizeof(hold), "%s", fk_log);
			if ((sl = strrchr(hold, '/')) != NULL)
				snprintf(sl + 1, sizeof(hold) -
				    (size_t)(sl + 1 - hold), "hold-snapshot");
			while (access(hold, F_OK) == 0)
				usleep(10000);
		}
		if ((f = fopen(sp, "w")) == NULL)
			FAULT("Cannot create snapshot: %s: %s", sp,
			    strerror(errno));
		fprintf(f, "FCSNAP %s\n", fk_id);
		fclose(f);
		if ((f = fopen(mp, "w")) == NULL)
			FAULT("Cannot create memory file: %s", strerror(errno));
		fprintf(f, "guest memory\n");
		fclose(f);
	} else if (strcmp(method, "PUT") == 0 &&
	    strcmp(path, "/snapshot/load") == 0) {
		json_t *mb = json_object_get(b, "mem_backend"), *no;
		char line[64] = "";

		if (fk_configured || strcmp(fk_state, "Not started") != 0)
			FAULT("Loading a microVM snapshot not allowed after "
			    "configuring boot-specific resources.");
		if (!is_str_field(b, "snapshot_path"))
			FAULT("missing field `snapshot_path`");
		if (mb != NULL) {
			s = json_string_value(json_object_get(mb, "backend_type"));
			if (s == NULL || (strcmp(s, "File") != 0 &&
			    strcmp(s, "Uffd") != 0) ||
			    !is_str_field(mb, "backend_path"))
				FAULT("mem_backend: backend_type (File, Uffd) and "
				    "backend_path are required");
		} else if (!is_str_field(b, "mem_file_path")) {
			FAULT("missing field `mem_backend`");
		}
		no = json_object_get(b, "network_overrides");
		if (no != NULL) {
			size_t i;
			json_t *o;

			if (!json_is_array(no))
				FAULT("network_overrides must be an array");
			json_array_foreach(no, i, o)
				if (!is_str_field(o, "iface_id") ||
				    !is_str_field(o, "host_dev_name"))
					FAULT("network_overrides[%zu]: iface_id and "
					    "host_dev_name are required", i);
		}
		s = json_string_value(json_object_get(b, "snapshot_path"));
		if ((f = fopen(s, "r")) == NULL)
			FAULT("Load snapshot error: Cannot open snapshot file: "
			    "%s", strerror(errno));
		if (fgets(line, sizeof(line), f) == NULL)
			line[0] = '\0';
		fclose(f);
		if (strncmp(line, "FCSNAP ", 7) != 0)
			FAULT("Load snapshot error: Failed to restore from "
			    "snapshot: Failed to get snapshot state from file: "
			    "Failed to load snapshot state from file: Snapshot "
			    "file is smaller than CRC length.");
		fk_state = json_is_true(json_object_get(b, "resume_vm")) ?
		    "Running" : "Paused";
	} else {
		FAULT("Invalid request method and/or path: %s %s.", method,
		    path);
	}
	fk_reply(fd, 204, NULL);
}

static void
fk_conn(int fd)
{
	char buf[65536], method[16], path[256], *hend, *p;
	size_t have = 0, clen, hlen;
	ssize_t n;
	FILE *lf;
	json_t *b;

	for (;;) {
		while ((hend = memmem(buf, have, "\r\n\r\n", 4)) == NULL) {
			n = read(fd, buf + have, sizeof(buf) - have - 1);
			if (n <= 0)
				return;
			have += (size_t)n;
		}
		hlen = (size_t)(hend - buf) + 4;
		buf[have] = '\0';
		clen = 0;
		for (p = buf; p < hend; p = strstr(p, "\r\n") + 2)
			if (strncasecmp(p, "Content-Length:", 15) == 0)
				clen = strtoul(p + 15, NULL, 10);
		while (have < hlen + clen) {
			n = read(fd, buf + have, sizeof(buf) - have - 1);
			if (n <= 0)
				return;
			have += (size_t)n;
		}
		if (sscanf(buf, "%15s %255s", method, path) != 2)
			return;
		b = clen ? json_loadb(buf + hlen, clen, 0, NULL) : NULL;
		if ((lf = fopen(fk_log, "a")) != NULL) {
			fprintf(lf, "%s %s %.*s\n", method, path, (int)clen,
			    buf + hlen);
			fclose(lf);
		}
		fk_handle(fd, method, path, b);
		json_decref(b);
		memmove(buf, buf + hlen + clen, have - hlen - clen);
		have -= hlen + clen;
	}
}

static int
fake_firecracker(int argc, char **argv)
{
	struct sockaddr_un sun;
	const char *sock = NULL;
	char *slash;
	int i, ls, fd;

	for (i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--api-sock") == 0)
			sock = argv[++i];
		else if (strcmp(argv[i], "--id") == 0)
			snprintf(fk_id, sizeof(fk_id), "%s", argv[++i]);
	}
	if (sock == NULL)
		return 2;
	snprintf(fk_log, sizeof(fk_log), "%s", sock);
	if ((slash = strrchr(fk_log, '/')) != NULL)
		snprintf(slash + 1, sizeof(fk_log) - (size_t)(slash + 1 - fk_log),
		    "fc-requests.log");
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(ls, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		fprintf(stderr, "Failed to open the API socket: %s\n",
		    strerror(errno));
		return 1;
	}
	listen(ls, 8);
	for (;;) {
		if ((fd = accept(ls, NULL, NULL)) < 0)
			continue;
		fk_conn(fd);
		close(fd);
	}
}

/* ================= the test ================= */

static struct event_base *base;
static int done_ok, done_n;
static char done_reason[VMM_ERRLEN];
static char last_event[VMM_ERRLEN];
static char events[2048];	/* "op/cause/state " of every event */
static char reasons[4096];	/* "id: reason\n" of every suspend event */
static int done_cap;		/* the last callback's vmm_info.cap_refused */

/* The caps' tests: the sandboxes watched, and the most of them that had
 * a VMM at once, seen at every event and state change. */
static struct vmm_sandbox *watched[8];
static int nwatched, vmms_max;

static int
vmms_now(void)
{
	struct vmm_info i;
	int k, n = 0;

	for (k = 0; k < nwatched; k++) {
		vmm_sandbox_info(watched[k], &i);
		n += i.pid > 0;
	}
	return n;
}

static void
vmms_seen(void)
{
	int n = vmms_now();

	if (n > vmms_max)
		vmms_max = n;
}

static void
on_state(struct vmm_sandbox *sb, enum vmm_state old, enum vmm_state now,
    void *arg)
{
	(void)sb;
	(void)old;
	(void)now;
	(void)arg;
	vmms_seen();
}

static void
on_done(struct vmm_sandbox *sb, enum vmm_op op, int ok_, const char *reason,
    uint64_t ms, void *arg)
{
	(void)sb;
	(void)op;
	struct vmm_info i;

	(void)ms;
	(void)arg;
	vmm_sandbox_info(sb, &i);
	done_cap = i.cap_refused;
	done_ok = ok_;
	done_n++;
	snprintf(done_reason, sizeof(done_reason), "%s", reason);
	event_base_loopbreak(base);
}

/* vmm_config's sleep_prepare: recorded, answered by the test */
static int prep_n;
static char prep_id[64];

static int
test_prepare(const char *id, void *arg)
{
	(void)arg;
	prep_n++;
	snprintf(prep_id, sizeof(prep_id), "%s", id);
	return 0;
}

static void
on_event(struct vmm_sandbox *sb, const struct vmm_event *ev, void *arg)
{
	(void)sb;
	(void)arg;
	snprintf(last_event, sizeof(last_event), "%s %s ok=%d %s %s",
	    vmm_op_name(ev->op), ev->id, ev->ok, vmm_state_name(ev->state),
	    ev->reason);
	snprintf(events + strlen(events), sizeof(events) - strlen(events),
	    "%s/%s/%s ", vmm_op_name(ev->op), ev->cause,
	    vmm_state_name(ev->state));
	if (ev->op == VMM_OP_SUSPEND)
		snprintf(reasons + strlen(reasons), sizeof(reasons) -
		    strlen(reasons), "%s: %s\n", ev->id, ev->reason);
	vmms_seen();
	if (ev->op == VMM_OP_EXIT || strcmp(ev->cause, "lifetime") == 0 ||
	    (ev->op == VMM_OP_SUSPEND && strcmp(ev->cause, "idle") == 0))
		event_base_loopbreak(base);
}

/* Run the loop until the operation's callback (or 5 s). */
static int
wait_done(int rc, const char *what, char *err)
{
	struct timeval tv = { 5, 0 }, t0, t;
	int before = done_n;

	if (rc < 0) {
		diag("%s refused: %s", what, err);
		return 0;
	}
	/* (a loop ended early by a loopexit left from an earlier run,
	 * whose loop a callback broke, goes on) */
	gettimeofday(&t0, NULL);
	do {
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		gettimeofday(&t, NULL);
	} while (done_n == before && (t.tv_sec - t0.tv_sec) * 1000000 +
	    (t.tv_usec - t0.tv_usec) < 5000000);
	if (done_n == before) {
		diag("%s: no completion within 5 s", what);
		return 0;
	}
	return done_ok;
}

static int
log_has(const char *dir, const char *needle)
{
	char path[PATH_MAX], line[4096];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "%s/fc-requests.log", dir);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static int
exists(const char *dir, const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* ---- the caps with several operations at once ---- */

/* Run the loop for ms. */
static void
spin(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Run the loop until cond(sb) (or 5 s): 1 if it came. */
static int
spin_until(int (*cond)(struct vmm_sandbox *), struct vmm_sandbox *sb)
{
	int i;

	for (i = 0; i < 250 && !cond(sb); i++)
		spin(20);
	return cond(sb);
}

static int
is_running(struct vmm_sandbox *sb)
{
	struct vmm_info i;

	vmm_sandbox_info(sb, &i);
	return !i.busy && i.state == VMM_RUNNING;
}

static int
is_suspended(struct vmm_sandbox *sb)
{
	struct vmm_info i;

	vmm_sandbox_info(sb, &i);
	return !i.busy && i.state == VMM_SUSPENDED;
}

static int
is_suspending(struct vmm_sandbox *sb)
{
	struct vmm_info i;

	vmm_sandbox_info(sb, &i);
	return i.busy && i.op == VMM_OP_SUSPEND && i.pid > 0;
}

/* admitted, no VMM of its own yet */
static int
is_waiting(struct vmm_sandbox *sb)
{
	struct vmm_info i;

	vmm_sandbox_info(sb, &i);
	return i.busy && i.pid == 0 && (i.op == VMM_OP_CREATE ||
	    i.op == VMM_OP_RESUME);
}

/* the mock holds sb's snapshot (its suspend) while the file is there */
static void
hold(struct vmm_sandbox *sb, int on)
{
	struct vmm_info i;
	char p[PATH_MAX + 32];
	FILE *f;

	vmm_sandbox_info(sb, &i);
	snprintf(p, sizeof(p), "%s/hold-snapshot", i.dir);
	if (!on)
		unlink(p);
	else if ((f = fopen(p, "w")) != NULL)
		fclose(f);
}

static int woken_victim_rc = 1;

/* A wake of the victim that comes the moment its suspend ends (as
 * berthd's wake joins a suspend under way and wakes it after). */
static void
wake_victim(struct vmm_sandbox *sb, enum vmm_op op, int ok_,
    const char *reason, uint64_t ms, void *arg)
{
	char err[VMM_ERRLEN];

	(void)op;
	(void)ok_;
	(void)reason;
	(void)ms;
	(void)arg;
	woken_victim_rc = vmm_sandbox_resume(sb, on_done, NULL, err,
	    sizeof(err));
	if (woken_victim_rc < 0)
		diag("the victim's wake: %s", err);
}

/*
 * vm_max_resident 2 with creates and wakes at once: each past the cap
 * gets its own victim, is counted from its admission (a third finds
 * nothing to suspend, though neither waiting has a VMM yet), and runs
 * when its own victim's suspend ends, the first admitted first; a failed
 * suspend fails the wake it was for (at the cap); a victim woken the
 * moment its suspend ends queues behind the one it made room for. At
 * no time more than two VMMs.
 */
static void
test_caps_concurrent(struct vmm *m, struct vmm_sandbox_spec *spec)
{
	struct vmm_sandbox *s5, *s6, *s7, *s8, *s9;
	struct vmm_info i7;
	char err[VMM_ERRLEN], p[PATH_MAX + 32];
	int rc7, rc8, rc9, before;

	spec->id = "fc5";
	ok(wait_done(vmm_sandbox_create(m, spec, on_done, NULL, &s5, err,
	    sizeof(err)), "create", err), "create fc5");
	spec->id = "fc6";
	ok(wait_done(vmm_sandbox_create(m, spec, on_done, NULL, &s6, err,
	    sizeof(err)), "create fc6", err), "create fc6 (more recently "
	    "active than fc5)");
	watched[0] = s5;
	watched[1] = s6;
	nwatched = 2;
	vmms_max = 0;
	hold(s5, 1);
	hold(s6, 1);
	vmm_set_limits(m, 0, 0, 0, 2);
	reasons[0] = '\0';

	/* two creates past the cap, back to back */
	before = done_n;
	spec->id = "fc7";
	rc7 = vmm_sandbox_create(m, spec, on_done, NULL, &s7, err, sizeof(err));
	spec->id = "fc8";
	rc8 = vmm_sandbox_create(m, spec, on_done, NULL, &s8, err, sizeof(err));
	ok(rc7 == 0 && rc8 == 0, "vm_max_resident 2 reached: two creates "
	    "taken at once (%s)", rc7 == 0 && rc8 == 0 ? "ok" : err);
	if (rc7 != 0 || rc8 != 0)
		return;
	watched[2] = s7;
	watched[3] = s8;
	nwatched = 4;
	spin(300);
	ok(is_suspending(s5) && is_suspending(s6), "... two victims, one "
	    "each: fc5 and fc6 both being suspended");
	ok(strstr(reasons, "fc5") == NULL && strstr(reasons, "fc6") == NULL,
	    "... neither suspend has ended (held)");
	ok(is_waiting(s7) && is_waiting(s8) && done_n == before,
	    "... fc7 and fc8 wait, no VMM of their own");
	/* the reservation: both count from their admission */
	spec->id = "fc9";
	rc9 = vmm_sandbox_create(m, spec, on_done, NULL, &s9, err,
	    sizeof(err));
	ok(rc9 == -EUSERS && strstr(err, "vm_max_resident 2 reached") != NULL,
	    "... a third create is refused at once: fc7 and fc8 count though "
	    "neither has a VMM, and nothing else is idle (%s)", err);

	/* fc5's suspend ends: its room is fc7's (admitted first) */
	hold(s5, 0);
	ok(spin_until(is_running, s7), "fc5's suspend ended: fc7 runs");
	ok(is_suspended(s5) && is_suspending(s6) && is_waiting(s8),
	    "... fc8 waits on for its own victim, fc6, still suspending");
	hold(s6, 0);
	ok(spin_until(is_running, s8) && is_suspended(s6),
	    "fc6's suspend ended: fc8 runs");
	ok(strstr(reasons, "fc5: suspended: vm_max_resident 2 reached (a "
	    "create of fc7)") != NULL && strstr(reasons, "fc6: suspended: "
	    "vm_max_resident 2 reached (a create of fc8)") != NULL,
	    "... each suspend names the create it was for");
	is_int(vmms_max, 2, "... never more than two VMMs at once");

	/* a failed eviction: the wake it was for fails at the cap */
	vmm_activity(s8);		/* fc7 the least recently active */
	vmm_sandbox_info(s7, &i7);
	snprintf(p, sizeof(p), "%s/snap/state.new", i7.dir);
	mkdir(p, 0700);			/* its snapshot cannot be written */
	reasons[0] = '\0';
	ok(!wait_done(vmm_sandbox_resume(s5, on_done, NULL, err, sizeof(err)),
	    "wake fc5", err) && done_cap == 1 &&
	    strstr(done_reason, "vm_max_resident 2 reached, and suspending "
	    "fc7 to make room failed") != NULL, "a wake whose victim's suspend "
	    "fails: fails at the cap, naming it (%s)", done_reason);
	if (!ok(is_suspended(s5) && is_running(s7) && is_running(s8),
	    "... fc5 stays suspended, fc7 runs on, nothing half-done")) {
		struct vmm_sandbox *d[3] = { s5, s7, s8 };
		struct vmm_info di;
		int k;

		for (k = 0; k < 3; k++) {
			vmm_sandbox_info(d[k], &di);
			diag("%s: %s busy %d op %s pid %d", di.id,
			    vmm_state_name(di.state), di.busy,
			    vmm_op_name(di.op), (int)di.pid);
		}
		diag("events: %s; suspends: %s", events, reasons);
	}
	rmdir(p);
	is_int(vmms_max, 2, "... never more than two VMMs");

	/* a victim woken the moment its suspend ends is no room: it queues
	 * behind the wake it made room for, and makes room of its own */
	vmm_activity(s8);		/* fc7 the least recently active */
	hold(s7, 1);
	ok(vmm_sandbox_resume(s5, on_done, NULL, err, sizeof(err)) == 0,
	    "wake fc5 again (fc7 the victim, its suspend held)");
	spin(200);
	ok(is_suspending(s7) && is_waiting(s5), "... fc7 suspending, fc5 "
	    "waits");
	ok(vmm_sandbox_suspend(s7, wake_victim, NULL, err, sizeof(err)) == 0,
	    "... a wake of fc7 joins its suspend, to wake it after");
	hold(s8, 1);
	hold(s7, 0);
	ok(spin_until(is_running, s5), "fc7's suspend ended: fc5 runs");
	ok(woken_victim_rc == 0 && is_waiting(s7) && is_suspending(s8),
	    "... fc7's wake came at once and waits behind it, fc8 being "
	    "suspended for it");
	hold(s8, 0);
	ok(spin_until(is_running, s7) && is_suspended(s8),
	    "fc8's suspend ended: fc7 runs");
	is_int(vmms_max, 2, "never more than two VMMs at once");

	vmm_set_limits(m, 0, 0, 0, 0);
	nwatched = 0;
	ok(wait_done(vmm_sandbox_delete(s5, on_done, NULL, err, sizeof(err)),
	    "delete fc5", err) && wait_done(vmm_sandbox_delete(s6, on_done,
	    NULL, err, sizeof(err)), "delete fc6", err) &&
	    wait_done(vmm_sandbox_delete(s7, on_done, NULL, err, sizeof(err)),
	    "delete fc7", err) && wait_done(vmm_sandbox_delete(s8, on_done,
	    NULL, err, sizeof(err)), "delete fc8", err), "delete fc5 to fc8");
}

int
main(int argc, char **argv)
{
	char tmp[] = "/tmp/fcmock.XXXXXX", self[PATH_MAX], p[PATH_MAX];
	char err[VMM_ERRLEN], dir[PATH_MAX];
	struct vmm_template tpl;
	struct vmm_sandbox_spec spec;
	struct vmm_config cfg;
	struct vmm_sandbox *sb;
	struct vmm_info info;
	struct vmm *m;
	ssize_t n;
	FILE *f;

	if (argc > 1 && strcmp(argv[1], "--api-sock") == 0)
		return fake_firecracker(argc, argv);

	signal(SIGPIPE, SIG_IGN);
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0)
		return skip_all("no /proc/self/exe"), 0;
	self[n] = '\0';
	if (mkdtemp(tmp) == NULL)
		return 1;
	snprintf(p, sizeof(p), "%s/vmlinuz", tmp);
	fclose(fopen(p, "w"));
	snprintf(p, sizeof(p), "%s/initrd", tmp);
	fclose(fopen(p, "w"));

	base = event_base_new();
	memset(&cfg, 0, sizeof(cfg));
	snprintf(p, sizeof(p), "%s/st", tmp);
	cfg.state_dir = p;
	cfg.backend = "firecracker";
	cfg.vmm_binary = self;
	cfg.accel = VMM_ACCEL_TCG;
	cfg.external_taps = 1;
	cfg.mkfs = "true";
	cfg.disk_mib = 8;
	cfg.tsc_khz = 2000000;
	cfg.idle_pause_ms = cfg.idle_suspend_ms = VMM_NEVER;
	cfg.op_timeout_ms = 4000;
	cfg.ready_timeout_ms = 4000;
	cfg.on_event = on_event;
	cfg.on_state = on_state;
	cfg.sleep_prepare = test_prepare;
	m = vmm_new(base, &cfg, err, sizeof(err));
	if (!ok(m != NULL, "manager with backend firecracker (%s)",
	    m ? vmm_backend_name(m) : err))
		return done_testing();

	memset(&tpl, 0, sizeof(tpl));
	snprintf(p, sizeof(p), "%s/vmlinuz", tmp);
	tpl.kernel = strdup(p);
	snprintf(p, sizeof(p), "%s/initrd", tmp);
	tpl.initrd = strdup(p);
	tpl.cmdline = "console=ttyS0 reboot=k panic=1";
	memset(&spec, 0, sizeof(spec));
	spec.id = "fc1";
	spec.tpl = &tpl;
	spec.vcpus = 2;

	ok(wait_done(vmm_sandbox_create(m, &spec, on_done, NULL, &sb, err,
	    sizeof(err)), "create", err), "create -> running (%s)", done_reason);
	vmm_sandbox_info(sb, &info);
	snprintf(dir, sizeof(dir), "%s", info.dir);
	is_str(vmm_state_name(info.state), "running", "state running");
	ok(info.pid > 0, "a firecracker process (pid %d)", (int)info.pid);
	ok(log_has(dir, "PUT /machine-config {\"vcpu_count\":2,\"mem_size_mib\":256"),
	    "machine-config: vcpu_count, mem_size_mib");
	ok(log_has(dir, "berth.ip=10.200.0.2/30 berth.gw=10.200.0.1") &&
	    log_has(dir, "tsc_early_khz=2000000"),
	    "boot-source: boot_args carry the guest address");
	ok(log_has(dir, "PUT /drives/data {\"drive_id\":\"data\""),
	    "drives/data: the persistent disk");
	ok(log_has(dir, "\"host_dev_name\":\"bth0\"") &&
	    log_has(dir, "\"guest_mac\":\"02:"), "network-interfaces/eth0: tap + MAC");
	ok(log_has(dir, "PUT /actions {\"action_type\":\"InstanceStart\"}"),
	    "actions: InstanceStart");

	ok(wait_done(vmm_sandbox_pause(sb, on_done, NULL, err, sizeof(err)),
	    "pause", err) && vmm_sandbox_state(sb) == VMM_PAUSED,
	    "pause -> paused (PATCH /vm Paused)");
	ok(log_has(dir, "PATCH /vm {\"state\":\"Paused\"}"), "PATCH /vm Paused sent");
	ok(vmm_sandbox_pause(sb, on_done, NULL, err, sizeof(err)) == 0 &&
	    wait_done(0, "pause again", err), "pause when paused: no-op success");
	ok(wait_done(vmm_sandbox_resume(sb, on_done, NULL, err, sizeof(err)),
	    "resume", err) && vmm_sandbox_state(sb) == VMM_RUNNING,
	    "resume -> running (PATCH /vm Resumed)");

	ok(wait_done(vmm_sandbox_suspend(sb, on_done, NULL, err, sizeof(err)),
	    "suspend", err) && vmm_sandbox_state(sb) == VMM_SUSPENDED,
	    "suspend -> suspended (%s)", done_reason);
	vmm_sandbox_info(sb, &info);
	ok(info.pid == 0 && exists(dir, "snap/state") && exists(dir, "snap/mem"),
	    "no process, snapshot state + memory files");
	ok(log_has(dir, "PUT /snapshot/create {\"snapshot_type\":\"Full\""),
	    "snapshot/create Full");
	ok(vmm_sandbox_pause(sb, on_done, NULL, err, sizeof(err)) == -EPERM,
	    "pause when suspended: EPERM (%s)", err);

	/* two wakes share one resume */
	{
		int a = vmm_sandbox_resume(sb, on_done, NULL, err, sizeof(err));
		int b = vmm_sandbox_resume(sb, on_done, NULL, err, sizeof(err));
		int before = done_n;

		ok(a == 0 && b == 0, "a second resume joins the first");
		wait_done(0, "resume", err);
		if (done_n - before < 2)
			wait_done(0, "resume (2nd caller)", err);
		ok(done_n - before == 2 && done_ok &&
		    vmm_sandbox_state(sb) == VMM_RUNNING,
		    "both callers told: running from the snapshot");
	}
	ok(log_has(dir, "\"network_overrides\":[{\"iface_id\":\"eth0\","
	    "\"host_dev_name\":\"bth0\"}]") && log_has(dir, "\"resume_vm\":true") &&
	    log_has(dir, "\"backend_type\":\"File\""),
	    "snapshot/load: mem_backend File, resume_vm, network_overrides");
	ok(!exists(dir, "snap/state"), "the snapshot is consumed");

	/* a snapshot that cannot be written: the VM stays running */
	snprintf(p, sizeof(p), "%s/snap/state.new", dir);
	mkdir(p, 0700);
	ok(!wait_done(vmm_sandbox_suspend(sb, on_done, NULL, err, sizeof(err)),
	    "suspend (unwritable)", err) && vmm_sandbox_state(sb) == VMM_RUNNING &&
	    strstr(done_reason, "Cannot create snapshot") != NULL,
	    "failed snapshot -> still running: %s", done_reason);
	rmdir(p);

	/* a corrupt snapshot: failed, with Firecracker's fault message */
	ok(wait_done(vmm_sandbox_suspend(sb, on_done, NULL, err, sizeof(err)),
	    "suspend", err), "suspend again");
	snprintf(p, sizeof(p), "%s/snap/state", dir);
	f = fopen(p, "w");
	fputs("garbage", f);
	fclose(f);
	ok(!wait_done(vmm_sandbox_resume(sb, on_done, NULL, err, sizeof(err)),
	    "resume (corrupt)", err) && vmm_sandbox_state(sb) == VMM_FAILED &&
	    strstr(done_reason, "Load snapshot error") != NULL,
	    "corrupt snapshot -> failed: %s", done_reason);

	/* start again, then the process dies behind our back */
	ok(wait_done(vmm_sandbox_start(sb, on_done, NULL, err, sizeof(err)),
	    "start", err) && vmm_sandbox_state(sb) == VMM_RUNNING,
	    "start from failed -> running");
	vmm_sandbox_info(sb, &info);
	kill(info.pid, SIGKILL);
	{
		struct timeval tv = { 5, 0 };

		last_event[0] = '\0';
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	ok(strncmp(last_event, "exit fc1 ok=0 failed", 20) == 0 &&
	    strstr(last_event, "signal 9") != NULL, "kill -9 -> event: %s",
	    last_event);

	ok(wait_done(vmm_sandbox_start(sb, on_done, NULL, err, sizeof(err)),
	    "start", err), "start once more");

	/* idle policy: paused after 100 ms, suspended after 300 ms */
	{
		struct timeval tv = { 5, 0 };

		events[0] = '\0';
		vmm_activity(sb);
		vmm_sandbox_set_idle(sb, 100, 300, 0);
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		ok(strstr(events, "pause/idle/paused suspend/idle/suspended") !=
		    NULL && vmm_sandbox_state(sb) == VMM_SUSPENDED,
		    "idle: paused, then suspended (%s)", events);
		vmm_sandbox_set_idle(sb, VMM_NEVER, VMM_NEVER, 0);
		ok(wait_done(vmm_sandbox_resume(sb, on_done, NULL, err,
		    sizeof(err)), "resume", err), "woken after the idle suspend");

		/* max_lifetime (from creation, long past): stopped */
		events[0] = '\0';
		vmm_sandbox_set_idle(sb, 0, 0, 1);
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		ok(strstr(events, "stop/lifetime/stopped") != NULL &&
		    vmm_sandbox_state(sb) == VMM_STOPPED,
		    "max_lifetime: stopped (SendCtrlAltDel) (%s)", events);
		ok(log_has(dir, "{\"action_type\":\"SendCtrlAltDel\"}"),
		    "actions: SendCtrlAltDel");
		vmm_sandbox_set_idle(sb, VMM_NEVER, VMM_NEVER, VMM_NEVER);
	}
	ok(wait_done(vmm_sandbox_stop(sb, on_done, NULL, err, sizeof(err)),
	    "stop", err) && vmm_sandbox_state(sb) == VMM_STOPPED,
	    "stop when stopped: no-op success");
	ok(wait_done(vmm_sandbox_delete(sb, on_done, NULL, err, sizeof(err)),
	    "delete", err) && access(dir, F_OK) < 0 &&
	    vmm_sandbox_find(m, "fc1") == NULL, "delete: directory and object gone");
	is_int(prep_n, 0, "a template without a guest agent: no sleep_prepare");

	/* A template with a guest agent: its guest gives memory back
	 * before it sleeps (vmm_config's sleep_prepare), and activity
	 * meanwhile gives the sleep up. */
	tpl.agent = "berth.agent";
	spec.id = "fc2";
	ok(wait_done(vmm_sandbox_create(m, &spec, on_done, NULL, &sb, err,
	    sizeof(err)), "create", err), "create fc2 (an agent) -> running");
	vmm_sandbox_info(sb, &info);
	snprintf(dir, sizeof(dir), "%s", info.dir);
	ok(vmm_sandbox_pause(sb, on_done, NULL, err, sizeof(err)) == 0 &&
	    prep_n == 1 && strcmp(prep_id, "fc2") == 0,
	    "a pause asks sleep_prepare first, by id");
	vmm_sandbox_info(sb, &info);
	ok(info.busy && info.preparing && info.state == VMM_RUNNING &&
	    !log_has(dir, "PATCH /vm {\"state\":\"Paused\"}"),
	    "... the guest runs, nothing asked of the VMM yet");
	vmm_sleep_prepared(m, "fc2");
	ok(wait_done(0, "pause", err) && vmm_sandbox_state(sb) == VMM_PAUSED &&
	    log_has(dir, "PATCH /vm {\"state\":\"Paused\"}"),
	    "... vmm_sleep_prepared: then the pause (%s)", done_reason);
	ok(wait_done(vmm_sandbox_suspend(sb, on_done, NULL, err, sizeof(err)),
	    "suspend", err) && prep_n == 1,
	    "a suspend from paused: nothing to prepare (the guest is stopped)");
	ok(wait_done(vmm_sandbox_resume(sb, on_done, NULL, err, sizeof(err)),
	    "resume", err) && vmm_sandbox_state(sb) == VMM_RUNNING,
	    "resume from the snapshot");

	ok(vmm_sandbox_suspend(sb, on_done, NULL, err, sizeof(err)) == 0 &&
	    prep_n == 2, "a suspend of a running one prepares too");
	vmm_activity(sb);
	vmm_sandbox_info(sb, &info);
	ok(info.busy && info.preparing, "... activity meanwhile does not give "
	    "up one the API asked for (what it sees may be older, reported "
	    "late)");
	vmm_sleep_prepared(m, "fc2");
	ok(wait_done(0, "suspend", err) &&
	    vmm_sandbox_state(sb) == VMM_SUSPENDED, "... it goes on: suspended");
	ok(wait_done(vmm_sandbox_resume(sb, on_done, NULL, err, sizeof(err)),
	    "resume", err) && vmm_sandbox_state(sb) == VMM_RUNNING,
	    "resume from the snapshot again");

	/* the idle policy's pause: activity or a wake gives it up */
	done_n = 0;
	vmm_sandbox_set_idle(sb, 50, VMM_NEVER, VMM_NEVER);
	{
		struct timeval tv = { 0, 20000 };
		int i;

		for (i = 0; i < 100 && prep_n == 2; i++) {
			event_base_loopexit(base, &tv);
			event_base_dispatch(base);
		}
	}
	vmm_sandbox_set_idle(sb, VMM_NEVER, VMM_NEVER, VMM_NEVER);
	vmm_sandbox_info(sb, &info);
	ok(prep_n == 3 && info.busy && info.preparing &&
	    info.op == VMM_OP_PAUSE, "the idle policy's pause prepares too");
	vmm_activity(sb);
	{
		struct timeval tv = { 0, 100000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	vmm_sandbox_info(sb, &info);
	ok(info.state == VMM_RUNNING && !info.busy && info.reason[0] == '\0' &&
	    strstr(last_event, "abandoned") != NULL,
	    "activity meanwhile: the pause is given up, it runs, no failure "
	    "recorded (%s)", last_event);
	vmm_sleep_prepared(m, "fc2");	/* the guest's late answer */
	vmm_sandbox_info(sb, &info);
	ok(info.state == VMM_RUNNING && !info.busy,
	    "... the guest's late answer changes nothing");

	vmm_sandbox_set_idle(sb, 50, VMM_NEVER, VMM_NEVER);
	{
		struct timeval tv = { 0, 20000 };
		int i;

		for (i = 0; i < 100 && prep_n == 3; i++) {
			event_base_loopexit(base, &tv);
			event_base_dispatch(base);
		}
	}
	vmm_sandbox_set_idle(sb, VMM_NEVER, VMM_NEVER, VMM_NEVER);
	ok(prep_n == 4 && vmm_sandbox_resume(sb, on_done, NULL, err,
	    sizeof(err)) == 0, "a wake while the idle pause prepares");
	ok(wait_done(0, "resume", err) && vmm_sandbox_state(sb) == VMM_RUNNING &&
	    strstr(last_event, "resume") != NULL,
	    "... answers at once: running (%s)", last_event);
	ok(strstr(events, "pause/idle/running") != NULL,
	    "... the pauses given up are events (pause/idle/running)");
	ok(wait_done(vmm_sandbox_delete(sb, on_done, NULL, err, sizeof(err)),
	    "delete", err), "delete fc2");

	/* The caps: a create past vm_max_resident 1 suspends the least
	 * recently active one and waits for that suspend to end before
	 * its own VMM starts: the host never holds two. */
	{
		struct vmm_sandbox *sb4 = NULL;
		struct vmm_info i4;
		char hold[PATH_MAX + 16];
		struct timeval tv = { 0, 500000 };
		const char *s3, *c4;
		int rc, before;

		tpl.agent = NULL;
		spec.id = "fc3";
		ok(wait_done(vmm_sandbox_create(m, &spec, on_done, NULL, &sb,
		    err, sizeof(err)), "create", err), "create fc3");
		vmm_sandbox_info(sb, &info);
		snprintf(dir, sizeof(dir), "%s", info.dir);
		snprintf(hold, sizeof(hold), "%s/hold-snapshot", dir);
		fclose(fopen(hold, "w"));
		vmm_set_limits(m, 0, 0, 0, 1);
		events[0] = '\0';
		before = done_n;
		spec.id = "fc4";
		rc = vmm_sandbox_create(m, &spec, on_done, NULL, &sb4, err,
		    sizeof(err));
		ok(rc == 0, "vm_max_resident 1: a second create is taken (%s)",
		    rc == 0 ? "ok" : err);
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		vmm_sandbox_info(sb, &info);
		ok(info.busy && info.op == VMM_OP_SUSPEND && info.pid > 0,
		    "... fc3, the least recently active, is being suspended");
		vmm_sandbox_info(sb4, &i4);
		ok(done_n == before && i4.busy && i4.pid == 0 &&
		    i4.state == VMM_CREATING, "... fc4 waits for that suspend: "
		    "no VMM of its own yet (state %s, pid %d)",
		    vmm_state_name(i4.state), (int)i4.pid);
		unlink(hold);
		ok(wait_done(0, "create fc4", err) && done_n == before + 1 &&
		    vmm_sandbox_state(sb4) == VMM_RUNNING &&
		    vmm_sandbox_state(sb) == VMM_SUSPENDED,
		    "... the suspend ended: fc4 runs (%s)", done_reason);
		s3 = strstr(events, "suspend/capacity/suspended");
		c4 = strstr(events, "create/api/running");
		ok(s3 != NULL && c4 != NULL && s3 < c4,
		    "... fc3's suspend ended before fc4 ran (%s)", events);
		vmm_set_limits(m, 0, 0, 0, 0);
		ok(wait_done(vmm_sandbox_delete(sb4, on_done, NULL, err,
		    sizeof(err)), "delete", err) &&
		    wait_done(vmm_sandbox_delete(sb, on_done, NULL, err,
		    sizeof(err)), "delete", err), "delete fc3 and fc4");
	}

	test_caps_concurrent(m, &spec);

	vmm_free(m);
	free((char *)tpl.kernel);
	free((char *)tpl.initrd);
	event_base_free(base);
	snprintf(p, sizeof(p), "rm -rf '%s'", tmp);
	if (system(p) != 0)
		diag("cleanup of %s failed", tmp);
	return done_testing();
}
