// SPDX-License-Identifier: GPL-2.0-or-later
//
// sandbox.ts — a sandbox and what it holds: its commands and detached
// processes (attached to on a terminal), files, published ports, egress
// rules, lifecycle, events, guest console, forks and checkpoints. Each
// method is one call of the control API (README, "## netctl" and
// proxy/api/table.c); field names are the API's, in camelCase where the
// SDK takes options.

import { randomBytes } from "node:crypto";
import type { Body, Client, RawResponse } from "./client.js";
import { check, errorOf, jsonBody, readAll } from "./client.js";
import {
	ConnectionError, ForbiddenError, NotFoundError, SandboxStateError,
} from "./errors.js";
import {
	BUFFERED_STDIN_MAX, Command, ExecOptions, ExecResult, ExecStream,
	ExecStreamOptions, decoded, duration, execBody, execResult, execStream,
} from "./exec.js";

/** Options of a detached command (sb.spawn, or exec with detach). */
export interface SpawnOptions extends Omit<ExecOptions, "stdin" | "tty"> {
	/** On a terminal: true, or its size. Process.attach is then its
	 * client (a shell, a REPL that outlives its client). */
	tty?: boolean | { rows: number; cols: number };
	/** Bytes of its output kept, 1024 to 16 MiB (default 1 MiB). */
	ring?: number;
	/** The sandbox is not idle while it runs. */
	keepAwake?: boolean;
}

/** A sandbox as berthd shows it (GET /v1/sandboxes/ID). */
export interface SandboxInfo {
	id: string;
	/** creating, running, paused, suspended, stopped or failed */
	state: string;
	address?: string | null;
	external?: boolean;
	template?: string | null;
	/** Fleet mode, a create's answer: the host it was placed on, and
	 * what refused first when another host was tried. */
	host?: string;
	placement_failed?: string;
	[field: string]: unknown;
}

/** A lifecycle event of a sandbox (GET /v1/sandboxes/ID/events). */
export interface SandboxEvent {
	/** Its sequence number, increasing. */
	seq: number;
	time_ms: number;
	/** create, pause, resume, suspend, wake, stop, start, restart... */
	operation: string;
	/** ok or failed */
	result: string;
	reason: string;
	duration_ms: number;
	[field: string]: unknown;
}

/** The guest console berthd keeps (GET /v1/sandboxes/ID/console). */
export interface ConsoleText {
	/** Bytes of the console kept now (at most vm_console_max). */
	size: number;
	/** Where text begins in them. */
	from: number;
	/** The console from `from` (at most 1 MiB; bytes other than
	 * printable ASCII, tab and newline are "?"). */
	text: string;
}

/** A move's answer (POST /v1/sandboxes/ID/move). */
export interface MoveResult {
	id: string;
	/** The host it is on now. */
	host: string;
	move_ms: number;
	/** What went over the fleet channel (files the target lacked). */
	bytes_sent: number;
}

/** What a new sandbox is (POST /v1/sandboxes). */
export interface CreateOptions {
	/** Its name, [a-z0-9][a-z0-9-]{0,39} (default: "sb-" and 8 random
	 * hex digits). */
	id?: string;
	/** The template it is made from (default berth.conf's). */
	template?: string;
	memoryMib?: number;
	vcpus?: number;
	diskMib?: number;
	/** Environment every command in it starts with. */
	env?: Record<string, string>;
	/** Idle time before its VM is paused / suspended to disk: "10m",
	 * "never", or milliseconds. */
	idlePause?: string | number;
	idleSuspend?: string | number;
	maxLifetime?: string | number;
	/** Publish the ports its image EXPOSEs. */
	publishExposed?: boolean;
	/** open, allowlist or closed (default: the policy's). */
	egressMode?: string;
	/** An external sandbox at this IP (no microVM). */
	address?: string;
	/** Fleet mode: place it on this host (default: the one with the
	 * most room). */
	host?: string;
	/** Fleet mode: place it on a host of this fleet_zone. */
	zone?: string;
	/** Do not wait for it to run (default: wait, as netctl does). */
	noWait?: boolean;
}

const WAIT_STEP_MS = 250;
/** How often followConsole asks (netctl sandbox console --follow's). */
const CONSOLE_STEP_MS = 500;
const WAIT_MAX_MS = 5 * 60 * 1000;

function sleep(ms: number): Promise<void> {
	return new Promise((ok) => { setTimeout(ok, ms); });
}

/** @internal /v1/sandboxes/ID */
function sbPath(id: string): string {
	return `/v1/sandboxes/${encodeURIComponent(id)}`;
}

/** A sandbox of a berth host. */
export class Sandbox {
	readonly client: Client;
	readonly id: string;
	/** Its own token: given once, by create and fork. */
	readonly token: string | undefined;
	readonly tokenId: string | undefined;
	/** What berthd said of it last (create, get, info, a lifecycle call). */
	data: SandboxInfo;
	readonly processes: Processes;
	readonly files: Files;
	readonly ports: Ports;
	readonly egress: Egress;

	/** @internal use Sandbox.create, get or list */
	constructor(client: Client, data: SandboxInfo) {
		this.client = client;
		this.id = data.id;
		this.data = data;
		this.token = typeof data.token === "string" ? data.token : undefined;
		this.tokenId = typeof data.token_id === "string" ? data.token_id :
		    undefined;
		this.processes = new Processes(this);
		this.files = new Files(this);
		this.ports = new Ports(this);
		this.egress = new Egress(this);
	}

	/** @internal /v1/sandboxes/ID plus sub */
	path(sub = ""): string {
		return sbPath(this.id) + sub;
	}

	/** Makes a sandbox and (a microVM) waits until it runs. */
	static async create(client: Client, o: CreateOptions = {}):
	    Promise<Sandbox> {
		const body: Record<string, unknown> = {
			id: o.id ?? "sb-" + randomBytes(4).toString("hex"),
		};
		const set = (k: string, v: unknown) => {
			if (v !== undefined)
				body[k] = v;
		};
		set("template", o.template);
		set("memory_mib", o.memoryMib);
		set("vcpus", o.vcpus);
		set("disk_mib", o.diskMib);
		set("env", o.env);
		set("idle_pause", o.idlePause === undefined ? undefined :
		    duration(o.idlePause));
		set("idle_suspend", o.idleSuspend === undefined ? undefined :
		    duration(o.idleSuspend));
		set("max_lifetime", o.maxLifetime === undefined ? undefined :
		    duration(o.maxLifetime));
		set("publish_exposed", o.publishExposed);
		set("egress_mode", o.egressMode);
		set("address", o.address);
		set("host", o.host);
		set("zone", o.zone);
		const doc = await client.call("POST", "/v1/sandboxes", { json: body });
		const sb = new Sandbox(client, doc);
		if (o.address === undefined && !o.noWait) {
			if (doc.remote === true)
				await sb.waitPlaced(String(doc.host));
			else
				await sb.waitFor("running");
		}
		return sb;
	}

	/** @internal A create placed on another fleet host (doc.host): its
	 * state from the fleet's view (etcd) until it leaves "creating"; the
	 * other calls go to that host's own API. */
	private async waitPlaced(host: string,
	    timeoutMs = WAIT_MAX_MS): Promise<void> {
		const end = Date.now() + timeoutMs;
		for (;;) {
			const doc = await this.client.call("GET", "/v1/fleet/sandboxes");
			let st: string | undefined;
			for (const s of doc.sandboxes ?? [])
				if (s.id === this.id && s.host === host)
					st = s.state;
			if (st !== undefined && st !== "creating") {
				this.data.state = st;
				if (st === "running")
					return;
				throw new SandboxStateError(this.id, st,
				    `sandbox ${this.id} is ${st} on host ${host}: ` +
				    "see its events there");
			}
			if (Date.now() > end)
				throw new SandboxStateError(this.id, st ?? "creating",
				    `sandbox ${this.id} is still being created on host ${host}`);
			await sleep(WAIT_STEP_MS);
		}
	}

	/** The sandbox id (NotFoundError when there is none). */
	static async get(client: Client, id: string): Promise<Sandbox> {
		return new Sandbox(client, await client.call("GET", sbPath(id)));
	}

	/** Every sandbox (the API's pages followed). */
	static async list(client: Client): Promise<Sandbox[]> {
		const all: Sandbox[] = [];
		let after: string | undefined;
		do {
			const doc = await client.call("GET", "/v1/sandboxes",
			    { query: { limit: 1000, after } });
			for (const d of doc.sandboxes ?? [])
				all.push(new Sandbox(client, d));
			after = doc.next ?? undefined;
		} while (after !== undefined);
		return all;
	}

	/** Its state and settings now. */
	async info(): Promise<SandboxInfo> {
		const d = await this.client.call("GET", this.path());
		this.data = { ...this.data, ...d };
		return d;
	}

	/**
	 * Waits while it is "creating" (or in none of states) and returns
	 * its info once it is in one of states; a SandboxStateError when
	 * it settles elsewhere (failed...), or after timeoutMs.
	 */
	async waitFor(states: string | string[],
	    timeoutMs = WAIT_MAX_MS): Promise<SandboxInfo> {
		const want = typeof states === "string" ? [states] : states;
		const end = Date.now() + timeoutMs;
		for (;;) {
			const d = await this.info();
			if (want.includes(d.state))
				return d;
			if (d.state !== "creating" && want.length === 1 &&
			    want[0] === "running")
				throw new SandboxStateError(this.id, d.state,
				    `sandbox ${this.id} is ${d.state}: see its ` +
				    "events (netctl sandbox events)");
			if (Date.now() > end)
				throw new SandboxStateError(this.id, d.state,
				    `sandbox ${this.id} is still ${d.state}`);
			await sleep(WAIT_STEP_MS);
		}
	}

	/** Deletes it (its VM, ports, rules and token). */
	async remove(): Promise<void> {
		await this.client.call("DELETE", this.path());
	}

	/** Its lifecycle events, oldest first (the API's pages followed). */
	async events(): Promise<SandboxEvent[]> {
		const all: SandboxEvent[] = [];
		let after: string | undefined;
		do {
			const d = await this.client.call("GET", this.path("/events"),
			    { query: { limit: 1000, after } });
			all.push(...(d.events ?? []));
			after = d.next ?? undefined;
		} while (after !== undefined);
		return all;
	}

	/**
	 * Its guest's console as berthd keeps it (GET .../console, admin):
	 * `size`, the bytes kept, and `text`, the console from byte `from`
	 * of them (without it: the last 64 KiB). NotFoundError when it is
	 * not a VM of this host; BadRequestError (field "from") for a bad
	 * offset.
	 */
	console(o: { from?: number } = {}): Promise<ConsoleText> {
		return this.client.call("GET", this.path("/console"),
		    { query: { from: o.from } });
	}

	/**
	 * Its console as it comes (netctl sandbox console --follow): the
	 * last 64 KiB (or from `from`), then what was added, asked for
	 * every `intervalMs` (default 500); each non-empty piece of text is
	 * yielded. When the kept console shrinks (it rotated) it is read
	 * again from its start. Runs until the caller stops (break, return)
	 * or a call fails (the sandbox removed: NotFoundError).
	 */
	async *followConsole(o: { from?: number; intervalMs?: number } = {}):
	    AsyncGenerator<string> {
		let next = o.from;
		for (;;) {
			const d = await this.console({ from: next });
			if (d.text !== "")
				yield d.text;
			next = next !== undefined && d.size < next ? 0 : d.size;
			await sleep(o.intervalMs ?? CONSOLE_STEP_MS);
		}
	}

	/** Changes what a sandbox may change later: idle limits, env. */
	async set(o: Pick<CreateOptions, "idlePause" | "idleSuspend" |
	    "maxLifetime" | "env">): Promise<SandboxInfo> {
		const body: Record<string, unknown> = {};
		if (o.idlePause !== undefined)
			body.idle_pause = duration(o.idlePause);
		if (o.idleSuspend !== undefined)
			body.idle_suspend = duration(o.idleSuspend);
		if (o.maxLifetime !== undefined)
			body.max_lifetime = duration(o.maxLifetime);
		if (o.env !== undefined)
			body.env = o.env;
		this.data = await this.client.call("PATCH", this.path(),
		    { json: body });
		return this.data;
	}

	// ---- lifecycle ----

	private async lifecycle(verb: string): Promise<SandboxInfo> {
		const d = await this.client.call("POST", this.path("/" + verb));
		if (d !== undefined)
			this.data = { ...this.data, ...d };
		return d;
	}

	/** Freezes its VM in memory (the next request resumes it). */
	pause(): Promise<SandboxInfo> { return this.lifecycle("pause"); }
	/** Snapshots its VM to disk and ends it (the next request wakes it). */
	suspend(): Promise<SandboxInfo> { return this.lifecycle("suspend"); }
	resume(): Promise<SandboxInfo> { return this.lifecycle("resume"); }
	start(): Promise<SandboxInfo> { return this.lifecycle("start"); }
	stop(): Promise<SandboxInfo> { return this.lifecycle("stop"); }
	restart(): Promise<SandboxInfo> { return this.lifecycle("restart"); }

	/**
	 * Fleet mode (admin): moves the sandbox to fleet host to (suspended,
	 * its files streamed there, resumed there if it ran); answered once
	 * it ended. It is then that host's: this client's berthd routes to
	 * it, its own API holds it. A ConflictError on a berthd not in fleet
	 * mode or for an external sandbox.
	 */
	move(to: string): Promise<MoveResult> {
		return this.client.call("POST", this.path("/move"),
		    { json: { to } });
	}

	// ---- forks and checkpoints ----
	//
	// The snapshots API (proxy/api/table.c): POST .../fork, GET and POST
	// .../checkpoints, DELETE .../checkpoints/NAME, POST .../restore. A
	// sandbox's own token may call each of them on its sandbox. Only a
	// template with a root overlay and a guest agent forks (Debian's,
	// images'): the minimal one answers a ConflictError, as an external
	// sandbox does.

	/**
	 * Forks it into new sandboxes (POST /v1/sandboxes/ID/fork): one id
	 * or 1 to vm_max_forks (16) of them, each a copy of its memory,
	 * processes and disk at one instant that then goes its own way
	 * (writes on either side are not seen by the other), with its own
	 * identity and its own token (on the returned sandboxes: berthd
	 * shows it only now). The source may be running, paused or
	 * suspended, and runs on (it pauses for milliseconds).
	 *
	 * With `checkpoint`: made from that checkpoint of it instead
	 * (`netctl sandbox create NEW --from ID:NAME`; the sandbox in any
	 * state, untouched). Each fork is waited for until it runs, unless
	 * `noWait` (its state is then "creating").
	 *
	 * The forks talk through this sandbox's client; when that holds the
	 * sandbox's own token, which may not see its forks, a fork gets a
	 * client with its own token (Client.withToken).
	 *
	 * Throws NotFoundError (no such sandbox; or field "checkpoint"),
	 * BadRequestError (field "ids": none, too many, a bad or repeated
	 * id), ConflictError (an id that exists, field "ids"; a sandbox
	 * that is not a microVM, a template that cannot fork, one stopped),
	 * SandboxStateError (a fork that did not come to run).
	 */
	async fork(ids: string | string[], o: ForkOptions = {}):
	    Promise<Sandbox[]> {
		const body: Record<string, unknown> = {
			ids: typeof ids === "string" ? [ids] : ids,
		};
		if (o.checkpoint !== undefined)
			body.checkpoint = o.checkpoint;
		const doc: ForkResult = await this.client.call("POST",
		    this.path("/fork"), { json: body });
		const forks = (doc.forks ?? []).map((f) =>
		    new Sandbox(this.client, f));
		if (o.noWait)
			return forks;
		const out: Sandbox[] = [];
		for (let f of forks) {
			try {
				await f.waitFor("running", o.timeoutMs);
			} catch (e) {
				if (!(e instanceof ForbiddenError) ||
				    !this.client.hasToken || f.token === undefined)
					throw e;
				f = new Sandbox(this.client.withToken(f.token),
				    f.data);
				await f.waitFor("running", o.timeoutMs);
			}
			out.push(f);
		}
		return out;
	}

	/**
	 * Takes a checkpoint (POST /v1/sandboxes/ID/checkpoints): its memory,
	 * processes and disk kept under name (1-40 of a-z, 0-9 and "-", not
	 * first), taken as a fork's capture is (a running sandbox pauses for
	 * milliseconds and runs on; a paused or suspended one stays so).
	 * Resolves once taken. A sandbox made from it (fork with
	 * `checkpoint`), or restored to it, starts from there.
	 *
	 * Throws BadRequestError (field "name"), ConflictError (field
	 * "name": it has one of that name; without a field: it has
	 * vm_max_checkpoints (16) already, or it cannot be checkpointed:
	 * stopped, not a microVM, a template without a root overlay), an
	 * APIError 503 with code "capacity" (the host's memory or disk).
	 */
	checkpoint(name: string): Promise<Checkpoint> {
		return this.client.call("POST", this.path("/checkpoints"),
		    { json: { name } });
	}

	/** Its checkpoints, oldest first (GET .../checkpoints). */
	async checkpoints(): Promise<Checkpoint[]> {
		return (await this.client.call("GET", this.path("/checkpoints")))
		    .checkpoints;
	}

	/**
	 * Puts it back to a checkpoint, in place (POST .../restore): its VMM
	 * stops, and it runs again from the checkpoint's memory and disk
	 * with the same id, address, ports and tokens (files written and
	 * processes ended since are as they were). Resolves once it runs,
	 * with the sandbox (also in `data`). NotFoundError (field
	 * "checkpoint") when it has none of that name.
	 */
	async restore(name: string): Promise<SandboxInfo> {
		const d = await this.client.call("POST", this.path("/restore"),
		    { json: { checkpoint: name } });
		this.data = { ...this.data, ...d };
		return d;
	}

	/** Removes a checkpoint (DELETE .../checkpoints/NAME; the disk
	 * layers only it kept go, sandboxes made from it stay).
	 * NotFoundError when it has none of that name. */
	async removeCheckpoint(name: string): Promise<void> {
		await this.client.call("DELETE", this.path("/checkpoints/" +
		    encodeURIComponent(name)));
	}

	// ---- commands ----

	/**
	 * Runs a command and waits for its end: its status and output. A
	 * string is a shell command line (sh -c). stdin over 48 KiB goes
	 * streamed. With detach: true it runs on by itself: a Process
	 * (as spawn).
	 */
	exec(cmd: Command, o: SpawnOptions & { detach: true }): Promise<Process>;
	exec(cmd: Command, o?: ExecOptions & { detach?: false }):
	    Promise<ExecResult>;
	async exec(cmd: Command, o: (ExecOptions | SpawnOptions) &
	    { detach?: boolean } = {}): Promise<ExecResult | Process> {
		if (o.detach)
			return this.spawn(cmd, o as SpawnOptions);
		return this.run(cmd, o as ExecOptions);
	}

	private async run(cmd: Command, o: ExecOptions): Promise<ExecResult> {
		const stdin = typeof o.stdin === "string" ? Buffer.from(o.stdin) :
		    o.stdin;
		if (stdin !== undefined && stdin.length > BUFFERED_STDIN_MAX)
			return (await this.execStream(cmd, { ...o, stdin }))
			    .collect();
		const body = execBody(cmd, o);
		if (stdin !== undefined && stdin.length > 0)
			body.stdin = Buffer.from(stdin).toString("base64");
		return execResult(await this.client.call("POST", this.path("/exec"),
		    { json: body }));
	}

	/** Runs a command with its output streamed as it comes (and its
	 * stdin as you write it, with stdin: "pipe"). */
	execStream(cmd: Command, o: ExecStreamOptions = {}):
	    Promise<ExecStream> {
		return execStream(this.client, this.path("/exec?stream=1"),
		    execBody(cmd, o), o.stdin);
	}

	/**
	 * Starts a command that runs on by itself (its stdin /dev/null, its
	 * output kept in a ring of `ring` bytes, default 1 MiB): a Process.
	 * keepAwake: the sandbox is not idle while it runs. tty: on a
	 * terminal, which Process.attach is a client of.
	 */
	async spawn(cmd: Command, o: SpawnOptions = {}): Promise<Process> {
		const extra: Record<string, unknown> = { detach: true };
		if (o.ring !== undefined)
			extra.ring = o.ring;
		if (o.keepAwake !== undefined)
			extra.keep_awake = o.keepAwake;
		const doc = await this.client.call("POST", this.path("/exec"),
		    { json: execBody(cmd, o, extra) });
		return new Process(this, doc.process, doc);
	}
}

// `await using sb = await Sandbox.create(...)` where the runtime has
// Symbol.asyncDispose (Node 20.4+, or a polyfill): removes it.
{
	const dispose = (Symbol as { asyncDispose?: symbol }).asyncDispose;
	if (dispose !== undefined)
		Object.defineProperty(Sandbox.prototype, dispose, {
			value(this: Sandbox) { return this.remove(); },
			configurable: true, writable: true,
		});
}

/** Runs fn with a new sandbox, removed afterwards whatever fn did. */
export async function withSandbox<T>(client: Client, o: CreateOptions,
    fn: (sb: Sandbox) => Promise<T> | T): Promise<T> {
	const sb = await Sandbox.create(client, o);
	try {
		return await fn(sb);
	} finally {
		await sb.remove().catch((e) => {
			if (!(e instanceof NotFoundError))
				throw e;
		});
	}
}

/** A checkpoint of a sandbox (checkpoints() lists these; checkpoint()
 * answers one with `sandbox` and `detail`). */
export interface Checkpoint {
	name: string;
	/** Unix seconds it was taken at. */
	created: number;
	/** What it keeps on disk (its memory and disk layers). */
	size_bytes: number;
	/** The sandbox it is of (checkpoint()'s answer). */
	sandbox?: string;
	/** How the capture went: how long the sandbox paused (checkpoint()'s
	 * answer). */
	detail?: string;
	[field: string]: unknown;
}

/** Options of Sandbox.fork. */
export interface ForkOptions {
	/** Made from this checkpoint of the sandbox, not from it now. */
	checkpoint?: string;
	/** Do not wait for the forks to run (default: wait, as netctl does). */
	noWait?: boolean;
	/** How long to wait for each fork to run (default 5 minutes). */
	timeoutMs?: number;
}

/** What POST /v1/sandboxes/ID/fork answers (201). */
export interface ForkResult {
	/** The sandbox forked. */
	source: string;
	/** The checkpoint they were made from, when one was named. */
	checkpoint?: string;
	/** The new sandboxes: "creating", each with its token (shown once). */
	forks: (SandboxInfo & { token: string; token_id: string })[];
}

// ---- detached processes ----

/** A detached process as berthd lists it. */
export interface ProcessInfo {
	process: number;
	pid: number;
	/** running or exited */
	state: string;
	exit_code: number | null;
	signal: number | null;
	keep_awake: boolean;
	started_ms: number;
	output_bytes: number;
	command: string;
}

/** A piece of a process's output (its ring). */
export interface ProcessLogs {
	output: Buffer;
	/** Where the next call goes on from. */
	nextOffset: number;
	state: string;
	exitCode: number | null;
	signal: number | null;
	/** Output before `first` is gone from the ring. */
	lost: boolean;
	first: number;
	total: number;
}

/** The end of a process. */
export interface ProcessExit {
	process: number;
	state: string;
	exitCode: number | null;
	signal: number | null;
}

/** Options of an attach to a process on a terminal (Process.attach). */
export interface AttachOptions {
	/** The terminal's size from now (both or neither; default: as it
	 * is). */
	rows?: number;
	cols?: number;
	/** Its output from this offset of all it wrote (default: what its
	 * ring holds), then as it comes. */
	offset?: number;
	/** Keys: "pipe" (default): `.stdin` stays open for them, and
	 * ending it (`stdin.end()`) detaches; bytes or a stream of them:
	 * sent, then it detaches. */
	stdin?: ExecStreamOptions["stdin"];
}

/** A sandbox's detached processes (sb.spawn starts one). */
export class Processes {
	private readonly sb: Sandbox;

	/** @internal */
	constructor(sb: Sandbox) { this.sb = sb; }

	private p(n: number, sub = ""): string {
		return this.sb.path(`/processes/${n}${sub}`);
	}

	async list(): Promise<ProcessInfo[]> {
		return (await this.sb.client.call("GET",
		    this.sb.path("/processes"))).processes;
	}

	async get(n: number): Promise<Process> {
		const d = await this.sb.client.call("GET", this.p(n));
		return new Process(this.sb, n, d);
	}

	/** Its output from offset (default 0) as far as berthd has it. */
	async logs(n: number, o: { offset?: number } = {}): Promise<ProcessLogs> {
		const d = await this.sb.client.call("GET", this.p(n, "/logs"),
		    { query: { offset: o.offset } });
		return {
			output: decoded(d, "output"), nextOffset: d.next_offset ?? 0,
			state: d.state, exitCode: d.exit_code ?? null,
			signal: d.signal ?? null, lost: d.lost === true,
			first: d.first ?? 0, total: d.total ?? 0,
		};
	}

	/** Its output as it comes, until it ends (logs --follow). */
	async *follow(n: number, o: { offset?: number } = {}):
	    AsyncGenerator<Buffer> {
		const r = await this.sb.client.request("GET", this.p(n, "/logs"),
		    { query: { offset: o.offset, follow: 1 }, stream: true });
		await check(r);
		yield* bytes(r);
	}

	/** Sends it a signal (default SIGTERM): a number or a name. */
	async kill(n: number, signal?: number | string): Promise<void> {
		await this.sb.client.call("POST", this.p(n, "/kill"),
		    { json: signal === undefined ? {} : { signal } });
	}

	/** Waits for its end. */
	async wait(n: number): Promise<ProcessExit> {
		const d = await this.sb.client.call("POST", this.p(n, "/wait"),
		    { stream: true });
		return { process: d.process, state: d.state,
		    exitCode: d.exit_code ?? null, signal: d.signal ?? null };
	}

	/**
	 * Attaches to a process started on a terminal (spawn with tty):
	 * an ExecStream of its screen (what the ring holds from offset, then
	 * the output as it comes), `.stdin` its keys, `resize(rows, cols)`.
	 * Ending `.stdin` detaches: the exit event then says detached: true,
	 * state: "running", and the process runs on (another attach may
	 * follow); when the process ends first, it says its exit. kill()
	 * drops the connection, which detaches too.
	 */
	attach(n: number, o: AttachOptions = {}): Promise<ExecStream> {
		const j: Record<string, unknown> = {};
		if (o.rows !== undefined)
			j.rows = o.rows;
		if (o.cols !== undefined)
			j.cols = o.cols;
		if (o.offset !== undefined)
			j.offset = o.offset;
		return execStream(this.sb.client, this.p(n, "/attach"), j,
		    o.stdin ?? "pipe");
	}
}

/** A detached process: sb.spawn's, or sb.processes.get's. */
export class Process {
	readonly sandbox: Sandbox;
	/** Its number in the sandbox (not the guest's pid). */
	readonly id: number;
	/** Its guest pid. */
	readonly pid: number | undefined;

	/** @internal */
	constructor(sb: Sandbox, id: number, d?: { pid?: number }) {
		this.sandbox = sb;
		this.id = id;
		this.pid = d?.pid;
	}

	async info(): Promise<ProcessInfo> {
		return this.sandbox.client.call("GET",
		    this.sandbox.path(`/processes/${this.id}`));
	}

	logs(o: { offset?: number } = {}): Promise<ProcessLogs> {
		return this.sandbox.processes.logs(this.id, o);
	}

	follow(o: { offset?: number } = {}): AsyncGenerator<Buffer> {
		return this.sandbox.processes.follow(this.id, o);
	}

	kill(signal?: number | string): Promise<void> {
		return this.sandbox.processes.kill(this.id, signal);
	}

	wait(): Promise<ProcessExit> {
		return this.sandbox.processes.wait(this.id);
	}

	/** Attaches to it (a process on a terminal): Processes.attach. */
	attach(o: AttachOptions = {}): Promise<ExecStream> {
		return this.sandbox.processes.attach(this.id, o);
	}
}

// ---- files ----

/** An entry of a directory listing. */
export interface FileEntry {
	name: string;
	/** file, dir, link, fifo, socket, char, block or other */
	type: string;
	size: number;
	/** octal, e.g. "0644" */
	mode: string;
	mtime: string;
	mtime_ms: number;
	[field: string]: unknown;
}

/** A change in a watched directory. */
export interface WatchEvent {
	/** ready (the watch is set), create, modify, attrib, delete,
	 * move_from, move_to, delete_self, overflow or unwatched */
	event: string;
	path: string;
	dir?: boolean;
	cookie?: number;
}

/** What a file write did. */
export interface WriteResult {
	path: string;
	size: number;
	mode: string;
	wake_ms: number;
	duration_ms: number;
}

/** A response body as Buffers, a break-off a ConnectionError. */
async function* bytes(r: RawResponse): AsyncGenerator<Buffer> {
	try {
		for await (const b of r.body)
			yield b;
	} catch (e: any) {
		throw new ConnectionError("the transfer broke off: " +
		    (e?.message ?? String(e)), e?.code, e);
	} finally {
		r.body.destroy();
	}
}

/** A sandbox's guest files (every path absolute). */
export class Files {
	private readonly sb: Sandbox;

	/** @internal */
	constructor(sb: Sandbox) { this.sb = sb; }

	/** A whole file (or length bytes from offset). */
	async read(path: string, o: { offset?: number; length?: number } = {}):
	    Promise<Buffer> {
		const parts: Buffer[] = [];
		for await (const b of await this.readStream(path, o))
			parts.push(b);
		return Buffer.concat(parts);
	}

	/** A file as it comes, in pieces (memory stays bounded). */
	async readStream(path: string,
	    o: { offset?: number; length?: number } = {}):
	    Promise<AsyncIterable<Buffer>> {
		const r = await this.sb.client.request("GET", this.sb.path("/files"),
		    { query: { path, offset: o.offset, length: o.length },
		    stream: true });
		await check(r);
		return bytes(r);
	}

	/**
	 * Writes a file from bytes or a stream of them (a Readable, any
	 * async iterable): sent as it is read, so memory stays bounded.
	 * mode: octal, default "0644".
	 */
	async write(path: string, data: Body,
	    o: { mode?: string | number } = {}): Promise<WriteResult> {
		const mode = typeof o.mode === "number" ? o.mode.toString(8) : o.mode;
		const r = await this.sb.client.request("PUT", this.sb.path("/files"),
		    { query: { path, mode }, body: data, contentType: "application/octet-stream", stream: true });
		return jsonBody(r);
	}

	/** A directory's entries (at most limit, default 10000). */
	async list(path: string, o: { limit?: number } = {}):
	    Promise<FileEntry[]> {
		const d = await this.sb.client.call("GET", this.sb.path("/files"),
		    { query: { path, list: 1, limit: o.limit } });
		return d.entries;
	}

	async mkdir(path: string, o: { parents?: boolean;
	    mode?: string | number } = {}): Promise<void> {
		const body: Record<string, unknown> = { path };
		if (o.parents !== undefined)
			body.parents = o.parents;
		if (o.mode !== undefined)
			body.mode = typeof o.mode === "number" ?
			    o.mode.toString(8) : o.mode;
		await this.sb.client.call("POST", this.sb.path("/files/mkdir"),
		    { json: body });
	}

	/** Removes a file, or a directory (recursive: with what it holds). */
	async remove(path: string, o: { recursive?: boolean } = {}):
	    Promise<void> {
		await this.sb.client.call("DELETE", this.sb.path("/files"),
		    { query: { path, recursive: o.recursive || undefined } });
	}

	async move(from: string, to: string,
	    o: { overwrite?: boolean } = {}): Promise<void> {
		const body: Record<string, unknown> = { from, to };
		if (o.overwrite !== undefined)
			body.overwrite = o.overwrite;
		await this.sb.client.call("POST", this.sb.path("/files/move"),
		    { json: body });
	}

	/**
	 * Watches a directory: an async iterator of events, the first
	 * {event: "ready"} once the watch is set. close() (or leaving a
	 * for await) ends it.
	 */
	async watch(path: string, o: { recursive?: boolean } = {}):
	    Promise<Watch> {
		const r = await this.sb.client.request("GET", this.sb.path("/watch"),
		    { query: { path, recursive: o.recursive || undefined },
		    stream: true });
		await check(r);
		return new Watch(r);
	}
}

/** The events of a watched directory (Files.watch). */
export class Watch implements AsyncIterable<WatchEvent> {
	private readonly r: RawResponse;

	/** @internal */
	constructor(r: RawResponse) { this.r = r; }

	/** Ends the watch. */
	close(): void {
		this.r.body.destroy();
		this.r.req.destroy();
	}

	async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent> {
		let rest = "";
		try {
			for await (const b of bytes(this.r)) {
				const lines = (rest + b.toString("utf8")).split("\n");
				rest = lines.pop() ?? "";
				for (const l of lines) {
					if (l === "")
						continue;
					const ev = JSON.parse(l);
					if (ev.event === "error")
						throw errorOf({ ...this.r,
						    status: ev.status ?? 500 },
						    Buffer.from(JSON.stringify({ error: {
						    code: "watch_failed",
						    message: ev.message } })));
					if (typeof ev.path !== "string" &&
					    typeof ev.path_base64 === "string")
						ev.path = Buffer.from(ev.path_base64,
						    "base64").toString("latin1");
					yield ev;
				}
			}
		} catch (e) {
			// closed by us: the end, not an error
			if (this.r.req.destroyed && e instanceof ConnectionError)
				return;
			throw e;
		} finally {
			this.close();
		}
	}
}

// ---- ports ----

/** A published port. */
export interface PortInfo {
	sandbox: string;
	port: number;
	/** https://PORT-ID.DOMAIN:HTTPS_PORT/ */
	url: string;
	urls: string[];
	/** preserve or upstream */
	host_header: string;
	/** public or private */
	visibility: string;
	host?: string;
	created: number;
}

/** Options of a published port. */
export interface PublishOptions {
	/** private: only with a token (default public) */
	visibility?: "public" | "private";
	/** The Host the guest sees: preserve (default) or upstream. */
	hostHeader?: "preserve" | "upstream";
	/** A custom host name too ("" removes it). */
	host?: string;
}

/** A sandbox's published ports. */
export class Ports {
	private readonly sb: Sandbox;

	/** @internal */
	constructor(sb: Sandbox) { this.sb = sb; }

	/** Publishes a guest port as an HTTPS URL (or changes it). */
	publish(port: number, o: PublishOptions = {}): Promise<PortInfo> {
		const body: Record<string, unknown> = {};
		if (o.visibility !== undefined)
			body.visibility = o.visibility;
		if (o.hostHeader !== undefined)
			body.host_header = o.hostHeader;
		if (o.host !== undefined)
			body.host = o.host;
		return this.sb.client.call("PUT", this.sb.path(`/ports/${port}`),
		    { json: body });
	}

	async unpublish(port: number): Promise<void> {
		await this.sb.client.call("DELETE", this.sb.path(`/ports/${port}`));
	}

	get(port: number): Promise<PortInfo> {
		return this.sb.client.call("GET", this.sb.path(`/ports/${port}`));
	}

	async list(): Promise<PortInfo[]> {
		const all: PortInfo[] = [];
		let after: string | undefined;
		do {
			const d = await this.sb.client.call("GET",
			    this.sb.path("/ports"), { query: { limit: 1000, after } });
			all.push(...(d.ports ?? []));
			after = d.next ?? undefined;
		} while (after !== undefined);
		return all;
	}
}

// ---- egress ----

/** An egress rule of a sandbox. */
export interface EgressRule {
	/** allow or deny */
	action: string;
	/** e.g. example.com:443/tcp, 10.0.0.0/8, *.example.org */
	rule: string;
	/** unix seconds it lapses at, or null */
	expires: number | null;
}

/** A sandbox's egress: its mode and rules. */
export interface EgressInfo {
	sandbox: string;
	mode?: string | null;
	effective_mode: string;
	rules: EgressRule[];
}

/** A sandbox's egress rules (kept inside the global policy). */
export class Egress {
	private readonly sb: Sandbox;

	/** @internal */
	constructor(sb: Sandbox) { this.sb = sb; }

	private add(action: string, rule: string,
	    o: { ttl?: string | number }): Promise<EgressRule> {
		const body: Record<string, unknown> = { action, rule };
		if (o.ttl !== undefined)
			body.ttl = duration(o.ttl);
		return this.sb.client.call("POST", this.sb.path("/egress"),
		    { json: body });
	}

	/** Allows a destination (for ttl: "10m", or milliseconds). */
	allow(rule: string, o: { ttl?: string | number } = {}):
	    Promise<EgressRule> {
		return this.add("allow", rule, o);
	}

	deny(rule: string, o: { ttl?: string | number } = {}):
	    Promise<EgressRule> {
		return this.add("deny", rule, o);
	}

	/** Removes one rule. */
	async remove(action: "allow" | "deny", rule: string): Promise<void> {
		await this.sb.client.call("DELETE", this.sb.path(
		    `/egress/${action}/${encodeURIComponent(rule)}`));
	}

	/** Its mode and rules. */
	show(): Promise<EgressInfo> {
		return this.sb.client.call("GET", this.sb.path("/egress"));
	}

	/** Replaces its rules (and mode, when given; null: the policy's). */
	set(o: { mode?: string | null; rules?: { action: string;
	    rule: string; ttl?: string }[] }): Promise<EgressInfo> {
		return this.sb.client.call("PUT", this.sb.path("/egress"),
		    { json: o });
	}

	/** No rules, the policy's mode. */
	async reset(): Promise<void> {
		await this.sb.client.call("DELETE", this.sb.path("/egress"));
	}

	/** Its recent denied connections. */
	log(): Promise<{ sandbox: string; available: boolean;
	    entries: Record<string, unknown>[] }> {
		return this.sb.client.call("GET", this.sb.path("/egress/log"));
	}
}
