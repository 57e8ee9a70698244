#!/bin/sh
# tests/integ/egress-cut.sh — tightening a sandbox's egress cuts the
# connections it no longer allows, at once, and nothing else. All inside
# network namespaces this script creates (the host's table is never
# touched):
#   guest1 (10.202.0.2/30) and guest2 (10.202.0.6/30) behind veth "taps"
#   ctapA/ctapB of namespace host, which runs table inet berth (nc_drive)
#   and routes to namespace net (203.0.113.2-3/24), where nc_drive
#   listeners hold every connection open.
# Each live flow is an `nc_drive stream`: a guest connection that sends a
# line every 250 ms and reports when and how it broke.
# Asserts: an allow rule removed, a deny rule added, mode closed, a
# stricter global policy (the table rebuilt in one batch) and a detach
# each cut the flow they take access from within 1 s (a reset, the
# guest sees ECONNRESET), while another flow of the same sandbox that is
# still allowed goes on; detach leaves the tap nothing (dropped); loosening (a rule added, a deny removed, a
# wider mode) changes no generation and disturbs no flow; a rule that
# expired in the kernel cuts its flow at the next recheck; detach
# deletes the guest's conntrack entries, so the next sandbox on that
# address inherits none; another sandbox's flows are never touched.
# Exit 77 (skip) without root, ip netns or nft.
# SPDX-License-Identifier: GPL-2.0-or-later

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
DRIVE=${NC_DRIVE:-$top_builddir/tests/integ/nc_drive}

skip() { echo "$*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, nftables)"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) not installed"
command -v nft >/dev/null 2>&1 || skip "nft not installed (used only to list)"
[ -x "$DRIVE" ] || skip "$DRIVE not built (make check builds it)"

S=$$
H=bc-host-$S G1=bc-g1-$S G2=bc-g2-$S N=bc-net-$S
PIDS= TMPD=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	[ -n "$TMPD" ] && rm -rf "$TMPD"
	for ns in $H $G1 $G2 $N; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT INT TERM
ip netns add "$H" 2>/dev/null || skip "cannot create network namespaces"
ip netns exec "$H" nft list ruleset >/dev/null 2>&1 ||
	skip "nftables does not work in a namespace here"
TMPD=$(mktemp -d)

n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /' >&2; }
inh() { ip netns exec "$H" "$@"; }
drive() { ip netns exec "$H" "$DRIVE" "$@"; }
check() {
	_d=$1; shift
	if _o=$("$@" 2>&1); then ok "$_d"; else nok "$_d"; diag "$_o"; fi
}
is() {
	if [ "$2" = "$3" ]; then ok "$1"; else nok "$1"; diag "got '$2', want '$3'"; fi
}
until_ok() {	# SECS CMD...: poll every 50 ms
	_end=$(( $(date +%s) + $1 )); shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
}
listen() {	# NS ADDR SPEC...
	_ns=$1; shift
	_f=$TMPD/listen.$_ns.$#
	ip netns exec "$_ns" "$DRIVE" listen "$@" >"$_f" 2>&1 &
	PIDS="$PIDS $!"
	until_ok 5 grep -q ready "$_f" || { cat "$_f" >&2; echo "Bail out! listener"; exit 1; }
}
# stream NAME NS IP PORT: a live flow, its report in $TMPD/NAME
stream() {
	ip netns exec "$2" "$DRIVE" stream "$3" "$4" --interval 250 >"$TMPD/$1" 2>&1 &
	PIDS="$PIDS $!"
	eval "PID_$1=\$!"
	if until_ok 5 grep -Eq '^(open|failed)' "$TMPD/$1" && grep -q '^open' "$TMPD/$1"; then
		ok "flow $1: $3:$4 open"
	else
		nok "flow $1: $3:$4 open"; diag "$(cat "$TMPD/$1")"
	fi
}
now() { date +%s.%N; }
# cut DESC NAME T0: flow NAME broke by a reset within 1 s of T0
cut() {
	if until_ok 3 grep -q '^cut' "$TMPD/$2"; then
		_l=$(grep '^cut' "$TMPD/$2")
		_dt=$(echo "$_l" | awk -v t0="$3" '{ printf "%.3f", $2 - t0 }')
		if awk -v d="$_dt" 'BEGIN { exit !(d <= 1.0) }' &&
		    echo "$_l" | grep -q 'reset'; then
			ok "$1 ($2 reset after ${_dt} s)"
		else
			nok "$1"; diag "$_l (after $_dt s, want a reset within 1 s)"
		fi
	else
		nok "$1"; diag "flow $2 still running: $(cat "$TMPD/$2")"
	fi
}
# alive DESC NAME...: the flows have not broken
alive() {
	_d=$1; shift
	_bad=
	for _s in "$@"; do grep -q '^cut' "$TMPD/$_s" && _bad="$_bad $_s"; done
	if [ -z "$_bad" ]; then ok "$_d"; else nok "$_d"; diag "broke:$_bad"; fi
}
gens() { inh nft list set inet berth sb_cur | grep -o 'elements = .*'; }

# ---- topology ----------------------------------------------------------
set -e
for ns in $G1 $G2 $N; do ip netns add "$ns"; done
for ns in $H $G1 $G2 $N; do ip -n "$ns" link set lo up; done
ip link add ctapA netns "$H" type veth peer name eth0 netns "$G1"
ip link add ctapB netns "$H" type veth peer name eth0 netns "$G2"
ip link add up0 netns "$H" type veth peer name eth0 netns "$N"
ip -n "$H" addr add 10.202.0.1/30 dev ctapA
ip -n "$H" addr add 10.202.0.5/30 dev ctapB
ip -n "$H" addr add 203.0.113.1/24 dev up0
ip -n "$G1" link set eth0 address 02:00:0a:ca:00:02
ip -n "$G2" link set eth0 address 02:00:0a:ca:00:06
ip -n "$G1" addr add 10.202.0.2/30 dev eth0
ip -n "$G2" addr add 10.202.0.6/30 dev eth0
ip -n "$N" addr add 203.0.113.2/24 dev eth0
ip -n "$N" addr add 203.0.113.3/24 dev eth0
for l in ctapA ctapB up0; do ip -n "$H" link set "$l" up; done
for ns in $G1 $G2 $N; do ip -n "$ns" link set eth0 up; done
ip -n "$G1" route add default via 10.202.0.1
ip -n "$G2" route add default via 10.202.0.5
ip -n "$H" route add default via 203.0.113.2
inh sysctl -qw net.ipv4.ip_forward=1
set +e

listen "$N" 0.0.0.0 hold:9100 hold:9101 hold:9102 hold:9103 hold:80
GA=10.202.0.2 GB=10.202.0.6
SBA="ctapA,$GA,02:00:0a:ca:00:02,10.202.0.1"
SBB="ctapB,$GB,02:00:0a:ca:00:06,10.202.0.5"
INIT="--uplink up0 --tap-prefix ctap --group 9 --host-addr 203.0.113.1"

check "table with guest1 (allowlist) and guest2 (open) in one batch" \
	drive init $INIT --sandbox "$SBA,allowlist,203.0.113.2:9100-9199/tcp,203.0.113.3:9100/tcp" \
	--sandbox "$SBB,open"
check "first rule of forward: flows admitted under their sandbox's generation" \
	sh -c "ip netns exec $H nft list chain inet berth forward | grep -A2 'hook forward' | grep -q 'ct original ip saddr . ct mark @sb_cur accept'"

# ---- loosening touches nothing ---------------------------------------------
stream a1 "$G1" 203.0.113.2 9100
stream b1 "$G1" 203.0.113.3 9100
stream o1 "$G2" 203.0.113.2 9103
g0=$(gens)
check "allow another rule (loosening)" drive allow $GA 203.0.113.2:80/tcp
check "deny a rule" drive deny $GA 203.0.113.3:80/tcp
g1=$(gens)
check "and remove the deny again (loosening)" drive undeny $GA 203.0.113.3:80/tcp
is "loosening gives no sandbox a new generation" "$(gens)" "$g1"
if [ "$g0" != "$g1" ]; then ok "adding a deny rule gave guest1 a new generation"
else nok "adding a deny rule gave guest1 a new generation"; diag "$g0"; fi
sleep 0.6
alive "every flow goes on through loosening and an unrelated deny" a1 b1 o1

# ---- an allow rule removed ---------------------------------------------------
t0=$(now)
check "remove allow 203.0.113.2:9100-9199/tcp" drive unallow $GA 203.0.113.2:9100-9199/tcp
cut "rule removal cuts the flow it allowed" a1 "$t0"
sleep 0.6
alive "the flow another rule still allows goes on" b1
alive "another sandbox's flow is not touched" o1
conns=$(ip netns exec "$G1" "$DRIVE" probe tcp 203.0.113.2 9100)
case $conns in refused*) ok "and a new connection there is refused ($conns)" ;;
*) nok "and a new connection there is refused"; diag "$conns" ;; esac

# ---- a deny rule added ----------------------------------------------------------
check "allow 203.0.113.2:9101/tcp" drive allow $GA 203.0.113.2:9101/tcp
stream a2 "$G1" 203.0.113.2 9101
t0=$(now)
check "deny 203.0.113.2:9101/tcp" drive deny $GA 203.0.113.2:9101/tcp
cut "a deny rule cuts the flow it denies" a2 "$t0"
sleep 0.6
alive "... not the other" b1
check "undeny it" drive undeny $GA 203.0.113.2:9101/tcp

# ---- a stricter mode ----------------------------------------------------------------
stream a3 "$G1" 203.0.113.2 9101
t0=$(now)
check "mode closed" drive mode $GA closed
cut "mode closed cuts every flow of the sandbox" a3 "$t0"
cut "... all of them" b1 "$t0"
sleep 0.3
alive "... and no other sandbox's" o1
check "mode allowlist" drive mode $GA allowlist

# ---- open -> allowlist: what no rule allows goes ------------------------------------
stream o2 "$G2" 203.0.113.3 9102
t0=$(now)
check "guest2: open -> allowlist with allow 203.0.113.2:9103/tcp (one batch)" \
	drive reattach ctapB $GB 02:00:0a:ca:00:06 10.202.0.5 allowlist 203.0.113.2:9103/tcp
cut "a stricter mode cuts what its rules do not allow" o2 "$t0"
sleep 0.6
alive "and keeps what they do" o1

# ---- a stricter global policy: the table rebuilt in one batch ------------------------
stream a4 "$G1" 203.0.113.2 9101
stream b2 "$G1" 203.0.113.3 9100
t0=$(now)
check "global deny 203.0.113.2/32, table and sandboxes rebuilt in one batch" \
	drive init $INIT --deny 203.0.113.2/32 \
	--sandbox "$SBA,allowlist,203.0.113.2:9100-9199/tcp,203.0.113.3:9100/tcp" \
	--sandbox "$SBB,allowlist,203.0.113.3:9102/tcp"
cut "the global deny cuts the flow to 203.0.113.2" a4 "$t0"
cut "guest2's flow to an address it lost is cut too" o1 "$t0"
sleep 0.6
alive "the flow to 203.0.113.3 goes on across the rebuild" b2
check "global deny lifted" drive init $INIT \
	--sandbox "$SBA,allowlist,203.0.113.2:9100-9199/tcp,203.0.113.3:9100/tcp" \
	--sandbox "$SBB,allowlist,203.0.113.3:9102/tcp"
sleep 0.6
alive "lifting it (a rebuild) does not disturb the flow either" b2

# ---- what expires in the kernel: cut at the next recheck ------------------------------
check "allow 203.0.113.3:9102/tcp for 1s" drive allow $GA 203.0.113.3:9102/tcp --for 1s
stream a5 "$G1" 203.0.113.3 9102
sleep 1.3
t0=$(now)
check "recheck guest1 (what berthd's timer does after an expiry)" drive recheck $GA
cut "the expired rule's flow is cut by the recheck" a5 "$t0"
sleep 0.6
alive "... the other flows of the sandbox go on" b2

# ---- detach, and the next sandbox on that address ------------------------------------
c=$(drive ct-count $GA)
if [ "${c:-0}" -ge 1 ]; then ok "conntrack holds guest1's flows ($c)"; else nok "conntrack holds guest1's flows"; diag "$c"; fi
check "detach guest1" drive detach ctapA $GA
is "detach deleted every conntrack entry of guest1" "$(drive ct-count $GA)" 0
r=$(ip netns exec "$G1" "$DRIVE" probe tcp 203.0.113.3 9100 --timeout 300)
case $r in timeout*) ok "the detached tap gets nothing through (dropped: $r)" ;;
*) nok "the detached tap gets nothing through"; diag "$r" ;; esac
sleep 0.3
is "its live flow made no new conntrack entry either" "$(drive ct-count $GA)" 0
kill "$PID_b2" 2>/dev/null
check "a new sandbox on the same tap and address, mode open" \
	drive attach ctapA $GA 02:00:0a:ca:00:02 10.202.0.1 open
stream a6 "$G1" 203.0.113.2 9100
sleep 0.6
alive "its own flows work" a6

echo "1..$n"
[ "$fails" -eq 0 ]
