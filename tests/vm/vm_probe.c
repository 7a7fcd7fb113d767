/* SPDX-License-Identifier: MIT */
/*
 * What the library detected on the machine it runs on, one VMPROBE line
 * each, so the VM matrix can report what degraded on an older kernel
 * (tests/vm/run.sh runs it in every guest before the suites).
 */
#include <hpregion/hpregion.h>
#include <stdio.h>

static const char *yesno(bool b)
{
	return b ? "yes" : "no";
}

int main(void)
{
	static const char *const thp[] = { "always", "madvise", "never", "defer",
					   "defer+madvise", "unknown" };
	static const char *const shm[] = { "always", "within_size", "advise", "never",
					   "deny", "force", "unknown" };
	struct hpr_probe_info in;
	int rc = hpr_probe(&in);

	if (rc) {
		printf("VMPROBE error %s\n", hpr_strerror(rc));
		return 1;
	}
	printf("VMPROBE kernel=%d.%d nodes=%u thp=%s defrag=%s shmem=%s pmd=%zu\n",
	       in.kernel_major, in.kernel_minor, in.nr_nodes, thp[in.thp_enabled],
	       thp[in.thp_defrag], shm[in.shmem_enabled], in.thp_pmd_size);
	printf("VMPROBE populate_write=%s collapse=%s pagemap_scan=%s anon_vma_name=%s psi=%s\n",
	       yesno(in.have_populate), yesno(in.have_collapse), yesno(in.have_pagemap_scan),
	       yesno(in.have_anon_vma_name), yesno(in.have_psi));
	for (unsigned i = 0; i < in.nr_hugetlb_sizes; i++) {
		printf("VMPROBE hugetlb %zukB total=%lu free=%lu", in.hugetlb[i].page_size >> 10,
		       in.hugetlb[i].total, in.hugetlb[i].free);
		for (unsigned n = 0; n < in.nr_nodes; n++)
			printf(" node%u=%lu/%lu", n, in.hugetlb[i].node_free[n],
			       in.hugetlb[i].node_total[n]);
		printf("\n");
	}
	return 0;
}
