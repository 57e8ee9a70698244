#!/bin/sh
# vm-imagebuild.sh — vmm/guest/berth-imagebuild, the in-guest half of
# issue 31's image build, in a real debian builder sandbox under TCG
# (one boot; no registry: every image is built from local files):
#  (1) a Dockerfile (-f, --build-arg) FROM scratch that COPYs the host's
#      static busybox and a small file (--chown), RUNs busybox to add a
#      symbolic link, a hard link, a character device, a setuid copy and
#      a sticky /tmp, and sets ENV/WORKDIR/EXPOSE/USER/CMD: root.img
#      checked on the host with debugfs (read-only: modes, owners,
#      links, the device, busybox's bytes) and e2fsck -fn, config.json
#      has the image's ENV/WORKDIR/USER/CMD/EXPOSE;
#  (2) a `docker save` archive of the same Dockerfile's image, and
#  (3) OCI image layouts made from that archive on the host (a directory
#      with plain layers, a tarball with gzip layers: Docker 20.10 loads
#      no OCI layout, the script converts it) give the same file tree
#      (modes, owners, sizes, hard links, link targets) and config;
#  (4) bad input: a failing RUN (the error names the step, the output's
#      tail shown), archives that are not images, a root over --max-size,
#      more members than --max-files, usage errors, and crafted layers
#      (a `..` path, a link through an absolute symbolic link, a hard
#      link out): a clear error or a result bounded to the image, nothing
#      written outside it in the guest;
# and after every run no container, image, tag or work directory of the
# script is left in the builder.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_vm mmdebstrap "debugfs: (e2fsprogs)"
[ "${BERTH_SANITIZED:-0}" = 1 ] && skip_all "the debian VM runs in the normal pass only"
need_static_busybox
SCRIPT="$top_srcdir/vmm/guest/berth-imagebuild"
[ -r "$SCRIPT" ] || skip_all "$SCRIPT is missing"

t0=$(date +%s)
VMM=on VM_TEMPLATE=debian berthd_config "tap_prefix bib" "vm_pool 10.237.0.0/24" \
	"idle_pause never" "idle_suspend never"
start_berthd
at_exit "rm -rf '$STATE/templates' '$STATE/vms'"
wait_debian_built
ok "the builder's template (debian) is built"
out=$(netctl sandbox create ib --memory 1024 --disk 6144 2>&1) ||
	bail "sandbox create: $out; $(netctl sandbox events ib 2>&1 | tail -n 3)"
like "the builder sandbox runs" "$out" 'sandbox ib created \(10\.237\.0\.[0-9]+, running\)'

x() { netctl sandbox exec ib "$@"; }
# ib NAME ARGS...: berth-imagebuild ARGS in the guest; $T/NAME.out and
# .err, $T/NAME.rc, and its last stderr line in $T/NAME.last
ib() {
	_n=$1; shift
	x --timeout 900s -- /root/berth-imagebuild "$@" >"$T/$_n.out" 2>"$T/$_n.err" </dev/null
	echo $? >"$T/$_n.rc"
	tail -n 1 "$T/$_n.err" >"$T/$_n.last"
	diag "$_n: exit $(cat "$T/$_n.rc"): $(cat "$T/$_n.last")"
}
rc_of() { cat "$T/$1.rc"; }
last_of() { cat "$T/$1.last"; }
# nothing of the script's left in the builder: containers, images
# (tags included), work directories; and nothing a crafted layer wrote
# outside its image
clean() {
	x -- sh -c 'docker ps -aq; docker images -aq; ls -d /var/tmp/berth-imagebuild.* 2>/dev/null;
		find / -xdev -name "berth-escape*" 2>/dev/null; true' </dev/null
}
# img_tree IMAGE: the file tree of an ext4 image through debugfs
# (read-only): "PATH MODE UID GID SIZE[ -> LINK][ = FIRST-HARD-LINK]",
# sorted; directories' sizes and lost+found left out
img_tree() {
	python3 - "$1" <<'EOF'
import subprocess, sys
img = sys.argv[1]
def dbg(cmd):
    return subprocess.run(["debugfs", "-R", cmd, img], capture_output=True,
                          text=True, errors="replace").stdout
rows, inos, todo = {}, {}, ["/"]
while todo:
    d = todo.pop()
    for line in dbg("ls -p " + d).splitlines():
        f = line.split("/")
        if len(f) < 7:
            continue
        ino, mode, uid, gid, name, size = f[1:7]
        if name in (".", ".."):
            continue
        p = d.rstrip("/") + "/" + name
        if p == "/lost+found":
            continue
        if mode.startswith("04"):
            todo.append(p)
            size = "-"
        extra = ""
        if mode.startswith("12"):
            for l in dbg("stat " + p).splitlines():
                if "link dest:" in l:
                    extra = " -> " + l.split("link dest:", 1)[1].strip()
        rows[p] = "%s %s %s %s %s%s" % (p, mode, uid, gid, size, extra)
        if not mode.startswith("04"):
            inos.setdefault(ino, []).append(p)
for paths in inos.values():
    first = min(paths)
    for p in paths:
        if p != first:
            rows[p] += " = " + first
print("\n".join(rows[p] for p in sorted(rows)))
EOF
}
# fetch NAME GUEST-OUT-DIR: root.img and config.json to $T/NAME.img, .json
fetch() {
	netctl sandbox cp "ib:$2/root.img" "$T/$1.img" >/dev/null &&
		netctl sandbox cp "ib:$2/config.json" "$T/$1.json" >/dev/null
}
cfg() { json_get "$(cat "$T/$1.json")" "$2"; }

# ---- inputs, made on the host and copied in ----
in="$T/in"
mkdir -p "$in/ctx" "$in/failrun" "$in/big" "$in/many" "$in/sparse" "$in/junk"
cp /bin/busybox "$in/ctx/busybox"
echo "hello berth" >"$in/ctx/hello.txt"
chmod 640 "$in/ctx/hello.txt"
# -f and --build-arg: a Dockerfile of another name (taken from the
# context), an ARG set on the command line
cat >"$in/ctx/Dockerfile.berth" <<'EOF'
FROM scratch
ARG WHO=nobody
COPY busybox /bin/busybox
COPY --chown=1000:1000 hello.txt /data/hello.txt
RUN ["/bin/busybox", "sh", "-c", "set -e; bb=/bin/busybox; $bb ln -s busybox /bin/sh; $bb ln /data/hello.txt /data/hello.hard; $bb ln -s /data/hello.txt /data/hello.sym; $bb mknod /data/cnull c 1 3; $bb cp /bin/busybox /bin/suid; $bb chmod 4755 /bin/suid; $bb mkdir -m 1777 /tmp"]
ENV GREETING="hi $WHO" PATH=/bin
WORKDIR /data
EXPOSE 8000 9000/udp
USER 1000:1000
CMD ["/bin/busybox", "httpd", "-f", "-p", "8000"]
EOF
cp /bin/busybox "$in/failrun/busybox"
cat >"$in/failrun/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "echo boom-output; echo boom-stderr >&2; exit 3"]
CMD ["/bin/busybox"]
EOF
cp /bin/busybox "$in/big/busybox"
head -c 12M /dev/urandom >"$in/big/blob"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nCOPY blob /blob\n' >"$in/big/Dockerfile"
cp /bin/busybox "$in/many/busybox"
cat >"$in/many/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox mkdir /m && cd /m && i=0 && while [ $i -lt 300 ]; do : >f$i; i=$((i + 1)); done"]
EOF
cp /bin/busybox "$in/sparse/busybox"
cat >"$in/sparse/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "truncate", "-s", "256M", "/huge"]
EOF
echo hi >"$in/junk/a"
tar -C "$in/junk" -cf "$in/notimage.tar" .
head -c 5000 /dev/urandom >"$in/random.bin"
tar -C "$in" --owner=0 --group=0 -cf "$T/in.tar" ctx failrun big many sparse notimage.tar random.bin ||
	bail "tar of the inputs"
check "the script copied in" netctl sandbox cp "$SCRIPT" ib:/root/berth-imagebuild
check "the inputs copied in" netctl sandbox cp "$T/in.tar" ib:/root/in.tar
check "... and unpacked" x -- sh -c 'chmod 755 /root/berth-imagebuild && mkdir /root/in &&
	tar -C /root/in -xf /root/in.tar --same-owner' </dev/null

# ---- (1) a Dockerfile FROM scratch ----
ib df dockerfile /root/in/ctx /root/out1 -f Dockerfile.berth --build-arg WHO=there
is "(1) dockerfile build: exit 0" "$(rc_of df)" 0
[ "$(rc_of df)" = 0 ] || { tail -n 30 "$T/df.err" >&2; bail "the first build failed"; }
like "... progress lines, one per step" "$(tr '\n' ' ' <"$T/df.err")" \
	'berth-imagebuild: step: docker build of .*berth-imagebuild: step: docker export.*berth-imagebuild: step: mkfs.ext4 -d'
like "... docker build's steps among them" "$(cat "$T/df.err")" 'berth-imagebuild: docker build: Step 5/10 : RUN'
like "... the last line says done" "$(last_of df)" '^berth-imagebuild: done: /root/out1/root.img'
check "... root.img and config.json copied out" fetch df /root/out1
like "... build.log holds docker build's output" \
	"$(x -- cat /root/out1/build.log </dev/null)" 'Successfully built'
check "... e2fsck -fn: a clean ext4 image" e2fsck -fn "$T/df.img"
top=$(debugfs -R 'ls -l /' "$T/df.img" 2>/dev/null)
like "... debugfs ls -l /: bin, data (uid 1000), tmp (sticky)" "$(echo $top)" \
	'40755 \(2\) +0 +0 .* bin.*40755 \(2\) +1000 +1000 .* data.*41777 \(2\) +0 +0 .* tmp'
unlike "... no /.dockerenv" "$top" 'dockerenv'
img_tree "$T/df.img" >"$T/df.tree"
diag "$(cat "$T/df.tree")"
tree=$(cat "$T/df.tree")
bbsize=$(stat -c %s /bin/busybox)
like "... /bin/busybox 0755 root" "$tree" "^/bin/busybox 100755 0 0 $bbsize\$"
like "... /bin/sh a symbolic link to busybox" "$tree" '^/bin/sh 120777 0 0 7 -> "?busybox"?$'
like "... /bin/suid setuid" "$tree" "^/bin/suid 104755 0 0 $bbsize\$"
like "... /data/hello.hard 0640, uid and gid 1000 (COPY --chown)" "$tree" '^/data/hello.hard 100640 1000 1000 12$'
like "... /data/hello.txt its hard link" "$tree" '^/data/hello.txt 100640 1000 1000 12 = /data/hello.hard$'
like "... /data/hello.sym an absolute symbolic link" "$tree" '^/data/hello.sym 120777 0 0 15 -> "?/data/hello.txt"?$'
like "... /data/cnull a character device" "$tree" '^/data/cnull 020644 0 0 0$'
like "... of major 1, minor 3" "$(debugfs -R 'stat /data/cnull' "$T/df.img" 2>/dev/null)" \
	'Device major/minor number: 0?1:0?3 '
like "... /tmp 1777" "$tree" '^/tmp 041777 0 0 -$'
debugfs -R 'dump /bin/busybox '"$T/bb.out" "$T/df.img" >/dev/null 2>&1
check "... busybox's bytes are the host's" cmp "$T/bb.out" /bin/busybox
is "... the hello file's" "$(debugfs -R 'cat /data/hello.txt' "$T/df.img" 2>/dev/null)" "hello berth"
is "config.json: Env" "$(cfg df 'j["Env"]')" '["PATH=/bin", "GREETING=hi there"]'
is "... WorkingDir" "$(cfg df 'j["WorkingDir"]')" /data
is "... User" "$(cfg df 'j["User"]')" 1000:1000
is "... Cmd" "$(cfg df 'j["Cmd"]')" '["/bin/busybox", "httpd", "-f", "-p", "8000"]'
is "... Entrypoint (none)" "$(cfg df 'j["Entrypoint"]')" None
is "... ExposedPorts" "$(cfg df 'j["ExposedPorts"]')" '["8000/tcp", "9000/udp"]'
is "... source" "$(cfg df 'j["source"]')" dockerfile
is "... nothing of the build left in the builder (containers, images, work dirs)" "$(clean)" ""

# ---- (2) a docker save archive of the same Dockerfile's image ----
x --timeout 900s -- sh -c 'DOCKER_BUILDKIT=0 docker build -q -t berth-test/one:v1 \
	-f /root/in/ctx/Dockerfile.berth --build-arg WHO=there /root/in/ctx >/dev/null &&
	docker save berth-test/one:v1 -o /root/saved.tar && docker rmi berth-test/one:v1 >/dev/null' \
	>"$T/save.out" 2>&1 </dev/null
is "(2) docker build + docker save in the builder (the image removed after)" "$?" 0
ib ds image /root/saved.tar /root/out2
is "... berth-imagebuild image of the docker save archive: exit 0" "$(rc_of ds)" 0
check "... its outputs copied out" fetch ds /root/out2
img_tree "$T/ds.img" >"$T/ds.tree"
check "... the same file tree as the Dockerfile build (modes, owners, links)" \
	diff -u "$T/df.tree" "$T/ds.tree"
is "... source docker-archive" "$(cfg ds 'j["source"]')" docker-archive
is "... the same run configuration" \
	"$(cfg ds '[j[k] for k in ("Env", "WorkingDir", "User", "Cmd", "Entrypoint", "ExposedPorts")]')" \
	"$(cfg df '[j[k] for k in ("Env", "WorkingDir", "User", "Cmd", "Entrypoint", "ExposedPorts")]')"
is "... the archive's tag is not left behind either" "$(clean)" ""

# ---- (3) OCI image layouts of that image, made on the host ----
netctl sandbox cp ib:/root/saved.tar "$T/saved.tar" >/dev/null || bail "copying saved.tar out"
# mkoci SAVED OUTDIR plain|gzip: an OCI image layout of a docker save archive
mkoci() {
	python3 - "$@" <<'EOF'
import gzip, hashlib, json, os, sys, tarfile
src, out, comp = sys.argv[1], sys.argv[2], sys.argv[3] == "gzip"
t = tarfile.open(src)
man = json.load(t.extractfile("manifest.json"))[0]
os.makedirs(out + "/blobs/sha256")
def desc(mt, data):
    h = hashlib.sha256(data).hexdigest()
    with open(out + "/blobs/sha256/" + h, "wb") as f:
        f.write(data)
    return {"mediaType": mt, "digest": "sha256:" + h, "size": len(data)}
layers = []
for l in man["Layers"]:
    d = t.extractfile(l).read()
    if comp:
        layers.append(desc("application/vnd.oci.image.layer.v1.tar+gzip", gzip.compress(d, mtime=0)))
    else:
        layers.append(desc("application/vnd.oci.image.layer.v1.tar", d))
cfg = desc("application/vnd.oci.image.config.v1+json", t.extractfile(man["Config"]).read())
m = desc("application/vnd.oci.image.manifest.v1+json", json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": cfg, "layers": layers}).encode())
m["annotations"] = {"org.opencontainers.image.ref.name": "v1"}
m["platform"] = {"os": "linux", "architecture": "amd64"}
with open(out + "/index.json", "w") as f:
    json.dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
               "manifests": [m]}, f)
with open(out + "/oci-layout", "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
EOF
}
mkoci "$T/saved.tar" "$T/ocidir" plain && mkoci "$T/saved.tar" "$T/ocigz" gzip ||
	bail "making the OCI layouts"
check "(3) an OCI layout made from the docker save archive (python3 on the host)" \
	test -s "$T/ocidir/index.json"
tar -C "$T/ocidir" -cf "$T/ocidir.tar" . && tar -C "$T/ocigz" -cf "$T/ocigz.tar" . ||
	bail "tar of the OCI layouts"
check "... copied in: a layout directory (plain layers)" sh -c \
	"'$NETCTL' -s '$STATE' sandbox cp '$T/ocidir.tar' ib:/root/ocidir.tar >/dev/null &&
	'$NETCTL' -s '$STATE' sandbox exec ib -- sh -c 'mkdir /root/ocidir && tar -C /root/ocidir -xf /root/ocidir.tar' </dev/null"
check "... and a layout tarball (gzip layers)" netctl sandbox cp "$T/ocigz.tar" ib:/root/ocigz.tar
like "... Docker 20.10 itself cannot load an OCI layout (why the script converts it)" \
	"$(x -- docker load -i /root/ocigz.tar </dev/null 2>&1)" 'no such file or directory'
ib od image /root/ocidir /root/out3
is "... berth-imagebuild image of the layout directory: exit 0" "$(rc_of od)" 0
like "... it said it converted the layout" "$(cat "$T/od.err")" 'step: converting the OCI layout'
check "... its outputs copied out" fetch od /root/out3
img_tree "$T/od.img" >"$T/od.tree"
check "... the same file tree as the Dockerfile build" diff -u "$T/df.tree" "$T/od.tree"
is "... source oci-layout, the docker save archive's image" \
	"$(cfg od '[j["source"], j["image_id"]]')" "[\"oci-layout\", \"$(cfg ds 'j["image_id"]')\"]"
ib ot image /root/ocigz.tar /root/out4
is "... berth-imagebuild image of the layout tarball: exit 0" "$(rc_of ot)" 0
check "... its outputs copied out" fetch ot /root/out4
img_tree "$T/ot.img" >"$T/ot.tree"
check "... the same file tree as the Dockerfile build" diff -u "$T/df.tree" "$T/ot.tree"
is "... the same run configuration" \
	"$(cfg ot '[j[k] for k in ("Env", "WorkingDir", "User", "Cmd", "Entrypoint", "ExposedPorts")]')" \
	"$(cfg df '[j[k] for k in ("Env", "WorkingDir", "User", "Cmd", "Entrypoint", "ExposedPorts")]')"
is "... nothing left in the builder" "$(clean)" ""

# ---- (4) bad input ----
ib fr dockerfile /root/in/failrun /root/out5
is "(4) a failing RUN: exit 1" "$(rc_of fr)" 1
like "... the last line names the step" "$(last_of fr)" \
	'^berth-imagebuild: failed: Dockerfile step 3/4 \(RUN \[.*exit 3"\]\): The command .* returned a non-zero code: 3$'
# (docker build interleaves the step's stdout and stderr in no fixed order)
like "... after the tail of its output: stdout" "$(tr '\n' ' ' <"$T/fr.err")" \
	'berth-imagebuild: \| boom-output'
like "... and stderr" "$(tr '\n' ' ' <"$T/fr.err")" 'berth-imagebuild: \| boom-stderr'
is "... no root.img or config.json, a build.log" \
	"$(x -- sh -c 'cd /root/out5 && ls' </dev/null)" build.log
is "... nothing left in the builder (the intermediate images too)" "$(clean)" ""

ib ni image /root/in/notimage.tar /root/out6
is "a tar that is not an image: exit 1" "$(rc_of ni)" 1
like "... says so" "$(last_of ni)" \
	'failed: /root/in/notimage.tar is not an image: it has neither manifest.json \(a docker save archive\) nor oci-layout and index.json'
ib nt image /root/in/random.bin /root/out7
is "a file that is not a tar: exit 1" "$(rc_of nt)" 1
like "... says so" "$(last_of nt)" 'failed: /root/in/random.bin is not an image: not a tar archive \(tar: This does not look like a tar archive\)'

ib big dockerfile /root/in/big /root/out8 --max-size 8
is "a root over --max-size 8: exit 1" "$(rc_of big)" 1
like "... image root N MiB over the limit 8 MiB" "$(last_of big)" \
	'failed: image root (9|1[0-9]) MiB over the limit 8 MiB'
is "... no root.img" "$(x -- ls /root/out8 </dev/null)" build.log
ib many dockerfile /root/in/many /root/out9 --max-files 200
is "300 files over --max-files 200: exit 1" "$(rc_of many)" 1
like "... says so" "$(last_of many)" 'failed: image root has over 200 files \(the limit is 200\)'
t1=$(date +%s)
ib sp dockerfile /root/in/sparse /root/out10 --max-size 64
is "a sparse 256 MiB file under --max-size 64: exit 1" "$(rc_of sp)" 1
like "... over the limit, cut off at the member's header while exporting" "$(last_of sp)" \
	'failed: image root 2[5-6][0-9] MiB over the limit 64 MiB \(counted while exporting: stopped at .huge.\)'
diag "the sparse case took $(($(date +%s) - t1)) s"
is "... nothing left in the builder" "$(clean)" ""

ib u0 </dev/null
is "no arguments: exit 2 (usage)" "$(rc_of u0)" 2
like "... the usage" "$(cat "$T/u0.err")" '^usage: berth-imagebuild dockerfile CONTEXT_DIR OUT_DIR'
ib u1 image /root/saved.tar /root/outx --bogus
is "an unknown option: exit 2" "$(rc_of u1)" 2
ib u2 image /root/saved.tar /root/outx -f Dockerfile
is "-f with an image: exit 2" "$(rc_of u2)" 2
ib u3 dockerfile /root/in/nosuch /root/outx
is "a missing context: exit 2" "$(rc_of u3)" 2
like "... named" "$(last_of u3)" "build context '/root/in/nosuch' is not a directory"
ib u4 dockerfile /root/in/big /root/outx -f nosuch
is "-f naming no file in the context: exit 1" "$(rc_of u4)" 1
like "... named" "$(last_of u4)" 'failed: no Dockerfile: /root/in/big/nosuch is not a file'

# crafted layers on top of the saved image (python3 on the host)
mkcrafted() {	# SAVED OUT CASE
	python3 - "$@" <<'EOF'
import hashlib, io, json, sys, tarfile
src, out, case = sys.argv[1:4]
t = tarfile.open(src)
man = json.load(t.extractfile("manifest.json"))[0]
cfg = json.load(t.extractfile(man["Config"]))
lb = io.BytesIO()
with tarfile.open(fileobj=lb, mode="w", format=tarfile.PAX_FORMAT) as lt:
    def add(name, type=tarfile.REGTYPE, data=b"", link=""):
        i = tarfile.TarInfo(name)
        i.type, i.linkname, i.mode = type, link, 0o644
        i.size = len(data) if type == tarfile.REGTYPE else 0
        lt.addfile(i, io.BytesIO(data) if i.size else None)
    if case == "dotdot":
        add("../../../../berth-escape-dotdot", data=b"escaped\n")
    elif case == "abslink":
        add("esc", tarfile.SYMTYPE, link="/berth-escape-dir")
        add("esc/berth-escape-abslink", data=b"escaped\n")
    elif case == "hardlink":
        add("hard", tarfile.LNKTYPE, link="../../../../etc/passwd")
    elif case == "odd":
        i = tarfile.TarInfo("dev-sda")
        i.type, i.devmajor, i.devminor, i.mode = tarfile.BLKTYPE, 8, 0, 0o660
        lt.addfile(i)
        add("nothere/.wh.missing")
        add(".wh.alsomissing")
layer = lb.getvalue()
h = hashlib.sha256(layer).hexdigest()
cfg["rootfs"]["diff_ids"].append("sha256:" + h)
cb = json.dumps(cfg).encode()
ch = hashlib.sha256(cb).hexdigest()
with tarfile.open(out, "w") as o:
    def put(name, data):
        i = tarfile.TarInfo(name)
        i.size = len(data)
        o.addfile(i, io.BytesIO(data))
    for l in man["Layers"]:
        put(l, t.extractfile(l).read())
    put(h + "/layer.tar", layer)
    put(ch + ".json", cb)
    put("manifest.json", json.dumps([{"Config": ch + ".json", "RepoTags": ["crafted:" + case],
        "Layers": man["Layers"] + [h + "/layer.tar"]}]).encode())
EOF
}
for c in dotdot abslink hardlink odd; do
	mkcrafted "$T/saved.tar" "$T/crafted-$c.tar" "$c" || bail "making the crafted archive $c"
done
tar -C "$T" -cf "$T/crafted.tar" crafted-dotdot.tar crafted-abslink.tar \
	crafted-hardlink.tar crafted-odd.tar
check "crafted layers (a .. path, a link through an absolute symlink, a hard link out) copied in" \
	sh -c "'$NETCTL' -s '$STATE' sandbox cp '$T/crafted.tar' ib:/root/crafted.tar >/dev/null &&
	'$NETCTL' -s '$STATE' sandbox exec ib -- tar -C /root -xf /root/crafted.tar </dev/null"
ib cd image /root/crafted-dotdot.tar /root/outcd
is "a layer member ../../../../berth-escape-dotdot: exit 0, bounded (docker load puts it at the image's root)" \
	"$(rc_of cd)" 0
like "... it is inside the image only" \
	"$(x -- debugfs -R 'ls -p /' /root/outcd/root.img </dev/null 2>/dev/null)" '/berth-escape-dotdot/'
ib ca image /root/crafted-abslink.tar /root/outca
is "a member written through an absolute symbolic link: exit 1" "$(rc_of ca)" 1
like "... docker load refused it" "$(last_of ca)" 'failed: /root/crafted-abslink.tar: docker load refused it: '
ib ch image /root/crafted-hardlink.tar /root/outch
is "a hard link to ../../../../etc/passwd: exit 1" "$(rc_of ch)" 1
like "... docker load refused it" "$(last_of ch)" 'failed: /root/crafted-hardlink.tar: docker load refused it: '
ib co image /root/crafted-odd.tar /root/outco
is "a block device and whiteouts of missing files: exit 0" "$(rc_of co)" 0
x -- debugfs -R 'stat /dev-sda' /root/outco/root.img >"$T/co.stat" </dev/null 2>&1
like "... the device is in the image only (block 8:0)" "$(tr '\n' ' ' <"$T/co.stat")" \
	'Type: block special .*Device major/minor number: 0?8:0?0 '
is "nothing written outside the images, nothing left in the builder" "$(clean)" ""

check "the builder sandbox removed" netctl sandbox rm ib
diag "vm-imagebuild.sh took $(($(date +%s) - t0)) s"
done_testing
