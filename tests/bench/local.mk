# tests/bench: fragment of the top Makefile.am. `make bench` runs the
# proxy benchmark (berthd vs nginx vs HAProxy); not part of `make check`.
# tests/bench/bare: the bare libevent + OpenSSL responder it measures beside
# them (the ceiling of berthd's own stack).
EXTRA_DIST += tests/bench/proxy tests/bench/README
noinst_PROGRAMS += tests/bench/bare
tests_bench_bare_SOURCES = tests/bench/bare.c
tests_bench_bare_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(OPENSSL_CFLAGS)
tests_bench_bare_LDADD = $(LIBEVENT_LIBS) $(OPENSSL_LIBS)
.PHONY: bench
bench: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/proxy $(BENCH_ARGS)

# `make bench-wake`: time to first byte of requests that wake a paused or
# suspended sandbox (one real microVM, TCG) beside raw cont and restore.
# Needs root and qemu; not part of `make check`.
EXTRA_DIST += tests/bench/wake
.PHONY: bench-wake
bench-wake: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/wake $(BENCH_ARGS)

# `make bench-exec`: `exec -- true` round trips (API, streamed, netctl)
# beside the raw guest channel (the agent's ping and exec on its socket),
# and exec on a paused or suspended sandbox beside the wake alone; one
# real microVM (TCG). Needs root and qemu; not part of `make check`.
EXTRA_DIST += tests/bench/exec
.PHONY: bench-exec
bench-exec: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/exec $(BENCH_ARGS)

# `make bench-create`: creates from the default template's ready snapshot
# (request to exec-ready, p50/p99 over 20 in a row) beside a cold boot,
# and PSS per idle sandbox, same run (debian, TCG). Needs root and qemu;
# not part of `make check`.
EXTRA_DIST += tests/bench/create
.PHONY: bench-create
bench-create: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/create $(BENCH_ARGS)

# `make bench-density`: what an idle sandbox costs (issue 30): qemu CPU
# of running sandboxes, PSS running / paused / suspended (and the
# standby's), a suspended sandbox's disk by file, each beside the same
# figure with the reclaim measures off (a second berth.conf and a template
# that starts Docker at boot), same run; BENCH_ARGS=--hundred adds the
# 100-sandbox run under vm_max_resident (long). Needs root and qemu; not
# part of `make check`.
EXTRA_DIST += tests/bench/density
.PHONY: bench-density
bench-density: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/density $(BENCH_ARGS)

# `make bench-fork`: forks of a running default (debian) sandbox, one by
# one (the source's pause, each fork's request to exec-ready) and ten in
# one call, a checkpoint and a restore. Needs root and qemu; not part of
# `make check`.
EXTRA_DIST += tests/bench/fork
.PHONY: bench-fork
bench-fork: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/fork $(BENCH_ARGS)

# `make bench-template`: templates from a Dockerfile (issue 31): a FROM
# scratch build of a 10 MB context, its cached rebuild and a rebuild with
# one byte changed, beside the debian template's own build, same run.
# Needs root and qemu; not part of `make check`.
EXTRA_DIST += tests/bench/template
.PHONY: bench-template
bench-template: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/template $(BENCH_ARGS)

# `make bench-nft`: berth's egress table (libnetctl) beside an
# iptables-style nft layout (one chain per sandbox) at 10, 1000 and 10000
# sandboxes: update latency and iperf3 throughput of one guest path. Needs
# root, ip netns, nft, iperf3; not part of `make check`.
noinst_PROGRAMS += tests/bench/nc_bench
tests_bench_nc_bench_SOURCES = tests/bench/nc_bench.c
tests_bench_nc_bench_CFLAGS = $(AM_CFLAGS) $(LIBMNL_CFLAGS) $(LIBNFTNL_CFLAGS)
tests_bench_nc_bench_LDADD = netctl/libnetctl.a $(LIBNFTNL_LIBS) $(LIBMNL_LIBS)
EXTRA_DIST += tests/bench/nft
.PHONY: bench-nft
bench-nft: all tests/bench/nc_bench$(EXEEXT) tests/integ/nc_drive$(EXEEXT)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/nft $(BENCH_ARGS)

# `make bench-vmm`: libvmm's pause/suspend -> running -> serving beside
# raw QMP cont and the raw restore (no standby), one VM, same run.
EXTRA_DIST += tests/bench/vmm
.PHONY: bench-vmm
bench-vmm: all tests/integ/vmm_drive$(EXEEXT)
	top_builddir=$(abs_top_builddir) \
		$(abs_top_srcdir)/tests/bench/vmm $(BENCH_ARGS)

# `make bench-fleet`: fleet mode with three berthds and one etcd on
# loopback: route propagation across hosts (p50/p90/p99) and the latency
# the cross-host mTLS hop adds; then two VM hosts: a suspended default
# sandbox moved between them (issue 33's target; BENCH_ARGS=--no-move
# skips it). Needs root and etcd-server (the move: qemu, /dev/net/tun);
# not part of `make check`.
# tests/bench/place: the placement decision over fleets of 3, 100 and
# 1000 hosts (issue 33's target: <= 5 ms), a row of bench-fleet.
EXTRA_DIST += tests/bench/fleet
noinst_PROGRAMS += tests/bench/place
tests_bench_place_SOURCES = tests/bench/place.c proxy/fleet/fleet_place.c
tests_bench_place_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
tests_bench_place_LDADD = $(JANSSON_LIBS)
.PHONY: bench-fleet
bench-fleet: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/fleet $(BENCH_ARGS)

# `make bench-slowclients`: a normal client's p99 stays within 2x of its
# baseline while slowhttptest attacks (slow headers, body, read; 1000
# connections each). Needs root, slowhttptest; not part of `make check`
# (which runs the same script for memory and availability only).
EXTRA_DIST += tests/bench/slowclients
.PHONY: bench-slowclients
bench-slowclients: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/slowclients

# `make bench-pageload`: a page of 200 small ES modules (nginx upstream)
# through berthd over HTTP/2 (1 connection) against HTTP/1.1 (6
# connections): h2load with the same requests, and headless Chromium
# when installed (page over h2 against --disable-http2); medians of
# alternated rounds and their ratio. Needs root, nginx, h2load; not part
# of `make check`.
EXTRA_DIST += tests/bench/pageload
.PHONY: bench-pageload
bench-pageload: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/pageload $(BENCH_ARGS)

# `make bench-timing`: the answer times integration tests only print
# (netctl status during an egress flood, a keep-alive client during a
# handshake flood, fleet route propagation), each beside its baseline,
# judged against its target. Needs root; not part of `make check`.
EXTRA_DIST += tests/bench/timing
.PHONY: bench-timing
bench-timing: all tests/integ/nc_drive$(EXEEXT)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/timing $(BENCH_ARGS)
