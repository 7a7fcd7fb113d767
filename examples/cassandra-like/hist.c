/* SPDX-License-Identifier: MIT */
/*
 * The driver's latency histogram (hist.h): HdrHistogram's bucket layout at
 * 3 significant digits, in ns.
 */
#include "hist.h"

#include <math.h>

/* values below 2 * HSUB exact; then HSUB buckets per power of two */
static unsigned hidx(uint64_t v)
{
	unsigned msb, shift;

	if (v < 2 * HSUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - 10; /* 2^10 = HSUB: v >> shift in [HSUB, 2 * HSUB) */
	return shift * HSUB + (unsigned)(v >> shift);
}

/* the lowest value of bucket i */
static uint64_t hval(unsigned i)
{
	unsigned shift;

	if (i < 2 * HSUB)
		return i;
	shift = i / HSUB - 1;
	return (uint64_t)(i % HSUB + HSUB) << shift;
}

void hist_add(struct hist *h, uint64_t ns)
{
	unsigned i = hidx(ns);

	h->b[i < HB ? i : HB - 1]++;
	h->n++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
}

void hist_merge(struct hist *d, const struct hist *s)
{
	if (!s->n)
		return;
	for (int i = 0; i < HB; i++)
		if (s->b[i]) /* leaves the untouched pages of d untouched */
			d->b[i] += s->b[i];
	d->n += s->n;
	d->sum += s->sum;
	if (s->max > d->max)
		d->max = s->max;
}

double hist_pct_us(const struct hist *h, double p)
{
	uint64_t want = (uint64_t)ceil(p * (double)h->n), seen = 0;

	if (!h->n)
		return 0;
	for (int i = 0; i < HB - 1; i++) {
		uint64_t top = hval((unsigned)i + 1) - 1;

		seen += h->b[i];
		if (seen >= want && h->b[i]) /* the bucket's top, at most max */
			return (double)(top < h->max ? top : h->max) / 1000.0;
	}
	return (double)h->max / 1000.0; /* the top bucket: all past the range */
}
