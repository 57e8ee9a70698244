// SPDX-License-Identifier: GPL-2.0-or-later
//
// @berth/sdk — a client of berth's control API: sandboxes (microVMs or
// external hosts), commands and detached processes in them, their files,
// published ports and egress rules; templates, tokens, the global
// policy and fleet mode's views.

export { Client } from "./client.js";
export type { ClientOptions, Body, Health } from "./client.js";
export {
	APIError, BadRequestError, ForbiddenError, NotFoundError,
	ConflictError, ConnectionError, SandboxStateError,
} from "./errors.js";
export {
	Templates, TemplateBuild, TemplateBuildError, Tokens, Fleet, tarDirectory,
} from "./admin.js";
export type {
	TemplateInfo, BuildStatus, BuildOptions, BuildSource, TokenInfo, Policy,
	PolicyUpdate, FleetHost, FleetHosts, FleetSandbox, FleetSandboxes,
	OpenAPIDocument, DrainStatus,
} from "./admin.js";
export { ExecStream } from "./exec.js";
export type {
	Command, ExecOptions, ExecResult, ExecStreamOptions, ExecEvent,
	ExecChunk, ExecExit,
} from "./exec.js";
export {
	Sandbox, Process, Processes, Files, Watch, Ports, Egress, withSandbox,
} from "./sandbox.js";
export type {
	SandboxInfo, SandboxEvent, ConsoleText, CreateOptions, SpawnOptions,
	AttachOptions, Checkpoint, ForkOptions,
	ForkResult, MoveResult, ProcessInfo, ProcessLogs,
	ProcessExit, FileEntry, WatchEvent, WriteResult, PortInfo,
	PublishOptions, EgressRule, EgressInfo,
} from "./sandbox.js";
