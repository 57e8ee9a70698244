/*
 * cli.h — pieces of the netctl command-line client shared between its
 * files: a blocking HTTP/1.1 client for berthd's control socket.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_CLI_H
#define BERTH_CLI_H

#include <stddef.h>

struct cli_response {
	int status;		/* HTTP status code */
	char *body;		/* NUL-terminated; malloc'd, may be "" */
	size_t len;
	char content_type[128];
};

/*
 * Sends one request (body may be NULL) over the unix socket at sock_path
 * and reads the whole response (Content-Length, chunked or until close).
 * 0 on success with *resp filled (free it with cli_response_free), -1 with
 * err filled when berthd cannot be reached or answers something that is
 * not HTTP; *connect_failed tells the two apart.
 */
int cli_http_request(const char *sock_path, const char *method,
    const char *target, const char *body, struct cli_response *resp,
    int *connect_failed, char *err, size_t errlen);
void cli_response_free(struct cli_response *);

#endif
