/* SPDX-License-Identifier: MIT */
/*
 * The recycled huge-page pool (docs/pool.md): a process-wide store of THP
 * huge pages that destroyed regions gave up, zeroed in the background and
 * moved into fresh fault-ins instead of faulting and clearing new ones.
 *
 * Pages move by page tables only: mremap of whole, PMD-aligned huge pages
 * moves each PMD (mm/mremap.c move_huge_pmd), so a 2 MiB page changes
 * place for the price of a page-table update. The pool keeps its pages in
 * chunks, each an aligned range that one region run was moved to; a page
 * is GONE (moved out or freed), DIRTY (old contents), ZEROING (a thread
 * writes zeros over it, no lock held), CLEAN (zeros) or MOVING (being
 * moved into a region, no lock held).
 *
 * Every move leaves its source mapped and empty (MREMAP_DONTUNMAP), and a
 * chunk's range stays mapped until its last page has left: a plain move
 * would leave a hole that another thread's mmap (a region, a thread
 * stack) could take, and the region's unmap, or the pool's view of the
 * chunk, would then hit that mapping (seen: a thread stack overwritten,
 * a region handed another region's bytes).
 *
 * The rules that keep old bytes from leaking:
 *  - only CLEAN pages are handed out, and a page becomes CLEAN only after
 *    its thread wrote zeros over all of it while it was PMD-mapped and
 *    dirty (so the kernel could not swap in a lazily freed copy);
 *  - every pool page is MADV_FREE (lazily freeable): the kernel may take
 *    it under pressure, and then it reads as zeros; so a CLEAN page holds
 *    zeros, or nothing, and stays so;
 *  - a page handed out is dirtied at once (one byte written with its own
 *    value: the PMD's dirty bit, so the kernel keeps it) and checked to be
 *    PMD-mapped; one the kernel took meanwhile is left to the normal
 *    populate, which fills it with pages the kernel zeroes.
 * Pool pages are MADV_DONTFORK from before they are moved in, and
 * MADV_DOFORK again once moved into a region: a child never maps them.
 *
 * Locks: cfg_mu serialises hpr_pool_configure(); mu guards the rest. Both
 * are a fork leaf taken before the pagemap and probe leaves (internal.h):
 * mu may be held while asking the pagemap. No region lock is ever taken
 * under either, and no user callback is called under them.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "rpool.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { PG_GONE, PG_DIRTY, PG_ZEROING, PG_CLEAN, PG_MOVING };

struct chunk {
	struct chunk *next;
	char *base;
	size_t npages;
	size_t live; /* pages not GONE */
	uint8_t st[];
};

#define MAX_THREADS 64

static struct {
	pthread_mutex_t cfg_mu;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* zeroing threads wait for DIRTY pages */
	size_t ps;
	unsigned shift;
	size_t max_pages;
	unsigned flags;
	struct chunk *chunks;
	size_t pages; /* held, and reserved by donations in flight */
	size_t dirty, clean;
	pthread_t threads[MAX_THREADS];
	unsigned nthreads, want_threads;
	bool stopping;
	uint64_t donated, handed, zeroed, dropped, trimmed, zero_ns; /* pages; ns */
	int method;
	hpr__zero_fn zero;
} P = {
	.cfg_mu = PTHREAD_MUTEX_INITIALIZER,
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};
/* P.clean, for the fault path's lock-free look */
static _Atomic size_t clean_avail;
/* P.max_pages != 0, for hpr_destroy's lock-free look: with the pool off
 * (never configured, or configured to 0) a destroy takes no pool lock */
static _Atomic bool pool_on;

bool hpr__rpool_has_clean(void)
{
	return atomic_load_explicit(&clean_avail, memory_order_relaxed) != 0;
}

/* Is [a, a+len) present and PMD-mapped, all of it? (the kernel's word) */
static bool huge_at(const char *a, size_t len)
{
	uint64_t present, huge;

	if (hpr__pagemap_count((uintptr_t)a, (uintptr_t)a + len, &present, &huge))
		return false;
	return present == len && huge == len;
}

/* Write one byte with its own value (fault.c's dirty_byte): the PMD of a
 * lazily freed page becomes dirty, and the kernel keeps the page. */
static void dirty_byte(char *a)
{
	_Atomic unsigned char *b = (_Atomic unsigned char *)a;
	unsigned char v = atomic_load_explicit(b, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(b, &v, v, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static void sync_clean(void)
{
	atomic_store_explicit(&clean_avail, P.clean, memory_order_relaxed);
}

/* Unlink and free chunk c once it has no live page (under mu). */
static void chunk_gc(struct chunk *c)
{
	struct chunk **pp;

	if (c->live)
		return;
	for (pp = &P.chunks; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	/* the chunk's range stayed mapped (empty where pages left) until
	 * now: no other mapping could be placed inside it */
	hpr__os->munmap(c->base, c->npages << P.shift);
	free(c);
}

/* Free page i of c, DIRTY or CLEAN (under mu): its memory goes back to
 * the kernel, its range stays the chunk's until chunk_gc unmaps it. */
static void drop_page(struct chunk *c, size_t i)
{
	if (c->st[i] == PG_DIRTY)
		P.dirty--;
	else if (c->st[i] == PG_CLEAN)
		P.clean--;
	hpr__os_discard(c->base + (i << P.shift), P.ps, HPR__DISCARD_NOW);
	c->st[i] = PG_GONE;
	c->live--;
	P.pages--;
}

/* Unmap pages until the pool fits max_pages: DIRTY ones first (they are
 * worth least), then CLEAN. Pages in flight stay (under mu). */
static void trim(void)
{
	for (int want = PG_DIRTY; want <= PG_CLEAN && P.pages > P.max_pages; want += 2) {
		for (struct chunk *c = P.chunks, *next; c && P.pages > P.max_pages; c = next) {
			next = c->next;
			for (size_t i = 0; i < c->npages && P.pages > P.max_pages; i++)
				if (c->st[i] == want) {
					drop_page(c, i);
					P.trimmed++;
				}
			chunk_gc(c);
		}
	}
	sync_clean();
}

static bool find_dirty(struct chunk **cp, size_t *ip)
{
	if (!P.dirty)
		return false;
	for (struct chunk *c = P.chunks; c; c = c->next)
		for (size_t i = 0; i < c->npages; i++)
			if (c->st[i] == PG_DIRTY) {
				*cp = c;
				*ip = i;
				return true;
			}
	return false;
}

/*
 * Zero the pool page at a, or say it is no longer whole (the kernel took
 * or split it under pressure: it is dropped). The checks bracket the dirty
 * write: a page the kernel took before it is not zeroed here (that write
 * may have faulted in a new page: dropped with the rest).
 */
static bool zero_page(char *a, size_t ps, hpr__zero_fn fn)
{
	if (!huge_at(a, ps))
		return false;
	dirty_byte(a);
	if (!huge_at(a, ps))
		return false;
	fn(a, ps);
	/* lazily freeable again: zeros the kernel may take */
	hpr__os_discard(a, ps, HPR__DISCARD_LAZY);
	return true;
}

static void *zeroer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&P.mu);
	if (P.flags & HPR_POOL_IDLE) {
		struct sched_param sp = { 0 };

		pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	}
	while (!P.stopping) {
		struct chunk *c;
		size_t i, ps = P.ps;
		hpr__zero_fn fn = P.zero;
		uint64_t t0, dt;
		char *a;
		bool ok;

		if (!find_dirty(&c, &i)) {
			pthread_cond_wait(&P.cv, &P.mu);
			continue;
		}
		c->st[i] = PG_ZEROING;
		P.dirty--;
		a = c->base + (i << P.shift);
		pthread_mutex_unlock(&P.mu);
		t0 = hpr__now_ns();
		ok = zero_page(a, ps, fn);
		dt = hpr__now_ns() - t0;
		pthread_mutex_lock(&P.mu);
		/* a ZEROING page is live: c is still there */
		if (ok) {
			c->st[i] = PG_CLEAN;
			P.clean++;
			P.zeroed++;
			P.zero_ns += dt;
			sync_clean();
		} else {
			c->st[i] = PG_DIRTY; /* for drop_page's count */
			P.dirty++;
			drop_page(c, i);
			P.dropped++;
			chunk_gc(c);
		}
	}
	pthread_mutex_unlock(&P.mu);
	return NULL;
}

/* Start the zeroing threads if none run (under mu). */
static int ensure_threads(void)
{
	int rc = 0;

	if (P.nthreads || P.stopping || !P.max_pages)
		return 0;
	while (P.nthreads < P.want_threads) {
		rc = hpr__thread_start(&P.threads[P.nthreads], zeroer_main, NULL, "hpr-zero", NULL,
				       64 * 1024);
		if (rc)
			break;
		P.nthreads++;
	}
	return P.nthreads ? 0 : rc;
}

/* Stop and join the zeroing threads (cfg_mu held, mu not). */
static void stop_threads(void)
{
	pthread_t th[MAX_THREADS];
	unsigned n;

	pthread_mutex_lock(&P.mu);
	P.stopping = true;
	pthread_cond_broadcast(&P.cv);
	n = P.nthreads;
	memcpy(th, P.threads, n * sizeof(th[0]));
	P.nthreads = 0;
	pthread_mutex_unlock(&P.mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_lock(&P.mu);
	P.stopping = false;
	pthread_mutex_unlock(&P.mu);
}

static unsigned default_threads(void)
{
	cpu_set_t set;
	int n;

	CPU_ZERO(&set);
	if (hpr__os->process_cpus(&set, sizeof(set)))
		return 1;
	n = CPU_COUNT(&set);
	return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (unsigned)n;
}

/* The pool across fork: both locks held over it; the child's pool is
 * empty (its pages were MADV_DONTFORK: not mapped there) and threadless,
 * with the parent's limit and flags. */
static void rpool_atfork(int phase)
{
	if (phase == HPR__FORK_PARENT) {
		hpr__fork_mutex(&P.mu, phase);
		hpr__fork_mutex(&P.cfg_mu, phase);
		return;
	}
	hpr__fork_mutex(&P.cfg_mu, phase);
	if (!hpr__fork_mutex(&P.mu, phase))
		return;
	pthread_cond_init(&P.cv, NULL);
	for (struct chunk *c = P.chunks, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	P.chunks = NULL;
	P.pages = P.dirty = P.clean = 0;
	P.nthreads = 0;
	P.stopping = false;
	P.donated = P.handed = P.zeroed = P.dropped = P.trimmed = P.zero_ns = 0;
	atomic_store(&clean_avail, 0);
}

/* What the pool needs from the kernel: 0 or -EOPNOTSUPP with advice. */
static int thp_check(const char *fn)
{
	const struct hpr__caps *c = hpr__caps();

	if (c->info.thp_enabled == HPR_THP_NEVER)
		return hpr__fail(-EOPNOTSUPP,
				 "%s: THP is disabled (/sys/kernel/mm/transparent_hugepage/"
				 "enabled is never): the pool holds THP pages only",
				 fn);
	if (!c->info.have_pagemap_scan)
		return hpr__fail(-EOPNOTSUPP,
				 "%s: the pool needs PAGEMAP_SCAN (Linux 6.7) to tell which "
				 "pages are PMD-mapped; this kernel is %d.%d",
				 fn, c->info.kernel_major, c->info.kernel_minor);
	if (!c->info.thp_pmd_size)
		return hpr__fail(-EOPNOTSUPP, "%s: no THP PMD size on this machine", fn);
	return 0;
}

int hpr_pool_supported(enum hpr_backend b)
{
	hpr__err_clear();
	switch (b) {
	case HPR_BACKEND_THP:
		return thp_check("hpr_pool_supported");
	case HPR_BACKEND_SHMEM:
		return hpr__fail(-EOPNOTSUPP,
				 "hpr_pool_supported: shmem regions are not pooled: their "
				 "pages belong to the region's file (a memfd or a tmpfs "
				 "file), and mremap moves a mapping, not a file's pages");
	case HPR_BACKEND_HUGETLB:
		return hpr__fail(-EOPNOTSUPP,
				 "hpr_pool_supported: hugetlb regions are not pooled: each "
				 "region's pages belong to its own hugetlbfs file or memfd "
				 "(reservations, hole punching and snapshots go through "
				 "it), and a moved mapping would keep the old file's pages; "
				 "the hugetlb pool already keeps freed pages for reuse");
	default:
		return hpr__fail(-EINVAL,
				 "hpr_pool_supported: ask about a concrete backend "
				 "(hpr_backend_of() says what AUTO chose), not %d",
				 (int)b);
	}
}

#define POOL_FLAGS (HPR_POOL_ONE_THREAD | HPR_POOL_IDLE)

int hpr_pool_configure(size_t max_bytes, unsigned flags)
{
	double gbs[HPR__ZERO_METHODS];
	bool chose = false;
	size_t ps = 0;
	int rc = 0;

	hpr__err_clear();
	if (flags & ~POOL_FLAGS)
		return hpr__fail(-EINVAL, "hpr_pool_configure: unknown flag bits %#x",
				 flags & ~POOL_FLAGS);
	if (max_bytes) {
		rc = thp_check("hpr_pool_configure");
		if (rc)
			return rc;
		ps = hpr__caps()->info.thp_pmd_size;
	}
	hpr__fork_leaf(HPR__FORK_LEAF_POOL, rpool_atfork);
	pthread_mutex_lock(&P.cfg_mu);
	stop_threads();
	if (max_bytes && P.method == HPR_POOL_ZERO_NONE) {
		hpr__zero_fn fn;
		int m = hpr__zero_choose(ps, &fn, gbs);

		pthread_mutex_lock(&P.mu);
		P.method = m;
		P.zero = fn;
		pthread_mutex_unlock(&P.mu);
		chose = true;
	}
	pthread_mutex_lock(&P.mu);
	if (ps && !P.ps) {
		P.ps = ps;
		P.shift = (unsigned)__builtin_ctzl(ps);
	}
	P.max_pages = P.ps ? max_bytes / P.ps : 0;
	atomic_store_explicit(&pool_on, P.max_pages != 0, memory_order_relaxed);
	P.flags = flags;
	P.want_threads = flags & HPR_POOL_ONE_THREAD ? 1 : default_threads();
	trim();
	if (P.max_pages && P.pages)
		rc = ensure_threads();
	pthread_mutex_unlock(&P.mu);
	pthread_mutex_unlock(&P.cfg_mu);
	if (chose)
		hpr__log(HPR_LOG_INFO,
			 "pool: zeroing %zu KiB pages with %s (GB/s: memset %.1f, rep-stosb "
			 "%.1f, avx2 %.1f, nt-sse2 %.1f, nt-avx2 %.1f)",
			 ps >> 10, hpr__zero_name(P.method), gbs[HPR_POOL_ZERO_MEMSET],
			 gbs[HPR_POOL_ZERO_REP_STOSB], gbs[HPR_POOL_ZERO_AVX2],
			 gbs[HPR_POOL_ZERO_NT_SSE2], gbs[HPR_POOL_ZERO_NT_AVX2]);
	if (rc)
		return hpr__fail(-EAGAIN, "hpr_pool_configure: cannot start a zeroing thread: %s",
				 strerror(-rc));
	return 0;
}

const char *hpr_pool_zero_method_name(void)
{
	int m;

	pthread_mutex_lock(&P.mu);
	m = P.method;
	pthread_mutex_unlock(&P.mu);
	return hpr__zero_name(m);
}

/* The pool's first-version struct ends at reserved_ (sized.c's scheme). */
#define POOL_STATS_SIZE_0_3                           \
	(offsetof(struct hpr_pool_stats, reserved_) + \
	 sizeof(((struct hpr_pool_stats *)0)->reserved_))

int hpr_pool_stats_sized(struct hpr_pool_stats *out, size_t size)
{
	struct hpr_pool_stats st;
	size_t n;

	hpr__err_clear();
	if (!out)
		return hpr__fail(-EINVAL, "hpr_pool_stats: st is NULL");
	if (size < POOL_STATS_SIZE_0_3)
		return hpr__fail(-EINVAL,
				 "hpr_pool_stats: the struct's size %zu is smaller than "
				 "hpregion 0.3's %zu: pass sizeof the struct from hpregion.h",
				 size, (size_t)POOL_STATS_SIZE_0_3);
	memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&P.mu);
	st.max_bytes = P.max_pages * P.ps;
	st.flags = P.flags;
	st.threads = P.nthreads;
	st.bytes = P.pages * P.ps;
	st.clean_bytes = P.clean * P.ps;
	st.donated_bytes = P.donated * P.ps;
	st.handed_bytes = P.handed * P.ps;
	st.zeroed_bytes = P.zeroed * P.ps;
	st.dropped_bytes = P.dropped * P.ps;
	st.trimmed_bytes = P.trimmed * P.ps;
	st.zero_ns = P.zero_ns;
	st.zero_method = P.method;
	/* under mu, so no chunk goes away meanwhile (the pagemap leaf comes
	 * after this one) */
	for (struct chunk *c = P.chunks; c; c = c->next) {
		uint64_t present, huge;

		if (!hpr__pagemap_count((uintptr_t)c->base,
					(uintptr_t)c->base + (c->npages << P.shift), &present,
					&huge)) {
			st.resident += present;
			st.huge_mapped += huge;
		}
	}
	pthread_mutex_unlock(&P.mu);
	n = size < sizeof(st) ? size : sizeof(st);
	memcpy(out, &st, n);
	if (size > n)
		memset((char *)out + n, 0, size - n);
	return 0;
}

bool hpr__rpool_region_ok(const hpr_region *r)
{
	return r->backend == HPR_BACKEND_THP && !r->attached && !r->degraded && !r->numa.active &&
	       !(r->flags & HPR_F_GUARD) && !r->not_mapped && !r->locked &&
	       !atomic_load_explicit(&r->mem_locked, memory_order_relaxed) &&
	       !atomic_load_explicit(&r->lazy, memory_order_relaxed);
}

/*
 * Take up to want CLEAN pages in a row from one chunk: *cp, *ip and *k
 * say which (k 0: none). They are MOVING: nobody else touches them, and
 * the chunk stays until put_run says they have left.
 */
static void take_run(size_t ps, size_t want, struct chunk **cp, size_t *ip, size_t *k)
{
	*k = 0;
	pthread_mutex_lock(&P.mu);
	for (struct chunk *c = ps == P.ps ? P.chunks : NULL; c; c = c->next) {
		size_t i = 0, n = 0;

		while (i < c->npages && c->st[i] != PG_CLEAN)
			i++;
		if (i == c->npages)
			continue;
		while (i + n < c->npages && n < want && c->st[i + n] == PG_CLEAN) {
			c->st[i + n] = PG_MOVING;
			n++;
		}
		P.clean -= n;
		*cp = c;
		*ip = i;
		*k = n;
		break;
	}
	sync_clean();
	pthread_mutex_unlock(&P.mu);
}

/* The MOVING pages [i, i+n) of c have left (moved, or freed: moved
 * false, the move failed). */
static void put_run(struct chunk *c, size_t i, size_t n, bool moved)
{
	pthread_mutex_lock(&P.mu);
	if (!moved)
		hpr__os_discard(c->base + (i << P.shift), n << P.shift, HPR__DISCARD_NOW);
	memset(c->st + i, PG_GONE, n);
	c->live -= n;
	P.pages -= n;
	if (moved)
		P.handed += n;
	else
		P.dropped += n;
	chunk_gc(c);
	pthread_mutex_unlock(&P.mu);
}

size_t hpr__rpool_fill(hpr_region *r, size_t a, size_t b, const uint8_t *prev, bool *got)
{
	size_t n_got = 0, ps = r->page_size;
	unsigned shift = r->page_shift;
	char nm[80];

	snprintf(nm, sizeof(nm), "hpr:%s", r->name);
	for (size_t i = a; i < b;) {
		size_t j = i, k, ci;
		struct chunk *c;
		char *src, *dst;

		if (prev[i - a] != HPR_PS_ABSENT) {
			i++;
			continue;
		}
		while (j < b && prev[j - a] == HPR_PS_ABSENT && j - i < 512)
			j++;
		take_run(ps, j - i, &c, &ci, &k);
		if (!k)
			return n_got;
		src = c->base + (ci << shift);
		dst = r->base + hpr__page_off(r, i);
		if (hpr__os->mremap_fixed(src, k * ps, dst)) {
			put_run(c, ci, k, false);
			return n_got;
		}
		put_run(c, ci, k, true);
		/* the pool's pages were MADV_DONTFORK: the region's are not */
		hpr__os_do_fork(dst, k * ps);
		hpr__os->name_anon(dst, k * ps, nm);
		for (size_t p = 0; p < k; p++)
			dirty_byte(dst + p * ps);
		if (huge_at(dst, k * ps)) {
			for (size_t p = 0; p < k; p++)
				got[i - a + p] = true;
			n_got += k;
		} else {
			/* the kernel took some while they were lazily free:
			 * those are the populate's (zeros either way) */
			for (size_t p = 0; p < k; p++)
				if (huge_at(dst + p * ps, ps)) {
					got[i - a + p] = true;
					n_got++;
				}
		}
		i += k;
	}
	return n_got;
}

/* Move the run of n pages of r at idx into a new chunk: 0 or -errno.
 * src_stays: the source range stays part of a live region (a reclaimed
 * page), which a forked child must inherit. */
static int donate_run(hpr_region *r, size_t idx, size_t n, bool src_stays)
{
	size_t ps = r->page_size, len = n * ps;
	char *src = r->base + hpr__page_off(r, idx), *dst;
	struct chunk *c;
	void *res = NULL;
	uintptr_t al;
	int rc;

	c = calloc(1, sizeof(*c) + n);
	if (!c)
		return -ENOMEM;
	rc = hpr__os->mmap(NULL, len + ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			   -1, 0, &res);
	if (rc) {
		free(c);
		return rc;
	}
	al = ((uintptr_t)res + ps - 1) & ~(uintptr_t)(ps - 1);
	dst = (char *)al;
	if (dst > (char *)res)
		hpr__os->munmap(res, (size_t)(dst - (char *)res));
	if (dst + len < (char *)res + len + ps)
		hpr__os->munmap(dst + len, (size_t)((char *)res + len + ps - (dst + len)));
	/* DONTFORK before the move: a fork from here on never maps them.
	 * A page of a live region keeps its flags (the source range stays
	 * mapped and must be inherited); its chunk is DONTFORK after the
	 * move, and a fork in between gives the child a mapping of the
	 * released bytes it had inherited as the region's anyway. */
	if (!src_stays)
		hpr__os_dont_fork(src, len);
	rc = hpr__os->mremap_fixed(src, len, dst);
	if (rc) {
		hpr__os->munmap(dst, len);
		free(c);
		return rc;
	}
	if (src_stays)
		hpr__os_dont_fork(dst, len);
	hpr__os_discard(dst, len, HPR__DISCARD_LAZY);
	hpr__os->name_anon(dst, len, "hpr:pool");
	c->base = dst;
	c->npages = c->live = n;
	memset(c->st, PG_DIRTY, n);
	pthread_mutex_lock(&P.mu);
	if (!P.max_pages || P.pages > P.max_pages) {
		/* hpr_pool_configure shrank the pool meanwhile */
		hpr__os->munmap(dst, len);
		P.pages -= n;
		P.trimmed += n;
		free(c);
	} else {
		c->next = P.chunks;
		P.chunks = c;
		P.dirty += n;
		P.donated += n;
		ensure_threads();
		pthread_cond_broadcast(&P.cv);
	}
	pthread_mutex_unlock(&P.mu);
	return 0;
}

/* Reserve room for up to n pages: how many (under no lock). */
static size_t reserve(size_t n)
{
	size_t k = 0;

	pthread_mutex_lock(&P.mu);
	if (P.max_pages > P.pages)
		k = P.max_pages - P.pages < n ? P.max_pages - P.pages : n;
	P.pages += k;
	pthread_mutex_unlock(&P.mu);
	return k;
}

/* Reserve room for one page of size ps: whether there was room. */
static bool reserve_ps(size_t ps)
{
	bool ok;

	pthread_mutex_lock(&P.mu);
	ok = P.ps == ps && P.max_pages > P.pages;
	P.pages += ok;
	pthread_mutex_unlock(&P.mu);
	return ok;
}

static void unreserve(size_t n)
{
	pthread_mutex_lock(&P.mu);
	P.pages -= n;
	pthread_mutex_unlock(&P.mu);
}

void hpr__rpool_donate(hpr_region *r)
{
	size_t ps = r->page_size;
	bool all;

	if (!atomic_load_explicit(&pool_on, memory_order_relaxed))
		return;
	pthread_mutex_lock(&P.mu);
	all = P.max_pages && P.ps == ps;
	pthread_mutex_unlock(&P.mu);
	if (!all || !hpr__rpool_region_ok(r) || !r->base)
		return;
	/* the common case: a prefaulted region, every page PMD-mapped */
	all = huge_at(r->base, r->size);
	for (size_t idx = 0; idx < r->npages;) {
		size_t j = idx, k;

		if (!all && !huge_at(r->base + hpr__page_off(r, idx), ps)) {
			idx++;
			continue;
		}
		j = idx + 1;
		while (j < r->npages && (all || huge_at(r->base + hpr__page_off(r, j), ps)))
			j++;
		k = reserve(j - idx);
		if (!k)
			return;
		if (donate_run(r, idx, k, false)) {
			unreserve(k);
			return;
		}
		idx = j;
	}
}

bool hpr__rpool_take_page(hpr_region *r, size_t idx)
{
	char *a = r->base + hpr__page_off(r, idx);

	if (!atomic_load_explicit(&pool_on, memory_order_relaxed) || !hpr__rpool_region_ok(r))
		return false;
	/* a released page the kernel took or split is not worth a move */
	if (!huge_at(a, r->page_size) || !reserve_ps(r->page_size))
		return false;
	if (donate_run(r, idx, 1, true)) {
		unreserve(1);
		return false;
	}
	return true;
}
