#!/bin/sh
# vm-ready.sh — sandboxes made from the default template's ready
# snapshot (issue 27), real microVMs under TCG: berthd builds the
# snapshot in the background from its first start (one boot of the
# debian template to its settled line, then a suspend kept in
# <state>/vms/.ready/<key>/); creates then restore it instead of
# booting, each clone with its own identity before anything reaches it:
# its id as hostname, its own address (the one `sandbox show` names, its
# published port answers over TLS), machine-id, random pool (kernel
# uuid, 32 bytes of /dev/urandom) and the host's clock; Docker answers.
# A clone's RAM is the snapshot's pages (copy-on-write): its first
# suspend carries the RAM in the stream, its standby qemu loads it into a
# RAM file of its own and the resume promotes that qemu; a file written
# before survives. A berthd restart
# adopts running clones, and the next create restores again. A create
# of another shape (a larger disk) boots, an event says why, and that
# shape's snapshot is built meanwhile: the next create of it restores,
# its root the larger disk. Nothing is left running after the deletes.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm mmdebstrap
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VMs run in the normal pass only"

CTL_PORT=$(free_port)
# first without the ready pool: every create restores the snapshot
VMM=on VM_TEMPLATE=debian VM_READY=on berthd_config "tap_prefix bxr" \
	"vm_pool 10.233.0.0/24" "idle_pause never" "idle_suspend never" \
	"control_listen 127.0.0.1:$CTL_PORT" "vm_ready_pool 0"
start_berthd
at_exit "rm -rf '$STATE/templates' '$STATE/vms'"

wait_log 3600 "$BERTHD_LOG" "template debian built in|template debian: build failed" "$BERTHD_PID" ||
	bail "the default template's build did not end in an hour"
grep -q "template debian built in" "$BERTHD_LOG" || {
	grep 'template debian:' "$BERTHD_LOG" | tail -n 20 >&2
	bail "berthd's build of the default template debian failed"
}
ok "the default template debian built"
wait_log 900 "$BERTHD_LOG" "the default template's ready snapshot [0-9a-f]+( built in|:)" "$BERTHD_PID" ||
	bail "the ready snapshot was not built in 15 minutes"
like "berthd built the default template's ready snapshot in the background" \
	"$(cat "$BERTHD_LOG")" "the default template's ready snapshot [0-9a-f]+ built in [0-9]+ ms"
KEY=$(sed -n "s/.*the default template's ready snapshot \([0-9a-f]*\) built in.*/\1/p" "$BERTHD_LOG" | tail -n 1)
RDIR="$STATE/vms/.ready/$KEY"
check "... kept as device state, RAM image, frozen disk layer and ready.conf" \
	test -s "$RDIR/state" -a -f "$RDIR/mem" -a -s "$RDIR/disk.qcow2" -a -s "$RDIR/ready.conf"
like "... none of them writable by a sandbox's VMM" "$(stat -c '%U %a' "$RDIR/state" "$RDIR/disk.qcow2")" \
	"^root 444
root 444$"
unlike "... its builder is nobody's sandbox" "$(netctl sandbox ls)" "ready-"

x() { _s=$1; shift; netctl sandbox exec "$_s" "$@" </dev/null; }
ms() { date +%s%3N; }

# ---- creates restore it ----
t0=$(ms)
out=$(netctl sandbox create r1 2>&1) || bail "sandbox create r1: $out"
t1=$(ms)
like "create r1: running" "$out" 'sandbox r1 created \(10\.233\.0\.[0-9]+, running\)'
diag "create r1 took $((t1 - t0)) ms (netctl, a restore of the snapshot)"
like "... restored from the snapshot (qemu started, state loaded, identity)" \
	"$(grep 'sandbox r1: created' "$BERTHD_LOG")" \
	"created in [0-9]+ ms: restored from the ready snapshot $KEY \(qemu up"
is "... restored from the ready snapshot, not booted" \
	"$(netctl --json sandbox show r1 | json_get "$(cat)" 'j["vm"]["created_from"]')" snapshot
is "... its disk's base layer is the snapshot's" \
	"$(netctl --json sandbox show r1 | json_get "$(cat)" 'j["vm"]["base_layer"]')" "$KEY"
out=$(netctl sandbox create r2 2>&1) || bail "sandbox create r2: $out"
like "create r2: running" "$out" 'sandbox r2 created'

is "r1's hostname is its id" "$(x r1 -- cat /etc/hostname)" r1
is "... and hostname(1) says so" "$(x r1 -- hostname)" r1
is "r2's hostname is its id" "$(x r2 -- cat /etc/hostname)" r2
ip1=$(netctl --json sandbox show r1 | json_get "$(cat)" 'j["address"]')
like "r1's address is the one sandbox show names" \
	"$(x r1 -- ip -4 -o addr show dev eth0)" "inet $ip1/30"
gw1=$(echo "$ip1" | awk -F. '{print $1"."$2"."$3"."$4-1}')
like "... its default route via its own gateway" "$(x r1 -- ip -4 route show default)" "default via $gw1 "
mid1=$(x r1 -- cat /etc/machine-id); mid2=$(x r2 -- cat /etc/machine-id)
like "machine-id: 32 hex digits" "$mid1" '^[0-9a-f]{32}$'
check "... differ between two clones ($mid1 / $mid2)" test "$mid1" != "$mid2"
u1=$(x r1 -- cat /proc/sys/kernel/random/uuid); u2=$(x r2 -- cat /proc/sys/kernel/random/uuid)
check "kernel random uuids differ ($u1 / $u2)" test -n "$u1" -a "$u1" != "$u2"
r1=$(x r1 -- sh -c 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"')
r2=$(x r2 -- sh -c 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"')
check "32 bytes of /dev/urandom differ" test -n "$r1" -a "$r1" != "$r2"
# the guest's time against the host's before and after the exec that
# read it (a loaded host's exec may take seconds: that is not skew)
h0=$(date +%s); g=$(x r1 -- date +%s); h1=$(date +%s)
case $g in ''|*[!0-9]*) d=999 ;; *) d=0 ;; esac	# no answer: a failure
[ "$d" = 0 ] && [ "$g" -lt "$h0" ] && d=$((h0 - g))
[ "$d" = 0 ] && [ "$g" -gt "$h1" ] && d=$((g - h1))
check "r1's clock within 2 s of the host's (off by $d s)" test "$d" -le 2
# Docker starts on its first client: the first docker info waits for it
like "docker info answers in r1" "$(x r1 --timeout 180s -- docker info 2>&1)" 'Server Version'
like "... in r2 too" "$(x r2 --timeout 180s -- docker info 2>&1)" 'Server Version'

out=$(netctl port publish r1 8080 2>&1)
is "port publish r1 8080" "$?" 0
wait_routed 8080 r1
like "r1's port 8080 answers over TLS through berthd" "$(bcurl "$(url_for 8080 r1)/" 2>&1)" "."

# ---- a clone's first suspend carries its RAM; its resume owns it ----
x r1 -- sh -c 'echo kept >/root/r1-file; sync'
out=$(netctl sandbox suspend r1 2>&1)
is "suspend r1" "$?" 0
check "... its snapshot holds the RAM (no RAM file of its own yet)" \
	sh -c "grep -q '^snap_ram=1' '$STATE/vms/r1/sandbox.conf'"
# its standby loads that snapshot into a RAM file of its own (it took
# the ready snapshot's path once, found no /mem and died: the first wake
# of every clone was a restore of its own)
sbready() { netctl --json sandbox show r1 | grep -q '"standby": *"ready"'; }
check "... its standby qemu has loaded it" wait_for 300 sbready
spid=$(sed -n 's/^standby_pid=//p' "$STATE/vms/r1/sandbox.conf")
out=$(netctl sandbox resume r1 2>&1)
is "resume r1" "$?" 0
is "... the standby qemu became r1's (no second start)" \
	"$(sed -n 's/^pid=//p' "$STATE/vms/r1/sandbox.conf")" "$spid"
is "... the file written before is there" "$(x r1 -- cat /root/r1-file)" kept
is "... still r1" "$(x r1 -- hostname)" r1
check "... its RAM is a file of its own now" \
	sh -c "grep -q '^ram_shared=0' '$STATE/vms/r1/sandbox.conf' && grep -q '^snap_ram=0' '$STATE/vms/r1/sandbox.conf'"
out=$(netctl sandbox suspend r1 2>&1)
is "suspend r1 again (device state only)" "$?" 0
out=$(netctl sandbox resume r1 2>&1)
is "resume r1 again" "$?" 0
is "... the file is still there" "$(x r1 -- cat /root/r1-file)" kept
is "r2 never saw r1's file" "$(x r2 -- sh -c 'cat /root/r1-file 2>/dev/null || echo none')" none

# ---- the ready pool (vm_ready_pool 1, after a restart): clones adopted;
# a clone restored, identified and paused ahead; a create takes it ----
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
sed -i 's/^vm_ready_pool 0$/vm_ready_pool 1/' "$CONF"
mv "$BERTHD_LOG" "$T/berthd.0.log"
start_berthd
is "after a restart r1 answers as r1" "$(x r1 -- hostname 2>&1)" r1
check "a clone of the snapshot waits in the ready pool" \
	wait_for 300 metric_is berth_ready_pool_members 1
unlike "... nobody's sandbox" "$(netctl sandbox ls)" "pool-"
out=$(netctl sandbox create r3 2>&1) || bail "sandbox create r3: $out"
like "create r3 takes it: resumed, renamed, its own identity" \
	"$(grep 'sandbox r3: created' "$BERTHD_LOG")" \
	"created in [0-9]+ ms: from the ready pool of snapshot $KEY"
is "... as r3" "$(x r3 -- hostname)" r3
mid3=$(x r3 -- cat /etc/machine-id)
check "... its own machine-id" test -n "$mid3" -a "$mid3" != "$mid1" -a "$mid3" != "$mid2"
is "... restored from the ready snapshot" \
	"$(netctl --json sandbox show r3 | json_get "$(cat)" 'j["vm"]["created_from"]')" snapshot

# ---- berthd killed (-9) while it makes a clone: clones adopted, the
# interrupted one in a definite state, nothing of berthd's own left
# (its pool's clone), the next create restores ----
check "(the pool holds a clone again)" wait_for 300 metric_is berth_ready_pool_members 1
netctl sandbox create r4 >"$T/r4.out" 2>&1 &
wait_log 60 "$BERTHD_LOG" "sandbox r4: stopped -> creating" "$BERTHD_PID" ||
	bail "the create of r4 did not start"
kill -KILL "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not die"
wait
mv "$BERTHD_LOG" "$T/berthd.1.log"
start_berthd
h=$(x r2 -- hostname 2>&1)
is "after berthd was killed r2 still answers as r2" "$h" r2
[ "$h" = r2 ] || diag "$(cat "$STATE/vms/r2/sandbox.conf")"
st4=$(netctl --json sandbox show r4 | json_get "$(cat)" 'j["state"]')
like "r4, made while berthd was killed, is running or failed (interrupted): a definite state" \
	"$st4" '^(running|failed)$'
if [ "$st4" = failed ]; then
	like "... saying why" "$(netctl --json sandbox show r4 | json_get "$(cat)" 'j["vm"]["reason"]')" \
		"restarted while the sandbox was creating"
	out=$(netctl sandbox start r4 2>&1)
	is "... and start boots it" "$?" 0
else
	ok "... (its create had ended)"
	ok "... (nothing to start)"
fi
is "r4 answers as r4" "$(x r4 -- hostname 2>&1)" r4
check "the killed berthd's pool clone was ended by the next one (one clone, the new one's)" \
	wait_for 300 metric_is berth_ready_pool_members 1
n=0
for p in $(pgrep -f qemu-system); do
	case $(readlink "/proc/$p/root") in "$STATE"/vms/.ready/*) n=$((n + 1)) ;; esac
done
is "... one pool qemu of this state dir runs" "$n" 1
is "r3 still answers as r3" "$(x r3 -- hostname)" r3

# ---- another shape (a larger disk): it boots, says why, builds its own ----
out=$(netctl sandbox create big --disk 6144 2>&1) || bail "sandbox create big: $out"
is "a create with a larger disk boots" \
	"$(netctl --json sandbox show big | json_get "$(cat)" 'j["vm"]["created_from"]')" boot
like "... and its events say why" "$(netctl sandbox events big 2>&1)" \
	"booted: no ready snapshot of template debian with [0-9]+ MiB, [0-9]+ vCPUs and a 6144 MiB disk yet \((building it now|another one is being built)\)"
is "... it is big" "$(x big -- hostname)" big
# (its ready.conf is written in <key>.tmp, which is renamed <key>)
big_conf() { grep -lx 'disk_mib=6144' "$STATE"/vms/.ready/*/ready.conf 2>/dev/null | grep -v '\.tmp/' | head -n 1; }
big_ready() { [ -n "$(big_conf)" ]; }
check "... and that shape's ready snapshot is built meanwhile (the disk is in its key)" \
	wait_for 900 big_ready
BKEY=$(basename "$(dirname "$(big_conf)")")
out=$(netctl sandbox create big2 --disk 6144 2>&1) || bail "sandbox create big2: $out"
is "the next create of that shape restores it" \
	"$(netctl --json sandbox show big2 | json_get "$(cat)" 'j["vm"]["created_from"]')" snapshot
like "... that one" "$(grep 'sandbox big2: created' "$BERTHD_LOG")" \
	"restored from the ready snapshot $BKEY "
root=$(x big2 -- df -m --output=size / 2>&1 | tail -n 1 | tr -d ' ')
if [ "$root" -ge 5800 ] 2>/dev/null && [ "$root" -le 6144 ]; then
	ok "... its root file system is the 6 GiB disk ($root MiB)"
else
	not_ok "... its root file system is the 6 GiB disk"; diag "df -m /: $root"
fi

for s in r1 r2 r3 r4 big big2; do netctl sandbox rm "$s" >/dev/null 2>&1; done
ours() {	# qemus of this state dir's sandboxes (not the pool's)
	for p in $(pgrep -f qemu-system); do
		case $(readlink "/proc/$p/root") in
		"$STATE"/vms/.ready/*) ;;
		"$STATE"/*) echo "$p" ;;
		esac
	done
}
no_ours() { [ -z "$(ours)" ]; }
check "no qemu of this test's sandboxes is left" wait_for 60 no_ours
# a delete ends once its VMM is gone: its tap, then its directory go
# (berthd's exit in between would leave them to its next start)
deleted() { for s in r1 r2 r3 r4 big big2; do [ ! -e "$STATE/vms/$s" ] || return 1; done; }
check "... and their deletes ended (taps, directories)" wait_for 60 deleted
check "the ready snapshot stays for the next create" test -s "$RDIR/state"
# the pool's clone is berthd's own: it goes with berthd
check "a clone waits in the pool again" wait_for 300 metric_is berth_ready_pool_members 1
pre="sandboxes: $(netctl sandbox ls 2>&1 | tr '\n' ' ') taps: $(ip -o link | grep -o ' bxr[0-9a-z]*' | tr '\n' ' ') vms: $(ls -a "$STATE/vms" "$STATE/vms/.ready" | tr '\n' ' ')"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
left_q() { for p in $(pgrep -f qemu-system); do readlink "/proc/$p/root"; done | grep "$STATE"; }
left_t() { ip -o link | grep ' bxr'; }
left_d() { ls -d "$STATE"/vms/.ready/pool-* 2>/dev/null; }
# (a qemu killed with its PID namespace's init is reaped by the kernel a
# moment after: its tap goes when its last descriptor closes)
none_left() { [ -z "$(left_q)$(left_t)$(left_d)" ]; }
if wait_for 20 none_left; then
	ok "... and went with berthd: no qemu, no tap, no directory of it left"
else
	not_ok "... and went with berthd: no qemu, no tap, no directory of it left"
	diag "qemu: $(left_q | tr '\n' ' ') tap: $(left_t | cut -c1-60) dir: $(left_d)"
	diag "before: $pre"
	diag "$(grep -i 'bxr\|pool\|clone\|r3\|removed' "$BERTHD_LOG" | tail -n 30)"
fi
done_testing
