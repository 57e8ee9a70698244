#!/bin/sh
# privsep.sh — berthd's proxy workers hold no privilege: not root, no
# capabilities (CAP_NET_ADMIN in no set, an empty bounding set), no new
# privileges, chrooted in an empty root-owned directory, not dumpable.
# Probed from outside with the worker's own uid, gid and groups (setpriv):
# they cannot open the state database or private keys, cannot connect to
# the control socket, cannot create a file where they are rooted or in
# acme_dir; their open descriptors give them nothing more. The same probes
# as root succeed, so each can fail. The untrusted-input helpers (the
# guest agents' reader, the guests' DNS resolver, the NFLOG reader, the
# TCP control listener) are as unprivileged and come back when killed.
# Each worker and each helper runs under a uid of its own
# (helper_uid_range), so none can signal another (the probe gets EPERM
# where it gets through to its own uid), and one stopped with SIGSTOP
# misses its heartbeat (heartbeat 2s here): it is logged, killed and
# replaced by one of the same uid that serves.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool setpriv

# A certificate whose key the operator keeps elsewhere, root-only.
KEYS="$T/keys"
mkdir -p "$KEYS"
sh "$top_srcdir/certs/berth-mkcert" "$KEYS" other.localhost >/dev/null 2>&1 ||
	bail "berth-mkcert failed"
chmod 700 "$KEYS"
chmod 600 "$KEYS/server.key"
WORKERS=2
berthd_config "certificate $KEYS/server.pem $KEYS/server.key" "heartbeat 2s"
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish"
is "proxy serves through the workers" \
	"$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" sb1)/echo")" 200

# probe.py ACTION PATH: prints "ok" or the errno name.
cat >"$T/probe.py" <<'EOF'
import errno, os, socket, sys
act, path = sys.argv[1], sys.argv[2]
try:
    if act == "read":
        os.close(os.open(path, os.O_RDONLY))
    elif act == "create":
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(path)
    elif act == "connect":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.close()
    elif act == "signal":   # path: a pid; signal 0 checks permission only
        os.kill(int(path), 0)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
EOF
chmod 644 "$T/probe.py"
# A python the worker's uid can run (a pyenv shim under /root is not one).
WPY=
for _py in "$(python3 -c 'import sys; print(sys.executable)')" /usr/bin/python3; do
	if [ -x "$_py" ] && setpriv --reuid=65534 --regid=65534 --clear-groups \
	    "$_py" -I -c pass >/dev/null 2>&1; then
		WPY=$_py; break
	fi
done
[ -n "$WPY" ] || skip_all "no python3 that an unprivileged uid can run"

status_field() { awk -v f="$2:" '$1 == f { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }

# as_worker PID ACTION PATH: the probe under the worker's credentials.
as_worker() {
	_u=$(status_field "$1" Uid | awk '{print $1}')
	_g=$(status_field "$1" Gid | awk '{print $1}')
	_gs=$(status_field "$1" Groups | tr ' ' ',' | sed 's/,$//')
	if [ -n "$_gs" ]; then _ga="--groups=$_gs"; else _ga=--clear-groups; fi
	setpriv --reuid="$_u" --regid="$_g" "$_ga" --inh-caps=-all \
		"$WPY" -I "$T/probe.py" "$2" "$3" 2>&1
}
as_root() { python3 -I "$T/probe.py" "$1" "$2" 2>&1; }
uid_of() { status_field "$1" Uid | awk '{print $1}'; }

# distinct_uids PID...: every process a uid of its own (ps -o uid), in
# helper_uid_range's default; each one's uid may signal itself but no
# other (EPERM).
HELPER_UID_FIRST=2099999872 HELPER_UID_LAST=2099999999
distinct_uids() {
	_uids=$(for _p in "$@"; do ps -o uid= -p "$_p"; done | tr -d ' ')
	is "$# processes, $# uids ($(echo $_uids))" \
		"$(echo "$_uids" | sort -u | wc -l)" "$#"
	for _u in $_uids; do
		if [ "$_u" -ge $HELPER_UID_FIRST ] && [ "$_u" -le $HELPER_UID_LAST ]; then
			ok "uid $_u is in helper_uid_range"
		else
			not_ok "uid $_u is in helper_uid_range"
		fi
	done
	for _a in "$@"; do
		is "pid $_a: its uid may signal itself (the probe works)" \
			"$(as_worker "$_a" signal "$_a")" ok
		for _b in "$@"; do
			[ "$_a" = "$_b" ] && continue
			is "pid $_a (uid $(uid_of "$_a")) cannot signal pid $_b (uid $(uid_of "$_b"))" \
				"$(as_worker "$_a" signal "$_b")" EPERM
		done
	done
}

CAP_NET_ADMIN=12
has_cap() {	# HEXMASK BIT
	python3 -c 'import sys; sys.exit(0 if int(sys.argv[1], 16) >> int(sys.argv[2]) & 1 else 1)' "$1" "$2"
}

# Things a worker must not reach, and what it must not do with them.
DB="$STATE/berth.db"
secrets="$DB $DB-wal $STATE/tls/server.key $STATE/tls/ca.key $KEYS/server.key"
for f in $secrets; do
	[ -e "$f" ] || bail "expected $f to exist"
	is "root can open $(basename "$f") (the probe works)" "$(as_root read "$f")" ok
done
is "root can connect to the control socket (the probe works)" \
	"$(as_root connect "$STATE/control.sock")" ok

workers=$(berthd_workers)
[ "$(echo "$workers" | wc -l)" = 2 ] || bail "want 2 workers, got '$workers'"
for w in $workers; do
	uid=$(status_field "$w" Uid) gid=$(status_field "$w" Gid)
	like "worker $w: no uid is 0 ($uid)" "$uid" '^[1-9][0-9]*[[:space:]]+[1-9][0-9]*[[:space:]]+[1-9][0-9]*[[:space:]]+[1-9][0-9]*$'
	like "worker $w: no gid is 0 ($gid)" "$gid" '^[1-9][0-9]*[[:space:]]+[1-9][0-9]*[[:space:]]+[1-9][0-9]*[[:space:]]+[1-9][0-9]*$'
	unlike "worker $w: not in group 0" " $(status_field "$w" Groups) " ' 0 '
	for c in CapInh CapPrm CapEff CapAmb; do
		is "worker $w: $c empty" "$(status_field "$w" $c)" 0000000000000000
	done
	bnd=$(status_field "$w" CapBnd)
	if has_cap "$bnd" $CAP_NET_ADMIN; then
		not_ok "worker $w: CAP_NET_ADMIN not in the bounding set"; diag "CapBnd $bnd"
	else
		ok "worker $w: CAP_NET_ADMIN not in the bounding set"
	fi
	is "worker $w: bounding set empty" "$bnd" 0000000000000000
	is "worker $w: NoNewPrivs" "$(status_field "$w" NoNewPrivs)" 1
	# PR_SET_DUMPABLE 0 makes /proc/PID root's: same uid cannot ptrace
	# or read it.
	is "worker $w: not dumpable (its /proc entries are root's)" \
		"$(stat -c %u "/proc/$w/environ")" 0
	is "worker $w: its memory unreadable to its own uid" "$(as_worker "$w" read "/proc/$w/environ")" EACCES

	root=$(readlink "/proc/$w/root")
	is "worker $w: chrooted in the state dir's empty/" "$root" "$STATE/empty"
	is "worker $w: cwd is its root" "$(readlink "/proc/$w/cwd")" "$root"
	is "worker $w: its root is root-owned, not group/world writable" \
		"$(stat -c '%u %A' "$root" | cut -c1-2,8,11)" "0 --"
	is "worker $w: its root is empty" "$(ls -A "$root" | wc -l)" 0

	for f in $secrets; do
		is "worker $w: cannot open $f" "$(as_worker "$w" read "$f")" EACCES
	done
	is "worker $w: cannot connect to the control socket" \
		"$(as_worker "$w" connect "$STATE/control.sock")" EACCES
	is "worker $w: cannot create a file in its root" \
		"$(as_worker "$w" create "$root/probe")" EACCES
	is "worker $w: cannot create a file in acme_dir" \
		"$(as_worker "$w" create "$ACME_DIR/probe")" EACCES
	is "worker $w: cannot create a file in the state dir" \
		"$(as_worker "$w" create "$STATE/probe")" EACCES

	# Its descriptors: no state database, no key file, no directory but
	# acme_dir (read-only), and nothing written but the logs.
	bad=
	for fd in /proc/$w/fd/*; do
		t=$(readlink "$fd") || continue
		mode=$(stat -c %A "$fd" 2>/dev/null)
		case $t in
		socket:*|pipe:*|anon_inode:*|/dev/null) continue;;
		"$ACME_DIR") case $mode in lr-x*) continue;; esac;;
		"$BERTHD_LOG") continue;;	# stderr and the access log
		esac
		bad="$bad $(basename "$fd")=$t($mode)"
	done
	is "worker $w: holds no other file open" "$bad" ""
	for c in "$STATE" "$STATE/tls" "$KEYS"; do
		like "$(basename "$c"): not world-writable" "$(stat -c %A "$c")" '^d.{7}[^w]'
	done
done

distinct_uids $workers

# A replacement worker is as unprivileged as the first, with the uid of
# the one it replaces.
victim=$(echo "$workers" | head -n 1)
victim_uid=$(uid_of "$victim")
kill -KILL "$victim"
if wait_for 15 sh -c "pgrep -P $BERTHD_PID | grep -vx $victim | wc -l | grep -qx 2"; then
	new=$(berthd_workers | grep -vxF "$workers" | head -n 1)
	if [ -n "$new" ]; then
		is "restarted worker $new: bounding set empty" "$(status_field "$new" CapBnd)" 0000000000000000
		unlike "restarted worker $new: not root" "$(status_field "$new" Uid)" '(^|[[:space:]])0($|[[:space:]])'
		is "restarted worker $new: cannot open the state database" "$(as_worker "$new" read "$DB")" EACCES
		is "restarted worker $new: the uid of the one it replaces" "$(uid_of "$new")" "$victim_uid"
	else
		not_ok "found the restarted worker"
	fi
else
	not_ok "killed worker is replaced"
fi

# A stopped worker misses its heartbeat: logged, killed, replaced (same
# uid) by one that serves.
workers=$(berthd_workers)
stopped=$(echo "$workers" | tail -n 1)
stopped_uid=$(uid_of "$stopped")
kill -STOP "$stopped"
check "a stopped worker: its missed heartbeat is logged" wait_log 15 "$BERTHD_LOG" \
	"worker [0-9]+ \\(pid $stopped\\) missed its heartbeat" "$BERTHD_PID"
check "a stopped worker: killed and restarting" wait_log 10 "$BERTHD_LOG" \
	"worker [0-9]+ \\(pid $stopped\\) killed by signal 9: restarting" "$BERTHD_PID"
two_new_workers() {
	_w=$(berthd_workers)
	[ "$(echo "$_w" | wc -l)" = 2 ] && ! echo "$_w" | grep -qx "$stopped"
}
if wait_for 15 two_new_workers; then
	new=$(berthd_workers | grep -vxF "$workers" | head -n 1)
	ok "a stopped worker: replaced (pid $new)"
	is "a stopped worker: its replacement has its uid" "$(uid_of "$new")" "$stopped_uid"
	is "a stopped worker: its replacement's bounding set is empty" \
		"$(status_field "$new" CapBnd)" 0000000000000000
else
	not_ok "a stopped worker: replaced"
fi
serves() { [ "$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" sb1)/echo")" = 200 ]; }
all_serve() { for _i in 1 2 3 4 5 6 7 8; do serves || return 1; done; }
check "the workers serve again (8 requests)" wait_for 15 all_serve
is "one heartbeat missed in all (the stopped worker's)" \
	"$(grep -c 'missed its heartbeat' "$BERTHD_LOG")" 1

# helper_checks NAME: the helper "berthd: NAME" runs, named so, as
# unprivileged and jailed as a worker, holding no file.
helper_checks() {
	h=$1
	p=$(berthd_helper "$h")
	if [ -z "$p" ]; then
		not_ok "helper $h runs"; return
	fi
	ok "helper $h runs (pid $p)"
	is "$h: ps shows it as 'berthd: $h'" "$(ps -o args= -p "$p")" "berthd: $h"
	is "$h: its name is 'berthd: $h'" "$(cat "/proc/$p/comm")" "berthd: $h"
	unlike "$h: not root" "$(status_field "$p" Uid)" '(^|[[:space:]])0($|[[:space:]])'
	unlike "$h: no gid 0" "$(status_field "$p" Gid)" '(^|[[:space:]])0($|[[:space:]])'
	for c in CapInh CapPrm CapEff CapAmb CapBnd; do
		is "$h: $c empty" "$(status_field "$p" $c)" 0000000000000000
	done
	is "$h: NoNewPrivs" "$(status_field "$p" NoNewPrivs)" 1
	is "$h: not dumpable" "$(stat -c %u "/proc/$p/environ")" 0
	is "$h: chrooted in the empty root" "$(readlink "/proc/$p/root")" "$STATE/empty"
	is "$h: cannot open the state database" "$(as_worker "$p" read "$DB")" EACCES
	is "$h: cannot open the TLS key" "$(as_worker "$p" read "$STATE/tls/server.key")" EACCES
	is "$h: cannot connect to the control socket" \
		"$(as_worker "$p" connect "$STATE/control.sock")" EACCES
	bad=
	for fd in /proc/$p/fd/*; do
		t=$(readlink "$fd") || continue
		case $t in
		socket:*|pipe:*|anon_inode:*|/dev/null|"$BERTHD_LOG") continue;;
		esac
		bad="$bad $(basename "$fd")=$t"
	done
	is "$h: holds no file open" "$bad" ""
}
helper_is_new() { _p=$(berthd_helper "$1") && [ "$_p" != "$2" ]; }
metric_ge() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }

# ---- the guest agents' reader ----------------------------------------
# berthd with VMs on (none is created): "berthd: agent", the helper that
# parses what guest agents send (vm-exec.sh runs commands through it),
# is as unprivileged and jailed as the others; killed, it comes back
# (logged, counted in /metrics) and the workers go on.
kill "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
VMM=on berthd_config "certificate $KEYS/server.pem $KEYS/server.key" \
	"tap_prefix bpa" "vm_pool 10.232.9.0/24"
start_berthd
if grep -q 'vmm: off' "$BERTHD_LOG"; then
	diag "VMs are off here ($(grep 'vmm: off' "$BERTHD_LOG" | tail -n 1)): agent helper checks skipped"
else
	helper_checks agent
	workers=$(berthd_workers)
	distinct_uids $(berthd_helper agent) $workers
	old=$(berthd_helper agent)
	if [ -n "$old" ]; then
		kill -KILL "$old"
		check "agent: its death is logged" wait_log 10 "$BERTHD_LOG" \
			"agent helper \\(pid $old\\) killed by signal 9: restarting" "$BERTHD_PID"
		if wait_for 10 helper_is_new agent "$old"; then
			new=$(berthd_helper agent)
			ok "agent: restarted (pid $new)"
			is "agent: the new one is jailed too" "$(readlink "/proc/$new/root")" "$STATE/empty"
			unlike "agent: ... and not root" "$(status_field "$new" Uid)" '(^|[[:space:]])0($|[[:space:]])'
		else
			not_ok "agent: restarted"
		fi
		is "agent: the workers went on (same pids)" "$(berthd_workers)" "$workers"
		check "agent: its restart counted in /metrics" wait_for 5 metric_ge \
			'berth_helper_restarts_total{helper="agent"}' 1
		check "agent: up again in /metrics" wait_for 5 metric_is 'berth_helper_up{helper="agent"}' 1
		check "agent: berthd answers netctl status" netctl status
	fi
fi

# ---- the untrusted-input helpers -------------------------------------
# berthd again, with "egress on" inside a network namespace of its own
# (its table inet berth is that namespace's, never the host's): the
# guests' DNS resolver and the NFLOG reader run as helpers, each as
# unprivileged and jailed as a worker, named in ps, holding no file;
# killed, each comes back (logged, counted in /metrics) and nothing else
# stops. A veth "tap" (bps0) whose far end sits in
# a second namespace makes denials: its packets' MAC is no sandbox's, so
# they are logged as spoof-mac through the NFLOG reader and counted as
# unattributed in /metrics. The TCP control listener is the third helper:
# netctl over TCP works before and after each kill.
kill "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
NS=bps$$ G=bpsg$$
if ! ip netns add "$NS" 2>/dev/null; then
	diag "no network namespaces here: helper checks skipped"
	done_testing
	exit
fi
ip netns add "$G"
at_exit "ip netns del $NS; ip netns del $G"
ip -n "$NS" link set lo up
cat >"$T/berthd-ns" <<EOF
#!/bin/sh
exec ip netns exec $NS $BERTHD "\$@"
EOF
chmod 755 "$T/berthd-ns"
BERTHD=$T/berthd-ns
CTL_PORT=$(free_port)
EGRESS=on berthd_config "certificate $KEYS/server.pem $KEYS/server.key" \
	"tap_prefix bps" "dns_upstream 127.0.0.1" "control_listen 127.0.0.1:$CTL_PORT" \
	"heartbeat 2s"
start_berthd
wait_log 30 "$BERTHD_LOG" "egress: table inet berth" "$BERTHD_PID" || bail "egress did not start"
ip -n "$NS" link add bps0 type veth peer name bpsp0
ip -n "$NS" link set bpsp0 netns "$G"
ip -n "$NS" addr add 10.9.9.1/24 dev bps0
ip -n "$NS" link set bps0 up
ip -n "$G" addr add 10.9.9.2/24 dev bpsp0
ip -n "$G" link set bpsp0 up
ip -n "$G" link set lo up
# the "guest" knows the gateway's MAC: its datagrams need no ARP
ip -n "$G" neigh replace 10.9.9.1 dev bpsp0 nud permanent \
	lladdr "$(ip -n "$NS" -o link show bps0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')"
unattributed() { metric berth_egress_unattributed_total; }
more_than() { [ "$(unattributed)" -gt "$1" ] 2>/dev/null; }
deny_some() {	# three UDP datagrams from the "guest" (no ping here)
	ip netns exec "$G" python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3): s.sendto(b"x", ("10.9.9.1", 9))'
}
workers=$(berthd_workers)
admin=$(netctl token create --admin | head -n 1)
tnet() { ip netns exec "$NS" "$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" \
	--cacert "$CA" --token "$admin" "$@"; }
check "netctl over TCP (the control helper) works" tnet status
for h in dns nflog control; do
	helper_checks "$h"
done
# each helper and each worker a uid of its own: none can signal another
distinct_uids $(berthd_helper dns) $(berthd_helper nflog) \
	$(berthd_helper control) $workers

deny_some
if wait_for 10 more_than 0; then
	ok "a denial at tap bps0 went through the NFLOG reader ($(unattributed) counted)"
else
	not_ok "a denial at tap bps0 went through the NFLOG reader"
fi
for h in nflog dns control; do
	old=$(berthd_helper "$h")
	n0=$(unattributed)
	kill -KILL "$old"
	if wait_log 10 "$BERTHD_LOG" "$h helper \\(pid $old\\) killed by signal 9: restarting" "$BERTHD_PID"; then
		ok "$h: its death is logged"
	else
		not_ok "$h: its death is logged"
	fi
	if wait_for 10 helper_is_new "$h" "$old"; then
		new=$(berthd_helper "$h")
		ok "$h: restarted (pid $new)"
		is "$h: the new one is jailed too" "$(readlink "/proc/$new/root")" "$STATE/empty"
		unlike "$h: ... and not root" "$(status_field "$new" Uid)" '(^|[[:space:]])0($|[[:space:]])'
	else
		not_ok "$h: restarted"
	fi
	is "$h: the workers went on (same pids)" "$(berthd_workers)" "$workers"
	check "$h: its restart counted in /metrics" wait_for 5 metric_ge \
		"berth_helper_restarts_total{helper=\"$h\"}" 1
	check "$h: up again in /metrics" wait_for 5 metric_is "berth_helper_up{helper=\"$h\"}" 1
	check "$h: berthd answers netctl status" netctl status
	if wait_for 10 tnet status; then ok "$h: netctl over TCP works"
	else not_ok "$h: netctl over TCP works"; fi
	deny_some
	if wait_for 10 more_than "$n0"; then
		ok "$h: denials are logged after the restart ($n0 -> $(unattributed))"
	else
		not_ok "$h: denials are logged after the restart ($n0 -> $(unattributed))"
	fi
done

# A stopped helper misses its heartbeat: logged, killed and restarted
# with its uid; what it serves works again, and nothing else restarted.
for h in dns control; do
	old=$(berthd_helper "$h")
	old_uid=$(uid_of "$old")
	r0=$(metric "berth_helper_restarts_total{helper=\"$h\"}")
	kill -STOP "$old"
	check "$h stopped: its missed heartbeat is logged" wait_log 15 "$BERTHD_LOG" \
		"$h helper \\(pid $old\\) missed its heartbeat" "$BERTHD_PID"
	check "$h stopped: killed and restarting" wait_log 10 "$BERTHD_LOG" \
		"$h helper \\(pid $old\\) killed by signal 9: restarting" "$BERTHD_PID"
	if wait_for 15 helper_is_new "$h" "$old"; then
		new=$(berthd_helper "$h")
		ok "$h stopped: restarted (pid $new)"
		is "$h stopped: the new one has its uid" "$(uid_of "$new")" "$old_uid"
		is "$h stopped: the new one is jailed too" "$(readlink "/proc/$new/root")" "$STATE/empty"
	else
		not_ok "$h stopped: restarted"
	fi
	check "$h stopped: its restart counted in /metrics" wait_for 5 metric_ge \
		"berth_helper_restarts_total{helper=\"$h\"}" $((r0 + 1))
	check "$h stopped: up again in /metrics" wait_for 10 metric_is "berth_helper_up{helper=\"$h\"}" 1
	is "$h stopped: the workers went on (same pids)" "$(berthd_workers)" "$workers"
	if wait_for 10 tnet status; then ok "$h stopped: netctl over TCP works"
	else not_ok "$h stopped: netctl over TCP works"; fi
done
is "two heartbeats missed in all (the stopped helpers')" \
	"$(grep -c 'missed its heartbeat' "$BERTHD_LOG")" 2

done_testing
