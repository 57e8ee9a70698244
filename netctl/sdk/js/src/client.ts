// SPDX-License-Identifier: GPL-2.0-or-later
//
// client.ts — the transport to berthd's control API: HTTP/1.1 over the
// unix socket <state>/control.sock (admin, no token), or over TCP+TLS to
// control_listen with a bearer token (netctl/cli_http.c does the same).
// JSON calls share kept-alive connections; streamed requests (exec
// ?stream=1, file transfers, watches) take a connection of their own,
// as berthd may close it after them.

import * as http from "node:http";
import * as https from "node:https";
import * as fs from "node:fs";
import { once } from "node:events";
import { APIError, ConnectionError, apiError } from "./errors.js";
import { Fleet, Templates, Tokens, policyBody } from "./admin.js";
import type { OpenAPIDocument, Policy, PolicyUpdate } from "./admin.js";
import type { PortInfo } from "./sandbox.js";

/** Where and how to reach berthd. */
export interface ClientOptions {
	/** The control socket (default: $BERTH_SOCKET, else
	 * $BERTH_STATE_DIR/control.sock, else /var/lib/berth/control.sock). */
	socket?: string;
	/** https://HOST:PORT of control_listen (default: $BERTH_URL). */
	url?: string;
	/** A bearer token for url (default: $BERTH_TOKEN). */
	token?: string;
	/** The CA that signed control_listen's certificate: a PEM file's
	 * path or its bytes (default: $BERTH_CACERT, else the system's). */
	cacert?: string | Uint8Array;
}

/** Body of a request: JSON, bytes, or a stream of bytes sent chunked. */
export type Body = Uint8Array | string | AsyncIterable<Uint8Array | string>;

/** @internal */
export interface RequestOptions {
	query?: Record<string, string | number | boolean | undefined>;
	json?: unknown;
	body?: Body;
	contentType?: string;
	/** A connection of its own (long or streamed requests). */
	stream?: boolean;
	/** A chunked body begun with these bytes and left open: the
	 * caller writes the rest to the answer's req and ends it. */
	open?: Uint8Array;
	/** With open: those bytes are the whole body (sent at once). */
	whole?: boolean;
	/** A streamed body waits for berthd's 100 Continue: a request it
	 * refuses is answered before any of the body is sent (berthd reads
	 * no body it refused and closes: a body written meanwhile could
	 * meet a reset before its answer is read). */
	expectContinue?: boolean;
}

/** Milliseconds a body waits for 100 Continue before it is sent anyway
 * (a server that does not answer Expect; curl waits one second). */
const CONTINUE_WAIT_MS = 2000;

/** @internal an answer whose body is not read yet */
export interface RawResponse {
	status: number;
	headers: Record<string, string | string[] | undefined>;
	body: AsyncIterable<Buffer> & { destroy(e?: Error): void };
	/** the request, still writable for a streamed body */
	req: any;
}

const SOCKET_DEFAULT = "/var/lib/berth/control.sock";

/** What GET /v1/health answers. */
export interface Health {
	/** "ok": berthd answers. */
	status: string;
	/** Its microVMs: "on", or "off: " and why. */
	vms?: string;
	/** Its egress policy: "on", "off", or "failed: " and why. */
	egress?: string;
	/** berth.conf's default template (VMs on). */
	template?: string;
	/** What the host holds and can take, as /metrics samples it
	 * (VMs on): sampled_at, states, standby, host, per_sandbox... */
	capacity?: Record<string, unknown>;
	[field: string]: unknown;
}

/** A connection to berthd's control API. */
export class Client {
	/** The unix socket spoken to, when not a URL. */
	readonly socket: string | undefined;
	/** The control_listen URL spoken to, when not the socket. */
	readonly url: string | undefined;
	private readonly token: string | undefined;
	private readonly ca: string | Uint8Array | undefined;
	private readonly mod: any;
	private readonly agent: any;
	private readonly base: Record<string, unknown>;

	constructor(opts: ClientOptions = {}) {
		const env = process.env;
		const url = opts.socket === undefined ?
		    opts.url ?? (env.BERTH_URL || undefined) : undefined;

		if (url === undefined) {
			this.socket = opts.socket ?? (env.BERTH_SOCKET ||
			    (env.BERTH_STATE_DIR ? env.BERTH_STATE_DIR +
			    "/control.sock" : SOCKET_DEFAULT));
			this.mod = http;
			this.agent = new http.Agent({ keepAlive: true });
			this.base = { socketPath: this.socket,
			    headers: { host: "localhost" } };
			return;
		}
		let u: URL;
		try {
			u = new URL(url);
		} catch {
			throw new TypeError(`url '${url}': use https://HOST:PORT`);
		}
		if (u.protocol !== "https:" && u.protocol !== "http:")
			throw new TypeError(`url '${url}': use https://HOST:PORT`);
		this.url = url;
		this.token = opts.token ?? (env.BERTH_TOKEN || undefined);
		if (this.token === undefined)
			throw new TypeError("a url needs a token: the token " +
			    "option or $BERTH_TOKEN");
		let ca = opts.cacert ?? (env.BERTH_CACERT || undefined);
		if (typeof ca === "string")
			ca = fs.readFileSync(ca);
		this.ca = ca;
		const tls = u.protocol === "https:";
		this.mod = tls ? https : http;
		this.agent = new this.mod.Agent({ keepAlive: true,
		    ...(ca !== undefined ? { ca } : {}) });
		const host = u.hostname.replace(/^\[|\]$/g, "");
		this.base = {
			protocol: u.protocol, host, servername:
			    /^[\d.]+$|:/.test(host) ? undefined : host,
			port: u.port || (tls ? 443 : 80),
			...(ca !== undefined ? { ca } : {}),
			headers: { authorization: `Bearer ${this.token}` },
		};
		// RFC 6761: *.localhost is loopback (glibc does not resolve
		// it), so https://api.berth.localhost:PORT works as netctl's
		if (/\.localhost$/i.test(host))
			this.base.lookup = loopback;
	}

	/**
	 * A client of the same URL and CA with another token (a fork's own:
	 * the token of the sandbox it was forked from may not see it). The
	 * unix socket's client (admin) is itself.
	 */
	withToken(token: string): Client {
		if (this.url === undefined)
			return this;
		return new Client({ url: this.url, token, cacert: this.ca });
	}

	/** Whether it speaks with a token (control_listen), not as admin
	 * on the unix socket. */
	get hasToken(): boolean {
		return this.token !== undefined;
	}

	/** Ends the kept-alive connections (the process may then exit). */
	close(): void {
		this.agent.destroy();
	}

	// ---- the API outside sandboxes (admin.ts) ----

	/** Guest templates: list, show, add, remove, build (admin). */
	get templates(): Templates {
		return new Templates(this);
	}

	/** Access tokens: list, show, create, rotate, revoke. */
	get tokens(): Tokens {
		return new Tokens(this);
	}

	/** Fleet mode: hosts, sandboxes, drain, undrain (admin). */
	get fleet(): Fleet {
		return new Fleet(this);
	}

	/** Whether berthd answers, and what it runs: VMs, egress, the
	 * default template, the host's capacity (GET /v1/health, any
	 * token). */
	health(): Promise<Health> {
		return this.call("GET", "/v1/health");
	}

	/** The global egress policy no sandbox can widen (any token). */
	policy(): Promise<Policy> {
		return this.call("GET", "/v1/policy");
	}

	/** Changes the fields given of the global policy (admin); null
	 * puts one back to berth.conf's. The whole policy as it now is. */
	setPolicy(u: PolicyUpdate): Promise<Policy> {
		return this.call("PUT", "/v1/policy", { json: policyBody(u) });
	}

	/** Every published port of every sandbox, with its URL (admin). */
	async ports(): Promise<PortInfo[]> {
		const all: PortInfo[] = [];
		let after: string | undefined;
		do {
			const d = await this.call("GET", "/v1/ports",
			    { query: { limit: 1000, after } });
			all.push(...(d.ports ?? []));
			after = d.next ?? undefined;
		} while (after !== undefined);
		return all;
	}

	/** This API's OpenAPI 3.1 description. */
	openapi(): Promise<OpenAPIDocument> {
		return this.call("GET", "/v1/openapi.json");
	}

	/** berthd's Prometheus metrics as text (GET /metrics, admin):
	 * requests, sandboxes per state, capacity. */
	async metrics(): Promise<string> {
		const r = await this.request("GET", "/metrics");
		const b = await readAll(r);
		if (r.status >= 400)
			throw errorOf(r, b);
		return b.toString("utf8");
	}

	/** @internal A request; the answer's head, its body unread. */
	async request(method: string, path: string,
	    o: RequestOptions = {}): Promise<RawResponse> {
		const target = path + query(o.query);
		for (let attempt = 0; ; attempt++) {
			try {
				return await this.once(method, target, o);
			} catch (e) {
				// a kept-alive connection berthd closed as we
				// sent: the request did not reach it, once more
				if (!(e instanceof ConnectionError) ||
				    (e as { reused?: boolean }).reused !== true ||
				    attempt > 0)
					throw e;
			}
		}
	}

	private once(method: string, target: string,
	    o: RequestOptions): Promise<RawResponse> {
		const headers: Record<string, string> = {
			...(this.base.headers as Record<string, string>),
			"user-agent": "berth-sdk-js",
		};
		let data: Uint8Array | string | undefined;
		let src: AsyncIterable<Uint8Array | string> | undefined;

		if (o.json !== undefined) {
			data = JSON.stringify(o.json);
			headers["content-type"] = "application/json";
		} else if (typeof o.body === "string" ||
		    o.body instanceof Uint8Array) {
			data = o.body;
		} else if (o.body !== undefined) {
			src = o.body;
			headers["transfer-encoding"] = "chunked";
			if (o.expectContinue)
				headers.expect = "100-continue";
		} else if (o.open !== undefined) {
			headers["transfer-encoding"] = "chunked";
		}
		if (o.contentType !== undefined)
			headers["content-type"] = o.contentType;
		if (data !== undefined)
			headers["content-length"] = String(Buffer.byteLength(data));
		else if (src === undefined && o.open === undefined &&
		    method !== "GET" &&
		    method !== "HEAD")
			headers["content-length"] = "0";
		return new Promise((resolve, reject) => {
			let req: any;
			const fail = (e: any) => {
				const err = new ConnectionError(this.where() +
				    ": " + (e?.message ?? String(e)), e?.code, e);
				(err as { reused?: boolean }).reused =
				    req?.reusedSocket === true;
				reject(err);
			};
			try {
				req = this.mod.request({ ...this.base, method,
				    path: target, headers, agent: o.stream ?
				    false : this.agent }, (res: any) => resolve({
					status: res.statusCode, headers: res.headers,
					body: res, req }));
			} catch (e) {
				fail(e);
				return;
			}
			req.on("error", fail);
			if (src !== undefined && o.expectContinue)
				pumpOnContinue(req, src);
			else if (src !== undefined)
				pump(req, src);
			else if (o.open !== undefined && o.whole)
				req.end(o.open);
			else if (o.open !== undefined)
				req.write(o.open);
			else
				req.end(data);
		});
	}

	/** @internal A JSON call: the answer's document (undefined for
	 * 204), or the APIError berthd answered. */
	async call(method: string, path: string,
	    o: RequestOptions = {}): Promise<any> {
		const r = await this.request(method, path, o);
		return jsonBody(r);
	}

	private where(): string {
		return this.url !== undefined ? `berthd at ${this.url}` :
		    `berthd's socket ${this.socket}`;
	}
}

function loopback(_host: string, opts: any, cb: any): void {
	if (opts?.all)
		cb(null, [{ address: "127.0.0.1", family: 4 }]);
	else
		cb(null, "127.0.0.1", 4);
}

function query(q: RequestOptions["query"]): string {
	if (q === undefined)
		return "";
	const p = new URLSearchParams();
	for (const [k, v] of Object.entries(q))
		if (v !== undefined)
			p.append(k, typeof v === "boolean" ? (v ? "1" : "0") :
			    String(v));
	const s = p.toString();
	return s === "" ? "" : "?" + s;
}

/** @internal Writes src into the request as it comes, waiting while the
 * connection has not taken what was written (bounded memory); ends it.
 * A failing source aborts the request. */
export async function pump(req: any,
    src: AsyncIterable<Uint8Array | string>): Promise<void> {
	try {
		for await (const chunk of src) {
			if (req.destroyed)
				return;
			if (chunk.length > 0 && !req.write(chunk))
				await once(req, "drain");
		}
		req.end();
	} catch (e) {
		req.destroy(e);
	}
}

/** The body once berthd said 100 Continue (or after CONTINUE_WAIT_MS
 * without a word); never when the answer came first: then the source is
 * let go (a file stream closed) and the request ends with the answer. */
function pumpOnContinue(req: any,
    src: AsyncIterable<Uint8Array | string>): void {
	let started = false;
	const go = () => {
		if (started)
			return;
		started = true;
		clearTimeout(t);
		pump(req, src);
	};
	const t = setTimeout(go, CONTINUE_WAIT_MS);
	req.once("continue", go);
	req.once("response", () => {
		clearTimeout(t);
		if (started)
			return;
		started = true;
		const s = src as { destroy?: () => void;
		    return?: () => Promise<unknown> };
		if (typeof s.destroy === "function")
			s.destroy();
		else if (typeof s.return === "function")
			s.return().catch(() => {});
	});
	req.once("error", () => clearTimeout(t));
	req.flushHeaders();	// the head goes now; the body waits
}

/** @internal The whole body of an answer. Read with the stream's events,
 * not its async iterator: a JSON call (an exec's round trip) then costs
 * no promise a chunk, which a client not yet warmed up pays for most. */
export function readAll(r: RawResponse): Promise<Buffer> {
	const body = r.body as any;
	return new Promise((resolve, reject) => {
		const parts: Buffer[] = [];
		let n = 0;
		const fail = (e: any) => reject(new ConnectionError(
		    "the answer broke off: " + (e?.message ?? String(e)), e?.code, e));
		body.on("data", (b: Buffer) => { parts.push(b); n += b.length; });
		body.once("error", fail);
		// "aborted" (older nodes) or "close" before "end": cut short
		body.once("aborted", () => fail(new Error("aborted")));
		body.once("close", () => {
			if (!body.complete)
				fail(new Error("the connection closed"));
		});
		body.once("end", () => resolve(parts.length === 1 ? parts[0] :
		    Buffer.concat(parts, n)));
	});
}

/** @internal The answer's JSON, or its error thrown. */
export async function jsonBody(r: RawResponse): Promise<any> {
	const b = await readAll(r);
	if (r.status >= 400)
		throw errorOf(r, b);
	if (r.status === 204 || b.length === 0)
		return undefined;
	try {
		return JSON.parse(b.toString("utf8"));
	} catch {
		throw new APIError(r.status, "bad_answer",
		    "berthd's answer is not JSON");
	}
}

/** @internal The APIError of an error answer's body. */
export function errorOf(r: RawResponse, b: Buffer): APIError {
	let doc: unknown;
	try {
		doc = JSON.parse(b.toString("utf8"));
	} catch {
		doc = undefined;
	}
	const ra = Number(r.headers["retry-after"]);
	return apiError(r.status, doc, Number.isFinite(ra) && ra > 0 ?
	    ra : undefined);
}

/** @internal Throws the answer's error unless it is a success. */
export async function check(r: RawResponse): Promise<void> {
	if (r.status >= 400)
		throw errorOf(r, await readAll(r));
}
