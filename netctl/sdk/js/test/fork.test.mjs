// SPDX-License-Identifier: GPL-2.0-or-later
//
// fork.test.mjs — forks and checkpoints through the SDK on ONE real Debian
// sandbox made from its template's ready snapshot: tests/integ/sdk-fork.sh
// makes it (the minimal template cannot fork) and names it in
// BERTH_TEST_FORK_SANDBOX, its own token in BERTH_TEST_FORK_TOKEN, with
// BERTH_SOCKET, BERTH_TEST_CTL_URL and BERTH_TEST_CA. Without it each test
// skips, saying why (BERTH_TEST_FORK_SKIP). Each test removes what it made.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import {
	Sandbox, NotFoundError, BadRequestError, ConflictError, ForbiddenError,
} from "../dist/index.js";
import { env, admin, tokenClient } from "./common.mjs";

const id = env.BERTH_TEST_FORK_SANDBOX;
const skip = id ? false : (env.BERTH_TEST_FORK_SKIP ||
    "no sandbox of a template with a ready snapshot (BERTH_TEST_FORK_" +
    "SANDBOX: tests/integ/sdk-fork.sh runs these on a Debian one)");
const c = id ? admin() : undefined;
let sb;
after(() => c?.close());

/** Removes those sandboxes, if there. */
async function drop(...ids) {
	for (const x of ids)
		await new Sandbox(c, { id: x, state: "" }).remove().catch((e) => {
			if (!(e instanceof NotFoundError))
				throw e;
		});
}

/** x is no sandbox of berthd's: a NotFoundError with the API's code. */
async function gone(x) {
	const e = await Sandbox.get(c, x).catch((y) => y);
	assert.ok(e instanceof NotFoundError, `${x}: ${e}`);
	assert.equal(e.code, "not_found");
}

/** What the guest has at path, or "none". */
async function cat(s, path) {
	return (await s.exec(`cat ${path} 2>/dev/null || echo none`)).stdout.trim();
}

/** The APIError an SDK call throws (fails when it does not throw). */
async function thrown(p) {
	const e = await p.then(() => undefined, (x) => x);
	assert.ok(e !== undefined, "it did not throw");
	return e;
}

test("fork: the fork has the file, runs its own exec, writes apart", { skip }, async () => {
	sb = await Sandbox.get(c, id);
	assert.equal(sb.data.state, "running");
	await sb.files.write("/root/js-fork", "from the parent\n");
	await sb.exec(["sync"]);
	const forks = await sb.fork("js-f1");
	assert.deepEqual(forks.map((f) => f.id), ["js-f1"]);
	const f = forks[0];
	try {
		assert.match(f.token, /^berth_/);
		assert.equal(f.data.state, "running");
		assert.equal((await f.exec("hostname")).stdout, "js-f1\n");
		assert.equal((await f.files.read("/root/js-fork")).toString(),
		    "from the parent\n");
		// its writes do not reach the parent, nor the parent's it
		await f.exec("echo fork-only >/root/js-fork-only; sync");
		await sb.exec("echo parent-only >/root/js-parent-only; sync");
		await assert.rejects(sb.files.read("/root/js-fork-only"),
		    NotFoundError);
		assert.equal(await cat(f, "/root/js-parent-only"), "none");
		assert.equal(await cat(f, "/root/js-fork-only"), "fork-only");
		// the fork's own token over TLS: its sandbox, not its parent
		const tc = tokenClient(f.token);
		try {
			const mine = await Sandbox.get(tc, "js-f1");
			assert.equal((await mine.exec(["cat", "/root/js-fork"])).stdout,
			    "from the parent\n");
			const e = await thrown(new Sandbox(tc, { id, state: "" })
			    .fork("js-f9"));
			assert.ok(e instanceof ForbiddenError, String(e));
			assert.equal(e.status, 403);
		} finally {
			tc.close();
		}
		await gone("js-f9");
	} finally {
		await f.remove();
	}
	await gone("js-f1");
	assert.equal((await sb.files.read("/root/js-fork")).toString(),
	    "from the parent\n");
});

test("fork with the sandbox's own token: two in one call, each with its token", {
    skip: skip || (env.BERTH_TEST_FORK_TOKEN ? false :
    "no token of the sandbox (BERTH_TEST_FORK_TOKEN)") }, async () => {
	const tc = tokenClient(env.BERTH_TEST_FORK_TOKEN);
	try {
		const forks = await new Sandbox(tc, { id, state: "" })
		    .fork(["js-f2", "js-f3"]);
		assert.deepEqual(forks.map((f) => f.id), ["js-f2", "js-f3"]);
		assert.notEqual(forks[0].token, forks[1].token);
		for (const f of forks) {
			// the sandbox's token may not see its forks: each fork
			// talks with its own token
			assert.notEqual(f.client, tc);
			assert.equal(f.data.state, "running");
			assert.equal((await f.exec("hostname")).stdout, `${f.id}\n`);
			await assert.rejects(new Sandbox(tc, { id: f.id, state: "" })
			    .info(), ForbiddenError);
			f.client.close();
		}
	} finally {
		tc.close();
		await drop("js-f2", "js-f3");
	}
});

test("checkpoint: taken, listed, restored in place, a sandbox made from it", { skip }, async () => {
	await sb.exec("echo one >/root/js-ck; sync");
	const k = await sb.checkpoint("js-k1");
	assert.deepEqual([k.sandbox, k.name], [id, "js-k1"]);
	assert.ok(k.size_bytes > 4096, `size_bytes ${k.size_bytes}`);
	assert.ok(k.created > 0);
	const listed = await sb.checkpoints();
	assert.ok(listed.some((x) => x.name === "js-k1" &&
	    x.size_bytes === k.size_bytes), JSON.stringify(listed));
	assert.equal((await sb.info()).state, "running");
	try {
		await sb.exec("echo two >/root/js-ck; echo later >/root/js-later; sync");
		const info = await sb.restore("js-k1");
		assert.deepEqual([info.id, info.state], [id, "running"]);
		assert.equal(sb.data.state, "running");
		assert.equal((await sb.files.read("/root/js-ck")).toString(), "one\n");
		assert.equal(await cat(sb, "/root/js-later"), "none");
		assert.equal((await sb.exec("hostname")).stdout, `${id}\n`);
		// a new sandbox from the checkpoint (create --from)
		const [n] = await sb.fork("js-kf", { checkpoint: "js-k1" });
		try {
			assert.ok(n.token);
			assert.equal((await n.exec("hostname; cat /root/js-ck")).stdout,
			    "js-kf\none\n");
		} finally {
			await n.remove();
		}
	} finally {
		await sb.removeCheckpoint("js-k1");
	}
	assert.ok(!(await sb.checkpoints()).some((x) => x.name === "js-k1"));
});

test("errors: typed, with the API's code and field; nothing stored", { skip }, async () => {
	let e = await thrown(new Sandbox(c, { id: "js-no-such", state: "" })
	    .fork("js-x1"));
	assert.ok(e instanceof NotFoundError, String(e));
	assert.deepEqual([e.status, e.code], [404, "not_found"]);
	assert.match(e.message, /js-no-such/);
	await gone("js-x1");
	e = await thrown(sb.fork([]));
	assert.ok(e instanceof BadRequestError, String(e));
	assert.deepEqual([e.code, e.field], ["invalid_argument", "ids"]);
	e = await thrown(sb.fork(id));
	assert.ok(e instanceof ConflictError, String(e));
	assert.deepEqual([e.code, e.field], ["conflict", "ids"]);
	e = await thrown(sb.fork("Bad_Id"));
	assert.ok(e instanceof BadRequestError, String(e));
	assert.equal(e.field, "ids");
	e = await thrown(sb.fork("js-x2", { checkpoint: "nope" }));
	assert.ok(e instanceof NotFoundError, String(e));
	assert.deepEqual([e.code, e.field], ["not_found", "checkpoint"]);
	await gone("js-x2");
	// checkpoints
	e = await thrown(sb.checkpoint("Bad_Name"));
	assert.ok(e instanceof BadRequestError, String(e));
	assert.deepEqual([e.code, e.field], ["invalid_argument", "name"]);
	e = await thrown(sb.restore("nope"));
	assert.ok(e instanceof NotFoundError, String(e));
	assert.deepEqual([e.code, e.field], ["not_found", "checkpoint"]);
	e = await thrown(sb.removeCheckpoint("nope"));
	assert.ok(e instanceof NotFoundError, String(e));
	assert.equal(e.code, "not_found");
	await assert.rejects(new Sandbox(c, { id: "js-no-such", state: "" })
	    .checkpoints(), NotFoundError);
	await sb.checkpoint("js-k2");
	try {
		e = await thrown(sb.checkpoint("js-k2"));
		assert.ok(e instanceof ConflictError, String(e));
		assert.deepEqual([e.code, e.field], ["conflict", "name"]);
	} finally {
		await sb.removeCheckpoint("js-k2");
	}
	// an external sandbox has no VM to fork or checkpoint
	const ext = await Sandbox.create(c, { id: "js-ext", address: "127.0.0.1" });
	try {
		e = await thrown(ext.fork("js-x3"));
		assert.ok(e instanceof ConflictError, String(e));
		assert.equal(e.code, "conflict");
		assert.match(e.message, /not a microVM/);
		await assert.rejects(ext.checkpoint("k"), ConflictError);
	} finally {
		await ext.remove();
	}
	await gone("js-x3");
	assert.equal((await sb.exec("hostname")).stdout, `${id}\n`);
});
