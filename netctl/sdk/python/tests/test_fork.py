# SPDX-License-Identifier: GPL-2.0-or-later
"""Forks and checkpoints through the SDK on ONE real Debian sandbox made
from its template's ready snapshot: tests/integ/sdk-fork.sh makes it
(the minimal template cannot fork) and names it in
BERTH_TEST_FORK_SANDBOX, with its own token in BERTH_TEST_FORK_TOKEN.
Elsewhere (sdk-python.sh) the module skips, saying why. The tests run
in their names' order; each removes what it made."""
import os
import unittest

from _env import CACERT, SOCKET, URL, berth

SBID = os.environ.get("BERTH_TEST_FORK_SANDBOX", "")
TOKEN = os.environ.get("BERTH_TEST_FORK_TOKEN", "")
SKIP = os.environ.get("BERTH_TEST_FORK_SKIP") or \
    "no sandbox of a template with a ready snapshot (BERTH_TEST_FORK_" \
    "SANDBOX: tests/integ/sdk-fork.sh runs these on a Debian one)"
SB = None


def setUpModule():
    global SB
    if not SOCKET or not SBID:
        raise unittest.SkipTest(SKIP)
    SB = berth.Sandbox.get(SBID, berth.Client(socket=SOCKET))


def tearDownModule():
    if SB is not None:
        SB.client.close()


def gone(test, c, id):
    """id is no sandbox of berthd's (NotFound with the API's code)."""
    with test.assertRaises(berth.NotFound) as cm:
        berth.Sandbox.get(id, c)
    test.assertEqual(cm.exception.code, "not_found")


def drop(*ids):
    """Removes those sandboxes, if there (a test's clean-up)."""
    for id in ids:
        try:
            berth.Sandbox(id, SB.client).remove()
        except berth.NotFound:
            pass


def absent(sb, path):
    """The guest's answer to cat path: its text, or "none"."""
    return sb.exec("cat %s 2>/dev/null || echo none" % path).text.strip()


class Fork(unittest.TestCase):
    def test_1_fork(self):
        """fork: the fork has the file, runs its own exec, writes apart"""
        self.assertEqual(SB.info()["state"], "running")
        SB.files.write("/root/py-fork", b"from the parent\n")
        SB.run("sync")
        forks = SB.fork("py-f1")
        self.assertEqual([f.id for f in forks], ["py-f1"])
        f = forks[0]
        try:
            self.assertTrue(f.token and f.token.startswith("berth_"),
                            f.token)
            self.assertEqual(f.state, "running")
            self.assertEqual(f.info()["template"], SB.info()["template"])
            # its exec works, and it is itself
            self.assertEqual(f.exec("hostname").text, "py-f1\n")
            self.assertEqual(f.files.read("/root/py-fork"),
                             b"from the parent\n")
            # its writes do not reach the parent, nor the parent's it
            f.run("echo fork-only >/root/py-fork-only; sync")
            SB.run("echo parent-only >/root/py-parent-only; sync")
            with self.assertRaises(berth.NotFound):
                SB.files.read("/root/py-fork-only")
            self.assertEqual(absent(f, "/root/py-parent-only"), "none")
            self.assertEqual(f.files.read("/root/py-fork-only"),
                             b"fork-only\n")
            # the fork's own token over TLS: its sandbox, not its parent
            tc = berth.Client(url=URL, token=f.token, cacert=CACERT)
            try:
                mine = berth.Sandbox.get("py-f1", tc)
                self.assertEqual(mine.exec(["cat", "/root/py-fork"]).text,
                                 "from the parent\n")
                with self.assertRaises(berth.Forbidden) as cm:
                    berth.Sandbox(SBID, tc).fork("py-f9")
                self.assertEqual(cm.exception.status, 403)
            finally:
                tc.close()
            gone(self, SB.client, "py-f9")
        finally:
            f.remove()
        gone(self, SB.client, "py-f1")
        self.assertEqual(SB.files.read("/root/py-fork"),
                         b"from the parent\n")

    def test_2_fork_own_token(self):
        """the sandbox's own token forks it: two in one call, tokens"""
        if not TOKEN:
            self.skipTest("no token of the sandbox (BERTH_TEST_FORK_TOKEN)")
        tc = berth.Client(url=URL, token=TOKEN, cacert=CACERT)
        try:
            forks = berth.Sandbox(SBID, tc).fork(["py-f2", "py-f3"])
            self.assertEqual([f.id for f in forks], ["py-f2", "py-f3"])
            self.assertEqual(len({f.token for f in forks}), 2)
            for f in forks:
                # the sandbox's token may not see its forks: each
                # handle talks with the fork's own token, which works
                self.assertEqual(f.client.token, f.token)
                self.assertEqual(f.state, "running")
                self.assertEqual(f.exec("hostname").text, f.id + "\n")
                with self.assertRaises(berth.Forbidden):
                    berth.Sandbox(f.id, tc).info()
        finally:
            tc.close()
            drop("py-f2", "py-f3")

    def test_3_checkpoint(self):
        """checkpoint taken, listed; restored in place; a fork of it"""
        SB.run("echo one >/root/py-ck; sync")
        ck = SB.checkpoint("py-k1")
        self.assertEqual((ck["sandbox"], ck["name"]), (SBID, "py-k1"))
        self.assertGreater(ck["size_bytes"], 4096)
        self.assertGreater(ck["created"], 0)
        listed = {k["name"]: k for k in SB.checkpoints()}
        self.assertIn("py-k1", listed)
        self.assertEqual(listed["py-k1"]["size_bytes"], ck["size_bytes"])
        self.assertEqual(SB.info()["state"], "running")
        try:
            SB.run("echo two >/root/py-ck; echo later >/root/py-later; "
                   "sync")
            info = SB.restore("py-k1")
            self.assertEqual((info["id"], info["state"]), (SBID, "running"))
            self.assertEqual(SB.state, "running")
            self.assertEqual(SB.files.read("/root/py-ck"), b"one\n")
            self.assertEqual(absent(SB, "/root/py-later"), "none")
            self.assertEqual(SB.exec("hostname").text, SBID + "\n")
            # a new sandbox from the checkpoint (create --from)
            k = SB.fork("py-kf", checkpoint="py-k1")[0]
            try:
                self.assertTrue(k.token)
                self.assertEqual(k.exec("hostname; cat /root/py-ck").text,
                                 "py-kf\none\n")
            finally:
                k.remove()
        finally:
            SB.remove_checkpoint("py-k1")
        self.assertNotIn("py-k1", [k["name"] for k in SB.checkpoints()])

    def test_4_errors(self):
        """errors: typed, with the API's code and field; nothing stored"""
        c = SB.client
        with self.assertRaises(berth.NotFound) as cm:
            berth.Sandbox("py-no-such", c).fork("py-x1")
        self.assertEqual((cm.exception.status, cm.exception.code),
                         (404, "not_found"))
        self.assertIn("py-no-such", cm.exception.message)
        gone(self, c, "py-x1")
        with self.assertRaises(berth.BadRequest) as cm:
            SB.fork([])
        self.assertEqual((cm.exception.code, cm.exception.field),
                         ("invalid_argument", "ids"))
        with self.assertRaises(berth.Conflict) as cm:
            SB.fork(SBID)          # an id that exists
        self.assertEqual((cm.exception.code, cm.exception.field),
                         ("conflict", "ids"))
        with self.assertRaises(berth.BadRequest) as cm:
            SB.fork("Bad_Id")
        self.assertEqual(cm.exception.field, "ids")
        with self.assertRaises(berth.NotFound) as cm:
            SB.fork("py-x2", checkpoint="nope")
        self.assertEqual((cm.exception.code, cm.exception.field),
                         ("not_found", "checkpoint"))
        gone(self, c, "py-x2")
        # checkpoints
        with self.assertRaises(berth.BadRequest) as cm:
            SB.checkpoint("Bad_Name")
        self.assertEqual((cm.exception.code, cm.exception.field),
                         ("invalid_argument", "name"))
        with self.assertRaises(berth.NotFound) as cm:
            SB.restore("nope")
        self.assertEqual((cm.exception.code, cm.exception.field),
                         ("not_found", "checkpoint"))
        with self.assertRaises(berth.NotFound) as cm:
            SB.remove_checkpoint("nope")
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(berth.NotFound):
            berth.Sandbox("py-no-such", c).checkpoints()
        SB.checkpoint("py-k2")
        try:
            with self.assertRaises(berth.Conflict) as cm:
                SB.checkpoint("py-k2")
            self.assertEqual((cm.exception.code, cm.exception.field),
                             ("conflict", "name"))
        finally:
            SB.remove_checkpoint("py-k2")
        # an external sandbox has no VM to fork or checkpoint
        with berth.Sandbox.create(c, id="py-ext",
                                  address="127.0.0.1") as ext:
            with self.assertRaises(berth.Conflict) as cm:
                ext.fork("py-x3")
            self.assertEqual(cm.exception.code, "conflict")
            self.assertIn("not a microVM", cm.exception.message)
            with self.assertRaises(berth.Conflict):
                ext.checkpoint("k")
        gone(self, c, "py-x3")
        self.assertEqual(SB.exec("hostname").text, SBID + "\n")


if __name__ == "__main__":
    unittest.main()
