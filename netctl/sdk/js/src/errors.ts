// SPDX-License-Identifier: GPL-2.0-or-later
//
// errors.ts — what the SDK throws. berthd answers a failed request with
// {"error": {"status", "code", "message", "field"?}} and an HTTP status
// (proxy/api/reply.c): APIError carries them, one subclass per status a
// caller commonly tells apart. A request that never got an answer (no
// socket, refused, TLS, cut) is a ConnectionError.

/** An error answer of berthd's control API. */
export class APIError extends Error {
	/** The HTTP status (400, 403, 404, 409, 503...). */
	readonly status: number;
	/** berthd's code: "invalid_argument", "not_found", "capacity"... */
	readonly code: string;
	/** The request field the error is about, when berthd names one. */
	readonly field: string | undefined;
	/** Seconds to wait before trying again (429, 503 with Retry-After). */
	readonly retryAfter: number | undefined;

	constructor(status: number, code: string, message: string,
	    field?: string, retryAfter?: number) {
		super(message);
		this.name = new.target.name;
		this.status = status;
		this.code = code;
		this.field = field;
		this.retryAfter = retryAfter;
	}
}

/** 400: the request is malformed (field names what). */
export class BadRequestError extends APIError {}
/** 401 or 403: no token, or one that may not do this. */
export class ForbiddenError extends APIError {}
/** 404: no such sandbox, port, process, file, checkpoint... */
export class NotFoundError extends APIError {}
/** 409: the state does not allow it (an external sandbox has no guest...). */
export class ConflictError extends APIError {}

/** berthd could not be reached, or the connection broke off. */
export class ConnectionError extends Error {
	/** The system's error code (ENOENT, ECONNREFUSED...), if any. */
	readonly errno: string | undefined;

	constructor(message: string, errno?: string, cause?: unknown) {
		super(message);
		this.name = "ConnectionError";
		this.errno = errno;
		if (cause !== undefined)
			(this as { cause?: unknown }).cause = cause;
	}
}

/** A sandbox ended up in a state other than the one waited for. */
export class SandboxStateError extends Error {
	readonly id: string;
	readonly state: string;

	constructor(id: string, state: string, message: string) {
		super(message);
		this.name = "SandboxStateError";
		this.id = id;
		this.state = state;
	}
}

/** The APIError subclass of an error answer. */
export function apiError(status: number, doc: unknown,
    retryAfter?: number): APIError {
	const e = (doc as { error?: Record<string, unknown> } | undefined)?.error;
	const code = typeof e?.code === "string" ? e.code : `http_${status}`;
	const msg = typeof e?.message === "string" ? e.message :
	    `berthd answered ${status}`;
	const field = typeof e?.field === "string" ? e.field : undefined;
	const C = status === 400 ? BadRequestError :
	    status === 401 || status === 403 ? ForbiddenError :
	    status === 404 ? NotFoundError : status === 409 ? ConflictError :
	    APIError;
	return new C(status, code, msg, field, retryAfter);
}
