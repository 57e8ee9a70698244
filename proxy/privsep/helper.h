/*
 * helper.h — the typed messages between berthd's parent and its
 * untrusted-input helpers (proc.h). Each payload is one of the structs
 * below, byte for byte (both ends are the same binary); a receiver checks
 * the length against its type and every string for its NUL before use.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_HELPER_H
#define BERTH_HELPER_H

#include <netinet/in.h>
#include <stdint.h>

#include "netctl.h"
#include "nc_dns.h"

enum {
	/* NFLOG reader */
	HM_NFLOG_SOCKET = 1,	/* P->C: struct hm_nflog_socket + the socket */
	HM_NFLOG_DENIAL,	/* C->P: struct nc_denial */

	/* DNS resolver */
	HM_DNS_CONFIG = 20,	/* P->C: struct hm_dns_config */
	HM_DNS_SANDBOX_ADD,	/* P->C: struct hm_dns_sandbox + UDP, TCP sockets */
	HM_DNS_SANDBOX_DEL,	/* P->C: struct hm_dns_sandbox */
	HM_DNS_RULES,		/* P->C: struct hm_dns_rules + rule texts */
	HM_DNS_INSERT,		/* C->P: struct hm_dns_insert */
	HM_DNS_INSERTED,	/* P->C: struct hm_dns_inserted */
	HM_DNS_DENIAL,		/* C->P: struct hm_dns_denial */
	HM_DNS_ERROR,		/* C->P: a NUL-terminated message */

	/* TCP control listener */
	HM_CTL_CONFIG = 40,	/* P->C: struct hm_ctl_config, certificate and
				 * key PEM, + the listening socket */
	HM_CTL_OPEN,		/* C->P: struct hm_ctl_open (handshake done) */
	HM_CTL_REQUEST,		/* C->P: struct hm_ctl_request + JSON body */
	HM_CTL_DATA,		/* P->C: struct hm_ctl_id + response bytes */
	HM_CTL_CLOSE,		/* both: struct hm_ctl_id */
	HM_CTL_REFUSED,		/* C->P: struct hm_ctl_refused */
	HM_CTL_BODY,		/* C->P: struct hm_ctl_id + streamed body bytes */
	HM_CTL_BODY_END,	/* C->P: struct hm_ctl_body_end */
	HM_CTL_BODY_ACK,	/* P->C: struct hm_ctl_ack (HM_CTL_BODY bytes) */
	HM_CTL_DATA_ACK,	/* C->P: struct hm_ctl_ack (HM_CTL_DATA bytes) */
	HM_CTL_SHUTDOWN,	/* C->P: struct hm_ctl_id: the client half closed */
	HM_CTL_FLEET_CONFIG,	/* P->C: struct hm_ctl_fleet_config, the fleet
				 * CA, certificate and key PEM, + the
				 * fleet_api_listen socket */
	HM_CTL_FAIL,		/* P->C: struct hm_ctl_fail: answer this error
				 * and close */
	HM_CTL_FORWARD,		/* P->C: struct hm_ctl_forward + the JSON
				 * body: post a create to a fleet peer */
	HM_CTL_FORWARDED,	/* C->P: struct hm_ctl_forwarded + its answer
				 * as compact JSON */

	/* guest agent connections (exec.c, agentd.c) */
	HM_AGENT_CONN = 60,	/* P->C: struct hm_agent_conn + the socket */
	HM_AGENT_ACK,		/* P->C: struct hm_agent_ack (output taken) */
	HM_AGENT_CLOSE,		/* P->C: struct hm_agent_id: the parent closed
				 * its end; the helper closes its own */
	HM_AGENT_PONG,		/* C->P: struct hm_agent_pong */
	HM_AGENT_OUTPUT,	/* C->P: struct hm_agent_output + bytes */
	HM_AGENT_EXIT,		/* C->P: struct hm_agent_exit */
	HM_AGENT_FAIL,		/* C->P: struct hm_agent_fail */
	HM_AGENT_ERROR,		/* C->P: struct hm_agent_error */
	HM_AGENT_CLOSED,	/* C->P: struct hm_agent_id: the guest's end
				 * closed (the helper forgot it) */
	HM_AGENT_INACK,		/* C->P: struct hm_agent_inack */
	HM_AGENT_STARTED,	/* C->P: struct hm_agent_started */
	HM_AGENT_PROC,		/* C->P: struct hm_agent_proc */
	HM_AGENT_RING,		/* C->P: struct hm_agent_ring */
	HM_AGENT_ENTRY,		/* C->P: struct hm_agent_entry */
	HM_AGENT_EVENT,		/* C->P: struct hm_agent_event + its path */
};

/*
 * The guest agent (vmm/proto/agent_proto.h): the parent connects to a
 * sandbox's agent socket, keeps it, and passes the read end of a pipe
 * with the ping's nonce (HM_AGENT_CONN, id unique in this berthd); it
 * writes its frames (ping, exec, stdin, resize) on the socket and copies
 * what it reads there into the pipe unparsed (sandbox/agentio.h): the
 * helper holds nothing that writes to a guest. The helper parses every
 * byte the guest sends: it drops frames until the pong that
 * carries the nonce (then HM_AGENT_PONG, with the agent's protocol: 1
 * when the pong is the nonce alone, 2 when a protocol byte 2 follows),
 * then sends the parent stdout and stderr bytes (HM_AGENT_OUTPUT, at
 * most HM_AGENT_CHUNK each), a channel's end (HM_AGENT_EXIT, checked:
 * "exit N" or "signal N", then " timeout"), the agent's refusals
 * (HM_AGENT_FAIL, printable text), stdin taken (HM_AGENT_INACK), a
 * detached process started (HM_AGENT_STARTED), one listed
 * (HM_AGENT_PROC: its fields checked, its command printable) and what a
 * process's ring holds (HM_AGENT_RING), a directory's entry
 * (HM_AGENT_ENTRY: type known, name 1 to 255 bytes without '/' or NUL)
 * and a watch's event (HM_AGENT_EVENT: event known, path absolute,
 * without NUL, at most BA_EVENT_PATH bytes), in
 * the order of the guest's frames, each with its channel (protocol 1:
 * channel 0, one command at a time). A guest that breaks the framing
 * gets HM_AGENT_ERROR and its connection closed.
 * Flow control: the helper never has more than HM_AGENT_WINDOW output
 * bytes of a connection that the parent has not acknowledged
 * (HM_AGENT_ACK); it stops reading that guest's pipe meanwhile (the
 * parent then stops reading the guest: agentio.h). The parent
 * acknowledges as it takes them; per command the guest's own windows
 * (agent_proto.h) hold a slow client's command back (protocol 1: the
 * parent holds its acknowledgement instead, which stops the connection).
 * A peer that exceeds the window or acknowledges more than it got is
 * malformed.
 */
#define HM_AGENT_NONCE	8
#define HM_AGENT_CHUNK	(32 * 1024)
#define HM_AGENT_WINDOW	(128 * 1024)
#define HM_AGENT_TEXT	256
struct hm_agent_id {
	uint64_t	 id;
};

struct hm_agent_conn {
	uint64_t	 id;
	unsigned char	 nonce[HM_AGENT_NONCE];
};

struct hm_agent_ack {
	uint64_t	 id;
	uint32_t	 bytes;
};

struct hm_agent_pong {
	uint64_t	 id;
	unsigned char	 nonce[HM_AGENT_NONCE];
	int32_t		 proto;		/* the agent's: 1 or 2 */
};

struct hm_agent_output {
	uint64_t	 id;
	int32_t		 stream;	/* BA_STDOUT or BA_STDERR */
	uint32_t	 len;		/* the bytes that follow */
	uint32_t	 chan;
};

struct hm_agent_inack {
	uint64_t	 id;
	uint32_t	 chan;
	uint32_t	 bytes;		/* of its stdin the agent took */
};

/* A detached process's state: running, or how it ended. */
enum { HM_PROC_RUNNING, HM_PROC_EXITED, HM_PROC_SIGNALED };

struct hm_agent_started {
	uint64_t	 id;
	uint32_t	 chan;
	uint32_t	 proc;
	int32_t		 pid;
};

struct hm_agent_proc {
	uint64_t	 id;
	uint32_t	 chan;
	uint32_t	 proc;
	int32_t		 pid;
	int32_t		 state;		/* HM_PROC_* */
	int32_t		 code;		/* exit 0..255 or signal 1..127 */
	int32_t		 keep;		/* 0 or 1 */
	int64_t		 start_ms;	/* the guest's clock */
	uint64_t	 total;		/* bytes it wrote */
	char		 cmd[HM_AGENT_TEXT];	/* printable ASCII */
};

struct hm_agent_ring {
	uint64_t	 id;
	uint32_t	 chan;
	int32_t		 state;		/* HM_PROC_* */
	int32_t		 code;
	uint64_t	 first, total;	/* the ring holds [first, total) */
};

/* A directory entry ('N'); bytes: the frame's payload, for the parent
 * to acknowledge to the guest as it does output. */
enum { HM_FT_FILE, HM_FT_DIR, HM_FT_LINK, HM_FT_FIFO, HM_FT_SOCKET,
	HM_FT_CHAR, HM_FT_BLOCK, HM_FT_OTHER };

struct hm_agent_entry {
	uint64_t	 id;
	uint32_t	 chan;
	uint32_t	 bytes;
	int32_t		 type;		/* HM_FT_* */
	uint32_t	 mode;		/* & 07777 */
	uint64_t	 size;
	int64_t		 mtime_ms;	/* >= 0 */
	uint32_t	 namelen;	/* 1..255 */
	unsigned char	 name[256];	/* no '/' or NUL; not UTF-8 checked */
};

/* A watch's event ('Y'), then pathlen bytes of its path. */
enum { HM_EV_CREATE, HM_EV_MODIFY, HM_EV_ATTRIB, HM_EV_DELETE,
	HM_EV_MOVE_FROM, HM_EV_MOVE_TO, HM_EV_DELETE_SELF, HM_EV_OVERFLOW,
	HM_EV_UNWATCHED, HM_EV_READY, HM_EV_COUNT };

struct hm_agent_event {
	uint64_t	 id;
	uint32_t	 chan;
	uint32_t	 bytes;
	int32_t		 event;		/* HM_EV_* */
	int32_t		 dir;		/* 0 or 1 */
	uint32_t	 cookie;
	uint32_t	 pathlen;	/* 1..BA_EVENT_PATH, starts with '/' */
};

struct hm_agent_exit {
	uint64_t	 id;
	uint32_t	 chan;
	int32_t		 exited;	/* 1: code is set; 0: signal is */
	int32_t		 code;		/* 0..255 */
	int32_t		 signal;	/* 1..127 */
	int32_t		 timed_out;	/* the agent killed it at its deadline */
};

struct hm_agent_fail {
	uint64_t	 id;
	uint32_t	 chan;
	int32_t		 status;	/* 400, 404, 409, 429: the request's fault
					 * (the text follows the code); 0:
					 * the agent's */
	char		 msg[HM_AGENT_TEXT];	/* printable ASCII */
};

struct hm_agent_error {
	uint64_t	 id;
	char		 msg[HM_AGENT_TEXT];	/* printable ASCII */
};

struct hm_ctl_config {
	uint32_t	 certlen, keylen;	/* PEM bytes that follow */
};

struct hm_ctl_id {
	uint64_t	 id;
};

/* fleet 1: accepted on fleet_api_listen, its client certificate
 * verified against the fleet CA; names are the DNS names it holds that
 * could be host ids (fleet_host's syntax, lower-cased), from which the
 * parent picks the host holding a live lease (px_fleet_peer_host). */
#define HM_CTL_FLEET_NAMES 8
struct hm_ctl_open {
	uint64_t	 id;
	char		 addr[46];	/* the client's address, numeric */
	int32_t		 fleet;
	uint32_t	 nnames;
	char		 names[HM_CTL_FLEET_NAMES][33];
};

/* the fleet's certificates: a client context for the forwards
 * (HM_CTL_FORWARD); with a socket, fleet_api_listen's too */
struct hm_ctl_fleet_config {
	uint32_t	 calen, certlen, keylen;	/* PEM bytes that follow */
};

/* A create placement sent to another host (fleet_api.c): the helper
 * connects to addr (numeric ADDRESS:PORT), requires the server's
 * certificate (of the fleet CA) to name host, posts the body (JSON, at
 * most HM_CTL_FORWARD_BODY_MAX) to /v1/sandboxes with Berth-Fleet-Placed:
 * self, reads the answer under fleet_answer.h's bounds and answers
 * HM_CTL_FORWARDED with the same tag, within HM_CTL_FORWARD_SECS from
 * the start, connect and handshake included. At most
 * HM_CTL_FORWARDS at once: past that, an error at once. */
#define HM_CTL_FORWARD_BODY_MAX	(64 * 1024)
#define HM_CTL_FORWARD_SECS	90
#define HM_CTL_FORWARDS		64
struct hm_ctl_forward {
	uint64_t	 tag;
	char		 addr[64];	/* NUL-terminated */
	char		 host[33];	/* a host id (fleet_host's syntax) */
	char		 self[33];	/* this host's id */
	uint32_t	 bodylen;
};

/* status: the peer's HTTP status, its body re-encoded by the helper
 * (compact JSON, or none); 0 when no valid answer came (refused, TLS,
 * timed out, malformed, too large, not JSON): err says why, printable
 * ASCII, and no body follows. */
struct hm_ctl_forwarded {
	uint64_t	 tag;
	int32_t		 status;
	char		 err[256];
	uint32_t	 bodylen;
};

/* what the parent refuses of a fleet peer's request (403, 404): the
 * helper answers it in the control API's error form and closes */
struct hm_ctl_fail {
	uint64_t	 id;
	int32_t		 status;
	char		 msg[160];	/* printable ASCII */
};

/* one request, as the helper parsed and checked it: method (http_parser's
 * enum, GET HEAD POST PUT PATCH DELETE), origin-form target (printable
 * ASCII, no space), the Authorization value, and the body: a JSON
 * document re-serialised by the helper (compact), or none.
 *
 * A streamed request (stream 1: PUT .../files, POST .../exec?stream=1,
 * px_control_streamed) has no body here: the helper sends the body as it
 * comes, de-chunked or counted off its Content-Length, in HM_CTL_BODY
 * messages of at most HM_CTL_CHUNK bytes, then one HM_CTL_BODY_END; no
 * other request of that connection comes before it. Flow control: the
 * helper never has more than HM_CTL_BODY_WINDOW body bytes of a
 * connection that the parent has not acknowledged (HM_CTL_BODY_ACK, sent
 * as the control API takes them); it stops reading the client
 * meanwhile. (Wide: a moved sandbox's RAM file comes this way, and each
 * acknowledgement is a round trip of both processes' loops.) The
 * answer, both kinds alike, comes back in HM_CTL_DATA messages of at
 * most HM_CTL_CHUNK bytes, HM_CTL_WINDOW at most unacknowledged (what
 * the helper holds for a slow client), acknowledged by HM_CTL_DATA_ACK
 * as the client takes them. A peer that exceeds a window or
 * acknowledges more than it got is malformed. */
#define HM_CTL_TARGET_MAX 2048
#define HM_CTL_CHUNK	(64 * 1024)
#define HM_CTL_WINDOW	(128 * 1024)
#define HM_CTL_BODY_WINDOW (1024 * 1024)
struct hm_ctl_request {
	uint64_t	 id;
	int32_t		 method;
	int32_t		 close;		/* the client asked to close after it */
	char		 target[HM_CTL_TARGET_MAX];
	char		 authz[257];
	uint32_t	 bodylen;
	int32_t		 stream;	/* the body follows in HM_CTL_BODY */
	int32_t		 expect;	/* stream: Expect: 100-continue */
};

struct hm_ctl_body_end {
	uint64_t	 id;
	int32_t		 broken;	/* the client broke its framing: the
					 * request fails as it would have */
};

struct hm_ctl_ack {
	uint64_t	 id;
	uint32_t	 bytes;
};

struct hm_ctl_refused {
	int32_t		 reason;	/* PX_CONTROL_REFUSED_* */
};

struct hm_nflog_socket {
	uint16_t	 group;
};

#define HM_DNS_RESOLVERS 8
#define HM_DNS_QTYPES	 64
struct hm_dns_config {
	struct sockaddr_in resolvers[HM_DNS_RESOLVERS];
	uint32_t	 nresolvers;
	uint16_t	 qtypes[HM_DNS_QTYPES];
	uint32_t	 nqtypes;
	uint32_t	 query_rate, label_max, wildcard_names;
	int32_t		 deny_rcode;
};

struct hm_dns_sandbox {
	struct in_addr	 guest, gw;
	char		 id[64];
};

/* followed by nallow + ndeny NUL-terminated rule texts (nc_rule_format),
 * domain rules only: addresses are the table's business */
struct hm_dns_rules {
	struct in_addr	 guest;
	int32_t		 mode;
	uint32_t	 nallow, ndeny;
};

/* "the A answer to name gave these addresses with these TTLs: allow them
 * for guest" — the answer waits for HM_DNS_INSERTED with the same token */
struct hm_dns_insert {
	uint64_t	 token;
	struct in_addr	 guest;
	char		 name[NC_DNS_TEXT_MAX];
	uint32_t	 n;
	struct in_addr	 addrs[NC_DNS_MAX_RR];
	uint32_t	 ttl[NC_DNS_MAX_RR];	/* seconds, as answered */
};

struct hm_dns_inserted {
	uint64_t	 token;
	int32_t		 ok;
	char		 err[256];
};

struct hm_dns_denial {
	struct timespec	 when;
	struct in_addr	 guest;
	char		 name[NC_DNS_TEXT_MAX];
	uint16_t	 qtype;
	char		 reason[32];
};

#endif
