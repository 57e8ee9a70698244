#!/bin/sh
# install.sh — berth as `make install` leaves it (issue 14): the tarball's
# files (make distdir) configured with a fresh --prefix and state dir,
# built and installed; then the source and build trees are deleted and
# only the installed files run:
#  - the generated systemd unit passes `systemd-analyze verify` (skipped,
#    saying so, without systemd-analyze) and names the installed berthd;
#  - its ExecStartPre and ExecStart, run by hand as systemd would run them
#    with no configuration file (systemd is not PID 1 here): Environment=
#    and EnvironmentFile= expanded, UMask=, CapabilityBoundingSet= and
#    NoNewPrivileges= applied with setpriv, the state directory made with
#    StateDirectoryMode=, in a network namespace of its own so that the
#    embedded default's 127.0.0.1:8443 is free. Not emulated: the mount
#    namespace (ProtectSystem= and the like) and the system call filter;
#  - berthd builds the template with the installed mktemplate, init and
#    testapp; the installed netctl (its default state dir) creates a
#    microVM sandbox, publishes its port, and the URL answers;
#  - KillMode=process: SIGTERM to berthd alone (as `systemctl restart`
#    sends it) leaves the VM running, and the next berthd re-adopts it;
#  - vmm auto with a template builder that fails: berthd serves with VMs
#    off and says why; vmm on: it exits with the reason.
# The runs use vm_template minimal (the busybox guest) through the
# unit's EnvironmentFile; the embedded default's debian is not built here.
# Root, qemu, ip netns, setpriv; one VM boot (qemu, TCG).
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_root
need_tool ip curl setpriv make python3 openssl
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"
[ -f "$top_builddir/Makefile" ] || skip_all "$top_builddir is not a configured build tree"
ns=berth-inst-$$
ip netns add "$ns" 2>/dev/null || skip_all "cannot create a network namespace"
at_exit "ip netns del $ns"
ip -n "$ns" link set lo up
in_ns() { ip netns exec "$ns" "$@"; }

P="$T/prefix"
STATE="$T/state"
# The sub-builds are not part of the make that runs this test.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

# ---- make distdir, configure, make, make install -------------------------
if make -s -C "$top_builddir" distdir distdir="$T/src" >"$T/distdir.log" 2>&1; then
	ok "make distdir"
else
	tail -n 30 "$T/distdir.log" >&2
	bail "make distdir failed"
fi
# The flags the tree under test was configured with (--enable-asan in
# .ci/setup's second pass), but this test's prefix and state dir.
eval "set -- $("$top_builddir/config.status" --config)"
for a in "$@"; do
	shift
	case $a in
	--prefix=*|--exec-prefix=*|--with-state-dir=*|--with-systemdsystemunitdir=*|\
	--srcdir=*|--cache-file=*|-C|-q|--quiet|--silent) ;;
	*) set -- "$@" "$a" ;;
	esac
done
mkdir "$T/build"
if (cd "$T/build" && "$T/src/configure" -q --prefix="$P" --with-state-dir="$STATE" "$@" &&
    make -s -j2 && make -s install) >"$T/build.log" 2>&1; then
	ok "configure --prefix=\$T/prefix --with-state-dir=\$T/state${*:+ $*}; make; make install"
else
	tail -n 40 "$T/build.log" >&2
	bail "the build or the install failed"
fi
UNIT="$P/lib/systemd/system/berthd.service"
missing=
for f in sbin/berthd bin/netctl libexec/berth/mktemplate libexec/berth/init \
    libexec/berth/mktemplate-debian libexec/berth/debian/init \
    libexec/berth/debian/initramfs-init libexec/berth/testapp share/berth/berth-mkcert share/berth/openssl.cnf \
    share/man/man8/berthd.8 share/man/man8/netctl.8 share/man/man5/berth.conf.5 \
    share/bash-completion/completions/netctl lib/systemd/system/berthd.service; do
	[ -e "$P/$f" ] || missing="$missing $f"
done
is "make install installed berthd, netctl, mktemplate, init, testapp, berth-mkcert, man pages, unit, completion" "$missing" ""
# Gone: nothing may come from the trees the binaries were built in.
rm -rf "$T/src" "$T/build"
ok "source and build trees deleted"

# ---- the unit ---------------------------------------------------------------
if command -v systemd-analyze >/dev/null 2>&1; then
	# MANPATH: Documentation=man:... must name installed pages
	check "systemd-analyze verify berthd.service" \
		env MANPATH="$P/share/man:" systemd-analyze verify "$UNIT"
else
	ok "systemd-analyze verify berthd.service # SKIP systemd-analyze not installed"
fi
key() { sed -n "s/^$1=//p" "$UNIT"; }
like "ExecStart runs the installed berthd" "$(key ExecStart)" "^$P/sbin/berthd "
is "KillMode=process (VMs survive a restart)" "$(key KillMode)" process
is "UMask=0022" "$(key UMask)" 0022

# ExecStartPre/ExecStart as systemd runs them: Environment= and an
# EnvironmentFile= that exists give the variables; an unquoted $VAR
# splits into words. Then the unit's UMask, bounding set, no_new_privs.
unit_env() {
	key Environment
	for f in $(key EnvironmentFile); do
		f=${f#-}
		[ -r "$f" ] && grep -v '^[[:space:]]*#' "$f"
	done
}
expand() {
	( eval "$(unit_env | sed 's/^/export /')"; eval "echo $1" )
}
caps=$(key CapabilityBoundingSet | tr 'A-Z' 'a-z' | sed 's/cap_/+/g; s/ /,/g')
[ "$(key NoNewPrivileges)" = yes ] && nnp=--no-new-privs || nnp=
run_unit() {   # run_unit LOG EXEC-LINE: in the namespace, as systemd would
	spawn "$1" ip netns exec "$ns" $TRACE setpriv $nnp --bounding-set "-all,$caps" \
		sh -c "umask $(key UMask); exec $(expand "$2")"
}
# The first start runs under strace (normal builds): every system call of
# berthd, its workers and helpers, mktemplate and the VM's qemu must be
# one the unit's SystemCallFilter= allows.
BERTHD="$P/sbin/berthd"
TRACE=
if berthd_sanitized; then
	trace_skip="sanitizer build (ASan makes calls of its own)"
elif ! command -v strace >/dev/null 2>&1; then
	trace_skip="strace not installed"
elif ! command -v systemd-analyze >/dev/null 2>&1; then
	trace_skip="systemd-analyze not installed (it expands @groups)"
else
	TRACE="strace -f -qq -c -o $T/syscalls"
fi
# StateDirectory=: systemd makes it with StateDirectoryMode= first.
mkdir -m "$(key StateDirectoryMode)" "$STATE"
is "the unit's ExecStart with no config file: no -f" \
	"$(expand "$(key ExecStart)")" "$P/sbin/berthd -s $STATE"
out=$(in_ns setpriv $nnp --bounding-set "-all,$caps" sh -c "exec $(expand "$(key ExecStartPre)")" 2>&1)
like "ExecStartPre (berthd -n) accepts the embedded default" "$out" "embedded default\) OK"
# The embedded default's template is debian (minutes to build, and a
# slower boot): the runs below take the busybox one through the unit's
# EnvironmentFile, as an operator would (vm-debian.sh boots debian).
mkdir -p "$P/etc/default" "$P/etc/berth"
echo "vm_template minimal" >"$P/etc/berth/berth.conf"
echo "BERTHD_OPTS=\"-f $P/etc/berth/berth.conf\"" >"$P/etc/default/berthd"
is "... and BERTHD_OPTS from the EnvironmentFile reaches it" \
	"$(expand "$(key ExecStart)")" "$P/sbin/berthd -s $STATE -f $P/etc/berth/berth.conf"

start_unit() {  # start_unit N: ExecStart by hand, wait for ready
	BERTHD_LOG="$T/berthd$1.log"
	run_unit "$BERTHD_LOG" "$(key ExecStart)"
	BERTHD_PID=$SPAWNED
	if [ -n "$TRACE" ]; then   # berthd is strace's child
		STRACE_PID=$SPAWNED
		wait_for 10 pgrep -P "$STRACE_PID" || bail "strace started nothing"
		BERTHD_PID=$(pgrep -P "$STRACE_PID")
		TRACE=
	fi
	# the first start builds the template: well over 30 s on a busy machine
	if ! wait_log 240 "$BERTHD_LOG" "berthd: ready" "$BERTHD_PID"; then
		tail -n 40 "$BERTHD_LOG" >&2
		bail "the unit's ExecStart did not start berthd"
	fi
}
start_unit 1
ok "the unit's ExecStart, run by hand, starts the installed berthd"
CA="$STATE/tls/ca.pem"
like "template built by the installed mktemplate" "$(cat "$BERTHD_LOG")" \
	"building the default guest template in $STATE/templates/default"
vmline=$(grep 'berthd: vmm: ' "$BERTHD_LOG")
unlike "VMs on (vmm auto)" "$vmline" "vmm: off"
[ -n "$vmline" ] || bail "no 'vmm:' line in $(cat "$BERTHD_LOG")"
case $vmline in *"vmm: off"*) bail "no VMs: $vmline";; esac

# ---- a VM through the installed netctl ------------------------------------
NC="$P/bin/netctl"   # no -s, no $BERTH_STATE_DIR: its default must agree
unset BERTH_STATE_DIR
# The VM's qemu (jailed: its command line names no host path but its name)
SB=inst-$$
qemu() { pgrep -f "qemu-system-x86_64 -name berth-$SB " || true; }
at_exit 'for p in $(pgrep -f "qemu-system-x86_64 -name berth-'"$SB"' "); do kill -KILL $p; done'
if "$NC" sandbox create "$SB" >"$T/create.out" 2>&1; then
	ok "installed netctl (default state dir) creates a microVM sandbox"
else
	cat "$T/create.out" >&2
	tail -n 30 "$BERTHD_LOG" >&2
	bail "sandbox create failed"
fi
url=$("$NC" port publish "$SB" 8080 2>&1)
is "port publish prints the URL" "$url" "https://8080-$SB.berth.localhost:8443/"
get() { in_ns curl -sS --max-time 30 --cacert "$CA" "$url$1"; }
info() { get info | json_get "$(cat)" 'j["pid"], j["boot_id"]'; }
# the route reaches the workers asynchronously
routed() {
	[ "$(in_ns curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
		--cacert "$CA" "${url}healthz")" = 200 ]
}
check "the route reaches the workers" wait_for 20 routed
like "the URL answers from the guest's test app" "$(get "")" "berth test app"
i1=$(info)
like "guest /info" "$i1" '^\([0-9]+'

# ---- systemctl restart with KillMode=process -------------------------------
q1=$(qemu)
[ -n "$q1" ] || bail "no qemu for sandbox $SB"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not end on SIGTERM"
check "SIGTERM to berthd alone leaves the VM running" kill -0 "$q1"
start_unit 2
like "the restarted berthd re-adopts the VM" "$(cat "$BERTHD_LOG")" "re-adopted 1 sandbox"
is "same qemu" "$(qemu)" "$q1"
is "same guest processes answer" "$(info)" "$i1"
check "sandbox rm" "$NC" sandbox rm "$SB"
none() { [ -z "$(qemu)" ]; }
check "no qemu left" wait_for 20 none
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not end on SIGTERM"

# strace ends with the last process it traced (the first berthd, then the
# VM, which outlived it): its summary lists the system calls made.
if [ -n "${STRACE_PID:-}" ]; then
	wait_gone 30 "$STRACE_PID" || bail "strace did not end"
	out=$(python3 - "$T/syscalls" "$(key SystemCallFilter)" <<'PY'
import re, subprocess, sys
groups, cur = {}, None
for line in subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                           text=True).stdout.splitlines():
    if line.startswith("@"):
        cur = groups.setdefault(line.strip(), [])
    elif cur is not None and line.strip() and not line.strip().startswith("#"):
        cur.append(line.strip())
def expand(names, seen):
    out = set()
    for n in names:
        if n.startswith("@"):
            if n not in seen:
                seen.add(n)
                out |= expand(groups.get(n, []), seen)
        else:
            out.add(n)
    return out
allowed = expand(sys.argv[2].split(), set())
used = set()
for line in open(sys.argv[1]):
    f = line.split()
    if f and re.match(r"^[0-9.]+$", f[0]) and f[-1] != "total":
        used.add(f[-1])
print("%d calls;" % len(used), "outside the filter:", " ".join(sorted(used - allowed)) or "none")
PY
)
	like "every system call made is in the unit's SystemCallFilter= ($out)" "$out" "outside the filter: none$"
else
	ok "system calls within SystemCallFilter= # SKIP $trace_skip"
fi

# ---- a template that cannot be built ---------------------------------------
cat >"$T/failing-mktemplate" <<'EOF'
#!/bin/sh
echo "mktemplate: no /boot/vmlinuz-* with modules (install linux-image-amd64)" >&2
exit 1
EOF
chmod 755 "$T/failing-mktemplate"
spawn "$T/berthd-auto.log" ip netns exec "$ns" env BERTH_MKTEMPLATE="$T/failing-mktemplate" \
	"$P/sbin/berthd" -f "$P/etc/berth/berth.conf" -s "$T/state-auto"
apid=$SPAWNED
if wait_log 60 "$T/berthd-auto.log" "berthd: ready" "$apid"; then
	ok "vmm auto, template build fails: berthd still starts"
else
	not_ok "vmm auto, template build fails: berthd still starts"
	diag "$(tail -n 20 "$T/berthd-auto.log")"
fi
like "... with VMs off and the builder's reason" "$(grep 'vmm: ' "$T/berthd-auto.log")" \
	'vmm: off \(template: .*failed: mktemplate: no /boot/vmlinuz-\* with modules'
kill -TERM "$apid"
wait_gone 30 "$apid"
printf 'vmm on\nvm_template minimal\n' >"$T/on.conf"
rc=0
in_ns timeout 60 env BERTH_MKTEMPLATE="$T/failing-mktemplate" "$P/sbin/berthd" -f "$T/on.conf" \
	-s "$T/state-on" >"$T/berthd-on.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && ok "vmm on, template build fails: berthd exits ($rc)" ||
	not_ok "vmm on, template build fails: berthd exits"
like "... saying why" "$(cat "$T/berthd-on.log")" "fatal: vmm: template: .*mktemplate: no /boot"
done_testing
