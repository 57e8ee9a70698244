/*
 * berthd.c — the parent: parses the configuration, owns the state store,
 * the control API, the certificates and the listening sockets; forks one
 * unprivileged proxy worker per core and keeps them fed (routes, TLS,
 * ticket keys) and alive (a dead worker is restarted, the others keep
 * their connections). SIGHUP reloads, SIGTERM drains.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "conf.h"
#include "path.h"
#include "control.h"
#include "ipc.h"
#include "log.h"
#include "store.h"
#include "fleet_place.h"
#include "fleet_api.h"
#include "fleet_move.h"
#include <http_parser.h>
#include "tls.h"
#include "exec.h"
#include "vm.h"
#include "egress.h"
#include "fleet.h"
#include "proc.h"
#include "valid.h"
#include "worker.h"
#include "bufpool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#define MAX_WORKERS 64

struct slot {
	int		 id;
	pid_t		 pid;
	struct bufferevent *ipc;
	int		 fds[PX_MAX_LISTEN];
	int		 ready;
	json_t		*stats;
	unsigned	 restarts;
	time_t		 started;
	struct event	*restart_timer;
	struct event	*beat_timer;	/* pings it (proc.h: heartbeats) */
	struct px_beat	 beat;
};

static struct {
	struct event_base *base;
	struct px_config cfg;
	const char	*cfgfile;
	char		 state_dir[PATH_MAX];
	char		 empty_dir[PATH_MAX];
	struct px_store	*store;
	struct px_control *control;
	struct slot	 slots[MAX_WORKERS];
	int		 nslots;
	json_t		*certs;		/* [{cert, key}] PEM text */
	unsigned char	 tickets[PX_TICKET_KEYS][PX_TICKET_KEY_LEN];
	int		 access_fd;
	int		 acme_fd;
	uid_t		 uid;
	gid_t		 gid;
	int		 drop;
	int		 announced;
	int		 stopping;
	unsigned long long restarts_total;
	char		 egress_state[300];	/* for /v1/health */
	char		 vms_state[300];
} P;

static void fork_worker(struct slot *);
static void wake_metrics(struct evbuffer *);

/* Extra fields of GET /v1/health: what `netctl status` shows. */
static json_t *
health_json(void *arg)
{
	json_t *doc, *cap;

	doc = json_pack("{s:s, s:s, s:s?}", "egress", P.egress_state, "vms",
	    P.vms_state, "template", px_vm_template_default());
	/* what the host holds and can take (the sample /metrics shows) */
	if (doc != NULL && px_vm_enabled() && (cap = px_vm_capacity()) != NULL)
		json_object_set_new(doc, "capacity", cap);
	return doc;
}

/* VMs are off because egress could not be set up: a new VM sandbox is
 * refused with that reason rather than booted without its policy. */
static int
vm_refused(const char *sandbox, const struct px_vm_spec *spec, char *err,
    size_t errlen, void *arg)
{
	(void)sandbox;
	(void)spec;
	(void)arg;
	snprintf(err, errlen, "VMs are %s", P.vms_state);
	return -1;
}

static void
usage(void)
{
	fprintf(stderr, "usage: berthd [-f CONFIG] [-s STATE_DIR] [-n] [-v] | "
	    "berthd -O\n");
	exit(2);
}

/* -O: the control API's OpenAPI description (what GET /v1/openapi.json
 * answers), for share/berth/openapi.json. */
static int
print_openapi(void)
{
	json_t *doc = api_openapi_doc();
	char *text = doc != NULL ? json_dumps(doc, JSON_INDENT(1)) : NULL;

	json_decref(doc);
	if (text == NULL || printf("%s\n", text) < 0 || fflush(stdout) != 0) {
		fprintf(stderr, "berthd: cannot write the OpenAPI description\n");
		free(text);
		return 1;
	}
	free(text);
	return 0;
}

static int
mkdirs(const char *path, mode_t mode)
{
	char tmp[PATH_MAX], *p;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -1;
	for (p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	if (mkdir(tmp, mode) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

static char *
read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > 1 << 20 ||
	    fseek(f, 0, SEEK_SET) != 0 || (buf = malloc(n + 1)) == NULL ||
	    fread(buf, 1, n, f) != (size_t)n) {
		snprintf(err, errlen, "%s: cannot read", path);
		free(buf);
		fclose(f);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* berth-mkcert: $BERTH_MKCERT, installed, or beside the build/source tree */
static int
find_mkcert(char *out, size_t len)
{
	static const char *const rel[] = { "../certs/berth-mkcert",
	    "../../certs/berth-mkcert", "../../main/certs/berth-mkcert", NULL };

	return px_find_exe("BERTH_MKCERT", "berth-mkcert", rel, "certs/berth-mkcert",
	    out, len);
}

/* Makes the dev CA and the wildcard certificate on first start, or when
 * the domain changed. */
/*
 * <state>/tls as clients need it: the directory and the certificates
 * readable by everyone (ca.pem is what a non-root user's curl or browser
 * must trust), the keys by root alone. berth-mkcert makes the directory
 * 0700; older state directories have it so too.
 */
static void
tls_modes(const char *tlsdir)
{
	static const struct {
		const char *name;
		mode_t mode;
	} f[] = {
		{ "ca.pem", 0644 }, { "server.pem", 0644 },
		{ "ca.key", 0600 }, { "server.key", 0600 },
	};
	char path[PATH_MAX];
	struct stat st;
	size_t i;

	if (lstat(tlsdir, &st) == 0 && S_ISDIR(st.st_mode) &&
	    (st.st_mode & 07777) != 0755 && chmod(tlsdir, 0755) != 0)
		log_warn("chmod %s", tlsdir);
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tlsdir, f[i].name);
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
		    (st.st_mode & 07777) != f[i].mode && chmod(path, f[i].mode) != 0)
			log_warn("chmod %s", path);
	}
}

static void
ensure_dev_cert(const char *domain)
{
	char tlsdir[PATH_MAX], path[PATH_MAX], mk[PATH_MAX], stamp[PATH_MAX];
	char err[256], *old;
	pid_t pid;
	int st, fresh = 1;

	snprintf(tlsdir, sizeof(tlsdir), "%s/tls", P.state_dir);
	snprintf(path, sizeof(path), "%s/server.pem", tlsdir);
	snprintf(stamp, sizeof(stamp), "%s/domain", tlsdir);
	if (access(path, R_OK) == 0 && (old = read_file(stamp, err, sizeof(err))) != NULL) {
		fresh = strcmp(old, domain) != 0;
		free(old);
	}
	if (!fresh) {
		tls_modes(tlsdir);
		return;
	}
	if (find_mkcert(mk, sizeof(mk)) != 0)
		fatalx("cannot find berth-mkcert (set BERTH_MKCERT)");
	log_info("making a development CA and a certificate for *.%s in %s", domain, tlsdir);
	if ((pid = fork()) < 0)
		fatal("fork");
	if (pid == 0) {
		execl(mk, mk, tlsdir, domain, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fatalx("%s failed", mk);
	{
		FILE *f = fopen(stamp, "w");

		if (f != NULL) {
			fputs(domain, f);
			fclose(f);
		}
	}
	tls_modes(tlsdir);
}

/* Whether the configured certificate pair i loads; -1 with
 * "file:line: certificate CERT KEY: why" in err. */
static int
cert_pair_check(const struct px_config *c, int i, char *err, size_t errlen)
{
	struct px_tls_cert one;
	struct px_tls *t = NULL;
	char *cert = NULL, *key = NULL, why[512];

	if ((cert = read_file(c->certs[i].cert, why, sizeof(why))) != NULL &&
	    (key = read_file(c->certs[i].key, why, sizeof(why))) != NULL) {
		one.cert_pem = cert;
		one.cert_len = strlen(cert);
		one.key_pem = key;
		one.key_len = strlen(key);
		t = px_tls_new(&one, 1, why, sizeof(why));
	}
	if (key != NULL) {
		memset(key, 0, strlen(key));
		free(key);
	}
	free(cert);
	if (t != NULL) {
		px_tls_unref(t);
		return 0;
	}
	snprintf(err, errlen, "%s:%d: certificate %s %s: %s", c->file ? c->file :
	    "(embedded default)", c->certs[i].line, c->certs[i].cert,
	    c->certs[i].key, why);
	return -1;
}

/* Reads every certificate into memory as PEM text for the workers. */
static json_t *
load_certs(const struct px_config *c, char *err, size_t errlen)
{
	json_t *arr = json_array();
	char path[PATH_MAX], kpath[PATH_MAX];
	int i;

	for (i = -1; i < c->ncerts; i++) {
		char *cert, *key;

		if (i < 0) {
			snprintf(path, sizeof(path), "%s/tls/server.pem", P.state_dir);
			snprintf(kpath, sizeof(kpath), "%s/tls/server.key", P.state_dir);
		} else {
			snprintf(path, sizeof(path), "%s", c->certs[i].cert);
			snprintf(kpath, sizeof(kpath), "%s", c->certs[i].key);
		}
		/* each configured pair alone first, so an error names its line */
		if (i >= 0 && cert_pair_check(c, i, err, errlen) != 0)
			goto fail;
		if ((cert = read_file(path, err, errlen)) == NULL)
			goto fail;
		if ((key = read_file(kpath, err, errlen)) == NULL) {
			free(cert);
			goto fail;
		}
		json_array_append_new(arr, json_pack("{s:s,s:s}", "cert", cert, "key", key));
		memset(key, 0, strlen(key));
		free(cert);
		free(key);
	}
	/* Prove they load before any worker sees them. */
	{
		struct px_tls_cert tc[PX_MAX_CERTS + 1];
		struct px_tls *t;
		size_t k;
		json_t *cj;

		json_array_foreach(arr, k, cj) {
			tc[k].cert_pem = json_string_value(json_object_get(cj, "cert"));
			tc[k].cert_len = strlen(tc[k].cert_pem);
			tc[k].key_pem = json_string_value(json_object_get(cj, "key"));
			tc[k].key_len = strlen(tc[k].key_pem);
		}
		if ((t = px_tls_new(tc, (int)json_array_size(arr), err, errlen)) == NULL)
			goto fail;
		px_tls_unref(t);
	}
	return arr;
fail:
	json_decref(arr);
	return NULL;
}

static json_t *
tickets_json(void)
{
	json_t *a = json_array();
	char hex[PX_TICKET_KEY_LEN * 2 + 1];
	int i, j;

	for (i = 0; i < PX_TICKET_KEYS; i++) {
		for (j = 0; j < PX_TICKET_KEY_LEN; j++)
			snprintf(hex + 2 * j, 3, "%02x", P.tickets[i][j]);
		json_array_append_new(a, json_string(hex));
	}
	return a;
}

static json_t *
config_msg(void)
{
	const struct px_config *c = &P.cfg;
	unsigned n = (unsigned)P.nslots;
	json_t *m;
	size_t i;

	m = json_pack("{s:s,s:s,s:i,s:b}", "type", "config", "domain", c->domain,
	    "https_port", (int)px_config_https_port(c), "http2", c->http2);
	/* Limits are enforced per worker: each gets its share. */
	for (i = 0; m != NULL && i < px_conf_nfields; i++)
		if (json_object_set_new(m, px_conf_fields[i].key, json_integer(
		    px_conf_field_value(c, &px_conf_fields[i], n))) != 0) {
			json_decref(m);
			m = NULL;
		}
	return m;
}

static json_t *
routes_msg(void)
{
	json_t *m;
	char err[256];

	/* Built by the control API: sandboxes, ports and the token hashes
	 * the workers check private routes against. */
	if ((m = px_control_routes_json(P.store, P.cfg.domain, err,
	    sizeof(err))) != NULL) {
		px_fleet_routes(m);	/* fleet: publish ours, add the others' */
		return m;
	}
	/* NULL sends nothing (px_ipc_send, json_decref accept it): the
	 * workers keep the table they have rather than lose every route. */
	log_warnx("routes: %s", err);
	return NULL;
}

static json_t *
tls_msg(void)
{
	return json_pack("{s:s,s:O,s:o}", "type", "tls", "certs", P.certs,
	    "tickets", tickets_json());
}

static void
send_all(json_t *m)
{
	int i;

	for (i = 0; i < P.nslots; i++)
		if (P.slots[i].ipc != NULL)
			px_ipc_send(P.slots[i].ipc, m);
	json_decref(m);
}

static void
routes_changed(void *arg)
{
	send_all(routes_msg());
}

/* The view of the other hosts changed (etcd). */
static void
fleet_changed(void)
{
	send_all(routes_msg());
}

static struct json_t *
fleet_json(const char *what, void *arg)
{
	return px_fleet_json(what);
}

static int
fleet_drain(int on, char *err, size_t errlen, void *arg)
{
	(void)arg;
	if (px_fleet_set_drained(on, err, errlen) != 0)
		return -1;
	log_info("fleet: host %s %s", P.cfg.fleet_host, on ? "drained: "
	    "placed on no more" : "undrained: placed on again");
	return 0;
}

static void
metrics(struct evbuffer *out, void *arg)
{
	unsigned long long st[6] = { 0 }, bin = 0, bout = 0, uerr = 0;
	unsigned long long rej = 0, conns = 0, over = 0, active = 0, full = 0, res = 0;
	unsigned long long slow = 0, deferred = 0;
	json_t *sbs = json_object(), *v, *x;
	const char *k;
	int i, j, live = 0;

	for (i = 0; i < P.nslots; i++) {
		json_t *s = P.slots[i].stats;

		if (s == NULL)
			continue;
		live += P.slots[i].pid > 0;
#define G(name) (unsigned long long)json_integer_value(json_object_get(s, name))
		bin += G("bytes_in"); bout += G("bytes_out");
		uerr += G("upstream_errors"); rej += G("rejected");
		conns += G("conns_total"); over += G("overload"); active += G("active");
		slow += G("slow"); deferred += G("deferred");
		full += G("tls_full"); res += G("tls_resumed");
#undef G
		for (j = 0; j < 6; j++)
			st[j] += json_integer_value(json_array_get(json_object_get(s, "status"), j));
		/* each worker's counters of each sandbox, summed: a key of
		 * their own for the inner loop (reusing the outer one ended
		 * it after each worker's first sandbox) */
		json_object_foreach(json_object_get(s, "sandbox_metrics"), k, v) {
			json_t *acc = json_object_get(sbs, k);
			const char *f;

			if (acc == NULL) {
				acc = json_pack("{s:I,s:I,s:I,s:I,s:[I,I,I,I,I,I]}",
				    "requests", (json_int_t)0, "conns", (json_int_t)0,
				    "bytes_in", (json_int_t)0, "bytes_out", (json_int_t)0,
				    "status", (json_int_t)0, (json_int_t)0, (json_int_t)0,
				    (json_int_t)0, (json_int_t)0, (json_int_t)0);
				json_object_set_new(sbs, k, acc);
			}
			/* connections bound now: from the activity counters */
			x = json_object_get(json_object_get(json_object_get(s,
			    "sandboxes"), k), "conns");
			json_integer_set(json_object_get(acc, "conns"),
			    json_integer_value(json_object_get(acc, "conns")) +
			    json_integer_value(x));
			json_object_foreach(v, f, x) {
				json_t *a = json_object_get(acc, f);

				if (json_is_integer(x) && json_is_integer(a))
					json_integer_set(a, json_integer_value(a) +
					    json_integer_value(x));
				for (j = 0; json_is_array(x) && json_is_array(a) &&
				    j < (int)json_array_size(a); j++)
					json_integer_set(json_array_get(a, j),
					    json_integer_value(json_array_get(a, j)) +
					    json_integer_value(json_array_get(x, j)));
			}
		}
	}
	evbuffer_add_printf(out,
	    "# HELP berth_requests_total Requests answered, by status class.\n"
	    "# TYPE berth_requests_total counter\n");
	for (j = 1; j <= 5; j++)
		evbuffer_add_printf(out, "berth_requests_total{code=\"%dxx\"} %llu\n", j, st[j]);
	evbuffer_add_printf(out,
	    "# HELP berth_bytes_total Bytes through the proxy.\n"
	    "# TYPE berth_bytes_total counter\n"
	    "berth_bytes_total{direction=\"in\"} %llu\nberth_bytes_total{direction=\"out\"} %llu\n"
	    "# HELP berth_connections_active Open client connections.\n"
	    "# TYPE berth_connections_active gauge\nberth_connections_active %llu\n"
	    "# HELP berth_connections_slow Client connections whose request has gone on "
	    "for 200 ms with bytes still in transit; past 16 in a worker they run after "
	    "the others.\n"
	    "# TYPE berth_connections_slow gauge\nberth_connections_slow %llu\n"
	    "# HELP berth_connections_deferred Slow client connections running after "
	    "the others.\n"
	    "# TYPE berth_connections_deferred gauge\nberth_connections_deferred %llu\n"
	    "# HELP berth_connections_total Client connections accepted.\n"
	    "# TYPE berth_connections_total counter\nberth_connections_total %llu\n"
	    "# HELP berth_upstream_errors_total Upstream connect, timeout and protocol errors.\n"
	    "# TYPE berth_upstream_errors_total counter\nberth_upstream_errors_total %llu\n"
	    "# HELP berth_rejected_total Requests refused as malformed.\n"
	    "# TYPE berth_rejected_total counter\nberth_rejected_total %llu\n"
	    "# HELP berth_overload_total Connections refused at a limit.\n"
	    "# TYPE berth_overload_total counter\nberth_overload_total %llu\n"
	    "# HELP berth_tls_handshakes_total TLS handshakes completed.\n"
	    "# TYPE berth_tls_handshakes_total counter\n"
	    "berth_tls_handshakes_total{type=\"full\"} %llu\nberth_tls_handshakes_total{type=\"resumed\"} %llu\n"
	    "# HELP berth_workers Proxy workers running.\n# TYPE berth_workers gauge\nberth_workers %d\n"
	    "# HELP berth_worker_restarts_total Workers restarted after dying.\n"
	    "# TYPE berth_worker_restarts_total counter\nberth_worker_restarts_total %llu\n",
	    bin, bout, active, slow, deferred, conns, uerr, rej, over, full, res, live, P.restarts_total);
	if (px_eg_enabled())
		evbuffer_add_printf(out,
		    "# HELP berth_egress_pending 1 while the kernel refused the stored "
		    "egress rules (the previous ones stay in force; retrying).\n"
		    "# TYPE berth_egress_pending gauge\nberth_egress_pending %d\n"
		    "# HELP berth_egress_unattributed_total Denials from a tap of no "
		    "known sandbox.\n"
		    "# TYPE berth_egress_unattributed_total counter\n"
		    "berth_egress_unattributed_total %llu\n",
		    px_eg_pending(), px_eg_unattributed());
	px_proc_metrics(out);
	px_vm_metrics(out);
	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_requests_total Requests per sandbox.\n"
	    "# TYPE berth_sandbox_requests_total counter\n");
	json_object_foreach(sbs, k, v)
		evbuffer_add_printf(out, "berth_sandbox_requests_total{sandbox=\"%s\"} %lld\n",
		    k, (long long)json_integer_value(json_object_get(v, "requests")));
	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_connections Client connections bound to a sandbox now.\n"
	    "# TYPE berth_sandbox_connections gauge\n");
	json_object_foreach(sbs, k, v)
		evbuffer_add_printf(out, "berth_sandbox_connections{sandbox=\"%s\"} %lld\n",
		    k, (long long)json_integer_value(json_object_get(v, "conns")));
	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_responses_total Responses per sandbox, by status class.\n"
	    "# TYPE berth_sandbox_responses_total counter\n");
	json_object_foreach(sbs, k, v)
		for (j = 1; j <= 5; j++)
			evbuffer_add_printf(out, "berth_sandbox_responses_total{sandbox=\"%s\","
			    "code=\"%dxx\"} %lld\n", k, j, (long long)json_integer_value(
			    json_array_get(json_object_get(v, "status"), j)));
	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_bytes_total Bytes per sandbox (in: from clients).\n"
	    "# TYPE berth_sandbox_bytes_total counter\n");
	json_object_foreach(sbs, k, v)
		evbuffer_add_printf(out, "berth_sandbox_bytes_total{sandbox=\"%s\",direction=\"in\"} %lld\n"
		    "berth_sandbox_bytes_total{sandbox=\"%s\",direction=\"out\"} %lld\n",
		    k, (long long)json_integer_value(json_object_get(v, "bytes_in")),
		    k, (long long)json_integer_value(json_object_get(v, "bytes_out")));
	json_decref(sbs);
	wake_metrics(out);
	px_fleet_metrics(out);
}

static void
announce_ready(void)
{
	char buf[512];
	size_t o = 0;
	int i;

	for (i = 0; i < P.nslots; i++)
		if (!P.slots[i].ready)
			return;
	if (P.announced)
		return;
	P.announced = 1;
	for (i = 0; i < P.cfg.nlisten; i++)
		o += snprintf(buf + o, sizeof(buf) - o, "%s%s %s", i ? " " : "",
		    P.cfg.listen[i].https == PX_LISTEN_FLEET ? "fleet" :
		    P.cfg.listen[i].https ? "https" : "http", P.cfg.listen[i].text);
	log_info("ready: %s workers %d", buf, P.nslots);
}

/*
 * Wake metrics. The parent sees each wake once, however many workers
 * asked for it: it begins in handle_wake and ends in send_woken.
 */
static const double wake_le[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define WAKE_NLE (sizeof(wake_le) / sizeof(wake_le[0]))
struct wake_timer {
	char		 id[PX_SANDBOX_ID_MAX + 1];
	struct event	*ev;
	struct wake_timer *next;
};

static struct {
	json_t		*t0;		/* sandbox id -> ms its wake began */
	json_t		*per;		/* sandbox id -> [wakes, failures,
					 * timeouts] */
	struct wake_timer *timers;	/* a wake that outlasts t_wake */
	unsigned long long le[WAKE_NLE + 1], count;
	double		 sum;		/* seconds */
} W;

static long long
mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static json_t *
wake_counts(const char *id)
{
	json_t *c;

	if (W.per == NULL)
		W.per = json_object();
	if ((c = json_object_get(W.per, id)) == NULL) {
		c = json_pack("[I,I,I]", (json_int_t)0, (json_int_t)0, (json_int_t)0);
		json_object_set_new(W.per, id, c);
	}
	return c;
}

static void
wake_timer_del(const char *id)
{
	struct wake_timer **pp, *t;

	for (pp = &W.timers; (t = *pp) != NULL; pp = &t->next)
		if (strcmp(t->id, id) == 0) {
			*pp = t->next;
			event_free(t->ev);
			free(t);
			return;
		}
}

/*
 * The wake has taken t_wake already: the requests parked for it (the
 * first at about the time the wake began) were answered 503 by the
 * workers. Said once per wake, in the sandbox's events and /metrics.
 */
static void
wake_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_timer *t = arg;
	struct px_event ev;
	json_t *c;
	char err[256], id[sizeof(t->id)];

	snprintf(id, sizeof(id), "%s", t->id);
	wake_timer_del(id);	/* frees t */
	c = wake_counts(id);
	json_array_set_new(c, 2, json_integer(1 + json_integer_value(json_array_get(c, 2))));
	memset(&ev, 0, sizeof(ev));
	snprintf(ev.sandbox, sizeof(ev.sandbox), "%s", id);
	snprintf(ev.operation, sizeof(ev.operation), "wake-timeout");
	snprintf(ev.result, sizeof(ev.result), "failed");
	snprintf(ev.reason, sizeof(ev.reason), "not running within %u ms: the "
	    "requests parked for it got 503", P.cfg.t_wake);
	ev.duration_ms = P.cfg.t_wake;
	if (px_store_event_add(P.store, &ev, NULL, err, sizeof(err)) != PX_STORE_OK)
		log_warnx("sandbox %s: event not recorded: %s", id, err);
	log_warnx("wake %s: not running within %u ms: parked requests answered 503",
	    id, P.cfg.t_wake);
}

static void
wake_begins(const char *id)
{
	struct wake_timer *t;
	struct timeval tv = { P.cfg.t_wake / 1000, (P.cfg.t_wake % 1000) * 1000 };

	if (W.t0 == NULL)
		W.t0 = json_object();
	if (json_object_get(W.t0, id) != NULL)
		return;
	json_object_set_new(W.t0, id, json_integer(mono_ms()));
	if (P.cfg.t_wake > 0 && strlen(id) <= PX_SANDBOX_ID_MAX &&
	    (t = calloc(1, sizeof(*t))) != NULL) {
		snprintf(t->id, sizeof(t->id), "%s", id);
		if ((t->ev = evtimer_new(P.base, wake_timeout_cb, t)) == NULL) {
			free(t);
			return;
		}
		t->next = W.timers;
		W.timers = t;
		evtimer_add(t->ev, &tv);
	}
}

/* A wake of id ended; one that never began is a failure to begin. */
static void
wake_ends(const char *id, int ok)
{
	json_t *t0 = W.t0 ? json_object_get(W.t0, id) : NULL, *c;
	size_t i;

	if (ok && t0 == NULL)
		return;		/* it was running: no wake */
	wake_timer_del(id);
	c = wake_counts(id);
	json_integer_set(json_array_get(c, !ok), 1 +
	    json_integer_value(json_array_get(c, !ok)));
	if (ok) {
		double secs = (double)(mono_ms() - json_integer_value(t0)) / 1000;

		for (i = 0; i < WAKE_NLE && secs > wake_le[i]; i++)
			;
		W.le[i]++;
		W.count++;
		W.sum += secs;
	}
	if (t0 != NULL)
		json_object_del(W.t0, id);
}

static void
wake_metrics(struct evbuffer *out)
{
	unsigned long long cum = 0;
	const char *k;
	json_t *v;
	size_t i;

	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_wakes_total Wakes on request that ended with the "
	    "sandbox running.\n# TYPE berth_sandbox_wakes_total counter\n");
	if (W.per != NULL)
		json_object_foreach(W.per, k, v)
			evbuffer_add_printf(out, "berth_sandbox_wakes_total{sandbox=\"%s\"} "
			    "%lld\n", k, (long long)json_integer_value(json_array_get(v, 0)));
	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_wake_failures_total Wakes on request that failed "
	    "(the parked requests got 503).\n"
	    "# TYPE berth_sandbox_wake_failures_total counter\n");
	if (W.per != NULL)
		json_object_foreach(W.per, k, v)
			evbuffer_add_printf(out, "berth_sandbox_wake_failures_total{sandbox="
			    "\"%s\"} %lld\n", k,
			    (long long)json_integer_value(json_array_get(v, 1)));
	evbuffer_add_printf(out,
	    "# HELP berth_sandbox_wake_timeouts_total Wakes on request that took "
	    "longer than the wake timeout (the parked requests got 503; an event "
	    "wake-timeout each).\n"
	    "# TYPE berth_sandbox_wake_timeouts_total counter\n");
	if (W.per != NULL)
		json_object_foreach(W.per, k, v)
			evbuffer_add_printf(out, "berth_sandbox_wake_timeouts_total{sandbox="
			    "\"%s\"} %lld\n", k,
			    (long long)json_integer_value(json_array_get(v, 2)));
	evbuffer_add_printf(out,
	    "# HELP berth_wake_duration_seconds How long successful wakes on request "
	    "took, from the first request parked to the sandbox running.\n"
	    "# TYPE berth_wake_duration_seconds histogram\n");
	for (i = 0; i < WAKE_NLE; i++) {
		cum += W.le[i];
		evbuffer_add_printf(out, "berth_wake_duration_seconds_bucket{le=\"%g\"} "
		    "%llu\n", wake_le[i], cum);
	}
	evbuffer_add_printf(out, "berth_wake_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "berth_wake_duration_seconds_sum %.3f\n"
	    "berth_wake_duration_seconds_count %llu\n", W.count, W.sum, W.count);
}

/* Tells every worker how a wake of sandbox id ended: the one function
 * that sends "woken", from handle_wake's answer or the VMM's (vm.c's
 * woken hook). */
static void
send_woken(const char *id, int ok, const char *reason)
{
	wake_ends(id, ok);
	send_all(json_pack("{s:s,s:s,s:b,s:s?}", "type", "woken", "sandbox", id,
	    "ok", ok, "reason", reason));
}

static void
vm_changed(void)
{
	send_all(routes_msg());
}

/*
 * Idle policy input: a sandbox is active while a worker holds a
 * connection to it (open WebSockets and SSE streams included) or its
 * request and byte counters moved since the last report. A worker's
 * connections to a sandbox are a hold on it (px_vm_hold) from the report
 * that first counts them to the one that counts none: the idle policy
 * does not pause a sandbox with an open WebSocket because the next
 * report was read late (a loaded host, a parent busy with a slow write),
 * after the idle timer.
 */
static long long
report_conns(json_t *stats, const char *id)
{
	return json_integer_value(json_object_get(json_object_get(
	    json_object_get(stats, "sandboxes"), id), "conns"));
}

static void
note_activity(json_t *old, json_t *now)
{
	const char *id;
	json_t *v;

	if (!px_vm_enabled())
		return;
	json_object_foreach(json_object_get(now, "sandboxes"), id, v) {
		json_t *o = json_object_get(json_object_get(old, "sandboxes"), id);
		long long c = json_integer_value(json_object_get(v, "conns"));
		long long c0 = report_conns(old, id);

		if (c > 0 && c0 <= 0)
			px_vm_hold(id, 1);
		else if (c <= 0 && c0 > 0)
			px_vm_hold(id, 0);
		if (c > 0 || o == NULL || !json_equal(o, v))
			px_vm_activity(id);
	}
	/* a sandbox the worker no longer reports (its connections ended
	 * and it dropped the entry, or a new worker replaced it) */
	json_object_foreach(json_object_get(old, "sandboxes"), id, v)
		if (json_integer_value(json_object_get(v, "conns")) > 0 &&
		    json_object_get(json_object_get(now, "sandboxes"), id) == NULL)
			px_vm_hold(id, 0);
}

/*
 * A worker holds requests for a sleeping sandbox. One wake serves all
 * workers: the answer goes to every worker, whichever asked.
 */
static void
handle_wake(const char *id)
{
	struct px_sandbox sb;
	char err[256], why[320];
	const char *fail = why;

	if (px_store_sandbox_get(P.store, id, &sb, err, sizeof(err)) != PX_STORE_OK) {
		fail = "no such sandbox";
	} else if (strcmp(sb.state, "running") == 0) {
		/* already awake: the worker's routes were behind */
		send_all(routes_msg());
		fail = NULL;
	} else if (sb.external) {
		snprintf(why, sizeof(why), "sandbox %s is %s and managed outside berth: "
		    "berth cannot resume it", id, sb.state);
	} else if (px_vm_enabled()) {
		wake_begins(id);
		px_vm_wake(id);		/* answers through send_woken() (its hook) */
		return;
	} else {
		snprintf(why, sizeof(why), "sandbox %s is %s and this berthd has no VMM "
		    "to resume it", id, sb.state);
		log_warnx("wake %s: %s", id, why);
	}
	send_woken(id, fail == NULL, fail);
}

static void
slot_ipc_read(struct bufferevent *bev, void *arg)
{
	struct slot *s = arg;
	json_t *m;
	int r;

	while ((r = px_ipc_recv(bev, &m)) == 1) {
		const char *type = json_string_value(json_object_get(m, "type"));

		if (strcmp(type, "stats") == 0) {
			note_activity(s->stats, m);
			json_decref(s->stats);
			s->stats = m;
			continue;
		}
		if (strcmp(type, "wake") == 0 &&
		    json_is_string(json_object_get(m, "sandbox"))) {
			handle_wake(json_string_value(json_object_get(m, "sandbox")));
		} else if (strcmp(type, "pong") == 0 &&
		    json_is_integer(json_object_get(m, "seq"))) {
			json_int_t seq = json_integer_value(json_object_get(m, "seq"));

			if (seq <= 0 || px_beat_pong(&s->beat, (uint64_t)seq) != 0) {
				log_warnx("worker %d answered a ping it was not sent: "
				    "stopping it", s->id);
				kill(s->pid, SIGKILL);
			}
		} else if (strcmp(type, "ready") == 0) {
			s->ready = 1;
			log_debug("worker %d (pid %d) ready", s->id, (int)s->pid);
			announce_ready();
		} else {
			log_warnx("worker %d sent unknown message '%s': stopping it", s->id, type);
			kill(s->pid, SIGKILL);
		}
		json_decref(m);
	}
	if (r < 0) {
		log_warnx("worker %d sent a corrupt message: stopping it", s->id);
		kill(s->pid, SIGKILL);
		bufferevent_free(s->ipc);
		s->ipc = NULL;
	}
}

static void
slot_ipc_event(struct bufferevent *bev, short what, void *arg)
{
	struct slot *s = arg;

	/* the worker is exiting; SIGCHLD does the rest */
	bufferevent_free(s->ipc);
	s->ipc = NULL;
}

/* Every heartbeat interval: a worker that has not answered the last
 * ping (stopped, or its loop wedged) is killed; SIGCHLD restarts it as
 * any worker that died. Its messages still unread here (this loop was
 * late) buy it one more interval. Not while draining: hard_stop ends
 * those. */
static void
worker_beat(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;
	uint64_t seq;
	json_t *m;
	int pending = 0;

	if (s->pid <= 0 || P.stopping)
		return;
	if (s->ipc != NULL) {
		struct pollfd pfd = { bufferevent_getfd(s->ipc), POLLIN, 0 };

		pending = evbuffer_get_length(bufferevent_get_input(s->ipc)) > 0 ||
		    (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN));
	}
	switch (px_beat_tick(&s->beat, pending, &seq)) {
	case PX_BEAT_MISSED:
		log_warnx("worker %d (pid %d) missed its heartbeat (no answer in "
		    "%u ms): killing it", s->id, (int)s->pid,
		    px_proc_heartbeat_ms());
		evtimer_del(s->beat_timer);
		kill(s->pid, SIGKILL);
		break;
	case PX_BEAT_PING:
		if (s->ipc != NULL && (m = json_pack("{s:s,s:I}", "type", "ping",
		    "seq", (json_int_t)seq)) != NULL) {
			px_ipc_send(s->ipc, m);
			json_decref(m);
		}
		break;
	}
}

static void
fork_worker(struct slot *s)
{
	int sp[2], keep[PX_MAX_LISTEN + 4], nkeep = 0, https[PX_MAX_LISTEN], i;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
		fatal("socketpair");
	if ((pid = px_proc_fork()) < 0)
		fatal("fork");
	if (pid == 0) {
		char role[32];

		snprintf(role, sizeof(role), "berthd[worker %d]", s->id);
		log_setrole(strdup(role));
		keep[nkeep++] = sp[1];
		for (i = 0; i < P.cfg.nlisten; i++) {
			keep[nkeep++] = s->fds[i];
			https[i] = P.cfg.listen[i].https;
		}
		if (P.access_fd >= 0)
			keep[nkeep++] = P.access_fd;
		if (P.acme_fd >= 0)
			keep[nkeep++] = P.acme_fd;
		px_proc_close_fds(keep, nkeep);
		px_proc_jail("worker", PX_UID_WORKER(s->id));
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		prctl(PR_SET_DUMPABLE, 0);	/* no ptrace, no core with keys */
		_exit(px_worker_main(s->id, sp[1], s->fds, https, P.cfg.nlisten,
		    P.access_fd, P.acme_fd));
	}
	close(sp[1]);
	evutil_make_socket_nonblocking(sp[0]);
	evutil_make_socket_closeonexec(sp[0]);
	s->pid = pid;
	s->ready = 0;
	s->started = time(NULL);
	px_beat_reset(&s->beat);
	if (px_proc_heartbeat_ms() > 0) {
		unsigned ms = px_proc_heartbeat_ms();
		struct timeval tv = { ms / 1000, ms % 1000 * 1000 };

		evtimer_add(s->beat_timer, &tv);
	}
	s->ipc = bufferevent_socket_new(P.base, sp[0], BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(s->ipc, slot_ipc_read, NULL, slot_ipc_event, s);
	bufferevent_enable(s->ipc, EV_READ | EV_WRITE);
	/* everything a worker needs, queued before it even runs */
	{
		json_t *m;

		px_ipc_send(s->ipc, m = config_msg());
		json_decref(m);
		px_ipc_send(s->ipc, m = tls_msg());
		json_decref(m);
		if ((m = px_fleet_tls_msg()) != NULL) {
			px_ipc_send(s->ipc, m);
			json_decref(m);
		}
		px_ipc_send(s->ipc, m = routes_msg());
		json_decref(m);
	}
}

static void
restart_cb(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;

	if (!P.stopping)
		fork_worker(s);
}

/* The fleet lease's revoke answered (others drop this host at once
 * rather than after its TTL), or 2 s: then the loop ends. */
static void
exit_when_revoked(evutil_socket_t fd, short what, void *arg)
{
	static int tries;
	struct timeval tv = { 0, 50000 };

	if (px_fleet_revoking() && tries++ < 40)
		event_base_once(P.base, -1, EV_TIMEOUT, exit_when_revoked, NULL, &tv);
	else
		event_base_loopexit(P.base, NULL);
}

static void
sigchld_cb(evutil_socket_t sig, short what, void *arg)
{
	pid_t pid;
	int st, i, alive = 0;

	/* Only workers and helpers: libvmm reaps its own children (qemu,
	 * mkfs). */
	px_proc_sigchld();
	for (i = 0; i < P.nslots; i++) {
		struct slot *s = &P.slots[i];
		struct timeval tv = { 0, 0 };

		if (s->pid <= 0 || (pid = waitpid(s->pid, &st, WNOHANG)) <= 0)
			continue;
		{
			s->pid = 0;
			s->ready = 0;
			evtimer_del(s->beat_timer);
			if (s->ipc != NULL) {
				bufferevent_free(s->ipc);
				s->ipc = NULL;
			}
			if (P.stopping)
				continue;
			if (WIFSIGNALED(st))
				log_warnx("worker %d (pid %d) killed by signal %d: restarting",
				    s->id, (int)pid, WTERMSIG(st));
			else
				log_warnx("worker %d (pid %d) exited with status %d: restarting",
				    s->id, (int)pid, WEXITSTATUS(st));
			s->restarts++;
			P.restarts_total++;
			/* A worker that dies right after starting is crashing
			 * on something persistent: back off, up to 5 s. */
			if (time(NULL) - s->started < 2)
				tv.tv_sec = s->restarts < 5 ? s->restarts : 5;
			else
				s->restarts = 0;
			evtimer_add(s->restart_timer, &tv);
		}
	}
	if (!P.stopping)
		return;
	for (i = 0; i < P.nslots; i++)
		alive += P.slots[i].pid > 0;
	if (alive == 0) {
		log_info("all workers finished: exiting");
		exit_when_revoked(-1, 0, NULL);
	}
}

static void
hard_stop(evutil_socket_t fd, short what, void *arg)
{
	int i;

	log_warnx("workers did not finish in time: killing them");
	for (i = 0; i < P.nslots; i++)
		if (P.slots[i].pid > 0)
			kill(P.slots[i].pid, SIGKILL);
	event_base_loopexit(P.base, NULL);
}

static void
sigterm_cb(evutil_socket_t sig, short what, void *arg)
{
	struct timeval tv;
	json_t *m;
	int i, alive = 0;

	if (P.stopping) {
		hard_stop(-1, 0, NULL);
		return;
	}
	P.stopping = 1;
	log_info("received %s: draining (up to %u ms)", sig == SIGINT ? "SIGINT" : "SIGTERM",
	    P.cfg.t_drain);
	/* stop accepting right away: the workers' listeners close on
	 * "drain", these copies close here */
	for (i = 0; i < P.nslots; i++) {
		int j;

		for (j = 0; j < P.cfg.nlisten; j++) {
			close(P.slots[i].fds[j]);
			P.slots[i].fds[j] = -1;
		}
		alive += P.slots[i].pid > 0;
	}
	m = json_pack("{s:s}", "type", "drain");
	send_all(m);
	px_fleet_stop();
	px_proc_stop_all();
	px_exec_shutdown();	/* its answers go out through the control API */
	px_vm_build_stop();
	px_controld_stop();
	if (P.control != NULL) {
		px_control_free(P.control);
		P.control = NULL;
	}
	if (alive == 0) {
		exit_when_revoked(-1, 0, NULL);
		return;
	}
	tv.tv_sec = (P.cfg.t_drain + 2000) / 1000;
	tv.tv_usec = 0;
	event_base_once(P.base, -1, EV_TIMEOUT, hard_stop, NULL, &tv);
}

static int
open_access_log(const struct px_config *c)
{
	int fd;

	if (strcmp(c->access_log, "off") == 0)
		return -1;
	if (strcmp(c->access_log, "stderr") == 0)
		return dup(STDERR_FILENO);
	fd = open(c->access_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		log_warn("access log %s", c->access_log);
	return fd;
}

static int
str_changed(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

/*
 * Directives a reload cannot apply (what they set up exists once, from
 * the start: the control listener, the VMM manager, the egress table and
 * resolver, the workers' user): each changed one is named, so nobody
 * believes it took effect. nc is the new configuration.
 */
static void
reload_warnings(const struct px_config *nc)
{
	const struct px_config *oc = &P.cfg;
	char names[512] = "";
	int i, dns;

#define CHANGED(name, cond) do {					\
	if (cond) {							\
		size_t _n = strlen(names);				\
		snprintf(names + _n, sizeof(names) - _n, "%s%s",	\
		    _n ? ", " : "", name);				\
	}								\
} while (0)
	CHANGED("user", str_changed(nc->user, oc->user));
	CHANGED("helper_uid_range", nc->helper_uid_base != oc->helper_uid_base ||
	    nc->helper_uid_count != oc->helper_uid_count);
	CHANGED("heartbeat", nc->heartbeat != oc->heartbeat);
	CHANGED("vmm", nc->vmm != oc->vmm);
	CHANGED("vmm_backend", str_changed(nc->vmm_backend, oc->vmm_backend));
	CHANGED("accel", nc->accel != oc->accel);
	CHANGED("vm_template", nc->vm_template != oc->vm_template ||
	    str_changed(nc->template_dir, oc->template_dir));
	CHANGED("tap_prefix", str_changed(nc->tap_prefix, oc->tap_prefix));
	CHANGED("vm_pool", strcmp(nc->vm_pool, oc->vm_pool) != 0);
	CHANGED("vm_jail", nc->vm_jail != oc->vm_jail);
	CHANGED("vm_uid_range", nc->vm_uid_base != oc->vm_uid_base ||
	    nc->vm_uid_count != oc->vm_uid_count);
	CHANGED("egress", nc->egress != oc->egress);
	CHANGED("nflog_group", nc->nflog_group != oc->nflog_group);
	for (i = 0, dns = nc->ndns != oc->ndns; !dns && i < nc->ndns; i++)
		dns = strcmp(nc->dns_upstream[i], oc->dns_upstream[i]) != 0;
	CHANGED("dns_upstream", dns);
#undef CHANGED
	if (str_changed(nc->control_listen, oc->control_listen))
		log_warnx("SIGHUP: control_listen %s%s: the control listener is "
		    "opened at start only; takes effect on restart",
		    nc->control_listen ? nc->control_listen : "removed",
		    oc->control_listen == NULL ? " added" : "");
	if (names[0] != '\0')
		log_warnx("SIGHUP: %s changed: takes effect on restart", names);
}

static void
sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct px_config nc;
	char err[512];
	json_t *certs;
	int i;

	if (P.cfgfile == NULL) {
		log_info("SIGHUP: no configuration file; reloading certificates and routes");
		nc = P.cfg;
	} else if (px_config_load(&nc, P.cfgfile, err, sizeof(err)) != 0) {
		log_warnx("SIGHUP: configuration not reloaded: %s", err);
		return;
	}
	if (P.cfgfile != NULL) {
		int changed = nc.nlisten != P.cfg.nlisten;

		for (i = 0; !changed && i < nc.nlisten; i++)
			changed = strcmp(nc.listen[i].text, P.cfg.listen[i].text) != 0 ||
			    nc.listen[i].https != P.cfg.listen[i].https;
		if (changed)
			log_warnx("SIGHUP: listen addresses changed: takes effect on restart");
		if (nc.workers != P.cfg.workers)
			log_warnx("SIGHUP: worker count changed: takes effect on restart");
		if ((nc.acme_dir == NULL) != (P.cfg.acme_dir == NULL) ||
		    (nc.acme_dir && strcmp(nc.acme_dir, P.cfg.acme_dir) != 0))
			log_warnx("SIGHUP: acme_dir changed: takes effect on restart");
		memcpy(nc.listen, P.cfg.listen, sizeof(nc.listen));
		nc.nlisten = P.cfg.nlisten;
		nc.workers = P.cfg.workers;
		reload_warnings(&nc);
	}
	ensure_dev_cert(nc.domain);
	if ((certs = load_certs(&nc, err, sizeof(err))) == NULL) {
		log_warnx("SIGHUP: configuration not reloaded: %s", err);
		if (P.cfgfile != NULL)
			px_config_free(&nc);
		return;
	}
	if (P.cfgfile != NULL) {
		char *oldlog = strdup(P.cfg.access_log);

		px_config_free(&P.cfg);
		P.cfg = nc;
		if (oldlog && strcmp(oldlog, P.cfg.access_log) != 0)
			log_warnx("SIGHUP: access_log changed: takes effect on restart");
		free(oldlog);
		px_eg_reload();	/* the policy's egress_* defaults */
		px_exec_set_max_procs((int)P.cfg.vm_max_procs);
		px_exec_set_limits((int)P.cfg.exec_max_per_token,
		    P.cfg.exec_queue_timeout);
		/* standby budget and caps (libvmm applies them now) */
		px_vm_reload(&P.cfg);
	}
	json_decref(P.certs);
	P.certs = certs;
	send_all(config_msg());
	send_all(tls_msg());
	send_all(routes_msg());
	if (px_fleet_enabled()) {
		if (px_fleet_reload(&P.cfg, err, sizeof(err)) != 0)
			log_warnx("SIGHUP: fleet certificates not reloaded: %s", err);
		else {
			json_t *fl = px_fleet_tls_msg();

			/* the control helper's too: its listener and forwards */
			px_controld_fleet_reload(json_string_value(json_object_get(fl,
			    "ca")), json_string_value(json_object_get(fl, "cert")),
			    json_string_value(json_object_get(fl, "key")));
			json_decref(fl);
			send_all(px_fleet_tls_msg());
		}
	}
	log_info("reloaded configuration, certificates and routes");
}

static void
rotate_tickets(evutil_socket_t fd, short what, void *arg)
{
	memmove(P.tickets[1], P.tickets[0], PX_TICKET_KEY_LEN);
	if (RAND_bytes(P.tickets[0], PX_TICKET_KEY_LEN) != 1)
		fatalx("RAND_bytes");
	px_tls_set_ticket_keys((const unsigned char (*)[PX_TICKET_KEY_LEN])P.tickets,
	    PX_TICKET_KEYS);	/* the control listener's own contexts */
	send_all(json_pack("{s:s,s:o}", "type", "tickets", "keys", tickets_json()));
	log_debug("rotated session ticket keys");
}

/* The control API over TLS for remote agents (bearer tokens required),
 * with the default certificate: https://api.<domain>:<port>/ verifies
 * against the dev CA or the operator's wildcard. */
static void
start_control_tcp(void)
{
	struct px_controld_conf cf;
	char err[256];
	json_t *c = json_array_get(P.certs, 0), *fl = NULL;
	const char *port;

	/* Their clients are served by a helper (controld.c): it terminates
	 * TLS and parses HTTP and JSON; this process gets typed requests.
	 * The control API's, and in fleet mode the listener where other
	 * hosts forward the creates they placed here (mutual TLS with the
	 * fleet's certificates). */
	memset(&cf, 0, sizeof(cf));
	if (P.cfg.control_listen != NULL) {
		cf.addr = P.cfg.control_listen;
		cf.cert_pem = json_string_value(json_object_get(c, "cert"));
		cf.key_pem = json_string_value(json_object_get(c, "key"));
	}
	/* in fleet mode the helper also forwards the creates placed on
	 * other hosts, and reads their answers (fleet_api.c) */
	if (P.cfg.fleet_etcd != NULL) {
		if ((fl = px_fleet_tls_msg()) == NULL)
			fatalx("fleet mode is not running");
		cf.fleet_addr = P.cfg.fleet_api_listen;
		cf.fleet_ca_pem = json_string_value(json_object_get(fl, "ca"));
		cf.fleet_cert_pem = json_string_value(json_object_get(fl, "cert"));
		cf.fleet_key_pem = json_string_value(json_object_get(fl, "key"));
	}
	if (cf.addr == NULL && cf.fleet_ca_pem == NULL)
		return;
	if (px_controld_start(P.base, P.control, &cf, err, sizeof(err)) != 0)
		fatalx("control helper: %s", err);
	json_decref(fl);
	if (cf.addr != NULL) {
		port = strrchr(P.cfg.control_listen, ':');
		log_info("control API on https://api.%s:%s/ (TLS, bearer tokens)",
		    P.cfg.domain, port ? port + 1 : "?");
	}
	if (cf.fleet_addr != NULL)
		log_info("fleet: creates placed here by other hosts on %s (mutual "
		    "TLS, the control helper)", P.cfg.fleet_api_listen);
}

static int
listen_socket(const struct px_listen *l)
{
	int fd, one = 1;

	if ((fd = socket(l->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
	    bind(fd, (const struct sockaddr *)&l->ss, l->sslen) != 0 ||
	    listen(fd, 1024) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* berthd -n: the configuration loaded (px_config_load did); now that its
 * files are there and each certificate goes with its key. The exit
 * status. */
static int
config_test(const char *cfgfile)
{
	char err[512];
	int i, j;

		for (i = 0; i < P.cfg.ncerts; i++)
			for (j = 0; j < 2; j++) {
				const char *f = j ? P.cfg.certs[i].key : P.cfg.certs[i].cert;

				if (access(f, R_OK) != 0) {
					fprintf(stderr, "berthd: %s:%d: certificate %s: %s\n",
					    cfgfile, P.cfg.certs[i].line, f, strerror(errno));
					return 1;
				}
			}
		/* and that each pair loads: a certificate and its key */
		OPENSSL_init_ssl(0, NULL);
		for (i = 0; i < P.cfg.ncerts; i++)
			if (cert_pair_check(&P.cfg, i, err, sizeof(err)) != 0) {
				fprintf(stderr, "berthd: %s\n", err);
				return 1;
			}
		if (P.cfg.fleet_etcd != NULL) {
			const char *ff[] = { P.cfg.fleet_ca, P.cfg.fleet_cert, P.cfg.fleet_key,
			    P.cfg.fleet_etcd_ca, P.cfg.fleet_etcd_cert, P.cfg.fleet_etcd_key,
			    P.cfg.fleet_etcd_password };

			for (j = 0; j < 7; j++)
				if (ff[j] != NULL && access(ff[j], R_OK) != 0) {
					fprintf(stderr, "berthd: %s: fleet certificate %s: %s\n",
					    cfgfile, ff[j], strerror(errno));
					return 1;
				}
		}
		printf("berthd: configuration %s OK\n", cfgfile ? cfgfile : "(embedded default)");
		return 0;
}

/* The parent's resources before the event loop: limits, the state dir,
 * certificates, the store, ticket keys, logs, the workers' user and
 * their listening sockets. Exits on failure. */
static void
open_state(void)
{
	struct rlimit rl;
	char err[512];
	int i, j;

	signal(SIGPIPE, SIG_IGN);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 1048576 ? 1048576 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (mkdirs(P.state_dir, 0755) != 0)
		fatal("state dir %s", P.state_dir);
	snprintf(P.empty_dir, sizeof(P.empty_dir), "%s/empty", P.state_dir);
	if (mkdirs(P.empty_dir, 0755) != 0)
		fatal("%s", P.empty_dir);
	OPENSSL_init_ssl(0, NULL);
	ensure_dev_cert(P.cfg.domain);
	if ((P.certs = load_certs(&P.cfg, err, sizeof(err))) == NULL)
		fatalx("certificates: %s", err);
	if ((P.store = px_store_open(P.state_dir, err, sizeof(err))) == NULL)
		fatalx("state store: %s", err);
	if (RAND_bytes(P.tickets[0], PX_TICKET_KEY_LEN) != 1 ||
	    RAND_bytes(P.tickets[1], PX_TICKET_KEY_LEN) != 1)
		fatalx("RAND_bytes");
	px_tls_set_ticket_keys((const unsigned char (*)[PX_TICKET_KEY_LEN])P.tickets,
	    PX_TICKET_KEYS);
	P.access_fd = open_access_log(&P.cfg);
	P.acme_fd = -1;
	if (P.cfg.acme_dir != NULL &&
	    (P.acme_fd = open(P.cfg.acme_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		fatal("acme_dir %s", P.cfg.acme_dir);

	if (geteuid() == 0) {
		struct passwd *pw = getpwnam(P.cfg.user);

		if (pw == NULL)
			fatalx("user %s: no such user", P.cfg.user);
		if (pw->pw_uid == 0)
			fatalx("user %s: workers must not run as root", P.cfg.user);
		P.uid = pw->pw_uid;
		P.gid = pw->pw_gid;
		P.drop = 1;
	}

	P.nslots = P.cfg.workers > 0 ? P.cfg.workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (P.nslots < 1)
		P.nslots = 1;
	if (P.nslots > MAX_WORKERS)
		P.nslots = MAX_WORKERS;
	/* Each helper and each worker a uid of its own, so none can signal
	 * (stop, kill) another; all in user's group. */
	if (P.drop && P.cfg.helper_uid_count < PX_UID_WORKER(P.nslots))
		fatalx("helper_uid_range: %u uids, but the helpers and %d workers "
		    "need %u", P.cfg.helper_uid_count, P.nslots,
		    PX_UID_WORKER(P.nslots));
	if (P.drop && P.uid >= P.cfg.helper_uid_base &&
	    P.uid - P.cfg.helper_uid_base < P.cfg.helper_uid_count)
		fatalx("user %s: its uid %u is in helper_uid_range", P.cfg.user,
		    (unsigned)P.uid);
	px_proc_setup(P.empty_dir, P.cfg.helper_uid_base,
	    P.cfg.helper_uid_count, P.gid, P.drop, P.cfg.heartbeat);
	for (i = 0; i < P.nslots; i++) {
		P.slots[i].id = i;
		for (j = 0; j < P.cfg.nlisten; j++)
			if ((P.slots[i].fds[j] = listen_socket(&P.cfg.listen[j])) < 0)
				fatal("listen %s %s", P.cfg.listen[j].https ? "https" : "http",
				    P.cfg.listen[j].text);
	}
}

/* Egress first (VMs adopted next attach at once), then the VMM: fail
 * closed, no VM runs without its egress policy unless berth.conf says
 * "egress off". */
static void
start_sandboxes(void)
{
	char err[512], why[256];
	int vms = px_vm_wanted(&P.cfg, why, sizeof(why));

	/* "egress on" without VMs still programs the table and the policy
	 * (its limits and ranges), ready for the VMs of a later start */
	snprintf(P.egress_state, sizeof(P.egress_state), "off");
	if (P.cfg.egress == PX_VMM_ON || (vms && P.cfg.egress != PX_VMM_OFF)) {
		if (px_eg_init(P.base, P.store, &P.cfg, err, sizeof(err)) != 0) {
			if (P.cfg.egress == PX_VMM_ON)
				fatalx("egress: %s", err);
			log_warnx("egress: cannot set up table inet berth: %s", err);
			snprintf(P.egress_state, sizeof(P.egress_state),
			    "failed: %s", err);
			if (vms) {
				log_warnx("vmm: off: no VM starts without its egress "
				    "policy (fail closed; \"egress off\" in berth.conf "
				    "runs VMs without one)");
				snprintf(why, sizeof(why), "egress could not be set up "
				    "(fail closed): %s", err);
				snprintf(P.vms_state, sizeof(P.vms_state),
				    "off: %s", why);
				vms = 0;
			}
		} else {
			log_info("egress: table inet berth, resolver on each "
			    "sandbox's gateway, denial log on NFLOG group %u",
			    P.cfg.nflog_group);
			snprintf(P.egress_state, sizeof(P.egress_state), "on");
		}
	} else if (vms)
		log_warnx("egress: off in berth.conf: VMs run without egress "
		    "policy (guests reach the host, each other and every "
		    "address)");
	if (vms) {
		struct px_vm_hooks vh = { vm_changed, send_woken, P.uid,
		    P.gid, px_exec_woken, px_exec_forget, px_exec_stopping,
		    px_exec_start };

		if (px_vm_init(P.base, P.store, &P.cfg, P.state_dir, &vh, err,
		    sizeof(err)) != 0)
			fatalx("vmm: %s", err);
		log_info("vmm: %s", px_vm_describe());
		snprintf(P.vms_state, sizeof(P.vms_state), "on");
	} else if (P.vms_state[0] == '\0') {
		log_info("vmm: off (%s): only externally managed sandboxes", why);
		snprintf(P.vms_state, sizeof(P.vms_state), "off: %s", why);
	}
}

/* What the control API may call: the sandboxes' VMs and commands when
 * the VMM is on, egress when it is, templates always. */
static void
control_hooks(struct px_control_hooks *hooks)
{
	memset(hooks, 0, sizeof(*hooks));
	hooks->domain = P.cfg.domain;
	hooks->https_port = px_config_https_port(&P.cfg);
	hooks->routes_changed = routes_changed;
	hooks->metrics = metrics;
	hooks->config = &P.cfg;		/* the policy's defaults */
	if (px_eg_enabled()) {
		hooks->egress_changed = px_eg_changed;
		hooks->egress_log = px_eg_log;
	}
	hooks->health = health_json;
	if (!px_vm_enabled() && strncmp(P.vms_state, "off: egress", 11) == 0)
		hooks->vm_create = vm_refused;	/* fail closed, and say why */
	if (px_vm_enabled()) {
		hooks->vm_create = px_vm_create;
		hooks->vm_delete = px_vm_delete;
		hooks->vm_standby = px_vm_standby;
		hooks->vm_template_mem = px_vm_template_mem;
		hooks->vm_fork = px_vm_fork;
		hooks->max_forks = P.cfg.vm_max_forks;
		hooks->vm_checkpoint = px_vm_checkpoint;
		hooks->vm_checkpoints = px_vm_checkpoints;
		hooks->vm_checkpoint_get = px_vm_checkpoint_get;
		hooks->vm_checkpoint_rm = px_vm_checkpoint_rm;
		hooks->vm_info = px_vm_info;
		hooks->vm_console = px_vm_console;
		hooks->lifecycle = px_vm_lifecycle;
		hooks->vm_set_idle = px_vm_set_idle;
		hooks->template_dir = px_vm_template_dir();
		px_exec_init(P.base);
		px_exec_set_max_procs((int)P.cfg.vm_max_procs);
		px_exec_set_limits((int)P.cfg.exec_max_per_token,
		    P.cfg.exec_queue_timeout);
		/* keep-awake processes of re-adopted sandboxes hold them
		 * again (the agent lists them) */
		px_vm_each(px_exec_keep_check);
		hooks->exec = px_exec_start;
		hooks->exec_abandon = px_exec_abandon;
		hooks->exec_stream = px_exec_stream_start;
		hooks->exec_input = px_exec_stream_input;
		hooks->exec_read = px_exec_stream_read;
		hooks->exec_cancel = px_exec_stream_cancel;
		hooks->template_build = px_vm_template_build;
		hooks->template_build_status = px_vm_template_build_status;
		hooks->template_spool = px_vm_template_spool;
		hooks->template_spool_write = px_vm_template_spool_write;
		hooks->template_spool_end = px_vm_template_spool_end;
		hooks->template_spool_abort = px_vm_template_spool_abort;
		hooks->template_forget = px_vm_template_forget;
	}
	/* registering templates needs no VMs: only a directory that loads */
	hooks->template_check = px_vm_template_check;
}

/* Fleet mode (fleet_etcd in berth.conf): routes and placement shared
 * through etcd, the other hosts reached over mutual TLS. */
static int
fleet_template_add(const struct px_template *t, void *arg)
{
	if (json_array_size(arg) < PX_FLEET_TEMPLATES_MAX)
		json_array_append_new(arg, json_string(t->name));
	return 0;
}

/* The templates this host holds, by name ("default" first): where
 * placement may send a create that names one (fleet_place.h). */
static json_t *
fleet_templates(void)
{
	json_t *ts = json_pack("[s]", PX_TEMPLATE_DEFAULT);
	char err[256];

	if (px_store_template_list(P.store, fleet_template_add, ts, err,
	    sizeof(err)) != 0)
		log_warnx("fleet: templates for the room: %s", err);
	return ts;
}

/* What this host's VMs leave room for, in its fleet host value: more
 * sandboxes of the default size running, paused and suspended (from
 * measured costs, as netctl status says), free memory and disk, the
 * accelerator. NULL without VMs. */
static json_t *
fleet_room(void)
{
	json_t *cap = px_vm_capacity(), *more, *host, *room;

	if (cap == NULL)
		return NULL;
	more = json_object_get(cap, "more");
	host = json_object_get(cap, "host");
	room = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s}",
	    "running_more", json_integer_value(json_object_get(json_object_get(
	    more, "running"), "sandboxes")),
	    "paused_more", json_integer_value(json_object_get(json_object_get(
	    more, "paused"), "sandboxes")),
	    "suspended_more", json_integer_value(json_object_get(json_object_get(
	    more, "suspended"), "sandboxes")),
	    /* in 64 MiB steps: what moves a little each second would
	     * otherwise be written to etcd, and read by every host, at
	     * each tick */
	    "memory_available_bytes", json_integer_value(json_object_get(host,
	    "memory_available_bytes")) & ~(json_int_t)((64 << 20) - 1),
	    "disk_free_bytes", json_integer_value(json_object_get(host,
	    "disk_free_bytes")) & ~(json_int_t)((64 << 20) - 1),
	    "accel", px_vm_accel());
	json_decref(cap);
	json_object_set_new(room, "templates", fleet_templates());
	return room;
}

static void fleet_create_in(const char *, const char *, size_t,
    px_fleet_api_done_fn *, void *);

/* Placement: a create the control API placed on another host goes
 * there (fleet_api.c); one placed here is fed to the control API as a
 * peer's would be, with no network hop, so that its refusal too tries
 * the next host. */
static int
fleet_forward(const char *host, const char *body, size_t len,
    void (*done)(void *, int, const char *, size_t, const char *),
    void *done_arg, char *err, size_t errlen, void *arg)
{
	(void)arg;
	if (strcmp(host, px_fleet_self()) == 0) {
		fleet_create_in(host, body, len, done, done_arg);
		return 0;
	}
	return px_fleet_api_forward(P.base, host, body, len, done, done_arg, err,
	    errlen);
}

/* A create placement put on this very host: fed to the control API as a
 * connection of its own (px_control_adopt_fleet), whose answer is read
 * back from the other end of a socketpair. (A peer's comes through the
 * control helper: controld.c.) */
struct fleet_in {
	struct bufferevent *bev;
	px_fleet_api_done_fn *done;
	void *arg;
	int answered;
};

static void
fleet_in_answer(struct fleet_in *fi, int eof)
{
	struct evbuffer *in = bufferevent_get_input(fi->bev);
	size_t n = evbuffer_get_length(in);
	const char *text = n ? (const char *)evbuffer_pullup(in, -1) : "";
	const char *end, *body, *cl;
	int status = 0;
	size_t want;

	/* the API's own answer: a status line, headers, a Content-Length */
	if (n < 12 || (end = memmem(text, n, "\r\n\r\n", 4)) == NULL) {
		if (eof)
			goto broken;
		return;
	}
	body = end + 4;
	if (sscanf(text, "HTTP/1.1 %d", &status) != 1 || status < 100)
		goto broken;
	cl = memmem(text, (size_t)(end - text), "Content-Length: ", 16);
	want = cl != NULL ? strtoul(cl + 16, NULL, 10) : n - (size_t)(body - text);
	if ((size_t)(text + n - body) < want) {
		if (eof)
			goto broken;
		return;
	}
	fi->answered = 1;
	fi->done(fi->arg, status, body, want, NULL);
	return;
broken:
	fi->answered = 1;
	fi->done(fi->arg, 0, "", 0, "the control API gave no answer");
}

static void
fleet_in_read(struct bufferevent *bev, void *arg)
{
	struct fleet_in *fi = arg;

	(void)bev;
	fleet_in_answer(fi, 0);
	if (fi->answered) {
		bufferevent_free(fi->bev);
		free(fi);
	}
}

static void
fleet_in_event(struct bufferevent *bev, short what, void *arg)
{
	struct fleet_in *fi = arg;

	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		fleet_in_answer(fi, 1);
		bufferevent_free(fi->bev);
		free(fi);
	}
}

static void
fleet_create_in(const char *from, const char *body, size_t len,
    px_fleet_api_done_fn *done, void *arg)
{
	struct px_control_req q;
	struct fleet_in *fi;
	uint64_t serial;
	int sp[2];

	if ((fi = calloc(1, sizeof(*fi))) == NULL ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
		free(fi);
		done(arg, 0, "", 0, "out of memory or descriptors");
		return;
	}
	fi->done = done;
	fi->arg = arg;
	evutil_make_socket_nonblocking(sp[1]);
	if ((fi->bev = bufferevent_socket_new(P.base, sp[1],
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(sp[0]);
		close(sp[1]);
		free(fi);
		done(arg, 0, "", 0, "out of memory");
		return;
	}
	if ((serial = px_control_adopt_fleet(P.control, sp[0], from, NULL,
	    0)) == 0) {
		bufferevent_free(fi->bev);
		free(fi);
		done(arg, 0, "", 0, "the control API takes no more connections");
		return;
	}
	memset(&q, 0, sizeof(q));
	q.method = HTTP_POST;
	q.target = "/v1/sandboxes";
	q.authz = "";
	q.body = body;
	q.bodylen = len;
	q.close = 1;
	bufferevent_setcb(fi->bev, fleet_in_read, NULL, fleet_in_event, fi);
	bufferevent_enable(fi->bev, EV_READ);
	if (px_control_feed_request(P.control, serial, &q) != 0)
		px_control_feed_gone(P.control, serial);	/* EOF answers */
}

/* Moves between hosts (fleet_move.c): both sides, when VMs run here. */
static void
start_fleet_move(struct px_control_hooks *hooks)
{
	if (!px_vm_enabled())
		return;
	px_fleet_move_init(P.base, P.store, vm_changed);
	px_fleet_move_sweep();
	px_vm_move_prehash();
	hooks->move = px_fleet_move;
	hooks->move_begin = px_fleet_move_begin;
	hooks->move_spool = px_fleet_move_spool;
	hooks->move_spool_write = px_fleet_move_spool_write;
	hooks->move_spool_end = px_fleet_move_spool_end;
	hooks->move_spool_abort = px_fleet_move_spool_abort;
	hooks->move_part = px_fleet_move_part;
	hooks->move_commit = px_fleet_move_commit;
	hooks->move_abort = px_fleet_move_abort;
	hooks->move_held = px_fleet_move_held;
}

static void
start_fleet(struct px_control_hooks *hooks)
{
	const char *edge = "";
	char err[512], path[PATH_MAX];
	int i;

	for (i = 0; i < P.cfg.nlisten && *edge == '\0'; i++)
		if (P.cfg.listen[i].https == 1)
			edge = P.cfg.listen[i].text;
	if (px_fleet_init(P.base, &P.cfg, edge, fleet_changed, err, sizeof(err)) != 0)
		fatalx("fleet: %s", err);
	px_fleet_set_room(fleet_room);
	snprintf(path, sizeof(path), "%s/fleet-drained", P.state_dir);
	px_fleet_drain_file(path);
	if (px_fleet_drained())
		log_info("fleet: host %s is drained (%s): placed on no more "
		    "until 'netctl fleet undrain'", P.cfg.fleet_host, path);
	log_info("fleet: host %s, etcd %s://%s%s, prefix %s, listener %s (mutual TLS)",
	    P.cfg.fleet_host, P.cfg.fleet_etcd_tls ? "https" : "http",
	    P.cfg.fleet_etcd, P.cfg.fleet_etcd_tls ? (P.cfg.fleet_etcd_cert ?
	    " (TLS, client certificate)" : " (TLS)") : "", P.cfg.fleet_prefix,
	    P.cfg.fleet_listen);
	hooks->fleet = fleet_json;
	hooks->fleet_drain = fleet_drain;
	hooks->fleet_forward = fleet_forward;
	start_fleet_move(hooks);
}

/* berthd's unprivileged helpers (privsep/): what each one runs */
static const struct px_helper helpers[] = {
	{ "dns", px_dnsd_main },
	{ "nflog", px_nflogd_main },
	{ "control", px_controld_main },
	{ "agent", px_agentd_main },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	const char *state = NULL, *cfgfile = NULL;
	struct px_control_hooks hooks;
	char err[512], path[PATH_MAX];
	int ch, check = 0, verbose = 0, i;
	struct event *ev_hup, *ev_term, *ev_int, *ev_chld, *ev_rot;
	struct timeval rot = { 6 * 3600, 0 };

	/* before anything allocates (OpenSSL refuses afterwards) */
	(void)px_bufpool_install();
	px_proc_helper_main(argc, argv, helpers);	/* returns unless one */
	while ((ch = getopt(argc, argv, "f:s:nvhO")) != -1) {
		switch (ch) {
		case 'f': cfgfile = optarg; break;
		case 's': state = optarg; break;
		case 'n': check = 1; break;
		case 'v': verbose++; break;
		case 'O': return print_openapi();
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	log_init("berthd", verbose);
	if (state == NULL)
		state = getenv("BERTH_STATE_DIR");
	if (state == NULL || *state == '\0')
		state = BERTH_STATE_DIR_DEFAULT;
	if (realpath(state, P.state_dir) == NULL)
		snprintf(P.state_dir, sizeof(P.state_dir), "%s", state);
	P.cfgfile = cfgfile;
	if (px_config_load(&P.cfg, cfgfile, err, sizeof(err)) != 0) {
		fprintf(stderr, "berthd: %s\n", err);
		return 1;
	}
	if (check)
		return config_test(cfgfile);

	open_state();

	if ((P.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	start_sandboxes();
	control_hooks(&hooks);
	if (P.cfg.fleet_etcd != NULL)
		start_fleet(&hooks);
	snprintf(path, sizeof(path), "%s/control.sock", P.state_dir);
	if ((P.control = px_control_new(P.base, P.store, path, &hooks, err, sizeof(err))) == NULL)
		fatalx("control socket: %s", err);
	start_control_tcp();

	ev_hup = evsignal_new(P.base, SIGHUP, sighup_cb, NULL);
	ev_term = evsignal_new(P.base, SIGTERM, sigterm_cb, NULL);
	ev_int = evsignal_new(P.base, SIGINT, sigterm_cb, NULL);
	ev_chld = evsignal_new(P.base, SIGCHLD, sigchld_cb, NULL);
	ev_rot = event_new(P.base, -1, EV_PERSIST, rotate_tickets, NULL);
	evsignal_add(ev_hup, NULL);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);
	evsignal_add(ev_chld, NULL);
	evtimer_add(ev_rot, &rot);

	for (i = 0; i < P.nslots; i++) {
		P.slots[i].restart_timer = evtimer_new(P.base, restart_cb, &P.slots[i]);
		P.slots[i].beat_timer = event_new(P.base, -1, EV_PERSIST,
		    worker_beat, &P.slots[i]);
		fork_worker(&P.slots[i]);
	}
	log_info("state %s, control %s, CA %s/tls/ca.pem", P.state_dir, path, P.state_dir);
	event_base_dispatch(P.base);

	/* the sandboxes' VMs outlive berthd (re-adopted at the next start);
	 * what libvmm runs for itself (ready snapshot builds, the ready
	 * pool) does not */
	px_vm_drain();
	px_fleet_move_shutdown();
	px_exec_shutdown();
	px_controld_stop();
	if (P.control != NULL)
		px_control_free(P.control);
	px_store_close(P.store);
	event_free(ev_hup);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_chld);
	event_free(ev_rot);
	event_base_free(P.base);
	return 0;
}
