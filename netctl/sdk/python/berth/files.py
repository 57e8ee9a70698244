# SPDX-License-Identifier: GPL-2.0-or-later
"""berth.files — a sandbox's files (``sb.files``), its published ports
(``sb.ports``) and its egress rules (``sb.egress``).

Files go through berthd to the guest agent: ``PUT .../files?path=``
streams a body of any size into a temporary file beside the path, which
is then renamed over it; ``GET`` streams one back (README "Exec, files
and MCP in the API"). Neither is held whole here: a write reads its file
object a block at a time, a read hands out blocks as they come.
"""
from __future__ import annotations

import json
from typing import (TYPE_CHECKING, Any, BinaryIO, Dict, Iterable, Iterator,
                    List, Optional, Union)

from .client import Response

if TYPE_CHECKING:
    from .sandbox import Sandbox

Mode = Union[None, int, str]


def _mode(mode: Mode) -> Optional[str]:
    """An octal mode as berthd takes it ("0644"), from 0o644 or "644"."""
    if mode is None:
        return None
    if isinstance(mode, int):
        return "%04o" % mode
    return mode


def _duration(d: Union[None, int, float, str]) -> Optional[str]:
    """A duration as berthd takes it: "90s", "10m", "never"; a number
    is seconds."""
    if d is None or isinstance(d, str):
        return d
    return "%ds" % int(d)


class Files:
    """``sb.files``: the guest's files."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox
        self._path = sandbox._path + "/files"

    def read(self, path: str, offset: Optional[int] = None,
             length: Optional[int] = None) -> bytes:
        """The file's bytes (``offset``, ``length``: a range of it)."""
        return b"".join(self.read_stream(path, offset=offset, length=length))

    def read_stream(self, path: str, offset: Optional[int] = None,
                    length: Optional[int] = None,
                    chunk: int = 256 * 1024) -> Iterator[bytes]:
        """The file's bytes as they come, at most ``chunk`` at a time.
        The answer starts before the iteration: a file that is not there
        raises NotFound at the call."""
        r = self._sb.client.request(
            "GET", self._path, {"path": path, "offset": offset,
                                "length": length},
            headers={"Accept": "application/octet-stream"}, timeout=None)
        return self._blocks(r, chunk)

    @staticmethod
    def _blocks(r: Response, chunk: int) -> Iterator[bytes]:
        try:
            while True:
                b = r.read1(chunk)
                if not b:
                    return
                yield b
        finally:
            r.close()

    def download(self, path: str, fileobj: BinaryIO) -> int:
        """Writes the file into fileobj; the bytes written."""
        n = 0
        for b in self.read_stream(path):
            fileobj.write(b)
            n += len(b)
        return n

    def write(self, path: str,
              data: Union[bytes, str, BinaryIO, Iterable[bytes]],
              mode: Mode = None) -> Dict[str, Any]:
        """Writes the file whole (made anew, then renamed over the path):
        ``data`` is bytes, text (UTF-8), a binary file object (read a
        block at a time: memory stays bounded whatever its size) or an
        iterable of bytes. The answer: ``path``, ``size``, ``mode``,
        ``wake_ms``, ``duration_ms``."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        with self._sb.client.request(
                "PUT", self._path, {"path": path, "mode": _mode(mode)},
                body=data, headers={"Content-Type":
                                    "application/octet-stream"},
                timeout=None) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def list(self, path: str, limit: Optional[int] = None
             ) -> List[Dict[str, Any]]:
        """A directory's entries, by name: ``name``, ``type`` (file, dir,
        link...), ``size``, ``mode``, ``mtime``, ``mtime_ms``."""
        doc = self._sb.client.call("GET", self._path,
                                   {"path": path, "list": 1,
                                    "limit": limit})
        return list(doc.get("entries") or [])

    def mkdir(self, path: str, parents: bool = False,
              mode: Mode = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"path": path, "parents": parents}
        if mode is not None:
            body["mode"] = _mode(mode)
        return self._sb.client.call(  # type: ignore[no-any-return]
            "POST", self._path + "/mkdir", json_body=body)

    def remove(self, path: str, recursive: bool = False) -> Dict[str, Any]:
        """Removes a file, a link, or a directory (not empty: needs
        ``recursive``)."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "DELETE", self._path, {"path": path, "recursive": recursive})

    def move(self, src: str, dst: str, overwrite: bool = False
             ) -> Dict[str, Any]:
        """Renames src to dst (an existing dst: Conflict unless
        ``overwrite``)."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "POST", self._path + "/move",
            json_body={"from": src, "to": dst, "overwrite": overwrite})

    def watch(self, path: str, recursive: bool = False) -> "Watch":
        """What happens in a directory, as it happens: iterate it for
        events (dicts: ``event`` ready, create, modify, attrib, delete,
        move_from, move_to, delete_self, overflow, unwatched; ``path``,
        ``dir``, ``cookie``). The first is ``ready`` once the watches are
        in place. ``close()`` ends it."""
        r = self._sb.client.request(
            "GET", self._sb._path + "/watch",
            {"path": path, "recursive": recursive},
            headers={"Accept": "application/x-ndjson"}, timeout=None,
            stream=True)
        return Watch(r)


class Watch:
    """A directory's events, one dict each (see :meth:`Files.watch`)."""

    def __init__(self, r: Response) -> None:
        self._r = r

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        # (a loop left with break leaves the watch open: iterating again
        # goes on; close() or the stream's end closes it)
        while True:
            line = self._r.readline()
            if not line:
                self.close()
                return
            if line.strip():
                yield json.loads(line)

    def close(self) -> None:
        self._r.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Ports:
    """``sb.ports``: the sandbox's ports published as URLs."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox
        self._path = sandbox._path + "/ports"

    def publish(self, port: int, visibility: Optional[str] = None,
                host_header: Optional[str] = None,
                host: Optional[str] = None) -> Dict[str, Any]:
        """Publishes the port: ``visibility`` public (default) or
        private, ``host_header`` preserve or upstream, ``host`` a custom
        name. The answer has its ``url`` (and ``urls``)."""
        body: Dict[str, Any] = {}
        for k, v in (("visibility", visibility),
                     ("host_header", host_header), ("host", host)):
            if v is not None:
                body[k] = v
        return self._sb.client.call(  # type: ignore[no-any-return]
            "PUT", "%s/%d" % (self._path, port), json_body=body)

    def unpublish(self, port: int) -> None:
        self._sb.client.call("DELETE", "%s/%d" % (self._path, port))

    def get(self, port: int) -> Dict[str, Any]:
        return self._sb.client.call(  # type: ignore[no-any-return]
            "GET", "%s/%d" % (self._path, port))

    def list(self) -> List[Dict[str, Any]]:
        return self._sb.client.pages(self._path, "ports")


class Egress:
    """``sb.egress``: the sandbox's egress mode and rules (inside the
    global policy). Rules: ``example.com``, ``*.example.com``,
    ``1.2.3.4``, ``10.1.0.0/16``, ``:443``, ``:8000-8100``, ``/tcp``
    and combinations (``example.com:443/tcp``)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox
        self._path = sandbox._path + "/egress"

    def _add(self, action: str, rule: str,
             ttl: Union[None, int, float, str]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"action": action, "rule": rule}
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        return self._sb.client.call(  # type: ignore[no-any-return]
            "POST", self._path, json_body=body)

    def allow(self, rule: str, ttl: Union[None, int, float, str] = None
              ) -> Dict[str, Any]:
        """Allows a destination (``ttl``: "10m", or seconds; then it
        goes)."""
        return self._add("allow", rule, ttl)

    def deny(self, rule: str, ttl: Union[None, int, float, str] = None
             ) -> Dict[str, Any]:
        return self._add("deny", rule, ttl)

    def remove(self, action: str, rule: str) -> None:
        """Removes one rule ("allow" or "deny", and the rule as given)."""
        from urllib.parse import quote
        self._sb.client.call("DELETE", "%s/%s/%s" % (
            self._path, action, quote(rule, safe="-._*:")))

    def show(self) -> Dict[str, Any]:
        """``mode`` (its own, or None), ``effective_mode``, ``rules``."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "GET", self._path)

    def mode(self, mode: Optional[str]) -> Dict[str, Any]:
        """Sets its mode: open, allowlist, closed; None: the policy's."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "PUT", self._path, json_body={"mode": mode})

    def reset(self) -> None:
        """Back to the global policy's default: its rules and mode go."""
        self._sb.client.call("DELETE", self._path)

    def log(self) -> Dict[str, Any]:
        """Its recent denials: ``available``, ``entries`` (time, source,
        destination, port, protocol, reason, seq)."""
        return self._sb.client.call(  # type: ignore[no-any-return]
            "GET", self._path + "/log")
