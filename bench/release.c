/* SPDX-License-Identifier: MIT */
/*
 * bench/release: the MADV_FREE experiment, side by side in one run.
 *
 * 1. Allocator churn (ebizzy-like). Each thread owns a set of 2 MiB chunks
 *    in one THP-backed heap and repeatedly takes a random chunk, touches
 *    it (a write per 4 KiB page, then a read pass over a 64 KiB record)
 *    and gives it back. Giving back is
 *      DONTNEED   madvise(MADV_DONTNEED): what allocators did before 4.5
 *      FREE       madvise(MADV_FREE)
 *      hpr-thp    hpr_release_lazy + hpr_fault_in on a THP region
 *      hpr-held   the same with release_delay_ms 100: a released page is
 *                 held 100 ms before MADV_FREE gives it to the kernel, so
 *                 a reuse within that costs a state change
 *      hpr-shmem  the same on a shmem region (release is a state change)
 *    Records/s for 1..N threads; each rep runs every variant for the same
 *    time in a rotated order, after a discarded warm-up rep; medians.
 *    Anchor (bench/run cites it in full): Minchan Kim's MADV_FREE series,
 *    v17 posting (merged in Linux 4.5), ebizzy MADV_FREE vs DONTNEED:
 *    4.07x at 1 thread (2961.9 -> 12069.7 records/s), 2.59-3.55x with
 *    more threads. (The 1.99x of earlier reports is an early posting, on
 *    a 4-CPU laptop.)
 *
 * 2. Reuse vs fresh fault, per backend (THP, shmem on tmpfs huge=always,
 *    hugetlb 2 MiB): per huge page, hpr_fault_in after hpr_release_lazy
 *    (reuse) against hpr_fault_in after release + hpr_reclaim (a fresh
 *    fault of memory given back), alternating, one worker.
 *
 * 3. Reuse under pressure (THP): the released pages are reclaimed before
 *    they are reused (MADV_PAGEOUT of the whole range: a lazily freed page
 *    is clean and is discarded, its huge page split), so hpr_fault_in
 *    faults base pages that must be collapsed. Latency per 2 MiB page
 *    (p50, p99, max) of hpr_fault_in on the caller's thread, side by side
 *    and interleaved: "synchronous" (HPR_F_COLLAPSE_SYNC: the collapse in
 *    the call, as hpregion 0.1 did) and "background" (the default: the
 *    region's workers collapse when the region is idle), with the time
 *    until the whole region is huge-mapped again and the least huge bytes
 *    seen then (smaps).
 *
 * Every hpregion variant prints its populate_calls and collapsed_pages
 * (hpr_stats): the calls into the kernel and the MADV_COLLAPSEs behind the
 * figures.
 *
 * Run as root (tmpfs mount in a private namespace, hugetlb pool under
 * the system lock HPR_SYSTEM_LOCK, restored at exit).
 *
 *   release [--quick] [--secs S] [--reps N] [--threads N] [--json FILE]
 */
#define _GNU_SOURCE
#include "common.h"

#include <hpregion/hpregion.h>

#define MADV_FREE_ANCHOR_1 "4.07x, 1 thread (MADV_FREE v17 posting)"
#define MADV_FREE_ANCHOR_N "2.59-3.55x, more threads (MADV_FREE v17 posting)"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define MiB (1024UL * 1024UL)
#define HP (2 * MiB)
#define CHUNKS_PER_THREAD 8
#define RECORD (64 * 1024)

static double secs = 1.0;
static int reps = 5;
static int max_threads;
static size_t reuse_pages = 64;
static char tmpfs_dir[64];

/* ---- 1. churn ---- */
enum variant { V_DONTNEED, V_FREE, V_HPR_THP, V_HPR_HELD, V_HPR_SHMEM, NV };
static const char *const vname[NV] = { "DONTNEED", "FREE", "hpr-thp", "hpr-held", "hpr-shmem" };
#define HELD_MS 100 /* hpr-held's release_delay_ms */
#define HPR_STR_(x) #x
#define HPR_STR(x) HPR_STR_(x)

struct heap {
	char *base;
	hpr_region *r; /* hpregion variants */
};

struct churn_arg {
	struct heap *h;
	enum variant v;
	int id;
	double until;
	_Atomic int *go;
	unsigned long records;
	int err;
};

static void *churn_thread(void *arg)
{
	struct churn_arg *a = arg;
	char *mine = a->h->base + (size_t)a->id * CHUNKS_PER_THREAD * HP;
	size_t mine_off = (size_t)a->id * CHUNKS_PER_THREAD * HP;
	unsigned seed = (unsigned)a->id * 7919u + 17u;
	unsigned long n = 0;
	volatile uint64_t sink = 0;

	while (!atomic_load(a->go))
		;
	while (bench_now() < a->until) {
		for (int rep = 0; rep < 16; rep++) {
			size_t c;
			char *p;
			uint64_t s = 0;

			seed = seed * 1103515245u + 12345u;
			c = (seed >> 16) % CHUNKS_PER_THREAD;
			p = mine + c * HP;
			if (a->v >= V_HPR_THP &&
			    (a->err = hpr_fault_in(a->h->r, mine_off + c * HP, HP)))
				return NULL;
			for (size_t o = 0; o < HP; o += 4096)
				*(volatile uint64_t *)(p + o) = n + o;
			for (size_t o = 0; o < RECORD; o += 64)
				s += *(volatile uint64_t *)(p + o);
			sink += s;
			switch (a->v) {
			case V_DONTNEED:
				madvise(p, HP, MADV_DONTNEED);
				break;
			case V_FREE:
				madvise(p, HP, MADV_FREE);
				break;
			default:
				a->err = hpr_release_lazy(a->h->r, mine_off + c * HP, HP);
				if (a->err)
					return NULL;
			}
			n++;
		}
	}
	a->records = n;
	(void)sink;
	return NULL;
}

static void heap_open(struct heap *h, enum variant v, size_t size)
{
	memset(h, 0, sizeof(*h));
	if (v <= V_FREE) {
		void *p = mmap(NULL, size + HP, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		h->base = (char *)(((uintptr_t)p + HP - 1) & ~(HP - 1));
		madvise(h->base, size, MADV_HUGEPAGE);
		memset(h->base, 1, size); /* warm */
	} else {
		struct hpr_config c;
		int rc;

		hpr_config_init(&c);
		c.size = size;
		c.backend = v == V_HPR_SHMEM ? HPR_BACKEND_SHMEM : HPR_BACKEND_THP;
		c.path = v == V_HPR_SHMEM ? tmpfs_dir : NULL;
		c.release_delay_ms = v == V_HPR_HELD ? HELD_MS : 0;
		c.flags = HPR_F_PREFAULT;
		c.workers = 1;
		c.name = "bench-churn";
		rc = hpr_create(&c, &h->r);
		if (rc) {
			fprintf(stderr, "hpr_create: %s\n", hpr_strerror(rc));
			exit(1);
		}
		h->base = hpr_base(h->r);
		memset(h->base, 1, size);
	}
}

/* the hpregion variants' calls into the kernel, summed over a thread
 * count's runs (churn() adds, main() prints and resets) */
static uint64_t churn_calls[NV], churn_collapsed[NV], churn_records[NV];

static void heap_close(struct heap *h, enum variant v, size_t size)
{
	if (h->r) {
		struct hpr_stats st;

		if (!hpr_stats(h->r, &st)) {
			churn_calls[v] += st.populate_calls;
			churn_collapsed[v] += st.collapsed_pages;
		}
		hpr_destroy(h->r);
	} else
		munmap(h->base, size); /* the alignment slack leaks; fine here */
}

static double churn(enum variant v, int nthreads)
{
	size_t size = (size_t)nthreads * CHUNKS_PER_THREAD * HP;
	struct churn_arg a[64];
	pthread_t th[64];
	struct heap h;
	_Atomic int go = 0;
	unsigned long total = 0;
	double t0, t1;

	heap_open(&h, v, size);
	for (int i = 0; i < nthreads; i++) {
		a[i] = (struct churn_arg){ .h = &h, .v = v, .id = i, .go = &go };
		a[i].until = 1e300;
	}
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, churn_thread, &a[i]);
	t0 = bench_now();
	for (int i = 0; i < nthreads; i++)
		a[i].until = t0 + secs;
	atomic_store(&go, 1);
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		if (a[i].err) {
			fprintf(stderr, "%s: %s\n", vname[v], hpr_strerror(a[i].err));
			exit(1);
		}
		total += a[i].records;
	}
	t1 = bench_now();
	heap_close(&h, v, size);
	churn_records[v] += total;
	return (double)total / (t1 - t0);
}

/* ---- 2. reuse vs fresh ---- */
enum backend { B_THP, B_SHMEM, B_HUGETLB, NB };
static const char *const bname[NB] = { "THP", "shmem huge=always", "hugetlb 2M" };

/* Fault the whole region back in and write it; *t: when the fault-in ended. */
static int fault_back(hpr_region *r, size_t size, int byte, double *t)
{
	int rc = hpr_fault_in(r, 0, size);

	*t = bench_now();
	if (!rc)
		memset(hpr_base(r), byte, size);
	return rc;
}

/* what hpr_stats() counted across the reuses and the fresh faults */
struct calls {
	uint64_t reuse_calls, reuse_collapsed, fresh_calls, fresh_collapsed;
};

static void stats_delta(hpr_region *r, struct hpr_stats *last, uint64_t *calls, uint64_t *collapsed)
{
	struct hpr_stats st;

	if (hpr_stats(r, &st))
		return;
	*calls += st.populate_calls - last->populate_calls;
	*collapsed += st.collapsed_pages - last->collapsed_pages;
	*last = st;
}

/* us per huge page for: reuse, fresh, release */
static int reuse_vs_fresh(enum backend b, double *reuse_us, double *fresh_us, double *release_us,
			  struct calls *k)
{
	struct hpr_stats last;
	struct hpr_config c;
	hpr_region *r;
	size_t size = reuse_pages * HP;
	double re[64], fr[64], rl[64];
	int rc, n = 0;

	hpr_config_init(&c);
	c.size = size;
	c.backend = b == B_THP	 ? HPR_BACKEND_THP :
		    b == B_SHMEM ? HPR_BACKEND_SHMEM :
				   HPR_BACKEND_HUGETLB;
	c.path = b == B_SHMEM ? tmpfs_dir : NULL;
	c.workers = 1;
	c.name = "bench-reuse";
	c.flags = HPR_F_PREFAULT;
	rc = hpr_create(&c, &r);
	if (rc) {
		fprintf(stderr, "%s: %s\n", bname[b], hpr_strerror(rc));
		return rc;
	}
	memset(hpr_base(r), 1, size); /* warm */
	memset(k, 0, sizeof(*k));
	hpr_stats(r, &last);
	for (int i = 0; i < reps + 1 && i < 64; i++) {
		double t0, t1, t2, t3, t4;
		struct calls w = { 0 };

		/* reuse: release, fault back */
		t0 = bench_now();
		hpr_release_lazy(r, 0, size);
		t1 = bench_now();
		if ((rc = fault_back(r, size, 2, &t2)))
			break;
		stats_delta(r, &last, &w.reuse_calls, &w.reuse_collapsed);
		/* fresh: release, reclaim, fault back */
		hpr_release_lazy(r, 0, size);
		hpr_reclaim(r, 0, NULL);
		t3 = bench_now();
		if ((rc = fault_back(r, size, 3, &t4)))
			break;
		stats_delta(r, &last, &w.fresh_calls, &w.fresh_collapsed);
		if (i == 0)
			continue; /* warm-up */
		k->reuse_calls += w.reuse_calls;
		k->reuse_collapsed += w.reuse_collapsed;
		k->fresh_calls += w.fresh_calls;
		k->fresh_collapsed += w.fresh_collapsed;
		re[n] = (t2 - t1) * 1e6 / (double)reuse_pages;
		fr[n] = (t4 - t3) * 1e6 / (double)reuse_pages;
		rl[n] = (t1 - t0) * 1e6 / (double)reuse_pages;
		n++;
	}
	hpr_destroy(r);
	if (rc) {
		fprintf(stderr, "%s: %s\n", bname[b], hpr_strerror(rc));
		return rc;
	}
	*reuse_us = bench_median(re, n);
	*fresh_us = bench_median(fr, n);
	*release_us = bench_median(rl, n);
	return 0;
}

/* ---- 3. reuse under pressure ---- */
enum collapse_mode { C_SYNC, C_BG, NC };
static const char *const cname[NC] = { "synchronous", "background" };

struct pressure {
	double p50_us, p99_us, max_us;
	double drain_ms;	    /* background: last fault-in to all huge, median */
	uint64_t calls, collapsed; /* over the measured reps */
	uint64_t queued, failed;   /* the background collapse's counters */
	size_t pages;		    /* latencies measured */
	ssize_t huge_min;	    /* huge bytes once the collapses are done, least */
};

struct pressure_run {
	hpr_region *r;
	double *lat, *drain;
	size_t k;
	int nd;
	struct hpr_stats last;
};

/* Wait (at most 10 s) until the region is all huge-mapped again; the
 * milliseconds that took, or -1. */
static double wait_all_huge(hpr_region *r, size_t size)
{
	double t0 = bench_now();

	while (bench_huge_bytes(hpr_base(r), size) < (ssize_t)size) {
		if (bench_now() - t0 > 10)
			return -1;
		usleep(200);
	}
	return (bench_now() - t0) * 1e3;
}

/* One rep of mode m: release every page, have the kernel reclaim them
 * (MADV_PAGEOUT), reuse them one 2 MiB page at a time timing each
 * hpr_fault_in, then wait for the collapses to be done. */
static int pressure_rep(struct pressure_run *pr, struct pressure *p, enum collapse_mode m,
			bool measure, int byte)
{
	size_t n = reuse_pages, size = n * HP;
	char *base = hpr_base(pr->r);
	struct hpr_stats st;
	double d;
	int rc;

	if ((rc = hpr_release_lazy(pr->r, 0, size)))
		return rc;
	if (madvise(base, size, MADV_PAGEOUT))
		return -errno;
	hpr_stats(pr->r, &pr->last);
	for (size_t pg = 0; pg < n; pg++) {
		double t0 = bench_now(), t;

		if ((rc = hpr_fault_in(pr->r, pg * HP, HP)))
			return rc;
		t = bench_now() - t0;
		memset(base + pg * HP, byte, HP);
		if (measure)
			pr->lat[pr->k++] = t * 1e6;
	}
	d = wait_all_huge(pr->r, size);
	if (hpr_stats(pr->r, &st))
		return -EIO;
	if (!measure)
		return 0;
	if (m == C_BG && d >= 0)
		pr->drain[pr->nd++] = d;
	p->calls += st.populate_calls - pr->last.populate_calls;
	p->collapsed += st.collapsed_pages - pr->last.collapsed_pages;
	p->queued += st.collapse_queued - pr->last.collapse_queued;
	p->failed += st.collapse_failed - pr->last.collapse_failed;
	{
		ssize_t h = bench_huge_bytes(base, size);

		if (h < p->huge_min)
			p->huge_min = h;
	}
	return 0;
}

static void pressure_sum(struct pressure_run *pr, struct pressure *p)
{
	if (pr->k) {
		qsort(pr->lat, pr->k, sizeof(double), bench_cmp_double);
		p->p50_us = pr->lat[pr->k / 2];
		p->p99_us = pr->lat[pr->k * 99 / 100];
		p->max_us = pr->lat[pr->k - 1];
		p->pages = pr->k;
	}
	p->drain_ms = pr->nd ? bench_median(pr->drain, pr->nd) : -1;
}

/* THP, both collapse modes side by side: HPR_F_COLLAPSE_SYNC (the
 * collapse in hpr_fault_in, as 0.1 did) and the default (the workers'
 * background collapse), reps interleaved, one worker each. */
static int reuse_after_pageout(struct pressure p[NC])
{
	size_t size = reuse_pages * HP;
	struct pressure_run pr[NC];
	int rc = 0;

	memset(pr, 0, sizeof(pr));
	for (int m = 0; m < NC && !rc; m++) {
		struct hpr_config c;

		memset(&p[m], 0, sizeof(p[m]));
		p[m].huge_min = (ssize_t)size;
		pr[m].lat = calloc((size_t)reps * reuse_pages, sizeof(double));
		pr[m].drain = calloc((size_t)reps, sizeof(double));
		if (!pr[m].lat || !pr[m].drain)
			bench_die("calloc");
		hpr_config_init(&c);
		c.size = size;
		c.backend = HPR_BACKEND_THP;
		c.workers = 1;
		c.name = "bench-pressure";
		c.flags = HPR_F_PREFAULT | (m == C_SYNC ? HPR_F_COLLAPSE_SYNC : 0);
		rc = hpr_create(&c, &pr[m].r);
		if (!rc)
			memset(hpr_base(pr[m].r), 1, size);
	}
	for (int i = 0; i < reps + 1 && !rc; i++)
		for (int j = 0; j < NC && !rc; j++) {
			int m = (i + j) % NC;

			rc = pressure_rep(&pr[m], &p[m], (enum collapse_mode)m, i > 0, 2 + i);
		}
	for (int m = 0; m < NC; m++) {
		if (pr[m].r)
			hpr_destroy(pr[m].r);
		pressure_sum(&pr[m], &p[m]);
		free(pr[m].lat);
		free(pr[m].drain);
	}
	if (rc)
		fprintf(stderr, "pressure: %s\n", hpr_strerror(rc));
	return rc ? rc : p[C_SYNC].pages && p[C_BG].pages ? 0 : -EINVAL;
}

/* tmpfs and hugetlb pool; bench_restore() at exit */
static void setup(void)
{
	unsigned long old;

	bench_isolate("release: run as root (tmpfs mount, hugetlb pool)");
	if (bench_mount_tmp("tmpfs", "huge=always", tmpfs_dir, sizeof(tmpfs_dir)))
		bench_die("mount tmpfs huge=always");
	old = bench_pool_save(BENCH_POOL_2M);
	bench_write_str("/proc/sys/vm/compact_memory", "1");
	bench_pool_set(old + reuse_pages, NULL);
}

static void quick(void)
{
	secs = 0.2;
	reps = 2;
	reuse_pages = 16;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	const struct bench_opt opts[] = {
		BENCH_QUICK(quick), BENCH_DOUBLE("--secs", "S", &secs),
		BENCH_REPS(&reps),  BENCH_INT("--threads", "N", &max_threads),
		BENCH_JSON(&json),  BENCH_END
	};
	double med[64][NV];
	double reuse[NB], fresh[NB], rel[NB];
	uint64_t calls[64][NV], collapsed[64][NV], records[64][NV];
	struct calls kc[NB];
	struct pressure pr[NC];
	int ok[NB], pr_ok;
	int nt_list[8], nnt = 0;
	FILE *jf;

	max_threads = (int)sysconf(_SC_NPROCESSORS_ONLN) * 2;
	if (bench_args(argc, argv, opts))
		return 2;
	if (reps < 1 || reps > 60 || max_threads < 1 || max_threads > 64)
		return 2;
	setup();
	for (int t = 1; t <= max_threads && nnt < 8; t *= 2)
		nt_list[nnt++] = t;

	printf("== allocator churn: records/s (2 MiB chunks, %d per thread, %.1f s "
	       "per run, median of %d interleaved reps)\n",
	       CHUNKS_PER_THREAD, secs, reps);
	for (int k = 0; k < nnt; k++) {
		double all[NV][64];

		for (int rp = 0; rp <= reps; rp++)
			for (int j = 0; j < NV; j++) {
				enum variant v = (enum variant)((j + rp) % NV);
				double x = churn(v, nt_list[k]);

				if (rp)
					all[v][rp - 1] = x;
			}
		for (int v = 0; v < NV; v++) {
			med[k][v] = bench_median(all[v], reps);
			calls[k][v] = churn_calls[v];
			collapsed[k][v] = churn_collapsed[v];
			records[k][v] = churn_records[v];
			churn_calls[v] = churn_collapsed[v] = churn_records[v] = 0;
		}
	}
	printf("%8s", "threads");
	for (int v = 0; v < NV; v++)
		printf(" %12s", vname[v]);
	printf(" %10s %10s %10s %10s\n", "FREE/DN", "hpr/DN", "hpr/FREE", "held/FREE");
	for (int k = 0; k < nnt; k++) {
		printf("%8d", nt_list[k]);
		for (int v = 0; v < NV; v++)
			printf(" %12.0f", med[k][v]);
		printf(" %9.2fx %9.2fx %9.2fx %9.2fx\n", med[k][V_FREE] / med[k][V_DONTNEED],
		       med[k][V_HPR_THP] / med[k][V_DONTNEED], med[k][V_HPR_THP] / med[k][V_FREE],
		       med[k][V_HPR_HELD] / med[k][V_FREE]);
	}
	printf("hpregion's calls into the kernel over all reps (warm-up included): "
	       "populate_calls / collapsed_pages / records\n");
	for (int k = 0; k < nnt; k++) {
		printf("%8d", nt_list[k]);
		for (int v = V_HPR_THP; v < NV; v++)
			printf("  %s %" PRIu64 " / %" PRIu64 " / %" PRIu64, vname[v], calls[k][v],
			       collapsed[k][v], records[k][v]);
		printf("\n");
	}

	printf("\n== reuse after hpr_release_lazy vs fresh fault after reclaim "
	       "(us per 2 MiB page, 1 worker, median of %d)\n",
	       reps);
	printf("%-20s %10s %10s %10s %12s %17s %17s\n", "backend", "release", "reuse", "fresh",
	       "reuse/fresh", "reuse calls/coll", "fresh calls/coll");
	for (int b = 0; b < NB; b++) {
		ok[b] = !reuse_vs_fresh((enum backend)b, &reuse[b], &fresh[b], &rel[b], &kc[b]);
		if (ok[b])
			printf("%-20s %10.2f %10.2f %10.2f %11.4fx %9" PRIu64 " / %-5" PRIu64
			       " %9" PRIu64 " / %-5" PRIu64 "\n",
			       bname[b], rel[b], reuse[b], fresh[b], reuse[b] / fresh[b],
			       kc[b].reuse_calls, kc[b].reuse_collapsed, kc[b].fresh_calls,
			       kc[b].fresh_collapsed);
		else
			printf("%-20s   (not run)\n", bname[b]);
	}
	printf("(calls/coll: populate_calls / collapsed_pages over the %d measured reps of "
	       "%zu pages)\n",
	       reps, reuse_pages);

	printf("\n== reuse under pressure: released THP pages reclaimed (MADV_PAGEOUT) "
	       "before reuse, us per 2 MiB page on the caller's thread, %d reps of %zu pages\n",
	       reps, reuse_pages);
	pr_ok = !reuse_after_pageout(pr);
	if (pr_ok) {
		printf("%-12s %9s %9s %9s %10s %17s %15s %18s\n", "collapse", "p50", "p99", "max",
		       "all huge", "calls/collapsed", "queued/failed", "huge after (min)");
		for (int m = 0; m < NC; m++) {
			char drain[32] = "at return";

			if (m == C_BG)
				snprintf(drain, sizeof(drain), "%.1f ms", pr[m].drain_ms);
			printf("%-12s %9.1f %9.1f %9.1f %10s %7" PRIu64 " / %-7" PRIu64
			       " %7" PRIu64 " / %-5" PRIu64 " %8zd of %zu MiB\n",
			       cname[m], pr[m].p50_us, pr[m].p99_us, pr[m].max_us, drain,
			       pr[m].calls, pr[m].collapsed, pr[m].queued, pr[m].failed,
			       pr[m].huge_min >> 20, reuse_pages * HP >> 20);
		}
		printf("(synchronous: HPR_F_COLLAPSE_SYNC; background: the default, the "
		       "workers collapse; all huge: median time from the last hpr_fault_in "
		       "until smaps-level PMD mapping of the whole region)\n");
	} else {
		printf("  (not run)\n");
	}

	if (json && (jf = fopen(json, "w"))) {
		int last = nnt - 1;

		fprintf(jf, "{\"headline\": [");
		/* FREE vs DONTNEED at 1 thread (nt_list[0]), then at the most */
		for (int i = 0, k = 0; i < 2; i++, k = last)
			fprintf(jf,
				"{\"measure\": \"churn records/s, %d thread%s: MADV_FREE vs "
				"MADV_DONTNEED\", \"ours\": %.0f, \"baseline\": %.0f, \"ratio\": "
				"%.2f, \"anchor\": \"%s\"},",
				nt_list[k], i ? "s" : "", med[k][V_FREE], med[k][V_DONTNEED],
				med[k][V_FREE] / med[k][V_DONTNEED],
				i ? MADV_FREE_ANCHOR_N : MADV_FREE_ANCHOR_1);
		for (int k = 0; k < nnt; k += (last ? last : 1))
			fprintf(jf,
				"{\"measure\": \"churn records/s, %d thread(s): hpregion "
				"(THP) vs MADV_DONTNEED\", \"ours\": %.0f, \"baseline\": "
				"%.0f, \"ratio\": %.2f},",
				nt_list[k], med[k][V_HPR_THP], med[k][V_DONTNEED],
				med[k][V_HPR_THP] / med[k][V_DONTNEED]);
		/* #19 item 3: against raw MADV_FREE (>= 0.97), at every count */
		for (int k = 0; k < nnt; k++)
			for (int v = V_HPR_THP; v <= V_HPR_HELD; v++)
				fprintf(jf,
					"{\"measure\": \"churn records/s, %d thread(s): hpregion "
					"(THP%s) vs MADV_FREE (>= 0.97)\", \"ours\": %.0f, "
					"\"baseline\": %.0f, \"ratio\": %.2f},",
					nt_list[k],
					v == V_HPR_HELD ? ", release_delay_ms " HPR_STR(HELD_MS) : "",
					med[k][v], med[k][V_FREE], med[k][v] / med[k][V_FREE]);
		{
			bool first = true;

			for (int b = 0; b < NB; b++) {
				if (!ok[b])
					continue;
				fprintf(jf,
					"%s{\"measure\": \"reuse of a released page / fresh "
					"fault, us per 2 MiB (%s)\", \"ours\": %.2f, "
					"\"baseline\": %.2f, \"ratio\": %.4f}",
					first ? "" : ",", bname[b], reuse[b], fresh[b],
					reuse[b] / fresh[b]);
				first = false;
			}
			for (int m = 0; m < NC && pr_ok; m++)
				fprintf(jf,
					"%s{\"measure\": \"reuse after reclaim, us per 2 MiB "
					"(THP, MADV_PAGEOUT between release and reuse, %s "
					"collapse): p99 vs p50\", \"ours\": \"%.1f (p99; max %.1f; "
					"%" PRIu64 " populate calls, %" PRIu64 " collapsed)\", "
					"\"baseline\": \"%.1f (p50)\", \"ratio\": %.2f}",
					first && !m ? "" : ",", cname[m], pr[m].p99_us,
					pr[m].max_us, pr[m].calls, pr[m].collapsed, pr[m].p50_us,
					pr[m].p99_us / pr[m].p50_us);
			if (pr_ok)
				fprintf(jf,
					",{\"measure\": \"reuse after reclaim, p99 us per 2 MiB: "
					"background vs synchronous collapse\", \"ours\": %.1f, "
					"\"baseline\": %.1f, \"ratio\": %.3f}",
					pr[C_BG].p99_us, pr[C_SYNC].p99_us,
					pr[C_BG].p99_us / pr[C_SYNC].p99_us);
		}
		fprintf(jf, "], \"series\": [{\"id\": \"churn\", \"title\": \"allocator "
			    "churn\", \"xlabel\": \"threads\", \"ylabel\": \"records/s\", "
			    "\"lines\": {");
		for (int v = 0; v < NV; v++) {
			fprintf(jf, "%s\"%s\": [", v ? ", " : "", vname[v]);
			for (int k = 0; k < nnt; k++)
				fprintf(jf, "%s[%d, %.0f]", k ? ", " : "", nt_list[k], med[k][v]);
			fprintf(jf, "]");
		}
		fprintf(jf, "}}]}\n");
		fclose(jf);
	}
	if (!pr_ok && bench_no_skip()) {
		fprintf(stderr, "release: the pressure variant did not run; HPR_TEST_NO_SKIP is "
				"set: a missing row is a failure\n");
		return 1;
	}
	for (int b = 0; b < NB; b++)
		if (!ok[b] && bench_no_skip()) {
			fprintf(stderr,
				"release: %s not run; HPR_TEST_NO_SKIP is set: a missing "
				"row is a failure\n",
				bname[b]);
			return 1;
		}
	return 0;
}
