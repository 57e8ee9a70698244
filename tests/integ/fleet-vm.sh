# tests/integ/fleet-vm.sh — sourced (after lib.sh) by the tests whose
# fleet hosts run VMs (fleet-move.sh, fleet-move-debian.sh): a real etcd
# on loopback, fleet certificates, two berthds a and b in one fleet, and
# the calls their checks make. The caller sets FV (a short name: etcd's
# member name, the fleet prefix, the hosts' tap prefix stem) and
# FV_POOL_a, FV_POOL_b (each host's vm_pool: a moved guest is given the
# target's address as it is restored).
# SPDX-License-Identifier: GPL-2.0-or-later

etcd_start "$FV"
fleet_certs a b

# host_conf H LINE...: $T/H/berth.conf with fresh ports, its VMs on
# (accel tcg, no idle policy), its fleet; LINEs added (vm_template ...)
host_conf() {
	_h=$1; shift
	mkdir -p "$T/$_h/state"
	eval "HTTPS_$_h=$(free_port)"
	{
		echo "domain $DOMAIN"
		echo "listen https 127.0.0.1:$(eval echo "\$HTTPS_$_h")"
		echo "workers 1"
		echo "user nobody"
		echo "vmm on"
		echo "accel tcg"
		echo "egress off"
		echo "tap_prefix $FV$_h"
		echo "vm_pool $(eval echo "\$FV_POOL_$_h")"
		echo "idle_pause never"
		echo "idle_suspend never"
		echo "timeout wake 60s"
		echo "fleet_etcd http://127.0.0.1:$CPORT"
		echo "fleet_host $_h"
		echo "fleet_listen 127.0.0.1:$(free_port)"
		echo "fleet_api_listen 127.0.0.1:$(free_port)"
		eval "CTL_$_h=$(free_port)"
		echo "control_listen 127.0.0.1:$(eval echo "\$CTL_$_h")"
		echo "fleet_ca $T/fleet/fleet-ca.pem"
		echo "fleet_cert $T/fleet/$_h.pem $T/fleet/$_h.key"
		echo "fleet_ttl 5s"
		echo "fleet_prefix /$FV"
		for _l in "$@"; do echo "$_l"; done
	} >"$T/$_h/berth.conf"
}
# kill9 PID...: SIGKILL, then wait until each is gone (a helper dying
# slowly still holds the control socket a restart binds)
kill9() {
	kill -9 "$@" 2>/dev/null
	for _p in "$@"; do wait_gone 30 "$_p" || bail "pid $_p did not die"; done
}
start_host() {
	spawn "$T/$1/berthd.log" "$BERTHD" -f "$T/$1/berth.conf" -s "$T/$1/state"
	eval "PID_$1=$SPAWNED"
	wait_log 120 "$T/$1/berthd.log" "fleet: registered host $1" "$SPAWNED" ||
		{ tail -n 30 "$T/$1/berthd.log" >&2; bail "berthd $1 did not start"; }
	wait_log 60 "$T/$1/berthd.log" "vmm: qemu" "$SPAWNED" ||
		bail "no VMM in berthd $1"
}

nc_() { _h=$1; shift; "$NETCTL" -s "$T/$_h/state" "$@"; }
isnt() { if [ "$2" != "$3" ]; then ok "$1"; else not_ok "$1"; diag "got '$2'"; fi; }
state_on() { nc_ "$1" --json sandbox show "$2" 2>/dev/null |
	json_get "$(cat)" 'j["state"]'; }
# via H ID PATH: GET through host H's edge; headers in $T/hdr
via() {
	curl -sS --max-time 90 --cacert "$T/$1/state/tls/ca.pem" \
		--connect-to "::127.0.0.1:" -D "$T/hdr" -o "$T/body" \
		-w '%{http_code}' \
		"https://8080-$2.$DOMAIN:$(eval echo "\$HTTPS_$1")$3" 2>/dev/null
}
served() { [ "$(via "$1" "$2" /healthz)" = 200 ]; }
# b_up: a's view has b up
b_up() { nc_ a fleet hosts 2>/dev/null | grep -q "^b  *up"; }
