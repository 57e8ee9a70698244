# SPDX-License-Identifier: GPL-2.0-or-later
"""berth.execs — commands in a sandbox's guest: their results, the
streamed exec, detached processes.

The streamed exec (``POST .../exec?stream=1``) and a process's attach
speak the guest agent's framing through berthd (README "Exec, files and
MCP in the API", netctl/cli_exec.c, proxy/api/streams.c): each frame is
a 4-byte big-endian payload length, a type byte and the payload, carried
in chunked HTTP bodies both ways. The client sends ``J`` (the request's
JSON) first, then ``I`` (stdin; an empty one is its end) and ``W``
(``"ROWS COLS"``); berthd answers ``O`` (stdout), ``R`` (stderr) and
last ``X`` (the exit, JSON) or ``F`` (the guest broke off, JSON).
"""
from __future__ import annotations

import base64
import http.client
import json
import struct
import threading
from typing import (TYPE_CHECKING, Any, BinaryIO, Dict, Iterable, Iterator,
                    List, Optional, Tuple, Union)

from .client import Response
from .errors import APIError, ConnectionError, ProtocolError

if TYPE_CHECKING:
    from .sandbox import Sandbox

HDR = struct.Struct(">IB")
#: stdin bytes in one I frame at most (berthd's limit)
STDIN_FRAME = 32 * 1024

Stdin = Union[None, bytes, str, BinaryIO, Iterable[bytes]]


def decode_stream(doc: Dict[str, Any], key: str) -> bytes:
    """stdout or stderr of a buffered exec's answer, as bytes (text, or
    base64 when ``<key>_encoding`` says so)."""
    v = doc.get(key)
    if v is None:
        return b""
    if doc.get(key + "_encoding") == "base64":
        return base64.b64decode(v)
    return str(v).encode("utf-8")


class ExecResult:
    """A command's end: ``exit_code`` (None when a signal ended it),
    ``signal``, ``timed_out``, ``stdout`` and ``stderr`` (bytes; empty
    for a streamed exec, whose output came as it was written),
    ``truncated`` (a buffered exec's output was over 4 MiB a stream),
    ``wake_ms`` and ``duration_ms``."""

    def __init__(self, doc: Dict[str, Any], stdout: bytes = b"",
                 stderr: bytes = b"") -> None:
        self.exit_code: Optional[int] = doc.get("exit_code")
        self.signal: Optional[int] = doc.get("signal")
        self.timed_out: bool = bool(doc.get("timed_out"))
        self.truncated: bool = bool(doc.get("truncated"))
        self.wake_ms: int = int(doc.get("wake_ms") or 0)
        self.duration_ms: int = int(doc.get("duration_ms") or 0)
        self.stdout = stdout
        self.stderr = stderr
        self.raw = doc

    @property
    def text(self) -> str:
        """stdout as text (UTF-8, undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """It exited with status 0."""
        return self.exit_code == 0

    @property
    def status(self) -> int:
        """As a shell has it: the exit code, or 128 + the signal."""
        if self.exit_code is not None:
            return self.exit_code
        return 128 + (self.signal or 0)

    def __repr__(self) -> str:
        how = "exit_code=%s" % self.exit_code if self.exit_code is not None \
            else "signal=%s" % self.signal
        return "ExecResult(%s, stdout=%d bytes, stderr=%d bytes)" % (
            how, len(self.stdout), len(self.stderr))


class ExecFailed(APIError):
    """The guest broke off a streamed command (an ``F`` frame)."""


def _frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One frame as one chunk of the chunked request body."""
    f = HDR.pack(len(payload), kind[0]) + payload
    return b"%x\r\n%s\r\n" % (len(f), f)


class ExecStream:
    """A streamed command (or an attach to a process): iterate it for
    ``("stdout", bytes)`` and ``("stderr", bytes)`` as the command writes
    them, and last ``("exit", ExecResult)``; ``result`` then holds the
    end. ``write()`` sends stdin, ``close_stdin()`` ends it, ``resize()``
    changes a terminal's size. Give ``stdin=`` to the call instead and a
    thread sends it (bytes, a file object read in pieces, or an iterable
    of bytes), then its end. ``close()`` drops the connection: a
    command still running is killed, an attach detaches."""

    def __init__(self, resp: Response, conn: http.client.HTTPConnection
                 ) -> None:
        self._resp = resp
        self._conn = conn
        self._wlock = threading.Lock()
        self._stdin_closed = False
        self._feeder: Optional[threading.Thread] = None
        self.feed_error: Optional[BaseException] = None
        self.result: Optional[ExecResult] = None
        self.wake_ms = int(resp.headers.get("Berth-Wake-Ms") or 0)

    # ---- the request side ----

    def _send(self, data: bytes) -> None:
        with self._wlock:
            try:
                self._conn.send(data)
            except OSError as e:
                # the command ended and berthd closed: its answer is
                # still to be read
                raise ConnectionError("sending to the command: %s" % e
                                      ) from e

    def write(self, data: Union[bytes, str]) -> None:
        """Sends bytes to the command's stdin."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self._stdin_closed:
            raise ValueError("stdin is closed")
        for i in range(0, len(data), STDIN_FRAME):
            self._send(_frame(b"I", data[i:i + STDIN_FRAME]))

    def close_stdin(self) -> None:
        """Ends stdin (the command reads EOF; on a terminal ^D; an
        attach detaches)."""
        if not self._stdin_closed:
            self._stdin_closed = True
            self._send(_frame(b"I"))

    def resize(self, rows: int, cols: int) -> None:
        """A terminal's new size."""
        self._send(_frame(b"W", b"%d %d" % (rows, cols)))

    def _feed(self, stdin: Stdin) -> None:
        """Sends stdin (in a thread), then its end."""
        try:
            if isinstance(stdin, (bytes, bytearray, memoryview)):
                self.write(bytes(stdin))
            elif isinstance(stdin, str):
                self.write(stdin.encode("utf-8"))
            elif hasattr(stdin, "read"):
                while True:
                    b = stdin.read(STDIN_FRAME)  # type: ignore[union-attr]
                    if not b:
                        break
                    self.write(b)
            elif stdin is not None:
                for b in stdin:
                    self.write(b)
            self.close_stdin()
        except (ConnectionError, ValueError, OSError) as e:
            self.feed_error = e

    def feed(self, stdin: Stdin) -> None:
        """Starts a thread sending stdin (then its end)."""
        self._feeder = threading.Thread(target=self._feed, args=(stdin,),
                                        daemon=True, name="berth-stdin")
        self._feeder.start()

    # ---- the answer ----

    def _read_exact(self, n: int) -> bytes:
        b = self._resp.read(n) if n else b""
        if len(b) != n:
            self.close()
            raise ConnectionError("berthd ended the answer without the "
                                  "command's end")
        return b

    def frames(self) -> Iterator[Tuple[int, bytes]]:
        """(type, payload) of each answer frame, to the last."""
        while self.result is None:
            ln, kind = HDR.unpack(self._read_exact(HDR.size))
            yield kind, self._read_exact(ln)

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        # (a loop left with break leaves the stream open: iterating
        # again goes on where it stopped; close() or the end closes it)
        for kind, payload in self.frames():
            if kind == ord("O"):
                yield "stdout", payload
            elif kind == ord("R"):
                yield "stderr", payload
            elif kind == ord("X"):
                self.result = ExecResult(json.loads(payload))
                self.close()
                yield "exit", self.result
            elif kind == ord("F"):
                doc = json.loads(payload or b"{}")
                st = int(doc.get("status") or 500)
                self.close()
                raise ExecFailed(st, None, str(doc.get("message") or
                                               "the command failed"))

    def wait(self) -> ExecResult:
        """Reads to the end; output not iterated yet is collected into
        the result's stdout and stderr."""
        out: List[bytes] = []
        err: List[bytes] = []
        for kind, data in self:
            if kind == "stdout":
                out.append(data)
            elif kind == "stderr":
                err.append(data)
        if self.result is None:
            raise ProtocolError("the stream ended without an exit")
        self.result.stdout += b"".join(out)
        self.result.stderr += b"".join(err)
        return self.result

    def close(self) -> None:
        self._resp.close()
        self._conn.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Process:
    """A detached command of a sandbox (``exec(..., detach=True)``),
    by its number."""

    def __init__(self, sandbox: "Sandbox", n: int,
                 doc: Optional[Dict[str, Any]] = None) -> None:
        self.sandbox = sandbox
        self.n = n
        self.pid: Optional[int] = (doc or {}).get("pid")

    def __repr__(self) -> str:
        return "Process(%s, %d)" % (self.sandbox.id, self.n)

    def info(self) -> Dict[str, Any]:
        """``process``, ``pid``, ``state`` (running, exited),
        ``exit_code`` or ``signal``, ``output_bytes``, ``command``..."""
        return self.sandbox.processes.get(self.n)

    def logs(self, offset: int = 0) -> Dict[str, Any]:
        return self.sandbox.processes.logs(self.n, offset)

    def follow(self, offset: int = 0) -> Iterator[bytes]:
        return self.sandbox.processes.follow(self.n, offset)

    def kill(self, signal: Union[str, int] = "TERM") -> Dict[str, Any]:
        return self.sandbox.processes.kill(self.n, signal)

    def wait(self) -> Dict[str, Any]:
        return self.sandbox.processes.wait(self.n)

    def attach(self, **kw: Any) -> ExecStream:
        return self.sandbox.processes.attach(self.n, **kw)


class Processes:
    """``sb.processes``: the sandbox's detached commands."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _path(self, *rest: str) -> str:
        return "/".join((self._sb._path, "processes") + rest)

    def list(self) -> List[Dict[str, Any]]:
        doc = self._sb.client.call("GET", self._path())
        return list(doc.get("processes") or [])

    def get(self, n: int) -> Dict[str, Any]:
        return self._sb.client.call(  # type: ignore[no-any-return]
            "GET", self._path(str(n)))

    def logs(self, n: int, offset: int = 0) -> Dict[str, Any]:
        """What the ring holds from byte ``offset`` of all it wrote:
        ``output`` (bytes, decoded here), ``first``, ``total``,
        ``next_offset``, ``lost``, and the process's state."""
        doc = self._sb.client.call("GET", self._path(str(n), "logs"),
                                   {"offset": offset})
        doc["output"] = decode_stream(doc, "output")
        return doc  # type: ignore[no-any-return]

    def follow(self, n: int, offset: int = 0) -> Iterator[bytes]:
        """Its output as it comes, from ``offset`` to the process's end."""
        r = self._sb.client.request("GET", self._path(str(n), "logs"),
                                    {"offset": offset, "follow": 1},
                                    timeout=None, stream=True)
        try:
            while True:
                b = r.read1(65536)
                if not b:
                    return
                yield b
        finally:
            r.close()

    def kill(self, n: int, signal: Union[str, int] = "TERM"
             ) -> Dict[str, Any]:
        """Signals its process group (a number or TERM, KILL, INT...)."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "POST", self._path(str(n), "kill"), json_body={"signal": signal})

    def wait(self, n: int) -> Dict[str, Any]:
        """Answers when it has ended: its state, exit_code or signal."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "POST", self._path(str(n), "wait"), timeout=None)

    def attach(self, n: int, rows: Optional[int] = None,
               cols: Optional[int] = None, offset: Optional[int] = None,
               stdin: Stdin = None) -> ExecStream:
        """A client of a process started on a terminal: its output (the
        ring from ``offset``, then as it comes), keys with ``write``;
        ``close_stdin()`` (or ``close()``) detaches, and the exit frame
        then says ``detached``."""
        j: Dict[str, Any] = {}
        for k, v in (("rows", rows), ("cols", cols), ("offset", offset)):
            if v is not None:
                j[k] = v
        return self._sb._stream(self._path(str(n), "attach"), {}, j, stdin,
                                keep_stdin=True)
