/* SPDX-License-Identifier: MIT */
/*
 * hpr probe: one screen that says what this machine gives. THP modes and
 * mTHP sizes, khugepaged, hugetlb pools per size and node, the caller's
 * memory and hugetlb cgroup limits, tmpfs/hugetlbfs mounts and their huge
 * options, kernel features; and, for --size, which backend really works
 * (each is tried with hpr_create, nothing is faulted in) and what to type to
 * make the others work. Everything is read from sysfs/procfs as it is now,
 * so the answers can be checked against those files.
 */
#define _GNU_SOURCE
#include "hpr.h"
#include "parse.h"

#include <hpregion/hpregion.h>

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

static const char usage[] =
	"usage: hpr probe [--json] [--size SIZE]\n"
	"  --json        machine-readable output (JSON)\n"
	"  --size SIZE   try every backend for a region of SIZE (1G, 512M, ...) and\n"
	"                say what to change to make the others work\n";

#define MAX_MTHP 16
#define MAX_MOUNTS 64
#define MAX_SIZES 8
#define UNLIMITED (1ULL << 62) /* v1 reports PAGE_COUNTER_MAX * page size */

static const char *const khp_keys[] = {
	"defrag",	   "pages_to_scan", "scan_sleep_millisecs", "alloc_sleep_millisecs",
	"max_ptes_none",   "max_ptes_swap", "max_ptes_shared",	    "full_scans",
	"pages_collapsed",
};
#define NR_KHP (sizeof(khp_keys) / sizeof(khp_keys[0]))

struct limit {
	bool found;	  /* controller file exists */
	int version;	  /* 1 or 2 */
	char dir[512];	  /* cgroup directory of the caller */
	bool limited;	  /* own limit set */
	uint64_t limit;	  /* bytes */
	uint64_t usage;	  /* bytes */
	bool eff_limited; /* some ancestor (or itself) limits */
	uint64_t eff_limit;
};

struct mnt {
	struct hpr__mount m;
	char huge[24];	      /* tmpfs huge= ("never" when absent) */
	uint64_t pagesize;    /* hugetlbfs */
	char size_opt[32];    /* size= as written, "" when unlimited */
	uint64_t size, avail; /* statvfs; 0 when unknown */
};

struct probe {
	struct utsname uts;
	struct hpr_probe_info info;
	char thp_enabled[32], thp_defrag[32], shmem_enabled[32];
	uint64_t pmd_size, use_zero_page;
	bool have_thp;
	unsigned nr_mthp;
	struct {
		uint64_t size;
		char enabled[32], shmem[32];
	} mthp[MAX_MTHP];
	bool have_khp[NR_KHP];
	uint64_t khp[NR_KHP];
	uint64_t default_huge;
	unsigned nr_pools;
	struct pool pools[MAX_SIZES];
	struct limit mem;
	struct limit htlb[MAX_SIZES];
	unsigned nr_mounts;
	struct mnt mounts[MAX_MOUNTS];
	int nodes[MAX_NODES];
	unsigned nr_nodes;
};

/* ---- gathering ---- */

static void read_thp(struct probe *p)
{
	DIR *d;
	struct dirent *de;
	char path[512];

	p->have_thp = !read_mode(THP_DIR "/enabled", p->thp_enabled, sizeof(p->thp_enabled));
	read_mode(THP_DIR "/defrag", p->thp_defrag, sizeof(p->thp_defrag));
	read_mode(THP_DIR "/shmem_enabled", p->shmem_enabled, sizeof(p->shmem_enabled));
	read_u64(THP_DIR "/hpage_pmd_size", &p->pmd_size);
	read_u64(THP_DIR "/use_zero_page", &p->use_zero_page);
	for (size_t k = 0; k < NR_KHP; k++) {
		snprintf(path, sizeof(path), THP_DIR "/khugepaged/%s", khp_keys[k]);
		p->have_khp[k] = !read_u64(path, &p->khp[k]);
	}
	/* mTHP (6.8): hugepages-<kB>kB/{enabled,shmem_enabled} */
	d = opendir(THP_DIR);
	while (d && (de = readdir(d))) {
		unsigned long kb;
		unsigned k;

		if (strncmp(de->d_name, "hugepages-", 10) ||
		    hpr__parse_ulong(de->d_name + 10, strlen(de->d_name + 10), &kb) ||
		    p->nr_mthp >= MAX_MTHP)
			continue;
		k = p->nr_mthp++;
		p->mthp[k].size = (uint64_t)kb << 10;
		snprintf(path, sizeof(path), THP_DIR "/%s/enabled", de->d_name);
		if (read_mode(path, p->mthp[k].enabled, sizeof(p->mthp[k].enabled)))
			snprintf(p->mthp[k].enabled, sizeof(p->mthp[k].enabled), "-");
		snprintf(path, sizeof(path), THP_DIR "/%s/shmem_enabled", de->d_name);
		if (read_mode(path, p->mthp[k].shmem, sizeof(p->mthp[k].shmem)))
			p->mthp[k].shmem[0] = '\0'; /* anon-only mTHP (6.8-6.10) */
	}
	if (d)
		closedir(d);
	for (unsigned i = 0; i < p->nr_mthp; i++)
		for (unsigned j = i + 1; j < p->nr_mthp; j++)
			if (p->mthp[j].size < p->mthp[i].size) {
				typeof(p->mthp[0]) t = p->mthp[i];

				p->mthp[i] = p->mthp[j];
				p->mthp[j] = t;
			}
}

static const char *cg_size_name(uint64_t ps, char *buf, size_t len)
{
	if (ps >= (1ULL << 30))
		snprintf(buf, len, "%lluGB", (unsigned long long)(ps >> 30));
	else if (ps >= (1ULL << 20))
		snprintf(buf, len, "%lluMB", (unsigned long long)(ps >> 20));
	else
		snprintf(buf, len, "%lluKB", (unsigned long long)(ps >> 10));
	return buf;
}

/* Read a cgroup limit file: "max" (v2) or a huge number (v1) is none. */
static int read_limit(const char *path, bool *limited, uint64_t *v)
{
	char buf[64];
	unsigned long u;
	int rc = read_str(path, buf, sizeof(buf));

	if (rc)
		return rc;
	if (!strcmp(buf, "max")) {
		*limited = false;
		return 0;
	}
	if (hpr__parse_ulong(buf, strlen(buf), &u))
		return -EINVAL;
	*v = u;
	*limited = u < UNLIMITED;
	return 0;
}

/*
 * Fill l from the cgroup directory dir (mount point + path below the
 * mount's root): file is the limit file name; usage the usage file. The
 * effective limit is the smallest along the path up to the mount point.
 */
static void read_cg(struct limit *l, int version, const char *mnt, const char *cgpath,
		    const char *file, const char *usage_file)
{
	char dir[512], path[640];
	size_t ml = strlen(mnt);

	snprintf(dir, sizeof(dir), "%s%s", mnt, strcmp(cgpath, "/") ? cgpath : "");
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (read_limit(path, &l->limited, &l->limit))
		return;
	l->found = true;
	l->version = version;
	snprintf(l->dir, sizeof(l->dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/%s", dir, usage_file);
	read_u64(path, &l->usage);
	l->eff_limited = l->limited;
	l->eff_limit = l->limit;
	/* walk up: a parent's limit bounds the child */
	while (strlen(dir) > ml) {
		char *slash = strrchr(dir, '/');
		bool lim;
		uint64_t v = 0;

		if (!slash || (size_t)(slash - dir) < ml)
			break;
		*slash = '\0';
		snprintf(path, sizeof(path), "%s/%s", dir, file);
		if (!read_limit(path, &lim, &v) && lim && (!l->eff_limited || v < l->eff_limit)) {
			l->eff_limited = true;
			l->eff_limit = v;
		}
	}
}

/* Path of the caller's cgroup below the mount m (strip the mount's root,
 * which is not "/" inside containers with bind-mounted cgroups). */
static const char *cg_rel(const struct hpr__mount *m, const char *cgpath)
{
	size_t rl = strlen(m->root);

	if (strcmp(m->root, "/") && !strncmp(cgpath, m->root, rl) &&
	    (cgpath[rl] == '/' || !cgpath[rl]))
		return cgpath[rl] ? cgpath + rl : "/";
	return cgpath;
}

static void read_cgroups(struct probe *p, const char *mi, size_t milen)
{
	char *cg = slurp("/proc/self/cgroup", NULL);
	char *save = NULL, *line;

	if (!cg)
		return;
	for (line = strtok_r(cg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *a = strchr(line, ':'), *b;
		bool v2;
		size_t i = 0;

		if (!a || !(b = strchr(a + 1, ':')))
			continue;
		*b++ = '\0';
		v2 = !a[1];
		/* find the mount of this hierarchy */
		while (i < milen) {
			size_t e = i;
			struct hpr__mount m;
			char opt[8];

			while (e < milen && mi[e] != '\n')
				e++;
			if (!hpr__mountinfo_line(mi + i, e - i, &m) &&
			    ((v2 && !strcmp(m.fstype, "cgroup2")) ||
			     (!v2 && !strcmp(m.fstype, "cgroup")))) {
				const char *rel = cg_rel(&m, b);

				if ((v2 || (hpr__opt_get(a + 1, "memory", opt, sizeof(opt)) >= 0 &&
					    hpr__opt_get(m.super_opts, "memory", opt,
							 sizeof(opt)) >= 0)) &&
				    !p->mem.found) {
					read_cg(&p->mem, v2 ? 2 : 1, m.mnt_point, rel,
						v2 ? "memory.max" : "memory.limit_in_bytes",
						v2 ? "memory.current" : "memory.usage_in_bytes");
				}
				if (v2 || (hpr__opt_get(a + 1, "hugetlb", opt, sizeof(opt)) >= 0 &&
					   hpr__opt_get(m.super_opts, "hugetlb", opt,
							sizeof(opt)) >= 0)) {
					for (unsigned k = 0; k < p->nr_pools; k++) {
						char sz[16], f[64], u[64];

						if (p->htlb[k].found)
							continue;
						cg_size_name(p->pools[k].page_size, sz, sizeof(sz));
						snprintf(f, sizeof(f), "hugetlb.%s.%s", sz,
							 v2 ? "max" : "limit_in_bytes");
						snprintf(u, sizeof(u), "hugetlb.%s.%s", sz,
							 v2 ? "current" : "usage_in_bytes");
						read_cg(&p->htlb[k], v2 ? 2 : 1, m.mnt_point, rel,
							f, u);
					}
				}
			}
			i = e + 1;
		}
	}
	free(cg);
}

static void read_mounts(struct probe *p, const char *mi, size_t milen)
{
	size_t i = 0;

	while (i < milen && p->nr_mounts < MAX_MOUNTS) {
		size_t e = i;
		struct mnt *m = &p->mounts[p->nr_mounts];
		struct statvfs sv;
		char v[32];

		while (e < milen && mi[e] != '\n')
			e++;
		if (!hpr__mountinfo_line(mi + i, e - i, &m->m) &&
		    (!strcmp(m->m.fstype, "tmpfs") || !strcmp(m->m.fstype, "hugetlbfs"))) {
			bool htlb = !strcmp(m->m.fstype, "hugetlbfs");

			memset((char *)m + sizeof(m->m), 0, sizeof(*m) - sizeof(m->m));
			if (!htlb) {
				if (hpr__opt_get(m->m.super_opts, "huge", m->huge,
						 sizeof(m->huge)) != 1)
					snprintf(m->huge, sizeof(m->huge), "never");
			} else {
				uint64_t ps = 0;

				if (hpr__opt_get(m->m.super_opts, "pagesize", v, sizeof(v)) == 1 &&
				    !hpr__parse_size(v, &ps))
					m->pagesize = ps;
				else
					m->pagesize = p->default_huge;
			}
			if (hpr__opt_get(m->m.super_opts, "size", v, sizeof(v)) == 1)
				snprintf(m->size_opt, sizeof(m->size_opt), "%s", v);
			if (!statvfs(m->m.mnt_point, &sv) && sv.f_blocks) {
				m->size = (uint64_t)sv.f_blocks * sv.f_frsize;
				m->avail = (uint64_t)sv.f_bavail * sv.f_frsize;
			}
			p->nr_mounts++;
		}
		i = e + 1;
	}
}

static void gather(struct probe *p)
{
	size_t len = 0, milen = 0;
	char *mem = slurp("/proc/meminfo", &len);
	char *mi = slurp("/proc/self/mountinfo", &milen);
	uint64_t sizes[MAX_SIZES];
	unsigned long long kb = 0;
	unsigned ns;

	memset(p, 0, sizeof(*p));
	uname(&p->uts);
	hpr_probe(&p->info);
	read_thp(p);
	if (mem && !hpr__meminfo_get(mem, len, "Hugepagesize", &kb))
		p->default_huge = kb << 10;
	free(mem);
	ns = hugetlb_sizes(sizes, MAX_SIZES);
	for (unsigned i = 0; i < ns; i++)
		if (!pool_read(sizes[i], &p->pools[p->nr_pools]))
			p->nr_pools++;
	p->nr_nodes = numa_nodes(p->nodes, MAX_NODES);
	if (mi) {
		read_cgroups(p, mi, milen);
		read_mounts(p, mi, milen);
	}
	free(mi);
}

/* ---- trying backends for --size ---- */

#define MAX_TRIES (MAX_SIZES + MAX_MOUNTS + 4)
#define MAX_FIX 4

struct
try {
	enum hpr_backend backend;
	uint64_t page_size; /* 0: the backend's default */
	const char *path;   /* NULL: memfd / anonymous */
	int rc;
	char msg[512];
	enum hpr_backend got; /* what was created */
	uint64_t got_page_size;
	unsigned nr_fix;
	char fix[MAX_FIX][320];
	char note[256];
};

static void add_fix(struct try *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_fix(struct try *t, const char *fmt, ...)
{
	va_list ap;

	if (t->nr_fix >= MAX_FIX)
		return;
	va_start(ap, fmt);
	vsnprintf(t->fix[t->nr_fix++], sizeof(t->fix[0]), fmt, ap);
	va_end(ap);
}

static void try_create(struct try *t, uint64_t size)
{
	struct hpr_config c;
	hpr_region *r = NULL;

	hpr_config_init(&c);
	c.size = size;
	c.backend = t->backend;
	c.page_size = t->path ? 0 : t->page_size;
	c.path = t->path;
	c.name = "probe";
	t->rc = hpr_create(&c, &r);
	if (t->rc) {
		snprintf(t->msg, sizeof(t->msg), "%s", hpr_strerror(t->rc));
		return;
	}
	t->got = hpr_backend_of(r);
	t->got_page_size = hpr_page_size(r);
	hpr_destroy(r);
}

static void advise_hugetlb(const struct probe *p, struct try *t, uint64_t size)
{
	uint64_t ps = t->page_size;
	const struct pool *pl = NULL;
	char a[32], b[32];

	for (unsigned i = 0; i < p->nr_pools; i++)
		if (p->pools[i].page_size == ps)
			pl = &p->pools[i];
	if (!pl)
		return;
	fmt_size_arg(ps, a, sizeof(a));
	{
		uint64_t need = (size + ps - 1) / ps;
		uint64_t avail = pl->free > pl->resv ? pl->free - pl->resv : 0;
		uint64_t room =
			avail + (pl->overcommit > pl->surplus ? pl->overcommit - pl->surplus : 0);

		if (room < need) {
			uint64_t want = pl->total + need - room;

			add_fix(t,
				"echo %llu > " HTLB_DIR "/hugepages-%llukB/nr_hugepages"
				"   (or: hpr pool %s --min %llu)",
				(unsigned long long)want, (unsigned long long)(ps >> 10), a,
				(unsigned long long)want);
			if (ps >= (1ULL << 30))
				add_fix(t,
					"1 GiB pages are easiest to get at boot: add "
					"`hugepagesz=1G hugepages=%llu` to the kernel command line",
					(unsigned long long)want);
		}
	}
	for (unsigned i = 0; i < p->nr_pools; i++)
		if (p->pools[i].page_size == ps && p->htlb[i].found && p->htlb[i].eff_limited &&
		    p->htlb[i].eff_limit < p->htlb[i].usage + size)
			add_fix(t, "raise the hugetlb cgroup limit: echo %s > %s/hugetlb.%s.%s",
				fmt_size_arg(p->htlb[i].usage + size, b, sizeof(b)), p->htlb[i].dir,
				cg_size_name(ps, a, sizeof(a)),
				p->htlb[i].version == 2 ? "max" : "limit_in_bytes");
}

static int size_check(const struct probe *p, uint64_t size, struct try *tries, unsigned *ntries,
		      enum hpr_backend *auto_got, int *auto_rc, char *auto_msg, size_t amlen)
{
	unsigned n = 0;
	char sz[32], a[32];
	bool huge_tmpfs = false;
	struct try at;

	fmt_size_arg(size, sz, sizeof(sz));
	memset(tries, 0, sizeof(*tries) * MAX_TRIES);
	for (unsigned i = 0; i < p->nr_pools; i++) {
		tries[n].backend = HPR_BACKEND_HUGETLB;
		tries[n++].page_size = p->pools[i].page_size;
	}
	for (unsigned i = 0; i < p->nr_mounts && n < MAX_TRIES - 2; i++) {
		const struct mnt *m = &p->mounts[i];
		bool htlb = !strcmp(m->m.fstype, "hugetlbfs");

		if (!htlb && !strcmp(m->huge, "never"))
			continue; /* small pages only: not a candidate */
		huge_tmpfs |= !htlb;
		tries[n].backend = htlb ? HPR_BACKEND_HUGETLB : HPR_BACKEND_SHMEM;
		tries[n].page_size = htlb ? m->pagesize : 0;
		tries[n++].path = m->m.mnt_point;
	}
	tries[n++].backend = HPR_BACKEND_SHMEM;
	tries[n++].backend = HPR_BACKEND_THP;
	for (unsigned i = 0; i < n; i++) {
		struct try *t = &tries[i];

		try_create(t, size);
		if (t->backend == HPR_BACKEND_HUGETLB && !t->path && t->rc)
			advise_hugetlb(p, t, size);
		if (t->backend == HPR_BACKEND_HUGETLB && t->path && t->rc) {
			if (t->rc == -EACCES || t->rc == -EPERM)
				add_fix(t, "the mount is not writable by you: remount it "
					   "with uid=/gid=/mode= for your user (hpr mount DIR "
					   "--hugetlbfs --owner USER)");
			else if (t->rc == -ENOSPC)
				add_fix(t,
					"the mount's size= is too small: umount %s; "
					"hpr mount %s --hugetlbfs --size %s",
					t->path, t->path, sz);
			else if (t->rc == -ENOMEM)
				advise_hugetlb(p, t, size);
		}
		if (t->backend == HPR_BACKEND_SHMEM && t->path && t->rc) {
			if (t->rc == -EACCES || t->rc == -EPERM)
				add_fix(t,
					"the mount is not writable by you: remount with "
					"--owner USER (hpr mount %s --size %s --owner USER)",
					t->path, sz);
			else if (t->rc == -ENOSPC)
				add_fix(t,
					"the mount's size= is too small: mount -o "
					"remount,size=%s %s",
					sz, t->path);
		}
		if (t->backend == HPR_BACKEND_SHMEM && !t->path) {
			bool fault_huge = !strcmp(p->shmem_enabled, "always") ||
					  !strcmp(p->shmem_enabled, "within_size") ||
					  !strcmp(p->shmem_enabled, "advise") ||
					  !strcmp(p->shmem_enabled, "force");

			if (!t->rc && !fault_huge)
				snprintf(t->note, sizeof(t->note),
					 "shmem_enabled=%s: faults give small pages; hpregion "
					 "populates, then MADV_COLLAPSE makes them huge",
					 p->shmem_enabled);
			if (t->rc || !fault_huge)
				add_fix(t, "echo advise > " THP_DIR "/shmem_enabled   "
					   "(memfds fault huge pages directly)");
			if (t->rc && !huge_tmpfs)
				add_fix(t,
					"or a huge tmpfs and path=DIR: hpr mount DIR --size %s  "
					"(= mount -t tmpfs -o huge=always,size=%s,mode=0700 none DIR)",
					sz, sz);
		}
		if (t->backend == HPR_BACKEND_THP && t->rc) {
			if (!strcmp(p->thp_enabled, "never"))
				add_fix(t, "echo madvise > " THP_DIR "/enabled");
			else if (t->rc == -ENOMEM)
				add_fix(t,
					"not enough memory or address space for %s: "
					"check vm.overcommit_memory and the memory cgroup",
					sz);
		}
		if (t->backend == HPR_BACKEND_THP && !t->rc)
			snprintf(t->note, sizeof(t->note),
				 "THP is a request: at fault time the kernel may give small "
				 "pages when it has no free 2 MiB blocks (defrag=%s)",
				 p->thp_defrag);
	}
	if (!huge_tmpfs && n < MAX_TRIES) {
		/* no huge tmpfs to try: say how to get one */
		struct try *t = &tries[n++];

		t->backend = HPR_BACKEND_SHMEM;
		t->path = "DIR";
		t->rc = -ENOENT;
		snprintf(t->msg, sizeof(t->msg), "no tmpfs is mounted with huge=");
		add_fix(t,
			"hpr mount DIR --size %s   (= mount -t tmpfs -o "
			"huge=always,size=%s,mode=0700 none DIR)",
			sz, sz);
	}
	*ntries = n;
	memset(&at, 0, sizeof(at));
	at.backend = HPR_BACKEND_AUTO;
	try_create(&at, size);
	*auto_got = at.got;
	*auto_rc = at.rc;
	snprintf(auto_msg, amlen, "%s", at.msg);
	(void)a;
	for (unsigned i = 0; i < n; i++)
		if (!tries[i].rc)
			return 0;
	return 1;
}

/* ---- output ---- */

static const char *yes(bool b)
{
	return b ? "yes" : "no";
}

static const char *errname(int rc)
{
	switch (-rc) {
	case 0:
		return "0";
	case EINVAL:
		return "EINVAL";
	case ENOENT:
		return "ENOENT";
	case ENOTDIR:
		return "ENOTDIR";
	case EACCES:
		return "EACCES";
	case EPERM:
		return "EPERM";
	case ENOMEM:
		return "ENOMEM";
	case ENOSPC:
		return "ENOSPC";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case E2BIG:
		return "E2BIG";
	default:
		return "error";
	}
}

static const char *try_label(const struct try *t, char *buf, size_t len)
{
	char a[32];

	if (t->backend == HPR_BACKEND_HUGETLB && !t->path)
		snprintf(buf, len, "hugetlb %s memfd", fmt_size(t->page_size, a, sizeof(a)));
	else if (t->path)
		snprintf(buf, len, "%s on %s", hpr_backend_name(t->backend), t->path);
	else if (t->backend == HPR_BACKEND_SHMEM)
		snprintf(buf, len, "shmem memfd");
	else
		snprintf(buf, len, "%s", hpr_backend_name(t->backend));
	return buf;
}

static void print_limit(const char *what, const struct limit *l)
{
	char a[32], b[32];

	if (!l->found) {
		printf("  %-10s no limit (controller not mounted for this process)\n", what);
		return;
	}
	printf("  %-10s %s, usage %s", what,
	       l->limited ? fmt_size(l->limit, a, sizeof(a)) : "unlimited",
	       fmt_size(l->usage, b, sizeof(b)));
	if (l->eff_limited && (!l->limited || l->eff_limit < l->limit))
		printf(", an ancestor limits to %s", fmt_size(l->eff_limit, a, sizeof(a)));
	printf("  (v%d %s)\n", l->version, l->dir);
}

static void print_text(const struct probe *p)
{
	const struct hpr_probe_info *in = &p->info;
	char a[32], b[32];

	printf("hpr %s on Linux %s (%s), %u NUMA node%s\n", hpr_version(), p->uts.release,
	       p->uts.machine, p->nr_nodes, p->nr_nodes == 1 ? "" : "s");

	printf("\nTransparent huge pages (" THP_DIR ")\n");
	if (!p->have_thp) {
		printf("  not available (CONFIG_TRANSPARENT_HUGEPAGE off)\n");
	} else {
		printf("  enabled %s, defrag %s, shmem_enabled %s, PMD size %s, use_zero_page %llu\n",
		       p->thp_enabled, p->thp_defrag, p->shmem_enabled,
		       fmt_size(p->pmd_size, a, sizeof(a)), (unsigned long long)p->use_zero_page);
		if (!strcmp(p->thp_enabled, "never"))
			printf("  THP is off: the thp backend gets small pages only\n");
		else if (!strcmp(p->thp_enabled, "madvise"))
			printf("  anon THP only where madvised (hpregion does MADV_HUGEPAGE)\n");
		if (p->nr_mthp) {
			printf("  mTHP sizes (enabled/shmem_enabled):");
			for (unsigned i = 0; i < p->nr_mthp; i++)
				printf("%s %s %s%s%s", i % 4 ? "," : "\n   ",
				       fmt_size_arg(p->mthp[i].size, a, sizeof(a)),
				       p->mthp[i].enabled, p->mthp[i].shmem[0] ? "/" : "",
				       p->mthp[i].shmem);
			printf("\n");
		}
		printf("  khugepaged:");
		for (size_t k = 0; k < NR_KHP; k++)
			if (p->have_khp[k])
				printf("%s %s=%llu", k == 4 ? "\n             " : "", khp_keys[k],
				       (unsigned long long)p->khp[k]);
		printf("\n");
	}

	printf("\nHugetlb pools (" HTLB_DIR "), default page size %s\n",
	       p->default_huge ? fmt_size(p->default_huge, a, sizeof(a)) : "none");
	if (!p->nr_pools) {
		printf("  none (CONFIG_HUGETLBFS off)\n");
	} else {
		printf("  %-8s %8s %8s %8s %8s %10s\n", "size", "total", "free", "reserved",
		       "surplus", "overcommit");
		for (unsigned i = 0; i < p->nr_pools; i++) {
			const struct pool *pl = &p->pools[i];

			printf("  %-8s %8llu %8llu %8llu %8llu %10llu\n",
			       fmt_size(pl->page_size, a, sizeof(a)), (unsigned long long)pl->total,
			       (unsigned long long)pl->free, (unsigned long long)pl->resv,
			       (unsigned long long)pl->surplus, (unsigned long long)pl->overcommit);
			for (unsigned n = 0; n < pl->nr_nodes; n++)
				printf("    node%-3d %8llu %8llu %8s %8llu\n", pl->nodes[n].node,
				       (unsigned long long)pl->nodes[n].total,
				       (unsigned long long)pl->nodes[n].free, "-",
				       (unsigned long long)pl->nodes[n].surplus);
		}
	}

	printf("\nCgroup limits of this process\n");
	print_limit("memory", &p->mem);
	for (unsigned i = 0; i < p->nr_pools; i++) {
		char w[32];

		snprintf(w, sizeof(w), "hugetlb %s",
			 fmt_size_arg(p->pools[i].page_size, a, sizeof(a)));
		print_limit(w, &p->htlb[i]);
	}

	printf("\ntmpfs and hugetlbfs mounts (/proc/self/mountinfo)\n");
	if (!p->nr_mounts)
		printf("  none\n");
	for (unsigned i = 0; i < p->nr_mounts; i++) {
		const struct mnt *m = &p->mounts[i];
		bool htlb = !strcmp(m->m.fstype, "hugetlbfs");
		char opt[48];

		if (htlb)
			snprintf(opt, sizeof(opt), "pagesize=%s",
				 fmt_size_arg(m->pagesize, a, sizeof(a)));
		else
			snprintf(opt, sizeof(opt), "huge=%s%s", m->huge,
				 strcmp(m->huge, "never") ? "" : " (small pages)");
		printf("  %-30s %-9s %-26s size %s%s%s\n", m->m.mnt_point, m->m.fstype, opt,
		       m->size ? fmt_size(m->size, a, sizeof(a)) : "unlimited",
		       m->size ? ", free " : "", m->size ? fmt_size(m->avail, b, sizeof(b)) : "");
	}

	printf("\nKernel features (Linux %d.%d)\n", in->kernel_major, in->kernel_minor);
	printf("  MADV_POPULATE_WRITE (5.14) %-4s MADV_COLLAPSE (6.1)       %s\n",
	       yes(in->have_populate), yes(in->have_collapse));
	printf("  PAGEMAP_SCAN (6.7)         %-4s anon VMA names (5.17)     %s\n",
	       yes(in->have_pagemap_scan), yes(in->have_anon_vma_name));
	printf("  PSI memory pressure        %s\n", yes(in->have_psi));
}

static void json_limit(struct jw *w, const char *key, const struct limit *l, uint64_t page_size)
{
	jw_obj(w, key);
	if (page_size)
		jw_u64(w, "page_size", page_size);
	jw_bool(w, "found", l->found);
	if (l->found) {
		jw_int(w, "version", l->version);
		jw_str(w, "dir", l->dir);
		if (l->limited)
			jw_u64(w, "limit", l->limit);
		else
			jw_null(w, "limit");
		jw_u64(w, "usage", l->usage);
		if (l->eff_limited)
			jw_u64(w, "effective_limit", l->eff_limit);
		else
			jw_null(w, "effective_limit");
	}
	jw_end_obj(w);
}

static void print_json(struct jw *w, const struct probe *p)
{
	const struct hpr_probe_info *in = &p->info;

	jw_str(w, "version", hpr_version());
	jw_obj(w, "kernel");
	jw_str(w, "release", p->uts.release);
	jw_str(w, "machine", p->uts.machine);
	jw_int(w, "major", in->kernel_major);
	jw_int(w, "minor", in->kernel_minor);
	jw_end_obj(w);
	jw_arr(w, "numa_nodes");
	for (unsigned i = 0; i < p->nr_nodes; i++)
		jw_int(w, NULL, p->nodes[i]);
	jw_end_arr(w);
	jw_obj(w, "thp");
	jw_bool(w, "available", p->have_thp);
	jw_str(w, "enabled", p->have_thp ? p->thp_enabled : NULL);
	jw_str(w, "defrag", p->have_thp ? p->thp_defrag : NULL);
	jw_str(w, "shmem_enabled", p->have_thp ? p->shmem_enabled : NULL);
	jw_u64(w, "pmd_size", p->pmd_size);
	jw_u64(w, "use_zero_page", p->use_zero_page);
	jw_arr(w, "mthp");
	for (unsigned i = 0; i < p->nr_mthp; i++) {
		jw_obj(w, NULL);
		jw_u64(w, "size", p->mthp[i].size);
		jw_str(w, "enabled", p->mthp[i].enabled);
		jw_str(w, "shmem_enabled", p->mthp[i].shmem[0] ? p->mthp[i].shmem : NULL);
		jw_end_obj(w);
	}
	jw_end_arr(w);
	jw_obj(w, "khugepaged");
	for (size_t k = 0; k < NR_KHP; k++)
		if (p->have_khp[k])
			jw_u64(w, khp_keys[k], p->khp[k]);
	jw_end_obj(w);
	jw_end_obj(w);
	jw_obj(w, "hugetlb");
	jw_u64(w, "default_page_size", p->default_huge);
	jw_arr(w, "pools");
	for (unsigned i = 0; i < p->nr_pools; i++)
		json_pool(w, &p->pools[i], -1);
	jw_end_arr(w);
	jw_end_obj(w);
	jw_obj(w, "cgroup");
	json_limit(w, "memory", &p->mem, 0);
	jw_arr(w, "hugetlb");
	for (unsigned i = 0; i < p->nr_pools; i++)
		json_limit(w, NULL, &p->htlb[i], p->pools[i].page_size);
	jw_end_arr(w);
	jw_end_obj(w);
	jw_arr(w, "mounts");
	for (unsigned i = 0; i < p->nr_mounts; i++) {
		const struct mnt *m = &p->mounts[i];
		bool htlb = !strcmp(m->m.fstype, "hugetlbfs");

		jw_obj(w, NULL);
		jw_str(w, "mount_point", m->m.mnt_point);
		jw_str(w, "fstype", m->m.fstype);
		jw_str(w, "source", m->m.source);
		jw_str(w, "options", m->m.super_opts);
		jw_str(w, "huge", htlb ? NULL : m->huge);
		if (htlb)
			jw_u64(w, "pagesize", m->pagesize);
		else
			jw_null(w, "pagesize");
		jw_str(w, "size_option", m->size_opt[0] ? m->size_opt : NULL);
		jw_u64(w, "size", m->size);
		jw_u64(w, "avail", m->avail);
		jw_end_obj(w);
	}
	jw_end_arr(w);
	jw_obj(w, "features");
	jw_bool(w, "populate_write", in->have_populate);
	jw_bool(w, "collapse", in->have_collapse);
	jw_bool(w, "pagemap_scan", in->have_pagemap_scan);
	jw_bool(w, "anon_vma_name", in->have_anon_vma_name);
	jw_bool(w, "psi", in->have_psi);
	jw_end_obj(w);
}

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "size", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static struct probe p;
	static struct try tries[MAX_TRIES];
	bool json = false;
	uint64_t size = 0;
	unsigned ntries = 0;
	enum hpr_backend auto_got = HPR_BACKEND_AUTO;
	int c, auto_rc = 0, rc = 0;
	char auto_msg[512] = "", a[32], lbl[400];

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "js:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 's':
			if (parse_size_arg(optarg, &size))
				return usage_error(usage, "bad size '%s' (try 1G, 512M)", optarg);
			break;
		default: /* -h, or an unknown option */
			return end_option(c, usage, argv);
		}
	}
	if (optind < argc)
		return usage_error(usage, "unexpected argument '%s'", argv[optind]);
	gather(&p);
	if (size)
		rc = size_check(&p, size, tries, &ntries, &auto_got, &auto_rc, auto_msg,
				sizeof(auto_msg));
	if (json) {
		struct jw w;

		jw_init(&w, stdout);
		jw_obj(&w, NULL);
		print_json(&w, &p);
		if (size) {
			jw_obj(&w, "size_check");
			jw_u64(&w, "size", size);
			jw_arr(&w, "backends");
			for (unsigned i = 0; i < ntries; i++) {
				const struct try *t = &tries[i];

				jw_obj(&w, NULL);
				jw_str(&w, "label", try_label(t, lbl, sizeof(lbl)));
				jw_str(&w, "backend", hpr_backend_name(t->backend));
				jw_u64(&w, "page_size", t->rc ? t->page_size : t->got_page_size);
				jw_str(&w, "path", t->path);
				jw_bool(&w, "ok", !t->rc);
				jw_int(&w, "error", t->rc);
				jw_str(&w, "errno", t->rc ? errname(t->rc) : NULL);
				jw_str(&w, "message", t->rc ? t->msg : NULL);
				jw_str(&w, "note", t->note[0] ? t->note : NULL);
				jw_arr(&w, "fix");
				for (unsigned k = 0; k < t->nr_fix; k++)
					jw_str(&w, NULL, t->fix[k]);
				jw_end_arr(&w);
				jw_end_obj(&w);
			}
			jw_end_arr(&w);
			jw_str(&w, "auto", auto_rc ? NULL : hpr_backend_name(auto_got));
			jw_str(&w, "auto_message", auto_rc ? auto_msg : NULL);
			jw_end_obj(&w);
		}
		jw_end_obj(&w);
		jw_finish(&w);
		return rc;
	}
	print_text(&p);
	if (!size) {
		printf("\nWhich backend works for a region of SIZE: hpr probe --size SIZE\n");
		return 0;
	}
	printf("\nA region of %s (each backend tried with hpr_create, nothing faulted in)\n",
	       fmt_size(size, a, sizeof(a)));
	for (unsigned i = 0; i < ntries; i++) {
		const struct try *t = &tries[i];

		try_label(t, lbl, sizeof(lbl));
		if (!t->rc)
			printf("  %-28s ok (%s, %s pages)\n", lbl, hpr_backend_name(t->got),
			       fmt_size(t->got_page_size, a, sizeof(a)));
		else
			printf("  %-28s NO: %s\n", lbl, t->msg);
		if (t->note[0])
			printf("  %-28s note: %s\n", "", t->note);
		for (unsigned k = 0; k < t->nr_fix; k++)
			printf("  %-28s %s %s\n", "",
			       k     ? "    " :
			       t->rc ? "fix:" :
				       "tip:",
			       t->fix[k]);
	}
	if (auto_rc)
		printf("  AUTO fails: %s\n", auto_msg);
	else
		printf("  AUTO (no path) picks %s\n", hpr_backend_name(auto_got));
	return rc;
}
