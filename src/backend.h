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

/* ---- attach.c: kept regions (docs/attach.md) ---- */
/* c->backend from the mount for AUTO; -EINVAL when c's backend and the
 * mount disagree. */
int hpr__attach_backend(struct hpr_config *c, const struct hpr__mountcheck *m);
/* A kept file checked and locked, ready to map. */
struct hpr__kept {
	int fd;		  /* O_RDWR shared, O_RDONLY private; holds the flock */
	size_t size;	  /* the region's bytes (the stamp is past them) */
	size_t page_size;
};
/* Open the kept file m/c->name, lock it (LOCK_EX shared, LOCK_SH
 * private) and check it and its stamp against c: 0 with *out filled, or
 * -ENOENT when there is none (detail set), or a refusal with nothing
 * open. */
int hpr__attach_open(hpr_region *r, const struct hpr_config *c, const struct hpr__mountcheck *m,
		     struct hpr__kept *out);
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
