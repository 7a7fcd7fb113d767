/* SPDX-License-Identifier: MIT */
/*
 * The page state machine: the one owner of each region's per-huge-page
 * state bytes (enum hpr_pstate), of the present and lazy page counters and
 * of the wake-ups of threads waiting for a page. Nothing else writes them.
 *
 * A process-wide hashed table of slots (mutex + condvar, one cache line each,
 * a power of two with 16 slots per CPU) serializes state changes. Slots are
 * keyed by (backing object, huge page index) -- not by virtual address -- so
 * two mappings of one shmem or hugetlb file serialize on the same slot. This
 * is the scheme of the kernel's hugetlb_fault_mutex_table (mm/hugetlb.c,
 * which replaced one global instantiation mutex in 3.15 and had to switch
 * its key from address to (mapping, index) for shared mappings).
 *
 * Every change is the same two steps:
 *
 *   hpr__page_take: lock the slot, wait out a transition (FAULTING, BUSY,
 *     COLLAPSING),
 *     and when the page is in one of the states the caller can start from,
 *     mark it FAULTING or BUSY; unlock.
 *   (the caller's syscall, with no lock held)
 *   hpr__page_put: lock the slot, publish the new state, move the counters
 *     from the state the page was taken in to the new one, wake the
 *     waiters; unlock.
 *
 * A slot lock is held only inside these two calls, never across a syscall,
 * and no other lock is taken while it is held: it is a leaf lock. Threads
 * wanting a page in a transition wait on its slot's condvar; threads wanting
 * other pages never wait on it. A page in a transition counts, in the
 * counters, as the state it was taken in. The PRESENT fast path is one
 * acquire load (hpr__page_state) and takes no lock. COLLAPSING is the one
 * transition of a usable page (a worker's background collapse of a
 * PRESENT page): fault-in takes it for present and never waits for it;
 * every other change waits for it as for BUSY.
 *
 * A caller holding pages in a transition must not wait for another page
 * (wait = false), or two callers could each wait for a page the other holds.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

struct hpr__slot {
	pthread_mutex_t mu;
	pthread_cond_t cv;
} __attribute__((aligned(HPR_CACHELINE)));

static struct hpr__slot *slots;
static size_t slot_mask;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
static struct hpr__slot fallback_slot = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

static void slots_init(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	size_t n = 64;

	if (ncpu < 1)
		ncpu = 1;
	while (n < (size_t)ncpu * 16 && n < 8192)
		n <<= 1;
	if (posix_memalign((void **)&slots, HPR_CACHELINE, n * sizeof(*slots))) {
		slots = &fallback_slot;
		slot_mask = 0;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_init(&slots[i].mu, NULL);
		pthread_cond_init(&slots[i].cv, NULL);
	}
	slot_mask = n - 1;
}

size_t hpr__slot_count(void)
{
	pthread_once(&slots_once, slots_init);
	return slot_mask + 1;
}

static uint64_t mix64(uint64_t x)
{
	/* splitmix64 finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static struct hpr__slot *slot_for(const hpr_region *r, size_t idx)
{
	pthread_once(&slots_once, slots_init);
	return &slots[mix64(r->obj_key ^ mix64(idx)) & slot_mask];
}

/* The counters follow the settled states: PRESENT and LAZY pages. */
static void count(hpr_region *r, uint8_t st, int d)
{
	if (st == HPR_PS_PRESENT)
		atomic_fetch_add(&r->present_pages, (size_t)d);
	else if (st == HPR_PS_LAZY)
		atomic_fetch_add(&r->lazy_pages, (size_t)d);
}

int hpr__page_take(hpr_region *r, size_t idx, unsigned from, enum hpr_pstate to, bool wait,
		   uint8_t *was)
{
	struct hpr__slot *s = slot_for(r, idx);
	uint8_t st;
	int took = 0;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		st = atomic_load_explicit(&r->state[idx], memory_order_acquire);
		if (st != HPR_PS_FAULTING && st != HPR_PS_BUSY && st != HPR_PS_COLLAPSING)
			break;
		if (!wait) {
			pthread_mutex_unlock(&s->mu);
			*was = st;
			return -1;
		}
		pthread_cond_wait(&s->cv, &s->mu);
	}
	if (from & HPR_PS_BIT(st)) {
		atomic_store(&r->state[idx], (uint8_t)to);
		took = 1;
	}
	pthread_mutex_unlock(&s->mu);
	*was = st;
	return took;
}

void hpr__page_put(hpr_region *r, size_t idx, uint8_t was, enum hpr_pstate to)
{
	struct hpr__slot *s = slot_for(r, idx);

	pthread_mutex_lock(&s->mu);
	atomic_store(&r->state[idx], (uint8_t)to);
	if (was != to) {
		count(r, was, -1);
		count(r, to, 1);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

void hpr__pagestate_atfork(int phase)
{
	/* every phase: PREPARE waits for a slots_init another thread may be
	 * running, which a child would otherwise wait for forever (its
	 * pthread_once left in progress by a thread it does not have) */
	size_t n = hpr__slot_count();

	if (phase != HPR__FORK_CHILD)
		return;
	/*
	 * The slot locks are not taken across the fork: there are 64 to
	 * 8192 of them, and holding that many at once trips
	 * ThreadSanitizer's deadlock detector (at most 64 held locks), in
	 * the tests and in any TSan build of an application. They need not
	 * be: a slot guards only atomic state bytes and counters, and the
	 * child normalizes every state a parent thread may have been
	 * changing (hpr__fault_table_child) and recounts the counters. So
	 * each is made new here, unlocked, with no waiters (those counted
	 * in a condvar are threads that do not exist here).
	 */
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_init(&slots[i].mu, NULL);
		pthread_cond_init(&slots[i].cv, NULL);
	}
}

void hpr__fault_table_child(hpr_region *r)
{
	size_t present = 0, lazy = 0;

	if (!r->state)
		return;
	/* A page in a transition (FAULTING, BUSY) belonged to a parent
	 * thread that does not exist here: whatever it was doing (populate, release, reclaim,
	 * collapse) is half done or not done in this copy. ABSENT is the
	 * one state that is safe for all of them: hpr_fault_in populates it
	 * again (keeping what it holds), hpr_save asks the kernel whether it
	 * is resident, hpr_reclaim leaves it alone. */
	for (size_t i = 0; i < r->npages; i++) {
		uint8_t st = atomic_load_explicit(&r->state[i], memory_order_relaxed);

		/* a parent's background collapse: the page is there either
		 * way, whole (collapsed or not); no one collapses it here */
		if (st == HPR_PS_COLLAPSING)
			st = HPR_PS_PRESENT;
		else if (st == HPR_PS_FAULTING || st == HPR_PS_BUSY)
			st = HPR_PS_ABSENT;
		atomic_store_explicit(&r->state[i], st, memory_order_relaxed);
		present += st == HPR_PS_PRESENT;
		lazy += st == HPR_PS_LAZY;
	}
	atomic_store(&r->present_pages, present);
	atomic_store(&r->lazy_pages, lazy);
}
