/*
 * qmp.c — QMP client over a bufferevent. QEMU writes one JSON object per
 * line (CRLF); we parse each complete line with jansson and dispatch on
 * its first key: "QMP" (greeting), "return"/"error" (reply to our "id"),
 * "event". Commands queued before the greeting is processed are held
 * back until qmp_capabilities succeeded, because QEMU refuses anything
 * else in capabilities-negotiation mode.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "qmp.h"

/* A reply line beyond this is a protocol error (QEMU's own replies to
 * what we send are a few KiB at most). */
#define QMP_LINE_MAX (1024 * 1024)

struct qmp_cmd {
	struct qmp_cmd *next;
	unsigned long id;
	char *text;			/* serialized, not yet sent (held) */
	vmm_qmp_reply_cb cb;
	void *arg;
};

enum qmp_phase { QMP_GREETING, QMP_NEGOTIATING, QMP_READY, QMP_CLOSED };

struct vmm_qmp {
	struct bufferevent *bev;
	struct vmm_qmp_cbs cbs;
	enum qmp_phase phase;
	unsigned long next_id;
	struct qmp_cmd *pending;	/* sent or held, oldest first */
	int busy;			/* inside a callback */
	int dead;			/* freed while busy */
};

static void
qmp_drop_all(struct vmm_qmp *q)
{
	struct qmp_cmd *c;

	while ((c = q->pending) != NULL) {
		q->pending = c->next;
		free(c->text);
		free(c);
	}
}

static void
qmp_really_free(struct vmm_qmp *q)
{
	if (q->bev != NULL)
		bufferevent_free(q->bev);
	qmp_drop_all(q);
	free(q);
}

void
vmm_qmp_free(struct vmm_qmp *q)
{
	if (q == NULL)
		return;
	q->phase = QMP_CLOSED;
	if (q->busy) {
		q->dead = 1;
		return;
	}
	qmp_really_free(q);
}

int
vmm_qmp_is_ready(const struct vmm_qmp *q)
{
	return q != NULL && q->phase == QMP_READY;
}

void
vmm_qmp_error_text(json_t *error, char *buf, size_t len)
{
	const char *cls = json_string_value(json_object_get(error, "class"));
	const char *desc = json_string_value(json_object_get(error, "desc"));

	snprintf(buf, len, "%s: %s", cls != NULL ? cls : "Error",
	    desc != NULL ? desc : "(no description)");
}

/* Every callback runs with busy raised, so that a vmm_qmp_free() inside
 * it only marks the connection; the outermost handler frees it. */
#define QMP_CALL(q, expr) do {			\
	(q)->busy++;				\
	expr;					\
	(q)->busy--;				\
} while (0)

/* At the end of an outermost handler: free a connection marked dead. */
static void
qmp_alive(struct vmm_qmp *q)
{
	if (q->dead && q->busy == 0)
		qmp_really_free(q);
}

static void
qmp_close(struct vmm_qmp *q, const char *reason)
{
	if (q->phase == QMP_CLOSED)
		return;
	q->phase = QMP_CLOSED;
	qmp_drop_all(q);
	bufferevent_disable(q->bev, EV_READ | EV_WRITE);
	if (q->cbs.close != NULL)
		QMP_CALL(q, q->cbs.close(q, reason, q->cbs.arg));
}

static int
qmp_send_text(struct vmm_qmp *q, const char *text)
{
	struct evbuffer *out = bufferevent_get_output(q->bev);

	evutil_socket_t fd;

	if (evbuffer_add(out, text, strlen(text)) < 0 ||
	    evbuffer_add(out, "\r\n", 2) < 0)
		return -1;
	/* Written now rather than when the loop next polls: a wake's `cont`
	 * would otherwise wait for whatever else this turn of the loop does.
	 * What the socket does not take goes the usual way, in order. */
	if ((fd = bufferevent_getfd(q->bev)) >= 0) {
		size_t len = evbuffer_get_length(out);
		unsigned char *p = evbuffer_pullup(out, (ssize_t)len);
		ssize_t n;

		/* The bufferevent keeps its output's front frozen for itself;
		 * its own write callback thaws it the same way. MSG_NOSIGNAL:
		 * a library does not rely on SIGPIPE's handling. */
		if (p != NULL &&
		    (n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)) > 0) {
			evbuffer_unfreeze(out, 1);
			evbuffer_drain(out, (size_t)n);
			evbuffer_freeze(out, 1);
		}
	}
	return 0;
}

static void
qmp_flush_held(struct vmm_qmp *q)
{
	struct qmp_cmd *c;

	for (c = q->pending; c != NULL; c = c->next) {
		if (c->text == NULL)
			continue;
		if (qmp_send_text(q, c->text) < 0) {
			qmp_close(q, "QMP: out of memory");
			return;
		}
		free(c->text);
		c->text = NULL;
	}
}

static struct qmp_cmd *
qmp_take(struct vmm_qmp *q, json_t *idv)
{
	struct qmp_cmd **pp, *c;
	unsigned long id;

	if (!json_is_integer(idv))
		return NULL;
	id = (unsigned long)json_integer_value(idv);
	for (pp = &q->pending; (c = *pp) != NULL; pp = &c->next) {
		if (c->id == id && c->text == NULL) {
			*pp = c->next;
			return c;
		}
	}
	return NULL;
}

static void
qmp_caps_reply(struct vmm_qmp *q, json_t *ret, const char *error, void *arg)
{
	char why[512];

	(void)arg;
	if (ret == NULL) {
		snprintf(why, sizeof(why), "QMP qmp_capabilities refused: %s",
		    error);
		qmp_close(q, why);
		return;
	}
	q->phase = QMP_READY;
	qmp_flush_held(q);
	if (q->phase == QMP_READY && q->cbs.ready != NULL)
		QMP_CALL(q, q->cbs.ready(q, q->cbs.arg));
}

/* {"execute": cmd, "arguments": args, "id": next} serialized, and a new
 * pending entry for it (not yet linked); args is stolen. NULL: memory. */
static char *
qmp_text(struct vmm_qmp *q, const char *cmd, json_t *args,
    struct qmp_cmd **cp)
{
	json_t *msg;
	char *text;

	if ((msg = json_object()) == NULL) {
		json_decref(args);
		return NULL;
	}
	json_object_set_new(msg, "execute", json_string(cmd));
	if (args != NULL)
		json_object_set_new(msg, "arguments", args);
	json_object_set_new(msg, "id", json_integer((json_int_t)q->next_id));
	text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (text != NULL && (*cp = calloc(1, sizeof(**cp))) == NULL) {
		free(text);
		return NULL;
	}
	return text;
}

static int
qmp_enqueue(struct vmm_qmp *q, const char *cmd, json_t *args,
    vmm_qmp_reply_cb cb, void *arg, int hold, char *err, size_t errlen)
{
	struct qmp_cmd *c, **pp;
	char *text;

	if ((text = qmp_text(q, cmd, args, &c)) == NULL)
		goto nomem;
	c->id = q->next_id++;
	c->cb = cb;
	c->arg = arg;
	if (hold) {
		c->text = text;
	} else {
		if (qmp_send_text(q, text) < 0) {
			free(text);
			free(c);
			goto nomem;
		}
		free(text);
	}
	for (pp = &q->pending; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = c;
	return 0;
nomem:
	snprintf(err, errlen, "QMP %s: out of memory", cmd);
	return -1;
}

/*
 * A command that carries a file descriptor (SCM_RIGHTS), for getfd and
 * add-fd: QEMU takes the descriptor that arrived with the bytes of the
 * command, so those bytes go out now, with it, straight on the socket,
 * after whatever was queued before (written out first, or the command
 * is refused rather than reordered).
 */
int
vmm_qmp_command_fd(struct vmm_qmp *q, const char *cmd, json_t *args, int fd,
    vmm_qmp_reply_cb cb, void *arg, char *err, size_t errlen)
{
	struct evbuffer *out;
	struct qmp_cmd *c, **pp;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *cm;
	char *text;
	size_t len;
	ssize_t n;
	int sfd;

	if (q == NULL || q->phase != QMP_READY || q->dead) {
		json_decref(args);
		snprintf(err, errlen, "QMP %s: not connected", cmd);
		return -1;
	}
	out = bufferevent_get_output(q->bev);
	sfd = (int)bufferevent_getfd(q->bev);
	evbuffer_unfreeze(out, 1);	/* as the bufferevent's own writes do */
	while (evbuffer_get_length(out) > 0)
		if (evbuffer_write(out, sfd) <= 0) {
			evbuffer_freeze(out, 1);
			json_decref(args);
			snprintf(err, errlen, "QMP %s: earlier commands still "
			    "unsent", cmd);
			return -1;
		}
	evbuffer_freeze(out, 1);
	if ((text = qmp_text(q, cmd, args, &c)) == NULL)
		goto nomem;
	len = strlen(text);
	memset(&mh, 0, sizeof(mh));
	memset(cbuf, 0, sizeof(cbuf));
	iov.iov_base = text;
	iov.iov_len = len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	do
		n = sendmsg(sfd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		snprintf(err, errlen, "QMP %s: sendmsg: %s", cmd,
		    n < 0 ? strerror(errno) : "nothing sent");
		free(text);
		free(c);
		return -1;
	}
	/* the rest of the line (a short send), and its end, in order */
	if (evbuffer_add(out, text + n, len - (size_t)n) < 0 ||
	    evbuffer_add(out, "\r\n", 2) < 0) {
		free(text);
		free(c);
		goto nomem;
	}
	free(text);
	c->id = q->next_id++;
	c->cb = cb;
	c->arg = arg;
	for (pp = &q->pending; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = c;
	return 0;
nomem:
	snprintf(err, errlen, "QMP %s: out of memory", cmd);
	return -1;
}

int
vmm_qmp_command(struct vmm_qmp *q, const char *cmd, json_t *args,
    vmm_qmp_reply_cb cb, void *arg, char *err, size_t errlen)
{
	if (q == NULL || q->phase == QMP_CLOSED || q->dead) {
		json_decref(args);
		snprintf(err, errlen, "QMP %s: not connected", cmd);
		return -1;
	}
	return qmp_enqueue(q, cmd, args, cb, arg, q->phase != QMP_READY, err,
	    errlen);
}

static void
qmp_dispatch(struct vmm_qmp *q, json_t *msg)
{
	struct qmp_cmd *c;
	json_t *v;
	char text[512];
	const char *name;

	if (q->phase == QMP_GREETING) {
		if (json_object_get(msg, "QMP") == NULL) {
			qmp_close(q, "QMP: no greeting from the VMM");
			return;
		}
		q->phase = QMP_NEGOTIATING;
		if (qmp_enqueue(q, "qmp_capabilities", NULL, qmp_caps_reply,
		    NULL, 0, text, sizeof(text)) < 0)
			qmp_close(q, text);
		return;
	}
	if ((v = json_object_get(msg, "event")) != NULL) {
		name = json_string_value(v);
		if (name != NULL && q->cbs.event != NULL)
			QMP_CALL(q, q->cbs.event(q, name,
			    json_object_get(msg, "data"), q->cbs.arg));
		return;
	}
	if ((v = json_object_get(msg, "return")) != NULL) {
		if ((c = qmp_take(q, json_object_get(msg, "id"))) == NULL)
			return;	/* a reply nobody waits for */
		if (c->cb != NULL)
			QMP_CALL(q, c->cb(q, v, NULL, c->arg));
		free(c);
		return;
	}
	if ((v = json_object_get(msg, "error")) != NULL) {
		vmm_qmp_error_text(v, text, sizeof(text));
		c = qmp_take(q, json_object_get(msg, "id"));
		if (c == NULL) {
			/* An error without our id: QEMU could not even parse
			 * what we sent. Nothing sane follows. */
			char why[600];

			snprintf(why, sizeof(why), "QMP protocol error: %s", text);
			qmp_close(q, why);
			return;
		}
		if (c->cb != NULL)
			QMP_CALL(q, c->cb(q, NULL, text, c->arg));
		free(c);
		return;
	}
	/* Unknown message kinds are ignored (forward compatibility). */
}

static void
qmp_read_cb(struct bufferevent *bev, void *arg)
{
	struct vmm_qmp *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	json_error_t jerr;
	json_t *msg;
	size_t n;
	char *line, why[300];

	q->busy++;
	while (!q->dead && q->phase != QMP_CLOSED) {
		line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
		if (line == NULL) {
			if (evbuffer_get_length(in) > QMP_LINE_MAX)
				qmp_close(q, "QMP: message too long");
			break;
		}
		if (n == 0) {
			free(line);
			continue;
		}
		msg = json_loadb(line, n, 0, &jerr);
		free(line);
		if (msg == NULL || !json_is_object(msg)) {
			snprintf(why, sizeof(why), "QMP: bad JSON from the VMM: %s",
			    msg == NULL ? jerr.text : "not an object");
			json_decref(msg);
			qmp_close(q, why);
			break;
		}
		qmp_dispatch(q, msg);
		json_decref(msg);
	}
	q->busy--;
	qmp_alive(q);
}

static void
qmp_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct vmm_qmp *q = arg;
	char why[300];

	(void)bev;
	if (what & BEV_EVENT_EOF)
		snprintf(why, sizeof(why), "QMP connection closed by the VMM");
	else if ((what & BEV_EVENT_ERROR) && (errno == EPIPE ||
	    errno == ECONNRESET))
		snprintf(why, sizeof(why), "QMP connection closed by the VMM "
		    "(%s)", strerror(errno));
	else if (what & BEV_EVENT_ERROR)
		snprintf(why, sizeof(why), "QMP connection error: %s",
		    strerror(errno));
	else
		return;
	q->busy++;
	qmp_close(q, why);
	q->busy--;
	qmp_alive(q);
}

struct vmm_qmp *
vmm_qmp_new(struct event_base *base, int fd, const struct vmm_qmp_cbs *cbs)
{
	struct vmm_qmp *q;
	int fl;

	if ((q = calloc(1, sizeof(*q))) == NULL) {
		close(fd);
		return NULL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	q->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (q->bev == NULL) {
		close(fd);
		free(q);
		return NULL;
	}
	q->cbs = *cbs;
	q->next_id = 1;
	q->phase = QMP_GREETING;
	bufferevent_setcb(q->bev, qmp_read_cb, NULL, qmp_event_cb, q);
	bufferevent_enable(q->bev, EV_READ | EV_WRITE);
	return q;
}

int
vmm_qmp_connect_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int fd, rc, dfd = -1;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) < sizeof(sun.sun_path))
		memcpy(sun.sun_path, path, strlen(path) + 1);
	else {
		/* a state directory deep enough to pass sun_path's 108
		 * bytes: the socket is named through its directory's open
		 * descriptor, /proc/self/fd/N/NAME */
		if (slash == NULL || slash == path ||
		    (size_t)(slash - path) >= sizeof(dir) ||
		    strlen(slash) + 32 >= sizeof(sun.sun_path)) {
			snprintf(err, errlen, "socket path too long (%zu >= %zu): "
			    "%s", strlen(path), sizeof(sun.sun_path), path);
			return -ENAMETOOLONG;
		}
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
		if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", dir, strerror(errno));
			return rc;
		}
		snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d%s",
		    dfd, slash);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "QMP socket: %s", strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	/* A unix-socket connect completes or fails at once (EAGAIN only when
	 * the listen backlog is full, which a VMM's QMP never has). */
	rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ? -errno : 0;
	if (dfd >= 0)
		close(dfd);
	if (rc < 0) {
		snprintf(err, errlen, "connect %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	return fd;
}

int
vmm_qmp_peer_is(int fd, uid_t uid, char *err, size_t errlen)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		snprintf(err, errlen, "QMP: SO_PEERCRED: %s", strerror(errno));
		return -errno;
	}
	if (cr.uid != uid) {
		snprintf(err, errlen, "QMP: the socket's owner is uid %u, not "
		    "the sandbox's %u: refused", (unsigned)cr.uid,
		    (unsigned)uid);
		return -EPERM;
	}
	return 0;
}
