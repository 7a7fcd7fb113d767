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
#endif
