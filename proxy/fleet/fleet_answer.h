/*
 * fleet_answer.h — the answer of a fleet peer to a forwarded create,
 * read in the control helper (controld.c), never in the parent: a
 * bounded HTTP/1.1 response reader over http1.c's head parser and
 * chunked decoder (PX_FLEET_ANSWER_HEAD_MAX of head, 1xx skipped,
 * PX_FLEET_ANSWER_BODY_MAX of body framed by Content-Length, chunked or
 * the close), and the body checked as JSON and re-serialised compact,
 * which is all the parent reads of it. Pure: tests/unit/test_fleet_answer.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_FLEET_ANSWER_H
#define BERTH_FLEET_ANSWER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http1.h"

#define PX_FLEET_ANSWER_HEAD_MAX	PX_HEAD_MAX		/* 16 KiB */
#define PX_FLEET_ANSWER_BODY_MAX	(1024 * 1024)

struct px_fleet_answer {
	struct px_head	 head;
	int		 state;		/* internal */
	enum px_body_kind kind;
	struct px_chunk	 chunk;
	uint64_t	 remain;	/* Content-Length bytes still to come */
	char		*body;		/* owned, len bytes */
	size_t		 len, cap;
	int		 status;	/* the final status, once the head came */
	const char	*why;		/* static text, after -1 */
};

void px_fleet_answer_init(struct px_fleet_answer *);
void px_fleet_answer_free(struct px_fleet_answer *);

/* Consumes from buf[0..len), all bytes not yet consumed: the bytes
 * consumed (the caller drops them; a head is consumed only whole, so
 * the caller keeps what is left and calls again with more), -1 with why
 * when the answer is malformed or too large. Bytes after the end of the
 * answer are left. */
ssize_t px_fleet_answer_feed(struct px_fleet_answer *, const char *buf,
    size_t len);
/* 1 when the whole answer was read. */
int px_fleet_answer_done(const struct px_fleet_answer *);
/* The peer closed: 0 when that completes the answer (one delimited by
 * the close) or it was complete, -1 with why when it was cut. */
int px_fleet_answer_eof(struct px_fleet_answer *);

/* The body as compact JSON (malloc'd, NUL-terminated, *outlen bytes),
 * or NULL and *outlen 0 for an empty body; -1 with err when the body
 * is not one JSON document or the result is larger than max. */
int px_fleet_answer_json(const struct px_fleet_answer *, size_t max,
    char **out, size_t *outlen, char *err, size_t errlen);

#endif
