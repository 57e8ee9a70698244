#!/bin/sh
# control-restart.sh — restart safety of the control plane: after kill -9
# of berthd (parent and workers) and a restart on the same state dir,
# every sandbox, route, egress rule, token and lifecycle event is still
# there, and the published URL is served again.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

berthd_config
start_berthd
start_testapp app

out=$(netctl sandbox add rs-1 --address 127.0.0.1) || bail "sandbox add: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
like "sandbox add prints a token" "$tok" '^berth_[A-Za-z0-9_-]{43}$'
check "publish public port" publish rs-1 "$TA_PORT"
check "publish private port with custom host" netctl port publish rs-1 9 \
	--private --host app.restart.test --host-header upstream
check "egress allow with ttl" netctl egress allow rs-1 github.com:443/tcp --ttl 1h
check "egress deny" netctl egress deny rs-1 10.9.0.0/16
check "egress mode" netctl egress mode rs-1 allowlist
check "policy set" netctl policy set --deny 169.254.0.0/16 --max-mode open
admin=$(netctl token create --admin --name ops | head -n 1)
like "admin token" "$admin" '^berth_'
netctl sandbox pause rs-1 >/dev/null 2>&1
code=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" rs-1)/healthz")
is "served before the crash" "$code" 200

# URLs name the HTTPS port, which start_berthd may have to change (in use)
noport() { sed -E 's/:[0-9]+\//:PORT\//g'; }
before_sb=$(netctl --json sandbox show rs-1 | noport)
before_eg=$(netctl --json egress show rs-1)
before_tk=$(netctl --json token ls)
before_ev=$(netctl --json sandbox events rs-1)
before_po=$(netctl --json policy show)

# kill -9 the parent and its workers at once: no clean shutdown anywhere
kids=$(berthd_workers)
kill -KILL "$BERTHD_PID" $kids
wait_gone 10 "$BERTHD_PID" || bail "berthd survived kill -9"
for k in $kids; do wait_gone 10 "$k"; done
check "database file still there" test -s "$STATE/berth.db"

start_berthd

is "sandbox and its ports survive" "$(netctl --json sandbox show rs-1 | noport)" "$before_sb"
is "egress rules and mode survive" "$(netctl --json egress show rs-1)" "$before_eg"
is "tokens survive" "$(netctl --json token ls)" "$before_tk"
is "events survive" "$(netctl --json sandbox events rs-1)" "$before_ev"
is "policy survives" "$(netctl --json policy show)" "$before_po"
ev=$(netctl sandbox events rs-1)
like "create and pause events listed" "$ev" 'create.*ok'
like "pause refusal listed" "$ev" 'pause.*refused'
sb_json=$(netctl --json sandbox show rs-1)
is "private port kept" "$(json_get "$sb_json" '[p["visibility"] for p in j["ports"] if p["port"]==9][0]')" private
is "custom host kept" "$(json_get "$sb_json" '[p["host"] for p in j["ports"] if p["port"]==9][0]')" app.restart.test
if wait_routed rs-1 "$TA_PORT"; then ok "route served again after restart"
else not_ok "route served again after restart"; fi
code=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" rs-1)/healthz")
is "URL answers 200" "$code" 200
check "netctl sandbox rm after restart" netctl sandbox rm rs-1
is "tokens of the sandbox went with it" \
	"$(netctl --json token ls | grep -c '"sandbox":"rs-1"')" 0
done_testing
