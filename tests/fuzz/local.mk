# tests/fuzz: libFuzzer targets. `make check` replays their corpora with
# the ordinary compiler; `make fuzz [FUZZ_SECONDS=600]` runs each target
# under clang's libFuzzer (with ASan and UBSan), adding what it finds to
# a scratch corpus in the build tree.
FUZZ_TARGETS = fuzz_http1 fuzz_host
check_PROGRAMS += tests/fuzz/replay_http1 tests/fuzz/replay_host
check_SCRIPTS += tests/fuzz/replay_http1.sh tests/fuzz/replay_host.sh
TESTS += tests/fuzz/replay_http1.sh tests/fuzz/replay_host.sh
CLEANFILES += tests/fuzz/replay_http1.sh tests/fuzz/replay_host.sh
EXTRA_DIST += tests/fuzz/corpus
tests_fuzz_replay_http1_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_http1.c proxy/http1.c
tests_fuzz_replay_http1_LDADD = $(HTTP_PARSER_LIBS)
tests_fuzz_replay_host_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_host.c proxy/route.c proxy/valid.c
tests_fuzz_replay_host_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
tests_fuzz_replay_host_LDADD = $(JANSSON_LIBS) $(OPENSSL_LIBS)

tests/fuzz/replay_http1.sh: Makefile
	@mkdir -p tests/fuzz
	@printf '#!/bin/sh\nexec "%s/tests/fuzz/replay_http1" tests/fuzz/corpus/http1 tests/smuggling\n' '$(abs_top_builddir)' > $@
tests/fuzz/replay_host.sh: Makefile
	@mkdir -p tests/fuzz
	@printf '#!/bin/sh\nexec "%s/tests/fuzz/replay_host" tests/fuzz/corpus/host\n' '$(abs_top_builddir)' > $@

FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -I$(top_srcdir)/proxy -include $(top_builddir)/config.h
fuzz: all
	@mkdir -p fuzz-out
	$(FUZZ_CC) $(FUZZ_FLAGS) -o fuzz-out/fuzz_http1 $(top_srcdir)/tests/fuzz/fuzz_http1.c $(top_srcdir)/proxy/http1.c $(HTTP_PARSER_LIBS)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(JANSSON_CFLAGS) -o fuzz-out/fuzz_host $(top_srcdir)/tests/fuzz/fuzz_host.c $(top_srcdir)/proxy/route.c $(top_srcdir)/proxy/valid.c $(JANSSON_LIBS) $(OPENSSL_LIBS)
	@for t in $(FUZZ_TARGETS); do \
	  c=$${t#fuzz_}; mkdir -p fuzz-out/corpus-$$c; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  fuzz-out/$$t -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=fuzz-out/$$t- \
	    fuzz-out/corpus-$$c $(top_srcdir)/tests/fuzz/corpus/$$c 2>&1 | tail -n 3 || exit 1; \
	done
.PHONY: fuzz
