#!/bin/sh
# browser-wake.sh — headless Chromium (trusting the dev CA) opens the URL
# of a suspended microVM sandbox: the first request wakes it and the page
# renders, its WebSocket echoing through berthd. The sandbox's events show
# the suspend and the wake. One VM boot (qemu, TCG).
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || skip_all "chromium not installed"
need_tool certutil
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "tap_prefix bbw" "vm_pool 10.217.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd
out=$(netctl sandbox create bw) || bail "sandbox create: $out; $(netctl sandbox events bw 2>&1 | tail -n 3)"
netctl port publish bw 8080 >/dev/null || bail "publish"
wait_routed bw 8080
state() { netctl --json sandbox show bw | json_get "$(cat)" 'j["state"]'; }
check "suspend the sandbox" netctl sandbox suspend bw
is "it is suspended" "$(state)" suspended

HOME="$T/home"
export HOME
mkdir -p "$HOME/.pki/nssdb" "$T/profile"
certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password &&
	certutil -d "sql:$HOME/.pki/nssdb" -A -t "C,," -n "berth dev CA" -i "$CA" ||
	bail "cannot trust the dev CA"
SHOT_DIR="$top_builddir/tests/integ"
mkdir -p "$SHOT_DIR" 2>/dev/null || SHOT_DIR=$T
SHOT="$SHOT_DIR/browser-wake.png"
rm -f "$SHOT"
out=$(python3 "$top_srcdir/tests/integ/proxy_cdp.py" --chromium "$CHROMIUM" \
	--url "https://8080-bw.$DOMAIN:$HTTPS_PORT/" --selector '#echo' \
	--expect "hello from browser" --screenshot "$SHOT" --timeout 60 \
	--log "$T/chromium.log" -- \
	--headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--disable-dev-shm-usage --user-data-dir="$T/profile")
rc=$?
diag "$out"
is "the page of the suspended sandbox loads (no certificate error)" \
	"$(json_get "$out" 'j.get("navigate_error","")' 2>/dev/null)" ""
check "the page renders and its WebSocket echoes through berthd" [ $rc -eq 0 ]
like "document title carries the echo" "$(json_get "$out" 'j.get("title","")' 2>/dev/null)" \
	"^echo: hello from browser"
is "the sandbox runs again" "$(state)" running
ev=$(netctl --json sandbox events bw)
like "the events show the wake" "$ev" '"operation":"wake","result":"ok"'
if [ -s "$SHOT" ]; then ok "screenshot saved ($SHOT)"; else not_ok "screenshot saved"; fi
check "delete" netctl sandbox rm bw
done_testing
