/*
 * test_exec.c — unit tests for proxy/sandbox/exec.c (commands in a
 * guest) and agentio.c (the parent's end of a guest agent connection),
 * without a VM: libvmm, vm.c and the helper process are stand-ins here.
 * A sandbox's "agent socket" is a socketpair whose other end this test
 * reads and writes as the guest agent; the helper's channel is replaced
 * by this test, which takes the descriptor exec.c passes the helper and
 * answers with the helper's typed messages.
 * Checked:
 *   - the helper gets a pipe's read end, never the agent socket: it is a
 *     FIFO opened read-only, a write on it fails (EBADF); a process
 *     holding only it that tries every way to write (write, send, a
 *     write end reopened through /proc) gets nothing to the guest, which
 *     sees only the parent's pings; what the guest sends reaches the
 *     pipe byte for byte; a command runs and ends through it
 *   - agentio's backpressure: a guest writing into a pipe nobody reads
 *     stops (the parent holds at most PX_AGENTIO_HELD and some), then
 *     all comes through in order once read, and the guest's close after
 *     it; a write to a guest gone is reported
 *   - bounds: vm_max_procs per sandbox and exec_max_per_token per token
 *     (across sandboxes, queued and running) answer 429 naming them; the
 *     unix socket's jobs count per sandbox only; a dropped job gives its
 *     token's slot back
 *   - exec_queue_timeout: a job that waits longer to start fails with
 *     503 saying what it waited for; a job that runs is not failed by it
 *   - a buffered exec abandoned (its client gone) is dropped from the
 *     queue, or killed in the guest ('K' 9) while it runs, never done;
 *     10000 of them leave no job, token count or memory behind
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "agentio.h"
#include "control.h"
#include "exec.h"
#include "helper.h"
#include "proc.h"
#include "tap.h"
#include "vm.h"
#include "vmm.h"
#include "agent_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

static struct event_base *base;

/* ---- the stand-ins: libvmm's sandboxes, vm.c, proc.c ---- */

struct fsb {
	const char *id;
	enum vmm_state state;
	int guest;		/* the guest agent's end, -1 */
	int wakes;
};
static struct fsb sbs[] = {
	{ "sb-run", VMM_RUNNING, -1, 0 },
	{ "sb-p1", VMM_PAUSED, -1, 0 },
	{ "sb-p2", VMM_PAUSED, -1, 0 },
	{ "sb-p3", VMM_PAUSED, -1, 0 },
};
#define NSB (sizeof(sbs) / sizeof(sbs[0]))

static struct fsb *
fsb(const char *id)
{
	size_t i;

	for (i = 0; i < NSB; i++)
		if (strcmp(sbs[i].id, id) == 0)
			return &sbs[i];
	return NULL;
}

struct vmm_sandbox *
px_vm_sandbox(const char *id)
{
	return (struct vmm_sandbox *)fsb(id);
}

void
px_vm_wake(const char *id)
{
	fsb(id)->wakes++;	/* never answered here: the wake goes on */
}

void
px_vm_activity(const char *id)
{
	(void)id;
}

void
vmm_activity_hold(struct vmm_sandbox *sb, int on)
{
	(void)sb;
	(void)on;
}

void
vmm_sandbox_info(const struct vmm_sandbox *sb, struct vmm_info *out)
{
	memset(out, 0, sizeof(*out));
	out->state = ((const struct fsb *)sb)->state;
}

const char *
vmm_state_name(enum vmm_state s)
{
	return s == VMM_RUNNING ? "running" : "paused";
}

int
vmm_agent_connect(struct vmm_sandbox *sb, char *err, size_t errlen)
{
	struct fsb *f = (struct fsb *)sb;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	if (f->guest >= 0)
		close(f->guest);
	f->guest = sv[0];
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	return sv[1];
}

/* The helper: what exec.c sent it. */
static const struct px_proc_def *adef;
static char apr_mem;
#define APR ((struct px_proc *)&apr_mem)
static uint64_t conn_id;
static unsigned char conn_nonce[HM_AGENT_NONCE];
static int conn_fd = -1;	/* the descriptor the helper got */
static int nconns, ncloses, nacks, nbad;

struct px_proc *
px_proc_start(struct event_base *b, const struct px_proc_def *def)
{
	(void)b;
	adef = def;
	return APR;
}

void
px_proc_on_exit(struct px_proc *pr, void (*cb)(struct px_proc *, void *))
{
	(void)pr;
	(void)cb;
}

void
px_proc_bad(struct px_proc *pr, const char *why)
{
	(void)pr;
	diag("exec.c found the helper bad: %s", why);
	nbad++;
}

int
px_proc_send(struct px_proc *pr, uint32_t type, const void *p, size_t len,
    const int *fds, int nfds)
{
	(void)pr;
	if (type == HM_AGENT_CONN && len == sizeof(struct hm_agent_conn) &&
	    nfds == 1) {
		struct hm_agent_conn m;

		memcpy(&m, p, sizeof(m));
		conn_id = m.id;
		memcpy(conn_nonce, m.nonce, sizeof(conn_nonce));
		if (conn_fd >= 0)
			close(conn_fd);
		conn_fd = dup(fds[0]);	/* as the channel passes it */
		nconns++;
	} else if (type == HM_AGENT_CLOSE)
		ncloses++;
	else if (type == HM_AGENT_ACK)
		nacks++;
	return 0;
}

/* The helper says something to exec.c. */
static void
helper_says(uint32_t type, const void *p, size_t len)
{
	adef->on_msg(NULL, type, p, len, NULL, 0, APR);
}

/* ---- helpers of the test ---- */

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the loop until cond() holds, at most ms; cond()'s last value. */
static int
run_until(int (*cond)(void), int ms)
{
	struct timeval tv = { 0, 10000 };
	int64_t end = now_ms() + ms;

	while (!cond() && now_ms() < end) {
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return cond();
}

/* Runs what is ready now (deferred steps, writes), a few rounds. */
static void
spin(void)
{
	int i;

	for (i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

struct res {
	int called, status;
	char msg[512];
	char out[64];
};

static void
res_done(void *arg, const struct px_exec_result *r)
{
	struct res *x = arg;

	x->called++;
	x->status = r->status;
	snprintf(x->msg, sizeof(x->msg), "%s", r->message ? r->message : "");
	if (r->status == 200)
		snprintf(x->out, sizeof(x->out), "%.*s", (int)r->outlen,
		    (const char *)r->out);
}

static char *argv_echo[] = { "echo", NULL };

static int
start(const char *id, const char *token, struct res *x, int *status,
    char *err, size_t errlen)
{
	struct px_exec_req req;

	memset(&req, 0, sizeof(req));
	req.op = PX_EXEC_RUN;
	req.argv = argv_echo;
	req.argc = 1;
	req.timeout_ms = 60000;
	req.token_id = token;
	memset(x, 0, sizeof(*x));
	return px_exec_start(id, &req, res_done, x, status, err, errlen, NULL);
}

/* The guest's side: frames read from its end of the socket. */
static unsigned char gbuf[1 << 20];
static size_t glen, goff;	/* read; parsed */

/* Forgets the frames parsed (a frame cut short stays). */
static void
guest_compact(void)
{
	memmove(gbuf, gbuf + goff, glen - goff);
	glen -= goff;
	goff = 0;
}

static void
guest_read(int fd)
{
	ssize_t n;

	while (glen < sizeof(gbuf) &&
	    (n = read(fd, gbuf + glen, sizeof(gbuf) - glen)) > 0)
		glen += (size_t)n;
}

/* The next whole frame the guest got: its type, chan (frames after
 * the pong carry one), payload; 0 when none is whole yet. */
static int
guest_frame(uint32_t *chan, const unsigned char **pay, size_t *plen)
{
	size_t off = goff;
	uint32_t len;
	int type;

	if (glen - off < BA_HDR)
		return 0;
	len = ba_hdr_len(gbuf + off);
	if (glen - off < BA_HDR + len)
		return 0;
	type = gbuf[off + 4];
	if (type != BA_PING && len >= BA_CHAN) {
		*chan = ba_get32(gbuf + off + BA_HDR);
		*pay = gbuf + off + BA_HDR + BA_CHAN;
		*plen = len - BA_CHAN;
	} else {
		*chan = 0;
		*pay = gbuf + off + BA_HDR;
		*plen = len;
	}
	goff = off + BA_HDR + len;
	return type;
}

static void
guest_send(int fd, int type, uint32_t chan, const void *p, size_t len)
{
	unsigned char h[BA_HDR + BA_CHAN];
	size_t hl = BA_HDR;

	if (type != BA_PONG) {
		ba_put32(h + BA_HDR, chan);
		hl += BA_CHAN;
	}
	ba_hdr_put(h, (uint32_t)(len + hl - BA_HDR), type);
	if (write(fd, h, hl) != (ssize_t)hl ||
	    (len > 0 && write(fd, p, len) != (ssize_t)len))
		diag("the guest's write failed: %s", strerror(errno));
}

static int
have_conn(void)
{
	return conn_fd >= 0;
}

/* The 'E' frame of the command: its channel, 0 when none came. */
static uint32_t exec_chan;
static int nexecs, nkills;
static uint32_t kill_chan;

static void
guest_take(void)
{
	const unsigned char *p;
	uint32_t chan;
	size_t len;
	int type;

	guest_read(fsb("sb-run")->guest);
	while ((type = guest_frame(&chan, &p, &len)) != 0) {
		if (type == BA_EXEC) {
			exec_chan = chan;
			nexecs++;
		}
		else if (type == BA_KILL && len == 1 && p[0] == '9') {
			nkills++;
			kill_chan = chan;
		}
	}
}

static int
have_exec(void)
{
	guest_take();
	return exec_chan != 0;
}

/* ---- the helper's descriptor ---- */

/* A helper that tries to reach the guest: every descriptor it holds
 * (fd alone, as agentd holds it) written to every way it can. Exits
 * with the number of writes that went anywhere but its own pipe. */
static void
rogue_helper(int fd)
{
	static const char frame[] = "\0\0\0\x0b" "E" "\0\0\0\x01" "arm -rf /";
	char path[64];
	int k, w, bad = 0;

	for (k = 3; k < 1024; k++)
		if (k != fd)
			close(k);
	/* (stdio is the test's TAP output, not the helper's) */
	for (k = 3; k < 1024; k++) {
		if (write(k, frame, sizeof(frame) - 1) > 0)
			bad++;
		if (send(k, frame, sizeof(frame) - 1, MSG_NOSIGNAL) > 0)
			bad++;
	}
	/* a pipe reopened through /proc is the same pipe: writable, but
	 * toward the helper itself, not the guest */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if ((w = open(path, O_WRONLY | O_NONBLOCK)) >= 0) {
		if (write(w, frame, sizeof(frame) - 1) < 0)
			bad += 0;
		close(w);
	}
	_exit(bad);
}

static void
test_helper_fd(void)
{
	struct res x;
	struct stat st;
	char err[512], pong[HM_AGENT_NONCE + 1], got[64];
	unsigned char pongframe[BA_HDR + sizeof(pong)];
	int status, fl, wst, type, others = 0, pings = 0;
	const unsigned char *p;
	uint32_t chan;
	size_t len, n;
	pid_t pid;

	is_int(start("sb-run", NULL, &x, &status, err, sizeof(err)), 0,
	    "an exec in a running sandbox is queued");
	if (!ok(run_until(have_conn, 5000), "the helper is passed a "
	    "connection"))
		return;
	ok(fstat(conn_fd, &st) == 0 && S_ISFIFO(st.st_mode),
	    "what the helper gets is a pipe, not the agent's socket");
	fl = fcntl(conn_fd, F_GETFL);
	ok(fl >= 0 && (fl & O_ACCMODE) == O_RDONLY, "... opened read-only "
	    "(its read end)");
	errno = 0;
	ok(write(conn_fd, "E", 1) == -1 && errno == EBADF,
	    "a write on it fails (EBADF)");
	errno = 0;
	ok(send(conn_fd, "E", 1, MSG_NOSIGNAL) == -1 && errno == ENOTSOCK,
	    "it is no socket to send on (ENOTSOCK)");

	/* a helper replaced by one that tries to write to the guest */
	fflush(stdout);
	if ((pid = fork()) == 0)
		rogue_helper(conn_fd);
	is_int(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) ?
	    WEXITSTATUS(wst) : -1, 0, "a helper writing on every descriptor "
	    "it holds reaches nothing");
	/* whatever it put in its own pipe (through /proc) is its own */
	fcntl(conn_fd, F_SETFL, O_NONBLOCK);
	while (read(conn_fd, got, sizeof(got)) > 0)
		;
	spin();
	guest_read(fsb("sb-run")->guest);
	while ((type = guest_frame(&chan, &p, &len)) != 0) {
		if (type == BA_PING)
			pings++;
		else
			others++;
	}
	ok(pings >= 1 && others == 0, "the guest got the parent's pings "
	    "(%d) and nothing else (%d)", pings, others);

	/* what the guest sends reaches the pipe as it was sent */
	memcpy(pong, conn_nonce, HM_AGENT_NONCE);
	pong[HM_AGENT_NONCE] = BA_PROTO;
	ba_hdr_put(pongframe, sizeof(pong), BA_PONG);
	memcpy(pongframe + BA_HDR, pong, sizeof(pong));
	guest_send(fsb("sb-run")->guest, BA_PONG, 0, pong, sizeof(pong));
	{
		unsigned char in[sizeof(pongframe)];
		int64_t end = now_ms() + 5000;
		ssize_t r;

		for (n = 0; n < sizeof(in) && now_ms() < end;) {
			spin();
			if ((r = read(conn_fd, in + n, sizeof(in) - n)) > 0)
				n += (size_t)r;
		}
		ok(n == sizeof(in) && memcmp(in, pongframe, n) == 0,
		    "the guest's pong reaches the helper's pipe byte for byte");
	}

	/* the helper's answer: the command goes to the guest and ends */
	{
		struct hm_agent_pong m;

		memset(&m, 0, sizeof(m));
		m.id = conn_id;
		memcpy(m.nonce, conn_nonce, sizeof(m.nonce));
		m.proto = BA_PROTO;
		helper_says(HM_AGENT_PONG, &m, sizeof(m));
	}
	if (!ok(run_until(have_exec, 5000), "after the pong the command "
	    "goes to the guest"))
		return;
	{
		unsigned char o[sizeof(struct hm_agent_output) + 3];
		struct hm_agent_output h;
		struct hm_agent_exit e;

		memset(&h, 0, sizeof(h));
		h.id = conn_id;
		h.stream = BA_STDOUT;
		h.len = 3;
		h.chan = exec_chan;
		memcpy(o, &h, sizeof(h));
		memcpy(o + sizeof(h), "hi\n", 3);
		helper_says(HM_AGENT_OUTPUT, o, sizeof(o));
		memset(&e, 0, sizeof(e));
		e.id = conn_id;
		e.chan = exec_chan;
		e.exited = 1;
		helper_says(HM_AGENT_EXIT, &e, sizeof(e));
	}
	ok(x.called == 1 && x.status == 200 && strcmp(x.out, "hi\n") == 0,
	    "it ends with its output (%d, %d)", x.called, x.status);
	ok(nacks >= 1, "the helper's output window was acknowledged");
}

/* ---- agentio's backpressure ---- */

static int lost;

static void
on_lost(void *arg)
{
	(void)arg;
	lost++;
}

static int
lost_now(void)
{
	return lost > 0;
}

static void
test_agentio(void)
{
	static unsigned char pat[4 << 20], in[4 << 20];
	struct px_agentio_cbs cbs = { NULL, on_lost, NULL };
	struct px_agentio *io;
	size_t sent = 0, got = 0, maxheld = 0;
	int sv[2], rfd, still = 0, i, eof = 0;
	ssize_t n;

	for (i = 0; i < (int)sizeof(pat); i++)
		pat[i] = (unsigned char)(i * 7 + i / 4096);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 ||
	    (io = px_agentio_new(base, sv[1], &rfd, &cbs)) == NULL) {
		ok(0, "agentio over a socketpair");
		return;
	}
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	/* nobody reads the pipe: the guest writes until it cannot */
	while (still < 5 && sent < sizeof(pat)) {
		n = write(sv[0], pat + sent, sizeof(pat) - sent);
		if (n > 0)
			sent += (size_t)n;
		spin();
		still = n > 0 ? 0 : still + 1;
		if (px_agentio_held(io) > maxheld)
			maxheld = px_agentio_held(io);
	}
	ok(sent < sizeof(pat), "a guest whose reader does not read stops "
	    "(%zu bytes of %zu taken)", sent, sizeof(pat));
	ok(maxheld <= PX_AGENTIO_HELD + 64 * 1024, "the parent held at most "
	    "%zu bytes of it", maxheld);
	/* the reader reads: all of it comes, in order, then the end */
	while (!eof) {
		if (sent < sizeof(pat) &&
		    (n = write(sv[0], pat + sent, sizeof(pat) - sent)) > 0)
			sent += (size_t)n;
		if (sent == sizeof(pat) && sv[0] >= 0) {
			close(sv[0]);	/* the guest's end, after its bytes */
			sv[0] = -1;
		}
		spin();
		while ((n = read(rfd, in + got, sizeof(in) - got)) > 0)
			got += (size_t)n;
		if (n == 0)
			eof = 1;
		else if (n < 0 && errno != EAGAIN)
			break;
	}
	ok(got == sizeof(pat) && memcmp(in, pat, got) == 0, "once read, "
	    "all %zu bytes came through in order", got);
	ok(eof, "and then the guest's end");
	is_int(lost, 0, "nothing lost meanwhile");
	/* a write toward a guest that is gone */
	evbuffer_add(px_agentio_output(io), "x", 1);
	run_until(lost_now, 2000);
	is_int(lost, 1, "a write to a guest gone says so");
	px_agentio_free(io);
	close(rfd);
}

/* ---- bounds ---- */

static void
test_bounds(void)
{
	static struct res r[12];
	char err[512];
	int status = 0, k;

	px_exec_set_max_procs(3);
	px_exec_set_limits(4, 60000);
	for (k = 0; k < 3; k++)
		is_int(start("sb-p1", "tok-a", &r[k], &status, err,
		    sizeof(err)), 0, "sb-p1: job %d of tok-a queued", k + 1);
	spin();
	ok(fsb("sb-p1")->wakes >= 1, "the paused sandbox is woken");
	is_int(start("sb-p1", "tok-b", &r[3], &status, err, sizeof(err)), -1,
	    "a 4th job in sb-p1 is refused");
	ok(status == 429 && strstr(err, "vm_max_procs 3") != NULL,
	    "429, naming vm_max_procs (%d: %s)", status, err);
	is_int(start("sb-p2", "tok-a", &r[4], &status, err, sizeof(err)), 0,
	    "tok-a's 4th job, in sb-p2, is queued");
	is_int(start("sb-p3", "tok-a", &r[5], &status, err, sizeof(err)), -1,
	    "its 5th, in sb-p3, is refused");
	ok(status == 429 && strstr(err, "exec_max_per_token 4") != NULL &&
	    strstr(err, "tok-a") != NULL, "429, naming the token and "
	    "exec_max_per_token (%d: %s)", status, err);
	is_int(start("sb-p3", "tok-b", &r[6], &status, err, sizeof(err)), 0,
	    "another token's job in sb-p3 is queued");
	is_int(start("sb-p3", NULL, &r[7], &status, err, sizeof(err)), 0,
	    "so is one from the unix socket");
	is_int(start("sb-p3", "", &r[8], &status, err, sizeof(err)), 0,
	    "... (an empty token id is the socket's too)");
	/* its client gone: dropped from the queue, its slot given back */
	px_exec_abandon(&r[1], NULL);
	spin();
	is_int(r[1].called, 0, "an abandoned queued job is never done");
	is_int(start("sb-p2", "tok-a", &r[9], &status, err, sizeof(err)), 0,
	    "its token may queue one more");
	/* a deleted sandbox's jobs fail, and are counted no more */
	for (k = 1; k < 4; k++)
		px_exec_forget(sbs[k].id);
	is_int(r[0].called + r[2].called + r[4].called + r[6].called +
	    r[7].called + r[8].called + r[9].called, 7, "the queued jobs of "
	    "deleted sandboxes fail");
	is_int(r[0].status, 404, "... with 404");
	is_int(r[1].called, 0, "... and the abandoned one is still not done");
	px_exec_set_max_procs(0);
	px_exec_set_limits(0, 0);
}

/* ---- the queue's deadline ---- */

static struct res dl[2];

static int
dl_done(void)
{
	return dl[0].called && dl[1].called;
}

static void
test_deadline(void)
{
	char err[512];
	int status;
	int64_t t0;

	px_exec_set_limits(0, 150);
	t0 = now_ms();
	is_int(start("sb-p1", "tok-a", &dl[0], &status, err, sizeof(err)), 0,
	    "a job in a sandbox whose wake does not end is queued");
	is_int(start("sb-p1", NULL, &dl[1], &status, err, sizeof(err)), 0,
	    "and another");
	ok(run_until(dl_done, 5000), "both end");
	ok(now_ms() - t0 >= 150, "not before exec_queue_timeout (%lld ms)",
	    (long long)(now_ms() - t0));
	is_int(dl[0].status, 503, "503");
	ok(strstr(dl[0].msg, "exec_queue_timeout") != NULL &&
	    strstr(dl[0].msg, "its wake has not ended") != NULL,
	    "saying what it waited for: %s", dl[0].msg);
	px_exec_forget("sb-p1");
}

/* A running job outlives the queue's deadline. */
static void
test_running_kept(void)
{
	struct res x;
	struct hm_agent_exit e;
	char err[512];
	int status;
	int64_t end;

	px_exec_set_limits(0, 150);
	exec_chan = 0;
	is_int(start("sb-run", NULL, &x, &status, err, sizeof(err)), 0,
	    "a job on the ready connection");
	if (!ok(run_until(have_exec, 5000), "runs at once"))
		return;
	/* past the queue's deadline (150 ms) while it runs */
	for (end = now_ms() + 400; now_ms() < end;) {
		struct timeval tv = { 0, 20000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	is_int(x.called, 0, "a running job is not failed by the queue's "
	    "deadline");
	memset(&e, 0, sizeof(e));
	e.id = conn_id;
	e.chan = exec_chan;
	e.exited = 1;
	e.code = 3;
	helper_says(HM_AGENT_EXIT, &e, sizeof(e));
	ok(x.called == 1 && x.status == 200, "it ends as the guest says");
	px_exec_set_limits(0, 0);
}

/* ---- abandoned execs ---- */

static int ndone;

static void
count_done(void *arg, const struct px_exec_result *r)
{
	(void)arg;
	(void)r;
	ndone++;
}

static long
rss_kib(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void
test_abandon(void)
{
	static char tag[10000];
	struct px_exec_req req;
	char err[512];
	int status, i, refused = 0;
	uint32_t chan;
	long rss0, rss1;

	memset(&req, 0, sizeof(req));
	req.op = PX_EXEC_RUN;
	req.argv = argv_echo;
	req.argc = 1;
	req.timeout_ms = 60000;
	req.token_id = "tok-a";

	/* one running, abandoned: killed in the guest */
	exec_chan = 0;
	nkills = 0;
	if (px_exec_start("sb-run", &req, count_done, &tag[0], &status, err,
	    sizeof(err), NULL) == 0 && run_until(have_exec, 5000)) {
		chan = exec_chan;
		px_exec_abandon(&tag[0], NULL);
		spin();
		guest_take();
		ok(nkills == 1 && kill_chan == chan, "an abandoned running "
		    "exec is killed in the guest ('K' 9 on channel %u)",
		    (unsigned)chan);
	} else
		ok(0, "an exec to abandon runs");

	/* 10000 clients that go away, half before their job runs */
	rss0 = rss_kib();
	nkills = nexecs = 0;
	for (i = 0; i < 10000; i++) {
		exec_chan = 0;
		if (px_exec_start("sb-run", &req, count_done, &tag[i], &status,
		    err, sizeof(err), NULL) != 0) {
			refused++;
			continue;
		}
		if (i % 2 == 0)
			spin();		/* it runs: on a channel */
		px_exec_abandon(&tag[i], NULL);
		if (i % 64 == 0) {
			spin();
			guest_take();
			guest_compact();
		}
	}
	spin();
	guest_take();
	rss1 = rss_kib();
	is_int(refused, 0, "10000 execs whose clients went: none refused "
	    "(each gave its slot back)");
	is_int(ndone, 0, "none of them is done (nobody to answer)");
	ok(nexecs >= 4000, "half of them ran first (%d)", nexecs);
	is_int(nkills, nexecs, "each that ran was killed in the guest");
	{
		const char *pre = getenv("LD_PRELOAD");
		int vg = pre != NULL && strstr(pre, "vgpreload") != NULL;
		int asan = 0;

#if defined(__SANITIZE_ADDRESS__)
		asan = 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
		asan = 1;
#endif
#endif
		/* (valgrind's own memory, and ASan's quarantine and shadow,
		 * are no measure of ours) */
		ok(vg || asan || rss1 - rss0 < 8 * 1024, "the parent's memory "
		    "grew by %ld KiB%s", rss1 - rss0, vg ?
		    " # SKIP under valgrind" : asan ? " # SKIP under ASan" : "");
	}
	/* the token's count is back to nothing: exactly the bound again */
	px_exec_set_max_procs(1024);
	px_exec_set_limits(5, 60000);
	for (i = 0; i < 6; i++)
		if (px_exec_start("sb-p2", &req, count_done, &tag[i], &status,
		    err, sizeof(err), NULL) != 0)
			break;
	is_int(i, 5, "the token may again have exactly exec_max_per_token");
	px_exec_forget("sb-p2");
	px_exec_set_max_procs(0);
	px_exec_set_limits(0, 0);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);	/* as berthd */
	base = event_base_new();
	px_exec_init(base);
	if (adef == NULL || adef->on_start == NULL) {
		ok(0, "exec.c starts its helper");
		return done_testing();
	}
	adef->on_start(APR, adef->arg);	/* the helper runs */
	test_helper_fd();
	test_agentio();
	test_bounds();
	test_deadline();
	test_running_kept();
	test_abandon();
	is_int(nbad, 0, "exec.c never found the stand-in helper bad");
	px_exec_shutdown();
	event_base_free(base);
	return done_testing();
}
