/* SPDX-License-Identifier: MIT */
/*
 * bench/collapse: how fast hpr_collapse turns 4 KiB-mapped memory into huge
 * pages, per worker thread, next to a raw single-threaded MADV_COLLAPSE
 * loop over the same kind of memory. For scale it also prints a computed
 * bound, not a measurement: the least time khugepaged could take at this
 * machine's settings (pages_to_scan 4 KiB pages every scan_sleep_millisecs:
 * 4096 pages / 10 s by default, i.e. 8 huge pages per 10 s, not counting
 * alloc_sleep_millisecs on failures). khugepaged is not timed; its row is
 * labelled "computed bound" and bench/run keeps it out of the summary.
 *
 * 4 KiB-mapped memory is made without touching system settings:
 *  - THP: MADV_NOHUGEPAGE while the memory is written, MADV_HUGEPAGE back
 *    before collapsing (a VMA marked NOHUGEPAGE refuses MADV_COLLAPSE);
 *  - shmem: a memfd while shmem_enabled is never, or a region on a tmpfs
 *    mounted huge=never when run as root (faults give 4 KiB pages).
 * Each rep rebuilds the 4 KiB memory (in memory touched before: warm),
 * runs every variant in a rotated order, checks the result in smaps and
 * the data; after a discarded warm-up rep the table gives medians.
 *
 *   collapse [--quick] [--size MiB] [--reps N] [--json FILE]
 */
#define _GNU_SOURCE
#include "common.h"

#include <hpregion/hpregion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define MiB (1024UL * 1024UL)
#define HP (2 * MiB)

static size_t size = 512 * MiB;
static int reps = 5;
static int ncpu;
static char tmpfs_dir[64];

static long read_long(const char *path)
{
	char b[64];

	bench_read_str(path, b, sizeof(b));
	return *b ? strtol(b, NULL, 10) : -1;
}

/* bytes of huge-mapped memory in the VMAs overlapping [p, p+len); 0 without smaps */
static size_t huge_bytes(const void *p, size_t len)
{
	ssize_t huge = bench_huge_bytes(p, len);

	return huge < 0 ? 0 : (size_t)huge;
}

static void fill(char *p, size_t len, uint64_t seed)
{
	for (size_t o = 0; o < len; o += 4096)
		*(uint64_t *)(p + o) = seed ^ o;
}

static int verify(const char *p, size_t len, uint64_t seed)
{
	for (size_t o = 0; o < len; o += 4096)
		if (*(const uint64_t *)(p + o) != (seed ^ o))
			return -1;
	return 0;
}

enum kind { K_THP, K_SHMEM };
static const char *const kname[] = { "THP", "shmem" };

/*
 * khugepaged is woken the moment a process's first VM_HUGEPAGE area
 * registers its mm (the scan list was empty), and then collapses up to
 * pages_to_scan pages at once -- racing the measurement. Register this
 * process once, up front, with a small area of its own, and let that pass
 * finish: later areas join a list khugepaged already holds and wait for
 * its next scan_sleep_millisecs round.
 */
static void khugepaged_register(void)
{
	size_t len = 2 * HP;
	char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED)
		return;
	madvise(a, len, MADV_HUGEPAGE);
	a[0] = 1; /* kept mapped for the whole run */
	usleep(200 * 1000);
}

/* A region of 4 KiB-mapped memory, written. */
static hpr_region *small_region(enum kind k, unsigned workers)
{
	for (int attempt = 0;; attempt++) {
		struct hpr_config c;
		hpr_region *r;
		size_t huge;
		int rc;

		hpr_config_init(&c);
		c.size = size;
		c.backend = k == K_THP ? HPR_BACKEND_THP : HPR_BACKEND_SHMEM;
		c.path = k == K_SHMEM && *tmpfs_dir ? tmpfs_dir : NULL;
		c.workers = workers;
		c.name = "bench-collapse";
		rc = hpr_create(&c, &r);
		if (rc) {
			fprintf(stderr, "hpr_create(%s): %s\n", kname[k], hpr_strerror(rc));
			exit(1);
		}
		if (k == K_THP)
			madvise(hpr_base(r), size, MADV_NOHUGEPAGE);
		fill(hpr_base(r), size, 0xabc);
		if (k == K_THP)
			madvise(hpr_base(r), size, MADV_HUGEPAGE);
		huge = huge_bytes(hpr_base(r), size);
		if (huge <= size / 20)
			return r;
		hpr_destroy(r);
		/* khugepaged's round may have caught it: once more */
		if (attempt < 4) {
			usleep(100 * 1000);
			continue;
		}
		fprintf(stderr,
			"%s: memory came in huge already (%zu of %zu MiB, 5 tries); nothing "
			"to measure (shmem_enabled or the mount gives huge pages, or "
			"khugepaged scans faster than this bench fills)\n",
			kname[k], huge / MiB, size / MiB);
		exit(bench_no_skip() ? 1 : 77);
	}
}

/* seconds to collapse, or < 0 */
static double run_hpr(enum kind k, unsigned workers, double *huge_share)
{
	hpr_region *r = small_region(k, workers);
	size_t got = 0;
	double t0, t1;
	int rc;

	t0 = bench_now();
	rc = hpr_collapse(r, 0, size, &got);
	t1 = bench_now();
	if (rc) {
		fprintf(stderr, "hpr_collapse: %s\n", hpr_strerror(rc));
		exit(1);
	}
	*huge_share = (double)huge_bytes(hpr_base(r), size) / (double)size;
	if (verify(hpr_base(r), size, 0xabc)) {
		fprintf(stderr, "data changed by collapse\n");
		exit(1);
	}
	hpr_destroy(r);
	return t1 - t0;
}

static double run_raw(enum kind k, double *huge_share)
{
	hpr_region *r = small_region(k, 1);
	char *p = hpr_base(r);
	double t0, t1;

	t0 = bench_now();
	for (size_t o = 0; o < size; o += HP)
		madvise(p + o, HP, MADV_COLLAPSE);
	t1 = bench_now();
	*huge_share = (double)huge_bytes(p, size) / (double)size;
	hpr_destroy(r);
	return t1 - t0;
}

static void quick(void)
{
	size = 64 * MiB;
	reps = 2;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	const struct bench_opt opts[] = { BENCH_QUICK(quick), BENCH_SIZE(&size), BENCH_REPS(&reps),
					  BENCH_JSON(&json), BENCH_END };
	enum { V_RAW, V_HPR1, V_HPRN, NV };
	const char *vname[NV] = { "raw MADV_COLLAPSE x1", "hpr_collapse w1", "hpr_collapse wN" };
	double t[2][NV][64], med[2][NV], share[2][NV];
	long to_scan, sleep_ms;
	double khp_rate;
	FILE *jf;

	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (bench_args(argc, argv, opts))
		return 2;
	if (reps < 1 || reps > 60 || size < HP)
		return 2;
	size &= ~(HP - 1);
	/* a private tmpfs huge=never: shmem that faults in 4 KiB pages whatever
	 * shmem_enabled says (bench_restore() unmounts it at exit) */
	if (!geteuid() && !bench_private_ns())
		bench_mount_tmp("tmpfs", "huge=never", tmpfs_dir, sizeof(tmpfs_dir));
	to_scan = read_long("/sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan");
	sleep_ms = read_long("/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs");
	if (to_scan <= 0 || sleep_ms <= 0) {
		to_scan = 4096; /* kernel defaults */
		sleep_ms = 10000;
	}
	khugepaged_register();
	/* warm: the 4 KiB copy and the huge pages it collapses into */
	bench_touch(3 * size, true);
	/* bytes per second khugepaged gets through, at best */
	khp_rate = (double)to_scan * 4096.0 / ((double)sleep_ms / 1000.0);

	printf("== collapse %zu MiB of 4 KiB-mapped memory (median of %d interleaved "
	       "reps, %d CPUs)\n",
	       size / MiB, reps, ncpu);
	for (int rp = 0; rp <= reps; rp++)
		for (int j = 0; j < 2 * NV; j++) {
			int idx = (j + rp) % (2 * NV), k = idx / NV, v = idx % NV;
			double x, sh;

			if (v == V_RAW)
				x = run_raw((enum kind)k, &sh);
			else
				x = run_hpr((enum kind)k, v == V_HPR1 ? 1 : (unsigned)ncpu, &sh);
			if (rp) {
				t[k][v][rp - 1] = x;
				share[k][v] = sh;
			}
		}
	printf("%-7s %-22s %10s %12s %12s %8s\n", "memory", "variant", "seconds",
	       "GB/s", "GB/s/thread", "huge%");
	for (int k = 0; k < 2; k++)
		for (int v = 0; v < NV; v++) {
			int thr = v == V_HPRN ? ncpu : 1;

			med[k][v] = bench_median(t[k][v], reps);
			printf("%-7s %-22s %10.4f %12.3f %12.3f %7.1f%%\n", kname[k], vname[v],
			       med[k][v], (double)size / med[k][v] / 1e9,
			       (double)size / med[k][v] / 1e9 / thr, share[k][v] * 100);
		}
	printf("\nkhugepaged, computed bound (not timed): at pages_to_scan=%ld, "
	       "scan_sleep_millisecs=%ld it scans at most %.2f MB/s, so >= %.0f s for %zu MiB\n",
	       to_scan, sleep_ms, khp_rate / 1e6, (double)size / khp_rate, size / MiB);
	for (int k = 0; k < 2; k++)
		printf("%-7s hpr_collapse w%d: %.2fx a raw single-thread loop; the computed "
		       "khugepaged bound is %.0fx its time\n",
		       kname[k], ncpu, med[k][V_RAW] / med[k][V_HPRN],
		       ((double)size / khp_rate) / med[k][V_HPRN]);

	if (json && (jf = fopen(json, "w"))) {
		fprintf(jf, "{\"headline\": [");
		for (int k = 0; k < 2; k++) {
			fprintf(jf,
				"%s{\"measure\": \"%s: GB/s collapsed per thread (hpr_collapse, "
				"1 worker) vs raw MADV_COLLAPSE loop\", \"ours\": %.3f, "
				"\"baseline\": %.3f, \"ratio\": %.2f},",
				k ? "," : "", kname[k], (double)size / med[k][V_HPR1] / 1e9,
				(double)size / med[k][V_RAW] / 1e9, med[k][V_RAW] / med[k][V_HPR1]);
			fprintf(jf,
				"{\"measure\": \"%s: seconds to make %zu MiB huge, hpr_collapse "
				"(%d workers) vs khugepaged computed bound (not timed)\", "
				"\"ours\": %.4f, \"baseline\": \"%.1f s = %zu MiB / "
				"(pages_to_scan %ld x 4 KiB / scan_sleep_millisecs %ld), "
				"computed\", \"ratio\": %.0f}",
				kname[k], size / MiB, ncpu, med[k][V_HPRN], (double)size / khp_rate,
				size / MiB, to_scan, sleep_ms,
				((double)size / khp_rate) / med[k][V_HPRN]);
		}
		fprintf(jf, "]}\n");
		fclose(jf);
	}
	return 0;
}
