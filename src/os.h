/* SPDX-License-Identifier: MIT */
/*
 * The OS layer: the only code in hpregion that calls the kernel (mappings,
 * files, sysfs/procfs, pagemap, mincore, NUMA queries, PSI triggers; the
 * exceptions, snapshot's io_uring rings and the PSI reclaimer's wake-up
 * pipe, are listed in docs/design.md).
 *
 * Contract, for every hook:
 *  - returns 0 (or a non-negative fd / byte count) on success and a negative
 *    errno on failure; it never leaves errno as the only report;
 *  - reports what it actually delivered (mmap returns the address through
 *    *out, read_file the bytes read);
 *  - has no policy: retries, fallbacks and error wording live above it.
 *
 * Policy code (backends, fault table, release, reclaim, collapse) calls the
 * kernel only through hpr__os, so unit tests replace single hooks with
 * fakes (count populate calls, force the touch fallback, fail fallocate) and
 * restore the real table afterwards with hpr__os_set(NULL).
 */
#ifndef HPR_OS_H
#define HPR_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24 /* Linux 5.18 */
#endif
#ifndef MADV_FREE
#define MADV_FREE 8 /* Linux 4.5 */
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

struct hpr_os_ops {
	int (*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off, void **out);
	int (*munmap)(void *addr, size_t len);
	int (*madvise)(void *addr, size_t len, int advice);
	int (*mprotect)(void *addr, size_t len, int prot);
	int (*mlock)(void *addr, size_t len);
	int (*munlock)(void *addr, size_t len);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	int (*memfd_create)(const char *name, unsigned flags);
	/* openat(2): paths are opened relative to a directory fd the caller
	 * checked, so a swapped path component cannot redirect them */
	int (*openat)(int dirfd, const char *name, int flags, unsigned mode);
	int (*close)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*unlinkat)(int dirfd, const char *name);
	int (*add_seals)(int fd, int seals);
	int (*statfs)(const char *path, struct statfs *st);
	int (*fstatfs)(int fd, struct statfs *st);
	int (*stat_dev_ino)(const char *path, int fd, uint64_t *dev, uint64_t *ino);
	/* read a small text file (sysfs, procfs) into buf, NUL-terminated */
	ssize_t (*read_file)(const char *path, char *buf, size_t len);
	/* read a whole procfs file of any length (mountinfo, cgroup) into
	 * *out, malloc'd and NUL-terminated (the caller frees it); returns
	 * its length. A fixed buffer cut mountinfo at 64 KiB. */
	ssize_t (*read_all)(const char *path, char **out);
	/* mbind(2); mode is MPOL_*, mask has maxnode bits */
	int (*mbind)(void *addr, size_t len, int mode, const unsigned long *mask,
		     unsigned long maxnode, unsigned flags);
	/* write-touch [addr, addr+len) every step bytes; used only where the
	 * kernel lacks MADV_POPULATE_WRITE (before 5.14). Returns -EFAULT if
	 * a SIGBUS hit the touch (pool or mount out of pages). */
	int (*touch)(void *addr, size_t len, size_t step);
	/* sleep about us microseconds (a signal may end it early); for
	 * bounded back-off when the kernel says a page is busy for now */
	void (*sleep_us)(unsigned us);

	/* ---- queries and kernel text files ---- */
	int (*fstat)(int fd, struct stat *st);
	/* the file status flags of an open fd (F_GETFL: O_ACCMODE, O_APPEND) */
	int (*fd_flags)(int fd);
	int (*fdatasync)(int fd);
	/* realpath(3) into out (len bytes, PATH_MAX is enough) */
	int (*realpath)(const char *path, char *out, size_t len);
	/* the kernel release (uname -r) into buf, NUL-terminated */
	int (*kernel_release)(char *buf, size_t len);
	/* call fn(arg, name) for each entry of a directory (sysfs), "." and
	 * ".." left out; a non-zero return from fn stops the walk */
	int (*list_dir)(const char *path, int (*fn)(void *arg, const char *name), void *arg);
	/* stream a kernel text file of any length (smaps) line by line
	 * without holding it whole: fn(arg, line, len) without the newline;
	 * a line longer than 64 KiB is dropped */
	int (*read_lines)(const char *path, void (*fn)(void *arg, const char *line, size_t len),
			  void *arg);
	/* name an anonymous mapping in /proc/PID/maps ("[anon:name]",
	 * PR_SET_VMA_ANON_NAME, 5.17, CONFIG_ANON_VMA_NAME) */
	int (*name_anon)(void *addr, size_t len, const char *name);
	/* does the kernel have any 4 KiB page of [addr, addr+len) resident
	 * (mincore)? 1 yes, 0 no, negative errno */
	int (*any_resident)(void *addr, size_t len);
	/* /proc/self/pagemap of this process, for pagemap_count: an fd, or
	 * -EOPNOTSUPP where the kernel has no PAGEMAP_SCAN (before 6.7).
	 * The fd reads the mm of the process that opened it (not a forked
	 * child's) */
	int (*pagemap_open)(void);
	/* bytes of [lo, hi) present (not the zero page) and, of those,
	 * PMD-mapped or hugetlb, by PAGEMAP_SCAN on a pagemap_open fd */
	int (*pagemap_count)(int fd, uintptr_t lo, uintptr_t hi, uint64_t *present, uint64_t *huge);
	/* is any page of [lo, hi) present (the zero page too) or swapped,
	 * by one PAGEMAP_SCAN on a pagemap_open fd: 1 yes, 0 no, -errno */
	int (*pagemap_any)(int fd, uintptr_t lo, uintptr_t hi);
	/* arm a PSI trigger ("some <stall us> <window us>") on an open
	 * pressure file (O_RDWR | O_NONBLOCK); it fires POLLPRI */
	int (*psi_trigger)(int fd, const char *trigger);
	/* positioned I/O of all len bytes, retrying short transfers and
	 * EINTR, at off >= 0: pread_full returns the bytes read (fewer at end of file),
	 * pwrite_full 0 (-EIO when the file takes nothing) */
	ssize_t (*pread_full)(int fd, void *buf, size_t len, off_t off);
	int (*pwrite_full)(int fd, const void *buf, size_t len, off_t off);
	/* one positioned transfer, which may be short (EINTR retried): the
	 * bytes moved or -errno; for a caller that must see every short
	 * transfer (snapshot's O_DIRECT end of file) */
	ssize_t (*pread_some)(int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite_some)(int fd, const void *buf, size_t len, off_t off);

	/* ---- NUMA ---- */
	/* the process's CPUs (its main thread's affinity, else the calling
	 * thread's) into a cpu_set_t of setsize bytes */
	int (*process_cpus)(void *set, size_t setsize);
	/* the node of each of n pages (move_pages(2) as a query: nothing
	 * moves); status[i] is a node or a negative errno per page */
	int (*page_nodes)(void **pages, size_t n, int *status);

	/* ---- kept files (attach.c) ---- */
	/* flock(2) on an open file (LOCK_SH/LOCK_EX, | LOCK_NB); EINTR is
	 * retried. A lock belongs to the open file description: it lasts
	 * until every fd of it (dup, fork) is closed */
	int (*flock)(int fd, int op);
	/* the caller's effective uid (geteuid(2)); cannot fail */
	unsigned (*euid)(void);
	/* set the file's access time to now, nothing else (futimens(2) with
	 * UTIME_NOW, UTIME_OMIT; the owner may, whatever the fd's mode) */
	int (*touch_atime)(int fd);

	/* ---- userfaultfd (lazyload.c) ---- */
	/* a new userfaultfd, O_CLOEXEC | O_NONBLOCK: /dev/userfaultfd
	 * (USERFAULTFD_IOC_NEW, Linux 6.1), else the userfaultfd(2) system
	 * call (needs vm.unprivileged_userfaultfd = 1 or CAP_SYS_PTRACE);
	 * user_only adds UFFD_USER_MODE_ONLY to the system call (5.11). The
	 * fd, or the errno of the last way tried */
	int (*uffd_open)(bool user_only);
	/* ioctl(2) with a pointer argument: 0 or -errno (UFFDIO_*) */
	int (*ioctl)(int fd, unsigned long req, void *arg);
	/* mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED |
	 * MREMAP_DONTUNMAP, new) (Linux 5.7; any mapping 5.13): move the
	 * pages and page tables of [old, old+len) to new, replacing what was
	 * at new in the same step, and leave old mapped and empty -- never a
	 * hole another thread's mmap could take (the pool, rpool.c) */
	int (*mremap_fixed)(void *old, size_t len, void *new_addr);
};

/* The hooks in force. Never NULL. */
extern const struct hpr_os_ops *hpr__os;
/* The real kernel. */
extern const struct hpr_os_ops hpr__os_real;
/* Replace the hooks (tests); NULL restores the real ones. Not thread-safe
 * against calls in flight. */
void hpr__os_set(const struct hpr_os_ops *ops);

/*
 * What policy code asks of memory, by meaning: it never spells an MADV_*
 * value. Each is one call of the madvise hook, so a test fakes either the
 * operation's advice there or (for a whole new behaviour) the hook; the
 * kernel's -errno comes back unexplained. len 0 asks whether the kernel
 * knows the operation (probe.c: madvise checks the advice first).
 */
/* fault [addr, addr+len) in for writing (MADV_POPULATE_WRITE, 5.14) */
int hpr__os_populate(void *addr, size_t len);
/* fault it in for reading, writing nothing (MADV_POPULATE_READ, 5.14):
 * present pages are mapped as they are; absent private anonymous memory
 * maps the zero page, but a hole of a tmpfs file is allocated (zeroed), as
 * by any read fault of a mapped tmpfs file -- shared or private mapping,
 * huge= or not (measured on 6.18; read(2) of a hole allocates nothing) */
int hpr__os_populate_read(void *addr, size_t len);
/* make it one huge page now (MADV_COLLAPSE, 6.1) */
int hpr__os_collapse(void *addr, size_t len);
enum hpr__discard {
	HPR__DISCARD_LAZY,   /* when the kernel needs it (MADV_FREE; anonymous) */
	HPR__DISCARD_NOW,    /* now (MADV_DONTNEED) */
	HPR__DISCARD_LOCKED, /* now, mlocked memory too (MADV_DONTNEED_LOCKED, 5.18) */
};
/* give the memory back; anonymous memory reads zero afterwards, a shared
 * file's stays in the file */
int hpr__os_discard(void *addr, size_t len, enum hpr__discard how);
/* ask for huge pages on faults (MADV_HUGEPAGE) */
int hpr__os_want_huge(void *addr, size_t len);
/* no huge pages on faults in the range (MADV_NOHUGEPAGE) */
int hpr__os_no_huge(void *addr, size_t len);
/* leave the range out of a forked child (MADV_DONTFORK) */
int hpr__os_dont_fork(void *addr, size_t len);
/* let a forked child inherit the range again (MADV_DOFORK) */
int hpr__os_do_fork(void *addr, size_t len);

/* Mappings this process holds (lines of /proc/self/maps, read in
 * chunks: no allocation, so it works at vm.max_map_count), or -errno. */
long hpr__os_map_count(void);

/* Guarded touch loop with a chained SIGBUS handler (os_touch.c). */
int hpr__os_touch(void *addr, size_t len, size_t step);

#endif
