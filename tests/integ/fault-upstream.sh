#!/bin/sh
# fault-upstream.sh — the upstream fails under a response. Reset (RST)
# before the head, inside the head, mid-body with Content-Length and
# mid-body chunked: the client gets a 502 while nothing was sent, else an
# aborted (visibly truncated) response, never a hang and never a complete
# looking one; the worker neither crashes nor stops serving, and the log
# says what happened. Then a guest gone mid-stream: the upstream lives in
# a network namespace whose veth is deleted under an SSE stream; the
# client's stream ends within the response timeout, new requests get a
# quick 502/504, and once the link is back the sandbox is served again.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool ip

WORKERS=1
berthd_config "timeout response 3s" "timeout connect 2s" "timeout retry 500ms"
start_berthd

cat >"$T/resetter.py" <<'EOF'
import socket, struct, sys, threading
BIG = 1000000
def rst(c):
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
def serve(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                c.close(); return
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        path = head.split(b" ")[1].decode()
        if path == "/head-reset":
            return rst(c)
        if path == "/half-head":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
            return rst(c)
        if path == "/cl-reset":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: %d\r\n\r\n" % BIG + b"x" * 65536)
            return rst(c)
        if path == "/hang":
            c.recv(1)  # answers nothing until berthd gives up
            c.close(); return
        if path == "/chunk-reset":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n"
                      b"10000\r\n" + b"y" * 65536 + b"\r\n")
            return rst(c)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                  b"Content-Length: 3\r\n\r\nok\n")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(64)
print("listening on 127.0.0.1:%d" % s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
spawn "$T/resetter.log" python3 -I "$T/resetter.py"
wait_log 10 "$T/resetter.log" "listening on" "$SPAWNED" || bail "resetter: $(cat "$T/resetter.log")"
RP=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$T/resetter.log")
publish rs "$RP" >/dev/null || bail "cannot publish the resetter"
U=$(url_for "$RP" rs)
worker=$(berthd_workers)

# get PATH: "STATUS EXIT BYTES SECONDS" of one curl
get() {
	_o=$(CURL_MAX_TIME=20 bcurl -o "$T/body" -w '%{http_code} %{size_download} %{time_total}' "$U$1" 2>"$T/curl.err")
	_rc=$?
	set -- $_o
	echo "$1 $_rc $2 ${3%.*}"
}

r=$(get /ok)
is "the upstream answers through berth" "$r" "200 0 3 0"

for p in /head-reset /half-head; do
	set -- $(get $p)
	is "reset at $p before a whole head: 502" "$1" 502
	is "$p: the client gets a complete error response" "$2" 0
	like "$p: the error says why" "$(cat "$T/body")" \
		'"status":502,"sandbox":"rs","reason":"sandbox rs closed the connection on port [0-9]+ without a complete response"'
done

set -- $(get /cl-reset)
is "reset mid-body (Content-Length): the head was already sent (200)" "$1" 200
if [ "$2" = 18 ] || [ "$2" = 56 ]; then ok "curl sees a truncated body (exit $2)"
else not_ok "curl sees a truncated body"; diag "exit $2: $(cat "$T/curl.err")"; fi
if [ "$3" -lt 1000000 ]; then ok "fewer bytes than announced ($3)"
else not_ok "fewer bytes than announced"; diag "$3"; fi
if [ "$4" -lt 10 ]; then ok "no hang (${4}s)"; else not_ok "no hang"; diag "${4}s"; fi

set -- $(get /chunk-reset)
is "reset mid-body (chunked): 200 head" "$1" 200
if [ "$2" = 18 ] || [ "$2" = 56 ]; then ok "curl sees the chunked body cut (exit $2)"
else not_ok "curl sees the chunked body cut"; diag "exit $2: $(cat "$T/curl.err")"; fi
if [ "$4" -lt 10 ]; then ok "no hang (${4}s)"; else not_ok "no hang"; diag "${4}s"; fi

# Every cut request has its access-log line (status, bytes actually sent)
# and the log says why it stopped.
acc() { awk -v p="$1" -v st="$2" '$1 == "access" && $8 == p && $9 == st' "$BERTHD_LOG"; }
check "the response cut mid-body has its access-log line (200, the bytes sent)" \
	wait_for 5 sh -c "[ -n \"\$(awk '\$1 == \"access\" && \$8 == \"/cl-reset\" && \$9 == 200 && \$10 > 0 && \$10 < 1000000' '$BERTHD_LOG')\" ]"
like "... and the log says it was cut and why" "$(cat "$BERTHD_LOG")" \
	'response cut after [0-9]+ bytes: sandbox rs closed the connection on port [0-9]+ without a complete response'
is "the cut chunked response has its line too" "$(acc /chunk-reset 200 | wc -l)" 1
# A client that gives up before any answer: logged 499, as nginx does.
CURL_MAX_TIME=1 bcurl -o /dev/null "$U/hang" 2>/dev/null
check "a client that gave up waiting is logged 499" \
	wait_for 5 sh -c "grep -q '^access .* /hang 499 ' '$BERTHD_LOG'"

is "the same worker is still there" "$(berthd_workers)" "$worker"
unlike "no worker died" "$(cat "$BERTHD_LOG")" 'worker [0-9]+ \(pid [0-9]+\) (killed|exited)'
n=0 good=0
while [ $n -lt 10 ]; do
	n=$((n + 1))
	[ "$(get /ok)" = "200 0 3 0" ] && good=$((good + 1))
done
is "and keeps serving the same upstream (10/10)" "$good" 10

# ---- guest gone mid-stream --------------------------------------------------
NS="berth-fault-up$$"
VH="bfu$$h" VG="bfu$$g"
VH=$(echo "$VH" | cut -c1-15) VG=$(echo "$VG" | cut -c1-15)
NET="10.251.$(( $$ % 250 ))"
ip netns add "$NS" 2>/dev/null || skip_all "cannot create a network namespace"
at_exit "ip netns del '$NS' 2>/dev/null; ip link del '$VH' 2>/dev/null"
guest_link() {
	ip link add "$VH" type veth peer name "$VG" netns "$NS" &&
	ip addr add "$NET.1/30" dev "$VH" && ip link set "$VH" up &&
	ip -n "$NS" addr add "$NET.2/30" dev "$VG" && ip -n "$NS" link set "$VG" up &&
	ip -n "$NS" link set lo up
}
guest_link || bail "cannot make the veth pair"
# A host running sandboxes must not send a gone guest's traffic to its
# default gateway, whose answer (silence, a reset, an ICMP error) differs
# from machine to machine: behind the guest's own route, an unreachable one.
ip route add unreachable "$NET.0/30" metric 4242 || bail "cannot add the fallback route"
at_exit "ip route del unreachable '$NET.0/30' metric 4242 2>/dev/null"
spawn "$T/guest.log" ip netns exec "$NS" "$TESTAPP" -l "$NET.2" -p 0 -L "$T/guest.reqlog"
wait_log 10 "$T/guest.log" "listening on" "$SPAWNED" || bail "testapp in $NS: $(cat "$T/guest.log")"
GP=$(sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' "$T/guest.log" | head -n 1)
SB_ADDR=$NET.2 publish guest "$GP" >/dev/null || bail "cannot publish the guest"
GU=$(url_for "$GP" guest)
is "the guest serves through berth" "$(bcurl -o /dev/null -w '%{http_code}' "$GU/healthz")" 200

spawn "$T/sse.out" curl -sS -N --cacert "$CA" --connect-to ::127.0.0.1: --max-time 60 \
	"$GU/sse?count=1000&interval=200"
sse=$SPAWNED
wait_log 10 "$T/sse.out" 'data: event 2' "$sse" || bail "the stream never flowed: $(cat "$T/sse.out")"
ip link del "$VH" || bail "cannot delete the veth"
ok "guest link deleted mid-stream"
t0=$(date +%s)
if wait_gone 45 "$sse"; then
	el=$(( $(date +%s) - t0 ))
	ok "the client's stream ends, no hang (${el}s: upstream keepalive)"
	wait "$sse"
	rc=$?
	if [ $rc -ne 0 ]; then ok "the client sees the stream aborted (exit $rc)"
	else not_ok "the client sees the stream aborted"; diag "$(tail -n 3 "$T/sse.out")"; fi
else
	not_ok "the client's stream ends, no hang"
fi
t0=$(date +%s)
c=$(CURL_MAX_TIME=20 bcurl -o "$T/gone.body" -w '%{http_code}' "$GU/healthz")
el=$(( $(date +%s) - t0 ))
like "a new request while the guest is gone: 502 or 504" "$c" '^50[24]$'
if [ "$el" -lt 10 ]; then ok "answered within the connect timeout (${el}s)"
else not_ok "answered within the connect timeout"; diag "${el}s"; fi
like "the error names the sandbox" "$(cat "$T/gone.body")" 'guest'
# Not "nothing listens": the guest's network is what is missing.
like "... and says its network is gone, or that it did not answer" "$(cat "$T/gone.body")" \
	'(cannot be reached: its network is down|did not accept a connection on port [0-9]+ in time)'
diag "guest gone: $(cat "$T/gone.body")"
is "the worker is still there" "$(berthd_workers)" "$worker"
is "other sandboxes still served" "$(get /ok)" "200 0 3 0"

# The link is back but the guest does not answer (its side down, as a
# frozen VM): bounded by the connect timeout, not a hang.
guest_link || bail "cannot restore the veth pair"
ip -n "$NS" link set "$VG" down
t0=$(date +%s)
c=$(CURL_MAX_TIME=20 bcurl -o "$T/gone.body" -w '%{http_code}' "$GU/healthz")
el=$(( $(date +%s) - t0 ))
like "a request to a guest that does not answer: 502 or 504" "$c" '^50[24]$'
if [ "$el" -lt 10 ]; then ok "answered within the connect timeout (${el}s)"
else not_ok "answered within the connect timeout"; diag "${el}s"; fi
like "the error names the sandbox" "$(cat "$T/gone.body")" 'guest'

# The guest answers again (the VM resumed, the namespace re-plumbed).
ip -n "$NS" link set "$VG" up
if wait_for 15 sh -c "[ \"\$(curl -sS --cacert '$CA' --connect-to ::127.0.0.1: --max-time 5 -o /dev/null -w '%{http_code}' '$GU/healthz')\" = 200 ]"; then
	ok "served again by itself once the guest is back"
else
	not_ok "served again by itself once the guest is back"
fi
check "berthd still running" kill -0 "$BERTHD_PID"

done_testing
