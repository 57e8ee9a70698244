#!/bin/sh
# proxy-errors.sh — every error page berthd makes: 404 (unknown host,
# sandbox, unpublished port; HTML for browsers, JSON otherwise, naming the
# sandbox and the reason), 502 (nothing listens), 504 (upstream slower than
# `timeout response`), 408 (head not finished within `timeout head`), 429
# (over `limit connections_per_sandbox`).
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

WORKERS=1
berthd_config "timeout head 2s" "timeout response 2s" "timeout connect 2s" \
	"limit connections_per_sandbox 2"
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish"

# get URL [CURL ARGS]: sets CODE, CTYPE, BODY (file $T/body)
get() {
	_u=$1; shift
	_w=$(bcurl -o "$T/body" -w '%{http_code} %{content_type}' "$@" "$_u")
	CODE=${_w%% *}
	CTYPE=${_w#* }
	BODY=$(cat "$T/body")
}
json_ok() { printf '%s' "$BODY" | python3 -c 'import json,sys; json.load(sys.stdin)'; }

# error_page DESC URL CODE WORDS...: the JSON and the HTML variant both
# carry CODE and name every WORD (sandbox id, port).
error_page() {
	local ep_d ep_u ep_c ep_w
	ep_d=$1 ep_u=$2 ep_c=$3; shift 3
	get "$ep_u" -H 'Accept: application/json'
	is "$ep_d: status $ep_c (JSON client)" "$CODE" "$ep_c"
	like "$ep_d: JSON content type" "$CTYPE" "^application/(problem\+)?json"
	check "$ep_d: body is JSON" json_ok
	for ep_w in "$@"; do like "$ep_d: JSON names $ep_w" "$BODY" "$ep_w"; done
	get "$ep_u" -H 'Accept: text/html,application/xhtml+xml,*/*;q=0.8'
	is "$ep_d: status $ep_c (browser)" "$CODE" "$ep_c"
	like "$ep_d: HTML content type" "$CTYPE" "^text/html"
	like "$ep_d: HTML page" "$BODY" "<(html|HTML|!DOCTYPE|!doctype)"
	for ep_w in "$@"; do like "$ep_d: HTML names $ep_w" "$BODY" "$ep_w"; done
}

error_page "unknown sandbox" "$(url_for "$TA_PORT" nosuch)/x" 404 nosuch
error_page "unpublished port" "$(url_for 9 sb1)/x" 404 sb1
get "https://nothing.$DOMAIN:$HTTPS_PORT/x"
is "unknown host: 404" "$CODE" 404
get "https://$DOMAIN:$HTTPS_PORT/x"
is "bare domain: 404" "$CODE" 404
# A Host that is not ours at all (TLS SNI is ours).
get "$(url_for "$TA_PORT" sb1)/x" -H 'Host: example.com'
like "foreign Host header is refused (404/421/400)" "$CODE" "^(404|421|400)$"

# 502: a published port nobody listens on (a port we just saw free).
DEAD=$(free_port)
netctl port publish sb1 "$DEAD" >/dev/null
wait_routed sb1 "$DEAD"
error_page "nothing listening" "$(url_for "$DEAD" sb1)/x" 502 sb1 "$DEAD"
t=$(bcurl -o /dev/null -w '%{time_total}' "$(url_for "$DEAD" sb1)/x")
check "502 comes within a bounded retry window (${t}s)" awk -v t="$t" 'BEGIN { exit !(t < 10) }'

# 504: upstream answers after 5 s, timeout response is 2 s.
error_page "upstream too slow" "$(url_for "$TA_PORT" sb1)/slow?ms=5000" 504 sb1
t=$(bcurl -o /dev/null -w '%{time_total}' "$(url_for "$TA_PORT" sb1)/slow?ms=5000")
check "504 after timeout response (2 s), not the upstream's 5 s (${t}s)" \
	awk -v t="$t" 'BEGIN { exit !(t >= 1.8 && t < 4.5) }'
# The pool must not hand out the connection still busy with /slow.
c=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" sb1)/echo?after504")
is "the route works after a 504" "$c" 200

# 408: a head left unfinished past timeout head (2 s).
out=$(py --port "$HTTPS_PORT" --host "$(host_for "$TA_PORT" sb1)" --ca "$CA" --timeout 10 slowhead)
is "unfinished head: 408" "$(json_get "$out" 'j.get("status")')" 408
secs=$(json_get "$out" 'j["secs"]')
# not before the timeout; after it, as soon as a loaded machine gets to it
like "408 after timeout head (1.5-9 s)" "$secs" '^(1\.[5-9]|[2-9]\.)'

# 429: two responses in flight to sandbox "lim" (limit 2) — SSE streams
# that last 15 s, so the window does not depend on machine speed — and a
# third request is refused.
publish lim "$TA_PORT" >/dev/null
LURL=$(url_for "$TA_PORT" lim)
: >"$TA_REQLOG"
for i in 1 2; do
	spawn "$T/sse$i.out" py --port "$HTTPS_PORT" --host "$(host_for "$TA_PORT" lim)" \
		--ca "$CA" --timeout 30 sse --path "/sse?count=50&interval=300&n=$i"
	eval "sse$i=\$SPAWNED"
done
if wait_for 10 sh -c "[ \$(grep -c '/sse?count=50' '$TA_REQLOG') -ge 2 ]"; then
	error_page "over connections_per_sandbox" "$LURL/echo?third" 429 lim
	c=$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" sb1)/echo?other")
	is "another sandbox is not limited meanwhile" "$c" 200
	check "the streams in flight were not cut" kill -0 "$sse1" "$sse2"
else
	not_ok "two streams reached the upstream"; diag "$(cat "$TA_REQLOG")"
fi
kill "$sse1" "$sse2" 2>/dev/null
lim_ok() { [ "$(bcurl -o /dev/null -w '%{http_code}' "$LURL/echo?later")" = 200 ]; }
check "once they close, the sandbox is served again" wait_for 10 lim_ok

done_testing
