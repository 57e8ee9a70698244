/*
 * fleet_answer.c — see fleet_answer.h: what a fleet peer answered, read
 * under bounds by the control helper. The peer authenticated as the
 * host placement chose, but "a fleet host may lie" (README): nothing
 * of its bytes is trusted beyond these checks, and the parent sees
 * only the status and the re-encoded JSON.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fleet_answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>
#include <jansson.h>

enum { A_HEAD, A_BODY, A_DONE, A_BAD };

void
px_fleet_answer_init(struct px_fleet_answer *a)
{
	memset(a, 0, sizeof(*a));
	px_head_init(&a->head, 0);
	a->state = A_HEAD;
}

void
px_fleet_answer_free(struct px_fleet_answer *a)
{
	px_head_reset(&a->head);
	free(a->body);
	a->body = NULL;
	a->len = a->cap = 0;
}

static int
bad(struct px_fleet_answer *a, const char *why)
{
	a->why = why;
	a->state = A_BAD;
	return -1;
}

static int
append(struct px_fleet_answer *a, const char *p, size_t n)
{
	char *nb;
	size_t cap;

	if (n == 0)		/* an empty piece: nothing to keep (a->body may
				 * still be NULL) */
		return 0;
	if (n > PX_FLEET_ANSWER_BODY_MAX - a->len)
		return bad(a, "body larger than 1 MiB");
	if (a->len + n > a->cap) {
		cap = a->cap ? a->cap : 4096;
		while (cap < a->len + n)
			cap *= 2;
		if (cap > PX_FLEET_ANSWER_BODY_MAX)
			cap = PX_FLEET_ANSWER_BODY_MAX;
		if ((nb = realloc(a->body, cap)) == NULL)
			return bad(a, "out of memory");
		a->body = nb;
		a->cap = cap;
	}
	memcpy(a->body + a->len, p, n);
	a->len += n;
	return 0;
}

ssize_t
px_fleet_answer_feed(struct px_fleet_answer *a, const char *buf, size_t len)
{
	size_t used = 0, dlen;
	ssize_t n;
	int st;
	const char *why;

	while (used < len || a->state == A_HEAD) {
		switch (a->state) {
		case A_HEAD:
			n = px_head_parse(&a->head, buf + used, len - used, &st, &why);
			if (n < 0)
				return bad(a, why);
			if (n == 0)
				return (ssize_t)used;
			used += (size_t)n;
			if (a->head.status >= 100 && a->head.status < 200) {
				if (a->head.status == 101)
					return bad(a, "an upgrade, not an answer");
				px_head_reset(&a->head);
				px_head_init(&a->head, 0);
				continue;	/* 100 Continue and the like */
			}
			a->status = a->head.status;
			a->kind = px_response_body(&a->head, HTTP_POST);
			if (a->kind == PX_BODY_LENGTH) {
				if (a->head.content_length > PX_FLEET_ANSWER_BODY_MAX)
					return bad(a, "body larger than 1 MiB");
				a->remain = (uint64_t)a->head.content_length;
			} else if (a->kind == PX_BODY_CHUNKED)
				px_chunk_init(&a->chunk);
			a->state = a->kind == PX_BODY_NONE ? A_DONE : A_BODY;
			break;
		case A_BODY:
			if (a->kind == PX_BODY_LENGTH) {
				dlen = len - used < a->remain ? len - used :
				    (size_t)a->remain;
				if (append(a, buf + used, dlen) < 0)
					return -1;
				used += dlen;
				if ((a->remain -= dlen) == 0)
					a->state = A_DONE;
			} else if (a->kind == PX_BODY_CHUNKED) {
				n = px_chunk_step(&a->chunk, buf + used, len - used,
				    &dlen, &why);
				if (n < 0)
					return bad(a, why);
				if (append(a, buf + used + (size_t)n - dlen, dlen) < 0)
					return -1;
				used += (size_t)n;
				if (px_chunk_done(&a->chunk))
					a->state = A_DONE;
				else if (n == 0)
					return (ssize_t)used;
			} else {
				if (append(a, buf + used, len - used) < 0)
					return -1;
				used = len;
			}
			break;
		case A_DONE:
			return (ssize_t)used;
		default:
			return -1;
		}
	}
	return (ssize_t)used;
}

int
px_fleet_answer_done(const struct px_fleet_answer *a)
{
	return a->state == A_DONE;
}

int
px_fleet_answer_eof(struct px_fleet_answer *a)
{
	if (a->state == A_DONE)
		return 0;
	if (a->state == A_BODY && a->kind == PX_BODY_CLOSE) {
		a->state = A_DONE;
		return 0;
	}
	if (a->state == A_BAD)
		return -1;
	return bad(a, a->state == A_HEAD ? "the connection closed before an "
	    "answer" : "the connection closed inside the answer");
}

int
px_fleet_answer_json(const struct px_fleet_answer *a, size_t max, char **out,
    size_t *outlen, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *doc;
	char *text;
	size_t i;

	*out = NULL;
	*outlen = 0;
	for (i = 0; i < a->len; i++)
		if (a->body[i] != ' ' && a->body[i] != '\t' &&
		    a->body[i] != '\r' && a->body[i] != '\n')
			break;
	if (i == a->len)
		return 0;	/* no body */
	if ((doc = json_loadb(a->body, a->len, JSON_REJECT_DUPLICATES |
	    JSON_DECODE_ANY, &jerr)) == NULL) {
		snprintf(err, errlen, "an answer that is not JSON (line %d, "
		    "column %d: %s)", jerr.line, jerr.column, jerr.text);
		return -1;
	}
	text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER |
	    JSON_ENCODE_ANY);
	json_decref(doc);
	if (text == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (strlen(text) > max) {
		free(text);
		snprintf(err, errlen, "an answer larger than %zu bytes", max);
		return -1;
	}
	*out = text;
	*outlen = strlen(text);
	return 0;
}
