/*
 * qemu.c — libvmm backend "qemu": one qemu-system-x86_64 -M microvm per
 * sandbox, driven over QMP on <dir>/qmp.sock.
 *
 * Guest RAM is a memory-backend-file (share=on) at <dir>/mem on disk, and
 * migration runs with x-ignore-shared: a snapshot then holds only device
 * state (tens of KiB) and the RAM file itself is the memory image, so a
 * suspend takes milliseconds and frees the memory once qemu exits, and a
 * restore is a new qemu with the same command line plus -incoming defer
 * (QEMU 7.2 has no file: migration URI; exec:cat does the same job).
 *
 * Standby: that new qemu's start-up (exec, TCG and device set-up, QMP)
 * is most of a restore's time, and none of it depends on the snapshot.
 * So when the manager asks, a suspended sandbox gets its restore qemu
 * started right away, and it loads the snapshot (device state only) and
 * stays stopped. It maps the RAM file but touches none of it, so it
 * costs only its own memory, and the snapshot stays the sandbox: nothing
 * has run since. A restore then promotes it and sends `cont`. If it died
 * meanwhile or the snapshot file changed, the restore starts qemu anew.
 *
 * Each operation is a small state machine advanced by QMP replies, the
 * console poller, the child-exit watcher and timers; whichever comes
 * first decides, and qm_done() makes sure only one answer goes back.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <event2/event.h>
#include <jansson.h>

#include "backend.h"
#include "console.h"
#include "nc_link.h"
#include "qmp.h"

#define QM_POLL_MS	5	/* query-migrate / query-status polling */
#define QM_CONT_TRIES	400	/* a capture's cont asked again: 2 s of polls */
#define QM_MERGE_MS	(30 * 60 * 1000)	/* a merge is cancelled after */
#define QM_MERGE_POLL_MS 50
#define QM_CONSOLE_MS	20	/* console.log polling while booting */
#define QM_CONNECT_MS	5	/* QMP socket connect retries */
#define QM_QUIT_MS	5000	/* quit -> exit, before SIGKILL */
#define QM_LOST_MS	1000	/* QMP gone, process alive: grace */

enum qm_op {
	QM_IDLE = 0,
	QM_BOOT,	/* fresh boot: QMP up and ready line seen */
	QM_RESTORE,	/* -incoming defer: caps, migrate-incoming, cont */
	QM_ADOPT,
	QM_PAUSE,
	QM_CONT,
	QM_SUSPEND,	/* stop, caps, migrate, poll, quit, exit */
	QM_STOP,	/* quit, exit */
	QM_KILL,	/* SIGKILL, exit */
	QM_CAPTURE,	/* a fork's source: stop, a new disk top, RAM and
			 * device state to a stream file, cont */
	QM_MERGE,	/* block-stream of the disk's layers into its top,
			 * the guest running: poll, dismiss */
};

/*
 * Where the operation in flight stands, named by what it waits for next
 * (a QMP answer unless said). q->op says whose state it is (QA_ adopt,
 * QR_ restore, QS_ suspend, QC_ capture, QG_ merge): every test of
 * q->step goes with one of q->op.
 */
enum qm_state {
	QM_FIRST = 0,	/* nothing asked yet, or an op without steps */
	QA_QMP,		/* adopt: QMP to come up */
	QA_CANCEL,	/* adopt: migrate_cancel's, or the poll's turn */
	QA_MIGRATE,	/* adopt: query-migrate's (is the migration over?) */
	QA_STATUS,	/* adopt: query-status's (what the guest is doing) */
	QA_CONT,	/* adopt: cont's, after a migration it cut */
	QR_QMP,		/* restore: the new qemu's QMP to come up */
	QR_CAPS,	/* restore: migrate-set-capabilities' */
	QR_INCOMING,	/* restore: migrate-incoming's */
	QR_LOADING,	/* restore: query-status's, polled while inmigrate */
	QR_CONT,	/* restore: cont's (a pool member's, a standby's too) */
	QR_IDENT,	/* restore: the clone's identity set (qm_ident_done) */
	QR_STANDBY,	/* restore: the standby loaded, to promote it */
	QS_STOP,	/* suspend: stop's (none if stopped already) */
	QS_CAPS,	/* suspend: migrate-set-capabilities' */
	QS_MIGRATE,	/* suspend: migrate's */
	QS_POLL,	/* suspend: query-migrate's, polled until done */
	QS_SYNC,	/* suspend: the RAM file punched, flushed (qm_sync_start) */
	QS_QUIT,	/* suspend: snapshot in place; qemu's exit after quit */
	QS_CONT,	/* suspend failed: cont's */
	QC_IMG,		/* capture: qemu-img making the new top (a child) */
	QC_TOP,		/* capture: the new top made: add-fd next */
	QC_ADD_FD,	/* capture: add-fd's */
	QC_BLOCKDEV,	/* capture: blockdev-add's */
	QC_CAPS,	/* capture: migrate-set-capabilities' */
	QC_PARAMS,	/* capture: migrate-set-parameters' */
	QC_MIGRATE,	/* capture: migrate's, then polls to pre-switchover */
	QC_DOWNTIME,	/* capture: migrate-set-parameters' (downtime) */
	QC_SWITCH,	/* capture: blockdev-snapshot's (the top switched) */
	QC_CONTINUE,	/* capture: migrate-continue's */
	QC_COMPLETE,	/* capture: query-migrate's, polled until done */
	QC_CONT,	/* capture: cont's (the source runs on) */
	QC_CANCEL,	/* capture failed: migrate_cancel's */
	QC_CONT_BACK,	/* capture failed: cont's */
	QC_STATUS,	/* capture failed: query-status's (does it run?) */
	QG_BLOCK,	/* merge: query-block's (the base's name) */
	QG_STREAM,	/* merge: block-stream's */
	QG_JOBS,	/* merge: query-block-jobs', polled until concluded */
	QG_CANCEL,	/* merge too slow: block-job-cancel's, then polls */
	QG_DISMISS,	/* merge: block-job-dismiss's */
};

/* The standby qemu's start-up (qm_sb_reply), by what it waits for. */
enum qm_sb_state {
	QSB_NONE = 0,	/* no standby, or its QMP not up yet */
	QSB_CAPS,	/* migrate-set-capabilities', then its split's end */
	QSB_INCOMING,	/* migrate-incoming's */
	QSB_STATUS,	/* query-status's, polled while inmigrate */
	QSB_LOADED,	/* nothing: loaded and stopped, for a restore */
};

struct qm {
	struct vmm_sandbox *sb;
	enum qm_op op;
	enum qm_state step;
	int expect_exit;	/* the process is meant to end now */
	enum vmm_state exit_state;	/* ... and then the sandbox is this */

	struct vmm_child *watch;
	struct vmm_qmp *qmp;
	struct event *connect_ev;	/* connect retries */
	struct event *poll_ev;		/* console / migration polling */
	struct event *deadline_ev;	/* the op's deadline */
	struct event *lost_ev;		/* QMP gone, process alive */

	off_t con_off;		/* console.log read position */
	char carry[128];	/* tail of the last read, for split lines */
	int ready_seen;
	int trial;		/* this boot is KVM's trial (accel.c) */
	int cont_tries;		/* a capture's cont refused while QEMU
				 * finishes the migration's clean-up */
	uint64_t boot_t0;
	uint64_t t_qmp, t_loaded, t_cont;	/* a ready restore's steps */
	int io_stopped;		/* qemu stopped the guest on a disk error */
	uint64_t io_event_ms;	/* last disk-error event (rate limit) */
	char down_why[160];	/* what qemu said before it went away */
	int was_running;	/* suspend: running before (cont on failure) */
	char kill_why[VMM_ERRLEN];	/* why we killed it, for the report */
	char qmp_path[PATH_MAX];

	/* the standby qemu (sb->standby_pid) while the sandbox sleeps */
	struct vmm_split *sparse;	/* the RAM file punched, flushed */
	int sparse_stop;		/* ... qemu SIGSTOPped meanwhile */
	struct vmm_console con;		/* jailed: the console's copier */
	unsigned con_rot;		/* its rotations con_off knows of */
	struct vmm_child *sb_watch;
	struct vmm_qmp *sb_qmp;
	struct event *sb_connect_ev;	/* connect retries, status polls */
	enum qm_sb_state sb_step;
	struct vmm_split *sb_split;	/* its snapshot split into its RAM
					 * file (one that carries the RAM) */
	int sb_dev;		/* ... done: it loads snap/state.dev */
	char sb_why[VMM_ERRLEN];	/* why it was ended, if it failed */
	int ready;		/* this restore is of the ready snapshot */
	/* a capture (fork): the frozen layer's canonical path, the stream
	 * file, the source's new top and its generation */
	char cap_layer[PATH_MAX], cap_stream[PATH_MAX], cap_top[PATH_MAX];
	unsigned cap_gen;
	int cap_switched;
	int cap_migrating;	/* the migration is under way (cancel it) */
	int cap_forced;		/* the downtime limit was raised */
	uint64_t cap_t0, cap_t_stop;	/* migrate sent; the source stopped */
	uint64_t cap_t_sw, cap_t_end;	/* its top switched; stream complete */
	struct vmm_child *cap_watch;
	/* a merge: the layer streamed down to, the chain's length before,
	 * and whether the stream job concluded without error */
	char mrg_base[PATH_MAX];
	unsigned mrg_layers;
	int mrg_ok;
	int claim;		/* ... a pool member's (restored already) */
	struct stat sb_snap;	/* the snapshot file it loaded */
};

static struct qm *
QM(struct vmm_sandbox *sb)
{
	return sb->priv;
}

static void qm_connect_try(evutil_socket_t fd, short what, void *arg);
static void qm_kill_now(struct qm *q, const char *why);
static int qm_spawn(struct qm *q, int restore, int standby, char *err,
    size_t errlen);
static void qm_promote(struct qm *q);
static json_t *qm_caps(const struct vmm_sandbox *sb, int out);
static void qm_standby_end(struct qm *q);
static void qm_standby_fail(struct qm *q, const char *why);
static void qm_sb_split_end(struct qm *q);
static void qm_sb_reply(struct vmm_qmp *c, json_t *ret, const char *error,
    void *arg);
static void qm_trial_failed(struct qm *q, const char *why);
static void qm_sync_end(struct qm *q);
static void qm_sparse_cont(struct qm *q);
static int qm_snap_uri(struct qm *q, struct vmm_qmp *c, const char *name,
    int out, char *uri, size_t urilen, char *err, size_t errlen);

static void
qm_timer(struct qm *q, struct event *ev, unsigned ms)
{
	(void)q;
	vmm_timer_ms(ev, ms);
}

/* Stop every timer of the current operation. */
static void
qm_quiet(struct qm *q)
{
	event_del(q->poll_ev);
	event_del(q->deadline_ev);
	event_del(q->connect_ev);
}

/* Report the end of the operation in flight (once). */
static void
qm_done(struct qm *q, int ok, enum vmm_state st, const char *reason)
{
	struct vmm_sandbox *sb = q->sb;

	if (q->op == QM_IDLE)
		return;
	qm_quiet(q);
	q->op = QM_IDLE;
	q->step = QM_FIRST;
	vmm_backend_done(sb, ok, st, reason);
}

static void
qm_donef(struct qm *q, int ok, enum vmm_state st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
qm_donef(struct qm *q, int ok, enum vmm_state st, const char *fmt, ...)
{
	char buf[VMM_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	qm_done(q, ok, st, buf);
}

static void
qm_unlink(struct vmm_sandbox *sb, const char *name)
{
	char p[PATH_MAX];

	if (vmm_path(sb, name, p, sizeof(p)) == 0)
		(void)unlink(p);
}

/* ---- process exit ---- */

static void
qm_exited(pid_t pid, int status, void *arg)
{
	struct qm *q = arg;
	struct vmm_sandbox *sb = q->sb;
	char st[128], tail[300], why[VMM_ERRLEN], logp[PATH_MAX];

	if (pid == sb->standby_pid && pid != sb->pid) {
		/* The standby died (or was ended): the sandbox is still
		 * suspended; a restore waiting for it starts its own. One
		 * that failed or died on its own is said (berth ends them
		 * with SIGKILL): its wake is a restore of its own. */
		if ((q->sb_why[0] != '\0' || !(WIFSIGNALED(status) &&
		    WTERMSIG(status) == SIGKILL)) &&
		    sb->state == VMM_SUSPENDED) {
			vmm_status_text(status, st, sizeof(st));
			(void)vmm_path(sb, "vmm.log", logp, sizeof(logp));
			vmm_tail_line(logp, tail, sizeof(tail));
			snprintf(why, sizeof(why), "its standby qemu ended%s%s "
			    "(%s)%s%s; a wake restores without it", q->sb_why[0] ?
			    ": " : "", q->sb_why, st, tail[0] ? ": " : "", tail);
			vmm_emit(sb, VMM_OP_STANDBY, 0, why, "vmm");
		}
		q->sb_why[0] = '\0';
		q->sb_watch = NULL;	/* freed by the watcher */
		qm_sb_split_end(q);
		sb->standby_pid = 0;
		vmm_qmp_free(q->sb_qmp);
		q->sb_qmp = NULL;
		q->sb->standby_ready = 0;
		q->sb_step = QSB_NONE;
		event_del(q->sb_connect_ev);
		(void)unlink(q->qmp_path);
		if (q->op == QM_RESTORE && q->step == QR_STANDBY) {
			if (qm_spawn(q, 1, 0, why, sizeof(why)) < 0) {
				qm_done(q, 0, VMM_SUSPENDED, why);
				return;
			}
			q->step = QR_QMP;
		}
		return;
	}
	q->watch = NULL;
	sb->pid = 0;
	vmm_qmp_free(q->qmp);
	q->qmp = NULL;
	vmm_console_close(&q->con);
	event_del(q->lost_ev);
	(void)unlink(q->qmp_path);
	if (q->expect_exit) {
		q->expect_exit = 0;
		q->kill_why[0] = '\0';
		if (q->exit_state == VMM_STOPPED) {
			/* RAM and a stale snapshot mean nothing to a fresh boot. */
			qm_unlink(sb, "mem");
			qm_unlink(sb, "snap/state");
			sb->ram_shared = sb->snap_ram = sb->ram_anon = 0;
			sb->snap_dev = 0;
		}
		qm_done(q, 1, q->exit_state, "");
		return;
	}
	if (q->kill_why[0] != '\0') {
		snprintf(why, sizeof(why), "%s", q->kill_why);
		q->kill_why[0] = '\0';
	} else if (q->down_why[0] != '\0') {
		snprintf(why, sizeof(why), "%s", q->down_why);
	} else {
		vmm_status_text(status, st, sizeof(st));
		(void)vmm_path(sb, "vmm.log", logp, sizeof(logp));
		vmm_tail_line(logp, tail, sizeof(tail));
		if (tail[0] == '\0' && status == 0)
			snprintf(tail, sizeof(tail), "guest powered off");
		snprintf(why, sizeof(why), "%sqemu %s%s%s",
		    q->op == QM_RESTORE ? "restore from snapshot failed: " : "",
		    st, tail[0] ? ": " : "", tail);
	}
	if (q->op == QM_BOOT && q->trial) {
		qm_trial_failed(q, why);
		return;
	}
	if (q->op != QM_IDLE) {
		qm_done(q, 0, VMM_FAILED, why);
		return;
	}
	vmm_backend_exited(sb, why);
}

/* KVM's trial boot died or missed its deadline: the verdict is TCG, and
 * this same boot goes on under TCG (the caller sees one slower boot). */
static void
qm_trial_failed(struct qm *q, const char *why)
{
	struct vmm_sandbox *sb = q->sb;
	char err[VMM_ERRLEN];

	q->trial = 0;
	vmm_accel_verdict(sb, VMM_ACCEL_TCG, why);
	sb->accel = VMM_ACCEL_TCG;
	if (qm_spawn(q, 0, 0, err, sizeof(err)) < 0) {
		qm_done(q, 0, VMM_FAILED, err);
		return;
	}
	q->step = QM_FIRST;
	q->boot_t0 = vmm_now_ms();
	qm_timer(q, q->deadline_ev, sb->m->cfg.ready_timeout_ms);
	qm_timer(q, q->poll_ev, QM_CONSOLE_MS);
}

/* ---- QMP ---- */

static void qm_step(struct qm *q, json_t *ret, const char *error);
static void qm_capture_step(struct qm *q, json_t *ret, const char *error);
static void qm_merge_step(struct qm *q, json_t *ret, const char *error);

static void
qm_reply(struct vmm_qmp *c, json_t *ret, const char *error, void *arg)
{
	struct qm *q = arg;

	(void)c;
	qm_step(q, ret, error);
}

static int
qm_cmd(struct qm *q, const char *cmd, json_t *args)
{
	char err[VMM_ERRLEN];

	qm_sync_end(q);		/* a SIGSTOPped qemu would not answer */
	if (vmm_qmp_command(q->qmp, cmd, args, qm_reply, q, err,
	    sizeof(err)) < 0) {
		qm_kill_now(q, err);
		return -1;
	}
	return 0;
}

static void
qmp_lost(evutil_socket_t fd, short what, void *arg)
{
	struct qm *q = arg;

	(void)fd;
	(void)what;
	/* Still alive a second after QMP went away: we cannot control it,
	 * so it must not run on unobserved. The exit handler reports. */
	if (q->sb->pid > 0)
		qm_kill_now(q, "QMP connection to qemu lost; qemu killed");
}

static void
qm_qmp_ready(struct vmm_qmp *c, void *arg)
{
	struct qm *q = arg;

	if (c == q->sb_qmp) {
		char err[VMM_ERRLEN];

		q->sb_step = QSB_CAPS;
		if (vmm_qmp_command(c, "migrate-set-capabilities",
		    qm_caps(q->sb, 0),
		    qm_sb_reply, q, err, sizeof(err)) < 0)
			qm_standby_fail(q, "its QMP commands could not be sent");
		return;
	}
	if (q->op == QM_BOOT || q->op == QM_RESTORE || q->op == QM_ADOPT)
		qm_step(q, NULL, NULL);
}

/* data's string key as buf holds it, no control bytes, or NULL: what
 * qemu says goes to logs, events and sandbox.conf (a VMM is not
 * trusted). */
static const char *
qm_text(json_t *data, const char *key, char *buf, size_t size)
{
	const char *v = json_string_value(json_object_get(data, key));

	if (v == NULL)
		return NULL;
	vmm_text_clean(buf, size, v);
	return buf;
}

static void
qm_qmp_event(struct vmm_qmp *c, const char *event, json_t *data, void *arg)
{
	struct qm *q = arg;
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN], rbuf[64];
	const char *r = qm_text(data, "reason", rbuf, sizeof(rbuf));

	if (c != q->qmp)
		return;		/* the standby's: it runs no guest */
	if (strcmp(event, "SHUTDOWN") == 0) {
		/* qemu exits next (no -no-shutdown): the exit handler says
		 * why with this, unless we asked for it. */
		if (r != NULL && strcmp(r, "host-qmp-quit") != 0)
			snprintf(q->down_why, sizeof(q->down_why), "%s",
			    strcmp(r, "guest-shutdown") == 0 ?
			    "the guest powered itself off" :
			    strcmp(r, "guest-panic") == 0 ?
			    "the guest kernel panicked" : r);
	} else if (strcmp(event, "RESET") == 0) {
		/* The guest rebooted (a panic does that too, panic=-1): it
		 * comes up again by itself; worth an event, not a state. */
		if (q->op == QM_IDLE && json_is_true(json_object_get(data,
		    "guest"))) {
			snprintf(why, sizeof(why), "the guest rebooted (%s)",
			    r != NULL ? r : "reset");
			vmm_emit(sb, VMM_OP_GUEST, 1, why, "vmm");
		}
	} else if (strcmp(event, "GUEST_PANICKED") == 0) {
		if (q->op == QM_IDLE && sb->pid > 0)
			qm_kill_now(q, "the guest kernel panicked");
	} else if (strcmp(event, "BLOCK_IO_ERROR") == 0) {
		char obuf[32], abuf[32];
		const char *op = qm_text(data, "operation", obuf, sizeof(obuf));
		const char *act = qm_text(data, "action", abuf, sizeof(abuf));
		int nospace = json_is_true(json_object_get(data, "nospace"));
		uint64_t now = vmm_now_ms();

		if (nospace)
			snprintf(why, sizeof(why), "disk full: a guest %s to "
			    "%s failed: no space left on the host file system "
			    "holding it", op != NULL ? op : "write", sb->disk);
		else
			snprintf(why, sizeof(why), "disk error: a guest %s on "
			    "%s failed: %s", op != NULL ? op : "access",
			    sb->disk, r != NULL ? r : "I/O error");
		if (act != NULL && strcmp(act, "stop") == 0) {
			/* qemu stopped the guest (werror=enospc): failed,
			 * its memory kept; `resume` retries once space is
			 * back, `start` boots it again. */
			if (!q->io_stopped && q->op == QM_IDLE) {
				q->io_stopped = 1;
				vmm_backend_failed(sb, why);
			}
		} else if (now - q->io_event_ms >= 10000) {
			/* the guest saw EIO; one event per 10 s at most */
			q->io_event_ms = now;
			vmm_emit(sb, VMM_OP_GUEST, 0, why, "vmm");
		}
	}
}

static void
qm_qmp_close(struct vmm_qmp *c, const char *reason, void *arg)
{
	struct qm *q = arg;

	(void)reason;
	if (c == q->sb_qmp) {
		/* a standby we cannot talk to is no use */
		vmm_qmp_free(q->sb_qmp);
		q->sb_qmp = NULL;
		q->sb->standby_ready = 0;
		qm_standby_fail(q, "its QMP connection was lost");
		return;
	}
	vmm_qmp_free(q->qmp);
	q->qmp = NULL;
	if (q->expect_exit || q->sb->pid == 0)
		return;
	qm_timer(q, q->lost_ev, QM_LOST_MS);
}

/* One try to reach qemu's QMP socket: 1 when it is not there yet (a
 * retry is armed on `retry`), 0 with *out connected, -1 with err. */
static int
qm_qmp_open(struct qm *q, struct event *retry, struct vmm_qmp **out,
    char *err, size_t errlen)
{
	struct vmm_qmp_cbs cbs = { qm_qmp_ready, qm_qmp_event, qm_qmp_close, q };
	int fd;

	fd = vmm_qmp_connect_unix(q->qmp_path, err, errlen);
	if (fd == -ENOENT || fd == -ECONNREFUSED || fd == -EAGAIN) {
		qm_timer(q, retry, QM_CONNECT_MS);
		return 1;
	}
	if (fd < 0)
		return -1;
	/* run/ is the VMM's to write: what answers there must be it */
	if (q->sb->jailed && q->sb->uid != 0 &&
	    vmm_qmp_peer_is(fd, q->sb->uid, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	if ((*out = vmm_qmp_new(q->sb->m->base, fd, &cbs)) == NULL) {
		snprintf(err, errlen, "QMP: out of memory");
		return -1;
	}
	return 0;
}

static void
qm_connect_try(evutil_socket_t fd0, short what, void *arg)
{
	struct qm *q = arg;
	char err[VMM_ERRLEN];
	int rc;

	(void)fd0;
	(void)what;
	if ((rc = qm_qmp_open(q, q->connect_ev, &q->qmp, err, sizeof(err))) < 0)
		qm_kill_now(q, err);
	else if (rc == 0)
		(void)vmm_console_connect(&q->con);	/* qemu made both sockets */
}

/* The same for the standby, which has no operation to fail; then the
 * timer polls its incoming migration. */
static void
qm_sb_connect_try(evutil_socket_t fd0, short what, void *arg)
{
	struct qm *q = arg;
	char err[VMM_ERRLEN];

	(void)fd0;
	(void)what;
	if (q->sb->standby_pid <= 0)
		return;
	if (q->sb_qmp != NULL) {
		if (vmm_qmp_command(q->sb_qmp, "query-status", NULL,
		    qm_sb_reply, q, err, sizeof(err)) < 0)
			qm_standby_fail(q, "its QMP commands could not be sent");
		return;
	}
	if (qm_qmp_open(q, q->sb_connect_ev, &q->sb_qmp, err, sizeof(err)) < 0)
		qm_standby_fail(q, err);
}

/* The standby loads its snapshot (its split's devices' part, if made). */
static void
qm_sb_load(struct qm *q)
{
	char uri[PATH_MAX + 64], err[VMM_ERRLEN];

	if (qm_snap_uri(q, q->sb_qmp, q->sb_dev ? "snap/state.dev" :
	    "snap/state", 0, uri, sizeof(uri), err, sizeof(err)) < 0) {
		qm_standby_fail(q, err);
		return;
	}
	q->sb_step = QSB_INCOMING;
	if (vmm_qmp_command(q->sb_qmp, "migrate-incoming", json_pack("{s:s}",
	    "uri", uri), qm_sb_reply, q, err, sizeof(err)) < 0)
		qm_standby_fail(q, "its QMP commands could not be sent");
}

/*
 * A standby whose snapshot carries the RAM (a clone's first suspend: 300
 * MB for the default guest) had QEMU load it into the RAM file, a page
 * fault at a time: 4-9 s of CPU here. The snapshot is split first
 * (image.c): its RAM written into the standby's RAM file (a child of the
 * manager, write(2)), the standby loading only the devices' part. A
 * split that fails costs its time: the standby loads the whole stream.
 */
static void
qm_sb_split_done(void *arg, int img, const char *why, uint64_t ms)
{
	struct qm *q = arg;
	struct vmm_sandbox *sb = q->sb;
	char r[VMM_ERRLEN];

	(void)ms;
	q->sb_split = NULL;
	if (img >= 0)
		close(img);
	else {
		snprintf(r, sizeof(r), "its snapshot could not be split (%s): "
		    "the standby loads it whole", why);
		vmm_emit(sb, VMM_OP_STANDBY, 0, r, "vmm");
	}
	q->sb_dev = img >= 0;
	if (q->sb_qmp == NULL || q->sb_step != QSB_CAPS ||
	    sb->standby_pid <= 0) {
		qm_unlink(sb, "snap/state.dev");
		return;
	}
	qm_sb_load(q);
}

/* 0 when the split is under way, -1: load the snapshot as it is. */
static int
qm_sb_split(struct qm *q)
{
	struct vmm_sandbox *sb = q->sb;
	char snap[PATH_MAX], dev[PATH_MAX], mem[PATH_MAX], err[VMM_ERRLEN];
	int fd;

	q->sb_dev = 0;
	if (!sb->snap_ram || sb->ram_shared)
		return -1;
	(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
	(void)vmm_path(sb, "snap/state.dev", dev, sizeof(dev));
	(void)vmm_path(sb, "mem", mem, sizeof(mem));
	if ((fd = open(mem, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	/* allocated whole unless free page reporting keeps it sparse
	 * (qm_ram_file says why) */
	if (!sb->tpl.balloon && posix_fallocate(fd, 0,
	    (off_t)sb->mem_mib << 20) != 0) {
		close(fd);
		return -1;
	}
	q->sb_split = vmm_split_start(sb->m, snap, dev, sb->mem_mib, 0, fd,
	    qm_sb_split_done, q, err, sizeof(err));
	close(fd);
	return q->sb_split != NULL ? 0 : -1;
}

/*
 * The split loaded, it becomes the snapshot: its devices' part is
 * snap/state (snap_dev), its RAM the RAM file (on disk: the split's
 * child synced it), and the stream that carried the RAM as well goes. A
 * clone's first suspend no longer holds its RAM twice on disk. A fork
 * or checkpoint of it joins the two again (fork.c). -1: kept as it was.
 */
static int
qm_sb_keep_split(struct qm *q)
{
	struct vmm_sandbox *sb = q->sb;
	char dev[PATH_MAX], snap[PATH_MAX];
	struct stat st;

	if (!sb->snap_ram || sb->ram_shared)
		return -1;
	(void)vmm_path(sb, "snap/state.dev", dev, sizeof(dev));
	(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
	if (rename(dev, snap) < 0 || stat(snap, &st) < 0)
		return -1;
	q->sb_snap = st;	/* what a promotion checks it loaded */
	sb->snap_ram = 0;
	sb->snap_dev = 1;
	vmm_meta_save(sb);
	return 0;
}

/* The standby goes: its split too. */
static void
qm_sb_split_end(struct qm *q)
{
	if (q->sb_split != NULL) {
		vmm_split_cancel(q->sb_split);
		q->sb_split = NULL;
		qm_unlink(q->sb, "snap/state.dev");
	}
}

static void
qm_sb_reply(struct vmm_qmp *c, json_t *ret, const char *error, void *arg)
{
	struct qm *q = arg;

	char snap[PATH_MAX], err[VMM_ERRLEN];
	const char *s;
	int rc = 0;

	if (ret == NULL) {
		qm_standby_fail(q, error != NULL ? error :
		    "a QMP command failed");
		return;
	}
	switch (q->sb_step) {
	case QSB_CAPS:	/* load the snapshot now */
		(void)vmm_path(q->sb, "snap/state", snap, sizeof(snap));
		if (stat(snap, &q->sb_snap) < 0) {
			qm_standby_fail(q, "its snapshot is gone");
			return;
		}
		if (qm_sb_split(q) < 0)
			qm_sb_load(q);	/* else qm_sb_split_done does */
		return;
	case QSB_INCOMING:
		q->sb_step = QSB_STATUS;
		rc = vmm_qmp_command(c, "query-status", NULL, qm_sb_reply, q,
		    err, sizeof(err));
		break;
	case QSB_STATUS:
		s = json_string_value(json_object_get(ret, "status"));
		if (s != NULL && strcmp(s, "inmigrate") == 0) {
			qm_timer(q, q->sb_connect_ev, QM_POLL_MS);
			break;
		}
		if (s == NULL || (strcmp(s, "paused") != 0 &&
		    strcmp(s, "prelaunch") != 0 &&
		    strcmp(s, "postmigrate") != 0)) {
			/* a bad snapshot: a restore will say why */
			qm_standby_fail(q, "it did not load the snapshot");
			return;
		}
		q->sb_step = QSB_LOADED;
		if (q->sb_dev && qm_sb_keep_split(q) < 0)
			qm_unlink(q->sb, "snap/state.dev");	/* loaded */
		q->sb->standby_ready = 1;
		if (q->op == QM_RESTORE && q->step == QR_STANDBY)
			qm_promote(q);
		break;
	default:	/* QSB_NONE, QSB_LOADED: nothing was asked */
		break;
	}
	if (rc < 0)
		qm_standby_fail(q, "its QMP commands could not be sent");
}

/* The standby cannot be used (why): it goes, and its exit says why. */
static void
qm_standby_fail(struct qm *q, const char *why)
{
	if (q->sb->standby_pid > 0 && q->sb_why[0] == '\0')
		snprintf(q->sb_why, sizeof(q->sb_why), "%s", why);
	qm_standby_end(q);
}

/* Ask the standby to go; its exit handler clears it (and starts a
 * restore's own qemu if one was waiting for it). */
static void
qm_standby_end(struct qm *q)
{
	if (q->sb->standby_pid > 0)
		kill(q->sb->standby_pid, SIGKILL);
}

/* End the standby now and reap it: stop, kill and release need the disk
 * and the socket path free when they return. */
static void
qm_standby_reap(struct qm *q)
{
	struct vmm_sandbox *sb = q->sb;
	pid_t pid = sb->standby_pid;

	if (pid <= 0)
		return;
	vmm_child_unwatch(q->sb_watch);
	q->sb_watch = NULL;
	qm_sb_split_end(q);
	q->sb_why[0] = '\0';
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	sb->standby_pid = 0;
	vmm_qmp_free(q->sb_qmp);
	q->sb_qmp = NULL;
	q->sb->standby_ready = 0;
	event_del(q->sb_connect_ev);
	(void)unlink(q->qmp_path);
}

/* The operation cannot go on and the VMM's state is unknown: end it.
 * The exit handler then finishes the operation (or reports the death)
 * with this reason rather than "killed by signal 9". */
static void
qm_kill_now(struct qm *q, const char *why)
{
	struct vmm_sandbox *sb = q->sb;

	if (sb->pid > 0) {
		snprintf(q->kill_why, sizeof(q->kill_why), "%s", why);
		qm_quiet(q);
		q->expect_exit = 0;
		kill(sb->pid, SIGKILL);
		return;
	}
	qm_standby_end(q);
	qm_done(q, 0, VMM_FAILED, why);
}

/* ---- console ---- */

static void
qm_console_poll(evutil_socket_t fd0, short what, void *arg)
{
	struct qm *q = arg;
	struct vmm_sandbox *sb = q->sb;
	char path[PATH_MAX];

	(void)fd0;
	(void)what;
	if (q->op != QM_BOOT || q->ready_seen)
		return;
	(void)vmm_path(sb, "console.log", path, sizeof(path));
	if (q->con.rotations != q->con_rot) {	/* a new console.log */
		q->con_rot = q->con.rotations;
		q->con_off = 0;
		q->carry[0] = '\0';
	}
	if (vmm_scan_file(path, &q->con_off, q->carry, sizeof(q->carry),
	    sb->tpl.ready_line)) {
		q->ready_seen = 1;
		qm_step(q, NULL, NULL);
		return;
	}
	qm_timer(q, q->poll_ev, QM_CONSOLE_MS);
}

/* ---- timers ---- */

static void
qm_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct qm *q = arg;
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN], tail[200], path[PATH_MAX];

	(void)fd;
	(void)what;
	switch (q->op) {
	case QM_BOOT:
		(void)vmm_path(sb, "console.log", path, sizeof(path));
		vmm_tail_line(path, tail, sizeof(tail));
		snprintf(why, sizeof(why), "guest not ready within %u ms%s (%s); "
		    "last console line: %s", q->trial ?
		    sb->m->cfg.kvm_trial_ms : sb->m->cfg.ready_timeout_ms,
		    q->trial ? " under KVM" : "",
		    q->qmp == NULL ? "no QMP connection" : "no ready line",
		    tail[0] ? tail : "(none)");
		qm_kill_now(q, why);
		break;
	case QM_MERGE:
		/* a merge that takes too long is cancelled, not the guest */
		if (q->step == QG_JOBS) {
			q->step = QG_CANCEL;
			snprintf(sb->reason, sizeof(sb->reason), "merge: not done "
			    "within %u ms: cancelled", QM_MERGE_MS);
			(void)qm_cmd(q, "block-job-cancel", json_pack("{s:s, s:b}",
			    "device", "berth-merge", "force", 1));
			qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
			break;
		}
		snprintf(why, sizeof(why), "merge: no answer from qemu within "
		    "%u ms", sb->m->cfg.op_timeout_ms);
		qm_kill_now(q, why);
		break;
	case QM_STOP:
	case QM_CAPTURE:
	case QM_SUSPEND:
		if (q->expect_exit && sb->pid > 0) {
			/* quit was answered but the process lingers */
			kill(sb->pid, SIGKILL);
			break;
		}
		/* fall through */
	default:
		snprintf(why, sizeof(why), "%s: no answer from qemu within %u ms",
		    vmm_op_name(sb->op), sb->m->cfg.op_timeout_ms);
		qm_kill_now(q, why);
		break;
	}
}

/* ---- the operations ---- */

static int
qm_argv(struct vmm_sandbox *sb, int restore, char **argv, size_t max,
    char *store, size_t storelen, char *err, size_t errlen)
{
	struct vmm *m = sb->m;
	char mac[18], cmdline[2048];
	size_t n = 0, used = 0;
	int kvm = sb->accel == VMM_ACCEL_KVM;

#define ARG(...) do {							\
	int w_ = snprintf(store + used, storelen - used, __VA_ARGS__);	\
	if (w_ < 0 || (size_t)w_ >= storelen - used || n + 2 > max)	\
		goto toolong;						\
	argv[n++] = store + used;					\
	used += (size_t)w_ + 1;						\
} while (0)

	/* Jailed, the VMM sees its own files at fixed names in its root,
	 * its tap as descriptor 3, and may not start processes. */
	const int j = sb->jailed;
	char exe[PATH_MAX];

	vmm_exe_path(m->vmm_binary, exe, sizeof(exe));
	nc_link_mac_format(sb->mac, mac, sizeof(mac));
	ARG("%s", j ? exe : m->vmm_binary);
	ARG("-name");
	/* a clone claimed from the ready pool keeps its first name (its
	 * cgroup's): how a restarted manager knows its qemu */
	ARG("berth-%s", sb->cg_name[0] ? sb->cg_name : sb->id);
	ARG("-machine");
	ARG("microvm,memory-backend=mem");
	ARG("-accel");
	/* TCG's translation cache is 1 GiB by default in QEMU 7.2, anonymous
	 * memory that fills with transparent huge pages as code is
	 * translated: with a 1 GiB guest's RAM restored into anonymous
	 * memory (a fork) the two went past the sandbox's memory limit and
	 * the kernel killed it. 128 MiB is ample for one guest. */
	ARG("%s", kvm ? "kvm" : "tcg,tb-size=128");
	ARG("-cpu");
	ARG("%s", kvm ? "host" : "max");
	ARG("-m");
	ARG("%u", sb->mem_mib);
	ARG("-smp");
	ARG("%u", sb->vcpus);
	ARG("-nodefaults");
	ARG("-no-user-config");
	ARG("-display");
	ARG("none");
	/* Least privilege: seccomp, no setuid; jailed, no new processes
	 * either (snapshots go through descriptors), else the exec:
	 * migration channel's shell needs spawn. */
	ARG("-sandbox");
	ARG("on,obsolete=deny,elevateprivileges=deny,resourcecontrol=deny%s",
	    j ? ",spawn=deny" : "");
	ARG("-object");
	if (sb->ram_shared) {
		/* A clone's RAM: the ready snapshot's image, private
		 * copy-on-write. Jailed, the sealed memfd at descriptor 4
		 * (qemu opens a path: its /proc shows its own descriptors);
		 * else the image itself. */
		char rm[PATH_MAX];

		if (!j && (sb->forked_from[0] != '\0' ||
		    vmm_ready_path(m, sb->ready_key, "mem", rm,
		    sizeof(rm)) < 0))
			goto toolong;
		ARG("memory-backend-file,id=mem,size=%uM,mem-path=%s,share=off",
		    sb->mem_mib, j ? "/proc/self/fd/4" : rm);
	} else if (sb->ram_anon && restore)
		ARG("memory-backend-ram,id=mem,size=%uM", sb->mem_mib);
	else
		ARG("memory-backend-file,id=mem,size=%uM,mem-path=%s/mem,"
		    "share=on", sb->mem_mib, j ? "" : sb->dir);
	ARG("-chardev");
	if (j)
		ARG("socket,id=con,path=/run/console.sock,server=on,wait=off");
	else
		ARG("file,id=con,path=%s/console.log,append=on", sb->dir);
	ARG("-serial");
	ARG("chardev:con");
	ARG("-qmp");
	ARG("unix:%s,server=on,wait=off", j ? "/run/qmp.sock" : QM(sb)->qmp_path);
	ARG("-kernel");
	ARG("%s", j ? "/kernel" : sb->tpl.kernel);
	if (sb->tpl.initrd != NULL) {
		ARG("-initrd");
		ARG("%s", j ? "/initrd" : sb->tpl.initrd);
	}
	ARG("-append");
	if (vmm_kernel_cmdline(sb, cmdline, sizeof(cmdline)) < 0)
		goto toolong;
	ARG("%s", cmdline);
	ARG("-netdev");
	if (j)
		ARG("tap,id=n0,fd=3");
	else
		ARG("tap,id=n0,ifname=%s,script=no,downscript=no", sb->tap);
	ARG("-device");
	ARG("virtio-net-device,netdev=n0,mac=%s", mac);
	/* The persistent disk first: the guest finds it at /dev/vda. A root
	 * overlay names its backing (the template's image, read-only)
	 * explicitly: the jail binds the image at /rootfs, and the path
	 * qemu-img wrote into the header is never used. */
	ARG("-drive");
	if (sb->layered) {
		/* a chain of frozen layers: qemu follows the headers (each
		 * names the one below by its host path, bound at that path
		 * in the jail), backing files read-only */
		ARG("id=d0,driver=qcow2,file.filename=%s%s,if=none,"
		    "cache=writeback,discard=unmap,werror=enospc,rerror=report",
		    j ? "/" : "", j ? vmm_disk_name(sb) : sb->disk);
	} else if (sb->tpl.root_overlay && sb->ready_key[0] != '\0') {
		/* over a ready snapshot's frozen layer, over the image */
		char base[PATH_MAX];

		if (vmm_ready_path(m, sb->ready_key, "disk.qcow2", base,
		    sizeof(base)) < 0)
			goto toolong;
		ARG("id=d0,driver=qcow2,file.filename=%s,backing.driver=qcow2,"
		    "backing.file.filename=%s,backing.read-only=on,"
		    "backing.backing.driver=raw,"
		    "backing.backing.file.filename=%s,"
		    "backing.backing.read-only=on,if=none,"
		    "cache=writeback,discard=unmap,werror=enospc,rerror=report",
		    j ? "/disk.qcow2" : sb->disk, j ? "/base.qcow2" : base,
		    j ? "/rootfs" : sb->tpl.rootfs);
	} else if (sb->tpl.root_overlay)
		ARG("id=d0,driver=qcow2,file.filename=%s,backing.driver=raw,"
		    "backing.file.filename=%s,backing.read-only=on,if=none,"
		    "cache=writeback,discard=unmap,werror=enospc,rerror=report",
		    j ? "/disk.qcow2" : sb->disk, j ? "/rootfs" : sb->tpl.rootfs);
	else
		ARG("id=d0,file=%s,format=raw,if=none,cache=writeback,"
		    "discard=unmap,werror=enospc,rerror=report",
		    j ? "/disk.raw" : sb->disk);
	ARG("-device");
	ARG("virtio-blk-device,drive=d0");
	if (sb->tpl.rootfs != NULL && !sb->tpl.root_overlay) {
		ARG("-drive");
		ARG("id=r0,file=%s,format=raw,if=none,readonly=on",
		    j ? "/rootfs" : sb->tpl.rootfs);
		ARG("-device");
		ARG("virtio-blk-device,drive=r0");
	}
	/* The guest agent's port (vmm/guest/agent.c says why virtio-serial):
	 * a unix socket qemu serves in run/, reached like QMP (agent.c). */
	if (sb->tpl.agent != NULL) {
		ARG("-device");
		ARG("virtio-serial-device");
		ARG("-chardev");
		if (j)
			ARG("socket,id=agent,path=/run/agent.sock,server=on,wait=off");
		else
			ARG("socket,id=agent,path=%s/agent.sock,server=on,wait=off",
			    sb->dir);
		ARG("-device");
		ARG("virtserialport,chardev=agent,name=%s", sb->tpl.agent);
	}
	/* Free page reporting: the guest's virtio_balloon driver tells
	 * qemu which pages it freed (2 MiB blocks, 2 s after), and qemu
	 * punches them out of the RAM file or drops them from anonymous
	 * memory. Never inflated: only what the guest does not use leaves.
	 * Last, so the devices before it keep their places. */
	if (sb->tpl.balloon) {
		ARG("-device");
		ARG("virtio-balloon-device,free-page-reporting=on");
	}
	if (restore) {
		ARG("-incoming");
		ARG("defer");
		ARG("-S");
	}
	argv[n] = NULL;
	return 0;
toolong:
	snprintf(err, errlen, "qemu command line too long");
	return -E2BIG;
#undef ARG
}

/* The guest RAM file of a fresh boot (or of a standby). Without free
 * page reporting it is allocated now, whole: a state disk too full for
 * the guest's memory fails the boot here with a clear error, not with a
 * SIGBUS in qemu when the guest first touches a page, and a disk that
 * fills up later stops only the guest's disk writes (werror=enospc: the
 * guest pauses, "disk full", and resumes once there is room). With it
 * (sb->tpl.balloon) the file is sparse: qemu punches out the pages the
 * guest frees, so they cannot be kept allocated anyway, and a suspended
 * sandbox's RAM image holds what its guest uses. The price, said in
 * berth.conf(5): a guest page written into a hole of a full file system
 * kills qemu (SIGBUS). A disk without the whole RAM free still fails the
 * boot here. Made by root with O_EXCL|O_NOFOLLOW (nothing planted in its
 * place is followed) and then handed to the VMM's user. */
static int
qm_ram_file(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	char p[PATH_MAX];
	uid_t uid = sb->uid;
	uint64_t need = (uint64_t)sb->mem_mib << 20, have;
	struct statvfs vs;
	int fd, e;

	(void)vmm_path(sb, "mem", p, sizeof(p));
	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "guest RAM file %s: %s", p, strerror(errno));
		return -errno;
	}
	/* sparse (free page reporting): at least room for it now; else
	 * allocated whole below, which says so itself */
	if (sb->tpl.balloon && fstatvfs(fd, &vs) == 0 &&
	    (have = (uint64_t)vs.f_bavail * vs.f_frsize) < need) {
		close(fd);
		(void)unlink(p);
		snprintf(err, errlen, "cannot hold the guest's %u MiB of RAM "
		    "in %s: its file system has %llu MiB free", sb->mem_mib, p,
		    (unsigned long long)(have >> 20));
		return -ENOSPC;
	}
	if (!sb->tpl.balloon &&
	    (e = posix_fallocate(fd, 0, (off_t)need)) != 0 &&
	    e != EOPNOTSUPP && e != EINVAL) {
		close(fd);
		(void)unlink(p);
		snprintf(err, errlen, "cannot allocate the guest's %u MiB of "
		    "RAM in %s: %s", sb->mem_mib, p, strerror(e));
		return -e;
	}
	if (ftruncate(fd, (off_t)need) < 0) {
		e = errno;
		close(fd);
		(void)unlink(p);
		snprintf(err, errlen, "guest RAM file %s: %s", p, strerror(e));
		return -e;
	}
	if (uid != 0 && fchown(fd, uid, sb->gid) < 0) {
		e = errno;
		close(fd);
		(void)unlink(p);
		snprintf(err, errlen, "guest RAM file %s: chown: %s", p,
		    strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

/* Spawn argv in the sandbox's jail (jail.c): its files, its uid, the
 * tap as descriptor 3. */
static pid_t
qm_spawn_jailed(struct vmm_sandbox *sb, char *const argv[], const char *logp,
    char *err, size_t errlen)
{
	static char chain[VMM_CHAIN_MAX][PATH_MAX];
	struct vmm_jail j;
	char exedir[PATH_MAX], *slash, basep[PATH_MAX];
	const char *cg[6];
	pid_t pid;
	int tap, i;

	memset(&j, 0, sizeof(j));
	j.root = sb->jdir;
	j.uid = sb->uid;
	j.gid = sb->gid;
#define BIND(s_, d_, dev_) do {						\
	j.binds[j.nbinds].src = (s_);					\
	j.binds[j.nbinds].dst = (d_);					\
	j.binds[j.nbinds].dev = (dev_);					\
	j.nbinds++;							\
} while (0)
	BIND("/usr", "usr", 0);
	BIND(sb->tpl.kernel, "kernel", 0);
	if (sb->tpl.initrd != NULL)
		BIND(sb->tpl.initrd, "initrd", 0);
	if (sb->tpl.rootfs != NULL)
		BIND(sb->tpl.rootfs, "rootfs", 0);
	if (sb->layered) {
		/* every file of its chain but its own top, at its host path */
		int k, nc = vmm_chain(sb->disk, chain, VMM_CHAIN_MAX, err,
		    errlen);

		if (nc < 0)
			return -1;
		for (k = 1; k < nc && j.nbinds < VMM_JAIL_BINDS - 8; k++) {
			char *sl;
			int mfd;

			snprintf(exedir, sizeof(exedir), "%s", chain[k]);
			if ((sl = strrchr(exedir, '/')) != NULL)
				*sl = '\0';
			if (vmm_jail_mkdirs(sb->jdir, exedir) < 0) {
				snprintf(err, errlen, "jail: %s: %s", exedir,
				    strerror(errno));
				return -1;
			}
			snprintf(basep, sizeof(basep), "%s%s", sb->jdir,
			    chain[k]);
			if ((mfd = open(basep, O_WRONLY | O_CREAT | O_NOFOLLOW |
			    O_CLOEXEC, 0644)) >= 0)
				close(mfd);	/* its mount point */
			BIND(chain[k], chain[k] + 1, 0);
		}
	} else if (sb->ready_key[0] != '\0') {
		if (vmm_ready_path(sb->m, sb->ready_key, "disk.qcow2", basep,
		    sizeof(basep)) < 0) {
			snprintf(err, errlen, "ready snapshot path too long");
			return -1;
		}
		BIND(basep, "base.qcow2", 0);
	}
	BIND("/dev/null", "dev/null", 1);
	BIND("/dev/zero", "dev/zero", 1);
	BIND("/dev/urandom", "dev/urandom", 1);
	if (sb->accel == VMM_ACCEL_KVM)
		BIND("/dev/kvm", "dev/kvm", 1);
	/* A VMM binary outside /usr (a test's wrapper, a local build): its
	 * directory, read-only, at the same place. */
	if (argv[0][0] == '/' && strncmp(argv[0], "/usr/", 5) != 0) {
		snprintf(exedir, sizeof(exedir), "%s", argv[0]);
		if ((slash = strrchr(exedir, '/')) != NULL && slash > exedir) {
			*slash = '\0';
			if (vmm_jail_mkdirs(sb->jdir, exedir) < 0) {
				snprintf(err, errlen, "jail: %s: %s", exedir,
				    strerror(errno));
				return -1;
			}
			BIND(exedir, exedir + 1, 0);
		}
	}
#undef BIND
	if (vmm_cgroup_setup(sb, err, errlen) < 0) {
		/* a host whose cgroups we cannot use still runs VMs: the
		 * sandbox says it runs without limits */
		char why[VMM_ERRLEN];

		snprintf(why, sizeof(why), "%s: its VMM runs without CPU, "
		    "memory and pids limits", err);
		vmm_emit(sb, VMM_OP_JAIL, 0, why, "vmm");
	}
	for (i = 0; i < sb->ncgroups; i++)
		cg[i] = sb->cgroups[i];
	cg[i] = NULL;
	j.cgroups = cg;
	if ((tap = vmm_jail_tap_open(sb, err, errlen)) < 0)
		return -1;
	j.fds[0] = tap;
	j.nfds = 1;
	if (sb->ram_shared) {
		/* a fork's image, or the ready snapshot's; a fork whose
		 * image is gone (its VMM started before) has none */
		int mfd = sb->ram_image >= 0 ? sb->ram_image :
		    sb->ready_memfd >= 0 ? sb->ready_memfd :
		    sb->forked_from[0] != '\0' ? -1 :
		    vmm_ready_memfd(sb->m, sb->ready_key, err, errlen);

		if (mfd < 0 && sb->forked_from[0] != '\0')
			snprintf(err, errlen, "the RAM image of its fork's "
			    "capture is gone");
		if (mfd < 0) {
			close(tap);
			return -1;
		}
		j.fds[1] = mfd;
		j.nfds = 2;
		j.proc = 1;
	}
	/* qemu's threads (vCPUs, I/O workers) count against NPROC; FSIZE
	 * bounds what it can write: its RAM file, its disk, the console */
	j.nofile = 4096;
	j.nproc = 1024;
	j.fsize = ((unsigned long long)(sb->mem_mib > sb->disk_mib ?
	    sb->mem_mib : sb->disk_mib) << 20) + (64ULL << 20);
	pid = vmm_jail_spawn(argv, logp, &j, err, errlen);
	close(tap);
	if (sb->ram_image >= 0) {	/* qemu has it now: it holds it */
		close(sb->ram_image);
		sb->ram_image = -1;
	}
	return pid;
}

/* Start qemu: a fresh boot, a restore, or a restore's standby (which
 * is kept apart from sb->pid until a restore promotes it). */
static int
qm_spawn(struct qm *q, int restore, int standby, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = q->sb;
	char *argv[64], store[8192], logp[PATH_MAX], snap[PATH_MAX];
	struct stat st;
	pid_t pid;
	int rc;

	if (sb->pid > 0 || (standby && sb->standby_pid > 0)) {
		snprintf(err, errlen, "qemu (pid %d) still running",
		    (int)(sb->pid > 0 ? sb->pid : sb->standby_pid));
		return -EBUSY;
	}
	if ((rc = vmm_path(sb, "snap", snap, sizeof(snap))) < 0 ||
	    (mkdir(snap, sb->jailed ? 0700 : 0750) < 0 && errno != EEXIST)) {
		snprintf(err, errlen, "%s: %s", snap, strerror(errno));
		return -errno;
	}
	if ((rc = vmm_own(sb, err, errlen)) < 0)
		return rc;
	if (restore && q->ready && !standby) {
		/* the ready snapshot's state, under its accelerator (its key
		 * says which). Not a standby's: q->ready is the last
		 * restore's (a clone's create), and a clone's standby loads
		 * its own snapshot (its first suspend's, which carries its
		 * RAM) into a RAM file of its own (it found no /mem and died,
		 * and the clone's first wake restored without one). */
		(void)vmm_ready_path(sb->m, sb->ready_key, "state", snap,
		    sizeof(snap));
		if (stat(snap, &st) < 0) {
			snprintf(err, errlen, "no ready snapshot %s: %s", snap,
			    strerror(errno));
			return -ENOENT;
		}
		sb->accel = vmm_accel_template(sb->m, &sb->tpl) ==
		    VMM_ACCEL_KVM ? VMM_ACCEL_KVM : VMM_ACCEL_TCG;
	} else if (restore) {
		(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
		if (stat(snap, &st) < 0) {
			snprintf(err, errlen, "no snapshot %s: %s", snap,
			    strerror(errno));
			return -ENOENT;
		}
		if (sb->accel == VMM_ACCEL_AUTO)	/* recorded before 2026-12 */
			sb->accel = sb->m->accel_known ? sb->m->accel :
			    VMM_ACCEL_TCG;
		/* A stream that carries the RAM (a clone's suspend, a
		 * fork's capture, a checkpoint) is loaded into anonymous
		 * memory: a page the stream says is zero then costs a
		 * mapping of the zero page, where a RAM file (or memfd)
		 * allocates it (1.9 s against 7-9 s for a 1 GiB Debian
		 * guest's 300 MB stream here). A standby keeps to a RAM
		 * file: it waits, loaded, and what it holds must be
		 * reclaimable. */
		sb->ram_anon = 0;
		if (sb->snap_ram && !standby && !sb->ram_shared) {
			qm_unlink(sb, "mem");
			sb->ram_anon = 1;
		} else if (sb->snap_ram && !sb->ram_shared) {
			qm_unlink(sb, "mem");
			if ((rc = qm_ram_file(sb, err, errlen)) < 0)
				return rc;
		}
	} else {
		/* A fresh boot starts from zeroed RAM. */
		qm_unlink(sb, "mem");
		qm_unlink(sb, "snap/state");
		sb->ram_shared = sb->snap_ram = sb->ram_anon = 0;
		sb->snap_dev = 0;
		if ((rc = qm_ram_file(sb, err, errlen)) < 0)
			return rc;
	}
	(void)unlink(q->qmp_path);
	if (sb->jailed) {
		char cp[PATH_MAX];

		(void)vmm_path(sb, "console.sock", cp, sizeof(cp));
		(void)unlink(cp);	/* never follows: run/ is the VMM's */
		(void)vmm_path(sb, "agent.sock", cp, sizeof(cp));
		(void)unlink(cp);
	}
	if ((rc = qm_argv(sb, restore, argv, sizeof(argv) / sizeof(argv[0]),
	    store, sizeof(store), err, errlen)) < 0)
		return rc;
	(void)vmm_path(sb, "vmm.log", logp, sizeof(logp));
	/* vmm.log holds this run only, so its last line explains a death. */
	(void)truncate(logp, 0);
	{
		char conp[PATH_MAX];

		(void)vmm_path(sb, "console.log", conp, sizeof(conp));
		q->con_off = stat(conp, &st) == 0 ? st.st_size : 0;
		q->con_rot = q->con.rotations;
		q->carry[0] = '\0';
		q->ready_seen = 0;
	}
	pid = sb->jailed ? qm_spawn_jailed(sb, argv, logp, err, errlen) :
	    vmm_spawn(argv, logp, sb->uid, sb->gid, err, errlen);
	if (pid < 0)
		return -EIO;
	if (standby) {
		q->sb_watch = vmm_child_watch(sb->m->base, pid, qm_exited, q,
		    err, errlen);
		if (q->sb_watch == NULL) {
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			return -EIO;
		}
		sb->standby_pid = pid;
		vmm_meta_save(sb);
		q->sb->standby_ready = 0;
		q->sb_step = QSB_NONE;
		qm_timer(q, q->sb_connect_ev, QM_CONNECT_MS);
		return 0;
	}
	sb->pid = pid;
	q->watch = vmm_child_watch(sb->m->base, pid, qm_exited, q, err, errlen);
	if (q->watch == NULL) {
		kill(pid, SIGKILL);
		sb->pid = 0;
		return -EIO;
	}
	/* On disk before anything else can happen: a manager killed from
	 * here on finds this qemu by its pid at the next start. */
	vmm_meta_save(sb);
	q->expect_exit = 0;
	q->io_stopped = 0;
	q->down_why[0] = '\0';
	qm_timer(q, q->connect_ev, QM_CONNECT_MS);
	return 0;
}

/* A fresh boot of a failed sandbox whose qemu still lives (stopped on a
 * disk error, say): that qemu goes first, reaped here, so the disk and
 * the control socket are free for the new one. */
static void
qm_main_reap(struct qm *q)
{
	struct vmm_sandbox *sb = q->sb;
	pid_t pid = sb->pid;

	if (pid <= 0)
		return;
	vmm_child_unwatch(q->watch);
	q->watch = NULL;
	event_del(q->lost_ev);
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	sb->pid = 0;
	vmm_qmp_free(q->qmp);
	q->qmp = NULL;
	vmm_console_close(&q->con);
	q->expect_exit = 0;
	q->kill_why[0] = '\0';
	(void)unlink(q->qmp_path);
}

static int
qm_boot(struct vmm_sandbox *sb, int restore, char *err, size_t errlen)
{
	struct qm *q = QM(sb);
	int rc;

	if (restore == 3) {
		/* A ready pool member claimed: restored, identified and
		 * paused already; it runs on and gets its own identity. */
		if (sb->pid <= 0 || !vmm_qmp_is_ready(q->qmp)) {
			snprintf(err, errlen, "the pool member's qemu is gone");
			return -ESRCH;
		}
		q->ready = q->claim = 1;
		q->op = QM_RESTORE;
		q->boot_t0 = q->t_qmp = q->t_loaded = vmm_now_ms();
		q->step = QR_CONT;
		qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
		(void)qm_cmd(q, "cont", NULL);	/* a failure kills: reported */
		return 0;
	}
	q->claim = 0;
	q->ready = restore == 2;	/* the ready snapshot (a create) */
	if (q->ready)
		restore = 1;
	if (restore && sb->standby_pid > 0 && !q->ready) {
		/* Its qemu is up (or coming up): promote it when ready. */
		q->op = QM_RESTORE;
		q->step = QR_STANDBY;
		qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
		if (sb->standby_ready)
			qm_promote(q);
		return 0;
	}
	if (!restore) {
		qm_standby_reap(q);	/* a fresh boot wants the disk */
		qm_main_reap(q);	/* a failed sandbox's stopped qemu */
		sb->accel = vmm_accel_boot(sb, &q->trial);
	}
	if ((rc = qm_spawn(q, restore, 0, err, errlen)) < 0 && q->trial) {
		/* KVM's trial could not even start (no /dev/kvm to bind in
		 * the jail, a binary the jail cannot run, ...): a failed
		 * trial like one that dies. The same boot goes on under TCG;
		 * only if that starts is the verdict TCG (a cause that is
		 * not KVM's fails both, and is the create's error). */
		char kerr[VMM_ERRLEN];

		snprintf(kerr, sizeof(kerr), "%s", err);
		q->trial = 0;
		sb->accel = VMM_ACCEL_TCG;
		if ((rc = qm_spawn(q, 0, 0, err, errlen)) == 0)
			vmm_accel_verdict(sb, VMM_ACCEL_TCG, kerr);
	}
	if (rc < 0) {
		q->trial = 0;
		return rc;
	}
	q->op = restore ? QM_RESTORE : QM_BOOT;
	q->step = restore ? QR_QMP : QM_FIRST;
	q->boot_t0 = vmm_now_ms();
	/* A restore gets a boot's time: one whose stream carries the RAM
	 * (a fork, a checkpoint, a clone's wake) reads hundreds of MB, and
	 * a clone's or a fork's is not done before its guest took its
	 * identity (the agent answering, under TCG): with ten forks made
	 * at once, or a fork while its chain's layers merge, on two busy
	 * cores, either took more than op_timeout. */
	qm_timer(q, q->deadline_ev, restore ? sb->m->cfg.ready_timeout_ms :
	    q->trial ? sb->m->cfg.kvm_trial_ms : sb->m->cfg.ready_timeout_ms);
	if (!restore)
		qm_timer(q, q->poll_ev, QM_CONSOLE_MS);
	return 0;
}

static int
qm_need_qmp(struct qm *q, char *err, size_t errlen)
{
	if (!vmm_qmp_is_ready(q->qmp)) {
		snprintf(err, errlen, "no QMP connection to qemu of %s",
		    q->sb->id);
		return -ENOTCONN;
	}
	return 0;
}

static int
qm_simple(struct vmm_sandbox *sb, enum qm_op op, const char *cmd, char *err,
    size_t errlen)
{
	struct qm *q = QM(sb);
	int rc;

	if ((rc = qm_need_qmp(q, err, errlen)) < 0)
		return rc;
	q->op = op;
	q->step = QM_FIRST;
	qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
	(void)qm_cmd(q, cmd, NULL);	/* a failure is reported async */
	return 0;
}

static int
qm_pause(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return qm_simple(sb, QM_PAUSE, "stop", err, errlen);
}

static int
qm_cont(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	return qm_simple(sb, QM_CONT, "cont", err, errlen);
}

static int
qm_suspend(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct qm *q = QM(sb);
	int rc;

	if ((rc = qm_need_qmp(q, err, errlen)) < 0)
		return rc;
	q->op = QM_SUSPEND;
	q->step = QM_FIRST;
	q->was_running = sb->state == VMM_RUNNING;
	qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
	qm_step(q, NULL, NULL);
	return 0;
}

static int
qm_stop(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct qm *q = QM(sb);

	qm_sync_end(q);		/* before its quit or SIGTERM */
	q->op = QM_STOP;
	q->step = QM_FIRST;
	q->exit_state = VMM_STOPPED;
	qm_standby_reap(q);
	if (sb->pid == 0) {
		qm_unlink(sb, "mem");
		qm_unlink(sb, "snap/state");
		q->op = QM_IDLE;
		vmm_backend_done_later(sb, 1, VMM_STOPPED, "");
		return 0;
	}
	qm_timer(q, q->deadline_ev, QM_QUIT_MS);
	q->expect_exit = 1;
	if (vmm_qmp_is_ready(q->qmp)) {
		if (vmm_qmp_command(q->qmp, "quit", NULL, NULL, NULL, err,
		    errlen) == 0)
			return 0;
	}
	kill(sb->pid, SIGTERM);
	return 0;
}

static int
qm_kill(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct qm *q = QM(sb);

	(void)err;
	(void)errlen;
	qm_quiet(q);
	event_del(q->lost_ev);
	q->op = QM_KILL;
	q->step = QM_FIRST;
	q->exit_state = VMM_STOPPED;
	qm_standby_reap(q);
	if (sb->pid == 0) {
		q->op = QM_IDLE;
		vmm_backend_done_later(sb, 1, VMM_STOPPED, "");
		return 0;
	}
	q->expect_exit = 1;
	kill(sb->pid, SIGKILL);
	return 0;
}

static int
qm_adopt(struct vmm_sandbox *sb, pid_t pid, char *err, size_t errlen)
{
	struct qm *q = QM(sb);

	/* a manager gone while a child punched its RAM file left it
	 * SIGSTOPped (qm_sync_start): on again, its guest stopped still */
	(void)kill(pid, SIGCONT);
	sb->pid = pid;
	q->watch = vmm_child_watch(sb->m->base, pid, qm_exited, q, err, errlen);
	if (q->watch == NULL) {
		sb->pid = 0;
		return -ESRCH;
	}
	q->op = QM_ADOPT;
	q->step = QA_QMP;
	qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
	qm_timer(q, q->connect_ev, 0);
	return 0;
}

static void
qm_poll_fire(evutil_socket_t fd, short what, void *arg)
{
	struct qm *q = arg;

	(void)fd;
	(void)what;
	if (q->op == QM_BOOT)
		qm_console_poll(-1, 0, q);
	else if (q->op == QM_SUSPEND && q->step == QS_POLL)
		(void)qm_cmd(q, "query-migrate", NULL);
	else if (q->op == QM_CAPTURE && (q->step == QC_MIGRATE ||
	    q->step == QC_COMPLETE))
		(void)qm_cmd(q, "query-migrate", NULL);
	else if (q->op == QM_CAPTURE && q->step == QC_CONT)
		(void)qm_cmd(q, "cont", NULL);	/* its clean-up done now? */
	else if (q->op == QM_MERGE && (q->step == QG_JOBS ||
	    q->step == QG_CANCEL))
		(void)qm_cmd(q, "query-block-jobs", NULL);
	else if (q->op == QM_ADOPT && q->step == QA_CANCEL) {
		q->step = QA_MIGRATE;		/* query-migrate again */
		(void)qm_cmd(q, "query-migrate", NULL);
	}
	else if (q->op == QM_RESTORE && q->step == QR_LOADING)
		(void)qm_cmd(q, "query-status", NULL);
}

/* RAM in a shared file stays out of the stream (x-ignore-shared); a
 * clone's private copy-on-write RAM goes into it, and so the restore of
 * such a snapshot reads it from there. Both ends must agree. */
static json_t *
qm_caps(const struct vmm_sandbox *sb, int out)
{
	if (out)	/* a fork's capture may have set the pause */
		return json_pack("{s:[{s:s,s:b},{s:s,s:b}]}", "capabilities",
		    "capability", "x-ignore-shared", "state",
		    !(sb->ram_shared || sb->ram_anon),
		    "capability", "pause-before-switchover", "state", 0);
	return json_pack("{s:[{s:s,s:b}]}", "capabilities", "capability",
	    "x-ignore-shared", "state", !sb->snap_ram && !sb->snap_dev);
}

/* The snapshot is whole: cat wrote it without error and it starts with
 * QEMU's stream magic. A short write into a full disk can still let the
 * migration "complete" (the last bytes sit in the pipe when cat fails),
 * so the migration status alone does not prove anything. */
static int
qm_snap_check(struct vmm_sandbox *sb, char *why, size_t len)
{
	char tmp[PATH_MAX], errp[PATH_MAX], line[300], magic[4];
	struct stat st;
	int fd, ok;

	(void)vmm_path(sb, "snap/state.new", tmp, sizeof(tmp));
	(void)vmm_path(sb, "migrate.err", errp, sizeof(errp));
	vmm_tail_line(errp, line, sizeof(line));
	if (line[0] != '\0') {
		snprintf(why, len, "snapshot to %s failed: %s", tmp, line);
		return -1;
	}
	if ((fd = open(tmp, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(why, len, "snapshot %s: %s", tmp, strerror(errno));
		return -1;
	}
	ok = fstat(fd, &st) == 0 && read(fd, magic, 4) == 4 &&
	    memcmp(magic, "QEVM", 4) == 0;
	if (ok && fsync(fd) < 0) {
		snprintf(why, len, "snapshot %s: fsync: %s", tmp, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	if (!ok) {
		snprintf(why, len, "snapshot %s is incomplete (%lld bytes)", tmp,
		    (long long)st.st_size);
		return -1;
	}
	return 0;
}

/* Undo a failed suspend: the guest goes back to what it was doing. */
static void
qm_suspend_fail(struct qm *q, const char *why)
{
	struct vmm_sandbox *sb = q->sb;
	char err[VMM_ERRLEN];

	qm_sync_end(q);
	qm_unlink(sb, "snap/state.new");
	qm_unlink(sb, "migrate.err");
	snprintf(sb->reason, sizeof(sb->reason), "%s", why);
	if (q->was_running) {
		q->step = QS_CONT;
		if (vmm_qmp_command(q->qmp, "cont", NULL, qm_reply, q, err,
		    sizeof(err)) == 0)
			return;
		qm_kill_now(q, err);
		return;
	}
	qm_done(q, 0, VMM_PAUSED, why);
}

/*
 * The migration URI for snapshot file name (snap/state to read, or
 * snap/state.new to write) into uri. A jailed VMM may not start cat and
 * cannot see the file: root opens it (never through a link) and hands
 * the descriptor over QMP (getfd); the URI then names it. 0, or -1 with
 * err.
 */
static int
qm_snap_uri(struct qm *q, struct vmm_qmp *c, const char *name, int out,
    char *uri, size_t urilen, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = q->sb;
	char p[PATH_MAX], ep[PATH_MAX];
	int fd, rc;

	if (name[0] == '/')
		snprintf(p, sizeof(p), "%s", name);
	else
		(void)vmm_path(sb, name, p, sizeof(p));
	if (!sb->jailed) {
		(void)vmm_path(sb, "migrate.err", ep, sizeof(ep));
		if (out)
			snprintf(uri, urilen, "exec:cat > '%s' 2> '%s'", p, ep);
		else
			snprintf(uri, urilen, "exec:cat '%s'", p);
		return 0;
	}
	fd = out ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600) : open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "snapshot %s: %s", p, strerror(errno));
		return -1;
	}
	rc = vmm_qmp_command_fd(c, "getfd", json_pack("{s:s}", "fdname",
	    "berth-snap"), fd, NULL, NULL, err, errlen);
	close(fd);
	if (rc < 0)
		return -1;
	snprintf(uri, urilen, "fd:berth-snap");
	return 0;
}

/* Restore: feed the snapshot to a qemu waiting in -incoming defer. */
static void
qm_incoming(struct qm *q)
{
	char uri[PATH_MAX * 2 + 64], err[VMM_ERRLEN];

	char rs[PATH_MAX];

	q->step = QR_INCOMING;
	if (q->ready)
		(void)vmm_ready_path(q->sb->m, q->sb->ready_key, "state", rs,
		    sizeof(rs));
	if (qm_snap_uri(q, q->qmp, q->ready ? rs : "snap/state", 0, uri,
	    sizeof(uri), err, sizeof(err)) < 0) {
		qm_kill_now(q, err);
		return;
	}
	(void)qm_cmd(q, "migrate-incoming", json_pack("{s:s}", "uri", uri));
}

/* The standby, its snapshot loaded, becomes the sandbox's qemu and only
 * `cont` is left. If the snapshot file changed since it was loaded (the
 * file on disk is the sandbox), the standby goes and the restore starts
 * a qemu of its own (from the exit handler). */
static void
qm_promote(struct qm *q)
{
	struct vmm_sandbox *sb = q->sb;
	char snap[PATH_MAX];
	struct stat st;

	(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
	if (stat(snap, &st) < 0 || st.st_ino != q->sb_snap.st_ino ||
	    st.st_dev != q->sb_snap.st_dev ||
	    st.st_size != q->sb_snap.st_size ||
	    st.st_mtim.tv_sec != q->sb_snap.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != q->sb_snap.st_mtim.tv_nsec) {
		qm_standby_end(q);
		return;
	}
	sb->pid = sb->standby_pid;
	sb->standby_pid = 0;
	sb->ram_anon = 0;	/* a standby's RAM is a file */
	vmm_meta_save(sb);	/* before cont: it may run the guest */
	q->watch = q->sb_watch;
	q->sb_watch = NULL;
	q->qmp = q->sb_qmp;
	q->sb_qmp = NULL;
	q->sb->standby_ready = 0;
	q->expect_exit = 0;
	q->kill_why[0] = '\0';
	q->sb_step = QSB_NONE;
	event_del(q->sb_connect_ev);
	(void)vmm_console_connect(&q->con);
	q->step = QR_CONT;
	(void)qm_cmd(q, "cont", NULL);
}

/* The RAM file's child done (why0 "" if well): qemu runs on, and the
 * operation that started it goes on. */
static void
qm_synced(void *arg, int img, const char *why0, uint64_t ms)
{
	struct qm *q = arg;
	char why[VMM_ERRLEN];

	(void)img;
	(void)ms;
	q->sparse = NULL;	/* freed after this */
	qm_sparse_cont(q);
	if (q->op != QM_SUSPEND || q->step != QS_SYNC)
		return;		/* the suspend ended otherwise meanwhile */
	if (why0[0] != '\0') {
		snprintf(why, sizeof(why), "the guest RAM file of %s: %s",
		    q->sb->id, why0);
		qm_suspend_fail(q, why);
		return;
	}
	qm_step(q, NULL, NULL);
}

/*
 * The suspended sandbox's memory image, its RAM file, flushed to disk by
 * a child (the loop does not wait for the writeback); with free page
 * reporting (a file that may be sparse, and of its own: not a clone's
 * mapped image) its zero pages punched out first: a booted guest's were
 * a third of it (44 of 144 MiB), its kernel's bss and pages zeroed and
 * freed in blocks too small to report. Nothing may write the file
 * meanwhile: the guest is stopped (QMP stop: its vCPUs, and block I/O
 * drained) and so is its qemu (SIGSTOP: a stopped guest's agent channel
 * still writes what comes to it into guest memory) until the child ends
 * or is ended (qm_sync_end: a failed suspend's cont, any QMP command).
 * 0, or -1 with err.
 */
static int
qm_sync_start(struct qm *q, char *err, size_t errlen)
{
	struct vmm_sandbox *sb = q->sb;
	char mem[PATH_MAX];
	int how = VMM_SPARSE_SYNC;

	qm_sync_end(q);
	if (sb->tpl.balloon && !sb->ram_shared && !sb->ram_anon &&
	    sb->pid > 0 && kill(sb->pid, SIGSTOP) == 0) {
		how |= VMM_SPARSE_PUNCH;
		q->sparse_stop = 1;
	}
	(void)vmm_path(sb, "mem", mem, sizeof(mem));
	q->sparse = vmm_sparse_start(sb->m, mem, how, qm_synced, q, err,
	    errlen);
	if (q->sparse == NULL) {
		qm_sparse_cont(q);
		return -1;
	}
	return 0;
}

/* qemu SIGSTOPped for the child goes on */
static void
qm_sparse_cont(struct qm *q)
{
	if (q->sparse_stop && q->sb->pid > 0)
		(void)kill(q->sb->pid, SIGCONT);
	q->sparse_stop = 0;
}

/* A punch or flush under way ended: before anything is asked of qemu,
 * the guest runs again, or the sandbox goes. */
static void
qm_sync_end(struct qm *q)
{
	if (q->sparse != NULL) {
		vmm_split_cancel(q->sparse);
		q->sparse = NULL;
	}
	qm_sparse_cont(q);
}

/* A sandbox's own snapshot restored and running: the snapshot is
 * consumed (resuming from it again later would rewind the devices under
 * newer RAM). It is renamed away at once and removed after the answer:
 * one that carried the RAM (300 MB) took up to 120 ms to unlink, inside
 * the wake. */
static void
qm_consumed(struct qm *q, const char *reason)
{
	struct vmm_sandbox *sb = q->sb;
	char old[PATH_MAX], cur[PATH_MAX];

	(void)vmm_path(sb, "snap/state", cur, sizeof(cur));
	(void)vmm_path(sb, "snap/state.old", old, sizeof(old));
	if (rename(cur, old) < 0)
		(void)unlink(cur);
	sb->snap_ram = sb->snap_dev = 0;	/* the RAM is in its file */
	qm_done(q, 1, VMM_RUNNING, reason);
	(void)unlink(old);
}

/* A clone's identity is set (or not: then it never runs as its
 * template's twin, the create boots instead). */
static void
qm_ident_done(struct vmm_sandbox *sb, int ok, const char *why, void *arg)
{
	struct qm *q = arg;
	char r[VMM_ERRLEN];

	if (q->op != QM_RESTORE || q->step != QR_IDENT)
		return;
	if (!ok) {
		qm_kill_now(q, why);
		return;
	}
	if (sb->readdress_pending && !sb->fork_pending && !q->ready) {
		char ip[INET_ADDRSTRLEN];

		/* a moved guest runs with this host's address for it */
		sb->readdress_pending = 0;
		inet_ntop(AF_INET, &sb->guest_ip, ip, sizeof(ip));
		snprintf(r, sizeof(r), "moved here: its address is now %s "
		    "(given in %llu ms)", ip, (unsigned long long)(vmm_now_ms() -
		    q->t_cont));
		qm_consumed(q, r);
		return;
	}
	if (sb->fork_pending) {
		/* the capture is consumed: the RAM is its own file now */
		qm_unlink(sb, "snap/state");
		sb->snap_ram = sb->snap_dev = 0;
		snprintf(r, sizeof(r), "%s %s (state loaded %llu ms, "
		    "identity %llu ms)", sb->restoring[0] ? "restored to "
		    "checkpoint" : "forked from", sb->restoring[0] ?
		    sb->restoring : sb->forked_from,
		    (unsigned long long)(q->t_loaded - q->t_qmp),
		    (unsigned long long)(vmm_now_ms() - q->t_cont));
	} else if (q->claim)
		snprintf(r, sizeof(r), "from the ready pool of snapshot %s "
		    "(running %llu ms, identity %llu ms)", sb->ready_key,
		    (unsigned long long)(q->t_cont - q->t_loaded),
		    (unsigned long long)(vmm_now_ms() - q->t_cont));
	else
		snprintf(r, sizeof(r), "restored from the ready snapshot %s (qemu "
		    "up %llu ms, state loaded %llu ms, running %llu ms, identity "
		    "%llu ms)", sb->ready_key,
		    (unsigned long long)(q->t_qmp - q->boot_t0),
		    (unsigned long long)(q->t_loaded - q->t_qmp),
		    (unsigned long long)(q->t_cont - q->t_loaded),
		    (unsigned long long)(vmm_now_ms() - q->t_cont));
	qm_done(q, 1, VMM_RUNNING, r);
}

/* Adopt (the manager restarted): a migration it left running is ended
 * first, then the guest's state says what the sandbox is. */
static void
qm_adopt_step(struct qm *q, json_t *ret, const char *error)
{
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN];
	const char *s;

	switch (q->step) {
	case QA_QMP:
		/* A suspend cut short by the manager's death may have left a
		 * migration running: end it (an error only means there was
		 * none). */
		q->step = QA_CANCEL;
		(void)qm_cmd(q, "migrate_cancel", NULL);
		return;
	case QA_CANCEL:
		/* and wait for the cancel to land: a fork's capture held at
		 * pre-switchover stopped the guest, and QEMU restarts it
		 * only once the migration is over */
		q->step = QA_MIGRATE;
		(void)qm_cmd(q, "query-migrate", NULL);
		return;
	case QA_CONT:		/* cont after a cut migration */
		if (ret == NULL)
			qm_donef(q, 1, VMM_PAUSED, "adopt: cont: %s", error);
		else
			qm_done(q, 1, VMM_RUNNING, "");
		return;
	case QA_MIGRATE:
		s = ret != NULL ? json_string_value(json_object_get(ret,
		    "status")) : NULL;
		if (s != NULL && (strcmp(s, "setup") == 0 ||
		    strcmp(s, "active") == 0 ||
		    strcmp(s, "pre-switchover") == 0 ||
		    strcmp(s, "device") == 0 ||
		    strcmp(s, "cancelling") == 0)) {
			q->step = QA_CANCEL;	/* asked again by the poll */
			qm_timer(q, q->poll_ev, QM_MERGE_POLL_MS);
			return;
		}
		q->step = QA_STATUS;
		(void)qm_cmd(q, "query-status", NULL);
		return;
	default:		/* QA_STATUS: query-status answered */
		break;
	}
	if (ret == NULL) {
		qm_donef(q, 0, VMM_FAILED, "adopt: query-status: %s", error);
		return;
	}
	s = json_string_value(json_object_get(ret, "status"));
	if (s != NULL && strcmp(s, "running") == 0) {
		/* The guest runs on: any snapshot is older than it (a
		 * restore that finished unrecorded consumed it). */
		qm_unlink(sb, "snap/state");
		qm_unlink(sb, "snap/state.new");
		qm_done(q, 1, VMM_RUNNING, "");
	} else if (sb->adopt_from == VMM_SUSPENDED) {
		/* A restore cut short before the guest ran: its RAM file is
		 * untouched, so the snapshot is still the sandbox. This
		 * qemu goes; the sandbox sleeps on. */
		char snap[PATH_MAX];

		(void)vmm_path(sb, "snap/state", snap, sizeof(snap));
		q->expect_exit = access(snap, R_OK) == 0;
		q->exit_state = VMM_SUSPENDED;
		if (!q->expect_exit)
			snprintf(q->kill_why, sizeof(q->kill_why),
			    "restore interrupted by a restart and its "
			    "snapshot is gone");
		qm_quiet(q);
		kill(sb->pid, SIGKILL);
	} else if (s != NULL && (strcmp(s, "postmigrate") == 0 ||
	    strcmp(s, "finish-migrate") == 0) &&
	    sb->adopt_from == VMM_RUNNING) {
		/* a migration stopped a running guest (a fork's capture or
		 * a suspend cut short): it runs on; a half-written snapshot
		 * goes */
		qm_unlink(sb, "snap/state.new");
		qm_unlink(sb, "migrate.err");
		q->step = QA_CONT;
		(void)qm_cmd(q, "cont", NULL);
	} else if (s != NULL && (strcmp(s, "paused") == 0 ||
	    strcmp(s, "postmigrate") == 0 ||
	    strcmp(s, "finish-migrate") == 0)) {
		/* stopped (by a pause, or a suspend cut short): its memory
		 * is whole; a half-written snapshot is not */
		qm_unlink(sb, "snap/state.new");
		qm_unlink(sb, "migrate.err");
		qm_done(q, 1, VMM_PAUSED, "");
	} else {
		snprintf(why, sizeof(why), "adopted qemu in an unusable "
		    "state (%s)", s != NULL ? s : "?");
		qm_kill_now(q, why);
	}
}

/* The restored guest runs: a clone gets its identity first; else the
 * restore is done. */
static void
qm_restored(struct qm *q)
{
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN];

	if (q->ready || sb->fork_pending || sb->readdress_pending) {
		/* a clone: its own identity before anyone reaches it; a
		 * moved guest: its address here */
		q->t_cont = vmm_now_ms();
		q->step = QR_IDENT;
		if ((sb->pooled ? vmm_ident_start_warm : vmm_ident_start)(sb,
		    qm_ident_done, q, why, sizeof(why)) < 0)
			qm_kill_now(q, why);
		return;
	}
	qm_consumed(q, "");
}

/* Restore: a qemu in -incoming defer gets the capabilities and the
 * snapshot, loads it, and runs (a promoted standby: cont only). */
static void
qm_restore_step(struct qm *q, json_t *ret, const char *error)
{
	char why[VMM_ERRLEN];
	const char *s;

	switch (q->step) {
	case QR_QMP:
		q->t_qmp = vmm_now_ms();
		q->step = QR_CAPS;
		(void)qm_cmd(q, "migrate-set-capabilities", qm_caps(q->sb, 0));
		return;
	case QR_CAPS:
		if (ret == NULL)
			break;
		qm_incoming(q);
		return;
	case QR_INCOMING:
		if (ret == NULL)
			break;
		q->step = QR_LOADING;
		(void)qm_cmd(q, "query-status", NULL);
		return;
	case QR_LOADING:
		if (ret == NULL)
			break;
		s = json_string_value(json_object_get(ret, "status"));
		if (s != NULL && strcmp(s, "inmigrate") == 0) {
			qm_timer(q, q->poll_ev, QM_POLL_MS);
			return;
		}
		if (s != NULL && (strcmp(s, "paused") == 0 ||
		    strcmp(s, "prelaunch") == 0 ||
		    strcmp(s, "postmigrate") == 0)) {
			q->t_loaded = vmm_now_ms();
			q->step = QR_CONT;
			(void)qm_cmd(q, "cont", NULL);
			return;
		}
		if (s != NULL && strcmp(s, "running") == 0) {
			qm_restored(q);
			return;
		}
		snprintf(why, sizeof(why), "restore: qemu in state %s",
		    s != NULL ? s : "?");
		qm_kill_now(q, why);
		return;
	case QR_CONT:
		if (ret == NULL)
			break;
		qm_restored(q);
		return;
	default:		/* QR_IDENT, QR_STANDBY: no QMP answer due */
		return;
	}
	snprintf(why, sizeof(why), "restore: %s", error);
	qm_kill_now(q, why);
}

/* Suspend: stop, the device state (and RAM, if not in a file) streamed
 * to snap/state.new, the RAM file flushed, the snapshot renamed into
 * place, quit. A failure lets a guest that ran run on (qm_suspend_fail). */
static void
qm_suspend_step(struct qm *q, json_t *ret, const char *error)
{
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN], uri[PATH_MAX * 2 + 64];
	const char *s;

	switch (q->step) {
	case QM_FIRST:
		q->step = QS_STOP;
		if (q->was_running) {
			(void)qm_cmd(q, "stop", NULL);
			return;
		}
		/* already stopped */
		/* fall through */
	case QS_STOP:
		if (ret == NULL && q->was_running) {
			qm_donef(q, 0, VMM_RUNNING, "stop: %s", error);
			return;
		}
		q->step = QS_CAPS;
		(void)qm_cmd(q, "migrate-set-capabilities", qm_caps(sb, 1));
		return;
	case QS_CAPS: {
		char tmp[PATH_MAX], errp[PATH_MAX];

		if (ret == NULL) {
			snprintf(why, sizeof(why), "snapshot: %s", error);
			qm_suspend_fail(q, why);
			return;
		}
		q->step = QS_MIGRATE;
		(void)vmm_path(sb, "snap/state.new", tmp, sizeof(tmp));
		(void)vmm_path(sb, "migrate.err", errp, sizeof(errp));
		(void)unlink(tmp);
		(void)unlink(errp);
		if (qm_snap_uri(q, q->qmp, "snap/state.new", 1, uri,
		    sizeof(uri), why, sizeof(why)) < 0) {
			qm_suspend_fail(q, why);
			return;
		}
		(void)qm_cmd(q, "migrate", json_pack("{s:s}", "uri", uri));
		return;
	}
	case QS_MIGRATE:
		if (ret == NULL) {
			snprintf(why, sizeof(why), "snapshot: %s", error);
			qm_suspend_fail(q, why);
			return;
		}
		q->step = QS_POLL;
		(void)qm_cmd(q, "query-migrate", NULL);
		return;
	case QS_POLL:
		if (ret == NULL) {
			snprintf(why, sizeof(why), "snapshot: %s", error);
			qm_suspend_fail(q, why);
			return;
		}
		s = json_string_value(json_object_get(ret, "status"));
		if (s == NULL || strcmp(s, "setup") == 0 ||
		    strcmp(s, "active") == 0 ||
		    strcmp(s, "device") == 0 ||
		    strcmp(s, "pre-switchover") == 0 ||
		    strcmp(s, "wait-unplug") == 0) {
			qm_timer(q, q->poll_ev, QM_POLL_MS);
			return;
		}
		if (strcmp(s, "completed") != 0) {
			const char *d = json_string_value(
			    json_object_get(ret, "error-desc"));
			char line[300], errp[PATH_MAX];

			(void)vmm_path(sb, "migrate.err", errp, sizeof(errp));
			vmm_tail_line(errp, line, sizeof(line));
			snprintf(why, sizeof(why), "snapshot %s: %s%s%s",
			    s, line[0] ? line : d ? d : "no reason given",
			    line[0] && d ? " / " : "",
			    line[0] && d ? d : "");
			qm_suspend_fail(q, why);
			return;
		}
		if (qm_snap_check(sb, why, sizeof(why)) < 0) {
			qm_suspend_fail(q, why);
			return;
		}
		/* The RAM file is the memory image: on disk before the
		 * suspend reports ok (a child flushes it, so the loop does
		 * not wait for the writeback). */
		q->step = QS_SYNC;
		if (sb->ram_shared || sb->ram_anon) {
			/* no RAM file: the stream holds the RAM */
			qm_step(q, NULL, NULL);
			return;
		}
		if (qm_sync_start(q, why, sizeof(why)) < 0)
			qm_suspend_fail(q, why);
		return;
	case QS_SYNC: {
		char tmp[PATH_MAX], fin[PATH_MAX];

		(void)vmm_path(sb, "snap/state.new", tmp, sizeof(tmp));
		(void)vmm_path(sb, "snap/state", fin, sizeof(fin));
		if (rename(tmp, fin) < 0) {
			snprintf(why, sizeof(why), "snapshot rename: %s",
			    strerror(errno));
			qm_suspend_fail(q, why);
			return;
		}
		qm_unlink(sb, "migrate.err");
		sb->snap_dev = 0;		/* a snapshot of its own */
		if (sb->ram_shared || sb->ram_anon) {
			sb->ram_shared = sb->ram_anon = 0;
			sb->snap_ram = 1;
		}
		/* From here on the snapshot is the sandbox. */
		q->step = QS_QUIT;
		q->expect_exit = 1;
		q->exit_state = VMM_SUSPENDED;
		event_del(q->deadline_ev);
		qm_timer(q, q->deadline_ev, QM_QUIT_MS);
		if (vmm_qmp_command(q->qmp, "quit", NULL, NULL, NULL, why,
		    sizeof(why)) < 0)
			kill(sb->pid, SIGKILL);
		return;
	}
	case QS_CONT:		/* cont after a failed snapshot */
		if (ret == NULL) {
			char e[VMM_ERRLEN];

			snprintf(e, sizeof(e), "%s; then cont: %s",
			    sb->reason, error);
			qm_kill_now(q, e);
			return;
		}
		snprintf(why, sizeof(why), "%s", sb->reason);
		qm_done(q, 0, VMM_RUNNING, why);
		return;
	default:		/* QS_QUIT: the exit handler ends it */
		return;
	}
}

/* A QMP answer (ret, or error) or an event the operation waited for
 * (both NULL): the operation in flight goes on. */
static void
qm_step(struct qm *q, json_t *ret, const char *error)
{
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN];

	switch (q->op) {
	case QM_BOOT:
		/* Ready = QMP usable and the guest printed its ready line,
		 * in either order. */
		if (vmm_qmp_is_ready(q->qmp) && q->ready_seen) {
			if (q->trial) {
				snprintf(why, sizeof(why), "guest ready in "
				    "%llu ms", (unsigned long long)
				    (vmm_now_ms() - q->boot_t0));
				q->trial = 0;
				vmm_accel_verdict(sb, VMM_ACCEL_KVM, why);
			}
			qm_done(q, 1, VMM_RUNNING, "");
		}
		return;
	case QM_ADOPT:
		qm_adopt_step(q, ret, error);
		return;
	case QM_RESTORE:
		qm_restore_step(q, ret, error);
		return;
	case QM_PAUSE:
		if (ret == NULL)
			qm_donef(q, 0, VMM_RUNNING, "stop: %s", error);
		else
			qm_done(q, 1, VMM_PAUSED, "");
		return;
	case QM_CONT:
		if (ret == NULL) {
			qm_donef(q, 0, q->io_stopped ? VMM_FAILED : VMM_PAUSED,
			    "cont: %s", error);
		} else {
			q->io_stopped = 0;
			qm_done(q, 1, VMM_RUNNING, "");
		}
		return;
	case QM_CAPTURE:
		qm_capture_step(q, ret, error);
		return;
	case QM_MERGE:
		qm_merge_step(q, ret, error);
		return;
	case QM_SUSPEND:
		qm_suspend_step(q, ret, error);
		return;
	default:
		return;
	}
}

/* ---- capture: the state a fork starts from ---- */

/*
 * A capture that cannot finish: what it made goes; a migration under
 * way is cancelled (QEMU restarts a source it stopped); a source that
 * ran runs on (on its new top if the switch happened: consistent either
 * way), and query-status says so before the answer.
 */
static void
qm_cap_fail(struct qm *q, const char *why)
{
	struct vmm_sandbox *sb = q->sb;
	char err[VMM_ERRLEN];

	(void)unlink(q->cap_stream);
	if (!q->cap_switched)
		(void)unlink(q->cap_top);
	snprintf(sb->reason, sizeof(sb->reason), "%s", why);
	if (q->cap_migrating) {
		q->cap_migrating = 0;
		q->step = QC_CANCEL;
		if (vmm_qmp_command(q->qmp, "migrate_cancel", NULL, qm_reply,
		    q, err, sizeof(err)) == 0)
			return;
		qm_kill_now(q, err);
		return;
	}
	if (q->was_running) {
		q->step = QC_CONT_BACK;	/* cont, then the failure */
		if (vmm_qmp_command(q->qmp, "cont", NULL, qm_reply, q, err,
		    sizeof(err)) == 0)
			return;
		qm_kill_now(q, err);
		return;
	}
	qm_done(q, 0, VMM_PAUSED, why);
}

static void
qm_cap_imgdone(pid_t pid, int status, void *arg)
{
	struct qm *q = arg;
	char why[VMM_ERRLEN], st[128], logp[PATH_MAX], tail[256];

	(void)pid;
	q->cap_watch = NULL;
	if (q->op != QM_CAPTURE || q->step != QC_IMG)
		return;
	if (status != 0) {
		vmm_status_text(status, st, sizeof(st));
		(void)vmm_path(q->sb, "mkfs.log", logp, sizeof(logp));
		vmm_tail_line(logp, tail, sizeof(tail));
		snprintf(why, sizeof(why), "fork: qemu-img create of the new "
		    "top %s%s%s", st, tail[0] ? ": " : "", tail);
		qm_cap_fail(q, why);
		return;
	}
	q->step = QC_TOP;
	qm_step(q, NULL, NULL);
}

/*
 * The capture is a live migration into the stream file: the source runs
 * while its RAM is copied (pages it dirties are sent again), QEMU stops
 * it only for the last pages and the devices. pause-before-switchover
 * holds the migration at that stop ("pre-switchover"), and there, with
 * the guest stopped and its I/O drained, the disk's top is switched: the
 * frozen layer and the RAM in the stream are of the same instant. Then
 * the rest of the stream is written and the source continues. The pause
 * is that last part only; it is reported as "source paused N ms".
 *
 * A guest that dirties memory faster than the stream takes it would
 * never converge: after VMM_CAP_CONVERGE_MS the allowed downtime is
 * raised so the copy ends (a longer pause, not an endless capture).
 */
#define VMM_CAP_CONVERGE_MS	3000
#define VMM_CAP_DOWNTIME_MS	100

/* A checkpoint's stream is kept: on disk before the answer, but not
 * inside the source's pause (it runs on first). A fork's is read from
 * the page cache by the forks and dropped: no sync. -1 when it failed
 * (the capture fails). */
static int
qm_cap_sync(struct qm *q)
{
	int fd, rc = 0;

	if (q->sb->op != VMM_OP_CHECKPOINT)
		return 0;
	if ((fd = open(q->cap_stream, O_RDONLY | O_CLOEXEC)) < 0 ||
	    fsync(fd) < 0)
		rc = -1;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		qm_donef(q, 0, q->was_running ? VMM_RUNNING : VMM_PAUSED,
		    "checkpoint: its state could not be written to disk: %s",
		    strerror(errno));
	return rc;
}

static void
qm_capture_step(struct qm *q, json_t *ret, const char *error)
{
	struct vmm_sandbox *sb = q->sb;
	char why[VMM_ERRLEN], uri[PATH_MAX * 2 + 64], node[32], fdset[48];
	const char *s;
	uint64_t t;
	int fd;

	snprintf(node, sizeof(node), "top%u", q->cap_gen);
	snprintf(fdset, sizeof(fdset), "/dev/fdset/%u", 100 + q->cap_gen);
	switch (q->step) {
	case QM_FIRST: {
		char size[32], logp[PATH_MAX];
		char *argv[] = { "qemu-img", "create", "-q", "-u", "-f",
		    "qcow2", "-F", "qcow2", "-b", q->cap_layer, q->cap_top,
		    size, NULL };
		pid_t pid;

		q->step = QC_IMG;
		snprintf(size, sizeof(size), "%uM", sb->disk_mib);
		(void)vmm_path(sb, "mkfs.log", logp, sizeof(logp));
		if ((pid = vmm_spawn(argv, logp, 0, 0, why, sizeof(why))) < 0 ||
		    (q->cap_watch = vmm_child_watch(sb->m->base, pid,
		    qm_cap_imgdone, q, why, sizeof(why))) == NULL) {
			qm_cap_fail(q, why);
			return;
		}
		return;		/* qm_cap_imgdone goes on */
	}
	case QC_TOP:
		/* the new top: the VMM's to write, handed over as a
		 * descriptor (a jailed one cannot open it by path) */
		if ((sb->uid != 0 && chown(q->cap_top, sb->uid, sb->gid) < 0) ||
		    (fd = open(q->cap_top, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			snprintf(why, sizeof(why), "fork: %s: %s", q->cap_top,
			    strerror(errno));
			qm_cap_fail(q, why);
			return;
		}
		q->step = QC_ADD_FD;
		if (vmm_qmp_command_fd(q->qmp, "add-fd", json_pack("{s:i}",
		    "fdset-id", (int)(100 + q->cap_gen)), fd, qm_reply, q, why,
		    sizeof(why)) < 0) {
			close(fd);
			qm_cap_fail(q, why);
			return;
		}
		close(fd);
		return;
	case QC_ADD_FD:
		if (ret == NULL)
			goto fail;
		q->step = QC_BLOCKDEV;
		/* No image locks on it: qemu takes them on the descriptor
		 * the fd set keeps, and they stayed when the next capture
		 * froze this top (a fork standing on it could not open it:
		 * "Failed to get shared 'write' lock"). berth keeps the
		 * writers apart itself: only this VMM writes its top, and a
		 * frozen layer is root's and read-only. */
		(void)qm_cmd(q, "blockdev-add", json_pack("{s:s, s:s, "
		    "s:{s:s, s:s, s:s}, s:n}", "driver", "qcow2", "node-name",
		    node, "file", "driver", "file", "filename", fdset,
		    "locking", "off", "backing"));
		return;
	case QC_BLOCKDEV:
		if (ret == NULL)
			goto fail;
		q->step = QC_CAPS;
		(void)qm_cmd(q, "migrate-set-capabilities", json_pack(
		    "{s:[{s:s,s:b},{s:s,s:b}]}", "capabilities", "capability",
		    "x-ignore-shared", "state", 0, "capability",
		    "pause-before-switchover", "state", 1));
		return;
	case QC_CAPS:
		if (ret == NULL)
			goto fail;
		q->step = QC_PARAMS;
		/* the stream is a local file: no bandwidth cap */
		(void)qm_cmd(q, "migrate-set-parameters", json_pack("{s:I, s:I}",
		    "max-bandwidth", (json_int_t)1 << 40, "downtime-limit",
		    (json_int_t)VMM_CAP_DOWNTIME_MS));
		return;
	case QC_PARAMS:
		if (ret == NULL)
			goto fail;
		q->step = QC_MIGRATE;
		(void)unlink(q->cap_stream);
		if (qm_snap_uri(q, q->qmp, q->cap_stream, 1, uri, sizeof(uri),
		    why, sizeof(why)) < 0) {
			qm_cap_fail(q, why);
			return;
		}
		q->cap_t0 = vmm_now_ms();
		q->cap_forced = 0;
		q->cap_migrating = 1;
		(void)qm_cmd(q, "migrate", json_pack("{s:s}", "uri", uri));
		return;
	case QC_MIGRATE:	/* migrate answered, or a query-migrate */
	case QC_COMPLETE:
		if (ret == NULL)
			goto fail;
		if (json_object_get(ret, "status") == NULL &&
		    q->step == QC_MIGRATE) {
			/* migrate's own (empty) answer */
			qm_timer(q, q->poll_ev, QM_POLL_MS);
			return;
		}
		s = json_string_value(json_object_get(ret, "status"));
		if (q->step == QC_MIGRATE && s != NULL &&
		    strcmp(s, "pre-switchover") == 0) {
			/* stopped, I/O drained: switch the disk's top */
			q->cap_t_stop = vmm_now_ms();
			q->step = QC_SWITCH;
			(void)qm_cmd(q, "blockdev-snapshot", json_pack(
			    "{s:s, s:s}", "node", "d0", "overlay", node));
			return;
		}
		if (s == NULL || strcmp(s, "setup") == 0 ||
		    strcmp(s, "active") == 0 || strcmp(s, "device") == 0 ||
		    strcmp(s, "pre-switchover") == 0) {
			if (q->step == QC_MIGRATE && !q->cap_forced &&
			    vmm_now_ms() - q->cap_t0 > VMM_CAP_CONVERGE_MS) {
				q->cap_forced = 1;
				q->step = QC_DOWNTIME;
				(void)qm_cmd(q, "migrate-set-parameters",
				    json_pack("{s:I}", "downtime-limit",
				    (json_int_t)60000));
				return;
			}
			qm_timer(q, q->poll_ev, QM_POLL_MS);
			return;
		}
		q->cap_migrating = 0;
		q->cap_t_end = vmm_now_ms();
		if (strcmp(s, "completed") != 0 || q->step != QC_COMPLETE) {
			snprintf(why, sizeof(why), "fork: capture %s", s);
			qm_cap_fail(q, why);
			return;
		}
		{
			char magic[4];

			if ((fd = open(q->cap_stream, O_RDONLY | O_CLOEXEC)) < 0 ||
			    read(fd, magic, 4) != 4 ||
			    memcmp(magic, "QEVM", 4) != 0) {
				if (fd >= 0)
					close(fd);
				qm_cap_fail(q, "fork: the captured state is "
				    "incomplete");
				return;
			}
			close(fd);
		}
		if (!q->was_running) {
			if (qm_cap_sync(q) < 0)
				return;
			qm_done(q, 1, VMM_PAUSED, "");
			return;
		}
		q->step = QC_CONT;
		q->cont_tries = 0;
		(void)qm_cmd(q, "cont", NULL);
		return;
	case QC_DOWNTIME:	/* the downtime raised: poll on */
		if (ret == NULL)
			goto fail;
		q->step = QC_MIGRATE;
		qm_timer(q, q->poll_ev, QM_POLL_MS);
		return;
	case QC_SWITCH:
		if (ret == NULL)
			goto fail;
		/* The source writes to its new top from here on; the old
		 * one is frozen: the fork's base. */
		q->cap_switched = 1;
		q->cap_t_sw = vmm_now_ms();
		snprintf(sb->disk, sizeof(sb->disk), "%s", q->cap_top);
		sb->layered = 1;
		sb->layer_gen = q->cap_gen;
		vmm_meta_save(sb);
		q->step = QC_CONTINUE;
		(void)qm_cmd(q, "migrate-continue", json_pack("{s:s}", "state",
		    "pre-switchover"));
		return;
	case QC_CONTINUE:
		if (ret == NULL)
			goto fail;
		q->step = QC_COMPLETE;
		qm_timer(q, q->poll_ev, QM_POLL_MS);
		return;
	case QC_CONT:
		/* QEMU says "completed" before its migration thread's
		 * clean-up has run in its main loop; a cont in between is
		 * refused as "not finalized yet": asked again shortly (within
		 * the op's deadline) */
		if (ret == NULL && error != NULL &&
		    strstr(error, "not finalized") != NULL &&
		    q->cont_tries++ < QM_CONT_TRIES) {
			qm_timer(q, q->poll_ev, QM_POLL_MS);
			return;
		}
		if (ret == NULL) {
			qm_donef(q, 0, VMM_FAILED, "fork: cont: %s", error);
			return;
		}
		t = vmm_now_ms() - q->cap_t_stop;
		if (qm_cap_sync(q) < 0)
			return;
		qm_donef(q, 1, VMM_RUNNING, "source paused %llu ms (its disk's "
		    "top switched in %llu, the last of its RAM and devices "
		    "written in %llu)", (unsigned long long)t,
		    (unsigned long long)(q->cap_t_sw - q->cap_t_stop),
		    (unsigned long long)(q->cap_t_end - q->cap_t_sw));
		return;
	case QC_CANCEL:	/* answered: QEMU restarts the source */
		q->step = QC_CONT_BACK;
		(void)qm_cmd(q, "cont", NULL);
		return;
	case QC_CONT_BACK:	/* its answer aside */
		q->step = QC_STATUS;
		(void)qm_cmd(q, "query-status", NULL);
		return;
	case QC_STATUS:
		snprintf(why, sizeof(why), "%s", sb->reason);
		if (ret != NULL && json_is_true(json_object_get(ret, "running")))
			qm_done(q, 0, VMM_RUNNING, why);
		else if (ret != NULL && !q->was_running)
			qm_done(q, 0, VMM_PAUSED, why);
		else
			qm_donef(q, 0, VMM_FAILED, "%s; then the source did not "
			    "run on%s%s", why, error ? ": " : "", error ? error : "");
		return;
	default:	/* QC_IMG: qm_cap_imgdone goes on */
		return;
	}
fail:
	snprintf(why, sizeof(why), "fork: %s", error != NULL ? error : "?");
	qm_cap_fail(q, why);
}

/* ---- merge: the disk's chain kept short ---- */


static void
qm_merge_step(struct qm *q, json_t *ret, const char *error)
{
	struct vmm_sandbox *sb = q->sb;
	enum vmm_state st = q->was_running ? VMM_RUNNING : VMM_PAUSED;
	json_t *job = NULL, *j;
	const char *s;
	size_t i;

	switch (q->step) {
	case QM_FIRST:
		q->step = QG_BLOCK;
		(void)qm_cmd(q, "query-block", NULL);
		return;
	case QG_BLOCK: {
		/* the base as this qemu names it: a clone of the ready
		 * snapshot started jailed opened it as /base.qcow2 (its
		 * deepest qcow2), where the headers name the host's path;
		 * the top's new header names the host's path either way */
		json_t *img = NULL, *b;
		const char *alias = NULL;

		if (ret == NULL) {
			qm_donef(q, 0, st, "merge: %s", error);
			return;
		}
		json_array_foreach(ret, i, j)
			if ((s = json_string_value(json_object_get(j, "device")))
			    != NULL && strcmp(s, "d0") == 0)
				img = json_object_get(json_object_get(j,
				    "inserted"), "image");
		for (b = img; b != NULL; b = json_object_get(b,
		    "backing-image"))
			if ((s = json_string_value(json_object_get(b,
			    "format"))) != NULL && strcmp(s, "qcow2") == 0)
				alias = json_string_value(json_object_get(b,
				    "filename"));
		q->step = QG_STREAM;
		(void)qm_cmd(q, "block-stream", json_pack("{s:s, s:s, s:s, s:s, "
		    "s:b}", "job-id", "berth-merge", "device", "d0", "base",
		    alias != NULL ? alias : q->mrg_base, "backing-file",
		    q->mrg_base, "auto-dismiss", 0));
		return;
	}
	case QG_STREAM:
		if (ret == NULL) {
			qm_donef(q, 0, st, "merge: %s", error);
			return;
		}
		q->step = QG_JOBS;
		qm_timer(q, q->poll_ev, QM_MERGE_POLL_MS);
		return;
	case QG_JOBS:
	case QG_CANCEL:		/* cancelling */
		if (ret == NULL) {
			qm_donef(q, 0, st, "merge: %s", error);
			return;
		}
		json_array_foreach(ret, i, j)
			if ((s = json_string_value(json_object_get(j, "device")))
			    != NULL && strcmp(s, "berth-merge") == 0)
				job = j;
		s = job != NULL ? json_string_value(json_object_get(job,
		    "status")) : NULL;
		if (job == NULL) {
			/* gone already: its outcome is the chain's */
			qm_done(q, q->step == QG_JOBS, st,
			    q->step == QG_JOBS ? "" : sb->reason);
			return;
		}
		if (s == NULL || strcmp(s, "concluded") != 0) {
			qm_timer(q, q->poll_ev, QM_MERGE_POLL_MS);
			return;
		}
		if ((s = json_string_value(json_object_get(job, "error"))) !=
		    NULL && q->step == QG_JOBS)
			snprintf(sb->reason, sizeof(sb->reason), "merge: %s", s);
		q->mrg_ok = s == NULL && q->step == QG_JOBS;
		q->step = QG_DISMISS;
		(void)qm_cmd(q, "block-job-dismiss", json_pack("{s:s}", "id",
		    "berth-merge"));
		return;
	case QG_DISMISS:
		if (q->mrg_ok)
			qm_donef(q, 1, st, "disk layers %u -> 2",
			    q->mrg_layers);
		else
			qm_done(q, 0, st, sb->reason);
		return;
	default:
		return;
	}
}

static int
qm_merge(struct vmm_sandbox *sb, const char *base, unsigned layers,
    char *err, size_t errlen)
{
	struct qm *q = QM(sb);
	int rc;

	if ((rc = qm_need_qmp(q, err, errlen)) < 0)
		return rc;
	q->op = QM_MERGE;
	q->step = QM_FIRST;
	q->was_running = sb->state == VMM_RUNNING;
	q->mrg_ok = 0;
	q->mrg_layers = layers;
	snprintf(q->mrg_base, sizeof(q->mrg_base), "%s", base);
	qm_timer(q, q->deadline_ev, QM_MERGE_MS);
	qm_step(q, NULL, NULL);
	return 0;
}

static int
qm_capture(struct vmm_sandbox *sb, const char *layer, const char *stream,
    char *err, size_t errlen)
{
	struct qm *q = QM(sb);
	int rc;

	if ((rc = qm_need_qmp(q, err, errlen)) < 0)
		return rc;
	q->op = QM_CAPTURE;
	q->step = QM_FIRST;
	q->cap_switched = q->cap_migrating = 0;
	q->was_running = sb->state == VMM_RUNNING;
	q->cap_gen = sb->layer_gen + 1;
	snprintf(q->cap_layer, sizeof(q->cap_layer), "%s", layer);
	snprintf(q->cap_stream, sizeof(q->cap_stream), "%s", stream);
	if (snprintf(q->cap_top, sizeof(q->cap_top), "%s/disk.%u.qcow2",
	    sb->jdir, q->cap_gen) >= (int)sizeof(q->cap_top)) {
		snprintf(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	qm_timer(q, q->deadline_ev, sb->m->cfg.op_timeout_ms);
	qm_step(q, NULL, NULL);
	return 0;
}

/* ---- life of the backend object ---- */

static int
qm_init(struct vmm *m, char *err, size_t errlen)
{
	(void)m;
	(void)err;
	(void)errlen;
	return 0;
}

static struct qm *
qm_get(struct vmm_sandbox *sb)
{
	struct event_base *base = sb->m->base;
	struct qm *q;

	if (sb->priv != NULL)
		return sb->priv;
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->sb = sb;
	vmm_console_init(&q->con, sb);
	q->connect_ev = evtimer_new(base, qm_connect_try, q);
	q->poll_ev = evtimer_new(base, qm_poll_fire, q);
	q->deadline_ev = evtimer_new(base, qm_deadline, q);
	q->lost_ev = evtimer_new(base, qmp_lost, q);
	q->sb_connect_ev = evtimer_new(base, qm_sb_connect_try, q);
	if (q->connect_ev == NULL || q->poll_ev == NULL ||
	    q->deadline_ev == NULL || q->lost_ev == NULL ||
	    q->sb_connect_ev == NULL) {
		if (q->sb_connect_ev) event_free(q->sb_connect_ev);
		if (q->connect_ev) event_free(q->connect_ev);
		if (q->poll_ev) event_free(q->poll_ev);
		if (q->deadline_ev) event_free(q->deadline_ev);
		if (q->lost_ev) event_free(q->lost_ev);
		free(q);
		return NULL;
	}
	(void)vmm_path(sb, "qmp.sock", q->qmp_path, sizeof(q->qmp_path));
	sb->priv = q;
	return q;
}

static void
qm_release(struct vmm_sandbox *sb)
{
	struct qm *q = sb->priv;

	if (q == NULL)
		return;
	qm_standby_reap(q);
	event_free(q->sb_connect_ev);
	qm_sync_end(q);
	vmm_console_close(&q->con);
	vmm_child_unwatch(q->watch);
	vmm_qmp_free(q->qmp);
	event_free(q->connect_ev);
	event_free(q->poll_ev);
	event_free(q->deadline_ev);
	event_free(q->lost_ev);
	free(q);
	sb->priv = NULL;
}

#define QM_ENTRY(fn, ...) do {						\
	if (qm_get(sb) == NULL) {					\
		snprintf(err, errlen, "out of memory");			\
		return -ENOMEM;						\
	}								\
	return fn(sb, __VA_ARGS__);					\
} while (0)

static int
qe_boot(struct vmm_sandbox *sb, int restore, char *err, size_t errlen)
{
	QM_ENTRY(qm_boot, restore, err, errlen);
}

static int
qe_pause(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	QM_ENTRY(qm_pause, err, errlen);
}

static int
qe_cont(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	QM_ENTRY(qm_cont, err, errlen);
}

static int
qe_suspend(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	QM_ENTRY(qm_suspend, err, errlen);
}

static int
qe_stop(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	QM_ENTRY(qm_stop, err, errlen);
}

static int
qe_kill(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	QM_ENTRY(qm_kill, err, errlen);
}

static int
qe_adopt(struct vmm_sandbox *sb, pid_t pid, char *err, size_t errlen)
{
	QM_ENTRY(qm_adopt, pid, err, errlen);
}

static int
qm_standby(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	if (sb->state != VMM_SUSPENDED || sb->pid > 0) {
		snprintf(err, errlen, "sandbox %s is not suspended", sb->id);
		return -EINVAL;
	}
	return qm_spawn(QM(sb), 1, 1, err, errlen);
}

static int
qe_capture(struct vmm_sandbox *sb, const char *layer, const char *stream,
    char *err, size_t errlen)
{
	QM_ENTRY(qm_capture, layer, stream, err, errlen);
}

static int
qe_merge(struct vmm_sandbox *sb, const char *base, unsigned layers,
    char *err, size_t errlen)
{
	QM_ENTRY(qm_merge, base, layers, err, errlen);
}

static int
qe_standby(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	QM_ENTRY(qm_standby, err, errlen);
}

/* The standby budget takes sb's standby for another sandbox: ended and
 * reaped as a stop ends it (its exit handler unwatched first: this is
 * no failure to report). Not while a restore would promote it. */
static void
qm_standby_stop(struct vmm_sandbox *sb)
{
	struct qm *q = sb->priv;

	if (q == NULL || sb->standby_pid <= 0 || q->op == QM_RESTORE)
		return;
	qm_standby_reap(q);
	q->sb_step = QSB_NONE;
}

static void
qm_moved(struct vmm_sandbox *sb)
{
	struct qm *q = sb->priv;

	if (q != NULL)
		(void)vmm_path(sb, "qmp.sock", q->qmp_path, sizeof(q->qmp_path));
}

const struct vmm_backend vmm_backend_qemu = {
	.name = "qemu",
	.init = qm_init,
	.boot = qe_boot,
	.pause = qe_pause,
	.cont = qe_cont,
	.suspend = qe_suspend,
	.stop = qe_stop,
	.kill = qe_kill,
	.adopt = qe_adopt,
	.release = qm_release,
	.standby = qe_standby,
	.standby_stop = qm_standby_stop,
	.moved = qm_moved,
	.capture = qe_capture,
	.merge = qe_merge,
};
