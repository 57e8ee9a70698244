// SPDX-License-Identifier: GPL-2.0-or-later
//
// api.test.mjs — the SDK against an API-only berthd (no VMM): external
// sandboxes (--address 127.0.0.1) with testapp as their upstream. Its
// health; a port published and fetched through berthd's proxy, egress
// rules, a sandbox token kept to its own sandbox, errors typed as
// berthd's answers say (an external sandbox has events, no console).
// Environment (tests/integ/sdk-js.sh): BERTH_SOCKET, BERTH_TEST_CTL_URL,
// BERTH_TEST_CA, BERTH_TEST_UPSTREAM_PORT.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import {
	Client, Sandbox, APIError, NotFoundError, ForbiddenError,
	BadRequestError, ConflictError, ConnectionError, withSandbox,
} from "../dist/index.js";
import { env, admin, tokenClient, get, waitFor } from "./common.mjs";

const c = admin();
const port = Number(env.BERTH_TEST_UPSTREAM_PORT);
let a, b;
after(() => c.close());

test("create external sandboxes; get and list them", async () => {
	a = await Sandbox.create(c, { id: "sdk-a", address: "127.0.0.1" });
	b = await Sandbox.create(c, { id: "sdk-b", address: "127.0.0.1" });
	assert.equal(a.id, "sdk-a");
	assert.equal(a.data.state, "running");
	assert.equal(a.data.external, true);
	assert.match(a.token, /\S{16,}/, "its token comes with create");
	const g = await Sandbox.get(c, "sdk-b");
	assert.equal(g.data.address, "127.0.0.1");
	const ids = (await Sandbox.list(c)).map((s) => s.id);
	assert.ok(ids.includes("sdk-a") && ids.includes("sdk-b"), ids.join());
	assert.equal((await a.info()).id, "sdk-a");
});

test("health: berthd answers, without VMs here", async () => {
	const h = await c.health();
	assert.equal(h.status, "ok");
	// this berthd has no VMM: it says why
	assert.match(h.vms, /^off: \S/);
	assert.match(h.egress, /^(on|off|failed: .+)$/);
	assert.equal(h.capacity, undefined);
	// any token may ask
	const t = tokenClient(a.token);
	try {
		assert.equal((await t.health()).status, "ok");
	} finally {
		t.close();
	}
});

test("an external sandbox: its events; no console (NotFoundError)", async () => {
	const ev = await a.events();
	assert.deepEqual(ev.map((x) => `${x.operation} ${x.result}`),
	    ["create ok"]);
	assert.equal(typeof ev[0].seq, "number");
	const e = await a.console().catch((x) => x);
	assert.ok(e instanceof NotFoundError, String(e));
	assert.deepEqual([e.status, e.code], [404, "not_found"]);
	assert.match(e.message, /not a VM/);
	const g = a.followConsole();
	await assert.rejects(g.next(), NotFoundError);
	// an admin's call: a sandbox's own token is refused
	const t = tokenClient(a.token);
	try {
		const f = await (await Sandbox.get(t, "sdk-a")).console()
		    .catch((x) => x);
		assert.ok(f instanceof ForbiddenError, String(f));
		assert.equal(f.status, 403);
	} finally {
		t.close();
	}
});

test("a generated id when none is given; withSandbox removes it", async () => {
	let id;
	const r = await withSandbox(c, { address: "127.0.0.1" }, async (sb) => {
		id = sb.id;
		assert.match(sb.id, /^sb-[0-9a-f]{8}$/);
		return 42;
	});
	assert.equal(r, 42);
	await assert.rejects(Sandbox.get(c, id), NotFoundError);
});

test("publish a port and fetch its URL through berthd", async () => {
	const p = await a.ports.publish(port);
	assert.equal(p.port, port);
	assert.equal(p.visibility, "public");
	assert.match(p.url, new RegExp(`^https://${port}-sdk-a\\.`));
	// workers get the route table asynchronously: until it is routed
	const r = await waitFor("routed", async () => {
		const x = await get(new URL("healthz", p.url).href);
		return x.status !== 404 && x;
	});
	assert.equal(r.status, 200);
	assert.equal(r.body, "ok");
	const list = await a.ports.list();
	assert.deepEqual(list.map((x) => x.port), [port]);
	assert.equal((await a.ports.get(port)).url, p.url);
	const priv = await a.ports.publish(port, { visibility: "private" });
	assert.equal(priv.visibility, "private");
	await a.ports.unpublish(port);
	assert.deepEqual(await a.ports.list(), []);
	await assert.rejects(a.ports.get(port), NotFoundError);
});

test("egress rules: allow, deny, show, remove, log", async () => {
	const r = await a.egress.allow("example.com:443/tcp");
	assert.deepEqual([r.action, r.rule], ["allow", "example.com:443/tcp"]);
	const d = await a.egress.deny("203.0.113.0/24", { ttl: "10m" });
	assert.equal(d.action, "deny");
	assert.ok(d.expires > Date.now() / 1000, "a ttl sets expires");
	let s = await a.egress.show();
	assert.equal(s.sandbox, "sdk-a");
	assert.deepEqual(s.rules.map((x) => `${x.action} ${x.rule}`).sort(),
	    ["allow example.com:443/tcp", `deny ${d.rule}`]);
	await a.egress.remove("allow", "example.com:443/tcp");
	s = await a.egress.show();
	assert.deepEqual(s.rules.map((x) => x.action), ["deny"]);
	const log = await a.egress.log();
	assert.equal(log.sandbox, "sdk-a");
	assert.ok(Array.isArray(log.entries));
	s = await a.egress.set({ rules: [{ action: "allow",
	    rule: "example.org:80/tcp" }] });
	assert.deepEqual(s.rules.map((x) => x.rule), ["example.org:80/tcp"]);
	await a.egress.reset();
	assert.deepEqual((await a.egress.show()).rules, []);
});

test("a bad egress rule: BadRequestError naming the field", async () => {
	const e = await a.egress.allow("no such rule!").catch((x) => x);
	assert.ok(e instanceof BadRequestError, String(e));
	assert.ok(e instanceof APIError);
	assert.equal(e.status, 400);
	assert.equal(e.code, "invalid_argument");
	assert.equal(e.field, "rule");
	assert.match(e.message, /\S/);
});

test("an unknown sandbox: NotFoundError with its code", async () => {
	const e = await Sandbox.get(c, "sdk-nosuch").catch((x) => x);
	assert.ok(e instanceof NotFoundError, String(e));
	assert.equal(e.status, 404);
	assert.equal(e.code, "not_found");
	assert.match(e.message, /sdk-nosuch/);
});

test("a duplicate id, an exec without a guest: ConflictError", async () => {
	const e = await Sandbox.create(c, { id: "sdk-a", address: "127.0.0.1" })
	    .catch((x) => x);
	assert.ok(e instanceof ConflictError, String(e));
	const x = await a.exec(["true"]).catch((y) => y);
	assert.ok(x instanceof ConflictError, String(x));
	assert.match(x.message, /not a VM-backed sandbox/);
});

test("a bad id: BadRequestError on field id", async () => {
	const e = await Sandbox.create(c, { id: "Bad_Id", address: "127.0.0.1" })
	    .catch((x) => x);
	assert.ok(e instanceof BadRequestError, String(e));
	assert.equal(e.field, "id");
});

test("a sandbox token over control_listen: its own sandbox only", async () => {
	const ta = tokenClient(a.token);
	try {
		const own = await Sandbox.get(ta, "sdk-a");
		assert.equal(own.id, "sdk-a");
		await own.egress.allow("example.net:443/tcp");
		const e = await Sandbox.get(ta, "sdk-b").catch((x) => x);
		assert.ok(e instanceof ForbiddenError, String(e));
		assert.equal(e.status, 403);
		assert.equal(e.code, "forbidden");
		const e2 = await Sandbox.list(ta).catch((x) => x);
		assert.ok(e2 instanceof ForbiddenError, String(e2));
		// the token's own sandbox cannot be deleted with it
		const e4 = await own.remove().catch((x) => x);
		assert.ok(e4 instanceof ForbiddenError, String(e4));
	} finally {
		ta.close();
	}
});

test("a bad token: ForbiddenError (401)", async () => {
	const t = tokenClient("not-a-token");
	try {
		const e = await Sandbox.get(t, "sdk-a").catch((x) => x);
		assert.ok(e instanceof ForbiddenError, String(e));
		assert.equal(e.status, 401);
	} finally {
		t.close();
	}
});

test("no berthd there: ConnectionError", async () => {
	const n = new Client({ socket: "/nonexistent/control.sock" });
	const e = await Sandbox.list(n).catch((x) => x);
	assert.ok(e instanceof ConnectionError, String(e));
	assert.equal(e.errno, "ENOENT");
	assert.ok(!(e instanceof APIError));
});

test("the client's defaults come from the environment", () => {
	const saved = { ...process.env };
	try {
		process.env.BERTH_SOCKET = "/x/control.sock";
		delete process.env.BERTH_URL;
		assert.equal(new Client().socket, "/x/control.sock");
		process.env.BERTH_URL = env.BERTH_TEST_CTL_URL;
		process.env.BERTH_TOKEN = "t";
		process.env.BERTH_CACERT = env.BERTH_TEST_CA;
		const u = new Client();
		assert.equal(u.url, env.BERTH_TEST_CTL_URL);
		assert.equal(u.socket, undefined);
		delete process.env.BERTH_TOKEN;
		assert.throws(() => new Client(), /token/);
	} finally {
		for (const k of Object.keys(process.env))
			if (!(k in saved))
				delete process.env[k];
		Object.assign(process.env, saved);
	}
});

test("remove: the sandbox is gone", async () => {
	await a.remove();
	await b.remove();
	await assert.rejects(a.info(), NotFoundError);
	await assert.rejects(b.remove(), NotFoundError);
});
