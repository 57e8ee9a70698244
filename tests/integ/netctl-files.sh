#!/bin/sh
# netctl-files.sh — netctl's commands for a guest's files and the MCP
# file tools, against a real microVM (qemu, TCG, one boot): `sandbox
# files` lists a directory (types file, dir, link; modes; sizes; names
# that are not UTF-8 or printable shown escaped; --json with name_base64;
# --limit cut and said so on stderr); `sandbox mkdir` (--mode, --parents,
# an existing path refused with a clear message); `sandbox rm` with a path
# (a file; a directory not empty refused without -r, removed with it; a
# missing path an error; `sandbox rm <id> -r` refused as a usage error,
# the sandbox kept); `sandbox mv` (a rename; refused onto an existing file
# without --overwrite, done with it); `sandbox cat` byte-exact, whole and
# with --offset/--length; `sandbox watch` (create, modify, move_from/to,
# delete, a directory's path ending in '/'; --json with the ready line
# and a move's shared cookie; --recursive sees a subdirectory made after
# the start; the directory removed ends it with exit 0; a client that
# stops reading gets "overflow" once it reads again; a missing directory
# or a file refused); MCP list_files, make_directory, move_path,
# remove_path and read_file with offset/length.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip_all "qemu-system-x86_64 is not installed"

VMM=on berthd_config "tap_prefix bnf" "vm_pool 10.235.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd

out=$(netctl sandbox create nf 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events nf 2>&1 | tail -n 3)"
like "created, running" "$out" 'sandbox nf created \(10\.235\.0\.[0-9]+, running\)'

x() { netctl sandbox exec nf "$@" </dev/null; }
# n WANT DESC ARGS...: netctl ARGS exits WANT; stdout in $T/o, stderr $T/e
n() {
	_want=$1 _d=$2; shift 2
	netctl "$@" >"$T/o" 2>"$T/e" </dev/null
	_rc=$?
	if [ "$_rc" = "$_want" ]; then ok "$_d"
	else not_ok "$_d"; diag "exit $_rc, want $_want" "stdout: $(head -c 1000 "$T/o")" "stderr: $(cat "$T/e")"; fi
}
jo() { json_get "$(cat "$T/o")" "$1"; }	# EXPR over the last stdout

# ---- sandbox files ----
x -- sh -c 'mkdir -p /tmp/l/sub && chmod 750 /tmp/l/sub &&
	printf 12345 >/tmp/l/file && chmod 640 /tmp/l/file &&
	ln -s file /tmp/l/link && touch "/tmp/l/$(printf "bad\377name")" \
	"/tmp/l/$(printf "nl\nx")" && chmod 600 /tmp/l/bad* /tmp/l/nl*' ||
	bail "could not make /tmp/l in the guest"
n 0 "files: exit 0" sandbox files nf /tmp/l
is "files: a header, then one row per entry, by name" \
	"$(awk '{ print $1, $2, $NF }' "$T/o")" "TYPE MODE NAME
file 0600 bad\\xffname
file 0640 file
link 0777 link
file 0600 nl\\x0ax
dir 0750 sub"
is "files: sizes (a link's is its target's length)" \
	"$(awk '$NF == "file" || $NF == "link" { print $NF, $3 }' "$T/o")" "file 5
link 4"
like "files: MTIME in UTC to the millisecond" "$(awk '$NF == "file" { print $4 }' "$T/o")" \
	'^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z$'
is "files: nothing on stderr" "$(cat "$T/e")" ""
n 0 "files --json: exit 0" --json sandbox files nf /tmp/l
is "files --json: path, truncated" "$(jo '[j["path"], j["truncated"]]')" '["/tmp/l", false]'
is "files --json: name, type, mode, size of each" \
	"$(jo '[[e.get("name"), e["type"], e["mode"], e["size"]] for e in j["entries"] if e.get("name") in ("file", "link", "sub")]')" \
	'[["file", "file", "0640", 5], ["link", "link", "0777", 4], ["sub", "dir", "0750", '"$(x -- stat -c %s /tmp/l/sub)"']]'
is "files --json: a name that is not UTF-8 as name_base64" \
	"$(jo '[e["name_base64"] for e in j["entries"] if "name_base64" in e]')" \
	"[\"$(printf 'bad\377name' | base64)\"]"
is "files --json: mtime_ms agrees with mtime" \
	"$(jo '[e["mtime"] == __import__("time").strftime("%Y-%m-%dT%H:%M:%S", __import__("time").gmtime(e["mtime_ms"] // 1000)) + ".%03dZ" % (e["mtime_ms"] % 1000) for e in j["entries"]]')" \
	"[true, true, true, true, true]"
x -- sh -c 'mkdir /tmp/many && cd /tmp/many && seq 1 7 | xargs touch'
n 0 "files --limit 3: exit 0" sandbox files nf /tmp/many --limit 3
is "... three rows under the header" "$(wc -l <"$T/o")" 4
like "... and stderr says the listing was cut" "$(cat "$T/e")" 'cut at 3 entries'
n 0 "files --json --limit 3" --json sandbox files nf /tmp/many --limit 3
is "... three entries, truncated" "$(jo '[len(j["entries"]), j["truncated"]]')" '[3, true]'
n 0 "files --limit 7: all of them" --json sandbox files nf /tmp/many --limit 7
is "... not truncated" "$(jo '[len(j["entries"]), j["truncated"]]')" '[7, false]'
n 2 "files --limit 0: a usage error" sandbox files nf /tmp/many --limit 0
n 2 "files of a relative path: a usage error" sandbox files nf tmp
n 1 "files of a missing directory: exit 1" sandbox files nf /tmp/nope
is "... saying so" "$(cat "$T/e")" 'netctl: no directory /tmp/nope in the guest'
n 1 "files of a file: exit 1" sandbox files nf /tmp/l/file
like "... saying it is not a directory" "$(cat "$T/e")" '^netctl: .*not a directory'

# ---- sandbox mkdir ----
n 0 "mkdir --mode 0700" sandbox mkdir nf /tmp/d1 --mode 0700
is "... a directory of mode 700" "$(x -- stat -c '%F %a' /tmp/d1)" "directory 700"
n 0 "mkdir without --mode" --json sandbox mkdir nf /tmp/d0
is "... --json: the API's answer" "$(jo '[j["path"], j["created"]]')" '["/tmp/d0", true]'
is "... mode 755" "$(x -- stat -c %a /tmp/d0)" 755
n 1 "mkdir of an existing path: exit 1" sandbox mkdir nf /tmp/d1
is "... saying it exists" "$(cat "$T/e")" 'netctl: /tmp/d1 exists'
n 1 "mkdir with a missing parent: exit 1" sandbox mkdir nf /tmp/p/q/r
is "... saying so" "$(cat "$T/e")" 'netctl: a parent of /tmp/p/q/r is missing'
n 0 "mkdir --parents" sandbox mkdir nf /tmp/p/q/r --parents
is "... made them all" "$(x -- stat -c %F /tmp/p/q/r)" directory
n 0 "mkdir -p of an existing directory: done" sandbox mkdir nf -p /tmp/p/q
n 2 "mkdir --mode 9: a usage error" sandbox mkdir nf /tmp/d2 --mode 9

# ---- sandbox rm <id> <path> ----
x -- sh -c 'mkdir -p /tmp/r/full/deep && echo x >/tmp/r/full/deep/f && echo y >/tmp/r/f'
n 0 "rm of a file" sandbox rm nf /tmp/r/f
is "... it is gone" "$(x -- sh -c 'test -e /tmp/r/f && echo there || echo gone')" gone
n 1 "rm of a directory that is not empty: exit 1" sandbox rm nf /tmp/r/full
like "... saying so" "$(cat "$T/e")" '^netctl: .*not empty'
is "... it is still there" "$(x -- cat /tmp/r/full/deep/f)" x
n 0 "rm -r of it" --json sandbox rm nf /tmp/r/full -r
is "... --json: the API's answer" "$(jo '[j["path"], j["removed"]]')" '["/tmp/r/full", true]'
is "... it is gone" "$(x -- sh -c 'test -e /tmp/r/full && echo there || echo gone')" gone
n 1 "rm of a missing path: exit 1" sandbox rm nf /tmp/r/nope
is "... saying so" "$(cat "$T/e")" 'netctl: no /tmp/r/nope in the guest'
n 1 "rm of /: refused" sandbox rm nf /
like "... saying so" "$(cat "$T/e")" '^netctl: .*root'

n 2 "rm <id> -r (no path): a usage error" sandbox rm nf -r
like "... --recursive is for a path" "$(cat "$T/e")" "option --recursive does not apply to 'sandbox rm <id>'"
n 0 "... and the sandbox is still there" sandbox show nf

# ---- sandbox mv ----
x -- sh -c 'echo one >/tmp/m1 && echo two >/tmp/m2'
n 0 "mv: a rename" sandbox mv nf /tmp/m1 /tmp/m3
is "... moved" "$(x -- sh -c 'cat /tmp/m3; test -e /tmp/m1 || echo gone')" "one
gone"
n 1 "mv onto an existing file: exit 1" sandbox mv nf /tmp/m3 /tmp/m2
is "... saying it exists" "$(cat "$T/e")" 'netctl: /tmp/m2 exists'
is "... both untouched" "$(x -- cat /tmp/m3 /tmp/m2)" "one
two"
n 0 "mv --overwrite onto it" --json sandbox mv nf /tmp/m3 /tmp/m2 --overwrite
is "... --json: the API's answer" "$(jo '[j["from"], j["to"]]')" '["/tmp/m3", "/tmp/m2"]'
is "... replaced" "$(x -- sh -c 'cat /tmp/m2; test -e /tmp/m3 || echo gone')" "one
gone"
n 1 "mv of a missing path: exit 1" sandbox mv nf /tmp/nope /tmp/m9

# ---- sandbox cat ----
x -- sh -c 'head -c 300000 /dev/urandom >/tmp/rand'
netctl sandbox cp nf:/tmp/rand "$T/rand" </dev/null || bail "cp of /tmp/rand out failed"
n 0 "cat of 300000 random bytes" sandbox cat nf /tmp/rand
check "... byte for byte" cmp "$T/o" "$T/rand"
n 0 "cat --offset 1000 --length 5000" sandbox cat nf /tmp/rand --offset 1000 --length 5000
tail -c +1001 "$T/rand" | head -c 5000 >"$T/want"
check "... exactly those bytes" cmp "$T/o" "$T/want"
n 0 "cat --offset 299990" sandbox cat nf /tmp/rand --offset 299990
tail -c 10 "$T/rand" >"$T/want"
check "... the last 10 bytes" cmp "$T/o" "$T/want"
n 0 "cat --offset 299990 --length 100: what there is" sandbox cat nf /tmp/rand --offset 299990 --length 100
check "... the last 10 bytes" cmp "$T/o" "$T/want"
n 0 "cat --length 7" sandbox cat nf /tmp/rand --length 7
head -c 7 "$T/rand" >"$T/want"
check "... the first 7 bytes" cmp "$T/o" "$T/want"
n 0 "cat --length 0: nothing" sandbox cat nf /tmp/rand --length 0
is "... no bytes" "$(wc -c <"$T/o")" 0
n 0 "cat --offset past the end: nothing" sandbox cat nf /tmp/rand --offset 400000
is "... no bytes" "$(wc -c <"$T/o")" 0
n 1 "cat of a missing file: exit 1" sandbox cat nf /tmp/nope
is "... saying so" "$(cat "$T/e")" 'netctl: no file /tmp/nope in the guest'
n 1 "cat of a directory: exit 1" sandbox cat nf /tmp/l
n 2 "cat --json: a usage error" --json sandbox cat nf /tmp/rand
is "... one JSON document" "$(jo 'j["error"]["code"]')" usage

# ---- sandbox watch ----
x -- mkdir /tmp/w
# W1: text, recursive; W2: --json, not recursive
spawn "$T/w1" "$NETCTL" -s "$STATE" sandbox watch nf /tmp/w --recursive
W1=$SPAWNED
spawn "$T/w2" "$NETCTL" -s "$STATE" --json sandbox watch nf /tmp/w
W2=$SPAWNED
check "watch --json: the ready line first" wait_log 60 "$T/w2" '^\{"event":"ready"'
is "... it names the directory" "$(head -n 1 "$T/w2" | json_get "$(cat)" 'j["path"]')" /tmp/w
# the text one says nothing when ready: touch a file until it shows
w1_ready() {
	x -- touch /tmp/w/.ping >/dev/null 2>&1
	grep -q '^[a-z_]* /tmp/w/\.ping$' "$T/w1"
}
check "watch (text): running" wait_for 60 w1_ready
x -- sh -c 'echo a >/tmp/w/f1'
x -- mv /tmp/w/f1 /tmp/w/f2
x -- rm /tmp/w/f2
x -- mkdir /tmp/w/sub
check "watch: a directory made shows with a '/'" wait_log 30 "$T/w1" '^create /tmp/w/sub/$' "$W1"
x -- sh -c 'echo b >/tmp/w/sub/g'
x -- touch /tmp/w/last
check "watch: the last event came" wait_log 30 "$T/w1" '^create /tmp/w/last$' "$W1"
check "watch --json: the last event came" wait_log 30 "$T/w2" '"path":"/tmp/w/last"' "$W2"
for l in "create /tmp/w/f1" "modify /tmp/w/f1" "move_from /tmp/w/f1" \
    "move_to /tmp/w/f2" "delete /tmp/w/f2" "create /tmp/w/sub/g"; do
	check "watch: '$l'" grep -qx "$l" "$T/w1"
done
is "watch: in order" "$(grep -E '^[a-z_]+ /tmp/w/(f1|f2|sub/?)$' "$T/w1" | uniq | tr '\n' ,)" \
	"create /tmp/w/f1,modify /tmp/w/f1,move_from /tmp/w/f1,move_to /tmp/w/f2,delete /tmp/w/f2,create /tmp/w/sub/,"
is "watch (text): nothing but events on stdout and stderr" \
	"$(grep -cvE '^(create|modify|attrib|delete|move_from|move_to) /' "$T/w1")" 0
is "watch --json: every line an object with event and path" \
	"$(python3 -c 'import json,sys
print(all("event" in d and "path" in d for d in map(json.loads, open(sys.argv[1]))))' "$T/w2")" True
is "watch --json: a rename's two events share their cookie" \
	"$(python3 -c 'import json,sys
d=[json.loads(l) for l in open(sys.argv[1])]
f=[e for e in d if e["event"]=="move_from"][0]; t=[e for e in d if e["event"]=="move_to"][0]
print(f["path"], t["path"], f["cookie"] == t["cookie"] and f["cookie"] != 0)' "$T/w2")" "/tmp/w/f1 /tmp/w/f2 True"
is "watch --json: a directory's event says dir" \
	"$(python3 -c 'import json,sys
print([e["dir"] for e in map(json.loads, open(sys.argv[1])) if e["path"] in ("/tmp/w/sub", "/tmp/w/last") and e["event"] == "create"])' "$T/w2")" \
	"[True, False]"
is "watch without --recursive: nothing from the subdirectory" \
	"$(grep -c '/tmp/w/sub/g' "$T/w2")" 0
x -- rm -r /tmp/w
for w in 1 2; do
	eval "_p=\$W$w"
	if wait_gone 30 "$_p"; then
		wait "$_p"
		is "the watched directory removed: watch $w exits 0" "$?" 0
	else
		not_ok "the watched directory removed: watch $w ends"
	fi
done
like "... its last line says so" "$(tail -n 1 "$T/w1")" '^delete_self /tmp/w/?$'
is "... (--json) its last line says so" "$(tail -n 1 "$T/w2" | json_get "$(cat)" 'j["event"]')" delete_self
n 1 "watch of a missing directory: exit 1" sandbox watch nf /tmp/nope
is "... saying so" "$(cat "$T/e")" 'netctl: no directory /tmp/nope in the guest'
n 1 "watch --json of a file: exit 1" --json sandbox watch nf /tmp/l/file
is "... one error document" "$(jo 'j["error"]["status"]')" 400

# a client that stops reading: the guest's queue overflows, said once
# it reads again; the watch goes on after it
x -- mkdir /tmp/ov
spawn "$T/wo" "$NETCTL" -s "$STATE" --json sandbox watch nf /tmp/ov
WO=$SPAWNED
check "overflow: the watch is ready" wait_log 60 "$T/wo" '^\{"event":"ready"'
kill -STOP "$WO"
# 100000 events: 10000 files made and removed, five times over
out=$(x -- sh -c 'cd /tmp/ov && i=0; while [ $i -lt 5 ]; do
	seq 1 10000 | xargs touch && seq 1 10000 | xargs rm -f || exit 1
	i=$((i + 1)); done; echo done' 2>&1)
is "overflow: 100000 events made in the guest" "$out" done
kill -CONT "$WO"
check "overflow: said once the client reads" wait_log 120 "$T/wo" '"event":"overflow"' "$WO"
x -- touch /tmp/ov/after
check "... the watch goes on" wait_log 60 "$T/wo" '"path":"/tmp/ov/after"' "$WO"
kill "$WO" 2>/dev/null
# the text form of it
x -- mkdir /tmp/ov2
spawn "$T/wt" "$NETCTL" -s "$STATE" sandbox watch nf /tmp/ov2
WT=$SPAWNED
ov2_ready() {
	x -- touch /tmp/ov2/.ping >/dev/null 2>&1
	grep -q '/tmp/ov2/\.ping$' "$T/wt"
}
check "overflow (text): watch running" wait_for 60 ov2_ready
kill -STOP "$WT"
x -- sh -c 'cd /tmp/ov2 && i=0; while [ $i -lt 5 ]; do
	seq 1 10000 | xargs touch && seq 1 10000 | xargs rm -f || exit 1
	i=$((i + 1)); done' >/dev/null 2>&1
kill -CONT "$WT"
check "overflow (text): 'overflow DIR (events were lost)' on stdout" \
	wait_log 120 "$T/wt" '^overflow /tmp/ov2 \(events were lost\)$' "$WT"
like "... and a word on stderr" "$(cat "$T/wt")" 'netctl: events under /tmp/ov2 were lost'
x -- rm -r /tmp/ov2
if wait_gone 60 "$WT"; then
	wait "$WT"
	is "... the directory removed: exit 0" "$?" 0
else
	not_ok "... the directory removed: the watch ends"
fi

# ---- MCP ----
x -- sh -c "printf '\\377\\000\\001\\200abc\\376\\377xyz' >/tmp/bin"
is "a binary file in the guest" "$(x -- od -An -tx1 /tmp/bin | tr -d ' \n')" ff000180616263feff78797a
mo=$("$NETCTL" -s "$STATE" mcp --sandbox nf <<'EOF'
{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"make_directory","arguments":{"path":"/tmp/mc/a/b","parents":true}}}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/mc/a/b/t.txt","content":"0123456789"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_files","arguments":{"path":"/tmp/mc/a/b"}}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"move_path","arguments":{"from":"/tmp/mc/a/b/t.txt","to":"/tmp/mc/t2.txt"}}}
{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/mc/t2.txt","offset":3,"length":4}}}
{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/mc/t2.txt","offset":8}}}
{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"remove_path","arguments":{"path":"/tmp/mc/a"}}}
{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"remove_path","arguments":{"path":"/tmp/mc/a","recursive":true}}}
{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_files","arguments":{"path":"/tmp/mc","limit":5}}}
{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"make_directory","arguments":{"path":"/tmp/mc"}}}
{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"move_path","arguments":{"from":"/tmp/mc/nope","to":"/tmp/mc/x"}}}
{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/bin","offset":1,"length":8}}}
{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/rand","offset":10,"length":5000,"max_bytes":100}}}
EOF
)
ans() {	# ID EXPR: EXPR over the tool result's text (t) of answer ID
	printf '%s\n' "$mo" | grep -E "\"id\":$1[,}]" | json_get "$(cat)" \
		"(lambda t: $2)(json.loads(j['result']['content'][0]['text']) if not j['result']['isError'] else 'error: ' + j['result']['content'][0]['text'])"
}
is "MCP make_directory with parents" "$(ans 1 '[t["path"], t["created"]]')" '["/tmp/mc/a/b", true]'
is "MCP list_files: the file written there" \
	"$(ans 3 '[[e["name"], e["type"], e["size"], e["mode"]] for e in t["entries"]] + [t["truncated"]]')" \
	'[["t.txt", "file", 10, "0644"], false]'
is "MCP move_path" "$(ans 4 '[t["from"], t["to"]]')" '["/tmp/mc/a/b/t.txt", "/tmp/mc/t2.txt"]'
is "MCP read_file offset 3 length 4" \
	"$(ans 5 '[t["content"], t["content_encoding"], t["offset"], t["length"], t["next_offset"], t["end_of_file"]]')" \
	'["3456", "utf-8", 3, 4, 7, false]'
is "MCP read_file offset 8: the rest, to the end" \
	"$(ans 6 '[t["content"], t["next_offset"], t["end_of_file"]]')" '["89", 10, true]'
like "MCP remove_path of a directory not empty: an error" "$(ans 7 't')" '^error: .*409.*not empty'
is "MCP remove_path recursive" "$(ans 8 '[t["path"], t["removed"]]')" '["/tmp/mc/a", true]'
is "MCP list_files: what is left" "$(ans 9 '[e["name"] for e in t["entries"]]')" '["t2.txt"]'
like "MCP make_directory of an existing path: an error" "$(ans 10 't')" '^error: .*409.*exists'
like "MCP move_path of a missing path: an error" "$(ans 11 't')" '^error: .*404'
is "MCP read_file of binary bytes: base64, byte-exact" \
	"$(ans 12 '[t["content_encoding"], t["content"], t["length"]]')" \
	"[\"base64\", \"$(printf '\000\001\200abc\376\377' | base64)\", 8]"
is "MCP read_file: max_bytes cuts a range, next_offset goes on" \
	"$(ans 13 '[t["length"] <= 100, t["content_truncated"], t["next_offset"] == 10 + t["length"]]')" \
	'[true, true, true]'
is "MCP: every call answered" "$(printf '%s\n' "$mo" | wc -l)" 13

check "berthd still running" kill -0 "$BERTHD_PID"
check "sandbox rm" netctl sandbox rm nf
done_testing
