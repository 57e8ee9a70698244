/*
 * nc_nft.h — libnetctl's nftables transport (internal): a NETLINK_NETFILTER
 * socket, growable batches of nf_tables messages built with libnftnl, and
 * a commit that sends one BEGIN(genid) … END batch in one sendmsg, reads
 * every acknowledgement and maps an error back to the object that caused
 * it by sequence number, with the kernel's extended-ack text.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_NC_NFT_H
#define BERTH_NC_NFT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct nlmsghdr;
struct nftnl_table;
struct nftnl_chain;
struct nftnl_rule;
struct nftnl_set;
struct nftnl_set_elem;

/* printf into a caller's error buffer; always returns -1. */
int nc_errf(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct nc_nft;
struct nc_batch;

struct nc_nft *nc_nft_open(char *err, size_t len);
void nc_nft_close(struct nc_nft *n);
/* Current ruleset generation (NFT_MSG_GETGEN). */
int nc_nft_getgen(struct nc_nft *n, uint32_t *gen, char *err, size_t len);

struct nc_batch *nc_batch_new(void);
void nc_batch_free(struct nc_batch *b);
size_t nc_batch_count(const struct nc_batch *b);	/* queued messages */
/* Drop messages queued after mark (undo a half-built operation). */
size_t nc_batch_mark(const struct nc_batch *b);
void nc_batch_rewind(struct nc_batch *b, size_t mark);

/* Queue one message; `what` names the object for error messages (a copy
 * is kept). NLM_F_ACK is added to every message. Return -1 on ENOMEM. */
int nc_batch_table(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_table *t, const char *what);
int nc_batch_chain(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_chain *c, const char *what);
int nc_batch_rule(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_rule *r, const char *what);
int nc_batch_set(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_set *s, const char *what);
/* s carries table, name and the elements to add/delete. */
int nc_batch_elems(struct nc_batch *b, uint16_t type, uint16_t flags,
    struct nftnl_set *s, const char *what);

/* Serialize: BEGIN (with NFNL_BATCH_GENID if genid) + messages + END,
 * sequence numbers from seq0 (BEGIN) on. The buffer stays owned by b. */
int nc_batch_finish(struct nc_batch *b, uint32_t seq0, const uint32_t *genid,
    const void **buf, size_t *len);
/* Name of the message with this sequence number after nc_batch_finish(). */
const char *nc_batch_what(const struct nc_batch *b, uint32_t seq);

/* Parse one NLMSG_ERROR reply of a batch into (errno, text). Returns the
 * positive errno (0 for a plain ack); writes "what: strerror (kernel msg)"
 * into err when errno != 0. Exposed for unit tests. */
int nc_nft_parse_ack(const struct nc_batch *b, const struct nlmsghdr *nlh,
    char *err, size_t len);

/* Send the batch and read every ack. 0, -ERESTART when genid no longer
 * matches (nothing applied), or another negative errno with err filled. */
int nc_nft_commit(struct nc_nft *n, struct nc_batch *b, const uint32_t *genid,
    char *err, size_t len);

/* Dump one set's elements: cb is called per element; nonzero stops.
 * -EINTR when the dump was interrupted by a ruleset change. */
int nc_nft_dump_elems(struct nc_nft *n, const char *table, const char *set,
    int (*cb)(struct nftnl_set_elem *e, void *arg), void *arg,
    char *err, size_t len);
int nc_nft_dump_elems_family(struct nc_nft *n, uint16_t family,
    const char *table, const char *set,
    int (*cb)(struct nftnl_set_elem *e, void *arg), void *arg,
    char *err, size_t len);
/* Read one element of a hash set or map by its key: cb gets it once;
 * -ENOENT (err filled) when there is none. */
int nc_nft_get_elem(struct nc_nft *n, const char *table, const char *set,
    const void *key, uint32_t klen,
    int (*cb)(struct nftnl_set_elem *e, void *arg), void *arg,
    char *err, size_t len);
/* Count rules of a table (all chains). */
int nc_nft_count_rules(struct nc_nft *n, const char *table, size_t *count,
    char *err, size_t len);

#endif
