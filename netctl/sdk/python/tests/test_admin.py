# SPDX-License-Identifier: GPL-2.0-or-later
"""The admin calls on a real berthd, no guest booted: tokens (list,
show, rotate, revoke; a sandbox's token rotating itself, refused
another's), the global policy (put, then get; a bad one naming its
field; a sandbox's token refused), every published port, the OpenAPI
document, templates (list, show, add a directory, remove; typed 404s;
a build refused as this berthd refuses it: with no VMM, Conflict; with
one, a bad request answered before any builder runs) and fleet mode's
views on a berthd not in fleet mode (NotFound)."""
import os
import shutil
import tempfile
import unittest

from _env import APP_PORT, CACERT, SOCKET, URL, VM, berth


def setUpModule():
    if not SOCKET:
        raise unittest.SkipTest("no berthd (BERTH_TEST_SOCKET; run by "
                                "tests/integ/sdk-python.sh)")


class Admin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = berth.Client(socket=SOCKET)
        cls.a = berth.Sandbox.create(cls.c, id="py-adm-a",
                                     address="127.0.0.1")
        cls.b = berth.Sandbox.create(cls.c, id="py-adm-b",
                                     address="127.0.0.1")
        cls.tmp = tempfile.mkdtemp(prefix="berth-sdk-admin.")

    @classmethod
    def tearDownClass(cls):
        for sb in (cls.a, cls.b):
            try:
                sb.remove()
            except berth.NotFound:
                pass
        cls.c.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def tls(self, token):
        return berth.Client(url=URL, token=token, cacert=CACERT)

    # ---- tokens ----

    def test_tokens(self):
        """tokens: create, list, show, rotate (old secret 401), revoke"""
        t = self.c.tokens.create(admin=True, name="py-admin-calls")
        tid, secret = t["id"], t["token"]
        self.assertTrue(tid.startswith("tok-"), tid)
        rows = {r["id"]: r for r in self.c.tokens.list()}
        self.assertIn(tid, rows)
        self.assertEqual((rows[tid]["admin"], rows[tid]["name"]),
                         (True, "py-admin-calls"))
        self.assertNotIn("token", rows[tid], "a list shows no secret")
        shown = self.c.tokens.show(tid)
        self.assertEqual((shown["id"], shown["admin"], shown["sandbox"]),
                         (tid, True, None))
        # a sandbox's tokens, filtered
        own = [r["id"] for r in self.c.tokens.list(sandbox="py-adm-a")]
        self.assertEqual(own, [self.a.token_id])
        old = self.tls(secret)
        self.assertIn(tid, [r["id"] for r in old.tokens.list()])
        r = self.c.tokens.rotate(tid)
        self.assertEqual(r["id"], tid)
        self.assertNotEqual(r["token"], secret)
        with self.assertRaises(berth.Unauthorized):
            old.tokens.list()
        new = self.tls(r["token"])
        self.assertEqual(new.tokens.show(tid)["id"], tid)
        self.c.tokens.revoke(tid)
        with self.assertRaises(berth.Unauthorized):
            new.tokens.show(tid)
        with self.assertRaises(berth.NotFound):
            self.c.tokens.show(tid)
        with self.assertRaises(berth.NotFound):
            self.c.tokens.revoke(tid)
        with self.assertRaises(berth.BadRequest) as cm:
            self.c.tokens.show("Not_A_Token")
        self.assertEqual(cm.exception.field, "id")
        old.close()
        new.close()

    def test_token_rotates_itself(self):
        """a sandbox's token rotates itself; another's: Forbidden"""
        sb = berth.Sandbox.create(self.c, id="py-adm-rot",
                                  address="127.0.0.1")
        try:
            self.assertTrue(sb.token_id.startswith("tok-"), sb.token_id)
            c = self.tls(sb.token)
            with self.assertRaises(berth.Forbidden):
                c.tokens.rotate(self.a.token_id)
            with self.assertRaises(berth.Forbidden):
                c.tokens.list()
            with self.assertRaises(berth.Forbidden):
                c.tokens.revoke(self.a.token_id)
            r = c.tokens.rotate(sb.token_id)
            self.assertEqual((r["id"], r["sandbox"], r["admin"]),
                             (sb.token_id, "py-adm-rot", False))
            with self.assertRaises(berth.Unauthorized):
                berth.Sandbox.get("py-adm-rot", client=c)
            c2 = self.tls(r["token"])
            self.assertEqual(berth.Sandbox.get("py-adm-rot",
                                               client=c2).id, "py-adm-rot")
            c.close()
            c2.close()
            # the other sandbox's token still works
            ca = self.tls(self.a.token)
            self.assertEqual(berth.Sandbox.get("py-adm-a", client=ca).id,
                             "py-adm-a")
            ca.close()
        finally:
            sb.remove()

    # ---- the global policy ----

    def test_policy(self):
        """policy: put, then get shows it; None puts a default back"""
        before = self.c.policy()
        try:
            p = self.c.set_policy(deny=["198.51.100.0/24"], max_rules=77)
            self.assertIn("198.51.100.0/24", p["deny"])
            self.assertEqual(p["max_rules"], 77)
            got = self.c.policy()
            self.assertIn("198.51.100.0/24", got["deny"])
            self.assertEqual(got["max_rules"], 77)
            self.assertEqual(got["default_mode"], before["default_mode"])
            # a mapping works as keywords do
            got = self.c.set_policy({"conn_limit": 12})
            self.assertEqual((got["conn_limit"], got["max_rules"]),
                             (12, 77))
        finally:
            self.c.set_policy(deny=before.get("deny") or [],
                              max_rules=None, conn_limit=None)
        self.assertEqual(self.c.policy(), before)

    def test_bad_policy(self):
        """a bad policy: BadRequest naming the field; a sandbox token's
        put: Forbidden (it may read it)"""
        for fields, field in (({"default_mode": "wide"}, "default_mode"),
                              ({"max_rules": -1}, "max_rules"),
                              ({"deny": ["not a rule!"]}, "deny[0]"),
                              ({"colour": "red"}, "colour")):
            with self.assertRaises(berth.BadRequest, msg=fields) as cm:
                self.c.set_policy(**fields)
            self.assertEqual(cm.exception.field, field, cm.exception)
        c = self.tls(self.a.token)
        self.assertIn("default_mode", c.policy())
        with self.assertRaises(berth.Forbidden) as cm:
            c.set_policy(max_rules=1)
        self.assertIn("global policy", cm.exception.message)
        c.close()

    # ---- ports, openapi ----

    def test_ports(self):
        """every published port, with its URL; not for a sandbox token"""
        p = self.b.ports.publish(APP_PORT)
        try:
            rows = [r for r in self.c.ports() if r["sandbox"] == "py-adm-b"]
            self.assertEqual(len(rows), 1, rows)
            self.assertEqual((rows[0]["port"], rows[0]["url"]),
                             (APP_PORT, p["url"]))
            self.assertTrue(p["url"].startswith(
                "https://%d-py-adm-b." % APP_PORT), p["url"])
            c = self.tls(self.b.token)
            with self.assertRaises(berth.Forbidden):
                c.ports()
            c.close()
        finally:
            self.b.ports.unpublish(APP_PORT)
        self.assertNotIn("py-adm-b", [r["sandbox"] for r in self.c.ports()])

    def test_metrics(self):
        """Prometheus text for an admin; not for a sandbox token"""
        text = self.c.metrics()
        self.assertIn("# HELP berth_control_responses_total", text)
        c = self.tls(self.b.token)
        try:
            with self.assertRaises(berth.Forbidden):
                c.metrics()
        finally:
            c.close()

    def test_openapi(self):
        """the OpenAPI 3.1 document, with the admin paths"""
        doc = self.c.openapi()
        self.assertRegex(doc["openapi"], r"^3\.1")
        for path in ("/v1/templates", "/v1/templates/{template}/build",
                     "/v1/tokens/{token}/rotate", "/v1/policy", "/v1/ports",
                     "/v1/fleet/hosts", "/v1/fleet/drain"):
            self.assertIn(path, doc["paths"])
        self.assertIn("put", doc["paths"]["/v1/policy"])

    # ---- templates ----

    def template_dir(self, name):
        """A directory that loads as a template (a kernel file is all
        berthd checks when one is added)."""
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        open(os.path.join(d, "vmlinuz"), "w").close()
        with open(os.path.join(d, "template.json"), "w") as f:
            f.write('{"name":"%s","kernel":"vmlinuz",'
                    '"cmdline":"console=ttyS0"}\n' % name)
        return d

    def test_templates(self):
        """templates: list, add a directory, show, remove"""
        names = {t["name"]: t for t in self.c.templates.list()}
        self.assertTrue(names["default"]["builtin"])
        d = self.template_dir("py-tpl")
        t = self.c.templates.add("py-tpl", d)
        self.assertEqual((t["name"], t["dir"], t["builtin"]),
                         ("py-tpl", d, False))
        self.assertEqual(t["source"], {"from": "dir"})
        shown = self.c.templates.show("py-tpl")
        self.assertEqual((shown["dir"], shown["sandboxes"]), (d, 0))
        self.assertIn("py-tpl", [x["name"] for x in self.c.templates.list()])
        with self.assertRaises(berth.Conflict):
            self.c.templates.add("py-tpl", d)
        self.c.templates.remove("py-tpl")
        with self.assertRaises(berth.NotFound):
            self.c.templates.show("py-tpl")
        self.assertTrue(os.path.isdir(d), "an added directory is kept")
        # a relative path is made absolute here, as netctl does
        cwd = os.getcwd()
        try:
            os.chdir(self.tmp)
            self.template_dir("py-rel")
            self.assertEqual(self.c.templates.add("py-rel", "py-rel")["dir"],
                             os.path.join(self.tmp, "py-rel"))
        finally:
            os.chdir(cwd)
        self.c.templates.remove("py-rel")

    def test_template_errors(self):
        """templates: typed errors (unknown, bad directory, built in)"""
        with self.assertRaises(berth.NotFound) as cm:
            self.c.templates.show("py-nosuch")
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(berth.NotFound):
            self.c.templates.remove("py-nosuch")
        with self.assertRaises(berth.BadRequest) as cm:
            self.c.templates.add("py-bad", os.path.join(self.tmp, "none"))
        self.assertEqual(cm.exception.field, "dir")
        self.assertIn("template.json", cm.exception.message)
        with self.assertRaises(berth.BadRequest) as cm:
            self.c.templates.add("Bad_Name", self.tmp)
        self.assertEqual(cm.exception.field, "name")
        with self.assertRaises(berth.Conflict):
            self.c.templates.remove("default")
        c = self.tls(self.a.token)
        with self.assertRaises(berth.Forbidden):
            c.templates.list()
        c.close()

    def test_template_build_refused(self):
        """a build's status and a build, as this berthd refuses them
        (no VM boots: without a VMM, Conflict; with one, unknown names
        and a bad Dockerfile path are refused before a builder runs)"""
        if not VM:
            with self.assertRaises(berth.Conflict) as cm:
                self.c.templates.build_status("py-nosuch")
            self.assertIn("no VMM", cm.exception.message)
            with self.assertRaises(berth.Conflict):
                self.c.templates.build("debian")
        else:
            with self.assertRaises(berth.NotFound) as cm:
                self.c.templates.build_status("py-nosuch")
            self.assertIn("no build", cm.exception.message)
            with self.assertRaises(berth.BadRequest) as cm:
                self.c.templates.build("py-nosuch")
            self.assertEqual(cm.exception.field, "name")
        # a context of some size, streamed as a tar: berthd answers
        # before it has read it, and that answer is what is raised
        ctx = os.path.join(self.tmp, "ctx")
        os.makedirs(os.path.join(ctx, "app"))
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("FROM scratch\nCOPY app /app\n")
        with open(os.path.join(ctx, "app", "blob"), "wb") as f:
            f.write(os.urandom(4 << 20))
        exp = berth.BadRequest if VM else berth.Conflict
        with self.assertRaises(exp) as cm:
            self.c.templates.build("py-ctx", dockerfile=ctx,
                                   file="../Dockerfile",
                                   build_args={"A": "1"})
        if VM:
            self.assertEqual(cm.exception.field, "file")
        if VM:
            with self.assertRaises(berth.BadRequest):
                self.c.templates.build("py-ctx", dockerfile=ctx, file="/abs")
        else:
            with self.assertRaises(berth.Conflict):
                self.c.templates.build_and_wait("py-img",
                                                image=b"not an image")
        with self.assertRaises(ValueError):
            self.c.templates.build("py-x", image=b"x", file="Dockerfile")
        # the connection pool is still good after those
        self.assertEqual(self.c.templates.show("default")["name"], "default")

    def test_template_build(self):
        """builds followed to their end: from a context streamed as a tar
        (its lines, its version, the same source again cached), from an
        image file, and one that fails (TemplateBuildFailed, the
        builder's reason); the builder a stand-in, no VM booted"""
        if not VM or not os.environ.get("BERTH_MKTEMPLATE_SOURCE"):
            self.skipTest("needs a VMM and a stand-in builder "
                          "(BERTH_MKTEMPLATE_SOURCE: sdk-python.sh)")
        ctx = os.path.join(self.tmp, "bctx")
        os.makedirs(os.path.join(ctx, "app"))
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("FROM scratch\nCOPY app /app\n")
        with open(os.path.join(ctx, "app", "x.txt"), "w") as f:
            f.write("hello\n")
        size = len(b"".join(berth.tar_directory(ctx)))
        lines = []
        st = self.c.templates.build_and_wait("py-built", dockerfile=ctx,
                                             build_args={"V": "1"},
                                             on_line=lines.append)
        self.assertEqual(st["state"], "ok")
        self.assertIn("stand-in: building py-built from dockerfile "
                      "(%d bytes)" % size, lines)
        self.assertIn("stand-in: template py-built in %s" % st["dir"], lines)
        t = self.c.templates.show("py-built")
        self.assertEqual(t["source"]["from"], "dockerfile")
        self.assertRegex(t["source"]["sha256"], r"^[0-9a-f]{64}$")
        self.assertEqual(os.path.realpath(t["dir"]), st["dir"])
        self.assertEqual(t["version"], os.path.basename(st["dir"]))
        # the same tree, the same tar: berthd's cache, no builder run
        b = self.c.templates.build("py-built", dockerfile=ctx,
                                   build_args={"V": "1"})
        self.assertEqual(b.wait()["dir"], st["dir"])
        # a failing build: its lines, then the builder's reason
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("FROM scratch\nRUN FAIL\n")
        b = self.c.templates.build("py-built", dockerfile=ctx, poll=0.1)
        seen = list(b)
        self.assertEqual(b.state, "failed")
        self.assertIn("stand-in: step 2/2 (RUN false) said: it-failed-here",
                      seen)
        with self.assertRaises(berth.TemplateBuildFailed) as cm:
            b.wait()
        self.assertIn("it-failed-here", cm.exception.reason)
        self.assertTrue(cm.exception.log.endswith("/build.log"))
        # from an image archive, a file sent as it is
        img = os.path.join(self.tmp, "image.tar")
        with open(img, "wb") as f:
            f.write(os.urandom(100000))
        st = self.c.templates.build_and_wait("py-img", image=img)
        self.assertEqual(self.c.templates.show("py-img")["source"]["from"],
                         "image")
        self.assertTrue(os.path.isdir(st["dir"]))
        for name in ("py-built", "py-img"):
            self.c.templates.remove(name)
            with self.assertRaises(berth.NotFound):
                self.c.templates.show(name)

    # ---- fleet ----

    def test_fleet_off(self):
        """fleet calls on a berthd not in fleet mode: NotFound; a
        sandbox's move: Conflict (BadRequest on "to" without a host)"""
        for call in (self.c.fleet.hosts, self.c.fleet.sandboxes,
                     self.c.fleet.drain, self.c.fleet.undrain,
                     self.c.fleet.drain_status,
                     lambda: self.c.fleet.drain(move=False, wait=True)):
            with self.assertRaises(berth.NotFound) as cm:
                call()
            self.assertIn("fleet mode is not configured",
                          cm.exception.message)
        # a sandbox moves only between fleet hosts
        with self.assertRaises(berth.Conflict) as cm:
            self.a.move("elsewhere")
        self.assertIn("fleet mode is not configured", cm.exception.message)
        with self.assertRaises(berth.BadRequest) as cm:
            self.a.move("")
        self.assertEqual(cm.exception.field, "to")


if __name__ == "__main__":
    unittest.main()
