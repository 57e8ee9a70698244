# SPDX-License-Identifier: GPL-2.0-or-later
"""The SDK without berthd: framing, error mapping, settings."""
import builtins
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


if __name__ == "__main__":
    unittest.main()
