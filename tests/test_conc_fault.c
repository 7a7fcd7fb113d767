/* SPDX-License-Identifier: MIT */
/*
 * The parallel fault engine under contention (TSan runs this suite):
 * exactly-once population, the hugetlb pool's last pages, data kept across
 * a second fault-in, async progress/cancel, demand first, a signal storm,
 * the touch fallback forced through the OS layer, and the chained SIGBUS
 * handler.
 *
 * The OS-layer fakes here only count or redirect; every populate still
 * reaches the kernel, and the results are checked against smaps.
 */
#include "common.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- OS-layer fakes ---- */
#define MAXP 1024
static struct hpr_os_ops fake;
static char *cnt_base;
static size_t cnt_ps;
static _Atomic int pop_count[MAXP];
static _Atomic int touch_calls;
static _Atomic size_t touch_bytes;
static _Atomic int pop_calls;
static _Atomic bool populate_einval;

static int fake_madvise(void *a, size_t len, int advice)
{
	if (advice == MADV_POPULATE_WRITE) {
		char *p = a;

		/* every huge page the call covers (the engine populates runs
		 * of pages with one call) */
		atomic_fetch_add(&pop_calls, 1);
		for (char *q = p; cnt_base && q < p + len; q += cnt_ps)
			if (q >= cnt_base && q < cnt_base + MAXP * cnt_ps)
				atomic_fetch_add(&pop_count[(size_t)(q - cnt_base) / cnt_ps], 1);
		if (atomic_load(&populate_einval))
			return -EINVAL; /* what a kernel < 5.14 says */
	}
	return hpr__os_real.madvise(a, len, advice);
}

static int fake_touch(void *a, size_t len, size_t step)
{
	atomic_fetch_add(&touch_calls, 1);
	atomic_fetch_add(&touch_bytes, len);
	return hpr__os_touch(a, len, step);
}

static void fakes_on(hpr_region *r)
{
	fake = hpr__os_real;
	fake.madvise = fake_madvise;
	fake.touch = fake_touch;
	cnt_base = r ? hpr_base(r) : NULL;
	cnt_ps = r ? hpr_page_size(r) : 0;
	for (int i = 0; i < MAXP; i++)
		atomic_store(&pop_count[i], 0);
	atomic_store(&touch_calls, 0);
	atomic_store(&touch_bytes, 0);
	atomic_store(&pop_calls, 0);
	hpr__os_set(&fake);
}

static void fakes_off(void)
{
	hpr__os_set(NULL);
	atomic_store(&populate_einval, false);
	cnt_base = NULL;
}

/* ---- helpers ---- */
static size_t kernel_huge(hpr_region *r)
{
	struct t_smaps k;

	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	return k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb;
}

/* Page faults the kernel counted for this process, all threads (live and
 * exited) together. MADV_POPULATE_WRITE faults through the same path as a
 * touch and is counted the same way (mm_account_fault: min_flt even for
 * GUP faults, which have no regs): one fault per huge page mapped by a
 * PMD, 512 per 2 MiB mapped with 4 KiB pages, none for a page already
 * mapped. */
static long kernel_faults(void)
{
	struct rusage u;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &u), 0);
	return u.ru_minflt + u.ru_majflt;
}

/* backend for test index i: 0 THP, 1 shmem on tmpfs huge=always, 2 hugetlb */
static hpr_region *mk_backend(int i, size_t size, unsigned workers)
{
	switch (i) {
	case 0:
		return t_region(HPR_BACKEND_THP, NULL, size, workers, 0);
	case 1:
		return t_region(HPR_BACKEND_SHMEM, t_mount_tmpfs("huge=always"), size, workers, 0);
	default:
		t_hugetlb_pool(2048, size / (2 * MiB));
		return t_region(HPR_BACKEND_HUGETLB, NULL, size, workers, 0);
	}
}

static void fill(char *p, size_t len, uint32_t seed)
{
	for (size_t o = 0; o < len; o += 4096)
		*(uint64_t *)(p + o) = ((uint64_t)seed << 32) | (o >> 12);
}

static void check_fill(const char *p, size_t len, uint32_t seed)
{
	for (size_t o = 0; o < len; o += 4096)
		ck_assert_msg(*(const uint64_t *)(p + o) == (((uint64_t)seed << 32) | (o >> 12)),
			      "data at %#zx lost", o);
}

/* ---- exactly once under contention ---- */
struct racer {
	hpr_region *r;
	pthread_barrier_t *bar;
	size_t off, len;
	int rc;
};

static void *racer_main(void *a)
{
	struct racer *x = a;

	pthread_barrier_wait(x->bar);
	x->rc = hpr_fault_in(x->r, x->off, x->len);
	return NULL;
}

/* N racers over r at once: the same whole range, and overlapping windows
 * that start and end mid-page (widened to whole pages). Returns the page
 * faults the kernel counted meanwhile. */
enum { N_RACERS = 8 };

static long race(hpr_region *r)
{
	pthread_t th[N_RACERS];
	struct racer x[N_RACERS];
	pthread_barrier_t bar;
	size_t size = hpr_size(r);
	long f0;

	pthread_barrier_init(&bar, NULL, N_RACERS);
	f0 = kernel_faults();
	for (int t = 0; t < N_RACERS; t++) {
		x[t].r = r;
		x[t].bar = &bar;
		x[t].off = t < 3 ? 0 : (size_t)(t - 3) * size / 8 + 4096;
		x[t].len = t < 3 ? size : size / 2 - 8192;
		pthread_create(&th[t], NULL, racer_main, &x[t]);
	}
	for (int t = 0; t < N_RACERS; t++) {
		pthread_join(th[t], NULL);
		ck_assert_msg(x[t].rc == 0, "racer %d: %s", t, hpr_strerror(x[t].rc));
	}
	f0 = kernel_faults() - f0;
	pthread_barrier_destroy(&bar);
	return f0;
}

START_TEST(exactly_once)
{
	const size_t size = 128 * MiB;
	struct hpr_stats st;
	hpr_region *r;
	size_t ps, np;
	struct hpr_probe_info pi;
	long faults;
	bool counted;

	/* a first race, not counted: thread stacks (glibc caches them) and a
	 * sanitizer's shadow of them are faulted in here, not in the count */
	r = mk_backend(_i, size, 4);
	/* Does this kernel count a populate's faults, one per page, in the
	 * task's counters? Linux 6.1 does not for hugetlb: its GUP took
	 * follow_hugetlb_page, not handle_mm_fault, and the 6.1 guest counted
	 * 8 faults for 64 pages. The generic GUP path came with the kernels
	 * that have PAGEMAP_SCAN (6.7+), which stands in for it here. */
	ck_assert_int_eq(hpr_probe(&pi), 0);
	faults = kernel_faults();
	ck_assert_int_eq(hpr_fault_in(r, 0, 16 * hpr_page_size(r)), 0);
	counted = kernel_faults() - faults >= 16 &&
		  (hpr_backend_of(r) != HPR_BACKEND_HUGETLB || pi.have_pagemap_scan);
	if (!counted)
		printf("NOTE: %s: this kernel does not count a populate's page faults: "
		       "only the upper bound is checked\n",
		       hpr_backend_name(hpr_backend_of(r)));
	race(r);
	ck_assert_int_eq(hpr_destroy(r), 0);

	r = mk_backend(_i, size, 4);
	ps = hpr_page_size(r);
	np = size / ps;
	fakes_on(r);
	faults = race(r);
	fakes_off();
	/* the kernel's count: every huge page faulted in, each by one PMD
	 * fault (4 KiB faults of a split or small page would be 512 per
	 * page); the slack is the racers' and Check's own bookkeeping. A
	 * sanitizer's allocator and shadow fault on their own (~200 more
	 * under ASan): there only the lower bound is checked. */
	ck_assert_msg((!counted || faults >= (long)np) &&
			      (T_SANITIZED || faults <= (long)np + 64),
		      "%s: the kernel counted %ld page faults for %zu huge pages",
		      hpr_backend_name(hpr_backend_of(r)), faults, np);
	for (size_t i = 0; i < np; i++)
		ck_assert_msg(atomic_load(&pop_count[i]) == 1,
			      "%s page %zu populated %d times", hpr_backend_name(hpr_backend_of(r)),
			      i, atomic_load(&pop_count[i]));
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_le(st.populate_calls, np);
	ck_assert_uint_eq(st.pages_present, np);
	ck_assert_uint_eq(kernel_huge(r), size);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- hugetlb: the pool's last pages ---- */
struct bg_fault {
	hpr_region *r;
	int rc;
};

static void *bg_fault_main(void *a)
{
	struct bg_fault *b = a;

	b->rc = hpr_fault_in(b->r, 0, hpr_size(b->r));
	return NULL;
}

/*
 * cfg does not fit the pool: hpr_create() says -ENOMEM and which knob, and
 * leaves nothing mapped, by the library's own ledger (exact in every build)
 * and by the kernel's maps. The count is taken around the second of two
 * equal calls, so lazy one-time setup (the probe cache, sanitizer
 * allocators) does not count as a leak.
 */
static void expect_pool_short(const struct hpr_config *cfg)
{
	hpr_region *c = NULL;
	size_t left;
	int maps, rc;

	ck_assert_int_eq(hpr_create(cfg, &c), -ENOMEM);
	maps = t_maps_count();
	t_track_begin();
	rc = hpr_create(cfg, &c);
	left = t_track_end();
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "nr_hugepages"));
	ck_assert_msg(left == 0, "the library left %zu bytes mapped", left);
	ck_assert(T_SANITIZED || t_maps_count() == maps);
}

START_TEST(hugetlb_last_pages)
{
	const unsigned long n = 32;
	hpr_region *a, *b;
	struct bg_fault fa, fb;
	pthread_t ta, tb;
	struct hpr_config cfg;

	if (t_hugetlb_pool(2048, n) != n)
		t_skip("cannot get %lu 2 MiB hugetlb pages", n);
	/* one region holding the whole pool, 8 workers */
	a = t_region(HPR_BACKEND_HUGETLB, NULL, n * 2 * MiB, 8, 0);
	ck_assert_uint_eq(t_hugetlb_resv(2048), n);
	ck_assert_int_eq(hpr_fault_in(a, 0, hpr_size(a)), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), 0);
	ck_assert_uint_eq(kernel_huge(a), hpr_size(a));
	/* nothing left: one more page is refused at create, nothing mapped */
	t_config(&cfg, HPR_BACKEND_HUGETLB, NULL, 2 * MiB, 0, 0);
	expect_pool_short(&cfg);
	ck_assert_int_eq(hpr_destroy(a), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), n);

	/* two regions share the pool exactly; both fault at once with 8
	 * workers each, racing for the pool's free list */
	a = t_region(HPR_BACKEND_HUGETLB, NULL, n / 2 * 2 * MiB, 8, 0);
	b = t_region(HPR_BACKEND_HUGETLB, NULL, n / 2 * 2 * MiB, 8, 0);
	cfg.size = 2 * MiB;
	expect_pool_short(&cfg);
	fa.r = a;
	fb.r = b;
	pthread_create(&ta, NULL, bg_fault_main, &fa);
	pthread_create(&tb, NULL, bg_fault_main, &fb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ck_assert_msg(fa.rc == 0 && fb.rc == 0, "%d %d: %s", fa.rc, fb.rc,
		      hpr_strerror(fa.rc ? fa.rc : fb.rc));
	ck_assert_uint_eq(t_hugetlb_free(2048), 0);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
	ck_assert_uint_eq(kernel_huge(a) + kernel_huge(b), n * 2 * MiB);
	ck_assert_int_eq(hpr_destroy(a), 0);
	ck_assert_int_eq(hpr_destroy(b), 0);
	/* a region needing more than the whole pool fails cleanly */
	cfg.size = (n + 1) * 2 * MiB;
	expect_pool_short(&cfg);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
}
END_TEST

/* ---- data written before a second fault-in survives it ---- */
START_TEST(pattern_kept)
{
	const size_t size = 64 * MiB;
	hpr_region *r = mk_backend(_i % 3, size, 4);
	char *p = hpr_base(r);

	if (_i >= 3) { /* the same through the touch fallback */
		fakes_on(r);
		atomic_store(&populate_einval, true);
	}
	/* first half faulted through the library, then written */
	ck_assert_int_eq(hpr_fault_in(r, 0, size / 2), 0);
	fill(p, size / 2, 1);
	/* a quarter written straight away, without fault-in (THP allows it;
	 * file pages appear on the write fault) */
	fill(p + size / 2, size / 4, 2);
	ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	ck_assert_int_eq(hpr_fault_in(r, 4096, size - 8192), 0);
	if (_i >= 3) {
		ck_assert_int_gt(atomic_load(&touch_calls), 0);
		fakes_off();
	}
	check_fill(p, size / 2, 1);
	check_fill(p + size / 2, size / 4, 2);
	for (size_t o = size * 3 / 4; o < size; o += 4096)
		ck_assert_msg(*(uint64_t *)(p + o) == 0, "fresh page %#zx not zero", o);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- async: progress, cancel, demand first ---- */
START_TEST(progress_monotonic)
{
	const size_t size = 256 * MiB;
	hpr_region *r = t_region(HPR_BACKEND_THP, NULL, size, 2, 0);
	size_t done = 0, total = 0, last = 0;
	unsigned polls = 0;
	int rc;

	ck_assert_int_eq(hpr_prefault_start(r, 0, size), 0);
	ck_assert_int_eq(hpr_prefault_start(r, 0, size), -EBUSY);
	for (;;) {
		ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
		ck_assert_uint_eq(total, size);
		ck_assert_msg(done >= last && done <= total, "progress %zu after %zu", done,
			      last);
		last = done;
		polls++;
		if (done == total)
			break;
		usleep(200);
	}
	rc = hpr_prefault_wait(r);
	ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	ck_assert_uint_eq(done, size);
	ck_assert_uint_eq(kernel_huge(r), size);
	/* a finished job can be followed by another one */
	ck_assert_int_eq(hpr_prefault_start(r, 0, size), 0);
	ck_assert_int_eq(hpr_prefault_wait(r), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_gt(polls, 0);
}
END_TEST

START_TEST(cancel)
{
	const size_t size = 1 * GiB;
	hpr_region *r = t_region(HPR_BACKEND_THP, NULL, size, 1, 0);
	size_t done = 0, total = 0;
	struct t_smaps k;
	int rc;

	ck_assert_int_eq(hpr_prefault_start(r, 0, size), 0);
	do /* wait until the job is truly under way */
		hpr_prefault_progress(r, &done, &total);
	while (done == 0);
	ck_assert_int_eq(hpr_prefault_cancel(r), 0);
	rc = hpr_prefault_wait(r);
	ck_assert_int_eq(rc, -ECANCELED);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "cancel"));
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	ck_assert_msg(done < total, "cancel came after the end (%zu of %zu)", done, total);
	ck_assert_int_eq(t_smaps(hpr_base(r), size, &k), 0);
	ck_assert_msg(k.rss < size, "rss %zu after cancel", k.rss);
	/* the region is usable: a later fault-in completes it */
	ck_assert_int_eq(hpr_prefault_wait(r), 0); /* nothing to wait for */
	ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	ck_assert_uint_eq(kernel_huge(r), size);
	memset(hpr_base(r), 1, size);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/*
 * Two hpr_prefault_start calls racing while a synchronous fault-in owns the
 * pool: exactly one starts the background job, the other is -EBUSY. Both
 * used to wait for the pool with the lock dropped and neither checked again
 * afterwards, so both returned 0 and the second overwrote the first's job.
 */
struct start_race {
	hpr_region *r;
	size_t size;
	pthread_barrier_t go;
	int rc[2];
};

static void *race_fault_main(void *a)
{
	struct start_race *s = a;

	return (void *)(intptr_t)hpr_fault_in(s->r, 0, s->size);
}

static void *race_start_main(void *a)
{
	struct start_race *s = ((struct start_race **)a)[0];
	int i = (int)(intptr_t)((void **)a)[1];

	pthread_barrier_wait(&s->go);
	s->rc[i] = hpr_prefault_start(s->r, 0, s->size);
	return NULL;
}

START_TEST(prefault_start_race)
{
	struct start_race s = { .size = 64 * MiB };
	void *args[2][2] = { { &s, (void *)0 }, { &s, (void *)1 } };
	struct t_smaps k;

	s.r = t_region(HPR_BACKEND_THP, NULL, s.size, 2, 0);
	ck_assert_int_eq(pthread_barrier_init(&s.go, NULL, 3), 0);
	for (int it = 0; it < 40; it++) {
		struct hpr_stats st;
		uint64_t calls;
		pthread_t fa, st0, st1;
		void *frc;
		int ok = 0, busy = 0;

		/* give the synchronous job something to do: nothing present */
		ck_assert_int_eq(hpr_release_lazy(s.r, 0, s.size), 0);
		ck_assert_int_eq(hpr_reclaim(s.r, 0, NULL), 0);
		ck_assert_int_eq(hpr_stats(s.r, &st), 0);
		calls = st.populate_calls;
		ck_assert_int_eq(pthread_create(&st0, NULL, race_start_main, args[0]), 0);
		ck_assert_int_eq(pthread_create(&st1, NULL, race_start_main, args[1]), 0);
		ck_assert_int_eq(pthread_create(&fa, NULL, race_fault_main, &s), 0);
		/* the fault-in is under way (it owns the pool) */
		do
			ck_assert_int_eq(hpr_stats(s.r, &st), 0);
		while (st.populate_calls == calls);
		pthread_barrier_wait(&s.go);
		pthread_join(st0, NULL);
		pthread_join(st1, NULL);
		pthread_join(fa, &frc);
		ck_assert_int_eq((int)(intptr_t)frc, 0);
		for (int i = 0; i < 2; i++) {
			ok += s.rc[i] == 0;
			busy += s.rc[i] == -EBUSY;
		}
		ck_assert_msg(ok == 1 && busy == 1,
			      "iteration %d: hpr_prefault_start returned %d and %d; "
			      "exactly one must start the job, the other is -EBUSY",
			      it, s.rc[0], s.rc[1]);
		ck_assert_int_eq(hpr_prefault_wait(s.r), 0);
		ck_assert_int_eq(t_smaps(hpr_base(s.r), s.size, &k), 0);
		ck_assert_uint_eq(k.rss, s.size);
	}
	pthread_barrier_destroy(&s.go);
	ck_assert_int_eq(hpr_destroy(s.r), 0);
}
END_TEST

START_TEST(demand_first)
{
	const size_t size = 1 * GiB;
	hpr_region *r = t_region(HPR_BACKEND_THP, NULL, size, 1, 0);
	size_t ps = hpr_page_size(r), done = 0, total = 0;
	struct t_smaps k;

	ck_assert_int_eq(hpr_prefault_start(r, 0, size), 0);
	/* the one worker walks up from page 0; the caller's last page must
	 * not wait for it */
	ck_assert_int_eq(hpr_fault_in(r, size - ps, ps), 0);
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	ck_assert_msg(done < total, "fault_in of the last page returned only after the "
				    "job (%zu of %zu)", done, total);
	ck_assert_int_eq(t_smaps(hpr_base(r) + size - ps, ps, &k), 0);
	/* the VMA sums: at least the last page is in */
	ck_assert_uint_ge(k.anon_huge, ps);
	/* a multi-page range near the end, also served by the caller */
	ck_assert_int_eq(hpr_fault_in(r, size - 9 * ps, 8 * ps), 0);
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	ck_assert_int_eq(hpr_prefault_wait(r), 0);
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	ck_assert_uint_eq(done, total); /* pages the caller did count as done */
	ck_assert_uint_eq(kernel_huge(r), size);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- a signal storm during fault-in ---- */
static _Atomic unsigned long sig_hits;
static _Atomic bool storm_stop;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&sig_hits, 1);
}

static void *storm_main(void *a)
{
	pthread_t target = *(pthread_t *)a;
	unsigned long sent = 0;

	while (!atomic_load(&storm_stop) || sent < 5000) {
		if (sent & 1)
			pthread_kill(target, SIGUSR1);
		else
			kill(getpid(), SIGUSR1);
		sent++;
		if (sent > 10000000)
			break;
	}
	return NULL;
}

START_TEST(signal_storm)
{
	const size_t size = 512 * MiB;
	unsigned workers = _i ? 4 : 1;
	struct sigaction sa;
	pthread_t me = pthread_self(), th;
	unsigned long before;
	hpr_region *r = t_region(_i == 2 ? HPR_BACKEND_SHMEM : HPR_BACKEND_THP,
			   _i == 2 ? t_mount_tmpfs("huge=always") : NULL, size, workers, 0);
	char *p = hpr_base(r);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = 0; /* no SA_RESTART: interrupted calls see EINTR */
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	/* data the fault-in must keep */
	fill(p, 8 * MiB, 7);
	fill(p + size - 8 * MiB, 8 * MiB, 8);
	atomic_store(&storm_stop, false);
	pthread_create(&th, NULL, storm_main, &me);
	while (atomic_load(&sig_hits) < 100) /* the storm is on */
		;
	before = atomic_load(&sig_hits);
	ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	ck_assert_msg(atomic_load(&sig_hits) > before, "no signal landed during fault-in");
	atomic_store(&storm_stop, true);
	pthread_join(th, NULL);
	check_fill(p, 8 * MiB, 7);
	check_fill(p + size - 8 * MiB, 8 * MiB, 8);
	ck_assert_uint_eq(kernel_huge(r), size);
	ck_assert_int_eq(hpr_destroy(r), 0);
	signal(SIGUSR1, SIG_IGN);
}
END_TEST

/* ---- the touch fallback, forced through the OS layer ---- */
START_TEST(touch_fallback)
{
	const size_t size = 64 * MiB;
	hpr_region *r = mk_backend(_i, size, 4);
	size_t np = size / hpr_page_size(r);
	struct hpr_stats st;

	fakes_on(r);
	atomic_store(&populate_einval, true);
	ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	fakes_off();
	/* every byte touched exactly once, through the touch hook */
	ck_assert_int_gt(atomic_load(&touch_calls), 0);
	ck_assert_uint_eq(atomic_load(&touch_bytes), size);
	for (size_t i = 0; i < np; i++)
		ck_assert_int_le(atomic_load(&pop_count[i]), 1);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.resident, size);
	ck_assert_uint_eq(kernel_huge(r), size);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- the chained SIGBUS handler ---- */
static sigjmp_buf my_jb;
static void *volatile my_addr;
static volatile int my_hits;

static void my_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	my_hits++;
	my_addr = si->si_addr;
	siglongjmp(my_jb, 1);
}

START_TEST(sigbus_chained)
{
	const char *dir = t_mount_tmpfs("size=16m");
	struct sigaction sa, cur;
	char path[256], *m, *anon;
	int fd;

	/* the application's handler first */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = my_bus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGBUS, &sa, NULL), 0);
	/* then the library installs its own on its first touch */
	anon = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(anon, MAP_FAILED);
	ck_assert_int_eq(hpr__os_touch(anon, 2 * MiB, 4096), 0);
	ck_assert_int_eq(sigaction(SIGBUS, NULL, &cur), 0);
	ck_assert_msg(cur.sa_sigaction != my_bus, "the library did not chain in");

	/* a SIGBUS nowhere near a touch: a mapped file truncated under us */
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 2 * 4096), 0);
	m = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	m[0] = 1;
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	if (!sigsetjmp(my_jb, 1)) {
		m[4096] = 2;
		ck_abort_msg("no SIGBUS from a truncated mapping");
	}
	ck_assert_int_eq(my_hits, 1);
	ck_assert_ptr_eq(my_addr, m + 4096);
	/* and the library's touch still catches its own */
	ck_assert_int_eq(hpr__os_touch(anon, 2 * MiB, 4096), 0);
	munmap(m, 2 * 4096);
	munmap(anon, 2 * MiB);
	close(fd);
}
END_TEST

/* touch on a hugetlb mapping whose pool runs dry: -EFAULT, not a crash.
 * MAP_NORESERVE cannot be had through the public API (the library always
 * reserves), so the mapping is made here and the touch called directly. */
START_TEST(touch_pool_dry)
{
	const char *dir = t_mount_hugetlbfs("pagesize=2M");
	char path[256], *m;
	int fd;

	if (t_hugetlb_pool(2048, 2) != 2)
		t_skip("cannot get 2 hugetlb pages");
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4 * 2 * MiB), 0);
	m = mmap(NULL, 4 * 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(hpr__os_touch(m, 2 * MiB, 4096), 0);
	ck_assert_int_eq(hpr__os_touch(m + 2 * MiB, 2 * MiB, 4096), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), 0);
	ck_assert_int_eq(hpr__os_touch(m + 4 * MiB, 2 * MiB, 4096), -EFAULT);
	ck_assert_int_eq(hpr__os_touch(m + 6 * MiB, 4 * 4096, 4096), -EFAULT);
	/* the pages we got are fine */
	m[0] = 1;
	m[2 * MiB] = 2;
	ck_assert_int_eq(m[0] + m[2 * MiB], 3);
	munmap(m, 4 * 2 * MiB);
	close(fd);
	unlink(path);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conc_fault");
	TCase *tc = tcase_create("engine");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, exactly_once, 0, 3);
	tcase_add_test(tc, hugetlb_last_pages);
	tcase_add_loop_test(tc, pattern_kept, 0, 6);
	tcase_add_test(tc, progress_monotonic);
	tcase_add_test(tc, cancel);
	tcase_add_test(tc, demand_first);
	tcase_add_test(tc, prefault_start_race);
	tcase_add_loop_test(tc, signal_storm, 0, 3);
	tcase_add_loop_test(tc, touch_fallback, 0, 3);
	tcase_add_test(tc, sigbus_chained);
	tcase_add_test(tc, touch_pool_dry);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
