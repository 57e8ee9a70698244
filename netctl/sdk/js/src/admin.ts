// SPDX-License-Identifier: GPL-2.0-or-later
//
// admin.ts — the control API outside sandboxes: guest templates
// (client.templates), access tokens (client.tokens) and fleet mode's
// views (client.fleet). Each method is one call of the API
// (proxy/api/table.c); all need an admin (the unix socket or an admin
// token) but a token's rotation, which a sandbox's token may do to
// itself. A template build from a Dockerfile POSTs the build context as
// a tar (a directory is made one here as it is sent: tarDirectory, a
// small ustar writer), from an image the archive as it is, as `netctl
// template build` does; the build runs on in berthd and TemplateBuild
// follows its progress lines (GET .../build?after=N) to its end.

import * as fs from "node:fs";
import * as path from "node:path";
import type { Body, Client } from "./client.js";

// ---- answers ----

/** A guest template (GET /v1/templates/NAME). */
export interface TemplateInfo {
	name: string;
	/** Its directory on berthd's host (null: the default has none). */
	dir: string | null;
	/** "default", berth.conf's template. */
	builtin: boolean;
	/** Unix seconds it was added (null for the built-in one). */
	created: number | null;
	/** How many sandboxes use it. */
	sandboxes: number;
	/** v<time> of a version berthd built, else null. */
	version: string | null;
	/** Bytes its files take on disk. */
	size: number | null;
	/** What it was made of: {from: "dockerfile" | "image" | "debian" |
	 * "minimal" | "dir", sha256?, bytes?, file?}. */
	source: { from: string; [field: string]: unknown } | null;
}

/** A template build's state (GET /v1/templates/NAME/build?after=N). */
export interface BuildStatus {
	name: string;
	/** running, ok or failed */
	state: string;
	/** Why it failed (the builder's last words). */
	reason?: string;
	/** The new version's directory, once ok. */
	dir?: string;
	/** Its progress lines from the "after" asked for. */
	lines: string[];
	/** Where the next call goes on from. */
	next: number;
	/** Seconds since it started. */
	seconds: number;
	/** Its whole log's path on berthd's host. */
	log?: string;
}

/** An access token (never its secret but from create and rotate). */
export interface TokenInfo {
	/** tok-... */
	id: string;
	admin: boolean;
	/** The sandbox it belongs to, or null for an admin token. */
	sandbox: string | null;
	name: string;
	created: number;
	/** The secret: in create's and rotate's answers only. */
	token?: string;
}

/** The global egress policy (GET /v1/policy). */
export interface Policy {
	/** open, allowlist or closed */
	default_mode: string;
	max_mode: string;
	deny: string[];
	allow: string[];
	/** Private address ranges sandboxes may reach. */
	permit: string[];
	max_rules: number;
	conn_limit: number;
	new_conn_rate: number;
	[field: string]: unknown;
}

/** What setPolicy changes; the rest stays. null: back to berth.conf's. */
export interface PolicyUpdate {
	defaultMode?: string | null;
	maxMode?: string | null;
	deny?: string[] | null;
	allow?: string[] | null;
	permit?: string[] | null;
	maxRules?: number | null;
	connLimit?: number | null;
	newConnRate?: number | null;
}

/** A host of the fleet (GET /v1/fleet/hosts). */
export interface FleetHost {
	id: string;
	/** It holds a lease in etcd. */
	up: boolean;
	/** This host. */
	self: boolean;
	drained?: boolean;
	sandboxes: number;
	capacity?: number;
	zone?: string;
	room?: Record<string, number>;
	edge?: string;
	fleet?: string;
	[field: string]: unknown;
}

export interface FleetHosts {
	/** This host's id. */
	self: string;
	/** ok or unreachable */
	etcd: string;
	lease: string | null;
	drained: boolean;
	hosts: FleetHost[];
}

/** A sandbox of the fleet and where it is placed. */
export interface FleetSandbox {
	id: string;
	host: string;
	state: string | null;
	host_up: boolean;
	ports: unknown;
}

export interface FleetSandboxes {
	self: string;
	sandboxes: FleetSandbox[];
}

/** A host's drain (GET /v1/fleet/drain, and drain's answer). */
export interface DrainStatus {
	host: string;
	drained: boolean;
	/** The last drain's moves, or null when none ran (or move: false). */
	move: {
		/** moving, done or stopped (undrained) */
		state: string;
		total: number;
		moved: { id: string; to: string; ms: number;
		    [field: string]: unknown }[];
		/** They stay on this host. */
		failed: { id: string; error: string }[];
		left: number;
		ms: number;
		current?: { id: string; to: string };
		[field: string]: unknown;
	} | null;
}

/** An OpenAPI 3.1 document (GET /v1/openapi.json). */
export interface OpenAPIDocument {
	openapi: string;
	info: Record<string, unknown>;
	paths: Record<string, Record<string, unknown>>;
	[field: string]: unknown;
}

/** A build's source: a path (a directory is a build context, sent as a
 * tar made here; a file is sent as it is), bytes, or a stream of bytes
 * (a Readable, any async iterable). */
export type BuildSource = string | Uint8Array | AsyncIterable<Uint8Array>;

/** What template.build builds from (none: berth's own builder of that
 * name, debian or minimal). */
export interface BuildOptions {
	/** The build context: a directory, or a tar of it. */
	dockerfile?: BuildSource;
	/** A docker save archive or an OCI layout tarball. */
	image?: BuildSource;
	/** The Dockerfile's path in the context (default Dockerfile). */
	file?: string;
	/** --build-arg: {K: "V"}. */
	buildArgs?: Record<string, string>;
	/** Milliseconds between two looks at its progress (default 500). */
	pollMs?: number;
}

/** A template build that ended other than ok. */
export class TemplateBuildError extends Error {
	readonly template: string;
	readonly state: string;
	readonly reason: string | undefined;
	/** The whole log's path on berthd's host. */
	readonly log: string | undefined;
	readonly status: BuildStatus;

	constructor(name: string, status: BuildStatus) {
		super(`template ${name}: build ${status.state}: ` +
		    `${status.reason ?? "no reason given"}` +
		    (status.log ? ` (its whole log: ${status.log})` : ""));
		this.name = "TemplateBuildError";
		this.template = name;
		this.state = status.state;
		this.reason = status.reason;
		this.log = status.log;
		this.status = status;
	}
}

function sleep(ms: number): Promise<void> {
	return new Promise((ok) => { setTimeout(ok, ms); });
}

const seg = encodeURIComponent;

// ---- a directory as a tar ----

const BLOCK = 512;
const RECORD = 20 * BLOCK;
const READ = 256 * 1024;

/** A ustar field: value (octal when a number) NUL-padded into n bytes. */
function put(h: Buffer, off: number, n: number, v: string | number): void {
	const s = typeof v === "number" ? v.toString(8).padStart(n - 1, "0") : v;
	if (Buffer.byteLength(s) > (typeof v === "number" ? n - 1 : n))
		throw new RangeError(`tar: '${s}' does not fit ${n} bytes`);
	h.write(s, off, n, "utf8");
}

/** name split into ustar's prefix and name (at a '/'), or an error. */
function ustarName(name: string): [string, string] {
	if (Buffer.byteLength(name) <= 100)
		return ["", name];
	for (let i = name.indexOf("/"); i > 0; i = name.indexOf("/", i + 1))
		if (Buffer.byteLength(name.slice(0, i)) <= 155 &&
		    Buffer.byteLength(name.slice(i + 1)) <= 100)
			return [name.slice(0, i), name.slice(i + 1)];
	throw new RangeError(`tar: ${name}: a path too long for ustar ` +
	    "(a tar of the context made otherwise can be given)");
}

/** One ustar header: type "0" file, "5" directory, "2" symlink. */
function tarHeader(name: string, type: string, mode: number,
    size: number, mtime: number, uid = 0, gid = 0, link = ""): Buffer {
	const h = Buffer.alloc(BLOCK);
	const [prefix, base] = ustarName(name);
	put(h, 0, 100, base);
	put(h, 100, 8, mode & 0o7777);
	put(h, 108, 8, uid > 0o7777777 ? 0 : uid);
	put(h, 116, 8, gid > 0o7777777 ? 0 : gid);
	put(h, 124, 12, size);
	put(h, 136, 12, Math.floor(mtime));
	h.write("        ", 148, 8, "utf8");	// the checksum's, counted as spaces
	put(h, 156, 1, type);
	put(h, 157, 100, link);
	put(h, 257, 6, "ustar");		// "ustar\0" then version "00"
	put(h, 263, 2, "00");
	put(h, 345, 155, prefix);
	let sum = 0;
	for (let i = 0; i < BLOCK; i++)
		sum += h[i];
	put(h, 148, 7, sum);		// six digits, then NUL and a space
	h[154] = 0;
	return h;
}

/**
 * The tree under dir as a ustar tar, as `tar -C dir -cf - .` makes it
 * (names ./..., a directory before what it holds, sorted: the same tree
 * gives the same bytes, which berthd's build cache goes by), yielded as
 * it is made: a header, then the file's blocks as they are read (memory
 * stays bounded). Files, directories and symlinks; other kinds are left
 * out. A path over ustar's 255 bytes, a file of 8 GiB or more, or one
 * that shrinks while it is read throws (a request it is the body of is
 * then broken off: berthd builds nothing from part of a context).
 */
export async function* tarDirectory(dir: string): AsyncGenerator<Buffer> {
	const st = await fs.promises.stat(dir);
	if (!st.isDirectory())
		throw new Error(`${dir}: not a directory (a build context)`);
	let out = 0;
	async function* walk(full: string, arc: string): AsyncGenerator<Buffer> {
		const s = await fs.promises.lstat(full);
		let h: Buffer;
		if (s.isDirectory())
			h = tarHeader(arc + "/", "5", s.mode, 0, s.mtimeMs / 1000,
			    s.uid, s.gid);
		else if (s.isSymbolicLink())
			h = tarHeader(arc, "2", s.mode, 0, s.mtimeMs / 1000, s.uid,
			    s.gid, await fs.promises.readlink(full));
		else if (s.isFile())
			h = tarHeader(arc, "0", s.mode, s.size, s.mtimeMs / 1000,
			    s.uid, s.gid);
		else
			return;
		out += BLOCK;
		yield h;
		if (s.isFile()) {
			yield* fileBlocks(full, s.size);
			const pad = (BLOCK - s.size % BLOCK) % BLOCK;
			out += s.size + pad;
			if (pad > 0)
				yield Buffer.alloc(pad);
		} else if (s.isDirectory()) {
			const names: string[] = (await fs.promises.readdir(full))
			    .sort((a: string, b: string) => a < b ? -1 : a > b ? 1 : 0);
			for (const n of names)
				yield* walk(full + "/" + n, arc + "/" + n);
		}
	}
	yield* walk(dir, ".");
	// the end: two zero blocks, the whole a multiple of a record
	const end = 2 * BLOCK + (RECORD - (out + 2 * BLOCK) % RECORD) % RECORD;
	yield Buffer.alloc(end);
}

/** size bytes of a file, a block at a time. */
async function* fileBlocks(path: string, size: number): AsyncGenerator<Buffer> {
	const fh = await fs.promises.open(path, "r");
	try {
		let left = size;
		while (left > 0) {
			const b = Buffer.alloc(Math.min(READ, left));
			const { bytesRead } = await fh.read(b, 0, b.length, null);
			if (bytesRead === 0)
				throw new Error(`${path}: shrank while it was read ` +
				    `(${left} bytes missing)`);
			left -= bytesRead;
			yield bytesRead === b.length ? b : b.subarray(0, bytesRead);
		}
	} finally {
		await fh.close();
	}
}

/** What the request sends of a source. */
async function sourceBody(src: BuildSource, context: boolean): Promise<Body> {
	if (typeof src !== "string")
		return src;
	const st = await fs.promises.stat(src);
	if (st.isDirectory()) {
		if (!context)
			throw new Error(`${src}: a directory, not an image archive ` +
			    "(docker save, or an OCI layout tarball)");
		return tarDirectory(src);
	}
	return fs.createReadStream(src, { highWaterMark: READ });
}

// ---- a build followed ----

/**
 * A template build berthd runs: `for await (const line of build)` gives
 * its progress lines as they come (polled until it ends); then `state`
 * ("ok" or "failed") and `status` (dir, reason, log). `wait()` follows
 * it to its end and throws a TemplateBuildError unless it built.
 */
export class TemplateBuild implements AsyncIterable<string> {
	readonly name: string;
	/** Its last state as berthd gave it. */
	status: BuildStatus;
	private readonly templates: Templates;
	private readonly pollMs: number;
	private pending: string[];

	/** @internal use client.templates.build */
	constructor(templates: Templates, name: string, status: BuildStatus,
	    pollMs = 500) {
		this.templates = templates;
		this.name = name;
		this.status = status;
		this.pollMs = pollMs;
		this.pending = [...(status.lines ?? [])];
	}

	/** running, ok or failed */
	get state(): string {
		return this.status.state;
	}

	get done(): boolean {
		return this.status.state !== "running";
	}

	/** Its progress lines from where they were left, until it ends. */
	async *[Symbol.asyncIterator](): AsyncIterator<string> {
		for (;;) {
			while (this.pending.length > 0)
				yield this.pending.shift() as string;
			if (this.done)
				return;
			await sleep(this.pollMs);
			this.status = await this.templates.buildStatus(this.name,
			    this.status.next ?? 0);
			this.pending = [...(this.status.lines ?? [])];
		}
	}

	/** Follows it to its end (each line to onLine): its last status,
	 * whose dir is the new version; a failed build throws. */
	async wait(o: { onLine?: (line: string) => void } = {}):
	    Promise<BuildStatus> {
		for await (const line of this)
			o.onLine?.(line);
		if (this.status.state !== "ok")
			throw new TemplateBuildError(this.name, this.status);
		return this.status;
	}
}

// ---- templates ----

/** client.templates: the guest templates sandboxes are made of. */
export class Templates {
	private readonly c: Client;

	/** @internal use client.templates */
	constructor(client: Client) { this.c = client; }

	/** Every template, "default" (the built-in one) among them. */
	async list(): Promise<TemplateInfo[]> {
		const all: TemplateInfo[] = [];
		let after: string | undefined;
		do {
			const d = await this.c.call("GET", "/v1/templates",
			    { query: { limit: 1000, after } });
			all.push(...(d.templates ?? []));
			after = d.next ?? undefined;
		} while (after !== undefined);
		return all;
	}

	/** One template (NotFoundError if none has that name). */
	show(name: string): Promise<TemplateInfo> {
		return this.c.call("GET", `/v1/templates/${seg(name)}`);
	}

	/** Registers a template directory on berthd's host under name; it
	 * must load (BadRequestError on field dir if not). A relative dir
	 * is made absolute here, as netctl does. */
	add(name: string, dir: string): Promise<TemplateInfo> {
		return this.c.call("POST", "/v1/templates",
		    { json: { name, dir: path.resolve(dir) } });
	}

	/** Forgets a template name (ConflictError while a sandbox uses it);
	 * berthd removes the files of a template it built. */
	async remove(name: string): Promise<void> {
		await this.c.call("DELETE", `/v1/templates/${seg(name)}`);
	}

	/** The build of name since berthd started, its lines from after on
	 * (NotFoundError when there was none). */
	buildStatus(name: string, after = 0): Promise<BuildStatus> {
		return this.c.call("GET", `/v1/templates/${seg(name)}/build`,
		    { query: { after } });
	}

	/**
	 * Starts a build of template name: without a source one of berth's
	 * own (debian, minimal); with dockerfile, from that build context
	 * (a directory is sent as a tar made while it is sent); with image,
	 * from that archive. The source is streamed; berthd answers once it
	 * has it all. The build, running: iterate it or wait() for it.
	 */
	async build(name: string, o: BuildOptions = {}): Promise<TemplateBuild> {
		if (o.dockerfile !== undefined && o.image !== undefined)
			throw new TypeError("dockerfile or image, not both");
		if (o.dockerfile === undefined && (o.file !== undefined ||
		    o.buildArgs !== undefined))
			throw new TypeError("file and buildArgs go with dockerfile");
		const path = `/v1/templates/${seg(name)}/build`;
		const src = o.dockerfile ?? o.image;
		if (src === undefined)
			return new TemplateBuild(this, name,
			    await this.c.call("POST", path), o.pollMs);
		const q = new URLSearchParams();
		q.append("from", o.dockerfile !== undefined ? "dockerfile" : "image");
		if (o.file !== undefined)
			q.append("file", o.file);
		for (const [k, v] of Object.entries(o.buildArgs ?? {}))
			q.append("build_arg", `${k}=${v}`);
		const body = await sourceBody(src, o.dockerfile !== undefined);
		const doc = await this.c.call("POST", `${path}?${q.toString()}`, {
			body, stream: true, expectContinue: true, contentType: o.dockerfile !== undefined ?
			    "application/x-tar" : "application/octet-stream",
		});
		return new TemplateBuild(this, name, doc, o.pollMs);
	}

	/** build(), followed to its end: its last status, or a
	 * TemplateBuildError. */
	async buildAndWait(name: string, o: BuildOptions & {
	    onLine?: (line: string) => void } = {}): Promise<BuildStatus> {
		return (await this.build(name, o)).wait({ onLine: o.onLine });
	}
}

// ---- tokens ----

/** client.tokens: access tokens of the TCP control listener. */
export class Tokens {
	private readonly c: Client;

	/** @internal use client.tokens */
	constructor(client: Client) { this.c = client; }

	/** Every token (of that sandbox only, when given); no secrets. */
	async list(o: { sandbox?: string } = {}): Promise<TokenInfo[]> {
		const all: TokenInfo[] = [];
		let after: string | undefined;
		do {
			const d = await this.c.call("GET", "/v1/tokens",
			    { query: { limit: 1000, after, sandbox: o.sandbox } });
			all.push(...(d.tokens ?? []));
			after = d.next ?? undefined;
		} while (after !== undefined);
		return all;
	}

	show(id: string): Promise<TokenInfo> {
		return this.c.call("GET", `/v1/tokens/${seg(id)}`);
	}

	/** A new token, admin or of one sandbox: its secret is in token,
	 * shown only now. */
	create(o: { admin?: boolean; sandbox?: string; name?: string }):
	    Promise<TokenInfo & { token: string }> {
		const body: Record<string, unknown> = {};
		if (o.admin)
			body.admin = true;
		if (o.sandbox !== undefined)
			body.sandbox = o.sandbox;
		if (o.name !== undefined)
			body.name = o.name;
		return this.c.call("POST", "/v1/tokens", { json: body });
	}

	/** A new secret (in token); the old one stops working at once. A
	 * sandbox's token may rotate itself (sb.tokenId). */
	rotate(id: string): Promise<TokenInfo & { token: string }> {
		return this.c.call("POST", `/v1/tokens/${seg(id)}/rotate`);
	}

	/** The token works no more. */
	async revoke(id: string): Promise<void> {
		await this.c.call("DELETE", `/v1/tokens/${seg(id)}`);
	}
}

// ---- fleet mode ----

/** client.fleet: fleet mode's views and this host's drain (NotFoundError
 * on a berthd not in fleet mode; a sandbox moves with sb.move). */
export class Fleet {
	private readonly c: Client;

	/** @internal use client.fleet */
	constructor(client: Client) { this.c = client; }

	/** The hosts in etcd, and lost ones (placement, no lease). */
	hosts(): Promise<FleetHosts> {
		return this.c.call("GET", "/v1/fleet/hosts");
	}

	/** Every sandbox of the fleet and the host it is placed on. */
	sandboxes(): Promise<FleetSandboxes> {
		return this.c.call("GET", "/v1/fleet/sandboxes");
	}

	/**
	 * This host is placed on no more (kept across restarts) and, unless
	 * move is false, its VM-backed sandboxes move to other hosts one at
	 * a time (one that cannot move stays). host, if given, must be this
	 * host's id (ConflictError otherwise: drain a host through its own
	 * API). wait: the moves followed to their end (polled every pollMs,
	 * default 500), the last status answered; those that failed are in
	 * its move.failed.
	 */
	async drain(o: { host?: string; move?: boolean; wait?: boolean;
	    pollMs?: number } = {}): Promise<DrainStatus> {
		const body: Record<string, unknown> = {};
		if (o.host !== undefined)
			body.host = o.host;
		if (o.move === false)
			body.move = false;
		let d: DrainStatus = await this.c.call("POST", "/v1/fleet/drain",
		    { json: body });
		while (o.wait && d.move?.state === "moving") {
			await sleep(o.pollMs ?? 500);
			d = await this.drainStatus();
		}
		return d;
	}

	/** Whether this host is drained, and its last drain's moves. */
	drainStatus(): Promise<DrainStatus> {
		return this.c.call("GET", "/v1/fleet/drain");
	}

	/** This host is placed on again; a drain's moves stop after the one
	 * under way. */
	undrain(o: { host?: string } = {}): Promise<DrainStatus> {
		return this.c.call("POST", "/v1/fleet/undrain",
		    { json: o.host === undefined ? {} : { host: o.host } });
	}
}

/** @internal setPolicy's body: the API's names. */
export function policyBody(u: PolicyUpdate): Record<string, unknown> {
	const names: [keyof PolicyUpdate, string][] = [
		["defaultMode", "default_mode"], ["maxMode", "max_mode"],
		["deny", "deny"], ["allow", "allow"], ["permit", "permit"],
		["maxRules", "max_rules"], ["connLimit", "conn_limit"],
		["newConnRate", "new_conn_rate"],
	];
	const body: Record<string, unknown> = {};
	for (const [k, api] of names)
		if (u[k] !== undefined)
			body[api] = u[k];
	return body;
}
