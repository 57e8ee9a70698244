#!/usr/bin/env python3
# tests/integ/agent_tool.py — the guest agent (vmm/guest/agent.c) driven
# without a VM: with BERTH_AGENT_PORT_FD it takes one end of a socketpair
# as its port, and this script is the host at the other end, speaking
# protocol 2 (vmm/proto/agent_proto.h) frame by frame (or, to see what
# outlives a host, BERTH_AGENT_PORT_LISTEN: a listening socket whose
# connections the agent takes in turn). It prints TAP
# ("ok N - ...", diagnostics as "# ..." on stderr, the plan last) and exits
# 1 when a check failed; tests/integ/agent-proto.sh runs it.
#
# Each test starts an agent of its own and pings it first, as berthd does,
# so a test that fails leaves the next a clean agent. Every wait is for
# frames (or a process's end) and bounded by WAIT; wall-clock figures are
# only generous liveness bounds. Commands get BERTH_AGENT_TEST=<token> in
# their environment: whatever of them outlives its test is found by it and
# killed on exit, as are the agents; the temp dir goes too.
#
# Environment: BERTH_AGENT (the binary; default
# $top_builddir/vmm/guest/berth-agent), top_srcdir and top_builddir (as in
# lib.sh: default the source tree), TMPDIR, KEEP_TMP=1 (keep the temp dir
# with the agents' logs). Root-only checks (a command as user nobody, a
# move across filesystems, identity in namespaces of the agent's own) are
# skipped otherwise.
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import pwd
import re
import resource
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TOP_SRCDIR = os.environ.get('top_srcdir') or os.path.normpath(
    os.path.join(HERE, '..', '..'))
TOP_BUILDDIR = os.environ.get('top_builddir') or TOP_SRCDIR
AGENT = os.environ.get('BERTH_AGENT') or os.path.join(
    TOP_BUILDDIR, 'vmm', 'guest', 'berth-agent')
PROTO_H = os.path.join(TOP_SRCDIR, 'vmm', 'proto', 'agent_proto.h')

WAIT = 30.0         # seconds: the bound on any one wait
MARK = 'BERTH_AGENT_TEST'


def proto_constants(path):
    """The BA_* sizes from agent_proto.h itself, so the test follows it."""
    want = ('BA_MAX_PAYLOAD', 'BA_CHUNK', 'BA_WINDOW', 'BA_MAX_CHANS',
            'BA_PROTO', 'BA_RING_MAX', 'BA_MAX_PROCS')
    vals = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'#define\s+(BA_\w+)\s+([0-9()*+ \t]+?)\s*'
                         r'(?:/\*.*)?$', line)
            if m and m.group(1) in want:
                vals[m.group(1)] = int(eval(m.group(2), {'__builtins__': {}}))
    missing = [w for w in want if w not in vals]
    if missing:
        raise SystemExit('%s: no %s' % (path, ', '.join(missing)))
    return vals


_C = proto_constants(PROTO_H)
MAX_PAYLOAD = _C['BA_MAX_PAYLOAD']
CHUNK = _C['BA_CHUNK']
WINDOW = _C['BA_WINDOW']
MAX_CHANS = _C['BA_MAX_CHANS']
PROTO = _C['BA_PROTO']
RING_MAX = _C['BA_RING_MAX']
MAX_PROCS = _C['BA_MAX_PROCS']


# ---- TAP -------------------------------------------------------------------
class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, desc, *diag):
        self.n += 1
        cond = bool(cond)
        print('%s %d - %s' % ('ok' if cond else 'not ok', self.n,
                              desc.replace('#', '\\#')), flush=True)
        if not cond:
            self.failed += 1
            for d in diag:
                self.diag(d)
        return cond

    def is_(self, got, want, desc, *diag):
        return self.ok(got == want, desc, 'got:  %r' % (got,),
                       'want: %r' % (want,), *diag)

    def skip(self, desc, reason):
        self.n += 1
        print('ok %d - %s # SKIP %s' % (self.n, desc.replace('#', '\\#'),
                                         reason), flush=True)

    @staticmethod
    def diag(msg):
        for line in str(msg).splitlines() or ['']:
            sys.stderr.write('# %s\n' % line)
        sys.stderr.flush()


# ---- processes -------------------------------------------------------------
def alive(pid):
    """True while pid runs (a zombie has ended)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            s = f.read()
    except OSError:
        return False
    return s[s.rindex(')') + 2] not in 'ZX'


def wait_gone(pids, timeout=WAIT):
    end = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def marked(token, extra=None):
    """Pids whose environment carries this run's token (and extra)."""
    want = ('%s=%s' % (MARK, token)).encode()
    pids = []
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open('/proc/%s/environ' % d, 'rb') as f:
                env = f.read().split(b'\0')
        except OSError:
            continue
        if want in env and (extra is None or extra.encode() in env):
            pids.append(int(d))
    return pids


def wait_comm(pid, name, timeout=WAIT):
    """Waits until pid runs the program name (has exec'd it)."""
    end = time.monotonic() + timeout
    while True:
        try:
            with open('/proc/%d/comm' % pid) as f:
                if f.read().strip() == name:
                    return True
        except OSError:
            return False
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)


def cpu_seconds(pid):
    with open('/proc/%d/stat' % pid) as f:
        s = f.read()
    fields = s[s.rindex(')') + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


class AgentError(Exception):
    pass


def parse_event(pl):
    """A 'Y' payload: (event, dir, cookie, path as str), or the bytes when
    malformed."""
    w = pl.split(b' ', 3)
    if len(w) != 4 or not w[1] in (b'0', b'1') or not w[2].isdigit():
        return pl
    return (w[0].decode('ascii', 'replace'), int(w[1]), int(w[2]),
            os.fsdecode(w[3]))


def parse_entry(pl):
    """An 'N' payload: {name bytes: (type, mode, size, mtime)}; None when
    malformed."""
    w = pl.split(b' ', 4)
    if len(w) != 5 or not all(x.isdigit() for x in w[2:4]):
        return None
    try:
        mode = int(w[1], 8)
    except ValueError:
        return None
    return w[4], (w[0].decode('ascii', 'replace'), mode, int(w[2]),
                  int(w[3]))


# ---- the host end ----------------------------------------------------------
class Chan:
    """One channel as the host sees it."""

    def __init__(self, cid, kind):
        self.id = cid
        self.kind = kind
        self.out = bytearray()
        self.err = bytearray()
        self.exit = None        # the 'X' text
        self.fail = None        # the 'F' text that ended it
        self.in_use = None      # an 'F' for a request refused on it, live
        self.expect_in_use = False
        self.autoack = True     # 'A' whatever comes, as soon as read
        self.unacked = 0        # 'O'/'R' bytes not acknowledged yet
        self.max_unacked = 0
        self.max_frame = 0
        self.in_sent = 0        # 'I' bytes sent
        self.in_acked = 0       # ... acknowledged by 'a'
        self.cut = False        # ended by a ping (its pong came)
        self.late = []          # frames after its end
        self.started = None     # the 'S' text (a detached process)
        self.procs = []         # the 'Q' texts (of an 'L')
        self.rings = []         # the 'M' texts (of a 'G')
        self.entries = []       # the 'N' payloads (of an 'l'), as bytes
        self.events = []        # the 'Y' payloads (of a 'V'), as tuples

    @property
    def done(self):
        return (self.exit is not None or self.fail is not None or
                self.started is not None)

    def __repr__(self):
        return '<%s channel %d: %d+%d bytes, %r %r>' % (
            self.kind, self.id, len(self.out), len(self.err), self.exit,
            self.fail)

    def lines(self):
        return bytes(self.out).decode('utf-8', 'replace').split()


def ignore_int_quit():
    """As sh starts a background job (the guest's init starts the agent
    so): SIGINT and SIGQUIT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


class Agent:
    def __init__(self, ctx, name, preexec=None, wrap=(), listen=False):
        """An agent on one end of a socketpair; with listen, on a
        listening socket (BERTH_AGENT_PORT_LISTEN) it accepts connections
        on in turn, so the host can go away and come back (reconnect)."""
        self.ctx = ctx
        self.name = name
        self.listen = None
        env = dict(os.environ)
        env[MARK] = ctx.token
        if listen:
            self.listen = os.path.join(ctx.tmp, 'port-%s' % name)
            theirs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            theirs.bind(self.listen)
            theirs.listen(4)
            env['BERTH_AGENT_PORT_LISTEN'] = str(theirs.fileno())
        else:
            self.sock, theirs = socket.socketpair()
            self.sock.setblocking(False)
            env['BERTH_AGENT_PORT_FD'] = str(theirs.fileno())
        self.log = os.path.join(ctx.tmp, 'agent-%s.log' % name)
        with open(self.log, 'wb') as log:
            self.proc = subprocess.Popen(
                list(wrap) + [AGENT], env=env, pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=preexec)
        theirs.close()
        if listen:
            self.sock = self._connect()
        ctx.agents.append(self)
        self.rbuf = bytearray()
        self.outbox = bytearray()
        self.ch = {}
        self.chans = []         # every channel ever opened, reused ids too
        self.next_id = 1
        self.pongs = []
        self.cut_at_pong = []
        self.gone = False       # the agent closed its end
        self.closed = False     # we closed ours
        self.stray = []         # frames for channels never opened

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.listen)      # queued until the agent accepts it
        s.setblocking(False)
        return s

    def reconnect(self):
        """Our end goes away and a new connection comes (a listening
        agent only; a ping should follow, as berthd's): the channels of
        the old one have ended, nothing may come for them after."""
        self.sock.close()
        for c in self.ch.values():
            if not c.done:
                c.cut = True
        self.rbuf.clear()
        self.outbox.clear()
        self.gone = False
        self.sock = self._connect()

    # -- frames in
    def _recv(self):
        try:
            d = self.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except ConnectionResetError:
            d = b''
        if not d:
            self.gone = True
            self.outbox.clear()
            return
        self.rbuf += d
        credit = []
        while len(self.rbuf) >= 5:
            n, t = struct.unpack_from('>IB', self.rbuf)
            if n > MAX_PAYLOAD:
                raise AgentError('a frame of %d bytes (> BA_MAX_PAYLOAD)' % n)
            if len(self.rbuf) < 5 + n:
                break
            pl = bytes(self.rbuf[5:5 + n])
            del self.rbuf[:5 + n]
            c = self._frame(chr(t), pl)
            if c is not None and c not in credit:
                credit.append(c)
        for c in credit:            # one 'A' per channel per read
            if c.autoack and c.unacked:
                self._ack(c, c.unacked)

    def _frame(self, t, pl):
        if t == 'p':
            self.pongs.append(pl)
            for c in self.cut_at_pong:
                c.cut = True
            self.cut_at_pong = []
            return None
        if len(pl) < 4:
            self.stray.append((t, None, pl[:40]))
            return None
        cid = struct.unpack('>I', pl[:4])[0]
        pl = pl[4:]
        c = self.ch.get(cid)
        if c is None:
            self.stray.append((t, cid, pl[:40]))
            return None
        if c.done or c.cut:
            c.late.append((t, pl[:40]))
            return None
        if t in 'OR':
            (c.out if t == 'O' else c.err).extend(pl)
            c.unacked += len(pl)
            c.max_unacked = max(c.max_unacked, c.unacked)
            c.max_frame = max(c.max_frame, len(pl))
            return c
        if t in 'NY':
            # window credit like 'O' (agent_proto.h)
            if t == 'N':
                c.entries.append(pl)
            else:
                c.events.append(parse_event(pl))
            c.unacked += len(pl)
            c.max_unacked = max(c.max_unacked, c.unacked)
            return c
        if t == 'X':
            c.exit = pl.decode('utf-8', 'replace')
        elif t == 'F' and c.expect_in_use:
            c.in_use = pl.decode('utf-8', 'replace')
            c.expect_in_use = False
        elif t == 'F':
            c.fail = pl.decode('utf-8', 'replace')
        elif t == 'a' and len(pl) == 4:
            c.in_acked += struct.unpack('>I', pl)[0]
        elif t == 'S':
            c.started = pl.decode('utf-8', 'replace')
        elif t == 'Q':
            c.procs.append(pl.decode('utf-8', 'replace'))
        elif t == 'M':
            c.rings.append(pl.decode('utf-8', 'replace'))
        else:
            self.stray.append((t, cid, pl[:40]))
        return None

    # -- frames out
    def _queue(self, t, payload=b'', cid=None):
        if cid is not None:
            payload = struct.pack('>I', cid) + payload
        self.outbox += struct.pack('>IB', len(payload), ord(t)) + payload

    def _ack(self, c, n):
        self._queue('A', struct.pack('>I', n), c.id)
        c.unacked -= min(n, c.unacked)

    def _send_some(self):
        try:
            n = self.sock.send(self.outbox[:1 << 16])
            del self.outbox[:n]
        except BlockingIOError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.gone = True
            self.outbox.clear()

    def _io(self, cond, timeout):
        """Sends what is queued and reads (always: an agent blocked on
        its port reads nothing) until cond() holds; False at timeout or
        when the agent is gone first."""
        end = time.monotonic() + timeout
        while True:
            if not self.outbox and (cond is None or cond()):
                return True
            if self.gone or self.closed:
                return cond is not None and cond()
            left = end - time.monotonic()
            if left <= 0:
                return False
            r, w, _ = select.select([self.sock],
                                    [self.sock] if self.outbox else [], [],
                                    left)
            if r:
                self._recv()
            if w and self.outbox:
                self._send_some()

    def send(self, t, payload=b'', cid=None):
        self._queue(t, payload, cid)
        if not self._io(None, WAIT) and not self.gone:
            raise AgentError('could not send a frame in %d s' % WAIT)

    def wait(self, cond, timeout=WAIT):
        return self._io(cond, timeout)

    def done(self, c, timeout=WAIT):
        return self._io(lambda: c.done, timeout)

    def need(self, cond, what, timeout=WAIT):
        """A precondition of a test: its absence ends the test."""
        if not self._io(cond, timeout):
            raise AgentError('%s: not within %d s%s' % (
                what, timeout, ' (the agent closed its port)'
                if self.gone else ''))

    # -- requests
    def _open(self, t, fields, cid, kind):
        if cid is None:
            cid = self.next_id
        self.next_id = max(self.next_id, cid) + 1
        c = Chan(cid, kind)
        self.ch[cid] = c
        self.chans.append(c)
        self.send(t, b''.join(f.encode() + b'\0' for f in fields), cid)
        return c

    def run(self, argv, timeout_ms=0, user=None, cwd=None, tty=None,
            env=(), cid=None):
        f = ['t%d' % timeout_ms]
        if user is not None:
            f.append('u' + user)
        if cwd is not None:
            f.append('c' + cwd)
        if tty is not None:
            f.append('T' + tty)
        f += ['a' + a for a in argv]
        f += ['e%s=%s' % (MARK, self.ctx.token)] + ['e' + e for e in env]
        return self._open('E', f, cid, 'cmd')

    def put(self, path, mode, cid=None):
        return self._open('w', ['t0', 'p' + path, 'm%o' % mode], cid, 'put')

    def get(self, path, cid=None, offset=None, length=None):
        f = ['t0', 'p' + path]
        if offset is not None:
            f.append('o%s' % offset)
        if length is not None:
            f.append('n%s' % length)
        return self._open('g', f, cid, 'get')

    def ls(self, path, max_entries=None, cid=None):
        f = ['t0', 'p' + path]
        if max_entries is not None:
            f.append('n%s' % max_entries)
        return self._open('l', f, cid, 'ls')

    def fsop(self, t, fields, timeout_ms=0):
        """An 'm', 'x' or 'v', waited for: its channel."""
        c = self._open(t, ['t%d' % timeout_ms] + fields, None, 'fs')
        self.need(lambda: c.done, "the '%s' answer" % t)
        return c

    def mkdir(self, path, mode=None, parents=False):
        f = ['p' + path]
        if mode is not None:
            f.append('m%o' % mode)
        if parents:
            f.append('r')
        return self.fsop('m', f)

    def remove(self, path, recursive=False):
        return self.fsop('x', ['p' + path] + (['r'] if recursive else []))

    def move(self, src, dst, overwrite=False):
        return self.fsop('v', ['p' + src, 'd' + dst] +
                         (['o'] if overwrite else []))

    def watch(self, path, recursive=False, cid=None):
        return self._open('V', ['p' + path] + (['r'] if recursive else []),
                          cid, 'watch')

    def identity(self, fields):
        """A 'U' of fields (each its tag and text), waited for: its
        channel."""
        c = self._open('U', fields, None, 'identity')
        self.need(lambda: c.done, "the 'U' answer")
        return c

    def kill(self, c, sig):
        self.send('K', str(sig).encode(), c.id)

    def detach(self, argv, ring, timeout_ms=0, keep=False, tty=None,
               cid=None):
        """An 'E' with 'D<ring>': its channel (answered 'S' or 'F')."""
        f = ['t%d' % timeout_ms, 'D%d' % ring]
        if keep:
            f.append('k')
        if tty is not None:
            f.append('T' + tty)
        f += ['a' + a for a in argv]
        f += ['e%s=%s' % (MARK, self.ctx.token)]
        return self._open('E', f, cid, 'detach')

    def logs(self, proc, offset=None, follow=False, cid=None):
        f = ['i%d' % proc]
        if offset is not None:
            f.append('o%d' % offset)
        if follow:
            f.append('f')
        return self._open('G', f, cid, 'logs')

    def attach(self, proc, size=None, offset=None, cid=None):
        """An 'H': a client of the process (answered 'M', its ring, its
        output as it comes)."""
        f = ['i%d' % proc]
        if size is not None:
            f.append('T' + size)
        if offset is not None:
            f.append('o%d' % offset)
        return self._open('H', f, cid, 'attach')

    def signal(self, proc, sig, cid=None):
        """A 'Z', waited for: its channel."""
        c = self._open('Z', ['i%d' % proc, 's%d' % sig], cid, 'signal')
        self.need(lambda: c.done, "the 'Z' answer")
        return c

    def procs(self):
        """An 'L', waited for: {proc: its 'Q' fields as a dict}, and the
        channel."""
        c = self._open('L', [], None, 'list')
        self.need(lambda: c.done, "the 'L' answer")
        out = {}
        for q in c.procs:
            w = q.split(' ', 6)
            out[int(w[0])] = dict(
                proc=int(w[0]), pid=int(w[1]), state=w[2], start=int(w[3]),
                keep=int(w[4]), total=int(w[5]),
                cmd=w[6] if len(w) > 6 else '')
        return out, c

    def state(self, proc, want, timeout=WAIT):
        """Lists until proc's state is one of want (bounded): the last
        state seen (None: not listed)."""
        end = time.monotonic() + timeout
        while True:
            ps, _ = self.procs()
            st = ps[proc]['state'] if proc in ps else None
            if st in want or time.monotonic() >= end:
                return st
            time.sleep(0.02)

    def ack(self, c, n=None):
        self._ack(c, c.unacked if n is None else n)
        self._io(None, WAIT)

    def stdin(self, c, data):
        """'I' as is, outside any window bookkeeping but the count."""
        self.send('I', data, c.id)
        c.in_sent += len(data)

    def feed(self, items, eof=True):
        """Sends each (channel, bytes) as its stdin, side by side, in
        frames of at most BA_CHUNK and never more than BA_WINDOW
        unacknowledged; then EOF (an empty 'I') unless eof is False."""
        todo = [[c, memoryview(d), 0] for c, d in items]

        def room(c):
            return WINDOW - (c.in_sent - c.in_acked)

        while todo:
            for it in list(todo):
                c, d, off = it
                if off == len(d):
                    if eof:
                        self._queue('I', b'', c.id)
                    todo.remove(it)
                    continue
                n = min(CHUNK, room(c), len(d) - off)
                if n > 0:
                    self._queue('I', bytes(d[off:off + n]), c.id)
                    c.in_sent += n
                    it[2] = off + n
            if self.gone:
                raise AgentError('the agent closed its port during stdin')
            # on when one of them can go on (sent all: its EOF is next)
            self.need(lambda: not todo or any(
                room(it[0]) > 0 or it[2] == len(it[1]) for it in todo),
                'stdin credit')
            for c, d, off in todo:
                if c.in_sent - c.in_acked > WINDOW:
                    raise AgentError('the host went past the window')

    def ping(self, nonce, timeout=WAIT):
        """A session: the pong for nonce, or None."""
        self.cut_at_pong = [c for c in self.ch.values() if not c.done]
        self.pongs = []
        self.send('P', nonce)
        self.wait(lambda: self.pongs, timeout)
        return self.pongs[0] if self.pongs else None

    def round_trip(self):
        """A command run to its end on a new channel: the agent has been
        round its loop (read its port, forked, polled, reaped) since."""
        c = self.run(['true'])
        self.need(lambda: c.done, 'a round trip (`true`)')
        if c.exit != 'exit 0':
            raise AgentError('`true` ended %r %r' % (c.exit, c.fail))

    # -- the end
    def close(self):
        """Our end goes away; the agent's exit status (None: it stayed).
        A listening agent would wait for the next connection: it is
        ended (SIGTERM)."""
        if not self.closed:
            self.closed = True
            self.sock.close()
            if self.listen:
                self.proc.terminate()
        try:
            return self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self):
        if not self.closed:
            self.closed = True
            self.sock.close()
            if self.listen:
                self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self):
        try:
            with open(self.log, 'rb') as f:
                return f.read()[-2000:].decode('utf-8', 'replace')
        except OSError:
            return ''


class Ctx:
    def __init__(self):
        self.t = Tap()
        self.token = '%d-%s' % (os.getpid(), os.urandom(6).hex())
        self.tmp = os.path.realpath(
            tempfile.mkdtemp(prefix='berth-agent-proto.'))
        self.root = os.geteuid() == 0
        self.agents = []

    def agent(self, name, preexec=None, wrap=(), listen=False):
        a = Agent(self, name, preexec, wrap, listen)
        nonce = b'hello-' + name.encode()
        pong = a.ping(nonce)
        if pong != nonce + bytes([PROTO]):
            raise AgentError('no pong of protocol %d to the first ping: %r'
                             % (PROTO, pong))
        return a

    def path(self, name):
        return os.path.join(self.tmp, name)

    def temp_files(self):
        return sorted(f for f in os.listdir(self.tmp) if '.berth-' in f)

    def cleanup(self):
        for a in self.agents:
            a.terminate()
        for _ in range(10):
            left = marked(self.token)
            if not left:
                break
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            wait_gone(left, 5)
        if os.environ.get('KEEP_TMP'):
            Tap.diag('kept %s' % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---- the tests -------------------------------------------------------------
def test_ping(ctx):
    t = ctx.t
    a = Agent(ctx, 'ping')
    t.is_(a.ping(b'nonce123'), b'nonce123' + bytes([PROTO]),
          "'P' is answered by 'p': the nonce, then the protocol byte %d"
          % PROTO)
    t.is_(a.ping(b'another'), b'another' + bytes([PROTO]),
          'a second ping gets its own nonce back')
    a.close()


def test_side_by_side(ctx):
    t = ctx.t
    a = ctx.agent('side')
    # each prints when it starts and when it ends: run one after another,
    # the second would start only once the first had ended
    cs = [a.run(['sh', '-c', 'date +%s.%N; sleep 2; date +%s.%N'])
          for _ in range(3)]
    a.wait(lambda: all(c.done for c in cs))
    try:
        spans = [tuple(float(x) for x in c.lines()) for c in cs]
        starts = [s for s, _ in spans]
        ends = [e for _, e in spans]
        overlap = max(starts) < min(ends)
    except ValueError:
        overlap = False
    t.ok(all(c.exit == 'exit 0' for c in cs) and overlap,
         'three `sleep 2` on channels %s ran side by side (all three '
         'started before the first ended)' % ', '.join(str(c.id) for c in cs),
         *['channel %d: %r %r' % (c.id, bytes(c.out), c.exit) for c in cs])
    a.close()


def test_window(ctx):
    t = ctx.t
    a = ctx.agent('window')
    big = a.run(['head', '-c', '2000000', '/dev/zero'])
    big.autoack = False
    a.need(lambda: len(big.out) >= WINDOW, 'the first %d bytes' % WINDOW)
    hi = a.run(['echo', 'hi'])
    a.done(hi)
    t.ok(hi.exit == 'exit 0' and hi.out == b'hi\n',
         "another channel's `echo hi` completes while the first waits "
         'for credit', 'got %r %r %r' % (bytes(hi.out), hi.exit, hi.fail))
    a.round_trip()
    t.ok(len(big.out) == WINDOW and not big.done,
         'an unacknowledged `head -c 2000000 /dev/zero` stops at exactly '
         'BA_WINDOW (%d) bytes outstanding' % WINDOW,
         'got %d bytes, exit %r' % (len(big.out), big.exit))
    a.ack(big, 1000)
    a.need(lambda: len(big.out) >= WINDOW + 1000, '1000 more bytes')
    a.round_trip()
    t.is_(len(big.out), WINDOW + 1000,
          "an 'A' of 1000 lets exactly 1000 more bytes out")
    big.autoack = True
    a.ack(big)
    a.done(big, 2 * WAIT)
    t.ok(big.exit == 'exit 0' and bytes(big.out) == bytes(2000000),
         "acknowledged, the rest follows: 2000000 zero bytes, then 'X' "
         "'exit 0'", 'got %d bytes, exit %r' % (len(big.out), big.exit))
    t.ok(0 < big.max_frame <= CHUNK,
         "its 'O' frames carry at most BA_CHUNK (%d) bytes" % CHUNK,
         'largest: %d' % big.max_frame)

    # stdout and stderr draw on one window
    both = a.run(['sh', '-c', 'head -c 200000 /dev/zero; '
                  'head -c 200000 /dev/zero >&2'])
    both.autoack = False
    a.need(lambda: len(both.out) + len(both.err) >= WINDOW, 'a window')
    a.round_trip()
    t.ok(len(both.out) + len(both.err) == WINDOW and not both.done,
         "'O' and 'R' share the channel's window (%d + %d outstanding)"
         % (len(both.out), len(both.err)))
    both.autoack = True
    a.ack(both)
    a.done(both)
    t.ok(both.exit == 'exit 0' and bytes(both.out) == bytes(200000) and
         bytes(both.err) == bytes(200000),
         'acknowledged, both streams complete (200000 bytes each)',
         'got %d + %d, %r' % (len(both.out), len(both.err), both.exit))
    a.close()


def test_stdin(ctx):
    t = ctx.t
    a = ctx.agent('stdin')
    cat = a.run(['cat'])
    a.stdin(cat, b'hello\n')
    a.wait(lambda: cat.out == b'hello\n' and cat.in_acked == 6)
    t.ok(cat.out == b'hello\n' and cat.in_acked == 6 and not cat.done,
         "'I' to `cat` comes back as 'O', and an 'a' acknowledges its 6 "
         'bytes', 'got %r, %d acknowledged' % (bytes(cat.out), cat.in_acked))
    data = os.urandom(3 * 1024 * 1024)
    a.feed([(cat, data)])
    a.done(cat, 2 * WAIT)
    t.ok(cat.exit == 'exit 0' and bytes(cat.out) == b'hello\n' + data,
         '3 MB of stdin sent within the window comes back intact; an empty '
         "'I' (EOF) ends it: 'exit 0'",
         'got %d bytes, %r' % (len(cat.out), cat.exit))
    t.is_(cat.in_acked, 6 + len(data),
          "'a' frames acknowledge every byte of stdin")
    a.close()


def test_exit(ctx):
    t = ctx.t
    a = ctx.agent('exit')
    e = a.run(['sh', '-c', 'echo out; echo err >&2; exit 3'])
    a.done(e)
    t.ok(e.out == b'out\n' and e.err == b'err\n',
         "stdout comes as 'O', stderr as 'R'",
         'got %r / %r' % (bytes(e.out), bytes(e.err)))
    t.is_(e.exit, 'exit 3', "'X' says 'exit 3' for `exit 3`")
    m = a.run(['berth-no-such-command'])
    a.done(m)
    t.ok(m.exit == 'exit 127' and b'berth-no-such-command' in m.err,
         "a missing command: 'exit 127', and 'R' says which",
         'got %r %r' % (m.exit, bytes(m.err)))
    b = a.run(['pwd'], cwd='/berth/no/such/dir')
    a.done(b)
    t.ok(b.exit == 'exit 126' and b'cd /berth/no/such/dir' in b.err,
         "a cwd that does not exist: 'exit 126', and 'R' says why",
         'got %r %r' % (b.exit, bytes(b.err)))
    v = a.run(['sh', '-c', 'echo "$FOO $HOME $TERM"; pwd'], cwd=ctx.tmp,
              env=['FOO=bar', 'HOME=/h'])
    a.done(v)
    t.is_(bytes(v.out), ('bar /h dumb\n%s\n' % ctx.tmp).encode(),
          "'e' adds to the environment and replaces a default (HOME), "
          "'c' sets the directory")
    a.close()


def test_signals_reset(ctx):
    t = ctx.t
    a = ctx.agent('sigign', preexec=ignore_int_quit)
    e = a.run(['sh', '-c', "grep SigIgn /proc/self/status"])
    a.done(e)
    f = bytes(e.out).split()
    # 32 and 33 are glibc's own (its threads' cancel and setxid): no
    # program sends them, and signal() cannot change them
    ign = int(f[1], 16) & ~((1 << 31) | (1 << 32)) if len(f) == 2 else -1
    t.ok(ign == 0, "an agent started with SIGINT and SIGQUIT ignored (as "
         "init's background job): its commands ignore no signal",
         'got %r' % bytes(e.out))
    a.close()


def test_kill(ctx):
    t = ctx.t
    a = ctx.agent('kill')
    s = a.run(['sh', '-c', 'echo ready; exec sleep 100'])
    a.need(lambda: s.out == b'ready\n', 'sleep 100 started')
    a.kill(s, 9)
    a.done(s)
    t.is_(s.exit, 'signal 9', "'K' 9 ends `sleep 100`: 'X' 'signal 9'")
    g = a.run(['sh', '-c', 'trap "echo got TERM; exit 7" TERM; '
               'sleep 100 & echo $!; wait'])
    a.need(lambda: g.out.endswith(b'\n'), 'the trap set')
    bg = int(g.out)
    # until it has exec'd, the child of the shell still has the trap's
    # handler: a TERM then would be the shell's, and sleep would run on
    if not wait_comm(bg, 'sleep'):
        raise AgentError('pid %d never ran sleep' % bg)
    a.kill(g, 15)
    a.done(g)
    t.ok(g.exit == 'exit 7' and b'got TERM' in g.out and wait_gone([bg], 10),
         "'K' 15 goes to the process group: the shell's trap runs "
         "('exit 7') and its background `sleep 100` ends",
         'got %r %r, background pid %d %s' % (
             bytes(g.out), g.exit, bg, 'alive' if alive(bg) else 'gone'))
    a.close()


def test_timeout(ctx):
    t = ctx.t
    a = ctx.agent('timeout')
    t0 = time.monotonic()
    s = a.run(['sleep', '100'], timeout_ms=500)
    a.done(s)
    dt = time.monotonic() - t0
    t.is_(s.exit, 'signal 9 timeout',
          "`sleep 100` with 't500' is killed at its deadline: 'signal 9 "
          "timeout'")
    t.ok(0.49 <= dt < WAIT,
         'not before the deadline, and long before the command would have '
         'ended (%.2f s)' % dt)
    q = a.run(['true'], timeout_ms=60000)
    a.done(q)
    t.is_(q.exit, 'exit 0', "a command done before its deadline: 'exit 0', "
          'no timeout')
    a.close()


def test_background(ctx):
    t = ctx.t
    a = ctx.agent('background')
    s = a.run(['sh', '-c', 'sleep 300 & echo $!'])
    finished = a.done(s)       # WAIT, not the 300 s the child holds stdout
    bg = int(s.out) if s.out.strip().isdigit() else 0
    holding = bg > 0 and alive(bg)
    t.ok(finished and s.exit == 'exit 0' and holding,
         "a background child holding stdout (`sleep 300 &`) does not hold "
         "back 'X'", 'got %r %r, child %d %s' % (
             bytes(s.out), s.exit, bg, 'alive' if holding else 'not alive'))
    if bg > 0:
        try:
            os.kill(bg, signal.SIGKILL)
        except OSError:
            pass
    a.close()


def test_files(ctx):
    t = ctx.t
    a = ctx.agent('files')
    path = ctx.path('put.bin')
    data = os.urandom(1500000)
    p = a.put(path, 0o640)
    a.feed([(p, data)])
    a.done(p)
    t.ok(p.exit == 'exit 0' and p.in_acked == len(data),
         "a file put of 1.5 MB: 'a' acknowledges every byte, 'X' 'exit 0'",
         'got %r %r, %d acknowledged' % (p.exit, p.fail, p.in_acked))
    try:
        with open(path, 'rb') as f:
            same = f.read() == data
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as e:
        same, mode = False, str(e)
    t.ok(same and mode == 0o640, 'the file has its bytes and mode 0640',
         'same bytes: %r, mode %s' % (same, oct(mode) if
                                      isinstance(mode, int) else mode))
    t.is_(ctx.temp_files(), [], 'no temporary file is left beside it')

    g = a.get(path)
    a.done(g, 2 * WAIT)
    t.ok(g.exit == 'exit 0' and bytes(g.out) == data and
         g.max_frame <= CHUNK,
         "a file get of it: the same 1.5 MB back in 'O' frames of at most "
         "BA_CHUNK, then 'exit 0'", 'got %d bytes, %r %r, largest frame %d'
         % (len(g.out), g.exit, g.fail, g.max_frame))

    g = a.get(path)
    g.autoack = False
    a.need(lambda: len(g.out) >= WINDOW, 'a window of the get')
    a.round_trip()
    t.ok(len(g.out) == WINDOW and not g.done,
         'an unacknowledged get stops at the window',
         'got %d bytes, %r' % (len(g.out), g.exit))
    a.kill(g, 9)
    a.done(g)
    t.is_(g.fail, '409 cancelled', "'K' on a get: 'F' '409 cancelled'")

    p = a.put(path, 0o600)
    a.stdin(p, b'partial')
    a.round_trip()
    with open(path, 'rb') as f:
        kept = f.read() == data
    tmps = ctx.temp_files()
    t.ok(kept and len(tmps) == 1,
         'a put in progress writes a temporary file beside the path, not '
         'the path',
         'old content kept: %r, temporary files: %r' % (kept, tmps))
    a.kill(p, 9)
    a.done(p)
    with open(path, 'rb') as f:
        kept = f.read() == data
    t.ok(p.fail == '409 cancelled' and kept and not ctx.temp_files(),
         "'K' on a put: 'F' '409 cancelled', its temporary file gone, the "
         'file as it was', 'got %r, old content kept: %r, temporary files: '
         '%r' % (p.fail, kept, ctx.temp_files()))

    g = a.get(ctx.path('does-not-exist'))
    a.done(g)
    t.ok(g.fail is not None and g.fail.startswith('404 '),
         "a get of a missing file: 'F' '404 ...'", 'got %r' % g.fail)
    p = a.put(ctx.path('no-such-dir/f'), 0o644)
    a.done(p)
    t.ok(p.fail is not None and p.fail.startswith('404 '),
         "a put into a missing directory: 'F' '404 ...'", 'got %r' % p.fail)
    p = a.put('relative/path', 0o644)
    a.done(p)
    g = a.get('relative/path')
    a.done(g)
    t.ok(p.fail is not None and p.fail.startswith('400 ') and
         g.fail is not None and g.fail.startswith('400 '),
         "a relative path: 'F' '400 ...' for a put and a get",
         'got %r / %r' % (p.fail, g.fail))

    s = a.run(['sh', '-c', 'read x; echo got $x'])
    p = a.put(ctx.path('beside'), 0o644)
    a.stdin(p, b'abc')
    a.stdin(p, b'')
    a.done(p)
    a.stdin(s, b'42\n')
    a.done(s)
    t.ok(p.exit == 'exit 0' and s.out == b'got 42\n' and s.exit == 'exit 0',
         'a put completes beside a command waiting for its stdin',
         'got %r / %r %r' % (p.exit, bytes(s.out), s.exit))
    a.close()


def test_users(ctx):
    t = ctx.t
    a = ctx.agent('users')
    u = a.run(['id'], user='berth-no-such-user')
    a.done(u)
    t.ok(u.fail is not None and u.fail.startswith('400 ') and
         'berth-no-such-user' in u.fail,
         "an unknown user: 'F' '400 ...' naming it", 'got %r %r'
         % (u.fail, u.exit))
    desc = "'u' nobody: the command runs as nobody, with its groups and HOME"
    try:
        pw = pwd.getpwnam('nobody')
    except KeyError:
        pw = None
    if not ctx.root:
        t.skip(desc, 'needs root (the agent switches users)')
    elif pw is None:
        t.skip(desc, 'no user nobody here')
    else:
        n = a.run(['sh', '-c', 'id -u; id -g; echo "$HOME $USER"'],
                  user='nobody')
        a.done(n)
        t.is_(bytes(n.out), ('%d\n%d\n%s nobody\n' % (
            pw.pw_uid, pw.pw_gid, pw.pw_dir)).encode(), desc,
            'exit %r, stderr %r' % (n.exit, bytes(n.err)))
    a.close()


def test_channels(ctx):
    t = ctx.t
    a = ctx.agent('channels')
    live = a.run(['cat'], cid=60)
    a.stdin(live, b'one\n')
    a.need(lambda: live.out == b'one\n', 'cat on channel 60')
    live.expect_in_use = True
    a.send('E', b't0\0aecho\0', 60)
    a.wait(lambda: live.in_use is not None)
    t.is_(live.in_use, '400 channel 60 is in use',
          "an 'E' on a live channel's id: 'F' '400 channel 60 is in use'")
    live.expect_in_use = True
    a.send('g', ('t0\0p%s\0' % PROTO_H).encode(), 60)
    a.wait(lambda: live.in_use is not None)
    t.is_(live.in_use, '400 channel 60 is in use', "a 'g' on it too")

    # frames for channels nobody opened, a type nobody knows, a credit
    # larger than anything outstanding: no answer, nothing ends
    for ty, pl in (('I', b'x'), ('W', b'10 10'), ('K', b'9'),
                   ('A', b'\0\0\0\1')):
        a.send(ty, pl, 999)
    a.send('E', b't0\0aecho\0aon channel 0\0', 0)
    a.send('A', b'\xff\xff\xff\xff', 60)
    a.send('Y', b'zz', 60)
    z = a._open('Y', ['zz'], 998, 'unknown')
    a.done(z)
    t.ok(z.fail is not None and z.fail.startswith("400 unknown request 'Y'"),
         "an unknown request type on a new channel: 'F' '400 unknown "
         "request'", 'got %r' % z.fail)
    a.stdin(live, b'two\n')
    a.wait(lambda: live.out == b'one\ntwo\n')
    a.stdin(live, b'')
    a.done(live)
    t.ok(live.out == b'one\ntwo\n' and live.exit == 'exit 0',
         'the live channel survives the requests refused on its id, an '
         'unknown type and a huge credit: it echoes on, then exits 0',
         'got %r %r %r' % (bytes(live.out), live.exit, live.fail))
    a.close()


def test_tty(ctx):
    t = ctx.t
    a = ctx.agent('tty')
    s = a.run(['sh', '-c', 'stty size; tty; echo $TERM'], tty='24 80')
    a.done(s)
    w = s.lines()
    t.ok(s.exit == 'exit 0' and len(w) == 4 and w[:2] == ['24', '80'] and
         w[2].startswith('/dev/pts/') and w[3] == 'xterm' and not s.err,
         "'T' 24 80: a terminal of that size, TERM=xterm, output in 'O' only",
         'got %r %r, stderr %r' % (bytes(s.out), s.exit, bytes(s.err)))

    r = a.run(['sh', '-c', 'stty size; read x; stty size'], tty='24 80')
    a.need(lambda: b'24 80' in r.out, 'the first size')
    a.send('W', b'30 100', r.id)
    a.stdin(r, b'go\n')
    a.done(r)
    t.ok(r.exit == 'exit 0' and r.out.endswith(b'30 100\r\n'),
         "'W' 30 100 resizes the terminal", 'got %r %r' % (bytes(r.out),
                                                            r.exit))

    c = a.run(['cat'], tty='0 0')
    a.stdin(c, b'typed\n')
    a.wait(lambda: c.out.count(b'typed') == 2 and c.in_acked == 6)
    a.stdin(c, b'')
    a.done(c)
    t.ok(c.exit == 'exit 0' and c.out.count(b'typed') == 2 and
         c.in_acked == 6,
         "`cat` on a terminal: the line echoed and catted, an empty 'I' "
         "(^D) ends it", 'got %r %r, %d acknowledged' % (
             bytes(c.out), c.exit, c.in_acked))

    good = 0
    for i in range(20):
        q = a.run(['sh', '-c', 'echo tty-tail-%d' % i], tty='0 0')
        a.done(q)
        good += q.exit == 'exit 0' and (b'tty-tail-%d' % i) in q.out
    t.is_(good, 20, "a quick command's terminal output always comes "
          "before its 'X' (of 20)")
    a.close()


def test_ping_ends(ctx):
    t = ctx.t
    a = ctx.agent('reping')
    s = a.run(['sh', '-c', 'echo $$; exec sleep 100'], cid=100)
    a.need(lambda: s.out.endswith(b'\n'), 'sleep 100 started')
    pid = int(s.out)
    if not alive(pid):
        raise AgentError('sleep 100 (pid %d) is not running' % pid)
    pong = a.ping(b'second')
    t.is_(pong, b'second' + bytes([PROTO]),
          'a new ping while `sleep 100` runs is answered')
    t.ok(wait_gone([pid], 10), 'the ping ended the command: pid %d is gone'
         % pid)
    a.round_trip()
    t.ok(s.cut and not s.late and s.exit is None,
         'no frame comes for its channel after the pong',
         'after the pong: %r' % s.late[:3])
    e = a.run(['echo', 'again'], cid=100)
    a.done(e)
    t.ok(e.exit == 'exit 0' and e.out == b'again\n',
         'its channel id can be used again',
         'got %r %r %r' % (bytes(e.out), e.exit, e.fail))
    a.close()


def test_streams(ctx):
    t = ctx.t
    a = ctx.agent('streams')
    src = ctx.path('streams.bin')
    blob = os.urandom(1000000)
    with open(src, 'wb') as f:
        f.write(blob)
    data = [os.urandom(400000) for _ in range(16)]
    cats = [a.run(['cat']) for _ in data]
    gets = [a.get(src) for _ in range(4)]
    a.feed(list(zip(cats, data)))
    a.wait(lambda: all(c.done for c in cats + gets), 2 * WAIT)
    good = sum(c.exit == 'exit 0' and bytes(c.out) == d and
               c.in_acked == len(d) for c, d in zip(cats, data))
    goodg = sum(g.exit == 'exit 0' and bytes(g.out) == blob for g in gets)
    t.ok(good == len(cats) and goodg == len(gets),
         '16 `cat`s of 400 KB each and 4 gets of 1 MB at once: every stream '
         'intact', '%d/16 cats, %d/4 gets intact' % (good, goodg))
    a.close()


def test_idle(ctx):
    t = ctx.t
    a = ctx.agent('idle')
    src = ctx.path('idle.bin')
    with open(src, 'wb') as f:
        f.write(os.urandom(1000000))
    out = a.run(['head', '-c', '2000000', '/dev/zero'])
    get = a.get(src)
    sl = a.run(['sleep', '100'])            # takes no stdin
    done = a.run(['sh', '-c', 'echo $$; head -c 300000 /dev/zero'])
    for c in (out, get, done):
        c.autoack = False
    for _ in range(WINDOW // CHUNK):
        a.stdin(sl, b'y' * CHUNK)
    a.need(lambda: len(out.out) >= WINDOW and len(get.out) >= WINDOW and
           len(done.out) >= WINDOW, 'three windows')
    # the last one has ended, its rest waits for credit in its pipe
    pid = int(bytes(done.out).split(b'\n')[0])
    end = time.monotonic() + WAIT
    while os.path.exists('/proc/%d' % pid) and time.monotonic() < end:
        time.sleep(0.02)
    a.round_trip()
    # every channel waits: for credit, or for a command to read its
    # stdin. An agent that spun meanwhile would burn its CPU.
    c0 = cpu_seconds(a.proc.pid)
    time.sleep(2)
    used = cpu_seconds(a.proc.pid) - c0
    t.ok(used < 0.5, 'channels waiting for credit or stdin keep the agent '
         'idle (%.2f s of CPU in 2 s)' % used)
    for c in (out, get, done):
        c.autoack = True
        a.ack(c)
    a.kill(sl, 9)
    a.wait(lambda: all(c.done for c in (out, get, done, sl)), 2 * WAIT)
    t.ok(out.exit == 'exit 0' and len(out.out) == 2000000 and
         get.exit == 'exit 0' and len(get.out) == 1000000 and
         done.exit == 'exit 0' and
         len(done.out) == 300000 + len(str(pid)) + 1 and sl.exit == 'signal 9',
         'credit given, each completes (the ended one sends its rest)',
         'got %d %r, %d %r, %d %r, %r' % (
             len(out.out), out.exit, len(get.out), get.exit,
             len(done.out), done.exit, sl.exit))
    a.close()


def raise_limits(ctx):
    """The limits 1024 live commands need, raised as far as they must be
    (the agent inherits them); None, or why they cannot be."""
    inf = resource.RLIM_INFINITY

    def want(res, name, need):
        soft, hard = resource.getrlimit(res)
        if soft == inf or soft >= need:
            return None
        try:
            resource.setrlimit(res, (need, hard if hard == inf or
                                     hard >= need else need))
        except (ValueError, OSError) as e:
            return ('needs %s %d (limit %d, hard %s: %s)' % (
                name, need, soft, 'unlimited' if hard == inf else hard, e))
        return None

    # the agent holds out, err and in of each command
    why = want(resource.RLIMIT_NOFILE, 'RLIMIT_NOFILE',
               3 * MAX_CHANS + 64)
    if why is None and not ctx.root:
        # root is not held to RLIMIT_NPROC; others count every process
        # of their uid
        uid = os.getuid()
        mine = 0
        for d in os.listdir('/proc'):
            try:
                mine += d.isdigit() and os.stat('/proc/' + d).st_uid == uid
            except OSError:
                pass
        why = want(resource.RLIMIT_NPROC, 'RLIMIT_NPROC',
                   mine + MAX_CHANS + 64)
    return why


def test_max_chans(ctx):
    t = ctx.t
    descs = ("the %dth live channel gets 'F' '429 ...'" % (MAX_CHANS + 1),
             '%d channels were live at once' % MAX_CHANS,
             'with one ended, there is room again',
             'a ping ends the %d others: pong, and their processes gone'
             % (MAX_CHANS - 1))
    why = raise_limits(ctx)
    if why is not None:
        for d in descs:
            t.skip(d, why)
        return
    a = ctx.agent('maxchans')
    t0 = time.monotonic()
    cs = [a.run(['sleep', '600'], env=['BERTH_AGENT_BATCH=max'])
          for _ in range(MAX_CHANS)]
    extra = a.run(['echo', 'too many'])
    a.done(extra, 4 * WAIT)     # ~6 s here; bounded for a loaded host
    t.ok(extra.fail is not None and extra.fail.startswith('429 '),
         descs[0], 'got %r %r' % (extra.fail, extra.exit))
    ended = [c for c in cs if c.done]
    t.ok(not ended, descs[1] + ' (%.1f s)' % (time.monotonic() - t0),
         '%d ended, e.g. channel %d: %r %r' % (
             len(ended), ended[0].id, ended[0].exit, ended[0].fail)
         if ended else '')
    a.kill(cs[0], 9)
    a.done(cs[0])
    room = a.run(['echo', 'room'])
    a.done(room)
    t.ok(cs[0].exit == 'signal 9' and room.exit == 'exit 0' and
         room.out == b'room\n', descs[2],
         'got %r, then %r %r' % (cs[0].exit, room.exit, room.fail))
    pong = a.ping(b'third', 4 * WAIT)
    left = marked(ctx.token, 'BERTH_AGENT_BATCH=max')
    if left:
        wait_gone(left, 10)
        left = [p for p in left if alive(p)]
    t.ok(pong == b'third' + bytes([PROTO]) and not left, descs[3],
         'pong %r, %d still running' % (pong, len(left)))
    a.close()


def test_host_gone(ctx):
    t = ctx.t
    a = ctx.agent('gone')
    s = a.run(['sh', '-c', 'sleep 100 & echo $$ $!; wait'])
    a.need(lambda: s.out.endswith(b'\n'), 'the command started')
    pids = [int(x) for x in s.lines()]
    rc = a.close()
    t.is_(rc, 0, 'the host gone, the agent (on a given descriptor) exits 0')
    t.ok(wait_gone(pids, 10), "it killed the command's process group: "
         'the shell and its background `sleep 100` are gone',
         'still running: %r' % [p for p in pids if alive(p)])


def test_overrun(ctx):
    t = ctx.t
    a = ctx.agent('overrun')
    s = a.run(['sh', '-c', 'echo $$; exec sleep 100'])    # reads nothing
    a.need(lambda: s.out.endswith(b'\n'), 'the command started')
    pid = int(s.out)
    # a broken host: stdin far past the window (the agent holds up to
    # twice it, besides what the pipe takes)
    for _ in range(2 * WINDOW // CHUNK + 8):
        a._queue('I', b'x' * CHUNK, s.id)
    a.wait(lambda: a.gone)
    rc = a.close()
    t.ok(a.gone and rc == 0, 'a host past the stdin window breaks the '
         'protocol: the agent drops the connection (exits 0 here)',
         'port closed: %r, exit status %r' % (a.gone, rc))
    t.ok(wait_gone([pid], 10), 'and its command is killed')


# ---- detached processes ----------------------------------------------------
def started(c):
    """The (proc, pid) of an 'S' answer, or None."""
    m = re.match(r'^(\d+) (\d+)$', c.started or '')
    return (int(m.group(1)), int(m.group(2))) if m else None


def need_started(c):
    sp = started(c)
    if sp is None:
        raise AgentError('a detached process did not start: %r %r %r' % (
            c.started, c.exit, c.fail))
    return sp


def test_detach(ctx):
    t = ctx.t
    a = ctx.agent('detach')
    t0 = time.time()
    d = a.detach(['sh', '-c', 'echo a; sleep 0.2; echo b'], 4096)
    a.done(d)
    ps, _ = a.procs()
    a.round_trip()
    sp = started(d)
    t.ok(sp is not None and sp[0] == 1 and d.exit is None and
         d.fail is None and not d.late,
         "'E' with 'D4096': 'S' '<proc> <pid>' (proc 1), and its channel "
         "ends there (no 'X', nothing after)",
         'got %r %r %r, after: %r' % (d.started, d.exit, d.fail, d.late[:3]))
    proc, pid = need_started(d)
    q = ps.get(proc)
    t.ok(q is not None and q['state'] == 'running' and q['pid'] == pid,
         "'L' lists it as running, with its pid", 'got %r' % (q,))
    st = a.state(proc, ('exit:0',))
    t.is_(st, 'exit:0', "once it has ended, 'L' lists it as 'exit:0'")
    ps, l = a.procs()
    q = ps.get(proc) or {}
    t1 = time.time()
    t.ok(l.exit == 'exit 0' and q.get('total') == 4 and
         q.get('keep') == 0 and
         q.get('cmd') == 'sh -c echo a; sleep 0.2; echo b' and
         t0 * 1000 - 2000 <= q.get('start', 0) <= t1 * 1000 + 2000,
         "its 'Q': total 4, keep 0, argv joined by spaces, its start in "
         "CLOCK_REALTIME ms; the 'L' ends with 'X' 'exit 0'",
         'got %r, %r (now %d ms)' % (q, l.exit, t1 * 1000))
    g = a.logs(proc, 0)
    a.done(g)
    t.ok(g.rings == ['0 4 exit:0'] and g.out == b'a\nb\n' and
         g.exit == 'exit 0',
         "'G' o0: 'M' '0 4 exit:0', then 'a\\nb\\n' in 'O', then 'X' "
         "'exit 0'", 'got %r %r %r %r' % (g.rings, bytes(g.out), g.exit,
                                         g.fail))
    g = a.logs(proc, 2)
    a.done(g)
    t.ok(g.rings == ['0 4 exit:0'] and g.out == b'b\n' and
         g.exit == 'exit 0', "'G' o2: its output from byte 2 on",
         'got %r %r %r' % (g.rings, bytes(g.out), g.exit))

    # 1000 lines of 5 bytes into a ring of 1024
    want = b''.join(b'%04d\n' % i for i in range(1000))
    r = a.detach(['sh', '-c', 'i=0; while [ $i -lt 1000 ]; do '
                  'printf "%04d\\n" $i; i=$((i+1)); done'], 1024)
    a.done(r)
    rp, _ = need_started(r)
    st = a.state(rp, ('exit:0',))
    g = a.logs(rp, 0)
    a.done(g)
    t.ok(st == 'exit:0' and g.rings == ['3976 5000 exit:0'] and
         bytes(g.out) == want[-1024:] and g.exit == 'exit 0',
         "a ring of 1024 bytes written 5000: 'M' '3976 5000 exit:0', and "
         "'G' o0 gives exactly the last 1024 bytes",
         'state %r, got %r, %d bytes (%r...), %r' % (
             st, g.rings, len(g.out), bytes(g.out[:20]), g.exit))
    g = a.logs(rp, 4500)
    a.done(g)
    h = a.logs(rp, 6000)
    a.done(h)
    t.ok(bytes(g.out) == want[4500:] and g.exit == 'exit 0' and
         h.rings == ['3976 5000 exit:0'] and not h.out and
         h.exit == 'exit 0',
         "'G' o4500 gives bytes 4500 to 5000; o6000 (past the total) "
         "none", 'got %d bytes %r; %r %d bytes %r' % (
             len(g.out), g.exit, h.rings, len(h.out), h.exit))

    n = a.detach(['sh', '-c', 'cat; readlink /proc/self/fd/0; '
                  'echo err >&2'], 4096)
    a.done(n)
    np_, _ = need_started(n)
    a.state(np_, ('exit:0',))
    g = a.logs(np_, 0)
    a.done(g)
    t.ok(g.out == b'/dev/null\nerr\n' and not g.err,
         "a detached process's stdin is /dev/null, its stdout and stderr "
         "one stream in 'O'", 'got %r / %r' % (bytes(g.out), bytes(g.err)))
    y = a.detach(['sh', '-c', 'test -t 0 && test -t 1 && test -t 2 && '
                  'echo term; readlink /proc/self/fd/0 /proc/self/fd/1'],
                 4096, tty='0 0')
    a.done(y)
    yp, _ = need_started(y)
    a.state(yp, ('exit:0',))
    g = a.logs(yp, 0)
    a.done(g)
    m = re.match(rb'^term\r\n(/dev/pts/\d+)\r\n(/dev/pts/\d+)\r\n$',
                 bytes(g.out))
    t.ok(m and m.group(1) == m.group(2),
         "with 'T': its stdin, stdout and stderr are its terminal (for 'H' "
         "clients to type into)", 'got %r' % bytes(g.out))
    bad = [a.detach(['true'], n) for n in (1023, RING_MAX + 1)]
    for b in bad:
        a.done(b)
    t.ok(all(b.fail is not None and b.fail.startswith('400 ')
             for b in bad),
         "a ring of 1023 or BA_RING_MAX + 1 bytes: 'F' '400 ...'",
         'got %r' % [(b.fail, b.started) for b in bad])
    a.close()


def test_detach_follow(ctx):
    t = ctx.t
    a = ctx.agent('follow')
    want = b''.join(b'line%d\n' % i for i in range(1, 6))
    f = a.detach(['sh', '-c', 'for i in 1 2 3 4 5; do echo line$i; '
                  'sleep 0.1; done'], 4096)
    a.done(f)
    fp, _ = need_started(f)
    g = a.logs(fp, 0, follow=True)
    a.done(g)
    t.ok(bytes(g.out) == want and len(g.rings) == 2 and
         g.rings[0].endswith(' running') and
         g.rings[1] == '0 30 exit:0' and g.exit == 'exit 0',
         "'G' with 'f' on a process printing a line every 0.1 s: 'M' "
         "(running), all five lines as they come, then 'M' '0 30 exit:0' "
         "and 'X' 'exit 0'", 'got %r %r %r %r' % (
             g.rings, bytes(g.out), g.exit, g.fail))
    g = a.logs(fp, 0, follow=True)
    a.done(g)
    t.ok(bytes(g.out) == want and g.rings == ['0 30 exit:0'] * 2 and
         g.exit == 'exit 0',
         "following an ended process: 'M', its output, 'M' again, 'X'",
         'got %r %r %r' % (g.rings, bytes(g.out), g.exit))

    w = a.detach(['head', '-c', '600000', '/dev/zero'], 1 << 20)
    a.done(w)
    wp, _ = need_started(w)
    g = a.logs(wp, 0, follow=True)
    g.autoack = False
    a.need(lambda: len(g.out) >= WINDOW, 'a window of the follower')
    a.state(wp, ('exit:0',))
    a.round_trip()
    t.ok(len(g.out) == WINDOW and not g.done,
         'a follower that does not ack stops at BA_WINDOW (%d) bytes '
         'outstanding' % WINDOW, 'got %d bytes, %r' % (len(g.out), g.exit))
    a.ack(g, 1000)
    a.need(lambda: len(g.out) >= WINDOW + 1000, '1000 more bytes')
    a.round_trip()
    t.is_(len(g.out), WINDOW + 1000,
          "an 'A' of 1000 lets exactly 1000 more bytes out")
    g.autoack = True
    a.ack(g)
    a.done(g)
    t.ok(bytes(g.out) == bytes(600000) and
         g.rings[-1] == '0 600000 exit:0' and g.exit == 'exit 0' and
         0 < g.max_frame <= CHUNK,
         "acknowledged, the rest follows in frames of at most BA_CHUNK, "
         "then 'M' '0 600000 exit:0' and 'X'", 'got %d bytes, %r %r, '
         'largest frame %d' % (len(g.out), g.rings, g.exit, g.max_frame))

    # a ring of 1024 overwritten faster than its follower is sent it (it
    # sends what the ring holds each turn, and takes no credit meanwhile)
    want = b''.join(b'%d\n' % i for i in range(1, 100001))
    s = a.detach(['seq', '1', '100000'], 1024)
    a.done(s)
    sp, _ = need_started(s)
    g = a.logs(sp, 0, follow=True)
    g.autoack = False
    st = a.state(sp, ('exit:0',))
    a.round_trip()
    stalled = len(g.out)
    g.autoack = True
    a.ack(g)
    a.done(g)
    t.ok(st == 'exit:0' and stalled <= WINDOW and
         len(g.out) < len(want) and bytes(g.out).endswith(want[-1024:]) and
         g.rings[-1] == '%d %d exit:0' % (len(want) - 1024, len(want)) and
         g.exit == 'exit 0',
         'a follower of a ring of 1024 that fell behind skips to the '
         "ring's start (sent less than was written): it ends with the "
         "last 1024 bytes, 'M' and 'X'",
         'state %r, %d bytes before the acks, %d in all (of %d), %r %r' % (
             st, stalled, len(g.out), len(want), g.rings, g.exit))
    a.close()


def test_detach_signal(ctx):
    t = ctx.t
    a = ctx.agent('detach-ping')
    d = a.detach(['sleep', '100'], 1024)
    a.done(d)
    proc, pid = need_started(d)
    fol = a.logs(proc, 0, follow=True)
    a.need(lambda: fol.rings, "the follower's 'M'")
    s = a.run(['sh', '-c', 'echo $$; exec sleep 100'])
    a.need(lambda: s.out.endswith(b'\n'), 'a command `sleep 100` started')
    cpid = int(s.out)
    pong = a.ping(b'again')
    t.ok(pong == b'again' + bytes([PROTO]) and wait_gone([cpid], 10),
         "a new ping ends a command channel's `sleep 100`",
         'pong %r, pid %d %s' % (pong, cpid,
                                 'alive' if alive(cpid) else 'gone'))
    ps, _ = a.procs()
    t.ok(alive(pid) and ps.get(proc, {}).get('state') == 'running',
         'but not a detached `sleep 100`: still listed running, its pid '
         'alive', 'pid %d %s, listed %r' % (
             pid, 'alive' if alive(pid) else 'gone', ps.get(proc)))
    a.round_trip()
    t.ok(fol.cut and not fol.late and fol.exit is None,
         'the ping ends a follow channel: nothing comes for it after the '
         'pong', 'after the pong: %r' % fol.late[:3])
    z = a.signal(proc, 15)
    st = a.state(proc, ('signal:15',))
    t.ok(z.exit == 'exit 0' and st == 'signal:15' and wait_gone([pid], 10),
         "'Z' s15: 'X' 'exit 0', and the state becomes 'signal:15'",
         'got %r %r, state %r' % (z.exit, z.fail, st))
    z = a.signal(proc, 15)
    t.is_(z.fail, '409 process %d has ended (signal:15)' % proc,
          "'Z' on it again: 'F' '409 ...'")
    z = a.signal(999, 15)
    g = a.logs(999, 0)
    a.done(g)
    t.ok(z.fail == '404 no process 999' and g.fail == '404 no process 999',
         "'Z' and 'G' on proc 999: 'F' '404 no process 999'",
         'got %r / %r' % (z.fail, g.fail))
    k = a.detach(['true'], 1024, keep=True)
    a.done(k)
    kp, _ = need_started(k)
    ps, _ = a.procs()
    t.ok(ps.get(kp, {}).get('keep') == 1 and
         ps.get(proc, {}).get('keep') == 0 and list(ps) == sorted(ps) and
         kp == proc + 1,
         "'k' shows as keep 1 in its 'Q' (0 without); 'L' lists in proc "
         'order, numbers one up', 'got %r' % ps)

    t0 = time.monotonic()
    o = a.detach(['sleep', '100'], 1024, timeout_ms=500)
    a.done(o)
    op, opid = need_started(o)
    st = a.state(op, ('signal:9',))
    dt = time.monotonic() - t0
    t.ok(st == 'signal:9' and 0.49 <= dt and wait_gone([opid], 10),
         "a detached `sleep 100` with 't500' is killed at its deadline: "
         "'signal:9' (%.2f s)" % dt, 'state %r' % st)

    h = a.detach(['sleep', '100'], 1024)
    a.done(h)
    _, hpid = need_started(h)
    rc = a.close()
    time.sleep(0.2)
    t.ok(rc == 0 and alive(hpid), 'the host gone (the agent exits here), '
         'a detached `sleep 100` runs on', 'exit %r, pid %d %s' % (
             rc, hpid, 'alive' if alive(hpid) else 'gone'))
    try:
        os.kill(hpid, signal.SIGKILL)
    except OSError:
        pass


def test_detach_max(ctx):
    t = ctx.t
    descs = ("the %d-th detached process running gets 'F' '429 too many "
             "processes (%d)'" % (MAX_PROCS + 1, MAX_PROCS),
             'with one ended, a new one starts and the ended one is '
             'forgotten')
    why = raise_limits(ctx)
    if why is not None:
        for d in descs:
            t.skip(d, why)
        return
    a = ctx.agent('detach-max')
    ds = [a.detach(['sleep', '100'], 1024) for _ in range(MAX_PROCS)]
    a.wait(lambda: all(d.done for d in ds), 2 * WAIT)
    extra = a.detach(['true'], 1024)
    a.done(extra)
    sps = [started(d) for d in ds]
    t.ok(all(sps) and extra.fail == '429 too many processes (%d)'
         % MAX_PROCS, descs[0], '%d started, then %r %r' % (
             sum(1 for s in sps if s), extra.started, extra.fail))
    first = need_started(ds[0])
    a.signal(first[0], 9)
    a.state(first[0], ('signal:9',))
    more = a.detach(['true'], 1024)
    a.done(more)
    ps, _ = a.procs()
    g = a.logs(first[0], 0)
    a.done(g)
    mp = started(more)
    t.ok(mp is not None and mp[0] == MAX_PROCS + 1 and
         first[0] not in ps and len(ps) == MAX_PROCS and
         g.fail == '404 no process %d' % first[0], descs[1],
         'got %r %r, %d listed, proc %d %s, its logs %r' % (
             more.started, more.fail, len(ps), first[0],
             'listed' if first[0] in ps else 'not listed', g.fail))
    for s in sps[1:]:
        if s:
            try:
                os.kill(s[1], signal.SIGKILL)
            except OSError:
                pass
    a.close()


# ---- attached clients ('H') ------------------------------------------------
def term_size(a, c, n):
    """Types into attached client c a line that prints mark n and the
    terminal's size (its echo does not match the answer): (rows, cols)
    from the shell's answer, or None."""
    a.stdin(c, b'echo sz-$((%d+0)) $(stty size)\n' % n)
    pat = re.compile(rb'sz-%d (\d+) (\d+)\r\n' % n)
    a.wait(lambda: pat.search(bytes(c.out)))
    m = pat.search(bytes(c.out))
    return (int(m.group(1)), int(m.group(2))) if m else None


def ring_state(c, i=-1):
    """The state word of a client's i-th 'M', or None."""
    try:
        return c.rings[i].split(' ')[-1]
    except IndexError:
        return None


def test_attach(ctx):
    t = ctx.t
    a = ctx.agent('attach', listen=True)
    d = a.detach(['sh'], 1 << 16, tty='0 0')
    a.done(d)
    proc, pid = need_started(d)
    A = a.attach(proc, '30 100')
    a.need(lambda: A.rings, "client A's 'M'")
    a.stdin(A, b'echo hi-$((6*7))\n')
    a.wait(lambda: b'hi-42' in A.out and A.in_acked == A.in_sent)
    t.ok(ring_state(A, 0) == 'running' and b'hi-42' in A.out and
         A.in_acked == A.in_sent == 17 and not A.done,
         "'H' with 'T30 100' on a detached `sh` on a terminal: 'M' "
         "(running); its 'I' `echo hi-$((6*7))` goes to the terminal, the "
         "shell answers hi-42, 'a' acknowledges the 17 bytes",
         'got %r %r, %d of %d acknowledged' % (
             A.rings, bytes(A.out), A.in_acked, A.in_sent))
    t.is_(term_size(a, A, 1), (30, 100), "`stty size` there: A's 30 100")

    B = a.attach(proc, '40 120')
    a.need(lambda: b'sz-1 30 100' in B.out, 'the screen replayed to B')
    t.ok(ring_state(B, 0) == 'running' and b'hi-42' in B.out and
         bytes(B.out) == bytes(A.out[:len(B.out)]),
         "a second client B ('T40 120'): 'M', then the screen so far "
         "(hi-42 and all A saw)", 'got %r %r' % (B.rings, bytes(B.out)))
    t.is_(term_size(a, B, 2), (40, 120),
          "`stty size` typed by B: B's 40 120, the newest client's")
    a.wait(lambda: b'sz-2 40 120' in A.out)
    t.ok(b'sz-2 40 120' in A.out, 'A sees that output too')
    a.send('W', b'50 150', A.id)
    t.is_(term_size(a, B, 3), (40, 120),
          "A's 'W' 50 150 while B (newer) is attached: the size stays B's")
    a.stdin(B, b'')
    a.done(B)
    t.ok(len(B.rings) == 2 and ring_state(B) == 'running' and
         B.exit == 'exit 0' and B.fail is None,
         "an empty 'I' detaches B: 'M' (running), then 'X' 'exit 0'",
         'got %r %r %r' % (B.rings, B.exit, B.fail))
    t.is_(term_size(a, A, 4), (50, 150),
          "B gone, A is the newest: the size is A's latest 'W', 50 150")

    # nobody attached: what the terminal writes still goes to the ring
    # (more than a pty holds: it is read, or the shell would block)
    a.stdin(A, b'sleep 0.5; head -c 200000 /dev/zero | tr "\\0" y; '
            b'echo nobody-$((3*3))\n')
    a.need(lambda: A.in_acked == A.in_sent, "A's line taken")
    a.kill(A, 9)
    a.done(A)
    ps, _ = a.procs()
    t.ok(A.exit == 'exit 0' and len(A.rings) == 2 and
         ring_state(A) == 'running' and
         ps.get(proc, {}).get('state') == 'running' and alive(pid),
         "'K' 9 on A detaches it: 'M', 'X' 'exit 0'; no signal: the shell "
         "runs on ('L': running)", 'got %r %r, listed %r' % (
             A.rings, A.exit, ps.get(proc)))
    end = time.monotonic() + WAIT
    while ps.get(proc, {}).get('total', 0) < 200000 and \
            time.monotonic() < end:
        time.sleep(0.05)
        ps, _ = a.procs()
    C = a.attach(proc)
    a.wait(lambda: b'nobody-9' in C.out)
    t.ok(ps.get(proc, {}).get('total', 0) > 200000 and
         b'nobody-9' in C.out,
         'with nobody attached the shell wrote 200000 bytes and more to '
         "its terminal, into the ring: a client C sees them and the "
         "shell's nobody-9", 'listed %r, C got %d bytes, ends %r' % (
             ps.get(proc), len(C.out), bytes(C.out[-40:])))
    t.is_(term_size(a, C, 5), (50, 150),
          "C (no 'T') types `stty size`: the size as it was, 50 150")

    # the host goes away with C attached, and comes back
    a.reconnect()
    pong = a.ping(b'back')
    ps, _ = a.procs()
    t.ok(pong == b'back' + bytes([PROTO]) and alive(pid) and
         ps.get(proc, {}).get('state') == 'running',
         'the host connection closed while C was attached, a new one '
         "pinged: the shell runs on ('L': running)",
         'pong %r, listed %r' % (pong, ps.get(proc)))
    D = a.attach(proc, '33 77')
    t.is_(term_size(a, D, 6), (33, 77),
          "a client D of the new connection ('T33 77'): the shell "
          'answers it, in its size')
    E = a.attach(proc)
    a.need(lambda: E.rings, "E's 'M'")
    pong = a.ping(b'again')
    a.round_trip()
    t.ok(pong == b'again' + bytes([PROTO]) and C.cut and D.cut and E.cut
         and not C.late and not D.late and not E.late and
         C.exit is D.exit is E.exit is None,
         "a new session's ping detaches every client of the earlier one: "
         'nothing comes for C (dropped with its connection), D or E after',
         'late: %r %r %r' % (C.late[:2], D.late[:2], E.late[:2]))
    F = a.attach(proc)
    t.is_(term_size(a, F, 7), (33, 77),
          'and the shell answers the next client F')

    n = a.attach(999)
    a.done(n)
    m = a._open('H', ['ix'], None, 'attach')
    a.done(m)
    t.ok(n.fail == '404 no process 999' and m.fail is not None and
         m.fail.startswith('400 '),
         "'H' to proc 999: 'F' '404 no process 999'; a malformed one "
         "'400 ...'", 'got %r / %r' % (n.fail, m.fail))

    G = a.attach(proc)
    a.need(lambda: G.rings, "G's 'M'")
    a.stdin(F, b'exit 3\n')
    a.wait(lambda: F.done and G.done)
    ok = True
    for c in (F, G):
        ok = ok and len(c.rings) == 2 and ring_state(c) == 'exit:3' and \
            c.exit == 'exit 0' and c.fail is None
    t.ok(ok, "`exit 3` typed: every attached client (F, G) gets 'M' "
         "(exit:3), then 'X' 'exit 0'", 'got %r %r / %r %r' % (
             F.rings, F.exit, G.rings, G.exit))
    H = a.attach(proc)
    a.done(H)
    lg = a.logs(proc, 0)
    a.done(lg)
    t.ok(len(H.rings) == 2 and H.rings[0] == H.rings[1] and
         ring_state(H) == 'exit:3' and H.exit == 'exit 0' and
         len(H.out) > 0 and bytes(H.out) == bytes(lg.out),
         "'H' to the ended process: 'M', what its ring holds (as 'G' "
         "gives it), 'M' (exit:3), 'X' 'exit 0'", 'got %r %d bytes %r; '
         "'G': %d bytes" % (H.rings, len(H.out), H.exit, len(lg.out)))
    a.close()


def test_attach_window(ctx):
    t = ctx.t
    a = ctx.agent('attach-window')
    d = a.detach(['sh'], 1 << 20, tty='0 0')
    a.done(d)
    proc, _ = need_started(d)
    A = a.attach(proc)
    A.autoack = False
    B = a.attach(proc)
    a.need(lambda: A.rings and B.rings, "the clients' 'M'")
    a.stdin(B, b'head -c 600000 /dev/zero | tr "\\0" x; '
            b'echo done-$((1+1))\n')
    a.wait(lambda: b'done-2' in B.out)
    a.round_trip()
    ps, _ = a.procs()
    t.ok(b'done-2' in B.out and B.out.count(b'x') >= 600000 and
         len(A.out) == WINDOW and not A.done and
         ps.get(proc, {}).get('total', 0) > 600000,
         'a client A that does not ack stops at BA_WINDOW (%d) bytes '
         'outstanding, while client B gets all 600000 bytes and the '
         "shell's done-2 after them; the ring took them all" % WINDOW,
         'A %d bytes, B %d, done-2 %r, listed %r' % (
             len(A.out), len(B.out), b'done-2' in B.out, ps.get(proc)))
    A.autoack = True
    a.ack(A)
    a.wait(lambda: len(A.out) >= len(B.out))
    t.ok(bytes(A.out[:len(B.out)]) == bytes(B.out) and
         A.max_unacked <= WINDOW,
         'acknowledged, A gets the same bytes as B, in order',
         'A %d bytes, B %d' % (len(A.out), len(B.out)))

    # input past the window: written as the terminal takes it
    a.stdin(B, b'stty -echo; cat >/dev/null; stty echo; '
            b'echo fed-$((2+3))\n')
    data = (b'y' * 63 + b'\n') * 5000
    a.feed([(B, data)], eof=False)
    a.stdin(B, b'\x04')
    a.wait(lambda: b'fed-5' in B.out and B.in_acked == B.in_sent)
    t.ok(b'fed-5' in B.out and B.in_acked == B.in_sent and not B.done,
         "%d bytes typed into `cat` within the input window: 'a' "
         'acknowledges every byte, ^D ends cat and the shell answers '
         'fed-5' % len(data), '%d of %d acknowledged, fed-5 %r' % (
             B.in_acked, B.in_sent, b'fed-5' in B.out))
    a.signal(proc, 9)
    a.wait(lambda: A.done and B.done)
    t.ok(ring_state(A) == ring_state(B) == 'signal:9' and
         A.exit == B.exit == 'exit 0',
         "the shell killed ('Z' 9): both clients get 'M' (signal:9), 'X'",
         'got %r %r / %r %r' % (A.rings, A.exit, B.rings, B.exit))
    a.close()


def test_attach_pipe(ctx):
    t = ctx.t
    a = ctx.agent('attach-pipe')
    flag = ctx.path('attach-flag')
    d = a.detach(['sh', '-c', 'echo one; while [ ! -e %s ]; do sleep 0.05; '
                  'done; echo two; exec sleep 100' % flag], 4096)
    a.done(d)
    proc, _ = need_started(d)
    A = a.attach(proc, '24 80')
    a.need(lambda: b'one\n' in A.out, "the process's first line")
    a.stdin(A, b'dropped\n')
    a.send('W', b'30 90', A.id)
    a.wait(lambda: A.in_acked == 8)
    with open(flag, 'w'):
        pass
    a.wait(lambda: b'two\n' in A.out)
    a.round_trip()
    t.ok(ring_state(A, 0) == 'running' and A.out == b'one\ntwo\n' and
         A.in_acked == 8 and not A.done,
         'a client of a detached process without a terminal: its output '
         "(one, then two as it comes); its 'I' acknowledged ('a' 8) and "
         "dropped, a 'W' ignored", 'got %r %r, %d acknowledged' % (
             A.rings, bytes(A.out), A.in_acked))
    a.signal(proc, 15)
    a.done(A)
    t.ok(ring_state(A) == 'signal:15' and A.exit == 'exit 0',
         "its end ends the client: 'M' (signal:15), then 'X' 'exit 0'",
         'got %r %r %r' % (A.rings, A.exit, A.fail))
    a.close()


# ---- the filesystem: ranged get, list, mkdir, remove, move, watch --------
ENTRY_MAX = 64 + 255        # an 'N' payload at most (the agent's bound)
EVENT_MAX = 32 + 4096       # a 'Y' payload at most


def entries(c):
    """An 'l' answer's entries: {name bytes: (type, mode, size, mtime)},
    and whether all parsed."""
    got = [parse_entry(e) for e in c.entries]
    return dict(g for g in got if g is not None), None not in got


def test_get_range(ctx):
    t = ctx.t
    a = ctx.agent('get-range')
    path = ctx.path('range.bin')
    data = os.urandom(100000)
    with open(path, 'wb') as f:
        f.write(data)
    cases = ((1000, 5000, data[1000:6000]), (99000, None, data[99000:]),
             (None, 70000, data[:70000]), (99990, 100, data[99990:]),
             (0, 0, b''), (100000, None, b''), (100000, 10, b''),
             (5000000, None, b''), (2 ** 64 - 1, 5, b''))
    bad = []
    for off, n, want in cases:
        g = a.get(path, offset=off, length=n)
        a.done(g)
        if g.exit != 'exit 0' or bytes(g.out) != want:
            bad.append((off, n, len(g.out), len(want), g.exit, g.fail))
    t.ok(not bad, "a get with 'o<offset>' and 'n<length>': those bytes "
         '(o1000 n5000, o99000, n70000, o99990 n100 past the end, n0), '
         "none for an offset at or past the end, each 'X' 'exit 0'",
         *['o%s n%s: %d bytes (want %d), %r %r' % b for b in bad])
    big = ctx.path('range-big.bin')
    data = os.urandom(2 * WINDOW)
    with open(big, 'wb') as f:
        f.write(data)
    g = a.get(big, offset=1000, length=WINDOW + 5000)
    g.autoack = False
    a.need(lambda: len(g.out) >= WINDOW, 'a window of the ranged get')
    a.round_trip()
    stopped = len(g.out)
    g.autoack = True
    a.ack(g)
    a.done(g)
    t.ok(stopped == WINDOW and g.exit == 'exit 0' and
         bytes(g.out) == data[1000:WINDOW + 6000],
         "a ranged get longer than the window stops at it, then ends at "
         "its length", 'stopped at %d, got %d, %r' % (
             stopped, len(g.out), g.exit))
    bads = []
    for off, n in (('x1', None), (None, '-1'), ('1 ', None), ('', None)):
        g = a.get(path, offset=off, length=n)
        a.done(g)
        bads.append(g.fail)
    d = a.get(ctx.tmp)
    a.done(d)
    t.ok(all(f is not None and f.startswith('400 ') for f in bads) and
         d.fail is not None and d.fail.startswith('400 '),
         "a malformed offset or length, or a get of a directory: 'F' "
         "'400 ...'", 'got %r, directory: %r' % (bads, d.fail))
    a.close()


def test_ls(ctx):
    t = ctx.t
    a = ctx.agent('ls')
    d = ctx.path('lsdir')
    os.mkdir(d)
    db = os.fsencode(d)
    with open(os.path.join(d, 'file'), 'wb') as f:
        f.write(b'x' * 123)
    os.chmod(os.path.join(d, 'file'), 0o640)
    os.utime(os.path.join(d, 'file'), ns=(1600000000123456789,
                                          1600000000123456789))
    os.mkdir(os.path.join(d, 'sub'))
    os.chmod(os.path.join(d, 'sub'), 0o2750)
    os.symlink('/berth/no/such/target', os.path.join(d, 'link'))
    os.mkfifo(os.path.join(d, 'fifo'), 0o600)
    odd = b'sp ace\xff'
    fd = os.open(os.path.join(db, odd), os.O_CREAT | os.O_WRONLY, 0o604)
    os.close(fd)
    os.chmod(os.path.join(db, odd), 0o604)
    c = a.ls(d, 100)
    a.done(c)
    got, parsed = entries(c)
    want = {}
    for name in (b'file', b'sub', b'link', b'fifo', odd):
        st = os.lstat(os.path.join(db, name))
        want[name] = ({stat.S_IFREG: 'file', stat.S_IFDIR: 'dir',
                       stat.S_IFLNK: 'link', stat.S_IFIFO: 'fifo'}[
                           stat.S_IFMT(st.st_mode)],
                      stat.S_IMODE(st.st_mode), st.st_size,
                      st.st_mtime_ns // 1000000)
    t.ok(c.exit == 'exit 0' and parsed and got == want,
         "'l' of a directory: one 'N' per entry (no '.' or '..'), type "
         "file/dir/link/fifo as lstat says, mode, size, mtime in ms, the "
         "name's bytes (a space, a byte not UTF-8), then 'X' 'exit 0'",
         'got %r %r' % (c.exit, c.fail), 'entries %r' % got,
         'want    %r' % want)
    t.ok(got.get(b'file', (0, 0, 0, 0))[3] == 1600000000123 and
         got.get(b'link', (0, 0, 0))[2] == len('/berth/no/such/target') and
         got.get(b'sub', (0, 0))[1] == 0o2750,
         'the mtime is exact to the ms, a link is not followed (its size '
         'is its target\'s length), the setgid bit is in the mode',
         'got %r' % got)
    c = a.ls(d, 2)
    a.done(c)
    c2 = a.ls(d + '/', 1)
    a.done(c2)
    t.ok(c.exit == 'exit 0' and len(c.entries) == 2 and
         c2.exit == 'exit 0' and len(c2.entries) == 1,
         "'n2' gives 2 entries, 'n1' 1 (and a trailing '/' is no matter)",
         'got %d %r, %d %r' % (len(c.entries), c.exit, len(c2.entries),
                               c2.exit))
    m = a.ls(ctx.path('no-such-dir'), 10)
    f = a.ls(os.path.join(d, 'file'), 10)
    r = a.ls('relative', 10)
    z = a.ls(d, 0)
    for x in (m, f, r, z):
        a.done(x)
    t.ok(m.fail is not None and m.fail.startswith('404 ') and
         all(x.fail is not None and x.fail.startswith('400 ')
             for x in (f, r, z)),
         "'l' of a missing directory: 'F' '404 ...'; of a file, a relative "
         "path, or with 'n0': '400 ...'",
         'got %r / %r / %r / %r' % (m.fail, f.fail, r.fail, z.fail))
    e = ctx.path('lsempty')
    os.mkdir(e)
    c = a.ls(e, 10)
    a.done(c)
    t.ok(c.exit == 'exit 0' and not c.entries,
         "'l' of an empty directory: 'X' 'exit 0' alone",
         'got %r %r' % (c.entries, c.exit))
    a.close()


def test_ls_window(ctx):
    t = ctx.t
    a = ctx.agent('ls-window')
    d = ctx.path('lsbig')
    os.mkdir(d)
    names = set()
    for i in range(3000):
        n = ('%04d-' % i) + 'n' * 120
        names.add(n.encode())
        os.close(os.open(os.path.join(d, n), os.O_CREAT | os.O_WRONLY))
    c = a.ls(d, 5000)
    c.autoack = False
    a.need(lambda: c.unacked >= WINDOW - ENTRY_MAX, 'a window of entries')
    a.round_trip()
    held = c.unacked
    n1 = len(c.entries)
    t.ok(not c.done and WINDOW - ENTRY_MAX <= held <= WINDOW and n1 < 3000,
         "'l' of a directory of 3000 entries stops at the window (its "
         "'N' payloads count as 'O')",
         '%d entries, %d bytes outstanding, %r' % (n1, held, c.exit))
    h = a.run(['echo', 'meanwhile'])
    a.done(h)
    t.ok(h.exit == 'exit 0' and h.out == b'meanwhile\n',
         'another channel completes meanwhile', 'got %r %r' % (
             bytes(h.out), h.exit))
    c0 = cpu_seconds(a.proc.pid)
    time.sleep(1)
    used = cpu_seconds(a.proc.pid) - c0
    t.ok(used < 0.3, 'a listing waiting for credit keeps the agent idle '
         '(%.2f s of CPU in 1 s)' % used)
    a.ack(c, 1000)
    a.round_trip()
    more = len(c.entries)
    c.autoack = True
    a.ack(c)
    a.done(c)
    got, parsed = entries(c)
    t.ok(n1 < more and c.unacked <= WINDOW and c.exit == 'exit 0' and
         parsed and set(got) == names and len(c.entries) == 3000,
         "an 'A' lets more out; all acknowledged, the 3000 names, each "
         "once, then 'X' 'exit 0'", '%d then %d entries, %d in all '
         '(%d distinct), %r' % (n1, more, len(c.entries), len(got), c.exit))
    k = a.ls(d, 5000)
    k.autoack = False
    a.need(lambda: k.unacked >= WINDOW - ENTRY_MAX, 'a window of entries')
    a.kill(k, 9)
    a.done(k)
    t.is_(k.fail, '409 cancelled', "'K' on a listing: 'F' '409 cancelled'")
    a.close()


def mode_of(path):
    try:
        return stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return None


def test_mkdir(ctx):
    t = ctx.t
    a = ctx.agent('mkdir')
    old = os.umask(0o077)       # the agent inherits it: must not matter
    try:
        a2 = ctx.agent('mkdir-umask')
    finally:
        os.umask(old)
    d = ctx.path('mk')
    c = a2.mkdir(d, 0o777)
    c2 = a2.mkdir(ctx.path('mk-default'))
    t.ok(c.exit == 'exit 0' and mode_of(d) == 0o777 and
         c2.exit == 'exit 0' and mode_of(ctx.path('mk-default')) == 0o755,
         "'m' with 'm777' under umask 077: 'X' 'exit 0', mode 0777 exactly; "
         'without a mode: 0755', 'got %r %r mode %r; %r mode %r' % (
             c.exit, c.fail, mode_of(d), c2.exit,
             mode_of(ctx.path('mk-default'))))
    a2.close()
    p = ctx.path('mk/a/b/c')
    c = a.mkdir(p, 0o700, parents=True)
    t.ok(c.exit == 'exit 0' and mode_of(p) == 0o700 and
         mode_of(ctx.path('mk/a')) == 0o755 and
         mode_of(ctx.path('mk/a/b')) == 0o755,
         "with 'r': the missing parents made (0755), the directory its mode",
         'got %r %r, modes %r %r %r' % (c.exit, c.fail, mode_of(p),
                                         mode_of(ctx.path('mk/a')),
                                         mode_of(ctx.path('mk/a/b'))))
    c = a.mkdir(p, 0o755, parents=True)
    t.ok(c.exit == 'exit 0' and mode_of(p) == 0o700,
         "with 'r', an existing directory is no error (its mode kept)",
         'got %r %r' % (c.exit, c.fail))
    c = a.mkdir(p, 0o755)
    t.ok(c.fail is not None and c.fail.startswith('409 '),
         "without 'r', an existing directory: 'F' '409 ...'",
         'got %r %r' % (c.exit, c.fail))
    c = a.mkdir(ctx.path('mk/none/x'))
    t.ok(c.fail is not None and c.fail.startswith('404 ') and
         not os.path.exists(ctx.path('mk/none')),
         "without 'r', a missing parent: 'F' '404 ...', nothing made",
         'got %r %r' % (c.exit, c.fail))
    with open(ctx.path('mk/file'), 'w'):
        pass
    c = a.mkdir(ctx.path('mk/file/x'))
    c2 = a.mkdir(ctx.path('mk/file/x/y'), parents=True)
    c3 = a.mkdir(ctx.path('mk/file'), parents=True)
    c4 = a.mkdir('rel/dir')
    t.ok(c.fail is not None and c.fail.startswith('400 ') and
         c2.fail is not None and c2.fail.startswith('400 ') and
         c3.fail is not None and c3.fail.startswith('409 ') and
         c4.fail is not None and c4.fail.startswith('400 '),
         "a parent that is a file: '400 ...' (with 'r' too); with 'r' a "
         "file at the path: '409 ...'; a relative path: '400 ...'",
         'got %r / %r / %r / %r' % (c.fail, c2.fail, c3.fail, c4.fail))
    a.close()


def test_remove(ctx):
    t = ctx.t
    a = ctx.agent('remove')
    f = ctx.path('rm-file')
    with open(f, 'w') as fh:
        fh.write('x')
    e = ctx.path('rm-empty')
    os.mkdir(e)
    c = a.remove(f)
    c2 = a.remove(e)
    t.ok(c.exit == 'exit 0' and c2.exit == 'exit 0' and
         not os.path.lexists(f) and not os.path.lexists(e),
         "'x' of a file and of an empty directory: 'X' 'exit 0', both gone",
         'got %r %r / %r %r' % (c.exit, c.fail, c2.exit, c2.fail))
    # a tree with links to outside it, a directory and a file
    out = ctx.path('rm-outside')
    os.mkdir(out)
    with open(os.path.join(out, 'keep'), 'w') as fh:
        fh.write('keep me')
    tree = ctx.path('rm-tree')
    os.makedirs(os.path.join(tree, 'a', 'b', 'c'))
    for i in range(50):
        with open(os.path.join(tree, 'a', 'f%d' % i), 'w') as fh:
            fh.write('x' * i)
    os.symlink(out, os.path.join(tree, 'a', 'b', 'to-outside'))
    os.symlink(os.path.join(out, 'keep'), os.path.join(tree, 'keep-link'))
    os.mkfifo(os.path.join(tree, 'a', 'b', 'c', 'fifo'))
    if ctx.root:
        os.chmod(os.path.join(tree, 'a', 'b'), 0o500)   # no matter to root
    c = a.remove(tree)
    t.ok(c.fail is not None and c.fail.startswith('409 ') and
         os.path.isdir(tree),
         "'x' of a directory not empty, without 'r': 'F' '409 ...', kept",
         'got %r %r' % (c.exit, c.fail))
    c = a.remove(tree, recursive=True)
    try:
        with open(os.path.join(out, 'keep')) as fh:
            kept = fh.read() == 'keep me'
    except OSError:
        kept = False
    t.ok(c.exit == 'exit 0' and not os.path.lexists(tree) and kept and
         os.listdir(out) == ['keep'],
         "with 'r': the tree gone, its links removed, not followed: the "
         "directory and file outside they named intact",
         'got %r %r, tree %s, outside kept: %r %r' % (
             c.exit, c.fail, 'exists' if os.path.lexists(tree) else 'gone',
             kept, os.listdir(out)))
    ln = ctx.path('rm-dirlink')
    os.symlink(out, ln)
    c = a.remove(ln, recursive=True)
    c2 = a.remove(ln + '/')
    t.ok(c.exit == 'exit 0' and not os.path.lexists(ln) and
         os.listdir(out) == ['keep'] and c2.fail is not None and
         c2.fail.startswith('404 '),
         "a link to a directory, with 'r': the link goes, never what it "
         "names; again: '404 ...'", 'got %r %r, %r, then %r' % (
             c.exit, c.fail, os.listdir(out), c2.fail))
    bad = [a.remove(p, recursive=True) for p in
           ('/', '//', '/.', ctx.tmp + '/..', ctx.tmp + '/.', 'relative')]
    t.ok(all(b.fail is not None and b.fail.startswith('400 ')
             for b in bad) and os.path.isdir(ctx.tmp),
         "'x' of '/', '//', '/.', a path ending in '..' or '.', or a relative "
         "one: 'F' '400 ...', nothing removed",
         'got %r' % [b.fail for b in bad])
    c = a.remove(ctx.path('rm-none'))
    c2 = a.remove(ctx.path('rm-none/x'), recursive=True)
    t.ok(c.fail is not None and c.fail.startswith('404 ') and
         c2.fail is not None and c2.fail.startswith('404 '),
         "'x' of a missing path (or under one): 'F' '404 ...'",
         'got %r / %r' % (c.fail, c2.fail))
    # big: 20000 files, while another channel runs
    big = ctx.path('rm-big')
    for i in range(20):
        os.makedirs(os.path.join(big, 'd%d' % i))
        for j in range(1000):
            os.close(os.open(os.path.join(big, 'd%d' % i, 'f%d' % j),
                             os.O_CREAT | os.O_WRONLY))
    r = a._open('x', ['t0', 'p' + big, 'r'], None, 'fs')
    h = a.run(['echo', 'meanwhile'])
    a.wait(lambda: r.done and h.done, 4 * WAIT)
    t.ok(r.exit == 'exit 0' and not os.path.lexists(big) and
         h.exit == 'exit 0' and h.out == b'meanwhile\n',
         "'x' 'r' of a tree of 20000 files: 'X' 'exit 0', gone; a command "
         'beside it completes', 'got %r %r, %r %r' % (r.exit, r.fail,
                                                      h.exit, bytes(h.out)))
    a.close()


def read(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except OSError as e:
        return e.__class__.__name__


def test_move(ctx):
    t = ctx.t
    a = ctx.agent('move')
    s, d = ctx.path('mv-a'), ctx.path('mv-b')
    with open(s, 'w') as f:
        f.write('A')
    c = a.move(s, d)
    t.ok(c.exit == 'exit 0' and not os.path.lexists(s) and read(d) == b'A',
         "'v' renames: 'X' 'exit 0', the bytes at the new path",
         'got %r %r' % (c.exit, c.fail))
    with open(s, 'w') as f:
        f.write('B')
    c = a.move(s, d)
    t.ok(c.fail is not None and c.fail.startswith('409 ') and
         read(s) == b'B' and read(d) == b'A',
         "onto an existing file without 'o': 'F' '409 ...', both kept",
         'got %r %r' % (c.exit, c.fail))
    c = a.move(s, d, overwrite=True)
    t.ok(c.exit == 'exit 0' and not os.path.lexists(s) and read(d) == b'B',
         "with 'o': replaced", 'got %r %r' % (c.exit, c.fail))
    dd = ctx.path('mv-dir')
    os.makedirs(os.path.join(dd, 'in'))
    c = a.move(dd, os.path.join(dd, 'in', 'x'))
    c2 = a.move(ctx.path('mv-none'), ctx.path('mv-x'))
    c3 = a.move(d, ctx.path('mv-nodir/x'))
    c4 = a.move('rel', d)
    t.ok(c.fail is not None and c.fail.startswith('400 ') and
         c2.fail is not None and c2.fail.startswith('404 ') and
         c3.fail is not None and c3.fail.startswith('404 ') and
         c4.fail is not None and c4.fail.startswith('400 '),
         "a directory into itself: '400 ...'; a missing source or "
         "destination directory: '404 ...'; a relative path: '400 ...'",
         'got %r / %r / %r / %r' % (c.fail, c2.fail, c3.fail, c4.fail))
    os.mkdir(ctx.path('mv-full'))
    with open(ctx.path('mv-full/x'), 'w'):
        pass
    os.mkdir(ctx.path('mv-src'))
    c = a.move(ctx.path('mv-src'), ctx.path('mv-full'), overwrite=True)
    t.ok(c.fail is not None and c.fail.startswith('409 ') and
         os.path.isdir(ctx.path('mv-src')),
         "with 'o' onto a directory not empty: '409 ...'",
         'got %r %r' % (c.exit, c.fail))
    a.close()

    descs = ("across filesystems (a tmpfs and the test's directory): a "
             "file, then a directory, moved by mv(1)",
             "across filesystems onto an existing file: '409 ...' without "
             "'o', replaced with it")
    why = None
    if not ctx.root:
        why = 'needs root (a tmpfs in a mount namespace of its own)'
    elif not shutil.which('unshare'):
        why = 'no unshare(1) here'
    if why is not None:
        for desc in descs:
            t.skip(desc, why)
        return
    mnt = ctx.path('mv-tmpfs')
    os.mkdir(mnt)
    # the agent in a mount namespace of its own, a tmpfs on mnt there
    b = ctx.agent('move-xdev', wrap=[
        'unshare', '-m', '--propagation', 'private', 'sh', '-c',
        'mount -t tmpfs -o size=16m berth-test "$0" && exec "$@"', mnt])
    chk = b.run(['sh', '-c', 'test "$(stat -f -c %%T %s)" = tmpfs && '
                 'echo x > %s/f && mkdir -p %s/d/e && echo y > %s/d/e/g'
                 % (mnt, mnt, mnt, mnt)])
    b.done(chk)
    if chk.exit != 'exit 0':
        for desc in descs:
            t.skip(desc, 'no tmpfs in a mount namespace: %r %r' % (
                chk.exit, bytes(chk.err)))
        b.close()
        return
    c = b.move(mnt + '/f', ctx.path('mv-xf'))
    c2 = b.move(mnt + '/d', ctx.path('mv-xd'))
    gone = b.run(['sh', '-c', 'ls -A %s' % mnt])
    b.done(gone)
    t.ok(c.exit == 'exit 0' and read(ctx.path('mv-xf')) == b'x\n' and
         c2.exit == 'exit 0' and read(ctx.path('mv-xd/e/g')) == b'y\n' and
         gone.exit == 'exit 0' and gone.out == b'', descs[0],
         'got %r %r / %r %r, left on the tmpfs: %r' % (
             c.exit, c.fail, c2.exit, c2.fail, bytes(gone.out)))
    w = b.run(['sh', '-c', 'echo new > %s/n' % mnt])
    b.done(w)
    c = b.move(mnt + '/n', ctx.path('mv-xf'))
    kept = read(ctx.path('mv-xf'))
    c2 = b.move(mnt + '/n', ctx.path('mv-xf'), overwrite=True)
    t.ok(c.fail is not None and c.fail.startswith('409 ') and
         kept == b'x\n' and c2.exit == 'exit 0' and
         read(ctx.path('mv-xf')) == b'new\n', descs[1],
         'got %r, kept %r, then %r %r, %r' % (
             c.fail, kept, c2.exit, c2.fail, read(ctx.path('mv-xf'))))
    b.close()


def events_of(c, path=None):
    return [e for e in c.events if isinstance(e, tuple) and
            (path is None or e[3] == path)]


def need_ready(a, c):
    """Waits for a watch's "ready" (its watches in place)."""
    a.need(lambda: c.done or [e for e in events_of(c) if e[0] == 'ready'],
           "the watch's 'ready'")
    if c.done:
        raise AgentError('the watch ended: %r %r' % (c.exit, c.fail))


def test_watch(ctx):
    t = ctx.t
    a = ctx.agent('watch')
    d = ctx.path('w')
    os.makedirs(os.path.join(d, 'pre', 'deep'))
    rw = a.watch(d, recursive=True)
    nw = a.watch(d)
    need_ready(a, rw)
    need_ready(a, nw)
    t.ok(rw.events[:1] == [('ready', 1, 0, d)] and
         nw.events[:1] == [('ready', 1, 0, d)],
         "'V' (with 'r' or not) is answered 'Y' 'ready 1 0 <dir>' first",
         'got %r / %r' % (rw.events[:2], nw.events[:2]))
    pre = os.path.join(d, 'pre', 'deep', 'p')
    with open(pre, 'w'):
        pass
    f, g = os.path.join(d, 'f'), os.path.join(d, 'g')
    with open(f, 'w') as fh:
        fh.write('1')
    os.chmod(f, 0o600)
    os.rename(f, g)
    os.unlink(g)

    def have(c, want):
        return all(w in events_of(c) for w in want)

    a.wait(lambda: have(rw, [('delete', 0, 0, g)]) and
           have(nw, [('delete', 0, 0, g)]))
    t.ok(('create', 0, 0, pre) in events_of(rw) and
         not events_of(nw, pre),
         "a recursive watch sees a file made in a subdirectory that was "
         "there before it ('ready' came once it was watched); the other "
         'does not', 'got %r / %r' % (events_of(rw, pre), events_of(nw, pre)))
    for c, kind in ((rw, 'recursive'), (nw, 'non-recursive')):
        ev = events_of(c)
        names = [e[0] for e in ev]
        mf = [e for e in ev if e[0] == 'move_from']
        mt = [e for e in ev if e[0] == 'move_to']
        t.ok(('create', 0, 0, f) in ev and ('modify', 0, 0, f) in ev and
             ('attrib', 0, 0, f) in ev and ('delete', 0, 0, g) in ev and
             len(mf) == 1 and len(mt) == 1 and mf[0][3] == f and
             mt[0][3] == g and mf[0][2] == mt[0][2] != 0 and
             names.index('create') < names.index('modify') <
             names.index('attrib') < names.index('move_from') <
             names.index('move_to') < names.index('delete') and
             not c.done,
             "a %s 'V': 'Y' create, modify, attrib, move_from and move_to "
             "(one cookie, not 0), delete, in order, absolute paths"
             % kind, 'got %r' % c.events)
    ev = events_of(rw)
    t.is_(sum(1 for e in ev if e[0] == 'modify'), 1,
          'one write and close: one modify (close_write is not told)')
    sub = os.path.join(d, 'sub')
    os.mkdir(sub)
    a.need(lambda: ('create', 1, 0, sub) in events_of(rw), 'the create of '
           'sub')
    x = os.path.join(sub, 'x')
    with open(x, 'w'):
        pass
    a.wait(lambda: ('create', 0, 0, x) in events_of(rw))
    a.round_trip()
    t.ok(('create', 0, 0, x) in events_of(rw) and
         ('create', 1, 0, sub) in events_of(nw) and
         not events_of(nw, x),
         "a directory made after the start: the recursive watch sees a "
         "file made in it (watched before its create is sent), the other "
         "only the directory's create", 'recursive: %r' % rw.events[-3:],
         'non-recursive: %r' % nw.events[-3:])
    # a tree moved in: watched too, its subdirectories as well
    tree = ctx.path('w-tree')
    os.makedirs(os.path.join(tree, 'deep', 'deeper'))
    moved = os.path.join(d, 'tree')
    os.rename(tree, moved)
    a.need(lambda: [e for e in events_of(rw, moved) if e[:2] ==
                    ('move_to', 1)], 'the move_to of the tree')
    a.round_trip()
    y = os.path.join(moved, 'deep', 'deeper', 'y')
    with open(y, 'w'):
        pass
    a.wait(lambda: events_of(rw, y))
    t.ok(('create', 0, 0, y) in events_of(rw),
         'a tree moved in is watched to its depth', 'got %r' % rw.events[-3:])
    # a directory moved out: no event from it any more
    os.rename(moved, ctx.path('w-out'))
    a.need(lambda: events_of(rw, moved), 'the move_from of the tree')
    with open(ctx.path('w-out/deep/z'), 'w'):
        pass
    a.round_trip()
    t.ok(not [e for e in events_of(rw) if e[3].endswith('/z')],
         'a directory moved out is not watched any more (nor told under '
         'its old path)', 'got %r' % rw.events[-3:])

    k = a.watch(ctx.tmp)
    need_ready(a, k)
    a.kill(k, 15)
    a.done(k)
    t.ok(k.exit == 'exit 0' and k.fail is None,
         "'K' on a watch: 'X' 'exit 0'", 'got %r %r' % (k.exit, k.fail))
    shutil.rmtree(d)
    a.wait(lambda: rw.done and nw.done)
    for c, kind in ((rw, 'recursive'), (nw, 'non-recursive')):
        ev = events_of(c)
        t.ok(ev and ev[-1] == ('delete_self', 1, 0, d) and
             c.exit == 'exit 0' and
             len([e for e in c.events if not isinstance(e, tuple)]) == 0,
             "the watched directory removed: the %s watch's last 'Y' is "
             "'delete_self', then 'X' 'exit 0'" % kind,
             'got %r, %r %r' % (c.events[-3:], c.exit, c.fail))
    t.ok(('delete', 0, 0, x) in events_of(rw) and
         ('delete', 1, 0, sub) in events_of(rw),
         'and the recursive one told the deletes under it first',
         'got %r' % rw.events[-6:])
    m = a.watch(ctx.path('w-none'))
    fl = a.watch(PROTO_H)
    r = a.watch('relative')
    for c in (m, fl, r):
        a.done(c)
    t.ok(m.fail is not None and m.fail.startswith('404 ') and
         fl.fail is not None and fl.fail.startswith('400 ') and
         r.fail is not None and r.fail.startswith('400 '),
         "'V' of a missing directory: '404 ...'; of a file, or a relative "
         "path: '400 ...'", 'got %r / %r / %r' % (m.fail, fl.fail, r.fail))
    w2 = a.watch(ctx.tmp, recursive=True)
    need_ready(a, w2)
    pong = a.ping(b'w-again')
    a.round_trip()
    with open(ctx.path('w-after'), 'w'):
        pass
    a.round_trip()
    t.ok(pong == b'w-again' + bytes([PROTO]) and w2.cut and not w2.late,
         'a new ping ends a watch: nothing comes for it after the pong',
         'after the pong: %r' % w2.late[:3])
    a.close()


def test_watch_overflow(ctx):
    t = ctx.t
    a = ctx.agent('watch-overflow')
    d = ctx.path('wo')
    os.mkdir(d)
    w = a.watch(d, recursive=True)
    w.autoack = False
    need_ready(a, w)
    try:
        with open('/proc/sys/fs/inotify/max_queued_events') as f:
            queue = int(f.read())
    except (OSError, ValueError):
        queue = 16384
    n = max(50000, queue)       # 2 events each: create, delete
    script = ('import os, sys\n'
              'd, n = sys.argv[1], int(sys.argv[2])\n'
              'for i in range(n):\n'
              '    p = os.path.join(d, "f%d" % (i % 100))\n'
              '    os.close(os.open(p, os.O_CREAT | os.O_WRONLY))\n'
              '    os.unlink(p)\n')
    gen = subprocess.Popen([sys.executable, '-c', script, d, str(n)])
    try:
        a.need(lambda: w.unacked >= WINDOW - 2 * EVENT_MAX,
               'a window of events')
        h = a.run(['echo', 'meanwhile'])
        a.done(h)
        running = gen.poll() is None
        t.ok(h.exit == 'exit 0' and h.out == b'meanwhile\n',
             'a watch whose window is full, %d events being made: a '
             'command on another channel completes meanwhile%s' % (
                 2 * n, '' if running else ' (the events were all made '
                 'by then)'), 'got %r %r' % (bytes(h.out), h.exit))
        gen.wait(4 * WAIT)
    finally:
        if gen.poll() is None:
            gen.kill()
            gen.wait()
    a.round_trip()
    held = w.unacked
    c0 = cpu_seconds(a.proc.pid)
    time.sleep(1)
    used = cpu_seconds(a.proc.pid) - c0
    t.ok(used < 0.3, 'a watch waiting for credit keeps the agent idle '
         '(%.2f s of CPU in 1 s)' % used)
    t.ok(not w.done and held <= WINDOW and
         not [e for e in events_of(w) if e[0] == 'overflow'],
         'the watch stopped at its window (%d bytes outstanding), no '
         'overflow told yet' % held, 'got %r' % w.events[-3:])
    w.autoack = True
    a.ack(w)
    a.wait(lambda: [e for e in events_of(w) if e[0] == 'overflow'],
           2 * WAIT)
    ov = [e for e in events_of(w) if e[0] == 'overflow']
    t.ok(ov and ov[0] == ('overflow', 1, 0, d) and not w.done,
         "acknowledged again, it reads on: 'Y' 'overflow 1 0 <dir>' (the "
         "kernel's queue overflowed meanwhile), and the watch goes on",
         'got %r, %d events, %r' % (ov[:1], len(w.events), w.exit))
    a.round_trip()
    with open(os.path.join(d, 'after'), 'w'):
        pass
    a.wait(lambda: events_of(w, os.path.join(d, 'after')))
    t.ok(('create', 0, 0, os.path.join(d, 'after')) in events_of(w),
         'events after the overflow come as before',
         'got %r' % w.events[-3:])
    a.kill(w, 9)
    a.done(w)
    a.close()


# The identity test's agent runs in namespaces of its own (UTS, network,
# mount), so that nothing it changes is the host's: an overlay on /etc
# (and /var/lib/dbus) whose upper layer, on a tmpfs of the namespace, is
# seeded with known files ($0-seed), and a network of lo and an ethernet
# eth9 (dummy, or a tap where there is no dummy driver). An overlay, not
# files bind-mounted over the host's: the agent writes beside and
# renames, which a bind-mounted file refuses (EBUSY) after its temporary
# file has been made in the host's /etc.
NETNS_SETUP = r"""set -e
d=$0
mount -t tmpfs -o size=4m,mode=0700 berth-test "$d"
for m in etc:/etc dbus:/var/lib/dbus; do
	n=${m%%:*} dir=${m#*:}
	[ -d "$dir" ] || continue
	mkdir "$d/$n" "$d/$n-work"
	cp -a "$d-seed/$n/." "$d/$n/"
	mount -t overlay berth-test \
	    -o "lowerdir=$dir,upperdir=$d/$n,workdir=$d/$n-work" "$dir"
done
ip link set lo up
ip link add eth9 type dummy 2>/dev/null || ip tuntap add dev eth9 mode tap
exec "$@"
"""
HOST_FILES = ('/etc/hostname', '/etc/machine-id', '/etc/hosts',
              '/etc/resolv.conf', '/var/lib/dbus/machine-id')
HOSTS_SEED = ('127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n'
              '127.0.1.1\ttemplate\n# kept as it is\n'
              '10.1.2.3\tother.example other\n')


def netns_wrap(ctx, name):
    """An agent's wrap: unshare(1) and NETNS_SETUP, its seed files made;
    None and why when such namespaces cannot be had here."""
    if not ctx.root:
        return None, 'needs root (namespaces of its own)'
    for tool in ('unshare', 'ip'):
        if not shutil.which(tool):
            return None, 'no %s(8) here' % tool
    d = ctx.path(name)
    os.mkdir(d)
    for sub, files in (('etc', {'hostname': 'template\n',
                                'machine-id': '5' * 32 + '\n',
                                'hosts': HOSTS_SEED,
                                'resolv.conf': 'nameserver 192.0.2.53\n'}),
                       ('dbus', {'machine-id': '5' * 32 + '\n'})):
        os.makedirs(os.path.join(d + '-seed', sub))
        for f, text in files.items():
            with open(os.path.join(d + '-seed', sub, f), 'w') as fp:
                fp.write(text)
    wrap = ['unshare', '--uts', '--net', '--mount', '--propagation',
            'private', 'sh', '-c', NETNS_SETUP, d]
    probe = subprocess.run(wrap + ['true'], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if probe.returncode != 0:
        return None, 'no namespaces with an overlay on /etc here: %s' % (
            probe.stdout.decode('utf-8', 'replace').strip()[-200:])
    return wrap, None


def host_state():
    return (socket.gethostname(), [read(p) for p in HOST_FILES],
            sorted(f for f in os.listdir('/etc') if '.berth-' in f))


def sh_out(a, cmd):
    """cmd's stdout through an 'E' on a (a failure's text if it failed)."""
    c = a.run(['sh', '-c', cmd])
    a.need(lambda: c.done, '`%s`' % cmd)
    if c.exit != 'exit 0':
        return 'failed: %r %r %r' % (c.exit, c.fail, bytes(c.err))
    return bytes(c.out).decode('utf-8', 'replace')


def test_identity(ctx):
    t = ctx.t
    descs = (
        "'U' with every field ('c' the host's own time: the clock does "
        "not move) answers 'X' 'exit 0'",
        "the hostname and /etc/hostname are 'h'",
        "/etc/machine-id (mode 444) and /var/lib/dbus/machine-id are 'i'",
        "/etc/hosts has '127.0.1.1<TAB>h' in its 127.0.1.1 line's place, "
        "its other lines kept",
        "/etc/resolv.conf has the 'n' nameservers, in order",
        "eth9 has the MAC, is up, has the address with its broadcast, "
        "and the one default route is via 'g' on it",
        "the guest's clock is within 1 s of the host's after",
        "no temporary file is left in /etc or /var/lib/dbus",
        "a second 'U' (no 'f': the first ethernet interface) replaces "
        "the address (one left) and the default route",
        "a bad MAC, hostname, 'r' length, an address without prefix, "
        "four 'n': 'F' '400 malformed identity: ...' naming the field, "
        "and nothing changed",
        "'f' naming no interface: 'F' '404 ...' naming it, nothing "
        "changed",
        "a gateway no address reaches: 'F' '500 set the default route "
        "via ... on eth9: ...', the steps before it done",
        "the host's own hostname and /etc files are as they were",
    )
    wrap, why = netns_wrap(ctx, 'ident-ns')
    if wrap is None:
        for desc in descs:
            t.skip(desc, why)
        return
    before = host_state()
    a = ctx.agent('identity', wrap=wrap)
    dbus = os.path.isdir('/var/lib/dbus')
    host = 'sbx-' + os.urandom(3).hex()
    mid = os.urandom(16).hex()
    mac = '02:42:ac:%02x:%02x:%02x' % tuple(os.urandom(3))
    fields = ['h' + host, 'i' + mid, 'm' + mac, 'a10.200.0.6/30',
              'g10.200.0.5', 'n10.200.0.5', 'n192.0.2.1',
              'r' + os.urandom(64).hex(), 'feth9']
    # CLOCK_REALTIME is not namespaced: the host's clock is set, to
    # what it says now (and never anything else)
    c = a.identity(fields + ['c%d' % (time.time_ns() // 1000000)])
    t.ok(c.exit == 'exit 0', descs[0], 'got %r %r' % (c.exit, c.fail))
    got = (sh_out(a, 'hostname'), sh_out(a, 'cat /etc/hostname'))
    t.is_(got, (host + '\n', host + '\n'), descs[1])
    got = (sh_out(a, 'cat /etc/machine-id; stat -c %a /etc/machine-id'),
           sh_out(a, 'cat /var/lib/dbus/machine-id') if dbus else None)
    t.is_(got, (mid + '\n444\n', mid + '\n' if dbus else None), descs[2])
    t.is_(sh_out(a, 'cat /etc/hosts'), HOSTS_SEED.replace(
        '127.0.1.1\ttemplate', '127.0.1.1\t' + host), descs[3])
    t.is_(sh_out(a, 'cat /etc/resolv.conf'),
          'nameserver 10.200.0.5\nnameserver 192.0.2.1\n', descs[4])
    link = sh_out(a, 'ip link show eth9')
    addr = sh_out(a, 'ip -4 -o addr show eth9')
    route = sh_out(a, 'ip -4 route show default')
    t.ok(('link/ether %s ' % mac) in link and
         re.search(r'<[^>]*\bUP\b', link) and
         len(addr.splitlines()) == 1 and
         'inet 10.200.0.6/30 brd 10.200.0.7 ' in addr and
         re.match(r'default via 10\.200\.0\.5 dev eth9\b[^\n]*\n$', route),
         descs[5], 'link: %r' % link, 'addr: %r' % addr,
         'route: %r' % route)
    guest = sh_out(a, 'date +%s%3N')
    host_ms = time.time_ns() // 1000000
    t.ok(guest.strip().isdigit() and
         abs(int(guest.strip()) - host_ms) < 1000, descs[6],
         'guest %r, host %d' % (guest, host_ms))
    left = sh_out(a, 'ls -a /etc; [ ! -d /var/lib/dbus ] || '
                  'ls -a /var/lib/dbus')
    t.ok(not left.startswith('failed') and '.berth-' not in left, descs[7],
         'left: %r' % [f for f in left.split() if '.berth-' in f] or left)

    c = a.identity(['a10.200.0.10/30', 'g10.200.0.9'])
    addr = sh_out(a, 'ip -4 -o addr show eth9')
    route = sh_out(a, 'ip -4 route show default')
    t.ok(c.exit == 'exit 0' and len(addr.splitlines()) == 1 and
         'inet 10.200.0.10/30 brd 10.200.0.11 ' in addr and
         re.match(r'default via 10\.200\.0\.9 dev eth9\b[^\n]*\n$', route),
         descs[8], 'got %r %r' % (c.exit, c.fail), 'addr: %r' % addr,
         'route: %r' % route)

    def state():
        return (sh_out(a, 'hostname; cat /etc/hostname /etc/machine-id '
                       '/etc/hosts /etc/resolv.conf'),
                sh_out(a, 'ip -4 -o addr show; ip link show eth9'))

    kept = state()
    other = ['hchanged', 'i' + os.urandom(16).hex(), 'a10.200.0.14/30',
             'n10.200.0.13', 'm02:42:ac:00:00:01']
    bad = (('m', ['m02:42:ac:11:00']), ('m', ['m03:42:ac:11:00:01']),
           ('h', ['hBad_Host']), ('h', ['h-lead']), ('h', ['h' + 'a' * 64]),
           ('r', ['r' + os.urandom(63).hex()]),
           ('r', ['r' + os.urandom(64).hex().upper()]),
           ('a', ['a10.200.0.14']), ('a', ['a10.200.0.14/33']),
           ('n', ['n192.0.2.%d' % i for i in range(1, 5)]),
           ('i', ['i' + '5' * 31]))
    fails = []
    for tag, f in bad:
        # the bad field last: the good ones before it are not applied
        c = a.identity([o for o in other if o[0] != tag] + f)
        if not (c.fail or '').startswith(
                "400 malformed identity: '%s'" % tag) and not (
                tag == 'n' and (c.fail or '').startswith(
                    '400 malformed identity: more than 3')):
            fails.append((f[0][:40], c.exit, c.fail))
    t.ok(not fails and state() == kept, descs[9], *(
        ['%r: %r %r' % x for x in fails] + ['now: %r' % (state(),),
                                            'was: %r' % (kept,)]))
    c = a.identity(other[:3] + ['feth7'])
    t.ok((c.fail or '').startswith('404 ') and 'eth7' in c.fail and
         state() == kept, descs[10], 'got %r %r' % (c.exit, c.fail))
    c = a.identity(['hlast', 'g192.0.2.1'])
    t.ok((c.fail or '').startswith('500 set the default route via '
                                   '192.0.2.1 on eth9: ') and
         sh_out(a, 'hostname') == 'last\n', descs[11],
         'got %r %r' % (c.exit, c.fail))
    a.close()
    t.is_(host_state(), before, descs[12])


def test_image_defaults(ctx):
    """A guest made from an image root: /run/berth/image.conf (here
    BERTH_AGENT_IMAGE_CONF) gives commands the image's Env, WorkingDir
    and User as defaults, under the command's own; --service runs the
    image's command with them."""
    # not in ctx.tmp (0700): user nobody goes into it
    wd = os.path.realpath(tempfile.mkdtemp(prefix='berth-agent-image.'))
    try:
        os.chmod(wd, 0o755)
        image_defaults(ctx, wd)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def image_defaults(ctx, wd):
    t = ctx.t
    conf = ctx.path('image.conf')
    root = ctx.root and _pw('nobody') is not None
    with open(conf, 'w') as f:
        f.write('# as mktemplate-image writes it\n' +
                'env=PATH=/usr/bin:/bin\nenv=FOO=b%25ar%09x\n' +
                'workdir=' + wd + '\n' +
                ('user=nobody\n' if root else '') +
                'arg=sh\narg=-c\narg=echo "$FOO"; pwd; id -u\n')
    os.environ['BERTH_AGENT_IMAGE_CONF'] = conf
    try:
        a = ctx.agent('image')
    finally:
        del os.environ['BERTH_AGENT_IMAGE_CONF']
    c = a.run(['sh', '-c', 'echo "$FOO"; echo $PATH; pwd'])
    a.done(c)
    t.is_(bytes(c.out), ('b%%ar\tx\n/usr/bin:/bin\n%s\n' % wd).encode(),
          "an image's Env (%XX decoded) and WorkingDir are a command's "
          "defaults", 'exit %r, stderr %r' % (c.exit, bytes(c.err)))
    c = a.run(['sh', '-c', 'echo "$FOO"; pwd'], cwd='/', env=['FOO=mine'])
    a.done(c)
    t.is_(bytes(c.out), b'mine\n/\n',
          "... the command's own env and cwd win")
    desc = "an image's User runs the command, 'u' root is root"
    if not root:
        t.skip(desc, 'needs root and a user nobody (the agent switches '
               'users)')
    else:
        pw = _pw('nobody')
        c = a.run(['sh', '-c', 'id -u; echo $HOME'])
        a.done(c)
        c2 = a.run(['id', '-u'], user='root')
        a.done(c2)
        t.is_((bytes(c.out), bytes(c2.out)),
              (('%d\n%s\n' % (pw.pw_uid, pw.pw_dir)).encode(), b'0\n'),
              desc, 'stderr %r %r' % (bytes(c.err), bytes(c2.err)))
    a.close()
    env = dict(os.environ, BERTH_AGENT_IMAGE_CONF=conf)
    r = subprocess.run([AGENT, '--service'], env=env, capture_output=True,
                       timeout=WAIT)
    want = 'b%%ar\tx\n%s\n%d\n' % (wd, _pw('nobody').pw_uid if root
                                     else os.getuid())
    t.is_((r.returncode, r.stdout.decode()), (0, want),
          "berth-agent --service runs the image's command so",
          'stderr %r' % r.stderr)


def _pw(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


TESTS = [test_ping, test_side_by_side, test_window, test_stdin, test_exit,
         test_signals_reset, test_kill, test_timeout, test_background, test_files, test_users,
         test_channels, test_tty, test_ping_ends, test_streams, test_idle,
         test_max_chans, test_host_gone, test_overrun, test_detach,
         test_detach_follow, test_detach_signal, test_detach_max,
         test_get_range, test_ls, test_ls_window, test_mkdir, test_remove,
         test_move, test_watch, test_watch_overflow, test_attach,
         test_attach_window, test_attach_pipe, test_identity,
         test_image_defaults]


def final_checks(ctx):
    """What no channel of any test may have seen."""
    t = ctx.t
    chans = [c for a in ctx.agents for c in a.chans]
    stray = [(a.name,) + s for a in ctx.agents for s in a.stray]
    t.ok(not stray, 'no frame came for a channel the host never opened, '
         'nor of a type the host does not know',
         *['agent %s: %r on channel %r: %r' % s for s in stray[:5]])
    late = [(c.id, c.late[:2]) for c in chans if c.late]
    t.ok(not late, "no frame came for a channel after its 'X' or 'F' (or "
         'the pong that ended it)', *['channel %d: %r' % l for l in late[:5]])
    big = max([c.max_frame for c in chans] or [0])
    t.ok(0 < big <= CHUNK,
         "no 'O' or 'R' frame carried more than BA_CHUNK (%d) bytes" % CHUNK,
         'largest: %d%s' % (big, ' (none seen)' if not big else ''))
    over = [(c.id, c.max_unacked) for c in chans if c.max_unacked > WINDOW]
    t.ok(not over, 'no channel ever had more than BA_WINDOW outstanding',
         *['channel %d: %d' % o for o in over[:5]])


def main():
    if not os.access(AGENT, os.X_OK):
        sys.stderr.write('%s not built\n' % AGENT)
        return 77
    ctx = Ctx()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    try:
        for test in TESTS:
            n = len(ctx.agents)
            try:
                test(ctx)
            except Exception as e:     # this test ends; the next goes on
                ctx.t.ok(False, '%s ran to its end' % test.__name__,
                         '%s: %s' % (type(e).__name__, e),
                         traceback.format_exc())
            for a in ctx.agents[n:]:
                a.terminate()
        final_checks(ctx)
        if ctx.t.failed:
            for a in ctx.agents:
                tail = a.log_tail()
                if tail:
                    Tap.diag('agent %s log:\n%s' % (a.name, tail))
    except KeyboardInterrupt:
        return 130
    finally:
        ctx.cleanup()
    print('1..%d' % ctx.t.n, flush=True)
    return 1 if ctx.t.failed else 0


if __name__ == '__main__':
    sys.exit(main())
