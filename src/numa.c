/* SPDX-License-Identifier: MIT */
/*
 * NUMA placement: nodestring parsing (our own, so libnuma never prints to the
 * host application's stderr), the mbind of a region before first touch, the
 * CPUs its workers run on, and per-node residency (move_pages query).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t numa_once = PTHREAD_ONCE_INIT;
static bool numa_ok;
static int numa_max;

static void numa_init(void)
{
	numa_ok = numa_available() >= 0;
	numa_max = numa_ok ? numa_max_node() : 0;
	if (numa_max < 0)
		numa_max = 0;
	if (numa_max >= HPR_MAX_NODES)
		numa_max = HPR_MAX_NODES - 1;
}

int hpr__numa_node_max(void)
{
	pthread_once(&numa_once, numa_init);
	return numa_max;
}

static bool node_allowed(int n)
{
	pthread_once(&numa_once, numa_init);
	if (n < 0 || n > numa_max)
		return false;
	if (!numa_ok)
		return n == 0;
	return numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)n);
}

static void set_bit(unsigned long *m, unsigned n)
{
	m[n / (8 * sizeof(long))] |= 1UL << (n % (8 * sizeof(long)));
}

int hpr__numa_parse(const char *s, unsigned long *mask, unsigned *nr_set)
{
	const char *p = s;

	memset(mask, 0, HPR_NODE_WORDS * sizeof(long));
	*nr_set = 0;
	if (!s || !strcmp(s, "all")) {
		for (int n = 0; n <= hpr__numa_node_max(); n++)
			if (node_allowed(n)) {
				set_bit(mask, (unsigned)n);
				(*nr_set)++;
			}
		return 0;
	}
	if (!*s)
		return hpr__fail(-EINVAL, "numa_nodes is empty: give \"0\", \"0-1\", "
					  "\"0,2\" or \"all\"");
	while (*p) {
		char *e;
		long a, b;

		if (*p < '0' || *p > '9')
			goto bad;
		a = strtol(p, &e, 10);
		b = a;
		if (*e == '-') {
			p = e + 1;
			if (*p < '0' || *p > '9')
				goto bad;
			b = strtol(p, &e, 10);
		}
		if (a > b || b >= HPR_MAX_NODES)
			goto bad;
		for (long n = a; n <= b; n++) {
			if (!node_allowed((int)n))
				return hpr__fail(-EINVAL,
						 "numa_nodes \"%s\": node %ld is not online or "
						 "not allowed for this process (this machine "
						 "has nodes 0-%d; see `numactl -H`)",
						 s, n, hpr__numa_node_max());
			set_bit(mask, (unsigned)n);
			(*nr_set)++;
		}
		if (*e == ',') {
			e++;
			if (*e < '0' || *e > '9') /* "0," or "0,,1" */
				goto bad;
		} else if (*e) {
			goto bad;
		}
		p = e;
	}
	if (!*nr_set)
		goto bad;
	return 0;
bad:
	return hpr__fail(-EINVAL, "numa_nodes \"%s\" is not a node list: give "
				  "\"0\", \"0-1\", \"0,2\" or \"all\"", s);
}

int hpr__numa_setup(struct hpr__numa *n, enum hpr_numa_policy p, const char *nodes)
{
	int rc;

	memset(n, 0, sizeof(*n));
	n->policy = p;
	if (p < HPR_NUMA_DEFAULT || p > HPR_NUMA_PREFERRED)
		return hpr__fail(-EINVAL, "unknown numa_policy %d", (int)p);
	rc = hpr__numa_parse(nodes, n->mask, &n->nr_set);
	if (rc)
		return rc;
	n->active = p != HPR_NUMA_DEFAULT;
	return 0;
}

int hpr__numa_apply(const struct hpr__numa *n, void *addr, size_t len)
{
	int mode;
	unsigned long mask[HPR_NODE_WORDS];
	int rc;

	if (!n->active)
		return 0;
	memcpy(mask, n->mask, sizeof(mask));
	switch (n->policy) {
	case HPR_NUMA_BIND:
		mode = MPOL_BIND;
		break;
	case HPR_NUMA_INTERLEAVE:
		mode = MPOL_INTERLEAVE;
		break;
	case HPR_NUMA_PREFERRED: {
		/* MPOL_PREFERRED takes one node: the first of the list */
		unsigned first = 0;

		while (first < HPR_MAX_NODES &&
		       !(mask[first / (8 * sizeof(long))] &
			 (1UL << (first % (8 * sizeof(long))))))
			first++;
		memset(mask, 0, sizeof(mask));
		set_bit(mask, first);
		mode = MPOL_PREFERRED;
		break;
	}
	default:
		return 0;
	}
	/* MPOL_MF_STRICT|MOVE is not used: the range is not faulted yet. */
	rc = hpr__os->mbind(addr, len, mode, mask, HPR_MAX_NODES + 1, 0);
	if (rc)
		return hpr__fail(rc, "mbind(%s) failed: %s", n->policy == HPR_NUMA_BIND ? "bind"
							   : n->policy == HPR_NUMA_INTERLEAVE ? "interleave"
											       : "preferred",
				 strerror(-rc));
	return 0;
}

int hpr__numa_cpus(const struct hpr__numa *n, void *setp)
{
	cpu_set_t *set = setp, allowed;
	int rc;

	CPU_ZERO(set);
	/* the process's CPUs (its main thread's affinity), not the calling
	 * thread's: a caller pinned to one CPU must not cram every worker
	 * onto it */
	rc = hpr__os->process_cpus(&allowed, sizeof(allowed));
	if (rc)
		return rc;
	pthread_once(&numa_once, numa_init);
	if (!n->active || !numa_ok) {
		*set = allowed;
		return 0;
	}
	for (unsigned node = 0; node < HPR_MAX_NODES; node++) {
		struct bitmask *cpus;

		if (!(n->mask[node / (8 * sizeof(long))] & (1UL << (node % (8 * sizeof(long))))))
			continue;
		cpus = numa_allocate_cpumask();
		if (!cpus)
			return -ENOMEM;
		if (!numa_node_to_cpus((int)node, cpus)) {
			for (unsigned c = 0; c < cpus->size && c < CPU_SETSIZE; c++)
				if (numa_bitmask_isbitset(cpus, c) && CPU_ISSET(c, &allowed))
					CPU_SET(c, set);
		}
		numa_free_cpumask(cpus);
	}
	if (!CPU_COUNT(set))
		*set = allowed; /* memory-only nodes: run anywhere */
	return 0;
}

int hpr__numa_residency(void *base, size_t size, size_t page_size,
			size_t *node_bytes, unsigned *nr_nodes)
{
	size_t n = size / page_size;
	void **pages;
	int *status;
	long rc;

	*nr_nodes = (unsigned)hpr__numa_node_max() + 1;
	memset(node_bytes, 0, sizeof(size_t) * HPR_MAX_NODES);
	if (!n)
		return 0;
	pages = malloc(n * sizeof(*pages));
	status = malloc(n * sizeof(*status));
	if (!pages || !status) {
		free(pages);
		free(status);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		pages[i] = (char *)base + i * page_size;
	rc = hpr__os->page_nodes(pages, n, status);
	if (!rc) {
		for (size_t i = 0; i < n; i++)
			if (status[i] >= 0 && status[i] < HPR_MAX_NODES)
				node_bytes[status[i]] += page_size;
	}
	free(pages);
	free(status);
	return (int)rc;
}
