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
 *      hpr-shmem  the same on a shmem region (release is a state change)
 *    Records/s for 1..N threads; each rep runs every variant for the same
 *    time in a rotated order, after a discarded warm-up rep; medians.
 *    Anchor: Minchan Kim's MADV_FREE series, ebizzy 2.6-4.1x DONTNEED.
 *
 * 2. Reuse vs fresh fault, per backend (THP, shmem on tmpfs huge=always,
 *    hugetlb 2 MiB): per huge page, hpr_fault_in after hpr_release_lazy
 *    (reuse) against hpr_fault_in after release + hpr_reclaim (a fresh
 *    fault of memory given back), alternating, one worker.
 *
 * Run as root (tmpfs mount in a private namespace, hugetlb pool under
 * /tmp/hpr-system.lock, restored at exit).
 *
 *   release [--quick] [--secs S] [--reps N] [--threads N] [--json FILE]
 */
#define _GNU_SOURCE
#include <hpregion/hpregion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_FREE
#define MADV_FREE 8
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
static const char pool_path[] = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
static char pool_old[32];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, v, strlen(v));
	close(fd);
	return n < 0 ? -1 : 0;
}

static void read_str(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

static void restore(void)
{
	if (*pool_old)
		write_str(pool_path, pool_old);
	if (*tmpfs_dir) {
		umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
	}
}

static void on_signal(int sig)
{
	restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- 1. churn ---- */
enum variant { V_DONTNEED, V_FREE, V_HPR_THP, V_HPR_SHMEM, NV };
static const char *const vname[NV] = { "DONTNEED", "FREE", "hpr-thp", "hpr-shmem" };

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
	while (now() < a->until) {
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
		c.backend = v == V_HPR_THP ? HPR_BACKEND_THP : HPR_BACKEND_SHMEM;
		c.path = v == V_HPR_SHMEM ? tmpfs_dir : NULL;
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

static void heap_close(struct heap *h, size_t size)
{
	if (h->r)
		hpr_destroy(h->r);
	else
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
	t0 = now();
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
	t1 = now();
	heap_close(&h, size);
	return (double)total / (t1 - t0);
}

/* ---- 2. reuse vs fresh ---- */
enum backend { B_THP, B_SHMEM, B_HUGETLB, NB };
static const char *const bname[NB] = { "THP", "shmem huge=always", "hugetlb 2M" };

/* us per huge page for: reuse, fresh, release */
static int reuse_vs_fresh(enum backend b, double *reuse_us, double *fresh_us,
			  double *release_us)
{
	struct hpr_config c;
	hpr_region *r;
	size_t size = reuse_pages * HP;
	double re[64], fr[64], rl[64];
	int rc, n = 0;

	hpr_config_init(&c);
	c.size = size;
	c.backend = b == B_THP ? HPR_BACKEND_THP
		    : b == B_SHMEM ? HPR_BACKEND_SHMEM
				   : HPR_BACKEND_HUGETLB;
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
	for (int i = 0; i < reps + 1 && i < 64; i++) {
		double t0, t1, t2, t3, t4;

		/* reuse: release, fault back */
		t0 = now();
		hpr_release_lazy(r, 0, size);
		t1 = now();
		if ((rc = hpr_fault_in(r, 0, size)))
			break;
		t2 = now();
		memset(hpr_base(r), 2, size);
		/* fresh: release, reclaim, fault back */
		hpr_release_lazy(r, 0, size);
		hpr_reclaim(r, 0, NULL);
		t3 = now();
		if ((rc = hpr_fault_in(r, 0, size)))
			break;
		t4 = now();
		memset(hpr_base(r), 3, size);
		if (i == 0)
			continue; /* warm-up */
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
	*reuse_us = median(re, n);
	*fresh_us = median(fr, n);
	*release_us = median(rl, n);
	return 0;
}

static void setup(void)
{
	char t[] = "/tmp/hpr-bench-XXXXXX", want[32];
	int lk;

	if (geteuid()) {
		fprintf(stderr, "release: run as root (tmpfs mount, hugetlb pool)\n");
		exit(77);
	}
	lk = open("/tmp/hpr-system.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lk < 0 || flock(lk, LOCK_EX)) {
		perror("flock /tmp/hpr-system.lock");
		exit(1);
	}
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		perror("private mount namespace");
		exit(1);
	}
	if (!mkdtemp(t) || mount("none", t, "tmpfs", 0, "huge=always")) {
		perror("mount tmpfs huge=always");
		exit(1);
	}
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s", t);
	read_str(pool_path, pool_old, sizeof(pool_old));
	atexit(restore);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(want, sizeof(want), "%lu", strtoul(pool_old, NULL, 10) + reuse_pages);
	write_str("/proc/sys/vm/compact_memory", "1");
	write_str(pool_path, want);
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	double med[64][NV];
	double reuse[NB], fresh[NB], rel[NB];
	int ok[NB];
	int nt_list[8], nnt = 0;
	FILE *jf;

	max_threads = (int)sysconf(_SC_NPROCESSORS_ONLN) * 2;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			secs = 0.2;
			reps = 2;
			reuse_pages = 16;
		} else if (!strcmp(argv[i], "--secs") && i + 1 < argc) {
			secs = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			max_threads = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			json = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--quick] [--secs S] [--reps N] "
					"[--threads N] [--json FILE]\n",
				argv[0]);
			return 2;
		}
	}
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
		for (int v = 0; v < NV; v++)
			med[k][v] = median(all[v], reps);
	}
	printf("%8s", "threads");
	for (int v = 0; v < NV; v++)
		printf(" %12s", vname[v]);
	printf(" %10s %10s %10s\n", "FREE/DN", "hpr/DN", "hpr/FREE");
	for (int k = 0; k < nnt; k++) {
		printf("%8d", nt_list[k]);
		for (int v = 0; v < NV; v++)
			printf(" %12.0f", med[k][v]);
		printf(" %9.2fx %9.2fx %9.2fx\n", med[k][V_FREE] / med[k][V_DONTNEED],
		       med[k][V_HPR_THP] / med[k][V_DONTNEED],
		       med[k][V_HPR_THP] / med[k][V_FREE]);
	}

	printf("\n== reuse after hpr_release_lazy vs fresh fault after reclaim "
	       "(us per 2 MiB page, 1 worker, median of %d)\n",
	       reps);
	printf("%-20s %10s %10s %10s %12s\n", "backend", "release", "reuse", "fresh",
	       "reuse/fresh");
	for (int b = 0; b < NB; b++) {
		ok[b] = !reuse_vs_fresh((enum backend)b, &reuse[b], &fresh[b], &rel[b]);
		if (ok[b])
			printf("%-20s %10.2f %10.2f %10.2f %11.4fx\n", bname[b], rel[b],
			       reuse[b], fresh[b], reuse[b] / fresh[b]);
		else
			printf("%-20s   (not run)\n", bname[b]);
	}

	if (json && (jf = fopen(json, "w"))) {
		int last = nnt - 1;

		fprintf(jf, "{\"headline\": [");
		fprintf(jf,
			"{\"measure\": \"churn records/s, 1 thread: MADV_FREE vs "
			"MADV_DONTNEED\", \"ours\": %.0f, \"baseline\": %.0f, \"ratio\": "
			"%.2f, \"anchor\": \"2.6-4.1x\"},",
			med[0][V_FREE], med[0][V_DONTNEED], med[0][V_FREE] / med[0][V_DONTNEED]);
		fprintf(jf,
			"{\"measure\": \"churn records/s, %d threads: MADV_FREE vs "
			"MADV_DONTNEED\", \"ours\": %.0f, \"baseline\": %.0f, \"ratio\": "
			"%.2f, \"anchor\": \"2.6-4.1x\"},",
			nt_list[last], med[last][V_FREE], med[last][V_DONTNEED],
			med[last][V_FREE] / med[last][V_DONTNEED]);
		for (int k = 0; k < nnt; k += (last ? last : 1))
			fprintf(jf,
				"{\"measure\": \"churn records/s, %d thread(s): hpregion "
				"(THP) vs MADV_DONTNEED\", \"ours\": %.0f, \"baseline\": "
				"%.0f, \"ratio\": %.2f},",
				nt_list[k], med[k][V_HPR_THP], med[k][V_DONTNEED],
				med[k][V_HPR_THP] / med[k][V_DONTNEED]);
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
	return 0;
}
