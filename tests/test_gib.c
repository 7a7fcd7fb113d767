/* SPDX-License-Identifier: MIT */
/*
 * 1 GiB hugetlb pages, for real: create, prefault, the kernel's smaps
 * (Private/Shared_Hugetlb, KernelPageSize), release, reclaim (the page is
 * back in the 1 GiB pool per sysfs), fault-in again, a snapshot round trip,
 * a short pool and AUTO's choice.
 *
 * Machines of our kind differ: some have no pdpe1gb, some cannot find a
 * free 1 GiB range at run time. There the suite says so (NOTRUN lines) and
 * passes; where HPR_TEST_REQUIRE names "gib" (the VM matrix's 1g guest,
 * booted with hugepagesz=1G hugepages=2) a missing pool fails it. Where the
 * kernel offers them, the pool is grown to 2 pages at run time under the
 * system lock and restored at exit.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GIB_KB 1048576UL
#define GIB_SYS "/sys/kernel/mm/hugepages/hugepages-1048576kB"
#define POOL 2 /* pages: the guest's boot pool, and what the host is given */

/* A 1 GiB pool of exactly POOL pages, all free; false (having said why,
 * or failed where required) when the machine cannot give it. */
static bool gib_pool(void)
{
	if (!t_need_pool_1g(POOL))
		return false;
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), POOL);
	return true;
}

static void gib_config(struct hpr_config *c, enum hpr_backend b, size_t size, unsigned flags)
{
	t_config(c, b, NULL, size, 0, flags);
	c->page_size = GiB;
	c->name = "gib";
}

/* The smallest KernelPageSize of the VMAs over [addr, addr+len), in bytes. */
static size_t kernel_page_size(const void *addr, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	size_t min = 0;
	char line[512];
	int in = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, v;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = a < hi && b > lo;
		else if (in && sscanf(line, "KernelPageSize: %lu kB", &v) == 1 &&
			 (!min || v * 1024 < min))
			min = v * 1024;
	}
	fclose(f);
	return min;
}

static void check_kernel(hpr_region *r, size_t hugetlb_bytes)
{
	struct t_smaps k;

	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_msg(k.hugetlb == hugetlb_bytes, "smaps *_Hugetlb %zu, want %zu", k.hugetlb,
		      hugetlb_bytes);
	ck_assert_uint_eq(kernel_page_size(hpr_base(r), hpr_size(r)), GiB);
}

static uint64_t word(size_t off)
{
	return (uint64_t)off * 0x9e3779b97f4a7c15ULL ^ 0x5a5a5a5aa5a5a5a5ULL;
}

/* One word per 4 KiB over [off, off+len): enough to see a lost or moved
 * page, cheap under an emulated CPU. */
static void fill(hpr_region *r, size_t off, size_t len)
{
	char *b = hpr_base(r);

	for (size_t o = off; o < off + len; o += 4096)
		*(uint64_t *)(b + o) = word(o);
}

static bool holds(hpr_region *r, size_t off, size_t len)
{
	const char *b = hpr_base(r);

	for (size_t o = off; o < off + len; o += 4096)
		if (*(const uint64_t *)(b + o) != word(o))
			return false;
	return true;
}

static bool zeros(hpr_region *r, size_t off, size_t len)
{
	const char *b = hpr_base(r);

	for (size_t o = off; o < off + len; o += 4096)
		if (*(const uint64_t *)(b + o))
			return false;
	return true;
}

START_TEST(create_prefault_stats)
{
	struct hpr_config c;
	struct hpr_stats st;
	hpr_region *r = NULL;
	int rc;

	if (!gib_pool())
		return;
	gib_config(&c, HPR_BACKEND_HUGETLB, POOL * GiB, HPR_F_PREFAULT);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_HUGETLB);
	ck_assert_uint_eq(hpr_page_size(r), GiB);
	ck_assert_uint_eq((uintptr_t)hpr_base(r) % GiB, 0);
	/* prefaulted: every page in use, per the kernel */
	check_kernel(r, POOL * GiB);
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.page_size, GiB);
	ck_assert_uint_eq(st.pages_total, POOL);
	ck_assert_uint_eq(st.pages_present, POOL);
	ck_assert_uint_eq(st.resident, POOL * GiB);
	ck_assert_uint_eq(st.huge_mapped, POOL * GiB);
	fill(r, 0, POOL * GiB);
	ck_assert(holds(r, 0, POOL * GiB));
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), POOL);
	ck_assert_uint_eq(t_hugetlb_resv(GIB_KB), 0);
}
END_TEST

/* Release is bookkeeping only (no syscall); reclaim punches the page out
 * and the kernel's 1 GiB pool gets it back; fault-in takes it again. (With
 * an hpr_save() before the release, the page does not come back: the
 * snapshot's registered buffers pin it -- issue 15 item 10, fixed on its
 * own branch, which tests that case.) */
START_TEST(release_reclaim_refault)
{
	struct hpr_config c;
	struct hpr_stats st;
	hpr_region *r = NULL;
	size_t got = 0;
	int rc;

	if (!gib_pool())
		return;
	gib_config(&c, HPR_BACKEND_HUGETLB, POOL * GiB, 0);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	/* not prefaulted: reserved, none in use */
	check_kernel(r, 0);
	ck_assert_uint_eq(t_hugetlb_resv(GIB_KB), POOL);
	ck_assert_int_eq(hpr_fault_in(r, 0, POOL * GiB), 0);
	check_kernel(r, POOL * GiB);
	fill(r, 0, POOL * GiB);

	ck_assert_int_eq(hpr_release_lazy(r, 0, GiB), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.pages_lazy, 1);
	ck_assert_uint_eq(st.lazy, GiB);
	check_kernel(r, POOL * GiB); /* lazy: still mapped */
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), 0);

	ck_assert_int_eq(hpr_reclaim(r, 0, &got), 0);
	ck_assert_uint_eq(got, GiB);
	check_kernel(r, GiB);
	ck_assert_msg(t_hugetlb_free(GIB_KB) == 1,
		      "the reclaimed 1 GiB page is not back in the pool: free_hugepages %lu",
		      t_hugetlb_free(GIB_KB));
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.pages_lazy, 0);
	ck_assert_uint_eq(st.pages_present, 1);
	ck_assert(holds(r, GiB, GiB)); /* the other page untouched */

	ck_assert_int_eq(hpr_fault_in(r, 0, GiB), 0);
	check_kernel(r, POOL * GiB);
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), 0);
	ck_assert(zeros(r, 0, GiB)); /* reclaimed: a fresh page */
	ck_assert(holds(r, GiB, GiB));
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), POOL);
}
END_TEST

/* Save a 1 GiB-page region, load it into a fresh one; snapshots of the
 * other page size are refused both ways (real files, not crafted headers:
 * test_snapshot's err_page_size has the crafted one). */
START_TEST(save_load)
{
	struct hpr_config c;
	hpr_region *r = NULL, *q = NULL, *t;
	size_t changed = 0;
	int rc, fd, fd2m;

	if (!gib_pool())
		return;
	gib_config(&c, HPR_BACKEND_HUGETLB, GiB, 0);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_fault_in(r, 0, GiB), 0);
	fill(r, 0, GiB);
	fd = open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	rc = hpr_save(r, fd, 0);
	ck_assert_msg(rc == 0, "save: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_destroy(r), 0);

	rc = hpr_create(&c, &q);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	rc = hpr_load(q, fd, 0, &changed);
	ck_assert_msg(rc == 0, "load: %s", hpr_strerror(rc));
	ck_assert(holds(q, 0, GiB));
	check_kernel(q, GiB);

	/* a 1 GiB-page snapshot into 2 MiB pages, and the reverse */
	t = t_region(HPR_BACKEND_THP, NULL, GiB, 1, 0);
	rc = hpr_load(t, fd, 0, NULL);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(hpr_strerror(rc), "1 GiB pages"), "%s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_fault_in(t, 0, hpr_page_size(t)), 0);
	memset(hpr_base(t), 7, 4096);
	fd2m = open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd2m, 0);
	ck_assert_int_eq(hpr_save(t, fd2m, 0), 0);
	rc = hpr_load(q, fd2m, 0, NULL);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(hpr_strerror(rc), "2 MiB pages"), "%s", hpr_strerror(rc));
	ck_assert(holds(q, 0, GiB)); /* refused before it touched the region */
	hpr_destroy(t);
	hpr_destroy(q);
	close(fd2m);
	close(fd);
}
END_TEST

/* A region the pool cannot hold: -ENOMEM from hpr_create with the sysfs
 * file to raise, never a SIGBUS later; nothing reserved or left mapped. */
START_TEST(short_pool)
{
	static const unsigned flags[] = { 0, HPR_F_PREFAULT };
	struct hpr_config c;

	if (!gib_pool())
		return;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		hpr_region *r = NULL;
		int maps = t_maps_count(), rc;

		gib_config(&c, HPR_BACKEND_HUGETLB, (POOL + 1) * GiB, flags[i]);
		rc = hpr_create(&c, &r);
		ck_assert_int_eq(rc, -ENOMEM);
		ck_assert_ptr_null(r);
		ck_assert_msg(strstr(hpr_strerror(rc), GIB_SYS "/nr_hugepages"),
			      "the message does not name %s/nr_hugepages: %s", GIB_SYS,
			      hpr_strerror(rc));
		ck_assert_uint_eq(t_hugetlb_free(GIB_KB), POOL);
		ck_assert_uint_eq(t_hugetlb_resv(GIB_KB), 0);
		if (!T_SANITIZED)
			ck_assert_int_eq(t_maps_count(), maps);
	}
}
END_TEST

/* AUTO asked for 1 GiB pages takes them when the pool holds the region;
 * AUTO with the default page size leaves the 1 GiB pool alone. */
START_TEST(auto_choice)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	if (!gib_pool())
		return;
	gib_config(&c, HPR_BACKEND_AUTO, POOL * GiB, HPR_F_PREFAULT);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_HUGETLB);
	ck_assert_uint_eq(hpr_page_size(r), GiB);
	check_kernel(r, POOL * GiB);
	ck_assert_int_eq(hpr_destroy(r), 0);

	t_config(&c, HPR_BACKEND_AUTO, NULL, 64 * MiB, 0, 0);
	t_hugetlb_pool(2048, 0);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_THP);
	ck_assert_uint_eq(hpr_page_size(r), 2 * MiB);
	ck_assert_uint_eq(t_hugetlb_resv(GIB_KB), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* A hugetlbfs mounted pagesize=1G gives its page size to the region. */
START_TEST(hugetlbfs_mount)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	const char *dir;
	int rc;

	if (!gib_pool())
		return;
	dir = t_mount_hugetlbfs("pagesize=1G");
	t_config(&c, HPR_BACKEND_HUGETLB, dir, GiB, 0, HPR_F_PREFAULT);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create in %s: %s", dir, hpr_strerror(rc));
	ck_assert_uint_eq(hpr_page_size(r), GiB);
	check_kernel(r, GiB);
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), POOL - 1);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(t_dir_entries(dir), 0);
	ck_assert_uint_eq(t_hugetlb_free(GIB_KB), POOL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("gib");
	TCase *tc = tcase_create("gib");

	tcase_add_test(tc, create_prefault_stats);
	tcase_add_test(tc, release_reclaim_refault);
	tcase_add_test(tc, save_load);
	tcase_add_test(tc, short_pool);
	tcase_add_test(tc, auto_choice);
	tcase_add_test(tc, hugetlbfs_mount);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
