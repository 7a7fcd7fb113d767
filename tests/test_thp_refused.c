/* SPDX-License-Identifier: MIT */
/*
 * THP the kernel refuses: a process under PR_SET_THP_DISABLE gets base
 * pages from every fault and MADV_COLLAPSE fails. Without HPR_F_FALLBACK a
 * THP region must then fail with -EOPNOTSUPP and leave nothing mapped; with
 * it the region is created and smaps and hpr_stats say it is small.
 * This holds on every kernel the library supports: on 6.7+ the fault path
 * sees the small page with PAGEMAP_SCAN, on 6.1-6.6 through MADV_COLLAPSE's
 * answer (the VM matrix runs this suite on Debian's 6.1).
 */
#include "common.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

#define SIZE (16 * MiB)

static void thp_disable(void)
{
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		t_skip("PR_SET_THP_DISABLE: %s", strerror(errno));
}

static void config(struct hpr_config *c, unsigned flags)
{
	t_config(c, HPR_BACKEND_THP, NULL, SIZE, 0, flags);
}

START_TEST(prefault_without_fallback_fails)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int maps, rc;

	thp_disable();
	/* warm up: glibc keeps the stacks of joined worker threads mapped
	 * for reuse, which is not the region's leftovers */
	config(&c, HPR_F_PREFAULT | HPR_F_FALLBACK);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
	r = NULL;
	config(&c, HPR_F_PREFAULT);
	maps = t_maps_count();
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == -EOPNOTSUPP, "rc %d (%s)", rc, hpr_strerror(rc));
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(hpr_strerror(rc), "HPR_F_FALLBACK"), "message: %s",
		      hpr_strerror(rc));
	ck_assert_int_eq(t_maps_count(), maps);
}
END_TEST

START_TEST(fault_in_without_fallback_fails)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	size_t off = 0;
	int rc;

	config(&c, 0);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	thp_disable(); /* after create: only the faults see it */
	rc = hpr_fault_in(r, 0, hpr_size(r));
	ck_assert_msg(rc == -EOPNOTSUPP, "rc %d (%s)", rc, hpr_strerror(rc));
	ck_assert_int_eq(hpr_fault_error(r, &off), -EOPNOTSUPP);
	ck_assert_uint_lt(off, hpr_size(r));
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(fallback_gives_small_pages_and_says_so)
{
	struct hpr_config c;
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *r = NULL;

	thp_disable();
	config(&c, HPR_F_PREFAULT | HPR_F_FALLBACK);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	memset(hpr_base(r), 0x11, hpr_size(r));
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_uint_eq(k.anon_huge, 0);
	ck_assert_uint_eq(k.rss, hpr_size(r));
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.huge_mapped, 0);
	ck_assert_uint_eq(st.small_mapped, hpr_size(r));
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("thp_refused");
	TCase *tc = tcase_create("thp_disable");

	tcase_add_test(tc, prefault_without_fallback_fails);
	tcase_add_test(tc, fault_in_without_fallback_fails);
	tcase_add_test(tc, fallback_gives_small_pages_and_says_so);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
