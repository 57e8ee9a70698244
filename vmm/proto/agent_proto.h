/*
 * agent_proto.h — the frames berthd and the guest agent (vmm/guest/agent.c)
 * exchange over the virtio-serial port "berth.agent". Header only: the
 * static guest agent includes it without libvmm.
 *
 * A frame is a 4-byte big-endian payload length, a 1-byte type, then the
 * payload (at most BA_MAX_PAYLOAD bytes). Binary on purpose: the guest
 * needs no JSON parser, and what berthd reads from a guest is a length,
 * a type byte and opaque bytes (plus one short status line), parsed by
 * its unprivileged reader (proxy/privsep/agentd.c), never by the root parent.
 *
 * Protocol 2: many commands at once. Every frame but the ping and the
 * pong belongs to a channel: its payload starts with the channel's id,
 * 4 bytes big-endian, not 0, chosen by the host (one per command or file
 * transfer of this connection); "payload" below is what follows the id.
 *
 * host -> guest
 *   'P' ping       payload (no channel): a nonce, echoed in 'p'. The host
 *                  sends one after every (re)connect and ignores every
 *                  frame until the matching pong: output of an earlier
 *                  connection cannot be taken for this one's. The ping
 *                  starts a session: the agent ends every channel an
 *                  earlier connection left (its close may have gone
 *                  unseen while the guest was paused), killing their
 *                  commands' process groups.
 *   'E' exec       NUL-terminated fields, each a tag byte and its text:
 *                  't<timeout ms>', 'c<cwd>' (optional), 'a<arg>' (argv,
 *                  in order, at least one), 'e<NAME=value>' (env, added to
 *                  the agent's PATH/HOME defaults), 'u<user>' (a name or
 *                  uid from the guest's /etc/passwd; its groups from
 *                  /etc/group; default root), 'T<rows> <cols>' (a
 *                  terminal: the command runs on a pty, its output comes
 *                  as 'O' only, "0 0" for no size), 'D<ring bytes>'
 *                  (detached, below), 'k' (keep-awake: only recorded
 *                  and listed, the host acts on it)
 *                  Detached ('D'): the command is a process of the
 *                  guest's, not of the channel: its stdin is /dev/null
 *                  (with 'T' its terminal, which its 'H' clients type
 *                  into), its stdout and stderr (or its terminal) go to
 *                  a ring of that many bytes the agent keeps (1 KiB to
 *                  BA_RING_MAX), and it outlives the channel, the
 *                  connection and a new session's ping. The channel is
 *                  answered 'S' and ends. Its process number ("proc")
 *                  is the agent's: 1, 2, ... for the agent's life. The
 *                  agent keeps at most BA_MAX_PROCS processes (an ended
 *                  one is forgotten, oldest first, to make room; when
 *                  all run: 'F' "429 ...")
 *   'I' stdin      bytes for the channel's stdin (a command's, or a file
 *                  put's); empty: EOF (on a terminal: its EOF character)
 *   'W' resize     "ROWS COLS", the terminal's new size
 *   'w' file put   fields 't<timeout ms>', 'p<path>' (absolute),
 *                  'm<mode, octal>'; then 'I' frames of its bytes, empty
 *                  at the end: written to a temporary file beside it,
 *                  mode set, renamed over path; answered 'X' "exit 0"
 *   'g' file get   fields 't', 'p<path>', 'o<offset>' and 'n<length>'
 *                  (optional, decimal: from that byte, at most that
 *                  many; an offset at or past the end gives no bytes):
 *                  answered with 'O' frames of its bytes then 'X'
 *                  "exit 0" ('F' "404 ..." when absent, "400 ..." for a
 *                  directory)
 *   'l' list       fields 't', 'p<dir>', 'n<max entries>' (decimal, at
 *                  least 1): answered one 'N' frame per entry of the
 *                  directory ("." and ".." left out; at most max, in
 *                  readdir order; the host asks one more than it shows
 *                  to know the list was cut), then 'X' "exit 0". 'F'
 *                  "404 ..." when absent, "400 ..." when not a directory
 *   'm' mkdir      fields 't', 'p<path>', 'm<mode, octal>' (optional,
 *                  0755), 'r' (parents: missing parents are made, an
 *                  existing directory is no error): 'X' "exit 0"; 'F'
 *                  "409 ..." it exists, "404 ..." a parent is missing,
 *                  "400 ..." a parent is not a directory
 *   'x' remove     fields 't', 'p<path>', 'r' (recursive: a directory
 *                  and all under it; symbolic links are removed, never
 *                  followed): 'X' "exit 0"; 'F' "404 ..." absent, "409
 *                  ..." a directory not empty (without 'r'), "400 ..."
 *                  the path is "/"
 *   'v' move       fields 't', 'p<from>', 'd<to>' (absolute), 'o'
 *                  (overwrite: an existing destination is replaced;
 *                  without it, 'F' "409 ... exists"): rename(2); across
 *                  filesystems the agent runs mv(1). 'X' "exit 0"; 'F'
 *                  "404 ..." from is absent (or to's directory), "400
 *                  ..." a directory into itself
 *   'V' watch      fields 'p<dir>', 'r' (recursive: its subdirectories,
 *                  those made later too): inotify; answered 'Y'
 *                  "ready 1 0 <dir>" once its watches are in place
 *                  (what happens after it is seen), then one 'Y' frame
 *                  per event while the channel lasts (no 't':
 *                  it ends by the host's 'K', answered 'X' "exit 0", or
 *                  when the directory itself goes: 'Y' "delete_self",
 *                  then 'X' "exit 0"). 'F' "404 ..." when absent, "400
 *                  ..." when not a directory, "429 ..." out of inotify
 *                  watches
 *   'K' kill       a signal number in decimal: sent to the channel's
 *                  process group (a file transfer is ended). Its 'X' or
 *                  'F' follows as usual.
 *   'A' ack        4 bytes big-endian: that many bytes of the channel's
 *                  'O' and 'R' payloads were taken (window credit)
 *   'L' list       no payload: answered 'Q' for each process the agent
 *                  keeps (running or ended), then 'X' "exit 0"
 *   'G' logs       fields 'i<proc>', 'o<offset>' (of the process's
 *                  output since it started; 0 when absent), 'f' (follow):
 *                  answered 'M' (what the ring holds now), then 'O' with
 *                  its bytes from the offset (from the ring's start when
 *                  that is later), then, with 'f', the process's new
 *                  output as it comes until it ends, then 'M' again;
 *                  then 'X' "exit 0". 'F' "404 ..." for no such process
 *   'H' attach     fields 'i<proc>', 'T<rows> <cols>' (optional),
 *                  'o<offset>' (optional, as for 'G'): the channel is a
 *                  client of a detached process's terminal (several at
 *                  once): answered 'M', then 'O' with its ring's bytes
 *                  from the offset (from the ring's start when that is
 *                  later; the screen so far), then its output as it
 *                  comes. The channel's 'I' bytes go to the terminal
 *                  (dropped for a process without one); an empty 'I',
 *                  or a 'K' on the channel, detaches: 'M', then 'X'
 *                  "exit 0", the process runs on. The terminal's size
 *                  follows the newest client: its 'T' on attach, its
 *                  'W' later; an older client's 'W' is kept for when
 *                  the newer ones detach, and applied then. The
 *                  process's end ends every attached channel: 'M' (its
 *                  state), then 'X' "exit 0". 'F' "404 ..." for no such
 *                  process. A session's new ping detaches every client
 *                  of the earlier one.
 *   'Z' signal     fields 'i<proc>', 's<signal number>': sent to the
 *                  process's group; 'X' "exit 0", or 'F' "404 ..." (no
 *                  such process), "409 ..." (it has ended)
 *   'U' identity   a clone restored from a snapshot made its own, before
 *                  berthd reports it running; fields, each optional:
 *                  'h<hostname>' (1 to 63 of [a-z0-9-], not '-'
 *                  first), 'i<machine id>' (32 lowercase hex digits),
 *                  'm<MAC>' (aa:bb:cc:dd:ee:ff, unicast), 'a<IPv4
 *                  address>/<prefix>' (1 to 32), 'g<IPv4 gateway>',
 *                  'n<IPv4 nameserver>' (up to 3, in order),
 *                  'c<CLOCK_REALTIME in ms>', 'r<entropy>' (64 bytes
 *                  as 128 lowercase hex digits), 'f<interface>' (the
 *                  one 'm', 'a' and 'g' configure; default the first
 *                  non-loopback ethernet one by ifindex). All are
 *                  checked first, and the interface looked up: 'F'
 *                  "400 malformed identity: ..." or "404 no network
 *                  interface ..." change nothing. Then each given one
 *                  is applied, in this order: the clock set (when
 *                  off by a second or more); the
 *                  bytes added to the kernel's random pool (credited;
 *                  uncredited where it refuses to credit them);
 *                  /etc/machine-id written (and /var/lib/dbus/
 *                  machine-id when a regular file); the hostname set,
 *                  /etc/hostname written and /etc/hosts's 127.0.1.1
 *                  line made "127.0.1.1<TAB><h>" (added if none, the
 *                  other lines kept); its MAC set (with 'm'; live,
 *                  else down, set, up), the interface up, its IPv4
 *                  addresses replaced by 'a'
 *                  (with its broadcast), every default route by one
 *                  via 'g'; /etc/resolv.conf of the 'n' written. Files
 *                  are written beside and renamed over. 'X' "exit 0"
 *                  when all went, else 'F' "500 <step>: <reason>"
 *                  ("500 set the address 10.200.0.6/30 on eth0: File
 *                  exists"), the steps before it done. An agent older
 *                  than 'U' answers 'F' "400 unknown request 'U'".
 * guest -> host
 *   'p' pong       the ping's payload, then one byte: the protocol (3).
 *                  A pong of the nonce alone is an agent of protocol 1
 *                  (no channels, one command at a time); 2 is an agent
 *                  of channels and detached processes without 'l',
 *                  'm', 'x', 'v', 'V', 'H' or the ranged 'g' (it
 *                  refuses the first ones as unknown requests, and
 *                  would ignore a range's fields: the host asks it
 *                  none of them).
 *   'O' stdout     bytes, 'R' stderr bytes (in the order produced per
 *                  stream)
 *   'X' exit       "exit N" or "signal N", then " timeout" when the agent
 *                  killed the command at its deadline; the last frame of
 *                  a channel (its output is complete), which then ends
 *   'F' failure    the channel's request refused (malformed, too many):
 *                  a message; "400 " / "404 " / "409 " / "429 " first is
 *                  the request's fault (an unknown user, a missing file,
 *                  too many channels), the rest is the agent's; the
 *                  channel ends
 *   'a' stdin ack  4 bytes big-endian: that many bytes of the channel's
 *                  'I' payloads were taken (written to the command or the
 *                  file, or dropped: it closed its stdin)
 *   'S' started    "<proc> <pid>": a detached command runs; its channel
 *                  ends
 *   'Q' process    "<proc> <pid> <state> <start> <keep> <total> <cmd>":
 *                  state "running", "exit N" or "signal N" written with
 *                  a ':' for the space ("exit:3"); start the guest's
 *                  CLOCK_REALTIME in ms when it started; keep 0 or 1
 *                  ('k'); total the bytes it has written so far; cmd its
 *                  argv joined by spaces (at most 200 bytes, cut)
 *   'M' ring       "<first> <total> <state>": the ring holds its output
 *                  from byte first to total (state as in 'Q')
 *   'N' entry      "<type> <mode> <size> <mtime> <name>": type "file",
 *                  "dir", "link", "fifo", "socket", "char", "block" or
 *                  "other" (lstat: a link is not followed); mode the
 *                  permission bits (& 07777) in octal; size in bytes;
 *                  mtime in ms since the epoch (0 if earlier); name the
 *                  entry's bytes to the payload's end (1 to 255, no '/'
 *                  or NUL). An entry gone before its lstat is left out.
 *   'Y' event      "<event> <dir> <cookie> <path>": event "ready" (the
 *                  watch is in place), "create",
 *                  "modify", "attrib", "delete", "move_from", "move_to"
 *                  (a rename: the pair shares the cookie, decimal, else
 *                  0), "delete_self", "overflow" (the kernel's queue
 *                  overflowed: events were lost; path the watched
 *                  directory) or "unwatched" (a subdirectory could not
 *                  be watched: events under path are missed); dir 1 when
 *                  the event is a directory's, else 0; path absolute,
 *                  to the payload's end (at most 4096 bytes)
 *
 * Flow control, per channel and each way: at most BA_WINDOW bytes of
 * 'O'/'R'/'N'/'Y' payload unacknowledged by 'A' (a watch whose events
 * nobody takes stops reading inotify: the kernel's queue overflows, and
 * that is reported with 'Y' "overflow" when it is read again, never
 * hidden), and of 'I' payload
 * unacknowledged by 'a'. A command whose output nobody takes stops (its
 * pipe fills) and slows only itself; a peer past a window breaks the
 * protocol. The agent takes at most BA_MAX_CHANS channels at once ('F'
 * "429 ..." past them).
 *
 * When the host end goes away (berthd restarts, the VM is snapshotted
 * and restored by a new VMM) the agent ends every channel: nobody would
 * read them.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_AGENT_PROTO_H
#define BERTH_AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define BA_PORT_NAME	"berth.agent"
#define BA_HDR		5
#define BA_CHAN		4		/* a channel id, after the header */
#define BA_MAX_PAYLOAD	(256 * 1024)
#define BA_CHUNK	(32 * 1024)	/* output and stdin frames */
#define BA_WINDOW	(256 * 1024)	/* per channel, each way */
#define BA_MAX_CHANS	1024
#define BA_PROTO	3		/* the pong's last byte */
#define BA_RING_MAX	(16 * 1024 * 1024)	/* a detached process's */
#define BA_MAX_PROCS	256		/* detached processes kept */
#define BA_EVENT_PATH	4096		/* a 'Y' event's path, at most */

enum {
	BA_PING = 'P', BA_EXEC = 'E', BA_STDIN = 'I', BA_RESIZE = 'W',
	BA_FILE_PUT = 'w', BA_FILE_GET = 'g', BA_KILL = 'K', BA_ACK = 'A',
	BA_LIST = 'L', BA_LOGS = 'G', BA_SIGNAL = 'Z', BA_LS = 'l',
	BA_MKDIR = 'm', BA_REMOVE = 'x', BA_MOVE = 'v', BA_WATCH = 'V',
	BA_ENTRY = 'N', BA_EVENT = 'Y', BA_ATTACH = 'H', BA_IDENTITY = 'U',
	BA_PONG = 'p', BA_STDOUT = 'O', BA_STDERR = 'R', BA_EXIT = 'X',
	BA_FAIL = 'F', BA_STDIN_ACK = 'a', BA_STARTED = 'S', BA_PROC = 'Q',
	BA_RING = 'M'
};

static inline void
ba_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static inline uint32_t
ba_get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void
ba_hdr_put(unsigned char *h, uint32_t len, int type)
{
	ba_put32(h, len);
	h[4] = (unsigned char)type;
}

static inline uint32_t
ba_hdr_len(const unsigned char *h)
{
	return ba_get32(h);
}

#endif
