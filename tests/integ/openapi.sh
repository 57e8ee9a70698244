#!/bin/sh
# openapi.sh — the control API's OpenAPI 3.1 description (issue 32): GET
# /v1/openapi.json is what `berthd -O` prints and the build installs
# (proxy/openapi.json, share/berth/openapi.json); the document holds
# together (each path's {parameters} declared, operation ids unique,
# every $ref resolves, every operation answers something); each of its
# operations is a route the running server has (a request to it is
# never the router's 404 nor a 405; tests/unit/test_api_table checks the
# table the other way); and every error the server sends on the way,
# with the router's 404 and 405 and a sandbox token's 403, has the shape
# the document's Error schema gives. And the SDKs cover the API: each
# path with an operation a client calls (x-berth-scope other than
# "fleet", the hosts' own calls) is named by both SDKs' sources
# (netctl/sdk/python/berth/*.py, netctl/sdk/js/src/*.ts): a root such as
# /v1/health as that literal path, any other by its last fixed segment
# ("/console", "attach") as a string or the end of one. A check of the
# sources, not of calls made: the SDKs' suites (sdk-python.sh,
# sdk-js.sh) make them.
# SPDX-License-Identifier: GPL-2.0-or-later
. "$(dirname "$0")/lib.sh"
need_berth
need_root

CTL_PORT=$(free_port)
berthd_config "control_listen 127.0.0.1:$CTL_PORT"
start_berthd
tok1=$(netctl sandbox add s1 --address 127.0.0.1 | sed -n 's/^token: //p')
netctl sandbox add s2 --address 127.0.0.1 >/dev/null
[ -n "$tok1" ] || bail "no token for s1"

curl -sS --max-time 30 --unix-socket "$STATE/control.sock" -o "$T/served.json" \
	-w '%{http_code}' http://berth/v1/openapi.json >"$T/code"
is "GET /v1/openapi.json: 200" "$(cat "$T/code")" 200
"$BERTHD" -O >"$T/printed.json"
check "berthd -O prints the same document" python3 -c '
import json, sys
sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' "$T/served.json" "$T/printed.json"
if [ -f "$top_builddir/proxy/openapi.json" ]; then
	check "the copy the build installs is the same" python3 -c '
import json, sys
sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' "$T/served.json" "$top_builddir/proxy/openapi.json"
else
	not_ok "the copy the build installs is the same"; diag "no $top_builddir/proxy/openapi.json"
fi
code=$(curl -sS --cacert "$CA" --connect-to ::127.0.0.1: --max-time 30 -o /dev/null -w '%{http_code}' \
	-H "Authorization: Bearer $tok1" "https://api.$DOMAIN:$CTL_PORT/v1/openapi.json")
is "... any token may read it" "$code" 200

# The rest in one python program, printing TAP lines numbered from here.
python3 - "$T/served.json" "$STATE/control.sock" "$CTL_PORT" "$CA" "$DOMAIN" "$tok1" \
	"$_t_n" "$top_srcdir" >"$T/py.tap" 2>"$T/py.err" <<'EOF'
import glob, json, os, re, socket, ssl, sys

doc_path, sock, ctl_port, ca, domain, tok1, n0, srcdir = sys.argv[1:]
doc = json.load(open(doc_path))
n = int(n0)
failed = 0

def ok(cond, name, why=""):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, name))
    if not cond:
        failed += 1
        for l in str(why).splitlines()[:40]:
            print("# " + l)

def resolve(ref):
    node = doc
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node

# ---- the document holds together -------------------------------------------
ok(doc.get("openapi") == "3.1.0", "openapi 3.1.0")
ok(isinstance(doc.get("info", {}).get("title"), str) and
   isinstance(doc["info"].get("version"), str), "info: title and version")
METHODS = ("get", "head", "put", "post", "patch", "delete")
ops = [(p, m, o) for p, item in doc["paths"].items() for m, o in item.items()]
bad = [(p, m) for p, m, _ in ops if m not in METHODS]
ok(not bad, "only HTTP methods under paths", bad)
ids = [o["operationId"] for _, _, o in ops]
ok(len(ids) == len(set(ids)), "%d operations, their ids unique" % len(ids))
bad = []
for p, m, o in ops:
    want = set(re.findall(r"\{([^}]+)\}", p))
    have = set(x["name"] for x in o.get("parameters", []) if x.get("in") == "path")
    if want != have or any(not x.get("required") for x in o.get("parameters", [])
                           if x.get("in") == "path"):
        bad.append((m, p, sorted(want), sorted(have)))
ok(not bad, "each operation declares its path's parameters, required", bad)
bad = [(m, p) for p, m, o in ops if not o.get("summary") or not o.get("responses")]
ok(not bad, "each operation has a summary and responses", bad)
refs = []
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "$ref":
                refs.append(v)
            else:
                walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(doc)
bad = []
for r in refs:
    try:
        resolve(r)
    except (KeyError, TypeError):
        bad.append(r)
ok(refs and not bad, "all %d $refs resolve" % len(refs), bad)
schemes = doc.get("components", {}).get("securitySchemes", {})
ok(all(k in schemes for s in doc.get("security", []) for k in s),
   "the security it names is defined")
bad = [(m, p) for p, m, o in ops if o.get("x-berth-scope") not in
       ("admin", "sandbox", "token", "any", "fleet")]
ok(not bad, "each operation says who may call it (x-berth-scope)", bad)

# ---- a JSON Schema check of what the Error schema says ----------------------
ERROR = doc["components"]["schemas"]["Error"]
TYPES = {"object": dict, "string": str, "integer": int, "array": list,
         "boolean": bool}
def conforms(v, s, where="$"):
    if "$ref" in s:
        s = resolve(s["$ref"])
    t = s.get("type")
    if t and not (isinstance(v, TYPES[t]) and not (t == "integer" and isinstance(v, bool))):
        return "%s: %r is not %s" % (where, v, t)
    if t == "object":
        for k in s.get("required", []):
            if k not in v:
                return "%s: no %s" % (where, k)
        props = s.get("properties", {})
        for k, sub in v.items():
            if k in props:
                e = conforms(sub, props[k], where + "." + k)
                if e:
                    return e
            elif s.get("additionalProperties") is False:
                return "%s: %s is not in the schema" % (where, k)
    return None

# ---- every operation is a route of the running server -----------------------
def answer(s):
    """The status and body of the HTTP answer read from s until it closes."""
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest

def unix(method, target, body=None, ctype="application/json"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sock)
    b = body if body is not None else b""
    s.sendall(("%s %s HTTP/1.1\r\nHost: berth\r\nConnection: close\r\n"
               "Content-Type: %s\r\nContent-Length: %d\r\n\r\n"
               % (method, target, ctype, len(b))).encode() + b)
    try:
        return answer(s)
    finally:
        s.close()

# placeholders: what no request may harm (unknown names), or the
# throwaway external sandbox s2 where a known one is needed
VALUES = {"id": "nosuch", "port": "9", "token": "nosuch", "template": "nosuch",
          "n": "99", "name": "nosuch", "action": "allow", "value": "nosuch.example"}
errors = []
bad = []
order = sorted(ops, key=lambda x: x[1] == "delete")   # deletes last
for p, m, o in order:
    target = re.sub(r"\{([^}]+)\}", lambda mm: VALUES[mm.group(1)], p)
    body = None
    if "requestBody" in o:
        body = b"{}" if "application/json" in o["requestBody"]["content"] else b"x"
    if p == "/v1/templates/{template}/build" and m == "post":
        target += "?from=image"
    if p.endswith("/files") or p.endswith("/watch"):
        target += "?path=/nosuch"
    code, rest = unix(m.upper(), target, body,
                      "application/json" if body == b"{}" else "application/octet-stream")
    text = rest.decode(errors="replace")
    if code == 405 or (code == 404 and "no such resource" in text):
        bad.append("%s %s -> %d %s" % (m.upper(), target, code, text[:200]))
    if code >= 400 and m != "head":
        errors.append(("%s %s" % (m.upper(), target), code, text))
ok(not bad, "each of the %d operations reaches a route of the server" % len(ops), bad)

# the router's own errors, and a sandbox token's 403 over TLS
code, rest = unix("GET", "/v1/nosuch")
errors.append(("GET /v1/nosuch", code, rest.decode(errors="replace")))
ok(code == 404, "an unknown path: 404")
code, rest = unix("PATCH", "/v1/health")
errors.append(("PATCH /v1/health", code, rest.decode(errors="replace")))
ok(code == 405, "a method the path has not: 405")
ctx = ssl.create_default_context(cafile=ca)
with socket.create_connection(("127.0.0.1", int(ctl_port)), timeout=30) as raw:
    with ctx.wrap_socket(raw, server_hostname="api." + domain) as t:
        t.sendall(("GET /v1/sandboxes/s2 HTTP/1.1\r\nHost: api.%s\r\n"
                   "Authorization: Bearer %s\r\nConnection: close\r\n\r\n"
                   % (domain, tok1)).encode())
        code, rest = answer(t)
errors.append(("a sandbox token on another sandbox", code, rest.decode(errors="replace")))
ok(code == 403, "a sandbox token on another sandbox: 403")

bad = []
codes = set()
for what, code, text in errors:
    try:
        body = json.loads(text)
    except ValueError:
        bad.append("%s -> %d: not JSON: %r" % (what, code, text[:120]))
        continue
    e = conforms(body, ERROR)
    if e is None and body["error"]["status"] != code:
        e = "error.status %r is not the HTTP status" % body["error"]["status"]
    if e:
        bad.append("%s -> %d: %s: %s" % (what, code, e, text[:160]))
    codes.add(code)
ok(not bad and len(errors) > 20,
   "all %d errors seen (statuses %s) have the Error schema's shape"
   % (len(errors), " ".join(str(c) for c in sorted(codes))), bad)

# ---- the SDKs name every path a client calls --------------------------------
SDKS = (("Python", "netctl/sdk/python/berth/*.py"),
        ("TypeScript", "netctl/sdk/js/src/*.ts"))
for sdk, pattern in SDKS:
    files = sorted(glob.glob(os.path.join(srcdir, pattern)))
    text = "\n".join(open(f, encoding="utf-8").read() for f in files)
    missing = []
    paths = 0
    for p, item in doc["paths"].items():
        ms = [m.upper() for m, o in item.items()
              if o.get("x-berth-scope") != "fleet"]
        if not ms:
            continue
        paths += 1
        segs = p.strip("/").split("/")
        if len(segs) <= 2:
            # /v1/health, /metrics: the literal path, a whole string
            want = p
            pat = re.escape(p) + "[\"'`?]"
        else:
            # its last fixed segment, after a quote or a slash and
            # before a quote, a slash or a query: "/console", "attach"
            want = [s for s in segs if not s.startswith("{")][-1]
            pat = "[\"'`/]" + re.escape(want) + "[\"'`/?]"
        if not re.search(pat, text):
            missing.append("%s %s (%s)" % ("/".join(ms), p, want))
    ok(files and not missing, "the %s SDK (%d files) names each of the %d "
       "paths a client calls" % (sdk, len(files), paths),
       "\n".join("not named: " + m for m in missing))
print("N=%d" % n, file=sys.stderr)
EOF
rc=$?
grep -v '^N=' "$T/py.tap"
[ $rc -eq 0 ] || diag "$(cat "$T/py.err")"
_t_n=$(sed -n 's/^N=//p' "$T/py.err")
_t_fail=$((_t_fail + $(grep -c '^not ok' "$T/py.tap")))
[ -n "$_t_n" ] || bail "the checks did not run: $(tail -n 5 "$T/py.err")"
check "berthd is still running" kill -0 "$BERTHD_PID"
done_testing
