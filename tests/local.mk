# tests: unit tests (TAP, no root) and the integration runner
EXTRA_DIST += tests/run-integ
EXTRA_DIST += tests/leftovers

# Unit tests of the proxy's pure parts (TAP, no root).
PX_UNIT_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
check_PROGRAMS += tests/unit/test_http1 tests/unit/test_route tests/unit/test_conf
TESTS += tests/unit/test_http1 tests/unit/test_route tests/unit/test_conf
tests_unit_test_http1_SOURCES = tests/unit/test_http1.c proxy/edge/http1.c
tests_unit_test_http1_LDADD = $(HTTP_PARSER_LIBS)
tests_unit_test_route_SOURCES = tests/unit/test_route.c proxy/edge/route.c vmm/proto/valid.c
tests_unit_test_route_CFLAGS = $(PX_UNIT_CFLAGS)
tests_unit_test_route_LDADD = $(JANSSON_LIBS) $(OPENSSL_LIBS)
tests_unit_test_conf_SOURCES = tests/unit/test_conf.c proxy/conf.c vmm/proto/valid.c

# Private URLs (tokens, cookie exchange) and the TLS control listener.
TESTS += tests/integ/proxy-private.sh
EXTRA_DIST += tests/integ/proxy-private.sh

# Wake on request with a real microVM (root, qemu TCG; one boot).
TESTS += tests/integ/wake.sh
EXTRA_DIST += tests/integ/wake.sh

# Egress policy end to end with a real microVM (root, qemu TCG; one boot).
TESTS += tests/integ/egress-vm.sh
EXTRA_DIST += tests/integ/egress-vm.sh

# Ops' policy limits (max_rules, conn_limit, new_conn_rate) through berthd,
# the API and netctl; berthd in a network namespace of its own (root).
TESTS += tests/integ/egress-policy.sh
EXTRA_DIST += tests/integ/egress-policy.sh

# Chromium opens the URL of a suspended microVM sandbox (root, qemu, chromium).
TESTS += tests/integ/browser-wake.sh
EXTRA_DIST += tests/integ/browser-wake.sh
CLEANFILES += tests/integ/browser-wake.png

# kill -9 of berthd with two VMs running: re-adoption (root, qemu; two boots).
TESTS += tests/integ/vm-restart.sh
EXTRA_DIST += tests/integ/vm-restart.sh

# Fleet mode's fleet_* directives and remote routes (TAP, no root).
check_PROGRAMS += tests/unit/test_fleet
TESTS += tests/unit/test_fleet
tests_unit_test_fleet_SOURCES = tests/unit/test_fleet.c proxy/conf.c proxy/edge/route.c vmm/proto/valid.c \
	proxy/fleet/fleet_view.c proxy/fleet/fleet_tls.c proxy/fleet/fleet_place.c
tests_unit_test_fleet_CFLAGS = $(PX_UNIT_CFLAGS)
tests_unit_test_fleet_LDADD = $(JANSSON_LIBS) $(OPENSSL_LIBS)

# Placement of a new sandbox over the fleet view (TAP, no root).
check_PROGRAMS += tests/unit/test_fleet_place
TESTS += tests/unit/test_fleet_place
tests_unit_test_fleet_place_SOURCES = tests/unit/test_fleet_place.c proxy/fleet/fleet_place.c
tests_unit_test_fleet_place_CFLAGS = $(PX_UNIT_CFLAGS)
tests_unit_test_fleet_place_LDADD = $(JANSSON_LIBS)

# `netctl --json` prints exactly one JSON document for every command
# (walks all that `netctl help` lists) against berthd without VMs (root).
TESTS += tests/integ/netctl-json.sh
EXTRA_DIST += tests/integ/netctl-json.sh

# A microVM's lifecycle through netctl: --memory/--vcpus seen in the guest,
# a named template, idle policy set later, failed -> start, restart, stop,
# /data kept (root, qemu TCG; three boots).
TESTS += tests/integ/vm-lifecycle-cli.sh
EXTRA_DIST += tests/integ/vm-lifecycle-cli.sh

# vm_max_resident: a create, a request and an exec suspend the least
# recently active idle sandbox (an event names the cap), or are refused
# 503 "capacity" when none is idle; netctl status and /metrics show the
# same capacity sample; vm_standby_memory gives the standby to the most
# recently active suspended sandbox (root, qemu TCG; three boots).
TESTS += tests/integ/vm-caps.sh
EXTRA_DIST += tests/integ/vm-caps.sh

# netctl's commands for a guest's files (sandbox files, mkdir, rm with a
# path, mv, cat, watch with its overflow) and the MCP file tools, against
# a microVM (root, qemu TCG; one boot).
TESTS += tests/integ/netctl-files.sh
EXTRA_DIST += tests/integ/netctl-files.sh

# A fleet peer's answer to a forwarded create, as the control helper
# reads it (TAP, no root).
check_PROGRAMS += tests/unit/test_fleet_answer
TESTS += tests/unit/test_fleet_answer
tests_unit_test_fleet_answer_SOURCES = tests/unit/test_fleet_answer.c proxy/fleet/fleet_answer.c \
	proxy/edge/http1.c
tests_unit_test_fleet_answer_CFLAGS = $(PX_UNIT_CFLAGS)
tests_unit_test_fleet_answer_LDADD = $(JANSSON_LIBS) $(HTTP_PARSER_LIBS)
