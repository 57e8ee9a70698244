#!/bin/sh
# sdk-js.sh — the TypeScript SDK (netctl/sdk/js, @berth/sdk) against a real
# berthd: built with tsc into $T, packed (npm pack, dist/ built by
# prepack) and installed from the tarball, its node --test suites run,
# each of their tests one TAP line here. test/api.test.mjs against an
# API-only berthd (its health; external sandboxes with testapp as
# upstream: their events, no console, a published port fetched through
# berthd, egress rules, a sandbox token over control_listen refused
# another sandbox, typed errors: not found, bad request naming the
# field, conflict, no berthd), then
# test/admin.test.mjs on the same berthd (tokens listed, shown, rotated
# and revoked, a sandbox's token rotating itself; the global policy set
# and refused; every port; the OpenAPI document; templates added, shown
# and removed, builds refused as a berthd without VMs refuses them, a
# context streamed as a tar meanwhile; fleet calls answered 404); then
# on a berthd with a VMM, test/build.test.mjs: template builds from a
# context directory, cached, failing, from an image file and a Buffer,
# followed to their end (the builder a stand-in: no VM boots); then
# test/vm.test.mjs against one real VM of the minimal template (exec
# status and output, stdin, a timeout, the streamed exec as a
# conversation, files, watch events, a 100 MB round trip with bounded
# client memory, a detached busybox httpd on its published port,
# detached output, a detached shell on a terminal attached to, typed to
# and detached from, the guest console read and followed, health with
# VMs, pause and resume with their events, a fork and a checkpoint refused
# with a ConflictError: the minimal template has no root overlay, suspend
# then the next exec wakes it, bench_exec.mjs), and the README's example
# as written
# with the installed package. Skips without node (18 or later) or tsc
# (node-typescript); the VM part without qemu.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
command -v node >/dev/null 2>&1 || skip_all "node is not installed (nodejs)"
command -v tsc >/dev/null 2>&1 || skip_all "tsc is not installed (node-typescript)"
_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
[ "${_major:-0}" -ge 18 ] 2>/dev/null || skip_all "node $(node --version 2>/dev/null) is older than 18"

# ---- the package, built where the test may write ----
SDK="$top_srcdir/netctl/sdk/js"
P="$T/sdk"
mkdir -p "$P"
cp -R "$SDK/src" "$SDK/test" "$SDK/package.json" "$SDK/tsconfig.json" \
	"$SDK/README.md" "$SDK/bench_exec.mjs" "$P/" || bail "cannot copy $SDK"
out=$(cd "$P" && tsc -p tsconfig.json 2>&1) || bail "tsc: $out"
ok "tsc builds the SDK"
check "dist/ has the module and its types" test -s "$P/dist/index.js" -a -s "$P/dist/index.d.ts"

# npm pack: prepack builds dist/ again; the tarball installs and imports
if command -v npm >/dev/null 2>&1; then
	rm -rf "$P/dist"
	if out=$(cd "$P" && HOME="$T" npm pack --silent 2>&1); then
		tgz="$P/$(printf '%s\n' "$out" | tail -n 1)"
		mkdir -p "$T/app"
		echo '{"name":"app","version":"1.0.0","type":"module"}' >"$T/app/package.json"
		out=$(cd "$T/app" && HOME="$T" npm install --silent --offline --no-audit --no-fund "$tgz" 2>&1 &&
			node -e 'import("@berth/sdk").then((m) => console.log(typeof m.Sandbox.create, typeof m.NotFoundError))' 2>&1)
		is "npm pack makes a tarball that installs and imports" "$out" "function function"
	else
		not_ok "npm pack"; diag "$out"
	fi
	[ -s "$P/dist/index.js" ] || bail "prepack built no dist/"
else
	ok "npm pack # SKIP npm is not installed"
fi

# run_suite FILE: node --test on one suite, each of its tests a TAP line
run_suite() {
	node --test --test-reporter="$P/test/reporter.mjs" "$P/test/$1" \
		>"$T/$1.out" 2>"$T/$1.err"
	_rc=$?
	_n0=$_t_n _f0=$_t_fail
	while IFS= read -r _l; do
		case $_l in
		"ok	"*) ok "$1: ${_l#ok	}";;
		"skip	"*) _s=${_l#skip	}; ok "$1: ${_s%%	*} # SKIP ${_s#*	}";;
		"not ok	"*) not_ok "$1: ${_l#not ok	}";;
		"# sdk: "*) echo "$_l";;
		"#"*) echo "$_l" >&2;;
		esac
	done <"$T/$1.out"
	# node failed with no test failing (a crash), or ran none
	if { [ "$_rc" -ne 0 ] && [ "$_t_fail" -eq "$_f0" ]; } || [ "$_t_n" -eq "$_n0" ]; then
		not_ok "$1 ran (node --test exit $_rc)"
		diag "$(tail -n 30 "$T/$1.err")"
	fi
}

# ---- API only: external sandboxes ----
CTL_PORT=$(free_port)
berthd_config "control_listen 127.0.0.1:$CTL_PORT"
start_berthd
start_testapp up
export BERTH_SOCKET="$STATE/control.sock"
export BERTH_TEST_CTL_URL="https://api.$DOMAIN:$CTL_PORT"
export BERTH_TEST_CA="$CA"
export BERTH_TEST_UPSTREAM_PORT="$TA_PORT"
unset BERTH_URL BERTH_TOKEN BERTH_CACERT
run_suite api.test.mjs
# the admin calls on the same berthd: tokens, the global policy, every
# port, the OpenAPI document, templates (builds refused: no VMM), fleet
# calls (404: not in fleet mode); the SDK's ustar writer read by tar
run_suite admin.test.mjs
# forks and checkpoints need a template with a ready snapshot: each of
# test/fork.test.mjs's tests skips here saying so (sdk-fork.sh runs them
# on a Debian sandbox)
run_suite fork.test.mjs

# ---- one real VM ----
_vm_skip=
if [ ! -c /dev/net/tun ]; then _vm_skip="no /dev/net/tun"
elif ! command -v qemu-system-x86_64 >/dev/null 2>&1; then _vm_skip="qemu-system-x86_64 is not installed"
elif ! command -v qemu-img >/dev/null 2>&1; then _vm_skip="qemu-img is not installed (qemu-utils)"
elif [ ! -x /bin/busybox ]; then _vm_skip="busybox-static is not installed"
fi
if [ -n "$_vm_skip" ]; then
	ok "build.test.mjs # SKIP $_vm_skip"
	ok "vm.test.mjs # SKIP $_vm_skip"
else
	kill "$BERTHD_PID"
	wait_gone 30 "$BERTHD_PID" || bail "berthd did not end"
	rm -rf "$STATE"
	# builds from a Dockerfile or an image: no VM boots (lib.sh)
	stand_in_builder
	VMM=on berthd_config "tap_prefix bsj" "vm_pool 10.229.0.0/24" \
		"idle_pause never" "idle_suspend never"
	start_berthd
	at_exit "rm -rf '$STATE/templates' '$STATE/vms'"
	export BERTH_SOCKET="$STATE/control.sock" BERTH_TEST_CA="$CA"
	# template builds through the SDK, the stand-in building
	export BERTH_TEST_STAND_IN="$T/stand-in"
	run_suite build.test.mjs
	export BERTH_TEST_VM_ID=sdkvm
	run_suite vm.test.mjs

	# the README's example, as written, with the package npm installed
	if [ -s "$T/app/node_modules/@berth/sdk/dist/index.js" ]; then
		sed -n '/^<!-- example.mjs/,/^```$/p' "$SDK/README.md" |
			sed '1,2d;$d' >"$T/app/example.mjs"
		out=$(cd "$T/app" && NODE_EXTRA_CA_CERTS="$CA" timeout 300 \
			node --require "$P/test/localhost.cjs" example.mjs 2>&1)
		like "the README's example runs as written" "$(printf '%s' "$out" | tr '\n' ' ')" \
			"uname: exit 0, Linux.*fetched: hello from the sandbox.*state: suspended.*awake \(woken in [1-9][0-9]* ms\)"
		diag "$out"
	else
		ok "the README's example # SKIP the package was not installed (npm)"
	fi
fi

done_testing
