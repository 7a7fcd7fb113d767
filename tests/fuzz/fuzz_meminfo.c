/* SPDX-License-Identifier: MIT */
/* libFuzzer target: hpr__meminfo_get with the keys the library asks for,
 * and hpr__parse_ulong on the same bytes. */
#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = { "HugePages_Total", "HugePages_Free",
					    "HugePages_Rsvd",  "HugePages_Surp",
					    "Hugepagesize",    "Hugetlb",
					    "MemTotal",	       "AnonHugePages",
					    "ShmemPmdMapped",  "" };
	unsigned long long v;
	unsigned long u;

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		hpr__meminfo_get((const char *)data, size, keys[k], &v);
	hpr__parse_ulong((const char *)data, size, &u);
	return 0;
}
