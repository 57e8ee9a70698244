# proxy: fragment of the top Makefile.am — the state store and the control
# API server, as a library berthd links (add proxy/libpxcontrol.a to
# proxy_berthd_LDADD; it needs valid.c, libevent, jansson, sqlite3 and
# http-parser), plus their unit tests.
noinst_LIBRARIES += proxy/libpxcontrol.a
proxy_libpxcontrol_a_SOURCES = proxy/store.c proxy/store.h \
	proxy/control.c proxy/control.h
proxy_libpxcontrol_a_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SQLITE_CFLAGS)

PXCONTROL_LIBS = proxy/libpxcontrol.a $(LIBEVENT_LIBS) $(JANSSON_LIBS) \
	$(SQLITE_LIBS) $(HTTP_PARSER_LIBS)

check_PROGRAMS += tests/unit/test_valid tests/unit/test_store \
	tests/unit/test_control
TESTS += tests/unit/test_valid tests/unit/test_store tests/unit/test_control
EXTRA_DIST += tests/unit/tap.h

tests_unit_test_valid_SOURCES = tests/unit/test_valid.c tests/unit/tap.h \
	proxy/valid.c proxy/valid.h

tests_unit_test_store_SOURCES = tests/unit/test_store.c tests/unit/tap.h \
	proxy/valid.c
tests_unit_test_store_CFLAGS = $(AM_CFLAGS) $(SQLITE_CFLAGS)
tests_unit_test_store_LDADD = $(PXCONTROL_LIBS)

# Runs the API server in a child on a temp socket; drives it with raw
# requests and with the real netctl binary (found through top_builddir).
tests_unit_test_control_SOURCES = tests/unit/test_control.c tests/unit/tap.h \
	netctl/cli_http.c netctl/cli.h \
	proxy/valid.c
tests_unit_test_control_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SQLITE_CFLAGS)
tests_unit_test_control_LDADD = $(PXCONTROL_LIBS)
