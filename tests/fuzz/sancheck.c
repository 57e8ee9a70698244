/*
 * sancheck.c — a replay target with planted bugs, for
 * tests/fuzz/sanitizers.sh: proves the replays' sanitizers are on and
 * that a report fails them. Input "leak" leaks, "heap" writes past a
 * heap block, "ub" overflows a signed int; anything else is clean.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *volatile sink;

static void __attribute__((noinline))
leak(void)
{
	sink = malloc(64);
	memset(sink, 1, 64);
	sink = NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 4 && memcmp(data, "leak", 4) == 0) {
		leak();
	} else if (size >= 4 && memcmp(data, "heap", 4) == 0) {
		char *p = malloc(8);

		sink = p;
		sink[8 + size % 4] = 1;
		free(p);
	} else if (size >= 2 && memcmp(data, "ub", 2) == 0) {
		volatile int x = INT_MAX;

		x = x + (int)size;
	}
	return 0;
}
