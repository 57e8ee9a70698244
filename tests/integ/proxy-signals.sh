#!/bin/sh
# proxy-signals.sh — berthd's process life: SIGHUP reload with an open
# WebSocket surviving and routes kept, directives a reload cannot apply
# (control_listen, tap_prefix) named in warnings; a worker killed with
# SIGKILL is restarted while the other worker's open connection survives;
# SIGTERM drains (in-flight request completes, new connections refused,
# exit).
# First, with the two workers: per-sandbox /metrics counts (requests by
# sandbox and status class, bytes) match what three sandboxes were sent,
# and a failed wake is counted.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool ss pgrep

WORKERS=2
berthd_config "timeout drain 10s"
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish"
URL=$(url_for "$TA_PORT" sb1)
HOST=$(host_for "$TA_PORT" sb1)
P="py --port $HTTPS_PORT --host $HOST --ca $CA --timeout 20"

code() { bcurl -o /dev/null -w '%{http_code}' "$1"; }

# serves N URL: N fresh connections all answered 200 (with SO_REUSEPORT
# they spread over the workers).
serves() {
	_i=0
	while [ $_i -lt "$1" ]; do
		[ "$(code "$2")" = 200 ] || return 1
		_i=$((_i + 1))
	done
}

w=$(berthd_workers | wc -l)
is "berthd runs $WORKERS workers" "$w" "$WORKERS"

# ---- per-sandbox metrics over two workers ------------------------------------
# Three sandboxes, each request on a fresh connection (spread over the
# workers by SO_REUSEPORT): /metrics counts exactly what each was sent,
# summed over the workers, by status class.
for m in m1 m2 m3; do publish "$m" "$TA_PORT" >/dev/null || bail "publish $m"; done
sendn() { _i=0; while [ $_i -lt "$1" ]; do code "$2" >/dev/null; _i=$((_i + 1)); done; }
sendn 7 "$(url_for "$TA_PORT" m1)/healthz"
sendn 5 "$(url_for "$TA_PORT" m2)/healthz"
sendn 3 "$(url_for "$TA_PORT" m3)/healthz"
sendn 2 "$(url_for "$TA_PORT" m3)/status?code=503"
sendn 4 "$(url_for 1 m3)/"	# an unpublished port of m3: berthd's 404
# healthz requests of publish's wait_routed count too: from the access log
n_of() { grep -cE "^access .* $1 [0-9]+ " "$BERTHD_LOG"; }
counts_are() {
	for _m in m1 m2 m3; do
		[ "$(metric "berth_sandbox_requests_total{sandbox=\"$_m\"}")" = "$(n_of "$_m")" ] || return 1
	done
}
if wait_for 10 counts_are; then ok "per-sandbox request counts match the access log over two workers"
else
	not_ok "per-sandbox request counts match the access log over two workers"
	diag "$(metric_dump=$(curl -s --unix-socket "$STATE/control.sock" http://berth/metrics); printf '%s\n' "$metric_dump" | grep sandbox_requests)"
	diag "access log: m1 $(n_of m1) m2 $(n_of m2) m3 $(n_of m3)"
fi
r1=$(metric 'berth_sandbox_requests_total{sandbox="m1"}')
if [ "${r1:-0}" -ge 7 ]; then ok "m1 counted its 7 requests ($r1 with the routing probes)"
else not_ok "m1 counted its 7 requests"; diag "got '$r1'"; fi
is "m3: its two 503s by class" "$(metric 'berth_sandbox_responses_total{sandbox="m3",code="5xx"}')" 2
is "m3: berthd's 404s for its unpublished port" \
	"$(metric 'berth_sandbox_responses_total{sandbox="m3",code="4xx"}')" 4
b=$(metric 'berth_sandbox_bytes_total{sandbox="m2",direction="out"}')
if [ "${b:-0}" -gt 0 ]; then ok "m2: bytes out counted ($b)"; else not_ok "m2: bytes out counted"; fi
# (21 fresh connections all landing on one of two SO_REUSEPORT workers
# would be a one-in-a-million draw: each worker counts several sandboxes)

# a wake that fails is counted once, for its sandbox (without VMs: an
# external sandbox whose stored state says paused cannot be woken)
netctl sandbox add ext-1 --address 127.0.0.1 >/dev/null
python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=10)
c.execute("UPDATE sandboxes SET state = ? WHERE id = ?", ("paused", "ext-1"))
c.commit()' "$STATE/berth.db" || bail "cannot mark ext-1 paused"
publish ext-1 "$TA_PORT" >/dev/null	# pushes the routes that say paused
is "a request for it: 503 (the wake failed)" "$(code "$(url_for "$TA_PORT" ext-1)/")" 503
check "berth_sandbox_wake_failures_total counts it" wait_for 5 metric_is \
	'berth_sandbox_wake_failures_total{sandbox="ext-1"}' 1
like "the wake histogram is there (no successful wake: count 0)" \
	"$(curl -s --unix-socket "$STATE/control.sock" http://berth/metrics)" \
	'berth_wake_duration_seconds_count 0'

# ---- SIGHUP with an open WebSocket ------------------------------------------
spawn "$T/ws1.out" $P ws --ready "$T/ws1.ready" --hold "$T/ws1.go" "before HUP" "after HUP"
ws1=$SPAWNED
wait_for 10 test -e "$T/ws1.ready" || bail "WebSocket did not open: $(cat "$T/ws1.out")"
ok "WebSocket open before HUP"
publish sb2 "$TA_PORT" >/dev/null
is "route added before HUP is served" "$(code "$(url_for "$TA_PORT" sb2)/echo")" 200

# A certificate for another name, added to the config: served by SNI
# only after the reload.
sh "$top_srcdir/certs/berth-mkcert" "$T/other" other.localhost >/dev/null 2>&1 ||
	bail "berth-mkcert failed"
chmod 755 "$T/other"
sni_ok() {
	openssl s_client -connect "127.0.0.1:$HTTPS_PORT" -servername www.other.localhost \
		-CAfile "$T/other/ca.pem" -verify_return_error </dev/null 2>&1 |
		grep -q 'Verify return code: 0 (ok)'
}
if sni_ok; then not_ok "other.localhost not served before HUP"; else ok "other.localhost not served before HUP"; fi
echo "certificate $T/other/server.pem $T/other/server.key" >>"$CONF"
# and directives a reload cannot apply: each named in a warning
echo "control_listen 127.0.0.1:$(free_port)" >>"$CONF"
echo "tap_prefix bsg" >>"$CONF"

nreload=$(grep -cE '(^|: )reloaded ' "$BERTHD_LOG")
kill -HUP "$BERTHD_PID"
if wait_for 10 sh -c "[ \$(grep -cE '(^|: )reloaded ' '$BERTHD_LOG') -gt $nreload ]"; then
	ok "berthd logs the reload"
else
	not_ok "berthd logs the reload"; diag "$(tail -n 10 "$BERTHD_LOG")"
fi
check "certificate added to the config is picked by SNI after HUP" sni_ok
like "a control_listen added on HUP is named in a warning" "$(cat "$BERTHD_LOG")" \
	"SIGHUP: control_listen 127\.0\.0\.1:[0-9]+ added: .*takes effect on restart"
like "so is any other directive the reload cannot apply" "$(cat "$BERTHD_LOG")" \
	"SIGHUP: tap_prefix changed: takes effect on restart"
check "berthd still running after HUP" kill -0 "$BERTHD_PID"
touch "$T/ws1.go"
wait "$ws1"
rc=$?
if [ $rc -eq 0 ] && grep -q '^echo: after HUP$' "$T/ws1.out"; then
	ok "WebSocket opened before HUP still echoes after it"
else
	not_ok "WebSocket opened before HUP still echoes after it"; diag "$(cat "$T/ws1.out")"
fi
check "route added before HUP is served after it" serves 4 "$(url_for "$TA_PORT" sb2)/echo"
check "first route is served after HUP" serves 4 "$URL/echo"

# ---- a worker killed -------------------------------------------------------
spawn "$T/ws2.out" $P ws --ready "$T/ws2.ready" --hold "$T/ws2.go" "before kill" "after kill"
ws2=$SPAWNED
wait_for 10 test -e "$T/ws2.ready" || bail "WebSocket did not open: $(cat "$T/ws2.out")"
# The worker holding the WebSocket: the only established connection on
# the https port now.
holder=$(ss -Htnp state established "( sport = :$HTTPS_PORT )" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | sort -u)
victim=$(berthd_workers | grep -vx "$holder" | head -n 1)
if [ -n "$holder" ] && [ -n "$victim" ] && [ "$(echo "$holder" | wc -l)" = 1 ]; then
	ok "found the worker holding the WebSocket ($holder) and another ($victim)"
	kill -KILL "$victim"
	if wait_for 15 sh -c "pgrep -P $BERTHD_PID | grep -vx $victim | wc -l | grep -qx $WORKERS"; then
		ok "killed worker is replaced"
	else
		not_ok "killed worker is replaced"; diag "children: $(pgrep -P "$BERTHD_PID" | tr '\n' ' ')"
	fi
	touch "$T/ws2.go"
	wait "$ws2"
	if grep -q '^echo: after kill$' "$T/ws2.out"; then
		ok "the other worker's WebSocket survives"
	else
		not_ok "the other worker's WebSocket survives"; diag "$(cat "$T/ws2.out")"
	fi
	check "service continues on all workers" serves 8 "$URL/echo"
else
	not_ok "found the worker holding the WebSocket"
	diag "holder '$holder' workers '$(berthd_workers | tr '\n' ' ')'"
	diag "$(ss -Htnp state established "( sport = :$HTTPS_PORT )")"
	touch "$T/ws2.go"
fi

# ---- SIGTERM drains ---------------------------------------------------------
: >"$TA_REQLOG"
spawn "$T/slow.out" curl -sS --cacert "$CA" --connect-to ::127.0.0.1: \
	-o /dev/null -w '%{http_code}' "$URL/slow?ms=3000"
slow=$SPAWNED
wait_log 10 "$TA_REQLOG" '/slow\?ms=3000' || bail "slow request never reached the upstream"
spawn "$T/idle.out" py --port "$HTTPS_PORT" --host "$HOST" --ca "$CA" --timeout 20 \
	wait-close --ready "$T/idle.ready" --go "$T/idle.go"
idle=$SPAWNED
wait_for 10 test -e "$T/idle.ready" || bail "keep-alive client: $(cat "$T/idle.out")"
workers=$(berthd_workers)
kill -TERM "$BERTHD_PID"
touch "$T/idle.go"
refused() {
	curl -sS --max-time 2 --cacert "$CA" --connect-to ::127.0.0.1: -o /dev/null "$URL/echo" 2>/dev/null
	[ $? -eq 7 ]
}
if wait_for 3 refused; then ok "new connections refused after SIGTERM"
else not_ok "new connections refused after SIGTERM"; diag "$(ss -Htln "sport = :$HTTPS_PORT")"; fi
wait "$idle"
out=$(cat "$T/idle.out")
if [ "$(json_get "$out" 'j.get("closed")' 2>/dev/null)" = True ] &&
   awk -v t="$(json_get "$out" 'j["secs"]')" 'BEGIN { exit !(t < 5) }'; then
	ok "idle keep-alive connection closed early in the drain"
else
	not_ok "idle keep-alive connection closed early in the drain"; diag "$out"
fi
wait "$slow"
is "in-flight request completes during the drain" "$(cat "$T/slow.out")" 200
if wait_gone 15 "$BERTHD_PID"; then
	ok "berthd exits after draining"
	wait "$BERTHD_PID"
	is "berthd exit status after SIGTERM" "$?" 0
else
	not_ok "berthd exits after draining"
fi
left=
for w in $workers; do
	wait_gone 5 "$w" || left="$left $w"
done
is "no worker left behind" "$left" ""

done_testing
