/*
 * test_valid.c — unit tests for vmm/proto/valid.c: the checks every sandbox
 * id, host name, address and port goes through at berth's edges.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "valid.h"
#include "tap.h"

#include <string.h>

static int
id(const char *s)
{
	return px_valid_sandbox_id(s, strlen(s));
}

static int
host(const char *s)
{
	return px_valid_hostname(s, strlen(s));
}

static unsigned
port(const char *s)
{
	return px_parse_port(s, strlen(s));
}

int
main(void)
{
	char buf[300];

	/* sandbox ids */
	ok(id("sb-1"), "id sb-1");
	ok(id("a"), "id of one letter");
	ok(id("0"), "id of one digit");
	memset(buf, 'a', 40);
	buf[40] = '\0';
	ok(id(buf), "id of 40 bytes");
	buf[40] = 'a';
	buf[41] = '\0';
	ok(!id(buf), "id of 41 bytes refused");
	ok(!id(""), "empty id refused");
	ok(!id("Sb-1"), "upper case id refused");
	ok(!id("-sb"), "id with leading '-' refused");
	ok(!id("sb_1"), "id with '_' refused");
	ok(!id("sb.1"), "id with '.' refused");
	ok(id("sb-"), "id with trailing '-' allowed");
	ok(!px_valid_sandbox_id("sb\0x", 4), "id with NUL refused");
	ok(px_valid_sandbox_id("sb-1xyz", 4), "length bounds the id");

	/* host names */
	ok(host("example.com"), "host example.com");
	ok(host("a"), "single-label host");
	ok(host("8080-sb-1.berth.localhost"), "generated host");
	ok(!host(""), "empty host refused");
	ok(!host("Example.com"), "upper case host refused");
	ok(!host("example.com."), "trailing dot refused");
	ok(!host(".example.com"), "leading dot refused");
	ok(!host("a..b"), "empty label refused");
	ok(!host("-a.com"), "label starting with '-' refused");
	ok(!host("a-.com"), "label ending with '-' refused");
	ok(!host("a_b.com"), "'_' refused");
	ok(!host("a.com:443"), "port in host refused");
	memset(buf, 'a', 63);
	strcpy(buf + 63, ".com");
	ok(host(buf), "63-byte label");
	memset(buf, 'a', 64);
	strcpy(buf + 64, ".com");
	ok(!host(buf), "64-byte label refused");
	/* 4 labels of 63 + 3 dots = 255 > 253 */
	memset(buf, 'a', 255);
	buf[63] = buf[127] = buf[191] = '.';
	buf[255] = '\0';
	ok(!host(buf), "255-byte name refused");
	buf[253] = '\0';
	ok(host(buf), "253-byte name");

	/* addresses */
	ok(px_valid_ip("10.0.0.2"), "IPv4");
	ok(px_valid_ip("::1"), "IPv6 loopback");
	ok(px_valid_ip("fd00::2"), "IPv6");
	ok(!px_valid_ip("[::1]"), "bracketed IPv6 refused");
	ok(!px_valid_ip("10.0.0"), "short IPv4 refused");
	ok(!px_valid_ip("10.0.0.256"), "IPv4 octet 256 refused");
	ok(!px_valid_ip("x"), "name refused");
	ok(!px_valid_ip(""), "empty refused");
	ok(!px_valid_ip("10.0.0.2 "), "trailing space refused");

	/* custom host names: addresses in disguise, localhost, suffixes */
	ok(px_host_is_ip("127.0.0.1"), "127.0.0.1 is an address");
	ok(px_host_is_ip("127.1"), "127.1 is an address (inet_aton)");
	ok(px_host_is_ip("0x7f000001"), "0x7f000001 is an address");
	ok(px_host_is_ip("2130706433"), "2130706433 is an address");
	ok(px_host_is_ip("::1"), "::1 is an address");
	ok(px_host_is_ip("app.example.123"), "an all-digit last label is no name");
	ok(!px_host_is_ip("app.example.com"), "app.example.com is a name");
	ok(!px_host_is_ip("1.example.com"), "digits in a first label are fine");
	ok(!px_host_is_ip("0x7f.example"), "hex-looking labels in a name are fine");
	ok(px_host_is_localhost("localhost"), "localhost");
	ok(px_host_is_localhost("a.b.localhost"), "a.b.localhost");
	ok(!px_host_is_localhost("localhost.example.com"), "localhost.example.com is not");
	ok(!px_host_is_localhost("mylocalhost"), "mylocalhost is not");
	ok(px_host_under("a.apps.example.com", "apps.example.com"), "under a suffix");
	ok(px_host_under("a.apps.example.com", ".apps.example.com"), "a leading dot is ignored");
	ok(!px_host_under("apps.example.com", "apps.example.com"), "the suffix itself is not under it");
	ok(!px_host_under("evilapps.example.com", "apps.example.com"), "only at a label boundary");
	ok(!px_host_under("a.apps.example.com", ""), "an empty suffix holds nothing");

	/* ports */
	is_int(port("1"), 1, "port 1");
	is_int(port("8080"), 8080, "port 8080");
	is_int(port("65535"), 65535, "port 65535");
	is_int(port("0"), 0, "port 0 refused");
	is_int(port("65536"), 0, "port 65536 refused");
	is_int(port("99999"), 0, "port 99999 refused");
	is_int(port("080"), 0, "leading zero refused");
	is_int(port("+1"), 0, "sign refused");
	is_int(port("-1"), 0, "negative refused");
	is_int(port(""), 0, "empty refused");
	is_int(port("80a"), 0, "trailing garbage refused");
	is_int(port("123456"), 0, "six digits refused");
	is_int(px_parse_port("8080", 2), 80, "length bounds the port");

	return done_testing();
}
