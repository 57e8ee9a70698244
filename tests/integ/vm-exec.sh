#!/bin/sh
# vm-exec.sh — commands in a microVM's guest through its agent (qemu, TCG,
# one boot): `netctl sandbox exec` prints what the command wrote and exits
# with its status (id -u is 0, false is 1, a signal is 128+N, a timeout
# kills); stdin, env and cwd get through; binary output comes back
# base64 in the API; several execs in a row; an exec on a suspended (and
# on a paused) sandbox wakes it and says how long the wake took; five
# concurrent execs on a suspended sandbox share one wake; a running
# command is activity (idle_pause does not stop it); berthd restarted,
# the next exec connects again; a sandbox token may exec only in its
# own sandbox (403 elsewhere); an external sandbox has no guest (409).
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

CTL_PORT=$(free_port)
VMM=on berthd_config "tap_prefix bxe" "vm_pool 10.231.0.0/24" \
	"idle_pause never" "idle_suspend never" \
	"control_listen 127.0.0.1:$CTL_PORT"
start_berthd

out=$(netctl sandbox create ex 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events ex 2>&1 | tail -n 3)"
like "created, running" "$out" 'sandbox ex created \(10\.231\.0\.[0-9]+, running\)'
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
# the agent's socket is the jailed VMM's (berthd checks its uid)
is "the VMM is jailed" \
	"$(netctl --json sandbox show ex | json_get "$(cat)" 'j["vm"]["jailed"]')" True
check "the agent's socket is in the jail's run/" \
	test -S "$STATE/vms/ex/jail/run/agent.sock"

x() { netctl sandbox exec ex "$@" </dev/null; }
state() { netctl --json sandbox show ex | json_get "$(cat)" 'j["state"]'; }
state_is() { [ "$(state)" = "$1" ]; }
count_ev() {	# OPERATION RESULT
	netctl --json sandbox events ex |
		json_get "$(cat)" "len([e for e in j['events'] if e['operation']=='$1' and e['result']=='$2'])"
}

# ---- running ----
out=$(x -- id -u 2>&1)
is "exec id -u: prints 0, exit 0" "$?:$out" "0:0"
x -- false
is "exec false: exit 1" "$?" 1
out=$(printf 'hello\nworld\n' | netctl sandbox exec ex -- sh -c 'cat; echo end')
is "stdin is piped through" "$out" "$(printf 'hello\nworld\nend')"
out=$(x --env FOO=bar --env PATH=/bin --cwd /tmp -- sh -c 'echo $FOO $PATH; pwd')
is "--env and --cwd" "$out" "$(printf 'bar /bin\n/tmp')"
x -- sh -c 'echo out; echo err >&2; exit 3' >"$T/o" 2>"$T/e"
is "exit status 3" "$?" 3
is "... stdout" "$(cat "$T/o")" out
is "... stderr apart" "$(cat "$T/e")" err
x -- sh -c 'kill -9 $$'
is "killed by signal 9: exit 137" "$?" 137
x --timeout 1s -- sleep 30 2>"$T/e"
is "--timeout 1s on sleep 30: killed (137)" "$?" 137
like "... and netctl says it timed out" "$(cat "$T/e")" 'timed out'
x -- no-such-command 2>"$T/e"
is "a command that does not exist: 127" "$?" 127
# ---- --user, --tty ----
out=$(x --user berth -- id 2>&1)
like "--user berth: its uid, gid and groups" "$out" \
	'^uid=1000\(berth\) gid=1000\(berth\) groups=.*50\(staff\)'
out=$(x --user berth -- sh -c 'echo $HOME $USER; pwd' 2>&1)
is "--user berth: its HOME, USER, and home as cwd" "$out" "$(printf '/tmp berth\n/tmp')"
is "--user root: uid 0" "$(x --user root -- id -u 2>&1)" 0
x --user nosuchuser -- true 2>"$T/e"
is "--user nosuchuser: netctl fails (exit 1)" "$?" 1
like "... saying the user is unknown" "$(cat "$T/e")" "no user 'nosuchuser' in the guest's /etc/passwd"
out=$(x --tty -- tty 2>&1 | tr -d '\r')
like "--tty: tty prints /dev/pts/N" "$out" '^/dev/pts/[0-9]+$'
out=$(x --tty -- stty size 2>&1 | tr -d '\r')
is "--tty with no terminal here: 24x80" "$out" "24 80"
# netctl in a terminal of 33x101 (a python pty): the guest's is as large
out=$(python3 - "$NETCTL" -s "$STATE" sandbox exec ex --tty -- stty size <<'PY' | tr -d '\r'
import fcntl, os, pty, struct, sys, termios
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        b = os.read(fd, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(st))
PY
)
is "--tty in a 33x101 terminal: stty size says so" "$?:$out" "0:33 101"
out=$(printf 'typed\n' | netctl sandbox exec ex --tty -- sh -c 'read l; echo "got $l"' | tr -d '\r')
like "--tty: stdin reaches the terminal" "$out" 'got typed'

api() {	# BODY: POST .../exec over the socket
	curl -sS --unix-socket "$STATE/control.sock" -X POST \
		-H 'Content-Type: application/json' -d "$1" \
		http://berth/v1/sandboxes/ex/exec
}
j=$(api '{"argv":["printf","\\377A"]}')
is "API: binary output is base64" \
	"$(json_get "$j" 'j["stdout"] + " " + j["stdout_encoding"] + " " + str(j["exit_code"]) + " " + str(j["signal"]) + " " + str(j["wake_ms"])')" \
	"/0E= base64 0 None 0"
j=$(api '{"argv":["cat"],"stdin":"aGk="}')
is "API: stdin in base64, text out as UTF-8" \
	"$(json_get "$j" 'j["stdout"] + " " + j["stdout_encoding"]')" "hi utf-8"
j=$(api '{"argv":[]}')
like "API: an empty argv is 400" "$j" '"status": ?400'

# a running command keeps the sandbox awake
check "idle_pause 1s set" netctl sandbox set ex --idle-pause 1s
out=$(x -- sh -c 'sleep 4; echo done')
is "a 4 s command under idle_pause 1s ran to its end" "$out" done
check "... and then the sandbox pauses" wait_for 30 state_is paused
check "idle_pause never again" netctl sandbox set ex --idle-pause never

# ---- paused: woken ----
[ "$(state)" = paused ] || netctl sandbox pause ex >/dev/null
j=$(netctl --json sandbox exec ex -- echo up </dev/null)
is "paused: exec answers" "$(json_get "$j" 'j["stdout"]')" up
is "running after the exec" "$(state)" running

# ---- suspended: woken, wake_ms ----
check "suspend" netctl sandbox suspend ex
w0=$(count_ev wake ok)
j=$(netctl --json sandbox exec ex -- echo awake </dev/null)
is "suspended: exec answers" "$(json_get "$j" 'j["stdout"]')" awake
wms=$(json_get "$j" 'j["wake_ms"]')
if [ -n "$wms" ] && [ "$wms" -gt 0 ] 2>/dev/null; then
	ok "suspended: wake_ms reported ($wms ms)"
else
	not_ok "suspended: wake_ms reported"; diag "$j"
fi
is "running after the exec" "$(state)" running
is "one wake event" "$(($(count_ev wake ok) - w0))" 1

# ---- five concurrent execs on a suspended sandbox: one wake ----
check "suspend again" netctl sandbox suspend ex
w0=$(count_ev wake ok)
r0=$(count_ev resume ok)
pids=""
for i in 1 2 3 4 5; do
	( netctl sandbox exec ex -- echo "n$i" </dev/null >"$T/c$i.out" 2>&1
	  echo $? >"$T/c$i.rc" ) &
	pids="$pids $!"
done
wait $pids
all=""
for i in 1 2 3 4 5; do all="$all $(cat "$T/c$i.rc"):$(cat "$T/c$i.out")"; done
is "five concurrent execs all answered" "$all" " 0:n1 0:n2 0:n3 0:n4 0:n5"
is "... after exactly one wake" "$(($(count_ev wake ok) - w0))" 1
is "... and no other resume" "$(($(count_ev resume ok) - r0))" 0

# ---- berthd restarted: the next exec connects again ----
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
start_berthd
check "berthd restarted: running still" wait_for 30 state_is running
out=$(x -- echo again 2>&1)
is "berthd restarted: exec works" "$?:$out" "0:again"

# ---- tokens ----
out=$(netctl sandbox add other --address 127.0.0.1) || bail "sandbox add: $out"
otok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
tx() {	# TOKEN ARGS...
	_tk=$1; shift
	"$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" \
		--token "$_tk" sandbox exec "$@" </dev/null
}
out=$(tx "$tok" ex -- echo mine 2>&1)
is "its own token: exec in its sandbox" "$?:$out" "0:mine"
out=$(tx "$otok" ex -- echo theirs 2>&1)
is "another sandbox's token: exit 4" "$?" 4
like "... refused (403)" "$out" "belongs to sandbox 'other'"
out=$(netctl sandbox exec other -- true </dev/null 2>&1)
is "an external sandbox: exit 1" "$?" 1
like "... it has no guest" "$out" 'not a VM-backed sandbox'

check "berthd still running" kill -0 "$BERTHD_PID"
check "sandbox rm" netctl sandbox rm ex
done_testing
