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
