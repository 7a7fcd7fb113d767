/* SPDX-License-Identifier: MIT */
/*
 * demo: create a region on every backend this machine offers, fault it in
 * with the parallel workers, and print what the kernel says it got: one
 * table row per region (backend asked, where, backend got, size, page size,
 * resident and huge-mapped, from smaps).
 *   demo [DIR_ON_HUGE_TMPFS] [DIR_ON_HUGETLBFS] [SIZE_MIB]
 */
#include <hpregion/hpregion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int show(enum hpr_backend b, const char *path, size_t size, unsigned flags)
{
	struct hpr_config c;
	struct hpr_stats st;
	hpr_region *r;
	int rc;

	hpr_config_init(&c);
	c.size = size;
	c.backend = b;
	c.path = path;
	c.name = "demo";
	c.flags = HPR_F_PREFAULT | flags;
	rc = hpr_create(&c, &r);
	printf("%-8s %-28s ", hpr_backend_name(b), path ? path : "memfd/anon");
	if (rc) {
		printf("refused: %s\n", hpr_strerror(rc));
		return 0;
	}
	memset(hpr_base(r), 0x42, hpr_size(r));
	if ((rc = hpr_stats(r, &st))) {
		printf("stats failed: %s\n", hpr_strerror(rc));
		hpr_destroy(r);
		return 1;
	}
	printf("%-8s %5zu MiB %5zu KiB %6zu MiB %10.1f %%\n", hpr_backend_name(hpr_backend_of(r)),
	       st.size >> 20, st.page_size >> 10, st.resident >> 20,
	       st.size ? 100.0 * (double)st.huge_mapped / (double)st.size : 0);
	hpr_destroy(r);
	return 0;
}

int main(int argc, char **argv)
{
	const char *tmpfs = argc > 1 && *argv[1] ? argv[1] : NULL;
	const char *htlb = argc > 2 && *argv[2] ? argv[2] : NULL;
	size_t size = (argc > 3 ? strtoull(argv[3], NULL, 0) : 256) << 20;
	struct hpr_probe_info pi;
	int bad = 0;

	hpr_probe(&pi);
	printf("hpregion %s: kernel %d.%d, THP pmd %zu KiB, populate %s, collapse %s\n",
	       hpr_version(), pi.kernel_major, pi.kernel_minor, pi.thp_pmd_size >> 10,
	       pi.have_populate ? "yes" : "no", pi.have_collapse ? "yes" : "no");
	printf("%-8s %-28s %-8s %9s %9s %10s %12s\n", "backend", "on", "got", "size", "page",
	       "resident", "huge-mapped");
	bad |= show(HPR_BACKEND_THP, NULL, size, HPR_F_FALLBACK);
	bad |= show(HPR_BACKEND_SHMEM, NULL, size, HPR_F_FALLBACK);
	if (tmpfs)
		bad |= show(HPR_BACKEND_SHMEM, tmpfs, size, 0);
	bad |= show(HPR_BACKEND_HUGETLB, htlb, size, 0);
	bad |= show(HPR_BACKEND_AUTO, tmpfs, size, HPR_F_FALLBACK);
	return bad;
}
