/*
 * api/exec_req.c — an exec request checked: its JSON (argv, env over the
 * sandbox's own, cwd, user, tty, timeout, stdin...) into the request the
 * guest agent runs, for the buffered exec (commands.c) and the streamed
 * one (streams.c) alike.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "api.h"

#define EXEC_MAX_ARGS		4096
#define EXEC_RING_DEFAULT	(1024 * 1024)	/* a detached command's */

/* 1 if s is an environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
int
api_env_name_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' &&
		    s[i] <= 'z') || s[i] == '_' || (i > 0 && s[i] >= '0' &&
		    s[i] <= '9')))
			return 0;
	return i > 0 && i <= 256;
}

void
api_exec_parsed_free(struct exec_parsed *ep)
{
	size_t i;

	if (ep->env != NULL)
		for (i = 0; ep->env[i] != NULL; i++)
			free(ep->env[i]);
	free(ep->env);
	free(ep->argv);
	free(ep->in);
	memset(ep, 0, sizeof(*ep));
}

/*
 * Checks an exec request's JSON into ep (strings point into obj, which
 * must outlive it). streamed: stdin comes as frames, not in the JSON.
 * 0, or -1 after replying the error.
 */
int
api_exec_parse(struct req *r, json_t *obj, int streamed, const char *env_sb,
    struct exec_parsed *ep)
{
	struct px_exec_req *er = &ep->er;
	json_t *v, *argv_j, *env_j, *env_d = NULL;
	char err[512], buf[64];
	const char *text, *key;
	uint64_t ms;
	size_t i, n, pad;
	int rc, len;

	memset(ep, 0, sizeof(*ep));
	argv_j = json_object_get(obj, "argv");
	if (!json_is_array(argv_j) || json_array_size(argv_j) == 0 ||
	    json_array_size(argv_j) > EXEC_MAX_ARGS) {
		api_reply_error(r, 400, NULL, "argv", "must be an array of 1 to %d "
		    "strings: the command and its arguments", EXEC_MAX_ARGS);
		goto fail;
	}
	n = json_array_size(argv_j);
	if ((ep->argv = calloc(n + 1, sizeof(*ep->argv))) == NULL)
		goto oom;
	json_array_foreach(argv_j, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) !=
		    json_string_length(v) || (i == 0 &&
		    json_string_length(v) == 0)) {
			api_reply_error(r, 400, NULL, "argv", "argv[%zu] must be a "
			    "string without NUL%s", i, i == 0 ?
			    ", and not empty" : "");
			goto fail;
		}
		ep->argv[i] = (char *)json_string_value(v);
	}
	er->argv = ep->argv;
	er->argc = (int)n;
	env_j = json_object_get(obj, "env");
	/* the sandbox's env (PATCH .../ID {"env": ...}) under the
	 * command's own: the store checked it is an object of strings */
	if (env_sb != NULL && *env_sb != '\0')
		env_d = json_loads(env_sb, 0, NULL);
	if (env_j != NULL && !json_is_null(env_j) && (!json_is_object(env_j) ||
	    json_object_size(env_j) > EXEC_MAX_ARGS)) {
		api_reply_error(r, 400, NULL, "env", "must be an object of "
		    "at most %d NAME: \"value\" strings", EXEC_MAX_ARGS);
		goto fail;
	}
	if (json_is_object(env_d) && (ep->env = calloc(json_object_size(env_d) +
	    json_object_size(env_j) + 1, sizeof(*ep->env))) == NULL)
		goto oom;
	json_object_foreach(env_d, key, v) {
		if (json_object_get(env_j, key) != NULL ||
		    !api_env_name_ok(key) || !json_is_string(v))
			continue;
		if (asprintf(&ep->env[er->envc], "%s=%s", key,
		    json_string_value(v)) < 0) {
			ep->env[er->envc] = NULL;
			goto oom;
		}
		er->envc++;
	}
	if (env_j != NULL && !json_is_null(env_j)) {
		if (ep->env == NULL && (ep->env = calloc(json_object_size(env_j) +
		    1, sizeof(*ep->env))) == NULL)
			goto oom;
		json_object_foreach(env_j, key, v) {
			if (!api_env_name_ok(key) || !json_is_string(v) ||
			    strlen(json_string_value(v)) != json_string_length(v)) {
				api_reply_error(r, 400, NULL, "env", "'%s': names are "
				    "[A-Za-z_][A-Za-z0-9_]*, values strings "
				    "without NUL", api_shown(buf, sizeof(buf), key));
				goto fail;
			}
			if (asprintf(&ep->env[er->envc], "%s=%s", key,
			    json_string_value(v)) < 0) {
				ep->env[er->envc] = NULL;
				goto oom;
			}
			er->envc++;
		}
	}
	er->env = ep->env;
	if (api_string_field(r, obj, "cwd", 1, &er->cwd) < 0)
		goto fail;
	if (api_string_field(r, obj, "user", 1, &er->user) < 0)
		goto fail;
	if (er->user != NULL && (*er->user == '\0' || strlen(er->user) > 32 ||
	    strpbrk(er->user, ":\n/") != NULL)) {
		api_reply_error(r, 400, NULL, "user", "'%s': a user name or uid of "
		    "the guest's /etc/passwd", api_shown(buf, sizeof(buf),
		    er->user));
		goto fail;
	}
	v = json_object_get(obj, "tty");
	if (json_is_true(v)) {
		er->tty = 1;
	} else if (json_is_object(v)) {
		json_t *rows = json_object_get(v, "rows");
		json_t *cols = json_object_get(v, "cols");

		if (json_object_size(v) != 2 || !json_is_integer(rows) ||
		    !json_is_integer(cols) || json_integer_value(rows) < 1 ||
		    json_integer_value(rows) > 10000 ||
		    json_integer_value(cols) < 1 ||
		    json_integer_value(cols) > 10000) {
			api_reply_error(r, 400, NULL, "tty", "must be true, false, "
			    "or {\"rows\": R, \"cols\": C} (1 to 10000)");
			goto fail;
		}
		er->tty = 1;
		er->rows = (int)json_integer_value(rows);
		er->cols = (int)json_integer_value(cols);
	} else if (v != NULL && !json_is_false(v) && !json_is_null(v)) {
		api_reply_error(r, 400, NULL, "tty", "must be true, false, or "
		    "{\"rows\": R, \"cols\": C}");
		goto fail;
	}
	er->timeout_ms = EXEC_TIMEOUT_DEFAULT;
	if ((rc = api_string_field(r, obj, "timeout", 1, &text)) < 0)
		goto fail;
	if (rc == 1 && text != NULL) {
		if (px_rule_duration(text, &ms, err, sizeof(err)) < 0) {
			api_reply_error(r, 400, NULL, "timeout", "%s", err);
			goto fail;
		}
		if (ms < 1000 || ms > EXEC_TIMEOUT_MAX) {
			api_reply_error(r, 400, NULL, "timeout", "'%s': use 1s to "
			    "24h", api_shown(buf, sizeof(buf), text));
			goto fail;
		}
		er->timeout_ms = ms;
	}
	v = json_object_get(obj, "detach");
	if (v != NULL && !json_is_boolean(v) && !json_is_null(v)) {
		api_reply_error(r, 400, NULL, "detach", "must be true or false");
		goto fail;
	}
	if (json_is_true(v)) {
		json_t *ring = json_object_get(obj, "ring");

		if (streamed) {
			api_reply_error(r, 400, NULL, "detach", "a detached command "
			    "is started with a plain POST .../exec (its output "
			    "is read from .../processes/N/logs)");
			goto fail;
		}
		er->ring = EXEC_RING_DEFAULT;
		if (ring != NULL && !json_is_null(ring)) {
			if (!json_is_integer(ring) || json_integer_value(ring) <
			    1024 || json_integer_value(ring) > BA_RING_MAX) {
				api_reply_error(r, 400, NULL, "ring", "must be the "
				    "bytes of output kept, 1024 to %d",
				    BA_RING_MAX);
				goto fail;
			}
			er->ring = (uint32_t)json_integer_value(ring);
		}
		v = json_object_get(obj, "keep_awake");
		if (v != NULL && !json_is_boolean(v) && !json_is_null(v)) {
			api_reply_error(r, 400, NULL, "keep_awake", "must be true or "
			    "false");
			goto fail;
		}
		er->keep_awake = json_is_true(v);
		/* a detached command lives until it ends: no timeout unless
		 * one is given */
		if (json_object_get(obj, "timeout") == NULL)
			er->timeout_ms = 0;
	} else if (json_object_get(obj, "ring") != NULL ||
	    json_object_get(obj, "keep_awake") != NULL) {
		api_reply_error(r, 400, NULL, json_object_get(obj, "ring") != NULL ?
		    "ring" : "keep_awake", "only for a detached command "
		    "(\"detach\": true)");
		goto fail;
	}
	if ((rc = api_string_field(r, obj, "stdin", 1, &text)) < 0)
		goto fail;
	if (rc == 1 && text != NULL && er->ring != 0) {
		api_reply_error(r, 400, NULL, "stdin", "a detached command's stdin "
		    "is /dev/null");
		goto fail;
	}
	if (rc == 1 && text != NULL && streamed) {
		api_reply_error(r, 400, NULL, "stdin", "a streamed exec sends its "
		    "stdin as 'I' frames");
		goto fail;
	}
	if (rc == 1 && text != NULL && (n = strlen(text)) > 0) {
		/* EVP_DecodeBlock counts the padding as zero bytes */
		for (pad = 0; pad < 2 && pad < n && text[n - 1 - pad] == '=';
		    pad++)
			;
		if ((ep->in = malloc(n / 4 * 3 + 3)) == NULL)
			goto oom;
		if (n % 4 != 0 || (len = EVP_DecodeBlock(ep->in,
		    (const unsigned char *)text, (int)n)) < 0) {
			api_reply_error(r, 400, NULL, "stdin", "must be base64 "
			    "(RFC 4648, with padding)");
			goto fail;
		}
		er->stdin_data = ep->in;
		er->stdin_len = (size_t)len - pad;
	}
	json_decref(env_d);
	return 0;
oom:
	api_reply_error(r, 503, NULL, NULL, "out of memory");
fail:
	json_decref(env_d);
	api_exec_parsed_free(ep);
	return -1;
}
