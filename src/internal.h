/* SPDX-License-Identifier: MIT */
/*
 * Internal declarations shared by the library's source files: the region
 * object, the fault-serialization table, the worker pool, error reporting
 * and the cached probe. Nothing here is part of the ABI.
 */
#ifndef HPR_INTERNAL_H
#define HPR_INTERNAL_H

#define HPR_BUILDING_LIBRARY 1
#include "hpregion/hpregion.h"
#include "os.h"
#include "parse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define HPR_CACHELINE 64
/* Every HPR_F_* flag hpr_config.flags may carry; other bits are -EINVAL. */
#define HPR__F_ALL                                                                            \
	(HPR_F_SHARED | HPR_F_FALLBACK | HPR_F_PREFAULT | HPR_F_PREFAULT_ASYNC | HPR_F_LOCK | \
	 HPR_F_KEEP_FILE | HPR_F_GUARD | HPR_F_PSI_RECLAIM | HPR_F_ATTACH | HPR_F_ATTACH_ONLY | \
	 HPR_F_COLLAPSE_SYNC)
/* Either attach flag: the region is the kept file path/name. */
#define HPR__F_ATTACHING (HPR_F_ATTACH | HPR_F_ATTACH_ONLY)
#define HPR_NODE_WORDS (HPR_MAX_NODES / (8 * sizeof(unsigned long)))

/* Per-huge-page state in the fault table. */
enum hpr_pstate {
	HPR_PS_ABSENT = 0, /* never faulted, or reclaimed */
	HPR_PS_FAULTING,   /* a thread is populating it; others wait */
	HPR_PS_PRESENT,	   /* faulted in; fast path, no lock */
	HPR_PS_LAZY,	   /* released; contents undefined until fault-in */
	HPR_PS_BUSY,	   /* reclaim/collapse/guard transition in progress */
	HPR_PS_COLLAPSING, /* present and usable; a worker is collapsing it in
			    * the background: fault-in takes it as PRESENT,
			    * every other change waits for it like BUSY */
};

/* Present for the fault-in path: PRESENT, or PRESENT being collapsed. */
static inline bool hpr__pstate_usable(uint8_t st)
{
	return st == HPR_PS_PRESENT || st == HPR_PS_COLLAPSING;
}

/* ---- errors.c ---- */
#define HPR__ERR_MSG 512
/* Record a detailed message for err in this thread and return err. */
int hpr__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forget this thread's detail: every public function that can fail calls
 * it first, so the detail hpr_strerror() gives belongs to this call. */
void hpr__err_clear(void);
/* Between hpr__err_quiet(true) and (false) this thread is trying something
 * the library falls back from: hpr__fail logs at DEBUG, not ERROR. Nests. */
void hpr__err_quiet(bool on);
/* Copy this thread's detail of err into buf ("" when it has none). */
void hpr__err_save(int err, char *buf, size_t len);
/* Make (err, msg) this thread's detail without logging it again (a worker
 * logged it); returns err. */
int hpr__err_adopt(int err, const char *msg);
void hpr__log(enum hpr_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Human size: "2 MiB", "1 GiB", "4 KiB"; buf >= 32 bytes. */
const char *hpr__fmt_size(size_t bytes, char *buf, size_t len);

/* ---- probe.c ---- */
struct hpr__caps {
	struct hpr_probe_info info; /* static parts; pool counters at probe time */
	char hugetlb_cg_dir[256];   /* cgroup dir with hugetlb.* files, or "" */
	int hugetlb_cg_v2;
};
const struct hpr__caps *hpr__caps(void);
/* hpr_probe() into this library's whole struct (sized.c copies it out). */
int hpr__probe(struct hpr_probe_info *info);
/* Fresh pool counters for one size (not cached: they change all the time). */
int hpr__hugetlb_pool(size_t page_size, int node, unsigned long *total,
		      unsigned long *free_, unsigned long *resv,
		      unsigned long *surplus);
/* The file that sizes the pool of page_size pages: the per-size sysfs
 * file, which /proc/sys/vm/nr_hugepages is only for the default size. */
const char *hpr__pool_knob(size_t page_size, char *buf, size_t len);
/* nr_overcommit_hugepages of page_size (0 if unreadable). */
unsigned long hpr__hugetlb_overcommit(size_t page_size);
/* Bytes the caller's hugetlb cgroup still allows for page_size, or -1. */
long long hpr__hugetlb_cgroup_room(size_t page_size);
/* The limit file behind it, e.g. "/sys/fs/cgroup/x/hugetlb.2MB.max" (v2)
 * or ".../hugetlb.2MB.limit_in_bytes" (v1), for messages; "" without one. */
const char *hpr__hugetlb_cgroup_file(size_t page_size, char *buf, size_t len);
bool hpr__hugetlb_size_supported(size_t page_size);
/* Reset the cache (tests that change sysfs settings). */
void hpr__probe_reset(void);

/* ---- numa.c ---- */
struct hpr__numa {
	enum hpr_numa_policy policy;
	unsigned long mask[HPR_NODE_WORDS];
	unsigned nr_set;
	bool active; /* a policy other than DEFAULT is applied */
};
/* Parse "0", "0-1", "0,2-3", "all"; validate against online nodes. */
int hpr__numa_parse(const char *s, unsigned long *mask, unsigned *nr_set);
int hpr__numa_setup(struct hpr__numa *n, enum hpr_numa_policy p, const char *nodes);
int hpr__numa_apply(const struct hpr__numa *n, void *addr, size_t len);
/* CPUs workers may run on: the nodes' CPUs ∩ the process affinity. */
int hpr__numa_cpus(const struct hpr__numa *n, void *cpuset /* cpu_set_t */);
int hpr__numa_node_max(void);
/* Per-node residency: one move_pages query per huge page. */
int hpr__numa_residency(void *base, size_t size, size_t page_size,
			size_t *node_bytes, unsigned *nr_nodes);

/* ---- workers.c ---- */
typedef int (*hpr__page_fn)(hpr_region *r, size_t idx, void *arg);
/* Pages [first, last) at once; returns the first error (its page in
 * *err_idx), *done counts the pages done. Stops early on *cancel. */
typedef int (*hpr__batch_fn)(hpr_region *r, size_t first, size_t last, void *arg,
			     const _Atomic bool *cancel, size_t *done, size_t *err_idx);

/* What a job does with its pages. */
struct hpr__job_ops {
	hpr__page_fn page;   /* one page at a time, or */
	hpr__batch_fn batch; /* each grab of pages at once (then page is unused) */
	/* optional: the first page of [first, last) still to do once another
	 * caller's job over the range has ended (a retry skips what it did) */
	size_t (*pending)(const hpr_region *r, size_t first, size_t last);
};

struct hpr__job {
	struct hpr__job_ops ops;
	void *arg;
	size_t first, last; /* page indices [first, last) */
	size_t batch;
	_Atomic size_t cursor;
	_Atomic size_t done; /* pages finished */
	_Atomic int err;
	_Atomic size_t err_idx;
	char err_msg[HPR__ERR_MSG]; /* err's detail, written by whoever set err */
	_Atomic bool cancel;
	_Atomic unsigned running; /* threads still inside the job */
	bool finished;		  /* under pool lock */
};

struct hpr__pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* workers wait for a job */
	pthread_cond_t done_cv; /* submitters wait for completion */
	pthread_t *threads;
	unsigned nthreads;
	bool started, stopping;
	uint64_t gen;		/* bumps per job */
	struct hpr__job *job;	/* current job or NULL */
	unsigned job_workers;	/* workers with id < this take part in job */
	struct hpr__job async;	/* storage for the background job */
	/* idle work (the background collapse): idle(r) does one piece of it
	 * and says whether more is left; a worker with no job runs it while
	 * idle_want is set, one worker at a time */
	bool (*idle)(hpr_region *r);
	/* when idle work falls due without a kick (CLOCK_MONOTONIC ns; 0:
	 * none): a worker with nothing to do sleeps until then at most */
	uint64_t (*due)(hpr_region *r);
	_Atomic bool idle_want; /* set by hpr__pool_kick */
	bool idle_busy;
	bool async_active;	/* async job submitted and not yet waited */
	bool async_forked;	/* the async job was the parent's: cut off by fork */
	int async_result;
};

int hpr__pool_init(hpr_region *r);
/* fork.c's handlers for the pool: lock it (PREPARE), unlock it (PARENT), or
 * make it threadless and idle (CHILD; an async job of the parent's ends
 * there as -ECANCELED). */
void hpr__pool_atfork(hpr_region *r, int phase);
/* Start a library thread named name (at most 15 characters) with every
 * asynchronous signal blocked, pinned to cpus (a cpu_set_t from
 * hpr__numa_cpus(); NULL: not pinned) rather than the starter's affinity.
 * Name, mask and affinity are in place when this returns. stack 0: the
 * default size. Returns 0 or -errno. */
int hpr__thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *name,
		      const void *cpus, size_t stack);
void hpr__pool_destroy(hpr_region *r);
/* Run ops over pages [first,last) with the workers and the caller; returns
 * the first error (lowest page index). */
int hpr__run(hpr_region *r, const struct hpr__job_ops *ops, void *arg, size_t first, size_t last);
/* Have a worker run the pool's idle work (starting the workers if need
 * be). 0, or -errno when no worker could be started. */
int hpr__pool_kick(hpr_region *r);
/* Start ops over [first,last) as the background job on the workers alone
 * (hpr_prefault_wait/_progress/_cancel follow it); -EBUSY while one runs. */
int hpr__run_async(hpr_region *r, const struct hpr__job_ops *ops, void *arg, size_t first,
		   size_t last);

/* ---- pagestate.c: the page state machine (its comment says how) ---- */
#define HPR_PS_BIT(st) (1u << (st))
/* Page idx's state now: one acquire load, no lock (the fast paths). */
static inline uint8_t hpr__page_state(const hpr_region *r, size_t idx);
/*
 * Take huge page idx for a change: wait until it is out of any transition
 * (FAULTING, BUSY; with wait false return -1 at once instead), then, when
 * its state is in the mask from (HPR_PS_BIT()s), mark it to (FAULTING or
 * BUSY) and return 1, else leave it and return 0. *was is the state seen.
 * A page taken must be given back with hpr__page_put.
 */
int hpr__page_take(hpr_region *r, size_t idx, unsigned from, enum hpr_pstate to, bool wait,
		   uint8_t *was);
/* Publish the state to of a page taken in state was, move the page
 * counters from was to to, and wake the page's waiters. */
void hpr__page_put(hpr_region *r, size_t idx, uint8_t was, enum hpr_pstate to);
size_t hpr__slot_count(void);
/* fork.c's handler for the slot table (through hpr__fault_atfork): the
 * table made before a fork, and its locks made new in the child. */
void hpr__pagestate_atfork(int phase);
/* In a forked child: pages that were in a transition (FAULTING, BUSY) on
 * a parent thread become ABSENT, and the page counters are recounted. */
void hpr__fault_table_child(hpr_region *r);

/* ---- cqueue.c: the background collapse queue, a bitmap of pages ---- */
int hpr__cq_init(hpr_region *r);
void hpr__cq_free(hpr_region *r);
/* Queue page idx; true when it was not queued yet. */
bool hpr__cq_add(hpr_region *r, size_t idx);
/* Take a queued page off the queue into *idx; false when it is empty. */
bool hpr__cq_take(hpr_region *r, size_t *idx);
/* Empty the queue (a forked child: no worker of its parent's is here). */
void hpr__cq_clear(hpr_region *r);

/* CLOCK_MONOTONIC in ns (the vDSO: no system call). */
uint64_t hpr__now_ns(void);

/* ---- collapse.c ---- */
/* The pool's idle work: collapse one queued page (false: none queued). */
bool hpr__collapse_idle(hpr_region *r);

/* ---- fault.c ---- */
/* The fault-in job: runs of pages, one populate per run (faultin.c). */
extern const struct hpr__job_ops hpr__fault_ops;
/* Move the recycled pool's zeroed pages into the ABSENT pages of [first,
 * last) on the calling thread; returns how many pages it filled. */
size_t hpr__fault_from_pool(hpr_region *r, size_t first, size_t last);
/* Fault one huge page in (exactly once across threads). */
int hpr__fault_page(hpr_region *r, size_t idx);
/* MADV_COLLAPSE of the huge page at a, retried while the kernel says
 * EAGAIN (pages transiently locked, pinned or off the LRU); a success
 * counts in collapsed_pages when count. 0 or -errno. */
int hpr__collapse_one(hpr_region *r, char *a, bool count);
/* Populate one huge page without the table (the raw step). */
int hpr__populate_page(hpr_region *r, size_t idx);
/* fork.c's handlers for the slot table and the pagemap fd. */
void hpr__fault_atfork(int phase);
/* Is [addr,addr+len) PMD-mapped according to the kernel? 1 yes, 0 no,
 * negative errno when the kernel can't tell (no PAGEMAP_SCAN). */
int hpr__range_is_huge(void *addr, size_t len);
/* Bytes of [lo, hi) mapped in this process (present, not the zero page)
 * and, of those, PMD-mapped or hugetlb, counted over exactly that range
 * whatever VMAs it shares. -EOPNOTSUPP without PAGEMAP_SCAN. */
int hpr__pagemap_count(uintptr_t lo, uintptr_t hi, uint64_t *present, uint64_t *huge);
/* any page of [lo, hi) present or swapped (PAGEMAP_SCAN): 1, 0, -errno */
int hpr__pagemap_any(uintptr_t lo, uintptr_t hi);

/* ---- release.c ---- */
int hpr__release_init(hpr_region *r);
void hpr__release_destroy(hpr_region *r);
/* fork.c's handlers for the reclaimer (CHILD: it is gone; its fds are
 * closed and it starts again at the child's next hpr_release_lazy). */
void hpr__release_atfork(hpr_region *r, int phase);
/* Discard a BUSY huge page's memory now (MADV_DONTNEED / PUNCH_HOLE; on
 * locked memory MADV_DONTNEED_LOCKED). */
int hpr__discard_page(hpr_region *r, size_t idx);
/* Is the region mlocked (HPR_F_LOCK or the application's mlockall)?
 * ask_kernel: read smaps if not known yet (slow path only). */
bool hpr__mem_locked(hpr_region *r, bool ask_kernel);
void hpr__partial_clear(hpr_region *r, size_t off, size_t len);
/* release_delay_ms. hpr__release_idle: the workers' idle work, giving the
 * kernel the held pages whose delay is over (the next falls due by
 * itself: pool.due);
 * hpr__release_due: when the next is due (pool.due). hpr__held_take: a
 * fault-in took LAZY page idx (FAULTING): true when it was held, which
 * makes it PRESENT again as it is (it never left). In a forked child,
 * hpr__release_held_child recounts the held pages after
 * hpr__fault_table_child. */
#define HPR__RELEASE_DELAY_MAX_MS 600000u
void hpr__release_idle(hpr_region *r);
uint64_t hpr__release_due(hpr_region *r);
bool hpr__held_take(hpr_region *r, size_t idx);
void hpr__release_held_child(hpr_region *r);

/* ---- guard.c ---- */
/* Guard mode's mprotect of [off, off+len); a failure is recorded with
 * what it means (vm.max_map_count reached: what to raise). */
int hpr__guard_protect(hpr_region *r, size_t off, size_t len, int prot);

/* ---- fork.c ---- */
enum { HPR__FORK_PREPARE, HPR__FORK_PARENT, HPR__FORK_CHILD };
/*
 * Something fork.c's pthread_atfork handlers call in each phase: a live
 * region, or a per-process kernel handle a forked child must not keep (an
 * io_uring ring: its fd and mappings would keep the parent's ring, and the
 * buffers registered with it, alive for as long as the child lives).
 * atfork() returns false in the child to be forgotten there. Add a handle
 * when it is made and delete it when it is freed, both between
 * hpr__fork_lock() and hpr__fork_unlock(), so a fork sees it either not
 * yet made or tracked.
 */
struct hpr__fork_handle {
	struct hpr__fork_handle *prev, *next;
	bool (*atfork)(struct hpr__fork_handle *h, int phase);
};
void hpr__fork_lock(void);
/* The process has been parent or child of a fork since a region was made:
 * its private pages may be shared copy-on-write with another process. */
bool hpr__forked(void);
void hpr__fork_unlock(void);
void hpr__fork_handle_add(struct hpr__fork_handle *h);
void hpr__fork_handle_del(struct hpr__fork_handle *h);
/* A lock across fork: PREPARE takes it, PARENT releases it, CHILD makes it
 * new (returns true in the child only). */
bool hpr__fork_mutex(pthread_mutex_t *mu, int phase);
/* The library-wide leaf locks: prepare takes them after every handle's,
 * in this order; parent and child go in the reverse. The recycled pool's
 * locks (rpool.c) come first: the pool asks the pagemap and the probe
 * cache while it holds them, never the other way round. */
enum { HPR__FORK_LEAF_POOL, HPR__FORK_LEAF_FAULT, HPR__FORK_LEAF_PROBE, HPR__FORK_LEAVES };
/* Have the handlers call fn(phase) for leaf slot (idempotent; installs the
 * handlers on first use, as hpr__fork_lock does). */
void hpr__fork_leaf(unsigned slot, void (*fn)(int phase));
/* 0, or -ENXIO with advice when r is a private file-backed region that this
 * forked child did not inherit (MADV_DONTFORK): only hpr_destroy is valid. */
int hpr__region_mapped(const hpr_region *r);
/* probe.c: the probe cache's lock across fork */
void hpr__probe_atfork(int phase);

/* ---- lazyload.c (lazyload.h: hpr__lazy_running, hpr__lazy_busy) ---- */
struct hpr__snap_ent;
/* hpr_load(HPR_SNAP_LAZY), called by hpr_load once the snapshot passed its
 * checks (header, table, extents, room): *tab is its page table (host
 * order, r->npages entries, malloc'd), data_off where its pages start.
 * 0: the load runs and owns *tab (set to NULL); 1: userfaultfd cannot be
 * had here (logged, in the stats): hpr_load loads eagerly; or -errno. */
int hpr__lazy_load(hpr_region *r, int fd, struct hpr__snap_ent **tab, uint64_t data_off,
		   size_t *changed);
/* hpr_load(HPR_SNAP_LAZY) before anything else: r can take a lazy load
 * (not attached, locked or guarded) and holds nothing, checked without a
 * look at each page (st_blocks of its file, PAGEMAP_SCAN, else mincore).
 * 0 or -errno with the reason. */
int hpr__lazy_check_region(hpr_region *r);
/* hpr_fault_in during a lazy load: load the saved pages of [first, last)
 * now, in the caller (demand first). 0 or the load's error. */
int hpr__lazy_fault_range(hpr_region *r, size_t first, size_t last);
/* region_free: end the load (cancel), join its threads, free it. */
void hpr__lazy_destroy(hpr_region *r);

/* ---- stats.c ---- */
/* hpr_stats() into this library's whole struct (sized.c copies it out). */
int hpr__stats(hpr_region *r, struct hpr_stats *st);
/* smaps sums over [lo, hi) from /proc/self/smaps (fault.c, beside the
 * pagemap count: what the kernel says of a range) */
int hpr__smaps_range(uintptr_t lo, uintptr_t hi, struct hpr__smaps_sum *sum);

struct hpr_region {
	char *base;
	size_t size;
	size_t page_size;
	unsigned page_shift;
	size_t npages;
	enum hpr_backend backend;
	enum hpr_backend requested; /* what the config asked for */
	unsigned flags;
	int fd;		/* -1 for private anon */
	bool is_memfd;
	char *file_path; /* the file's name in the checked directory, while it exists */
	int dir_fd;	 /* O_PATH fd of that directory while a kept file exists:
			  * a create that fails after the file was kept unlinks it */
	char name[64];
	uint64_t obj_key; /* backing object identity for the lock hash */
	bool attached;	  /* mapped from a kept file (attach.c) */
	bool cow;	  /* a private attach: MAP_PRIVATE of the kept file, fd
			   * read-only; faults read, discards drop the copies */

	bool fault_huge;     /* faults on this mapping give PMD-mapped pages */
	bool collapse_after; /* populate then MADV_COLLAPSE to get huge pages */
	bool locked;	     /* mlocked by HPR_F_LOCK */
	_Atomic bool mem_locked; /* the kernel said VM_LOCKED (mlockall) */
	bool degraded;	     /* HPR_F_FALLBACK chose base pages at create */

	_Atomic uint8_t *state; /* enum hpr_pstate per huge page */
	/* partial lazy releases: per huge page a 512-bit map of released
	 * 1/512ths, allocated on first partial release */
	_Atomic(uint64_t *) *partial;
	pthread_mutex_t partial_mu;

	struct hpr__numa numa;
	unsigned nworkers;
	struct hpr__pool pool;

	/* counters */
	_Atomic uint64_t populate_calls;
	_Atomic uint64_t reclaimed_bytes;
	_Atomic uint64_t collapsed_pages;
	_Atomic uint64_t collapse_queued; /* the background collapse (cqueue.c) */
	_Atomic uint64_t collapse_failed;
	_Atomic size_t cq_pending;	  /* pages queued now */
	_Atomic uint64_t *cq_bits;	  /* one bit per page: queued */
	_Atomic size_t cq_next;		  /* word the next take starts at */
	_Atomic unsigned faulting;	  /* hpr_fault_in calls doing work now */
	_Atomic uint64_t fault_ns;	  /* when the last one started or ended */
	uint64_t cq_wait_ns;		  /* the drainer waits for quiet since */
	_Atomic size_t lazy_pages;
	_Atomic size_t present_pages;
	_Atomic size_t small_pages; /* populated, kernel says not huge, fallback */
	_Atomic int fault_err;
	_Atomic size_t fault_err_off;
	_Atomic int snapshot_io;
	_Atomic int lazy_load;	       /* HPR_LAZY_* of the last lazy load */
	_Atomic int lazy_fallback_err; /* why it was eager */
	/* lazyload.c: the lazy load, from hpr_load(HPR_SNAP_LAZY) until
	 * hpr_load_wait, the next load or hpr_destroy frees it */
	struct hpr__lazy *_Atomic lazy;
	pthread_mutex_t lazy_mu; /* lazy's lifetime against its readers (leaf) */

	/* fork: the live-region list, and what a child inherited */
	struct hpr__fork_handle fork;
	bool not_mapped; /* a forked child: the mapping was MADV_DONTFORK */

	/* lazy release / reclaim */
	struct hpr__lazyq *lazyq; /* release.c: releases in order, for reclaim */
	size_t lazy_budget;
	unsigned psi_stall_us;
	/* release_delay_ms (THP): released pages not yet given to the kernel
	 * ("held"), each with the time of its release (0: not held); the
	 * earliest time one is due (0: none known); release.c */
	uint64_t release_delay_ns;
	_Atomic uint64_t *held_ns;
	_Atomic size_t held_pages;
	_Atomic uint64_t held_next_ns;
	pthread_t reclaimer;
	bool reclaimer_running;
	_Atomic bool reclaimer_restart; /* a forked child starts it again on demand */
	int reclaimer_pipe[2];
	int psi_fd;		/* the reclaimer's trigger fd, or -1 (under rel_mu) */
	pthread_mutex_t rel_mu; /* the reclaimer's start, stop and fds */
};

static inline size_t hpr__page_off(const hpr_region *r, size_t idx)
{
	return idx << r->page_shift;
}

static inline uint8_t hpr__page_state(const hpr_region *r, size_t idx)
{
	return atomic_load_explicit(&r->state[idx], memory_order_acquire);
}

/* Validate [off,len) and widen to pages [*first, *last). */
int hpr__range(const hpr_region *r, size_t off, size_t len, size_t *first,
	       size_t *last);
/* The same, its messages naming the public function fn. */
int hpr__range_of(const char *fn, const hpr_region *r, size_t off, size_t len, size_t *first,
		  size_t *last);

#endif
