/* SPDX-License-Identifier: MIT */
/*
 * Fault-in: populating huge pages exactly once across threads, on the page
 * state machine (pagestate.c). The faulting thread takes the page FAULTING,
 * populates it with no lock held, and puts it PRESENT (or ABSENT after an
 * error); threads wanting the same page wait for it, threads wanting other
 * pages never do. The PRESENT fast path is one acquire load.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "rpool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- PAGEMAP_SCAN (Linux 6.7, fs/proc/task_mmu.c) ---- */
/*
 * /proc/self/pagemap, opened once per process: an open pagemap fd walks the
 * page tables of the mm that opened it (fs/proc/task_mmu.c takes the mm at
 * open), so a forked child that used its parent's fd read the parent's
 * pages. The fd is tagged with the pid that opened it; a process that finds
 * another pid's fd (a fork, also a raw clone() that ran no atfork handler)
 * closes it and opens its own.
 */
static int pagemap_fd = -1;
static _Atomic pid_t pagemap_pid;
static pthread_mutex_t pagemap_mu = PTHREAD_MUTEX_INITIALIZER;

static int pagemap_get(void)
{
	pid_t me = getpid();

	if (atomic_load_explicit(&pagemap_pid, memory_order_acquire) == me)
		return pagemap_fd;
	pthread_mutex_lock(&pagemap_mu);
	if (atomic_load(&pagemap_pid) != me) {
		if (pagemap_fd >= 0)
			hpr__os->close(pagemap_fd); /* our copy of another mm's fd */
		pagemap_fd = -1;
		if (hpr__caps()->info.have_pagemap_scan)
			pagemap_fd = hpr__os->pagemap_open();
		atomic_store_explicit(&pagemap_pid, me, memory_order_release);
	}
	pthread_mutex_unlock(&pagemap_mu);
	return pagemap_fd;
}

void hpr__fault_atfork(int phase)
{
	hpr__pagestate_atfork(phase);
	if (!hpr__fork_mutex(&pagemap_mu, phase))
		return;
	/* child */
	if (pagemap_fd >= 0)
		hpr__os->close(pagemap_fd);
	pagemap_fd = -1;
	atomic_store(&pagemap_pid, 0);
}

int hpr__pagemap_count(uintptr_t lo, uintptr_t hi, uint64_t *present, uint64_t *huge)
{
	int fd = pagemap_get();

	*present = *huge = 0;
	if (fd < 0)
		return -EOPNOTSUPP;
	return hpr__os->pagemap_count(fd, lo, hi, present, huge);
}

int hpr__pagemap_any(uintptr_t lo, uintptr_t hi)
{
	int fd = pagemap_get();

	return fd < 0 ? -EOPNOTSUPP : hpr__os->pagemap_any(fd, lo, hi);
}

int hpr__range_is_huge(void *addr, size_t len)
{
	uint64_t present, huge;
	int rc;

	rc = hpr__pagemap_count((uintptr_t)addr, (uintptr_t)addr + len, &present, &huge);
	if (rc)
		return rc;
	return huge >= len ? 1 : 0;
}

static void record_error(hpr_region *r, int err, size_t off)
{
	int expect = 0;

	/* keep the lowest failing offset */
	pthread_mutex_lock(&r->partial_mu);
	expect = atomic_load(&r->fault_err);
	if (!expect || off < atomic_load(&r->fault_err_off)) {
		atomic_store(&r->fault_err, err);
		atomic_store(&r->fault_err_off, off);
	}
	pthread_mutex_unlock(&r->partial_mu);
}

static void clear_error_if(hpr_region *r, size_t off)
{
	if (atomic_load_explicit(&r->fault_err, memory_order_relaxed) &&
	    atomic_load(&r->fault_err_off) == off) {
		pthread_mutex_lock(&r->partial_mu);
		if (atomic_load(&r->fault_err_off) == off) {
			atomic_store(&r->fault_err, 0);
			atomic_store(&r->fault_err_off, (size_t)-1);
		}
		pthread_mutex_unlock(&r->partial_mu);
	}
}

static int populate_error(hpr_region *r, int rc, size_t off)
{
	char ps[32], at[32], knob[96];

	hpr__fmt_size(r->page_size, ps, sizeof(ps));
	snprintf(at, sizeof(at), "%#zx", off);
	if (rc == -EFAULT || rc == -ENOMEM || rc == -ENOSPC) {
		/* populate reports a SIGBUS-class fault as EFAULT; which
		 * resource ran out depends on the backing */
		switch (r->backend) {
		case HPR_BACKEND_HUGETLB:
			return hpr__fail(-ENOMEM,
					 "region '%s': the hugetlb pool of %s pages ran out "
					 "at offset %s: raise %s (or the hugetlb cgroup limit)",
					 r->name, ps, at,
					 hpr__pool_knob(r->page_size, knob, sizeof(knob)));
		case HPR_BACKEND_SHMEM:
			if (!r->is_memfd && rc != -ENOMEM)
				return hpr__fail(-ENOSPC,
						 "region '%s': the tmpfs holding it is full "
						 "at offset %s: remount it with a larger size=",
						 r->name, at);
			/* fallthrough */
		default:
			return hpr__fail(-ENOMEM,
					 "region '%s': out of memory at offset %s (machine "
					 "or memory cgroup limit)",
					 r->name, at);
		}
	}
	if (rc == -EHWPOISON)
		return hpr__fail(rc, "region '%s': hardware-poisoned page at offset %s", r->name,
				 at);
	return hpr__fail(rc, "region '%s': populating offset %s failed: %s", r->name, at,
			 strerror(-rc));
}

/*
 * MADV_COLLAPSE answers EAGAIN when a page of the range is busy for the
 * moment: locked, not yet on an LRU list (still in a CPU's add batch) or
 * holding a passing extra reference (mm/khugepaged.c,
 * madvise_collapse_errno: "trying again might succeed"). Another process
 * that shares the THP -- a forked child copying it on write or unmapping it
 * at exit -- holds those for as long as it runs, and longer when it is
 * preempted on a loaded machine. Back-to-back retries alone were not
 * enough there (test_conc_fork fork_during_churn_thp failed about once in
 * 15 runs with 2 busy CPUs: "MADV_COLLAPSE could not fix it (Resource
 * temporarily unavailable)"). So: COLLAPSE_QUICK tries at once, then sleep
 * COLLAPSE_NAP_US doubling up to COLLAPSE_NAP_MAX_US between tries, for at
 * most COLLAPSE_WAIT_US in all, and only then pass EAGAIN up.
 */
enum {
	COLLAPSE_QUICK = 4,
	COLLAPSE_NAP_US = 100,
	COLLAPSE_NAP_MAX_US = 20000,
	COLLAPSE_WAIT_US = 1000000,
};

/* The kernel's smaps sums over [lo, hi) (stats.c's source before 6.7,
 * and the THPeligible check below). */
static void smaps_line(void *arg, const char *line, size_t len)
{
	hpr__smaps_line(arg, line, len);
}

int hpr__smaps_range(uintptr_t lo, uintptr_t hi, struct hpr__smaps_sum *sum)
{
	struct hpr__smaps_parser p;
	int rc;

	hpr__smaps_init(&p, lo, hi);
	rc = hpr__os->read_lines("/proc/self/smaps", smaps_line, &p);
	*sum = p.sum;
	return rc;
}

/*
 * Linux before 6.3 answers EINVAL, not EAGAIN, when a page holds an
 * unexpected reference (commit ae63c898f400, "mm/MADV_COLLAPSE: set EAGAIN
 * on unexpected page refcount"): the same passing state, and Debian's 6.1
 * showed it after forks (test_conc_fork in the VM matrix: "could not fix
 * it (Invalid argument)"). There, once the process has been party to a
 * fork and smaps says the VMA is THP-eligible (so the kernel is not
 * refusing the range itself), EINVAL is waited out like EAGAIN.
 */
static bool einval_may_be_busy(char *a, size_t len)
{
	const struct hpr__caps *c = hpr__caps();
	struct hpr__smaps_sum s;

	if (c->info.kernel_major > 6 || (c->info.kernel_major == 6 && c->info.kernel_minor >= 3))
		return false;
	if (!hpr__forked())
		return false;
	return !hpr__smaps_range((uintptr_t)a, (uintptr_t)a + len, &s) && s.thp_eligible == 1;
}

static int populate_span(hpr_region *r, size_t off, size_t len);

/*
 * MADV_COLLAPSE refuses an anonymous range in which no PTE is writable
 * (SCAN_PAGE_RO: "no_writable_page" in the kernel's
 * huge_memory:mm_khugepaged_scan_pmd tracepoint) with EINVAL on Debian's
 * 6.1, and no wait cures that (6.18 collapses such a range: the test of
 * this, test_collapse thp_collapse_after_fork, fails only on 6.1 without
 * it). A fork leaves exactly such a range: the
 * base pages one of the parent's threads populated a moment before are
 * write-protected for copy-on-write, and stay so until the parent writes
 * them, long after the child copied or dropped its share. Traced on 6.1 in
 * test_conc_fork fork_during_churn_thp: a churn thread's check of a page
 * that came back as base pages saw no_writable_page for the whole second
 * of its retries (2 runs of 4 failed on the background-collapse branch,
 * where pages stay in base pages longer and so come back small more
 * often). The cure is the write the kernel waits for: MADV_POPULATE_WRITE
 * write-faults every read-only PTE of the page, which makes a page nobody
 * else maps writable again in place and copies one a child still maps;
 * the contents stay. Private anonymous memory only (the THP backend); a
 * shared or file mapping is never write-protected by a fork.
 */
static bool unprotect(hpr_region *r, char *a)
{
	return r->backend == HPR_BACKEND_THP &&
	       !populate_span(r, (size_t)(a - r->base), r->page_size);
}

int hpr__collapse_one(hpr_region *r, char *a, bool count)
{
	unsigned nap = COLLAPSE_NAP_US, slept = 0;
	int rc = -EAGAIN, einval_busy = -1; /* -1: not asked yet */
	bool unprotected = false;

	for (int t = 0; rc == -EAGAIN; t++) {
		if (t >= COLLAPSE_QUICK) {
			if (slept >= COLLAPSE_WAIT_US)
				break;
			hpr__os->sleep_us(nap);
			slept += nap;
			nap = nap * 2 < COLLAPSE_NAP_MAX_US ? nap * 2 : COLLAPSE_NAP_MAX_US;
		}
		rc = hpr__os_collapse(a, r->page_size);
		/* refused, or busy (a child's share): write-fault what a fork
		 * write-protected before the next try, and try once more
		 * after an EINVAL that may be nothing else */
		if ((rc == -EINVAL || rc == -EAGAIN) && unprotect(r, a) && rc == -EINVAL &&
		    !unprotected) {
			unprotected = true;
			rc = -EAGAIN;
			continue;
		}
		if (rc == -EINVAL) {
			if (einval_busy < 0)
				einval_busy = einval_may_be_busy(a, r->page_size);
			if (einval_busy)
				rc = -EAGAIN;
		}
	}
	if (!rc && count)
		atomic_fetch_add(&r->collapsed_pages, 1);
	return rc;
}

/*
 * The raw step over [off, off+len): MADV_POPULATE_WRITE, or the touch loop
 * where the kernel lacks it. No fallocate first: it does not pay (the
 * zeroing is the same, plus a syscall and on shmem a second page-cache
 * pass; docs/fault-engine.md). Returns the kernel's -errno, not yet
 * explained.
 */
static int populate_span(hpr_region *r, size_t off, size_t len)
{
	char *a = r->base + off;
	int rc;

	atomic_fetch_add_explicit(&r->populate_calls, 1, memory_order_relaxed);
	if (hpr__caps()->info.have_populate) {
		/* A kept region's pages hold its bytes: map them for reading
		 * (a shared mapping maps them writable as well), never
		 * write-fault a private view (a copy of every page). EINTR: a
		 * signal arrived (5.14+ returns it rather than restarting);
		 * what was populated stays, so go on. */
		do
			rc = r->attached ? hpr__os_populate_read(a, len) : hpr__os_populate(a, len);
		while (rc == -EINTR);
	} else {
		rc = -EINVAL;
	}
	if (rc == -EINVAL) /* no MADV_POPULATE_WRITE: kernel < 5.14 */
		rc = hpr__os->touch(a, len, 4096);
	return rc;
}

/*
 * After populating page idx: make sure it is PMD-mapped, collapsing it if
 * the kernel gave base pages. known_huge is what a range check already
 * said (1 huge, 0 not, -1 not asked).
 */
static int huge_check_page(hpr_region *r, size_t idx, int known_huge)
{
	size_t off = hpr__page_off(r, idx);
	char *a = r->base + off;
	const struct hpr__caps *c = hpr__caps();
	int rc;

	if (r->backend == HPR_BACKEND_HUGETLB || known_huge == 1)
		return 0;
	if (r->degraded) {
		/* HPR_F_FALLBACK chose base pages because huge ones are
		 * disabled: never override that with MADV_COLLAPSE */
		atomic_fetch_add(&r->small_pages, 1);
		return 0;
	}
	if (r->collapse_after) {
		rc = hpr__collapse_one(r, a, true);
	} else {
		int h = known_huge < 0 ? hpr__range_is_huge(a, r->page_size) : 0;

		/* the common case: the fault gave a PMD mapping */
		if (h > 0)
			return 0;
		rc = 0;
		if (h < 0 && c->info.have_collapse)
			/* No PAGEMAP_SCAN (Linux 6.1-6.6) to see whether the
			 * fault gave a PMD mapping. MADV_COLLAPSE answers
			 * instead: 0 means PMD-mapped afterwards, and on a page
			 * that already is it only checks (SCAN_PMD_MAPPED).
			 * Without it a THP refused by the kernel passed as
			 * huge and HPR_F_FALLBACK was never asked (measured
			 * on 6.1 under PR_SET_THP_DISABLE). Not counted as a
			 * collapse: most pages were huge already. */
			rc = hpr__collapse_one(r, a, false);
		else if (h == 0 && (r->fault_huge || c->info.have_collapse))
			rc = hpr__collapse_one(r, a, true);
	}
	/* -EOPNOTSUPP from the check with neither PAGEMAP_SCAN nor
	 * MADV_COLLAPSE (< 6.1) passes: stats report small_mapped from smaps */
	if (rc || hpr__range_is_huge(a, r->page_size) == 0) {
		char ps[32];

		if (r->flags & HPR_F_FALLBACK) {
			atomic_fetch_add(&r->small_pages, 1);
			return 0;
		}
		return hpr__fail(-EOPNOTSUPP,
				 "region '%s': the %s page at offset %#zx came out as "
				 "base pages and MADV_COLLAPSE could not fix it (%s): %s, "
				 "or pass HPR_F_FALLBACK",
				 r->name, hpr__fmt_size(r->page_size, ps, sizeof(ps)), off,
				 rc ? strerror(-rc) : "no error, still small",
				 rc == -EAGAIN ? "its pages stayed busy for a second (shared "
						 "with a process changing them, e.g. a forked "
						 "child, or pinned for I/O): try again" :
						 "free memory or compact (echo 1 > "
						 "/proc/sys/vm/compact_memory)");
	}
	return 0;
}

/*
 * The reuse path: a released THP page (prev LAZY) is faulted back. When the
 * kernel reclaimed it meanwhile, it comes back as base pages, and making it
 * huge again costs a MADV_COLLAPSE of milliseconds (2.6-8.6 ms mean per
 * 2 MiB, up to 47 ms, measured by bench/release's pressure variant). That
 * is not done on the caller's thread: the page is usable as it is, and it
 * goes to the background collapse queue (cqueue.c), which the region's
 * workers drain when idle (collapse.c hpr__collapse_idle): they check it
 * and collapse it if it is small. Only HPR_F_COLLAPSE_SYNC, or no worker
 * that can be started, checks and collapses here.
 */
static bool reuse_page(const hpr_region *r, uint8_t prev)
{
	return prev == HPR_PS_LAZY && r->backend == HPR_BACKEND_THP && !r->degraded &&
	       !(r->flags & HPR_F_COLLAPSE_SYNC) && hpr__caps()->info.have_collapse;
}

/*
 * After populating page idx, which prev says how it was before: the check
 * that it is huge (known_huge as huge_check_page's), or on the reuse path
 * the hand-off to the workers. There the check itself is theirs too (with
 * PAGEMAP_SCAN, touch_run already saw the run is not all huge; without
 * it the check would be a MADV_COLLAPSE). The populate keeps the data
 * contract (it dirties every page still there and faults in what the
 * kernel took), so the caller needs nothing else; whether the page is
 * huge again only matters for the TLB, and a worker sees to it when idle.
 */
static int check_page(hpr_region *r, size_t idx, uint8_t prev, int known_huge)
{
	if (!reuse_page(r, prev) || known_huge == 1)
		return huge_check_page(r, idx, known_huge);
	/* queued already (reused again before a worker got to it): nothing
	 * to wake */
	if (!hpr__cq_add(r, idx) || !hpr__pool_kick(r))
		return 0;
	/* no worker could be started: as before. The bit stays queued; a
	 * later worker finds the page huge and passes over it. */
	return huge_check_page(r, idx, -1);
}

int hpr__populate_page(hpr_region *r, size_t idx)
{
	size_t off = hpr__page_off(r, idx);
	int rc = populate_span(r, off, r->page_size);

	if (rc)
		return populate_error(r, rc, off);
	return huge_check_page(r, idx, -1);
}

/* hpr__populate_page of a claimed page that was prev before. */
static int populate_claimed(hpr_region *r, size_t idx, uint8_t prev)
{
	size_t off = hpr__page_off(r, idx);
	int rc = populate_span(r, off, r->page_size);

	if (rc)
		return populate_error(r, rc, off);
	return check_page(r, idx, prev, -1);
}

enum claim { CLAIM_DONE, CLAIM_MINE, CLAIM_BUSY };

/*
 * Try to take page idx for faulting. DONE: nothing to do (present, or a
 * released file page that is still intact). MINE: the page is FAULTING on
 * our behalf, *prev is what it was. BUSY: another thread is changing it;
 * with wait set, wait for it instead and decide again.
 */
static enum claim claim_page(hpr_region *r, size_t idx, bool wait, uint8_t *prev)
{
	int t;

	if (hpr__pstate_usable(hpr__page_state(r, idx)))
		return CLAIM_DONE;
	t = hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_ABSENT) | HPR_PS_BIT(HPR_PS_LAZY),
			   HPR_PS_FAULTING, wait, prev);
	if (t < 0)
		return *prev == HPR_PS_COLLAPSING ? CLAIM_DONE : CLAIM_BUSY;
	if (!t) /* present */
		return CLAIM_DONE;
	/* held (release_delay_ms): never given to the kernel, all there */
	if (*prev == HPR_PS_LAZY && hpr__held_take(r, idx)) {
		hpr__page_put(r, idx, HPR_PS_LAZY, HPR_PS_PRESENT);
		return CLAIM_DONE;
	}
	if (*prev == HPR_PS_LAZY && r->backend != HPR_BACKEND_THP && !(r->flags & HPR_F_GUARD)) {
		/* released, not reclaimed: still mapped and intact */
		hpr__page_put(r, idx, HPR_PS_LAZY, HPR_PS_PRESENT);
		return CLAIM_DONE;
	}
	return CLAIM_MINE;
}

/* Publish the outcome of a page we claimed and wake its waiters. */
static void publish_page(hpr_region *r, size_t idx, uint8_t prev, int rc)
{
	hpr__page_put(r, idx, prev, rc ? HPR_PS_ABSENT : HPR_PS_PRESENT);
	if (rc)
		record_error(r, rc, hpr__page_off(r, idx));
	else
		clear_error_if(r, hpr__page_off(r, idx));
}

/* Do the work for one claimed page and publish it. */
static int finish_page(hpr_region *r, size_t idx, uint8_t prev)
{
	int rc = 0;

	/* guard mode: released pages are PROT_NONE, and stay so after a
	 * reclaim made them ABSENT again */
	if (r->flags & HPR_F_GUARD)
		rc = hpr__guard_protect(r, hpr__page_off(r, idx), r->page_size,
					PROT_READ | PROT_WRITE);
	if (!rc && !(prev == HPR_PS_LAZY && r->backend != HPR_BACKEND_THP))
		rc = populate_claimed(r, idx, prev);
	publish_page(r, idx, prev, rc);
	return rc;
}

int hpr__fault_page(hpr_region *r, size_t idx)
{
	uint8_t prev = 0;

	if (hpr__pstate_usable(hpr__page_state(r, idx)))
		return 0;
	if (claim_page(r, idx, true, &prev) == CLAIM_DONE)
		return 0;
	return finish_page(r, idx, prev);
}

/* A plain absent page (or a MADV_FREEd THP page): one populate covers it. */
static bool run_member(const hpr_region *r, uint8_t prev)
{
	if (r->flags & HPR_F_GUARD) /* each page needs its mprotect */
		return false;
	return prev == HPR_PS_ABSENT || (prev == HPR_PS_LAZY && r->backend == HPR_BACKEND_THP);
}

/*
 * Populate the claimed pages [a, b) with one populate call and one
 * huge-page check: per huge page those cost about as much as 5 % of the
 * zeroing (a syscall and a page walk each, measured on 6.18), which the
 * batch spreads. On an error the run is redone page by page, so the
 * failing page and its offset are exact.
 */
/*
 * Write one byte of the page at a without changing it: a compare-exchange
 * of the value with itself, retried until it stores (a plain read and
 * write could put back an old byte into a page the kernel zeroed between
 * them). On a PMD-mapped page MADV_FREE left clean, the CPU sets the
 * PMD's dirty bit and there is no fault; reclaim then keeps the whole
 * huge page (a split hands the PMD's dirty bit to every PTE,
 * mm/huge_memory.c __split_huge_pmd_locked). On a page the kernel took,
 * it is the write fault that maps a new one.
 */
static void dirty_byte(char *a)
{
	_Atomic unsigned char *b = (_Atomic unsigned char *)a;
	unsigned char v = atomic_load_explicit(b, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(b, &v, v, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/*
 * Touch first, check after: the common case of the reuse path is a
 * released THP page the kernel did not need, still PMD-mapped. Writing one
 * byte per huge page dirties each (0.15 us), and one PAGEMAP_SCAN says
 * whether the whole run is still PMD-mapped: then it is all there and
 * dirty, and that is all. A MADV_POPULATE_WRITE of such a page costs
 * 8 us on this VM (the check 2.5-8 us). Otherwise (the kernel took some of
 * it) the run is populated as usual and handed to the workers. Needs
 * PAGEMAP_SCAN (6.7); without it the populate is the reuse.
 */
static bool touch_run(hpr_region *r, size_t a, size_t b, bool all_reuse)
{
	if (!all_reuse || !hpr__caps()->info.have_pagemap_scan)
		return false;
	for (size_t i = a; i < b; i++)
		dirty_byte(r->base + hpr__page_off(r, i));
	return hpr__range_is_huge(r->base + hpr__page_off(r, a), (b - a) << r->page_shift) == 1;
}

/* Does the run [a, b) hold a page of the reuse path? */
static bool run_reuses(const hpr_region *r, size_t a, size_t b, const uint8_t *prev)
{
	for (size_t i = a; i < b; i++)
		if (reuse_page(r, prev[i - a]))
			return true;
	return false;
}

/* Is every page of the run [a, b) a page of the reuse path? */
static bool run_all_reuse(const hpr_region *r, size_t a, size_t b, const uint8_t *prev)
{
	for (size_t i = a; i < b; i++)
		if (!reuse_page(r, prev[i - a]))
			return false;
	return true;
}

static void populate_run(hpr_region *r, size_t a, size_t b, const uint8_t *prev, int *rcs)
{
	size_t n = b - a;
	bool all_reuse = run_all_reuse(r, a, b, prev);
	int rc;

	if (touch_run(r, a, b, all_reuse)) {
		for (size_t i = a; i < b; i++) {
			rcs[i - a] = 0;
			publish_page(r, i, prev[i - a], 0);
		}
		return;
	}
	/* a run of reused pages is populated in one call even when it is
	 * one page long: the check after it is the workers' (check_page) */
	rc = n > 1 || all_reuse ? populate_span(r, hpr__page_off(r, a), n << r->page_shift) : -1;
	if (rc) {
		for (size_t i = a; i < b; i++)
			rcs[i - a] = populate_claimed(r, i, prev[i - a]);
	} else {
		int h = -1;

		if (r->backend != HPR_BACKEND_HUGETLB && !r->collapse_after && !all_reuse) {
			h = hpr__range_is_huge(r->base + hpr__page_off(r, a), n << r->page_shift);
			/* no PAGEMAP_SCAN (6.1-6.6): one MADV_COLLAPSE over
			 * the run answers for all of it (0: every page is
			 * PMD-mapped) and pays its lru_add_drain_all once;
			 * page by page only when it says no. Not on the
			 * reuse path: that check is the workers'. */
			if (h < 0 && !r->degraded && hpr__caps()->info.have_collapse &&
			    !run_reuses(r, a, b, prev) &&
			    !hpr__os_collapse(r->base + hpr__page_off(r, a), n << r->page_shift))
				h = 1;
		}
		for (size_t i = a; i < b; i++)
			rcs[i - a] = check_page(r, i, prev[i - a], h == 1 ? 1 : -1);
	}
	for (size_t i = a; i < b; i++)
		publish_page(r, i, prev[i - a], rcs[i - a]);
}

/*
 * The longest run of pages one populate call maps. A fresh page costs a
 * clear of 2 MiB, so 64 of them keep a demand fault's wait on a claimed run
 * short; a kept region's pages are already there (an attach maps them,
 * about 1.5 us per 2 MiB on 6.18), so there the calls' own cost counts and
 * a run may be as long as a grab (workers.c batch_for). Pages the region
 * released since are zeroed again: a demand fault that meets such a run
 * waits for its clear too, up to 1 GiB (about 0.1 s), once.
 */
#define HPR_RUN_MAX 64
#define HPR_RUN_MAX_ATTACHED 512

static size_t run_max(const hpr_region *r)
{
	return r->attached ? HPR_RUN_MAX_ATTACHED : HPR_RUN_MAX;
}

/*
 * Fault pages [first, last) in (a worker's grab), claiming runs of absent
 * pages and populating each run with one call. Returns the first error
 * (its page in *err_idx); *done counts pages now present. Stops early on
 * cancel.
 */
/* Claim consecutive plain pages from i without waiting (waiting while
 * holding claims could deadlock against a thread doing the same from the
 * other side), at most run_max(r); their previous states go to prev[].
 * Returns the end of the run; *c and *p tell how page end was met. */
static size_t claim_run(hpr_region *r, size_t i, size_t last, uint8_t *prev, enum claim *c,
			uint8_t *p)
{
	size_t rs = i, max = run_max(r);

	*c = CLAIM_DONE;
	while (i < last && i - rs < max) {
		*c = claim_page(r, i, false, p);
		if (*c != CLAIM_MINE || !run_member(r, *p))
			break;
		prev[i - rs] = *p;
		i++;
	}
	return i;
}

/* One page's result into the batch's: the first error and its page, and
 * the count of pages done. */
static void note_result(int rc, size_t idx, int *err, size_t *err_idx, size_t *done)
{
	if (rc && !*err) {
		*err = rc;
		*err_idx = idx;
	}
	*done += !rc;
}

/* The page that ended a run: done already, someone else's (wait for it),
 * or ours but special (guarded, released). */
static int finish_odd(hpr_region *r, size_t i, enum claim c, uint8_t p)
{
	if (c == CLAIM_DONE)
		return 0;
	if (c == CLAIM_BUSY)
		return hpr__fault_page(r, i);
	return finish_page(r, i, p);
}

/*
 * Fill the claimed run [a, b): with zeroed pages of the recycled pool
 * (rpool.c) where it has them, for absent pages of a region it serves;
 * populate the rest. Without a pool (hpr_pool_configure never called, or
 * empty) this is populate_run.
 */
static void fill_run(hpr_region *r, size_t a, size_t b, const uint8_t *prev, int *rcs)
{
	bool got[HPR_RUN_MAX_ATTACHED];
	size_t s;

	if (!hpr__rpool_has_clean() || !hpr__rpool_region_ok(r)) {
		populate_run(r, a, b, prev, rcs);
		return;
	}
	memset(got, 0, (b - a) * sizeof(got[0]));
	if (!hpr__rpool_fill(r, a, b, prev, got)) {
		populate_run(r, a, b, prev, rcs);
		return;
	}
	for (size_t i = a; i < b;) {
		if (got[i - a]) {
			rcs[i - a] = 0;
			publish_page(r, i, prev[i - a], 0);
			i++;
			continue;
		}
		for (s = i; i < b && !got[i - a]; i++)
			;
		populate_run(r, s, i, prev + (s - a), rcs + (s - a));
	}
}

/*
 * The recycled pool's hand-off, on the calling thread alone. Moving a pool
 * page in costs a page-table update under the mmap lock held for writing
 * (the mremap, and the VMA flag and name changes after it), so the moves of
 * parallel workers only queue for that lock, and every hand-over of it
 * between CPUs is a sleep and a wake-up: on a 2-vCPU VM a 2 GiB hand-off
 * took 19-21 ms on 2 workers against 2.4 ms on one thread (6.18). So
 * hpr_fault_in moves in what the pool holds first, here, in runs of up to
 * HPR_RUN_MAX_ATTACHED pages (one mremap and one check per run), and the
 * workers then populate the rest in parallel. A page that is not ABSENT,
 * or that another thread holds, is left to that pass; so is every page
 * the pool could not fill (it goes back to ABSENT, its waiters woken).
 */
size_t hpr__fault_from_pool(hpr_region *r, size_t first, size_t last)
{
	uint8_t prev[HPR_RUN_MAX_ATTACHED];
	bool got[HPR_RUN_MAX_ATTACHED];
	size_t moved = 0;

	for (size_t i = first; i < last && hpr__rpool_has_clean();) {
		size_t rs = i;
		uint8_t p = 0;

		while (i < last && i - rs < HPR_RUN_MAX_ATTACHED &&
		       hpr__page_take(r, i, HPR_PS_BIT(HPR_PS_ABSENT), HPR_PS_FAULTING, false, &p) ==
			       1)
			prev[i++ - rs] = p;
		if (i == rs) {
			i++; /* present, released, or another thread's */
			continue;
		}
		memset(got, 0, (i - rs) * sizeof(got[0]));
		moved += hpr__rpool_fill(r, rs, i, prev, got);
		for (size_t k = rs; k < i; k++) {
			if (got[k - rs])
				publish_page(r, k, prev[k - rs], 0);
			else
				hpr__page_put(r, k, prev[k - rs], HPR_PS_ABSENT);
		}
	}
	return moved;
}

static int fault_batch(hpr_region *r, size_t first, size_t last, void *arg,
		       const _Atomic bool *cancel, size_t *done, size_t *err_idx)
{
	uint8_t prev[HPR_RUN_MAX_ATTACHED];
	int rcs[HPR_RUN_MAX_ATTACHED];
	int err = 0;
	size_t i = first, max = run_max(r);

	(void)arg;
	*done = 0;
	*err_idx = (size_t)-1;
	while (i < last && !atomic_load_explicit(cancel, memory_order_relaxed)) {
		size_t rs = i;
		enum claim c;
		uint8_t p = 0;

		i = claim_run(r, i, last, prev, &c, &p);
		if (i > rs) {
			fill_run(r, rs, i, prev, rcs);
			for (size_t k = rs; k < i; k++)
				note_result(rcs[k - rs], k, &err, err_idx, done);
		}
		if (i == last || i - rs == max) {
			if (err)
				break;
			continue;
		}
		/* a claimed page is finished even after an error: it must not
		 * stay FAULTING */
		if (err && c != CLAIM_MINE)
			break;
		note_result(finish_odd(r, i, c, p), i, &err, err_idx, done);
		i++;
		if (err)
			break;
	}
	return err;
}

/* The first page of [first, last) not yet present. */
static size_t first_pending(const hpr_region *r, size_t first, size_t last)
{
	while (first < last && hpr__pstate_usable(hpr__page_state(r, first)))
		first++;
	return first;
}

/* runs of pages, one populate per run */
const struct hpr__job_ops hpr__fault_ops = { .batch = fault_batch, .pending = first_pending };

int hpr_fault_error(hpr_region *r, size_t *off)
{
	int e;

	/* a query of the region, meant for between a failing hpr_fault_in
	 * and hpr_strerror(): it keeps the call's detail (only its own
	 * failure replaces it) */
	if (!r)
		return hpr__fail(-EINVAL, "hpr_fault_error: region is NULL");
	pthread_mutex_lock(&r->partial_mu);
	e = atomic_load(&r->fault_err);
	if (off)
		*off = e ? atomic_load(&r->fault_err_off) : (size_t)-1;
	pthread_mutex_unlock(&r->partial_mu);
	return e;
}
