// SPDX-License-Identifier: GPL-2.0-or-later
//
// common.mjs — what the SDK's tests share: the berthd tests/integ/sdk-js.sh
// started (its environment), and an HTTPS GET through berthd's proxy
// trusting its dev CA.

import * as https from "node:https";
import * as fs from "node:fs";
import { Client } from "../dist/index.js";

export const env = process.env;

/** The admin client: berthd's unix socket. */
export function admin() {
	return new Client({ socket: env.BERTH_SOCKET });
}

/** A client of control_listen with token. */
export function tokenClient(token) {
	return new Client({ url: env.BERTH_TEST_CTL_URL, token,
	    cacert: env.BERTH_TEST_CA });
}

/** GET url (https://PORT-ID.berth.localhost:N/...) through berthd:
 * {status, body}. */
export function get(url) {
	const ca = fs.readFileSync(env.BERTH_TEST_CA);
	return new Promise((resolve, reject) => {
		const req = https.get(url, { ca, agent: false,
		    lookup: (h, o, cb) => o?.all ? cb(null, [{ address: "127.0.0.1",
		    family: 4 }]) : cb(null, "127.0.0.1", 4) }, (res) => {
			const parts = [];
			res.on("data", (b) => parts.push(b));
			res.on("end", () => resolve({ status: res.statusCode,
			    body: Buffer.concat(parts).toString("utf8") }));
			res.on("error", reject);
		});
		req.on("error", reject);
		req.setTimeout(30000, () => req.destroy(new Error("timed out")));
	});
}

/** Polls fn (every 100 ms, up to ms) until it returns a truthy value. */
export async function waitFor(what, fn, ms = 30000) {
	const end = Date.now() + ms;
	let last;
	for (;;) {
		try {
			const v = await fn();
			if (v)
				return v;
		} catch (e) {
			last = e;
		}
		if (Date.now() > end)
			throw new Error(`${what}: not within ${ms} ms` +
			    (last ? `: ${last.message}` : ""));
		await new Promise((ok) => setTimeout(ok, 100));
	}
}
