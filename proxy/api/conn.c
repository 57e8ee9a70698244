/*
 * api/conn.c — the API's connections: listeners (unix socket, TCP with tokens),
 * their budgets and deadlines, and the request reader's loop.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

const struct timeval api_idle = { CTL_IDLE_SECS, 0 };

/* ---- connections ---- */

/* Frees c, or when a parser callback on the stack (c->busy) ends it, has
 * conn_read free it once the parser returned: the parser's state lives
 * in c. */
void
api_conn_free(struct conn *c)
{
	struct px_control *ctl = c->ctl;

	if (c->busy) {
		c->dead = 1;
		return;
	}
	if (c->st != NULL) {
		if (c->st->h != NULL)
			ctl->hooks.exec_cancel(c->st->h);
		api_cs_free(c->st);
		c->st = NULL;
	}
	/* a buffered exec nobody will read: killed in the guest (without
	 * the hook its answer still comes, and finds no connection) */
	if (c->pexec != NULL && ctl->hooks.exec_abandon != NULL) {
		ctl->hooks.exec_abandon(c->pexec, ctl->hooks.arg);
		free(c->pexec);
	}
	c->pexec = NULL;
	if (c->fedq != NULL)
		evbuffer_free(c->fedq);
	TAILQ_REMOVE(&ctl->conns, c, entry);
	ctl->nconns--;
	if (c->tcp)
		ctl->nconns_tcp--;
	if (c->deadline != NULL)
		event_free(c->deadline);
	bufferevent_free(c->bev);
	px_reqhead_free(&c->rh);
	free(c);
}

/* Answers a request the parser refused, then closes. */
static void
conn_fail(struct conn *c, int status, const char *msg)
{
	struct req r;

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = HTTP_GET;
	c->closing = 1;
	api_reply_error(&r, status, NULL, NULL, "%s", msg);
	bufferevent_disable(c->bev, EV_READ);
}

/* The request the reader holds (its body, if any, in body[0..len)):
 * its target split, its sender known, then its route's handler. */
static void
conn_dispatch(struct conn *c, const char *body, size_t len)
{
	struct req r;

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.method = (enum http_method)c->rh.method;
	r.body = body;
	r.bodylen = len;
	if (api_parse_target(&r, (const char *)evbuffer_pullup(c->rh.url, -1),
	    evbuffer_get_length(c->rh.url)) == 0 && api_authenticate(&r) == 0)
		api_route(&r);
}

/* A streamed request, from its head: its handler takes the body. */
void
api_conn_serve_early(struct conn *c)
{
	/* closing would stop reading the body: close after the answer */
	c->close_after = !c->rh.keepalive;
	conn_dispatch(c, "", 0);
	if (c->st != NULL && c->rh.expect)
		evbuffer_add(bufferevent_get_output(c->bev),
		    "HTTP/1.1 100 Continue\r\n\r\n", 25);
	px_reqhead_reset(&c->rh);
	if (c->st == NULL) {
		/* refused: its body is not read, the connection ends */
		c->closing = 1;
		bufferevent_disable(c->bev, EV_READ);
	}
}

void
api_conn_serve(struct conn *c)
{
	size_t len = evbuffer_get_length(c->rh.body);

	if (!c->rh.keepalive)	/* (an Upgrade too: never tunneled) */
		c->closing = 1;
	conn_dispatch(c, len ? (const char *)evbuffer_pullup(c->rh.body, -1) :
	    "", len);
	px_reqhead_reset(&c->rh);
	if (c->closing)
		bufferevent_disable(c->bev, EV_READ);
}

/* ---- the reader's loop (reqhead.h: px_reqhead_run) ---- */

static size_t
conn_room(void *arg)
{
	struct conn *c = arg;

	if (c->closing || c->throttled || (c->waiting && !c->rh.streamed) ||
	    (c->st != NULL && c->st->in_paused))
		return 0;
	c->busy++;	/* the step's callbacks may end c: conn_gone frees it */
	return SIZE_MAX;
}

static int
conn_gone(void *arg)
{
	struct conn *c = arg;

	c->busy--;
	if (c->dead) {
		/* a stream's callback ended it (cs_finish) */
		api_conn_free(c);
		return 1;
	}
	return 0;
}

/* a streamed request's head: served now */
static int
conn_head(void *arg)
{
	struct conn *c = arg;

	if (!c->early_served) {
		c->early_served = 1;
		api_conn_serve_early(c);
	}
	return 0;
}

static int
conn_complete(void *arg)
{
	struct conn *c = arg;

	api_conn_serve(c);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) >
	    CTL_OUT_HIGH) {
		c->throttled = 1;
		bufferevent_disable(c->bev, EV_READ);
	}
	return 0;
}

static void
conn_refused(void *arg)
{
	struct conn *c = arg;
	char msg[160];
	int status = px_reqhead_error(&c->rh, msg, sizeof(msg));

	api_conn_broken(c, status, msg);
}

static const struct px_reqhead_loop conn_loop = {
	.room = conn_room, .gone = conn_gone, .head = conn_head,
	.complete = conn_complete, .refused = conn_refused,
	/* (a streamed body's end: its stream took it, rh_stream_end) */
};

void
api_conn_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->fedq != NULL) {	/* its requests come parsed (fed.c) */
		api_fed_run(c);
		return;
	}
	(void)px_reqhead_run(&c->rh, bufferevent_get_input(bev), &conn_loop, c);
}

/* A request the reader (or the control helper) refused: answered, and
 * the connection closes. A streamed request's body that broke its
 * framing ends its operation; an answer under way is cut. (May free
 * c.) */
void
api_conn_broken(struct conn *c, int status, const char *msg)
{
	if (c->st != NULL) {
		int cut = c->st->head_sent;

		if (c->st->h != NULL)
			c->ctl->hooks.exec_cancel(c->st->h);
		api_cs_free(c->st);
		c->st = NULL;
		if (cut) {
			c->closing = 1;
			bufferevent_disable(c->bev, EV_READ);
			if (evbuffer_get_length(bufferevent_get_output(
			    c->bev)) == 0)
				api_conn_free(c);
			return;
		}
	}
	conn_fail(c, status, msg);
}

static void
conn_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	/* (a stream still answering closes once it ended: cs_finish; a
	 * deferred answer once written: libevent calls this when the socket
	 * is first writable too, with nothing written yet) */
	if (c->closing && c->st == NULL && !c->waiting) {
		api_conn_free(c);
		return;
	}
	if (c->throttled) {
		c->throttled = 0;
		bufferevent_enable(bev, EV_READ);
		api_conn_read(bev, c);
		return;
	}
	/* a stream's client caught up: take the guest's output again (may
	 * end the stream, and the connection: touch nothing after) */
	if (c->st != NULL && c->st->out_paused && c->st->h != NULL) {
		c->st->out_paused = 0;
		c->ctl->hooks.exec_read(c->st->h, 1);
	}
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		/* TLS handshake done: now the first request's turn */
		if (c->tcp && !c->authed) {
			struct timeval tv = { CTL_AUTH_SECS, 0 };

			evtimer_add(c->deadline, &tv);
		}
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && !c->closing &&
	    px_reqhead_started(&c->rh)) {
		/* a request started and stalled: say so, then close */
		conn_fail(c, 408, "request not received in time");
		bufferevent_enable(bev, EV_WRITE);
		return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		api_conn_eof(c);
		return;
	}
	api_conn_free(c);
}

/* The client half closed (or closed): answers under way still go out,
 * then the connection closes. (May free c.) */
void
api_conn_eof(struct conn *c)
{
	if (c->st != NULL && c->st->body_done) {
		/* after a whole streamed request: the answer still goes
		 * out, then the connection closes */
		c->close_after = 1;
		bufferevent_disable(c->bev, EV_READ);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) > 0) {
		/* after its requests: finish writing the answers, then
		 * close */
		c->closing = 1;
		bufferevent_disable(c->bev, EV_READ);
		return;
	}
	api_conn_free(c);
}

/* ---- the request reader's hooks (reqhead.h) ---- */

/* body bytes of a streamed request: to its stream; dropped once it
 * ended */
int
api_conn_stream_body(void *arg, const char *at, size_t len)
{
	struct conn *c = arg;

	if (c->dead)
		return -1;	/* ended meanwhile: read no further */
	if (c->st != NULL)
		api_cs_body(c->st, at, len);
	return 0;
}

void
api_conn_stream_end(void *arg)
{
	struct conn *c = arg;

	c->early_served = 0;
	if (c->st != NULL)
		api_cs_eof(c->st);
}

static const struct px_reqhead_hooks reqhead_hooks = {
	.stream_body = api_conn_stream_body,
	.stream_end = api_conn_stream_end,
};

/* ---- listener ---- */

/* A TCP connection missed its handshake or authentication deadline. */
static void
conn_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->authed)
		return;
	c->ctl->closed_deadline++;
	api_conn_free(c);
}

struct conn *
api_accept_conn(struct px_control *ctl, evutil_socket_t fd, int tcp,
    const struct sockaddr *sa, const char *peer)
{
	char addr[INET6_ADDRSTRLEN] = "";
	struct conn *c, *o;
	SSL *ssl;
	int n = 0, rc;

	if (tcp) {
		if (peer != NULL)	/* relayed by the control helper */
			snprintf(addr, sizeof(addr), "%s", peer);
		else if (sa != NULL && sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->
			    sin6_addr, addr, sizeof(addr));
		else if (sa != NULL && sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->
			    sin_addr, addr, sizeof(addr));
		if (ctl->nconns_tcp >= CTL_MAX_TCP) {
			ctl->refused_budget++;
			evutil_closesocket(fd);
			return NULL;
		}
		/* at most CTL_MAX_TCP connections to compare: no index */
		TAILQ_FOREACH(o, &ctl->conns, entry)
			n += o->tcp && strcmp(o->addr, addr) == 0;
		if (n >= CTL_MAX_PER_ADDR) {
			ctl->refused_addr++;
			evutil_closesocket(fd);
			return NULL;
		}
	} else if (ctl->nconns - ctl->nconns_tcp >= CTL_MAX_UNIX) {
		evutil_closesocket(fd);
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		evutil_closesocket(fd);
		return NULL;
	}
	c->ctl = ctl;
	c->serial = ++ctl->serial;
	c->tcp = tcp;
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	if (tcp && (c->deadline = evtimer_new(ctl->base, conn_deadline, c)) ==
	    NULL) {
		evutil_closesocket(fd);
		free(c);
		return NULL;
	}
	rc = px_reqhead_init(&c->rh, &reqhead_hooks, c, 0);
	if (tcp && ctl->ssl_ctx != NULL) {
		if ((ssl = SSL_new(ctl->ssl_ctx)) != NULL) {
			c->bev = bufferevent_openssl_socket_new(ctl->base, fd,
			    ssl, BUFFEREVENT_SSL_ACCEPTING,
			    BEV_OPT_CLOSE_ON_FREE);
			if (c->bev == NULL)
				SSL_free(ssl);
			else
				bufferevent_openssl_set_allow_dirty_shutdown(
				    c->bev, 1);
		} else
			c->bev = NULL;
	} else
		c->bev = bufferevent_socket_new(ctl->base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
	if (rc == -1 || c->bev == NULL) {
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		px_reqhead_free(&c->rh);
		if (c->deadline)
			event_free(c->deadline);
		free(c);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&ctl->conns, c, entry);
	ctl->nconns++;
	if (tcp) {
		/* TLS: the handshake first; plain TCP (tests): the request */
		struct timeval tv = { ctl->ssl_ctx != NULL ?
		    CTL_HANDSHAKE_SECS : CTL_AUTH_SECS, 0 };

		ctl->nconns_tcp++;
		evtimer_add(c->deadline, &tv);
	}
	bufferevent_setcb(c->bev, api_conn_read, conn_write, conn_event, c);
	bufferevent_set_timeouts(c->bev, &api_idle, &api_idle);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return c;
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	api_accept_conn(arg, fd, 0, NULL, NULL);
}

static void
accept_tcp_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	api_accept_conn(arg, fd, 1, sa, NULL);
}

void
px_control_count_refused(struct px_control *ctl, int reason)
{
	if (reason == PX_CONTROL_REFUSED_BUDGET)
		ctl->refused_budget++;
	else if (reason == PX_CONTROL_REFUSED_ADDRESS)
		ctl->refused_addr++;
	else if (reason == PX_CONTROL_REFUSED_DEADLINE)
		ctl->closed_deadline++;
}

static void
accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_control *ctl = arg;

	evconnlistener_enable(ctl->listener);
	if (ctl->tcp_listener != NULL)
		evconnlistener_enable(ctl->tcp_listener);
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct px_control *ctl = arg;
	struct timeval later = { 1, 0 };

	/* Out of descriptors most likely: a level-triggered listener would
	 * spin, so pause accepting for a second. */
	ctl->accept_errors++;
	evconnlistener_disable(ctl->listener);
	if (ctl->tcp_listener != NULL)
		evconnlistener_disable(ctl->tcp_listener);
	event_add(ctl->accept_retry, &later);
}

int
px_control_listen_tcp(struct px_control *ctl, const char *addr,
    void *ssl_ctx, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss);

	if (ctl->tcp_listener != NULL) {
		snprintf(err, errlen, "the control API already has a TCP "
		    "listener");
		return -1;
	}
	memset(&ss, 0, sizeof(ss));
	if (addr == NULL || evutil_parse_sockaddr_port(addr,
	    (struct sockaddr *)&ss, &len) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    (ss.ss_family == AF_INET ?
	    ((struct sockaddr_in *)&ss)->sin_port :
	    ((struct sockaddr_in6 *)&ss)->sin6_port) == 0) {
		snprintf(err, errlen, "control listen address '%s': use "
		    "ADDRESS:PORT, as in 127.0.0.1:9443 or [::1]:9443",
		    addr ? addr : "");
		return -1;
	}
	ctl->tcp_listener = evconnlistener_new_bind(ctl->base, accept_tcp_cb,
	    ctl, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
	    LEV_OPT_REUSEABLE, 64, (struct sockaddr *)&ss, len);
	if (ctl->tcp_listener == NULL) {
		snprintf(err, errlen, "control listen %s: %s", addr,
		    strerror(errno));
		return -1;
	}
	evconnlistener_set_error_cb(ctl->tcp_listener, accept_error_cb);
	ctl->ssl_ctx = ssl_ctx;
	return 0;
}

/* Binds and listens on path; -1 with err filled. */
static int
listen_unix(struct px_control *ctl, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int fd, probe;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "control socket path too long (%zu bytes, "
		    "at most %zu): %s", strlen(path), sizeof(sun.sun_path) - 1,
		    path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket",
			    path);
			return -1;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (probe == -1) {
			snprintf(err, errlen, "socket: %s", strerror(errno));
			return -1;
		}
		if (connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0 ||
		    errno == EAGAIN || errno == EINPROGRESS) {
			close(probe);
			snprintf(err, errlen, "another server is listening on %s",
			    path);
			return -1;
		}
		if (errno != ECONNREFUSED) {
			snprintf(err, errlen, "probing %s: %s", path,
			    strerror(errno));
			close(probe);
			return -1;
		}
		close(probe);
		if (unlink(path) == -1 && errno != ENOENT) {
			snprintf(err, errlen, "removing stale socket %s: %s",
			    path, strerror(errno));
			return -1;
		}
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* The socket file's mode comes from the umask at bind(); chmod
	 * afterwards alone would leave a window. */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int saved = errno;

		umask(old);
		snprintf(err, errlen, "bind %s: %s", path, strerror(saved));
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(path, 0600) == -1 || listen(fd, 64) == -1 ||
	    stat(path, &st) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(path);
		close(fd);
		return -1;
	}
	ctl->sock_dev = st.st_dev;
	ctl->sock_ino = st.st_ino;
	return fd;
}

struct px_control *
px_control_new(struct event_base *base, struct px_store *store,
    const char *sock_path, const struct px_control_hooks *hooks,
    char *err, size_t errlen)
{
	struct px_control *ctl;
	int fd;

	if ((ctl = calloc(1, sizeof(*ctl))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	TAILQ_INIT(&ctl->conns);
	ctl->base = base;
	ctl->store = store;
	if (hooks != NULL)
		ctl->hooks = *hooks;
	ctl->domain = strdup(ctl->hooks.domain ? ctl->hooks.domain :
	    "berth.localhost");
	ctl->sock_path = strdup(sock_path);
	ctl->hooks.domain = ctl->domain;
	if (ctl->hooks.template_dir != NULL &&
	    (ctl->template_dir = strdup(ctl->hooks.template_dir)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	ctl->hooks.template_dir = ctl->template_dir;
	if (ctl->domain == NULL || ctl->sock_path == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (api_table_check(api_routes, api_nroutes, err, errlen) == -1)
		goto fail;
	if (ctl->hooks.https_port == 0 || ctl->hooks.https_port > 65535) {
		snprintf(err, errlen, "invalid HTTPS port %u",
		    ctl->hooks.https_port);
		goto fail;
	}
	if ((ctl->accept_retry = evtimer_new(base, accept_retry_cb, ctl)) ==
	    NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if ((fd = listen_unix(ctl, sock_path, err, errlen)) == -1) {
		free(ctl->sock_path);
		ctl->sock_path = NULL;	/* not ours: do not unlink */
		goto fail;
	}
	ctl->listener = evconnlistener_new(base, accept_cb, ctl,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (ctl->listener == NULL) {
		snprintf(err, errlen, "cannot listen on %s", sock_path);
		close(fd);
		goto fail;
	}
	evconnlistener_set_error_cb(ctl->listener, accept_error_cb);
	return ctl;
fail:
	px_control_free(ctl);
	return NULL;
}

struct conn *
api_conn_find(struct px_control *ctl, struct conn *c, uint64_t serial)
{
	struct conn *x;

	TAILQ_FOREACH(x, &ctl->conns, entry)
		if (x == c && x->serial == serial)
			return x;
	return NULL;
}

void
px_control_free(struct px_control *ctl)
{
	struct conn *c;
	struct stat st;

	if (ctl == NULL)
		return;
	api_drain_free();
	while ((c = TAILQ_FIRST(&ctl->conns)) != NULL) {
		/* berthd is ending: an answer already made (the ones the
		 * shutdown itself gave, say) goes out if the socket takes it
		 * now, without waiting; not through TLS, whose records the
		 * bufferevent would have to make */
		if (bufferevent_openssl_get_ssl(c->bev) == NULL) {
			struct evbuffer *out = bufferevent_get_output(c->bev);

			/* thawed as the bufferevent's own write does */
			evbuffer_unfreeze(out, 1);
			(void)evbuffer_write(out, bufferevent_getfd(c->bev));
			evbuffer_freeze(out, 1);
		}
		api_conn_free(c);
	}
	if (ctl->listener != NULL)
		evconnlistener_free(ctl->listener);
	if (ctl->tcp_listener != NULL)
		evconnlistener_free(ctl->tcp_listener);
	if (ctl->accept_retry != NULL)
		event_free(ctl->accept_retry);
	/* Unlink only the socket we made, not a successor's. */
	if (ctl->sock_path != NULL && ctl->sock_ino != 0 &&
	    lstat(ctl->sock_path, &st) == 0 && st.st_dev == ctl->sock_dev &&
	    st.st_ino == ctl->sock_ino)
		unlink(ctl->sock_path);
	free(ctl->sock_path);
	free(ctl->domain);
	free(ctl->template_dir);
	free(ctl);
}
