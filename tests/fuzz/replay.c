/*
 * replay.c — runs a libFuzzer target over files without libFuzzer, so
 * `make check` replays every corpus with the ordinary compiler, built
 * with ASan+UBSan when it can (tests/fuzz/local.mk); a sanitizer report
 * ends the process with a non-zero status, which fails the test.
 * Arguments: files or directories. Prints TAP: one line per directory
 * or file, and a comment saying whether the sanitizers are on.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPLAY_ASAN 1
#endif
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current;	/* the input being replayed */

/* An abort (the target's own check, or a sanitizer report with
 * abort_on_error=1) names the input that caused it. */
static void
on_abort(int sig)
{
	if (current != NULL) {
		(void)!write(2, "replay: died on input ", 22);
		(void)!write(2, current, strlen(current));
		(void)!write(2, "\n", 1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	static uint8_t buf[1 << 20];
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	current = path;
	LLVMFuzzerTestOneInput(buf, n);
	current = NULL;
	return 0;
}

int
main(int argc, char **argv)
{
	const char *top = getenv("top_srcdir");
	int i, t = 0;

	signal(SIGABRT, on_abort);
#ifdef REPLAY_ASAN
	printf("# replayed under ASan+UBSan\n");
#else
	printf("# replayed WITHOUT sanitizers: the compiler lacks them\n");
#endif

	for (i = 1; i < argc; i++) {
		char path[4096], p2[4096 + 256];
		struct stat st;
		DIR *d;
		struct dirent *e;
		int files = 0;

		snprintf(path, sizeof(path), "%s%s%s", argv[i][0] == '/' || !top ? "" : top,
		    argv[i][0] == '/' || !top ? "" : "/", argv[i]);
		if (stat(path, &st) != 0) {
			printf("not ok %d - %s: missing\n", ++t, path);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			printf("%s %d - %s\n", run_file(path) == 0 ? "ok" : "not ok", ++t, argv[i]);
			continue;
		}
		if ((d = opendir(path)) == NULL) {
			printf("not ok %d - %s: cannot open\n", ++t, path);
			continue;
		}
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(p2, sizeof(p2), "%s/%s", path, e->d_name);
			if (run_file(p2) == 0)
				files++;
		}
		closedir(d);
		printf("ok %d - %s: %d inputs replayed without a crash\n", ++t, argv[i], files);
	}
	printf("1..%d\n", t);
	return 0;
}
