/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #22 item 3: the driver's latency histogram
 * (hist.c) is HdrHistogram-like at 3 significant digits:
 *
 *   - every quantile is within 0.1 % above the true value, from 1 ns to
 *     2^41 ns (36 min), never below it (it reports the bucket's top, as
 *     HdrHistogram's highestEquivalentValue does); values under 2048 ns
 *     are exact;
 *   - p99 and p99.9 of 1..100000 ns are 99000 and 99900 ns to 0.1 %;
 *   - a value past the range (an hour) is counted, and max is exact;
 *   - merging two histograms is adding their samples.
 *
 * The histogram it replaced had 32 buckets per power of two: up to 3 %.
 */
#include "hist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

#define CHECK(cond, ...)                                  \
	do {                                              \
		printf("%s", (cond) ? "ok: " : "FAIL: "); \
		fails += !(cond);                         \
		printf(__VA_ARGS__);                      \
		putchar('\n');                            \
	} while (0)

/* the relative error of a quantile reported in us against want ns */
static double rel(double us, double want)
{
	return (us * 1000.0 - want) / want;
}

int main(void)
{
	static struct hist h, a, b;
	double worst = 0, below = 0;
	uint64_t exact_bad = 0;

	/* {v, 4v}: p50 is v's bucket top, v's own value when exact */
	for (double x = 1; x < 2199023255552.0; x *= 1.0137) {
		uint64_t v = (uint64_t)x;
		double e;

		memset(&h, 0, sizeof(h));
		hist_add(&h, v);
		hist_add(&h, 4 * v);
		e = rel(hist_pct_us(&h, .5), (double)v);
		if (e > worst)
			worst = e;
		if (e < below)
			below = e;
		if (v < 2048 && fabs(hist_pct_us(&h, .5) * 1000.0 - (double)v) > 1e-6)
			exact_bad++;
	}
	CHECK(worst <= 0.001 && below > -1e-12,
	      "1 ns to 2^41 ns: a quantile is at most %.4f %% above the value (want <= 0.1 %%), "
	      "never below (%.6f %%)",
	      worst * 100, below * 100);
	CHECK(exact_bad == 0, "values below 2048 ns are exact (%llu not)",
	      (unsigned long long)exact_bad);

	memset(&h, 0, sizeof(h));
	for (uint64_t v = 1; v <= 100000; v++)
		hist_add(&h, v);
	CHECK(fabs(rel(hist_pct_us(&h, .99), 99000)) <= 0.001 &&
		      fabs(rel(hist_pct_us(&h, .999), 99900)) <= 0.001,
	      "1..100000 ns: p99 %.3f us (99.000), p99.9 %.3f us (99.900)", hist_pct_us(&h, .99),
	      hist_pct_us(&h, .999));
	CHECK(hist_pct_us(&h, 1) == 100.0 && h.n == 100000, "p100 is the max, 100 us");

	memset(&h, 0, sizeof(h));
	hist_add(&h, 1000);
	hist_add(&h, 3600ull * 1000000000ull);
	CHECK(h.n == 2 && hist_pct_us(&h, 1) == 3600e6,
	      "an hour (past 2^41 ns) is counted, max exact: p100 %.0f us", hist_pct_us(&h, 1));

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&h, 0, sizeof(h));
	for (uint64_t v = 1; v < 5000000; v = v * 3 + 7) {
		hist_add(v & 1 ? &a : &b, v);
		hist_add(&h, v);
	}
	hist_merge(&a, &b);
	CHECK(!memcmp(&a, &h, sizeof(h)), "merge: the same as adding every sample to one");

	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
