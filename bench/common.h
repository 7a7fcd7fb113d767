/* SPDX-License-Identifier: MIT */
/*
 * What the benchmark programs in bench/ share (bench/common.c, linked into
 * each of them; not a benchmark itself):
 *
 *  - a monotonic clock, fatal errors, sysfs/procfs strings, medians, smaps;
 *  - the system set-up: HPR_SYSTEM_LOCK (tests/hpr_env.h: the suites change THP
 *    modes and hugetlb pools under it), a private mount namespace, private
 *    tmpfs/hugetlbfs mounts and the hugetlb pool size, which
 *    bench_restore() undoes: at exit, on SIGINT/SIGTERM, or when called;
 *  - the command line: --quick, --size MiB, --reps N, --json FILE and a
 *    bench's own options, with one usage line.
 */
#ifndef HPR_BENCH_COMMON_H
#define HPR_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "hpr_env.h"

/* Seconds on CLOCK_MONOTONIC (inline: it runs inside the timed loops). */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* perror(what), exit(1). */
_Noreturn void bench_die(const char *what);

/* Write v to path: 0, or -1 when it cannot be opened or written. */
int bench_write_str(const char *path, const char *v);
/* path's content up to its first newline into buf; "" when unreadable. */
void bench_read_str(const char *path, char *buf, size_t len);

/* qsort() order of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);
/* Sort v[0..n) and return its median (the mean of the middle two for even n). */
double bench_median(double *v, int n);

/* Bytes huge-mapped (THP, shmem/file PMDs, hugetlb) in the VMAs that
 * overlap [p, p+len), from /proc/self/smaps; -1 when it cannot be read. */
ssize_t bench_huge_bytes(const void *p, size_t len);
/* Touch len bytes of fresh anonymous memory (MADV_HUGEPAGE first when thp)
 * and free them, so that the host backs the memory the next allocations
 * get (this VM's host takes freed memory back); -1 when mmap fails. */
int bench_touch(size_t len, bool thp);

/* ---- system set-up ---- */
#define BENCH_LOCK HPR_SYSTEM_LOCK
#define BENCH_POOL_2M "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
#define BENCH_POOL_DEFAULT "/proc/sys/vm/nr_hugepages"

/* As root, take BENCH_LOCK (held until exit): 0, 1 when not root (no
 * lock), or -1 with errno. */
int bench_lock_system(void);
/* HPR_TEST_NO_SKIP is set (tests/hpr_env.h): a row a bench cannot
 * produce fails it instead of being marked n/a. */
bool bench_no_skip(void);
/* Enter a private mount namespace (mounts vanish with the process). */
int bench_private_ns(void);
/* For a bench that needs root: unless root, print need_root and exit 77;
 * then take BENCH_LOCK and enter a private mount namespace, or die. */
void bench_isolate(const char *need_root);
/* Mount fstype with opts on a fresh /tmp/hpr-bench-XXXXXX, its path into
 * dir; bench_restore() unmounts and removes it. 0, or -1 with errno. */
int bench_mount_tmp(const char *fstype, const char *opts, char *dir, size_t len);
/* Read the hugetlb pool at path (BENCH_POOL_*), which bench_restore()
 * writes back, and return it. */
unsigned long bench_pool_save(const char *path);
/* Set the pool of bench_pool_save() to pages: 0, or -1 when the write
 * failed; *got (when not NULL) is the size read back. */
int bench_pool_set(unsigned long pages, unsigned long *got);
/* Restore the pool and unmount what bench_mount_tmp() mounted; once. */
void bench_restore(void);

/* ---- command line ---- */
enum bench_opt_type {
	BENCH_T_CALL,	/* no value: calls fn (--quick: small sizes, few reps) */
	BENCH_T_MIB,	/* size_t *: a decimal count of MiB, stored in bytes */
	BENCH_T_INT,	/* int *: atoi() */
	BENCH_T_DOUBLE, /* double *: atof() */
	BENCH_T_STR,	/* const char **: the argument itself */
};

struct bench_opt {
	const char *name; /* "--reps" */
	const char *meta; /* "N": the usage line shows [--reps N]; NULL: no value */
	enum bench_opt_type type;
	void *val;
	void (*fn)(void);
};

/* clang-format off */
#define BENCH_QUICK(f) { "--quick", NULL, BENCH_T_CALL, NULL, f }
#define BENCH_SIZE(p) { "--size", "MiB", BENCH_T_MIB, p, NULL }
#define BENCH_REPS(p) { "--reps", "N", BENCH_T_INT, p, NULL }
#define BENCH_JSON(p) { "--json", "FILE", BENCH_T_STR, p, NULL }
#define BENCH_INT(name, meta, p) { name, meta, BENCH_T_INT, p, NULL }
#define BENCH_DOUBLE(name, meta, p) { name, meta, BENCH_T_DOUBLE, p, NULL }
#define BENCH_END { NULL, NULL, BENCH_T_CALL, NULL, NULL }
/* clang-format on */

/*
 * Parse argv against opts (ending with BENCH_END), in order: a later
 * option overrides an earlier one (--size 64 --quick gives --quick's size).
 * On an unknown option or a missing value, print
 *   usage: PROG [--quick] [--size MiB] ...
 * (opts in their order) and return 2, for main to return; else 0.
 */
int bench_args(int argc, char **argv, const struct bench_opt *opts);
/* 0 when 1 <= reps <= max_reps and size >= min_mib MiB; else print
 * "NAME: reps must be 1..MAX and size >= MIN MiB" and return 2. */
int bench_limits(const char *name, int reps, int max_reps, size_t size, size_t min_mib);

#endif
