#!/bin/sh
# egress-policy.sh — ops' global policy limits through berthd, the API and
# netctl. berthd runs with "egress on" inside a network namespace of its
# own, so the table inet berth it programs is that namespace's (the
# host's table is never touched); no VM is needed.
#  - max_rules (berth.conf's egress_max_rules, then `netctl policy set
#    --max-rules`): one rule more is 403 naming the limit (netctl exit 4)
#    and what is stored stays; re-adding a stored rule at the limit is
#    fine; a PUT of too many rules is refused whole
#  - conn_limit / new_conn_rate: berth.conf's defaults are in the table
#    at start; `netctl policy set` changes them, 'default' returns to
#    berth.conf's, a SIGHUP with new defaults reprograms the table
#  - an allow rule inside a private range is 403 unless ops permit that
#    range (policy permit), which also carves it out of the table's
#    always-deny set into set permitted (reachable only by a rule)
#  - bad values are refused locally (exit 2) and by the API (400)
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool nft ip
NS=bpol$$
ip netns add "$NS" 2>/dev/null || skip_all "cannot create network namespaces"
ip netns exec "$NS" nft list ruleset >/dev/null 2>&1 ||
	{ ip netns del "$NS"; skip_all "nftables does not work in a namespace here"; }
pol_cleanup() {
	ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns del "$NS" 2>/dev/null
}
trap '_st=$?; pol_cleanup; (exit $_st); _cleanup' EXIT
ip -n "$NS" link set lo up

# berthd in the namespace: its workers listen on the namespace's loopback,
# netctl reaches it over the control socket (a file).
cat >"$T/berthd-ns" <<EOF
#!/bin/sh
exec ip netns exec $NS $BERTHD "\$@"
EOF
chmod 755 "$T/berthd-ns"
BERTHD=$T/berthd-ns
EGRESS=on berthd_config "tap_prefix bpl" "egress_max_rules 3" \
	"egress_conn_limit 50" "dns_upstream 127.0.0.1"
start_berthd
wait_log 30 "$BERTHD_LOG" "egress: table inet berth" "$BERTHD_PID" || bail "egress did not start"
table() { ip netns exec "$NS" nft list chain inet berth admit 2>&1; }
has() { table | grep -q -- "$1"; }
hasnt() { ! table | grep -q -- "$1"; }

# ---- what berth.conf says, before anyone set a policy ----
out=$(netctl policy show)
like "policy show: max_rules from berth.conf" "$out" 'max_rules: +3 per sandbox'
like "policy show: conn_limit from berth.conf" "$out" 'conn_limit: +50 concurrent'
like "policy show: no new-connection rate" "$out" 'new_conn_rate: none'
check "the table has berth.conf's cap: ct count over 50" has 'ct count over 50'
check "... and no rate rule" hasnt 'limit rate'

# ---- max_rules ----
netctl sandbox add lim1 --address 127.0.0.1 >/dev/null || bail "sandbox add"
check "rule 1 of 3" netctl egress allow lim1 1.2.3.4:443/tcp
check "rules 2 and 3 of 3" netctl egress allow lim1 5.6.7.8 example.com
out=$(netctl egress deny lim1 9.9.9.9 2>&1); rc=$?
is "a 4th rule is refused (403: exit 4)" "$rc" 4
like "... naming the limit" "$out" "max_rules.*3"
like "... and the sandbox" "$out" "lim1 has 3 egress rules"
out=$(netctl egress show lim1)
is "nothing stored is lost: still 3 rules" "$(printf '%s\n' "$out" | grep -cE '^(allow|deny) ')" 3
unlike "... and the refused one is not there" "$out" '9\.9\.9\.9'
check "re-adding a stored rule at the limit is fine (it updates)" \
	netctl egress allow lim1 1.2.3.4:443/tcp --ttl 1h
code=$(curl -sS -o "$T/put.json" -w '%{http_code}' --unix-socket "$STATE/control.sock" \
	-X PUT -H 'Content-Type: application/json' \
	-d '{"rules":[{"action":"allow","rule":"1.1.1.1"},{"action":"allow","rule":"2.2.2.2"},{"action":"allow","rule":"3.3.3.3"},{"action":"allow","rule":"4.4.4.4"}]}' \
	http://berth/v1/sandboxes/lim1/egress)
is "PUT of 4 rules: 403" "$code" 403
like "... field rules, message names max_rules" "$(cat "$T/put.json")" '"field": ?"rules".*max_rules is 3'
is "... and the 3 stored rules stay" "$(netctl --json egress show lim1 | json_get "$(cat)" 'len(j["rules"])')" 3
check "policy set --max-rules 4" netctl policy set --max-rules 4
check "now a 4th rule fits" netctl egress deny lim1 9.9.9.9
out=$(netctl egress allow lim1 8.8.4.4 2>&1); rc=$?
is "a 5th does not (exit 4)" "$rc" 4
like "... with the new limit in the message" "$out" "max_rules \(4 per sandbox\)"
check "policy set --max-rules 2 (below what lim1 holds)" netctl policy set --max-rules 2
is "lowering the limit removes nothing" "$(netctl --json egress show lim1 | json_get "$(cat)" 'len(j["rules"])')" 4
check "removing a rule still works" netctl egress rm lim1 deny 9.9.9.9

# ---- conn_limit / new_conn_rate ----
check "policy set --conn-limit 3 --new-conn-rate 7" netctl policy set --conn-limit 3 --new-conn-rate 7
check "the table follows: ct count over 3" wait_for 10 has 'ct count over 3 '
check "... limit rate over 7/second" has 'limit rate over 7/second'
check "... both go to the chain that logs their reason" sh -c "ip netns exec $NS nft list chain inet berth admit | grep -q 'goto log_conn_limit' && ip netns exec $NS nft list chain inet berth admit | grep -q 'goto log_rate_limit' && ip netns exec $NS nft list chain inet berth log_conn_limit | grep -q 'berth:conn-limit' && ip netns exec $NS nft list chain inet berth log_rate_limit | grep -q 'berth:rate-limit'"
check "policy set --new-conn-rate off" netctl policy set --new-conn-rate off
check "the rate rule is gone" wait_for 10 hasnt 'limit rate'
check "policy set --conn-limit default: berth.conf's 50 again" netctl policy set --conn-limit default
check "the table has ct count over 50 again" wait_for 10 has 'ct count over 50 '
sed -i 's/^egress_conn_limit 50$/egress_conn_limit 60/' "$CONF"
kill -HUP "$BERTHD_PID"
check "SIGHUP with egress_conn_limit 60: the table follows" wait_for 10 has 'ct count over 60 '
like "policy show says 60" "$(netctl policy show)" 'conn_limit: +60 concurrent'

# ---- private ranges only where ops permit them ----
netctl sandbox add lim2 --address 127.0.0.1 >/dev/null || bail "sandbox add lim2"
out=$(netctl egress allow lim2 10.1.2.0/24:443 2>&1); rc=$?
is "allow 10.1.2.0/24 without a permit: refused (exit 4)" "$rc" 4
like "... saying which private range and how ops open it" "$out" "10\.0\.0\.0/8.*policy permit"
check "allow 0.0.0.0/0:443 (public addresses) is not a private range" netctl egress allow lim2 0.0.0.0/0:443/tcp
check "policy set --permit 10.1.0.0/16" netctl policy set --permit 10.1.0.0/16
check "now allow 10.1.2.0/24:443 is accepted" netctl egress allow lim2 10.1.2.0/24:443
carved() {
	_s=$(ip netns exec "$NS" nft list set inet berth always_deny 2>&1)
	printf '%s' "$_s" | grep -q '10\.0\.0\.0/16' &&
	    printf '%s' "$_s" | grep -q '10\.2\.0\.0-10\.255\.255\.255' &&
	    ! printf '%s' "$_s" | grep -q '10\.0\.0\.0/8'
}
check "the table's always-deny set has 10.1.0.0/16 carved out" wait_for 10 carved
like "... and set permitted holds it: a sandbox needs its own rule for it, in mode open too" \
	"$(ip netns exec "$NS" nft list set inet berth permitted)" '10\.1\.0\.0/16'
out=$(netctl egress allow lim2 10.9.0.0/16 2>&1); rc=$?
is "a private range outside the permit is still refused (exit 4)" "$rc" 4
netctl policy set --permit 10.1.0.0/16:443 >/dev/null 2>&1
is "a permit with a port is refused by the API (exit 1)" "$?" 1

# ---- bad values ----
netctl policy set --conn-limit -1 >/dev/null 2>&1
is "--conn-limit -1: usage error before any request (exit 2)" "$?" 2
netctl policy set --max-rules off >/dev/null 2>&1
is "--max-rules off: usage error (exit 2)" "$?" 2
code=$(curl -sS -o "$T/bad.json" -w '%{http_code}' --unix-socket "$STATE/control.sock" \
	-X PUT -H 'Content-Type: application/json' -d '{"new_conn_rate":"fast"}' http://berth/v1/policy)
is "API: new_conn_rate \"fast\" is 400" "$code" 400
like "... naming the field" "$(cat "$T/bad.json")" '"field": ?"new_conn_rate"'
code=$(curl -sS -o /dev/null -w '%{http_code}' --unix-socket "$STATE/control.sock" \
	-X PUT -H 'Content-Type: application/json' -d '{"max_rules":1025}' http://berth/v1/policy)
is "API: max_rules 1025 is 400" "$code" 400
done_testing
