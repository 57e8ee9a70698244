#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""tests/tap.py — runs the SDK's unittest suite (discovered in this
directory, as ``python3 -m unittest discover -s`` does) and writes one
line per test to RESULTS: ``ok NAME``, ``not ok NAME`` or ``skip NAME #
REASON``; failures' tracebacks go to stderr. tests/integ/sdk-python.sh
turns the lines into TAP. Exit status: 0 when nothing failed.

Usage: tap.py RESULTS [PATTERN]
"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class LineResult(unittest.TestResult):
    """Each test's outcome as one line, written as it ends."""

    def __init__(self, out):
        super().__init__()
        self.out = out
        self.t0 = 0.0

    def _name(self, test):
        doc = test.shortDescription()
        name = test.id().split(".", 1)[-1]
        return "%s: %s" % (name, doc) if doc else name

    def _line(self, text):
        self.out.write(text.replace("\n", " ") + "\n")
        self.out.flush()

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line("ok %s (%.1f s)" % (self._name(test),
                                       time.monotonic() - self.t0))

    def _bad(self, test, err, what):
        self._line("not ok %s" % self._name(test))
        sys.stderr.write("%s %s:\n%s\n" % (what, test.id(),
                                          self._exc_info_to_string(err,
                                                                   test)))
        sys.stderr.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad(test, err, "FAIL")

    def addError(self, test, err):
        super().addError(test, err)
        # a setUpClass/setUpModule error has no test of its own
        self._bad(test, err, "ERROR")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line("skip %s # %s" % (self._name(test), reason))


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: tap.py RESULTS [PATTERN]\n")
        return 2
    pattern = sys.argv[2] if len(sys.argv) > 2 else "test*.py"
    suite = unittest.defaultTestLoader.discover(HERE, pattern=pattern,
                                                top_level_dir=HERE)
    with open(sys.argv[1], "a") as out:
        result = LineResult(out)
        suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
