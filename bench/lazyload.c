/* SPDX-License-Identifier: MIT */
/*
 * bench/lazyload: restoring a region from a snapshot lazily
 * (hpr_load(HPR_SNAP_LAZY), docs/snapshot.md "Lazy load") against the
 * eager hpr_load, per backend (THP; shmem on a private tmpfs mounted
 * huge=always; hugetlb 2 MiB, the pool raised for the run and restored).
 *
 * One snapshot of --size MiB, every page saved (no holes) with a pattern,
 * lives on a private tmpfs (page cache, so the figures are the loader's,
 * not a disk's). Per repetition, in rotating order, each on a fresh region
 * (the memory warmed first: this VM's host backs memory on first touch,
 * which is not what we compare):
 *   eager  hpr_load(r, fd, 0): the time until it returns, and its throughput
 *   lazy   hpr_load(r, fd, HPR_SNAP_LAZY): the time until it returns, then
 *          nothing touches the region; the time until hpr_load_wait returns
 *          (every page loaded, verified, mapped and huge) gives the
 *          background fill's throughput
 *   touch  the lazy load again, and one thread reads one byte of --touches
 *          random pages, one after the other, while the fill runs: each
 *          read is timed; the reads hpr_load_progress counts as demanded
 *          (the fill had not got there) are the first-touch latencies
 * After each load every page is checked (one word per 4 KiB) and the
 * huge-mapped bytes are read from smaps. Medians of --reps (latencies:
 * p50/p99 over all reps' demand-served touches). Headline ratios: eager
 * time / lazy return time (issue #18 target >= 100x), fill / eager
 * throughput (>= 0.8x), p99 first-touch latency (< 1 ms).
 *
 *   lazyload [--quick] [--size MiB] [--reps N] [--touches N] [--json FILE]
 *            [--backend thp|shmem|hugetlb]
 * Memory: the snapshot file and one region, 2 x --size. Needs root
 * (mounts, the pool, /dev/userfaultfd); holds the system lock.
 */
#define _GNU_SOURCE
#include "common.h"

#include <hpregion/hpregion.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PS (2UL << 20)
#define MAX_REPS 32
#define MAX_TOUCHES 4096

enum { B_THP, B_SHMEM, B_HUGETLB, NB };
static const char *const bname[NB] = { "THP", "shmem huge=always", "hugetlb 2M" };
enum { V_EAGER, V_LAZY, V_TOUCH, NV };

static size_t size = 1024UL << 20;
static int reps = 3, touches = 64;
static char snapdir[64], shmdir[64];
static int snapfd = -1;
static unsigned long pool0; /* the 2 MiB pool before the hugetlb runs */

struct res {
	double eager, lazy_ret, lazy_fill; /* s, medians */
	double p50, p99, max;		   /* demand-served first touches, s */
	int ndemand, nloaded;		   /* touches served on demand / already loaded */
	size_t huge_eager, huge_lazy;	   /* smallest huge-mapped bytes after a load */
};
static struct res res[NB];
static bool ran[NB];
static unsigned long bad_words;
static int lazy_mode = -1; /* hpr_stats().lazy_load of the last lazy load */

static void fail(const char *what, int rc)
{
	fprintf(stderr, "lazyload bench: %s: %s\n", what, hpr_strerror(rc));
	exit(1);
}

static uint64_t pattern(size_t word)
{
	return (uint64_t)word * 0x9e3779b97f4a7c15ULL ^ 0x6c617a79ULL;
}

/* one word per 4 KiB: a load that mapped the wrong page or zeros shows */
static void check(const uint64_t *w)
{
	for (size_t i = 0; i < size / 8; i += 4096 / 8)
		bad_words += w[i] != pattern(i);
}

static void config(int b, struct hpr_config *c)
{
	hpr_config_init(c);
	c->backend = b == B_THP	  ? HPR_BACKEND_THP :
		     b == B_SHMEM ? HPR_BACKEND_SHMEM :
				    HPR_BACKEND_HUGETLB;
	c->size = size;
	c->page_size = PS;
	c->path = b == B_SHMEM ? shmdir : NULL;
	c->name = "bench-lazyload";
}

static hpr_region *fresh(int b)
{
	struct hpr_config c;
	hpr_region *r;
	int rc;

	if (b != B_HUGETLB) /* hugetlb pool pages stay backed once used */
		bench_touch(size, true);
	config(b, &c);
	rc = hpr_create(&c, &r);
	if (rc)
		fail("hpr_create", rc);
	return r;
}

/* The snapshot: a THP region filled with the pattern, saved to snapdir. */
static void make_snapshot(void)
{
	char path[128];
	uint64_t *w;
	hpr_region *r = fresh(B_THP);
	int rc;

	snprintf(path, sizeof(path), "%s/snap", snapdir);
	snapfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (snapfd < 0)
		bench_die(path);
	rc = hpr_fault_in(r, 0, size);
	if (rc)
		fail("hpr_fault_in", rc);
	w = hpr_base(r);
	for (size_t i = 0; i < size / 8; i++)
		w[i] = pattern(i);
	rc = hpr_save(r, snapfd, 0);
	if (rc)
		fail("hpr_save", rc);
	hpr_destroy(r);
}

static void note_huge(hpr_region *r, size_t *slot)
{
	ssize_t h = bench_huge_bytes(hpr_base(r), size);

	if (h >= 0 && (!*slot || (size_t)h < *slot))
		*slot = (size_t)h;
}

static double run_eager(int b)
{
	hpr_region *r = fresh(b);
	double t0, t;
	int rc;

	t0 = bench_now();
	rc = hpr_load(r, snapfd, 0, NULL);
	t = bench_now() - t0;
	if (rc)
		fail("hpr_load (eager)", rc);
	note_huge(r, &res[b].huge_eager);
	check(hpr_base(r));
	hpr_destroy(r);
	return t;
}

static size_t demanded(hpr_region *r)
{
	size_t d = 0;

	hpr_load_progress(r, NULL, &d, NULL);
	return d;
}

/* Lazy: *fill is the time until hpr_load_wait returns; with lat, the
 * touches' latencies go there (demand-served ones first, *nd of them). */
static double run_lazy(int b, double *fill, double *lat, int *nd, int *nl)
{
	hpr_region *r = fresh(b);
	size_t npages = size / PS;
	struct hpr_stats st;
	double t0, t;
	unsigned seed = 42u + (unsigned)*nd;
	int rc;

	t0 = bench_now();
	rc = hpr_load(r, snapfd, HPR_SNAP_LAZY, NULL);
	t = bench_now() - t0;
	if (rc)
		fail("hpr_load (lazy)", rc);
	for (int i = 0; lat && i < touches; i++) {
		size_t p = (size_t)rand_r(&seed) % npages, d0 = demanded(r);
		volatile const char *a = (char *)hpr_base(r) + p * PS + (size_t)rand_r(&seed) % PS;
		double t1 = bench_now(), dt;

		(void)*a;
		dt = bench_now() - t1;
		if (demanded(r) > d0)
			lat[(*nd)++] = dt;
		else
			++*nl;
	}
	rc = hpr_load_wait(r);
	*fill = bench_now() - t0;
	if (rc)
		fail("hpr_load_wait", rc);
	if (!hpr_stats(r, &st))
		lazy_mode = st.lazy_load;
	if (!lat)
		note_huge(r, &res[b].huge_lazy);
	check(hpr_base(r));
	hpr_destroy(r);
	return t;
}

static bool setup(int b)
{
	char opts[96];

	if (b == B_SHMEM && !*shmdir) {
		snprintf(opts, sizeof(opts), "size=%zuM,huge=always", (size >> 20) + 64);
		if (bench_mount_tmp("tmpfs", opts, shmdir, sizeof(shmdir)))
			bench_die("mount tmpfs huge=always");
	}
	if (b == B_HUGETLB) {
		unsigned long need = size / PS + 4, got = 0;

		pool0 = bench_pool_save(BENCH_POOL_2M);
		if (bench_pool_set(pool0 + need, &got) || got < pool0 + need) {
			fprintf(stderr, "lazyload: the 2 MiB hugetlb pool gave %lu of %lu pages\n",
				got > pool0 ? got - pool0 : 0, need);
			bench_pool_set(pool0, NULL);
			return false;
		}
	}
	return true;
}

static void teardown(int b)
{
	if (b == B_HUGETLB) /* the pool back before the next backend */
		bench_pool_set(pool0, NULL);
}

static void measure(int b)
{
	static double v[NV][MAX_REPS], fill[MAX_REPS], lat[MAX_REPS * MAX_TOUCHES];
	int nd = 0, nl = 0;
	double dummy;

	run_eager(b); /* warm-up round, not counted */
	run_lazy(b, &dummy, NULL, &nd, &nl);
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < NV; k++) {
			int var = (k + r) % NV;

			if (var == V_EAGER)
				v[var][r] = run_eager(b);
			else if (var == V_LAZY)
				v[var][r] = run_lazy(b, &fill[r], NULL, &nd, &nl);
			else
				v[var][r] = run_lazy(b, &dummy, lat, &nd, &nl);
		}
	res[b].eager = bench_median(v[V_EAGER], reps);
	res[b].lazy_ret = bench_median(v[V_LAZY], reps);
	res[b].lazy_fill = bench_median(fill, reps);
	res[b].ndemand = nd;
	res[b].nloaded = nl;
	if (nd) {
		qsort(lat, (size_t)nd, sizeof(lat[0]), bench_cmp_double);
		res[b].p50 = lat[nd / 2];
		res[b].p99 = lat[(nd * 99 + 99) / 100 - 1];
		res[b].max = lat[nd - 1];
	}
}

static double gbs(double s)
{
	return (double)size / s / 1e9;
}

static void table(void)
{
	printf("\n%-18s %10s %10s %9s %10s %10s %8s %9s %9s %9s %8s %12s\n", "backend", "eager ms",
	       "lazy ret", "eager/ret", "eager GB/s", "fill GB/s", "fill/eag", "touch p50", "p99",
	       "max", "demand", "huge MiB e/l");
	for (int b = 0; b < NB; b++) {
		struct res *x = &res[b];

		if (!ran[b]) {
			printf("%-18s %10s\n", bname[b], "not run");
			continue;
		}
		printf("%-18s %10.1f %10.3f %8.0fx %10.2f %10.2f %7.2fx %9.3f %9.3f %9.3f %4d/%-3d "
		       "%5zu/%-5zu\n",
		       bname[b], x->eager * 1e3, x->lazy_ret * 1e3, x->eager / x->lazy_ret,
		       gbs(x->eager), gbs(x->lazy_fill), x->eager / x->lazy_fill, x->p50 * 1e3,
		       x->p99 * 1e3, x->max * 1e3, x->ndemand, x->ndemand + x->nloaded,
		       x->huge_eager >> 20, x->huge_lazy >> 20);
	}
	printf("(medians; lazy ret: until hpr_load returns; fill: until hpr_load_wait returns, "
	       "nothing touched; touch: ms of a read of one byte of a page the fill had not "
	       "reached, p50/p99/max over the demand-served touches, demand = those / all)\n");
}

static void json_out(const char *path)
{
	FILE *f = fopen(path, "w");
	const char *sep = "";

	if (!f)
		bench_die(path);
	fprintf(f,
		"{\"bench\":\"lazyload\",\"size_mib\":%zu,\"reps\":%d,\"touches\":%d,\"results\":[",
		size >> 20, reps, touches);
	for (int b = 0; b < NB; b++) {
		struct res *x = &res[b];

		if (!ran[b])
			continue;
		fprintf(f,
			"%s{\"backend\":\"%s\",\"eager_ms\":%.3f,\"lazy_return_ms\":%.4f,"
			"\"lazy_fill_ms\":%.3f,\"touch_p50_ms\":%.4f,\"touch_p99_ms\":%.4f,"
			"\"touch_max_ms\":%.4f,\"touches_demand\":%d,\"touches_loaded\":%d,"
			"\"huge_eager\":%zu,\"huge_lazy\":%zu}",
			sep, bname[b], x->eager * 1e3, x->lazy_ret * 1e3, x->lazy_fill * 1e3,
			x->p50 * 1e3, x->p99 * 1e3, x->max * 1e3, x->ndemand, x->nloaded,
			x->huge_eager, x->huge_lazy);
		sep = ",";
	}
	fprintf(f, "],\"headline\":[");
	sep = "";
	for (int b = 0; b < NB; b++) {
		struct res *x = &res[b];

		if (!ran[b]) {
			fprintf(f,
				"%s{\"measure\":\"lazy load returns vs eager load (%s)\","
				"\"ours\":\"not run\",\"baseline\":\"not run\",\"ratio\":\"n/a\"}",
				sep, bname[b]);
			sep = ",";
			continue;
		}
		fprintf(f,
			"%s{\"measure\":\"lazy load returns vs eager load (%s, %zu MiB)\","
			"\"ours\":\"%.3f ms\",\"baseline\":\"%.1f ms\",\"ratio\":\"%.0fx\"}",
			sep, bname[b], size >> 20, x->lazy_ret * 1e3, x->eager * 1e3,
			x->eager / x->lazy_ret);
		fprintf(f,
			",{\"measure\":\"lazy background fill vs eager load throughput (%s)\","
			"\"ours\":\"%.2f GB/s, %zu of %zu MiB huge-mapped\",\"baseline\":\"%.2f "
			"GB/s\",\"ratio\":\"%.2fx\"}",
			bname[b], gbs(x->lazy_fill), x->huge_lazy >> 20, size >> 20, gbs(x->eager),
			x->eager / x->lazy_fill);
		if (!x->ndemand) /* the fill was faster than every touch */
			fprintf(f,
				",{\"measure\":\"first touch of a demand-loaded 2 MiB page during the "
				"fill (%s)\",\"ours\":\"n/a: no touch found its page unloaded\","
				"\"baseline\":\"target p99 < 1 ms\",\"ratio\":\"n/a\"}",
				bname[b]);
		else
			fprintf(f,
				",{\"measure\":\"first touch of a demand-loaded 2 MiB page during the "
				"fill (%s)\",\"ours\":\"p50 %.3f ms, p99 %.3f ms (%d touches)\","
				"\"baseline\":\"target p99 < 1 ms\",\"ratio\":\"%.2fx of 1 ms\"}",
				bname[b], x->p50 * 1e3, x->p99 * 1e3, x->ndemand, x->p99 * 1e3);
		sep = ",";
	}
	fprintf(f, "]}\n");
	fclose(f);
}

static void quick(void)
{
	size = 64UL << 20;
	reps = 2;
	touches = 8;
}

int main(int argc, char **argv)
{
	const char *json = NULL, *only = NULL;
	const struct bench_opt opts[] = {
		BENCH_QUICK(quick), BENCH_SIZE(&size),
		BENCH_REPS(&reps),  BENCH_INT("--touches", "N", &touches),
		BENCH_JSON(&json),  { "--backend", "thp|shmem|hugetlb", BENCH_T_STR, &only, NULL },
		BENCH_END
	};
	int failed = 0;

	if (bench_args(argc, argv, opts) || bench_limits("lazyload", reps, MAX_REPS, size, 16))
		return 2;
	if (touches < 1 || touches > MAX_TOUCHES) {
		fprintf(stderr, "lazyload: --touches must be 1..%d\n", MAX_TOUCHES);
		return 2;
	}
	size &= ~(PS - 1);
	bench_isolate("lazyload: needs root (tmpfs mounts, the hugetlb pool, /dev/userfaultfd)");
	bench_touch(2 * size, true);
	{
		char opts_s[64];

		snprintf(opts_s, sizeof(opts_s), "size=%zuM", (size >> 20) + 64);
		if (bench_mount_tmp("tmpfs", opts_s, snapdir, sizeof(snapdir)))
			bench_die("mount tmpfs");
	}
	make_snapshot();
	printf("lazyload: %zu MiB snapshot (every page saved) on tmpfs, %d repetitions, "
	       "variants interleaved, medians; %d touches a repetition\n",
	       size >> 20, reps, touches);
	for (int b = 0; b < NB; b++) {
		if (only && strncasecmp(bname[b], only, strlen(only)))
			continue;
		if (!setup(b)) {
			failed = 1;
			continue;
		}
		measure(b);
		ran[b] = true;
		teardown(b);
	}
	if (lazy_mode != HPR_LAZY_UFFD)
		printf("lazyload: the lazy loads were EAGER (no userfaultfd here): the lazy "
		       "figures are the eager fallback's\n");
	table();
	if (json)
		json_out(json);
	close(snapfd);
	bench_restore();
	if (bad_words) {
		fprintf(stderr, "lazyload: %lu sampled words lost their pattern after a load\n",
			bad_words);
		return 1;
	}
	return (failed || lazy_mode != HPR_LAZY_UFFD) && bench_no_skip() ? 1 : 0;
}
