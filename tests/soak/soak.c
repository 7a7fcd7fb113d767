/* SPDX-License-Identifier: MIT */
/*
 * The soak: threads doing random fault-in, release, reclaim, collapse,
 * prefault, stats, save and load on one region per backend, with regions
 * recreated, short-lived regions churning the hugetlb pool dry, forked
 * children, and a worker process in a memory cgroup whose limit its regions
 * exceed. Every byte read is checked against the model (model.h); at the
 * end every page is, and the pool, mounts and fds must be as at the start.
 * Usage and what each part checks: docs/soak.md.
 */
#define _GNU_SOURCE
#include "common.h"
#include "soak.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <execinfo.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SK_MAXREG 4

struct sk_region {
	char name[32];
	enum hpr_backend be;
	const char *path;
	size_t size, ps, npages;
	pthread_rwlock_t lk; /* read: page operations; write: save, load,
				recreate, fork */
	hpr_region *r;	     /* NULL while a create failed (pool dry) */
	unsigned flags;
	struct sk_page *pg;
	struct sk_cand *snap; /* what a load of the last save must give */
	bool has_snap;
	int snap_fd; /* the caller keeps its snapshot open (unless --avoid 10) */
	char snap_path[300];
};

static struct sk_opts o = { .seed = 15,
			    .duration = 60,
			    .threads = 4,
			    .pool_pages = 20,
			    .report_fd = -1 };
static struct sk_region regs[SK_MAXREG];
static unsigned nregs;
static struct sk_counts cnt;
static _Atomic uint64_t gen;
static _Atomic bool stop;
static double t0, deadline;
static bool worker;					    /* the cgroup worker process */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER; /* one fork at a time */
/* churn holds it shared; a fork that must find the library idle (--avoid 1)
 * takes it exclusively */
static pthread_rwlock_t churn_lk = PTHREAD_RWLOCK_INITIALIZER;
/* --avoid 22: a hugetlb create that fails its reservation unmaps whatever
 * another thread mapped meanwhile, so hugetlb creates take this
 * exclusively and every other operation (they map: regions, io_uring rings,
 * thread stacks) shares it */
static pthread_rwlock_t map_lk = PTHREAD_RWLOCK_INITIALIZER;
static bool in_child;

static _Atomic uint64_t last_ms[SK_NOPS];

static const char *const op_name[SK_NOPS] = {
	[OP_FAULT] = "fault",	    [OP_WRITE] = "write",     [OP_VERIFY] = "verify",
	[OP_RELEASE] = "release",   [OP_RECLAIM] = "reclaim", [OP_COLLAPSE] = "collapse",
	[OP_PREFAULT] = "prefault", [OP_STATS] = "stats",     [OP_SAVE] = "save",
	[OP_LOAD] = "load",	    [OP_CHURN] = "churn",     [OP_RECREATE] = "recreate",
	[OP_FORK] = "fork",
};
/* how often each operation is picked; the last three are not done by the
 * cgroup worker (they create regions, whose threads' stacks would be
 * charged to the full cgroup) */
static const unsigned op_weight[SK_NOPS] = {
	[OP_FAULT] = 22,   [OP_WRITE] = 8,    [OP_VERIFY] = 12, [OP_RELEASE] = 14, [OP_RECLAIM] = 6,
	[OP_COLLAPSE] = 5, [OP_PREFAULT] = 4, [OP_STATS] = 3,	[OP_SAVE] = 2,	   [OP_LOAD] = 2,
	[OP_CHURN] = 5,	   [OP_RECREATE] = 1, [OP_FORK] = 1,
};
/* and at most once per this many ms (they take the region exclusively) */
static const unsigned op_gap_ms[SK_NOPS] = {
	[OP_SAVE] = 250,
	[OP_LOAD] = 250,
	[OP_RECREATE] = 1000,
	[OP_FORK] = 2000,
};

static void snap_drop(struct sk_region *s);

static _Thread_local bool map_held; /* taken before the region's lock */

/* map_lk comes before any region lock */
static void map_lock(bool excl)
{
	if (!(o.avoid & SK_AVOID(22)) || in_child || map_held)
		return;
	excl ? pthread_rwlock_wrlock(&map_lk) : pthread_rwlock_rdlock(&map_lk);
	map_held = true;
}

static void map_unlock(void)
{
	if ((o.avoid & SK_AVOID(22)) && !in_child && map_held) {
		map_held = false;
		pthread_rwlock_unlock(&map_lk);
	}
}

static int create(const struct hpr_config *c, hpr_region **r)
{
	bool held = map_held;
	int rc;

	map_lock(c->backend == HPR_BACKEND_HUGETLB);
	rc = hpr_create(c, r);
	if (!held)
		map_unlock();
	return rc;
}
static void summary(const char *who, double secs, int bad);

#define ADD(field, v) __atomic_fetch_add(&cnt.field, (uint64_t)(v), __ATOMIC_RELAXED)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void flunk(const char *what, const struct sk_region *s, int rc)
{
	fprintf(stderr, "soak%s: FAIL %s on %s: %d (%s)\n", worker ? "[cgroup]" : "", what,
		s ? s->name : "-", rc, hpr_strerror(rc));
	ADD(failures, 1);
}

static uint64_t new_key(void)
{
	return sk_mix(o.seed ^ sk_mix(atomic_fetch_add(&gen, 1) + 1)) | 1;
}

/* A refusal the contract allows here: the pool or the cgroup ran dry, no
 * free huge page for THP/shmem (another process may hold them), busy. */
static bool refusal(const struct sk_region *s, enum hpr_backend be, int rc, enum sk_op op)
{
	bool ok = false;

	if (rc == -ENOMEM)
		/* documented: the pool, the cgroup or the machine ran out */
		ok = be == HPR_BACKEND_HUGETLB || worker || op == OP_COLLAPSE || op == OP_FAULT ||
		     op == OP_PREFAULT || op == OP_CHURN || op == OP_LOAD;
	else if (rc == -EOPNOTSUPP)
		ok = be != HPR_BACKEND_HUGETLB &&
		     (op == OP_FAULT || op == OP_PREFAULT || op == OP_CHURN || op == OP_COLLAPSE ||
		      op == OP_LOAD);
	else if (rc == -EAGAIN)
		ok = op == OP_COLLAPSE;
	if (!ok && (o.avoid & SK_AVOID(20)))
		/* new defect (docs/soak.md): in a full memory cgroup or a dry
		 * hugetlb pool the kernel's errors come through as they are,
		 * not as -ENOMEM */
		ok = (worker && rc == -EBUSY && op == OP_COLLAPSE) ||
		     (worker && (rc == -EFAULT || rc == -EAGAIN || rc == -ECANCELED) &&
		      (op == OP_LOAD || op == OP_SAVE)) ||
		     (be == HPR_BACKEND_HUGETLB && rc == -EFAULT && op == OP_LOAD);
	if (rc == -ENOMEM && worker && op == OP_STATS) /* reading smaps in a full cgroup */
		ok = true;
	(void)s;
	if (ok)
		ADD(refused[op], 1);
	return ok;
}

static char *page_addr(const struct sk_region *s, size_t i)
{
	return (char *)hpr_base(s->r) + i * s->ps;
}

static uint64_t check(const char *name, const void *p, size_t len, const struct sk_cand *c,
		      size_t i)
{
	uint64_t lost;

	if (c->any) {
		ADD(unverifiable, len);
		return 0;
	}
	lost = sk_verify(p, len, c, name, i);
	ADD(verified, len);
	ADD(lost, lost);
	return lost;
}

/* --explain: which page of the run a lost block's content belongs to */
static void whose(uint64_t key)
{
	for (unsigned r = 0; r < nregs; r++)
		for (size_t j = 0; j < regs[r].npages; j++) {
			struct sk_page *p = &regs[r].pg[j];

			for (unsigned k = 0; k < p->c.nk; k++)
				if (p->c.k[k] == key)
					fprintf(stderr, "soak:   key is %s page %zu's now\n",
						regs[r].name, j);
			if (p->prev == key)
				fprintf(stderr, "soak:   key is %s page %zu's prev\n", regs[r].name,
					j);
			for (unsigned k = 0; k < regs[r].snap[j].nk; k++)
				if (regs[r].snap[j].k[k] == key)
					fprintf(stderr,
						"soak:   key is %s page %zu's in the snapshot\n",
						regs[r].name, j);
		}
}

static void check_page(struct sk_region *s, size_t i)
{
	if (check(s->name, page_addr(s, i), s->ps, &s->pg[i].c, i))
		fprintf(stderr, "soak: %s page %zu was %s after %s; flags %#x; %s\n", s->name, i,
			(const char *[]){ "absent", "present", "lazy", "unknown" }[s->pg[i].st],
			op_name[s->pg[i].last], s->flags,
			*(uint64_t *)page_addr(s, i) == s->pg[i].prev && s->pg[i].prev ?
				"it holds what it held before" :
				"not what it held before");
	if (o.explain) {
		const uint64_t *w = (const uint64_t *)page_addr(s, i);
		size_t k = 0;

		while (k < s->ps / 8 && !w[k])
			k++;
		if (k < s->ps / 8) {
			fprintf(stderr, "soak:   first non-zero word %zu (block %zu)\n", k,
				k / 512);
			whose(sk_key_at(w, k));
		}
	}
}

static void write_page(struct sk_region *s, size_t i)
{
	uint64_t k = new_key();

	sk_fill(page_addr(s, i), s->ps, k);
	s->pg[i].st = SK_PRESENT;
	s->pg[i].last = OP_WRITE;
	sk_cand_key(&s->pg[i].c, k);
}

static void model_reset(struct sk_region *s)
{
	for (size_t i = 0; i < s->npages; i++) {
		s->pg[i].st = SK_ABSENT;
		s->pg[i].last = OP_RECREATE;
		sk_cand_zero(&s->pg[i].c);
	}
}

/* ---- regions ---- */

static void region_open(struct sk_region *s, uint64_t *rng)
{
	struct hpr_config c;
	uint64_t x = sk_rand(rng);
	unsigned flags = worker ? HPR_F_FALLBACK : 0;
	int rc;

	if (!(o.avoid & SK_AVOID(4)) && x % 5 == 0)
		flags |= HPR_F_GUARD;
	if (!(o.avoid & SK_AVOID(3)) && !worker && x % 7 == 1)
		flags |= HPR_F_LOCK;
	if (x % 3 == 2)
		flags |= HPR_F_PREFAULT_ASYNC;
	if (s->be != HPR_BACKEND_THP && (x >> 24) % 2)
		flags |= HPR_F_SHARED; /* a forked child shares it */
	t_config(&c, s->be, s->path, s->size, 1 + (unsigned)(x >> 16) % 3, flags);
	c.name = s->name;
	if (s->be != HPR_BACKEND_THP && (x >> 20) % 3 == 0)
		c.lazy_budget = 2 * s->ps; /* reclaim runs on its own */
	rc = create(&c, &s->r);
	if (rc) {
		s->r = NULL;
		if (!refusal(s, s->be, rc, OP_RECREATE))
			flunk("create", s, rc);
		return;
	}
	s->flags = flags;
	s->ps = hpr_page_size(s->r);
	model_reset(s);
}

static void region_close(struct sk_region *s)
{
	int rc;

	if (!s->r)
		return;
	rc = hpr_destroy(s->r);
	if (rc)
		flunk("destroy", s, rc);
	s->r = NULL;
}

static void region_add(const char *name, enum hpr_backend be, const char *path, size_t size,
		       size_t ps)
{
	struct sk_region *s = &regs[nregs++];
	uint64_t rng = sk_mix(o.seed + nregs) | 1;

	snprintf(s->name, sizeof(s->name), "%s", name);
	s->be = be;
	s->path = path;
	s->size = size;
	s->ps = ps;
	s->npages = size / ps;
	s->snap_fd = -1;
	pthread_rwlock_init(&s->lk, NULL);
	s->pg = calloc(s->npages, sizeof(*s->pg));
	s->snap = calloc(s->npages, sizeof(*s->snap));
	if (!s->pg || !s->snap)
		abort();
	for (size_t i = 0; i < s->npages; i++)
		pthread_mutex_init(&s->pg[i].mu, NULL);
	region_open(s, &rng);
}

static void region_free(struct sk_region *s)
{
	snap_drop(s);
	for (size_t i = 0; i < s->npages; i++)
		pthread_mutex_destroy(&s->pg[i].mu);
	free(s->pg);
	free(s->snap);
	pthread_rwlock_destroy(&s->lk);
}

static void lock_pages(struct sk_region *s, size_t a, size_t n)
{
	for (size_t i = a; i < a + n; i++)
		pthread_mutex_lock(&s->pg[i].mu);
}

static void unlock_pages(struct sk_region *s, size_t a, size_t n)
{
	for (size_t i = a; i < a + n; i++)
		pthread_mutex_unlock(&s->pg[i].mu);
}

/* ---- page operations: region read-locked, pages [a, a+n) locked ---- */

/* The cgroup is full: give some pages back, as an application under
 * pressure would (pages other threads hold are skipped, not waited for). */
static void relieve(struct sk_region *s, size_t a, size_t n, uint64_t *rng)
{
	for (int t = 0; t < 4; t++) {
		size_t j = sk_rand(rng) % s->npages;

		if ((j >= a && j < a + n) || pthread_mutex_trylock(&s->pg[j].mu))
			continue;
		if (s->pg[j].st == SK_PRESENT && !hpr_release_lazy(s->r, j * s->ps, s->ps)) {
			s->pg[j].st = SK_LAZY;
			s->pg[j].c.zero = true;
			s->pg[j].last = OP_RELEASE;
		}
		pthread_mutex_unlock(&s->pg[j].mu);
	}
	hpr_reclaim(s->r, 0, NULL);
}

static void op_fault(struct sk_region *s, size_t a, size_t n, uint64_t *rng)
{
	int rc = hpr_fault_in(s->r, a * s->ps, n * s->ps);

	if (rc) {
		if (!refusal(s, s->be, rc, OP_FAULT))
			flunk("fault_in", s, rc);
		if (worker && rc == -ENOMEM)
			relieve(s, a, n, rng);
		return;
	}
	for (size_t i = a; i < a + n; i++) {
		bool was = s->pg[i].st == SK_PRESENT;

		check_page(s, i);
		if (!was || sk_rand(rng) % 2)
			write_page(s, i);
	}
}

static void op_release(struct sk_region *s, size_t a, size_t n)
{
	int rc = hpr_release_lazy(s->r, a * s->ps, n * s->ps);

	if (rc == -EPERM && (s->flags & HPR_F_LOCK))
		return;
	if (rc) {
		flunk("release_lazy", s, rc);
		return;
	}
	for (size_t i = a; i < a + n; i++) {
		if (s->pg[i].st == SK_PRESENT)
			s->pg[i].st = SK_LAZY;
		s->pg[i].c.zero = true;
		s->pg[i].last = OP_RELEASE;
	}
}

static void op_collapse(struct sk_region *s, size_t a, size_t n)
{
	size_t got = 0;
	int rc = hpr_collapse(s->r, a * s->ps, n * s->ps, &got);

	if (rc && !refusal(s, s->be, rc, OP_COLLAPSE))
		flunk("collapse", s, rc);
	if (got > n * s->ps)
		flunk("collapse reported more than the range", s, 0);
	for (size_t i = a; i < a + n; i++)
		if (s->pg[i].st == SK_PRESENT)
			check_page(s, i);
}

/* ---- region operations without page locks ---- */

static void op_reclaim(struct sk_region *s, uint64_t *rng)
{
	size_t max = sk_rand(rng) % 2 ? 0 : (1 + sk_rand(rng) % 4) * s->ps, got = 0;
	int rc = hpr_reclaim(s->r, max, &got);

	if (rc)
		flunk("reclaim", s, rc);
	else if (max && got > max)
		flunk("reclaim gave back more than asked", s, 0);
}

static void op_prefault(struct sk_region *s, size_t a, size_t n, uint64_t *rng)
{
	int rc = hpr_prefault_start(s->r, a * s->ps, n * s->ps);

	if (rc && rc != -EBUSY)
		flunk("prefault_start", s, rc);
	if (sk_rand(rng) % 4 == 0)
		hpr_prefault_cancel(s->r);
	if (sk_rand(rng) % 2)
		return; /* left running: the next save, load, fork or destroy meets it */
	rc = hpr_prefault_wait(s->r);
	if (rc && rc != -ECANCELED && !refusal(s, s->be, rc, OP_PREFAULT))
		flunk("prefault_wait", s, rc);
}

static void op_stats(struct sk_region *s)
{
	struct hpr_stats st;
	int rc = hpr_stats(s->r, &st);

	if (rc) {
		if (!refusal(s, s->be, rc, OP_STATS))
			flunk("stats", s, rc);
		return;
	}
	if (st.pages_present > st.pages_total || st.pages_lazy > st.pages_total)
		flunk("stats: more pages present or lazy than the region has", s, 0);
	/* issue 15 #2: neighbours merged into the region's VMA were counted */
	if (!(o.avoid & SK_AVOID(2)) && (st.resident > st.size || st.huge_mapped > st.size)) {
		fprintf(stderr, "soak: stats of %s: resident %zu huge %zu > size %zu\n", s->name,
			st.resident, st.huge_mapped, st.size);
		flunk("stats counts memory outside the region", s, 0);
	}
}

/* ---- exclusive operations: region write-locked ---- */

static void snap_drop(struct sk_region *s)
{
	if (s->snap_fd >= 0)
		close(s->snap_fd);
	s->snap_fd = -1;
	if (s->snap_path[0])
		unlink(s->snap_path);
	s->snap_path[0] = 0;
	s->has_snap = false;
}

static unsigned snap_flags(uint64_t *rng, bool save)
{
	static const unsigned f[] = { 0, HPR_SNAP_NO_URING, HPR_SNAP_NO_DIRECT, HPR_SNAP_SYNC };
	unsigned fl = f[sk_rand(rng) % (save ? 4 : 3)];

	/* finding 20: at the memory cgroup's limit an io_uring load can spin
	 * in io_uring_submit for minutes (the 600 s soak's worker ran 720 s) */
	if (worker && (o.avoid & SK_AVOID(20)))
		fl |= HPR_SNAP_NO_URING;
	return fl;
}

static bool op_save(struct sk_region *s, uint64_t *rng)
{
	/* the worker's snapshots go to disk: tmpfs pages would be charged
	 * to its cgroup with nothing to reclaim them */
	const char *dir = worker || sk_rand(rng) % 2 ? o.disk_dir : o.snap_dir;
	int fd, rc;

	hpr_prefault_wait(s->r);
	snap_drop(s);
	char path[sizeof(s->snap_path)];

	snprintf(path, sizeof(path), "%s/%s.snap", dir, s->name);
	memcpy(s->snap_path, path, sizeof(path));
	fd = open(s->snap_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (!(errno == ENOMEM && worker))
			flunk("open snapshot", s, -errno);
		return false;
	}
	rc = hpr_save(s->r, fd, snap_flags(rng, true));
	if (rc) {
		close(fd);
		snap_drop(s);
		if (!(rc == -ENOMEM && worker) && !refusal(s, s->be, rc, OP_SAVE))
			flunk("save", s, rc);
		return false;
	}
	for (size_t i = 0; i < s->npages; i++) {
		struct sk_page *p = &s->pg[i];

		/* released pages are holes that load as zeros -- unless a
		 * prefault has faulted them in again since (old or zeros,
		 * saved as such); pages faulted in after a failed load are
		 * saved as whatever they hold */
		if (p->st == SK_ABSENT)
			sk_cand_zero(&s->snap[i]);
		else
			s->snap[i] = p->c;
		if (p->st != SK_PRESENT)
			s->snap[i].zero = true;
		if (p->st == SK_PRESENT)
			check_page(s, i); /* the save left it alone */
	}
	s->has_snap = true;
	/* issue 15 #10: a hugetlb region's pages stay pinned while the
	 * snapshot fd is open; a VMM keeps it open */
	if (o.avoid & SK_AVOID(10))
		close(fd);
	else
		s->snap_fd = fd;
	return true;
}

static bool op_load(struct sk_region *s, uint64_t *rng)
{
	char copy[320];
	size_t changed = 0;
	int fd, rc;

	if (!s->has_snap)
		return false;
	hpr_prefault_wait(s->r);
	copy[0] = 0;
	/* issue 15 #5: a copy whose zero blocks are holes is the same file.
	 * Not in the cgroup worker: the copy's own tmpfs pages would be
	 * charged to its full cgroup, and the copy tool, not the library,
	 * fails there (-ENOMEM, -EIO) */
	if (!(o.avoid & SK_AVOID(5)) && !worker && sk_rand(rng) % 2) {
		snprintf(copy, sizeof(copy), "%s.copy", s->snap_path);
		rc = sk_sparse_copy(s->snap_path, copy);
		if (rc) {
			flunk("sparse copy of the snapshot", s, rc);
			unlink(copy);
			return false;
		}
	}
	fd = open(copy[0] ? copy : s->snap_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (!(errno == ENOMEM && worker))
			flunk("open snapshot", s, -errno);
		return false;
	}
	rc = hpr_load(s->r, fd, snap_flags(rng, false), &changed);
	close(fd);
	if (copy[0])
		unlink(copy);
	for (size_t i = 0; i < s->npages; i++) {
		struct sk_page *p = &s->pg[i];

		p->last = OP_LOAD;
		p->prev = p->c.nk ? p->c.k[0] : 0;
		if (rc) {
			/* each page: as before, or as saved */
			sk_cand_union(&p->c, &s->snap[i]);
			p->st = SK_UNKNOWN;
			continue;
		}
		p->c = s->snap[i];
		if (sk_cand_exact(&p->c))
			p->st = SK_PRESENT, check_page(s, i);
		else if (!p->c.nk && !p->c.any)
			p->st = SK_ABSENT;
		else
			p->st = SK_UNKNOWN;
	}
	if (rc && !refusal(s, s->be, rc, OP_LOAD))
		flunk("load", s, rc);
	return true;
}

static void op_recreate(struct sk_region *s, uint64_t *rng)
{
	region_close(s);
	region_open(s, rng); /* the snapshot stays: it loads into the new one */
}

/* ---- a short-lived region: the fork child's, and pool churn ---- */

/* Create, fault in, fill, check, release, reclaim, fault in again, check
 * old-or-zero, destroy. Returns the number of failures. */
static int churn(enum hpr_backend be, const char *path, size_t npages, unsigned flags,
		 uint64_t *rng)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	struct sk_cand *m;
	size_t ps;
	int rc, bad = 0;
	uint64_t before = cnt.failures;

	t_config(&c, be, path, npages * 2 * MiB, 1 + (unsigned)(sk_rand(rng) % 2), flags);
	c.name = "churn";
	rc = create(&c, &r);
	if (rc) {
		if (!refusal(NULL, be, rc, OP_CHURN))
			flunk("churn create", NULL, rc);
		return (int)(cnt.failures - before);
	}
	map_lock(false); /* fault-in starts threads: their stacks are mappings */
	ps = hpr_page_size(r);
	m = calloc(npages, sizeof(*m));
	/* a fresh hugetlb region's pages are reserved: no -ENOMEM here --
	 * unless pages a closed snapshot fd still pins (issue 15 #10) are
	 * counted as free for a moment */
	rc = hpr_fault_in(r, 0, hpr_size(r));
	if (rc &&
	    !(rc == -EOPNOTSUPP && be != HPR_BACKEND_HUGETLB && refusal(NULL, be, rc, OP_CHURN)) &&
	    !(rc == -ENOMEM && (o.avoid & SK_AVOID(10)) && refusal(NULL, be, rc, OP_CHURN))) {
		flunk("churn fault_in of a fresh region", NULL, rc);
		goto out;
	}
	if (rc)
		goto out;
	for (size_t i = 0; i < npages; i++) {
		char *p = (char *)hpr_base(r) + i * ps;

		sk_cand_zero(&m[i]);
		check("churn", p, ps, &m[i], i);
		sk_cand_key(&m[i], new_key());
		sk_fill(p, ps, m[i].k[0]);
	}
	rc = hpr_release_lazy(r, 0, hpr_size(r));
	if (rc && !(rc == -EPERM && (flags & HPR_F_LOCK)))
		flunk("churn release", NULL, rc);
	else if (!rc)
		for (size_t i = 0; i < npages; i++)
			m[i].zero = true;
	if ((rc = hpr_reclaim(r, 0, NULL)))
		flunk("churn reclaim", NULL, rc);
	rc = hpr_fault_in(r, 0, hpr_size(r));
	if (rc && !refusal(NULL, be, rc, OP_CHURN))
		flunk("churn fault_in after reclaim", NULL, rc);
	for (size_t i = 0; !rc && i < npages; i++)
		check("churn", (char *)hpr_base(r) + i * ps, ps, &m[i], i);
out:
	map_unlock();
	free(m);
	if ((rc = hpr_destroy(r)))
		flunk("churn destroy", NULL, rc);
	bad = (int)(cnt.failures - before);
	return bad;
}

static void op_churn(uint64_t *rng)
{
	/* mostly hugetlb: 2-6 pages on top of the region's 16 drain the pool */
	enum hpr_backend be = !o.no_hugetlb && sk_rand(rng) % 2 ? HPR_BACKEND_HUGETLB :
			      sk_rand(rng) % 2			? HPR_BACKEND_THP :
								  HPR_BACKEND_SHMEM;

	pthread_rwlock_rdlock(&churn_lk);
	churn(be, be == HPR_BACKEND_SHMEM ? o.shmem_dir : NULL, 2 + sk_rand(rng) % 5, 0, rng);
	pthread_rwlock_unlock(&churn_lk);
}

/* ---- fork ---- */

struct child_report {
	uint64_t verified, lost;
};

static void lock_all(bool wr)
{
	for (unsigned i = 0; i < nregs; i++)
		wr ? pthread_rwlock_wrlock(&regs[i].lk) : pthread_rwlock_unlock(&regs[i].lk);
}

/* In the child: read the inherited regions (the parent holds them still
 * until we say we are done), then a region of our own. Only this thread
 * exists here. */
static int child_main(int wfd, uint64_t *rng)
{
	struct child_report rep = { 0, 0 };
	static const enum hpr_backend bes[] = { HPR_BACKEND_THP, HPR_BACKEND_SHMEM,
						HPR_BACKEND_HUGETLB };
	enum hpr_backend be = bes[sk_rand(rng) % (o.no_hugetlb ? 2 : 3)];
	uint64_t before = cnt.lost;
	/* issue 15 #1: in a child, PAGEMAP_SCAN reads the parent's page
	 * tables, so a new region's fault-in takes its huge pages for small
	 * ones; with HPR_F_FALLBACK it accepts them */
	unsigned flags = (o.avoid & SK_AVOID(1)) ? HPR_F_FALLBACK : 0;
	int bad;

	for (unsigned r = 0; r < nregs; r++) {
		struct sk_region *s = &regs[r];

		if (!s->r)
			continue;
		/* docs/release.md: a private file-backed region is
		 * MADV_DONTFORK, the child does not have it */
		if (s->be != HPR_BACKEND_THP && !(s->flags & HPR_F_SHARED)) {
			if (!madvise(hpr_base(s->r), s->size, MADV_NORMAL) || errno != ENOMEM) {
				fprintf(stderr, "soak: FAIL fork child has private region %s\n",
					s->name);
				rep.lost += s->size;
			}
			continue;
		}
		for (size_t i = 0; i < s->npages; i++)
			if (s->pg[i].st == SK_PRESENT) {
				check_page(s, i);
				rep.verified += s->ps;
			}
	}
	rep.lost = cnt.lost - before;
	if (write(wfd, &rep, sizeof(rep)) != sizeof(rep))
		return 2;
	close(wfd);
	bad = churn(be, be == HPR_BACKEND_SHMEM ? o.shmem_dir : NULL, 2, flags, rng);
	return bad ? 3 : 0;
}

static void op_fork(uint64_t *rng)
{
	struct child_report rep;
	int p[2], st = 0;
	pid_t pid;
	double limit;

	pthread_mutex_lock(&fork_mu);
	if (o.avoid & SK_AVOID(1))
		pthread_rwlock_wrlock(&churn_lk);
	lock_all(true);
	if (o.avoid & SK_AVOID(1)) {
		/* today's library has no atfork handling: fork only while it
		 * holds no lock (no background job running) */
		for (unsigned i = 0; i < nregs; i++)
			if (regs[i].r)
				hpr_prefault_wait(regs[i].r);
	} else {
		/* fork in the middle of a background prefault */
		struct sk_region *s = &regs[sk_rand(rng) % nregs];

		if (s->r)
			hpr_prefault_start(s->r, 0, s->size);
	}
	if (pipe2(p, O_CLOEXEC)) {
		flunk("pipe", NULL, -errno);
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		in_child = true; /* only this thread: map_lk may be held by none */
		close(p[0]);
		_exit(child_main(p[1], rng));
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		flunk("fork", NULL, -errno);
		goto out;
	}
	if (read(p[0], &rep, sizeof(rep)) == sizeof(rep)) {
		ADD(verified, rep.verified);
		ADD(lost, rep.lost);
	}
	close(p[0]);
	lock_all(false);
	if (o.avoid & SK_AVOID(1))
		pthread_rwlock_unlock(&churn_lk);
	/* a child stuck on a lock a parent thread held at fork (issue 15 #1)
	 * is a failure, not a hang of the soak */
	for (limit = now() + 60; waitpid(pid, &st, WNOHANG) == 0;) {
		if (now() > limit) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			fprintf(stderr, "soak: FAIL fork child did not finish in 60 s\n");
			break;
		}
		nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "soak: FAIL fork child: %s %d\n",
			WIFEXITED(st) ? "exit status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		ADD(failures, 1);
	}
	pthread_mutex_unlock(&fork_mu);
	return;
out:
	lock_all(false);
	if (o.avoid & SK_AVOID(1))
		pthread_rwlock_unlock(&churn_lk);
	pthread_mutex_unlock(&fork_mu);
}

/* ---- the threads ---- */

static enum sk_op pick(uint64_t *rng)
{
	unsigned total = 0, x;
	enum sk_op op;

	for (op = 0; op < SK_NOPS; op++)
		total += op_weight[op];
	x = (unsigned)(sk_rand(rng) % total);
	for (op = 0; x >= op_weight[op]; op++)
		x -= op_weight[op];
	if ((worker && op >= OP_CHURN) || (op == OP_FORK && o.no_fork))
		return OP_VERIFY;
	if (op_gap_ms[op]) {
		uint64_t t = (uint64_t)(now() * 1000), last = atomic_load(&last_ms[op]);

		if (t - last < op_gap_ms[op] ||
		    !atomic_compare_exchange_strong(&last_ms[op], &last, t))
			return OP_VERIFY;
	}
	return op;
}

static void one_region_op(enum sk_op op, struct sk_region *s, uint64_t *rng);

static void one_op(uint64_t *rng)
{
	enum sk_op op = pick(rng);
	struct sk_region *s = &regs[sk_rand(rng) % nregs];

	if (op == OP_CHURN || op == OP_FORK) {
		op == OP_CHURN ? op_churn(rng) : op_fork(rng);
		ADD(ops[op], 1);
		return;
	}
	map_lock(op == OP_RECREATE && s->be == HPR_BACKEND_HUGETLB);
	one_region_op(op, s, rng);
	map_unlock();
}

static void one_region_op(enum sk_op op, struct sk_region *s, uint64_t *rng)
{
	size_t a, n;

	if (op == OP_SAVE || op == OP_LOAD || op == OP_RECREATE) {
		pthread_rwlock_wrlock(&s->lk);
		if (op == OP_RECREATE)
			op_recreate(s, rng);
		else if (s->r && (op == OP_SAVE ? op_save(s, rng) : op_load(s, rng)))
			ADD(ops[op], 1);
		pthread_rwlock_unlock(&s->lk);
		if (op == OP_RECREATE)
			ADD(ops[op], 1);
		return;
	}
	pthread_rwlock_rdlock(&s->lk);
	if (!s->r) {
		pthread_rwlock_unlock(&s->lk);
		return;
	}
	a = sk_rand(rng) % s->npages;
	n = 1 + sk_rand(rng) % 4;
	if (a + n > s->npages)
		n = s->npages - a;
	switch (op) {
	case OP_RECLAIM:
		op_reclaim(s, rng);
		break;
	case OP_PREFAULT:
		op_prefault(s, a, n, rng);
		break;
	case OP_STATS:
		op_stats(s);
		break;
	default:
		lock_pages(s, a, n);
		if (op == OP_FAULT)
			op_fault(s, a, n, rng);
		else if (op == OP_RELEASE)
			op_release(s, a, n);
		else if (op == OP_COLLAPSE)
			op_collapse(s, a, n);
		for (size_t i = a; i < a + n; i++)
			if (s->pg[i].st == SK_PRESENT && op == OP_WRITE)
				write_page(s, i);
			else if (s->pg[i].st == SK_PRESENT && op == OP_VERIFY)
				check_page(s, i);
		unlock_pages(s, a, n);
	}
	pthread_rwlock_unlock(&s->lk);
	ADD(ops[op], 1);
}

static void *thread_main(void *arg)
{
	uint64_t rng = sk_mix(o.seed * 1000003 + (uintptr_t)arg) | 1;

	while (!atomic_load(&stop) && now() < deadline)
		one_op(&rng);
	return NULL;
}

/* Fault in, check, release and reclaim every page in turn, so the check
 * fits in a dry pool or a full cgroup; then destroy. */
static void final_check(struct sk_region *s)
{
	if (!s->r)
		return;
	hpr_prefault_wait(s->r);
	for (size_t i = 0; i < s->npages; i++) {
		int rc = hpr_fault_in(s->r, i * s->ps, s->ps);

		for (unsigned k = 0; rc == -ENOMEM && k < nregs; k++)
			if (regs[k].r)
				hpr_reclaim(regs[k].r, 0, NULL);
		if (rc == -ENOMEM)
			rc = hpr_fault_in(s->r, i * s->ps, s->ps);
		if (rc) {
			if (!refusal(s, s->be, rc, OP_FAULT))
				flunk("final fault_in", s, rc);
			ADD(unverifiable, s->ps);
			continue;
		}
		check_page(s, i);
		if (!(s->flags & HPR_F_LOCK) && !hpr_release_lazy(s->r, i * s->ps, s->ps))
			hpr_reclaim(s->r, 0, NULL);
	}
	region_close(s);
}

/* A crash says where (sanitizer builds report it themselves). */
static void on_sigsegv(int sig)
{
	void *bt[32];
	int n = backtrace(bt, 32);

	(void)sig;
	(void)!write(2, "soak: FAIL SIGSEGV at\n", 22);
	backtrace_symbols_fd(bt, n, 2);
	/* the harness's SIGTERM handler puts the pool and sysfs back (in
	 * the soak's main process) and dies */
	signal(SIGSEGV, SIG_DFL);
	raise(SIGTERM);
	_exit(4);
}

static void on_sigbus(int sig)
{
	static const char bus[] = "soak: FAIL SIGBUS: a fault the library should have "
				  "refused with -ENOMEM\n";

	(void)sig;
	(void)!write(2, bus, sizeof(bus) - 1);
	raise(SIGTERM); /* as on_sigsegv() */
	_exit(2);
}

static void run_threads(unsigned n)
{
	pthread_t th[64];
	pthread_attr_t at;

	deadline = now() + o.duration;
	pthread_attr_init(&at);
	if (worker) {
		/* populated before the worker joins its cgroup: a stack page
		 * faulted at the limit would wait for memory (OOM killer off) */
		pthread_attr_setstacksize(&at, 1 * MiB);
	}
	for (unsigned i = 0; i < n; i++) {
		if (worker) {
			void *stk = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

			if (stk == MAP_FAILED)
				abort();
			pthread_attr_setstack(&at, stk, MiB);
		}
		if (pthread_create(&th[i], &at, thread_main, (void *)(uintptr_t)i))
			abort();
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_attr_destroy(&at);
}

/* ---- the cgroup worker ---- */

static pid_t worker_spawn(const char *cg, int *rfd)
{
	char seed[32], dur[32], avoid[16], rep[16];
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	snprintf(seed, sizeof(seed), "%" PRIu64, o.seed + 1);
	snprintf(dur, sizeof(dur), "%g", o.duration);
	snprintf(avoid, sizeof(avoid), "%#x", o.avoid);
	snprintf(rep, sizeof(rep), "%d", p[1]);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* the soak died: so does its worker */
		execl("/proc/self/exe", "soak", "--cgroup-worker", cg, "--report-fd", rep, "--seed",
		      seed, "--duration", dur, "--threads", "2", "--avoid-mask", avoid,
		      "--shmem-dir", o.shmem_dir, "--disk-dir", o.disk_dir, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

static void worker_collect(pid_t pid, int rfd, const char *cg)
{
	struct sk_counts w;
	int st = 0;
	double limit = now() + 120;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now() > limit) {
			bool oom = sk_cgroup_unstick(cg);

			/* waiting at the limit with the OOM killer off is the
			 * kernel's (a touch of its own memory blocks until
			 * something is freed), not a hang of the library: lift
			 * the limit and let it finish */
			if (oom) {
				fprintf(stderr, "soak: NOTE the cgroup worker was waiting at the "
						"memory limit (OOM killer off): limit lifted\n");
			} else {
				fprintf(stderr, "soak: FAIL cgroup worker did not finish\n");
				ADD(failures, 1);
			}
			limit = now() + 30;
			if (waitpid(pid, &st, WNOHANG) == 0) {
				sleep(10);
				kill(pid, SIGKILL);
			}
		}
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
	if (read(rfd, &w, sizeof(w)) == sizeof(w)) {
		for (int i = 0; i < SK_NOPS; i++) {
			ADD(ops[i], w.ops[i]);
			ADD(refused[i], w.refused[i]);
		}
		ADD(verified, w.verified);
		ADD(lost, w.lost);
		ADD(unverifiable, w.unverifiable);
		ADD(failures, w.failures);
	} else {
		fprintf(stderr, "soak: FAIL the cgroup worker sent no report\n");
		ADD(failures, 1);
	}
	close(rfd);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "soak: FAIL cgroup worker: %s %d\n",
			WIFEXITED(st) ? "exit status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		ADD(failures, 1);
	}
}

static int worker_main(void)
{
	/* everything malloc will need, faulted in before joining: a page
	 * faulted by the program at the limit waits for memory (OOM killer
	 * off), and the soak's threads would wait with it */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
	{
		void *pad = malloc(16 * MiB);

		if (pad)
			memset(pad, 1, 16 * MiB);
		free(pad);
	}
	/* its regions are twice the limit (main sets 48 MiB) */
	region_add("cg-thp", HPR_BACKEND_THP, NULL, 64 * MiB, 2 * MiB);
	/* new defect (docs/soak.md): hpr_save reads a partly resident shmem
	 * page whole, which allocates the rest: at the limit it waits */
	if (!(o.avoid & SK_AVOID(21)))
		region_add("cg-shmem", HPR_BACKEND_SHMEM, o.shmem_dir, 32 * MiB, 2 * MiB);
	/* start the library's threads before joining (their stacks) */
	for (unsigned i = 0; i < nregs; i++)
		if (regs[i].r && !hpr_fault_in(regs[i].r, 0, regs[i].ps)) {
			check_page(&regs[i], 0);
			write_page(&regs[i], 0);
		}
	if (sk_cgroup_join(o.cg_dir)) {
		fprintf(stderr, "soak[cgroup]: FAIL cannot join %s\n", o.cg_dir);
		return 1;
	}
	run_threads(o.threads);
	for (unsigned i = 0; i < nregs; i++) {
		final_check(&regs[i]);
		region_free(&regs[i]);
	}
	summary("soak[cgroup]", now() - t0, 0);
	if (write(o.report_fd, &cnt, sizeof(cnt)) != sizeof(cnt))
		return 1;
	return cnt.failures || cnt.lost ? 1 : 0;
}

/* ---- main ---- */

static unsigned parse_avoid(const char *s)
{
	unsigned m = 0;
	char *e;

	if (!strcmp(s, "known"))
		return SK_AVOID_KNOWN;
	if (!strcmp(s, "none"))
		return 0;
	while (*s) {
		unsigned long n = strtoul(s, &e, 10);

		if (e == s || n > 31) {
			fprintf(stderr, "soak: --avoid takes issue 15 item numbers: 1,2,3,4,5,10, "
					"'known' or 'none'\n");
			exit(2);
		}
		m |= 1u << n;
		s = *e == ',' ? e + 1 : e;
	}
	return m;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: soak [--seed N] [--duration SECONDS] [--threads N] [--avoid LIST]\n"
		"            [--pool PAGES] [--no-cgroup] [--no-hugetlb] [--no-fork] [--explain]\n"
		"  --avoid LIST  switch off the parts that trip known defects (issue 15\n"
		"                items, e.g. 1,10; 'known': all of them; default none)\n"
		"  --explain     on a loss, say whose data the lost block holds\n"
		"see docs/soak.md\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seed", 1, 0, 's' },		{ "duration", 1, 0, 'd' },
		{ "threads", 1, 0, 't' },	{ "avoid", 1, 0, 'a' },
		{ "pool", 1, 0, 'p' },		{ "no-cgroup", 0, 0, 'C' },
		{ "no-hugetlb", 0, 0, 'H' },	{ "no-fork", 0, 0, 'F' },
		{ "cgroup-worker", 1, 0, 'W' }, { "report-fd", 1, 0, 'R' },
		{ "avoid-mask", 1, 0, 'M' },	{ "shmem-dir", 1, 0, 'S' },
		{ "disk-dir", 1, 0, 'D' },	{ "help", 0, 0, 'h' },
		{ "explain", 0, 0, 'E' },	{ 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			o.seed = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			o.duration = strtod(optarg, NULL);
			break;
		case 't':
			o.threads = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'a':
			o.avoid = parse_avoid(optarg);
			break;
		case 'p':
			o.pool_pages = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'C':
			o.no_cgroup = true;
			break;
		case 'H':
			o.no_hugetlb = true;
			break;
		case 'F':
			o.no_fork = true;
			break;
		case 'E':
			o.explain = true;
			break;
		case 'W':
			o.cg_dir = optarg, worker = true;
			break;
		case 'R':
			o.report_fd = atoi(optarg);
			break;
		case 'M':
			o.avoid = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			o.shmem_dir = optarg;
			break;
		case 'D':
			o.disk_dir = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || !o.threads || o.threads > 64 || o.duration <= 0)
		usage();
}

static void summary(const char *who, double secs, int bad)
{
	char line[1024];
	int n = 0;

	for (int i = 0; i < SK_NOPS; i++) {
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %" PRIu64, op_name[i],
			      cnt.ops[i]);
		if (cnt.refused[i])
			n += snprintf(line + n, sizeof(line) - (size_t)n, " (%" PRIu64 " refused)",
				      cnt.refused[i]);
	}
	printf("%s: %s seed %" PRIu64 ", %.1f s, %u threads; ops:%s; %.2f GiB verified, "
	       "%" PRIu64 " bytes lost, %" PRIu64 " MiB not checkable, %" PRIu64
	       " failures; pool, mounts, fds %s\n",
	       who, cnt.failures || cnt.lost || bad ? "FAIL" : "PASS", o.seed, secs, o.threads,
	       line, (double)cnt.verified / (double)GiB, cnt.lost, cnt.unverifiable / MiB,
	       cnt.failures, bad ? "NOT as at the start" : "as at the start");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigbus };
	struct sk_baseline base;
	char cg[512] = "";
	pid_t wpid = -1;
	int rfd = -1, bad, mounts0;
	double secs;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv);
	sigaction(SIGBUS, &sa, NULL);
	if (!T_SANITIZED)
		signal(SIGSEGV, on_sigsegv);
	t0 = now();
	if (worker)
		return worker_main();

	{
		char av[96] = "none";
		size_t n = 0;

		for (unsigned k = 0; k < 32; k++)
			if (o.avoid & SK_AVOID(k))
				n += (size_t)snprintf(av + n, sizeof(av) - n, "%s%u", n ? "," : "",
						      k);
		printf("soak: seed %" PRIu64 " (replay with --seed %" PRIu64 "), %g s, %u "
		       "threads, avoiding %s (docs/soak.md)\n",
		       o.seed, o.seed, o.duration, o.threads, av);
	}

	t_harness_begin(T_NEED_ROOT);
	mounts0 = sk_count_mounts();
	if (sk_system_setup(&o))
		return 1;
	sk_baseline(&base);    /* the pool as the soak set it */
	base.mounts = mounts0; /* and the mounts before the soak's own */
	if (T_SANITIZED && !o.no_cgroup) {
		/* ASan's allocator and shadow would be charged to the cgroup
		 * and abort at its limit */
		fprintf(stderr, "soak: sanitizer build: no cgroup worker\n");
		o.no_cgroup = true;
	}
	if (!o.no_cgroup) {
		int rc = sk_cgroup_create(cg, sizeof(cg), 48 * MiB);

		if (rc) {
			fprintf(stderr, "soak: no memory cgroup (%s): that part is skipped\n",
				strerror(-rc));
			if (getenv("HPR_TEST_NO_SKIP"))
				ADD(failures, 1);
			cg[0] = 0;
		} else {
			wpid = worker_spawn(cg, &rfd);
		}
	}
	region_add("thp", HPR_BACKEND_THP, NULL, 64 * MiB, 2 * MiB);
	region_add("shmem", HPR_BACKEND_SHMEM, o.shmem_dir, 64 * MiB, 2 * MiB);
	region_add("memfd", HPR_BACKEND_SHMEM, NULL, 32 * MiB, 2 * MiB);
	if (!o.no_hugetlb) /* 16 of the pool's 20: churn and reclaim run it dry */
		region_add("hugetlb", HPR_BACKEND_HUGETLB, NULL, 32 * MiB, 2 * MiB);
	run_threads(o.threads);
	fprintf(stderr, "soak: threads done at %.1f s\n", now() - t0);
	for (unsigned i = 0; i < nregs; i++)
		final_check(&regs[i]);
	fprintf(stderr, "soak: final check done at %.1f s\n", now() - t0);
	for (unsigned i = 0; i < nregs; i++)
		region_free(&regs[i]);
	if (wpid > 0) {
		summary("soak[main]", now() - t0, 0);
		worker_collect(wpid, rfd, cg);
	}
	if (cg[0] && sk_cgroup_remove(cg))
		ADD(failures, 1);
	secs = now() - t0;
	bad = sk_system_teardown(&o);
	bad += sk_baseline_check(&base, o.avoid & SK_AVOID(10));
	summary("soak", secs, bad);
	return cnt.failures || cnt.lost || bad ? 1 : 0;
}
