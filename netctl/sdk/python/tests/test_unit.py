# SPDX-License-Identifier: GPL-2.0-or-later
"""The SDK without berthd: framing, error mapping, settings."""
import builtins
import io
import os
import tempfile
import unittest
from unittest import mock

from _env import berth
from berth.execs import ExecResult, _frame, decode_stream
from berth.sandbox import _argv


class Unit(unittest.TestCase):
    def test_frame(self):
        """a frame is one chunk: length, type byte, payload"""
        self.assertEqual(_frame(b"J", b"{}"),
                         b"7\r\n\x00\x00\x00\x02J{}\r\n")
        self.assertEqual(_frame(b"I"), b"5\r\n\x00\x00\x00\x00I\r\n")

    def test_errors(self):
        """error answers become typed exceptions with code and field"""
        e = berth.errors.api_error(
            400, b'{"error":{"status":400,"code":"invalid_argument",'
                 b'"field":"rule","message":"bad"}}')
        self.assertIsInstance(e, berth.BadRequest)
        self.assertEqual((e.status, e.code, e.field, e.message),
                         (400, "invalid_argument", "rule", "bad"))
        e = berth.errors.api_error(404, b'{"error":{"code":"not_found",'
                                        b'"message":"no such"}}')
        self.assertIsInstance(e, berth.NotFound)
        self.assertIsNone(e.field)
        e = berth.errors.api_error(429, b"", "3")
        self.assertIsInstance(e, berth.TooManyRequests)
        self.assertEqual(e.retry_after, 3.0)
        e = berth.errors.api_error(418, b"teapot")
        self.assertIs(type(e), berth.APIError)
        self.assertEqual(e.message, "teapot")

    def test_connection_error(self):
        """no berthd at the socket: berth.ConnectionError, also Python's"""
        with tempfile.TemporaryDirectory() as d:
            c = berth.Client(socket=os.path.join(d, "control.sock"))
            with self.assertRaises(berth.ConnectionError):
                c.health()
            with self.assertRaises(builtins.ConnectionError):
                berth.Sandbox.get("x", client=c)

    def test_settings(self):
        """the environment chooses the socket, or the URL and token"""
        env = {"BERTH_SOCKET": "/run/x.sock"}
        with mock.patch.dict(os.environ, env, clear=True):
            c = berth.Client()
            self.assertEqual((c.socket, c.url), ("/run/x.sock", None))
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(berth.Client().socket,
                             "/var/lib/berth/control.sock")
        env = {"BERTH_URL": "https://api.example:8443", "BERTH_TOKEN": "t",
               "BERTH_SOCKET": "/run/x.sock"}
        with mock.patch.dict(os.environ, env, clear=True):
            c = berth.Client()
            self.assertEqual((c.url, c.token, c.socket),
                             ("https://api.example:8443", "t", None))
            # an explicit socket wins over the environment's URL
            self.assertEqual(berth.Client(socket="/s").url, None)
        with self.assertRaises(ValueError):
            berth.Client(url="ftp://x")

    def test_argv_and_results(self):
        """a string runs with sh -c; output decoded as berthd says"""
        self.assertEqual(_argv("echo hi"), ["sh", "-c", "echo hi"])
        self.assertEqual(_argv(("ls", "/")), ["ls", "/"])
        self.assertRaises(ValueError, _argv, [])
        doc = {"stdout": "aGk=", "stdout_encoding": "base64",
               "stderr": "é", "stderr_encoding": "utf-8"}
        self.assertEqual(decode_stream(doc, "stdout"), b"hi")
        self.assertEqual(decode_stream(doc, "stderr"), "é".encode())
        r = ExecResult({"exit_code": None, "signal": 9})
        self.assertEqual((r.ok, r.status), (False, 137))
        self.assertEqual(berth.Client.target("/p", {"a": 1, "b": None,
                                                    "c": True, "d": False}),
                         "/p?a=1&c=1")


class Admin(unittest.TestCase):
    def test_tar_directory(self):
        """a context as a tar: what tarfile reads back, the same tree
        the same bytes, a record's multiple; a file that shrinks stops
        it"""
        import tarfile
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "app", "empty"))
            with open(os.path.join(d, "Dockerfile"), "w") as f:
                f.write("FROM scratch\n")
            blob = os.urandom(300 * 1024 + 7)
            with open(os.path.join(d, "app", "blob"), "wb") as f:
                f.write(blob)
            os.symlink("../Dockerfile", os.path.join(d, "app", "link"))
            os.chmod(os.path.join(d, "Dockerfile"), 0o600)
            data = b"".join(berth.tar_directory(d, block=4096))
            self.assertEqual(len(data) % tarfile.RECORDSIZE, 0)
            self.assertEqual(data, b"".join(berth.tar_directory(d)))
            with tarfile.open(fileobj=io.BytesIO(data)) as tf:
                names = tf.getnames()
                self.assertEqual(names, [".", "./Dockerfile", "./app",
                                         "./app/blob", "./app/empty",
                                         "./app/link"])
                self.assertEqual(tf.extractfile("./app/blob").read(), blob)
                self.assertEqual(tf.getmember("./Dockerfile").mode, 0o600)
                self.assertEqual(tf.getmember("./app/link").linkname,
                                 "../Dockerfile")
            # the blob's first block read, then it shrinks
            it = berth.tar_directory(d, block=4096)
            while len(next(it)) != 4096:
                pass
            with open(os.path.join(d, "app", "blob"), "r+b") as f:
                f.truncate(100)
            with self.assertRaises(berth.BerthError) as cm:
                list(it)
            self.assertIn("shrank", str(cm.exception))
            with self.assertRaises(berth.BerthError):
                list(berth.tar_directory(os.path.join(d, "Dockerfile")))
            # a file that cannot be read: a BerthError, not an OSError
            # (which a request would take for its connection failing)
            os.remove(os.path.join(d, "app", "blob"))
            os.symlink("nowhere", os.path.join(d, "app", "blob"))
            os.mkfifo(os.path.join(d, "app", "fifo"))
            with mock.patch("builtins.open",
                            side_effect=PermissionError(13, "denied")):
                with self.assertRaises(berth.BerthError) as cm:
                    list(berth.tar_directory(d))
            self.assertNotIsInstance(cm.exception, OSError)
            self.assertIn("denied", str(cm.exception))
            # a fifo is left out, a dangling link kept
            names = [n for n in tarfile.open(fileobj=io.BytesIO(b"".join(
                berth.tar_directory(d)))).getnames()]
            self.assertNotIn("./app/fifo", names)
            self.assertIn("./app/blob", names)

    def test_build_followed(self):
        """a build's lines followed from "next" to its end; one that
        failed raises TemplateBuildFailed with its reason and log"""
        class Stub:
            def __init__(self, answers):
                self.answers, self.asked = answers, []

            def build_status(self, name, after=0):
                self.asked.append((name, after))
                return self.answers.pop(0)

        st = Stub([{"state": "running", "lines": ["b"], "next": 2},
                   {"state": "ok", "lines": ["c"], "next": 3,
                    "dir": "/t/v1"}])
        b = berth.TemplateBuild(st, "t", {"state": "running",
                                          "lines": ["a"], "next": 1},
                                poll=0)
        seen = []
        self.assertEqual(b.wait(seen.append)["dir"], "/t/v1")
        self.assertEqual(seen, ["a", "b", "c"])
        self.assertEqual(st.asked, [("t", 1), ("t", 2)])
        self.assertEqual((b.state, b.done), ("ok", True))
        st = Stub([{"state": "failed", "lines": ["boom"], "next": 2,
                    "reason": "step 2 failed", "log": "/l/build.log"}])
        b = berth.TemplateBuild(st, "t", {"state": "running", "lines": [],
                                          "next": 0}, poll=0)
        self.assertEqual(list(b), ["boom"])
        with self.assertRaises(berth.TemplateBuildFailed) as cm:
            b.wait()
        e = cm.exception
        self.assertEqual((e.state, e.reason, e.log),
                         ("failed", "step 2 failed", "/l/build.log"))
        self.assertIn("step 2 failed", str(e))


class FakeBerthd:
    """A unix socket server answering each connection's first request
    with a canned answer, then closing it (as berthd closes an idle
    keep-alive connection); counts connections."""

    def __init__(self, path, answer, read_body=True):
        import socket
        import threading
        self.answer = answer
        self.read_body = read_body
        self.conns = 0
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(4)
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def serve(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.conns += 1
            buf = b""
            while b"\r\n\r\n" not in buf:
                b = c.recv(4096)
                if not b:
                    break
                buf += b
            c.sendall(self.answer)
            c.close()

    def close(self):
        self.s.close()


class Transport(unittest.TestCase):
    def test_stale_keepalive(self):
        """a kept connection berthd closed: the call goes on a new one"""
        with tempfile.TemporaryDirectory() as d:
            srv = FakeBerthd(os.path.join(d, "s"),
                             b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n"
                             b"Content-Type: application/json\r\n\r\n"
                             b'{"ok":true}')
            c = berth.Client(socket=os.path.join(d, "s"))
            self.assertEqual(c.health(), {"ok": True})
            self.assertEqual(len(c._idle), 1)
            self.assertEqual(c.health(), {"ok": True})
            self.assertEqual(srv.conns, 2)
            c.close()
            srv.close()

    def test_early_answer(self):
        """an error answered before a streamed body was sent is raised"""
        with tempfile.TemporaryDirectory() as d:
            body = (b'{"error":{"status":404,"code":"not_found",'
                    b'"message":"no sandbox x"}}')
            srv = FakeBerthd(os.path.join(d, "s"),
                             b"HTTP/1.1 404 Not Found\r\nContent-Length: "
                             b"%d\r\nConnection: close\r\n\r\n%s" %
                             (len(body), body))
            c = berth.Client(socket=os.path.join(d, "s"))
            data = io.BytesIO(b"x" * (8 * 1024 * 1024))
            with self.assertRaises(berth.NotFound) as cm:
                berth.Sandbox("x", c).files.write("/f", data)
            self.assertEqual(cm.exception.message, "no sandbox x")
            srv.close()


if __name__ == "__main__":
    unittest.main()
