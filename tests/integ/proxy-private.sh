#!/bin/sh
# proxy-private.sh — private URLs and the TLS control listener, end to
# end: a sandbox token in Authorization: Bearer, in ?berth_token= (traded
# for a host-scoped HttpOnly cookie with a 302), or in that cookie; no
# token 401, a wrong one 401, another sandbox's 403; the token never
# reaches the guest: no berth_token query parameter in 13 URL shapes
# (duplicates, percent-encoded names, ';', with Bearer or cookie, public
# port) reaches the recording upstream; a private WebSocket works with the cookie; the
# control API over TLS takes bearer tokens and refuses others; custom
# host names: IP addresses, localhost names, another sandbox's host or
# name under the domain and names outside custom_host_suffix are refused
# with 400 naming the rule, allowed ones are served.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

CTL_PORT=$(free_port)
berthd_config "control_listen 127.0.0.1:$CTL_PORT" "custom_host_suffix apps.test"
start_berthd
start_testapp app

out=$(netctl sandbox add pv-1 --address 127.0.0.1) || bail "sandbox add: $out"
tok=$(printf '%s\n' "$out" | sed -n 's/^token: //p')
out2=$(netctl sandbox add pv-2 --address 127.0.0.1) || bail "sandbox add: $out2"
tok2=$(printf '%s\n' "$out2" | sed -n 's/^token: //p')
netctl port publish pv-1 "$TA_PORT" --private >/dev/null || bail "publish"
U=$(url_for "$TA_PORT" pv-1)
wait_routed pv-1 "$TA_PORT"

code=$(bcurl -o /dev/null -w '%{http_code}' "$U/echo")
is "no token: 401" "$code" 401
hdr=$(bcurl -s -D - -o /dev/null "$U/echo")
like "401 asks for a Bearer token" "$hdr" 'WWW-Authenticate: Bearer'
code=$(bcurl -o /dev/null -w '%{http_code}' -H "Authorization: Bearer berth_notatoken" "$U/echo")
is "wrong token: 401" "$code" 401
code=$(bcurl -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok2" "$U/echo")
is "another sandbox's token: 403" "$code" 403
body=$(bcurl -H "Authorization: Bearer $tok" "$U/echo")
like "Bearer token: served" "$body" '"target":"/echo"'
unlike "the Authorization header never reaches the guest" "$body" "$tok"

# ?berth_token= once: 302 to the same URL without it, with the cookie
hdr=$(bcurl -s -D - -o /dev/null "$U/echo?a=1&berth_token=$tok&b=2")
like "query token: 302" "$hdr" '^HTTP/1.1 302'
like "redirect drops the token, keeps the rest" "$hdr" 'Location: /echo\?a=1&b=2'
like "cookie is host-scoped, HttpOnly, Secure, SameSite=Lax" "$hdr" \
	'Set-Cookie: __Host-berth_token=berth_[^;]*; Path=/; Secure; HttpOnly; SameSite=Lax'
body=$(bcurl -H "Cookie: theme=dark; __Host-berth_token=$tok; lang=en" "$U/echo")
like "cookie: served" "$body" '"target":"/echo"'
unlike "berth's cookie never reaches the guest" "$body" "$tok"
like "the guest's own cookies do" "$body" 'theme=dark; lang=en'
code=$(bcurl -o /dev/null -w '%{http_code}' "$U/echo?berth_token=berth_bogus")
is "wrong query token: 401" "$code" 401

# No berth_token query parameter ever reaches the guest, whatever the
# credential, its position, duplicates or encoding, private or public.
out3=$(netctl sandbox add pv-3 --address 127.0.0.1) || bail "sandbox add: $out3"
netctl port publish pv-3 "$TA_PORT" >/dev/null || bail "publish pv-3"
P=$(url_for "$TA_PORT" pv-3)
wait_routed pv-3 "$TA_PORT"
JAR="$T/jar"
: >"$TA_REQLOG"
B="Authorization: Bearer $tok"
C="Cookie: __Host-berth_token=$tok"
hdr=$(bcurl -s -D - -o /dev/null "$U/dup?berth_token=$tok&x=1&berth_token=$tok")
like "two query tokens: the 302 drops both" "$hdr" 'Location: /dup\?x=1'$(printf '\r')
body=$(bcurl -L -c "$JAR" -b "$JAR" "$U/echo?berth_token=$tok&berth_token=$tok")
like "two query tokens, followed with the cookie: served" "$body" '"target":"/echo"'
body=$(bcurl -H "$B" "$U/echo?berth_token=$tok")
like "Bearer + query token: the query goes" "$body" '"target":"/echo"'
body=$(bcurl -H "$C" "$U/echo?a=1&berth_token=$tok&b=2")
like "cookie + query token between others: the others stay" "$body" '"target":"/echo\?a=1&b=2"'
body=$(bcurl -H "$C" "$U/echo?berth%5Ftoken=$tok")
like "percent-encoded name (%5F)" "$body" '"target":"/echo"'
body=$(bcurl -H "$B" "$U/echo?x=1&berth%5ftoken=$tok&%62erth_token=$tok")
like "percent-encoded names (%5f, %62)" "$body" '"target":"/echo\?x=1"'
body=$(bcurl -H "$B" "$U/echo?berth%255Ftoken=$tok")
like "double-encoded name" "$body" '"target":"/echo"'
body=$(bcurl -H "$C" "$U/echo?x=1;berth_token=$tok;y=2")
like "';' as the separator" "$body" '"target":"/echo\?x=1;y=2"'
body=$(bcurl -H "$B" "$U/echo?Berth_Token=$tok")
like "another case" "$body" '"target":"/echo"'
body=$(bcurl -H "$B" -H "Cookie: a=1; __Host-berth_token=$tok" "$U/echo?berth_token")
like "Bearer used, cookie and a bare name present: both go" "$body" '"target":"/echo"'
like "...the guest's cookie stays" "$body" '"a=1"'
body=$(bcurl "$P/echo?berth_token=$tok")
like "public port: the query token goes" "$body" '"target":"/echo"'
body=$(bcurl "$P/echo?a=b&berth_token=$tok&c=d&berth_token=x")
like "public port: duplicates between others" "$body" '"target":"/echo\?a=b&c=d"'
body=$(bcurl -H "$B" -H "Cookie: __Host-berth_token=$tok; k=v" "$P/echo")
like "public port: berth's Bearer and cookie go too" "$body" '"target":"/echo"'
like "...the guest's own cookie stays" "$body" '"k=v"'
reqs=$(cat "$TA_REQLOG")
is "the upstream saw the 12 requests that passed berthd" "$(printf '%s\n' "$reqs" | grep -c ' GET /')" 12
unlike "the upstream never saw berth_token, in any shape" "$reqs" '[Bb]erth(_|%)|%62erth'
unlike "nor the token itself" "$reqs" "$tok"

# a private WebSocket with the cookie, as a browser would
out=$(py --port "$HTTPS_PORT" --host "$(host_for "$TA_PORT" pv-1)" --ca "$CA" \
	ws --header "Cookie: __Host-berth_token=$tok" "private hello" 2>&1)
like "WebSocket through a private URL with the cookie" "$out" 'private hello'

# rotation: the old token stops working at once
netctl token ls --sandbox pv-1 >/dev/null 2>&1
tid=$(netctl --json token ls | json_get "$(cat)" '[t["id"] for t in j["tokens"] if t.get("sandbox")=="pv-1"][0]' 2>/dev/null)
if [ -n "$tid" ] && new=$(netctl token rotate "$tid" 2>/dev/null | head -n 1) && [ -n "$new" ]; then
	ok_old() { [ "$(bcurl -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$U/echo")" = 401 ]; }
	check "rotated: the old token gets 401" wait_for 5 ok_old
	code=$(bcurl -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $new" "$U/echo")
	is "rotated: the new token works" "$code" 200
else
	not_ok "token rotate"; diag "tid=$tid"
fi

# the control API over TLS
admin=$(netctl token create --admin | head -n 1)
CURL="curl -sS --cacert $CA --connect-to ::127.0.0.1:"
code=$($CURL -o /dev/null -w '%{http_code}' "https://api.$DOMAIN:$CTL_PORT/v1/sandboxes")
is "TLS control API without a token: 401" "$code" 401
code=$($CURL -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" \
	"https://api.$DOMAIN:$CTL_PORT/v1/sandboxes")
is "TLS control API with an admin token: 200" "$code" 200
code=$($CURL -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok2" \
	"https://api.$DOMAIN:$CTL_PORT/v1/sandboxes/pv-1")
is "a sandbox token cannot read another sandbox" "$code" 403
out=$("$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" --token "$tok2" \
	port publish pv-2 "$TA_PORT" 2>&1)
like "netctl over TLS with a sandbox token publishes its own port" "$out" "https://$TA_PORT-pv-2\."

# custom host names: DNS names nobody else holds, under custom_host_suffix
tnet() { "$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" "$@"; }
netctl port publish pv-3 "$TA_PORT" --host shop.apps.test >/dev/null || bail "admin sets a host"
for h in "127.0.0.1|is an IP address" "10.9.8.7|is an IP address" "127.1|is an IP address" \
	"localhost|localhost name" "app.localhost|localhost name" \
	"shop.apps.test|held by another sandbox" "app.example.com|not under a suffix ops allow" \
	"$TA_PORT-pv-3.$DOMAIN|may only use <name>-pv-2"; do
	out=$(tnet --token "$tok2" port publish pv-2 "$TA_PORT" --host "${h%%|*}" 2>&1)
	rc=$?
	is "sandbox token, custom host ${h%%|*}: refused (exit 1)" "$rc" 1
	like "...naming the rule: ${h#*|}" "$out" "${h#*|}"
done
code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$HTTPS_PORT/echo")
is "https://127.0.0.1/ reaches no sandbox" "$code" 404
out=$(tnet --json --token "$tok2" port publish pv-2 "$TA_PORT" --host app.apps.test 2>&1)
like "a name under custom_host_suffix: published" "$out" '"host": ?"app\.apps\.test"'
wait_for 10 sh -c "curl -sk --connect-to ::127.0.0.1: 'https://app.apps.test:$HTTPS_PORT/echo' | grep -q '\"target\"'"
body=$(curl -sk --connect-to ::127.0.0.1: "https://app.apps.test:$HTTPS_PORT/echo")
like "...and served" "$body" '"target":"/echo"'
out=$(tnet --json --token "$tok2" port publish pv-2 "$TA_PORT" --host "web-pv-2.$DOMAIN" 2>&1)
like "its own <name>-pv-2 name under berth's domain: published" "$out" "\"host\": ?\"web-pv-2\\.$DOMAIN\""
wait_routed_host() { [ "$(bcurl -o /dev/null -w '%{http_code}' "https://web-pv-2.$DOMAIN:$HTTPS_PORT/echo")" = 200 ]; }
check "...and served with the wildcard certificate" wait_for 10 wait_routed_host
out=$(tnet --json --token "$admin" port publish pv-2 "$TA_PORT" --host app.example.com 2>&1)
like "the admin token may pass the suffix rule" "$out" '"host": ?"app\.example\.com"'
out=$(tnet --token "$admin" port publish pv-2 "$TA_PORT" --host 127.0.0.1 2>&1)
like "...not the others" "$out" "is an IP address"
done_testing
