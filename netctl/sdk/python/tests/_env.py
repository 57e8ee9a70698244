# SPDX-License-Identifier: GPL-2.0-or-later
"""What tests/integ/sdk-python.sh exports for the suite, and helpers.

BERTH_TEST_SOCKET   berthd's control socket (no value: the API tests skip)
BERTH_TEST_URL      its TLS control listener, https://api.DOMAIN:PORT
BERTH_TEST_CACERT   the dev CA ($STATE/tls/ca.pem)
BERTH_TEST_ADMIN    an admin token
BERTH_TEST_APP_PORT the testapp's port on 127.0.0.1 (an upstream)
BERTH_TEST_VM       1: berthd runs microVMs (the guest tests run)
BERTH_TEST_VM_SKIP  why the guest tests do not run
"""
import os
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))    # the package, uninstalled

import berth  # noqa: E402
from berth.client import _TLSConnection  # noqa: E402

SOCKET = os.environ.get("BERTH_TEST_SOCKET", "")
URL = os.environ.get("BERTH_TEST_URL", "")
CACERT = os.environ.get("BERTH_TEST_CACERT", "")
ADMIN = os.environ.get("BERTH_TEST_ADMIN", "")
APP_PORT = int(os.environ.get("BERTH_TEST_APP_PORT") or 0)
VM = os.environ.get("BERTH_TEST_VM") == "1"
VM_SKIP = os.environ.get("BERTH_TEST_VM_SKIP") or \
    "no berthd with microVMs (run by tests/integ/sdk-python.sh)"


def note(text):
    """A figure for the TAP output (sdk-python.sh prints NOTE: lines of
    the suite's stderr as diagnostics)."""
    sys.stderr.write("NOTE: %s\n" % text)
    sys.stderr.flush()


def fetch(url, path="/", timeout=20.0):
    """GET url+path through berthd's TLS listener, trusting the dev CA;
    (status, body)."""
    import ssl
    u = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=CACERT)
    c = _TLSConnection(u.hostname, u.port or 443, ctx, timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_for(what, fn, timeout=30.0, every=0.1):
    """fn() until it is true (its value), or AssertionError naming what."""
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 (said when it times out)
            last = e
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for %s (last: %r)" %
                                 (what, last))
        time.sleep(every)


def fetch_status(url, path="/"):
    """The status of url+path, routed (not 404 nor unreachable)."""
    st, body = fetch(url, path)
    return (st, body) if st != 404 else None
