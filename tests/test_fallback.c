/* SPDX-License-Identifier: MIT */
/*
 * HPR_F_FALLBACK: without it a region that cannot be huge is refused with
 * -EOPNOTSUPP/-ENOMEM and a message naming the knob; with it the region is
 * made on base pages and its stats (and the kernel's smaps) say so.
 *
 * The first half changes the real sysfs knobs (THP enabled=never,
 * shmem_enabled=deny, a short hugetlb pool) and puts them back; the second
 * half unit-tests the same policy with OS-layer fakes (a read_file that
 * lies about THP, a madvise whose MADV_COLLAPSE fails).
 */
#include "common.h"
#include "internal.h" /* hpr__os_set, hpr__os_real, hpr__probe_reset */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REGION (32 * MiB)
#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define SHMEM_ENABLED "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

/* The bracketed word of a sysfs mode file. */
static void sysfs_mode(const char *path, char *out, size_t len)
{
	char buf[256], *a, *b;
	FILE *f = fopen(path, "re");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	a = strchr(buf, '[');
	b = a ? strchr(a, ']') : NULL;
	ck_assert_ptr_nonnull(b);
	*b = 0;
	snprintf(out, len, "%s", a + 1);
}

/*
 * Switch a system-wide knob for as short a time as possible (other users
 * of the machine see it): set, let the library re-probe, run, put back.
 * t_sysfs_set also restores it at exit should the test die in between.
 */
static char saved[64];
static const char *saved_path;

static void knob_set(const char *path, const char *val)
{
	sysfs_mode(path, saved, sizeof(saved));
	saved_path = path;
	ck_assert_int_eq(t_sysfs_set(path, val), 0);
	hpr__probe_reset();
}

static void knob_restore(void)
{
	ck_assert_int_eq(t_sysfs_set(saved_path, saved), 0);
	hpr__probe_reset();
}

static void cfg(struct hpr_config *c, enum hpr_backend b, const char *path,
		unsigned flags)
{
	t_config(c, b, path, REGION, 0, flags);
	c->name = "fallback";
}

static size_t kernel_huge(const struct t_smaps *k)
{
	return k->anon_huge + k->shmem_pmd + k->file_pmd + k->hugetlb;
}

/* Refused: err, the message names what, nothing left mapped. */
static void expect_refused(const struct hpr_config *c, int err, const char *what)
{
	hpr_region *r = NULL;
	int maps, rc;
	size_t left;

	/* the first create may start lazily built state (probe cache,
	 * glibc's cached thread stacks): measure the second */
	rc = hpr_create(c, &r);
	ck_assert_int_eq(rc, err);
	maps = t_maps_count();
	t_track_begin();
	rc = hpr_create(c, &r);
	left = t_track_end();

	ck_assert_msg(rc == err, "got %d (%s), want %d", rc, hpr_strerror(rc), err);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(hpr_strerror(rc), what), "message \"%s\" lacks \"%s\"",
		      hpr_strerror(rc), what);
	ck_assert_msg(strstr(hpr_strerror(rc), "HPR_F_FALLBACK") ||
			      strstr(hpr_strerror(rc), "nr_hugepages"),
		      "message \"%s\" does not say what to do", hpr_strerror(rc));
	ck_assert_msg(left == 0, "the library left %zu bytes mapped", left);
	ck_assert(T_SANITIZED || t_maps_count() == maps);
	printf("refused: %s\n", hpr_strerror(rc));
}

/*
 * Created with FALLBACK|PREFAULT on base pages: backend_of says want, the
 * data is there, the kernel sees no huge page and hpr_stats agrees.
 * Returns the kernel's huge bytes (0 expected by most callers).
 */
static size_t expect_small(struct hpr_config *c, enum hpr_backend want,
			   const char *label)
{
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *r;
	size_t huge;
	int rc;

	c->flags |= HPR_F_FALLBACK | HPR_F_PREFAULT;
	rc = hpr_create(c, &r);
	ck_assert_msg(rc == 0, "%s: %s", label, hpr_strerror(rc));
	ck_assert_int_eq(hpr_backend_of(r), want);
	for (size_t off = 0; off < hpr_size(r); off += 4096)
		((volatile char *)hpr_base(r))[off] = (char)(off >> 12);
	for (size_t off = 0; off < hpr_size(r); off += 4096)
		ck_assert_int_eq(((volatile char *)hpr_base(r))[off], (char)(off >> 12));
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	huge = kernel_huge(&k);
	printf("fallback %-40s backend=%s huge=%zu KiB rss=%zu KiB small=%zu KiB\n",
	       label, hpr_backend_name(st.backend), huge >> 10, (k.rss + k.hugetlb) >> 10,
	       st.small_mapped >> 10);
	ck_assert_uint_eq(st.huge_mapped, huge);
	ck_assert_uint_eq(st.resident, k.rss + k.hugetlb);
	ck_assert_uint_eq(st.small_mapped, st.resident - st.huge_mapped);
	ck_assert_uint_eq(st.resident, hpr_size(r)); /* prefaulted */
	ck_assert_int_eq(hpr_destroy(r), 0);
	return huge;
}

START_TEST(thp_never)
{
	struct hpr_config c;

	knob_set(THP_ENABLED, "never");
	cfg(&c, HPR_BACKEND_THP, NULL, 0);
	expect_refused(&c, -EOPNOTSUPP, THP_ENABLED);
	cfg(&c, HPR_BACKEND_THP, NULL, 0);
	ck_assert_uint_eq(expect_small(&c, HPR_BACKEND_THP, "thp, enabled=never"), 0);
	/* AUTO with no pool and no path ends at THP: same answer */
	ck_assert_uint_eq(t_hugetlb_pool(2048, 0), 0);
	cfg(&c, HPR_BACKEND_AUTO, NULL, 0);
	expect_refused(&c, -EOPNOTSUPP, THP_ENABLED);
	cfg(&c, HPR_BACKEND_AUTO, NULL, 0);
	ck_assert_uint_eq(expect_small(&c, HPR_BACKEND_THP, "auto, enabled=never"), 0);
	knob_restore();
}
END_TEST

START_TEST(shmem_deny)
{
	struct hpr_config c;

	knob_set(SHMEM_ENABLED, "deny");
	cfg(&c, HPR_BACKEND_SHMEM, NULL, 0);
	expect_refused(&c, -EOPNOTSUPP, "shmem_enabled");
	cfg(&c, HPR_BACKEND_SHMEM, NULL, HPR_F_SHARED);
	ck_assert_uint_eq(expect_small(&c, HPR_BACKEND_SHMEM, "shmem memfd, deny"), 0);
	/* deny covers tmpfs mounts too, whatever their huge= says */
	{
		const char *d = t_mount_tmpfs("huge=never");

		cfg(&c, HPR_BACKEND_SHMEM, d, 0);
		expect_refused(&c, -EOPNOTSUPP, "huge=");
		cfg(&c, HPR_BACKEND_SHMEM, d, 0);
		ck_assert_uint_eq(expect_small(&c, HPR_BACKEND_SHMEM,
					       "shmem tmpfs huge=never, deny"),
				  0);
		ck_assert_int_eq(t_dir_entries(d), 0);
	}
	knob_restore();
}
END_TEST

START_TEST(hugetlb_short_pool)
{
	struct hpr_config c;
	hpr_region *r;
	struct hpr_stats st;
	struct t_smaps k;

	ck_assert_uint_ge(t_hugetlb_pool(2048, 4), 4);
	ck_assert_int_eq(t_sysfs_set("/sys/kernel/mm/hugepages/hugepages-2048kB/"
				     "nr_overcommit_hugepages", "0"), 0);
	cfg(&c, HPR_BACKEND_HUGETLB, NULL, 0);
	expect_refused(&c, -ENOMEM, "nr_hugepages");

	/* degraded: private -> anonymous memory, shared -> a shmem memfd; the
	 * pool is left alone either way */
	cfg(&c, HPR_BACKEND_HUGETLB, NULL, HPR_F_FALLBACK | HPR_F_PREFAULT);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_THP);
	ck_assert_int_eq(hpr_fd(r), -1);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_int_eq(st.backend, HPR_BACKEND_THP);
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_uint_eq(k.hugetlb, 0);
	ck_assert_uint_eq(st.huge_mapped, kernel_huge(&k));
	ck_assert_uint_eq(st.resident, k.rss);
	ck_assert_uint_eq(t_hugetlb_free(2048), 4);
	printf("fallback %-40s backend=%s huge=%zu KiB\n", "hugetlb, pool 4 pages",
	       hpr_backend_name(hpr_backend_of(r)), kernel_huge(&k) >> 10);
	ck_assert_int_eq(hpr_destroy(r), 0);

	cfg(&c, HPR_BACKEND_HUGETLB, NULL, HPR_F_FALLBACK | HPR_F_PREFAULT | HPR_F_SHARED);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_SHMEM);
	ck_assert_int_ge(hpr_fd(r), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_uint_eq(k.hugetlb, 0);
	ck_assert_uint_eq(st.huge_mapped, kernel_huge(&k));
	ck_assert_uint_eq(t_hugetlb_free(2048), 4);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/*
 * HUGETLB + HPR_F_FALLBACK on a pool too short for the region: the region
 * gets THP huge pages (a private one) or a shmem memfd made huge (a shared
 * one), not base pages, and hpr_stats says it is not what was asked for.
 * The region (1 TiB, never faulted whole) is larger than any pool, so the
 * pool is only read; 32 MiB of it are faulted in and checked in smaps.
 */
static void expect_fallback_huge(unsigned flags, enum hpr_backend want, const char *label)
{
	struct hpr_config c;
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *r;
	int rc;

	cfg(&c, HPR_BACKEND_HUGETLB, NULL, flags | HPR_F_FALLBACK);
	c.size = 1024 * GiB;
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "%s: %s", label, hpr_strerror(rc));
	ck_assert_int_eq(hpr_backend_of(r), want);
	t_compact();
	ck_assert_int_eq(hpr_fault_in(r, 0, REGION), 0);
	ck_assert_int_eq(t_smaps(hpr_base(r), REGION, &k), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	printf("fallback %-40s backend=%s huge=%zu KiB of %zu KiB, fallback=%#x\n", label,
	       hpr_backend_name(st.backend), kernel_huge(&k) >> 10, (size_t)REGION >> 10,
	       st.fallback);
	/* what was delivered: huge pages, as the kernel reports them */
	ck_assert_uint_eq(k.hugetlb, 0);
	ck_assert_msg(kernel_huge(&k) > 0, "%s: the fallback region got no huge page", label);
	ck_assert_uint_eq(st.huge_mapped, kernel_huge(&k));
	/* and what was asked for */
	ck_assert_int_eq(st.requested, HPR_BACKEND_HUGETLB);
	ck_assert_uint_eq(st.fallback, HPR_FALLBACK_BACKEND);
	ck_assert_int_eq(hpr_destroy(r), 0);
}

START_TEST(hugetlb_fallback_is_huge)
{
	expect_fallback_huge(0, HPR_BACKEND_THP, "hugetlb -> thp");
	expect_fallback_huge(HPR_F_SHARED, HPR_BACKEND_SHMEM, "hugetlb shared -> shmem memfd");
}
END_TEST

/* ---- the same policy on fakes ---- */

static struct hpr_os_ops fake;
static _Atomic unsigned collapse_calls;

static ssize_t read_thp_never(const char *path, char *buf, size_t len)
{
	if (!strcmp(path, THP_ENABLED)) {
		snprintf(buf, len, "always madvise [never]\n");
		return (ssize_t)strlen(buf);
	}
	if (strstr(path, "transparent_hugepage/hugepages-") && strstr(path, "/enabled")) {
		snprintf(buf, len, "always [inherit] madvise never\n");
		return (ssize_t)strlen(buf);
	}
	return hpr__os_real.read_file(path, buf, len);
}

static ssize_t read_mthp_never(const char *path, char *buf, size_t len)
{
	/* global madvise, but the PMD size switched off (mTHP, 6.8+) */
	if (!strcmp(path, THP_ENABLED)) {
		snprintf(buf, len, "always [madvise] never\n");
		return (ssize_t)strlen(buf);
	}
	if (strstr(path, "transparent_hugepage/hugepages-") && strstr(path, "/enabled")) {
		snprintf(buf, len, "always inherit madvise [never]\n");
		return (ssize_t)strlen(buf);
	}
	return hpr__os_real.read_file(path, buf, len);
}

static int madvise_no_collapse(void *addr, size_t len, int advice)
{
	if (advice == MADV_COLLAPSE && len) {
		atomic_fetch_add(&collapse_calls, 1);
		return -EINVAL;
	}
	return hpr__os_real.madvise(addr, len, advice);
}

static void fakes_on(void)
{
	fake = hpr__os_real;
	atomic_store(&collapse_calls, 0);
}

static void fakes_apply(void)
{
	hpr__os_set(&fake);
	hpr__probe_reset();
}

static void fakes_off(void)
{
	hpr__os_set(NULL);
	hpr__probe_reset();
}

START_TEST(fake_thp_never)
{
	struct hpr_config c;
	struct hpr_probe_info pi;

	fakes_on();
	fake.read_file = read_thp_never;
	fakes_apply();
	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_int_eq(pi.thp_enabled, HPR_THP_NEVER);
	cfg(&c, HPR_BACKEND_THP, NULL, 0);
	expect_refused(&c, -EOPNOTSUPP, THP_ENABLED);
	cfg(&c, HPR_BACKEND_THP, NULL, 0);
	expect_small(&c, HPR_BACKEND_THP, "thp, fake enabled=never");
	/* HUGETLB on a short pool with THP off: base pages, and stats say
	 * both what changed and that the pages are base pages */
	{
		struct hpr_stats st;
		hpr_region *r;

		cfg(&c, HPR_BACKEND_HUGETLB, NULL, HPR_F_FALLBACK);
		c.size = 1024 * GiB;
		ck_assert_int_eq(hpr_create(&c, &r), 0);
		ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_THP);
		ck_assert_int_eq(hpr_stats(r, &st), 0);
		ck_assert_uint_eq(st.fallback, HPR_FALLBACK_BACKEND | HPR_FALLBACK_BASE_PAGES);
		ck_assert_int_eq(hpr_destroy(r), 0);
		/* a region made as asked reports no fallback */
		cfg(&c, HPR_BACKEND_THP, NULL, 0);
		fakes_off();
		ck_assert_int_eq(hpr_create(&c, &r), 0);
		ck_assert_int_eq(hpr_stats(r, &st), 0);
		ck_assert_int_eq(st.requested, HPR_BACKEND_THP);
		ck_assert_uint_eq(st.fallback, 0);
		ck_assert_int_eq(hpr_destroy(r), 0);
	}
	/* the real kernel again: THP is allowed */
	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_int_ne(pi.thp_enabled, HPR_THP_NEVER);
	cfg(&c, HPR_BACKEND_THP, NULL, 0);
	{
		hpr_region *r;

		ck_assert_int_eq(hpr_create(&c, &r), 0);
		ck_assert_int_eq(hpr_destroy(r), 0);
	}
}
END_TEST

START_TEST(fake_mthp_never)
{
	struct hpr_config c;

	fakes_on();
	fake.read_file = read_mthp_never;
	fakes_apply();
	cfg(&c, HPR_BACKEND_THP, NULL, 0);
	expect_refused(&c, -EOPNOTSUPP, "never");
	fakes_off();
}
END_TEST

START_TEST(fake_collapse_fails)
{
	const char *d = t_mount_tmpfs("huge=never");
	struct hpr_config c;
	hpr_region *r = NULL;
	int maps, rc;

	fakes_on();
	fake.madvise = madvise_no_collapse;
	fakes_apply();

	/* huge=never: faults give small pages, collapse is the only way, and
	 * it fails: the prefault inside create reports it */
	cfg(&c, HPR_BACKEND_SHMEM, d, HPR_F_PREFAULT);
	/* the first create starts worker threads: glibc keeps their stacks
	 * cached after join, so measure the second (their malloc arena is
	 * the one t_run_suite leaves glibc, see t_maps_count) */
	ck_assert_int_eq(hpr_create(&c, &r), -EOPNOTSUPP);
	maps = t_maps_count();
	t_track_begin();
	rc = hpr_create(&c, &r);
	ck_assert_uint_eq(t_track_end(), 0);
	ck_assert_int_eq(rc, -EOPNOTSUPP);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(hpr_strerror(rc), "MADV_COLLAPSE") &&
			      strstr(hpr_strerror(rc), "HPR_F_FALLBACK"),
		      "\"%s\"", hpr_strerror(rc));
	ck_assert_uint_gt(atomic_load(&collapse_calls), 0);
	ck_assert(T_SANITIZED || t_maps_count() == maps);
	ck_assert_int_eq(t_dir_entries(d), 0);
	printf("refused: %s\n", hpr_strerror(rc));

	/* with FALLBACK the pages stay small and are counted as such */
	cfg(&c, HPR_BACKEND_SHMEM, d, 0);
	ck_assert_uint_eq(expect_small(&c, HPR_BACKEND_SHMEM,
				       "shmem huge=never, fake collapse fails"),
			  0);
	ck_assert_uint_ge(atomic_load(&collapse_calls), REGION / (2 * MiB));

	/* without PREFAULT the create succeeds and hpr_fault_in says it */
	cfg(&c, HPR_BACKEND_SHMEM, d, 0);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	rc = hpr_fault_in(r, 0, 4 * MiB);
	ck_assert_int_eq(rc, -EOPNOTSUPP);
	{
		size_t off = 1;

		ck_assert_int_eq(hpr_fault_error(r, &off), -EOPNOTSUPP);
		ck_assert_uint_eq(off, 0);
	}
	ck_assert_int_eq(hpr_destroy(r), 0);
	fakes_off();
}
END_TEST

/*
 * MADV_COLLAPSE's EAGAIN means "busy for now". A page busy for longer than
 * a few back-to-back tries (a forked child copying the same THP on write,
 * preempted on a loaded machine: test_conc_fork failed so about once in 15
 * runs) is waited for, within a bound; a page busy for good is reported as
 * busy, by hpr_fault_in and by hpr_collapse.
 */
static _Atomic int busy_left;

static int madvise_busy_collapse(void *addr, size_t len, int advice)
{
	if (advice == MADV_COLLAPSE && len) {
		atomic_fetch_add(&collapse_calls, 1);
		if (atomic_fetch_sub(&busy_left, 1) > 0)
			return -EAGAIN;
	}
	return hpr__os_real.madvise(addr, len, advice);
}

START_TEST(fake_collapse_busy)
{
	const char *d = t_mount_tmpfs("huge=never");
	struct hpr_config c;
	hpr_region *r = NULL;
	struct t_smaps k;
	unsigned calls;
	int rc;

	fakes_on();
	fake.madvise = madvise_busy_collapse;
	fakes_apply();
	/* huge=never: faults give small pages and collapse makes them huge */
	cfg(&c, HPR_BACKEND_SHMEM, d, 0);
	ck_assert_int_eq(hpr_create(&c, &r), 0);

	/* busy for 10 tries, more than the back-to-back ones, then free */
	atomic_store(&busy_left, 10);
	atomic_store(&collapse_calls, 0);
	ck_assert_int_eq(hpr_fault_in(r, 0, 2 * MiB), 0);
	ck_assert_uint_eq(atomic_load(&collapse_calls), 11);
	ck_assert_int_eq(t_smaps(hpr_base(r), 2 * MiB, &k), 0);
	ck_assert_uint_eq(k.shmem_pmd, 2 * MiB); /* the kernel's word: huge */

	/* busy for good: given up after a bounded number of tries */
	atomic_store(&busy_left, INT_MAX);
	atomic_store(&collapse_calls, 0);
	rc = hpr_fault_in(r, 2 * MiB, 2 * MiB);
	calls = atomic_load(&collapse_calls);
	ck_assert_int_eq(rc, -EOPNOTSUPP);
	ck_assert_msg(strstr(hpr_strerror(rc), "busy") && strstr(hpr_strerror(rc), "try again"),
		      "\"%s\"", hpr_strerror(rc));
	ck_assert_msg(calls > 11 && calls < 100, "%u tries", calls);
	printf("busy for good, after %u tries: %s\n", calls, hpr_strerror(rc));
	rc = hpr_collapse(r, 2 * MiB, 2 * MiB, NULL);
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_msg(strstr(hpr_strerror(rc), "busy"), "\"%s\"", hpr_strerror(rc));
	ck_assert_int_eq(hpr_destroy(r), 0);
	fakes_off();
}
END_TEST

/*
 * Each test in its own TCase whose unchecked fixture (run in the suite's
 * main process, so it runs even when the forked test dies on an assertion)
 * records the THP and shmem modes before and writes them back after: a
 * failing test cannot leave "never"/"deny" behind for the next one.
 */
static char orig_thp[64], orig_shmem[64];

static void mode_now(const char *path, char *out, size_t len)
{
	char buf[256] = "", *a, *b;
	FILE *f = fopen(path, "re");

	out[0] = 0;
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f) && (a = strchr(buf, '[')) && (b = strchr(a, ']'))) {
		*b = 0;
		snprintf(out, len, "%s", a + 1);
	}
	fclose(f);
}

static void knobs_save(void)
{
	mode_now(THP_ENABLED, orig_thp, sizeof(orig_thp));
	mode_now(SHMEM_ENABLED, orig_shmem, sizeof(orig_shmem));
}

static void knobs_put_back(void)
{
	if (orig_thp[0])
		t_sysfs_set(THP_ENABLED, orig_thp);
	if (orig_shmem[0])
		t_sysfs_set(SHMEM_ENABLED, orig_shmem);
}

static Suite *suite(void)
{
	const struct {
		const char *name;
		const TTest *test;
	} tests[] = {
		{ "thp_never", thp_never },
		{ "shmem_deny", shmem_deny },
		{ "hugetlb_short_pool", hugetlb_short_pool },
		{ "hugetlb_fallback_is_huge", hugetlb_fallback_is_huge },
		{ "fake_thp_never", fake_thp_never },
		{ "fake_mthp_never", fake_mthp_never },
		{ "fake_collapse_fails", fake_collapse_fails },
		{ "fake_collapse_busy", fake_collapse_busy },
	};
	Suite *s = suite_create("fallback");

	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = tcase_create(tests[i].name);

		tcase_add_unchecked_fixture(tc, knobs_save, knobs_put_back);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
