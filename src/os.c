/* SPDX-License-Identifier: MIT */
/* The real OS hooks: thin wrappers that turn errno into a return value. */
#define _GNU_SOURCE
#include "os.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <numaif.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* USERFAULTFD_IOC_NEW (Linux 6.1, /dev/userfaultfd): spelled here so the
 * library builds against older kernel headers and asks at run time */
#define USERFAULTFD_IOC_NEW_ _IO(0xAA, 0x00)
#ifndef __NR_userfaultfd
#define __NR_userfaultfd 323 /* x86-64 */
#endif

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41 /* Linux 5.17 */
#define PR_SET_VMA_ANON_NAME 0
#endif

#ifndef PAGEMAP_SCAN
/* PAGEMAP_SCAN (Linux 6.7, fs/proc/task_mmu.c) for older uapi headers:
 * the layout and numbers of linux/fs.h */
struct page_region {
	__u64 start, end, categories;
};
struct pm_scan_arg {
	__u64 size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
		category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGE_IS_HUGE (1 << 6)
#endif

static int os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, void **out)
{
	void *p = mmap(addr, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

static int os_munmap(void *addr, size_t len)
{
	return munmap(addr, len) ? -errno : 0;
}

static int os_madvise(void *addr, size_t len, int advice)
{
	return madvise(addr, len, advice) ? -errno : 0;
}

static int os_mprotect(void *addr, size_t len, int prot)
{
	return mprotect(addr, len, prot) ? -errno : 0;
}

static int os_mlock(void *addr, size_t len)
{
	return mlock(addr, len) ? -errno : 0;
}

static int os_munlock(void *addr, size_t len)
{
	return munlock(addr, len) ? -errno : 0;
}

static int os_fallocate(int fd, int mode, off_t off, off_t len)
{
	int rc;

	do
		rc = fallocate(fd, mode, off, len);
	while (rc && errno == EINTR);
	return rc ? -errno : 0;
}

static int os_memfd_create(const char *name, unsigned flags)
{
	int fd = (int)syscall(SYS_memfd_create, name, flags);

	return fd < 0 ? -errno : fd;
}

static int os_openat(int dirfd, const char *name, int flags, unsigned mode)
{
	int fd = openat(dirfd, name, flags, (mode_t)mode);

	return fd < 0 ? -errno : fd;
}

static int os_close(int fd)
{
	/* close(2) on Linux releases the fd even when it reports EINTR */
	return close(fd) && errno != EINTR ? -errno : 0;
}

static int os_ftruncate(int fd, off_t len)
{
	return ftruncate(fd, len) ? -errno : 0;
}

static int os_unlinkat(int dirfd, const char *name)
{
	return unlinkat(dirfd, name, 0) ? -errno : 0;
}

static int os_add_seals(int fd, int seals)
{
	return fcntl(fd, F_ADD_SEALS, seals) ? -errno : 0;
}

static int os_statfs(const char *path, struct statfs *st)
{
	return statfs(path, st) ? -errno : 0;
}

static int os_fstatfs(int fd, struct statfs *st)
{
	return fstatfs(fd, st) ? -errno : 0;
}

static int os_stat_dev_ino(const char *path, int fd, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	int rc = path ? stat(path, &st) : fstat(fd, &st);

	if (rc)
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* Move all len bytes at file offset off, or at the file position when off
 * is negative, retrying EINTR and short transfers. Returns the bytes moved
 * (fewer only when a read meets the end of the file), -EIO when a write
 * moves nothing, or -errno. */
static ssize_t io_full(int fd, void *buf, size_t len, off_t off, bool wr)
{
	size_t done = 0;

	while (done < len) {
		char *p = (char *)buf + done;
		off_t at = off + (off_t)done;
		ssize_t n;

		if (wr)
			n = off < 0 ? write(fd, p, len - done) : pwrite(fd, p, len - done, at);
		else
			n = off < 0 ? read(fd, p, len - done) : pread(fd, p, len - done, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0 && wr)
			return -EIO;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Read fd until EOF or len bytes; bytes read or -errno. */
static ssize_t read_fully(int fd, char *buf, size_t len)
{
	return io_full(fd, buf, len, -1, false);
}

static ssize_t os_pread_full(int fd, void *buf, size_t len, off_t off)
{
	return io_full(fd, buf, len, off, false);
}

static int os_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n = io_full(fd, (void *)buf, len, off, true);

	return n < 0 ? (int)n : 0;
}

static ssize_t os_read_file(const char *path, char *buf, size_t len)
{
	ssize_t got;
	int fd;

	if (!len)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read_fully(fd, buf, len - 1);
	close(fd);
	if (got >= 0)
		buf[got] = '\0';
	return got;
}

static ssize_t os_read_all(const char *path, char **out)
{
	size_t cap = 0, got = 0;
	char *buf = NULL;
	int fd;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do { /* until a read leaves room: the end of the file */
		size_t ncap = cap ? 2 * cap : 1 << 14;
		char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
		ssize_t n;

		if (!nb) {
			free(buf);
			close(fd);
			return -ENOMEM;
		}
		buf = nb;
		cap = ncap;
		n = read_fully(fd, buf + got, cap - 1 - got);
		if (n < 0) {
			free(buf);
			close(fd);
			return n;
		}
		got += (size_t)n;
	} while (got == cap - 1);
	close(fd);
	buf[got] = '\0';
	*out = buf;
	return (ssize_t)got;
}

static int os_mbind(void *addr, size_t len, int mode, const unsigned long *mask,
		    unsigned long maxnode, unsigned flags)
{
	long rc = syscall(SYS_mbind, addr, len, mode, mask, maxnode, flags);

	return rc ? -errno : 0;
}

static ssize_t os_pread_some(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n;

	do
		n = pread(fd, buf, len, off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static ssize_t os_pwrite_some(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n;

	do
		n = pwrite(fd, buf, len, off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static int os_fstat(int fd, struct stat *st)
{
	return fstat(fd, st) ? -errno : 0;
}

static int os_fd_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -errno : fl;
}

static int os_fdatasync(int fd)
{
	return fdatasync(fd) ? -errno : 0;
}

static int os_realpath(const char *path, char *out, size_t len)
{
	char *p = realpath(path, NULL);
	size_t n;

	if (!p)
		return -errno;
	n = strlen(p);
	if (n >= len) {
		free(p);
		return -ENAMETOOLONG;
	}
	memcpy(out, p, n + 1);
	free(p);
	return 0;
}

static int os_kernel_release(char *buf, size_t len)
{
	struct utsname u;

	if (uname(&u))
		return -errno;
	snprintf(buf, len, "%s", u.release);
	return 0;
}

static int os_list_dir(const char *path, int (*fn)(void *arg, const char *name), void *arg)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && fn(arg, de->d_name))
			break;
	closedir(d);
	return 0;
}

static int os_read_lines(const char *path, void (*fn)(void *arg, const char *line, size_t len),
			 void *arg)
{
	size_t cap = 1 << 16, have = 0;
	char *buf;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + have, cap - have);
		size_t s = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0) {
			if (have)
				fn(arg, buf, have);
			break;
		}
		have += (size_t)n;
		for (size_t i = 0; i < have; i++) {
			if (buf[i] == '\n') {
				fn(arg, buf + s, i - s);
				s = i + 1;
			}
		}
		memmove(buf, buf + s, have - s);
		have -= s;
		if (have == cap) /* absurd line: drop it */
			have = 0;
	}
	free(buf);
	close(fd);
	return rc;
}

static int os_name_anon(void *addr, size_t len, const char *name)
{
	int rc = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)addr, len, name);

	return rc ? -errno : 0;
}

static int os_any_resident(void *addr, size_t len)
{
	unsigned char vec[512];
	size_t n = len / 4096, done = 0;

	while (done < n) {
		size_t k = n - done < sizeof(vec) ? n - done : sizeof(vec);

		if (mincore((char *)addr + done * 4096, k * 4096, vec))
			return -errno;
		for (size_t i = 0; i < k; i++)
			if (vec[i] & 1)
				return 1;
		done += k;
	}
	return 0;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7 */
#endif

static int os_mremap_fixed(void *old, size_t len, void *new_addr)
{
	void *p = mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, new_addr);

	return p == MAP_FAILED ? -errno : 0;
}

static int os_pagemap_open(void)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* ENOTTY before 6.7; EINVAL for this deliberately empty argument
	 * on newer kernels */
	if (ioctl(fd, PAGEMAP_SCAN, NULL) >= 0 || errno == ENOTTY) {
		close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

static int os_pagemap_count(int fd, uintptr_t lo, uintptr_t hi, uint64_t *present, uint64_t *huge)
{
	struct page_region vec[16];
	struct pm_scan_arg a;
	uint64_t start = lo;

	*present = *huge = 0;
	while (start < hi) {
		long n;

		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.start = start;
		a.end = hi;
		a.vec = (uintptr_t)vec;
		a.vec_len = 16;
		/* present and not the zero page (smaps' Rss leaves it out) */
		a.category_mask = PAGE_IS_PRESENT | PAGE_IS_PFNZERO;
		a.category_inverted = PAGE_IS_PFNZERO;
		a.return_mask = PAGE_IS_HUGE;
		n = ioctl(fd, PAGEMAP_SCAN, &a);
		if (n < 0)
			return -errno;
		for (long i = 0; i < n; i++) {
			*present += vec[i].end - vec[i].start;
			if (vec[i].categories & PAGE_IS_HUGE)
				*huge += vec[i].end - vec[i].start;
		}
		if (a.walk_end <= start)
			break;
		start = a.walk_end;
	}
	return 0;
}

static int os_pagemap_any(int fd, uintptr_t lo, uintptr_t hi)
{
	struct page_region v;
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.start = lo,
		.end = hi,
		.vec = (uintptr_t)&v,
		.vec_len = 1,
		.max_pages = 1,
		.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
	};
	long n = ioctl(fd, PAGEMAP_SCAN, &a);

	return n < 0 ? -errno : n > 0;
}

static int os_psi_trigger(int fd, const char *trigger)
{
	return write(fd, trigger, strlen(trigger) + 1) < 0 ? -errno : 0;
}

static void os_sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static int os_process_cpus(void *set, size_t setsize)
{
	if (sched_getaffinity(getpid(), setsize, set) && sched_getaffinity(0, setsize, set))
		return -errno;
	return 0;
}

static int os_page_nodes(void **pages, size_t n, int *status)
{
	/* nodes == NULL: query only, nothing moves */
	return move_pages(0, n, pages, NULL, status, 0) < 0 ? -errno : 0;
}

long hpr__os_map_count(void)
{
	char buf[4096];
	long lines = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((n = read_fully(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	close(fd);
	return n < 0 ? (long)n : lines;
}

static int os_flock(int fd, int op)
{
	int rc;

	do
		rc = flock(fd, op) ? -errno : 0;
	while (rc == -EINTR);
	return rc;
}

static unsigned os_euid(void)
{
	return (unsigned)geteuid();
}

static int os_touch_atime(int fd)
{
	const struct timespec t[2] = { { .tv_nsec = UTIME_NOW }, { .tv_nsec = UTIME_OMIT } };

	return futimens(fd, t) ? -errno : 0;
}

static int os_uffd_open(bool user_only)
{
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC), fd, rc;

	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW_, O_CLOEXEC | O_NONBLOCK);
		rc = fd < 0 ? -errno : fd;
		close(dev);
		if (rc >= 0)
			return rc;
	}
	fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | (user_only ? 1 : 0));
	return fd < 0 ? -errno : fd;
}

static int os_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) < 0 ? -errno : 0;
}

const struct hpr_os_ops hpr__os_real = {
	.mmap = os_mmap,
	.munmap = os_munmap,
	.madvise = os_madvise,
	.mprotect = os_mprotect,
	.mlock = os_mlock,
	.munlock = os_munlock,
	.fallocate = os_fallocate,
	.memfd_create = os_memfd_create,
	.openat = os_openat,
	.close = os_close,
	.ftruncate = os_ftruncate,
	.unlinkat = os_unlinkat,
	.add_seals = os_add_seals,
	.statfs = os_statfs,
	.fstatfs = os_fstatfs,
	.stat_dev_ino = os_stat_dev_ino,
	.read_file = os_read_file,
	.read_all = os_read_all,
	.mbind = os_mbind,
	.touch = hpr__os_touch,
	.sleep_us = os_sleep_us,
	.fstat = os_fstat,
	.fd_flags = os_fd_flags,
	.fdatasync = os_fdatasync,
	.realpath = os_realpath,
	.kernel_release = os_kernel_release,
	.list_dir = os_list_dir,
	.read_lines = os_read_lines,
	.name_anon = os_name_anon,
	.any_resident = os_any_resident,
	.pagemap_open = os_pagemap_open,
	.pagemap_count = os_pagemap_count,
	.pagemap_any = os_pagemap_any,
	.psi_trigger = os_psi_trigger,
	.pread_full = os_pread_full,
	.pwrite_full = os_pwrite_full,
	.pread_some = os_pread_some,
	.pwrite_some = os_pwrite_some,
	.process_cpus = os_process_cpus,
	.page_nodes = os_page_nodes,
	.flock = os_flock,
	.euid = os_euid,
	.touch_atime = os_touch_atime,
	.uffd_open = os_uffd_open,
	.ioctl = os_ioctl,
	.mremap_fixed = os_mremap_fixed,
};

const struct hpr_os_ops *hpr__os = &hpr__os_real;

int hpr__os_populate(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_POPULATE_WRITE);
}

int hpr__os_populate_read(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_POPULATE_READ);
}

int hpr__os_collapse(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_COLLAPSE);
}

int hpr__os_discard(void *addr, size_t len, enum hpr__discard how)
{
	static const int advice[] = {
		[HPR__DISCARD_LAZY] = MADV_FREE,
		[HPR__DISCARD_NOW] = MADV_DONTNEED,
		[HPR__DISCARD_LOCKED] = MADV_DONTNEED_LOCKED,
	};

	return hpr__os->madvise(addr, len, advice[how]);
}

int hpr__os_want_huge(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_HUGEPAGE);
}

int hpr__os_no_huge(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_NOHUGEPAGE);
}

int hpr__os_dont_fork(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_DONTFORK);
}

int hpr__os_do_fork(void *addr, size_t len)
{
	return hpr__os->madvise(addr, len, MADV_DOFORK);
}

void hpr__os_set(const struct hpr_os_ops *ops)
{
	hpr__os = ops ? ops : &hpr__os_real;
}
