#!/bin/sh
# vm-caps.sh — the caps and the standby budget with real microVMs (qemu
# TCG, the minimal template; four boots, one after the other):
#  - vm_max_resident 2: a third create suspends the least recently active
#    of the two running, with a suspend event naming vm_max_resident,
#    and waits for that suspend to end (never three VMMs at once)
#  - a request to it is served (it wakes) and suspends the next least
#    recently active; an exec does the same
#  - nothing idle (a command runs in each running one): a resume is
#    refused 503 "capacity", a request 503 and an exec 503 "capacity",
#    each naming the cap; once the commands end, the wake goes through
#  - `netctl status` (and --json) shows what the host holds per state and
#    how many more it can take, the same figures as /metrics' berth_host_*
#  - vm_standby_memory: with room for one standby (set by a SIGHUP from
#    the measured cost), the most recently active suspended sandbox holds
#    it, and it moves when another one becomes the most recent
#  - a burst (four boots in all): with one running and three suspended,
#    three wakes at once each wake or are refused 503 "capacity"; the
#    VMMs, counted every few ms meanwhile, never pass vm_max_resident 2
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "tap_prefix bcp" "vm_pool 10.227.0.0/24" \
	"idle_pause never" "idle_suspend never" "vm_max_resident 2" \
	"vm_standby 8" "vm_standby_memory 0" "timeout wake_backoff 1s"
start_berthd

state() { netctl --json sandbox show "$1" | json_get "$(cat)" 'j["state"]'; }
state_is() { [ "$(state "$1")" = "$2" ]; }
states() { echo "$(state capa) $(state capb) $(state capc)"; }
url() { url_for 8080 "$1"; }
# the last event of SANDBOX with operation OP, as "result: reason"
last_ev() {
	netctl --json sandbox events "$1" | json_get "$(cat)" \
		"[e['result'] + ': ' + e.get('reason', '') for e in j['events'] if e['operation'] == '$2'][-1:]"
}
has_ev() {	# SANDBOX OP PATTERN
	netctl --json sandbox events "$1" | json_get "$(cat)" \
		"'\n'.join(e['result'] + ': ' + e.get('reason', '') for e in j['events'] if e['operation'] == '$2')" |
		grep -Eq -- "$3"
}

mk() {
	out=$(netctl sandbox create "$1" 2>&1) ||
		bail "sandbox create $1: $out; $(netctl sandbox events "$1" 2>&1 | tail -n 3)"
	netctl port publish "$1" 8080 >/dev/null || bail "publish $1"
}

# ---- vm_max_resident 2: the third create makes room ----
# Activity is what the parent saw last: a create's end, a wake's end, an
# exec (at once), a proxied request (from the workers' next report, up
# to a second later, and their connections hold a sandbox meanwhile).
# Each step below orders the sandboxes by the first three only, or uses
# a request only on the sandbox that is the most recent anyway.
st=$(netctl --json status)
is "no sandbox yet: the estimates use the configured size, said nominal" \
	"$(json_get "$st" '[j["capacity"]["more"][s]["nominal"] for s in ("running","paused","suspended")]')" \
	"[true, true, true]"
like "... netctl status says so" "$(netctl status | tr '\n' ' ')" \
	'room for: [0-9]+ more running \(bound by [a-z_]+; nominal sizes'
mk capa
mk capb
mk capc
# the create waited for that suspend: never three VMMs at once
is "the third create suspended the least recently active one (capa) before it ran" \
	"$(state capa)" suspended
is "... the other two run" "$(state capb) $(state capc)" "running running"
check "... its suspend event names the cap and the create" \
	has_ev capa suspend '^ok: suspended: vm_max_resident 2 reached \(a create of capc\)'

# ---- a request to it wakes it; the next least recently active goes ----
is "a request to the suspended capa is served" \
	"$(bcurl -o /dev/null -w '%{http_code}' "$(url capa)/healthz")" 200
is "... it runs" "$(state capa)" running
is "... and capb (created before capc) was suspended before it woke" \
	"$(state capb)" suspended
check "... saying the wake of capa asked" \
	has_ev capb suspend '^ok: suspended: vm_max_resident 2 reached \(a wake of capa\)'

# ---- an exec wakes too ----
out=$(netctl sandbox exec capb -- echo woken </dev/null 2>&1)
is "an exec in the suspended capb runs" "$?:$out" "0:woken"
is "... and capc (the least recently active now) was suspended first" \
	"$(state capc)" suspended
check "... for the wake of capb" \
	has_ev capc suspend '^ok: suspended: vm_max_resident 2 reached \(a wake of capb\)'
is "two run, one is suspended" "$(states)" "running running suspended"

# ---- nothing idle: refused, naming the cap ----
# A command running in each running sandbox holds it (nothing to suspend)
for s in capa capb; do
	spawn "$T/hold-$s.out" "$NETCTL" -s "$STATE" sandbox exec "$s" -- \
		sh -c 'touch /tmp/held; sleep 120'
	eval "HOLD_$s=\$SPAWNED"
	wait_for 30 sh -c "\"$NETCTL\" -s \"$STATE\" sandbox exec $s -- test -e /tmp/held </dev/null" ||
		not_ok "a command holds $s"
done
out=$(netctl sandbox resume capc 2>&1)
rc=$?
like "resume at the cap with nothing idle: refused, naming the cap" \
	"$rc:$out" '^[1-9][0-9]*:.*vm_max_resident 2 reached'
out=$(netctl --json sandbox resume capc 2>/dev/null)
is "... the error's code is capacity" \
	"$(json_get "$out" 'j["error"]["code"]')" capacity
code=$(bcurl -o "$T/refused.json" -w '%{http_code}' "$(url capc)/healthz")
is "a request to it: 503" "$code" 503
like "... naming the cap" "$(cat "$T/refused.json")" 'vm_max_resident 2 reached'
out=$(netctl --json sandbox exec capc -- true </dev/null 2>/dev/null)
is "an exec in it: refused with the code capacity" \
	"$(json_get "$out" 'j["error"]["code"]')" capacity
is "... nothing was suspended, capc did not wake" "$(states)" \
	"running running suspended"
kill "$HOLD_capa" "$HOLD_capb" 2>/dev/null
wait "$HOLD_capa" "$HOLD_capb" 2>/dev/null
# the holds go once the guest's commands are killed: the wake goes on
wake_ok() { [ "$(bcurl -o /dev/null -w '%{http_code}' "$(url capc)/healthz")" = 200 ]; }
check "the commands ended: a request to capc is served" wait_for 60 wake_ok
n=0
for s in capa capb; do state_is $s suspended && n=$((n + 1)); done
is "exactly one other is suspended" "$n" 1

# ---- capacity: netctl status and /metrics, the same sample ----
caps() {
	netctl --json status >"$T/status.json" || return 1
	curl -s --unix-socket "$STATE/control.sock" http://berth/metrics \
		>"$T/metrics" || return 1
	_at=$(json_get "$(cat "$T/status.json")" 'j["capacity"]["sampled_at"]')
	_mat=$(awk '$1 == "berth_host_sample_timestamp_seconds" { printf "%.0f", $2 * 1000 }' "$T/metrics")
	[ -n "$_at" ] && [ "$_at" = "$_mat" ]
}
# (a sample may fall between the two: then both are asked again)
check "status and /metrics show the same sample" wait_for 60 caps
st=$(cat "$T/status.json")
for s in running paused suspended stopped failed; do
	for f in sandboxes:berth_host_sandboxes memory_bytes:berth_host_sandbox_memory_bytes \
	    disk_bytes:berth_host_sandbox_disk_bytes; do
		k=${f%%:*} m=${f#*:}
		is "$s: $k in status = $m" \
			"$(json_get "$st" "j['capacity']['states']['$s']['$k']")" \
			"$(awk -v m="$m{state=\"$s\"}" '$1 == m { print $2 }' "$T/metrics")"
	done
done
for s in running paused suspended; do
	is "$s: how many more in status = berth_host_capacity_more" \
		"$(json_get "$st" "j['capacity']['more']['$s']['sandboxes']")" \
		"$(awk -v m="berth_host_capacity_more{state=\"$s\"}" '$1 == m { print $2 }' "$T/metrics")"
done
is "status: 2 running, 1 suspended" \
	"$(json_get "$st" '[j["capacity"]["states"][s]["sandboxes"] for s in ("running","paused","suspended")]')" \
	"[2, 0, 1]"
ok_mem=$(json_get "$st" 'j["capacity"]["states"]["running"]["memory_bytes"] > 0 and j["capacity"]["states"]["suspended"]["disk_bytes"] > 0')
is "... their memory (running) and disk (suspended) are measured" "$ok_mem" True
is "room for no more running: vm_max_resident bounds it" \
	"$(json_get "$st" '[j["capacity"]["more"]["running"]["sandboxes"], j["capacity"]["more"]["running"]["bound"]]')" \
	'[0, "vm_max_resident"]'
is "paused: none there, the running ones' memory stands for one" \
	"$(json_get "$st" '[j["capacity"]["more"]["paused"]["nominal"], j["capacity"]["per_sandbox"]["paused"]["memory_bytes"] == j["capacity"]["per_sandbox"]["running"]["memory_bytes"]]')" \
	"[false, true]"
out=$(netctl status | tr '\n' ' ')
like "netctl status shows it" "$out" \
	'running +2 .*suspended +1 .*room for: 0 more running \(bound by vm_max_resident\)'

# ---- standbys within vm_standby_memory ----
# Two suspended sandboxes, the most recently active one known: X is the
# one suspended for capc above, Y (capc) is used now (an exec), then
# suspended.
X=capa; state_is capa suspended || X=capb
Y=capc
is "an exec in $Y" "$(netctl sandbox exec $Y -- echo used </dev/null 2>&1)" used
check "suspend $Y" netctl sandbox suspend "$Y"
# no free page reporting here: the host would get nothing back from a
# drop of the guest's page cache, so none is asked for
is "... without free page reporting, no reclaim first" \
	"$(grep -c 'its guest gives memory back first' "$BERTHD_LOG")" 0
show() { netctl --json sandbox show "$1"; }
standby_of() { show "$1" | json_get "$(cat)" 'j.get("standby", "none")'; }
standby_mib() { show "$1" | json_get "$(cat)" 'j["vm"]["standby_memory_bytes"] >> 20'; }
standbys() {
	_n=0
	for _s in capa capb capc; do
		[ "$(standby_of $_s)" != none ] && _n=$((_n + 1))
	done
	echo $_n
}
measured() { [ "$(standby_of "$1")" = ready ] && [ "$(standby_mib "$1")" -gt 0 ]; }
check "no memory limit: $X has a standby, measured" wait_for 60 measured "$X"
check "... $Y too" wait_for 60 measured "$Y"
px=$(standby_mib "$X") py=$(standby_mib "$Y")
diag "standby PSS: $X $px MiB, $Y $py MiB"
max=$px; [ "$py" -gt "$max" ] && max=$py
budget=$(( (max * 3 + 1) / 2 ))
if [ $((px + py)) -le "$budget" ]; then
	not_ok "the standbys' PSS differ too much for a budget of one ($px, $py MiB)"
else
	sed -i "s/^vm_standby_memory .*/vm_standby_memory $budget/" "$CONF"
	kill -HUP "$BERTHD_PID"
	holder_is() {	# HOLDS NOT
		[ "$(standby_of "$1")" = ready ] && [ "$(standby_of "$2")" = none ]
	}
	check "vm_standby_memory $budget (a SIGHUP): the most recently active ($Y) keeps its standby, $X loses it" \
		wait_for 30 holder_is "$Y" "$X"
	check "... a standby event says why" \
		has_ev "$X" standby "^ok: standby stopped: more recently active suspended sandboxes take the budget \(vm_standby 8, vm_standby_memory $budget MiB"
	is "... one standby in all" "$(standbys)" 1
	# X used now (woken, then suspended again): the most recent; it
	# takes the standby, Y's goes
	is "$X answers (woken)" \
		"$(bcurl -o /dev/null -w '%{http_code}' "$(url "$X")/healthz")" 200
	check "suspend $X" netctl sandbox suspend "$X"
	check "the standby moved to $X, the most recently active suspended one" \
		wait_for 60 holder_is "$X" "$Y"
	check "... $Y's standby event says why" \
		has_ev "$Y" standby '^ok: standby stopped: more recently active'
	is "... still one standby" "$(standbys)" 1
	check "berth_host_standby counts it" wait_for 60 metric_is 'berth_host_standby{kind="count"}' 1
fi

# ---- a burst: three wakes at once, never more than two VMMs ----
# No standbys (their qemus would be counted): every qemu of this test is
# a sandbox's VMM (running, paused, being suspended or restored). A
# fourth sandbox, then one running and three suspended; the VMMs are
# counted every few ms while the three wakes run.
sed -i "s/^vm_standby .*/vm_standby 0/" "$CONF"
kill -HUP "$BERTHD_PID"
vmms() { pgrep -f "name berth-cap[abcd] " | wc -l; }
running_n() {
	_n=0
	for _s in capa capb capc capd; do
		state_is $_s running && _n=$((_n + 1))
	done
	echo $_n
}
vmms_are_running() { [ "$(vmms)" -eq "$(running_n)" ]; }
check "vm_standby 0 (a SIGHUP): the standbys go" wait_for 30 vmms_are_running
mk capd
for s in capa capb capc capd; do
	[ "$(state $s)" = running ] || continue
	[ "$(running_n)" -gt 1 ] || break
	check "suspend $s (one running left)" netctl sandbox suspend "$s"
done
is "one running, three suspended" "$(running_n):$(vmms)" "1:1"
sleeping="" R=""
for s in capa capb capc capd; do
	if state_is $s suspended; then sleeping="$sleeping $s"; else R=$s; fi
done
# (read from /proc, every 5 ms or so: a pgrep loop sees a few samples)
touch "$T/sampling"
python3 -I -c '
import os, re, sys, time
pat = re.compile(rb"-name\0berth-cap[abcd]\0")
with open(sys.argv[2], "w") as out:
    while os.path.exists(sys.argv[1]):
        n = 0
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/" + p + "/cmdline", "rb") as f:
                        n += bool(pat.search(f.read()))
                except OSError:
                    pass
        out.write("%d\n" % n)
        out.flush()
        time.sleep(0.002)
' "$T/sampling" "$T/vmms" &
SAMPLER=$!
# the burst starts once the sampler counts (python's start on a loaded
# machine took longer than the whole burst once: no sample at all)
sampled() { [ -s "$T/vmms" ]; }
wait_for 30 sampled || bail "the VMM sampler wrote nothing"
for s in $sleeping; do
	"$NETCTL" -s "$STATE" --json sandbox resume "$s" >"$T/burst-$s.json" \
		2>"$T/burst-$s.err" &
	eval "BURST_$s=\$!"
done
for s in $sleeping; do
	eval "wait \$BURST_$s"
	echo $? >"$T/burst-$s.rc"
done
rm -f "$T/sampling"
wait "$SAMPLER"
n_ok=0 n_cap=0
for s in $sleeping; do
	if [ "$(cat "$T/burst-$s.rc")" = 0 ]; then
		n_ok=$((n_ok + 1))
	elif [ "$(json_get "$(cat "$T/burst-$s.json")" 'j["error"]["code"]')" = capacity ]; then
		n_cap=$((n_cap + 1))
	else
		diag "resume $s: $(cat "$T/burst-$s.json" "$T/burst-$s.err")"
	fi
done
is "three wakes at once: each woke or was refused 503 capacity" \
	"$((n_ok + n_cap))" 3
ok_two() { [ "$n_ok" -ge 2 ]; }
check "... at least two woke ($n_ok woke, $n_cap refused)" ok_two
max=$(sort -n "$T/vmms" | tail -n 1)
diag "VMMs counted $(wc -l <"$T/vmms") times during the burst, at most $max"
le_two() { [ "$(wc -l <"$T/vmms")" -gt 0 ] && [ "$max" -le 2 ]; }
check "... never more than vm_max_resident 2 VMMs meanwhile (at most $max)" le_two
is "... two run after it" "$(running_n):$(vmms)" "2:2"
like "... $R, running before, was suspended for one of them" \
	"$(last_ev "$R" suspend)" \
	'ok: suspended: vm_max_resident 2 reached \(a wake of cap[a-d]\)'

for s in capa capb capc capd; do
	check "rm $s" netctl sandbox rm "$s"
done
check "no qemu of this test is left" wait_for 30 sh -c \
	'! pgrep -f "name berth-cap[abcd] " >/dev/null'
done_testing
