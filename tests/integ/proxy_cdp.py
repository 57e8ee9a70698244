#!/usr/bin/env python3
# tests/integ/proxy_cdp.py — drives headless Chromium over the DevTools
# protocol on a pipe (--remote-debugging-pipe: fds 3 and 4, NUL-separated
# JSON; no port to pick or guard). Loads a URL, waits until an element's
# text contains what is expected (bounded), saves a screenshot, prints a
# JSON summary and exits 0 only if the text showed.
#
#   proxy_cdp.py --url URL --selector '#echo' --expect TEXT \
#       --screenshot FILE [--timeout 30] [--chromium PATH] \
#       [--network] [--cookies] -- [CHROMIUM FLAGS]
#
# The summary has the page's final location (href), title, readyState and
# the element's text; --network adds what Chromium saw on the wire:
# "documents" (each top-level response and redirect: url, status,
# location) and "websockets" (url, handshake status); --cookies adds the
# browser's cookies (name, value, domain, path, secure, httpOnly,
# sameSite, session).
# SPDX-License-Identifier: GPL-2.0-or-later
import argparse
import base64
import json
import os
import subprocess
import sys
import time


class CDP:
    def __init__(self, argv, log):
        r_to_chrome, w_to_chrome = os.pipe()
        r_from_chrome, w_from_chrome = os.pipe()

        def fds():
            # Chromium reads commands on fd 3 and writes replies to fd 4.
            os.dup2(r_to_chrome, 3)
            os.dup2(w_from_chrome, 4)

        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=log,
                                     preexec_fn=fds, close_fds=False,
                                     start_new_session=True)
        os.close(r_to_chrome)
        os.close(w_from_chrome)
        self.w = w_to_chrome
        self.r = r_from_chrome
        self.buf = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            m = self.recv(end)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def recv(self, end):
        import select
        while b"\0" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            rd, _, _ = select.select([self.r], [], [], left)
            if rd:
                d = os.read(self.r, 1 << 20)
                if not d:
                    raise EOFError("Chromium closed the pipe")
                self.buf += d
        m, self.buf = self.buf.split(b"\0", 1)
        return json.loads(m)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


def network_summary(events):
    """Top-level documents (with redirects) and WebSockets from the
    Network events collected while the page was polled."""
    docs, socks, ws_url = [], [], {}

    def location(headers):
        for k, v in (headers or {}).items():
            if k.lower() == "location":
                return v
        return None

    for m in events:
        meth, p = m.get("method"), m.get("params", {})
        if meth == "Network.requestWillBeSent" and p.get("redirectResponse"):
            r = p["redirectResponse"]
            docs.append({"url": r.get("url"), "status": r.get("status"),
                         "location": location(r.get("headers"))})
        elif (meth == "Network.responseReceived"
              and p.get("type") == "Document"):
            r = p.get("response", {})
            docs.append({"url": r.get("url"), "status": r.get("status")})
        elif meth == "Network.webSocketCreated":
            ws_url[p.get("requestId")] = p.get("url")
        elif meth == "Network.webSocketHandshakeResponseReceived":
            socks.append({"url": ws_url.get(p.get("requestId")),
                          "status": p.get("response", {}).get("status")})
    return {"documents": docs, "websockets": socks}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--url", required=True)
    p.add_argument("--selector", default="#echo")
    p.add_argument("--expect", required=True)
    p.add_argument("--screenshot")
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--log", default=os.devnull)
    p.add_argument("--network", action="store_true",
                   help="report documents and WebSockets seen")
    p.add_argument("--cookies", action="store_true",
                   help="report the browser's cookies")
    p.add_argument("flags", nargs="*")
    a = p.parse_args()

    log = open(a.log, "ab")
    cdp = CDP([a.chromium, "--remote-debugging-pipe"] + a.flags, log)
    out = {"url": a.url}
    ok = False
    try:
        t = cdp.send("Target.createTarget", {"url": "about:blank"})
        sess = cdp.send("Target.attachToTarget",
                        {"targetId": t["targetId"], "flatten": True})["sessionId"]
        cdp.send("Page.enable", session=sess)
        # always: a subresource's load aborted by a network change is
        # seen as Network.loadingFailed (below)
        cdp.send("Network.enable", session=sess)
        cdp.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1000, "height": 600, "deviceScaleFactor": 1,
                  "mobile": False}, session=sess)
        # Chromium aborts a load in flight when the host's interfaces
        # change (net::ERR_NETWORK_CHANGED), which other tests' taps and
        # namespaces do at any time: navigate again, and say so
        for _ in range(3):
            nav = cdp.send("Page.navigate", {"url": a.url}, session=sess)
            if nav.get("errorText") != "net::ERR_NETWORK_CHANGED":
                break
            out["network_changed"] = out.get("network_changed", 0) + 1
        if nav.get("errorText"):
            out["navigate_error"] = nav["errorText"]
        else:
            expr = ("(function(){var e=document.querySelector(%s);"
                    "return JSON.stringify({text:e?e.textContent:null,"
                    "title:document.title,ready:document.readyState,"
                    "href:location.href,proto:(performance.getEntriesByType("
                    "'navigation')[0]||{}).nextHopProtocol});})()"
                    % json.dumps(a.selector))
            end = time.monotonic() + a.timeout
            seen = len(cdp.events)
            while time.monotonic() < end:
                # a subresource (a module script, say) aborted with
                # ERR_NETWORK_CHANGED leaves the page stuck: load it again
                # (at most three times), and say so
                changed = any(m.get("method") == "Network.loadingFailed" and
                              m.get("params", {}).get("errorText") ==
                              "net::ERR_NETWORK_CHANGED"
                              for m in cdp.events[seen:])
                seen = len(cdp.events)
                if changed and out.get("network_changed", 0) < 6:
                    out["network_changed"] = out.get("network_changed", 0) + 1
                    cdp.send("Page.navigate", {"url": a.url}, session=sess)
                r = cdp.send("Runtime.evaluate",
                             {"expression": expr, "returnByValue": True},
                             session=sess)
                v = json.loads(r.get("result", {}).get("value") or "{}")
                out.update(v)
                if v.get("text") and a.expect in v["text"]:
                    ok = True
                    break
                time.sleep(0.1)
        if a.screenshot:
            shot = cdp.send("Page.captureScreenshot", {"format": "png"},
                            session=sess)
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            out["screenshot"] = a.screenshot
        if a.cookies:
            c = cdp.send("Storage.getCookies")
            out["cookies"] = [
                {k: x.get(k) for k in ("name", "value", "domain", "path",
                                       "secure", "httpOnly", "sameSite",
                                       "session")}
                for x in c.get("cookies", [])]
        if a.network:
            out.update(network_summary(cdp.events))
    except Exception as e:  # report, don't trace back: one TAP line
        out["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        cdp.close()
    out["ok"] = ok
    print(json.dumps(out))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
