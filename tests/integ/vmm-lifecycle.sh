#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# vmm-lifecycle: one sandbox's whole life through libvmm (driven by
# tests/integ/vmm_drive on an event loop), inside a private network
# namespace, with qemu microvm under TCG:
#   create (tap, /30, disk, boot) -> HTTP from the namespace -> a file on
#   /data -> pause (no answer) -> resume (cont) -> idle policy pauses it ->
#   suspend onto a full tmpfs fails and the guest keeps running -> suspend
#   (no process left, snapshot on disk) -> resume (same guest processes,
#   same boot, the file) -> corrupt snapshot -> resume fails, `failed` ->
#   start (second boot, the disk kept) -> kill -9 qemu -> `failed` event ->
#   delete (no tap, process or file left).
# Prints the measured pause, resume, suspend and restore times.
# Two VM boots in all (each 6-15 s of TCG). Needs root, /dev/net/tun,
# qemu; otherwise exits 77 with the reason on stderr.

skip() { echo "$*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "vmm-lifecycle needs root (taps, network namespaces)"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
for t in qemu-system-x86_64 ip curl mkfs.ext4 nsenter cpio gzip; do
	command -v $t >/dev/null 2>&1 || skip "$t not installed"
done

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-.}
export top_builddir
drive=$top_builddir/tests/integ/vmm_drive
[ -x "$drive" ] || skip "$drive not built (make check builds it)"

ns=berth-vmmlc-$$
# The state dir must be on a disk (a RAM file on tmpfs frees nothing on
# suspend) and short (unix socket paths).
tmp=$(mktemp -d /var/tmp/vmmlc.XXXXXX)
state=$tmp/st
# qemu runs as an unprivileged user (least privilege) when there is one:
# it must be able to pass through $tmp to its sandbox dir and template.
if id nobody >/dev/null 2>&1; then
	VMM_RUN_AS=nobody
	export VMM_RUN_AS
	chmod 711 "$tmp"
fi
out=$tmp/out
dpid= hpid=

cleanup() {
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null
	[ -n "$hpid" ] && kill "$hpid" 2>/dev/null
	# Every qemu of this test has $tmp in its command line.
	for p in $(pgrep -f -- "qemu-system-x86_64 .*$tmp/" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
	ip netns del "$ns" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns ip link set lo up

n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; fail=1; }
check() { if eval "$1"; then ok "$2"; else nok "$2"; fi; }
bail() {
	echo "Bail out! $*"
	[ -f "$out" ] && tail -n 20 "$out" >&2
	for f in "$state"/*/console.log "$state"/*/vmm.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
	done
	exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

echo "1..28"

if sh "$top_srcdir/vmm/guest/mktemplate" "$tmp/tpl" >"$tmp/mk.log" 2>&1; then
	ok "mktemplate builds the default template"
else
	cat "$tmp/mk.log" >&2
	bail "mktemplate failed"
fi

# The driver reads commands from a FIFO that a sleeping holder keeps open.
mkfifo "$tmp/in"
sleep 100000 >"$tmp/in" &
hpid=$!
start_drive() {
	ip netns exec "$ns" "$drive" "$state" <"$tmp/in" >"$out" 2>>"$tmp/drive.err" &
	dpid=$!		# ip netns exec execs the driver: same pid
}
start_drive

send() { echo "$*" >"$tmp/in"; }
# await TAG SECONDS: print the driver's answer line for TAG.
await() {
	i=0
	while :; do
		line=$(grep -m 1 "^$1 " "$out")
		[ -n "$line" ] && { echo "$line"; return 0; }
		kill -0 "$dpid" 2>/dev/null || { cat "$tmp/drive.err" >&2; return 1; }
		i=$((i + 1))
		[ $i -le $(($2 * 20)) ] || return 1
		sleep 0.05
	done
}
# await_event PATTERN SECONDS
await_event() {
	i=0
	while ! grep -q "^event .*$1" "$out"; do
		i=$((i + 1))
		[ $i -le $(($2 * 20)) ] || return 1
		sleep 0.05
	done
	grep -m 1 "^event .*$1" "$out"
}
field() { echo "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }
reason() { echo "$1" | sed -n 's/.* reason=//p'; }

wait_drive() {
	i=0
	while ! grep -q '^ready' "$out" 2>/dev/null; do
		kill -0 "$dpid" 2>/dev/null || { cat "$tmp/drive.err" >&2; bail "vmm_drive died"; }
		i=$((i + 1)); [ $i -le 100 ] || bail "vmm_drive not ready"
		sleep 0.05
	done
}
wait_drive
ok "manager up: $(head -n 1 "$out")"

# ---- create: tap + /30 + disk + boot ----
send "c1 create sb1 $tmp/tpl 256"
r=$(await c1 120) || bail "create did not answer"
case "$r" in
"c1 ok create sb1 state=running"*) ok "create -> running in $(field "$r" ms) ms (boot under TCG)" ;;
*) bail "create: $r" ;;
esac

send "i1 info sb1"
info=$(await i1 5)
gip=$(field "$info" ip); gw=$(field "$info" gw); tap=$(field "$info" tap)
mac=$(field "$info" mac); qpid=$(field "$info" pid)
tapinfo=$(in_ns ip -o addr show dev "$tap" 2>&1)
case "$tapinfo" in
*"inet $gw/30"*) ok "tap $tap carries the gateway $gw/30 (guest $gip, MAC $mac)" ;;
*) nok "tap $tap: '$tapinfo'" ;;
esac
quser=$(ps -o user= -p "$qpid" 2>/dev/null)
check '[ -z "${VMM_RUN_AS:-}" ] || [ "$quser" = "$VMM_RUN_AS" ]' \
    "qemu runs as ${quser:-?} with -sandbox on"

base=http://$gip:8080
get() { in_ns curl -sS -m 10 "$@"; }
got=$(get "$base/healthz")
check '[ "$got" = ok ]' "guest answers /healthz over the tap"

token=vmmlc-$$-$(date +%s)
got=$(printf '%s' "$token" | get -T - "$base/files/persist.txt")
case "$got" in
*'"bytes":'*) ok "file written under /data" ;;
*) nok "file write: '$got'" ;;
esac
info1=$(get "$base/info")
pid1=$(echo "$info1" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
boot1=$(echo "$info1" | sed -n 's/.*"boot_id":"\([^"]*\)".*/\1/p')

# ---- pause / resume (memory kept) ----
send "p1 pause sb1"
r=$(await p1 30)
pause_ms=$(field "$r" ms)
check 'case "$r" in "p1 ok pause sb1 state=paused"*) true;; *) false;; esac' \
    "pause -> paused in ${pause_ms} ms"
t0=$(now_ms)
got=$(in_ns curl -sS -m 1 "$base/healthz" 2>/dev/null)
check '[ -z "$got" ] && kill -0 "$qpid" 2>/dev/null' \
    "paused: no answer within 1 s, qemu (pid $qpid) still there"

send "r1 resume sb1"
r=$(await r1 30)
cont_ms=$(field "$r" ms)
got=$(get "$base/healthz")
check 'case "$r" in "r1 ok resume sb1 state=running"*) [ "$got" = ok ];; *) false;; esac' \
    "resume (cont) -> running in ${cont_ms} ms, served again"

# ---- idle policy: pause after 1 s without activity ----
send "x1 idle sb1 1000 -1"
e=$(await_event "op=pause ok=1 state=paused .*cause=idle" 10)
check '[ -n "$e" ]' "idle policy paused it after 1 s ($e)"
send "x2 idle sb1 -1 -1"
send "r2 resume sb1"
r=$(await r2 30)
check 'case "$r" in "r2 ok"*) true;; *) false;; esac' "resumed after the idle pause"

# ---- suspend that cannot write its snapshot ----
# The driver (and qemu) live in the mount namespace of `ip netns exec`:
# mount the full tmpfs there.
snapdir=$state/sb1/snap
if nsenter -t "$dpid" -m sh -c "mount -t tmpfs -o size=64k berth-full '$snapdir' &&
    dd if=/dev/zero of='$snapdir/fill' bs=4k count=64 2>/dev/null; true"; then
	send "s0 suspend sb1"
	r=$(await s0 30)
	got=$(get "$base/healthz")
	case "$r" in
	"s0 fail suspend sb1 state=running"*"No space left"*)
		[ "$got" = ok ] && ok "suspend onto a full disk fails, guest keeps running: $(reason "$r")" ||
		    nok "after the failed suspend: '$got'" ;;
	*) nok "suspend on a full tmpfs: $r" ;;
	esac
	nsenter -t "$dpid" -m umount "$snapdir"
else
	nok "cannot mount a tmpfs in the driver's mount namespace"
fi

# ---- suspend: snapshot, no process, memory freed ----
rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$qpid/status" 2>/dev/null)
send "s1 suspend sb1"
r=$(await s1 60)
susp_ms=$(field "$r" ms)
check 'case "$r" in "s1 ok suspend sb1 state=suspended"*) true;; *) false;; esac' \
    "suspend -> suspended in ${susp_ms} ms"
snapsz=$(stat -c %s "$snapdir/state" 2>/dev/null)
check '! kill -0 "$qpid" 2>/dev/null && [ -n "$snapsz" ] && [ "$(stat -f -c %T "$state")" != tmpfs ]' \
    "qemu gone (its RSS was ${rss:-?} kB, now freed), snapshot ${snapsz:-missing} bytes + RAM file on disk"
send "i2 info sb1"
info=$(await i2 5)
check '[ "$(field "$info" pid)" = 0 ] && [ -e "$state/sb1/mem" ] && [ ! -e "$state/sb1/qmp.sock" ]' \
    "suspended: no pid, no control socket, RAM file kept"

# ---- resume from suspended: same processes, same boot, same file ----
t0=$(now_ms)
send "r3 resume sb1"
r=$(await r3 60)
restore_ms=$(field "$r" ms)
got=$(get "$base/healthz")
first_ms=$(($(now_ms) - t0))
check 'case "$r" in "r3 ok resume sb1 state=running"*) [ "$got" = ok ];; *) false;; esac' \
    "resume from suspended -> running in ${restore_ms} ms (first HTTP answer after ${first_ms} ms)"
info2=$(get "$base/info")
pid2=$(echo "$info2" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
boot2=$(echo "$info2" | sed -n 's/.*"boot_id":"\([^"]*\)".*/\1/p')
check '[ -n "$pid1" ] && [ "$pid1" = "$pid2" ] && [ "$boot1" = "$boot2" ]' \
    "guest processes survived (testapp pid $pid1 = $pid2, same boot id)"
got=$(get "$base/files/persist.txt")
check '[ "$got" = "$token" ]' "the /data file is there after the resume"

# ---- the manager dies (kill -9) and a new one re-adopts the VM ----
send "i5 info sb1"
qpid=$(field "$(await i5 5)" pid)
kill -9 "$dpid"
{ wait "$dpid"; } 2>/dev/null
start_drive
wait_drive
send "a1 adopt"
r=$(await a1 10)
e=$(await_event "op=adopt ok=1 state=running" 10)
send "i6 info sb1"
info=$(await i6 5)
got=$(get "$base/healthz")
check '[ -n "$e" ] && [ "$(field "$info" pid)" = "$qpid" ] && [ "$got" = ok ] &&
    [ "$(pgrep -fc -- "qemu-system-x86_64 .*$state/sb1/")" = 1 ]' \
    "kill -9 of the manager: a new one re-adopts qemu pid $qpid, still serving, no second qemu ($r)"

# ---- a corrupt snapshot: resume fails, `failed` with the reason ----
send "s2 suspend sb1"
r=$(await s2 60)
case "$r" in
"s2 ok"*)
	# Flip bytes after the header: the device state no longer parses.
	sz=$(stat -c %s "$snapdir/state")
	dd if=/dev/urandom of="$snapdir/state" bs=1 seek=64 count=$((sz / 2)) \
	    conv=notrunc 2>/dev/null
	send "r4 resume sb1"
	r=$(await r4 60)
	case "$r" in
	"r4 fail resume sb1 state=failed"*) ok "corrupt snapshot: resume fails -> failed: $(reason "$r")" ;;
	*) nok "corrupt snapshot: $r" ;;
	esac
	;;
*) nok "second suspend: $r" ;;
esac

# ---- start again: a fresh boot from the same disk ----
send "b2 start sb1"
r=$(await b2 120)
check 'case "$r" in "b2 ok start sb1 state=running"*) true;; *) false;; esac' \
    "start from failed -> running in $(field "$r" ms) ms (second boot)"
got=$(get "$base/files/persist.txt")
info3=$(get "$base/info")
boot3=$(echo "$info3" | sed -n 's/.*"boot_id":"\([^"]*\)".*/\1/p')
check '[ "$got" = "$token" ] && [ -n "$boot3" ] && [ "$boot3" != "$boot1" ]' \
    "a new boot, and the /data file survived it"

# ---- qemu killed behind our back ----
send "i3 info sb1"
info=$(await i3 5)
qpid=$(field "$info" pid)
kill -9 "$qpid"
e=$(await_event "op=exit ok=0 state=failed" 5)
check '[ -n "$e" ]' "kill -9 qemu -> event at once: $(reason "$e")"

# ---- delete: nothing left behind ----
send "d1 delete sb1"
r=$(await d1 30)
check 'case "$r" in "d1 ok delete sb1"*) true;; *) false;; esac' "delete -> ok ($(field "$r" ms) ms)"
left=$(pgrep -f -- "$state/sb1" 2>/dev/null)
check '! in_ns ip link show "$tap" >/dev/null 2>&1 && [ -z "$left" ] && [ ! -e "$state/sb1" ]' \
    "no tap $tap, no qemu, no $state/sb1 left"
send "i4 info sb1"
r=$(await i4 5)
check 'case "$r" in *"no sandbox sb1"*) true;; *) false;; esac' "the manager forgot sb1"

send "q quit"
await q 5 >/dev/null
# The driver frees the manager and exits 0 (a sanitizer build fails here
# on leaks or memory errors).
wait "$dpid"
rc=$?
dpid=
check '[ $rc = 0 ] && ! grep -q Sanitizer "$tmp/drive.err"' \
    "the driver exits cleanly (status $rc)"
[ $rc = 0 ] || tail -n 30 "$tmp/drive.err" >&2
echo "# times: pause ${pause_ms} ms, resume(cont) ${cont_ms} ms, suspend ${susp_ms} ms, resume(restore) ${restore_ms} ms, restore->first HTTP answer ${first_ms} ms"
exit $fail
