/* SPDX-License-Identifier: MIT */
/*
 * Kept regions: the stamp a region made with HPR_F_ATTACH carries in its
 * file, the checks a kept file passes before it is mapped again, and who
 * may hold it (flock). docs/attach.md has the why of each choice. The
 * mapping itself is backend.c's (attach_kept), which calls this file and
 * is never called from it.
 *
 * The stamp is a small header in the page past the region's end in the
 * file: [0, size) are the region's bytes at the offsets they had, so an
 * attach maps the file as it is, with nothing moved or copied, and a
 * truncated file has lost its stamp. An xattr would need user xattrs on
 * tmpfs (Linux 6.6) and hugetlbfs has none; a sidecar file can be copied,
 * removed or replaced apart from the region it describes.
 *
 * Exclusivity is flock(2) on the file: the creator and a shared attach
 * hold LOCK_EX, a private (copy-on-write) attach LOCK_SH, both taken with
 * LOCK_NB so a holder is -EBUSY at once. The lock lives with the open file
 * description: a forked child that still has the fd still holds it, a
 * killed process does not.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "snapshot.h" /* hpr__xxh64 */
#include "stamp.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define STAMP_SEED 0x6870726b657074ULL /* "hprkept" */

/* the layout tests/test_attach.c forges stamps with */
_Static_assert(offsetof(struct hpr__stamp, backend) == 12 &&
		       offsetof(struct hpr__stamp, uid) == 40 &&
		       offsetof(struct hpr__stamp, sum) == 128,
	       "stamp layout");

size_t hpr__stamp_len(const hpr_region *r)
{
	if (!(r->flags & HPR_F_ATTACH) || r->is_memfd || r->attached)
		return 0;
	return r->backend == HPR_BACKEND_HUGETLB ? r->page_size : 4096;
}

uint64_t hpr__stamp_sum(const struct hpr__stamp *s)
{
	return hpr__xxh64(s, offsetof(struct hpr__stamp, sum), STAMP_SEED);
}

/*
 * Through a mapping of the stamp page, not pwrite: hugetlbfs files cannot
 * be written with write(2). On tmpfs the page is MADV_NOHUGEPAGE first: a
 * huge=always mount may give a fault past i_size a whole huge page
 * (shmem_is_huge() of 6.1-6.6 checks no size for "always"; 6.18, where the
 * tests run, gives a base page either way, so they cannot tell).
 */
int hpr__stamp_write(hpr_region *r)
{
	size_t len = hpr__stamp_len(r);
	struct hpr__stamp s;
	void *p = NULL;
	int rc;

	memset(&s, 0, sizeof(s));
	memcpy(s.magic, HPR__STAMP_MAGIC, sizeof(s.magic));
	s.version = HPR__STAMP_VERSION;
	s.backend = (uint32_t)r->backend;
	s.size = r->size;
	s.page_size = r->page_size;
	s.stamp_len = len;
	s.uid = hpr__os->euid();
	memcpy(s.name, r->name, strnlen(r->name, sizeof(s.name) - 1)); /* names are <= 40 */
	s.sum = hpr__stamp_sum(&s);
	rc = hpr__os->mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, (off_t)r->size,
			   &p);
	if (rc)
		return hpr__fail(rc, "region '%s': cannot map its stamp page at %#zx: %s%s",
				 r->name, r->size, strerror(-rc),
				 rc == -ENOMEM && r->backend == HPR_BACKEND_HUGETLB ?
					 " (a kept hugetlb region takes one more huge page)" :
					 "");
	if (r->backend == HPR_BACKEND_SHMEM)
		hpr__os_no_huge(p, len);
	rc = hpr__os_populate(p, 4096);
	if (rc == -EINVAL) /* no MADV_POPULATE_WRITE (< 5.14): touch it */
		rc = hpr__os->touch(p, 4096, 4096);
	if (!rc)
		memcpy(p, &s, sizeof(s));
	hpr__os->munmap(p, len);
	if (rc)
		return hpr__fail(rc == -EFAULT ? -ENOSPC : rc,
				 "region '%s': cannot write its stamp: %s (the mount or pool "
				 "is full)",
				 r->name, strerror(-rc));
	return 0;
}

int hpr__attach_lock_new(hpr_region *r, const struct hpr__mountcheck *m, const char *name, int fd)
{
	int rc = hpr__os->flock(fd, LOCK_EX | LOCK_NB);

	if (!rc)
		return fd;
	/* another process opened the file in the moment since we made it */
	hpr__os->unlinkat(m->dirfd, name);
	hpr__os->close(fd);
	return hpr__fail(rc == -EWOULDBLOCK ? -EBUSY : rc,
			 "region '%s': another process locked the file '%s' we just made in "
			 "'%s': start one creator at a time",
			 r->name, name, m->mnt_point);
}

/*
 * A tmpfs that gives huge pages on faults (huge=always, within_size,
 * advise, or shmem_enabled force). A mount turned huge=never keeps the huge
 * pages its files have (measured on 6.18: a kept file still maps PMD-mapped
 * there), but every page faulted anew would be small: refused at create
 * and at attach alike, so a region is never made where it could not come
 * back.
 */
static int check_huge_mount(const struct hpr_config *c, const struct hpr__mountcheck *m)
{
	const struct hpr__caps *caps = hpr__caps();
	int g = caps->info.shmem_enabled, huge = m->huge;

	if (g == HPR_SHMEM_FORCE)
		return 0;
	if (g != HPR_SHMEM_DENY &&
	    (huge == HPR_SHMEM_ALWAYS || huge == HPR_SHMEM_WITHIN_SIZE || huge == HPR_SHMEM_ADVISE))
		return 0;
	return hpr__fail(-EMEDIUMTYPE,
			 "kept region '%s': the tmpfs at '%s' does not give huge pages "
			 "(huge=%s, shmem_enabled %s): pages a kept region has stay huge, "
			 "new ones would be small; remount it with -o remount,huge=always",
			 c->name, m->mnt_point[0] ? m->mnt_point : c->path,
			 hpr__shmem_mode_name(huge), hpr__shmem_mode_name(g));
}

int hpr__attach_backend(struct hpr_config *c, const struct hpr__mountcheck *m)
{
	enum hpr_backend fs = m->fstype == TMPFS_MAGIC ? HPR_BACKEND_SHMEM : HPR_BACKEND_HUGETLB;

	if (c->backend == HPR_BACKEND_AUTO)
		c->backend = fs;
	if (c->backend != fs)
		return hpr__fail(-EINVAL,
				 "hpr_create: path '%s' is on %s: a kept %s region needs "
				 "%s",
				 c->path, fs == HPR_BACKEND_SHMEM ? "tmpfs" : "hugetlbfs",
				 hpr_backend_name(c->backend),
				 c->backend == HPR_BACKEND_SHMEM ? "a tmpfs mounted huge=" :
								   "hugetlbfs");
	return fs == HPR_BACKEND_SHMEM ? check_huge_mount(c, m) : 0;
}

/* What an attach is checking: the config, the mount, the open file. */
struct kept {
	hpr_region *r;
	const struct hpr_config *c;
	const struct hpr__mountcheck *m;
	int fd;
	bool shared;
	struct stat st;
	size_t ps; /* the mount's page size */
	struct hpr__stamp s;
};

/* The name is a regular file of the caller's. */
static int check_file(struct kept *k)
{
	int rc = hpr__os->fstat(k->fd, &k->st);
	unsigned me = hpr__os->euid();

	if (rc)
		return hpr__fail(rc, "kept region '%s': fstat: %s", k->r->name, strerror(-rc));
	if (!S_ISREG(k->st.st_mode))
		return hpr__fail(-EBADMSG,
				 "kept region '%s' in '%s' is not a regular file (mode %#o): "
				 "not a region hpregion kept; remove it or choose another name",
				 k->r->name, k->c->path, (unsigned)k->st.st_mode);
	if (k->st.st_uid != me)
		return hpr__fail(-EPERM,
				 "kept region '%s' in '%s' is owned by uid %u, not by you "
				 "(uid %u): attach as its owner, or remove it",
				 k->r->name, k->c->path, (unsigned)k->st.st_uid, me);
	return 0;
}

/* The file is on the kind of file system its region lives on. */
static int check_mount(struct kept *k)
{
	struct statfs sf;
	int rc = hpr__os->fstatfs(k->fd, &sf);
	long want = k->c->backend == HPR_BACKEND_SHMEM ? TMPFS_MAGIC : (long)HUGETLBFS_MAGIC;

	if (rc)
		return hpr__fail(rc, "kept region '%s': fstatfs: %s", k->r->name, strerror(-rc));
	if ((long)sf.f_type != want)
		return hpr__fail(-EMEDIUMTYPE,
				 "kept region '%s' in '%s' is on a file system of type %#lx, "
				 "not %s: a mount on top of the file?",
				 k->r->name, k->c->path, (unsigned long)sf.f_type,
				 want == TMPFS_MAGIC ? "tmpfs" : "hugetlbfs");
	k->ps = want == TMPFS_MAGIC ? hpr__caps()->info.thp_pmd_size : (size_t)sf.f_bsize;
	return 0;
}

/* Nobody else holds it the way we want it. */
static int take_lock(struct kept *k)
{
	int rc = hpr__os->flock(k->fd, (k->shared ? LOCK_EX : LOCK_SH) | LOCK_NB);

	if (rc == -EWOULDBLOCK)
		return hpr__fail(-EBUSY,
				 "kept region '%s' in '%s' is held by another process (%s): "
				 "wait for it to destroy the region or exit%s",
				 k->r->name, k->c->path,
				 k->shared ? "any holder excludes a shared attach" :
					     "a shared holder excludes private views",
				 k->shared ? ", or attach without HPR_F_SHARED for a private "
					     "copy-on-write view" :
					     "");
	if (rc)
		return hpr__fail(rc, "kept region '%s': flock: %s", k->r->name, strerror(-rc));
	return 0;
}

const char *hpr__stamp_invalid(const struct hpr__stamp *s, uint64_t file_size, char *why,
			       size_t wlen)
{
	if (memcmp(s->magic, HPR__STAMP_MAGIC, sizeof(s->magic)))
		snprintf(why, wlen, "it has no hpregion stamp");
	else if (s->sum != hpr__stamp_sum(s))
		snprintf(why, wlen, "its stamp is damaged (checksum)");
	else if (s->version != HPR__STAMP_VERSION || s->flags)
		snprintf(why, wlen, "its stamp is version %u flags %#x, this hpregion reads %d",
			 s->version, s->flags, HPR__STAMP_VERSION);
	else if (s->size + s->stamp_len != file_size || s->size % 4096)
		snprintf(why, wlen, "its stamp says %llu + %llu bytes, the file is %llu",
			 (unsigned long long)s->size, (unsigned long long)s->stamp_len,
			 (unsigned long long)file_size);
	else
		return NULL;
	return why;
}

/* The stamp at the file's end: 1 valid, 0 none or damaged (why filled). */
static int read_stamp(struct kept *k, size_t len, char *why, size_t wlen)
{
	off_t at = k->st.st_size - (off_t)len;
	ssize_t got;

	if (k->st.st_size < (off_t)len || at % 4096) {
		snprintf(why, wlen, "too short or unaligned for a stamp");
		return 0;
	}
	got = hpr__os->pread_full(k->fd, &k->s, sizeof(k->s), at);
	if (got != (ssize_t)sizeof(k->s)) {
		snprintf(why, wlen, "its stamp cannot be read (%s)",
			 got < 0 ? strerror((int)-got) : "short read");
		return 0;
	}
	if (hpr__stamp_invalid(&k->s, (uint64_t)k->st.st_size, why, wlen))
		return 0;
	if (k->s.stamp_len != len) {
		snprintf(why, wlen, "its stamp is %llu bytes long, %zu on this mount",
			 (unsigned long long)k->s.stamp_len, len);
		return 0;
	}
	return 1;
}

/* The stamp says the file is a region of the config's shape. */
static int check_stamp(struct kept *k)
{
	const struct hpr_config *c = k->c;
	size_t len = c->backend == HPR_BACKEND_HUGETLB ? k->ps : 4096;
	size_t ps = c->page_size ? c->page_size : k->ps;
	size_t want = c->size <= SIZE_MAX - ps ? ((c->size + ps - 1) & ~(ps - 1)) + len : 0;
	char why[160], a[32], b[32];

	if (!read_stamp(k, len, why, sizeof(why))) {
		if ((size_t)k->st.st_size != want)
			return hpr__fail(-ERANGE,
					 "kept region '%s' in '%s' is %lld bytes, a region of "
					 "this config with its stamp is %zu, and %s: it was "
					 "truncated or is another file; remove it",
					 k->r->name, c->path, (long long)k->st.st_size, want, why);
		return hpr__fail(-EBADMSG,
				 "kept region '%s' in '%s': %s: not a region hpregion kept "
				 "(HPR_F_ATTACH stamps it at create); remove it or choose "
				 "another name",
				 k->r->name, c->path, why);
	}
	if (k->s.uid != hpr__os->euid())
		return hpr__fail(-EPERM,
				 "kept region '%s' in '%s' was made by uid %u, you are uid %u: "
				 "attach as its creator, or remove it",
				 k->r->name, c->path, k->s.uid, hpr__os->euid());
	if (k->s.backend != (uint32_t)c->backend)
		return hpr__fail(-ERANGE, "kept region '%s' in '%s' is a %s region, config asks %s",
				 k->r->name, c->path,
				 hpr_backend_name((enum hpr_backend)k->s.backend),
				 hpr_backend_name(c->backend));
	if (k->s.page_size != ps || k->s.page_size != k->ps)
		return hpr__fail(-ERANGE,
				 "kept region '%s' in '%s' has %s pages, config and mount ask "
				 "%s",
				 k->r->name, c->path,
				 hpr__fmt_size((size_t)k->s.page_size, a, sizeof(a)),
				 hpr__fmt_size(ps, b, sizeof(b)));
	if (k->s.size + len != want)
		return hpr__fail(-ERANGE,
				 "kept region '%s' in '%s' holds %llu bytes, config asks %zu "
				 "(%zu rounded up to %s pages)",
				 k->r->name, c->path, (unsigned long long)k->s.size, want - len,
				 c->size, hpr__fmt_size(ps, a, sizeof(a)));
	return 0;
}

int hpr__attach_open(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m,
		     struct hpr__kept *out)
{
	struct kept k = { .r = r, .c = c, .m = m, .shared = c->flags & HPR_F_SHARED };
	int rc;

	/* O_NONBLOCK: a FIFO planted under the name must not block the open */
	k.fd = hpr__os->openat(
		m->dirfd, r->name,
		(k.shared ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	if (k.fd == -ENOENT)
		return hpr__fail(-ENOENT,
				 "no kept region '%s' in '%s': HPR_F_ATTACH creates it, "
				 "HPR_F_ATTACH_ONLY only attaches",
				 r->name, c->path);
	if (k.fd == -ELOOP)
		return hpr__fail(-ELOOP,
				 "kept region '%s' in '%s' is a symbolic link: a kept region "
				 "is never reached through one; remove it",
				 r->name, c->path);
	if (k.fd == -EISDIR || k.fd == -ENXIO)
		return hpr__fail(-EBADMSG,
				 "kept region '%s' in '%s' is not a regular file: not a "
				 "region hpregion kept; remove it or choose another name",
				 r->name, c->path);
	if (k.fd < 0)
		return hpr__fail(k.fd, "kept region '%s' in '%s': cannot open it: %s", r->name,
				 c->path, strerror(-k.fd));
	if (!(rc = check_file(&k)) && !(rc = check_mount(&k)) && !(rc = take_lock(&k)) &&
	    !(rc = check_stamp(&k))) {
		out->fd = k.fd;
		out->size = (size_t)k.s.size;
		out->page_size = (size_t)k.s.page_size;
		return 0;
	}
	hpr__os->close(k.fd); /* and its lock */
	return rc;
}
