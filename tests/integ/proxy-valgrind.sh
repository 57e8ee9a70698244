#!/bin/sh
# proxy-valgrind.sh — berthd under valgrind memcheck for a long run:
# 10 000 requests through the proxy (four keep-alive clients, plus new
# connections, larger bodies, uploads and error pages), SIGHUP reloads
# while they run, and sandbox churn through the control API (create,
# publish, request, unpublish, delete; `vmm off`, so no VMs). Then SIGTERM:
# the parent and both workers (valgrind follows fork: each gets its own
# log) must report no errors and no definitely lost bytes.
#
# Leak checks need a normal exit: berthd drains on SIGTERM, the workers
# return through _exit() after their last connection (valgrind checks on
# exit_group too), the parent returns from main. Exec'd helpers
# (berth-mkcert) are not traced: they are not berthd.
# Not in the ASan pass (valgrind cannot run ASan binaries).
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool valgrind
berthd_sanitized && skip_all "berthd is built with ASan: valgrind needs the normal build"

NREQ=${VG_REQUESTS:-10000}
REAL_BERTHD=$BERTHD
WORKERS=2
berthd_config "timeout drain 30s"

# The dev CA and certificate first, natively: key generation under
# valgrind would eat start_berthd's deadline for nothing.
start_berthd
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "native berthd did not stop"

cat >"$T/vg-berthd" <<EOF
#!/bin/sh
# BERTH_BUFPOOL=0: every buffer really freed, or a use after free hides
BERTH_BUFPOOL=0 exec valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite \
	--show-leak-kinds=definite --error-exitcode=99 --trace-children=no \
	--num-callers=30 --log-file="$T/vg.%p" "$REAL_BERTHD" "\$@"
EOF
chmod 755 "$T/vg-berthd"
# start_berthd's 30 s are too short for valgrind on a loaded machine
t_start=$(date +%s)
spawn "$BERTHD_LOG" "$T/vg-berthd" -f "$CONF" -s "$STATE"
VGPID=$SPAWNED
BERTHD_PID=$VGPID
wait_log 300 "$BERTHD_LOG" "berthd: ready" "$VGPID" ||
	bail "berthd did not log ready under valgrind: $(tail -n 20 "$BERTHD_LOG")"
diag "berthd ready under valgrind after $(( $(date +%s) - t_start )) s"

start_testapp app
publish vg "$TA_PORT" >/dev/null || bail "cannot publish"
URL=$(url_for "$TA_PORT" vg)

# ---- 10 000 requests, reloads and churn at the same time --------------------
# keep-alive clients: curl's URL globbing reuses one connection
per=$(( (NREQ - 200) / 4 ))
for i in 1 2 3 4; do
	spawn "$T/codes.$i" bcurl -o /dev/null -w '%{http_code}\n' "$URL/echo?c=$i&i=[1-$per]"
	eval "cl$i=\$SPAWNED"
done
# 200 more of other shapes: new connection each, bodies, errors
(
	i=0
	while [ $i -lt 50 ]; do
		bcurl -o /dev/null -w '%{http_code}\n' "$URL/bytes?n=200000"
		bcurl -o /dev/null -w '%{http_code}\n' -X POST --data-binary "@$CONF" "$URL/upload"
		bcurl -o /dev/null -w '%{http_code}\n' -H 'Transfer-Encoding: chunked' \
			--data-binary "@$CONF" "$URL/upload"
		bcurl -o /dev/null -w '%{http_code}\n' -H 'Accept: text/html' \
			"$(url_for "$TA_PORT" nosuch)/x"
		i=$((i + 1))
	done
) >"$T/codes.mixed" 2>&1 &
mixed=$!
echo "$mixed" >>"$T/pids"

# churn: sandboxes come and go while traffic runs
churn_ok=0
nreload=0
j=0
while [ $j -lt 12 ]; do
	sb="churn$j"
	if netctl sandbox create "$sb" --address 127.0.0.1 >/dev/null 2>&1 &&
	   netctl port publish "$sb" "$TA_PORT" >/dev/null 2>&1 &&
	   wait_routed "$sb" "$TA_PORT" &&
	   [ "$(bcurl -o /dev/null -w '%{http_code}' "$(url_for "$TA_PORT" "$sb")/echo")" = 200 ] &&
	   netctl port unpublish "$sb" "$TA_PORT" >/dev/null 2>&1 &&
	   netctl sandbox rm "$sb" >/dev/null 2>&1; then
		churn_ok=$((churn_ok + 1))
	else
		diag "churn $sb failed"
	fi
	# a reload every third round
	if [ $((j % 3)) -eq 1 ]; then
		n0=$(grep -cE '(^|: )reloaded ' "$BERTHD_LOG")
		kill -HUP "$VGPID"
		wait_for 60 sh -c "[ \$(grep -cE '(^|: )reloaded ' '$BERTHD_LOG') -gt $n0 ]" &&
			nreload=$((nreload + 1))
	fi
	j=$((j + 1))
done
is "12 sandboxes created, published, served, unpublished and deleted" "$churn_ok" 12
is "4 SIGHUP reloads logged" "$nreload" 4

for i in 1 2 3 4; do eval "wait_gone 600 \$cl$i"; done
wait_gone 600 "$mixed"
n200=$(cat "$T"/codes.[1-4] | grep -c '^200$')
is "$((per * 4)) keep-alive requests answered 200" "$n200" $((per * 4))
nmix=$(grep -cE '^(200|201|404)$' "$T/codes.mixed")
is "200 mixed requests answered (200/201/404)" "$nmix" 200
total=$(awk '$1 == "access"' "$BERTHD_LOG" | wc -l)
is "at least $NREQ requests in the access log ($total)" "$(( total >= NREQ ))" 1
check "berthd (under valgrind) still up" kill -0 "$VGPID"
unlike "no worker died" "$(cat "$BERTHD_LOG")" 'killed by signal|exited with status'

# ---- stop, then read valgrind's verdict ---------------------------------------
workers=$(berthd_workers | tr '\n' ' ')
kill -TERM "$VGPID"
if wait_gone 180 "$VGPID"; then
	wait "$VGPID"
	rc=$?
else
	diag "berthd did not exit within 180 s of SIGTERM"
	kill -KILL "$VGPID" $workers 2>/dev/null
	rc=timeout
fi
is "berthd exits 0 under valgrind (error-exitcode 99: errors or definite leaks)" "$rc" 0
for p in $VGPID $workers; do
	f="$T/vg.$p"
	if [ ! -s "$f" ]; then
		not_ok "valgrind log of pid $p"; continue
	fi
	role=worker; [ "$p" = "$VGPID" ] && role=parent
	if grep -q 'ERROR SUMMARY: 0 errors' "$f"; then
		ok "$role $p: valgrind reports 0 errors (definite leaks count as errors)"
	else
		not_ok "$role $p: valgrind reports 0 errors"
		diag "$(grep -E -A40 'Invalid|uninitialised|definitely lost in|Syscall param|Mismatched' "$f" | head -n 120)"
		diag "$(grep -E 'ERROR SUMMARY|definitely lost' "$f")"
	fi
	like "$role $p: leak check ran" "$(cat "$f")" 'LEAK SUMMARY|All heap blocks were freed'
	unlike "$role $p: no definitely lost bytes" "$(grep 'definitely lost:' "$f")" 'definitely lost: [1-9]'
done
diag "$(grep -hE 'definitely lost:|indirectly lost:|possibly lost:|ERROR SUMMARY' "$T"/vg.* |
	sed 's/^==[0-9]*== *//' | sort | uniq -c)"

done_testing
