/* SPDX-License-Identifier: MIT */
/*
 * hpr_stats: the truth from the kernel next to the library's own
 * counters. Resident and huge-mapped bytes are counted over the region's
 * exact range with PAGEMAP_SCAN (Linux 6.7); before that from the
 * region's VMAs in /proc/self/smaps, which hold nothing else because
 * the guard pages around every region (backend.c) keep other mappings
 * from merging into them. Per-node residency from move_pages.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <string.h>

/* The library's own counters, and what it fell back from. */
static void counters(hpr_region *r, struct hpr_stats *st)
{
	st->populate_calls = atomic_load(&r->populate_calls);
	st->reclaimed_bytes = atomic_load(&r->reclaimed_bytes);
	st->collapsed_pages = atomic_load(&r->collapsed_pages);
	st->collapse_queued = atomic_load(&r->collapse_queued);
	st->collapse_pending = atomic_load(&r->cq_pending);
	st->collapse_failed = atomic_load(&r->collapse_failed);
	st->snapshot_io = atomic_load(&r->snapshot_io);
	st->lazy_load = atomic_load(&r->lazy_load);
	st->lazy_fallback_err = atomic_load(&r->lazy_fallback_err);
	st->requested = (int)r->requested;
	if (r->requested != HPR_BACKEND_AUTO && r->requested != r->backend)
		st->fallback |= HPR_FALLBACK_BACKEND;
	if (r->degraded)
		st->fallback |= HPR_FALLBACK_BASE_PAGES;
}

int hpr__stats(hpr_region *r, struct hpr_stats *st)
{
	uintptr_t lo, hi;
	uint64_t present, huge;
	struct hpr__smaps_sum s;
	bool scanned;
	int rc;

	hpr__err_clear();
	if (!r || !st)
		return hpr__fail(-EINVAL, "hpr_stats: region or stats is NULL");
	if (r->not_mapped)
		return hpr__region_mapped(r);
	memset(st, 0, sizeof(*st));
	lo = (uintptr_t)r->base;
	hi = lo + r->size;
	scanned = hpr__pagemap_count(lo, hi, &present, &huge) == 0;
	memset(&s, 0, sizeof(s));
	/* smaps for LazyFree (THP), and everything before 6.7 */
	if (!scanned || r->backend == HPR_BACKEND_THP) {
		rc = hpr__smaps_range(lo, hi, &s);
		if (rc)
			return hpr__fail(rc, "hpr_stats: cannot read /proc/self/smaps: %s",
					 strerror(-rc));
	}
	st->size = r->size;
	st->backend = r->backend;
	st->page_size = r->page_size;
	if (scanned) {
		st->resident = (size_t)present;
		st->huge_mapped = (size_t)huge;
	} else {
		st->resident = (size_t)(s.rss + s.hugetlb);
		st->huge_mapped = (size_t)(s.anon_huge + s.shmem_pmd + s.file_pmd + s.hugetlb);
	}
	if (st->huge_mapped > st->resident)
		st->resident = st->huge_mapped;
	st->small_mapped = st->resident - st->huge_mapped;
	st->pages_total = r->npages;
	st->pages_present = atomic_load(&r->present_pages);
	st->pages_lazy = atomic_load(&r->lazy_pages);
	st->pages_held = atomic_load(&r->held_pages);
	if (r->backend == HPR_BACKEND_THP)
		st->lazy = (size_t)s.lazyfree;
	else
		st->lazy = st->pages_lazy << r->page_shift;
	counters(r, st);
	if (hpr__numa_residency(r->base, r->size, r->page_size, st->node_resident,
				&st->nr_nodes))
		st->nr_nodes = 0;
	return 0;
}
