/* SPDX-License-Identifier: MIT */
/*
 * Prints where every field of the public structs sits and every public
 * constant's value, as the header it is compiled against says. tests/abi.sh
 * builds it against the 0.1 header (tests/abi/hpregion-0.1.h) and the
 * current one: the 0.1 lines must come out the same, a struct may only grow.
 * Names only: it must compile against both headers.
 */
#include <hpregion/hpregion.h>

#include <stddef.h>
#include <stdio.h>

#define F(type, field) \
	printf("%s.%s %zu %zu\n", #type, #field, offsetof(type, field), sizeof(((type *)0)->field))
#define V(name) printf("%s %lld\n", #name, (long long)(name))

int main(void)
{
	printf("sizeof struct hpr_config %zu\n", sizeof(struct hpr_config));
	F(struct hpr_config, struct_size);
	F(struct hpr_config, size);
	F(struct hpr_config, backend);
	F(struct hpr_config, page_size);
	F(struct hpr_config, path);
	F(struct hpr_config, name);
	F(struct hpr_config, flags);
	F(struct hpr_config, numa_policy);
	F(struct hpr_config, numa_nodes);
	F(struct hpr_config, workers);
	F(struct hpr_config, lazy_budget);
	F(struct hpr_config, psi_stall_us);

	printf("sizeof struct hpr_stats %zu\n", sizeof(struct hpr_stats));
	F(struct hpr_stats, size);
	F(struct hpr_stats, resident);
	F(struct hpr_stats, huge_mapped);
	F(struct hpr_stats, lazy);
	F(struct hpr_stats, backend);
	F(struct hpr_stats, page_size);
	F(struct hpr_stats, pages_total);
	F(struct hpr_stats, pages_present);
	F(struct hpr_stats, pages_lazy);
	F(struct hpr_stats, populate_calls);
	F(struct hpr_stats, reclaimed_bytes);
	F(struct hpr_stats, collapsed_pages);
	F(struct hpr_stats, small_mapped);
	F(struct hpr_stats, nr_nodes);
	F(struct hpr_stats, node_resident);
	F(struct hpr_stats, snapshot_io);
	F(struct hpr_stats, requested);
	F(struct hpr_stats, fallback);

	printf("sizeof struct hpr_probe_info %zu\n", sizeof(struct hpr_probe_info));
	F(struct hpr_probe_info, thp_enabled);
	F(struct hpr_probe_info, thp_defrag);
	F(struct hpr_probe_info, shmem_enabled);
	F(struct hpr_probe_info, thp_pmd_size);
	F(struct hpr_probe_info, nr_hugetlb_sizes);
	F(struct hpr_probe_info, hugetlb);
	F(struct hpr_probe_info, hugetlb[0].page_size);
	F(struct hpr_probe_info, hugetlb[0].total);
	F(struct hpr_probe_info, hugetlb[0].free);
	F(struct hpr_probe_info, hugetlb[0].reserved);
	F(struct hpr_probe_info, hugetlb[0].surplus);
	F(struct hpr_probe_info, hugetlb[0].node_free);
	F(struct hpr_probe_info, hugetlb[0].node_total);
	F(struct hpr_probe_info, hugetlb[0].cgroup_limit);
	F(struct hpr_probe_info, nr_nodes);
	F(struct hpr_probe_info, have_populate);
	F(struct hpr_probe_info, have_collapse);
	F(struct hpr_probe_info, have_pagemap_scan);
	F(struct hpr_probe_info, have_anon_vma_name);
	F(struct hpr_probe_info, have_psi);
	F(struct hpr_probe_info, kernel_major);
	F(struct hpr_probe_info, kernel_minor);

	V(HPR_BACKEND_AUTO);
	V(HPR_BACKEND_THP);
	V(HPR_BACKEND_SHMEM);
	V(HPR_BACKEND_HUGETLB);
	V(HPR_NUMA_DEFAULT);
	V(HPR_NUMA_BIND);
	V(HPR_NUMA_INTERLEAVE);
	V(HPR_NUMA_PREFERRED);
	V(HPR_F_SHARED);
	V(HPR_F_FALLBACK);
	V(HPR_F_PREFAULT);
	V(HPR_F_PREFAULT_ASYNC);
	V(HPR_F_LOCK);
	V(HPR_F_KEEP_FILE);
	V(HPR_F_GUARD);
	V(HPR_F_PSI_RECLAIM);
	V(HPR_MAX_NODES);
	V(HPR_IO_URING);
	V(HPR_IO_PREADWRITE);
	V(HPR_FALLBACK_BACKEND);
	V(HPR_FALLBACK_BASE_PAGES);
	V(HPR_SNAP_NO_URING);
	V(HPR_SNAP_NO_DIRECT);
	V(HPR_SNAP_SYNC);
	V(HPR_THP_ALWAYS);
	V(HPR_THP_MADVISE);
	V(HPR_THP_NEVER);
	V(HPR_THP_DEFER);
	V(HPR_THP_DEFER_MADVISE);
	V(HPR_THP_UNKNOWN);
	V(HPR_SHMEM_ALWAYS);
	V(HPR_SHMEM_WITHIN_SIZE);
	V(HPR_SHMEM_ADVISE);
	V(HPR_SHMEM_NEVER);
	V(HPR_SHMEM_DENY);
	V(HPR_SHMEM_FORCE);
	V(HPR_SHMEM_UNKNOWN);
	V(HPR_LOG_ERROR);
	V(HPR_LOG_WARN);
	V(HPR_LOG_INFO);
	V(HPR_LOG_DEBUG);
	return 0;
}
