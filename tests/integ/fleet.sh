#!/bin/sh
# fleet.sh — fleet mode end to end: three berth hosts in their own network
# namespaces share routes and placement through one real etcd (Debian's
# etcd-server, in a fourth namespace), and every edge serves every
# sandbox, forwarding to the owner over mutual TLS.
#
#   publish on A, fetch through A, B and C (Berth-Host: a), within 1 s
#   a private route through B: A checks and drops berth_token; a custom
#     host A's sandbox holds is refused on B
#   the fleet listener refuses a client without a fleet certificate, and
#     one whose valid fleet certificate names a host not in the fleet;
#     B refuses to create a sandbox id A holds
#   kill -9 A's berthd: B and C answer 503 naming A at once (connection
#     refused), and 503 "lease expired" naming A within the TTL
#   restart A: served again through B and C
#   cut C off etcd: C serves its own sandboxes (also one published while
#     cut) and still forwards to A; A and B lose C after a TTL; when etcd
#     is back C registers again and A and B serve C's sandboxes, the new
#     one included
#   SIGTERM C: its lease is revoked, A answers 503 naming C at once
#   etcd over TLS with client certificates (--client-cert-auth, its own
#     CA): berthd uses fleet_etcd https:// with fleet_etcd_ca and
#     fleet_etcd_cert; a client without a certificate, with one of another
#     CA, or over plain HTTP gets nothing from etcd
#   etcd's RBAC: a role per host (read the prefix, write its own keys),
#     berthd authenticates (fleet_etcd_user); B's user cannot write A's
#     host key nor a sandbox key under A
#   A, within its etcd role, writes bad keys (a bad id, port 0, a value
#     naming B), a claim of B's sandbox id and of B's custom host: no
#     worker anywhere is replaced, every host logs each bad key and each
#     later claim, and every edge (A's too) routes both to B, the first
#     to claim them: nothing for them reaches A
#   the Python SDK's fleet calls on B: hosts, where a sandbox is, drain
#     (seen by A through etcd) and undrain, another host's drain refused
#
# Sandboxes are plain testapp servers on each namespace's loopback
# (vmm off). Exit 77 without root, ip netns or etcd.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"

need_berth
need_tool ip etcd
[ -x "$top_srcdir/certs/berth-fleet-cert" ] || skip_all "certs/berth-fleet-cert missing"

TTL=3
NET=10.251.0
ETCD_IP=$NET.1
N=bfl$(($$ % 100000))
HUB=${N}hub
HOSTS="a b c"

_fleet_cleanup() {
	_rc0=$?
	for _h in $HOSTS; do ip netns del "$N$_h" 2>/dev/null; done
	ip netns del "$HUB" 2>/dev/null
	(exit $_rc0)
	_cleanup
}
trap _fleet_cleanup EXIT

ip netns add "$HUB" 2>/dev/null || skip_all "cannot create network namespaces"
ip -n "$HUB" link set lo up
ip -n "$HUB" link add br0 type bridge
ip -n "$HUB" addr add "$ETCD_IP/24" dev br0
ip -n "$HUB" link set br0 up
i=10
for h in $HOSTS; do
	i=$((i + 1))
	eval "IP_$h=$NET.$i"
	ip netns add "$N$h"
	ip -n "$N$h" link set lo up
	ip link add "$N$h" netns "$HUB" type veth peer name eth0 netns "$N$h"
	ip -n "$HUB" link set "$N$h" master br0 up
	ip -n "$N$h" addr add "$NET.$i/24" dev eth0
	ip -n "$N$h" link set eth0 up
done
inns() { _n=$1; shift; ip netns exec "$N$_n" "$@"; }
ipof() { eval "echo \$IP_$1"; }

# ---- etcd, over TLS with client certificates -------------------------------
# etcd's own CA (not the fleet CA: an etcd client certificate opens no
# fleet listener, a host certificate no etcd): its server certificate
# names $ETCD_IP; each berthd's client certificate has no common name
# (with auth enabled etcd's JSON gateway refuses one that has: the user is
# the token's, fleet_etcd_user). --client-cert-auth: no certificate of
# that CA, no etcd.
mkdir -p "$T/etcdpki"
"$top_srcdir/certs/berth-fleet-cert" "$T/etcdpki" host etcd "$ETCD_IP" >/dev/null 2>&1 ||
	bail "berth-fleet-cert: etcd's server certificate"
for h in $HOSTS; do
	"$top_srcdir/certs/berth-fleet-cert" "$T/etcdpki" client "$h" >/dev/null 2>&1 ||
		bail "berth-fleet-cert: $h's etcd client certificate"
done
EPKI=$T/etcdpki
spawn "$T/etcd.log" ip netns exec "$HUB" etcd --name bfl --data-dir "$T/etcd" \
	--listen-client-urls "https://$ETCD_IP:2379" \
	--advertise-client-urls "https://$ETCD_IP:2379" \
	--cert-file "$EPKI/etcd.pem" --key-file "$EPKI/etcd.key" \
	--client-cert-auth --trusted-ca-file "$EPKI/fleet-ca.pem" \
	--listen-peer-urls http://127.0.0.1:2380 \
	--initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster bfl=http://127.0.0.1:2380
ETCD_PID=$SPAWNED
wait_log 30 "$T/etcd.log" "ready to serve client requests" "$ETCD_PID" ||
	{ tail -n 20 "$T/etcd.log" >&2; bail "etcd did not start"; }
ok "etcd serves on https://$ETCD_IP:2379 (client certificates required)"
ecurl() { inns a curl -sS --max-time 5 --cacert "$EPKI/fleet-ca.pem" "$@" \
	-X POST -d '{"key":"Lw=="}' "https://$ETCD_IP:2379/v3/kv/range" 2>&1; }

# etcd's RBAC: each host's user reads the whole prefix and writes only
# its own keys (/bfl/hosts/<id>, /bfl/sandboxes/<id>/...). Set up through
# the JSON gateway before auth is enabled; berthd authenticates with
# fleet_etcd_user and sends etcd's token.
ejson() {	# PATH JSON [CURL ARGS...]
	_p=$1 _j=$2; shift 2
	inns a curl -sS --max-time 5 --cacert "$EPKI/fleet-ca.pem" \
		--cert "$EPKI/a-client.pem" --key "$EPKI/a-client.key" "$@" -X POST -d "$_j" \
		"https://$ETCD_IP:2379$_p" 2>&1
}
b64() { printf %s "$1" | base64 | tr -d '\n'; }
grant() {	# ROLE TYPE KEY [RANGE_END]
	_re=; [ -n "${4:-}" ] && _re=",\"range_end\":\"$(b64 "$4")\""
	ejson /v3/auth/role/grant "{\"name\":\"$1\",\"perm\":{\"permType\":\"$2\",\"key\":\"$(b64 "$3")\"$_re}}"
}
{
	ejson /v3/auth/role/add '{"name":"root"}'
	ejson /v3/auth/user/add '{"name":"root","password":"root-pw"}'
	ejson /v3/auth/user/grant '{"user":"root","role":"root"}'
	for h in $HOSTS; do
		ejson /v3/auth/role/add "{\"name\":\"$h\"}"
		grant "$h" READ /bfl/ /bfl0
		grant "$h" READWRITE "/bfl/hosts/$h"
		grant "$h" READWRITE "/bfl/sandboxes/$h/" "/bfl/sandboxes/${h}0"
		ejson /v3/auth/user/add "{\"name\":\"$h\",\"password\":\"pw-$h\"}"
		ejson /v3/auth/user/grant "{\"user\":\"$h\",\"role\":\"$h\"}"
		printf 'pw-%s\n' "$h" >"$EPKI/$h.pw"
		chmod 600 "$EPKI/$h.pw"
	done
	ejson /v3/auth/enable '{}'
} >"$T/etcd-auth.log"
if grep -q '"error"' "$T/etcd-auth.log"; then
	diag "$(cat "$T/etcd-auth.log")"; bail "etcd auth setup"
fi
ok "etcd: auth enabled, one role per host"

# ---- certificates, upstreams, berthds -------------------------------------
mkdir -p "$T/fleet"
for h in $HOSTS; do
	"$top_srcdir/certs/berth-fleet-cert" "$T/fleet" host "$h" "$(ipof "$h")" ||
		bail "berth-fleet-cert $h"
done
chmod 755 "$T/fleet"

for h in $HOSTS; do
	mkdir -p "$T/$h/state"
	cat >"$T/$h/berth.conf" <<-EOF
	domain $DOMAIN
	listen https $(ipof "$h"):8443
	workers 1
	user nobody
	access_log stderr
	vmm off
	egress off
	fleet_etcd https://$ETCD_IP:2379
	fleet_etcd_ca $EPKI/fleet-ca.pem
	fleet_etcd_cert $EPKI/$h-client.pem $EPKI/$h-client.key
	fleet_etcd_user $h $EPKI/$h.pw
	fleet_host $h
	fleet_listen $(ipof "$h"):9443
	fleet_ca $T/fleet/fleet-ca.pem
	fleet_cert $T/fleet/$h.pem $T/fleet/$h.key
	fleet_ttl ${TTL}s
	fleet_prefix /bfl
	fleet_capacity 10
	fleet_zone zone-$h
	EOF
	spawn "$T/ta-$h.log" ip netns exec "$N$h" "$TESTAPP" -l 127.0.0.1 -p 17001 \
		-L "$T/ta-$h.reqlog"
	wait_log 10 "$T/ta-$h.log" "listening on" "$SPAWNED" || bail "testapp on $h"
done

# start_host H: berthd of host H in its namespace; waits until it is
# ready and registered.
start_host() {
	_h=$1
	_log="$T/$_h/berthd.log"
	[ -f "$_log" ] && cat "$_log" >>"$T/$_h/berthd.old.log"
	spawn "$_log" ip netns exec "$N$_h" "$BERTHD" -f "$T/$_h/berth.conf" -s "$T/$_h/state"
	eval "PID_$_h=$SPAWNED"
	wait_log 30 "$_log" "berthd: ready" "$SPAWNED" &&
		wait_log 15 "$_log" "fleet: registered host $_h" "$SPAWNED" ||
		{ tail -n 30 "$_log" >&2; bail "berthd $_h did not start and register"; }
}
for h in $HOSTS; do start_host "$h"; done
ok "three berthds ready and registered (TTL ${TTL}s)"
like "A talks to etcd over TLS with its client certificate" "$(cat "$T/a/berthd.log")" \
	"fleet: host a, etcd https://$ETCD_IP:2379 \\(TLS, client certificate\\)"
unlike "etcd refuses a client without a certificate (no answer at all)" "$(ecurl)" '"header"|"error"'
like "...answers one with a certificate of its CA (and wants a user)" \
	"$(ecurl --cert "$EPKI/a-client.pem" --key "$EPKI/a-client.key")" 'user name is empty'
unlike "...but not one with a fleet certificate (another CA)" \
	"$(ecurl --cert "$T/fleet/a.pem" --key "$T/fleet/a.key")" '"header"|"error"'
like "A authenticated to etcd as its own user" "$(cat "$T/a/berthd.log")" \
	"fleet: authenticated to etcd as a"
tok_b=$(ejson /v3/auth/authenticate '{"name":"b","password":"pw-b"}' |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
out=$(ejson /v3/kv/put "{\"key\":\"$(b64 /bfl/hosts/a)\",\"value\":\"$(b64 '{}')\"}" \
	-H "Authorization: $tok_b")
like "etcd: B's user cannot write A's host key" "$out" 'permission denied'
out=$(ejson /v3/kv/put "{\"key\":\"$(b64 /bfl/sandboxes/a/sba)\",\"value\":\"$(b64 '{}')\"}" \
	-H "Authorization: $tok_b")
like "etcd: ...nor claim a sandbox under A" "$out" 'permission denied'
like "etcd: ...but reads the fleet's keys" \
	"$(ejson /v3/kv/range "{\"key\":\"$(b64 /bfl/)\",\"range_end\":\"$(b64 /bfl0)\"}" \
	-H "Authorization: $tok_b")" '"kvs"'
unlike "etcd: no token, nothing (the certificate alone is no user)" \
	"$(ejson /v3/kv/range "{\"key\":\"$(b64 /bfl/)\",\"range_end\":\"$(b64 /bfl0)\"}")" '"kvs"'
unlike "plain HTTP to etcd gets nothing" \
	"$(inns a curl -sS --max-time 5 -X POST -d '{"key":"Lw=="}' "http://$ETCD_IP:2379/v3/kv/range" 2>&1)" '"header"'

nc_() { _h=$1; shift; "$NETCTL" -s "$T/$_h/state" "$@"; }

# fetch VIA SANDBOX [PATH] [CURL ARGS...]: GET through host VIA's edge, from
# inside its namespace; prints "<status> <Berth-Host or ->"; the body is
# left in $T/body.
fetch() {
	_via=$1 _sb=$2 _path=${3:-/healthz}
	shift 2; [ $# -gt 0 ] && shift
	_ip=$(ipof "$_via")
	rm -f "$T/hdr" "$T/body"
	_code=$(inns "$_via" curl -sS --max-time 10 --cacert "$T/$_via/state/tls/ca.pem" \
		--resolve "17001-$_sb.$DOMAIN:8443:$_ip" -D "$T/hdr" -o "$T/body" \
		-w '%{http_code}' "$@" "https://17001-$_sb.$DOMAIN:8443$_path" 2>/dev/null)
	_bh=$(tr -d '\r' <"$T/hdr" 2>/dev/null | sed -n 's/^[Bb]erth-[Hh]ost: //p' | head -n 1)
	echo "${_code:-000} ${_bh:--}"
}
# served VIA SANDBOX HOST: the sandbox answers 200 through VIA, served by HOST
served() { [ "$(fetch "$1" "$2")" = "200 $3" ]; }
# fails_naming VIA SANDBOX PATTERN: 503 whose body matches PATTERN
fails_naming() {
	_r=$(fetch "$1" "$2")
	[ "${_r%% *}" = 503 ] && grep -Eq -- "$3" "$T/body"
}
# status_is VIA SANDBOX CODE
status_is() { [ "$(fetch "$1" "$2" | cut -d' ' -f1)" = "$3" ]; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ---- publish on A, fetch anywhere ------------------------------------------
nc_ a sandbox add sba --address 127.0.0.1 >/dev/null || bail "sandbox add on a"
# A keep-alive poller in B's namespace times the first 200 there: curl
# per attempt would measure its own start-up more than the propagation.
cat >"$T/poll.py" <<'PY'
import socket, ssl, sys, time
host, ip, ca = sys.argv[1:4]
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
s = ctx.wrap_socket(socket.create_connection((ip, 8443)), server_hostname=host)
req = ("GET /healthz HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n" % host).encode()
buf = b""
def get():
    global buf
    s.sendall(req)
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise SystemExit("closed")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    n = sum(int(l.split(":", 1)[1]) for l in lines[1:] if l.lower().startswith("content-length:"))
    while len(rest) < n:
        rest += s.recv(65536)
    buf = rest[n:]
    return int(lines[0].split()[1])
print(get(), flush=True)
end = time.time() + 10
while time.time() < end:
    if get() == 200:
        print(time.time_ns() // 1000000, flush=True)
        break
    time.sleep(0.002)
PY
spawn "$T/poll.out" ip netns exec "${N}b" python3 "$T/poll.py" "17001-sba.$DOMAIN" "$IP_b" \
	"$T/b/state/tls/ca.pem"
POLL_PID=$SPAWNED
wait_log 10 "$T/poll.out" "^404" "$POLL_PID" || bail "poller: $(cat "$T/poll.out")"
nc_ a port publish sba 17001 >/dev/null || bail "publish on a"
t0=$(now_ms)
wait_gone 15 "$POLL_PID"
t200=$(sed -n 2p "$T/poll.out")
[ -n "$t200" ] || bail "B never served the route: $(cat "$T/poll.out")"
t_b=$((t200 - t0))
[ "$t_b" -lt 0 ] && t_b=0
wait_for 10 served b sba a
is "A's sandbox through A's edge" "$(fetch a sba)" "200 a"
is "A's sandbox through B's edge, Berth-Host: a" "$(fetch b sba)" "200 a"
is "A's sandbox through C's edge, Berth-Host: a" "$(fetch c sba)" "200 a"
# The propagation time is bench-fleet's (and bench-timing's) to judge; here
# it only has to happen, well within the poller's 15 s.
if [ "$t_b" -le 10000 ]; then ok "published on A, served by B after $t_b ms (a liveness bound: 10 s)"
else not_ok "published on A, served by B after $t_b ms (a liveness bound: 10 s)"; fi
timing "fleet: published on A, served by B" "$t_b" - 1000
n=$(grep -c "GET /healthz" "$T/ta-a.reqlog")
[ "$n" -ge 3 ] && ok "A's upstream saw the requests of all three edges ($n)" ||
	not_ok "A's upstream saw only $n requests"
inns b curl -sS --max-time 10 --cacert "$T/b/state/tls/ca.pem" \
	--resolve "17001-sba.$DOMAIN:8443:$IP_b" -o "$T/echo" \
	"https://17001-sba.$DOMAIN:8443/echo" >/dev/null 2>&1
like "the owner's upstream sees the original Host" "$(cat "$T/echo")" \
	"17001-sba\\.$DOMAIN"
inns c curl -sS --max-time 10 --cacert "$T/b/state/tls/ca.pem" \
	--resolve "17001-sba.$DOMAIN:8443:$IP_b" -o "$T/echo" \
	"https://17001-sba.$DOMAIN:8443/echo" >/dev/null 2>&1
like "the owner's upstream sees the client's address (from C through B), not B's" \
	"$(tr 'A-Z' 'a-z' <"$T/echo")" "x-forwarded-for\", *\"$IP_c\""
like "netctl sandbox ls on C lists A's sandbox with its host" \
	"$(nc_ c sandbox ls)" "sba +running +- +- +- +a"
nc_ b fleet hosts >"$T/hosts.txt"
like "netctl fleet hosts on B: a up" "$(cat "$T/hosts.txt")" "^a +up +$IP_a:8443 +$IP_a:9443 +1 +10 +zone-a "
like "netctl fleet hosts on B: b up, this host" "$(cat "$T/hosts.txt")" "^b +up \\(this host\\)"
like "netctl fleet hosts on B: c up" "$(cat "$T/hosts.txt")" "^c +up +$IP_c"
nc_ b --json fleet hosts >"$T/hosts.json"
is "--json fleet hosts: three hosts, etcd ok" \
	"$(json_get "$(cat "$T/hosts.json")" '(len(j["hosts"]), j["etcd"])')" "(3, 'ok')"
# what each host has room for, published with it (issue 33): A holds
# sba of its fleet_capacity 10, refreshed at its next tick
a_room() { nc_ b fleet hosts | grep -qE "^a +up .* +1 +10 +zone-a +9 free"; }
if wait_for 10 a_room; then ok "fleet hosts on B: A's zone and room (9 of 10 free)"
else not_ok "fleet hosts on B: A's zone and room (9 of 10 free)"; diag "$(nc_ b fleet hosts)"; fi
is "--json: A's room as A published it" "$(json_get "$(nc_ b --json fleet hosts)" \
	'[(h["zone"], h["room"]["sandboxes"], h["room"]["free"]) for h in j["hosts"] if h["id"] == "a"][0]')" \
	"('zone-a', 1, 9)"

# the Python SDK's fleet calls (netctl/sdk/python), on B's control
# socket: the hosts and where each sandbox is; B drained (A's view too,
# through etcd), then undrained; another host's drain refused naming
# the field (drain a host through its own API)
out=$(PYTHONPATH="$top_srcdir/netctl/sdk/python" PYTHONDONTWRITEBYTECODE=1 \
	python3 - "$T/b/state/control.sock" "$T/a/state/control.sock" 2>&1 <<'PY'
import sys, time
import berth
b, a = berth.Client(socket=sys.argv[1]), berth.Client(socket=sys.argv[2])
def b_drained_on_a(want):
    end = time.monotonic() + 15
    while time.monotonic() < end:
        h = {x["id"]: x for x in a.fleet.hosts()["hosts"]}
        if bool(h["b"].get("drained")) == want:
            return "seen"
        time.sleep(0.1)
    return "not seen"
h = b.fleet.hosts()
print(h["self"], h["etcd"], sorted(x["id"] for x in h["hosts"] if x["up"]))
print([(s["id"], s["host"]) for s in b.fleet.sandboxes()["sandboxes"]
       if s["id"] == "sba"])
# (this berthd has no VMs: nothing of B's moves, "move" stays null)
d = b.fleet.drain(wait=True)
h = b.fleet.hosts()
print(d["host"], d["drained"], d["move"], h["drained"],
      [x["id"] for x in h["hosts"] if x.get("drained")], b_drained_on_a(True))
st = b.fleet.drain_status()
print(st["drained"], st["move"])
d = b.fleet.undrain("b")
print(d["drained"], b.fleet.hosts()["drained"], b_drained_on_a(False))
d = b.fleet.drain(move=False)
print(d["drained"], d["move"], b.fleet.undrain()["drained"])
for call in (lambda: b.fleet.drain("a"), lambda: b.fleet.undrain("a")):
    try:
        call()
    except berth.Conflict as e:
        print("Conflict", e.field)
PY
)
is "the Python SDK: fleet hosts, sandboxes, drain and undrain on B" "$out" \
"b ok ['a', 'b', 'c']
[('sba', 'a')]
b True None True ['b'] seen
True None
False False seen
True None False
Conflict host
Conflict host"

# private route: the owner checks the token, the edge only forwards
tok=$(nc_ a --json token create --sandbox sba | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
nc_ a port publish sba 17001 --private >/dev/null
wait_for 5 status_is b sba 401
is "private on A: through B without a token, 401" "$(fetch b sba)" "401 -"
is "private on A: through B with the token, 200 from a" \
	"$(fetch b sba /healthz -H "Authorization: Bearer $tok")" "200 a"
# berth_token: the edge forwards it for the owner to check; the owner
# answers the query token with its 302 and drops every one before its guest
r=$(fetch b sba "/echo?x=1&berth_token=$tok&berth_token=$tok")
is "private on A, query token through B: A's 302" "$r" "302 -"
like "...to the URL without either token" "$(tr -d '\r' <"$T/hdr")" 'Location: /echo\?x=1$'
r=$(fetch b sba "/echo?berth_token=$tok&x=1" -H "Cookie: __Host-berth_token=$tok")
is "private on A, cookie and query token through B: 200 from a" "$r" "200 a"
like "...A's guest sees neither" "$(cat "$T/body")" '"target":"/echo\?x=1"'
unlike "...anywhere in its log" "$(cat "$T/ta-a.reqlog")" "$tok"
nc_ a port publish sba 17001 --public >/dev/null
wait_for 5 served b sba a

# a custom host another host's sandbox holds is refused on this one
actl() { curl -s --unix-socket "$T/$1/state/control.sock" -X "$2" "http://berth$3" ${4:+-d "$4"}; }
actl a PUT /v1/sandboxes/sba/ports/17001 '{"host":"shop.fleet.test"}' >/dev/null
sees_host() { actl b GET /v1/fleet/sandboxes | grep -q shop.fleet.test; }
check "B learns A's custom host" wait_for 5 sees_host
nc_ b sandbox add sbb --address 127.0.0.1 >/dev/null || bail "sandbox add on b"
out=$(nc_ b port publish sbb 17002 --host shop.fleet.test 2>&1)
like "B refuses it for its own sandbox, naming the rule" "$out" \
	"held by another sandbox \(on another fleet host\)"
nc_ b sandbox rm sbb >/dev/null
actl a PUT /v1/sandboxes/sba/ports/17001 '{"host":null}' >/dev/null

# ---- streams through the hop: WebSocket, SSE, large bodies both ways -------
pyb() {
	inns b python3 "$PYTOOL" --addr "$IP_b" --port 8443 --host "17001-sba.$DOMAIN" \
		--ca "$T/b/state/tls/ca.pem" "$@"
}
like "WebSocket through B to A" "$(pyb ws hello fleet 2>&1)" "echo: fleet"
like "SSE through B to A, events as they come" \
	"$(pyb sse --path "/sse?count=3&interval=200" --count 3 2>&1)" \
	'"times": \[[0-9.]+, 0\.[1-9][0-9]*, 0\.[3-9]'
like "5 MB upload through B to A" "$(pyb upload --size 5000000 2>&1)" '\\"bytes\\":5000000'
like "20 MB download through B from A" "$(pyb download --path "/bytes?n=20000000" 2>&1)" \
	'"body_bytes": 20000000'

# ---- the fleet listener wants a fleet certificate ----------------------------
c1=$(inns b curl -s -o /dev/null -w '%{http_code}' --max-time 5 -k \
	--resolve "17001-sba.$DOMAIN:9443:$IP_a" "https://17001-sba.$DOMAIN:9443/healthz" 2>/dev/null)
is "A's fleet listener refuses a client without a certificate" "${c1:-000}" "000"
c2=$(inns b curl -s -o /dev/null -w '%{http_code}' --max-time 5 -k \
	--cert "$T/fleet/b.pem" --key "$T/fleet/b.key" \
	--resolve "17001-sba.$DOMAIN:9443:$IP_a" "https://17001-sba.$DOMAIN:9443/healthz" 2>/dev/null)
is "A's fleet listener serves a client with B's certificate" "$c2" "200"
openssl ecparam -name prime256v1 -genkey -noout -out "$T/rogue.key" 2>/dev/null
openssl req -new -x509 -key "$T/rogue.key" -subj /CN=b -days 1 -out "$T/rogue.pem" 2>/dev/null
c3=$(inns b curl -s -o /dev/null -w '%{http_code}' --max-time 5 -k \
	--cert "$T/rogue.pem" --key "$T/rogue.key" \
	--resolve "17001-sba.$DOMAIN:9443:$IP_a" "https://17001-sba.$DOMAIN:9443/healthz" 2>/dev/null)
is "A's fleet listener refuses a self-signed certificate" "${c3:-000}" "000"
"$top_srcdir/certs/berth-fleet-cert" "$T/fleet" host z "$IP_b" >/dev/null 2>&1 ||
	bail "berth-fleet-cert z"
c4=$(inns b curl -s -o "$T/body" -w '%{http_code}' --max-time 5 -k \
	--cert "$T/fleet/z.pem" --key "$T/fleet/z.key" \
	--resolve "17001-sba.$DOMAIN:9443:$IP_a" "https://17001-sba.$DOMAIN:9443/healthz" 2>/dev/null)
is "A's fleet listener refuses a valid fleet certificate of a host not in the fleet" \
	"${c4:-000}" "403"
like "...saying why" "$(cat "$T/body")" "names no host of this fleet holding a live lease"

# a sandbox id a live host holds cannot be created on another host
out=$(nc_ b sandbox add sba --address 127.0.0.1 2>&1)
rc=$?
is "B refuses to create sandbox sba, which A holds (exit 1)" "$rc" 1
like "...naming host a" "$out" "belongs to fleet host a, which is up"

# ---- a host's etcd values are not believed ----------------------------------
# Host A, with exactly its own etcd role's rights (its prefix), writes
# (1) entries that are no sandbox (a bad id and port 0; a value naming B
# under A's key), (2) a claim of B's sandbox sbb, (3) a claim of B's custom
# host, from a sandbox key A made before B took the name. A's own berthd
# would delete (2) and (3) at once, being honest: a compromised A would
# not, so for this part A's role keeps only reading its sandbox keys and
# the same rights go to a user "a-rogue". Every edge must keep its workers,
# skip and log the bad keys, and route sbb and its name to B, the first
# to claim them; nothing for sbb reaches A.
tok_root=$(ejson /v3/auth/authenticate '{"name":"root","password":"root-pw"}' |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
rootj() { ejson "$@" -H "Authorization: $tok_root"; }
{
	rootj /v3/auth/role/add '{"name":"a-sb"}'
	rootj /v3/auth/role/grant "{\"name\":\"a-sb\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"$(b64 /bfl/sandboxes/a/)\",\"range_end\":\"$(b64 /bfl/sandboxes/a0)\"}}"
	rootj /v3/auth/user/add '{"name":"a-rogue","password":"pw-rogue"}'
	rootj /v3/auth/user/grant '{"user":"a-rogue","role":"a"}'
	rootj /v3/auth/user/grant '{"user":"a-rogue","role":"a-sb"}'
	rootj /v3/auth/role/revoke "{\"role\":\"a\",\"key\":\"$(b64 /bfl/sandboxes/a/)\",\"range_end\":\"$(b64 /bfl/sandboxes/a0)\"}"
} >"$T/etcd-rogue.log"
grep -q '"error"' "$T/etcd-rogue.log" && { diag "$(cat "$T/etcd-rogue.log")"; bail "etcd: the rogue's user"; }
tok_rogue=$(ejson /v3/auth/authenticate '{"name":"a-rogue","password":"pw-rogue"}' |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
# rput KEY JSON: A's rights, A's prefix
rput() { ejson /v3/kv/put "{\"key\":\"$(b64 "$1")\",\"value\":\"$(b64 "$2")\"}" \
	-H "Authorization: $tok_rogue"; }
like "the rogue's user cannot write under B" \
	"$(rput /bfl/sandboxes/b/x '{}')" 'permission denied'
sbval() {	# HOST ID [CUSTOM HOST]
	printf '{"host":"%s","sandbox":{"id":"%s","state":"running","ports":[{"port":17001,"host_header":"preserve","visibility":"public"%s}]}}' \
		"$1" "$2" "${3:+,\"host\":\"$3\"}"
}
# A's sandbox key for "evil" is older than B's sandbox and name
like "A writes a sandbox key of its own, evil" "$(rput /bfl/sandboxes/a/evil "$(sbval a evil)")" '"header"'
sees_evil() { actl c GET /v1/fleet/sandboxes | grep -q '"evil"'; }
wait_for 10 sees_evil || bail "C does not see A's sandbox evil"
nc_ b sandbox add sbb --address 127.0.0.1 >/dev/null || bail "sandbox add sbb on b"
nc_ b port publish sbb 17001 --private >/dev/null || bail "publish sbb on b"
actl b PUT /v1/sandboxes/sbb/ports/17001 '{"host":"shop-b.fleet.test"}' >/dev/null
tokb=$(nc_ b --json token create --sandbox sbb | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
# fetch_name VIA NAME [CURL ARGS...]: like fetch, for a custom host
fetch_name() {
	_via=$1 _name=$2; shift 2
	_ip=$(ipof "$_via")
	rm -f "$T/hdr" "$T/body"
	_code=$(inns "$_via" curl -sS -k --max-time 10 --resolve "$_name:8443:$_ip" \
		-D "$T/hdr" -o "$T/body" -w '%{http_code}' "$@" "https://$_name:8443/healthz" 2>/dev/null)
	_bh=$(tr -d '\r' <"$T/hdr" 2>/dev/null | sed -n 's/^[Bb]erth-[Hh]ost: //p' | head -n 1)
	echo "${_code:-000} ${_bh:--}"
}
served_tok() { [ "$(fetch "$1" "$2" /healthz -H "Authorization: Bearer $tokb")" = "200 $3" ]; }
served_name() { [ "$(fetch_name "$1" "$2" -H "Authorization: Bearer $tokb")" = "200 $3" ]; }
for h in a c; do
	wait_for 10 served_tok "$h" sbb b && wait_for 10 served_name "$h" shop-b.fleet.test b ||
		bail "$h does not serve B's sbb and its name"
done
workers_of() { BERTHD_PID=$1 berthd_workers | tr '\n' ' '; }
w_a=$(workers_of "$PID_a") w_b=$(workers_of "$PID_b") w_c=$(workers_of "$PID_c")

rput /bfl/sandboxes/a/Bad_Id '{"host":"a","sandbox":{"id":"Bad_Id","state":"running","ports":[{"port":0,"host_header":"preserve","visibility":"public"}]}}' >/dev/null
rput /bfl/sandboxes/a/zero "$(sbval a zero | sed 's/"port":17001/"port":0/')" >/dev/null
rput /bfl/sandboxes/a/sbx "$(sbval b sbx)" >/dev/null
like "A claims B's sandbox sbb under its own key" "$(rput /bfl/sandboxes/a/sbb "$(sbval a sbb)")" '"header"'
rput /bfl/sandboxes/a/evil/name/shop-b.fleet.test \
	'{"host":"a","sandbox":"evil","name":"shop-b.fleet.test"}' >/dev/null
like "A claims B's custom host for evil" \
	"$(rput /bfl/sandboxes/a/evil "$(sbval a evil shop-b.fleet.test)")" '"header"'
for h in a b c; do
	_l=$T/$h/berthd.log
	_p=$(eval "echo \$PID_$h")
	wait_log 10 "$_l" "fleet: etcd key /bfl/sandboxes/a/Bad_Id is not used: its id part" "$_p" &&
	wait_log 10 "$_l" "fleet: etcd key /bfl/sandboxes/a/zero is not used: port 0" "$_p" &&
	wait_log 10 "$_l" "fleet: etcd key /bfl/sandboxes/a/sbx is not used: its value's \"host\"" "$_p"
	check "$h logs each bad key by name" test $? = 0
	# A's own keys are no claims on A: its store says what it holds
	[ "$h" = a ] && continue
	wait_log 10 "$_l" "fleet: sandbox sbb is claimed by host a \\(revision [0-9]+\\) and, first, by host b" "$_p" &&
	wait_log 10 "$_l" "fleet: custom host shop-b.fleet.test is claimed by host a for sandbox evil \\(revision [0-9]+\\) and, first, by host b" "$_p"
	check "$h logs each claim that came later" test $? = 0
done
like "A's honest berthd tried to delete what it does not hold (its role may not now)" \
	"$(cat "$T/a/berthd.log")" "fleet: etcd answered 403 to a request: etcdserver: permission denied"
for h in a b c; do
	is "through $h's edge, sbb (with B's token) is B's" \
		"$(fetch "$h" sbb /healthz -H "Authorization: Bearer $tokb")" "200 b"
	is "through $h's edge, shop-b.fleet.test is B's" \
		"$(fetch_name "$h" shop-b.fleet.test -H "Cookie: __Host-berth_token=$tokb")" "200 b"
done
like "C's fleet view lists sbb on b only" "$(actl c GET /v1/fleet/sandboxes | python3 -c '
import json, sys
print(sorted((s["id"], s["host"]) for s in json.load(sys.stdin)["sandboxes"] if s["id"] in ("sbb", "sbx", "zero")))')" \
	"^\\[\\('sbb', 'b'\\)\\]$"
is "...and A's evil without B's name" "$(actl c GET /v1/fleet/sandboxes | python3 -c '
import json, sys
print([s["host"] + ":" + str([p.get("host") for p in s["ports"]]) for s in json.load(sys.stdin)["sandboxes"] if s["id"] == "evil"])')" \
	"['a:[None]']"
is "no worker of A was replaced" "$(workers_of "$PID_a")" "$w_a"
is "no worker of B was replaced" "$(workers_of "$PID_b")" "$w_b"
is "no worker of C was replaced" "$(workers_of "$PID_c")" "$w_c"
for h in a b c; do
	unlike "no worker of $h left a route out (the fleet layer checked first)" \
		"$(cat "$T/$h/berthd.log")" "routes: [0-9]+ bad entr|killed by signal|exited with status"
done
# A's access log would have any request B's or C's edge forwarded to it
unlike "nothing for sbb or B's name reached A from B's or C's edge" \
	"$(grep -E "^access [^ ]+ ($IP_b|$IP_c) " "$T/a/berthd.log")" "sbb|shop-b"
like "...which logs the requests its own edge forwarded to B" \
	"$(grep -E "^access [^ ]+ $IP_a " "$T/a/berthd.log")" " shop-b\\.fleet\\.test:8443 sbb 17001 GET /healthz 200 "
unlike "A's guest never saw B's token" "$(cat "$T/ta-a.reqlog")" "$tokb"

# A's role back: A's berthd deletes the claims it does not hold
rootj /v3/auth/role/grant "{\"name\":\"a\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"$(b64 /bfl/sandboxes/a/)\",\"range_end\":\"$(b64 /bfl/sandboxes/a0)\"}}" >/dev/null
keys_a() { ejson /v3/kv/range "{\"key\":\"$(b64 /bfl/sandboxes/a/)\",\"range_end\":\"$(b64 /bfl/sandboxes/a0)\",\"keys_only\":true}" \
	-H "Authorization: $tok_rogue" | python3 -c '
import base64, json, sys
print(" ".join(sorted(base64.b64decode(k["key"]).decode() for k in json.load(sys.stdin).get("kvs", []))))'; }
no_claims() { ! keys_a | grep -Eq "/(sbb|evil)( |$|/)"; }
check "A's honest berthd deletes A's claims it does not hold" wait_for 10 no_claims
for k in Bad_Id zero sbx; do
	ejson /v3/kv/deleterange "{\"key\":\"$(b64 /bfl/sandboxes/a/$k)\"}" -H "Authorization: $tok_rogue" >/dev/null
done
is "A's prefix holds sba only again" "$(keys_a)" "/bfl/sandboxes/a/sba"
nc_ b sandbox rm sbb >/dev/null

# ---- host loss: kill -9 A ----------------------------------------------------
kill -KILL "$PID_a"
wait_gone 10 "$PID_a" || bail "berthd a did not die"
t0=$(now_ms)
wait_for 5 fails_naming b sba "host a"
like "A killed: B answers 503 naming host a at once" "$(cat "$T/body")" \
	"sandbox sba is on host a"
wait_for $((TTL + 5)) fails_naming c sba "host a, which is down"
t_down=$(( $(now_ms) - t0 ))
like "A's lease expired: C answers 503 naming a" "$(cat "$T/body")" \
	"sandbox sba is on host a, which is down \\(it holds no fleet lease\\)"
if [ "$t_down" -le $(( (TTL + 2) * 1000 )) ]; then
	ok "lease loss seen $t_down ms after the kill (TTL ${TTL}s + 2 s slack)"
else
	not_ok "lease loss seen $t_down ms after the kill (TTL ${TTL}s)"
fi
grep -q "Retry-After" "$T/hdr" && ok "with Retry-After" || not_ok "no Retry-After"
like "fleet hosts on B: a down" "$(nc_ b fleet hosts)" "a +down"
like "sandbox ls on B: sba on a (down)" "$(nc_ b sandbox ls)" "sba .* a \\(down\\)"

# ---- A returns ---------------------------------------------------------------
start_host a
wait_for 10 served b sba a
is "A restarted: B serves sba again from a" "$(fetch b sba)" "200 a"
wait_for 10 served c sba a
is "A restarted: C serves sba again from a" "$(fetch c sba)" "200 a"

# ---- C loses etcd ------------------------------------------------------------
nc_ c sandbox add sbc --address 127.0.0.1 >/dev/null || bail "sandbox add on c"
nc_ c port publish sbc 17001 >/dev/null || bail "publish on c"
wait_for 10 served a sbc c
is "C's sandbox through A" "$(fetch a sbc)" "200 c"
inns c ip route add blackhole "$ETCD_IP/32"
wait_log $((TTL + 10)) "$T/c/berthd.log" "fleet: etcd .* unreachable" "$PID_c" &&
	ok "C notices it lost etcd" || not_ok "C did not log the loss of etcd"
is "cut off: C serves its own sandbox" "$(fetch c sbc)" "200 c"
is "cut off: C still forwards to A from its last view" "$(fetch c sba)" "200 a"
nc_ c sandbox add sbc2 --address 127.0.0.1 >/dev/null
nc_ c port publish sbc2 17001 >/dev/null
wait_for 5 served c sbc2 c
is "cut off: a sandbox published on C meanwhile is served by C" "$(fetch c sbc2)" "200 c"
wait_for $((TTL + 8)) fails_naming a sbc "host c, which is down"
like "A sees C's lease expire: 503 naming c" "$(cat "$T/body")" "host c, which is down"
is "A does not know sbc2 yet" "$(fetch a sbc2 | cut -d' ' -f1)" "404"

inns c ip route del blackhole "$ETCD_IP/32"
wait_for 20 served a sbc2 c
is "etcd back: A serves the sandbox C published while cut off" "$(fetch a sbc2)" "200 c"
is "etcd back: B serves it too" "$(fetch b sbc2)" "200 c"
is "etcd back: A serves sbc again" "$(fetch a sbc)" "200 c"
n=$(grep -c "fleet: registered host c" "$T/c/berthd.log")
[ "$n" -ge 2 ] && ok "C registered again ($n registrations)" ||
	not_ok "C registered $n time(s)"
like "fleet hosts on A: c up again" "$(nc_ a fleet hosts)" "c +up"

# ---- a deleted sandbox leaves the fleet --------------------------------------
nc_ c sandbox rm sbc2 >/dev/null
wait_for 5 status_is b sbc2 404
is "removed on C: 404 through B" "$(fetch b sbc2 | cut -d' ' -f1)" "404"

# ---- a graceful stop revokes the lease: no TTL to wait -----------------------
kill -TERM "$PID_c"
t0=$(now_ms)
wait_for 5 fails_naming a sbc "host c, which is down"
t_rev=$(( $(now_ms) - t0 ))
like "C stopped: A answers 503 naming c" "$(cat "$T/body")" "host c, which is down"
if [ "$t_rev" -lt $(( (TTL - 1) * 1000 )) ]; then ok "seen after $t_rev ms, before any TTL"
else not_ok "seen after $t_rev ms: the lease was not revoked"; fi
wait_gone 15 "$PID_c"

for h in $HOSTS; do
	unlike "no worker of $h died" "$(cat "$T/$h/berthd.log")" "killed by signal|exited with status"
done
done_testing
