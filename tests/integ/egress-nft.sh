#!/bin/sh
# tests/integ/egress-nft.sh — libnetctl's table `inet berth` against real
# packets, all inside network namespaces this script creates:
#   guest1 (10.200.0.2/30) and guest2 (10.200.0.6/30) sit behind veth
#   "taps" sbtapA/sbtapB of namespace host, which runs the rules (through
#   nc_drive, never the nft tool; nft only lists) and routes to namespace
#   net (203.0.113.2-3/24; no route back to the guests, so working
#   connections prove masquerade). Listeners are nc_drive's own.
# Asserts: allowlist lets an allowed ip:port through and rejects the rest
# fast (TCP reset / ICMP admin-prohibited, not a drop waited out to a
# timeout); CIDR/port-range rules; expiry; deny beats allow; open and
# closed modes; DNS only to the gateway, DoT blocked; guest -> host,
# -> other sandbox, -> metadata rejected; spoofed IP and MAC dropped;
# detach leaves no element; an unattached tap gets nothing (fail closed);
# 1000 sandboxes leave the rule count unchanged; errors name the object;
# a private range ops permit is reachable only with a sandbox's own allow
# rule, in open mode too; the denial log (NFLOG via libnetctl) holds each
# denial with its reason and the tap it came in on: spoofed sources
# (even another guest's address) and IPv6 are logged as the sending
# tap's; a flood of 100 000 denied datagrams is logged at the tap's log
# rate and the rest counted (suppressed), without touching another
# tap's log.
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
H=bt-host-$S G1=bt-g1-$S G2=bt-g2-$S N=bt-net-$S
PIDS=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	[ -n "$LOG" ] && rm -f "$LOG"
	for ns in $H $G1 $G2 $N; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT INT TERM
ip netns add "$H" 2>/dev/null || skip "cannot create network namespaces"
ip netns exec "$H" nft list ruleset >/dev/null 2>&1 ||
	skip "nftables does not work in a namespace here"

n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /' >&2; }
inh() { ip netns exec "$H" "$@"; }
drive() { ip netns exec "$H" "$DRIVE" "$@"; }
# check DESC CMD...: passes when CMD succeeds.
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
listen() {	# NS ADDR SPEC...: start a listener, wait for its "ready"
	_ns=$1; shift
	_f=$(mktemp)
	ip netns exec "$_ns" "$DRIVE" listen "$@" >"$_f" 2>&1 &
	PIDS="$PIDS $!"
	for _i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		grep -q ready "$_f" && break
		sleep 0.05
	done
	grep -q ready "$_f" || { cat "$_f" >&2; rm -f "$_f"; echo "Bail out! listener"; exit 1; }
	rm -f "$_f"
}

# ---- topology ----------------------------------------------------------
set -e
for ns in $G1 $G2 $N; do ip netns add "$ns"; done
# The guests say nothing unasked: no IPv6 (router solicitations, MLD
# reports, DAD) but the one datagram the IPv6 check sends. A stray packet
# from a tap after its detach would be logged (fail closed) and put the
# tap back in @log_rate, which "detach leaves no element" would then see.
for ns in $G1 $G2; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 \
	    net.ipv6.conf.default.router_solicitations=0 \
	    net.ipv6.conf.default.addr_gen_mode=1
done
for ns in $H $G1 $G2 $N; do ip -n "$ns" link set lo up; done
ip link add sbtapA netns "$H" type veth peer name eth0 netns "$G1"
ip link add sbtapB netns "$H" type veth peer name eth0 netns "$G2"
ip link add up0 netns "$H" type veth peer name eth0 netns "$N"
ip -n "$H" addr add 10.200.0.1/30 dev sbtapA
ip -n "$H" addr add 10.200.0.5/30 dev sbtapB
ip -n "$H" addr add 203.0.113.1/24 dev up0
ip -n "$G1" link set eth0 address 02:00:0a:c8:00:02
ip -n "$G2" link set eth0 address 02:00:0a:c8:00:06
ip -n "$G1" addr add 10.200.0.2/30 dev eth0
ip -n "$G2" addr add 10.200.0.6/30 dev eth0
ip -n "$N" addr add 203.0.113.2/24 dev eth0
ip -n "$N" addr add 203.0.113.3/24 dev eth0
ip -n "$N" addr add 10.99.0.1/16 dev eth0
ip -n "$N" addr add 10.99.0.2/16 dev eth0
for l in sbtapA sbtapB up0; do ip -n "$H" link set "$l" up; done
for ns in $G1 $G2 $N; do ip -n "$ns" link set eth0 up; done
ip -n "$G1" route add default via 10.200.0.1
ip -n "$G2" route add default via 10.200.0.5
ip -n "$H" route add default via 203.0.113.2
inh sysctl -qw net.ipv4.ip_forward=1
set +e

# the denial log: nc_drive nflog prints "time reason src dst dport proto"
LOG=$(mktemp)
ip netns exec "$H" "$DRIVE" nflog 7 >"$LOG" 2>&1 &
PIDS="$PIDS $!"
for _i in 1 2 3 4 5 6 7 8 9 10; do grep -q ready "$LOG" && break; sleep 0.05; done

listen "$N" 0.0.0.0 tcp:80 tcp:443 tcp:8080 tcp:853 tcp:9000 udp:53 udp:5353
listen "$H" 10.200.0.1 udp:53 tcp:53 tcp:22
listen "$G2" 10.200.0.6 tcp:80
G1MAC=02:00:0a:c8:00:02 G2MAC=02:00:0a:c8:00:06
GA=10.200.0.2

# ---- table --------------------------------------------------------------
check "init builds table inet berth" \
	drive init --uplink up0 --tap-prefix sbtap --group 7 --host-addr 203.0.113.1
tbl=$(inh nft list table inet berth 2>&1)
rules0=$(drive count-rules)
c=$(printf '%s\n' "$tbl" | grep -c 'comment "')
if [ "$c" -ge "$rules0" ]; then ok "every rule carries a comment ($c comments, $rules0 rules)"
else nok "every rule carries a comment"; diag "$tbl"; fi
check "forward chain starts with flows admitted under their sandbox's current generation" \
	sh -c "printf '%s\n' \"\$1\" | grep -A3 'chain forward' | grep -q 'ct original ip saddr . ct mark @sb_cur accept'" _ "$tbl"
check "init replaces the table atomically (second init)" \
	drive init --uplink up0 --tap-prefix sbtap --group 7 --host-addr 203.0.113.1
inh sysctl -qw net.ipv4.ip_forward=0
check "forwarding on (nc_host_forwarding)" drive forwarding
is_v() { [ "$(inh sysctl -n "$1")" = "$2" ] || { echo "$1 is $(inh sysctl -n "$1"), want $2"; return 1; }; }
check "... it is" is_v net.ipv4.ip_forward 1
check "tap settings for sbtapA and sbtapB (nc_tap_harden)" sh -c \
	"ip netns exec $H $DRIVE harden sbtapA && ip netns exec $H $DRIVE harden sbtapB"
check "rp_filter strict, arp_ignore 1, arp_announce 2, no proxy_arp, no RA" sh -c \
	"$(for k in ipv4.conf.sbtapA.rp_filter=1 ipv4.conf.sbtapA.arp_ignore=1 \
	    ipv4.conf.sbtapA.arp_announce=2 ipv4.conf.sbtapA.proxy_arp=0 \
	    ipv4.conf.sbtapA.send_redirects=0 ipv6.conf.sbtapA.accept_ra=0 \
	    ipv6.conf.sbtapA.autoconf=0; do
		echo "[ \"\$(ip netns exec $H sysctl -n net.${k%=*})\" = ${k#*=} ] &&"; done) true"

# An unattached tap gets nothing: fail closed.
expect "unattached tap: dropped (fail closed)" "$G1" timeout tcp 203.0.113.2 80 --timeout 300

check "attach guest1 in allowlist mode" drive attach sbtapA $GA $G1MAC 10.200.0.1 allowlist
check "attach guest2 in open mode" drive attach sbtapB 10.200.0.6 $G2MAC 10.200.0.5 open
check "allow 203.0.113.2:80/tcp" drive allow $GA 203.0.113.2:80/tcp

# ---- allowlist ------------------------------------------------------------
expect "allowlist: allowed ip:port connects (masqueraded: net has no route back)" \
	"$G1" open tcp 203.0.113.2 80
expect "allowlist: other port refused by TCP reset, fast" "$G1" refused tcp 203.0.113.2 443
expect "allowlist: other address refused fast" "$G1" refused tcp 203.0.113.3 80
expect "allowlist: UDP denied by ICMP admin-prohibited, fast" "$G1" unreach udp 203.0.113.2 5353
check "CIDR + port range rule 203.0.113.0/24:8000-9000/tcp" drive allow $GA 203.0.113.0/24:8000-9000/tcp
expect "range rule: 203.0.113.3:8080 connects" "$G1" open tcp 203.0.113.3 8080
expect "range rule: 203.0.113.3:443 still refused" "$G1" refused tcp 203.0.113.3 443
check "allow 203.0.113.2:443/tcp for 1s" drive allow $GA 203.0.113.2:443/tcp --for 1s
expect "expiring rule: connects while valid" "$G1" open tcp 203.0.113.2 443
sleep 1.3
expect "expiring rule: refused after expiry" "$G1" refused tcp 203.0.113.2 443

# ---- deny beats allow ------------------------------------------------------
check "deny 203.0.113.2:80/tcp" drive deny $GA 203.0.113.2:80/tcp
expect "deny beats allow" "$G1" refused tcp 203.0.113.2 80
check "undeny 203.0.113.2:80/tcp" drive undeny $GA 203.0.113.2:80/tcp
expect "allowed again after the deny is removed" "$G1" open tcp 203.0.113.2 80
check "deny 203.0.113.0/24 (any port) in open mode" drive deny 10.200.0.6 203.0.113.0/24
expect "open mode: deny rule still beats it" "$G2" refused tcp 203.0.113.2 80
check "undeny it" drive undeny 10.200.0.6 203.0.113.0/24

# ---- modes -----------------------------------------------------------------
check "mode open" drive mode $GA open
expect "open: any public ip:port connects" "$G1" open tcp 203.0.113.3 443
expect "open: DNS to an outside resolver denied" "$G1" unreach udp 203.0.113.2 53
expect "open: DNS over TLS denied" "$G1" refused tcp 203.0.113.2 853
expect "open: cloud metadata 169.254.169.254 refused" "$G1" refused tcp 169.254.169.254 80
expect "open: private range 10.9.9.9 refused" "$G1" refused tcp 10.9.9.9 80
expect "open: host's own uplink address refused" "$G1" refused tcp 203.0.113.1 22
expect "open: sandbox to sandbox refused" "$G1" refused tcp 10.200.0.6 80
expect "guest to host (gateway, not DNS) refused" "$G1" refused tcp 10.200.0.1 22
expect "guest DNS to its gateway (udp) allowed" "$G1" open udp 10.200.0.1 53
expect "guest DNS to its gateway (tcp) allowed" "$G1" open tcp 10.200.0.1 53
expect "guest2 cannot use guest1's gateway for DNS" "$G2" refused tcp 10.200.0.1 53
check "mode closed" drive mode $GA closed
expect "closed: allowed ip:port refused too" "$G1" refused tcp 203.0.113.2 80
check "mode allowlist" drive mode $GA allowlist
expect "allowlist again: allowed ip:port connects" "$G1" open tcp 203.0.113.2 80

# ---- spoofing ----------------------------------------------------------------
ip -n "$G1" addr add 10.200.0.9/32 dev eth0
expect "spoofed source address dropped (no reset, no answer)" "$G1" timeout \
	tcp 203.0.113.2 80 --bind 10.200.0.9 --timeout 300
cnt=$(inh nft list chain inet berth prerouting | grep 'spoofed source' | sed -n 's/.*packets \([0-9]*\).*/\1/p')
if [ "${cnt:-0}" -gt 0 ]; then ok "spoof-ip counter counted it ($cnt)"; else nok "spoof-ip counter counted it"; fi
ip -n "$G1" addr del 10.200.0.9/32 dev eth0
# guest2 claims guest1's address: dropped, and logged as guest2's doing
ip -n "$G2" addr add 10.200.0.2/32 dev eth0
expect "guest2 spoofing guest1's address: dropped" "$G2" timeout \
	tcp 203.0.113.2 80 --bind 10.200.0.2 --timeout 300
ip -n "$G2" addr del 10.200.0.2/32 dev eth0
# IPv6 from a guest: dropped and logged (sandboxes have no IPv6)
ip netns exec "$G1" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0
ip -n "$G1" addr add 2001:db8::2/64 dev eth0 nodad
ip -n "$H" addr add 2001:db8::1/64 dev sbtapA nodad
# a neighbor entry: the guest's neighbor solicitation is dropped as well
ip -n "$G1" -6 neigh replace 2001:db8::1 dev eth0 lladdr \
	"$(ip -n "$H" -o link show sbtapA | sed -n 's|.*link/ether \([0-9a-f:]*\).*|\1|p')"
check "guest sends one IPv6 datagram" ip netns exec "$G1" "$DRIVE" send6 2001:db8::1 5555
ip -n "$G1" addr del 2001:db8::2/64 dev eth0
ip netns exec "$G1" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
ip -n "$G1" link set eth0 address 02:00:0a:c8:00:99
expect "spoofed MAC dropped" "$G1" timeout tcp 203.0.113.2 80 --timeout 300
ip -n "$G1" link set eth0 address $G1MAC
inh ip neigh flush dev sbtapA
expect "real MAC works again" "$G1" open tcp 203.0.113.2 80

# ---- ARP: a guest speaks it only as itself, only with its gateway ---------------
if command -v busybox >/dev/null 2>&1; then
	inh ip neigh flush dev sbtapA
	check "guest1 ARPs for its gateway as itself: answered" \
		ip netns exec "$G1" busybox arping -c 1 -w 2 -I eth0 10.200.0.1
	if ip netns exec "$G1" busybox arping -c 2 -w 2 -I eth0 -s 10.200.0.9 10.200.0.1 >/dev/null 2>&1; then
		nok "guest1 ARPs with another sender address: not answered"
	else ok "guest1 ARPs with another sender address: not answered"; fi
	if ip netns exec "$G1" busybox arping -c 2 -w 2 -I eth0 10.200.0.5 >/dev/null 2>&1; then
		nok "guest1 ARPs for the host's other address (guest2's gateway): not answered"
	else ok "guest1 ARPs for the host's other address (guest2's gateway): not answered"; fi
	left=$(inh ip neigh show dev sbtapA | grep 10.200.0.9)
	if [ -z "$left" ]; then ok "the host learned no neighbour for the forged sender"
	else nok "the host learned no neighbour for the forged sender"; diag "$left"; fi
	cnt=$(inh nft list chain arp berth input | grep 'any other ARP' | sed -n 's/.*packets \([0-9]*\).*/\1/p')
	if [ "${cnt:-0}" -ge 2 ]; then ok "arp berth dropped them ($cnt)"; else nok "arp berth dropped them"; diag "$cnt"; fi
else
	ok "# SKIP ARP checks: no busybox arping"
fi

# ---- errors name the object --------------------------------------------------
out=$(drive allow $GA 203.0.113.0/25:8050/tcp 2>&1)
case $out in
*"allow rule '203.0.113.0/25:8050/tcp'"*"allow_net"*"overlaps"*) ok "overlapping rule refused, error names rule and set" ;;
*) nok "overlapping rule refused, error names rule and set"; diag "$out" ;;
esac
out=$(drive mode 10.200.0.77 open 2>&1)
case $out in
*"10.200.0.77"*"sb_mode"*"No such file"*) ok "mode of an unknown sandbox: error names it" ;;
*) nok "mode of an unknown sandbox: error names it"; diag "$out" ;;
esac

# ---- scale: 1000 sandboxes, same rules -----------------------------------------
out=$(drive bulk 1000 2>&1)
if [ $? -eq 0 ]; then ok "attach 1000 sandboxes in one batch ($out)"; else nok "attach 1000 sandboxes"; diag "$out"; fi
rules1=$(drive count-rules)
if [ "$rules1" = "$rules0" ] && [ "$(drive count sb_mode)" = 1002 ]; then
	ok "1002 sandboxes, still $rules1 rules (per-packet cost does not grow)"
else nok "rule count constant"; diag "rules $rules0 -> $rules1, sb_mode $(drive count sb_mode)"; fi
expect "traffic still policed with 1002 sandboxes" "$G1" refused tcp 203.0.113.2 443
expect "and allowed traffic still flows" "$G1" open tcp 203.0.113.2 80

# ---- a flood of denials: logged at the tap's log rate, the rest counted -------------
sup0=$(drive suppressed sbtapB)
out=$(ip netns exec "$G2" "$DRIVE" flood 10.9.9.9 7777 100000)
ms=${out##* }
sleep 0.3
logged_n=$(grep -c 'always-deny 10\.200\.0\.6 10\.9\.9\.9 7777 udp in=sbtapB' "$LOG")
sup=$(( $(drive suppressed sbtapB) - sup0 ))
max=$(( 40 + 20 * (ms / 1000 + 1) + 20 ))
if [ "$logged_n" -ge 1 ] && [ "$logged_n" -le "$max" ]; then
	ok "100000 denied datagrams in $ms ms: $logged_n logged (the tap's rate: 20/s, burst 40)"
else nok "flood logged at the tap's rate"; diag "$out: $logged_n logged, at most $max wanted"; fi
if [ $((logged_n + sup)) -eq 100000 ]; then ok "the other $sup are counted for the tap (suppressed)"
else nok "the rest are counted as suppressed"; diag "logged $logged_n + suppressed $sup != 100000"; fi
is_g1() { [ "$(drive suppressed sbtapA)" = "$1" ]; }
sa=$(drive suppressed sbtapA)
expect "guest1's own denials are still logged meanwhile" "$G1" refused tcp 203.0.113.2 4444
sleep 0.1
if grep -q 'not-allowed 10\.200\.0\.2 203\.0\.113\.2 4444 tcp in=sbtapA' "$LOG" && is_g1 "$sa"; then
	ok "... (another tap's log rate is its own)"
else nok "another tap's log rate is its own"; diag "suppressed sbtapA: $sa -> $(drive suppressed sbtapA)"; fi

# ---- detach ---------------------------------------------------------------------
check "detach guest1" drive detach sbtapA $GA
left=$(inh nft list table inet berth | grep -E "10\.200\.0\.2 |10\.200\.0\.2$|10\.200\.0\.2,|sbtapA")
if [ -z "$left" ]; then ok "detach leaves no element of guest1"; else nok "detach leaves no element"; diag "$left"; fi
left=$(inh nft list table arp berth | grep -E "sbtapA")
if [ -z "$left" ]; then ok "... in table arp berth neither"; else nok "... in table arp berth neither"; diag "$left"; fi
expect "detached tap gets nothing (fail closed)" "$G1" timeout tcp 203.0.113.2 80 --timeout 300
expect "guest2 unaffected" "$G2" open tcp 203.0.113.3 443
# ---- a range ops permit: allowed only by a sandbox's own rule ------------------
check "init: ops permit 10.99.0.0/16; guest2 open, guest1 allowlist with allow 10.99.0.1:80/tcp" \
	drive init --uplink up0 --tap-prefix sbtap --group 7 --host-addr 203.0.113.1 \
	--permit 10.99.0.0/16 --sandbox "sbtapB,10.200.0.6,$G2MAC,10.200.0.5,open" \
	--sandbox "sbtapA,$GA,$G1MAC,10.200.0.1,allowlist,10.99.0.1:80/tcp"
expect "permit: an open-mode sandbox without a rule cannot reach 10.99.0.1" "$G2" refused tcp 10.99.0.1 80
expect "permit: one with an allow rule can" "$G1" open tcp 10.99.0.1 80
expect "permit: only what its rule names" "$G1" refused tcp 10.99.0.2 80
check "guest2 gets a rule of its own" drive allow 10.200.0.6 10.99.0.1:80/tcp
expect "permit: now guest2 reaches 10.99.0.1:80" "$G2" open tcp 10.99.0.1 80
expect "permit: and still not 10.99.0.2 (no rule)" "$G2" refused tcp 10.99.0.2 80
expect "permit: outside the permitted range, private stays denied" "$G2" refused tcp 10.9.9.9 80
expect "open mode: public addresses need no rule" "$G2" open tcp 203.0.113.3 443

check "final init empties every set" sh -c "ip netns exec $H $DRIVE init && [ \"\$(ip netns exec $H $DRIVE count sb_mode)\" = 0 ]"

# ---- denial log ------------------------------------------------------------------
sleep 0.1
logged() {	# DESC PATTERN
	if grep -Eq -- "$2" "$LOG"; then ok "denial log: $1"
	else nok "denial log: $1"; diag "$(cat "$LOG")"; fi
}
logged "not-allowed tcp 443 (time, reason, guest, dst, port, proto, tap)" \
	'^[0-9]+\.[0-9]{6} not-allowed 10\.200\.0\.2 203\.0\.113\.2 443 tcp in=sbtapA out=up0$'
logged "not-allowed udp" 'not-allowed 10\.200\.0\.2 203\.0\.113\.2 5353 udp in=sbtapA '
logged "metadata" 'always-deny 10\.200\.0\.2 169\.254\.169\.254 80 tcp in=sbtapA '
logged "outside DNS" 'dns 10\.200\.0\.2 203\.0\.113\.2 53 udp in=sbtapA '
logged "DoT" 'dns 10\.200\.0\.2 203\.0\.113\.2 853 tcp in=sbtapA '
logged "sandbox to sandbox" 'sandbox 10\.200\.0\.2 10\.200\.0\.6 80 tcp in=sbtapA out=sbtapB$'
logged "guest to host" 'host 10\.200\.0\.2 10\.200\.0\.1 22 tcp in=sbtapA out=-$'
logged "deny rule" 'deny-rule 10\.200\.0\.2 203\.0\.113\.2 80 tcp in=sbtapA '
logged "closed mode" 'closed 10\.200\.0\.2 203\.0\.113\.2 80 tcp in=sbtapA '
logged "spoofed source: by the tap it came in on, whatever it claims" \
	'spoof-ip 10\.200\.0\.9 203\.0\.113\.2 80 tcp in=sbtapA '
logged "spoofed MAC" 'spoof-mac 10\.200\.0\.2 203\.0\.113\.2 80 tcp in=sbtapA '
logged "a permitted range without a rule (open mode)" \
	'not-allowed 10\.200\.0\.6 10\.99\.0\.1 80 tcp in=sbtapB '
logged "guest2 spoofing guest1's address: logged on guest2's tap" \
	'spoof-ip 10\.200\.0\.2 203\.0\.113\.2 80 tcp in=sbtapB '
logged "an IPv6 packet from a guest, with its addresses and port" \
	'ipv6 2001:db8::2 2001:db8::1 5555 ipv6 in=sbtapA '

echo "1..$n"
[ "$fails" -eq 0 ]
