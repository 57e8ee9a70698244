// SPDX-License-Identifier: GPL-2.0-or-later
//
// admin.test.mjs — the admin calls against the API-only berthd of
// tests/integ/sdk-js.sh (no VMM, nothing booted): tokens (list, show,
// rotate: the old secret then 401, the new one works; revoke; a
// sandbox's token rotating itself, refused another's), the global
// policy (set then read back, a bad one naming its field, a sandbox
// token refused), every published port with its URL, the OpenAPI
// document, templates (list, show, add a directory, remove; 404s; a
// build and a build's state refused as a berthd without VMs refuses
// them, a context of some size streamed as a tar meanwhile), fleet
// calls on a berthd not in fleet mode (404) and a sandbox's move (409);
// and without berthd the
// SDK's ustar writer (read back by tar) and a build followed to its end.
// Environment: BERTH_SOCKET, BERTH_TEST_CTL_URL, BERTH_TEST_CA,
// BERTH_TEST_UPSTREAM_PORT.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
	Sandbox, NotFoundError, ForbiddenError, BadRequestError, ConflictError,
	TemplateBuild, TemplateBuildError, tarDirectory,
} from "../dist/index.js";
import { env, admin, tokenClient } from "./common.mjs";

const c = admin();
const port = Number(env.BERTH_TEST_UPSTREAM_PORT);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "berth-sdk-admin."));
let a, b;
after(async () => {
	for (const sb of [a, b])
		await sb?.remove().catch(() => {});
	c.close();
	fs.rmSync(tmp, { recursive: true, force: true });
});

/** Rejection of p, or a failure when it resolved. */
async function failure(p) {
	return p.then((v) => assert.fail(`resolved: ${JSON.stringify(v)}`),
	    (e) => e);
}

test("admin: two external sandboxes", async () => {
	a = await Sandbox.create(c, { id: "js-adm-a", address: "127.0.0.1" });
	b = await Sandbox.create(c, { id: "js-adm-b", address: "127.0.0.1" });
	assert.match(a.tokenId, /^tok-/);
});

test("tokens: create, list, show, rotate (old secret 401), revoke", async () => {
	const t = await c.tokens.create({ admin: true, name: "js-admin-calls" });
	assert.match(t.id, /^tok-/);
	const rows = await c.tokens.list();
	const row = rows.find((r) => r.id === t.id);
	assert.equal(row.admin, true);
	assert.equal(row.name, "js-admin-calls");
	assert.equal(row.token, undefined, "a list shows no secret");
	assert.deepEqual((await c.tokens.list({ sandbox: "js-adm-a" }))
	    .map((r) => r.id), [a.tokenId]);
	const shown = await c.tokens.show(t.id);
	assert.deepEqual([shown.id, shown.admin, shown.sandbox], [t.id, true, null]);
	const old = tokenClient(t.token);
	const r = await c.tokens.rotate(t.id);
	assert.equal(r.id, t.id);
	assert.notEqual(r.token, t.token);
	const e = await failure(old.tokens.list());
	assert.ok(e instanceof ForbiddenError, String(e));
	assert.equal(e.status, 401);
	const fresh = tokenClient(r.token);
	assert.equal((await fresh.tokens.show(t.id)).id, t.id);
	await c.tokens.revoke(t.id);
	const e2 = await failure(fresh.tokens.show(t.id));
	assert.equal(e2.status, 401);
	assert.ok(await failure(c.tokens.show(t.id)) instanceof NotFoundError);
	const e3 = await failure(c.tokens.show("Not_A_Token"));
	assert.ok(e3 instanceof BadRequestError, String(e3));
	assert.equal(e3.field, "id");
	old.close();
	fresh.close();
});

test("tokens: a sandbox's token rotates itself, not another's", async () => {
	const sb = await Sandbox.create(c, { id: "js-adm-rot", address: "127.0.0.1" });
	try {
		const t = tokenClient(sb.token);
		const e = await failure(t.tokens.rotate(a.tokenId));
		assert.ok(e instanceof ForbiddenError, String(e));
		assert.equal(e.status, 403);
		assert.ok(await failure(t.tokens.list()) instanceof ForbiddenError);
		const r = await t.tokens.rotate(sb.tokenId);
		assert.deepEqual([r.id, r.sandbox, r.admin], [sb.tokenId, "js-adm-rot", false]);
		assert.equal((await failure(Sandbox.get(t, "js-adm-rot"))).status, 401);
		const t2 = tokenClient(r.token);
		assert.equal((await Sandbox.get(t2, "js-adm-rot")).id, "js-adm-rot");
		t.close();
		t2.close();
	} finally {
		await sb.remove();
	}
});

test("policy: setPolicy then policy() shows it; null puts it back", async () => {
	const before = await c.policy();
	try {
		const p = await c.setPolicy({ deny: ["198.51.100.0/24"], maxRules: 66 });
		assert.ok(p.deny.includes("198.51.100.0/24"), p.deny.join());
		const got = await c.policy();
		assert.ok(got.deny.includes("198.51.100.0/24"));
		assert.equal(got.max_rules, 66);
		assert.equal(got.default_mode, before.default_mode);
		const q = await c.setPolicy({ connLimit: 9 });
		assert.deepEqual([q.conn_limit, q.max_rules], [9, 66]);
	} finally {
		await c.setPolicy({ deny: before.deny ?? [], maxRules: null,
		    connLimit: null });
	}
	assert.deepEqual(await c.policy(), before);
});

test("policy: a bad one names its field; a sandbox token may not set it", async () => {
	for (const [u, field] of [[{ defaultMode: "wide" }, "default_mode"],
	    [{ maxRules: -1 }, "max_rules"], [{ allow: ["no rule!"] }, "allow[0]"]]) {
		const e = await failure(c.setPolicy(u));
		assert.ok(e instanceof BadRequestError, String(e));
		assert.equal(e.field, field);
	}
	const t = tokenClient(a.token);
	try {
		assert.ok("default_mode" in await t.policy());
		const e = await failure(t.setPolicy({ maxRules: 1 }));
		assert.ok(e instanceof ForbiddenError, String(e));
		assert.match(e.message, /global policy/);
	} finally {
		t.close();
	}
});

test("ports: every published port with its URL; not for a sandbox token", async () => {
	const p = await b.ports.publish(port);
	try {
		const rows = (await c.ports()).filter((r) => r.sandbox === "js-adm-b");
		assert.deepEqual(rows.map((r) => [r.port, r.url]), [[port, p.url]]);
		assert.match(p.url, new RegExp(`^https://${port}-js-adm-b\\.`));
		const t = tokenClient(b.token);
		assert.ok(await failure(t.ports()) instanceof ForbiddenError);
		t.close();
	} finally {
		await b.ports.unpublish(port);
	}
	assert.ok(!(await c.ports()).some((r) => r.sandbox === "js-adm-b"));
});

test("metrics: Prometheus text for an admin; not for a sandbox token", async () => {
	assert.match(await c.metrics(), /^# HELP berth_control_responses_total/m);
	const t = tokenClient(b.token);
	assert.ok(await failure(t.metrics()) instanceof ForbiddenError);
	t.close();
});

test("openapi: 3.1 with the admin paths", async () => {
	const d = await c.openapi();
	assert.match(d.openapi, /^3\.1/);
	for (const p of ["/v1/templates", "/v1/templates/{template}/build",
	    "/v1/tokens/{token}/rotate", "/v1/policy", "/v1/ports",
	    "/v1/fleet/hosts", "/v1/fleet/undrain"])
		assert.ok(p in d.paths, p);
	assert.ok("put" in d.paths["/v1/policy"]);
});

/** A directory that loads as a template (berthd checks its kernel). */
function templateDir(name) {
	const d = path.join(tmp, name);
	fs.mkdirSync(d);
	fs.writeFileSync(path.join(d, "vmlinuz"), "");
	fs.writeFileSync(path.join(d, "template.json"), JSON.stringify({
	    name, kernel: "vmlinuz", cmdline: "console=ttyS0" }));
	return d;
}

test("templates: list, add a directory, show, remove", async () => {
	const def = (await c.templates.list()).find((t) => t.name === "default");
	assert.equal(def.builtin, true);
	const d = templateDir("js-tpl");
	const t = await c.templates.add("js-tpl", d);
	assert.deepEqual([t.name, t.dir, t.builtin, t.source], ["js-tpl", d,
	    false, { from: "dir" }]);
	const s = await c.templates.show("js-tpl");
	assert.deepEqual([s.dir, s.sandboxes], [d, 0]);
	assert.ok((await c.templates.list()).some((x) => x.name === "js-tpl"));
	assert.ok(await failure(c.templates.add("js-tpl", d)) instanceof ConflictError);
	await c.templates.remove("js-tpl");
	const e = await failure(c.templates.show("js-tpl"));
	assert.ok(e instanceof NotFoundError, String(e));
	assert.equal(e.code, "not_found");
});

test("templates: typed errors (unknown, bad directory, built in, a token)", async () => {
	assert.ok(await failure(c.templates.remove("js-nosuch")) instanceof NotFoundError);
	const e = await failure(c.templates.add("js-bad", path.join(tmp, "none")));
	assert.ok(e instanceof BadRequestError, String(e));
	assert.equal(e.field, "dir");
	assert.match(e.message, /template\.json/);
	const e2 = await failure(c.templates.add("Bad_Name", tmp));
	assert.equal(e2.field, "name");
	assert.ok(await failure(c.templates.remove("default")) instanceof ConflictError);
	const t = tokenClient(a.token);
	assert.ok(await failure(t.templates.list()) instanceof ForbiddenError);
	t.close();
});

test("template builds without a VMM: ConflictError, the context streamed", async () => {
	const e = await failure(c.templates.buildStatus("js-nosuch"));
	assert.ok(e instanceof ConflictError, String(e));
	assert.match(e.message, /no VMM/);
	assert.ok(await failure(c.templates.build("debian")) instanceof ConflictError);
	// 4 MiB of context: berthd answers before it has read it all
	const ctx = path.join(tmp, "ctx");
	fs.mkdirSync(path.join(ctx, "app"), { recursive: true });
	fs.writeFileSync(path.join(ctx, "Dockerfile"), "FROM scratch\nCOPY app /app\n");
	fs.writeFileSync(path.join(ctx, "app", "blob"), randomBytes(4 << 20));
	const e2 = await failure(c.templates.buildAndWait("js-ctx", {
	    dockerfile: ctx, file: "Dockerfile", buildArgs: { A: "1" } }));
	assert.ok(e2 instanceof ConflictError, String(e2));
	const e3 = await failure(c.templates.build("js-img",
	    { image: Buffer.from("not an image") }));
	assert.ok(e3 instanceof ConflictError, String(e3));
	await assert.rejects(c.templates.build("js-x", { image: Buffer.from("x"),
	    file: "Dockerfile" }), TypeError);
	// the client is still good after those
	assert.equal((await c.templates.show("default")).name, "default");
});

test("fleet calls on a berthd not in fleet mode: NotFoundError; a move: ConflictError", async () => {
	for (const call of [() => c.fleet.hosts(), () => c.fleet.sandboxes(),
	    () => c.fleet.drain(), () => c.fleet.undrain(),
	    () => c.fleet.drainStatus(),
	    () => c.fleet.drain({ move: false, wait: true })]) {
		const e = await failure(call());
		assert.ok(e instanceof NotFoundError, String(e));
		assert.match(e.message, /fleet mode is not configured/);
	}
	const e = await failure(a.move("elsewhere"));
	assert.ok(e instanceof ConflictError, String(e));
	assert.match(e.message, /fleet mode is not configured/);
	const e2 = await failure(a.move(""));
	assert.ok(e2 instanceof BadRequestError, String(e2));
	assert.equal(e2.field, "to");
});

// ---- without berthd ----

test("tarDirectory: what tar reads back; the same tree the same bytes", async () => {
	const d = path.join(tmp, "tree");
	const long = "d".repeat(90) + "/" + "f".repeat(90);	// over 100: a prefix
	fs.mkdirSync(path.join(d, "app", "d".repeat(90)), { recursive: true });
	fs.writeFileSync(path.join(d, "Dockerfile"), "FROM scratch\n");
	fs.chmodSync(path.join(d, "Dockerfile"), 0o600);
	const blob = randomBytes(300 * 1024 + 7);
	fs.writeFileSync(path.join(d, "app", "blob"), blob);
	fs.writeFileSync(path.join(d, "app", long), "deep\n");
	fs.symlinkSync("../Dockerfile", path.join(d, "app", "link"));
	const all = async () => {
		const parts = [];
		for await (const p of tarDirectory(d))
			parts.push(p);
		return Buffer.concat(parts);
	};
	const t = await all();
	assert.equal(t.length % 10240, 0);
	assert.ok(t.equals(await all()));
	fs.writeFileSync(path.join(tmp, "tree.tar"), t);
	const list = execFileSync("tar", ["-tvf", path.join(tmp, "tree.tar")])
	    .toString().trim().split("\n");
	assert.deepEqual(list.map((l) => l.replace(/.* \.\//, "./")), ["./",
	    "./Dockerfile", "./app/", "./app/blob", `./app/${"d".repeat(90)}/`,
	    `./app/${long}`, "./app/link -> ../Dockerfile"]);
	assert.match(list[1], /^-rw------- /);
	const out = path.join(tmp, "out");
	fs.mkdirSync(out);
	execFileSync("tar", ["-xf", path.join(tmp, "tree.tar"), "-C", out]);
	assert.ok(fs.readFileSync(path.join(out, "app", "blob")).equals(blob));
	assert.equal(fs.readFileSync(path.join(out, "app", long), "utf8"), "deep\n");
	// a path ustar cannot hold: said, not cut
	fs.writeFileSync(path.join(d, "app", "x".repeat(120)), "");
	await assert.rejects(all(), /too long for ustar/);
});

test("TemplateBuild: lines followed to the end; a failure throws", async () => {
	const stub = (answers, asked) => ({ buildStatus: async (name, after) => {
		asked.push([name, after]);
		return answers.shift();
	} });
	const asked = [];
	const ok = new TemplateBuild(stub([{ state: "running", lines: ["b"], next: 2 },
	    { state: "ok", lines: ["c"], next: 3, dir: "/t/v1" }], asked), "t",
	    { state: "running", lines: ["a"], next: 1 }, 0);
	const seen = [];
	assert.equal((await ok.wait({ onLine: (l) => seen.push(l) })).dir, "/t/v1");
	assert.deepEqual(seen, ["a", "b", "c"]);
	assert.deepEqual(asked, [["t", 1], ["t", 2]]);
	assert.equal(ok.state, "ok");
	const bad = new TemplateBuild(stub([{ state: "failed", lines: ["boom"],
	    next: 1, reason: "step 2 failed", log: "/l/build.log" }], []), "t",
	    { state: "running", lines: [], next: 0 }, 0);
	const lines = [];
	for await (const l of bad)
		lines.push(l);
	assert.deepEqual(lines, ["boom"]);
	const e = await failure(bad.wait());
	assert.ok(e instanceof TemplateBuildError, String(e));
	assert.deepEqual([e.state, e.reason, e.log], ["failed", "step 2 failed",
	    "/l/build.log"]);
});
