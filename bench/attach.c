/* SPDX-License-Identifier: MIT */
/*
 * bench/attach: re-attaching a kept region (HPR_F_ATTACH_ONLY, docs/attach.md)
 * against what a restarting process would otherwise do, creating and
 * prefaulting a fresh region of the same size, and against the kernel's own
 * limit, one mmap and one MADV_POPULATE_READ of the kept file.
 *
 * Per backend (a private tmpfs mounted huge=always; a private hugetlbfs with
 * 2 MiB pages, the pool raised for the run and restored), a region of
 * --size MiB is created once with HPR_F_ATTACH, filled with a pattern and
 * destroyed (its file is kept). Then, per repetition, in rotating order:
 *   create     hpr_create of a fresh shared region, HPR_F_PREFAULT (the
 *              memory warmed first: this VM's host backs memory on first
 *              touch, which is not what we compare)
 *   attach+pf  hpr_create HPR_F_ATTACH_ONLY | HPR_F_SHARED | HPR_F_PREFAULT:
 *              every page mapped when it returns
 *   attach     the same without HPR_F_PREFAULT: pages map on first touch
 *   raw        open + mmap(MAP_SHARED) + one MADV_POPULATE_READ of the kept
 *              file: no validation, no lock, no huge-page check
 * Each attach is checked against the kernel, not the library: every word
 * holds its pattern; /proc/meminfo Shmem and ShmemHugePages (shmem) or
 * HugePages_Free (hugetlb) and /proc/vmstat thp_file_alloc do not move, and
 * the file's allocated blocks are unchanged -- nothing allocated, so nothing
 * zeroed; smaps' huge-mapped bytes equal the size after attach+pf. The
 * fresh create's own meminfo movement is shown beside it: that is what
 * zeroing looks like. Medians of --reps, in ms; the headline ratios are
 * create / attach+pf and create / attach (target >= 100x: issue #17) and
 * raw / attach+pf (how close the library gets to the kernel's own limit).
 *
 *   attach [--quick] [--size MiB] [--reps N] [--json FILE] [--backend shmem|hugetlb]
 * (--backend: that one only; the other's rows say "not run").
 * Needs root (mounts, the pool); holds the system lock.
 */
#define _GNU_SOURCE
#include "common.h"

#include <hpregion/hpregion.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

enum { B_SHMEM, B_HUGETLB, NB };
static const char *const bname[NB] = { "shmem huge=always", "hugetlb 2M" };
enum { V_CREATE, V_ATTACH_PF, V_ATTACH, V_RAW, NV };
static const char *const vname[NV] = { "create", "attach+pf", "attach", "raw" };
#define MAX_REPS 32
#define NAME "bench-kept"

static size_t size = 1024UL << 20;
static int reps = 5;
static char dir[NB][64];
static char kept[NB][128];

/* What the kernel says changed: the memory counters that move when pages
 * are allocated (and so zeroed), and the kept file's allocated blocks. */
struct kcount {
	long shmem_kb, shmem_huge_kb, huge_free, thp_file_alloc, blocks;
};

/* per backend and variant, the largest movement seen over the reps */
static struct kcount moved[NB][NV];
static size_t huge_after[NB];	/* smaps huge bytes after attach+pf (smallest) */
static unsigned long bad_words; /* words that lost their pattern */

static void fail(const char *what, int rc)
{
	fprintf(stderr, "attach bench: %s: %s\n", what, hpr_strerror(rc));
	exit(1);
}

static long proc_value(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	char line[256];
	size_t kl = strlen(key);
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && (line[kl] == ':' || line[kl] == ' ')) {
			v = strtol(line + kl + 1 + (line[kl] == ':'), NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static void kcount(int b, struct kcount *k)
{
	struct stat st;

	k->shmem_kb = proc_value("/proc/meminfo", "Shmem");
	k->shmem_huge_kb = proc_value("/proc/meminfo", "ShmemHugePages");
	k->huge_free = proc_value("/proc/meminfo", "HugePages_Free");
	k->thp_file_alloc = proc_value("/proc/vmstat", "thp_file_alloc");
	k->blocks = stat(kept[b], &st) ? -1 : (long)st.st_blocks;
}

static long absl(long v)
{
	return v < 0 ? -v : v;
}

/* Record the largest movement between two readings. */
static void note_moved(struct kcount *m, const struct kcount *a, const struct kcount *z)
{
	long d[5] = { z->shmem_kb - a->shmem_kb, z->shmem_huge_kb - a->shmem_huge_kb,
		      z->huge_free - a->huge_free, z->thp_file_alloc - a->thp_file_alloc,
		      z->blocks - a->blocks };
	long *o[5] = { &m->shmem_kb, &m->shmem_huge_kb, &m->huge_free, &m->thp_file_alloc,
		       &m->blocks };

	for (int i = 0; i < 5; i++)
		if (absl(d[i]) > absl(*o[i]))
			*o[i] = d[i];
}

/* Bytes the kernel allocated (and zeroed) for the region between two
 * readings: the page cache's growth (shmem) or the pool pages taken. */
static long zeroed_bytes(int b, const struct kcount *m)
{
	if (b == B_HUGETLB)
		return -m->huge_free * (2L << 20);
	return m->shmem_kb * 1024;
}

static uint64_t pattern(size_t i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ULL ^ 0x6b657074ULL;
}

static void fill(uint64_t *w)
{
	for (size_t i = 0; i < size / 8; i++)
		w[i] = pattern(i);
}

static unsigned long check(const uint64_t *w)
{
	unsigned long bad = 0;

	for (size_t i = 0; i < size / 8; i++)
		bad += w[i] != pattern(i);
	return bad;
}

static void config(int b, struct hpr_config *c, unsigned flags, const char *name)
{
	hpr_config_init(c);
	c->backend = b == B_HUGETLB ? HPR_BACKEND_HUGETLB : HPR_BACKEND_SHMEM;
	c->size = size;
	c->page_size = 2UL << 20;
	c->path = dir[b];
	c->name = name;
	c->flags = flags;
}

static double run_create(int b)
{
	struct hpr_config c;
	hpr_region *r;
	double t0, t;
	int rc;

	if (b == B_SHMEM) /* hugetlb pool pages stay backed once used */
		bench_touch(size, true);
	config(b, &c, HPR_F_SHARED | HPR_F_PREFAULT, NULL);
	t0 = bench_now();
	rc = hpr_create(&c, &r);
	t = bench_now() - t0;
	if (rc)
		fail("hpr_create (fresh)", rc);
	hpr_destroy(r);
	return t;
}

static double run_attach(int b, bool prefault)
{
	struct hpr_config c;
	hpr_region *r;
	double t0, t;
	int rc;

	config(b, &c, HPR_F_ATTACH_ONLY | HPR_F_SHARED | (prefault ? HPR_F_PREFAULT : 0), NAME);
	t0 = bench_now();
	rc = hpr_create(&c, &r);
	t = bench_now() - t0;
	if (rc)
		fail("hpr_create (attach)", rc);
	if (!hpr_attached(r)) {
		fprintf(stderr, "attach bench: HPR_F_ATTACH_ONLY returned a region it created\n");
		exit(1);
	}
	if (prefault) {
		ssize_t h = bench_huge_bytes(hpr_base(r), size);

		if (h >= 0 && (!huge_after[b] || (size_t)h < huge_after[b]))
			huge_after[b] = (size_t)h;
	}
	bad_words += check(hpr_base(r));
	hpr_destroy(r);
	return t;
}

/* Without the library: map the file and ask the kernel for every page at
 * once. The stamp page past the region's end is not mapped. */
static double run_raw(int b)
{
	double t0, t;
	void *p;
	int fd;

	t0 = bench_now();
	fd = open(kept[b], O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		bench_die(kept[b]);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		bench_die("mmap");
	if (madvise(p, size, MADV_POPULATE_READ))
		bench_die("MADV_POPULATE_READ");
	t = bench_now() - t0;
	close(fd);
	bad_words += check(p);
	munmap(p, size);
	return t;
}

static double run(int b, int v)
{
	struct kcount a, z;
	double t;

	kcount(b, &a);
	switch (v) {
	case V_CREATE:
		t = run_create(b);
		break;
	case V_ATTACH_PF:
		t = run_attach(b, true);
		break;
	case V_ATTACH:
		t = run_attach(b, false);
		break;
	default:
		t = run_raw(b);
		break;
	}
	kcount(b, &z);
	if (v == V_CREATE) {
		/* the fresh region's growth is seen while it exists: measure
		 * it apart, below; its destroy gives it all back */
		return t;
	}
	note_moved(&moved[b][v], &a, &z);
	return t;
}

/* A fresh region's meminfo movement while it exists: what zeroing looks
 * like, for the table beside the attaches' zero. */
static void create_moved(int b)
{
	struct hpr_config c;
	struct kcount a, z;
	hpr_region *r;
	int rc;

	config(b, &c, HPR_F_SHARED | HPR_F_PREFAULT, NULL);
	kcount(b, &a);
	rc = hpr_create(&c, &r);
	if (rc)
		fail("hpr_create (fresh)", rc);
	kcount(b, &z);
	z.blocks = a.blocks; /* another file */
	note_moved(&moved[b][V_CREATE], &a, &z);
	hpr_destroy(r);
}

static bool setup(int b)
{
	char opts[128];
	struct hpr_config c;
	hpr_region *r;
	int rc;

	if (b == B_SHMEM) {
		/* the kept file, a fresh region beside it, and slack */
		snprintf(opts, sizeof(opts), "size=%zuM,huge=always", (2 * size >> 20) + 64);
		if (bench_mount_tmp("tmpfs", opts, dir[b], sizeof(dir[b])))
			bench_die("mount tmpfs huge=always");
	} else {
		/* the kept file (its stamp page is a base page of its own
		 * huge page: +1), a fresh region, slack */
		unsigned long need = 2 * (size >> 21) + 4, old, got = 0;

		old = bench_pool_save(BENCH_POOL_2M);
		if (bench_pool_set(old + need, &got) || got < old + need) {
			fprintf(stderr, "attach: the 2 MiB hugetlb pool gave %lu of %lu pages\n",
				got - old, need);
			bench_restore();
			return false;
		}
		if (bench_mount_tmp("hugetlbfs", "pagesize=2M", dir[b], sizeof(dir[b])))
			bench_die("mount hugetlbfs");
	}
	if (snprintf(kept[b], sizeof(kept[b]), "%s/%s", dir[b], NAME) >= (int)sizeof(kept[b]))
		bench_die("path too long");
	config(b, &c, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT, NAME);
	rc = hpr_create(&c, &r);
	if (rc)
		fail("hpr_create (the kept region)", rc);
	fill(hpr_base(r));
	hpr_destroy(r);
	return true;
}

static void quick(void)
{
	size = 256UL << 20;
	reps = 3;
}

static double med[NB][NV];
static bool ran[NB];

static void table(void)
{
	printf("\n%-18s %10s %10s %10s %10s %12s %12s %10s\n", "backend", "create", "attach+pf",
	       "attach", "raw", "create/a+pf", "create/att", "raw/a+pf");
	for (int b = 0; b < NB; b++) {
		double *m = med[b];

		if (!ran[b]) {
			printf("%-18s %10s\n", bname[b], "not run");
			continue;
		}
		printf("%-18s %10.2f %10.3f %10.3f %10.3f %11.0fx %11.0fx %9.2fx\n", bname[b],
		       m[V_CREATE] * 1e3, m[V_ATTACH_PF] * 1e3, m[V_ATTACH] * 1e3, m[V_RAW] * 1e3,
		       m[V_CREATE] / m[V_ATTACH_PF], m[V_CREATE] / m[V_ATTACH],
		       m[V_RAW] / m[V_ATTACH_PF]);
	}
	printf("(ms, medians; create/a+pf: how much sooner a restart has its memory back)\n");
	printf("\nthe kernel's counters, largest movement over the reps (kB, pages, blocks):\n");
	printf("%-18s %-10s %10s %14s %14s %14s %12s %14s\n", "backend", "variant", "Shmem",
	       "ShmemHugePages", "HugePages_Free", "thp_file_alloc", "file blocks", "zeroed bytes");
	for (int b = 0; b < NB; b++)
		for (int v = 0; v < NV && ran[b]; v++) {
			struct kcount *k = &moved[b][v];

			printf("%-18s %-10s %+10ld %+14ld %+14ld %+14ld %12s %14ld\n", bname[b],
			       vname[v], k->shmem_kb, k->shmem_huge_kb, k->huge_free,
			       k->thp_file_alloc,
			       v == V_CREATE ? "-" :
			       k->blocks     ? "CHANGED" :
					       "same",
			       zeroed_bytes(b, k));
		}
	printf("(create: while the fresh region exists; the others: across the call and the "
	       "check of every word)\n");
}

static void json_out(const char *path)
{
	FILE *f = fopen(path, "w");
	int first = 1;

	if (!f)
		bench_die(path);
	fprintf(f, "{\"bench\":\"attach\",\"size_mib\":%zu,\"reps\":%d,\"results\":[", size >> 20,
		reps);
	for (int b = 0; b < NB; b++) {
		if (!ran[b])
			continue;
		fprintf(f, "%s{\"backend\":\"%s\"", first ? "" : ",", bname[b]);
		for (int v = 0; v < NV; v++)
			fprintf(f, ",\"%s_ms\":%.4f", vname[v], med[b][v] * 1e3);
		fprintf(f, ",\"huge_mapped_after\":%zu,\"zeroed_bytes\":%ld}", huge_after[b],
			zeroed_bytes(b, &moved[b][V_ATTACH_PF]));
		first = 0;
	}
	fprintf(f, "],\"headline\":[");
	first = 1;
	for (int b = 0; b < NB; b++) {
		double *m = med[b];
		struct kcount *k = &moved[b][V_ATTACH_PF];

		if (!ran[b]) {
			fprintf(f,
				"%s{\"measure\":\"attach + prefault vs create + prefault (%s)\","
				"\"ours\":\"not run\",\"baseline\":\"not run\",\"ratio\":\"n/a\"}",
				first ? "" : ",", bname[b]);
			first = 0;
			continue;
		}
		fprintf(f,
			"%s{\"measure\":\"attach + prefault vs create + prefault (%s, %zu MiB)\","
			"\"ours\":\"%.2f ms, %zu of %zu MiB huge-mapped, %ld bytes zeroed "
			"(meminfo/vmstat/st_blocks)\",\"baseline\":\"%.1f ms (fresh region, "
			"prefaulted, memory warmed)\",\"ratio\":\"%.0fx\"}",
			first ? "" : ",", bname[b], size >> 20, m[V_ATTACH_PF] * 1e3,
			huge_after[b] >> 20, size >> 20, zeroed_bytes(b, k), m[V_CREATE] * 1e3,
			m[V_CREATE] / m[V_ATTACH_PF]);
		fprintf(f,
			",{\"measure\":\"attach, pages mapped on first touch, vs create + prefault "
			"(%s, %zu MiB)\",\"ours\":\"%.3f ms\",\"baseline\":\"%.1f ms\","
			"\"ratio\":\"%.0fx\"}",
			bname[b], size >> 20, m[V_ATTACH] * 1e3, m[V_CREATE] * 1e3,
			m[V_CREATE] / m[V_ATTACH]);
		fprintf(f,
			",{\"measure\":\"attach + prefault vs raw mmap + MADV_POPULATE_READ (%s)\","
			"\"ours\":\"%.2f ms\",\"baseline\":\"%.2f ms (no validation, lock or huge "
			"check)\",\"ratio\":\"%.2fx\"}",
			bname[b], m[V_ATTACH_PF] * 1e3, m[V_RAW] * 1e3, m[V_RAW] / m[V_ATTACH_PF]);
		first = 0;
	}
	fprintf(f, "]}\n");
	fclose(f);
}

int main(int argc, char **argv)
{
	static double res[NB][NV][MAX_REPS];
	const char *json = NULL, *only = NULL;
	const struct bench_opt opts[] = { BENCH_QUICK(quick),
					  BENCH_SIZE(&size),
					  BENCH_REPS(&reps),
					  BENCH_JSON(&json),
					  { "--backend", "shmem|hugetlb", BENCH_T_STR, &only,
					    NULL },
					  BENCH_END };
	int failed = 0;

	if (bench_args(argc, argv, opts) || bench_limits("attach", reps, MAX_REPS, size, 64))
		return 2;
	size &= ~((2UL << 20) - 1);
	bench_isolate("attach: needs root (tmpfs and hugetlbfs mounts, the hugetlb pool)");
	/* make the host back the memory the kept files and fresh regions get */
	bench_touch(2 * size, true);
	printf("attach: %zu MiB region per backend, %d repetitions, variants interleaved, "
	       "medians\n",
	       size >> 20, reps);
	for (int b = 0; b < NB; b++) {
		if (only && strncmp(bname[b], only, strlen(only)))
			continue;
		if (!setup(b)) {
			failed = 1;
			continue;
		}
		ran[b] = true;
		create_moved(b);
		for (int v = 0; v < NV; v++) /* warm-up round, not counted */
			run(b, v);
		for (int r = 0; r < reps; r++)
			for (int k = 0; k < NV; k++) {
				int v = (k + r) % NV;

				res[b][v][r] = run(b, v);
			}
		for (int v = 0; v < NV; v++)
			med[b][v] = bench_median(res[b][v], reps);
		unlink(kept[b]);
		bench_restore(); /* the pool and mounts back before the next backend */
	}
	table();
	if (json)
		json_out(json);
	if (bad_words) {
		fprintf(stderr, "attach: %lu words lost their pattern after an attach\n",
			bad_words);
		return 1;
	}
	for (int b = 0; b < NB; b++)
		if (ran[b] && (zeroed_bytes(b, &moved[b][V_ATTACH_PF]) ||
			       moved[b][V_ATTACH_PF].blocks || huge_after[b] != size)) {
			fprintf(stderr,
				"attach: %s: an attach allocated memory or left pages small (see "
				"the table)\n",
				bname[b]);
			return 1;
		}
	return failed && bench_no_skip() ? 1 : 0;
}
