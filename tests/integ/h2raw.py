# h2raw.py — HTTP/2 in raw frames for tests: frame builders, HPACK
# literal headers made by hand (no Huffman, no dynamic table unless
# asked), a frame reader, the :status of a response (status_of). Python's standard library only.
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


# RFC 7541 Appendix B: the Huffman codes of the ten digits (code, bits)
_HUFF_DIGITS = {(0x0, 5): "0", (0x1, 5): "1", (0x2, 5): "2", (0x19, 6): "3",
                (0x1a, 6): "4", (0x1b, 6): "5", (0x1c, 6): "6",
                (0x1d, 6): "7", (0x1e, 6): "8", (0x1f, 6): "9"}
# the static table's :status entries
_STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404,
                  14: 500}


def _hpack_int_at(b, i, prefix):
    v = b[i] & ((1 << prefix) - 1)
    i += 1
    if v < (1 << prefix) - 1:
        return v, i
    m = 0
    while True:
        v += (b[i] & 0x7f) << m
        m += 7
        i += 1
        if not b[i - 1] & 0x80:
            return v, i


def _huff_digits(b):
    bits = "".join("{:08b}".format(x) for x in b)
    out, i = "", 0
    while i < len(bits):
        for n in (5, 6):
            if i + n <= len(bits) and (int(bits[i:i + n], 2), n) in _HUFF_DIGITS:
                out += _HUFF_DIGITS[(int(bits[i:i + n], 2), n)]
                i += n
                break
        else:
            if set(bits[i:]) <= {"1"} and len(bits) - i < 8:
                return out	# EOS padding
            return None
    return out


def status_of(blk):
    """The :status of a response header block (its first field), or None.
    Only for a connection whose client sent SETTINGS_HEADER_TABLE_SIZE 0
    (settings([(1, 0)])): the server's encoder then uses no dynamic table,
    so the status is a static entry or a literal (Huffman digits or not)."""
    i = 0
    while i < len(blk) and blk[i] & 0xe0 == 0x20:	# table size update
        _, i = _hpack_int_at(blk, i, 5)
    if i >= len(blk):
        return None
    if blk[i] & 0x80:
        idx, i = _hpack_int_at(blk, i, 7)
        return _STATIC_STATUS.get(idx)
    idx, i = _hpack_int_at(blk, i, 6 if blk[i] & 0x40 else 4)
    if idx not in _STATIC_STATUS:
        return None
    huff = blk[i] & 0x80
    n, i = _hpack_int_at(blk, i, 7)
    v = blk[i:i + n]
    v = _huff_digits(v) if huff else v.decode("latin-1")
    return int(v) if v and v.isdigit() else None


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
