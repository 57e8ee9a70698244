#!/bin/sh
# sdk-fork.sh — the SDKs' forks and checkpoints (issue 32) on ONE real
# Debian sandbox made from its template's ready snapshot (the minimal
# template cannot fork: sdk-python.sh and sdk-js.sh assert its Conflict
# and skip these, saying why). One berthd with the debian template and
# VM_READY on, as vm-fork.sh runs it: one ready build, then only
# restores (the sandbox, its forks, its checkpoints), no other boot.
#
# The Python suite's tests/test_fork.py, then the TypeScript one's
# test/fork.test.mjs (built with tsc into $T), each test one TAP line,
# given the sandbox in BERTH_TEST_FORK_SANDBOX and its own token in
# BERTH_TEST_FORK_TOKEN: a fork of the sandbox with a file in /root has
# the file, runs its own exec as itself, and neither side sees the
# other's later writes; the fork's token reaches the fork over TLS and is
# refused its parent; the sandbox's own token forks it into two in one
# call, each fork then spoken to with its own token; a checkpoint taken
# (its size), listed, the sandbox restored to it in place (a later write
# gone) and a new sandbox made from it; typed errors with the API's code
# and field (a fork of an unknown sandbox, into an id that exists, no
# ids, a bad id, from a missing checkpoint; a bad, repeated or missing
# checkpoint name; an external sandbox's fork and checkpoint), nothing
# stored for a refused call. Then: nothing left but the sandbox, no
# sandbox booted, and once it is removed no layer or checkpoint left.
#
# Skips without what vm-fork.sh needs (root, qemu, mmdebstrap) or when
# the debian template cannot be built here (its apt sources out of
# reach); the TypeScript part without node 18+ and tsc.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm mmdebstrap
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VMs run in the normal pass only"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
	skip_all "the Python SDK needs python3 >= 3.9"
PYSDK="$top_srcdir/netctl/sdk/python"
JSSDK="$top_srcdir/netctl/sdk/js"
js_skip=
if ! command -v node >/dev/null 2>&1; then js_skip="node is not installed (nodejs)"
elif ! command -v tsc >/dev/null 2>&1; then js_skip="tsc is not installed (node-typescript)"
elif [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)" -lt 18 ] 2>/dev/null; then
	js_skip="node $(node --version 2>/dev/null) is older than 18"
fi
_t0=$(date +%s)

CTL_PORT=$(free_port)
VMM=on VM_TEMPLATE=debian VM_READY=on berthd_config "tap_prefix bsf" \
	"vm_pool 10.228.0.0/24" "idle_pause never" "idle_suspend never" \
	"control_listen 127.0.0.1:$CTL_PORT" "vm_ready_pool 0" \
	"vm_max_checkpoints 4"
start_berthd
at_exit "rm -rf '$STATE/templates' '$STATE/vms'"
wait_debian_built
wait_log 900 "$BERTHD_LOG" "the default template's ready snapshot [0-9a-f]+( built in|:)" "$BERTHD_PID" ||
	bail "the ready snapshot was not built in 15 minutes"
like "the default template's ready snapshot built" "$(cat "$BERTHD_LOG")" \
	"the default template's ready snapshot [0-9a-f]+ built in [0-9]+ ms"
diag "template and ready snapshot: $(($(date +%s) - _t0)) s"

# the TypeScript SDK, built where the test may write (meanwhile nothing
# else runs: the build is not timed with the suites)
if [ -z "$js_skip" ]; then
	P="$T/js"
	mkdir -p "$P"
	cp -R "$JSSDK/src" "$JSSDK/test" "$JSSDK/package.json" \
		"$JSSDK/tsconfig.json" "$P/" || bail "cannot copy $JSSDK"
	out=$(cd "$P" && tsc -p tsconfig.json 2>&1) || bail "tsc: $out"
fi

SB=sdkf
out=$(netctl sandbox create "$SB" 2>&1) || bail "sandbox create $SB: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
is "sandbox $SB made from the ready snapshot (not booted)" \
	"$(netctl --json sandbox show "$SB" | json_get "$(cat)" 'j["vm"]["created_from"]')" snapshot
check "... its token printed" test -n "$tok"
is "... it runs Debian" "$(netctl sandbox exec "$SB" -- sh -c '. /etc/os-release; echo $ID' </dev/null)" debian

export BERTH_TEST_FORK_SANDBOX="$SB" BERTH_TEST_FORK_TOKEN="$tok"
# the suites' settings come from BERTH_TEST_* (and BERTH_SOCKET for the
# TypeScript one), never from the caller's
unset BERTH_URL BERTH_TOKEN BERTH_CACERT BERTH_TEST_FORK_SKIP

# ---- the Python SDK ----
_t1=$(date +%s)
BERTH_TEST_SOCKET="$STATE/control.sock" BERTH_TEST_URL="https://api.$DOMAIN:$CTL_PORT" \
	BERTH_TEST_CACERT="$CA" PYTHONDONTWRITEBYTECODE=1 \
	python3 "$PYSDK/tests/tap.py" "$T/py.results" test_fork.py 2>"$T/py.err"
src=$?
while IFS= read -r line; do
	case $line in
	"ok "*) ok "python: ${line#ok }" ;;
	"not ok "*) not_ok "python: ${line#not ok }" ;;
	"skip "*) _s=${line#skip }; ok "python: ${_s%% # *} # SKIP ${_s#* # }" ;;
	esac
done <"$T/py.results"
[ -s "$T/py.results" ] || not_ok "the Python suite ran (tap.py wrote no results)"
[ "$src" = 0 ] || diag "$(cat "$T/py.err")"
diag "the Python suite took $(($(date +%s) - _t1)) s"

# ---- the TypeScript SDK ----
if [ -n "$js_skip" ]; then
	ok "fork.test.mjs # SKIP $js_skip"
else
	_t1=$(date +%s)
	BERTH_SOCKET="$STATE/control.sock" BERTH_TEST_CTL_URL="https://api.$DOMAIN:$CTL_PORT" \
		BERTH_TEST_CA="$CA" node --test --test-reporter="$P/test/reporter.mjs" \
		"$P/test/fork.test.mjs" >"$T/js.out" 2>"$T/js.err"
	_rc=$?
	_n0=$_t_n _f0=$_t_fail
	while IFS= read -r _l; do
		case $_l in
		"ok	"*) ok "ts: ${_l#ok	}" ;;
		"skip	"*) _s=${_l#skip	}; ok "ts: ${_s%%	*} # SKIP ${_s#*	}" ;;
		"not ok	"*) not_ok "ts: ${_l#not ok	}" ;;
		"#"*) echo "$_l" >&2 ;;
		esac
	done <"$T/js.out"
	if { [ "$_rc" -ne 0 ] && [ "$_t_fail" -eq "$_f0" ]; } || [ "$_t_n" -eq "$_n0" ]; then
		not_ok "fork.test.mjs ran (node --test exit $_rc)"
		diag "$(tail -n 30 "$T/js.err")"
	fi
	diag "the TypeScript suite took $(($(date +%s) - _t1)) s"
fi

# ---- what is left ----
is "only $SB is left (every fork and checkpoint the suites made removed)" \
	"$(netctl --json sandbox ls | json_get "$(cat)" '" ".join(s["id"] for s in j["sandboxes"])')" "$SB"
is "... with no checkpoint" \
	"$(netctl --json checkpoint ls "$SB" | json_get "$(cat)" 'len(j["checkpoints"])')" 0
is "... and it still answers as itself" "$(netctl sandbox exec "$SB" -- hostname </dev/null)" "$SB"
is "no sandbox was booted: each a restore, a fork or from a checkpoint" \
	"$(grep -E 'sandbox [a-z0-9-]+: created in' "$BERTHD_LOG" |
		grep -cvE 'restored from the ready snapshot|forked from|checkpoint')" 0
diag "$(grep -cE 'sandbox [a-z0-9-]+: created in' "$BERTHD_LOG") sandboxes made, each without a boot"
netctl sandbox rm "$SB" >/dev/null 2>&1
no_layers() { ! ls "$STATE"/vms/.layers/*.qcow2 >/dev/null 2>&1 && ! ls "$STATE"/vms/.layers/*.state >/dev/null 2>&1; }
check "with $SB gone, no layer or captured state is left" wait_for 60 no_layers
check "... nor its checkpoints" wait_for 60 test ! -e "$STATE/vms/.checkpoints/$SB"
diag "sdk-fork.sh took $(($(date +%s) - _t0)) s"
done_testing
