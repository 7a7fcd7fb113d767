/* SPDX-License-Identifier: MIT */
/*
 * The kernel-text parsers of src/parse.c on fixed inputs: sysfs mode
 * brackets, decimal numbers, smaps (including VMAs that only partly overlap
 * the range), meminfo, mountinfo (octal escapes, optional fields), mount
 * option lists and sizes. Malformed input must be -EINVAL, never a guess.
 */
#include "common.h"
#include "parse.h"

#include <errno.h>
#include <string.h>

#define S(lit) (lit), (sizeof(lit) - 1)

static const char *const thp[] = { "always", "madvise", "never", "defer",
				   "defer+madvise" };
static const char *const shm[] = { "always", "within_size", "advise",
				   "never", "deny", "force" };

START_TEST(sysfs_mode)
{
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("always [madvise] never\n"), thp, 3), 1);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("[always] madvise never"), thp, 3), 0);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("always madvise [never]\n"), thp, 3), 2);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("always defer [defer+madvise] madvise never"),
					       thp, 5), 4);
	ck_assert_int_eq(hpr__parse_sysfs_mode(
				 S("always within_size advise [never] deny force\n"), shm, 6),
			 3);
	ck_assert_int_eq(hpr__parse_sysfs_mode(
				 S("always within_size advise never [deny] force\n"), shm, 6),
			 4);
	/* malformed or unknown: -EINVAL, not a guess */
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("always madvise never"), thp, 3), -EINVAL);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("always [madvise never"), thp, 3), -EINVAL);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("[]"), thp, 3), -EINVAL);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("[sometimes]"), thp, 3), -EINVAL);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("[madvis]"), thp, 3), -EINVAL);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("[madvisee]"), thp, 3), -EINVAL);
	ck_assert_int_eq(hpr__parse_sysfs_mode(S("[defer]"), thp, 3), -EINVAL); /* not in first 3 */
	ck_assert_int_eq(hpr__parse_sysfs_mode(S(""), thp, 3), -EINVAL);
	/* len is honoured: the ']' lies beyond it */
	ck_assert_int_eq(hpr__parse_sysfs_mode("always [madvise] never", 14, thp, 3), -EINVAL);
	/* an embedded NUL ends the text */
	ck_assert_int_eq(hpr__parse_sysfs_mode("always\0[madvise]", 16, thp, 3), -EINVAL);
}
END_TEST

START_TEST(parse_ulong)
{
	unsigned long v = 99;

	ck_assert_int_eq(hpr__parse_ulong(S("123\n"), &v), 0);
	ck_assert_uint_eq(v, 123);
	ck_assert_int_eq(hpr__parse_ulong(S("   42 kB"), &v), 0);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(hpr__parse_ulong(S("0"), &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(hpr__parse_ulong(S("18446744073709551615"), &v), 0);
	ck_assert_uint_eq(v, 18446744073709551615UL);
	v = 7;
	ck_assert_int_eq(hpr__parse_ulong(S("18446744073709551616"), &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_ulong(S("abc"), &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_ulong(S("-1"), &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_ulong(S(""), &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_ulong(S("   "), &v), -EINVAL);
	ck_assert_uint_eq(v, 7); /* untouched on failure */
	ck_assert_int_eq(hpr__parse_ulong("12345", 2, &v), 0);
	ck_assert_uint_eq(v, 12);
}
END_TEST

/* Three VMAs: [0x10000000, 0x10400000) fully inside the range, the next
 * half inside, a third outside. */
static const char smaps_text[] =
	"10000000-10400000 rw-p 00000000 00:00 0 \n"
	"Size:               4096 kB\n"
	"KernelPageSize:        4 kB\n"
	"Rss:                4096 kB\n"
	"AnonHugePages:      4096 kB\n"
	"ShmemPmdMapped:        0 kB\n"
	"FilePmdMapped:         0 kB\n"
	"Shared_Hugetlb:        0 kB\n"
	"Private_Hugetlb:       0 kB\n"
	"LazyFree:           2048 kB\n"
	"Locked:                0 kB\n"
	"Swap:                  0 kB\n"
	"THPeligible:    1\n"
	"VmFlags: rd wr mr mw me ac hg\n"
	"10400000-10800000 rw-s 00000000 00:2d 1234   /memfd:hpr:x (deleted)\n"
	"Size:               4096 kB\n"
	"KernelPageSize:     2048 kB\n"
	"Rss:                   0 kB\n"
	"Shared_Hugetlb:     4096 kB\n"
	"Private_Hugetlb:    2048 kB\n"
	"THPeligible:    0\n"
	"VmFlags: rd wr sh mr mw me ms de ht\n"
	"7fff0000-7fff4000 rw-p 00000000 00:00 0    [stack]\n"
	"Size:                 16 kB\n"
	"Rss:                  16 kB\n"
	"AnonHugePages:      9999 kB\n"
	"ShmemPmdMapped:     9999 kB";

START_TEST(smaps)
{
	struct hpr__smaps_sum s;

	/* whole first VMA only */
	ck_assert_int_eq(hpr__smaps_parse(S(smaps_text), 0x10000000, 0x10400000, &s), 0);
	ck_assert_uint_eq(s.vmas, 1);
	ck_assert_uint_eq(s.size, 4 * MiB);
	ck_assert_uint_eq(s.rss, 4 * MiB);
	ck_assert_uint_eq(s.anon_huge, 4 * MiB);
	ck_assert_uint_eq(s.lazyfree, 2 * MiB);
	ck_assert_uint_eq(s.hugetlb, 0);
	ck_assert_uint_eq(s.kernel_page_size, 4096);
	ck_assert_int_eq(s.thp_eligible, 1);

	/* first VMA plus the first half of the second: its fields count
	 * in proportion (smaps has nothing finer) */
	ck_assert_int_eq(hpr__smaps_parse(S(smaps_text), 0x10000000, 0x10600000, &s), 0);
	ck_assert_uint_eq(s.vmas, 2);
	ck_assert_uint_eq(s.size, 4 * MiB + 2 * MiB);
	ck_assert_uint_eq(s.hugetlb, (4 + 2) * MiB / 2); /* shared + private, halved */
	ck_assert_uint_eq(s.kernel_page_size, 2 * MiB);
	ck_assert_int_eq(s.thp_eligible, 0); /* of the last VMA, as the page size */

	/* a range inside one VMA */
	ck_assert_int_eq(hpr__smaps_parse(S(smaps_text), 0x10100000, 0x10200000, &s), 0);
	ck_assert_uint_eq(s.vmas, 1);
	ck_assert_uint_eq(s.size, 1 * MiB);
	ck_assert_uint_eq(s.anon_huge, 1 * MiB);

	/* touching ends do not overlap; the last field has no newline */
	ck_assert_int_eq(hpr__smaps_parse(S(smaps_text), 0x10800000, 0x7fff0000, &s), 0);
	ck_assert_uint_eq(s.vmas, 0);
	ck_assert_uint_eq(s.size, 0);
	ck_assert_int_eq(hpr__smaps_parse(S(smaps_text), 0x7fff0000, 0x7fff4000, &s), 0);
	ck_assert_uint_eq(s.vmas, 1);
	ck_assert_uint_eq(s.shmem_pmd, 9999 * 1024UL);
	ck_assert_int_eq(s.thp_eligible, -1); /* not reported */

	/* streaming a line at a time gives the same sums */
	{
		struct hpr__smaps_parser p;
		const char *l = smaps_text;

		hpr__smaps_init(&p, 0x10000000, 0x10600000);
		while (*l) {
			const char *e = strchr(l, '\n');
			size_t n = e ? (size_t)(e - l) : strlen(l);

			ck_assert_int_eq(hpr__smaps_line(&p, l, n), 0);
			l += n + (e != NULL);
		}
		ck_assert_uint_eq(p.sum.size, 6 * MiB);
	}
}
END_TEST

START_TEST(smaps_malformed)
{
	struct hpr__smaps_sum s;
	struct hpr__smaps_parser p;

	ck_assert_int_eq(hpr__smaps_parse(S("10000000 rw-p 0 00:00 0\n"), 0, ~0UL, &s),
			 -EINVAL);
	ck_assert_int_eq(hpr__smaps_parse(S("10000000-\n"), 0, ~0UL, &s), -EINVAL);
	ck_assert_int_eq(hpr__smaps_parse(S("20000000-10000000 rw-p\n"), 0, ~0UL, &s),
			 -EINVAL);
	ck_assert_int_eq(hpr__smaps_parse(S("1-2 r\nRss: lots kB\n"), 0, ~0UL, &s), -EINVAL);
	ck_assert_int_eq(hpr__smaps_parse(S("fffffffffffffffff-1 rw-p\n"), 0, ~0UL, &s),
			 -EINVAL);
	/* fields of a VMA outside the range are not even parsed */
	ck_assert_int_eq(hpr__smaps_parse(S("1000-2000 r\nRss: lots kB\n"), 0x5000, 0x6000,
					  &s),
			 0);
	/* an empty line and unknown fields are fine */
	hpr__smaps_init(&p, 0, ~0UL);
	ck_assert_int_eq(hpr__smaps_line(&p, "", 0), 0);
	ck_assert_int_eq(hpr__smaps_line(&p, S("1000-2000 r")), 0);
	ck_assert_int_eq(hpr__smaps_line(&p, S("THPeligible:    1")), 0);
	ck_assert_int_eq(hpr__smaps_line(&p, S("Rss:")), -EINVAL);
}
END_TEST

static const char meminfo_text[] = "MemTotal:       24683620 kB\n"
				   "HugePages_Total:      64\n"
				   "HugePages_Free:       12\n"
				   "HugePages_Rsvd:        3\n"
				   "Hugepagesize:       2048 kB\n"
				   "Hugetlb:          131072 kB\n"
				   "Broken:           lots\n";

START_TEST(meminfo)
{
	unsigned long long v = 0;

	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "HugePages_Free", &v), 0);
	ck_assert_uint_eq(v, 12);
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "HugePages_Total", &v), 0);
	ck_assert_uint_eq(v, 64);
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "Hugetlb", &v), 0);
	ck_assert_uint_eq(v, 131072);
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "MemTotal", &v), 0);
	ck_assert_uint_eq(v, 24683620);
	/* a prefix of a key is not that key */
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "HugePages", &v), -ENOENT);
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "Hugepage", &v), -ENOENT);
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "HugePages_Surp", &v), -ENOENT);
	ck_assert_int_eq(hpr__meminfo_get(S(meminfo_text), "Broken", &v), -EINVAL);
	ck_assert_int_eq(hpr__meminfo_get(S(""), "MemTotal", &v), -ENOENT);
	/* len cuts the text: the key after the cut is not seen */
	ck_assert_int_eq(hpr__meminfo_get(meminfo_text, 28, "HugePages_Total", &v), -ENOENT);
}
END_TEST

START_TEST(mountinfo_line)
{
	struct hpr__mount m;

	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 0:22 / /dev/shm rw,relatime - tmpfs "
					       "tmpfs rw,size=24683620k"),
					     &m),
			 0);
	ck_assert_uint_eq(m.major, 0);
	ck_assert_uint_eq(m.minor, 22);
	ck_assert_str_eq(m.mnt_point, "/dev/shm");
	ck_assert_str_eq(m.mnt_opts, "rw,relatime");
	ck_assert_str_eq(m.fstype, "tmpfs");
	ck_assert_str_eq(m.source, "tmpfs");
	ck_assert_str_eq(m.super_opts, "rw,size=24683620k");

	/* optional fields, an octal-escaped space and a backslash */
	ck_assert_int_eq(hpr__mountinfo_line(
				 S("100 25 259:3 /sub /mnt/with\\040space\\134x rw,relatime "
				   "shared:5 master:3 propagate_from:2 - tmpfs none "
				   "rw,size=1048576k,huge=always"),
				 &m),
			 0);
	ck_assert_uint_eq(m.major, 259);
	ck_assert_uint_eq(m.minor, 3);
	ck_assert_str_eq(m.mnt_point, "/mnt/with space\\x");
	ck_assert_str_eq(m.fstype, "tmpfs");
	ck_assert_str_eq(m.super_opts, "rw,size=1048576k,huge=always");

	/* hugetlbfs, no optional fields, a '\' that is not an escape */
	ck_assert_int_eq(hpr__mountinfo_line(S("7 1 0:50 / /h\\9x rw - hugetlbfs none "
					       "rw,pagesize=2M"),
					     &m),
			 0);
	ck_assert_str_eq(m.mnt_point, "/h\\9x");
	ck_assert_str_eq(m.super_opts, "rw,pagesize=2M");

	/* malformed */
	ck_assert_int_eq(hpr__mountinfo_line(S(""), &m), -EINVAL);
	ck_assert_int_eq(hpr__mountinfo_line(S("garbage"), &m), -EINVAL);
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 022 / /x rw - tmpfs tmpfs rw"), &m),
			 -EINVAL);
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 :22 / /x rw - tmpfs tmpfs rw"), &m),
			 -EINVAL);
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 0:x / /x rw - tmpfs tmpfs rw"), &m),
			 -EINVAL);
	/* no "-" separator */
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 0:22 / /x rw tmpfs tmpfs rw"), &m),
			 -EINVAL);
	/* cut before the super options */
	ck_assert_int_eq(hpr__mountinfo_line(S("24 23 0:22 / /x rw - tmpfs tmpfs"), &m),
			 -EINVAL);
	/* a mount point longer than the struct holds is refused, not cut */
	{
		char line[600];

		snprintf(line, sizeof(line), "1 1 0:1 / /%0400d rw - tmpfs t rw", 0);
		ck_assert_int_eq(hpr__mountinfo_line(line, strlen(line), &m), -EINVAL);
	}
}
END_TEST

static const char mountinfo_text[] =
	"21 26 0:20 / /proc rw,relatime - proc proc rw\n"
	"this line is broken\n"
	"40 26 0:40 / /mnt rw - tmpfs none rw,huge=never\n"
	"41 40 0:41 / /mnt/huge rw - tmpfs none rw,huge=always\n"
	"42 40 0:41 /sub /mnt/other rw - tmpfs none rw,huge=always\n"
	"43 41 0:41 / /mnt/huge rw - tmpfs none rw,huge=within_size\n"
	"44 26 0:50 / /dev/hugepages rw - hugetlbfs none rw,pagesize=2M";

START_TEST(mountinfo_find)
{
	struct hpr__mount m;

	ck_assert_int_eq(hpr__mountinfo_find(S(mountinfo_text), 0, 40, "/mnt/x", &m), 0);
	ck_assert_str_eq(m.mnt_point, "/mnt");
	/* same device mounted twice: the mount point that prefixes the path,
	 * and the later of two mounts on one point (it hides the first) */
	ck_assert_int_eq(hpr__mountinfo_find(S(mountinfo_text), 0, 41, "/mnt/huge/d", &m), 0);
	ck_assert_str_eq(m.mnt_point, "/mnt/huge");
	ck_assert_str_eq(m.super_opts, "rw,huge=within_size");
	ck_assert_int_eq(hpr__mountinfo_find(S(mountinfo_text), 0, 41, "/mnt/other", &m), 0);
	ck_assert_str_eq(m.mnt_point, "/mnt/other");
	/* "/mnt/hugeX" is not under "/mnt/huge" */
	ck_assert_int_eq(hpr__mountinfo_find(S(mountinfo_text), 0, 41, "/mnt/other/a", &m), 0);
	ck_assert_str_eq(m.mnt_point, "/mnt/other");
	/* last line without a newline */
	ck_assert_int_eq(hpr__mountinfo_find(S(mountinfo_text), 0, 50, NULL, &m), 0);
	ck_assert_str_eq(m.fstype, "hugetlbfs");
	ck_assert_int_eq(hpr__mountinfo_find(S(mountinfo_text), 0, 99, "/", &m), -ENOENT);
	ck_assert_int_eq(hpr__mountinfo_find(S(""), 0, 20, "/", &m), -ENOENT);
}
END_TEST

START_TEST(opt_get)
{
	char v[16];

	ck_assert_int_eq(hpr__opt_get("rw,size=1g,huge=always", "huge", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "always");
	ck_assert_int_eq(hpr__opt_get("rw,size=1g,huge=always", "size", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "1g");
	ck_assert_int_eq(hpr__opt_get("rw,size=1g,huge=always", "rw", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "");
	ck_assert_int_eq(hpr__opt_get("rw,size=1g", "huge", v, sizeof(v)), -ENOENT);
	/* keys match whole, not by prefix */
	ck_assert_int_eq(hpr__opt_get("rw,hugepages=1,xhuge=always", "huge", v, sizeof(v)),
			 -ENOENT);
	ck_assert_int_eq(hpr__opt_get("", "huge", v, sizeof(v)), -ENOENT);
	ck_assert_int_eq(hpr__opt_get("huge=", "huge", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "");
	/* a value longer than the buffer is cut, NUL-terminated */
	ck_assert_int_eq(hpr__opt_get("huge=within_size_and_more", "huge", v, 8), 1);
	ck_assert_str_eq(v, "within_");
}
END_TEST

START_TEST(parse_size)
{
	uint64_t v = 0;

	ck_assert_int_eq(hpr__parse_size("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(hpr__parse_size("2048k", &v), 0);
	ck_assert_uint_eq(v, 2048 * 1024);
	ck_assert_int_eq(hpr__parse_size("512m", &v), 0);
	ck_assert_uint_eq(v, 512 * MiB);
	ck_assert_int_eq(hpr__parse_size("1g", &v), 0);
	ck_assert_uint_eq(v, GiB);
	ck_assert_int_eq(hpr__parse_size("1G", &v), 0);
	ck_assert_uint_eq(v, GiB);
	ck_assert_int_eq(hpr__parse_size("2T", &v), 0);
	ck_assert_uint_eq(v, 2ULL << 40);
	ck_assert_int_eq(hpr__parse_size("1GiB", &v), 0);
	ck_assert_uint_eq(v, GiB);
	ck_assert_int_eq(hpr__parse_size("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	v = 5;
	ck_assert_int_eq(hpr__parse_size("", &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_size(NULL, &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("g", &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("1x", &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("1gx", &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("-1", &v), -EINVAL);
	ck_assert_int_eq(hpr__parse_size("99999999999t", &v), -EINVAL); /* overflows */
	ck_assert_int_eq(hpr__parse_size("18446744073709551616", &v), -EINVAL);
	ck_assert_uint_eq(v, 5);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("parse");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, sysfs_mode);
	tcase_add_test(tc, parse_ulong);
	tcase_add_test(tc, smaps);
	tcase_add_test(tc, smaps_malformed);
	tcase_add_test(tc, meminfo);
	tcase_add_test(tc, mountinfo_line);
	tcase_add_test(tc, mountinfo_find);
	tcase_add_test(tc, opt_get);
	tcase_add_test(tc, parse_size);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, 0)
