/* SPDX-License-Identifier: MIT */
/*
 * The YCSB driver's latency histogram (hist.c), in its own file so that
 * tests/cass_hist.c checks the very code the driver reports with.
 */
#ifndef KV_HIST_H
#define KV_HIST_H

#include <stdint.h>

/* Latency histogram, HdrHistogram's layout at 3 significant digits: ns
 * exact below 2048, then 1024 buckets per power of two (a bucket is at most
 * 1/1024 = 0.1 % of its values wide) up to 2^41 ns (36 min); longer ones
 * count in the top bucket, and max is exact. Percentiles report the
 * bucket's top, as HdrHistogram's highestEquivalentValue does. */
#define HSUB 1024
#define HB (32 * HSUB)
struct hist {
	uint64_t b[HB];
	uint64_t n, sum, max;
};
void hist_add(struct hist *h, uint64_t ns);
void hist_merge(struct hist *d, const struct hist *s);
/* the p-quantile (0 < p <= 1) in us: the top of its bucket, at most max */
double hist_pct_us(const struct hist *h, double p);

#endif /* KV_HIST_H */
