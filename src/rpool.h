/* SPDX-License-Identifier: MIT */
/*
 * The recycled huge-page pool (rpool.c) and its zeroing (zero.c): what the
 * region code calls. Nothing here is part of the ABI.
 */
#ifndef HPR_RPOOL_H
#define HPR_RPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hpr_region;

/* ---- zero.c ---- */
#define HPR__ZERO_METHODS 6 /* enum hpr_pool_zero's values */
typedef void (*hpr__zero_fn)(void *p, size_t len);
/* Time every method the CPU has over a few warm pages of page_size; *fn
 * is the chosen one, gbs[m] each method's bytes per ns (0: not tried).
 * Returns the enum hpr_pool_zero chosen. */
int hpr__zero_choose(size_t page_size, hpr__zero_fn *fn, double gbs[HPR__ZERO_METHODS]);
const char *hpr__zero_name(int m);

/* ---- rpool.c ---- */
/* Is the pool on and holding zeroed pages? (one relaxed load) */
bool hpr__rpool_has_clean(void);
/* Could r take pages from the pool or give its pages to it? */
bool hpr__rpool_region_ok(const struct hpr_region *r);
/*
 * Move zeroed pool pages into the absent pages of [a, b) of r (prev[i - a]
 * is page i's state before the caller claimed it FAULTING; only ABSENT
 * pages are filled). got[i - a] is set for each page that is now a
 * resident, dirty, PMD-mapped huge page of zeros. Returns how many.
 */
size_t hpr__rpool_fill(struct hpr_region *r, size_t a, size_t b, const uint8_t *prev, bool *got);
/* hpr_destroy: move r's PMD-mapped pages into the pool (as far as its
 * limit allows) before the region is unmapped. */
void hpr__rpool_donate(struct hpr_region *r);

/* hpr_reclaim (release.c): move the released huge page idx of r, taken
 * BUSY, into the pool instead of discarding it. true: moved, the page's
 * range is empty now (as after MADV_DONTNEED); false: discard it. */
bool hpr__rpool_take_page(struct hpr_region *r, size_t idx);

#endif
