#!/usr/bin/env python3
# tests/integ/proxy_smuggling_gen.py — regenerates the request-smuggling
# corpus in tests/smuggling/ (raw bytes, one stream per file).
#
#   python3 tests/integ/proxy_smuggling_gen.py [DIR]
#
# Every file is a first request followed by a second request for
# /smuggled. Either the first request is malformed by berthd's rules (bare
# CR/LF, obs-fold, CTL/NUL in the head, duplicate Host/CL/TE, TE other than
# a final "chunked", TE on HTTP/1.0, CL with TE, bad chunk sizes or
# extensions, oversized heads), so berthd must answer an error and close
# without reading on; or its framing is odd but legal and the /smuggled
# request sits inside the body, so only a framing disagreement could turn
# it into a request. Either way the upstream must never log GET /smuggled.
#
# All requests name Host 9001-sb.berth.localhost: proxy-smuggling.sh runs
# the upstream on port 9001 of a private loopback address, so the corpus
# needs no per-run rewriting (which would break lengths).
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import sys

HOST = b"9001-sb.berth.localhost"
S = b"GET /smuggled HTTP/1.1\r\nHost: " + HOST + b"\r\n\r\n"


def head(lines, method=b"POST", target=b"/echo", version=b"HTTP/1.1",
         eol=b"\r\n"):
    out = method + b" " + target + b" " + version + eol
    out += b"Host: " + HOST + eol
    for ln in lines:
        out += ln + eol
    return out + eol


def chunk(data, size=None):
    return (size if size is not None else b"%x" % len(data)) + b"\r\n" + \
        data + b"\r\n"


LAST = b"0\r\n\r\n"
C = []  # (name, bytes)


def add(name, data):
    C.append((name, data))


# -- CL.TE and TE.CL -------------------------------------------------------
# A CL-only reader takes everything as body; a TE reader stops at the 0
# chunk and sees /smuggled as the next request.
body = LAST + S
add("cl-te", head([b"Content-Length: %d" % len(body),
                   b"Transfer-Encoding: chunked"]) + body)
# TE reader: one chunk holding the smuggled request, then 0. CL reader
# (Content-Length: 4) takes "NN\r\n" and then sees /smuggled.
body = chunk(S) + LAST
add("te-cl", head([b"Transfer-Encoding: chunked",
                   b"Content-Length: 4"]) + body)
add("te-cl-reversed", head([b"Content-Length: 4",
                            b"Transfer-Encoding: chunked"]) + body)
add("te-cl-zero", head([b"Transfer-Encoding: chunked",
                        b"Content-Length: 0"]) + chunk(S) + LAST)

# -- TE.TE obfuscations, each with a CL covering 0-chunk + /smuggled -----
body = LAST + S


def te_cl(name, te_lines):
    add(name, head(te_lines + [b"Content-Length: %d" % len(body)]) + body)


te_cl("te-xchunked", [b"Transfer-Encoding: xchunked"])
te_cl("te-chunked-identity", [b"Transfer-Encoding: chunked, identity"])
te_cl("te-identity-chunked", [b"Transfer-Encoding: identity, chunked"])
te_cl("te-space-value", [b"Transfer-Encoding:  chunked"])
te_cl("te-tab-value", [b"Transfer-Encoding:\tchunked"])
te_cl("te-leading-space-name", [b"X-Pad: a", b" Transfer-Encoding: chunked"])
te_cl("te-two-headers", [b"Transfer-Encoding: chunked",
                         b"Transfer-Encoding: identity"])
te_cl("te-uppercase", [b"Transfer-Encoding: CHUNKED"])
te_cl("te-obs-fold-value", [b"Transfer-Encoding:", b" chunked"])
te_cl("te-vtab", [b"Transfer-Encoding:\x0bchunked"])
te_cl("te-nul-after", [b"Transfer-Encoding: chunked\x00"])
te_cl("te-space-before-colon", [b"Transfer-Encoding : chunked"])
te_cl("te-quoted", [b'Transfer-Encoding: "chunked"'])
te_cl("te-bare-lf-inside", [b"X-Pad: a\nTransfer-Encoding: chunked"])
te_cl("te-bare-cr-inside", [b"X-Pad: a\rTransfer-Encoding: chunked"])

# TE only (no CL): a reader that ignores the odd TE sees no body and
# "0\r\n\r\n" then /smuggled; one that honours it stops at 0 and reads
# /smuggled as the next request. Must be refused, not guessed.
add("te-xchunked-only", head([b"Transfer-Encoding: xchunked"]) + LAST + S)
add("te-chunked-chunked", head([b"Transfer-Encoding: chunked, chunked"])
    + LAST + S)
add("te-dup-chunked", head([b"Transfer-Encoding: chunked",
                            b"Transfer-Encoding: chunked"]) + LAST + S)
add("te-http10", head([b"Transfer-Encoding: chunked"], version=b"HTTP/1.0")
    + LAST + S)
body = LAST + S
add("te-http10-cl", head([b"Transfer-Encoding: chunked",
                          b"Content-Length: %d" % len(body)],
                         version=b"HTTP/1.0") + body)

# -- Content-Length tricks ----------------------------------------------
add("cl-dup-same", head([b"Content-Length: 5", b"Content-Length: 5"])
    + b"hello" + S)
add("cl-dup-different", head([b"Content-Length: 5",
                              b"Content-Length: %d" % (5 + len(S))])
    + b"hello" + S)
add("cl-dup-case", head([b"Content-Length: %d" % (5 + len(S)),
                         b"content-length: 5"]) + b"hello" + S)
add("cl-list", head([b"Content-Length: 5, %d" % (5 + len(S))])
    + b"hello" + S)
add("cl-plus", head([b"Content-Length: +5"]) + b"hello" + S)
add("cl-negative", head([b"Content-Length: -1"]) + b"hello" + S)
add("cl-hex", head([b"Content-Length: 0x5"]) + b"hello" + S)
add("cl-space-inside", head([b"Content-Length: 1 5"]) + b"hello" + S)
add("cl-space-before-colon", head([b"Content-Length : %d" % (5 + len(S))])
    + b"hello" + S)
add("cl-overflow", head([b"Content-Length: 18446744073709551621"])
    + b"hello" + S)
# Legal OWS around the value: the whole /smuggled request is body.
body = b"hello" + S
add("cl-ows-valid", head([b"Content-Length: \t %d \t" % len(body)]) + body)

# -- line endings, folding, control characters ---------------------------
add("bare-lf-head", head([b"Content-Length: 0"], eol=b"\n") + S)
add("bare-lf-request-line",
    b"GET /echo HTTP/1.1\nHost: " + HOST + b"\r\n\r\n" + S)
add("bare-cr-head", head([b"X-Pad: a\rb", b"Content-Length: 0"]) + S)
add("obs-fold", head([b"X-Pad: a", b" folded", b"Content-Length: 0"]) + S)
add("obs-fold-tab", head([b"X-Pad: a", b"\tfolded", b"Content-Length: 0"])
    + S)
add("nul-header-name", head([b"X-P\x00ad: a", b"Content-Length: 0"]) + S)
add("nul-header-value", head([b"X-Pad: a\x00b", b"Content-Length: 0"]) + S)
add("ctl-header-value", head([b"X-Pad: a\x01b", b"Content-Length: 0"]) + S)
add("del-header-name", head([b"X-\x7fPad: a", b"Content-Length: 0"]) + S)
add("space-before-colon", head([b"X-Pad : a", b"Content-Length: 0"]) + S)
add("host-dup", head([b"Host: 9001-other.berth.localhost",
                      b"Content-Length: 0"]) + S)
add("empty-header-name", head([b": a", b"Content-Length: 0"]) + S)

# -- chunk-size tricks ----------------------------------------------------
TE = [b"Transfer-Encoding: chunked"]
add("chunk-size-0x", head(TE) + chunk(b"hello", b"0x5") + LAST + S)
add("chunk-size-plus", head(TE) + chunk(b"hello", b"+5") + LAST + S)
add("chunk-size-negative", head(TE) + chunk(b"hello", b"-5") + LAST + S)
add("chunk-size-huge", head(TE) + b"ffffffffffffffffffff\r\n" + b"hello"
    + b"\r\n" + LAST + S)
# 2^64 + 5 wraps to 5 in a careless 64-bit accumulator.
add("chunk-size-wrap", head(TE) + chunk(b"hello", b"10000000000000005")
    + LAST + S)
add("chunk-missing-crlf", head(TE) + b"5\r\nhello" + LAST + S)
add("chunk-data-too-long", head(TE) + b"3\r\nhello\r\n" + LAST + S)
add("chunk-bare-lf", head(TE) + b"5\nhello\n0\n\n" + S)
add("chunk-last-no-crlf", head(TE) + b"5\r\nhello\r\n0\r\n" + S)
# A trailing space after the size: whatever a parser makes of it, the
# smuggled request is chunk data (size covers it exactly).
add("chunk-size-trailing-space", head(TE) + chunk(S, b"%x " % len(S))
    + LAST)
# Legal chunk extension with the smuggled request inside the data.
add("chunk-ext-valid", head(TE) + chunk(S, b"%x;name=value" % len(S))
    + LAST)

# -- chunk-extension tricks ----------------------------------------------
add("chunk-ext-bare-lf", head(TE) + b"5;a=b\nc\r\nhello\r\n" + LAST + S)
add("chunk-ext-bare-cr", head(TE) + b"5;a\rb\r\nhello\r\n" + LAST + S)
add("chunk-ext-ctl", head(TE) + b"5;a=\x01\r\nhello\r\n" + LAST + S)
add("chunk-ext-nul", head(TE) + b"5;a\x00\r\nhello\r\n" + LAST + S)
add("chunk-ext-del", head(TE) + b"5;a=\x7f\r\nhello\r\n" + LAST + S)

# -- request-line tricks --------------------------------------------------
add("reqline-double-space",
    b"GET  /echo HTTP/1.1\r\nHost: " + HOST + b"\r\n\r\n" + S)
add("reqline-tab", b"GET\t/echo\tHTTP/1.1\r\nHost: " + HOST + b"\r\n\r\n" + S)
add("reqline-http09", b"GET /echo\r\n\r\n" + S)
add("reqline-bad-version", head([b"Content-Length: 0"], version=b"HTTP/1.x")
    + S)
add("reqline-space-in-target",
    b"GET /echo HTTP/1.1 /x HTTP/1.1\r\nHost: " + HOST + b"\r\n\r\n" + S)
add("reqline-nul-target", head([b"Content-Length: 0"], target=b"/e\x00cho")
    + S)

# -- size limits ----------------------------------------------------------
add("head-too-large", head([b"X-Big: " + b"a" * 20000, b"Content-Length: 0"])
    + S)
add("too-many-headers", head([b"X-H%d: v" % i for i in range(150)]
                             + [b"Content-Length: 0"]) + S)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "smuggling")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.endswith(".http"):
            os.unlink(os.path.join(d, f))
    for i, (name, data) in enumerate(C, 1):
        with open(os.path.join(d, "%02d-%s.http" % (i, name)), "wb") as f:
            f.write(data)
    with open(os.path.join(d, ".gitattributes"), "w") as f:
        f.write("* -text\n")
    print("%d files in %s" % (len(C), d))


if __name__ == "__main__":
    main()
