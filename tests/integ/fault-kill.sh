#!/bin/sh
# fault-kill.sh — processes killed with SIGKILL. A worker killed under an
# in-flight request: the client sees the connection end at once (no
# hang), the parent logs the death and restarts the worker, which serves
# again; the restart is counted in /metrics. (proxy-signals.sh shows the
# other worker's connections survive.) The parent killed with -9: its
# workers exit rather than serve on orphaned, a new berthd starts on the
# same state dir and ports (stale control socket, SQLite WAL) and serves
# every stored sandbox, port, token and private route.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool ss pgrep

WORKERS=2
berthd_config
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish sb1"
out=$(netctl sandbox add pv1 --address 127.0.0.1) || bail "sandbox add: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
[ -n "$tok" ] || bail "no token in: $out"
netctl port publish pv1 "$TA_PORT" --private >/dev/null || bail "publish private"
wait_routed pv1 "$TA_PORT" || bail "private route not routed"
URL=$(url_for "$TA_PORT" sb1)
PV=$(url_for "$TA_PORT" pv1)
code() { bcurl -o /dev/null -w '%{http_code}' "$@"; }
serves() {	# N URL
	_i=0
	while [ $_i -lt "$1" ]; do
		[ "$(code "$2")" = 200 ] || return 1
		_i=$((_i + 1))
	done
}
snapshot() {	# what the store holds, as text
	netctl --json sandbox ls | python3 -c 'import json,sys
d=json.load(sys.stdin); d=d.get("sandboxes", d) if isinstance(d, dict) else d
print(" ".join(sorted(s["id"] for s in d)))'
	netctl port ls | sort
	netctl token ls | sort
}
before=$(snapshot)

# ---- a worker killed under a request ------------------------------------------
: >"$TA_REQLOG"
spawn "$T/slow.out" curl -sS --cacert "$CA" --connect-to ::127.0.0.1: --max-time 30 \
	-o /dev/null -w '%{http_code}' "$URL/slow?ms=8000"
slow=$SPAWNED
wait_log 10 "$TA_REQLOG" '/slow\?ms=8000' || bail "slow request never reached the upstream"
victim=$(ss -Htnp state established "( sport = :$HTTPS_PORT )" |
	sed -n 's/.*pid=\([0-9]*\).*/\1/p' | sort -u)
case $victim in
''|*[!0-9]*) bail "cannot tell which worker holds the request: '$victim'";;
esac
berthd_workers | grep -qx "$victim" || bail "$victim is not a worker"
t0=$(date +%s)
kill -KILL "$victim"
wait "$slow"
rc=$?
el=$(( $(date +%s) - t0 ))
if [ $rc -ne 0 ] && [ "$(cat "$T/slow.out")" != 200 ]; then
	ok "the client sees its request fail (curl exit $rc)"
else
	not_ok "the client sees its request fail"; diag "rc $rc out '$(cat "$T/slow.out")'"
fi
if [ $el -lt 5 ]; then ok "at once, not at the request's end (${el}s)"
else not_ok "at once, not at the request's end"; diag "${el}s"; fi
if wait_log 10 "$BERTHD_LOG" "worker [0-9]+ \\(pid $victim\\) killed by signal 9: restarting"; then
	ok "the parent logs the death"
else
	not_ok "the parent logs the death"; diag "$(tail -n 5 "$BERTHD_LOG")"
fi
if wait_for 15 sh -c "pgrep -P $BERTHD_PID | grep -vx $victim | wc -l | grep -qx 2"; then
	ok "the killed worker is replaced"
else
	not_ok "the killed worker is replaced"; diag "children: $(berthd_workers | tr '\n' ' ')"
fi
check "every worker serves again (10 connections)" serves 10 "$URL/echo"
m=$(curl -sS --unix-socket "$STATE/control.sock" http://berth/metrics)
like "the restart is counted" "$m" '^berth_worker_restarts_total 1$'
is "nothing stored changed" "$(snapshot)" "$before"

# ---- the parent killed with -9 ----------------------------------------------
workers=$(berthd_workers)
[ -n "$workers" ] || bail "no workers"
kill -KILL "$BERTHD_PID"
wait_gone 10 "$BERTHD_PID" || bail "berthd survived SIGKILL"
left=
for w in $workers; do
	wait_gone 10 "$w" || left="$left $w"
done
is "its workers exit, none left orphaned" "$left" ""
if [ -n "$left" ]; then kill -KILL $left 2>/dev/null; fi
# Nothing listens any more: an orphan would still accept.
if wait_for 5 sh -c "! ss -Htln '( sport = :$HTTPS_PORT )' | grep -q ."; then
	ok "the https port is free"
else
	not_ok "the https port is free"; diag "$(ss -Htlnp "( sport = :$HTTPS_PORT )")"
fi
check "the control socket file was left behind (stale)" test -S "$STATE/control.sock"

start_berthd
ok "berthd starts again on the same state dir and ports"
is "every sandbox, port and token is still stored" "$(snapshot)" "$before"
check "the public route is served" wait_routed sb1 "$TA_PORT"
check "every worker serves it" serves 10 "$URL/echo"
is "the private route still wants its token" "$(code "$PV/echo")" 401
is "and serves with it" "$(code -H "Authorization: Bearer $tok" "$PV/echo")" 200
check "writes work after the restart" netctl port publish sb1 "$TA_PORT" --host-header upstream

done_testing
