#!/bin/sh
# fleet-move.sh — a sandbox moves between two hosts of a fleet (issue 33,
# item 3): hosts a and b run VMs (qemu, TCG; the minimal template) and
# register in one etcd on loopback. A sandbox made on a, with a file
# written in its guest, a published port and an egress rule, is moved to
# b (`netctl sandbox move`): suspended, its files streamed over the fleet
# channel, adopted by b. Its URL then answers from b (Berth-Host: b)
# through b's edge and a's, the file is there, a's files are gone, and
# its port, token and egress rule are b's. Refused with a clear word: a
# move to a host the fleet does not know, of a sandbox a does not hold.
# And a target killed while the files stream: the sandbox stays on a,
# suspended, and wakes there; a source that dies before its commit
# (a fault injected): the target adopts it once the source's lease is
# gone, and the source, back, drops its copy. A sandbox of a template
# version the target lacks: the version is copied with it.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool etcd
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

FV=bmv FV_POOL_a=10.227.0.0/24 FV_POOL_b=10.228.0.0/24
. "$(dirname "$0")/fleet-vm.sh"
host_conf a "vm_template minimal" "vm_disk 64"
# (b takes no sandbox past 256 MiB: the drain below has one it cannot move)
host_conf b "vm_template minimal" "vm_disk 64" "vm_max_memory 256"
start_host a
start_host b

# ---- the move ----
# made on a by name: placement could put it on b (the more room)
out=$(nc_ a sandbox create mv --host a) || bail "sandbox create: $out"
like "a VM sandbox runs on host a" "$out" 'sandbox mv created .*running'
nc_ a port publish mv 8080 >/dev/null || bail "publish"
nc_ a egress allow mv example.com >/dev/null || bail "egress allow"
tok=$(nc_ a token create --sandbox mv --name mover | head -n 1)
wait_for 60 served a mv
out=$(nc_ a sandbox exec mv -- sh -c 'echo moved-bytes >/root/moved.txt && sync' </dev/null 2>&1)
is "a file written in the guest" "$?" 0
boot=$(via a mv /info >/dev/null; json_get "$(cat "$T/body")" 'j["boot_id"]')
nc_ a sandbox suspend mv >/dev/null || bail "suspend"
is "suspended on a" "$(state_on a mv)" suspended
files_a=$(ls "$T/a/state/vms/mv" 2>/dev/null | tr '\n' ' ')

# the move in the background; a request through a's edge once b has
# begun to take it waits for the move's end, then is answered by b
( nc_ a sandbox move mv --to b >"$T/mv1.out" 2>&1; echo $? >"$T/mv1.rc" ) &
mvpid=$!
begun() { grep -q "moves sandbox mv here" "$T/b/berthd.log" 2>/dev/null; }
wait_for 60 begun
code=$(curl -sS --max-time 90 --cacert "$T/a/state/tls/ca.pem" \
	--connect-to "::127.0.0.1:" -D "$T/hdr.during" -o "$T/body.during" \
	-w '%{http_code}' "https://8080-mv.$DOMAIN:$HTTPS_a/info" 2>/dev/null)
wait "$mvpid"
is "netctl sandbox move exits 0" "$(cat "$T/mv1.rc")" 0
like "... and says where it went" "$(cat "$T/mv1.out")" "sandbox mv moved to host b"
diag "$(cat "$T/mv1.out")"
is "a request sent during the move is answered after it" "$code" 200
like "... by b" "$(cat "$T/hdr.during")" "Berth-Host: b"
like "... which woke it" "$(cat "$T/hdr.during")" "Server-Timing: wake"
is "... the same boot" "$(json_get "$(cat "$T/body.during")" 'j["boot_id"]')" "$boot"
# at once, no waiting for the views to settle: b's claim says it moved
# from a (it wins over a's at once), and a routes it to b until it sees
# that claim
is "at once after the move, through a's edge: 200" "$(via a mv /healthz)" 200
like "... from b" "$(cat "$T/hdr")" "Berth-Host: b"
is "... through b's edge too" "$(via b mv /healthz)" 200
like "... from b" "$(cat "$T/hdr")" "Berth-Host: b"
like "b holds it (woken by that request)" "$(state_on b mv)" "^(suspended|running)$"
isnt "a holds it no more" "$(nc_ a --json sandbox show mv >/dev/null 2>&1; echo $?)" 0
gone_a() { [ ! -e "$T/a/state/vms/mv" ]; }
if wait_for 30 gone_a; then
	ok "a's files are gone (they were: $files_a)"
else
	not_ok "a's files are gone"
	diag "left: $(ls -R "$T/a/state/vms/mv" 2>&1 | head -c 500)"
fi
is "nothing left in b's move area" "$(ls "$T/b/state/vms/.move" 2>/dev/null | wc -l)" 0

b_owns() { via b mv /healthz >/dev/null; grep -q "Berth-Host: b" "$T/hdr"; }
if wait_for 60 b_owns; then
	ok "its URL through b's edge answers from b"
else
	not_ok "its URL through b's edge answers from b"
	diag "$(cat "$T/hdr" 2>/dev/null | head -20)"
fi
is "through a's edge too" "$(via a mv /info)" 200
like "... from b" "$(cat "$T/hdr")" "Berth-Host: b"
is "the same boot: restored, not booted" "$(json_get "$(cat "$T/body")" 'j["boot_id"]')" "$boot"
like "its address is b's" "$(nc_ b --json sandbox show mv | json_get "$(cat)" 'j["address"]')" '^10\.228\.0\.'
like "... given to its guest as it was woken there" \
	"$(nc_ b --json sandbox events mv | json_get "$(cat)" '" ".join(e["reason"] for e in j["events"] if e["operation"] == "wake")')" \
	"moved here: its address is now 10\.228\.0\."
out=$(nc_ b sandbox exec mv -- cat /root/moved.txt </dev/null 2>&1)
is "the file written on a is there on b" "$out" moved-bytes
like "its port is b's" "$(nc_ b port ls mv 2>&1)" 8080
like "its token moved with it" "$(nc_ b token ls 2>&1)" mover
like "its egress rule too" "$(nc_ b egress show mv 2>&1)" example.com
is "its events too: made and suspended on a, then its move here" \
	"$(nc_ b --json sandbox events mv | json_get "$(cat)" '" ".join(sorted(set(e["operation"] for e in j["events"] if e["operation"] in ("create", "suspend")))) + " / " + "; ".join(e["operation"] + ": " + e["reason"] for e in j["events"] if e["operation"] == "move")')" \
	"create suspend / move: here from host a"
tok_ok() { [ -n "$tok" ] && [ "$("$NETCTL" --url "https://api.$DOMAIN:$CTL_b" \
	--cacert "$T/b/state/tls/ca.pem" --token "$tok" --json sandbox show mv \
	2>/dev/null | json_get "$(cat)" 'j["id"]')" = mv ]; }
if tok_ok; then ok "the sandbox's own token works on b"; else
	not_ok "the sandbox's own token works on b"
	diag "token '$(echo "$tok" | cut -c1-10)...': $("$NETCTL" --url "https://api.$DOMAIN:$CTL_b" \
		--cacert "$T/b/state/tls/ca.pem" --token "$tok" sandbox show mv 2>&1 | head -5)"
fi

# ---- refusals ----
out=$(nc_ b sandbox move mv --to nowhere 2>&1)
rc=$?
is "a move to a host the fleet does not know: refused" "$rc" 1
like "... saying so" "$out" "no live fleet host nowhere"
out=$(nc_ b sandbox move nosuch --to a 2>&1)
rc=$?
isnt "a move of a sandbox b does not hold: refused" "$rc" 0
like "... saying so" "$out" "nosuch"
out=$(nc_ b sandbox move mv --to b 2>&1)
like "a move to its own host: refused" "$out" "on host b already"

# ---- the target killed mid-transfer ----
# Back to a first (the way it came), then b dies while a sends.
# (it ran on b, the exec above: it runs on a after the move, given
# a's address for it again)
# a request through a's edge during it goes to b (the owner then),
# waits there for the move's end, and comes back to a (once: a says it
# is the owner now) to be served
( nc_ b sandbox move mv --to a >"$T/mv2.out" 2>&1; echo $? >"$T/mv2.rc" ) &
mvpid=$!
begun_back() { grep -q "moves sandbox mv here" "$T/a/berthd.log" 2>/dev/null; }
wait_for 60 begun_back
code=$(via a mv /info)
wait "$mvpid"
[ "$(cat "$T/mv2.rc")" = 0 ] || bail "move back to a: $(cat "$T/mv2.out")"
is "a request through a's edge as mv moves from b to a: 200" "$code" 200
like "... served by a (sent back to it by b)" "$(cat "$T/hdr")" "Berth-Host: a"
running_a() { [ "$(state_on a mv)" = running ]; }
wait_for 60 running_a
is "back on a, running: it ran on b" "$(state_on a mv)" running
like "... with a's address" "$(nc_ a --json sandbox show mv | json_get "$(cat)" 'j["address"]')" '^10\.227\.0\.'
nc_ a sandbox suspend mv >/dev/null || bail "suspend mv on a"
# a slower link: the RAM file and the disk take a while; b is killed
# once a's first PUT reached it
( nc_ a sandbox move mv --to b >"$T/mv3.out" 2>&1; echo $? >"$T/mv3.rc" ) &
mvpid=$!
saw_put() { grep -q "moves sandbox mv here" "$T/b/berthd.log" 2>/dev/null &&
	[ "$(grep -c "moves sandbox mv here" "$T/b/berthd.log")" -ge 2 ]; }
wait_for 60 saw_put
# b and its workers and helpers at once: nothing of it answers
kill9 "$PID_b" $(pgrep -P "$PID_b")
wait "$mvpid"
isnt "the move to a dead target fails" "$(cat "$T/mv3.rc")" 0
diag "$(head -c 300 "$T/mv3.out")"
is "the sandbox is still a's, suspended" "$(state_on a mv)" suspended
is "it wakes on a" "$(via a mv /info)" 200
like "... served by a" "$(cat "$T/hdr")" "Berth-Host: a"
out=$(nc_ a sandbox exec mv -- cat /root/moved.txt </dev/null 2>&1)
is "its file still there" "$out" moved-bytes
# b again: what it received of the move cut short is gone, and it
# holds no sandbox mv. (b sends its files at 8 MiB/s from here, a fault
# a test injects, so that the link is cut in the middle of one below;
# it sends none before that.)
BERTH_TEST_MOVE_FAULT=slow-send
export BERTH_TEST_MOVE_FAULT
start_host b
unset BERTH_TEST_MOVE_FAULT
is "b's move area swept at its start" "$(ls "$T/b/state/vms/.move" 2>/dev/null | wc -l)" 0
isnt "b holds no mv" "$(nc_ b --json sandbox show mv >/dev/null 2>&1; echo $?)" 0

# ---- fleet drain: a's sandboxes move to b ----
# mv runs on a (woken above); d2 paused, d3 suspended, d4 stopped (a
# file on its disk, /data), d5 stopped too but of 320 MiB, more than b takes
for d in d2 d3 d4; do
	out=$(nc_ a sandbox create "$d" --host a) || bail "sandbox create $d: $out"
done
out=$(nc_ a sandbox create d5 --host a --memory 320) || bail "sandbox create d5: $out"
nc_ a sandbox pause d2 >/dev/null || bail "pause d2"
nc_ a sandbox suspend d3 >/dev/null || bail "suspend d3"
nc_ a sandbox exec d4 -- sh -c 'echo stopped-bytes >/data/d4.txt && sync' </dev/null >/dev/null 2>&1 ||
	bail "a file in d4"
nc_ a sandbox stop d4 >/dev/null || bail "stop d4"
nc_ a sandbox stop d5 >/dev/null || bail "stop d5"
is "mv runs on a before the drain" "$(state_on a mv)" running
wait_for 60 b_up || bail "a does not see b up: $(nc_ a fleet hosts 2>&1)"
nc_ a fleet drain >"$T/drain.out" 2>"$T/drain.err"
rc=$?
diag "$(cat "$T/drain.out" "$T/drain.err")"
is "netctl fleet drain exits 1: one sandbox could not move" "$rc" 1
like "... it moved the running one to b" "$(cat "$T/drain.out")" "sandbox mv moved to host b"
like "... the paused one" "$(cat "$T/drain.out")" "sandbox d2 moved to host b"
like "... the suspended one" "$(cat "$T/drain.out")" "sandbox d3 moved to host b"
like "... the stopped one (its disk)" "$(cat "$T/drain.out")" "sandbox d4 moved to host b"
like "... one b refuses stays, saying why" "$(cat "$T/drain.out")" "sandbox d5 stays: .*320 MiB"
like "... and sums up" "$(cat "$T/drain.out")" "fleet host a: 4 moved, 1 stay"
like "... the error line says how many" "$(cat "$T/drain.err")" "1 of its sandboxes could not move"
prog=$(curl -sS --max-time 10 --unix-socket "$T/a/state/control.sock" \
	http://localhost/v1/fleet/drain)
is "GET /v1/fleet/drain: done, 5 in all, none left, 4 moved" \
	"$(json_get "$prog" 'j["move"]["state"], j["move"]["total"], j["move"]["left"], len(j["move"]["moved"])')" \
	"('done', 5, 0, 4)"
like "a is drained in the fleet's view" "$(nc_ b fleet hosts 2>&1)" "a  *up, drained"
running_b() { [ "$(state_on b mv)" = running ]; }
if wait_for 60 running_b; then ok "the running one runs on b (resumed there)"; else
	not_ok "the running one runs on b (resumed there)"; diag "$(state_on b mv)"; fi
is "... the same boot" "$(via b mv /info >/dev/null; json_get "$(cat "$T/body")" 'j["boot_id"]')" "$boot"
out=$(nc_ b sandbox exec mv -- cat /root/moved.txt </dev/null 2>&1)
is "... its file there" "$out" moved-bytes
is "the paused one is on b, suspended" "$(state_on b d2)" suspended
is "the suspended one too" "$(state_on b d3)" suspended
is "the stopped one is on b, stopped" "$(state_on b d4)" stopped
out=$(nc_ b sandbox start d4 2>&1)
like "... started there: it boots from its disk" "$out" "d4"
is "... its file there" "$(nc_ b sandbox exec d4 -- cat /data/d4.txt </dev/null 2>&1)" stopped-bytes
nc_ b sandbox stop d4 >/dev/null 2>&1
is "a holds only the one b refused" "$(nc_ a --json sandbox ls | json_get "$(cat)" '" ".join(s["id"] for s in j["sandboxes"] if s.get("host") == "a")')" d5
is "b the four others" "$(nc_ a --json sandbox ls | json_get "$(cat)" '" ".join(sorted(s["id"] for s in j["sandboxes"] if s.get("host") == "b"))')" "d2 d3 d4 mv"
is "the refused one's event on a says its move failed" \
	"$(nc_ a --json sandbox events d5 | json_get "$(cat)" '" ".join(e["result"] for e in j["events"] if e["operation"]=="move")')" failed
out=$(nc_ b sandbox move d2 --to a 2>&1)
like "a move to a drained host: refused by it (507)" "$out" "fleet host a is drained: it takes no moved sandbox"
is "... d2 stays on b, suspended" "$(state_on b d2)" suspended
out=$(nc_ a fleet undrain 2>&1)
like "fleet undrain: placed on again" "$out" "fleet host a undrained"

# ---- the fleet link cut while a file goes: sent on from where it broke off ----
# b's connection to a's fleet_api_listen is destroyed (ss -K: a reset
# both ends see) once a has more than 16 MiB of d3's RAM image (b sends
# at 8 MiB/s: a fault injected); the files a has whole stay, what came
# of the cut one too: b asks how much and sends the rest, and the move
# ends well (a checks every file's sha256 against the whole one's)
FAPI_a=$(sed -n 's/^fleet_api_listen 127\.0\.0\.1://p' "$T/a/berth.conf")
( nc_ b sandbox move d3 --to a >"$T/mv4.out" 2>&1; echo $? >"$T/mv4.rc" ) &
mvpid=$!
# (its bytes written, not its length: the RAM file is sparse)
mem_a() { [ "$(stat -c '%b * %B' "$T/a/state/vms/.move/d3/mem" 2>/dev/null | sed 's/^/0 + /' |
	xargs expr 2>/dev/null || echo 0)" -gt 16777216 ] || [ -e "$T/mv4.rc" ]; }
wait_for 60 mem_a
# cut() succeeds once a connection was cut, or the move ended first
cut() { [ -e "$T/mv4.rc" ] || ss -K dst 127.0.0.1 dport = ":$FAPI_a" 2>/dev/null | grep -q ESTAB; }
wait_for 60 cut
wait "$mvpid"
if grep -q "move of d3 to a: .* while mem went: sent again from where it broke off (resume 1 of" "$T/b/berthd.log"; then
	ok "the link to a cut while d3's RAM image went: b says so"
else
	not_ok "the link to a cut while d3's RAM image went: b says so"
	diag "$(grep "d3" "$T/b/berthd.log" | tail -n 5)"
fi
held=$(sed -n 's/.*move of d3 to a: host a holds \([0-9]*\) bytes of mem: sent on from there.*/\1/p' "$T/b/berthd.log" | head -n 1)
if [ "${held:-0}" -gt 16777216 ]; then
	ok "... a says it holds $held bytes of it, and b sends on from there"
else
	not_ok "... a says it holds more than 16 MiB of it, and b sends on from there"
	diag "$(grep "d3" "$T/b/berthd.log" | tail -n 5)"
fi
is "... and the move ends well" "$(cat "$T/mv4.rc")" 0
diag "$(cat "$T/mv4.out")"
is "d3 is a's, suspended" "$(state_on a d3)" suspended
is "... and wakes there for a command" "$(nc_ a sandbox exec d3 -- echo awake </dev/null 2>&1)" awake

# ---- the source killed once its commit went: resolved at its start ----
# d3 (on a) moves to b; a is killed as b takes the commit. a's journal
# (vms/.moved/d3) says a commit went: at its start a asks b whether it
# holds d3 and, if so, drops its copy; else keeps it. Either way one
# host holds it, and it wakes there. (Whether a died before the answer
# came depends on timing: the log says which way it went.)
nc_ a sandbox suspend d3 >/dev/null || bail "suspend d3"
ncommits=$(grep -c "host a commits the move of d3" "$T/b/berthd.log")
( nc_ a sandbox move d3 --to b >"$T/mv5.out" 2>&1 ) &
mvpid=$!
committing() { [ "$(grep -c "host a commits the move of d3" "$T/b/berthd.log")" -gt "$ncommits" ]; }
wait_for 60 committing
kill9 "$PID_a" $(pgrep -P "$PID_a")
wait "$mvpid"
start_host a
on() { nc_ "$1" --json sandbox show d3 >/dev/null 2>&1 && echo 1 || echo 0; }
one_holder() { [ "$(on a)$(on b)" = 10 ] || [ "$(on a)$(on b)" = 01 ]; }
if grep -q "move of d3 to b: the commit's answer never came: this host restarted" "$T/a/berthd.log"; then
	diag "a died before b's answer: its journal was resolved at its start"
	resolved() { grep -q "fleet: host b says it holds sandbox d3" "$T/a/berthd.log" &&
		[ "$(on a)" = 0 ]; }
	wait_for 60 resolved
	like "... a asked b, which holds d3" "$(grep "d3" "$T/a/berthd.log")" "host b says it holds sandbox d3"
	like "... and dropped its copy" "$(grep "d3" "$T/a/berthd.log")" "sandbox d3 was moved before this host's restart"
else
	diag "a had b's answer before it died: no journal left ($(grep -c d3 "$T/a/berthd.log") lines of d3)"
fi
is "no journal left on a" "$(ls "$T/a/state/vms/.moved" 2>/dev/null | wc -l)" 0
wait_for 30 one_holder
is "d3 is on one host, b" "$(on a)$(on b)" 01
is "... and wakes there for a command" "$(nc_ b sandbox exec d3 -- echo awake </dev/null 2>&1)" awake

# ---- the source dies before its commit: the target adopts ----
# b is started again with a fault a test injects (it dies as a commit
# would go); d3, running on b, moves to a: suspended, its files all
# whole on a, then b is gone. Once b's lease lapses a adopts what came
# (with the records the begin brought) and resumes it (it ran on b); b,
# started again, finds its journal, asks a and drops its copy.
nc_ b sandbox suspend mv >/dev/null 2>&1
kill "$PID_b"
wait_gone 60 "$PID_b" || bail "b did not stop"
BERTH_TEST_MOVE_FAULT=before-commit
export BERTH_TEST_MOVE_FAULT
start_host b
unset BERTH_TEST_MOVE_FAULT
kids=$(pgrep -P "$PID_b")
wait_for 60 b_up || bail "a does not see b up"
nc_ b sandbox exec d3 -- echo awake </dev/null >/dev/null 2>&1
is "d3 runs on b" "$(state_on b d3)" running
nc_ b sandbox move d3 --to a >"$T/mv6.out" 2>&1
isnt "b dies before its commit (a fault injected): netctl says it failed" "$?" 0
wait_gone 30 "$PID_b" || bail "b did not die: $(tail -n 5 "$T/b/berthd.log")"
# b's workers and helpers as a kill -9 would leave them: gone too
kill9 $kids
like "b's log says so" "$(grep d3 "$T/b/berthd.log" | tail -n 3)" "dies before the commit of d3"
if wait_log 60 "$T/a/berthd.log" "host b, moving sandbox d3 here, is gone from the fleet before its commit" ""; then
	ok "a adopts d3 once b's lease is gone"
else
	not_ok "a adopts d3 once b's lease is gone"
	diag "$(grep d3 "$T/a/berthd.log" | tail -n 5)"
fi
runs_a() { [ "$(state_on a d3)" = running ]; }
wait_for 60 runs_a
is "... and resumes it there (it ran on b)" "$(state_on a d3)" running
is "... for a command" "$(nc_ a sandbox exec d3 -- echo awake </dev/null 2>&1)" awake
like "its event says how it came" "$(nc_ a sandbox events d3 2>&1)" "here from host b .gone before its commit"
start_host b
asked() { grep -q "fleet: host a says it holds sandbox d3" "$T/b/berthd.log" &&
	[ "$(on b)" = 0 ]; }
wait_for 60 asked
like "b, started again, asks a, which holds d3" "$(grep d3 "$T/b/berthd.log")" "host a says it holds sandbox d3"
is "... and drops its copy" "$(on a)$(on b)" 10
is "no journal left on b" "$(ls "$T/b/state/vms/.moved" 2>/dev/null | wc -l)" 0

# ---- a template version the target lacks: copied with the move ----
# t2, on a only: a's template with an initramfs of other bytes (an empty
# cpio archive appended as a second gzip member, which the kernel reads
# past). A sandbox of it made on a moves to b, which holds no t2: b is
# sent the version's files with the sandbox's, keeps them as
# templates/t2/vm-<version>/, registers t2 with them, and the sandbox
# wakes there over them; moved back, a (which holds that version) is
# sent none of them.
wait_for 60 b_up || bail "a does not see b up again"
cp -r "$T/a/state/templates/default" "$T/t2" || bail "cp template"
printf '' | cpio -o -H newc 2>/dev/null | gzip -n >>"$T/t2/initramfs.cpio.gz"
chmod -R a+rX "$T/t2"
nc_ a template add t2 "$T/t2" >/dev/null || bail "template add t2"
out=$(nc_ a sandbox create tv --host a --template t2 2>&1) || bail "create tv: $out"
nc_ a sandbox exec tv -- sh -c 'echo t2-bytes >/root/t2.txt && sync' </dev/null >/dev/null 2>&1
nc_ a sandbox suspend tv >/dev/null || bail "suspend tv"
out=$(nc_ a sandbox move tv --to b 2>&1)
is "a sandbox of a template b lacks moves there" "$?" 0
diag "$out"
like "b copied that version of the template first" "$(grep 't2' "$T/b/berthd.log")" \
	"template t2: version [0-9a-f]{12} copied here by a move"
like "... and registered t2 with it" "$(nc_ b template ls 2>&1)" "t2"
like "its event on b says so" "$(nc_ b sandbox events tv 2>&1)" \
	"here from host a; template t2 version [0-9a-f]{12} copied"
like "it stands on the copy" "$(grep '^initrd=' "$T/b/state/vms/tv/sandbox.conf" 2>&1)" \
	"/templates/t2/vm-[0-9a-f]{64}/initrd.img$"
is "... and wakes on b for a command: the file written on a" \
	"$(nc_ b sandbox exec tv -- cat /root/t2.txt </dev/null 2>&1)" t2-bytes
nc_ b sandbox suspend tv >/dev/null || bail "suspend tv on b"
out=$(nc_ b sandbox move tv --to a 2>&1)
is "moved back to a" "$?" 0
unlike "... a is sent none of the template: it holds that version" \
	"$(grep 't2' "$T/a/berthd.log")" "copied here"
is "... and it wakes there" "$(nc_ a sandbox exec tv -- cat /root/t2.txt </dev/null 2>&1)" t2-bytes
nc_ a sandbox rm tv >/dev/null 2>&1

# ---- etcd stopped mid-move: the move finishes ----
# (the files and the commit go host to host; only the claims are
# etcd's, and the target's wins where it is seen, a routing d2 to b)
( nc_ b sandbox move d2 --to a >"$T/mv7.out" 2>&1; echo $? >"$T/mv7.rc" ) &
mvpid=$!
begun_d2() { grep -q "moves sandbox d2 here" "$T/a/berthd.log" 2>/dev/null; }
wait_for 60 begun_d2
kill "$ETCD_PID"
wait "$mvpid"
is "etcd stopped mid-move: the move finishes" "$(cat "$T/mv7.rc")" 0
diag "$(cat "$T/mv7.out")"
is "... d2 is a's" "$(state_on a d2)" suspended
isnt "... b's no more" "$(nc_ b --json sandbox show d2 >/dev/null 2>&1; echo $?)" 0
is "... and it wakes on a" "$(nc_ a sandbox exec d2 -- echo awake </dev/null 2>&1)" awake

# ---- etcd unreachable: no move starts ----
wait_log 60 "$T/a/berthd.log" "fleet: etcd .* unreachable" ||
	diag "a did not notice etcd gone"
out=$(nc_ a sandbox move d2 --to b 2>&1)
rc=$?
isnt "etcd unreachable: a move is refused" "$rc" 0
like "... saying why" "$out" "etcd is unreachable from this host: no move starts"
is "... d2 stays on a" "$(state_on a d2)" running
for d in mv d2 d3; do nc_ a sandbox rm "$d" >/dev/null 2>&1; nc_ b sandbox rm "$d" >/dev/null 2>&1; done
nc_ b sandbox rm d4 >/dev/null 2>&1
nc_ a sandbox rm d5 >/dev/null 2>&1
done_testing
