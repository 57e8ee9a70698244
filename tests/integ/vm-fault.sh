#!/bin/sh
# vm-fault.sh — a sandbox is never stranded. With real microVMs (qemu,
# TCG) and one sandbox kept across the checks:
#  - kill -9 of its qemu: `failed` with an event naming the cause; resume
#    says to use start; `netctl sandbox start` boots it again and a file
#    written to /data before is still there;
#  - the host file system holding disk.raw full: qemu stops the guest,
#    the state and an event say "disk full"; once there is room again,
#    resume goes on where the guest stopped;
#  - kill -9 of berthd in the middle of a create, a suspend and a restore
#    (qemu held with SIGSTOP so the operation is surely in flight): after
#    the restart no orphan qemu (checked by pid) and every sandbox in a
#    definite state;
#  - a standby qemu that dies on its own (SIGTERM): an event says so and
#    the wake restores without it;
#  - a guest at work with no visitor is not paused after idle_pause, and
#    is paused once it stops.
# Three VM boots.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool ss mount umount
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

# The VMs' directory on a tmpfs just big enough for one sandbox: its guest
# RAM file (256 MiB, allocated up front), the disk's metadata and some
# 40 MiB of data. Grown later.
mkdir -p "$T/state/vms"
mount -t tmpfs -o size=300m,mode=0711 berth-vm-fault "$T/state/vms" ||
	skip_all "cannot mount a tmpfs (needs CAP_SYS_ADMIN)"
at_exit "umount -l '$T/state/vms'"

conf() {
	VMM=on berthd_config "tap_prefix bvf" "vm_pool 10.222.0.0/24" \
		"idle_pause ${IDLE_PAUSE:-never}" "idle_suspend never" "$@"
}
conf
start_berthd

state() { netctl --json sandbox show "$1" | json_get "$(cat)" 'j["state"]'; }
state_is() { [ "$(state "$1")" = "$2" ]; }
conf_of() { sed -n "s/^$2=//p" "$STATE/vms/$1/sandbox.conf"; }
qemus() { pgrep -f "name berth-$1 " | sort -n | tr '\n' ' ' | sed 's/ $//'; }
url() { echo "$(url_for 8080 "$1")$2"; }
killd() {	# berthd and its workers, the VMs are left
	_kids=$(for p in $(berthd_workers); do [ "$(cat /proc/$p/comm 2>/dev/null)" = berthd ] && echo $p; done)
	kill -KILL "$BERTHD_PID" $_kids
	wait_gone 10 "$BERTHD_PID" || bail "berthd survived kill -9"
}
# pids_ok ID: the qemu processes of ID are exactly those its
# sandbox.conf names (none when it has none)
pids_ok() {
	_want=$(for p in $(conf_of "$1" pid) $(conf_of "$1" standby_pid); do
		[ "$p" -gt 0 ] && echo "$p"; done | sort -n | tr '\n' ' ' | sed 's/ $//')
	[ "$(qemus "$1")" = "$_want" ]
}
# queued PID: berthd's last QMP command waits unread at a stopped qemu
queued() { ss -xpn | grep "pid=$1," | awk '$3 > 0' | grep -q .; }

check "create f1" netctl sandbox create f1
netctl port publish f1 8080 >/dev/null && wait_routed f1 8080 || bail "publish f1"
is "write /data/keep" "$(bcurl -o /dev/null -w '%{http_code}' -X PUT --data-binary kept-value "$(url f1 /files/keep)")" 201

# ---- kill -9 qemu -> failed -> start ---------------------------------------
pid=$(conf_of f1 pid)
like "sandbox.conf names the running qemu" "$pid" '^[0-9]+$'
kill -KILL "$pid"
check "f1 is failed" wait_for 10 state_is f1 failed
like "an event names the cause" "$(netctl sandbox events f1)" 'exit +failed .*killed by signal 9'
if out=$(netctl sandbox resume f1 2>&1); then not_ok "resume of a failed sandbox fails"
else ok "resume of a failed sandbox fails"; fi
like "and says to use start" "$out" 'start (it|boots it again)'
check "netctl sandbox start f1" netctl sandbox start f1
like "f1 runs again" "$(state f1)" running
like "an event for the start" "$(netctl sandbox events f1)" 'start +ok'
is "the /data file survived" "$(bcurl "$(url f1 /files/keep)")" kept-value

# ---- the disk's file system full ------------------------------------------
free_kb=$(df --output=avail "$STATE/vms" | tail -n 1 | tr -d ' ')
mb=$((free_kb / 1024 + 16))
head -c $((mb * 1024 * 1024)) /dev/urandom >"$T/big"
bcurl -o "$T/big.out" -w '%{http_code}' --max-time 180 -X PUT \
	--data-binary "@$T/big" "$(url f1 /files/big)" >"$T/big.code" 2>&1 &
bigpid=$!
check "the guest's write fills the host file system: f1 failed" wait_for 90 state_is f1 failed
like "an event says so" "$(netctl sandbox events f1)" 'guest +failed .*disk full'
check "its qemu lives on (stopped)" kill -0 "$(conf_of f1 pid)"
mount -o remount,size=2g "$STATE/vms" || bail "cannot grow the tmpfs"
check "resume once there is room" netctl sandbox resume f1
like "f1 runs" "$(state f1)" running
wait "$bigpid"
is "the guest's write went through" "$(cat "$T/big.code")" 201
check "delete the big file" bcurl -f -X DELETE "$(url f1 /files/big)"

# ---- kill -9 berthd mid-create ---------------------------------------------
netctl sandbox create f2 >"$T/f2.out" 2>&1 &
cpid=$!
has_pid() { p=$(conf_of f2 pid 2>/dev/null); [ -n "$p" ] && [ "$p" -gt 0 ]; }
check "f2's qemu is spawned and recorded" wait_for 30 has_pid
f2pid=$(conf_of f2 pid)
killd
wait "$cpid" 2>/dev/null
start_berthd
check "f2's qemu was ended (pid $f2pid)" wait_gone 10 "$f2pid"
is "no qemu of f2" "$(qemus f2)" ""
is "f2 is failed" "$(state f2)" failed
like "an event says the restart interrupted it" "$(netctl sandbox events f2)" \
	'restarted while the sandbox was creating'
check "remove f2" netctl sandbox rm f2

# ---- kill -9 berthd mid-suspend ---------------------------------------------
pid=$(conf_of f1 pid)
# (kill -STOP 0 would stop this test's whole process group: the suite)
[ -n "$pid" ] && [ "$pid" -gt 0 ] 2>/dev/null || bail "f1 has no qemu (pid '$pid'): $(state f1)"
kill -STOP "$pid"
netctl sandbox suspend f1 >/dev/null 2>&1 &
check "a suspend is in flight (its QMP command waits at qemu)" wait_for 10 queued "$pid"
killd
kill -CONT "$pid"
start_berthd
st=$(state f1)
like "f1 is running or paused after the restart" "$st" '^(running|paused)$'
check "its qemu is the one sandbox.conf names, no other" pids_ok f1
is "same qemu as before" "$(conf_of f1 pid)" "$pid"
is "f1 answers with the /data file" "$(bcurl "$(url f1 /files/keep)")" kept-value

# ---- kill -9 berthd mid-restore ----------------------------------------------
check "suspend f1" netctl sandbox suspend f1
ready() { netctl --json sandbox show f1 | grep -q '"standby": *"ready"'; }
check "its standby qemu has loaded the snapshot" wait_for 20 ready
spid=$(conf_of f1 standby_pid)
[ -n "$spid" ] && [ "$spid" -gt 0 ] 2>/dev/null || bail "f1 has no standby qemu (pid '$spid')"
kill -STOP "$spid"
netctl sandbox resume f1 >/dev/null 2>&1 &
check "a restore is in flight (cont waits at the standby)" wait_for 10 queued "$spid"
killd
kill -CONT "$spid"
start_berthd
st=$(state f1)
like "f1 is suspended or running after the restart" "$st" '^(suspended|running)$'
pidchk() { pids_ok f1; }
check "its qemu processes are the ones sandbox.conf names" wait_for 20 pidchk
is "f1 wakes with the /data file" "$(bcurl "$(url f1 /files/keep)")" kept-value
like "f1 runs" "$(state f1)" running
check "one qemu for f1" pids_ok f1

# ---- a standby qemu that dies on its own is said; the wake goes on -----------
check "suspend f1 again" netctl sandbox suspend f1
check "its standby qemu has loaded the snapshot" wait_for 20 ready
spid=$(conf_of f1 standby_pid)
kill -TERM "$spid"
sbgone() { ! kill -0 "$spid" 2>/dev/null; }
check "the standby qemu ends on SIGTERM" wait_for 20 sbgone
sbdied() { netctl sandbox events f1 | grep -Eq '^.*standby +failed.*its standby qemu'; }
if wait_for 20 sbdied; then ok "f1's events say its standby died"
else not_ok "f1's events say its standby died"
	diag "$(netctl sandbox events f1 | tail -n 4)"; fi
is "f1 wakes without it, with the /data file" "$(bcurl "$(url f1 /files/keep)")" kept-value
check "one qemu for f1" pids_ok f1

# ---- a busy guest is not idle -------------------------------------------------
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
IDLE_PAUSE=4s conf
start_berthd
is "the guest starts 14 s of work" "$(bcurl -o /dev/null -w '%{http_code}' "$(url f1 /spin?s=14)")" 202
t0=$(date +%s)
paused() { state_is f1 paused; }
# a loaded machine stretches the 14 s of guest work (TCG): a wide bound
wait_for 120 paused
t1=$(date +%s)
if [ $((t1 - t0)) -ge 14 ]; then ok "not paused while it worked: paused $((t1 - t0)) s later"
else not_ok "not paused while it worked"; diag "paused after $((t1 - t0)) s"; fi
check "paused once it stopped" state_is f1 paused
like "by the idle policy" "$(netctl sandbox events f1 | tail -n 1)" 'pause +ok'

check "remove f1" netctl sandbox rm f1
none() { [ -z "$(qemus f1)" ]; }
check "no qemu left" wait_for 60 none
done_testing
