# netctl: fragment of the top Makefile.am
