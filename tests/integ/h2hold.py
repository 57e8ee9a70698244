# h2hold.py PORT HOST CA N WANT — opens N TLS connections to berthd at
# once, each offering only ALPN h2, and holds them without a byte more.
# Prints how many finished their handshake (berthd accepted them) once
# WANT have and no more came for 2 s, then closes those and prints how
# many of the rest finish theirs (they waited in the listen backlog).
# One JSON line: {"held": H, "alpn": [...], "after": A}. For
# proxy-h2.sh's check that the hard connection limit holds for h2.
# SPDX-License-Identifier: GPL-2.0-or-later
import json
import socket
import ssl
import sys
import threading
import time

port, host, ca, n, want = int(sys.argv[1]), sys.argv[2], sys.argv[3], \
    int(sys.argv[4]), int(sys.argv[5])
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2"])
lock = threading.Lock()
done = []       # (socket, its ALPN) in the order their handshakes ended
socks = []


def one():
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    t = ctx.wrap_socket(s, server_hostname=host,
                        do_handshake_on_connect=False)
    with lock:
        socks.append(t)
    try:
        t.do_handshake()
    except (OSError, ssl.SSLError):
        return
    with lock:
        done.append((t, t.selected_alpn_protocol()))


def count():
    with lock:
        return len(done)


def settle(target, quiet):
    """Waits (at most 30 s) for target handshakes, then until none more
    came for `quiet` seconds."""
    end = time.monotonic() + 30
    while count() < target and time.monotonic() < end:
        time.sleep(0.05)
    last, since = count(), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() < end + quiet:
        time.sleep(0.05)
        if count() != last:
            last, since = count(), time.monotonic()
    return last


threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
for th in threads:
    th.start()
held = settle(want, 2.0)
with lock:
    first = list(done)
alpn = sorted({a or "none" for _, a in first})
for t, _ in first:
    t.close()
after = settle(n, 0) - held
for th in threads:
    th.join(timeout=10)
print(json.dumps({"held": held, "alpn": alpn, "after": after}))
with lock:
    for t in socks:
        t.close()
