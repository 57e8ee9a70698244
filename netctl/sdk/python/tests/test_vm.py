# SPDX-License-Identifier: GPL-2.0-or-later
"""The SDK in a guest: ONE shared minimal microVM (qemu TCG) for every
test here, created through the SDK and removed at the end. The tests run
in their names' order: the fork and the suspend come last."""
import hashlib
import io
import resource
import threading
import time
import unittest

from _env import (CACERT, SOCKET, URL, VM, VM_SKIP, berth, fetch_status,
                  note, wait_for)

SB = None       # the shared sandbox
MB = 1024 * 1024


def setUpModule():
    global SB
    if not SOCKET or not VM:
        raise unittest.SkipTest(VM_SKIP)
    c = berth.Client(socket=SOCKET)
    SB = berth.Sandbox.create(c, id="py-vm", env={"SB_VAR": "from-sb"})


def tearDownModule():
    if SB is not None:
        SB.remove()


class Pattern(io.RawIOBase):
    """A file object of n pseudo-random bytes made as they are read
    (never held whole), hashed as they go."""

    def __init__(self, n):
        self.left = n
        self.sha = hashlib.sha256()
        self.block = hashlib.sha256(b"berth").digest() * 2048   # 64 KiB
        self.i = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left, len(self.block))
        if n == 0:
            return 0
        # each block differs: its index in the first bytes
        chunk = self.i.to_bytes(8, "big") + self.block[8:n] if n > 8 \
            else self.block[:n]
        b[:n] = chunk
        self.sha.update(chunk)
        self.left -= n
        self.i += 1
        return n


def rss_peak_mib():
    """This process's peak RSS so far (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Guest(unittest.TestCase):
    def test_1_exec(self):
        """exec: exit status, signal, output, env, cwd, user, stdin"""
        r = SB.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        self.assertEqual((r.exit_code, r.signal, r.stdout, r.stderr),
                         (3, None, b"out\n", b"err\n"))
        self.assertFalse(r.ok)
        r = SB.exec("kill -9 $$")
        self.assertEqual((r.exit_code, r.signal, r.status), (None, 9, 137))
        r = SB.exec("echo $SB_VAR $FOO; pwd", env={"FOO": "bar"},
                    cwd="/tmp")
        self.assertEqual(r.text, "from-sb bar\n/tmp\n")
        self.assertEqual(SB.exec(["id", "-u"]).text, "0\n")
        self.assertEqual(SB.exec("cat", stdin=b"abc\x00\xff").stdout,
                         b"abc\x00\xff")
        # over the buffered exec's 48 KiB: streamed, same result
        big = bytes(range(256)) * 1000
        r = SB.exec("wc -c; echo done >&2", stdin=big)
        self.assertEqual((r.text.strip(), r.stderr), ("256000", b"done\n"))
        with self.assertRaises(berth.BadRequest) as cm:
            SB.exec(["true"], timeout="forever")
        self.assertEqual(cm.exception.field, "timeout")
        r = SB.exec("sleep 30", timeout=1)
        self.assertTrue(r.timed_out)

    def test_2_exec_stream(self):
        """exec_stream: output as it comes, stdin written meanwhile"""
        st = SB.exec_stream("while read l; do echo got:$l; done; "
                            "echo bye >&2; exit 4", interactive=True)
        it = iter(st)
        st.write(b"one\n")
        self.assertEqual(next(it), ("stdout", b"got:one\n"))
        st.write("two\n")
        self.assertEqual(next(it), ("stdout", b"got:two\n"))
        st.close_stdin()
        rest = list(it)
        self.assertEqual(rest[0], ("stderr", b"bye\n"))
        kind, res = rest[-1]
        self.assertEqual((kind, res.exit_code), ("exit", 4))
        self.assertIs(st.result, res)
        # stdin from a file object, fed by a thread; 1 MiB both ways
        data = bytes(range(256)) * 4096
        r = SB.exec_stream("cat", stdin=io.BytesIO(data)).wait()
        self.assertEqual((r.exit_code, len(r.stdout)), (0, len(data)))
        self.assertEqual(r.stdout, data)
        with self.assertRaises(berth.NotFound):
            berth.Sandbox("no-such", SB.client).exec_stream(["true"])

    def test_3_detached_server(self):
        """a detached busybox httpd reached on its published port"""
        SB.files.mkdir("/tmp/www")
        SB.files.write("/tmp/www/index.html", b"hello from the sdk\n")
        p = SB.exec("exec httpd -f -v -p 8081 -h /tmp/www", detach=True)
        self.assertIsInstance(p, berth.Process)
        self.assertEqual(p.info()["state"], "running")
        self.assertIn(p.n, [q["process"] for q in SB.processes.list()])
        url = SB.ports.publish(8081)["url"]
        try:
            st, body = wait_for("httpd through berthd",
                                lambda: fetch_status(url, "/index.html"),
                                timeout=60)
            self.assertEqual((st, body), (200, b"hello from the sdk\n"))
            self.assertEqual([q["url"] for q in SB.ports.list()
                              if q["port"] == 8081], [url])
        finally:
            SB.ports.unpublish(8081)
        p.kill("TERM")
        end = p.wait()
        self.assertEqual((end["state"], end.get("signal")), ("exited", 15))
        with self.assertRaises(berth.Conflict):
            p.kill("TERM")
        # a detached command's output followed to its end, then its log
        q = SB.exec("for i in 1 2 3; do echo line$i; sleep 0.2; done",
                    detach=True)
        self.assertEqual(b"".join(q.follow()), b"line1\nline2\nline3\n")
        logs = q.logs(offset=6)
        self.assertEqual((logs["output"], logs["next_offset"]),
                         (b"line2\nline3\n", 18))
        self.assertEqual(q.wait()["exit_code"], 0)

    def test_3_attach(self):
        """a detached shell on a terminal: attached, typed to, detached"""
        p = SB.exec("sh", detach=True, tty=(24, 80))
        st = p.attach()
        st.write(b"echo $((6*7))\r")
        out = b""
        for kind, data in st:
            if kind == "stdout":
                out += data
                if b"42" in out:
                    break
        st.close_stdin()        # the end of the body: it detaches
        rest = list(st)
        kind, end = rest[-1]
        self.assertEqual((kind, end.raw["detached"], end.raw["state"]),
                         ("exit", True, "running"))
        self.assertEqual(p.info()["state"], "running")
        p.kill("KILL")
        self.assertEqual(p.wait()["signal"], 9)

    def test_4_files_100mb(self):
        """100 MB written and read back streamed; client RSS bounded"""
        before = rss_peak_mib()
        src = Pattern(100 * MB)
        t0 = time.monotonic()
        ans = SB.files.write("/data/big", src, mode=0o600)
        t1 = time.monotonic()
        self.assertEqual((ans["size"], ans["mode"]), (100 * MB, "0600"))
        back = hashlib.sha256()
        n = 0
        for b in SB.files.read_stream("/data/big"):
            back.update(b)
            n += len(b)
        t2 = time.monotonic()
        self.assertEqual(n, 100 * MB)
        self.assertEqual(back.hexdigest(), src.sha.hexdigest())
        grew = rss_peak_mib() - before
        note("100 MiB written in %.1f s, read in %.1f s; the client's peak "
             "RSS grew %.1f MiB (from %.1f)" % (t1 - t0, t2 - t1, grew,
                                                before))
        # the data is 100 MiB; streaming keeps a few blocks at a time
        self.assertLess(grew, 20, "peak RSS grew %.1f MiB" % grew)
        # the guest sees the same bytes
        r = SB.exec(["sha256sum", "/data/big"], timeout="5m")
        self.assertEqual(r.text.split()[0], src.sha.hexdigest())
        SB.files.remove("/data/big")

    def test_5_files_ops(self):
        """read, ranges, list, mkdir, move, remove; errors typed"""
        SB.files.mkdir("/data/d/e", parents=True)
        SB.files.write("/data/d/a.txt", "alpha\n", mode="0640")
        self.assertEqual(SB.files.read("/data/d/a.txt"), b"alpha\n")
        self.assertEqual(SB.files.read("/data/d/a.txt", offset=1,
                                       length=3), b"lph")
        ents = {e["name"]: e for e in SB.files.list("/data/d")}
        self.assertEqual((ents["a.txt"]["type"], ents["a.txt"]["size"],
                          ents["a.txt"]["mode"], ents["e"]["type"]),
                         ("file", 6, "0640", "dir"))
        SB.files.move("/data/d/a.txt", "/data/d/e/b.txt")
        self.assertEqual(SB.files.read("/data/d/e/b.txt"), b"alpha\n")
        with self.assertRaises(berth.NotFound):
            SB.files.read("/data/d/a.txt")
        SB.files.write("/data/d/c.txt", b"c")
        with self.assertRaises(berth.Conflict):
            SB.files.move("/data/d/c.txt", "/data/d/e/b.txt")
        SB.files.move("/data/d/c.txt", "/data/d/e/b.txt", overwrite=True)
        with self.assertRaises(berth.Conflict):
            SB.files.remove("/data/d")
        SB.files.remove("/data/d", recursive=True)
        with self.assertRaises(berth.NotFound):
            SB.files.list("/data/d")
        with self.assertRaises(berth.BadRequest) as cm:
            SB.files.read("relative")
        self.assertEqual(cm.exception.field, "path")

    def test_6_console(self):
        """the guest console: its boot from byte 0, its end, a line the
        guest writes to /dev/console, followed; a bad offset refused"""
        full = SB.console(from_=0)
        size = full["size"]
        self.assertEqual(full["from"], 0)
        self.assertGreater(size, 0)
        self.assertEqual(len(full["text"]), min(size, MB))
        # the minimal template's kernel prints its banner first
        # (console=ttyS0, not quiet)
        self.assertIn("Linux version", full["text"][:64 * 1024])
        last = SB.console()
        self.assertTrue(last["text"])
        self.assertEqual(len(last["text"]), min(last["size"], 64 * 1024))
        self.assertEqual(last["from"], last["size"] - len(last["text"]))
        end = SB.console(from_=last["size"])
        self.assertEqual((end["from"], end["text"]), (last["size"], ""))
        with self.assertRaises(berth.BadRequest) as cm:
            SB.console(from_="x")
        self.assertEqual(cm.exception.field, "from")
        # a line the guest writes on its console, read from where the
        # console was, then followed from there
        mark = "berth-sdk-console-%d" % time.monotonic_ns()
        SB.exec("echo %s >/dev/console" % mark)
        wait_for("the line on the console",
                 lambda: mark in SB.console(from_=end["size"])["text"])
        it = SB.follow_console(from_=end["size"])
        try:
            self.assertIn(mark, next(it))
        finally:
            it.close()
        # without from_: the last 64 KiB first
        it = SB.follow_console()
        try:
            first = next(it)
        finally:
            it.close()
        self.assertIn(mark, first)
        self.assertLessEqual(len(first), 64 * 1024)

    def test_6_watch(self):
        """a watch sees a file written in its directory"""
        SB.files.mkdir("/data/w", parents=True)
        seen = []
        with SB.files.watch("/data/w") as w:
            # a watch that never sees it must not hang the suite
            guard = threading.Timer(60, w.close)
            guard.start()
            try:
                it = iter(w)
                self.assertEqual(next(it)["event"], "ready")
                SB.files.write("/data/w/f.txt", b"watched")
                for ev in it:
                    seen.append(ev)
                    if ev.get("path", "").endswith("f.txt") and \
                            ev["event"] in ("create", "move_to"):
                        break
            finally:
                guard.cancel()
        self.assertTrue(any(e.get("path", "").endswith("f.txt")
                            for e in seen), seen)
        self.assertTrue(all(e["dir"] is False for e in seen
                            if "dir" in e), seen)

    def test_7_token_tls(self):
        """with its own token over TLS: exec, the streamed exec, files"""
        c = berth.Client(url=URL, token=SB.token, cacert=CACERT)
        sb = berth.Sandbox.get("py-vm", client=c)
        self.assertEqual(sb.exec("echo $SB_VAR").text, "from-sb\n")
        r = sb.exec_stream("tr a-z A-Z", stdin=b"over tls\n").wait()
        self.assertEqual((r.exit_code, r.stdout), (0, b"OVER TLS\n"))
        sb.files.write("/data/tls", io.BytesIO(b"t" * 300000))
        self.assertEqual(len(sb.files.read("/data/tls")), 300000)
        with self.assertRaises(berth.Forbidden):
            sb.suspend()        # an admin's call (README: API_ADMIN)
        c.close()

    def test_8_fork_minimal(self):
        """the minimal template neither forks nor checkpoints: Conflict
        with the API's code, nothing stored (test_fork.py: a Debian one)"""
        with self.assertRaises(berth.Conflict) as cm:
            SB.fork("py-vm-f")
        self.assertEqual((cm.exception.status, cm.exception.code),
                         (409, "conflict"))
        self.assertIn("root overlay", cm.exception.message)
        with self.assertRaises(berth.NotFound):
            berth.Sandbox.get("py-vm-f", SB.client)
        with self.assertRaises(berth.Conflict) as cm:
            SB.checkpoint("c1")
        self.assertEqual(cm.exception.code, "conflict")
        self.assertIn("root overlay", cm.exception.message)
        self.assertEqual(SB.info()["state"], "running")

    def test_9_suspend_wake(self):
        """suspended, the next exec wakes it (and says it did)"""
        self.assertEqual(SB.suspend()["state"], "suspended")
        self.assertEqual(SB.info()["state"], "suspended")
        t0 = time.monotonic()
        r = SB.exec(["echo", "awake"])
        self.assertEqual(r.text, "awake\n")
        self.assertGreater(r.wake_ms, 0)
        note("the exec after a suspend: %.0f ms, wake_ms %d" % (
            (time.monotonic() - t0) * 1000, r.wake_ms))
        self.assertLess(time.monotonic() - t0, 120)
        self.assertEqual(SB.info()["state"], "running")
        # a file read wakes it too
        SB.suspend()
        SB.files.write("/data/after", b"z")
        self.assertEqual(SB.files.read("/data/after"), b"z")
        self.assertEqual(SB.info()["state"], "running")


if __name__ == "__main__":
    unittest.main()
