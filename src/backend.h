/* SPDX-License-Identifier: MIT */
/* Backends: THP, shmem (tmpfs file or memfd), hugetlb (hugetlbfs or memfd). */
#ifndef HPR_BACKEND_H
#define HPR_BACKEND_H
#include "internal.h"

/* Choose and set up the backing for r from c: fills base, size, page_size,
 * page_shift, npages, backend, fd, obj_key, fault_huge, collapse_after.
 * On failure nothing is left mapped or on disk. */
int hpr__backend_create(hpr_region *r, const struct hpr_config *c);
/* Undo hpr__backend_create. */
int hpr__backend_destroy(hpr_region *r);
/* Unmap the region and its guard pages (the fd and file stay). */
int hpr__backend_unmap(hpr_region *r);
/* The NUMA policy on a new mapping; on failure the backend is undone. */
int hpr__backend_finish(hpr_region *r);
/* Map fd (or anonymous memory, fd -1) with flags at a page-size-aligned
 * address with a PROT_NONE guard page each side: r->base. A shared
 * hugetlb mapping reserves the pool first (a short pool is -ENOMEM). */
int hpr__map_aligned(hpr_region *r, int flags, int fd);
/* r->size (size rounded up to ps), page_size, page_shift, npages. */
void hpr__set_sizes(hpr_region *r, size_t size, size_t ps);
/* 0 when the hugetlb pool (the bound nodes, the hugetlb cgroup) has room
 * for npages of ps now; else -ENOMEM/-EOPNOTSUPP with why filled. */
int hpr__hugetlb_room(hpr_region *r, size_t ps, size_t npages, char *why, size_t wlen);

/* What a mount gives: parsed from mountinfo for the directory's device.
 * dirfd is the directory, opened O_PATH once: the backing file is created
 * relative to it, so it lands on the mount that was checked. */
struct hpr__mountcheck {
	int dirfd;	  /* -1 when none; hpr__mount_release() closes it */
	long fstype;	  /* TMPFS_MAGIC or HUGETLBFS_MAGIC */
	size_t page_size; /* hugetlbfs: its page size */
	int huge;	  /* tmpfs huge=: HPR_SHMEM_* (NEVER when absent) */
	uint64_t avail;	  /* bytes free, UINT64_MAX when unlimited */
	char mnt_point[256];
};
/* 0 with m->dirfd open, or -errno (with the detail set) and nothing open. */
int hpr__mount_check(const char *dir, struct hpr__mountcheck *m);
void hpr__mount_release(struct hpr__mountcheck *m);

/* ---- attach.c: kept regions (docs/attach.md) ---- */
/* c->backend from the mount for AUTO; -EINVAL when c's backend and the
 * mount disagree. */
int hpr__attach_backend(struct hpr_config *c, const struct hpr__mountcheck *m);
/* Map the kept file m/c->name into r, validated first: 0, -ENOENT when
 * there is none (detail set), or a refusal with nothing mapped. */
int hpr__attach(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m);
/* Bytes of the stamp past the region's end: 0 when r is not a kept
 * region to attach to (HPR_F_ATTACH), else 4 KiB on tmpfs and one huge
 * page on hugetlbfs (its files are sized and mapped in huge pages). */
size_t hpr__stamp_len(const hpr_region *r);
/* Write the stamp of mapped region r at r->size in its file. */
int hpr__stamp_write(hpr_region *r);
/* The creator's exclusive flock on its new file fd (named name in m):
 * fd, or -EBUSY with the fd closed and the file removed. */
int hpr__attach_lock_new(hpr_region *r, const struct hpr__mountcheck *m, const char *name, int fd);
#endif
