/*
 * cli_http.c — netctl's HTTP/1.1 client: one request per connection over
 * a blocking unix socket, "Connection: close", the response parsed with
 * http-parser (so Content-Length, chunked and read-until-close bodies all
 * work). Timeouts keep a wedged berthd from hanging the CLI forever.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli.h"

#include <http_parser.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define CLI_TIMEOUT_SECS	30
#define CLI_MAX_BODY		(64u * 1024 * 1024)

struct reader {
	struct cli_response *resp;
	size_t cap;
	int in_ctype;		/* the header being read is Content-Type */
	int done;
	int too_big;
};

static int
on_header_field(http_parser *p, const char *at, size_t len)
{
	struct reader *rd = p->data;

	/* Field names arrive whole here for our small responses; a split
	 * name would only lose the content type, which is advisory. */
	rd->in_ctype = len == 12 && strncasecmp(at, "Content-Type", 12) == 0;
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t len)
{
	struct reader *rd = p->data;
	size_t have;

	if (!rd->in_ctype)
		return 0;
	have = strlen(rd->resp->content_type);
	if (len > sizeof(rd->resp->content_type) - 1 - have)
		len = sizeof(rd->resp->content_type) - 1 - have;
	memcpy(rd->resp->content_type + have, at, len);
	rd->resp->content_type[have + len] = '\0';
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct reader *rd = p->data;
	struct cli_response *r = rd->resp;
	char *nb;

	if (r->len + len > CLI_MAX_BODY) {
		rd->too_big = 1;
		return -1;
	}
	if (r->len + len + 1 > rd->cap) {
		size_t cap = rd->cap ? rd->cap : 4096;

		while (cap < r->len + len + 1)
			cap *= 2;
		if ((nb = realloc(r->body, cap)) == NULL)
			return -1;
		r->body = nb;
		rd->cap = cap;
	}
	memcpy(r->body + r->len, at, len);
	r->len += len;
	r->body[r->len] = '\0';
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct reader *rd = p->data;

	rd->done = 1;
	return 0;
}

static int
send_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

void
cli_response_free(struct cli_response *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

int
cli_http_request(const char *sock_path, const char *method, const char *target,
    const char *body, struct cli_response *resp, int *connect_failed,
    char *err, size_t errlen)
{
	static const http_parser_settings settings = {
		.on_header_field = on_header_field,
		.on_header_value = on_header_value,
		.on_body = on_body,
		.on_message_complete = on_message_complete,
	};
	struct sockaddr_un sun;
	struct timeval tv = { CLI_TIMEOUT_SECS, 0 };
	struct reader rd;
	http_parser parser;
	char head[1024], buf[16384];
	size_t blen = body ? strlen(body) : 0;
	ssize_t n;
	int fd, hlen;

	*connect_failed = 0;
	memset(resp, 0, sizeof(*resp));
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(sock_path) >= sizeof(sun.sun_path)) {
		*connect_failed = 1;
		snprintf(err, errlen, "cannot connect to berthd at %s: path too "
		    "long for a unix socket", sock_path);
		return -1;
	}
	memcpy(sun.sun_path, sock_path, strlen(sock_path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		*connect_failed = 1;
		snprintf(err, errlen, "cannot connect to berthd at %s: %s",
		    sock_path, strerror(errno));
		close(fd);
		return -1;
	}

	hlen = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\n"
	    "Host: localhost\r\nUser-Agent: netctl\r\n"
	    "Accept: application/json\r\nConnection: close\r\n", method, target);
	if (body != NULL)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Content-Type: application/json\r\nContent-Length: %zu\r\n",
		    blen);
	else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0)
		hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen,
		    "Content-Length: 0\r\n");
	hlen += snprintf(head + hlen, sizeof(head) - (size_t)hlen, "\r\n");
	if ((size_t)hlen >= sizeof(head)) {
		snprintf(err, errlen, "request target too long");
		close(fd);
		return -1;
	}
	if (send_all(fd, head, (size_t)hlen) == -1 ||
	    (blen > 0 && send_all(fd, body, blen) == -1)) {
		snprintf(err, errlen, "sending to berthd at %s: %s", sock_path,
		    strerror(errno));
		close(fd);
		return -1;
	}

	memset(&rd, 0, sizeof(rd));
	rd.resp = resp;
	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = &rd;
	while (!rd.done) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			snprintf(err, errlen, "reading from berthd at %s: %s",
			    sock_path, errno == EAGAIN ? "timed out" :
			    strerror(errno));
			goto fail;
		}
		/* n == 0 tells the parser about EOF (ends a body read until
		 * close, or is an error mid-message). */
		if (http_parser_execute(&parser, &settings, buf, (size_t)n) !=
		    (size_t)n || HTTP_PARSER_ERRNO(&parser) != HPE_OK) {
			snprintf(err, errlen, "bad response from berthd at %s: "
			    "%s", sock_path, rd.too_big ? "body too large" :
			    http_errno_description(HTTP_PARSER_ERRNO(&parser)));
			goto fail;
		}
		if (n == 0 && !rd.done) {
			snprintf(err, errlen, "berthd at %s closed the "
			    "connection before answering", sock_path);
			goto fail;
		}
	}
	close(fd);
	resp->status = parser.status_code;
	if (resp->body == NULL && (resp->body = strdup("")) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
fail:
	close(fd);
	cli_response_free(resp);
	return -1;
}
