/*
 * test_vmm_cap.c — libvmm's capacity arithmetic, which needs neither root
 * nor a VM: which sandbox a cap suspends (the least recently active idle
 * one: never a busy, held or hidden one), which suspended sandboxes hold
 * the standby VMMs within a count and a memory budget (the most recently
 * active first; an unknown cost learnt one at a time), which cap a
 * sandbox counts against while an operation is under way, whether one
 * more waits for the suspends under way or makes another go (those
 * admitted and waiting counted, room going to them in order), and how many
 * more sandboxes the host can take (memory, CPU, disk, caps, addresses).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "vmm.h"
#include "backend.h"

#define MiB (1ULL << 20)

static void
test_evict(void)
{
	struct vmm_evict_cand c[6];

	memset(c, 0, sizeof(c));
	/* s0 busy, s1 held, s2 hidden: all less recent than s3..s5 */
	c[0] = (struct vmm_evict_cand){ 10, VMM_RUNNING, 1, 0, 0, 0 };
	c[1] = (struct vmm_evict_cand){ 20, VMM_RUNNING, 0, 1, 0, 0 };
	c[2] = (struct vmm_evict_cand){ 30, VMM_RUNNING, 0, 0, 1, 0 };
	c[3] = (struct vmm_evict_cand){ 300, VMM_RUNNING, 0, 0, 0, 0 };
	c[4] = (struct vmm_evict_cand){ 100, VMM_PAUSED, 0, 0, 0, 0 };
	c[5] = (struct vmm_evict_cand){ 200, VMM_RUNNING, 0, 0, 0, 0 };
	is_int(vmm_evict_pick(c, 6, 0), 5, "running cap: the least recently "
	    "active idle running one (busy, held, hidden passed over)");
	is_int(vmm_evict_pick(c, 6, 1), 4, "resident cap: a paused one counts "
	    "too, and is older");
	c[5].skip = 1;
	is_int(vmm_evict_pick(c, 6, 0), 3, "the one chosen (or making room) "
	    "is skipped: the next");
	c[3].skip = 1;
	is_int(vmm_evict_pick(c, 6, 0), -1, "none idle: -1 (the operation is "
	    "refused)");
	is_int(vmm_evict_pick(c, 6, 1), 4, "... but for resident the paused "
	    "one still is");
	c[4].state = VMM_SUSPENDED;
	is_int(vmm_evict_pick(c, 6, 1), -1, "a suspended one is never picked");
	is_int(vmm_evict_pick(c, 0, 1), -1, "no candidates: -1");
}

static int
wants(const struct vmm_standby_cand *c, size_t n, char *buf)
{
	size_t i;

	for (i = 0; i < n; i++)
		buf[i] = c[i].want ? '1' : '0';
	buf[n] = '\0';
	return 0;
}

static void
test_standby(void)
{
	struct vmm_standby_cand c[5];
	char w[8];

	/* count only: the most recently active first */
	memset(c, 0, sizeof(c));
	c[0].last_activity_ms = 100;
	c[1].last_activity_ms = 500;
	c[2].last_activity_ms = 300;
	c[3].last_activity_ms = 400;
	c[4].last_activity_ms = 200;
	vmm_standby_plan(c, 5, 2, 0, 0);
	wants(c, 5, w);
	is_str(w, "01010", "count 2, no memory limit: the two most recently "
	    "active");
	vmm_standby_plan(c, 5, 0, 0, 0);
	wants(c, 5, w);
	is_str(w, "00000", "count 0: none");

	/* a budget of 100 MiB, each measured at 40: two fit */
	memset(c, 0, sizeof(c));
	c[0] = (struct vmm_standby_cand){ 100, 40 * MiB, 1, 0, 0 };
	c[1] = (struct vmm_standby_cand){ 500, 40 * MiB, 1, 0, 0 };
	c[2] = (struct vmm_standby_cand){ 300, 0, 0, 0, 0 };
	vmm_standby_plan(c, 3, 8, 100 * MiB, 40 * MiB);
	wants(c, 3, w);
	is_str(w, "011", "budget full: the newer suspended one takes the "
	    "least recently active holder's place");

	/* a small older holder still fits where a big newer one does not */
	c[0] = (struct vmm_standby_cand){ 100, 10 * MiB, 1, 0, 0 };
	c[1] = (struct vmm_standby_cand){ 500, 70 * MiB, 1, 0, 0 };
	c[2] = (struct vmm_standby_cand){ 300, 50 * MiB, 1, 0, 0 };
	vmm_standby_plan(c, 3, 8, 100 * MiB, 40 * MiB);
	wants(c, 3, w);
	is_str(w, "110", "first fit in order of activity: 70 + 10 MiB, not the "
	    "50 MiB one");

	/* one bigger than the budget alone is never kept */
	c[0] = (struct vmm_standby_cand){ 100, 120 * MiB, 1, 0, 0 };
	vmm_standby_plan(c, 1, 8, 100 * MiB, 40 * MiB);
	is_int(c[0].want, 0, "a standby over the budget by itself goes");

	/* unknown cost: one at a time until one is measured */
	memset(c, 0, sizeof(c));
	c[0].last_activity_ms = 100;
	c[1].last_activity_ms = 200;
	c[2].last_activity_ms = 300;
	vmm_standby_plan(c, 3, 8, 100 * MiB, 0);
	wants(c, 3, w);
	is_str(w, "001", "nothing measured yet: only the most recent one, to "
	    "learn the cost");
	c[2].holds = 1;		/* started, loading: still unknown */
	vmm_standby_plan(c, 3, 8, 100 * MiB, 0);
	wants(c, 3, w);
	is_str(w, "001", "... and no other while it loads");
	vmm_standby_plan(c, 3, 8, 0, 0);
	wants(c, 3, w);
	is_str(w, "111", "no memory limit: the cost does not matter");

	/* a busy holder (a restore promoting it) stays and counts */
	memset(c, 0, sizeof(c));
	c[0] = (struct vmm_standby_cand){ 100, 60 * MiB, 1, 1, 0 };
	c[1] = (struct vmm_standby_cand){ 500, 60 * MiB, 1, 0, 0 };
	vmm_standby_plan(c, 2, 8, 100 * MiB, 60 * MiB);
	wants(c, 2, w);
	is_str(w, "10", "a busy holder is kept and fills the budget first");
	vmm_standby_plan(c, 2, 1, 0, 60 * MiB);
	wants(c, 2, w);
	is_str(w, "10", "... and the count");
}

static void
test_class(void)
{
	struct vmm_sandbox *sb = calloc(1, sizeof(*sb));

	sb->state = VMM_RUNNING;
	is_int(vmm_cap_class(sb), VMM_CAPC_RUNNING, "running: counts as "
	    "running");
	sb->state = VMM_PAUSED;
	is_int(vmm_cap_class(sb), VMM_CAPC_PAUSED, "paused: resident");
	sb->busy = 1;
	sb->op = VMM_OP_RESUME;
	is_int(vmm_cap_class(sb), VMM_CAPC_RUNNING, "a wake under way counts "
	    "as running");
	sb->state = VMM_RUNNING;
	sb->op = VMM_OP_SUSPEND;
	is_int(vmm_cap_class(sb), VMM_CAPC_NONE, "a suspend under way no "
	    "longer counts");
	sb->op = VMM_OP_PAUSE;
	is_int(vmm_cap_class(sb), VMM_CAPC_PAUSED, "a pause under way: "
	    "resident, not running");
	sb->op = VMM_OP_CHECKPOINT;
	is_int(vmm_cap_class(sb), VMM_CAPC_RUNNING, "a checkpoint: as it is");
	sb->busy = 0;
	sb->state = VMM_SUSPENDED;
	is_int(vmm_cap_class(sb), VMM_CAPC_NONE, "suspended: not counted");
	sb->state = VMM_CREATING;
	sb->busy = 1;
	sb->op = VMM_OP_CREATE;
	is_int(vmm_cap_class(sb), VMM_CAPC_RUNNING, "a create: running");
	sb->room_pending = 1;
	is_int(vmm_cap_class(sb), VMM_CAPC_NONE, "a create admitted, its VMM "
	    "not started (its disk, or waiting for room): holds no slot (it "
	    "counts as pending)");
	sb->state = VMM_PAUSED;
	sb->op = VMM_OP_RESUME;
	sb->pid = 123;
	is_int(vmm_cap_class(sb), VMM_CAPC_PAUSED, "a paused one's wake "
	    "waiting for room: resident, its VMM paused");
	sb->room_pending = 0;
	is_int(vmm_cap_class(sb), VMM_CAPC_RUNNING, "... past its gate: "
	    "running");
	sb->hidden = 1;
	is_int(vmm_cap_class(sb), VMM_CAPC_NONE, "hidden (a pool member, a "
	    "build): never counted");
	free(sb);
}

static void
test_estimate(void)
{
	struct vmm_cap_input in;
	unsigned more[VMM_MORE_KINDS];
	const char *by[VMM_MORE_KINDS];
	int nom;

	memset(&in, 0, sizeof(in));
	in.mem_free = 1000 * MiB;
	in.disk_free = 10000 * MiB;
	in.cpu_idle = 1.5;
	in.cost_mem[0] = 200 * MiB;
	in.cost_mem[1] = 100 * MiB;
	in.cost_disk = 300 * MiB;
	in.cost_cpu = 0.1;
	in.addresses_free = 1000;
	vmm_cap_estimate(&in, more, by);
	is_int(more[VMM_MORE_RUNNING], 5, "running: 1000 MiB free / 200 MiB");
	is_str(by[VMM_MORE_RUNNING], "memory", "... bound by memory");
	is_int(more[VMM_MORE_PAUSED], 10, "paused: 1000 / 100 MiB");
	is_int(more[VMM_MORE_SUSPENDED], 33, "suspended: 10000 / 300 MiB of "
	    "disk");
	is_str(by[VMM_MORE_SUSPENDED], "disk", "... bound by disk");

	in.cost_cpu = 0.5;
	vmm_cap_estimate(&in, more, by);
	is_int(more[VMM_MORE_RUNNING], 3, "running: 1.5 idle cores / 0.5");
	is_str(by[VMM_MORE_RUNNING], "cpu", "... bound by CPU");

	in.max_running = 4;
	in.running = 3;
	vmm_cap_estimate(&in, more, by);
	is_int(more[VMM_MORE_RUNNING], 1, "vm_max_running 4 with 3 running: 1");
	is_str(by[VMM_MORE_RUNNING], "vm_max_running", "... bound by the cap");
	is_int(more[VMM_MORE_PAUSED], 10, "... paused are not bound by it");

	in.max_resident = 5;
	in.resident = 5;
	vmm_cap_estimate(&in, more, by);
	is_int(more[VMM_MORE_RUNNING], 0, "vm_max_resident reached: no more "
	    "running");
	is_int(more[VMM_MORE_PAUSED], 0, "... nor paused");
	is_str(by[VMM_MORE_PAUSED], "vm_max_resident", "... bound by it");
	is_int(more[VMM_MORE_SUSPENDED], 33, "... suspended ones still fit");
	in.cpu_idle = 0;
	vmm_cap_estimate(&in, more, by);
	is_str(by[VMM_MORE_RUNNING], "vm_max_resident", "no idle CPU either: "
	    "the cap names the bound (it holds whatever the load)");
	in.cpu_idle = 1.5;

	in.max_resident = in.max_running = 0;
	in.addresses_free = 2;
	vmm_cap_estimate(&in, more, by);
	is_int(more[VMM_MORE_SUSPENDED], 2, "two addresses left: two more");
	is_str(by[VMM_MORE_SUSPENDED], "addresses", "... bound by the pool");

	in.addresses_free = 1000;
	in.mem_free = 0;
	in.cpu_idle = 0;
	vmm_cap_estimate(&in, more, by);
	is_int(more[VMM_MORE_RUNNING], 0, "no memory free: none");

	is_int((long long)vmm_cap_mean(300, 3, 7, &nom), 100, "mean of three");
	is_int(nom, 0, "... measured");
	is_int((long long)vmm_cap_mean(0, 0, 256 * MiB, &nom), 256 * MiB,
	    "none to measure: the nominal size");
	is_int(nom, 1, "... said nominal");
}

/* one more running sandbox under the caps: room, wait for those going,
 * or make one more go */
static void
test_decide(void)
{
	struct vmm_cap_count n;
	int rcap = -1;

	memset(&n, 0, sizeof(n));
	n.running = n.resident = 9;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_ROOM,
	    "9 of vm_max_resident 10: room");
	is_int(vmm_cap_decide(&n, 0, 0, &rcap), VMM_CAP_ROOM, "no caps: room");
	n.running = n.resident = 10;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_EVICT,
	    "10 of 10: one must go");
	is_int(rcap, 1, "... for vm_max_resident");
	n.going_running = n.going_resident = 1;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_WAIT,
	    "10 of 10, one of them suspending: wait for it (it still holds "
	    "its memory)");
	n.pending_running = n.pending_resident = 1;	/* another waits */
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_EVICT,
	    "... a second one waiting (admitted, no VMM yet): another must go");
	n.going_running = n.going_resident = 2;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_WAIT,
	    "... two going for two: both wait");
	/* one of the two suspends ended: its room goes to the first
	 * admitted, the other waits for its own */
	n.running = n.resident = 9;
	n.going_running = n.going_resident = 1;
	n.ahead_running = n.ahead_resident = 0;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_ROOM,
	    "one suspend ended: the first admitted runs (the other one "
	    "waiting is after it)");
	n.ahead_running = n.ahead_resident = 1;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_WAIT,
	    "... the second waits: the room is the first's");
	n.running = n.resident = 10;	/* the first runs now */
	n.pending_running = n.pending_resident = 0;
	n.ahead_running = n.ahead_resident = 0;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_WAIT,
	    "... and waits on for its own suspend");
	/* the reservation: pending ones count though they hold nothing */
	memset(&n, 0, sizeof(n));
	n.running = n.resident = 8;
	n.pending_running = n.pending_resident = 2;
	n.ahead_running = n.ahead_resident = 2;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_EVICT,
	    "8 VMMs and 2 admitted creates (no VMM yet) of 10: a third must "
	    "make room");
	n.pending_running = n.pending_resident = 1;
	n.ahead_running = n.ahead_resident = 1;
	is_int(vmm_cap_decide(&n, 0, 10, &rcap), VMM_CAP_ROOM,
	    "8 and 1 admitted: room for one more");
	/* a paused one waking is resident already: only running waits */
	memset(&n, 0, sizeof(n));
	n.running = 3;
	n.resident = 5;
	n.pending_running = 1;
	is_int(vmm_cap_decide(&n, 4, 6, &rcap), VMM_CAP_EVICT,
	    "vm_max_running 4: 3 running and a paused one waking: one goes");
	is_int(rcap, 0, "... for vm_max_running");
	memset(&n, 0, sizeof(n));
	n.running = 4;
	n.resident = 6;
	is_int(vmm_cap_decide(&n, 4, 10, &rcap), VMM_CAP_EVICT,
	    "vm_max_running 4 reached, resident room: a running one goes");
	is_int(rcap, 0, "... for vm_max_running");
	n.going_running = 1;
	n.going_resident = 1;
	is_int(vmm_cap_decide(&n, 4, 7, &rcap), VMM_CAP_WAIT,
	    "a running one going makes room under both caps: wait");
	n.resident = 8;
	is_int(vmm_cap_decide(&n, 4, 7, &rcap), VMM_CAP_EVICT,
	    "resident over by two with one going: another goes");
	is_int(rcap, 1, "... for vm_max_resident");
	n.going_resident = 2;
	is_int(vmm_cap_decide(&n, 4, 7, &rcap), VMM_CAP_WAIT,
	    "a paused one going too: wait");
}

static void
test_pss(void)
{
	uint64_t pss = vmm_proc_pss(getpid());

	ok(pss > 0 && pss < (1ULL << 40), "this process's PSS is read (%llu "
	    "bytes)", (unsigned long long)pss);
	is_int((long long)vmm_proc_pss(0), 0, "no process: 0");
	is_str(vmm_cap_kind_name(VMM_CAP_SUSPENDED), "suspended", "kind names");
}

int
main(void)
{
	test_evict();
	test_standby();
	test_class();
	test_estimate();
	test_decide();
	test_pss();
	return done_testing();
}
