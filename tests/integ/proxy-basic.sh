#!/bin/sh
# proxy-basic.sh — berthd end to end with the real daemon, netctl and
# testapp on loopback: config check (a directory or missing file as -f
# is an error), <state>/tls modes, TLS, routing through a published
# port, upstream keep-alive reuse, forwarded/hop-by-hop headers, Host
# handling, request ids, response headers berth owns (a guest's Berth-*,
# hop-by-hop and berth-cookie headers never reach the client), the access
# log, HTTP->HTTPS redirect (only for names berth serves: 404 for others)
# and the ACME challenge directory, bodies and bodiless responses,
# Server-Timing: upstream;dur on every proxied response.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

WORKERS=1
berthd_config

# ---- config check ----------------------------------------------------------
if "$BERTHD" -n -f "$CONF" -s "$STATE" >"$T/n.out" 2>&1; then
	ok "berthd -n accepts the generated config"
else
	not_ok "berthd -n accepts the generated config"; diag "$(cat "$T/n.out")"
fi
printf 'domain %s\n# comment\nfrobnicate yes\n' "$DOMAIN" >"$T/bad.conf"
"$BERTHD" -n -f "$T/bad.conf" -s "$STATE" >"$T/n.out" 2>&1
rc=$?
is "berthd -n on a bad directive exits 1" "$rc" 1
like "berthd -n cites FILE:LINE" "$(cat "$T/n.out")" "$T/bad.conf:3: "
"$BERTHD" -n -f "$T" -s "$STATE" >"$T/n.out" 2>&1
rc=$?
is "berthd -n -f DIRECTORY exits 1" "$rc" 1
like "...naming it" "$(cat "$T/n.out")" "$T: is a directory"
printf 'domain %s\n\ncertificate /etc/hostname /etc/hostname\n' "$DOMAIN" >"$T/cert.conf"
"$BERTHD" -n -f "$T/cert.conf" -s "$STATE" >"$T/n.out" 2>&1
rc=$?
is "berthd -n on a certificate that does not load exits 1" "$rc" 1
like "...citing FILE:LINE and the files" "$(cat "$T/n.out")" \
	"$T/cert.conf:3: certificate /etc/hostname /etc/hostname: "
"$BERTHD" -n -f "$T/nonexistent.conf" -s "$STATE" >"$T/n.out" 2>&1
rc=$?
is "berthd -n -f MISSING exits 1" "$rc" 1
like "...naming it" "$(cat "$T/n.out")" "$T/nonexistent.conf: No such file"

start_berthd
ok "berthd logs ready"
is "<state>/tls is 0755" "$(stat -c %a "$STATE/tls")" 755
is "ca.pem and server.pem are 0644" "$(stat -c %a "$STATE/tls/ca.pem" "$STATE/tls/server.pem" | tr '\n' ' ')" "644 644 "
is "the keys are 0600" "$(stat -c %a "$STATE/tls/ca.key" "$STATE/tls/server.key" | tr '\n' ' ')" "600 600 "
if runuser -u nobody -- cat "$CA" >/dev/null 2>&1; then ok "a user other than root can read ca.pem"
else not_ok "a user other than root can read ca.pem"; fi
if runuser -u nobody -- cat "$STATE/tls/server.key" >/dev/null 2>&1; then
	not_ok "...but not the server key"
else ok "...but not the server key"; fi
like "ready line names the listeners" "$(grep 'berthd: ready' "$BERTHD_LOG")" \
	"https 127.0.0.1:$HTTPS_PORT http 127.0.0.1:$HTTP_PORT workers 1"

start_testapp app
SB=sb1
URL=$(url_for "$TA_PORT" "$SB")
HOST=$(host_for "$TA_PORT" "$SB")
out=$(publish "$SB" "$TA_PORT") || bail "cannot publish $SB $TA_PORT: $out"
like "netctl port publish prints the URL" "$out" "^$URL/?$"

# ---- TLS ---------------------------------------------------------------------
tls() { openssl s_client -connect "127.0.0.1:$HTTPS_PORT" -servername "$HOST" \
	-CAfile "$CA" -verify_return_error "$@" </dev/null 2>&1; }
out=$(tls -tls1_3 -alpn http/1.1)
like "TLS 1.3 handshake verifies against the dev CA" "$out" "Verify return code: 0 \(ok\)"
like "ALPN selects http/1.1" "$out" "ALPN protocol: http/1.1"
like "server key is ECDSA P-256" "$out" "(Peer signature type: ecdsa_secp256r1_sha256|Server public key is 256 bit)"
out=$(tls -tls1_2)
like "TLS 1.2 works" "$out" "Protocol *: TLSv1.2"
out=$(tls -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0')
like "TLS 1.1 is refused" "$out" "Cipher is \(NONE\)"

# ---- a request through the route -------------------------------------------
body=$(bcurl "$URL/echo?x=1")
is "GET through the route reaches the upstream" "$(json_get "$body" 'j["target"]')" "/echo?x=1"

# ---- keep-alive: client side and upstream pool -------------------------------
# One curl, two URLs: one client connection; both requests must ride one
# upstream connection (testapp numbers its TCP connections).
bcurl -o "$T/ka1" "$URL/echo?ka=1" -o "$T/ka2" "$URL/echo?ka=2" \
	-w '%{num_connects}\n' >"$T/ka.nc"
c1=$(json_get "$(cat "$T/ka1")" 'j["conn"]')
c2=$(json_get "$(cat "$T/ka2")" 'j["conn"]')
is "client reused its connection" "$(tr '\n' ' ' <"$T/ka.nc")" "1 0 "
is "two requests on one client connection share the upstream connection" "$c2" "$c1"
# Two client connections one after the other: the second request takes the
# pooled upstream connection the first left idle.
c3=$(json_get "$(bcurl "$URL/echo?pool=1")" 'j["conn"]')
c4=$(json_get "$(bcurl "$URL/echo?pool=2")" 'j["conn"]')
is "a new client connection reuses the pooled upstream connection" "$c4" "$c3"
# TLS reads ahead: records that arrive in one segment (the Finished with
# requests, then several requests) are all answered, none waits for more.
out=$(python3 "$PYTOOL" --port "$HTTPS_PORT" --host "$HOST" --ca "$CA" \
	--timeout 5 records -n 4 --bursts 3 --path /echo 2>&1)
is "requests in TLS records that arrive together are all answered" "$out" \
	"200 200 200 200 200 200 200 200 200 200 200 200"

# ---- headers -------------------------------------------------------------------
# headers_of BODY: the upstream's view of the request headers, one
# "lower-case-name: value" line each, in $T/hdrs (one python run, not one
# per header).
headers_of() {
	printf '%s' "$1" | python3 -c 'import json,sys
for k, v in json.load(sys.stdin)["headers"]:
    print("%s: %s" % (k.lower(), v))' >"$T/hdrs"
}
hdr() { sed -n "s/^$1: //p" "$T/hdrs" | paste -sd '|' -; }
body=$(bcurl "$URL/echo?h=1" -H 'X-Forwarded-For: 203.0.113.9' \
	-H 'Connection: keep-alive, X-Hop' -H 'X-Hop: secret' \
	-H 'Keep-Alive: timeout=5' -H 'Proxy-Connection: keep-alive' -H 'TE: trailers' \
	-H 'X-Custom: kept')
headers_of "$body"
is "Host preserved" "$(hdr host)" "$HOST:$HTTPS_PORT"
like "X-Forwarded-For ends with the client address" "$(hdr x-forwarded-for)" "(^|, *)127\.0\.0\.1$"
is "X-Forwarded-Proto" "$(hdr x-forwarded-proto)" https
like "X-Forwarded-Host" "$(hdr x-forwarded-host)" "^$HOST(:$HTTPS_PORT)?$"
is "X-Forwarded-Port" "$(hdr x-forwarded-port)" "$HTTPS_PORT"
fwd=$(hdr forwarded)
like "Forwarded names for= and proto=https" "$fwd" 'for="?127\.0\.0\.1.*proto=https|proto=https.*for="?127\.0\.0\.1'
like "Forwarded names host=" "$fwd" "host=\"?$HOST"
rid=$(hdr x-request-id)
like "X-Request-Id reaches the upstream" "$rid" '^[A-Za-z0-9._:-]{8,}$'
is "header named by Connection removed" "$(hdr x-hop)" ""
is "Keep-Alive removed" "$(hdr keep-alive)" ""
is "Proxy-Connection removed" "$(hdr proxy-connection)" ""
is "TE removed" "$(hdr te)" ""
unlike "client's Connection header not forwarded" "$(hdr connection)" "[xX]-[hH][oO][pP]"
is "end-to-end header kept" "$(hdr x-custom)" kept
headers_of "$(bcurl "$URL/echo?h=2")"
rid2=$(hdr x-request-id)
if [ -n "$rid2" ] && [ "$rid2" != "$rid" ]; then ok "request ids differ per request"
else not_ok "request ids differ per request"; diag "$rid / $rid2"; fi

# --host-header upstream: a second sandbox on the same address
URL2=$(url_for "$TA_PORT" sb2)
publish sb2 "$TA_PORT" --host-header upstream >/dev/null
headers_of "$(bcurl "$URL2/echo?hh=1")"
is "--host-header upstream sends Host localhost:PORT" "$(hdr host)" "localhost:$TA_PORT"
like "... and keeps the original in X-Forwarded-Host" "$(hdr x-forwarded-host)" "^$(host_for "$TA_PORT" sb2)"

# ---- response headers berth owns ------------------------------------------------
# A guest answering with Berth-* headers, hop-by-hop ones and berth's
# token cookie: none of them reaches the client, the rest does.
cat >"$T/hdrup.py" <<'EOF'
import socket, threading
HEAD = (b"HTTP/1.1 200 OK\r\nBerth-Host: x\r\nberth-anything: y\r\n"
        b"Connection: X-Guest-Hop\r\nX-Guest-Hop: 1\r\nKeep-Alive: timeout=99\r\n"
        b"Proxy-Authenticate: Basic\r\nTrailer: X-T\r\nUpgrade: h2c\r\n"
        b"Set-Cookie: __Host-berth_token=berth_guestchosen; Path=/\r\n"
        b"Set-Cookie: app=1\r\nX-App: kept\r\nContent-Length: 3\r\n\r\nok\n")
def serve(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                c.close(); return
            buf += d
        buf = buf.split(b"\r\n\r\n", 1)[1]
        c.sendall(HEAD)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(16)
print("listening on 127.0.0.1:%d" % s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
spawn "$T/hdrup.log" python3 "$T/hdrup.py"
wait_log 10 "$T/hdrup.log" "listening on" "$SPAWNED" || bail "header upstream did not start"
HU_PORT=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$T/hdrup.log")
publish sbh "$HU_PORT" >/dev/null || bail "cannot publish sbh"
rh=$(bcurl -s -D - -o /dev/null "$(url_for "$HU_PORT" sbh)/" | tr -d '\r')
like "the guest's response arrives" "$rh" '^HTTP/1.1 200'
unlike "no Berth-* header of the guest's reaches the client" "$rh" '^[Bb]erth-'
unlike "no hop-by-hop header of the guest's" "$rh" '^(X-Guest-Hop|Keep-Alive|Proxy-Authenticate|Trailer|Upgrade):'
unlike "the guest cannot set berth's token cookie" "$rh" '__Host-berth_token'
like "its own cookie and headers pass" "$rh" 'Set-Cookie: app=1'
like "...X-App too" "$rh" 'X-App: kept'

# ---- access log --------------------------------------------------------------
# Lines are found by request id (the log may leave the query string out).
if wait_log 5 "$BERTHD_LOG" "$rid"; then
	line=$(grep -F "$rid" "$BERTHD_LOG" | tail -n 1)
	ok "access log has a line for the request (by its request id)"
	like "access log line: method, path, status" "$line" "GET /echo.* 200 "
	like "access log line: client, host, sandbox, port" "$line" \
		"127\.0\.0\.1 .*$HOST.* $SB $TA_PORT "
	like "access log line: a time stamp" "$line" "20[0-9][0-9]-[01][0-9]-[0-3][0-9]"
else
	not_ok "access log has a line for the request (by its request id)"
	diag "$(tail -n 20 "$BERTHD_LOG")"
fi
n=0
for f in ka1 ka2; do
	headers_of "$(cat "$T/$f")"
	r=$(hdr x-request-id)
	[ -n "$r" ] && n=$((n + $(grep -cF "$r" "$BERTHD_LOG")))
done
is "one access log line per request" "$n" 2

# ---- bodies ----------------------------------------------------------------
head -c 3000000 /dev/urandom >"$T/up.bin"
body=$(bcurl -H 'Expect: 100-continue' --data-binary @"$T/up.bin" "$URL/upload")
is "POST with Expect: 100-continue" "$body" '{"bytes":3000000}'
body=$(bcurl -H 'Transfer-Encoding: chunked' --data-binary @"$T/up.bin" "$URL/upload")
is "chunked POST" "$body" '{"bytes":3000000}'
n=$(bcurl -o /dev/null -w '%{size_download}' "$URL/bytes?n=10485760")
is "10 MB Content-Length download" "$n" 10485760
n=$(bcurl -o /dev/null -w '%{size_download}' "$URL/bytes?n=10485760&chunked=1")
is "10 MB chunked download" "$n" 10485760

# HEAD, 204 and 304 have no body: if berthd waited for one the next
# request on the connection would hang (curl's --max-time catches it).
W='%{http_code}:%{num_connects} '
out=$(CURL_MAX_TIME=10 bcurl -I -o /dev/null -w "$W" "$URL/bytes?n=1000" \
	--next --cacert "$CA" --connect-to "::127.0.0.1:" -o /dev/null -w "$W" "$URL/status?code=204" \
	--next --cacert "$CA" --connect-to "::127.0.0.1:" -o /dev/null -w "$W" "$URL/status?code=304" \
	--next --cacert "$CA" --connect-to "::127.0.0.1:" -o /dev/null -w "$W" "$URL/echo")
is "HEAD, 204, 304 then a request on one connection" "$out" "200:1 204:0 304:0 200:0 "

# ---- Server-Timing -------------------------------------------------------------
# Every proxied response says how long its upstream took, from the
# connection's start to the response's first byte (milliseconds to the
# microsecond); berthd's own answers (a 404 for a name it does not serve)
# came from no upstream.
rh=$(bcurl -s -D - -o /dev/null "$URL/slow?ms=300" | tr -d '\r')
st=$(printf '%s\n' "$rh" | sed -n 's/^[Ss]erver-[Tt]iming: upstream;dur=//p')
like "Server-Timing: upstream;dur= on a proxied response" "$st" '^[0-9]+\.[0-9]{3}$'
if awk -v d="$st" 'BEGIN { exit !(d >= 300 && d < 10000) }'; then
	ok "...counting the 300 ms the upstream took to answer"
else
	not_ok "...counting the 300 ms the upstream took to answer"; diag "upstream;dur=$st"
fi
unlike "...and no wake;dur (nothing was woken)" "$rh" 'wake;dur='
n=0
for q in "-I $URL/bytes?n=1000" "$URL/status?code=204" "$URL/status?code=304" \
	"$URL/bytes?n=1000&chunked=1" "$URL/echo?st=1 $URL/echo?st=2"; do
	# shellcheck disable=SC2086 # word splitting wanted: options and URLs
	n=$((n + $(bcurl -s -D - -o /dev/null $q | grep -c '^Server-Timing: upstream;dur=[0-9]*\.[0-9][0-9][0-9]')))
done
is "...on HEAD, 204, 304, chunked and pooled keep-alive responses" "$n" 6
rh=$(bcurl -s -D - -o /dev/null "https://1-nosuchsb.$DOMAIN:$HTTPS_PORT/" | tr -d '\r')
like "berthd's own 404..." "$rh" '^HTTP/1.1 404'
unlike "...carries no upstream;dur" "$rh" 'upstream;dur'

# ---- HTTP listener: redirect and ACME -------------------------------------
hurl() { curl -sS --max-time 10 --connect-to "::127.0.0.1:" "$@"; }
out=$(hurl -o /dev/null -w '%{http_code} %{redirect_url}' "http://$HOST:$HTTP_PORT/a/b?c=d")
like "http redirects to https (301/308)" "$out" "^(301|308) "
is "redirect keeps host, https port, path and query" "${out#* }" "https://$HOST:$HTTPS_PORT/a/b?c=d"
# only names berth serves are redirected: no open redirect for any Host
out=$(hurl -o /dev/null -w '%{http_code} %{redirect_url}' -H 'Host: evil.com' "http://$HOST:$HTTP_PORT/x")
is "Host: evil.com on the HTTP listener: 404, no redirect" "$out" "404 "
out=$(hurl -o /dev/null -w '%{http_code}' "http://1-nosuchsb.$DOMAIN:$HTTP_PORT/x")
is "an unknown sandbox on the HTTP listener: 404" "$out" 404
out=$(hurl -o /dev/null -w '%{http_code}' "http://1-$SB.$DOMAIN:$HTTP_PORT/x")
is "an unpublished port on the HTTP listener: 404" "$out" 404
echo "token-content-42" >"$ACME_DIR/tok-42"
chmod 644 "$ACME_DIR/tok-42"
out=$(hurl -w ' %{http_code}' "http://$HOST:$HTTP_PORT/.well-known/acme-challenge/tok-42")
is "ACME challenge served from acme_dir" "$out" "$(printf 'token-content-42\n 200')"
out=$(hurl -w ' %{http_code}' -H 'Host: www.example.org' "http://$HOST:$HTTP_PORT/.well-known/acme-challenge/tok-42")
is "...for any Host (the CA's validation may name any)" "$out" "$(printf 'token-content-42\n 200')"
out=$(hurl -o /dev/null -w '%{http_code}' "http://$HOST:$HTTP_PORT/.well-known/acme-challenge/missing")
is "missing challenge is 404" "$out" 404
out=$(hurl --path-as-is -w ' %{http_code}' "http://$HOST:$HTTP_PORT/.well-known/acme-challenge/../../../../etc/passwd")
unlike "no path traversal out of acme_dir" "$out" "root:"

done_testing
