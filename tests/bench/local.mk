# tests/bench: fragment of the top Makefile.am. `make bench` runs the
# proxy benchmark (berthd vs nginx vs HAProxy); not part of `make check`.
EXTRA_DIST += tests/bench/proxy
.PHONY: bench
bench: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
		$(abs_top_srcdir)/tests/bench/proxy $(BENCH_ARGS)
