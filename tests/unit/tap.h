/*
 * tap.h — a tiny Test Anything Protocol helper for berth's unit tests,
 * header only. plan(n) (or none: done_testing() prints the plan last),
 * ok/is_int/is_str print one "ok N - name" line each and return whether
 * the check passed; diag() writes "# ..." to stderr; done_testing()
 * returns the exit code for main(). skip_all() plans zero tests.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef BERTH_TAP_H
#define BERTH_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_planned = -1;
static int tap_run;
static int tap_failed;

#define TAP_PRINTF(a, b) __attribute__((format(printf, a, b)))

static inline void
plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

static inline void TAP_PRINTF(1, 2)
diag(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("# ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static inline void TAP_PRINTF(2, 0)
tap_vreport(int pass, const char *fmt, va_list ap)
{
	tap_run++;
	if (!pass)
		tap_failed++;
	printf("%sok %d - ", pass ? "" : "not ", tap_run);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

static inline int TAP_PRINTF(2, 3)
ok(int cond, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vreport(cond != 0, fmt, ap);
	va_end(ap);
	return cond != 0;
}

static inline int TAP_PRINTF(3, 4)
is_int(long long got, long long want, const char *fmt, ...)
{
	va_list ap;
	int pass = got == want;

	va_start(ap, fmt);
	tap_vreport(pass, fmt, ap);
	va_end(ap);
	if (!pass)
		diag("     got: %lld\n#     expected: %lld", got, want);
	return pass;
}

static inline int TAP_PRINTF(3, 4)
is_str(const char *got, const char *want, const char *fmt, ...)
{
	va_list ap;
	int pass;

	if (got == NULL || want == NULL)
		pass = got == want;
	else
		pass = strcmp(got, want) == 0;
	va_start(ap, fmt);
	tap_vreport(pass, fmt, ap);
	va_end(ap);
	if (!pass)
		diag("     got: '%s'\n#     expected: '%s'",
		    got ? got : "(null)", want ? want : "(null)");
	return pass;
}

static inline void
skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	fflush(stdout);
	exit(0);
}

static inline int
done_testing(void)
{
	if (tap_planned < 0)
		printf("1..%d\n", tap_run);
	else if (tap_planned != tap_run)
		diag("planned %d tests but ran %d", tap_planned, tap_run);
	fflush(stdout);
	if (tap_failed)
		diag("failed %d of %d tests", tap_failed, tap_run);
	return tap_failed || (tap_planned >= 0 && tap_planned != tap_run);
}

#endif
