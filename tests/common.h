/* SPDX-License-Identifier: MIT */
/*
 * Test harness shared by the Check suites.
 *
 *  - HPR_TEST_MAIN(suite_fn, needs) enters a private mount namespace (so the
 *    tmpfs/hugetlbfs mounts a suite makes vanish with it), runs the suite
 *    with one forked process per test, and exits 0, 1, or 77 (skip).
 *  - t_skip() prints why and exits 77; with HPR_TEST_NO_SKIP set (to
 *    anything but "" or "0"; .ci/run sets 1: CI has every capability) a
 *    skip is a failure (exit 1). hpr_env.h defines the flag and the
 *    system lock (HPR_SYSTEM_LOCK) once.
 *  - t_unavailable() is for capabilities machines of our kind differ in
 *    (1 GiB pages, anonymous VMA names, the hugetlb cgroup controller):
 *    where one is missing the test says so loudly and passes, unless
 *    HPR_TEST_REQUIRE names it (the VM matrix's guests promise them), and
 *    then it fails.
 *  - System settings a test changes (hugetlb pool, THP sysfs modes) are
 *    restored when the suite's main process exits.
 *  - t_smaps() reads /proc/self/smaps with its own parser, independent of
 *    the library's, so assertions check the kernel, not our bookkeeping.
 */
#ifndef HPR_TEST_COMMON_H
#define HPR_TEST_COMMON_H

#define _GNU_SOURCE
#include "hpr_env.h"

#include <check.h>
#include <hpregion/hpregion.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define T_NEED_ROOT (1u << 0) /* mounts, nr_hugepages */
/* Root and a private mount namespace, without the system lock: for suites
 * that change nothing system-wide but their own mounts. A test case of such
 * a suite that does change the system (the hugetlb pool) takes the lock
 * for its run with tcase_add_unchecked_fixture(tc, t_system_lock_begin,
 * t_system_lock_end). */
#define T_NEED_MOUNTS (1u << 1)
/* In the suite's main process (an unchecked fixture): take the system lock
 * (waiting for whoever holds it), and at the end restore what the test
 * case's tests changed and let the lock go. No-ops when the suite holds
 * the lock already (T_NEED_ROOT, or inherited). */
void t_system_lock_begin(void);
void t_system_lock_end(void);

struct t_smaps {
	size_t size, rss, anon_huge, shmem_pmd, file_pmd, hugetlb, lazyfree;
	int vmas;
};

void t_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Capabilities the environment promises: HPR_TEST_REQUIRE is a comma- or
 * space-separated list of names (T_CAP_*). */
#define T_CAP_GIB "gib"			  /* 1 GiB hugetlb pages, a pool of >= 2 */
#define T_CAP_ANON_NAMES "anon_names"	  /* PR_SET_VMA_ANON_NAME */
#define T_CAP_HUGETLB_CG "hugetlb_cgroup" /* a hugetlb cgroup controller */
bool t_required(const char *cap);
/* cap is missing here. Required (HPR_TEST_REQUIRE): the test fails with
 * why. Otherwise prints "NOTRUN: cap: why" to stdout (the VM guests report
 * these lines as VMNOTRUN) and returns: the caller returns too, and the
 * test passes without having run. */
void t_unavailable(const char *cap, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Mount a tmpfs with opts (e.g. "huge=always,size=1g") on a fresh dir. */
const char *t_mount_tmpfs(const char *opts);
/* Mount hugetlbfs with opts (e.g. "pagesize=2M" or NULL). */
const char *t_mount_hugetlbfs(const char *opts);
/* Set the hugetlb pool of page size kb (2048, 1048576) to n pages; the old
 * value comes back at exit. Returns how many pages the kernel gave. */
unsigned long t_hugetlb_pool(unsigned long kb, unsigned long n);
/* Exactly n 2 MiB hugetlb pages and no overcommit (so what AUTO sees is
 * the pool), compacting memory once if the kernel gives fewer; skips if it
 * still cannot. */
void t_need_pool_2m(unsigned long n);
/* The same for 1 GiB pages; skips (t_skip) when the kernel or CPU has none
 * or MemAvailable cannot spare n GiB with 1 GiB left over. */
bool t_need_pool_1g(unsigned long n);
unsigned long t_hugetlb_free(unsigned long kb);
unsigned long t_hugetlb_resv(unsigned long kb);
unsigned long t_hugetlb_surp(unsigned long kb);
/* A config for size bytes on backend b (path: a tmpfs or hugetlbfs
 * directory, or NULL), workers (0: the default) and flags; the rest as
 * hpr_config_init() leaves it. */
void t_config(struct hpr_config *c, enum hpr_backend b, const char *path, size_t size,
	      unsigned workers, unsigned flags);
/* hpr_create() a region of size bytes on backend b (path: a tmpfs or
 * hugetlbfs directory, or NULL), workers (0: the default) and flags; fails
 * the test with hpr_strerror()'s message if it cannot. */
hpr_region *t_region(enum hpr_backend b, const char *path, size_t size, unsigned workers,
		     unsigned flags);
/* Write a sysfs/procfs file; the old content (or bracketed mode) comes back
 * at exit. Returns 0 or -errno. */
int t_sysfs_set(const char *path, const char *val);
/* Write val to dir/file once (a cgroup's control file, say), nothing put
 * back. Returns 0 or -errno (the write's: a controller refusing the value). */
int t_write_at(const char *dir, const char *file, const char *val);
/* Kernel's view of [addr, addr+len): sums of VMAs overlapping it. */
int t_smaps(const void *addr, size_t len, struct t_smaps *out);
/* Lines in /proc/self/maps (to prove nothing was left mapped). Compare
 * around the second of two equal calls: the first may fill glibc's thread
 * stack cache. t_run_suite() limits malloc to one arena, so threads that
 * happen to overlap do not add 64 MiB heaps between the two counts. */
int t_maps_count(void);
/* Lines in a file (/proc/self/mountinfo: mounts), or -1. */
int t_count_lines(const char *path);
/* Sanitizer builds: ASan's allocator and shadow split and add VMAs on
 * their own, so a /proc/self/maps line count is only exact without them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define T_SANITIZED 1
#endif
#endif
#ifndef T_SANITIZED
#define T_SANITIZED 0
#endif
/* Record every range the library maps and unmaps through its OS layer (a
 * pass-through hook over whatever hooks are in force, fakes included) and
 * return, at the end, how many bytes it mapped and has not unmapped. Exact
 * in every build, sanitizers too; t_maps_count() is the kernel's check. */
void t_track_begin(void);
size_t t_track_end(void);
/* Number of entries in a directory (no file left behind). */
int t_dir_entries(const char *dir);
/* /proc/meminfo value in its own unit, or -1. */
long long t_meminfo(const char *key);
/* HPR_TEST_QUICK is on (hpr_env.h): fewer rounds in long loops. */
bool t_quick(void);
/* Drop caches/compact so huge pages are available. */
void t_compact(void);

/* The hpr command: next to the suite (the VM guests' /tests) or in the
 * build's tools/; NULL when it was not built (HPR_BUILD_TOOLS=OFF). */
const char *t_hpr_path(void);
/* Run `hpr ARGS` and keep its stdout in out, every blank removed (so JSON
 * can be matched with strstr whatever its layout). Returns the exit status,
 * or -1 when it could not run. */
int t_hpr(const char *args, char *out, size_t len);

/* What t_run_suite() does before it runs the tests, for programs that are
 * not Check suites (tests/soak/): take the system lock and enter a
 * private mount namespace (T_NEED_ROOT), and restore what the t_* helpers
 * changed at exit or when killed. */
void t_harness_begin(unsigned needs);
int t_run_suite(Suite *s, unsigned needs);
#define HPR_TEST_MAIN(suite_fn, needs)                                         \
	int main(void)                                                         \
	{                                                                      \
		return t_run_suite(suite_fn(), needs);                         \
	}

#define MiB (1024UL * 1024UL)
#define GiB (1024UL * MiB)
#endif
