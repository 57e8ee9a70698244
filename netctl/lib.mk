# netctl: fragment of the top Makefile.am — libnetctl's egress side
# (nftables via libnftnl/libmnl, rule language) and its tests.
# SPDX-License-Identifier: GPL-2.0-or-later
noinst_LIBRARIES += netctl/libnetctl.a
netctl_libnetctl_a_SOURCES = netctl/netctl.h \
	netctl/nc_nft.c netctl/nc_nft.h \
	netctl/nc_egress.c netctl/nc_egress.h \
	netctl/nc_rule.c netctl/nc_nflog.c netctl/nc_ct.c netctl/nc_host.c
netctl_libnetctl_a_CFLAGS = $(AM_CFLAGS) $(LIBMNL_CFLAGS) $(LIBNFTNL_CFLAGS)
NC_LIBS = netctl/libnetctl.a $(LIBNFTNL_LIBS) $(LIBMNL_LIBS)

check_PROGRAMS += tests/unit/test_nc_rule tests/unit/test_nc_batch \
	tests/unit/test_nc_nflog
TESTS += tests/unit/test_nc_rule tests/unit/test_nc_batch \
	tests/unit/test_nc_nflog
tests_unit_test_nc_rule_SOURCES = tests/unit/test_nc_rule.c tests/unit/tap.h
tests_unit_test_nc_rule_CFLAGS = $(AM_CFLAGS)
tests_unit_test_nc_rule_LDADD = $(NC_LIBS)
tests_unit_test_nc_batch_SOURCES = tests/unit/test_nc_batch.c tests/unit/tap.h
tests_unit_test_nc_batch_CFLAGS = $(AM_CFLAGS) $(LIBMNL_CFLAGS) $(LIBNFTNL_CFLAGS)
tests_unit_test_nc_batch_LDADD = $(NC_LIBS)
tests_unit_test_nc_nflog_SOURCES = tests/unit/test_nc_nflog.c tests/unit/tap.h
tests_unit_test_nc_nflog_CFLAGS = $(AM_CFLAGS) $(LIBMNL_CFLAGS)
tests_unit_test_nc_nflog_LDADD = $(NC_LIBS)

# Integration: tests/integ/egress-*.sh drive the library through nc_drive.
check_PROGRAMS += tests/integ/nc_drive
tests_integ_nc_drive_SOURCES = tests/integ/nc_drive.c
tests_integ_nc_drive_CFLAGS = $(AM_CFLAGS)
tests_integ_nc_drive_LDADD = $(NC_LIBS)
TESTS += tests/integ/egress-nft.sh tests/integ/egress-limits.sh \
	tests/integ/egress-cut.sh
EXTRA_DIST += tests/integ/egress-nft.sh tests/integ/egress-limits.sh \
	tests/integ/egress-cut.sh
# berthd's egress from inside two microVMs (root, qemu TCG; two boots)
TESTS += tests/integ/egress-live.sh
EXTRA_DIST += tests/integ/egress-live.sh
