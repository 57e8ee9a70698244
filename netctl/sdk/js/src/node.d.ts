// SPDX-License-Identifier: GPL-2.0-or-later
//
// node.d.ts — just enough of Node's types to compile the SDK with
// Debian's tsc, which comes without @types/node: the node: modules the
// SDK imports are untyped here (their use stays inside the SDK), and
// the few globals it touches are declared. Consumers of the built
// package see Buffer through their own @types/node.

declare module "node:http";
declare module "node:https";
declare module "node:fs";
declare module "node:path";
declare module "node:events";
declare module "node:stream";
declare module "node:crypto";

interface Buffer extends Uint8Array {
	toString(encoding?: string, start?: number, end?: number): string;
	write(s: string, offset?: number, length?: number, encoding?: string): number;
	subarray(start?: number, end?: number): Buffer;
	readUInt32BE(offset?: number): number;
	writeUInt32BE(value: number, offset?: number): number;
}
declare var Buffer: {
	from(data: string, encoding?: string): Buffer;
	from(data: ArrayBufferLike | Uint8Array | readonly number[]): Buffer;
	alloc(size: number): Buffer;
	allocUnsafe(size: number): Buffer;
	concat(list: readonly Uint8Array[], totalLength?: number): Buffer;
	isBuffer(x: unknown): x is Buffer;
	byteLength(s: string | Uint8Array, encoding?: string): number;
};
declare var process: {
	env: Record<string, string | undefined>;
};
declare function setTimeout(fn: () => void, ms: number): unknown;
declare function clearTimeout(t: unknown): void;
declare class URL {
	constructor(url: string, base?: string);
	protocol: string;
	hostname: string;
	port: string;
}
declare class URLSearchParams {
	constructor();
	append(name: string, value: string): void;
	toString(): string;
}
