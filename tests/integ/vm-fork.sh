#!/bin/sh
# vm-fork.sh — `POST /v1/sandboxes/{id}/fork` (issue 27), real Debian
# microVMs under TCG: a running sandbox forked while it runs on; the fork
# has its files and a process started in it before, its own identity,
# writes on either side after the fork are not seen by the other; the
# source's WebSocket through berthd survives it; a fork of a fork; ten
# forks in one call; checkpoints taken, restored in place and made into
# new sandboxes; a fork and a checkpoint of a suspended sandbox; twelve
# forks in a chain with merges; berthd killed mid-fork; bad requests and
# quotas answered clearly and nothing stored lost.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm mmdebstrap
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VMs run in the normal pass only"

CTL_PORT=$(free_port)
VMM=on VM_TEMPLATE=debian VM_READY=on berthd_config "tap_prefix bxf" \
	"vm_pool 10.234.0.0/24" "idle_pause never" "idle_suspend never" \
	"control_listen 127.0.0.1:$CTL_PORT" "vm_ready_pool 0" \
	"vm_max_checkpoints 2"
start_berthd
at_exit "rm -rf '$STATE/templates' '$STATE/vms'"
wait_log 3600 "$BERTHD_LOG" "template debian built in|template debian: build failed" "$BERTHD_PID" ||
	bail "the default template's build did not end in an hour"
wait_log 900 "$BERTHD_LOG" "the default template's ready snapshot [0-9a-f]+( built in|:)" "$BERTHD_PID" ||
	bail "the ready snapshot was not built in 15 minutes"

x() { _s=$1; shift; netctl sandbox exec "$_s" "$@" </dev/null; }
# the inode of the RAM image a sandbox's qemu maps ("" when none)
img_ino() { _p=$(pgrep -f "[n]ame berth-$1 " | head -1); [ -n "$_p" ] && awk '/memfd:berth-image/ { print $5; exit }' "/proc/$_p/maps"; }
api() { curl -sS --unix-socket "$STATE/control.sock" -H 'Content-Type: application/json' "$@"; }

out=$(netctl sandbox create a 2>&1) || bail "sandbox create a: $out"
x a -- sh -c 'echo before >/root/f; sync'
x a -- sh -c 'setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! >/root/sleep.pid'
spid=$(x a -- cat /root/sleep.pid)
# a WebSocket to a's testapp through berthd, open across the fork
out=$(netctl port publish a 8080 2>&1) || bail "port publish a 8080: $out"
wait_routed 8080 a
py --port "$HTTPS_PORT" --host "$(host_for 8080 a)" --ca "$CA" --timeout 120 ws \
	--ready "$T/ws.ready" --hold "$T/ws.go" "before the fork" "after the fork" \
	>"$T/ws.out" 2>&1 &
wspid=$!
wait_for 60 test -e "$T/ws.ready" || bail "the WebSocket to a did not open: $(cat "$T/ws.out")"

t0=$(date +%s%3N)
doc=$(api -X POST -d '{"ids":["b"]}' http://b/v1/sandboxes/a/fork)
like "fork a into b: 201 with b's token" "$doc" '"forks": *\[\{"id": *"b"'
wait_for 300 sh -c "\"$NETCTL\" -s '$STATE' --json sandbox show b | grep -q '\"state\": *\"running\"'"
t1=$(date +%s%3N)
is "b runs" "$(netctl --json sandbox show b | json_get "$(cat)" 'j["state"]')" running
diag "fork to b running: $((t1 - t0)) ms"
like "... its create says it was forked from a" "$(grep 'sandbox b: created' "$BERTHD_LOG")" "forked from a"
is "a runs on" "$(netctl --json sandbox show a | json_get "$(cat)" 'j["state"]')" running
touch "$T/ws.go"
wait "$wspid"
is "a's WebSocket through berthd survived the fork" "$?" 0
like "... and echoes after it" "$(cat "$T/ws.out")" "echo: after the fork"
like "... the source's capture said its pause" "$(grep 'sandbox a: forked into' "$BERTHD_LOG")" "source paused [0-9]+ ms"
like "... and that the fork maps its RAM as an image (no copy)" "$(grep 'sandbox a: forked into' "$BERTHD_LOG")" "its RAM an image the forks share"
unlike "b did not get a's published port" "$(netctl port ls b 2>&1)" "8080"
is "b has a's file" "$(x b -- cat /root/f)" before
is "b has a's process (the same pid, alive)" "$(x b -- sh -c "kill -0 $spid && echo alive")" alive
is "b is b" "$(x b -- hostname)" b
ma=$(x a -- cat /etc/machine-id); mb=$(x b -- cat /etc/machine-id)
check "machine-ids differ" test -n "$mb" -a "$ma" != "$mb"
x b -- sh -c 'echo b-only >/root/g; sync'
x a -- sh -c 'echo a-only >/root/h; sync'
is "a does not see b's write" "$(x a -- sh -c 'cat /root/g 2>/dev/null || echo none')" none
is "b does not see a's write" "$(x b -- sh -c 'cat /root/h 2>/dev/null || echo none')" none
is "a still has its file" "$(x a -- cat /root/f)" before

out=$(netctl sandbox fork b c d 2>&1)
is "netctl sandbox fork b c d: a fork of the fork, two in one call" "$?" 0
like "... c's token printed once" "$out" "sandbox c forked from b \(10\.234\.0\.[0-9]+, running\)"
like "... d's too" "$out" "sandbox d forked from b"
is "c has b's write" "$(x c -- cat /root/g)" b-only
is "c is c" "$(x c -- hostname)" c
is "d is d" "$(x d -- hostname)" d
ipc=$(netctl --json sandbox show c | json_get "$(cat)" 'j["address"]')
ipd=$(netctl --json sandbox show d | json_get "$(cat)" 'j["address"]')
check "c and d have addresses of their own ($ipc, $ipd)" test -n "$ipc" -a "$ipc" != "$ipd"
like "... c's guest has the one sandbox show names" "$(x c -- ip -4 -o addr show dev eth0)" "inet $ipc/30"
like "netctl sandbox fork of a missing sandbox: a clear error" "$(netctl sandbox fork nope z 2>&1)" "nope"

like "a fork into an id that exists: 409" "$(api -X POST -d '{"ids":["a"]}' http://b/v1/sandboxes/c/fork)" '"status": *409'
like "no ids: 400 naming the field" "$(api -X POST -d '{"ids":[]}' http://b/v1/sandboxes/c/fork)" '"field": *"ids"'
like "an unknown sandbox: 404" "$(api -X POST -d '{"ids":["z"]}' http://b/v1/sandboxes/nope/fork)" '"status": *404'
unlike "... nothing stored for the refused ids" "$(netctl sandbox ls)" '^z '

# ---- checkpoints (on c, a fork of a fork) ----
x c -- sh -c 'echo one >/root/k1; setsid sleep 7777 </dev/null >/dev/null 2>&1 & echo $! >/root/k.pid; sync'
kpid=$(x c -- cat /root/k.pid)
out=$(netctl sandbox checkpoint c k1 2>&1)
like "netctl sandbox checkpoint c k1: taken, its size said" "$out" "checkpoint k1 of sandbox c taken: [0-9.]+ [KMG]iB on disk"
like "... the pause said too" "$out" "source paused [0-9]+ ms"
x c -- sh -c "echo two >/root/k2; kill $kpid; sync"
is "after the checkpoint: the process is gone" "$(x c -- sh -c "kill -0 $kpid 2>/dev/null && echo alive || echo gone")" gone
out=$(netctl sandbox restore c k1 2>&1)
like "netctl sandbox restore c k1: running again" "$out" "sandbox c restored to checkpoint k1 \(running\)"
is "... the write before the checkpoint is there" "$(x c -- cat /root/k1)" one
is "... the write after it is gone" "$(x c -- sh -c 'cat /root/k2 2>/dev/null || echo none')" none
is "... the process killed after it is back" "$(x c -- sh -c "kill -0 $kpid && echo alive")" alive
is "... c is still c, at its address" "$(x c -- hostname) $(netctl --json sandbox show c | json_get "$(cat)" 'j["address"]')" "c $ipc"
like "... its RAM the checkpoint's image, mapped (not loaded)" "$(img_ino c)" "^[0-9]+$"
lsdoc=$(netctl --json checkpoint ls c)
is "checkpoint ls: k1 with its size" "$(json_get "$lsdoc" '" ".join("%s:%s" % (k["name"], k["size_bytes"] > 4096) for k in j["checkpoints"])')" "k1:True"
out=$(netctl sandbox create e --from c:k1 2>&1)
etok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
like "sandbox create e --from c:k1" "$out" "sandbox e created from checkpoint k1 of c \(10\.234\.0\.[0-9]+, running\)"
is "... e has the checkpoint's file, not the later one" "$(x e -- sh -c 'cat /root/k1; cat /root/k2 2>/dev/null || echo none')" "one
none"
like "... its RAM the checkpoint's image, mapped (not loaded)" "$(img_ino e)" "^[0-9]+$"
check "... and the checkpoint kept its state" test -e "$STATE/vms/.checkpoints/c/k1.state"
is "... e is e" "$(x e -- hostname)" e
like "a second checkpoint k1: 409 naming it" "$(api -X POST -d '{"name":"k1"}' http://b/v1/sandboxes/c/checkpoints)" '"status": *409.*already|already.*"status": *409'
out=$(netctl sandbox restore c nope 2>&1)
check "restore to a missing checkpoint: exit 1" test $? = 1
like "... the CLI names it" "$out" "no checkpoint 'nope'"
like "create --from a missing checkpoint: 404" "$(api -X POST -d '{"ids":["f"],"checkpoint":"nope"}' http://b/v1/sandboxes/c/fork)" '"status": *404'
like "a bad checkpoint name: 400" "$(api -X POST -d '{"name":"Bad_Name"}' http://b/v1/sandboxes/c/checkpoints)" '"field": *"name"'
netctl sandbox checkpoint c k2 >/dev/null 2>&1
out=$(netctl sandbox checkpoint c k3 2>&1)
like "past vm_max_checkpoints (2): refused, naming the limit" "$out" "vm_max_checkpoints"
out=$(netctl checkpoint rm c k1 2>&1)
like "checkpoint rm c k1" "$out" "checkpoint k1 of sandbox c removed"
is "... it is no longer listed" "$(netctl --json checkpoint ls c | json_get "$(cat)" '" ".join(k["name"] for k in j["checkpoints"])')" k2
is "... e made from it still reads its file" "$(x e -- cat /root/k1)" one

# ---- a fork of a suspended sandbox does not wake it ----
st() { netctl --json sandbox show "$1" | json_get "$(cat)" 'j["state"]'; }
out=$(netctl sandbox suspend e 2>&1) || bail "suspend e: $out"
# e maps its checkpoint's RAM image: its suspend's stream carries the
# RAM; once its standby has loaded (split), the split is the snapshot:
# the devices' part and the RAM file, the stream gone (not RAM twice)
sb_loaded() {
	[ "$(netctl --json sandbox show e | json_get "$(cat)" 'j.get("vm", {}).get("standby_memory_bytes", 0) > 0')" = True ]
}
check "... its standby has loaded" wait_for 60 sb_loaded
sz=$(stat -c %s "$STATE/vms/e/snap/state" 2>/dev/null || echo 0)
check "... its snapshot is the devices' part only ($sz bytes, < 16 MiB)" \
	test "$sz" -gt 0 -a "$sz" -lt 16777216
check "... the split's file became it" test ! -e "$STATE/vms/e/snap/state.dev"
is "... sandbox.conf says so" "$(grep -c '^snap_dev=1$' "$STATE/vms/e/sandbox.conf")" 1
out=$(netctl sandbox fork e s1 2>&1)
is "netctl sandbox fork of the suspended e into s1 (its snapshot and RAM file joined)" "$?" 0
is "... e stays suspended" "$(st e)" suspended
is "... s1 has e's file" "$(x s1 -- cat /root/k1)" one
is "... s1 is s1" "$(x s1 -- hostname)" s1
out=$(netctl sandbox resume e 2>&1)
is "... e resumes afterwards" "$?" 0
is "... with its file" "$(x e -- cat /root/k1)" one
x s1 -- sh -c 'echo s1-only >/root/s; sync'
is "... and not s1's writes" "$(x e -- sh -c 'cat /root/s 2>/dev/null || echo none')" none
# a checkpoint of the suspended s1 (a fork: its snapshot carries its
# RAM), restored after a write
out=$(netctl sandbox suspend s1 2>&1) || bail "suspend s1: $out"
out=$(netctl sandbox checkpoint s1 ss 2>&1)
like "a checkpoint of the suspended s1" "$out" "checkpoint ss of sandbox s1 taken"
is "... s1 stays suspended" "$(st s1)" suspended
x s1 -- sh -c 'echo later >/root/later; sync'
out=$(netctl sandbox restore s1 ss 2>&1)
is "... restore s1 to it" "$?" 0
is "... the write after it is gone, the one before kept" \
	"$(x s1 -- sh -c 'cat /root/later 2>/dev/null || echo none; cat /root/s')" "none
s1-only"
netctl sandbox rm s1 >/dev/null 2>&1

# ---- e's own token: its checkpoints and forks of itself, no other ----
tnet() { "$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" --token "$etok" "$@"; }
out=$(tnet sandbox checkpoint e ek 2>&1)
like "e's token takes a checkpoint of e" "$out" "checkpoint ek of sandbox e taken"
out=$(tnet sandbox fork e s2 2>&1)
check "e's token forks e (exit 0: it waits for s2 with s2's own token)" test $? = 0
like "... netctl says so" "$out" "sandbox s2 forked from e \(10\.234\.0\.[0-9]+, running\)"
like "... and gets the fork's token" "$out" "token: berth_"
out=$(tnet sandbox fork c s3 2>&1)
check "... but not another sandbox (exit 4, denied)" test $? = 4
like "... saying whose token it is" "$out" "belongs to sandbox 'e'"
netctl sandbox rm s2 >/dev/null 2>&1
netctl sandbox rm e >/dev/null 2>&1

# ---- ten forks in one call (of d) ----
ten="t0 t1 t2 t3 t4 t5 t6 t7 t8 t9"
out=$(netctl sandbox fork d $ten 2>&1)
is "netctl sandbox fork d into ten in one call" "$?" 0
names=""
for s in $ten; do names="$names $(x "$s" -- hostname 2>&1)"; done
is "... each runs as itself" "$names" " $ten"
inos=""
for s in $ten; do inos="$inos $(img_ino "$s")"; done
is "... all ten map one RAM image" "$(echo $inos | tr ' ' '\n' | sort -u | grep -c .) $(echo $inos | wc -w)" "1 10"
like "seventeen in one call: 400 naming vm_max_forks (16)" \
	"$(api -X POST -d '{"ids":["u0","u1","u2","u3","u4","u5","u6","u7","u8","u9","u10","u11","u12","u13","u14","u15","u16"]}' http://b/v1/sandboxes/d/fork)" 'vm_max_forks'
for s in $ten; do netctl sandbox rm "$s" >/dev/null 2>&1; done

# ---- twelve forks in a chain: layers merged past vm_max_layers (8) ----
layers() { netctl --json sandbox show "$1" | json_get "$(cat)" 'j["vm"]["disk"]["layers"]'; }
shallow() { [ "$(layers "$1")" -le 8 ]; }
prev=d deepest=0 chain_ok=1
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
	x "$prev" -- sh -c "echo $i >/root/gen$i; sync"
	if ! out=$(netctl sandbox fork "$prev" "h$i" 2>&1); then
		chain_ok=0
		diag "fork $prev h$i: $out; $(netctl sandbox events "h$i" 2>&1 | tail -n 4)"
		break
	fi
	wait_for 120 shallow "h$i" || { chain_ok=0; diag "h$i: $(layers "h$i") layers"; }
	wait_for 120 shallow "$prev" || { chain_ok=0; diag "$prev: $(layers "$prev") layers"; }
	[ "$prev" != d ] && netctl sandbox rm "$prev" >/dev/null 2>&1
	prev=h$i
done
is "twelve forks in a chain: each one's disk at most 8 layers" "$chain_ok" 1
is "... the last has every generation's file" \
	"$(x h12 -- sh -c 'cat /root/gen1 /root/gen6 /root/gen12' | tr '\n' ' ')" "1 6 12 "
like "... merges happened, the sandboxes running on" \
	"$(grep 'merged its disk' "$BERTHD_LOG")" "running on: disk layers (9|1[0-9]) -> 2"
unlike "... none of the chain stopped or was suspended meanwhile" \
	"$(grep -E 'sandbox (d|h[0-9]+): running -> ' "$BERTHD_LOG")" "-> (stopped|suspended|failed)"
dl=$(netctl --json sandbox show h12 | json_get "$(cat)" 'j["vm"]["disk"]')
like "sandbox show: its disk's layers and bytes owned and shared" "$dl" '"owned_bytes": [1-9]'
like "/metrics: disk bytes per sandbox, owned and shared" "$(api http://b/metrics)" 'berth_sandbox_disk_bytes\{sandbox="h12",kind="shared"\} [1-9]'
netctl sandbox rm h12 >/dev/null 2>&1

# ---- a clone of the ready snapshot merged: its qemu names the frozen
# base /base.qcow2 (jailed), its headers the host's path ----
ck_ok=1
for i in 1 2 3 4 5 6 7 8; do
	out=$(netctl sandbox checkpoint a "m$i" 2>&1) || { ck_ok=0; diag "checkpoint a m$i: $out"; break; }
	netctl checkpoint rm a "m$i" >/dev/null 2>&1 || { ck_ok=0; diag "checkpoint rm a m$i"; break; }
done
is "eight checkpoints of a (a ready snapshot's clone) taken and removed" "$ck_ok" 1
check "... its disk merged back to at most 8 layers" wait_for 120 shallow a
like "... a merge of a said so" "$(grep 'sandbox a: merged its disk' "$BERTHD_LOG")" "disk layers (9|1[0-9]) -> 2"
unlike "... no merge of a failed" "$(grep 'sandbox a: merge failed' "$BERTHD_LOG")" "failed"
is "... a still has its file" "$(x a -- cat /root/f)" before
out=$(netctl sandbox suspend a 2>&1 && netctl sandbox resume a 2>&1)
check "... a suspended and resumed after it (its chain read from the headers)" test $? = 0
is "... and still has its file" "$(x a -- cat /root/f)" before

# ---- berthd killed (-9) while a fork's capture runs ----
doc=$(api -X POST -d '{"ids":["k9"]}' http://b/v1/sandboxes/b/fork)
like "fork b into k9: accepted" "$doc" '"id": *"k9"'
kids=$(for p in $(berthd_workers); do [ "$(cat /proc/$p/comm 2>/dev/null)" = berthd ] && echo $p; done)
kill -KILL "$BERTHD_PID" $kids
wait_gone 10 "$BERTHD_PID" || bail "berthd survived kill -9"
start_berthd
# adopted: running, or paused if it was caught stopped (a definite state
# either way; a capture's stop is continued)
runs_b() { case $(st b) in running|paused) true ;; *) false ;; esac; }
check "after kill -9 mid-fork and a restart, b is running (or paused)" wait_for 120 runs_b
diag "b after the restart: $(st b)"
is "... answers as b, its files there" "$(x b -- sh -c 'hostname; cat /root/g')" "b
b-only"
k9st=$(st k9 2>/dev/null)
case $k9st in
running) ok "... k9 came to be before the kill: running" ;;
failed) like "... k9 did not: failed, saying why" "$(netctl sandbox events k9 2>&1)" "never made|was creating" ;;
*) not_ok "... k9 is in a definite state (got '$k9st')" ;;
esac
check "... no qemu for a k9 that is not running" \
	sh -c "[ '$k9st' = running ] || ! pgrep -f '[n]ame berth-k9 ' >/dev/null"
netctl sandbox rm k9 >/dev/null 2>&1

check "frozen layers in .layers while forks stand on them" \
	sh -c "ls '$STATE'/vms/.layers/*.qcow2 >/dev/null 2>&1"
netctl sandbox rm a >/dev/null 2>&1
check "a's layer stays when a goes (b and c stand on it)" \
	sh -c "ls '$STATE'/vms/.layers/a.*.qcow2 >/dev/null 2>&1"
is "b still reads a's file" "$(x b -- cat /root/f)" before
for s in b c d; do netctl sandbox rm "$s" >/dev/null 2>&1; done
check "c's checkpoints went with it" wait_for 60 test ! -e "$STATE/vms/.checkpoints/c"
no_layers() { ! ls "$STATE"/vms/.layers/*.qcow2 >/dev/null 2>&1 && ! ls "$STATE"/vms/.layers/*.state >/dev/null 2>&1; }
check "with every fork gone, no layer or captured state is left" wait_for 60 no_layers
done_testing
