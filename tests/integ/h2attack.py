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
#   Prints what the server did to the attacker, one line: "goaway CODE",
#   "rst CODE" (the first stream reset), "headers" (a response began;
#   "headers 431" when its status is 431),
#   "refused K" (streams: how many got REFUSED_STREAM), "eof",
#   "timeout"; then "after S" (seconds until then). With SECONDS the
#   attack is repeated on new connections for that long (the first
#   outcome is printed, and "runs R").
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
from h2raw import (PREFACE, Reader, settings, window_update, headers,  # noqa: E402
                   req_block, lit, indexed, block, frame, GOAWAY,
                   RST_STREAM, HEADERS, HEADERS as _H)


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


def outcome(s, wait, count_refused=0):
    """What the server did: the first GOAWAY, RST_STREAM or HEADERS."""
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
    out = [PREFACE + settings([(4, 0)] if mode == "zerohold" else
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
    elif mode == "zerohold":
        out.append(headers(1, req_block("GET", "/bytes?n=%d" % n, auth)))
        wait = 120
    send_all(s, out)
    res = outcome(s, wait)
    if mode == "zerohold" and res == "headers":
        res = outcome(s, wait)	# what comes after the head
    s.close()
    return res


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
    port, sni, auth, ca, mode, n = sys.argv[1:7]
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
