#!/usr/bin/env python3
# h2seeds.py — writes the seed corpus of fuzz_h2 (tests/fuzz/fuzz_h2.c)
# into the directory given (tests/fuzz/corpus/h2): a flags byte, then
# frames (the target puts the client preface in front).
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integ"))
from h2raw import *  # noqa: E402,F401,F403

A = "a.example.com"
P = "p.example.com"
S = settings()
SA = settings(ack=True)


def get(sid, path, host=A, extra=()):
    return headers(sid, req_block("GET", path, host, extra))


seeds = {
    "get": (0, S + SA + get(1, "/hello")),
    "get-bytewise": (1, S + SA + get(1, "/hello")),
    "get-many": (2, S + SA + b"".join(get(2 * i + 1, p) for i, p in enumerate(
        ["/hello", "/chunked", "/204", "/304", "/close", "/drop", "/100",
         "/upgrade", "/nothing"]))),
    "head": (0, S + headers(1, req_block("HEAD", "/head", A))),
    "post-data": (3, S + headers(1, req_block("POST", "/len", A,
                  [("content-type", "text/plain")]), end_stream=False) +
                  data(1, b"x" * 100) + data(1, b"y" * 50, end_stream=True)),
    "post-cl": (0, S + headers(1, req_block("POST", "/len", A,
                [("content-length", "5")]), end_stream=False) +
                data(1, b"hello", end_stream=True)),
    "continuation": (0, S + frame(HEADERS, END_STREAM, 1,
                     block([(":method", "GET"), (":scheme", "https")])) +
                     frame(CONTINUATION, 0, 1, block([(":path", "/hello")])) +
                     frame(CONTINUATION, END_HEADERS, 1,
                           block([(":authority", A), ("cookie", "a=1"),
                                  ("cookie", "b=2")]))),
    "rst-loop": (3, S + b"".join(get(2 * i + 1, "/big") + rst(2 * i + 1)
                                 for i in range(40))),
    "settings-ping-wu": (2, S + settings([(1, 0), (2, 0), (3, 10),
                         (4, 1 << 20), (5, 16384), (6, 8000)]) +
                         ping() + window_update(0, 1 << 20) + ping(b"abcdefgh") +
                         SA + get(1, "/big") + window_update(1, 1 << 18) +
                         ping(ack=True)),
    "big-zero-window": (4, settings([(4, 0)]) + get(1, "/big")),
    "big-windowed": (0, S + get(1, "/big") + window_update(0, 1 << 20) +
                     window_update(1, 1 << 20)),
    "private-bearer": (0, S + get(1, "/hello", P,
                       [("authorization", "Bearer tok")]) +
                       get(3, "/hello?berth_token=tok", P) + get(5, "/hello", P)),
    "hpack-indexed": (0, S + headers(1, lit(":method", "GET", True) +
                      lit(":scheme", "https", True) + lit(":path", "/hello", True) +
                      lit(":authority", A, True) + lit("x-a", "v" * 200, True)) +
                      headers(3, indexed(66) + indexed(65) + indexed(64) +
                      indexed(63) + indexed(62) * 20)),
    "goaway": (0, S + get(1, "/hello") +
               frame(GOAWAY, 0, 0, bytes(8))),
    "trailers-priority": (0, S + frame(PRIORITY, 0, 3, bytes([0, 0, 0, 1, 16])) +
                          headers(1, req_block("POST", "/len", A), end_stream=False) +
                          data(1, b"abc") + headers(1, block([("x-t", "1")]))),
    "connect": (0, S + headers(1, block([(":method", "CONNECT"),
                                         (":authority", A)]))),
}

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
for name, (flags, body) in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([flags]) + body)
