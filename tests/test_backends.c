/* SPDX-License-Identifier: MIT */
/*
 * Backends: every way this machine can back a region (THP, shmem on a tmpfs
 * huge=always / huge=never mount, shmem memfd, hugetlb on hugetlbfs, hugetlb
 * memfd, 1 GiB hugetlb, AUTO with and without a pool and path), created with
 * HPR_F_PREFAULT, is >= 95 % huge-mapped according to the kernel's smaps
 * before anything writes to it (and after),
 * holds a written pattern, and hpr_stats agrees with smaps. Also the
 * getters, the sealing of shared memfds, and file creation on a path.
 *
 * Each case prints one "coverage" line to stdout; run
 *   build-test/tests/test_backends
 * to see the per-backend figures.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif

#define REGION (64 * MiB)
#define HTLB_PAGES 40 /* 2 MiB pages: room for one 64 MiB region */

static size_t sysfs_size(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static size_t thp_pmd_size(void)
{
	size_t v = sysfs_size("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");

	ck_assert_msg(v, "cannot read hpage_pmd_size");
	return v;
}

static uint64_t pattern(size_t off)
{
	return (uint64_t)off * 0x9e3779b97f4a7c15ULL ^ 0xa5a5a5a55a5a5a5aULL;
}

/* One word per 4 KiB page, offset-dependent: a page that moved, was lost or
 * was zeroed shows. */
static void write_pattern(void *base, size_t size)
{
	for (size_t off = 0; off < size; off += 4096)
		*(volatile uint64_t *)((char *)base + off) = pattern(off);
}

static void check_pattern(const void *base, size_t size, const char *what)
{
	for (size_t off = 0; off < size; off += 4096) {
		uint64_t v = *(const volatile uint64_t *)((const char *)base + off);

		ck_assert_msg(v == pattern(off), "%s: word at %#zx is %#llx, wrote %#llx",
			      what, off, (unsigned long long)v,
			      (unsigned long long)pattern(off));
	}
}

static size_t kernel_huge(const struct t_smaps *k)
{
	return k->anon_huge + k->shmem_pmd + k->file_pmd + k->hugetlb;
}

/*
 * Create with HPR_F_PREFAULT and check what the kernel says about it.
 * Returns the region (the caller destroys it).
 */
static hpr_region *create_checked(const char *label, struct hpr_config *c,
				  enum hpr_backend want, size_t want_ps)
{
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *r = NULL;
	size_t huge, kres;
	int rc;

	c->flags |= HPR_F_PREFAULT;
	rc = hpr_create(c, &r);
	ck_assert_msg(rc == 0, "%s: create: %s", label, hpr_strerror(rc));
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(hpr_backend_of(r) == want, "%s: backend %s, want %s", label,
		      hpr_backend_name(hpr_backend_of(r)), hpr_backend_name(want));
	ck_assert_uint_eq(hpr_page_size(r), want_ps);
	ck_assert_uint_ge(hpr_size(r), c->size);
	ck_assert_uint_eq(hpr_size(r) % want_ps, 0);
	ck_assert_uint_eq((uintptr_t)hpr_base(r) % want_ps, 0);
	if (want == HPR_BACKEND_THP)
		ck_assert_int_eq(hpr_fd(r), -1);
	else
		ck_assert_msg(hpr_fd(r) >= 0 && fcntl(hpr_fd(r), F_GETFD) >= 0,
			      "%s: hpr_fd %d is not an open fd", label, hpr_fd(r));

	/* before anything touches it: the prefault, not our writes, made it
	 * huge (a write faults a page in huge on its own) */
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_msg(kernel_huge(&k) * 100 >= hpr_size(r) * 95,
		      "%s: after HPR_F_PREFAULT, before any write, the kernel says only "
		      "%zu of %zu bytes are huge-mapped",
		      label, kernel_huge(&k), hpr_size(r));

	write_pattern(hpr_base(r), hpr_size(r));
	check_pattern(hpr_base(r), hpr_size(r), label);

	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	huge = kernel_huge(&k);
	kres = k.rss + k.hugetlb;
	if (kres < huge)
		kres = huge;
	printf("coverage %-34s backend=%-7s page=%7zu KiB huge=%6zu/%6zu KiB "
	       "(%5.1f%%) rss=%zu KiB\n",
	       label, hpr_backend_name(hpr_backend_of(r)), hpr_page_size(r) >> 10,
	       huge >> 10, hpr_size(r) >> 10, 100.0 * (double)huge / (double)hpr_size(r),
	       kres >> 10);
	ck_assert_int_eq(k.size, hpr_size(r));
	ck_assert_msg(huge * 100 >= hpr_size(r) * 95, "%s: kernel says only %zu of %zu "
		      "bytes are huge-mapped", label, huge, hpr_size(r));
	/* the library's figures are the kernel's */
	ck_assert_uint_eq(st.size, hpr_size(r));
	ck_assert_uint_eq(st.page_size, hpr_page_size(r));
	ck_assert_int_eq(st.backend, hpr_backend_of(r));
	ck_assert_uint_eq(st.huge_mapped, huge);
	ck_assert_uint_eq(st.resident, kres);
	ck_assert_uint_eq(st.small_mapped, kres - huge);
	ck_assert_uint_eq(st.pages_total, hpr_size(r) / want_ps);
	ck_assert_uint_eq(st.pages_present, st.pages_total);
	return r;
}

static void config(struct hpr_config *c, enum hpr_backend b, const char *path)
{
	t_config(c, b, path, REGION, 0, 0);
	c->name = "backends";
}

static void no_pool(void)
{
	ck_assert_uint_eq(t_hugetlb_pool(2048, 0), 0);
	ck_assert_int_eq(t_sysfs_set("/sys/kernel/mm/hugepages/hugepages-2048kB/"
				     "nr_overcommit_hugepages", "0"), 0);
}

/* Shared region: the fd is sealed against shrinking and a second mapping
 * of it sees the same bytes. */
static void check_shared_fd(hpr_region *r, bool sealed)
{
	int fd = hpr_fd(r);
	void *m2;

	if (sealed) {
		int seals = fcntl(fd, F_GET_SEALS);

		ck_assert_msg(seals >= 0 && (seals & F_SEAL_SHRINK),
			      "seals %#x lack F_SEAL_SHRINK", seals);
		ck_assert_int_ne(ftruncate(fd, (off_t)(hpr_size(r) / 2)), 0);
		ck_assert_int_eq(errno, EPERM);
	}
	m2 = mmap(NULL, hpr_size(r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(m2, MAP_FAILED);
	check_pattern(m2, hpr_size(r), "second mapping of hpr_fd");
	/* and writes go both ways */
	*(volatile uint64_t *)((char *)m2 + hpr_size(r) - 4096) = 0x1234;
	ck_assert_uint_eq(*(volatile uint64_t *)((char *)hpr_base(r) + hpr_size(r) - 4096),
			  0x1234);
	*(volatile uint64_t *)((char *)m2 + hpr_size(r) - 4096) =
		pattern(hpr_size(r) - 4096);
	ck_assert_int_eq(munmap(m2, hpr_size(r)), 0);
}

START_TEST(thp)
{
	struct hpr_config c;
	hpr_region *r;

	config(&c, HPR_BACKEND_THP, NULL);
	r = create_checked("thp", &c, HPR_BACKEND_THP, thp_pmd_size());
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* A file on a path: created 0600 and unlinked once mapped. */
static void shmem_on(const char *label, const char *mount_opts)
{
	const char *dir = t_mount_tmpfs(mount_opts);
	struct hpr_config c;
	hpr_region *r;
	struct stat sb;

	config(&c, HPR_BACKEND_SHMEM, dir);
	r = create_checked(label, &c, HPR_BACKEND_SHMEM, thp_pmd_size());
	ck_assert_int_eq(t_dir_entries(dir), 0);
	ck_assert_int_eq(fstat(hpr_fd(r), &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
	ck_assert_int_eq(sb.st_nlink, 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(t_dir_entries(dir), 0);
}

START_TEST(shmem_tmpfs_always)
{
	shmem_on("shmem tmpfs huge=always", "huge=always");
}
END_TEST

START_TEST(shmem_tmpfs_never)
{
	/* faults give 4 KiB pages here; the library populates then collapses */
	shmem_on("shmem tmpfs huge=never", "huge=never");
}
END_TEST

START_TEST(shmem_memfd)
{
	struct hpr_config c;
	hpr_region *r;

	config(&c, HPR_BACKEND_SHMEM, NULL);
	r = create_checked("shmem memfd", &c, HPR_BACKEND_SHMEM, thp_pmd_size());
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(shmem_memfd_shared)
{
	struct hpr_config c;
	hpr_region *r;

	config(&c, HPR_BACKEND_SHMEM, NULL);
	c.flags = HPR_F_SHARED;
	r = create_checked("shmem memfd shared", &c, HPR_BACKEND_SHMEM, thp_pmd_size());
	check_shared_fd(r, true);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(shmem_keep_file)
{
	const char *dir = t_mount_tmpfs("huge=always");
	struct hpr_config c;
	hpr_region *r;
	struct stat sb;
	char p[512];
	struct dirent *e;
	DIR *d;

	config(&c, HPR_BACKEND_SHMEM, dir);
	c.flags = HPR_F_KEEP_FILE | HPR_F_SHARED;
	r = create_checked("shmem tmpfs kept file", &c, HPR_BACKEND_SHMEM,
			   thp_pmd_size());
	ck_assert_int_eq(t_dir_entries(dir), 1);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) && e->d_name[0] == '.')
		;
	ck_assert_ptr_nonnull(e);
	snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
	closedir(d);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
	ck_assert_uint_eq((size_t)sb.st_size, hpr_size(r));
	check_shared_fd(r, false);
	ck_assert_int_eq(hpr_destroy(r), 0);
	/* kept: the data outlives the region */
	{
		int fd = open(p, O_RDONLY);
		uint64_t v = 0;

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &v, sizeof(v), 4096 * 7), (ssize_t)sizeof(v));
		ck_assert_uint_eq(v, pattern(4096 * 7));
		close(fd);
	}
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(t_dir_entries(dir), 0);
}
END_TEST

START_TEST(hugetlb_fs)
{
	const char *dir;
	struct hpr_config c;
	hpr_region *r;
	struct stat sb;

	t_need_pool_2m(HTLB_PAGES);
	dir = t_mount_hugetlbfs("pagesize=2M");
	config(&c, HPR_BACKEND_HUGETLB, dir);
	r = create_checked("hugetlb hugetlbfs", &c, HPR_BACKEND_HUGETLB, 2 * MiB);
	ck_assert_int_eq(t_dir_entries(dir), 0);
	ck_assert_int_eq(fstat(hpr_fd(r), &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0600);
	/* the kernel's pool agrees: all our pages are in use */
	ck_assert_uint_le(t_hugetlb_free(2048), HTLB_PAGES - REGION / (2 * MiB));
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), HTLB_PAGES);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
}
END_TEST

START_TEST(hugetlb_memfd)
{
	struct hpr_config c;
	hpr_region *r;

	t_need_pool_2m(HTLB_PAGES);
	config(&c, HPR_BACKEND_HUGETLB, NULL);
	r = create_checked("hugetlb memfd", &c, HPR_BACKEND_HUGETLB, 2 * MiB);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), HTLB_PAGES);
}
END_TEST

START_TEST(hugetlb_memfd_shared)
{
	struct hpr_config c;
	hpr_region *r;

	t_need_pool_2m(HTLB_PAGES);
	config(&c, HPR_BACKEND_HUGETLB, NULL);
	c.flags = HPR_F_SHARED;
	r = create_checked("hugetlb memfd shared", &c, HPR_BACKEND_HUGETLB, 2 * MiB);
	check_shared_fd(r, true);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(hugetlb_1g)
{
	const char *sys = "/sys/kernel/mm/hugepages/hugepages-1048576kB";
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	config(&c, HPR_BACKEND_HUGETLB, NULL);
	c.size = 1 * GiB;
	c.page_size = 1 * GiB;
	if (access(sys, F_OK)) {
		/* Not a skip: the CPU/kernel has no 1 GiB pages (no pdpe1gb),
		 * so what there is to test is that the library says so. */
		rc = hpr_create(&c, &r);
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_ptr_null(r);
		ck_assert_msg(strstr(hpr_strerror(rc), "not offered"), "message: %s",
			      hpr_strerror(rc));
		printf("coverage %-34s not offered by this kernel (no %s): "
		       "refused with -EINVAL as it should be\n",
		       "hugetlb 1 GiB", sys);
		return;
	}
	if (!t_need_pool_1g(1))
		return; /* said why; a failure where 1 GiB pages are promised */
	r = create_checked("hugetlb memfd 1 GiB", &c, HPR_BACKEND_HUGETLB, 1 * GiB);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(auto_no_pool)
{
	struct hpr_config c;
	hpr_region *r;

	no_pool();
	config(&c, HPR_BACKEND_AUTO, NULL);
	r = create_checked("auto, no pool", &c, HPR_BACKEND_THP, thp_pmd_size());
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(auto_pool)
{
	struct hpr_config c;
	hpr_region *r;

	t_need_pool_2m(HTLB_PAGES);
	config(&c, HPR_BACKEND_AUTO, NULL);
	r = create_checked("auto, pool", &c, HPR_BACKEND_HUGETLB, 2 * MiB);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(auto_small_pool)
{
	struct hpr_config c;
	hpr_region *r;

	/* a pool too small for the region is passed over, not half used */
	t_need_pool_2m(4);
	config(&c, HPR_BACKEND_AUTO, NULL);
	r = create_checked("auto, pool too small", &c, HPR_BACKEND_THP, thp_pmd_size());
	ck_assert_uint_eq(t_hugetlb_free(2048), 4);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(auto_tmpfs)
{
	const char *dir = t_mount_tmpfs("huge=always");
	struct hpr_config c;
	hpr_region *r;

	no_pool();
	config(&c, HPR_BACKEND_AUTO, dir);
	r = create_checked("auto, tmpfs path, no pool", &c, HPR_BACKEND_SHMEM,
			   thp_pmd_size());
	ck_assert_int_eq(t_dir_entries(dir), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(auto_tmpfs_pool)
{
	const char *dir = t_mount_tmpfs("huge=always");
	struct hpr_config c;
	hpr_region *r;

	t_need_pool_2m(HTLB_PAGES);
	config(&c, HPR_BACKEND_AUTO, dir);
	r = create_checked("auto, tmpfs path, pool", &c, HPR_BACKEND_HUGETLB, 2 * MiB);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(auto_hugetlbfs)
{
	const char *dir;
	struct hpr_config c;
	hpr_region *r;

	t_need_pool_2m(HTLB_PAGES);
	dir = t_mount_hugetlbfs("pagesize=2M");
	config(&c, HPR_BACKEND_AUTO, dir);
	r = create_checked("auto, hugetlbfs path, pool", &c, HPR_BACKEND_HUGETLB,
			   2 * MiB);
	ck_assert_int_eq(t_dir_entries(dir), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), HTLB_PAGES);
}
END_TEST

START_TEST(auto_shared)
{
	struct hpr_config c;
	hpr_region *r;

	/* a shared region cannot be THP: AUTO's last step is a shmem memfd */
	no_pool();
	config(&c, HPR_BACKEND_AUTO, NULL);
	c.flags = HPR_F_SHARED;
	r = create_checked("auto, shared, no pool", &c, HPR_BACKEND_SHMEM,
			   thp_pmd_size());
	check_shared_fd(r, true);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("backends");
	TCase *tc = tcase_create("backends");

	tcase_add_test(tc, thp);
	tcase_add_test(tc, shmem_tmpfs_always);
	tcase_add_test(tc, shmem_tmpfs_never);
	tcase_add_test(tc, shmem_memfd);
	tcase_add_test(tc, shmem_memfd_shared);
	tcase_add_test(tc, shmem_keep_file);
	tcase_add_test(tc, hugetlb_fs);
	tcase_add_test(tc, hugetlb_memfd);
	tcase_add_test(tc, hugetlb_memfd_shared);
	tcase_add_test(tc, hugetlb_1g);
	tcase_add_test(tc, auto_no_pool);
	tcase_add_test(tc, auto_pool);
	tcase_add_test(tc, auto_small_pool);
	tcase_add_test(tc, auto_tmpfs);
	tcase_add_test(tc, auto_tmpfs_pool);
	tcase_add_test(tc, auto_hugetlbfs);
	tcase_add_test(tc, auto_shared);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
