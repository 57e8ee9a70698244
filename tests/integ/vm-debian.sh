#!/bin/sh
# vm-debian.sh — the debian template (vmm/guest/mktemplate-debian) in a
# real microVM under TCG, one sandbox shared by every check: as the
# default template (vm_template debian) berthd builds it into the state
# dir in the background from its first start, with progress in its log
# (its root image from /var/cache/berth/templates when the inputs are
# the same: the first build takes minutes), and registers it; berthd
# restarted as after an upgrade of berth (the version's recorded guest
# programs stale) rebuilds it in the background, saying why, while a
# create meanwhile is made from the version there, and the new version
# becomes current with the fingerprint of the installed programs; that
# sandbox, created with no --template, boots
# its own copy-on-write overlay of the root (grown to --disk); `netctl
# sandbox exec` runs as uid 0 with apt and Docker; a local .deb
# installed with apt and a
# file in /root survive suspend -> resume (the suspended RAM image
# without its zero pages), a guest reboot, `netctl
# sandbox restart` and a berthd restart, while the template image stays
# untouched; a rebuild makes a new version and the sandbox keeps its
# own; an image imported into
# Docker from a busybox tarball made on the host (no registry) serves
# HTTP on port 8000 with `docker run -p`, published through berthd over
# TLS; once the sandbox is gone a rebuild removes the unused versions.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm mmdebstrap dpkg-deb
# A sanitized berthd changes nothing in the guest, and this boot is the
# suite's most expensive: the normal pass runs it.
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VM runs in the normal pass only"

t0=$(date +%s)
CTL_PORT=$(free_port)
VMM=on VM_TEMPLATE=debian berthd_config "tap_prefix bxd" "vm_pool 10.232.0.0/24" \
	"idle_pause never" "idle_suspend never" "vm_free_page_reporting on" \
	"control_listen 127.0.0.1:$CTL_PORT"
start_berthd
# Binary images hold strings the sanitizer scan of $T would take for
# reports: they go before it (after the VMs).
at_exit "rm -rf '$STATE/templates' '$STATE/vms'"

# ---- the template: the default (vm_template debian), built by berthd in
# the background from its first start, its root image cached by the hash
# of its inputs (the first build takes minutes, later ones seconds) ----
t1=$(date +%s)
like "berthd is ready at once and builds the default template meanwhile" \
	"$(cat "$BERTHD_LOG")" "default template debian is not built yet: building it in the background"
wait_debian_built
ok "the default template debian built in the background"
t2=$(date +%s)
diag "template built in $((t2 - t1)) s ($(grep -c 'template debian: .*from the cache' "$BERTHD_LOG") from the cache)"
like "... its progress in berthd's log" "$(cat "$BERTHD_LOG")" 'template debian: mktemplate-debian: initramfs'
TPL=$(readlink -f "$STATE/templates/debian/current")
like "... into a version directory" "$TPL" "^$STATE/templates/debian/v[0-9]+\$"
like "... registered as debian" "$(netctl template ls)" "debian .*$STATE/templates/debian/current"
like "... and the default" "$(netctl template ls)" "default .*$STATE/templates/debian/current"
img_sum=$(sha256sum "$TPL/root.img" | cut -c1-64)

# ---- berth upgraded: the version's guest programs (init, agent, in its
# initramfs) are not the installed ones. An upgrade is a berthd stopped,
# new programs installed, berthd started: here the version's recorded
# fingerprint is made stale instead. berthd rebuilds it in the
# background (its root image from the cache) and the version there
# serves creates meanwhile: the builder is held (the real one, behind a
# stand-in that waits for the test) until the sandbox below is made ----
fp0=$(json_get "$(cat "$TPL/template.json")" 'j.get("guest", "")')
like "the version records the fingerprint of the guest programs it packed" "$fp0" '^[0-9a-f]{64}$'
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not exit"
sed -i "s/\"guest\": \"$fp0\"/\"guest\": \"$(echo "$fp0" | tr 0-9a-f f0-9a-e)\"/" "$TPL/template.json"
unlike "... made stale, as after an upgrade of berth" "$(cat "$TPL/template.json")" "$fp0"
cat >"$T/mk-held" <<EOF
#!/bin/sh
# the real builder; a build waits for the test first (bounded)
if [ "\$1" != --guest-fingerprint ]; then
	i=0
	while [ ! -e "$T/go" ] && [ \$i -lt 6000 ]; do sleep 0.1; i=\$((i + 1)); done
fi
exec "$top_srcdir/vmm/guest/mktemplate-debian" "\$@"
EOF
chmod 755 "$T/mk-held"
export BERTH_MKTEMPLATE_DEBIAN="$T/mk-held"
rm -f "$BERTHD_LOG"	# wait_log must not find the last one's "ready"
start_berthd
v0=${TPL##*/}
like "berthd restarted: the guest programs changed since the current version, rebuilt in the background" \
	"$(cat "$BERTHD_LOG")" \
	"template debian: berth's guest programs changed since version $v0: building a new version in the background; sandboxes are made from $v0 meanwhile"
build_state() {
	curl -sS --max-time 10 --unix-socket "$STATE/control.sock" \
	    http://berth/v1/templates/debian/build | json_get "$(cat)" 'j["state"]'
}
is "... GET /v1/templates/debian/build: running" "$(build_state)" running
like "... netctl status: the default template serves meanwhile" "$(netctl status)" \
	"default template: debian \(a new version for berth's new guest programs is being built: [0-9]+ s\)"

t3=$(date +%s)
# no --template: the default
out=$(netctl sandbox create deb --memory 1024 --disk 6144 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events deb 2>&1 | tail -n 3)"
like "created, running" "$out" 'sandbox deb created \(10\.232\.0\.[0-9]+, running\)'
diag "sandbox booted in $(($(date +%s) - t3)) s"
check "its root is a qcow2 overlay of the template's image" \
	sh -c "qemu-img info -U '$STATE/vms/deb/jail/disk.qcow2' | grep -q 'backing file: $TPL/root.img'"
is "... made while the new version was being built (the version there serves)" "$(build_state)" running
touch "$T/go"
wait_log 600 "$BERTHD_LOG" "template debian built in|template debian: build failed" "$BERTHD_PID" ||
	bail "the rebuild for the new guest programs did not end in 10 minutes"
grep -q "template debian built in" "$BERTHD_LOG" ||
	{ grep 'template debian:' "$BERTHD_LOG" | tail -n 20 >&2; bail "the rebuild for the new guest programs failed"; }
TPLU=$(readlink -f "$STATE/templates/debian/current")
unlike "the rebuild for the new guest programs: a new version is current" "$TPLU" "^$TPL\$"
like "... the log says new sandboxes are made from it" "$(cat "$BERTHD_LOG")" \
	"the default template debian: new sandboxes are made from ${TPLU##*/} \(each sandbox keeps its own version\)"
is "... its fingerprint is the installed programs' (the one the first build recorded)" \
	"$(json_get "$(cat "$TPLU/template.json")" 'j.get("guest", "")')" "$fp0"
check "... the version before stays: the sandbox uses it" test -s "$TPL/root.img"
unset BERTH_MKTEMPLATE_DEBIAN

x() { netctl sandbox exec deb "$@"; }
# --disk 6144 over a 4 GiB image: the overlay is 6 GiB and the guest
# grew its root file system to it
root_mib=$(x -- df -m --output=size / </dev/null | tail -n 1 | tr -d ' ')
if [ -n "$root_mib" ] && [ "$root_mib" -gt 5500 ] 2>/dev/null; then
	ok "--disk 6144: the root file system grew to the disk ($root_mib MiB)"
else
	not_ok "--disk 6144: the root file system grew to the disk"; diag "df: $root_mib"
fi
state() { netctl --json sandbox show deb | json_get "$(cat)" 'j["state"]'; }
state_is() { [ "$(state)" = "$1" ]; }
docker_up() { x --timeout 20s -- docker info >/dev/null 2>&1 </dev/null; }

# ---- root, apt, Docker (started on its socket's first client) ----
x -- sh -c 'test -S /run/docker.sock && ! pidof dockerd containerd' \
	</dev/null >/dev/null 2>&1
is "Docker's socket is there, no dockerd or containerd runs before it is used" "$?" 0
x --timeout 180s -- docker info >"$T/dinfo" 2>&1 </dev/null
rc=$?
is "the first docker info waits for dockerd and answers (exit 0)" "$rc" 0
[ "$rc" = 0 ] || { tail -n 5 "$T/dinfo" >&2; x -- tail -n 20 /var/log/dockerd.log </dev/null >&2; }
x -- sh -c 'id -u; apt-get --version; docker info' >"$T/info" 2>&1 </dev/null
is "exec id -u; apt-get --version; docker info: exit 0" "$?" 0
is "... uid 0" "$(head -n 1 "$T/info")" 0
like "... apt" "$(cat "$T/info")" 'apt [0-9]'
like "... Docker's info (cgroup v2)" "$(cat "$T/info")" 'Cgroup Version: 2'
like "... Docker stores on overlay2" "$(cat "$T/info")" 'Storage Driver: overlay2'

# ---- a local .deb with apt, a file in /root ----
mkdir -p "$T/deb/DEBIAN" "$T/deb/usr/share/berth-probe"
cat >"$T/deb/DEBIAN/control" <<EOF
Package: berth-probe
Version: 1.0
Architecture: all
Maintainer: berth tests <root@localhost>
Description: berth's persistence probe
EOF
echo probe >"$T/deb/usr/share/berth-probe/hello"
dpkg-deb -Zgzip --root-owner-group --build "$T/deb" "$T/berth-probe.deb" >/dev/null ||
	bail "dpkg-deb --build"
x -- sh -c 'cat >/root/berth-probe.deb' <"$T/berth-probe.deb"
is "the .deb copied in through exec's stdin" \
	"$(x -- sha256sum /root/berth-probe.deb </dev/null | cut -c1-64)" \
	"$(sha256sum "$T/berth-probe.deb" | cut -c1-64)"
x --timeout 120s -- apt-get install -y -q /root/berth-probe.deb >"$T/apt" 2>&1 </dev/null
rc=$?
is "apt-get install of the local .deb" "$rc" 0
[ "$rc" = 0 ] || tail -n 5 "$T/apt" >&2
secret=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
x -- sh -c "echo $secret >/root/x && sync" </dev/null
is "wrote /root/x" "$?" 0

# ---- memory given back (free page reporting; the page cache dropped
# before a suspend) ----
# the guest's RAM: its qemu's resident set, the RAM file's allocated
# blocks (MiB)
qpid() { sed -n 's/^pid=//p' "$STATE/vms/deb/sandbox.conf"; }
rss_mib() { awk '/^Rss:/ { print int($2 / 1024) }' "/proc/$(qpid)/smaps_rollup"; }
ram_mib() { echo $(($(stat -c %b "$STATE/vms/deb/jail/mem") * 512 / 1048576)); }
like "the VM has a balloon device with free page reporting" \
	"$(tr '\0' ' ' <"/proc/$(qpid)/cmdline")" 'virtio-balloon-device,free-page-reporting=on'
check "... bound to the guest's virtio_balloon driver" \
	x -- sh -c 'ls /sys/bus/virtio/drivers/virtio_balloon | grep -q virtio' </dev/null
x -- sh -c 'head -c 200M /dev/urandom >/dev/shm/fill' </dev/null
is "the guest filled a 200 MiB buffer (tmpfs)" "$?" 0
r1=$(rss_mib) b1=$(ram_mib)
diag "with the buffer: qemu RSS $r1 MiB, RAM file $b1 MiB allocated"
x -- rm -f /dev/shm/fill </dev/null
given_back() { [ "$(rss_mib)" -le $((r1 - 150)) ] && [ "$(ram_mib)" -le $((b1 - 150)) ]; }
check "... freed: at least 150 MiB of it leaves the host (RSS and the RAM file's blocks)" \
	wait_for 30 given_back
diag "freed: qemu RSS $(rss_mib) MiB, RAM file $(ram_mib) MiB allocated"
x -- sh -c 'cat /usr/bin/* /usr/sbin/* >/dev/null 2>&1; free -m' >"$T/free1" </dev/null
c1=$(awk '/^Mem:/ { print $6 }' "$T/free1")
b2=$(ram_mib)
diag "page cache filled: the guest's buff/cache $c1 MiB, RAM file $b2 MiB allocated"

persisted() {	# WHEN
	is "$1: the package is installed" \
		"$(x -- dpkg-query -W -f '${Status}' berth-probe </dev/null)" \
		"install ok installed"
	is "$1: its file" "$(x -- cat /usr/share/berth-probe/hello </dev/null)" probe
	is "$1: /root/x" "$(x -- cat /root/x </dev/null)" "$secret"
}

# ---- suspend -> resume ----
check "suspend" netctl sandbox suspend deb
is "suspended" "$(state)" suspended
b3=$(ram_mib)
diag "suspended: RAM file $b3 MiB allocated"
if [ "$b3" -le $((b2 - 50)) ]; then
	ok "the guest dropped its page cache before the suspend: the RAM image is smaller ($b2 -> $b3 MiB)"
else
	not_ok "the guest dropped its page cache before the suspend: the RAM image is smaller ($b2 -> $b3 MiB)"
fi
# the zero pages among the RAM file's allocated blocks (4 KiB each)
zero_pages() {
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); end = os.fstat(fd).st_size
off = n = 0; z = bytes(4096)
while off < end:
    try:
        d = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        break
    h = os.lseek(fd, d, os.SEEK_HOLE)
    while d < h:
        b = os.pread(fd, min(1 << 20, h - d), d)
        n += sum(1 for i in range(0, len(b), 4096) if b[i:i + 4096] == z)
        d += len(b)
    off = h
print(n)' "$1"
}
is "... and its zero pages are punched out of it (a booted guest's were a third)" \
	"$(zero_pages "$STATE/vms/deb/jail/mem")" 0
check "resume" netctl sandbox resume deb
persisted "after suspend and resume"
x -- free -m >"$T/free2" </dev/null
c2=$(awk '/^Mem:/ { print $6 }' "$T/free2")
if [ -n "$c2" ] && [ "$c2" -lt "$c1" ]; then
	ok "... its page cache is smaller after the wake ($c1 -> $c2 MiB)"
else
	not_ok "... its page cache is smaller after the wake ($c1 -> $c2 MiB)"
fi

# ---- the idle policy's pause: a command while the guest gives memory
# back gives it up (the guest still runs) ----
n0=$(grep -c 'deb: its guest gives memory back first' "$BERTHD_LOG")
check "idle-pause 2s" netctl sandbox set deb --idle-pause 2s
reclaiming() { [ "$(grep -c 'deb: its guest gives memory back first' "$BERTHD_LOG")" -gt "$n0" ]; }
check "the idle policy's pause: the guest drops its page cache first" wait_for 60 reclaiming
is "an exec meanwhile answers" "$(x -- echo here </dev/null 2>&1)" here
check "idle-pause never again" netctl sandbox set deb --idle-pause never
like "... the pause was given up (an event)" "$(netctl sandbox events deb)" \
	'pause .*abandoned: the sandbox was woken'
# it may have paused again between the exec and the set: wake it
[ "$(state)" = running ] || netctl sandbox resume deb >/dev/null
is "... it runs" "$(state)" running

# ---- a guest reboot ----
n0=$(grep -c 'berth-guest: ready' "$STATE/vms/deb/console.log" 2>/dev/null || echo 0)
x --timeout 10s -- reboot </dev/null >/dev/null 2>&1
booted_again() {
	[ "$(grep -c 'berth-guest: ready' "$STATE/vms/deb/console.log" 2>/dev/null || echo 0)" -gt "$n0" ]
}
check "the guest rebooted and is ready again" wait_for 120 booted_again
like "... an event says so" "$(netctl sandbox events deb)" 'rebooted'
check "exec answers after the reboot" wait_for 60 sh -c \
	"'$NETCTL' -s '$STATE' sandbox exec deb --timeout 10s -- true </dev/null"
persisted "after a guest reboot"

# ---- netctl sandbox restart: a new VMM on the same overlay ----
# /root/y is written right before, without a sync: the stop has the
# guest's agent sync first, so it is on the overlay when the VMM ends
secret2=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
x -- sh -c "echo $secret2 >/root/y" </dev/null
check "sandbox restart" netctl sandbox restart deb
persisted "after a sandbox restart"
is "... and /root/y, written just before it without a sync" \
	"$(x -- cat /root/y </dev/null 2>&1)" "$secret2"

# ---- the template rebuilt: a new version, the sandbox keeps its own ----
netctl template build debian >"$T/build.out" 2>"$T/build.log"
is "template build debian again" "$?" 0
like "... progress came on stderr" "$(cat "$T/build.log")" 'mktemplate-debian: initramfs'
TPL2=$(readlink -f "$STATE/templates/debian/current")
unlike "... a new version directory" "$TPL2" "^$TPL\$"
like "... the sandbox still boots from the first" \
	"$(grep '^rootfs=' "$STATE/vms/deb/sandbox.conf")" "^rootfs=$TPL/root.img\$"
check "... which is kept" test -s "$TPL/root.img"

# ---- berthd restarted ----
kill -TERM "$BERTHD_PID"
wait_gone 30 "$BERTHD_PID" || bail "berthd did not exit"
rm -f "$BERTHD_LOG"	# (the upgrade's log said what the check below must not find)
start_berthd
check "berthd restarted: running still" wait_for 30 state_is running
unlike "... the template's guest programs are the installed ones: no rebuild" \
	"$(cat "$BERTHD_LOG")" "guest programs changed|records no fingerprint|template debian: building"
persisted "after a berthd restart"
is "the template's image is unchanged" \
	"$(sha256sum "$TPL/root.img" | cut -c1-64)" "$img_sum"

# ---- Docker without a registry: an imported busybox image on 8000 ----
check "dockerd answers again" wait_for 120 docker_up
bb="$T/bbroot"
mkdir -p "$bb/bin" "$bb/www" "$bb/tmp"
cp /bin/busybox "$bb/bin/busybox"
for a in sh httpd; do ln -s busybox "$bb/bin/$a"; done
echo "hello from a container" >"$bb/www/index.html"
tar -C "$bb" --owner=0 --group=0 -czf "$T/bb.tar.gz" . || bail "tar of the busybox root"
# exec's stdin takes at most 48 KiB a command (for now): in pieces
split -b 40000 "$T/bb.tar.gz" "$T/bb.part."
x -- rm -f /root/bb.tar.gz </dev/null
for p in "$T"/bb.part.*; do
	x -- sh -c 'cat >>/root/bb.tar.gz' <"$p" || bail "copying $p in"
done
is "the busybox tarball copied in" \
	"$(x -- sha256sum /root/bb.tar.gz </dev/null | cut -c1-64)" \
	"$(sha256sum "$T/bb.tar.gz" | cut -c1-64)"
x --timeout 120s -- docker import /root/bb.tar.gz berth/busybox:test >"$T/imp" 2>&1 </dev/null
rc=$?
is "docker import of the busybox tarball" "$rc" 0
[ "$rc" = 0 ] || cat "$T/imp" >&2
x --timeout 120s -- docker run -d --name web -p 8000:8000 berth/busybox:test \
	/bin/httpd -f -p 8000 -h /www >"$T/run" 2>&1 </dev/null
rc=$?
is "docker run -d -p 8000:8000" "$rc" 0
[ "$rc" = 0 ] || cat "$T/run" >&2
served() { x --timeout 10s -- curl -fsS http://127.0.0.1:8000/ </dev/null 2>/dev/null | grep -q container; }
check "the container serves on the guest's port 8000" wait_for 60 served
# (not lib.sh's publish: it waits for /healthz, which httpd has not)
out=$(netctl port publish deb 8000 2>&1)
rc=$?
is "port publish deb 8000" "$rc" 0
[ "$rc" = 0 ] || diag "$out"
through() { [ "$(bcurl "$(url_for 8000 deb)/" 2>/dev/null)" = "hello from a container" ]; }
check "the container answers through berthd over TLS" wait_for 20 through

check "delete" netctl sandbox delete deb
check "... its overlay is gone" wait_for 30 test ! -e "$STATE/vms/deb"
is "... and the template's image is still unchanged" \
	"$(sha256sum "$TPL/root.img" | cut -c1-64)" "$img_sum"
check "a third build" netctl template build debian
check "... removes the first version (no sandbox uses it)" test ! -e "$TPL"
check "... and the second" test ! -e "$TPL2"
check "template build minimal (the busybox one)" netctl template build minimal
like "... registered as minimal" "$(netctl template ls)" "minimal .*$STATE/templates/minimal/current"
out=$(netctl template build nosuch 2>&1)
is "template build of a template berth does not know: exit 1" "$?" 1
like "... saying which it builds" "$out" "'debian' and 'minimal'"
diag "vm-debian.sh took $(($(date +%s) - t0)) s"
done_testing
