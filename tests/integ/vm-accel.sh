#!/bin/sh
# vm-accel.sh — `accel auto` on every kind of host these machines are:
#  - KVM looks usable but is not: /dev/kvm exists and the long-mode probe
#    may pass, while qemu as the VM user fails ("Permission denied", or
#    aborts on an MSR) or the guest kernel hangs. A qemu wrapper plays that
#    host: under `-accel kvm` it fails at once, or hangs; under TCG it runs
#    the real qemu. The probe is skipped (BERTH_KVM_PROBE=skip) so the
#    trial boot runs whatever this machine's KVM does.
#  - no /dev/kvm at all: the trial cannot even start (the jail has no node
#    to bind), which is a failed trial like the others; and without the
#    skip the probe alone rules KVM out.
# Both are played on every machine, whatever its own /dev has: berthd runs
# in a mount namespace of its own whose /dev is the host's with kvm either
# absent or a stand-in (/dev/null, which the wrapper never opens). Each
# time the sandbox must come up under TCG, serve its page, and say why in
# an `accel` event; the verdict is cached, so the next boot does not try
# KVM again. Four VM boots (qemu, TCG) and one restore.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
REAL=$(command -v qemu-system-x86_64) || skip_all "qemu-system-x86_64 is not installed"

# The wrapper runs in each VM's jail as its user: its directory is bound
# there read-only, and it sees nothing else of $T, so its mode is written
# into it.
W="$T/bin"
mkdir -p "$W"
wrapper() {	# MODE: fail | hang
	cat >"$W/qemu-system-x86_64" <<EOF
#!/bin/sh
# qemu on a host whose KVM is broken (vm-accel.sh)
case " \$* " in
*" -accel kvm "*)
	case $1 in
	fail)	echo "qemu-system-x86_64: -accel kvm: failed to initialize kvm: Permission denied" >&2
		exit 1 ;;
	hang)	exec sleep 600 ;;
	esac ;;
esac
exec "$REAL" "\$@"
EOF
	chmod 755 "$W" "$W/qemu-system-x86_64"
}
wrapper fail
PATH="$W:$PATH"
export PATH BERTH_KVM_PROBE=skip
need_tool unshare nsenter mount umount

# berthd with /dev as the host's but for kvm: $T/berthd-kvm-absent (no
# node) or $T/berthd-kvm-standin (/dev/null in its place, so the jail can
# bind it). The same pid: unshare and sh exec berthd.
cat >"$T/privdev" <<'PRIVDEV'
#!/bin/sh
# in a new mount namespace: a tmpfs /dev holding the host's entries
set -e
mode=$1 old=$2; shift 2
mount --rbind /dev "$old"
mount -t tmpfs -o mode=755,nosuid berthdev /dev
for e in "$old"/* "$old"/.[!.]*; do
	[ -e "$e" ] || [ -L "$e" ] || continue
	n=${e##*/}
	[ "$n" = kvm ] && continue
	if [ -L "$e" ]; then cp -P "$e" "/dev/$n"
	elif [ -d "$e" ]; then mkdir "/dev/$n"; mount --rbind "$e" "/dev/$n"
	else : >"/dev/$n"; mount --bind "$e" "/dev/$n"; fi
done
if [ "$mode" = standin ]; then : >/dev/kvm; mount --bind "$old/null" /dev/kvm; fi
umount -l "$old"
exec "$@"
PRIVDEV
for m in absent standin; do
	mkdir -p "$T/olddev-$m"
	cat >"$T/berthd-kvm-$m" <<WRAP
#!/bin/sh
exec unshare -m --propagation private sh "$T/privdev" $m "$T/olddev-$m" "$BERTHD" "\$@"
WRAP
	chmod 755 "$T/berthd-kvm-$m"
done
if [ -e /dev/kvm ]; then
	echo "# this host has /dev/kvm: the host without it is played in a mount namespace"
else
	echo "# this host has no /dev/kvm: the host whose KVM fails is played with a stand-in node"
fi

# KVM trials of SANDBOX: its accel events
kvm_calls() { netctl sandbox events "$1" | grep -c ' accel ' || true; }
serves() {	# SANDBOX: its test app answers through berthd
	netctl port publish "$1" 8080 >/dev/null && wait_routed "$1" 8080 &&
		bcurl "$(url_for 8080 "$1")/info" | grep -q '"boot_id"'
}

# ---- qemu fails at once under KVM --------------------------------------------
VMM=on ACCEL=auto berthd_config "tap_prefix bac" "vm_pool 10.221.0.0/24" \
	"idle_pause never" "idle_suspend never"
# Another berthd on this host (another state dir, the same tap_prefix and
# vm_pool) holds the first index's tap and the second's gateway address:
# both are passed over, never a failed create.
ip tuntap add bac0 mode tap && at_exit "ip link del bac0"
ip tuntap add bacx9 mode tap && at_exit "ip link del bacx9"
ip addr add 10.221.0.5/30 dev bacx9
BERTHD="$T/berthd-kvm-standin"
start_berthd
like "before any boot berthd says KVM is not proven" "$(grep 'vmm: ' "$BERTHD_LOG")" \
	'KVM: not proven yet'
check "create a1 (KVM fails, TCG boots)" netctl sandbox create a1
like "a1 runs" "$(netctl sandbox ls)" 'a1 +running'
like "a tap name and an address someone else holds were passed over" \
	"$(tr "\n" " " <"$STATE/vms/a1/sandbox.conf")" 'tap=bac2 guest_ip=10\.221\.0\.10 '
check "a1 serves its page" serves a1
is "KVM was tried once" "$(kvm_calls a1)" 1
like "then TCG booted it" "$(cat "$STATE/vms/a1/sandbox.conf")" 'accel=tcg'
ev=$(netctl sandbox events a1)
like "an accel event names the failure" "$ev" 'accel +failed .*Permission denied.*using TCG'
like "the log says it" "$(cat "$BERTHD_LOG")" 'accel failed: trial boot of a1 under KVM failed'
like "the verdict is cached in the state dir" "$(cat "$STATE/vms/accel.cache")" '^tcg	'
like "a1 records its accelerator" "$(cat "$STATE/vms/a1/sandbox.conf")" 'accel=tcg'
check "suspend a1" netctl sandbox suspend a1
check "a1 wakes on a request (restore under TCG)" serves a1
is "the restore did not try KVM" "$(kvm_calls a1)" 1

kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
start_berthd
like "after a restart berthd knows the verdict" "$(grep 'vmm: ' "$BERTHD_LOG" | tail -n 1)" \
	'TCG: cached verdict: trial boot of a1'
check "create a2" netctl sandbox create a2
is "a2 booted without trying KVM again" "$(kvm_calls a2)" 0
check "a2 serves its page" serves a2
for s in a1 a2; do netctl sandbox rm $s >/dev/null; done
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"

# ---- the guest hangs under KVM -------------------------------------------------
wrapper hang
rm -f "$STATE/vms/accel.cache"
export BERTH_KVM_TRIAL_MS=3000
start_berthd
check "create h1 (KVM hangs, TCG boots)" netctl sandbox create h1
like "h1 runs" "$(netctl sandbox ls)" 'h1 +running'
like "the event says the trial missed its deadline" "$(netctl sandbox events h1)" \
	'accel +failed .*not ready within 3000 ms under KVM'
is "KVM tried once, then TCG" "$(kvm_calls h1)" 1
check "the hung qemu was ended" sh -c "! pgrep -f '^sleep 600'"
check "h1 serves its page" serves h1
netctl sandbox rm h1 >/dev/null
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"

# ---- no /dev/kvm, the trial forced: it cannot start, TCG boots --------------
rm -f "$STATE/vms/accel.cache"
unset BERTH_KVM_TRIAL_MS
BERTHD="$T/berthd-kvm-absent"
start_berthd
check "berthd runs, and sees no /dev/kvm" sh -c "kill -0 $BERTHD_PID && ! nsenter -t $BERTHD_PID -m test -e /dev/kvm"
if out=$(netctl sandbox create n1 2>&1); then
	ok "create n1 (the KVM trial cannot start, TCG boots)"
else
	not_ok "create n1 (the KVM trial cannot start, TCG boots)"
	diag "$out" "berthd (pid $BERTHD_PID): $(kill -0 "$BERTHD_PID" 2>/dev/null &&
		echo running || echo gone); its log:" "$(tail -n 30 "$BERTHD_LOG")"
fi
like "n1 runs" "$(netctl sandbox ls)" 'n1 +running'
like "the event names why the trial could not start" "$(netctl sandbox events n1)" \
	'accel +failed .*bind /dev/kvm: No such file or directory.*using TCG'
like "n1 records TCG" "$(cat "$STATE/vms/n1/sandbox.conf")" 'accel=tcg'
like "the verdict is cached" "$(cat "$STATE/vms/accel.cache")" '^tcg	.*bind /dev/kvm'
check "n1 serves its page" serves n1
netctl sandbox rm n1 >/dev/null
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"

# ---- no /dev/kvm: the probe alone rules KVM out --------------------------------
unset BERTH_KVM_PROBE
rm -f "$STATE/vms/accel.cache"
start_berthd
line=$(grep 'vmm: qemu' "$BERTHD_LOG" | tail -n 1)
like "without /dev/kvm the probe chooses TCG" "$line" 'vmm: qemu, TCG: probe: '
case $line in
*"TCG: probe: "*) ;;
*) grep -n 'vmm\|accel\|kvm' "$BERTHD_LOG" | head -n 20 | sed 's/^/# /' ;;
esac
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not stop"
done_testing
