#!/bin/sh
# proxy-smuggling.sh — replays the request-smuggling corpus (tests/smuggling/
# *.http, raw bytes) over TLS through berthd to a testapp that logs every
# request it receives, and checks that the upstream never saw GET /smuggled
# as a request. The corpus names Host 9001-sb.berth.localhost, so the
# upstream listens on port 9001 of a private loopback address (127.0.0.0/8
# is all loopback) and the files need no rewriting.
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

# berthd keeps serving after the whole corpus, on every worker.
c=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for 9001 sb)/healthz")
is "berthd still serves after the corpus" "$c" 200
# Anything the upstream did see must be a request the corpus meant as the
# first one (or the controls); never a path the corpus hid in a body.
odd=$(awk '{print $3}' "$TA_REQLOG" | grep -v -E '^/(echo|healthz|control-first|control-second)$' | sort -u)
is "upstream saw only first requests" "$odd" ""

done_testing
