/* SPDX-License-Identifier: MIT */
/*
 * The soak's model of what every huge page of a region must hold.
 *
 * A page that holds data holds a generation pattern: 8-byte words
 * key ^ (i * golden ratio), key unique per write. What a page may hold is a
 * set of candidates (keys, and "zeros"), checked per 4 KiB block, because
 * the contract is per 4 KiB page: after hpr_release_lazy() and hpr_fault_in()
 * each 4 KiB page holds its old data or zeros, never another range's data.
 *
 *   ABSENT   never faulted, dropped by a load: zeros once faulted in
 *   PRESENT  exactly one key; may be read and written without a call
 *   LAZY     released: old key or zeros; must be faulted in before use
 *   UNKNOWN  after a failed load: the old candidates, the snapshot's, or
 *            zeros; must be faulted in before use
 */
#ifndef HPR_SOAK_MODEL_H
#define HPR_SOAK_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SK_MAXK 4
#define SK_BLOCK 4096UL

enum sk_state { SK_ABSENT, SK_PRESENT, SK_LAZY, SK_UNKNOWN };

struct sk_cand {
	uint64_t k[SK_MAXK];
	uint8_t nk;
	bool zero;
	bool any; /* more candidates than SK_MAXK: not verifiable */
};

struct sk_page {
	pthread_mutex_t mu; /* held across the call that changes the page */
	uint8_t st;	    /* enum sk_state */
	uint8_t last;	    /* the operation that set st (enum sk_op): for reports */
	uint64_t prev;	    /* a key the page held before that: for reports */
	struct sk_cand c;
};

uint64_t sk_mix(uint64_t x);
/* xorshift64* step; *s must not be 0 */
uint64_t sk_rand(uint64_t *s);

void sk_cand_key(struct sk_cand *c, uint64_t key);
void sk_cand_zero(struct sk_cand *c);
void sk_cand_union(struct sk_cand *dst, const struct sk_cand *src);
/* Exactly one key and nothing else. */
bool sk_cand_exact(const struct sk_cand *c);

/* The key whose pattern would put what word holds there. */
uint64_t sk_key_at(const void *p, size_t word);
/* Fill len bytes (a whole huge page) with key's pattern. */
void sk_fill(void *p, size_t len, uint64_t key);
/* Check a huge page against c, per 4 KiB block. Returns the bytes that
 * match no candidate (0: all good) and prints the first few mismatches
 * (what names the region, idx the page). */
size_t sk_verify(const void *p, size_t len, const struct sk_cand *c, const char *what, size_t idx);

#endif
