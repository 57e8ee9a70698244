#!/bin/sh
# tests/integ/egress-limits.sh — ops' per-sandbox limits in table
# `inet berth` against real packets, inside network namespaces this
# script creates (its own nftables; the host's table is never touched):
#   guest1 (10.201.0.2/30) and guest2 (10.201.0.6/30) behind veth "taps"
#   lmtapA/lmtapB of namespace host, which routes to namespace net
#   (203.0.113.2/24). Listeners and clients are nc_drive's own.
# Asserts: with a connection cap of 3, a guest holding 3 connections gets
# a fast reset for the 4th and 5th (to any destination), each logged as
# "conn-limit"; another guest is not affected; re-applying the sandbox's
# rules in one batch (clear + attach + allow) keeps its count; closing
# the connections frees the quota. With a rate of 5 new connections/s,
# a burst of 30 connects gets about one second's worth through and the rest
# fast resets logged as "rate-limit"; denied connects do not use up the
# quota; the bucket refills. Detach removes the guest's limit state.
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
H=bl-host-$S G1=bl-g1-$S G2=bl-g2-$S N=bl-net-$S
PIDS= LOG= TMPD=
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
# expect DESC NS WANT PROBE-ARGS...: a probe from NS ends WANT
# (open|refused|unreach|timeout).
# The outcome is the assertion: a reset or an ICMP error comes back as
# refused or unreach, long before the probe's timeout (2 s unless given),
# and a drop as timeout. The time is shown, not judged (a loaded machine
# is slow; bench-nft measures it).
expect() {
	_d=$1 _ns=$2 _want=$3; shift 3
	_r=$(ip netns exec "$_ns" "$DRIVE" probe "$@" 2>&1)
	_got=${_r%% *} _ms=${_r#* }
	if [ "$_got" = "$_want" ]; then
		ok "$_d ($_got in $_ms ms)"
	else
		nok "$_d"; diag "got '$_r', want '$_want'"
	fi
}
# until SECS CMD...: poll CMD every 50 ms until it succeeds or SECS pass
until_ok() {
	_end=$(( $(date +%s) + $1 )); shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
}
waitfile() {	# FILE PATTERN SECS
	until_ok "$3" grep -q "$2" "$1"
}
listen() {	# NS ADDR SPEC...
	_ns=$1; shift
	_f=$TMPD/listen.$#.$_ns
	ip netns exec "$_ns" "$DRIVE" listen "$@" >"$_f" 2>&1 &
	PIDS="$PIDS $!"
	waitfile "$_f" ready 10 || { cat "$_f" >&2; echo "Bail out! listener"; exit 1; }
}
opens() { ip netns exec "$1" "$DRIVE" probe tcp "$2" "$3" --timeout 500 | grep -q '^open '; }
# count WORD FILE: lines of FILE starting with WORD
count() { grep -c "^$1 " "$2"; }
# none_timed_out FILE: no connect in a `conns` output ran into its timeout (a
# refusal is a reset or an ICMP error, never a drop waited out)
none_timed_out() { ! grep -q '^timeout ' "$1"; }

# ---- topology ----------------------------------------------------------
set -e
for ns in $G1 $G2 $N; do ip netns add "$ns"; done
for ns in $H $G1 $G2 $N; do ip -n "$ns" link set lo up; done
ip link add lmtapA netns "$H" type veth peer name eth0 netns "$G1"
ip link add lmtapB netns "$H" type veth peer name eth0 netns "$G2"
ip link add up0 netns "$H" type veth peer name eth0 netns "$N"
ip -n "$H" addr add 10.201.0.1/30 dev lmtapA
ip -n "$H" addr add 10.201.0.5/30 dev lmtapB
ip -n "$H" addr add 203.0.113.1/24 dev up0
ip -n "$G1" link set eth0 address 02:00:0a:c9:00:02
ip -n "$G2" link set eth0 address 02:00:0a:c9:00:06
ip -n "$G1" addr add 10.201.0.2/30 dev eth0
ip -n "$G2" addr add 10.201.0.6/30 dev eth0
ip -n "$N" addr add 203.0.113.2/24 dev eth0
for l in lmtapA lmtapB up0; do ip -n "$H" link set "$l" up; done
for ns in $G1 $G2 $N; do ip -n "$ns" link set eth0 up; done
ip -n "$G1" route add default via 10.201.0.1
ip -n "$G2" route add default via 10.201.0.5
ip -n "$H" route add default via 203.0.113.2
inh sysctl -qw net.ipv4.ip_forward=1
set +e

LOG=$TMPD/nflog
ip netns exec "$H" "$DRIVE" nflog 9 >"$LOG" 2>&1 &
PIDS="$PIDS $!"
waitfile "$LOG" ready 10 || { echo "Bail out! nflog reader"; exit 1; }
listen "$N" 0.0.0.0 tcp:80 hold:9000 tcp:9100
G1MAC=02:00:0a:c9:00:02 G2MAC=02:00:0a:c9:00:06 GA=10.201.0.2 GB=10.201.0.6
attach_both() {
	drive attach lmtapA $GA $G1MAC 10.201.0.1 allowlist &&
	drive attach lmtapB $GB $G2MAC 10.201.0.5 open &&
	drive allow $GA 203.0.113.2:80/tcp &&
	drive allow $GA 203.0.113.2:9000/tcp &&
	drive allow $GA 203.0.113.0/24:7000-7100/tcp
}
# logged DESC PATTERN: a line of the denial log matches (it is written
# asynchronously: poll for it)
logged() {
	if until_ok 5 grep -Eq -- "$2" "$LOG"; then ok "denial log: $1"
	else nok "denial log: $1"; diag "$(cat "$LOG")"; fi
}

# ---- connection cap ----------------------------------------------------
check "init with a connection cap of 3" \
	drive init --uplink up0 --tap-prefix lmtap --group 9 --conn-limit 3
tbl=$(inh nft list table inet berth 2>&1)
case $tbl in
*"ct state new add @sb_conns { ip saddr ct count over 3 }"*"goto log_conn_limit"*)
	ok "chain admit: ct state new add @sb_conns { ip saddr ct count over 3 } ... goto log_conn_limit" ;;
*) nok "chain admit has the ct count rule"; diag "$tbl" ;;
esac
case $tbl in
*"over 3 concurrent connections of this sandbox"*) ok "... with a comment that explains it" ;;
*) nok "ct count rule commented"; diag "$tbl" ;;
esac
case $(inh nft list chain inet berth admit 2>&1) in
*"limit rate"*) nok "no rate rule without a rate"; diag "$tbl" ;;
*) ok "no rate rule without a rate" ;;
esac
check "attach guest1 (allowlist, two allow rules) and guest2 (open)" attach_both

H1=$TMPD/hold1
ip netns exec "$G1" "$DRIVE" conns 203.0.113.2 9000 5 --hold --timeout 2000 >"$H1" 2>&1 &
HOLD=$!
PIDS="$PIDS $HOLD"
if waitfile "$H1" held 15; then ok "guest1 made 5 connects and holds what opened"
else nok "guest1 made 5 connects"; diag "$(cat "$H1")"; fi
is_n() {	# DESC GOT WANT
	if [ "$2" = "$3" ]; then ok "$1"; else nok "$1"; diag "got '$2', want '$3'" "$(cat "$H1")"; fi
}
is_n "cap 3: the first 3 connections open" "$(head -n 3 "$H1" | grep -c '^open ')" 3
is_n "cap 3: the 4th and 5th are refused" "$(sed -n '4,5p' "$H1" | grep -c '^refused ')" 2
check "... by a reset, not a timeout" none_timed_out "$H1"
expect "cap is per sandbox, any destination: guest1 to :80 refused while it holds 3" \
	"$G1" refused tcp 203.0.113.2 80
expect "guest2 is not affected by guest1's cap" "$G2" open tcp 203.0.113.2 80
logged "conn-limit tcp 9000 (reason, guest, destination, port, protocol)" \
	'^[0-9]+\.[0-9]{6} conn-limit 10\.201\.0\.2 203\.0\.113\.2 9000 tcp in=lmtapA out=up0$'
logged "conn-limit for the other destination too" \
	'conn-limit 10\.201\.0\.2 203\.0\.113\.2 80 tcp in=lmtapA '
c=$(inh nft list set inet berth sb_conns 2>&1)
case $c in
*"10.201.0.2 ct count over 3"*) ok "sb_conns holds guest1's element" ;;
*) nok "sb_conns holds guest1's element"; diag "$c" ;;
esac
check "re-apply guest1's policy in one batch (clear + attach + allow, a range rule too)" \
	drive reattach lmtapA $GA $G1MAC 10.201.0.1 allowlist 203.0.113.2:80/tcp \
	203.0.113.2:9000/tcp 203.0.113.0/24:7000-7100/tcp
n_allow=$(drive count allow_net)
if [ "$n_allow" = 1 ]; then ok "... the range rule is there once (deleted and added in the same batch)"
else nok "range rule once in allow_net"; diag "allow_net has $n_allow elements"; fi
expect "... its connection count is kept: still refused" "$G1" refused tcp 203.0.113.2 80
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
if until_ok 10 opens "$G1" 203.0.113.2 80; then ok "connections closed: guest1 connects again"
else nok "connections closed: guest1 connects again"; fi

# ---- new-connection rate ------------------------------------------------
check "init with 5 new connections/s (no cap); re-attach" \
	sh -c "ip netns exec $H $DRIVE init --uplink up0 --tap-prefix lmtap --group 9 --rate 5"
check "re-attach both guests" attach_both
tbl=$(inh nft list chain inet berth admit 2>&1)
case $tbl in
*"ct state new update @sb_rate { ip saddr"*"limit rate over 5/second"*"goto log_rate_limit"*) ok "chain admit: ct state new update @sb_rate { ip saddr limit rate over 5/second } ... goto log_rate_limit" ;;
*) nok "chain admit has the rate rule"; diag "$tbl" ;;
esac
case $tbl in
*"ct count"*) nok "no ct count rule without a cap"; diag "$tbl" ;;
*) ok "no ct count rule without a cap" ;;
esac
R=$TMPD/rate-denied
ip netns exec "$G1" "$DRIVE" conns 203.0.113.2 9100 20 --timeout 2000 >"$R" 2>&1
is_n2() { if [ "$2" = "$3" ]; then ok "$1"; else nok "$1"; diag "got '$2', want '$3'" "$(cat "$4")"; fi; }
is_n2 "20 connects to a port not on the list: all refused (not-allowed)" "$(count refused "$R")" 20 "$R"
R=$TMPD/rate
ip netns exec "$G1" "$DRIVE" conns 203.0.113.2 80 30 --timeout 2000 >"$R" 2>&1
o=$(count open "$R") f=$(count refused "$R")
# The bucket holds one second's worth (5) and refills 5/s; the denied
# connects use none. A burst takes well under a second on a quiet machine;
# a loaded one is slower, and the bucket refills meanwhile: at most 5 plus
# what the burst's own duration (nc_drive's "elapsed") refilled, plus one.
el=$(sed -n 's/^elapsed //p' "$R")
most=$(awk -v e="${el:-0}" 'BEGIN { printf "%d", 5 + int(e / 1000 * 5) + 1 }')
if [ "$o" -ge 5 ] && [ "$o" -le "$most" ]; then
	ok "rate 5/s: of 30 quick connects $o opened in $el ms (a bucket of 5, at most $most with its refill)"
else nok "rate 5/s: 5-$most of 30 connects open"; diag "open $o, refused $f" "$(cat "$R")"; fi
is_n2 "the rest are refused" "$((o + f))" 30 "$R"
check "... by a reset, not a timeout" none_timed_out "$R"
expect "guest2 has its own bucket" "$G2" open tcp 203.0.113.2 80
logged "rate-limit tcp 80" 'rate-limit 10\.201\.0\.2 203\.0\.113\.2 80 tcp in=lmtapA '
if until_ok 5 opens "$G1" 203.0.113.2 80; then ok "the bucket refills: guest1 connects again"
else nok "the bucket refills"; fi
c=$(inh nft list set inet berth sb_rate 2>&1)
case $c in
*"10.201.0.2"*"limit rate over 5/second"*) ok "sb_rate holds guest1's bucket" ;;
*) nok "sb_rate holds guest1's bucket"; diag "$c" ;;
esac

# ---- detach ------------------------------------------------------------
check "detach guest1" drive detach lmtapA $GA
left=$(inh nft list table inet berth | grep -E '10\.201\.0\.2([^0-9]|$)')
if [ -z "$left" ]; then ok "detach leaves nothing of guest1, limit state included"
else nok "detach leaves nothing of guest1"; diag "$left"; fi

echo "1..$n"
[ "$fails" -eq 0 ]
