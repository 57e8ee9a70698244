# proxy: berthd, the parent and its proxy workers
sbin_PROGRAMS += proxy/berthd
PX_CORE = vmm/proto/valid.c vmm/proto/valid.h proxy/edge/http1.c proxy/edge/http1.h \
	proxy/edge/route.c proxy/edge/route.h proxy/edge/routemsg.h proxy/conf.c proxy/conf.h \
	proxy/log.c proxy/log.h
proxy_berthd_SOURCES = proxy/berthd.c $(PX_CORE) \
	proxy/edge/tls.c proxy/edge/tls.h proxy/edge/ipc.c proxy/edge/ipc.h \
	proxy/edge/worker.c proxy/edge/worker.h proxy/edge/session.c proxy/edge/session.h \
	proxy/edge/h2.c proxy/edge/h2.h proxy/edge/upstream.c proxy/edge/respond.c proxy/edge/wake.c proxy/edge/wake.h proxy/sandbox/vm.c proxy/sandbox/vm.h proxy/sandbox/exec.c proxy/sandbox/exec.h proxy/sandbox/agentio.c proxy/sandbox/agentio.h proxy/sandbox/egress.c proxy/sandbox/egress.h \
	proxy/path.c proxy/path.h proxy/edge/evprio.c proxy/edge/evprio.h proxy/edge/bufpool.c proxy/edge/bufpool.h \
	proxy/fleet/fleet.c proxy/fleet/fleet.h proxy/fleet/fleet_view.c proxy/fleet/fleet_view.h proxy/fleet/fleet_api.c proxy/fleet/fleet_api.h proxy/fleet/fleet_answer.c proxy/fleet/fleet_answer.h proxy/fleet/fleet_tls.c proxy/fleet/fleet_tls.h proxy/fleet/fleet_move.c proxy/fleet/fleet_move.h \
	proxy/privsep/proc.c proxy/privsep/proc.h proxy/privsep/chan.c proxy/privsep/helper.h proxy/privsep/nflogd.c proxy/privsep/dnsd.c proxy/privsep/controld.c \
	proxy/privsep/agentd.c
# Installed helpers (berth-mkcert in pkgdatadir; mktemplate, init and
# testapp in pkglibexecdir) and, for a berthd run from this build tree,
# the source and build trees (see proxy/sandbox/vm.c: find_helper).
proxy_berthd_CPPFLAGS = $(AM_CPPFLAGS) -DPKGDATADIR='"$(pkgdatadir)"' \
	-DPKGLIBEXECDIR='"$(pkglibexecdir)"' -DBINDIR='"$(bindir)"' \
	-DSRCDIR='"$(abs_top_srcdir)"' -DBUILDDIR='"$(abs_top_builddir)"'
proxy_berthd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS) $(NGHTTP2_CFLAGS) $(JANSSON_CFLAGS) $(SQLITE_CFLAGS)
proxy_berthd_LDADD = proxy/libpxcontrol.a vmm/libvmm.a netctl/libnetctl.a $(LIBMNL_LIBS) $(LIBNFTNL_LIBS) $(LIBEVENT_LIBS) $(OPENSSL_LIBS) $(NGHTTP2_LIBS) $(JANSSON_LIBS) $(SQLITE_LIBS) $(HTTP_PARSER_LIBS)

check_PROGRAMS += tests/unit/test_evprio
TESTS += tests/unit/test_evprio
tests_unit_test_evprio_SOURCES = tests/unit/test_evprio.c tests/unit/tap.h \
	proxy/edge/evprio.c proxy/edge/evprio.h
tests_unit_test_evprio_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_evprio_LDADD = $(LIBEVENT_LIBS)

check_PROGRAMS += tests/unit/test_chan
TESTS += tests/unit/test_chan
tests_unit_test_chan_SOURCES = tests/unit/test_chan.c tests/unit/tap.h \
	proxy/privsep/chan.c proxy/privsep/proc.h
tests_unit_test_chan_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_chan_LDADD = $(LIBEVENT_LIBS)

check_PROGRAMS += tests/unit/test_agentd
TESTS += tests/unit/test_agentd
tests_unit_test_agentd_SOURCES = tests/unit/test_agentd.c tests/unit/tap.h \
	proxy/privsep/agentd.c proxy/privsep/chan.c proxy/privsep/proc.h proxy/privsep/helper.h proxy/log.c \
	proxy/log.h vmm/proto/agent_proto.h
tests_unit_test_agentd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_agentd_LDADD = $(LIBEVENT_LIBS)

# exec.c and agentio.c with libvmm, vm.c and the helper stood in for:
# the helper's read-only pipe, bounds, the queue's deadline, abandon.
check_PROGRAMS += tests/unit/test_exec
TESTS += tests/unit/test_exec
tests_unit_test_exec_SOURCES = tests/unit/test_exec.c tests/unit/tap.h \
	proxy/sandbox/exec.c proxy/sandbox/exec.h proxy/sandbox/agentio.c \
	proxy/sandbox/agentio.h proxy/log.c proxy/log.h
tests_unit_test_exec_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_exec_LDADD = $(LIBEVENT_LIBS)

check_PROGRAMS += tests/unit/test_bufpool
TESTS += tests/unit/test_bufpool
tests_unit_test_bufpool_SOURCES = tests/unit/test_bufpool.c tests/unit/tap.h \
	proxy/edge/bufpool.c proxy/edge/bufpool.h
tests_unit_test_bufpool_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS)
tests_unit_test_bufpool_LDADD = $(LIBEVENT_LIBS) $(OPENSSL_LIBS)

# The session layer over the stand-in transport (a socketpair) with a
# scripted upstream on loopback: no worker, no parent.
check_PROGRAMS += tests/unit/test_session
TESTS += tests/unit/test_session
tests_unit_test_session_SOURCES = tests/unit/test_session.c tests/unit/tap.h \
	proxy/edge/session.c proxy/edge/session.h proxy/edge/h2.c proxy/edge/h2.h proxy/edge/upstream.c \
	proxy/edge/wake.c proxy/edge/wake.h proxy/edge/respond.c proxy/edge/tls.c proxy/edge/tls.h proxy/fleet/fleet_tls.c proxy/fleet/fleet_tls.h \
	proxy/edge/route.c proxy/edge/route.h proxy/edge/routemsg.h proxy/edge/http1.c proxy/edge/http1.h \
	vmm/proto/valid.c vmm/proto/valid.h proxy/log.c proxy/log.h proxy/edge/evprio.c proxy/edge/evprio.h \
	vmm/proto/status.c vmm/proto/status.h \
	tests/support/scripted_upstream.c tests/support/scripted_upstream.h
tests_unit_test_session_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS) $(JANSSON_CFLAGS) $(NGHTTP2_CFLAGS)
tests_unit_test_session_LDADD = $(LIBEVENT_LIBS) $(OPENSSL_LIBS) $(JANSSON_LIBS) $(NGHTTP2_LIBS) $(HTTP_PARSER_LIBS)

# The control API's OpenAPI 3.1 description, as GET /v1/openapi.json
# answers it (made from the route table by the berthd just built), in
# share/berth/openapi.json.
nodist_pkgdata_DATA = proxy/openapi.json
proxy/openapi.json: proxy/berthd$(EXEEXT)
	$(AM_V_GEN)proxy/berthd$(EXEEXT) -O >$@.tmp && mv $@.tmp $@
CLEANFILES += proxy/openapi.json
