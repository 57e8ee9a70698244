#!/bin/sh
# tests/integ/egress-dns.sh — libnetctl's filtering DNS resolver with the
# nftables table, against real packets, all in namespaces this script
# creates:
#   guest (10.200.0.2/30) sits behind veth "tap" sbtapA of namespace host
#   (gateway 10.200.0.1), which runs table inet berth (nc_drive) and the
#   resolver (nc_dnsdrive serve) and routes to namespace net
#   (203.0.113.0/24): an upstream DNS server written below (python3, UDP
#   and TCP, on 203.0.113.53, logging every question it gets) and
#   nc_drive listeners on 203.0.113.10-17 ports 80 and 443 (and 9100,
#   where connections are held open).
# Asserts: before any lookup the web address is refused fast (RST); the
# guest's own resolver (getent via resolv.conf, busybox nslookup) gets the
# allowed name's address and a connection right after the answer
# succeeds (the insert, into the learned sets allow_dns_* apart from the
# rules', precedes the answer); a denied name gets NXDOMAIN,
# is reported by the denial callback and never reaches the upstream;
# AAAA is empty and never asked upstream; CNAME chains, given whole or
# one hop at a time by the upstream; the wildcard matches one label
# down only; a deny rule beats it; a port rule inserts only that port;
# an answer too big for UDP comes back with TC, over TCP whole, after
# the resolver itself fell back to TCP upstream; a dead first upstream
# is skipped; malformed queries get FORMERR, responses are not
# answered; DNS straight to the outside resolver is refused; the set
# element expires after TTL + grace and the address is refused again.
# Re-applying the sandbox (its elements cleared and rebuilt from its
# rules, as berthd does when they or the policy change) keeps the
# addresses learned for names still allowed, with their remaining
# timeout, without a new lookup; a removed name's address is refused at
# once; ops' always-deny range wins over a learned address. A live
# connection to a learned address goes on while the guest keeps asking
# and is reset within 1 s of the address expiring once it stops; a
# static rule for an address a name also resolves to stays permanent
# (its element never takes the answer's timeout) and keeps the address
# reachable after the answer expired. Tunnels: a TXT query is refused
# (only A, AAAA, CNAME, HTTPS, SVCB by default), so is a label over 40
# characters under a wildcard and a name past the cap of distinct names
# under one wildcard a minute, and a burst over the query rate; each
# refusal is logged with its reason and never reaches the upstream.
# Exit 77 (skip) without root, ip netns, nft or python3.
# SPDX-License-Identifier: GPL-2.0-or-later

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
DRIVE=${NC_DRIVE:-$top_builddir/tests/integ/nc_drive}
DNSD=${NC_DNSDRIVE:-$top_builddir/tests/integ/nc_dnsdrive}

skip() { echo "$*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, nftables)"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) not installed"
command -v nft >/dev/null 2>&1 || skip "nft not installed (used only to list)"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed (upstream DNS server)"
[ -x "$DRIVE" ] || skip "$DRIVE not built (make check builds it)"
[ -x "$DNSD" ] || skip "$DNSD not built (make check builds it)"

S=$$
H=bd-host-$S G=bd-g-$S N=bd-net-$S
PIDS=
TMP=$(mktemp -d)
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP" "/etc/netns/$G"
	for ns in $H $G $N; do ip netns del "$ns" 2>/dev/null; done
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
ing() { ip netns exec "$G" "$@"; }
drive() { ip netns exec "$H" "$DRIVE" "$@"; }
check() {
	_d=$1; shift
	if _o=$("$@" 2>&1); then ok "$_d"; else nok "$_d"; diag "$_o"; fi
}
# like DESC GOT PATTERN (grep -E)
like() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then ok "$1"
	else nok "$1"; diag "got: $2" "want: $3"; fi
}
unlike() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then nok "$1"; diag "got: $2" "must not match: $3"
	else ok "$1"; fi
}
# expect DESC WANT PROBE-ARGS...: a probe from the guest ends WANT
# (open|refused|unreach|timeout).
# The outcome is the assertion: a reset or an ICMP error comes back as
# refused or unreach, long before the probe's timeout (2 s unless given),
# and a drop as timeout. The time is shown, not judged (a loaded machine
# is slow; bench-nft measures it).
expect() {
	_d=$1 _want=$2; shift 2
	_r=$(ing "$DRIVE" probe "$@" 2>&1)
	_got=${_r%% *} _ms=${_r#* }
	if [ "$_got" = "$_want" ]; then
		ok "$_d ($_got in $_ms ms)"
	else
		nok "$_d"; diag "got '$_r', want '$_want'"
	fi
}
waitfor() {	# FILE PATTERN: up to 5 s
	for _i in $(seq 100); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
q() { ing "$DNSD" query 10.200.0.1 "$@" 2>&1; }

# ---- the upstream: a tiny authoritative server, UDP + TCP ---------------
cat >"$TMP/upstream.py" <<'EOF'
import socket, struct, sys, threading
A, CN, TXT = 1, 5, 16
Z = {
    ("allowed.test", A): [(A, 30, "203.0.113.10")],
    ("allowed.test", TXT): [(TXT, 30, "hello")],
    ("www.allowed.test", A): [(CN, 60, "edge.cdn.test"), ("edge.cdn.test", A, 60, "203.0.113.11")],
    ("hop.allowed.test", A): [(CN, 60, "target.cdn.test")],
    ("target.cdn.test", A): [(A, 60, "203.0.113.12")],
    ("a.wild.test", A): [(A, 60, "203.0.113.13")],
    ("bad.wild.test", A): [(A, 60, "203.0.113.13")],
    ("a.b.wild.test", A): [(A, 60, "203.0.113.14")],
    ("wild.test", A): [(A, 60, "203.0.113.15")],
    ("short.test", A): [(A, 1, "203.0.113.16")],
    ("brief.test", A): [(A, 4, "203.0.113.17")],
    ("denied.test", A): [(A, 60, "203.0.113.10")],
    ("big.allowed.test", A): [(A, 60, "198.51.100.%d" % i) for i in range(1, 101)],
}
def wname(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".") if l) + b"\0"
def rr(owner, t, ttl, data):
    if t == A: rd = socket.inet_aton(data)
    elif t == CN: rd = wname(data)
    else: rd = bytes([len(data)]) + data.encode()
    return wname(owner) + struct.pack(">HHIH", t, 1, ttl, len(rd)) + rd
def answer(q, proto, log):
    qid, fl, qd = struct.unpack(">HHH", q[:6])
    o, labels = 12, []
    while q[o]:
        labels.append(q[o + 1:o + 1 + q[o]].decode()); o += 1 + q[o]
    name = ".".join(labels).lower()
    qt, qc = struct.unpack(">HH", q[o + 1:o + 5])
    edns = 512
    if struct.unpack(">H", q[10:12])[0] and len(q) >= o + 5 + 11:
        edns = max(512, struct.unpack(">H", q[o + 8:o + 10])[0])
    log.write("%s %s %d\n" % (proto, name, qt)); log.flush()
    recs = Z.get((name, qt))
    rcode = 0 if recs is not None or any(k[0] == name for k in Z) else 3
    body = b""
    for r in recs or []:
        if len(r) == 3: body += rr(name, r[0], r[1], r[2])
        else: body += rr(*r)
    question = q[12:o + 5]
    msg = struct.pack(">HHHHHH", qid, 0x8580 | rcode, 1, len(recs or []), 0, 0) + question + body
    if proto == "udp" and len(msg) > edns:
        msg = struct.pack(">HHHHHH", qid, 0x8780, 1, 0, 0, 0) + question
    return msg
def udp(addr, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    while True:
        q, peer = s.recvfrom(4096)
        s.sendto(answer(q, "udp", log), peer)
def tcp(addr, log):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 53)); s.listen(16)
    while True:
        c, _ = s.accept()
        try:
            d = b""
            while len(d) < 2 or len(d) < 2 + struct.unpack(">H", d[:2])[0]:
                x = c.recv(4096)
                if not x: break
                d += x
            a = answer(d[2:], "tcp", log)
            c.sendall(struct.pack(">H", len(a)) + a)
        finally:
            c.close()
log = open(sys.argv[2], "a")
threading.Thread(target=tcp, args=(sys.argv[1], log), daemon=True).start()
threading.Thread(target=udp, args=(sys.argv[1], log), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
EOF

# ---- topology ----------------------------------------------------------
set -e
for ns in $G $N; do ip netns add "$ns"; done
for ns in $H $G $N; do ip -n "$ns" link set lo up; done
ip link add sbtapA netns "$H" type veth peer name eth0 netns "$G"
ip link add up0 netns "$H" type veth peer name eth0 netns "$N"
ip -n "$H" addr add 10.200.0.1/30 dev sbtapA
ip -n "$H" addr add 203.0.113.1/24 dev up0
ip -n "$G" link set eth0 address 02:00:0a:c8:00:02
ip -n "$G" addr add 10.200.0.2/30 dev eth0
ip -n "$N" addr add 203.0.113.2/24 dev eth0
for a in 10 11 12 13 14 15 16 17 53; do ip -n "$N" addr add 203.0.113.$a/24 dev eth0; done
ip -n "$H" link set sbtapA up
ip -n "$H" link set up0 up
ip -n "$G" link set eth0 up
ip -n "$N" link set eth0 up
ip -n "$G" route add default via 10.200.0.1
ip -n "$H" route add default via 203.0.113.2
inh sysctl -qw net.ipv4.ip_forward=1
mkdir -p "/etc/netns/$G"
printf 'nameserver 10.200.0.1\noptions timeout:2 attempts:1\n' >"/etc/netns/$G/resolv.conf"
set +e

ip netns exec "$N" python3 "$TMP/upstream.py" 203.0.113.53 "$TMP/upstream.log" \
	>"$TMP/up.out" 2>&1 &
PIDS="$PIDS $!"
waitfor "$TMP/up.out" ready || { cat "$TMP/up.out" >&2; echo "Bail out! upstream"; exit 1; }
ip netns exec "$N" "$DRIVE" listen 0.0.0.0 tcp:80 tcp:443 hold:9100 >"$TMP/web.out" 2>&1 &
PIDS="$PIDS $!"
waitfor "$TMP/web.out" ready || { echo "Bail out! listener"; exit 1; }

check "table inet berth built" \
	drive init --uplink up0 --tap-prefix sbtap --group 7 --host-addr 203.0.113.1
check "guest attached in allowlist mode" \
	drive attach sbtapA 10.200.0.2 02:00:0a:c8:00:02 10.200.0.1 allowlist

# 203.0.113.99 is no host at all: the first upstream times out.
ip netns exec "$H" "$DNSD" serve --guest 10.200.0.2 --gw 10.200.0.1 --id sb-dns --mode allowlist \
	--tap sbtapA --mac 02:00:0a:c8:00:02 --rules "$TMP/rules" \
	--allow allowed.test --allow www.allowed.test --allow hop.allowed.test \
	--allow big.allowed.test --allow nx.allowed.test --allow '*.wild.test' \
	--deny bad.wild.test --allow short.test:80/tcp --allow brief.test:9100/tcp \
	--resolver 203.0.113.99 --resolver 203.0.113.53 --timeout-ms 300 \
	--ttl-min 1 --ttl-max 300 --grace-ms 1000 --wildcard-names 8 >"$TMP/dns.out" 2>&1 &
DNSPID=$!
PIDS="$PIDS $DNSPID"
if waitfor "$TMP/dns.out" ready; then ok "resolver listening on the gateway"
else nok "resolver listening on the gateway"; diag "$(cat "$TMP/dns.out")"; fi

# ---- before any lookup ----------------------------------------------------
expect "before a lookup: 203.0.113.10:80 refused by reset, fast" refused tcp 203.0.113.10 80

# ---- allowed name -------------------------------------------------------------
out=$(ing getent ahostsv4 allowed.test 2>&1)
like "guest's getent resolves allowed.test (past a dead first upstream)" "$out" '^203\.0\.113\.10 '
expect "right after the answer: 203.0.113.10:80 connects" open tcp 203.0.113.10 80
expect "and any port (the rule names none): 203.0.113.10:443" open tcp 203.0.113.10 443
set_net=$(inh nft list set inet berth allow_dns_net 2>&1)
like "allow_dns_net holds guest . 203.0.113.10 with a timeout (TTL 30 + 1 s grace)" \
	"$set_net" '10\.200\.0\.2 \. 203\.0\.113\.10 \. 0-255 \. 0-65535 timeout 31s'
out=$(ing busybox nslookup allowed.test 10.200.0.1 2>&1)
like "busybox nslookup gets it too" "$out" 'Address:? *203\.0\.113\.10'
out=$(q allowed.test A --tcp)
like "the same over TCP to the gateway" "$out" '^allowed\.test 30 A 203\.0\.113\.10$'
out=$(q allowed.test AAAA)
like "AAAA of an allowed name: NOERROR, no records" "$out" '^NOERROR ancount=0'
unlike "AAAA never asked upstream" "$(cat "$TMP/upstream.log")" ' 28$'
out=$(q allowed.test TXT)
like "TXT of an allowed name: REFUSED (not a type answered by default)" "$out" '^REFUSED'
unlike "... and never asked upstream" "$(cat "$TMP/upstream.log")" 'allowed\.test 16$'
waitfor "$TMP/dns.out" 'allowed\.test TXT qtype' >/dev/null
like "... and logged with reason qtype" "$(cat "$TMP/dns.out")" 'allowed\.test TXT qtype$'
out=$(q nx.allowed.test)
like "allowed but nonexistent name: the upstream's NXDOMAIN" "$out" '^NXDOMAIN'

# ---- denied name ----------------------------------------------------------------
out=$(q denied.test)
like "denied.test: NXDOMAIN" "$out" '^NXDOMAIN'
out=$(ing getent ahostsv4 denied.test 2>&1); rc=$?
if [ $rc -ne 0 ] && [ -z "$out" ]; then ok "getent denied.test fails (exit $rc)"
else nok "getent denied.test fails"; diag "$out"; fi
waitfor "$TMP/dns.out" 'denial' >/dev/null
like "denial callback: time, sandbox, guest, name, type, reason" "$(cat "$TMP/dns.out")" \
	'^denial [0-9]+\.[0-9]{6} sb-dns 10\.200\.0\.2 denied\.test A not-allowed$'
unlike "denied.test never reached the upstream" "$(cat "$TMP/upstream.log")" 'denied\.test'

# ---- CNAME chains --------------------------------------------------------------
out=$(q www.allowed.test)
like "CNAME chain returned whole" "$out" 'www\.allowed\.test 60 CNAME edge\.cdn\.test'
like "with the final A record" "$out" 'edge\.cdn\.test 60 A 203\.0\.113\.11'
expect "the chain's final address connects" open tcp 203.0.113.11 80
out=$(q edge.cdn.test)
like "the CNAME target by itself is not allowed" "$out" '^NXDOMAIN'
out=$(q hop.allowed.test)
like "upstream gave only the CNAME: the resolver asked for the target" "$out" \
	'target\.cdn\.test 60 A 203\.0\.113\.12'
like "and the upstream saw that second question" "$(cat "$TMP/upstream.log")" 'target\.cdn\.test 1$'
expect "its address connects" open tcp 203.0.113.12 80

# ---- wildcard, deny rule ----------------------------------------------------------
like "*.wild.test: a.wild.test allowed" "$(q a.wild.test)" 'a\.wild\.test 60 A 203\.0\.113\.13'
like "*.wild.test: a.b.wild.test (two labels down) denied" "$(q a.b.wild.test)" '^NXDOMAIN'
like "*.wild.test: wild.test itself denied" "$(q wild.test)" '^NXDOMAIN'
like "deny rule beats the wildcard" "$(q bad.wild.test)" '^NXDOMAIN'
waitfor "$TMP/dns.out" 'bad\.wild\.test' >/dev/null
like "deny rule reported as such" "$(cat "$TMP/dns.out")" 'bad\.wild\.test A deny-rule$'
expect "a.b.wild.test's address was never allowed" refused tcp 203.0.113.14 80

# ---- port rule ---------------------------------------------------------------------
like "short.test (rule :80/tcp) resolves" "$(q short.test)" 'short\.test 1 A 203\.0\.113\.16'
expect "short.test: port 80 connects" open tcp 203.0.113.16 80
expect "short.test: port 443 refused (the rule's port only)" refused tcp 203.0.113.16 443
like "element in allow_dns_ip with TTL 1 + 1 s grace" "$(inh nft list set inet berth allow_dns_ip)" \
	'10\.200\.0\.2 \. 203\.0\.113\.16 \. tcp \. 80 timeout 2s'

# ---- truncation and TCP -------------------------------------------------------------
out=$(q big.allowed.test)
like "100 records over UDP to the guest: TC, no records" "$out" '^NOERROR ancount=0 tc=1'
out=$(q big.allowed.test --tcp)
like "over TCP: the records (the resolver keeps 64 per answer)" "$out" '^NOERROR ancount=64 tc=0'
like "the resolver fell back to TCP upstream" "$(cat "$TMP/upstream.log")" '^tcp big\.allowed\.test 1$'
cnt=$(drive count allow_dns_net)
if [ "${cnt:-0}" -ge 64 ]; then ok "allow_dns_net grew by the big answer ($cnt elements)"
else nok "allow_dns_net grew by the big answer"; diag "$cnt"; fi

# ---- malformed ----------------------------------------------------------------------
# two questions
out=$(ing "$DNSD" raw 10.200.0.1 abcd010000020000000000000474657374000001000103666f6f0000010001)
like "two questions: FORMERR" "$out" '^FORMERR id=43981 qd=0'
# a name whose pointer points at itself
out=$(ing "$DNSD" raw 10.200.0.1 abcd01000001000000000000c00c00010001)
like "pointer loop: FORMERR" "$out" '^FORMERR'
# a response (QR set) is not answered
out=$(ing "$DNSD" raw 10.200.0.1 abcd818000010000000000000377777704746573740000010001)
like "a response sent to the resolver is dropped" "$out" '^none'
like "ANY: NOTIMP" "$(q allowed.test ANY)" '^NOTIMP'
kill -USR1 $DNSPID
waitfor "$TMP/dns.out" '^stats' >/dev/null
like "resolver still fine; stats count it all" "$(grep '^stats' "$TMP/dns.out")" \
	'formerr=2 .*insert_fail=0'
like "the dead first upstream was tried once, then skipped" "$(grep '^stats' "$TMP/dns.out")" 'upstream_fail=0'

# ---- other resolvers ------------------------------------------------------------------
expect "DNS straight to the outside resolver (udp) refused" unreach udp 203.0.113.53 53
expect "DNS straight to the outside resolver (tcp) refused" refused tcp 203.0.113.53 53
out=$(ing "$DNSD" query 203.0.113.53 allowed.test --timeout 500 2>&1)
like "a real query to it gets no answer" "$out" '^error'

# ---- expiry -------------------------------------------------------------------------------
# short.test: TTL 1 + 1 s grace. The connection made above is over.
sleep 2.3
unlike "short.test's element expired" "$(inh nft list set inet berth allow_dns_ip)" '203\.0\.113\.16'
expect "after TTL + grace: 203.0.113.16:80 refused again" refused tcp 203.0.113.16 80
like "a new lookup" "$(q short.test)" '203\.0\.113\.16'
expect "lets it through again" open tcp 203.0.113.16 80

# ---- a live flow to a learned address ends with it ------------------------------------------
# brief.test: TTL 4 + 1 s grace. While the guest keeps asking (every
# second: the TTL leaves a loaded machine 3 s of slack), its flow goes
# on; once it stops, the flow is reset after the expiry, not before it
# (and soon: a liveness bound of 5 s; the figure is printed).
now() { date +%s.%N; }
like "brief.test answered (TTL 4)" "$(q brief.test)" '203\.0\.113\.17$'
ing "$DRIVE" stream 203.0.113.17 9100 --interval 250 >"$TMP/brief" 2>&1 &
BRIEF=$!
PIDS="$PIDS $BRIEF"
for _i in $(seq 40); do grep -Eq '^(open|failed)' "$TMP/brief" && break; sleep 0.05; done
like "a flow to its address is open" "$(cat "$TMP/brief")" '^open'
for k in 1 2 3 4 5; do sleep 1; ta=$(now); q brief.test >/dev/null; tb=$(now); done
unlike "asked again every second: the flow goes on past its TTL's worth" \
	"$(cat "$TMP/brief")" '^cut'
for _i in $(seq 400); do grep -q '^cut' "$TMP/brief" && break; sleep 0.05; done
l=$(grep '^cut' "$TMP/brief")
# the expiry is 5 s after the last answer, which came between ta and tb
dt=$(echo "$l" | awk -v ta="$ta" -v tb="$tb" '{ d = $2 - tb - 5; if ($2 < ta + 5 - 0.5) d = -1; printf "%.3f", d }')
if echo "$l" | grep -q reset && awk -v d="$dt" 'BEGIN { exit !(d <= 5.0 && d > -0.5) }'; then
	ok "no longer asked: the flow is reset after the address expired (${dt} s)"
else nok "no longer asked: the flow is reset after the expiry, within 5 s"
	diag "$l (last answer between $ta and $tb, $dt s after TTL + grace)" "$(cat "$TMP/brief")"; fi
kill -USR1 $DNSPID
for _i in $(seq 40); do [ "$(grep -c '^stats' "$TMP/dns.out")" -ge 2 ] && break; sleep 0.05; done
like "the resolver rechecked the sandbox after expiries" \
	"$(grep '^stats' "$TMP/dns.out" | tail -n 1)" 'rechecks=[1-9]'

# ---- re-apply: the rules change, what the guest may have cached stays ---------------------
# berthd clears a sandbox's elements and rebuilds them from its rules
# whenever they or the policy change; nc_dnsdrive does the same on SIGHUP
# from $TMP/rules. Fresh answers first (the guest "caches" them):
like "allowed.test answered" "$(q allowed.test)" '203\.0\.113\.10$'
like "www.allowed.test answered" "$(q www.allowed.test)" '203\.0\.113\.11$'
like "a.wild.test answered" "$(q a.wild.test)" '203\.0\.113\.13$'
asked=$(grep -c ' allowed\.test 1$' "$TMP/upstream.log")
# an element nobody's rules give: the re-apply must clear it
inh nft add element inet berth allow_ip '{ 10.200.0.2 . 203.0.113.14 . tcp . 80 }'
expect "an element added by hand lets 203.0.113.14:80 through" open tcp 203.0.113.14 80
rules() {
	printf '%s\n' 'mode allowlist' 'allow www.allowed.test' 'allow hop.allowed.test' \
		'allow big.allowed.test' 'allow nx.allowed.test' 'allow *.wild.test' \
		'deny bad.wild.test' 'allow short.test:80/tcp' \
		'allow brief.test:9100/tcp' "$@" >"$TMP/rules"
}
applied() {	# N: SIGHUP, then wait for "applied N" (or an error)
	kill -HUP $DNSPID
	waitfor "$TMP/dns.out" "^(applied $1 |error apply)"
	grep -E "^(applied $1 |error apply)" "$TMP/dns.out"
}
rules 'allow allowed.test' 'allow 198.51.100.7'
like "one unrelated rule more: re-applied, learned addresses queued with it" "$(applied 1)" \
	'^applied 1 learned=[1-9]'
like "the new rule is in the table" "$(inh nft list set inet berth allow_net)" \
	'10\.200\.0\.2 \. 198\.51\.100\.7 '
expect "the sandbox was rebuilt: the hand-made element is gone" refused tcp 203.0.113.14 80
expect "allowed.test's address still connects, without a new lookup" open tcp 203.0.113.10 80
expect "so does the CNAME chain's final address (www.allowed.test)" open tcp 203.0.113.11 80
expect "and the wildcard's (a.wild.test)" open tcp 203.0.113.13 80
set_net=$(inh nft list set inet berth allow_dns_net 2>&1)
like "allowed.test's element back with what remained of TTL 30 + 1 s" "$set_net" \
	'10\.200\.0\.2 \. 203\.0\.113\.10 \. 0-255 \. 0-65535 timeout ([0-9]|[12][0-9]|3[01])s'
if [ "$(grep -c ' allowed\.test 1$' "$TMP/upstream.log")" = "$asked" ]; then
	ok "nothing was asked upstream again"
else nok "nothing was asked upstream again"; diag "$(tail -n 5 "$TMP/upstream.log")"; fi

# berthd's fallback when the kernel refuses the batch: without them,
# then put back one by one
inh nft add element inet berth allow_ip '{ 10.200.0.2 . 203.0.113.14 . tcp . 80 }'
rules 'allow allowed.test' 'allow 198.51.100.7' 'restore yes'
like "re-applied, learned addresses put back after the batch" "$(applied 2)" \
	'^applied 2 learned=[1-9][0-9]* restored'
expect "rebuilt again (hand-made element gone)" refused tcp 203.0.113.14 80
expect "allowed.test's address connects" open tcp 203.0.113.10 80
expect "www.allowed.test's too" open tcp 203.0.113.11 80

rules 'allow 198.51.100.7'
like "allowed.test's rule removed: re-applied" "$(applied 3)" '^applied 3 '
expect "its address is refused at once" refused tcp 203.0.113.10 80
unlike "and out of the table" "$(inh nft list set inet berth allow_dns_net)" '203\.0\.113\.10 '
expect "www.allowed.test's address (still allowed) still connects" open tcp 203.0.113.11 80
like "allowed.test itself is now refused by the resolver" "$(q allowed.test)" '^NXDOMAIN'

# ops' policy changed: the whole table rebuilt in one batch (berthd's
# init_table), 203.0.113.11 now always denied; the deny range joins the
# sandbox's deny rules as the policy's do
rules 'allow 198.51.100.7' \
	'global --uplink up0 --tap-prefix sbtap --group 7 --host-addr 203.0.113.1 --deny 203.0.113.11/32'
like "global deny added: table rebuilt" "$(applied 4)" '^applied 4 learned=[1-9]'
expect "ops' deny of 203.0.113.11 wins over www.allowed.test's learned address" \
	refused tcp 203.0.113.11 80
unlike "which was not put back" "$(inh nft list set inet berth allow_dns_net)" '203\.0\.113\.11 '
expect "a.wild.test's learned address survived the rebuild" open tcp 203.0.113.13 80
expect "allowed.test's did not come back with it" refused tcp 203.0.113.10 80

# ---- a static rule and a learned address, the same one ------------------------------------------
# short.test resolves to 203.0.113.16 with TTL 1; a static rule allows
# 203.0.113.16:80/tcp too. The answer must not turn the rule's element
# into one that expires.
rules 'allow 198.51.100.7' 'allow 203.0.113.16:80/tcp'
like "static allow 203.0.113.16:80/tcp beside short.test's rule: applied" \
	"$(applied 5)" '^applied 5 '
like "short.test answered (TTL 1)" "$(q short.test)" '203\.0\.113\.16$'
like "the learned element, in allow_dns_ip, expires" \
	"$(inh nft list set inet berth allow_dns_ip)" '203\.0\.113\.16 \. tcp \. 80 timeout 2s'
like "the rule's element, in allow_ip, does not" \
	"$(inh nft list set inet berth allow_ip)" '10\.200\.0\.2 \. 203\.0\.113\.16 \. tcp \. 80 *[,}]?$'
sleep 2.5
unlike "after TTL + grace the learned element is gone" \
	"$(inh nft list set inet berth allow_dns_ip)" '203\.0\.113\.16'
like "the rule's element is still there, still without a timeout" \
	"$(inh nft list set inet berth allow_ip | grep 203.0.113.16)" '203\.0\.113\.16 \. tcp \. 80 *[,}]?$'
expect "and 203.0.113.16:80 is still reachable" open tcp 203.0.113.16 80

# ---- tunnels through allowed names ---------------------------------------------------------
# a 60-character label under *.wild.test (default limit 40)
long=x5k2m9q1w8e7r6t5y4u3i2o1p0a9s8d7f6g5h4j3k2l1z0x9c8v7b6n5m4q3
out=$(q $long.wild.test)
like "a 60-character label under an allowed wildcard: refused" "$out" '^NXDOMAIN'
unlike "... never asked upstream" "$(cat "$TMP/upstream.log")" "$long"
waitfor "$TMP/dns.out" "$long\.wild\.test A label-length" >/dev/null
like "... and logged with reason label-length" "$(cat "$TMP/dns.out")" "$long\.wild\.test A label-length$"
l40=$(echo $long | cut -c1-40)
like "a 40-character one still resolves (upstream's NXDOMAIN, asked)" \
	"$(q $l40.wild.test)" '^NXDOMAIN'
like "... it was asked upstream" "$(cat "$TMP/upstream.log")" "$l40\.wild\.test"
# distinct names under one wildcard a minute (8 in this test: --wildcard-names)
for i in 1 2 3 4 5 6 7 8 9 10; do q n$i.wild.test >/dev/null; done
waitfor "$TMP/dns.out" 'wild\.test A wildcard-names' >/dev/null
like "more distinct names under *.wild.test than its cap a minute: refused, logged" \
	"$(cat "$TMP/dns.out")" 'n(9|10)\.wild\.test A wildcard-names$'
unlike "... the refused ones never reached the upstream" "$(cat "$TMP/upstream.log")" 'n10\.wild\.test'
like "a name asked before within the minute still resolves" "$(q a.wild.test)" '203\.0\.113\.13$'
like "exact domain rules have no such cap" "$(q short.test)" '203\.0\.113\.16$'
# the query rate: 50/s per sandbox, a bucket of 100
out=$(ing "$DNSD" burst 10.200.0.1 short.test 300)
r=$(echo "$out" | sed -n 's/.*REFUSED \([0-9]*\).*/\1/p')
if [ "${r:-0}" -ge 100 ]; then ok "a burst of 300 queries: $r over the rate refused ($out)"
else nok "a burst over the rate is refused"; diag "$out"; fi
waitfor "$TMP/dns.out" 'rate-limit' >/dev/null
like "... logged with reason rate-limit" "$(cat "$TMP/dns.out")" 'short\.test A rate-limit$'
sleep 2.1
like "the bucket refills" "$(q short.test)" '203\.0\.113\.16$'

# ---- shutdown -------------------------------------------------------------------------------
kill -TERM $DNSPID
wait $DNSPID; rc=$?
if [ $rc -eq 0 ] && ! grep -q Sanitizer "$TMP/dns.out"; then ok "resolver ends cleanly on SIGTERM"
else nok "resolver ends cleanly on SIGTERM (exit $rc)"; diag "$(tail -n 30 "$TMP/dns.out")"; fi

echo "1..$n"
[ "$fails" -eq 0 ]
