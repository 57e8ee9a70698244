#!/bin/sh
# vm-agent-v1.sh — a sandbox whose template carries the guest agent of
# protocol 1, as every template built before concurrent commands does (a
# user's existing sandboxes): berthd recognises it by its pong (the nonce
# alone), says so in its log, and serves it one command at a time with
# its own framing. That agent is built here from berth's history (commit
# e51d2df, the last of protocol 1); without the history (a tarball, a
# shallow clone) the script skips. Checked on one VM (qemu, TCG): exec
# with output, status and stdin; two commands at once both answered, one
# after the other; a streamed command; a cp in and out; a timeout.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"
need_tool git "${CC:-cc}"
V1=e51d2df
git -C "$top_srcdir" cat-file -e "$V1:vmm/guest/agent.c" 2>/dev/null ||
	skip_all "no berth history here (a tarball or a shallow clone): the protocol-1 agent is built from commit $V1"
mkdir -p "$T/v1"
git -C "$top_srcdir" show "$V1:vmm/guest/agent.c" >"$T/v1/agent.c" &&
	git -C "$top_srcdir" show "$V1:vmm/guest/agent_proto.h" >"$T/v1/agent_proto.h" ||
	bail "cannot read the protocol-1 agent from $V1"
${CC:-cc} -static -O2 -o "$T/v1/berth-agent" "$T/v1/agent.c" 2>"$T/v1/cc.log" ||
	skip_all "cannot build a static binary here: $(tail -n 1 "$T/v1/cc.log")"
export BERTH_AGENT="$T/v1/berth-agent"

VMM=on berthd_config "tap_prefix bav" "vm_pool 10.234.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd
out=$(netctl sandbox create v1 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events v1 2>&1 | tail -n 3)"
like "a sandbox of the protocol-1 agent runs" "$out" 'sandbox v1 created'
x() { netctl sandbox exec v1 "$@" </dev/null; }

out=$(x -- sh -c 'echo out; echo err >&2; exit 3' 2>&1)
is "exec: output and status" "$?:$out" "3:$(printf 'out\nerr')"
check "berthd says the agent speaks protocol 1" \
	grep -q 'sandbox v1: its guest agent speaks protocol 1' "$BERTHD_LOG"
out=$(printf 'a\nb\n' | netctl sandbox exec v1 -- sh -c 'cat; echo end')
is "stdin gets through" "$out" "$(printf 'a\nb\nend')"
for i in 1 2; do
	( x -- sh -c "sleep 2; echo c$i" >"$T/c$i.out" 2>&1; echo $? >"$T/c$i.rc" ) &
	eval "p$i=\$!"
done
wait $p1 $p2
is "two commands at once: both answered (one after the other)" \
	"$(cat "$T/c1.rc"):$(cat "$T/c1.out") $(cat "$T/c2.rc"):$(cat "$T/c2.out")" "0:c1 0:c2"
x -- sh -c 'echo first; sleep 3; echo second' >"$T/st.out" &
sp=$!
check "a streamed command: its first line before its end" \
	wait_for 3 grep -q first "$T/st.out"
wait $sp
is "... then the rest" "$(cat "$T/st.out")" "$(printf 'first\nsecond')"
head -c 2000000 /dev/urandom >"$T/blob"
check "cp in" netctl sandbox cp "$T/blob" v1:/tmp/blob
check "cp out" netctl sandbox cp v1:/tmp/blob "$T/blob.back"
check "... byte-identical" cmp -s "$T/blob" "$T/blob.back"
x --timeout 1s -- sleep 30 2>"$T/e"
is "--timeout 1s on sleep 30: killed (137)" "$?" 137
out=$(x -- echo after 2>&1)
is "the next exec works" "$?:$out" "0:after"
netctl sandbox rm v1 >/dev/null
done_testing
