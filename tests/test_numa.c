/* SPDX-License-Identifier: MIT */
/*
 * NUMA placement: nodestring validation (clear -EINVAL, nothing printed),
 * BIND/INTERLEAVE/PREFERRED applied before first touch (the kernel's
 * get_mempolicy and move_pages agree), per-node residency in hpr_stats,
 * workers pinned to the nodes' CPUs, and the per-node hugetlb pool check.
 *
 * This machine has one node: placement on node 0 is checked against the
 * kernel; the per-node pool check, which can only differ from the global
 * one on several nodes, is checked with a faked per-node sysfs count.
 */
#include "common.h"
#include "os.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int mk(enum hpr_backend b, const char *path, size_t size,
	      enum hpr_numa_policy pol, const char *nodes, unsigned workers,
	      hpr_region **r)
{
	struct hpr_config c;

	t_config(&c, b, path, size, workers, 0);
	c.numa_policy = pol;
	c.numa_nodes = nodes;
	return hpr_create(&c, r);
}

START_TEST(nodestring_invalid)
{
	static const char *const bad[] = {
		"",   "x",	"0-",	"-1",	 "1-0",	   "0,",     "0,,1", " 0",
		"0 ", "5",	"0-5",	"64",	 "99999999999999999999", "all,0", "!0",
		"+0", "0-1-2", "0x0", ",0", "0;1",
	};
	int pfd[2], saved, maps = 0;
	char buf[256];
	ssize_t n;

	ck_assert_int_eq(pipe2(pfd, O_NONBLOCK), 0);
	fflush(stderr);
	saved = dup(2);
	dup2(pfd[1], 2);
	/* two passes, the second measured: one-time lazy setup (probe cache,
	 * sanitizer allocator arenas) is not a leak; a per-call leak shows */
	for (int pass = 0; pass < 2; pass++)
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (pass == 1 && i == 0)
			maps = t_maps_count();
		for (int pol = HPR_NUMA_DEFAULT; pol <= HPR_NUMA_PREFERRED; pol++) {
			hpr_region *r = (hpr_region *)1;
			int rc = mk(HPR_BACKEND_THP, NULL, 4 * MiB, pol, bad[i], 1, &r);
			const char *msg = hpr_strerror(rc);

			dup2(saved, 2);
			ck_assert_msg(rc == -EINVAL, "nodestring \"%s\" policy %d: %d", bad[i],
				      pol, rc);
			ck_assert_ptr_null(r);
			ck_assert_msg(strstr(msg, "numa_nodes") != NULL,
				      "\"%s\": message does not name numa_nodes: %s", bad[i], msg);
			dup2(pfd[1], 2);
		}
	}
	{
		/* an absent node says which nodes exist */
		hpr_region *r;
		int rc = mk(HPR_BACKEND_THP, NULL, 4 * MiB, HPR_NUMA_BIND, "5", 1, &r);

		dup2(saved, 2);
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "node 5 is not online"));
		dup2(pfd[1], 2);
	}
	{
		hpr_region *r;
		int rc = mk(HPR_BACKEND_THP, NULL, 4 * MiB, (enum hpr_numa_policy)9, "0", 1, &r);

		dup2(saved, 2);
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "numa_policy"));
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(pfd[1]);
	n = read(pfd[0], buf, sizeof(buf) - 1);
	close(pfd[0]);
	ck_assert_msg(n <= 0, "the library printed to stderr: %.*s", (int)(n > 0 ? n : 0), buf);
	ck_assert_int_eq(t_maps_count(), maps);

	/* and the good ones work */
	{
		static const char *const good[] = { "0", "0-0", "all", NULL };

		for (size_t i = 0; i < 4; i++) {
			hpr_region *r;
			int rc = mk(HPR_BACKEND_THP, NULL, 4 * MiB, HPR_NUMA_BIND, good[i], 1, &r);

			ck_assert_msg(rc == 0, "\"%s\": %s", good[i] ? good[i] : "(null)",
				      hpr_strerror(rc));
			hpr_destroy(r);
		}
	}
}
END_TEST

/* policy x backend: 0..2 THP, 3..5 shmem, 6..8 hugetlb */
START_TEST(placement_node0)
{
	static const int modes[] = { MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED };
	enum hpr_numa_policy pol = (enum hpr_numa_policy)(HPR_NUMA_BIND + _i % 3);
	enum hpr_backend b = _i < 3 ? HPR_BACKEND_THP
				    : _i < 6 ? HPR_BACKEND_SHMEM : HPR_BACKEND_HUGETLB;
	const char *path = b == HPR_BACKEND_SHMEM ? t_mount_tmpfs("huge=always") : NULL;
	const size_t size = 64 * MiB;
	struct hpr_stats st;
	hpr_region *r;
	unsigned long mask[HPR_MAX_NODES / 64 + 1] = { 0 };
	int mode = -1, rc;
	size_t n = size / 4096;
	void **pages;
	int *status;

	if (b == HPR_BACKEND_HUGETLB) {
		char v[32];

		/* the pages must be on node 0: size node 0's pool, not the
		 * global one (which spreads over all nodes) */
		t_hugetlb_pool(2048, 0);
		snprintf(v, sizeof(v), "%zu", size / (2 * MiB));
		t_sysfs_set("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
			    v);
	}
	rc = mk(b, path, size, pol, "0", 2, &r);
	ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
	/* the policy is in place before first touch */
	ck_assert_int_eq(get_mempolicy(&mode, mask, HPR_MAX_NODES + 1, hpr_base(r),
				       MPOL_F_ADDR), 0);
	ck_assert_int_eq(mode, modes[_i % 3]);
	ck_assert_uint_eq(mask[0] & 1, 1);
	ck_assert_int_eq(hpr_fault_in(r, 0, size), 0);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_ge(st.nr_nodes, 1);
	ck_assert_uint_eq(st.node_resident[0], size);
	/* an independent query of every 4 KiB page */
	pages = malloc(n * sizeof(*pages));
	status = malloc(n * sizeof(*status));
	for (size_t i = 0; i < n; i++)
		pages[i] = (char *)hpr_base(r) + i * 4096;
	ck_assert_int_eq(move_pages(0, n, pages, NULL, status, 0), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(status[i] == 0, "page %zu on node %d", i, status[i]);
	free(pages);
	free(status);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- workers pinned to the nodes' CPUs ---- */
static int read_cpulist(const char *path, cpu_set_t *set, const char *key)
{
	FILE *f = fopen(path, "re");
	char line[512], *p = NULL;

	CPU_ZERO(set);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!key) {
			p = line;
			break;
		}
		if (!strncmp(line, key, strlen(key))) {
			p = line + strlen(key);
			break;
		}
	}
	fclose(f);
	if (!p)
		return -1;
	while (*p && *p != '\n') {
		char *e;
		long a = strtol(p, &e, 10), b = a;

		if (e == p) {
			p++;
			continue;
		}
		if (*e == '-')
			b = strtol(e + 1, &e, 10);
		for (long c = a; c <= b; c++)
			CPU_SET(c, set);
		p = *e == ',' ? e + 1 : e;
	}
	return 0;
}

struct starter {
	enum hpr_numa_policy pol;
	hpr_region *r;
	int rc;
};

static void *starter_main(void *a)
{
	struct starter *s = a;
	cpu_set_t one;

	/* a caller pinned to its own CPU (a vCPU thread, say) starts the pool */
	CPU_ZERO(&one);
	CPU_SET(1, &one);
	pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	/* it creates the region (the PSI reclaimer starts here) and faults
	 * it in (the workers start here) */
	{
		struct hpr_config c;

		t_config(&c, HPR_BACKEND_THP, NULL, 64 * MiB, 3, HPR_F_PSI_RECLAIM);
		c.numa_policy = s->pol;
		c.numa_nodes = "0";
		s->rc = hpr_create(&c, &s->r);
	}
	if (!s->rc)
		s->rc = hpr_fault_in(s->r, 0, hpr_size(s->r));
	return NULL;
}

START_TEST(workers_pinned)
{
	cpu_set_t node, proc, want;
	struct starter s;
	pthread_t th;
	DIR *d;
	struct dirent *e;
	int workers = 0, reclaimers = 0;
	pid_t self = (pid_t)syscall(SYS_gettid);

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs to tell a pinned worker from an inherited mask");
	ck_assert_int_eq(read_cpulist("/sys/devices/system/node/node0/cpulist", &node, NULL), 0);
	ck_assert_int_eq(sched_getaffinity(0, sizeof(proc), &proc), 0);
	/* BIND: the node's CPUs; DEFAULT: every CPU the process may use */
	if (_i)
		CPU_AND(&want, &node, &proc);
	else
		want = proc;
	/* the starter pins itself to CPU 1: a worker that inherited its mask
	 * must be told apart from one pinned on purpose */
	ck_assert_msg(CPU_COUNT(&want) >= 2 || !CPU_ISSET(1, &want),
		      "cannot tell a pinned worker from the starter's CPU 1 here");
	s.pol = _i ? HPR_NUMA_BIND : HPR_NUMA_DEFAULT;
	s.r = NULL;
	pthread_create(&th, NULL, starter_main, &s);
	pthread_join(th, NULL);
	ck_assert_msg(s.rc == 0, "%s", hpr_strerror(s.rc));
	/* the workers, by name: pthread_join() returns once the starter has
	 * cleared its tid, but its task can still be listed in
	 * /proc/self/task (with its CPU 1 mask) until the kernel reaps it,
	 * which under TCG takes long enough to be seen */
	d = opendir("/proc/self/task");
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		char p[300], comm[32] = "", line[256];
		unsigned long long blk = 0;
		cpu_set_t got;
		FILE *f;

		if (e->d_name[0] == '.' || atoi(e->d_name) == self)
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		if (!(f = fopen(p, "r")))
			continue; /* gone meanwhile: the starter */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		comm[strcspn(comm, "\n")] = 0;
		fclose(f);
		if (!strncmp(comm, "hpr-fault/", 10))
			workers++;
		else if (!strcmp(comm, "hpr-reclaim"))
			reclaimers++;
		else
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/status", e->d_name);
		ck_assert_int_eq(read_cpulist(p, &got, "Cpus_allowed_list:"), 0);
		ck_assert_msg(CPU_EQUAL(&got, &want),
			      "%s (task %s) runs on %d CPUs, not the node's %d (inherited "
			      "the starter's mask?)",
			      comm, e->d_name, CPU_COUNT(&got), CPU_COUNT(&want));
		/* application signals blocked, synchronous fault signals open */
		f = fopen(p, "r");
		ck_assert_ptr_nonnull(f);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "SigBlk:", 7))
				blk = strtoull(line + 7, NULL, 16);
		fclose(f);
		ck_assert_msg((blk & (1ULL << (SIGINT - 1))) && (blk & (1ULL << (SIGTERM - 1))) &&
				      (blk & (1ULL << (SIGUSR1 - 1))) &&
				      !(blk & (1ULL << (SIGBUS - 1))) &&
				      !(blk & (1ULL << (SIGSEGV - 1))),
			      "%s (task %s): blocked signals %#llx", comm, e->d_name, blk);
	}
	closedir(d);
	ck_assert_int_eq(workers, 3);
	ck_assert_int_eq(reclaimers, 1);
	ck_assert_int_eq(hpr_destroy(s.r), 0);
}
END_TEST

/* ---- hugetlb and the per-node pool ---- */
static struct hpr_os_ops fake;
static ssize_t fake_read_file(const char *path, char *buf, size_t len)
{
	/* node 0's free count reads 0; everything else is the kernel's */
	if (strstr(path, "/node0/hugepages/") && strstr(path, "free_hugepages")) {
		snprintf(buf, len, "0\n");
		return 2;
	}
	return hpr__os_real.read_file(path, buf, len);
}

START_TEST(hugetlb_node_pool)
{
	hpr_region *r;
	int maps, rc;

	/* real: an empty pool (on one node the node's pool is the global one)
	 * refuses a BIND region before anything is mapped */
	t_hugetlb_pool(2048, 0);
	t_sysfs_set("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
		    "0");
	/* measure the second of two equal calls (lazy one-time setup) */
	mk(HPR_BACKEND_HUGETLB, NULL, 8 * MiB, HPR_NUMA_BIND, "0", 1, &r);
	maps = t_maps_count();
	rc = mk(HPR_BACKEND_HUGETLB, NULL, 8 * MiB, HPR_NUMA_BIND, "0", 1, &r);
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_int_eq(t_maps_count(), maps);

	/* the per-node check itself: the global pool has room, node 0 (as
	 * sysfs is faked to say) has none */
	if (t_hugetlb_pool(2048, 8) != 8)
		t_skip("cannot get 8 hugetlb pages");
	fake = hpr__os_real;
	fake.read_file = fake_read_file;
	hpr__os_set(&fake);
	mk(HPR_BACKEND_HUGETLB, NULL, 8 * MiB, HPR_NUMA_BIND, "0", 1, &r);
	maps = t_maps_count();
	rc = mk(HPR_BACKEND_HUGETLB, NULL, 8 * MiB, HPR_NUMA_BIND, "0", 1, &r);
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_ptr_nonnull(strstr(hpr_strerror(rc), "bound NUMA nodes have 0 free"));
	ck_assert_int_eq(t_maps_count(), maps);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
	/* without BIND the per-node count does not matter */
	rc = mk(HPR_BACKEND_HUGETLB, NULL, 8 * MiB, HPR_NUMA_PREFERRED, "0", 1, &r);
	hpr__os_set(NULL);
	ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_fault_in(r, 0, 8 * MiB), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("numa");
	TCase *tc = tcase_create("numa");

	tcase_add_test(tc, nodestring_invalid);
	tcase_add_loop_test(tc, placement_node0, 0, 9);
	tcase_add_loop_test(tc, workers_pinned, 0, 2);
	tcase_add_test(tc, hugetlb_node_pool);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
