# SPDX-License-Identifier: GPL-2.0-or-later
"""berth.client — the connection to berthd's control API.

One :class:`Client` talks HTTP/1.1 to berthd either over its unix socket
(``<state>/control.sock``: admin, no token) or over TCP+TLS
(``control_listen`` in berth.conf) with a bearer token, as netctl does
(netctl/cli_http.c). Plain requests reuse idle keep-alive connections;
streamed ones (exec with ``?stream=1``, file transfers, watches, logs
followed) take a connection of their own for as long as they last.

Settings, first given wins: the arguments, then ``BERTH_URL``,
``BERTH_TOKEN`` and ``BERTH_CACERT``, then ``BERTH_SOCKET``, then
``/var/lib/berth/control.sock``.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import urllib.parse
from typing import (Any, BinaryIO, Dict, Iterable, List, Mapping, Optional,
                    Tuple, Union)

from .admin import Fleet, Templates, Tokens
from .errors import BerthError, ConnectionError, ProtocolError, api_error

DEFAULT_SOCKET = "/var/lib/berth/control.sock"

#: bytes http.client sends of a streamed body at a time (a file upload)
BLOCK = 256 * 1024

Body = Union[None, bytes, BinaryIO, Iterable[bytes]]


class _OneWrite:
    """http.client sends a request's head and its body in two writes:
    berthd then reads twice before it can answer, which cost a buffered
    exec's round trip a fraction of a millisecond (tests/bench/exec). A
    body of bytes up to 64 KiB goes in the head's write here."""

    _buffer: List[bytes]

    def _send_output(self, message_body: Any = None,
                     encode_chunked: bool = False) -> None:
        if isinstance(message_body, bytes) and not encode_chunked and \
                len(message_body) <= 65536 and \
                isinstance(getattr(self, "_buffer", None), list):
            self._buffer.extend((b"", b""))
            msg = b"\r\n".join(self._buffer) + message_body
            del self._buffer[:]
            self.send(msg)  # type: ignore[attr-defined]
            return
        super()._send_output(  # type: ignore[misc]
            message_body, encode_chunked)


class _HTTPConnection(_OneWrite, http.client.HTTPConnection):
    """http.client over TCP, a request in one write."""


class _UnixConnection(_OneWrite, http.client.HTTPConnection):
    """http.client over a unix stream socket."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout, blocksize=BLOCK)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class _TLSConnection(_OneWrite, http.client.HTTPSConnection):
    """http.client over TLS. A host under .localhost is connected to at
    127.0.0.1 (RFC 6761; glibc does not resolve it) and still verified
    under its own name, as netctl does."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext,
                 timeout: Optional[float]) -> None:
        super().__init__(host, port, timeout=timeout, context=ctx,
                         blocksize=BLOCK)
        self._ctx = ctx

    def connect(self) -> None:
        where = self.host
        if where.lower().endswith(".localhost"):
            where = "127.0.0.1"
        raw = socket.create_connection((where, self.port), self.timeout)
        try:
            self.sock = self._ctx.wrap_socket(raw, server_hostname=self.host)
        except OSError:
            raw.close()
            raise


class Response:
    """A streamed answer: its status and headers are read, the body is
    read by the caller (``read``, ``readline``). ``close()`` gives the
    connection back when the body was read to its end, else drops it."""

    def __init__(self, client: "Client", conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse, reuse: bool) -> None:
        self._client = client
        self._conn: Optional[http.client.HTTPConnection] = conn
        self._resp = resp
        self._reuse = reuse
        self.status = resp.status
        self.headers = resp.headers

    def read(self, n: int = -1) -> bytes:
        try:
            return self._resp.read(n) if n >= 0 else self._resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise ConnectionError("reading berthd's answer: %s" % e) from e

    def read1(self, n: int) -> bytes:
        """What has come, up to n bytes (b"" at the end)."""
        try:
            return self._resp.read1(n)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise ConnectionError("reading berthd's answer: %s" % e) from e

    def readline(self) -> bytes:
        try:
            return self._resp.readline()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise ConnectionError("reading berthd's answer: %s" % e) from e

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._reuse and self._resp.isclosed() and \
                not self._resp.will_close:
            self._client._put(conn)
            return
        # shut down first: a read blocked in another thread ends too
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        conn.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Client:
    """A connection to berthd's control API.

    ``socket``: the unix socket's path; ``url``: ``https://HOST:PORT``
    of a ``control_listen`` (``http://`` on loopback only); ``token``:
    the bearer token for the URL (an admin token or a sandbox's own);
    ``cacert``: a PEM file of the CA to trust (berthd's dev CA is
    ``<state>/tls/ca.pem``), else the system's. ``timeout``: seconds a
    plain request may take (commands, waits and streams have none).
    """

    def __init__(self, socket: Optional[str] = None,
                 url: Optional[str] = None, token: Optional[str] = None,
                 cacert: Optional[str] = None,
                 timeout: Optional[float] = 300.0) -> None:
        env = os.environ
        if socket is None and url is None:
            url = env.get("BERTH_URL") or None
            if url is None:
                socket = env.get("BERTH_SOCKET") or DEFAULT_SOCKET
        if url is not None:
            if token is None:
                token = env.get("BERTH_TOKEN") or None
            if cacert is None:
                cacert = env.get("BERTH_CACERT") or None
        self.socket = socket if url is None else None
        self.url = url
        self.token = token
        self.timeout = timeout
        self._ctx: Optional[ssl.SSLContext] = None
        self._host = ""
        self._port = 0
        self._tls = False
        if url is not None:
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("https", "http") or not u.hostname:
                raise ValueError("url %r: use https://HOST:PORT" % url)
            self._tls = u.scheme == "https"
            self._host = u.hostname
            self._port = u.port or (443 if self._tls else 80)
            if self._tls:
                self._ctx = ssl.create_default_context(cafile=cacert)
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def with_token(self, token: str) -> "Client":
        """A client of the same URL, CA and timeout with another token
        (a fork's own: the token of the sandbox it was forked from may
        not see it). A unix socket's client (admin) is itself."""
        if self.url is None:
            return self
        c = Client(url=self.url, token=token, timeout=self.timeout)
        c._ctx = self._ctx
        return c

    def __repr__(self) -> str:
        return "berth.Client(%s)" % (repr(self.url) if self.url
                                     else "socket=%r" % self.socket)

    # ---- connections ----

    def _new(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.url is None:
            assert self.socket is not None
            return _UnixConnection(self.socket, timeout)
        if self._tls:
            assert self._ctx is not None
            return _TLSConnection(self._host, self._port, self._ctx, timeout)
        return _HTTPConnection(self._host, self._port, timeout=timeout,
                               blocksize=BLOCK)

    def _get(self) -> Tuple[http.client.HTTPConnection, bool]:
        """An idle connection (True: reused) or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(self.timeout), False

    def _put(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < 8:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Closes the idle connections (the client stays usable)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _where(self) -> str:
        return self.url or str(self.socket)

    def _headers(self, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
        h = {"User-Agent": "berth-python", "Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    @staticmethod
    def target(path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        """path plus its query (values: str, int or bool; None left out)."""
        if not query:
            return path
        q = []
        for k, v in query.items():
            if v is None or v is False:
                continue
            if v is True:
                v = 1
            q.append((k, str(v)))
        return path + ("?" + urllib.parse.urlencode(q) if q else "")

    # ---- requests ----

    def request(self, method: str, path: str,
                query: Optional[Mapping[str, Any]] = None,
                json_body: Any = None, body: Body = None,
                headers: Optional[Mapping[str, str]] = None,
                timeout: Any = "default", stream: bool = False
                ) -> Response:
        """Sends one request and reads its answer's head. An error status
        raises :class:`APIError` (its subclass); else the answer, whose
        body the caller reads (and closes). ``timeout``: seconds, None
        for none, "default" for the client's."""
        hdrs = self._headers(headers)
        data: Body = body
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        elif data is None and method in ("POST", "PUT", "PATCH"):
            data = b""
        chunked = data is not None and not isinstance(data, bytes)
        if chunked:
            hdrs["Transfer-Encoding"] = "chunked"
        url = self.target(path, query)
        # a reused connection berthd closed while idle fails at once:
        # then once more on a new one, if the body can be sent again
        for attempt in (0, 1):
            # a body that cannot be sent twice takes a new connection,
            # and so does the second attempt (other idle ones may be
            # stale too)
            conn, reused = self._get() if not (stream or chunked or
                                               attempt) else \
                (self._new(self.timeout), False)
            tmo = self.timeout if timeout == "default" else timeout
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(tmo)
                else:
                    conn.timeout = tmo
                conn.request(method, url, body=data, headers=hdrs,
                             encode_chunked=chunked)
                resp = conn.getresponse()
            except BerthError:
                # the body's source failed (a build context's file
                # shrank): the request is broken off, nothing kept
                conn.close()
                raise
            except (OSError, http.client.HTTPException) as e:
                stale = isinstance(e, (http.client.RemoteDisconnected,
                                       BrokenPipeError, ConnectionResetError))
                if stale and reused and attempt == 0 and not chunked:
                    conn.close()
                    continue
                # berthd may have answered (an error) and closed before
                # a streamed body was all sent: that answer is read
                early = self._early(conn) if chunked else None
                if early is None:
                    conn.close()
                    raise ConnectionError("cannot reach berthd at %s: %s" %
                                          (self._where(), e)) from e
                resp = early
            break
        if resp.status >= 400:
            try:
                text = resp.read()
            except (OSError, http.client.HTTPException):
                text = b""
            # a refused streamed body may not have been read whole
            # (berthd then closes): its connection is not kept
            if resp.will_close or chunked:
                conn.close()
            else:
                self._put(conn)
            raise api_error(resp.status, text, resp.getheader("Retry-After"))
        return Response(self, conn, resp, not stream)

    @staticmethod
    def _early(conn: http.client.HTTPConnection
               ) -> Optional[http.client.HTTPResponse]:
        """An answer that came while the body was being sent, if any."""
        try:
            return conn.getresponse()
        except (OSError, http.client.HTTPException):
            return None

    def call(self, method: str, path: str,
             query: Optional[Mapping[str, Any]] = None,
             json_body: Any = None, timeout: Any = "default") -> Any:
        """A request whose answer is JSON (or empty: None)."""
        with self.request(method, path, query, json_body,
                          timeout=timeout) as r:
            text = r.read()
        if not text:
            return None
        try:
            return json.loads(text.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ProtocolError("%s %s: the answer is not JSON: %r" %
                                (method, path, text[:200])) from e

    def pages(self, path: str, key: str,
              query: Optional[Mapping[str, Any]] = None
              ) -> List[Dict[str, Any]]:
        """Every row of a paged list (its "next" cursor followed)."""
        rows: List[Dict[str, Any]] = []
        q: Dict[str, Any] = dict(query or {})
        while True:
            doc = self.call("GET", path, q)
            rows.extend(doc.get(key) or [])
            nxt = doc.get("next")
            if not nxt:
                return rows
            q["after"] = nxt

    # ---- the API outside sandboxes ----

    def health(self) -> Dict[str, Any]:
        """GET /v1/health."""
        return self.call("GET", "/v1/health")  # type: ignore[no-any-return]

    def sandboxes(self) -> List[Dict[str, Any]]:
        """Every sandbox, as berthd describes it (admin)."""
        return self.pages("/v1/sandboxes", "sandboxes")

    def policy(self) -> Dict[str, Any]:
        """The global egress policy (GET /v1/policy)."""
        return self.call("GET", "/v1/policy")  # type: ignore[no-any-return]

    def set_policy(self, policy: Optional[Mapping[str, Any]] = None,
                   **fields: Any) -> Dict[str, Any]:
        """PUT /v1/policy (admin): changes the fields given (a mapping,
        or keywords: ``default_mode``, ``max_mode``, ``deny``,
        ``allow``, ``permit``, ``max_rules``, ``conn_limit``,
        ``new_conn_rate``); the others keep their values, None puts one
        back to berth.conf's. The whole policy as it now is."""
        body: Dict[str, Any] = dict(policy or {})
        body.update(fields)
        return self.call("PUT", "/v1/policy",  # type: ignore[no-any-return]
                         json_body=body)

    def ports(self) -> List[Dict[str, Any]]:
        """Every published port of every sandbox (admin): ``sandbox``,
        ``port``, ``url``, ``urls``, ``visibility``, ``host_header``,
        ``host``, ``created``."""
        return self.pages("/v1/ports", "ports")

    def openapi(self) -> Dict[str, Any]:
        """This API's OpenAPI 3.1 description (GET /v1/openapi.json)."""
        return self.call(  # type: ignore[no-any-return]
            "GET", "/v1/openapi.json")

    def metrics(self) -> str:
        """berthd's Prometheus metrics as text (GET /metrics, admin):
        requests, sandboxes per state, capacity."""
        with self.request("GET", "/metrics") as r:
            return r.read().decode("utf-8", "replace")

    def create_token(self, admin: bool = False,
                     sandbox: Optional[str] = None,
                     name: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/tokens (admin): a new token; its secret is in
        "token", shown only now. (``tokens.create``.)"""
        return self.tokens.create(admin, sandbox, name)

    @property
    def templates(self) -> "Templates":
        """Guest templates: list, show, add, remove, build (admin)."""
        return Templates(self)

    @property
    def tokens(self) -> "Tokens":
        """Access tokens: list, show, create, rotate, revoke."""
        return Tokens(self)

    @property
    def fleet(self) -> "Fleet":
        """Fleet mode: hosts, sandboxes, drain, undrain (admin)."""
        return Fleet(self)


def fetch(url: str, cacert: Optional[str] = None, method: str = "GET",
          headers: Optional[Mapping[str, str]] = None,
          timeout: float = 30.0) -> Tuple[int, Dict[str, str], bytes]:
    """One request to a URL (a published port's, say): (status,
    headers, body). TLS is verified against ``cacert`` (else
    ``BERTH_CACERT``, else the system's CAs); a host under .localhost
    is connected to at 127.0.0.1, as :class:`Client` does."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("https", "http") or not u.hostname:
        raise ValueError("url %r: use https://HOST[:PORT]/PATH" % url)
    path = (u.path or "/") + ("?" + u.query if u.query else "")
    conn: http.client.HTTPConnection
    if u.scheme == "https":
        ctx = ssl.create_default_context(
            cafile=cacert or os.environ.get("BERTH_CACERT") or None)
        conn = _TLSConnection(u.hostname, u.port or 443, ctx, timeout)
    else:
        host = "127.0.0.1" if u.hostname.lower().endswith(".localhost") \
            else u.hostname
        conn = http.client.HTTPConnection(host, u.port or 80,
                                          timeout=timeout)
    try:
        conn.request(method, path, headers={"Host": u.netloc,
                                            **dict(headers or {})})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    except (OSError, http.client.HTTPException) as e:
        raise ConnectionError("%s: %s" % (url, e)) from e
    finally:
        conn.close()
