/* SPDX-License-Identifier: MIT */
/*
 * The fault-in entry points: a range is faulted in by a job of fault.c's
 * page runs on the region's worker pool, after forgetting any partial
 * release of its pages (release.c).
 */
#include "internal.h"
#include "lazyload.h"

/* A public call's start: its range checked and widened to pages. */
static int call_range(hpr_region *r, size_t off, size_t len, size_t *first, size_t *last)
{
	hpr__err_clear();
	return hpr__range(r, off, len, first, last);
}

int hpr_fault_in(hpr_region *r, size_t off, size_t len)
{
	size_t first = 0, last = 0;
	int rc = call_range(r, off, len, &first, &last);

	if (rc)
		return rc;
	hpr__partial_clear(r, off, len);
	if (hpr__lazy_running(r) && (rc = hpr__lazy_fault_range(r, first, last)))
		return rc;
	first = hpr__fault_ops.pending(r, first, last);
	if (first == last)
		return 0; /* all present: no lock, no syscall */
	return hpr__run(r, &hpr__fault_ops, NULL, first, last);
}

int hpr_prefault_start(hpr_region *r, size_t off, size_t len)
{
	size_t first = 0, last = 0;
	int rc = call_range(r, off, len, &first, &last);

	if (!rc)
		rc = hpr__lazy_busy(r, "hpr_prefault_start");
	return rc ? rc : hpr__run_async(r, &hpr__fault_ops, NULL, first, last);
}
