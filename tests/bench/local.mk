# tests/bench: fragment of the top Makefile.am. `make bench` runs the
# proxy benchmark (berthd vs nginx vs HAProxy); not part of `make check`.
EXTRA_DIST += tests/bench/proxy
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
