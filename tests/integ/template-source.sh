#!/bin/sh
# template-source.sh — issue 31's host side, fast: templates built from a
# Dockerfile or an image through berthd's API, netctl and MCP, with a
# stand-in for vmm/guest/mktemplate-source (BERTH_MKTEMPLATE_SOURCE:
# no VM boots; vm-template-build.sh builds for real). The stand-in
# records how it was called and what the source held, and makes its
# version a copy of the minimal template. Checked: the source streamed
# whole (the context's tar, -f, --build-arg; an --image file as it is),
# `template ls`'s version, size and source, the cache (the same source
# again runs no builder and keeps the version; any change, a build arg
# included, builds anew), MCP's build_template (its tar holds the
# Dockerfile and files as given; a path out of the context refused),
# a failing builder's reason, template_build_timeout, template_max_context
# (413, nothing kept), bad requests (400), one build at a time (409), and
# `template rm` removing the files of a template berthd built only.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm

STAND="$T/stand-in"
STAND_LOG="$T/stand"
# (berthd gives its builders an environment of its own: the paths are
# written in)
{ echo '#!/bin/sh'; echo "STAND_LOG='$STAND_LOG' STAND_TEMPLATE='$T/state/templates/default'"; } >"$STAND"
cat >>"$STAND" <<'EOF'
# NAME FROM SOURCE OUTDIR [ARGS...]
echo "stand-in: $*" >&2
echo "$*" >>"$STAND_LOG.calls"
echo "${BERTH_BUILD_MEMORY_MIB:-} ${BERTH_BUILD_DISK_MIB:-}" >"$STAND_LOG.shape"
cp "$3" "$STAND_LOG.last-source"
if [ "$2" = dockerfile ]; then
	tar -xOf "$3" ./Dockerfile 2>/dev/null >"$STAND_LOG.df" ||
		tar -xOf "$3" Dockerfile >"$STAND_LOG.df" 2>/dev/null
	if grep -q SLEEP "$STAND_LOG.df"; then echo $$ >"$STAND_LOG.pid"; exec sleep 600; fi
	if grep -q FAIL "$STAND_LOG.df"; then
		echo "stand-in: step 2/2 (RUN false) said: it-failed-here" >&2
		exit 1
	fi
fi
mkdir -p "$4"
cp -L "$STAND_TEMPLATE"/* "$4"/
echo "stand-in: template $1 in $4" >&2
EOF
chmod 755 "$STAND"
export BERTH_MKTEMPLATE_SOURCE="$STAND"

CTL_PORT=$(free_port)
VMM=on berthd_config "tap_prefix bts" "vm_pool 10.236.0.0/24" "template_max_context 1" \
	"template_build_timeout 5s" "control_listen 127.0.0.1:$CTL_PORT"
start_berthd
# the default, minimal, built before berthd was ready
STAND_TEMPLATE="$STATE/templates/default"
[ -f "$STAND_TEMPLATE/template.json" ] || bail "no minimal template to copy in $STAND_TEMPLATE"
calls() { wc -l <"$STAND_LOG.calls" 2>/dev/null || echo 0; }
tget() {	# NAME EXPR: a field of template NAME in template ls
	json_get "$(netctl --json template ls)" "[t for t in j['templates'] if t['name'] == '$1'][0]$2"
}
api() {	# METHOD PATH [CURL ARGS]: prints the status, body in $T/api.body
	_m=$1 _p=$2; shift 2
	curl -sS --max-time 30 --unix-socket "$STATE/control.sock" -o "$T/api.body" \
		-w '%{http_code}' -X "$_m" "$@" "http://berth$_p"
}

CTX="$T/ctx"
mkdir -p "$CTX/app"
printf 'FROM scratch\nCOPY app /app\n' >"$CTX/Dockerfile"
echo one >"$CTX/app/file.txt"

# ---- netctl template build --dockerfile ----------------------------------------
out=$(netctl template build t1 --dockerfile "$CTX" 2>"$T/b1.err"); rc=$?
is "a build from a Dockerfile ends well" "$rc" 0
like "... it says where" "$out" "^template t1: $STATE/templates/t1/v[0-9]"
like "... the builder's lines shown" "$(cat "$T/b1.err")" 'stand-in: template t1 in'
like "... the builder had NAME FROM SOURCE OUTDIR" "$(tail -n 1 "$STAND_LOG.calls")" \
	"^t1 dockerfile $STATE/templates/.source/t1 $STATE/templates/t1/v[0-9]+\$"
is "... berthd gave it the builder's shape (its ready snapshot's)" \
	"$(cat "$STAND_LOG.shape")" "2048 16384"
is "... the context came as a tar, whole" "$(tar -tf "$STAND_LOG.last-source" | sort | tr '\n' ' ')" \
	"./ ./Dockerfile ./app/ ./app/file.txt "
check "... the source is gone after the build" test ! -e "$STATE/templates/.source/t1"
v1=$(tget t1 "['version']")
like "template ls: the version" "$v1" '^v[0-9]+'
is "template ls: source dockerfile" "$(tget t1 "['source']['from']")" dockerfile
sha=$(tget t1 "['source']['sha256']")
like "template ls: the source's sha256" "$sha" '^[0-9a-f]{64}$'
is "template ls: its size in bytes" "$(tget t1 "['size']")" \
	"$(python3 -c 'import os, sys
d = sys.argv[1]
print(sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for f in os.listdir(d)
          if os.path.isfile(os.path.join(d, f))))' "$STATE/templates/t1/$v1")"
like "netctl template ls: the row" "$(netctl template ls)" \
	"t1 +$v1 +0 +[0-9.]+ [KMG]?i?B +dockerfile sha256:$(echo "$sha" | cut -c1-12) "
like "netctl template ls: the default's source" "$(netctl template ls)" 'default +.* minimal '

# ---- the cache ------------------------------------------------------------------
n=$(calls)
out=$(netctl template build t1 --dockerfile "$CTX" 2>"$T/b2.err"); rc=$?
is "the same context again: ok" "$rc" 0
is "... no builder ran" "$(calls)" "$n"
like "... it says cached" "$(cat "$T/b2.err")" 'the same source .* built v[0-9-]+ before: cached'
is "... the same version" "$(tget t1 "['version']")" "$v1"
echo two >"$CTX/app/file.txt"
netctl template build t1 --dockerfile "$CTX" >/dev/null 2>&1
is "one file changed: the builder ran" "$(calls)" $((n + 1))
v2=$(tget t1 "['version']")
if [ "$v2" != "$v1" ]; then ok "... a new version ($v2)"; else not_ok "... a new version"; fi
netctl template build t1 --dockerfile "$CTX" --build-arg A=1 -f Dockerfile >/dev/null 2>&1
is "a build arg and -f: the builder ran" "$(calls)" $((n + 2))
like "... they reached it" "$(tail -n 1 "$STAND_LOG.calls")" ' -f Dockerfile --build-arg A=1$'
netctl template build t1 --dockerfile "$CTX" --build-arg A=1 -f Dockerfile >/dev/null 2>&1
is "... and the same again is cached" "$(calls)" $((n + 2))
netctl template build t1 --dockerfile "$CTX" --build-arg A=2 -f Dockerfile >/dev/null 2>&1
is "... another value builds" "$(calls)" $((n + 3))

# ---- --image ----------------------------------------------------------------------
head -c 4096 /dev/urandom >"$T/image.tar"
out=$(netctl template build t2 --image "$T/image.tar" 2>&1); rc=$?
is "a build from an image file ends well" "$rc" 0
like "... from=image" "$(tail -n 1 "$STAND_LOG.calls")" '^t2 image '
check "... the file came as it is" cmp -s "$T/image.tar" "$STAND_LOG.last-source"
is "template ls: source image" "$(tget t2 "['source']['from']")" image
like "--image with -f: refused" "$(netctl template build t2 --image "$T/image.tar" -f x 2>&1)" \
	'^netctl: -f and --build-arg go with --dockerfile|only for from=dockerfile'

# ---- MCP --------------------------------------------------------------------------
mcp() {	# ONE tools/call params: the answer's line
	printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}' \
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":$1}" |
		"$NETCTL" -s "$STATE" mcp | tail -n 1
}
ans=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' | "$NETCTL" -s "$STATE" mcp)
like "MCP lists build_template" "$ans" '"name":"build_template"'
n=$(calls)
ans=$(mcp '{"name":"build_template","arguments":{"name":"t3","dockerfile":"FROM scratch\nCOPY app/x.txt /x.txt\n","files":{"app/x.txt":"hello from mcp\n"},"build_args":{"V":"1"}}}')
like "MCP build_template builds" "$ans" '"isError":false'
like "... and says so" "$ans" 'template t3 built: .*/templates/t3/v[0-9]'
like "... with the builder's lines" "$ans" 'stand-in: template t3 in'
is "... the builder ran once" "$(calls)" $((n + 1))
like "... with the build arg" "$(tail -n 1 "$STAND_LOG.calls")" ' --build-arg V=1$'
is "... its tar holds the Dockerfile and the file" \
	"$(tar -tf "$STAND_LOG.last-source" | sort | tr '\n' ' ')" "Dockerfile app/x.txt "
is "... as given" "$(tar -xOf "$STAND_LOG.last-source" app/x.txt)" "hello from mcp"
ans=$(mcp '{"name":"build_template","arguments":{"name":"t3","dockerfile":"FROM scratch\nCOPY app/x.txt /x.txt\n","files":{"app/x.txt":"hello from mcp\n"},"build_args":{"V":"1"}}}')
like "MCP build_template again: cached" "$ans" 'cached'
is "... no builder ran" "$(calls)" $((n + 1))
ans=$(mcp '{"name":"build_template","arguments":{"name":"t3","dockerfile":"FROM scratch\n","files":{"../x":"no"}}}')
like "MCP: a path out of the context refused" "$ans" 'not a path in the context'
like "... as an error" "$ans" '"isError":true'
ans=$(mcp '{"name":"template_build_status","arguments":{"name":"t3"}}')
like "MCP template_build_status" "$ans" 'state.*ok'

# ---- failures -------------------------------------------------------------------
printf 'FROM scratch\nRUN FAIL\n' >"$T/Dockerfile.fail"
mkdir -p "$T/failctx" && cp "$T/Dockerfile.fail" "$T/failctx/Dockerfile"
err=$(netctl template build t1 --dockerfile "$T/failctx" 2>&1); rc=$?
is "a failing builder: exit 1" "$rc" 1
like "... its last line is the reason" "$(echo "$err" | tail -n 1)" \
	'^netctl: template t1: build failed: the builder failed \(exit 1\): stand-in: step 2/2 \(RUN false\) said: it-failed-here \(its whole log: .*/templates/t1/build\.log\)$'
like "... whose whole log is kept, with the builder's lines and the reason" \
	"$(tr '\n' ' ' <"$STATE/templates/t1/build.log")" 'stand-in: t1 dockerfile .*it-failed-here.* failed: the builder failed'
is "... the current version kept" "$(tget t1 "['version']")" "$(readlink "$STATE/templates/t1/current")"
check "... its source is gone" test ! -e "$STATE/templates/.source/t1"

mkdir -p "$T/slowctx" && printf 'FROM scratch\nRUN SLEEP\n' >"$T/slowctx/Dockerfile"
# the second build asked for while one runs: 409
netctl template build slow --dockerfile "$T/slowctx" >/dev/null 2>"$T/slow.err" &
sp=$!
wait_log 10 "$BERTHD_LOG" "template slow: building" "$BERTHD_PID" >/dev/null
is "a second build while one runs: 409" \
	"$(api POST '/v1/templates/t9/build?from=dockerfile' --data-binary @"$T/image.tar")" 409
like "... one build at a time" "$(cat "$T/api.body")" 'is being built \(one build at a time\)'
wait "$sp"; rc=$?
is "a build past template_build_timeout: exit 1" "$rc" 1
like "... ended, saying why" "$(tail -n 1 "$T/slow.err")" \
	'build failed: the build took longer than 5 s \(template_build_timeout\) and was ended \(signal 15\) \(its whole log: '
check "... the builder is gone" sh -c "! kill -0 $(cat "$STAND_LOG.pid" 2>/dev/null || echo 1) 2>/dev/null"

# ---- limits and bad requests ------------------------------------------------------
mkdir -p "$T/bigctx"
printf 'FROM scratch\n' >"$T/bigctx/Dockerfile"
head -c 1536k /dev/urandom >"$T/bigctx/blob"
n=$(calls)
err=$(netctl template build big --dockerfile "$T/bigctx" 2>&1); rc=$?
if [ "$rc" -ne 0 ]; then ok "a context over template_max_context fails"; else not_ok "a context over template_max_context fails"; fi
like "... saying so" "$err" 'over 1 MiB \(template_max_context\)'
is "... no builder ran" "$(calls)" "$n"
check "... nothing of it kept" test ! -e "$STATE/templates/.source/big"
is "... 413 through the API" "$(api POST '/v1/templates/big/build?from=image' --data-binary @"$T/bigctx/blob")" 413
is "no from: the build of a template berth knows (none called t4): 400" \
	"$(api POST '/v1/templates/t4/build')" 400
is "from=nonsense: 400" "$(api POST '/v1/templates/t4/build?from=tarball' --data-binary @"$T/image.tar")" 400
like "... naming from" "$(cat "$T/api.body")" '"field": *"from"'
is "a bad name: 400" "$(api POST '/v1/templates/Bad_Name/build?from=image' --data-binary @"$T/image.tar")" 400
is "debian from an image: refused" "$(api POST '/v1/templates/debian/build?from=image' --data-binary @"$T/image.tar")" 400
is "an empty body: 400" "$(api POST '/v1/templates/t4/build?from=image' --data-binary '')" 400
is "build_arg without =: 400" "$(api POST '/v1/templates/t4/build?from=dockerfile&build_arg=X' --data-binary @"$T/image.tar")" 400
is "file with ..: 400" "$(api POST '/v1/templates/t4/build?from=dockerfile&file=../x' --data-binary @"$T/image.tar")" 400
is "none of these ran a builder" "$(calls)" "$n"

# ---- only admin tokens build ---------------------------------------------------------
tok=$(netctl sandbox add ext --address 127.0.0.1 | sed -n 's/^token: //p')
[ -n "$tok" ] || bail "no sandbox token"
is "a sandbox's token may not build a template: 403" \
	"$(curl -sS --cacert "$CA" --connect-to ::127.0.0.1: --max-time 30 -o "$T/api.body" \
		-w '%{http_code}' -H "Authorization: Bearer $tok" --data-binary @"$T/image.tar" \
		"https://api.$DOMAIN:$CTL_PORT/v1/templates/t5/build?from=image")" 403
ans=$(printf '%s\n' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"build_template","arguments":{"name":"t5","dockerfile":"FROM scratch\n"}}}' |
	"$NETCTL" --url "https://api.$DOMAIN:$CTL_PORT" --cacert "$CA" --token "$tok" mcp --sandbox ext | tail -n 1)
like "... nor through MCP" "$ans" 'HTTP 403'
is "none of these ran a builder" "$(calls)" "$n"

# ---- removal -----------------------------------------------------------------------
check "template rm of a built one" netctl template rm t2
check "... its files are gone" test ! -e "$STATE/templates/t2"
mkdir -p "$T/added" && cp "$STATE/templates/default/"* "$T/added/"
netctl template add added "$T/added" >/dev/null || bail "template add"
check "template rm of an added one" netctl template rm added
check "... its directory stays" test -f "$T/added/template.json"
check "berthd is still running" kill -0 "$BERTHD_PID"
done_testing
