# h2raw.py — HTTP/2 in raw frames for tests: frame builders, HPACK
# literal headers made by hand (no Huffman, no dynamic table unless
# asked), a frame reader. Python's standard library only.
# SPDX-License-Identifier: GPL-2.0-or-later
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20
ERRORS = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR",
          3: "FLOW_CONTROL_ERROR", 4: "SETTINGS_TIMEOUT", 5: "STREAM_CLOSED",
          6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM", 8: "CANCEL",
          9: "COMPRESSION_ERROR", 10: "CONNECT_ERROR",
          11: "ENHANCE_YOUR_CALM", 12: "INADEQUATE_SECURITY",
          13: "HTTP_1_1_REQUIRED"}


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid & 0x7fffffff) + payload


def hpack_int(v, prefix, first=0):
    """An HPACK integer with a prefix of `prefix` bits (RFC 7541 5.1)."""
    lim = (1 << prefix) - 1
    if v < lim:
        return bytes([first | v])
    out = [first | lim]
    v -= lim
    while v >= 128:
        out.append(v % 128 + 128)
        v //= 128
    out.append(v)
    return bytes(out)


def hpack_str(s):
    if isinstance(s, str):
        s = s.encode()
    return hpack_int(len(s), 7) + s


def lit(name, value, index=False):
    """A literal field with a literal name: without indexing, or with
    incremental indexing (it then enters the dynamic table)."""
    return (b"\x40" if index else b"\x00") + hpack_str(name) + hpack_str(value)


def indexed(i):
    """A field from the static (1-61) or dynamic (62-) table."""
    return hpack_int(i, 7, 0x80)


def block(headers):
    return b"".join(lit(n, v) for n, v in headers)


def req_block(method, path, authority, extra=()):
    return block([(":method", method), (":scheme", "https"),
                  (":path", path), (":authority", authority)] + list(extra))


def headers(sid, blk, end_stream=True, end_headers=True):
    return frame(HEADERS, (END_STREAM if end_stream else 0) |
                 (END_HEADERS if end_headers else 0), sid, blk)


def settings(pairs=(), ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0,
                 b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def ping(data=b"12345678", ack=False):
    return frame(PING, ACK if ack else 0, 0, data)


def window_update(sid, inc):
    return frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", inc))


def rst(sid, code=8):
    return frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def data(sid, payload, end_stream=False):
    return frame(DATA, END_STREAM if end_stream else 0, sid, payload)


class Reader:
    """Frames out of a socket: next() gives (type, flags, sid, payload)
    or None at EOF."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self, n):
        while len(self.buf) < n:
            b = self.sock.recv(65536)
            if not b:
                return False
            self.buf += b
        return True

    def next(self):
        if not self._fill(9):
            return None
        ln = int.from_bytes(self.buf[:3], "big")
        if not self._fill(9 + ln):
            return None
        ft, fl = self.buf[3], self.buf[4]
        sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
        p = self.buf[9:9 + ln]
        self.buf = self.buf[9 + ln:]
        return ft, fl, sid, p
