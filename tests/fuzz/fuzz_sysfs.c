/* SPDX-License-Identifier: MIT */
/* libFuzzer target: sysfs mode files ("always [madvise] never") with the
 * THP and shmem name tables, and sysfs numbers. */
#include "parse.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const thp[] = { "always", "madvise", "never", "defer", "defer+madvise" };
	static const char *const shmem[] = { "always", "within_size", "advise",
					     "never",  "deny",	      "force" };
	const char *buf = (const char *)data;
	unsigned long u;
	int m;

	m = hpr__parse_sysfs_mode(buf, size, thp, 5);
	if (m >= 5 || m < -1000)
		abort();
	m = hpr__parse_sysfs_mode(buf, size, shmem, 6);
	if (m >= 6 || m < -1000)
		abort();
	hpr__parse_sysfs_mode(buf, size, thp, 0);
	hpr__parse_ulong(buf, size, &u);
	return 0;
}
