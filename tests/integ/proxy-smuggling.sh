#!/bin/sh
# proxy-smuggling.sh — replays the request-smuggling corpus (tests/smuggling/
# *.http, raw bytes) over TLS through berthd to a testapp that logs every
# request it receives, and checks that the upstream never saw GET /smuggled
# as a request. The corpus names Host 9001-sb.berth.localhost, so the
# upstream listens on port 9001 of a private loopback address (127.0.0.0/8
# is all loopback) and the files need no rewriting. Then the HTTP/1.1
# edges: chunk extensions off RFC 9112's grammar, '_' look-alikes of
# framing headers, a 100 000-byte method, the HTTP/2 preface and %00 in
# the path get 400; absolute-form naming Host is served as origin-form.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

CORPUS="$top_srcdir/tests/smuggling"
ls "$CORPUS"/*.http >/dev/null 2>&1 || skip_all "no corpus in $CORPUS"

berthd_config "timeout head 3s"
start_berthd

# A loopback address of our own so that port 9001 is free.
for _i in 1 2 3 4 5; do
	TA_ADDR=$(od -An -N2 -tu1 /dev/urandom | awk '{printf "127.88.%d.%d", $1, ($2 % 250) + 2}')
	TA_PORT_WANT=9001
	if ! ss -Htln "sport = :9001" | grep -q "$TA_ADDR:9001"; then break; fi
done
start_testapp up
[ "$TA_PORT" = 9001 ] || bail "testapp not on 9001"
SB_ADDR=$TA_ADDR publish sb 9001 >/dev/null || bail "cannot publish 9001-sb"
HOST=$(host_for 9001 sb)

# Control: a second request on a kept-alive connection reaches the
# upstream and is logged, so an absent /smuggled line means something.
bcurl -o /dev/null -o /dev/null "$(url_for 9001 sb)/control-first" \
	"$(url_for 9001 sb)/control-second" 
if grep -q ' /control-second$' "$TA_REQLOG"; then
	ok "control: second request on a connection shows in the upstream log"
else
	not_ok "control: second request on a connection shows in the upstream log"
	diag "$(cat "$TA_REQLOG")"
fi

# One client process for the whole corpus (each file on its own
# connection); it reports what the upstream logged while each file ran.
py --port "$HTTPS_PORT" --host "$HOST" --ca "$CA" --timeout 6 \
	raw --idle 1.5 --reqlog "$TA_REQLOG" "$CORPUS"/*.http >"$T/raw.out" 2>&1
nfiles=$(ls "$CORPUS"/*.http | wc -l)
is "every corpus file was sent" "$(grep -c '"file"' "$T/raw.out")" "$nfiles"
while IFS= read -r res; do
	name=$(printf '%s' "$res" | sed -n 's/^{"file": "\([^"]*\)\.http".*/\1/p')
	[ -n "$name" ] || { diag "$res"; continue; }
	st=$(printf '%s' "$res" | sed -n 's/.*"statuses": \(\[[^]]*\]\).*/\1/p')
	if printf '%s' "$res" | grep -q '"upstream": \[[^]]*/smuggled'; then
		not_ok "$name: upstream never sees /smuggled"
		diag "$res"
	else
		ok "$name: upstream never sees /smuggled (answered $st)"
	fi
done <"$T/raw.out"
grep -q /smuggled "$TA_REQLOG" && diag "upstream log:" "$(cat "$TA_REQLOG")"
check "berthd survived the corpus" kill -0 "$BERTHD_PID"

# HTTP/1.1 edges (an outside conformance suite's findings): each input
# gets the answer RFC 9112 asks for, and the upstream sees none of them
# but the accepted absolute-form request, as origin-form.
E="$T/edges"
mkdir -p "$E"
Hh="Host: $HOST"
printf 'POST /echo?e=1 HTTP/1.1\r\n%s\r\nTransfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n0\r\n\r\n' "$Hh" >"$E/1-chunk-ext-no-name"
printf 'POST /echo?e=2 HTTP/1.1\r\n%s\r\nTransfer-Encoding: chunked\r\n\r\n5;bad[=x\r\nhello\r\n0\r\n\r\n' "$Hh" >"$E/2-chunk-ext-bad"
printf 'POST /echo?e=3 HTTP/1.1\r\n%s\r\nTransfer_Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello' "$Hh" >"$E/3-te-underscore"
printf 'POST /echo?e=4 HTTP/1.1\r\n%s\r\nContent_Length: 5\r\nContent-Length: 5\r\n\r\nhello' "$Hh" >"$E/4-cl-underscore"
python3 -c 'import sys; sys.stdout.buffer.write(b"G" * 100000 + b" /echo?e=5 HTTP/1.1\r\nHost: " + sys.argv[1].encode() + b"\r\n\r\n")' "$HOST" >"$E/5-long-method"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' >"$E/6-h2-preface"
printf 'GET /echo%%00.html?e=7 HTTP/1.1\r\n%s\r\n\r\n' "$Hh" >"$E/7-path-nul"
printf 'GET https://%s/echo?e=8 HTTP/1.1\r\n%s\r\nConnection: close\r\n\r\n' "$HOST" "$Hh" >"$E/8-absolute-form"
printf 'GET https://evil.example/echo?e=9 HTTP/1.1\r\n%s\r\n\r\n' "$Hh" >"$E/9-absolute-other"
: >"$TA_REQLOG"
py --port "$HTTPS_PORT" --host "$HOST" --ca "$CA" --timeout 6 \
	raw --idle 1.5 --reqlog "$TA_REQLOG" "$E"/* >"$T/edges.out" 2>&1
edge() { grep "\"file\": \"$1\"" "$T/edges.out"; }
# a bad chunk is found in the body, after the head went upstream: the
# client gets 400 and the upstream a cut connection, never the body
for f in 1-chunk-ext-no-name 2-chunk-ext-bad; do
	like "$f: 400, connection closed" "$(edge "$f")" '"statuses": \[400\], "closed": true'
done
# (each case's own request, ?e=N: on a slow machine the upstream's record
# of the chunk cases before it can land in the next case's window)
for f in 3-te-underscore 4-cl-underscore 6-h2-preface 7-path-nul 9-absolute-other; do
	r=$(edge "$f")
	like "$f: 400, connection closed" "$r" '"statuses": \[400\], "closed": true'
	unlike "$f: nothing reached the upstream" "$r" "e=${f%%-*}\""
done
r=$(edge 5-long-method)
like "5-long-method (100 000 bytes): 400 or closed, never 431" "$r" \
	'"statuses": \[(400)?\], "closed": true'
unlike "5-long-method: nothing reached the upstream" "$r" 'e=5"'
r=$(edge 8-absolute-form)
like "8-absolute-form naming Host and the TLS name: 200" "$r" '"statuses": \[200\]'
# (its own request only: the chunk cases' heads may land in its window)
like "...the upstream got origin-form" "$r" '"[0-9]+ GET /echo\?e=8"'
unlike "...never the absolute form" "$r" 'GET https?://[^"]*e=8'
unlike "the upstream never saw an underscore framing header, a long method, the h2 preface, a NUL or another authority" \
	"$(cat "$TA_REQLOG")" 'e=[345679]([^0-9]|$)'

# berthd keeps serving after the whole corpus, on every worker.
c=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for 9001 sb)/healthz")
is "berthd still serves after the corpus" "$c" 200
# Anything the upstream did see must be a request the corpus meant as the
# first one (or the controls); never a path the corpus hid in a body.
odd=$(awk '{print $3}' "$TA_REQLOG" | grep -v -E '^/(echo|healthz|control-first|control-second|echo\?e=[0-9])$' | sort -u)
is "upstream saw only first requests" "$odd" ""

done_testing
