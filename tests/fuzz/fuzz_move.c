/*
 * fuzz_move.c — libFuzzer target for a moved sandbox's manifest
 * (vmm/export.c: vmm_move_parse), which a fleet peer sends. One that
 * parses keeps its promises (names from the list, once each; hashes of
 * 64 hex digits or none; a base only with a ready key) and survives a
 * round trip through vmm_move_json unchanged.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "vmm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_move mv, back;
	char err[VMM_ERRLEN], *text;
	size_t i, j;
	int base = 0;

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
	if (base != (mv.ready_key[0] != '\0'))
		abort();
	if ((text = vmm_move_json(&mv)) == NULL)
		return 0;
	if (vmm_move_parse(text, strlen(text), &back, err, sizeof(err)) != 0 ||
	    memcmp(&mv, &back, sizeof(mv)) != 0)
		abort();
	free(text);
	return 0;
}
