/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #22 item 2: the driver's key generators
 * have YCSB's shape. 4 M draws over 400 000 records:
 *
 *   zipfian (YCSB's scrambled zipfian: ranks over 10^10 items, FNV-64 of
 *            the rank mod the record count): the hottest key gets ~3.8 %
 *            of the requests (1 / zetan = 1 / 26.469), the top 1 % of keys
 *            ~36 %, and ~99 % of the keys are touched (the old driver's
 *            zipfian over n = records gave 7.0 %, 66 % and 39 %);
 *   plain zipfian: rank r gets 1 / (r+1)^0.99 / zeta(n);
 *   latest:  the same, counted back from the newest key number;
 *   hotspot: 80 % of the requests go to the first 20 % of the keys;
 *   uniform: every key about equally often.
 *
 * Plus zetan summed incrementally equals zetan summed at once, and the FNV
 * hash matches YCSB's (site.ycsb.Utils.fnvhash64) on known values.
 */
#include "generator.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 400000
#define DRAWS 4000000

static int fails;

#define CHECK(cond, ...)                                           \
	do {                                                       \
		printf("%s: ", (cond) ? "ok" : (fails++, "FAIL")); \
		printf(__VA_ARGS__);                               \
		putchar('\n');                                     \
	} while (0)

struct shape {
	double hottest, top1, distinct; /* shares of requests / of keys */
	uint64_t hottest_key;
};

static int cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

static struct shape draw(enum ycsb_dist d, uint32_t *cnt)
{
	struct ycsb_gen g;
	struct shape s = { 0 };
	uint64_t rng = 0x9e3779b97f4a7c15ull, top = 0, touched = 0;

	memset(cnt, 0, RECORDS * sizeof(*cnt));
	if (ycsb_gen_init(&g, d, RECORDS)) {
		printf("FAIL: ycsb_gen_init %s\n", ycsb_dist_name(d));
		exit(1);
	}
	for (int i = 0; i < DRAWS; i++) {
		uint64_t k = ycsb_gen_next(&g, &rng);

		if (k >= RECORDS) {
			printf("FAIL: %s drew key %llu of %d\n", ycsb_dist_name(d),
			       (unsigned long long)k, RECORDS);
			exit(1);
		}
		cnt[k]++;
	}
	for (uint64_t k = 0; k < RECORDS; k++) {
		touched += cnt[k] != 0;
		if (cnt[k] > cnt[s.hottest_key])
			s.hottest_key = k;
	}
	s.hottest = (double)cnt[s.hottest_key] / DRAWS;
	s.distinct = (double)touched / RECORDS;
	qsort(cnt, RECORDS, sizeof(*cnt), cmp_desc);
	for (int k = 0; k < RECORDS / 100; k++)
		top += cnt[k];
	s.top1 = (double)top / DRAWS;
	printf("%-14s hottest key %6llu: %5.2f %%, top 1 %% of keys: %5.1f %%, keys touched: "
	       "%5.1f %%\n",
	       ycsb_dist_name(d), (unsigned long long)s.hottest_key, s.hottest * 100, s.top1 * 100,
	       s.distinct * 100);
	return s;
}

static bool near(double got, double want, double tol)
{
	return fabs(got - want) <= tol;
}

int main(void)
{
	uint32_t *cnt = malloc(RECORDS * sizeof(*cnt));
	double zn = ycsb_zeta(0, RECORDS, YCSB_ZIPFIAN_CONSTANT, 0), z;
	struct shape s;

	if (!cnt)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* zetan: at once, and grown incrementally as YCSB grows it */
	z = ycsb_zeta(0, RECORDS / 4, YCSB_ZIPFIAN_CONSTANT, 0);
	z = ycsb_zeta(RECORDS / 4, RECORDS, YCSB_ZIPFIAN_CONSTANT, z);
	CHECK(fabs(z - zn) < 1e-9 * zn, "zeta(400000) incrementally %.12f, at once %.12f", z, zn);
	{
		struct ycsb_zipf zz;

		ycsb_zipf_init(&zz, RECORDS / 4, YCSB_ZIPFIAN_CONSTANT, -1);
		ycsb_zipf_next(&zz, RECORDS, 0.5); /* more items: zetan grows */
		CHECK(fabs(zz.zetan - zn) < 1e-9 * zn && zz.countforzeta == RECORDS,
		      "a zipfian asked for more items extends zetan (%.12f)", zz.zetan);
	}
	/* Utils.fnvhash64 of 0, 1 and 12345, worked out apart from this code
	 * (FNV-1 over the 8 bytes, low byte first, then Math.abs) */
	CHECK(ycsb_fnv64(0) == 0x573807cdd7e5c63bull && ycsb_fnv64(1) == 0x7632ced6e2d5105cull &&
		      ycsb_fnv64(12345) == 0x18e14e7a1d1233b4ull,
	      "fnv64 matches YCSB's fnvhash64 (0 -> %016llx)", (unsigned long long)ycsb_fnv64(0));

	s = draw(DIST_ZIPFIAN, cnt);
	CHECK(near(s.hottest, 1 / YCSB_SCRAMBLED_ZETAN, 0.004),
	      "zipfian (scrambled): the hottest key has %.2f %% of the requests (YCSB: 3.8 %%)",
	      s.hottest * 100);
	CHECK(near(s.top1, 0.36, 0.03),
	      "zipfian (scrambled): the top 1 %% of keys have %.1f %% (YCSB: 36 %%)", s.top1 * 100);
	CHECK(s.distinct >= 0.97, "zipfian (scrambled): %.1f %% of the keys touched (YCSB: 99 %%)",
	      s.distinct * 100);

	s = draw(DIST_PLAIN_ZIPFIAN, cnt);
	CHECK(s.hottest_key == 0 && near(s.hottest, 1 / zn, 0.004),
	      "plain zipfian: key 0 is the hottest with %.2f %% (1 / zeta(n) = %.2f %%)",
	      s.hottest * 100, 100 / zn);

	s = draw(DIST_LATEST, cnt);
	CHECK(s.hottest_key == RECORDS - 1 && near(s.hottest, 1 / zn, 0.004),
	      "latest: the newest key is the hottest with %.2f %% (%.2f %%)", s.hottest * 100,
	      100 / zn);

	draw(DIST_HOTSPOT, cnt);
	{
		struct ycsb_gen g;
		uint64_t rng = 12345, hot = 0;

		ycsb_gen_init(&g, DIST_HOTSPOT, RECORDS);
		for (int i = 0; i < DRAWS; i++)
			hot += ycsb_gen_next(&g, &rng) < RECORDS / 5;
		CHECK(near((double)hot / DRAWS, 0.8, 0.005),
		      "hotspot: %.1f %% of the requests go to the first 20 %% of the keys",
		      100.0 * (double)hot / DRAWS);
	}

	s = draw(DIST_UNIFORM, cnt);
	CHECK(s.hottest < 40.0 / DRAWS && s.distinct > 0.999,
	      "uniform: no key above %.0f requests (expected 10), %.2f %% touched",
	      s.hottest * DRAWS, s.distinct * 100);

	free(cnt);
	printf("%s\n", fails ? "FAILED" : "passed");
	return fails ? 1 : 0;
}
