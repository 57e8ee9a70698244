/*
 * fuzz_move.c — libFuzzer target for a moved sandbox's manifest
 * (vmm/export.c: vmm_move_parse), which a fleet peer sends. One that
 * parses keeps its promises (names from the list, once each; hashes of
 * 64 hex digits or none; a base only with a ready key, and named) and
 * survives a round trip through vmm_move_json unchanged. An input that
 * is not JSON (not starting with '{') is a sparse form instead, which
 * the peer sends as a RAM file's bytes (vmm_sparse_write): taken in
 * pieces into a file of 64 KiB, accepted only as a file of that size.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "vmm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
sparse(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct vmm_sparse_wr w;
	char err[VMM_ERRLEN];
	struct stat st;
	size_t at, n;
	int rc = 0;

	if (fd < 0 && (fd = memfd_create("fuzz-move", 0)) < 0)
		abort();
	if (ftruncate(fd, 0) < 0)
		abort();
	vmm_sparse_wr_init(&w, fd, 64 * 1024);
	/* pieces of 1, 7, 13... bytes: a record's head cut anywhere */
	for (at = 0, n = 1; rc == 0 && at < size; at += n, n += 6) {
		if (n > size - at)
			n = size - at;
		rc = vmm_sparse_write(&w, data + at, n, err, sizeof(err));
	}
	if (rc == 0 && vmm_sparse_finish(&w, err, sizeof(err)) == 0 &&
	    (fstat(fd, &st) < 0 || st.st_size != 64 * 1024))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_move mv, back;
	char err[VMM_ERRLEN], *text;
	size_t i, j;
	int base = 0;

	if (size > 0 && data[0] != '{') {
		sparse(data, size);
		return 0;
	}
	if (vmm_move_parse((const char *)data, size, &mv, err,
	    sizeof(err)) != 0)
		return 0;
	if (mv.n == 0 || mv.n > VMM_MOVE_FILES || !vmm_id_valid(mv.id) ||
	    strlen(mv.tpl_sha256) != 64)
		abort();
	for (i = 0; i < mv.n; i++) {
		size_t l = strlen(mv.f[i].sha256);

		if ((l != 0 && l != 64) || strchr(mv.f[i].name, '.') ==
		    mv.f[i].name || strstr(mv.f[i].name, "..") != NULL)
			abort();
		if (strcmp(mv.f[i].name, "base.qcow2") == 0)
			base = 1;
		for (j = 0; j < i; j++)
			if (strcmp(mv.f[i].name, mv.f[j].name) == 0)
				abort();
	}
	if (base != (mv.ready_key[0] != '\0') ||
	    base != (mv.base_id[0] != '\0'))
		abort();
	if ((text = vmm_move_json(&mv)) == NULL)
		return 0;
	if (vmm_move_parse(text, strlen(text), &back, err, sizeof(err)) != 0 ||
	    memcmp(&mv, &back, sizeof(mv)) != 0)
		abort();
	free(text);
	return 0;
}
