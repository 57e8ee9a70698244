#!/bin/sh
# proxy-signals.sh — berthd's process life: SIGHUP reload with an open
# WebSocket surviving and routes kept; a worker killed with SIGKILL is
# restarted while the other worker's open connection survives; SIGTERM
# drains (in-flight request completes, new connections refused, exit).
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

nreload=$(grep -cE '(^|: )reloaded ' "$BERTHD_LOG")
kill -HUP "$BERTHD_PID"
if wait_for 10 sh -c "[ \$(grep -cE '(^|: )reloaded ' '$BERTHD_LOG') -gt $nreload ]"; then
	ok "berthd logs the reload"
else
	not_ok "berthd logs the reload"; diag "$(tail -n 10 "$BERTHD_LOG")"
fi
check "certificate added to the config is picked by SNI after HUP" sni_ok
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
