# SPDX-License-Identifier: GPL-2.0-or-later
"""berth.sandbox — a sandbox: made, found, run in, changed, removed.

A :class:`Sandbox` is a handle: its ``id``, the :class:`Client` it
talks through, and (after ``create`` or ``fork``) its own ``token``,
which berthd shows only then. ``info()`` asks berthd for its state now.
"""
from __future__ import annotations

import base64
import http.client
import json
import secrets
import threading
import time
import urllib.parse
from typing import (Any, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Union)

from .client import Client, Response
from .errors import (BerthError, ConnectionError, Forbidden, NotFound,
                     ProtocolError, api_error)
from .execs import (ExecResult, ExecStream, Process, Processes, Stdin,
                    _frame, decode_stream)
from .files import Egress, Files, Ports, _duration

#: stdin a buffered exec carries in its JSON at most (the API's 64 KiB
#: body, base64); more, or a file object, goes the streamed way
BUFFERED_STDIN_MAX = 48 * 1024

Argv = Union[str, Sequence[str]]
Duration = Union[None, int, float, str]

_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The Client of calls given none: made once, from the environment
    (BERTH_URL + BERTH_TOKEN + BERTH_CACERT, or BERTH_SOCKET)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


class SandboxError(BerthError):
    """A sandbox did not reach the state asked for (a create that
    failed, one still creating after the wait)."""

    def __init__(self, message: str, state: Optional[str] = None) -> None:
        super().__init__(message)
        self.state = state
        #: the sandbox, when a create made it (remove it, or ask why)
        self.sandbox: Optional["Sandbox"] = None


def _argv(cmd: Argv) -> List[str]:
    """A string runs with ``sh -c``; a sequence is the argv itself."""
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    argv = list(cmd)
    if not argv:
        raise ValueError("an empty command")
    return argv


class Sandbox:
    """A sandbox of berthd's. Made by :meth:`create`, :meth:`get`,
    :meth:`list` or :meth:`fork`; ``with Sandbox.create(...) as sb:``
    removes it at the block's end."""

    def __init__(self, id: str, client: Optional[Client] = None,
                 info: Optional[Dict[str, Any]] = None,
                 token: Optional[str] = None) -> None:
        self.id = id
        self.client = client or default_client()
        #: its own token (from create or fork), else None
        self.token = token
        self._info: Dict[str, Any] = dict(info or {})
        #: that token's id (tok-..., for client.tokens), else None
        self.token_id: Optional[str] = self._info.get("token_id") \
            if token else None
        self._path = "/v1/sandboxes/" + id
        self.files = Files(self)
        self.processes = Processes(self)
        self.ports = Ports(self)
        self.egress = Egress(self)

    def __repr__(self) -> str:
        return "Sandbox(%r, state=%r)" % (self.id, self._info.get("state"))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.remove()
        except NotFound:
            pass

    # ---- made, found, removed ----

    @classmethod
    def create(cls, client: Optional[Client] = None, id: Optional[str] = None,
               template: Optional[str] = None,
               memory_mib: Optional[int] = None,
               vcpus: Optional[int] = None, disk_mib: Optional[int] = None,
               env: Optional[Mapping[str, str]] = None,
               idle_pause: Duration = None, idle_suspend: Duration = None,
               publish_exposed: bool = False,
               address: Optional[str] = None,
               max_lifetime: Duration = None,
               egress_mode: Optional[str] = None,
               host: Optional[str] = None, zone: Optional[str] = None,
               wait: Optional[float] = 300.0) -> "Sandbox":
        """Creates a sandbox: a microVM (waits until it runs, as netctl
        does; ``wait`` seconds at most, None: no waiting), or with
        ``address`` an external one. ``id``: its name, else a random
        ``sb-...``. Durations: "90s", "10m", "never", or seconds.

        Fleet mode: berthd places it on the host with the most room, or
        on ``host`` / in ``zone``; ``.host`` says where it went
        (``.info_cached()["placement_failed"]``: what refused first).
        One placed on another host is waited for through the fleet's
        view; the other calls go to that host's own API."""
        client = client or default_client()
        if id is None:
            id = "sb-" + secrets.token_hex(4)
        body: Dict[str, Any] = {"id": id}
        for k, v in (("template", template), ("memory_mib", memory_mib),
                     ("vcpus", vcpus), ("disk_mib", disk_mib),
                     ("idle_pause", _duration(idle_pause)),
                     ("idle_suspend", _duration(idle_suspend)),
                     ("max_lifetime", _duration(max_lifetime)),
                     ("address", address), ("egress_mode", egress_mode),
                     ("host", host), ("zone", zone)):
            if v is not None:
                body[k] = v
        if env is not None:
            body["env"] = dict(env)
        if publish_exposed:
            body["publish_exposed"] = True
        doc = client.call("POST", "/v1/sandboxes", json_body=body)
        sb = cls(id, client, doc, doc.get("token"))
        if address is None and wait is not None:
            try:
                if doc.get("remote"):
                    sb._wait_placed(wait)
                else:
                    sb.wait_running(wait)
            except SandboxError as e:
                e.sandbox = sb      # still there: its events say why
                raise
        return sb

    @classmethod
    def get(cls, id: str, client: Optional[Client] = None) -> "Sandbox":
        """The sandbox of that id (NotFound if there is none)."""
        client = client or default_client()
        doc = client.call("GET", "/v1/sandboxes/" + id)
        return cls(id, client, doc)

    @classmethod
    def list(cls, client: Optional[Client] = None) -> List["Sandbox"]:
        """Every sandbox (an admin's call)."""
        client = client or default_client()
        return [cls(d["id"], client, d) for d in
                client.pages("/v1/sandboxes", "sandboxes")]

    def info(self) -> Dict[str, Any]:
        """What berthd says of it now: ``state``, ``address``,
        ``template``, sizes, idle limits, ``vm``..."""
        self._info = self.client.call("GET", self._path)
        return self._info

    @property
    def state(self) -> Optional[str]:
        """Its state when last seen (``info()`` asks again)."""
        return self._info.get("state")

    def wait_running(self, timeout: float = 300.0) -> "Sandbox":
        """Waits while it is being created; SandboxError unless it then
        runs."""
        end = time.monotonic() + timeout
        while True:
            st = self.info().get("state")
            if st != "creating":
                if st == "running":
                    return self
                raise SandboxError("sandbox %s is %s (see its events)" %
                                   (self.id, st), st)
            if time.monotonic() > end:
                raise SandboxError("sandbox %s is still being created" %
                                   self.id, st)
            time.sleep(0.25)

    @property
    def host(self) -> Optional[str]:
        """Fleet mode: the host it was placed on, as the create said."""
        h = self._info.get("host")
        return h if isinstance(h, str) else None

    def _wait_placed(self, timeout: float) -> None:
        """A create placed on another fleet host: waits until the
        fleet's view (etcd) has it out of "creating" there."""
        end = time.monotonic() + timeout
        while True:
            st = None
            for s in self.client.call("GET", "/v1/fleet/sandboxes").get(
                    "sandboxes", []):
                if s.get("id") == self.id and s.get("host") == self.host:
                    st = s.get("state")
            if st is not None and st != "creating":
                self._info["state"] = st
                if st == "running":
                    return
                raise SandboxError("sandbox %s is %s on host %s (see its "
                                   "events there)" % (self.id, st,
                                                      self.host), st)
            if time.monotonic() > end:
                raise SandboxError("sandbox %s is still being created on "
                                   "host %s" % (self.id, self.host), st)
            time.sleep(0.25)

    def remove(self) -> None:
        """Deletes it (its VM, disk, ports, rules, tokens)."""
        self.client.call("DELETE", self._path, timeout=None)

    def set(self, **fields: Any) -> Dict[str, Any]:
        """PATCH: ``idle_pause``, ``idle_suspend``, ``max_lifetime``
        ("never", None for berth.conf's), ``env`` (None removes it)."""
        body = {k: (_duration(v) if k != "env" else v)
                for k, v in fields.items()}
        self._info = self.client.call("PATCH", self._path, json_body=body)
        return self._info

    def events(self) -> List[Dict[str, Any]]:
        return self.client.pages(self._path + "/events", "events")

    def console(self, from_: Optional[int] = None) -> Dict[str, Any]:
        """Its guest's console as berthd keeps it (``GET .../console``,
        admin): ``size`` (the bytes kept), ``from`` and ``text`` (the
        console from byte ``from_`` of them, at most 1 MiB; without it
        the last 64 KiB; bytes other than printable ASCII, tab and
        newline are "?"). NotFound when it is not a VM of this host,
        BadRequest (field "from") for a bad offset."""
        return self.client.call(  # type: ignore[no-any-return]
            "GET", self._path + "/console", {"from": from_})

    def follow_console(self, from_: Optional[int] = None,
                       interval: float = 0.5) -> Iterator[str]:
        """Its console as it comes (``netctl sandbox console --follow``):
        the last 64 KiB (or from ``from_``), then what was added, asked
        for every ``interval`` seconds; yields each non-empty piece of
        text. When the kept console shrinks (it rotated) it is read
        again from its start. Runs until the caller stops iterating, or
        a call fails (the sandbox removed: NotFound)."""
        nxt = from_
        while True:
            doc = self.console(nxt)
            text = doc.get("text") or ""
            size = int(doc.get("size") or 0)
            if text:
                yield text
            nxt = 0 if nxt is not None and size < nxt else size
            time.sleep(interval)

    # ---- lifecycle ----

    def _op(self, op: str) -> Dict[str, Any]:
        self._info = self.client.call("POST", "%s/%s" % (self._path, op),
                                      timeout=None)
        return self._info

    def pause(self) -> Dict[str, Any]:
        return self._op("pause")

    def suspend(self) -> Dict[str, Any]:
        """Snapshots it to disk (its VMM ends); the next request, exec
        or file transfer wakes it."""
        return self._op("suspend")

    def resume(self) -> Dict[str, Any]:
        return self._op("resume")

    def start(self) -> Dict[str, Any]:
        return self._op("start")

    def stop(self) -> Dict[str, Any]:
        return self._op("stop")

    def restart(self) -> Dict[str, Any]:
        return self._op("restart")

    def move(self, to: str) -> Dict[str, Any]:
        """Fleet mode (admin): moves the sandbox to fleet host ``to``
        (suspended, its files streamed there, resumed there if it ran);
        answered once it ended: ``id``, ``host``, ``move_ms``,
        ``bytes_sent``. It is then that host's: this client's berthd
        routes to it, its own API holds it. Conflict on a berthd not in
        fleet mode or for an external sandbox."""
        return self.client.call(  # type: ignore[no-any-return]
            "POST", self._path + "/move", json_body={"to": to},
            timeout=None)

    # ---- forks and checkpoints ----
    #
    # The snapshots API (proxy/api/table.c): POST .../fork, GET and POST
    # .../checkpoints, DELETE .../checkpoints/NAME, POST .../restore. A
    # sandbox's own token may call each of them on its sandbox. Only a
    # template with a root overlay and a guest agent forks (Debian's,
    # images'): the minimal one answers Conflict, as an external sandbox
    # does.

    def fork(self, ids: Union[str, Sequence[str]],
             checkpoint: Optional[str] = None,
             wait: Optional[float] = 300.0) -> List["Sandbox"]:
        """Forks it into new sandboxes (``POST /v1/sandboxes/ID/fork``):
        one id or a list of 1 to ``vm_max_forks`` (16), each a copy of
        its memory, processes and disk at one instant that then goes its
        own way (writes on either side are not seen by the other), with
        its own identity and its own ``token`` (on the returned handles:
        berthd shows it only now). The source may be running, paused or
        suspended, and runs on (it pauses for milliseconds).

        ``checkpoint``: made from that checkpoint of it instead (``netctl
        sandbox create NEW --from ID:NAME``; the sandbox in any state,
        untouched). ``wait``: seconds to wait for each fork to run (None:
        not waited for; its ``state`` is then "creating").

        The handles talk through this sandbox's client; when that holds
        the sandbox's own token, which may not see its forks, a fork's
        handle gets a client with the fork's own token (see
        :meth:`Client.with_token`).

        Raises NotFound (no such sandbox, or ``checkpoint``: field
        "checkpoint"), BadRequest (field "ids": none, too many, a bad or
        repeated id), Conflict (an id that exists, field "ids"; a
        sandbox that is not a microVM, a template that cannot fork, or
        one stopped), SandboxError (a fork that did not come to run:
        ``e.sandbox`` is that fork)."""
        if isinstance(ids, str):
            ids = [ids]
        body: Dict[str, Any] = {"ids": list(ids)}
        if checkpoint is not None:
            body["checkpoint"] = checkpoint
        doc = self.client.call("POST", self._path + "/fork", json_body=body,
                               timeout=None)
        forks = [Sandbox(f["id"], self.client, f, f.get("token"))
                 for f in doc.get("forks") or []]
        if wait is not None:
            for f in forks:
                try:
                    try:
                        f.wait_running(wait)
                    except Forbidden:
                        if self.client.url is None or not f.token:
                            raise
                        f.client = self.client.with_token(f.token)
                        f.wait_running(wait)
                except SandboxError as e:
                    e.sandbox = f
                    raise
        return forks

    def checkpoint(self, name: str) -> Dict[str, Any]:
        """Takes a checkpoint (``POST /v1/sandboxes/ID/checkpoints``):
        its memory, processes and disk kept under ``name`` (1-40 of a-z,
        0-9 and "-", not first), taken as a fork's capture is (a running
        sandbox pauses for milliseconds and runs on; a paused or
        suspended one stays so). Answers once taken: ``{"sandbox",
        "name", "created", "size_bytes", "detail"}``.

        Raises BadRequest (field "name"), Conflict (field "name": it
        has one of that name already; without a field: it has
        ``vm_max_checkpoints`` (16) already, or it cannot be
        checkpointed: stopped, not a microVM, a template without a root
        overlay), ServiceUnavailable (code "capacity": the host's
        memory or disk refused it)."""
        return self.client.call(  # type: ignore[no-any-return]
            "POST", self._path + "/checkpoints", json_body={"name": name},
            timeout=None)

    def checkpoints(self) -> List[Dict[str, Any]]:
        """Its checkpoints, oldest first (``GET .../checkpoints``): each
        ``{"name", "created", "size_bytes"}``."""
        doc = self.client.call("GET", self._path + "/checkpoints")
        return list(doc.get("checkpoints") or [])

    def remove_checkpoint(self, name: str) -> None:
        """Removes a checkpoint (``DELETE .../checkpoints/NAME``; the
        disk layers only it kept go; sandboxes made from it stay).
        NotFound when it has none of that name."""
        self.client.call("DELETE", self._path + "/checkpoints/" +
                         urllib.parse.quote(name, safe=""))

    def restore(self, name: str) -> Dict[str, Any]:
        """Puts it back to a checkpoint, in place (``POST .../restore``):
        its VMM stops, and it runs again from the checkpoint's memory
        and disk with the same id, address, ports and tokens (files
        written and processes ended since are as they were). Answers
        once it runs: the sandbox, as :meth:`info`. NotFound (field
        "checkpoint") when it has none of that name."""
        self._info = self.client.call(
            "POST", self._path + "/restore", json_body={"checkpoint": name},
            timeout=None)
        return self._info

    # ---- commands ----

    @staticmethod
    def _exec_json(cmd: Argv, env: Optional[Mapping[str, str]],
                   cwd: Optional[str], user: Optional[str],
                   timeout: Duration, tty: Any = None) -> Dict[str, Any]:
        j: Dict[str, Any] = {"argv": _argv(cmd)}
        if env is not None:
            j["env"] = dict(env)
        if cwd is not None:
            j["cwd"] = cwd
        if user is not None:
            j["user"] = user
        if timeout is not None:
            j["timeout"] = _duration(timeout)
        if tty is not None and tty is not False:
            j["tty"] = tty if tty is True else {"rows": tty[0],
                                                "cols": tty[1]}
        return j

    def exec(self, cmd: Argv, stdin: Stdin = None,
             env: Optional[Mapping[str, str]] = None,
             cwd: Optional[str] = None, user: Optional[str] = None,
             timeout: Duration = None, detach: bool = False,
             ring: Optional[int] = None, keep_awake: bool = False,
             tty: Any = None) -> Any:
        """Runs a command (a string: ``sh -c``; a list: the argv) and
        answers its :class:`ExecResult` once it ended. ``stdin``: bytes,
        text, a file object or an iterable of bytes (more than 48 KiB,
        or not bytes, is streamed). ``timeout``: "30s", or seconds
        (default 10m). ``detach=True`` starts it in the background
        (``ring``: bytes of output kept, ``keep_awake``) and answers a
        :class:`Process` at once; with ``tty`` (True or (rows, cols))
        on a terminal, which ``Process.attach()`` is a client of."""
        if tty is not None and not detach:
            raise ValueError("tty: a detached command's, or exec_stream's")
        j = self._exec_json(cmd, env, cwd, user, timeout, tty)
        if detach:
            if stdin is not None:
                raise ValueError("a detached command's stdin is /dev/null")
            j["detach"] = True
            if ring is not None:
                j["ring"] = ring
            if keep_awake:
                j["keep_awake"] = True
            doc = self.client.call("POST", self._path + "/exec", json_body=j)
            return Process(self, int(doc["process"]), doc)
        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        if stdin is None or (isinstance(stdin, bytes) and
                             len(stdin) <= BUFFERED_STDIN_MAX):
            if stdin:
                j["stdin"] = base64.b64encode(stdin).decode("ascii")
            doc = self.client.call("POST", self._path + "/exec", json_body=j,
                                   timeout=None)
            return ExecResult(doc, decode_stream(doc, "stdout"),
                              decode_stream(doc, "stderr"))
        return self.exec_stream(cmd, stdin=stdin, env=env, cwd=cwd,
                                user=user, timeout=timeout).wait()

    def exec_stream(self, cmd: Argv, stdin: Stdin = None,
                    env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None, user: Optional[str] = None,
                    timeout: Duration = None, tty: Any = None,
                    interactive: bool = False) -> ExecStream:
        """Runs a command streamed both ways: iterate the answer for
        ``("stdout"|"stderr", bytes)`` as the command writes, then
        ``("exit", ExecResult)``. ``stdin`` is sent by a thread, then
        its end; without it stdin is empty, unless ``interactive``:
        then ``write()`` and ``close_stdin()`` are the caller's. ``tty``:
        True or (rows, cols) runs it on a terminal. An error before the
        command runs (NotFound, Conflict...) raises here."""
        j = self._exec_json(cmd, env, cwd, user, timeout, tty)
        return self._stream(self._path + "/exec", {"stream": 1}, j, stdin,
                            keep_stdin=interactive)

    def _stream(self, path: str, query: Mapping[str, Any],
                j: Dict[str, Any], stdin: Stdin, keep_stdin: bool
                ) -> ExecStream:
        """A framed exchange at path (exec?stream=1, processes/N/attach)
        on a connection of its own: the J frame, then the answer's head;
        stdin fed by a thread, or closed at once unless keep_stdin."""
        c = self.client
        conn = c._new(None)
        try:
            conn.putrequest("POST", c.target(path, query),
                            skip_accept_encoding=True)
            for k, v in c._headers({
                    "Accept": "application/vnd.berth.exec-stream",
                    "Content-Type": "application/vnd.berth.exec-stream",
                    "Transfer-Encoding": "chunked"}).items():
                conn.putheader(k, v)
            conn.endheaders()
            first = _frame(b"J", json.dumps(j).encode("utf-8"))
            if stdin is None and not keep_stdin:
                first += _frame(b"I")
            try:
                conn.send(first)
            except OSError:
                # berthd may have answered an error (404, 409) and
                # closed before the frame went: that answer is read
                pass
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionError("berthd at %s: %s" % (c._where(), e)) from e
        if resp.status != 200:
            try:
                text = resp.read()
            except (OSError, http.client.HTTPException):
                text = b""
            conn.close()
            raise api_error(resp.status, text, resp.getheader("Retry-After"))
        ctype = resp.getheader("Content-Type") or ""
        if not ctype.startswith("application/vnd.berth.exec-stream"):
            conn.close()
            raise ProtocolError("a streamed exec answered %r" % ctype)
        st = ExecStream(Response(c, conn, resp, False), conn)
        if stdin is not None:
            st.feed(stdin)
        return st

    def run(self, cmd: Argv, **kw: Any) -> ExecResult:
        """exec(), raising BerthError unless the command exits 0."""
        r: ExecResult = self.exec(cmd, **kw)
        if not r.ok:
            raise BerthError("%r in %s: exit %s%s" % (
                cmd, self.id, r.status, ": " + r.stderr_text.strip()[-300:]
                if r.stderr else ""))
        return r
