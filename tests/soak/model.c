/* SPDX-License-Identifier: MIT */
/* The soak's page model and pattern checks (see model.h). */
#include "model.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL

uint64_t sk_mix(uint64_t x)
{
	x += GOLDEN;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

uint64_t sk_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

void sk_cand_key(struct sk_cand *c, uint64_t key)
{
	memset(c, 0, sizeof(*c));
	c->k[0] = key;
	c->nk = 1;
}

void sk_cand_zero(struct sk_cand *c)
{
	memset(c, 0, sizeof(*c));
	c->zero = true;
}

void sk_cand_union(struct sk_cand *dst, const struct sk_cand *src)
{
	dst->zero |= src->zero;
	dst->any |= src->any;
	for (unsigned i = 0; i < src->nk; i++) {
		bool have = false;

		for (unsigned j = 0; j < dst->nk; j++)
			have |= dst->k[j] == src->k[i];
		if (have)
			continue;
		if (dst->nk == SK_MAXK)
			dst->any = true;
		else
			dst->k[dst->nk++] = src->k[i];
	}
}

bool sk_cand_exact(const struct sk_cand *c)
{
	return c->nk == 1 && !c->zero && !c->any;
}

void sk_fill(void *p, size_t len, uint64_t key)
{
	uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = key ^ (i * GOLDEN);
}

static bool block_is(const uint64_t *w, size_t first, uint64_t key)
{
	for (size_t i = 0; i < SK_BLOCK / 8; i++)
		if (w[i] != (key ^ ((first + i) * GOLDEN)))
			return false;
	return true;
}

static bool block_zero(const uint64_t *w)
{
	for (size_t i = 0; i < SK_BLOCK / 8; i++)
		if (w[i])
			return false;
	return true;
}

uint64_t sk_key_at(const void *p, size_t word)
{
	return ((const uint64_t *)p)[word] ^ (word * GOLDEN);
}

static _Atomic unsigned reported;

size_t sk_verify(const void *p, size_t len, const struct sk_cand *c, const char *what, size_t idx)
{
	const uint64_t *w = p;
	size_t lost = 0;

	if (c->any)
		return 0;
	for (size_t b = 0; b < len / SK_BLOCK; b++) {
		const uint64_t *bw = w + b * (SK_BLOCK / 8);
		size_t first = b * (SK_BLOCK / 8);
		bool ok = c->zero && block_zero(bw);

		for (unsigned i = 0; !ok && i < c->nk; i++)
			ok = block_is(bw, first, c->k[i]);
		if (ok)
			continue;
		lost += SK_BLOCK;
		if (atomic_fetch_add(&reported, 1) < 8)
			fprintf(stderr,
				"soak: LOST %s page %zu block %zu: word0 %#llx, expected %s%s"
				"%#llx (%u key(s))\n",
				what, idx, b, (unsigned long long)bw[0], c->zero ? "zeros or " : "",
				c->nk ? "" : "no key ",
				c->nk ? (unsigned long long)(c->k[0] ^ (first * GOLDEN)) : 0ULL,
				c->nk);
	}
	return lost;
}
