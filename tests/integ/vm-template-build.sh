#!/bin/sh
# vm-template-build.sh — issue 31 end to end through berthd: `netctl
# template build NAME --dockerfile DIR` streams the context to berthd,
# which builds it with vmm/guest/mktemplate-source in a builder sandbox
# made from the debian template (real VMs under TCG, no registry: the
# image is FROM scratch with the host's static busybox):
#  - the template serves: a sandbox made from it runs busybox's sh by
#    exec with the image's ENV and WORKDIR, and the image's CMD (busybox
#    httpd) answers on its EXPOSEd port, published at create
#    (--publish-exposed), through berthd over TLS;
#  - `template ls` shows its version, size and source (sha256);
#  - the same context again is the cache: no builder, the same version,
#    seconds; one file changed is a new version, and the sandbox made
#    before keeps the version it was made from;
#  - a failing RUN: the build fails naming the step, its output among
#    the progress lines, the current version untouched;
#  - a build past template_build_timeout (set by SIGHUP) is killed;
#  - a context over template_max_context: 413, nothing built;
# and after each build, however it ended, no builder sandbox is left.
# The builders' ready snapshot (template_build_ready, on here): made after
# the default template's, of the builder's shape (2 GiB, a 16 GiB disk);
# a sandbox of that shape restores it with a 16 GiB root, and each build's
# builder is restored from it, not booted.
# And a Dockerfile FROM a Debian base made here (mmdebstrap from the
# host's apt sources, ADDed as docker import would) that apt-get
# installs a package through the build policy's allowlist and sets
# ENV, WORKDIR and USER, which exec sees.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm mmdebstrap
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VM runs in the normal pass only"
need_static_busybox

conf() {
	VMM=on VM_TEMPLATE=debian VM_READY=on TEMPLATE_BUILD_READY=on EGRESS=on \
		berthd_config "tap_prefix btb" \
		"vm_pool 10.238.0.0/24" "idle_pause never" "idle_suspend never" \
		"template_max_context 256" "$@"
}
conf
# the Debian base image's root, from the host's apt sources, made while
# the rest goes on (mmdebstrap, as mktemplate-debian makes the template)
SOURCES=/etc/apt/sources.list.d/debian.sources
[ -s "$SOURCES" ] || SOURCES=/etc/apt/sources.list
mkdir -p "$T/debctx"
( mmdebstrap --variant=minbase bookworm "$T/debctx/base.tar.gz" "$SOURCES" \
	>"$T/mmdebstrap.log" 2>&1; echo $? >"$T/mmdebstrap.rc" ) &
MMD=$!
at_exit "kill $MMD 2>/dev/null"
start_berthd
at_exit "rm -rf '$STATE/templates' '$STATE/vms'"
wait_debian_built
ok "the builders' template (debian) is built"

# ---- the builders' ready snapshot -----------------------------------------------
BR="the template builders' ready snapshot"
wait_log 900 "$BERTHD_LOG" "$BR [0-9a-f]+ (built in|is there)|$BR[^(]*: " "$BERTHD_PID" ||
	diag "$(grep "ready snapshot" "$BERTHD_LOG" | tail -n 3)"
bkey=$(sed -n "s/.*$BR \([0-9a-f]*\) built in.*/\1/p" "$BERTHD_LOG" | head -n 1)
like "$BR is made after the default template's" "$bkey" '^[0-9a-f]+$'
[ -n "$bkey" ] || diag "$(grep "ready snapshot" "$BERTHD_LOG")"
is "... of the builders' shape (2048 MiB, a 16384 MiB disk)" \
	"$(grep -E '^(mem_mib|disk_mib)=' "$STATE/vms/.ready/$bkey/ready.conf" 2>&1 | tr '\n' ' ')" \
	"mem_mib=2048 disk_mib=16384 "
out=$(netctl sandbox create bs --template debian --memory 2048 --disk 16384 2>&1) ||
	bail "sandbox create bs: $out; $(netctl sandbox events bs 2>&1 | tail -n 3)"
is "a sandbox of that shape restores it" \
	"$(json_get "$(netctl --json sandbox show bs)" 'j["vm"]["created_from"]')" snapshot
check "... that snapshot" grep -q "sandbox bs: created in [0-9]* ms: restored from the ready snapshot $bkey " \
	"$BERTHD_LOG"
root=$(netctl sandbox exec bs -- df -m --output=size / </dev/null 2>&1 | tail -n 1 | tr -d ' ')
if [ "$root" -ge 15500 ] 2>/dev/null && [ "$root" -le 16384 ]; then
	ok "... its root file system is the 16 GiB disk ($root MiB)"
else
	not_ok "... its root file system is the 16 GiB disk"; diag "df -m /: $root"
fi
netctl sandbox rm bs >/dev/null

CTX="$T/ctx"
mkdir -p "$CTX/www"
cp /bin/busybox "$CTX/busybox"
echo "page one" >"$CTX/www/index.html"
cat >"$CTX/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
COPY www /www
ENV GREETING=hello-from-the-image
WORKDIR /www
EXPOSE 8080
CMD ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"]
EOF
no_builder() { ! netctl sandbox ls | grep -q '^tpl-build-'; }
# build NAME ARGS...: netctl template build; $T/NAME.out, .err, .rc, .s
build() {
	_n=$1; shift
	_t0=$(date +%s)
	netctl template build "$@" >"$T/$_n.out" 2>"$T/$_n.err"
	echo $? >"$T/$_n.rc"
	echo $(($(date +%s) - _t0)) >"$T/$_n.s"
	diag "$_n: exit $(cat "$T/$_n.rc") in $(cat "$T/$_n.s") s: $(tail -n 1 "$T/$_n.err")"
}
tls() { netctl --json template ls; }
tget() {	# NAME EXPR: a field of template NAME in template ls
	json_get "$(tls)" "[t for t in j['templates'] if t['name'] == '$1'][0]$2"
}

# ---- a Dockerfile FROM scratch -----------------------------------------------
build b1 web --dockerfile "$CTX"
is "a Dockerfile FROM scratch builds" "$(cat "$T/b1.rc")" 0
like "... it says where" "$(cat "$T/b1.out")" "^template web: $STATE/templates/web/v[0-9]"
like "... its progress came from the builder" "$(cat "$T/b1.err")" 'berth-imagebuild: step: docker build'
check "... its builder sandbox is gone" no_builder
like "... its builder was restored from $BR, not booted" \
	"$(grep 'sandbox tpl-build-web: created in' "$BERTHD_LOG" | head -n 1)" \
	"created in [0-9]+ ms: restored from the ready snapshot $bkey "
diag "$(grep 'sandbox tpl-build-web: created in' "$BERTHD_LOG" | head -n 1 | sed 's/.*\(sandbox tpl-build\)/\1/')"
v1=$(tget web "['version']")
like "template ls: its version" "$v1" '^v[0-9]+'
is "template ls: source dockerfile" "$(tget web "['source']['from']")" dockerfile
like "template ls: with the context's sha256" "$(tget web "['source']['sha256']")" '^[0-9a-f]{64}$'
size=$(tget web "['size']")
if [ "$size" -gt 1000000 ] 2>/dev/null; then ok "template ls: its size on disk ($size bytes)"
else not_ok "template ls: its size on disk"; diag "size: $size"; fi
like "netctl template ls: the columns" "$(netctl template ls)" \
	"web +$v1 +0 +[0-9.]+ [KMG]iB +dockerfile sha256:[0-9a-f]{12} "

# its ready snapshot, made right after the build (VM_READY=on)
key=$(sed -n 's/.*template web: ready snapshot \([0-9a-f]*\): building it.*/\1/p' "$BERTHD_LOG" | head -n 1)
like "the new version's ready snapshot is made after its build" "$key" '^[0-9a-f]+$'
wait_log 300 "$BERTHD_LOG" "ready snapshot $key built in" "$BERTHD_PID" ||
	diag "$(grep "ready snapshot" "$BERTHD_LOG" | tail -n 3)"
out=$(netctl sandbox create w1 --template web --publish-exposed 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events w1 2>&1 | tail -n 3)"
like "a sandbox made from it runs" "$out" 'sandbox w1 created \(10\.238\.0\.[0-9]+, running\)'
URL=$(url_for 8080 w1)
like "--publish-exposed: its EXPOSEd port published, the URL shown" "$out" \
	"8080 +public .*https://8080-w1\.$DOMAIN"
is "... in port ls" "$(netctl port ls w1 | grep -cE '^w1 +8080 ')" 1
is "... and the sandbox restored it (no boot)" \
	"$(json_get "$(netctl --json sandbox show w1)" 'j["vm"]["created_from"]')" snapshot
is "exec runs busybox's sh with the image's ENV and WORKDIR" \
	"$(netctl sandbox exec w1 -- /bin/busybox sh -c 'echo "$GREETING in $(pwd)"' </dev/null 2>&1)" \
	"hello-from-the-image in /www"
wait_for 60 sh -c "curl -sS --cacert '$CA' --connect-to ::127.0.0.1: --max-time 10 '$URL/' 2>/dev/null | grep -q 'page one'"
is "its CMD (busybox httpd) answers through berthd over TLS" "$(bcurl "$URL/" 2>&1)" "page one"

# ---- the cache ------------------------------------------------------------------
build b2 web --dockerfile "$CTX"
is "the same context again builds" "$(cat "$T/b2.rc")" 0
like "... from the cache" "$(cat "$T/b2.err")" 'the same source .* built v[0-9-]+ before: cached'
is "... the same version" "$(tget web "['version']")" "$v1"
s2=$(cat "$T/b2.s")
if [ "$s2" -le 5 ]; then ok "... in seconds ($s2 s)"; else not_ok "... in seconds ($s2 s)"; fi
unlike "... no builder sandbox was made" "$(cat "$T/b2.err")" 'builder sandbox'

echo "page two" >"$CTX/www/index.html"
build b3 web --dockerfile "$CTX"
is "one file changed builds" "$(cat "$T/b3.rc")" 0
v2=$(tget web "['version']")
if [ -n "$v2" ] && [ "$v2" != "$v1" ]; then ok "... a new version ($v2)"
else not_ok "... a new version"; diag "$v1 then $v2"; fi
check "... its builder sandbox is gone" no_builder
check "the sandbox made before still names its version" \
	grep -q "templates/web/$v1/" "$STATE/vms/w1/sandbox.conf"
check "... whose files are still there" test -f "$STATE/templates/web/$v1/template.json"
is "... and still serves the page it was made with" "$(bcurl "$URL/" 2>&1)" "page one"
out=$(netctl sandbox create w2 --template web 2>&1) ||
	bail "sandbox create w2: $out; $(netctl sandbox events w2 2>&1 | tail -n 3)"
is "a new sandbox gets the new version" \
	"$(netctl sandbox exec w2 -- /bin/busybox cat /www/index.html </dev/null 2>&1)" "page two"
check "... it names the new version" grep -q "templates/web/$v2/" "$STATE/vms/w2/sandbox.conf"
netctl sandbox rm w2 >/dev/null

# ---- a failing step -------------------------------------------------------------
BAD="$T/bad"
mkdir -p "$BAD"
cp /bin/busybox "$BAD/busybox"
cat >"$BAD/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "echo the-step-said-this; exit 3"]
EOF
build b4 web --dockerfile "$BAD"
is "a failing RUN fails the build" "$(cat "$T/b4.rc")" 1
like "... the error names the step" "$(tail -n 1 "$T/b4.err")" \
	'^netctl: template web: build failed: .*Dockerfile step 3/3 \(RUN .*returned a non-zero code: 3'
like "... its output among the lines shown" "$(cat "$T/b4.err")" 'the-step-said-this'
check "... its builder sandbox is gone" no_builder
is "... the current version untouched" "$(tget web "['version']")" "$v2"

# ---- a base image made locally: Debian, apt through the build policy ------------
wait "$MMD"
if [ "$(cat "$T/mmdebstrap.rc" 2>/dev/null)" != 0 ] &&
   grep -qiE 'could not resolve|failed to fetch|temporary failure|unable to connect|network is unreachable' \
	"$T/mmdebstrap.log"; then
	ok "# SKIP a Debian base: the apt sources are out of reach: $(tail -n 1 "$T/mmdebstrap.log")"
else
	[ "$(cat "$T/mmdebstrap.rc")" = 0 ] || bail "mmdebstrap: $(tail -n 5 "$T/mmdebstrap.log")"
	cat >"$T/debctx/Dockerfile" <<'EOF'
FROM scratch
ADD base.tar.gz /
RUN apt-get update && apt-get install -y --no-install-recommends hello && \
    rm -rf /var/lib/apt/lists/*
RUN useradd -m -u 1500 agent && mkdir /home/agent/work && chown agent /home/agent/work
ENV GREETING=from-the-debian-base
WORKDIR /home/agent/work
USER agent
CMD ["sleep", "infinity"]
EOF
	build b7 deb --dockerfile "$T/debctx"
	is "a Dockerfile FROM a Debian base made here builds" "$(cat "$T/b7.rc")" 0
	like "... its steps among the lines" "$(cat "$T/b7.err")" \
		'Step 3/8 : RUN apt-get update'
	check "... its builder under the build policy's allowlist (deb.debian.org, security.debian.org)" \
		grep -q 'egress tpl-build-deb: allowlist, 2 allow and 0 deny' "$BERTHD_LOG"
	check "... its builder sandbox is gone" no_builder
	out=$(netctl sandbox create d1 --template deb 2>&1) ||
		bail "sandbox create d1: $out; $(netctl sandbox events d1 2>&1 | tail -n 3)"
	is "exec sees its ENV, WORKDIR and USER" \
		"$(netctl sandbox exec d1 -- sh -c 'echo "$GREETING $(pwd) $(id -un) $(id -u)"' </dev/null 2>&1)" \
		"from-the-debian-base /home/agent/work agent 1500"
	is "... and the package apt-get installed" \
		"$(netctl sandbox exec d1 -- hello </dev/null 2>&1)" "Hello, world!"
	netctl sandbox rm d1 >/dev/null
fi

# ---- past template_build_timeout ------------------------------------------------
SLOW="$T/slow"
mkdir -p "$SLOW"
cp /bin/busybox "$SLOW/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "sleep", "900"]\n' \
	>"$SLOW/Dockerfile"
# the same berthd, its config reloaded: the listeners' ports kept
sed -i 's/^template_max_context .*/template_max_context 4/' "$CONF"
echo "template_build_timeout 20s" >>"$CONF"
kill -HUP "$BERTHD_PID"
wait_log 30 "$BERTHD_LOG" "reloaded configuration|configuration not reloaded" "$BERTHD_PID"
grep -q "configuration not reloaded" "$BERTHD_LOG" &&
	bail "berthd did not reload its configuration: $(grep 'not reloaded' "$BERTHD_LOG")"
build b5 slow --dockerfile "$SLOW"
is "a build past template_build_timeout fails" "$(cat "$T/b5.rc")" 1
like "... ended, saying why" "$(tail -n 1 "$T/b5.err")" \
	'build failed: the build took longer than 20 s \(template_build_timeout\) and was ended \((exit|signal) [0-9]+\) \(its whole log: '
s5=$(cat "$T/b5.s")
if [ "$s5" -lt 120 ]; then ok "... within its time and the grace after ($s5 s)"
else not_ok "... within its time and the grace after ($s5 s)"; fi
if wait_for 60 no_builder; then ok "... its builder sandbox is gone"
else not_ok "... its builder sandbox is gone"; diag "$(netctl sandbox ls)"; fi
check "... no template slow" sh -c "! netctl template ls | grep -q '^slow '"

# ---- over template_max_context -------------------------------------------------
BIG="$T/big"
mkdir -p "$BIG"
printf 'FROM scratch\nCOPY blob /blob\n' >"$BIG/Dockerfile"
head -c 6M /dev/urandom >"$BIG/blob"
build b6 big --dockerfile "$BIG"
is "a context over template_max_context is refused" "$(cat "$T/b6.rc")" 1
like "... saying so" "$(tail -n 1 "$T/b6.err")" 'over 4 MiB \(template_max_context\)'
check "... no builder was made" no_builder
check "... nothing of it is kept" sh -c "! ls '$STATE/templates/.source/big' 2>/dev/null"
is "the template before still serves" "$(bcurl "$URL/" 2>&1)" "page one"

netctl sandbox rm w1 >/dev/null
done_testing
