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

/*
 * A full disk or a vanished file system must not cost a log line per
 * request, nor stop requests: the first failure is reported with its
 * reason, then lines are counted until a write works again, which is
 * reported too. A line the kernel took only in part is ended before the
 * next one so lines stay whole.
 */
void
log_access(int fd, const char *line, size_t len)
{
	static int failing, torn;
	static unsigned long long lost;
	ssize_t n;

	if (torn && write(fd, "\n", 1) == 1)
		torn = 0;
	if (!torn && (n = write(fd, line, len)) == (ssize_t)len) {
		if (failing) {
			failing = 0;
			log_info("access log: writing again after %llu lost line%s",
			    lost, lost == 1 ? "" : "s");
			lost = 0;
		}
		return;
	} else if (!torn && n > 0) {
		torn = 1;
		errno = ENOSPC;		/* what a short write to a file means */
	}
	lost++;
	if (!failing) {
		failing = 1;
		log_warn("access log: write failed; requests are served but not "
		    "logged until it works again");
	}
}

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
