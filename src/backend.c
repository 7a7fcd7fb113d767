/* SPDX-License-Identifier: MIT */
/*
 * Backends and the AUTO chain.
 *
 *  THP      private anonymous memory at a huge-page-aligned address (no
 *           wasted head or tail), MADV_HUGEPAGE, VMA named "hpr:<name>".
 *  SHMEM    a 0600 O_EXCL|O_NOFOLLOW file on a tmpfs mount (its huge= option
 *           read from mountinfo), created with openat() in the directory
 *           that was checked, or a memfd "hpr:<name>". Where the fault path gives
 *           small pages (huge=never, shmem_enabled=never) but MADV_COLLAPSE
 *           exists (6.1), pages are populated then collapsed.
 *  HUGETLB  a file on hugetlbfs, or an MFD_HUGETLB memfd; MAP_SHARED, so the
 *           kernel reserves the whole pool at mmap time and a short pool is
 *           -ENOMEM here, never a SIGBUS on first touch.
 *  AUTO     hugetlb when the pool (per bound node, and the hugetlb cgroup)
 *           can hold the region -> shmem on the given huge tmpfs -> THP
 *           (shmem memfd for HPR_F_SHARED).
 *
 * HPR_F_FALLBACK on HUGETLB: a short pool gives THP huge pages (a shmem
 * memfd when shared) before base pages, like mimalloc's 1 GiB -> 2 MiB ->
 * MADV_HUGEPAGE chain; hpr_stats() says what was asked for and what was
 * delivered. Attempts the chain falls back from log at DEBUG, the fallback
 * itself at INFO: the caller allowed it.
 */
#define _GNU_SOURCE
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

static _Atomic uint64_t anon_seq;
static _Atomic unsigned file_seq;

/*
 * The directory is opened once (O_PATH) and everything after that works on
 * the fd: fstat, fstatfs, and the backing file is created with openat() in
 * it. A path component swapped for a symlink after the check (a directory
 * another user can write) cannot move the file off the mount that was
 * checked.
 */
/* tmpfs: huge= lives in the super options of mountinfo; the mount point is
 * matched with the path of the directory held at m->dirfd (device st). */
static void tmpfs_huge_mode(const char *dir, const struct stat *st, struct hpr__mountcheck *m)
{
	struct hpr__mount mnt;
	char real[4096], self[64], *mi = NULL;
	ssize_t got;

	m->huge = HPR_SHMEM_NEVER;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", m->dirfd);
	if (hpr__os->realpath(self, real, sizeof(real)) &&
	    hpr__os->realpath(dir, real, sizeof(real)))
		snprintf(real, sizeof(real), "%s", dir);
	/* any length: with a few hundred mounts (Kubernetes nodes, snaps) it
	 * is past 64 KiB, and a mount past a fixed buffer read as huge=never */
	got = hpr__os->read_all("/proc/self/mountinfo", &mi);
	if (got > 0 && !hpr__mountinfo_find(mi, (size_t)got, major(st->st_dev), minor(st->st_dev),
					    real, &mnt)) {
		char v[32];

		if (hpr__opt_get(mnt.super_opts, "huge", v, sizeof(v)) == 1)
			for (int k = 0; k < HPR__SHMEM_MODES; k++)
				if (!strcmp(v, hpr__shmem_mode_names[k]))
					m->huge = k;
		snprintf(m->mnt_point, sizeof(m->mnt_point), "%s", mnt.mnt_point);
	}
	free(mi);
}

/* The checks of hpr__mount_check on the directory held at m->dirfd. */
static int mount_check_fd(const char *dir, struct hpr__mountcheck *m)
{
	struct statfs sf;
	struct stat st;
	int rc = hpr__os->fstat(m->dirfd, &st);

	if (rc)
		return hpr__fail(rc, "path '%s': %s", dir, strerror(-rc));
	if (!S_ISDIR(st.st_mode))
		return hpr__fail(-ENOTDIR,
				 "path '%s' is not a directory: give a "
				 "directory on a tmpfs huge= or hugetlbfs mount",
				 dir);
	rc = hpr__os->fstatfs(m->dirfd, &sf);
	if (rc)
		return hpr__fail(rc, "statfs('%s'): %s", dir, strerror(-rc));
	m->fstype = (long)sf.f_type;
	if (m->fstype != TMPFS_MAGIC && m->fstype != (long)HUGETLBFS_MAGIC)
		return hpr__fail(-EINVAL,
				 "path '%s' is not on tmpfs or hugetlbfs (f_type %#lx): "
				 "mount one, e.g. `mount -t tmpfs -o huge=always none DIR` "
				 "or `mount -t hugetlbfs none DIR`",
				 dir, (unsigned long)sf.f_type);
	m->avail = sf.f_blocks ? (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize : UINT64_MAX;
	if (m->fstype == (long)HUGETLBFS_MAGIC) {
		m->page_size = (size_t)sf.f_bsize;
		m->huge = HPR_SHMEM_ALWAYS;
	} else {
		tmpfs_huge_mode(dir, &st, m);
	}
	return 0;
}

int hpr__mount_check(const char *dir, struct hpr__mountcheck *m)
{
	int rc;

	memset(m, 0, sizeof(*m));
	m->dirfd = hpr__os->openat(AT_FDCWD, dir, O_PATH | O_CLOEXEC, 0);
	if (m->dirfd < 0)
		return hpr__fail(m->dirfd, "path '%s': %s", dir, strerror(-m->dirfd));
	rc = mount_check_fd(dir, m);
	if (rc)
		hpr__mount_release(m);
	return rc;
}

void hpr__mount_release(struct hpr__mountcheck *m)
{
	if (m->dirfd >= 0)
		hpr__os->close(m->dirfd);
	m->dirfd = -1;
}

/* One inaccessible base page on each side of every region. Without them
 * the aligned mapping leaves gaps next to the region, and an application
 * mapping with the same flags placed there (its own MADV_HUGEPAGE memory)
 * merged into the region's VMA: smaps, hpr_stats before Linux 6.7, hpr
 * stat and collapse's smaps fallback then counted its memory as the
 * region's. A PROT_NONE anonymous VMA merges with neither side (its
 * protection differs from the region's, and a neighbour that merges
 * with it stays outside the region). Anon VMA names would do the same,
 * but only where CONFIG_ANON_VMA_NAME is set. */
#define GUARD 4096UL

static int backend_unmap(hpr_region *r);

/* Reserve size+align+guards of address space, map the region at an
 * aligned address inside it and keep one PROT_NONE page either side; the
 * rest of the reservation is unmapped. */
/*
 * hugetlb: make the pool reservation that the mapping needs before the
 * reserved address space is replaced. A shared mapping of a hugetlbfs
 * file reserves its pages in the file's reservation map, and they stay
 * reserved there after munmap (until truncate or hole punch), so the
 * MAP_FIXED mapping that follows needs no more and cannot fail on the
 * pool. A short pool fails here, where nothing of ours was replaced.
 */
static int hugetlb_reserve(hpr_region *r, int fd)
{
	void *probe = NULL;
	int rc = hpr__os->mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, &probe);

	if (!rc)
		hpr__os->munmap(probe, r->size);
	return rc;
}

/* Reserve size+align+guards of address space, map the region at an
 * aligned address inside it and keep one PROT_NONE page either side; the
 * rest of the reservation is unmapped. */
static int map_aligned(hpr_region *r, int flags, int fd)
{
	void *res = NULL, *got = NULL;
	uintptr_t a, end;
	size_t span = r->size + r->page_size + GUARD;
	int rc;

	/* (a private mapping reserves its pages per mapping: nothing to keep) */
	if (fd >= 0 && r->backend == HPR_BACKEND_HUGETLB && (flags & MAP_SHARED) &&
	    (rc = hugetlb_reserve(r, fd)))
		return rc;
	/* PROT_NONE, not writable: no commit charge, and no MAP_NORESERVE so
	 * the guards differ from a region page made PROT_NONE by guard mode */
	rc = hpr__os->mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &res);
	if (rc)
		return hpr__fail(rc, "cannot reserve %zu bytes of address space: %s", span,
				 strerror(-rc));
	a = ((uintptr_t)res + GUARD + r->page_size - 1) & ~(uintptr_t)(r->page_size - 1);
	end = (uintptr_t)res + span;
	if (a - GUARD > (uintptr_t)res)
		hpr__os->munmap(res, a - GUARD - (uintptr_t)res);
	if (end > a + r->size + GUARD)
		hpr__os->munmap((void *)(a + r->size + GUARD), end - (a + r->size + GUARD));
	rc = hpr__os->mmap((void *)a, r->size, PROT_READ | PROT_WRITE, flags | MAP_FIXED, fd, 0,
			   &got);
	if (rc) {
		/*
		 * A failed MAP_FIXED file mapping may leave [a, a+size) unmapped
		 * (Linux 6.12+ clears the old range before the file's ->mmap and
		 * cannot put it back after), and another thread may have mapped
		 * there since: never munmap it blindly. Take it back with
		 * MAP_FIXED_NOREPLACE, which only succeeds where nothing is, and
		 * unmap what we hold; if something is there, it is the kernel's
		 * restored reservation or another thread's memory, and leaving it
		 * costs address space at worst. The guards are still ours.
		 */
		void *back = NULL;

		hpr__os->munmap((void *)(a - GUARD), GUARD);
		hpr__os->munmap((void *)(a + r->size), GUARD);
		/* (before Linux 4.17 the flag is a hint: what it gave is ours too) */
		if (!hpr__os->mmap((void *)a, r->size, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0, &back))
			hpr__os->munmap(back, r->size);
		return rc;
	}
	r->base = got;
	return 0;
}

static int thp_mode(void)
{
	/* mTHP kernels (6.8+) have a per-size switch that can override */
	char buf[128], p[128];
	static const char *const n[] = { "always", "inherit", "madvise", "never" };
	int g = hpr__caps()->info.thp_enabled;
	ssize_t got;
	int k;

	snprintf(p, sizeof(p), "/sys/kernel/mm/transparent_hugepage/hugepages-%zukB/enabled",
		 hpr__caps()->info.thp_pmd_size >> 10);
	got = hpr__os->read_file(p, buf, sizeof(buf));
	if (got <= 0)
		return g;
	k = hpr__parse_sysfs_mode(buf, (size_t)got, n, 4);
	if (k == 0)
		return HPR_THP_ALWAYS;
	if (k == 2)
		return HPR_THP_MADVISE;
	if (k == 3)
		return HPR_THP_NEVER;
	return g;
}

static void set_sizes(hpr_region *r, size_t size, size_t ps)
{
	r->page_size = ps;
	r->page_shift = (unsigned)__builtin_ctzl(ps);
	r->size = (size + ps - 1) & ~(ps - 1);
	r->npages = r->size >> r->page_shift;
}

static int check_size(const struct hpr_config *c, size_t ps)
{
	if (c->size > SIZE_MAX - ps)
		return hpr__fail(-EINVAL,
				 "hpr_create: size %#zx overflows when rounded "
				 "up to the page size",
				 c->size);
	return 0;
}

static int setup_thp(hpr_region *r, const struct hpr_config *c, bool degrade)
{
	const struct hpr__caps *caps = hpr__caps();
	size_t ps = caps->info.thp_pmd_size;
	int rc;

	if (c->page_size && c->page_size != ps)
		return hpr__fail(-EINVAL, "THP page size is %zu on this machine, not %zu", ps,
				 c->page_size);
	if ((rc = check_size(c, ps)))
		return rc;
	set_sizes(r, c->size, ps);
	r->backend = HPR_BACKEND_THP;
	r->degraded = degrade;
	r->fault_huge = !degrade;
	rc = map_aligned(r, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1);
	if (rc)
		return hpr__fail(rc, "cannot map %zu bytes of anonymous memory: %s", r->size,
				 strerror(-rc));
	if (!degrade)
		hpr__os_want_huge(r->base, r->size);
	{
		char nm[80];

		snprintf(nm, sizeof(nm), "hpr:%s", r->name);
		/* 5.17, CONFIG_ANON_VMA_NAME: best effort */
		hpr__os->name_anon(r->base, r->size, nm);
	}
	r->obj_key = (1ULL << 63) | atomic_fetch_add(&anon_seq, 1);
	return 0;
}

/* Does the shmem fault path give huge pages; can collapse make them? */
static void shmem_policy(int mount_huge, bool memfd, bool *fault, bool *coll)
{
	const struct hpr__caps *caps = hpr__caps();
	int g = caps->info.shmem_enabled;

	*coll = caps->info.have_collapse && g != HPR_SHMEM_DENY;
	if (g == HPR_SHMEM_DENY) {
		*fault = false;
		return;
	}
	if (g == HPR_SHMEM_FORCE) {
		*fault = true;
		return;
	}
	if (memfd)
		*fault = g == HPR_SHMEM_ALWAYS || g == HPR_SHMEM_WITHIN_SIZE ||
			 g == HPR_SHMEM_ADVISE;
	else
		*fault = mount_huge == HPR_SHMEM_ALWAYS || mount_huge == HPR_SHMEM_WITHIN_SIZE ||
			 mount_huge == HPR_SHMEM_ADVISE || mount_huge == HPR_SHMEM_FORCE;
}

/* Create the backing file in the checked directory: openat() on its fd,
 * O_EXCL | O_NOFOLLOW, a name of one path component (region names are
 * checked in hpr_create). r->file_path keeps that name while the file
 * must be unlinked (relative to m->dirfd). */
static int open_file(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m)
{
	char p[128];
	int fd;

	if (c->flags & HPR_F_ATTACH) {
		/* the kept name itself; -EEXIST: another process made it
		 * since we looked (attach.c attaches to it then) */
		snprintf(p, sizeof(p), "%s", r->name);
		fd = hpr__os->openat(m->dirfd, p,
				     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd == -EEXIST)
			return fd;
		if (fd >= 0 && (fd = hpr__attach_lock_new(r, m, p, fd)) < 0)
			return fd;
		goto opened;
	}
	for (int t = 0; t < 100; t++) {
		snprintf(p, sizeof(p), "hpr-%s-%d-%u", r->name, (int)getpid(),
			 atomic_fetch_add(&file_seq, 1));
		fd = hpr__os->openat(m->dirfd, p,
				     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd != -EEXIST)
			break;
	}
opened:
	if (fd < 0)
		return hpr__fail(fd, "cannot create a file in '%s': %s", c->path, strerror(-fd));
	r->file_path = strdup(p);
	if (!r->file_path) {
		hpr__os->unlinkat(m->dirfd, p);
		hpr__os->close(fd);
		return hpr__fail(-ENOMEM, "out of memory");
	}
	return fd;
}

static void drop_file(hpr_region *r, const struct hpr__mountcheck *m)
{
	if (r->fd >= 0)
		hpr__os->close(r->fd);
	r->fd = -1;
	if (r->file_path) {
		hpr__os->unlinkat(m->dirfd, r->file_path);
		free(r->file_path);
		r->file_path = NULL;
	}
}

/* The backing fd of a shmem or hugetlb region into r->fd: a file in the
 * checked directory m, or without one a memfd "hpr:<name>" created with
 * mfd_flags (MFD_HUGETLB and its size for hugetlb). */
static int open_backing(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m,
			unsigned mfd_flags)
{
	char nm[80];
	int fd;

	if (m) {
		fd = open_file(r, c, m);
	} else {
		snprintf(nm, sizeof(nm), "hpr:%s", r->name);
		fd = hpr__os->memfd_create(nm, MFD_CLOEXEC | MFD_ALLOW_SEALING | mfd_flags);
		if (fd < 0)
			fd = hpr__fail(fd, "memfd_create%s: %s",
				       mfd_flags & MFD_HUGETLB ? "(MFD_HUGETLB)" : "",
				       strerror(-fd));
		r->is_memfd = true;
	}
	if (fd < 0)
		return fd;
	r->fd = fd;
	return 0;
}

/* Map the fd (sized, sealed) and finish a file-backed region. */
static int map_fd(hpr_region *r, const struct hpr__mountcheck *m)
{
	uint64_t dev = 0, ino = 0;
	int rc;

	/* a region to attach to later has its stamp past its end */
	rc = hpr__os->ftruncate(r->fd, (off_t)(r->size + hpr__stamp_len(r)));
	if (rc)
		return hpr__fail(rc, "cannot size the backing file to %zu bytes: %s",
				 r->size + hpr__stamp_len(r), strerror(-rc));
	/* no fallocate before populate (fault.c): populate alone reports a
	 * full mount or pool */
	if (r->is_memfd) {
		/* nobody may shrink or grow it under its users (SIGBUS) */
		hpr__os->add_seals(r->fd, F_SEAL_SHRINK | F_SEAL_GROW);
	}
	rc = map_aligned(r, MAP_SHARED | (r->backend == HPR_BACKEND_HUGETLB ? 0 : MAP_NORESERVE),
			 r->fd);
	if (rc)
		return rc;
	if (r->backend == HPR_BACKEND_SHMEM)
		hpr__os_want_huge(r->base, r->size);
	if (!(r->flags & HPR_F_SHARED))
		/* a private region's file is ours alone: a forked child must
		 * not share its later writes */
		hpr__os_dont_fork(r->base, r->size);
	if (!hpr__os->stat_dev_ino(NULL, r->fd, &dev, &ino))
		r->obj_key = (dev << 40) ^ ino;
	if (hpr__stamp_len(r) && (rc = hpr__stamp_write(r))) {
		backend_unmap(r);
		return rc;
	}
	if (r->file_path && !(r->flags & HPR_F_KEEP_FILE)) {
		hpr__os->unlinkat(m->dirfd, r->file_path);
		free(r->file_path);
		r->file_path = NULL;
	} else if (r->file_path) {
		/* kept: a later step of hpr_create can still fail and must
		 * then remove it, from this directory, not a path lookup */
		rc = hpr__os->openat(m->dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
		r->dir_fd = rc < 0 ? -1 : rc;
	}
	return 0;
}

/* map_fd; on failure the fd is closed and the file removed. */
static int map_file(hpr_region *r, const struct hpr__mountcheck *m)
{
	int rc = map_fd(r, m);

	if (rc)
		drop_file(r, m);
	return rc;
}

static int setup_shmem(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m,
		       bool degrade)
{
	const struct hpr__caps *caps = hpr__caps();
	size_t ps = caps->info.thp_pmd_size;
	bool fault, coll;
	int rc;

	if (c->page_size && c->page_size != ps)
		return hpr__fail(-EINVAL,
				 "shmem huge page size is %zu on this machine, "
				 "not %zu",
				 ps, c->page_size);
	if ((rc = check_size(c, ps)))
		return rc;
	set_sizes(r, c->size, ps);
	r->backend = HPR_BACKEND_SHMEM;
	shmem_policy(m ? m->huge : -1, !m, &fault, &coll);
	if (!degrade && !fault && !coll) {
		if (m)
			return hpr__fail(-EOPNOTSUPP,
					 "tmpfs at '%s' gives no huge pages (huge= %s, "
					 "shmem_enabled %s) and MADV_COLLAPSE is %s: remount "
					 "with -o huge=always or pass HPR_F_FALLBACK",
					 c->path, hpr__shmem_mode_name(m->huge),
					 hpr__shmem_mode_name(caps->info.shmem_enabled),
					 caps->info.have_collapse ? "denied" : "missing (< 6.1)");
		return hpr__fail(-EOPNOTSUPP,
				 "a memfd gets no huge pages here (shmem_enabled %s, "
				 "MADV_COLLAPSE %s): echo advise > "
				 "/sys/kernel/mm/transparent_hugepage/shmem_enabled, give "
				 "a path on a tmpfs mounted huge=always, or pass HPR_F_FALLBACK",
				 hpr__shmem_mode_name(caps->info.shmem_enabled),
				 caps->info.have_collapse ? "denied" : "missing (< 6.1)");
	}
	r->degraded = degrade && !fault && !coll;
	r->fault_huge = fault && !r->degraded;
	r->collapse_after = !fault && coll && !r->degraded;
	if (m && m->avail < r->size + hpr__stamp_len(r)) {
		char a[32], s[32];

		return hpr__fail(-ENOSPC,
				 "tmpfs at '%s' has %s free, region needs %s: remount "
				 "with a larger size= (mount -o remount,size=...)",
				 c->path, hpr__fmt_size((size_t)m->avail, a, sizeof(a)),
				 hpr__fmt_size(r->size, s, sizeof(s)));
	}
	rc = open_backing(r, c, m, 0);
	return rc ? rc : map_file(r, m);
}

static size_t default_hugetlb_size(void)
{
	const struct hpr__caps *caps = hpr__caps();

	if (hpr__hugetlb_size_supported(caps->info.thp_pmd_size))
		return caps->info.thp_pmd_size;
	return caps->info.nr_hugetlb_sizes ? caps->info.hugetlb[0].page_size : 0;
}

/* Can the hugetlb pool hold npages now? Fills why on no. */
/* Room in the global pool of ps pages, the overcommit included. */
static int pool_room(size_t ps, size_t npages, const char *sz, char *why, size_t wlen)
{
	unsigned long total = 0, free_ = 0, resv = 0, surp = 0, over = 0, avail, room;
	char p[160], b[32], knob[96];

	if (hpr__hugetlb_pool(ps, -1, &total, &free_, &resv, &surp)) {
		snprintf(why, wlen, "no hugetlb pool of %s pages", sz);
		return -EOPNOTSUPP;
	}
	snprintf(p, sizeof(p), "/sys/kernel/mm/hugepages/hugepages-%zukB/nr_overcommit_hugepages",
		 ps >> 10);
	if (hpr__os->read_file(p, b, sizeof(b)) > 0)
		hpr__parse_ulong(b, strlen(b), &over);
	avail = free_ > resv ? free_ - resv : 0;
	room = avail + (over > surp ? over - surp : 0);
	if (room >= npages)
		return 0;
	snprintf(why, wlen,
		 "hugetlb pool has %lu free %s pages (%lu reserved, %lu "
		 "total), region needs %zu: raise the %s pool (echo %lu > %s)",
		 avail, sz, resv, total, npages, sz, total + (unsigned long)npages - room,
		 hpr__pool_knob(ps, knob, sizeof(knob)));
	return -ENOMEM;
}

/* HPR_NUMA_BIND: reservations are global, faults are per node: the free
 * pages of the bound nodes. */
static int nodes_room(const hpr_region *r, size_t ps, size_t npages, const char *sz, char *why,
		      size_t wlen)
{
	unsigned long nfree = 0;

	for (unsigned n = 0; n < HPR_MAX_NODES; n++) {
		unsigned long f = 0;

		if (!(r->numa.mask[n / (8 * sizeof(long))] & (1UL << (n % (8 * sizeof(long))))))
			continue;
		if (!hpr__hugetlb_pool(ps, (int)n, NULL, &f, NULL, NULL))
			nfree += f;
	}
	if (nfree >= npages)
		return 0;
	snprintf(why, wlen,
		 "the bound NUMA nodes have %lu free %s hugetlb pages, "
		 "region needs %zu: raise "
		 "/sys/devices/system/node/nodeN/hugepages/hugepages-%zukB/nr_hugepages",
		 nfree, sz, npages, ps >> 10);
	return -ENOMEM;
}

/* Room for npages of ps: the pool, the bound nodes, the hugetlb cgroup. */
static int hugetlb_room(hpr_region *r, size_t ps, size_t npages, char *why, size_t wlen)
{
	char sz[32], f[320];
	long long cg;
	int rc;

	hpr__fmt_size(ps, sz, sizeof(sz));
	rc = pool_room(ps, npages, sz, why, wlen);
	if (!rc && r->numa.active && r->numa.policy == HPR_NUMA_BIND)
		rc = nodes_room(r, ps, npages, sz, why, wlen);
	if (rc)
		return rc;
	cg = hpr__hugetlb_cgroup_room(ps);
	if (cg < 0 || (unsigned long long)cg >= (unsigned long long)npages * ps)
		return 0;
	snprintf(why, wlen,
		 "the hugetlb cgroup allows %lld more bytes of %s pages, region "
		 "needs %zu: raise %s",
		 cg, sz, npages * ps, hpr__hugetlb_cgroup_file(ps, f, sizeof(f)));
	return -ENOMEM;
}

static int setup_hugetlb(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m)
{
	size_t ps = m ? m->page_size : (c->page_size ? c->page_size : default_hugetlb_size());
	char why[400], sz[32];
	int rc;

	if (!ps || !hpr__hugetlb_size_supported(ps))
		return hpr__fail(c->page_size ? -EINVAL : -EOPNOTSUPP,
				 "hugetlb page size %zu is not offered by this kernel "
				 "(see /sys/kernel/mm/hugepages)",
				 ps);
	if (m && c->page_size && c->page_size != ps)
		return hpr__fail(-EINVAL,
				 "hugetlbfs at '%s' has %s pages, config asks for %zu: "
				 "mount one with -o pagesize=",
				 c->path, hpr__fmt_size(ps, sz, sizeof(sz)), c->page_size);
	if ((rc = check_size(c, ps)))
		return rc;
	set_sizes(r, c->size, ps);
	r->backend = HPR_BACKEND_HUGETLB;
	r->fault_huge = true;
	/* a kept region's stamp takes one more huge page (attach.c) */
	rc = hugetlb_room(r, ps, r->npages + (hpr__stamp_len(r) ? 1 : 0), why, sizeof(why));
	if (rc)
		return hpr__fail(rc, "%s", why);
	if (m && m->avail < r->size + hpr__stamp_len(r)) {
		char a[32];

		return hpr__fail(-ENOSPC,
				 "hugetlbfs at '%s' has %s free (size=), region "
				 "needs %s: remount with a larger size=",
				 c->path, hpr__fmt_size((size_t)m->avail, a, sizeof(a)),
				 hpr__fmt_size(r->size, sz, sizeof(sz)));
	}
	rc = open_backing(r, c, m, MFD_HUGETLB | ((unsigned)__builtin_ctzl(ps) << MFD_HUGE_SHIFT));
	if (rc)
		return rc;
	rc = map_file(r, m);
	if (rc == -ENOMEM) {
		char knob[96];

		/* the pool shrank between our check and the reservation */
		return hpr__fail(-ENOMEM,
				 "the hugetlb pool could not reserve %zu %s "
				 "pages: raise %s",
				 r->npages, hpr__fmt_size(ps, sz, sizeof(sz)),
				 hpr__pool_knob(ps, knob, sizeof(knob)));
	}
	return rc;
}

static void reset_region(hpr_region *r)
{
	r->base = NULL;
	r->size = r->page_size = r->npages = 0;
	r->fd = -1;
	r->is_memfd = false;
	r->fault_huge = r->collapse_after = r->degraded = false;
	r->attached = r->cow = false;
}

static int finish(hpr_region *r)
{
	int rc = hpr__numa_apply(&r->numa, r->base, r->size);

	if (rc) {
		r->flags &= ~HPR_F_KEEP_FILE; /* a failed create leaves no file */
		hpr__backend_destroy(r);
		return rc;
	}
	return 0;
}

/* An attempt's failure that the chain does not handle after all: it was
 * logged at DEBUG inside the attempt, so log it as the error it is. */
static int unhandled(int rc)
{
	hpr__log(HPR_LOG_ERROR, "%s", hpr_strerror(rc));
	return rc;
}

/*
 * HPR_F_FALLBACK when hugetlb cannot be had: THP huge pages for a private
 * region, a shmem memfd (huge where shmem_enabled or MADV_COLLAPSE allows)
 * for a shared one, and base pages only where those cannot be huge either.
 */
static int setup_hugetlb_fallback(hpr_region *r, const struct hpr_config *c)
{
	int rc;

	if (!(c->flags & HPR_F_SHARED))
		return setup_thp(r, c, thp_mode() == HPR_THP_NEVER);
	hpr__err_quiet(true);
	rc = setup_shmem(r, c, NULL, false);
	hpr__err_quiet(false);
	if (rc != -EOPNOTSUPP)
		return rc;
	reset_region(r);
	return setup_shmem(r, c, NULL, true);
}

/* The errors an attempt at huge pages may be fallen back from: no pool or
 * no room (hugetlb), huge pages not to be had this way (every backend). */
static const int soft_hugetlb[] = { -ENOMEM, -EOPNOTSUPP, -ENOSPC, 0 };
static const int soft_hugetlb_explicit[] = { -ENOMEM, -EOPNOTSUPP, 0 };
static const int soft_other[] = { -EOPNOTSUPP, 0 };

/* rc is one of the errors in soft (0-terminated) */
static bool is_soft(int rc, const int *soft)
{
	for (; *soft; soft++)
		if (rc == *soft)
			return true;
	return false;
}

/*
 * One attempt at huge pages from backend b. With soft (the caller can fall
 * back) the attempt is quiet: an error in soft comes back with the region
 * reset for the next attempt, any other is final and logged as the error it
 * is. Without soft, the error is the caller's as the attempt reported it.
 */
static int try_huge(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m,
		    enum hpr_backend b, const int *soft)
{
	int rc;

	if (soft)
		hpr__err_quiet(true);
	if (b == HPR_BACKEND_HUGETLB)
		rc = setup_hugetlb(r, c, m);
	else if (b == HPR_BACKEND_SHMEM)
		rc = setup_shmem(r, c, m, false);
	else
		rc = setup_thp(r, c, false);
	if (soft)
		hpr__err_quiet(false);
	if (!rc || !soft)
		return rc;
	if (!is_soft(rc, soft))
		return unhandled(rc);
	reset_region(r);
	return rc;
}

/* Why each step of the AUTO chain gave up, for the final message. */
struct reasons {
	char text[900];
	size_t used;
};

static void reason(struct reasons *why, const char *what, const char *text)
{
	int n = snprintf(why->text + why->used, sizeof(why->text) - why->used, "%s: %s; ", what,
			 text);

	if (n > 0 && (size_t)n < sizeof(why->text) - why->used)
		why->used += (size_t)n;
}

/* AUTO's last step: base pages where HPR_F_FALLBACK allows, else the
 * reasons every step gave. */
static int auto_base_pages(hpr_region *r, const struct hpr_config *c,
			   const struct hpr__mountcheck *m, const struct reasons *why)
{
	int rc;

	if (!(c->flags & HPR_F_FALLBACK))
		return hpr__fail(-EOPNOTSUPP,
				 "no backend can give region '%s' huge pages: "
				 "%sor pass HPR_F_FALLBACK",
				 r->name, why->text);
	hpr__log(HPR_LOG_INFO,
		 "region '%s': no huge pages to be had (%s), using "
		 "base pages (HPR_F_FALLBACK)",
		 r->name, why->text);
	if (m && m->fstype == TMPFS_MAGIC)
		rc = setup_shmem(r, c, m, true);
	else if (c->flags & HPR_F_SHARED)
		rc = setup_shmem(r, c, NULL, true);
	else
		rc = setup_thp(r, c, true);
	return rc ? rc : finish(r);
}

/* AUTO: hugetlb, then shmem on the given tmpfs, then THP (a shmem memfd
 * for a shared region), then base pages under HPR_F_FALLBACK. */
static int create_auto(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m)
{
	struct reasons why = { .used = 0 };
	bool on_htlb = m && m->fstype == (long)HUGETLBFS_MAGIC;
	int rc;

	rc = try_huge(r, c, on_htlb ? m : NULL, HPR_BACKEND_HUGETLB, soft_hugetlb);
	if (!is_soft(rc, soft_hugetlb))
		return rc ? rc : finish(r);
	reason(&why, "hugetlb", hpr_strerror(rc));
	if (m && m->fstype == TMPFS_MAGIC) {
		rc = try_huge(r, c, m, HPR_BACKEND_SHMEM, soft_other);
		if (!is_soft(rc, soft_other))
			return rc ? rc : finish(r);
		reason(&why, "shmem", hpr_strerror(rc));
	}
	if (c->flags & HPR_F_SHARED) {
		rc = try_huge(r, c, NULL, HPR_BACKEND_SHMEM, soft_other);
		if (!is_soft(rc, soft_other))
			return rc ? rc : finish(r);
		reason(&why, "shmem memfd", hpr_strerror(rc));
	} else if (thp_mode() != HPR_THP_NEVER) {
		rc = try_huge(r, c, NULL, HPR_BACKEND_THP, NULL);
		return rc ? rc : finish(r);
	} else {
		reason(&why, "thp", "/sys/kernel/mm/transparent_hugepage/enabled is never");
	}
	return auto_base_pages(r, c, m, &why);
}

/* m: the checked directory of c->path, NULL without a path */
static int create_backend(hpr_region *r, const struct hpr_config *c,
			  const struct hpr__mountcheck *m)
{
	bool fallback = c->flags & HPR_F_FALLBACK;
	int rc;

	r->requested = c->backend;
	switch (c->backend) {
	case HPR_BACKEND_AUTO:
		return create_auto(r, c, m);
	case HPR_BACKEND_THP:
		if (thp_mode() != HPR_THP_NEVER)
			rc = setup_thp(r, c, false);
		else if (fallback)
			rc = setup_thp(r, c, true);
		else
			return hpr__fail(-EOPNOTSUPP,
					 "THP is disabled "
					 "(/sys/kernel/mm/transparent_hugepage/enabled "
					 "is never): echo madvise > that file, or pass "
					 "HPR_F_FALLBACK for base pages");
		break;
	case HPR_BACKEND_SHMEM:
		if (m && m->fstype != TMPFS_MAGIC)
			return hpr__fail(-EINVAL,
					 "path '%s' is on hugetlbfs: use "
					 "HPR_BACKEND_HUGETLB there, or a tmpfs "
					 "mounted huge= for shmem",
					 c->path);
		rc = try_huge(r, c, m, HPR_BACKEND_SHMEM, fallback ? soft_other : NULL);
		if (fallback && is_soft(rc, soft_other)) {
			hpr__log(HPR_LOG_INFO, "region '%s': %s; using base pages (HPR_F_FALLBACK)",
				 r->name, hpr_strerror(rc));
			rc = setup_shmem(r, c, m, true);
		}
		break;
	case HPR_BACKEND_HUGETLB:
		if (m && m->fstype != (long)HUGETLBFS_MAGIC)
			return hpr__fail(-EINVAL,
					 "path '%s' is on tmpfs, not hugetlbfs: use "
					 "HPR_BACKEND_SHMEM there, or mount -t "
					 "hugetlbfs",
					 c->path);
		rc = try_huge(r, c, m, HPR_BACKEND_HUGETLB,
			      fallback ? soft_hugetlb_explicit : NULL);
		if (fallback && is_soft(rc, soft_hugetlb_explicit)) {
			hpr__log(HPR_LOG_INFO, "region '%s': %s; falling back (HPR_F_FALLBACK)",
				 r->name, hpr_strerror(rc));
			rc = setup_hugetlb_fallback(r, c);
		}
		break;
	default:
		return hpr__fail(-EINVAL, "unknown backend %d", (int)c->backend);
	}
	return rc ? rc : finish(r);
}

/* Map the checked file: shared, or a private copy-on-write view. */
static int map_kept(hpr_region *r, const struct hpr_config *c, const struct hpr__kept *k)
{
	bool shared = c->flags & HPR_F_SHARED;
	uint64_t dev = 0, ino = 0;
	char why[400];
	int rc;

	set_sizes(r, k->size, k->page_size);
	r->backend = c->backend;
	r->requested = c->backend;
	if (!shared && r->backend == HPR_BACKEND_HUGETLB) {
		/* a private hugetlb mapping reserves a page for every
		 * copy-on-write it may make, at mmap */
		rc = hugetlb_room(r, r->page_size, r->npages, why, sizeof(why));
		if (rc)
			return hpr__fail(rc, "private attach of kept region '%s': %s", r->name,
					 why);
	}
	rc = map_aligned(r,
			 (shared ? MAP_SHARED : MAP_PRIVATE) |
				 (r->backend == HPR_BACKEND_HUGETLB ? 0 : MAP_NORESERVE),
			 k->fd);
	if (rc)
		return hpr__fail(rc, "kept region '%s': cannot map it: %s", r->name, strerror(-rc));
	if (r->backend == HPR_BACKEND_SHMEM)
		hpr__os_want_huge(r->base, r->size); /* huge=advise */
	if (!shared)
		hpr__os_dont_fork(r->base, r->size); /* as every private file region */
	if (!hpr__os->stat_dev_ino(NULL, k->fd, &dev, &ino))
		r->obj_key = (dev << 40) ^ ino;
	r->fd = k->fd;
	r->attached = true;
	r->cow = !shared;
	r->fault_huge = true;
	return 0;
}

/* Attach r to the kept file m/c->name: checked and locked (attach.c),
 * then mapped; nothing stays open or mapped on failure. */
static int attach_kept(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m)
{
	struct hpr__kept k;
	int rc = hpr__attach_open(r, c, m, &k);

	if (rc)
		return rc;
	rc = map_kept(r, c, &k);
	if (rc)
		hpr__os->close(k.fd); /* and its lock */
	return rc;
}

/*
 * HPR_F_ATTACH, HPR_F_ATTACH_ONLY: attach to the kept file path/name
 * (attach.c); when there is none, HPR_F_ATTACH creates it under that name
 * (O_EXCL). A process that creates it between our look and our create
 * wins: attach to its file then (-EBUSY while it still holds it).
 */
static int attach_or_create(hpr_region *r, const struct hpr_config *in,
			    const struct hpr__mountcheck *m)
{
	struct hpr_config c = *in;
	int rc = hpr__attach_backend(&c, m);

	for (int t = 0; !rc && t < 2; t++) {
		rc = attach_kept(r, &c, m);
		if (rc != -ENOENT || (c.flags & HPR_F_ATTACH_ONLY))
			return rc ? rc : finish(r);
		rc = create_backend(r, &c, m);
		if (rc != -EEXIST)
			return rc;
		reset_region(r);
		rc = 0;
	}
	/* made and gone twice in a row */
	return rc ? rc :
		    hpr__fail(-EBUSY,
			      "kept region '%s' in '%s' appeared and vanished twice while we "
			      "attached or created it: another process creates and removes it",
			      c.name, c.path);
}

int hpr__backend_create(hpr_region *r, const struct hpr_config *c)
{
	struct hpr__mountcheck m = { .dirfd = -1 };
	int rc;

	if (c->path && c->backend != HPR_BACKEND_THP) { /* THP has no path */
		rc = hpr__mount_check(c->path, &m);
		if (rc)
			return rc;
	}
	if (c->flags & HPR__F_ATTACHING) {
		rc = attach_or_create(r, c, &m);
		r->requested = c->backend; /* AUTO stays AUTO in hpr_stats */
	} else
		rc = create_backend(r, c, m.dirfd >= 0 ? &m : NULL);
	hpr__mount_release(&m);
	return rc;
}

static int backend_unmap(hpr_region *r)
{
	int rc = 0;

	if (r->base) /* the region and its guard pages */
		rc = hpr__os->munmap(r->base - GUARD, r->size + 2 * GUARD);
	r->base = NULL;
	return rc;
}

int hpr__backend_destroy(hpr_region *r)
{
	int rc = backend_unmap(r);

	if (r->fd >= 0)
		hpr__os->close(r->fd);
	r->fd = -1;
	/* a file that was not kept was unlinked when it was mapped; a kept
	 * one goes only when a failed create dropped HPR_F_KEEP_FILE */
	if (r->file_path && r->dir_fd >= 0 && !(r->flags & HPR_F_KEEP_FILE))
		hpr__os->unlinkat(r->dir_fd, r->file_path);
	if (r->dir_fd >= 0)
		hpr__os->close(r->dir_fd);
	r->dir_fd = -1;
	free(r->file_path);
	r->file_path = NULL;
	return rc;
}
