#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# vm-testapp: the guest test app (vmm/guest/testapp) on loopback, no root
# needed: its self test, then the endpoints the proxy's integration tests
# rely on, through curl (and python3 for a WebSocket round trip).
top_builddir=${top_builddir:-.}
app=${TESTAPP:-$top_builddir/vmm/guest/testapp}
if [ ! -x "$app" ]; then echo "no testapp binary at $app" >&2; exit 77; fi
if ! command -v curl >/dev/null; then echo "curl not installed" >&2; exit 77; fi

tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else nok "$1 (got '$2', want '$3')"; fi; }
fail=0

echo "1..10"
if "$app" --self-test >"$tmp/self" 2>&1; then ok "self test"; else nok "self test"; cat "$tmp/self" >&2; fi

"$app" -l 127.0.0.1 -p 0 -L "$tmp/req.log" 2>"$tmp/err" &
pid=$!
i=0
while ! grep -q 'listening on' "$tmp/err" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "testapp did not start" >&2; cat "$tmp/err" >&2; exit 1
	fi
	sleep 0.05
done
port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/err")
u=http://127.0.0.1:$port

check "healthz" "$(curl -sS "$u/healthz")" "ok"
# Two requests on one curl run share one connection: same conn id.
ids=$(curl -sS "$u/echo/a" "$u/echo/b" | sed -n 's/^{"conn":\([0-9]*\),.*/\1/p' | sort -u | wc -l)
check "keep-alive reuses the connection" "$ids" "1"
check "chunked upload decoded" \
    "$(printf 'hello chunked' | curl -sS -T - -H 'Transfer-Encoding: chunked' "$u/upload")" '{"bytes":13}'
check "100-continue upload" \
    "$(head -c 300000 /dev/zero | curl -sS --data-binary @- -H 'Expect: 100-continue' "$u/upload")" '{"bytes":300000}'
check "bytes chunked" "$(curl -sS "$u/bytes?n=1000001&chunked=1" | wc -c | tr -d ' ')" "1000001"
check "sse events" "$(curl -sS -N "$u/sse?count=3&interval=10" | grep -c '^data: event')" "3"
check "status 204" "$(curl -sS -o /dev/null -w '%{http_code}' "$u/status?code=204")" "204"
check "refused upgrade" "$(curl -sS -o /dev/null -w '%{http_code}' -H 'Connection: Upgrade' \
    -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' \
    -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "$u/ws?refuse=1")" "403"

if command -v python3 >/dev/null; then
	got=$(python3 - "$port" <<'PY'
import socket, sys, os
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
          b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
r = b""
while b"\r\n\r\n" not in r:
    r += s.recv(1)
assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in r, r
msg, k = b"hello from test", os.urandom(4)
s.sendall(bytes([0x81, 0x80 | len(msg)]) + k + bytes(b ^ k[i % 4] for i, b in enumerate(msg)))
h = s.recv(2)
print(s.recv(h[1]).decode())
PY
)
	check "websocket echo" "$got" "hello from test"
else
	ok "websocket echo # SKIP no python3"
fi
exit $fail
