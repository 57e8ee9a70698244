#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""bench_exec.py — ``exec ["true"]`` round trips through the Python SDK.

    bench_exec.py SOCKET SANDBOX [-n N] [--warmup W]

N (default 200) buffered execs of ``true`` in a running sandbox, one after
the other on the SDK's keep-alive connection to berthd's unix socket;
prints {"n", "p50_ms", "p99_ms", "min_ms", "max_ms", "samples_ms"} as
JSON (the client side: the SDK's own cost is in it, beside
tests/bench/exec's raw HTTP, which reads the samples).
"""
import argparse
import json
import os
import sys
import time
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import berth  # noqa: E402 (the package beside this file first)


def pct(vals: List[float], p: float) -> float:
    """The p-th percentile, nearest rank."""
    s = sorted(vals)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("socket", help="berthd's control socket")
    ap.add_argument("sandbox", help="a running VM-backed sandbox's id")
    ap.add_argument("-n", type=int, default=200, help="round trips (200)")
    ap.add_argument("--warmup", type=int, default=5,
                    help="execs first, not counted (5)")
    a = ap.parse_args()
    sb = berth.Sandbox.get(a.sandbox, client=berth.Client(socket=a.socket))
    for _ in range(a.warmup):
        sb.exec(["true"])
    ms: List[float] = []
    for _ in range(a.n):
        t0 = time.perf_counter()
        r = sb.exec(["true"])
        ms.append((time.perf_counter() - t0) * 1000)
        if r.exit_code != 0:
            sys.exit("exec true: %r" % r)
    print(json.dumps({"n": a.n, "p50_ms": round(pct(ms, 50), 3),
                      "p99_ms": round(pct(ms, 99), 3),
                      "min_ms": round(min(ms), 3),
                      "max_ms": round(max(ms), 3),
                      "samples_ms": [round(x, 3) for x in ms]}))


if __name__ == "__main__":
    main()
