/*
 * cli_mcp.c — `netctl mcp`: a Model Context Protocol server on stdio so
 * coding agents can drive berth directly. JSON-RPC 2.0, one message per
 * line (the MCP stdio transport): initialize, ping, tools/list,
 * tools/call; notifications get no answer. Each tool is one control API
 * request made with netctl's own target (socket, or --url + --token), so
 * a sandbox token limits the agent exactly as it limits netctl. Tool
 * failures are results with isError (the agent reads why); protocol
 * errors are JSON-RPC errors. run_command uses the buffered exec API
 * (its output cut at MCP_OUT_MAX a stream for the agent's context);
 * read_file and write_file the streamed files API; list_files,
 * make_directory, remove_path and move_path its other routes (?list=1,
 * DELETE, /files/mkdir, /files/move); start_process, list_processes,
 * read_process_output and kill_process the detached processes (exec
 * "detach", .../processes). build_template sends a Dockerfile and the
 * files it copies as a tar it makes (POST /v1/templates/{name}/build)
 * and follows the build; template_build_status reads its lines.
 * move_sandbox moves one to another fleet host (POST .../move).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli.h"
#include "valid.h"

#include <jansson.h>

#include <openssl/evp.h>

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MCP_PROTOCOL	"2024-11-05"
#define MCP_MAX_LINE	(1024 * 1024)
#define MCP_OUT_MAX	(64 * 1024)	/* of each stream run_command returns */
#define MCP_FILE_MAX	(1024 * 1024)	/* read_file's default and most */
#define MCP_LIST_DEFAULT 1000		/* list_files' entries unless asked */
#define MCP_LIST_MAX	100000		/* berthd's most */

struct tool {
	const char *name;
	const char *description;
	const char *schema;	/* JSON Schema of the arguments */
};

#define SB "\"sandbox\":{\"type\":\"string\",\"description\":\"sandbox id" \
	" (default: the one netctl mcp was started for)\"}"
#define PORT "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}"
#define RULE "\"rule\":{\"type\":\"string\",\"description\":\"example.com, " \
	"*.example.com, 1.2.3.4 or 10.1.0.0/16, optionally :443 or " \
	":8000-8100 and /tcp or /udp\"},\"ttl\":{\"type\":\"string\"," \
	"\"description\":\"optional expiry such as 10m, 2h\"}"

static const struct tool tools[] = {
	{ "publish_port", "Publish a port of the sandbox on an HTTPS URL and "
	  "return the URL. visibility private requires the sandbox token.",
	  "{\"type\":\"object\",\"properties\":{" SB "," PORT ","
	  "\"visibility\":{\"type\":\"string\",\"enum\":[\"public\","
	  "\"private\"]},\"host_header\":{\"type\":\"string\",\"enum\":"
	  "[\"preserve\",\"upstream\"]}},\"required\":[\"port\"]}" },
	{ "unpublish_port", "Stop publishing a port of the sandbox.",
	  "{\"type\":\"object\",\"properties\":{" SB "," PORT "},"
	  "\"required\":[\"port\"]}" },
	{ "list_ports", "List the sandbox's published ports and their URLs.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "get_egress", "Show the sandbox's egress (outbound network) mode "
	  "and rules.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "allow_egress", "Allow the sandbox to reach a destination (within "
	  "the operators' global policy).",
	  "{\"type\":\"object\",\"properties\":{" SB "," RULE "},"
	  "\"required\":[\"rule\"]}" },
	{ "deny_egress", "Deny the sandbox a destination.",
	  "{\"type\":\"object\",\"properties\":{" SB "," RULE "},"
	  "\"required\":[\"rule\"]}" },
	{ "egress_log", "Recent outbound connections of the sandbox that were "
	  "denied.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "sandbox_status", "The sandbox's state, address and published ports.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "fork_sandbox", "Fork the sandbox (running, paused or suspended) into new "
	  "sandboxes (1 to 100 ids): each starts from its memory and disk as "
	  "they are now (files, running processes) with an identity of its "
	  "own and the sandbox's egress rules; returns each fork's token "
	  "(shown once). The forks are creating for a few seconds; "
	  "sandbox_status says when one runs. With checkpoint, they start "
	  "from that checkpoint of the sandbox instead.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"ids\":{\"type\":"
	  "\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
	  "\"maxItems\":100},\"checkpoint\":{\"type\":\"string\"}},"
	  "\"required\":[\"ids\"]}" },
	{ "checkpoint_sandbox", "Keep the sandbox's memory and disk as they "
	  "are now under a name (it pauses briefly and runs on); "
	  "restore_checkpoint goes back to it.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"name\":{\"type\":"
	  "\"string\"}},\"required\":[\"name\"]}" },
	{ "list_checkpoints", "List the sandbox's checkpoints with their "
	  "size on disk.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "restore_checkpoint", "Put the sandbox back to a checkpoint, in "
	  "place: files and processes as they were then; what happened since "
	  "is gone. Answers once it runs.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"name\":{\"type\":"
	  "\"string\"}},\"required\":[\"name\"]}" },
	{ "remove_checkpoint", "Remove a checkpoint of the sandbox.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"name\":{\"type\":"
	  "\"string\"}},\"required\":[\"name\"]}" },
	{ "move_sandbox", "Fleet mode: move the sandbox to another host of "
	  "the fleet (to: its host id). It is suspended, its files copied "
	  "there with its tokens, ports and egress rules, and its URL then "
	  "answers from that host; it stays here if anything fails. Answers "
	  "once the move ended.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"to\":{\"type\":"
	  "\"string\",\"description\":\"the fleet host id\"}},"
	  "\"required\":[\"to\"]}" },
	{ "pause", "Pause the sandbox (memory kept).",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "resume", "Resume a paused or suspended sandbox.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "start", "Boot a stopped or failed sandbox again from its template, "
	  "keeping its disk; answers once it runs.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "restart", "Stop the sandbox and boot it again from its template, "
	  "keeping its disk (a failed one is just started); answers once it "
	  "runs.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "run_command", "Run a command in the sandbox's guest (a Linux "
	  "machine; root by default) and return its exit code, stdout and "
	  "stderr (at most 64 KiB each; the rest is cut and said so). Give "
	  "argv, or command for a shell string (sh -c). A paused or suspended "
	  "sandbox is woken first.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"argv\":{\"type\":"
	  "\"array\",\"items\":{\"type\":\"string\"}},\"command\":{\"type\":"
	  "\"string\",\"description\":\"run with sh -c\"},\"stdin\":{\"type\":"
	  "\"string\"},\"cwd\":{\"type\":\"string\"},\"user\":{\"type\":"
	  "\"string\"},\"env\":{\"type\":\"object\",\"additionalProperties\":"
	  "{\"type\":\"string\"}},\"timeout\":{\"type\":\"string\","
	  "\"description\":\"e.g. 30s, 5m (default 10m)\"}}}" },
	{ "start_process", "Start a command in the sandbox's guest that runs "
	  "on in the background (a dev server, a watcher, a long build) and "
	  "return its process number at once; its output is kept (the last "
	  "ring_bytes, default 1 MiB) for read_process_output. It survives "
	  "pause, suspend and resume. keep_awake: the sandbox is not paused "
	  "for idleness while it runs.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"argv\":{\"type\":"
	  "\"array\",\"items\":{\"type\":\"string\"}},\"command\":{\"type\":"
	  "\"string\",\"description\":\"run with sh -c\"},\"cwd\":{\"type\":"
	  "\"string\"},\"user\":{\"type\":\"string\"},\"env\":{\"type\":"
	  "\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
	  "\"ring_bytes\":{\"type\":\"integer\",\"minimum\":1024},"
	  "\"keep_awake\":{\"type\":\"boolean\"}}}" },
	{ "list_processes", "List the sandbox's background processes (running "
	  "and ended): number, pid, state, exit code or signal, output bytes, "
	  "command.",
	  "{\"type\":\"object\",\"properties\":{" SB "}}" },
	{ "read_process_output", "Read a background process's output from "
	  "byte offset (default 0; next_offset in the answer goes on), at most "
	  "64 KiB, and its state.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"process\":{\"type\":"
	  "\"integer\",\"minimum\":1},\"offset\":{\"type\":\"integer\","
	  "\"minimum\":0}},\"required\":[\"process\"]}" },
	{ "kill_process", "Send a background process (its process group) a "
	  "signal: TERM by default, or KILL, INT, HUP, ...",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"process\":{\"type\":"
	  "\"integer\",\"minimum\":1},\"signal\":{\"type\":\"string\"}},"
	  "\"required\":[\"process\"]}" },
	{ "read_file", "Read a file of the sandbox's guest: UTF-8 text as "
	  "is, anything else base64 (the result says which). At most "
	  "max_bytes (default and most 1 MiB). offset and length read a part: "
	  "from byte offset (past the end: nothing), at most length bytes; "
	  "next_offset in the answer goes on.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"path\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"max_bytes\":{\"type\":"
	  "\"integer\",\"minimum\":1},\"offset\":{\"type\":\"integer\","
	  "\"minimum\":0},\"length\":{\"type\":\"integer\",\"minimum\":0}},"
	  "\"required\":[\"path\"]}" },
	{ "write_file", "Write a file in the sandbox's guest (replaced "
	  "whole, atomically), with an optional octal mode (default 0644).",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"path\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"content\":{\"type\":"
	  "\"string\"},\"encoding\":{\"type\":\"string\",\"enum\":"
	  "[\"utf-8\",\"base64\"]},\"mode\":{\"type\":\"string\","
	  "\"description\":\"e.g. 0755\"}},\"required\":[\"path\","
	  "\"content\"]}" },
	{ "list_files", "List a directory of the sandbox's guest, by name: "
	  "each entry's name (name_base64 when not UTF-8), type (file, dir, "
	  "link, fifo, socket, char, block, other; links not followed), size, "
	  "mode and mtime. At most limit entries (default 1000, at most "
	  "100000); truncated says the list was cut.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"path\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"limit\":{\"type\":"
	  "\"integer\",\"minimum\":1,\"maximum\":100000}},\"required\":"
	  "[\"path\"]}" },
	{ "make_directory", "Make a directory in the sandbox's guest (mode "
	  "default 0755). An existing path or a missing parent is an error; "
	  "parents makes the missing parents and takes an existing directory "
	  "as done.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"path\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"parents\":{\"type\":"
	  "\"boolean\"},\"mode\":{\"type\":\"string\",\"description\":"
	  "\"e.g. 0755\"}},\"required\":[\"path\"]}" },
	{ "remove_path", "Remove a file, a symbolic link (never what it "
	  "points to) or an empty directory in the sandbox's guest; recursive "
	  "removes a directory with everything under it.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"path\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"recursive\":{\"type\":"
	  "\"boolean\"}},\"required\":[\"path\"]}" },
	{ "move_path", "Rename or move a file or directory in the sandbox's "
	  "guest; to is the new path itself. An existing destination is an "
	  "error unless overwrite.",
	  "{\"type\":\"object\",\"properties\":{" SB ",\"from\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"to\":{\"type\":"
	  "\"string\",\"description\":\"absolute\"},\"overwrite\":{\"type\":"
	  "\"boolean\"}},\"required\":[\"from\",\"to\"]}" },
	{ "build_template", "Build a sandbox template from a Dockerfile (an "
	  "admin token's tool): the Dockerfile's text and the files it COPYs "
	  "(paths relative to the build context, UTF-8 text) go to berthd, "
	  "which builds the image in a builder sandbox and makes it a "
	  "template new sandboxes can be created from (sandbox create "
	  "--template NAME). The same Dockerfile, files and build_args built "
	  "before come from the cache at once. Waits for the build up to "
	  "wait_seconds (default 900); its progress lines, or on failure the "
	  "failing step and its output, are in the result.",
	  "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
	  "\"string\",\"description\":\"the template's name: 1-32 lower-case "
	  "letters, digits or '-'\"},\"dockerfile\":{\"type\":\"string\","
	  "\"description\":\"the Dockerfile's text\"},\"files\":{\"type\":"
	  "\"object\",\"additionalProperties\":{\"type\":\"string\"},"
	  "\"description\":\"the build context's other files: relative path "
	  "-> content\"},\"build_args\":{\"type\":\"object\","
	  "\"additionalProperties\":{\"type\":\"string\"}},\"wait_seconds\":"
	  "{\"type\":\"integer\",\"minimum\":0,\"maximum\":3600}},"
	  "\"required\":[\"name\",\"dockerfile\"]}" },
	{ "template_build_status", "A template build's state (running, ok, "
	  "failed), its reason and its progress lines from line after on.",
	  "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
	  "\"string\"},\"after\":{\"type\":\"integer\",\"minimum\":0}},"
	  "\"required\":[\"name\"]}" },
};

#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

static json_t *
tool_result(const char *text, int is_error)
{
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
	    "text", text, "isError", is_error);
}

/* Runs one API request and turns the answer into a tool result. */
static json_t *
api_result(const struct cli_target *t, const char *method,
    const char *target, json_t *body, const char *ok_text)
{
	char err[512], *text;
	json_t *doc, *res, *e;
	int status, unreachable;
	const char *msg;

	if (cli_api(t, method, target, body, &status, &doc, &unreachable, err,
	    sizeof(err)) == -1)
		return tool_result(err, 1);
	if (status < 200 || status > 299) {
		e = json_object_get(doc, "error");
		msg = json_string_value(json_object_get(e, "message"));
		snprintf(err, sizeof(err), "berthd refused (HTTP %d): %s%s%s",
		    status, json_string_value(json_object_get(e, "field")) ?
		    json_string_value(json_object_get(e, "field")) : "",
		    json_object_get(e, "field") ? ": " : "", msg ? msg : "");
		json_decref(doc);
		return tool_result(err, 1);
	}
	if (ok_text != NULL && doc == NULL)
		res = tool_result(ok_text, 0);
	else {
		text = json_dumps(doc, JSON_INDENT(1));
		res = tool_result(text ? text : ok_text ? ok_text : "done", 0);
		free(text);
	}
	json_decref(doc);
	return res;
}

/* A refusal as a tool error. */
static json_t *
refused(int status, const unsigned char *body, size_t len)
{
	json_t *doc = json_loadb((const char *)body, len, 0, NULL);
	const char *msg = json_string_value(json_object_get(json_object_get(doc,
	    "error"), "message"));
	char err[600];

	snprintf(err, sizeof(err), "berthd refused (HTTP %d): %s", status,
	    msg ? msg : "no reason given");
	json_decref(doc);
	return tool_result(err, 1);
}

/* One streamed request with a whole body (NULL: a GET): *r the answer,
 * NULL with err when berthd could not be talked to. */
static struct cli_stream *
transfer(const struct cli_target *t, const char *method, const char *target,
    const void *body, size_t len, struct cli_stream_resp **r, char *err,
    size_t errlen)
{
	struct cli_stream *s;
	struct pollfd pfd;
	int unreachable, k;

	if ((s = cli_stream_open(t, method, target, body != NULL ?
	    "application/octet-stream" : NULL, body != NULL ?
	    (long long)len : 0, &unreachable, err, errlen)) == NULL)
		return NULL;
	if (body != NULL && len > 0 && cli_stream_write(s, body, len) < 0) {
		snprintf(err, errlen, "out of memory");
		cli_stream_close(s);
		return NULL;
	}
	for (;;) {
		/* a send error may come with berthd's answer: read it */
		(void)cli_stream_flush(s, err, errlen);
		if ((k = cli_stream_recv(s, r, err, errlen)) != 0) {
			if (k < 0) {
				cli_stream_close(s);
				return NULL;
			}
			return s;
		}
		if (!cli_stream_readable(s)) {
			pfd.fd = cli_stream_fd(s);
			pfd.events = POLLIN | (cli_stream_pending(s) ? POLLOUT :
			    0);
			if (poll(&pfd, 1, (int)cli_timeout_secs * 1000) == 0) {
				snprintf(err, errlen, "berthd did not answer "
				    "within %u s", cli_timeout_secs);
				cli_stream_close(s);
				return NULL;
			}
		}
	}
}

/* Text (UTF-8) or base64 of at most max bytes, into doc[key]; how many
 * bytes it holds. Where they end a part (cut at max, or part: a range
 * whose next read goes on from there), a UTF-8 sequence split at the
 * end is left out, for the next read to start with. */
static size_t
put_bytes(json_t *doc, const char *key, const char *s, size_t len,
    size_t max, int part)
{
	char enc_key[40];
	json_t *v;
	size_t k;
	char *b;

	snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
	if (len > max) {
		part = 1;
		len = max;
		snprintf(enc_key, sizeof(enc_key), "%s_truncated", key);
		json_object_set_new(doc, enc_key, json_true());
		snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
	}
	v = json_stringn(s, len);
	/* a cut may split a UTF-8 sequence: drop its start (at most 3
	 * bytes, all of a sequence's); text that is not UTF-8 for another
	 * reason goes whole as base64 */
	for (k = 1; v == NULL && part && k <= 3 && k < len &&
	    ((unsigned char)s[len - k] & 0x80); k++)
		if ((v = json_stringn(s, len - k)) != NULL)
			len -= k;
	if (v != NULL) {
		json_object_set_new(doc, key, v);
		json_object_set_new(doc, enc_key, json_string("utf-8"));
		return len;
	}
	if ((b = malloc(4 * ((len + 2) / 3) + 1)) == NULL)
		return 0;
	EVP_EncodeBlock((unsigned char *)b, (const unsigned char *)s, (int)len);
	json_object_set_new(doc, key, json_string(b));
	json_object_set_new(doc, enc_key, json_string("base64"));
	free(b);
	return len;
}

/* A non-200 answer as the tool's error result (doc is consumed). */
static json_t *
refused_doc(int status, json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT);
	json_t *res;

	res = refused(status, (unsigned char *)(text ? text : ""),
	    text ? strlen(text) : 0);
	free(text);
	json_decref(doc);
	return res;
}

/* doc's output field key (text, or base64 when key_encoding says so)
 * into res under key, cut at MCP_OUT_MAX (part: see put_bytes); how
 * many of its bytes res holds. */
static size_t
copy_output(json_t *res, json_t *doc, const char *key, int part)
{
	const char *sv = json_string_value(json_object_get(doc, key));
	unsigned char *raw = NULL;
	char ek[32];
	size_t n;
	int rl;
	json_t *v;

	snprintf(ek, sizeof(ek), "%s_encoding", key);
	n = sv != NULL ? json_string_length(json_object_get(doc, key)) : 0;
	v = json_object_get(doc, ek);
	if (sv != NULL && json_is_string(v) && strcmp(json_string_value(v),
	    "base64") == 0 && (raw = malloc(n / 4 * 3 + 3)) != NULL &&
	    (rl = EVP_DecodeBlock(raw, (const unsigned char *)sv,
	    (int)n)) >= 0) {
		while (n > 0 && sv[n - 1] == '=' && rl > 0)
			n--, rl--;
		n = (size_t)rl;
		sv = (const char *)raw;
	}
	n = put_bytes(res, key, sv != NULL ? sv : "", n, MCP_OUT_MAX, part);
	free(raw);
	return n;
}

/* GET .../processes/N/logs: its output (cut at MCP_OUT_MAX, next_offset
 * then says where the rest goes on) and state. */
static json_t *
process_output(const struct cli_target *t, const char *target)
{
	json_t *doc, *res;
	char err[512], *text;
	int status, unreachable;
	size_t n;
	long long off;

	if (cli_api(t, "GET", target, NULL, &status, &doc, &unreachable, err,
	    sizeof(err)) == -1)
		return tool_result(err, 1);
	if (status != 200)
		return refused_doc(status, doc);
	res = json_object();
	json_object_set(res, "process", json_object_get(doc, "process"));
	json_object_set(res, "state", json_object_get(doc, "state"));
	json_object_set(res, "exit_code", json_object_get(doc, "exit_code"));
	json_object_set(res, "signal", json_object_get(doc, "signal"));
	json_object_set(res, "lost", json_object_get(doc, "lost"));
	off = (long long)json_integer_value(json_object_get(doc, "offset"));
	n = copy_output(res, doc, "output", 1);
	json_object_set_new(res, "next_offset", json_integer(off +
	    (json_int_t)n));
	json_decref(doc);
	text = json_dumps(res, JSON_COMPACT);
	json_decref(res);
	res = tool_result(text != NULL ? text : "{}", 0);
	free(text);
	return res;
}

static json_t *
run_command(const struct cli_target *t, const char *sb, json_t *args)
{
	json_t *argv = json_object_get(args, "argv"), *body, *doc, *res, *v;
	const char *cmd = json_string_value(json_object_get(args, "command"));
	const char *in = json_string_value(json_object_get(args, "stdin"));
	const char *keys[] = { "cwd", "user", "timeout", NULL };
	char target[256], err[512], *text, *b64;
	int status, unreachable, i;
	size_t n;

	if ((argv == NULL) == (cmd == NULL))
		return tool_result("give argv (an array of strings) or command "
		    "(a shell string), one of them", 1);
	body = json_object();
	if (cmd != NULL)
		json_object_set_new(body, "argv", json_pack("[s, s, s]", "sh",
		    "-c", cmd));
	else
		json_object_set(body, "argv", argv);
	for (i = 0; keys[i] != NULL; i++)
		if ((v = json_object_get(args, keys[i])) != NULL)
			json_object_set(body, keys[i], v);
	if ((v = json_object_get(args, "env")) != NULL)
		json_object_set(body, "env", v);
	if (in != NULL && (n = strlen(in)) > 0) {
		if (n > 48 * 1024) {
			json_decref(body);
			return tool_result("stdin: at most 48 KiB", 1);
		}
		if ((b64 = malloc(4 * ((n + 2) / 3) + 1)) != NULL) {
			EVP_EncodeBlock((unsigned char *)b64,
			    (const unsigned char *)in, (int)n);
			json_object_set_new(body, "stdin", json_string(b64));
			free(b64);
		}
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", sb);
	cli_timeout_secs = 24 * 3600 + 300;	/* the command's own bounds it */
	if (cli_api(t, "POST", target, body, &status, &doc, &unreachable, err,
	    sizeof(err)) == -1) {
		json_decref(body);
		return tool_result(err, 1);
	}
	json_decref(body);
	if (status != 200)
		return refused_doc(status, doc);
	/* the answer, its output cut to MCP_OUT_MAX a stream */
	res = json_object();
	json_object_set(res, "exit_code", json_object_get(doc, "exit_code"));
	json_object_set(res, "signal", json_object_get(doc, "signal"));
	json_object_set(res, "timed_out", json_object_get(doc, "timed_out"));
	json_object_set(res, "wake_ms", json_object_get(doc, "wake_ms"));
	copy_output(res, doc, "stdout", 0);
	copy_output(res, doc, "stderr", 0);
	if (json_is_true(json_object_get(doc, "truncated")))
		json_object_set_new(res, "truncated", json_true());
	json_decref(doc);
	text = json_dumps(res, JSON_INDENT(1));
	json_decref(res);
	res = tool_result(text ? text : "{}", 0);
	free(text);
	return res;
}

/*
 * read_file: GET .../files, whole or (offset, length) a range. A range
 * asks berthd for no more than it returns (max_bytes, and one more to
 * know the range went on): a large file is not read all for a part.
 */
static json_t *
read_file(const struct cli_target *t, const char *sb, const char *path,
    const char *epath, json_t *args)
{
	json_t *offv = json_object_get(args, "offset");
	json_t *lenv = json_object_get(args, "length");
	json_t *maxv = json_object_get(args, "max_bytes");
	struct cli_stream_resp *r;
	struct cli_stream *s;
	char target[9000], range[80] = "", err[512], *text;
	json_int_t max = MCP_FILE_MAX, off = 0, want = -1, ask = 0;
	json_t *doc, *res;
	size_t got, held;
	int ranged = offv != NULL || lenv != NULL;

	if (json_is_integer(maxv))
		max = json_integer_value(maxv);
	if (max < 1 || max > MCP_FILE_MAX)
		max = MCP_FILE_MAX;
	if (offv != NULL && (!json_is_integer(offv) ||
	    (off = json_integer_value(offv)) < 0))
		return tool_result("offset: a byte offset, 0 or more", 1);
	if (lenv != NULL && (!json_is_integer(lenv) ||
	    (want = json_integer_value(lenv)) < 0))
		return tool_result("length: a number of bytes, 0 or more", 1);
	if (ranged) {
		/* berthd reads length=0 as "to the end": ask 1, keep 0 */
		ask = want >= 0 && want <= max ? want : max + 1;
		snprintf(range, sizeof(range), "&offset=%lld&length=%lld",
		    (long long)off, (long long)(ask > 0 ? ask : 1));
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files?path=%s%s",
	    sb, epath, range);
	if ((s = transfer(t, "GET", target, NULL, 0, &r, err,
	    sizeof(err))) == NULL)
		return tool_result(err, 1);
	if (r->status != 200) {
		res = refused(r->status, r->body, r->len);
		cli_stream_close(s);
		return res;
	}
	got = r->len;
	if (want >= 0 && got > (size_t)want)
		got = (size_t)want;
	if (!ranged) {
		doc = json_pack("{s:s, s:I}", "path", path, "size",
		    (json_int_t)got);
		held = put_bytes(doc, "content", (const char *)r->body, got,
		    (size_t)max, 0);
		if (held < got)
			json_object_set_new(doc, "next_offset",
			    json_integer((json_int_t)held));
	} else {
		doc = json_pack("{s:s, s:I}", "path", path, "offset",
		    (json_int_t)off);
		held = put_bytes(doc, "content", (const char *)r->body, got,
		    (size_t)max, 1);
		json_object_set_new(doc, "length", json_integer(
		    (json_int_t)held));
		json_object_set_new(doc, "next_offset", json_integer(off +
		    (json_int_t)held));
		/* fewer bytes than asked: the file ends there */
		json_object_set_new(doc, "end_of_file", json_boolean(
		    r->len < (size_t)(ask > 0 ? ask : 1)));
	}
	cli_stream_close(s);
	text = json_dumps(doc, JSON_INDENT(1));
	json_decref(doc);
	res = tool_result(text ? text : "{}", 0);
	free(text);
	return res;
}

static json_t *
file_tool(const struct cli_target *t, const char *sb, const char *name,
    json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	const char *content, *enc, *mode;
	struct cli_stream_resp *r;
	struct cli_stream *s;
	char target[9000], epath[8200], err[512], *text;
	unsigned char *raw = NULL;
	json_t *res;
	size_t len;
	int rl;

	if (path == NULL || path[0] != '/' || strlen(path) > 4096)
		return tool_result("path: an absolute path in the guest", 1);
	cli_pct_path(path, epath, sizeof(epath));
	cli_timeout_secs = 600;	/* a wake, then the transfer */
	if (strcmp(name, "read_file") == 0)
		return read_file(t, sb, path, epath, args);
	content = json_string_value(json_object_get(args, "content"));
	enc = json_string_value(json_object_get(args, "encoding"));
	mode = json_string_value(json_object_get(args, "mode"));
	if (content == NULL)
		return tool_result("content is required", 1);
	len = json_string_length(json_object_get(args, "content"));
	if (enc != NULL && strcmp(enc, "base64") == 0) {
		if ((raw = malloc(len / 4 * 3 + 3)) == NULL ||
		    len % 4 != 0 || (rl = EVP_DecodeBlock(raw,
		    (const unsigned char *)content, (int)len)) < 0) {
			free(raw);
			return tool_result("content: not base64", 1);
		}
		while (len > 0 && content[len - 1] == '=' && rl > 0)
			len--, rl--;
		content = (const char *)raw;
		len = (size_t)rl;
	} else if (enc != NULL && strcmp(enc, "utf-8") != 0) {
		return tool_result("encoding: utf-8 or base64", 1);
	}
	if (mode != NULL && (strlen(mode) > 5 || strspn(mode, "01234567") !=
	    strlen(mode) || *mode == '\0')) {
		free(raw);
		return tool_result("mode: an octal mode such as 0644", 1);
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files?path=%s%s%s",
	    sb, epath, mode ? "&mode=" : "", mode ? mode : "");
	s = transfer(t, "PUT", target, content, len, &r, err, sizeof(err));
	free(raw);
	if (s == NULL)
		return tool_result(err, 1);
	if (r->status != 200)
		res = refused(r->status, r->body, r->len);
	else {
		text = strndup((const char *)r->body, r->len);
		res = tool_result(text ? text : "written", 0);
		free(text);
	}
	cli_stream_close(s);
	return res;
}

/* A boolean argument: *v 0 or 1; -1 when it is there and not one. */
static int
bool_arg(json_t *args, const char *key, int *v)
{
	json_t *b = json_object_get(args, key);

	if (b != NULL && !json_is_boolean(b))
		return -1;
	*v = json_is_true(b);
	return 0;
}

/* list_files, make_directory, remove_path, move_path: one request each
 * of the files API, its JSON answer the result. */
static json_t *
fs_tool(const struct cli_target *t, const char *sb, const char *name,
    json_t *args)
{
	int mv = strcmp(name, "move_path") == 0;
	const char *path = json_string_value(json_object_get(args, mv ?
	    "from" : "path"));
	const char *to = json_string_value(json_object_get(args, "to"));
	char target[9000], epath[8200], msg[128];
	json_t *body, *lim, *mode, *res;
	json_int_t limit = MCP_LIST_DEFAULT;
	int flag;

	if (path == NULL || path[0] != '/' || strlen(path) > 4096) {
		snprintf(msg, sizeof(msg), "%s: an absolute path in the guest",
		    mv ? "from" : "path");
		return tool_result(msg, 1);
	}
	if (mv && (to == NULL || to[0] != '/' || strlen(to) > 4096))
		return tool_result("to: an absolute path in the guest", 1);
	cli_pct_path(path, epath, sizeof(epath));
	cli_timeout_secs = 900;	/* a wake, then the agent's 10 min */
	if (strcmp(name, "list_files") == 0) {
		if ((lim = json_object_get(args, "limit")) != NULL &&
		    (!json_is_integer(lim) || (limit = json_integer_value(lim)) <
		    1 || limit > MCP_LIST_MAX))
			return tool_result("limit: 1 to 100000 entries", 1);
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/files?path=%s"
		    "&list=1&limit=%lld", sb, epath, (long long)limit);
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "remove_path") == 0) {
		if (bool_arg(args, "recursive", &flag) < 0)
			return tool_result("recursive: true or false", 1);
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/files?path=%s"
		    "%s", sb, epath, flag ? "&recursive=1" : "");
		return api_result(t, "DELETE", target, NULL, "removed");
	}
	if (bool_arg(args, mv ? "overwrite" : "parents", &flag) < 0)
		return tool_result(mv ? "overwrite: true or false" :
		    "parents: true or false", 1);
	if (mv)
		body = json_pack("{s:s, s:s, s:b}", "from", path, "to", to,
		    "overwrite", flag);
	else {
		body = json_pack("{s:s, s:b}", "path", path, "parents", flag);
		if ((mode = json_object_get(args, "mode")) != NULL) {
			if (!json_is_string(mode)) {
				json_decref(body);
				return tool_result("mode: an octal mode as a "
				    "string, such as \"0755\"", 1);
			}
			json_object_set(body, "mode", mode);
		}
	}
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files/%s", sb,
	    mv ? "move" : "mkdir");
	res = api_result(t, "POST", target, body, NULL);
	json_decref(body);
	return res;
}

/* ---- templates (build_template, template_build_status) ---- */

#define TAR_MAX		(64 * 1024 * 1024)	/* what a build context in
						 * tool arguments comes to */
#define TPL_LINES_MAX	200			/* of a build, in its result */

/* One regular file (mode 0644, owned by root) into the tar in *buf. 0,
 * or -1 with err. */
static int
tar_add(unsigned char **buf, size_t *len, const char *path, const char *data,
    size_t size, char *err, size_t errlen)
{
	unsigned char *h, *nb;
	size_t need = 512 + (size + 511) / 512 * 512, i;
	unsigned sum = 0;
	const char *c;

	if (path[0] == '\0' || path[0] == '/' || strlen(path) > 99 ||
	    strcmp(path, "..") == 0 || strncmp(path, "../", 3) == 0 ||
	    strstr(path, "/../") != NULL || (strlen(path) >= 3 &&
	    strcmp(path + strlen(path) - 3, "/..") == 0)) {
		snprintf(err, errlen, "files: '%.100s' is not a path in the "
		    "context (relative, no '..', at most 99 bytes)", path);
		return -1;
	}
	for (c = path; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20) {
			snprintf(err, errlen, "files: a path with a control "
			    "character");
			return -1;
		}
	if (*len + need + 1024 > TAR_MAX) {
		snprintf(err, errlen, "the build context is over %d MiB",
		    TAR_MAX >> 20);
		return -1;
	}
	if ((nb = realloc(*buf, *len + need)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*buf = nb;
	h = nb + *len;
	memset(h, 0, need);
	memcpy(h, path, strlen(path));
	memcpy(h + 100, "0000644", 7);
	memcpy(h + 108, "0000000", 7);
	memcpy(h + 116, "0000000", 7);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	/* no time: the same arguments make the same tar, which berthd's
	 * cache knows */
	memcpy(h + 136, "00000000000", 11);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	memcpy(h + 512, data, size);
	*len += need;
	return 0;
}

/* build_template's progress lines and end into one text. */
static void
tpl_lines(json_t *doc, char **text, size_t *len, size_t *n)
{
	json_t *l;
	size_t i, k;
	const char *s;
	char *nt;

	json_array_foreach(json_object_get(doc, "lines"), i, l) {
		if ((s = json_string_value(l)) == NULL)
			continue;
		k = strlen(s);
		if ((nt = realloc(*text, *len + k + 2)) == NULL)
			return;
		*text = nt;
		memcpy(*text + *len, s, k);
		(*text)[*len + k] = '\n';
		*len += k + 1;
		(*text)[*len] = '\0';
		/* the first lines go once there are too many */
		if (++*n > TPL_LINES_MAX && (nt = strchr(*text, '\n')) != NULL) {
			k = (size_t)(nt + 1 - *text);
			memmove(*text, nt + 1, *len - k + 1);
			*len -= k;
			(*n)--;
		}
	}
}

static json_t *
build_template(const struct cli_target *t, json_t *args)
{
	const char *name = json_string_value(json_object_get(args, "name"));
	const char *df = json_string_value(json_object_get(args,
	    "dockerfile")), *k, *st;
	json_t *files = json_object_get(args, "files"), *bargs =
	    json_object_get(args, "build_args"), *v, *doc = NULL, *res;
	json_t *wv = json_object_get(args, "wait_seconds");
	char target[8192], enc[1200], err[600], *text = NULL, *kv;
	unsigned char *tar = NULL;
	size_t tlen = 0, tl = 0, nl = 0;
	struct cli_stream_resp *r = NULL;
	struct cli_stream *s;
	long long waitfor = 900, next = 0;
	time_t end;
	int status, unreachable;

	if (name == NULL || df == NULL)
		return tool_result("name and dockerfile are required", 1);
	if (!px_valid_sandbox_id(name, strlen(name)) || strlen(name) > 32)
		return tool_result("name: 1-32 lower-case letters, digits or "
		    "'-', starting with a letter or digit", 1);
	if (wv != NULL && (!json_is_integer(wv) || json_integer_value(wv) < 0 ||
	    json_integer_value(wv) > 3600))
		return tool_result("wait_seconds: an integer from 0 to 3600", 1);
	if (wv != NULL)
		waitfor = json_integer_value(wv);
	if ((files != NULL && !json_is_object(files)) ||
	    (bargs != NULL && !json_is_object(bargs)))
		return tool_result("files and build_args are objects (path -> "
		    "content, name -> value)", 1);
	if (tar_add(&tar, &tlen, "Dockerfile", df, strlen(df), err,
	    sizeof(err)) < 0)
		goto fail;
	json_object_foreach(files, k, v) {
		if (!json_is_string(v)) {
			snprintf(err, sizeof(err), "files: '%.100s': its "
			    "content is a string", k);
			goto fail;
		}
		if (strcmp(k, "Dockerfile") == 0) {
			snprintf(err, sizeof(err), "files: the Dockerfile is "
			    "the dockerfile argument");
			goto fail;
		}
		if (tar_add(&tar, &tlen, k, json_string_value(v),
		    json_string_length(v), err, sizeof(err)) < 0)
			goto fail;
	}
	if ((kv = realloc(tar, tlen + 1024)) == NULL) {	/* the end: two zero blocks */
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	tar = (unsigned char *)kv;
	memset(tar + tlen, 0, 1024);
	tlen += 1024;
	snprintf(target, sizeof(target), "/v1/templates/%s/build?from=dockerfile",
	    name);
	json_object_foreach(bargs, k, v) {
		if (!json_is_string(v) || k[0] == '\0' || strchr(k, '=') != NULL ||
		    strlen(k) + json_string_length(v) > 1000) {
			snprintf(err, sizeof(err), "build_args: '%.100s': a name "
			    "without '=' and a string value", k);
			goto fail;
		}
		if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0) {
			snprintf(err, sizeof(err), "out of memory");
			goto fail;
		}
		cli_pct_path(kv, enc, sizeof(enc));
		free(kv);
		if (strlen(target) + strlen(enc) + 12 >= sizeof(target)) {
			snprintf(err, sizeof(err), "build_args: too many");
			goto fail;
		}
		snprintf(target + strlen(target), sizeof(target) -
		    strlen(target), "&build_arg=%s", enc);
	}
	cli_timeout_secs = cli_timeout_secs < 600 ? 600 : cli_timeout_secs;
	if ((s = transfer(t, "POST", target, tar, tlen, &r, err,
	    sizeof(err))) == NULL)
		goto fail;
	free(tar);
	tar = NULL;
	if (r->status != 202) {
		res = refused(r->status, r->body, r->len);
		cli_stream_close(s);
		return res;
	}
	doc = json_loadb((const char *)r->body, r->len, 0, NULL);
	cli_stream_close(s);
	snprintf(target, sizeof(target), "/v1/templates/%s/build", name);
	end = time(NULL) + (time_t)waitfor;
	for (;;) {
		if (doc == NULL) {
			snprintf(err, sizeof(err), "berthd's answer is not JSON");
			goto fail;
		}
		tpl_lines(doc, &text, &tl, &nl);
		next = json_integer_value(json_object_get(doc, "next"));
		st = json_string_value(json_object_get(doc, "state"));
		if (st == NULL || strcmp(st, "running") != 0 ||
		    time(NULL) >= end)
			break;
		json_decref(doc);
		doc = NULL;
		sleep(1);
		snprintf(enc, sizeof(enc), "%s?after=%lld", target, next);
		if (cli_api(t, "GET", enc, NULL, &status, &doc, &unreachable,
		    err, sizeof(err)) == -1)
			goto fail;
	}
	if (st != NULL && strcmp(st, "ok") == 0)
		snprintf(err, sizeof(err), "template %s built: %s (sandbox "
		    "create --template %s)\n", name, json_string_value(
		    json_object_get(doc, "dir")), name);
	else if (st != NULL && strcmp(st, "running") == 0)
		snprintf(err, sizeof(err), "template %s: still building after "
		    "%lld s (template_build_status with after=%lld for what "
		    "follows)\n", name, waitfor, next);
	else
		snprintf(err, sizeof(err), "template %s: build failed: %s\n",
		    name, json_string_value(json_object_get(doc, "reason")));
	if (asprintf(&kv, "%s%s", err, text != NULL ? text : "") < 0)
		kv = NULL;
	res = tool_result(kv != NULL ? kv : err, st == NULL ||
	    strcmp(st, "failed") == 0);
	free(kv);
	free(text);
	json_decref(doc);
	return res;
fail:
	free(tar);
	free(text);
	json_decref(doc);
	return tool_result(err, 1);
}

static json_t *
call_tool(const struct cli_target *t, const char *def_sb, const char *name,
    json_t *args)
{
	const char *sb = json_string_value(json_object_get(args, "sandbox"));
	json_t *portv = json_object_get(args, "port"), *body, *res, *v2;
	char target[1024], msg[256], enc[800];
	const char *rule, *v;
	long long port = 0;

	/* templates are no sandbox's */
	if (strcmp(name, "build_template") == 0)
		return build_template(t, args);
	if (strcmp(name, "template_build_status") == 0) {
		json_t *av = json_object_get(args, "after");

		v = json_string_value(json_object_get(args, "name"));
		if (v == NULL || !px_valid_sandbox_id(v, strlen(v)) ||
		    strlen(v) > 32)
			return tool_result("name: a template name", 1);
		if (av != NULL && (!json_is_integer(av) ||
		    json_integer_value(av) < 0))
			return tool_result("after: a line number", 1);
		snprintf(target, sizeof(target), "/v1/templates/%s/build"
		    "?after=%lld", v, av != NULL ? (long long)
		    json_integer_value(av) : 0LL);
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (sb == NULL)
		sb = def_sb;
	if (sb == NULL)
		return tool_result("no sandbox: pass \"sandbox\" (or start "
		    "netctl mcp --sandbox <id>)", 1);
	if (!px_valid_sandbox_id(sb, strlen(sb)))
		return tool_result("not a valid sandbox id", 1);
	if (portv != NULL) {
		port = json_integer_value(portv);
		if (!json_is_integer(portv) || port < 1 || port > 65535)
			return tool_result("port must be an integer from 1 to "
			    "65535", 1);
	}
	if (strcmp(name, "publish_port") == 0) {
		if (portv == NULL)
			return tool_result("port is required", 1);
		body = json_object();
		if ((v = json_string_value(json_object_get(args,
		    "visibility"))) != NULL)
			json_object_set_new(body, "visibility", json_string(v));
		if ((v = json_string_value(json_object_get(args,
		    "host_header"))) != NULL)
			json_object_set_new(body, "host_header", json_string(v));
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%lld",
		    sb, port);
		res = api_result(t, "PUT", target, body, NULL);
		json_decref(body);
		return res;
	}
	if (strcmp(name, "unpublish_port") == 0) {
		if (portv == NULL)
			return tool_result("port is required", 1);
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%lld",
		    sb, port);
		snprintf(msg, sizeof(msg), "port %lld of %s unpublished", port,
		    sb);
		return api_result(t, "DELETE", target, NULL, msg);
	}
	if (strcmp(name, "list_ports") == 0) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports", sb);
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "get_egress") == 0 || strcmp(name, "egress_log") == 0) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress%s", sb,
		    name[0] == 'e' ? "/log" : "");
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "allow_egress") == 0 ||
	    strcmp(name, "deny_egress") == 0) {
		if ((rule = json_string_value(json_object_get(args, "rule"))) ==
		    NULL)
			return tool_result("rule is required", 1);
		body = json_pack("{s:s, s:s}", "action", name[0] == 'a' ?
		    "allow" : "deny", "rule", rule);
		if ((v = json_string_value(json_object_get(args, "ttl"))) != NULL)
			json_object_set_new(body, "ttl", json_string(v));
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/egress", sb);
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		(void)enc;
		return res;
	}
	if (strcmp(name, "fork_sandbox") == 0) {
		json_t *ids = json_object_get(args, "ids");

		if (!json_is_array(ids))
			return tool_result("ids is required: an array of new "
			    "sandbox ids", 1);
		body = json_pack("{s:O}", "ids", ids);
		if ((v = json_string_value(json_object_get(args,
		    "checkpoint"))) != NULL)
			json_object_set_new(body, "checkpoint", json_string(v));
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/fork", sb);
		cli_timeout_secs = 600;
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		return res;
	}
	if (strcmp(name, "checkpoint_sandbox") == 0 ||
	    strcmp(name, "restore_checkpoint") == 0 ||
	    strcmp(name, "remove_checkpoint") == 0) {
		if ((v = json_string_value(json_object_get(args, "name"))) ==
		    NULL)
			return tool_result("name is required: a checkpoint "
			    "name", 1);
		cli_pct_encode(v, "-._", enc, sizeof(enc));
		cli_timeout_secs = 600;
		if (name[1] == 'e' && name[2] == 'm') {	/* remove_ */
			snprintf(target, sizeof(target),
			    "/v1/sandboxes/%s/checkpoints/%s", sb, enc);
			return api_result(t, "DELETE", target, NULL, NULL);
		}
		body = json_pack("{s:s}", name[0] == 'c' ? "name" : "checkpoint",
		    v);
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/%s", sb,
		    name[0] == 'c' ? "checkpoints" : "restore");
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		return res;
	}
	if (strcmp(name, "list_checkpoints") == 0) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/checkpoints",
		    sb);
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "sandbox_status") == 0) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s", sb);
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "move_sandbox") == 0) {
		const char *to = json_string_value(json_object_get(args, "to"));

		if (to == NULL || to[0] == '\0')
			return tool_result("to: the fleet host id to move the "
			    "sandbox to", 1);
		cli_timeout_secs = 600;	/* its files cross the network */
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/move", sb);
		body = json_pack("{s:s}", "to", to);
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		return res;
	}
	if (strcmp(name, "pause") == 0 || strcmp(name, "resume") == 0 ||
	    strcmp(name, "start") == 0 || strcmp(name, "restart") == 0) {
		/* start, restart and a resume from disk answer once the
		 * guest runs: seconds to minutes */
		if (strcmp(name, "pause") != 0)
			cli_timeout_secs = 600;
		cli_pct_encode(name, "-._", enc, sizeof(enc));
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/%s", sb, enc);
		body = json_object();
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		return res;
	}
	if (strcmp(name, "run_command") == 0)
		return run_command(t, sb, args);
	if (strcmp(name, "start_process") == 0) {
		json_t *argv = json_object_get(args, "argv");
		const char *cmd = json_string_value(json_object_get(args,
		    "command"));
		const char *keys[] = { "cwd", "user", "env", NULL };
		int i;

		if ((argv == NULL) == (cmd == NULL))
			return tool_result("give argv (an array of strings) or "
			    "command (a shell string), one of them", 1);
		body = json_pack("{s:b}", "detach", 1);
		if (cmd != NULL)
			json_object_set_new(body, "argv", json_pack("[s, s, s]",
			    "sh", "-c", cmd));
		else
			json_object_set(body, "argv", argv);
		for (i = 0; keys[i] != NULL; i++)
			if ((v2 = json_object_get(args, keys[i])) != NULL)
				json_object_set(body, keys[i], v2);
		if ((v2 = json_object_get(args, "ring_bytes")) != NULL)
			json_object_set(body, "ring", v2);
		if (json_is_true(json_object_get(args, "keep_awake")))
			json_object_set_new(body, "keep_awake", json_true());
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", sb);
		cli_timeout_secs = 600;		/* a wake at most */
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		return res;
	}
	if (strcmp(name, "list_processes") == 0) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes",
		    sb);
		cli_timeout_secs = 600;
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "read_process_output") == 0 ||
	    strcmp(name, "kill_process") == 0) {
		json_t *pj = json_object_get(args, "process");
		json_t *oj = json_object_get(args, "offset");

		if (!json_is_integer(pj) || json_integer_value(pj) < 1 ||
		    json_integer_value(pj) > 4294967295LL)
			return tool_result("process: the number start_process "
			    "or list_processes gave", 1);
		if (oj != NULL && (!json_is_integer(oj) ||
		    json_integer_value(oj) < 0))
			return tool_result("offset: a byte offset, 0 or more", 1);
		cli_timeout_secs = 600;
		if (name[0] == 'k') {
			snprintf(target, sizeof(target), "/v1/sandboxes/%s/"
			    "processes/%lld/kill", sb, (long long)
			    json_integer_value(pj));
			body = json_object();
			if ((v2 = json_object_get(args, "signal")) != NULL)
				json_object_set(body, "signal", v2);
			res = api_result(t, "POST", target, body, NULL);
			json_decref(body);
			return res;
		}
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/processes/"
		    "%lld/logs?offset=%lld", sb, (long long)json_integer_value(pj),
		    oj != NULL ? (long long)json_integer_value(oj) : 0LL);
		return process_output(t, target);
	}
	if (strcmp(name, "read_file") == 0 || strcmp(name, "write_file") == 0)
		return file_tool(t, sb, name, args);
	if (strcmp(name, "list_files") == 0 ||
	    strcmp(name, "make_directory") == 0 ||
	    strcmp(name, "remove_path") == 0 || strcmp(name, "move_path") == 0)
		return fs_tool(t, sb, name, args);
	snprintf(msg, sizeof(msg), "unknown tool '%s'", name);
	return tool_result(msg, 1);
}

static json_t *
rpc_error(json_t *id, int code, const char *msg)
{
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	    id ? id : json_null(), "error", "code", code, "message", msg);
}

static json_t *
rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	    "result", result);
}

/* One message; returns the answer or NULL for a notification. */
static json_t *
handle(const struct cli_target *t, const char *def_sb, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *params, *list, *schema;
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *name, *ver;
	size_t i;

	if (!json_is_object(msg) || method == NULL)
		return rpc_error(id, -32600, "invalid request");
	if (id == NULL)
		return NULL;	/* notifications/initialized and the like */
	params = json_object_get(msg, "params");
	if (strcmp(method, "initialize") == 0) {
		ver = json_string_value(json_object_get(params,
		    "protocolVersion"));
		return rpc_result(id, json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}, "
		    "s:s}", "protocolVersion", ver ? ver : MCP_PROTOCOL,
		    "capabilities", "tools", "serverInfo", "name", "berth",
		    "version", PACKAGE_VERSION, "instructions", "berth runs "
		    "commands and moves files in this sandbox's guest (a Linux "
		    "microVM), publishes its ports on HTTPS URLs and controls "
		    "where it may connect to."));
	}
	if (strcmp(method, "ping") == 0)
		return rpc_result(id, json_object());
	if (strcmp(method, "tools/list") == 0) {
		list = json_array();
		for (i = 0; i < NTOOLS; i++) {
			schema = json_loads(tools[i].schema, 0, NULL);
			json_array_append_new(list, json_pack("{s:s, s:s, s:o}",
			    "name", tools[i].name, "description",
			    tools[i].description, "inputSchema",
			    schema ? schema : json_object()));
		}
		return rpc_result(id, json_pack("{s:o}", "tools", list));
	}
	if (strcmp(method, "tools/call") == 0) {
		name = json_string_value(json_object_get(params, "name"));
		if (name == NULL)
			return rpc_error(id, -32602, "params.name is required");
		for (i = 0; i < NTOOLS; i++)
			if (strcmp(tools[i].name, name) == 0)
				break;
		if (i == NTOOLS)
			return rpc_error(id, -32602, "unknown tool");
		return rpc_result(id, call_tool(t, def_sb, name,
		    json_object_get(params, "arguments")));
	}
	return rpc_error(id, -32601, "method not found");
}

int
cli_mcp_serve(const struct cli_target *t, const char *def_sb)
{
	char *line = NULL, *out;
	size_t cap = 0;
	ssize_t n;
	json_t *msg, *ans;
	json_error_t jerr;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((n = getline(&line, &cap, stdin)) != -1) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		if (n > MCP_MAX_LINE)
			ans = rpc_error(NULL, -32600, "message too large");
		else if ((msg = json_loadb(line, (size_t)n, 0, &jerr)) == NULL)
			ans = rpc_error(NULL, -32700, "parse error");
		else {
			ans = handle(t, def_sb, msg);
			json_decref(msg);
		}
		if (ans == NULL)
			continue;
		out = json_dumps(ans, JSON_COMPACT);
		json_decref(ans);
		if (out != NULL) {
			fputs(out, stdout);
			fputc('\n', stdout);
			free(out);
		}
		fflush(stdout);
	}
	free(line);
	return 0;
}
