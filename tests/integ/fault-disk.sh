#!/bin/sh
# fault-disk.sh — disk full, on small tmpfs mounts: the state directory
# full makes control-API writes fail with a clear 507 (nothing half
# stored) while berthd keeps proxying and answering reads; once space is
# freed writes work again, and every sandbox and route stored before is
# intact, also after a restart. The access log's file system full: the
# requests are still served, the failure is logged once (not per
# request), and logging resumes by itself when space is back.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool mount umount dd

# tmpfs_at DIR SIZE: a fresh tmpfs of SIZE at DIR, unmounted at exit.
tmpfs_at() {
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2,mode=755" "berth-fault-disk" "$1" ||
		skip_all "cannot mount a tmpfs (needs CAP_SYS_ADMIN)"
	at_exit "umount -l '$1'"
}
# fill DIR: take every free byte (dd stops at ENOSPC). Large writes
# first, then page-sized ones: where tmpfs allocates large folios a 64k
# write can fail with pages still free, which a log line would then take.
fill() {
	dd if=/dev/zero of="$1/filler" bs=64k >/dev/null 2>&1
	dd if=/dev/zero of="$1/filler" bs=4k oflag=append conv=notrunc >/dev/null 2>&1
	dd if=/dev/zero of="$1/filler" bs=512 oflag=append conv=notrunc >/dev/null 2>&1
	[ "$(df --output=avail "$1" | tail -n 1 | tr -d ' ')" -eq 0 ]
}

STATE_MNT="$T/state"
LOG_MNT="$T/alog"
tmpfs_at "$STATE_MNT" 4m
tmpfs_at "$LOG_MNT" 1m
ALOG="$LOG_MNT/access.log"
berthd_config "access_log $ALOG"
start_berthd
start_testapp app
publish sb1 "$TA_PORT" >/dev/null || bail "cannot publish sb1"
netctl sandbox add sb2 --address 127.0.0.1 >/dev/null || bail "cannot add sb2"
URL=$(url_for "$TA_PORT" sb1)
code() { bcurl -o /dev/null -w '%{http_code}' "$@"; }
api() {	# METHOD PATH [JSON]: prints the status, body in $T/api.body
	curl -sS --max-time 30 --unix-socket "$STATE/control.sock" -o "$T/api.body" \
		-D "$T/api.head" -w '%{http_code}' -X "$1" ${3:+-H 'Content-Type: application/json' -d "$3"} \
		"http://berth$2"
}
ids() { netctl --json sandbox ls | python3 -c 'import json,sys
d=json.load(sys.stdin); d=d.get("sandboxes", d) if isinstance(d, dict) else d
print(" ".join(sorted(s["id"] for s in d)))'; }

is "access log written" "$(code "$URL/echo?before")" 200
# the worker writes the line once the response is out: waited for
check "access log has the request" wait_for 10 grep -q ' /echo ' "$ALOG"

# ---- the state directory full -----------------------------------------------
check "state tmpfs filled" fill "$STATE_MNT"
# The WAL may still have room for a few commits: write until one fails.
stored="sb1 sb2" failed= i=0
while [ $i -lt 100 ]; do
	i=$((i + 1))
	st=$(api POST /v1/sandboxes "{\"id\":\"full$i\",\"address\":\"127.0.0.1\"}")
	case $st in
	201) stored="$stored full$i";;
	*) failed=full$i; break;;
	esac
done
if [ -n "$failed" ]; then
	ok "a write fails once the state dir is full (after $((i - 1)) that fit)"
else
	bail "100 writes all succeeded on a full state dir"
fi
is "it is answered 507" "$st" 507
body=$(cat "$T/api.body")
is "error code insufficient_storage" "$(json_get "$body" 'j["error"]["code"]')" insufficient_storage
like "message says the store is full" "$(json_get "$body" 'j["error"]["message"]')" \
	'state store full.*(full|space)'
out=$(netctl sandbox add full-cli --address 127.0.0.1 2>&1); rc=$?
if [ $rc -ne 0 ]; then ok "netctl exits non-zero"; else not_ok "netctl exits non-zero"; fi
like "netctl prints one clear line" "$out" '^netctl: state store full'
check "berthd is still running" kill -0 "$BERTHD_PID"
is "proxy still serves while the disk is full" "$(code "$URL/echo")" 200
is "reads still answered" "$(ids)" "$(echo $stored | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')"
is "health still ok" "$(api GET /v1/health)" 200

rm -f "$STATE_MNT/filler"
is "write works again once space is freed" \
	"$(api POST /v1/sandboxes '{"id":"after","address":"127.0.0.1"}')" 201
stored="$stored after"
check "publish works again" publish after "$TA_PORT"
want=$(echo $stored | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
is "every sandbox stored before is there, the refused one is not" "$(ids)" "$want"
is "route stored before still served" "$(code "$URL/echo")" 200

# ---- the access log's file system full ---------------------------------------
# The lines of the requests before are all written first (a worker logs
# a request after its answer; one written after the truncation, before
# the fill, would leave the log a page with room for the 20 lines below:
# seen once on a loaded CI machine): a marker request's line, then empty.
is "a marker request" "$(code "$URL/echo-mark")" 200
wait_for 10 grep -q ' /echo-mark ' "$ALOG" || diag "the marker's line did not come"
: >"$ALOG"
check "log tmpfs filled" fill "$LOG_MNT"
n=0 good=0
while [ $n -lt 20 ]; do
	n=$((n + 1))
	[ "$(code "$URL/echo?n=$n")" = 200 ] && good=$((good + 1))
done
is "20 requests served while the access log cannot be written" "$good" 20
is "the failure is logged once, not per request" \
	"$(grep -c 'access log: write failed' "$BERTHD_LOG")" 1
like "with its reason" "$(grep 'access log: write failed' "$BERTHD_LOG")" 'No space left'
check "berthd is still running" kill -0 "$BERTHD_PID"
rm -f "$LOG_MNT/filler"
is "request after space is freed" "$(code "$URL/echo-resumed")" 200
if wait_for 10 grep -q ' /echo-resumed ' "$ALOG"; then ok "access logging resumes by itself"
else not_ok "access logging resumes by itself"; diag "$(tail -n 3 "$ALOG")"; fi
like "resumption is logged with the count lost" "$(grep 'access log: writing again' "$BERTHD_LOG")" \
	'after [0-9]+ lost line'
# Whole lines only: a line the full disk cut short was ended before the
# next one.
is "every access log line is a line of its own" "$(grep -vc '^access ' "$ALOG")" 0

# ---- restart: everything stored is there -------------------------------------
kill -TERM "$BERTHD_PID"
wait_gone 20 "$BERTHD_PID" || bail "berthd did not exit on SIGTERM"
start_berthd
is "after a restart every sandbox is there" "$(ids)" "$want"
check "after a restart the route is served" wait_routed sb1 "$TA_PORT"
check "after a restart the route published after the fault is served" wait_routed after "$TA_PORT"

done_testing
