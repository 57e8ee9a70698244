#!/bin/sh
# vm-restart.sh — kill -9 of berthd while two microVM sandboxes run, one
# of them suspended with its standby qemu waiting: the VM goes on; a new
# berthd on the same state dir re-adopts it (no second qemu), replaces the
# orphaned standby with its own, both URLs answer from the same guest
# processes (the suspended one woken), and deleting them leaves no qemu
# and no tap. Two VM boots (qemu, TCG), in parallel.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "tap_prefix bvr" "vm_pool 10.218.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd
netctl sandbox create vr1 >"$T/c1.out" 2>&1 &
c1=$!
netctl sandbox create vr2 >"$T/c2.out" 2>&1 &
c2=$!
wait $c1 && wait $c2 || bail "sandbox create: $(cat "$T/c1.out" "$T/c2.out")"
for s in vr1 vr2; do
	netctl port publish $s 8080 >/dev/null || bail "publish $s"
	wait_routed $s 8080
done
info() { bcurl "https://8080-$1.$DOMAIN:$HTTPS_PORT/info" | json_get "$(cat)" 'j["pid"], j["boot_id"]'; }
i1=$(info vr1); i2=$(info vr2)
like "vr1 answers" "$i1" '^\([0-9]+'
like "vr2 answers" "$i2" '^\([0-9]+'
qemus() { pgrep -c -f 'name berth-vr[12] ' || true; }
is "two qemu processes" "$(qemus)" 2
check "suspend vr2" netctl sandbox suspend vr2
standby() { pgrep -f 'name berth-vr2 .*-incoming defer'; }
check "vr2 suspended: a standby qemu waits for its snapshot" wait_for 20 standby
sb2=$(standby)

# the workers, not the VMs (qemu is berthd's child too)
kids=$(for p in $(berthd_workers); do [ "$(cat /proc/$p/comm 2>/dev/null)" = berthd ] && echo $p; done)
kill -KILL "$BERTHD_PID" $kids
wait_gone 10 "$BERTHD_PID" || bail "berthd survived kill -9"
is "the VM and the standby outlive berthd" "$(qemus)" 2

start_berthd
wait_routed vr1 8080
is "vr1 re-adopted: same guest processes" "$(info vr1)" "$i1"
like "vr2 is suspended after the restart" "$(netctl sandbox ls)" 'vr2 +suspended'
newstandby() { p=$(standby); [ -n "$p" ] && [ "$p" != "$sb2" ] && ! kill -0 "$sb2"; }
check "the orphaned standby is gone, a new one waits" wait_for 20 newstandby
is "vr2 woken on request: same guest processes" "$(info vr2)" "$i2"
is "no second qemu" "$(qemus)" 2
like "vr1 runs" "$(netctl sandbox ls)" 'vr1 +running'

check "delete vr1" netctl sandbox rm vr1
check "delete vr2" netctl sandbox rm vr2
none() { [ "$(qemus)" = 0 ]; }
check "no qemu left" wait_for 20 none
# the delete finishes (tap, directory) once berthd has seen qemu exit
notap() { ! ip -br link | grep -q '^bvr'; }
check "no tap left" wait_for 10 notap
done_testing
