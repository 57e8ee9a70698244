# tests/integ: fragment of the top Makefile.am
EXTRA_DIST += tests/smuggling
