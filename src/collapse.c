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

/*
 * The background collapse (the pool's idle work): a page the reuse path
 * got back as base pages (fault.c queue_collapse) is collapsed by a worker
 * with nothing else to do. The page stays usable meanwhile: it is
 * COLLAPSING, which fault-in takes for PRESENT, while a release, a reclaim
 * or an hpr_collapse waits for it as for BUSY. A page released (or
 * reclaimed) since it was queued is dropped: collapsing it would copy
 * memory the caller gave back.
 */
enum {
	QUIET_NS = 1000000,	/* no fault-in for 1 ms: the region is idle */
	QUIET_NAP_US = 4000,	/* how often the drainer looks again: its
				 * wake-ups put the worker's CPU in the mm's
				 * TLB-flush mask, so each MADV_FREE of the
				 * application's costs an IPI to it; a 500 us
				 * nap showed in the churn's profile */
	MAX_DEFER_NS = 50000000 /* but it collapses a page every 50 ms anyway */
};

/*
 * A collapse holds the mmap lock for writing while it copies the 2 MiB
 * (mm/khugepaged.c collapse_huge_page), and every page fault of the
 * process waits for it: collapsing while the application faults pages in
 * moved the wait onto its thread (bench/release's pressure variant: the
 * reuse latency p50 went up, not down). So the drainer waits until no
 * hpr_fault_in has run on the region for QUIET_NS, and under a fault-in
 * that never stops it still collapses one page per MAX_DEFER_NS. True:
 * go on now; false: nap and look again.
 */
static bool region_quiet(hpr_region *r)
{
	uint64_t now = hpr__now_ns();

	if (!atomic_load(&r->faulting) &&
	    now - atomic_load_explicit(&r->fault_ns, memory_order_relaxed) >= QUIET_NS) {
		r->cq_wait_ns = 0;
		return true;
	}
	if (!r->cq_wait_ns)
		r->cq_wait_ns = now;
	if (now - r->cq_wait_ns >= MAX_DEFER_NS) {
		r->cq_wait_ns = 0;
		return true;
	}
	return false;
}

bool hpr__collapse_idle(hpr_region *r)
{
	size_t idx;
	uint8_t st;
	char *p;
	int rc, h;

	if (!atomic_load(&r->cq_pending))
		return false;
	if (!region_quiet(r)) {
		hpr__os->sleep_us(QUIET_NAP_US);
		return true;
	}
	if (!hpr__cq_take(r, &idx))
		return false;
	if (hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_PRESENT), HPR_PS_COLLAPSING, true, &st) != 1)
		return true;
	p = r->base + hpr__page_off(r, idx);
	h = hpr__range_is_huge(p, r->page_size);
	/* huge already (khugepaged, or a fault since): nothing to do; without
	 * PAGEMAP_SCAN (6.1-6.6) MADV_COLLAPSE is the check as well, and a
	 * page that was huge counts as no collapse */
	rc = h == 1 ? 0 : hpr__collapse_one(r, p, h == 0);
	/* a refusal counts; a page split again right after (reclaim splits
	 * THPs in use when there is no swap) is not the collapse's failure */
	if (rc) {
		atomic_fetch_add_explicit(&r->collapse_failed, 1, memory_order_relaxed);
		hpr__log(HPR_LOG_INFO,
			 "region '%s': the background collapse of the page at offset %#zx "
			 "failed (%s); it stays in base pages",
			 r->name, hpr__page_off(r, idx), strerror(-rc));
	}
	hpr__page_put(r, idx, HPR_PS_PRESENT, HPR_PS_PRESENT);
	return true;
}

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
