/* SPDX-License-Identifier: MIT */
/*
 * hpr_stats counts the region's own memory and nothing else (issue 15,
 * item 2). The application's own mappings are placed as close to the
 * region as the address space allows, on both sides: 2 MiB-aligned
 * MADV_HUGEPAGE mappings faulted in huge, and small (64 KiB) ones, all
 * with the region's flags so they could merge with a THP region's VMA.
 * hpr_stats, and the smaps path the library takes before Linux 6.7, must
 * report what the kernel reports for the region's exact range: resident
 * bytes from mincore(2), huge-mapped bytes from this file's own
 * PAGEMAP_SCAN query (skipped where the kernel has none). THP is where
 * merging happens; shmem and hugetlb are checked for sanity.
 */
#include "common.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define REGION (8 * MiB)

/* PAGEMAP_SCAN, spelled out here so the check does not share the
 * library's code (the installed uapi headers may predate 6.7). */
struct t_page_region {
	uint64_t start, end, categories;
};
struct t_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
		category_mask, category_anyof_mask, return_mask;
};
#define T_PAGEMAP_SCAN _IOWR('f', 16, struct t_pm_scan_arg)
#define T_PAGE_IS_PRESENT (1ULL << 3)
#define T_PAGE_IS_HUGE (1ULL << 6)

/* Kernel: bytes of [p, p+len) resident (mincore). */
static size_t k_resident(void *p, size_t len)
{
	size_t n = len / 4096, got = 0;
	unsigned char *v = malloc(n);

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(mincore(p, len, v), 0);
	for (size_t i = 0; i < n; i++)
		got += v[i] & 1;
	free(v);
	return got * 4096;
}

/* Kernel: bytes of [p, p+len) present and PMD-mapped/hugetlb, or -1. */
static long long k_huge(void *p, size_t len)
{
	struct t_page_region vec[64];
	struct t_pm_scan_arg a;
	long long huge = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	long n;

	ck_assert_int_ge(fd, 0);
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.start = (uintptr_t)p;
	a.end = (uintptr_t)p + len;
	a.vec = (uintptr_t)vec;
	a.vec_len = 64; /* an 8 MiB region has at most 4 huge runs */
	a.category_mask = T_PAGE_IS_PRESENT | T_PAGE_IS_HUGE;
	a.return_mask = T_PAGE_IS_HUGE;
	n = ioctl(fd, T_PAGEMAP_SCAN, &a);
	close(fd);
	if (n < 0 && errno == ENOTTY)
		return -1;
	ck_assert_int_ge(n, 0);
	ck_assert_uint_eq(a.walk_end, (uintptr_t)p + len);
	for (long i = 0; i < n; i++)
		huge += (long long)(vec[i].end - vec[i].start);
	return huge;
}

/* Map len bytes like the application would (private anonymous,
 * MAP_NORESERVE like a THP region, MADV_HUGEPAGE) at the first free
 * address from `at` outward in steps of `step` (down if step < 0), touch
 * it, and return it; NULL if the 64 steps find no room. */
static char *neighbour(uintptr_t at, long step, size_t len)
{
	for (int i = 0; i < 64; i++, at += (uintptr_t)step) {
		void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
			       -1, 0);

		if (p == MAP_FAILED) {
			ck_assert_int_eq(errno, EEXIST);
			continue;
		}
		ck_assert_ptr_eq(p, (void *)at);
		ck_assert_int_eq(madvise(p, len, MADV_HUGEPAGE), 0);
		memset(p, 0x5a, len);
		return p;
	}
	return NULL;
}

/*
 * A region with an application mapping of nlen bytes on each side, as near
 * as the layout allows (*lo, *hi). Where the region was placed against
 * other mappings (no room within the search: the alignment slack fell on
 * the other side, which ASLR decides), it is made again while a PROT_NONE
 * stand-in holds its old place, so the next one lands below; the
 * stand-ins go once a region with room on both sides exists.
 */
static hpr_region *region_between(enum hpr_backend be, const char *path, size_t nlen, long step,
				  char **lo, char **hi)
{
	void *held[8];
	int nheld = 0;
	hpr_region *r = NULL;

	for (;;) {
		char *b;

		r = t_region(be, path, REGION, 1, 0);
		b = hpr_base(r);
		*lo = neighbour((uintptr_t)b - nlen, -step, nlen);
		*hi = neighbour((uintptr_t)b + REGION, step, nlen);
		if (*lo && *hi)
			break;
		ck_assert_msg(nheld < 8, "no room next to 8 regions in a row");
		if (*lo)
			ck_assert_int_eq(munmap(*lo, nlen), 0);
		if (*hi)
			ck_assert_int_eq(munmap(*hi, nlen), 0);
		ck_assert_int_eq(hpr_destroy(r), 0);
		/* the span the region and its guard pages had */
		held[nheld] = mmap(b - 4096, REGION + 8192, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
				   -1, 0);
		ck_assert_ptr_eq(held[nheld], b - 4096);
		nheld++;
	}
	while (nheld--)
		ck_assert_int_eq(munmap(held[nheld], REGION + 8192), 0);
	return r;
}

/* The region's VMAs in /proc/self/maps: none may reach past the region. */
static void check_vmas_own(const char *base, size_t size)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t lo = (uintptr_t)base, hi = lo + size;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx", &a, &b) != 2 || b <= lo || a >= hi)
			continue;
		ck_assert_msg(a >= lo && b <= hi,
			      "VMA %lx-%lx reaches past the region %lx-%lx: merged", a, b,
			      (unsigned long)lo, (unsigned long)hi);
	}
	fclose(f);
}

static void check(hpr_region *r, const char *what)
{
	char *b = hpr_base(r);
	size_t size = hpr_size(r), kres = k_resident(b, size);
	long long khuge = k_huge(b, size);
	struct hpr__smaps_sum s;
	struct hpr_stats st;
	size_t sres;

	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_msg(st.resident == kres, "%s: hpr_stats resident %zu, kernel (mincore) %zu", what,
		      st.resident, kres);
	if (khuge >= 0)
		ck_assert_msg(st.huge_mapped == (size_t)khuge,
			      "%s: hpr_stats huge_mapped %zu, kernel (PAGEMAP_SCAN) %lld", what,
			      st.huge_mapped, khuge);
	ck_assert_uint_eq(st.small_mapped, st.resident - st.huge_mapped);
	/* the path taken before 6.7: the region's VMAs in smaps */
	ck_assert_int_eq(hpr__smaps_range((uintptr_t)b, (uintptr_t)b + size, &s), 0);
	sres = (size_t)(s.rss + s.hugetlb);
	ck_assert_msg(sres == kres, "%s: smaps of the region's VMAs: %zu resident, kernel %zu",
		      what, sres, kres);
	if (khuge >= 0)
		ck_assert_msg(
			s.anon_huge + s.shmem_pmd + s.file_pmd + s.hugetlb == (uint64_t)khuge,
			"%s: smaps of the region's VMAs: %llu huge, kernel %lld", what,
			(unsigned long long)(s.anon_huge + s.shmem_pmd + s.file_pmd + s.hugetlb),
			khuge);
	check_vmas_own(b, size);
}

/* Neighbours on both sides, huge or small; the region untouched, then one
 * huge page faulted in, then all of it. */
static void neighbours_case(enum hpr_backend be, const char *path, bool huge)
{
	size_t nlen = huge ? 2 * MiB : 64 * 1024;
	long step = huge ? (long)(2 * MiB) : 4096;
	char *lo, *hi, what[64];
	hpr_region *r = region_between(be, path, nlen, step, &lo, &hi);
	snprintf(what, sizeof(what), "%s, %s neighbours, untouched", hpr_backend_name(be),
		 huge ? "huge" : "small");
	check(r, what);
	ck_assert_int_eq(hpr_fault_in(r, 0, 2 * MiB), 0);
	what[strlen(what) - strlen("untouched")] = 0;
	strcat(what, "one page");
	check(r, what);
	ck_assert_int_eq(hpr_fault_in(r, 0, REGION), 0);
	what[strlen(what) - strlen("one page")] = 0;
	strcat(what, "all");
	check(r, what);
	hpr_destroy(r);
	ck_assert_int_eq(munmap(lo, nlen), 0);
	ck_assert_int_eq(munmap(hi, nlen), 0);
}

static void need_thp(void)
{
	struct hpr_probe_info in;

	ck_assert_int_eq(hpr_probe(&in), 0);
	if (in.thp_enabled == HPR_THP_NEVER)
		t_skip("THP is disabled");
}

START_TEST(thp_huge_neighbours)
{
	need_thp();
	neighbours_case(HPR_BACKEND_THP, NULL, true);
}
END_TEST

START_TEST(thp_small_neighbours)
{
	need_thp();
	neighbours_case(HPR_BACKEND_THP, NULL, false);
}
END_TEST

START_TEST(shmem_neighbours)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");

	neighbours_case(HPR_BACKEND_SHMEM, dir, true);
	neighbours_case(HPR_BACKEND_SHMEM, dir, false);
}
END_TEST

START_TEST(hugetlb_neighbours)
{
	t_need_pool_2m(REGION / (2 * MiB));
	neighbours_case(HPR_BACKEND_HUGETLB, NULL, true);
	neighbours_case(HPR_BACKEND_HUGETLB, NULL, false);
}
END_TEST

/* The versioned struct (hpregion.h, "Versioned structs"): a caller whose
 * newer header has a bigger struct gets the fields this library knows and
 * zeros past them; a size below 0.1's is -EINVAL with a reason. */
START_TEST(sized)
{
	hpr_region *r =
		t_region(HPR_BACKEND_THP, NULL, 4 * MiB, 1, HPR_F_FALLBACK | HPR_F_PREFAULT);
	struct {
		struct hpr_stats st;
		unsigned char newer[64];
	} big;
	struct hpr_stats st;
	int rc;

	ck_assert_int_eq(hpr_stats(r, &st), 0);
	memset(&big, 0xa5, sizeof(big));
	ck_assert_int_eq(hpr_stats_sized(r, &big.st, sizeof(big)), 0);
	for (size_t i = 0; i < sizeof(big.newer); i++)
		ck_assert_uint_eq(big.newer[i], 0);
	ck_assert_uint_eq(big.st.size, st.size);
	ck_assert_uint_eq(big.st.resident, st.resident);
	ck_assert_uint_eq(big.st.pages_total, st.pages_total);
	rc = hpr_stats_sized(r, &st, offsetof(struct hpr_stats, reserved_));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "smaller than hpregion 0.1"));
	ck_assert_int_eq(hpr_stats_sized(NULL, &st, sizeof(st)), -EINVAL);
	ck_assert_int_eq(hpr_stats_sized(r, NULL, sizeof(st)), -EINVAL);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

static Suite *stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("neighbours");

	tcase_add_test(tc, thp_huge_neighbours);
	tcase_add_test(tc, thp_small_neighbours);
	tcase_add_test(tc, shmem_neighbours);
	tcase_add_test(tc, hugetlb_neighbours);
	tcase_add_test(tc, sized);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(stats_suite, T_NEED_ROOT)
