/* SPDX-License-Identifier: MIT */
/*
 * The recycled huge-page pool (hpr_pool_configure, docs/pool.md): off by
 * default; a destroyed THP region's pages are zeroed and handed to the
 * next fault-in, never a non-zero byte; the limit holds and 0 empties it;
 * a forked child starts with an empty pool; under a memory cgroup limit
 * the kernel takes pool pages, so a run that survives with the pool is
 * killed when the same memory is held by a live region. Checked against
 * the kernel: smaps AnonHugePages and LazyFree, PAGEMAP_SCAN
 * (hpr_stats .huge_mapped), RssAnon, the memcg's own OOM kill.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif
#ifndef T_TSAN
#define T_TSAN 0
#endif

static void need_pool(void)
{
	int rc = hpr_pool_supported(HPR_BACKEND_THP);

	if (rc)
		t_skip("the pool is not available here: %s", hpr_strerror(rc));
}

static struct hpr_pool_stats pst(void)
{
	struct hpr_pool_stats s;

	ck_assert_int_eq(hpr_pool_stats(&s), 0);
	return s;
}

/* Wait until the pool holds at least bytes of zeroed pages. */
static void wait_clean(size_t bytes)
{
	for (int i = 0; i < 60000; i++) {
		if (pst().clean_bytes >= bytes)
			return;
		usleep(1000);
	}
	ck_abort_msg("the pool did not zero %zu bytes within 60 s (clean %zu)", bytes,
		     pst().clean_bytes);
}

/* The first non-zero byte of [p, p+len), or -1. */
static long first_nonzero(const unsigned char *p, size_t len)
{
	const uint64_t *w = (const uint64_t *)p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i])
			for (size_t b = i * 8; b < i * 8 + 8; b++)
				if (p[b])
					return (long)b;
	return -1;
}

static void check_zero_huge(hpr_region *r, const char *what)
{
	struct t_smaps k;
	struct hpr_stats st;
	long nz = first_nonzero(hpr_base(r), hpr_size(r));

	ck_assert_msg(nz < 0, "%s: byte %ld is %#x, not zero", what, nz,
		      nz < 0 ? 0 : ((unsigned char *)hpr_base(r))[nz]);
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_msg(st.huge_mapped == hpr_size(r), "%s: %zu of %zu bytes PMD-mapped", what,
		      st.huge_mapped, hpr_size(r));
	ck_assert_msg(k.anon_huge == hpr_size(r), "%s: smaps AnonHugePages %zu of %zu", what,
		      k.anon_huge, hpr_size(r));
	/* handed-out pages are ordinary dirty pages, not lazily free */
	ck_assert_msg(k.lazyfree == 0, "%s: smaps LazyFree %zu", what, k.lazyfree);
}

static long long rss_anon(void)
{
	char buf[4096], *p;
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strstr(buf, "RssAnon:");
	return p ? atoll(p + 8) * 1024 : -1;
}

START_TEST(pool_off_by_default)
{
	struct hpr_pool_stats s = pst();
	hpr_region *r;

	ck_assert_uint_eq(s.max_bytes, 0);
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_str_eq(hpr_pool_zero_method_name(), "none");
	r = t_region(HPR_BACKEND_THP, NULL, 8 * MiB, 0, HPR_F_PREFAULT);
	ck_assert_int_eq(hpr_destroy(r), 0);
	s = pst();
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_uint_eq(s.donated_bytes, 0);
	ck_assert_uint_eq(s.threads, 0);
}
END_TEST

START_TEST(pool_badinput)
{
	struct hpr_pool_stats s;

	ck_assert_int_eq(hpr_pool_configure(0, 1u << 7), -EINVAL);
	ck_assert_int_eq(hpr_pool_supported(HPR_BACKEND_SHMEM), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(-EOPNOTSUPP), "file"));
	ck_assert_int_eq(hpr_pool_supported(HPR_BACKEND_HUGETLB), -EOPNOTSUPP);
	ck_assert_int_eq(hpr_pool_supported(HPR_BACKEND_AUTO), -EINVAL);
	ck_assert_int_eq(hpr_pool_supported((enum hpr_backend)42), -EINVAL);
	ck_assert_int_eq(hpr_pool_stats_sized(NULL, sizeof(s)), -EINVAL);
	ck_assert_int_eq(hpr_pool_stats_sized(&s, 8), -EINVAL);
	/* off and empty: configure(0) on a pool never turned on is fine */
	ck_assert_int_eq(hpr_pool_configure(0, 0), 0);
}
END_TEST

/* Fill a region with a pattern, destroy it, and get the same pages back
 * (handed_bytes says so) as zeros, PMD-mapped, not lazily free. */
START_TEST(pool_never_hands_old_bytes)
{
	size_t sz = 32 * MiB;
	struct hpr_pool_stats s;
	hpr_region *r;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(64 * MiB, 0), 0);
	ck_assert_str_ne(hpr_pool_zero_method_name(), "none");
	for (int round = 0; round < 3; round++) {
		r = t_region(HPR_BACKEND_THP, NULL, sz, 0, HPR_F_PREFAULT);
		check_zero_huge(r, round ? "a recycled region" : "a fresh region");
		memset(hpr_base(r), 0xa5 + round, sz);
		ck_assert_int_eq(hpr_destroy(r), 0);
		s = pst();
		ck_assert_uint_eq(s.bytes, sz);
		ck_assert_uint_eq(s.donated_bytes, (size_t)(round + 1) * sz);
		wait_clean(sz);
		s = pst();
		ck_assert_uint_eq(s.resident, sz);
		ck_assert_uint_eq(s.huge_mapped, sz);
	}
	r = t_region(HPR_BACKEND_THP, NULL, sz, 0, HPR_F_PREFAULT);
	s = pst();
	ck_assert_uint_eq(s.handed_bytes, 3 * sz);
	ck_assert_uint_eq(s.bytes, 0);
	check_zero_huge(r, "a recycled region");
	ck_assert_int_eq(hpr_destroy(r), 0);
	/* hpr_fault_in of part of a region, and of the rest later */
	wait_clean(sz);
	r = t_region(HPR_BACKEND_THP, NULL, 2 * sz, 0, 0);
	ck_assert_int_eq(hpr_fault_in(r, 2 * MiB, 6 * MiB), 0);
	ck_assert_uint_eq(pst().bytes, sz - 6 * MiB);
	ck_assert_int_eq(hpr_fault_in(r, 0, 2 * sz), 0);
	ck_assert_uint_eq(pst().bytes, 0);
	check_zero_huge(r, "a region filled partly from the pool");
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(hpr_pool_configure(0, 0), 0);
	ck_assert_uint_eq(pst().bytes, 0);
}
END_TEST

/* hpr_reclaim of released THP pages moves them into the pool; the
 * region's range stays mapped (and inherited by a child), and a fault-in
 * gets zeroed pages back. */
START_TEST(pool_takes_reclaimed)
{
	size_t sz = 16 * MiB, got = 0;
	struct hpr_stats st;
	hpr_region *r;
	pid_t pid;
	int status;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(64 * MiB, 0), 0);
	r = t_region(HPR_BACKEND_THP, NULL, sz, 0, HPR_F_PREFAULT);
	memset(hpr_base(r), 0x6b, sz);
	ck_assert_int_eq(hpr_release_lazy(r, 0, sz), 0);
	ck_assert_int_eq(hpr_reclaim(r, 0, &got), 0);
	ck_assert_uint_eq(got, sz);
	ck_assert_uint_eq(pst().donated_bytes, sz);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.resident, 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		/* mapped here too (the pool's DONTFORK did not stay on the
		 * region's range): a read faults in a zero page */
		_exit(((volatile char *)hpr_base(r))[sz - 1] == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	wait_clean(sz);
	ck_assert_int_eq(hpr_fault_in(r, 0, sz), 0);
	ck_assert_uint_eq(pst().handed_bytes, sz);
	check_zero_huge(r, "a region faulted back in from the pool after hpr_reclaim");
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(pool_limit_and_off)
{
	struct hpr_pool_stats s;
	long long before, after;
	hpr_region *r;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(8 * MiB + 4096, HPR_POOL_ONE_THREAD), 0);
	s = pst();
	ck_assert_uint_eq(s.max_bytes, 8 * MiB); /* whole huge pages */
	r = t_region(HPR_BACKEND_THP, NULL, 32 * MiB, 0, HPR_F_PREFAULT);
	memset(hpr_base(r), 0x11, 32 * MiB);
	ck_assert_int_eq(hpr_destroy(r), 0);
	s = pst();
	ck_assert_uint_eq(s.bytes, 8 * MiB);
	ck_assert_uint_eq(s.resident, 8 * MiB);
	wait_clean(8 * MiB);
	ck_assert_uint_eq(pst().threads, 1);
	/* a smaller limit trims at once */
	ck_assert_int_eq(hpr_pool_configure(4 * MiB, HPR_POOL_IDLE), 0);
	s = pst();
	ck_assert_uint_eq(s.bytes, 4 * MiB);
	ck_assert_uint_eq(s.trimmed_bytes, 4 * MiB);
	before = rss_anon();
	ck_assert_int_eq(hpr_pool_configure(0, 0), 0);
	after = rss_anon();
	s = pst();
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_uint_eq(s.resident, 0);
	ck_assert_uint_eq(s.threads, 0);
	ck_assert_uint_eq(s.max_bytes, 0);
	ck_assert_msg(before - after >= (long long)(3 * MiB),
		      "RssAnon went from %lld to %lld: the pool's pages were not unmapped", before,
		      after);
	/* off: a destroy gives nothing to the pool */
	r = t_region(HPR_BACKEND_THP, NULL, 8 * MiB, 0, HPR_F_PREFAULT);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(pst().bytes, 0);
}
END_TEST

/* Regions the pool does not serve keep their pages: shmem, NUMA policy. */
START_TEST(pool_not_for_shmem)
{
	hpr_region *r;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(64 * MiB, 0), 0);
	r = t_region(HPR_BACKEND_SHMEM, NULL, 8 * MiB, 0, HPR_F_PREFAULT | HPR_F_FALLBACK);
	memset(hpr_base(r), 0x22, 8 * MiB);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(pst().bytes, 0);
	ck_assert_uint_eq(pst().donated_bytes, 0);
}
END_TEST

struct churn {
	int id;
	int rounds;
	size_t handed_seen;
};

static void *churn_main(void *a)
{
	struct churn *c = a;

	for (int i = 0; i < c->rounds; i++) {
		struct hpr_config cfg;
		hpr_region *r;
		long nz;
		int rc;

		t_config(&cfg, HPR_BACKEND_THP, NULL, 16 * MiB, 1, HPR_F_PREFAULT);
		rc = hpr_create(&cfg, &r);
		if (rc) {
			fprintf(stderr, "churn: %s\n", hpr_strerror(rc));
			return (void *)1;
		}
		nz = first_nonzero(hpr_base(r), hpr_size(r));
		if (nz >= 0) {
			fprintf(stderr, "churn %d round %d: byte %ld is %#x\n", c->id, i, nz,
				((unsigned char *)hpr_base(r))[nz]);
			hpr_destroy(r);
			return (void *)1;
		}
		memset(hpr_base(r), 0x30 + c->id, hpr_size(r));
		hpr_destroy(r);
		if (i % 4 == 3)
			usleep(20000); /* let the zeroing catch up now and then */
	}
	return NULL;
}

/* Threads create, check, scribble and destroy while the pool's threads
 * zero: every region is all zeros (the TSan build runs this too). */
START_TEST(pool_concurrent_churn)
{
	struct churn c[3];
	pthread_t th[3];
	struct hpr_pool_stats s;
	int rounds = T_SANITIZED ? 8 : 24;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(48 * MiB, 0), 0);
	for (int i = 0; i < 3; i++) {
		c[i] = (struct churn){ .id = i, .rounds = rounds };
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		void *ret;

		ck_assert_int_eq(pthread_join(th[i], &ret), 0);
		ck_assert_ptr_null(ret);
	}
	s = pst();
	ck_assert_uint_le(s.bytes, 48 * MiB);
	ck_assert_msg(s.handed_bytes > 0, "no page came from the pool in %d rounds", 3 * rounds);
	fprintf(stderr, "churn: donated %zu MiB, handed %zu MiB, zeroed %zu MiB, dropped %zu MiB\n",
		(size_t)(s.donated_bytes / MiB), (size_t)(s.handed_bytes / MiB),
		(size_t)(s.zeroed_bytes / MiB), (size_t)(s.dropped_bytes / MiB));
	ck_assert_int_eq(hpr_pool_configure(0, 0), 0);
	ck_assert_uint_eq(pst().bytes, 0);
}
END_TEST

/* hpr_fault_in moves the pool's pages in on its own thread before the
 * workers populate the rest (fault.c hpr__fault_from_pool): callers of
 * overlapping ranges at once, on a region larger than the pool holds,
 * share the pages out without waiting on each other's claims; each page
 * comes from the pool or from the kernel, and all are zeros and huge. */
struct handoff {
	hpr_region *r;
	size_t off, len;
	_Atomic int *go;
	int rc;
};

static void *handoff_main(void *a)
{
	struct handoff *h = a;

	while (!atomic_load(h->go))
		;
	h->rc = hpr_fault_in(h->r, h->off, h->len);
	return NULL;
}

START_TEST(pool_handoff_concurrent_callers)
{
	size_t pooled = 64 * MiB, sz = pooled + 32 * MiB;
	struct handoff h[4];
	pthread_t th[4];
	_Atomic int go = 0;
	struct hpr_pool_stats s0, s;
	hpr_region *r;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(pooled, 0), 0);
	r = t_region(HPR_BACKEND_THP, NULL, pooled, 0, HPR_F_PREFAULT);
	memset(hpr_base(r), 0x5a, pooled);
	ck_assert_int_eq(hpr_destroy(r), 0);
	wait_clean(pooled);
	s0 = pst();
	r = t_region(HPR_BACKEND_THP, NULL, sz, 2, 0);
	/* the whole region, its two halves, and one page in the middle */
	h[0] = (struct handoff){ .r = r, .off = 0, .len = sz, .go = &go };
	h[1] = (struct handoff){ .r = r, .off = sz / 2, .len = sz / 2, .go = &go };
	h[2] = (struct handoff){ .r = r, .off = 0, .len = sz / 2, .go = &go };
	h[3] = (struct handoff){ .r = r, .off = sz / 2 - 2 * MiB, .len = 2 * MiB, .go = &go };
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, handoff_main, &h[i]), 0);
	atomic_store(&go, 1);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_msg(h[i].rc == 0, "caller %d: %s", i, hpr_strerror(h[i].rc));
	}
	s = pst();
	ck_assert_uint_eq(s.handed_bytes - s0.handed_bytes, pooled);
	ck_assert_uint_eq(s.bytes, 0);
	check_zero_huge(r, "a region filled from the pool by four callers at once");
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(hpr_pool_configure(0, 0), 0);
}
END_TEST

static _Atomic bool stats_stop;

static void *stats_main(void *a)
{
	(void)a;
	while (!atomic_load(&stats_stop)) {
		struct hpr_pool_stats s;

		hpr_pool_stats(&s);
	}
	return NULL;
}

/* The child of a fork: an empty pool with the parent's limit, regions of
 * zeros, its own pool once it destroys one. Exit status: 0 when right. */
static int fork_child(size_t limit)
{
	struct hpr_pool_stats s;
	struct hpr_config cfg;
	hpr_region *r;

	if (hpr_pool_stats(&s) || s.bytes || s.clean_bytes || s.max_bytes != limit || s.threads)
		return 2;
	t_config(&cfg, HPR_BACKEND_THP, NULL, 8 * MiB, 1, HPR_F_PREFAULT);
	if (hpr_create(&cfg, &r))
		return 3;
	if (first_nonzero(hpr_base(r), hpr_size(r)) >= 0)
		return 4;
	memset(hpr_base(r), 0x77, hpr_size(r));
	hpr_destroy(r);
	for (int i = 0; i < 10000 && (hpr_pool_stats(&s), s.clean_bytes < 8 * MiB); i++)
		usleep(1000);
	if (s.clean_bytes != 8 * MiB)
		return 5;
	if (hpr_create(&cfg, &r))
		return 6;
	hpr_pool_stats(&s);
	if (s.handed_bytes != 8 * MiB || first_nonzero(hpr_base(r), hpr_size(r)) >= 0)
		return 7;
	hpr_destroy(r);
	return 0;
}

/* fork with a full pool, and while the pool's threads zero and another
 * thread reads its stats (PAGEMAP_SCAN under the pool's lock): the child
 * starts empty, never deadlocks, and the parent's pool is untouched. */
START_TEST(pool_fork)
{
	size_t limit = 64 * MiB;
	pthread_t st;
	hpr_region *r;
	int forks = T_SANITIZED ? 4 : 12;

	need_pool();
	ck_assert_int_eq(hpr_pool_configure(limit, 0), 0);
	ck_assert_int_eq(pthread_create(&st, NULL, stats_main, NULL), 0);
	for (int i = 0; i < forks; i++) {
		pid_t pid;
		int status;

		r = t_region(HPR_BACKEND_THP, NULL, 32 * MiB, 0, HPR_F_PREFAULT);
		memset(hpr_base(r), 0x5c, hpr_size(r));
		ck_assert_int_eq(hpr_destroy(r), 0);
		if (i % 2) /* half the forks with the pool zeroed, half while zeroing */
			wait_clean(32 * MiB);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (!pid) {
			alarm(60);
			_exit(fork_child(limit));
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "fork %d: child status %#x (exit code = failed step)", i, status);
		ck_assert_uint_eq(pst().bytes, 32 * MiB);
		wait_clean(32 * MiB);
		r = t_region(HPR_BACKEND_THP, NULL, 32 * MiB, 0, HPR_F_PREFAULT);
		ck_assert_uint_eq(pst().bytes, 0);
		check_zero_huge(r, "the parent's recycled region after a fork");
		ck_assert_int_eq(hpr_destroy(r), 0);
		wait_clean(32 * MiB); /* the next round's region takes these */
	}
	atomic_store(&stats_stop, true);
	pthread_join(st, NULL);
	ck_assert_int_eq(hpr_pool_configure(0, 0), 0);
}
END_TEST

/* ---- memory cgroup: the kernel takes pool pages before it OOM-kills ---- */
static char cg_dir[512];
static bool cg_v2;

/* Our cgroup's path in the hierarchy of controller (v1) or "" (v2). */
static bool own_cgroup(const char *controller, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "r");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;

		if (!b)
			continue;
		*b = 0;
		line[strcspn(line, "\n")] = 0;
		b[1 + strcspn(b + 1, "\n")] = 0;
		if ((controller && !strcmp(a + 1, controller)) ||
		    (!controller && a[1] == 0 && !strcmp(line, "0"))) {
			snprintf(out, len, "%s", b + 1);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Make a memory cgroup with a limit (and no swap), or skip saying why. */
static void cg_make(size_t limit)
{
	char path[256], base[400], v[32];
	struct stat sb;

	if (getuid())
		t_skip("memcg: needs root to make a memory cgroup");
	snprintf(v, sizeof(v), "%zu", limit);
	if (!stat("/sys/fs/cgroup/memory/memory.limit_in_bytes", &sb) &&
	    own_cgroup("memory", path, sizeof(path))) {
		snprintf(base, sizeof(base), "/sys/fs/cgroup/memory%s", path);
		cg_v2 = false;
	} else if (!stat("/sys/fs/cgroup/cgroup.controllers", &sb) &&
		   own_cgroup(NULL, path, sizeof(path))) {
		snprintf(base, sizeof(base), "/sys/fs/cgroup%s", path);
		cg_v2 = true;
		t_write_at(base, "cgroup.subtree_control", "+memory");
	} else {
		t_skip("memcg: no memory controller (cgroup v1 /sys/fs/cgroup/memory or v2 "
		       "/sys/fs/cgroup)");
	}
	snprintf(cg_dir, sizeof(cg_dir), "%s/hpr-pool-test-%d", base, (int)getpid());
	if (mkdir(cg_dir, 0755))
		t_skip("memcg: cannot make %s: %s", cg_dir, strerror(errno));
	if (t_write_at(cg_dir, cg_v2 ? "memory.max" : "memory.limit_in_bytes", v)) {
		rmdir(cg_dir);
		t_skip("memcg: cannot set the limit in %s (v2: is memory enabled in the "
		       "parent's cgroup.subtree_control?)",
		       cg_dir);
	}
	if (cg_v2)
		t_write_at(cg_dir, "memory.swap.max", "0");
	else
		t_write_at(cg_dir, "memory.swappiness", "0");
}

static void cg_remove(void)
{
	for (int i = 0; i < 100 && rmdir(cg_dir) && errno == EBUSY; i++)
		usleep(10000);
}

/* In a child: join the cgroup, then, pooled, fill a region, destroy it
 * into the pool and allocate as much again; unpooled, keep the region. */
static int cg_child(bool pooled, size_t sz)
{
	char me[32];
	hpr_region *r;
	struct hpr_config cfg;
	char *p;

	snprintf(me, sizeof(me), "%d", (int)getpid());
	if (t_write_at(cg_dir, "cgroup.procs", me))
		return 10;
	if (pooled && hpr_pool_configure(sz, 0))
		return 11;
	t_config(&cfg, HPR_BACKEND_THP, NULL, sz, 1, HPR_F_PREFAULT);
	if (hpr_create(&cfg, &r))
		return 12;
	memset(hpr_base(r), 0x42, sz);
	if (pooled) {
		struct hpr_pool_stats s;

		hpr_destroy(r);
		hpr_pool_stats(&s);
		if (s.bytes != sz)
			return 13;
		/* half zeroed, half not: both kinds must be reclaimable */
		for (int i = 0; i < 10000 && s.clean_bytes < sz / 2; i++) {
			usleep(1000);
			hpr_pool_stats(&s);
		}
	}
	p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 14;
	memset(p, 0x43, sz);
	if (pooled) {
		struct hpr_pool_stats s;

		hpr_pool_stats(&s);
		fprintf(stderr, "memcg: pool resident %zu MiB of %zu after the allocation\n",
			s.resident / MiB, s.bytes / MiB);
		if (s.resident >= sz)
			return 15; /* the kernel took nothing: cannot be */
	}
	return 0;
}

static int run_cg_child(bool pooled, size_t sz)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		alarm(120);
		_exit(cg_child(pooled, sz));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(pool_memcg_shrinks)
{
	size_t sz = 192 * MiB, limit = 320 * MiB;
	int st_pool, st_held;

	need_pool();
	cg_make(limit);
	st_pool = run_cg_child(true, sz);
	st_held = run_cg_child(false, sz);
	cg_remove();
	ck_assert_msg(WIFEXITED(st_pool) && WEXITSTATUS(st_pool) == 0,
		      "pooled run under a %zu MiB memcg: status %#x (signal %d, exit %d)",
		      limit / MiB, st_pool, WIFSIGNALED(st_pool) ? WTERMSIG(st_pool) : 0,
		      WIFEXITED(st_pool) ? WEXITSTATUS(st_pool) : -1);
	ck_assert_msg(WIFSIGNALED(st_held) && WTERMSIG(st_held) == SIGKILL,
		      "the same run holding the region (no pool to shrink) was not OOM-killed: "
		      "status %#x",
		      st_held);
}
END_TEST

/* A test case that holds the system lock for its run: THP's sysfs mode
 * must stay as it is (other suites change it under the lock), and the
 * memcg case makes a cgroup. */
static TCase *locked_tcase(const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, t_system_lock_begin, t_system_lock_end);
	return tc;
}

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = locked_tcase("pool");

	tcase_add_test(tc, pool_off_by_default);
	tcase_add_test(tc, pool_badinput);
	tcase_add_test(tc, pool_never_hands_old_bytes);
	tcase_add_test(tc, pool_takes_reclaimed);
	tcase_add_test(tc, pool_limit_and_off);
	tcase_add_test(tc, pool_not_for_shmem);
	tcase_add_test(tc, pool_concurrent_churn);
	tcase_add_test(tc, pool_handoff_concurrent_callers);
	suite_add_tcase(s, tc);
	tc = locked_tcase("fork");
	tcase_add_test(tc, pool_fork);
	suite_add_tcase(s, tc);
	/* not under TSan: its shadow memory (several times what the test
	 * touches) is charged to the cgroup and decides who is killed; the
	 * plain and ASan builds run it */
	if (!T_TSAN) {
		tc = locked_tcase("memcg");
		tcase_add_test(tc, pool_memcg_shrinks);
		suite_add_tcase(s, tc);
	}
	return s;
}

HPR_TEST_MAIN(pool_suite, 0)
