/* SPDX-License-Identifier: MIT */
/*
 * Bad input gets a clear negative errno and a detailed hpr_strerror text,
 * and a failed hpr_create leaves nothing behind: no mapping (maps line
 * count), no file (directory entries), no hugetlb reservation (Free, Rsvd
 * and Surp as before). NULL regions and out-of-range offsets are -EINVAL
 * in every public function.
 */
#include "common.h"
#include "internal.h" /* hpr__os_set, hpr__probe_reset: fakes */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define REGION (64 * MiB)

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

struct before {
	int maps;
	int entries;
	unsigned long free_, resv, surp;
	long long mi_free, mi_resv, mi_surp;
};

static void snap(struct before *b, const char *dir)
{
	b->maps = t_maps_count();
	b->entries = dir ? t_dir_entries(dir) : 0;
	b->free_ = t_hugetlb_free(2048);
	b->resv = t_hugetlb_resv(2048);
	b->surp = t_hugetlb_surp(2048);
	b->mi_free = t_meminfo("HugePages_Free");
	b->mi_resv = t_meminfo("HugePages_Rsvd");
	b->mi_surp = t_meminfo("HugePages_Surp");
}

/*
 * hpr_create(c) must fail with err, say keyword in its message, and leave
 * the process and the system as they were. It runs twice and measures the
 * second call, so one-time lazy setup (probe cache, allocator arenas) is
 * not mistaken for a leak while a per-call leak still shows.
 */
static void expect_fail(const char *what, const struct hpr_config *c, int err,
			const char *keyword, const char *dir)
{
	struct before b, a;
	hpr_region *r = (hpr_region *)&r; /* must come back NULL */
	size_t left;
	int rc;

	rc = hpr_create(c, &r);
	ck_assert_msg(rc == err, "%s: got %d (%s), want %d", what, rc, hpr_strerror(rc),
		      err);
	snap(&b, dir);
	r = (hpr_region *)&r;
	t_track_begin();
	rc = hpr_create(c, &r);
	left = t_track_end();
	snap(&a, dir);
	ck_assert_msg(rc == err, "%s: got %d (%s), want %d", what, rc, hpr_strerror(rc),
		      err);
	ck_assert_msg(r == NULL, "%s: *out not NULL after a failure", what);
	ck_assert_msg(strstr(hpr_strerror(rc), keyword),
		      "%s: message \"%s\" does not mention \"%s\"", what, hpr_strerror(rc),
		      keyword);
	ck_assert_msg(left == 0, "%s: the library left %zu bytes mapped", what, left);
	/* the kernel's view; sanitizer runtimes add VMAs of their own */
	ck_assert_msg(T_SANITIZED || a.maps == b.maps, "%s: %d mappings before, %d after",
		      what, b.maps, a.maps);
	ck_assert_msg(a.entries == b.entries, "%s: %d files in %s before, %d after", what,
		      b.entries, dir, a.entries);
	ck_assert_msg(a.free_ == b.free_ && a.resv == b.resv && a.surp == b.surp,
		      "%s: hugetlb free/resv/surp %lu/%lu/%lu before, %lu/%lu/%lu after",
		      what, b.free_, b.resv, b.surp, a.free_, a.resv, a.surp);
	ck_assert_msg(a.mi_free == b.mi_free && a.mi_resv == b.mi_resv &&
			      a.mi_surp == b.mi_surp,
		      "%s: meminfo HugePages_Free/Rsvd/Surp changed", what);
	printf("%-44s -> %d: %s\n", what, rc, hpr_strerror(rc));
}

static void cfg(struct hpr_config *c, enum hpr_backend b, const char *path)
{
	t_config(c, b, path, REGION, 0, 0);
	c->name = "bad";
}

START_TEST(size_zero)
{
	struct hpr_config c;

	for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_HUGETLB; b++) {
		cfg(&c, (enum hpr_backend)b, NULL);
		c.size = 0;
		expect_fail("size 0", &c, -EINVAL, "size", NULL);
	}
}
END_TEST

START_TEST(size_overflow)
{
	struct hpr_config c;

	t_need_pool_2m(8);
	for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_HUGETLB; b++) {
		cfg(&c, (enum hpr_backend)b, NULL);
		c.size = SIZE_MAX;
		expect_fail("size SIZE_MAX", &c, -EINVAL, "size", NULL);
		c.size = SIZE_MAX - 4096;
		expect_fail("size SIZE_MAX-4096", &c, -EINVAL, "size", NULL);
	}
}
END_TEST

START_TEST(unknown_backend)
{
	struct hpr_config c;

	cfg(&c, (enum hpr_backend)42, NULL);
	expect_fail("backend 42", &c, -EINVAL, "backend", NULL);
	cfg(&c, (enum hpr_backend)-1, NULL);
	expect_fail("backend -1", &c, -EINVAL, "backend", NULL);
}
END_TEST

START_TEST(unknown_flags)
{
	struct hpr_config c;

	cfg(&c, HPR_BACKEND_THP, NULL);
	c.flags = 1u << 20;
	expect_fail("flag bit 20", &c, -EINVAL, "flag", NULL);
	c.flags = HPR_F_FALLBACK | (1u << 31);
	expect_fail("flag bit 31", &c, -EINVAL, "flag", NULL);
	c.flags = HPR_F_PREFAULT | HPR_F_PREFAULT_ASYNC;
	expect_fail("PREFAULT|PREFAULT_ASYNC", &c, -EINVAL, "PREFAULT", NULL);
	c.flags = HPR_F_SHARED;
	expect_fail("THP + SHARED", &c, -EINVAL, "SHARED", NULL);
}
END_TEST

START_TEST(bad_page_size)
{
	struct hpr_config c;

	t_need_pool_2m(40);
	cfg(&c, HPR_BACKEND_HUGETLB, NULL);
	c.page_size = 4096;
	expect_fail("hugetlb page_size 4096", &c, -EINVAL, "4096", NULL);
	c.page_size = 3 * MiB;
	expect_fail("hugetlb page_size 3 MiB", &c, -EINVAL, "page_size", NULL);
	cfg(&c, HPR_BACKEND_THP, NULL);
	c.page_size = 4096;
	expect_fail("thp page_size 4096", &c, -EINVAL, "THP page size", NULL);
	c.page_size = 1 * GiB;
	expect_fail("thp page_size 1 GiB", &c, -EINVAL, "THP page size", NULL);
	cfg(&c, HPR_BACKEND_SHMEM, NULL);
	c.page_size = 64 * 1024;
	expect_fail("shmem page_size 64 KiB", &c, -EINVAL, "page size", NULL);
	if (access("/sys/kernel/mm/hugepages/hugepages-1048576kB", F_OK)) {
		cfg(&c, HPR_BACKEND_HUGETLB, NULL);
		c.page_size = 1 * GiB;
		c.size = 1 * GiB;
		expect_fail("hugetlb 1 GiB where the kernel has none", &c, -EINVAL,
			    "not offered", NULL);
	}
	{
		/* a hugetlbfs mount's page size and the config's must agree */
		const char *d = t_mount_hugetlbfs("pagesize=2M");

		cfg(&c, HPR_BACKEND_HUGETLB, d);
		c.page_size = 4 * MiB;
		expect_fail("hugetlbfs 2M, page_size 4 MiB", &c, -EINVAL, "page", d);
	}
}
END_TEST

START_TEST(missing_dir)
{
	struct hpr_config c;
	const char *d = t_mount_tmpfs("huge=always");
	char p[256];

	snprintf(p, sizeof(p), "%s/does/not/exist", d);
	for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_HUGETLB; b++) {
		if (b == HPR_BACKEND_THP)
			continue; /* THP has no path */
		cfg(&c, (enum hpr_backend)b, p);
		expect_fail("missing directory", &c, -ENOENT, p, d);
	}
}
END_TEST

START_TEST(file_not_dir)
{
	struct hpr_config c;
	const char *d = t_mount_tmpfs("huge=always");
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/plainfile", d);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_HUGETLB; b++) {
		if (b == HPR_BACKEND_THP)
			continue;
		cfg(&c, (enum hpr_backend)b, p);
		expect_fail("path is a file", &c, -ENOTDIR, "not a directory", d);
	}
}
END_TEST

START_TEST(not_tmpfs)
{
	struct hpr_config c;
	char tmpl[] = "/tmp/hprbad-XXXXXX";
	struct statfs sf;
	char *d = mkdtemp(tmpl);

	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(statfs(d, &sf), 0);
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == (long)HUGETLBFS_MAGIC) {
		/* /tmp is a tmpfs here: /proc is never one */
		rmdir(d);
		d = NULL;
	}
	for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_HUGETLB; b++) {
		if (b == HPR_BACKEND_THP)
			continue;
		cfg(&c, (enum hpr_backend)b, d ? d : "/proc");
		expect_fail("path not on tmpfs/hugetlbfs", &c, -EINVAL, "tmpfs", d);
	}
	if (d)
		ck_assert_int_eq(rmdir(d), 0);
}
END_TEST

START_TEST(wrong_fs_for_backend)
{
	struct hpr_config c;
	const char *tm, *ht;

	t_need_pool_2m(40);
	tm = t_mount_tmpfs("huge=always");
	ht = t_mount_hugetlbfs("pagesize=2M");
	cfg(&c, HPR_BACKEND_SHMEM, ht);
	expect_fail("SHMEM on a hugetlbfs path", &c, -EINVAL, "hugetlbfs", ht);
	cfg(&c, HPR_BACKEND_HUGETLB, tm);
	expect_fail("HUGETLB on a tmpfs path", &c, -EINVAL, "tmpfs", tm);
}
END_TEST

START_TEST(tmpfs_too_small)
{
	struct hpr_config c;
	const char *d = t_mount_tmpfs("huge=always,size=16m");

	cfg(&c, HPR_BACKEND_SHMEM, d);
	expect_fail("tmpfs size=16m, region 64 MiB", &c, -ENOSPC, "size=", d);
	/* AUTO must not quietly take THP instead of the mount it was given */
	cfg(&c, HPR_BACKEND_AUTO, d);
	ck_assert_uint_eq(t_hugetlb_pool(2048, 0), 0);
	expect_fail("AUTO, tmpfs size=16m, no pool", &c, -ENOSPC, "size=", d);
}
END_TEST

START_TEST(hugetlbfs_too_small)
{
	struct hpr_config c;
	const char *d;

	t_need_pool_2m(40);
	d = t_mount_hugetlbfs("pagesize=2M,size=16M");
	cfg(&c, HPR_BACKEND_HUGETLB, d);
	expect_fail("hugetlbfs size=16M, region 64 MiB", &c, -ENOSPC, "size=", d);
}
END_TEST

START_TEST(pool_too_small)
{
	struct hpr_config c;
	const char *d;

	t_need_pool_2m(8); /* 16 MiB for a 64 MiB region */
	cfg(&c, HPR_BACKEND_HUGETLB, NULL);
	expect_fail("hugetlb memfd, pool 8 pages", &c, -ENOMEM, "nr_hugepages", NULL);
	c.flags = HPR_F_PREFAULT;
	expect_fail("hugetlb memfd, pool 8 pages, PREFAULT", &c, -ENOMEM,
		    "nr_hugepages", NULL);
	d = t_mount_hugetlbfs("pagesize=2M");
	cfg(&c, HPR_BACKEND_HUGETLB, d);
	expect_fail("hugetlbfs, pool 8 pages", &c, -ENOMEM, "nr_hugepages", d);
	/* the pool itself: untouched */
	ck_assert_uint_eq(t_hugetlb_free(2048), 8);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
	ck_assert_uint_eq(t_hugetlb_surp(2048), 0);
}
END_TEST

/*
 * The pool passes the library's own check but the kernel's reservation at
 * mmap time fails (the pool shrank in between, or another process took the
 * pages): a fake read_file makes the pool look big, the real mmap refuses.
 * The failure must still be -ENOMEM naming nr_hugepages, with nothing left.
 */
static struct hpr_os_ops fake_os;

static ssize_t fake_read_file(const char *path, char *buf, size_t len)
{
	const char *leaf = strrchr(path, '/');

	if (strstr(path, "hugepages-2048kB") && leaf &&
	    (!strcmp(leaf, "/free_hugepages") || !strcmp(leaf, "/nr_hugepages"))) {
		snprintf(buf, len, "100000\n");
		return (ssize_t)strlen(buf);
	}
	return hpr__os_real.read_file(path, buf, len);
}

START_TEST(pool_shrank_before_mmap)
{
	struct hpr_config c;
	const char *d;

	t_need_pool_2m(8);
	d = t_mount_hugetlbfs("pagesize=2M");
	fake_os = hpr__os_real;
	fake_os.read_file = fake_read_file;
	hpr__os_set(&fake_os);
	hpr__probe_reset();
	cfg(&c, HPR_BACKEND_HUGETLB, NULL);
	expect_fail("hugetlb memfd, kernel reservation fails", &c, -ENOMEM,
		    "nr_hugepages", NULL);
	cfg(&c, HPR_BACKEND_HUGETLB, d);
	expect_fail("hugetlbfs, kernel reservation fails", &c, -ENOMEM,
		    "nr_hugepages", d);
	hpr__os_set(NULL);
	hpr__probe_reset();
	ck_assert_uint_eq(t_hugetlb_free(2048), 8);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
}
END_TEST

/*
 * Soak finding 22: a file mapping MAP_FIXED over the region's reserved
 * address space fails (Linux 6.12+ has cleared the old range by then and
 * cannot put it back), another thread maps something there at once, and
 * the create's clean-up must not unmap it. The fake does what the kernel
 * and the other thread do: it unmaps the range, maps the "other thread's"
 * page in it and fails. Before the fix the clean-up's munmap(range) took
 * that page away (a SIGSEGV in the other thread, seen in the soak).
 */
static void *other_map;

static int fixed_fails(void *addr, size_t len, int prot, int flags, int fd, off_t off,
		       void **out)
{
	if (fd >= 0 && (flags & MAP_FIXED)) {
		ck_assert_int_eq(munmap(addr, len), 0);
		other_map = mmap(addr, 4096, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		ck_assert_ptr_eq(other_map, addr);
		memset(other_map, 0x5a, 4096);
		return -ENOMEM;
	}
	return hpr__os_real.mmap(addr, len, prot, flags, fd, off, out);
}

START_TEST(failed_fixed_map_keeps_other_mappings)
{
	static const enum hpr_backend be[] = { HPR_BACKEND_SHMEM, HPR_BACKEND_HUGETLB };
	struct hpr_config c;
	hpr_region *r = NULL;

	t_need_pool_2m(8);
	for (size_t i = 0; i < 2; i++) {
		fake_os = hpr__os_real;
		fake_os.mmap = fixed_fails;
		hpr__os_set(&fake_os);
		other_map = NULL;
		cfg(&c, be[i], NULL);
		c.size = 16 * MiB; /* 8 pages: the pool is exact */
		ck_assert_int_eq(hpr_create(&c, &r), -ENOMEM);
		hpr__os_set(NULL);
		ck_assert_ptr_nonnull(other_map);
		/* still mapped, still what the other thread wrote */
		ck_assert_msg(msync(other_map, 4096, MS_ASYNC) == 0,
			      "%s: the failed create unmapped another thread's page",
			      hpr_backend_name(be[i]));
		ck_assert_int_eq(((unsigned char *)other_map)[4095], 0x5a);
		ck_assert_int_eq(munmap(other_map, 4096), 0);
	}
	ck_assert_uint_eq(t_hugetlb_free(2048), 8);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
}
END_TEST

START_TEST(config_struct)
{
	struct hpr_config c;
	struct {
		struct hpr_config c;
		uint64_t future[4];
	} big;
	hpr_region *r = (hpr_region *)&r;
	int rc;

	rc = hpr_create(NULL, &r);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "NULL"));
	cfg(&c, HPR_BACKEND_THP, NULL);
	rc = hpr_create(&c, NULL);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "NULL"));

	/* never initialised */
	memset(&c, 0, sizeof(c));
	c.size = REGION;
	c.backend = HPR_BACKEND_THP;
	expect_fail("struct_size 0", &c, -EINVAL, "hpr_config_init", NULL);

	/* a newer caller that set a field this library does not know */
	memset(&big, 0, sizeof(big));
	hpr_config_init_sized(&big.c, sizeof(big));
	big.c.size = REGION;
	big.c.backend = HPR_BACKEND_THP;
	big.future[2] = 1;
	expect_fail("unknown trailing bytes", &big.c, -E2BIG, "unknown", NULL);

	/* ... and one that left them zero is fine */
	big.future[2] = 0;
	rc = hpr_create(&big.c, &r);
	ck_assert_msg(rc == 0, "zero trailing bytes: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_THP);
	ck_assert_int_eq(hpr_destroy(r), 0);

	/* an older caller whose struct ends before lazy_budget: defaults */
	hpr_config_init_sized(&c, offsetof(struct hpr_config, lazy_budget));
	c.size = REGION;
	c.backend = HPR_BACKEND_THP;
	c.lazy_budget = 12345; /* beyond its struct_size: must be ignored */
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "old struct size: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(null_region)
{
	struct hpr_stats st;
	struct hpr_probe_info pi;
	size_t a = 7, b = 7;
	int rc;

	ck_assert_int_eq(hpr_destroy(NULL), 0);
	ck_assert_ptr_null(hpr_base(NULL));
	ck_assert_uint_eq(hpr_size(NULL), 0);
	ck_assert_uint_eq(hpr_page_size(NULL), 0);
	ck_assert_int_eq(hpr_backend_of(NULL), HPR_BACKEND_AUTO);
	ck_assert_int_eq(hpr_fd(NULL), -1);
	ck_assert_ptr_null(hpr_name(NULL));
#define NULL_EINVAL(call)                                                         \
	do {                                                                      \
		rc = (call);                                                      \
		ck_assert_msg(rc == -EINVAL, #call ": %d", rc);                   \
		ck_assert_msg(strstr(hpr_strerror(rc), "NULL"), #call ": \"%s\"", \
			      hpr_strerror(rc));                                  \
	} while (0)
	NULL_EINVAL(hpr_fault_in(NULL, 0, 4096));
	NULL_EINVAL(hpr_prefault_start(NULL, 0, 4096));
	NULL_EINVAL(hpr_prefault_wait(NULL));
	NULL_EINVAL(hpr_prefault_progress(NULL, &a, &b));
	NULL_EINVAL(hpr_prefault_cancel(NULL));
	NULL_EINVAL(hpr_fault_error(NULL, &a));
	NULL_EINVAL(hpr_release_lazy(NULL, 0, 4096));
	NULL_EINVAL(hpr_reclaim(NULL, 0, &a));
	ck_assert_uint_eq(a, 0);
	NULL_EINVAL(hpr_collapse(NULL, 0, 4096, &b));
	ck_assert_uint_eq(b, 0);
	NULL_EINVAL(hpr_stats(NULL, &st));
	NULL_EINVAL(hpr_probe(NULL));
	/* snapshot save/load may not be built yet (-ENOSYS); either way a
	 * NULL region is an error, not a crash */
	ck_assert_int_lt(hpr_save(NULL, 1, 0), 0);
	ck_assert_int_lt(hpr_load(NULL, 0, 0, &a), 0);
	ck_assert_int_eq(hpr_probe(&pi), 0);
#undef NULL_EINVAL
}
END_TEST

START_TEST(stats_null_out)
{
	struct hpr_config c;
	hpr_region *r;
	int rc;

	cfg(&c, HPR_BACKEND_THP, NULL);
	c.size = 4 * MiB;
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	rc = hpr_stats(r, NULL);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(range_outside)
{
	struct hpr_config c;
	hpr_region *r;
	size_t sz, done;
	int rc;

	cfg(&c, HPR_BACKEND_THP, NULL);
	c.size = 8 * MiB;
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	sz = hpr_size(r);
	{
		const struct {
			size_t off, len;
		} bad[] = {
			{ sz + 1, 0 },	       { sz, 1 },	  { 0, sz + 1 },
			{ sz - 4096, 8192 },   { SIZE_MAX, 2 },	  { 4096, SIZE_MAX },
			{ SIZE_MAX, SIZE_MAX }, { sz / 2, SIZE_MAX - sz / 4 },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			size_t o = bad[i].off, l = bad[i].len;

#define RANGE_EINVAL(call)                                                         \
	do {                                                                       \
		rc = (call);                                                       \
		ck_assert_msg(rc == -EINVAL, #call " off %#zx len %#zx: %d", o, l, \
			      rc);                                                 \
		ck_assert_msg(strstr(hpr_strerror(rc), "outside"), "\"%s\"",       \
			      hpr_strerror(rc));                                   \
	} while (0)
			RANGE_EINVAL(hpr_fault_in(r, o, l));
			RANGE_EINVAL(hpr_release_lazy(r, o, l));
			RANGE_EINVAL(hpr_collapse(r, o, l, &done));
			RANGE_EINVAL(hpr_prefault_start(r, o, l));
#undef RANGE_EINVAL
		}
	}
	/* nothing was faulted by the refused calls */
	{
		struct t_smaps k;

		ck_assert_int_eq(t_smaps(hpr_base(r), sz, &k), 0);
		ck_assert_uint_eq(k.rss, 0);
	}
	/* the edges themselves are fine */
	ck_assert_int_eq(hpr_fault_in(r, sz, 0), 0);
	ck_assert_int_eq(hpr_fault_in(r, sz - 1, 1), 0);
	ck_assert_int_eq(hpr_prefault_start(r, 0, sz), 0);
	ck_assert_int_eq(hpr_prefault_wait(r), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/*
 * Region names are one printable file name component: a '/' would let the
 * backing file follow a symlink in the checked directory, control bytes
 * would reach the terminal of whoever runs hpr stat.
 */
/* hpr_backend_from_name() is the inverse of hpr_backend_name(): every
 * backend's name comes back as that backend; anything else, including a
 * name in the wrong case or with a trailing space, is -EINVAL with a message
 * that lists the valid names, and *out is left alone. */
START_TEST(backend_names)
{
	static const char *const bad[] = { "",	    "THP",   "thp ", "hugetlbfs",
					   "tmpfs", "memfd", "4k",   "auto\n" };
	enum hpr_backend b;
	int rc;

	for (int k = HPR_BACKEND_AUTO; k <= HPR_BACKEND_HUGETLB; k++) {
		b = (enum hpr_backend)99; /* none of them */
		ck_assert_int_eq(hpr_backend_from_name(hpr_backend_name((enum hpr_backend)k), &b),
				 0);
		ck_assert_int_eq(b, k);
	}
	ck_assert_int_eq(hpr_backend_from_name("hugetlb", &b), 0);
	ck_assert_int_eq(b, HPR_BACKEND_HUGETLB);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = HPR_BACKEND_SHMEM;
		rc = hpr_backend_from_name(bad[i], &b);
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_int_eq(b, HPR_BACKEND_SHMEM);
		ck_assert_msg(strstr(hpr_strerror(rc), "use auto, thp, shmem or hugetlb"), "%s: %s",
			      bad[i], hpr_strerror(rc));
	}
	ck_assert_int_eq(hpr_backend_from_name(NULL, &b), -EINVAL);
	ck_assert_int_eq(hpr_backend_from_name("thp", NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(-EINVAL), "NULL"));
}
END_TEST

START_TEST(bad_names)
{
	static const struct {
		const char *name, *keyword;
	} bad[] = {
		{ "", "1 to 40 bytes" },
		{ "0123456789012345678901234567890123456789x", "1 to 40 bytes" },
		{ ".", "single file name component" },
		{ "..", "single file name component" },
		{ "a/b", "'/'" },
		{ "../../etc", "'/'" },
		{ "esc\x1b[31mred", "0x1b" },
		{ "tab\there", "0x09" },
		{ "sp ace", "0x20" },
		{ "dollar$", "0x24" },
		{ "brack]et", "0x5d" },
		{ "utf8-\xc3\xa9", "0xc3" },
	};
	const char *d = t_mount_tmpfs("huge=always");
	struct hpr_config c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (int b = HPR_BACKEND_AUTO; b <= HPR_BACKEND_SHMEM; b++) {
			char what[96];

			cfg(&c, (enum hpr_backend)b, b == HPR_BACKEND_THP ? NULL : d);
			c.flags = HPR_F_FALLBACK;
			c.name = bad[i].name;
			snprintf(what, sizeof(what), "%s, name #%zu", hpr_backend_name(b), i);
			expect_fail(what, &c, -EINVAL, bad[i].keyword, d);
		}
	}
	/* the edges that are fine */
	cfg(&c, HPR_BACKEND_SHMEM, d);
	c.flags = HPR_F_FALLBACK;
	c.name = "0123456789012345678901234567890123456789";
	{
		hpr_region *r;

		ck_assert_int_eq(hpr_create(&c, &r), 0);
		ck_assert_int_eq(hpr_destroy(r), 0);
		c.name = "a.b_c-d:e+f=g@h,i%j~k";
		ck_assert_int_eq(hpr_create(&c, &r), 0);
		ck_assert_int_eq(hpr_destroy(r), 0);
	}
}
END_TEST

/*
 * A name with a '/' and a symlink planted in the checked directory: the
 * backing file (root's, 0600) must not land in the symlink's target.
 */
START_TEST(name_symlink_escape)
{
	const char *d = t_mount_tmpfs("huge=always");
	const char *elsewhere = t_mount_tmpfs("huge=never");
	struct hpr_config c;
	char link[512];

	snprintf(link, sizeof(link), "%s/hpr-esc", d);
	ck_assert_int_eq(symlink(elsewhere, link), 0);
	cfg(&c, HPR_BACKEND_SHMEM, d);
	c.flags = HPR_F_KEEP_FILE;
	c.name = "esc/x";
	expect_fail("name through a symlink", &c, -EINVAL, "'/'", elsewhere);
	ck_assert_int_eq(t_dir_entries(elsewhere), 0);
	ck_assert_int_eq(unlink(link), 0);
}
END_TEST

/*
 * The directory is swapped for a symlink after it was checked (a race an
 * unprivileged user who owns a parent directory can win): the backing file
 * must still be created in the directory that was checked. The fake
 * read_all hook does the swap when the check reads mountinfo, after the
 * directory was statfs'd.
 */
static char swap_dir[512], swap_old[512], swap_target[512];
static int swaps;

static ssize_t swap_read_all(const char *path, char **out)
{
	if (!swaps && !strcmp(path, "/proc/self/mountinfo")) {
		ck_assert_int_eq(rename(swap_dir, swap_old), 0);
		ck_assert_int_eq(symlink(swap_target, swap_dir), 0);
		swaps++;
	}
	return hpr__os_real.read_all(path, out);
}

START_TEST(dir_swapped_after_check)
{
	const char *d = t_mount_tmpfs("huge=always");
	const char *target = t_mount_tmpfs("huge=never");
	struct hpr_config c;
	hpr_region *r;
	char fdp[64], got[1024];
	ssize_t n;

	snprintf(swap_dir, sizeof(swap_dir), "%s/dir", d);
	snprintf(swap_old, sizeof(swap_old), "%s/dir.checked", d);
	snprintf(swap_target, sizeof(swap_target), "%s", target);
	ck_assert_int_eq(mkdir(swap_dir, 0700), 0);
	swaps = 0;
	fake_os = hpr__os_real;
	fake_os.read_all = swap_read_all;
	hpr__os_set(&fake_os);
	cfg(&c, HPR_BACKEND_SHMEM, swap_dir);
	c.flags = HPR_F_KEEP_FILE;
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	hpr__os_set(NULL);
	ck_assert_msg(swaps == 1, "the check did not read mountinfo through read_all: "
				  "the swap did not happen, the test tests nothing");
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", hpr_fd(r));
	n = readlink(fdp, got, sizeof(got) - 1);
	ck_assert_int_gt(n, 0);
	got[n] = '\0';
	printf("backing file after the swap: %s\n", got);
	ck_assert_msg(!strncmp(got, swap_old, strlen(swap_old)) && got[strlen(swap_old)] == '/',
		      "backing file %s is not in the checked directory %s", got, swap_old);
	ck_assert_int_eq(t_dir_entries(target), 0);
	ck_assert_int_eq(t_dir_entries(swap_old), 1);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(unlink(got), 0);
	ck_assert_int_eq(unlink(swap_dir), 0);
	ck_assert_int_eq(rmdir(swap_old), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("badinput");
	TCase *tc = tcase_create("badinput");

	tcase_add_test(tc, size_zero);
	tcase_add_test(tc, size_overflow);
	tcase_add_test(tc, unknown_backend);
	tcase_add_test(tc, unknown_flags);
	tcase_add_test(tc, bad_page_size);
	tcase_add_test(tc, missing_dir);
	tcase_add_test(tc, file_not_dir);
	tcase_add_test(tc, not_tmpfs);
	tcase_add_test(tc, wrong_fs_for_backend);
	tcase_add_test(tc, tmpfs_too_small);
	tcase_add_test(tc, hugetlbfs_too_small);
	tcase_add_test(tc, pool_too_small);
	tcase_add_test(tc, pool_shrank_before_mmap);
	tcase_add_test(tc, config_struct);
	tcase_add_test(tc, null_region);
	tcase_add_test(tc, stats_null_out);
	tcase_add_test(tc, range_outside);
	tcase_add_test(tc, bad_names);
	tcase_add_test(tc, backend_names);
	tcase_add_test(tc, name_symlink_escape);
	tcase_add_test(tc, dir_swapped_after_check);
	tcase_add_test(tc, failed_fixed_map_keeps_other_mappings);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
