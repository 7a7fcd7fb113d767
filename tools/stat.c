/* SPDX-License-Identifier: MIT */
/*
 * hpr stat PID: the hpregion regions of a running process, found by the
 * names the library gives them, with what the kernel says about each:
 *   memfd "memfd:hpr:NAME"           shmem or hugetlb memfd regions
 *   file  ".../hpr-NAME-PID-N"       regions on a tmpfs/hugetlbfs mount, and
 *         kept regions (HPR_F_ATTACH), by the stamp in their file (kept.c)
 *   anon  "[anon:hpr:NAME]"          THP regions (PR_SET_VMA_ANON_NAME,
 *                                    Linux 5.17 with CONFIG_ANON_VMA_NAME)
 * Size, resident and huge-mapped bytes come from /proc/PID/smaps, NUMA
 * placement from /proc/PID/numa_maps, the filesystem of file regions from
 * /proc/PID/mountinfo (the process's own mount namespace).
 */
#define _GNU_SOURCE
#include "hpr.h"
#include "parse.h"

#include <hpregion/hpregion.h>

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char usage[] = "usage: hpr stat PID [--json]\n"
			    "       hpr stat --kept DIR [--json]\n"
			    "  PID         a process using libhpregion\n"
			    "  --kept DIR  the kept regions (HPR_F_ATTACH) in DIR\n"
			    "  --json      machine-readable output\n";

#define MAX_REGIONS 256

enum kind { K_MEMFD, K_FILE, K_ANON };
static const char *const kind_names[] = { "memfd", "file", "anon" };

struct region {
	enum kind kind;
	char name[128];
	char path[512]; /* file regions: the file; memfd: the memfd name */
	char fstype[32];
	unsigned dev_major, dev_minor;
	unsigned long inode;
	uintptr_t start, end; /* lowest start, highest end of its VMAs */
	unsigned vmas;
	uint64_t size, rss, anon_huge, shmem_pmd, file_pmd, hugetlb, swap, locked;
	uint64_t kernel_page_size;
	uint64_t node_bytes[MAX_NODES];
	bool have_numa;
};

struct vma {
	uintptr_t start, end;
	unsigned long inode;
	unsigned maj, min;
	char name[512];
};

static int parse_header(const char *line, struct vma *v)
{
	unsigned long long a, b, off;
	unsigned maj, min;
	unsigned long ino;
	char perms[8];
	int n = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %lu %n", &a, &b, perms, &off, &maj, &min, &ino,
		   &n) < 7)
		return -EINVAL;
	v->start = (uintptr_t)a;
	v->end = (uintptr_t)b;
	v->maj = maj;
	v->min = min;
	v->inode = ino;
	scopy(v->name, sizeof(v->name), line + n);
	return 0;
}

/* Strip " (deleted)" from a mapped file's name. */
static void strip_deleted(char *s)
{
	size_t n = strlen(s);

	if (n > 10 && !strcmp(s + n - 10, " (deleted)"))
		s[n - 10] = '\0';
}

/* "hpr-NAME-PID-N" -> NAME; false if the basename does not match. */
static bool file_name(const char *path, char *name, size_t len)
{
	const char *base = strrchr(path, '/');
	const char *d1, *d2;
	size_t n;

	base = base ? base + 1 : path;
	if (strncmp(base, "hpr-", 4))
		return false;
	n = strlen(base);
	d2 = base + n;
	while (d2 > base && d2[-1] >= '0' && d2[-1] <= '9')
		d2--;
	if (d2 == base + n || d2 <= base + 4 || d2[-1] != '-')
		return false;
	d1 = d2 - 1;
	while (d1 > base && d1[-1] >= '0' && d1[-1] <= '9')
		d1--;
	if (d1 == d2 - 1 || d1 <= base + 4 || d1[-1] != '-')
		return false;
	snprintf(name, len, "%.*s", (int)(d1 - 1 - (base + 4)), base + 4);
	return true;
}

/* Classify a VMA of process pid; fills kind and name. false: not an
 * hpregion VMA. */
static bool classify(unsigned long pid, const struct vma *v, enum kind *k, char *name, size_t len,
		     char *path, size_t plen)
{
	char tmp[512];

	scopy(tmp, sizeof(tmp), v->name);
	strip_deleted(tmp);
	if (!strncmp(tmp, "/memfd:hpr:", 11)) {
		*k = K_MEMFD;
		scopy(name, len, tmp + 11);
		scopy(path, plen, tmp + 1);
		return true;
	}
	if (!strncmp(tmp, "[anon:hpr:", 10) && tmp[strlen(tmp) - 1] == ']') {
		*k = K_ANON;
		snprintf(name, len, "%.*s", (int)(strlen(tmp) - 11), tmp + 10);
		path[0] = '\0';
		return true;
	}
	if (tmp[0] == '/' && v->inode && file_name(tmp, name, len)) {
		*k = K_FILE;
		scopy(path, plen, tmp);
		return true;
	}
	/* a kept region (HPR_F_ATTACH) has the name its application chose:
	 * tmpfs and hugetlbfs have anonymous devices (major 0); its stamp
	 * says */
	if (tmp[0] == '/' && v->inode && v->maj == 0) {
		struct stat want = { .st_dev = makedev(v->maj, v->min), .st_ino = v->inode };

		if (kept_vma(pid, &want, tmp, name, len)) {
			*k = K_FILE;
			scopy(path, plen, tmp);
			return true;
		}
	}
	return false;
}

struct scan {
	unsigned long pid;
	struct region *regs;
	unsigned nregs;
	bool truncated;
	uint64_t other_anon_huge; /* AnonHugePages of VMAs not named hpr: */
	unsigned other_anon_vmas;
};

static struct region *region_for(struct scan *s, const struct vma *v, enum kind k, const char *name,
				 const char *path)
{
	for (unsigned i = 0; i < s->nregs; i++) {
		struct region *r = &s->regs[i];

		if (r->kind != k || strcmp(r->name, name))
			continue;
		/* files: the same inode; anon: adjacent VMAs of one name */
		if (k != K_ANON && r->inode == v->inode && r->dev_major == v->maj &&
		    r->dev_minor == v->min)
			return r;
		if (k == K_ANON && (r->end == v->start || r->start == v->end))
			return r;
	}
	if (s->nregs >= MAX_REGIONS) {
		s->truncated = true;
		return NULL;
	}
	s->regs[s->nregs] = (struct region){ .kind = k,
					     .inode = v->inode,
					     .dev_major = v->maj,
					     .dev_minor = v->min,
					     .start = v->start,
					     .end = v->end };
	scopy(s->regs[s->nregs].name, sizeof(s->regs[0].name), name);
	scopy(s->regs[s->nregs].path, sizeof(s->regs[0].path), path);
	return &s->regs[s->nregs++];
}

static void add_vma(struct scan *s, struct region *r, const struct vma *v,
		    const struct hpr__smaps_sum *sum, bool unnamed_anon)
{
	if (unnamed_anon && sum->anon_huge) {
		s->other_anon_huge += sum->anon_huge;
		s->other_anon_vmas++;
	}
	if (!r)
		return;
	if (v->start < r->start)
		r->start = v->start;
	if (v->end > r->end)
		r->end = v->end;
	r->vmas++;
	r->size += sum->size;
	r->rss += sum->rss;
	r->anon_huge += sum->anon_huge;
	r->shmem_pmd += sum->shmem_pmd;
	r->file_pmd += sum->file_pmd;
	r->hugetlb += sum->hugetlb;
	r->swap += sum->swap;
	r->locked += sum->locked;
	r->kernel_page_size = sum->kernel_page_size;
}

static int scan_smaps(struct scan *s, char *buf, size_t len)
{
	struct hpr__smaps_parser p;
	struct region *cur = NULL;
	struct vma v;
	bool have = false, unnamed_anon = false;
	size_t i = 0;

	while (i <= len) {
		size_t e = i;
		bool header;

		while (e < len && buf[e] != '\n')
			e++;
		if (e == len && i == len)
			break;
		buf[e] = '\0';
		header = (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f');
		if (header) {
			char name[128], path[512];
			enum kind k;

			if (have)
				add_vma(s, cur, &v, &p.sum, unnamed_anon);
			have = false;
			cur = NULL;
			if (parse_header(buf + i, &v) == 0) {
				have = true;
				unnamed_anon = !v.inode && v.name[0] == '\0';
				hpr__smaps_init(&p, v.start, v.end);
				hpr__smaps_line(&p, buf + i, e - i);
				if (classify(s->pid, &v, &k, name, sizeof(name), path,
					     sizeof(path)))
					cur = region_for(s, &v, k, name, path);
			}
		} else if (have) {
			hpr__smaps_line(&p, buf + i, e - i);
		}
		i = e + 1;
	}
	if (have)
		add_vma(s, cur, &v, &p.sum, unnamed_anon);
	return 0;
}

/* numa_maps: "start policy ... N0=512 N1=3 kernelpagesize_kB=4" */
static void scan_numa(struct scan *s, char *buf)
{
	char *save = NULL, *line;

	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long start = strtoull(line, NULL, 16);
		uint64_t pages[MAX_NODES] = { 0 };
		unsigned long kb = 4;
		struct region *r = NULL;
		char *tok, *ts = NULL;

		for (unsigned i = 0; i < s->nregs; i++)
			if (start >= s->regs[i].start && start < s->regs[i].end)
				r = &s->regs[i];
		if (!r)
			continue;
		for (tok = strtok_r(line, " ", &ts); tok; tok = strtok_r(NULL, " ", &ts)) {
			unsigned long n, c;
			char *eq;

			if (tok[0] == 'N' && (eq = strchr(tok, '=')) &&
			    !hpr__parse_ulong(tok + 1, (size_t)(eq - tok - 1), &n) &&
			    n < MAX_NODES && !hpr__parse_ulong(eq + 1, strlen(eq + 1), &c))
				pages[n] += c;
			else if (!strncmp(tok, "kernelpagesize_kB=", 18))
				hpr__parse_ulong(tok + 18, strlen(tok + 18), &kb);
		}
		r->have_numa = true;
		for (unsigned n = 0; n < MAX_NODES; n++)
			r->node_bytes[n] += pages[n] * ((uint64_t)kb << 10);
	}
}

/* Fill fstype of file regions from the process's own mountinfo. */
static void scan_mounts(struct scan *s, const char *mi, size_t len)
{
	for (unsigned i = 0; i < s->nregs; i++) {
		struct region *r = &s->regs[i];
		struct hpr__mount m;

		if (r->kind == K_ANON)
			continue;
		if (r->kind == K_MEMFD) {
			/* memfds live on the kernel's internal shm/hugetlbfs mounts */
			snprintf(r->fstype, sizeof(r->fstype), "%s",
				 r->hugetlb || r->kernel_page_size > 4096 ? "hugetlbfs" : "tmpfs");
			continue;
		}
		if (mi && !hpr__mountinfo_find(mi, len, r->dev_major, r->dev_minor, r->path, &m))
			scopy(r->fstype, sizeof(r->fstype), m.fstype);
	}
}

static const char *backend_of(const struct region *r)
{
	if (r->kind == K_ANON)
		return hpr_backend_name(HPR_BACKEND_THP);
	if (!strcmp(r->fstype, "hugetlbfs") || r->kernel_page_size > 4096)
		return hpr_backend_name(HPR_BACKEND_HUGETLB);
	if (!strcmp(r->fstype, "tmpfs") || r->kind == K_MEMFD)
		return hpr_backend_name(HPR_BACKEND_SHMEM);
	return "?";
}

static uint64_t resident(const struct region *r)
{
	return r->rss + r->hugetlb; /* smaps Rss leaves hugetlb out */
}

static uint64_t huge_mapped(const struct region *r)
{
	return r->anon_huge + r->shmem_pmd + r->file_pmd + r->hugetlb;
}

static void nodes_str(const struct region *r, char *buf, size_t len)
{
	char a[32];
	size_t o = 0;

	buf[0] = '\0';
	if (!r->have_numa) {
		snprintf(buf, len, "?");
		return;
	}
	for (unsigned n = 0; n < MAX_NODES && o < len; n++)
		if (r->node_bytes[n])
			o += (size_t)snprintf(buf + o, len - o, "%sN%u=%s", o ? " " : "", n,
					      fmt_size_arg(r->node_bytes[n], a, sizeof(a)));
	if (!o)
		snprintf(buf, len, "-");
}

int cmd_stat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "kept", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static struct region regs[MAX_REGIONS];
	struct scan s = { .regs = regs };
	struct hpr_probe_info pi;
	unsigned long pid;
	bool json = false;
	const char *kept = NULL;
	char path[64], comm[64] = "?", ecomm[4 * 64], *buf, *mi, *numa;
	size_t len = 0, milen = 0;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jk:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'k':
			kept = optarg;
			break;
		default: /* -h, or an unknown option */
			return end_option(c, usage, argv);
		}
	}
	if (kept && optind < argc)
		return usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (kept)
		return stat_kept(kept, json);
	if (optind >= argc)
		return usage_error(usage, "no PID given");
	if (parse_count(argv[optind], &pid) || !pid || pid > 0x7fffffff)
		return usage_error(usage, "bad PID '%s'", argv[optind]);
	if (++optind < argc)
		return usage_error(usage, "unexpected argument '%s'", argv[optind]);

	s.pid = pid;
	snprintf(path, sizeof(path), "/proc/%lu/smaps", pid);
	buf = slurp(path, &len);
	if (!buf) {
		int e = errno;

		if (e == ENOENT || e == ESRCH)
			return fail("no process %lu", pid);
		if (e == EACCES || e == EPERM)
			return fail("cannot read %s: %s: run hpr stat as the process's "
				    "owner or as root (ptrace access mode read is needed)",
				    path, strerror(e));
		return fail("cannot read %s: %s", path, strerror(e));
	}
	snprintf(path, sizeof(path), "/proc/%lu/comm", pid);
	read_str(path, comm, sizeof(comm));
	hpr_probe(&pi);
	scan_smaps(&s, buf, len);
	free(buf);
	snprintf(path, sizeof(path), "/proc/%lu/numa_maps", pid);
	numa = slurp(path, NULL);
	if (numa)
		scan_numa(&s, numa);
	free(numa);
	snprintf(path, sizeof(path), "/proc/%lu/mountinfo", pid);
	mi = slurp(path, &milen);
	scan_mounts(&s, mi, milen);
	free(mi);

	if (json) {
		struct jw w;
		char a[32];

		jw_init(&w, stdout);
		jw_obj(&w, NULL);
		jw_u64(&w, "pid", pid);
		jw_str(&w, "comm", comm);
		jw_bool(&w, "anon_vma_names", pi.have_anon_vma_name);
		jw_bool(&w, "truncated", s.truncated);
		jw_arr(&w, "regions");
		for (unsigned i = 0; i < s.nregs; i++) {
			const struct region *r = &regs[i];

			jw_obj(&w, NULL);
			jw_str(&w, "name", r->name);
			jw_str(&w, "backend", backend_of(r));
			jw_str(&w, "kind", kind_names[r->kind]);
			jw_str(&w, "path", r->path[0] ? r->path : NULL);
			jw_str(&w, "fstype", r->fstype[0] ? r->fstype : NULL);
			snprintf(a, sizeof(a), "%#llx", (unsigned long long)r->start);
			jw_str(&w, "start", a);
			snprintf(a, sizeof(a), "%#llx", (unsigned long long)r->end);
			jw_str(&w, "end", a);
			jw_u64(&w, "vmas", r->vmas);
			jw_u64(&w, "size", r->size);
			jw_u64(&w, "resident", resident(r));
			jw_u64(&w, "huge_mapped", huge_mapped(r));
			jw_u64(&w, "swap", r->swap);
			jw_u64(&w, "locked", r->locked);
			jw_u64(&w, "kernel_page_size", r->kernel_page_size);
			jw_obj(&w, "nodes");
			for (unsigned n = 0; n < MAX_NODES; n++)
				if (r->node_bytes[n]) {
					char k[16];

					snprintf(k, sizeof(k), "%u", n);
					jw_u64(&w, k, r->node_bytes[n]);
				}
			jw_end_obj(&w);
			jw_end_obj(&w);
		}
		jw_end_arr(&w);
		jw_u64(&w, "unnamed_anon_huge", s.other_anon_huge);
		jw_str(&w, "note",
		       pi.have_anon_vma_name ?
			       NULL :
			       "this kernel cannot name anonymous VMAs (PR_SET_VMA_ANON_NAME: "
			       "Linux 5.17 with CONFIG_ANON_VMA_NAME); THP regions are not listed");
		jw_end_obj(&w);
		jw_finish(&w);
		return 0;
	}
	/* names and paths come from the process: escape them for the terminal */
	printf("process %lu (%s): %u hpregion region%s\n", pid,
	       esc_text(comm, ecomm, sizeof(ecomm)), s.nregs, s.nregs == 1 ? "" : "s");
	if (s.nregs)
		printf("%-16s %-7s %9s %9s %9s %6s %7s  %-14s %s\n", "NAME", "BACKEND", "SIZE",
		       "RESIDENT", "HUGE", "HUGE%", "PAGE", "NODES", "SOURCE");
	for (unsigned i = 0; i < s.nregs; i++) {
		const struct region *r = &regs[i];
		char a[32], b[32], d[32], e[32], nodes[128], ename[4 * 128], epath[4 * 512];
		uint64_t res = resident(r), hm = huge_mapped(r);
		/* hugetlb: its page size; THP/shmem map huge pages at PMD size */
		uint64_t page = r->kernel_page_size > 4096 ? r->kernel_page_size :
				hm			   ? pi.thp_pmd_size :
							     r->kernel_page_size;

		nodes_str(r, nodes, sizeof(nodes));
		printf("%-16s %-7s %9s %9s %9s %5.1f%% %7s  %-14s %s%s%s\n",
		       esc_text(r->name, ename, sizeof(ename)), backend_of(r),
		       fmt_size_arg(r->size, a, sizeof(a)), fmt_size_arg(res, b, sizeof(b)),
		       fmt_size_arg(hm, d, sizeof(d)), res ? 100.0 * (double)hm / (double)res : 0.0,
		       fmt_size_arg(page, e, sizeof(e)), nodes,
		       r->kind == K_ANON ? "anonymous" : esc_text(r->path, epath, sizeof(epath)),
		       r->fstype[0] && r->kind == K_FILE ? " on " : "",
		       r->kind == K_FILE ? r->fstype : "");
	}
	if (s.truncated)
		printf("(more than %d regions: the rest are not shown)\n", MAX_REGIONS);
	if (!pi.have_anon_vma_name) {
		char a[32];

		printf("note: this kernel cannot name anonymous VMAs (PR_SET_VMA_ANON_NAME needs "
		       "Linux 5.17 with CONFIG_ANON_VMA_NAME),\n      so THP regions are not "
		       "listed; unnamed anonymous memory has %s in huge pages\n      (%u VMA%s)\n",
		       fmt_size(s.other_anon_huge, a, sizeof(a)), s.other_anon_vmas,
		       s.other_anon_vmas == 1 ? "" : "s");
	}
	return 0;
}
