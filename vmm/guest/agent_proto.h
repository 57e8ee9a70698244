/*
 * agent_proto.h — the frames berthd and the guest agent (vmm/guest/agent.c)
 * exchange over the virtio-serial port "berth.agent". Header only: the
 * static guest agent includes it without libvmm.
 *
 * A frame is a 4-byte big-endian payload length, a 1-byte type, then the
 * payload (at most BA_MAX_PAYLOAD bytes). Binary on purpose: the guest
 * needs no JSON parser, and what berthd reads from a guest is a length,
 * a type byte and opaque bytes (plus one short status line), parsed by
 * its unprivileged reader (proxy/agentd.c), never by the root parent.
 *
 * host -> guest
 *   'P' ping       payload: a nonce, echoed in 'p'. The host sends one
 *                  after every (re)connect and ignores every frame until
 *                  the matching pong: output of an earlier connection
 *                  cannot be taken for this one's. The ping starts a
 *                  session: the agent kills a command an earlier
 *                  connection left running (its close may have gone
 *                  unseen while the guest was paused).
 *   'E' exec       payload: NUL-terminated fields, each a tag byte and its
 *                  text: 't<timeout ms>', 'c<cwd>' (optional), 'a<arg>'
 *                  (argv, in order, at least one), 'e<NAME=value>' (env,
 *                  added to the agent's PATH/HOME defaults), 'u<user>'
 *                  (a name or uid from the guest's /etc/passwd; its
 *                  groups from /etc/group; default root), 'T<rows> <cols>'
 *                  (a terminal: the command runs on a pty, its output
 *                  comes as 'O' only, "0 0" for no size)
 *   'I' stdin      payload: bytes for the command's stdin; empty: EOF
 *                  (on a terminal: its EOF character, ^D)
 *   'W' resize     payload: "ROWS COLS", the terminal's new size
 *   'w' file put   fields as 'E': 't<timeout ms>', 'p<path>' (absolute),
 *                  'm<mode, octal>'; then 'I' frames of its bytes, empty
 *                  at the end: written to a temporary file beside it,
 *                  mode set, renamed over path; answered 'X' "exit 0"
 *   'g' file get   fields 't', 'p<path>': answered with 'O' frames of its
 *                  bytes then 'X' "exit 0" ('F' "404 ..." when absent)
 * guest -> host
 *   'p' pong       the ping's payload
 *   'O' stdout     bytes, 'R' stderr bytes (in the order produced per stream)
 *   'X' exit       "exit N" or "signal N", then " timeout" when the agent
 *                  killed the command at its deadline; the last frame of an
 *                  exec (its output is complete)
 *   'F' failure    a request refused (malformed, busy): a message; one
 *                  that starts with "400 " is the request's fault (an
 *                  unknown user), the rest is the agent's
 *
 * One exec at a time per connection; several in sequence. When the host
 * end goes away (berthd restarts, the VM is snapshotted and restored by a
 * new VMM) the agent kills the command it runs: nobody would read it.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_AGENT_PROTO_H
#define BERTH_AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define BA_PORT_NAME	"berth.agent"
#define BA_HDR		5
#define BA_MAX_PAYLOAD	(256 * 1024)
#define BA_CHUNK	(32 * 1024)	/* output and stdin frames */

enum {
	BA_PING = 'P', BA_EXEC = 'E', BA_STDIN = 'I', BA_RESIZE = 'W',
	BA_FILE_PUT = 'w', BA_FILE_GET = 'g',
	BA_PONG = 'p', BA_STDOUT = 'O', BA_STDERR = 'R', BA_EXIT = 'X',
	BA_FAIL = 'F'
};

static inline void
ba_hdr_put(unsigned char *h, uint32_t len, int type)
{
	h[0] = (unsigned char)(len >> 24);
	h[1] = (unsigned char)(len >> 16);
	h[2] = (unsigned char)(len >> 8);
	h[3] = (unsigned char)len;
	h[4] = (unsigned char)type;
}

static inline uint32_t
ba_hdr_len(const unsigned char *h)
{
	return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
	    (uint32_t)h[2] << 8 | (uint32_t)h[3];
}

#endif
