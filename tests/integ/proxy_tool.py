#!/usr/bin/env python3
# tests/integ/proxy_tool.py — raw HTTP/1.1, WebSocket and SSE client for the
# berthd integration tests (stdlib only). The shell scripts drive it; each
# subcommand prints a short result and exits non-zero when what it saw is
# wrong, so the script can turn it into one TAP line.
#
# Common options: --port P (berthd's https port), --host H (SNI and Host),
# --ca FILE (trust; omitted = no TLS, plain TCP), --addr A (connect address,
# default 127.0.0.1).
# SPDX-License-Identifier: GPL-2.0-or-later
import argparse
import base64
import json
import os
import re
import socket
import ssl
import sys
import time


def die(msg):
    print(msg)
    sys.exit(1)


def connect(a, timeout=10.0):
    s = socket.create_connection((a.addr, a.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if a.ca:
        ctx = ssl.create_default_context(cafile=a.ca)
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s, server_hostname=a.host)
    return s


class Reader:
    """Buffered reads over a (TLS) socket."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.eof = False

    def fill(self, n=65536):
        if self.eof:
            return False
        try:
            d = self.s.recv(n)
        except (ssl.SSLZeroReturnError, ConnectionResetError, ssl.SSLEOFError):
            d = b""
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def line(self):
        while b"\r\n" not in self.buf:
            if not self.fill():
                raise EOFError("eof in line")
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln.decode("latin-1")

    def exact(self, n):
        while len(self.buf) < n:
            if not self.fill(max(65536, n - len(self.buf))):
                raise EOFError("eof in body")
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def discard(self, n):
        """Read and drop n bytes without building one huge buffer."""
        while n > 0:
            if not self.buf and not self.fill(min(n, 1 << 20)):
                raise EOFError("eof in body")
            k = min(n, len(self.buf))
            self.buf = self.buf[k:]
            n -= k


def read_head(r):
    """Status line + headers; skips 1xx interim responses unless asked."""
    status_line = r.line()
    m = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
    if not m:
        raise ValueError("bad status line %r" % status_line)
    hdrs = []
    while True:
        ln = r.line()
        if ln == "":
            break
        k, _, v = ln.partition(":")
        hdrs.append((k.strip().lower(), v.strip()))
    return int(m.group(1)), hdrs


def hget(hdrs, name):
    for k, v in hdrs:
        if k == name:
            return v
    return None


def read_body(r, status, hdrs, method="GET", sink=None):
    """Returns the body (or its length if sink == 'count')."""
    count = sink == "count"
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return 0 if count else b""
    te = hget(hdrs, "transfer-encoding")
    cl = hget(hdrs, "content-length")
    out = [] if not count else 0
    if te and "chunked" in te.lower():
        while True:
            size = int(r.line().split(";")[0], 16)
            if size == 0:
                while r.line() != "":
                    pass
                break
            if count:
                r.discard(size)
                out += size
            else:
                out.append(r.exact(size))
            if r.exact(2) != b"\r\n":
                raise ValueError("chunk not followed by CRLF")
    elif cl is not None:
        n = int(cl)
        if count:
            r.discard(n)
            out = n
        else:
            out.append(r.exact(n))
    else:
        while r.fill():
            pass
        if count:
            out = len(r.buf)
        else:
            out.append(r.buf)
        r.buf = b""
    return out if count else b"".join(out)


def request(host, target, method="GET", extra=None, body=b""):
    h = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target, host)
    for x in extra or []:
        h += x + "\r\n"
    if body:
        h += "Content-Length: %d\r\n" % len(body)
    return (h + "\r\n").encode() + body


# ---- raw: smuggling corpus -------------------------------------------------
def cmd_raw(a):
    """Send each file's bytes on its own connection; read until the server
    closes, or idle/overall timeout. One JSON line per file; with --reqlog,
    also the lines the upstream logged meanwhile."""
    bad = 0
    for f in a.files:
        mark = os.path.getsize(a.reqlog) if a.reqlog else 0
        data = open(f, "rb").read()
        t0 = time.monotonic()
        try:
            s = connect(a)
        except OSError as e:
            print(json.dumps({"file": os.path.basename(f), "error": str(e)}))
            bad += 1
            continue
        got = b""
        closed = False
        try:
            s.sendall(data)
        except OSError:
            pass
        s.settimeout(a.idle)
        while time.monotonic() - t0 < a.timeout:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except (OSError, ssl.SSLError):
                closed = True
                break
            if not d:
                closed = True
                break
            got += d
        try:
            s.close()
        except OSError:
            pass
        codes = re.findall(rb"(?:^|\n)HTTP/1\.[01] (\d{3})", got)
        res = {"file": os.path.basename(f),
               "statuses": [int(c) for c in codes],
               "closed": closed, "bytes": len(got),
               "secs": round(time.monotonic() - t0, 2)}
        if a.reqlog:
            with open(a.reqlog, "rb") as lf:
                lf.seek(mark)
                res["upstream"] = lf.read().decode("latin-1").splitlines()
        print(json.dumps(res))
        sys.stdout.flush()
    sys.exit(1 if bad else 0)


# ---- records: TLS records that arrive together ----------------------------
class TLSPipe:
    """TLS through memory BIOs, so the test decides which bytes share a TCP
    send: the handshake's Finished and several records in one segment."""

    def __init__(self, a):
        ctx = ssl.create_default_context(cafile=a.ca)
        ctx.set_alpn_protocols(["http/1.1"])
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.o = ctx.wrap_bio(self.inc, self.out, server_hostname=a.host)
        self.s = socket.create_connection((a.addr, a.port), timeout=a.timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                self.o.do_handshake()
                break
            except ssl.SSLWantReadError:
                if self.out.pending:
                    self.s.sendall(self.out.read())
                if not self._pump():
                    raise EOFError("eof in handshake")

    def _pump(self):
        d = self.s.recv(65536)
        if not d:
            self.inc.write_eof()
            return False
        self.inc.write(d)
        return True

    def flush(self):
        """Everything written since the last flush, in one send."""
        self.s.sendall(self.out.read())

    def recv(self, n):
        while True:
            try:
                return self.o.read(n)
            except ssl.SSLWantReadError:
                if self.out.pending:
                    self.s.sendall(self.out.read())
                if not self._pump():
                    return b""
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""


def cmd_records(a):
    """--bursts bursts of -n requests, each request its own TLS record and
    each burst one TCP send (the first one with the client's Finished).
    Every response must arrive; prints their statuses."""
    t = TLSPipe(a)
    r = Reader(t)
    seen = []
    for b in range(a.bursts):
        for i in range(a.n):
            t.o.write(request(a.host, "%s?b=%d&r=%d" % (a.path, b, i)))
        t.flush()
        for i in range(a.n):
            try:
                st, h = read_head(r)
                read_body(r, st, h)
            except (EOFError, ValueError, OSError) as e:
                die("burst %d: response %d of %d: %s" % (b, i + 1, a.n, e))
            seen.append(st)
    print(" ".join(str(x) for x in seen))


# ---- WebSocket --------------------------------------------------------------
def ws_handshake(a, s, r, path):
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\nOrigin: https://%s\r\n%s\r\n"
               % (path, a.host, key, a.host,
                  "".join(h + "\r\n" for h in getattr(a, "header", None) or []))).encode())
    return read_head(r)


def ws_send(s, op, payload):
    mask = os.urandom(4)
    n = len(payload)
    hdr = bytes([0x80 | op])
    if n < 126:
        hdr += bytes([0x80 | n])
    elif n < 65536:
        hdr += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        hdr += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    s.sendall(hdr + mask + masked)


def ws_recv(r):
    """One data message (ignores pings); returns (opcode, payload)."""
    while True:
        b0, b1 = r.exact(2)
        op = b0 & 0x0F
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(r.exact(2), "big")
        elif n == 127:
            n = int.from_bytes(r.exact(8), "big")
        mask = r.exact(4) if b1 & 0x80 else None
        p = r.exact(n)
        if mask:
            p = bytes(b ^ mask[i % 4] for i, b in enumerate(p))
        if op in (9, 10):
            continue
        return op, p


def wait_file(path, secs):
    end = time.monotonic() + secs
    while not os.path.exists(path):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def cmd_ws(a):
    s = connect(a)
    s.settimeout(a.timeout)
    r = Reader(s)
    st, hdrs = ws_handshake(a, s, r, a.path)
    if st != 101:
        die("upgrade answered %d" % st)
    for i, msg in enumerate(a.messages):
        if i == 1 and a.hold:
            # Tell the script the tunnel is up, then wait for its go.
            open(a.ready, "w").close()
            if not wait_file(a.hold, a.timeout * 6):
                die("never told to go on")
        ws_send(s, 1, msg.encode())
        op, p = ws_recv(r)
        if op != 1 or p.decode() != msg:
            die("echo mismatch: op %d %r for %r" % (op, p, msg))
        print("echo: %s" % p.decode())
        sys.stdout.flush()
    ws_send(s, 8, (1000).to_bytes(2, "big"))
    print("ok")


def cmd_ws_refuse(a):
    """Upgrade refused by upstream (403): no tunnel; the connection goes on
    speaking HTTP, so a second request on it is answered normally."""
    s = connect(a)
    s.settimeout(a.timeout)
    r = Reader(s)
    st, hdrs = ws_handshake(a, s, r, a.path)
    body = read_body(r, st, hdrs)
    conn = (hget(hdrs, "connection") or "").lower()
    out = {"status": st, "upgrade": hget(hdrs, "upgrade"), "connection": conn}
    if "close" in conn:
        out["second"] = "closed by server"
    else:
        s.sendall(request(a.host, "/echo?after-refused-upgrade"))
        st2, h2 = read_head(r)
        b2 = read_body(r, st2, h2)
        out["second"] = st2
        try:
            out["second_target"] = json.loads(b2)["target"]
        except ValueError:
            out["second_body"] = b2[:200].decode("latin-1")
    print(json.dumps(out))
    ok = st == 403 and out.get("second") == 200 and \
        out.get("second_target") == "/echo?after-refused-upgrade"
    sys.exit(0 if ok else 1)


# ---- SSE ----------------------------------------------------------------
def cmd_sse(a):
    """Print the arrival time (s since the response head) of each event."""
    s = connect(a)
    s.settimeout(a.timeout)
    r = Reader(s)
    s.sendall(request(a.host, a.path, extra=["Accept: text/event-stream"]))
    st, hdrs = read_head(r)
    t0 = time.monotonic()
    if st != 200:
        die("status %d" % st)
    # Decode the framing by hand so each event is timed when its bytes
    # arrive, not when the whole body is in.
    chunked = "chunked" in (hget(hdrs, "transfer-encoding") or "")
    text = b""
    times = []
    while True:
        if chunked:
            size = int(r.line().split(";")[0], 16)
            if size == 0:
                break
            text += r.exact(size)
            r.exact(2)
        else:
            if not r.buf and not r.fill():
                break
            text += r.buf
            r.buf = b""
        while b"\n\n" in text:
            ev, text = text.split(b"\n\n", 1)
            if any(l.startswith(b"data:") for l in ev.split(b"\n")):
                times.append(round(time.monotonic() - t0, 3))
        if a.count and len(times) >= a.count:
            break
    print(json.dumps({"content_type": hget(hdrs, "content-type"),
                      "times": times}))


# ---- slow head (408) ---------------------------------------------------
def cmd_slowhead(a):
    s = connect(a)
    s.settimeout(a.timeout)
    t0 = time.monotonic()
    s.sendall(("GET /echo HTTP/1.1\r\nHost: %s\r\nX-Partial: yes\r\n"
               % a.host).encode())
    r = Reader(s)
    try:
        st, hdrs = read_head(r)
    except (EOFError, OSError, ValueError) as e:
        die(json.dumps({"error": str(e),
                        "secs": round(time.monotonic() - t0, 2)}))
    print(json.dumps({"status": st, "secs": round(time.monotonic() - t0, 2)}))


# ---- download with a stalled reader (backpressure) ----------------------
def cmd_download(a):
    s = connect(a)
    s.settimeout(a.timeout)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    r = Reader(s)
    s.sendall(request(a.host, a.path))
    st, hdrs = read_head(r)
    if st != 200:
        die("status %d" % st)
    if a.ready:
        # Take a first bite, then stop reading: berthd must stop reading
        # the upstream instead of buffering the rest.
        r.fill()
        open(a.ready, "w").close()
        if not wait_file(a.hold, 60):
            die("never told to go on")
    n = read_body(r, st, hdrs, sink="count")
    print(json.dumps({"body_bytes": n}))


# ---- upload with a stalled upstream is not testable; plain upload -----
def cmd_upload(a):
    """Chunked POST of --size bytes in 64 KiB chunks."""
    s = connect(a)
    s.settimeout(a.timeout)
    r = Reader(s)
    s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n"
               "Content-Type: application/octet-stream\r\n\r\n"
               % (a.path, a.host)).encode())
    blk = b"x" * 65536
    left = a.size
    while left:
        n = min(left, len(blk))
        s.sendall(b"%x\r\n" % n + blk[:n] + b"\r\n")
        left -= n
    s.sendall(b"0\r\n\r\n")
    st, hdrs = read_head(r)
    body = read_body(r, st, hdrs)
    print(json.dumps({"status": st, "body": body.decode("latin-1")}))


# ---- slow bodies, then a quick request on the same connections ----------
def cmd_trickle(a):
    """On -n connections, POST --path announcing --size bytes, one byte
    per connection each 50 ms; after --after rounds touch --ready; once
    --go exists send the rest at once. Then a GET on each connection;
    touch --done and hold until --hold exists. Prints the statuses."""
    conns = []
    for _ in range(a.n):
        s = connect(a)
        s.settimeout(a.timeout)
        s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n"
                   % (a.path, a.host, a.size)).encode())
        conns.append((s, Reader(s)))
    sent = 0
    while sent < a.size - 1 and not os.path.exists(a.go):
        for s, _ in conns:
            s.sendall(b"x")
        sent += 1
        if sent == a.after:
            open(a.ready, "w").close()
        time.sleep(0.05)
    first, then = [], []
    for s, r in conns:
        s.sendall(b"x" * (a.size - sent))
        st, hdrs = read_head(r)
        read_body(r, st, hdrs)
        first.append(st)
        s.sendall(request(a.host, "/healthz"))
    for s, r in conns:
        st, hdrs = read_head(r)
        read_body(r, st, hdrs)
        then.append(st)
    open(a.done, "w").close()
    wait_file(a.hold, a.timeout)
    print(json.dumps({"status": sorted(set(first)), "then": sorted(set(then)),
                      "trickled": sent}))


# ---- hold N idle connections (drain, limits, bench) ----------------------
def cmd_idle(a):
    """Open N connections (TLS handshake completed when --ca), optionally
    send a request head each, touch --ready, hold until --hold exists."""
    socks = []
    for _ in range(a.n):
        s = connect(a, timeout=30)
        if a.send:
            s.sendall(request(a.host, a.send))
        socks.append(s)
    open(a.ready, "w").close()
    wait_file(a.hold, a.timeout)
    alive = 0
    for s in socks:
        try:
            s.setblocking(False)
            try:
                d = s.recv(1)
                alive += 1 if d else 0
            except (BlockingIOError, ssl.SSLWantReadError):
                alive += 1
            s.close()
        except OSError:
            pass
    print(json.dumps({"opened": len(socks), "alive": alive}))


# ---- an idle keep-alive connection: when does the server close it? -------
def cmd_wait_close(a):
    """One request, response read, then idle: touch --ready and report how
    long after --go (a file) the server closed the connection."""
    s = connect(a)
    s.settimeout(a.timeout)
    r = Reader(s)
    s.sendall(request(a.host, "/echo?keepalive-idle"))
    st, hdrs = read_head(r)
    read_body(r, st, hdrs)
    open(a.ready, "w").close()
    if not wait_file(a.go, a.timeout):
        die(json.dumps({"error": "no go"}))
    t0 = time.monotonic()
    s.settimeout(a.timeout)
    try:
        d = s.recv(1)
    except socket.timeout:
        die(json.dumps({"status": st, "closed": False}))
    except OSError:
        d = b""
    print(json.dumps({"status": st, "closed": not d,
                      "secs": round(time.monotonic() - t0, 2)}))


def cmd_hold(a):
    """Open -n connections, taking source addresses from --sources in turn,
    and send nothing (with --ca, after the TLS handshake). Print "held N"
    on stdout, then wait until the server has closed every one or --wait
    seconds pass. Prints one JSON line: opened, closed within 1 s of
    "held" (refused at accept), closed in all, seconds until the last
    close, and how many are still open."""
    import select
    srcs = a.sources.split(",")
    conns = []
    refused = 0
    for i in range(a.n):
        try:
            s = socket.create_connection((a.addr, a.port), timeout=5,
                                         source_address=(srcs[i % len(srcs)], 0))
            if a.ca:
                ctx = ssl.create_default_context(cafile=a.ca)
                s = ctx.wrap_socket(s, server_hostname=a.host)
            s.setblocking(False)
            conns.append(s)
        except (OSError, ssl.SSLError):
            refused += 1
    print("held %d" % len(conns), flush=True)
    t0 = time.monotonic()
    open_ = set(conns)
    early = last = 0.0
    early_n = 0
    while open_ and time.monotonic() - t0 < a.wait:
        r, _, _ = select.select(list(open_), [], [], 0.2)
        for s in r:
            try:
                d = s.recv(4096)
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except (OSError, ssl.SSLError):
                d = b""
            if not d:
                open_.discard(s)
                last = time.monotonic() - t0
                if last <= 1.0:
                    early_n += 1
    print(json.dumps({"opened": len(conns), "refused_connect": refused,
                      "closed_1s": early_n, "closed": len(conns) - len(open_),
                      "last_close": round(last, 2), "open": len(open_)}), flush=True)
    for s in conns:
        s.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="localhost")
    p.add_argument("--ca")
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--timeout", type=float, default=10.0)
    sub = p.add_subparsers(dest="cmd", required=True)
    x = sub.add_parser("raw")
    x.add_argument("--idle", type=float, default=1.0)
    x.add_argument("--reqlog")
    x.add_argument("files", nargs="+")
    x = sub.add_parser("records")
    x.add_argument("-n", type=int, default=3)
    x.add_argument("--bursts", type=int, default=2)
    x.add_argument("--path", default="/")
    x = sub.add_parser("ws")
    x.add_argument("--path", default="/ws")
    x.add_argument("--ready")
    x.add_argument("--hold")
    x.add_argument("--header", action="append", default=[])
    x.add_argument("messages", nargs="+")
    x = sub.add_parser("ws-refuse")
    x.add_argument("--path", default="/ws?refuse=1")
    x = sub.add_parser("sse")
    x.add_argument("--path", required=True)
    x.add_argument("--count", type=int, default=0)
    sub.add_parser("slowhead")
    x = sub.add_parser("download")
    x.add_argument("--path", required=True)
    x.add_argument("--ready")
    x.add_argument("--hold")
    x = sub.add_parser("upload")
    x.add_argument("--path", default="/upload")
    x.add_argument("--size", type=int, required=True)
    x = sub.add_parser("trickle")
    x.add_argument("-n", type=int, default=1)
    x.add_argument("--path", default="/upload")
    x.add_argument("--size", type=int, default=4096)
    x.add_argument("--after", type=int, default=10)
    for f in ("ready", "go", "done", "hold"):
        x.add_argument("--" + f, required=True)
    x = sub.add_parser("idle")
    x.add_argument("-n", type=int, default=1)
    x.add_argument("--send")
    x.add_argument("--ready", required=True)
    x.add_argument("--hold", required=True)
    x = sub.add_parser("wait-close")
    x.add_argument("--ready", required=True)
    x.add_argument("--go", required=True)
    x = sub.add_parser("hold")
    x.add_argument("-n", type=int, default=1)
    x.add_argument("--sources", default="127.0.0.1")
    x.add_argument("--wait", type=float, default=30.0)
    a = p.parse_args()
    {"raw": cmd_raw, "records": cmd_records, "ws": cmd_ws, "ws-refuse": cmd_ws_refuse,
     "sse": cmd_sse, "slowhead": cmd_slowhead, "download": cmd_download,
     "upload": cmd_upload, "trickle": cmd_trickle, "idle": cmd_idle, "wait-close": cmd_wait_close,
     "hold": cmd_hold}[a.cmd](a)


if __name__ == "__main__":
    main()
