#!/bin/sh
# browser-ws.sh — headless Chromium, trusting berthd's dev CA through an
# NSS database in a throwaway HOME (no certificate-error bypass), loads a
# page published through berthd; the page's script opens a WebSocket back
# through berthd (wss), sends "hello from browser" and shows the echo. The
# test waits (bounded) for the echoed text in the DOM and saves a
# screenshot to $top_builddir/tests/integ/browser-ws.png for humans.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || skip_all "chromium not installed"
need_tool certutil

WORKERS=1
berthd_config
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish"
URL=$(url_for "$TA_PORT" sb1)/

# Trust the dev CA the way a user would: Chromium on Linux reads
# $HOME/.pki/nssdb.
HOME="$T/home"
export HOME
mkdir -p "$HOME/.pki/nssdb"
check "NSS db created" certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password
check "dev CA added to the NSS db as a trusted CA" \
	certutil -d "sql:$HOME/.pki/nssdb" -A -t "C,," -n "berth dev CA" -i "$CA"

SHOT_DIR="$top_builddir/tests/integ"
mkdir -p "$SHOT_DIR" 2>/dev/null || SHOT_DIR=$T
SHOT="$SHOT_DIR/browser-ws.png"
rm -f "$SHOT"
mkdir -p "$T/profile"
out=$(python3 "$top_srcdir/tests/integ/proxy_cdp.py" --chromium "$CHROMIUM" \
	--url "$URL" --selector '#echo' --expect "hello from browser" \
	--screenshot "$SHOT" --timeout 30 --log "$T/chromium.log" -- \
	--headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--disable-dev-shm-usage --user-data-dir="$T/profile")
rc=$?
diag "$out"
nav=$(json_get "$out" 'j.get("navigate_error","")' 2>/dev/null)
is "page loads over https with the dev CA trusted (no certificate error)" "$nav" ""
if [ $rc -eq 0 ]; then
	ok "the page shows the WebSocket echo \"hello from browser\""
else
	not_ok "the page shows the WebSocket echo \"hello from browser\""
	diag "$(grep -v dbus "$T/chromium.log" | tail -n 15)"
fi
like "document title carries the echo" "$(json_get "$out" 'j.get("title","")' 2>/dev/null)" "^echo: hello from browser"
if [ -s "$SHOT" ]; then ok "screenshot saved ($SHOT)"; else not_ok "screenshot saved"; fi
# The page's WebSocket went through berthd, not around it.
like "the WebSocket went through berthd (upstream saw GET /ws)" "$(cat "$TA_REQLOG")" " GET /ws"

done_testing
