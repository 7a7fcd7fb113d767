/* SPDX-License-Identifier: MIT */
/*
 * Release and reuse racing (src/release.c against src/fault.c), run under
 * TSan by scripts/test.sh: several threads, each owning two huge pages,
 * fault in, write, verify and release them (whole or in halves) 10 000
 * times in all, while they also fault in and release two pages they share,
 * and a reclaimer thread keeps calling hpr_reclaim and (THP) making the
 * kernel discard lazily freed memory with MADV_PAGEOUT. A page a thread has
 * faulted in must never lose what the thread wrote; after a reuse each
 * 4 KiB page is the thread's last data or zeros; the final table agrees
 * with smaps (THP) and with the file's blocks (shmem). race_thp_held runs
 * the same with release_delay_ms 1: the workers give held pages to the
 * kernel while the threads reuse them and the reclaimer discards them.
 */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define NT 4
#define OWN 2
#define SHARED 2
#define ROUNDS 10000 /* a tenth under HPR_TEST_QUICK (the emulated guests) */
#define PG 4096UL

struct ctx {
	hpr_region *r;
	size_t hp;
	bool thp;
	_Atomic bool stop;
	_Atomic unsigned long reclaims, zero_pages;
};

struct thr {
	struct ctx *c;
	int id;
	char msg[160];
};

static uint64_t tag(size_t off, unsigned gen)
{
	return 0xfeed000000000000ULL ^ ((uint64_t)gen << 32) ^ off;
}

static size_t own_off(const struct ctx *c, int id, int k)
{
	return (size_t)(id * OWN + k) * c->hp;
}

static size_t shared_off(const struct ctx *c, int k)
{
	return (size_t)(NT * OWN + k) * c->hp;
}

/* First and last word of each 4 KiB page: gen's tag, or zero. */
static void write_page(char *p, size_t off, size_t hp, unsigned gen)
{
	for (size_t o = 0; o < hp; o += PG) {
		uint64_t *w = (uint64_t *)(p + o);

		w[0] = tag(off + o, gen);
		w[PG / 8 - 1] = ~tag(off + o, gen);
	}
}

/* 0 ok; -1 lost data. *zeros counts 4 KiB pages that read as zero. */
static int check_page(const char *p, size_t off, size_t hp, unsigned gen, bool zero_ok,
		      size_t *zeros)
{
	for (size_t o = 0; o < hp; o += PG) {
		const uint64_t *w = (const uint64_t *)(p + o);

		if (w[0] == tag(off + o, gen) && w[PG / 8 - 1] == ~tag(off + o, gen))
			continue;
		if (zero_ok && !w[0] && !w[PG / 8 - 1]) {
			(*zeros)++;
			continue;
		}
		return -1;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct thr *t = arg;
	struct ctx *c = t->c;
	char *b = hpr_base(c->r);
	unsigned gen[OWN] = { 0 };
	unsigned seed = (unsigned)t->id * 2654435761u + 1;
	size_t zeros = 0;
	int rc;

	for (int round = 0; round < (t_quick() ? ROUNDS / 10 : ROUNDS) / NT; round++) {
		int k = round % OWN;
		size_t off = own_off(c, t->id, k);
		int rnd;

		seed = seed * 1103515245u + 12345u;
		rnd = (int)(seed >> 16);
		/* reuse: old data or zeros per 4 KiB page */
		if ((rc = hpr_fault_in(c->r, off, c->hp))) {
			snprintf(t->msg, sizeof(t->msg), "fault_in: %s", hpr_strerror(rc));
			return t->msg;
		}
		if (gen[k] && check_page(b + off, off, c->hp, gen[k], true, &zeros)) {
			snprintf(t->msg, sizeof(t->msg),
				 "thread %d page %#zx: after reuse neither its data nor zeros",
				 t->id, off);
			return t->msg;
		}
		gen[k] = (unsigned)round + 1;
		write_page(b + off, off, c->hp, gen[k]);
		/* shared pages: fault in or release, never touched */
		if ((rnd & 3) == 0)
			hpr_release_lazy(c->r, shared_off(c, rnd % SHARED), c->hp);
		else if ((rnd & 3) == 1)
			hpr_fault_in(c->r, shared_off(c, rnd % SHARED), c->hp);
		sched_yield();
		/* faulted in and written: nothing may take it away */
		if (check_page(b + off, off, c->hp, gen[k], false, &zeros)) {
			snprintf(t->msg, sizeof(t->msg),
				 "thread %d page %#zx: lost data while faulted in", t->id, off);
			return t->msg;
		}
		/* release, whole or in two halves (the partial path) */
		if (rnd & 4) {
			rc = hpr_release_lazy(c->r, off, c->hp);
		} else {
			rc = hpr_release_lazy(c->r, off + c->hp / 2, c->hp / 2);
			if (!rc)
				rc = hpr_release_lazy(c->r, off, c->hp / 2);
		}
		if (rc) {
			snprintf(t->msg, sizeof(t->msg), "release: %s", hpr_strerror(rc));
			return t->msg;
		}
	}
	/* end with both pages in use and written */
	for (int k = 0; k < OWN; k++) {
		size_t off = own_off(c, t->id, k);

		if ((rc = hpr_fault_in(c->r, off, c->hp))) {
			snprintf(t->msg, sizeof(t->msg), "fault_in: %s", hpr_strerror(rc));
			return t->msg;
		}
		write_page(b + off, off, c->hp, 0xffff);
	}
	atomic_fetch_add(&c->zero_pages, zeros);
	return NULL;
}

static void *reclaimer(void *arg)
{
	struct ctx *c = arg;
	unsigned long n = 0;

	while (!atomic_load(&c->stop)) {
		size_t got = 0;

		hpr_reclaim(c->r, 0, &got);
		if (c->thp && (n & 1))
			/* the kernel's reclaim path: discards clean lazy-free
			 * memory, must keep what was faulted back (dirty) */
			madvise(hpr_base(c->r), hpr_size(c->r), MADV_PAGEOUT);
		n++;
		sched_yield();
	}
	atomic_store(&c->reclaims, n);
	return NULL;
}

static void race(enum hpr_backend be, const char *path, unsigned delay_ms)
{
	struct ctx c = { 0 };
	struct hpr_config cfg;
	struct thr t[NT];
	pthread_t th[NT], rt;
	struct hpr_stats st;
	struct t_smaps k;
	size_t size;
	char *b;
	int rc;

	/* MADV_PAGEOUT splits THPs in use when there is no swap (mm/vmscan.c
	 * falls back to splitting large folios add_to_swap() refused), which
	 * real pressure without swap never does; pages it split under a
	 * fault-in may stay small, so allow that: this suite is about data */
	t_config(&cfg, be, path, (NT * OWN + SHARED) * 2 * MiB, 2,
		 be == HPR_BACKEND_THP ? HPR_F_FALLBACK : 0);
	cfg.name = "t-conc-release";
	cfg.release_delay_ms = delay_ms;
	rc = hpr_create(&cfg, &c.r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	c.hp = hpr_page_size(c.r);
	c.thp = be == HPR_BACKEND_THP;
	size = hpr_size(c.r);
	b = hpr_base(c.r);

	ck_assert_int_eq(pthread_create(&rt, NULL, reclaimer, &c), 0);
	for (int i = 0; i < NT; i++) {
		t[i].c = &c;
		t[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &t[i]), 0);
	}
	for (int i = 0; i < NT; i++) {
		void *ret;

		ck_assert_int_eq(pthread_join(th[i], &ret), 0);
		ck_assert_msg(ret == NULL, "%s", (char *)ret);
	}
	atomic_store(&c.stop, true);
	ck_assert_int_eq(pthread_join(rt, NULL), 0);
	printf("%s: %d rounds, %lu reclaim passes, %lu 4 KiB pages came back as zeros\n",
	       hpr_backend_name(be), t_quick() ? ROUNDS / 10 : ROUNDS, atomic_load(&c.reclaims),
	       atomic_load(&c.zero_pages));

	/* final state: owned pages in use with their data */
	for (int i = 0; i < NT; i++)
		for (int kk = 0; kk < OWN; kk++) {
			size_t off = own_off(&c, i, kk), z = 0;

			ck_assert_msg(!check_page(b + off, off, c.hp, 0xffff, false, &z),
				      "page %#zx lost its final data", off);
		}
	ck_assert_int_eq(hpr_stats(c.r, &st), 0);
	if (delay_ms) {
		/* nothing is released any more: the workers give every held
		 * page to the kernel once its delay is over */
		for (int i = 0; i < 1000 && st.pages_held; i++) {
			usleep(10000);
			ck_assert_int_eq(hpr_stats(c.r, &st), 0);
		}
		ck_assert_msg(st.pages_held == 0, "%llu pages still held 10 s after a %u ms delay",
			      (unsigned long long)st.pages_held, delay_ms);
	}
	ck_assert_uint_le(st.pages_present + st.pages_lazy, st.pages_total);
	ck_assert_uint_ge(st.pages_present, NT * OWN);
	{
		static unsigned char vec[NT * OWN * 512];

		ck_assert_int_eq(mincore(b, NT * OWN * c.hp, vec), 0);
		for (size_t i = 0; i < NT * OWN * c.hp / PG; i++)
			ck_assert_msg(vec[i] & 1, "owned 4 KiB page %zu is not resident", i);
	}
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	/*
	 * Rss covers every present page, except that on THP a present page
	 * nobody wrote may be all zeros, and since Linux 6.12 a split of an
	 * anonymous THP (MADV_PAGEOUT splits when there is no swap) maps
	 * zero-filled 4 KiB subpages to the shared zero page, which Rss does
	 * not count; the owned pages hold data, so they always count.
	 */
	ck_assert_msg(k.rss >= (c.thp ? NT * OWN : st.pages_present) * c.hp &&
			      k.rss <= (st.pages_present + st.pages_lazy) * c.hp,
		      "Rss %zu, table: %zu present + %zu lazy pages", k.rss,
		      st.pages_present, st.pages_lazy);
	if (c.thp) {
		ck_assert_msg(k.lazyfree <= st.pages_lazy * c.hp,
			      "LazyFree %zu but only %zu pages released", k.lazyfree,
			      st.pages_lazy);
	} else {
		struct stat s;

		/* allocated blocks are exactly the present and the lazily
		 * released pages: every reclaim punched, every reuse filled */
		ck_assert_int_eq(fstat(hpr_fd(c.r), &s), 0);
		ck_assert_msg((size_t)s.st_blocks * 512 ==
				      (st.pages_present + st.pages_lazy) * c.hp,
			      "file has %zu bytes allocated, table says %zu present + %zu "
			      "lazy pages",
			      (size_t)s.st_blocks * 512, st.pages_present, st.pages_lazy);
	}
	ck_assert_int_eq(hpr_destroy(c.r), 0);
}

START_TEST(race_thp)
{
	race(HPR_BACKEND_THP, NULL, 0);
}
END_TEST

START_TEST(race_thp_held)
{
	race(HPR_BACKEND_THP, NULL, 1);
}
END_TEST

START_TEST(race_shmem)
{
	race(HPR_BACKEND_SHMEM, t_mount_tmpfs("huge=always,size=256m"), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conc_release");
	TCase *tc = tcase_create("race");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, race_thp);
	tcase_add_test(tc, race_thp_held);
	tcase_add_test(tc, race_shmem);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
