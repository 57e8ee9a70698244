/*
 * respond.c — what berthd answers itself: error pages (HTML for browsers,
 * JSON otherwise) with their status texts (status.c), and the access log
 * line and counters every exchange ends with.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "session.h"
#include "log.h"
#include "status.h"
#include "tls.h"

#include <http_parser.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

static void
json_escape(char *out, size_t outlen, const char *in)
{
	size_t o = 0;

	for (; *in && o + 7 < outlen; in++) {
		unsigned char ch = *in;

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = ch;
		} else if (ch < 0x20) {
			o += snprintf(out + o, outlen - o, "\\u%04x", ch);
		} else {
			out[o++] = ch;
		}
	}
	out[o] = '\0';
}

static void
html_escape(char *out, size_t outlen, const char *in)
{
	size_t o = 0;

	for (; *in && o + 7 < outlen; in++) {
		switch (*in) {
		case '<': o += snprintf(out + o, outlen - o, "&lt;"); break;
		case '>': o += snprintf(out + o, outlen - o, "&gt;"); break;
		case '&': o += snprintf(out + o, outlen - o, "&amp;"); break;
		case '"': o += snprintf(out + o, outlen - o, "&quot;"); break;
		default: out[o++] = *in;
		}
	}
	out[o] = '\0';
}

static int
wants_html(const struct px_sess *s)
{
	const struct px_hdr *a;

	if (s->req.raw == NULL || (a = px_head_get(&s->req, "accept")) == NULL)
		return 0;
	return memmem(a->value, a->vlen, "text/html", 9) != NULL;
}

/*
 * Answers the current request with an error page (HTML for browsers,
 * JSON otherwise) naming the sandbox and the reason. The connection
 * closes afterwards unless the request was fully read and the error
 * leaves the stream in sync.
 */
void
px_respond_error(struct px_sess *s, int status, const char *reason, const char *extra_hdrs)
{
	struct evbuffer *out = bufferevent_get_output(s->c);
	char body[2048], esc[768], esc2[128];
	int n, close_conn;

	px_xport_flush(s->xp);
	close_conn = s->close_after || status == 400 || status == 408 ||
	    status == 413 || status == 431 || status == 501 || status == 505 ||
	    status == 417 || s->req.raw == NULL || s->state == S_BODY ||
	    (px_request_body(&s->req) != PX_BODY_NONE && !s->req_done) ||
	    !px_head_keepalive(&s->req) || s->w->draining;
	if (s->resp_head_sent) {
		/* Too late for a page: the response is already on its way.
		 * Its line says what was sent; the log says why it stopped. */
		log_warnx("request %s: %s %u: response cut after %llu bytes: %s",
		    s->reqid, s->m.sandbox[0] ? s->m.sandbox : "-", s->m.guest_port,
		    (unsigned long long)s->bytes_out, reason);
		if (!s->logged)
			px_respond_log(s);
		s->close_after = 1;
		s->state = S_CLOSING;
		if (evbuffer_get_length(out) == 0)
			px_sess_free(s);
		return;
	}
	if (wants_html(s)) {
		html_escape(esc, sizeof(esc), reason);
		html_escape(esc2, sizeof(esc2), s->m.sandbox[0] ? s->m.sandbox : "-");
		n = snprintf(body, sizeof(body),
		    "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
		    "<title>%d %s</title></head><body>"
		    "<h1>%d %s</h1><p>%s</p><p>sandbox: <code>%s</code></p>"
		    "<hr><p><small>berth</small></p></body></html>\n",
		    status, px_status_text(status), status, px_status_text(status),
		    esc, esc2);
	} else {
		json_escape(esc, sizeof(esc), reason);
		json_escape(esc2, sizeof(esc2), s->m.sandbox);
		n = snprintf(body, sizeof(body),
		    "{\"error\":{\"status\":%d,\"sandbox\":%s%s%s,\"reason\":\"%s\"}}\n",
		    status, s->m.sandbox[0] ? "\"" : "", s->m.sandbox[0] ? esc2 : "null",
		    s->m.sandbox[0] ? "\"" : "", esc);
	}
	if (n < 0 || (size_t)n >= sizeof(body))
		n = (int)strlen(body);
	evbuffer_add_printf(out,
	    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
	    "Cache-Control: no-store\r\nX-Request-Id: %s\r\n%s%s\r\n",
	    status, px_status_text(status),
	    wants_html(s) ? "text/html; charset=utf-8" : "application/json",
	    n, s->reqid, extra_hdrs ? extra_hdrs : "",
	    close_conn ? "Connection: close\r\n" : "");
	if (s->req.method != HTTP_HEAD || s->req.raw == NULL)
		evbuffer_add(out, body, n);
	s->status = status;
	s->bytes_out += n;
	if (status >= 500)
		s->w->stats.upstream_errors += (status == 502 || status == 504);
	px_respond_log(s);
	if (close_conn) {
		s->state = S_CLOSING;
		bufferevent_disable(s->c, EV_READ);
		return;		/* client_write frees once flushed */
	}
	px_sess_next(s);
}

/* ---- access log ---- */

/*
 * One access log line: time, client, Host, sandbox, port, method, path
 * (without its query: tokens live there; at most 511 bytes), status,
 * bytes out, upstream and total milliseconds, request id. NULL or empty
 * fields are "-". Every byte comes validated by its parser (http1.c or
 * nghttp2): no control bytes reach the log.
 */
void
px_access_line(int fd, const char *peer, const char *host, size_t hostlen,
    const char *sandbox, unsigned port, const char *method, size_t mlen,
    const char *target, size_t tlen, int status, unsigned long long bytes,
    long up_ms, long total_ms, const char *reqid)
{
	char line[2048], tbuf[32];
	struct timespec rt;
	struct tm tm;
	size_t plen = 0;
	int n;

	while (target != NULL && plen < tlen && plen < 511 && target[plen] != '?')
		plen++;
	if (host == NULL || hostlen == 0) {
		host = "-";
		hostlen = 1;
	}
	if (method == NULL || mlen == 0) {
		method = "-";
		mlen = 1;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	gmtime_r(&rt.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line),
	    "access %s.%03ldZ %s %.*s %s %u %.*s %.*s %d %llu %ld %ld %s\n",
	    tbuf, rt.tv_nsec / 1000000, peer,
	    (int)(hostlen > 253 ? 253 : hostlen), host,
	    sandbox != NULL ? sandbox : "-", port, (int)mlen, method,
	    plen ? (int)plen : 1, plen ? target : "-", status, bytes,
	    up_ms, total_ms, reqid != NULL && reqid[0] ? reqid : "-");
	if (n > 0)
		log_access(fd, line, (size_t)n < sizeof(line) ? (size_t)n :
		    sizeof(line) - 1);
}


void
px_respond_log(struct px_sess *s)
{
	const struct px_hdr *h = s->req.host;
	struct px_sbstat *st;
	int cls = s->status / 100;

	s->logged = 1;
	s->w->stats.requests++;
	s->w->stats.status[cls >= 1 && cls <= 5 ? cls : 0]++;
	s->w->stats.bytes_in += s->bytes_in;
	s->w->stats.bytes_out += s->bytes_out;
	if (s->sb != NULL) {
		s->sb->requests++;
		s->sb->bytes_in += s->bytes_in;
		s->sb->bytes_out += s->bytes_out;
	}
	/* metrics: the sandbox its Host named, also when berthd answered
	 * itself (401, 404 for a port, 503); else the one it is bound to */
	if ((st = s->m.sb != NULL ? s->m.sb->stat : s->sb) != NULL) {
		st->m_requests++;
		st->m_status[cls >= 1 && cls <= 5 ? cls : 0]++;
		st->m_bytes_in += s->bytes_in;
		st->m_bytes_out += s->bytes_out;
	}
	if (s->w->access_fd < 0)
		return;
	px_access_line(s->w->access_fd, s->peer,
	    h ? h->value : NULL, h ? h->vlen : 0,
	    s->m.sandbox[0] ? s->m.sandbox : NULL, s->m.guest_port,
	    s->req.raw ? s->req.method_str : NULL, s->req.raw ? s->req.method_len : 0,
	    s->req.raw ? s->req.target : NULL, s->req.raw ? s->req.target_len : 0,
	    s->status, (unsigned long long)s->bytes_out,
	    px_ms_since(&s->t_up), px_ms_since(&s->t0), s->reqid);
}

