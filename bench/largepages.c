/* SPDX-License-Identifier: MIT */
/*
 * bench/largepages: the THP consumer microbenchmark ("largepages"): what
 * huge pages buy a program that uses a large buffer.
 *
 * For each backing — base pages (plain mmap, MADV_NOHUGEPAGE: what a program
 * gets without hpregion), THP, hugetlb and shmem on tmpfs huge=always
 * (through hpregion) — it times, on the same buffer size:
 *   fault    memset of a fresh buffer (page-fault + zeroing cost)
 *   memset   memset again over resident memory (TLB reach, bandwidth)
 *   stride   one byte written per 4 KiB, over the whole buffer (TLB misses)
 *   random   dependent random 8-byte reads (TLB + cache misses)
 * Variants are interleaved within each repetition (rotating order), memory
 * is warmed first (this VM's host takes back freed memory), and the median
 * of the repetitions is reported with the ratio to base pages.
 *
 *   largepages [--quick] [--size MiB] [--reps N] [--json FILE]
 * Needs root for its tmpfs/hugetlbfs mounts and the hugetlb pool, which it
 * sets and restores, inside a private mount namespace.
 */
#define _GNU_SOURCE
#include <hpregion/hpregion.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { V_BASE, V_THP, V_HUGETLB, V_SHMEM, NV };
static const char *const vname[NV] = { "base-4k", "thp", "hugetlb", "shmem-huge" };
enum { T_FAULT, T_MEMSET, T_STRIDE, T_RANDOM, NT };
static const char *const tname[NT] = { "fault", "memset", "stride", "random" };

static size_t size = 1024UL << 20;
static int reps = 5;
static char tmpfs_dir[64];
static char pool_old[32];
static bool have_hugetlb, have_shmem;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int wr(const char *p, const char *v)
{
	int fd = open(p, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, v, strlen(v));
	close(fd);
	return n < 0 ? -errno : 0;
}

static void rd(const char *p, char *buf, size_t len)
{
	int fd = open(p, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
}

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
	t = now();
	memset(b.p, 1, size); /* first touch: faults */
	out[T_FAULT] = now() - t;
	*cov = huge_pct(&b);
	t = now();
	memset(b.p, 2, size);
	out[T_MEMSET] = now() - t;
	t = now();
	for (int rep = 0; rep < 4; rep++)
		for (size_t o = 0; o < size; o += 4096)
			b.p[o]++;
	out[T_STRIDE] = (now() - t) / 4;
	t = now();
	for (size_t i = 0; i < accesses; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		acc += ((uint64_t *)b.p)[(x + acc) % n];
	}
	out[T_RANDOM] = now() - t;
	sink = acc;
	put(&b);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void setup(void)
{
	char p[64] = "/tmp/hpr-bench-XXXXXX";
	char v[32];
	int lk = open("/tmp/hpr-system.lock", O_RDWR | O_CREAT, 0600);

	if (lk >= 0)
		flock(lk, LOCK_EX);
	if (geteuid() == 0 && !unshare(CLONE_NEWNS) &&
	    !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) && mkdtemp(p) &&
	    !mount("none", p, "tmpfs", 0, "huge=always")) {
		snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s", p);
		have_shmem = true;
	}
	rd("/proc/sys/vm/nr_hugepages", pool_old, sizeof(pool_old));
	snprintf(v, sizeof(v), "%zu", (size >> 21) + strtoul(pool_old, NULL, 10));
	if (geteuid() == 0 && !wr("/proc/sys/vm/nr_hugepages", v)) {
		char got[32];

		rd("/proc/sys/vm/nr_hugepages", got, sizeof(got));
		have_hugetlb = strtoul(got, NULL, 10) >= (size >> 21);
	}
}

static void teardown(void)
{
	if (pool_old[0])
		wr("/proc/sys/vm/nr_hugepages", pool_old);
	if (have_shmem) {
		umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
	}
}

int main(int argc, char **argv)
{
	double res[NV][NT][32], cov[NV] = { 0 };
	double med[NV][NT];
	const char *json = NULL;
	FILE *jf;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			size = 256UL << 20;
			reps = 3;
		} else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			size = strtoul(argv[++i], NULL, 0) << 20;
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			json = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--quick] [--size MiB] [--reps N] [--json FILE]\n",
				argv[0]);
			return 2;
		}
	}
	if (reps < 1 || reps > 32 || size < (64UL << 20)) {
		fprintf(stderr, "largepages: reps must be 1..32 and size >= 64 MiB\n");
		return 2;
	}
	setup();
	/* warm: make the host back the memory we will use */
	{
		char *w = mmap(NULL, size * 2, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (w != MAP_FAILED) {
			memset(w, 0, size * 2);
			munmap(w, size * 2);
		}
	}
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
	teardown();
	for (int v = 0; v < NV; v++)
		for (int t = 0; t < NT; t++) {
			qsort(res[v][t], (size_t)reps, sizeof(double), cmp);
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
	return 0;
}
