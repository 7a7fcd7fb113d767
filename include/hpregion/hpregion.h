/* SPDX-License-Identifier: MIT */
/*
 * hpregion — large memory regions really backed by huge pages.
 *
 * One API over the three ways Linux hands out huge pages: anonymous THP,
 * shmem/tmpfs mounted huge=, and hugetlbfs. Regions are created, faulted in
 * by parallel NUMA-aware workers, given back lazily, collapsed on demand and
 * measured from what the kernel reports (smaps), not from bookkeeping.
 *
 * Conventions (see docs/design.md):
 *  - Every function that can fail returns 0 or a negative errno. errno is
 *    never the only report. hpr_strerror() explains an error and says what
 *    to do about it.
 *  - Thread safety: all functions on one region may be called concurrently
 *    from any thread, except hpr_destroy(), which must not race with any
 *    other call on the same region. Different regions are independent.
 *  - fork(): allowed at any time, from any thread, also while the library
 *    works; the child may use the library at once (pthread_atfork handlers
 *    leave no library lock held in it). The child does not inherit
 *    the workers, the PSI reclaimer, io_uring rings or the pagemap fd; it
 *    gets its own on demand. A background prefault running in the parent
 *    is -ECANCELED in the child (hpr_prefault_wait); a huge page a parent
 *    thread had in flight is absent there (hpr_fault_in populates it again,
 *    keeping its bytes). Inherited regions: THP is a copy-on-write snapshot
 *    the child may use fully (the first write to a huge page both processes
 *    map splits the writer's PMD; hpr_collapse restores it); HPR_F_SHARED
 *    shmem/hugetlb is shared (agree on who releases what); private
 *    shmem/hugetlb is MADV_DONTFORK, not inherited: hpr_base() is NULL and
 *    every call but hpr_destroy() is -ENXIO. mlock is not inherited. Details
 *    in hpregion(7), FORK.
 *  - The library never prints, never aborts and never changes system-wide
 *    settings. Install a log callback with hpr_set_log() to see its reasons.
 */
#ifndef HPREGION_HPREGION_H
#define HPREGION_HPREGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HPR_BUILDING_LIBRARY) && defined(__GNUC__)
#define HPR_API __attribute__((visibility("default")))
#else
#define HPR_API
#endif

#define HPR_VERSION_MAJOR 0
#define HPR_VERSION_MINOR 1
#define HPR_VERSION_PATCH 0

typedef struct hpr_region hpr_region;

enum hpr_backend {
	HPR_BACKEND_AUTO = 0, /* hugetlb -> shmem on a huge tmpfs (path) -> THP */
	HPR_BACKEND_THP,      /* private anonymous memory, MADV_HUGEPAGE */
	HPR_BACKEND_SHMEM,    /* file on tmpfs mounted huge=, or a memfd */
	HPR_BACKEND_HUGETLB,  /* file on hugetlbfs, or an MFD_HUGETLB memfd */
};

enum hpr_numa_policy {
	HPR_NUMA_DEFAULT = 0, /* the thread's policy, usually local first touch */
	HPR_NUMA_BIND,	      /* only on numa_nodes; fail rather than spill */
	HPR_NUMA_INTERLEAVE,  /* round robin across numa_nodes */
	HPR_NUMA_PREFERRED,   /* first node of numa_nodes, spill elsewhere */
};

/*
 * Flags for hpr_config.flags. Unknown bits are -EINVAL.
 * HPR_F_FALLBACK: where huge pages can't be had the way asked, take another
 * backend's (HUGETLB on a short pool: THP, or a shmem memfd when shared),
 * then base pages; hpr_stats() .fallback says what was delivered.
 * HPR_F_PSI_RECLAIM: hpr_create fails if the PSI trigger cannot be armed.
 * HPR_F_COLLAPSE_SYNC (THP): when the kernel reclaimed a released page and
 * hpr_fault_in gets it back as base pages, collapse it (MADV_COLLAPSE) in
 * the call, as hpregion 0.1 did: the page is huge when the call returns,
 * at a cost of milliseconds per 2 MiB on the caller's thread. Without it
 * the page is usable at once and the region's workers collapse it in the
 * background (hpr_stats() .collapse_queued, .collapse_pending).
 */
#define HPR_F_SHARED (1u << 0)	       /* MAP_SHARED; hpr_fd() can be passed on */
#define HPR_F_FALLBACK (1u << 1)       /* allow another backend, then base pages */
#define HPR_F_PREFAULT (1u << 2)       /* fault everything in before create returns */
#define HPR_F_PREFAULT_ASYNC (1u << 3) /* start background prefault at create */
#define HPR_F_LOCK (1u << 4)	       /* mlock the region (after prefault) */
#define HPR_F_KEEP_FILE (1u << 5)      /* keep the file under path after destroy */
#define HPR_F_GUARD (1u << 6)	       /* debug: released pages PROT_NONE until faulted */
#define HPR_F_PSI_RECLAIM (1u << 7)    /* reclaim lazily released pages under PSI pressure */
#define HPR_F_ATTACH (1u << 8)	       /* attach to the kept region path/name, else create it */
#define HPR_F_ATTACH_ONLY (1u << 9)    /* attach to the kept region path/name, or -ENOENT */
#define HPR_F_COLLAPSE_SYNC (1u << 10) /* THP: collapse reused pages on the caller's thread */

/*
 * Kept regions (docs/attach.md, hpr_attached(3)). HPR_F_ATTACH and
 * HPR_F_ATTACH_ONLY (one of them) name a file: cfg->name in the directory
 * cfg->path, on a tmpfs mounted huge= (SHMEM) or on hugetlbfs (HUGETLB;
 * AUTO takes the backend from the mount). If that file is a region
 * hpregion kept -- stamped at create, with the same size, page size and
 * backend, owned by the caller's effective uid, on a mount that still
 * gives huge pages -- hpr_create() maps it as it is: nothing is zeroed or
 * copied, its huge pages stay huge, and hpr_attached() is true. If it does
 * not exist, HPR_F_ATTACH creates it (a new region, stamped and kept) and
 * HPR_F_ATTACH_ONLY fails with -ENOENT. Either way the file is kept after
 * hpr_destroy(), as with HPR_F_KEEP_FILE.
 *  - HPR_F_SHARED: the mapping is MAP_SHARED, writes go to the file, and the
 *    region holds an exclusive flock(2) on it; another holder is -EBUSY.
 *  - without HPR_F_SHARED, an attach is a private copy-on-write view: the
 *    file is opened read-only, writes make private copies (4 KiB pages on
 *    shmem, whole huge pages on hugetlb) and the kept bytes never change;
 *    it holds a shared flock, so private views coexist with each other but
 *    not with a shared holder. A region HPR_F_ATTACH creates writes its new
 *    file (MAP_SHARED) whatever HPR_F_SHARED says, and holds it exclusively.
 * Refusals (nothing is mapped and the file is unchanged): -ELOOP (the name
 * is a symlink), -EBADMSG (not a regular file, no stamp or a damaged one:
 * not a region hpregion kept), -EPERM (owned by another uid), -ERANGE (its
 * size, page size or backend differ from cfg, or it was truncated),
 * -EMEDIUMTYPE (the mount no longer gives huge pages, or the file is on
 * another kind of file system than its stamp says), -EBUSY (held by
 * another process), -ENOMEM (private hugetlb: the pool cannot reserve the
 * copy-on-write pages), -EINVAL (no path or name, THP, HPR_F_FALLBACK, or
 * HPR_F_LOCK without HPR_F_SHARED). Crash consistency is the
 * application's: the library keeps the bytes last written, no more.
 */

/*
 * Versioned structs. Every public struct that may grow travels with the
 * size the caller's header gave it, so that the 0.1 ABI can grow without a
 * soname bump. The size is always taken by this header's inline code, never
 * written by hand:
 *  - struct hpr_config (read by the library): hpr_config_init() records
 *    sizeof(struct hpr_config) in its struct_size;
 *  - struct hpr_stats and struct hpr_probe_info (written by the library):
 *    hpr_stats() and hpr_probe() are inline functions that pass sizeof(*st)
 *    to hpr_stats_sized() and hpr_probe_sized().
 * The library reads or writes min(the caller's size, its own) bytes. Fields
 * an older caller's header lacks take their defaults (config) or are not
 * written (stats, probe); fields of a newer header this library does not know
 * must be zero (config: else -E2BIG) or are zeroed (stats, probe). Fields are
 * only ever appended (or, in hpr_stats, carved out of reserved_); fixed
 * arrays keep their bounds (HPR_MAX_NODES, HPR_MAX_HUGETLB_SIZES). Binaries
 * built against the 0.1 header call the exported hpr_stats() and
 * hpr_probe(), which fill the 0.1 layouts. Details in hpregion(7), VERSIONED
 * STRUCTS.
 */

/*
 * Region configuration. Fill it with hpr_config_init() and set what you need.
 * hpr_config_init() records sizeof(struct hpr_config) as seen by the caller's
 * header in struct_size, so a caller built against an older header keeps
 * working (missing fields take their defaults) and a caller built against a
 * newer one is refused with -E2BIG only if it set a field this library does
 * not know.
 */
struct hpr_config {
	size_t struct_size;	 /* set by hpr_config_init(); do not touch */
	size_t size;		 /* bytes, rounded up to page_size */
	enum hpr_backend backend;
	size_t page_size;	 /* 0: default huge page size of the backend */
	const char *path;	 /* dir on tmpfs huge= or hugetlbfs; NULL: memfd */
	const char *name;	 /* label: file/memfd name, VMA name, stats;
				    1-40 printable ASCII bytes, one file
				    name component (see hpr_create) */
	unsigned flags;		 /* HPR_F_* */
	enum hpr_numa_policy numa_policy;
	const char *numa_nodes;	 /* "0", "0-1", "0,2", "all"; NULL: all */
	unsigned workers;	 /* fault-in threads; 0: one per allowed CPU */
	size_t lazy_budget;	 /* shmem/hugetlb: lazily released bytes kept
				    before reclaim punches holes; 0: no limit */
	unsigned psi_stall_us;	 /* HPR_F_PSI_RECLAIM: "some" stall per 1 s
				    window that triggers reclaim (doubled over
				    a 2 s window without CAP_SYS_RESOURCE,
				    Linux 6.5+); 0: 100000 (100 ms) */
	uint64_t release_delay_ms; /* THP: hpr_release_lazy keeps a released
				      page this long before MADV_FREE gives
				      it to the kernel; reused before then, it
				      costs no system call. 0 (default): at
				      once; at most 600000 (10 min) */
};

HPR_API void hpr_config_init_sized(struct hpr_config *cfg, size_t struct_size);

/* Fill @cfg with defaults: AUTO backend, default page size, memfd, 0 flags. */
static inline void hpr_config_init(struct hpr_config *cfg)
{
	hpr_config_init_sized(cfg, sizeof(*cfg));
}

/*
 * Create a region. On success *out holds the region and 0 is returned.
 * Errors: -EINVAL (bad config: size 0 or overflowing, unknown backend, flag
 * or policy, page size not offered, path not on tmpfs/hugetlbfs, bad
 * nodestring, a name that is not 1-40 bytes of printable ASCII without
 * spaces, '/', \ ` $ [ ] or is "." or ".."), -ENOENT (path missing),
 * -ENOTDIR, -EACCES, -ENOMEM (hugetlb
 * pool or memory too small), -ENOSPC (mount's size= too small),
 * -EOPNOTSUPP (huge pages can't be had this way and no HPR_F_FALLBACK;
 * HPR_F_PSI_RECLAIM and the kernel has no PSI or refuses the trigger),
 * -EACCES/-EPERM (HPR_F_PSI_RECLAIM: no right to arm a trigger on the
 * cgroup's memory.pressure or /proc/pressure/memory), -E2BIG (config
 * fields unknown to this library are set), or an error of the prefault
 * when HPR_F_PREFAULT is set. After a failure nothing is left mapped, no
 * file is left behind (HPR_F_KEEP_FILE included) and hugetlb reservations
 * are returned. The backing file on path is created (O_EXCL, O_NOFOLLOW)
 * relative to the directory that was opened and checked, so a path
 * component swapped for a symlink meanwhile cannot move it off that mount.
 */
HPR_API int hpr_create(const struct hpr_config *cfg, hpr_region **out);

/* true when hpr_create() attached r to a kept file (HPR_F_ATTACH,
 * HPR_F_ATTACH_ONLY), false when it created r (NULL: false). */
HPR_API bool hpr_attached(const hpr_region *r);

/* Unmap and free the region; stops background work first. NULL is a no-op
 * returning 0. Must not race with other calls on the same region. */
HPR_API int hpr_destroy(hpr_region *r);

HPR_API void *hpr_base(const hpr_region *r);
HPR_API size_t hpr_size(const hpr_region *r);
HPR_API size_t hpr_page_size(const hpr_region *r);
HPR_API enum hpr_backend hpr_backend_of(const hpr_region *r);
/* The backing fd (shmem, hugetlb), or -1 for private anonymous memory. */
HPR_API int hpr_fd(const hpr_region *r);
HPR_API const char *hpr_name(const hpr_region *r);
/* "auto", "thp", "shmem" or "hugetlb"; "unknown" outside enum hpr_backend. */
HPR_API const char *hpr_backend_name(enum hpr_backend b);
/* The inverse of hpr_backend_name(), for command lines and config files:
 * *out = the backend named name (exact, case-sensitive match).
 * Errors: -EINVAL (name or out NULL, or not a backend's name: *out is left
 * alone and hpr_strerror() lists the names). */
HPR_API int hpr_backend_from_name(const char *name, enum hpr_backend *out);

/*
 * Fault [off, off+len) in, widened to whole huge pages, using the region's
 * workers, and return when done. Each huge page is populated exactly once
 * however many threads ask. Pages the background prefault has not reached
 * are served by the caller at once.
 * Errors: -EINVAL (range outside the region), -ENOMEM (hugetlb pool, cgroup
 * or memory exhausted), -ENOSPC (the mount's size= is full), -EHWPOISON,
 * -EOPNOTSUPP (the pages came out small, no fallback, collapse failed).
 * -ENOMEM also when HPR_F_GUARD cannot
 * unprotect a released page because the process is at vm.max_map_count
 * (hpr_strerror() says which). hpr_fault_error() gives the first failing
 * offset.
 */
HPR_API int hpr_fault_in(hpr_region *r, size_t off, size_t len);

/* Start faulting [off, off+len) in on the workers and return at once.
 * -EBUSY if a background job is already running or not yet waited for (of
 * concurrent calls exactly one starts it). */
HPR_API int hpr_prefault_start(hpr_region *r, size_t off, size_t len);
/* Wait for the background job; returns its first error, -ECANCELED if it
 * was cancelled (or, in a forked child, was the parent's), 0 if none was
 * started. */
HPR_API int hpr_prefault_wait(hpr_region *r);
/* Bytes of the background job done so far, and its total. */
HPR_API int hpr_prefault_progress(hpr_region *r, size_t *done, size_t *total);
/* Ask the background job to stop after the pages in flight. Returns 0 even
 * when there is no job. Follow with hpr_prefault_wait(). */
HPR_API int hpr_prefault_cancel(hpr_region *r);
/* The first fault error recorded for the region and its offset (-1 if none).
 * Returns the error (0 if none). Cleared by a successful fault of that page.
 * The region is not const: the error and its offset are read together under
 * the region's lock (0.1 declared it const; the ABI is the same). */
HPR_API int hpr_fault_error(hpr_region *r, size_t *off);

/*
 * Give [off, off+len) back lazily; its contents become undefined. Only whole
 * huge pages are released; partial ones are remembered until the rest of
 * the huge page is released too. Call hpr_fault_in() before writing the
 * range again; each 4 KiB page then holds its old data or zeros, never data
 * from elsewhere. THP: MADV_FREE; with release_delay_ms (hpr_config) the
 * page is held that long first, a state change (reused before then it
 * costs no system call and keeps its data), then the region's workers
 * MADV_FREE it. shmem/hugetlb, and locked memory
 * (HPR_F_LOCK or the application's mlockall: the kernel refuses MADV_FREE
 * there): a state change only, the memory stays resident; hpr_reclaim(),
 * the lazy budget or PSI pressure give it back later.
 * Errors: -EINVAL (range), -ENOMEM (HPR_F_GUARD: the process is at
 * vm.max_map_count; the pages stay unreleased and intact), -ENXIO (a
 * forked child and a private file-backed region it did not inherit).
 */
HPR_API int hpr_release_lazy(hpr_region *r, size_t off, size_t len);
/* Discard up to max_bytes (0: all) of lazily released memory now. Locked
 * memory too (MADV_DONTNEED_LOCKED on THP, Linux 5.18; -EPERM before); a
 * later hpr_fault_in brings a page back, locked again. */
HPR_API int hpr_reclaim(hpr_region *r, size_t max_bytes, size_t *reclaimed);
/*
 * MADV_COLLAPSE [off, off+len) on the workers. *collapsed (may be NULL) is
 * the number of bytes of the range PMD-mapped afterwards, measured from the
 * kernel. Errors: -EINVAL, -EOPNOTSUPP (kernel < 6.1 or backend/mount can't),
 * -ENOMEM (no free huge page), -EAGAIN (pages busy through ~1 s of retries).
 */
HPR_API int hpr_collapse(hpr_region *r, size_t off, size_t len, size_t *collapsed);

#define HPR_MAX_NODES 64

struct hpr_stats {
	size_t size;		/* bytes mapped */
	size_t resident;	/* kernel: bytes of the region mapped */
	size_t huge_mapped;	/* kernel: of those, PMD- or hugetlb-mapped */
	size_t lazy;		/* THP: kernel LazyFree; shmem/hugetlb: released
				   and not yet reclaimed (table) */
	enum hpr_backend backend;
	size_t page_size;
	size_t pages_total;	/* huge pages in the region */
	size_t pages_present;	/* table: faulted in */
	size_t pages_lazy;	/* table: released, not reclaimed */
	uint64_t populate_calls; /* populate syscalls issued */
	uint64_t reclaimed_bytes;  /* total discarded by reclaim */
	uint64_t collapsed_pages;  /* huge pages MADV_COLLAPSE succeeded on */
	size_t small_mapped;	/* resident but not huge-mapped (fallback) */
	unsigned nr_nodes;	/* entries valid in node_resident */
	size_t node_resident[HPR_MAX_NODES]; /* move_pages query per node */
	int snapshot_io;	/* last save/load: 1 io_uring, 2 pread/pwrite */
	/* What was asked for and what was delivered (carved out of
	 * reserved_: the struct keeps its size and layout). */
	int requested;		/* enum hpr_backend the config asked for */
	unsigned fallback;	/* HPR_FALLBACK_*: 0 when delivered as asked */
	/* the last hpr_load(HPR_SNAP_LAZY) (carved out of reserved_) */
	int lazy_load;		/* HPR_LAZY_*: 0 none */
	int lazy_fallback_err;	/* HPR_LAZY_EAGER: why (-errno of userfaultfd) */
	/* the background collapse (THP reuse, see HPR_F_COLLAPSE_SYNC; carved
	 * out of reserved_). A released page the kernel reclaimed comes back
	 * from hpr_fault_in as base pages; the page is handed to the region's
	 * workers, which collapse it when idle. */
	uint64_t collapse_queued;  /* pages handed to the workers, in all */
	uint64_t collapse_pending; /* of those, not yet taken up */
	uint64_t collapse_failed;  /* taken up and left small (kernel refused) */
	/* release_delay_ms (carved out of reserved_): of pages_lazy, those
	 * held, not yet given to the kernel (so not in lazy, its LazyFree) */
	uint64_t pages_held;
	uint64_t reserved_[10];
};
#define HPR_IO_URING 1
#define HPR_IO_PREADWRITE 2
#define HPR_LAZY_UFFD 1	 /* on demand through userfaultfd */
#define HPR_LAZY_EAGER 2 /* userfaultfd unavailable: loaded eagerly */
/*
 * hpr_stats.fallback, how HPR_F_FALLBACK changed the region:
 * HPR_FALLBACK_BACKEND     not the backend asked for (a short hugetlb pool
 *                          gave THP, or a shmem memfd when shared);
 * HPR_FALLBACK_BASE_PAGES  made on base pages: huge pages could not be had
 *                          at all and none are attempted (no MADV_HUGEPAGE,
 *                          no MADV_COLLAPSE).
 * huge_mapped and small_mapped say how much is huge now, from the kernel.
 */
#define HPR_FALLBACK_BACKEND (1u << 0)
#define HPR_FALLBACK_BASE_PAGES (1u << 1)

/* Fill *st (its first size bytes: see "Versioned structs" above) from the
 * kernel and the library's counters. resident and
 * huge_mapped cover exactly the region's range: PAGEMAP_SCAN (Linux 6.7),
 * before that smaps of the region's VMAs, which nothing else can merge
 * into (a 4 KiB PROT_NONE guard page on each side of every region).
 * Per-node residency costs a move_pages() query per huge page. Errors:
 * -EINVAL (NULL argument, or size smaller than hpregion 0.1's struct), or
 * the errno of reading /proc/self/smaps. */
HPR_API int hpr_stats_sized(hpr_region *r, struct hpr_stats *st, size_t size);
#ifdef HPR_BUILDING_LIBRARY
/* The 0.1 entry point, kept for binaries built against 0.1: st is the 0.1
 * layout. */
HPR_API int hpr_stats(hpr_region *r, struct hpr_stats *st);
#else
/* hpr_stats_sized() with the size of this header's struct hpr_stats;
 * -EINVAL also when size is smaller than hpregion 0.1's struct. */
static inline int hpr_stats(hpr_region *r, struct hpr_stats *st)
{
	return hpr_stats_sized(r, st, sizeof(*st));
}
#endif

/*
 * Snapshots (docs/snapshot.md, hpr_save(3), hpr_load(3)).
 *
 * hpr_save() writes the region's contents to fd, a regular file opened for
 * writing (not O_APPEND), which it truncates and rewrites: a header, a page
 * table with a checksum per huge page, and each huge page that holds
 * data at a page-size-aligned offset. Pages that were never faulted, were
 * released (hpr_release_lazy: their contents are undefined) or are all
 * zeros are holes: nothing is written there, so the file is sparse. The
 * header goes last, so an interrupted save is never taken for a snapshot.
 * Writers must be quiet while a save runs (the pages are read in place).
 * Errors: -EINVAL (NULL region, unknown flags, fd not a regular file or
 * O_APPEND), -EBADF (fd not open for writing), -EFAULT (a region page
 * cannot be read: mprotect()ed, or its file truncated), -ENOSPC, -EFBIG,
 * -EIO. Errors found before writing (all but the last three) leave the
 * file untouched; a save that fails part-way truncates it to 0 bytes;
 * hpr_load() refuses both an empty file and one a killed save left (its
 * header is zeros: the header is written last).
 *
 * hpr_load() reads such a file into a region of the same size and page
 * size (any backend). It checks the header, the table and the file's
 * extents (holes inside a data page are fine: sparse copies made by cp or
 * rsync -S read back the same zeros, and each page has a checksum; a data
 * page that is all hole is not), and that the pages it will fault in fit
 * in the hugetlb pool or the region's tmpfs, before it touches the
 * region; then it faults in exactly the saved pages as it reads them (on
 * the region's workers) and verifies each page's checksum; pages the
 * snapshot has as holes are dropped from the
 * region, so afterwards exactly the saved pages are resident -- except in a
 * locked region (HPR_F_LOCK, mlockall), where they are zeroed in place and
 * everything stays resident and locked. Guard-mode regions (HPR_F_GUARD)
 * work: released pages are unprotected through the fault table. *changed
 * (may be NULL) receives the bytes of the region that were changed: on
 * success the saved pages plus the dropped ones; on failure only pages
 * that held contents before and were overwritten -- pages that were absent
 * are dropped again, so a failed load into a fresh region changes nothing.
 * Errors: -EINVAL (not a snapshot, region size or page size differs,
 * format version or flags unknown), -EBADMSG (truncated, corrupted header,
 * table or page), -EBADF (fd not open for reading), -ENOMEM (faulting in
 * ran out of memory or hugetlb pages), -EIO.
 *
 * I/O goes through io_uring (a queue of 2 MiB reads/writes in flight per
 * worker) with O_DIRECT where the file system supports it; where io_uring
 * is unavailable (io_uring_disabled, seccomp) through pread/pwrite with
 * the same results. hpr_stats() reports which in snapshot_io. fd's file
 * position is not changed. When either call returns, no I/O of it is in
 * flight and nothing holds the region's pages (region memory is never
 * registered with io_uring): hpr_reclaim() and hpr_destroy() give hugetlb
 * pages back to the pool at once, whether or not fd stays open.
 */
#define HPR_SNAP_NO_URING (1u << 0) /* force pread/pwrite */
#define HPR_SNAP_NO_DIRECT (1u << 1) /* never use O_DIRECT (page cache I/O) */
#define HPR_SNAP_SYNC (1u << 2) /* save: fdatasync the data, then write and
				   fdatasync the header */
#define HPR_SNAP_LAZY (1u << 3) /* load: on demand (userfaultfd), see below */
HPR_API int hpr_save(hpr_region *r, int fd, unsigned flags);
HPR_API int hpr_load(hpr_region *r, int fd, unsigned flags, size_t *changed);

/*
 * Lazy load (docs/snapshot.md "Lazy load", hpr_load_wait(3)).
 * hpr_load(r, fd, HPR_SNAP_LAZY, &changed) returns once the snapshot's
 * header, table and extents are checked and the region is registered with
 * userfaultfd; *changed is the bytes of saved pages the load will bring in.
 * The region must be empty (nothing faulted in or resident: -EBUSY) and
 * neither attached, guarded nor locked (-EINVAL). A thread that touches a
 * saved page not yet loaded blocks for that page only; the region's
 * workers load demanded pages first and the rest in file order, verify
 * each page's checksum before it is mapped, and at the end unregister the
 * region, its saved pages resident and huge-mapped (hpr_stats). fd is
 * duplicated: the caller may close it at once.
 * Failure (a corrupt, unreadable or truncated page), hpr_load_cancel(), or
 * a fork (in the child) fails the whole load: the saved pages it had not
 * mapped become PROT_NONE -- a thread touching one gets SIGSEGV, never
 * zeros or unverified data -- until hpr_load_wait() returns the error and
 * empties the region again (as a failed eager load leaves a fresh region).
 * Where userfaultfd cannot be had (no /dev/userfaultfd access and
 * vm.unprivileged_userfaultfd = 0 without CAP_SYS_PTRACE, a kernel without
 * the backend's userfaultfd mode) hpr_load() loads eagerly instead and
 * returns when done; hpr_stats() .lazy_load says which ran and
 * .lazy_fallback_err why, and the log says so at HPR_LOG_WARN.
 * While a lazy load runs, hpr_save, hpr_load, hpr_release_lazy,
 * hpr_reclaim, hpr_collapse and hpr_prefault_start are -EBUSY;
 * hpr_fault_in loads the saved pages of its range itself, at once.
 * Once the load has failed, and until hpr_load_wait() empties the region,
 * hpr_fault_in returns the load's own error (the errno hpr_load_wait will
 * return, e.g. -EBADMSG for a bad checksum; hpr_strerror names the cause)
 * whatever its range holds and however far the library's threads have
 * got in ending the load; the calls above stay -EBUSY, their detail
 * naming the failure.
 */
/* Wait for the lazy load to end: 0, its first error (-EBADMSG, -EIO,
 * -ENOMEM...) or -ECANCELED (hpr_load_cancel, or the parent's load in a
 * forked child); 0 when none ran. After an error the region is empty. */
HPR_API int hpr_load_wait(hpr_region *r);
/* Bytes of saved pages mapped so far, of those loaded because a thread
 * touched them (demand), and the saved bytes in all (any may be NULL). */
HPR_API int hpr_load_progress(hpr_region *r, size_t *loaded, size_t *demanded, size_t *total);
/* Fail the lazy load with -ECANCELED (see above); 0 also without one.
 * Follow with hpr_load_wait(). */
HPR_API int hpr_load_cancel(hpr_region *r);

/*
 * The recycled huge-page pool (docs/pool.md, hpr_pool_configure(3)).
 *
 * Off by default: until hpr_pool_configure() is called with a non-zero
 * max_bytes nothing below changes any other call. Once on, hpr_destroy()
 * of a THP region moves its PMD-mapped huge pages (up to max_bytes in the
 * pool in all) to a process-wide pool instead of unmapping them: the page
 * tables move (mremap), nothing is copied; hpr_reclaim() of its released
 * pages (also the lazy budget's and the PSI reclaimer's) moves those that
 * are still whole huge pages there too. Background threads write zeros
 * over every pool page; only pages they zeroed are handed out. A fault-in
 * of a fresh (never faulted) range of a THP region -- hpr_fault_in(),
 * HPR_F_PREFAULT, the background prefault -- takes zeroed pages from the
 * pool by moving them into the region, and populates only what the pool
 * could not give. A page handed out is an ordinary resident, dirty,
 * PMD-mapped huge page of zeros: never a byte of its former contents.
 *
 * Pool pages are given to the kernel as lazily freeable (MADV_FREE): under
 * memory pressure, of the machine or of the process's memory cgroup, the
 * kernel takes them before it swaps or OOM-kills, and the pool shrinks by
 * what it took. They count in no region's hpr_stats(), only in
 * hpr_pool_stats().
 *
 * Pooled: THP regions that were not made with a NUMA policy, HPR_F_GUARD,
 * HPR_F_FALLBACK's base pages, or locked by mlockall(). Not pooled:
 * shmem and hugetlb (hpr_pool_supported() says why). Needs PAGEMAP_SCAN
 * (Linux 6.7) to see which pages are huge: -EOPNOTSUPP before.
 *
 * fork(): pool pages are MADV_DONTFORK; a child starts with an empty pool
 * under the parent's configuration and its own threads once it donates.
 */
#define HPR_POOL_ONE_THREAD (1u << 0) /* one zeroing thread, not one per CPU */
#define HPR_POOL_IDLE (1u << 1)	      /* zeroing threads run at SCHED_IDLE */

/* Turn the pool on, resize it, or off (max_bytes 0: every pool page is
 * unmapped before the call returns and its threads are stopped).
 * max_bytes is rounded down to whole huge pages. Errors: -EINVAL
 * (unknown flags), -EOPNOTSUPP (THP disabled, or no PAGEMAP_SCAN: Linux
 * 6.7), -EAGAIN (a zeroing thread could not be started). Thread-safe. */
HPR_API int hpr_pool_configure(size_t max_bytes, unsigned flags);

/* 0 when regions of backend are pooled on this machine, else -EOPNOTSUPP
 * (hpr_strerror() says why: shmem and hugetlb pages belong to a file)
 * or -EINVAL (AUTO or not a backend: ask about hpr_backend_of()). */
HPR_API int hpr_pool_supported(enum hpr_backend backend);

/* How background zeroing writes (hpr_pool_stats.zero_method). */
enum hpr_pool_zero {
	HPR_POOL_ZERO_NONE = 0,	 /* not chosen yet (the pool was never on) */
	HPR_POOL_ZERO_MEMSET,	 /* the C library's memset */
	HPR_POOL_ZERO_REP_STOSB, /* x86 rep stosb */
	HPR_POOL_ZERO_AVX2,	 /* 32-byte AVX2 stores */
	HPR_POOL_ZERO_NT_SSE2,	 /* 16-byte non-temporal stores (movntdq), sfence */
	HPR_POOL_ZERO_NT_AVX2,	 /* 32-byte non-temporal stores (vmovntdq), sfence */
};

struct hpr_pool_stats {
	size_t max_bytes;	 /* the limit in force; 0: the pool is off */
	unsigned flags;		 /* HPR_POOL_* in force */
	unsigned threads;	 /* zeroing threads running */
	size_t bytes;		 /* huge pages held by the pool */
	size_t clean_bytes;	 /* of those, zeroed: ready to hand out */
	size_t resident;	 /* kernel: bytes of the pool mapped (PAGEMAP_SCAN) */
	size_t huge_mapped;	 /* kernel: of those, PMD-mapped */
	uint64_t donated_bytes;	 /* moved in from destroyed regions, in all */
	uint64_t handed_bytes;	 /* moved out into fault-ins, in all */
	uint64_t zeroed_bytes;	 /* zeroed by the threads, in all */
	uint64_t dropped_bytes;	 /* unmapped: the kernel had taken them (or
				    split them) under memory pressure */
	uint64_t trimmed_bytes;	 /* unmapped by hpr_pool_configure() */
	uint64_t zero_ns;	 /* thread time spent writing zeros */
	int zero_method;	 /* enum hpr_pool_zero */
	uint64_t reserved_[8];
};

/* Fill *st (its first size bytes: see "Versioned structs"). Errors:
 * -EINVAL (NULL, or size smaller than the first struct hpr_pool_stats). */
HPR_API int hpr_pool_stats_sized(struct hpr_pool_stats *st, size_t size);
/* hpr_pool_stats_sized() with the size of this header's struct. */
static inline int hpr_pool_stats(struct hpr_pool_stats *st)
{
	return hpr_pool_stats_sized(st, sizeof(*st));
}
/* "memset", "rep-stosb", "avx2", "nt-sse2", "nt-avx2" or "none" (method
 * not chosen yet). The choice is made once per process, when the pool is
 * first turned on, by timing each method over a few warm huge pages. */
HPR_API const char *hpr_pool_zero_method_name(void);

/* Huge page sizes hpr_probe_info can describe (x86-64 has 2; arm64 4). */
#define HPR_MAX_HUGETLB_SIZES 4

/* The THP mode: the bracketed word of
 * /sys/kernel/mm/transparent_hugepage/enabled (always, madvise, never) or
 * .../defrag (also defer, defer+madvise). */
enum hpr_thp_mode {
	HPR_THP_ALWAYS,
	HPR_THP_MADVISE,
	HPR_THP_NEVER,
	HPR_THP_DEFER,
	HPR_THP_DEFER_MADVISE,
	HPR_THP_UNKNOWN, /* the file is missing or says something else */
};

/* The shmem huge= mode: the bracketed word of
 * /sys/kernel/mm/transparent_hugepage/shmem_enabled, or a tmpfs mount's
 * huge= option (deny and force exist only in shmem_enabled). */
enum hpr_shmem_mode {
	HPR_SHMEM_ALWAYS,
	HPR_SHMEM_WITHIN_SIZE,
	HPR_SHMEM_ADVISE,
	HPR_SHMEM_NEVER,
	HPR_SHMEM_DENY,
	HPR_SHMEM_FORCE,
	HPR_SHMEM_UNKNOWN, /* the file is missing or says something else */
};

/* What this machine offers; read once, cached, never written. */
struct hpr_probe_info {
	enum hpr_thp_mode thp_enabled;
	enum hpr_thp_mode thp_defrag;
	enum hpr_shmem_mode shmem_enabled;
	size_t thp_pmd_size;
	unsigned nr_hugetlb_sizes;
	struct {
		size_t page_size;
		unsigned long total, free, reserved, surplus;
		unsigned long node_free[HPR_MAX_NODES];
		unsigned long node_total[HPR_MAX_NODES];
		long long cgroup_limit; /* bytes; -1: none */
	} hugetlb[HPR_MAX_HUGETLB_SIZES];
	unsigned nr_nodes;
	bool have_populate;	/* MADV_POPULATE_WRITE (5.14) */
	bool have_collapse;	/* MADV_COLLAPSE (6.1) */
	bool have_pagemap_scan; /* PAGEMAP_SCAN (6.7) */
	bool have_anon_vma_name; /* PR_SET_VMA_ANON_NAME (5.17) */
	bool have_psi;
	int kernel_major, kernel_minor;
};

/* Fill *info (the first size bytes; see "Versioned structs" above).
 * Errors: -EINVAL (NULL, or size smaller than hpregion 0.1's struct). */
HPR_API int hpr_probe_sized(struct hpr_probe_info *info, size_t size);
#ifdef HPR_BUILDING_LIBRARY
/* The 0.1 entry point, kept for binaries built against 0.1: info is the 0.1
 * layout. */
HPR_API int hpr_probe(struct hpr_probe_info *info);
#else
/* hpr_probe_sized() with the size of this header's struct hpr_probe_info. */
static inline int hpr_probe(struct hpr_probe_info *info)
{
	return hpr_probe_sized(info, sizeof(*info));
}
#endif

/* Explain err (a negative errno from this library). When err is what this
 * thread's latest call into the library returned, the text has that
 * failure's details (counts, paths, which knob to turn), including those
 * of a failure on one of the region's worker threads; each call that can
 * fail starts by forgetting the previous call's details, so they are never
 * an earlier call's. Never NULL. */
HPR_API const char *hpr_strerror(int err);
HPR_API const char *hpr_version(void);

enum hpr_log_level { HPR_LOG_ERROR, HPR_LOG_WARN, HPR_LOG_INFO, HPR_LOG_DEBUG };
typedef void (*hpr_log_fn)(enum hpr_log_level level, const char *msg, void *arg);
/* Install a process-wide log callback (NULL: silent, the default). */
HPR_API void hpr_set_log(hpr_log_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* HPREGION_HPREGION_H */
