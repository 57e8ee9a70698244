/*
 * exec.c — see exec.h. Per sandbox a link: the queue of commands asked
 * for, and at most one connection to its guest agent. A command goes
 * through
 *   wake     the sandbox is not running (or an operation is in flight):
 *            px_vm_wake, the proxy's own path, so concurrent execs and
 *            requests share one resume; px_exec_woken goes on
 *   connect  vmm_agent_connect (SO_PEERCRED-checked), the socket passed
 *            to the reader helper, then a ping with a fresh nonce:
 *            frames before its pong are an older connection's and are
 *            dropped (by the helper)
 *   run      the exec frame, stdin and its EOF; output gathered (bounded)
 *            until the exit frame; meanwhile a hold on the sandbox
 *            (vmm_activity_hold) keeps the idle policy from pausing it
 * A streamed job (px_exec_stream_start: exec ?stream=1, files) goes the
 * same way, but its input is queued as the client sends it (framed, in
 * inq until it runs, then on the connection) and its output goes to the
 * caller's sink as it comes; the caller holds its client back by what
 * px_exec_stream_input says is queued, and stops this side with
 * px_exec_stream_read(0): what the helper sends is then no longer
 * acknowledged, so it stops reading the guest once HM_AGENT_WINDOW
 * (128 KiB) is out (the agent's frames wait in the socket, the virtio
 * ring fills, the command blocks on its pipe). What was already on its
 * way still goes to the sink.
 * The connection stays open for the next command; a resume from a
 * snapshot (a new VMM) or a berthd restart closes it, and the next command
 * connects again.
 *
 * The root parent reads nothing a guest sent. The guest agent reader
 * ("berthd: agent", agentd.c: unprivileged, chrooted, proc.h) gets each
 * connected socket and parses every byte of the agent's frames (lengths,
 * types, the pong's nonce, the exit line), and sends typed fixed-layout
 * messages (helper.h, HM_AGENT_*) that this file checks: pong, output of
 * stream S, exit status or signal, refusal, protocol error, closed. They
 * name the connection, not the job: one job runs on a connection at a
 * time, and the messages come in the order of the guest's frames, as the
 * frames themselves did. The parent still writes its own frames (ping,
 * exec, stdin, resize, file bytes) straight on its copy of the socket:
 * they are bytes it made, so the hop through the helper would add a copy
 * and a wakeup to every stdin byte and move no parsing out of root; and
 * the write side's backpressure (px_exec_stream_input's queue, the
 * drained callback) stays the socket's own. A helper that dies or sends a
 * malformed message is killed and restarted (proc.c, with backoff); the
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
#include "../vmm/guest/agent_proto.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
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

struct link;

struct job {
	TAILQ_ENTRY(job) entry;
	struct link *link;
	void (*done)(void *, const struct px_exec_result *);
	void *done_arg;
	/* streamed (exec_stream): output goes to the sink as it comes,
	 * input is queued in inq until the command runs */
	int streamed;
	struct px_exec_sink sink;
	struct evbuffer *inq;
	unsigned char *frame;		/* the exec request, whole frame */
	size_t framelen;
	unsigned char *in;		/* stdin */
	size_t inlen;
	uint64_t timeout_ms;
	int64_t t0, wake_t0, wake_ms, deadline;
	struct evbuffer *out, *err;
	int truncated;
	int tries;
};

/* The handle control.c holds is the job. */
struct px_exec_stream {
	struct job j;
};

enum link_state { L_IDLE, L_WAKING, L_SYNC, L_READY, L_BUSY };

struct link {
	char id[PX_SANDBOX_ID_MAX + 1];
	TAILQ_HEAD(, job) jobs;		/* the first one is the current */
	enum link_state st;
	struct bufferevent *bev;	/* toward the agent: write only */
	uint64_t conn;			/* its id with the helper */
	uint32_t unacked;		/* output from the helper not yet
					 * acknowledged (HM_AGENT_WINDOW) */
	int64_t helper_t0;		/* since when a job waits for it */
	unsigned char nonce[HM_AGENT_NONCE];
	int64_t sync_t0;		/* when the ping was first sent */
	int pings;			/* sent on this connection */
	struct event *step_ev;		/* a deferred step */
	struct event *tick_ev;		/* sync deadline, command deadline */
	int held;			/* vmm_activity_hold taken */
	int rpaused;			/* exec_read(0): the client is slow */
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
} X;

static void step(struct link *);

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

static void
job_free(struct job *j)
{
	free(j->frame);
	free(j->in);
	if (j->inq != NULL)
		evbuffer_free(j->inq);
	if (j->out != NULL)
		evbuffer_free(j->out);
	if (j->err != NULL)
		evbuffer_free(j->err);
	free(j);
}

/* Output the helper sent is taken: it may send more (HM_AGENT_WINDOW).
 * Not while a streamed job's client is slow (px_exec_stream_read(0)):
 * the helper then stops reading the guest once the window is full. */
static void
ack(struct link *l)
{
	struct hm_agent_ack m;

	if (l->unacked == 0 || l->rpaused || l->bev == NULL)
		return;
	memset(&m, 0, sizeof(m));
	m.id = l->conn;
	m.bytes = l->unacked;
	l->unacked = 0;
	px_proc_send(X.agentd, HM_AGENT_ACK, &m, sizeof(m), NULL, 0);
}

/* Ends the current (first) job with res and forgets it. */
static void
job_end(struct link *l, struct px_exec_result *res)
{
	struct job *j = TAILQ_FIRST(&l->jobs);

	if (j == NULL)
		return;
	TAILQ_REMOVE(&l->jobs, j, entry);
	if (l->rpaused) {
		/* its client was slow; the next job's is not */
		l->rpaused = 0;
		ack(l);
	}
	res->wake_ms = j->wake_ms;
	res->duration_ms = now_ms() - j->t0;
	res->truncated = j->truncated;
	j->done(j->done_arg, res);
	job_free(j);
}

static void __attribute__((format(printf, 3, 4)))
job_fail(struct link *l, int status, const char *fmt, ...)
{
	struct px_exec_result res;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status >= 500)
		log_warnx("sandbox %s: exec: %s", l->id, msg);
	memset(&res, 0, sizeof(res));
	res.status = status;
	res.message = msg;
	job_end(l, &res);
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

static void
disconnect(struct link *l)
{
	hold(l, 0);
	if (l->bev != NULL) {
		struct hm_agent_id m = { l->conn };

		/* the guest sees its end close now, whatever the helper
		 * (its copy of the socket) does; the helper forgets it */
		shutdown(bufferevent_getfd(l->bev), SHUT_RDWR);
		bufferevent_free(l->bev);
		px_proc_send(X.agentd, HM_AGENT_CLOSE, &m, sizeof(m), NULL, 0);
	}
	l->bev = NULL;
	l->conn = 0;
	l->unacked = 0;
	evtimer_del(l->tick_ev);
	l->st = L_IDLE;
	l->rpaused = 0;
}

static void
frame_add(struct evbuffer *out, int type, const void *p, size_t len)
{
	unsigned char h[BA_HDR];

	ba_hdr_put(h, (uint32_t)len, type);
	evbuffer_add(out, h, sizeof(h));
	if (len > 0)
		evbuffer_add(out, p, len);
}

static void
run(struct link *l, struct job *j)
{
	struct evbuffer *out = bufferevent_get_output(l->bev);
	size_t off, n;

	evbuffer_add(out, j->frame, j->framelen);
	if (j->streamed) {
		/* what came before it ran (framed by exec_input), then the
		 * rest as it comes */
		evbuffer_add_buffer(out, j->inq);
	} else {
		for (off = 0; off < j->inlen; off += n) {
			n = j->inlen - off > BA_CHUNK ? BA_CHUNK : j->inlen - off;
			frame_add(out, BA_STDIN, j->in + off, n);
		}
		frame_add(out, BA_STDIN, NULL, 0);	/* EOF */
	}
	j->deadline = now_ms() + (int64_t)j->timeout_ms + GRACE_MS;
	l->st = L_BUSY;
	hold(l, 1);
	tick_in(l, 1000);
	if (j->streamed && j->sink.start != NULL)
		j->sink.start(j->sink.arg, j->wake_ms);
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
	l->st = L_READY;
	hold(l, 0);
	evtimer_del(l->tick_ev);
	job_end(l, &res);
	later(l);
}

/* The agent refused the command. */
static void
refused(struct link *l, const struct hm_agent_fail *m)
{
	l->st = L_READY;
	hold(l, 0);
	evtimer_del(l->tick_ev);
	if (m->status != 0)
		job_fail(l, m->status, "%s", m->msg);
	else
		job_fail(l, 502, "the guest agent refused: %s", m->msg);
	later(l);
}

/* Bytes of the command's stdout or stderr. */
static void
got_output(struct link *l, int stream, const unsigned char *p, size_t len)
{
	struct job *j = TAILQ_FIRST(&l->jobs);

	l->unacked += (uint32_t)len;
	if (l->st != L_BUSY || j == NULL) {
		ack(l);		/* an older command's: nobody's */
		return;
	}
	px_vm_activity(l->id);
	if (j->streamed) {
		/* what came after exec_read(0) goes on too, at most the
		 * window: it is not acknowledged until exec_read(1) */
		j->sink.output(j->sink.arg, stream, p, len);
		if (TAILQ_FIRST(&l->jobs) == j && l->conn != 0)
			ack(l);
		return;
	}
	output(j, stream == BA_STDOUT ? j->out : j->err, p, len);
	ack(l);
}

/* The guest's end closed, or the write to it failed. */
static void
closed(struct link *l)
{
	enum link_state st = l->st;
	struct job *j = TAILQ_FIRST(&l->jobs);

	disconnect(l);
	if (st == L_BUSY && j != NULL)
		job_fail(l, 502, "the guest agent's connection closed while "
		    "the command ran (the VM stopped or was restored?)");
	else if (st == L_SYNC && j != NULL && ++j->tries >= SYNC_TRIES)
		job_fail(l, 502, "the guest agent's connection closed before "
		    "it answered");
	later(l);
}

/* What was queued toward the agent is written: a streamed job's client
 * may send more. */
static void
on_write(struct bufferevent *bev, void *arg)
{
	struct link *l = arg;
	struct job *j = TAILQ_FIRST(&l->jobs);

	(void)bev;
	if (l->st == L_BUSY && j != NULL && j->streamed &&
	    j->sink.drained != NULL)
		j->sink.drained(j->sink.arg);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	closed(arg);
}

static void
tick(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct job *j = TAILQ_FIRST(&l->jobs);

	(void)fd;
	(void)what;
	if (l->st == L_IDLE) {		/* waiting for the helper */
		step(l);
		return;
	}
	if (l->st == L_SYNC && now_ms() - l->sync_t0 < SYNC_MS) {
		frame_add(bufferevent_get_output(l->bev), BA_PING, l->nonce,
		    sizeof(l->nonce));
		l->pings++;
		tick_in(l, REPING_MS);
		return;
	}
	if (l->st == L_SYNC) {
		disconnect(l);
		if (j != NULL)
			job_fail(l, 504, "the guest agent of sandbox '%s' did "
			    "not answer within %d s (is the guest up? see "
			    "netctl sandbox console %s)", l->id, SYNC_MS / 1000,
			    l->id);
		later(l);
		return;
	}
	if (l->st != L_BUSY || j == NULL)
		return;
	if (now_ms() > j->deadline) {
		disconnect(l);	/* the agent kills what ran for us */
		job_fail(l, 504, "the guest agent did not end the command "
		    "%d s after its timeout", GRACE_MS / 1000);
		later(l);
		return;
	}
	tick_in(l, 1000);
}

/* Connects to the agent, hands the helper the socket to read, pings. */
static void
connect_agent(struct link *l, struct vmm_sandbox *sb)
{
	static uint64_t serial;
	struct hm_agent_conn m;
	char err[VMM_ERRLEN];
	uint64_t n;
	int fd, i;

	if ((fd = vmm_agent_connect(sb, err, sizeof(err))) < 0) {
		job_fail(l, fd == -ENOTSUP ? 409 : 502, "%s", err);
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
	/* the helper reads the socket from now on (a copy of the
	 * descriptor: the same socket); this process only writes */
	if (px_proc_send(X.agentd, HM_AGENT_CONN, &m, sizeof(m), &fd, 1) != 0) {
		close(fd);
		job_fail(l, 503, "cannot pass the guest agent's connection to "
		    "its reader (berthd: agent)");
		later(l);
		return;
	}
	l->bev = bufferevent_socket_new(X.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (l->bev == NULL) {
		struct hm_agent_id c = { m.id };

		shutdown(fd, SHUT_RDWR);
		close(fd);
		px_proc_send(X.agentd, HM_AGENT_CLOSE, &c, sizeof(c), NULL, 0);
		job_fail(l, 503, "out of memory");
		later(l);
		return;
	}
	l->conn = m.id;
	l->unacked = 0;
	bufferevent_setcb(l->bev, NULL, on_write, on_event, l);
	bufferevent_disable(l->bev, EV_READ);
	bufferevent_enable(l->bev, EV_WRITE);
	frame_add(bufferevent_get_output(l->bev), BA_PING, l->nonce,
	    sizeof(l->nonce));
	l->st = L_SYNC;
	l->sync_t0 = now_ms();
	l->pings = 1;
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

	while ((j = TAILQ_FIRST(&l->jobs)) != NULL) {
		if (l->st == L_WAKING || l->st == L_SYNC || l->st == L_BUSY)
			return;
		if ((sb = px_vm_sandbox(l->id)) == NULL) {
			job_fail(l, 404, "sandbox '%s' has no VM", l->id);
			continue;
		}
		vmm_sandbox_info(sb, &info);
		if (info.state == VMM_STOPPED || info.state == VMM_FAILED ||
		    info.state == VMM_CREATING) {
			disconnect(l);
			job_fail(l, 409, "sandbox '%s' is %s%s", l->id,
			    vmm_state_name(info.state), info.state ==
			    VMM_CREATING ? "" : ": start it first");
			continue;
		}
		/* a pause or suspend under way is joined by the wake */
		if (info.state != VMM_RUNNING || (info.busy &&
		    (info.op == VMM_OP_PAUSE || info.op == VMM_OP_SUSPEND))) {
			/* wake it as the proxy does; every job waiting now
			 * counts the wake from when it was asked for */
			struct job *k;
			int64_t t = now_ms();

			TAILQ_FOREACH(k, &l->jobs, entry)
				if (k->wake_t0 == 0)
					k->wake_t0 = t;
			if (l->bev != NULL)
				disconnect(l);
			l->st = L_WAKING;
			px_vm_wake(l->id);	/* may call back at once */
			return;
		}
		if (l->bev == NULL && !X.agentd_up) {
			/* the helper died and is being restarted (with
			 * backoff): wait for it, not forever */
			if (l->helper_t0 == 0)
				l->helper_t0 = now_ms();
			if (now_ms() - l->helper_t0 < SYNC_MS) {
				tick_in(l, 1000);	/* or agentd_start */
				return;
			}
			job_fail(l, 503, "the guest agent's reader (berthd: "
			    "agent) has not been running for %d s", SYNC_MS /
			    1000);
			continue;
		}
		l->helper_t0 = 0;
		if (l->bev == NULL) {
			connect_agent(l, sb);
			return;
		}
		run(l, j);
		return;
	}
	l->helper_t0 = 0;
}

/* ---- the helper (agentd.c) ---- */

static struct link *
link_conn(uint64_t id)
{
	struct link *l;

	for (l = X.links; l != NULL; l = l->next)
		if (l->conn == id && l->bev != NULL)
			return l;
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

static void
agentd_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct px_proc *pr = arg;
	struct link *l;
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
		if (l == NULL)
			return;
		if (l->st != L_SYNC ||
		    memcmp(m.nonce, l->nonce, sizeof(m.nonce)) != 0) {
			agentd_bad(pr, "a pong out of turn");
			return;
		}
		l->st = L_READY;
		evtimer_del(l->tick_ev);
		if (l->pings > 1)
			log_info("sandbox %s: the guest agent answered ping %d "
			    "of this connection (%lld ms)", l->id, l->pings,
			    (long long)(now_ms() - l->sync_t0));
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
		if (l->st == L_SYNC || l->unacked + m.len > HM_AGENT_WINDOW) {
			agentd_bad(pr, l->st == L_SYNC ? "output before the "
			    "pong" : "output past its window");
			return;
		}
		got_output(l, m.stream, (const unsigned char *)p + sizeof(m),
		    m.len);
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
		if (l->st == L_BUSY && TAILQ_FIRST(&l->jobs) != NULL)
			finished(l, TAILQ_FIRST(&l->jobs), &m);
		return;
	}
	case HM_AGENT_FAIL: {
		struct hm_agent_fail m;

		if (len != sizeof(m))
			break;
		memcpy(&m, p, sizeof(m));
		if (!text_ok(m.msg, sizeof(m.msg)) || (m.status != 0 &&
		    m.status != 400 && m.status != 404 && m.status != 409))
			break;
		if (l == NULL)
			return;
		if (l->st == L_SYNC) {
			agentd_bad(pr, "a refusal before the pong");
			return;
		}
		if (l->st == L_BUSY && TAILQ_FIRST(&l->jobs) != NULL)
			refused(l, &m);
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
		if (TAILQ_FIRST(&l->jobs) != NULL)
			job_fail(l, 502, "%s", m.msg);
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
		if (l->st == L_IDLE && TAILQ_FIRST(&l->jobs) != NULL)
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
		if (l->bev == NULL)
			continue;
		st = l->st;
		j = TAILQ_FIRST(&l->jobs);
		disconnect(l);
		if (j != NULL && (st == L_BUSY || st == L_SYNC))
			job_fail(l, 502, "the guest agent's reader (berthd: "
			    "agent) %s %s; the next command connects again",
			    why, st == L_BUSY ? "while the command ran: its "
			    "end is unknown" : "before the guest agent "
			    "answered");
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
	"agent", agentd_start, agentd_msg, NULL
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
	l->st = L_IDLE;
	if (!ok) {
		while (TAILQ_FIRST(&l->jobs) != NULL)
			job_fail(l, 503, "waking sandbox '%s' failed: %s", id,
			    reason != NULL ? reason : "unknown error");
		return;
	}
	TAILQ_FOREACH(j, &l->jobs, entry)
		if (j->wake_t0 != 0 && j->wake_ms == 0)
			j->wake_ms = t - j->wake_t0;
	later(l);
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
	TAILQ_INIT(&l->jobs);
	l->step_ev = evtimer_new(X.base, step_cb, l);
	l->tick_ev = evtimer_new(X.base, tick, l);
	if (l->step_ev == NULL || l->tick_ev == NULL) {
		if (l->step_ev != NULL)
			event_free(l->step_ev);
		if (l->tick_ev != NULL)
			event_free(l->tick_ev);
		free(l);
		return NULL;
	}
	l->next = X.links;
	X.links = l;
	return l;
}

/* The exec frame: tagged, NUL-terminated fields (agent_proto.h). */
static unsigned char *
exec_frame(const struct px_exec_req *req, size_t *lenp)
{
	struct evbuffer *b = evbuffer_new();
	unsigned char h[BA_HDR], *f = NULL;
	size_t len;
	int i;

	if (b == NULL)
		return NULL;
	evbuffer_add_printf(b, "t%llu", (unsigned long long)req->timeout_ms);
	evbuffer_add(b, "", 1);
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
	for (i = 0; i < req->argc; i++) {
		evbuffer_add_printf(b, "a%s", req->argv[i]);
		evbuffer_add(b, "", 1);
	}
	for (i = 0; i < req->envc; i++) {
		evbuffer_add_printf(b, "e%s", req->env[i]);
		evbuffer_add(b, "", 1);
	}
	len = evbuffer_get_length(b);
	if (len <= BA_MAX_PAYLOAD && (f = malloc(BA_HDR + len)) != NULL) {
		ba_hdr_put(h, (uint32_t)len, req->op == PX_FILE_PUT ?
		    BA_FILE_PUT : req->op == PX_FILE_GET ? BA_FILE_GET :
		    BA_EXEC);
		memcpy(f, h, BA_HDR);
		evbuffer_remove(b, f + BA_HDR, len);
		*lenp = BA_HDR + len;
	}
	evbuffer_free(b);
	return f;
}

int
px_exec_start(const char *id, const struct px_exec_req *req,
    void (*done)(void *, const struct px_exec_result *), void *done_arg,
    int *status, char *err, size_t errlen, void *arg)
{
	struct link *l;
	struct job *j;

	(void)arg;
	if (px_vm_sandbox(id) == NULL) {
		*status = 409;
		snprintf(err, errlen, "sandbox '%s' is not VM-backed: there is "
		    "no guest to run a command in", id);
		return -1;
	}
	if ((l = link_get(id)) == NULL || (j = calloc(1, sizeof(*j))) == NULL) {
		*status = 503;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	j->link = l;
	j->done = done;
	j->done_arg = done_arg;
	j->timeout_ms = req->timeout_ms;
	j->t0 = now_ms();
	j->out = evbuffer_new();
	j->err = evbuffer_new();
	j->frame = exec_frame(req, &j->framelen);
	if (req->stdin_len > 0 && (j->in = malloc(req->stdin_len)) != NULL) {
		memcpy(j->in, req->stdin_data, req->stdin_len);
		j->inlen = req->stdin_len;
	}
	if (j->out == NULL || j->err == NULL || j->frame == NULL ||
	    (req->stdin_len > 0 && j->in == NULL)) {
		*status = j->frame == NULL ? 413 : 503;
		snprintf(err, errlen, "%s", j->frame == NULL ? "the command "
		    "and its environment are too large" : "out of memory");
		job_free(j);
		return -1;
	}
	TAILQ_INSERT_TAIL(&l->jobs, j, entry);
	later(l);
	return 0;
}

struct px_exec_stream *
px_exec_stream_start(const char *id, const struct px_exec_req *req,
    const struct px_exec_sink *sink, int *status, char *err, size_t errlen,
    void *arg)
{
	struct px_exec_stream *st;
	struct link *l;
	struct job *j;

	(void)arg;
	if (px_vm_sandbox(id) == NULL) {
		*status = 409;
		snprintf(err, errlen, "sandbox '%s' is not VM-backed: there is "
		    "no guest to run a command in", id);
		return NULL;
	}
	if ((l = link_get(id)) == NULL ||
	    (st = calloc(1, sizeof(*st))) == NULL) {
		*status = 503;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	j = &st->j;
	j->link = l;
	j->streamed = 1;
	j->sink = *sink;
	j->done = sink->done;
	j->done_arg = sink->arg;
	j->timeout_ms = req->timeout_ms;
	j->t0 = now_ms();
	j->out = evbuffer_new();
	j->err = evbuffer_new();
	j->inq = evbuffer_new();
	j->frame = exec_frame(req, &j->framelen);
	if (j->out == NULL || j->err == NULL || j->inq == NULL ||
	    j->frame == NULL) {
		*status = j->frame == NULL ? 413 : 503;
		snprintf(err, errlen, "%s", j->frame == NULL ? "the command "
		    "and its environment are too large" : "out of memory");
		job_free(j);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&l->jobs, j, entry);
	later(l);
	return st;
}

/* The job runs now on its link's connection. */
static int
running(const struct job *j)
{
	return j->link->st == L_BUSY && TAILQ_FIRST(&j->link->jobs) == j &&
	    j->link->bev != NULL;
}

size_t
px_exec_stream_input(struct px_exec_stream *st, int type, const void *p,
    size_t len)
{
	struct job *j = &st->j;
	struct evbuffer *out;

	if (running(j)) {
		out = bufferevent_get_output(j->link->bev);
		frame_add(out, type, p, len);
		return evbuffer_get_length(out);
	}
	frame_add(j->inq, type, p, len);
	return evbuffer_get_length(j->inq);
}

void
px_exec_stream_read(struct px_exec_stream *st, int on)
{
	struct job *j = &st->j;
	struct link *l = j->link;

	if (!running(j) || l->rpaused == !on)
		return;
	/* paused, what the helper sends is not acknowledged: it stops
	 * reading the guest at HM_AGENT_WINDOW */
	l->rpaused = !on;
	if (on)
		ack(l);
}

void
px_exec_stream_cancel(struct px_exec_stream *st)
{
	struct job *j = &st->j;
	struct link *l = j->link;

	if (running(j))
		disconnect(l);	/* the agent kills what ran for nobody */
	TAILQ_REMOVE(&l->jobs, j, entry);
	job_free(j);
	later(l);
}

void
px_exec_forget(const char *id)
{
	struct link *l;

	for (l = X.links; l != NULL; l = l->next)
		if (strcmp(l->id, id) == 0)
			break;
	if (l == NULL)
		return;
	disconnect(l);
	while (TAILQ_FIRST(&l->jobs) != NULL)
		job_fail(l, 404, "sandbox '%s' was deleted", id);
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
		while (TAILQ_FIRST(&l->jobs) != NULL)
			job_fail(l, 503, "berthd is shutting down");
		event_free(l->step_ev);
		event_free(l->tick_ev);
		free(l);
	}
}

int
px_exec_stopping(void)
{
	return X.stopping;
}
