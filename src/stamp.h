/* SPDX-License-Identifier: MIT */
/*
 * The stamp of a kept region (HPR_F_ATTACH): a header in the page past the
 * region's end in its file (docs/attach.md). attach.c writes and checks
 * it; hpr stat --kept (tools/stat.c) reads it.
 */
#ifndef HPR_STAMP_H
#define HPR_STAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HPR__STAMP_MAGIC "HPRKEPT\0"
#define HPR__STAMP_VERSION 1

/* Native byte order: a kept region lives in this machine's memory. */
struct hpr__stamp {
	char magic[8];
	uint32_t version;
	uint32_t backend; /* enum hpr_backend: SHMEM or HUGETLB */
	uint64_t size;	  /* the region's bytes, a multiple of page_size */
	uint64_t page_size;
	uint64_t stamp_len; /* bytes of the file past size: 4 KiB or a huge page */
	uint32_t uid;	    /* the creator's effective uid */
	uint32_t flags;	    /* none yet; must be 0 */
	char name[48];	    /* the region's name at create */
	uint64_t reserved[4];
	uint64_t sum; /* XXH64 of the bytes before it */
};

/* The checksum s->sum must hold. */
uint64_t hpr__stamp_sum(const struct hpr__stamp *s);
/* Why s is not a valid stamp for a file of file_size bytes (into why),
 * or NULL when it is one: magic, checksum, version and flags, and the
 * stamp's own size and length adding up to the file's. */
const char *hpr__stamp_invalid(const struct hpr__stamp *s, uint64_t file_size, char *why,
			       size_t wlen);
#endif
