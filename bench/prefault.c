/* SPDX-License-Identifier: MIT */
/*
 * bench/prefault: how fast hpregion fills a region with huge pages, side by
 * side with what a user would otherwise do, in one run.
 *
 * For each backend (THP, shmem on a tmpfs huge=always, hugetlb), each rep
 * runs every variant once, in a rotated order (interleaved), after one
 * discarded warm-up rep; the table gives the median of the reps:
 *
 *   memset xN      memset over already-resident memory: the zeroing limit
 *   raw populate   one thread, one MADV_POPULATE_WRITE over the range
 *   raw pop xN     N threads, one MADV_POPULATE_WRITE each over its slice:
 *                  the kernel's own limit for N CPUs (#19: the ceiling
 *                  hpregion with N workers is held to, >= 0.95)
 *   raw falloc+pop fallocate the file, then the same (shmem, hugetlb)
 *   MAP_POPULATE   mmap(MAP_POPULATE)
 *   touch xN       QEMU-style: N threads, static split, a write per page
 *   hpr wK         hpr_fault_in with K workers
 *   callers 1/8    1 or 8 threads calling hpr_fault_in(whole region) at once
 *   pool hand-off  (THP) hpr_fault_in with the K workers of "hpr wK" over a
 *                  region whose pages all come from the recycled pool
 *                  (hpr_pool_configure; filled, destroyed and zeroed
 *                  before the timing)
 *   pool zero xT   (THP) the pool's background zeroing: from the destroy
 *                  of a filled region until the pool has zeroed all of
 *                  it, T zeroing threads (#19: >= 1.2x raw populate)
 *   global 1/8     the same, with one process-wide mutex held across every
 *                  populate call (the kernel before 3.15 held one
 *                  hugetlb_instantiation_mutex across each fault): the
 *                  same workers, claims and batched populate runs as
 *                  "callers", only the lock differs. An hpr__os hook in
 *                  this file takes it; the library has no such mode.
 *
 * Every fill is checked against smaps (huge% column). Run as root: the
 * bench mounts its tmpfs/hugetlbfs in a private mount namespace, and sets
 * the hugetlb pool under the system lock (HPR_SYSTEM_LOCK), restoring it at exit.
 *
 *   prefault [--quick] [--pool | --sweep] [--size MiB] [--reps N] [--workers N]
 *            [--json FILE]
 *
 * --sweep (#19 item 4) times the ready time against the region's size: THP,
 * from 64 MiB doubling up to --size (the largest size, included), a fresh
 * prefault (hpr wN), the pool's hand-off (wN) and raw populate xN side by
 * side at each size, interleaved and rotated per rep like the rest; the
 * table and the JSON series (bench/run plots it) give the medians.
 *
 * --pool runs THP alone, with the variants the pool's targets compare
 * (memset, raw populate x1/xN, hpr wN, pool hand-off, pool zero x1/xN), and
 * touches no mount and no hugetlb pool.
 *
 * Per backend the report gives both ceilings: hpr wN / raw pop xN (the
 * kernel's, target >= 0.95) and hpr wN / memset (the hardware's, for
 * information: on some hosts the kernel clears pages at ~0.7x memset), and
 * a "ready time" row: seconds until the whole region is usable, fresh
 * prefault (hpr wN) next to raw parallel populate.
 *
 * --json writes the medians, the headline ratios and a GB/s-per-worker
 * series for bench/run.
 */
#define _GNU_SOURCE
#include "common.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)
#define HP (2 * MiB)

static size_t size = 2048 * MiB;
static int reps = 5;
static int ncpu = 2;
static int maxw = 0;
static char tmpfs_dir[64], htlb_dir[64];
static FILE *jf;
static int jheads;
static bool pool_only;
static bool sweep_only; /* --sweep */

enum kind { K_THP, K_SHMEM, K_HUGETLB, NKINDS };
static int nkinds = NKINDS;
static const char *const kind_name[] = { "THP", "shmem huge=always", "hugetlb 2M" };

/* ---- system setup: private mounts, hugetlb pool; bench_restore() at exit ---- */
static void setup(void)
{
	unsigned long got;

	if (pool_only)
		return; /* changes nothing of the system's: no lock, no mounts */
	bench_isolate("prefault: run as root (mounts, hugetlb pool)");
	if (bench_mount_tmp("tmpfs", "huge=always", tmpfs_dir, sizeof(tmpfs_dir)))
		bench_die("mount tmpfs huge=always");
	if (bench_mount_tmp("hugetlbfs", "pagesize=2M", htlb_dir, sizeof(htlb_dir)))
		bench_die("mount hugetlbfs");
	bench_pool_save(BENCH_POOL_2M);
	bench_write_str("/proc/sys/vm/compact_memory", "1");
	bench_pool_set(size / HP, &got);
	if (got < size / HP) {
		fprintf(stderr, "prefault: hugetlb pool has %lu of %zu pages\n", got, size / HP);
		exit(1);
	}
}

/* ---- smaps: share of [p, p+len) that is huge-mapped, in %; -1: no smaps ---- */
static double huge_share(const void *p, size_t len)
{
	ssize_t huge = bench_huge_bytes(p, len);

	return huge < 0 ? -1 : 100.0 * (double)huge / (double)len;
}

/* ---- raw mappings (the baselines) ---- */
struct raw {
	char *base;
	int fd;
	char path[128];
};

static void raw_map(enum kind k, struct raw *m, int extra_flags)
{
	void *res = mmap(NULL, size + HP, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	char *a;
	void *got;

	if (res == MAP_FAILED)
		bench_die("mmap reserve");
	a = (char *)(((uintptr_t)res + HP - 1) & ~(uintptr_t)(HP - 1));
	if (a > (char *)res)
		munmap(res, (size_t)(a - (char *)res));
	munmap(a + size, (size_t)((char *)res + size + HP - (a + size)));
	m->fd = -1;
	if (k == K_THP) {
		if (extra_flags & MAP_POPULATE) {
			/* MADV_HUGEPAGE cannot come before MAP_POPULATE: this
			 * is what a MAP_POPULATE user gets (huge% says it) */
			got = mmap(a, size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | extra_flags, -1, 0);
		} else {
			got = mmap(a, size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (got != MAP_FAILED)
				madvise(got, size, MADV_HUGEPAGE);
		}
	} else {
		static unsigned seq;

		snprintf(m->path, sizeof(m->path), "%s/raw%u",
			 k == K_SHMEM ? tmpfs_dir : htlb_dir, seq++);
		m->fd = open(m->path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (m->fd < 0 || ftruncate(m->fd, (off_t)size))
			bench_die("raw file");
		got = mmap(a, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | extra_flags,
			   m->fd, 0);
	}
	if (got == MAP_FAILED)
		bench_die("mmap");
	m->base = got;
}

static void raw_unmap(struct raw *m)
{
	munmap(m->base, size);
	if (m->fd >= 0) {
		close(m->fd);
		unlink(m->path);
	}
}

/* ---- N-thread helpers (created before the clock starts) ---- */
struct team;
typedef void (*team_fn)(struct team *t, int id);
struct team {
	pthread_barrier_t start, end;
	team_fn fn;
	int n;
	char *base;
	size_t len;
	hpr_region *r;
	int rc[16];
};

struct tharg {
	struct team *t;
	int id;
};

static void *team_main(void *a)
{
	struct tharg *x = a;

	pthread_barrier_wait(&x->t->start);
	x->t->fn(x->t, x->id);
	pthread_barrier_wait(&x->t->end);
	return NULL;
}

/* Run fn on n threads at once; return the seconds from start to the last. */
static double team_run(struct team *t, int n, team_fn fn)
{
	pthread_t th[16];
	struct tharg a[16];
	double t0, t1;

	t->n = n;
	t->fn = fn;
	pthread_barrier_init(&t->start, NULL, (unsigned)n + 1);
	pthread_barrier_init(&t->end, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		a[i].t = t;
		a[i].id = i;
		pthread_create(&th[i], NULL, team_main, &a[i]);
	}
	pthread_barrier_wait(&t->start);
	t0 = bench_now();
	pthread_barrier_wait(&t->end);
	t1 = bench_now();
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&t->start);
	pthread_barrier_destroy(&t->end);
	return t1 - t0;
}

static void part(struct team *t, int id, char **b, size_t *l)
{
	size_t pages = t->len / HP, per = pages / (size_t)t->n, extra = pages % (size_t)t->n;
	size_t first = (size_t)id * per + ((size_t)id < extra ? (size_t)id : extra);

	*b = t->base + first * HP;
	*l = (per + ((size_t)id < extra)) * HP;
}

static void fn_memset(struct team *t, int id)
{
	char *b;
	size_t l;

	part(t, id, &b, &l);
	memset(b, 0, l);
}

static void fn_populate(struct team *t, int id)
{
	char *b;
	size_t l;

	part(t, id, &b, &l);
	t->rc[id] = madvise(b, l, MADV_POPULATE_WRITE) ? -errno : 0;
}

static void fn_touch(struct team *t, int id)
{
	char *b;
	size_t l;

	/* QEMU's touch_all_pages(): one write per (huge) page, static split */
	part(t, id, &b, &l);
	for (size_t o = 0; o < l; o += HP)
		*(volatile char *)(b + o) = 0;
}

/*
 * The "global" variants: every populate the library makes (fallocate,
 * MADV_POPULATE_WRITE, or the touch fallback; one call per batched run of
 * pages) goes through this hook table and holds one mutex, like the
 * kernel's instantiation mutex before 3.15. Nothing else changes.
 */
static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hpr_os_ops global_os;

static int global_madvise(void *addr, size_t len, int advice)
{
	int rc;

	if (advice != MADV_POPULATE_WRITE)
		return hpr__os_real.madvise(addr, len, advice);
	pthread_mutex_lock(&big_lock);
	rc = hpr__os_real.madvise(addr, len, advice);
	pthread_mutex_unlock(&big_lock);
	return rc;
}

static int global_fallocate(int fd, int mode, off_t off, off_t len)
{
	int rc;

	pthread_mutex_lock(&big_lock);
	rc = hpr__os_real.fallocate(fd, mode, off, len);
	pthread_mutex_unlock(&big_lock);
	return rc;
}

static int global_touch(void *addr, size_t len, size_t stride)
{
	int rc;

	pthread_mutex_lock(&big_lock);
	rc = hpr__os_real.touch(addr, len, stride);
	pthread_mutex_unlock(&big_lock);
	return rc;
}

static void global_lock(bool on)
{
	global_os = hpr__os_real;
	global_os.madvise = global_madvise;
	global_os.fallocate = global_fallocate;
	global_os.touch = global_touch;
	hpr__os_set(on ? &global_os : NULL);
}

static void fn_fault_in(struct team *t, int id)
{
	t->rc[id] = hpr_fault_in(t->r, 0, hpr_size(t->r));
}

/* ---- variants ---- */
enum vtype {
	V_MEMSET,
	V_RAWPOP,
	V_RAWFALLOC,
	V_MAPPOP,
	V_TOUCH,
	V_HPR,
	V_CALLERS,
	V_GLOBAL,
	V_POOL,
	V_ZERO
};
struct variant {
	enum vtype type;
	int n; /* threads / workers / callers */
	char label[32];
	double t[64];
	double huge_min;
	int nt;
};
static struct variant vs[NKINDS][40];
static int nvs[NKINDS];

static struct variant *add(enum kind k, enum vtype ty, int n)
{
	struct variant *v = &vs[k][nvs[k]++];

	v->type = ty;
	v->n = n;
	v->huge_min = 101;
	return v;
}
#define ADDN(k, ty, n, fmt) snprintf(add(k, ty, n)->label, 32, fmt, n)
#define ADD1(k, ty, name) snprintf(add(k, ty, 1)->label, 32, "%s", name)

static hpr_region *hpr_mk(enum kind k, unsigned workers)
{
	struct hpr_config c;
	hpr_region *r;
	int rc;

	hpr_config_init(&c);
	c.size = size;
	c.backend = k == K_THP ? HPR_BACKEND_THP : k == K_SHMEM ? HPR_BACKEND_SHMEM
							    : HPR_BACKEND_HUGETLB;
	c.path = k == K_SHMEM ? tmpfs_dir : k == K_HUGETLB ? htlb_dir : NULL;
	c.workers = workers;
	rc = hpr_create(&c, &r);
	if (rc) {
		fprintf(stderr, "hpr_create: %s\n", hpr_strerror(rc));
		exit(1);
	}
	return r;
}

/*
 * The host takes freed guest memory back (free page reporting, after ~2 s):
 * a fill that gets such memory pays a host fault per block and runs up to
 * 40x slower. Touching and freeing a region's worth right before each fill
 * hands the fill recently used, host-backed pages (the buddy allocator
 * reuses what was freed last). hugetlb pool pages never leave the pool.
 */
static void prewarm(enum kind k)
{
	char *p;

	if (k == K_HUGETLB)
		return;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		bench_die("mmap prewarm");
	madvise(p, size, MADV_HUGEPAGE);
	madvise(p, size, MADV_POPULATE_WRITE);
	munmap(p, size);
}

static struct hpr_pool_stats pool_now(void)
{
	struct hpr_pool_stats st;

	if (hpr_pool_stats(&st))
		bench_die("hpr_pool_stats");
	return st;
}

/* The recycled pool's variants (THP): fill a region, destroy it into the
 * pool; V_ZERO times the zeroing of all of it, V_POOL (after it) the
 * fault-in of a new region from the pool. The pool is off again after. */
static double run_pool(enum kind k, struct variant *v, double *huge)
{
	unsigned fl = v->type == V_ZERO && v->n == 1 ? HPR_POOL_ONE_THREAD : 0;
	hpr_region *r;
	double t0, dt;
	int rc;

	if (hpr_pool_configure(size, fl))
		bench_die("hpr_pool_configure");
	r = hpr_mk(k, (unsigned)ncpu);
	if (hpr_fault_in(r, 0, size))
		bench_die("hpr_fault_in");
	memset(hpr_base(r), 0x5a, size);
	t0 = bench_now();
	hpr_destroy(r);
	while (pool_now().clean_bytes < size) {
		if (bench_now() - t0 > 120)
			bench_die("the pool did not zero the region in 120 s");
		usleep(500);
	}
	dt = bench_now() - t0;
	if (v->type == V_ZERO) {
		*huge = 100.0 * (double)pool_now().huge_mapped / (double)size;
		hpr_pool_configure(0, 0);
		return dt;
	}
	r = hpr_mk(k, (unsigned)v->n);
	t0 = bench_now();
	rc = hpr_fault_in(r, 0, size);
	dt = bench_now() - t0;
	if (rc || pool_now().handed_bytes < size) {
		fprintf(stderr, "%s: %s, %zu of %zu bytes from the pool\n", v->label,
			rc ? hpr_strerror(rc) : "ok", (size_t)pool_now().handed_bytes, size);
		exit(1);
	}
	*huge = huge_share(hpr_base(r), size);
	hpr_destroy(r);
	hpr_pool_configure(0, 0);
	return dt;
}

/* One timed fill; returns seconds, sets *huge. */
static double run_one(enum kind k, struct variant *v, double *huge)
{
	struct team t;
	struct raw m;
	hpr_region *r;
	double t0, dt;
	int rc = 0;

	if (v->type != V_MEMSET)
		prewarm(k);
	memset(&t, 0, sizeof(t));
	t.len = size;
	switch (v->type) {
	case V_MEMSET: /* over resident memory: faulted in first, untimed */
	case V_TOUCH:
		raw_map(k, &m, 0);
		if (v->type == V_MEMSET)
			madvise(m.base, size, MADV_POPULATE_WRITE);
		t.base = m.base;
		dt = team_run(&t, v->n, v->type == V_MEMSET ? fn_memset : fn_touch);
		*huge = huge_share(m.base, size);
		raw_unmap(&m);
		return dt;
	case V_RAWPOP:
		if (v->n > 1) {
			raw_map(k, &m, 0);
			t.base = m.base;
			dt = team_run(&t, v->n, fn_populate);
			for (int i = 0; i < v->n; i++)
				if (t.rc[i])
					bench_die("MADV_POPULATE_WRITE");
			*huge = huge_share(m.base, size);
			raw_unmap(&m);
			return dt;
		}
		/* fallthrough */
	case V_RAWFALLOC:
		raw_map(k, &m, 0);
		t0 = bench_now();
		if (v->type == V_RAWFALLOC && fallocate(m.fd, 0, 0, (off_t)size))
			bench_die("fallocate");
		rc = madvise(m.base, size, MADV_POPULATE_WRITE);
		dt = bench_now() - t0;
		if (rc)
			bench_die("MADV_POPULATE_WRITE");
		*huge = huge_share(m.base, size);
		raw_unmap(&m);
		return dt;
	case V_MAPPOP:
		t0 = bench_now();
		raw_map(k, &m, MAP_POPULATE);
		dt = bench_now() - t0;
		*huge = huge_share(m.base, size);
		raw_unmap(&m);
		return dt;
	case V_HPR:
		r = hpr_mk(k, (unsigned)v->n);
		t0 = bench_now();
		rc = hpr_fault_in(r, 0, size);
		dt = bench_now() - t0;
		break;
	case V_POOL:
	case V_ZERO:
		return run_pool(k, v, huge);
	case V_CALLERS:
	case V_GLOBAL:
		r = hpr_mk(k, 0);
		t.r = r;
		global_lock(v->type == V_GLOBAL);
		dt = team_run(&t, v->n, fn_fault_in);
		global_lock(false);
		for (int i = 0; i < v->n; i++)
			rc = rc ? rc : t.rc[i];
		break;
	default:
		abort();
	}
	if (rc) {
		fprintf(stderr, "%s: %s\n", v->label, hpr_strerror(rc));
		exit(1);
	}
	*huge = huge_share(hpr_base(r), size);
	hpr_destroy(r);
	return dt;
}

static double median(struct variant *v)
{
	double s[64];

	memcpy(s, v->t, sizeof(double) * (size_t)v->nt);
	return bench_median(s, v->nt);
}

static struct variant *find(enum kind k, enum vtype ty, int n)
{
	for (int i = 0; i < nvs[k]; i++)
		if (vs[k][i].type == ty && vs[k][i].n == n)
			return &vs[k][i];
	return NULL;
}

static double best(struct variant *v)
{
	double b = 1e9;

	for (int j = 0; j < v->nt; j++)
		b = v->t[j] < b ? v->t[j] : b;
	return b;
}

/*
 * Time ratio a/b, paired within each rep (both ran in the same rep, seconds
 * apart, under the same background load), median over the reps: robust
 * where the machine's load drifts between reps.
 */
static double paired(struct variant *a, struct variant *b)
{
	double r[64];
	int n = a->nt < b->nt ? a->nt : b->nt;

	for (int j = 0; j < n; j++)
		r[j] = a->t[j] / b->t[j];
	return bench_median(r, n);
}

/*
 * How much worse 8 callers scale under one mutex than under the hashed
 * table: (global 8 / global 1) / (hashed 8 / hashed 1), each time paired
 * within a rep, median over the reps. Both sides have the same workers and
 * batching, so 1 caller costs about the same on each; only the lock differs.
 */
static double scaling(struct variant *g8, struct variant *g1, struct variant *c8,
		      struct variant *c1)
{
	double r[64];
	int n = g8->nt;

	for (int j = 0; j < n; j++)
		r[j] = (g8->t[j] / g1->t[j]) / (c8->t[j] / c1->t[j]);
	return bench_median(r, n);
}

static double gbs(struct variant *v)
{
	return v && v->nt ? (double)size / median(v) / 1e9 : 0;
}

static double gbs_best(struct variant *v)
{
	return v && v->nt ? (double)size / best(v) / 1e9 : 0;
}

/*
 * The two ceilings of a prefault with N workers (#19 item 2): the kernel's
 * (raw MADV_POPULATE_WRITE on N threads, one slice each; target >= 0.95)
 * and the hardware's (memset, information only), and the headline: how
 * long until the region is ready, hpregion's fresh prefault next to the
 * raw parallel populate, and (THP) the recycled pool's hand-off.
 */
static void ceilings(enum kind k, struct variant *hn, struct variant *zl)
{
	struct variant *rn = find(k, V_RAWPOP, ncpu);
	char o[64], b[64];

	if (!rn || !hn)
		return;
	printf("  hpr w%d / raw pop x%d (kernel)       %5.3f | %5.3f | %5.3f   (>= 0.95)\n", ncpu,
	       ncpu, paired(rn, hn), gbs(hn) / gbs(rn), gbs_best(hn) / gbs_best(rn));
	printf("  hpr w%d / %s (hardware, info)  %5.3f | %5.3f | %5.3f\n", ncpu, zl->label,
	       paired(zl, hn), gbs(hn) / gbs(zl), gbs_best(hn) / gbs_best(zl));
	printf("  ready time, %zu MiB: hpr w%d %.3f s, raw pop x%d %.3f s (%.3fx), "
	       "memset %.3f s\n",
	       size / MiB, ncpu, median(hn), ncpu, median(rn), median(rn) / median(hn),
	       median(zl));
	if (!jf)
		return;
	snprintf(o, sizeof(o), "hpr w%d %.2f GB/s", ncpu, gbs(hn));
	snprintf(b, sizeof(b), "raw pop x%d %.2f GB/s", ncpu, gbs(rn));
	fprintf(jf, "%s{\"measure\":\"%s: prefault vs parallel raw populate (>= 0.95)\","
		    "\"ours\":\"%s\",\"baseline\":\"%s\",\"ratio\":\"%.3f\"}",
		jheads++ ? "," : "", kind_name[k], o, b, paired(rn, hn));
	snprintf(o, sizeof(o), "hpr w%d %.3f s", ncpu, median(hn));
	snprintf(b, sizeof(b), "raw pop x%d %.3f s", ncpu, median(rn));
	fprintf(jf, "%s{\"measure\":\"%s: ready time, %zu MiB (fresh prefault vs raw "
		    "parallel populate)\",\"ours\":\"%s\",\"baseline\":\"%s\","
		    "\"ratio\":\"%.3f\"}",
		jheads++ ? "," : "", kind_name[k], size / MiB, o, b, paired(rn, hn));
}

/*
 * The pool's headline (#19 item 1): ready time of a fresh prefault, of the
 * pool's hand-off and of raw parallel populate side by side (target: the
 * hand-off >= 10x sooner than the fresh prefault), and the background
 * zeroing rate against the kernel's single-thread populate (>= 1.2x).
 */
static void pool_head(enum kind k)
{
	struct variant *rn = find(k, V_RAWPOP, ncpu), *pl = find(k, V_POOL, ncpu);
	struct variant *hn = find(k, V_HPR, ncpu), *r1 = find(k, V_RAWPOP, 1);

	if (!rn)
		rn = r1;
	if (!hn || !rn || !pl)
		return;
	printf("  ready time, %zu MiB: fresh prefault (hpr w%d) %.4f s | pool hand-off "
	       "%.4f s | raw pop x%d %.4f s; fresh / hand-off %.1fx (paired %.1fx, >= 10)\n",
	       size / MiB, ncpu, median(hn), median(pl), ncpu, median(rn),
	       median(hn) / median(pl), paired(hn, pl));
	for (int n = 1; n <= ncpu; n++) {
		struct variant *z = find(k, V_ZERO, n);

		if (z)
			printf("  pool zeroing x%d %.2f GB/s / raw populate x1 %.2f GB/s = "
			       "%.2fx (paired %.2fx, >= 1.2; %s)\n",
			       n, gbs(z), gbs(r1), gbs(z) / gbs(r1), paired(r1, z),
			       hpr_pool_zero_method_name());
	}
}

static void report(enum kind k)
{
	struct variant *zl = find(k, V_MEMSET, ncpu), *raw = find(k, V_RAWPOP, 1);
	/* the zeroing limit is the faster of memset x1 and xN */
	if (!zl || (ncpu > 1 && gbs(find(k, V_MEMSET, 1)) > gbs(zl)))
		zl = find(k, V_MEMSET, 1);
	struct variant *c1 = find(k, V_CALLERS, 1), *g1 = find(k, V_GLOBAL, 1);

	printf("\n== %s, %zu MiB, median of %d reps (GB/s = 1e9 B/s)\n", kind_name[k],
	       size / MiB, reps);
	printf("%-16s %7s %7s %7s %7s %6s %9s %9s %8s\n", "variant", "GB/s", "best", "min s",
	       "max s", "huge%", "/zeroing", "/raw pop", "t/1call");
	for (int i = 0; i < nvs[k]; i++) {
		struct variant *v = &vs[k][i];
		double mn = 1e9, mx = 0;

		for (int j = 0; j < v->nt; j++) {
			mn = v->t[j] < mn ? v->t[j] : mn;
			mx = v->t[j] > mx ? v->t[j] : mx;
		}
		printf("%-16s %7.2f %7.2f %7.3f %7.3f %6.1f %9.2f %9.2f", v->label, gbs(v),
		       gbs_best(v), mn, mx, v->huge_min, gbs(v) / gbs(zl), gbs(v) / gbs(raw));
		if (v->type == V_CALLERS || v->type == V_GLOBAL)
			printf(" %8.2f", median(v) / median(v->type == V_GLOBAL ? g1 : c1));
		printf("\n");
	}
	pool_head(k);
	if (pool_only)
		return;
	{
		struct variant *hn = find(k, V_HPR, ncpu), *h1 = find(k, V_HPR, 1);
		struct variant *c8 = find(k, V_CALLERS, 8), *g8 = find(k, V_GLOBAL, 8);
		struct variant *rf = find(k, V_RAWFALLOC, 1);

		/* throughput ratios: time of the reference / time of the variant */
		printf("targets (paired per rep, median | median of medians | best of each):\n");
		printf("  hpr w%d / zeroing limit (%s)   %5.2f | %5.2f | %5.2f   (>= 0.90)\n", ncpu,
		       zl->label, paired(zl, hn), gbs(hn) / gbs(zl), gbs_best(hn) / gbs_best(zl));
		printf("  hpr w1 / raw populate              %5.3f | %5.3f | %5.3f   (>= 0.98)\n",
		       paired(raw, h1), gbs(h1) / gbs(raw), gbs_best(h1) / gbs_best(raw));
		printf("  8 callers / 1 caller, time         %5.2f | %5.2f | %5.2f   (<= 1.20)\n",
		       paired(c8, c1), median(c8) / median(c1), best(c8) / best(c1));
		printf("  global mutex 8 callers / 1 caller  %5.2f | %5.2f | %5.2f\n",
		       paired(g8, g1), median(g8) / median(g1), best(g8) / best(g1));
		printf("  global 1 / hashed 1, time          %5.2f | %5.2f | %5.2f   (~1: same work)\n",
		       paired(g1, c1), median(g1) / median(c1), best(g1) / best(c1));
		printf("  scaling, (global 8/1) / (hashed 8/1) %5.2f (anchor: 1.46x, Linux 3.15)\n",
		       scaling(g8, g1, c8, c1));
		if (jf) {
#define HEAD(measure, ours, base, ratio)                                                  \
	fprintf(jf, "%s{\"measure\":\"%s: %s\",\"ours\":\"%s\",\"baseline\":\"%s\","  \
		    "\"ratio\":\"%.3f\"}",                                                 \
		jheads++ ? "," : "", kind_name[k], measure, ours, base, ratio)
			char o[64], b[64];

			snprintf(o, sizeof(o), "hpr w%d %.2f GB/s", ncpu, gbs(hn));
			snprintf(b, sizeof(b), "%s %.2f GB/s", zl->label, gbs(zl));
			HEAD("prefault vs zeroing limit (>= 0.9)", o, b, paired(zl, hn));
			snprintf(o, sizeof(o), "hpr w1 %.2f GB/s", gbs(h1));
			snprintf(b, sizeof(b), "raw MADV_POPULATE_WRITE %.2f GB/s", gbs(raw));
			HEAD("1 worker vs raw populate (>= 0.98)", o, b, paired(raw, h1));
			snprintf(o, sizeof(o), "8 callers %.3f s", median(c8));
			snprintf(b, sizeof(b), "1 caller %.3f s", median(c1));
			HEAD("8 contending callers, time vs 1 (<= 1.2)", o, b, paired(c8, c1));
			snprintf(o, sizeof(o), "hashed 8/1 callers %.2f", paired(c8, c1));
			snprintf(b, sizeof(b), "global mutex 8/1 callers %.2f", paired(g8, g1));
			HEAD("8 callers scaling, global mutex / hashed: (g8/g1)/(h8/h1)", o, b,
			     scaling(g8, g1, c8, c1));
		}
		if (rf)
			printf("  fallocate first / without, GB/s: raw %.3f | %.3f\n",
			       paired(raw, rf), gbs(rf) / gbs(raw));
		ceilings(k, hn, zl);
	}
}

static void warm(void)
{
	/* the VM's host takes freed memory back (free page reporting): touch
	 * twice the region size once so first-touch host faults are paid
	 * here, not by the first variant */
	size_t len = 2 * size;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t0 = bench_now();

	if (p == MAP_FAILED)
		bench_die("mmap warm");
	madvise(p, len, MADV_HUGEPAGE);
	memset(p, 1, len);
	printf("warm-up: touched and freed %zu MiB at %.2f GB/s\n", len / MiB,
	       (double)len / (bench_now() - t0) / 1e9);
	munmap(p, len);
}

static void json_tail(void)
{
	fprintf(jf, "],\"series\":[");
	for (int k = 0; k < nkinds; k++) {
		fprintf(jf, "%s{\"title\":\"prefault %s, %zu MiB\",\"xlabel\":\"workers\","
			    "\"ylabel\":\"GB/s (median)\",\"lines\":{\"hpregion\":[",
			k ? "," : "", kind_name[k], size / MiB);
		for (int w = 1; w <= maxw; w++)
			fprintf(jf, "%s[%d,%.3f]", w > 1 ? "," : "", w, gbs(find(k, V_HPR, w)));
		fprintf(jf, "],\"raw populate (1 thread)\":[[1,%.3f]],\"zeroing limit\":[[1,%.3f]",
			gbs(find(k, V_RAWPOP, 1)), gbs(find(k, V_MEMSET, 1)));
		if (ncpu > 1)
			fprintf(jf, ",[%d,%.3f]", ncpu, gbs(find(k, V_MEMSET, ncpu)));
		fprintf(jf, "]}}");
	}
	fprintf(jf, "],\"results\":[");
	for (int k = 0, first = 1; k < nkinds; k++)
		for (int i = 0; i < nvs[k]; i++, first = 0)
			fprintf(jf, "%s{\"backend\":\"%s\",\"variant\":\"%s\",\"gbs\":%.3f,"
				    "\"gbs_best\":%.3f,\"huge_pct\":%.1f}",
				first ? "" : ",", kind_name[k], vs[k][i].label, gbs(&vs[k][i]),
				gbs_best(&vs[k][i]), vs[k][i].huge_min);
	fprintf(jf, "]}\n");
	fclose(jf);
}

/* the library's log line with the zeroing methods' rates */
static void pool_log(enum hpr_log_level lvl, const char *msg, void *arg)
{
	(void)lvl;
	(void)arg;
	if (!strncmp(msg, "pool:", 5))
		printf("%s\n", msg);
}

static void pool_mode(void)
{
	pool_only = true;
	nkinds = 1; /* K_THP */
}

/*
 * --sweep: ready time against region size (#19 item 4). Each rep runs every
 * size, and at each size the three variants, in an order rotated per rep;
 * the first rep is a discarded warm-up. Each variant's fill is checked
 * against smaps like every other (huge% min).
 */
#define SWEEP_MAX 16
enum { SW_FRESH, SW_POOL, SW_RAW, NSW };

static int sweep(void)
{
	static struct variant sw[SWEEP_MAX][NSW];
	static const char *const swname[NSW] = { "fresh prefault", "pool hand-off", "raw populate" };
	size_t sizes[SWEEP_MAX], max = size;
	int nsz = 0, rawn = ncpu > 1 ? ncpu : 1;

	if (hpr_pool_supported(HPR_BACKEND_THP)) {
		fprintf(stderr, "prefault --sweep: the recycled pool is not supported here: %s\n",
			hpr_strerror(hpr_pool_supported(HPR_BACKEND_THP)));
		return bench_no_skip() ? 1 : 77;
	}
	for (size_t s = 64 * MiB; s < max && nsz < SWEEP_MAX - 1; s *= 2)
		sizes[nsz++] = s;
	sizes[nsz++] = max;
	for (int i = 0; i < nsz; i++) {
		const enum vtype ty[NSW] = { V_HPR, V_POOL, V_RAWPOP };

		for (int j = 0; j < NSW; j++) {
			sw[i][j].type = ty[j];
			sw[i][j].n = j == SW_RAW ? rawn : ncpu;
			sw[i][j].huge_min = 101;
			snprintf(sw[i][j].label, sizeof(sw[i][j].label), "%s", swname[j]);
		}
	}
	printf("prefault --sweep: THP, %d sizes from %zu to %zu MiB, hpr w%d / pool hand-off "
	       "w%d / raw pop x%d, %d reps + 1 warm-up rep, hpregion %s\n",
	       nsz, sizes[0] / MiB, max / MiB, ncpu, ncpu, rawn, reps, hpr_version());
	size = max;
	warm();
	for (int rep = 0; rep <= reps; rep++) {
		for (int ii = 0; ii < nsz; ii++) {
			int i = (ii + rep) % nsz;

			for (int jj = 0; jj < NSW; jj++) {
				struct variant *v = &sw[i][(jj + rep) % NSW];
				double huge = 0, dt;

				size = sizes[i];
				dt = run_one(K_THP, v, &huge);
				if (!rep)
					continue;
				v->t[v->nt++] = dt;
				if (huge < v->huge_min)
					v->huge_min = huge;
			}
		}
		if (rep)
			fprintf(stderr, "rep %d/%d done\n", rep, reps);
	}
	size = max;
	printf("\n== ready time against region size (THP), seconds, median of %d reps\n", reps);
	printf("%8s %12s %12s %12s %11s %11s %7s\n", "MiB", "fresh w", "pool w", "raw pop x",
	       "fresh/pool", "raw/pool", "huge%");
	for (int i = 0; i < nsz; i++) {
		double h = 101;

		for (int j = 0; j < NSW; j++)
			h = sw[i][j].huge_min < h ? sw[i][j].huge_min : h;
		printf("%8zu %12.5f %12.5f %12.5f %10.1fx %10.1fx %7.1f\n", sizes[i] / MiB,
		       median(&sw[i][SW_FRESH]), median(&sw[i][SW_POOL]), median(&sw[i][SW_RAW]),
		       paired(&sw[i][SW_FRESH], &sw[i][SW_POOL]),
		       paired(&sw[i][SW_RAW], &sw[i][SW_POOL]), h);
	}
	printf("(fresh/pool, raw/pool: time ratios paired within each rep, median; target "
	       "fresh/pool >= 10 at every size; huge%%: the least PMD-mapped share any fill "
	       "reached, smaps)\n");
	if (!jf)
		return 0;
	fprintf(jf, "{\"bench\":\"prefault-sweep\",\"max_mib\":%zu,\"reps\":%d,\"cpus\":%d,"
		    "\"headline\":[",
		max / MiB, reps, ncpu);
	for (int i = 0; i < nsz; i++)
		fprintf(jf, "%s{\"measure\":\"THP: ready time, %zu MiB%s (pool hand-off vs fresh "
			    "prefault, >= 10x sooner)\",\"ours\":\"pool w%d %.3f ms\","
			    "\"baseline\":\"fresh w%d %.3f ms; raw pop x%d %.3f ms\",\"ratio\":\"%.1f\"}",
			i ? "," : "", sizes[i] / MiB, i == nsz - 1 ? ", the largest" : "", ncpu,
			1e3 * median(&sw[i][SW_POOL]), ncpu, 1e3 * median(&sw[i][SW_FRESH]), rawn,
			1e3 * median(&sw[i][SW_RAW]),
			paired(&sw[i][SW_FRESH], &sw[i][SW_POOL]));
	fprintf(jf, "],\"series\":[{\"title\":\"ready time against region size (THP, %d CPUs)\","
		    "\"xlabel\":\"region size, MiB\",\"ylabel\":\"seconds until usable (median)\","
		    "\"logx\":true,\"lines\":{",
		ncpu);
	for (int j = 0; j < NSW; j++) {
		fprintf(jf, "%s\"%s %s%d\":[", j ? "," : "", swname[j], j == SW_RAW ? "x" : "w",
			sw[0][j].n);
		for (int i = 0; i < nsz; i++)
			fprintf(jf, "%s[%zu,%.5f]", i ? "," : "", sizes[i] / MiB, median(&sw[i][j]));
		fprintf(jf, "]");
	}
	fprintf(jf, "}}],\"results\":[");
	for (int i = 0; i < nsz; i++)
		for (int j = 0; j < NSW; j++)
			fprintf(jf, "%s{\"mib\":%zu,\"variant\":\"%s\",\"median_s\":%.5f,"
				    "\"huge_pct\":%.1f}",
				i || j ? "," : "", sizes[i] / MiB, swname[j], median(&sw[i][j]),
				sw[i][j].huge_min);
	fprintf(jf, "]}\n");
	fclose(jf);
	return 0;
}

static void sweep_mode(void)
{
	sweep_only = true;
	pool_mode();
}

static void quick(void)
{
	size = 256 * MiB;
	reps = 3;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	const struct bench_opt opts[] = {
		BENCH_QUICK(quick),
		{ "--pool", NULL, BENCH_T_CALL, NULL, pool_mode },
		{ "--sweep", NULL, BENCH_T_CALL, NULL, sweep_mode },
		BENCH_SIZE(&size),
		BENCH_REPS(&reps),
		BENCH_INT("--workers", "N", &maxw),
		BENCH_JSON(&json),
		BENCH_END,
	};

	if (bench_args(argc, argv, opts))
		return 2;
	size = (size + HP - 1) & ~(HP - 1);
	reps = reps < 1 ? 1 : reps > 63 ? 63 : reps;
	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	ncpu = ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu;
	if (!maxw)
		maxw = ncpu;
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup();
	if (sweep_only) {
		if (json && !(jf = fopen(json, "w")))
			bench_die(json);
		return sweep();
	}
	printf("prefault: %zu MiB per fill, %d reps + 1 warm-up rep, %d CPUs, hpregion %s\n",
	       size / MiB, reps, ncpu, hpr_version());
	for (int k = 0; k < nkinds && pool_only; k++) {
		ADDN(k, V_MEMSET, 1, "memset x%d");
		ADD1(k, V_RAWPOP, "raw populate");
		if (ncpu > 1)
			ADDN(k, V_RAWPOP, ncpu, "raw pop x%d");
		ADDN(k, V_HPR, ncpu, "hpr w%d");
	}
	for (int k = 0; k < nkinds && !pool_only; k++) {
		ADDN(k, V_MEMSET, 1, "memset x%d");
		if (ncpu > 1)
			ADDN(k, V_MEMSET, ncpu, "memset x%d");
		ADD1(k, V_RAWPOP, "raw populate");
		if (ncpu > 1)
			ADDN(k, V_RAWPOP, ncpu, "raw pop x%d");
		if (k != K_THP)
			ADD1(k, V_RAWFALLOC, "raw falloc+pop");
		ADD1(k, V_MAPPOP, "MAP_POPULATE");
		ADDN(k, V_TOUCH, ncpu, "touch x%d");
		for (int w = 1; w <= maxw; w++)
			ADDN(k, V_HPR, w, "hpr w%d");
		ADDN(k, V_CALLERS, 1, "callers %d");
		ADDN(k, V_CALLERS, 8, "callers %d");
		ADDN(k, V_GLOBAL, 1, "global %d");
		ADDN(k, V_GLOBAL, 8, "global %d");
	}
	for (int k = 0; k < nkinds; k++) {
		if (k == K_THP && !hpr_pool_supported(HPR_BACKEND_THP)) {
			ADDN(k, V_POOL, ncpu, "pool hand-off w%d");
			ADDN(k, V_ZERO, 1, "pool zero x%d");
			if (ncpu > 1)
				ADDN(k, V_ZERO, ncpu, "pool zero x%d");
		}
	}
	hpr_set_log(pool_log, NULL);
	warm();
	for (int rep = 0; rep <= reps; rep++) {
		for (int kk = 0; kk < nkinds; kk++) {
			int k = (kk + rep) % nkinds;

			for (int ii = 0; ii < nvs[k]; ii++) {
				/* rotate the order each rep: no variant always
				 * follows the same one */
				struct variant *v = &vs[k][(ii + rep * 3) % nvs[k]];
				double huge = 0, dt = run_one(k, v, &huge);

				if (!rep)
					continue; /* the warm-up rep */
				v->t[v->nt++] = dt;
				if (huge < v->huge_min)
					v->huge_min = huge;
			}
		}
		if (rep)
			fprintf(stderr, "rep %d/%d done\n", rep, reps);
	}
	if (json) {
		jf = fopen(json, "w");
		if (!jf)
			bench_die(json);
		fprintf(jf, "{\"bench\":\"prefault\",\"size_mib\":%zu,\"reps\":%d,\"cpus\":%d,"
			    "\"headline\":[",
			size / MiB, reps, ncpu);
	}
	for (int k = 0; k < nkinds; k++)
		report(k);
	if (jf)
		json_tail();
	return 0;
}
