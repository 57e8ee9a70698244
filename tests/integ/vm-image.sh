#!/bin/sh
# vm-image.sh — a template made from an image root (vmm/guest/
# mktemplate-image; issue 31 item 3) in real microVMs under TCG. The
# "image" is made here on the host, as berth-imagebuild would hand it
# over: a root directory with a static busybox, the testapp and an
# /etc/passwd with a user app (uid 1234), made an ext4 image with
# mke2fs -d (as root in $T: test-only; berth's builds make it in a
# builder sandbox), and a config.json with Env (PATH, FOO=bar),
# WorkingDir /work, User app, Entrypoint testapp and Cmd its arguments
# (port 8000), ExposedPorts 8000/tcp. mktemplate-image makes a template
# of it, `netctl template add` registers it, and a sandbox made from it:
# exec sees the image's Env, WorkingDir and User (and --user root,
# --cwd override them); the root grows to the sandbox's disk; the hostname is the sandbox's id; the image's
# command runs as the service, as app, its output on the console
# prefixed, restarted when it is killed, and answers on its published
# port through berthd over TLS; suspend -> resume and stop -> start keep
# all of that. An image without Cmd boots and execs (as root, in /).
# Three boots in all, one VM at a time: the sandbox, its start after the
# stop, the image without Cmd.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm "mke2fs: (e2fsprogs)"
ls /boot/vmlinuz-* >/dev/null 2>&1 || skip_all "no /boot/vmlinuz-* (linux-image-amd64)"
MKIMG="$top_srcdir/vmm/guest/mktemplate-image"
t0=$(date +%s)

# ---- the image: a root and its config ----
R="$T/root"
mkdir -p "$R/bin" "$R/etc" "$R/work" "$R/home/app"
cp /bin/busybox "$R/bin/busybox"
cp "$TESTAPP" "$R/bin/testapp"
printf 'root:x:0:0:root:/root:/bin/busybox\napp:x:1234:1234:app:/home/app:/bin/busybox\n' \
	>"$R/etc/passwd"
printf 'root:x:0:\napp:x:1234:\n' >"$R/etc/group"
chown 1234:1234 "$R/home/app"
mke2fs -q -F -t ext4 -d "$R" "$T/root.img" 64M >"$T/mke2fs.log" 2>&1 ||
	bail "mke2fs -d: $(cat "$T/mke2fs.log")"
# as berth-imagebuild writes it (docker inspect's .Config, ExposedPorts
# a list)
cat >"$T/config.json" <<'EOF'
{
  "Env": ["PATH=/bin:/usr/bin", "FOO=bar"],
  "WorkingDir": "/work",
  "User": "app",
  "Entrypoint": ["/bin/testapp"],
  "Cmd": ["-l", "0.0.0.0", "-p", "8000"],
  "ExposedPorts": ["8000/tcp"]
}
EOF
"$MKIMG" "$T/root.img" "$T/config.json" "$T/img1" >"$T/mk1.log" 2>&1
rc=$?
is "mktemplate-image ROOTIMG CONFIGJSON OUTDIR" "$rc" 0
[ "$rc" = 0 ] || { cat "$T/mk1.log" >&2; bail "mktemplate-image failed"; }
like "... saw the image's command (Entrypoint + Cmd), user, workdir" "$(cat "$T/mk1.log")" \
	'command \["/bin/testapp", "-l", "0.0.0.0", "-p", "8000"\], user app, workdir /work'
tj=$(cat "$T/img1/template.json")
is "... template.json: root_overlay" "$(json_get "$tj" 'j["root_overlay"]')" True
is "... the exposed port" "$(json_get "$tj" 'j["ports"]')" "[8000]"
is "... the agent's port" "$(json_get "$tj" 'j["agent"]')" berth.agent
# a bad config is refused
echo '{"WorkingDir": "work"}' >"$T/bad.json"
out=$("$MKIMG" "$T/root.img" "$T/bad.json" "$T/bad" 2>&1)
is "a relative WorkingDir: refused" "$?" 1
like "... saying so" "$out" "WorkingDir 'work' is not absolute"
check "... and no template left" test ! -e "$T/bad/template.json"

CTL_PORT=$(free_port)
VMM=on berthd_config "tap_prefix bim" "vm_pool 10.239.0.0/24" \
	"idle_pause never" "idle_suspend never" \
	"control_listen 127.0.0.1:$CTL_PORT"
start_berthd
at_exit "rm -rf '$STATE/vms'"
check "template add img1" netctl template add img1 "$T/img1"

# ---- a sandbox of the image ----
t1=$(date +%s)
out=$(netctl sandbox create s1 --template img1 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events s1 2>&1 | tail -n 3)"
like "created from img1, running" "$out" 'sandbox s1 created \(10\.239\.0\.[0-9]+, running\)'
diag "booted in $(($(date +%s) - t1)) s"
CONSOLE="$STATE/vms/s1/console.log"
x() { netctl sandbox exec s1 "$@" </dev/null; }
state() { netctl --json sandbox show s1 | json_get "$(cat)" 'j["state"]'; }

exec_defaults() {	# WHEN
	is "$1: exec sees the image's Env, WorkingDir and User" \
		"$(x -- busybox sh -c 'echo $FOO; pwd; id -u' 2>&1)" "$(printf 'bar\n/work\n1234')"
}
exec_defaults "booted"
is "... the user's HOME, the image's PATH" \
	"$(x -- busybox sh -c 'echo $HOME $PATH' 2>&1)" "/home/app /bin:/usr/bin"
is "exec --user root: uid 0, still in the WorkingDir" \
	"$(x --user root -- busybox sh -c 'id -u; pwd' 2>&1)" "$(printf '0\n/work')"
is "exec --cwd / --env FOO=baz: the exec's own win" \
	"$(x --cwd / --env FOO=baz -- busybox sh -c 'echo $FOO; pwd' 2>&1)" "$(printf 'baz\n/')"
# a 64 MiB image, the sandbox's disk berthd's default 1 GiB: the root
# grew to it
root_mib=$(x -- busybox df -m / 2>/dev/null | awk 'NR == 2 { print $2 }')
if [ -n "$root_mib" ] && [ "$root_mib" -gt 900 ] 2>/dev/null; then
	ok "the 64 MiB root file system grew to the 1 GiB disk ($root_mib MiB)"
else
	not_ok "the 64 MiB root file system grew to the 1 GiB disk"; diag "df: $root_mib"
fi
is "the hostname is the sandbox's id" "$(x -- busybox hostname 2>&1)" s1
is "... in /etc/hostname too" "$(x -- busybox cat /etc/hostname 2>&1)" s1
like "/etc/resolv.conf names the gateway" "$(x -- busybox cat /etc/resolv.conf 2>&1)" \
	'^nameserver 10\.239\.0\.[0-9]+$'
check "the image's /sbin/init did not run: PID 1 is berth's init" \
	sh -c "'$NETCTL' -s '$STATE' sandbox exec s1 -- busybox cat /proc/1/cmdline </dev/null | tr '\0' ' ' | grep -q /run/berth/berth-init"

# ---- the service ----
svc_pid() { x -- busybox pidof testapp 2>/dev/null; }
check "the image's command runs (testapp)" wait_for 30 svc_pid
pid1=$(svc_pid)
is "... as the image's user" "$(x -- busybox stat -c %u "/proc/$pid1" 2>&1)" 1234
is "... in its WorkingDir" "$(x --user root -- busybox readlink "/proc/$pid1/cwd" 2>&1)" /work
is "... with its Env" "$(x --user root -- busybox grep -c FOO=bar "/proc/$pid1/environ" 2>&1)" 1
check "... its output on the console, prefixed" \
	wait_log 10 "$CONSOLE" '^service: .*listening on'
out=$(netctl port publish s1 8000 2>&1)
is "port publish s1 8000" "$?" 0
[ -n "$out" ] && diag "$out"
served() { [ "$(bcurl -o /dev/null -w '%{http_code}' "$(url_for 8000 s1)/healthz" 2>/dev/null)" = 200 ]; }
check "the service answers through berthd over TLS" wait_for 30 served
x --user root -- busybox kill "$pid1"
restarted() { p=$(svc_pid) && [ -n "$p" ] && [ "$p" != "$pid1" ]; }
check "killed, the service is started again" wait_for 30 restarted
like "... the init says so on the console" "$(cat "$CONSOLE")" 'berth-guest: service exited \([0-9]+\) after [0-9]+ s, restarting in 1 s'
check "... and answers again" wait_for 30 served

# ---- suspend -> resume, stop -> start ----
check "suspend" netctl sandbox suspend s1
is "suspended" "$(state)" suspended
check "resume" netctl sandbox resume s1
exec_defaults "after suspend and resume"
check "... the service answers" wait_for 30 served
check "stop" netctl sandbox stop s1
is "stopped" "$(state)" stopped
t2=$(date +%s)
check "start" netctl sandbox start s1
diag "started in $(($(date +%s) - t2)) s"
exec_defaults "after stop and start"
is "... the hostname" "$(x -- busybox hostname 2>&1)" s1
check "... the service answers" wait_for 60 served
cp "$CONSOLE" "$T/s1.console" 2>/dev/null
check "delete s1" netctl sandbox delete s1
check "... gone" wait_for 30 test ! -e "$STATE/vms/s1"

# ---- an image without Cmd (nor User, WorkingDir) ----
printf '{"Env": ["PATH=/bin"], "Cmd": null, "Entrypoint": null}\n' >"$T/nocmd.json"
"$MKIMG" "$T/root.img" "$T/nocmd.json" "$T/img2" >"$T/mk2.log" 2>&1
rc=$?
is "mktemplate-image of an image without Cmd" "$rc" 0
[ "$rc" = 0 ] || { cat "$T/mk2.log" >&2; bail "mktemplate-image failed"; }
check "template add img2" netctl template add img2 "$T/img2"
out=$(netctl sandbox create s2 --template img2 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events s2 2>&1 | tail -n 3)"
like "created from img2, running" "$out" 'sandbox s2 created \(10\.239\.0\.[0-9]+, running\)'
is "exec: root, in /" \
	"$(netctl sandbox exec s2 -- busybox sh -c 'id -u; pwd' </dev/null 2>&1)" "$(printf '0\n/')"
is "... the hostname" "$(netctl sandbox exec s2 -- busybox hostname </dev/null 2>&1)" s2
unlike "no service on its console" "$(cat "$STATE/vms/s2/console.log")" '^service: |service exited'
cp "$STATE/vms/s2/console.log" "$T/s2.console" 2>/dev/null
check "delete s2" netctl sandbox delete s2
diag "vm-image.sh took $(($(date +%s) - t0)) s"
done_testing
