/* SPDX-License-Identifier: MIT */
/*
 * Capability probe: THP and shmem modes, hugetlb sizes and pools, kernel
 * features (populate, collapse, PAGEMAP_SCAN, anon VMA names, PSI) and the
 * caller's hugetlb cgroup. Read once and cached; never written. Pool
 * counters change all the time, so hpr__hugetlb_pool() reads them fresh.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define HTLB_DIR "/sys/kernel/mm/hugepages"

static const char *const thp_names[] = { "always", "madvise", "never", "defer",
					 "defer+madvise" };

static struct hpr__caps caps;
static pthread_mutex_t caps_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool caps_valid;

static int read_mode(const char *path, const char *const *names, int n,
		     int unknown)
{
	char buf[256];
	ssize_t got = hpr__os->read_file(path, buf, sizeof(buf));
	int m;

	if (got < 0)
		return unknown;
	m = hpr__parse_sysfs_mode(buf, (size_t)got, names, n);
	return m < 0 ? unknown : m;
}

static int read_ul(const char *path, unsigned long *v)
{
	char buf[64];
	ssize_t got = hpr__os->read_file(path, buf, sizeof(buf));

	if (got < 0)
		return (int)got;
	return hpr__parse_ulong(buf, (size_t)got, v);
}

const char *hpr__pool_knob(size_t page_size, char *buf, size_t len)
{
	snprintf(buf, len, HTLB_DIR "/hugepages-%zukB/nr_hugepages", page_size >> 10);
	return buf;
}

unsigned long hpr__hugetlb_overcommit(size_t page_size)
{
	char p[160];
	unsigned long over = 0;

	snprintf(p, sizeof(p), HTLB_DIR "/hugepages-%zukB/nr_overcommit_hugepages",
		 page_size >> 10);
	read_ul(p, &over);
	return over;
}

int hpr__hugetlb_pool(size_t page_size, int node, unsigned long *total,
		      unsigned long *free_, unsigned long *resv,
		      unsigned long *surplus)
{
	char p[256];
	size_t kb = page_size >> 10;
	unsigned long t = 0, f = 0, r = 0, s = 0;
	int rc;

	if (node < 0) {
		snprintf(p, sizeof(p), HTLB_DIR "/hugepages-%zukB/nr_hugepages", kb);
		if ((rc = read_ul(p, &t)))
			return rc;
		snprintf(p, sizeof(p), HTLB_DIR "/hugepages-%zukB/free_hugepages", kb);
		read_ul(p, &f);
		snprintf(p, sizeof(p), HTLB_DIR "/hugepages-%zukB/resv_hugepages", kb);
		read_ul(p, &r);
		snprintf(p, sizeof(p), HTLB_DIR "/hugepages-%zukB/surplus_hugepages", kb);
		read_ul(p, &s);
	} else {
		snprintf(p, sizeof(p),
			 "/sys/devices/system/node/node%d/hugepages/hugepages-%zukB/nr_hugepages",
			 node, kb);
		if ((rc = read_ul(p, &t)))
			return rc;
		snprintf(p, sizeof(p),
			 "/sys/devices/system/node/node%d/hugepages/hugepages-%zukB/free_hugepages",
			 node, kb);
		read_ul(p, &f);
		snprintf(p, sizeof(p),
			 "/sys/devices/system/node/node%d/hugepages/hugepages-%zukB/surplus_hugepages",
			 node, kb);
		read_ul(p, &s);
	}
	if (total)
		*total = t;
	if (free_)
		*free_ = f;
	if (resv)
		*resv = r;
	if (surplus)
		*surplus = s;
	return 0;
}

/* Find the caller's hugetlb cgroup directory (v1 "hugetlb" controller or
 * the v2 unified hierarchy when it has hugetlb.* files). */
static void find_hugetlb_cgroup(struct hpr__caps *c)
{
	char *buf = NULL;
	ssize_t got = hpr__os->read_all("/proc/self/cgroup", &buf);
	char *save = NULL, *line;

	if (got <= 0) {
		free(buf);
		return;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* "id:controllers:path" */
		char *a = strchr(line, ':'), *b;

		if (!a || !(b = strchr(a + 1, ':')))
			continue;
		*b = '\0';
		if (!strcmp(a + 1, "") || strstr(a + 1, "hugetlb")) {
			char dir[256], probe[320];
			bool v2 = !strcmp(a + 1, "");
			static const char *const roots[] = { "/sys/fs/cgroup/unified",
							     "/sys/fs/cgroup",
							     "/sys/fs/cgroup/hugetlb" };

			for (size_t k = 0; k < 3; k++) {
				struct statfs st;

				snprintf(dir, sizeof(dir), "%s%s", roots[k], b + 1);
				snprintf(probe, sizeof(probe), "%s/hugetlb.2MB.%s", dir,
					 v2 ? "max" : "limit_in_bytes");
				if (!hpr__os->statfs(probe, &st)) {
					snprintf(c->hugetlb_cg_dir,
						 sizeof(c->hugetlb_cg_dir), "%s", dir);
					c->hugetlb_cg_v2 = v2;
					goto out;
				}
			}
		}
	}
out:
	free(buf);
}

static const char *cg_size_name(size_t ps, char *buf, size_t len)
{
	if (ps >= (1UL << 30))
		snprintf(buf, len, "%zuGB", ps >> 30);
	else if (ps >= (1UL << 20))
		snprintf(buf, len, "%zuMB", ps >> 20);
	else
		snprintf(buf, len, "%zuKB", ps >> 10);
	return buf;
}

const char *hpr__hugetlb_cgroup_file(size_t page_size, char *buf, size_t len)
{
	const struct hpr__caps *c = hpr__caps();
	char sz[16];

	if (!c->hugetlb_cg_dir[0]) {
		snprintf(buf, len, "%s", "");
		return buf;
	}
	cg_size_name(page_size, sz, sizeof(sz));
	snprintf(buf, len, "%s/hugetlb.%s.%s", c->hugetlb_cg_dir, sz,
		 c->hugetlb_cg_v2 ? "max" : "limit_in_bytes");
	return buf;
}

long long hpr__hugetlb_cgroup_room(size_t page_size)
{
	const struct hpr__caps *c = hpr__caps();
	char p[400], sz[16], buf[64];
	unsigned long long lim = 0, use = 0;
	unsigned long v;
	ssize_t got;

	if (!c->hugetlb_cg_dir[0])
		return -1;
	cg_size_name(page_size, sz, sizeof(sz));
	hpr__hugetlb_cgroup_file(page_size, p, sizeof(p));
	got = hpr__os->read_file(p, buf, sizeof(buf));
	if (got <= 0 || !strncmp(buf, "max", 3))
		return -1;
	if (hpr__parse_ulong(buf, (size_t)got, &v))
		return -1;
	lim = v;
	if (lim >= (1ULL << 62))
		return -1; /* v1's "unlimited" */
	snprintf(p, sizeof(p), "%s/hugetlb.%s.%s", c->hugetlb_cg_dir, sz,
		 c->hugetlb_cg_v2 ? "current" : "usage_in_bytes");
	got = hpr__os->read_file(p, buf, sizeof(buf));
	if (got > 0 && !hpr__parse_ulong(buf, (size_t)got, &v))
		use = v;
	return use >= lim ? 0 : (long long)(lim - use);
}

static void probe_features(struct hpr_probe_info *in)
{
	char rel[128];
	void *p = NULL;
	int fd;

	if (!hpr__os->kernel_release(rel, sizeof(rel)))
		sscanf(rel, "%d.%d", &in->kernel_major, &in->kernel_minor);
	/* madvise() checks the advice before the length, so a zero-length
	 * call tells whether the kernel knows the advice without side effects. */
	if (!hpr__os->mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p)) {
		in->have_populate = hpr__os_populate(p, 0) == 0;
		in->have_collapse = hpr__os_collapse(p, 0) == 0;
		in->have_anon_vma_name = hpr__os->name_anon(p, 4096, "hpr:probe") == 0;
		hpr__os->munmap(p, 4096);
	}
	/* PAGEMAP_SCAN (6.7) */
	fd = hpr__os->pagemap_open();
	in->have_pagemap_scan = fd >= 0;
	if (fd >= 0)
		hpr__os->close(fd);
	{
		char buf[128];

		in->have_psi = hpr__os->read_file("/proc/pressure/memory", buf,
						  sizeof(buf)) > 0;
	}
}

/* A hugepages-<kB>kB entry of HTLB_DIR: one more hugetlb size (at most 4). */
static int add_hugetlb_size(void *arg, const char *name)
{
	struct hpr_probe_info *in = arg;
	unsigned long kb;

	if (strncmp(name, "hugepages-", 10) || hpr__parse_ulong(name + 10, strlen(name + 10), &kb))
		return 0;
	if (in->nr_hugetlb_sizes >= HPR_MAX_HUGETLB_SIZES)
		return 1;
	in->hugetlb[in->nr_hugetlb_sizes++].page_size = (size_t)kb << 10;
	return 0;
}

static void probe_all(struct hpr__caps *c)
{
	struct hpr_probe_info *in = &c->info;
	unsigned long v;

	memset(c, 0, sizeof(*c));
	in->thp_enabled = read_mode(THP_DIR "/enabled", thp_names, 3, HPR_THP_UNKNOWN);
	in->thp_defrag = read_mode(THP_DIR "/defrag", thp_names, 5, HPR_THP_UNKNOWN);
	in->shmem_enabled = read_mode(THP_DIR "/shmem_enabled", hpr__shmem_mode_names, HPR__SHMEM_MODES,
				      HPR_SHMEM_UNKNOWN);
	if (!read_ul(THP_DIR "/hpage_pmd_size", &v))
		in->thp_pmd_size = v;
	else
		in->thp_pmd_size = 2UL << 20;
	find_hugetlb_cgroup(c);
	in->nr_nodes = (unsigned)hpr__numa_node_max() + 1;
	if (in->nr_nodes > HPR_MAX_NODES)
		in->nr_nodes = HPR_MAX_NODES;
	hpr__os->list_dir(HTLB_DIR, add_hugetlb_size, in);
	/* ascending page size */
	for (unsigned i = 0; i < in->nr_hugetlb_sizes; i++)
		for (unsigned j = i + 1; j < in->nr_hugetlb_sizes; j++)
			if (in->hugetlb[j].page_size < in->hugetlb[i].page_size) {
				size_t t = in->hugetlb[i].page_size;

				in->hugetlb[i].page_size = in->hugetlb[j].page_size;
				in->hugetlb[j].page_size = t;
			}
	probe_features(in);
}

const struct hpr__caps *hpr__caps(void)
{
	if (!atomic_load_explicit(&caps_valid, memory_order_acquire)) {
		pthread_mutex_lock(&caps_mu);
		if (!atomic_load(&caps_valid)) {
			probe_all(&caps);
			atomic_store_explicit(&caps_valid, true, memory_order_release);
		}
		pthread_mutex_unlock(&caps_mu);
	}
	return &caps;
}

void hpr__probe_atfork(int phase)
{
	hpr__fork_mutex(&caps_mu, phase);
}

void hpr__probe_reset(void)
{
	atomic_store(&caps_valid, false);
}

bool hpr__hugetlb_size_supported(size_t ps)
{
	const struct hpr__caps *c = hpr__caps();

	for (unsigned i = 0; i < c->info.nr_hugetlb_sizes; i++)
		if (c->info.hugetlb[i].page_size == ps)
			return true;
	return false;
}

int hpr__probe(struct hpr_probe_info *info)
{
	const struct hpr__caps *c;

	hpr__err_clear();
	if (!info)
		return hpr__fail(-EINVAL, "hpr_probe: info is NULL");
	c = hpr__caps();
	*info = c->info;
	for (unsigned i = 0; i < info->nr_hugetlb_sizes; i++) {
		size_t ps = info->hugetlb[i].page_size;

		hpr__hugetlb_pool(ps, -1, &info->hugetlb[i].total,
				  &info->hugetlb[i].free, &info->hugetlb[i].reserved,
				  &info->hugetlb[i].surplus);
		for (unsigned n = 0; n < info->nr_nodes; n++)
			hpr__hugetlb_pool(ps, (int)n, &info->hugetlb[i].node_total[n],
					  &info->hugetlb[i].node_free[n], NULL, NULL);
		info->hugetlb[i].cgroup_limit = hpr__hugetlb_cgroup_room(ps);
	}
	return 0;
}
