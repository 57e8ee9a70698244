#!/bin/sh
# vm-template-default.sh — berth.conf's vm_template (issue 16) without
# booting a VM: the directive's values and errors (berthd -n); with the
# debian default not built yet berthd is ready at once and builds it in
# the background (a stand-in builder held by the test stands for
# mktemplate-debian), its progress in the log and in GET
# /v1/templates/debian/build; a create meanwhile is refused (503) naming
# the build, says when to try again (Retry-After: 30), and leaves no
# sandbox; `netctl template build debian`
# joins the running build and prints its progress from the start; a
# failed build is in the log and in every create's error (no
# Retry-After); SIGHUP
# changing vm_template says it takes effect on restart; a build under
# way ends with berthd (SIGTERM); a built debian whose recorded guest
# programs are not the installed ones (an upgrade of berth), or that
# records none (an older berth's), is rebuilt in the background at
# start, saying why, the version there serving meanwhile, and one whose
# fingerprint matches is not (vm-debian.sh does it with the real builder
# and a create meanwhile); vmm on with no
# builder at all exits saying why.
# Root, /dev/net/tun, qemu (vmm on); a few seconds.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_root
need_tool curl
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

# ---- the directive ---------------------------------------------------------
berthd_config
for v in debian minimal /srv/berth/tpl; do
	sed "s|^vm_template .*|vm_template $v|" "$CONF" >"$T/v.conf"
	check "berthd -n accepts vm_template $v" "$BERTHD" -n -f "$T/v.conf" -s "$STATE"
done
printf 'domain %s\nvm_template buster\n' "$DOMAIN" >"$T/bad.conf"
out=$("$BERTHD" -n -f "$T/bad.conf" -s "$STATE" 2>&1)
is "berthd -n on vm_template buster exits 1" "$?" 1
like "... citing file:line and what it takes" "$out" \
	"$T/bad.conf:2: vm_template: expected 'debian', 'minimal' or an absolute directory, got 'buster'"
printf 'template tpl\n' >"$T/bad2.conf"
out=$("$BERTHD" -n -f "$T/bad2.conf" -s "$STATE" 2>&1)
like "template (the older spelling) still wants an absolute path" "$out" \
	"bad2.conf:1: template: absolute path expected"

# ---- the debian default, built in the background ---------------------------
# The stand-in builder: progress lines, then it waits for the test
# (bounded) and fails as a builder without its archive would.
cat >"$T/mk-debian" <<EOF
#!/bin/sh
echo \$\$ >"$T/mk.pid"
echo "mktemplate-debian: step 1 of 2 (stand-in)"
echo "mktemplate-debian: step 2 of 2 (stand-in)" >&2
i=0
while [ ! -e "$T/go" ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done
echo "mktemplate-debian: cannot reach the archive (stand-in)" >&2
exit 1
EOF
chmod 755 "$T/mk-debian"
export BERTH_MKTEMPLATE_DEBIAN="$T/mk-debian"
VMM=on VM_TEMPLATE=debian berthd_config "tap_prefix btd" "vm_pool 10.233.0.0/24"
t0=$(date +%s)
start_berthd
ok "berthd is ready with the debian default not built ($(($(date +%s) - t0)) s)"
[ -e "$T/go" ] && bail "the build ended before the checks"
like "the log says it is built in the background" "$(cat "$BERTHD_LOG")" \
	"default template debian is not built yet: building it in the background"
wait_log 30 "$BERTHD_LOG" "template debian: mktemplate-debian: step 2 of 2" "$BERTHD_PID" &&
	ok "... with the builder's progress in the log" ||
	not_ok "... with the builder's progress in the log"
api() { curl -sS --max-time 10 --unix-socket "$STATE/control.sock" "http://berth$1"; }
doc=$(api /v1/templates/debian/build)
is "GET /v1/templates/debian/build: running" "$(json_get "$doc" 'j["state"]')" running
like "... with the progress lines" "$(json_get "$doc" '" | ".join(j["lines"])')" "step 1 of 2.*step 2 of 2"

like "netctl status says the default template is building" "$(netctl status)" \
	"default template: debian: building \([0-9]+ s\)"
out=$(netctl sandbox create early 2>&1)
is "a create during the build is refused (exit 1)" "$?" 1
like "... naming the build and its progress" "$out" \
	"the default template debian is being built \([0-9]+ s, [0-9]+ lines of progress so far; 'netctl template build debian' follows it\)"
create_api() {
	curl -sS -o "$T/c.json" -D "$T/c.hdr" -w '%{http_code}' --max-time 10 \
		--unix-socket "$STATE/control.sock" -X POST \
		-H 'Content-Type: application/json' -d "{\"id\":\"$1\"}" \
		http://berth/v1/sandboxes
}
code=$(create_api early2)
is "... 503 from the API" "$code" 503
like "... with Retry-After: 30 (the build will end by itself)" "$(cat "$T/c.hdr")" \
	"Retry-After: 30"
unlike "... and no sandbox is left half made" "$(netctl sandbox ls)" "early"

# netctl template build debian: joins the running build, prints it all
netctl template build debian >"$T/join.out" 2>"$T/join.err" &
jpid=$!
wait_log 30 "$T/join.err" "step 2 of 2" "$jpid" &&
	ok "template build debian during the build joins it (progress from the start)" ||
	{ not_ok "template build debian during the build joins it"; diag "$(cat "$T/join.err")"; }
like "... the join is logged" "$(cat "$BERTHD_LOG")" "template debian: build asked for again: joining"
touch "$T/go"
rc=0
wait "$jpid" || rc=$?
is "... and exits 1 when that build fails" "$rc" 1
like "... saying why" "$(cat "$T/join.err")" "build failed: .*cannot reach the archive"
wait_log 30 "$BERTHD_LOG" "template debian: build failed" "$BERTHD_PID" &&
	ok "the failed build is in the log" || not_ok "the failed build is in the log"
like "... with what it means" "$(cat "$BERTHD_LOG")" \
	"default template debian is not built: every sandbox create fails"
out=$(netctl sandbox create late 2>&1)
is "a create after the failed build is refused (exit 1)" "$?" 1
like "... with the build's reason" "$out" \
	"could not be built \('netctl template build debian' tries again\): .*cannot reach the archive"
code=$(create_api late2)
is "... 503 from the API" "$code" 503
unlike "... with no Retry-After (waiting does not help)" "$(cat "$T/c.hdr")" "Retry-After"

like "netctl status says the build failed, and why" "$(netctl status)" \
	"default template: debian: build failed: .*cannot reach the archive"

# SIGHUP: the default template is chosen at start
sed -i 's/^vm_template .*/vm_template minimal/' "$CONF"
kill -HUP "$BERTHD_PID"
wait_log 20 "$BERTHD_LOG" "SIGHUP: .*vm_template.* changed: takes effect on restart" "$BERTHD_PID" &&
	ok "SIGHUP changing vm_template: takes effect on restart, saying so" ||
	not_ok "SIGHUP changing vm_template: takes effect on restart, saying so"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID"

# a build under way ends with berthd; the next start begins it again
sed -i 's/^vm_template .*/vm_template debian/' "$CONF"
rm -f "$T/go" "$T/mk.pid"
start_berthd
wait_log 30 "$BERTHD_LOG" "template debian: mktemplate-debian: step 2 of 2" "$BERTHD_PID" ||
	bail "the build did not start again"
mk=$(cat "$T/mk.pid")
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID"
check "SIGTERM during the build: the builder ends with berthd" wait_gone 10 "$mk"
like "... saying so" "$(cat "$BERTHD_LOG")" "template debian: build stopped with berthd"
touch "$T/go"

# ---- berth upgraded: the current version's guest programs are not the
# installed ones ----
# The stand-in: the installed programs' fingerprint is what $T/fp holds;
# a build (held until the test says go) writes a version recording it.
cat >"$T/mk-up" <<EOF
#!/bin/sh
if [ "\$1" = --guest-fingerprint ]; then cat "$T/fp"; exit; fi
echo "mktemplate-debian: initramfs (stand-in)" >&2
i=0
while [ ! -e "$T/go-up" ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done
mkdir -p "\$1"
: >"\$1/vmlinuz"
printf '{"name": "debian", "kernel": "vmlinuz", "guest": "%s"}\n' "\$(cat "$T/fp")" >"\$1/template.json"
EOF
chmod 755 "$T/mk-up"
export BERTH_MKTEMPLATE_DEBIAN="$T/mk-up"
fp_old=$(printf '%064d' 0 | tr 0 a)
fp_new=$(printf '%064d' 0 | tr 0 b)
echo "$fp_new" >"$T/fp"
rm -rf "$STATE/templates"
mkdir -p "$STATE/templates/debian/v1"
printf '{"name": "debian", "kernel": "vmlinuz", "guest": "%s"}\n' "$fp_old" \
	>"$STATE/templates/debian/v1/template.json"
: >"$STATE/templates/debian/v1/vmlinuz"	# loads; never booted here
ln -s v1 "$STATE/templates/debian/current"
rm -f "$BERTHD_LOG"	# wait_log must not find the last one's "ready"
start_berthd
like "berthd: the guest programs changed since the current version: rebuilt in the background, saying why" \
	"$(cat "$BERTHD_LOG")" \
	"template debian: berth's guest programs changed since version v1: building a new version in the background; sandboxes are made from v1 meanwhile"
is "... GET /v1/templates/debian/build: running" \
	"$(json_get "$(api /v1/templates/debian/build)" 'j["state"]')" running
like "... netctl status: the version there serves meanwhile" "$(netctl status)" \
	"default template: debian \(a new version for berth's new guest programs is being built: [0-9]+ s\)"
unlike "... it is not taken for a template being built for the first time" \
	"$(cat "$BERTHD_LOG")" "not built yet"
touch "$T/go-up"
wait_log 30 "$BERTHD_LOG" "template debian built in|template debian: build failed" "$BERTHD_PID" ||
	bail "the rebuild did not end"
cur=$(readlink "$STATE/templates/debian/current")
unlike "... a new version is current" "$cur" '^v1$'
is "... recording the installed programs' fingerprint" \
	"$(json_get "$(cat "$STATE/templates/debian/$cur/template.json")" 'j["guest"]')" "$fp_new"
like "... the log says new sandboxes are made from it" "$(cat "$BERTHD_LOG")" \
	"the default template debian: new sandboxes are made from $cur \(each sandbox keeps its own version\)"
check "... and v1, which no sandbox uses, is gone" test ! -e "$STATE/templates/debian/v1"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID"
rm -f "$BERTHD_LOG"
start_berthd
unlike "berthd restarted, the fingerprints the same: no rebuild" "$(cat "$BERTHD_LOG")" \
	"guest programs|template debian: building"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID"
# an older berth's version: no fingerprint at all
printf '{"name": "debian", "kernel": "vmlinuz"}\n' >"$STATE/templates/debian/$cur/template.json"
rm -f "$BERTHD_LOG"
start_berthd
like "a version that records no fingerprint (an older berth's): rebuilt, saying so" \
	"$(cat "$BERTHD_LOG")" \
	"template debian: version $cur records no fingerprint of berth's guest programs \(an older berth built it\): building a new version in the background; sandboxes are made from $cur meanwhile"
wait_log 30 "$BERTHD_LOG" "template debian built in|template debian: build failed" "$BERTHD_PID" &&
	ok "... built" || not_ok "... built"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID"
# a builder that cannot say: berthd starts, the version serves on
rm -f "$T/fp"
rm -f "$BERTHD_LOG"
start_berthd
like "a builder that cannot tell the fingerprint: berthd says so and serves on" \
	"$(cat "$BERTHD_LOG")" \
	"template debian: cannot tell whether berth's guest programs changed since its current version \(it serves on\): .*--guest-fingerprint failed: .*$T/fp"
unlike "... and builds nothing" "$(cat "$BERTHD_LOG")" "template debian: building"
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID"
unset BERTH_MKTEMPLATE_DEBIAN

# vmm on with no debian builder at all: berthd exits saying why
rm -rf "$STATE/templates"
rc=0
BERTH_MKTEMPLATE_DEBIAN="$T/nowhere" timeout 60 "$BERTHD" -f "$CONF" -s "$STATE" \
	>"$T/nobuilder.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && ok "vmm on, no debian builder: berthd exits ($rc)" ||
	not_ok "vmm on, no debian builder: berthd exits"
like "... saying why" "$(cat "$T/nobuilder.log")" \
	"fatal: vmm: template: cannot find the template builder $T/nowhere"
done_testing
