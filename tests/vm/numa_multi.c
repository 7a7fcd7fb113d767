/* SPDX-License-Identifier: MIT */
/*
 * Multi-node NUMA placement, checked against the kernel: run only in the VM
 * matrix's two-node guest (tests/vm/run.sh), never as a host ctest suite --
 * on a one-node machine it skips, and CI's host run allows no skips. Its
 * name is deliberately not test_*.c so tests/CMakeLists.txt does not pick it
 * up; tests/vm.cmake builds it.
 *
 *  - BIND to node 1 lands every page on node 1 even when the faulting
 *    thread runs on node 0 (move_pages per 4 KiB page, independent of the
 *    library's own per-huge-page query), for THP, shmem on a huge tmpfs
 *    and hugetlb;
 *  - INTERLEAVE over nodes 0-1 spreads the huge pages evenly;
 *  - a hugetlb region bound to a node whose pool is empty is a clean -ENOMEM
 *    from hpr_create even when the other node has free pages (no SIGBUS,
 *    nothing left mapped, reservations returned);
 *  - the workers of a bound region are pinned to, and ran on, the bound
 *    node's CPUs (/proc/self/task/<tid>/status Cpus_allowed_list, stat).
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REGION (64 * MiB)
#define PAGE 4096UL

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* "0-1,3" -> cpu set */
static void parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s) {
		char *e;
		long a = strtol(s, &e, 10), b = a;

		if (e == s)
			break;
		if (*e == '-')
			b = strtol(e + 1, &e, 10);
		for (long c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, set);
		s = *e == ',' ? e + 1 : e;
	}
}

static void node_cpus(int node, cpu_set_t *set)
{
	char p[96], b[256];

	snprintf(p, sizeof(p), "/sys/devices/system/node/node%d/cpulist", node);
	ck_assert_int_eq(read_line(p, b, sizeof(b)), 0);
	parse_cpulist(b, set);
	ck_assert_msg(CPU_COUNT(set) > 0, "node %d has no CPUs", node);
}

static int online_nodes(void)
{
	char b[64];
	cpu_set_t s; /* a bitmap parser is a bitmap parser */

	if (read_line("/sys/devices/system/node/online", b, sizeof(b)))
		return 1;
	parse_cpulist(b, &s);
	return CPU_COUNT(&s);
}

static void node_pool(int node, unsigned long n)
{
	char p[128], v[32];
	unsigned long got;
	FILE *f;

	snprintf(p, sizeof(p),
		 "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages", node);
	snprintf(v, sizeof(v), "%lu", n);
	ck_assert_msg(t_sysfs_set(p, v) == 0, "cannot set %s", p);
	f = fopen(p, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu", &got), 1);
	fclose(f);
	ck_assert_msg(got == n, "node %d hugetlb pool: asked %lu, kernel gave %lu", node, n,
		      got);
}

/* Per-node bytes of [p, p+len) in 4 KiB steps, from move_pages (query). */
static void kernel_nodes(void *p, size_t len, size_t bytes[2], size_t *other)
{
	size_t n = len / PAGE;
	void **pages = calloc(n, sizeof(*pages));
	int *st = calloc(n, sizeof(*st));

	ck_assert(pages && st);
	for (size_t i = 0; i < n; i++)
		pages[i] = (char *)p + i * PAGE;
	ck_assert_int_eq(move_pages(0, n, pages, NULL, st, 0), 0);
	bytes[0] = bytes[1] = 0;
	*other = 0;
	for (size_t i = 0; i < n; i++) {
		if (st[i] == 0 || st[i] == 1)
			bytes[st[i]] += PAGE;
		else
			(*other) += PAGE; /* -ENOENT: not present; other nodes */
	}
	free(pages);
	free(st);
}

static hpr_region *make(enum hpr_backend b, const char *path, enum hpr_numa_policy pol,
			const char *nodes, unsigned workers)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	t_config(&c, b, path, REGION, workers, HPR_F_PREFAULT);
	c.numa_policy = pol;
	c.numa_nodes = nodes;
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create %s on \"%s\": %s", hpr_backend_name(b), nodes,
		      hpr_strerror(rc));
	return r;
}

static void check_bind(enum hpr_backend b, const char *path, int node)
{
	hpr_region *r;
	struct hpr_stats st;
	struct t_smaps k;
	size_t bytes[2], other;
	cpu_set_t far;

	/* The caller runs on the other node and faults the pages itself (one
	 * worker): first touch alone would put them there, so only the
	 * policy can land them on the bound node. */
	node_cpus(!node, &far);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(far), &far), 0);
	r = make(b, path, HPR_NUMA_BIND, node ? "1" : "0", 1);
	memset(hpr_base(r), 0x3c, hpr_size(r));
	kernel_nodes(hpr_base(r), hpr_size(r), bytes, &other);
	ck_assert_msg(bytes[node] == hpr_size(r) && !bytes[!node] && !other,
		      "%s bound to node %d: node0 %zu, node1 %zu, elsewhere/absent %zu bytes",
		      hpr_backend_name(b), node, bytes[0], bytes[1], other);
	/* the library's own per-node view agrees */
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_ge(st.nr_nodes, 2);
	ck_assert_uint_eq(st.node_resident[node], hpr_size(r));
	ck_assert_uint_eq(st.node_resident[!node], 0);
	/* and it is huge, per smaps */
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	ck_assert_msg(k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb == hpr_size(r),
		      "%s on node %d: only %zu of %zu huge", hpr_backend_name(b), node,
		      k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb, hpr_size(r));
	ck_assert_int_eq(hpr_destroy(r), 0);
}

START_TEST(bind_thp_node1)
{
	check_bind(HPR_BACKEND_THP, NULL, 1);
}
END_TEST

START_TEST(bind_thp_node0)
{
	check_bind(HPR_BACKEND_THP, NULL, 0);
}
END_TEST

START_TEST(bind_shmem_node1)
{
	check_bind(HPR_BACKEND_SHMEM, t_mount_tmpfs("huge=always"), 1);
}
END_TEST

START_TEST(bind_hugetlb_node1)
{
	/* pages on both nodes: the bind, not an empty node 0, decides */
	node_pool(0, REGION / (2 * MiB));
	node_pool(1, REGION / (2 * MiB));
	check_bind(HPR_BACKEND_HUGETLB, NULL, 1);
}
END_TEST

static void check_interleave(enum hpr_backend b)
{
	hpr_region *r;
	size_t bytes[2], other, huge;
	struct hpr_stats st;
	cpu_set_t n0;

	/* one thread on node 0 faults everything: first touch would keep it
	 * all there */
	node_cpus(0, &n0);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(n0), &n0), 0);
	r = make(b, NULL, HPR_NUMA_INTERLEAVE, "0-1", 1);
	huge = hpr_page_size(r);

	memset(hpr_base(r), 0x7e, hpr_size(r));
	kernel_nodes(hpr_base(r), hpr_size(r), bytes, &other);
	ck_assert_uint_eq(other, 0);
	/* round robin per huge page: equal halves, one page of slack for
	 * where the interleave cursor started */
	ck_assert_msg(bytes[0] + huge >= hpr_size(r) / 2 && bytes[1] + huge >= hpr_size(r) / 2,
		      "%s interleave 0-1: node0 %zu, node1 %zu bytes", hpr_backend_name(b),
		      bytes[0], bytes[1]);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.node_resident[0], bytes[0]);
	ck_assert_uint_eq(st.node_resident[1], bytes[1]);
	ck_assert_int_eq(hpr_destroy(r), 0);
}

START_TEST(interleave_thp)
{
	check_interleave(HPR_BACKEND_THP);
}
END_TEST

START_TEST(interleave_hugetlb)
{
	node_pool(0, REGION / (2 * MiB));
	node_pool(1, REGION / (2 * MiB));
	check_interleave(HPR_BACKEND_HUGETLB);
}
END_TEST

START_TEST(hugetlb_bound_to_empty_node)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	long long rsvd;
	int maps, rc;

	node_pool(1, 0);
	node_pool(0, REGION / (2 * MiB)); /* the other node has every page needed */
	ck_assert_uint_ge(t_hugetlb_free(2048), REGION / (2 * MiB));
	rsvd = t_meminfo("HugePages_Rsvd");
	maps = t_maps_count();

	hpr_config_init(&c);
	c.size = REGION;
	c.backend = HPR_BACKEND_HUGETLB;
	c.flags = HPR_F_PREFAULT;
	c.numa_policy = HPR_NUMA_BIND;
	c.numa_nodes = "1";
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == -ENOMEM, "bind to empty node 1: rc %d (%s)", rc, hpr_strerror(rc));
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(hpr_strerror(rc), "node"), "message does not name the node pool: %s",
		      hpr_strerror(rc));
	ck_assert_int_eq(t_maps_count(), maps);
	ck_assert_int_eq(t_meminfo("HugePages_Rsvd"), rsvd);
	ck_assert_uint_ge(t_hugetlb_free(2048), REGION / (2 * MiB));

	/* without PREFAULT the answer is the same: the check is at create */
	c.flags = 0;
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == -ENOMEM, "bind to empty node 1, no prefault: rc %d (%s)", rc,
		      hpr_strerror(rc));

	/* control: node 0's pool really serves the same region */
	c.flags = HPR_F_PREFAULT;
	c.numa_nodes = "0";
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "bind to node 0: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* Every thread but the caller is one of the region's workers. */
static void check_workers_on(int node)
{
	hpr_region *r = make(HPR_BACKEND_THP, NULL, HPR_NUMA_BIND, node ? "1" : "0", 2);
	pid_t self = (pid_t)syscall(SYS_gettid);
	cpu_set_t want, got;
	struct dirent *e;
	DIR *d;
	int workers = 0;

	node_cpus(node, &want);
	/* more work so the workers certainly ran */
	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0);
	d = opendir("/proc/self/task");
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		char p[128], line[512];
		FILE *f;
		int tid = atoi(e->d_name), cpu = -1;

		if (tid <= 0 || tid == self)
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%d/status", tid);
		f = fopen(p, "re");
		if (!f)
			continue; /* exited */
		CPU_ZERO(&got);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "Cpus_allowed_list:", 18))
				parse_cpulist(line + 18 + strspn(line + 18, " \t"), &got);
		fclose(f);
		ck_assert_msg(CPU_EQUAL(&got, &want),
			      "worker %d allowed on %d CPUs, not node %d's %d", tid,
			      CPU_COUNT(&got), node, CPU_COUNT(&want));
		/* field 39 of stat: the CPU it last ran on */
		snprintf(p, sizeof(p), "/proc/self/task/%d/stat", tid);
		ck_assert_int_eq(read_line(p, line, sizeof(line)), 0);
		{
			char *s = strrchr(line, ')');
			int field = 2;

			for (; s && *s && field < 39; s++)
				if (*s == ' ' && ++field == 39)
					cpu = atoi(s + 1);
		}
		ck_assert_msg(cpu >= 0 && CPU_ISSET(cpu, &want),
			      "worker %d last ran on CPU %d, not on node %d", tid, cpu, node);
		workers++;
	}
	closedir(d);
	ck_assert_msg(workers >= 1, "no worker threads found");
	ck_assert_int_eq(hpr_destroy(r), 0);
}

START_TEST(workers_on_node1)
{
	check_workers_on(1);
}
END_TEST

START_TEST(workers_on_node0)
{
	check_workers_on(0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("numa_multi");
	TCase *tc = tcase_create("two_nodes");

	if (online_nodes() < 2)
		t_skip("this machine has %d NUMA node(s); numa_multi needs 2 (run it in "
		       "the VM matrix: tests/vm/run.sh --config 2node)",
		       online_nodes());
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, bind_thp_node1);
	tcase_add_test(tc, bind_thp_node0);
	tcase_add_test(tc, bind_shmem_node1);
	tcase_add_test(tc, bind_hugetlb_node1);
	tcase_add_test(tc, interleave_thp);
	tcase_add_test(tc, interleave_hugetlb);
	tcase_add_test(tc, hugetlb_bound_to_empty_node);
	tcase_add_test(tc, workers_on_node1);
	tcase_add_test(tc, workers_on_node0);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
