// SPDX-License-Identifier: GPL-2.0-or-later
//
// localhost.cjs — preloaded (node --require) where the README's example
// runs in tests/integ/sdk-js.sh: *.localhost names resolve to 127.0.0.1
// (RFC 6761), as curl and browsers have them and glibc does not, so that
// fetch reaches berthd's https://PORT-ID.berth.localhost:N/ URLs.

const dns = require("node:dns");
const lookup = dns.lookup;

dns.lookup = function (host, opts, cb) {
	if (typeof opts === "function") {
		cb = opts;
		opts = {};
	}
	if (typeof host === "string" && /\.localhost$/i.test(host)) {
		const all = typeof opts === "object" && opts !== null && opts.all;
		process.nextTick(() => all ?
		    cb(null, [{ address: "127.0.0.1", family: 4 }]) :
		    cb(null, "127.0.0.1", 4));
		return;
	}
	return lookup.call(this, host, opts, cb);
};
