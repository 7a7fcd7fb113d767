/* SPDX-License-Identifier: MIT */
/* Smoke: each backend with HPR_F_PREFAULT is >= 95 % huge per smaps --
 * measured right after hpr_create, before anything touches the region, so
 * it is the prefault that made it so (a memset would fault pages in huge
 * on its own) -- and stays so once written. */
#include "common.h"

#include <string.h>
#include <sys/mman.h>

static void check_backend(enum hpr_backend b, const char *path)
{
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *r;

	r = t_region(b, path, 64 * MiB, 0, HPR_F_PREFAULT);
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_msg(
		(k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb) * 100 >= hpr_size(r) * 95,
		"%s: after HPR_F_PREFAULT, before any write, only %zu of %zu bytes are huge-mapped",
		hpr_backend_name(b), k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb,
		hpr_size(r));
	memset(hpr_base(r), 0x5a, hpr_size(r));
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	{
		size_t huge = k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb;

		ck_assert_msg(huge * 100 >= hpr_size(r) * 95, "%s: only %zu of %zu huge",
			      hpr_backend_name(b), huge, hpr_size(r));
		ck_assert_uint_eq(st.huge_mapped, huge);
	}
	ck_assert_int_eq(hpr_destroy(r), 0);
}

START_TEST(smoke_thp)
{
	check_backend(HPR_BACKEND_THP, NULL);
}
END_TEST

START_TEST(smoke_shmem_tmpfs)
{
	check_backend(HPR_BACKEND_SHMEM, t_mount_tmpfs("huge=always"));
}
END_TEST

START_TEST(smoke_hugetlb)
{
	t_hugetlb_pool(2048, 64);
	check_backend(HPR_BACKEND_HUGETLB, NULL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("smoke");
	TCase *tc = tcase_create("backends");

	tcase_add_test(tc, smoke_thp);
	tcase_add_test(tc, smoke_shmem_tmpfs);
	tcase_add_test(tc, smoke_hugetlb);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
