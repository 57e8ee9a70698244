#!/bin/sh
# fleet-move-debian.sh — the default sandbox, Debian, moves between two
# fleet hosts (issue 33's test of a running and of a suspended Debian
# sandbox): hosts a and b build the default template (debian) from the
# template cache, so both hold the same version; a makes its ready
# snapshot (the one boot here) and the sandbox is restored from it, its
# disk a layer over that snapshot's. Running, with a file in /root, a
# detached process and its published URL, it moves to b: b is sent the
# snapshot's layer with it (b has none of its own), a request sent
# through a's edge during the move is answered after it by b with
# Server-Timing: wake, and on b it runs on (resumed: the same boot), its
# file and its process there, its URL served through either edge.
# Suspended on b, it moves back to a, which is sent none of that layer
# (its own), and wakes there with the same file and process. Forked
# there, the fork's source and the fork each move to b, their layers
# flattened first.
# The normal pass only: a sanitized berthd changes nothing in the guest,
# and fleet-move.sh runs every path of the move under the sanitizers.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool etcd
need_vm mmdebstrap dpkg-deb
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VMs run in the normal pass only"

FV=bmd FV_POOL_a=10.241.0.0/24 FV_POOL_b=10.242.0.0/24
. "$(dirname "$0")/fleet-vm.sh"
# binary images hold strings the sanitizer scan of $T would take for
# reports: they go before it (after the VMs)
at_exit "rm -rf '$T/a/state/templates' '$T/b/state/templates' '$T/a/state/vms' '$T/b/state/vms'"
# no pool clone (it would take an address the moved guest may need);
# a makes the default template's ready snapshot, b none
host_conf a "vm_template debian" "vm_ready_snapshot on" "vm_ready_pool 0" \
	"template_build_ready off"
host_conf b "vm_template debian" "vm_ready_snapshot off" "vm_ready_pool 0" \
	"template_build_ready off"
# a first: when the template cache is cold its build fills it, and b's
# is then a copy of the cached image (both the same version)
built() {
	wait_log 3600 "$T/$1/berthd.log" "template debian built in|template debian: build failed" "$(eval echo "\$PID_$1")" ||
		bail "host $1: the default template's build did not end"
	grep -q "template debian built in" "$T/$1/berthd.log" ||
		{ grep 'template debian:' "$T/$1/berthd.log" | tail -n 20 >&2; bail "host $1: the debian template's build failed"; }
}
start_host a
built a
start_host b
built b
wait_log 600 "$T/a/berthd.log" "the default template's ready snapshot [0-9a-f]+ built in" "$PID_a" ||
	{ grep "ready snapshot" "$T/a/berthd.log" >&2; bail "a's ready snapshot was not made"; }
ok "both hosts built the default template, debian; a made its ready snapshot"
wait_for 60 b_up || bail "a does not see b up"

# ---- a running Debian sandbox moves a -> b ----
out=$(nc_ a sandbox create dd --host a 2>&1) || bail "sandbox create: $out"
like "the default sandbox runs on a" "$out" 'sandbox dd created .*running'
like "... restored from a's ready snapshot" "$(grep '^ready_key=' "$T/a/state/vms/dd/sandbox.conf")" '^ready_key=[0-9a-f]+$'
nc_ a port publish dd 8080 >/dev/null || bail "publish"
wait_for 60 served a dd || bail "dd's URL is not served on a"
out=$(nc_ a sandbox exec dd -- sh -c 'echo debian-bytes >/root/moved.txt && sync' </dev/null 2>&1)
is "a file written in /root" "$?" 0
p=$(nc_ a sandbox exec dd --detach -- sleep 100000 2>&1)
like "a detached process started" "$p" '^[0-9]+$'
ps_line() { nc_ "$1" sandbox ps dd 2>/dev/null | awk -v p="$p" '$1 == p'; }
boot=$(via a dd /info >/dev/null; json_get "$(cat "$T/body")" 'j["boot_id"]')

( nc_ a sandbox move dd --to b >"$T/mv1.out" 2>&1; echo $? >"$T/mv1.rc" ) &
mvpid=$!
begun() { grep -q "moves sandbox dd here" "$T/b/berthd.log" 2>/dev/null; }
wait_for 120 begun || bail "b never began to take dd: $(cat "$T/mv1.out")"
code=$(curl -sS --max-time 120 --cacert "$T/a/state/tls/ca.pem" \
	--connect-to "::127.0.0.1:" -D "$T/hdr.during" -o "$T/body.during" \
	-w '%{http_code}' "https://8080-dd.$DOMAIN:$HTTPS_a/info" 2>/dev/null)
wait "$mvpid"
is "netctl sandbox move exits 0" "$(cat "$T/mv1.rc")" 0
diag "$(cat "$T/mv1.out")"
like "... b was sent the ready snapshot's layer with it, and keeps it" \
	"$(ls "$T/b/state/vms/.layers" 2>&1)" 'moved-[0-9a-f]{64}\.qcow2'
is "a request sent through a's edge during the move: 200" "$code" 200
like "... answered by b" "$(cat "$T/hdr.during")" "Berth-Host: b"
like "... after a wake" "$(cat "$T/hdr.during")" "Server-Timing: wake"
runs_b() { [ "$(state_on b dd)" = running ]; }
wait_for 60 runs_b
is "it runs on b (it ran on a)" "$(state_on b dd)" running
is "... the same boot: resumed, not booted" "$(via b dd /info >/dev/null; json_get "$(cat "$T/body")" 'j["boot_id"]')" "$boot"
like "... through b's edge, from b" "$(cat "$T/hdr")" "Berth-Host: b"
is "... through a's edge too" "$(via a dd /healthz)" 200
like "... from b" "$(cat "$T/hdr")" "Berth-Host: b"
is "its file in /root" "$(nc_ b sandbox exec dd -- cat /root/moved.txt </dev/null 2>&1)" debian-bytes
like "its detached process runs on" "$(ps_line b)" "^$p +[0-9]+ +running .*sleep 100000$"
is "... root and Debian" "$(nc_ b sandbox exec dd -- sh -c 'id -u; cat /etc/debian_version' </dev/null 2>&1 | head -n 1)" 0
like "its disk stands on the layer b keeps" "$(grep '^layered=' "$T/b/state/vms/dd/sandbox.conf")" '^layered=1$'
isnt "a holds it no more" "$(nc_ a --json sandbox show dd >/dev/null 2>&1; echo $?)" 0

# ---- suspended, back b -> a ----
nc_ b sandbox suspend dd >/dev/null || bail "suspend dd on b"
out=$(nc_ b sandbox move dd --to a 2>&1)
is "suspended on b, it moves back to a" "$?" 0
diag "$out"
is "... suspended there" "$(state_on a dd)" suspended
is "... a was sent none of the layer (its own): it keeps no copy" \
	"$(ls "$T/a/state/vms/.layers" 2>/dev/null | grep -c '^moved-')" 0
is "... its disk over a's own ready snapshot again" \
	"$(grep -cE '^layered=0$|^ready_key=[0-9a-f]+$' "$T/a/state/vms/dd/sandbox.conf")" 2
is "its URL wakes it on a" "$(via a dd /info)" 200
like "... with a wake" "$(cat "$T/hdr")" "Server-Timing: wake"
is "... the same boot" "$(json_get "$(cat "$T/body")" 'j["boot_id"]')" "$boot"
is "its file there" "$(nc_ a sandbox exec dd -- cat /root/moved.txt </dev/null 2>&1)" debian-bytes
like "its process too" "$(ps_line a)" "^$p +[0-9]+ +running .*sleep 100000$"

# ---- a fork and its source move: their layers flattened first ----
# dd, suspended, is forked into dk (a fork of a suspended sandbox: its
# disk's top frozen as a layer both stand on). Each moves to b: its top
# rebased onto a's ready layer first (what the frozen layer held copied
# into it), then sent as any other; the one still on a is untouched.
nc_ a sandbox suspend dd >/dev/null || bail "suspend dd on a"
out=$(nc_ a sandbox fork dd dk 2>&1) || bail "fork dd dk: $out"
is "dd forked into dk on a" "$(nc_ a sandbox exec dk -- cat /root/moved.txt </dev/null 2>&1)" debian-bytes
nc_ a sandbox exec dk -- sh -c 'echo fork-bytes >/root/fork.txt && sync' </dev/null >/dev/null 2>&1
like "dd stands on the frozen layer" "$(grep '^layer_gen=' "$T/a/state/vms/dd/sandbox.conf")" '^layer_gen=[1-9]'
out=$(nc_ a sandbox move dd --to b 2>&1)
is "the fork's source moves to b" "$?" 0
diag "$out"
like "... its layers flattened first" "$(grep 'dd' "$T/a/berthd.log")" "sandbox dd: flattening its fork's layers to move it"
is "... and it wakes on b with its file" "$(nc_ b sandbox exec dd -- cat /root/moved.txt </dev/null 2>&1)" debian-bytes
is "the fork on a still reads its disk" "$(nc_ a sandbox exec dk -- cat /root/moved.txt /root/fork.txt </dev/null 2>&1 | tr '\n' ' ')" "debian-bytes fork-bytes "
nc_ a sandbox suspend dk >/dev/null || bail "suspend dk"
out=$(nc_ a sandbox move dk --to b 2>&1)
is "the fork moves to b too" "$?" 0
diag "$out"
is "... and wakes there, its files in it" "$(nc_ b sandbox exec dk -- cat /root/moved.txt /root/fork.txt </dev/null 2>&1 | tr '\n' ' ')" "debian-bytes fork-bytes "
like "... its own identity kept" "$(nc_ b sandbox exec dk -- hostname </dev/null 2>&1)" "dk"
for d in dd dk; do nc_ a sandbox rm "$d" >/dev/null 2>&1; nc_ b sandbox rm "$d" >/dev/null 2>&1; done
done_testing
