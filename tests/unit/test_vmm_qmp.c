/*
 * test_vmm_qmp.c — the QMP client against a fake QMP server on the other
 * end of a socketpair, in one event loop: greeting and capability
 * negotiation, commands queued before negotiation, replies matched by id,
 * errors, events, messages split across reads, several in one read, a
 * client freed from inside its own callback, bad JSON and EOF.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include "qmp.h"
#include "tap.h"

struct fake {
	struct bufferevent *bev;
	int caps_seen;
	int cmds;			/* commands after capabilities */
	char last[64];
	int split;			/* answer query-status in two writes */
	int garbage;			/* answer with bad JSON */
};

struct client {
	struct event_base *base;
	struct vmm_qmp *q;
	int ready;
	int replies, errors, events;
	char status[32], error[256], event[64], closed[256];
	int free_in_cb;
};

static void
fake_send(struct fake *f, const char *s)
{
	evbuffer_add_printf(bufferevent_get_output(f->bev), "%s\r\n", s);
}

static void
fake_split_2(evutil_socket_t fd, short w, void *arg)
{
	struct fake *f = arg;

	(void)fd;
	(void)w;
	evbuffer_add_printf(bufferevent_get_output(f->bev),
	    "\"running\":true},\"id\":%d}\r\n", f->cmds + 1);
}

static void
fake_read(struct bufferevent *bev, void *arg)
{
	struct fake *f = arg;
	char *line, buf[256];
	json_t *j;
	const char *cmd;
	int id;

	while ((line = evbuffer_readln(bufferevent_get_input(bev), NULL,
	    EVBUFFER_EOL_CRLF)) != NULL) {
		j = json_loads(line, 0, NULL);
		free(line);
		cmd = json_string_value(json_object_get(j, "execute"));
		id = (int)json_integer_value(json_object_get(j, "id"));
		snprintf(f->last, sizeof(f->last), "%s", cmd ? cmd : "?");
		if (cmd != NULL && strcmp(cmd, "qmp_capabilities") == 0) {
			f->caps_seen++;
			snprintf(buf, sizeof(buf), "{\"return\": {}, \"id\": %d}", id);
			fake_send(f, buf);
		} else if (!f->caps_seen) {
			fake_send(f, "{\"error\": {\"class\": \"CommandNotFound\", "
			    "\"desc\": \"Expecting capabilities negotiation with "
			    "'qmp_capabilities'\"}}");
		} else if (cmd != NULL && strcmp(cmd, "query-status") == 0) {
			f->cmds++;
			if (f->garbage) {
				fake_send(f, "{\"return\": {\"status\": ");
				fake_send(f, "nonsense}");
			} else if (f->split) {
				struct timeval tv = { 0, 20000 };

				evbuffer_add_printf(bufferevent_get_output(bev),
				    "{\"return\": {\"status\": \"paused\", ");
				event_base_once(bufferevent_get_base(bev), -1,
				    EV_TIMEOUT, fake_split_2, f, &tv);
			} else {
				snprintf(buf, sizeof(buf), "{\"return\": {\"status\": "
				    "\"running\", \"running\": true}, \"id\": %d}", id);
				fake_send(f, buf);
			}
		} else if (cmd != NULL && strcmp(cmd, "stop") == 0) {
			f->cmds++;
			/* event and reply in one write, event first */
			snprintf(buf, sizeof(buf), "{\"timestamp\": {\"seconds\": 1, "
			    "\"microseconds\": 2}, \"event\": \"STOP\"}\r\n"
			    "{\"return\": {}, \"id\": %d}", id);
			fake_send(f, buf);
		} else {
			f->cmds++;
			snprintf(buf, sizeof(buf), "{\"error\": {\"class\": "
			    "\"CommandNotFound\", \"desc\": \"The command %s has "
			    "not been found\"}, \"id\": %d}", cmd ? cmd : "?", id);
			fake_send(f, buf);
		}
		json_decref(j);
	}
}

static void
c_ready(struct vmm_qmp *q, void *arg)
{
	struct client *c = arg;

	(void)q;
	c->ready++;
}

static void
c_event(struct vmm_qmp *q, const char *ev, json_t *data, void *arg)
{
	struct client *c = arg;

	(void)q;
	(void)data;
	c->events++;
	snprintf(c->event, sizeof(c->event), "%s", ev);
}

static void
c_close(struct vmm_qmp *q, const char *reason, void *arg)
{
	struct client *c = arg;

	(void)q;
	snprintf(c->closed, sizeof(c->closed), "%s", reason);
	event_base_loopbreak(c->base);
}

static void
c_reply(struct vmm_qmp *q, json_t *ret, const char *error, void *arg)
{
	struct client *c = arg;

	if (ret != NULL) {
		const char *s = json_string_value(json_object_get(ret, "status"));

		c->replies++;
		snprintf(c->status, sizeof(c->status), "%s", s ? s : "");
	} else {
		c->errors++;
		snprintf(c->error, sizeof(c->error), "%s", error);
	}
	if (c->free_in_cb) {
		vmm_qmp_free(q);
		c->q = NULL;
	}
	event_base_loopbreak(c->base);
}

static void
setup(struct event_base *base, struct fake *f, struct client *c)
{
	struct vmm_qmp_cbs cbs = { c_ready, c_event, c_close, c };
	int sv[2];

	memset(f, 0, sizeof(*f));
	memset(c, 0, sizeof(*c));
	c->base = base;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	f->bev = bufferevent_socket_new(base, sv[1], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(f->bev, fake_read, NULL, NULL, f);
	bufferevent_enable(f->bev, EV_READ | EV_WRITE);
	c->q = vmm_qmp_new(base, sv[0], &cbs);
}

static void
stop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/* Runs the loop until a callback breaks it, for 2 s at most. The timer
 * goes with the run: a loopexit timer left pending by a run that ended
 * early would cut a later run short (this test flaked so in CI). */
static void
run(struct event_base *base)
{
	struct timeval tv = { 2, 0 };
	struct event *t = evtimer_new(base, stop, base);

	if (t == NULL)
		abort();
	evtimer_add(t, &tv);
	event_base_dispatch(base);
	event_free(t);
}

/* A listening socket 150 bytes deep (bound through its directory's
 * descriptor, as connect must reach it), then connected to by path. */
static void
deep_socket(void)
{
	char base[] = "/tmp/test_vmm_qmp.XXXXXX", dir[PATH_MAX], path[PATH_MAX];
	char err[256];
	struct sockaddr_un sun;
	int dfd, l, c, a;

	if (mkdtemp(base) == NULL) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(dir, sizeof(dir), "%s/%0120d", base, 0);
	snprintf(path, sizeof(path), "%s/qmp.sock", dir);
	ok(mkdir(dir, 0700) == 0 && strlen(path) > sizeof(sun.sun_path),
	    "a socket path of %zu bytes", strlen(path));
	dfd = open(dir, O_PATH | O_DIRECTORY);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/qmp.sock",
	    dfd);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	ok(l >= 0 && bind(l, (struct sockaddr *)&sun, sizeof(sun)) == 0 &&
	    listen(l, 1) == 0, "bound and listening");
	c = vmm_qmp_connect_unix(path, err, sizeof(err));
	ok(c >= 0, "connected by its long path%s%s", c < 0 ? ": " : "",
	    c < 0 ? err : "");
	a = accept(l, NULL, NULL);
	ok(a >= 0, "accepted");
	if (a >= 0)
		close(a);
	if (c >= 0)
		close(c);
	close(l);
	close(dfd);
	unlink(path);
	rmdir(dir);
	rmdir(base);
	ok(vmm_qmp_connect_unix(path, err, sizeof(err)) == -ENOENT,
	    "gone: %s", err);
}

int
main(void)
{
	struct event_base *base = event_base_new();
	struct fake f;
	struct client c;
	char err[256];

	/* as in berthd: writes to a VMM that went away must not kill us */
	signal(SIGPIPE, SIG_IGN);

	/* 1: a command queued before the greeting goes out after
	 * qmp_capabilities, and its reply is matched. */
	setup(base, &f, &c);
	ok(vmm_qmp_command(c.q, "query-status", NULL, c_reply, &c, err,
	    sizeof(err)) == 0, "command accepted before negotiation");
	fake_send(&f, "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, "
	    "\"minor\": 2, \"major\": 7}}, \"capabilities\": [\"oob\"]}}");
	run(base);
	is_int(f.caps_seen, 1, "client sent qmp_capabilities first");
	is_int(c.ready, 1, "ready callback once");
	ok(vmm_qmp_is_ready(c.q), "is_ready");
	is_int(c.replies, 1, "held command answered");
	is_str(c.status, "running", "reply carries the return object");

	/* 2: an error reply is matched and formatted "Class: desc" */
	vmm_qmp_command(c.q, "x-no-such", NULL, c_reply, &c, err, sizeof(err));
	run(base);
	is_int(c.errors, 1, "error reply");
	is_str(c.error, "CommandNotFound: The command x-no-such has not been "
	    "found", "error text");

	/* 3: an event and a reply in one read, event first */
	vmm_qmp_command(c.q, "stop", json_pack("{}"), c_reply, &c, err,
	    sizeof(err));
	run(base);
	is_int(c.events, 1, "event delivered");
	is_str(c.event, "STOP", "event name");
	is_int(c.replies, 2, "reply after event");

	/* 4: a reply split over two writes */
	f.split = 1;
	vmm_qmp_command(c.q, "query-status", NULL, c_reply, &c, err,
	    sizeof(err));
	run(base);
	is_str(c.status, "paused", "split reply reassembled");
	f.split = 0;

	/* 5: free from inside the reply callback is safe */
	c.free_in_cb = 1;
	vmm_qmp_command(c.q, "query-status", NULL, c_reply, &c, err,
	    sizeof(err));
	run(base);
	ok(c.q == NULL && c.replies == 4, "freed inside its callback");
	ok(c.closed[0] == '\0', "no close callback after free");
	bufferevent_free(f.bev);

	/* 6: EOF from the VMM: close callback with a reason; commands
	 * afterwards fail at once */
	setup(base, &f, &c);
	fake_send(&f, "{\"QMP\": {\"version\": {}, \"capabilities\": []}}");
	run(base);
	ok(c.ready == 1, "second connection ready");
	vmm_qmp_command(c.q, "query-status", NULL, c_reply, &c, err,
	    sizeof(err));
	bufferevent_free(f.bev);
	run(base);
	ok(strstr(c.closed, "closed") != NULL, "EOF reported: %s", c.closed);
	is_int(c.replies + c.errors, 0, "pending command dropped silently");
	ok(vmm_qmp_command(c.q, "cont", NULL, c_reply, &c, err,
	    sizeof(err)) < 0 && strstr(err, "not connected") != NULL,
	    "command after close refused: %s", err);
	vmm_qmp_free(c.q);

	/* 7: bad JSON closes the connection with the parser's message */
	setup(base, &f, &c);
	f.garbage = 1;
	fake_send(&f, "{\"QMP\": {\"version\": {}, \"capabilities\": []}}");
	vmm_qmp_command(c.q, "query-status", NULL, c_reply, &c, err,
	    sizeof(err));
	run(base);
	ok(strstr(c.closed, "bad JSON") != NULL, "bad JSON: %s", c.closed);
	vmm_qmp_free(c.q);
	bufferevent_free(f.bev);

	/* 8: no greeting but something else: protocol error */
	setup(base, &f, &c);
	fake_send(&f, "{\"return\": {}}");
	run(base);
	ok(strstr(c.closed, "greeting") != NULL, "no greeting: %s", c.closed);
	vmm_qmp_free(c.q);
	bufferevent_free(f.bev);

	/* 9: connecting to a missing socket says so */
	ok(vmm_qmp_connect_unix("/nonexistent/qmp.sock", err, sizeof(err)) ==
	    -ENOENT, "missing socket: %s", err);

	/* 10: a socket whose path passes sun_path's 108 bytes (a deep
	 * state directory) is still reached, through its directory */
	deep_socket();

	event_base_free(base);
	return done_testing();
}
