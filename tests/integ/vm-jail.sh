#!/bin/sh
# vm-jail.sh — play an escaped VMM. Two microVM sandboxes (qemu, TCG),
# A and B, each qemu in its own jail. A process running as A's uid, and
# one inside A's jail (nsenter into its mount and PID namespaces, then
# A's uid), try what an attacker who owns A's qemu would: open B's RAM
# file, disk, console and QMP socket, signal and ptrace B's qemu, write
# anywhere in the state directory, and plant symlinks in place of the
# files root touches in A's directories. Every attempt must fail; then A
# is paused, suspended, resumed, restarted and removed, and nothing
# outside A's jail changed (ownership, modes and hashes of the targets).
# Also: /proc/<qemu>/status shows NoNewPrivs 1 and Seccomp 2, its root
# is the jail, and its cgroup carries the limits.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool setpriv nsenter python3 sha256sum
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "tap_prefix bjl" "vm_pool 10.223.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd
netctl sandbox create ja >"$T/a.out" 2>&1 &
ca=$!
netctl sandbox create jb >"$T/b.out" 2>&1 &
cb=$!
wait $ca && wait $cb || bail "create: $(cat "$T/a.out" "$T/b.out")"

conf_of() { sed -n "s/^$2=//p" "$STATE/vms/$1/sandbox.conf"; }
PA=$(conf_of ja pid) PB=$(conf_of jb pid)
UA=$(conf_of ja uid) UB=$(conf_of jb uid)
JA="$STATE/vms/ja/jail" JB="$STATE/vms/jb/jail"
like "A runs as a uid of its own" "$UA" '^[0-9]+$'
unlike "B's is another" "$UB" "^$UA\$"
is "A's qemu runs as A's uid" "$(awk '/^Uid:/ {print $2}' /proc/$PA/status)" "$UA"
unlike "not the workers' user (nobody)" "$UA" '^65534$'
is "NoNewPrivs 1" "$(awk '/^NoNewPrivs:/ {print $2}' /proc/$PA/status)" 1
is "Seccomp 2 (filter)" "$(awk '/^Seccomp:/ {print $2}' /proc/$PA/status)" 2
is "its root is its jail" "$(readlink /proc/$PA/root)" "$JA"
is "its own PID namespace (it is pid 1 there)" "$(awk '/^NSpid:/ {print $3}' /proc/$PA/status)" 1
like "the jail holds its files and nothing of B's" "$(ls "/proc/$PA/root")" 'disk.raw'
unlike "no state dir inside" "$(ls -R "/proc/$PA/root/" 2>/dev/null | grep -c 'sandbox.conf')" '^[1-9]'
is "its tap is A's" "$(cat /sys/class/net/$(conf_of ja tap)/owner)" "$UA"
# its network: a namespace of its own with loopback only (the tap came
# as a descriptor): nothing of the host's or another guest's to reach
unlike "its own network namespace" "$(readlink /proc/$PA/ns/net)" \
	"^$(readlink /proc/self/ns/net)\$"
unlike "... not B's" "$(readlink /proc/$PA/ns/net)" "^$(readlink /proc/$PB/ns/net)\$"
is "... holding loopback only" \
	"$(nsenter -t "$PA" -n ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')" "lo "
# a listener on the host's loopback: reachable from the host, not from
# A's namespace as A's uid
python3 -c 'import socket,sys
s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True: s.accept()[0].close()' >"$T/lport" &
lpid=$!
wait_for 10 sh -c "test -s '$T/lport'" || bail "no listener"
conn='import socket,sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2).close(); print("reached")
except OSError as e: print("unreachable:", e)'
is "the host's listener answers from the host" \
	"$(python3 -c "$conn" "$(cat "$T/lport")")" reached
like "... not from A's namespace as A's uid" \
	"$(nsenter -t "$PA" -n setpriv --reuid "$UA" --regid "$UA" --clear-groups \
	/usr/bin/python3 -c "$conn" "$(cat "$T/lport")" 2>&1)" '^unreachable'
kill $lpid 2>/dev/null
cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ || $2 == "" {print $3; exit}' /proc/$PA/cgroup)
like "it is in a cgroup of its own" "$cg" '/ja$'
like "... under this berthd's parent (its tap_prefix's: two on a host never share one)" "$cg" '/berth-bjl/ja$'
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	like "memory.max: RAM plus overhead" "$(cat /sys/fs/cgroup$cg/memory.max)" '^[0-9]+$'
	like "cpu.max: a quota" "$(cat /sys/fs/cgroup$cg/cpu.max)" '^[0-9]+ 100000$'
elif [ -d /sys/fs/cgroup/cpu/berth-bjl/ja ]; then
	is "cpu quota 100 % of its one vCPU" "$(cat /sys/fs/cgroup/cpu/berth-bjl/ja/cpu.cfs_quota_us)" 100000
	is "memory limit: 256 MiB RAM + 256 MiB overhead" \
		"$(cat /sys/fs/cgroup/memory/berth-bjl/ja/memory.limit_in_bytes)" $((512 * 1048576))
	is "pids limit" "$(cat /sys/fs/cgroup/pids/berth-bjl/ja/pids.max)" 1024
else
	ok "# SKIP no cgroup controllers here"
fi

# ---- targets an attacker would love to change ----------------------------
mkdir -p "$T/targets"
echo secret >"$T/targets/shadow"
chmod 600 "$T/targets/shadow"
snap() {	# ownership and mode of the targets and of B's files, and the
	# hashes of those nobody writes meanwhile (B's guest runs on)
	for f in "$T/targets/shadow" "$STATE/vms/jb/sandbox.conf" \
	    "$STATE/tls/ca.pem"; do
		printf '%s %s %s\n' "$f" "$(stat -c '%u:%g %a' "$f")" "$(sha256sum <"$f")"
	done
	for f in "$JB/mem" "$JB/disk.raw" "$JB/run" "$JB" "$STATE/vms/jb" \
	    "$STATE/vms" "$STATE"; do
		printf '%s %s\n' "$f" "$(stat -c '%u:%g %a' "$f")"
	done
}
before=$(snap)

# as A's uid, from the host's view
asA() { setpriv --reuid="$UA" --regid="$UA" --clear-groups --no-new-privs "$@"; }
fails() {	# DESC CMD...: the attempt must fail
	_d=$1; shift
	if "$@" >/dev/null 2>&1; then not_ok "$_d"; else ok "$_d"; fi
}
fails "A's uid cannot read B's RAM file" asA sh -c "head -c 1 '$JB/mem'"
fails "A's uid cannot write B's disk" asA sh -c "printf x | dd of='$JB/disk.raw' conv=notrunc 2>/dev/null"
fails "A's uid cannot read B's console" asA sh -c "cat '$STATE/vms/jb/console.log'"
fails "A's uid cannot reach B's QMP socket" asA python3 -c "
import socket; s=socket.socket(socket.AF_UNIX); s.connect('$JB/run/qmp.sock')"
fails "A's uid cannot signal B's qemu" asA kill -0 "$PB"
fails "A's uid cannot ptrace B's qemu" asA python3 -c "
import ctypes,sys; l=ctypes.CDLL(None, use_errno=True)
sys.exit(0 if l.ptrace(16, $PB, 0, 0) == 0 else 1)"
for d in "$STATE" "$STATE/vms" "$STATE/vms/ja" "$STATE/vms/ja/snap" "$JA" "$STATE/tls"; do
	fails "A's uid cannot write in ${d#$T/}" asA sh -c "echo x > '$d/planted'"
done
for f in mem disk.raw kernel initrd; do
	fails "A's uid cannot replace jail/$f with a symlink" asA sh -c \
		"ln -sf '$T/targets/shadow' '$JA/$f.x' && mv -f '$JA/$f.x' '$JA/$f'"
done
for f in sandbox.conf vmm.log console.log snap/state; do
	fails "A's uid cannot plant a symlink as ${f}" asA sh -c "ln -sf '$T/targets/shadow' '$STATE/vms/ja/$f'"
done
# from inside A's jail (its mount and PID namespaces), as A's uid
inA() { nsenter -t "$PA" -m -p -i -r -w setpriv --reuid="$UA" --regid="$UA" --clear-groups --no-new-privs "$@"; }
fails "inside A's jail B's files do not exist" inA sh -c "ls '$JB/mem'"
fails "inside A's jail the state dir does not exist" inA sh -c "ls '$STATE/vms'"
fails "inside A's jail the root is not writable" inA sh -c "echo x > /planted"
fails "inside A's jail /usr is read-only" inA sh -c "echo x > /usr/planted"
fails "inside A's jail the kernel image is read-only" inA sh -c "echo x >> /kernel"

# run/ is the one place A may write: it replaces its own sockets with
# links to B's QMP socket and to a root-owned file. Root reconnects to
# A's sockets when it adopts A after a restart: it must not end up
# talking to B, nor touch the file.
check "inside A's jail, A replaces its sockets with links" inA sh -c \
	"rm -f /run/qmp.sock /run/console.sock &&
	 ln -s '$JB/run/qmp.sock' /run/qmp.sock && ln -s '$T/targets/shadow' /run/console.sock"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
start_berthd
failed() { netctl --json sandbox show ja | grep -q '"state": *"failed"'; }
check "A, whose socket leads elsewhere, is failed after the restart" wait_for 20 failed
like "because the socket is not its own" "$(netctl sandbox events ja | tail -n 3)" \
	"owner is uid $UB, not the sandbox's $UA"
check "B was re-adopted, untouched" kill -0 "$PB"
like "B runs" "$(netctl sandbox ls)" 'jb +running'

# ---- now root works on A -----------------------------------------------------
url() { echo "$(url_for 8080 ja)$1"; }
netctl port publish ja 8080 >/dev/null && wait_routed ja 8080 || bail "publish ja"
check "start A again" netctl sandbox start ja
check "pause A" netctl sandbox pause ja
check "suspend A" netctl sandbox suspend ja
check "resume A" netctl sandbox resume ja
is "A answers" "$(bcurl -o /dev/null -w '%{http_code}' "$(url /healthz)")" 200
check "restart A (a cold boot)" netctl sandbox restart ja
is "A answers after the restart" "$(bcurl -o /dev/null -w '%{http_code}' "$(url /healthz)")" 200
PA2=$(conf_of ja pid)
is "the new qemu is jailed the same way" "$(awk '/^Uid:/ {print $2}' /proc/$PA2/status) $(readlink /proc/$PA2/root)" "$UA $JA"
check "remove A" netctl sandbox rm ja
gone() { [ ! -e "$STATE/vms/ja" ]; }
check "A's directory is gone" wait_for 20 gone
is "nothing outside A's jail changed" "$(snap)" "$before"
check "B still runs" kill -0 "$PB"
is "B's qemu is the same" "$(conf_of jb pid)" "$PB"
check "remove B" netctl sandbox rm jb
done_testing
