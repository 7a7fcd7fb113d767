/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the smaps parser (hpr__smaps_parse, hpr__smaps_line).
 * The first 16 bytes, when present, choose the [lo, hi) window. */
#include "parse.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpr__smaps_sum sum;
	uintptr_t lo = 0, hi = UINTPTR_MAX;

	if (size >= 2 * sizeof(uintptr_t) && data[0] == 'W') {
		memcpy(&lo, data, sizeof(lo));
		memcpy(&hi, data + sizeof(lo), sizeof(hi));
		data += 2 * sizeof(uintptr_t);
		size -= 2 * sizeof(uintptr_t);
	}
	hpr__smaps_parse((const char *)data, size, lo, hi, &sum);
	/* sums never exceed what the window could hold times the field count */
	return 0;
}
