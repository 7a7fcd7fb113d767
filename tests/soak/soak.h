/* SPDX-License-Identifier: MIT */
/*
 * The soak (tests/soak/soak.c): threads doing random operations on regions
 * of every backend against a byte model, with fork, a memory cgroup and a
 * hugetlb pool that runs dry. See docs/soak.md.
 *
 *   soak.c    options, the regions, the operations and their threads
 *   model.c   what each page must hold, and the check
 *   system.c  what the soak sets up and must leave as it found it: pool,
 *             mounts, fds, the memory cgroup, snapshot files
 */
#ifndef HPR_SOAK_H
#define HPR_SOAK_H

#include "model.h"

#include <hpregion/hpregion.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

/* Parts that trip a known defect of issue 15 on commit 61092ea; --avoid N
 * switches the part for item N off (see docs/soak.md). 20 and up are
 * defects the soak found. */
#define SK_AVOID(n) (1u << (n))
#define SK_AVOID_KNOWN                                                                        \
	(SK_AVOID(1) | SK_AVOID(2) | SK_AVOID(3) | SK_AVOID(4) | SK_AVOID(5) | SK_AVOID(10) | \
	 SK_AVOID(20) | SK_AVOID(21) | SK_AVOID(22))

struct sk_opts {
	uint64_t seed;
	double duration;
	unsigned threads;
	unsigned avoid; /* SK_AVOID() bits */
	bool no_cgroup, no_hugetlb, no_fork;
	bool explain;	     /* on a loss, say whose data the lost block holds */
	unsigned pool_pages; /* 2 MiB hugetlb pool the soak sets */
	/* cgroup worker mode (the soak execs itself into the cgroup) */
	const char *cg_dir;
	int report_fd;
	const char *shmem_dir, *snap_dir, *disk_dir;
};

enum sk_op {
	OP_FAULT,
	OP_WRITE,
	OP_VERIFY,
	OP_RELEASE,
	OP_RECLAIM,
	OP_COLLAPSE,
	OP_PREFAULT,
	OP_STATS,
	OP_SAVE,
	OP_LOAD,
	OP_CHURN,
	OP_RECREATE,
	OP_FORK,
	SK_NOPS
};

/* What a run counts; the cgroup worker sends its copy back over a pipe. */
struct sk_counts {
	uint64_t ops[SK_NOPS];
	/* refusals the contract allows: -ENOMEM (pool dry, cgroup limit),
	 * -EOPNOTSUPP (no free huge page), -EAGAIN (collapse: pages busy) */
	uint64_t refused[SK_NOPS];
	uint64_t verified, lost, unverifiable;
	uint64_t failures;
};

/* ---- system.c ---- */
struct sk_baseline {
	int fds, mounts;
	unsigned long pool_nr, pool_free, pool_resv, pool_surp;
};
void sk_baseline(struct sk_baseline *b);
/* Compare with b; prints what differs, returns the number of differences.
 * wait_pool: give the hugetlb pool up to 5 s to come back (issue 15 #10). */
int sk_baseline_check(const struct sk_baseline *b, bool wait_pool);
/* Mount what the soak needs in its private namespace; set the pool. */
int sk_system_setup(struct sk_opts *o);
/* Unmount and remove what sk_system_setup() made; returns failures. */
int sk_system_teardown(const struct sk_opts *o);
/* Memory cgroup v1 child of our own cgroup, limit bytes, OOM killer off
 * (charges beyond the limit fail with -ENOMEM instead of killing).
 * Returns 0 or -errno; dir receives its path. */
int sk_cgroup_create(char *dir, size_t len, size_t limit);
int sk_cgroup_join(const char *dir);
/* Raise the limit (a worker stuck at it) and report whether it was under
 * OOM. */
bool sk_cgroup_unstick(const char *dir);
int sk_cgroup_remove(const char *dir);
/* Copy src to dst the way cp --sparse=always does: zero 4 KiB blocks become
 * holes. Returns 0 or -errno. */
int sk_sparse_copy(const char *src, const char *dst);
/* Open fds (list: print them); the library's cached /proc/self/pagemap fd
 * is not counted. */
int sk_count_fds(bool list);
int sk_count_mounts(void);

#endif
