#!/bin/sh
# wake.sh — wake on request with a real microVM (qemu, TCG), one boot:
#  - idle: running -> paused -> suspended by the idle policy, with events
#  - a request to a suspended sandbox is served, with Server-Timing: wake
#  - 200 concurrent requests to a paused sandbox: all 200, one wake
#  - over HTTP/2 (curl --http2), a request to a paused and to a
#    suspended sandbox is served after one wake, with Server-Timing: wake
#  - a TLS handshake naming a public port wakes it (no request needed);
#    other names do not
#  - an open WebSocket keeps the sandbox awake; a WebSocket wakes it
#  - a corrupt snapshot: 503 with the reason within the deadline and a
#    failed wake event; once repaired, it is served again
#  - a wake that outlasts the wake timeout (its qemu stopped): the parked
#    request gets 503 at the deadline, an event wake-timeout is written and
#    berth_sandbox_wake_timeouts_total counts it
#  - a private sandbox: a request without a token gets 401 and does not
#    wake it
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "idle_pause 5s" "idle_suspend 10s" "timeout wake 20s" \
	"tap_prefix bwk" "vm_pool 10.213.0.0/24" \
	"timeout wake_backoff 2s"
start_berthd
wait_log 60 "$BERTHD_LOG" "vmm: qemu" "$BERTHD_PID" || bail "no VMM in berthd"

state() { netctl --json sandbox show wk | json_get "$(cat)" 'j["state"]'; }
wait_state() {	# SECS STATE
	_n=0
	while [ "$(state)" != "$2" ]; do
		_n=$((_n + 1)); [ $_n -gt $(($1 * 5)) ] && return 1
		sleep 0.2
	done
}
events() { netctl --json sandbox events wk; }
count_ev() {	# OPERATION RESULT
	events | json_get "$(cat)" "len([e for e in j['events'] if e['operation']=='$1' and e['result']=='$2'])"
}

out=$(netctl sandbox create wk) || bail "sandbox create: $out; $(netctl sandbox events wk 2>&1 | tail -n 3)"
like "a VM-backed sandbox is created and runs" "$out" 'sandbox wk created \(10\.213\.[0-9.]+, running\)'
netctl port publish wk 8080 >/dev/null || bail "publish"
U="https://8080-wk.$DOMAIN:$HTTPS_PORT"
wait_routed wk 8080
code=$(bcurl -o /dev/null -w '%{http_code}' "$U/healthz")
is "the guest's test app answers through berthd" "$code" 200
boot=$(bcurl "$U/info" | json_get "$(cat)" 'j["boot_id"]')

# ---- idle policy ----
check "idle: paused after idle_pause" wait_state 20 paused
check "idle: suspended after idle_suspend" wait_state 30 suspended
n=$(events | json_get "$(cat)" "len([e for e in j['events'] if e['operation'] in ('pause','suspend') and e['result']=='ok'])")
check "idle pause and suspend are in the events" [ "$n" -ge 2 ]

# ---- suspended + request ----
# vm_standby (default 8): a qemu waits for the snapshot, no guest in it
standby() { pgrep -f 'name berth-w[k] .*-incoming defer'; }
check "suspended: a standby qemu waits for the snapshot" wait_for 20 standby
sbpid=$(standby)
hdr=$(bcurl -s -D - -o "$T/info.json" "$U/info")
like "suspended: the request is served" "$hdr" '^HTTP/1.1 200'
like "suspended: Server-Timing: wake;dur=" "$hdr" 'Server-Timing: wake;dur=[0-9]+'
is "suspended: the same boot (memory and processes kept)" \
	"$(json_get "$(cat "$T/info.json")" 'j["boot_id"]')" "$boot"
is "running after the wake" "$(state)" running
is "the wake promoted the standby qemu (no second process)" \
	"$(pgrep -f 'name berth-w[k] ' | tr '\n' ' ')" "$sbpid "

# ---- paused + 200 concurrent requests: one wake ----
check "idle: paused again" wait_state 20 paused
wakes0=$(count_ev wake ok)
urls=$T/urls; : >"$urls"
i=0; while [ $i -lt 200 ]; do
	printf 'url = "%s/echo?c=%d"\noutput = "/dev/null"\n' "$U" $i; i=$((i + 1))
done >"$urls"
codes=$(bcurl --parallel --parallel-immediate --parallel-max 200 -K "$urls" \
	-w '%{http_code}\n' 2>/dev/null | sort | uniq -c | tr -s ' ')
is "paused: 200 concurrent requests all answered 200" "$codes" " 200 200"
is "paused: exactly one wake for all of them" "$(($(count_ev wake ok) - wakes0))" 1

# ---- over HTTP/2: a stream wakes a paused and a suspended sandbox ----
# (h2.c serves each stream through the same session code: parking, the
# wake, Server-Timing.)
h2wake() {	# STATE: a request over h2 to the sandbox in that state
	check "idle: $1 again (h2)" wait_state 40 "$1"
	wakes0=$(count_ev wake ok)
	hdr=$(bcurl --http2 -s -D - -o "$T/h2.json" "$U/info" | tr -d '\r')
	like "$1, over h2: the request is served" "$hdr" '^HTTP/2 200'
	like "$1, over h2: server-timing: wake;dur=" "$hdr" 'server-timing: (.*, *)?wake;dur=[0-9]+'
	is "$1, over h2: the same boot" "$(json_get "$(cat "$T/h2.json")" 'j["boot_id"]')" "$boot"
	is "$1, over h2: running after one wake" "$(state) $(($(count_ev wake ok) - wakes0))" "running 1"
}
h2wake paused
h2wake suspended

# ---- wake on connect: a TLS server name starts the wake ----
# (A client names the sandbox in its handshake; the wake runs while the
# handshake finishes. No request is sent here at all.)
hello() { openssl s_client -connect "127.0.0.1:$HTTPS_PORT" -servername "$1" \
	-CAfile "$CA" </dev/null >/dev/null 2>&1; }
check "idle: paused again (wake on connect)" wait_state 20 paused
wakes0=$(count_ev wake ok)
hello "8080-nosuch.$DOMAIN"
hello "9999-wk.$DOMAIN"
# (still paused, or suspended meanwhile by its idle policy: not woken)
like "a handshake naming no published route wakes nothing" \
	"$(state) $(($(count_ev wake ok) - wakes0))" '^(paused|suspended) 0$'
hello "8080-wk.$DOMAIN"
check "a handshake naming a public port of a paused sandbox wakes it" wait_state 10 running
is "... with one wake" "$(($(count_ev wake ok) - wakes0))" 1

# ---- WebSocket: keeps it awake while open; wakes it ----
P="py --port $HTTPS_PORT --host 8080-wk.$DOMAIN --ca $CA --timeout 30"
spawn "$T/ws1.out" $P ws --ready "$T/ws1.ready" --hold "$T/ws1.go" "first" "after idle time"
wait_for 20 test -e "$T/ws1.ready" || not_ok "WebSocket opened"
sleep 7	# longer than idle_pause: the open WebSocket must count as activity
is "an open WebSocket keeps the sandbox running" "$(state)" running
touch "$T/ws1.go"
wait_for 20 grep -q '^ok$' "$T/ws1.out"
like "the WebSocket still echoes" "$(cat "$T/ws1.out")" 'echo: after idle time'
check "idle: suspended after the WebSocket closed" wait_state 40 suspended
out=$($P ws "hello after suspend" 2>&1)
like "a WebSocket to a suspended sandbox connects and echoes" "$out" 'echo: hello after suspend'

# ---- a corrupt snapshot ----
check "suspended again" wait_state 40 suspended
snap=$(ls "$STATE"/vms/wk/snap/state 2>/dev/null)
if [ -n "$snap" ]; then
	cp "$snap" "$T/snap.good"
	sz=$(stat -c %s "$snap")
	dd if=/dev/urandom of="$snap" bs=1 seek=64 count=$((sz / 2)) conv=notrunc 2>/dev/null
	t0=$(date +%s)
	body=$(bcurl -s -o - -w '\n%{http_code}' "$U/echo")
	t1=$(date +%s)
	like "corrupt snapshot: 503" "$body" '503$'
	like "corrupt snapshot: the reason is given" "$body" 'could not be woken'
	check "corrupt snapshot: answered within the wake deadline" [ $((t1 - t0)) -le 20 ]
	check "corrupt snapshot: a failed wake event" [ "$(count_ev wake failed)" -ge 1 ]
	is "corrupt snapshot: the sandbox is failed" "$(state)" failed
	cp "$T/snap.good" "$snap"
	fixed() { [ "$(bcurl -o /dev/null -w '%{http_code}' "$U/healthz")" = 200 ]; }
	check "repaired: served again (after the back-off)" wait_for 60 fixed
	is "repaired: running" "$(state)" running
else
	not_ok "snapshot file under $STATE/vms/wk/snap"
fi

# ---- a wake that outlasts the wake timeout ----
# Its qemu stopped (SIGSTOP) while suspended: the request parked for the
# wake gets 503 at the timeout (20 s), the sandbox's events say
# wake-timeout and /metrics counts it; let go, the wake finishes.
check "suspended again (wake timeout)" wait_state 40 suspended
qs=$(pgrep -f 'name berth-w[k] ')
if [ -n "$qs" ]; then
	kill -STOP $qs
	t0=$(date +%s)
	body=$(bcurl -s -o - -w '\n%{http_code}' --max-time 40 "$U/echo")
	t1=$(date +%s)
	kill -CONT $qs
	like "wake timeout: 503" "$body" '503$'
	like "wake timeout: the page says so" "$body" 'did not wake within 20000 ms'
	# at the deadline: not before it, and not long after (curl gives up at 40 s)
	check "wake timeout: answered at the deadline ($((t1 - t0)) s)" [ $((t1 - t0)) -ge 19 -a $((t1 - t0)) -le 35 ]
	check "wake timeout: an event wake-timeout" wait_for 5 sh -c \
		"[ \"\$(\"$NETCTL\" -s \"$STATE\" --json sandbox events wk | grep -c wake-timeout)\" -ge 1 ]"
	like "...with its reason" "$(netctl sandbox events wk | grep wake-timeout)" 'not running within 20000 ms'
	check "wake timeout: counted in /metrics" wait_for 5 metric_is \
		'berth_sandbox_wake_timeouts_total{sandbox="wk"}' 1
	served() { [ "$(bcurl -o /dev/null -w '%{http_code}' "$U/healthz")" = 200 ]; }
	check "let go: the wake finishes, served again" wait_for 60 served
else
	not_ok "a qemu for wk to stop"
fi

# ---- private + no token: 401 and no wake ----
netctl port publish wk 8080 --private >/dev/null
check "suspended once more" wait_state 40 suspended
wakes0=$(count_ev wake ok)
code=$(bcurl -o /dev/null -w '%{http_code}' "$U/healthz")
is "private, no token: 401" "$code" 401
is "... and it stays suspended" "$(state)" suspended
is "... with no wake" "$(count_ev wake ok)" "$wakes0"

check "delete" netctl sandbox rm wk
noqemu() { ! pgrep -f 'name berth-w[k] ' >/dev/null; }
check "no qemu left for wk" wait_for 20 noqemu
check "no tap left for wk" sh -c "! ip -br link | grep -q '^bwk'"
done_testing
