/* SPDX-License-Identifier: MIT */
/*
 * YCSB's key generators: see generator.h. Written from YCSB's description
 * and constants (core/src/main/java/site/ycsb/generator/), so that this
 * driver's request mix has YCSB's shape: at 400 000 records its scrambled
 * zipfian sends ~3.8 % of the requests to the hottest key and ~36 % to the
 * top 1 % of keys, and touches ~99 % of the keys in 4 M draws
 * (tests/cass_generators.c checks these).
 */
#include "generator.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <string.h>

double ycsb_zeta(uint64_t st, uint64_t n, double theta, double initial)
{
	double sum = initial;

	for (uint64_t i = st; i < n; i++)
		sum += 1.0 / pow((double)(i + 1), theta);
	return sum;
}

static void zipf_eta(struct ycsb_zipf *z)
{
	z->eta = (1.0 - pow(2.0 / (double)z->items, 1.0 - z->theta)) /
		 (1.0 - z->zeta2theta / z->zetan);
}

void ycsb_zipf_init(struct ycsb_zipf *z, uint64_t items, double theta, double zetan)
{
	z->items = items;
	z->theta = theta;
	z->zeta2theta = ycsb_zeta(0, 2, theta, 0);
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan >= 0 ? zetan : ycsb_zeta(0, items, theta, 0);
	z->countforzeta = items;
	zipf_eta(z);
}

uint64_t ycsb_zipf_next(struct ycsb_zipf *z, uint64_t itemcount, double u)
{
	double uz;
	uint64_t r;

	if (itemcount > z->countforzeta) {
		/* more items: continue the sum instead of starting over. (As in
		 * YCSB, eta keeps the item count of the constructor.) */
		z->zetan = ycsb_zeta(z->countforzeta, itemcount, z->theta, z->zetan);
		z->countforzeta = itemcount;
		zipf_eta(z);
	}
	uz = u * z->zetan;
	if (uz < 1.0)
		return 0;
	if (uz < 1.0 + pow(0.5, z->theta))
		return 1;
	r = (uint64_t)((double)itemcount * pow(z->eta * u - z->eta + 1.0, z->alpha));
	return r < itemcount ? r : itemcount - 1;
}

uint64_t ycsb_fnv64(uint64_t v)
{
	uint64_t h = 0xCBF29CE484222325ull;

	for (int i = 0; i < 8; i++) {
		h ^= v & 0xff;
		v >>= 8;
		h *= 1099511628211ull;
	}
	/* Java's Math.abs of a long; its one fixed point (INT64_MIN) stays */
	return (int64_t)h < 0 && h != (1ull << 63) ? -h : h;
}

int ycsb_gen_init(struct ycsb_gen *g, enum ycsb_dist dist, uint64_t records)
{
	memset(g, 0, sizeof(*g));
	if (!records)
		return -EINVAL;
	g->dist = dist;
	g->records = records;
	switch (dist) {
	case DIST_ZIPFIAN:
		/* new ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN): items =
		 * ITEM_COUNT + 1 */
		ycsb_zipf_init(&g->z, YCSB_SCRAMBLED_ITEMS + 1, YCSB_ZIPFIAN_CONSTANT,
			       YCSB_SCRAMBLED_ZETAN);
		break;
	case DIST_PLAIN_ZIPFIAN:
		ycsb_zipf_init(&g->z, records, YCSB_ZIPFIAN_CONSTANT, -1);
		break;
	case DIST_LATEST:
		/* SkewedLatestGenerator: a zipfian over the last key number */
		ycsb_zipf_init(&g->z, records > 1 ? records - 1 : 1, YCSB_ZIPFIAN_CONSTANT, -1);
		break;
	case DIST_HOTSPOT:
		g->hot = (uint64_t)((double)records * YCSB_HOTSPOT_DATA);
		break;
	case DIST_UNIFORM:
		break;
	}
	return 0;
}

static double unit(uint64_t *rng)
{
	return (double)(kv_rand(rng) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t ycsb_gen_next(const struct ycsb_gen *g, uint64_t *rng)
{
	/* the item counts never change after init: next never writes g->z */
	struct ycsb_zipf *z = (struct ycsb_zipf *)&g->z;
	uint64_t n = g->records, last;

	switch (g->dist) {
	case DIST_ZIPFIAN:
		return ycsb_fnv64(ycsb_zipf_next(z, z->items, unit(rng))) % n;
	case DIST_PLAIN_ZIPFIAN:
		return ycsb_zipf_next(z, n, unit(rng));
	case DIST_LATEST:
		/* the newest key number minus a zipfian distance */
		last = n - 1;
		return last ? last - ycsb_zipf_next(z, last, unit(rng)) : 0;
	case DIST_HOTSPOT:
		if (g->hot && unit(rng) < YCSB_HOTSPOT_OPS)
			return kv_rand(rng) % g->hot;
		return g->hot + kv_rand(rng) % (n - g->hot);
	case DIST_UNIFORM:
		break;
	}
	return kv_rand(rng) % n;
}

static const char *const dist_names[] = {
	[DIST_ZIPFIAN] = "zipfian",
	[DIST_UNIFORM] = "uniform",
	[DIST_LATEST] = "latest",
	[DIST_HOTSPOT] = "hotspot",
	[DIST_PLAIN_ZIPFIAN] = "plain-zipfian",
};

bool ycsb_dist_from_name(const char *s, enum ycsb_dist *d)
{
	for (unsigned i = 0; i < sizeof(dist_names) / sizeof(dist_names[0]); i++)
		if (!strcmp(s, dist_names[i])) {
			*d = (enum ycsb_dist)i;
			return true;
		}
	return false;
}

const char *ycsb_dist_name(enum ycsb_dist d)
{
	return dist_names[d];
}
