/* SPDX-License-Identifier: MIT */
/*
 * The background collapse of the THP reuse path (#19): a released page the
 * kernel reclaimed (MADV_PAGEOUT, the reclaim path memory pressure runs:
 * the clean lazily freed THP is split and discarded) comes back from
 * hpr_fault_in as base pages, and the region's workers collapse it when
 * idle, not the caller's thread. Asserted against the kernel: smaps'
 * AnonHugePages for the whole range once the queue is drained, and every
 * byte the application wrote in between still there. Also: destroy while
 * pages are queued, fork while they are queued (the child inherits no
 * queue and may use the region), HPR_F_COLLAPSE_SYNC (huge at return).
 *
 * Children report through their exit status and stderr (they are
 * grandchildren of the Check runner), under a bounded alarm().
 */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define MiB (1024UL * 1024UL)
#define PG 4096UL
/* huge pages per region; fewer in quick runs (the VM matrix's guests
 * emulate the CPU: every byte written costs there) */
#define NPAGES (t_quick() ? 2u : 8u)
#define WAIT_S 20 /* the queue is drained well within this, even loaded */

static uint64_t word(size_t i, unsigned gen)
{
	return ((uint64_t)gen << 56) ^ (i * 0x9e3779b97f4a7c15ULL) ^ 1;
}

static void fill(char *b, size_t len, unsigned gen)
{
	uint64_t *w = (uint64_t *)b;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = word(i, gen);
}

/* Each 4 KiB page is gen's data or zeros (the contract after a release);
 * the first other page's offset, or -1. */
static size_t bad_page(const char *b, size_t len, unsigned gen, size_t *zeros)
{
	const uint64_t *w = (const uint64_t *)b;

	*zeros = 0;
	for (size_t p = 0; p < len / PG; p++) {
		size_t i0 = p * PG / 8;
		bool zero = w[i0] == 0;

		*zeros += zero;
		for (size_t i = i0; i < i0 + PG / 8; i++)
			if (w[i] != (zero ? 0 : word(i, gen)))
				return p * PG;
	}
	return (size_t)-1;
}

static void need_collapse(void)
{
	struct hpr_probe_info pi;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	if (!pi.have_collapse)
		t_skip("MADV_COLLAPSE needs Linux 6.1 (this is %d.%d)", pi.kernel_major,
		       pi.kernel_minor);
}

static bool have_pagemap_scan(void)
{
	struct hpr_probe_info pi;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	return pi.have_pagemap_scan;
}

static hpr_region *mk(unsigned workers, unsigned flags)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	need_collapse();
	t_config(&c, HPR_BACKEND_THP, NULL, NPAGES * 2 * MiB, workers, HPR_F_PREFAULT | flags);
	c.name = "t-bgcollapse";
	rc = hpr_create(&c, &r);
	if (rc == -EOPNOTSUPP)
		t_skip("no THP here: %s", hpr_strerror(rc));
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	return r;
}

/* Fill with gen, release all, have the kernel take it (asserted: smaps
 * shows the huge pages gone), and fault it back in. */
static void release_reclaim_reuse(hpr_region *r, unsigned gen)
{
	char *b = hpr_base(r);
	size_t size = hpr_size(r), zeros = 0, bad;
	struct t_smaps k;

	fill(b, size, gen);
	ck_assert_int_eq(hpr_release_lazy(r, 0, size), 0);
	ck_assert_int_eq(madvise(b, size, MADV_PAGEOUT), 0);
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	ck_assert_msg(k.anon_huge < size, "MADV_PAGEOUT left all %zu bytes huge", k.anon_huge);
	ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	bad = bad_page(b, size, gen, &zeros);
	ck_assert_msg(bad == (size_t)-1, "page %#zx is neither its data nor zeros", bad);
}

/* Wait until nothing is queued and smaps says the range is all huge. */
static bool wait_huge(hpr_region *r, struct hpr_stats *st)
{
	struct t_smaps k;

	for (int i = 0; i < WAIT_S * 100; i++) {
		ck_assert_int_eq(hpr_stats(r, st), 0);
		ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
		if (!st->collapse_pending && k.anon_huge == hpr_size(r))
			return true;
		usleep(10000);
	}
	return false;
}

START_TEST(background_collapse_restores_huge)
{
	hpr_region *r = mk(2, 0);
	char *b = hpr_base(r);
	size_t size = hpr_size(r);
	struct hpr_stats st;
	struct t_smaps k;
	size_t zeros;

	for (unsigned round = 1; round <= (t_quick() ? 1u : 3u); round++) {
		uint64_t q0;

		ck_assert_int_eq(hpr_stats(r, &st), 0);
		q0 = st.collapse_queued;
		release_reclaim_reuse(r, round);
		ck_assert_int_eq(hpr_stats(r, &st), 0);
		ck_assert_msg(st.collapse_queued > q0,
			      "pages came back small but none was queued (queued %llu)",
			      (unsigned long long)st.collapse_queued);
		/* the application writes while the workers collapse */
		fill(b, size, round + 10);
		ck_assert_msg(wait_huge(r, &st),
			      "not all huge %d s after the fault-in: %llu pending, %llu failed",
			      WAIT_S, (unsigned long long)st.collapse_pending,
			      (unsigned long long)st.collapse_failed);
		ck_assert_uint_eq(st.collapse_failed, 0);
		/* before 6.7 the worker cannot tell a collapse from a page
		 * that was huge already (MADV_COLLAPSE is the check), so it
		 * counts none; smaps above is the kernel's word either way */
		if (have_pagemap_scan())
			ck_assert_uint_ge(st.collapsed_pages, 1);
		ck_assert_uint_eq(bad_page(b, size, round + 10, &zeros), (size_t)-1);
		ck_assert_uint_eq(zeros, 0);
	}
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	ck_assert_uint_eq(k.anon_huge, size);
	ck_assert_uint_eq(st.pages_present, NPAGES);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(sync_flag_huge_at_return)
{
	hpr_region *r = mk(2, HPR_F_COLLAPSE_SYNC);
	struct hpr_stats st;
	struct t_smaps k;

	release_reclaim_reuse(r, 1);
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_uint_eq(k.anon_huge, hpr_size(r));
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.collapse_queued, 0);
	ck_assert_uint_eq(st.collapse_pending, 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* Destroy right after the fault-in, pages still queued (the workers wait
 * for a quiet millisecond before they collapse): no hang, nothing left. */
START_TEST(destroy_while_queued)
{
	int maps0 = -1;

	int n = t_quick() ? 2 : 6;

	for (int i = 0; i < n; i++) {
		hpr_region *r;

		t_track_begin();
		r = mk(1 + (unsigned)(i & 1), 0);
		release_reclaim_reuse(r, (unsigned)i + 1);
		if (i == n - 1) {
			/* while a page is being collapsed, too */
			usleep(1500);
		}
		ck_assert_int_eq(hpr_destroy(r), 0);
		ck_assert_uint_eq(t_track_end(), 0);
		if (i == 1)
			maps0 = t_maps_count();
	}
	if (!T_SANITIZED)
		ck_assert_int_eq(t_maps_count(), maps0);
}
END_TEST

static void child_alarm(void)
{
	signal(SIGALRM, SIG_DFL);
	alarm(120);
}

#define C_REQ(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "child, line %d: (" #cond ") ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);                              \
			fputc('\n', stderr);                                       \
			_exit(10);                                                 \
		}                                                                  \
	} while (0)

/* Fork while pages are queued: the child inherits no queue (no worker of
 * the parent's is there) and uses the region end to end; the parent's
 * workers still collapse everything. */
START_TEST(fork_while_queued)
{
	hpr_region *r = mk(2, 0);
	char *b = hpr_base(r);
	size_t size = hpr_size(r), zeros;
	struct hpr_stats st;
	struct t_smaps k;
	int status;
	pid_t pid;

	release_reclaim_reuse(r, 1);
	fill(b, size, 2);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		struct hpr_stats cs;
		size_t z;

		child_alarm();
		C_REQ(!hpr_stats(r, &cs), "stats");
		C_REQ(cs.collapse_pending == 0, "%llu pending in the child",
		      (unsigned long long)cs.collapse_pending);
		C_REQ(cs.pages_present == NPAGES, "%zu present", cs.pages_present);
		C_REQ(bad_page(b, size, 2, &z) == (size_t)-1 && !z, "data");
		/* the child's own reuse, queue and workers */
		fill(b, size, 3);
		C_REQ(!hpr_release_lazy(r, 0, size), "release");
		C_REQ(!madvise(b, size, MADV_PAGEOUT), "pageout");
		C_REQ(!hpr_fault_in(r, 0, size), "fault_in");
		C_REQ(bad_page(b, size, 3, &z) == (size_t)-1, "data after reuse");
		fill(b, size, 4);
		C_REQ(!hpr_destroy(r), "destroy");
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	/* what the workers did while the child shared the pages may have
	 * been refused (6.1 says EINVAL for a page with a sharer's extra
	 * reference); once the queue is drained, a release and a fault-in
	 * hand any page still small to them again */
	for (int i = 0; i < WAIT_S * 100; i++) {
		ck_assert_int_eq(hpr_stats(r, &st), 0);
		if (!st.collapse_pending)
			break;
		usleep(10000);
	}
	usleep(100000); /* the page a worker may still hold */
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	if (k.anon_huge < size) {
		fill(b, size, 2);
		ck_assert_int_eq(hpr_release_lazy(r, 0, size), 0);
		ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	}
	ck_assert_msg(wait_huge(r, &st), "not all huge after the fork: %llu pending",
		      (unsigned long long)st.collapse_pending);
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	ck_assert_uint_eq(k.anon_huge, size);
	ck_assert_uint_eq(bad_page(b, size, 2, &zeros), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* Releases and fault-ins of pages the workers are collapsing, from several
 * threads, with the kernel reclaiming under them: every page is its data
 * or zeros after each fault-in, and its writer's data after it. */
struct churn {
	hpr_region *r;
	int id;
	_Atomic bool done;
	char msg[160];
};

static void *churn_loop(struct churn *c)
{
	size_t hp = hpr_page_size(c->r), off = (size_t)c->id * 2 * hp, zeros;
	char *p = (char *)hpr_base(c->r) + off;

	for (unsigned gen = 1; gen < (t_quick() ? 5u : 80u); gen++) {
		size_t bad;

		if (hpr_fault_in(c->r, off, 2 * hp)) {
			snprintf(c->msg, sizeof(c->msg), "fault_in failed");
			return c->msg;
		}
		bad = bad_page(p, 2 * hp, gen - 1, &zeros);
		if (gen > 1 && bad != (size_t)-1) {
			snprintf(c->msg, sizeof(c->msg), "thread %d gen %u: page %#zx lost", c->id,
				 gen, off + bad);
			return c->msg;
		}
		fill(p, 2 * hp, gen);
		if (bad_page(p, 2 * hp, gen, &zeros) != (size_t)-1 || zeros) {
			snprintf(c->msg, sizeof(c->msg), "thread %d: written data changed", c->id);
			return c->msg;
		}
		if (hpr_release_lazy(c->r, off, 2 * hp)) {
			snprintf(c->msg, sizeof(c->msg), "release failed");
			return c->msg;
		}
	}
	return NULL;
}

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	void *ret = churn_loop(c);

	atomic_store(&c->done, true);
	return ret;
}

START_TEST(churn_with_reclaim)
{
	hpr_region *r = mk(2, 0);
	struct churn c[4];
	pthread_t th[4];
	struct hpr_stats st;
	int n = 0, done = 0, nt = (int)(NPAGES / 2);

	for (int i = 0; i < nt; i++) {
		c[i].r = r;
		c[i].id = i;
		c[i].msg[0] = 0;
		atomic_init(&c[i].done, false);
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn_thread, &c[i]), 0);
	}
	/* the kernel's reclaim, again and again, under the threads */
	while (done < nt) {
		madvise(hpr_base(r), hpr_size(r), MADV_PAGEOUT);
		n++;
		usleep(t_quick() ? 5000 : 500);
		done = 0;
		for (int i = 0; i < nt; i++)
			done += atomic_load(&c[i].done);
	}
	for (int i = 0; i < nt; i++) {
		void *ret;

		ck_assert_int_eq(pthread_join(th[i], &ret), 0);
		ck_assert_msg(ret == NULL, "%s", (char *)ret);
	}
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	printf("churn_with_reclaim: %d pageouts, %llu queued, %llu collapsed, %llu failed\n", n,
	       (unsigned long long)st.collapse_queued, (unsigned long long)st.collapsed_pages,
	       (unsigned long long)st.collapse_failed);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conc_bgcollapse");
	TCase *tc = tcase_create("bgcollapse");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, background_collapse_restores_huge);
	tcase_add_test(tc, sync_flag_huge_at_return);
	tcase_add_test(tc, destroy_while_queued);
	tcase_add_test(tc, fork_while_queued);
	tcase_add_test(tc, churn_with_reclaim);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
