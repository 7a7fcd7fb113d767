/* SPDX-License-Identifier: MIT */
/*
 * The public structs the library writes (hpr_stats, hpr_probe_info) carry
 * the caller's size: hpr_stats_sized() and hpr_probe_sized() write
 * min(caller's size, ours) bytes and zero the rest of a newer caller's
 * struct, and the 0.1 entry points hpr_stats() and hpr_probe(), which
 * binaries built against the 0.1 header call, write the 0.1 layouts. The
 * scheme is described in hpregion.h, "Versioned structs".
 */
#include "internal.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The end of the last field each struct had in hpregion 0.1. Fields are
 * only appended after these (or carved out of hpr_stats.reserved_), so
 * these stay what a 0.1 binary's struct holds. */
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define STATS_SIZE_0_1 END_OF(struct hpr_stats, reserved_)
#define PROBE_SIZE_0_1 END_OF(struct hpr_probe_info, kernel_minor)

static int size_ok(const char *fn, size_t size, size_t min)
{
	if (size >= min)
		return 0;
	return hpr__fail(-EINVAL,
			 "%s: the struct's size %zu is smaller than hpregion 0.1's %zu: "
			 "pass sizeof the struct from hpregion.h (or call %s())",
			 fn, size, min, fn);
}

static void copy_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	size_t n = dst_size < src_size ? dst_size : src_size;

	memcpy(dst, src, n);
	if (dst_size > n)
		memset((char *)dst + n, 0, dst_size - n);
}

int hpr_stats_sized(hpr_region *r, struct hpr_stats *st, size_t size)
{
	struct hpr_stats full;
	int rc;

	hpr__err_clear();
	if (st && (rc = size_ok("hpr_stats", size, STATS_SIZE_0_1)))
		return rc;
	rc = hpr__stats(r, st ? &full : NULL);
	if (!rc)
		copy_out(st, size, &full, sizeof(full));
	return rc;
}

int hpr_stats(hpr_region *r, struct hpr_stats *st)
{
	return hpr_stats_sized(r, st, STATS_SIZE_0_1);
}

int hpr_probe_sized(struct hpr_probe_info *info, size_t size)
{
	struct hpr_probe_info full;
	int rc;

	hpr__err_clear();
	if (info && (rc = size_ok("hpr_probe", size, PROBE_SIZE_0_1)))
		return rc;
	rc = hpr__probe(info ? &full : NULL);
	if (!rc)
		copy_out(info, size, &full, sizeof(full));
	return rc;
}

int hpr_probe(struct hpr_probe_info *info)
{
	return hpr_probe_sized(info, PROBE_SIZE_0_1);
}
