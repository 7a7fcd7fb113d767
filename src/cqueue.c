/* SPDX-License-Identifier: MIT */
/*
 * The background collapse queue: one bit per huge page of a region, set
 * by the reuse path (fault.c) for a page that came back as base pages and
 * taken by the idle worker that collapses it (collapse.c). Lock-free: a
 * bit is set with fetch_or and taken with fetch_and, so a page is queued
 * at most once and taken by exactly one worker; cq_pending counts the set
 * bits. Being queued says nothing about the page's state: the worker takes
 * the page through the fault table (PRESENT -> COLLAPSING) and drops it
 * when the page was released or reclaimed meanwhile.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#define WORD_BITS 64

static size_t nwords(const hpr_region *r)
{
	return (r->npages + WORD_BITS - 1) / WORD_BITS;
}

int hpr__cq_init(hpr_region *r)
{
	r->cq_bits = calloc(nwords(r), sizeof(*r->cq_bits));
	return r->cq_bits ? 0 : -ENOMEM;
}

void hpr__cq_free(hpr_region *r)
{
	free(r->cq_bits);
	r->cq_bits = NULL;
}

bool hpr__cq_add(hpr_region *r, size_t idx)
{
	uint64_t bit = 1ULL << (idx % WORD_BITS);

	if (atomic_fetch_or(&r->cq_bits[idx / WORD_BITS], bit) & bit)
		return false;
	atomic_fetch_add(&r->cq_pending, 1);
	atomic_fetch_add_explicit(&r->collapse_queued, 1, memory_order_relaxed);
	return true;
}

bool hpr__cq_take(hpr_region *r, size_t *idx)
{
	size_t n = nwords(r), start;

	if (!atomic_load(&r->cq_pending))
		return false;
	/* round robin over the words, so pages queued early are not passed
	 * over for ever by pages queued again and again at the front */
	start = atomic_load_explicit(&r->cq_next, memory_order_relaxed) % n;
	for (size_t k = 0; k < n; k++) {
		size_t w = (start + k) % n;
		uint64_t v = atomic_load_explicit(&r->cq_bits[w], memory_order_relaxed);

		while (v) {
			uint64_t bit = v & -v;

			if (atomic_fetch_and(&r->cq_bits[w], ~bit) & bit) {
				atomic_fetch_sub(&r->cq_pending, 1);
				atomic_store_explicit(&r->cq_next, w, memory_order_relaxed);
				*idx = w * WORD_BITS + (size_t)__builtin_ctzll(bit);
				return true;
			}
			v = atomic_load_explicit(&r->cq_bits[w], memory_order_relaxed);
		}
	}
	return false;
}

void hpr__cq_clear(hpr_region *r)
{
	if (!r->cq_bits)
		return;
	for (size_t w = 0; w < nwords(r); w++)
		atomic_store(&r->cq_bits[w], 0);
	atomic_store(&r->cq_pending, 0);
}

uint64_t hpr__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
