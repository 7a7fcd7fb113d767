/* SPDX-License-Identifier: MIT */
/*
 * The fault-in entry points: a range is faulted in by a job of fault.c's
 * page runs on the region's worker pool, after forgetting any partial
 * release of its pages (release.c).
 */
#include "internal.h"
#include "lazyload.h"
#include "rpool.h"

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
	/* the background collapse keeps out of the way of fault-ins (a
	 * collapse holds the mmap lock for writing while it copies, and
	 * faults wait for it): it looks at these two (collapse.c) */
	atomic_fetch_add(&r->faulting, 1);
	atomic_store_explicit(&r->fault_ns, hpr__now_ns(), memory_order_relaxed);
	/* what the recycled pool holds is moved in on this thread first
	 * (fault.c hpr__fault_from_pool: parallel moves only queue for the
	 * mmap lock); the workers populate the rest */
	if (hpr__rpool_has_clean() && hpr__rpool_region_ok(r) &&
	    hpr__fault_from_pool(r, first, last))
		first = hpr__fault_ops.pending(r, first, last);
	rc = first == last ? 0 : hpr__run(r, &hpr__fault_ops, NULL, first, last);
	atomic_store_explicit(&r->fault_ns, hpr__now_ns(), memory_order_relaxed);
	atomic_fetch_sub(&r->faulting, 1);
	return rc;
}

int hpr_prefault_start(hpr_region *r, size_t off, size_t len)
{
	size_t first = 0, last = 0;
	int rc = call_range(r, off, len, &first, &last);

	if (!rc)
		rc = hpr__lazy_busy(r, "hpr_prefault_start");
	return rc ? rc : hpr__run_async(r, &hpr__fault_ops, NULL, first, last);
}
