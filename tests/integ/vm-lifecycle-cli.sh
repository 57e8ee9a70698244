#!/bin/sh
# vm-lifecycle-cli.sh — a microVM sandbox's lifecycle through netctl and
# berthd, never stranded: created with --memory 512 --vcpus 2 from a
# template registered by name (the guest sees 512 MiB and 2 CPUs), its
# idle policy changed later (it pauses), its qemu killed (failed: resume
# says to start it), started again from the template with its /data
# file, restarted, stopped (the guest syncs first; a SIGTERM while that
# waits answers the stop and leaves the VM running for the next berthd);
# each an event. Three VM boots (qemu, TCG), one after the other.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "accel tcg" "tap_prefix blc" "vm_pool 10.219.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd

# The default template berthd built, registered under a name of its own.
check "template add" netctl template add copy "$STATE/templates/default"
out=$(netctl sandbox create lc --memory 512 --vcpus 2 --template copy 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events lc 2>&1 | tail -n 3)"
like "created, running" "$out" 'sandbox lc created \(10\.219\.0\.[0-9]+, running\)'
netctl port publish lc 8080 >/dev/null || bail "publish"
wait_routed lc 8080 || bail "lc is not routed"

URL=$(url_for 8080 lc)
info() { bcurl "$URL/info"; }
# boot: the guest's boot id, once it answers (after a boot the proxy's
# retry window may not cover the guest's first seconds)
boot() { wait_for 60 sh -c "curl -sS --cacert '$CA' --connect-to ::127.0.0.1: '$URL/info' | grep -q boot_id" && json_get "$(info)" 'j["boot_id"]'; }
state() { netctl --json sandbox show lc | json_get "$(cat)" 'j["state"]'; }
state_is() { [ "$(state)" = "$1" ]; }

i=$(info)
mem=$(json_get "$i" 'j["mem_total_kib"]')
# MemTotal is what the kernel did not keep for itself
if [ -n "$mem" ] && [ "$mem" -gt $((400 * 1024)) ] && [ "$mem" -le $((512 * 1024)) ]; then
	ok "the guest has 512 MiB (MemTotal $mem kB)"
else
	not_ok "the guest has 512 MiB"; diag "$i"
fi
is "the guest has 2 CPUs" "$(json_get "$i" 'j["cpus"]')" 2
show=$(netctl sandbox show lc)
like "show: its resources" "$show" 'resources: 512 MiB, 2 vCPUs, disk 1024 MiB'
like "show: its template" "$show" 'template: +copy'
b0=$(json_get "$i" 'j["boot_id"]')

# The host knows the guest's MAC for good (a permanent neighbour entry on
# its tap): a guest just resumed from a snapshot is never asked by ARP
# before the first request reaches it.
addr=$(netctl --json sandbox show lc | json_get "$(cat)" 'j["address"]')
neigh=$(ip neigh show "$addr" 2>&1)
like "the guest's address has a permanent neighbour entry on a tap" "$neigh" \
	"^$addr dev blc[0-9a-z]* lladdr 02:[0-9a-f:]{14} PERMANENT"

is "a file on /data" "$(bcurl -X PUT --data-binary kept "$URL/files/keep" -o /dev/null -w '%{http_code}')" 201
netctl template rm copy >"$T/rm.out" 2>&1
is "template rm while lc uses it: exit 1" "$?" 1
like "... names the sandbox" "$(cat "$T/rm.out")" "used by sandbox 'lc'"

# the idle policy, changed on the running VM
check "sandbox set --idle-pause 1s" netctl sandbox set lc --idle-pause 1s
check "... and the VM pauses" wait_for 30 state_is paused
check "sandbox set --idle-pause never" netctl sandbox set lc --idle-pause never
check "resume" netctl sandbox resume lc

# a VM that dies: failed, and resume is not the way back
kill -KILL $(pgrep -f 'name berth-lc ') 2>/dev/null
check "qemu killed: failed" wait_for 30 state_is failed
netctl sandbox resume lc >"$T/resume.out" 2>&1
is "resume of a failed sandbox: exit 1" "$?" 1
like "... says to start it" "$(cat "$T/resume.out")" 'start it \(netctl sandbox start lc'
out=$(netctl sandbox start lc 2>&1)
is "start: exit 0, running" "$?:$out" "0:sandbox lc is running"
b1=$(boot)
like "a new boot" "$b1" '^[0-9a-f-]{36}$'
[ "$b1" != "$b0" ] && ok "... not the old one" || not_ok "... not the old one"
is "the file on /data survived" "$(bcurl "$URL/files/keep")" kept
is "still 2 CPUs" "$(json_get "$(info)" 'j["cpus"]')" 2

out=$(netctl --json sandbox restart lc 2>&1)
is "restart: running" "$(json_get "$out" 'j["state"]')" running
b2=$(boot)
[ -n "$b2" ] && [ "$b2" != "$b1" ] && ok "restart booted again" || not_ok "restart booted again"
is "the file on /data survived the restart" "$(bcurl "$URL/files/keep")" kept

# ---- berthd told to end while a stop waits for the guest's sync ----
# The guest's sync is made slow (a `sync` earlier in the agent's PATH
# that sleeps), so the sync a stop asks for first waits (at most 5 s).
# SIGTERM meanwhile: the stop is answered that berthd is shutting down,
# and the VM is left running for the next berthd, as every VM outlives
# berthd.
netctl sandbox exec lc -- sh -c 'mkdir -p /usr/local/bin &&
	printf "#!/bin/sh\nsleep 30\n" >/usr/local/bin/sync &&
	chmod 755 /usr/local/bin/sync' >/dev/null 2>&1 ||
	not_ok "a slow sync in the guest"
netctl sandbox stop lc >"$T/stop1.out" 2>&1 &
STOP1=$!
check "the stop waits for the guest's sync" \
	wait_log 30 "$BERTHD_LOG" 'sandbox lc: stop: the guest syncs first'
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
wait "$STOP1"
is "... SIGTERM answers it: netctl fails" "$?" 1
like "... saying berthd is shutting down" "$(cat "$T/stop1.out")" 'shutting down'
grep -q 'shutting down' "$T/stop1.out" || diag "berthd's log: $(tail -n 30 "$BERTHD_LOG")"
start_berthd
check "the VM outlived berthd: running" wait_for 60 state_is running
wait_routed lc 8080 || not_ok "lc is routed again"
is "... the same boot" "$(boot)" "$b2"
netctl sandbox exec lc -- rm -f /usr/local/bin/sync >/dev/null 2>&1

out=$(netctl sandbox stop lc 2>&1)
is "stop: stopped" "$out" "sandbox lc is stopped"
is "no qemu left for lc" "$(pgrep -c -f 'name berth-lc ' || true)" 0

ev=$(netctl --json sandbox events lc)
is "each step is an event" \
	"$(json_get "$ev" '" ".join(e["operation"] + "/" + e["result"] for e in j["events"] if e["operation"] in ("set","resume","start","restart","stop","exit"))')" \
	"set/ok set/ok resume/ok exit/failed resume/refused start/ok restart/ok stop/failed stop/ok"

check "sandbox rm" netctl sandbox rm lc
check "template rm once unused" netctl template rm copy
done_testing
