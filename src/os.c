/* SPDX-License-Identifier: MIT */
/* The real OS hooks: thin wrappers that turn errno into a return value. */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int os_mmap(void *addr, size_t len, int prot, int flags, int fd,
		   off_t off, void **out)
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

static int os_stat_dev_ino(const char *path, int fd, uint64_t *dev,
			   uint64_t *ino)
{
	struct stat st;
	int rc = path ? stat(path, &st) : fstat(fd, &st);

	if (rc)
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* Read fd until EOF or len bytes (retrying EINTR); bytes read or -errno. */
static ssize_t read_fully(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
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
};

const struct hpr_os_ops *hpr__os = &hpr__os_real;

void hpr__os_set(const struct hpr_os_ops *ops)
{
	hpr__os = ops ? ops : &hpr__os_real;
}
