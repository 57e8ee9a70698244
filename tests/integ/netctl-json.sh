#!/bin/sh
# netctl-json.sh — `netctl --json` prints exactly one JSON document for
# every command, whether berthd did it, refused it, could not be reached
# or the command line was wrong: the script walks every command that
# `netctl --json help` lists against a real berthd without VMs (an
# external sandbox; the VM verbs are refused, which must be one document
# too) and fails if one is left out. The exit codes are checked on the
# way (0 done, 1 refused, 2 usage, 3 unreachable, 4 denied).
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth

berthd_config
start_berthd

: >"$T/walked"
# j WANT_RC ARGS...: netctl --json ARGS; checks the exit code and that
# stdout is one JSON document (python's json.loads of all of it). The
# document is left in $T/doc, the command ("noun verb") in $T/walked.
j() {
	_want=$1; shift
	"$NETCTL" -s "$STATE" --json "$@" >"$T/doc" 2>"$T/err"
	_rc=$?
	printf '%s\n' "$*" | awk '{ print $1, ($2 ~ /^-/ || $2 == "") ? "" : $2 }' >>"$T/walked"
	if [ "$_rc" != "$_want" ]; then
		not_ok "--json $*: exit $_want"
		diag "exit $_rc" "stdout: $(cat "$T/doc")" "stderr: $(cat "$T/err")"
		return
	fi
	if _why=$(python3 -I -c 'import json,sys
t=open(sys.argv[1]).read()
d=json.loads(t)
assert isinstance(d, dict), "not an object"
assert t.count("\n") == 1 and t.endswith("\n"), "not one line"' "$T/doc" 2>&1); then
		ok "--json $*: exit $_want, one document"
	else
		not_ok "--json $*: exit $_want, one document"
		diag "$_why" "stdout: $(head -c 2000 "$T/doc")"
	fi
}
# doc EXPR: a python expression on the last document `j`
doc() { json_get "$(cat "$T/doc")" "$1"; }

j 0 status
is "status: ok" "$(doc 'j["status"]')" ok
j 0 help
j 0 help sandbox create
is "help --json: the command asked for" "$(doc '[c["command"] for c in j["commands"]]')" '["sandbox create"]'

# sandboxes (external: this berthd runs no VMs)
j 0 sandbox create js-1 --address 127.0.0.1
like "create: the token, once" "$(doc 'j["token"]')" '^berth_'
j 0 sandbox add js-2 --address 127.0.0.2
j 1 sandbox create js-1 --address 127.0.0.1
is "an error is the API's error document" "$(doc 'j["error"]["code"]')" conflict
j 1 sandbox create js-3
like "no VMM: says so" "$(doc 'j["error"]["message"]')" 'runs no VMM'
j 2 sandbox create js-3 --address 127.0.0.3 --memory 512
is "a usage error is netctl's own document" "$(doc 'j["error"]["code"]')" usage
j 2 sandbox create
j 0 sandbox ls
is "ls: both sandboxes" "$(doc 'len(j["sandboxes"])')" 2
j 0 sandbox show js-1
j 1 sandbox show js-9
is "unknown sandbox: 404" "$(doc 'j["error"]["status"]')" 404
j 1 sandbox set js-1 --idle-pause 10m
j 2 sandbox set js-1
for v in pause suspend resume start stop restart; do
	j 1 sandbox $v js-1
	like "$v of an external sandbox is refused" "$(doc 'j["error"]["message"]')" 'not a VM-backed sandbox'
done
j 0 sandbox events js-1
is "the refusals are events" "$(doc '" ".join(e["operation"] for e in j["events"] if e["result"]=="refused")')" \
	"pause suspend resume start stop restart"
j 1 sandbox console js-1
like "an external sandbox has no console" "$(doc 'j["error"]["message"]')" 'has no console'
j 1 sandbox exec js-1 -- true
like "an external sandbox runs no commands" "$(doc 'j["error"]["message"]')" 'not a VM|VM-backed|external'
j 1 sandbox fork js-1 js-f
like "an external sandbox has no VM to fork" "$(doc 'j["error"]["message"]')" 'not a microVM'
j 2 sandbox fork js-1
j 1 sandbox checkpoint js-1 c1
like "an external sandbox has no checkpoints" "$(doc 'j["error"]["message"]')" 'not a microVM'
j 2 sandbox checkpoint js-1 C_1
j 1 sandbox restore js-1 c1
j 1 checkpoint ls js-1
j 1 checkpoint rm js-1 c1
j 1 sandbox create js-2 --from js-1:c1
like "create --from a checkpoint of an external sandbox" "$(doc 'j["error"]["message"]')" 'not a microVM'
j 2 sandbox create js-2 --from js-1
j 2 sandbox create js-2 --from js-1:c1 --memory 512
echo x >"$T/cpin"
j 1 sandbox cp "$T/cpin" js-1:/tmp/x
like "an external sandbox holds no files" "$(doc 'j["error"]["message"]')" 'not a VM-backed sandbox'
j 2 sandbox cp "$T/cpin" "$T/cpout"
j 2 sandbox cp "$T/cpin" js-1:relative
j 1 sandbox files js-1 /tmp
like "files: an external sandbox has no guest" "$(doc 'j["error"]["message"]')" 'not a VM-backed sandbox'
j 2 sandbox files js-1 tmp
j 1 sandbox mkdir js-1 /tmp/x --parents
j 1 sandbox rm js-1 /tmp/x --recursive
j 2 sandbox rm js-1 --recursive
j 1 sandbox mv js-1 /tmp/x /tmp/y
j 2 sandbox cat js-1 /tmp/x
j 1 sandbox watch js-1 /tmp
j 2 sandbox attach js-1 1
j 1 sandbox ps js-1
like "an external sandbox has no processes" "$(doc 'j["error"]["message"]')" 'no guest processes'
j 1 sandbox logs js-1 1
j 2 sandbox logs js-1 0
like "process 0: a usage error naming it" "$(doc 'j["error"]["message"]')" "'0' is not a process number"
j 1 sandbox kill js-1 1 --signal TERM
j 2 sandbox kill js-1 1 --signal 99
j 1 sandbox wait js-1 1
j 2 sandbox exec js-1 --ring 1M -- true
like "--ring without --detach: a usage error" "$(doc 'j["error"]["message"]')" 'only with --detach'
j 2 sandbox exec js-1 --detach --ring 12 -- true

# ports
j 0 port publish js-1 8080
j 0 port publish js-1 9090 --private --host js.example.test
j 0 port ls
j 0 port ls js-1
is "two ports" "$(doc 'len(j["ports"])')" 2
j 0 port unpublish js-1 9090
is "unpublish says what" "$(doc 'j["unpublished"], j["port"]')" "(True, 9090)"
j 1 port unpublish js-1 9090

# egress and the policy
j 0 egress show js-1
j 0 egress allow js-1 example.com:443 '*.example.org'
is "two rules, one document" "$(doc 'len(j["rules"])')" 2
j 0 egress deny js-1 203.0.113.0/24 --ttl 10m
j 4 egress allow js-1 10.1.0.0/16 api.example.net
is "a refused rule: the error document" "$(doc 'j["error"]["status"]')" 403
j 0 egress rm js-1 allow example.com:443
j 1 egress rm js-1 allow example.com:443
j 0 egress mode js-1 allowlist
j 0 egress reset js-1
j 0 egress log js-1
j 0 policy show
j 0 policy set --max-rules 100
j 2 policy set

# tokens
j 0 token create --sandbox js-1 --name walk
tid=$(doc 'j["id"]')
j 0 token ls
j 0 token rotate "$tid"
j 0 token revoke "$tid"
j 1 token revoke "$tid"

# templates: a directory that loads (a kernel file is all it checks)
mkdir -p "$T/tpl"
: >"$T/tpl/vmlinuz"
echo '{"name":"walk","kernel":"vmlinuz","cmdline":"console=ttyS0"}' >"$T/tpl/template.json"
j 0 template ls
is "template ls: the built-in default" "$(doc '" ".join(t["name"] for t in j["templates"])')" default
j 0 template add walk "$T/tpl"
is "template add: the directory" "$(doc 'j["dir"]')" "$T/tpl"
j 1 template add walk2 "$T/nowhere"
like "a directory that does not load: says why" "$(doc 'j["error"]["message"]')" 'template.json'
j 0 template ls
j 0 template rm walk
j 1 template rm default
# building needs VMs (this berthd runs none): refused, saying why
j 1 template build debian
like "template build without a VMM: says why" "$(doc 'j["error"]["message"]')" 'no VMM'

j 1 fleet hosts
j 1 fleet drain
like "fleet drain without a fleet: says why" "$(doc 'j["error"]["message"]')" 'fleet mode is not configured'
j 1 fleet undrain
j 1 sandbox move js-2 --to b
like "sandbox move without a fleet: says why" "$(doc 'j["error"]["message"]')" 'fleet mode is not configured'
j 2 mcp
j 0 sandbox rm js-2
j 1 sandbox rm js-2

# berthd gone: still one document
"$NETCTL" -s "$T/nowhere" --json status >"$T/doc" 2>/dev/null
is "unreachable: exit 3" "$?" 3
is "unreachable: one document" "$(doc 'j["error"]["code"]')" unreachable

# every command of `netctl help` was walked
"$NETCTL" --json help >"$T/help.json"
missing=$(python3 -I -c 'import json,sys
cmds=[c["command"] for c in json.load(open(sys.argv[1]))["commands"]]
walked=set(l.strip() for l in open(sys.argv[2]))
alias={}
for c in json.load(open(sys.argv[1]))["commands"]:
    if c.get("alias"): alias[c["command"].split()[0]+" "+c["alias"]]=c["command"]
walked|=set(alias.get(w,w) for w in walked)
print(" ".join(c for c in cmds if c not in walked))' "$T/help.json" "$T/walked")
is "every command was walked" "$missing" ""
done_testing
