/* SPDX-License-Identifier: MIT */
/*
 * On-disk format of a region snapshot (docs/snapshot.md). Internal: the
 * library and the tests (which craft damaged files) share it. Every field
 * is little-endian on disk.
 *
 *   [0, 4096)              header (struct hpr__snap_hdr, rest zero)
 *   [4096, 4096 + 16 * n)  page table (struct hpr__snap_ent per huge page)
 *   [data_off, file_size)  page i at data_off + i * page_size, data_off
 *                          aligned to the page size; pages without
 *                          HPR__SNAP_PG_DATA are holes (nothing written)
 */
#ifndef HPR_SNAPSHOT_H
#define HPR_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#define HPR__SNAP_MAGIC "HPRSNAP\0"
#define HPR__SNAP_VERSION 1u
#define HPR__SNAP_HDR_SIZE 4096u
#define HPR__SNAP_TABLE_OFF 4096u

struct hpr__snap_hdr {
	char magic[8];		/* HPR__SNAP_MAGIC */
	uint32_t version;	/* HPR__SNAP_VERSION */
	uint32_t hdr_len;	/* sizeof(struct hpr__snap_hdr) */
	uint64_t region_size;	/* bytes */
	uint64_t page_size;	/* huge page size of the saved region */
	uint64_t npages;	/* region_size / page_size */
	uint64_t flags;		/* none defined yet; must be 0 */
	uint64_t table_off;	/* HPR__SNAP_TABLE_OFF */
	uint64_t data_off;	/* first page's offset, page-size aligned */
	uint64_t file_size;	/* data_off + npages * page_size */
	uint64_t pages_data;	/* entries with HPR__SNAP_PG_DATA */
	uint64_t table_sum;	/* xxh64 of the table, seed 0 */
	uint64_t hdr_sum;	/* xxh64 of this struct with hdr_sum = 0 */
};

/* Page table entry flags. */
#define HPR__SNAP_PG_DATA 1u /* written at its offset; sum is its xxh64 */
#define HPR__SNAP_PG_ZERO 2u /* was resident but all zeros: a hole */
#define HPR__SNAP_PG_ALL_ (HPR__SNAP_PG_DATA | HPR__SNAP_PG_ZERO)

struct hpr__snap_ent {
	uint64_t sum;	/* hpr__page_sum(page, page index); 0 for holes */
	uint32_t flags; /* HPR__SNAP_PG_* */
	uint32_t reserved;
};

/* Bytes per I/O (2 MiB). Tests shrink it to run many chunks per page
 * without 1 GiB pages; a multiple of 4096 (O_DIRECT). */
extern size_t hpr__snap_chunk;

/* XXH64 (the xxHash 64-bit algorithm), implemented in snapshot.c. */
uint64_t hpr__xxh64(const void *p, size_t len, uint64_t seed);
/* CRC32C (Castagnoli, the iSCSI/ext4 CRC: init and final xor ~0). */
uint32_t hpr__crc32c(const void *p, size_t len);
/* A page's checksum: xxh64(seed = idx) of the four little-endian CRC32Cs
 * of its quarters (len / 4 rounded down to 8 bytes; the last quarter takes
 * the remainder). */
uint64_t hpr__page_sum(const void *p, size_t len, uint64_t idx);

#endif
