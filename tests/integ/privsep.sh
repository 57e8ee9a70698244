#!/bin/sh
# privsep.sh — berthd's proxy workers hold no privilege: not root, no
# capabilities (CAP_NET_ADMIN in no set, an empty bounding set), no new
# privileges, chrooted in an empty root-owned directory, not dumpable.
# Probed from outside with the worker's own uid, gid and groups (setpriv):
# they cannot open the state database or private keys, cannot connect to
# the control socket, cannot create a file where they are rooted or in
# acme_dir; their open descriptors give them nothing more. The same probes
# as root succeed, so each can fail.
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
berthd_config "certificate $KEYS/server.pem $KEYS/server.key"
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

# A replacement worker is as unprivileged as the first.
victim=$(echo "$workers" | head -n 1)
kill -KILL "$victim"
if wait_for 15 sh -c "pgrep -P $BERTHD_PID | grep -vx $victim | wc -l | grep -qx 2"; then
	new=$(berthd_workers | grep -vxF "$workers" | head -n 1)
	if [ -n "$new" ]; then
		is "restarted worker $new: bounding set empty" "$(status_field "$new" CapBnd)" 0000000000000000
		unlike "restarted worker $new: not root" "$(status_field "$new" Uid)" '(^|[[:space:]])0($|[[:space:]])'
		is "restarted worker $new: cannot open the state database" "$(as_worker "$new" read "$DB")" EACCES
	else
		not_ok "found the restarted worker"
	fi
else
	not_ok "killed worker is replaced"
fi

done_testing
