/*
 * log.h — berthd's logging: one line per event on stderr (or syslog when
 * detached), printf-checked, prefixed with the process role. Only the
 * daemon logs; libraries return errors for their callers to print.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_LOG_H
#define BERTH_LOG_H

#include <stdarg.h>
#include <stddef.h>

void log_init(const char *role, int verbose);
void log_setrole(const char *role);
int log_verbose(void);
void log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
/* One access-log line to fd; a failing log is reported once, not per line. */
void log_access(int fd, const char *line, size_t len);
void fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
