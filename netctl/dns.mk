# netctl: fragment of the top Makefile.am — the filtering DNS resolver of
# libnetctl (libevent), its unit tests and its namespace test.
# SPDX-License-Identifier: GPL-2.0-or-later
netctl_libnetctl_a_SOURCES += netctl/nc_dns.c netctl/nc_dns.h
netctl_libnetctl_a_CFLAGS += $(LIBEVENT_CFLAGS)

check_PROGRAMS += tests/unit/test_nc_dns tests/unit/test_nc_dns_server
TESTS += tests/unit/test_nc_dns tests/unit/test_nc_dns_server
tests_unit_test_nc_dns_SOURCES = tests/unit/test_nc_dns.c tests/unit/tap.h
tests_unit_test_nc_dns_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_nc_dns_LDADD = $(NC_LIBS) $(LIBEVENT_LIBS)
tests_unit_test_nc_dns_server_SOURCES = tests/unit/test_nc_dns_server.c \
	tests/unit/tap.h
tests_unit_test_nc_dns_server_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_nc_dns_server_LDADD = $(NC_LIBS) $(LIBEVENT_LIBS)

# Integration: egress-dns.sh runs the resolver through nc_dnsdrive.
check_PROGRAMS += tests/integ/nc_dnsdrive
tests_integ_nc_dnsdrive_SOURCES = tests/integ/nc_dnsdrive.c
tests_integ_nc_dnsdrive_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_integ_nc_dnsdrive_LDADD = $(NC_LIBS) $(LIBEVENT_LIBS)
TESTS += tests/integ/egress-dns.sh
EXTRA_DIST += tests/integ/egress-dns.sh
