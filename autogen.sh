#!/bin/sh
# Regenerate the build system (configure, Makefile.in); generated files are not committed.
set -e
cd "$(dirname "$0")"
autoreconf -fi
