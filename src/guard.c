/* SPDX-License-Identifier: MIT */
/*
 * Guard mode (HPR_F_GUARD): released pages are PROT_NONE until they are
 * faulted back. Each mprotect that does not cover a whole VMA splits it,
 * so a region with many separate released runs holds many mappings, and
 * at vm.max_map_count (65530 by default) the kernel refuses the split
 * with ENOMEM -- which, reported as is, reads as "out of memory". This
 * file does guard mode's mprotect and says what such a failure means.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int hpr__guard_protect(hpr_region *r, size_t off, size_t len, int prot)
{
	const char *what = prot == PROT_NONE ? "protect released" : "unprotect";
	long maps, max = -1;
	char buf[32];
	int rc;

	rc = hpr__os->mprotect(r->base + off, len, prot);
	if (!rc)
		return 0;
	maps = hpr__os_map_count();
	if (hpr__os->read_file("/proc/sys/vm/max_map_count", buf, sizeof(buf)) > 0)
		max = strtol(buf, NULL, 10);
	/* a split adds up to two mappings: within that of the limit, it is
	 * the limit (mprotect's other ENOMEM, an unmapped range, cannot
	 * happen inside the region) */
	if (rc == -ENOMEM && maps >= 0 && max > 0 && maps + 2 > max)
		return hpr__fail(rc,
				 "region '%s': guard mode cannot %s pages [%#zx, +%#zx): the "
				 "process has %ld memory mappings and vm.max_map_count is %ld "
				 "(each separate released run splits the region's mapping): raise "
				 "/proc/sys/vm/max_map_count, release and fault in longer "
				 "contiguous ranges, or drop HPR_F_GUARD",
				 r->name, what, off, len, maps, max);
	return hpr__fail(rc, "region '%s': guard mode cannot %s pages [%#zx, +%#zx): mprotect: %s",
			 r->name, what, off, len, strerror(-rc));
}
