/*
 * valid.c — see valid.h. Everything here runs on untrusted bytes, so each
 * function checks lengths first and never reads past len.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "valid.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

static int
is_lower_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int
px_valid_sandbox_id(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > PX_SANDBOX_ID_MAX || !is_lower_alnum(s[0]))
		return 0;
	for (i = 1; i < len; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return 0;
	return 1;
}

int
px_valid_hostname(const char *s, size_t len)
{
	size_t i, label = 0;

	if (len == 0 || len > PX_HOSTNAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!is_lower_alnum(c) && c != '-')
			return 0;
		if (c == '-' && label == 0)
			return 0;
		if (++label > 63)
			return 0;
	}
	return label > 0 && s[len - 1] != '-';
}

int
px_valid_ip(const char *s)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

int
px_host_is_ip(const char *s)
{
	struct in_addr a4;
	const char *last = strrchr(s, '.');
	size_t i;

	if (px_valid_ip(s) || inet_aton(s, &a4) != 0)
		return 1;
	last = last != NULL ? last + 1 : s;
	if (*last == '\0')
		return 0;
	for (i = 0; last[i] != '\0'; i++)
		if (last[i] < '0' || last[i] > '9')
			return 0;
	return 1;
}

int
px_host_is_localhost(const char *s)
{
	return strcasecmp(s, "localhost") == 0 || px_host_under(s, "localhost");
}

int
px_host_under(const char *host, const char *suffix)
{
	size_t hl = strlen(host), sl;

	if (*suffix == '.')
		suffix++;
	sl = strlen(suffix);
	return sl > 0 && hl > sl + 1 && host[hl - sl - 1] == '.' &&
	    strcasecmp(host + hl - sl, suffix) == 0;
}

int
px_host_own_name(const char *host, const char *domain, const char *id)
{
	size_t hl = strlen(host), dl = strlen(domain), il = strlen(id), i, ll;

	if (!px_host_under(host, domain))
		return 0;
	ll = hl - dl - 1;	/* the labels before the domain */
	if (host[0] < 'a' || host[0] > 'z')
		return 0;
	for (i = 1; i < ll && is_lower_alnum((unsigned char)host[i]); i++)
		;
	return i < ll && host[i] == '-' && ll - i - 1 == il &&
	    memcmp(host + i + 1, id, il) == 0;
}

uint16_t
px_parse_port(const char *s, size_t len)
{
	unsigned v = 0;
	size_t i;

	if (len == 0 || len > 5 || s[0] == '0')
		return 0;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	return v >= 1 && v <= 65535 ? (uint16_t)v : 0;
}
