/* SPDX-License-Identifier: MIT */
/*
 * Locked memory: regions created with HPR_F_LOCK, and regions of an
 * application that called mlockall(MCL_CURRENT | MCL_FUTURE) (in a forked
 * child, so the suite's process stays unlocked). The kernel refuses
 * MADV_DONTNEED and MADV_FREE on VM_LOCKED memory (EINVAL), so:
 *  - hpr_load zeroes the snapshot's holes in place (they stay resident and
 *    locked) instead of discarding them;
 *  - hpr_release_lazy is a state change (contents and residency stay), and
 *    hpr_fault_in takes the page back at no cost;
 *  - hpr_reclaim gives the memory back (MADV_DONTNEED_LOCKED / a punched
 *    hole), and a later hpr_fault_in brings the page back, locked.
 * Residency is checked with mincore, the lock in smaps' VmFlags, contents
 * byte for byte. Sanitizer builds: ASan/TSan intercept mlock and mlockall
 * as no-ops, so there the lock itself is not checked and the mlockall
 * cases do not run.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PS (2 * MiB)
#define NP 4

/* Every VMA over [a, a+len) is VM_LOCKED ("lo" in smaps' VmFlags). The
 * VMAs may reach past the region (neighbours merge), so their Locked:
 * bytes are no measure of the region; the flag and mincore are exact. */
static bool vmas_locked(const void *a, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	uintptr_t lo = (uintptr_t)a, hi = lo + len, s = 0, e = 0;
	bool all = true;
	int seen = 0;
	char line[512];

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long x, y; /* not into s, e: "FilePmdMapped:" scans 0xf */

		if (sscanf(line, "%lx-%lx ", &x, &y) == 2) {
			s = x;
			e = y;
			continue;
		}
		if (!strncmp(line, "VmFlags:", 8) && s < hi && e > lo) {
			seen++;
			all = all && strstr(line, " lo") != NULL;
		}
	}
	fclose(f);
	return seen && all;
}

/* Resident bytes of the region, 4 KiB by 4 KiB (mincore). */
static size_t rss(hpr_region *r)
{
	size_t n = hpr_size(r) / 4096, got = 0;
	unsigned char *v = malloc(n);

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(mincore(hpr_base(r), hpr_size(r), v), 0);
	for (size_t i = 0; i < n; i++)
		got += (v[i] & 1) * 4096;
	free(v);
	return got;
}

static hpr_region *mk(enum hpr_backend b, unsigned flags)
{
	/* FALLBACK: a memfd gets base pages while shmem_enabled is never, and
	 * mlockall(MCL_FUTURE) populates a THP mapping before it is marked
	 * MADV_HUGEPAGE; this suite is about locking, not about huge pages */
	return t_region(b, NULL, NP * PS, 0, flags | HPR_F_FALLBACK);
}

static void fill(hpr_region *r, size_t p, int c)
{
	ck_assert_int_eq(hpr_fault_in(r, p * PS, PS), 0);
	memset((char *)hpr_base(r) + p * PS, c, PS);
}

static bool page_all(hpr_region *r, size_t p, int c)
{
	const unsigned char *a = (const unsigned char *)hpr_base(r) + p * PS;

	for (size_t i = 0; i < PS; i++)
		if (a[i] != (unsigned char)c)
			return false;
	return true;
}

/* A snapshot of a region: pages 0 and 2 data, 1 never faulted, 3 zeros. */
static int snapshot(void)
{
	hpr_region *r = mk(HPR_BACKEND_THP, 0);
	int fd = memfd_create("hpr-locked-snap", MFD_CLOEXEC), rc;

	ck_assert_int_ge(fd, 0);
	fill(r, 0, 0x11);
	fill(r, 2, 0x22);
	fill(r, 3, 0);
	rc = hpr_save(r, fd, 0);
	ck_assert_msg(rc == 0, "save: %s", hpr_strerror(rc));
	hpr_destroy(r);
	return fd;
}

/* Load into a locked region full of other data: it works, the holes read
 * as zeros, everything stays resident and locked. */
static void load_locked(enum hpr_backend b, unsigned flags)
{
	int fd = snapshot(), rc;
	hpr_region *q = mk(b, flags);
	size_t changed = 0;

	for (size_t p = 0; p < NP; p++)
		fill(q, p, 0x77);
	ck_assert(T_SANITIZED || vmas_locked(hpr_base(q), NP * PS));
	rc = hpr_load(q, fd, 0, &changed);
	ck_assert_msg(rc == 0, "load into a locked region: %d %s", rc, hpr_strerror(rc));
	ck_assert_uint_eq(changed, NP * PS);
	/* before reading the holes, which would fault them in */
	ck_assert_uint_eq(rss(q), NP * PS);
	ck_assert(T_SANITIZED || vmas_locked(hpr_base(q), NP * PS));
	ck_assert(page_all(q, 0, 0x11));
	ck_assert(page_all(q, 1, 0));
	ck_assert(page_all(q, 2, 0x22));
	ck_assert(page_all(q, 3, 0));
	hpr_destroy(q);
	close(fd);
}

/* Release is a state change; reclaim gives memory back; fault-in brings
 * it back locked. */
static void release_locked(enum hpr_backend b, unsigned flags)
{
	hpr_region *q = mk(b, flags);
	struct hpr_stats st;
	size_t got = 0;
	int rc;

	for (size_t p = 0; p < NP; p++)
		fill(q, p, 0x30 + (int)p);
	rc = hpr_release_lazy(q, 1 * PS, 2 * PS);
	ck_assert_msg(rc == 0, "release of locked memory: %d %s", rc, hpr_strerror(rc));
	ck_assert_int_eq(hpr_stats(q, &st), 0);
	ck_assert_uint_eq(st.pages_lazy, 2);
	ck_assert_uint_eq(rss(q), NP * PS);
	ck_assert(T_SANITIZED || vmas_locked(hpr_base(q), NP * PS));
	/* reuse before reclaim: free, contents intact */
	ck_assert_int_eq(hpr_fault_in(q, 1 * PS, PS), 0);
	ck_assert(page_all(q, 1, 0x31));
	rc = hpr_reclaim(q, 0, &got);
	ck_assert_msg(rc == 0, "reclaim of locked memory: %d %s", rc, hpr_strerror(rc));
	ck_assert_uint_eq(got, PS);
	ck_assert_uint_eq(rss(q), (NP - 1) * PS); /* the kernel has it back */
	ck_assert_int_eq(hpr_fault_in(q, 2 * PS, PS), 0);
	ck_assert_uint_eq(rss(q), NP * PS);
	ck_assert(page_all(q, 2, 0));
	ck_assert(T_SANITIZED || vmas_locked(hpr_base(q), NP * PS));
	ck_assert(page_all(q, 0, 0x30) && page_all(q, 3, 0x33));
	hpr_destroy(q);
}

/* Run fn in a child that has called mlockall(MCL_CURRENT | MCL_FUTURE). */
static void under_mlockall(void (*fn)(enum hpr_backend, unsigned), enum hpr_backend b)
{
	int status = 0;
	pid_t pid;

	if (T_SANITIZED) {
		/* not a skip: the HPR_F_LOCK cases run the same library paths */
		fprintf(stderr, "NOTE: sanitizer build: its interceptors make mlock and "
				"mlockall no-ops, so the mlockall cases are not run\n");
		return;
	}
	pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

		/* root needs no limit with CAP_IPC_LOCK; raising it takes
		 * CAP_SYS_RESOURCE, which a container may lack */
		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			fprintf(stderr, "note: RLIMIT_MEMLOCK stays: %s\n", strerror(errno));
		if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
			fprintf(stderr, "mlockall: %s\n", strerror(errno));
			_exit(2);
		}
		fn(b, 0);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the mlockall child failed (status %#x, its assertion is above)", status);
}

START_TEST(load_flag_lock_thp)
{
	load_locked(HPR_BACKEND_THP, HPR_F_LOCK);
}
END_TEST

START_TEST(load_flag_lock_shmem)
{
	load_locked(HPR_BACKEND_SHMEM, HPR_F_LOCK);
}
END_TEST

START_TEST(load_mlockall_thp)
{
	under_mlockall(load_locked, HPR_BACKEND_THP);
}
END_TEST

START_TEST(load_mlockall_shmem)
{
	under_mlockall(load_locked, HPR_BACKEND_SHMEM);
}
END_TEST

START_TEST(release_flag_lock_thp)
{
	release_locked(HPR_BACKEND_THP, HPR_F_LOCK);
}
END_TEST

START_TEST(release_flag_lock_shmem)
{
	release_locked(HPR_BACKEND_SHMEM, HPR_F_LOCK);
}
END_TEST

START_TEST(release_mlockall_thp)
{
	under_mlockall(release_locked, HPR_BACKEND_THP);
}
END_TEST

START_TEST(release_mlockall_shmem)
{
	under_mlockall(release_locked, HPR_BACKEND_SHMEM);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("locked");
	TCase *tc = tcase_create("locked");

	tcase_add_test(tc, load_flag_lock_thp);
	tcase_add_test(tc, load_flag_lock_shmem);
	tcase_add_test(tc, load_mlockall_thp);
	tcase_add_test(tc, load_mlockall_shmem);
	tcase_add_test(tc, release_flag_lock_thp);
	tcase_add_test(tc, release_flag_lock_shmem);
	tcase_add_test(tc, release_mlockall_thp);
	tcase_add_test(tc, release_mlockall_shmem);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
