/* SPDX-License-Identifier: MIT */
/*
 * A long /proc/self/mountinfo (issue 15, item 6). A Kubernetes node or a
 * snap-heavy desktop has hundreds of mounts; the mount check read
 * mountinfo into a fixed 64 KiB buffer, so a huge=always tmpfs listed
 * past it was taken for huge=never and every page got a needless
 * MADV_COLLAPSE (and on kernels without collapse hpr_create failed).
 *
 * Each test enters its own mount namespace (the mounts vanish with the
 * test's process), mounts 1,200 small tmpfs instances, and then the
 * huge=always tmpfs last, so its mountinfo line is past 64 KiB. A shmem
 * region there must be taken for huge=always: no page collapsed, no
 * MADV_COLLAPSE issued at all where the kernel has PAGEMAP_SCAN (counted
 * through the OS hook), and all of it huge-mapped per smaps.
 */
#include "common.h"
#include "backend.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define NMOUNTS 1200
#define REGION (16 * MiB)

static _Atomic unsigned collapses;
static struct hpr_os_ops count_os;

static int count_madvise(void *a, size_t len, int adv)
{
	if (adv == MADV_COLLAPSE && len) /* the probe's len 0 call is no collapse */
		atomic_fetch_add(&collapses, 1);
	return hpr__os_real.madvise(a, len, adv);
}

/* Bytes of mountinfo before the line of the mount on dir, and in all
 * (read here with stdio, not with the library's reader). */
static void mountinfo_offset(const char *dir, size_t *off, size_t *total)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, pat[320];
	size_t cap = 0;
	ssize_t n;
	bool found = false;

	ck_assert_ptr_nonnull(f);
	snprintf(pat, sizeof(pat), " %s ", dir);
	*total = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (!found && strstr(line, pat)) {
			*off = *total;
			found = true;
		}
		*total += (size_t)n;
	}
	free(line);
	fclose(f);
	ck_assert_msg(found, "%s not in mountinfo", dir);
}

static char mi_base[] = "/tmp/hpr-mi-XXXXXX";

/* A private mount namespace for this test's process, NMOUNTS small
 * tmpfs mounts, then a tmpfs with opts; returns its directory. */
static const char *many_mounts_then(const char *opts)
{
	static char dir[300];
	char *base = mi_base;
	size_t off, total;

	if (unshare(CLONE_NEWNS))
		t_skip("unshare(CLONE_NEWNS): %s", strerror(errno));
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_ptr_nonnull(mkdtemp(base));
	ck_assert_int_eq(mount("none", base, "tmpfs", 0, "size=16m"), 0);
	for (int i = 0; i < NMOUNTS; i++) {
		char d[300];

		snprintf(d, sizeof(d), "%s/filler-mount-%04d", base, i);
		ck_assert_int_eq(mkdir(d, 0700), 0);
		ck_assert_msg(!mount("none", d, "tmpfs", 0, "size=4k"), "mount %d: %s", i,
			      strerror(errno));
	}
	snprintf(dir, sizeof(dir), "%s/huge", base);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_msg(!mount("none", dir, "tmpfs", 0, opts), "mount %s: %s", opts, strerror(errno));
	mountinfo_offset(dir, &off, &total);
	printf("mountinfo: %zu bytes, the %s tmpfs at byte %zu\n", total, opts, off);
	ck_assert_uint_gt(off, 64 * 1024);
	return dir;
}

START_TEST(huge_always_past_64k)
{
	const char *dir = many_mounts_then("huge=always,size=64m");
	struct hpr__mountcheck m;
	struct hpr_probe_info in;
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *r;

	/* what the mount check sees */
	ck_assert_int_eq(hpr__mount_check(dir, &m), 0);
	ck_assert_int_eq(m.huge, HPR_SHMEM_ALWAYS);
	ck_assert_str_eq(m.mnt_point, dir);

	/* what a region on it does: huge from the fault path, no collapse */
	count_os = hpr__os_real;
	count_os.madvise = count_madvise;
	hpr__os_set(&count_os);
	r = t_region(HPR_BACKEND_SHMEM, dir, REGION, 1, HPR_F_PREFAULT);
	hpr__os_set(NULL);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_msg(st.collapsed_pages == 0,
		      "%llu pages collapsed on a huge=always mount: taken for huge=never",
		      (unsigned long long)st.collapsed_pages);
	/* before 6.7 (no PAGEMAP_SCAN) MADV_COLLAPSE is how the fault path
	 * checks that a page came out huge; with it, nothing calls collapse */
	ck_assert_int_eq(hpr_probe(&in), 0);
	if (in.have_pagemap_scan)
		ck_assert_msg(atomic_load(&collapses) == 0,
			      "%u MADV_COLLAPSE calls on a huge=always mount: taken for huge=never",
			      atomic_load(&collapses));
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_msg(k.shmem_pmd == REGION, "smaps: %zu of %lu bytes huge-mapped", k.shmem_pmd,
		      (unsigned long)REGION);
	hpr_destroy(r);
	/* the mounts go with this namespace; the directory would stay */
	ck_assert_int_eq(umount2(mi_base, MNT_DETACH), 0);
	ck_assert_int_eq(rmdir(mi_base), 0);
}
END_TEST

static Suite *mountinfo_suite(void)
{
	Suite *s = suite_create("mountinfo");
	TCase *tc = tcase_create("long");

	tcase_add_test(tc, huge_always_past_64k);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(mountinfo_suite, T_NEED_ROOT)
