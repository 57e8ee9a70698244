/*
 * kv.c — sandbox.conf's lines, written so that no value can add a key,
 * and text from a VMM made safe to keep. A VMM is not trusted: what it
 * says (a QMP SHUTDOWN reason, an error) ends up in this file, which the
 * next berthd reads to adopt the VM (its tap, its address, its kernel),
 * and in logs and events. So every value is escaped (backslash, and
 * \n, \r, \t, \xHH for the other control bytes), reading undoes it, and
 * a file with a key twice, a line longer than any value can be, or a
 * broken escape is refused as a whole.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define KV_LINE_MAX	(4 * PATH_MAX + 64)	/* a path, all escaped */
#define KV_KEYS_MAX	64

int
vmm_kv_write(FILE *f, const char *key, const char *val)
{
	const unsigned char *p;

	if (fprintf(f, "%s=", key) < 0)
		return -1;
	for (p = (const unsigned char *)val; *p != '\0'; p++) {
		int rc;

		if (*p == '\\')
			rc = fputs("\\\\", f);
		else if (*p == '\n')
			rc = fputs("\\n", f);
		else if (*p == '\r')
			rc = fputs("\\r", f);
		else if (*p == '\t')
			rc = fputs("\\t", f);
		else if (*p < 0x20 || *p == 0x7f)
			rc = fprintf(f, "\\x%02x", *p);
		else
			rc = fputc(*p, f);
		if (rc < 0)
			return -1;
	}
	return fputc('\n', f) < 0 ? -1 : 0;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Undoes vmm_kv_write's escapes in place; -1 on a broken one. */
static int
unescape(char *s)
{
	char *w = s;
	int hi, lo;

	for (; *s != '\0'; s++) {
		if (*s != '\\') {
			*w++ = *s;
			continue;
		}
		switch (*++s) {
		case '\\': *w++ = '\\'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		case 'x':
			if ((hi = hexval(s[1])) < 0 || (lo = hexval(s[2])) < 0 ||
			    (hi == 0 && lo == 0))
				return -1;
			*w++ = (char)(hi << 4 | lo);
			s += 2;
			break;
		default:
			return -1;
		}
	}
	*w = '\0';
	return 0;
}

int
vmm_kv_read(FILE *f, int (*cb)(const char *, const char *, void *),
    void *arg, char *err, size_t errlen)
{
	static char line[KV_LINE_MAX];
	char keys[KV_KEYS_MAX][32], *v, *nl;
	int nkeys = 0, i, lineno = 0;

	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if ((nl = strchr(line, '\n')) == NULL && !feof(f)) {
			snprintf(err, errlen, "line %d: longer than %d bytes",
			    lineno, KV_LINE_MAX - 2);
			return -EINVAL;
		}
		if (nl != NULL)
			*nl = '\0';
		if ((v = strchr(line, '=')) == NULL || v == line ||
		    (size_t)(v - line) >= sizeof(keys[0])) {
			snprintf(err, errlen, "line %d: not key=value", lineno);
			return -EINVAL;
		}
		*v++ = '\0';
		for (i = 0; i < nkeys; i++)
			if (strcmp(keys[i], line) == 0) {
				snprintf(err, errlen, "line %d: key '%s' a second "
				    "time", lineno, line);
				return -EINVAL;
			}
		if (nkeys == KV_KEYS_MAX) {
			snprintf(err, errlen, "line %d: more than %d keys",
			    lineno, KV_KEYS_MAX);
			return -EINVAL;
		}
		snprintf(keys[nkeys++], sizeof(keys[0]), "%s", line);
		if (unescape(v) < 0) {
			snprintf(err, errlen, "line %d: a broken escape in '%s'",
			    lineno, line);
			return -EINVAL;
		}
		if (cb(line, v, arg) != 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -EIO;
	}
	return 0;
}

void
vmm_text_clean(char *dst, size_t size, const char *src)
{
	size_t i;

	if (size == 0)
		return;
	for (i = 0; i + 1 < size && src[i] != '\0'; i++)
		dst[i] = (unsigned char)src[i] < 0x20 ||
		    (unsigned char)src[i] == 0x7f ? '?' : src[i];
	dst[i] = '\0';
}
