/*
 * cli_mcp.c — `netctl mcp`: a Model Context Protocol server on stdio so
 * coding agents can drive berth directly. JSON-RPC 2.0, one message per
 * line (the MCP stdio transport): initialize, ping, tools/list,
 * tools/call; notifications get no answer. Each tool is one control API
 * request made with netctl's own target (socket, or --url + --token), so
 * a sandbox token limits the agent exactly as it limits netctl. Tool
 * failures are results with isError (the agent reads why); protocol
 * errors are JSON-RPC errors.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "cli.h"
#include "valid.h"

#include <jansson.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MCP_PROTOCOL	"2024-11-05"
#define MCP_MAX_LINE	(1024 * 1024)

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
};

#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

static json_t *
tool_result(const char *text, int is_error)
{
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
	    "text", text, "isError", is_error);
}

/* Percent-encodes s into buf for a path segment. */
static void
encode(const char *s, char *buf, size_t size)
{
	size_t k = 0;

	for (; *s != '\0' && k + 4 < size; s++) {
		unsigned char ch = (unsigned char)*s;

		if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_')
			buf[k++] = (char)ch;
		else
			k += (size_t)snprintf(buf + k, 4, "%%%02X", ch);
	}
	buf[k] = '\0';
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

static json_t *
call_tool(const struct cli_target *t, const char *def_sb, const char *name,
    json_t *args)
{
	const char *sb = json_string_value(json_object_get(args, "sandbox"));
	json_t *portv = json_object_get(args, "port"), *body, *res;
	char target[1024], msg[256], enc[800];
	const char *rule, *v;
	long long port = 0;

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
	if (strcmp(name, "sandbox_status") == 0) {
		snprintf(target, sizeof(target), "/v1/sandboxes/%s", sb);
		return api_result(t, "GET", target, NULL, NULL);
	}
	if (strcmp(name, "pause") == 0 || strcmp(name, "resume") == 0 ||
	    strcmp(name, "start") == 0 || strcmp(name, "restart") == 0) {
		/* start, restart and a resume from disk answer once the
		 * guest runs: seconds to minutes */
		if (strcmp(name, "pause") != 0)
			cli_timeout_secs = 600;
		encode(name, enc, sizeof(enc));
		snprintf(target, sizeof(target), "/v1/sandboxes/%s/%s", sb, enc);
		body = json_object();
		res = api_result(t, "POST", target, body, NULL);
		json_decref(body);
		return res;
	}
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
		    "version", PACKAGE_VERSION, "instructions", "berth publishes "
		    "this sandbox's ports on HTTPS URLs and controls where it "
		    "may connect to."));
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
