/*
 * fuzz_agent.c — libFuzzer target for the guest agent reader helper
 * (proxy/privsep/agentd.c, compiled into this file to reach its parser): what a
 * guest agent sends. Each input is one connection: data[0] & 1 says
 * whether it starts already synced (its pong seen), data[0] & 2 then
 * that its agent speaks protocol 3 (channels, processes, files), data[1]
 * the size of
 * the pieces the bytes arrive in (1 to 256), the rest the guest's byte
 * stream; a full window is acknowledged at once, as a parent keeping up
 * would. Invariants, on every message the helper sends the parent: its
 * length is its type's, output comes in pieces of at most
 * HM_AGENT_CHUNK of stdout or stderr and never past the window, an exit
 * is an exit code 0..255 or a signal 1..127, texts are printable and
 * NUL-terminated, a pong carries the nonce and protocol 1 to BA_PROTO,
 * a stdin acknowledgement has its size, a process, a ring, a directory
 * entry (its name 1 to 255 bytes, no '/' or NUL) and a watch event (its
 * path absolute, at most BA_EVENT_PATH bytes, no NUL) are well formed,
 * and nothing follows a protocol error.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "../../proxy/privsep/agentd.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned char fz_nonce[HM_AGENT_NONCE] = "n0nce-42";
static int fz_peer = -1;	/* the parent's end of the channel */
static uint64_t fz_id;

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "fuzz_agent: %s\n", what);
	abort();
}

static void
setup(void)
{
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) != 0)
		die("socketpair");
	TAILQ_INIT(&A.conns);
	if ((A.base = event_base_new()) == NULL ||
	    (A.ch = px_chan_new(A.base, sp[0], on_msg, on_close, NULL)) == NULL)
		die("channel");
	fz_peer = sp[1];
	log_init("fuzz_agent", 0);
}

static int
text_ok(const char *s, size_t size)
{
	size_t i;

	for (i = 0; i < size && s[i] != '\0'; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return 0;
	return i < size;
}

/* Reads and checks what the helper sent about connection id. */
static void
drain(uint64_t id, int *ended)
{
	static unsigned char b[8 + sizeof(struct hm_agent_output) +
	    HM_AGENT_CHUNK + 64];
	uint32_t h[2];
	uint64_t mid;
	ssize_t n;

	while ((n = recv(fz_peer, b, sizeof(b), MSG_DONTWAIT)) > 0) {
		const unsigned char *p = b + 8;
		size_t len = (size_t)n - 8;

		memcpy(h, b, sizeof(h));
		if ((size_t)n < 8 + sizeof(mid) || h[1] != len)
			die("a message shorter than its id, or of another length");
		memcpy(&mid, p, sizeof(mid));
		if (mid != id)
			die("a message about another connection");
		if (*ended)
			die("a message after the protocol error");
		switch (h[0]) {
		case HM_AGENT_PONG:
			if (len != sizeof(struct hm_agent_pong) ||
			    memcmp(p + 8, fz_nonce, HM_AGENT_NONCE) != 0)
				die("a bad pong");
			{
				struct hm_agent_pong pg;

				memcpy(&pg, p, sizeof(pg));
				if (pg.proto < 1 || pg.proto > BA_PROTO)
					die("a pong of another protocol");
			}
			break;
		case HM_AGENT_INACK:
			if (len != sizeof(struct hm_agent_inack))
				die("a bad stdin acknowledgement");
			break;
		case HM_AGENT_OUTPUT: {
			struct hm_agent_output o;

			if (len < sizeof(o))
				die("a short output");
			memcpy(&o, p, sizeof(o));
			if (o.len != len - sizeof(o) || o.len > HM_AGENT_CHUNK ||
			    (o.stream != BA_STDOUT && o.stream != BA_STDERR))
				die("a bad output");
			break;
		}
		case HM_AGENT_EXIT: {
			struct hm_agent_exit e;

			if (len != sizeof(e))
				die("a short exit");
			memcpy(&e, p, sizeof(e));
			if ((e.exited != 0 && e.exited != 1) ||
			    (e.timed_out != 0 && e.timed_out != 1) ||
			    (e.exited ? e.code < 0 || e.code > 255 ||
			    e.signal != 0 : e.signal < 1 || e.signal > 127 ||
			    e.code != 0))
				die("a bad exit");
			break;
		}
		case HM_AGENT_FAIL: {
			struct hm_agent_fail f;

			if (len != sizeof(f))
				die("a short failure");
			memcpy(&f, p, sizeof(f));
			if (!text_ok(f.msg, sizeof(f.msg)) || (f.status != 0 &&
			    f.status != 400 && f.status != 404 &&
			    f.status != 409 && f.status != 429))
				die("a bad failure");
			break;
		}
		case HM_AGENT_STARTED:
			if (len != sizeof(struct hm_agent_started))
				die("a bad start");
			break;
		case HM_AGENT_PROC: {
			struct hm_agent_proc pr;

			if (len != sizeof(pr))
				die("a short process");
			memcpy(&pr, p, sizeof(pr));
			if (!text_ok(pr.cmd, sizeof(pr.cmd)) || pr.proc == 0 ||
			    pr.pid <= 0 || pr.keep < 0 || pr.keep > 1)
				die("a bad process");
			break;
		}
		case HM_AGENT_RING: {
			struct hm_agent_ring rg;

			if (len != sizeof(rg))
				die("a short ring");
			memcpy(&rg, p, sizeof(rg));
			if (rg.first > rg.total)
				die("a bad ring");
			break;
		}
		case HM_AGENT_ENTRY: {
			struct hm_agent_entry en;

			if (len != sizeof(en))
				die("a short entry");
			memcpy(&en, p, sizeof(en));
			if (en.type < HM_FT_FILE || en.type > HM_FT_OTHER ||
			    en.mode > 07777 || en.mtime_ms < 0 || en.namelen < 1 ||
			    en.namelen > 255 || memchr(en.name, '/',
			    en.namelen) != NULL || memchr(en.name, '\0',
			    en.namelen) != NULL)
				die("a bad entry");
			break;
		}
		case HM_AGENT_EVENT: {
			struct hm_agent_event ev;
			const unsigned char *path = p + sizeof(ev);

			if (len < sizeof(ev))
				die("a short event");
			memcpy(&ev, p, sizeof(ev));
			if (ev.event < 0 || ev.event >= HM_EV_COUNT ||
			    (ev.dir != 0 && ev.dir != 1) || ev.pathlen < 1 ||
			    ev.pathlen > BA_EVENT_PATH ||
			    ev.pathlen != len - sizeof(ev) || path[0] != '/' ||
			    memchr(path, '\0', ev.pathlen) != NULL)
				die("a bad event");
			break;
		}
		case HM_AGENT_ERROR: {
			struct hm_agent_error e;

			if (len != sizeof(e))
				die("a short error");
			memcpy(&e, p, sizeof(e));
			if (!text_ok(e.msg, sizeof(e.msg)))
				die("a bad error");
			*ended = 1;
			break;
		}
		default:
			die("an unexpected message");
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hm_agent_conn m;
	struct aconn *c;
	size_t off, chunk, n;
	int gp[2], r, ended = 0;

	if (size < 2)
		return 0;
	if (fz_peer < 0)
		setup();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, gp) != 0)
		die("socketpair");
	memset(&m, 0, sizeof(m));
	m.id = ++fz_id;
	memcpy(m.nonce, fz_nonce, sizeof(m.nonce));
	conn_new(&m, gp[1]);
	if ((c = conn_find(m.id)) == NULL)
		die("no connection");
	c->synced = data[0] & 1;
	c->proto = data[0] & 2 ? BA_PROTO : 1;
	chunk = 1 + (size_t)data[1];
	for (off = 2; off < size && c != NULL; off += n) {
		if (c->start > 0) {
			memmove(c->buf, c->buf + c->start, c->end - c->start);
			c->end -= c->start;
			c->start = 0;
		}
		n = size - off < chunk ? size - off : chunk;
		if (n > sizeof(c->buf) - c->end)
			n = sizeof(c->buf) - c->end;
		if (n == 0)
			die("the parser left its buffer full");
		memcpy(c->buf + c->end, data + off, n);
		c->end += n;
		/* a full window: the parent takes it all */
		while ((r = parse(c)) == 0) {
			if (c->unacked > HM_AGENT_WINDOW)
				die("past the window");
			c->unacked = 0;
			drain(m.id, &ended);
		}
		if (r < 0)
			c = NULL;	/* the protocol error freed it */
		else if (c->unacked > HM_AGENT_WINDOW)
			die("past the window");
		else
			c->unacked = 0;
		drain(m.id, &ended);
	}
	if (c != NULL)
		conn_free(c);
	close(gp[0]);
	drain(m.id, &ended);
	return 0;
}
