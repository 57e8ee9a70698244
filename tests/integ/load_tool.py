#!/usr/bin/env python3
# tests/integ/load_tool.py — the "normal client" of the overload and
# slow-client tests (stdlib only): it sends GETs one after another and
# reports their latency and status, so a script can compare a loaded run
# with a baseline taken on the same machine.
#
#   probe    --port P --host H --ca CA --path /x [--new-conn] [--n N]
#            [--secs S] [--until FILE] [--interval MS] [--timeout S]
#
# Prints one JSON object: n, ok (2xx), statuses {code: count}, errors
# (connection failures / timeouts), p50/p90/p99/max in ms. --until FILE
# stops once FILE exists (after at least --n requests). --new-conn opens
# a connection (TLS handshake included) per request; otherwise one
# keep-alive connection is used and reopened only when it breaks.
# SPDX-License-Identifier: GPL-2.0-or-later
import argparse
import json
import os
import socket
import ssl
import sys
import time


def connect(a):
    s = socket.create_connection((a.addr, a.port), timeout=a.timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ctx = ssl.create_default_context(cafile=a.ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(s, server_hostname=a.host)


def read_response(s, buf):
    """One response (Content-Length framed, as berthd's and testapp's
    small answers are). Returns (status, rest-of-buffer, keepalive)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError("eof in head")
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    clen, close = 0, False
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        k = k.strip().lower()
        if k == "content-length":
            clen = int(v.strip())
        elif k == "connection" and "close" in v.lower():
            close = True
        elif k == "transfer-encoding":
            raise ValueError("chunked response: use a sized path")
    while len(buf) < clen:
        d = s.recv(65536)
        if not d:
            raise EOFError("eof in body")
        buf += d
    return status, buf[clen:], not close


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return round(xs[i], 2)


def cmd_probe(a):
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n"
           "User-Agent: berth-load-probe\r\n\r\n" % (a.path, a.host)).encode()
    lat, statuses, errors, n = [], {}, 0, 0
    last_err = ""
    s, buf = None, b""
    t_end = time.monotonic() + a.secs if a.secs else None
    while True:
        if n >= a.n and (a.until is None or os.path.exists(a.until)) and \
                (t_end is None or time.monotonic() >= t_end):
            break
        if a.until is not None and n >= a.max:
            break
        n += 1
        t0 = time.monotonic()
        try:
            if s is None:
                s, buf = connect(a), b""
            s.sendall(req)
            st, buf, keep = read_response(s, buf)
            lat.append((time.monotonic() - t0) * 1000.0)
            statuses[str(st)] = statuses.get(str(st), 0) + 1
            if a.new_conn or not keep:
                s.close()
                s = None
        except (OSError, EOFError, ValueError, ssl.SSLError) as e:
            errors += 1
            last_err = "%s: %s" % (type(e).__name__, e)
            lat.append((time.monotonic() - t0) * 1000.0)
            if s is not None:
                s.close()
            s = None
        if a.interval:
            time.sleep(a.interval / 1000.0)
    ok = sum(v for k, v in statuses.items() if k.startswith("2"))
    print(json.dumps({"n": n, "ok": ok, "statuses": statuses, "errors": errors,
                      "last_error": last_err, "p50": pct(lat, 50),
                      "p90": pct(lat, 90), "p99": pct(lat, 99),
                      "max": round(max(lat), 2) if lat else None}))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--timeout", type=float, default=10.0)
    sub = p.add_subparsers(dest="cmd", required=True)
    x = sub.add_parser("probe")
    x.add_argument("--path", default="/healthz")
    x.add_argument("--n", type=int, default=100)
    x.add_argument("--max", type=int, default=1000000)
    x.add_argument("--secs", type=float, default=0)
    x.add_argument("--until")
    x.add_argument("--interval", type=float, default=0)
    x.add_argument("--new-conn", action="store_true")
    a = p.parse_args()
    sys.exit(cmd_probe(a))


if __name__ == "__main__":
    main()
