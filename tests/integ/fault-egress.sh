#!/bin/sh
# fault-egress.sh — the kernel refuses an egress batch. berthd runs in a
# network namespace of its own (its table inet berth is that namespace's,
# the host's is not touched) with BERTH_TEST_NFT_REJECT (berthd(8)): while
# the named file exists each batch carries one message the kernel refuses,
# so the kernel rejects the whole batch. A policy change then is stored
# (nothing lost) but not applied: the log says so, the table in force is
# exactly the previous one, /metrics shows berth_egress_pending 1; once
# the kernel takes batches again berthd applies the stored rules by
# itself, and a restart programs the same. Before that, fail closed: with
# the default "egress auto" a table that cannot be built keeps every VM
# off (logged, shown by netctl status, a new VM sandbox refused with the
# reason); only "egress off" runs VMs without it, with a warning.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_tool ip nft
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

NS="berth-fault-eg$$"
ip netns add "$NS" 2>/dev/null || skip_all "cannot create a network namespace"
at_exit "ip netns del '$NS' 2>/dev/null"
ip -n "$NS" link set lo up
nsnft() { ip netns exec "$NS" nft "$@"; }
nsnft list tables >/dev/null 2>&1 || skip_all "nf_tables unusable in a network namespace"

REJECT="$T/reject"
REAL_BERTHD=$BERTHD
BERTHD="$T/berthd-in-ns"
cat >"$BERTHD" <<EOF
#!/bin/sh
BERTH_TEST_NFT_REJECT='$REJECT' exec ip netns exec '$NS' '$REAL_BERTHD' "\$@"
EOF
chmod 755 "$BERTHD"

# The guest template, built here with no deadline rather than by berthd
# inside start_berthd's (a loaded machine takes long).
BERTH_TESTAPP=$TESTAPP sh "$top_srcdir/vmm/guest/mktemplate" "$T/template" >"$T/mktemplate.log" 2>&1 ||
	bail "mktemplate: $(tail -n 3 "$T/mktemplate.log")"
# ---- fail closed: the table cannot be built at start ------------------------
# egress auto (the default) with VMs: no VM starts, the reason is logged
# and shown by `netctl status`, a new VM sandbox is refused with it.
touch "$REJECT"
VMM=on EGRESS=auto berthd_config "tap_prefix bfe" "vm_pool 10.219.0.0/24" \
	"idle_pause never" "idle_suspend never" "template $T/template"
start_berthd
like "the log says the table could not be set up" "$(cat "$BERTHD_LOG")" \
	'egress: cannot set up table inet berth: .*(No such file|not found|ENOENT)'
like "... and that VMs stay off (fail closed)" "$(cat "$BERTHD_LOG")" \
	'vmm: off: no VM starts without its egress policy'
out=$(netctl status)
like "netctl status: egress failed, with the kernel's reason" "$out" '^egress: failed: .+'
like "netctl status: VMs off, and why" "$out" '^vms: off: egress could not be set up \(fail closed\)'
out=$(netctl sandbox create fc 2>&1); rc=$?
if [ $rc -ne 0 ]; then ok "a VM sandbox is refused (exit $rc)"; else not_ok "a VM sandbox is refused"; fi
like "... saying why" "$out" 'VMs are off: egress could not be set up'
unlike "no tap was made" "$(ip -n "$NS" -o link show)" 'bfe'
unlike "and nothing of it is stored" "$(netctl sandbox ls 2>&1)" '(^| )fc( |$)'
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not exit on SIGTERM"
rm -f "$REJECT"

# egress off said outright: VMs run, with a warning at every start
VMM=on EGRESS=off berthd_config "tap_prefix bfe" "vm_pool 10.219.0.0/24" \
	"idle_pause never" "idle_suspend never" "template $T/template"
start_berthd
like "egress off: the start warns that VMs run without egress policy" \
	"$(cat "$BERTHD_LOG")" 'egress: off in berth.conf: VMs run without egress policy'
out=$(netctl status)
like "netctl status: egress off" "$out" '^egress: off$'
like "netctl status: VMs on" "$out" '^vms: on$'
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not exit on SIGTERM"

VMM=on EGRESS=on berthd_config "tap_prefix bfe" "vm_pool 10.219.0.0/24" \
	"idle_pause never" "idle_suspend never" "template $T/template" "accel tcg"
start_berthd
wait_log 60 "$BERTHD_LOG" "egress: table inet berth" "$BERTHD_PID" ||
	bail "egress did not start: $(tail -n 5 "$BERTHD_LOG")"
check "the table is in berthd's namespace" nsnft list table inet berth

deny_set() { nsnft list set inet berth always_deny 2>&1; }
policy_denies() { netctl --json policy show | python3 -c 'import json,sys
print(" ".join(sorted(json.load(sys.stdin).get("deny", []))))'; }

check "policy set --deny 198.51.100.0/24" netctl policy set --deny 198.51.100.0/24
like "the deny range is in force" "$(deny_set)" '198\.51\.100\.0/24'
is "nothing pending" "$(metric berth_egress_pending)" 0
nsnft list table inet berth >"$T/before.nft" || bail "cannot list the table"

# ---- the kernel refuses ---------------------------------------------------
touch "$REJECT"
nwarn=$(grep -c 'not applied' "$BERTHD_LOG")
check "a policy change is still stored (netctl exits 0)" \
	netctl policy set --deny 198.51.100.0/24 --deny 203.0.113.0/24
if wait_for 10 sh -c "[ \$(grep -c 'not applied' '$BERTHD_LOG') -gt $nwarn ]"; then
	ok "the log says the policy was not applied"
else
	not_ok "the log says the policy was not applied"; diag "$(tail -n 5 "$BERTHD_LOG")"
fi
like "with the kernel's reason" "$(grep 'egress: policy not applied' "$BERTHD_LOG" | tail -n 1)" \
	'not applied, the rules in force stay: .*(No such file|not found|ENOENT|refused|rejected)'
like "and that it retries" "$(cat "$BERTHD_LOG")" 'egress: the kernel is behind the stored rules: retrying'
nsnft list table inet berth >"$T/during.nft" || bail "cannot list the table"
if cmp -s "$T/before.nft" "$T/during.nft"; then
	ok "the table in force is exactly the previous one"
else
	not_ok "the table in force is exactly the previous one"
	diag "$(diff "$T/before.nft" "$T/during.nft" | head -n 20)"
fi
unlike "the refused range is not in force" "$(deny_set)" '203\.0\.113\.0/24'
is "metrics: egress pending" "$(metric berth_egress_pending)" 1
is "the new policy is stored" "$(policy_denies)" "198.51.100.0/24 203.0.113.0/24"
check "berthd is still running" kill -0 "$BERTHD_PID"
check "the control API still answers" netctl status

# A retry while the kernel still refuses changes nothing either.
nfail=$(grep -c 'egress: policy not applied' "$BERTHD_LOG")
if wait_for 15 sh -c "[ \$(grep -c 'egress: policy not applied' '$BERTHD_LOG') -gt $nfail ]"; then
	ok "berthd retried by itself"
else
	not_ok "berthd retried by itself"
fi
nsnft list table inet berth >"$T/during2.nft"
check "a refused retry leaves the table as it was" cmp -s "$T/before.nft" "$T/during2.nft"

# ---- the kernel takes batches again ---------------------------------------
rm -f "$REJECT"
if wait_log 45 "$BERTHD_LOG" 'egress: stored rules in force again after [0-9]+ refused attempt' "$BERTHD_PID"; then
	ok "berthd applies the stored rules by itself"
else
	not_ok "berthd applies the stored rules by itself"; diag "$(tail -n 5 "$BERTHD_LOG")"
fi
d=$(deny_set)
like "the stored range is in force now" "$d" '203\.0\.113\.0/24'
like "beside the earlier one" "$d" '198\.51\.100\.0/24'
is "nothing pending" "$(metric berth_egress_pending)" 0
check "a later change applies at once" netctl policy set --deny 198.51.100.0/24 --deny 203.0.113.0/24 --deny 192.0.2.0/24
like "it is in force" "$(deny_set)" '192\.0\.2\.0/24'

# ---- a sandbox's batch refused: it keeps the rules it had ------------------
# One microVM (its tap in berthd's namespace); it need not finish booting:
# its rules are applied when its tap comes up.
# (counters move with any packet the booting guest sends, and the sets
# the packet path fills, its denial log's rate and counts: not rules)
tables() { nsnft list table inet berth | sed -e 's/ expires [0-9hms.]*//' \
	-e 's/counter packets [0-9]* bytes [0-9]*/counter/' |
	awk '/^\tset (log_rate|log_sup|sb_conns|sb_rate) \{/ { skip = 1 }
	    skip && /^\t\}$/ { skip = 0; next } !skip'; }
if out=$(netctl sandbox create eg 2>&1); then
	ok "a microVM sandbox is created"
	ip=$(netctl --json sandbox show eg | python3 -c 'import json,sys; print(json.load(sys.stdin)["address"])')
	wait_for 30 sh -c "ip netns exec '$NS' nft list map inet berth sb_mode | grep -q '$ip'" ||
		bail "sandbox eg ($ip) never attached: $(tail -n 5 "$BERTHD_LOG")"
	check "egress allow eg 198.18.0.0/24" netctl egress allow eg 198.18.0.0/24
	like "its allow range is in force" "$(nsnft list set inet berth allow_net)" "$ip \\. 198\\.18\\.0\\.0"
	tables >"$T/sb-before.nft"
	touch "$REJECT"
	n=$(grep -c 'egress eg: not applied' "$BERTHD_LOG")
	check "a further rule is still stored (netctl exits 0)" netctl egress allow eg 198.18.1.0/24
	if wait_for 10 sh -c "[ \$(grep -c 'egress eg: not applied' '$BERTHD_LOG') -gt $n ]"; then
		ok "the log says the sandbox's rules were not applied"
	else
		not_ok "the log says the sandbox's rules were not applied"; diag "$(tail -n 5 "$BERTHD_LOG")"
	fi
	tables >"$T/sb-during.nft"
	if cmp -s "$T/sb-before.nft" "$T/sb-during.nft"; then
		ok "the sandbox keeps exactly the rules it had (not detached)"
	else
		not_ok "the sandbox keeps exactly the rules it had (not detached)"
		diag "$(diff "$T/sb-before.nft" "$T/sb-during.nft" | head -n 20)"
	fi
	like "its mode is still enforced" "$(nsnft list map inet berth sb_mode)" "$ip"
	like "the rule is stored" "$(netctl --json egress show eg)" '198\.18\.1\.0/24'
	rm -f "$REJECT"
	n=$(grep -c 'egress: stored rules in force again' "$BERTHD_LOG")
	if wait_for 45 sh -c "[ \$(grep -c 'egress: stored rules in force again' '$BERTHD_LOG') -gt $n ]"; then
		ok "berthd applies the sandbox's stored rules by itself"
	else
		not_ok "berthd applies the sandbox's stored rules by itself"
	fi
	a=$(nsnft list set inet berth allow_net)
	like "the stored rule is in force" "$a" "$ip \\. 198\\.18\\.1\\.0"
	like "beside the earlier one" "$a" "$ip \\. 198\\.18\\.0\\.0"
else
	not_ok "a microVM sandbox is created"; diag "$out"
fi

# ---- restart: the same rules programmed from the store ----------------------
cp "$BERTHD_LOG" "$T/berthd.before-restart.log"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not exit on SIGTERM"
start_berthd
wait_log 60 "$BERTHD_LOG" "egress: table inet berth" "$BERTHD_PID" || bail "egress did not restart"
d=$(deny_set)
like "after a restart every stored range is in force" "$d" \
	'192\.0\.2\.0/24.*198\.51\.100\.0/24.*203\.0\.113\.0/24|198\.51\.100\.0/24'
for r in 192.0.2.0/24 198.51.100.0/24 203.0.113.0/24; do
	like "after a restart $r is in force" "$d" "$(echo "$r" | sed 's/\./\\./g')"
done
is "and stored" "$(policy_denies)" "192.0.2.0/24 198.51.100.0/24 203.0.113.0/24"

done_testing
