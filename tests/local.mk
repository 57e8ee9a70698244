# tests: unit tests (TAP, no root) and the integration runner
EXTRA_DIST += tests/run-integ
