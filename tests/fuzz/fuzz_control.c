/*
 * fuzz_control.c — libFuzzer target for the control API (proxy/api/
 * with the store, tokens and the policy's rule relations): what API
 * clients send, above all the JSON bodies. The API is compiled into
 * this file to reach its connection code: each input is served on one
 * end of a socketpair by the real server on an event loop, against a
 * store reset to the same snapshot every time (sandbox sb-1 with a port
 * and an egress rule, a policy, an admin and a sandbox token).
 * data[0] & 15 picks a request (0: the rest is raw HTTP bytes; else a
 * method and path whose body is the rest), data[0] >> 4 the credentials
 * (unix socket admin, or over "TCP" no token, the admin token, sb-1's
 * token; in raw requests "@T@" stands for that token). Invariants: every answer is an HTTP response; the state reads
 * back as JSON afterwards; each route table the API publishes is one
 * the workers' route.c accepts.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "../../proxy/api/api.h"
#include "route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static struct px_control *ctl;
static char dir[128], state[160], dbpath[192];
static char *snapshot;
static size_t snaplen;
static char admin_tok[128], sb_tok[128];

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "fuzz_control: %s\n", what);
	abort();
}

/* Published routes must be loadable by a worker. */
static void
on_routes(void *arg)
{
	char err[256];
	json_t *m = px_control_routes_json(ctl->store, ctl->domain, err, sizeof(err));
	struct px_routes *r;

	if (m == NULL)
		die(err);
	if ((r = px_routes_build(json_object_get(m, "routes"), err, sizeof(err))) == NULL)
		die(err);
	px_routes_unref(r);
	json_decref(m);
}

/* Serves req on a fresh connection; the answers, NUL-terminated, in out. */
static size_t
serve(const char *req, size_t len, int tcp, char *out, size_t cap)
{
	size_t sent = 0, got = 0;
	int sv[2], spins = 0, eof = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair");
	api_accept_conn(ctl, sv[0], tcp, NULL, NULL);
	while (!eof) {
		ssize_t n;

		if (sent < len) {
			n = write(sv[1], req + sent, len - sent);
			if (n > 0)
				sent += (size_t)n;
			if (sent == len)
				shutdown(sv[1], SHUT_WR);
		} else if (len == 0 && spins == 0)
			shutdown(sv[1], SHUT_WR);
		event_base_loop(base, EVLOOP_NONBLOCK);
		while ((n = read(sv[1], out + got, cap - 1 - got)) > 0)
			if ((got += (size_t)n) == cap - 1)
				break;
		if (n == 0 || got == cap - 1)
			eof = 1;
		if (++spins > 100000)
			die("the server neither answered nor closed");
	}
	close(sv[1]);
	/* let the server side see the close and free its connection */
	while (!TAILQ_EMPTY(&ctl->conns) && ++spins < 200000)
		event_base_loop(base, EVLOOP_NONBLOCK);
	if (!TAILQ_EMPTY(&ctl->conns))
		die("connection not freed");
	out[got] = '\0';
	return got;
}

/* The status of the first response in s; -1 if none. */
static int
status_of(const char *s)
{
	if (strncmp(s, "HTTP/1.1 ", 9) != 0 || s[9] < '1' || s[9] > '5')
		return -1;
	return atoi(s + 9);
}

/* Sends one request, admin over the unix socket; its body as JSON. */
static json_t *
call(const char *method, const char *path, const char *body)
{
	static char out[1 << 16];
	char req[4096];
	const char *b;
	int n;

	n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\n"
	    "Content-Length: %zu\r\n\r\n%s", method, path, strlen(body), body);
	serve(req, (size_t)n, 0, out, sizeof(out));
	if (status_of(out) < 200 || status_of(out) > 299 ||
	    (b = strstr(out, "\r\n\r\n")) == NULL)
		die(out);
	return json_loads(b + 4, 0, NULL);
}

static void
cleanup(void)
{
	char p[256];

	if (ctl != NULL) {
		px_store_close(ctl->store);
		px_control_free(ctl);
	}
	snprintf(p, sizeof(p), "%s-wal", dbpath);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", dbpath);
	unlink(p);
	unlink(dbpath);
	rmdir(state);
	snprintf(p, sizeof(p), "%s/control.sock", dir);
	unlink(p);
	rmdir(dir);
}

/* 1 if the store was written to since it was opened (WAL mode: the
 * write-ahead log is empty until then). */
static int
written(void)
{
	struct stat st;
	char wal[256];

	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	return stat(wal, &st) != 0 || st.st_size > 0;
}

static struct px_store *
reopen(int restore)
{
	char err[256], p[256];
	struct px_store *st;
	FILE *f;

	if (restore) {
		snprintf(p, sizeof(p), "%s-wal", dbpath);
		unlink(p);
		snprintf(p, sizeof(p), "%s-shm", dbpath);
		unlink(p);
		if ((f = fopen(dbpath, "wb")) == NULL ||
		    fwrite(snapshot, 1, snaplen, f) != snaplen || fclose(f) != 0)
			die("cannot restore the snapshot");
	}
	if ((st = px_store_open(state, err, sizeof(err))) == NULL)
		die(err);
	return st;
}

static void
setup(void)
{
	struct px_control_hooks hooks;
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" :
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char err[256], p[192];
	json_t *j;
	FILE *f;
	long n;

	snprintf(dir, sizeof(dir), "%s/berth-fuzz-control-XXXXXX", tmp);
	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(dbpath, sizeof(dbpath), "%s/berth.db", state);
	atexit(cleanup);
	base = event_base_new();
	memset(&hooks, 0, sizeof(hooks));
	hooks.domain = "berth.localhost";
	hooks.https_port = 8443;
	hooks.routes_changed = on_routes;
	snprintf(p, sizeof(p), "%s/control.sock", dir);
	if (base == NULL || (ctl = px_control_new(base, reopen(0), p, &hooks,
	    err, sizeof(err))) == NULL)
		die(err);
	json_decref(call("PUT", "/v1/policy", "{\"default_mode\":\"allowlist\","
	    "\"max_mode\":\"open\",\"deny\":[\"*.evil.example\",\"10.0.0.0/8\"],"
	    "\"allow\":[\"*.example.com:443/tcp\",\"example.org\",\":443\"]}"));
	j = call("POST", "/v1/sandboxes", "{\"id\":\"sb-1\",\"address\":\"10.200.0.2\"}");
	snprintf(sb_tok, sizeof(sb_tok), "%s", json_string_value(json_object_get(j, "token")));
	json_decref(j);
	j = call("POST", "/v1/tokens", "{\"admin\":true,\"name\":\"fuzz\"}");
	snprintf(admin_tok, sizeof(admin_tok), "%s", json_string_value(json_object_get(j, "token")));
	json_decref(j);
	json_decref(call("PUT", "/v1/sandboxes/sb-1/ports/8080", "{\"visibility\":\"private\"}"));
	json_decref(call("POST", "/v1/sandboxes/sb-1/egress",
	    "{\"action\":\"allow\",\"rule\":\"api.example.com:443/tcp\",\"ttl\":\"1h\"}"));
	/* the snapshot every input starts from */
	px_store_close(ctl->store);
	ctl->store = NULL;
	if ((f = fopen(dbpath, "rb")) == NULL || fseek(f, 0, SEEK_END) != 0 ||
	    (n = ftell(f)) <= 0 || (snapshot = malloc((size_t)n)) == NULL ||
	    fseek(f, 0, SEEK_SET) != 0 || fread(snapshot, 1, (size_t)n, f) != (size_t)n)
		die("cannot read the snapshot");
	fclose(f);
	snaplen = (size_t)n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const reqs[][2] = {
		{ NULL, NULL },
		{ "POST", "/v1/sandboxes" },
		{ "PUT", "/v1/policy" },
		{ "PUT", "/v1/sandboxes/sb-1/egress" },
		{ "POST", "/v1/sandboxes/sb-1/egress" },
		{ "PUT", "/v1/sandboxes/sb-1/ports/8080" },
		{ "PUT", "/v1/sandboxes/sb-1/ports/3000" },
		{ "POST", "/v1/tokens" },
		{ "POST", "/v1/sandboxes/sb-1/resume" },
	};
	static const char readback[] =
	    "GET /v1/policy HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /v1/sandboxes/sb-1/egress HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /v1/sandboxes/sb-1 HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /v1/sandboxes?limit=1000 HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /v1/tokens HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	static char out[1 << 20], head[512];
	char *req = NULL, *p;
	const char *tok;
	size_t len, got;
	int pick, who, tcp, n;

	if (base == NULL)
		setup();
	if (size < 1)
		return 0;
	if (ctl->store == NULL)
		ctl->store = reopen(1);
	pick = data[0] & 15;
	who = data[0] >> 4 & 3;
	tcp = who != 0;
	tok = who == 2 ? admin_tok : who == 3 ? sb_tok : NULL;
	if (pick == 0 || pick >= (int)(sizeof(reqs) / sizeof(reqs[0]))) {
		/* raw bytes, where each "@T@" stands for the token */
		const uint8_t *d = data + 1, *end = data + size, *at;

		if ((req = malloc((size - 1) / 3 * 128 + size)) == NULL)
			die("out of memory");
		for (len = 0; (at = memmem(d, (size_t)(end - d), "@T@", 3)) != NULL; d = at + 3) {
			memcpy(req + len, d, (size_t)(at - d));
			len += (size_t)(at - d);
			len += (size_t)sprintf(req + len, "%s", tok ? tok : "");
		}
		memcpy(req + len, d, (size_t)(end - d));
		len += (size_t)(end - d);
	} else {
		n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: x\r\n"
		    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		    "%s%s%s\r\n", reqs[pick][0], reqs[pick][1], size - 1,
		    tok ? "Authorization: Bearer " : "", tok ? tok : "", tok ? "\r\n" : "");
		len = (size_t)n + size - 1;
		if ((req = malloc(len + 1)) == NULL)
			die("out of memory");
		memcpy(req, head, (size_t)n);
		memcpy(req + n, data + 1, size - 1);
	}
	serve(req, len, tcp, out, sizeof(out));
	free(req);
	if (getenv("FUZZ_CONTROL_TRACE") != NULL)
		fprintf(stderr, "%s\n----\n", out);
	/* every answer is an HTTP response with a status */
	if (out[0] != '\0' && status_of(out) < 0)
		die("an answer that is not HTTP");
	if (!written())
		return 0;	/* nothing changed: same store next time */
	/* the state reads back, every document JSON; answers are taken
	 * one after the other by their Content-Length */
	got = serve(readback, sizeof(readback) - 1, 0, out, sizeof(out));
	for (p = out; p < out + got; ) {
		const char *b = strstr(p, "\r\n\r\n"), *cl = strstr(p, "Content-Length: ");
		json_error_t jerr;
		json_t *j;
		size_t blen;

		if (status_of(p) != 200 && status_of(p) != 404)
			die(p);
		if (b == NULL || cl == NULL || cl > b)
			die("a read-back answer without a body");
		blen = (size_t)strtoul(cl + 16, NULL, 10);
		if (blen > (size_t)(out + got - (b + 4)))
			die("a read-back answer shorter than its Content-Length");
		if ((j = json_loadb(b + 4, blen, 0, &jerr)) == NULL)
			die(jerr.text);
		json_decref(j);
		p = (char *)b + 4 + blen;
	}
	/* back to the snapshot for the next input */
	px_store_close(ctl->store);
	ctl->store = NULL;
	return 0;
}
