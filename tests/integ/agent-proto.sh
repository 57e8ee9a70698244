#!/bin/sh
# agent-proto.sh — the guest agent's protocol 2 (vmm/proto/agent_proto.h)
# without a VM: berth-agent on one end of a socketpair
# (BERTH_AGENT_PORT_FD), tests/integ/agent_tool.py the host on the other.
# The pong carries the nonce and the protocol byte (BA_PROTO); commands
# on several
# channels run side by side; output stops at BA_WINDOW unacknowledged
# bytes per channel (stdout and stderr together) while another channel
# completes, an 'A' releases exactly its credit; no frame exceeds
# BA_CHUNK; stdin echoes back through cat with 'a' acks, 3 MB of it whole;
# stderr as 'R'; exit 3, 127 (no command), 126 (bad cwd); env and cwd;
# 'K' 9 and 15 (to the process group); a timeout is "signal 9 timeout"; a
# background child holding stdout does not hold 'X' back; file put (mode
# kept, temporary file beside the path, none left, 'K' drops it) and get
# round trip byte-identical, a get stops at the window; 404 and 400 for a
# missing file and a relative path; an unknown user is 400, user nobody
# runs as nobody (root only); a channel id in use is 400 and its command
# lives on; terminals ('T', 'W', ^D); a new ping ends a running command
# and nothing comes for it after; 16 streams at once intact; waiting
# channels keep the agent idle; 1024 live channels, the 1025th is 429;
# the host gone (or past its window) kills the commands. Detached
# processes ('D'): 'S' ends the channel; 'L' lists them running, then
# "exit:0", with keep ('k'), total, cmd, start; 'G' gives 'M' and the
# ring's bytes (a ring of 1024 written 5000: first 3976, the last 1024
# bytes), with 'f' the output as it comes then 'M' and 'X', within the
# window, skipping what the ring overwrote; a ping ends follow channels
# but not the processes, nor does the host going away; 'Z' (signal:15,
# then 409), 404 for an unknown process, 't' ends one as signal:9, 429
# past BA_MAX_PROCS running and the oldest ended one forgotten. Files:
# a ranged get ('o', 'n': a range, past the end, n0, the window, 400 for
# a malformed one or a directory); 'l' (file, dir, link, fifo with their
# type, mode, size, mtime; a name with a space and a non-UTF-8 byte; 'n'
# cuts; 404, 400; 3000 entries stop at the window until acked, the agent
# idle meanwhile, then all come once; 'K' cancels); 'm' (its mode under
# any umask, 'r' parents, 409 exists, 404 no parent, 400 a file parent);
# 'x' (a file, an empty dir, 409 not empty without 'r', a tree whose
# links to outside it are removed, not followed, their targets intact;
# 404, 400 for '/', '.', '..'; 20000 files beside a command); 'v' (a
# rename, 409 exists without 'o', replaced with it, 400 into itself,
# 404; across filesystems, a tmpfs in a mount namespace (root only), by
# mv(1)); 'V' ('ready' first; create, modify, attrib, move_from/move_to
# with one cookie, delete; a recursive watch sees subdirectories there
# before, made after or moved in, and not one moved out, a plain one
# none; delete_self then 'X'; 'K' gives 'X' "exit 0"; a ping ends it;
# 100000 events while the window is full: another command completes,
# the agent idle, then "overflow" once acked, and events go on). Attach
# ('H', an agent on a listening socket so the host can go and come
# back): a detached `sh` on a terminal (its stdin too) answers a
# client's typing (hi-42, 'a' acks), `stty size` follows the newest
# client ('T', then a 'W' kept for when the newer detaches), a second
# client gets the screen replayed, an empty 'I' or 'K' detaches ('M',
# 'X' "exit 0", no signal), nobody attached the terminal is still read
# into the ring, the host gone and back or a new ping detaches and the
# shell answers the next client, 404, `exit 3` ends every client with
# 'M' exit:3 and 'X', an ended process is replayed; a client that does
# not ack stops at the window while another gets all, input past the
# window is written as the terminal takes it; without a terminal 'I' is
# acknowledged and dropped. Identity ('U', root only: the agent in
# namespaces of its own, UTS, network and mount, with an overlay on /etc
# and /var/lib/dbus and an ethernet eth9): every field at once ('c' the
# host's own time, never another) is 'X' "exit 0" and then the hostname,
# /etc/hostname, /etc/machine-id (444) and D-Bus's copy, /etc/hosts's
# 127.0.1.1 line (the others kept), resolv.conf, eth9's MAC, address,
# broadcast and default route are the new ones, the clock within 1 s,
# no temporary file left; a second 'U' replaces the address and route
# on the default interface; malformed fields are 400 naming the field
# and change nothing, an absent 'f' interface 404, an unreachable
# gateway "500 set the default route via ..."; the host's hostname and
# /etc files are untouched. An image's defaults (BERTH_AGENT_IMAGE_CONF
# for /run/berth/image.conf): its Env (%XX decoded) and WorkingDir under
# a command's own env and cwd, its User unless 'u' root, and
# `berth-agent --service` running its command with them. No root needed
# but for user switching, the move across filesystems and identity;
# about 40 s.
# SPDX-License-Identifier: GPL-2.0-or-later
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
export top_srcdir top_builddir

BERTH_AGENT=${BERTH_AGENT:-$top_builddir/vmm/guest/berth-agent}
export BERTH_AGENT

skip_all() { echo "$*" >&2; exit 77; }
[ "$(uname -s)" = Linux ] || skip_all "the agent is Linux-only"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not installed"
[ -x "$BERTH_AGENT" ] || skip_all "$BERTH_AGENT not built"

python3 "$top_srcdir/tests/integ/agent_tool.py"
