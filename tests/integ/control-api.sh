#!/bin/sh
# control-api.sh — the control API under concurrency, and an MCP session.
#
# 100 netctl port publish calls on one sandbox at once, then 100 mixed
# unpublish / re-publish / publish calls at once: every call succeeds, and
# the end state is consistent — `netctl --json port ls` lists exactly the
# expected ports, each listed port routes through berthd (the testapp's
# answers 200, the others reach the sandbox and get 502 "nothing
# listens"), each unpublished one gets 404 naming the port, and berthd is
# still healthy.
#
# MCP: `netctl mcp` on stdio driven line by line through a FIFO
# (initialize, notifications/initialized, tools/list, tools/call
# publish_port); the URL publish_port returns answers 200 through berthd.
# A second session started with the sandbox's token (over the TLS control
# listener) publishes on its own sandbox and is refused another's.
#
# Lock-out: 200 idle TCP connections to control_listen, and `netctl
# status` on the unix socket still answers; the TCP budget, the
# per-address cap and the handshake and authentication deadlines close
# what no token holds; a 401 closes its connection.
#
# The TCP listener is a helper ("berthd: control", not root, chrooted):
# killed with SIGKILL, its death is logged, it comes back, and netctl over
# TCP works again; a malformed JSON body never reaches berthd. Broken
# requests through it (a streamed body broken after its head, a bad
# trailer, a request pipelined behind an error) are answered once and
# closed, and neither process dies of them. Both readers are http1.c's
# (the proxy's rules): a request without Host, or with two framings, is
# refused; an empty line between two requests is skipped; curl works.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

CTL_PORT=$(free_port)
berthd_config "control_listen 127.0.0.1:$CTL_PORT"
start_berthd
start_testapp app

# jg JSON EXPR: lib.sh's json_get, with python3 -I (no site packages:
# three times faster to start on a loaded machine; this test calls it
# often).
jg() {
	printf '%s' "$1" | python3 -I -c 'import json,sys
j=json.load(sys.stdin)
v=eval(sys.argv[1])
print(v if not isinstance(v,(dict,list)) else json.dumps(v))' "$2"
}

SB=cc-1
BASE=10000	# ports BASE+1 .. BASE+130 take part in the churn
[ "$TA_PORT" -gt $((BASE + 130)) ] || [ "$TA_PORT" -le "$BASE" ] ||
	bail "testapp port $TA_PORT collides with the churn range"

out=$(netctl sandbox add "$SB" --address 127.0.0.1) || bail "sandbox add: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
out=$(netctl sandbox add cc-2 --address 127.0.0.1) || bail "sandbox add: $out"
check "publish the testapp port" publish "$SB" "$TA_PORT"

mkdir -p "$T/rc" "$T/out"
# op VERB PORT: one netctl call in the background; its exit status goes to
# $T/rc/VERB.PORT, its output to $T/out/VERB.PORT. wait_ops waits for
# them (a bare wait would wait for berthd too).
OPS=""
op() {
	( netctl port "$1" "$SB" "$2" >"$T/out/$1.$2" 2>&1
	  echo $? >"$T/rc/$1.$2" ) &
	OPS="$OPS $!"
}
wait_ops() { wait $OPS; OPS=""; }
# failed_ops: "VERB.PORT(rc): output" for every call that did not exit 0.
failed_ops() {
	for _f in "$T"/rc/*; do
		[ -e "$_f" ] || continue
		_r=$(cat "$_f")
		[ "$_r" = 0 ] || printf '%s(%s): %s\n' "${_f##*/}" "$_r" \
			"$(head -c 200 "$T/out/${_f##*/}")"
	done
}
seq_ports() { seq $((BASE + $1)) "$2" $((BASE + $3)); }

# ---- phase 1: 100 parallel publishes ----------------------------------------
t0=$(date +%s)
for p in $(seq_ports 1 1 100); do op publish "$p"; done
wait_ops
is "phase 1: 100 parallel publish calls all exit 0" "$(failed_ops | head -n 5)" ""
is "phase 1: every call reported" "$(ls "$T/rc" | wc -l)" 100
bad=""
for p in $(seq_ports 1 1 100); do
	grep -q "^https://$p-$SB\.$DOMAIN:$HTTPS_PORT/\$" "$T/out/publish.$p" ||
		bad="$bad $p"
done
is "phase 1: each publish printed its URL" "$bad" ""
n=$(jg "$(netctl --json port ls "$SB")" 'len(j["ports"])')
is "phase 1: port ls lists 101 ports" "$n" 101

# ---- phase 2: 100 mixed parallel calls --------------------------------------
# unpublish the 50 odd ports, re-publish 20 of the even ones (a no-op
# change) and publish 30 new ones, all at once.
rm -f "$T"/rc/* "$T"/out/*
# Interleaved, so the three kinds of call run side by side.
for i in $(seq 1 50); do
	op unpublish $((BASE + 2 * i - 1))
	[ "$i" -le 20 ] && op publish $((BASE + 2 * i))
	[ "$i" -le 30 ] && op publish $((BASE + 100 + i))
done
wait_ops
is "phase 2: 100 parallel unpublish/publish calls all exit 0" "$(failed_ops | head -n 5)" ""
is "phase 2: every call reported" "$(ls "$T/rc" | wc -l)" 100
t1=$(date +%s)
diag "200 netctl calls in $((t1 - t0)) s"

want=$( { echo "$TA_PORT"; seq_ports 2 2 100; seq_ports 101 1 130; } | sort -n | tr '\n' ' ')
gone=$(seq_ports 1 2 99 | tr '\n' ' ')
ls_json=$(netctl --json port ls "$SB") || not_ok "port ls"
got=$(jg "$ls_json" '" ".join(str(p["port"]) for p in sorted(j["ports"], key=lambda p: p["port"]))')
is "port ls lists exactly the expected 81 ports" "$got " "$want"
got_all=$(jg "$(netctl --json port ls)" '" ".join(str(p["port"]) for p in sorted(j["ports"], key=lambda p: p["port"]) if p["sandbox"]=="'"$SB"'")')
is "port ls without a sandbox agrees" "$got_all " "$want"
is "each listed port carries its URL" \
	"$(jg "$ls_json" 'sum(1 for p in j["ports"] if p["url"]=="https://%d-'"$SB.$DOMAIN:$HTTPS_PORT"'/" % p["port"])')" 81
is "sandbox show agrees" \
	"$(jg "$(netctl --json sandbox show "$SB")" '" ".join(str(p["port"]) for p in sorted(j["ports"], key=lambda p: p["port"]))') " \
	"$want"

# Routes reach workers asynchronously: wait (bounded) until every listed
# port routes and every unpublished one is 404, then assert. A port with
# no listener takes berthd about a second to give up on (502), so the
# URLs are fetched in parallel by one curl.
code_of() { bcurl -o /dev/null -w '%{http_code}' "$(url_for "$1" "$SB")/" 2>/dev/null; }
# codes PORT...: "PORT CODE" lines
codes() {
	: >"$T/curl.cfg"
	for _p in "$@"; do
		printf 'url = "%s/"\noutput = "/dev/null"\n' "$(url_for "$_p" "$SB")" >>"$T/curl.cfg"
	done
	bcurl -Z --parallel-max 100 -K "$T/curl.cfg" -w '%{url} %{http_code}\n' 2>/dev/null |
		sed -n 's|^https://\([0-9]*\)-.* \([0-9]*\)$|\1 \2|p'
}
misrouted() {
	codes $want $gone >"$T/codes"
	awk -v ta="$TA_PORT" -v want="$want" -v gone="$gone" '
		BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) W[w[i]] = 1
			n = split(gone, g, " "); for (i = 1; i <= n; i++) G[g[i]] = 1 }
		{ seen[$1] = 1 }
		($1 in W) && $1 != ta && ($2 == 404 || $2 == "000") { printf " %s:%s", $1, $2 }
		($1 in G) && $2 != 404 { printf " %s:%s", $1, $2 }
		END { for (p in W) if (!(p in seen)) printf " %s:none", p
			for (p in G) if (!(p in seen)) printf " %s:none", p }' "$T/codes"
}
converged() { [ -z "$(misrouted)" ]; }
wait_for 15 converged
is "every listed port routes, every unpublished one is 404" "$(misrouted)" ""
is "the testapp port answers 200" "$(code_of "$TA_PORT")" 200
body=$(bcurl "$(url_for $((BASE + 2)) "$SB")/")
like "a listed port without a listener reaches the sandbox (502)" "$body" \
	"\"status\":502.*nothing listens on port $((BASE + 2))"
body=$(bcurl "$(url_for $((BASE + 1)) "$SB")/")
like "an unpublished port: 404 naming the port" "$body" \
	"\"status\":404.*port $((BASE + 1)) of sandbox $SB is not published"
body=$(bcurl "$(url_for $((BASE + 99)) "$SB")/")
like "another unpublished port: 404 naming it" "$body" "port $((BASE + 99)) of sandbox $SB"

check "berthd still running" kill -0 "$BERTHD_PID"
is "berthd still has its workers" "$(berthd_workers | wc -l)" 1
is "health: ok" "$(jg "$(netctl --json status)" 'j["status"]')" ok
# unpublishing what is not published is refused (exit 1), not a crash
"$NETCTL" -s "$STATE" port unpublish "$SB" $((BASE + 1)) >/dev/null 2>&1
is "unpublish of an unpublished port: exit 1" $? 1

# ---- MCP over stdio ---------------------------------------------------------
# a second testapp, for the agent to publish (started first: it must not
# inherit fd 3, or netctl mcp would never see the end of its input)
start_testapp app2
# A real session: netctl mcp reads a FIFO we keep open on fd 3, so each
# answer is read before the next request is written.
mkfifo "$T/mcp.in"
spawn "$T/mcp.err" sh -c 'exec "$0" -s "$1" mcp --sandbox "$2" <"$3" >"$4"' \
	"$NETCTL" "$STATE" "$SB" "$T/mcp.in" "$T/mcp.out"
MCP_PID=$SPAWNED
exec 3>"$T/mcp.in"
# rpc ID JSON: send one message, print the answer with that id.
rpc() {
	printf '%s\n' "$2" >&3
	wait_log 10 "$T/mcp.out" "^\\{.*\"id\":$1[,}]" "$MCP_PID" || return 1
	grep -E "^\\{.*\"id\":$1[,}]" "$T/mcp.out" | head -n 1
}
ans=$(rpc 1 '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"control-api.sh","version":"1"}}}')
is "initialize: protocol version" "$(jg "$ans" 'j["result"]["protocolVersion"]' 2>&1)" 2024-11-05
is "initialize: server offers tools" "$(jg "$ans" '"tools" in j["result"]["capabilities"]' 2>&1)" True
printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}' >&3
ans=$(rpc 2 '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
tools=$(jg "$ans" '" ".join(sorted(t["name"] for t in j["result"]["tools"]))' 2>&1)
is "tools/list: the thirty-one tools" "$tools" \
	"allow_egress build_template checkpoint_sandbox deny_egress egress_log fork_sandbox get_egress kill_process list_checkpoints list_files list_ports list_processes make_directory move_path move_sandbox pause publish_port read_file read_process_output remove_checkpoint remove_path restart restore_checkpoint resume run_command sandbox_status start start_process template_build_status unpublish_port write_file"
is "tools/list: publish_port requires port" \
	"$(jg "$ans" '[t["inputSchema"]["required"] for t in j["result"]["tools"] if t["name"]=="publish_port"][0]' 2>&1)" '["port"]'
is "no answer to the notification" "$(wc -l <"$T/mcp.out")" 2

ans=$(rpc 3 '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"publish_port","arguments":{"port":'"$TA_PORT"'}}}')
is "tools/call publish_port: not an error" "$(jg "$ans" 'j["result"]["isError"]' 2>&1)" False
text=$(jg "$ans" 'j["result"]["content"][0]["text"]' 2>&1)
murl=$(jg "$text" 'j["url"]' 2>&1)
is "publish_port returns the URL" "$murl" "$(url_for "$TA_PORT" "$SB")/"
check "the URL is routed" wait_routed "$SB" "$TA_PORT"
is "the URL publish_port returned answers 200" \
	"$(bcurl -o /dev/null -w '%{http_code}' "${murl}echo")" 200
like "...served by the second testapp" "$(cat "$TA_REQLOG")" " GET /echo"
ans=$(rpc 4 '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_ports","arguments":{}}}')
like "list_ports includes it" "$(jg "$ans" 'j["result"]["content"][0]["text"]' 2>&1)" \
	"\"port\": $TA_PORT,"
ans=$(rpc 5 '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"publish_port","arguments":{"port":0}}}')
is "publish_port with port 0: a tool error" "$(jg "$ans" 'j["result"]["isError"]' 2>&1)" True
ans=$(rpc 6 '{"jsonrpc":"2.0","id":6,"method":"nope"}')
is "unknown method: -32601" "$(jg "$ans" 'j["error"]["code"]' 2>&1)" -32601
exec 3>&-
if wait_gone 10 "$MCP_PID"; then
	wait "$MCP_PID"
	is "netctl mcp exits 0 at end of input" $? 0
else
	not_ok "netctl mcp exits at end of input"
fi
is "netctl mcp wrote nothing to stderr" "$(cat "$T/mcp.err")" ""

# ---- MCP acting with the sandbox's token ------------------------------------
mcp_tok() {
	printf '%s\n' \
		'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}' \
		'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
		"$1" |
	"$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" \
		--token "$tok" mcp --sandbox "$SB" | tail -n 1
}
ans=$(mcp_tok '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"publish_port","arguments":{"port":'$((BASE + 201))',"visibility":"private"}}}')
is "with the sandbox token: publish_port on its sandbox works" \
	"$(jg "$ans" 'j["result"]["isError"]' 2>&1)" False
is "...and the port is listed private" \
	"$(jg "$(netctl --json port ls "$SB")" '[p["visibility"] for p in j["ports"] if p["port"]=='$((BASE + 201))'][0]' 2>&1)" private
ans=$(mcp_tok '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"publish_port","arguments":{"sandbox":"cc-2","port":'$((BASE + 202))'}}}')
is "with the sandbox token: publish_port on another sandbox is an error" \
	"$(jg "$ans" 'j["result"]["isError"]' 2>&1)" True
like "...saying HTTP 403" "$(jg "$ans" 'j["result"]["content"][0]["text"]' 2>&1)" "HTTP 403"
is "...and nothing was published there" \
	"$(jg "$(netctl --json port ls cc-2)" 'len(j["ports"])' 2>&1)" 0

# ---- nobody on the network locks ops out -----------------------------------
# 200 idle TCP connections to control_listen from 20 addresses: the TCP
# budget (128) refuses the rest, the unix socket has its own, and each
# idle one is closed at the handshake deadline (5 s).
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
srcs=$(seq -s, -f '127.0.0.%g' 11 30)
spawn "$T/hold.out" py --port "$CTL_PORT" hold -n 200 --sources "$srcs" --wait 30
HOLD_PID=$SPAWNED
wait_log 30 "$T/hold.out" "^held" "$HOLD_PID" || bail "hold: $(cat "$T/hold.out")"
t0=$(now_ms)
out=$(netctl status 2>&1)
rc=$?
t1=$(now_ms)
is "200 idle TCP connections: netctl status on the unix socket answers" "$rc" 0
diag "netctl status took $((t1 - t0)) ms"
like "...and says berthd is up" "$out" "berthd( is)? up"
n=$(metric 'berth_control_connections_by_listener{listener="tcp"}')
if [ -n "$n" ] && [ "$n" -le 128 ]; then ok "the TCP listener holds at most its budget ($n)"
else not_ok "the TCP listener holds at most its budget"; diag "tcp connections: '$n'"; fi
is "the unix socket has its own budget (this request)" \
	"$(metric 'berth_control_connections_by_listener{listener="unix"}')" 1
wait_gone 30 "$HOLD_PID"
r=$(tail -n 1 "$T/hold.out")
diag "$r"
is "every idle TCP connection was closed by berthd" "$(json_get "$r" 'j["open"]')" 0
is "...those over the budget at once" "$(json_get "$r" 'j["closed_1s"] >= 72')" True
is "...the others at the handshake deadline (within 8 s)" \
	"$(json_get "$r" 'j["last_close"] <= 8')" True
ok_metric() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }
check "refusals counted: budget" ok_metric 'berth_control_refused_total{reason="budget"}' 72
check "refusals counted: deadline" ok_metric 'berth_control_refused_total{reason="deadline"}' 128

# one address holds at most 16; after the handshake, the first request
# must come with a valid token within 5 s
out=$(py --port "$CTL_PORT" --ca "$CA" --host "api.$DOMAIN" hold -n 40 --sources 127.0.0.40 --wait 15 | tail -n 1)
diag "$out"
is "one address: 16 connections, the others refused" \
	"$(json_get "$out" '(j["opened"], j["refused_connect"])')" "(16, 24)"
is "...the 16 closed unauthenticated at the deadline (within 8 s)" \
	"$(json_get "$out" '(j["open"], j["last_close"] <= 8)')" "(0, True)"
check "refusals counted: address" ok_metric 'berth_control_refused_total{reason="address"}' 24

admin=$(netctl token create --admin | head -n 1)
CURLT="curl -sS --max-time 10 --cacert $CA --connect-to ::127.0.0.1:"
U="https://api.$DOMAIN:$CTL_PORT/v1/health"
is "a 401 closes the connection (two refused requests, two connections)" \
	"$($CURLT -o /dev/null -o /dev/null -w '%{http_code}:%{num_connects} ' \
	-H "Authorization: Bearer berth_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" "$U" "$U")" \
	"401:1 401:1 "
is "an authenticated connection is kept (two requests, one connection)" \
	"$($CURLT -o /dev/null -o /dev/null -w '%{http_code}:%{num_connects} ' \
	-H "Authorization: Bearer $admin" "$U" "$U")" "200:1 200:0 "
out=$(python3 - "$CTL_PORT" "$CA" "api.$DOMAIN" "$admin" <<'EOF'
import socket, ssl, sys, time
port, ca, host, tok = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port))), server_hostname=host)
req = ("GET /v1/health HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n" % (host, tok)).encode()
def get():
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            return "closed"
        buf += d
    return buf.split(b" ")[1].decode()
a = get()
time.sleep(6.5)
print(a, get())
EOF
)
is "an authenticated connection outlives the authentication deadline" "$out" "200 200"

# The admin share of the TCP slots: 128 connections from 8 addresses,
# each authenticated with the sandbox's token and held, get 112 answers
# (128 less the 16 kept for admin tokens) and 16 503s that close their
# connection; netctl with an admin token still works meanwhile.
cat >"$T/share.py" <<'EOF'
import os, re, socket, ssl, sys, time
port, ca, host, tok, sb, go = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=ca)
req = ("GET /v1/sandboxes/%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n"
       % (sb, host, tok)).encode()
held, codes = [], {}
for i in range(128):
    src = "127.0.0.%d" % (51 + i % 8)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port)), timeout=10,
                        source_address=(src, 0)), server_hostname=host)
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    m = re.match(rb"HTTP/1\.1 (\d{3})", buf)
    code = m.group(1).decode() if m else "none"
    codes[code] = codes.get(code, 0) + 1
    held.append(s)
print("held", " ".join("%s=%d" % kv for kv in sorted(codes.items())), flush=True)
t = time.time() + 20
while not os.path.exists(go) and time.time() < t:
    time.sleep(0.1)
EOF
spawn "$T/share.out" python3 "$T/share.py" "$CTL_PORT" "$CA" "api.$DOMAIN" "$tok" "$SB" "$T/share.go"
SHARE_PID=$SPAWNED
wait_log 60 "$T/share.out" "^held" "$SHARE_PID" || bail "share: $(cat "$T/share.out")"
is "sandbox-token connections: 112 served, 16 refused with 503" \
	"$(sed -n 's/^held //p' "$T/share.out")" "200=112 503=16"
check "...and meanwhile netctl over TCP with an admin token works" \
	"$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" --token "$admin" status
touch "$T/share.go"
wait_gone 30 "$SHARE_PID"

check "berthd still running at the end" kill -0 "$BERTHD_PID"
# ---- the control listener is a helper (berthd: control) --------------------
# It terminates TLS and parses HTTP and JSON as an unprivileged, chrooted
# process; berthd itself gets typed requests. Killed, it comes back and
# netctl over TCP works again; the unix socket never stopped.
tnet() { "$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" --token "$admin" "$@"; }
helper_is_new() { _p=$(berthd_helper "$1") && [ "$_p" != "$2" ]; }
old=$(berthd_helper control)
if [ -n "$old" ]; then ok "the control listener runs as a helper (pid $old)"
else not_ok "the control listener runs as a helper"; fi
is "ps shows it as 'berthd: control'" "$(ps -o args= -p "$old")" "berthd: control"
unlike "...not as root" "$(awk '$1 == "Uid:" { print $2 }' "/proc/$old/status")" '^0$'
is "...chrooted in the empty root" "$(readlink "/proc/$old/root")" "$STATE/empty"
check "netctl over TCP works" tnet status
kill -KILL "$old"
if wait_log 10 "$BERTHD_LOG" "control helper \(pid $old\) killed by signal 9: restarting" "$BERTHD_PID"; then
	ok "its death is logged"
else
	not_ok "its death is logged"
fi
check "netctl on the unix socket answers meanwhile" netctl status
if wait_for 10 helper_is_new control "$old"; then
	ok "it comes back ($old -> $(berthd_helper control))"
else
	not_ok "it comes back"
fi
if wait_for 10 tnet status; then ok "netctl over TCP works again"
else not_ok "netctl over TCP works again"; fi
out=$(tnet --json sandbox ls 2>&1)
like "...a listing through the new helper" "$out" '"sandboxes"'
code=$($CURLT -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $admin" \
	-H 'Content-Type: application/json' --data '{"id": "cc-json", "address": "127.0.0.1", "id": "x"}' \
	"https://api.$DOMAIN:$CTL_PORT/v1/sandboxes")
is "a body with a duplicate key is refused by the helper (400)" "$code" 400
is "...and nothing reached the store" "$(netctl sandbox ls | grep -c cc-json)" 0

# ---- broken requests through the helper -------------------------------------
# A streamed request's body broken after its head, a bad trailer, a
# pipelined request behind an error: each is answered once and its
# connection closed; berthd and the helper live on (under --enable-asan
# a use-after-free in either kills it). The sandbox is external: its
# streamed requests are refused at their head (409), the body still
# comes through the helper.
helper=$(berthd_helper control)
broken() {
	python3 - "$CTL_PORT" "$CA" "api.$DOMAIN" "$admin" "$1" <<'EOF'
import re, socket, ssl, sys
port, ca, host, tok, case = sys.argv[1:6]
h = "Host: %s\r\nAuthorization: Bearer %s\r\n" % (host, tok)
health = "GET /v1/health HTTP/1.1\r\n" + h + "\r\n"
reqs = {
    # the chunked body of a PUT breaks: a chunk size that is no number
    "put-chunk": "PUT /v1/sandboxes/cc-1/files?path=/x HTTP/1.1\r\n" + h +
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n" + health,
    # a streamed exec's body ends with a malformed trailer
    "exec-trailer": "POST /v1/sandboxes/cc-1/exec?stream=1 HTTP/1.1\r\n" + h +
        "Transfer-Encoding: chunked\r\n\r\n5\r\n\0\0\0\0J\r\n0\r\n"
        "no colon here\r\n\r\n" + health,
    # http1.c's rules in the helper: no Host, then a request behind it
    "no-host": "GET /v1/health HTTP/1.1\r\nAuthorization: Bearer %s\r\n"
        "\r\n" % tok + health,
    # both framings (a smuggling shape): refused, nothing behind it read
    "cl-te": "POST /v1/sandboxes HTTP/1.1\r\n" + h +
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
        health,
    # an empty line between requests is skipped (RFC 9112 2.2)
    "crlf-between": health + "\r\n" + health.replace("\r\n\r\n",
        "\r\nConnection: close\r\n\r\n"),
    # a JSON body the helper refuses, a request pipelined behind it
    "json-then-get": "POST /v1/sandboxes HTTP/1.1\r\n" + h +
        "Content-Type: application/json\r\nContent-Length: 3\r\n\r\n{x}" +
        health,
}
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port))),
    server_hostname=host)
s.settimeout(10)
s.sendall(reqs[case].encode("latin-1"))
buf, end = b"", "closed"
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        buf += d
except (socket.timeout, ssl.SSLError, OSError):
    end = "open"
# (a JSON body ends with a bare LF: the next answer starts after it)
codes = [c.decode() for c in re.findall(rb"(?:^|\n)HTTP/1\.1 (\d{3}) ", buf)]
print(",".join(codes) + ":" + end)
EOF
}
is "a PUT's chunked body broken after its head: one answer, closed" \
	"$(broken put-chunk)" "409:closed"
is "a streamed exec with a malformed trailer: one answer, closed" \
	"$(broken exec-trailer)" "409:closed"
is "invalid JSON with a request pipelined behind it: one answer, closed" \
	"$(broken json-then-get)" "400:closed"
is "HTTP/1.1 without Host: refused by the helper (400), closed" \
	"$(broken no-host)" "400:closed"
is "Content-Length with Transfer-Encoding: 400, closed" \
	"$(broken cl-te)" "400:closed"
is "an empty line between two requests: both answered" \
	"$(broken crlf-between)" "200,200:closed"
is "curl on the unix socket (its own Host header)" \
	"$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' \
	--unix-socket "$STATE/control.sock" http://localhost/v1/health)" 200
is "...and a request there without Host: 400" \
	"$(curl -sS --max-time 10 --unix-socket "$STATE/control.sock" \
	-o /dev/null -w '%{http_code}' -H 'Host:' http://localhost/v1/health)" 400
like "a token for a bad sandbox id: 400 naming the request's field" \
	"$(curl -sS --max-time 10 --unix-socket "$STATE/control.sock" \
	-X POST -d '{"sandbox":"Bad!"}' http://localhost/v1/tokens)" \
	'"field": *"sandbox"'
like "...and a fork's bad id names \"ids\" and the item" \
	"$(curl -sS --max-time 10 --unix-socket "$STATE/control.sock" \
	-X POST -d '{"ids":["ok","Bad!"]}' http://localhost/v1/sandboxes/$SB/fork)" \
	'item 1 is not a valid sandbox id'
check "berthd still running after them" kill -0 "$BERTHD_PID"
is "...and so is the same control helper" "$(berthd_helper control)" "$helper"
check "...and netctl over TCP works" tnet status

done_testing
