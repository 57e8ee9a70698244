# tests/fuzz: libFuzzer targets, one per parser that takes untrusted
# bytes, each with a seed corpus in tests/fuzz/corpus/<name>/.
#
# `make check` replays every corpus (and tests/smuggling) through
# replay.c, built with ASan+UBSan (-fno-sanitize-recover=all, leak
# checking on) whenever the compiler supports it, --enable-asan or not;
# any sanitizer report fails the test. tests/fuzz/sanitizers.sh proves
# that on planted bugs.
#
# The fuzzers themselves need clang: `./configure --enable-fuzzer
# CC=clang` builds them in tests/fuzz/ with the rest, and `make fuzz
# FUZZ_SECONDS=N` (from any build; FUZZ_CC=clang compiles them when the
# build's compiler is not clang) runs EACH target for N seconds, one at a
# time, in one process (one core), with new inputs in fuzz-out/corpus-<name>
# and crashes as fuzz-out/fuzz_<name>-crash-*; a target that fails does
# not stop the others, but fails `make fuzz` at the end.
# SPDX-License-Identifier: GPL-2.0-or-later

FUZZ_NAMES = http1 host response conf control dns rule h2 agent move

# What each target compiles (the code under test is compiled into the
# target, so libFuzzer sees its coverage) and links.
fuzz_http1_SRC = tests/fuzz/fuzz_http1.c proxy/edge/http1.c
fuzz_http1_LIBS = $(HTTP_PARSER_LIBS)
fuzz_host_SRC = tests/fuzz/fuzz_host.c proxy/edge/route.c vmm/proto/valid.c
fuzz_host_LIBS = $(JANSSON_LIBS) $(OPENSSL_LIBS)
fuzz_response_SRC = tests/fuzz/fuzz_response.c proxy/edge/http1.c
fuzz_response_LIBS = $(HTTP_PARSER_LIBS)
fuzz_conf_SRC = tests/fuzz/fuzz_conf.c proxy/conf.c vmm/proto/valid.c
fuzz_conf_LIBS =
# fuzz_control.c: the control API server (proxy/api/, its insides through api.h)
fuzz_control_SRC = tests/fuzz/fuzz_control.c $(PX_API) proxy/api/reqhead.c proxy/edge/http1.c vmm/proto/status.c proxy/sandbox/store.c proxy/api/control_rule.c \
	proxy/api/token.c vmm/proto/valid.c proxy/edge/route.c netctl/nc_rule.c
fuzz_control_LIBS = $(LIBEVENT_LIBS) $(JANSSON_LIBS) $(SQLITE_LIBS) \
	$(HTTP_PARSER_LIBS) $(OPENSSL_LIBS)
fuzz_dns_SRC = tests/fuzz/fuzz_dns.c netctl/nc_dns.c netctl/nc_rule.c
fuzz_dns_LIBS = $(NC_LIBS) $(LIBEVENT_LIBS)
fuzz_rule_SRC = tests/fuzz/fuzz_rule.c netctl/nc_rule.c proxy/api/control_rule.c
fuzz_rule_LIBS =
# fuzz_agent.c #includes proxy/privsep/agentd.c
fuzz_agent_SRC = tests/fuzz/fuzz_agent.c proxy/privsep/chan.c proxy/log.c
fuzz_agent_LIBS = $(LIBEVENT_LIBS)
# fuzz_h2: h2.c with the real session layer behind it
fuzz_h2_SRC = tests/fuzz/fuzz_h2.c proxy/edge/session.c proxy/edge/h2.c proxy/edge/upstream.c \
	proxy/edge/wake.c proxy/edge/respond.c proxy/edge/tls.c proxy/fleet/fleet_tls.c proxy/edge/route.c \
	proxy/edge/http1.c vmm/proto/valid.c proxy/log.c proxy/edge/evprio.c vmm/proto/status.c \
	tests/support/scripted_upstream.c
fuzz_h2_LIBS = $(LIBEVENT_LIBS) $(OPENSSL_LIBS) $(JANSSON_LIBS) $(NGHTTP2_LIBS) \
	$(HTTP_PARSER_LIBS)
# fuzz_move: a moved sandbox's manifest (vmm/export.c), a fleet peer's;
# the rest of libvmm as built (its export.o is not pulled in again)
fuzz_move_SRC = tests/fuzz/fuzz_move.c vmm/export.c
fuzz_move_LIBS = $(VMM_LIBS)
FUZZ_DEP_CF = $(JANSSON_CFLAGS) $(LIBEVENT_CFLAGS) $(SQLITE_CFLAGS) \
	$(OPENSSL_CFLAGS) $(NGHTTP2_CFLAGS)

# ---- corpus replays, under ASan+UBSan ----
FUZZ_REPLAY_CF = $(AM_CFLAGS) $(FUZZ_DEP_CF) $(REPLAY_SAN_CFLAGS)
FUZZ_REPLAY_LF = $(AM_LDFLAGS) $(REPLAY_SAN_LDFLAGS)
FUZZ_REPLAY_SH = tests/fuzz/replay_http1.sh tests/fuzz/replay_host.sh \
	tests/fuzz/replay_response.sh tests/fuzz/replay_conf.sh \
	tests/fuzz/replay_control.sh tests/fuzz/replay_dns.sh \
	tests/fuzz/replay_rule.sh tests/fuzz/replay_h2.sh tests/fuzz/replay_agent.sh \
	tests/fuzz/replay_move.sh
check_PROGRAMS += tests/fuzz/replay_http1 tests/fuzz/replay_host \
	tests/fuzz/replay_response tests/fuzz/replay_conf \
	tests/fuzz/replay_control tests/fuzz/replay_dns tests/fuzz/replay_rule \
	tests/fuzz/replay_h2 tests/fuzz/replay_agent tests/fuzz/replay_move \
	tests/fuzz/replay_sancheck
check_SCRIPTS += $(FUZZ_REPLAY_SH)
TESTS += $(FUZZ_REPLAY_SH) tests/fuzz/sanitizers.sh
CLEANFILES += $(FUZZ_REPLAY_SH)
EXTRA_DIST += tests/fuzz/corpus tests/fuzz/sanitizers.sh tests/fuzz/h2seeds.py

tests_fuzz_replay_http1_SOURCES = tests/fuzz/replay.c $(fuzz_http1_SRC)
tests_fuzz_replay_http1_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_http1_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_http1_LDADD = $(fuzz_http1_LIBS)
tests_fuzz_replay_host_SOURCES = tests/fuzz/replay.c $(fuzz_host_SRC)
tests_fuzz_replay_host_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_host_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_host_LDADD = $(fuzz_host_LIBS)
tests_fuzz_replay_response_SOURCES = tests/fuzz/replay.c $(fuzz_response_SRC)
tests_fuzz_replay_response_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_response_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_response_LDADD = $(fuzz_response_LIBS)
tests_fuzz_replay_conf_SOURCES = tests/fuzz/replay.c $(fuzz_conf_SRC)
tests_fuzz_replay_conf_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_conf_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_conf_LDADD = $(fuzz_conf_LIBS)
tests_fuzz_replay_control_SOURCES = tests/fuzz/replay.c $(fuzz_control_SRC)
tests_fuzz_replay_control_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_control_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_control_LDADD = $(fuzz_control_LIBS)
tests_fuzz_replay_dns_SOURCES = tests/fuzz/replay.c $(fuzz_dns_SRC)
tests_fuzz_replay_dns_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_dns_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_dns_LDADD = $(fuzz_dns_LIBS)
tests_fuzz_replay_rule_SOURCES = tests/fuzz/replay.c $(fuzz_rule_SRC)
tests_fuzz_replay_rule_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_rule_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_rule_LDADD = $(fuzz_rule_LIBS)
tests_fuzz_replay_h2_SOURCES = tests/fuzz/replay.c $(fuzz_h2_SRC)
tests_fuzz_replay_h2_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_h2_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_h2_LDADD = $(fuzz_h2_LIBS)
tests_fuzz_replay_agent_SOURCES = tests/fuzz/replay.c $(fuzz_agent_SRC)
tests_fuzz_replay_agent_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_agent_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_agent_LDADD = $(fuzz_agent_LIBS)
tests_fuzz_replay_move_SOURCES = tests/fuzz/replay.c $(fuzz_move_SRC)
tests_fuzz_replay_move_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_move_LDFLAGS = $(FUZZ_REPLAY_LF)
tests_fuzz_replay_move_LDADD = $(fuzz_move_LIBS)
# planted bugs for tests/fuzz/sanitizers.sh
tests_fuzz_replay_sancheck_SOURCES = tests/fuzz/replay.c tests/fuzz/sancheck.c
tests_fuzz_replay_sancheck_CFLAGS = $(FUZZ_REPLAY_CF)
tests_fuzz_replay_sancheck_LDFLAGS = $(FUZZ_REPLAY_LF)

# tests/fuzz/replay_<name>.sh: the corpus of <name> (and the smuggling
# requests for http1), with sanitizer settings that make any report fatal.
$(FUZZ_REPLAY_SH): Makefile
	@mkdir -p tests/fuzz
	@n=`basename $@ .sh`; n=$${n#replay_}; more=; \
	if test "$$n" = http1; then more=' tests/smuggling'; fi; \
	{ echo '#!/bin/sh'; \
	  echo "# generated by make: replays tests/fuzz/corpus/$$n under ASan+UBSan"; \
	  echo 'ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:$${ASAN_OPTIONS-}"'; \
	  echo 'UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:$${UBSAN_OPTIONS-}"'; \
	  echo 'export ASAN_OPTIONS UBSAN_OPTIONS'; \
	  echo "exec \"$(abs_top_builddir)/tests/fuzz/replay_$$n\" tests/fuzz/corpus/$$n$$more"; \
	} > $@

# ---- the fuzzers (clang) ----
FUZZER_FLAGS = -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
	-Wno-unknown-warning-option
FUZZ_PROGS = tests/fuzz/fuzz_http1 tests/fuzz/fuzz_host tests/fuzz/fuzz_response \
	tests/fuzz/fuzz_conf tests/fuzz/fuzz_control tests/fuzz/fuzz_dns \
	tests/fuzz/fuzz_rule tests/fuzz/fuzz_h2 tests/fuzz/fuzz_agent \
	tests/fuzz/fuzz_move
EXTRA_PROGRAMS = $(FUZZ_PROGS)
CLEANFILES += $(FUZZ_PROGS)
FUZZ_CF = $(AM_CFLAGS) $(FUZZ_DEP_CF) $(FUZZER_FLAGS)
tests_fuzz_fuzz_http1_SOURCES = $(fuzz_http1_SRC)
tests_fuzz_fuzz_http1_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_http1_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_http1_LDADD = $(fuzz_http1_LIBS)
tests_fuzz_fuzz_host_SOURCES = $(fuzz_host_SRC)
tests_fuzz_fuzz_host_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_host_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_host_LDADD = $(fuzz_host_LIBS)
tests_fuzz_fuzz_response_SOURCES = $(fuzz_response_SRC)
tests_fuzz_fuzz_response_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_response_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_response_LDADD = $(fuzz_response_LIBS)
tests_fuzz_fuzz_conf_SOURCES = $(fuzz_conf_SRC)
tests_fuzz_fuzz_conf_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_conf_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_conf_LDADD = $(fuzz_conf_LIBS)
tests_fuzz_fuzz_control_SOURCES = $(fuzz_control_SRC)
tests_fuzz_fuzz_control_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_control_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_control_LDADD = $(fuzz_control_LIBS)
tests_fuzz_fuzz_dns_SOURCES = $(fuzz_dns_SRC)
tests_fuzz_fuzz_dns_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_dns_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_dns_LDADD = $(fuzz_dns_LIBS)
tests_fuzz_fuzz_rule_SOURCES = $(fuzz_rule_SRC)
tests_fuzz_fuzz_rule_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_rule_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_rule_LDADD = $(fuzz_rule_LIBS)
tests_fuzz_fuzz_h2_SOURCES = $(fuzz_h2_SRC)
tests_fuzz_fuzz_h2_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_h2_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_h2_LDADD = $(fuzz_h2_LIBS)
tests_fuzz_fuzz_agent_SOURCES = $(fuzz_agent_SRC)
tests_fuzz_fuzz_agent_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_agent_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_agent_LDADD = $(fuzz_agent_LIBS)
tests_fuzz_fuzz_move_SOURCES = $(fuzz_move_SRC)
tests_fuzz_fuzz_move_CFLAGS = $(FUZZ_CF)
tests_fuzz_fuzz_move_LDFLAGS = $(FUZZER_FLAGS)
tests_fuzz_fuzz_move_LDADD = $(fuzz_move_LIBS)

if ENABLE_FUZZER
noinst_PROGRAMS += $(FUZZ_PROGS)
FUZZ_BUILD_CC =
else
# a gcc build: compile the targets (only they) with clang
FUZZ_BUILD_CC = CC='$(FUZZ_CC)'
endif

FUZZ_SECONDS = 60
FUZZ_CC = clang
fuzz: all
	$(MAKE) $(AM_MAKEFLAGS) $(FUZZ_BUILD_CC) $(FUZZ_PROGS)
	@mkdir -p fuzz-out
	@failed=; for n in $(FUZZ_NAMES); do \
	  mkdir -p fuzz-out/corpus-$$n; \
	  echo "fuzzing fuzz_$$n for $(FUZZ_SECONDS) s (log: fuzz-out/fuzz_$$n.log)"; \
	  if tests/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	      -artifact_prefix=fuzz-out/fuzz_$$n- fuzz-out/corpus-$$n \
	      $(top_srcdir)/tests/fuzz/corpus/$$n > fuzz-out/fuzz_$$n.log 2>&1; then \
	    grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' fuzz-out/fuzz_$$n.log | tail -n 1; \
	    grep '^stat::' fuzz-out/fuzz_$$n.log; \
	  else \
	    tail -n 60 fuzz-out/fuzz_$$n.log; \
	    echo "fuzz_$$n FAILED: see fuzz-out/fuzz_$$n.log and fuzz-out/fuzz_$$n-*"; \
	    failed="$$failed fuzz_$$n"; \
	  fi; \
	done; \
	if test -n "$$failed"; then echo "failed:$$failed"; exit 1; fi

clean-local: clean-fuzz
clean-fuzz:
	rm -rf fuzz-out

.PHONY: fuzz clean-fuzz
