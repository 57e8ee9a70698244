// SPDX-License-Identifier: GPL-2.0-or-later
//
// vm.test.mjs — the SDK against one real microVM (the minimal template, a
// busybox guest): commands (status, output, stdin, env, timeouts, the
// streamed exec as a conversation), files (small ones, a 100 MB round
// trip with bounded client memory, watch), a detached server reached on
// its published port, a detached shell on a terminal attached to and
// detached from, the guest console (read and followed), the health of a
// berthd with VMs, events, fork and checkpoint refused (the minimal
// template), suspend then the next exec wakes it. Environment
// (tests/integ/sdk-js.sh): BERTH_SOCKET, BERTH_TEST_CA, BERTH_TEST_VM_ID.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import {
	Sandbox, NotFoundError, BadRequestError, ConflictError,
} from "../dist/index.js";
import { env, admin, get, waitFor } from "./common.mjs";

const run = promisify(execFile);
const c = admin();
const id = env.BERTH_TEST_VM_ID;
let sb;
after(async () => {
	await sb?.remove().catch(() => undefined);
	c.close();
});

test("create a microVM sandbox: it runs once create returns", async () => {
	sb = await Sandbox.create(c, { id, idlePause: "never",
	    idleSuspend: "never", env: { SDK_ENV: "from-create" } });
	assert.equal(sb.data.state, "running");
	assert.equal(sb.data.external, false);
	assert.ok(sb.token, "its token");
});

test("exec: exit status, stdout and stderr, env and cwd", async () => {
	const r = await sb.exec("echo out; echo err >&2; echo $SDK_ENV $X; pwd; exit 3",
	    { env: { X: "cmd" }, cwd: "/tmp" });
	assert.equal(r.exitCode, 3);
	assert.equal(r.signal, null);
	assert.equal(r.stdout, "out\nfrom-create cmd\n/tmp\n");
	assert.equal(r.stderr, "err\n");
	assert.equal((await sb.exec(["true"])).exitCode, 0);
	assert.equal((await sb.exec(["id", "-u"], { user: "root" })).stdout, "0\n");
});

test("exec: stdin, binary output, a signal, a timeout", async () => {
	let r = await sb.exec(["cat"], { stdin: "hello\nworld\n" });
	assert.equal(r.stdout, "hello\nworld\n");
	r = await sb.exec(["printf", "\\377\\376\\000x"]);
	assert.deepEqual([...r.stdoutBytes], [0xff, 0xfe, 0, 0x78]);
	r = await sb.exec("kill -9 $$");
	assert.deepEqual([r.exitCode, r.signal], [null, 9]);
	r = await sb.exec(["sleep", "30"], { timeout: "1s" });
	assert.equal(r.timedOut, true);
	// stdin past what a buffered exec takes goes streamed
	const big = Buffer.alloc(300 * 1024, "a");
	r = await sb.exec(["wc", "-c"], { stdin: big });
	assert.equal(r.stdout.trim(), String(big.length));
	const e = await sb.exec(["true"], { timeout: "forever" }).catch((x) => x);
	assert.ok(e instanceof BadRequestError, String(e));
	assert.equal(e.field, "timeout");
});

test("execStream: output as it comes, stdin written meanwhile", async () => {
	const p = await sb.execStream(["sh", "-c", 'while read l; do echo "got $l"; ' +
	    'echo "e $l" >&2; done; exit 7'], { stdin: "pipe" });
	const it = p[Symbol.asyncIterator]();
	const seen = { stdout: "", stderr: "" };
	// a conversation: each line is answered before the next is sent
	async function until(stream, text) {
		while (!seen[stream].includes(text)) {
			const { value, done } = await it.next();
			assert.ok(!done && value.stream !== "exit", `ended before ${text}`);
			seen[value.stream] += value.data.toString();
		}
	}
	p.stdin.write("one\n");
	await until("stdout", "got one\n");
	p.stdin.write("two\n");
	await until("stdout", "got two\n");
	p.stdin.end();
	let end;
	for (;;) {
		const { value, done } = await it.next();
		if (done)
			break;
		if (value.stream === "exit")
			end = value;
		else
			seen[value.stream] += value.data.toString();
	}
	assert.equal(end.exitCode, 7);
	assert.equal(seen.stdout, "got one\ngot two\n");
	assert.equal(seen.stderr, "e one\ne two\n");
	assert.equal((await p.exit).exitCode, 7);
	// stdin given up front, the whole output collected
	const q = await sb.execStream(["tr", "a-z", "A-Z"], { stdin: "shout\n" });
	const r = await q.collect();
	assert.equal(r.stdout, "SHOUT\n");
	assert.equal(r.exitCode, 0);
});

test("files: write, read, list, mkdir, move, remove", async () => {
	await sb.files.mkdir("/tmp/sdk/d", { parents: true });
	const w = await sb.files.write("/tmp/sdk/d/a.txt", "some text\n",
	    { mode: "0600" });
	assert.equal(w.size, 10);
	assert.equal(w.mode, "0600");
	assert.equal((await sb.files.read("/tmp/sdk/d/a.txt")).toString(),
	    "some text\n");
	assert.equal((await sb.files.read("/tmp/sdk/d/a.txt",
	    { offset: 5, length: 4 })).toString(), "text");
	await sb.files.move("/tmp/sdk/d/a.txt", "/tmp/sdk/b.txt");
	const ls = await sb.files.list("/tmp/sdk");
	assert.deepEqual(ls.map((e) => `${e.name}:${e.type}`).sort(),
	    ["b.txt:file", "d:dir"]);
	await sb.files.remove("/tmp/sdk", { recursive: true });
	const e = await sb.files.read("/tmp/sdk/b.txt").catch((x) => x);
	assert.ok(e instanceof NotFoundError, String(e));
});

test("files: watch gives ready, then create, modify and delete", async () => {
	await sb.files.mkdir("/tmp/watched");
	const w = await sb.files.watch("/tmp/watched");
	const got = [];
	let acted = false;
	for await (const ev of w) {
		got.push(`${ev.event} ${ev.path}`);
		if (ev.event === "ready" && !acted) {
			acted = true;
			await sb.files.write("/tmp/watched/f", "x");
			await sb.files.remove("/tmp/watched/f");
		}
		if (ev.event === "delete")
			break;
	}
	assert.equal(got[0].split(" ")[0], "ready");
	// written under a temporary name, then renamed into place
	assert.ok(got.some((g) => /^(create|move_to) \/tmp\/watched\/f$/.test(g)),
	    got.join(", "));
	assert.equal(got[got.length - 1], "delete /tmp/watched/f");
});

test("files: a 100 MB round trip streamed with bounded memory", async (t) => {
	const MB = 1024 * 1024, N = 100;
	// What the transfer holds, not garbage waiting for a collection
	// (each socket read is a new buffer): a collection every 4 MB, the
	// RSS sampled right after it.
	setFlagsFromString("--expose-gc");
	const gc = runInNewContext("gc");
	// a round trip first: what the first transfer sets up for good
	// (code, the allocator's pools) is not the transfer's
	await sb.files.write("/data/warm.bin", Buffer.alloc(16 * MB, "w"));
	for await (const b of await sb.files.readStream("/data/warm.bin"))
		assert.ok(b.length > 0);
	await sb.files.remove("/data/warm.bin");
	gc();
	const base = process.memoryUsage().rss;
	let peak = base;
	const sample = () => {
		gc();
		peak = Math.max(peak, process.memoryUsage().rss);
	};
	const t0 = Date.now();
	const hin = createHash("sha256");
	// 1600 pieces of 64 KiB, made as they are sent
	async function* source() {
		for (let i = 0; i < N * 16; i++) {
			const b = Buffer.alloc(MB / 16, `piece ${i} `);
			hin.update(b);
			if (i % 64 === 0)
				sample();
			yield b;
		}
	}
	const w = await sb.files.write("/data/big.bin", source());
	assert.equal(w.size, N * MB);
	const hout = createHash("sha256");
	let n = 0, next = 0;
	for await (const b of await sb.files.readStream("/data/big.bin")) {
		hout.update(b);
		n += b.length;
		if (n >= next) {
			sample();
			next += 4 * MB;
		}
	}
	sample();
	assert.equal(n, N * MB);
	assert.equal(hout.digest("hex"), hin.digest("hex"));
	const growth = (peak - base) / MB;
	t.diagnostic(`sdk: 100 MB written and read back in ${Date.now() - t0} ms, ` +
	    `the client's RSS grew ${growth.toFixed(1)} MB at most`);
	assert.ok(growth < 16, `the client's RSS grew ${growth.toFixed(1)} MB`);
	const r = await sb.exec(["wc", "-c", "/data/big.bin"]);
	assert.match(r.stdout, /^104857600 /);
	await sb.files.remove("/data/big.bin");
});

test("a detached server, reached on its published port", async () => {
	await sb.files.mkdir("/tmp/www");
	await sb.files.write("/tmp/www/index.html", "hello from the guest\n");
	const p = await sb.spawn(["busybox", "httpd", "-f", "-p", "8090",
	    "-h", "/tmp/www"]);
	assert.ok(p.id > 0 && p.pid > 0);
	const list = await sb.processes.list();
	assert.ok(list.some((x) => x.process === p.id && x.state === "running"),
	    JSON.stringify(list));
	const port = await sb.ports.publish(8090);
	const r = await waitFor("the guest's server answers", async () => {
		const x = await get(port.url);
		return x.status === 200 && x;
	}, 60000);
	assert.equal(r.body, "hello from the guest\n");
	await p.kill("TERM");
	const end = await p.wait();
	assert.equal(end.state, "exited");
	assert.equal(end.signal, 15);
	assert.equal((await p.info()).state, "exited");
	const logs = await p.logs();
	assert.ok(Buffer.isBuffer(logs.output));
	await sb.ports.unpublish(8090);
	// a detached command's output, read back from its ring
	const q = await sb.exec("echo one; echo two", { detach: true });
	assert.equal((await q.wait()).exitCode, 0);
	assert.equal((await q.logs()).output.toString(), "one\ntwo\n");
	assert.equal((await q.logs({ offset: 4 })).output.toString(), "two\n");
	// ... and as it comes
	const f = await sb.spawn("echo a; sleep 1; echo b; exit 4");
	let out = "";
	for await (const b of f.follow())
		out += b.toString();
	assert.equal(out, "a\nb\n");
	assert.equal((await f.wait()).exitCode, 4);
	assert.ok((await sb.processes.get(f.id)).pid > 0);
});

/** Reads an ExecStream's iterator until its output holds text (what
 * it read), failing at its end or after ms (the stream then killed). */
async function readUntil(s, it, text, ms = 60000) {
	const guard = setTimeout(() => s.kill(), ms);
	let out = "";
	try {
		while (!out.includes(text)) {
			const { value, done } = await it.next();
			assert.ok(!done && value.stream !== "exit",
			    `ended before ${JSON.stringify(text)}: ${JSON.stringify(out)}`);
			out += value.data.toString();
		}
	} finally {
		clearTimeout(guard);
	}
	return out;
}

/** The rest of an ExecStream's iterator: its exit event. */
async function endOf(it) {
	let end;
	for (;;) {
		const { value, done } = await it.next();
		if (done)
			return end;
		if (value.stream === "exit")
			end = value;
	}
}

test("attach: a detached shell on a terminal, typed to, detached", async () => {
	const p = await sb.exec("sh", { detach: true,
	    tty: { rows: 24, cols: 80 } });
	assert.equal((await p.info()).state, "running");
	const s = await p.attach();
	const it = s[Symbol.asyncIterator]();
	s.stdin.write("echo $((6*7))\r");
	await readUntil(s, it, "42");
	s.stdin.end();		// the end of the request body: it detaches
	const end = await endOf(it);
	assert.equal(end.stream, "exit");
	assert.deepEqual([end.detached, end.state, end.process],
	    [true, "running", p.id]);
	assert.equal(end.exitCode, null);
	assert.ok(end.nextOffset > 0, `nextOffset ${end.nextOffset}`);
	assert.equal((await s.exit).detached, true);
	assert.equal((await p.info()).state, "running");
	// attached again with the screen from offset 0 (the ring: the 42
	// of before) and a terminal of another size
	const s2 = await sb.processes.attach(p.id, { offset: 0, rows: 30,
	    cols: 100 });
	const it2 = s2[Symbol.asyncIterator]();
	await readUntil(s2, it2, "42");
	s2.stdin.write("stty size\r");
	await readUntil(s2, it2, "30 100");
	s2.stdin.end();
	assert.equal((await endOf(it2)).detached, true);
	await p.kill("KILL");
	const w = await p.wait();
	assert.deepEqual([w.state, w.signal], ["exited", 9]);
});

test("the guest console: from byte 0, its end, followed; a bad offset", async () => {
	const full = await sb.console({ from: 0 });
	assert.equal(full.from, 0);
	assert.ok(full.size > 0);
	assert.equal(full.text.length, Math.min(full.size, 1024 * 1024));
	// the minimal template's kernel prints its banner first
	assert.match(full.text.slice(0, 65536), /Linux version/);
	const last = await sb.console();
	assert.ok(last.text.length > 0 && last.text.length <= 65536,
	    `${last.text.length} bytes`);
	assert.equal(last.from, last.size - last.text.length);
	const end = await sb.console({ from: last.size });
	assert.deepEqual([end.from, end.text], [last.size, ""]);
	const e = await sb.console({ from: "x" }).catch((x) => x);
	assert.ok(e instanceof BadRequestError, String(e));
	assert.equal(e.field, "from");
	// a line the guest writes on its console, followed from the end
	const mark = `berth-sdk-js-console-${Date.now()}`;
	await sb.exec(`echo ${mark} >/dev/console`);
	await waitFor("the line on the console", async () =>
	    (await sb.console({ from: end.size })).text.includes(mark));
	let piece;
	for await (const t of sb.followConsole({ from: end.size })) {
		piece = t;
		break;
	}
	assert.ok(piece.includes(mark), piece);
	// without from: the last 64 KiB first
	const g = sb.followConsole();
	const first = (await g.next()).value;
	await g.return();
	assert.ok(first.includes(mark) && first.length <= 65536);
	const nf = await new Sandbox(c, { id: `${id}-nosuch`, state: "running" })
	    .console().catch((x) => x);
	assert.ok(nf instanceof NotFoundError, String(nf));
});

test("health: a berthd with VMs says so, with its capacity", async () => {
	const h = await c.health();
	assert.equal(h.status, "ok");
	assert.equal(h.vms, "on");
	assert.equal(typeof h.egress, "string");
	assert.equal(typeof h.template, "string");
	assert.equal(typeof h.capacity, "object");
	assert.ok(h.capacity.states?.running?.sandboxes >= 1,
	    JSON.stringify(h.capacity.states));
});

test("pause and resume; the events say so", async () => {
	await sb.pause();
	assert.equal((await sb.info()).state, "paused");
	await sb.resume();
	assert.equal((await sb.info()).state, "running");
	assert.equal((await sb.exec(["echo", "on"])).stdout, "on\n");
	const ev = await sb.events();
	const ops = ev.map((x) => `${x.operation} ${x.result}`);
	assert.equal(ops[0], "create ok", ops.join(", "));
	assert.ok(ops.includes("pause ok") && ops.includes("resume ok"),
	    ops.join(", "));
	assert.ok(ev.every((x, i) => i === 0 || x.seq > ev[i - 1].seq));
});

test("fork and checkpoint of the minimal template: ConflictError, nothing stored", async () => {
	// it has no root overlay: fork.test.mjs (sdk-fork.sh) forks a Debian one
	const e = await sb.fork(`${id}-f`).catch((x) => x);
	assert.ok(e instanceof ConflictError, String(e));
	assert.deepEqual([e.status, e.code], [409, "conflict"]);
	assert.match(e.message, /root overlay/);
	await assert.rejects(Sandbox.get(c, `${id}-f`), NotFoundError);
	const k = await sb.checkpoint("sdk1").catch((x) => x);
	assert.ok(k instanceof ConflictError, String(k));
	assert.equal(k.code, "conflict");
	assert.match(k.message, /root overlay/);
	assert.equal((await sb.info()).state, "running");
});

test("suspend, then the next exec wakes it", async () => {
	await sb.suspend();
	const s = await sb.waitFor("suspended", 120000);
	assert.equal(s.state, "suspended");
	const r = await sb.exec(["echo", "awake"]);
	assert.equal(r.stdout, "awake\n");
	assert.ok(r.wakeMs > 0, `wake_ms ${r.wakeMs}`);
	assert.equal((await sb.info()).state, "running");
});

test("bench_exec.mjs: exec round trips through the SDK, as JSON", async (t) => {
	const { stdout } = await run(process.execPath, [
	    new URL("../bench_exec.mjs", import.meta.url).pathname,
	    env.BERTH_SOCKET, id, "20"]);
	const r = JSON.parse(stdout);
	assert.equal(r.n, 20);
	assert.ok(r.p50_ms > 0 && r.p99_ms >= r.p50_ms, stdout);
	assert.ok(r.stream_p50_ms > 0 && r.stream_p99_ms >= r.stream_p50_ms, stdout);
	t.diagnostic(`sdk: exec true through the SDK (TCG): p50 ${r.p50_ms} ms, ` +
	    `p99 ${r.p99_ms} ms; streamed p50 ${r.stream_p50_ms} ms`);
});

test("remove: the sandbox is gone", async () => {
	await sb.remove();
	await assert.rejects(sb.info(), NotFoundError);
	sb = undefined;
});
