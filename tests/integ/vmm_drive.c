/*
 * vmm_drive — runs a libvmm manager on an event loop and takes commands
 * on stdin, one per line, each starting with a tag the answer repeats:
 *
 *   TAG create ID TEMPLATE_DIR [MEM_MIB]
 *   TAG start|pause|resume|suspend|stop|delete ID
 *   TAG info ID
 *   TAG idle ID PAUSE_MS SUSPEND_MS       (0: default, -1: never)
 *   TAG activity ID
 *   TAG adopt
 *   TAG quit
 *
 * Answers on stdout: "TAG ok OP ID state=S ms=N" or "TAG fail OP ID
 * state=S ms=N reason=..." when an operation completes, "TAG error ..."
 * when it is refused at once, "TAG info ID state=S ip=A gw=G tap=T pid=P
 * mac=M disk=D reason=R". Events as "event ID op=O ok=B state=S ms=N
 * cause=C reason=R". Line-buffered, so a shell test can wait for lines.
 * Usage: vmm_drive STATE_DIR [BACKEND]; VMM_RUN_AS=USER runs the VMMs as
 * that user, VMM_ACCEL=auto lets the KVM probe decide (default: TCG),
 * VMM_STANDBY=N gives up to N suspended sandboxes a standby VMM (default
 * none).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "nc_link.h"
#include "vmm.h"

static struct vmm *mgr;
static struct event_base *base;
static struct vmm_template tpl;
static int have_tpl;

static void
on_event(struct vmm_sandbox *sb, const struct vmm_event *ev, void *arg)
{
	(void)sb;
	(void)arg;
	printf("event %s op=%s ok=%d state=%s ms=%llu cause=%s reason=%s\n",
	    ev->id, vmm_op_name(ev->op), ev->ok, vmm_state_name(ev->state),
	    (unsigned long long)ev->duration_ms, ev->cause, ev->reason);
}

static void
on_done(struct vmm_sandbox *sb, enum vmm_op op, int ok, const char *reason,
    uint64_t ms, void *arg)
{
	char *tag = arg;

	printf("%s %s %s %s state=%s ms=%llu%s%s\n", tag, ok ? "ok" : "fail",
	    vmm_op_name(op), vmm_sandbox_id(sb),
	    op == VMM_OP_DELETE ? "deleted" :
	    vmm_state_name(vmm_sandbox_state(sb)), (unsigned long long)ms,
	    ok ? "" : " reason=", ok ? "" : reason);
	free(tag);
}

static void
info(const char *tag, struct vmm_sandbox *sb)
{
	struct vmm_info i;
	char ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], mac[18];

	vmm_sandbox_info(sb, &i);
	inet_ntop(AF_INET, &i.guest_ip, ip, sizeof(ip));
	inet_ntop(AF_INET, &i.gateway, gw, sizeof(gw));
	printf("%s info %s state=%s ip=%s gw=%s tap=%s pid=%d standby=%d "
	    "standby_ready=%d mac=%s disk=%s dir=%s busy=%d reason=%s\n", tag,
	    i.id, vmm_state_name(i.state), ip, gw, i.tap, (int)i.pid,
	    (int)i.standby_pid, i.standby_ready, nc_link_mac_format(i.mac, mac,
	    sizeof(mac)), i.disk, i.dir, i.busy, i.reason);
}

static uint64_t
ms_arg(const char *s)
{
	long long v = strtoll(s, NULL, 10);

	return v < 0 ? VMM_NEVER : (uint64_t)v;
}

static void
command(char *line)
{
	char *argv[8], err[VMM_ERRLEN], *tag;
	struct vmm_sandbox *sb = NULL;
	int argc = 0, rc = 0;

	for (char *p = strtok(line, " \t"); p != NULL && argc < 8;
	    p = strtok(NULL, " \t"))
		argv[argc++] = p;
	if (argc < 2)
		return;
	tag = argv[0];
	if (strcmp(argv[1], "quit") == 0) {
		printf("%s ok quit\n", tag);
		event_base_loopbreak(base);
		return;
	}
	if (strcmp(argv[1], "adopt") == 0) {
		rc = vmm_adopt_all(mgr, err, sizeof(err));
		printf("%s adopted %d%s%s\n", tag, rc, rc < 0 ? " " : "",
		    rc < 0 ? err : "");
		return;
	}
	if (argc < 3) {
		printf("%s error missing id\n", tag);
		return;
	}
	if (strcmp(argv[1], "create") == 0) {
		struct vmm_sandbox_spec spec;

		if (argc < 4) {
			printf("%s error usage: create ID TEMPLATE_DIR [MEM]\n", tag);
			return;
		}
		if (!have_tpl) {
			if (vmm_template_load(argv[3], &tpl, err, sizeof(err)) < 0) {
				printf("%s error %s\n", tag, err);
				return;
			}
			have_tpl = 1;
		}
		memset(&spec, 0, sizeof(spec));
		spec.id = argv[2];
		spec.tpl = &tpl;
		spec.mem_mib = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
		rc = vmm_sandbox_create(mgr, &spec, on_done, strdup(tag), &sb,
		    err, sizeof(err));
		if (rc < 0)
			printf("%s error create %s: %s\n", tag, argv[2], err);
		return;
	}
	if ((sb = vmm_sandbox_find(mgr, argv[2])) == NULL) {
		printf("%s error no sandbox %s\n", tag, argv[2]);
		return;
	}
	if (strcmp(argv[1], "info") == 0) {
		info(tag, sb);
		return;
	}
	if (strcmp(argv[1], "activity") == 0) {
		vmm_activity(sb);
		printf("%s ok activity\n", tag);
		return;
	}
	if (strcmp(argv[1], "idle") == 0 && argc >= 5) {
		vmm_sandbox_set_idle(sb, ms_arg(argv[3]), ms_arg(argv[4]), 0);
		printf("%s ok idle\n", tag);
		return;
	}
	tag = strdup(tag);
	if (strcmp(argv[1], "start") == 0)
		rc = vmm_sandbox_start(sb, on_done, tag, err, sizeof(err));
	else if (strcmp(argv[1], "pause") == 0)
		rc = vmm_sandbox_pause(sb, on_done, tag, err, sizeof(err));
	else if (strcmp(argv[1], "resume") == 0)
		rc = vmm_sandbox_resume(sb, on_done, tag, err, sizeof(err));
	else if (strcmp(argv[1], "suspend") == 0)
		rc = vmm_sandbox_suspend(sb, on_done, tag, err, sizeof(err));
	else if (strcmp(argv[1], "stop") == 0)
		rc = vmm_sandbox_stop(sb, on_done, tag, err, sizeof(err));
	else if (strcmp(argv[1], "delete") == 0)
		rc = vmm_sandbox_delete(sb, on_done, tag, err, sizeof(err));
	else {
		snprintf(err, sizeof(err), "unknown command %s", argv[1]);
		rc = -EINVAL;
	}
	if (rc < 0) {
		printf("%s error %s %s: %s\n", tag, argv[1], argv[2], err);
		free(tag);
	}
}

static void
on_stdin(struct bufferevent *bev, void *arg)
{
	char *line;

	(void)arg;
	while ((line = evbuffer_readln(bufferevent_get_input(bev), NULL,
	    EVBUFFER_EOL_ANY)) != NULL) {
		command(line);
		free(line);
	}
}

static void
on_stdin_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		event_base_loopbreak(base);
}

int
main(int argc, char **argv)
{
	struct vmm_config cfg;
	struct bufferevent *in;
	char err[VMM_ERRLEN];
	const char *why;

	if (argc < 2) {
		fprintf(stderr, "usage: vmm_drive STATE_DIR [BACKEND]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	base = event_base_new();
	memset(&cfg, 0, sizeof(cfg));
	cfg.state_dir = argv[1];
	cfg.backend = argc > 2 ? argv[2] : NULL;
	cfg.accel = getenv("VMM_ACCEL") != NULL &&
	    strcmp(getenv("VMM_ACCEL"), "auto") == 0 ? VMM_ACCEL_AUTO :
	    VMM_ACCEL_TCG;
	cfg.disk_mib = 64;
	cfg.idle_pause_ms = VMM_NEVER;
	cfg.idle_suspend_ms = VMM_NEVER;
	cfg.on_event = on_event;
	if (getenv("VMM_STANDBY") != NULL)
		cfg.standby_max = (unsigned)atoi(getenv("VMM_STANDBY"));
	if (getenv("VMM_RUN_AS") != NULL) {
		struct passwd *pw = getpwnam(getenv("VMM_RUN_AS"));

		if (pw == NULL) {
			fprintf(stderr, "vmm_drive: no user %s\n",
			    getenv("VMM_RUN_AS"));
			return 1;
		}
		cfg.vmm_uid = pw->pw_uid;
		cfg.vmm_gid = pw->pw_gid;
	}
	/* VMM_JAIL=1: each VMM jailed (own uid from 2100000000 + its pool
	 * block, snapshots through descriptors), as berthd runs them */
	if (getenv("VMM_JAIL") != NULL && strcmp(getenv("VMM_JAIL"), "1") == 0) {
		cfg.jail = 1;
		cfg.uid_base = 2100000000;
		cfg.uid_count = 65536;
		cfg.cgroups = 1;
	}
	mgr = vmm_new(base, &cfg, err, sizeof(err));
	if (mgr == NULL) {
		fprintf(stderr, "vmm_drive: %s\n", err);
		return 1;
	}
	vmm_accel(mgr, &why);
	printf("ready backend=%s accel=%s (%s) vmm_uid=%u jail=%d\n",
	    vmm_backend_name(mgr), vmm_accel(mgr, NULL) == VMM_ACCEL_KVM ?
	    "kvm" : "tcg", why, (unsigned)cfg.vmm_uid, cfg.jail);
	in = bufferevent_socket_new(base, 0, 0);
	bufferevent_setcb(in, on_stdin, NULL, on_stdin_event, NULL);
	bufferevent_enable(in, EV_READ);
	event_base_dispatch(base);
	bufferevent_free(in);
	/* VMs keep running: the manager's restart safety is under test. */
	vmm_free(mgr);
	if (have_tpl)
		vmm_template_free(&tpl);
	event_base_free(base);
	return 0;
}
