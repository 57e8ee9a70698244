#!/bin/sh
# proxy-stream.sh — streaming through berthd: 100 MB chunked upload and
# download with the worker's memory bounded (also while the client stops
# reading: backpressure), SSE events arriving as sent, WebSocket echo over
# wss, and an Upgrade the upstream refuses staying plain HTTP.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

MB100=104857600
LIMIT_KB=${BERTH_TEST_RSS_LIMIT_KB:-65536}   # 64 MB per process

WORKERS=1
berthd_config
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish"
URL=$(url_for "$TA_PORT" sb1)
HOST=$(host_for "$TA_PORT" sb1)
P="py --port $HTTPS_PORT --host $HOST --ca $CA --timeout 60"

base=$(max_worker_kb VmRSS)
diag "berthd RSS before: $base kB (largest of parent and workers)"

# ---- 100 MB up and down -----------------------------------------------------
body=$(head -c $MB100 /dev/zero | CURL_MAX_TIME=120 bcurl -X POST -T - \
	-H 'Content-Type: application/octet-stream' "$URL/upload")
is "100 MB chunked upload arrives whole" "$body" "{\"bytes\":$MB100}"
hwm=$(max_worker_kb VmHWM)
if [ "$hwm" -lt "$LIMIT_KB" ]; then ok "memory bounded during upload (VmHWM $hwm kB)"
else not_ok "memory bounded during upload (VmHWM $hwm kB >= $LIMIT_KB)"; fi

n=$(CURL_MAX_TIME=120 bcurl -o /dev/null -w '%{size_download}' "$URL/bytes?n=$MB100&chunked=1")
is "100 MB chunked download arrives whole" "$n" $MB100
hwm=$(max_worker_kb VmHWM)
if [ "$hwm" -lt "$LIMIT_KB" ]; then ok "memory bounded during download (VmHWM $hwm kB)"
else not_ok "memory bounded during download (VmHWM $hwm kB >= $LIMIT_KB)"; fi

# A client that stops reading: berthd must stop reading the upstream rather
# than buffer the rest. Sample the RSS for 2 s while the client is stalled.
spawn "$T/dl.out" $P download --path "/bytes?n=$MB100" --ready "$T/dl.ready" --hold "$T/dl.go"
dl=$SPAWNED
if wait_for 20 test -e "$T/dl.ready"; then
	peak=0 i=0
	while [ $i -lt 40 ]; do
		for pid in $(berthd_workers); do
			v=$(proc_kb "$pid" VmRSS)
			[ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v
		done
		sleep 0.05; i=$((i + 1))
	done
	if [ "$peak" -lt "$LIMIT_KB" ]; then ok "memory bounded while the client stalls (RSS peak $peak kB)"
	else not_ok "memory bounded while the client stalls (RSS peak $peak kB >= $LIMIT_KB)"; fi
	touch "$T/dl.go"
	wait "$dl"
	is "stalled download resumes and completes" "$(json_get "$(cat "$T/dl.out")" 'j["body_bytes"]')" $MB100
else
	not_ok "stalled download started"; diag "$(cat "$T/dl.out")"
	not_ok "stalled download resumes and completes"
fi

# ---- slow exchanges, when many, run after the others -----------------------
# 20 uploads whose bodies trickle in: each is a slow exchange after
# PX_SLOW_MS (200 ms); past PX_SLOW_CALM (16) in a worker they move to a
# lower event priority (berth_connections_deferred). Meanwhile a normal
# request is answered; the next request on each of those connections
# starts at the normal priority again.
# (the workers report once a second: the stalled download above may still count)
check "no slow connection at rest" wait_for 5 metric_is berth_connections_slow 0
spawn "$T/trickle.out" $P trickle -n 20 --ready "$T/tr.ready" --go "$T/tr.go" \
	--done "$T/tr.done" --hold "$T/tr.hold"
trickler=$SPAWNED
check "20 slow bodies under way" wait_for 20 test -e "$T/tr.ready"
check "berth_connections_slow counts them (20)" wait_for 10 metric_is berth_connections_slow 20
check "past 16, they run after the others (berth_connections_deferred 20)" \
	wait_for 10 metric_is berth_connections_deferred 20
is "a normal request meanwhile" "$(bcurl -o /dev/null -w '%{http_code}' "$URL/healthz")" 200
touch "$T/tr.go"
check "the slow bodies' connections sent their next requests" wait_for 20 test -e "$T/tr.done"
check "their next requests are not slow: berth_connections_slow 0" \
	wait_for 10 metric_is berth_connections_slow 0
is "... and none deferred" "$(metric berth_connections_deferred)" 0
touch "$T/tr.hold"
wait_gone 10 "$trickler"
is "the slow uploads and the requests after them were answered" \
	"$(json_get "$(cat "$T/trickle.out")" '(j["status"], j["then"])')" "([200], [200])"

# ---- SSE ---------------------------------------------------------------------
out=$($P sse --path "/sse?count=5&interval=400" --count 5)
like "SSE content type" "$(json_get "$out" 'j["content_type"]')" "^text/event-stream"
times=$(json_get "$out" '" ".join(str(t) for t in j["times"])')
diag "SSE arrival times: $times"
is "5 SSE events" "$(json_get "$out" 'len(j["times"])')" 5
# Sent every 400 ms: each must arrive on its own, not batched at the end.
check "SSE events arrive as sent (gaps >= 250 ms, none held back)" python3 -c '
import sys
t = [float(x) for x in sys.argv[1:]]
gaps = [b - a for a, b in zip(t, t[1:])]
assert len(t) == 5 and t[0] < 1.0 and all(g >= 0.25 for g in gaps), gaps
' $times

# ---- WebSocket -----------------------------------------------------------
big=$(head -c 70000 /dev/zero | tr '\0' 'w')
out=$($P ws "hello" "second message" "$big" 2>&1)
if [ $? -eq 0 ]; then ok "WebSocket echo over wss (small and 70 kB messages)"
else not_ok "WebSocket echo over wss (small and 70 kB messages)"; diag "$(printf '%s' "$out" | cut -c1-200)"; fi

# ---- Upgrade refused: no tunnel ---------------------------------------------
out=$($P ws-refuse 2>&1)
rc=$?
diag "$out"
is "upgrade answered 403 comes back as 403" "$(json_get "$out" 'j.get("status")' 2>/dev/null)" 403
if [ $rc -eq 0 ]; then ok "after a refused upgrade the connection still speaks HTTP"
else not_ok "after a refused upgrade the connection still speaks HTTP"; fi

done_testing
