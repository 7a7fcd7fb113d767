/* SPDX-License-Identifier: MIT */
/*
 * hpr_collapse: MADV_COLLAPSE (Linux 6.1) per huge page, in parallel on the
 * region's workers, with bounded retries on EAGAIN. What counts as
 * collapsed is measured from the kernel afterwards (PAGEMAP_SCAN's
 * PAGE_IS_HUGE, or smaps on kernels before 6.7), never assumed.
 *
 * Which pages: those the table knows as PRESENT, and those it knows as
 * ABSENT that the kernel says are resident anyway (the application wrote
 * through the mapping without hpr_fault_in, so they came in as 4 KiB
 * pages: exactly the memory khugepaged would otherwise get to some day).
 * Never LAZY pages (collapsing would copy memory the caller gave back) and
 * never wholly non-resident ones (on shmem MADV_COLLAPSE would allocate a
 * huge page for a hole). A page is BUSY in the fault table while it is
 * being collapsed, so a concurrent release or reclaim waits for it.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "lazyload.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static int collapse_page(hpr_region *r, size_t idx, void *arg)
{
	char *p = r->base + hpr__page_off(r, idx);
	uint8_t st;
	int rc;

	(void)arg;
	if (hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_ABSENT) | HPR_PS_BIT(HPR_PS_PRESENT),
			   HPR_PS_BUSY, true, &st) != 1)
		return 0; /* LAZY */
	if (st == HPR_PS_ABSENT && !hpr__os->any_resident(p, r->page_size)) {
		hpr__page_put(r, idx, st, st);
		return 0;
	}

	if (hpr__range_is_huge(p, r->page_size) == 1)
		rc = 0;
	else
		rc = hpr__collapse_one(r, p, true);

	/* resident and huge now: the table learns an ABSENT page is present */
	hpr__page_put(r, idx, st, st == HPR_PS_ABSENT && !rc ? HPR_PS_PRESENT : st);
	return rc;
}

static const struct hpr__job_ops collapse_ops = { .page = collapse_page };

static size_t measure_huge(hpr_region *r, size_t first, size_t last)
{
	size_t n = 0;
	struct hpr__smaps_sum s;
	uintptr_t lo = (uintptr_t)r->base + hpr__page_off(r, first);
	uintptr_t hi = (uintptr_t)r->base + hpr__page_off(r, last);

	if (hpr__range_is_huge(r->base, 0) != -EOPNOTSUPP) {
		for (size_t i = first; i < last; i++)
			if (hpr__range_is_huge(r->base + hpr__page_off(r, i), r->page_size) == 1)
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
	int rc;

	hpr__err_clear();
	rc = hpr__range(r, off, len, &first, &last);
	if (collapsed)
		*collapsed = 0;
	if (!rc)
		rc = hpr__lazy_busy(r, "hpr_collapse");
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
	rc = hpr__run(r, &collapse_ops, NULL, first, last);
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
		return hpr__fail(rc, "region '%s': pages stayed busy for a second of "
				     "retries (pinned for I/O, or shared with a process "
				     "changing them, e.g. a forked child); try again later",
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
