# tests/bench: fragment of the top Makefile.am
