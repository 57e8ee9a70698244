/*
 * sandbox_fields.h — a sandbox's fields, each said once: one row per
 * field, as X(member, column, API name, kind, flags, arg, CLI flag, help).
 * berthd's store, API and field table (proxy/sandbox/sbfield.h) and
 * netctl's flags for them are made from it. arg: the index into
 * berth.conf's vm_* limits for a PF_COUNT, the PX_IDLE_* bit for a
 * PF_IDLE. Depends on nothing.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_SANDBOX_FIELDS_H
#define BERTH_SANDBOX_FIELDS_H

enum px_sbkind {
	PF_ID,		/* text, always set: the sandbox's id */
	PF_ADDR,	/* text, "" stored as NULL: an IP literal */
	PF_BOOL,	/* int 0/1 */
	PF_STATE,	/* text, always set: one of PX_STATE_* */
	PF_CREATED,	/* int64 unix seconds; 0 on insert: now */
	PF_MODE,	/* text or "": an egress mode */
	PF_COUNT,	/* unsigned; 0 stored as NULL (not recorded) */
	PF_TEMPLATE,	/* text; "" and "default" stored as NULL */
	PF_IDLE,	/* int64 ms; 0 stored as NULL (berth.conf's),
			 * PX_IDLE_NEVER (-1) never */
	PF_ENV		/* JSON object of NAME: "value" strings, as text;
			 * "" stored as NULL (none) */
};

#define PF_CREATE	0x1	/* POST /v1/sandboxes takes it */
#define PF_PATCH	0x2	/* PATCH /v1/sandboxes/ID changes it */
#define PF_VM		0x4	/* only a microVM sandbox has it */

#define PX_SANDBOX_FIELDS(X) \
	X(id, "id", "id", PF_ID, PF_CREATE, 0, NULL, \
	    "the sandbox's name: [a-z0-9][a-z0-9-]{0,39}") \
	X(address, "address", "address", PF_ADDR, PF_CREATE, 0, "--address", \
	    "an external sandbox's IP (no microVM)") \
	X(external, "external", "external", PF_BOOL, 0, 0, NULL, \
	    "managed outside berth") \
	X(state, "state", "state", PF_STATE, 0, 0, NULL, \
	    "creating, running, paused, suspended, stopped or failed") \
	X(created, "created", "created", PF_CREATED, 0, 0, NULL, \
	    "when it was made, unix seconds") \
	X(egress_mode, "egress_mode", "egress_mode", PF_MODE, PF_CREATE, 0, \
	    NULL, "open, allowlist or closed; none: the policy's (netctl: " \
	    "egress mode)") \
	X(mem_mib, "mem_mib", "memory_mib", PF_COUNT, PF_CREATE | PF_VM, 0, \
	    "--memory", "guest memory, MiB") \
	X(vcpus, "vcpus", "vcpus", PF_COUNT, PF_CREATE | PF_VM, 1, "--vcpus", \
	    "guest CPUs") \
	X(disk_mib, "disk_mib", "disk_mib", PF_COUNT, PF_CREATE | PF_VM, 2, \
	    "--disk", "root disk, MiB") \
	X(template_name, "template", "template", PF_TEMPLATE, \
	    PF_CREATE | PF_VM, 0, "--template", "what it is made from") \
	X(idle_pause_ms, "idle_pause_ms", "idle_pause", PF_IDLE, \
	    PF_CREATE | PF_PATCH | PF_VM, 0x1, "--idle-pause", \
	    "idle time before its VM is paused") \
	X(idle_suspend_ms, "idle_suspend_ms", "idle_suspend", PF_IDLE, \
	    PF_CREATE | PF_PATCH | PF_VM, 0x2, "--idle-suspend", \
	    "idle time before its VM is snapshotted to disk") \
	X(max_lifetime_ms, "max_lifetime_ms", "max_lifetime", PF_IDLE, \
	    PF_CREATE | PF_PATCH | PF_VM, 0x4, "--max-lifetime", \
	    "time after which its VM is suspended, idle or not") \
	X(env, "env", "env", PF_ENV, PF_CREATE | PF_PATCH | PF_VM, 0, "--env", \
	    "environment every command in it starts with (a command's own " \
	    "env wins)")

#endif
