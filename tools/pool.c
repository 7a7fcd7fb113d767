/* SPDX-License-Identifier: MIT */
/*
 * hpr pool: show the hugetlb pools per page size and NUMA node, and set them
 * (like hugeadm --pool-pages-min). Reports what the kernel actually gave:
 * growing a pool needs free, unfragmented memory, and the kernel silently
 * stops short when it has none.
 */
#define _GNU_SOURCE
#include "hpr.h"
#include "parse.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: hpr pool [SIZE] [--node N] [--set COUNT | --min COUNT] [--json]\n"
	"  SIZE          huge page size (2M, 1G); default: all sizes, or the\n"
	"                default huge page size when setting\n"
	"  --node N      show or set only NUMA node N's pool\n"
	"  --set COUNT   make the pool COUNT pages (root)\n"
	"  --min COUNT   grow the pool to at least COUNT pages; never shrink (root)\n"
	"  --json        machine-readable output\n";

void pool_path(char *buf, size_t len, uint64_t ps, int node, const char *file)
{
	if (node < 0)
		snprintf(buf, len, HTLB_DIR "/hugepages-%llukB/%s", (unsigned long long)(ps >> 10),
			 file);
	else
		snprintf(buf, len, NODE_DIR "/node%d/hugepages/hugepages-%llukB/%s", node,
			 (unsigned long long)(ps >> 10), file);
}

int pool_read(uint64_t ps, struct pool *p)
{
	char path[256];
	int nodes[MAX_NODES];
	unsigned nn = numa_nodes(nodes, MAX_NODES);
	int rc;

	memset(p, 0, sizeof(*p));
	p->page_size = ps;
	pool_path(path, sizeof(path), ps, -1, "nr_hugepages");
	if ((rc = read_u64(path, &p->total)))
		return rc;
	pool_path(path, sizeof(path), ps, -1, "free_hugepages");
	read_u64(path, &p->free);
	pool_path(path, sizeof(path), ps, -1, "resv_hugepages");
	read_u64(path, &p->resv);
	pool_path(path, sizeof(path), ps, -1, "surplus_hugepages");
	read_u64(path, &p->surplus);
	pool_path(path, sizeof(path), ps, -1, "nr_overcommit_hugepages");
	read_u64(path, &p->overcommit);
	for (unsigned i = 0; i < nn; i++) {
		typeof(p->nodes[0]) *n = &p->nodes[p->nr_nodes];

		n->node = nodes[i];
		pool_path(path, sizeof(path), ps, nodes[i], "nr_hugepages");
		if (read_u64(path, &n->total))
			continue; /* a kernel without per-node pools */
		pool_path(path, sizeof(path), ps, nodes[i], "free_hugepages");
		read_u64(path, &n->free);
		pool_path(path, sizeof(path), ps, nodes[i], "surplus_hugepages");
		read_u64(path, &n->surplus);
		p->nr_nodes++;
	}
	return 0;
}

static void print_pool(const struct pool *p, int node)
{
	char sz[32];

	fmt_size(p->page_size, sz, sizeof(sz));
	if (node < 0)
		printf("%-8s %8llu %8llu %8llu %8llu %10llu\n", sz, (unsigned long long)p->total,
		       (unsigned long long)p->free, (unsigned long long)p->resv,
		       (unsigned long long)p->surplus, (unsigned long long)p->overcommit);
	for (unsigned i = 0; i < p->nr_nodes; i++) {
		char nm[48];

		if (node >= 0 && p->nodes[i].node != node)
			continue;
		snprintf(nm, sizeof(nm), "  node%d", p->nodes[i].node);
		if (node >= 0)
			snprintf(nm, sizeof(nm), "%s n%d", sz, p->nodes[i].node);
		printf("%-8s %8llu %8llu %8s %8llu\n", nm, (unsigned long long)p->nodes[i].total,
		       (unsigned long long)p->nodes[i].free, "-",
		       (unsigned long long)p->nodes[i].surplus);
	}
}

void json_pool(struct jw *w, const struct pool *p, int node)
{
	jw_obj(w, NULL);
	jw_u64(w, "page_size", p->page_size);
	jw_u64(w, "total", p->total);
	jw_u64(w, "free", p->free);
	jw_u64(w, "reserved", p->resv);
	jw_u64(w, "surplus", p->surplus);
	jw_u64(w, "overcommit", p->overcommit);
	jw_arr(w, "nodes");
	for (unsigned i = 0; i < p->nr_nodes; i++) {
		if (node >= 0 && p->nodes[i].node != node)
			continue;
		jw_obj(w, NULL);
		jw_int(w, "node", p->nodes[i].node);
		jw_u64(w, "total", p->nodes[i].total);
		jw_u64(w, "free", p->nodes[i].free);
		jw_u64(w, "surplus", p->nodes[i].surplus);
		jw_end_obj(w);
	}
	jw_end_arr(w);
	jw_end_obj(w);
}

static uint64_t default_huge_size(void)
{
	size_t len;
	char *mi = slurp("/proc/meminfo", &len);
	unsigned long long kb = 0;

	if (mi)
		hpr__meminfo_get(mi, len, "Hugepagesize", &kb);
	free(mi);
	return kb << 10;
}

/* Set the pool; prints what happened. Returns the exit code. */
static int set_pool(uint64_t ps, int node, unsigned long count, bool min, bool json,
		    unsigned long *before, unsigned long *after)
{
	char path[256], val[32], sz[32], arg[32];
	uint64_t cur = 0, now = 0;
	int rc;

	fmt_size(ps, sz, sizeof(sz));
	fmt_size_arg(ps, arg, sizeof(arg));
	pool_path(path, sizeof(path), ps, node, "nr_hugepages");
	if ((rc = read_u64(path, &cur)))
		return fail("cannot read %s: %s", path, strerror(-rc));
	*before = *after = (unsigned long)cur;
	if (min && cur >= count) {
		if (!json)
			printf("%s pool%s already has %llu pages (>= %lu): unchanged\n", sz,
			       node >= 0 ? " of the node" : "", (unsigned long long)cur, count);
		return 0;
	}
	snprintf(val, sizeof(val), "%lu", count);
	rc = write_str(path, val);
	if (rc == -EACCES || rc == -EPERM || rc == -EROFS)
		return fail("setting a hugetlb pool needs root (CAP_SYS_ADMIN and a "
			    "writable /sys): cannot write %s: %s.\n"
			    "Run it as root, e.g. `sudo hpr pool %s %s %lu`",
			    path, strerror(-rc), arg, min ? "--min" : "--set", count);
	if (rc)
		return fail("cannot write %lu to %s: %s", count, path, strerror(-rc));
	if ((rc = read_u64(path, &now)))
		return fail("cannot read back %s: %s", path, strerror(-rc));
	*after = (unsigned long)now;
	if (now < count) {
		/* the kernel allocates what it can and stops short silently */
		fprintf(stderr,
			"%s: asked for %lu %s pages%s, the kernel gave %llu (was %llu): "
			"not enough free contiguous memory.\n"
			"Try `echo 1 > /proc/sys/vm/compact_memory` (or drop caches: "
			"`echo 3 > /proc/sys/vm/drop_caches`) and retry, or reserve them at "
			"boot (kernel command line: hugepagesz=%s hugepages=%lu)\n",
			hpr_prog, count, sz, node >= 0 ? " on the node" : "",
			(unsigned long long)now, (unsigned long long)cur, arg, count);
		return 1;
	}
	if (!json)
		printf("%s pool%s: %llu -> %llu pages (%s)\n", sz, node >= 0 ? " of the node" : "",
		       (unsigned long long)cur, (unsigned long long)now, path);
	return 0;
}

int cmd_pool(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' }, { "set", required_argument, NULL, 's' },
		{ "min", required_argument, NULL, 'm' },  { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },	  { 0 },
	};
	uint64_t sizes[8], ps = 0;
	unsigned ns = hugetlb_sizes(sizes, 8);
	int nodes[MAX_NODES];
	unsigned nn = numa_nodes(nodes, MAX_NODES);
	long node = -1;
	unsigned long count = 0, before = 0, after = 0;
	bool set = false, min = false, json = false, have_node = false;
	int c, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:m:jh", opts, NULL)) != -1) {
		unsigned long v;

		switch (c) {
		case 'n':
			if (parse_count(optarg, &v) || v >= MAX_NODES)
				return usage_error(usage, "bad node '%s'", optarg);
			node = (long)v;
			have_node = true;
			break;
		case 's':
		case 'm':
			if (set || min)
				return usage_error(usage, "give one of --set and --min");
			if (parse_count(optarg, &count))
				return usage_error(usage, "bad page count '%s'", optarg);
			set = c == 's';
			min = c == 'm';
			break;
		case 'j':
			json = true;
			break;
		default: /* -h, or an unknown option */
			return end_option(c, usage, argv);
		}
	}
	if (optind < argc) {
		if (parse_size_arg(argv[optind], &ps))
			return usage_error(usage, "bad page size '%s'", argv[optind]);
		optind++;
	}
	if (optind < argc)
		return usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (!ns)
		return fail("this kernel has no hugetlb pools (%s is missing: "
			    "CONFIG_HUGETLBFS off?)",
			    HTLB_DIR);
	if ((set || min) && !ps)
		ps = default_huge_size();
	if (ps) {
		bool ok = false;
		char offered[128] = "", a[32];

		for (unsigned i = 0; i < ns; i++) {
			ok |= sizes[i] == ps;
			snprintf(offered + strlen(offered), sizeof(offered) - strlen(offered),
				 "%s%s", i ? ", " : "", fmt_size_arg(sizes[i], a, sizeof(a)));
		}
		if (!ok)
			return fail("no hugetlb pool of %s pages here (offered: %s)",
				    fmt_size_arg(ps, a, sizeof(a)), offered);
	}
	if (have_node) {
		bool ok = false;

		for (unsigned i = 0; i < nn; i++)
			ok |= nodes[i] == node;
		if (!ok)
			return fail("no NUMA node %ld on this machine (nodes: %d-%d)", node,
				    nodes[0], nodes[nn - 1]);
	}
	if (set || min)
		rc = set_pool(ps, (int)node, count, min, json, &before, &after);
	if (rc && !json)
		return rc;
	if (json) {
		struct jw w;

		jw_init(&w, stdout);
		jw_obj(&w, NULL);
		if (set || min) {
			jw_obj(&w, min ? "min" : "set");
			jw_u64(&w, "page_size", ps);
			if (have_node)
				jw_int(&w, "node", node);
			else
				jw_null(&w, "node");
			jw_u64(&w, "requested", count);
			jw_u64(&w, "before", before);
			jw_u64(&w, "after", after);
			jw_bool(&w, "ok", rc == 0);
			jw_end_obj(&w);
		}
		jw_arr(&w, "pools");
		for (unsigned i = 0; i < ns; i++) {
			struct pool p;

			if ((ps && sizes[i] != ps) || pool_read(sizes[i], &p))
				continue;
			json_pool(&w, &p, (int)node);
		}
		jw_end_arr(&w);
		jw_end_obj(&w);
		jw_finish(&w);
		return rc;
	}
	printf("%-8s %8s %8s %8s %8s %10s\n", "size", "total", "free", "reserved", "surplus",
	       "overcommit");
	for (unsigned i = 0; i < ns; i++) {
		struct pool p;

		if ((ps && sizes[i] != ps) || pool_read(sizes[i], &p))
			continue;
		print_pool(&p, (int)node);
	}
	return 0;
}
