#!/bin/sh
# egress-vm.sh — egress policy end to end with a real microVM: berthd
# programs the nftables table and runs the filtering resolver; the guest's
# test app probes (GET /connect, GET /resolve) show what it may reach.
# An "internet" is a network namespace on 203.0.113.0/24 with a web
# server (.10) and a DNS server (.53) that berthd uses upstream.
#  - allowlist with no rules: connections are refused fast (TCP reset),
#    not dropped; denied names get NXDOMAIN; both reach the denial log
#  - a domain rule: its name resolves and its address opens (DNS-learned)
#  - address rules with ports; deny beats allow; open mode; the metadata
#    address is refused in every mode; delete leaves nothing in the table
#  - netctl egress log --follow prints denials as they come; ops' new-
#    connection rate refuses what is over it, with reason rate-limit
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"
command -v nft >/dev/null 2>&1 || skip_all "nft is not installed (used to inspect the table)"
ip netns add "bnet$$" 2>/dev/null || skip_all "cannot create network namespaces"
NS=bnet$$
FWD=$(cat /proc/sys/net/ipv4/ip_forward)
egress_cleanup() {
	[ -n "${BERTHD_LOG:-}" ] && [ -n "${KEEP_LOG:-}" ] && cp "$BERTHD_LOG" "$KEEP_LOG"
	ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	ip link del xup$$ 2>/dev/null
	echo "$FWD" >/proc/sys/net/ipv4/ip_forward
	nft delete table inet berth 2>/dev/null
	nft delete table arp berth 2>/dev/null
}
# keep the script's status through the cleanup (a failed test fails it)
trap '_st=$?; egress_cleanup; (exit $_st); _cleanup' EXIT

# ---- the "internet" ----
ip link add xup$$ type veth peer name eth0 netns "$NS"
ip addr add 203.0.113.1/24 dev xup$$
ip link set xup$$ up
ip -n "$NS" link set lo up
ip -n "$NS" addr add 203.0.113.10/24 dev eth0
ip -n "$NS" addr add 203.0.113.53/24 dev eth0
ip -n "$NS" link set eth0 up
echo 1 >/proc/sys/net/ipv4/ip_forward
cat >"$T/dns.py" <<'PY'
import socket, struct, sys
Z = {"allowed.test": "203.0.113.10", "denied.test": "203.0.113.10"}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("203.0.113.53", 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(4096)
    o, labels = 12, []
    while q[o]:
        labels.append(q[o + 1:o + 1 + q[o]].decode()); o += 1 + q[o]
    name, qt = ".".join(labels).lower(), struct.unpack(">H", q[o + 1:o + 3])[0]
    a = Z.get(name) if qt == 1 else None
    body = (b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 30, 4) + socket.inet_aton(a)) if a else b""
    rcode = 0 if name in Z else 3
    s.sendto(struct.pack(">HHHHHH", struct.unpack(">H", q[:2])[0], 0x8580 | rcode, 1,
        1 if a else 0, 0, 0) + q[12:o + 5] + body, peer)
PY
if command -v dnsmasq >/dev/null 2>&1; then
	# a real DNS server as the authority for the test's names
	ip netns exec "$NS" dnsmasq --keep-in-foreground --no-resolv --no-hosts \
		--bind-interfaces --listen-address=203.0.113.53 --pid-file="$T/dnsmasq.pid" \
		--address=/allowed.test/203.0.113.10 --address=/denied.test/203.0.113.10 \
		--address=/wild.test/203.0.113.10 --log-facility=- >"$T/dns.out" 2>&1 &
	wait_for 10 grep -q 'started' "$T/dns.out" && echo ready >>"$T/dns.out"
else
	ip netns exec "$NS" python3 "$T/dns.py" >"$T/dns.out" 2>&1 &
fi
ip netns exec "$NS" python3 -m http.server 80 --bind 203.0.113.10 >/dev/null 2>&1 &
ip netns exec "$NS" python3 -m http.server 8080 --bind 203.0.113.10 >/dev/null 2>&1 &
wait_for 10 grep -q ready "$T/dns.out" || bail "upstream DNS did not start"

# The guest template, built before berthd starts: start_berthd's wait for
# "ready" must not include the build on a loaded machine.
sh "$top_srcdir/vmm/guest/mktemplate" "$T/tpl" >"$T/mk.log" 2>&1 ||
	{ tail -n 20 "$T/mk.log" >&2; bail "mktemplate failed"; }
CTL_PORT=$(free_port)
VMM=on berthd_config "egress on" "tap_prefix beg" "vm_pool 10.215.0.0/24" \
	"template $T/tpl" \
	"control_listen 127.0.0.1:$CTL_PORT" \
	"dns_upstream 203.0.113.53" "idle_pause never" "idle_suspend never"
start_berthd
wait_log 60 "$BERTHD_LOG" "egress: table inet berth" "$BERTHD_PID" || bail "egress did not start"

out=$(netctl sandbox create eg) || bail "sandbox create: $out; $(netctl sandbox events eg 2>&1 | tail -n 3)"
TOK=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
netctl port publish eg 8080 >/dev/null || bail "publish"
U="https://8080-eg.$DOMAIN:$HTTPS_PORT"
wait_routed eg 8080
probe() { bcurl "$U/$1"; }
# denial_logged NAME PATTERN: the denial log reaches berthd from the
# kernel's NFLOG through the nflog helper, after the refused connect has
# returned: wait (bounded) for PATTERN in it, and show the log when it
# never comes
log_match() { netctl --json egress log eg | grep -Eq -- "$1"; }
denial_logged() {
	if wait_for 10 log_match "$2"; then
		ok "$1"
	else
		not_ok "$1"
		diag "the denial log: $(netctl --json egress log eg | head -c 2000)" "want match: '$2'"
	fi
}
result() { probe "$1" | json_get "$(cat)" 'j["result"]'; }

# ---- allowlist, no rules ----
spawn "$T/follow.out" "$NETCTL" -s "$STATE" egress log eg --follow
out=$(probe "connect?ip=203.0.113.10&port=80")
is "allowlist, no rules: a connection is refused" "$(json_get "$out" 'j["result"]')" refused
# refused means a reset came back (ECONNREFUSED), not the 3 s connect
# timeout ("timeout"): fast by its kind; the time is only shown
is "... by a reset, not a timeout (errno ECONNREFUSED, $(json_get "$out" 'j["ms"]') ms)" \
	"$(json_get "$out" 'j["errno"]')" 111
out=$(probe "resolve?name=denied.test")
is "a name not allowed gets NXDOMAIN" "$(json_get "$out" 'j.get("rcode")')" 3
denial_logged "the denial log has the refused connection" '203\.0\.113\.10'
denial_logged "the denial log has the refused name" 'denied\.test'
check "netctl egress log --follow printed the refused connection" \
	wait_log 10 "$T/follow.out" '"destination":"203\.0\.113\.10"'

# ---- a domain rule: the resolver opens what it answers ----
check "egress allow allowed.test" netctl egress allow eg allowed.test
out=$(probe "resolve?name=allowed.test")
like "an allowed name resolves" "$out" '"addrs":\["203\.0\.113\.10"\]'
is "... and its address is open now" "$(result "connect?ip=203.0.113.10&port=80")" connected
out=$(probe "resolve?name=www.allowed.test")
is "a name below an allowed name is not allowed by it (NXDOMAIN)" "$(json_get "$out" 'j.get("rcode")')" 3
check "egress allow *.wild.test" netctl egress allow eg '*.wild.test'
like "a wildcard allows one label down" "$(probe "resolve?name=a.wild.test")" '"addrs":\["203\.0\.113\.10"\]'
is "... not two" "$(probe "resolve?name=a.b.wild.test" | json_get "$(cat)" 'j.get("rcode")')" 3
# the element lives the answer's TTL (at least 5 s): resolve again right
# before looking, or a slow machine sees it expired
probe "resolve?name=allowed.test" >/dev/null
elems=$(nft list table inet berth 2>/dev/null | grep -c '10\.215\.0\.2 \. 203\.0\.113\.10')
check "the learned address is an element of the allow set, with a timeout" [ "$elems" -ge 1 ]

# ---- address rules, ports, deny beats allow ----
check "egress allow 203.0.113.10:8080/tcp" netctl egress allow eg 203.0.113.10:8080/tcp
is "allowed address and port: connected" "$(result "connect?ip=203.0.113.10&port=8080")" connected
check "egress deny 203.0.113.10" netctl egress deny eg 203.0.113.10
is "deny beats allow" "$(result "connect?ip=203.0.113.10&port=8080")" refused
check "... and --follow prints that denial as it comes (deny-rule)" \
	wait_log 10 "$T/follow.out" '"reason":"deny-rule"'
check "egress rm deny" netctl egress rm eg deny 203.0.113.10

# ---- open mode; always-deny ----
check "egress mode open" netctl egress mode eg open
is "open: any public address" "$(result "connect?ip=203.0.113.10&port=80")" connected
r=$(result "connect?ip=169.254.169.254&port=80&ms=2000")
case $r in refused|unreachable) ok_r=1 ;; *) ok_r= ;; esac
check "open: the metadata address is still refused ($r)" [ -n "$ok_r" ]
check "egress mode closed" netctl egress mode eg closed
is "closed: nothing" "$(result "connect?ip=203.0.113.10&port=80")" refused

# ---- kill -9 of berthd: still enforced; a restart reconciles the table ----
check "egress mode allowlist" netctl egress mode eg allowlist
GU="http://10.215.0.2:8080"	# the guest's test app, straight over the tap
# (a TCG guest on a loaded machine may take long: 30 s; what the host's
# path to it looked like is shown when nothing came)
gresult() {
	_g=$(curl -sS --max-time 30 "$GU/$1")
	[ -n "$_g" ] || diag "no answer from $GU: $(ip route get 10.215.0.2 2>&1 | head -n 1);" \
		"$(ip -br link 2>/dev/null | grep beg | tr '\n' ' ')"
	json_get "$_g" 'j["result"]'
}
is "before: port 80 is not on the list" "$(gresult "connect?ip=203.0.113.10&port=80")" refused
kids=$(for p in $(berthd_workers); do [ "$(cat /proc/$p/comm 2>/dev/null)" = berthd ] && echo $p; done)
kill -KILL "$BERTHD_PID" $kids
wait_gone 10 "$BERTHD_PID" || bail "berthd survived kill -9"
is "berthd down: egress still enforced" "$(gresult "connect?ip=203.0.113.10&port=80")" refused
is "berthd down: allowed traffic still flows" "$(gresult "connect?ip=203.0.113.10&port=8080")" connected
nft add element inet berth allow_ip '{ 10.215.0.2 . 203.0.113.10 . tcp . 80 }'
is "an element added by hand opens port 80" "$(gresult "connect?ip=203.0.113.10&port=80")" connected
start_berthd
wait_routed eg 8080
is "after the restart the hand-made element is gone" "$(result "connect?ip=203.0.113.10&port=80")" refused
is "... and the sandbox's own rules are back" "$(result "connect?ip=203.0.113.10&port=8080")" connected

# ---- ops' global policy: its deny beats the agent's allow; agents cannot widen it ----
check "policy set --deny 203.0.113.10/32" netctl policy set --deny 203.0.113.10/32
is "ops' deny beats the agent's allow" "$(result "connect?ip=203.0.113.10&port=8080")" refused
denial_logged "... and the denial log names it" 'always-deny'
agent() { "$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" --token "$TOK" "$@"; }
agent egress allow eg 203.0.113.10:80/tcp >/dev/null 2>&1
is "the sandbox's token cannot allow what the policy denies (403: exit 4)" "$?" 4
agent egress mode eg open >/dev/null 2>&1
is "... and can still use its own rules (mode open: exit 0)" "$?" 0
curl -sS --unix-socket "$STATE/control.sock" -X PUT -H 'Content-Type: application/json' \
	-d '{"deny":[]}' http://berth/v1/policy >/dev/null
ok_again() { [ "$(result "connect?ip=203.0.113.10&port=8080")" = connected ]; }
check "policy deny lifted: reachable again" wait_for 10 ok_again

# ---- ops' per-sandbox new-connection rate: over it is a fast reset, logged ----
check "policy set --new-conn-rate 1" netctl policy set --new-conn-rate 1
wait_for 10 ok_again
# 8 connects at once (parallel requests): a bucket of 1 lets few through
rp=
for i in 1 2 3 4 5 6 7 8; do
	probe "connect?ip=203.0.113.10&port=8080" >"$T/rate.$i" 2>&1 &
	rp="$rp $!"
done
for p in $rp; do wait "$p"; done
rs=$(cat "$T"/rate.* | sed -n 's/.*"result": *"\([a-z]*\)".*/\1/p' | sort | uniq -c | tr -s ' \n' ' ')
like "rate 1/s: of 8 connects at once some are refused ($rs)" "$rs" 'refused'
denial_logged "... and the denial log says rate-limit" '"reason": ?"rate-limit"'
check "policy set --new-conn-rate off" netctl policy set --new-conn-rate off

# ---- delete leaves nothing of it ----
check "sandbox rm" netctl sandbox rm eg
gone() { ! nft list table inet berth 2>/dev/null | grep -q '10\.215\.0\.2'; }
check "no element of the sandbox is left in the table" wait_for 10 gone
done_testing
