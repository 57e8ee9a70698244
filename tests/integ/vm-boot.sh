#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# vm-boot: build the default guest template (vmm/guest/mktemplate), boot it
# under qemu microvm (TCG) on a tap device inside a private network
# namespace, and check from that namespace that testapp answers on the
# guest address; then write a file on the persistent disk, boot a second
# time from the same disk and read it back. Needs root, /dev/net/tun and
# qemu; otherwise exits 77 with the reason on stderr.
# Two boots: each one is 5-10 s of TCG on the shared CI cores.

skip() { echo "$*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "vm-boot needs root (tap devices, network namespaces)"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
for t in qemu-system-x86_64 ip curl mkfs.ext4 cpio gzip; do
	command -v $t >/dev/null 2>&1 || skip "$t not installed"
done

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-.}
export top_builddir

ns=berth-vmboot-$$
tap=bvmt$$
host_ip=10.200.255.1
guest_ip=10.200.255.2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm-boot.XXXXXX")
qpid=

stop_qemu() {
	[ -n "$qpid" ] || return 0
	kill "$qpid" 2>/dev/null
	i=0
	while kill -0 "$qpid" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1; i=$((i + 1))
	done
	kill -9 "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
	qpid=
}
cleanup() {
	stop_qemu
	if ip netns list 2>/dev/null | grep -qw "$ns"; then
		ip netns exec "$ns" ip link del "$tap" 2>/dev/null
		ip netns del "$ns"
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
in_ns() { ip netns exec "$ns" "$@"; }
if ! in_ns ip tuntap add dev "$tap" mode tap 2>/dev/null; then
	skip "cannot create a tap device"
fi
in_ns ip addr add "$host_ip/30" dev "$tap"
in_ns ip link set "$tap" up
in_ns ip link set lo up

n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; fail=1; }
bail() { echo "Bail out! $*"; [ -f "$tmp/serial.log" ] && tail -n 30 "$tmp/serial.log" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

echo "1..8"

if sh "$top_srcdir/vmm/guest/mktemplate" "$tmp/tpl" >"$tmp/mk.log" 2>&1; then
	ok "mktemplate builds the default template"
else
	cat "$tmp/mk.log" >&2
	bail "mktemplate failed"
fi

truncate -s 64M "$tmp/disk.raw"
mkfs.ext4 -q -F -L berth-data "$tmp/disk.raw" || bail "mkfs.ext4 failed"

# TCG can hang calibrating the TSC against the PIT: tell the kernel.
khz=$(awk -F: '/^cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo)
cmdline="$(sed -n 's/.*"cmdline": "\([^"]*\)".*/\1/p' "$tmp/tpl/template.json")"
cmdline="$cmdline ${khz:+tsc_early_khz=$khz} berth.ip=$guest_ip/30 berth.gw=$host_ip berth.id=vmboot"

# boot LOG: start qemu in the namespace, wait (bounded) for the ready line.
boot() {
	log=$tmp/$1
	: >"$log"
	t0=$(now)
	# Not through in_ns: a backgrounded shell function is a subshell,
	# and $! would be that subshell instead of qemu.
	ip netns exec "$ns" qemu-system-x86_64 -M microvm -accel tcg -cpu max -m 256 -smp 1 \
	    -nodefaults -no-user-config -display none \
	    -serial "file:$log" -pidfile "$tmp/qemu.pid" \
	    -kernel "$tmp/tpl/vmlinuz" -initrd "$tmp/tpl/initramfs.cpio.gz" \
	    -append "$cmdline" \
	    -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" \
	    -device virtio-net-device,netdev=n0,mac=52:54:00:c8:ff:02 \
	    -drive "id=d0,file=$tmp/disk.raw,format=raw,if=none" \
	    -device virtio-blk-device,drive=d0 \
	    </dev/null >"$tmp/qemu.out" 2>&1 &
	qpid=$!
	i=0
	while ! grep -q 'berth-guest: ready' "$log"; do
		if ! kill -0 "$qpid" 2>/dev/null; then
			cat "$tmp/qemu.out" >&2
			return 1
		fi
		i=$((i + 1))
		[ $i -le 450 ] || return 1	# 90 s
		sleep 0.2
	done
	boot_secs=$(elapsed "$t0")
}

get() { in_ns curl -sS -m 20 "$@"; }
base=http://$guest_ip:8080

if boot serial.log; then
	ok "guest ready in ${boot_secs}s ($(grep -o 'berth-guest: ready.*' "$tmp/serial.log" | tr -d '\r'))"
else
	bail "guest not ready within 90 s"
fi

got=$(get "$base/healthz")
[ "$got" = ok ] && ok "healthz from the namespace" || nok "healthz: '$got'"

got=$(get -H 'X-Berth-Test: 1' -d 'abc' "$base/echo/x")
case "$got" in
*'"method":"POST"'*'"X-Berth-Test","1"'*'"body_bytes":3}'*) ok "echo" ;;
*) nok "echo: '$got'" ;;
esac

token=vmboot-$$-$(date +%s)
boot1=$(get "$base/info")
got=$(printf '%s' "$token" | get -T - "$base/files/persist.txt")
case "$got" in
*'"bytes":'*) ok "file written under /data" ;;
*) nok "file write: '$got'" ;;
esac

# A second boot from the same disk (testapp fsyncs before answering, so
# pulling the plug here is fair).
stop_qemu
if boot serial2.log; then
	ok "second boot ready in ${boot_secs}s"
else
	bail "second boot not ready within 90 s"
fi

# The host's side of the tap comes back up with the new qemu: until the
# guest answers at all (bounded), a refused connect says nothing of /data.
i=0
while [ "$(get "$base/healthz" 2>/dev/null)" != ok ] && [ $i -lt 50 ]; do
	i=$((i + 1))
	sleep 0.2
done
got=$(get "$base/files/persist.txt")
[ "$got" = "$token" ] && ok "file on /data survives a reboot" || nok "after reboot: '$got'"

boot2=$(get "$base/info")
id1=$(echo "$boot1" | sed -n 's/.*"boot_id":"\([^"]*\)".*/\1/p')
id2=$(echo "$boot2" | sed -n 's/.*"boot_id":"\([^"]*\)".*/\1/p')
if [ -n "$id1" ] && [ -n "$id2" ] && [ "$id1" != "$id2" ]; then
	ok "a new boot id after the reboot"
else
	nok "boot ids: '$id1' '$id2'"
fi

exit $fail
