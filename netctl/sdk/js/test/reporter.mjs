// SPDX-License-Identifier: GPL-2.0-or-later
//
// reporter.mjs — a node --test reporter for tests/integ/sdk-js.sh: one
// line a top-level test, "ok<TAB>NAME", "skip<TAB>NAME<TAB>WHY" or
// "not ok<TAB>NAME" followed by "#"-prefixed lines saying why, and the
// figures tests report as "# sdk: ...". The script numbers them into its
// own TAP.

function oneLine(s) {
	return String(s).replace(/\s+/g, " ").trim();
}

export default async function* reporter(source) {
	for await (const ev of source) {
		const d = ev.data;
		// a figure a test reports (t.diagnostic("sdk: ..."))
		if (ev.type === "test:diagnostic" && /^sdk: /.test(d.message)) {
			yield `# ${oneLine(d.message)}\n`;
			continue;
		}
		if ((ev.type !== "test:pass" && ev.type !== "test:fail") ||
		    d.nesting !== 0 || d.details?.type === "suite")
			continue;
		if (ev.type === "test:pass" && d.skip !== undefined)
			yield `skip\t${oneLine(d.name)}\t${oneLine(d.skip === true ?
			    "skipped" : d.skip)}\n`;
		else if (ev.type === "test:pass")
			yield `ok\t${oneLine(d.name)}\n`;
		else {
			const e = d.details?.error;
			const why = e?.cause?.stack ?? e?.cause ?? e?.stack ?? e;
			yield `not ok\t${oneLine(d.name)}\n` + String(why)
			    .split("\n").map((l) => `# ${l}\n`).join("");
		}
	}
}
