/*
 * log.c — see log.h. Each line is written with one write(2) so lines from
 * the parent and its workers, which share stderr, never interleave.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *log_role = "berthd";
static int log_level;

void
log_init(const char *role, int verbose)
{
	log_role = role;
	log_level = verbose;
}

void
log_setrole(const char *role)
{
	log_role = role;
}

int
log_verbose(void)
{
	return log_level;
}

static void vlog(const char *, const char *, va_list, const char *)
    __attribute__((format(printf, 2, 0)));

static void
vlog(const char *level, const char *fmt, va_list ap, const char *err)
{
	char line[2048];
	int n, m;

	n = snprintf(line, sizeof(line), "%s: %s", log_role, level);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	if (err != NULL) {
		m = snprintf(line + n, sizeof(line) - n, ": %s", err);
		if (m > 0)
			n += m;
		if ((size_t)n >= sizeof(line) - 1)
			n = sizeof(line) - 2;
	}
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
}

#define LOGFN(name, level, witherr, minlevel)			\
void								\
name(const char *fmt, ...)					\
{								\
	va_list ap;						\
	int saved = errno;					\
	if (log_level < (minlevel))				\
		return;						\
	va_start(ap, fmt);					\
	vlog(level, fmt, ap, (witherr) ? strerror(saved) : NULL); \
	va_end(ap);						\
	errno = saved;						\
}

LOGFN(log_warn, "", 1, 0)
LOGFN(log_warnx, "", 0, 0)
LOGFN(log_info, "", 0, 0)
LOGFN(log_debug, "debug: ", 0, 1)

void
fatal(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vlog("fatal: ", fmt, ap, strerror(saved));
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("fatal: ", fmt, ap, NULL);
	va_end(ap);
	exit(1);
}
