# SPDX-License-Identifier: GPL-2.0-or-later
"""berth.admin — the control API outside sandboxes: guest templates
(``client.templates``), access tokens (``client.tokens``) and fleet
mode's views (``client.fleet``). Every call is one request of the API
(proxy/api/table.c); all of them need an admin (the unix socket, or an
admin token) except a token's rotation, which a sandbox's token may do
to itself.

A template build from a Dockerfile POSTs the build context as a tar,
made here as it is sent (:func:`tar_directory`: headers by the standard
library's ``tarfile``, each file read a block at a time), as ``netctl
template build --dockerfile`` does with ``tar -C DIR -cf - .``; from an
image the archive is sent as it is. The build then runs on in berthd:
:class:`TemplateBuild` follows its progress lines (``GET
.../build?after=N``) until it ends.
"""
from __future__ import annotations

import json
import os
import stat
import tarfile
import time
import urllib.parse
from typing import (TYPE_CHECKING, Any, BinaryIO, Callable, Dict, Iterator,
                    List, Mapping, Optional, Sequence, Tuple, Union)

from .errors import BerthError, ProtocolError

if TYPE_CHECKING:
    from .client import Client

#: bytes of a context's file read (and sent) at a time
BLOCK = 256 * 1024

#: a build's source: a path (a directory is a Dockerfile's context, made
#: a tar here; a file is sent as it is), bytes, or a binary file object
Source = Union[str, "os.PathLike[str]", bytes, BinaryIO]


class TemplateBuildFailed(BerthError):
    """A template build ended other than "ok": ``reason`` says why (the
    builder's last words), ``log`` is the whole log's path on berthd's
    host, ``status`` the build's last state as berthd gave it."""

    def __init__(self, name: str, status: Dict[str, Any]) -> None:
        self.name = name
        self.status = status
        self.state = str(status.get("state") or "")
        self.reason = status.get("reason")
        self.log = status.get("log")
        super().__init__("template %s: build %s: %s%s" % (
            name, self.state or "ended", self.reason or "no reason given",
            " (its whole log: %s)" % self.log if self.log else ""))


def _seg(s: str) -> str:
    """A path segment, percent-encoded (names berthd accepts are left
    as they are: it takes a build's source only on a plain path)."""
    return urllib.parse.quote(s, safe="")


# ---- a directory as a tar, streamed ----

def _tarinfo(full: str, arcname: str) -> Optional[tarfile.TarInfo]:
    """The tar header of one entry (lstat: a link is kept a link);
    None for what tar leaves out here (sockets, devices, fifos)."""
    st = os.lstat(full)
    ti = tarfile.TarInfo(arcname)
    ti.mode = stat.S_IMODE(st.st_mode)
    ti.mtime = int(st.st_mtime)
    ti.uid, ti.gid = st.st_uid, st.st_gid
    if stat.S_ISREG(st.st_mode):
        ti.type, ti.size = tarfile.REGTYPE, st.st_size
    elif stat.S_ISDIR(st.st_mode):
        ti.type = tarfile.DIRTYPE
    elif stat.S_ISLNK(st.st_mode):
        ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink(full)
    else:
        return None
    return ti


def _walk(top: str, arc: str) -> Iterator[Tuple[str, str]]:
    """(path, name in the tar) of top and everything under it, a
    directory before what it holds, names sorted (the same tree makes
    the same tar: berthd's cache of builds goes by its sha256)."""
    yield top, arc
    if os.path.isdir(top) and not os.path.islink(top):
        try:
            names = sorted(os.listdir(top))
        except OSError as e:
            raise BerthError("build context: %s" % e) from e
        for name in names:
            yield from _walk(os.path.join(top, name), arc + "/" + name)


def _file_blocks(path: str, size: int, block: int) -> Iterator[bytes]:
    """size bytes of a file, a block at a time. What cannot be read is a
    BerthError (not an OSError: a request's body failing must not look
    like its connection failing)."""
    left = size
    try:
        with open(path, "rb") as f:
            while left > 0:
                b = f.read(min(block, left))
                if not b:
                    raise BerthError("%s: shrank while it was read "
                                     "(%d bytes missing)" % (path, left))
                left -= len(b)
                yield b
    except OSError as e:
        raise BerthError("build context: %s" % e) from e


def tar_directory(path: Union[str, "os.PathLike[str]"],
                  block: int = BLOCK) -> Iterator[bytes]:
    """The tree under path as a tar, as ``tar -C path -cf - .`` makes it
    (names ``./...``, pax headers where ustar's fields are too small),
    yielded as it is made: a header, then the file's blocks as they are
    read. Memory stays bounded whatever the tree's size. A file that
    cannot be read, or shrinks while it is read, raises
    :class:`BerthError` (a request it is the body of is then broken
    off: berthd builds nothing from part of a context). Sockets, fifos
    and devices are left out."""
    top = os.fspath(path)
    if not os.path.isdir(top):
        raise BerthError("%s: not a directory (a build context)" % top)
    out = 0
    for full, arc in _walk(top, "."):
        try:
            ti = _tarinfo(full, arc)
        except OSError as e:
            raise BerthError("build context: %s" % e) from e
        if ti is None:
            continue
        head = ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        yield head
        out += len(head)
        if ti.type != tarfile.REGTYPE:
            continue
        yield from _file_blocks(full, ti.size, block)
        pad = -ti.size % tarfile.BLOCKSIZE
        if pad:
            yield b"\0" * pad
        out += ti.size + pad
    # the end: two zero blocks, the whole a multiple of a record
    end = 2 * tarfile.BLOCKSIZE
    end += -(out + end) % tarfile.RECORDSIZE
    yield b"\0" * end


def _body(src: Source, tar_dir: bool) -> Tuple[Any, Optional[BinaryIO]]:
    """What the request sends of a source, and a file to close after."""
    if isinstance(src, (bytes, bytearray)):
        return bytes(src), None
    if isinstance(src, (str, os.PathLike)):
        p = os.fspath(src)
        if os.path.isdir(p):
            if not tar_dir:
                raise BerthError("%s: a directory, not an image archive "
                                 "(docker save, or an OCI layout tarball)"
                                 % p)
            return tar_directory(p), None
        f = open(p, "rb")
        return f, f
    return src, None        # a file object, read a block at a time


# ---- a build followed ----

class TemplateBuild:
    """A template build berthd runs: iterate it for its progress lines
    as they come (polled every ``poll`` seconds until the build ends),
    then ``state`` ("ok" or "failed") and ``status`` (the last answer:
    ``dir`` of the new version, ``reason``, ``log``, ``seconds``).
    ``wait()`` follows it to the end and raises
    :class:`TemplateBuildFailed` unless it built."""

    def __init__(self, templates: "Templates", name: str,
                 status: Dict[str, Any], poll: float = 0.5) -> None:
        self._t = templates
        self.name = name
        self.status = status
        self.poll = poll
        self._pending: List[str] = list(status.get("lines") or [])

    @property
    def state(self) -> str:
        """running, ok or failed"""
        return str(self.status.get("state") or "")

    @property
    def done(self) -> bool:
        return self.state != "running"

    def __repr__(self) -> str:
        return "TemplateBuild(%r, state=%r)" % (self.name, self.state)

    def lines(self) -> Iterator[str]:
        """Its progress lines from where it was left, until it ends."""
        while True:
            while self._pending:
                yield self._pending.pop(0)
            if self.done:
                return
            time.sleep(self.poll)
            self.status = self._t.build_status(
                self.name, after=int(self.status.get("next") or 0))
            self._pending = list(self.status.get("lines") or [])

    def __iter__(self) -> Iterator[str]:
        return self.lines()

    def wait(self, on_line: Optional[Callable[[str], Any]] = None
             ) -> Dict[str, Any]:
        """Follows it to its end (each line given to ``on_line``): its
        last status, whose ``dir`` is the new version; a build that
        failed raises :class:`TemplateBuildFailed`."""
        for line in self.lines():
            if on_line is not None:
                on_line(line)
        if self.state != "ok":
            raise TemplateBuildFailed(self.name, self.status)
        return self.status


class Templates:
    """``client.templates``: the guest templates sandboxes are made of
    (admin)."""

    def __init__(self, client: "Client") -> None:
        self._c = client

    def list(self) -> List[Dict[str, Any]]:
        """Every template, "default" (the built-in one) among them:
        ``name``, ``dir``, ``builtin``, ``created``, ``sandboxes`` (how
        many use it), ``version``, ``size``, ``source`` (``{"from":
        "dockerfile"|"image"|"debian"|"minimal"|"dir", ...}``)."""
        return self._c.pages("/v1/templates", "templates")

    def show(self, name: str) -> Dict[str, Any]:
        """One template (NotFound if there is none of that name)."""
        return self._c.call(  # type: ignore[no-any-return]
            "GET", "/v1/templates/" + _seg(name))

    def add(self, name: str, dir: Union[str, "os.PathLike[str]"]
            ) -> Dict[str, Any]:
        """Registers a template directory (on berthd's host; a relative
        path is made absolute here, as netctl does) under name. berthd
        checks that it loads (BadRequest on ``dir`` if not)."""
        return self._c.call(  # type: ignore[no-any-return]
            "POST", "/v1/templates",
            json_body={"name": name, "dir": os.path.abspath(dir)})

    def remove(self, name: str) -> None:
        """Forgets a template name (Conflict while a sandbox uses it);
        berthd removes the files of a template it built."""
        self._c.call("DELETE", "/v1/templates/" + _seg(name))

    def build_status(self, name: str, after: int = 0) -> Dict[str, Any]:
        """The build of name since berthd started: ``state`` (running, ok,
        failed), ``lines`` (its progress from line ``after`` on),
        ``next`` (where the next call goes on from), ``reason``, ``dir``,
        ``log``, ``seconds``. NotFound when there was none."""
        return self._c.call(  # type: ignore[no-any-return]
            "GET", "/v1/templates/%s/build" % _seg(name), {"after": after})

    def build(self, name: str, dockerfile: Optional[Source] = None,
              image: Optional[Source] = None, file: Optional[str] = None,
              build_args: Union[None, Mapping[str, str],
                                Sequence[str]] = None,
              poll: float = 0.5) -> TemplateBuild:
        """Starts a build of template name and returns it, running
        (iterate it for its lines, or ``wait()``).

        Without a source, name is one of berth's own builders (debian,
        minimal). ``dockerfile``: the build context, a directory (sent
        as a tar made while it is sent), or a tar of it (a path, bytes
        or a binary file object); ``file``: the Dockerfile's path in the
        context; ``build_args``: {"K": "V"} or ["K=V"]. ``image``: a
        ``docker save`` archive or an OCI layout tarball (a path, bytes
        or a file object). The source is streamed; berthd answers once
        it has it all (a build from the same source as before may be
        done at once)."""
        if dockerfile is not None and image is not None:
            raise ValueError("dockerfile or image, not both")
        if dockerfile is None and (file is not None or build_args):
            raise ValueError("file and build_args go with dockerfile")
        path = "/v1/templates/%s/build" % _seg(name)
        if dockerfile is None and image is None:
            doc = self._c.call("POST", path)
            return TemplateBuild(self, name, doc, poll)
        q: List[Tuple[str, str]] = [
            ("from", "dockerfile" if dockerfile is not None else "image")]
        if file is not None:
            q.append(("file", file))
        if isinstance(build_args, Mapping):
            q.extend(("build_arg", "%s=%s" % kv) for kv in build_args.items())
        elif build_args:
            q.extend(("build_arg", a) for a in build_args)
        target = path + "?" + urllib.parse.urlencode(
            q, quote_via=urllib.parse.quote, safe="")
        src = dockerfile if dockerfile is not None else image
        assert src is not None
        data, opened = _body(src, dockerfile is not None)
        ctype = "application/x-tar" if dockerfile is not None else \
            "application/octet-stream"
        try:
            # the answer comes once the source is all there (spooled);
            # berthd closes a streamed request's connection after it
            with self._c.request("POST", target, body=data,
                                 headers={"Content-Type": ctype},
                                 timeout=None, stream=True) as r:
                doc = _json(r.read(), target)
        finally:
            if opened is not None:
                opened.close()
        return TemplateBuild(self, name, doc, poll)

    def build_and_wait(self, name: str,
                       on_line: Optional[Callable[[str], Any]] = None,
                       **source: Any) -> Dict[str, Any]:
        """:meth:`build` (its arguments) followed to its end: the last
        status (``dir``: the new version), or TemplateBuildFailed."""
        return self.build(name, **source).wait(on_line)


def _json(text: bytes, what: str) -> Dict[str, Any]:
    try:
        doc = json.loads(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError("POST %s: the answer is not JSON: %r" %
                            (what, text[:200])) from e
    return doc  # type: ignore[no-any-return]


# ---- tokens ----

class Tokens:
    """``client.tokens``: access tokens of the TCP control listener. A
    token's secret is shown once: by :meth:`create` and :meth:`rotate`
    (``"token"``); the other calls give its ``id``, ``admin``,
    ``sandbox``, ``name`` and ``created``."""

    def __init__(self, client: "Client") -> None:
        self._c = client

    def list(self, sandbox: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every token (of that sandbox only, when given)."""
        return self._c.pages("/v1/tokens", "tokens", {"sandbox": sandbox})

    def show(self, id: str) -> Dict[str, Any]:
        """One token, by its id (tok-...)."""
        return self._c.call(  # type: ignore[no-any-return]
            "GET", "/v1/tokens/" + _seg(id))

    def create(self, admin: bool = False, sandbox: Optional[str] = None,
               name: Optional[str] = None) -> Dict[str, Any]:
        """A new token, admin or of one sandbox (one of the two): its
        secret is in ``"token"``, shown only now."""
        body: Dict[str, Any] = {}
        if admin:
            body["admin"] = True
        if sandbox is not None:
            body["sandbox"] = sandbox
        if name is not None:
            body["name"] = name
        return self._c.call(  # type: ignore[no-any-return]
            "POST", "/v1/tokens", json_body=body)

    def rotate(self, id: str) -> Dict[str, Any]:
        """A new secret for the token (in ``"token"``); the old one stops
        working at once. A sandbox's token may rotate itself."""
        return self._c.call(  # type: ignore[no-any-return]
            "POST", "/v1/tokens/%s/rotate" % _seg(id))

    def revoke(self, id: str) -> None:
        """The token works no more."""
        self._c.call("DELETE", "/v1/tokens/" + _seg(id))


# ---- fleet mode ----

class Fleet:
    """``client.fleet``: fleet mode's views of the hosts sharing one
    etcd, and this host's drain. On a berthd not in fleet mode each call
    raises NotFound. (A sandbox moves with ``Sandbox.move``.)"""

    def __init__(self, client: "Client") -> None:
        self._c = client

    def hosts(self) -> Dict[str, Any]:
        """``self`` (this host's id), ``etcd`` ("ok" or "unreachable"),
        ``drained``, and ``hosts``: each ``id``, ``up``, ``self``,
        ``drained``, ``sandboxes``, ``capacity``, ``zone``, ``room``,
        ``edge``, ``fleet``; lost hosts (placement but no lease) are
        there with ``up`` false."""
        return self._c.call("GET", "/v1/fleet/hosts")  # type: ignore

    def sandboxes(self) -> Dict[str, Any]:
        """``self`` and ``sandboxes``: every sandbox of the fleet with
        the ``host`` it is placed on, its ``state``, ``host_up`` and
        ``ports``."""
        return self._c.call("GET", "/v1/fleet/sandboxes")  # type: ignore

    def drain(self, host: Optional[str] = None, move: bool = True,
              wait: bool = False, poll: float = 0.5) -> Dict[str, Any]:
        """This host is placed on no more (kept across restarts) and,
        with ``move`` (the default), its VM-backed sandboxes move to
        other hosts, one at a time (where placement puts their template;
        one that cannot move stays). ``host``, if given, must be this
        host's id (Conflict otherwise: drain a host through its own
        API). The answer: ``host``, ``drained``, ``move`` (null when
        nothing moves, else the progress as :meth:`drain_status` gives
        it). ``wait``: the moves followed to their end (polled every
        ``poll`` s), the last status returned; those that failed are in
        its ``move["failed"]``."""
        body: Dict[str, Any] = {} if host is None else {"host": host}
        if not move:
            body["move"] = False
        doc: Dict[str, Any] = self._c.call("POST", "/v1/fleet/drain",
                                           json_body=body)
        while wait and isinstance(doc.get("move"), dict) and \
                doc["move"].get("state") == "moving":
            time.sleep(poll)
            doc = self.drain_status()
        return doc

    def drain_status(self) -> Dict[str, Any]:
        """``host``, ``drained`` and ``move``: the last drain's moves
        (``state`` moving, done or stopped; ``total``, ``moved`` [{id,
        to, ms}], ``failed`` [{id, error}], ``left``, ``current``), or
        null when none ran since berthd started."""
        return self._c.call(  # type: ignore[no-any-return]
            "GET", "/v1/fleet/drain")

    def undrain(self, host: Optional[str] = None) -> Dict[str, Any]:
        """This host is placed on again; a drain's moves stop after the
        one under way."""
        body: Dict[str, Any] = {} if host is None else {"host": host}
        return self._c.call(  # type: ignore[no-any-return]
            "POST", "/v1/fleet/undrain", json_body=body)


__all__ = ["Fleet", "TemplateBuild", "TemplateBuildFailed", "Templates",
           "Tokens", "tar_directory"]
