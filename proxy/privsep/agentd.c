/*
 * agentd.c — the guest agent reader helper ("berthd: agent"),
 * unprivileged and chrooted (proc.h): it reads and parses every byte a
 * sandbox's guest agent sends (vmm/proto/agent_proto.h) on the
 * connections the parent made, and sends the parent typed messages
 * (helper.h: HM_AGENT_*). It gets no connection itself: per connection
 * the read end of a pipe the parent fills with the guest's bytes as
 * they came (sandbox/agentio.c); the socket, and every frame toward the
 * guest, stay the parent's (exec.c). Nothing here can write to a guest.
 *
 * Per connection the frames are parsed as they come, never whole: a
 * header, the channel (protocol 2: every frame but the pong names one,
 * passed on as it is: the parent knows its channels), then the payload,
 * where stdout and stderr bytes go to the
 * parent in pieces as the window allows (so a 256 KiB frame is never
 * held) and a short frame (pong, exit, failure) is kept up to
 * HM_AGENT_TEXT bytes, the rest skipped. Limits: a frame longer than
 * BA_MAX_PAYLOAD ends the connection (HM_AGENT_ERROR); at most
 * AD_BUF bytes read ahead per connection; at most HM_AGENT_WINDOW output
 * bytes unacknowledged, past which its pipe is not read (backpressure:
 * its virtio ring fills, the command blocks on its pipe).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "helper.h"
#include "log.h"
#include "proc.h"
#include "agent_proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#define AD_BUF		(64 * 1024)	/* read ahead per connection */
#define AD_CONNS_MAX	4096		/* one per sandbox */
#define AD_TEXT		(BA_EVENT_PATH + 64)	/* a short frame, kept */

struct aconn {
	TAILQ_ENTRY(aconn) entry;
	uint64_t	 id;
	int		 fd;
	struct event	*ev;
	int		 reading;	/* ev added */
	unsigned char	 nonce[HM_AGENT_NONCE];
	int		 synced;	/* the pong came: frames count */
	int		 proto;		/* the agent's, from its pong */
	/* the frame being parsed */
	unsigned char	 hdr[BA_HDR];
	size_t		 hdrlen;
	unsigned char	 chanb[BA_CHAN];
	size_t		 chanlen;	/* of chanb read; BA_CHAN: chan set */
	uint32_t	 chan;
	uint32_t	 paylen;	/* the payload's, after the channel */
	uint32_t	 left;		/* payload bytes still to come */
	size_t		 textlen;	/* kept of a short frame's payload */
	char		 text[AD_TEXT];
	uint32_t	 unacked;	/* output bytes the parent has not taken */
	size_t		 start, end;	/* unparsed bytes in buf */
	unsigned char	 buf[AD_BUF];
};

static struct {
	struct event_base *base;
	struct px_chan	*ch;
	TAILQ_HEAD(, aconn) conns;
	int		 nconns;
} A;

static void
conn_free(struct aconn *c)
{
	TAILQ_REMOVE(&A.conns, c, entry);
	A.nconns--;
	event_free(c->ev);
	close(c->fd);
	free(c);
}

static struct aconn *
conn_find(uint64_t id)
{
	struct aconn *c;

	TAILQ_FOREACH(c, &A.conns, entry)
		if (c->id == id)
			return c;
	return NULL;
}

static void
send_closed(struct aconn *c)
{
	struct hm_agent_id m = { c->id };

	px_chan_send(A.ch, HM_AGENT_CLOSED, &m, sizeof(m), NULL, 0);
	conn_free(c);
}

/* printable ASCII of n bytes of p into dst (NUL-terminated) */
static void
printable(char *dst, size_t dstlen, const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n && i < dstlen - 1; i++)
		dst[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
	dst[i] = '\0';
}

static void __attribute__((format(printf, 2, 3)))
proto_error(struct aconn *c, const char *fmt, ...)
{
	struct hm_agent_error m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.id = c->id;
	va_start(ap, fmt);
	vsnprintf(m.msg, sizeof(m.msg), fmt, ap);
	va_end(ap);
	log_debug("connection %llu: %s", (unsigned long long)c->id, m.msg);
	px_chan_send(A.ch, HM_AGENT_ERROR, &m, sizeof(m), NULL, 0);
	conn_free(c);
}

/* "exit N" or "signal N", then " timeout" when the agent killed it at
 * its deadline; N decimal, without sign or leading zeros. 0 when well
 * formed. */
static int
parse_exit(const char *s, struct hm_agent_exit *m)
{
	const char *p;
	int n = 0, digits = 0;

	if (strncmp(s, "exit ", 5) == 0) {
		m->exited = 1;
		p = s + 5;
	} else if (strncmp(s, "signal ", 7) == 0) {
		m->exited = 0;
		p = s + 7;
	} else
		return -1;
	for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
		n = n * 10 + (*p - '0');
	if (digits == 0 || digits > 3 || (digits > 1 && p[-digits] == '0'))
		return -1;
	if (strcmp(p, " timeout") == 0)
		m->timed_out = 1;
	else if (*p != '\0')
		return -1;
	if (m->exited ? n > 255 : n < 1 || n > 127)
		return -1;
	if (m->exited)
		m->code = n;
	else
		m->signal = n;
	return 0;
}

/* A decimal number of at most 19 digits, no sign, no leading zero, up
 * to a space or the end; *s moves past it (and the space). 0 when well
 * formed. */
static int
parse_num(const char **s, uint64_t *v)
{
	const char *p = *s;
	int digits = 0;

	*v = 0;
	for (; *p >= '0' && *p <= '9' && digits < 20; p++, digits++)
		*v = *v * 10 + (uint64_t)(*p - '0');
	if (digits == 0 || digits > 19 || (digits > 1 && p[-digits] == '0') ||
	    (*p != ' ' && *p != '\0'))
		return -1;
	*s = *p == ' ' ? p + 1 : p;
	return 0;
}

/* "running", "exit:N" (0..255) or "signal:N" (1..127), then a space or
 * the end. 0 when well formed. */
static int
parse_state(const char **s, int32_t *state, int32_t *code)
{
	uint64_t n;

	*code = 0;
	if (strncmp(*s, "running", 7) == 0 && ((*s)[7] == ' ' ||
	    (*s)[7] == '\0')) {
		*state = HM_PROC_RUNNING;
		*s += (*s)[7] == ' ' ? 8 : 7;
		return 0;
	}
	if (strncmp(*s, "exit:", 5) == 0) {
		*state = HM_PROC_EXITED;
		*s += 5;
		if (parse_num(s, &n) < 0 || n > 255)
			return -1;
	} else if (strncmp(*s, "signal:", 7) == 0) {
		*state = HM_PROC_SIGNALED;
		*s += 7;
		if (parse_num(s, &n) < 0 || n < 1 || n > 127)
			return -1;
	} else
		return -1;
	*code = (int32_t)n;
	return 0;
}

/* 'S', 'Q', 'M' (agent_proto.h): 0, or -1 when malformed. */
static int
proc_frame(struct aconn *c, int type)
{
	const char *s = c->text;
	uint64_t a, b, k;

	if (memchr(c->text, '\0', c->textlen) != NULL)
		return -1;
	if (type == BA_STARTED) {
		struct hm_agent_started m;

		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		if (c->paylen != c->textlen || parse_num(&s, &a) < 0 ||
		    a == 0 || a > UINT32_MAX || *s == '\0' ||
		    parse_num(&s, &b) < 0 || b == 0 || b > INT32_MAX ||
		    *s != '\0')
			return -1;
		m.proc = (uint32_t)a;
		m.pid = (int32_t)b;
		px_chan_send(A.ch, HM_AGENT_STARTED, &m, sizeof(m), NULL, 0);
	} else if (type == BA_PROC) {
		struct hm_agent_proc m;

		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		/* the command may have been cut at HM_AGENT_TEXT - 1 */
		if (parse_num(&s, &a) < 0 || a == 0 || a > UINT32_MAX ||
		    parse_num(&s, &b) < 0 || b == 0 || b > INT32_MAX ||
		    parse_state(&s, &m.state, &m.code) < 0 ||
		    parse_num(&s, &k) < 0 || k > INT64_MAX)
			return -1;
		m.proc = (uint32_t)a;
		m.pid = (int32_t)b;
		m.start_ms = (int64_t)k;
		if (parse_num(&s, &k) < 0 || k > 1 || parse_num(&s, &m.total) < 0)
			return -1;
		m.keep = (int32_t)k;
		printable(m.cmd, sizeof(m.cmd), s, c->textlen - (size_t)(s -
		    c->text));
		px_chan_send(A.ch, HM_AGENT_PROC, &m, sizeof(m), NULL, 0);
	} else {
		struct hm_agent_ring m;

		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		if (c->paylen != c->textlen || parse_num(&s, &m.first) < 0 ||
		    parse_num(&s, &m.total) < 0 || m.first > m.total ||
		    parse_state(&s, &m.state, &m.code) < 0 || *s != '\0')
			return -1;
		px_chan_send(A.ch, HM_AGENT_RING, &m, sizeof(m), NULL, 0);
	}
	return 0;
}

/* A word of words[] (n of them) up to a space; its index, or -1. *s
 * moves past the space. */
static int
parse_word(const char **s, const char *const *words, int n)
{
	size_t k;
	int i;

	for (i = 0; i < n; i++) {
		k = strlen(words[i]);
		if (strncmp(*s, words[i], k) == 0 && (*s)[k] == ' ') {
			*s += k + 1;
			return i;
		}
	}
	return -1;
}

/* 'N' and 'Y' (agent_proto.h): 0, or -1 when malformed. */
static int
fs_frame(struct aconn *c, int type)
{
	static const char *const ftypes[] = { "file", "dir", "link", "fifo",
		"socket", "char", "block", "other" };
	static const char *const events[] = { "create", "modify", "attrib",
		"delete", "move_from", "move_to", "delete_self", "overflow",
		"unwatched", "ready" };
	const char *s = c->text, *end = c->text + c->textlen;
	uint64_t a, b;
	size_t n;

	if (c->paylen != c->textlen || memchr(c->text, '\0', c->textlen) !=
	    NULL)
		return -1;
	if (type == BA_ENTRY) {
		struct hm_agent_entry m;
		unsigned mode = 0;
		int digits = 0;

		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		m.bytes = c->paylen;
		if ((m.type = parse_word(&s, ftypes, 8)) < 0)
			return -1;
		for (; *s >= '0' && *s <= '7' && digits < 6; s++, digits++)
			mode = mode * 8 + (unsigned)(*s - '0');
		if (digits == 0 || digits > 5 || mode > 07777 || *s++ != ' ')
			return -1;
		m.mode = mode;
		if (parse_num(&s, &a) < 0 || parse_num(&s, &b) < 0 ||
		    b > INT64_MAX || s >= end)
			return -1;
		m.size = a;
		m.mtime_ms = (int64_t)b;
		n = (size_t)(end - s);
		if (n > 255 || memchr(s, '/', n) != NULL)
			return -1;
		m.namelen = (uint32_t)n;
		memcpy(m.name, s, n);
		px_chan_send(A.ch, HM_AGENT_ENTRY, &m, sizeof(m), NULL, 0);
	} else {
		struct {
			struct hm_agent_event h;
			char path[BA_EVENT_PATH];
		} m;

		memset(&m.h, 0, sizeof(m.h));
		m.h.id = c->id;
		m.h.chan = c->chan;
		m.h.bytes = c->paylen;
		if ((m.h.event = parse_word(&s, events, HM_EV_COUNT)) < 0 ||
		    (s[0] != '0' && s[0] != '1') || s[1] != ' ')
			return -1;
		m.h.dir = s[0] == '1';
		s += 2;
		if (parse_num(&s, &a) < 0 || a > UINT32_MAX || s >= end ||
		    *s != '/' || (n = (size_t)(end - s)) > BA_EVENT_PATH)
			return -1;
		m.h.cookie = (uint32_t)a;
		m.h.pathlen = (uint32_t)n;
		memcpy(m.path, s, n);
		px_chan_send(A.ch, HM_AGENT_EVENT, &m, sizeof(m.h) + n, NULL,
		    0);
	}
	return 0;
}

/* A short frame is whole (its first HM_AGENT_TEXT - 1 bytes in text).
 * 0, or -1 when c is gone. */
static int
frame_done(struct aconn *c)
{
	uint32_t len = c->paylen;
	int type = c->hdr[4];

	c->hdrlen = 0;
	c->text[c->textlen] = '\0';
	if (!c->synced) {
		/* only our pong counts; the rest is an older talk's. The
		 * nonce alone: protocol 1; then a protocol byte: 2 */
		if (type == BA_PONG && (len == HM_AGENT_NONCE ||
		    (len == HM_AGENT_NONCE + 1 &&
		    (unsigned char)c->text[HM_AGENT_NONCE] >= 2 &&
		    (unsigned char)c->text[HM_AGENT_NONCE] <= BA_PROTO)) &&
		    memcmp(c->text, c->nonce, HM_AGENT_NONCE) == 0) {
			struct hm_agent_pong m;

			memset(&m, 0, sizeof(m));
			m.id = c->id;
			memcpy(m.nonce, c->nonce, sizeof(m.nonce));
			m.proto = len == HM_AGENT_NONCE ? 1 :
			    (unsigned char)c->text[HM_AGENT_NONCE];
			c->synced = 1;
			c->proto = m.proto;
			px_chan_send(A.ch, HM_AGENT_PONG, &m, sizeof(m), NULL, 0);
		}
		return 0;
	}
	if ((type == BA_STARTED || type == BA_PROC || type == BA_RING) &&
	    c->proto >= 2) {
		if (proc_frame(c, type) < 0) {
			proto_error(c, "the guest agent sent a malformed '%c' "
			    "frame", type);
			return -1;
		}
	} else if ((type == BA_ENTRY || type == BA_EVENT) && c->proto >= 2) {
		if (fs_frame(c, type) < 0) {
			proto_error(c, "the guest agent sent a malformed '%c' "
			    "frame", type);
			return -1;
		}
	} else if (type == BA_STDIN_ACK && c->proto >= 2) {
		struct hm_agent_inack m;

		if (len != 4) {
			proto_error(c, "the guest agent sent a stdin "
			    "acknowledgement of %u bytes", (unsigned)len);
			return -1;
		}
		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		m.bytes = ba_get32((const unsigned char *)c->text);
		px_chan_send(A.ch, HM_AGENT_INACK, &m, sizeof(m), NULL, 0);
	} else if (type == BA_EXIT) {
		struct hm_agent_exit m;

		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		if (len != c->textlen || memchr(c->text, '\0', c->textlen) !=
		    NULL || parse_exit(c->text, &m) != 0) {
			proto_error(c, "the guest agent answered an unknown "
			    "exit status");
			return -1;
		}
		px_chan_send(A.ch, HM_AGENT_EXIT, &m, sizeof(m), NULL, 0);
	} else if (type == BA_FAIL) {
		struct hm_agent_fail m;
		size_t skip = 0;

		memset(&m, 0, sizeof(m));
		m.id = c->id;
		m.chan = c->chan;
		/* "400 ...": the request's fault (agent_proto.h) */
		if (c->textlen >= 4 && (strncmp(c->text, "400 ", 4) == 0 ||
		    strncmp(c->text, "404 ", 4) == 0 ||
		    strncmp(c->text, "409 ", 4) == 0 ||
		    strncmp(c->text, "429 ", 4) == 0)) {
			m.status = atoi(c->text);
			skip = 4;
		}
		printable(m.msg, sizeof(m.msg), c->text + skip,
		    c->textlen - skip);
		px_chan_send(A.ch, HM_AGENT_FAIL, &m, sizeof(m), NULL, 0);
	}
	/* the rest (pongs of the same ping sent again, unknown types):
	 * nothing for the parent */
	return 0;
}

static void
output(struct aconn *c, const unsigned char *p, size_t n)
{
	struct {
		struct hm_agent_output h;
		unsigned char b[HM_AGENT_CHUNK];
	} m;

	memset(&m.h, 0, sizeof(m.h));
	m.h.id = c->id;
	m.h.chan = c->chan;
	m.h.stream = c->hdr[4];
	m.h.len = (uint32_t)n;
	if (n > 0)
		memcpy(m.b, p, n);
	px_chan_send(A.ch, HM_AGENT_OUTPUT, &m, sizeof(m.h) + n, NULL, 0);
	c->unacked += (uint32_t)n;
}

/* Parses what buf holds. 1: all of it; 0: stopped at a full window;
 * -1: c is gone. */
static int
parse(struct aconn *c)
{
	size_t avail, n;
	int type;

	while ((avail = c->end - c->start) > 0 || (c->hdrlen == BA_HDR &&
	    c->left == 0)) {
		if (c->hdrlen < BA_HDR) {
			n = BA_HDR - c->hdrlen < avail ? BA_HDR - c->hdrlen : avail;
			memcpy(c->hdr + c->hdrlen, c->buf + c->start, n);
			c->start += n;
			c->hdrlen += n;
			if (c->hdrlen < BA_HDR)
				break;
			c->left = c->paylen = ba_hdr_len(c->hdr);
			c->textlen = 0;
			c->chan = 0;
			c->chanlen = BA_CHAN;	/* none to read */
			if (c->left > BA_MAX_PAYLOAD) {
				proto_error(c, "the guest agent sent a frame of "
				    "%u bytes", (unsigned)c->left);
				return -1;
			}
			type = c->hdr[4];
			if (c->synced && c->proto >= 2 && type != BA_PONG) {
				if (c->left < BA_CHAN) {
					proto_error(c, "the guest agent sent a "
					    "frame without its channel");
					return -1;
				}
				c->chanlen = 0;
				c->paylen -= BA_CHAN;
			} else if (c->left == 0 && c->synced &&
			    (type == BA_STDOUT || type == BA_STDERR)) {
				output(c, NULL, 0);	/* as the agent sent it */
				c->hdrlen = 0;
			}
			continue;
		}
		type = c->hdr[4];
		if (c->chanlen < BA_CHAN) {
			n = BA_CHAN - c->chanlen < avail ? BA_CHAN - c->chanlen :
			    avail;
			memcpy(c->chanb + c->chanlen, c->buf + c->start, n);
			c->start += n;
			c->chanlen += n;
			c->left -= (uint32_t)n;
			if (c->chanlen < BA_CHAN)
				break;
			c->chan = ba_get32(c->chanb);
			if (c->left == 0 && (type == BA_STDOUT ||
			    type == BA_STDERR))
				c->hdrlen = 0;	/* empty: nothing to pass */
			else if (c->left == 0 && frame_done(c) < 0)
				return -1;
			continue;
		}
		if (c->left > 0 && c->synced &&
		    (type == BA_STDOUT || type == BA_STDERR)) {
			size_t room = HM_AGENT_WINDOW - c->unacked;

			if (room == 0)
				return 0;
			n = c->left < avail ? c->left : avail;
			if (n > HM_AGENT_CHUNK)
				n = HM_AGENT_CHUNK;
			if (n > room)
				n = room;
			output(c, c->buf + c->start, n);
			c->start += n;
			c->left -= (uint32_t)n;
			if (c->left == 0)
				c->hdrlen = 0;
			continue;
		}
		n = c->left < avail ? c->left : avail;
		if (c->textlen < sizeof(c->text) - 1) {
			size_t k = sizeof(c->text) - 1 - c->textlen;

			memcpy(c->text + c->textlen, c->buf + c->start,
			    n < k ? n : k);
			c->textlen += n < k ? n : k;
		}
		c->start += n;
		c->left -= (uint32_t)n;
		if (c->left == 0 && frame_done(c) < 0)
			return -1;
	}
	if (c->start == c->end)
		c->start = c->end = 0;
	return 1;
}

static void
set_reading(struct aconn *c, int on)
{
	if (c->reading == on)
		return;
	c->reading = on;
	if (on)
		event_add(c->ev, NULL);
	else
		event_del(c->ev);
}

static void
readable(evutil_socket_t fd, short what, void *arg)
{
	struct aconn *c = arg;
	ssize_t n;
	int r;

	(void)what;
	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->end == sizeof(c->buf)) {
		set_reading(c, 0);	/* full: parse frees room first */
		return;
	}
	n = read(fd, c->buf + c->end, sizeof(c->buf) - c->end);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* what it sent before the end was parsed as it came; the
		 * rest (a frame cut short) means nothing */
		send_closed(c);
		return;
	}
	c->end += (size_t)n;
	if ((r = parse(c)) < 0)
		return;
	if (r == 0)
		set_reading(c, 0);	/* the window is full */
}

static void
conn_new(const struct hm_agent_conn *m, int fd)
{
	struct aconn *c;

	if (conn_find(m->id) != NULL)
		fatalx("connection %llu passed twice", (unsigned long long)m->id);
	if (A.nconns >= AD_CONNS_MAX || (c = calloc(1, sizeof(*c))) == NULL) {
		struct hm_agent_error e;

		memset(&e, 0, sizeof(e));
		e.id = m->id;
		snprintf(e.msg, sizeof(e.msg), "the guest agent helper has "
		    "%s", A.nconns >= AD_CONNS_MAX ? "too many connections" :
		    "no memory left");
		px_chan_send(A.ch, HM_AGENT_ERROR, &e, sizeof(e), NULL, 0);
		close(fd);
		return;
	}
	c->id = m->id;
	c->fd = fd;
	memcpy(c->nonce, m->nonce, sizeof(c->nonce));
	evutil_make_socket_nonblocking(fd);
	if ((c->ev = event_new(A.base, fd, EV_READ | EV_PERSIST, readable,
	    c)) == NULL)
		fatalx("event_new");
	TAILQ_INSERT_TAIL(&A.conns, c, entry);
	A.nconns++;
	set_reading(c, 1);
}

static void
on_msg(struct px_chan *ch, uint32_t type, const void *p, size_t len,
    int *fds, int nfds, void *arg)
{
	struct aconn *c;

	(void)ch;
	(void)arg;
	if (type == HM_AGENT_CONN && len == sizeof(struct hm_agent_conn) &&
	    nfds == 1) {
		struct hm_agent_conn m;

		memcpy(&m, p, sizeof(m));
		conn_new(&m, fds[0]);
		fds[0] = -1;	/* the connection's now */
	} else if (type == HM_AGENT_ACK && len == sizeof(struct hm_agent_ack) &&
	    nfds == 0) {
		struct hm_agent_ack m;

		memcpy(&m, p, sizeof(m));
		if ((c = conn_find(m.id)) == NULL)
			return;		/* closed here meanwhile */
		if (m.bytes > c->unacked)
			fatalx("the parent acknowledged %u bytes of %u sent",
			    m.bytes, c->unacked);
		c->unacked -= m.bytes;
		if (!c->reading && c->unacked < HM_AGENT_WINDOW) {
			if (parse(c) > 0)
				set_reading(c, 1);
		}
	} else if (type == HM_AGENT_CLOSE && len == sizeof(struct hm_agent_id) &&
	    nfds == 0) {
		struct hm_agent_id m;

		memcpy(&m, p, sizeof(m));
		if ((c = conn_find(m.id)) != NULL)
			conn_free(c);
	} else
		fatalx("unexpected message %u from the parent", type);
}

static void
on_close(struct px_chan *ch, int corrupt, void *arg)
{
	(void)ch;
	(void)arg;
	/* the parent is gone (or mad): nobody wants the guests' output */
	exit(corrupt ? 1 : 0);
}

int
px_agentd_main(int fd)
{
	TAILQ_INIT(&A.conns);
	if ((A.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if ((A.ch = px_chan_new(A.base, fd, on_msg, on_close, NULL)) == NULL)
		fatalx("channel");
	event_base_dispatch(A.base);
	return 0;
}
