#!/bin/sh
# fleet-place.sh — placement (issue 33): three VM hosts on loopback, one
# etcd, each with its own room (vm_max_running a 1, b 2, c 1; zones a, b
# x and c y); every create goes through host a's API (qemu TCG, the
# minimal template; four boots, and one more for the fallback):
#  - no host named: the host with the most room (b), forwarded over
#    mutual TLS to b's fleet_api_listen; the answer and netctl say b, the
#    fleet's view holds it on b, it runs there and its URL answers
#    through a's edge (Berth-Host: b)
#  - --host c lands on c; an unknown host or zone: 404 naming it
#  - a full zone (--zone y: c at vm_max_running 1 with nothing idle) and
#    then a full fleet (every host at its cap, a command in each
#    sandbox): 507 no_room naming what each host said
#  - kill -9 of b (the host with the most room again): the create goes
#    to the next host and says b refused it; once b's lease expired,
#    --host b is refused as down
#  - b's fleet_api_listen (served by its control helper): no client
#    certificate, one of a host without a lease (403), another route
#    (404), a create not naming b (400), b's admin token sent by a
#    fleet peer (still 404)
#  - a fleet host that lies (d, a python3 TLS server with d's
#    certificate, its lease written here): a body that is not JSON, one
#    past 1 MiB, bytes that are not HTTP: each a 502 placement_failed
#    naming d, read by a's control helper; a's berthd lives on
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_root
need_tool etcd
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

etcd_start bfpl
# d: a certificate, no host
fleet_certs a b c d

# host_conf H N ZONE POOL: $T/H/berth.conf, a VM host with fresh ports,
# vm_max_running N
host_conf() {
	mkdir -p "$T/$1/state"
	eval "HTTPS_$1=$(free_port)"
	{
		echo "domain $DOMAIN"
		echo "listen https 127.0.0.1:$(eval echo "\$HTTPS_$1")"
		echo "workers 1"
		echo "user nobody"
		echo "vmm on"
		echo "vm_template minimal"
		echo "accel tcg"
		echo "egress off"
		echo "vm_ready_snapshot off"
		echo "template_build_ready off"
		echo "tap_prefix bp$1"
		echo "vm_pool $4"
		echo "vm_max_running $2"
		# rooms by the caps alone: a loaded machine's idle CPU
		# would make them vary (vm_room_cpu)
		echo "vm_room_cpu off"
		echo "idle_pause never"
		echo "idle_suspend never"
		echo "fleet_etcd http://127.0.0.1:$CPORT"
		echo "fleet_host $1"
		echo "fleet_zone $3"
		echo "fleet_listen 127.0.0.1:$(free_port)"
		echo "fleet_api_listen 127.0.0.1:$(free_port)"
		echo "fleet_ca $T/fleet/fleet-ca.pem"
		echo "fleet_cert $T/fleet/$1.pem $T/fleet/$1.key"
		echo "fleet_ttl 3s"
		echo "fleet_prefix /bfpl"
	} >"$T/$1/berth.conf"
}
host_conf a 1 x 10.212.41.0/24
host_conf b 2 x 10.212.42.0/24
host_conf c 1 y 10.212.43.0/24
for h in a b c; do
	spawn "$T/$h/berthd.log" "$BERTHD" -f "$T/$h/berth.conf" -s "$T/$h/state"
	eval "PID_$h=$SPAWNED"
done
for h in a b c; do
	wait_log 120 "$T/$h/berthd.log" "fleet: registered host $h" "$(eval echo "\$PID_$h")" ||
		{ tail -n 30 "$T/$h/berthd.log" >&2; bail "berthd $h did not start"; }
done

nc_() { _h=$1; shift; "$NETCTL" -s "$T/$_h/state" "$@"; }
# room H FIELD: what a's view of the fleet says of host H's room
room() {
	nc_ a --json fleet hosts | json_get "$(cat)" \
		"[h.get('room', {}).get('$2') for h in j['hosts'] if h['id'] == '$1' and h.get('up')][0]"
}
room_is() { [ "$(room "$1" "$2")" = "$3" ]; }
# the sandbox's host in a's view of the fleet
where() {
	nc_ a --json sandbox ls | json_get "$(cat)" \
		"[s['host'] for s in j['sandboxes'] if s['id'] == '$1'][0]"
}
# create ID [OPTIONS]: through a's API (JSON answer in $T/create.json)
create() {
	_id=$1; shift
	nc_ a --json sandbox create "$_id" "$@" >"$T/create.json" 2>"$T/create.err"
}
answer() { json_get "$(cat "$T/create.json")" "$1"; }
# create_events H ID: the reasons of sandbox ID's create events on host H
create_events() {
	nc_ "$1" --json sandbox events "$2" | json_get "$(cat)" \
		"' | '.join(e.get('reason', '') for e in j['events'] if e['operation'] == 'create')"
}
# hold H ID: a command keeps sandbox ID (on host H) busy: nothing idle
hold() {
	spawn "$T/hold-$2.out" "$NETCTL" -s "$T/$1/state" sandbox exec "$2" -- \
		sh -c 'touch /tmp/held; sleep 300'
	eval "HOLD_$2=\$SPAWNED"
	wait_for 30 sh -c "\"$NETCTL\" -s \"$T/$1/state\" sandbox exec $2 -- test -e /tmp/held </dev/null" ||
		not_ok "a command holds $2"
}

# every host sees the others' room, with their templates (default)
for h in a b c; do
	wait_for 60 room_is "$h" templates '["default"]' ||
		bail "a's view has no room of host $h: $(nc_ a --json fleet hosts)"
done
wait_for 60 room_is b running_more 2 || bail "b's room: $(room b running_more)"
is "a's view: a, b, c can take 1, 2, 1 more running" \
	"$(room a running_more) $(room b running_more) $(room c running_more)" "1 2 1"

# ---- no host named: the most room ----
t0=$(date +%s)
out=$(nc_ a sandbox create p1 2>&1) || bail "create p1: $out"
like "no host named: placed on b (the most running_more), netctl says so" \
	"$out" "placed on fleet host b"
like "... and waits until it runs" "$out" "sandbox p1 created .*running"
is "the fleet's view holds it on b" "$(where p1)" b
like "its id is b's now (a create of p1 again: 409)" "$(nc_ a sandbox create p1 2>&1)" \
	"belongs to fleet host b"
is "it runs on b (exec there)" "$(nc_ b sandbox exec p1 -- echo placed 2>&1)" placed
like "b's create event says where it came from" "$(create_events b p1)" \
	"placed on host b by fleet host a"
nc_ b port publish p1 8080 >/dev/null || bail "publish p1 on b"
via_a() {
	curl -sS --max-time 30 --cacert "$T/a/state/tls/ca.pem" --connect-to "::127.0.0.1:" \
		-D "$T/hdr" -o "$T/body" -w '%{http_code}' \
		"https://8080-$1.$DOMAIN:$HTTPS_a/healthz" 2>/dev/null
}
served_a() { [ "$(via_a "$1")" = 200 ]; }
wait_for 30 served_a p1
is "its URL answers through a's edge" "$(via_a p1)" 200
like "... from b" "$(cat "$T/hdr")" "Berth-Host: b"
# b's fleet_api_listen: the fleet's certificates only, creates only
API_b=$(sed -n 's/^fleet_api_listen //p' "$T/b/berth.conf")
peer() {	# CERT METHOD PATH: the status b's fleet API answers
	curl -s --max-time 10 --cacert "$T/fleet/fleet-ca.pem" ${1:+--cert "$T/fleet/$1.pem" --key "$T/fleet/$1.key"} \
		-X "$2" -H 'Content-Type: application/json' -d '{"id":"px"}' \
		-o "$T/peer.body" -w '%{http_code}' "https://$API_b$3" 2>/dev/null
}
code=$(peer "" POST /v1/sandboxes)
is "b's fleet API: no client certificate, no HTTP" "$code" 000
is "... the certificate of a host holding no lease: 403" "$(peer d POST /v1/sandboxes)" 403
is "... a fleet peer may not ask another route" "$(peer a POST /v1/sandboxes/p1/exec)" 404
is "... a forwarded create must name b" "$(peer a POST /v1/sandboxes)" 400
# a fleet peer is who its certificate says, never a token's bearer: b's
# admin token sent on that listener gives it nothing more
admin_b=$(nc_ b token create --admin --name fp | head -n 1)
code=$(curl -s --max-time 10 --cacert "$T/fleet/fleet-ca.pem" --cert "$T/fleet/a.pem" \
	--key "$T/fleet/a.key" -H "Authorization: Bearer $admin_b" \
	-o "$T/peer.body" -w '%{http_code}' "https://$API_b/v1/sandboxes" 2>/dev/null)
is "... with b's admin token, a fleet peer may still not list sandboxes (404)" "$code" 404
nc_ a sandbox create p1x --host b --zone y >"$T/o" 2>&1
like "--host b --zone y: b is not in zone y" "$(cat "$T/o")" "no fleet host b in zone 'y'"

# ---- --host, unknown host or zone ----
out=$(nc_ a sandbox create p2 --host c 2>&1) || bail "create p2 --host c: $out"
like "--host c: placed on c, netctl says so" "$out" "placed on fleet host c"
is "... the view holds it on c" "$(where p2)" c
create px --host nosuch
is "unknown host: 404" "$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" unknown_host
like "... naming it" "$(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')" "no fleet host 'nosuch'"
create px --zone nosuch
is "unknown zone: 404" "$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" unknown_zone
like "... naming it" "$(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')" "zone 'nosuch'"
# ---- fleet drain: a host placed on no more, kept in its state dir ----
out=$(nc_ b fleet drain --stay 2>&1)
like "netctl fleet drain --stay on b: b drained, its sandboxes stay" "$out" "fleet host b drained: placed on no more .its sandboxes stay"
check "... kept across restarts (its state dir)" test -e "$T/b/state/fleet-drained"
b_drained() { nc_ a fleet hosts | grep -q "^b  *up, drained "; }
wait_for 10 b_drained
check "... a's fleet hosts shows it" b_drained
create px --host b
like "a create for b through a: refused, b is drained" \
	"$(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')" "b: drained"
# a forwarded create from a peer whose view is older: 507, the next host
code=$(curl -s --max-time 10 --cacert "$T/fleet/fleet-ca.pem" --cert "$T/fleet/a.pem" \
	--key "$T/fleet/a.key" -X POST -H 'Content-Type: application/json' \
	-d '{"id":"px","host":"b"}' -o "$T/peer.body" -w '%{http_code}' \
	"https://$API_b/v1/sandboxes" 2>/dev/null)
is "... and a create a peer forwards to b anyway: 507 drained" \
	"$code:$(json_get "$(cat "$T/peer.body")" 'j["error"]["code"]')" "507:drained"
out=$(nc_ b fleet drain c 2>&1)
check "b's API drains b only (exit non-zero for c)" test $? -ne 0
like "... saying to ask c's own API" "$out" "through its own API"
out=$(nc_ b fleet undrain b 2>&1)
like "netctl fleet undrain b: placed on again" "$out" "fleet host b undrained"
check "... no longer kept" test ! -e "$T/b/state/fleet-drained"
b_placeable() { ! nc_ a fleet hosts | grep -q "^b .*drained"; }
wait_for 10 b_placeable
check "... a's view has b placeable again" b_placeable

# the Python SDK's create takes host and zone (the same API)
out=$(PYTHONPATH="$top_srcdir/netctl/sdk/python" python3 -c '
import sys, berth
c = berth.Client(socket=sys.argv[1])
for kw in ({"zone": "nosuch"}, {"host": "nosuch"}):
    try:
        berth.Sandbox.create(c, id="px", **kw)
    except berth.APIError as e:
        print(e.status, e.code)
' "$T/a/state/control.sock" 2>&1)
is "the Python SDK: zone= and host= reach the placement (404 unknown_zone, unknown_host)" \
	"$out" "404 unknown_zone
404 unknown_host"
create px --template nosuch
is "a template no host holds: 507 no_template" \
	"$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" no_template

# ---- a full zone, then a full fleet ----
hold c p2
wait_for 30 room_is c running_more 0 || diag "c's room: $(room c running_more)"
create p3 --zone y
is "zone y full (c at its cap, nothing idle): 507 no_room" \
	"$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" no_room
like "... naming what c said" "$(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')" \
	"c: .*vm_max_running 1"
# a and b: one more each
wait_for 30 room_is b running_more 1 || diag "b's room: $(room b running_more)"
create p3 || bail "create p3: $(cat "$T/create.json" "$T/create.err")"
h3=$(answer 'j["host"]')
# the room a host publishes follows its capacity sample, a tick later:
# the next create waits for it (else it is placed on the stale room, and
# that host suspends an idle sandbox to make room)
wait_for 30 room_is "$h3" running_more 0 ||
	diag "$h3's room: $(room "$h3" running_more)"
create p4 || bail "create p4: $(cat "$T/create.json" "$T/create.err")"
h4=$(answer 'j["host"]')
is "the next two go to a and b (one more running each)" \
	"$(printf '%s\n' "$h3" "$h4" | sort | tr '\n' ' ')" "a b "
hold b p1
hold "$h3" p3
hold "$h4" p4
for h in a b c; do
	wait_for 30 room_is "$h" running_more 0 || diag "$h's room: $(room "$h" running_more)"
done
create p5
is "a full fleet: 507" "$(json_get "$(cat "$T/create.json")" 'j["error"]["status"]')" 507
is "... no_room" "$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" no_room
like "... naming what each host tried said" \
	"$(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')" \
	"no fleet host took sandbox 'p5': [abc]: .*vm_max_running.*; [abc]: .*vm_max_running"
diag "507: $(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')"

# ---- a host killed: the next one, then skipped ----
for s in p1 p3 p4 p2; do kill "$(eval echo "\$HOLD_$s")" 2>/dev/null; done
nc_ b sandbox rm p1 >/dev/null || bail "rm p1"
[ "$h3" = b ] && { nc_ b sandbox rm p3 >/dev/null || diag "rm p3 on b failed"; nc_ a sandbox rm p4 >/dev/null || diag "rm p4 on a failed"; }
[ "$h3" = a ] && { nc_ a sandbox rm p3 >/dev/null || diag "rm p3 on a failed"; nc_ b sandbox rm p4 >/dev/null || diag "rm p4 on b failed"; }
wait_for 30 room_is b running_more 2 || diag "b's room: $(room b running_more)"
wait_for 30 room_is a running_more 1 || diag "a's room: $(room a running_more)"
# b ranks first (its room more than a's: the caps alone, vm_room_cpu off)
is "before the kill: b's room 2, a's 1" "$(room b running_more) $(room a running_more)" "2 1"
kill -9 "$PID_b"
create p6 || bail "create p6: $(cat "$T/create.json" "$T/create.err")"
is "b killed, its lease not yet expired: the create goes to the next (a)" \
	"$(answer 'j["host"]')" a
like "... and says b failed first" "$(answer 'j["placement_failed"]')" "^b: "
like "... in a's create event too" "$(create_events a p6)" "placed on host a .*after b: "
# down: listed with up false (its placement still in etcd), or gone
b_down() { [ "$(nc_ a --json fleet hosts | json_get "$(cat)" "'b' in [h['id'] for h in j['hosts'] if h.get('up')]")" = False ]; }
wait_for 30 b_down || diag "b still up in a's view"
create p7 --host b
like "once b's lease expired, --host b is refused (down or unknown)" \
	"$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" "host_down|unknown_host"

# ---- a fleet host that lies: its answer is read by a's control helper ----
# d: a certificate of the fleet, a lease in etcd (written here), and a
# fleet_api_listen that answers a create with what no host should
LPORT=$(free_port)
cat >"$T/liar.py" <<'PYEOF'
import socket, ssl, sys
d, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(d + "/d.pem", d + "/d.key")
ctx.load_verify_locations(d + "/fleet-ca.pem")
ctx.verify_mode = ssl.CERT_REQUIRED
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)
print("listening", flush=True)
answers = [
    b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
    b"Content-Length: 9\r\n\r\nnot json!",
    "big",
    b"SSH-2.0-liar\r\n\r\n",
]
n = 0
while True:
    c, _ = ls.accept()
    try:
        s = ctx.wrap_socket(c, server_side=True)
        s.settimeout(20)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
        a = answers[n % len(answers)]
        n += 1
        print("answering", n, flush=True)
        if a == "big":	# 2 MiB of JSON, chunked
            s.sendall(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"1\r\n[\r\n")
            for i in range(32):
                s.sendall(b"%x\r\n%s\r\n" % (65536, b" " * 65536))
            s.sendall(b"1\r\n]\r\n0\r\n\r\n")
        else:
            s.sendall(a)
        s.close()
    except Exception as e:
        print("connection:", e, flush=True)
        c.close()
PYEOF
spawn "$T/liar.log" python3 "$T/liar.py" "$T/fleet" "$LPORT"
wait_log 10 "$T/liar.log" listening "$SPAWNED" || bail "the lying peer did not start"
# d's lease and host record, through etcd's JSON gateway
etcd_post() {
	curl -sS --max-time 10 -X POST "http://127.0.0.1:$CPORT/v3/$1" -d "$2"
}
lease=$(etcd_post lease/grant '{"TTL": 600}' | json_get "$(cat)" 'j["ID"]') ||
	bail "etcd lease"
b64() { printf '%s' "$1" | base64 -w0; }
dval='{"id":"d","edge":"127.0.0.1:1","fleet":"127.0.0.1:1","capacity":0,"started":1,"zone":"z","api":"127.0.0.1:'"$LPORT"'","room":{"sandboxes":0,"running_more":5,"suspended_more":5,"memory_available_bytes":17179869184,"templates":["default"]}}'
etcd_post kv/put "{\"key\":\"$(b64 /bfpl/hosts/d)\",\"value\":\"$(b64 "$dval")\",\"lease\":\"$lease\"}" \
	>/dev/null || bail "etcd put d"
wait_for 30 room_is d running_more 5 || bail "a's view has no host d: $(nc_ a --json fleet hosts)"
liar() {	# ID PATTERN WHAT
	create "$1" --host d
	is "a lying peer ($3): 502" "$(json_get "$(cat "$T/create.json")" 'j["error"]["status"]')" 502
	is "... placement_failed" "$(json_get "$(cat "$T/create.json")" 'j["error"]["code"]')" \
		placement_failed
	like "... naming d and why" "$(json_get "$(cat "$T/create.json")" 'j["error"]["message"]')" \
		"sandbox '$1': d: .*$2"
}
liar pl1 "not JSON" "a body that is not JSON"
liar pl2 "1 MiB" "a body past 1 MiB"
liar pl3 "malformed answer" "not HTTP"
check "... and a's berthd is still there" kill -0 "$PID_a"
check "... and answers (sandbox ls)" "$NETCTL" -s "$T/a/state" sandbox ls
is "a's control helper read them all, never restarted" \
	"$(grep -Ec 'control helper \(pid [0-9]+\) (killed|exited)' "$T/a/berthd.log")" 0
diag "fleet-place.sh took $(( $(date +%s) - t0 )) s from the first create"
done_testing
