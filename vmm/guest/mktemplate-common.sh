# SPDX-License-Identifier: GPL-2.0-or-later
# mktemplate-common.sh: what mktemplate-debian and mktemplate-image share,
# sourced by both (not run): the kernel they take from the host, berth's
# static guest programs, and the small initramfs that loads the modules
# for /dev/vda, mounts the root and hands it berth's programs in
# /run/berth (debian/initramfs-init). One copy, so that both kinds of
# template boot the same way and a fix reaches both.
#
# The caller defines die() and say(), sets $here (the directory of the
# scripts) and SOURCE_DATE_EPOCH, and runs under set -eu. Environment:
# KVER, BUSYBOX, BERTH_TESTAPP, BERTH_AGENT as for mktemplate.

# tpl_kernel: KVER (default: the newest /boot/vmlinuz-* with modules) and
# moddir, its /lib/modules directory.
tpl_kernel() {
	if [ -z "${KVER:-}" ]; then
		for k in $(ls /boot/vmlinuz-* 2>/dev/null | sed 's|^/boot/vmlinuz-||' | sort -V); do
			[ -f "/lib/modules/$k/modules.dep" ] && KVER=$k
		done
	fi
	[ -n "${KVER:-}" ] || die "no /boot/vmlinuz-* with modules (install linux-image-amd64)"
	moddir=/lib/modules/$KVER
	[ -r "/boot/vmlinuz-$KVER" ] || die "/boot/vmlinuz-$KVER not readable"
}

# tpl_find_prog NAME ENVVALUE: the binary, built here or named by env
tpl_find_prog() {
	if [ -n "$2" ]; then
		echo "$2"
		return
	fi
	for c in ${top_builddir:+"$top_builddir/vmm/guest/$1"} \
	    "./vmm/guest/$1" "$here/$1"; do
		[ -x "$c" ] && { echo "$c"; return; }
	done
	return 0	# none: the caller says so (set -e would end it silently)
}

# tpl_progs: BUSYBOX, app (testapp) and agent (berth-agent), each found
# and static (the initramfs, and an image root, may have no libc).
tpl_progs() {
	BUSYBOX=${BUSYBOX:-/bin/busybox}
	[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (install busybox-static)"
	app=$(tpl_find_prog testapp "${BERTH_TESTAPP:-}")
	[ -n "$app" ] && [ -x "$app" ] || die "no testapp binary (build it, or set BERTH_TESTAPP)"
	agent=$(tpl_find_prog berth-agent "${BERTH_AGENT:-}")
	[ -z "$agent" ] && agent=$(dirname "$app")/berth-agent
	[ -x "$agent" ] || die "no berth-agent binary (build it, or set BERTH_AGENT)"
	for b in "$BUSYBOX" "$app" "$agent"; do
		if command -v readelf >/dev/null 2>&1 && readelf -l "$b" | grep -q 'Requesting program interpreter'; then
			die "$b is dynamically linked"
		fi
	done
}

# tpl_initramfs DIR MODULES: the initramfs tree in DIR: busybox with its
# applets, the modules (with their dependencies from modules.dep, in
# load order in lib/modules/order) and /init (debian/initramfs-init).
# What the caller puts in DIR/berth is copied to the root's /run/berth.
tpl_initramfs() {
	ir=$1
	mkdir -p "$ir/bin" "$ir/sbin" "$ir/dev" "$ir/proc" "$ir/sys" "$ir/tmp" \
	    "$ir/lib/modules" "$ir/newroot" "$ir/berth"
	order=
	for m in $2; do
		tpl_mod_add "$m"
	done
	for m in $order; do
		echo "$m"
	done >"$ir/lib/modules/order"
	cp "$BUSYBOX" "$ir/bin/busybox"
	for a in $("$BUSYBOX" --list); do
		[ "$a" = busybox ] || ln -s busybox "$ir/bin/$a"
	done
	cp "$here/debian/initramfs-init" "$ir/init"
	chmod 0755 "$ir/init" "$ir/bin/busybox"
}

# tpl_dynamic DIR PROG...: host programs that are not static into the
# initramfs tree DIR (its /sbin), with the libraries and loader ldd names
# at their own paths
tpl_dynamic() {
	d=$1
	shift
	for p in "$@"; do
		cp -L "$p" "$d/sbin/$(basename "$p")"
		for l in $(ldd "$p" | sed -n 's|.*=> \(/[^ ]*\) .*|\1|p; s|^[[:space:]]*\(/[^ ]*\) .*|\1|p'); do
			[ -e "$d$l" ] && continue
			mkdir -p "$d$(dirname "$l")"
			cp -L "$l" "$d$l"
		done
	done
}

tpl_mod_dep() { grep -E "(^|/)$1\.ko(\.xz|\.zst|\.gz)?:" "$moddir/modules.dep" | head -n 1; }

# tpl_mod_add NAME: NAME after its dependencies (order, in $ir)
tpl_mod_add() {
	case " $order " in *" $1 "*) return ;; esac
	line=$(tpl_mod_dep "$1")
	if [ -z "$line" ]; then
		grep -qE "/$1\.ko" "$moddir/modules.builtin" 2>/dev/null && return
		die "module $1 not found for $KVER"
	fi
	for d in ${line#*:}; do
		tpl_mod_add "$(basename "$d" | sed -E 's/\.ko(\.xz|\.zst|\.gz)?$//')"
	done
	path=$moddir/$(tpl_mod_dep "$1" | sed 's/:.*//')
	order="$order $1"
	case "$path" in
	*.xz) xz -dc "$path" >"$ir/lib/modules/$1.ko" ;;
	*.zst) zstd -qdc "$path" >"$ir/lib/modules/$1.ko" ;;
	*.gz) gzip -dc "$path" >"$ir/lib/modules/$1.ko" ;;
	*) cp "$path" "$ir/lib/modules/$1.ko" ;;
	esac
}

# tpl_cpio DIR OUT: DIR as a gzip'd newc archive, owned by root, every
# time SOURCE_DATE_EPOCH (the same inputs give the same bytes)
tpl_cpio() {
	find "$1" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	(cd "$1" && find . | LC_ALL=C sort |
	    cpio -o -H newc -R 0:0 --reproducible --quiet) | gzip -n -6 >"$2"
}
