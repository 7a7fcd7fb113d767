/* SPDX-License-Identifier: MIT */
/*
 * hpr_probe reports what the kernel's own files say: the THP and shmem
 * modes, the PMD size, every hugetlb size with its pool counters (global
 * and per node), the kernel features, the hugetlb cgroup limit. The test
 * reads those files itself. Static parts are cached (a later sysfs change
 * shows only after a reset); pool counters are read fresh on every call.
 */
#include "common.h"
#include "internal.h" /* hpr__probe_reset */

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#define THP "/sys/kernel/mm/transparent_hugepage"

static int mode_of(const char *path, const char *const *names, int n)
{
	char buf[256], *a, *b;
	FILE *f = fopen(path, "re");

	ck_assert_msg(f != NULL, "%s", path);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	a = strchr(buf, '[');
	b = a ? strchr(a, ']') : NULL;
	ck_assert_msg(b != NULL, "%s: %s", path, buf);
	*b = 0;
	for (int k = 0; k < n; k++)
		if (!strcmp(a + 1, names[k]))
			return k;
	ck_abort_msg("%s: unknown mode %s", path, a + 1);
	return -1;
}

static unsigned long ul(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static unsigned long ul(const char *fmt, ...)
{
	char p[256];
	va_list ap;
	unsigned long v;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	f = fopen(p, "re");
	ck_assert_msg(f != NULL, "%s", p);
	ck_assert_int_eq(fscanf(f, "%lu", &v), 1);
	fclose(f);
	return v;
}

/* the library's enum order */
static const char *const thp_names[] = { "always", "madvise", "never", "defer",
					 "defer+madvise" };
static const char *const shmem_names[] = { "always", "within_size", "advise",
					   "never", "deny", "force" };

START_TEST(modes)
{
	struct hpr_probe_info pi;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_int_eq(pi.thp_enabled, mode_of(THP "/enabled", thp_names, 3));
	ck_assert_int_eq(pi.thp_defrag, mode_of(THP "/defrag", thp_names, 5));
	ck_assert_int_eq(pi.shmem_enabled, mode_of(THP "/shmem_enabled", shmem_names, 6));
	ck_assert_uint_eq(pi.thp_pmd_size, ul(THP "/hpage_pmd_size"));
	printf("probe: thp %s, defrag %s, shmem %s, pmd %zu KiB\n",
	       thp_names[pi.thp_enabled], thp_names[pi.thp_defrag],
	       shmem_names[pi.shmem_enabled], pi.thp_pmd_size >> 10);
}
END_TEST

/* Cached: a sysfs change after the first probe shows only after a reset. */
START_TEST(cached)
{
	struct hpr_probe_info a, b;
	const char *other;

	ck_assert_int_eq(hpr_probe(&a), 0);
	other = a.shmem_enabled == HPR_SHMEM_ADVISE ? "never" : "advise";
	ck_assert_int_eq(t_sysfs_set(THP "/shmem_enabled", other), 0);
	ck_assert_int_eq(hpr_probe(&b), 0);
	ck_assert_int_eq(b.shmem_enabled, a.shmem_enabled);
	hpr__probe_reset();
	ck_assert_int_eq(hpr_probe(&b), 0);
	ck_assert_str_eq(shmem_names[b.shmem_enabled], other);
	ck_assert_int_eq(t_sysfs_set(THP "/shmem_enabled", shmem_names[a.shmem_enabled]),
			 0);
	hpr__probe_reset();
	ck_assert_int_eq(hpr_probe(&b), 0);
	ck_assert_int_eq(b.shmem_enabled, a.shmem_enabled);
}
END_TEST

START_TEST(hugetlb_sizes)
{
	struct hpr_probe_info pi;
	size_t sizes[8];
	unsigned n = 0;
	DIR *d = opendir("/sys/kernel/mm/hugepages");
	struct dirent *e;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "hugepages-", 10) && n < 8)
			sizes[n++] = strtoul(e->d_name + 10, NULL, 10) << 10;
	closedir(d);
	for (unsigned i = 0; i < n; i++) /* ascending, as the library reports */
		for (unsigned j = i + 1; j < n; j++)
			if (sizes[j] < sizes[i]) {
				size_t t = sizes[i];

				sizes[i] = sizes[j];
				sizes[j] = t;
			}
	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_uint_eq(pi.nr_hugetlb_sizes, n < 4 ? n : 4);
	for (unsigned i = 0; i < pi.nr_hugetlb_sizes; i++)
		ck_assert_uint_eq(pi.hugetlb[i].page_size, sizes[i]);
}
END_TEST

static unsigned idx_2m(const struct hpr_probe_info *pi)
{
	for (unsigned i = 0; i < pi->nr_hugetlb_sizes; i++)
		if (pi->hugetlb[i].page_size == 2 * MiB)
			return i;
	t_skip("no 2 MiB hugetlb pages on this kernel");
}

static unsigned nodes_online(void)
{
	unsigned n = 0;

	for (unsigned k = 0; k < HPR_MAX_NODES; k++) {
		char p[96];

		snprintf(p, sizeof(p), "/sys/devices/system/node/node%u", k);
		if (!access(p, F_OK))
			n = k + 1;
	}
	return n ? n : 1;
}

/* Pool counters are fresh and match sysfs, globally and per node, with a
 * reservation outstanding so Rsvd is not just 0. */
START_TEST(hugetlb_pool)
{
	struct hpr_probe_info pi;
	const char *h = "/sys/kernel/mm/hugepages/hugepages-2048kB";
	unsigned i;
	void *m;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	i = idx_2m(&pi);
	if (t_hugetlb_pool(2048, 6) < 6)
		t_skip("the kernel gave fewer than 6 2 MiB pages");
	/* reserve 2 (MAP_SHARED hugetlb reserves at mmap), fault 1 */
	m = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	*(volatile char *)m = 1;
	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_uint_eq(pi.hugetlb[i].total, ul("%s/nr_hugepages", h));
	ck_assert_uint_eq(pi.hugetlb[i].free, ul("%s/free_hugepages", h));
	ck_assert_uint_eq(pi.hugetlb[i].reserved, ul("%s/resv_hugepages", h));
	ck_assert_uint_eq(pi.hugetlb[i].surplus, ul("%s/surplus_hugepages", h));
	ck_assert_uint_eq(pi.hugetlb[i].total, 6);
	ck_assert_uint_eq(pi.hugetlb[i].free, 5);
	ck_assert_uint_eq(pi.hugetlb[i].reserved, 1);
	ck_assert_uint_eq(pi.nr_nodes, nodes_online());
	{
		unsigned long tot = 0, fr = 0;

		for (unsigned n = 0; n < pi.nr_nodes; n++) {
			char p[160];

			snprintf(p, sizeof(p), "/sys/devices/system/node/node%u/hugepages/"
				 "hugepages-2048kB", n);
			if (access(p, F_OK))
				continue;
			ck_assert_uint_eq(pi.hugetlb[i].node_total[n], ul("%s/nr_hugepages", p));
			ck_assert_uint_eq(pi.hugetlb[i].node_free[n], ul("%s/free_hugepages", p));
			tot += pi.hugetlb[i].node_total[n];
			fr += pi.hugetlb[i].node_free[n];
		}
		ck_assert_uint_eq(tot, 6);
		ck_assert_uint_eq(fr, 5);
	}
	ck_assert_int_eq(munmap(m, 4 * MiB), 0);
	/* fresh, not cached */
	ck_assert_uint_eq(t_hugetlb_pool(2048, 3), 3);
	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_uint_eq(pi.hugetlb[i].total, 3);
	ck_assert_uint_eq(pi.hugetlb[i].free, 3);
	ck_assert_uint_eq(pi.hugetlb[i].reserved, 0);
}
END_TEST

/* Where is our hugetlb cgroup, if any? Returns the limit in bytes, or -1. */
static long long cgroup_limit_2m(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");
	long long lim = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		char p[700], v[64];
		bool v2;
		FILE *g;

		if (!b)
			continue;
		*b = 0;
		b[strcspn(b + 1, "\n") + 1] = 0;
		v2 = !a[1];
		if (!v2 && !strstr(a + 1, "hugetlb"))
			continue;
		snprintf(p, sizeof(p), "%s%s/hugetlb.2MB.%s",
			 v2 ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup/hugetlb", b + 1,
			 v2 ? "max" : "limit_in_bytes");
		g = fopen(p, "re");
		if (!g && v2) {
			snprintf(p, sizeof(p), "/sys/fs/cgroup%s/hugetlb.2MB.max", b + 1);
			g = fopen(p, "re");
		}
		if (!g)
			continue;
		if (fgets(v, sizeof(v), g) && strncmp(v, "max", 3)) {
			unsigned long long x = strtoull(v, NULL, 10);

			if (x < (1ULL << 62))
				lim = (long long)x;
		}
		fclose(g);
		break;
	}
	fclose(f);
	return lim;
}

START_TEST(cgroup)
{
	struct hpr_probe_info pi;
	long long lim = cgroup_limit_2m();
	unsigned i;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	i = idx_2m(&pi);
	if (lim < 0)
		ck_assert_int_eq(pi.hugetlb[i].cgroup_limit, -1);
	else
		/* room left: the limit minus what the group uses */
		ck_assert_int_le(pi.hugetlb[i].cgroup_limit, lim);
	printf("probe: hugetlb cgroup room for 2 MiB pages: %lld\n",
	       pi.hugetlb[i].cgroup_limit);
}
END_TEST

START_TEST(features)
{
	struct hpr_probe_info pi;
	struct utsname u;
	int maj = 0, min = 0;
	char *p;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	ck_assert_int_eq(uname(&u), 0);
	ck_assert_int_eq(sscanf(u.release, "%d.%d", &maj, &min), 2);
	ck_assert_int_eq(pi.kernel_major, maj);
	ck_assert_int_eq(pi.kernel_minor, min);
	ck_assert(pi.have_psi == (access("/proc/pressure/memory", R_OK) == 0));

	/* ask the kernel directly, with real work, not the library's probe */
	p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	{
		char *a = (char *)(((uintptr_t)p + 2 * MiB - 1) & ~(2 * MiB - 1));
		bool pop = madvise(a, 2 * MiB, 23 /* MADV_POPULATE_WRITE */) == 0;
		bool col;

		ck_assert(pi.have_populate == pop);
		if (!pop)
			memset(a, 1, 2 * MiB);
		col = madvise(a, 2 * MiB, 25 /* MADV_COLLAPSE */) == 0 || errno != EINVAL;
		ck_assert(pi.have_collapse == col);
	}
	munmap(p, 4 * MiB);
	if (maj > 6 || (maj == 6 && min >= 7))
		ck_assert(pi.have_pagemap_scan);
	if (maj > 5 || (maj == 5 && min >= 14))
		ck_assert(pi.have_populate);
	if (maj > 6 || (maj == 6 && min >= 1))
		ck_assert(pi.have_collapse);
	printf("probe: kernel %d.%d populate %d collapse %d pagemap_scan %d "
	       "anon_vma_name %d psi %d\n",
	       pi.kernel_major, pi.kernel_minor, pi.have_populate, pi.have_collapse,
	       pi.have_pagemap_scan, pi.have_anon_vma_name, pi.have_psi);
}
END_TEST

START_TEST(null)
{
	ck_assert_int_eq(hpr_probe(NULL), -EINVAL);
	ck_assert_int_eq(hpr_probe_sized(NULL, sizeof(struct hpr_probe_info)), -EINVAL);
}
END_TEST

/* The versioned struct (hpregion.h, "Versioned structs"): a caller whose
 * newer header has a bigger struct gets the fields this library knows and
 * zeros past them; a size below 0.1's is -EINVAL with a reason and the
 * struct untouched. */
START_TEST(sized)
{
	struct {
		struct hpr_probe_info pi;
		unsigned char newer[64];
	} big;
	struct hpr_probe_info pi, small;
	int rc;

	ck_assert_int_eq(hpr_probe(&pi), 0);
	memset(&big, 0xa5, sizeof(big));
	ck_assert_int_eq(hpr_probe_sized(&big.pi, sizeof(big)), 0);
	for (size_t i = 0; i < sizeof(big.newer); i++)
		ck_assert_uint_eq(big.newer[i], 0);
	ck_assert_int_eq(big.pi.thp_enabled, pi.thp_enabled);
	ck_assert_int_eq(big.pi.kernel_major, pi.kernel_major);
	ck_assert_uint_eq(big.pi.nr_hugetlb_sizes, pi.nr_hugetlb_sizes);
	memset(&small, 0xa5, sizeof(small));
	rc = hpr_probe_sized(&small, offsetof(struct hpr_probe_info, kernel_minor));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "smaller than hpregion 0.1"));
	ck_assert_uint_eq((unsigned)small.thp_enabled, 0xa5a5a5a5u);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("probe");

	tcase_add_test(tc, modes);
	tcase_add_test(tc, cached);
	tcase_add_test(tc, hugetlb_sizes);
	tcase_add_test(tc, hugetlb_pool);
	tcase_add_test(tc, cgroup);
	tcase_add_test(tc, features);
	tcase_add_test(tc, null);
	tcase_add_test(tc, sized);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
