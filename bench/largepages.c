/* SPDX-License-Identifier: MIT */
/*
 * bench/largepages: the THP consumer microbenchmark ("largepages"): what
 * huge pages buy a program that uses a large buffer.
 *
 * For each backing — base pages (plain mmap, MADV_NOHUGEPAGE: what a program
 * gets without hpregion), THP, hugetlb and shmem on tmpfs huge=always
 * (through hpregion) — it times, on the same buffer size:
 *   fault    one thread's memset of a fresh buffer: first touch, page
 *            faults + zeroing (not hpregion's prefault: no workers)
 *   memset   memset again over resident memory (TLB reach, bandwidth)
 *   stride   one byte written per 4 KiB, over the whole buffer (TLB misses)
 *   random   dependent random 8-byte reads (TLB + cache misses)
 * Variants are interleaved within each repetition (rotating order), memory
 * is warmed first (this VM's host takes back freed memory), and the median
 * of the repetitions is reported with the ratio to base pages.
 *
 *   largepages [--quick] [--size MiB] [--reps N] [--json FILE]
 * Needs root for its tmpfs/hugetlbfs mounts and the hugetlb pool, which it
 * sets and restores, inside a private mount namespace. A backing it
 * cannot set up is "n/a" -- and, under HPR_TEST_NO_SKIP, exit 1.
 */
#define _GNU_SOURCE
#include "common.h"

#include <hpregion/hpregion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { V_BASE, V_THP, V_HUGETLB, V_SHMEM, NV };
static const char *const vname[NV] = { "base-4k", "thp", "hugetlb", "shmem-huge" };
enum { T_FAULT, T_MEMSET, T_STRIDE, T_RANDOM, NT };
static const char *const tname[NT] = { "fault", "memset", "stride", "random" };

static size_t size = 1024UL << 20;
static int reps = 5;
static char tmpfs_dir[64];
static bool have_hugetlb, have_shmem;

struct buf {
	char *p;
	hpr_region *r;
};

static int get(int v, struct buf *b)
{
	struct hpr_config c;
	int rc;

	memset(b, 0, sizeof(*b));
	if (v == V_BASE) {
		b->p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b->p == MAP_FAILED)
			return -errno;
		madvise(b->p, size, MADV_NOHUGEPAGE);
		return 0;
	}
	hpr_config_init(&c);
	c.size = size;
	c.name = "largepages";
	c.backend = v == V_THP ? HPR_BACKEND_THP
				: v == V_HUGETLB ? HPR_BACKEND_HUGETLB : HPR_BACKEND_SHMEM;
	c.path = v == V_SHMEM ? tmpfs_dir : NULL;
	rc = hpr_create(&c, &b->r);
	if (rc) {
		fprintf(stderr, "%s: %s\n", vname[v], hpr_strerror(rc));
		return rc;
	}
	b->p = hpr_base(b->r);
	return 0;
}

static void put(struct buf *b)
{
	if (b->r)
		hpr_destroy(b->r);
	else if (b->p)
		munmap(b->p, size);
}

static double huge_pct(struct buf *b)
{
	struct hpr_stats st;

	if (!b->r || hpr_stats(b->r, &st))
		return 0;
	return 100.0 * (double)st.huge_mapped / (double)st.size;
}

static volatile uint64_t sink;

static void run_one(int v, double out[NT], double *cov)
{
	struct buf b;
	double t;
	uint64_t x = 88172645463325252ULL, acc = 0;
	size_t n = size / sizeof(uint64_t), accesses = 4u << 20;

	if (get(v, &b)) {
		for (int k = 0; k < NT; k++)
			out[k] = -1;
		return;
	}
	t = bench_now();
	memset(b.p, 1, size); /* first touch: faults */
	out[T_FAULT] = bench_now() - t;
	*cov = huge_pct(&b);
	t = bench_now();
	memset(b.p, 2, size);
	out[T_MEMSET] = bench_now() - t;
	t = bench_now();
	for (int rep = 0; rep < 4; rep++)
		for (size_t o = 0; o < size; o += 4096)
			b.p[o]++;
	out[T_STRIDE] = (bench_now() - t) / 4;
	t = bench_now();
	for (size_t i = 0; i < accesses; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		acc += ((uint64_t *)b.p)[(x + acc) % n];
	}
	out[T_RANDOM] = bench_now() - t;
	sink = acc;
	put(&b);
}

/* tmpfs and pool (root only), undone by bench_restore() */
static void setup(void)
{
	unsigned long old, got;

	bench_lock_system();
	if (geteuid() == 0 && !bench_private_ns() &&
	    !bench_mount_tmp("tmpfs", "huge=always", tmpfs_dir, sizeof(tmpfs_dir)))
		have_shmem = true;
	old = bench_pool_save(BENCH_POOL_DEFAULT);
	if (geteuid() == 0 && !bench_pool_set((size >> 21) + old, &got))
		have_hugetlb = got >= (size >> 21);
}

static void quick(void)
{
	size = 256UL << 20;
	reps = 3;
}

int main(int argc, char **argv)
{
	double res[NV][NT][32], cov[NV] = { 0 };
	double med[NV][NT];
	const char *json = NULL;
	const struct bench_opt opts[] = { BENCH_QUICK(quick), BENCH_SIZE(&size), BENCH_REPS(&reps),
					  BENCH_JSON(&json), BENCH_END };
	FILE *jf;

	if (bench_args(argc, argv, opts) || bench_limits("largepages", reps, 32, size, 64))
		return 2;
	setup();
	/* warm: make the host back the memory we will use */
	bench_touch(size * 2, false);
	printf("largepages: %zu MiB buffer, %d repetitions, median; variants interleaved\n",
	       size >> 20, reps);
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < NV; k++) {
			int v = (k + r) % NV;

			if ((v == V_HUGETLB && !have_hugetlb) || (v == V_SHMEM && !have_shmem)) {
				for (int t = 0; t < NT; t++)
					res[v][t][r] = -1;
				continue;
			}
			run_one(v, (double[NT]){ 0 }, &cov[v]);
			{
				double o[NT];

				run_one(v, o, &cov[v]);
				for (int t = 0; t < NT; t++)
					res[v][t][r] = o[t];
			}
		}
	bench_restore();
	for (int v = 0; v < NV; v++)
		for (int t = 0; t < NT; t++) {
			qsort(res[v][t], (size_t)reps, sizeof(double), bench_cmp_double);
			med[v][t] = res[v][t][reps / 2];
		}
	printf("\n%-11s %9s", "backing", "huge%");
	for (int t = 0; t < NT; t++)
		printf(" %10s %6s", tname[t], "x base");
	printf("\n");
	for (int v = 0; v < NV; v++) {
		printf("%-11s %8.1f%%", vname[v], cov[v]);
		for (int t = 0; t < NT; t++) {
			if (med[v][t] < 0) {
				printf(" %10s %6s", "n/a", "");
				continue;
			}
			printf(" %8.1fms %6.2f", med[v][t] * 1e3,
			       med[V_BASE][t] / med[v][t]);
		}
		printf("\n");
	}
	printf("(x base: base-page time / this time; > 1 is faster)\n");
	jf = json ? fopen(json, "w") : NULL;
	if (jf) {
		fprintf(jf, "{\"bench\":\"largepages\",\"size_mib\":%zu,\"reps\":%d,\"results\":[",
			size >> 20, reps);
		for (int v = 0; v < NV; v++) {
			fprintf(jf, "%s{\"backing\":\"%s\",\"huge_pct\":%.1f", v ? "," : "",
				vname[v], cov[v]);
			for (int t = 0; t < NT; t++)
				fprintf(jf, ",\"%s_s\":%.6f,\"%s_x_base\":%.3f", tname[t], med[v][t],
					tname[t], med[v][t] > 0 ? med[V_BASE][t] / med[v][t] : 0);
			fprintf(jf, "}");
		}
		fprintf(jf, "],\"headline\":[");
		for (int v = 1, first = 1; v < NV; v++)
			for (int t = 0; t < NT; t++) {
				if (med[v][t] <= 0)
					continue;
				fprintf(jf,
					"%s{\"measure\":\"%s %s (huge %.0f%%)\",\"ours\":\"%.1f ms\","
					"\"baseline\":\"%.1f ms (4 KiB pages)\",\"ratio\":\"%.2fx\"}",
					first ? "" : ",", vname[v], tname[t], cov[v], med[v][t] * 1e3,
					med[V_BASE][t] * 1e3, med[V_BASE][t] / med[v][t]);
				first = 0;
			}
		fprintf(jf, "]}\n");
		fclose(jf);
	}
	if ((!have_hugetlb || !have_shmem) && bench_no_skip()) {
		fprintf(stderr,
			"largepages: %s%snot run (root, a hugetlb pool, a tmpfs mount); "
			"HPR_TEST_NO_SKIP is set: a missing row is a failure\n",
			have_hugetlb ? "" : "hugetlb ", have_shmem ? "" : "shmem-huge ");
		return 1;
	}
	return 0;
}
