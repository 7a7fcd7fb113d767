/* SPDX-License-Identifier: MIT */
/*
 * Lazy release and reclaim.
 *
 * Release works on whole huge pages only. A partial huge page is remembered
 * (a 512-bit map of its 1/512ths) until the rest of it is released, so a
 * release never splits a THP; a later hpr_fault_in of part of it clears
 * those bits again.
 *
 *  THP (private anonymous): MADV_FREE. Contiguous released pages go to the
 *  kernel in one call, so a burst costs one TLB flush, not one per page.
 *  While the call is in flight the pages are BUSY in the fault table, so a
 *  concurrent fault-in waits rather than losing its data to the free.
 *
 *  THP with release_delay_ms (hpr_config): the release is a state change,
 *  like shmem's, and the page is "held": still mapped, dirty and the
 *  region's. A held page reused within the delay is PRESENT again at the
 *  price of a state change (no system call, no TLB flush, no check: it
 *  never left). The workers give the held pages whose delay is over to the
 *  kernel with MADV_FREE, in runs, when the earliest falls due (a timed
 *  wait, pool.due); hpr_reclaim() and the PSI reclaimer discard held pages
 *  as any released ones. Each held page keeps the time of its release
 *  (held_ns, 0: not held); the page's fault-table slot orders the flag's
 *  changes: it is set while the release holds the page BUSY, cleared by
 *  the fault-in that takes it (FAULTING), the worker that frees it or the
 *  reclaim that discards it (BUSY).
 *
 *  Locked THP memory (HPR_F_LOCK, or the application's mlockall: the kernel
 *  refuses MADV_FREE on VM_LOCKED VMAs with EINVAL) is released like shmem:
 *  a state change, the memory stays resident and locked; hpr_reclaim() gives
 *  it back with MADV_DONTNEED_LOCKED.
 *
 *  shmem / hugetlb (no MADV_FREE there): the release is a state change only:
 *  no syscall, no TLB flush (the "volatile ranges" idea). Reuse before
 *  reclaim costs nothing. Reclaim punches holes (FALLOC_FL_PUNCH_HOLE) when
 *  hpr_reclaim() asks, when the lazy budget is exceeded, or when a PSI
 *  trigger fires (HPR_F_PSI_RECLAIM): on the caller's cgroup v2
 *  memory.pressure, or /proc/pressure/memory in the root cgroup.
 *
 * Reclaim and reuse of one huge page serialize on its fault-table slot: a
 * page being reclaimed is BUSY, and a page faulted back is PRESENT, which
 * reclaim never touches.
 *
 * Reclaim takes the oldest releases first, from a FIFO of the releases
 * (page index and a per-page release number), so it costs O(pages it
 * looks at), not a scan of the region per call. A page reused and released
 * again gets a new number, which makes its older entry stale; stale
 * entries are dropped as they come to the head, and the FIFO is compacted
 * when it would have to grow past twice the region's pages, so it stays
 * within 2 entries per huge page.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "rpool.h"
#include "lazyload.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PARTIAL_WORDS 8 /* 512 bits */

struct lazy_ent {
	size_t idx;
	uint64_t seq;
};

struct hpr__lazyq {
	pthread_mutex_t mu;
	struct lazy_ent *e; /* ring: releases, oldest at head */
	size_t head, len, cap;
	size_t reserved; /* room promised to release_run calls in flight */
	uint64_t next_seq;
	_Atomic uint64_t *seq; /* per page: the number of its latest release */
};

/* Is the entry still the page's latest release, and the page released? */
static bool ent_live(const hpr_region *r, const struct lazy_ent *e)
{
	const struct hpr__lazyq *q = r->lazyq;

	return hpr__page_state(r, e->idx) == HPR_PS_LAZY &&
	       atomic_load_explicit(&q->seq[e->idx], memory_order_relaxed) == e->seq;
}

/* Drop stale entries, keeping the order. q->mu held. */
static void lazyq_compact(hpr_region *r)
{
	struct hpr__lazyq *q = r->lazyq;
	size_t w = 0;

	for (size_t k = 0; k < q->len; k++) {
		struct lazy_ent e = q->e[(q->head + k) % q->cap];

		if (ent_live(r, &e))
			q->e[(q->head + w++) % q->cap] = e;
	}
	q->len = w;
}

/*
 * Promise room for n more entries (one per page a release run may make
 * LAZY): compact, then grow the ring (up to 2 entries per page). Called
 * before the pages change state, so running out of memory fails the
 * release cleanly. Returns 0 or -ENOMEM.
 */
static int lazyq_reserve(hpr_region *r, size_t n)
{
	struct hpr__lazyq *q = r->lazyq;
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	if (!q->seq) {
		q->seq = calloc(r->npages, sizeof(*q->seq));
		if (!q->seq)
			rc = -ENOMEM;
	}
	if (!rc && q->len + q->reserved + n > q->cap)
		lazyq_compact(r);
	if (!rc && q->len + q->reserved + n > q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 64, want = q->len + q->reserved + n;
		struct lazy_ent *e;

		if (cap < want)
			cap = want;
		if (cap > 2 * r->npages + 64 && want <= 2 * r->npages + 64)
			cap = 2 * r->npages + 64;
		e = malloc(cap * sizeof(*e));
		if (!e) {
			rc = -ENOMEM;
		} else {
			for (size_t k = 0; k < q->len; k++)
				e[k] = q->e[(q->head + k) % q->cap];
			free(q->e);
			q->e = e;
			q->head = 0;
			q->cap = cap;
		}
	}
	if (!rc)
		q->reserved += n;
	pthread_mutex_unlock(&q->mu);
	return rc;
}

static void lazyq_unreserve(hpr_region *r, size_t n)
{
	pthread_mutex_lock(&r->lazyq->mu);
	r->lazyq->reserved -= n;
	pthread_mutex_unlock(&r->lazyq->mu);
}

/* Append e into reserved room: with a new release number for page e.idx
 * (now LAZY), or as it was (requeue: a reclaim that failed puts it back). */
static void lazyq_push(hpr_region *r, struct lazy_ent e, bool requeue)
{
	struct hpr__lazyq *q = r->lazyq;

	pthread_mutex_lock(&q->mu);
	if (!requeue) {
		e.seq = ++q->next_seq;
		atomic_store_explicit(&q->seq[e.idx], e.seq, memory_order_relaxed);
	}
	q->reserved--;
	q->e[(q->head + q->len++) % q->cap] = e;
	pthread_mutex_unlock(&q->mu);
}

/* Take the oldest entry; false when the FIFO is empty. */
static bool lazyq_pop(hpr_region *r, struct lazy_ent *e)
{
	struct hpr__lazyq *q = r->lazyq;
	bool got = false;

	pthread_mutex_lock(&q->mu);
	if (q->len) {
		*e = q->e[q->head];
		q->head = (q->head + 1) % q->cap;
		q->len--;
		got = true;
	}
	pthread_mutex_unlock(&q->mu);
	return got;
}

static size_t lazyq_len(hpr_region *r)
{
	size_t n;

	pthread_mutex_lock(&r->lazyq->mu);
	n = r->lazyq->len;
	pthread_mutex_unlock(&r->lazyq->mu);
	return n;
}

static int reclaimer_restart(hpr_region *r);

static size_t chunk_size(const hpr_region *r)
{
	return r->page_size / 512;
}

/* Mark [lo, hi) (offsets inside page idx) released; true when the whole
 * page now is. */
static bool partial_mark(hpr_region *r, size_t idx, size_t lo, size_t hi)
{
	size_t cs = chunk_size(r);
	size_t c0 = (lo + cs - 1) / cs, c1 = hi / cs; /* whole chunks only */
	uint64_t *m;
	bool full = true;

	if (c0 >= c1)
		return false;
	pthread_mutex_lock(&r->partial_mu);
	m = atomic_load(&r->partial[idx]);
	if (!m) {
		m = calloc(PARTIAL_WORDS, sizeof(*m));
		if (!m) {
			pthread_mutex_unlock(&r->partial_mu);
			return false; /* forgetting a partial release is safe */
		}
		atomic_store(&r->partial[idx], m);
	}
	for (size_t c = c0; c < c1; c++)
		m[c / 64] |= 1ULL << (c % 64);
	for (int w = 0; w < PARTIAL_WORDS; w++)
		if (m[w] != ~0ULL)
			full = false;
	if (full) {
		atomic_store(&r->partial[idx], NULL);
		free(m);
	}
	pthread_mutex_unlock(&r->partial_mu);
	return full;
}

/* Forget page idx's partial release map, if it has one. */
static void partial_drop(hpr_region *r, size_t idx)
{
	uint64_t *m = atomic_load(&r->partial[idx]);

	if (!m)
		return;
	pthread_mutex_lock(&r->partial_mu);
	m = atomic_load(&r->partial[idx]);
	atomic_store(&r->partial[idx], NULL);
	pthread_mutex_unlock(&r->partial_mu);
	free(m);
}

void hpr__partial_clear(hpr_region *r, size_t off, size_t len)
{
	size_t first = off >> r->page_shift;
	size_t last = (off + len + r->page_size - 1) >> r->page_shift;

	/* reusing part of a partly released page: forget the release
	 * (conservative: the page stays whole and in use) */
	for (size_t i = first; i < last; i++)
		partial_drop(r, i);
}

/*
 * Try to take page idx from PRESENT to BUSY. Returns 1 when taken, 0 when the
 * page is not PRESENT (absent, already released), and -1 when it is in a
 * transition (FAULTING/BUSY) and wait was false.
 */
static int take_busy(hpr_region *r, size_t idx, bool wait)
{
	uint8_t was;

	return hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_PRESENT), HPR_PS_BUSY, wait, &was);
}

/* ---- release_delay_ms: held pages ---- */

/* Page idx is not held any more (whoever changes it holds it taken). */
static bool held_clear(hpr_region *r, size_t idx)
{
	if (!r->held_ns || !atomic_exchange(&r->held_ns[idx], 0))
		return false;
	atomic_fetch_sub(&r->held_pages, 1);
	return true;
}

bool hpr__held_take(hpr_region *r, size_t idx)
{
	return held_clear(r, idx);
}

/* Lower the earliest due time to due; true when none was known (0). */
static bool held_due(hpr_region *r, uint64_t due)
{
	uint64_t cur = atomic_load(&r->held_next_ns);

	for (;;) {
		if (cur && cur <= due)
			return false;
		if (atomic_compare_exchange_weak(&r->held_next_ns, &cur, due))
			return cur == 0;
	}
}

static uint64_t earlier(uint64_t a, uint64_t b)
{
	return !a || (b && b < a) ? b : a;
}

/* Give the BUSY held run [a, b) to the kernel: one MADV_FREE. Refused
 * (the application mlocked the region since: EINVAL), the pages stay
 * released by a state change, as on locked memory. */
static void held_free_run(hpr_region *r, size_t a, size_t b)
{
	size_t len = (b - a) << r->page_shift;
	int rc = hpr__os_discard(r->base + hpr__page_off(r, a), len, HPR__DISCARD_LAZY);

	if (rc && rc != -EINVAL)
		hpr__log(HPR_LOG_WARN,
			 "region '%s': giving released [%#zx, +%#zx) to the kernel failed (%s); "
			 "it stays resident until reused or reclaimed",
			 r->name, hpr__page_off(r, a), len, strerror(-rc));
	for (size_t i = a; i < b; i++) {
		held_clear(r, i);
		hpr__page_put(r, i, HPR_PS_LAZY, HPR_PS_LAZY);
	}
}

/*
 * Page i for held_flush: taken BUSY and due (true), or not, with what it
 * tells about the next due time in *next. A page in a transition is
 * looked at again soon; a settled page that is not LAZY has lost its
 * flag without it being cleared (a forked child's transitions) and is
 * cleared here, under the taken slot.
 */
static bool held_take_due(hpr_region *r, size_t i, bool all, uint64_t now, uint64_t *next)
{
	uint64_t d = r->release_delay_ns, t = atomic_load(&r->held_ns[i]);
	uint8_t was;
	int tk;

	if (!t)
		return false;
	if (!all && now - t < d) {
		*next = earlier(*next, t + d);
		return false;
	}
	tk = hpr__page_take(r, i,
			    HPR_PS_BIT(HPR_PS_LAZY) | HPR_PS_BIT(HPR_PS_PRESENT) |
				    HPR_PS_BIT(HPR_PS_ABSENT),
			    HPR_PS_BUSY, false, &was);
	if (tk != 1) {
		*next = earlier(*next, now + d / 4 + 1);
		return false;
	}
	t = atomic_load(&r->held_ns[i]);
	if (was == HPR_PS_LAZY && t && (all || now - t >= d))
		return true;
	if (was != HPR_PS_LAZY)
		held_clear(r, i);
	else if (t)
		*next = earlier(*next, t + d);
	hpr__page_put(r, i, was, was);
	return false;
}

/* Free the held pages whose delay is over (all: every held page), in runs
 * of up to 512 pages, and publish when the next is due. */
static void held_flush(hpr_region *r, bool all)
{
	uint64_t now = hpr__now_ns(), next = 0;
	size_t i = 0, n = r->npages;

	/* a release from here on lowers it again (held_due); one before
	 * this has its page flagged already, and the walk sees it */
	atomic_store(&r->held_next_ns, 0);
	while (i < n) {
		size_t rs = i;

		while (i < n && i - rs < 512 && held_take_due(r, i, all, now, &next))
			i++;
		if (i > rs)
			held_free_run(r, rs, i);
		else
			i++;
	}
	if (next)
		held_due(r, next);
}

void hpr__release_idle(hpr_region *r)
{
	uint64_t due;

	if (!r->held_ns || !atomic_load(&r->held_pages))
		return;
	due = atomic_load(&r->held_next_ns);
	if (!due || due <= hpr__now_ns())
		held_flush(r, false);
}

uint64_t hpr__release_due(hpr_region *r)
{
	uint64_t due;

	if (!r->held_ns || !atomic_load(&r->held_pages))
		return 0;
	due = atomic_load(&r->held_next_ns);
	if (due)
		return due;
	/* held pages, none known due (a forked child's, or a walk that
	 * met them all in a transition): walk again after one delay */
	held_due(r, hpr__now_ns() + r->release_delay_ns);
	return atomic_load(&r->held_next_ns);
}

void hpr__release_held_child(hpr_region *r)
{
	size_t n = 0;

	if (!r->held_ns)
		return;
	for (size_t i = 0; i < r->npages; i++) {
		if (!atomic_load_explicit(&r->held_ns[i], memory_order_relaxed))
			continue;
		if (hpr__page_state(r, i) == HPR_PS_LAZY)
			n++;
		else
			atomic_store_explicit(&r->held_ns[i], 0, memory_order_relaxed);
	}
	atomic_store(&r->held_pages, n);
	/* no worker here yet: the child's first release kicks one, which
	 * frees what the child inherited as well */
	atomic_store(&r->held_next_ns, 0);
}

/* Release the BUSY run [a, b): one syscall for the run. */
static int release_run(hpr_region *r, size_t a, size_t b)
{
	char *p = r->base + hpr__page_off(r, a);
	size_t len = (b - a) << r->page_shift;
	int rc = lazyq_reserve(r, b - a);
	bool guard_failed = false, hold = false;
	uint64_t now = 0;

	if (rc) {
		for (size_t i = a; i < b; i++)
			hpr__page_put(r, i, HPR_PS_PRESENT, HPR_PS_PRESENT);
		return hpr__fail(rc, "region '%s': out of memory for the release FIFO", r->name);
	}
	if (r->flags & HPR_F_GUARD) {
		/* its message says what happened (vm.max_map_count) */
		rc = hpr__guard_protect(r, hpr__page_off(r, a), len, PROT_NONE);
		guard_failed = rc != 0;
	}
	/* release_delay_ms: held, no system call (guard mode's pages are
	 * PROT_NONE already: they go to the kernel at once) */
	hold = !rc && r->held_ns && !(r->flags & HPR_F_GUARD) && !hpr__mem_locked(r, false);
	if (hold) {
		now = hpr__now_ns();
	} else if (!rc && r->backend == HPR_BACKEND_THP && !hpr__mem_locked(r, false)) {
		rc = hpr__os_discard(p, len, HPR__DISCARD_LAZY);
		/* the kernel refuses MADV_FREE on VM_LOCKED memory (the
		 * application's mlockall): a state change only, as on shmem */
		if (rc == -EINVAL && hpr__mem_locked(r, true))
			rc = 0;
		if (rc && (r->flags & HPR_F_GUARD))
			hpr__os->mprotect(p, len, PROT_READ | PROT_WRITE);
	}
	for (size_t i = a; i < b; i++) {
		if (rc) {
			hpr__page_put(r, i, HPR_PS_PRESENT, HPR_PS_PRESENT);
			continue;
		}
		if (hold && !atomic_exchange(&r->held_ns[i], now))
			atomic_fetch_add(&r->held_pages, 1);
		hpr__page_put(r, i, HPR_PS_PRESENT, HPR_PS_LAZY);
		lazyq_push(r, (struct lazy_ent){ .idx = i }, false);
	}
	/* the first held page since the workers last looked: one of them
	 * waits for it to fall due; none can run (no thread): freed now */
	if (hold && held_due(r, now + r->release_delay_ns) && hpr__pool_kick(r))
		held_flush(r, true);
	if (rc)
		lazyq_unreserve(r, b - a);
	if (rc && !guard_failed)
		return hpr__fail(rc, "region '%s': releasing [%#zx, +%#zx) failed: %s", r->name,
				 hpr__page_off(r, a), len, strerror(-rc));
	return rc;
}

static int reclaim(hpr_region *r, size_t max_bytes, size_t *reclaimed);

/*
 * The whole huge pages [*first, *last) that releasing [off, off+len) makes
 * released: those inside it, and a partly covered head or tail page whose
 * last part this release is (partial_mark). False when there is none.
 */
static bool whole_pages(hpr_region *r, size_t off, size_t len, size_t *first, size_t *last)
{
	size_t end = off + len;

	*first = (off + r->page_size - 1) >> r->page_shift;
	*last = end >> r->page_shift;
	if (*first > *last) { /* inside one page */
		size_t idx = off >> r->page_shift;

		if (!partial_mark(r, idx, off - hpr__page_off(r, idx), end - hpr__page_off(r, idx)))
			return false;
		*first = idx;
		*last = idx + 1;
		return true;
	}
	if (off & (r->page_size - 1)) {
		size_t idx = off >> r->page_shift;

		if (partial_mark(r, idx, off - hpr__page_off(r, idx), r->page_size))
			*first = idx;
	}
	if (end & (r->page_size - 1)) {
		size_t idx = end >> r->page_shift;

		if (partial_mark(r, idx, 0, end - hpr__page_off(r, idx)))
			*last = idx + 1;
	}
	return true;
}

/*
 * Gather runs of PRESENT pages of [first, last) taken BUSY and give each
 * run to the kernel in one call. Pages are taken in ascending order and a
 * page in transition is waited for only after the run held so far has been
 * flushed, so a release never sleeps while holding other pages BUSY (no
 * lock-order cycles with other releases, no fault-in stuck behind an
 * unrelated wait). Returns the first error.
 */
static int release_pages(hpr_region *r, size_t first, size_t last)
{
	size_t run = (size_t)-1;
	int rc = 0;

	for (size_t i = first; i < last; i++) {
		int t;

		partial_drop(r, i); /* released whole now */
		t = take_busy(r, i, false);
		if (t == 1) {
			if (run == (size_t)-1)
				run = i;
			continue;
		}
		if (run != (size_t)-1) {
			int e = release_run(r, run, i);

			rc = rc ? rc : e;
			run = (size_t)-1;
		}
		if (t < 0 && take_busy(r, i, true) == 1)
			run = i;
	}
	if (run != (size_t)-1) {
		int e = release_run(r, run, last);

		rc = rc ? rc : e;
	}
	return rc;
}

int hpr_release_lazy(hpr_region *r, size_t off, size_t len)
{
	size_t first, last;
	int rc;

	hpr__err_clear();
	/* checked only: a release rounds inwards (whole_pages) */
	rc = hpr__range_of("hpr_release_lazy", r, off, len, &first, &last);
	if (!rc && len)
		rc = hpr__lazy_busy(r, "hpr_release_lazy");
	if (rc || !len)
		return rc;
	if (atomic_load_explicit(&r->reclaimer_restart, memory_order_relaxed)) {
		rc = reclaimer_restart(r);
		if (rc)
			return rc;
	}
	if (!whole_pages(r, off, len, &first, &last))
		return 0;
	rc = release_pages(r, first, last);
	if (!rc && r->lazy_budget && (r->backend != HPR_BACKEND_THP || hpr__mem_locked(r, false))) {
		size_t lazy = atomic_load(&r->lazy_pages) << r->page_shift;

		if (lazy > r->lazy_budget)
			reclaim(r, lazy - r->lazy_budget, NULL);
	}
	return rc;
}

/*
 * Is the region's memory mlocked: HPR_F_LOCK, or the application's mlockall
 * (VM_LOCKED on its VMAs)? Known once seen; ask_kernel reads smaps' Locked
 * (only on the paths where the kernel has just refused an madvise, and once
 * per load), never on the release fast path.
 */
bool hpr__mem_locked(hpr_region *r, bool ask_kernel)
{
	struct hpr__smaps_sum s;

	if (r->locked || atomic_load_explicit(&r->mem_locked, memory_order_relaxed))
		return true;
	if (!ask_kernel || hpr__smaps_range((uintptr_t)r->base, (uintptr_t)r->base + r->size, &s) ||
	    !s.locked)
		return false;
	atomic_store(&r->mem_locked, true);
	return true;
}

/* Give one huge page's memory back to the kernel now, whatever its state
 * (the caller holds it BUSY): MADV_DONTNEED for private anonymous memory,
 * a hole punched in the file for shmem and hugetlb. Locked memory too:
 * MADV_DONTNEED is EINVAL on VM_LOCKED VMAs, MADV_DONTNEED_LOCKED (Linux
 * 5.18) is not, and a later fault-in of the page locks it again (the VMA
 * stays VM_LOCKED). -EPERM: locked, and the kernel lacks the latter. */
int hpr__discard_page(hpr_region *r, size_t idx)
{
	char *a = r->base + hpr__page_off(r, idx);
	int rc;

	/* a private attach (r->cow): drop our copies, the kept file's bytes
	 * show through again; its file is read-only and not ours to punch */
	if (r->backend == HPR_BACKEND_THP || r->cow) {
		rc = hpr__os_discard(a, r->page_size, HPR__DISCARD_NOW);
		if (rc == -EINVAL && hpr__mem_locked(r, true)) {
			rc = hpr__os_discard(a, r->page_size, HPR__DISCARD_LOCKED);
			if (rc == -EINVAL)
				rc = -EPERM;
		}
		if (!rc) /* a held page (a save's discard of a released page) */
			held_clear(r, idx);
		return rc;
	}
	return hpr__os->fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (off_t)hpr__page_off(r, idx), (off_t)r->page_size);
}

/* Discard one LAZY page now. Returns 1 if discarded, 0 if not lazy. */
static int reclaim_page(hpr_region *r, size_t idx)
{
	uint8_t was;
	int rc;

	/* a page in a transition is not lazy (now) */
	if (hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_LAZY), HPR_PS_BUSY, false, &was) != 1)
		return 0;
	/* the recycled pool (rpool.c; off unless hpr_pool_configure turned
	 * it on) takes a whole released THP page instead of its discard */
	rc = hpr__rpool_take_page(r, idx) ? 0 : hpr__discard_page(r, idx);
	if (!rc) {
		held_clear(r, idx);
		atomic_fetch_add(&r->reclaimed_bytes, r->page_size);
	}
	hpr__page_put(r, idx, HPR_PS_LAZY, rc ? HPR_PS_LAZY : HPR_PS_ABSENT);
	return rc ? rc : 1;
}

/*
 * Discard the oldest releases until max_bytes (0: all). Looks at each
 * entry queued when it started at most once: a page whose discard fails
 * goes back to the tail and is tried again by the next reclaim.
 */
static int reclaim(hpr_region *r, size_t max_bytes, size_t *reclaimed)
{
	size_t got = 0, n = lazyq_len(r);
	struct lazy_ent ent;
	int rc = 0;

	for (size_t k = 0; k < n && !(max_bytes && got >= max_bytes); k++) {
		int e;

		if (!lazyq_pop(r, &ent))
			break;
		if (!ent_live(r, &ent))
			continue; /* reused (and maybe released again) since */
		e = reclaim_page(r, ent.idx);
		if (e == 1) {
			got += r->page_size;
		} else if (e < 0) {
			if (!lazyq_reserve(r, 1))
				lazyq_push(r, ent, true);
			if (!rc && e == -EPERM)
				rc = hpr__fail(
					e,
					"region '%s' is mlocked and this kernel has no "
					"MADV_DONTNEED_LOCKED (Linux 5.18): its released pages "
					"stay resident; munlock the region to reclaim them",
					r->name);
			else if (!rc)
				rc = hpr__fail(e, "region '%s': reclaiming offset %#zx failed: %s",
					       r->name, hpr__page_off(r, ent.idx), strerror(-e));
		}
	}
	if (reclaimed)
		*reclaimed = got;
	return rc;
}

int hpr_reclaim(hpr_region *r, size_t max_bytes, size_t *reclaimed)
{
	hpr__err_clear();
	if (reclaimed)
		*reclaimed = 0;
	if (!r)
		return hpr__fail(-EINVAL, "hpr_reclaim: region is NULL");
	if (r->not_mapped)
		return hpr__region_mapped(r);
	if (hpr__lazy_running(r))
		return hpr__lazy_busy(r, "hpr_reclaim");
	return reclaim(r, max_bytes, reclaimed);
}

/* ---- PSI-driven reclaimer (HPR_F_PSI_RECLAIM) ---- */

/*
 * The pressure file to watch: the caller's cgroup v2 memory.pressure when it
 * is in a cgroup other than the root (a container's limit is what the
 * region should yield to), else the system's /proc/pressure/memory. PSI is
 * accounted per cgroup of the unified hierarchy even when the memory
 * controller itself is on v1. Opened O_RDWR: a trigger is written to it.
 * Returns the fd, or -errno of the last open with tried[] naming each file
 * tried and why it failed.
 */
static int open_pressure(char *path, size_t len, char *tried, size_t tlen)
{
	static const char *const roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	char *buf = NULL;
	ssize_t got = hpr__os->read_all("/proc/self/cgroup", &buf);
	size_t used = 0;
	int fd;

	tried[0] = 0;
	if (got > 0) {
		for (char *line = buf; line && *line;) {
			char *nl = strchr(line, '\n');

			if (nl)
				*nl = 0;
			if (!strncmp(line, "0::", 3) && strcmp(line + 3, "/")) {
				for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
					snprintf(path, len, "%s%s/memory.pressure", roots[i],
						 line + 3);
					fd = hpr__os->openat(AT_FDCWD, path,
							     O_RDWR | O_NONBLOCK | O_CLOEXEC, 0);
					if (fd >= 0) {
						free(buf);
						return fd;
					}
					if (fd != -ENOENT && used < tlen)
						used += (size_t)snprintf(tried + used, tlen - used,
									 "%s: %s; ", path,
									 strerror(-fd));
				}
			}
			line = nl ? nl + 1 : NULL;
		}
	}
	free(buf);
	snprintf(path, len, "/proc/pressure/memory");
	fd = hpr__os->openat(AT_FDCWD, path, O_RDWR | O_NONBLOCK | O_CLOEXEC, 0);
	if (fd < 0 && used < tlen)
		snprintf(tried + used, tlen - used, "%s: %s", path, strerror(-fd));
	return fd;
}

static void psi_close(hpr_region *r)
{
	pthread_mutex_lock(&r->rel_mu);
	if (r->psi_fd >= 0)
		hpr__os->close(r->psi_fd);
	r->psi_fd = -1;
	pthread_mutex_unlock(&r->rel_mu);
}

/*
 * Open the pressure file and arm a "some" trigger on it, on the caller's
 * thread, so hpr_create can report a trigger that cannot be armed: the
 * caller asked for reclaim under pressure, and a region that silently does
 * without it is not what it asked for.
 */
static int psi_arm(hpr_region *r, int *out)
{
	char trig[64], path[512], tried[1200];
	int fd = open_pressure(path, sizeof(path), tried, sizeof(tried));
	int err;

	if (fd < 0)
		return hpr__fail(fd == -EACCES || fd == -EPERM ? fd : -EOPNOTSUPP,
				 "HPR_F_PSI_RECLAIM: cannot open a memory pressure file "
				 "(%s): the process needs write access to its cgroup v2 "
				 "memory.pressure or to /proc/pressure/memory (root, or "
				 "the file's owner), or create the region without "
				 "HPR_F_PSI_RECLAIM and call hpr_reclaim() yourself",
				 tried);
	snprintf(trig, sizeof(trig), "some %u 1000000", r->psi_stall_us);
	err = hpr__os->psi_trigger(fd, trig);
	if (err == -EINVAL) {
		/* Linux 6.5+: without CAP_SYS_RESOURCE the window must be a
		 * multiple of 2 s; keep the same share of stall over 2 s */
		unsigned long long us = 2ULL * r->psi_stall_us;

		snprintf(trig, sizeof(trig), "some %llu 2000000", us < 2000000 ? us : 1999999);
		err = hpr__os->psi_trigger(fd, trig);
	}
	if (err) {
		int e = -err;

		hpr__os->close(fd);
		return hpr__fail(e == EACCES || e == EPERM ? -e : -EOPNOTSUPP,
				 "HPR_F_PSI_RECLAIM: the kernel refused the PSI trigger "
				 "'%s' on %s (%s): check psi_stall_us (at most 1 s per "
				 "1 s window) and the process's rights on that file, or "
				 "create the region without HPR_F_PSI_RECLAIM",
				 trig, path, strerror(e));
	}
	hpr__log(HPR_LOG_INFO, "region '%s': reclaiming on memory pressure from %s (%s)", r->name,
		 path, trig);
	*out = fd;
	return 0;
}

/* The reclaimer thread: waits on the armed trigger (r->psi_fd) and on
 * its pipe, whose write end hpr__release_destroy closes. */
static void *reclaimer_main(void *arg)
{
	hpr_region *r = arg;
	struct pollfd pf[2];

	pf[0].fd = r->psi_fd;
	pf[0].events = POLLPRI;
	pf[1].fd = r->reclaimer_pipe[0];
	pf[1].events = POLLIN;
	for (;;) {
		int n = poll(pf, 2, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (pf[1].revents & (POLLIN | POLLHUP)))
			break;
		if (pf[0].revents & POLLERR)
			break;
		if (pf[0].revents & POLLPRI) {
			size_t got = 0;

			reclaim(r, 0, &got);
			hpr__log(HPR_LOG_INFO, "region '%s': memory pressure, reclaimed %zu bytes",
				 r->name, got);
		}
	}
	psi_close(r);
	return NULL;
}

/* Arm the trigger on the caller's thread (its failure is the caller's
 * error) and start the thread. rel_mu held: a fork never sees an fd that
 * is open but not yet in r->psi_fd (the child closes its copies). */
static int reclaimer_start(hpr_region *r)
{
	cpu_set_t cpus;
	int rc, fd = -1;

	rc = psi_arm(r, &fd);
	if (rc)
		return rc;
	if (pipe2(r->reclaimer_pipe, O_CLOEXEC)) {
		rc = -errno;
		hpr__os->close(fd);
		r->reclaimer_pipe[0] = r->reclaimer_pipe[1] = -1;
		return hpr__fail(rc, "HPR_F_PSI_RECLAIM: %s", strerror(-rc));
	}
	r->psi_fd = fd;
	rc = hpr__thread_start(&r->reclaimer, reclaimer_main, r, "hpr-reclaim",
			       hpr__numa_cpus(&r->numa, &cpus) ? NULL : &cpus, 0);
	if (rc) {
		hpr__os->close(fd);
		r->psi_fd = -1;
		close(r->reclaimer_pipe[0]);
		close(r->reclaimer_pipe[1]);
		r->reclaimer_pipe[0] = r->reclaimer_pipe[1] = -1;
		return hpr__fail(rc, "cannot start the reclaimer thread: %s", strerror(-rc));
	}
	r->reclaimer_running = true;
	return 0;
}

int hpr__release_init(hpr_region *r)
{
	int rc;

	r->psi_fd = -1;
	r->lazyq = calloc(1, sizeof(*r->lazyq));
	if (!r->lazyq)
		return hpr__fail(-ENOMEM, "hpr_create: out of memory");
	pthread_mutex_init(&r->lazyq->mu, NULL);
	if (!(r->flags & HPR_F_PSI_RECLAIM))
		return 0;
	if (!hpr__caps()->info.have_psi)
		return hpr__fail(-EOPNOTSUPP, "HPR_F_PSI_RECLAIM: this kernel has no "
					      "/proc/pressure/memory (boot with psi=1)");
	pthread_mutex_lock(&r->rel_mu);
	rc = reclaimer_start(r);
	pthread_mutex_unlock(&r->rel_mu);
	return rc;
}

void hpr__release_atfork(hpr_region *r, int phase)
{
	bool child = hpr__fork_mutex(&r->rel_mu, phase);

	/* the release FIFO's lock, taken after rel_mu (nothing takes them
	 * the other way round) */
	if (r->lazyq)
		child = hpr__fork_mutex(&r->lazyq->mu, phase) || child;
	if (!child)
		return;
	/* child: the reclaimer thread is the parent's; close our copies of
	 * its fds (the trigger stays armed for the parent's copy) */
	if (!r->reclaimer_running)
		return;
	if (r->psi_fd >= 0)
		hpr__os->close(r->psi_fd);
	r->psi_fd = -1;
	close(r->reclaimer_pipe[0]);
	close(r->reclaimer_pipe[1]);
	r->reclaimer_pipe[0] = r->reclaimer_pipe[1] = -1;
	r->reclaimer_running = false;
	r->reclaimer_restart = true;
}

/* A forked child's reclaimer starts again when the child releases (its
 * first hpr_release_lazy), not in the fork handler: a child that only
 * reads, or execs, gets no thread. */
static int reclaimer_restart(hpr_region *r)
{
	int rc = 0;

	pthread_mutex_lock(&r->rel_mu);
	if (r->reclaimer_restart && !r->reclaimer_running) {
		rc = reclaimer_start(r);
		if (!rc)
			r->reclaimer_restart = false;
	}
	pthread_mutex_unlock(&r->rel_mu);
	return rc;
}

void hpr__release_destroy(hpr_region *r)
{
	if (r->reclaimer_running) {
		close(r->reclaimer_pipe[1]);
		pthread_join(r->reclaimer, NULL);
		close(r->reclaimer_pipe[0]);
		r->reclaimer_running = false;
	}
	if (r->lazyq) {
		pthread_mutex_destroy(&r->lazyq->mu);
		free(r->lazyq->e);
		free((void *)r->lazyq->seq);
		free(r->lazyq);
		r->lazyq = NULL;
	}
}
