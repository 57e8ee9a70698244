#!/bin/sh
# browser-private.sh — a private URL in a real browser. Headless Chromium,
# trusting berthd's dev CA through an NSS database in a throwaway HOME,
# opens a private port's URL with ?berth_token=<the sandbox's token>:
# berthd answers 302 to the same URL without the token and sets the
# host-scoped __Host-berth_token cookie; Chromium follows, the page loads
# and its WebSocket (which carries only the cookie) echoes "hello from
# browser". The token twice among other query parameters: both leave
# the URL and neither reaches the guest. A fresh profile opening the URL
# without the token gets the 401 page naming the sandbox. Screenshots go to
# $top_builddir/tests/integ/browser-private*.png for humans.
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
SB=bp-1
out=$(netctl sandbox add "$SB" --address 127.0.0.1) || bail "sandbox add: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
[ -n "$tok" ] || bail "no token in '$out'"
netctl port publish "$SB" "$TA_PORT" --private >/dev/null || bail "cannot publish"
wait_routed "$SB" "$TA_PORT" || bail "port not routed"
URL=$(url_for "$TA_PORT" "$SB")/
is "without a token: 401 (curl)" \
	"$(bcurl -o /dev/null -w '%{http_code}' "$URL")" 401

HOME="$T/home"
export HOME
mkdir -p "$HOME/.pki/nssdb"
check "NSS db created" certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password
check "dev CA added to the NSS db as a trusted CA" \
	certutil -d "sql:$HOME/.pki/nssdb" -A -t "C,," -n "berth dev CA" -i "$CA"

SHOT_DIR="$top_builddir/tests/integ"
mkdir -p "$SHOT_DIR" 2>/dev/null || SHOT_DIR=$T

# browse NAME URL SELECTOR EXPECT: one Chromium run in its own fresh
# profile; prints proxy_cdp.py's JSON summary, returns its status.
browse() {
	rm -f "$SHOT_DIR/$1.png"
	mkdir -p "$T/profile-$1"
	python3 "$top_srcdir/tests/integ/proxy_cdp.py" --chromium "$CHROMIUM" \
		--url "$2" --selector "$3" --expect "$4" --network --cookies \
		--screenshot "$SHOT_DIR/$1.png" --timeout 30 --log "$T/$1.log" -- \
		--headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update \
		--disable-sync --disable-dev-shm-usage --user-data-dir="$T/profile-$1"
}
# jq_ JSON EXPR: json_get, quiet on errors
jq_() { json_get "$1" "$2" 2>/dev/null; }

# ---- with ?berth_token= once ---------------------------------------------------
out=$(browse browser-private "${URL}?berth_token=$tok" '#echo' "hello from browser")
rc=$?
diag "$(printf '%s' "$out" | sed "s/$tok/<token>/g")"
is "page loads over https with the dev CA trusted (no certificate error)" \
	"$(jq_ "$out" 'j.get("navigate_error","")')" ""
is "berthd answered 302 to the URL without the token" \
	"$(jq_ "$out" '"%s %s" % (j["documents"][0]["status"], j["documents"][0]["location"])')" \
	"302 /"
is "Chromium followed it: the page answered 200" \
	"$(jq_ "$out" '" ".join(str(d["status"]) for d in j["documents"])')" "302 200"
is "the browser ends on the URL without the token" "$(jq_ "$out" 'j.get("href")')" "$URL"
is "the cookie Chromium keeps: __Host-berth_token, the token, host-only" \
	"$(jq_ "$out" '" ".join("%s=%s %s %s" % (c["name"], c["value"], c["domain"], c["path"]) for c in j["cookies"])')" \
	"__Host-berth_token=$tok $(host_for "$TA_PORT" "$SB") /"
is "...Secure, HttpOnly, SameSite=Lax" \
	"$(jq_ "$out" '" ".join("%s %s %s" % (c["secure"], c["httpOnly"], c["sameSite"]) for c in j["cookies"])')" \
	"True True Lax"
if [ $rc -eq 0 ]; then
	ok "the page shows the WebSocket echo \"hello from browser\""
else
	not_ok "the page shows the WebSocket echo \"hello from browser\""
	diag "$(grep -v dbus "$T/browser-private.log" | tail -n 15)"
fi
like "document title carries the echo" "$(jq_ "$out" 'j.get("title","")')" "^echo: hello from browser"
is "the WebSocket to the private URL: 101, no token in its URL" \
	"$(jq_ "$out" '" ".join("%s %s" % (w["url"], w["status"]) for w in j["websockets"])')" \
	"wss://$(host_for "$TA_PORT" "$SB"):$HTTPS_PORT/ws 101"
like "the WebSocket went through berthd (upstream saw GET /ws)" "$(cat "$TA_REQLOG")" " GET /ws"
like "berthd logged the 302 and the 101" \
	"$(grep -E "^access .* $SB $TA_PORT GET /(\\?berth_token=<?[^ ]*)? 302 |^access .* $SB $TA_PORT GET /ws 101 " "$BERTHD_LOG" | sed 's/.* GET //' | tr '\n' ' ')" \
	"302 .*/ws 101"
unlike "the token never reaches the guest" "$(cat "$TA_REQLOG")" "$tok"
unlike "the token is not in berthd's log" "$(cat "$BERTHD_LOG")" "$tok"

# ---- the token twice among other parameters, in a fresh profile --------------
: >"$TA_REQLOG"
out=$(browse browser-private-dup "${URL}?a=1&berth_token=$tok&b=2&berth_token=$tok" '#echo' \
	"hello from browser")
rc=$?
diag "$(printf '%s' "$out" | sed "s/$tok/<token>/g")"
is "two tokens: 302 to the URL without either, the rest kept, then 200" \
	"$(jq_ "$out" '" ".join("%s %s" % (d["status"], d.get("location") or "-") for d in j["documents"])')" \
	"302 /?a=1&b=2 200 -"
is "the browser ends on the URL without the tokens" "$(jq_ "$out" 'j.get("href")')" "${URL}?a=1&b=2"
if [ $rc -eq 0 ]; then ok "two tokens: the page and its WebSocket work"
else not_ok "two tokens: the page and its WebSocket work"; fi
like "the guest saw the page without the tokens" "$(cat "$TA_REQLOG")" " GET /\?a=1&b=2$"
unlike "the guest saw no berth_token at all" "$(cat "$TA_REQLOG")" "berth_token|$tok"

# ---- without a token, in a fresh profile ---------------------------------------
out=$(browse browser-private-401 "$URL" body "sandbox $SB is private")
rc=$?
diag "$out"
is "fresh profile: page loads (no certificate error)" \
	"$(jq_ "$out" 'j.get("navigate_error","")')" ""
is "fresh profile, no token: 401" \
	"$(jq_ "$out" '" ".join(str(d["status"]) for d in j["documents"])')" 401
if [ $rc -eq 0 ]; then ok "the 401 page names the sandbox"
else not_ok "the 401 page names the sandbox"; fi
like "...and says so in the title" "$(jq_ "$out" 'j.get("title","")')" "^401"
like "...and in its text" "$(jq_ "$out" 'j.get("text","")')" "sandbox: $SB"
is "fresh profile: no cookie" "$(jq_ "$out" 'len(j["cookies"])')" 0
is "fresh profile: no WebSocket" "$(jq_ "$out" 'len(j["websockets"])')" 0

done_testing
