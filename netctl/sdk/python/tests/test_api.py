# SPDX-License-Identifier: GPL-2.0-or-later
"""The API without a guest: external sandboxes (--address 127.0.0.1,
the testapp as their upstream) on a real berthd, through its unix socket
and its TLS listener with tokens."""
import os
import unittest
from unittest import mock

from _env import (ADMIN, APP_PORT, CACERT, SOCKET, URL, berth, fetch,
                  fetch_status, wait_for)


def setUpModule():
    if not SOCKET:
        raise unittest.SkipTest("no berthd (BERTH_TEST_SOCKET; run by "
                                "tests/integ/sdk-python.sh)")


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = berth.Client(socket=SOCKET)
        cls.a = berth.Sandbox.create(cls.c, id="py-a", address="127.0.0.1")
        cls.b = berth.Sandbox.create(cls.c, id="py-b", address="127.0.0.1")

    @classmethod
    def tearDownClass(cls):
        for sb in (cls.a, cls.b):
            try:
                sb.remove()
            except berth.NotFound:
                pass
        cls.c.close()

    def tls(self, token):
        return berth.Client(url=URL, token=token, cacert=CACERT)

    def test_create_get_list(self):
        """an external sandbox: created with its token, found, listed"""
        self.assertTrue(self.a.token)
        self.assertEqual(self.a.state, "running")
        info = berth.Sandbox.get("py-a", client=self.c).info()
        self.assertEqual((info["id"], info["external"], info["address"]),
                         ("py-a", True, "127.0.0.1"))
        ids = [s.id for s in berth.Sandbox.list(client=self.c)]
        self.assertIn("py-a", ids)
        self.assertIn("py-b", ids)

    def test_context_manager(self):
        """with Sandbox.create(...) as sb: removed at the block's end"""
        with berth.Sandbox.create(self.c, id="py-ctx",
                                  address="127.0.0.1") as sb:
            self.assertEqual(sb.info()["state"], "running")
        with self.assertRaises(berth.NotFound):
            berth.Sandbox.get("py-ctx", client=self.c)

    def test_publish_fetch(self):
        """a published port's URL answers through berthd (dev CA)"""
        p = self.a.ports.publish(APP_PORT)
        self.assertEqual(p["port"], APP_PORT)
        self.assertEqual(p["visibility"], "public")
        self.assertTrue(p["url"].startswith("https://%d-py-a." % APP_PORT),
                        p["url"])
        listed = {q["port"]: q for q in self.a.ports.list()}
        self.assertEqual(listed[APP_PORT]["url"], p["url"])
        st, _ = wait_for("the route to the testapp",
                         lambda: fetch_status(p["url"], "/healthz"))
        self.assertEqual(st, 200)
        # publishing again changes it (200, not 201) and keeps the URL
        q = self.a.ports.publish(APP_PORT, visibility="private")
        self.assertEqual((q["visibility"], q["url"]), ("private", p["url"]))
        self.a.ports.unpublish(APP_PORT)
        with self.assertRaises(berth.NotFound):
            self.a.ports.get(APP_PORT)
        wait_for("the route gone",
                 lambda: fetch(p["url"], "/healthz")[0] == 404)

    def test_bad_port(self):
        """a port that is not one: BadRequest naming the field"""
        with self.assertRaises(berth.BadRequest) as cm:
            self.a.ports.publish(0)
        self.assertEqual(cm.exception.field, "port")
        with self.assertRaises(berth.BadRequest) as cm:
            self.a.ports.publish(APP_PORT, visibility="secret")
        self.assertEqual(cm.exception.field, "visibility")

    def test_egress_shapes(self):
        """egress rules added, shown, removed; the answers' shapes"""
        r = self.a.egress.allow("example.com:443/tcp", ttl="10m")
        self.assertEqual((r["action"], r["rule"]),
                         ("allow", "example.com:443/tcp"))
        self.assertIsInstance(r["expires"], int)
        r = self.a.egress.deny(":25")
        self.assertEqual((r["action"], r["expires"]), ("deny", None))
        self.a.egress.allow("203.0.113.0/24", ttl=90)
        show = self.a.egress.show()
        self.assertEqual(show["sandbox"], "py-a")
        self.assertIn("effective_mode", show)
        rules = {(x["action"], x["rule"]) for x in show["rules"]}
        self.assertTrue({("allow", "example.com:443/tcp"), ("deny", ":25"),
                         ("allow", "203.0.113.0/24")} <= rules, rules)
        self.a.egress.remove("deny", ":25")
        rules = {(x["action"], x["rule"])
                 for x in self.a.egress.show()["rules"]}
        self.assertNotIn(("deny", ":25"), rules)
        self.assertEqual(self.a.egress.mode("allowlist")["effective_mode"],
                         "allowlist")
        log = self.a.egress.log()
        self.assertIn("available", log)
        self.a.egress.reset()
        self.assertEqual(self.a.egress.show()["rules"], [])

    def test_bad_egress(self):
        """a bad egress rule: BadRequest naming the field"""
        with self.assertRaises(berth.BadRequest) as cm:
            self.a.egress.allow("not a rule!")
        self.assertEqual((cm.exception.field, cm.exception.code),
                         ("rule", "invalid_argument"))
        self.assertTrue(cm.exception.message)
        with self.assertRaises(berth.BadRequest) as cm:
            self.a.egress.allow("example.com", ttl="forever")
        self.assertEqual(cm.exception.field, "ttl")

    def test_not_found(self):
        """an unknown sandbox: NotFound with its code"""
        with self.assertRaises(berth.NotFound) as cm:
            berth.Sandbox.get("no-such", client=self.c)
        e = cm.exception
        self.assertEqual((e.status, e.code), (404, "not_found"))
        self.assertIn("no-such", e.message)
        with self.assertRaises(berth.NotFound):
            berth.Sandbox("no-such", self.c).egress.allow("example.com")

    def test_bad_create(self):
        """a bad id, an external sandbox with VM fields: BadRequest"""
        with self.assertRaises(berth.BadRequest) as cm:
            berth.Sandbox.create(self.c, id="Bad_Id", address="127.0.0.1")
        self.assertEqual(cm.exception.field, "id")
        with self.assertRaises(berth.BadRequest) as cm:
            berth.Sandbox.create(self.c, id="py-x", address="127.0.0.1",
                                 memory_mib=256)
        self.assertEqual(cm.exception.field, "memory_mib")
        with self.assertRaises(berth.Conflict):
            berth.Sandbox.create(self.c, id="py-a", address="127.0.0.1")

    def test_exec_external(self):
        """a command in an external sandbox: Conflict, no guest"""
        with self.assertRaises(berth.Conflict) as cm:
            self.a.exec(["true"])
        self.assertIn("not a VM-backed sandbox", cm.exception.message)
        with self.assertRaises(berth.Conflict):
            self.a.exec_stream(["true"])

    def test_tls_admin(self):
        """over TLS with an admin token; keep-alive reuses a connection"""
        c = self.tls(ADMIN)
        self.assertIn("py-a", [s.id for s in berth.Sandbox.list(client=c)])
        for _ in range(5):
            berth.Sandbox.get("py-b", client=c)
        self.assertEqual(len(c._idle), 1)
        c.close()

    def test_sandbox_token(self):
        """a sandbox's token: its own sandbox only (Forbidden elsewhere)"""
        c = self.tls(self.b.token)
        sb = berth.Sandbox.get("py-b", client=c)
        self.assertEqual(sb.info()["id"], "py-b")
        sb.egress.allow("example.org")
        p = sb.ports.publish(APP_PORT)
        self.assertIn("py-b", p["url"])
        sb.ports.unpublish(APP_PORT)
        with self.assertRaises(berth.Forbidden) as cm:
            berth.Sandbox.get("py-a", client=c)
        self.assertEqual(cm.exception.code, "forbidden")
        with self.assertRaises(berth.Forbidden):
            berth.Sandbox("py-a", c).ports.publish(APP_PORT)
        with self.assertRaises(berth.Forbidden):
            berth.Sandbox.list(client=c)
        with self.assertRaises(berth.Forbidden):
            sb.remove()
        c.close()

    def test_console_external(self):
        """an external sandbox has no console: NotFound; a sandbox's
        token may not read one (admin): Forbidden"""
        with self.assertRaises(berth.NotFound) as cm:
            self.a.console()
        self.assertEqual((cm.exception.status, cm.exception.code),
                         (404, "not_found"))
        self.assertIn("not a VM", cm.exception.message)
        with self.assertRaises(berth.NotFound):
            next(self.a.follow_console())
        c = self.tls(self.a.token)
        try:
            with self.assertRaises(berth.Forbidden):
                berth.Sandbox("py-a", c).console()
        finally:
            c.close()

    def test_bad_token(self):
        """an unknown token: Unauthorized"""
        with self.assertRaises(berth.Unauthorized) as cm:
            berth.Sandbox.list(client=self.tls("not-a-token"))
        self.assertEqual(cm.exception.status, 401)

    def test_environment(self):
        """Client() from BERTH_URL, BERTH_TOKEN and BERTH_CACERT"""
        env = {"BERTH_URL": URL, "BERTH_TOKEN": ADMIN,
               "BERTH_CACERT": CACERT}
        with mock.patch.dict(os.environ, env):
            c = berth.Client()
            self.assertEqual(c.url, URL)
            self.assertEqual(berth.Sandbox.get("py-a", client=c).id, "py-a")
            c.close()
        env = {"BERTH_SOCKET": SOCKET}
        with mock.patch.dict(os.environ, env):
            os.environ.pop("BERTH_URL", None)
            self.assertIn("py-a", [d["id"] for d in
                                   berth.Client().sandboxes()])

    def test_unreachable(self):
        """no listener at the URL: berth.ConnectionError"""
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        c = berth.Client(url="https://api.berth.localhost:%d" % port,
                         token=ADMIN, cacert=CACERT)
        with self.assertRaises(berth.ConnectionError):
            c.health()


if __name__ == "__main__":
    unittest.main()
