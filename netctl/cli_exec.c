/*
 * cli_exec.c — netctl's commands that run something in a guest: `sandbox
 * exec` (buffered with --json, else streamed as the agent's frames, see
 * vmm/proto/agent_proto.h), and the detached processes: ps, logs, kill,
 * wait, attach.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"
#include "agent_proto.h"

#include <openssl/evp.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>

#define EXEC_STDIN_MAX	(48 * 1024)	/* base64 within the API's 64 KiB */

/* Prints one stream of an exec answer as the command wrote it. */
static void
exec_print(json_t *doc, const char *key, FILE *f)
{
	char enc_key[32];
	const char *s = json_string_value(json_object_get(doc, key));
	const char *enc;
	unsigned char *raw;
	size_t n, pad;
	int len;

	snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
	enc = json_string_value(json_object_get(doc, enc_key));
	if (s == NULL)
		return;
	if (enc == NULL || strcmp(enc, "base64") != 0) {
		fwrite(s, 1, json_string_length(json_object_get(doc, key)), f);
		return;
	}
	n = strlen(s);
	for (pad = 0; pad < 2 && pad < n && s[n - 1 - pad] == '='; pad++)
		;
	if ((raw = malloc(n / 4 * 3 + 3)) == NULL)
		return;
	if ((len = EVP_DecodeBlock(raw, (const unsigned char *)s, (int)n)) >= 0)
		fwrite(raw, 1, (size_t)len - pad, f);
	free(raw);
}

/* ---- streamed exec ---- */

static volatile sig_atomic_t got_winch;

static void
on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

/*
 * The streamed exec speaks the agent's framing (agent_proto.h) through
 * berthd: we send EXEC_JSON first (berthd's own frame: the exec request,
 * not the agent's), then BA_STDIN and BA_RESIZE; berthd answers
 * BA_STDOUT, BA_STDERR and last BA_EXIT or BA_FAIL, whose payloads are
 * JSON (proxy/api/streams.c, "streamed exec").
 */
#define EXEC_JSON	'J'

/* Queues one frame. */
static int
frame_out(struct cli_stream *s, int type, const void *p, size_t len)
{
	unsigned char *b;
	int rc;

	if ((b = malloc(len + BA_HDR)) == NULL)
		return -1;
	ba_hdr_put(b, (uint32_t)len, type);
	if (len > 0)
		memcpy(b + BA_HDR, p, len);
	rc = cli_stream_write(s, b, len + BA_HDR);
	free(b);
	return rc;
}

/* The answer's frames so far: output printed, the end taken into *rc.
 * 1 once the end frame came. */
static int
exec_frames(struct cli_stream_resp *r, int *rc)
{
	size_t off = 0, len;
	json_t *doc, *v;
	int end = 0, type;

	while (!end && r->len - off >= BA_HDR) {
		len = ba_hdr_len(r->body + off);
		type = r->body[off + 4];
		if (r->len - off - BA_HDR < len)
			break;
		switch (type) {
		case BA_STDOUT:
			write_all(STDOUT_FILENO, r->body + off + BA_HDR, len);
			break;
		case BA_STDERR:
			write_all(STDERR_FILENO, r->body + off + BA_HDR, len);
			break;
		case BA_EXIT:
		case BA_FAIL:
			end = 1;
			doc = json_loadb((const char *)r->body + off + BA_HDR,
			    len, 0, NULL);
			if (type == BA_FAIL) {
				v = json_object_get(doc, "message");
				fail("%s", json_is_string(v) ?
				    json_string_value(v) : "exec failed");
				*rc = EXIT_REFUSED;
			} else if (json_is_true(json_object_get(doc,
			    "detached"))) {
				/* an attach's end: the client detached */
				fprintf(stderr, "%s: detached; process %lld "
				    "runs on\n", progname, (long long)
				    json_integer_value(json_object_get(doc,
				    "process")));
				*rc = EXIT_OK;
			} else {
				if (json_is_true(json_object_get(doc,
				    "timed_out")))
					fprintf(stderr, "%s: the command timed "
					    "out and was killed\n", progname);
				if ((v = json_object_get(doc, "exit_code")) !=
				    NULL && json_is_integer(v))
					*rc = (int)json_integer_value(v) & 0xff;
				else if ((v = json_object_get(doc, "signal")) !=
				    NULL && json_is_integer(v))
					*rc = 128 + ((int)json_integer_value(v) &
					    0x7f);
			}
			json_decref(doc);
			break;
		default:
			break;
		}
		off += BA_HDR + len;
	}
	if (off > 0) {
		memmove(r->body, r->body + off, r->len - off);
		r->len -= off;
	}
	return end;
}

/*
 * netctl sandbox exec without --json: POST .../exec?stream=1, output
 * printed as it comes, stdin sent as it is read (a terminal's only with
 * --tty, then in raw mode with its size, and again on SIGWINCH).
 */
static int exec_stream_at(const char *target, json_t *body, int tty,
    int detach_keys);

static int
exec_stream(const char *id, json_t *body, int tty)
{
	char target[160];

	snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec?stream=1", id);
	return exec_stream_at(target, body, tty, 0);
}

/* The detach keys of 'sandbox attach' on a terminal: ^P ^Q (docker's). */
#define DETACH_1	0x10
#define DETACH_2	0x11

/*
 * A streamed exec or a process's attach at target: output printed as it
 * comes, stdin sent as it is read (a terminal's only with tty, then in
 * raw mode with its size, and again on SIGWINCH). detach_keys: on a
 * terminal ^P ^Q ends stdin (the attach detaches).
 */
static int
exec_stream_at(const char *target, json_t *body, int tty, int detach_keys)
{
	struct cli_stream *s;
	struct cli_stream_resp *r = NULL;
	struct termios saved, raw;
	struct sigaction sa, old_sa;
	struct pollfd pfd[2];
	struct winsize ws;
	unsigned char buf[32768];
	char err[512], sz[32], *j, sent_err[512] = "";
	int unreachable, rc = EXIT_REFUSED, in_open, is_raw = 0, k, end = 0;
	int held = 0;		/* a ^P read, not sent yet */
	ssize_t n;

	s = cli_stream_open(&tgt, "POST", target,
	    "application/vnd.berth.exec-stream", -1, &unreachable, err,
	    sizeof(err));
	if (s == NULL) {
		fail("%s", err);
		out_error("unreachable", err);
		return EXIT_UNREACHABLE;
	}
	if ((j = json_dumps(body, JSON_COMPACT)) == NULL ||
	    frame_out(s, EXEC_JSON, j, strlen(j)) < 0) {
		free(j);
		cli_stream_close(s);
		fail("out of memory");
		return EXIT_REFUSED;
	}
	free(j);
	in_open = tty || !isatty(STDIN_FILENO);
	if (!in_open)
		frame_out(s, BA_STDIN, NULL, 0);
	if (tty && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO,
	    &saved) == 0) {
		raw = saved;
		cfmakeraw(&raw);
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
			is_raw = 1;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_winch;	/* no SA_RESTART: poll wakes */
		sigemptyset(&sa.sa_mask);
		sigaction(SIGWINCH, &sa, &old_sa);
	}
	while (!end) {
		if (got_winch) {
			got_winch = 0;
			if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 &&
			    ws.ws_row > 0) {
				snprintf(sz, sizeof(sz), "%u %u",
				    (unsigned)ws.ws_row, (unsigned)ws.ws_col);
				frame_out(s, BA_RESIZE, sz, strlen(sz));
			}
		}
		/* A command that ended at once: berthd may have answered
		 * all and closed before the stdin frames went out. What it
		 * sent is read before the broken send counts. */
		if (sent_err[0] == '\0' &&
		    cli_stream_flush(s, err, sizeof(err)) < 0) {
			snprintf(sent_err, sizeof(sent_err), "%s", err);
			in_open = 0;
		}
		pfd[0].fd = cli_stream_fd(s);
		pfd[0].events = POLLIN | (cli_stream_pending(s) &&
		    sent_err[0] == '\0' ? POLLOUT : 0);
		pfd[0].revents = 0;
		/* stdin waits while berthd has not taken what was read */
		pfd[1].fd = in_open && cli_stream_pending(s) < 1024 * 1024 ?
		    STDIN_FILENO : -1;
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		if (!cli_stream_readable(s) && poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail("poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(STDIN_FILENO, buf + held, sizeof(buf) - 1);
			if (n > 0 && detach_keys && is_raw) {
				unsigned char *d;
				size_t m = (size_t)n + (size_t)held;

				held = 0;
				d = memchr(buf, DETACH_1, m);
				if (d != NULL && d + 1 < buf + m &&
				    d[1] == DETACH_2) {
					/* what came before, then the end */
					if (d > buf)
						frame_out(s, BA_STDIN, buf,
						    (size_t)(d - buf));
					in_open = 0;
					frame_out(s, BA_STDIN, NULL, 0);
					continue;
				}
				if (buf[m - 1] == DETACH_1) {
					held = 1;	/* its pair may follow */
					m--;
				}
				if (m > 0)
					frame_out(s, BA_STDIN, buf, m);
				if (held)
					buf[0] = DETACH_1;
			} else if (n > 0)
				frame_out(s, BA_STDIN, buf, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				in_open = 0;
				frame_out(s, BA_STDIN, NULL, 0);
			}
		}
		if (!cli_stream_readable(s) && !(pfd[0].revents &
		    (POLLIN | POLLHUP | POLLERR)))
			continue;
		if ((k = cli_stream_recv(s, &r, err, sizeof(err))) < 0) {
			fail("%s", sent_err[0] ? sent_err : err);
			rc = EXIT_UNREACHABLE;
			break;
		}
		if (r->status != 0 && r->status != 200) {
			if (k == 1) {	/* an API error, in JSON */
				struct cli_response e;

				e.status = r->status;
				e.body = (char *)r->body;
				e.len = r->len;
				rc = api_error(&e, NULL);
				end = 1;
			}
			continue;
		}
		if (r->status == 200 && exec_frames(r, &rc))
			end = 1;
		else if (k == 1) {
			if (sent_err[0] != '\0') {
				fail("%s", sent_err);
				rc = EXIT_UNREACHABLE;
			} else
				fail("berthd ended the answer without the "
				    "command's end");
			end = 1;
		}
	}
	if (is_raw) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		sigaction(SIGWINCH, &old_sa, NULL);
	}
	cli_stream_close(s);
	return rc;
}

int
c_sandbox_exec(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *body, *argv, *doc, *v;
	unsigned char buf[EXEC_STDIN_MAX + 1];
	char *b64;
	size_t got = 0;
	ssize_t r;
	uint64_t secs = 600;
	int i, rc;

	(void)c;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	if ((body = json_object()) == NULL || (argv = json_array()) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	json_object_set_new(body, "argv", argv);
	for (i = 1; i < n; i++)
		json_array_append_new(argv, json_string(a[i]));
	if (env_arg(o, 0, body) == -1) {
		json_decref(body);
		return EXIT_USAGE;
	}
	if (o->cwd != NULL)
		json_object_set_new(body, "cwd", json_string(o->cwd));
	if (o->user != NULL)
		json_object_set_new(body, "user", json_string(o->user));
	if (o->tty) {
		struct winsize ws;
		int fd;

		/* the size of the terminal netctl runs in, if any */
		memset(&ws, 0, sizeof(ws));
		for (fd = 0; fd < 3; fd++)
			if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 &&
			    ws.ws_row > 0)
				break;
		if (ws.ws_row == 0 || ws.ws_col == 0) {
			ws.ws_row = 24;
			ws.ws_col = 80;
		}
		json_object_set_new(body, "tty", json_pack("{s:i, s:i}",
		    "rows", (int)ws.ws_row, "cols", (int)ws.ws_col));
	}
	if (o->timeout != NULL) {
		json_t *t = json_object();

		/* checked here so the answer wait fits the command's */
		if (strcmp(o->timeout, "never") == 0) {
			fail("--timeout: a command needs a deadline (at most 24h)");
			json_decref(t);
			json_decref(body);
			return EXIT_USAGE;
		}
		if (span_arg("--timeout", o->timeout, 0, t, "t") != 0) {
			json_decref(t);
			json_decref(body);
			return EXIT_USAGE;
		}
		json_decref(t);
		secs = strtoull(o->timeout, NULL, 10);
		switch (o->timeout[strspn(o->timeout, "0123456789")]) {
		case 'm':
			secs = strstr(o->timeout, "ms") != NULL ? secs / 1000 :
			    secs * 60;
			break;
		case 'h': secs *= 3600; break;
		case 'd': secs *= 86400; break;
		default: break;
		}
		json_object_set_new(body, "timeout", json_string(o->timeout));
	}
	if (o->given & O_DETACH) {
		char target[160];

		json_object_set_new(body, "detach", json_true());
		if (o->given & O_KEEP_AWAKE)
			json_object_set_new(body, "keep_awake", json_true());
		if (o->ring != NULL) {
			char *end;
			unsigned long long rb = strtoull(o->ring, &end, 10);

			/* bytes, or with K or M (KiB, MiB) */
			if (*end == 'K' || *end == 'k')
				rb <<= 10, end++;
			else if (*end == 'M' || *end == 'm')
				rb <<= 20, end++;
			if (!isdigit((unsigned char)o->ring[0]) || *end != '\0' ||
			    rb < 1024 || rb > 16ULL << 20) {
				fail("--ring: expected 1K to 16M (bytes, or with "
				    "K or M), not '%s'", o->ring);
				json_decref(body);
				return EXIT_USAGE;
			}
			json_object_set_new(body, "ring", json_integer(
			    (json_int_t)rb));
		}
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", a[0]);
		cli_timeout_secs = 300;		/* a wake at most */
		rc = call(o, "POST", target, body, &doc);
		json_decref(body);
		if (rc != EXIT_OK)
			return rc;
		if (!o->json)
			printf("%lld\n", (long long)json_integer_value(
			    json_object_get(doc, "process")));
		json_decref(doc);
		return EXIT_OK;
	}
	if (o->given & (O_KEEP_AWAKE | O_RING)) {
		fail("%s: only with --detach", (o->given & O_RING) ? "--ring" :
		    "--keep-awake");
		json_decref(body);
		return EXIT_USAGE;
	}
	/* a wake, and commands queued before this one, come on top */
	cli_timeout_secs = (unsigned)(secs > 86400 ? 86400 : secs) + 300;
	if (!o->json) {
		rc = exec_stream(a[0], body, o->tty);
		json_decref(body);
		return rc;
	}
	if (!isatty(STDIN_FILENO)) {
		while (got <= EXEC_STDIN_MAX && (r = read(STDIN_FILENO,
		    buf + got, sizeof(buf) - got)) != 0) {
			if (r < 0) {
				if (errno == EINTR)
					continue;
				break;	/* no stdin (closed): none sent */
			}
			got += (size_t)r;
		}
		if (got > EXEC_STDIN_MAX) {
			fail("stdin: more than %d bytes; streaming stdin is not "
			    "supported yet", EXEC_STDIN_MAX);
			json_decref(body);
			return EXIT_USAGE;
		}
		if (got > 0) {
			if ((b64 = malloc(4 * ((got + 2) / 3) + 1)) == NULL) {
				fail("out of memory");
				json_decref(body);
				return EXIT_REFUSED;
			}
			EVP_EncodeBlock((unsigned char *)b64, buf, (int)got);
			json_object_set_new(body, "stdin", json_string(b64));
			free(b64);
		}
	}
	{
		char target[160];

		snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", a[0]);
		rc = call(o, "POST", target, body, &doc);
	}
	json_decref(body);
	if (rc != EXIT_OK)
		return rc;
	if (!o->json) {
		fflush(stdout);
		exec_print(doc, "stdout", stdout);
		fflush(stdout);
		exec_print(doc, "stderr", stderr);
	}
	if (json_is_true(json_object_get(doc, "timed_out")))
		fprintf(stderr, "%s: the command timed out and was killed\n",
		    progname);
	if (json_is_true(json_object_get(doc, "truncated")))
		fprintf(stderr, "%s: output over 4 MiB a stream was dropped\n",
		    progname);
	if ((v = json_object_get(doc, "exit_code")) != NULL &&
	    json_is_integer(v))
		rc = (int)json_integer_value(v) & 0xff;
	else if ((v = json_object_get(doc, "signal")) != NULL &&
	    json_is_integer(v))
		rc = 128 + ((int)json_integer_value(v) & 0x7f);
	else
		rc = EXIT_REFUSED;
	json_decref(doc);
	return rc;
}

/* ---- detached processes ---- */

/* A process number argument: 1 to 2^32-1. */
static int
check_proc(const char *s)
{
	char *end;
	unsigned long long v;

	v = strtoull(s, &end, 10);
	if (*s < '1' || *s > '9' || *end != '\0' || v > 4294967295ULL) {
		fail("'%s' is not a process number (see 'netctl sandbox ps')",
		    s);
		return -1;
	}
	return 0;
}

static const char *
proc_state(json_t *p, char *buf, size_t len)
{
	json_t *v;

	if (strcmp(jstr(p, "state"), "running") == 0)
		return "running";
	if ((v = json_object_get(p, "exit_code")) != NULL && json_is_integer(v))
		snprintf(buf, len, "exit %lld", (long long)json_integer_value(v));
	else
		snprintf(buf, len, "signal %lld", (long long)json_integer_value(
		    json_object_get(p, "signal")));
	return buf;
}

int
c_sandbox_ps(const struct cmd *c, struct opts *o, char **a, int n)
{
	struct table t;
	char target[160], num[4][32], st[32];
	json_t *doc, *p;
	size_t i;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes", a[0]);
	if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK || o->json)
		return rc;
	memset(&t, 0, sizeof(t));
	t.ncols = 6;
	table_add(&t, (const char *const[]){ "PROC", "PID", "STATE",
	    "OUTPUT", "KEEP-AWAKE", "COMMAND", NULL });
	json_array_foreach(json_object_get(doc, "processes"), i, p) {
		snprintf(num[0], sizeof(num[0]), "%lld", (long long)
		    json_integer_value(json_object_get(p, "process")));
		snprintf(num[1], sizeof(num[1]), "%lld", (long long)
		    json_integer_value(json_object_get(p, "pid")));
		snprintf(num[2], sizeof(num[2]), "%lld", (long long)
		    json_integer_value(json_object_get(p, "output_bytes")));
		table_add(&t, (const char *const[]){ num[0], num[1],
		    proc_state(p, st, sizeof(st)), num[2],
		    json_is_true(json_object_get(p, "keep_awake")) ? "yes" :
		    "no", jstr(p, "command"), NULL });
	}
	table_print(&t);
	json_decref(doc);
	return EXIT_OK;
}

int
c_sandbox_logs(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200], *end;
	unsigned long long next = 0;
	int rc, follow = (o->given & O_FOLLOW) != 0;
	json_t *doc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	if (o->offset != NULL) {
		next = strtoull(o->offset, &end, 10);
		if (*o->offset < '0' || *o->offset > '9' || *end != '\0') {
			fail("--offset: '%s' is not a byte offset", o->offset);
			return EXIT_USAGE;
		}
	}
	if (follow)
		out_streamed = 1;
	for (;;) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/"
		    "%s/logs?offset=%llu", a[0], a[1], next);
		if ((rc = call(o, "GET", target, NULL, &doc)) != EXIT_OK)
			return rc;
		if (o->json && !follow) {
			json_decref(doc);	/* call printed it */
			return EXIT_OK;
		}
		if (json_is_true(json_object_get(doc, "lost")))
			fprintf(stderr, "%s: output before byte %lld is gone (the "
			    "process's ring holds the last of it)\n", progname,
			    (long long)json_integer_value(json_object_get(doc,
			    "first")));
		if (o->json) {
			char *line = json_dumps(doc, JSON_COMPACT);

			printf("%s\n", line != NULL ? line : "{}");
			free(line);
		} else
			exec_print(doc, "output", stdout);
		fflush(stdout);
		next = (unsigned long long)json_integer_value(
		    json_object_get(doc, "next_offset"));
		if (!follow || strcmp(jstr(doc, "state"), "running") != 0) {
			json_decref(doc);
			return EXIT_OK;
		}
		json_decref(doc);
		usleep(500000);
	}
}

int
c_sandbox_kill(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200], *end;
	json_t *body, *doc;
	long v;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	body = json_object();
	if (o->signal != NULL) {
		v = strtol(o->signal, &end, 10);
		if (*o->signal >= '0' && *o->signal <= '9') {
			if (*end != '\0' || v < 1 || v > 64) {
				fail("--signal: '%s' is not a signal number (1 "
				    "to 64) or name", o->signal);
				json_decref(body);
				return EXIT_USAGE;
			}
			json_object_set_new(body, "signal", json_integer(v));
		} else
			json_object_set_new(body, "signal", json_string(
			    o->signal));
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/%s/kill",
	    a[0], a[1]);
	rc = call(o, "POST", target, body, &doc);
	json_decref(body);
	if (rc == EXIT_OK)
		json_decref(doc);
	return rc;
}

int
c_sandbox_wait(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200], st[32];
	json_t *doc, *v;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/%s/wait",
	    a[0], a[1]);
	cli_timeout_secs = 86400 + 300;
	if ((rc = call(o, "POST", target, NULL, &doc)) != EXIT_OK)
		return rc;
	if (!o->json)
		printf("%s\n", proc_state(doc, st, sizeof(st)));
	/* the process's status, as exec gives a command's */
	if ((v = json_object_get(doc, "exit_code")) != NULL && json_is_integer(v))
		rc = (int)json_integer_value(v) & 0xff;
	else
		rc = 128 + ((int)json_integer_value(json_object_get(doc,
		    "signal")) & 0x7f);
	json_decref(doc);
	return rc;
}

/* netctl sandbox attach ID PROC: a client of a detached process's
 * terminal (POST .../processes/N/attach, streamed). */
int
c_sandbox_attach(const struct cmd *c, struct opts *o, char **a, int n)
{
	char target[200];
	struct winsize ws;
	json_t *body;
	int rc;

	(void)c;
	(void)n;
	if (check_id(a[0]) == -1 || check_proc(a[1]) == -1)
		return EXIT_USAGE;
	if (o->json) {
		fail("attach is a terminal: no --json");
		return EXIT_USAGE;
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/%s/"
	    "attach", a[0], a[1]);
	if ((body = json_object()) == NULL) {
		fail("out of memory");
		return EXIT_REFUSED;
	}
	/* the terminal's size when netctl runs in one: the newest client's
	 * is the process's */
	memset(&ws, 0, sizeof(ws));
	if (isatty(STDIN_FILENO) && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 &&
	    ws.ws_row > 0 && ws.ws_col > 0) {
		json_object_set_new(body, "rows", json_integer(ws.ws_row));
		json_object_set_new(body, "cols", json_integer(ws.ws_col));
	}
	if (o->offset != NULL) {
		char *end;
		unsigned long long off = strtoull(o->offset, &end, 10);

		if (*o->offset < '0' || *o->offset > '9' || *end != '\0' ||
		    off > INT64_MAX) {
			fail("--offset: '%s' is not a byte offset", o->offset);
			json_decref(body);
			return EXIT_USAGE;
		}
		json_object_set_new(body, "offset", json_integer(
		    (json_int_t)off));
	}
	if (isatty(STDIN_FILENO))
		fprintf(stderr, "%s: attached to process %s; ^P ^Q detaches\r\n",
		    progname, a[1]);
	cli_timeout_secs = 86400 + 300;
	rc = exec_stream_at(target, body, 1, 1);
	json_decref(body);
	return rc;
}
