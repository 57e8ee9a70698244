# tests/integ: fragment of the top Makefile.am
