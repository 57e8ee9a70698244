# tests/integ/lib.sh — shared harness for berthd integration scripts.
#
# Sourced by tests/integ/proxy-*.sh and browser-*.sh (POSIX sh: dash runs
# them). Gives TAP output, a temp dir and process bookkeeping cleaned up by
# one EXIT trap, free loopback ports, and helpers that start berthd and
# testapp and wait for their "ready"/"listening" lines rather than sleeping.
#
# Environment: top_builddir (absolute; default: the source tree itself) and
# top_srcdir (default: two levels above this file).
# SPDX-License-Identifier: GPL-2.0-or-later

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
export top_srcdir top_builddir

BERTHD=${BERTHD:-$top_builddir/proxy/berthd}
NETCTL=${NETCTL:-$top_builddir/netctl/netctl}
TESTAPP=${TESTAPP:-$top_builddir/vmm/guest/testapp}
PYTOOL="$top_srcdir/tests/integ/proxy_tool.py"
DOMAIN=berth.localhost

# ---- TAP -------------------------------------------------------------------
_t_n=0
_t_fail=0

# skip_all REASON: the script cannot run here; the runner turns 77 into a
# TAP skip with the last stderr line as the reason.
skip_all() { echo "$*" >&2; exit 77; }

bail() {
	echo "Bail out! $*"
	_t_fail=$((_t_fail + 1))
	exit 1
}

ok() { _t_n=$((_t_n + 1)); echo "ok $_t_n - $*"; }
not_ok() { _t_n=$((_t_n + 1)); _t_fail=$((_t_fail + 1)); echo "not ok $_t_n - $*"; }

# check DESC CMD...: one TAP line from a command's exit status. Output of a
# failing command goes to stderr as "#"-prefixed diagnostics.
check() {
	_d=$1; shift
	if _out=$("$@" 2>&1); then ok "$_d"
	else not_ok "$_d"; diag "$_out"; fi
}

diag() { [ -n "$*" ] && printf '%s\n' "$*" | sed 's/^/# /' >&2; return 0; }

# is DESC GOT WANT
is() {
	if [ "$2" = "$3" ]; then ok "$1"
	else not_ok "$1"; diag "got: '$2'" "want: '$3'"; fi
}

# like DESC GOT PATTERN (grep -E)
like() {
	if printf '%s' "$2" | grep -Eq -- "$3"; then ok "$1"
	else not_ok "$1"; diag "got: '$(printf '%s' "$2" | head -c 2000)'" "want match: '$3'"; fi
}

unlike() {
	if printf '%s' "$2" | grep -Eq -- "$3"; then
		not_ok "$1"; diag "got: '$(printf '%s' "$2" | head -c 2000)'" "must not match: '$3'"
	else ok "$1"; fi
}

done_testing() {
	echo "1..$_t_n"
	[ "$_t_fail" -eq 0 ]
}

# ---- requirements ----------------------------------------------------------
need_root() { [ "$(id -u)" = 0 ] || skip_all "needs root (workers drop to user nobody)"; }
need_tool() {
	for _x in "$@"; do
		command -v "$_x" >/dev/null 2>&1 || skip_all "$_x not installed"
	done
}
need_bin() {
	for _x in "$@"; do
		[ -x "$_x" ] || skip_all "$_x not built"
	done
}
need_berth() {
	need_root
	need_tool python3 curl openssl
	need_bin "$BERTHD" "$NETCTL" "$TESTAPP"
}

# ---- temp dir, processes, cleanup -----------------------------------------
# T: the test's temp dir, world-traversable so workers running as nobody
# can read what tests put there (acme_dir). Every background process a
# test starts goes through spawn so the EXIT trap can end it.
T=$(mktemp -d "${TMPDIR:-/tmp}/berth-integ.XXXXXX") || exit 99
chmod 755 "$T"
: >"$T/pids"
# Every curl speaks HTTP/1.1 unless its arguments say --http2: berthd
# offers h2 and Debian's curl takes it, while the tests check HTTP/1.1's
# wire (header case, hop-by-hop headers). curl reads $CURL_HOME/.curlrc
# first; a --http2 on the command line wins.
mkdir -p "$T/curlhome"
echo "http1.1" >"$T/curlhome/.curlrc"
CURL_HOME="$T/curlhome"
export CURL_HOME

_cleanup() {
	_rc=$?
	set +e
	# Newest first: clients before servers. berthd's workers are its
	# children; end them too in case the parent dies without reaping.
	for _p in $(tac "$T/pids" 2>/dev/null); do
		if kill -0 "$_p" 2>/dev/null; then
			_kids=$(pgrep -P "$_p" 2>/dev/null)
			kill -TERM "$_p" 2>/dev/null
			_i=0
			while kill -0 "$_p" 2>/dev/null && [ $_i -lt 30 ]; do
				sleep 0.1; _i=$((_i + 1))
			done
			kill -KILL "$_p" $_kids 2>/dev/null
		fi
	done
	wait 2>/dev/null
	# VMs a restarted berthd adopted are not its children: any qemu of
	# this test (its command line names $T) goes too.
	_vms=""
	for _p in $(pgrep -f "qemu-system-x86_64 .*$T/" 2>/dev/null); do
		kill -KILL "$_p" 2>/dev/null && _vms="$_vms $_p"
	done
	# jailed ones name only paths inside their jail: their root tells
	for _p in $(pgrep -f "qemu-system-x86_64 -name berth-" 2>/dev/null); do
		case $(readlink "/proc/$_p/root" 2>/dev/null) in
		"$T"/*) kill -KILL "$_p" 2>/dev/null && _vms="$_vms $_p";;
		esac
	done
	# gone, not only killed: a dying qemu (its guest's memory freed)
	# still holds its cgroup, which is removed below (10 s at most)
	_i=0
	for _p in $_vms; do
		while [ -d "/proc/$_p" ] && [ $_i -lt 100 ]; do
			sleep 0.1; _i=$((_i + 1))
		done
	done
	# the taps of this test's VM sandboxes are persistent (they outlive a
	# berthd restart): delete them, or the next test's sandbox of the
	# same name meets a stale one
	for _c in $(find "$T" -name sandbox.conf 2>/dev/null); do
		_tap=$(sed -n 's/^tap=//p' "$_c" 2>/dev/null)
		[ -n "$_tap" ] && ip link del "$_tap" 2>/dev/null
	done
	# and their cgroups (their VMs are gone; a VM outlives berthd, so
	# its group was not removed): under this test's berthds' parents,
	# berth-<tap_prefix>, which no other test's berthd shares
	for _c in $(find "$T" -name '*.conf' 2>/dev/null); do
		_tp=$(sed -n 's/^tap_prefix  *\([a-z0-9]*\)$/\1/p' "$_c" 2>/dev/null)
		[ -n "$_tp" ] || continue
		for _g in /sys/fs/cgroup/berth-"$_tp" /sys/fs/cgroup/*/berth-"$_tp"; do
			[ -d "$_g" ] || continue
			for _s in "$_g"/*/; do
				[ -d "$_s" ] && rmdir "$_s" 2>/dev/null
			done
			rmdir "$_g" 2>/dev/null
		done
	done
	# at_exit commands, newest first (unmount, delete a namespace)
	if [ -s "$T/atexit" ]; then
		tac "$T/atexit" >"$T/atexit.run"
		while IFS= read -r _c; do eval "$_c"; done <"$T/atexit.run"
	fi
	# Sanitizer builds: a report in any log the script kept (berthd's,
	# testapp's...) fails the script, even when every check passed.
	if _san=$(grep -rlE "$_SAN_PAT" "$T" 2>/dev/null) && [ -n "$_san" ]; then
		for _f in $_san; do
			echo "# sanitizer report in $_f:" >&2
			grep -E -B2 -A30 "$_SAN_PAT" "$_f" | head -n 80 | sed 's/^/# /' >&2
		done
		echo "Bail out! sanitizer report(s) in: $(echo $_san | sed "s|$T/||g")"
		[ $_rc -eq 0 ] && _rc=1
	fi
	if [ -n "${KEEP_TMP:-}" ]; then echo "# kept $T" >&2; else rm -rf "$T"; fi
	exit $_rc
}
# What AddressSanitizer, LeakSanitizer and UBSan print (--enable-asan).
_SAN_PAT='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: |SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer)'
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# at_exit SHELL-COMMAND: run it from the EXIT trap once the processes are
# ended and before $T goes (umount a tmpfs, delete a network namespace).
at_exit() { printf '%s\n' "$*" >>"$T/atexit"; }

# spawn LOGFILE CMD...: run CMD in the background, stdout+stderr to
# LOGFILE; sets SPAWNED to its pid.
spawn() {
	_log=$1; shift
	# The py function would run in a subshell whose pid is not python's:
	# spawn python itself so that killing SPAWNED ends it.
	[ "$1" = py ] && { shift; set -- python3 "$PYTOOL" "$@"; }
	# emptied here, not by the background job's redirection: a wait
	# for a line in it must not find the previous process's
	: >"$_log"
	"$@" >>"$_log" 2>&1 &
	SPAWNED=$!
	echo "$SPAWNED" >>"$T/pids"
}

# wait_for SECONDS CMD...: poll CMD every 50 ms until it succeeds or the
# deadline passes.
wait_for() {
	_secs=$1; shift
	_end=$(( $(date +%s) + _secs ))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
}

# wait_log SECONDS FILE PATTERN [PID]: wait for a line matching PATTERN
# (grep -E); fail early if PID dies.
wait_log() {
	_secs=$1 _f=$2 _pat=$3 _pid=${4:-}
	_end=$(( $(date +%s) + _secs ))
	while :; do
		grep -Eq -- "$_pat" "$_f" 2>/dev/null && return 0
		if [ -n "$_pid" ] && ! kill -0 "$_pid" 2>/dev/null; then
			grep -Eq -- "$_pat" "$_f" 2>/dev/null && return 0
			return 1
		fi
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
}

# wait_gone SECONDS PID: wait for a process to exit.
wait_gone() {
	_secs=$1 _pid=$2
	_end=$(( $(date +%s) + _secs ))
	while kill -0 "$_pid" 2>/dev/null; do
		# a zombie child of ours counts as gone
		case $(awk '{print $3}' "/proc/$_pid/stat" 2>/dev/null) in Z|"") return 0;; esac
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.05
	done
}

# free_port: print a TCP port free on 127.0.0.1 now (the kernel picks it;
# callers bind it right after).
free_port() {
	python3 -c 'import socket
s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ---- testapp ---------------------------------------------------------------
# start_testapp NAME [ARGS...]: start testapp with its request log at
# $T/NAME.reqlog, on TA_ADDR (default 127.0.0.1) and TA_PORT_WANT
# (default 0: testapp picks a free port and says which); sets TA_PORT,
# TA_PID, TA_REQLOG, TA_LOG.
start_testapp() {
	_name=$1; shift
	TA_REQLOG="$T/$_name.reqlog"
	TA_LOG="$T/$_name.log"
	: >"$TA_REQLOG"
	spawn "$TA_LOG" "$TESTAPP" -l "${TA_ADDR:-127.0.0.1}" -p "${TA_PORT_WANT:-0}" \
		-L "$TA_REQLOG" "$@"
	TA_PID=$SPAWNED
	if ! wait_log 10 "$TA_LOG" "listening on" "$TA_PID"; then
		cat "$TA_LOG" >&2
		bail "testapp $_name did not start"
	fi
	TA_PORT=$(sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' "$TA_LOG" | head -n 1)
	[ -n "$TA_PORT" ] || bail "testapp $_name: no port in '$(cat "$TA_LOG")'"
}

# ---- berthd ----------------------------------------------------------------
# metric NAME: a value from berthd's /metrics (workers report once a second)
metric() {
	curl -s --unix-socket "$STATE/control.sock" http://berth/metrics |
		awk -v m="$1" '$1 == m { print $2 }'
}
# metric_is NAME VALUE: succeeds when the metric has that value now
metric_is() { [ "$(metric "$1")" = "$2" ]; }

# berthd_config [EXTRA LINES...]: write $T/berth.conf with fresh ports;
# sets HTTPS_PORT, HTTP_PORT, STATE, CONF, ACME_DIR. Extra arguments are
# appended as config lines (e.g. "timeout response 2s").
# stand_in_builder: template builds from a Dockerfile or an image go to a
# stand-in for vmm/guest/mktemplate-source ($T/stand-in, exported as
# BERTH_MKTEMPLATE_SOURCE: no VM boots). It says what it builds, fails a
# Dockerfile saying FAIL, else makes its version a copy of the minimal
# template (berthd gives builders an environment of their own: the path
# is written in). For the SDK suites; template-source.sh has its own.
stand_in_builder() {
	cat >"$T/stand-in" <<-EOF
	#!/bin/sh
	# NAME FROM SOURCE OUTDIR [ARGS...]
	echo "stand-in: building \$1 from \$2 (\$(wc -c <"\$3") bytes)" >&2
	if [ "\$2" = dockerfile ] && tar -xOf "\$3" ./Dockerfile | grep -q FAIL; then
		echo "stand-in: step 2/2 (RUN false) said: it-failed-here" >&2
		exit 1
	fi
	mkdir -p "\$4" && cp -L "$T/state/templates/default"/* "\$4"/ &&
		echo "stand-in: template \$1 in \$4" >&2
	EOF
	chmod 755 "$T/stand-in"
	BERTH_MKTEMPLATE_SOURCE="$T/stand-in"
	export BERTH_MKTEMPLATE_SOURCE
}

berthd_config() {
	HTTPS_PORT=$(free_port)
	HTTP_PORT=$(free_port)
	while [ "$HTTP_PORT" = "$HTTPS_PORT" ]; do HTTP_PORT=$(free_port); done
	STATE="$T/state"
	CONF="$T/berth.conf"
	ACME_DIR="$T/acme"
	mkdir -p "$STATE" "$ACME_DIR"
	chmod 755 "$ACME_DIR"
	{
		echo "# generated by $(basename "$0")"
		echo "domain $DOMAIN"
		echo "listen https 127.0.0.1:$HTTPS_PORT"
		echo "listen http 127.0.0.1:$HTTP_PORT"
		echo "workers ${WORKERS:-1}"
		echo "user nobody"
		echo "acme_dir $ACME_DIR"
		echo "access_log stderr"
		# VMs only where a test asks (VMM=on): no template build elsewhere
		echo "vmm ${VMM:-off}"
		# VM tests boot the fast busybox guest unless they ask for
		# another (VM_TEMPLATE=debian, or a vm_template/template line)
		echo "vm_template ${VM_TEMPLATE:-minimal}"
		# VM tests boot under TCG whatever the host's KVM looks like
		# (vm-accel.sh tests the automatic choice)
		echo "accel ${ACCEL:-tcg}"
		# the host's table inet berth is programmed only where asked
		echo "egress ${EGRESS:-off}"
		# creates boot unless a test asks for ready snapshots (each
		# berthd would build one: a boot more per test)
		echo "vm_ready_snapshot ${VM_READY:-off}"
		# nor the template builders' ready snapshot after the default's
		# (TEMPLATE_BUILD_READY=on: vm-template-build.sh)
		echo "template_build_ready ${TEMPLATE_BUILD_READY:-off}"
		for _l in "$@"; do echo "$_l"; done
	} >"$CONF"
}

# start_berthd: start berthd on $CONF/$STATE; waits for "ready". Sets
# BERTHD_PID and BERTHD_LOG.
# need_vm [TOOL[:PACKAGE]]...: skips (77) without root, /dev/net/tun,
# qemu-system-x86_64, qemu-img, busybox-static or a TOOL named
need_vm() {
	need_root
	[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
	command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"
	command -v qemu-img >/dev/null 2>&1 || skip_all "qemu-img is not installed (qemu-utils)"
	for _t; do
		case "$_t" in *:*) _p=${_t#*:} ;; *) _p= ;; esac
		command -v "${_t%%:*}" >/dev/null 2>&1 ||
			skip_all "${_t%%:*} is not installed$_p"
	done
	[ -x /bin/busybox ] || skip_all "busybox-static is not installed"
}

# need_static_busybox: skips (77) unless /bin/busybox needs no loader
# (no PT_INTERP): images FROM scratch copy it in
need_static_busybox() {
	python3 -c 'import struct, sys
b = open("/bin/busybox", "rb").read(1 << 16)
if b[:4] != b"\x7fELF" or b[4] != 2: sys.exit(1)
off, = struct.unpack_from("<Q", b, 32)
ent, num = struct.unpack_from("<HH", b, 54)
sys.exit(any(struct.unpack_from("<I", b, off + i * ent)[0] == 3 for i in range(num)))' ||
		skip_all "/bin/busybox is not static (busybox-static)"
}

# wait_debian_built: the default template debian's background build has
# ended well (an hour at most); skips when the apt sources are out of
# reach, bails when it failed otherwise
wait_debian_built() {
	wait_log 3600 "$BERTHD_LOG" "template debian built in|template debian: build failed" "$BERTHD_PID" ||
		bail "the default template's build did not end in an hour"
	grep -q "template debian built in" "$BERTHD_LOG" && return 0
	if grep -qiE 'could not resolve|failed to fetch|temporary failure|unable to connect|connection (refused|timed out)|network is unreachable' \
	    "$BERTHD_LOG"; then
		grep 'template debian:' "$BERTHD_LOG" | tail -n 5 >&2
		skip_all "the debian template cannot be built: the apt sources are unreachable"
	fi
	grep 'template debian:' "$BERTHD_LOG" | tail -n 30 >&2
	bail "berthd's build of the default template debian failed"
}

# etcd_start NAME: a one-member etcd on loopback (client port $CPORT,
# its pid $ETCD_PID), ready
etcd_start() {
	CPORT=$(free_port) PPORT=$(free_port)
	spawn "$T/etcd.log" etcd --name "$1" --data-dir "$T/etcd" \
		--listen-client-urls "http://127.0.0.1:$CPORT" \
		--advertise-client-urls "http://127.0.0.1:$CPORT" \
		--listen-peer-urls "http://127.0.0.1:$PPORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$PPORT" \
		--initial-cluster "$1=http://127.0.0.1:$PPORT"
	ETCD_PID=$SPAWNED
	wait_log 30 "$T/etcd.log" "ready to serve client requests" "$SPAWNED" ||
		{ tail -n 20 "$T/etcd.log" >&2; bail "etcd did not start"; }
}

# fleet_certs HOST...: a fleet CA and each host's certificate (for
# 127.0.0.1) in $T/fleet
fleet_certs() {
	mkdir -p "$T/fleet"
	for _fh; do
		"$top_srcdir/certs/berth-fleet-cert" "$T/fleet" host "$_fh" 127.0.0.1 ||
			bail "berth-fleet-cert $_fh"
	done
	chmod 755 "$T/fleet"
}

start_berthd() {
	BERTHD_LOG="$T/berthd.log"
	_try=1
	# With VMs berthd first builds the guest template (mktemplate):
	# well over 30 s on a loaded machine.
	_rdy=30
	grep -q '^vmm on' "$CONF" 2>/dev/null && _rdy=240
	while :; do
		spawn "$BERTHD_LOG" "$BERTHD" -f "$CONF" -s "$STATE" ${BERTHD_ARGS:-}
		BERTHD_PID=$SPAWNED
		wait_log "$_rdy" "$BERTHD_LOG" "berthd: ready" "$BERTHD_PID" && break
		# A port free_port gave may have been taken meanwhile: new ports.
		if [ $_try -lt 3 ] && ! kill -0 "$BERTHD_PID" 2>/dev/null &&
		   grep -qi 'in use' "$BERTHD_LOG"; then
			_try=$((_try + 1))
			# the port berthd named (listen, control_listen, ...);
			# HTTPS_PORT, HTTP_PORT and CTL_PORT follow it
			_old=$(sed -n 's/.*127\.0\.0\.1:\([0-9][0-9]*\).*in use.*/\1/p' \
				"$BERTHD_LOG" | head -n 1)
			if [ -n "$_old" ] && grep -q "127\.0\.0\.1:$_old\$" "$CONF"; then
				_new=$(free_port)
				sed -i "s/127\.0\.0\.1:$_old\$/127.0.0.1:$_new/" "$CONF"
				[ "$HTTPS_PORT" = "$_old" ] && HTTPS_PORT=$_new
				[ "$HTTP_PORT" = "$_old" ] && HTTP_PORT=$_new
				[ "${CTL_PORT:-}" = "$_old" ] && CTL_PORT=$_new
				continue
			fi
		fi
		tail -n 40 "$BERTHD_LOG" >&2
		bail "berthd did not log ready"
	done
	CA="$STATE/tls/ca.pem"
	[ -s "$CA" ] || bail "berthd made no $CA"
}

# berthd_workers: pids of berthd's worker processes (its children but
# the helpers, whose name is "berthd: dns", "berthd: nflog"...).
berthd_workers() {
	for _w in $(pgrep -P "$BERTHD_PID" | sort -n); do
		case $(cat "/proc/$_w/comm" 2>/dev/null) in "berthd: "*) ;; *) echo "$_w";; esac
	done
}
# berthd_helper NAME: pid of berthd's helper "berthd: NAME" (none: empty).
berthd_helper() { pgrep -P "$BERTHD_PID" -x "berthd: $1"; }

netctl() { "$NETCTL" -s "$STATE" "$@"; }

# host_for PORT SANDBOX
host_for() { echo "$1-$2.$DOMAIN"; }
url_for() { echo "https://$1-$2.$DOMAIN:$HTTPS_PORT"; }

# bcurl ARGS...: curl trusting the dev CA, every *.berth.localhost name
# pinned to 127.0.0.1 on both listeners (curl resolves *.localhost itself,
# but may try ::1 first). HTTP/1.1 unless ARGS say --http2: the tests
# check HTTP/1.1's wire (proxy-h2.sh checks HTTP/2 against it).
bcurl() {
	curl -sS --cacert "$CA" --connect-to "::127.0.0.1:" --max-time "${CURL_MAX_TIME:-30}" \
		--http1.1 "$@"
}

# publish SANDBOX PORT [ARGS...]: add the sandbox if needed, publish the
# port, and wait until a worker routes it (the route table is pushed to
# workers asynchronously). Prints netctl's output. The sandbox's address
# is SB_ADDR (default 127.0.0.1).
publish() {
	_sb=$1 _port=$2; shift 2
	netctl sandbox add "$_sb" --address "${SB_ADDR:-127.0.0.1}" >/dev/null 2>&1
	netctl port publish "$_sb" "$_port" "$@" || return 1
	wait_routed "$_sb" "$_port"
}

# wait_routed SANDBOX PORT: until berthd answers anything but 404 there.
wait_routed() {
	wait_for 10 _routed "$1" "$2"
}
_routed() {
	_c=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$2" "$1")/healthz" 2>/dev/null)
	[ -n "$_c" ] && [ "$_c" != 404 ] && [ "$_c" != 000 ]
}

# py ARGS...: the python helper
py() { python3 "$PYTOOL" "$@"; }

# json_get JSON EXPR: evaluate a python expression on parsed JSON `j`.
json_get() {
	printf '%s' "$1" | python3 -I -c 'import json,sys
j=json.load(sys.stdin)
v=eval(sys.argv[1])
print(v if not isinstance(v,(dict,list)) else json.dumps(v))' "$2"
}

# proc_kb PID FIELD: VmRSS/VmHWM of a process in kB.
proc_kb() { awk -v f="$2:" '$1==f {print $2}' "/proc/$1/status" 2>/dev/null; }

# max_worker_kb FIELD: largest FIELD over berthd and its workers, kB.
max_worker_kb() {
	_m=0
	for _p in "$BERTHD_PID" $(berthd_workers); do
		_v=$(proc_kb "$_p" "$1")
		[ -n "$_v" ] && [ "$_v" -gt "$_m" ] && _m=$_v
	done
	echo "$_m"
}

# berthd_sanitized: true when berthd was built with --enable-asan (or the
# caller says so with BERTH_SANITIZED=1, as .ci/setup's second pass does).
berthd_sanitized() {
	[ "${BERTH_SANITIZED:-0}" = 1 ] && return 0
	ldd "$BERTHD" 2>/dev/null | grep -q 'libasan'
}

# timing NAME MS BASELINE LIMIT: a figure that matters but that a test
# cannot judge on a noisy or loaded machine (an answer time in ms, beside
# BASELINE, the same thing measured quietly in the same run, or "-").
# Printed as a TAP comment and added to $BERTH_TIMING_SUMMARY when set; only
# under BERTH_TIMING_STRICT=1 (`make bench-timing`) is MS <= LIMIT a check.
# Tests assert behaviour and, where time is the behaviour, a generous
# liveness bound of their own.
timing() {
	_r=-
	[ "$3" != - ] && [ "${3:-0}" -gt 0 ] 2>/dev/null &&
		_r=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", a / b }')
	_line="$1: $2 ms (baseline $3 ms, ratio $_r; target <= $4 ms)"
	echo "# timing: $_line"
	[ -n "${BERTH_TIMING_SUMMARY:-}" ] && echo "$_line" >>"$BERTH_TIMING_SUMMARY"
	if [ "${BERTH_TIMING_STRICT:-0}" = 1 ]; then
		if [ "$2" -le "$4" ]; then ok "timing: $_line"; else not_ok "timing: $_line"; fi
	fi
	return 0
}
