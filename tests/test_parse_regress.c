/* SPDX-License-Identifier: MIT */
/* Regressions for src/parse.c beyond tests/test_parse.c: the inputs the
 * fuzzers (tests/fuzz/) found, and the mount root field hpr uses for
 * cgroup paths. */
#include "common.h"
#include "parse.h"

#include <errno.h>
#include <string.h>

#define S(x) x, sizeof(x) - 1

START_TEST(smaps_bad)
{
	struct hpr__smaps_sum s;

	/* found by fuzz_smaps: overflowed the conversion to bytes (UB) */
	ck_assert_int_eq(hpr__smaps_parse(S("0-1000 rw-p 0 0:0 0\nRss: 9223372036854775807 kB\n"),
					  0, 0x1000, &s),
			 -EINVAL);
	/* found by fuzz_smaps: an inverted window wrapped the overlap */
	ck_assert_int_eq(hpr__smaps_parse(S("10-7f0000400000 rw-p 0 0:0 0\nRss: 4096 kB\n"), 0x57,
					  0x14, &s),
			 0);
	ck_assert_uint_eq(s.vmas, 0);
	ck_assert_uint_eq(s.rss, 0);
	ck_assert_int_eq(hpr__smaps_parse(S("1000-0 rw-p 0 0:0 0\n"), 0, ~(uintptr_t)0, &s),
			 -EINVAL);
	ck_assert_int_eq(hpr__smaps_parse(S("12345678901234567890-1 r\n"), 0, 1, &s), -EINVAL);
	ck_assert_int_eq(hpr__smaps_parse(S("0-1000 rw-p 0 0:0 0\nRss: lots\n"), 0, 0x1000, &s),
			 -EINVAL);
}
END_TEST

START_TEST(mountinfo)
{
	static const char in[] =
		"24 23 0:22 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683620k\n"
		"612 611 0:64 /sub /mnt/huge\\040dir rw,nosuid shared:1 - tmpfs hpr-tmpfs "
		"rw,size=1048576k,mode=700,huge=always\n"
		"613 611 0:65 / /mnt/htlb rw - hugetlbfs none rw,pagesize=2M\n";
	struct hpr__mount m;
	char v[32];
	uint64_t b;

	ck_assert_int_eq(hpr__mountinfo_find(S(in), 0, 64, "/mnt/huge dir/x", &m), 0);
	ck_assert_str_eq(m.mnt_point, "/mnt/huge dir");
	ck_assert_str_eq(m.root, "/sub");
	ck_assert_str_eq(m.fstype, "tmpfs");
	ck_assert_int_eq(hpr__opt_get(m.super_opts, "huge", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "always");
	ck_assert_int_eq(hpr__opt_get(m.super_opts, "rw", v, sizeof(v)), 0);
	ck_assert_int_eq(hpr__opt_get(m.super_opts, "hug", v, sizeof(v)), -ENOENT);
	ck_assert_int_eq(hpr__opt_get(m.super_opts, "size", v, sizeof(v)), 1);
	ck_assert_int_eq(hpr__parse_size(v, &b), 0);
	ck_assert_uint_eq(b, GiB);
	ck_assert_int_eq(hpr__mountinfo_find(S(in), 0, 65, NULL, &m), 0);
	ck_assert_str_eq(m.fstype, "hugetlbfs");
	ck_assert_int_eq(hpr__mountinfo_find(S(in), 0, 99, NULL, &m), -ENOENT);
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 0:22 / /x rw - tmpfs"), &m), -EINVAL);
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 x:22 / /x rw - tmpfs t rw"), &m), -EINVAL);
}
END_TEST

START_TEST(sizes)
{
	uint64_t b;

	ck_assert_int_eq(hpr__parse_size("2M", &b), 0);
	ck_assert_uint_eq(b, 2 * MiB);
	ck_assert_int_eq(hpr__parse_size("1GiB", &b), 0);
	ck_assert_uint_eq(b, GiB);
	ck_assert_int_eq(hpr__parse_size("2048kB", &b), 0);
	ck_assert_uint_eq(b, 2 * MiB);
	ck_assert_int_eq(hpr__parse_size("4096", &b), 0);
	ck_assert_uint_eq(b, 4096);
	/* found while fuzzing: junk after the unit used to be accepted */
	ck_assert_int_eq(hpr__parse_size("2Mix", &b), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("2MBB", &b), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("2X", &b), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("", &b), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("99999999999T", &b), -EINVAL); /* overflows */
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("parse_regress");
	TCase *tc = tcase_create("regress");

	tcase_add_test(tc, smaps_bad);
	tcase_add_test(tc, mountinfo);
	tcase_add_test(tc, sizes);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, 0)
