/*
 * test_control.c — the control API end to end on a real unix socket: a
 * forked child runs px_control_new on a temp state dir in its own event
 * loop; the parent drives it with raw HTTP (netctl's client, and bare
 * sockets for framing edge cases) and with the real netctl binary
 * ($top_builddir/netctl/netctl), checking statuses, JSON, exit codes and
 * output. A second run plays a berthd with VMs through fake hooks:
 * sizes, idle limits, templates, start / stop / restart. No root needed.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "control.h"
#include "conf.h"
#include "reqhead.h"
#include "store.h"
#include "sbfield.h"
#include "token.h"
#include "cli.h"
#include "tap.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <http_parser.h>
#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

static char dir[64], sock[100], netctl[1024], tcp_addr[64], tcp_url[80];
static pid_t child = -1;

/* ---- the server, in the child ---- */

static int routes_changed;
static int vm_mode;		/* the child plays a berthd with VMs */

/*
 * VM mode: hooks that stand for libvmm. Every call is logged to
 * <dir>/vmlog for the parent to read; a create or an operation sets the
 * state a VM would reach at once (ids starting "fail" fail to boot),
 * and an operation answers from the loop, as the real one does.
 */
static struct px_store *vm_store;
static struct event_base *vm_base;

static void __attribute__((format(printf, 1, 2)))
vmlog(const char *fmt, ...)
{
	char path[128];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/vmlog", dir);
	if ((f = fopen(path, "a")) == NULL)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

static int
fake_create(const char *id, const struct px_vm_spec *s, char *err,
    size_t errlen, void *arg)
{
	char e[256];

	vmlog("create %s %u %u %u %s %s %llu %llu %llu", id, s->mem_mib,
	    s->vcpus, s->disk_mib, s->template_name, s->template_dir ?
	    s->template_dir : "-", (unsigned long long)s->idle_pause_ms,
	    (unsigned long long)s->idle_suspend_ms,
	    (unsigned long long)s->max_lifetime_ms);
	px_store_sandbox_set_vm(vm_store, id, strncmp(id, "fail", 4) == 0 ?
	    PX_STATE_FAILED : PX_STATE_RUNNING, "10.9.0.2", e, sizeof(e));
	return 0;
}

struct fake_op {
	char id[48], op[16];
	void (*done)(void *, int, const char *);
	void *done_arg;
	struct event *ev;
};

static void
fake_op_end(evutil_socket_t fd, short what, void *arg)
{
	struct fake_op *f = arg;
	const char *st = strcmp(f->op, "pause") == 0 ? PX_STATE_PAUSED :
	    strcmp(f->op, "suspend") == 0 ? PX_STATE_SUSPENDED :
	    strcmp(f->op, "stop") == 0 ? PX_STATE_STOPPED : PX_STATE_RUNNING;
	char e[256];

	px_store_sandbox_set_state(vm_store, f->id, st, e, sizeof(e));
	f->done(f->done_arg, 1, NULL);
	event_free(f->ev);
	free(f);
}

static int
fake_lifecycle(const char *id, const char *op,
    void (*done)(void *, int, const char *), void *done_arg, char *err,
    size_t errlen, void *arg)
{
	struct fake_op *f = calloc(1, sizeof(*f));
	struct timeval tv = { 0, 1000 };

	vmlog("%s %s", op, id);
	snprintf(f->id, sizeof(f->id), "%s", id);
	snprintf(f->op, sizeof(f->op), "%s", op);
	f->done = done;
	f->done_arg = done_arg;
	f->ev = evtimer_new(vm_base, fake_op_end, f);
	evtimer_add(f->ev, &tv);
	return 0;
}

/* A fake guest for streamed exec and files: PUT counts what came, GET
 * sends 3 x 100000 bytes ('a'..'c'), /missing is a 404; exec "cat"
 * echoes its stdin, exits 0 at EOF. */
struct px_exec_stream {
	struct px_exec_sink sink;
	int op;
	char path[256], argv0[32];
	unsigned mode;
	size_t bytes;
	struct event *ev;
	int step;
};

static void
fake_stream_step(evutil_socket_t fd, short what, void *arg)
{
	struct px_exec_stream *f = arg;
	struct px_exec_result res;
	static unsigned char chunk[100000];
	struct timeval tv = { 0, 1000 };

	memset(&res, 0, sizeof(res));
	res.status = 200;
	res.exited = 1;
	res.wake_ms = 7;
	if (f->step == 0)
		f->sink.start(f->sink.arg, 7);
	if (f->op == PX_FILE_WATCH && f->step < 4) {
		static const struct px_watch_event evs[] = {
			{ 9, 1, 0, "/w", 2 },		/* ready */
			{ 0, 0, 0, "/w/n\xff", 5 },	/* create */
			{ 4, 0, 7, "/w/a", 4 },		/* move_from */
			{ 7, 0, 0, "/w", 2 },		/* overflow */
		};

		f->sink.event(f->sink.arg, &evs[f->step]);
		f->step++;
		evtimer_add(f->ev, &tv);
		return;
	}
	if (f->op == PX_FILE_GET && strcmp(f->path, "/missing") == 0) {
		res.status = 404;
		res.message = "no file /missing in the guest";
	} else if (f->op == PX_FILE_GET && f->step < 3) {
		memset(chunk, 'a' + f->step, sizeof(chunk));
		f->sink.output(f->sink.arg, 'O', chunk, sizeof(chunk));
		f->step++;
		evtimer_add(f->ev, &tv);
		return;
	}
	if (f->op == PX_FILE_PUT)
		vmlog("put %s %o %zu", f->path, f->mode, f->bytes);
	event_free(f->ev);
	f->sink.done(f->sink.arg, &res);
	free(f);
}

static struct px_exec_stream *
fake_exec_stream(const char *id, const struct px_exec_req *req,
    const struct px_exec_sink *sink, int *status, char *err, size_t errlen,
    void *arg)
{
	struct px_exec_stream *f = calloc(1, sizeof(*f));
	struct timeval tv = { 0, 1000 };

	f->sink = *sink;
	f->op = req->op;
	f->mode = req->mode;
	snprintf(f->path, sizeof(f->path), "%s", req->path ? req->path : "");
	snprintf(f->argv0, sizeof(f->argv0), "%s", req->argc ? req->argv[0] :
	    "");
	f->ev = evtimer_new(vm_base, fake_stream_step, f);
	if (f->op == PX_FILE_GET && (req->offset != 0 || req->length !=
	    UINT64_MAX))
		vmlog("get %s from %llu for %llu", f->path,
		    (unsigned long long)req->offset,
		    (unsigned long long)req->length);
	if (f->op == PX_FILE_WATCH)
		vmlog("watch %s %d", f->path, req->recursive);
	if (f->op == PX_PROC_ATTACH)
		vmlog("attach %u %dx%d from %llu", (unsigned)req->proc,
		    req->rows, req->cols, (unsigned long long)req->offset);
	if (f->op == PX_FILE_GET || f->op == PX_FILE_WATCH)
		evtimer_add(f->ev, &tv);
	else
		f->sink.start(f->sink.arg, 7), f->step = 1;
	return f;
}

static size_t
fake_exec_input(struct px_exec_stream *f, int type, const void *p, size_t len)
{
	struct timeval tv = { 0, 1000 };

	if (type == 'I' && len == 0)
		evtimer_add(f->ev, &tv);	/* EOF: the end, soon */
	else if (type == 'I' && (f->op == PX_EXEC_RUN ||
	    f->op == PX_PROC_ATTACH))
		f->sink.output(f->sink.arg, 'O', p, len);
	f->bytes += len;
	return 0;
}

static void
fake_exec_read(struct px_exec_stream *f, int on)
{
}

static void
fake_exec_cancel(struct px_exec_stream *f)
{
	vmlog("cancel %s", f->path);
	event_free(f->ev);
	free(f);
}

/* A fake guest agent for the buffered file requests: /d lists three
 * entries out of order (one name not UTF-8), /exists is there already;
 * what was asked goes to vmlog. Answered from the loop, as exec.c does. */
struct fake_call {
	void (*done)(void *, const struct px_exec_result *);
	void *done_arg;
	int op, status;
	uint32_t max;
	struct event *ev;
};

static void
fake_call_end(evutil_socket_t fd, short what, void *arg)
{
	static const struct px_dirent ents[] = {
		{ 0, 0644, 3, 1700000000123LL, 1, "b" },
		{ 1, 0755, 4096, 0, 2, "a\xff" },
		{ 2, 0777, 1, 1700000000000LL, 1, "c" },
	};
	struct fake_call *f = arg;
	struct px_exec_result res;

	memset(&res, 0, sizeof(res));
	res.status = f->status;
	res.message = f->status == 409 ? "/exists exists" : "refused";
	res.exited = 1;
	if (f->op == PX_FILE_LIST) {
		res.entries = ents;
		res.nentries = f->max < 3 ? f->max : 3;
		res.truncated = f->max < 3;
	}
	event_free(f->ev);
	f->done(f->done_arg, &res);
	free(f);
}

static int
fake_exec(const char *id, const struct px_exec_req *req,
    void (*done)(void *, const struct px_exec_result *), void *done_arg,
    int *status, char *err, size_t errlen, void *arg)
{
	struct fake_call *f;
	struct timeval tv = { 0, 1000 };

	if (req->op == PX_EXEC_RUN) {	/* what it would start with */
		char env[512] = "";
		int i;

		for (i = 0; i < req->envc; i++)
			snprintf(env + strlen(env), sizeof(env) - strlen(env),
			    " %s", req->env[i]);
		vmlog("exec %s env%s", id, env);
		vmlog("exec by %s", req->token_id != NULL &&
		    req->token_id[0] != '\0' ? req->token_id : "the socket");
		if (strcmp(req->argv[0], "hang") == 0) {
			/* answered never: its client's going is abandon */
			vmlog("hang %s", id);
			return 0;
		}
	}
	if (req->op != PX_FILE_LIST && req->op != PX_FILE_MKDIR &&
	    req->op != PX_FILE_REMOVE && req->op != PX_FILE_MOVE) {
		*status = 409;
		snprintf(err, errlen, "no guest here");
		return -1;
	}
	f = calloc(1, sizeof(*f));
	f->done = done;
	f->done_arg = done_arg;
	f->op = req->op;
	f->max = req->max_entries;
	f->status = strcmp(req->path, "/exists") == 0 ||
	    (req->to != NULL && strcmp(req->to, "/exists") == 0) ? 409 : 200;
	if (req->op == PX_FILE_LIST)
		vmlog("list %s %u", req->path, (unsigned)req->max_entries);
	else if (req->op == PX_FILE_MKDIR)
		vmlog("mkdir %s %o %d", req->path, req->mode, req->parents);
	else if (req->op == PX_FILE_REMOVE)
		vmlog("remove %s %d", req->path, req->recursive);
	else
		vmlog("move %s %s %d", req->path, req->to, req->overwrite);
	f->ev = evtimer_new(vm_base, fake_call_end, f);
	evtimer_add(f->ev, &tv);
	return 0;
}

static void
fake_exec_abandon(void *done_arg, void *arg)
{
	(void)done_arg;
	vmlog("abandon");
}

static void
fake_set_idle(const char *id, uint64_t p, uint64_t s, uint64_t l, void *arg)
{
	vmlog("idle %s %llu %llu %llu", id, (unsigned long long)p,
	    (unsigned long long)s, (unsigned long long)l);
}

static int
fake_template_check(const char *tdir, char *err, size_t errlen, void *arg)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s/template.json", tdir);
	if (access(path, R_OK) == 0)
		return 0;
	snprintf(err, errlen, "%s: %s", path, strerror(errno));
	return -1;
}

static void
on_routes_changed(void *arg)
{
	routes_changed++;
}

static void
on_metrics(struct evbuffer *out, void *arg)
{
	evbuffer_add_printf(out, "test_routes_changed %d\n", routes_changed);
}

static void
on_term(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(arg);
}

static void
serve(int ready_fd)
{
	struct px_control_hooks hooks = {
		.domain = "berth.localhost",
		.https_port = 8443,
		.routes_changed = on_routes_changed,
		.metrics = on_metrics,
	};
	struct event_base *base = event_base_new();
	static struct px_config cfg;
	struct px_store *st;
	struct px_control *ctl;
	struct event *term;
	char err[512] = "";

	if (vm_mode && base != NULL &&
	    (vm_store = px_store_open(dir, err, sizeof(err))) != NULL) {
		vm_base = base;
		memset(&cfg, 0, sizeof(cfg));
		cfg.eg_max_rules = 256;
		cfg.vm_memory = 256;
		cfg.vm_max_memory = 1024;
		cfg.vm_vcpus = 1;
		cfg.vm_max_vcpus = 2;
		cfg.vm_disk = 512;
		cfg.vm_max_disk = 4096;
		cfg.idle_suspend = 3600000;	/* idle_pause: libvmm's 5m */
		cfg.host_suffix[0] = "apps.example.com";
		cfg.host_suffix[1] = "dev.example.org";
		cfg.nhost_suffix = 2;
		hooks.config = &cfg;
		hooks.vm_create = fake_create;
		hooks.lifecycle = fake_lifecycle;
		hooks.vm_set_idle = fake_set_idle;
		hooks.template_check = fake_template_check;
		hooks.template_dir = "/srv/berth/default";
		hooks.exec = fake_exec;
		hooks.exec_abandon = fake_exec_abandon;
		hooks.exec_stream = fake_exec_stream;
		hooks.exec_input = fake_exec_input;
		hooks.exec_read = fake_exec_read;
		hooks.exec_cancel = fake_exec_cancel;
	}
	if (base == NULL || (st = px_store_open(dir, err, sizeof(err))) == NULL ||
	    (ctl = px_control_new(base, st, sock, &hooks, err,
	    sizeof(err))) == NULL) {
		dprintf(ready_fd, "error: %s", err);
		_exit(1);
	}
	if (px_control_listen_tcp(ctl, tcp_addr, NULL, err, sizeof(err)) == -1) {
		dprintf(ready_fd, "error: %s", err);
		_exit(1);
	}
	term = evsignal_new(base, SIGTERM, on_term, base);
	event_add(term, NULL);
	if (write(ready_fd, "ready", 5) != 5)
		_exit(1);
	close(ready_fd);
	event_base_dispatch(base);
	event_free(term);
	px_control_free(ctl);
	px_store_close(st);
	event_base_free(base);
	_exit(0);
}

/* ---- client helpers ---- */

static struct cli_response last;
static json_t *last_json;

/* One request via netctl's client; returns the status (-1 transport). */
static int
req(const char *method, const char *target, const char *body)
{
	char err[512];
	int cf;

	cli_response_free(&last);
	json_decref(last_json);
	last_json = NULL;
	if (cli_http_request(sock, method, target, body, &last, &cf, err,
	    sizeof(err)) == -1) {
		diag("%s %s: %s", method, target, err);
		return -1;
	}
	last_json = json_loadb(last.body, last.len, 0, NULL);
	return last.status;
}

/* A string at a slash path in the last JSON answer ("error/field"). */
static const char *
js(const char *path)
{
	char buf[256], *p, *save = NULL;
	json_t *v = last_json;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = strtok_r(buf, "/", &save); p && v; p = strtok_r(NULL, "/",
	    &save)) {
		if (json_is_array(v))
			v = json_array_get(v, (size_t)atoi(p));
		else
			v = json_object_get(v, p);
	}
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v)) {
		static char num[32];

		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		return num;
	}
	if (json_is_boolean(v))
		return json_is_true(v) ? "true" : "false";
	if (json_is_null(v))
		return "null";
	return v ? "(value)" : "(missing)";
}

/* One request over TCP with a bearer token (NULL: none). */
static int
treq(const char *token, const char *method, const char *target,
    const char *body)
{
	struct cli_target t = { NULL, tcp_url, token, NULL };
	char err[512];
	int cf;

	cli_response_free(&last);
	json_decref(last_json);
	last_json = NULL;
	if (cli_http_do(&t, method, target, body, &last, &cf, err,
	    sizeof(err)) == -1) {
		diag("%s %s: %s", method, target, err);
		return -1;
	}
	last_json = json_loadb(last.body, last.len, 0, NULL);
	return last.status;
}

/* A connection to the control socket with a 5 s read deadline, or -1. */
static int
raw_connect(void)
{
	struct sockaddr_un sun;
	struct timeval tv = { 5, 0 };
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends raw bytes, reads until close; returns the response text. */
static char *
raw(const char *data, size_t len)
{
	static char buf[65536];
	size_t got = 0;
	ssize_t n;
	int fd;

	buf[0] = '\0';
	if ((fd = raw_connect()) == -1)
		return buf;
	while (len > 0 && (n = send(fd, data, len, MSG_NOSIGNAL)) > 0) {
		data += n;
		len -= (size_t)n;
	}
	/* A half close, as `printf ... | nc -U` does: answers must still
	 * arrive. */
	shutdown(fd, SHUT_WR);
	while (got < sizeof(buf) - 1 &&
	    (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

#define raws(s) raw((s), strlen(s))

/*
 * As raw(), in two steps: first is sent, its answer read until it holds
 * mark (so the server wrote all it had: its output is empty), then then
 * is sent and the rest read to EOF. For a callback that ends its
 * connection while nothing waits to be written.
 */
static char *
raw_after(const char *first, size_t len1, const char *mark,
    const char *then, size_t len2)
{
	static char buf[65536];
	size_t got = 0;
	ssize_t n;
	int fd;

	buf[0] = '\0';
	if ((fd = raw_connect()) == -1)
		return buf;
	if (send(fd, first, len1, MSG_NOSIGNAL) != (ssize_t)len1) {
		close(fd);
		return buf;
	}
	/* bounded by SO_RCVTIMEO */
	while (got < sizeof(buf) - 1 && memmem(buf, got, mark,
	    strlen(mark)) == NULL &&
	    (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	if (memmem(buf, got, mark, strlen(mark)) != NULL)
		(void)send(fd, then, len2, MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	while (got < sizeof(buf) - 1 &&
	    (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

static int
count(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

static char out[8192], errout[8192];

static void
slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

/* Runs netctl with args (shell words); returns its exit code. */
static int
run(const char *args)
{
	char cmd[4096], o[128], e[128];
	int st;

	snprintf(o, sizeof(o), "%s/out", dir);
	snprintf(e, sizeof(e), "%s/err", dir);
	snprintf(cmd, sizeof(cmd), "BERTH_STATE_DIR= '%s' -s '%s' %s >'%s' 2>'%s'",
	    netctl, dir, args, o, e);
	st = system(cmd);
	slurp(o, out, sizeof(out));
	slurp(e, errout, sizeof(errout));
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* netctl's stdout is exactly one JSON document (its value, owned by the
 * caller), or NULL with a diagnostic. */
static json_t *
one_doc(const char *what)
{
	json_error_t jerr;
	json_t *j = json_loads(out, 0, &jerr);

	if (j == NULL)
		diag("%s: not one JSON document (%s): %s", what, jerr.text, out);
	return j;
}

/* 1 if <dir>/vmlog has a line starting with line. */
static int
vmlog_has(const char *line)
{
	char path[128], buf[8192];

	snprintf(path, sizeof(path), "%s/vmlog", dir);
	slurp(path, buf, sizeof(buf));
	if (strncmp(buf, line, strlen(line)) == 0)
		return 1;
	{
		char nl[600];

		snprintf(nl, sizeof(nl), "\n%s", line);
		if (strstr(buf, nl) != NULL)
			return 1;
	}
	diag("vmlog has no '%s':\n%s", line, buf);
	return 0;
}

/* How many lines of <dir>/vmlog start with line. */
static int
vmlog_count(const char *line)
{
	char path[128], buf[8192], nl[600];

	snprintf(path, sizeof(path), "%s/vmlog", dir);
	slurp(path, buf, sizeof(buf));
	snprintf(nl, sizeof(nl), "\n%s", line);
	return (strncmp(buf, line, strlen(line)) == 0) + count(buf, nl);
}

/* A string member of a JSON document, "(none)" when missing. */
static const char *
jget(json_t *j, const char *key)
{
	const char *v = json_string_value(json_object_get(j, key));

	return v ? v : "(none)";
}

static void
stop_child(void)
{
	int st;

	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, &st, 0);
		child = -1;
	}
}

static void
cleanup(void)
{
	char cmd[128];

	stop_child();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
}

static int
start_child(void)
{
	char buf[600];
	int pfd[2];
	ssize_t n;

	if (pipe(pfd) == -1)
		return -1;
	if ((child = fork()) == -1)
		return -1;
	if (child == 0) {
		close(pfd[0]);
		serve(pfd[1]);
	}
	close(pfd[1]);
	n = read(pfd[0], buf, sizeof(buf) - 1);
	close(pfd[0]);
	buf[n > 0 ? n : 0] = '\0';
	if (strcmp(buf, "ready") != 0) {
		diag("server did not start: %s", buf);
		return -1;
	}
	return 0;
}

/* ---- the request reader (reqhead.c over http1.c), without a socket ---- */

static struct {
	int	heads, ends;
	char	body[256];
	size_t	bodylen;
} rd;

static void
rd_head(void *arg)
{
	rd.heads++;
}

static int
rd_body(void *arg, const char *at, size_t len)
{
	if (rd.bodylen + len >= sizeof(rd.body))
		return -1;
	memcpy(rd.body + rd.bodylen, at, len);
	rd.bodylen += len;
	rd.body[rd.bodylen] = '\0';
	return 0;
}

static void
rd_end(void *arg)
{
	rd.ends++;
}

static const struct px_reqhead_hooks rd_hooks = {
	.stream_head = rd_head, .stream_body = rd_body, .stream_end = rd_end,
};

/* Feeds s[0..len) in pieces of step bytes (0: whole) until the reader
 * stops at something other than MORE; *off gets what it consumed. */
static enum px_reqhead_stop
rd_feed(struct px_reqhead *r, const char *s, size_t len, size_t step,
    size_t *off)
{
	enum px_reqhead_stop st = PX_REQHEAD_MORE;
	size_t used, n;

	*off = 0;
	while (st == PX_REQHEAD_MORE && *off < len) {
		n = step == 0 || len - *off < step ? len - *off : step;
		st = px_reqhead_execute(r, s + *off, n, &used);
		*off += used;
	}
	return st;
}

/* s read whole by a fresh reader r with hooks h (the caller frees r;
 * a reader that could not start stops at ERROR). */
static enum px_reqhead_stop
rd_one(struct px_reqhead *r, const struct px_reqhead_hooks *h, const char *s)
{
	size_t used;

	if (px_reqhead_init(r, h, NULL, 1) != 0)
		return PX_REQHEAD_ERROR;
	return px_reqhead_execute(r, s, strlen(s), &used);
}

/* One request refused: the status and message it earns. */
static int
rd_refused(const char *s, char *msg, size_t msglen)
{
	struct px_reqhead r;
	int status = 0;

	msg[0] = '\0';
	if (rd_one(&r, &rd_hooks, s) == PX_REQHEAD_ERROR && r.url != NULL)
		status = px_reqhead_error(&r, msg, msglen);
	px_reqhead_free(&r);
	return status;
}

static const char *
rd_url(struct px_reqhead *r)
{
	static char u[256];
	size_t n = evbuffer_get_length(r->url);

	if (n >= sizeof(u))
		n = sizeof(u) - 1;
	evbuffer_copyout(r->url, u, n);
	u[n] = '\0';
	return u;
}

static void
test_reader(void)
{
	static const char two[] = "\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: x\r\n"
	    "Authorization: Bearer t1\r\n\r\n"
	    "PUT /v1/sandboxes/sb-1/ports/80 HTTP/1.1\r\nHost: x\r\n"
	    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	    "3\r\n{\"a\r\n4;ext=\"q\"\r\n\":1}\r\n0\r\nX-T: y\r\n\r\n"
	    "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char files[] = "PUT /v1/sandboxes/sb-1/files?path=/a "
	    "HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n"
	    "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char empty[] = "POST /v1/sandboxes/sb-1/exec?stream=1 "
	    "HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
	char msg[160], big[PX_CONTROL_MAX_HEAD + 64], *p;
	struct px_reqhead r;
	size_t off, used, step, at;
	enum px_reqhead_stop st;
	int i, okall;

	/* pipelined requests, whole and a byte at a time: the same stops */
	for (step = 0; step <= 1; step++) {
		if (px_reqhead_init(&r, &rd_hooks, NULL, 1) != 0)
			return;
		st = rd_feed(&r, two, sizeof(two) - 1, step, &off);
		at = off;
		ok(st == PX_REQHEAD_COMPLETE && r.complete &&
		    r.method == HTTP_GET && strcmp(rd_url(&r), "/v1/health") == 0 &&
		    strcmp(r.authz, "Bearer t1") == 0 && !r.authz_bad &&
		    r.keepalive && evbuffer_get_length(r.body) == 0 &&
		    memcmp(two + at, "PUT ", 4) == 0,
		    "reader (%s): empty lines skipped, a GET read up to its "
		    "end", step ? "bytewise" : "whole");
		px_reqhead_reset(&r);
		ok(!px_reqhead_started(&r), "reader: not started after a reset");
		st = rd_feed(&r, two + at, sizeof(two) - 1 - at, step, &off);
		at += off;
		ok(st == PX_REQHEAD_COMPLETE && r.method == HTTP_PUT &&
		    !r.keepalive && r.authzlen == 0 &&
		    evbuffer_get_length(r.body) == 7 &&
		    memcmp(evbuffer_pullup(r.body, -1), "{\"a\":1}", 7) == 0 &&
		    memcmp(two + at, "GET ", 4) == 0,
		    "reader (%s): a chunked body decoded (extension, trailer "
		    "dropped)", step ? "bytewise" : "whole");
		px_reqhead_reset(&r);
		st = px_reqhead_execute(&r, two + at, sizeof(two) - 1 - at, &used);
		ok(st == PX_REQHEAD_MORE && used == sizeof(two) - 1 - at &&
		    !r.complete, "reader: after Connection: close, what follows "
		    "is dropped");
		px_reqhead_free(&r);
	}

	/* a streamed body: stops after its head, body to the hook, end */
	for (step = 0; step <= 1; step++) {
		memset(&rd, 0, sizeof(rd));
		if (px_reqhead_init(&r, &rd_hooks, NULL, 1) != 0)
			return;
		st = rd_feed(&r, files, sizeof(files) - 1, step, &off);
		at = off;
		ok(st == PX_REQHEAD_HEAD && rd.heads == 1 && r.streamed &&
		    r.expect && rd.bodylen == 0 &&
		    memcmp(files + at, "5\r\n", 3) == 0,
		    "reader (%s): a streamed request stops after its head, "
		    "Expect: 100-continue seen", step ? "bytewise" : "whole");
		px_reqhead_reset(&r);
		st = rd_feed(&r, files + at, sizeof(files) - 1 - at, step, &off);
		at += off;
		ok(st == PX_REQHEAD_END && rd.ends == 1 && !r.streamed &&
		    !r.complete && strcmp(rd.body, "hello!") == 0 &&
		    memcmp(files + at, "GET ", 4) == 0,
		    "reader (%s): its body to the hook, its end stops it",
		    step ? "bytewise" : "whole");
		st = rd_feed(&r, files + at, sizeof(files) - 1 - at, step, &off);
		ok(st == PX_REQHEAD_COMPLETE && !r.streamed &&
		    strcmp(rd_url(&r), "/v1/health") == 0,
		    "reader (%s): the next request after it",
		    step ? "bytewise" : "whole");
		px_reqhead_free(&r);
	}

	/* an empty streamed body ends without another byte */
	memset(&rd, 0, sizeof(rd));
	if (px_reqhead_init(&r, &rd_hooks, NULL, 1) != 0)
		return;
	st = px_reqhead_execute(&r, empty, sizeof(empty) - 1, &used);
	ok(st == PX_REQHEAD_HEAD && used == sizeof(empty) - 1 &&
	    px_reqhead_ready(&r), "reader: an empty streamed body is ready "
	    "to end");
	st = px_reqhead_execute(&r, NULL, 0, &used);
	ok(st == PX_REQHEAD_END && used == 0 && rd.ends == 1 &&
	    !px_reqhead_ready(&r), "reader: ... and ends with no bytes");
	px_reqhead_free(&r);
	/* without a stream_end hook (controld) it ends as complete */
	{
		static const struct px_reqhead_hooks h2 = {
			.stream_body = rd_body,
		};

		st = rd_one(&r, &h2, empty);
		if (st == PX_REQHEAD_HEAD)
			st = px_reqhead_execute(&r, NULL, 0, &used);
		ok(st == PX_REQHEAD_COMPLETE && r.complete,
		    "reader: without stream_end, a streamed end is complete");
		px_reqhead_free(&r);
	}

	/* absolute-form: the path is what the API sees */
	st = rd_one(&r, &rd_hooks, "GET http://api/v1/health?x=1 HTTP/1.1\r\n"
	    "Host: api\r\n\r\n");
	ok(st == PX_REQHEAD_COMPLETE && strcmp(rd_url(&r), "/v1/health?x=1") == 0,
	    "reader: absolute-form target read as its path");
	px_reqhead_free(&r);

	/* Authorization: twice, or not printable (authz_printable) */
	st = rd_one(&r, &rd_hooks, "GET / HTTP/1.1\r\nHost: x\r\n"
	    "Authorization: a\r\nAuthorization: b\r\n\r\n");
	ok(st == PX_REQHEAD_COMPLETE && r.authz_bad, "reader: two "
	    "Authorization headers: malformed");
	px_reqhead_free(&r);
	st = rd_one(&r, &rd_hooks, "GET / HTTP/1.1\r\nHost: x\r\n"
	    "Authorization: Bearer \xc3\xa9\r\n\r\n");
	ok(st == PX_REQHEAD_COMPLETE && r.authz_bad, "reader: a non-ASCII "
	    "Authorization: malformed");
	px_reqhead_free(&r);

	/* an Upgrade is served, then the connection ends */
	st = rd_one(&r, &rd_hooks, "GET /v1/health HTTP/1.1\r\nHost: x\r\n"
	    "Connection: upgrade\r\nUpgrade: websocket\r\n\r\n");
	ok(st == PX_REQHEAD_COMPLETE && !r.keepalive, "reader: an Upgrade "
	    "request ends its connection");
	px_reqhead_free(&r);

	/* what http1.c refuses, with the status and words it earns */
	{
		static const struct {
			const char *req;
			int status;
			const char *words;
		} bad[] = {
			{ "GET /v1/health HTTP/1.1\r\n\r\n", 400,
			    "missing Host header" },
			{ "GET /v1/health HTTP/1.1\nHost: x\n\n", 400,
			    "bare LF" },
			{ "GET /v1/health HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
			    400, "obsolete line folding" },
			{ "GET /v1/health HTTP/1.1\r\nHost : x\r\n\r\n", 400,
			    "whitespace before a header's colon" },
			{ "PUT /v1/sandboxes/a/ports/1 HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
			    400, "content-length" },	/* http-parser's words */
			{ "PUT /v1/sandboxes/a/ports/1 HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 2\r\nContent-Length: 2\r\n\r\n",
			    400, "content-length" },
			{ "PUT /v1/sandboxes/a/ports/1 HTTP/1.1\r\nHost: x\r\n"
			    "Transfer-Encoding: gzip, chunked\r\n\r\n", 501,
			    "transfer coding not implemented" },
			{ "PUT /v1/sandboxes/a/ports/1 HTTP/1.1\r\nHost: x\r\n"
			    "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
			    "invalid chunk size" },
			{ "PUT /v1/sandboxes/a/ports/1 HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 65537\r\n\r\n", 413,
			    "request body larger than 64 KB" },
			{ "GET /v1/health HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n"
			    "\r\n", 417, "unsupported Expect" },
			{ "BREW /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", 501,
			    "unknown request method" },
			{ "GET /v1/health HTTP/2.0\r\nHost: x\r\n\r\n", 505,
			    "unsupported HTTP version" },
			{ "CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n", 405,
			    "CONNECT" },
			{ "GET /v1/%00x HTTP/1.1\r\nHost: x\r\n\r\n", 400,
			    "%00" },
			{ "\rGET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", 400,
			    "bare CR" },
		};
		size_t k;

		for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			int s = rd_refused(bad[k].req, msg, sizeof(msg));

			ok(s == bad[k].status && strstr(msg, bad[k].words) != NULL,
			    "reader refuses: %d %s", s, msg);
		}
	}

	/* the bounds: a head of 16 KB, 100 fields */
	p = big;
	p += sprintf(p, "GET /v1/health HTTP/1.1\r\nHost: x\r\nX: ");
	memset(p, 'a', sizeof(big) - (size_t)(p - big) - 1);
	big[sizeof(big) - 1] = '\0';
	okall = rd_refused(big, msg, sizeof(msg)) == 431 &&
	    strcmp(msg, "request head larger than 16 KB") == 0;
	ok(okall, "reader: a head over 16 KB: 431 (%s)", msg);
	p = big;
	p += sprintf(p, "GET /v1/health HTTP/1.1\r\nHost: x\r\n");
	for (i = 0; i < PX_HEADERS_MAX; i++)
		p += sprintf(p, "X%d: y\r\n", i);
	sprintf(p, "\r\n");
	ok(rd_refused(big, msg, sizeof(msg)) == 431, "reader: more than %d "
	    "fields: 431 (%s)", PX_HEADERS_MAX, msg);
	/* a split head over 16 KB, a byte at a time */
	if (px_reqhead_init(&r, &rd_hooks, NULL, 1) != 0)
		return;
	p = big;
	p += sprintf(p, "GET /v1/health HTTP/1.1\r\nHost: x\r\nX: ");
	memset(p, 'a', sizeof(big) - (size_t)(p - big) - 1);
	st = rd_feed(&r, big, strlen(big), 1, &off);
	ok(st == PX_REQHEAD_ERROR && off <= PX_CONTROL_MAX_HEAD &&
	    px_reqhead_error(&r, msg, sizeof(msg)) == 431,
	    "reader: a head over 16 KB, a byte at a time: 431 after %zu bytes",
	    off);
	px_reqhead_free(&r);
}

int
main(void)
{
	struct px_control_hooks hooks = { .domain = "berth.localhost",
	    .https_port = 443 };
	struct event_base *base;
	struct px_control *ctl;
	struct stat st;
	char err[512], big[70 * 1024 + 256], url[256], *r;
	const char *tb = getenv("top_builddir");
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/berth-test-ctl.XXXXXX");
	if (mkdtemp(dir) == NULL)
		skip_all("mkdtemp failed");
	atexit(cleanup);
	snprintf(sock, sizeof(sock), "%s/control.sock", dir);
	snprintf(netctl, sizeof(netctl), "%s/netctl/netctl", tb ? tb : ".");
	{
		struct sockaddr_in sin = { .sin_family = AF_INET };
		socklen_t sl = sizeof(sin);
		int s = socket(AF_INET, SOCK_STREAM, 0);

		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(s, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
		    getsockname(s, (struct sockaddr *)&sin, &sl) == -1)
			skip_all("no loopback TCP");
		close(s);
		snprintf(tcp_addr, sizeof(tcp_addr), "127.0.0.1:%u",
		    ntohs(sin.sin_port));
		snprintf(tcp_url, sizeof(tcp_url), "http://%s", tcp_addr);
	}

	/* URL shapes */
	px_control_url(url, sizeof(url), "berth.localhost", 443, "sb-1", 80, NULL);
	is_str(url, "https://80-sb-1.berth.localhost/", "URL omits :443");
	px_control_url(url, sizeof(url), "d.test", 8443, "sb-1", 80, "a.example");
	is_str(url, "https://a.example:8443/", "custom host URL keeps the port");

	test_reader();

	/* a non-socket file is not removed */
	fd = creat(sock, 0600);
	close(fd);
	base = event_base_new();
	ctl = px_control_new(base, NULL, sock, &hooks, err, sizeof(err));
	ok(ctl == NULL && strstr(err, "not a socket") != NULL,
	    "refuses a regular file at the socket path: %s", err);
	unlink(sock);

	/* a stale socket file is replaced */
	{
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);

		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
		if (bind(s, (struct sockaddr *)&sun, sizeof(sun)) == -1)
			diag("bind: %s", strerror(errno));
		close(s);
	}
	if (!ok(start_child() == 0, "server starts over a stale socket"))
		return done_testing();
	ok(stat(sock, &st) == 0 && (st.st_mode & 0777) == 0600,
	    "socket mode 0600");
	ctl = px_control_new(base, NULL, sock, &hooks, err, sizeof(err));
	ok(ctl == NULL && strstr(err, "another server") != NULL,
	    "refuses when a live server answers: %s", err);
	px_control_free(ctl);
	event_base_free(base);

	/* health, metrics, unknown paths, methods */
	is_int(req("GET", "/v1/health", NULL), 200, "GET /v1/health");
	is_str(js("status"), "ok", "health says ok");
	is_str(last.content_type, "application/json", "JSON content type");
	is_int(req("GET", "/v1/nope", NULL), 404, "unknown path: 404");
	is_str(js("error/code"), "not_found", "error code not_found");
	is_int(req("GET", "/", NULL), 404, "root: 404");
	is_int(req("POST", "/v1/health", "{}"), 405, "POST health: 405");
	is_str(js("error/status"), "405", "error carries its status");
	is_int(req("PATCH", "/v1/sandboxes", "{}"), 405, "PATCH sandboxes: 405");
	r = raws("DELETE /v1/ports HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(strstr(r, "\r\nAllow: GET, HEAD\r\n") != NULL, "405 has Allow");

	/* sandboxes */
	is_int(req("GET", "/v1/sandboxes", NULL), 200, "list (empty)");
	is_int((long long)json_array_size(json_object_get(last_json,
	    "sandboxes")), 0, "no sandboxes yet");
	is_int(req("POST", "/v1/sandboxes",
	    "{\"id\":\"sb-1\",\"address\":\"127.0.0.1\"}"), 201, "create sb-1");
	is_str(js("id"), "sb-1", "created id");
	is_str(js("state"), "running", "state running");
	is_str(js("external"), "true", "external");
	is_int(req("POST", "/v1/sandboxes",
	    "{\"id\":\"sb-1\",\"address\":\"127.0.0.1\"}"), 409, "again: 409");
	is_str(js("error/field"), "id", "409 names id");
	is_int(req("POST", "/v1/sandboxes", "{\"id\":\"sb-2\"}"), 400,
	    "no address: 400");
	is_str(js("error/field"), "address", "names address");
	ok(strstr(js("error/message"), "no VMM") != NULL, "says there are no VMs "
	    "there yet: %s", js("error/message"));
	is_int(req("POST", "/v1/sandboxes",
	    "{\"id\":\"sb-2\",\"address\":\"x\"}"), 400, "bad address: 400");
	is_str(js("error/message"), "not an IP address: 'x'", "says why");
	is_int(req("POST", "/v1/sandboxes",
	    "{\"id\":\"SB\",\"address\":\"10.0.0.1\"}"), 400, "bad id: 400");
	is_str(js("error/field"), "id", "names id");
	is_int(req("POST", "/v1/sandboxes",
	    "{\"id\":\"sb-2\",\"address\":\"10.0.0.1\",\"cpu\":2}"), 400,
	    "unknown field: 400");
	is_str(js("error/field"), "cpu", "names the unknown field");
	is_int(req("POST", "/v1/sandboxes", "{\"id\":"), 400, "bad JSON: 400");
	ok(strstr(js("error/message"), "invalid JSON") != NULL, "says invalid "
	    "JSON: %s", js("error/message"));
	is_int(req("POST", "/v1/sandboxes", "[1]"), 400, "array body: 400");
	is_int(req("POST", "/v1/sandboxes", "{\"id\":7,\"address\":\"::1\"}"),
	    400, "id not a string: 400");
	is_int(req("POST", "/v1/sandboxes", NULL), 400, "no body: 400");
	is_int(req("GET", "/v1/sandboxes/sb-9", NULL), 404, "unknown: 404");
	is_str(js("error/message"), "no sandbox 'sb-9'", "names it");
	is_int(req("GET", "/v1/sandboxes/Bad_Id", NULL), 400, "bad id in path");

	/* ports */
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/8080", NULL), 201,
	    "publish 8080: 201");
	is_str(js("url"), "https://8080-sb-1.berth.localhost:8443/", "url");
	is_str(js("host_header"), "preserve", "default host_header");
	is_str(js("visibility"), "public", "default visibility");
	is_str(js("host"), "null", "no custom host");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/8080",
	    "{\"host_header\":\"upstream\"}"), 200, "update: 200");
	is_str(js("host_header"), "upstream", "host_header updated");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/8080",
	    "{\"visibility\":\"private\",\"host\":\"app.example.com\"}"), 200,
	    "set private + host");
	is_str(js("host_header"), "upstream", "omitted field kept");
	is_str(js("host"), "app.example.com", "custom host");
	is_str(js("urls/1"), "https://app.example.com:8443/", "custom URL");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/3000",
	    "{\"host\":\"app.example.com\"}"), 400, "host taken: 400");
	is_str(js("error/field"), "host", "400 names host");
	ok(strstr(js("error/message"), "a sandbox may not take another's host") !=
	    NULL, "...and the rule: %s", js("error/message"));
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/3000",
	    "{\"host\":\"x.berth.localhost\"}"), 400, "host under domain: 400");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/3000",
	    "{\"visibility\":\"secret\"}"), 400, "bad visibility: 400");
	is_str(js("error/field"), "visibility", "names visibility");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/3000",
	    "{\"host_header\":1}"), 400, "host_header not a string: 400");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/65536", NULL), 400,
	    "port 65536: 400");
	is_str(js("error/field"), "port", "names port");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/080", NULL), 400,
	    "port 080: 400");
	is_int(req("PUT", "/v1/sandboxes/sb-9/ports/80", NULL), 404,
	    "publish on unknown sandbox: 404");
	is_int(req("PUT", "/v1/sandboxes/sb-1/ports/3000", "{}"), 201,
	    "publish 3000");
	is_int(req("GET", "/v1/sandboxes/sb-1/ports", NULL), 200, "list ports");
	is_str(js("ports/0/port"), "3000", "ordered by port");
	is_str(js("ports/1/port"), "8080", "second port");
	is_int(req("GET", "/v1/sandboxes/sb-1/ports/8080", NULL), 200,
	    "get one port");
	is_str(js("visibility"), "private", "its visibility");
	is_int(req("GET", "/v1/sandboxes/sb-1", NULL), 200, "show sb-1");
	is_str(js("ports/1/url"), "https://8080-sb-1.berth.localhost:8443/",
	    "show includes ports");
	is_int(req("GET", "/v1/sandboxes/sb-9/ports", NULL), 404,
	    "ports of unknown: 404");
	is_int(req("DELETE", "/v1/sandboxes/sb-1/ports/3000", NULL), 204,
	    "unpublish: 204");
	is_int(req("DELETE", "/v1/sandboxes/sb-1/ports/3000", NULL), 404,
	    "unpublish again: 404");
	ok(strstr(js("error/message"), "not published") != NULL, "says not "
	    "published: %s", js("error/message"));
	is_int(req("GET", "/v1/ports", NULL), 200, "all ports");
	is_int((long long)json_array_size(json_object_get(last_json, "ports")),
	    1, "one port left");
	is_int(req("GET", "/v1/sandboxes/", NULL), 200, "trailing slash ok");
	is_int(req("GET", "/v1/health?x=1", NULL), 200, "query ignored");

	/* framing */
	memset(big, 'x', sizeof(big));
	snprintf(big, sizeof(big), "PUT /v1/sandboxes/sb-1/ports/1 HTTP/1.1\r\n"
	    "Host: x\r\nContent-Length: %d\r\n\r\n", 70 * 1024);
	r = raw(big, sizeof(big));
	ok(strncmp(r, "HTTP/1.1 413 ", 13) == 0 && strstr(r,
	    "payload_too_large") != NULL, "Content-Length over 64 KB: 413 JSON");
	{
		/* chunked body that grows past 64 KB */
		static char chunked[80 * 1024];
		size_t n = (size_t)snprintf(chunked, sizeof(chunked),
		    "PUT /v1/sandboxes/sb-1/ports/1 HTTP/1.1\r\nHost: x\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n");
		int i;

		for (i = 0; i < 17; i++) {
			n += (size_t)snprintf(chunked + n, sizeof(chunked) - n,
			    "1000\r\n");
			memset(chunked + n, ' ', 4096);
			n += 4096;
			n += (size_t)snprintf(chunked + n, sizeof(chunked) - n,
			    "\r\n");
		}
		r = raw(chunked, n);
		ok(strncmp(r, "HTTP/1.1 413 ", 13) == 0, "chunked body over "
		    "64 KB: 413");
	}
	r = raws("PUT /v1/sandboxes/sb-1/ports/4000 HTTP/1.1\r\nHost: x\r\n"
	    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	    "6\r\n{\"visi\r\n12\r\nbility\":\"private\"}\r\n0\r\n\r\n");
	ok(strncmp(r, "HTTP/1.1 201 ", 13) == 0 && strstr(r, "\"private\""),
	    "small chunked body accepted");
	r = raws("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	is_int(count(r, "HTTP/1.1 "), 3, "three pipelined answers");
	{
		char *p1 = strstr(r, "200 OK"), *p2 = strstr(r, "404 Not Found");

		ok(p1 && p2 && p1 < p2 && strstr(p2, "200 OK"),
		    "answered in order");
	}
	r = raws("GET /v1/health HTTP/1.1\r\nHost: x\r\nX: a\nb\r\n\r\n");
	ok(strncmp(r, "HTTP/1.1 400 ", 13) == 0 && strstr(r, "\"error\""),
	    "malformed head: 400 JSON");
	r = raws("HEAD /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "\r\n");
	ok(strncmp(r, "HTTP/1.1 200 ", 13) == 0 && strstr(r, "{") == NULL,
	    "HEAD has no body");
	/* http1.c's rules (the proxy's): refused with the JSON error */
	r = raws("GET /v1/health HTTP/1.1\r\n\r\n");
	ok(strncmp(r, "HTTP/1.1 400 ", 13) == 0 && strstr(r,
	    "missing Host header") != NULL && strstr(r, "Connection: close"),
	    "HTTP/1.1 without Host: 400 JSON, closed");
	r = raws("GET /v1/health HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n"
	    "\r\n");
	ok(strncmp(r, "HTTP/1.1 417 ", 13) == 0 && strstr(r,
	    "\"expectation_failed\"") != NULL, "unknown Expect: 417 JSON");
	r = raws("GET /v1/health HTTP/1.0\r\n\r\n");
	ok(strncmp(r, "HTTP/1.1 200 ", 13) == 0, "HTTP/1.0 without Host: 200");
	r = raws("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n\r\n"
	    "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	is_int(count(r, "HTTP/1.1 200 "), 2, "an empty line between "
	    "pipelined requests is skipped");

	/* netctl */
	is_int(run("status"), 0, "netctl status");
	ok(strstr(out, "berthd is up") != NULL, "status says up");
	is_int(run("sandbox add sb-2 --address 10.0.0.2"), 0, "netctl sandbox add");
	is_int(run("sandbox add sb-2 --address 10.0.0.2"), 1, "add again: exit 1");
	is_str(errout, "netctl: id: sandbox 'sb-2' already exists\n",
	    "one clear line");
	is_int(run("sandbox add Bad --address 10.0.0.2"), 2, "bad id: exit 2");
	if (!ok(strstr(errout, "invalid sandbox id 'Bad'") != NULL, "local check"))
		diag("%s", errout);
	is_int(run("sandbox add sb-3 --address 10.0.0"), 2, "bad ip: exit 2");
	/* no address: a VM-backed sandbox, which this server cannot make */
	is_int(run("sandbox add sb-3"), 1, "no address, no VMM: refused (exit 1)");
	ok(strstr(errout, "no VMM") != NULL, "says there is no VMM");
	is_int(run("port publish sb-2 8080"), 0, "netctl port publish");
	is_str(out, "https://8080-sb-2.berth.localhost:8443/\n", "prints the URL");
	is_int(run("port publish sb-2 3000 --host-header upstream --private "
	    "--host App.Example.ORG"), 0, "publish with options");
	is_int(run("port publish sb-2 65536"), 2, "bad port: exit 2");
	if (!ok(strstr(errout, "invalid port '65536'") != NULL, "says why"))
		diag("%s", errout);
	is_int(run("port publish sb-2 80 --host-header sideways"), 2,
	    "bad --host-header: exit 2");
	is_int(run("port publish sb-2 80 --address 1.2.3.4"), 2,
	    "option that does not apply: exit 2");
	is_int(run("port publish sb-9 80"), 1, "unknown sandbox: exit 1");
	is_str(errout, "netctl: no sandbox 'sb-9'\n", "API message");
	is_int(run("port ls sb-2"), 0, "netctl port ls sb-2");
	if (!ok(strstr(out, "SANDBOX") && strstr(out, "HOST-HEADER") &&
	    strstr(out, "upstream") && strstr(out, "app.example.org"),
	    "port table has its columns"))
		diag("%s", out);
	is_int(run("port ls"), 0, "netctl port ls");
	is_int(count(out, "\n"), 5, "header + 4 ports");
	is_int(run("--json port ls sb-2"), 0, "port ls --json");
	ok(out[0] == '{' && strstr(out, "\"ports\""), "prints JSON");
	is_int(run("sandbox ls"), 0, "sandbox ls");
	if (!ok(strstr(out, "ID") && strstr(out, "sb-1") && strstr(out, "sb-2"),
	    "lists both"))
		diag("%s", out);
	is_int(run("sandbox show sb-2"), 0, "sandbox show");
	ok(strstr(out, "10.0.0.2") && strstr(out, "3000"), "shows ports");
	is_int(run("port unpublish sb-2 3000"), 0, "unpublish");
	is_int(run("port unpublish sb-2 3000"), 1, "unpublish again: exit 1");
	is_int(run("sandbox rm sb-2"), 0, "sandbox rm");
	is_int(run("port ls sb-2"), 1, "its ports are gone with it");
	is_int(run("frobnicate"), 2, "unknown command: exit 2");
	is_int(run("port"), 2, "noun without verb: exit 2");
	is_int(run("port publish sb-1"), 2, "missing argument: exit 2");
	is_int(run("help port publish"), 0, "help port publish");
	ok(strstr(out, "--host-header") != NULL, "help shows options");
	is_int(run("--help"), 0, "--help");
	is_int(run("--bogus status"), 2, "unknown option: exit 2");

	is_int(req("GET", "/metrics", NULL), 200, "GET /metrics");
	ok(strstr(last.content_type, "version=0.0.4") != NULL,
	    "Prometheus content type");
	ok(strstr(last.body, "test_routes_changed 12\n") != NULL,
	    "routes_changed after each mutation (12)");
	ok(strstr(last.body, "berth_control_responses_total{class=\"4xx\"}") !=
	    NULL, "own counters");

	/* ---- tokens, scoping, egress, policy, events, pagination ---- */
	{
		char tok1[128], tok1id[32], toka[128], tokaid[32], old[128];
		char cmd[1024];
		json_t *rt;
		FILE *f;
		int i;

		is_int(req("POST", "/v1/sandboxes",
		    "{\"id\":\"t-1\",\"address\":\"127.0.0.1\"}"), 201,
		    "create t-1");
		ok(strncmp(js("token"), "berth_", 6) == 0 &&
		    strlen(js("token")) == 49, "create returns a token");
		snprintf(tok1, sizeof(tok1), "%s", js("token"));
		snprintf(tok1id, sizeof(tok1id), "%s", js("token_id"));
		is_int(req("POST", "/v1/sandboxes",
		    "{\"id\":\"t-2\",\"address\":\"127.0.0.2\"}"), 201,
		    "create t-2");
		is_int(req("POST", "/v1/tokens", "{\"admin\":true,"
		    "\"name\":\"ops\"}"), 201, "admin token");
		snprintf(toka, sizeof(toka), "%s", js("token"));
		snprintf(tokaid, sizeof(tokaid), "%s", js("id"));
		is_int(req("POST", "/v1/tokens", "{\"admin\":true,"
		    "\"sandbox\":\"t-1\"}"), 400, "admin and sandbox: 400");
		is_int(req("POST", "/v1/tokens", "{}"), 400, "neither: 400");
		is_int(req("POST", "/v1/tokens", "{\"sandbox\":\"nope\"}"),
		    404, "token for unknown sandbox: 404");
		is_int(req("GET", "/v1/tokens", NULL), 200, "list tokens");
		ok(strstr(last.body, "berth_") == NULL && strstr(last.body,
		    "sha256") == NULL, "no secrets or hashes listed");

		/* TCP: authentication */
		is_int(treq(NULL, "GET", "/v1/health", NULL), 401,
		    "TCP without token: 401");
		is_str(js("error/code"), "unauthenticated", "code");
		is_int(treq("berth_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		    "GET", "/v1/health", NULL), 401, "unknown token: 401");
		is_int(treq("nope", "GET", "/v1/health", NULL), 401,
		    "malformed token: 401");
		is_int(treq(toka, "GET", "/v1/sandboxes", NULL), 200,
		    "admin token over TCP");
		is_int(treq(toka, "PUT", "/v1/policy", "{\"deny\":"
		    "[\"10.0.0.0/8\",\"*.evil.example\"],\"max_mode\":"
		    "\"allowlist\"}"), 200, "admin sets policy");
		is_str(js("deny/1"), "*.evil.example", "policy stored");

		/* TCP: a sandbox token */
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-1", NULL), 200,
		    "sandbox token reads its sandbox");
		is_int(treq(tok1, "PUT", "/v1/sandboxes/t-1/ports/8080",
		    "{\"visibility\":\"private\"}"), 201,
		    "publishes on its sandbox");
		is_int(treq(tok1, "PUT", "/v1/sandboxes/t-2/ports/8080", NULL),
		    403, "refused on another sandbox");

		is_str(js("error/code"), "forbidden", "code forbidden");

		/* custom hosts: DNS names nobody else holds, under allowed
		 * suffixes (none here: only the admin token sets them) */
		{
			static const struct {
				const char *host, *rule;
			} refused[] = {
				{ "app.t1.example", "only the admin token" },
				{ "127.0.0.1", "is an IP address" },
				{ "10.1.2.3", "is an IP address" },
				{ "127.1", "is an IP address" },
				{ "app.example.123", "is an IP address" },
				{ "localhost", "localhost name" },
				{ "app.localhost", "localhost name" },
				{ "web-t-2.berth.localhost", "may only use <name>-t-1" },
				{ "8081-t-1.berth.localhost", "may only use <name>-t-1" },
				{ "a.web-t-1.berth.localhost", "may only use <name>-t-1" },
				{ "berth.localhost", "may only use <name>-t-1" },
			};
			char body[256];
			size_t k;

			for (k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
				snprintf(body, sizeof(body), "{\"host\":\"%s\"}",
				    refused[k].host);
				is_int(treq(tok1, "PUT", "/v1/sandboxes/t-1/ports/8081",
				    body), 400, "sandbox token, host %s: 400",
				    refused[k].host);
				if (!ok(strstr(js("error/message"), refused[k].rule) !=
				    NULL && strcmp(js("error/field"), "host") == 0,
				    "...names the rule: %s", refused[k].rule))
					diag("%s", js("error/message"));
			}
			is_int(treq(tok1, "PUT", "/v1/sandboxes/t-1/ports/8081",
			    "{\"host\":\"web-t-1.berth.localhost\"}"), 201,
			    "its own <name>-t-1 name under the domain: 201");
			is_int(treq(toka, "PUT", "/v1/sandboxes/t-2/ports/8081",
			    "{\"host\":\"app.t2.example\"}"), 201,
			    "the admin token passes the suffix rule");
			for (k = 1; k < 11; k++) {
				snprintf(body, sizeof(body), "{\"host\":\"%s\"}",
				    refused[k].host);
				is_int(treq(toka, "PUT", "/v1/sandboxes/t-1/ports/8082",
				    body), 400, "admin token, host %s: 400",
				    refused[k].host);
			}
			is_int(req("PUT", "/v1/sandboxes/t-2/ports/8082",
			    "{\"host\":\"web-t-1.berth.localhost\"}"), 400,
			    "unix socket: another sandbox's own name: 400");
			is_int(req("PUT", "/v1/sandboxes/t-1/ports/8081",
			    "{\"host\":null}"), 200, "custom host removed");
		}
		is_int(treq(tok1, "GET", "/v1/sandboxes", NULL), 403,
		    "refused the list");
		is_int(treq(tok1, "PUT", "/v1/policy", "{}"), 403,
		    "refused global policy");
		is_int(treq(tok1, "GET", "/v1/policy", NULL), 200,
		    "may read the policy");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/egress",
		    "{\"action\":\"allow\",\"rule\":\"Example.com:443/TCP\","
		    "\"ttl\":\"1h\"}"), 201, "allows a name");
		is_str(js("rule"), "example.com:443/tcp", "stored canonical");
		ok(json_is_integer(json_object_get(last_json, "expires")),
		    "with an expiry");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/egress",
		    "{\"action\":\"allow\",\"rule\":\"10.1.0.0/16\"}"), 403,
		    "cannot widen: overlaps global deny");
		is_str(js("error/field"), "rule", "names rule");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/egress",
		    "{\"action\":\"allow\",\"rule\":\"a.evil.example\"}"),
		    403, "cannot allow under a denied wildcard");
		is_int(treq(tok1, "PUT", "/v1/sandboxes/t-1/egress",
		    "{\"mode\":\"open\"}"), 403, "cannot widen the mode");
		is_int(treq(tok1, "PUT", "/v1/sandboxes/t-1/egress",
		    "{\"mode\":\"closed\"}"), 200, "may narrow the mode");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/egress",
		    "{\"action\":\"deny\",\"rule\":\"1.2.3.4/udp\"}"), 201,
		    "adds a deny rule");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/egress",
		    "{\"action\":\"allow\",\"rule\":\"10.1.2.0/16\"}"), 400,
		    "bad rule: 400");
		ok(strstr(js("error/message"), "host bits") != NULL,
		    "parser says why: %s", js("error/message"));
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/egress",
		    "{\"action\":\"allow\",\"rule\":\"x.org\",\"port\":1}"),
		    400, "unknown field: 400");
		is_str(js("error/field"), "port", "names it");
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-1/egress", NULL), 200,
		    "egress show");
		is_str(js("effective_mode"), "closed", "mode closed");
		is_str(js("rules/0/rule"), "example.com:443/tcp", "allow first");
		is_str(js("rules/1/action"), "deny", "then deny");
		is_int(treq(tok1, "DELETE",
		    "/v1/sandboxes/t-1/egress/deny/1.2.3.4%2Fudp", NULL), 204,
		    "removes one rule");
		is_int(treq(tok1, "DELETE",
		    "/v1/sandboxes/t-1/egress/deny/1.2.3.4%2Fudp", NULL), 404,
		    "again: 404");
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-1/egress/log", NULL),
		    200, "egress log");
		is_str(js("available"), "false", "no log without netctl");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/pause", "{}"), 409,
		    "pause of an external sandbox: 409");
		ok(strstr(js("error/message"), "not a VM-backed") != NULL,
		    "says why");
		is_int(treq(tok1, "POST", "/v1/sandboxes/t-1/suspend", "{}"),
		    403, "sandbox token may not suspend");
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-1/events", NULL), 200,
		    "events");
		is_str(js("events/0/operation"), "create", "create event");
		is_str(js("events/1/operation"), "pause", "pause attempt");
		is_str(js("events/1/result"), "refused", "refused");
		is_str(js("events/1/reason"), "not a VM-backed sandbox", "reason");
		is_int(treq(tok1, "DELETE", "/v1/sandboxes/t-1", NULL), 403,
		    "sandbox token may not delete");
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-2/events", NULL), 403,
		    "nor read another's events");

		/* routes for the workers */
		{
			char err2[256], hex[65];
			struct px_store *st2 = px_store_open(dir, err2,
			    sizeof(err2));
			json_t *tokens, *tk;
			size_t k;
			int found = 0, admin_found = 0;

			rt = st2 ? px_control_routes_json(st2, "berth.localhost",
			    err2, sizeof(err2)) : NULL;
			ok(rt != NULL, "routes JSON: %s", rt ? "" : err2);
			is_str(json_string_value(json_object_get(rt, "type")),
			    "routes", "type routes");
			tokens = json_object_get(json_object_get(rt, "routes"),
			    "tokens");
			px_token_hash_hex(tok1, strlen(tok1), hex);
			json_array_foreach(tokens, k, tk) {
				const char *h = json_string_value(
				    json_object_get(tk, "sha256"));

				if (h && strcmp(h, hex) == 0 && strcmp(
				    json_string_value(json_object_get(tk,
				    "sandbox")), "t-1") == 0)
					found = 1;
				if (json_is_null(json_object_get(tk, "sandbox")))
					admin_found = 1;
			}
			ok(found, "sandbox token hash with its sandbox");
			ok(admin_found, "admin token with sandbox null");
			json_decref(rt);
			px_store_close(st2);
		}

		/* rotation and revocation */
		snprintf(old, sizeof(old), "%s", tok1);
		snprintf(cmd, sizeof(cmd), "/v1/tokens/%s/rotate", tok1id);
		is_int(treq(tok1, "POST", cmd, "{}"), 200, "token rotates itself");
		snprintf(tok1, sizeof(tok1), "%s", js("token"));
		is_int(treq(old, "GET", "/v1/sandboxes/t-1", NULL), 401,
		    "old secret refused");
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-1", NULL), 200,
		    "new secret works");
		snprintf(cmd, sizeof(cmd), "/v1/tokens/%s", tok1id);
		is_int(treq(tok1, "DELETE", cmd, NULL), 403,
		    "sandbox token cannot revoke");
		is_int(req("DELETE", cmd, NULL), 204, "admin revokes");
		is_int(treq(tok1, "GET", "/v1/sandboxes/t-1", NULL), 401,
		    "revoked token refused");
		is_int(req("DELETE", cmd, NULL), 404, "revoke again: 404");

		/* pagination */
		for (i = 0; i < 5; i++) {
			snprintf(cmd, sizeof(cmd), "{\"id\":\"p-%d\",\"address\":"
			    "\"10.9.0.%d\"}", i, i + 1);
			req("POST", "/v1/sandboxes", cmd);
		}
		is_int(req("GET", "/v1/sandboxes?limit=2", NULL), 200, "page 1");
		is_int((long long)json_array_size(json_object_get(last_json,
		    "sandboxes")), 2, "two rows");
		snprintf(cmd, sizeof(cmd), "/v1/sandboxes?limit=2&after=%s",
		    js("next"));
		is_int(req("GET", cmd, NULL), 200, "page 2");
		is_str(js("sandboxes/0/id"), "p-2", "continues after the cursor");
		is_int(req("GET", "/v1/sandboxes?limit=0", NULL), 400,
		    "limit 0: 400");
		is_str(js("error/field"), "limit", "names limit");
		is_int(run("sandbox ls"), 0, "netctl follows pages");

		/* netctl over TCP and the new nouns */
		snprintf(cmd, sizeof(cmd), "--url %s --token %s status", tcp_url,
		    toka);
		is_int(run(cmd), 0, "netctl --url --token status");
		snprintf(cmd, sizeof(cmd), "--url %s --token %s status", tcp_url,
		    old);
		is_int(run(cmd), 4, "bad token: exit 4");
		is_int(run("--url http://127.0.0.1:1 status"), 2,
		    "--url without token: exit 2");
		is_int(run("egress allow t-2 github.com:443 '*.npmjs.org' "
		    "--ttl 10m"), 0, "netctl egress allow");
		is_int(run("egress show t-2"), 0, "netctl egress show");
		ok(strstr(out, "github.com:443") && strstr(out, "*.npmjs.org"),
		    "shows rules");
		is_int(run("egress allow t-2 10.0.0.1"), 4,
		    "outside policy: exit 4");
		is_int(run("egress rm t-2 allow github.com:443"), 0, "egress rm");
		is_int(run("egress mode t-2 closed"), 0, "egress mode");
		is_int(run("egress reset t-2"), 0, "egress reset");
		is_int(run("egress log t-2"), 0, "egress log");
		is_int(run("sandbox pause t-2"), 1, "pause external: exit 1");
		is_int(run("sandbox events t-2"), 0, "sandbox events");
		ok(strstr(out, "refused") != NULL, "lists the refusal");
		is_int(run("policy show"), 0, "policy show");
		ok(strstr(out, "10.0.0.0/8") != NULL, "shows deny");
		is_int(run("policy set --max-mode wide"), 1, "bad mode: exit 1");
		is_int(run("policy set --allow ''"), 0, "policy set");
		is_int(run("token create --sandbox t-2 --name ci"), 0,
		    "token create");
		ok(strncmp(out, "berth_", 6) == 0, "prints the token");
		is_int(run("token create"), 2, "needs a scope: exit 2");
		is_int(run("token ls"), 0, "token ls");
		ok(strstr(out, "ci") && strstr(out, "admin"), "lists them");
		is_int(run("help egress allow"), 0, "help egress allow");

		/* MCP over stdio, with the admin socket */
		snprintf(cmd, sizeof(cmd), "printf '%%s\n' "
		    "'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
		    "\"params\":{\"protocolVersion\":\"2024-11-05\"}}' "
		    "'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
		    "initialized\"}' "
		    "'{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}' "
		    "'{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
		    "\"params\":{\"name\":\"publish_port\",\"arguments\":"
		    "{\"port\":5000}}}' "
		    "'{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
		    "\"params\":{\"name\":\"pause\",\"arguments\":{}}}' "
		    "'{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"nope\"}' "
		    "| BERTH_STATE_DIR= '%s' -s '%s' mcp --sandbox t-2 >'%s/mcp'",
		    netctl, dir, dir);
		ok(system(cmd) == 0, "netctl mcp runs");
		snprintf(cmd, sizeof(cmd), "%s/mcp", dir);
		if ((f = fopen(cmd, "r")) != NULL) {
			char line[16384];
			int nl = 0;

			while (fgets(line, sizeof(line), f) != NULL) {
				nl++;
				if (nl == 1)
					ok(strstr(line, "\"protocolVersion\"") &&
					    strstr(line, "\"id\":1"), "initialize");
				if (nl == 2)
					ok(strstr(line, "publish_port") &&
					    strstr(line, "egress_log") &&
					    strstr(line, "inputSchema"),
					    "tools/list has the tools");
				if (nl == 3)
					ok(strstr(line, "https://5000-t-2.berth."
					    "localhost:8443/") && strstr(line,
					    "\"isError\":false"),
					    "publish_port returns the URL");
				if (nl == 4)
					ok(strstr(line, "\"isError\":true") &&
					    strstr(line, "VM-backed"),
					    "pause reports the refusal");
				if (nl == 5)
					ok(strstr(line, "-32601") != NULL,
					    "unknown method: -32601");
			}
			fclose(f);
			is_int(nl, 5, "five answers (none for the notification)");
		}
	}

	/* state survives the server */
	stop_child();
	ok(stat(sock, &st) == -1 && errno == ENOENT, "socket removed on free");
	is_int(run("status"), 3, "netctl without berthd: exit 3");
	if (!ok(strstr(errout, "cannot connect to berthd at ") != NULL, "says so"))
		diag("%s", errout);
	if (ok(start_child() == 0, "server restarts")) {
		is_int(req("GET", "/v1/sandboxes/sb-1/ports/8080", NULL), 200,
		    "port survives restart");
		is_str(js("host"), "app.example.com", "with its custom host");
	}
	/*
	 * VM mode: the same store served by a berthd whose VMs are the
	 * fakes above: sizes and their maxima, idle limits, templates,
	 * start / stop / restart, and --json of the new verbs.
	 */
	stop_child();
	vm_mode = 1;
	if (ok(start_child() == 0, "server starts with (fake) VMs")) {
		json_t *j;
		char tdir[256], cmd[600];

		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-1\","
		    "\"memory_mib\":512,\"vcpus\":2}"), 201, "create vm-1 512 MiB, "
		    "2 vCPUs");
		is_str(js("memory_mib"), "512", "memory_mib");
		is_str(js("vcpus"), "2", "vcpus");
		is_str(js("disk_mib"), "512", "disk_mib: vm_disk");
		is_str(js("template"), "default", "template: default");
		is_str(js("idle_pause"), "null", "idle_pause: berth.conf's");
		is_str(js("effective_idle_pause"), "5m", "... which is 5m");
		is_str(js("effective_idle_suspend"), "1h", "idle_suspend 1h");
		is_str(js("effective_max_lifetime"), "never", "no lifetime");
		ok(vmlog_has("create vm-1 512 2 512 default - 0 0 0"),
		    "the VM gets what was asked for");
		is_int(req("GET", "/v1/sandboxes/vm-1", NULL), 200, "show vm-1");
		is_str(js("state"), "running", "running");
		is_str(js("memory_mib"), "512", "memory_mib stored");

		/* streamed files and exec (fake guest above) */
		{
			static char pbuf[204800], reqbuf[205000];
			struct cli_target tg = { sock, NULL, NULL, NULL };
			struct cli_stream *s;
			struct cli_stream_resp *sr = NULL;
			char e2[256], *resp;
			int cf, k, n;
			size_t i;

			memset(pbuf, 'x', sizeof(pbuf));
			s = cli_stream_open(&tg, "PUT",
			    "/v1/sandboxes/vm-1/files?path=/tmp/f&mode=0600",
			    "application/octet-stream", sizeof(pbuf), &cf, e2,
			    sizeof(e2));
			ok(s != NULL, "streamed PUT: connected");
			k = 0;
			if (s != NULL) {
				cli_stream_write(s, pbuf, sizeof(pbuf));
				for (i = 0; i < 20000 && k == 0; i++) {
					if (cli_stream_flush(s, e2, sizeof(e2)) < 0)
						break;
					k = cli_stream_recv(s, &sr, e2, sizeof(e2));
					if (k == 0)
						usleep(1000);
				}
				is_int(k == 1 ? sr->status : -1, 200,
				    "PUT of 200 KiB (over the 64 KiB body limit): 200");
				ok(k == 1 && sr->len > 0 && memmem(sr->body, sr->len,
				    "\"size\":204800", 12) != NULL, "... its size");
				ok(k == 1 && sr->wake_ms == 7, "... Berth-Wake-Ms");
				cli_stream_close(s);
			}
			ok(vmlog_has("put /tmp/f 600 204800"),
			    "the guest got all of it, mode 0600");
			/* whole, then a half close: the answer still comes */
			n = snprintf(reqbuf, sizeof(reqbuf), "PUT /v1/sandboxes/vm-1/"
			    "files?path=/tmp/g HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 5\r\n\r\nhello");
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
			    strstr(resp, "\"mode\":\"0644\"") != NULL,
			    "PUT then a half close: answered (mode 0644)");
			ok(vmlog_has("put /tmp/g 644 5"), "... 5 bytes");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/tmp/f",
			    NULL), 200, "GET: 200");
			ok(last.len == 300000 && last.body[0] == 'a' &&
			    last.body[299999] == 'c', "GET: the bytes, streamed");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/missing",
			    NULL), 404, "GET of an absent file: 404");
			is_str(js("error/message"), "no file /missing in the guest",
			    "... saying so");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=rel",
			    NULL), 400, "a relative path: 400");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/x&mode=99",
			    NULL), 400, "a mode not octal: 400");
			is_int(req("PATCH", "/v1/sandboxes/vm-1/files?path=/x",
			    NULL), 405, "PATCH: 405");
			/* ranged reads, listing, mkdir, remove, move, watch */
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/tmp/f"
			    "&offset=5&length=10", NULL), 200, "GET of a range: "
			    "200");
			ok(vmlog_has("get /tmp/f from 5 for 10"), "... the range "
			    "goes to the guest");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/tmp/f"
			    "&offset=-1", NULL), 400, "a negative offset: 400");
			is_str(js("error/field"), "offset", "... naming offset");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/tmp/f"
			    "&length=1x", NULL), 400, "a length not a number: 400");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/d&list=1",
			    NULL), 200, "list /d: 200");
			ok(vmlog_has("list /d 10000"), "... at most 10000 entries "
			    "by default");
			is_str(js("entries/0/name_base64"), "Yf8=", "... by name: "
			    "'a\\xff' first, as base64 (not UTF-8)");
			is_str(js("entries/0/type"), "dir", "... a directory");
			is_str(js("entries/1/name"), "b", "... then b");
			is_str(js("entries/1/mode"), "0644", "... mode 0644");
			is_str(js("entries/1/size"), "3", "... 3 bytes");
			is_str(js("entries/1/mtime"), "2023-11-14T22:13:20.123Z",
			    "... mtime in UTC, with ms");
			is_str(js("entries/2/type"), "link", "... c a link");
			is_str(js("truncated"), "false", "... not truncated");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/d&list=1"
			    "&limit=2", NULL), 200, "list /d, limit 2: 200");
			is_str(js("truncated"), "true", "... truncated");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/d&list=1"
			    "&limit=0", NULL), 400, "limit 0: 400");
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/d&list=2",
			    NULL), 400, "list=2: 400");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/mkdir",
			    "{\"path\":\"/n/m\",\"parents\":true,\"mode\":"
			    "\"0700\"}"), 200, "mkdir: 200");
			ok(vmlog_has("mkdir /n/m 700 1"), "... path, mode, parents "
			    "to the guest");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/mkdir",
			    "{\"path\":\"/exists\"}"), 409, "mkdir of what "
			    "exists: the guest's 409");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/mkdir",
			    "{\"path\":\"/n\",\"mode\":\"999\"}"), 400,
			    "mkdir, mode 999: 400");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/mkdir",
			    "{\"path\":\"n\"}"), 400, "mkdir of a relative path: "
			    "400");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/mkdir",
			    "{\"path\":\"/n\",\"parent\":true}"), 400,
			    "mkdir with an unknown field: 400");
			is_int(req("GET", "/v1/sandboxes/vm-1/files/mkdir", NULL),
			    405, "GET of files/mkdir: 405");
			is_int(req("DELETE", "/v1/sandboxes/vm-1/files?path=/n&"
			    "recursive=1", NULL), 200, "DELETE recursive: 200");
			ok(vmlog_has("remove /n 1"), "... recursive to the guest");
			is_int(req("DELETE", "/v1/sandboxes/vm-1/files?path=//",
			    NULL), 400, "DELETE of //: 400");
			is_int(req("DELETE", "/v1/sandboxes/vm-1/files?path=/x%FF",
			    NULL), 200, "DELETE of a path not UTF-8: 200");
			is_str(js("path_base64"), "L3j/", "... its path as base64");
			{
				char t[13000], *q;
				int k2;

				q = t + snprintf(t, sizeof(t), "/v1/sandboxes/vm-1/"
				    "files?path=/");
				for (k2 = 0; k2 < 700; k2++)	/* 1401 bytes */
					q += snprintf(q, 7, "%%C3%%A9");
				is_int(req("DELETE", t, NULL), 200, "a path of 1401 "
				    "bytes, 4201 encoded: 200");
				q = t + snprintf(t, sizeof(t), "/v1/sandboxes/vm-1/"
				    "files?path=/");
				memset(q, 'a', 4096);	/* 4097 bytes */
				q[4096] = '\0';
				is_int(req("DELETE", t, NULL), 400, "a path of 4097 "
				    "bytes: 400");
				is_str(js("error/message"), "?path= is longer than "
				    "4096 bytes", "... saying so");
			}
			is_int(req("GET", "/v1/sandboxes/vm-1/files?path=/tmp/f"
			    "&length=0", NULL), 200, "GET of length 0: 200");
			ok(vmlog_has("get /tmp/f from 0 for 0"), "... length 0 "
			    "goes to the guest (no bytes), not the whole file");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/move",
			    "{\"from\":\"/a\",\"to\":\"/b\"}"), 200,
			    "move: 200");
			ok(vmlog_has("move /a /b 0"), "... no overwrite unless "
			    "asked");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/move",
			    "{\"from\":\"/a\",\"to\":\"/exists\"}"), 409,
			    "move onto what exists: the guest's 409");
			is_int(req("POST", "/v1/sandboxes/vm-1/files/move",
			    "{\"from\":\"/a\",\"to\":\"/b\",\"overwrite\":1}"),
			    400, "overwrite not a boolean: 400");
			is_int(req("GET", "/v1/sandboxes/vm-1/watch?path=/w&"
			    "recursive=1", NULL), 200, "watch: 200");
			ok(vmlog_has("watch /w 1"), "... recursive to the guest");
			ok(last.len > 0 && strstr(last.body, "{\"event\":\"ready\","
			    "\"path\":\"/w\"}\n") == last.body, "... first line: "
			    "ready");
			ok(strstr(last.body, "{\"event\":\"create\",\"path_base64"
			    "\":\"L3cvbv8=\",\"dir\":false}\n") != NULL,
			    "... a path not UTF-8 as base64");
			ok(strstr(last.body, "\"event\":\"move_from\",\"path\":"
			    "\"/w/a\",\"dir\":false,\"cookie\":7}") != NULL,
			    "... a move with its cookie");
			ok(strstr(last.body, "{\"event\":\"overflow\",\"path\":"
			    "\"/w\"}\n") != NULL, "... an overflow, said");
			is_int(req("GET", "/v1/sandboxes/vm-1/watch", NULL), 400,
			    "watch without a path: 400");
			/* a process's attach: J, stdin, EOF (detach) */
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/processes/3/attach HTTP/1.1\r\nHost: x\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n"
			    "%x\r\n%c%c%c%c%s\r\n" "a\r\n%c%c%c%cIhello\r\n"
			    "5\r\n%c%c%c%cI\r\n0\r\n\r\n",
			    (unsigned)(5 + strlen("{\"rows\":30,\"cols\":100}")),
			    0, 0, 0, (int)strlen("{\"rows\":30,\"cols\":100}"),
			    "J{\"rows\":30,\"cols\":100}", 0, 0, 0, 5, 0, 0, 0, 0);
			memset(resp, 0, 65536);
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
			    strstr(resp, "application/vnd.berth.exec-stream") != NULL,
			    "attach to process 3: 200, the exec framing");
			ok(vmlog_has("attach 3 30x100 from 0"), "... its size to "
			    "the guest");
			ok(memmem(resp, 65536, "Ohello", 6) != NULL,
			    "... its input goes to the terminal");
			ok(memmem(resp, 65536, "X{\"process\":3,\"state\":"
			    "\"running\"", 30) != NULL && memmem(resp, 65536,
			    "\"detached\":true", 15) != NULL, "... the body's end "
			    "detaches: X says the process runs on");
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/processes/3/attach HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: %d\r\n\r\n%c%c%c%c%s",
			    (int)(5 + strlen("{\"rows\":0,\"cols\":1}")), 0, 0, 0,
			    (int)strlen("{\"rows\":0,\"cols\":1}"),
			    "J{\"rows\":0,\"cols\":1}");
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 400", 12) == 0 &&
			    strstr(resp, "\"rows\"") != NULL, "attach with rows 0: "
			    "400 naming rows");
			is_int(req("GET", "/v1/sandboxes/vm-1/processes/3/attach",
			    NULL), 405, "GET of attach: 405");
			/* exec?stream=1: J, stdin, EOF; O back, then X */
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/exec?stream=1 HTTP/1.1\r\nHost: x\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n"
			    "%x\r\n%c%c%c%c%s\r\n" "a\r\n%c%c%c%cIhello\r\n"
			    "5\r\n%c%c%c%cI\r\n0\r\n\r\n",
			    (unsigned)(5 + strlen("{\"argv\":[\"cat\"]}")), 0, 0, 0,
			    (int)strlen("{\"argv\":[\"cat\"]}"), "J{\"argv\":[\"cat\"]}",
			    0, 0, 0, 5, 0, 0, 0, 0);
			memset(resp, 0, 65536);	/* raw()'s buffer */
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
			    strstr(resp, "application/vnd.berth.exec-stream") != NULL,
			    "streamed exec: 200, its framing");
			ok(memmem(resp, 65536, "Ohello", 6) != NULL,
			    "... stdin echoed back as it came ('O')");
			ok(memmem(resp, 65536, "X{\"exit_code\":0", 15) != NULL,
			    "... ends with its X frame");
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/exec?stream=1 HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 6\r\n\r\n%c%c%c%cIx", 0, 0, 0, 1);
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 400", 12) == 0 &&
			    strstr(resp, "starts with its 'J' frame") != NULL,
			    "streamed exec without its J frame: 400");
			/* its chunked body broken after J: cut, not answered
			 * twice, and the command is dropped */
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/exec?stream=1 HTTP/1.1\r\nHost: x\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n"
			    "%x\r\n%c%c%c%c%s\r\nzz\r\n",
			    (unsigned)(5 + strlen("{\"argv\":[\"cat\"]}")), 0, 0, 0,
			    (int)strlen("{\"argv\":[\"cat\"]}"),
			    "J{\"argv\":[\"cat\"]}");
			memset(resp, 0, 65536);
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
			    memmem(resp, 65536, "HTTP/1.1 400", 12) == NULL,
			    "a broken chunk after the answer began: cut, no "
			    "second answer");
			ok(vmlog_has("cancel "), "... the command dropped");
			is_int(req("GET", "/v1/health", NULL), 200,
			    "... and the server goes on");
			/*
			 * A frame the stream refuses once its answer began and
			 * was all written (nothing left to flush): cs_bad ends
			 * the connection from inside the parser's body callback.
			 * The connection must outlive that callback (under ASan
			 * a free there is a heap-use-after-free in
			 * http_parser_execute, and the server dies).
			 */
			k = vmlog_count("cancel ");
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/exec?stream=1 HTTP/1.1\r\nHost: x\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n"
			    "%x\r\n%c%c%c%c%s\r\n",
			    (unsigned)(5 + strlen("{\"argv\":[\"cat\"]}")), 0, 0, 0,
			    (int)strlen("{\"argv\":[\"cat\"]}"),
			    "J{\"argv\":[\"cat\"]}");
			/* a 'Z' frame, then the body's end and a pipelined
			 * request: read by nobody */
			{
				static const char bad[] = "5\r\n\0\0\0\0Z\r\n"
				    "0\r\n\r\nGET /v1/health HTTP/1.1\r\n"
				    "Host: x\r\n\r\n";

				resp = raw_after(reqbuf, (size_t)n, "\r\n\r\n",
				    bad, sizeof(bad) - 1);
			}
			ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
			    count(resp, "HTTP/1.1 ") == 1,
			    "a bad frame after the answer was written: cut, "
			    "nothing more answered");
			is_int(vmlog_count("cancel "), k + 1,
			    "... the command dropped");
			is_int(req("GET", "/v1/health", NULL), 200,
			    "... and the server goes on");
			/* the same with a Content-Length body */
			k = vmlog_count("cancel ");
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "vm-1/exec?stream=1 HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 1000\r\n\r\n%c%c%c%c%s", 0, 0, 0,
			    (int)strlen("{\"argv\":[\"cat\"]}"),
			    "J{\"argv\":[\"cat\"]}");
			{
				static const char bad[] = "\0\0\0\0Zmore bytes";

				resp = raw_after(reqbuf, (size_t)n, "\r\n\r\n",
				    bad, sizeof(bad) - 1);
			}
			ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 &&
			    count(resp, "HTTP/1.1 ") == 1,
			    "... as a Content-Length body: cut");
			is_int(vmlog_count("cancel "), k + 1,
			    "... the command dropped");
			is_int(req("GET", "/v1/health", NULL), 200,
			    "... and the server goes on");
			n = snprintf(reqbuf, sizeof(reqbuf), "POST /v1/sandboxes/"
			    "nope/exec?stream=1 HTTP/1.1\r\nHost: x\r\n"
			    "Content-Length: 0\r\n\r\n");
			resp = raw(reqbuf, (size_t)n);
			ok(strncmp(resp, "HTTP/1.1 404", 12) == 0,
			    "streamed exec of an unknown sandbox: 404");
		}

		/* custom_host_suffix apps.example.com, dev.example.org */
		is_int(req("POST", "/v1/tokens", "{\"sandbox\":\"t-1\"}"), 201,
		    "a token for t-1");
		snprintf(cmd, sizeof(cmd), "%s", js("token"));
		is_int(treq(cmd, "PUT", "/v1/sandboxes/t-1/ports/9001",
		    "{\"host\":\"a.apps.example.com\"}"), 201,
		    "sandbox token: a name under an allowed suffix");
		is_int(treq(cmd, "PUT", "/v1/sandboxes/t-1/ports/9002",
		    "{\"host\":\"x.y.dev.example.org\"}"), 201,
		    "...under the second suffix, two labels down");
		is_int(treq(cmd, "PUT", "/v1/sandboxes/t-1/ports/9003",
		    "{\"host\":\"apps.example.com\"}"), 400,
		    "the suffix itself: 400");
		is_int(treq(cmd, "PUT", "/v1/sandboxes/t-1/ports/9003",
		    "{\"host\":\"evilapps.example.com\"}"), 400,
		    "not at a label boundary: 400");
		if (!ok(strstr(js("error/message"), "not under a suffix ops allow "
		    "for custom hosts (custom_host_suffix): *.apps.example.com, "
		    "*.dev.example.org") != NULL, "names the suffixes"))
			diag("%s", js("error/message"));
		is_int(treq(cmd, "PUT", "/v1/sandboxes/t-1/ports/9003",
		    "{\"host\":\"127.0.0.1\"}"), 400, "an address still: 400");
		is_int(req("PUT", "/v1/sandboxes/t-2/ports/9001",
		    "{\"host\":\"b.apps.example.com\"}"), 201, "t-2 holds b.apps");
		is_int(treq(cmd, "PUT", "/v1/sandboxes/t-1/ports/9003",
		    "{\"host\":\"b.apps.example.com\"}"), 400,
		    "a name another sandbox holds: 400");
		ok(strstr(js("error/message"), "is held by another sandbox") != NULL &&
		    strstr(js("error/message"), "t-2") == NULL,
		    "...says so without naming it: %s", js("error/message"));

		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"memory_mib\":99999}"), 400, "memory above the maximum: 400");
		is_str(js("error/field"), "memory_mib", "names memory_mib");
		if (!ok(strstr(js("error/message"), "99999 MiB is above the "
		    "host's maximum of 1024 MiB (vm_max_memory") != NULL,
		    "says the maximum and its directive"))
			diag("%s", js("error/message"));
		is_int(req("GET", "/v1/sandboxes/vm-2", NULL), 404,
		    "nothing stored");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"memory_mib\":32}"), 400, "memory below 64 MiB: 400");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"vcpus\":3}"), 400, "vcpus above the maximum: 400");
		ok(strstr(js("error/message"), "vm_max_vcpus") != NULL,
		    "names vm_max_vcpus");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"vcpus\":0}"), 400, "0 vcpus: 400");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"disk_mib\":5000}"), 400, "disk above the maximum: 400");
		ok(strstr(js("error/message"), "vm_max_disk") != NULL,
		    "names vm_max_disk");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"disk_mib\":\"big\"}"), 400, "disk not a number: 400");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"address\":\"10.0.0.9\",\"vcpus\":1}"), 400,
		    "vcpus of an external sandbox: 400");
		is_str(js("error/field"), "vcpus", "names vcpus");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"template\":\"nope\"}"), 400, "unknown template: 400");
		ok(strstr(js("error/message"), "no template 'nope'") != NULL,
		    "says so");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"idle_pause\":\"5x\"}"), 400, "bad duration: 400");
		is_str(js("error/field"), "idle_pause", "names idle_pause");
		is_int(req("POST", "/v1/sandboxes", "{\"id\":\"vm-2\","
		    "\"max_lifetime\":\"0s\"}"), 400, "zero lifetime: 400");
		is_int(req("GET", "/v1/sandboxes/vm-2", NULL), 404,
		    "still nothing stored");

		/* netctl: options, local checks, the API's words */
		is_int(run("sandbox create vm-3 --memory 99999"), 1,
		    "create --memory 99999: exit 1");
		if (!ok(strstr(errout, "--memory: 99999 MiB is above the host's "
		    "maximum of 1024 MiB (vm_max_memory in berth.conf)") != NULL,
		    "names the option, the maximum and the directive"))
			diag("%s", errout);
		is_int(run("sandbox create vm-3 --memory lots"), 2,
		    "--memory lots: exit 2");
		is_int(run("sandbox create vm-3 --idle-pause soon"), 2,
		    "--idle-pause soon: exit 2");
		is_int(run("sandbox create vm-3 --address 10.0.0.3 --memory 512"),
		    2, "--memory with --address: exit 2");
		is_int(run("sandbox create vm-3 --memory 512 --vcpus 2 --disk 1024 "
		    "--idle-pause 10m --idle-suspend never --max-lifetime 1d"), 0,
		    "create vm-3 with every option");
		ok(strstr(out, "sandbox vm-3 created (10.9.0.2, running)") != NULL,
		    "says it runs");
		ok(vmlog_has("create vm-3 512 2 1024 default - 600000 "
		    "18446744073709551615 86400000"), "... with what was asked");
		is_int(run("sandbox show vm-3"), 0, "show vm-3");
		ok(strstr(out, "resources: 512 MiB, 2 vCPUs, disk 1024 MiB") !=
		    NULL, "shows its resources");
		ok(strstr(out, "idle-pause:    10m\n") != NULL, "and idle-pause");
		ok(strstr(out, "idle-suspend:  never\n") != NULL,
		    "and idle-suspend");

		is_int(run("--json sandbox create vm-4 --memory 256"), 0,
		    "--json sandbox create");
		if (ok((j = one_doc("create")) != NULL, "... prints one document")) {
			is_str(jget(j, "state"), "running", "... which says running");
			ok(strncmp(jget(j, "token"), "berth_", 6) == 0,
			    "... and has the token");
		}
		json_decref(j);

		/* sandbox set */
		is_int(run("sandbox set vm-3 --idle-pause 2m"), 0, "set --idle-pause");
		ok(vmlog_has("idle vm-3 120000 18446744073709551615 86400000"),
		    "the VM's limits follow, the others kept");
		is_int(run("--json sandbox set vm-3 --max-lifetime default"), 0,
		    "set --max-lifetime default");
		if ((j = one_doc("set")) != NULL) {
			is_str(jget(j, "idle_pause"), "2m", "idle_pause 2m");
			ok(json_is_null(json_object_get(j, "max_lifetime")),
			    "max_lifetime null again");
			is_str(jget(j, "effective_max_lifetime"), "never",
			    "... which is never");
		}
		json_decref(j);
		is_int(run("sandbox set vm-3"), 2, "set without options: exit 2");
		is_int(run("sandbox set sb-1 --idle-pause 1m"), 1,
		    "set of an external sandbox: exit 1");
		is_int(req("PATCH", "/v1/sandboxes/vm-3", "{\"vcpus\":1}"), 400,
		    "PATCH of vcpus: 400");
		/* every row of the field table is in a microVM sandbox's
		 * document; an external one has only those not PF_VM */
		{
			size_t k;
			int miss = 0, extra = 0;

			is_int(req("GET", "/v1/sandboxes/vm-3", NULL), 200,
			    "show vm-3");
			for (k = 0; k < px_nsbfields; k++)
				if (json_object_get(last_json, px_sbfields[k].api) ==
				    NULL) {
					diag("vm-3 has no %s", px_sbfields[k].api);
					miss++;
				}
			is_int(req("GET", "/v1/sandboxes/sb-1", NULL), 200,
			    "show sb-1 (external)");
			for (k = 0; k < px_nsbfields; k++)
				if ((json_object_get(last_json, px_sbfields[k].api) !=
				    NULL) != !(px_sbfields[k].flags & PF_VM)) {
					diag("sb-1 and %s", px_sbfields[k].api);
					extra++;
				}
			is_int(miss, 0, "each field of the table in a microVM's "
			    "document (%zu)", px_nsbfields);
			is_int(extra, 0, "an external one's: the fields not "
			    "microVM-only, no more");
		}
		/* a sandbox's env (sbfield.h's row "env"): stored, shown,
		 * under every command's own */
		is_int(req("PATCH", "/v1/sandboxes/vm-3", "{\"env\":{\"A\":"
		    "\"1\",\"B\":\"x y\"}}"), 200, "PATCH env");
		is_str(js("env/B"), "x y", "env shown");
		is_str(js("idle_pause"), "2m", "the idle limits kept");
		is_int(req("POST", "/v1/sandboxes/vm-3/exec", "{\"argv\":[\"env\"],"
		    "\"env\":{\"A\":\"2\"}}"), 409, "exec (no guest here)");
		ok(vmlog_has("exec vm-3 env B=x y A=2"), "the command got the "
		    "sandbox's B and its own A");
		is_int(req("PATCH", "/v1/sandboxes/vm-3", "{\"env\":{\"1A\":"
		    "\"1\"}}"), 400, "PATCH env with a bad name: 400");
		is_str(js("error/field"), "env", "... names env");
		is_int(req("PATCH", "/v1/sandboxes/vm-3", "{\"env\":[1]}"), 400,
		    "PATCH env not an object: 400");
		is_int(req("GET", "/v1/sandboxes/vm-3", NULL), 200, "show vm-3");
		is_str(js("env/A"), "1", "a refused PATCH changed nothing");
		is_int(req("PATCH", "/v1/sandboxes/vm-3", "{\"env\":null}"), 200,
		    "PATCH env null clears it");
		ok(json_object_size(json_object_get(last_json, "env")) == 0,
		    "env {} again");
		is_int(req("POST", "/v1/sandboxes/vm-3/exec", "{\"argv\":[\"env\"]}"),
		    409, "exec again");
		ok(vmlog_has("exec vm-3 env\n"), "no env now");
		/* ... and through netctl, whose flags come from the same rows */
		is_int(run("sandbox set vm-3 --env A=1 --env B=two"), 0,
		    "netctl sandbox set --env");
		ok(strstr(out, "env:           A=1 B=two") != NULL,
		    "netctl shows the env");
		is_int(run("--json sandbox show vm-3"), 0, "--json show");
		if ((j = one_doc("show")) != NULL)
			is_str(json_string_value(json_object_get(json_object_get(j,
			    "env"), "B")), "two", "env B read back");
		json_decref(j);
		is_int(run("sandbox set vm-3 --env -"), 0, "netctl sandbox set "
		    "--env - clears it");
		ok(strstr(out, "env:") == NULL, "no env shown");
		is_int(run("sandbox set vm-3 --env nope"), 2, "--env without = : "
		    "exit 2");
		is_int(run("sandbox set vm-3"), 2, "nothing to set: exit 2");
		ok(strstr(errout, "--idle-pause, --idle-suspend, --max-lifetime, "
		    "--env") != NULL, "the settable flags named (from the table)");
		is_int(run("sandbox create ext-1 --address 10.9.9.9 --env A=1"), 2,
		    "--env on an external sandbox: exit 2");
		ok(strstr(errout, "--env apply to a microVM sandbox") != NULL,
		    "says --env is a microVM's");
		is_int(req("PATCH", "/v1/sandboxes/nope", "{\"idle_pause\":"
		    "\"1m\"}"), 404, "PATCH of an unknown sandbox: 404");
		is_int(req("GET", "/v1/sandboxes/vm-3/events", NULL), 200,
		    "events of vm-3");
		ok(strstr(last.body, "\"operation\":\"set\"") != NULL,
		    "set is an event");

		/* templates */
		snprintf(tdir, sizeof(tdir), "%s/tpl-a", dir);
		mkdir(tdir, 0755);
		snprintf(cmd, sizeof(cmd), "%s/template.json", tdir);
		close(open(cmd, O_WRONLY | O_CREAT, 0644));
		snprintf(cmd, sizeof(cmd), "template add tpl-a %s", tdir);
		is_int(run(cmd), 0, "template add");
		snprintf(cmd, sizeof(cmd), "template add tpl-b %s/missing", dir);
		is_int(run(cmd), 1, "template add of a dir without template.json");
		ok(strstr(errout, "template.json") != NULL, "says what is missing");
		/* server text with an escape sequence in it (here the path
		 * given, echoed back): netctl prints it without */
		/* text from elsewhere with an escape sequence in it: the API
		 * clears its own messages; netctl prints none of it either
		 * (an event's reason, stored raw, in the events table) */
		{
			struct px_store *st2;
			struct px_event ev;

			memset(&ev, 0, sizeof(ev));
			snprintf(ev.sandbox, sizeof(ev.sandbox), "vm-3");
			snprintf(ev.operation, sizeof(ev.operation), "set");
			snprintf(ev.result, sizeof(ev.result), "failed");
			snprintf(ev.reason, sizeof(ev.reason), "boom\033[2Jx");
			ev.duration_ms = -1;
			ok((st2 = px_store_open(dir, cmd, sizeof(cmd))) != NULL &&
			    px_store_event_add(st2, &ev, NULL, cmd,
			    sizeof(cmd)) == 0, "an event with an escape "
			    "sequence in its reason");
			px_store_close(st2);
		}
		is_int(req("GET", "/v1/sandboxes/vm-3/events", NULL), 200,
		    "events of vm-3");
		ok(memmem(last.body, last.len, "boom\\u001B[2Jx", 14) != NULL,
		    "the API gives the reason as stored (escaped as JSON)");
		is_int(run("sandbox events vm-3"), 0, "events as a table");
		ok(strchr(out, '\033') == NULL && strstr(out, "boom?[2Jx") != NULL,
		    "netctl prints it with a '?', no escape sequence");
		snprintf(cmd, sizeof(cmd), "template add tpl-b \"$(printf "
		    "'/no\\033[2Jx')\"");
		is_int(run(cmd), 1, "a template path with an escape sequence");
		ok(strchr(errout, '\033') == NULL && strstr(errout, "/no?[2Jx") !=
		    NULL, "the message has a '?' there: %s", errout);
		snprintf(cmd, sizeof(cmd), "template add default %s", tdir);
		is_int(run(cmd), 1, "template add default: exit 1");
		snprintf(cmd, sizeof(cmd), "template add tpl-a %s", tdir);
		is_int(run(cmd), 1, "template add twice: exit 1");
		is_int(run("--json template ls"), 0, "template ls --json");
		if ((j = one_doc("template ls")) != NULL) {
			json_t *t = json_object_get(j, "templates");

			is_int((int)json_array_size(t), 2, "two templates");
			is_str(jget(json_array_get(t, 0), "name"), "default",
			    "default first");
			is_str(jget(json_array_get(t, 0), "dir"),
			    "/srv/berth/default", "with its directory");
			is_str(jget(json_array_get(t, 1), "dir"), tdir,
			    "tpl-a with its directory");
		}
		json_decref(j);
		is_int(run("sandbox create vm-5 --template tpl-a"), 0,
		    "create from tpl-a");
		snprintf(cmd, sizeof(cmd), "create vm-5 256 1 512 tpl-a %s", tdir);
		ok(vmlog_has(cmd), "the VM boots from tpl-a's directory");
		is_int(run("template rm tpl-a"), 1, "rm of a template in use: 1");
		ok(strstr(errout, "used by sandbox 'vm-5'") != NULL,
		    "names the sandbox");
		is_int(run("template rm default"), 1, "rm default: exit 1");
		is_int(run("sandbox rm vm-5"), 0, "rm vm-5");
		is_int(run("--json template rm tpl-a"), 0, "template rm");
		if ((j = one_doc("template rm")) != NULL)
			ok(json_is_true(json_object_get(j, "removed")), "removed");
		json_decref(j);

		/* failed is never a dead end */
		is_int(run("sandbox create fail-1"), 1, "a VM that fails: exit 1");
		ok(strstr(out, "token: berth_") != NULL, "its token is shown");
		is_int(run("sandbox resume fail-1"), 1, "resume of failed: exit 1");
		if (!ok(strstr(errout, "start it (netctl sandbox start fail-1") !=
		    NULL, "says to start it"))
			diag("%s", errout);
		is_int(run("sandbox start fail-1"), 0, "start of failed: 0");
		ok(strstr(out, "sandbox fail-1 is running") != NULL, "it runs");
		is_int(run("sandbox stop vm-3"), 0, "stop vm-3");
		ok(strstr(out, "is stopped") != NULL, "stopped");
		is_int(run("sandbox resume vm-3"), 1, "resume of stopped: 1");
		is_int(run("--json sandbox restart vm-3"), 0, "restart vm-3");
		if ((j = one_doc("restart")) != NULL)
			is_str(jget(j, "state"), "running", "running");
		json_decref(j);
		is_int(run("sandbox pause vm-3"), 0, "pause vm-3");
		is_int(run("sandbox start vm-3"), 1, "start of paused: 1");
		ok(strstr(errout, "resume it") != NULL, "says to resume it");
		is_int(run("sandbox start sb-1"), 1, "start of external: 1");
		is_int(run("--json sandbox events vm-3"), 0, "events of vm-3");
		if ((j = one_doc("events")) != NULL) {
			char got[512] = "";
			size_t i;
			json_t *e;

			json_array_foreach(json_object_get(j, "events"), i, e)
				if (strcmp(jget(e, "operation"), "create") != 0 &&
				    strcmp(jget(e, "operation"), "set") != 0)
					snprintf(got + strlen(got), sizeof(got) -
					    strlen(got), "%s%s/%s", got[0] ? " " :
					    "", jget(e, "operation"),
					    jget(e, "result"));
			is_str(got, "stop/ok resume/refused restart/ok pause/ok "
			    "start/refused", "each operation is an event");
		}
		json_decref(j);

		/* a sandbox token may not restart its sandbox */
		is_int(req("POST", "/v1/tokens", "{\"sandbox\":\"vm-3\"}"), 201,
		    "token for vm-3");
		{
			char tok[128];

			snprintf(tok, sizeof(tok), "%s", js("token"));
			is_int(treq(tok, "POST", "/v1/sandboxes/vm-3/restart", "{}"),
			    403, "its token cannot restart it");
			is_int(treq(tok, "PATCH", "/v1/sandboxes/vm-3",
			    "{\"idle_pause\":\"never\"}"), 403,
			    "nor change its idle policy");
			is_int(treq(tok, "GET", "/v1/templates", NULL), 403,
			    "nor list templates");
			/* exec counts its jobs by the token's id (exec.c:
			 * exec_max_per_token) */
			treq(tok, "POST", "/v1/sandboxes/vm-3/exec",
			    "{\"argv\":[\"true\"]}");
			snprintf(cmd, sizeof(cmd), "exec by tok-");
			ok(vmlog_has(cmd), "an exec over TCP names its token's id");
		}
		ok(req("POST", "/v1/sandboxes/vm-3/exec",
		    "{\"argv\":[\"true\"]}") > 0 && vmlog_has("exec by the "
		    "socket"), "an exec on the unix socket names no token");
		/* a buffered exec whose client goes: abandoned (killed in
		 * the guest, or dropped from its queue: exec.c) */
		{
			static const char hang[] = "POST /v1/sandboxes/vm-3/exec "
			    "HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n"
			    "{\"argv\":[\"hang\"]}";
			int hfd, i, before = vmlog_count("abandon");

			if ((hfd = raw_connect()) >= 0) {
				(void)send(hfd, hang, sizeof(hang) - 1,
				    MSG_NOSIGNAL);
				/* the exec is under way before the client goes */
				for (i = 0; i < 500 && vmlog_count("hang vm-3") ==
				    0; i++)
					usleep(10000);
				close(hfd);
			}
			for (i = 0; i < 500 && vmlog_count("abandon") == before;
			    i++)
				usleep(10000);
			is_int(vmlog_count("abandon"), before + 1, "a buffered "
			    "exec whose client closed is abandoned");
		}
	}
	cli_response_free(&last);
	json_decref(last_json);
	return done_testing();
}
