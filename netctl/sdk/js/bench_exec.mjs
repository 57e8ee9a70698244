#!/usr/bin/env node
// SPDX-License-Identifier: GPL-2.0-or-later
//
// bench_exec.mjs — `exec(["true"])` round trips through the SDK on a
// running sandbox, one after the other over the client's kept-alive
// connection, as tests/bench/exec's "API (keep-alive, control.sock)"
// row does without the SDK. Prints JSON: the count and the p50/p99 in
// ms (nearest rank, as tests/bench/wake's pct), and the same of the
// streamed exec, and the buffered round trips themselves (samples_ms,
// which tests/bench/exec reads). Needs the package built (dist/: tsc, or
// npm pack).
//
// Before the rounds counted, W (20) not counted: a node process that has
// just started runs its first calls' code unoptimized (0.5-2 ms more a
// round trip here for the first 15-20), which is the start-up's, not the
// SDK's per-call cost (the Python bench likewise warms up with 5).
//
//   node bench_exec.mjs SOCKET SANDBOX [N] [W]  (N: 200, W: 20 by default)

import { Client, Sandbox } from "./dist/index.js";

function pct(v, p) {
	const s = [...v].sort((a, b) => a - b);
	const k = Math.max(0, Math.min(s.length - 1, Math.ceil(p / 100 * s.length) - 1));
	return s.length ? Math.round(s[k] * 1000) / 1000 : null;
}

const [socket, id, nArg, wArg] = process.argv.slice(2);
const n = nArg === undefined ? 200 : Number(nArg);
const warm = wArg === undefined ? 20 : Number(wArg);
if (!socket || !id || !Number.isInteger(n) || n < 1 ||
    !Number.isInteger(warm) || warm < 0) {
	console.error("usage: node bench_exec.mjs SOCKET SANDBOX [N] [W]");
	process.exit(2);
}
const c = new Client({ socket });
try {
	const sb = await Sandbox.get(c, id);
	const r0 = await sb.exec(["true"]);	/* wakes it, warms the path */
	if (r0.exitCode !== 0)
		throw new Error(`exec true: exit ${r0.exitCode}`);
	for (let i = 0; i < warm; i++) {
		await sb.exec(["true"]);
		await (await sb.execStream(["true"])).wait();
	}
	const buffered = [], streamed = [];
	for (let i = 0; i < n; i++) {
		const t = performance.now();
		const r = await sb.exec(["true"]);
		buffered.push(performance.now() - t);
		if (r.exitCode !== 0)
			throw new Error(`exec true: exit ${r.exitCode}`);
	}
	for (let i = 0; i < n; i++) {
		const t = performance.now();
		const e = await (await sb.execStream(["true"])).wait();
		streamed.push(performance.now() - t);
		if (e.exitCode !== 0)
			throw new Error(`streamed exec true: exit ${e.exitCode}`);
	}
	console.log(JSON.stringify({ sandbox: id, n,
	    p50_ms: pct(buffered, 50), p99_ms: pct(buffered, 99),
	    stream_p50_ms: pct(streamed, 50), stream_p99_ms: pct(streamed, 99),
	    samples_ms: buffered.map((x) => Math.round(x * 1000) / 1000) }));
} catch (e) {
	console.error(`bench_exec: ${e.message}`);
	process.exitCode = 1;
} finally {
	c.close();
}
