/*
 * netctl.c — the netctl command-line client of berthd's control API:
 * parses `netctl [options] <noun> <verb> [args]`, checks every argument
 * locally (so a typo gets a precise message before any request), sends
 * requests over <state>/control.sock (or --url with --token) and prints
 * a table, a URL, or with --json the API's JSON. `netctl mcp` serves the
 * same API to coding agents over MCP (cli_mcp.c).
 *
 * Two tables drive it: opts_tab (every option: its name, the O_* bit
 * commands allow it by, where its value goes) and cmds (every command:
 * its words, arguments, options, handler and help). getopt's options,
 * the usage, `help` and `help --json` are made from them; adding a
 * command is one row in cmds and its handler in the family's file
 * (cli_sandbox.c, cli_exec.c, cli_files.c, cli_port.c, cli_egress.c,
 * cli_token.c, cli_template.c; see cli_cmd.h).
 *
 * Exit codes: 0 done, 1 berthd refused (4xx/5xx other than below),
 * 2 usage error, 3 berthd cannot be reached, 4 not authenticated or not
 * allowed (401/403).
 *
 * --json prints exactly one JSON document for every command, success or
 * not: the API's answer (or, for commands made of several requests, one
 * document gathering them), the API's error document, or one netctl
 * writes itself ({"error":{"status":null,"code":"usage"|"unreachable",
 * "message"}}). Everything goes through out_set(); main prints it once
 * (finish, cli_util.c).
 * Only `egress log --follow` and `sandbox watch` stream (one object a
 * line); `sandbox cat` prints the file's bytes and takes no --json.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli_cmd.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BERTH_STATE_DIR_DEFAULT
#define BERTH_STATE_DIR_DEFAULT "/var/lib/berth"
#endif

static char sock_path[4096];

/* ---- the options ---- */

/* Where an option's value goes. */
enum opt_kind {
	OK_FLAG,	/* nowhere: its O_* bit says it was given */
	OK_STR,		/* a string of struct opts, at off */
	OK_LIST,	/* one more string of an array of struct opts at off,
			 * its count at noff (at most MAX_RULE_OPTS) */
	OK_ONE,		/* an int of struct opts at off, set to 1 */
	OK_TARGET,	/* a string of tgt (struct cli_target), at off */
	OK_HOST,	/* --host: checked, lower-cased into opts.host */
	OK_JSON,	/* --json */
	OK_HELP		/* -h, --help */
};

struct opt {
	const char *name;	/* --name */
	int has_arg;		/* no_argument or required_argument */
	int letter;		/* getopt's code for it (0: one past 255 is
				 * given); with OF_SHORT also -letter */
	int flags;		/* OF_* */
	enum opt_kind kind;
	uint64_t bit;		/* O_*; 0: any command takes it */
	size_t off, noff;
	const char *full;	/* OK_LIST: "at most 64 <full>" */
};

#define OF_SHORT	0x01

#define F(nm, l, fl, bit) \
	{ nm, no_argument, l, fl, OK_FLAG, bit, 0, 0, NULL }
#define S(nm, l, fl, bit, field) \
	{ nm, required_argument, l, fl, OK_STR, bit, \
	    offsetof(struct opts, field), 0, NULL }
#define LIST(nm, l, bit, field, full) \
	{ nm, required_argument, l, 0, OK_LIST, bit, \
	    offsetof(struct opts, field), offsetof(struct opts, n##field), full }
#define TARGET(nm, l, field) \
	{ nm, required_argument, l, 0, OK_TARGET, 0, \
	    offsetof(struct cli_target, field), 0, NULL }

/*
 * In getopt's order. A letter is what getopt reports for the option in
 * optopt too ("unknown option -j" for --json=x), so the letters of the
 * long-only options that have one stay as they were.
 */
static const struct opt opts_tab[] = {
	S("state-dir", 's', OF_SHORT, 0, state_dir),
	{ "json", no_argument, 'j', 0, OK_JSON, 0, 0, 0, NULL },
	{ "help", no_argument, 'h', OF_SHORT, OK_HELP, 0, 0, 0, NULL },
	S("address", 'a', 0, O_ADDRESS, address),
	S("host-header", 'H', 0, O_HOST_HEADER, host_header),
	F("private", 'P', 0, O_PRIVATE),
	F("public", 'U', 0, O_PUBLIC),
	{ "host", required_argument, 'n', 0, OK_HOST, O_HOST, 0, 0, NULL },
	TARGET("url", 'u', url),
	TARGET("token", 't', token),
	TARGET("cacert", 'c', cacert),
	S("ttl", 'T', 0, O_TTL, ttl),
	F("admin", 'A', 0, O_ADMIN),
	S("sandbox", 'S', 0, O_SANDBOX, sandbox),
	S("name", 'N', 0, O_NAME, name),
	S("default-mode", 'D', 0, O_DEFAULT_MODE, default_mode),
	S("max-mode", 'M', 0, O_MAX_MODE, max_mode),
	LIST("deny", 'd', O_DENY, deny, "rules per option"),
	LIST("allow", 'w', O_ALLOW, allow, "rules per option"),
	S("max-rules", 0, 0, O_MAX_RULES, max_rules),
	S("conn-limit", 0, 0, O_CONN_LIMIT, conn_limit),
	S("new-conn-rate", 0, 0, O_NEW_CONN_RATE, new_conn_rate),
	F("follow", 0, 0, O_FOLLOW),
	LIST("permit", 0, O_PERMIT, permit, "rules per option"),
	S("memory", 0, 0, O_MEMORY, memory),
	S("vcpus", 0, 0, O_VCPUS, vcpus),
	S("disk", 0, 0, O_DISK, disk),
	S("template", 0, 0, O_TEMPLATE, template_),
	F("publish-exposed", 0, 0, O_PUBLISH_EXPOSED),
	S("idle-pause", 0, 0, O_IDLE_PAUSE, idle_pause),
	S("idle-suspend", 0, 0, O_IDLE_SUSPEND, idle_suspend),
	S("max-lifetime", 0, 0, O_MAX_LIFETIME, max_lifetime),
	LIST("env", 0, O_ENV, env, "--env options"),
	S("cwd", 0, 0, O_CWD, cwd),
	S("timeout", 0, 0, O_TIMEOUT, timeout),
	S("user", 0, 0, O_USER, user),
	{ "tty", no_argument, 0, 0, OK_ONE, O_TTY, offsetof(struct opts, tty),
	  0, NULL },
	F("detach", 0, 0, O_DETACH),
	F("keep-awake", 0, 0, O_KEEP_AWAKE),
	S("ring", 0, 0, O_RING, ring),
	S("signal", 0, 0, O_SIGNAL, signal),
	S("offset", 0, 0, O_OFFSET, offset),
	S("limit", 0, 0, O_LIMIT, limit),
	F("parents", 'p', OF_SHORT, O_PARENTS),	/* -p */
	S("mode", 0, 0, O_MODE, mode),
	F("recursive", 'r', OF_SHORT, O_RECURSIVE),	/* -r */
	F("overwrite", 0, 0, O_OVERWRITE),
	S("length", 0, 0, O_LENGTH, length),
	S("from", 0, 0, O_FROM, from),
	S("dockerfile", 0, 0, O_DOCKERFILE, dockerfile),
	S("image", 0, 0, O_IMAGE, image),
	S("file", 'f', OF_SHORT, O_FILE, file),	/* -f */
	LIST("build-arg", 0, O_BUILD_ARG, build_arg, "--build-arg options"),
	S("zone", 0, 0, O_ZONE, zone),
	S("to", 0, 0, O_TO, to),
	F("stay", 0, 0, O_STAY),
};

#undef F
#undef S
#undef LIST
#undef TARGET

#define NOPTS (sizeof(opts_tab) / sizeof(opts_tab[0]))

/* getopt's code for opts_tab[i]: its letter, else 256 on in order. */
static int
opt_code(size_t i)
{
	size_t k;
	int code = 256;

	if (opts_tab[i].letter != 0)
		return opts_tab[i].letter;
	for (k = 0; k < i; k++)
		if (opts_tab[k].letter == 0)
			code++;
	return code;
}

/* getopt_long's tables, made from opts_tab: ":s:hpr" and the long ones.
 * The leading ':' makes a missing value ':' rather than '?'. */
static void
opt_getopt(char *shortopts, size_t len, struct option *longopts)
{
	size_t i, n = 0;

	shortopts[n++] = ':';
	for (i = 0; i < NOPTS; i++) {
		longopts[i].name = opts_tab[i].name;
		longopts[i].has_arg = opts_tab[i].has_arg;
		longopts[i].flag = NULL;
		longopts[i].val = opt_code(i);
		if (!(opts_tab[i].flags & OF_SHORT) || n + 3 > len)
			continue;
		shortopts[n++] = (char)opts_tab[i].letter;
		if (opts_tab[i].has_arg == required_argument)
			shortopts[n++] = ':';
	}
	shortopts[n] = '\0';
	memset(&longopts[NOPTS], 0, sizeof(longopts[NOPTS]));
}

/* The option of a bit of O_*, without its "--". */
static const char *
opt_name(uint64_t bit)
{
	size_t i;

	for (i = 0; i < NOPTS; i++)
		if (opts_tab[i].bit == bit)
			return opts_tab[i].name;
	return "?";
}

/*
 * Keeps one option's value; EXIT_OK, or EXIT_USAGE after saying why.
 * want_help: set by -h.
 */
static int
opt_take(const struct opt *p, const char *arg, struct opts *o,
    int *want_help)
{
	const char **list;
	int *count;
	size_t k;

	switch (p->kind) {
	case OK_FLAG:
		break;
	case OK_STR:
		*(const char **)(void *)((char *)o + p->off) = arg;
		break;
	case OK_LIST:
		list = (const char **)(void *)((char *)o + p->off);
		count = (int *)(void *)((char *)o + p->noff);
		if (*count == MAX_RULE_OPTS) {
			fail("at most %d %s", MAX_RULE_OPTS, p->full);
			return EXIT_USAGE;
		}
		list[(*count)++] = arg;
		break;
	case OK_ONE:
		*(int *)(void *)((char *)o + p->off) = 1;
		break;
	case OK_TARGET:
		*(const char **)(void *)((char *)&tgt + p->off) = arg;
		break;
	case OK_HOST:
		if (strlen(arg) > PX_HOSTNAME_MAX) {
			fail("--host: name longer than %d bytes",
			    PX_HOSTNAME_MAX);
			return EXIT_USAGE;
		}
		/* DNS names are case-insensitive; berth stores them in
		 * lower case. */
		for (k = 0; arg[k] != '\0'; k++)
			o->host[k] = (char)tolower((unsigned char)arg[k]);
		o->host[k] = '\0';
		break;
	case OK_JSON:
		o->json = json_mode = 1;
		break;
	case OK_HELP:
		*want_help = 1;
		break;
	}
	o->given |= p->bit;
	return EXIT_OK;
}

/* ---- the commands ---- */

static json_int_t
jint(json_t *obj, const char *a, const char *b)
{
	return json_integer_value(json_object_get(b != NULL ?
	    json_object_get(obj, a) : obj, b != NULL ? b : a));
}

/* One cap of `netctl status`: "NAME N (M WHAT)", or "NAME off". */
static void
status_cap(json_t *caps, const char *name, const char *count,
    const char *what)
{
	printf("%s ", name);
	if (jint(caps, name, NULL) > 0)
		printf("%lld (%lld %s)", (long long)jint(caps, name, NULL),
		    (long long)jint(caps, count, NULL), what);
	else
		printf("off");
}

/* GET /v1/health's "capacity": what the host holds per state, its
 * standbys, what it has free and how many more sandboxes it can take. */
static void
status_capacity(json_t *cap)
{
	static const char *const states[] = { "running", "paused", "suspended",
	    "stopped", "failed" };
	json_t *st = json_object_get(cap, "states"), *x, *more;
	json_t *host = json_object_get(cap, "host");
	char mem[32], disk[32], lim[32];
	long long ago;
	size_t i;

	ago = ((long long)time(NULL) * 1000 - jint(cap, "sampled_at", NULL)) /
	    1000;
	printf("capacity (sampled %llds ago; every 30 s and after a state "
	    "change):\n", ago < 0 ? 0 : ago);
	printf("  %-10s %9s %10s %10s %8s\n", "STATE", "SANDBOXES", "MEMORY",
	    "DISK", "CPU");
	for (i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		x = json_object_get(st, states[i]);
		snprintf(mem, sizeof(mem), "%s",
		    human_bytes(jint(x, "memory_bytes", NULL)));
		snprintf(disk, sizeof(disk), "%s",
		    human_bytes(jint(x, "disk_bytes", NULL)));
		printf("  %-10s %9lld %10s %10s %8.2f\n", states[i],
		    (long long)jint(x, "sandboxes", NULL), mem, disk,
		    json_real_value(json_object_get(x, "cpu_cores")));
	}
	x = json_object_get(cap, "standby");
	snprintf(mem, sizeof(mem), "%s", human_bytes(jint(x, "memory_bytes",
	    NULL)));
	if (jint(x, "memory_limit_bytes", NULL) > 0)
		snprintf(lim, sizeof(lim), "%s",
		    human_bytes(jint(x, "memory_limit_bytes", NULL)));
	else
		snprintf(lim, sizeof(lim), "no limit");
	printf("  standby VMMs: %lld (vm_standby %lld), %s (vm_standby_memory "
	    "%s)\n", (long long)jint(x, "count", NULL),
	    (long long)jint(x, "max", NULL), mem, lim);
	snprintf(mem, sizeof(mem), "%s",
	    human_bytes(jint(host, "memory_available_bytes", NULL)));
	snprintf(lim, sizeof(lim), "%s",
	    human_bytes(jint(host, "memory_reserve_bytes", NULL)));
	snprintf(disk, sizeof(disk), "%s",
	    human_bytes(jint(host, "disk_free_bytes", NULL)));
	printf("  host: %s memory available (%s kept back), %s disk free, "
	    "%.2f of %lld cores idle, %lld addresses free\n", mem, lim, disk,
	    json_real_value(json_object_get(host, "cpu_idle_cores")),
	    (long long)jint(host, "cores", NULL),
	    (long long)jint(host, "addresses_free", NULL));
	more = json_object_get(cap, "more");
	printf("  room for:");
	for (i = 0; i < 3; i++) {
		x = json_object_get(more, states[i]);
		printf("%s %lld more %s (bound by %s%s)", i ? "," : "",
		    (long long)jint(x, "sandboxes", NULL), states[i],
		    jstr(x, "bound"), json_is_true(json_object_get(x,
		    "nominal")) ? "; nominal sizes: none to measure" : "");
	}
	printf("\n");
	x = json_object_get(cap, "caps");
	printf("  caps: ");
	status_cap(x, "vm_max_running", "running", "running");
	printf(", ");
	status_cap(x, "vm_max_resident", "resident", "running or paused");
	printf("\n");
}

static int
c_status(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *doc;
	int rc;

	if ((rc = call(o, "GET", "/v1/health", NULL, &doc)) != EXIT_OK)
		return rc;
	if (!o->json) {
		printf("berthd is %s (%s %s)\n",
		    strcmp(jstr(doc, "status"), "ok") == 0 ? "up" :
		    jstr(doc, "status"), tgt.url ? "control API" :
		    "control socket", tgt.url ? tgt.url : sock_path);
		if (json_is_string(json_object_get(doc, "egress")))
			printf("egress: %s\n", jstr(doc, "egress"));
		if (json_is_string(json_object_get(doc, "vms")))
			printf("vms: %s\n", jstr(doc, "vms"));
		if (json_is_string(json_object_get(doc, "template")))
			printf("default template: %s\n", jstr(doc, "template"));
		if (json_is_object(json_object_get(doc, "capacity")))
			status_capacity(json_object_get(doc, "capacity"));
	}
	json_decref(doc);
	return EXIT_OK;
}

static int
c_mcp(const struct cmd *c, struct opts *o, char **a, int n)
{
	if (o->json) {
		fail("--json does not apply to mcp: it speaks JSON-RPC on "
		    "stdout already");
		return EXIT_USAGE;
	}
	if (o->sandbox != NULL && check_id(o->sandbox) == -1)
		return EXIT_USAGE;
	return cli_mcp_serve(&tgt, o->sandbox) == 0 ? EXIT_OK : EXIT_REFUSED;
}

static int c_help(const struct cmd *, struct opts *, char **, int);

static const struct cmd cmds[] = {
	{ "sandbox", "create", "add", "<id> [--address <ip>] [--memory MiB] "
	  "[--vcpus N] [--disk MiB] [--template NAME] [--idle-pause D|never] "
	  "[--idle-suspend D|never] [--max-lifetime D|never] "
	  "[--env NAME=VALUE]... [--publish-exposed] [--host H] [--zone Z]", 1, 1,
	  O_ADDRESS | O_VM_ONLY | O_FROM | O_HOST | O_ZONE, c_sandbox_add,
	  "Create a sandbox: a microVM (waits until it runs), or with --address,\n"
	  "register an externally managed one (a container or another host)\n"
	  "reachable at <ip>. A microVM gets --memory MiB of RAM, --vcpus\n"
	  "vCPUs and a persistent disk of --disk MiB (defaults and maxima:\n"
	  "berth.conf's vm_memory, vm_vcpus, vm_disk and vm_max_*), boots\n"
	  "from --template NAME (see 'template ls'; default: default), and\n"
	  "is paused after --idle-pause without traffic, suspended to disk\n"
	  "after --idle-suspend and stopped --max-lifetime after it was\n"
	  "created (durations: 90s, 10m, 2h, 1d, or never; default: berth.conf's\n"
	  "idle_pause and idle_suspend, no lifetime limit). Every command in\n"
	  "it starts with the --env variables (its own --env wins).\n"
	  "--publish-exposed publishes the ports its template's image EXPOSEs\n"
	  "(as 'port publish' does) and prints their URLs. Prints the\n"
	  "sandbox's token once: it may manage only this sandbox (ports,\n"
	  "egress, pause, resume, events, exec). In fleet mode the sandbox\n"
	  "goes to the fleet host with the most room that holds its template\n"
	  "(--host H: that host; --zone Z: a host of that fleet_zone), and\n"
	  "the command says which." },
	{ "sandbox", "fork", NULL, "<id> <new-id> [<new-id>...]", 2, 101, 0,
	  c_sandbox_fork,
	  "Fork a running, paused or suspended microVM sandbox into new ones\n"
	  "(at most vm_max_forks, up to 100): each starts from its memory and\n"
	  "disk as they are now (files, running processes) with an identity of\n"
	  "its own (hostname, address, machine id), its own disk layer, and the\n"
	  "source's template, sizes, idle limits and egress rules, not its ports\n"
	  "or tokens. A running source pauses briefly while its state is\n"
	  "captured and runs on; a suspended one is not woken. Waits until the\n"
	  "forks run; prints each one's token once." },
	{ "sandbox", "checkpoint", NULL, "<id> <name>", 2, 2, 0,
	  c_sandbox_checkpoint,
	  "Keep the running, paused or suspended microVM sandbox's memory and\n"
	  "disk as they are now under <name> (a running one pauses as briefly\n"
	  "as for a fork and runs on; a suspended one is not woken). 'sandbox restore' goes back to it, 'sandbox create NEW\n"
	  "--from <id>:<name>' makes a new sandbox from it; 'checkpoint ls'\n"
	  "lists them with their size on disk. At most vm_max_checkpoints\n"
	  "per sandbox (berth.conf); they go with the sandbox." },
	{ "sandbox", "restore", NULL, "<id> <checkpoint>", 2, 2, 0,
	  c_sandbox_restore,
	  "Put the sandbox back to its checkpoint, in place: what it wrote\n"
	  "and ran since is gone, its files and processes are as they were\n"
	  "then; same id, address, ports and tokens. Waits until it runs." },
	{ "sandbox", "move", NULL, "<id> --to <host>", 1, 1, O_TO,
	  c_sandbox_move,
	  "Fleet mode: move the sandbox to another host of the fleet. It is\n"
	  "suspended (if it runs or is paused), its files are copied to <host>\n"
	  "over the fleet's mutual TLS, adopted there with its tokens, ports\n"
	  "and egress rules, and its URL then answers from <host>; only then\n"
	  "are its files here removed. Anything failing before that leaves it\n"
	  "here, suspended. The next request wakes it on <host>. A stopped\n"
	  "one moves as its disk, stopped: 'sandbox start' boots it there." },
	{ "checkpoint", "ls", "list", "<id>", 1, 1, 0, c_checkpoint_ls,
	  "List a sandbox's checkpoints, oldest first, with their size on\n"
	  "disk (the disk layer and memory each one keeps)." },
	{ "checkpoint", "rm", "remove", "<id> <name>", 2, 2, 0, c_checkpoint_rm,
	  "Remove a checkpoint; the disk layers only it kept are freed\n"
	  "(sandboxes made from it keep theirs)." },
	{ "sandbox", "set", NULL, "<id> [--idle-pause D|never|default] "
	  "[--idle-suspend D|never|default] [--max-lifetime D|never|default] "
	  "[--env NAME=VALUE... | --env -]",
	  1, 1, O_IDLE_PAUSE | O_IDLE_SUSPEND | O_MAX_LIFETIME | O_ENV,
	  c_sandbox_set,
	  "Change a microVM sandbox's idle policy; 'default' follows berth.conf\n"
	  "again. Applies at once to the running VM. --env replaces the\n"
	  "variables every command in it starts with ('--env -': none).\n"
	  "Recorded as an event." },
	{ "sandbox", "rm", "delete", "<id>", 1, 1, 0, c_sandbox_rm,
	  "Remove a sandbox with its ports, egress rules, tokens and events\n"
	  "(and its disk). With a path after the id, 'sandbox rm' removes\n"
	  "that path in the guest instead (see below)." },
	{ "sandbox", "ls", "list", "", 0, 0, 0, c_sandbox_ls,
	  "List sandboxes: ID STATE ADDRESS EXTERNAL CREATED; in fleet mode\n"
	  "every host's, with a HOST column (\"(down)\": its lease expired)." },
	{ "sandbox", "show", NULL, "<id>", 1, 1, 0, c_sandbox_show,
	  "Show one sandbox and its published ports." },
	{ "sandbox", "pause", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Pause a VM-backed sandbox (memory kept). Refused (exit 1) for an\n"
	  "external sandbox; the attempt is recorded in its events." },
	{ "sandbox", "suspend", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Snapshot a VM-backed sandbox to disk and free its memory." },
	{ "sandbox", "resume", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Resume a paused or suspended sandbox. A failed or stopped one has\n"
	  "nothing to resume: start it." },
	{ "sandbox", "start", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Boot a stopped or failed sandbox again from its template, keeping\n"
	  "its disk (/data and its files); waits until it runs." },
	{ "sandbox", "stop", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Power a sandbox's VM off; its disk, ports and rules stay." },
	{ "sandbox", "restart", NULL, "<id>", 1, 1, 0, c_lifecycle,
	  "Stop a sandbox (unless it is stopped or failed) and start it again\n"
	  "from its template, keeping its disk; waits until it runs." },
	{ "sandbox", "console", NULL, "<id> [--follow]", 1, 1, O_FOLLOW,
	  c_sandbox_console,
	  "Print the guest console berthd keeps (the last 64 KiB; at most\n"
	  "vm_console_max in all); --follow keeps printing what comes." },
	{ "sandbox", "exec", NULL, "<id> [--user U] [--tty] [--env NAME=VALUE]... "
	  "[--cwd DIR] [--timeout D] [--detach [--keep-awake] [--ring SIZE]] "
	  "-- CMD [ARG]...", 2, 4096, O_ENV | O_CWD |
	  O_TIMEOUT | O_USER | O_TTY | O_DETACH | O_KEEP_AWAKE | O_RING,
	  c_sandbox_exec,
	  "Run CMD in the sandbox's guest (as root, or --user U: a name or uid\n"
	  "of the guest's /etc/passwd, with its groups) and print its stdout and\n"
	  "stderr as they were; netctl exits with the command's status (128+N\n"
	  "when signal N ended it; netctl's own failures keep their codes, so\n"
	  "1-4 may be either: --json tells). A paused or suspended sandbox is\n"
	  "woken first. stdin is sent when it is not a terminal (at most 48\n"
	  "KiB for now; output is returned once the command ends, at most 4\n"
	  "MiB a stream). --timeout (default 10m, at most 24h) kills the\n"
	  "command after D. --tty runs it on a terminal in the guest (its size\n"
	  "netctl's own, else 24x80; output is one stream, stdout). A sandbox\n"
	  "token may exec only in its sandbox. --detach starts CMD as a\n"
	  "process that outlives netctl (and pause, suspend, resume and a\n"
	  "berthd restart) and prints its number: see 'sandbox ps', 'logs',\n"
	  "'kill', 'wait'. Its stdin is /dev/null (with --tty: a terminal,\n"
	  "see 'sandbox attach'), its output is kept in a\n"
	  "ring of --ring SIZE (default 1M, at most 16M), it has no timeout\n"
	  "unless given, and with --keep-awake it keeps the sandbox from\n"
	  "being paused for idleness while it runs." },
	{ "sandbox", "ps", NULL, "<id>", 1, 1, 0, c_sandbox_ps,
	  "The sandbox's detached processes, running and ended (the guest\n"
	  "agent keeps the last 256): PROC PID STATE OUTPUT KEEP-AWAKE COMMAND." },
	{ "sandbox", "logs", NULL, "<id> <proc> [--follow] [--offset N]", 2, 2,
	  O_FOLLOW | O_OFFSET, c_sandbox_logs,
	  "Print a detached process's output (what its ring holds, from byte\n"
	  "--offset N of all it wrote); --follow keeps printing what comes\n"
	  "until it ends." },
	{ "sandbox", "kill", NULL, "<id> <proc> [--signal S]", 2, 2, O_SIGNAL,
	  c_sandbox_kill,
	  "Send a detached process's process group a signal (default TERM; a\n"
	  "number or a name: TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP,\n"
	  "CONT)." },
	{ "sandbox", "wait", NULL, "<id> <proc>", 2, 2, 0, c_sandbox_wait,
	  "Wait for a detached process to end; print how it ended and exit\n"
	  "with its status (128+N for signal N)." },
	{ "sandbox", "attach", NULL, "<id> <proc> [--offset N]", 2, 2, O_OFFSET,
	  c_sandbox_attach,
	  "Attach to a detached process's terminal (exec --detach --tty): the\n"
	  "screen so far (its output ring, from --offset N), then its output\n"
	  "as it comes, and what you type goes to it. ^P ^Q (or the end of\n"
	  "stdin when it is not a terminal) detaches: the process runs on,\n"
	  "attach again any time; a dropped client detaches too. Several\n"
	  "clients may attach at once; the terminal's size is the newest's.\n"
	  "Exits 0 when detached, else with the process's status." },
	{ "sandbox", "cp", NULL, "SRC DST", 2, 2, 0, c_sandbox_cp,
	  "Copy a file into or out of a sandbox's guest: one side is\n"
	  "ID:/PATH, the other a local path ('-': stdin or stdout; a\n"
	  "directory: the same name in it). Streamed both ways; written to a\n"
	  "temporary file and renamed, with the local file's mode going in.\n"
	  "A paused or suspended sandbox is woken first (--json: wake_ms)." },
	{ "sandbox", "files", NULL, "<id> <dir> [--limit N]", 2, 2, O_LIMIT,
	  c_sandbox_files,
	  "List a directory of the sandbox's guest, by name: TYPE (file, dir,\n"
	  "link, fifo, socket, char, block, other; a link is not followed)\n"
	  "MODE SIZE MTIME NAME (a name's bytes that are not printable UTF-8\n"
	  "shown \\xNN). At most --limit N entries (default 10000, at most\n"
	  "100000); a listing cut there is said so on stderr. --json: the\n"
	  "API's document (a name that is not UTF-8 as name_base64)." },
	{ "sandbox", "mkdir", NULL, "<id> <path> [--parents|-p] [--mode M]", 2,
	  2, O_PARENTS | O_MODE, c_sandbox_mkdir,
	  "Make a directory in the sandbox's guest, of octal --mode M (default\n"
	  "0755). An existing path is an error, as is a missing parent;\n"
	  "--parents makes the missing parents and takes an existing\n"
	  "directory as done." },
	{ "sandbox", "rm", NULL, "<id> <path> [--recursive|-r]", 2, 2,
	  O_RECURSIVE, c_sandbox_rm_path,
	  "With a path: remove it in the sandbox's guest (a file, a symbolic\n"
	  "link, never what it points to, or an empty directory); --recursive\n"
	  "removes a directory with all under it. \"/\" is refused. (Without a\n"
	  "path, 'sandbox rm <id>' removes the sandbox itself.)" },
	{ "sandbox", "mv", NULL, "<id> <from> <to> [--overwrite]", 3, 3,
	  O_OVERWRITE, c_sandbox_mv,
	  "Rename or move a path in the sandbox's guest. An existing <to> is\n"
	  "an error unless --overwrite (then replaced as rename(2) does). <to>\n"
	  "is the new path itself, not a directory to move into." },
	{ "sandbox", "cat", NULL, "<id> <path> [--offset N] [--length N]", 2, 2,
	  O_OFFSET | O_LENGTH, c_sandbox_cat,
	  "Print a file of the sandbox's guest to stdout, byte for byte: all\n"
	  "of it, or from byte --offset N (past the end: nothing) at most\n"
	  "--length N bytes. Streamed, of any size. No --json (see 'cp' to a\n"
	  "file, or the MCP tool read_file)." },
	{ "sandbox", "watch", NULL, "<id> <dir> [--recursive|-r]", 2, 2,
	  O_RECURSIVE, c_sandbox_watch,
	  "Watch a directory of the sandbox's guest and print a line per\n"
	  "change as it happens: EVENT PATH, EVENT one of create, modify,\n"
	  "attrib, delete, move_from, move_to, a directory's path ending in\n"
	  "'/'. --recursive watches its subdirectories too (those made later\n"
	  "as well; 'unwatched PATH' when one could not be). 'overflow DIR\n"
	  "(events were lost)' says the guest's queue overflowed: look again.\n"
	  "Runs until the directory is removed ('delete_self DIR', exit 0),\n"
	  "interrupted, or the watch fails (exit 1, saying why). --json prints\n"
	  "each event as the API's JSON line, the first {\"event\":\"ready\"}\n"
	  "once the watch is in place." },
	{ "sandbox", "events", NULL, "<id>", 1, 1, 0, c_sandbox_events,
	  "Lifecycle events of a sandbox, oldest first:\n"
	  "SEQ TIME OPERATION RESULT DURATION REASON." },
	{ "port", "publish", NULL, "<id> <port> [--host-header preserve|upstream]"
	  " [--private|--public] [--host NAME]", 2, 2,
	  O_HOST_HEADER | O_PRIVATE | O_PUBLIC | O_HOST, c_port_publish,
	  "Publish a guest port and print its URL,\n"
	  "https://<port>-<id>.<domain>[:<https port>]/. Publishing again\n"
	  "changes only the options given. --host-header upstream rewrites Host\n"
	  "to localhost:<port> (for dev servers that check it); --private needs\n"
	  "the sandbox's token; --host NAME also routes a custom host name\n"
	  "(--host '' removes it)." },
	{ "port", "unpublish", NULL, "<id> <port>", 2, 2, 0, c_port_unpublish,
	  "Stop publishing a guest port." },
	{ "port", "ls", "list", "[<id>]", 0, 1, 0, c_port_ls,
	  "List published ports, of one sandbox or all:\n"
	  "SANDBOX PORT VISIBILITY HOST-HEADER URL." },
	{ "egress", "show", NULL, "<id>", 1, 1, 0, c_egress_show,
	  "Show a sandbox's egress mode and rules." },
	{ "egress", "allow", NULL, "<id> <rule>... [--ttl DURATION]", 2,
	  MAX_RULE_OPTS, O_TTL, c_egress_add,
	  "Allow destinations: example.com, *.example.com, 1.2.3.4,\n"
	  "10.1.0.0/16, each optionally with :443 or :8000-8100 and /tcp or\n"
	  "/udp. --ttl 10m makes the rules expire. Allow rules must stay inside\n"
	  "the global policy (exit 4 otherwise)." },
	{ "egress", "deny", NULL, "<id> <rule>... [--ttl DURATION]", 2,
	  MAX_RULE_OPTS, O_TTL, c_egress_add,
	  "Deny destinations (same rule syntax as allow)." },
	{ "egress", "rm", NULL, "<id> allow|deny <rule>", 3, 3, 0, c_egress_rm,
	  "Remove one rule." },
	{ "egress", "mode", NULL, "<id> open|allowlist|closed|default", 2, 2, 0,
	  c_egress_mode, "Set a sandbox's egress mode (default: follow the "
	  "global policy).\nIt cannot be wider than the policy's max_mode." },
	{ "egress", "reset", NULL, "<id>", 1, 1, 0, c_egress_reset,
	  "Remove every rule and return to the global policy's default mode." },
	{ "egress", "log", NULL, "<id> [--follow]", 1, 1, O_FOLLOW,
	  c_egress_log,
	  "Recent denied connections and names of a sandbox (the last 256),\n"
	  "one JSON object a line: time, destination, port, protocol and the\n"
	  "reason (not-allowed, deny-rule, always-deny, conn-limit, rate-limit,\n"
	  "dns, host, sandbox, spoof-ip...). --follow keeps printing new ones." },
	{ "policy", "show", NULL, "", 0, 0, 0, c_policy_show,
	  "Show the global egress policy." },
	{ "policy", "set", NULL, "[--default-mode M] [--max-mode M] "
	  "[--deny RULE]... [--allow RULE]... [--permit CIDR]... [--max-rules N] "
	  "[--conn-limit N|off] [--new-conn-rate N|off]", 0, 0,
	  O_DEFAULT_MODE | O_MAX_MODE | O_DENY | O_ALLOW | O_PERMIT | O_MAX_RULES |
	  O_CONN_LIMIT | O_NEW_CONN_RATE, c_policy_set,
	  "Change the global policy (admin only). Modes: closed < allowlist <\n"
	  "open; max_mode caps every sandbox. --deny rules are always denied\n"
	  "and no sandbox may allow them; a non-empty --allow list bounds\n"
	  "what sandboxes may allow. Giving --deny or --allow replaces that\n"
	  "list ('' empties it). --permit lists the private ranges (10/8,\n"
	  "172.16/12, 192.168/16, 100.64/10...) sandboxes may allow; others\n"
	  "are refused. --max-rules caps each sandbox's egress\n"
	  "rules; --conn-limit its concurrent connections and --new-conn-rate\n"
	  "its new connections per second (over: reset, and logged). 'default'\n"
	  "returns a limit to berth.conf's value." },
	{ "token", "create", NULL, "--admin | --sandbox <id> [--name TEXT]", 0,
	  0, O_ADMIN | O_SANDBOX | O_NAME, c_token_create,
	  "Create a token for the TCP control API and private URLs and print\n"
	  "it (only now). Admin tokens may do everything; a sandbox token\n"
	  "only that sandbox's ports, egress, pause/resume, events and exec." },
	{ "token", "ls", "list", "", 0, 0, 0, c_token_ls,
	  "List tokens (never their secrets): ID SCOPE NAME CREATED." },
	{ "token", "rotate", NULL, "<token-id>", 1, 1, 0, c_token_rotate,
	  "Give a token a new secret and print it; the old one stops working." },
	{ "token", "revoke", "rm", "<token-id>", 1, 1, 0, c_token_revoke,
	  "Revoke a token." },
	{ "template", "ls", "list", "", 0, 0, 0, c_template_ls,
	  "List guest templates sandboxes can boot from: NAME VERSION (the\n"
	  "current one, new sandboxes get it) SANDBOXES SIZE (on disk) SOURCE\n"
	  "(dockerfile or image with its sha256, debian, minimal, or dir)\n"
	  "CREATED DIR. 'default' is built in (berth.conf's template)." },
	{ "template", "add", NULL, "<name> <dir>", 2, 2, 0, c_template_add,
	  "Register a template directory (template.json as vmm/guest/mktemplate\n"
	  "writes it, with its kernel and initramfs) under a name for\n"
	  "'sandbox create --template'. berthd loads it first and says what is\n"
	  "wrong if it cannot." },
	{ "template", "build", NULL, "<name> [--dockerfile DIR [-f FILE] "
	  "[--build-arg K=V]... | --image FILE]", 1, 1,
	  O_DOCKERFILE | O_IMAGE | O_FILE | O_BUILD_ARG, c_template_build,
	  "Build a template into berthd's state dir and register it under its\n"
	  "name: 'debian' (Debian 12 with apt and Docker, from the host's apt\n"
	  "sources with mmdebstrap; minutes, cached) or 'minimal' (busybox,\n"
	  "seconds); or any other name from a Dockerfile (--dockerfile, the\n"
	  "build context's directory, sent as a tar; -f its Dockerfile,\n"
	  "--build-arg as docker build's) or an image (--image, a docker save\n"
	  "archive or an OCI layout tarball), built in a builder sandbox, never\n"
	  "on the host. Prints progress on stderr. Each build is a new version:\n"
	  "sandboxes made before keep theirs." },
	{ "template", "rm", "delete", "<name>", 1, 1, 0, c_template_rm,
	  "Forget a template name. Refused while a sandbox uses it. The files\n"
	  "of one berthd built (template build) go with it; a directory\n"
	  "registered with 'template add' stays." },
	{ "fleet", "hosts", NULL, "", 0, 0, 0, c_fleet_hosts,
	  "Fleet mode: the hosts registered in etcd and the ones whose lease\n"
	  "expired: HOST STATE EDGE FLEET SANDBOXES CAPACITY ZONE ROOM (more\n"
	  "sandboxes running and suspended by its VMs' measured costs, or what\n"
	  "fleet_capacity leaves). A drained host's STATE says so." },
	{ "fleet", "drain", NULL, "[<host>] [--stay] [--detach]", 0, 1,
	  O_STAY | O_DETACH, c_fleet_drain,
	  "Fleet mode: this host (the one whose API is asked; <host>, if\n"
	  "given, must name it) is placed on no more: creates through any\n"
	  "host go elsewhere, a create forwarded here is refused (507\n"
	  "drained) and goes to the next host. Kept across restarts. Its\n"
	  "VM sandboxes then move, one at a time, to the hosts placement\n"
	  "picks for their template (a running one suspended, moved and\n"
	  "resumed there), a line for each, until none is left; exit 1 if\n"
	  "one could not move (it stays, and is served, here). --stay: they\n"
	  "stay. --detach: return at once (drain again to follow)." },
	{ "fleet", "undrain", NULL, "[<host>]", 0, 1, 0, c_fleet_drain,
	  "Fleet mode: this host is placed on again; a drain's moves stop\n"
	  "after the one under way." },
	{ "status", NULL, NULL, "", 0, 0, 0, c_status,
	  "Check that berthd answers on its control socket (or --url), and\n"
	  "with VMs show what the host holds per state (sandboxes, their\n"
	  "memory, disk and CPU), its standby VMMs, what it has free, how\n"
	  "many more sandboxes of the default size it can take running,\n"
	  "paused and suspended, and the caps (vm_max_running,\n"
	  "vm_max_resident). The figures are sampled every 30 s and after a\n"
	  "state change; /metrics' berth_host_* show the same sample." },
	{ "mcp", NULL, NULL, "[--sandbox <id>]", 0, 0, O_SANDBOX, c_mcp,
	  "Serve the Model Context Protocol on stdin/stdout (JSON-RPC 2.0,\n"
	  "one message a line) so a coding agent can publish ports, manage\n"
	  "egress and pause or resume, acting with netctl's socket or --token.\n"
	  "--sandbox names the sandbox tools use when the agent names none." },
	{ "help", NULL, NULL, "[<command>]", 0, 2, 0, c_help,
	  "Show help for all commands or one." },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* The command's verb or its alias is word. */
static int
verb_is(const struct cmd *k, const char *word)
{
	return k->verb != NULL && (strcmp(k->verb, word) == 0 ||
	    (k->alias != NULL && strcmp(k->alias, word) == 0));
}

static void
usage_line(FILE *f, const struct cmd *c)
{
	fprintf(f, "%s %s%s%s%s%s\n", progname, c->noun, c->verb ? " " : "",
	    c->verb ? c->verb : "", c->args[0] ? " " : "", c->args);
}

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: %s [-s STATE_DIR | --url URL --token TOKEN] [--json] "
	    "<noun> <verb> [args]\n\n"
	    "commands:\n", progname);
	for (i = 0; i < NCMDS; i++) {
		fputs("  ", f);
		usage_line(f, &cmds[i]);
	}
	fprintf(f, "\noptions:\n"
	    "  -s, --state-dir DIR  berthd's state directory (default: "
	    "$BERTH_STATE_DIR,\n"
	    "                       else %s); the control socket is\n"
	    "                       DIR/control.sock\n"
	    "      --url URL        use berthd's TCP control API at URL "
	    "(https://HOST:PORT)\n"
	    "                       instead of the socket; also $BERTH_URL\n"
	    "      --token TOKEN    bearer token for --url; also $BERTH_TOKEN\n"
	    "      --cacert FILE    CA to verify --url with; also $BERTH_CACERT\n"
	    "      --json           print the API's JSON instead of tables\n"
	    "  -h, --help           this help; '%s help <command>' for one "
	    "command\n\n"
	    "exit status: 0 done, 1 berthd refused the request, 2 usage error, "
	    "3 berthd\ncannot be reached, 4 not authenticated or not allowed.\n", BERTH_STATE_DIR_DEFAULT, progname);
}

/* help --json: the commands as data. */
static json_t *
cmd_json(const struct cmd *k)
{
	char name[64];

	snprintf(name, sizeof(name), "%s%s%s", k->noun, k->verb ? " " : "",
	    k->verb ? k->verb : "");
	return json_pack("{s:s, s:s?, s:s, s:s}", "command", name, "alias",
	    k->alias, "args", k->args, "help", k->help);
}

static int
c_help(const struct cmd *c, struct opts *o, char **a, int n)
{
	json_t *list = o->json ? json_array() : NULL;
	size_t i;
	int found = 0;

	if (n == 0) {
		if (list == NULL) {
			usage(stdout);
			return EXIT_OK;
		}
		for (i = 0; i < NCMDS; i++)
			json_array_append_new(list, cmd_json(&cmds[i]));
		out_set(json_pack("{s:o}", "commands", list));
		return EXIT_OK;
	}
	for (i = 0; i < NCMDS; i++) {
		const struct cmd *k = &cmds[i];

		if (strcmp(k->noun, a[0]) != 0)
			continue;
		if (n == 2 && (k->verb == NULL || (strcmp(k->verb, a[1]) != 0 &&
		    (k->alias == NULL || strcmp(k->alias, a[1]) != 0))))
			continue;
		if (list != NULL) {
			json_array_append_new(list, cmd_json(k));
			found = 1;
			continue;
		}
		printf("%susage: ", found ? "\n" : "");
		usage_line(stdout, k);
		if (k->alias != NULL)
			printf("   (also: %s %s %s)\n", progname, k->noun, k->alias);
		printf("\n%s\n", k->help);
		found = 1;
	}
	if (!found) {
		json_decref(list);
		fail("no command '%s%s%s'; try '%s help'", a[0], n == 2 ? " " :
		    "", n == 2 ? a[1] : "", progname);
		return EXIT_USAGE;
	}
	if (list != NULL)
		out_set(json_pack("{s:o}", "commands", list));
	return EXIT_OK;
}

static int netctl_main(int, char **);

int
main(int argc, char **argv)
{
	return finish(netctl_main(argc, argv));
}

static int
netctl_main(int argc, char **argv)
{
	static struct option longopts[NOPTS + 1];
	char shortopts[2 * NOPTS + 2];
	struct opts o;
	const struct cmd *c = NULL;
	const char *env;
	char **args;
	size_t i;
	int ch, nargs, want_help = 0, used, twin = 0, rc;
	uint64_t bit;

	memset(&o, 0, sizeof(o));
	opt_getopt(shortopts, sizeof(shortopts), longopts);
	opterr = 0;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) !=
	    -1) {
		if (ch == ':') {
			fail("option %s needs a value", argv[optind - 1]);
			return EXIT_USAGE;
		}
		for (i = 0; i < NOPTS && opt_code(i) != ch; i++)
			;
		if (i == NOPTS) {
			if (optopt != 0)
				fail("unknown option -%c; try '%s help'", optopt,
				    progname);
			else
				fail("unknown option %s; try '%s help'",
				    argv[optind - 1], progname);
			return EXIT_USAGE;
		}
		if ((rc = opt_take(&opts_tab[i], optarg, &o, &want_help)) !=
		    EXIT_OK)
			return rc;
	}
	args = argv + optind;
	nargs = argc - optind;

	if (nargs == 0) {
		if (want_help)
			return c_help(NULL, &o, NULL, 0);
		usage(stderr);
		snprintf(last_fail, sizeof(last_fail), "no command given; try "
		    "'%s help'", progname);
		return EXIT_USAGE;
	}
	for (i = 0; i < NCMDS && c == NULL; i++) {
		const struct cmd *k2 = &cmds[i];

		if (strcmp(k2->noun, args[0]) != 0)
			continue;
		if (k2->verb == NULL)
			c = k2;
		else if (nargs >= 2 && verb_is(k2, args[1]))
			c = k2;
	}
	/* A verb of two forms told apart by the number of arguments
	 * (sandbox rm <id>, sandbox rm <id> <path>): the one they fit;
	 * options are then checked against that form alone. */
	for (i = 0; c != NULL && c->verb != NULL && i < NCMDS; i++) {
		const struct cmd *k2 = &cmds[i];

		if (k2 == c || strcmp(k2->noun, c->noun) != 0 ||
		    k2->verb == NULL || !verb_is(k2, args[1]))
			continue;
		twin = 1;
		if ((nargs - 2 < c->min || nargs - 2 > c->max) &&
		    nargs - 2 >= k2->min && nargs - 2 <= k2->max)
			c = k2;
	}
	if (c == NULL) {
		int noun_known = 0;

		for (i = 0; i < NCMDS; i++)
			if (strcmp(cmds[i].noun, args[0]) == 0)
				noun_known = 1;
		if (noun_known && nargs >= 2)
			fail("'%s' has no verb '%s'; try '%s help %s'", args[0],
			    args[1], progname, args[0]);
		else if (noun_known)
			fail("'%s' needs a verb; try '%s help %s'", args[0],
			    progname, args[0]);
		else
			fail("unknown command '%s'; try '%s help'", args[0],
			    progname);
		return EXIT_USAGE;
	}
	used = c->verb ? 2 : 1;
	args += used;
	nargs -= used;

	if (want_help) {
		char *h[2] = { (char *)c->noun, (char *)c->verb };

		return c_help(c, &o, h, c->verb ? 2 : 1);
	}
	if (nargs < c->min || nargs > c->max) {
		fail("%s arguments; usage:", nargs < c->min ? "missing" :
		    "too many");
		fputs("  ", stderr);
		usage_line(stderr, c);
		for (i = 0; twin && i < NCMDS; i++)
			if (&cmds[i] != c && strcmp(cmds[i].noun, c->noun) ==
			    0 && verb_is(&cmds[i], c->verb)) {
				fputs("  ", stderr);
				usage_line(stderr, &cmds[i]);
			}
		/* --json's message carries the usage too */
		snprintf(last_fail + strlen(last_fail), sizeof(last_fail) -
		    strlen(last_fail), " %s %s%s%s%s%s", progname, c->noun,
		    c->verb ? " " : "", c->verb ? c->verb : "", c->args[0] ?
		    " " : "", c->args);
		return EXIT_USAGE;
	}
	for (bit = 1; bit <= O_LAST; bit <<= 1)
		if ((o.given & bit) && !(c->opts & bit)) {
			fail("option --%s does not apply to '%s%s%s%s%s'",
			    opt_name(bit), c->noun, c->verb ? " " : "",
			    c->verb ? c->verb : "", twin ? " " : "",
			    twin ? c->args : "");
			return EXIT_USAGE;
		}

	if (o.state_dir == NULL && (env = getenv("BERTH_STATE_DIR")) != NULL &&
	    env[0] != '\0')
		o.state_dir = env;
	if (o.state_dir == NULL)
		o.state_dir = BERTH_STATE_DIR_DEFAULT;
	if ((size_t)snprintf(sock_path, sizeof(sock_path), "%s/control.sock",
	    o.state_dir) >= sizeof(sock_path)) {
		fail("state directory path too long");
		return EXIT_USAGE;
	}
	tgt.sock_path = sock_path;
	if (tgt.url == NULL && (env = getenv("BERTH_URL")) != NULL &&
	    env[0] != '\0')
		tgt.url = env;
	if (tgt.token == NULL && (env = getenv("BERTH_TOKEN")) != NULL &&
	    env[0] != '\0')
		tgt.token = env;
	if (tgt.cacert == NULL && (env = getenv("BERTH_CACERT")) != NULL &&
	    env[0] != '\0')
		tgt.cacert = env;
	if (tgt.url != NULL && (tgt.token == NULL || tgt.token[0] == '\0') &&
	    strcmp(c->noun, "help") != 0) {
		fail("--url needs a token: --token or $BERTH_TOKEN");
		return EXIT_USAGE;
	}
	return c->fn(c, &o, args, nargs);
}
