// SPDX-License-Identifier: GPL-2.0-or-later
//
// exec.ts — commands in a guest: the buffered exec (one JSON answer), the
// streamed one (POST .../exec?stream=1), and detached processes.
//
// The streamed exec, and an attach to a detached process on a terminal
// (POST .../processes/N/attach), speak the guest agent's framing through
// berthd (vmm/proto/agent_proto.h, proxy/api/streams.c): a frame is a
// 4-byte big-endian payload length, a type byte, the payload. The client
// sends 'J' first (the exec request's JSON; an attach's {rows, cols,
// offset}), then 'I' (stdin, at most 32 KiB a frame; an empty one is EOF)
// and 'W' ("ROWS COLS" of a terminal); the answer, chunked, is 'O'
// (stdout), 'R' (stderr) and last 'X' (the end, JSON; an attach's says
// whether it detached) or 'F' (a failure after the answer began, JSON).

import { Writable } from "node:stream";
import { once } from "node:events";
import type { Client, RawResponse } from "./client.js";
import { errorOf, readAll } from "./client.js";
import { APIError, ConnectionError, apiError } from "./errors.js";

const HDR = 5;
const CHUNK = 32 * 1024;	/* an 'I' frame's payload, at most */
/** stdin a buffered exec takes in its JSON (base64 within 64 KiB) */
export const BUFFERED_STDIN_MAX = 48 * 1024;

/** A command: its argv, or a shell command line run by `sh -c`. */
export type Command = string | readonly string[];

/** Options of a command. */
export interface ExecOptions {
	/** Bytes for its stdin (default: none, stdin at EOF). execStream
	 * also takes a stream, or "pipe" to write `.stdin` yourself. */
	stdin?: string | Uint8Array;
	/** Environment over the sandbox's own. */
	env?: Record<string, string>;
	/** Working directory in the guest. */
	cwd?: string;
	/** A user name or uid of the guest's /etc/passwd. */
	user?: string;
	/** Killed past it: "90s", "10m", or milliseconds (1 s to 24 h;
	 * default berthd's, 10 minutes). */
	timeout?: string | number;
	/** A terminal: true, or its size. */
	tty?: boolean | { rows: number; cols: number };
}

/** How a command ended, with what it wrote. */
export interface ExecResult {
	/** Its exit status, null when a signal ended it. */
	exitCode: number | null;
	/** The signal that ended it, else null. */
	signal: number | null;
	/** stdout as UTF-8 text (stdoutBytes: as written). */
	stdout: string;
	stderr: string;
	stdoutBytes: Buffer;
	stderrBytes: Buffer;
	/** Killed at its timeout. */
	timedOut: boolean;
	/** Output past 4 MiB a stream was dropped (buffered exec). */
	truncated: boolean;
	/** How long waking the sandbox took first (0: it was running). */
	wakeMs: number;
	durationMs: number;
}

/** The end of a streamed command, or of an attach. */
export interface ExecExit {
	stream: "exit";
	exitCode: number | null;
	signal: number | null;
	timedOut: boolean;
	wakeMs: number;
	durationMs: number;
	/** An attach that ended with its client detaching (its stdin
	 * ended): the process runs on. false for a command's end. */
	detached: boolean;
	/** An attach's end: the process's state, "running" (detached) or
	 * "exited". */
	state?: string;
	/** An attach's end: the process's number. */
	process?: number;
	/** An attach's end: the offset of the process's output so far
	 * (where a next attach or logs call goes on from). */
	nextOffset?: number;
}

/** One piece of a streamed command's output. */
export interface ExecChunk {
	stream: "stdout" | "stderr";
	data: Buffer;
}

export type ExecEvent = ExecChunk | ExecExit;

/** Options of a streamed command. */
export interface ExecStreamOptions extends Omit<ExecOptions, "stdin"> {
	/** Its stdin: bytes or a stream of them, sent then closed; "pipe":
	 * left open for `.stdin`; default: closed at once. */
	stdin?: string | Uint8Array | AsyncIterable<Uint8Array | string> |
	    "pipe";
}

/** @internal the exec request's JSON */
export function execBody(cmd: Command, o: ExecOptions | ExecStreamOptions,
    extra: Record<string, unknown> = {}): Record<string, unknown> {
	const argv = typeof cmd === "string" ? ["sh", "-c", cmd] : [...cmd];
	const b: Record<string, unknown> = { argv, ...extra };

	if (o.env !== undefined)
		b.env = o.env;
	if (o.cwd !== undefined)
		b.cwd = o.cwd;
	if (o.user !== undefined)
		b.user = o.user;
	if (o.timeout !== undefined)
		b.timeout = duration(o.timeout);
	if (o.tty !== undefined)
		b.tty = o.tty;
	return b;
}

/** @internal "90s" as given; a number of milliseconds as "Nms". */
export function duration(v: string | number): string {
	return typeof v === "number" ? `${Math.round(v)}ms` : v;
}

/** @internal One stream of a JSON answer: KEY and KEY_encoding. */
export function decoded(doc: any, key: string): Buffer {
	const s = doc?.[key];
	if (typeof s !== "string")
		return Buffer.alloc(0);
	return doc[key + "_encoding"] === "base64" ? Buffer.from(s, "base64") :
	    Buffer.from(s, "utf8");
}

/** @internal the result of a buffered exec's answer */
export function execResult(doc: any): ExecResult {
	const out = decoded(doc, "stdout"), err = decoded(doc, "stderr");
	return {
		exitCode: doc.exit_code ?? null, signal: doc.signal ?? null,
		stdout: out.toString("utf8"), stderr: err.toString("utf8"),
		stdoutBytes: out, stderrBytes: err,
		timedOut: doc.timed_out === true, truncated: doc.truncated === true,
		wakeMs: doc.wake_ms ?? 0, durationMs: doc.duration_ms ?? 0,
	};
}

function frame(type: string, payload?: Uint8Array): Buffer {
	const n = payload?.length ?? 0;
	const b = Buffer.allocUnsafe(HDR + n);
	b.writeUInt32BE(n, 0);
	b[4] = type.charCodeAt(0);
	if (payload !== undefined && n > 0)
		b.set(payload, HDR);
	return b;
}

/** @internal the frames of an answer's body as they come */
export async function* frames(body: AsyncIterable<Buffer>):
    AsyncGenerator<{ type: string; payload: Buffer }> {
	let buf = Buffer.alloc(0);

	for await (const chunk of body) {
		buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
		let off = 0;
		while (buf.length - off >= HDR) {
			const len = buf.readUInt32BE(off);
			if (buf.length - off - HDR < len)
				break;
			yield { type: String.fromCharCode(buf[off + 4]),
			    payload: buf.subarray(off + HDR, off + HDR + len) };
			off += HDR + len;
		}
		buf = off === 0 ? buf : buf.subarray(off);
	}
}

/**
 * A command running with its output streamed: iterate it for
 * {stream: "stdout" | "stderr", data} chunks as the command writes them,
 * then one {stream: "exit", exitCode, signal, ...}. Its stdin is
 * `.stdin` (a Writable) when started with stdin: "pipe". An attach
 * (Process.attach) is one too: its output is the process's terminal,
 * `.stdin` its keys, and ending `.stdin` detaches (the exit event then
 * says detached: true, state: "running").
 */
export class ExecStream implements AsyncIterable<ExecEvent> {
	/** The command's stdin: each write becomes 'I' frames, end() its
	 * EOF. Written to only with stdin: "pipe". */
	readonly stdin: any;
	/** How the command ended (once the output is all read). */
	readonly exit: Promise<ExecExit>;
	private readonly req: any;
	private readonly res: RawResponse;
	private started = false;
	private settle!: (e: ExecExit) => void;
	private reject!: (e: unknown) => void;

	/** @internal */
	constructor(res: RawResponse) {
		this.res = res;
		this.req = res.req;
		this.exit = new Promise((ok, no) => {
			this.settle = ok;
			this.reject = no;
		});
		this.exit.catch(() => undefined);	/* seen through wait() */
		const req = this.req;
		this.stdin = new Writable({
			write(chunk: Buffer, _enc: string, cb: (e?: Error) => void) {
				sendStdin(req, chunk).then(() => cb(), cb);
			},
			final(cb: (e?: Error) => void) {
				if (!req.destroyed)
					req.end(frame("I"));
				cb();
			},
		});
		this.stdin.on("error", () => undefined);
	}

	/** Tells a terminal's new size (a tty command). */
	resize(rows: number, cols: number): void {
		if (!this.req.destroyed && !this.req.writableEnded)
			this.req.write(frame("W", Buffer.from(`${rows} ${cols}`)));
	}

	/** Stops the command: its client goes, berthd kills it in the guest. */
	kill(): void {
		this.req.destroy();
		this.res.body.destroy();
	}

	async *[Symbol.asyncIterator](): AsyncGenerator<ExecEvent> {
		if (this.started)
			throw new Error("an ExecStream is read once");
		this.started = true;
		try {
			for await (const f of frames(this.res.body)) {
				if (f.type === "O" || f.type === "R") {
					yield { stream: f.type === "O" ? "stdout" :
					    "stderr", data: f.payload };
				} else if (f.type === "X") {
					const d = JSON.parse(f.payload.toString("utf8"));
					const e: ExecExit = { stream: "exit",
					    exitCode: d.exit_code ?? null,
					    signal: d.signal ?? null,
					    timedOut: d.timed_out === true,
					    wakeMs: d.wake_ms ?? 0,
					    durationMs: d.duration_ms ?? 0,
					    detached: d.detached === true };
					if (typeof d.state === "string")
						e.state = d.state;
					if (typeof d.process === "number")
						e.process = d.process;
					if (typeof d.next_offset === "number")
						e.nextOffset = d.next_offset;
					this.settle(e);
					yield e;
					return;
				} else if (f.type === "F") {
					// an error after the answer began: its status
					// and message, the same classes as an answer's
					const d = JSON.parse(f.payload.toString("utf8"));
					throw apiError(d.status ?? 500, { error: {
					    code: "exec_failed", message: d.message ??
					    "exec failed" } });
				}
			}
			throw new ConnectionError("berthd ended the answer " +
			    "without the command's end");
		} catch (e: any) {
			const err = e instanceof APIError ||
			    e instanceof ConnectionError ? e :
			    new ConnectionError("the exec stream broke off: " +
			    (e?.message ?? String(e)), e?.code, e);
			this.reject(err);
			throw err;
		} finally {
			this.req.destroy();
		}
	}

	/** Reads (and drops) what is left of the output; how it ended. */
	async wait(): Promise<ExecExit> {
		if (!this.started)
			for await (const _ of this)
				;
		return this.exit;
	}

	/** The whole output and end, as exec() gives them. */
	async collect(): Promise<ExecResult> {
		const out: Buffer[] = [], err: Buffer[] = [];
		let end: ExecExit | undefined;
		for await (const ev of this)
			if (ev.stream === "exit")
				end = ev;
			else
				(ev.stream === "stdout" ? out : err).push(ev.data);
		const o = Buffer.concat(out), e = Buffer.concat(err);
		return { exitCode: end!.exitCode, signal: end!.signal,
		    stdout: o.toString("utf8"), stderr: e.toString("utf8"),
		    stdoutBytes: o, stderrBytes: e, timedOut: end!.timedOut,
		    truncated: false, wakeMs: end!.wakeMs,
		    durationMs: end!.durationMs };
	}
}

/** stdin bytes as 'I' frames of at most 32 KiB, waiting while the
 * connection has not taken them. */
async function sendStdin(req: any, data: Uint8Array | string): Promise<void> {
	const b = typeof data === "string" ? Buffer.from(data) : data;
	for (let off = 0; off < b.length; off += CHUNK) {
		if (req.destroyed || req.writableEnded)
			throw new ConnectionError("the exec stream is closed");
		if (!req.write(frame("I", b.subarray(off, off + CHUNK))))
			await once(req, "drain");
	}
}

/** @internal POST target?stream=1 with its 'J' frame, stdin as asked. */
export async function execStream(client: Client, target: string,
    json: Record<string, unknown>,
    stdin: ExecStreamOptions["stdin"]): Promise<ExecStream> {
	// The answer's head comes once the command started: the J frame
	// goes first, the request stays open for stdin. Known stdin of a
	// few frames goes with it, and its EOF: a command that ends at
	// once has berthd answer and close the connection, and a frame
	// arriving after that would reset it, losing the answer's end.
	const j = frame("J", Buffer.from(JSON.stringify(json)));
	const small = stdin === undefined || (stdin !== "pipe" &&
	    (typeof stdin === "string" || stdin instanceof Uint8Array) &&
	    stdin.length <= 4 * CHUNK);
	let head = j;
	if (small) {
		const parts = [j];
		const b = typeof stdin === "string" ? Buffer.from(stdin) :
		    stdin as Uint8Array | undefined;
		for (let off = 0; b !== undefined && off < b.length; off += CHUNK)
			parts.push(frame("I", b.subarray(off, off + CHUNK)));
		parts.push(frame("I"));
		head = Buffer.concat(parts);
	}
	const r = await client.request("POST", target, {
		open: head, whole: small,
		contentType: "application/vnd.berth.exec-stream",
		stream: true,
	});
	if (r.status !== 200) {
		const b = await readAll(r);
		r.req.destroy();
		throw errorOf(r, b);
	}
	const s = new ExecStream(r);
	if (stdin === "pipe" || small)
		return s;
	void (async () => {
		try {
			if (typeof stdin === "string" || stdin instanceof Uint8Array)
				await sendStdin(r.req, stdin);
			else if (stdin !== undefined)
				for await (const c of stdin)
					await sendStdin(r.req, c);
			if (!r.req.destroyed)
				r.req.end(frame("I"));
		} catch {
			r.req.destroy();
		}
	})();
	return s;
}
