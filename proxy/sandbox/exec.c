/*
 * exec.c — see exec.h. Per sandbox a link: at most one connection to its
 * guest agent, and the commands (and file transfers) asked for, each a
 * job. A job goes through
 *   wake     the sandbox is not running (or an operation is in flight):
 *            px_vm_wake, the proxy's own path, so concurrent execs and
 *            requests share one resume; px_exec_woken goes on
 *   connect  vmm_agent_connect (SO_PEERCRED-checked), a pipe's read end
 *            passed to the reader helper (agentio.h), then a ping with
 *            a fresh nonce:
 *            frames before its pong are an older connection's and are
 *            dropped (by the helper)
 *   run      on a channel of its own (agent_proto.h, protocol 2): the
 *            exec frame, its stdin as the channel's window allows,
 *            output gathered (buffered, bounded) or handed to the
 *            caller's sink (streamed) until the exit frame; meanwhile a
 *            hold on the sandbox (vmm_activity_hold) keeps the idle
 *            policy from pausing it
 * Many jobs run at once on the one connection, at most max_procs per
 * sandbox and max_per_token per API token across its sandboxes (queued
 * and running together; past either a 429), each with its
 * own flow control both ways: the guest sends at most BA_WINDOW bytes of
 * a channel's output until this side acknowledges them ('A'), which a
 * streamed job's slow client holds back (px_exec_stream_read(0)): that
 * command blocks on its pipe, the others go on. Its input goes out as
 * the agent acknowledges what it took ('a'); the rest waits in the job
 * (px_exec_stream_input says how much, for the caller to hold its client
 * back). A job whose caller is gone (px_exec_stream_cancel,
 * px_exec_abandon) is killed in the guest ('K' 9), or dropped while it
 * waits in the queue; the rest go on. A job waits in the queue (for the
 * wake, the agent's pong, the reader's restart, a protocol-1 agent's one
 * slot) at most queue_ms: then it fails (503) without having run.
 * The connection stays open for the next commands; a resume from a
 * snapshot (a new VMM) or a berthd restart closes it (the commands that
 * ran on it fail), and the next command connects again. An agent of
 * protocol 1 (a template built before channels: its pong has no protocol
 * byte) gets one job at a time, as it always did.
 *
 * The root parent parses nothing a guest sent. It holds the agent's
 * socket alone: it writes its own frames there (ping, exec, stdin,
 * resize, acks, kills: bytes it made) and copies what it reads, unread,
 * into a pipe (agentio.c). The guest agent reader ("berthd: agent",
 * agentd.c: unprivileged, chrooted, proc.h) gets only that pipe's read
 * end: it parses every byte of the agent's frames (lengths, types,
 * channel ids, the pong's nonce, the exit line) and sends typed
 * fixed-layout messages (helper.h, HM_AGENT_*) that this file checks:
 * pong, output of stream S of channel C, its exit status or signal, a
 * refusal, stdin taken, protocol error, closed; it has no descriptor on
 * which anything reaches a guest (a command frame is the parent's to
 * make, and the agent runs whatever it is sent). A helper that dies or sends
 * a malformed message is killed and restarted (proc.c, with backoff); the
 * jobs it was reading fail at once (502, saying so), their connections
 * close, and the next job connects again once the new helper runs
 * (waiting for it at most SYNC_MS).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "exec.h"
#include "control.h"
#include "helper.h"
#include "log.h"
#include "proc.h"
#include "valid.h"
#include "vm.h"
#include "vmm.h"
#include "agent_proto.h"
#include "agentio.h"

#include <event2/buffer.h>
#include <event2/event.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SYNC_MS		30000	/* connect to pong */
#define REPING_MS	500	/* the ping again, same connection, until
				 * its pong (see connect_agent) */
#define GRACE_MS	30000	/* past the command's timeout: the agent
				 * kills it then; this is for an agent gone */
#define SYNC_TRIES	3
#define INREC		BA_HDR	/* a queued input record's head */
#define KEEP_POLL_MS	5000	/* keep-awake processes listed again */

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

struct link;

/* The jobs of one API token, queued and running (max_per_token). */
struct owner {
	char id[24];			/* px_auth's token_id */
	int n;
	struct owner *next;
};

struct job {
	TAILQ_ENTRY(job) entry;
	struct link *link;
	struct owner *owner;		/* NULL: the unix socket's */
	void (*done)(void *, const struct px_exec_result *);
	void *done_arg;
	/* streamed (exec_stream): output goes to the sink as it comes */
	int streamed;
	struct px_exec_sink sink;
	int type;			/* BA_EXEC, BA_FILE_PUT, BA_FILE_GET,
					 * BA_LIST, BA_LOGS, BA_SIGNAL */
	int discard;			/* its output is not wanted */
	int ranged;			/* a file get of a range */
	uint32_t ring;			/* a detached command's */
	int keep_awake;
	int before_sleep;		/* px_exec_req's */
	/* a detached start; a list; a ring's bounds */
	uint32_t proc;
	int pid;
	struct px_proc_info *procs;
	size_t nprocs;
	struct px_dirent *entries;	/* a directory's (BA_LS) */
	size_t nentries, max_entries;
	int ring_known, proc_state, proc_code;
	uint64_t ring_first, ring_total;
	unsigned char *fields;		/* the request's payload */
	size_t fieldslen;
	/* input not yet sent: records of a BA_HDR head (length, type)
	 * and the payload ('I' stdin or file bytes, empty: EOF; 'W') */
	struct evbuffer *inq;
	uint32_t chan;			/* its channel while it runs; 0 */
	uint32_t in_flight;		/* 'I' bytes sent, not yet taken */
	uint32_t out_held;		/* output taken here, not acked to
					 * the guest (a slow client) */
	uint32_t out_window;		/* output the guest may still send */
	int rpaused;			/* exec_read(0) */
	uint64_t timeout_ms;
	int64_t t0, wake_t0, wake_ms, deadline;
	struct evbuffer *out, *err;
	int truncated;
	int tries;
};

/* The handle the control API (proxy/api/) holds is the job. */
struct px_exec_stream {
	struct job j;
};

enum link_state { L_IDLE, L_WAKING, L_SYNC, L_READY };

struct link {
	char id[PX_SANDBOX_ID_MAX + 1];
	TAILQ_HEAD(, job) queue;	/* asked for, in order */
	TAILQ_HEAD(, job) running;	/* on a channel of the connection */
	int nrunning;
	enum link_state st;
	struct px_agentio *io;		/* the agent's connection (agentio.h) */
	uint64_t conn;			/* its id with the helper */
	int proto;			/* the agent's (its pong): 1 or 2 */
	uint32_t next_chan;
	int64_t helper_t0;		/* since when a job waits for it */
	unsigned char nonce[HM_AGENT_NONCE];
	int64_t sync_t0;		/* when the ping was first sent */
	int pings;			/* sent on this connection */
	struct event *step_ev;		/* a deferred step */
	struct event *tick_ev;		/* sync deadline, command deadlines */
	struct event *queue_ev;		/* the oldest queued job's deadline */
	int held;			/* vmm_activity_hold taken */
	/* keep-awake processes running (see keep_set) */
	int keep, keep_held, keep_listing;
	struct event *keep_ev;
	struct link *next;
};

static struct {
	struct event_base *base;
	struct link *links;
	struct px_proc *agentd;		/* the helper that reads the guests */
	int agentd_up;
	int agentd_bad;			/* killed: ignore what it still sent */
	uint64_t last_conn;		/* ids given to connections */
	int stopping;			/* px_exec_shutdown began */
	int max_procs;			/* per sandbox, queued and running */
	int max_per_token;		/* per token, queued and running */
	int64_t queue_ms;		/* the longest a job waits to run */
	struct owner *owners;		/* tokens with jobs */
} X = { .max_procs = PX_EXEC_PROCS_DEFAULT,
	.max_per_token = PX_EXEC_PER_TOKEN_DEFAULT,
	.queue_ms = PX_EXEC_QUEUE_MS_DEFAULT };

static void step(struct link *);

/* The file requests of protocol 2 (agent_proto.h). */
static int
fs_op(int type)
{
	return type == BA_LS || type == BA_MKDIR || type == BA_REMOVE ||
	    type == BA_MOVE || type == BA_WATCH;
}
static void keep_poll(evutil_socket_t, short, void *);

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
step_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	step(arg);
}

/* Steps from the event loop, never from inside a caller's call. */
static void
later(struct link *l)
{
	struct timeval tv = { 0, 0 };

	event_add(l->step_ev, &tv);
}

static void
tick_in(struct link *l, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_add(l->tick_ev, &tv);
}

/* The token's count of jobs; NULL when it has none. */
static struct owner *
owner_find(const char *id)
{
	struct owner *o;

	for (o = X.owners; o != NULL; o = o->next)
		if (strcmp(o->id, id) == 0)
			return o;
	return NULL;
}

static void
owner_put(struct owner *o)
{
	struct owner **pp;

	if (o == NULL || --o->n > 0)
		return;
	for (pp = &X.owners; *pp != NULL; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	free(o);
}

static void
job_free(struct job *j)
{
	owner_put(j->owner);
	free(j->procs);
	free(j->entries);
	free(j->fields);
	if (j->inq != NULL)
		evbuffer_free(j->inq);
	if (j->out != NULL)
		evbuffer_free(j->out);
	if (j->err != NULL)
		evbuffer_free(j->err);
	free(j);
}

/* A command runs: the idle policy leaves the sandbox running (a 1 s
 * activity tick could lose the race against idle_pause 1s). */
static void
hold(struct link *l, int on)
{
	struct vmm_sandbox *sb;

	if (l->held == on)
		return;
	l->held = on;
	if ((sb = px_vm_sandbox(l->id)) != NULL)
		vmm_activity_hold(sb, on);
}

/*
 * Keep-awake (exec --keep-awake): while a detached process started with
 * it runs, its sandbox holds awake. berthd counts them from the starts
 * it makes and from every list the agent answers, and lists them again
 * every KEEP_POLL_MS while the count is not 0 (such a process may end
 * any time). A sandbox not running (paused or suspended by a request) is
 * not woken for that: it is listed again once it runs.
 */
static void
keep_set(struct link *l, int n)
{
	struct vmm_sandbox *sb;
	struct timeval tv = { KEEP_POLL_MS / 1000, (KEEP_POLL_MS % 1000) *
	    1000 };

	l->keep = n;
	if ((n > 0) != l->keep_held) {
		l->keep_held = n > 0;
		if ((sb = px_vm_sandbox(l->id)) != NULL)
			vmm_activity_hold(sb, l->keep_held);
	}
	if (n > 0)
		event_add(l->keep_ev, &tv);
	else
		evtimer_del(l->keep_ev);
}

/* A frame of ours on the connection: on channel chan (0: none). */
static void
send_frame(struct link *l, int type, uint32_t chan, const void *p,
    size_t len)
{
	struct evbuffer *out = px_agentio_output(l->io);
	unsigned char h[BA_HDR + BA_CHAN];
	size_t hl = BA_HDR;

	if (chan != 0 && l->proto >= 2) {
		ba_put32(h + BA_HDR, chan);
		hl += BA_CHAN;
	}
	ba_hdr_put(h, (uint32_t)(len + hl - BA_HDR), type);
	evbuffer_add(out, h, hl);
	if (len > 0)
		evbuffer_add(out, p, len);
}

/* The job is off its channel (or never had one). */
static void
unrun(struct link *l, struct job *j)
{
	if (j->chan == 0)
		return;
	TAILQ_REMOVE(&l->running, j, entry);
	l->nrunning--;
	j->chan = 0;
	if (l->nrunning == 0) {
		hold(l, 0);
		if (l->st == L_READY)
			evtimer_del(l->tick_ev);
	}
}

/* Ends job j with res and forgets it. */
static void
job_end(struct link *l, struct job *j, struct px_exec_result *res)
{
	if (j->chan != 0)
		unrun(l, j);
	else
		TAILQ_REMOVE(&l->queue, j, entry);
	res->wake_ms = j->wake_ms;
	res->duration_ms = now_ms() - j->t0;
	res->truncated = j->truncated;
	if (res->status == 200) {
		res->proc = j->proc;
		res->pid = j->pid;
		res->procs = j->procs;
		res->nprocs = j->nprocs;
		res->ring_known = j->ring_known;
		res->ring_first = j->ring_first;
		res->ring_total = j->ring_total;
		res->proc_state = j->proc_state;
		res->proc_code = j->proc_code;
		res->entries = j->entries;
		res->nentries = j->nentries < j->max_entries ? j->nentries :
		    j->max_entries;
		if (j->type == BA_LS && j->nentries > j->max_entries)
			res->truncated = 1;
	}
	j->done(j->done_arg, res);
	job_free(j);
}

static void __attribute__((format(printf, 5, 0)))
job_vfail(struct link *l, struct job *j, int status, const char *code,
    const char *fmt, va_list ap)
{
	struct px_exec_result res;
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (status >= 500)
		log_warnx("sandbox %s: exec: %s", l->id, msg);
	memset(&res, 0, sizeof(res));
	res.status = status;
	res.message = msg;
	res.code = code;
	job_end(l, j, &res);
}

static void __attribute__((format(printf, 4, 5)))
job_fail(struct link *l, struct job *j, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	job_vfail(l, j, status, NULL, fmt, ap);
	va_end(ap);
}

/* The same with the error's code for the API ("capacity"). */
static void __attribute__((format(printf, 5, 6)))
job_fail_code(struct link *l, struct job *j, int status, const char *code,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	job_vfail(l, j, status, code, fmt, ap);
	va_end(ap);
}

/* Every running job fails (their connection is gone), then the queued
 * ones too when all is true. */
static void __attribute__((format(printf, 4, 5)))
fail_all(struct link *l, int all, int status, const char *fmt, ...)
{
	char msg[512];
	struct job *j;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	while ((j = TAILQ_FIRST(&l->running)) != NULL)
		job_fail(l, j, status, "%s", msg);
	while (all && (j = TAILQ_FIRST(&l->queue)) != NULL)
		job_fail(l, j, status, "%s", msg);
}

static void
disconnect(struct link *l)
{
	if (l->io != NULL) {
		struct hm_agent_id m = { l->conn };

		/* the guest sees its end close now; the helper's pipe ends
		 * and the helper forgets it */
		px_agentio_free(l->io);
		px_proc_send(X.agentd, HM_AGENT_CLOSE, &m, sizeof(m), NULL, 0);
	}
	l->io = NULL;
	l->conn = 0;
	evtimer_del(l->tick_ev);
	l->st = L_IDLE;
}

/* Sends what the job's input window allows of what it queued. */
static void
pump_input(struct link *l, struct job *j)
{
	unsigned char h[INREC], buf[BA_CHUNK];
	uint32_t len;
	int type;

	while (evbuffer_get_length(j->inq) >= INREC) {
		evbuffer_copyout(j->inq, h, INREC);
		len = ba_hdr_len(h);
		type = h[4];
		if (type == BA_STDIN && (l->proto >= 2 ?
		    j->in_flight + len > BA_WINDOW : 0))
			break;
		evbuffer_drain(j->inq, INREC);
		evbuffer_remove(j->inq, buf, len);
		send_frame(l, type, j->chan, buf, len);
		/* protocol 1 takes no count: the socket's own buffer is
		 * the backpressure (on_write) */
		if (type == BA_STDIN && l->proto >= 2)
			j->in_flight += len;
	}
}

static void
run(struct link *l, struct job *j)
{
	TAILQ_REMOVE(&l->queue, j, entry);
	TAILQ_INSERT_TAIL(&l->running, j, entry);
	l->nrunning++;
	do
		j->chan = ++l->next_chan;
	while (j->chan == 0);
	j->out_window = BA_WINDOW;
	send_frame(l, j->type, j->chan, j->fields, j->fieldslen);
	pump_input(l, j);
	/* a watch and a terminal's client last as long as their client
	 * (or the directory, the process): no deadline */
	j->deadline = j->type == BA_WATCH || j->type == BA_ATTACH ?
	    INT64_MAX : now_ms() + (int64_t)j->timeout_ms + GRACE_MS;
	/* the reclaim before a sleep is no activity: it would give up the
	 * very pause it runs for (libvmm: activity while the guest gives
	 * memory back abandons the pause) */
	if (!j->before_sleep)
		hold(l, 1);
	tick_in(l, 1000);
	if (j->streamed && j->sink.start != NULL)
		j->sink.start(j->sink.arg, j->wake_ms);
}

/* The agent may send n more bytes of the job's output. */
static void
credit(struct link *l, struct job *j, uint32_t n)
{
	unsigned char b[4];

	if (n == 0 || l->proto < 2 || l->io == NULL)
		return;
	ba_put32(b, n);
	send_frame(l, BA_ACK, j->chan, b, sizeof(b));
	j->out_window += n;
}

static void
output(struct job *j, struct evbuffer *dst, const unsigned char *p,
    size_t len)
{
	size_t room = PX_EXEC_OUT_MAX - evbuffer_get_length(dst);

	if (len > room) {
		j->truncated = 1;
		len = room;
	}
	evbuffer_add(dst, p, len);
}

/* The command's end (the helper checked its form). */
static void
finished(struct link *l, struct job *j, const struct hm_agent_exit *m)
{
	struct px_exec_result res;
	size_t i;
	int n;

	if (j->type == BA_LIST) {
		for (i = 0, n = 0; i < j->nprocs; i++)
			n += j->procs[i].keep && j->procs[i].state == 0;
		keep_set(l, n);
	} else if (j->proc != 0 && j->keep_awake)
		keep_set(l, l->keep + 1);

	memset(&res, 0, sizeof(res));
	res.status = 200;
	res.exited = m->exited;
	res.exit_code = m->exited ? m->code : 0;
	res.signal = m->exited ? 0 : m->signal;
	res.timed_out = m->timed_out;
	res.outlen = evbuffer_get_length(j->out);
	res.errlen = evbuffer_get_length(j->err);
	res.out = res.outlen ? evbuffer_pullup(j->out, -1) : (unsigned char *)"";
	res.err = res.errlen ? evbuffer_pullup(j->err, -1) : (unsigned char *)"";
	job_end(l, j, &res);
	later(l);
}

/* The agent refused the command. */
static void
refused(struct link *l, struct job *j, const struct hm_agent_fail *m)
{
	if (m->status != 0)
		job_fail(l, j, m->status, "%s", m->msg);
	else
		job_fail(l, j, 502, "the guest agent refused: %s", m->msg);
	later(l);
}

/* Bytes of the command's stdout or stderr. */
static void
got_output(struct link *l, struct job *j, int stream, const unsigned char *p,
    size_t len)
{
	if (!j->before_sleep)
		px_vm_activity(l->id);
	if (j->discard)
		return;
	if (j->streamed) {
		j->sink.output(j->sink.arg, stream, p, len);
		/* the sink may have cancelled j: it is freed then */
		return;
	}
	output(j, stream == BA_STDOUT ? j->out : j->err, p, len);
}

/* The guest's end closed, or the write to it failed. */
static void
closed(struct link *l)
{
	enum link_state st = l->st;
	struct job *j = TAILQ_FIRST(&l->queue);

	disconnect(l);
	fail_all(l, 0, 502, "the guest agent's connection closed while the "
	    "command ran (the VM stopped or was restored?)");
	if (st == L_SYNC && j != NULL && ++j->tries >= SYNC_TRIES)
		job_fail(l, j, 502, "the guest agent's connection closed "
		    "before it answered");
	later(l);
}

/* Protocol 1: what was queued toward the agent is written, a streamed
 * job's client may send more. */
static void
on_write(void *arg)
{
	struct link *l = arg;
	struct job *j = TAILQ_FIRST(&l->running);

	if (l->proto < 2 && j != NULL && j->streamed &&
	    j->sink.drained != NULL)
		j->sink.drained(j->sink.arg);
}

/* A write to the guest failed (its end closing is the helper's to
 * tell, after the bytes before it: HM_AGENT_CLOSED). */
static void
on_lost(void *arg)
{
	closed(arg);
}

static void
tick(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct job *j, *n;
	int64_t t = now_ms();

	(void)fd;
	(void)what;
	if (l->st == L_IDLE) {		/* waiting for the helper */
		step(l);
		return;
	}
	if (l->st == L_SYNC && t - l->sync_t0 < SYNC_MS) {
		send_frame(l, BA_PING, 0, l->nonce, sizeof(l->nonce));
		l->pings++;
		tick_in(l, REPING_MS);
		return;
	}
	if (l->st == L_SYNC) {
		disconnect(l);
		if ((j = TAILQ_FIRST(&l->queue)) != NULL)
			job_fail(l, j, 504, "the guest agent of sandbox '%s' "
			    "did not answer within %d s (is the guest up? see "
			    "netctl sandbox console %s)", l->id, SYNC_MS / 1000,
			    l->id);
		later(l);
		return;
	}
	if (l->st != L_READY || l->nrunning == 0)
		return;
	TAILQ_FOREACH_SAFE(j, &l->running, entry, n) {
		if (t <= j->deadline)
			continue;
		if (l->proto < 2) {
			disconnect(l);	/* the agent kills what ran for us */
			fail_all(l, 0, 504, "the guest agent did not end the "
			    "command %d s after its timeout", GRACE_MS / 1000);
			later(l);
			return;
		}
		send_frame(l, BA_KILL, j->chan, "9", 1);
		job_fail(l, j, 504, "the guest agent did not end the command "
		    "%d s after its timeout", GRACE_MS / 1000);
	}
	if (l->nrunning > 0)
		tick_in(l, 1000);
	later(l);
}

/* What the queue waits for, in a job's failure. */
static const char *
queue_why(const struct link *l)
{
	switch (l->st) {
	case L_WAKING:
		return "its wake has not ended";
	case L_SYNC:
		return "its guest agent has not answered";
	case L_IDLE:
		return X.agentd_up ? "it was not running" : "the guest agent's "
		    "reader (berthd: agent) was restarting";
	default:
		return l->proto < 2 ? "its guest agent (protocol 1) runs one "
		    "command at a time" : "its other commands held every slot";
	}
}

/* The queue's oldest job fails at its deadline (queue_tick). */
static void
queue_arm(struct link *l)
{
	struct job *j = TAILQ_FIRST(&l->queue);
	struct timeval tv;
	int64_t left;

	if (j == NULL) {
		evtimer_del(l->queue_ev);
		return;
	}
	left = j->t0 + X.queue_ms - now_ms();
	if (left < 0)
		left = 0;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	event_add(l->queue_ev, &tv);
}

/* Jobs queued longer than queue_ms fail: the queue is in the order they
 * were asked for, the oldest first. */
static void
queue_tick(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct job *j;
	int64_t t = now_ms();

	(void)fd;
	(void)what;
	while ((j = TAILQ_FIRST(&l->queue)) != NULL && t - j->t0 >= X.queue_ms)
		job_fail(l, j, 503, "sandbox '%s': the command waited %.1f s "
		    "without starting (%s) and was dropped (exec_queue_timeout "
		    "%.1f s)", l->id, (double)(t - j->t0) / 1000, queue_why(l),
		    (double)X.queue_ms / 1000);
	queue_arm(l);
	later(l);
}

/* A job joined the queue: its deadline is armed unless an older one's
 * is (which then arms the next). */
static void
queue_add(struct link *l, struct job *j)
{
	TAILQ_INSERT_TAIL(&l->queue, j, entry);
	if (!evtimer_pending(l->queue_ev, NULL))
		queue_arm(l);
	later(l);
}

/* Connects to the agent, hands the helper the read end of the copy of
 * what the agent sends (never the socket), pings. */
static void
connect_agent(struct link *l, struct vmm_sandbox *sb)
{
	static uint64_t serial;
	struct hm_agent_conn m;
	char err[VMM_ERRLEN];
	struct job *j = TAILQ_FIRST(&l->queue);
	struct px_agentio_cbs cbs = { on_write, on_lost, l };
	uint64_t n;
	int fd, rfd, i;

	if ((fd = vmm_agent_connect(sb, err, sizeof(err))) < 0) {
		job_fail(l, j, fd == -ENOTSUP ? 409 : 502, "%s", err);
		later(l);
		return;
	}
	/* unique per connection of this berthd, and across restarts */
	n = ++serial ^ (uint64_t)now_ms() << 20 ^ (uint64_t)getpid() << 48;
	for (i = 0; i < (int)sizeof(l->nonce); i++)
		l->nonce[i] = (unsigned char)(n >> (8 * i));
	memset(&m, 0, sizeof(m));
	m.id = ++X.last_conn;
	memcpy(m.nonce, l->nonce, sizeof(m.nonce));
	/* the socket stays here; the helper gets a pipe's read end that
	 * this process fills with what the agent sends (agentio.h) */
	if ((l->io = px_agentio_new(X.base, fd, &rfd, &cbs)) == NULL) {
		job_fail(l, j, 503, "cannot relay the guest agent's "
		    "connection: out of memory or descriptors");
		later(l);
		return;
	}
	if (px_proc_send(X.agentd, HM_AGENT_CONN, &m, sizeof(m), &rfd, 1) !=
	    0) {
		close(rfd);
		px_agentio_free(l->io);
		l->io = NULL;
		job_fail(l, j, 503, "cannot pass the guest agent's connection "
		    "to its reader (berthd: agent)");
		later(l);
		return;
	}
	close(rfd);	/* the helper's now (px_proc_send sent a copy) */
	l->conn = m.id;
	l->proto = 2;
	l->next_chan = 0;
	send_frame(l, BA_PING, 0, l->nonce, sizeof(l->nonce));
	l->st = L_SYNC;
	l->sync_t0 = now_ms();
	l->pings = 1;
	if (!j->before_sleep)	/* j: still the queue's first */
		px_vm_activity(l->id);
	/*
	 * A pong can be lost while the connection is fine: the guest takes
	 * the ping's bytes (data interrupt) before its kernel has handled
	 * qemu's "host connected" control message (a work queue), so the
	 * agent's answer finds the port "closed" and is dropped. Right
	 * after a resume from a snapshot, a busy guest makes that likely
	 * (issue 16: one of five concurrent execs waited out SYNC_MS). The
	 * ping is idempotent: send it again until a pong comes.
	 */
	tick_in(l, REPING_MS);
}

static void
step(struct link *l)
{
	struct vmm_sandbox *sb;
	struct vmm_info info;
	struct job *j;

	while ((j = TAILQ_FIRST(&l->queue)) != NULL) {
		if (l->st == L_WAKING || l->st == L_SYNC)
			return;
		if ((sb = px_vm_sandbox(l->id)) == NULL) {
			job_fail(l, j, 404, "sandbox '%s' has no VM", l->id);
			continue;
		}
		vmm_sandbox_info(sb, &info);
		if (info.state == VMM_STOPPED || info.state == VMM_FAILED ||
		    info.state == VMM_CREATING) {
			if (l->nrunning == 0)
				disconnect(l);
			job_fail(l, j, 409, "sandbox '%s' is %s%s", l->id,
			    vmm_state_name(info.state), info.state ==
			    VMM_CREATING ? "" : ": start it first");
			continue;
		}
		/* a pause or suspend under way is joined by the wake;
		 * not by the command it waits for */
		if (info.state != VMM_RUNNING || (info.busy &&
		    (info.op == VMM_OP_PAUSE || info.op == VMM_OP_SUSPEND) &&
		    !(j->before_sleep && info.preparing))) {
			/* wake it as the proxy does; every job waiting now
			 * counts the wake from when it was asked for */
			struct job *k;
			int64_t t = now_ms();

			TAILQ_FOREACH(k, &l->queue, entry)
				if (k->wake_t0 == 0)
					k->wake_t0 = t;
			/* a resume from a snapshot is a new VMM: the
			 * connection goes with the old one (a paused one's
			 * survives a cont, and what runs on it) */
			if (l->io != NULL && l->nrunning == 0)
				disconnect(l);
			l->st = L_WAKING;
			px_vm_wake(l->id);	/* may call back at once */
			return;
		}
		if (l->io == NULL && !X.agentd_up) {
			/* the helper died and is being restarted (with
			 * backoff): wait for it, not forever */
			if (l->helper_t0 == 0)
				l->helper_t0 = now_ms();
			if (now_ms() - l->helper_t0 < SYNC_MS) {
				tick_in(l, 1000);	/* or agentd_start */
				return;
			}
			job_fail(l, j, 503, "the guest agent's reader (berthd: "
			    "agent) has not been running for %d s", SYNC_MS /
			    1000);
			continue;
		}
		l->helper_t0 = 0;
		if (l->io == NULL) {
			connect_agent(l, sb);
			return;
		}
		/* an agent of protocol 1 runs one job at a time, and has
		 * no detached processes */
		if (l->proto < 2 && (j->type == BA_LIST || j->type ==
		    BA_LOGS || j->type == BA_SIGNAL || j->type == BA_ATTACH ||
		    j->ring)) {
			job_fail(l, j, 409, "the guest agent of sandbox '%s' "
			    "is of an older protocol (its template was built "
			    "before detached processes): it runs commands, "
			    "not processes that outlive them", l->id);
			continue;
		}
		if (l->proto < 3 && (fs_op(j->type) || j->type == BA_ATTACH ||
		    (j->type == BA_FILE_GET && j->ranged))) {
			job_fail(l, j, 409, "the guest agent of sandbox '%s' "
			    "is of protocol %d (its template was built before "
			    "file listing, mkdir, remove, move, watch, ranged "
			    "reads and terminals to attach to): rebuild the "
			    "template for them", l->id, l->proto);
			continue;
		}
		if (l->nrunning >= (l->proto >= 2 ? X.max_procs : 1))
			return;
		run(l, j);
	}
	l->helper_t0 = 0;
}

/* ---- the helper (agentd.c) ---- */

static struct link *
link_conn(uint64_t id)
{
	struct link *l;

	for (l = X.links; l != NULL; l = l->next)
		if (l->conn == id && l->io != NULL)
			return l;
	return NULL;
}

/* The running job of channel chan (protocol 1: the one running). */
static struct job *
link_job(struct link *l, uint32_t chan)
{
	struct job *j;

	if (l->proto < 2)
		return TAILQ_FIRST(&l->running);
	TAILQ_FOREACH(j, &l->running, entry)
		if (j->chan == chan)
			return j;
	return NULL;
}

/* NUL-terminated in its field, printable */
static int
text_ok(const char *s, size_t size)
{
	size_t i;

	for (i = 0; i < size && s[i] != '\0'; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return 0;
	return i < size;
}

static void agentd_lost(const char *why);

/* The helper sent a malformed message: it is killed (and restarted),
 * nothing more it sent counts, the jobs it was reading fail now. */
static void
agentd_bad(struct px_proc *pr, const char *why)
{
	px_proc_bad(pr, why);
	X.agentd_bad = 1;
	agentd_lost("sent a malformed message");
}

/* The guest broke the protocol on l: its connection ends. */
static void
guest_bad(struct link *l, const char *why)
{
	log_warnx("sandbox %s: the guest agent %s: closing its connection",
	    l->id, why);
	disconnect(l);
	fail_all(l, 0, 502, "the guest agent %s", why);
	later(l);
}

/* Output the helper sent is taken here: it may send more. */
static void
ack_helper(struct link *l, uint32_t n)
{
	struct hm_agent_ack m;

	memset(&m, 0, sizeof(m));
	m.id = l->conn;
	m.bytes = n;
	px_proc_send(X.agentd, HM_AGENT_ACK, &m, sizeof(m), NULL, 0);
}

static void
agentd_output(struct link *l, const struct hm_agent_output *m,
    const unsigned char *p)
{
	struct job *j = link_job(l, m->chan);
	uint32_t chan;
	int acked;

	/* The helper's window: taken now, whoever it was for. Protocol
	 * 1 has no channel window: a slow client holds the helper's. */
	if ((acked = l->proto >= 2 || j == NULL || !j->rpaused))
		ack_helper(l, m->len);
	if (j == NULL)
		return;		/* a channel ended here meanwhile */
	if (l->proto >= 2) {
		if (m->len > j->out_window) {
			guest_bad(l, "sent output past its channel's window");
			return;
		}
		j->out_window -= m->len;
	}
	chan = j->chan;
	got_output(l, j, m->stream, p, m->len);
	/* the sink may have ended or cancelled it */
	if ((j = link_job(l, chan)) == NULL || j->chan != chan)
		return;
	if (l->proto < 2) {
		if (!acked)	/* acknowledged to the helper on resume */
			j->out_held += m->len;
	} else if (j->rpaused)	/* the sink paused: credit on resume */
		j->out_held += m->len;
	else
		credit(l, j, m->len);
}

static void
agentd_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct px_proc *pr = arg;
	struct link *l;
	struct job *j;
	uint64_t id;

	(void)ch;
	(void)fds;
	if (X.agentd_bad)
		return;		/* being killed */
	if (nfds != 0 || len < sizeof(id)) {
		agentd_bad(pr, nfds != 0 ? "descriptors" : "a short message");
		return;
	}
	memcpy(&id, p, sizeof(id));
	if (id == 0 || id > X.last_conn) {
		agentd_bad(pr, "a message about a connection it was never "
		    "given");
		return;
	}
	/* NULL: closed here meanwhile; its messages go nowhere */
	l = link_conn(id);
	switch (type) {
	case HM_AGENT_PONG: {
		struct hm_agent_pong m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (m.proto < 1 || m.proto > BA_PROTO)
			break;
		if (l == NULL)
			return;
		if (l->st != L_SYNC ||
		    memcmp(m.nonce, l->nonce, sizeof(m.nonce)) != 0) {
			agentd_bad(pr, "a pong out of turn");
			return;
		}
		l->st = L_READY;
		l->proto = m.proto;
		evtimer_del(l->tick_ev);
		if (l->pings > 1)
			log_info("sandbox %s: the guest agent answered ping %d "
			    "of this connection (%lld ms)", l->id, l->pings,
			    (long long)(now_ms() - l->sync_t0));
		if (l->proto < 2)
			log_info("sandbox %s: its guest agent speaks protocol "
			    "1 (a template built before concurrent commands): "
			    "its commands run one at a time", l->id);
		later(l);
		return;
	}
	case HM_AGENT_OUTPUT: {
		struct hm_agent_output m;

		if (len < sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (m.len != len - sizeof(m) || m.len > HM_AGENT_CHUNK ||
		    (m.stream != BA_STDOUT && m.stream != BA_STDERR))
			break;
		if (l == NULL)
			return;
		if (l->st == L_SYNC) {
			agentd_bad(pr, "output before the pong");
			return;
		}
		agentd_output(l, &m, (const unsigned char *)p + sizeof(m));
		return;
	}
	case HM_AGENT_EXIT: {
		struct hm_agent_exit m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if ((m.exited != 0 && m.exited != 1) || (m.timed_out != 0 &&
		    m.timed_out != 1) || (m.exited ? m.code < 0 ||
		    m.code > 255 || m.signal != 0 : m.signal < 1 ||
		    m.signal > 127 || m.code != 0))
			break;
		if (l == NULL)
			return;
		if (l->st == L_SYNC) {
			agentd_bad(pr, "an exit before the pong");
			return;
		}
		if ((j = link_job(l, m.chan)) != NULL)
			finished(l, j, &m);
		return;
	}
	case HM_AGENT_FAIL: {
		struct hm_agent_fail m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (!text_ok(m.msg, sizeof(m.msg)) || (m.status != 0 &&
		    m.status != 400 && m.status != 404 && m.status != 409 &&
		    m.status != 429))
			break;
		if (l == NULL)
			return;
		if (l->st == L_SYNC) {
			agentd_bad(pr, "a refusal before the pong");
			return;
		}
		if ((j = link_job(l, m.chan)) != NULL)
			refused(l, j, &m);
		return;
	}
	case HM_AGENT_INACK: {
		struct hm_agent_inack m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (l == NULL || (j = link_job(l, m.chan)) == NULL)
			return;
		if (m.bytes > j->in_flight) {
			guest_bad(l, "took more input than it was sent");
			return;
		}
		j->in_flight -= m.bytes;
		pump_input(l, j);
		if (j->streamed && j->sink.drained != NULL &&
		    evbuffer_get_length(j->inq) == 0)
			j->sink.drained(j->sink.arg);
		return;
	}
	case HM_AGENT_STARTED: {
		struct hm_agent_started m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (m.proc == 0 || m.pid <= 0)
			break;
		if (l == NULL || (j = link_job(l, m.chan)) == NULL)
			return;
		if (j->type != BA_EXEC) {
			guest_bad(l, "answered a started process to what "
			    "started none");
			return;
		}
		{
			struct hm_agent_exit e;

			j->proc = m.proc;
			j->pid = m.pid;
			memset(&e, 0, sizeof(e));
			e.exited = 1;
			finished(l, j, &e);	/* the channel has ended */
		}
		return;
	}
	case HM_AGENT_PROC: {
		struct hm_agent_proc m;
		struct px_proc_info *pi;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (!text_ok(m.cmd, sizeof(m.cmd)) || m.proc == 0 ||
		    m.pid <= 0 || m.state < HM_PROC_RUNNING ||
		    m.state > HM_PROC_SIGNALED || (m.keep != 0 && m.keep != 1))
			break;
		if (l == NULL || (j = link_job(l, m.chan)) == NULL)
			return;
		if (j->type != BA_LIST || j->nprocs >= 4 * BA_MAX_PROCS) {
			guest_bad(l, "listed processes it was not asked for");
			return;
		}
		pi = realloc(j->procs, (j->nprocs + 1) * sizeof(*pi));
		if (pi == NULL)
			return;
		j->procs = pi;
		pi += j->nprocs++;
		memset(pi, 0, sizeof(*pi));
		pi->proc = m.proc;
		pi->pid = m.pid;
		pi->state = m.state;
		pi->code = m.code;
		pi->keep = m.keep;
		pi->start_ms = m.start_ms;
		pi->total = m.total;
		snprintf(pi->cmd, sizeof(pi->cmd), "%s", m.cmd);
		return;
	}
	case HM_AGENT_RING: {
		struct hm_agent_ring m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (m.first > m.total || m.state < HM_PROC_RUNNING ||
		    m.state > HM_PROC_SIGNALED)
			break;
		if (l == NULL || (j = link_job(l, m.chan)) == NULL)
			return;
		if (j->type != BA_LOGS && j->type != BA_ATTACH) {
			guest_bad(l, "described a ring it was not asked for");
			return;
		}
		j->ring_known = 1;
		j->ring_first = m.first;
		j->ring_total = m.total;
		j->proc_state = m.state;
		j->proc_code = m.code;
		return;
	}
	case HM_AGENT_ENTRY: {
		struct hm_agent_entry m;
		struct px_dirent *de;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (m.type < HM_FT_FILE || m.type > HM_FT_OTHER ||
		    m.mode > 07777 || m.mtime_ms < 0 || m.namelen == 0 ||
		    m.namelen > 255 || memchr(m.name, '/', m.namelen) != NULL ||
		    memchr(m.name, '\0', m.namelen) != NULL ||
		    m.bytes > BA_MAX_PAYLOAD)
			break;
		if (l == NULL || (j = link_job(l, m.chan)) == NULL)
			return;
		if (j->type != BA_LS || j->nentries > j->max_entries ||
		    m.bytes > j->out_window) {
			guest_bad(l, j->type != BA_LS ? "listed a directory "
			    "it was not asked for" : j->nentries >
			    j->max_entries ? "listed more entries than asked" :
			    "sent entries past its channel's window");
			return;
		}
		j->out_window -= m.bytes;
		credit(l, j, m.bytes);
		if (j->nentries % 256 == 0) {
			de = realloc(j->entries, (j->nentries + 256) *
			    sizeof(*de));
			if (de == NULL) {
				job_fail(l, j, 503, "out of memory");
				send_frame(l, BA_KILL, m.chan, "9", 1);
				later(l);
				return;
			}
			j->entries = de;
		}
		de = &j->entries[j->nentries++];
		memset(de, 0, sizeof(*de));
		de->type = m.type;
		de->mode = m.mode;
		de->size = m.size;
		de->mtime_ms = m.mtime_ms;
		de->namelen = m.namelen;
		memcpy(de->name, m.name, m.namelen);
		return;
	}
	case HM_AGENT_EVENT: {
		struct hm_agent_event m;
		struct px_watch_event ev;
		const char *path = (const char *)p + sizeof(m);
		uint32_t chan;

		if (len < sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (m.event < 0 || m.event >= HM_EV_COUNT || (m.dir != 0 &&
		    m.dir != 1) || m.pathlen == 0 || m.pathlen >
		    BA_EVENT_PATH || len - sizeof(m) != m.pathlen ||
		    path[0] != '/' || memchr(path, '\0', m.pathlen) != NULL ||
		    m.bytes > BA_MAX_PAYLOAD)
			break;
		if (l == NULL || (j = link_job(l, m.chan)) == NULL)
			return;
		if (j->type != BA_WATCH || m.bytes > j->out_window) {
			guest_bad(l, j->type != BA_WATCH ? "sent a file event "
			    "it was not asked for" : "sent events past its "
			    "channel's window");
			return;
		}
		j->out_window -= m.bytes;
		memset(&ev, 0, sizeof(ev));
		ev.event = m.event;
		ev.dir = m.dir;
		ev.cookie = m.cookie;
		ev.path = path;
		ev.pathlen = m.pathlen;
		chan = j->chan;
		if (j->streamed && j->sink.event != NULL)
			j->sink.event(j->sink.arg, &ev);
		/* the sink may have cancelled it */
		if ((j = link_job(l, chan)) == NULL)
			return;
		if (j->rpaused)	/* a slow client: the queue overflows */
			j->out_held += m.bytes;
		else
			credit(l, j, m.bytes);
		return;
	}
	case HM_AGENT_ERROR: {
		struct hm_agent_error m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (!text_ok(m.msg, sizeof(m.msg)))
			break;
		if (l == NULL)
			return;
		disconnect(l);
		fail_all(l, 0, 502, "%s", m.msg);
		if (l->nrunning == 0 && (j = TAILQ_FIRST(&l->queue)) != NULL)
			job_fail(l, j, 502, "%s", m.msg);
		later(l);
		return;
	}
	case HM_AGENT_CLOSED:
		if (len != sizeof(struct hm_agent_id))
			break;
		if (l != NULL)
			closed(l);
		return;
	default:
		break;
	}
	agentd_bad(pr, "a malformed message");
}

/* A helper runs (the first, or a new one): what waited for it goes. */
static void
agentd_start(struct px_proc *pr, void *arg)
{
	struct link *l;

	(void)arg;
	X.agentd = pr;
	X.agentd_up = 1;
	X.agentd_bad = 0;
	for (l = X.links; l != NULL; l = l->next)
		if (l->st == L_IDLE && TAILQ_FIRST(&l->queue) != NULL)
			later(l);
}

/* The helper is gone: the connections it read are lost (their guests
 * see them close), and so is the output of the commands they ran. */
static void
agentd_lost(const char *why)
{
	struct link *l;
	struct job *j;
	enum link_state st;

	X.agentd_up = 0;
	for (l = X.links; l != NULL; l = l->next) {
		if (l->io == NULL)
			continue;
		st = l->st;
		disconnect(l);
		fail_all(l, 0, 502, "the guest agent's reader (berthd: agent) "
		    "%s while the command ran: its end is unknown; the next "
		    "command connects again", why);
		if (st == L_SYNC && (j = TAILQ_FIRST(&l->queue)) != NULL)
			job_fail(l, j, 502, "the guest agent's reader (berthd: "
			    "agent) %s before the guest agent answered", why);
		later(l);
	}
}

static void
agentd_exit(struct px_proc *pr, void *arg)
{
	(void)pr;
	(void)arg;
	agentd_lost("died");
}

static const struct px_proc_def agentd_def = {
	.name = "agent", .uid_slot = PX_UID_AGENT, .on_start = agentd_start,
	.on_msg = agentd_msg
};

void
px_exec_woken(const char *id, int ok, const char *reason)
{
	struct link *l;
	struct job *j;
	int64_t t = now_ms();

	for (l = X.links; l != NULL; l = l->next)
		if (strcmp(l->id, id) == 0)
			break;
	if (l == NULL || l->st != L_WAKING)
		return;
	l->st = l->io != NULL ? L_READY : L_IDLE;
	if (ok <= 0) {
		/* ok < 0: a cap refused the wake (nothing idle to suspend) */
		while ((j = TAILQ_FIRST(&l->queue)) != NULL)
			job_fail_code(l, j, 503, ok < 0 ? "capacity" : NULL,
			    "waking sandbox '%s' %s: %s", id, ok < 0 ?
			    "refused" : "failed", reason != NULL ? reason :
			    "unknown error");
		return;
	}
	TAILQ_FOREACH(j, &l->queue, entry)
		if (j->wake_t0 != 0 && j->wake_ms == 0)
			j->wake_ms = t - j->wake_t0;
	later(l);
}

static void
link_free(struct link *l)
{
	if (l->step_ev != NULL)
		event_free(l->step_ev);
	if (l->tick_ev != NULL)
		event_free(l->tick_ev);
	if (l->keep_ev != NULL)
		event_free(l->keep_ev);
	if (l->queue_ev != NULL)
		event_free(l->queue_ev);
	free(l);
}

static struct link *
link_get(const char *id)
{
	struct link *l;

	for (l = X.links; l != NULL; l = l->next)
		if (strcmp(l->id, id) == 0)
			return l;
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	snprintf(l->id, sizeof(l->id), "%s", id);
	TAILQ_INIT(&l->queue);
	TAILQ_INIT(&l->running);
	l->step_ev = evtimer_new(X.base, step_cb, l);
	l->tick_ev = evtimer_new(X.base, tick, l);
	l->keep_ev = evtimer_new(X.base, keep_poll, l);
	l->queue_ev = evtimer_new(X.base, queue_tick, l);
	if (l->step_ev == NULL || l->tick_ev == NULL || l->keep_ev == NULL ||
	    l->queue_ev == NULL) {
		link_free(l);
		return NULL;
	}
	l->next = X.links;
	X.links = l;
	return l;
}

/* The request's fields: tagged, NUL-terminated (agent_proto.h). */
static unsigned char *
exec_fields(const struct px_exec_req *req, size_t *lenp)
{
	struct evbuffer *b = evbuffer_new();
	unsigned char *f = NULL;
	size_t len;
	int i;

	if (b == NULL)
		return NULL;
	switch (req->op) {
	case PX_PROC_LIST:
		goto done;
	case PX_PROC_LOGS:
		evbuffer_add_printf(b, "i%u", (unsigned)req->proc);
		evbuffer_add(b, "", 1);
		evbuffer_add_printf(b, "o%llu", (unsigned long long)req->offset);
		evbuffer_add(b, "", 1);
		if (req->follow)
			evbuffer_add(b, "f", 2);
		goto done;
	case PX_PROC_SIGNAL:
		evbuffer_add_printf(b, "i%u", (unsigned)req->proc);
		evbuffer_add(b, "", 1);
		evbuffer_add_printf(b, "s%d", req->signo);
		evbuffer_add(b, "", 1);
		goto done;
	case PX_PROC_ATTACH:
		evbuffer_add_printf(b, "i%u", (unsigned)req->proc);
		evbuffer_add(b, "", 1);
		if (req->rows > 0 && req->cols > 0) {
			evbuffer_add_printf(b, "T%d %d", req->rows, req->cols);
			evbuffer_add(b, "", 1);
		}
		if (req->offset > 0) {
			evbuffer_add_printf(b, "o%llu",
			    (unsigned long long)req->offset);
			evbuffer_add(b, "", 1);
		}
		goto done;
	case PX_FILE_LIST:
	case PX_FILE_MKDIR:
	case PX_FILE_REMOVE:
	case PX_FILE_MOVE:
	case PX_FILE_WATCH:
		if (req->op != PX_FILE_WATCH) {
			evbuffer_add_printf(b, "t%llu",
			    (unsigned long long)req->timeout_ms);
			evbuffer_add(b, "", 1);
		}
		evbuffer_add_printf(b, "p%s", req->path);
		evbuffer_add(b, "", 1);
		if (req->op == PX_FILE_LIST) {
			/* one more than shown: a cut list is known */
			evbuffer_add_printf(b, "n%lu",
			    (unsigned long)req->max_entries + 1);
			evbuffer_add(b, "", 1);
		} else if (req->op == PX_FILE_MKDIR) {
			evbuffer_add_printf(b, "m%o", req->mode);
			evbuffer_add(b, "", 1);
		} else if (req->op == PX_FILE_MOVE) {
			evbuffer_add_printf(b, "d%s", req->to);
			evbuffer_add(b, "", 1);
		}
		if ((req->op == PX_FILE_REMOVE || req->op == PX_FILE_WATCH) &&
		    req->recursive)
			evbuffer_add(b, "r", 2);
		if (req->op == PX_FILE_MKDIR && req->parents)
			evbuffer_add(b, "r", 2);
		if (req->op == PX_FILE_MOVE && req->overwrite)
			evbuffer_add(b, "o", 2);
		goto done;
	default:
		break;
	}
	evbuffer_add_printf(b, "t%llu", (unsigned long long)req->timeout_ms);
	evbuffer_add(b, "", 1);
	if (req->op == PX_EXEC_RUN && req->ring > 0) {
		evbuffer_add_printf(b, "D%u", (unsigned)req->ring);
		evbuffer_add(b, "", 1);
		if (req->keep_awake)
			evbuffer_add(b, "k", 2);
	}
	if (req->cwd != NULL && *req->cwd != '\0') {
		evbuffer_add_printf(b, "c%s", req->cwd);
		evbuffer_add(b, "", 1);
	}
	if (req->user != NULL && *req->user != '\0') {
		evbuffer_add_printf(b, "u%s", req->user);
		evbuffer_add(b, "", 1);
	}
	if (req->tty) {
		evbuffer_add_printf(b, "T%d %d", req->rows, req->cols);
		evbuffer_add(b, "", 1);
	}
	if (req->op != PX_EXEC_RUN) {
		evbuffer_add_printf(b, "p%s", req->path);
		evbuffer_add(b, "", 1);
		evbuffer_add_printf(b, "m%o", req->mode);
		evbuffer_add(b, "", 1);
	}
	if (req->op == PX_FILE_GET && req->offset > 0) {
		evbuffer_add_printf(b, "o%llu", (unsigned long long)req->offset);
		evbuffer_add(b, "", 1);
	}
	if (req->op == PX_FILE_GET && req->length != UINT64_MAX) {
		evbuffer_add_printf(b, "n%llu", (unsigned long long)req->length);
		evbuffer_add(b, "", 1);
	}
	for (i = 0; i < req->argc; i++) {
		evbuffer_add_printf(b, "a%s", req->argv[i]);
		evbuffer_add(b, "", 1);
	}
	for (i = 0; i < req->envc; i++) {
		evbuffer_add_printf(b, "e%s", req->env[i]);
		evbuffer_add(b, "", 1);
	}
done:
	len = evbuffer_get_length(b);
	if (len <= BA_MAX_PAYLOAD - BA_CHAN && (f = malloc(len + 1)) != NULL) {
		evbuffer_remove(b, f, len);
		*lenp = len;
	}
	evbuffer_free(b);
	return f;
}

/* Queues one input record (INREC head, then the payload). */
static void
inq_add(struct evbuffer *q, int type, const void *p, size_t len)
{
	unsigned char h[INREC];

	ba_hdr_put(h, (uint32_t)len, type);
	evbuffer_add(q, h, sizeof(h));
	if (len > 0)
		evbuffer_add(q, p, len);
}

/* A new job for id, queued; NULL with *status and err. */
static struct job *
job_new(const char *id, const struct px_exec_req *req, size_t size,
    int *status, char *err, size_t errlen)
{
	struct link *l;
	struct job *j;

	if (px_vm_sandbox(id) == NULL) {
		*status = 409;
		snprintf(err, errlen, "sandbox '%s' is not VM-backed: there is "
		    "no guest to run a command in", id);
		return NULL;
	}
	if ((l = link_get(id)) == NULL || (j = calloc(1, size)) == NULL) {
		*status = 503;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	{
		struct job *k;
		int n = l->nrunning;

		TAILQ_FOREACH(k, &l->queue, entry)
			n++;
		if (n >= X.max_procs) {
			free(j);
			*status = 429;
			snprintf(err, errlen, "sandbox '%s' runs %d commands "
			    "and file transfers already (vm_max_procs %d): "
			    "wait for one to end", id, n, X.max_procs);
			return NULL;
		}
	}
	if (req->token_id != NULL && req->token_id[0] != '\0') {
		struct owner *o = owner_find(req->token_id);

		if (o != NULL && o->n >= X.max_per_token) {
			free(j);
			*status = 429;
			snprintf(err, errlen, "token %s runs %d commands and file "
			    "transfers already, in its sandboxes together "
			    "(exec_max_per_token %d): wait for one to end",
			    o->id, o->n, X.max_per_token);
			return NULL;
		}
		if (o == NULL && (o = calloc(1, sizeof(*o))) != NULL) {
			snprintf(o->id, sizeof(o->id), "%s", req->token_id);
			o->next = X.owners;
			X.owners = o;
		}
		if (o == NULL) {
			free(j);
			*status = 503;
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		o->n++;
		j->owner = o;
	}
	j->link = l;
	j->timeout_ms = req->timeout_ms;
	j->t0 = now_ms();
	switch (req->op) {
	case PX_FILE_PUT:
		j->type = BA_FILE_PUT;
		break;
	case PX_FILE_GET:
		j->type = BA_FILE_GET;
		break;
	case PX_PROC_LIST:
		j->type = BA_LIST;
		break;
	case PX_PROC_LOGS:
		j->type = BA_LOGS;
		break;
	case PX_PROC_SIGNAL:
		j->type = BA_SIGNAL;
		break;
	case PX_FILE_LIST:
		j->type = BA_LS;
		j->max_entries = req->max_entries;
		break;
	case PX_FILE_MKDIR:
		j->type = BA_MKDIR;
		break;
	case PX_FILE_REMOVE:
		j->type = BA_REMOVE;
		break;
	case PX_FILE_MOVE:
		j->type = BA_MOVE;
		break;
	case PX_FILE_WATCH:
		j->type = BA_WATCH;
		break;
	case PX_PROC_ATTACH:
		j->type = BA_ATTACH;
		break;
	default:
		j->type = BA_EXEC;
		break;
	}
	j->discard = req->discard;
	j->ranged = req->op == PX_FILE_GET && (req->offset > 0 ||
	    req->length != UINT64_MAX);
	j->ring = req->op == PX_EXEC_RUN ? req->ring : 0;
	j->keep_awake = j->ring != 0 && req->keep_awake;
	j->before_sleep = req->before_sleep;
	j->out = evbuffer_new();
	j->err = evbuffer_new();
	j->inq = evbuffer_new();
	j->fields = exec_fields(req, &j->fieldslen);
	if (j->out == NULL || j->err == NULL || j->inq == NULL ||
	    j->fields == NULL) {
		*status = j->fields == NULL ? 413 : 503;
		snprintf(err, errlen, "%s", j->fields == NULL ? "the command "
		    "and its environment are too large" : "out of memory");
		job_free(j);
		return NULL;
	}
	return j;
}

int
px_exec_start(const char *id, const struct px_exec_req *req,
    void (*done)(void *, const struct px_exec_result *), void *done_arg,
    int *status, char *err, size_t errlen, void *arg)
{
	struct job *j;
	size_t off, n;

	(void)arg;
	if ((j = job_new(id, req, sizeof(*j), status, err, errlen)) == NULL)
		return -1;
	j->done = done;
	j->done_arg = done_arg;
	/* a command's stdin, then its EOF (a detached one has none) */
	for (off = 0; j->type == BA_EXEC && req->ring == 0 &&
	    off < req->stdin_len; off += n) {
		n = req->stdin_len - off > BA_CHUNK ? BA_CHUNK :
		    req->stdin_len - off;
		inq_add(j->inq, BA_STDIN, req->stdin_data + off, n);
	}
	if (j->type == BA_EXEC && req->ring == 0)
		inq_add(j->inq, BA_STDIN, NULL, 0);	/* EOF */
	queue_add(j->link, j);
	return 0;
}

static void
keep_listed(void *arg, const struct px_exec_result *res)
{
	struct link *l = arg;

	(void)res;	/* finished() counted what it listed */
	l->keep_listing = 0;
	if (l->keep > 0 && !evtimer_pending(l->keep_ev, NULL)) {
		struct timeval tv = { KEEP_POLL_MS / 1000, 0 };

		event_add(l->keep_ev, &tv);
	}
}

/* Time to list the keep-awake processes again (keep_set). */
static void
keep_poll(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct vmm_sandbox *sb;
	struct vmm_info info;
	struct px_exec_req req;
	char err[256];
	int status;

	(void)fd;
	(void)what;
	if (l->keep == 0 || l->keep_listing || X.stopping)
		return;
	if ((sb = px_vm_sandbox(l->id)) == NULL) {
		keep_set(l, 0);
		return;
	}
	vmm_sandbox_info(sb, &info);
	memset(&req, 0, sizeof(req));
	req.op = PX_PROC_LIST;
	req.timeout_ms = 30000;
	if (info.state != VMM_RUNNING || info.busy ||
	    px_exec_start(l->id, &req, keep_listed, l, &status, err,
	    sizeof(err), NULL) != 0) {
		struct timeval tv = { KEEP_POLL_MS / 1000, 0 };

		event_add(l->keep_ev, &tv);	/* not now: later */
		return;
	}
	l->keep_listing = 1;
}

/* The list at berthd's start answered: finished() counted what runs;
 * no answer (an older agent, none at all): nothing is held. */
static void
keep_checked(void *arg, const struct px_exec_result *res)
{
	struct link *l = arg;

	if (res->status != 200)
		keep_set(l, 0);
	keep_listed(arg, res);
}

void
px_exec_keep_check(const char *id)
{
	struct vmm_sandbox *sb;
	struct vmm_info info;
	struct px_exec_req req;
	struct link *l;
	char err[256];
	int status;

	if ((sb = px_vm_sandbox(id)) == NULL || (l = link_get(id)) == NULL ||
	    l->keep_listing)
		return;
	/* running (re-adopted VMs are busy a moment: what is under way is
	 * not a pause, the list waits its turn in step()) */
	vmm_sandbox_info(sb, &info);
	if (info.state != VMM_RUNNING)
		return;
	memset(&req, 0, sizeof(req));
	req.op = PX_PROC_LIST;
	req.timeout_ms = 30000;
	if (px_exec_start(id, &req, keep_checked, l, &status, err,
	    sizeof(err), NULL) != 0)
		return;
	/* held until the list says (the idle policy may not pause it in
	 * between: the list waits for the agent's reader to start) */
	l->keep_listing = 1;
	keep_set(l, 1);
}

struct px_exec_stream *
px_exec_stream_start(const char *id, const struct px_exec_req *req,
    const struct px_exec_sink *sink, int *status, char *err, size_t errlen,
    void *arg)
{
	struct job *j;

	(void)arg;
	if ((j = job_new(id, req, sizeof(struct px_exec_stream), status, err,
	    errlen)) == NULL)
		return NULL;
	j->streamed = 1;
	j->sink = *sink;
	j->done = sink->done;
	j->done_arg = sink->arg;
	queue_add(j->link, j);
	return (struct px_exec_stream *)j;
}

size_t
px_exec_stream_input(struct px_exec_stream *st, int type, const void *p,
    size_t len)
{
	struct job *j = &st->j;

	inq_add(j->inq, type, p, len);
	if (j->chan != 0 && j->link->io != NULL) {
		pump_input(j->link, j);
		if (j->link->proto < 2)
			return evbuffer_get_length(px_agentio_output(
			    j->link->io));
	}
	return evbuffer_get_length(j->inq) + j->in_flight;
}

void
px_exec_stream_read(struct px_exec_stream *st, int on)
{
	struct job *j = &st->j;
	struct link *l = j->link;
	uint32_t n;

	if (j->chan == 0 || j->rpaused == !on)
		return;
	/* paused, the output it takes is not acknowledged to the guest,
	 * which stops this command at BA_WINDOW (protocol 1: the helper's
	 * window, the whole connection) */
	j->rpaused = !on;
	if (on) {
		n = j->out_held;
		j->out_held = 0;
		if (l->proto >= 2)
			credit(l, j, n);
		else if (n > 0)
			ack_helper(l, n);
	}
}

/* Ends j for a caller that is gone: killed in the guest, never done. */
static void
job_drop(struct job *j)
{
	struct link *l = j->link;

	if (j->chan != 0) {
		if (l->proto >= 2 && l->io != NULL)
			send_frame(l, BA_KILL, j->chan, "9", 1);
		else
			disconnect(l);	/* the agent kills what ran for nobody */
		unrun(l, j);
		if (l->proto < 2)
			fail_all(l, 0, 502, "the connection of the command's "
			    "client closed");
	} else
		TAILQ_REMOVE(&l->queue, j, entry);
	job_free(j);
	later(l);
}

void
px_exec_stream_cancel(struct px_exec_stream *st)
{
	job_drop(&st->j);
}

void
px_exec_abandon(void *done_arg, void *arg)
{
	struct link *l;
	struct job *j;

	(void)arg;
	for (l = X.links; l != NULL; l = l->next) {
		TAILQ_FOREACH(j, &l->running, entry)
			if (!j->streamed && j->done_arg == done_arg) {
				job_drop(j);
				return;
			}
		TAILQ_FOREACH(j, &l->queue, entry)
			if (!j->streamed && j->done_arg == done_arg) {
				job_drop(j);
				return;
			}
	}
}

void
px_exec_forget(const char *id)
{
	struct link *l, **pp;

	for (l = X.links; l != NULL; l = l->next)
		if (strcmp(l->id, id) == 0)
			break;
	if (l == NULL)
		return;
	/* out of the list first: a command a callback below asks for gets
	 * a link of its own, not this one, which goes (a deleted sandbox
	 * leaves nothing behind) */
	for (pp = &X.links; *pp != NULL; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	disconnect(l);
	l->keep = l->keep_held = 0;	/* its sandbox, and holds, are gone */
	fail_all(l, 1, 404, "sandbox '%s' was deleted", id);
	link_free(l);
}

void
px_exec_set_max_procs(int n)
{
	X.max_procs = n > 0 ? n : PX_EXEC_PROCS_DEFAULT;
}

void
px_exec_set_limits(int per_token, uint64_t queue_ms)
{
	X.max_per_token = per_token > 0 ? per_token :
	    PX_EXEC_PER_TOKEN_DEFAULT;
	X.queue_ms = queue_ms > 0 && queue_ms <= INT64_MAX / 2 ?
	    (int64_t)queue_ms : PX_EXEC_QUEUE_MS_DEFAULT;
}

void
px_exec_init(struct event_base *base)
{
	struct px_proc *pr;

	X.base = base;
	/* on_start (agentd_start) sets X.agentd and says it is up */
	if ((pr = px_proc_start(base, &agentd_def)) == NULL)
		log_warnx("cannot start the guest agent's reader: out of memory");
	else
		px_proc_on_exit(pr, agentd_exit);
}

void
px_exec_shutdown(void)
{
	struct link *l;

	X.stopping = 1;
	while ((l = X.links) != NULL) {
		X.links = l->next;
		disconnect(l);
		fail_all(l, 1, 503, "berthd is shutting down");
		link_free(l);
	}
}

int
px_exec_stopping(void)
{
	return X.stopping;
}
