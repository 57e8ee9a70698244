# proxy: berthd, the parent and its proxy workers
sbin_PROGRAMS += proxy/berthd
PX_CORE = proxy/valid.c proxy/valid.h proxy/http1.c proxy/http1.h \
	proxy/route.c proxy/route.h proxy/routemsg.h proxy/conf.c proxy/conf.h \
	proxy/log.c proxy/log.h
proxy_berthd_SOURCES = proxy/berthd.c $(PX_CORE) \
	proxy/tls.c proxy/tls.h proxy/ipc.c proxy/ipc.h \
	proxy/worker.c proxy/worker.h proxy/session.c proxy/session.h \
	proxy/h2.c proxy/h2.h proxy/upstream.c proxy/respond.c proxy/wake.c proxy/wake.h proxy/vm.c proxy/vm.h proxy/exec.c proxy/exec.h proxy/egress.c proxy/egress.h \
	proxy/path.c proxy/path.h proxy/evprio.c proxy/evprio.h proxy/bufpool.c proxy/bufpool.h \
	proxy/fleet.c proxy/fleet.h proxy/fleet_tls.c proxy/fleet_tls.h \
	proxy/proc.c proxy/proc.h proxy/chan.c proxy/helper.h proxy/nflogd.c proxy/dnsd.c proxy/controld.c \
	proxy/agentd.c
# Installed helpers (berth-mkcert in pkgdatadir; mktemplate, init and
# testapp in pkglibexecdir) and, for a berthd run from this build tree,
# the source and build trees (see proxy/vm.c: find_helper).
proxy_berthd_CPPFLAGS = $(AM_CPPFLAGS) -DPKGDATADIR='"$(pkgdatadir)"' \
	-DPKGLIBEXECDIR='"$(pkglibexecdir)"' \
	-DSRCDIR='"$(abs_top_srcdir)"' -DBUILDDIR='"$(abs_top_builddir)"'
proxy_berthd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS) $(NGHTTP2_CFLAGS) $(JANSSON_CFLAGS) $(SQLITE_CFLAGS)
proxy_berthd_LDADD = proxy/libpxcontrol.a vmm/libvmm.a netctl/libnetctl.a $(LIBMNL_LIBS) $(LIBNFTNL_LIBS) $(LIBEVENT_LIBS) $(OPENSSL_LIBS) $(NGHTTP2_LIBS) $(JANSSON_LIBS) $(SQLITE_LIBS) $(HTTP_PARSER_LIBS)

check_PROGRAMS += tests/unit/test_evprio
TESTS += tests/unit/test_evprio
tests_unit_test_evprio_SOURCES = tests/unit/test_evprio.c tests/unit/tap.h \
	proxy/evprio.c proxy/evprio.h
tests_unit_test_evprio_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_evprio_LDADD = $(LIBEVENT_LIBS)

check_PROGRAMS += tests/unit/test_chan
TESTS += tests/unit/test_chan
tests_unit_test_chan_SOURCES = tests/unit/test_chan.c tests/unit/tap.h \
	proxy/chan.c proxy/proc.h
tests_unit_test_chan_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_chan_LDADD = $(LIBEVENT_LIBS)

check_PROGRAMS += tests/unit/test_agentd
TESTS += tests/unit/test_agentd
tests_unit_test_agentd_SOURCES = tests/unit/test_agentd.c tests/unit/tap.h \
	proxy/agentd.c proxy/chan.c proxy/proc.h proxy/helper.h proxy/log.c \
	proxy/log.h vmm/guest/agent_proto.h
tests_unit_test_agentd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
tests_unit_test_agentd_LDADD = $(LIBEVENT_LIBS)

check_PROGRAMS += tests/unit/test_bufpool
TESTS += tests/unit/test_bufpool
tests_unit_test_bufpool_SOURCES = tests/unit/test_bufpool.c tests/unit/tap.h \
	proxy/bufpool.c proxy/bufpool.h
tests_unit_test_bufpool_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS)
tests_unit_test_bufpool_LDADD = $(LIBEVENT_LIBS) $(OPENSSL_LIBS)

# The session layer over the stand-in transport (a socketpair) with a
# scripted upstream on loopback: no worker, no parent.
check_PROGRAMS += tests/unit/test_session
TESTS += tests/unit/test_session
tests_unit_test_session_SOURCES = tests/unit/test_session.c tests/unit/tap.h \
	proxy/session.c proxy/session.h proxy/h2.c proxy/h2.h proxy/upstream.c \
	proxy/wake.c proxy/wake.h proxy/respond.c proxy/tls.c proxy/tls.h proxy/fleet_tls.c proxy/fleet_tls.h \
	proxy/route.c proxy/route.h proxy/routemsg.h proxy/http1.c proxy/http1.h \
	proxy/valid.c proxy/valid.h proxy/log.c proxy/log.h proxy/evprio.c proxy/evprio.h \
	proxy/status.c proxy/status.h \
	tests/support/scripted_upstream.c tests/support/scripted_upstream.h
tests_unit_test_session_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS) $(JANSSON_CFLAGS) $(NGHTTP2_CFLAGS)
tests_unit_test_session_LDADD = $(LIBEVENT_LIBS) $(OPENSSL_LIBS) $(JANSSON_LIBS) $(NGHTTP2_LIBS) $(HTTP_PARSER_LIBS)
