#!/bin/sh
# fleet-wake.sh — a request at one host's edge wakes a microVM sandbox of
# another host: host a runs a real VM (qemu, TCG; one boot), host b has no
# VMM; both register in one etcd on loopback. Paused, then suspended, the
# sandbox is fetched through b: b forwards to a's fleet listener over
# mutual TLS, a parks the request, wakes the VM and answers 200 with
# Server-Timing: wake and Berth-Host: a.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool etcd
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

etcd_start bflw
fleet_certs a b

# host_conf H VMM EXTRA...: $T/H/berth.conf with fresh ports
host_conf() {
	_h=$1 _vmm=$2; shift 2
	mkdir -p "$T/$_h/state"
	eval "HTTPS_$_h=$(free_port)"
	{
		echo "domain $DOMAIN"
		echo "listen https 127.0.0.1:$(eval echo "\$HTTPS_$_h")"
		echo "workers 1"
		echo "user nobody"
		echo "vmm $_vmm"
		echo "vm_template minimal"
		echo "egress off"
		echo "fleet_etcd http://127.0.0.1:$CPORT"
		echo "fleet_host $_h"
		echo "fleet_listen 127.0.0.1:$(free_port)"
		echo "fleet_ca $T/fleet/fleet-ca.pem"
		echo "fleet_cert $T/fleet/$_h.pem $T/fleet/$_h.key"
		echo "fleet_ttl 5s"
		echo "fleet_prefix /bflw"
		for _l in "$@"; do echo "$_l"; done
	} >"$T/$_h/berth.conf"
}
host_conf a on "tap_prefix bfw" "vm_pool 10.226.0.0/24" "idle_pause never" \
	"idle_suspend never" "timeout wake 30s"
host_conf b off
for h in a b; do
	spawn "$T/$h/berthd.log" "$BERTHD" -f "$T/$h/berth.conf" -s "$T/$h/state"
	eval "PID_$h=$SPAWNED"
done
for h in a b; do
	wait_log 120 "$T/$h/berthd.log" "fleet: registered host $h" "$(eval echo "\$PID_$h")" ||
		{ tail -n 30 "$T/$h/berthd.log" >&2; bail "berthd $h did not start"; }
done
wait_log 60 "$T/a/berthd.log" "vmm: qemu" "$PID_a" || bail "no VMM in berthd a"

nca() { "$NETCTL" -s "$T/a/state" "$@"; }
state() { nca --json sandbox show fw | json_get "$(cat)" 'j["state"]'; }
# via_b PATH: GET through b's edge; headers in $T/hdr, body in $T/body
via_b() {
	curl -sS --max-time 60 --cacert "$T/b/state/tls/ca.pem" --connect-to "::127.0.0.1:" \
		-D "$T/hdr" -o "$T/body" -w '%{http_code}' \
		"https://8080-fw.$DOMAIN:$HTTPS_b$1" 2>/dev/null
}
served_b() { [ "$(via_b /healthz)" = 200 ]; }

out=$(nca sandbox create fw) || bail "sandbox create: $out"
like "a VM sandbox runs on host a" "$out" 'sandbox fw created .*running'
nca port publish fw 8080 >/dev/null || bail "publish"
wait_for 30 served_b
is "served through b" "$(via_b /healthz)" 200
like "by host a" "$(cat "$T/hdr")" "Berth-Host: a"
boot=$(via_b /info >/dev/null; json_get "$(cat "$T/body")" 'j["boot_id"]')

nca sandbox pause fw >/dev/null || bail "pause"
is "paused on a" "$(state)" paused
is "a request through b wakes it" "$(via_b /info)" 200
like "with Server-Timing: wake" "$(cat "$T/hdr")" "Server-Timing: wake;dur=[0-9]+"
like "served by a" "$(cat "$T/hdr")" "Berth-Host: a"
is "the same boot" "$(json_get "$(cat "$T/body")" 'j["boot_id"]')" "$boot"
is "running on a after the wake" "$(state)" running

nca sandbox suspend fw >/dev/null || bail "suspend"
is "suspended on a" "$(state)" suspended
is "a request through b restores it" "$(via_b /info)" 200
like "with Server-Timing: wake" "$(cat "$T/hdr")" "Server-Timing: wake;dur=[0-9]+"
is "the same boot after the restore" "$(json_get "$(cat "$T/body")" 'j["boot_id"]')" "$boot"

nca sandbox rm fw >/dev/null
gone_b() { curl -s -o "$T/gone.body" -w '%{http_code}' --cacert "$T/b/state/tls/ca.pem" \
	--connect-to ::127.0.0.1: "https://8080-fw.$DOMAIN:$HTTPS_b/healthz"; }
gone404() { c=$(gone_b); echo "$c" >>"$T/gone.codes"; [ "$c" = 404 ]; }
if wait_for 60 gone404; then
	ok "removed: 404 through b"
else
	not_ok "removed: 404 through b"
	diag "b answered $(sort "$T/gone.codes" | uniq -c | tr '\n' ' '); now $(gone_b) $(head -c 300 "$T/gone.body")"
fi
done_testing
