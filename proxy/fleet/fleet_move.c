/*
 * fleet_move.c — see fleet_move.h; the design is vmm/export.c's header.
 *
 * The source. One move of a sandbox at a time (a second is 409), each a
 * small state machine on the parent's loop: suspend (the existing
 * lifecycle operation) if it runs or is paused; export (libvmm marks it
 * moving: its wakes are refused until the move ends); journal it; POST
 * the manifest (sizes, no hashes yet) with berthd's records (the
 * sandbox's row, its tokens' hashes, its published ports, its egress
 * mode and rules, its events) and whether it ran; PUT each file the
 * target asks for, read in MOVE_CHUNK pieces as the TLS connection
 * drains (never more than MOVE_HIGH queued: a file is never in memory
 * whole), hashed as read; the RAM file and a raw disk as their sparse
 * form (vmm.h: only the blocks that are not zeros, chunked); POST the
 * commit (the manifest with the hashes, and the records again, as they
 * are now). A 200 there means the target holds it,
 * restorable; the caller (api/move.c) then deletes it here. Any other
 * end: DELETE to the target (what it received goes), the sandbox stays
 * here, suspended, and may wake again. Faults that are not ends: a file
 * whose connection was cut goes on (MOVE_RESUMES times) from the byte
 * the target says it holds of it (GET .../file?name=; the body then
 * from there, ?from=N, the bytes before it read and hashed here but not
 * sent); once the
 * target may hold the sandbox (a commit whose answer never came or that
 * found no move begun there, the last file's answer lost for good) the
 * target is asked whether it holds it (OUT_RESOLVE), until it says; and
 * a move journaled (vms/.moved/ID, from its begin) that a restart finds
 * is resolved the same way.
 *
 * Each request is a connection of its own to the target's
 * fleet_api_listen (px_fleet_tls_client: only the target's certificate
 * is accepted), HTTP/1.1 with a Content-Length and Connection: close;
 * its answer is read bounded (MOVE_HEAD_MAX of head, MOVE_BODY_MAX of
 * body, a Content-Length required) within MOVE_TIMEOUT of silence.
 *
 * The target. A move is begun by its manifest (vmm_move_parse), from a
 * fleet peer (the control helper checked its certificate, the parent its
 * lease), for an id this host does not hold; its files arrive into
 * <vms>/.move/ID/, each created anew, checked against the manifest's
 * size as it comes and hashed; one whose connection went before its end
 * is kept as it is (its descriptor, hash and sparse form's state: struct
 * incoming's part) for the rest, which goes on writing it, to come (a
 * ?from= other than its bytes: it goes, sent anew); the commit compares
 * the hashes, stores
 * the records and has libvmm adopt the sandbox (which checks every byte
 * again before it moves anything). A move whose every file came whole
 * but whose source's lease is gone before its commit (the source died)
 * is adopted with what its begin brought (in_watch_cb). A move not
 * committed within MOVE_STALE is dropped, as is what a restart finds in
 * .move.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_move.h"
#include "fleet.h"
#include "fleet_tls.h"
#include "log.h"
#include "store.h"
#include "vm.h"
#include "vmm.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/util.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#define MOVE_PREFIX	"/v1/fleet/move/"
#define MOVE_CHUNK	(256 * 1024)
#define MOVE_HIGH	(1024 * 1024)
#define MOVE_HEAD_MAX	(16 * 1024)
#define MOVE_BODY_MAX	(64 * 1024)
#define MOVE_TIMEOUT	120		/* seconds of silence */
#define MOVE_STALE	(15 * 60)	/* seconds a begun move may wait */
#define MOVE_RESUMES	5		/* a cut link: a file sent again */
#define MOVE_RESUME_MS	1000		/* after this long */
#define MOVE_TEST_RATE	(8 * 1024 * 1024)	/* bytes/s: slow-send, a test's */
#define MOVE_SKIP_STEP	(8 * 1024 * 1024)	/* a resume's bytes re-read a
						 * turn of the loop */
#define RESOLVE_MS	2000		/* between two asks of a target */
#define ADOPT_SECS	30		/* + 2 leases: a source gone that soon
					 * after its files: adopted */

static struct {
	struct event_base *base;
	struct px_store *store;
	void (*changed)(void);		/* this host's sandboxes changed */
	struct outgoing *out;
	struct incoming *in;
	struct handoff *handoffs;
} M;

static void handoff_free(struct handoff *);

int
px_fleet_move_target(const char *target, size_t len)
{
	size_t n = sizeof(MOVE_PREFIX) - 1;

	return len > n && strncmp(target, MOVE_PREFIX, n) == 0;
}

static void
rm_tree(const char *dir)
{
	char p[PATH_MAX];
	size_t i;
	static const char *const names[] = { "sandbox.conf", "disk.qcow2",
	    "disk.raw", "snap/state", "mem", "base.qcow2" };

	/* only the names a move's files have: nothing else is made here */
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		(void)unlink(p);
	}
	snprintf(p, sizeof(p), "%s/snap", dir);
	(void)rmdir(p);
	(void)rmdir(dir);
}

void
px_fleet_move_init(struct event_base *base, struct px_store *store,
    void (*changed)(void))
{
	M.base = base;
	M.store = store;
	M.changed = changed;
}

/* berthd stops: the hand-offs still waiting for this host's view go
 * (the requests they held are ended with the workers). */
void
px_fleet_move_shutdown(void)
{
	while (M.handoffs != NULL)
		handoff_free(M.handoffs);
}

/* The source's journal of a move: vms/.moved/ID holds the target's id
 * from its begin (from then on the target may come to hold it: by the
 * commit, or by adopting what came whole once this host's lease is
 * gone) until its end is known. One found at a start is a move whose
 * end never came: the target is asked. */
static int
journal_path(const char *id, char *buf, size_t len)
{
	char dir[PATH_MAX];
	int n;

	if (px_vm_move_dir(NULL, dir, sizeof(dir)) < 0)
		return -1;
	n = snprintf(buf, len, "%sd%s%s", dir, id != NULL ? "/" : "",
	    id != NULL ? id : "");
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int
journal_write(const char *id, const char *to, char *err, size_t errlen)
{
	char p[PATH_MAX], tmp[PATH_MAX + 8], dir[PATH_MAX];
	int fd, ok;

	if (journal_path(NULL, dir, sizeof(dir)) < 0 ||
	    journal_path(id, p, sizeof(p)) < 0) {
		snprintf(err, errlen, "the move journal's path is too long");
		return -1;
	}
	(void)mkdir(dir, 0700);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	ok = write(fd, to, strlen(to)) == (ssize_t)strlen(to) &&
	    fsync(fd) == 0;
	(void)close(fd);
	if (!ok || rename(tmp, p) != 0) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

static void
journal_rm(const char *id)
{
	char p[PATH_MAX];

	if (journal_path(id, p, sizeof(p)) == 0)
		(void)unlink(p);
}

static void resolve_journal(void);

void
px_fleet_move_sweep(void)
{
	char dir[PATH_MAX], p[PATH_MAX + 64];
	struct dirent *de;
	DIR *d;

	if (px_vm_move_dir(NULL, dir, sizeof(dir)) < 0 ||
	    (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		log_info("fleet: a move of %s never committed: its files go",
		    de->d_name);
		rm_tree(p);
	}
	closedir(d);
	resolve_journal();
}

/* ======================= the source ======================= */

struct hreq;
typedef void hreq_done_fn(struct hreq *, int status, const char *body,
    size_t len, const char *err);

/* one HTTP request to the target */
struct hreq {
	struct bufferevent *bev;
	hreq_done_fn	*done;
	void		*arg;
	int		 fd;		/* a file's body, -1 none */
	uint64_t	 left;		/* its bytes still to send */
	int		 sparse;	/* ... as its sparse form, chunked */
	uint64_t	 pos, size;	/* ... where it is, of how many */
	struct evbuffer	*chunk;		/* ... its next chunk */
	uint64_t	 bytes;		/* ... its body's bytes so far */
	uint64_t	 skip;		/* ... those the target holds of
					 * it (a resume): hashed, not sent */
	EVP_MD_CTX	*md;		/* ... hashed as read */
	char		 sha[65];
	struct evbuffer	*in;
	int		 finished;
	struct event	*free_ev;
	struct event	*more;		/* a resume: re-reading goes on */
	struct ev_token_bucket_cfg *slow;	/* a test's (slow-send) */
};

static int test_fault(const char *);

static void
hreq_free(struct hreq *h)
{
	if (h->bev != NULL)
		bufferevent_free(h->bev);
	if (h->slow != NULL)
		ev_token_bucket_cfg_free(h->slow);
	if (h->more != NULL)
		event_free(h->more);
	if (h->fd >= 0)
		close(h->fd);
	EVP_MD_CTX_free(h->md);
	evbuffer_free(h->in);
	if (h->chunk != NULL)
		evbuffer_free(h->chunk);
	event_free(h->free_ev);
	free(h);
}

static void
hreq_free_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	hreq_free(arg);
}

static void
hreq_finish(struct hreq *h, int status, const char *body, size_t len,
    const char *err)
{
	if (h->finished)
		return;
	h->finished = 1;
	if (h->bev != NULL)
		bufferevent_disable(h->bev, EV_READ | EV_WRITE);
	h->done(h, status, body, len, err);
	event_active(h->free_ev, 0, 0);	/* freed outside its callbacks */
}

/* The answer so far: whole (its Content-Length read) or not yet. */
static void
hreq_parse(struct hreq *h, int eof)
{
	struct evbuffer_ptr e;
	size_t hl, n = evbuffer_get_length(h->in);
	char *text, *p, *line;
	long cl = -1;
	int status = 0;

	e = evbuffer_search(h->in, "\r\n\r\n", 4, NULL);
	if (e.pos < 0) {
		if (n > MOVE_HEAD_MAX)
			hreq_finish(h, 0, "", 0, "the target's answer has too "
			    "long a head");
		else if (eof)
			hreq_finish(h, 0, "", 0, "the target closed the "
			    "connection before an answer");
		return;
	}
	hl = (size_t)e.pos + 4;
	if (hl > MOVE_HEAD_MAX) {
		hreq_finish(h, 0, "", 0, "the target's answer has too long a "
		    "head");
		return;
	}
	text = (char *)evbuffer_pullup(h->in, (ev_ssize_t)hl);
	if (sscanf(text, "HTTP/1.%*[01] %3d", &status) != 1 || status < 100 ||
	    status > 599) {
		hreq_finish(h, 0, "", 0, "the target's answer is not HTTP");
		return;
	}
	for (p = text; (line = memchr(p, '\n', hl - (size_t)(p - text))) !=
	    NULL; p = line + 1) {
		if (strncasecmp(line + 1, "Content-Length:", 15) == 0)
			cl = strtol(line + 16, NULL, 10);
	}
	if (cl < 0 || cl > MOVE_BODY_MAX) {
		hreq_finish(h, 0, "", 0, "the target's answer has no "
		    "Content-Length, or too long a body");
		return;
	}
	if (n < hl + (size_t)cl) {
		if (eof)
			hreq_finish(h, 0, "", 0, "the target's answer was "
			    "cut short");
		return;
	}
	text = (char *)evbuffer_pullup(h->in, (ev_ssize_t)(hl + (size_t)cl));
	hreq_finish(h, status, text + hl, (size_t)cl, NULL);
}

static void
hreq_read(struct bufferevent *bev, void *arg)
{
	struct hreq *h = arg;

	evbuffer_add_buffer(h->in, bufferevent_get_input(bev));
	if (evbuffer_get_length(h->in) > MOVE_HEAD_MAX + MOVE_BODY_MAX) {
		hreq_finish(h, 0, "", 0, "the target's answer is too long");
		return;
	}
	hreq_parse(h, 0);
}

static void
emit_chunk(void *arg, const void *p, size_t len)
{
	struct hreq *h = arg;
	size_t k = h->skip < len ? (size_t)h->skip : len;

	(void)EVP_DigestUpdate(h->md, p, len);
	h->skip -= k;
	evbuffer_add(h->chunk, (const char *)p + k, len - k);
	h->bytes += len - k;
}

/*
 * A resume re-reads (and hashes) what the target holds without sending
 * it: MOVE_SKIP_STEP of it a turn of the loop, then h->more goes on (no
 * drained output would call the writer again), so that a GiB held does
 * not stall the parent's loop. 1: yield now.
 */
static int
skip_yield(struct hreq *h, uint64_t skip0)
{
	return h->skip > 0 && skip0 - h->skip >= MOVE_SKIP_STEP;
}

/* A sparse file's next windows, each a chunk of the body. */
static int
sparse_write(struct hreq *h, struct evbuffer *out)
{
	static unsigned char win[VMM_SPARSE_WIN];
	char err[VMM_ERRLEN];
	uint64_t skip0 = h->skip;
	size_t n;
	int rc;

	while (h->pos < h->size && evbuffer_get_length(out) < MOVE_HIGH) {
		if (skip_yield(h, skip0)) {
			event_active(h->more, 0, 0);
			return 0;
		}
		if ((rc = vmm_sparse_next(h->fd, h->size, &h->pos, win,
		    emit_chunk, h, err, sizeof(err))) < 0) {
			log_warnx("fleet: reading a file of the sandbox: %s",
			    err);
			return -1;
		}
		if ((n = evbuffer_get_length(h->chunk)) > 0) {
			evbuffer_add_printf(out, "%zx\r\n", n);
			evbuffer_add_buffer(out, h->chunk);
			evbuffer_add(out, "\r\n", 2);
		}
		if (rc == 0)
			h->pos = h->size;
	}
	if (h->pos >= h->size) {
		evbuffer_add(out, "0\r\n\r\n", 5);
		h->left = 0;
	}
	return 0;
}

/* The body's next pieces from its file, while the connection drains. */
static void
hreq_write(struct bufferevent *bev, void *arg)
{
	struct hreq *h = arg;
	struct evbuffer *out = bufferevent_get_output(bev);
	static unsigned char buf[MOVE_CHUNK];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0, i;
	uint64_t skip0 = h->skip;
	ssize_t n;

	if (h->fd >= 0 && h->sparse && h->left > 0 &&
	    sparse_write(h, out) < 0) {
		hreq_finish(h, 0, "", 0, "reading a file of the sandbox "
		    "failed");
		return;
	}
	while (h->fd >= 0 && !h->sparse && h->left > 0 &&
	    evbuffer_get_length(out) < MOVE_HIGH) {
		if (skip_yield(h, skip0)) {
			event_active(h->more, 0, 0);
			return;
		}
		n = read(h->fd, buf, h->left < sizeof(buf) ? (size_t)h->left :
		    sizeof(buf));
		if (n <= 0) {
			hreq_finish(h, 0, "", 0, n < 0 ? "reading a file of "
			    "the sandbox failed" : "a file of the sandbox "
			    "shrank while it was sent");
			return;
		}
		(void)EVP_DigestUpdate(h->md, buf, (size_t)n);
		h->left -= (uint64_t)n;
		if (h->skip >= (uint64_t)n) {
			h->skip -= (uint64_t)n;
			continue;
		}
		evbuffer_add(out, buf + h->skip, (size_t)n - h->skip);
		h->bytes += (uint64_t)n - h->skip;
		h->skip = 0;
	}
	if (h->fd >= 0 && h->left == 0) {
		(void)EVP_DigestFinal_ex(h->md, md, &mdlen);
		for (i = 0; i < mdlen && i < 32; i++)
			snprintf(h->sha + 2 * i, 3, "%02x", md[i]);
		close(h->fd);
		h->fd = -1;
	}
}

static void
hreq_more_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hreq *h = arg;

	(void)fd;
	(void)what;
	if (!h->finished && h->bev != NULL)
		hreq_write(h->bev, h);
}

static void
hreq_event(struct bufferevent *bev, short what, void *arg)
{
	struct hreq *h = arg;
	unsigned long e;
	char why[256];

	if (what & BEV_EVENT_CONNECTED) {
		hreq_write(bev, h);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		evbuffer_add_buffer(h->in, bufferevent_get_input(bev));
		hreq_parse(h, 1);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		hreq_finish(h, 0, "", 0, "the target said nothing for too "
		    "long");
		return;
	}
	e = bufferevent_get_openssl_error(bev);
	snprintf(why, sizeof(why), "connection to the target: %s",
	    e != 0 ? ERR_reason_error_string(e) : evutil_socket_error_to_string(
	    EVUTIL_SOCKET_ERROR()));
	hreq_finish(h, 0, "", 0, why);
}

/*
 * method target to host's fleet_api_listen, the body JSON text (json,
 * may be NULL) or the file at path (size bytes, hashed into h->sha as
 * sent; sparse: its sparse form, vmm.h, in chunks), less the first skip
 * bytes of it (hashed all the same: the target holds them). NULL with
 * err when it cannot start; else done once, later.
 */
static struct hreq *
hreq_start(const char *host, const char *method, const char *target,
    const char *json, const char *path, uint64_t size, int sparse,
    uint64_t skip, hreq_done_fn *done, void *arg, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int sslen = (int)sizeof(ss);
	char addr[80];
	struct hreq *h;
	struct stat st;
	SSL *ssl;

	if (!px_fleet_host_api(host, addr, sizeof(addr)) ||
	    evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) !=
	    0) {
		snprintf(err, errlen, "host %s is not a live fleet host with a "
		    "fleet_api_listen", host);
		return NULL;
	}
	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->in = evbuffer_new()) == NULL ||
	    (h->free_ev = event_new(M.base, -1, 0, hreq_free_cb, h)) == NULL) {
		if (h != NULL && h->in != NULL)
			evbuffer_free(h->in);
		free(h);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->fd = -1;
	h->done = done;
	h->arg = arg;
	if (path != NULL) {
		if ((h->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    fstat(h->fd, &st) < 0 || (uint64_t)st.st_size != size ||
		    (h->md = EVP_MD_CTX_new()) == NULL ||
		    EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1) {
			snprintf(err, errlen, "%s: %s", path, h->fd < 0 ?
			    strerror(errno) : "changed since it was listed");
			goto fail;
		}
		h->left = size;
		h->size = size;
		h->skip = sparse || skip <= size ? skip : size;
		if (h->skip > 0 && (h->more = event_new(M.base, -1, 0,
		    hreq_more_cb, h)) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		if ((h->sparse = sparse) && (h->chunk = evbuffer_new()) ==
		    NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		if (size == 0)	/* (the form of an empty file is empty) */
			h->left = sparse;
	}
	if ((ssl = px_fleet_tls_client(host)) == NULL) {
		snprintf(err, errlen, "no fleet certificate");
		goto fail;
	}
	if ((h->bev = bufferevent_openssl_socket_new(M.base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		SSL_free(ssl);
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(h->bev, 1);
	bufferevent_setcb(h->bev, hreq_read, hreq_write, hreq_event, h);
	/* a test's slow link (a file takes seconds, to be cut midway) */
	if (path != NULL && test_fault("slow-send") &&
	    ((h->slow = ev_token_bucket_cfg_new(MOVE_TEST_RATE,
	    MOVE_TEST_RATE, EV_RATE_LIMIT_MAX, EV_RATE_LIMIT_MAX, NULL)) ==
	    NULL || bufferevent_set_rate_limit(h->bev, h->slow) != 0)) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* refilled while half of what is queued still goes out */
	bufferevent_setwatermark(h->bev, EV_WRITE, MOVE_HIGH / 2, 0);
	{
		struct timeval tv = { MOVE_TIMEOUT, 0 };

		bufferevent_set_timeouts(h->bev, &tv, &tv);
	}
	evbuffer_add_printf(bufferevent_get_output(h->bev), "%s %s HTTP/1.1\r\n"
	    "Host: %s\r\nContent-Type: %s\r\n", method, target, host,
	    path != NULL ? "application/octet-stream" : "application/json");
	if (h->sparse)
		evbuffer_add_printf(bufferevent_get_output(h->bev),
		    "Transfer-Encoding: chunked\r\n");
	else
		evbuffer_add_printf(bufferevent_get_output(h->bev),
		    "Content-Length: %llu\r\n", (unsigned long long)(path !=
		    NULL ? size - h->skip : json != NULL ? strlen(json) : 0));
	evbuffer_add_printf(bufferevent_get_output(h->bev), "Connection: "
	    "close\r\n\r\n");
	if (json != NULL)
		evbuffer_add(bufferevent_get_output(h->bev), json, strlen(json));
	bufferevent_enable(h->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(h->bev, (struct sockaddr *)&ss,
	    sslen) != 0) {
		snprintf(err, errlen, "connection to host %s (%s) failed", host,
		    addr);
		goto fail;
	}
	return h;
fail:
	hreq_free(h);
	return NULL;
}

/* the target's error, as its JSON says it, else its status */
static void
answer_error(int status, const char *body, size_t len, const char *err,
    char *out, size_t outlen)
{
	json_t *doc;
	const char *m = NULL;

	if (status == 0) {
		snprintf(out, outlen, "%s", err ? err : "no answer");
		return;
	}
	if ((doc = json_loadb(body, len, 0, NULL)) != NULL) {
		json_t *e = json_object_get(doc, "error");

		m = json_string_value(json_is_object(e) ?
		    json_object_get(e, "message") : e);
	}
	snprintf(out, outlen, "the target answered %d: %.300s", status,
	    m ? m : "no reason given");
	json_decref(doc);
}

/* OUT_RESOLVE: the commit went and its answer never came (the link
 * cut, or this berthd restarted since): the target is asked whether it
 * holds the sandbox, until it says; the sandbox stays marked moving
 * here meanwhile (its wakes wait), so it never runs on two hosts. */
enum { OUT_SUSPEND, OUT_BEGIN, OUT_FILES, OUT_COMMIT, OUT_RESOLVE };

struct outgoing {
	struct outgoing *next;
	char id[41];
	char to[40];
	void (*done)(void *, int, const char *, uint64_t);
	void *done_arg;
	int step;
	int exported, begun;
	int flat;			/* 0, 1 flattening its fork's layers
					 * (or none to), 2 flattened */
	int resume;			/* it ran: the target resumes it */
	int cuts;			/* the link cut, a file sent again */
	int ask;			/* ... from where: the target asked
					 * what it holds of the cut file */
	uint64_t from;			/* ... its answer: sent from there */
	int journaled;			/* vms/.moved/ID written */
	unsigned asked;			/* OUT_RESOLVE: asks so far */
	struct event *again;		/* the next try of a file, or ask */
	struct vmm_move mv;
	int need[VMM_MOVE_FILES];
	size_t cur;			/* the file being sent */
	uint64_t sent;			/* the bodies of the files that
					 * went whole */
	struct hreq *req;
	/* where its time went (monotonic ms), said in the log at its end */
	uint64_t t0, t_export, t_begun, t_file, t_files;
	uint64_t longest_ms;		/* the file that took longest */
	size_t longest;
};

static void out_next(struct outgoing *);

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
out_unlink(struct outgoing *o)
{
	struct outgoing **pp;

	if (o->again != NULL) {
		event_free(o->again);
		o->again = NULL;
	}
	for (pp = &M.out; *pp != NULL; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			return;
		}
}

static void
abort_done(struct hreq *h, int status, const char *body, size_t len,
    const char *err)
{
	(void)h;
	(void)body;
	(void)len;
	if (status != 200)
		log_warnx("fleet: the target did not confirm the move given "
		    "up (%d%s%s): what it received goes at its next sweep",
		    status, err ? ": " : "", err ? err : "");
}

/* After a move: the requests that waited for it go on once this host's
 * view of the fleet routes the sandbox to its new host (the target's
 * claim seen, this host's gone), at most HANDOFF_MS later. */
#define HANDOFF_MS	10000
#define HANDOFF_STEP_MS	100

struct handoff {
	char id[41], to[40];
	unsigned waited;
	struct event *ev;
	struct handoff *next;
};

static void
handoff_free(struct handoff *ho)
{
	struct handoff **pp;

	for (pp = &M.handoffs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == ho) {
			*pp = ho->next;
			break;
		}
	event_free(ho->ev);
	free(ho);
}

static int
routed_to(const char *id, const char *to)
{
	json_t *doc = px_fleet_json("sandboxes"), *v;
	size_t i;
	int yes = 0;

	json_array_foreach(json_object_get(doc, "sandboxes"), i, v) {
		const char *sid = json_string_value(json_object_get(v, "id"));
		const char *h = json_string_value(json_object_get(v, "host"));

		if (sid != NULL && strcmp(sid, id) == 0)
			yes = h != NULL && strcmp(h, to) == 0;
	}
	json_decref(doc);
	return yes;
}

static void
handoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct handoff *ho = arg;
	struct timeval tv = { 0, HANDOFF_STEP_MS * 1000 };

	(void)fd;
	(void)what;
	if (!routed_to(ho->id, ho->to) && ho->waited < HANDOFF_MS) {
		ho->waited += HANDOFF_STEP_MS;
		evtimer_add(ho->ev, &tv);
		return;
	}
	if (ho->waited >= HANDOFF_MS)
		log_warnx("fleet: %s moved to %s, but this host's view does "
		    "not route it there yet: its waiting requests go on", ho->id,
		    ho->to);
	px_vm_move_handed(ho->id);
	handoff_free(ho);
}

static void
handoff_start(const char *id, const char *to)
{
	struct handoff *ho;

	if ((ho = calloc(1, sizeof(*ho))) == NULL ||
	    (ho->ev = evtimer_new(M.base, handoff_cb, ho)) == NULL) {
		free(ho);
		px_vm_move_handed(id);
		return;
	}
	snprintf(ho->id, sizeof(ho->id), "%s", id);
	snprintf(ho->to, sizeof(ho->to), "%s", to);
	ho->next = M.handoffs;
	M.handoffs = ho;
	handoff_cb(-1, 0, ho);
}

/* The end of a move: done told, o freed. */
static void
out_end(struct outgoing *o, int status, const char *err)
{
	char e[256], target[128];
	uint64_t held = 0, all = 0;
	size_t i;

	out_unlink(o);
	if (status != 200) {
		if (o->begun) {
			snprintf(target, sizeof(target), MOVE_PREFIX "%s", o->id);
			(void)hreq_start(o->to, "DELETE", target, NULL, NULL,
			    0, 0, 0, abort_done, NULL, e, sizeof(e));
		}
		if (o->exported)
			px_vm_move_end(o->id);
		log_warnx("fleet: move of %s to %s failed: %s", o->id, o->to,
		    err);
	} else {
		for (i = 0; i < o->mv.n; i++) {
			all += o->mv.f[i].size;
			if (!o->need[i])
				held += o->mv.f[i].size;
		}
		if (o->asked > 0 || o->t_files == 0)
			log_info("fleet: sandbox %s moved to host %s (it "
			    "says it holds it)", o->id, o->to);
		else {
			uint64_t now = mono_ms();

			log_info("fleet: sandbox %s moved to host %s: %llu "
			    "bytes sent for its %llu (zeros not sent, %llu "
			    "the target held) in %llu ms: to its files %llu "
			    "(suspend, flatten, export), begin %llu, files "
			    "%llu (%s the longest, %llu), commit %llu", o->id,
			    o->to, (unsigned long long)o->sent,
			    (unsigned long long)all, (unsigned long long)held,
			    (unsigned long long)(now - o->t0),
			    (unsigned long long)(o->t_export - o->t0),
			    (unsigned long long)(o->t_begun - o->t_export),
			    (unsigned long long)(o->t_files - o->t_begun),
			    o->longest_ms > 0 ? o->mv.f[o->longest].name :
			    "none", (unsigned long long)o->longest_ms,
			    (unsigned long long)(now - o->t_files));
		}
		/* routed there from here until the target's claim is seen */
		px_fleet_moved(o->id, px_fleet_self(), o->to);
	}
	o->done(o->done_arg, status, err, o->sent);
	/* its answer known (and, when it moved, this host's copy gone) */
	if (o->journaled)
		journal_rm(o->id);
	if (status == 200)
		handoff_start(o->id, o->to);
	free(o);
}

static json_t *
records_json(const char *id, char *err, size_t errlen);

static void
again_cb(evutil_socket_t fd, short what, void *arg)
{
	struct outgoing *o = arg;

	(void)fd;
	(void)what;
	out_next(o);
}

/* o's step again ms later (out_next); 0, or -1 out of memory */
static int
again_in(struct outgoing *o, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (o->again == NULL)
		o->again = evtimer_new(M.base, again_cb, o);
	return o->again != NULL && evtimer_add(o->again, &tv) == 0 ? 0 : -1;
}

/* The target is asked (again) whether it holds the sandbox, RESOLVE_MS
 * later; said in the log at the first ask and every 30th. */
static void
resolve_later(struct outgoing *o, const char *why)
{
	if (o->step == OUT_COMMIT || o->asked % 30 == 0)
		log_warnx("fleet: move of %s to %s: %s: %s; host %s is asked "
		    "whether it holds it (marked moving here meanwhile)",
		    o->id, o->to, o->step == OUT_COMMIT ? "the commit's answer "
		    "never came" : "not known yet", why, o->to);
	o->asked++;
	o->step = OUT_RESOLVE;
	if (again_in(o, RESOLVE_MS) < 0)
		log_warnx("fleet: move of %s: out of memory: its target is "
		    "asked at the next start", o->id);
}

static void
step_done(struct hreq *h, int status, const char *body, size_t len,
    const char *err)
{
	struct outgoing *o = h->arg;
	char why[512];

	o->req = NULL;
	/*
	 * The link cut while a file went (no answer: a reset, a close, a
	 * silence), or the target still busy with the cut one (409, after
	 * a cut): the files the target has whole stay there; MOVE_RESUME_MS
	 * later the target is asked how much of this one it holds, and it
	 * goes on from there; MOVE_RESUMES times at most in the move.
	 */
	if (o->step == OUT_FILES && (status == 0 || (status == 409 &&
	    o->cuts > 0)) && o->cuts < MOVE_RESUMES) {
		answer_error(status, body, len, err, why, sizeof(why));
		o->cuts++;
		o->ask = 1;
		log_warnx("fleet: move of %s to %s: %s while %s went: sent "
		    "again from where it broke off (resume %d of %d)", o->id,
		    o->to, why, o->mv.f[o->cur].name, o->cuts, MOVE_RESUMES);
		if (again_in(o, MOVE_RESUME_MS) < 0)
			out_end(o, 503, "out of memory");
		return;
	}
	/* what the target holds of the cut file: sent from there (a
	 * target that cannot say, an older one, takes it whole again) */
	if (o->step == OUT_FILES && o->ask) {
		json_t *doc = status == 200 ? json_loadb(body, len, 0, NULL) :
		    NULL;
		json_int_t n = json_integer_value(json_object_get(doc,
		    "bytes"));

		json_decref(doc);
		o->ask = 0;
		o->from = n > 0 ? (uint64_t)n : 0;
		log_info("fleet: move of %s to %s: host %s holds %llu bytes "
		    "of %s: sent on from there", o->id, o->to, o->to,
		    (unsigned long long)o->from, o->mv.f[o->cur].name);
		out_next(o);
		return;
	}
	/*
	 * The commit's answer lost, or no move begun there (the target
	 * adopted it already, this host's lease having lapsed; or dropped
	 * it): ask; no answer to the ask: ask again. (A file's answer lost
	 * for good ends the move here: the target adopts what came whole
	 * only if this host's lease goes soon after, in_watch_cb.)
	 */
	if ((o->step == OUT_COMMIT && (status == 0 || status == 409)) ||
	    (o->step == OUT_RESOLVE && status != 200)) {
		answer_error(status, body, len, err, why, sizeof(why));
		resolve_later(o, why);
		return;
	}
	if (status != 200) {
		answer_error(status, body, len, err, why, sizeof(why));
		out_end(o, status == 0 ? 502 : status == 404 || status == 400 ||
		    status == 409 || status == 507 ? status : 502, why);
		return;
	}
	switch (o->step) {
	case OUT_BEGIN: {
		json_t *doc = json_loadb(body, len, 0, NULL), *need, *v;
		size_t i, k;

		need = json_object_get(doc, "need");
		if (!json_is_array(need)) {
			json_decref(doc);
			out_end(o, 502, "the target's answer to the manifest "
			    "names no files");
			return;
		}
		for (k = 0; k < o->mv.n; k++)
			o->need[k] = 0;
		json_array_foreach(need, i, v) {
			const char *n = json_string_value(v);

			for (k = 0; n != NULL && k < o->mv.n; k++)
				if (strcmp(o->mv.f[k].name, n) == 0)
					o->need[k] = 1;
		}
		json_decref(doc);
		o->begun = 1;
		o->step = OUT_FILES;
		o->cur = 0;
		o->t_begun = mono_ms();
		break;
	}
	case OUT_FILES: {
		uint64_t took = mono_ms() - o->t_file;

		if (took > o->longest_ms) {
			o->longest_ms = took;
			o->longest = o->cur;
		}
		snprintf(o->mv.f[o->cur].sha256, sizeof(o->mv.f[0].sha256),
		    "%s", h->sha);
		o->sent += h->bytes;
		o->from = 0;
		o->cur++;
		break;
	}
	case OUT_COMMIT:
		out_end(o, 200, NULL);
		return;
	case OUT_RESOLVE: {
		json_t *doc = json_loadb(body, len, 0, NULL);
		int held = json_is_true(json_object_get(doc, "held"));

		json_decref(doc);
		log_info("fleet: host %s says it %s sandbox %s", o->to, held ?
		    "holds" : "does not hold", o->id);
		if (held)
			out_end(o, 200, NULL);
		else
			out_end(o, 502, "the commit's answer was lost, and the "
			    "target does not hold the sandbox: it stays here");
		return;
	}
	}
	out_next(o);
}

/* A fault a test injects (BERTH_TEST_MOVE_FAULT): never set in use. */
static int
test_fault(const char *which)
{
	const char *f = getenv("BERTH_TEST_MOVE_FAULT");

	return f != NULL && strcmp(f, which) == 0;
}

/* {"manifest", "records", "resume"}: the begin's and the commit's body
 * (the commit's manifest has the files' sha256s), allocated; NULL with
 * err. */
static char *
commit_body(struct outgoing *o, char *err, size_t errlen)
{
	json_t *doc, *rec;
	char *text;

	if ((rec = records_json(o->id, err, errlen)) == NULL)
		return NULL;
	text = vmm_move_json(&o->mv);
	doc = json_pack("{s:o, s:o, s:b}", "manifest", text != NULL ?
	    json_loads(text, 0, NULL) : json_null(), "records", rec, "resume",
	    o->resume);
	free(text);
	text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (text == NULL)
		snprintf(err, errlen, "out of memory");
	return text;
}

/* The move's next request. */
static void
out_next(struct outgoing *o)
{
	char target[160], err[512];
	char *text;

	switch (o->step) {
	case OUT_BEGIN:
		/* the manifest and, should this host die before its commit,
		 * what the target adopts it with (the records, resume) */
		if ((text = commit_body(o, err, sizeof(err))) == NULL) {
			out_end(o, 500, err);
			return;
		}
		/* from here the target may come to hold it (it adopts what
		 * came whole once this host's lease is gone): a restart asks */
		if (journal_write(o->id, o->to, err, sizeof(err)) < 0) {
			free(text);
			out_end(o, 500, err);
			return;
		}
		o->journaled = 1;
		snprintf(target, sizeof(target), MOVE_PREFIX "%s", o->id);
		o->req = hreq_start(o->to, "POST", target, text, NULL, 0, 0, 0,
		    step_done, o, err, sizeof(err));
		free(text);
		break;
	case OUT_FILES:
		while (o->cur < o->mv.n && !o->need[o->cur])
			o->cur++;
		if (o->cur < o->mv.n && o->ask) {
			snprintf(target, sizeof(target), MOVE_PREFIX "%s/file"
			    "?name=%s", o->id, o->mv.f[o->cur].name);
			o->req = hreq_start(o->to, "GET", target, NULL, NULL,
			    0, 0, 0, step_done, o, err, sizeof(err));
			break;
		}
		if (o->cur < o->mv.n) {
			if (o->from > 0)
				snprintf(target, sizeof(target), MOVE_PREFIX
				    "%s/file?name=%s&from=%llu", o->id,
				    o->mv.f[o->cur].name,
				    (unsigned long long)o->from);
			else
				snprintf(target, sizeof(target), MOVE_PREFIX
				    "%s/file?name=%s", o->id,
				    o->mv.f[o->cur].name);
			o->t_file = mono_ms();
			o->req = hreq_start(o->to, "PUT", target, NULL,
			    o->mv.f[o->cur].path, o->mv.f[o->cur].size,
			    vmm_move_sparse(o->mv.f[o->cur].name), o->from,
			    step_done, o, err, sizeof(err));
			break;
		}
		o->step = OUT_COMMIT;
		o->t_files = mono_ms();
		/* FALLTHROUGH */
	case OUT_COMMIT:
		if ((text = commit_body(o, err, sizeof(err))) == NULL) {
			out_end(o, 500, err);
			return;
		}
		if (test_fault("before-commit")) {
			log_warnx("fleet: BERTH_TEST_MOVE_FAULT=before-commit: "
			    "this host dies before the commit of %s", o->id);
			_exit(137);
		}
		snprintf(target, sizeof(target), MOVE_PREFIX "%s/commit",
		    o->id);
		o->req = hreq_start(o->to, "POST", target, text, NULL, 0, 0, 0,
		    step_done, o, err, sizeof(err));
		free(text);
		break;
	case OUT_RESOLVE:
		snprintf(target, sizeof(target), MOVE_PREFIX "%s", o->id);
		o->req = hreq_start(o->to, "GET", target, NULL, NULL, 0, 0, 0,
		    step_done, o, err, sizeof(err));
		if (o->req == NULL) {	/* the target not known now: later */
			resolve_later(o, err);
			return;
		}
		break;
	}
	if (o->req == NULL)
		out_end(o, 502, err);
}

static void out_export(struct outgoing *o);

/* its fork's layers flattened: it moves as any other */
static void
flattened(void *arg, int ok, const char *why)
{
	struct outgoing *o = arg;
	char e[512];

	if (!ok) {
		snprintf(e, sizeof(e), "%s", why);
		out_end(o, 500, e);
		return;
	}
	o->flat = 2;
	out_export(o);
}

static void
out_export(struct outgoing *o)
{
	char err[VMM_ERRLEN];
	int rc;

	if (o->flat == 0) {
		if ((rc = px_vm_move_flatten(o->id, flattened, o, err,
		    sizeof(err))) < 0) {
			out_end(o, 409, err);
			return;
		}
		o->flat = 1;
		if (rc == 1) {
			o->exported = 1;	/* moving: its end ends it */
			return;
		}
	}
	if (px_vm_move_export(o->id, &o->mv, err, sizeof(err)) < 0) {
		out_end(o, 409, err);
		return;
	}
	o->exported = 1;
	o->step = OUT_BEGIN;
	o->t_export = mono_ms();
	out_next(o);
}

static void
out_export_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	out_export(arg);
}

static void
suspended(void *arg, int ok, const char *reason)
{
	struct outgoing *o = arg;
	char why[512];

	if (ok <= 0) {
		snprintf(why, sizeof(why), "its suspend failed: %s", reason ?
		    reason : "unknown error");
		out_end(o, 503, why);
		return;
	}
	out_export(o);
}

int
px_fleet_move(const char *id, const char *to,
    void (*done)(void *, int, const char *, uint64_t), void *done_arg,
    int *status,
    char *err, size_t errlen, void *arg)
{
	struct outgoing *o;
	struct px_sandbox sb;
	char addr[80];
	const char *self = px_fleet_self();

	(void)arg;
	*status = 409;
	if (self == NULL || strcmp(to, self) == 0) {
		*status = 400;
		snprintf(err, errlen, "the sandbox is on host %s already",
		    self ? self : "this host");
		return -1;
	}
	/* the route switch is etcd's: without it, no move starts (the
	 * sandbox would be unreachable from every other edge after it) */
	if (!px_fleet_etcd_ok()) {
		*status = 503;
		snprintf(err, errlen, "etcd is unreachable from this host: no "
		    "move starts until it answers again");
		return -1;
	}
	if (!px_fleet_host_api(to, addr, sizeof(addr))) {
		*status = 400;
		snprintf(err, errlen, "no live fleet host %s with a "
		    "fleet_api_listen", to);
		return -1;
	}
	for (o = M.out; o != NULL; o = o->next)
		if (strcmp(o->id, id) == 0) {
			snprintf(err, errlen, "it is moving to host %s already",
			    o->to);
			return -1;
		}
	if (px_store_sandbox_get(M.store, id, &sb, err, errlen) != PX_STORE_OK) {
		*status = 404;
		return -1;
	}
	if (px_vm_sandbox(id) == NULL) {
		snprintf(err, errlen, "it has no VM here");
		return -1;
	}
	if ((o = calloc(1, sizeof(*o))) == NULL) {
		*status = 503;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(o->id, sizeof(o->id), "%s", id);
	snprintf(o->to, sizeof(o->to), "%s", to);
	o->t0 = mono_ms();
	o->done = done;
	o->done_arg = done_arg;
	if (strcmp(sb.state, PX_STATE_RUNNING) == 0 ||
	    strcmp(sb.state, PX_STATE_PAUSED) == 0) {
		/* suspend, move, resume: one that ran runs on there */
		o->resume = strcmp(sb.state, PX_STATE_RUNNING) == 0;
		o->step = OUT_SUSPEND;
		if (px_vm_lifecycle(id, "suspend", suspended, o, err, errlen,
		    NULL) != 0) {
			*status = 503;
			free(o);
			return -1;
		}
	} else if (strcmp(sb.state, PX_STATE_SUSPENDED) != 0 &&
	    strcmp(sb.state, PX_STATE_STOPPED) != 0) {
		snprintf(err, errlen, "it is %s: only a running, paused, "
		    "suspended or stopped sandbox moves", sb.state);
		free(o);
		return -1;
	} else {
		/* from the loop: done is never called from here */
		o->step = OUT_SUSPEND;
		o->next = M.out;
		M.out = o;
		event_base_once(M.base, -1, EV_TIMEOUT, out_export_cb, o, NULL);
		return 0;
	}
	o->next = M.out;
	M.out = o;
	return 0;
}

/* A commit's answer resolved after a restart: moved, this host's copy
 * goes (as api/move.c's does for a live one); else it stays here. */
static void
restart_done(void *arg, int status, const char *err, uint64_t sent)
{
	char *id = arg, e[256];

	(void)sent;
	if (status == 200) {
		log_info("fleet: sandbox %s was moved before this host's "
		    "restart: its copy here goes", id);
		(void)px_store_sandbox_rm(M.store, id, e, sizeof(e));
		px_vm_delete(id, NULL);
	} else
		log_info("fleet: sandbox %s stays here: %s", id, err ? err :
		    "unknown");
	if (M.changed != NULL)
		M.changed();
	free(id);
}

/*
 * At a start: each journaled move (vms/.moved/ID) whose sandbox this
 * host still holds is resolved by asking its target (OUT_RESOLVE): the
 * sandbox is marked moving meanwhile, so nothing wakes it here while
 * the target may hold it.
 */
static void
resolve_journal(void)
{
	char dir[PATH_MAX], p[PATH_MAX + 64], to[40], err[VMM_ERRLEN];
	struct outgoing *o;
	struct px_sandbox sb;
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int fd;

	if (journal_path(NULL, dir, sizeof(dir)) < 0 ||
	    (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strchr(de->d_name, '.') != NULL)
			continue;	/* a .tmp never renamed: no commit */
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		n = -1;
		if ((fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
			n = read(fd, to, sizeof(to) - 1);
			(void)close(fd);
		}
		if (n <= 0 || strlen(de->d_name) >= sizeof(o->id) ||
		    px_store_sandbox_get(M.store, de->d_name, &sb, err,
		    sizeof(err)) != PX_STORE_OK) {
			(void)unlink(p);	/* its copy went already */
			continue;
		}
		to[n] = '\0';
		if ((o = calloc(1, sizeof(*o))) == NULL ||
		    (o->done_arg = strdup(de->d_name)) == NULL) {
			free(o);
			continue;	/* asked at the next start */
		}
		snprintf(o->id, sizeof(o->id), "%s", de->d_name);
		snprintf(o->to, sizeof(o->to), "%s", to);
		o->done = restart_done;
		o->journaled = 1;
		if (px_vm_move_export(o->id, &o->mv, err, sizeof(err)) == 0)
			o->exported = 1;
		else
			log_warnx("fleet: sandbox %s: not marked moving: %s",
			    o->id, err);
		o->next = M.out;
		M.out = o;
		o->step = OUT_COMMIT;	/* as if its answer never came */
		resolve_later(o, "this host restarted during the move");
	}
	closedir(d);
}

/* ---- berthd's records of a sandbox, as they travel ---- */

static int
add_token(const struct px_token *t, void *arg)
{
	return json_array_append_new(arg, json_pack("{s:s, s:s, s:s, s:I}",
	    "id", t->id, "sha256", t->sha256, "name", t->name, "created",
	    (json_int_t)t->created)) == 0 ? 0 : -1;
}

static int
add_port(const struct px_port *p, void *arg)
{
	return json_array_append_new(arg, json_pack("{s:i, s:s, s:s, s:s, "
	    "s:I}", "port", (int)p->port, "host_header",
	    px_host_header_name(p->host_header), "visibility",
	    px_visibility_name(p->visibility), "custom_host", p->custom_host,
	    "created", (json_int_t)p->created)) == 0 ? 0 : -1;
}

static int
add_rule(const struct px_egress_rule *r, void *arg)
{
	return json_array_append_new(arg, json_pack("{s:s, s:s, s:I, s:I}",
	    "action", px_egress_action_name(r->action), "rule", r->rule,
	    "expires", (json_int_t)r->expires, "created",
	    (json_int_t)r->created)) == 0 ? 0 : -1;
}

/* Its lifecycle events go with it: the newest, within EVENTS_BUDGET
 * bytes of text (the commit is one control API body, 64 KiB at most). */
#define EVENTS_BUDGET	(24 * 1024)

static int
add_event(const struct px_event *ev, void *arg)
{
	return json_array_append_new(arg, json_pack("{s:I, s:s, s:s, s:s, "
	    "s:I}", "time_ms", (json_int_t)ev->time_ms, "operation",
	    ev->operation, "result", ev->result, "reason", ev->reason,
	    "duration_ms", (json_int_t)ev->duration_ms)) == 0 ? 0 : -1;
}

static void
events_trim(json_t *evs)
{
	size_t i = json_array_size(evs), used = 0;

	while (i > 0) {
		json_t *v = json_array_get(evs, i - 1);
		size_t n = 96 + strlen(json_string_value(json_object_get(v,
		    "reason")));

		if (used + n > EVENTS_BUDGET)
			break;
		used += n;
		i--;
	}
	while (i-- > 0)		/* the older ones stay behind */
		json_array_remove(evs, 0);
}

static json_t *
records_json(const char *id, char *err, size_t errlen)
{
	json_t *toks = json_array(), *ports = json_array(),
	    *rules = json_array(), *evs = json_array(), *doc = NULL;
	struct px_sandbox sb;

	if (toks == NULL || ports == NULL || rules == NULL || evs == NULL ||
	    px_store_event_list(M.store, id, 0, 0, add_event, evs, err,
	    errlen) != 0 ||
	    px_store_sandbox_get(M.store, id, &sb, err, errlen) != PX_STORE_OK ||
	    px_store_token_list(M.store, id, add_token, toks, err, errlen) != 0 ||
	    px_store_port_list(M.store, id, add_port, ports, err, errlen) != 0 ||
	    px_store_egress_list(M.store, id, add_rule, rules, err, errlen) != 0)
		goto fail;
	doc = json_pack("{s:{s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:s, s:s, "
	    "s:I}, s:O, s:O, s:O}", "sandbox", "template", sb.template_name,
	    "mem_mib", (int)sb.mem_mib, "vcpus", (int)sb.vcpus, "disk_mib",
	    (int)sb.disk_mib, "idle_pause_ms", (json_int_t)sb.idle_pause_ms,
	    "idle_suspend_ms", (json_int_t)sb.idle_suspend_ms,
	    "max_lifetime_ms", (json_int_t)sb.max_lifetime_ms, "env", sb.env,
	    "egress_mode", sb.egress_mode, "created", (json_int_t)sb.created,
	    "tokens", toks, "ports", ports, "egress", rules);
	events_trim(evs);
	if (doc == NULL || json_object_set(doc, "events", evs) != 0) {
		json_decref(doc);
		doc = NULL;
		snprintf(err, errlen, "out of memory");
	}
fail:
	json_decref(toks);
	json_decref(ports);
	json_decref(rules);
	json_decref(evs);
	return doc;
}

/* ======================= the target ======================= */

struct incoming {
	struct incoming *next;
	char id[41];
	char host[40];
	char dir[PATH_MAX];
	time_t begun;
	struct event *stale;		/* MOVE_STALE after its begin */
	struct event *watch;		/* all came: the source's lease */
	time_t whole;			/* ... since then */
	json_t *rec;			/* the begin's records, */
	int resume;			/* ... and whether it ran */
	struct vmm_move mv;
	int need[VMM_MOVE_FILES], got[VMM_MOVE_FILES], busy[VMM_MOVE_FILES];
	char sha[VMM_MOVE_FILES][65];
	struct spool *part[VMM_MOVE_FILES];	/* cut short: what came of
						 * it, for the source to go
						 * on from */
};

struct spool {
	struct incoming *in;
	size_t i;
	int fd;
	uint64_t bytes;
	EVP_MD_CTX *md;
	int sparse;			/* its sparse form comes (vmm.h) */
	struct vmm_sparse_wr wr;
};

static void spool_free(struct spool *, int);

static struct incoming *
in_find(const char *id)
{
	struct incoming *in;

	for (in = M.in; in != NULL; in = in->next)
		if (strcmp(in->id, id) == 0)
			return in;
	return NULL;
}

static void
in_drop(struct incoming *in)
{
	struct incoming **pp;
	size_t i;

	for (pp = &M.in; *pp != NULL; pp = &(*pp)->next)
		if (*pp == in) {
			*pp = in->next;
			break;
		}
	for (i = 0; i < VMM_MOVE_FILES; i++)
		if (in->part[i] != NULL)
			spool_free(in->part[i], 0);
	rm_tree(in->dir);
	if (in->stale != NULL)
		event_free(in->stale);
	if (in->watch != NULL)
		event_free(in->watch);
	json_decref(in->rec);
	free(in);
}

/* moves begun long ago and never committed (the source died) */
static void in_expire(void);
static void in_check_whole(struct incoming *);

static void
in_stale_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	in_expire();
}

static void
in_expire(void)
{
	struct incoming *in, *next;
	time_t now = time(NULL);

	for (in = M.in; in != NULL; in = next) {
		size_t i;
		int busy = 0;

		next = in->next;
		for (i = 0; i < in->mv.n; i++)
			busy |= in->busy[i];
		if (!busy && now - in->begun >= MOVE_STALE) {
			log_info("fleet: the move of %s from %s was never "
			    "committed: its files go", in->id, in->host);
			in_drop(in);
		}
	}
}

/* A begin's body: {"manifest", "records", "resume"} (the commit's form,
 * without the files' sha256s yet), or the bare manifest. */
static int
begin_parse(struct incoming *in, const char *body, size_t len, char *err,
    size_t errlen)
{
	json_t *doc, *man, *rec, *res;
	char *text;
	int rc;

	if ((doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL)) ==
	    NULL || json_object_get(doc, "files") != NULL) {
		json_decref(doc);
		return vmm_move_parse(body, len, &in->mv, err, errlen);
	}
	if (!json_is_object(man = json_object_get(doc, "manifest")) ||
	    !json_is_object(rec = json_object_get(doc, "records")) ||
	    !json_is_boolean(res = json_object_get(doc, "resume")) ||
	    json_object_size(doc) != 3 ||
	    (text = json_dumps(man, JSON_COMPACT)) == NULL) {
		json_decref(doc);
		snprintf(err, errlen, "a begin is the manifest, or "
		    "{\"manifest\", \"records\", \"resume\": boolean}");
		return -1;
	}
	rc = vmm_move_parse(text, strlen(text), &in->mv, err, errlen);
	free(text);
	if (rc == 0) {
		in->rec = json_incref(rec);
		in->resume = json_is_true(res);
	}
	json_decref(doc);
	return rc;
}

/* the store name of the moving sandbox's template ("" the default)
 * from its records; NULL none */
static const char *
rec_template(json_t *rec)
{
	return json_string_value(json_object_get(json_object_get(rec,
	    "sandbox"), "template"));
}

json_t *
px_fleet_move_begin(const char *host, const char *id, const char *body,
    size_t len, int *status, char *err, size_t errlen, void *arg)
{
	struct incoming *in;
	struct px_sandbox sb;
	char e[256], p[PATH_MAX + 16];
	json_t *need;
	size_t i;
	int rc;

	(void)arg;
	in_expire();
	/* drained: placed on no more, moved to no more (as a create) */
	if (px_fleet_drained()) {
		*status = 507;
		snprintf(err, errlen, "fleet host %s is drained: it takes no "
		    "moved sandbox", px_fleet_self());
		return NULL;
	}
	*status = 400;
	if ((in = in_find(id)) != NULL) {
		if (strcmp(in->host, host) != 0) {
			*status = 409;
			snprintf(err, errlen, "sandbox %s is moving here from "
			    "host %s", id, in->host);
			return NULL;
		}
		in_drop(in);	/* the same source begins again */
	}
	if (px_store_sandbox_get(M.store, id, &sb, e, sizeof(e)) !=
	    PX_STORE_NOTFOUND) {
		*status = 409;
		snprintf(err, errlen, "sandbox %s exists on host %s", id,
		    px_fleet_self());
		return NULL;
	}
	if ((in = calloc(1, sizeof(*in))) == NULL) {
		*status = 503;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (begin_parse(in, body, len, err, errlen) < 0 ||
	    strcmp(in->mv.id, id) != 0) {
		if (strcmp(in->mv.id, id) != 0 && in->mv.id[0] != '\0')
			snprintf(err, errlen, "the manifest is of another "
			    "sandbox");
		json_decref(in->rec);
		free(in);
		return NULL;
	}
	if ((rc = px_vm_move_needs(&in->mv, rec_template(in->rec), in->need,
	    err, errlen)) < 0) {
		*status = rc == -2 ? 409 : 500;
		json_decref(in->rec);
		free(in);
		return NULL;
	}
	if (px_vm_move_dir(NULL, p, sizeof(p)) < 0 ||
	    (mkdir(p, 0700) < 0 && errno != EEXIST) ||
	    px_vm_move_dir(id, in->dir, sizeof(in->dir)) < 0) {
		*status = 500;
		if (err[0] == '\0')
			snprintf(err, errlen, "%s: %s", p, strerror(errno));
		json_decref(in->rec);
		free(in);
		return NULL;
	}
	rm_tree(in->dir);	/* a move of it that came before */
	snprintf(p, sizeof(p), "%s/snap", in->dir);
	if (mkdir(in->dir, 0700) < 0 || mkdir(p, 0700) < 0) {
		*status = 500;
		snprintf(err, errlen, "%s: %s", in->dir, strerror(errno));
		rm_tree(in->dir);
		json_decref(in->rec);
		free(in);
		return NULL;
	}
	snprintf(in->id, sizeof(in->id), "%s", id);
	snprintf(in->host, sizeof(in->host), "%s", host);
	in->begun = time(NULL);
	if ((in->stale = evtimer_new(M.base, in_stale_cb, NULL)) != NULL) {
		struct timeval tv = { MOVE_STALE + 1, 0 };

		evtimer_add(in->stale, &tv);
	}
	in->next = M.in;
	M.in = in;
	need = json_array();
	for (i = 0; i < in->mv.n; i++)
		if (in->need[i])
			json_array_append_new(need, json_string(in->mv.f[i].name));
	log_info("fleet: host %s moves sandbox %s here (%zu files)", host, id,
	    in->mv.n);
	return json_pack("{s:s, s:o}", "id", id, "need", need);
}

/* The move of id from host, and the index *i of its file name, one
 * this host asked for and not being sent now; NULL with *status (409 no
 * such move or the file busy, 400 not a file it asked for) and err. */
static struct incoming *
in_file(const char *host, const char *id, const char *name, int *i,
    int *status, char *err, size_t errlen)
{
	struct incoming *in = in_find(id);

	*status = 409;
	if (in == NULL || strcmp(in->host, host) != 0) {
		snprintf(err, errlen, "no move of sandbox %s from host %s was "
		    "begun", id, host);
		return NULL;
	}
	if ((*i = vmm_move_index(&in->mv, name)) < 0 || !in->need[*i]) {
		*status = 400;
		snprintf(err, errlen, "%s: not a file this move sends", name);
		return NULL;
	}
	if (in->busy[*i]) {
		snprintf(err, errlen, "%s is being sent", name);
		return NULL;
	}
	return in;
}

void *
px_fleet_move_spool(const char *host, const char *id, const char *name,
    uint64_t from, int *status, char *err, size_t errlen, void *arg)
{
	struct incoming *in;
	struct spool *s;
	char p[PATH_MAX + 32];
	uint64_t held = 0;
	int i;

	(void)arg;
	if ((in = in_file(host, id, name, &i, status, err, errlen)) == NULL)
		return NULL;
	/* the rest of one cut short, from the byte it reached */
	if ((s = in->part[i]) != NULL) {
		in->part[i] = NULL;
		if (from > 0 && from == s->bytes) {
			in->busy[i] = 1;
			return s;
		}
		held = s->bytes;
		spool_free(s, 0);
	}
	if (from > 0) {
		snprintf(err, errlen, "%s: sent on from byte %llu, but %llu "
		    "bytes of it are here", name, (unsigned long long)from,
		    (unsigned long long)held);
		return NULL;
	}
	snprintf(p, sizeof(p), "%s/%s", in->dir, name);
	(void)unlink(p);	/* sent again */
	in->got[i] = 0;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1 ||
	    (s->fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		*status = 500;
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		if (s != NULL)
			EVP_MD_CTX_free(s->md);
		free(s);
		return NULL;
	}
	s->in = in;
	s->i = (size_t)i;
	if ((s->sparse = vmm_move_sparse(name)))
		vmm_sparse_wr_init(&s->wr, s->fd, in->mv.f[i].size);
	in->busy[i] = 1;
	return s;
}

static void
spool_free(struct spool *s, int keep)
{
	char p[PATH_MAX + 32];

	if (s->fd >= 0)
		close(s->fd);
	if (!keep) {
		snprintf(p, sizeof(p), "%s/%s", s->in->dir,
		    s->in->mv.f[s->i].name);
		(void)unlink(p);
	}
	s->in->busy[s->i] = 0;
	EVP_MD_CTX_free(s->md);
	free(s);
}

int
px_fleet_move_spool_write(void *h, const void *p, size_t len, int *status,
    char *err, size_t errlen)
{
	struct spool *s = h;
	const char *at = p;
	char why[VMM_ERRLEN];
	ssize_t n;

	if (s->sparse) {
		(void)EVP_DigestUpdate(s->md, p, len);
		s->bytes += len;
		if ((n = vmm_sparse_write(&s->wr, p, len, why,
		    sizeof(why))) < 0) {
			*status = n == -EINVAL ? 400 : n == -ENOSPC ? 507 : 500;
			snprintf(err, errlen, "%s: %s", s->in->mv.f[s->i].name,
			    why);
			spool_free(s, 0);
			return -1;
		}
		return 0;
	}
	if (s->bytes + len > s->in->mv.f[s->i].size) {
		*status = 400;
		snprintf(err, errlen, "%s: more than its %llu bytes",
		    s->in->mv.f[s->i].name,
		    (unsigned long long)s->in->mv.f[s->i].size);
		spool_free(s, 0);
		return -1;
	}
	(void)EVP_DigestUpdate(s->md, p, len);
	s->bytes += len;
	while (len > 0) {
		if ((n = write(s->fd, at, len)) < 0) {
			if (errno == EINTR)
				continue;
			*status = errno == ENOSPC ? 507 : 500;
			snprintf(err, errlen, "%s: %s", s->in->mv.f[s->i].name,
			    strerror(errno));
			spool_free(s, 0);
			return -1;
		}
		at += n;
		len -= (size_t)n;
	}
	return 0;
}

int
px_fleet_move_spool_end(void *h, int *status, char *err, size_t errlen)
{
	struct spool *s = h;
	unsigned char md[EVP_MAX_MD_SIZE];
	char why[VMM_ERRLEN];
	unsigned mdlen = 0, i;

	if (s->sparse && vmm_sparse_finish(&s->wr, why, sizeof(why)) < 0) {
		*status = 400;
		snprintf(err, errlen, "%s: %s", s->in->mv.f[s->i].name, why);
		spool_free(s, 0);
		return -1;
	}
	if (!s->sparse && s->bytes != s->in->mv.f[s->i].size) {
		*status = 400;
		snprintf(err, errlen, "%s: %llu bytes of %llu",
		    s->in->mv.f[s->i].name, (unsigned long long)s->bytes,
		    (unsigned long long)s->in->mv.f[s->i].size);
		spool_free(s, 0);
		return -1;
	}
	if (fsync(s->fd) < 0) {
		*status = 500;
		snprintf(err, errlen, "%s: %s", s->in->mv.f[s->i].name,
		    strerror(errno));
		spool_free(s, 0);
		return -1;
	}
	(void)EVP_DigestFinal_ex(s->md, md, &mdlen);
	for (i = 0; i < mdlen && i < 32; i++)
		snprintf(s->in->sha[s->i] + 2 * i, 3, "%02x", md[i]);
	s->in->got[s->i] = 1;
	in_check_whole(s->in);
	spool_free(s, 1);
	return 0;
}

/* Its connection went before the end: what came of it is kept (its
 * bytes written and hashed, the sparse form's state) for the source to
 * go on from; it goes if the rest never comes (the move's end). */
void
px_fleet_move_spool_abort(void *h)
{
	struct spool *s = h;

	if (s->bytes > 0 && s->in->part[s->i] == NULL) {
		s->in->busy[s->i] = 0;
		s->in->part[s->i] = s;
		return;
	}
	spool_free(s, 0);
}

/* GET .../file?name=: how many bytes of a file cut short are here (0:
 * none; the source sends it from there). */
json_t *
px_fleet_move_part(const char *host, const char *id, const char *name,
    int *status, char *err, size_t errlen, void *arg)
{
	struct incoming *in;
	int i;

	(void)arg;
	if ((in = in_file(host, id, name, &i, status, err, errlen)) == NULL)
		return NULL;
	return json_pack("{s:s, s:s, s:I}", "id", id, "name", name, "bytes",
	    (json_int_t)(in->part[i] != NULL ? in->part[i]->bytes : 0));
}

/* The records: the row, then tokens, ports and egress, stored; -1 with
 * *status and err, nothing stored. */
static int
store_records(const char *id, json_t *rec, const char **tdir, char *tbuf,
    size_t tlen, int *status, char *err, size_t errlen)
{
	json_t *s = json_object_get(rec, "sandbox"), *v;
	struct px_egress_rule rules[256];
	struct px_template tp;
	struct px_sandbox sb;
	const char *tpl, *env, *mode;
	json_int_t mem, vcpus, disk, ip, is, ml, created;
	size_t i, nr = 0;
	char e[256];

	*status = 400;
	memset(&sb, 0, sizeof(sb));
	if (json_unpack_ex(s, NULL, JSON_STRICT, "{s:s, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:s, s:s, s:I}", "template", &tpl, "mem_mib", &mem,
	    "vcpus", &vcpus, "disk_mib", &disk, "idle_pause_ms", &ip,
	    "idle_suspend_ms", &is, "max_lifetime_ms", &ml, "env", &env,
	    "egress_mode", &mode, "created", &created) < 0 ||
	    strlen(tpl) > PX_TEMPLATE_NAME_MAX ||
	    strlen(env) > PX_SANDBOX_ENV_MAX || strlen(mode) >= 16 ||
	    mem < 0 || mem > 1 << 20 || vcpus < 0 || vcpus > 1024 || disk < 0 ||
	    disk > 1 << 24) {
		snprintf(err, errlen, "records: a malformed sandbox");
		return -1;
	}
	*tdir = NULL;
	if (tpl[0] != '\0') {
		if (!px_template_name_valid(tpl) || px_store_template_get(
		    M.store, tpl, &tp, e, sizeof(e)) != PX_STORE_OK) {
			*status = 409;
			snprintf(err, errlen, "no template '%.40s' on host %s",
			    tpl, px_fleet_self());
			return -1;
		}
		snprintf(tbuf, tlen, "%s", tp.dir);
		*tdir = tbuf;
	}
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	snprintf(sb.state, sizeof(sb.state), "%s", PX_STATE_SUSPENDED);
	sb.created = created;
	snprintf(sb.egress_mode, sizeof(sb.egress_mode), "%s", mode);
	sb.mem_mib = (unsigned)mem;
	sb.vcpus = (unsigned)vcpus;
	sb.disk_mib = (unsigned)disk;
	snprintf(sb.template_name, sizeof(sb.template_name), "%s", tpl);
	sb.idle_pause_ms = ip;
	sb.idle_suspend_ms = is;
	sb.max_lifetime_ms = ml;
	snprintf(sb.env, sizeof(sb.env), "%s", env);
	if (px_store_sandbox_add(M.store, &sb, err, errlen) != PX_STORE_OK) {
		*status = 409;
		return -1;
	}
	json_array_foreach(json_object_get(rec, "tokens"), i, v) {
		struct px_token t;
		const char *tid, *sha, *name;
		json_int_t c;

		memset(&t, 0, sizeof(t));
		if (json_unpack_ex(v, NULL, JSON_STRICT, "{s:s, s:s, s:s, s:I}",
		    "id", &tid, "sha256", &sha, "name", &name, "created",
		    &c) < 0 || strlen(tid) >= sizeof(t.id) ||
		    strlen(sha) >= sizeof(t.sha256) ||
		    strlen(name) >= sizeof(t.name)) {
			snprintf(err, errlen, "records: a malformed token");
			goto undo;
		}
		snprintf(t.id, sizeof(t.id), "%s", tid);
		snprintf(t.sha256, sizeof(t.sha256), "%s", sha);
		snprintf(t.sandbox, sizeof(t.sandbox), "%s", id);
		snprintf(t.name, sizeof(t.name), "%s", name);
		t.created = c;
		if (px_store_token_add(M.store, &t, err, errlen) != PX_STORE_OK)
			goto undo;
	}
	json_array_foreach(json_object_get(rec, "ports"), i, v) {
		struct px_port pt;
		const char *hh, *vis, *ch;
		json_int_t c;
		int port;

		memset(&pt, 0, sizeof(pt));
		if (json_unpack_ex(v, NULL, JSON_STRICT, "{s:i, s:s, s:s, s:s, "
		    "s:I}", "port", &port, "host_header", &hh, "visibility",
		    &vis, "custom_host", &ch, "created", &c) < 0 ||
		    port < 1 || port > 65535 ||
		    px_host_header_parse(hh, &pt.host_header) < 0 ||
		    px_visibility_parse(vis, &pt.visibility) < 0 ||
		    strlen(ch) >= sizeof(pt.custom_host)) {
			snprintf(err, errlen, "records: a malformed port");
			goto undo;
		}
		snprintf(pt.sandbox, sizeof(pt.sandbox), "%s", id);
		pt.port = (uint16_t)port;
		snprintf(pt.custom_host, sizeof(pt.custom_host), "%s", ch);
		pt.created = c;
		if (px_store_port_set(M.store, &pt, NULL, err, errlen) !=
		    PX_STORE_OK)
			goto undo;
	}
	json_array_foreach(json_object_get(rec, "egress"), i, v) {
		const char *act, *rule;
		json_int_t x, c;

		if (nr == sizeof(rules) / sizeof(rules[0]) ||
		    json_unpack_ex(v, NULL, JSON_STRICT, "{s:s, s:s, s:I, s:I}",
		    "action", &act, "rule", &rule, "expires", &x, "created",
		    &c) < 0 || px_egress_action_parse(act,
		    &rules[nr].action) < 0 ||
		    strlen(rule) >= sizeof(rules[0].rule)) {
			snprintf(err, errlen, "records: a malformed egress "
			    "rule");
			goto undo;
		}
		snprintf(rules[nr].sandbox, sizeof(rules[0].sandbox), "%s", id);
		snprintf(rules[nr].rule, sizeof(rules[0].rule), "%s", rule);
		rules[nr].expires = x;
		rules[nr].created = c;
		nr++;
	}
	if (px_store_egress_replace(M.store, id, mode, rules, nr, err,
	    errlen) != PX_STORE_OK)
		goto undo;
	/* its history (optional: what an older source sends has none) */
	json_array_foreach(json_object_get(rec, "events"), i, v) {
		struct px_event ev;
		const char *op, *res, *why;
		json_int_t t, d;

		memset(&ev, 0, sizeof(ev));
		if (json_unpack_ex(v, NULL, JSON_STRICT, "{s:I, s:s, s:s, s:s, "
		    "s:I}", "time_ms", &t, "operation", &op, "result", &res,
		    "reason", &why, "duration_ms", &d) < 0 || t <= 0 ||
		    strlen(op) >= sizeof(ev.operation) ||
		    strlen(res) >= sizeof(ev.result) ||
		    strlen(why) >= sizeof(ev.reason)) {
			snprintf(err, errlen, "records: a malformed event");
			goto undo;
		}
		snprintf(ev.sandbox, sizeof(ev.sandbox), "%s", id);
		ev.time_ms = t;
		snprintf(ev.operation, sizeof(ev.operation), "%s", op);
		snprintf(ev.result, sizeof(ev.result), "%s", res);
		snprintf(ev.reason, sizeof(ev.reason), "%s", why);
		ev.duration_ms = d;
		if (px_store_event_add(M.store, &ev, NULL, err, errlen) !=
		    PX_STORE_OK)
			goto undo;
	}
	return 0;
undo:
	(void)px_store_sandbox_rm(M.store, id, e, sizeof(e));
	return -1;
}

/*
 * What came of in, adopted with records rec (mv: its manifest, each
 * file's sha256 the one that came, hashed here as each byte was written:
 * libvmm need not read a GiB of RAM file again); resume: it ran there,
 * woken here as a request would (joined by any). 0, restorable (what
 * the source waits for), or -1 with *status and err and nothing kept.
 * in is the caller's to drop.
 */
static int
in_adopt(struct incoming *in, struct vmm_move *mv, json_t *rec, int resume,
    const char *how, int *status, char *err, size_t errlen)
{
	struct px_event ev;
	const char *tdir, *tname = rec_template(rec);
	char tbuf[1024], vdir[PATH_MAX], e[256], how2[160];
	int rc, copied = 0;

	/* its template's version: this host's, or the copy that came */
	*status = 409;
	if (tname == NULL || px_vm_move_template(in->dir, mv, tname, vdir,
	    sizeof(vdir), &copied, err, errlen) < 0) {
		if (tname == NULL)
			snprintf(err, errlen, "records: no template");
		return -1;
	}
	if (copied) {
		snprintf(how2, sizeof(how2), "%s; template %s version %.12s "
		    "copied", how, tname[0] ? tname : "default",
		    mv->tpl_sha256);
		how = how2;
	}
	if (store_records(in->id, rec, &tdir, tbuf, sizeof(tbuf), status, err,
	    errlen) < 0)
		return -1;
	if ((rc = px_vm_move_adopt(in->dir, mv, vdir, err, errlen)) < 0) {
		*status = rc == -2 ? 409 : 400;
		(void)px_store_sandbox_rm(M.store, in->id, e, sizeof(e));
		return -1;
	}
	log_info("fleet: sandbox %s moved here from host %s%s%s", in->id,
	    in->host, how, resume ? "; it ran there: resumed here" : "");
	/* its claim says so: it wins over the source's at once */
	px_fleet_moved(in->id, in->host, px_fleet_self());
	memset(&ev, 0, sizeof(ev));
	snprintf(ev.sandbox, sizeof(ev.sandbox), "%s", in->id);
	snprintf(ev.operation, sizeof(ev.operation), "move");
	snprintf(ev.result, sizeof(ev.result), "ok");
	snprintf(ev.reason, sizeof(ev.reason), "here from host %s%s",
	    in->host, how);
	ev.duration_ms = -1;
	(void)px_store_event_add(M.store, &ev, NULL, e, sizeof(e));
	if (resume)
		px_vm_wake(in->id);
	return 0;
}

/*
 * Every file of in came whole and its source's lease went soon after
 * (within two leases and ADOPT_SECS: it died before its commit, or lost
 * etcd then): in is adopted with what its begin said, this host's etcd
 * answering (a host that lost etcd sees every other one gone). The
 * source, back, asks (its journal) and drops its copy; its commit,
 * should it come, is answered by the same question (409: no move
 * begun, then held). Later than that the source, alive meanwhile, may
 * have given up (a file's answer lost) and kept it: not adopted.
 */
static void
in_watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct incoming *in = arg;
	struct timeval tv = { 1, 0 };
	struct vmm_move mv;
	char err[VMM_ERRLEN];
	int status;
	size_t i;

	(void)fd;
	(void)what;
	if (time(NULL) - in->whole > ADOPT_SECS + 2 * (time_t)
	    (px_fleet_ttl_ms() / 1000)) {
		event_free(in->watch);	/* dropped at MOVE_STALE */
		in->watch = NULL;
		return;
	}
	for (i = 0; i < in->mv.n; i++)
		if (in->need[i] && (!in->got[i] || in->busy[i]))
			break;	/* one sent again: not whole now */
	if (i < in->mv.n || !px_fleet_etcd_ok() ||
	    px_fleet_host_live(in->host)) {
		evtimer_add(in->watch, &tv);
		return;
	}
	mv = in->mv;
	for (i = 0; i < mv.n; i++) {
		if (in->need[i])
			snprintf(mv.f[i].sha256, sizeof(mv.f[i].sha256), "%s",
			    in->sha[i]);
		mv.f[i].verified = in->need[i];
	}
	log_warnx("fleet: host %s, moving sandbox %s here, is gone from the "
	    "fleet before its commit: what came whole is adopted", in->host,
	    in->id);
	if (in_adopt(in, &mv, in->rec, in->resume, " (gone before its "
	    "commit)", &status, err, sizeof(err)) < 0)
		log_warnx("fleet: sandbox %s could not be adopted: %s; its "
		    "files go", in->id, err);
	in_drop(in);
	if (M.changed != NULL)
		M.changed();
}

/* Whether every file in needs came whole and its records with its
 * begin: then it is watched (in_watch_cb). */
static void
in_check_whole(struct incoming *in)
{
	struct timeval tv = { 1, 0 };
	size_t i;

	if (in->rec == NULL || in->watch != NULL)
		return;
	for (i = 0; i < in->mv.n; i++)
		if (in->need[i] && !in->got[i])
			return;
	in->whole = time(NULL);
	if ((in->watch = evtimer_new(M.base, in_watch_cb, in)) != NULL)
		evtimer_add(in->watch, &tv);
}

json_t *
px_fleet_move_commit(const char *host, const char *id, const char *body,
    size_t len, int *status, char *err, size_t errlen, void *arg)
{
	struct incoming *in = in_find(id);
	struct vmm_move mv;
	json_t *doc = NULL, *man, *rec, *res = NULL;
	char *text = NULL;
	size_t i;
	int stopped;

	(void)arg;
	*status = 409;
	if (in == NULL || strcmp(in->host, host) != 0) {
		snprintf(err, errlen, "no move of sandbox %s from host %s was "
		    "begun", id, host);
		return NULL;
	}
	*status = 400;
	if ((doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL)) == NULL ||
	    !json_is_object(man = json_object_get(doc, "manifest")) ||
	    !json_is_object(rec = json_object_get(doc, "records")) ||
	    ((res = json_object_get(doc, "resume")) != NULL &&
	    !json_is_boolean(res)) ||
	    json_object_size(doc) != 2U + (res != NULL) ||
	    (text = json_dumps(man, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "a commit is {\"manifest\", \"records\", "
		    "\"resume\"?: boolean}");
		goto fail;
	}
	log_info("fleet: host %s commits the move of %s", host, id);
	if (vmm_move_parse(text, strlen(text), &mv, err, errlen) < 0)
		goto fail;
	/* the manifest begun with, now with each file's sha256, as each
	 * came here */
	if (strcmp(mv.id, in->mv.id) != 0 || mv.n != in->mv.n ||
	    strcmp(mv.ready_key, in->mv.ready_key) != 0) {
		snprintf(err, errlen, "the commit's manifest is not the one "
		    "begun with");
		goto fail;
	}
	for (i = 0; i < mv.n; i++) {
		if (strcmp(mv.f[i].name, in->mv.f[i].name) != 0 ||
		    mv.f[i].size != in->mv.f[i].size) {
			snprintf(err, errlen, "the commit's manifest is not "
			    "the one begun with");
			goto fail;
		}
		if (in->need[i] && !in->got[i]) {
			snprintf(err, errlen, "%s never came whole",
			    mv.f[i].name);
			goto fail;
		}
		if (in->need[i] && strcmp(in->sha[i], mv.f[i].sha256) != 0) {
			snprintf(err, errlen, "%s: its sha256 is not what "
			    "came", mv.f[i].name);
			goto fail;
		}
		mv.f[i].verified = in->need[i];
	}
	if (in_adopt(in, &mv, rec, json_is_true(res), "", status, err,
	    errlen) < 0)
		goto fail;
	stopped = vmm_move_index(&mv, "snap/state") < 0;
	in_drop(in);
	free(text);
	json_decref(doc);
	return json_pack("{s:s, s:s, s:s, s:b}", "id", id, "state",
	    stopped ? PX_STATE_STOPPED : PX_STATE_SUSPENDED, "host",
	    px_fleet_self(), "resumed", json_is_true(res));
fail:
	log_warnx("fleet: the move of %s from %s is refused: %s", id, host,
	    err);
	in_drop(in);
	free(text);
	json_decref(doc);
	return NULL;
}

/*
 * GET /v1/fleet/move/{id} from a source whose commit's answer was lost:
 * whether this host holds the sandbox (ids are one per fleet: a row here
 * is the moved one). Not held: what came of its move goes, so a commit
 * still on its way finds no move begun and the source keeps it.
 */
json_t *
px_fleet_move_held(const char *host, const char *id, void *arg)
{
	struct incoming *in = in_find(id);
	struct px_sandbox sb;
	char e[256];
	int held;

	(void)arg;
	held = px_store_sandbox_get(M.store, id, &sb, e, sizeof(e)) ==
	    PX_STORE_OK;
	if (!held && in != NULL && strcmp(in->host, host) == 0) {
		size_t i;

		for (i = 0; i < in->mv.n && !in->busy[i]; i++)
			;
		if (i == in->mv.n)
			in_drop(in);
	}
	log_info("fleet: host %s asks whether sandbox %s is here: %s", host,
	    id, held ? "it is" : "it is not");
	return json_pack("{s:s, s:b}", "id", id, "held", held);
}

void
px_fleet_move_abort(const char *host, const char *id, void *arg)
{
	struct incoming *in = in_find(id);
	size_t i;

	(void)arg;
	if (in == NULL || strcmp(in->host, host) != 0)
		return;
	for (i = 0; i < in->mv.n; i++)
		if (in->busy[i])
			return;	/* its spool's abort comes; expired later */
	log_info("fleet: host %s gave up moving %s here", host, id);
	in_drop(in);
}
