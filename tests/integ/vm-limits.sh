#!/bin/sh
# vm-limits.sh — what a jailed VMM may take of the host. One microVM
# (qemu, TCG) with one vCPU, an ops CPU quota of 50 % and 256 KiB of
# console kept:
#  - a guest busy loop uses at most about 55 % of a core, measured from
#    the host (the qemu process's CPU time) over 10 s, and the cgroup
#    says it was throttled; /metrics and `netctl sandbox show` report it;
#  - a guest printing 1 MiB on its console leaves at most 256 KiB of it
#    on disk, the newest part, readable with `netctl sandbox console`;
#    with vm_console_rate 32 (KiB/s) berthd copies it no faster: the
#    1 MiB takes at least 31 s (a TCG guest prints about 120 KiB/s
#    here), and show counts the copier's pauses.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"
[ -f /sys/fs/cgroup/cgroup.controllers ] || [ -w /sys/fs/cgroup/cpu ] ||
	skip_all "no usable cgroup controllers here"

VMM=on berthd_config "tap_prefix blm" "vm_pool 10.224.0.0/24" \
	"idle_pause never" "idle_suspend never" "vm_cpu_quota 50%" \
	"vm_console_max 256" "vm_console_rate 32"
start_berthd
check "create l1 with one vCPU" netctl sandbox create l1 --vcpus 1
netctl port publish l1 8080 >/dev/null && wait_routed l1 8080 || bail "publish l1"
url() { echo "$(url_for 8080 l1)$1"; }
pid=$(sed -n 's/^pid=//p' "$STATE/vms/l1/sandbox.conf")

# ---- CPU ---------------------------------------------------------------------
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
is "the guest spins for 14 s" "$(bcurl -o /dev/null -w '%{http_code}' "$(url /spin?s=14)")" 202
t0=$(ticks) s0=$(date +%s%N)
sleep 10	# the measurement window itself, not a wait for an event
t1=$(ticks) s1=$(date +%s%N)
pct=$(( (t1 - t0) * 100 * 1000000000 / hz / (s1 - s0) ))
if [ "$pct" -le 55 ]; then ok "a busy vCPU under a 50 % quota used $pct % of a core over 10 s"
else not_ok "a busy vCPU under a 50 % quota used $pct % of a core over 10 s (want <= 55)"; fi
if [ "$pct" -ge 25 ]; then ok "and it did run ($pct %)"
else not_ok "and it did run"; diag "$pct %"; fi
show=$(netctl --json sandbox show l1)
like "show says the CPU quota held it back" "$(json_get "$show" 'j["vm"]["usage"]["cpu_throttled_periods"] > 0')" True
like "show reports its CPU time" "$(json_get "$show" 'j["vm"]["usage"]["cpu_seconds"] >= 5')" True
like "show reports its memory" "$(json_get "$show" 'j["vm"]["usage"]["memory_bytes"] > 1<<20')" True
m=$(curl -sS --unix-socket "$STATE/control.sock" http://berth/metrics)
like "/metrics has its CPU seconds" "$m" 'berth_sandbox_cpu_seconds_total\{sandbox="l1"\} [0-9]'
like "/metrics has its memory" "$m" 'berth_sandbox_memory_bytes\{sandbox="l1"\} [1-9]'

# ---- console -------------------------------------------------------------------
paused0=$(json_get "$(netctl --json sandbox show l1)" 'j["vm"]["usage"]["console_paused"]')
t0=$(date +%s%N)
is "the guest prints 1 MiB on its console" "$(bcurl -o /dev/null -w '%{http_code}' "$(url /console?kib=1024)")" 202
flooded() { netctl sandbox console l1 | grep -q 'berth-flood done 1024 KiB'; }
check "netctl sandbox console shows the end of it" wait_for 240 flooded
t1=$(date +%s%N)
# a lower bound on time: a loaded machine only makes it longer
el=$(( (t1 - t0) / 1000000 ))
if [ "$el" -ge 30000 ]; then ok "vm_console_rate 32: 1 MiB copied in no less than 31 s ($el ms)"
else not_ok "vm_console_rate 32: 1 MiB copied in no less than 31 s ($el ms)"; fi
paused1=$(json_get "$(netctl --json sandbox show l1)" 'j["vm"]["usage"]["console_paused"]')
if [ "${paused1:-0}" -gt "${paused0:-0}" ] 2>/dev/null; then ok "show counts the copier's pauses ($paused0 -> $paused1)"
else not_ok "show counts the copier's pauses"; diag "'$paused0' -> '$paused1'"; fi
kept=$(( $(stat -c %s "$STATE/vms/l1/console.log") + $(stat -c %s "$STATE/vms/l1/console.log.1" 2>/dev/null || echo 0) ))
if [ "$kept" -le 262144 ]; then ok "at most 256 KiB of it kept on disk ($kept bytes)"
else not_ok "at most 256 KiB of it kept on disk"; diag "$kept bytes"; fi
is "nothing of it in the jail" "$(ls "$STATE/vms/l1/jail" | grep -c console)" 0
like "the newest lines are the ones kept" "$(tail -n 2 "$STATE/vms/l1/console.log")" 'berth-flood done'
check "remove l1" netctl sandbox rm l1
done_testing
