# proxy: fragment of the top Makefile.am — the state store and the control
# API server, as a library berthd links (add proxy/libpxcontrol.a to
# proxy_berthd_LDADD; it needs valid.c, libevent, jansson, sqlite3 and
# http-parser), plus their unit tests.
noinst_LIBRARIES += proxy/libpxcontrol.a
# The control API server: proxy/api/, one file per family of resources.
PX_API = proxy/api/api.h proxy/api/conn.c proxy/api/fed.c proxy/api/request.c \
	proxy/api/table.c proxy/api/reply.c proxy/api/health.c \
	proxy/api/sandboxes.c proxy/api/ports.c proxy/api/lifecycle.c \
	proxy/api/snapshots.c proxy/api/commands.c proxy/api/exec_req.c \
	proxy/api/streams.c \
	proxy/api/files.c proxy/api/processes.c proxy/api/policy.c \
	proxy/api/egress_rules.c proxy/api/tokens.c proxy/api/templates.c \
	proxy/api/move.c proxy/api/drain.c \
	proxy/api/openapi.c proxy/fleet/fleet_place.c proxy/fleet/fleet_place.h
proxy_libpxcontrol_a_SOURCES = proxy/sandbox/store.c proxy/sandbox/store.h \
	proxy/sandbox/sbfield.h vmm/proto/sandbox_fields.h \
	proxy/api/control.h $(PX_API) proxy/api/reqhead.c proxy/api/reqhead.h \
	proxy/edge/http1.c proxy/edge/http1.h \
	vmm/proto/status.c vmm/proto/status.h \
	proxy/api/control_rule.c proxy/api/control_rule.h \
	proxy/api/token.c proxy/api/token.h
proxy_libpxcontrol_a_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SQLITE_CFLAGS) $(OPENSSL_CFLAGS)
# control_rule.c compiles netctl/nc_rule.c (#include) under other names.

PXCONTROL_LIBS = proxy/libpxcontrol.a netctl/libnetctl.a $(LIBEVENT_LIBS) $(JANSSON_LIBS) \
	$(SQLITE_LIBS) $(HTTP_PARSER_LIBS) $(OPENSSL_LIBS)

check_PROGRAMS += tests/unit/test_valid tests/unit/test_store \
	tests/unit/test_control
TESTS += tests/unit/test_valid tests/unit/test_store tests/unit/test_control
EXTRA_DIST += tests/unit/tap.h

tests_unit_test_valid_SOURCES = tests/unit/test_valid.c tests/unit/tap.h \
	vmm/proto/valid.c vmm/proto/valid.h

tests_unit_test_store_SOURCES = tests/unit/test_store.c tests/unit/tap.h \
	vmm/proto/valid.c
tests_unit_test_store_CFLAGS = $(AM_CFLAGS) $(SQLITE_CFLAGS)
tests_unit_test_store_LDADD = $(PXCONTROL_LIBS)

# Runs the API server in a child on a temp socket; drives it with raw
# requests and with the real netctl binary (found through top_builddir).
tests_unit_test_control_SOURCES = tests/unit/test_control.c tests/unit/tap.h \
	netctl/cli_http.c netctl/cli.h \
	vmm/proto/valid.c
tests_unit_test_control_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(SQLITE_CFLAGS)
tests_unit_test_control_LDADD = $(PXCONTROL_LIBS)

# The route table: routes, scopes, Allow, streamed bodies, registration.
check_PROGRAMS += tests/unit/test_api_table
TESTS += tests/unit/test_api_table
tests_unit_test_api_table_SOURCES = tests/unit/test_api_table.c tests/unit/tap.h \
	vmm/proto/valid.c
tests_unit_test_api_table_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) \
	$(JANSSON_CFLAGS) $(OPENSSL_CFLAGS)
tests_unit_test_api_table_LDADD = $(PXCONTROL_LIBS)

# Tokens and the policy's rule relations.
check_PROGRAMS += tests/unit/test_token
TESTS += tests/unit/test_token
tests_unit_test_token_SOURCES = tests/unit/test_token.c tests/unit/tap.h
tests_unit_test_token_CFLAGS = $(AM_CFLAGS) $(OPENSSL_CFLAGS)
tests_unit_test_token_LDADD = $(PXCONTROL_LIBS)

# Integration (root): berthd killed with -9 and restarted keeps its state.
TESTS += tests/integ/control-restart.sh
EXTRA_DIST += tests/integ/control-restart.sh

# Manual pages (the systemd unit and bash completion: contrib/local.mk).
dist_man_MANS = doc/berthd.8 doc/netctl.8 doc/berth.conf.5

# Integration (root): 100 parallel publish/unpublish calls end consistent;
# an MCP session over stdio publishes a port whose URL answers.
TESTS += tests/integ/control-api.sh
EXTRA_DIST += tests/integ/control-api.sh
# Integration (root, Chromium): a private URL opened with ?berth_token=,
# the cookie it leaves and the page's WebSocket; the 401 page without it.
TESTS += tests/integ/browser-private.sh
EXTRA_DIST += tests/integ/browser-private.sh
CLEANFILES += tests/integ/browser-private.png tests/integ/browser-private-401.png
