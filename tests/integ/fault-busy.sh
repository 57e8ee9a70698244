#!/bin/sh
# fault-busy.sh — another process holds the state database's write lock
# (BEGIN EXCLUSIVE, as a sqlite3 shell or a backup script might): control
# API writes wait a bounded busy timeout and then get a retryable 503
# with Retry-After and a JSON reason, nothing half written; reads, the
# proxy and health keep answering; once the lock is released writes work
# again and nothing stored before is lost, also after a restart.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

berthd_config
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish sb1"
URL=$(url_for "$TA_PORT" sb1)
code() { bcurl -o /dev/null -w '%{http_code}' "$@"; }
api() {	# METHOD PATH [JSON]: prints the status; body in $T/api.body
	_fmt='%{http_code}'
	[ -n "${API_TIME:-}" ] && _fmt='%{http_code}\nms %{time_total}'
	curl -sS --max-time 30 --unix-socket "$STATE/control.sock" -o "$T/api.body" \
		-D "$T/api.head" -w "$_fmt" -X "$1" \
		${3:+-H 'Content-Type: application/json' -d "$3"} "http://berth$2"
}
ids() { netctl --json sandbox ls | python3 -c 'import json,sys
d=json.load(sys.stdin); d=d.get("sandboxes", d) if isinstance(d, dict) else d
print(" ".join(sorted(s["id"] for s in d)))'; }

# The lock holder: BEGIN EXCLUSIVE, say so, hold until told.
cat >"$T/locker.py" <<'EOF'
import os, sqlite3, sys, time
db, ready, go = sys.argv[1:4]
c = sqlite3.connect(db, isolation_level=None, timeout=10)
c.execute("BEGIN EXCLUSIVE")
c.execute("INSERT INTO policy (id, doc, updated) VALUES (1, '{}', 0) "
          "ON CONFLICT (id) DO UPDATE SET updated = updated")
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
c.execute("ROLLBACK")
print("released")
EOF
spawn "$T/locker.out" python3 -I "$T/locker.py" "$STATE/berth.db" "$T/locked" "$T/release"
locker=$SPAWNED
wait_for 15 test -e "$T/locked" || bail "lock holder did not start: $(cat "$T/locker.out")"
ok "another process holds the database's write lock"

# A write while locked, and the proxy while that write waits.
API_TIME=1 spawn "$T/w1.status" api POST /v1/sandboxes '{"id":"sb2","address":"127.0.0.1"}'
w1=$SPAWNED
is "proxy serves while a write waits for the lock" "$(code "$URL/echo")" 200
wait "$w1"
st=$(head -n 1 "$T/w1.status")
is "write under the lock answers 503" "$st" 503
cp "$T/api.body" "$T/w1.body"
body=$(cat "$T/w1.body")
is "error code unavailable" "$(json_get "$body" 'j["error"]["code"]')" unavailable
like "message says busy and retry" "$(json_get "$body" 'j["error"]["message"]')" \
	'busy.*retry.*(locked|lock)'
like "Retry-After given" "$(tr -d '\r' <"$T/api.head" | grep -i '^Retry-After:')" \
	'^Retry-After: [0-9]+$'
el=$(awk '/^ms / {printf "%d", $2 * 1000}' "$T/w1.status")
if [ "$el" -ge 1000 ] && [ "$el" -lt 15000 ]; then
	ok "it waited a bounded busy timeout (${el} ms)"
else
	not_ok "it waited a bounded busy timeout"; diag "${el} ms"
fi

out=$(netctl port publish sb1 9999 2>&1); rc=$?
if [ $rc -ne 0 ]; then ok "netctl write under the lock exits non-zero"
else not_ok "netctl write under the lock exits non-zero"; fi
like "netctl prints one clear line" "$out" '^netctl: state store busy'
is "reads answered under the lock" "$(ids)" sb1
is "health answered under the lock" "$(api GET /v1/health)" 200
is "proxy serves under the lock" "$(code "$URL/echo")" 200
check "berthd is still running" kill -0 "$BERTHD_PID"

touch "$T/release"
wait "$locker"
is "lock released" "$(cat "$T/locker.out")" released
is "the same write succeeds once the lock is released" \
	"$(api POST /v1/sandboxes '{"id":"sb2","address":"127.0.0.1"}')" 201
check "publish works again" publish sb2 "$TA_PORT"
is "nothing lost, nothing half written" "$(ids)" "sb1 sb2"
is "the refused port was not stored" "$(api GET /v1/sandboxes/sb1/ports/9999)" 404
is "route stored before still served" "$(code "$URL/echo")" 200

kill -TERM "$BERTHD_PID"
wait_gone 20 "$BERTHD_PID" || bail "berthd did not exit on SIGTERM"
start_berthd
is "after a restart both sandboxes are there" "$(ids)" "sb1 sb2"
check "after a restart sb1 is served" wait_routed sb1 "$TA_PORT"
check "after a restart sb2 is served" wait_routed sb2 "$TA_PORT"

done_testing
