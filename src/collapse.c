/* SPDX-License-Identifier: MIT */
/*
 * hpr_collapse: MADV_COLLAPSE (Linux 6.1) per present huge page, in parallel
 * on the region's workers, with bounded retries on EAGAIN. What counts as
 * collapsed is measured from the kernel afterwards (PAGEMAP_SCAN's
 * PAGE_IS_HUGE, or smaps on kernels before 6.7), never assumed.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <string.h>

static int collapse_page(hpr_region *r, size_t idx, void *arg)
{
	char *p = r->base + hpr__page_off(r, idx);
	int rc = -EAGAIN;

	(void)arg;
	if (atomic_load_explicit(&r->state[idx], memory_order_acquire) != HPR_PS_PRESENT)
		return 0; /* never collapse what was not faulted: it would fault it */
	if (hpr__range_is_huge(r, p, r->page_size) == 1)
		return 0;
	for (int t = 0; t < 4 && rc == -EAGAIN; t++)
		rc = hpr__os->madvise(p, r->page_size, MADV_COLLAPSE);
	if (!rc) {
		atomic_fetch_add(&r->collapsed_pages, 1);
		return 0;
	}
	return rc;
}

static size_t measure_huge(hpr_region *r, size_t first, size_t last)
{
	size_t n = 0;
	struct hpr__smaps_sum s;
	uintptr_t lo = (uintptr_t)r->base + hpr__page_off(r, first);
	uintptr_t hi = (uintptr_t)r->base + hpr__page_off(r, last);

	if (hpr__range_is_huge(r, r->base, 0) != -EOPNOTSUPP) {
		for (size_t i = first; i < last; i++)
			if (hpr__range_is_huge(r, r->base + hpr__page_off(r, i),
					       r->page_size) == 1)
				n += r->page_size;
		return n;
	}
	/* before 6.7: smaps, in proportion when the range is part of the VMA */
	if (hpr__smaps_range(lo, hi, &s))
		return 0;
	return (size_t)(s.anon_huge + s.shmem_pmd + s.file_pmd + s.hugetlb);
}

int hpr_collapse(hpr_region *r, size_t off, size_t len, size_t *collapsed)
{
	const struct hpr__caps *c = hpr__caps();
	size_t first, last;
	int rc = hpr__range(r, off, len, &first, &last);

	if (collapsed)
		*collapsed = 0;
	if (rc)
		return rc;
	if (r->backend == HPR_BACKEND_HUGETLB) {
		/* hugetlb pages are huge by construction */
		if (collapsed)
			*collapsed = measure_huge(r, first, last);
		return 0;
	}
	if (!c->info.have_collapse)
		return hpr__fail(-EOPNOTSUPP,
				 "MADV_COLLAPSE needs Linux 6.1 (this is %d.%d): let "
				 "khugepaged do it (/sys/kernel/mm/transparent_hugepage/"
				 "khugepaged) or use hugetlb",
				 c->info.kernel_major, c->info.kernel_minor);
	if (r->degraded)
		return hpr__fail(-EOPNOTSUPP,
				 "region '%s' was created with base pages (HPR_F_FALLBACK: "
				 "THP or shmem huge pages are disabled here), so it is not "
				 "collapsed: enable them (see `hpr probe`)",
				 r->name);
	rc = hpr__run(r, collapse_page, NULL, first, last);
	if (collapsed)
		*collapsed = measure_huge(r, first, last);
	switch (rc) {
	case 0:
		return 0;
	case -ENOMEM:
		return hpr__fail(rc, "region '%s': no free huge page to collapse into: "
				     "free memory or compact it (echo 1 > "
				     "/proc/sys/vm/compact_memory)",
				 r->name);
	case -EAGAIN:
		return hpr__fail(rc, "region '%s': pages stayed busy (pinned or under "
				     "I/O) after retries; try again later",
				 r->name);
	case -EINVAL:
	case -EPERM:
		return hpr__fail(-EOPNOTSUPP,
				 "region '%s': the kernel refuses to collapse this "
				 "mapping (THP disabled for the process or VMA, or "
				 "shmem_enabled=deny)",
				 r->name);
	default:
		return hpr__fail(rc, "region '%s': MADV_COLLAPSE failed: %s", r->name,
				 strerror(-rc));
	}
}
