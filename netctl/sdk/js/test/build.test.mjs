// SPDX-License-Identifier: GPL-2.0-or-later
//
// build.test.mjs — template builds through the SDK on a berthd with a
// VMM whose builder from a Dockerfile or an image is a stand-in
// (tests/integ/sdk-js.sh writes it: it says what it builds, fails a
// Dockerfile saying FAIL, else copies the minimal template; no VM
// boots): a context directory streamed as a tar and followed to its end
// (its lines, its version), the same source again (berthd's cache), a
// failing build (its lines as an async iterator, then a
// TemplateBuildError with the builder's reason), from an image file and
// from a Buffer; what berthd refuses before any builder runs.
// Environment: BERTH_SOCKET, BERTH_TEST_STAND_IN (its path).

import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomBytes } from "node:crypto";
import {
	BadRequestError, NotFoundError, TemplateBuildError, tarDirectory,
} from "../dist/index.js";
import { env, admin } from "./common.mjs";

const c = admin();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "berth-sdk-build."));
const ctx = path.join(tmp, "ctx");
const skip = env.BERTH_TEST_STAND_IN ? false :
    "needs a VMM with a stand-in builder (tests/integ/sdk-js.sh)";
after(async () => {
	for (const n of ["js-built", "js-img"])
		await c.templates.remove(n).catch(() => {});
	c.close();
	fs.rmSync(tmp, { recursive: true, force: true });
});

fs.mkdirSync(path.join(ctx, "app"), { recursive: true });
fs.writeFileSync(path.join(ctx, "Dockerfile"), "FROM scratch\nCOPY app /app\n");
fs.writeFileSync(path.join(ctx, "app", "x.txt"), "hello\n");

let built;

test("a build from a context directory, followed to its end", { skip }, async () => {
	let size = 0;
	for await (const b of tarDirectory(ctx))
		size += b.length;
	const lines = [];
	const st = await c.templates.buildAndWait("js-built", { dockerfile: ctx,
	    buildArgs: { V: "1" }, onLine: (l) => lines.push(l) });
	assert.equal(st.state, "ok");
	assert.ok(lines.includes(`stand-in: building js-built from dockerfile (${size} bytes)`),
	    lines.join("\n"));
	assert.ok(lines.includes(`stand-in: template js-built in ${st.dir}`));
	const t = await c.templates.show("js-built");
	assert.equal(t.source.from, "dockerfile");
	assert.match(t.source.sha256, /^[0-9a-f]{64}$/);
	assert.equal(fs.realpathSync(t.dir), st.dir);
	assert.equal(t.version, path.basename(st.dir));
	built = st.dir;
});

test("the same source again: berthd's cache, the same version", { skip }, async () => {
	const b = await c.templates.build("js-built", { dockerfile: ctx,
	    buildArgs: { V: "1" } });
	assert.equal((await b.wait()).dir, built);
});

test("a failing build: its lines, then a TemplateBuildError", { skip }, async () => {
	fs.writeFileSync(path.join(ctx, "Dockerfile"), "FROM scratch\nRUN FAIL\n");
	const b = await c.templates.build("js-built", { dockerfile: ctx, pollMs: 100 });
	const lines = [];
	for await (const l of b)
		lines.push(l);
	assert.equal(b.state, "failed");
	assert.ok(lines.includes("stand-in: step 2/2 (RUN false) said: it-failed-here"),
	    lines.join("\n"));
	const e = await b.wait().catch((x) => x);
	assert.ok(e instanceof TemplateBuildError, String(e));
	assert.match(e.reason, /it-failed-here/);
	assert.match(e.log, /\/build\.log$/);
	// the version built before stays
	assert.equal(fs.realpathSync((await c.templates.show("js-built")).dir), built);
});

test("builds from an image: a file's path, then a Buffer", { skip }, async () => {
	const img = path.join(tmp, "image.tar");
	fs.writeFileSync(img, randomBytes(100000));
	const st = await c.templates.buildAndWait("js-img", { image: img });
	assert.equal(st.state, "ok");
	assert.equal((await c.templates.show("js-img")).source.from, "image");
	assert.equal((await c.templates.show("js-img")).source.bytes, 100000);
	const st2 = await c.templates.buildAndWait("js-img",
	    { image: randomBytes(5000) });
	assert.notEqual(st2.dir, st.dir);
	assert.equal((await c.templates.show("js-img")).source.bytes, 5000);
});

test("refused before a builder runs: typed errors", { skip }, async () => {
	const e = await c.templates.buildStatus("js-nosuch").catch((x) => x);
	assert.ok(e instanceof NotFoundError, String(e));
	const e2 = await c.templates.build("js-nosuch").catch((x) => x);
	assert.ok(e2 instanceof BadRequestError, String(e2));
	assert.equal(e2.field, "name");
	const e3 = await c.templates.build("js-built", { dockerfile: ctx,
	    file: "../Dockerfile" }).catch((x) => x);
	assert.ok(e3 instanceof BadRequestError, String(e3));
	assert.equal(e3.field, "file");
	for (const n of ["js-built", "js-img"]) {
		await c.templates.remove(n);
		await assert.rejects(c.templates.show(n), NotFoundError);
	}
});
