/*
 * test_fleet_answer.c — a fleet peer's answer to a forwarded create, as
 * the control helper reads it (proxy/fleet/fleet_answer.c): each framing
 * whole and byte by byte, 100 Continue skipped, the bounds (head, body),
 * cuts, garbage, and the body re-encoded as compact JSON or refused.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tap.h"
#include "fleet_answer.h"

#include <stdlib.h>
#include <string.h>

/* feeds s whole (step 0) or step bytes at a time, keeping what was not
 * consumed as the helper does; then EOF if eof. 0, or -1 (a->why). */
static int
feed(struct px_fleet_answer *a, const char *s, size_t len, size_t step, int eof)
{
	char *buf = malloc(len + 1);
	size_t have = 0, off = 0, n;
	ssize_t used;

	while (off < len || have > 0) {
		n = step == 0 ? len - off : (len - off < step ? len - off : step);
		memcpy(buf + have, s + off, n);
		have += n;
		off += n;
		if ((used = px_fleet_answer_feed(a, buf, have)) < 0) {
			free(buf);
			return -1;
		}
		memmove(buf, buf + used, have - (size_t)used);
		have -= (size_t)used;
		if (px_fleet_answer_done(a) || (n == 0 && used == 0))
			break;
	}
	free(buf);
	if (eof && px_fleet_answer_eof(a) < 0)
		return -1;
	return 0;
}

static void
check(const char *name, const char *s, int eof, int status, const char *json)
{
	size_t steps[] = { 0, 1, 7 }, i, ol;
	char *out, err[200];

	for (i = 0; i < 3; i++) {
		struct px_fleet_answer a;
		int rc;

		px_fleet_answer_init(&a);
		rc = feed(&a, s, strlen(s), steps[i], eof);
		ok(rc == 0 && px_fleet_answer_done(&a), "%s (step %zu): read%s%s",
		    name, steps[i], a.why ? ": " : "", a.why ? a.why : "");
		is_int(a.status, status, "%s (step %zu): status", name, steps[i]);
		rc = px_fleet_answer_json(&a, 1 << 20, &out, &ol, err, sizeof(err));
		is_str(rc == 0 ? (out ? out : "") : err, json, "%s (step %zu): "
		    "JSON", name, steps[i]);
		free(out);
		px_fleet_answer_free(&a);
	}
}

static void
refused(const char *name, const char *s, size_t len, int eof, const char *why)
{
	struct px_fleet_answer a;
	int rc;

	px_fleet_answer_init(&a);
	rc = feed(&a, s, len ? len : strlen(s), 0, eof);
	ok(rc == -1 && a.why != NULL && strstr(a.why, why) != NULL,
	    "%s: refused (%s)", name, a.why ? a.why : "not refused");
	px_fleet_answer_free(&a);
}

int
main(void)
{
	struct px_fleet_answer a;
	const char *s;
	char *big, *out, err[200];
	size_t n, ol;
	int rc;

	plan(3 * 3 * 6 + 9);
	check("Content-Length", "HTTP/1.1 201 Created\r\nContent-Length: 15\r\n"
	    "\r\n{ \"id\" : \"x1\" }", 0, 201, "{\"id\":\"x1\"}");
	check("chunked", "HTTP/1.1 507 Insufficient Storage\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n", 0, 507,
	    "{\"a\":1}");
	check("close-delimited", "HTTP/1.0 200 OK\r\n\r\n[1, 2]\n", 1, 200,
	    "[1,2]");
	check("100 Continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 "
	    "Created\r\nContent-Length: 2\r\n\r\n{}", 0, 201, "{}");
	check("no body", "HTTP/1.1 204 No Content\r\n\r\n", 0, 204, "");
	check("bytes after the answer", "HTTP/1.1 201 Created\r\nContent-Length: 2"
	    "\r\n\r\n{}HTTP/1.1 200 OK\r\n", 0, 201, "{}");

	refused("garbage", "SSH-2.0-OpenSSH\r\n\r\n", 0, 0, "");
	refused("cut in the head", "HTTP/1.1 201 Created\r\nContent-Le", 0, 1,
	    "closed before");
	refused("cut in the body", "HTTP/1.1 201 Created\r\nContent-Length: 9\r\n"
	    "\r\n{}", 0, 1, "inside");
	refused("Content-Length past 1 MiB", "HTTP/1.1 201 Created\r\n"
	    "Content-Length: 1048577\r\n\r\n", 0, 0, "1 MiB");
	refused("bad chunk", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked"
	    "\r\n\r\nzz\r\n", 0, 0, "");
	n = 20000;
	big = malloc(n + 32);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(big + 20, 'a', n);
	refused("a head past 16 KiB", big, n + 20, 0, "head too large");
	/* a close-delimited body past 1 MiB */
	free(big);
	n = (1 << 20) + 64;
	big = malloc(n);
	memcpy(big, "HTTP/1.1 200 OK\r\n\r\n", 19);
	memset(big + 19, ' ', n - 19);
	refused("a body past 1 MiB", big, n, 1, "1 MiB");
	free(big);

	px_fleet_answer_init(&a);
	s = "HTTP/1.1 201 Created\r\nContent-Length: 9\r\n\r\nnot json!";
	feed(&a, s, strlen(s), 0, 0);
	rc = px_fleet_answer_json(&a, 1 << 20, &out, &ol, err, sizeof(err));
	ok(rc == -1 && strstr(err, "not JSON") != NULL, "a body that is not "
	    "JSON: %s", err);
	px_fleet_answer_free(&a);
	px_fleet_answer_init(&a);
	s = "HTTP/1.1 201 Created\r\nContent-Length: 13\r\n\r\n{\"a\":1,\"a\":2}";
	feed(&a, s, strlen(s), 0, 0);
	rc = px_fleet_answer_json(&a, 1 << 20, &out, &ol, err, sizeof(err));
	ok(rc == -1, "duplicate keys refused: %s", err);
	px_fleet_answer_free(&a);
	return done_testing();
}
