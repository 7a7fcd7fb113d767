/* SPDX-License-Identifier: MIT */
/*
 * YCSB's key generators (site.ycsb.generator), in C with YCSB's constants:
 * zipfian (Gray et al., "Quickly Generating Billion-Record Synthetic
 * Databases", SIGMOD 1994; theta 0.99, zeta(n) summed incrementally),
 * scrambled zipfian (ranks over 10^10 items, FNV-64 of the rank modulo the
 * record count: what YCSB's requestdistribution=zipfian uses), latest
 * (zipfian from the newest insert back), uniform and hotspot (20 % of the
 * keys take 80 % of the requests).
 *
 * A generator returns a key number in [0, records): YCSB's keynum, the
 * position in the insert order. Draws take the caller's PRNG state, so one
 * generator serves every client thread without a lock.
 */
#ifndef KV_GENERATOR_H
#define KV_GENERATOR_H

#include <stdbool.h>
#include <stdint.h>

#define YCSB_ZIPFIAN_CONSTANT 0.99
/* ScrambledZipfianGenerator: the item count its ranks are drawn over, and
 * zeta(10^10, 0.99), precomputed (summing 10^10 terms takes a minute) */
#define YCSB_SCRAMBLED_ITEMS 10000000000ull
#define YCSB_SCRAMBLED_ZETAN 26.46902820178302
/* CoreWorkload's hotspotdatafraction, hotspotopnfraction */
#define YCSB_HOTSPOT_DATA 0.2
#define YCSB_HOTSPOT_OPS 0.8

enum ycsb_dist { DIST_ZIPFIAN, DIST_UNIFORM, DIST_LATEST, DIST_HOTSPOT, DIST_PLAIN_ZIPFIAN };

struct ycsb_zipf {
	uint64_t items;	       /* the rank range [0, items) */
	uint64_t countforzeta; /* the n zetan is the sum for */
	double theta, alpha, zetan, eta, zeta2theta;
};

struct ycsb_gen {
	enum ycsb_dist dist;
	uint64_t records;
	struct ycsb_zipf z;
	uint64_t hot; /* hotspot: keys [0, hot) are the hot set */
};

/* zeta(n) = sum over i in [1, n] of 1/i^theta, continued from the sum over
 * [1, st] (initial): YCSB grows zetan this way when the item count grows */
double ycsb_zeta(uint64_t st, uint64_t n, double theta, double initial);
/* YCSB's ZipfianGenerator over [0, items); zetan < 0: sum it here */
void ycsb_zipf_init(struct ycsb_zipf *z, uint64_t items, double theta, double zetan);
/* a rank in [0, itemcount) from u in [0, 1); a larger itemcount than the
 * last one extends zetan incrementally (not thread-safe: the driver never
 * changes it while clients run) */
uint64_t ycsb_zipf_next(struct ycsb_zipf *z, uint64_t itemcount, double u);
/* site.ycsb.Utils.fnvhash64: FNV-1 over the 8 bytes, low first, |result| */
uint64_t ycsb_fnv64(uint64_t v);

/* 0, or -EINVAL for records 0 */
int ycsb_gen_init(struct ycsb_gen *g, enum ycsb_dist dist, uint64_t records);
uint64_t ycsb_gen_next(const struct ycsb_gen *g, uint64_t *rng);
/* "zipfian" etc. (YCSB's requestdistribution names); false if unknown */
bool ycsb_dist_from_name(const char *s, enum ycsb_dist *d);
const char *ycsb_dist_name(enum ycsb_dist d);

#endif /* KV_GENERATOR_H */
