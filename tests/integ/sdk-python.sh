#!/bin/sh
# sdk-python.sh — berth's Python SDK (netctl/sdk/python) against a real
# berthd: its unittest suite (netctl/sdk/python/tests), one TAP line per
# test, run by tests/tap.py with what the suite needs in BERTH_TEST_*.
#
# Without a guest (external sandboxes, --address 127.0.0.1, the testapp
# as their upstream): create, get, list, the context manager; a port
# published and its URL fetched through berthd with the dev CA; egress
# rules' shapes; the TLS listener with an admin token (keep-alive) and a
# sandbox's token (its own sandbox only: Forbidden elsewhere); typed
# errors (NotFound with its code, BadRequest naming the field, Conflict,
# Unauthorized, ConnectionError; no console for an external sandbox:
# NotFound, Forbidden to its token). The admin calls (tests/test_admin.py)
# on the same berthd, no VM booted for them: tokens listed, shown,
# rotated (the old secret then 401) and revoked, a sandbox's token
# rotating itself and refused another's; the global policy put and read
# back, a bad one naming its field, a sandbox token's put refused; every
# port with its URL; the OpenAPI document; templates added, shown and
# removed, 404s; builds refused as this berthd refuses them (no VMM:
# Conflict; a VMM: a bad request answered before a builder runs), a
# context streamed as a tar meanwhile; fleet calls answered 404. With
# a VMM, template builds from a context (a directory streamed as a tar)
# and from an image file, followed to their end, and one that fails
# (TemplateBuildFailed with the builder's reason): a stand-in builder,
# no VM booted.
#
# With one shared minimal microVM (qemu TCG; skipped with the reason
# when the host cannot run one): exec's status, signal, env, cwd,
# timeout and stdin; the streamed exec written to as it answers; a
# detached shell on a terminal attached to and detached from; the guest
# console from its boot, its end, a line the guest writes followed, a
# bad offset refused; a detached busybox httpd reached on its published
# port; 100 MB written and read
# back streamed while the Python process's peak RSS stays far below
# that; mkdir/list/move/remove; a watch seeing a file written; exec,
# streamed exec and files over TLS with the sandbox's own token; a fork
# and a checkpoint refused (Conflict: the minimal template has no root
# overlay; test_fork.py skips here, saying so: sdk-fork.sh runs it on a
# Debian sandbox); suspend, then the next exec (and a file transfer)
# wakes it.
#
# Then the package README's example as written (a VM of its own), and
# `pip install --no-build-isolation` of a copy of the package (Debian's
# pip, setuptools and wheel, offline) and an import from there.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
	skip_all "the SDK needs python3 >= 3.9"
SDK="$top_srcdir/netctl/sdk/python"

# the guest tests need what need_vm checks; without it they skip
# (SDK_NO_VM=1: the API part only, for a quick run)
vm_skip=
if [ "${SDK_NO_VM:-0}" = 1 ]; then vm_skip="SDK_NO_VM=1"
elif [ ! -c /dev/net/tun ]; then vm_skip="no /dev/net/tun"
elif ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	vm_skip="qemu-system-x86_64 is not installed"
elif ! command -v qemu-img >/dev/null 2>&1; then
	vm_skip="qemu-img is not installed (qemu-utils)"
elif [ ! -x /bin/busybox ]; then vm_skip="busybox-static is not installed"
fi

CTL_PORT=$(free_port)
if [ -z "$vm_skip" ]; then
	# builds from a Dockerfile or an image: no VM boots (lib.sh)
	stand_in_builder
	VMM=on berthd_config "tap_prefix bsp" "vm_pool 10.230.0.0/24" \
		"idle_pause never" "idle_suspend never" \
		"control_listen 127.0.0.1:$CTL_PORT"
else
	berthd_config "control_listen 127.0.0.1:$CTL_PORT"
fi
start_berthd
start_testapp app
admin=$(netctl token create --admin | head -n 1)
[ -n "$admin" ] || bail "no admin token"

BERTH_TEST_SOCKET="$STATE/control.sock"
BERTH_TEST_URL="https://api.$DOMAIN:$CTL_PORT"
BERTH_TEST_CACERT="$CA"
BERTH_TEST_ADMIN="$admin"
BERTH_TEST_APP_PORT="$TA_PORT"
BERTH_TEST_VM=0
BERTH_TEST_VM_SKIP="$vm_skip"
[ -z "$vm_skip" ] && BERTH_TEST_VM=1
export BERTH_TEST_SOCKET BERTH_TEST_URL BERTH_TEST_CACERT BERTH_TEST_ADMIN \
	BERTH_TEST_APP_PORT BERTH_TEST_VM BERTH_TEST_VM_SKIP
# the suite's own settings come from BERTH_TEST_*, never from the caller's
unset BERTH_URL BERTH_TOKEN BERTH_CACERT BERTH_SOCKET

# the suite writes no bytecode into the source tree (distcheck: read-only)
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
_t0=$(date +%s)
python3 "$SDK/tests/tap.py" "$T/results" 2>"$T/suite.err"
src=$?
while IFS= read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"not ok "*) not_ok "${line#not ok }" ;;
	"skip "*) _s=${line#skip }; ok "${_s%% # *} # SKIP ${_s#* # }" ;;
	esac
done <"$T/results"
[ -s "$T/results" ] || not_ok "the suite ran (tap.py wrote no results)"
[ "$src" = 0 ] || diag "$(grep -v '^NOTE: ' "$T/suite.err")"
diag "$(sed -n 's/^NOTE: //p' "$T/suite.err")"
diag "the suite took $(($(date +%s) - _t0)) s"

# the README's example, as written (a VM of its own, after the suite's
# is gone): its prints say it ran, served and woke
if [ -z "$vm_skip" ]; then
	sed -n '/^## Example/,/^## /p' "$SDK/README.md" |
		sed -n '/^```python$/,/^```$/p' | sed '1d;$d' >"$T/example.py"
	out=$(cd "$T" && BERTH_SOCKET="$STATE/control.sock" BERTH_CACERT="$CA" \
		PYTHONPATH="$SDK" timeout 300 python3 example.py 2>&1)
	is "the README's example runs as written" "$(printf '%s\n' "$out" |
		sed -E 's/^exit 0 kernel .+/exit 0 kernel K/; s/sb-[0-9a-f]{8}/sb-X/
			s/wake of [1-9][0-9]* ms$/wake of N ms/')" \
		"exit 0 kernel K
https://8000-sb-X.$DOMAIN:$HTTPS_PORT/ 200 hello from a sandbox
awake after a wake of N ms"
else
	ok "the README's example # SKIP $vm_skip"
fi

# the package installs with Debian's pip (python3-pip brings wheel),
# offline, without build isolation (which would fetch setuptools); from
# a copy: pip builds in place. --target: Debian's python is externally
# managed (PEP 668).
pip_py=
for _p in /usr/bin/python3 python3; do
	"$_p" -m pip --version >/dev/null 2>&1 &&
		"$_p" -c 'import setuptools, wheel' 2>/dev/null && { pip_py=$_p; break; }
done
if [ -n "$pip_py" ]; then
	cp -R "$SDK" "$T/sdk"
	chmod -R u+w "$T/sdk"
	if out=$("$pip_py" -m pip install --no-build-isolation --no-index \
	    --no-deps --target "$T/site" "$T/sdk" 2>&1); then
		is "pip install --no-build-isolation; the package imports" \
			"$(cd / && PYTHONPATH="$T/site" "$pip_py" -c 'import berth, os
print(berth.Client.__module__, os.path.exists(os.path.join(os.path.dirname(berth.__file__), "py.typed")))')" \
			"berth.client True"
	else
		not_ok "pip install --no-build-isolation"
		diag "$out"
	fi
else
	ok "pip install # SKIP no python3 with pip, setuptools and wheel"
fi

done_testing
