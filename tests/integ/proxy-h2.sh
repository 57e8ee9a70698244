#!/bin/sh
# proxy-h2.sh — HTTP/2 to browsers (berth.conf `http2 on`, the default):
# ALPN picks h2 over http/1.1 (never on the control API's TLS listener);
# curl --http2 and nghttp fetch through berthd with the same status,
# headers and bodies as over HTTP/1.1 (GET, HEAD, chunked and
# Content-Length upstream responses, 204, 304, 404, berthd's own error
# page), a 10 MB POST with and without a length, SSE arrives event by
# event (not buffered), Server-Timing and the access log; a private port
# with Bearer, query token (302 + cookie) and cookie (cookie fields
# joined, berth's own never reaching the guest); 100 concurrent streams
# on one connection (h2load -m100, SETTINGS says 100; 100 requests of
# 1 s each take about 1 s). A 431 ends its stream (and resets it
# NO_ERROR when the request is still open), as any early answer does,
# and the connection goes on; no 101 over h2 (Upgrade fields: the stream
# reset; a guest's 101: 502). Attacks: a client that never opens its
# window on 100 streams does not make berthd buffer the guest's 4 GB.
# Beside a normal client, answered throughout (its p99 under 2 s; its
# p99 against max(2x, +20 ms) of its median baseline is a figure for
# make bench-timing), each repeated for 8 s: rapid reset
# (streams opened and reset in a loop), CONTINUATION, PING, SETTINGS and
# WINDOW_UPDATE floods, HPACK bombs repeated on a connection get GOAWAY
# (ENHANCE_YOUR_CALM where nghttp2 says so); an HPACK bomb and an
# oversized header list 431; streams beyond h2_streams REFUSED_STREAM; a
# zero-window hold GOAWAY after `timeout send` (tests/integ/h2attack.py);
# the worker's RSS stays bounded (< 20 MB more over all of them) and
# berthd keeps serving. Chromium loads the demo page over h2 and its
# WebSocket echo works (over HTTP/1.1: no RFC 8441). SIGTERM lets a
# stream in flight finish; `http2 off` offers http/1.1 only. The hard
# connection limit holds for connections that negotiated h2.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool curl nghttp h2load openssl
curl --version | grep -q HTTP2 || skip_all "curl has no HTTP/2"

WORKERS=1
CTL_PORT=$(free_port)
berthd_config "limit h2_resets 100" "timeout send 4s" "control_listen 127.0.0.1:$CTL_PORT"
start_berthd
start_testapp app
SB=h2a
URL=$(url_for "$TA_PORT" "$SB")
HOST=$(host_for "$TA_PORT" "$SB")
publish "$SB" "$TA_PORT" >/dev/null || bail "cannot publish $SB $TA_PORT"

# ---- ALPN --------------------------------------------------------------------
alpn() { openssl s_client -connect "127.0.0.1:$HTTPS_PORT" -servername "$HOST" \
	-CAfile "$CA" -alpn "$1" </dev/null 2>&1 | sed -n 's/^ALPN protocol: //p'; }
is "ALPN picks h2 when offered" "$(alpn h2,http/1.1)" h2
is "...even offered second" "$(alpn http/1.1,h2)" h2
is "ALPN http/1.1 alone still works" "$(alpn http/1.1)" http/1.1
is "the control API over TLS (HTTP/1.1 only) never picks h2" \
	"$(openssl s_client -connect "127.0.0.1:$CTL_PORT" -alpn h2,http/1.1 </dev/null 2>&1 |
	sed -n 's/^ALPN protocol: //p')" http/1.1

# ---- the same answers over HTTP/1.1 and HTTP/2 -------------------------------
# norm FILE: a header dump without the status line and the fields that
# differ by nature (date, timing, request id, connection-specific), names lower-cased,
# sorted.
norm() {
	tr -d '\r' <"$1" | sed 1d | grep -v '^$' |
		grep -Eiv '^(date|server-timing|x-request-id|connection|keep-alive|transfer-encoding):' |
		awk -F': ' '{ n = tolower($1); sub(/^[^:]*: /, ""); print n ": " $0 }' | sort
}
# same NAME [CURL ARGS...] URL: status, headers and body agree (bodies
# not compared with SAME_BODY=0).
same() {
	_n=$1; shift
	bcurl --http1.1 -D "$T/h1.hdr" -o "$T/h1.body" "$@"
	bcurl --http2 -D "$T/h2.hdr" -o "$T/h2.body" "$@"
	like "$_n: answered over HTTP/2" "$(head -n 1 "$T/h2.hdr")" '^HTTP/2 '
	is "$_n: same status" "$(head -n 1 "$T/h2.hdr" | awk '{print $2}')" \
		"$(head -n 1 "$T/h1.hdr" | awk '{print $2}')"
	is "$_n: same headers" "$(norm "$T/h2.hdr")" "$(norm "$T/h1.hdr")"
	if [ "${SAME_BODY:-1}" = 0 ] || cmp -s "$T/h1.body" "$T/h2.body"; then
		ok "$_n: same body ($(wc -c <"$T/h2.body") bytes)"
	else
		not_ok "$_n: same body"; diag "$(head -c 300 "$T/h1.body")" "$(head -c 300 "$T/h2.body")"
	fi
}
same "GET Content-Length" "$URL/bytes?n=100000"
like "Server-Timing upstream over h2" "$(cat "$T/h2.hdr")" 'server-timing: upstream;dur='
same "GET chunked upstream" "$URL/bytes?n=300000&chunked=1"
SAME_BODY=0 same "HEAD" -I "$URL/bytes?n=5000"
same "204" "$URL/status?code=204"
same "304" "$URL/status?code=304"
same "404 from the guest" "$URL/status?code=404"
same "the demo page" "$URL/"
SAME_BODY=0 same "berthd's own 404 (request ids differ)" "$(url_for 1 nosuch)/x"
unlike "...berthd's own 404 has none" "$(bcurl --http2 -sI "$(url_for 1 nosuch)/x")" 'server-timing'

body=$(bcurl --http2 -H 'X-Custom: kept' -H 'Cookie: a=1' "$URL/echo/h2log?q=1")
is "the guest sees the target" "$(json_get "$body" 'j["target"]')" "/echo/h2log?q=1"
is "...over HTTP/1.1" "$(json_get "$body" 'j["version"]')" "1.1"
is "...Host from :authority" "$(json_get "$body" '[v for k,v in j["headers"] if k.lower()=="host"][0]')" \
	"$HOST:$HTTPS_PORT"
is "...X-Forwarded-Proto https" "$(json_get "$body" '[v for k,v in j["headers"] if k.lower()=="x-forwarded-proto"][0]')" https
is "...its own headers" "$(json_get "$body" '[v for k,v in j["headers"] if k.lower()=="x-custom"][0]')" kept
wait_log 5 "$BERTHD_LOG" "GET /echo/h2log 200 " || true
like "the access log has the h2 request" "$(grep 'GET /echo/h2log ' "$BERTHD_LOG")" \
	"^access .* 127\.0\.0\.1 $HOST:$HTTPS_PORT $SB $TA_PORT GET /echo/h2log 200 "

# a Host that is not the TLS name: 421, as over HTTP/1.1
code=$(bcurl --http2 -o /dev/null -w '%{http_code}' -H "Host: $(host_for "$TA_PORT" other)" "$URL/echo")
is ":authority other than the TLS name: 421" "$code" 421

# ---- request bodies ------------------------------------------------------------
head -c 10485760 /dev/urandom >"$T/big"
out=$(bcurl --http2 --data-binary @"$T/big" "$URL/upload")
is "POST 10 MB with a length" "$out" '{"bytes":10485760}'
out=$(bcurl --http2 -T - -X POST "$URL/upload" <"$T/big")
is "POST 10 MB without a length (chunked to the guest)" "$out" '{"bytes":10485760}'

# ---- streaming -------------------------------------------------------------------
# 5 events a second apart; after 2.5 s the first ones must be here.
bcurl --http2 -N --max-time 2.5 "$URL/sse?count=5&interval=1000" >"$T/sse" 2>/dev/null
rc=$?
is "SSE over h2 is still streaming at 2.5 s" "$rc" 28
like "...and its first events arrived" "$(cat "$T/sse")" 'data: event 2'
unlike "...not the last" "$(cat "$T/sse")" 'data: event 5'

# ---- the same with nghttp (nghttp2-client) -----------------------------------------
# ngsame NAME PATH [NGHTTP ARGS...]: status, headers and body of nghttp
# against curl over HTTP/1.1 (the curl arguments derived: HEAD, a POST of
# a file); SAME_BODY=0 as above.
ngsame() {
	_n=$1 _p=$2; shift 2
	_c=""
	case "$*" in
	*":method: HEAD"*) _c="-I";;
	*"-d "*) _c="-H Expect: --data-binary @$(printf '%s\n' "$*" | sed -n 's/.*-d \([^ ]*\).*/\1/p')";;
	esac
	bcurl --http1.1 $_c -D "$T/h1.hdr" -o "$T/h1.body" "$URL$_p"
	nghttp -nv -H ":authority: $HOST:$HTTPS_PORT" "$@" "https://127.0.0.1:$HTTPS_PORT$_p" \
		>"$T/ng.v" 2>&1
	nghttp -H ":authority: $HOST:$HTTPS_PORT" "$@" "https://127.0.0.1:$HTTPS_PORT$_p" \
		>"$T/ng.body" 2>"$T/ng.err"
	# nghttp -v: "[  0.010] recv (stream_id=13) name: value"
	sed -n 's/^\[ *[0-9.]*\] recv (stream_id=[0-9]*) //p' "$T/ng.v" >"$T/ng.fields"
	{ echo "HTTP/2 $(sed -n 's/^:status: //p' "$T/ng.fields")"
	  grep -v '^:' "$T/ng.fields"; } >"$T/ng.hdr"
	is "nghttp $_n: same status" "$(head -n 1 "$T/ng.hdr" | awk '{print $2}')" \
		"$(head -n 1 "$T/h1.hdr" | awk '{print $2}')"
	is "nghttp $_n: same headers" "$(norm "$T/ng.hdr")" "$(norm "$T/h1.hdr")"
	if [ "${SAME_BODY:-1}" = 0 ] || cmp -s "$T/h1.body" "$T/ng.body"; then
		ok "nghttp $_n: same body ($(wc -c <"$T/ng.body") bytes)"
	else
		not_ok "nghttp $_n: same body"; diag "$(head -c 300 "$T/ng.err")"
	fi
}
ngsame "GET Content-Length" "/bytes?n=100000"
ngsame "GET chunked upstream" "/bytes?n=300000&chunked=1"
SAME_BODY=0 ngsame "HEAD" "/bytes?n=5000" -H ':method: HEAD'
ngsame "204" "/status?code=204"
ngsame "304" "/status?code=304"
ngsame "POST 10 MB" "/upload" -d "$T/big"
# SSE: 5 events a second apart; at 2.5 s nghttp has the first ones only
timeout 2.5 stdbuf -o0 nghttp -H ":authority: $HOST:$HTTPS_PORT" \
	"https://127.0.0.1:$HTTPS_PORT/sse?count=5&interval=1000" >"$T/ng.sse" 2>/dev/null
is "nghttp: SSE still streaming at 2.5 s" "$?" 124
like "...its first events arrived" "$(cat "$T/ng.sse")" 'data: event 2'
unlike "...not the last" "$(cat "$T/ng.sse")" 'data: event 5'

# ---- nghttp: SETTINGS, several streams ----------------------------------------------
out=$(nghttp -nv -H ":authority: $HOST:$HTTPS_PORT" \
	"https://127.0.0.1:$HTTPS_PORT/echo" "https://127.0.0.1:$HTTPS_PORT/bytes?n=1000" 2>&1)
like "SETTINGS_MAX_CONCURRENT_STREAMS 100" "$out" 'SETTINGS_MAX_CONCURRENT_STREAMS\(0x03\):100'
like "nghttp: two responses" "$(printf '%s\n' "$out" | grep -c ':status: 200')" '^2$'

# ---- 100 concurrent streams on one connection ----------------------------------
out=$(timeout 60 h2load -n 100 -c 1 -m 100 --connect-to "127.0.0.1:$HTTPS_PORT" "$URL/echo" 2>&1)
like "h2load: 100 streams on one connection succeed" "$out" 'requests: 100 total, 100 started, 100 done, 100 succeeded'
like "...all 2xx" "$out" 'status codes: 100 2xx'
# concurrent indeed: 100 requests of 1 s each, in flight at once
t0=$(date +%s)
out=$(timeout 60 h2load -n 100 -c 1 -m 100 --connect-to "127.0.0.1:$HTTPS_PORT" \
	"$URL/slow?ms=1000" 2>&1)
t1=$(date +%s)
like "h2load: 100 streams of 1 s each on one connection" "$out" 'status codes: 100 2xx'
[ $((t1 - t0)) -le 15 ] && ok "...served side by side ($((t1 - t0)) s, not 100)" ||
	not_ok "...served side by side ($((t1 - t0)) s, not 100)"

# ---- private port -------------------------------------------------------------------
out=$(netctl sandbox add h2p --address 127.0.0.1) || bail "sandbox add: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
netctl port publish h2p "$TA_PORT" --private >/dev/null || bail "publish h2p"
U=$(url_for "$TA_PORT" h2p)
wait_routed h2p "$TA_PORT"
code=$(bcurl --http2 -o /dev/null -w '%{http_code}' "$U/echo")
is "private, no token: 401" "$code" 401
body=$(bcurl --http2 -H "Authorization: Bearer $tok" "$U/echo")
like "private, Bearer: served" "$body" '"target":"/echo"'
unlike "...the token never reaches the guest" "$body" "$tok"
hdr=$(bcurl --http2 -s -D - -o /dev/null "$U/echo?a=1&berth_token=$tok" | tr -d '\r')
like "private, query token: 302" "$hdr" '^HTTP/2 302'
like "...to the URL without it" "$hdr" 'location: /echo\?a=1'
like "...with the host-scoped cookie" "$hdr" 'set-cookie: __Host-berth_token=berth_[^;]*; Path=/; Secure; HttpOnly; SameSite=Lax'
out=$(nghttp -H ":authority: $(host_for "$TA_PORT" h2p):$HTTPS_PORT" \
	-H "authorization: Bearer $tok" "https://127.0.0.1:$HTTPS_PORT/echo" 2>&1)
like "private, Bearer, nghttp: served" "$out" '"target":"/echo"'
out=$(nghttp -v -n -H ":authority: $(host_for "$TA_PORT" h2p):$HTTPS_PORT" \
	"https://127.0.0.1:$HTTPS_PORT/echo?berth_token=$tok" 2>&1)
like "private, query token, nghttp: 302 with the cookie" "$out" 'set-cookie: __Host-berth_token='
# nghttp sends each cookie as its own field: joined for the guest
out=$(nghttp -d /dev/null -H ":authority: $(host_for "$TA_PORT" h2p):$HTTPS_PORT" \
	-H 'cookie: theme=dark' -H "cookie: __Host-berth_token=$tok" -H 'cookie: lang=en' \
	"https://127.0.0.1:$HTTPS_PORT/echo" 2>&1)
like "private, cookie: served" "$out" '"target":"/echo"'
unlike "...berth's cookie never reaches the guest" "$out" "$tok"
like "...the guest's cookies do, joined" "$out" 'theme=dark; lang=en'

# ---- a stream berthd answers itself: 431, then reset; no 101 over h2 ---------------
ATK="$top_srcdir/tests/integ/h2attack.py"
h2seq() { timeout 30 python3 "$ATK" "$HTTPS_PORT" "$HOST" "$HOST:$HTTPS_PORT" "$CA" "$@" 2>&1; }
big=$(head -c 17000 /dev/zero | tr '\0' a)
out=$(bcurl --http2 -D "$T/431.hdr" -H "x-big: $big" "$URL/healthz")
is "a header list over h2_header_list: 431" "$(head -n 1 "$T/431.hdr" | tr -d '\r')" "HTTP/2 431 "
like "...with a JSON error naming the limit" "$out" '^\{"error":\{"status":431,"sandbox":null,"reason":"the request.s header list is over 16384 bytes"\}\}$'
wait_log 5 "$BERTHD_LOG" " GET /healthz 431 " || true
like "...in the access log (no sandbox: it never got that far)" "$(grep ' GET /healthz 431 ' "$BERTHD_LOG" | head -n 1)" \
	"^access [0-9T:.-]+Z 127\.0\.0\.1 $HOST:$HTTPS_PORT - 0 GET /healthz 431 [0-9]+ "
# RFC 9113 8.1: the 431 ends the stream (END_STREAM); a request still
# open is then reset with NO_ERROR so the client stops sending it; DATA
# that was already on its way is thrown away, and the connection goes on.
is "431 to a whole request: END_STREAM, and the next stream is served" \
	"$(h2seq big431 140)" "s1 431, s1 end, s3 200, s3 end"
is "431 to a POST whose body is still open: END_STREAM, RST_STREAM NO_ERROR, the next stream served" \
	"$(h2seq big431open 140)" "s1 431, s1 end, s1 rst 0, s3 200, s3 end"
is "...the same for an HPACK bomb" \
	"$(h2seq bomb431open 1000)" "s1 431, s1 end, s1 rst 0, s3 200, s3 end"
# Any response that ends before its request does (here 401 from a
# private port to a POST whose body is open) is reset NO_ERROR alike.
out=$(nghttp -v -d "$T/big" -H ":authority: $(host_for "$TA_PORT" h2p):$HTTPS_PORT" \
	"https://127.0.0.1:$HTTPS_PORT/upload" 2>&1)
like "an early 401 to a 10 MB POST over h2" "$out" ':status: 401'
like "...then RST_STREAM NO_ERROR: the client stops sending" \
	"$(printf '%s\n' "$out" | grep -A1 'recv RST_STREAM' | tr -s ' \n' ' ')" \
	'recv RST_STREAM frame <.*stream_id=[0-9]+> \(error_code=NO_ERROR\(0x00\)\)'
# HTTP/2 has no 101 (RFC 9113 8.6). A request that asks for an upgrade
# is malformed over h2 (Connection, Upgrade: 8.2.2) and reset; curl
# drops those fields itself. A guest that switches protocols anyway
# gets its client a 502, as an unasked 101 does over HTTP/1.1: a reset
# would tell a browser only "protocol error", and the stream cannot
# carry a tunnel.
is "Connection/Upgrade fields over h2: the stream reset PROTOCOL_ERROR, the connection goes on" \
	"$(h2seq upgrade 0)" "s1 rst 1, s3 200, s3 end"
spawn "$T/up101.log" python3 -u "$ATK" up101 0
wait_log 10 "$T/up101.log" "^listening on" "$SPAWNED" || bail "the 101 guest did not start"
UP101=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$T/up101.log")
publish h2u "$UP101" >/dev/null || bail "cannot publish h2u $UP101"
U101=$(url_for "$UP101" h2u)
wait_log 10 "$T/up101.log" "^closed"	# publish's probe
: >"$T/up101.log"
out=$(bcurl --http2 -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
	-H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
	-w '\n%{http_version} %{http_code} %{num_connects}\n' "$U101/ws" \
	-w '\n%{http_version} %{http_code} %{num_connects}\n' "$U101/ws")
is "a guest's 101 to an h2 request: 502, twice on one connection (no hang)" \
	"$(printf '%s\n' "$out" | grep -E '^[0-9.]+ [0-9]+ [0-9]+$' | tr '\n' ' ')" "2 502 1 2 502 0 "
like "...saying why" "$out" '"reason":"upstream switched protocols unasked"'
closed2() { [ "$(grep -c '^closed' "$T/up101.log")" -ge 2 ]; }
wait_for 10 closed2
is "...and the guest's connections closed (no tunnel left open)" "$(grep -c '^closed' "$T/up101.log")" 2
is "...as over HTTP/1.1 for an unasked 101" \
	"$(bcurl -o /dev/null -w '%{http_version} %{http_code}' "$U101/ws")" "1.1 502"

# ---- attacks ------------------------------------------------------------------------
# A client that never opens its window on 100 streams (h2_streams) while
# the guest has 4 GB to send on each: the guest is paced, berthd holds a
# bounded amount per stream (about 200 KiB; 40 MB allows twice that).
rss0=$(max_worker_kb VmRSS)
: >"$TA_REQLOG"
spawn "$T/hold.out" python3 "$ATK" "$HTTPS_PORT" "$HOST" "$HOST:$HTTPS_PORT" "$CA" hold 100
HOLD=$SPAWNED
wait_log 10 "$TA_REQLOG" "GET /bytes" || not_ok "the held request reached the guest"
sleep 3	# the measure: what the worker holds after 3 s of a stalled stream
rss1=$(max_worker_kb VmRSS)
diag "worker RSS $rss0 kB before, $rss1 kB with 100 stalled 4 GB streams"
[ $((rss1 - rss0)) -lt 40960 ] && ok "zero-window stall on 100 streams: berthd holds < 40 MB more" ||
	not_ok "zero-window stall on 100 streams: berthd holds < 40 MB more ($rss0 -> $rss1 kB)"
kill "$HOLD" 2>/dev/null
is "...and still serves" "$(bcurl --http2 -o /dev/null -w '%{http_code}' "$URL/healthz")" 200

# ---- more attacks, each beside a normal client's latency ---------------------------
# (tests/integ/h2attack.py). The normal client: 200 sequential HTTP/1.1
# requests on one keep-alive connection; its p99. The bound is
# max(2 x baseline, baseline + 20 ms), the baseline the median of three
# runs in this same test: a noisy 2-core machine moves a p99 of a few ms
# by more than 2x with no attack at all.
atk() { timeout 150 python3 "$ATK" "$HTTPS_PORT" "$HOST" "$HOST:$HTTPS_PORT" "$CA" "$@" 2>&1; }
p99() { atk lat 200 /healthz | awk '{print $4}'; }
b1=$(p99); b2=$(p99); b3=$(p99)
BASE=$(printf '%s\n' "$b1" "$b2" "$b3" | sort -n | sed -n 2p)
BOUND=$(awk -v b="$BASE" 'BEGIN { x = 2 * b; y = b + 20; printf "%.1f", (x > y ? x : y) }')
diag "normal client p99: $b1 $b2 $b3 ms; median $BASE; bound under attack $BOUND ms"
# beside NAME MODE N: the attack repeated for 8 s while the normal client
# measures; its first outcome in $OUT. The test asserts liveness: every
# one of the normal client's 200 requests is answered and its p99 stays
# under 2 s (an attack that starved the others fails that, however busy
# the machine). Its p99 against the bound above, max(2x, +20 ms) of the
# baseline, is a figure (lib.sh timing: judged by make bench-timing,
# BERTH_TIMING_STRICT=1), measured once more beside a fresh baseline
# when over it: other work on a shared machine comes and goes.
LIVE_MS=2000
beside() {
	_n=$1; shift
	_b=$BOUND _try=1 _base=$BASE
	while :; do
		atk "$@" 8 >"$T/atk.out" &
		_a=$!
		echo "$_a" >>"$T/pids"
		sleep 0.5
		_p=$(p99)
		wait "$_a"
		[ $_try = 1 ] && OUT=$(head -n 1 "$T/atk.out")
		diag "$_n: $(tr '\n' ' ' <"$T/atk.out"); normal p99 $_p ms (bound $_b)"
		awk -v p="$_p" -v b="$_b" 'BEGIN { exit !(p != "" && p <= b) }' && break
		[ $_try = 2 ] && break
		_try=2
		_base=$( (p99; p99; p99) | sort -n | sed -n 2p)
		_b=$(printf '%s\n' "$_base" |
			awk '{ x = 2 * $1; y = $1 + 20; printf "%.1f", (x > y ? x : y) }')
	done
	if awk -v p="$_p" -v b="$LIVE_MS" 'BEGIN { exit !(p != "" && p <= b) }'; then
		ok "$_n: the normal client was answered throughout (p99 ${_p} ms, under ${LIVE_MS} ms)"
	else
		not_ok "$_n: the normal client was answered throughout (p99 ${_p:-none} ms, under ${LIVE_MS} ms)"
	fi
	timing "h2 $_n: a normal client's p99" \
		"$(printf '%.0f' "${_p:-999999}")" "$(printf '%.0f' "${_base:-0}")" \
		"$(printf '%.0f' "$_b")"
}
RSS_ATK0=$(max_worker_kb VmRSS)
beside "rapid reset (2000 streams opened and reset, h2_resets 100)" reset 2000
is "rapid reset: GOAWAY ENHANCE_YOUR_CALM (11)" "$OUT" "goaway 11"
like "...logged" "$(grep 'streams reset in' "$BERTHD_LOG" | head -n 1)" \
	"h2 127\.0\.0\.1:[0-9]+: 10[0-9] streams reset in 10 s: GOAWAY"
# resets the server must make for the client ("MadeYouReset": DATA past
# each request's content-length) count the same
beside "made-you-reset (2000 streams the server must reset)" madereset 2000
is "made-you-reset: GOAWAY ENHANCE_YOUR_CALM (11)" "$OUT" "goaway 11"
beside "CONTINUATION flood (10000 frames)" cont 10000
is "CONTINUATION flood: GOAWAY ENHANCE_YOUR_CALM" "$OUT" "goaway 11"
beside "PING flood (1000000, answers unread)" ping 1000000
# (the GOAWAY may be lost to the TCP reset of closing on unread input)
like "PING flood: GOAWAY ENHANCE_YOUR_CALM or closed" "$OUT" "^(goaway 11|eof)$"
like "...the flood logged" "$(grep 'Flooding' "$BERTHD_LOG" | head -n 1)" "h2 127\.0\.0\.1:[0-9]+: Flooding was detected"
rss0=$(max_worker_kb VmRSS)
beside "HPACK bomb (a 4 KB field referenced 1000 times)" hpack 1000
is "HPACK bomb: 431" "$OUT" "headers 431"
like "...logged as over h2_header_list" "$(cat "$BERTHD_LOG")" 'header list over 16384 bytes: 431'
beside "oversized header list (140 fields of 100 bytes, one frame)" biglist 140
is "oversized header list: 431" "$OUT" "headers 431"
rss1=$(max_worker_kb VmRSS)
[ $((rss1 - rss0)) -lt 20480 ] && ok "...the worker's RSS grew < 20 MB ($rss0 -> $rss1 kB)" ||
	not_ok "...the worker's RSS grew < 20 MB ($rss0 -> $rss1 kB)"
beside "HPACK bombs repeated on one connection (20)" hpackrep 20
is "repeated HPACK bombs: 431s, then GOAWAY ENHANCE_YOUR_CALM" "$OUT" "goaway 11"
like "...logged" "$(cat "$BERTHD_LOG")" 'h2 127\.0\.0\.1:[0-9]+: 11 header lists over 16384 bytes in 10 s: GOAWAY'
beside "SETTINGS flood (1000000, ACKs unread)" settings 1000000
like "SETTINGS flood: GOAWAY ENHANCE_YOUR_CALM or PROTOCOL_ERROR, or closed" "$OUT" '^(goaway (11|1)|eof)$'
beside "WINDOW_UPDATE flood (200000)" winupd 200000
like "WINDOW_UPDATE flood: GOAWAY ENHANCE_YOUR_CALM or PROTOCOL_ERROR" "$OUT" '^goaway (11|1)$'
beside "too many streams (150 long ones, h2_streams 100)" streams 150
is "too many streams: 50 refused (REFUSED_STREAM)" "$OUT" "refused 50"
beside "zero-window hold (a window of 0 on a 4 GB response)" zerohold 4294967296
is "zero-window hold: GOAWAY ENHANCE_YOUR_CALM" "$OUT" "goaway 11"
after=$(sed -n 's/^after //p' "$T/atk.out")
awk -v a="$after" 'BEGIN { exit !(a >= 3.5 && a <= 8) }' &&
	ok "...after timeout send (4 s): $after s" || not_ok "...after timeout send (4 s): $after s"
like "...logged" "$(cat "$BERTHD_LOG")" "the client's window stayed shut for 4 s: GOAWAY"
RSS_ATK1=$(max_worker_kb VmRSS)
[ $((RSS_ATK1 - RSS_ATK0)) -lt 20480 ] &&
	ok "after all the attacks the worker's RSS grew < 20 MB ($RSS_ATK0 -> $RSS_ATK1 kB)" ||
	not_ok "after all the attacks the worker's RSS grew < 20 MB ($RSS_ATK0 -> $RSS_ATK1 kB)"
kill -0 "$BERTHD_PID" && ok "berthd is up after the floods" || not_ok "berthd is up after the floods"
[ "$(berthd_workers | wc -l)" -ge 1 ] && ok "its worker too" || not_ok "its worker too"
if grep -Eq 'worker .* (died|exited|signal)' "$BERTHD_LOG"; then
	not_ok "no worker died"; diag "$(grep -E 'worker .* (died|exited|signal)' "$BERTHD_LOG")"
else ok "no worker died"; fi
is "...and serves over h2" "$(bcurl --http2 -o /dev/null -w '%{http_version} %{http_code}' "$URL/healthz")" "2 200"

# ---- Chromium: the page over h2, its WebSocket over HTTP/1.1 ----------------------
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ] && command -v certutil >/dev/null 2>&1; then
	HOME="$T/home"
	export HOME
	mkdir -p "$HOME/.pki/nssdb" "$T/profile"
	certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password &&
	certutil -d "sql:$HOME/.pki/nssdb" -A -t "C,," -n "berth dev CA" -i "$CA" ||
		bail "cannot trust the dev CA in NSS"
	: >"$TA_REQLOG"
	out=$(python3 "$top_srcdir/tests/integ/proxy_cdp.py" --chromium "$CHROMIUM" \
		--url "$URL/" --selector '#echo' --expect "hello from browser" \
		--timeout 30 --log "$T/chromium.log" -- \
		--headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--disable-dev-shm-usage --user-data-dir="$T/profile")
	rc=$?
	is "Chromium: the page's WebSocket echo works" "$rc" 0
	is "...the page came over h2 (nextHopProtocol)" "$(json_get "$out" 'j.get("proto","")')" h2
	like "...the WebSocket went through berthd (HTTP/1.1 fallback)" "$(cat "$TA_REQLOG")" " GET /ws"
	# A dev server's page: 200 ES modules (a static server of Python's
	# for the JavaScript MIME type module scripts need); the page says
	# how many ran and the protocols its resources came over.
	mkdir -p "$T/site"
	i=0; : >"$T/site/main.js"
	while [ $i -lt 200 ]; do
		echo "export const v = $i;" >"$T/site/m$i.js"
		echo "import { v as v$i } from './m$i.js';" >>"$T/site/main.js"
		i=$((i + 1))
	done
	echo "const p = new Set(performance.getEntriesByType('resource').map(e => e.nextHopProtocol));" >>"$T/site/main.js"
	echo "document.getElementById('echo').textContent = 'modules ran: 200 via ' + Array.from(p).join(',');" >>"$T/site/main.js"
	printf '%s\n' '<!doctype html><meta charset=utf-8><title>200 modules</title>' \
		'<div id=echo>loading</div><script type=module src=main.js></script>' >"$T/site/index.html"
	echo ok >"$T/site/healthz"	# publish waits for an answer there
	SITE_PORT=$(free_port)
	# (http.server's own listen backlog of 5 drops the SYNs of 100 streams'
	# connections at once: their retries take seconds)
	spawn "$T/site.log" python3 -u -c 'import functools, http.server as h, sys
class S(h.ThreadingHTTPServer): request_queue_size = 1024
class H(h.SimpleHTTPRequestHandler): protocol_version = "HTTP/1.1"
s = S(("127.0.0.1", int(sys.argv[1])), functools.partial(H, directory=sys.argv[2]))
print("serving", flush=True)
s.serve_forever()' "$SITE_PORT" "$T/site"
	wait_log 10 "$T/site.log" "^serving" "$SPAWNED" || bail "the static server did not start"
	publish h2m "$SITE_PORT" >/dev/null || bail "cannot publish h2m $SITE_PORT"
	rm -rf "$T/profile" && mkdir -p "$T/profile"
	out=$(python3 "$top_srcdir/tests/integ/proxy_cdp.py" --chromium "$CHROMIUM" \
		--url "$(url_for "$SITE_PORT" h2m)/index.html" --selector '#echo' \
		--expect "modules ran: 200 via" --timeout 180 --log "$T/chromium.log" -- \
		--headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--disable-dev-shm-usage --user-data-dir="$T/profile")
	is "Chromium: a page of 200 module scripts loads and runs" "$?" 0
	is "...every module over h2 (nextHopProtocol)" "$(json_get "$out" 'j.get("text","")')" "modules ran: 200 via h2"
	is "...the page too" "$(json_get "$out" 'j.get("proto","")')" h2
else
	ok "# SKIP chromium or certutil not installed"
fi

# ---- SIGTERM drains: the stream in flight finishes, then GOAWAY ---------------------
bcurl --http2 -N "$URL/sse?count=3&interval=1000" >"$T/drain.sse" 2>"$T/drain.err" &
CURL=$!
echo "$CURL" >>"$T/pids"
wait_log 10 "$T/drain.sse" "data: event 1" || not_ok "the SSE stream began"
kill -TERM "$BERTHD_PID"
wait "$CURL"
rc=$?
is "SIGTERM: the h2 stream in flight completes" "$rc" 0
like "...with all its events" "$(cat "$T/drain.sse")" 'data: event 3'
wait_gone 20 "$BERTHD_PID" || bail "berthd did not stop"
ok "...and berthd exits"
unlike "...once it is done, not at the drain deadline" "$(cat "$BERTHD_LOG")" "drain deadline"

# ---- http2 off ----------------------------------------------------------------------
echo "http2 off" >>"$CONF"
start_berthd
is "http2 off: ALPN http/1.1 only" "$(alpn h2,http/1.1)" http/1.1
wait_routed "$SB" "$TA_PORT"
is "...curl --http2 gets HTTP/1.1" "$(bcurl --http2 -o /dev/null -w '%{http_version} %{http_code}' "$URL/healthz")" "1.1 200"
printf 'domain %s\nhttp2 maybe\n' "$DOMAIN" >"$T/bad.conf"
"$BERTHD" -n -f "$T/bad.conf" -s "$STATE" >"$T/n.out" 2>&1
like "http2 maybe: refused naming the line" "$(cat "$T/n.out")" "bad.conf:2: http2: expected 'on' or 'off', got 'maybe'"

# ---- the hard connection limit holds for h2 connections too ------------------------
# Past `limit connections` + 1/4 + 16 (4 + 1 + 16 = 21 here, one worker) a
# worker stops accepting and new connections wait in the listen backlog.
# A connection that negotiated h2 passes from the session layer to h2.c
# still counted: there is no moment at 20 that lets one more in. 25
# clients offering h2 at once: exactly 21 finish their handshakes, and the
# other 4 do once those close.
kill -TERM "$BERTHD_PID"
wait_gone 20 "$BERTHD_PID" || bail "berthd did not stop"
sed -i '/^http2 off$/d' "$CONF"
printf 'limit connections 4\ntimeout head 60s\n' >>"$CONF"
start_berthd
wait_routed "$SB" "$TA_PORT"
out=$(python3 "$top_srcdir/tests/integ/h2hold.py" "$HTTPS_PORT" "$HOST" "$CA" 25 21)
is "25 h2 clients at once: 21 accepted, the hard limit ($out)" "$(json_get "$out" 'j["held"]')" 21
is "...each of them speaking h2" "$(json_get "$out" '",".join(j["alpn"])')" h2
is "...the other 4 once those closed" "$(json_get "$out" 'j["after"]')" 4

done_testing
