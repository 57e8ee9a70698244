/*
 * nc_egress.h — internals of nc_egress.c that tests reach into: the batch
 * behind a transaction (so a unit test can build one without a kernel
 * and parse the messages back) and the socket behind a context.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_NC_EGRESS_H
#define BERTH_NC_EGRESS_H

struct nc_ctx;
struct nc_txn;
struct nc_batch;
struct nc_nft;

struct nc_nft *nc_ctx_nft(struct nc_ctx *ctx);
/* nc_txn_new(NULL, ...) makes a context-less transaction: it can be built
 * and inspected but not committed, and cannot hold a detach. */
struct nc_batch *nc_txn_batch(struct nc_txn *t);

#endif
