/*
 * fuzz_conf.c — libFuzzer target for the berth.conf parser
 * (proxy/conf.c). px_config_load() reads a named file, so the input is
 * written to an anonymous memory file (memfd) and loaded through its
 * /proc/self/fd name: no file on disk, nothing left behind. A config
 * that loads must keep the invariants berthd relies on.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "conf.h"
#include "valid.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	struct px_config c;
	char err[512];
	int i, https = 0;

	if (fd == -1) {
		if ((fd = memfd_create("fuzz_conf", 0)) == -1)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 ||
	    (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	err[0] = '\0';
	if (px_config_load(&c, path, err, sizeof(err)) == 0) {
		if (c.nlisten < 1 || c.nlisten > PX_MAX_LISTEN ||
		    c.ncerts < 0 || c.ncerts > PX_MAX_CERTS || c.ndns > 4 ||
		    c.workers < 0 || c.workers > 64 || c.domain == NULL ||
		    !px_valid_hostname(c.domain, strlen(c.domain)))
			abort();
		for (i = 0; i < c.nlisten; i++) {
			https |= c.listen[i].https;
			if (c.listen[i].port == 0 || c.listen[i].port > 65535)
				abort();
		}
		if (!https || px_config_https_port(&c) == 0)
			abort();
	} else if (err[0] == '\0') {
		abort();	/* every failure says why */
	}
	px_config_free(&c);
	return 0;
}
