/* SPDX-License-Identifier: MIT */
/*
 * Region lifecycle: config validation, hpr_create/hpr_destroy, getters.
 * The backends themselves (mappings, files, the AUTO chain) are in backend.c.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "backend.h"
#include "rpool.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void hpr_config_init_sized(struct hpr_config *cfg, size_t struct_size)
{
	if (!cfg)
		return;
	memset(cfg, 0, struct_size);
	cfg->struct_size = struct_size;
	cfg->backend = HPR_BACKEND_AUTO;
	cfg->numa_policy = HPR_NUMA_DEFAULT;
}

/* Copy a caller's config of any version into ours (libbpf's OPTS_VALID). */
static int config_copy(const struct hpr_config *in, struct hpr_config *c)
{
	size_t sz;

	if (!in)
		return hpr__fail(-EINVAL, "hpr_create: config is NULL");
	sz = in->struct_size;
	if (sz < offsetof(struct hpr_config, workers) + sizeof(unsigned))
		return hpr__fail(-EINVAL, "hpr_create: config was not initialised: "
					  "call hpr_config_init() first");
	if (sz > sizeof(*c)) {
		const unsigned char *extra = (const unsigned char *)in + sizeof(*c);

		for (size_t i = 0; i < sz - sizeof(*c); i++)
			if (extra[i])
				return hpr__fail(-E2BIG,
						 "hpr_create: the config sets fields unknown "
						 "to hpregion %s (byte %zu of %zu): rebuild "
						 "against this library's header",
						 hpr_version(), sizeof(*c) + i, sz);
		sz = sizeof(*c);
	}
	hpr_config_init_sized(c, sizeof(*c));
	memcpy(c, in, sz);
	c->struct_size = sizeof(*c);
	return 0;
}

/*
 * A region name becomes part of a file name in the caller's directory
 * (hpr-NAME-PID-N), a memfd name and a VMA name, and hpr stat shows it to
 * whoever inspects the process. So it is one path component (no '/', not
 * "." or "..": a name with a '/' could lead the backing file through a
 * symlink off the mount that was checked), printable ASCII without spaces
 * (no terminal escapes), and none of \ ` $ [ ] that the kernel refuses in
 * anonymous VMA names (PR_SET_VMA_ANON_NAME). 1 to 40 bytes.
 */
static int name_check(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > 40)
		return hpr__fail(-EINVAL,
				 "hpr_create: name must be 1 to 40 bytes long, "
				 "not %zu (NULL gives \"region\")",
				 n);
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return hpr__fail(-EINVAL,
				 "hpr_create: name \"%s\" is not allowed: it must "
				 "be a single file name component",
				 name);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (ch == '/')
			return hpr__fail(-EINVAL,
					 "hpr_create: name has a '/' at byte %zu: it "
					 "must be a single file name component "
					 "(letters, digits, -_.:+=@,%%)",
					 i);
		if (ch <= 0x20 || ch >= 0x7f || strchr("\\`$[]", ch))
			return hpr__fail(-EINVAL,
					 "hpr_create: name has byte %#04x at %zu: "
					 "use printable ASCII without spaces or \\ ` $ "
					 "[ ] (letters, digits, -_.:+=@,%%)",
					 ch, i);
	}
	return 0;
}

/* HPR_F_ATTACH, HPR_F_ATTACH_ONLY: what a kept region needs (attach.c). */
static int attach_check(const struct hpr_config *c)
{
	const char *f = c->flags & HPR_F_ATTACH ? "HPR_F_ATTACH" : "HPR_F_ATTACH_ONLY";

	if ((c->flags & HPR__F_ATTACHING) == HPR__F_ATTACHING)
		return hpr__fail(-EINVAL, "hpr_create: HPR_F_ATTACH and HPR_F_ATTACH_ONLY exclude "
					  "each other (ATTACH creates what is missing, "
					  "ATTACH_ONLY does not)");
	if (c->backend == HPR_BACKEND_THP)
		return hpr__fail(-EINVAL,
				 "hpr_create: %s: THP regions are anonymous memory, there "
				 "is no file to keep: use HPR_BACKEND_SHMEM on a tmpfs "
				 "mounted huge= or HPR_BACKEND_HUGETLB on hugetlbfs",
				 f);
	if (!c->path || !c->name)
		return hpr__fail(-EINVAL,
				 "hpr_create: %s needs path (a directory on a tmpfs "
				 "mounted huge= or on hugetlbfs) and name (the kept "
				 "file's name in it); a memfd dies with its process",
				 f);
	if (c->flags & HPR_F_FALLBACK)
		return hpr__fail(-EINVAL,
				 "hpr_create: %s and HPR_F_FALLBACK exclude each other: "
				 "a kept region is exactly what its stamp says, never "
				 "another backend or base pages",
				 f);
	if ((c->flags & HPR_F_LOCK) && !(c->flags & HPR_F_SHARED))
		return hpr__fail(-EINVAL,
				 "hpr_create: %s with HPR_F_LOCK needs HPR_F_SHARED: "
				 "mlock write-faults a private attach, which would copy "
				 "every page of the kept file",
				 f);
	return 0;
}

static int config_check(const struct hpr_config *c)
{
	int rc;

	if (c->flags & ~HPR__F_ALL)
		return hpr__fail(-EINVAL, "hpr_create: unknown flag bits %#x",
				 c->flags & ~HPR__F_ALL);
	if ((c->flags & HPR_F_PREFAULT) && (c->flags & HPR_F_PREFAULT_ASYNC))
		return hpr__fail(-EINVAL, "hpr_create: HPR_F_PREFAULT and "
					  "HPR_F_PREFAULT_ASYNC exclude each other");
	if ((unsigned)c->backend > HPR_BACKEND_HUGETLB)
		return hpr__fail(-EINVAL, "hpr_create: unknown backend %d", (int)c->backend);
	if (!c->size)
		return hpr__fail(-EINVAL, "hpr_create: size is 0");
	if (c->size > ((size_t)1 << 56))
		return hpr__fail(-EINVAL,
				 "hpr_create: size %#zx is beyond the address "
				 "space",
				 c->size);
	if (c->page_size & (c->page_size - 1))
		return hpr__fail(-EINVAL, "hpr_create: page_size %zu is not a power of two",
				 c->page_size);
	if (c->backend == HPR_BACKEND_THP && (c->flags & HPR_F_SHARED))
		return hpr__fail(-EINVAL, "hpr_create: THP regions are private "
					  "anonymous memory; use HPR_BACKEND_SHMEM for "
					  "HPR_F_SHARED");
	if (c->name && (rc = name_check(c->name)))
		return rc;
	if ((c->flags & HPR__F_ATTACHING) && (rc = attach_check(c)))
		return rc;
	if (c->release_delay_ms > HPR__RELEASE_DELAY_MAX_MS)
		return hpr__fail(-EINVAL,
				 "hpr_create: release_delay_ms %llu is more than %u (10 min): "
				 "released memory the kernel cannot take for that long is "
				 "not released; use hpr_reclaim() to keep memory back",
				 (unsigned long long)c->release_delay_ms,
				 HPR__RELEASE_DELAY_MAX_MS);
	if (c->workers > 1024)
		return hpr__fail(-EINVAL,
				 "hpr_create: %u workers is unreasonable "
				 "(max 1024)",
				 c->workers);
	return 0;
}

static unsigned default_workers(const hpr_region *r)
{
	cpu_set_t set;
	int n;

	if (hpr__numa_cpus(&r->numa, &set))
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : 1;
}

/* A region across fork: its locks, then in the child what it inherited
 * (fork.c calls this for every live region; the contract is in fork.c). */
static bool region_atfork(struct hpr__fork_handle *h, int phase)
{
	hpr_region *r = (hpr_region *)((char *)h - offsetof(hpr_region, fork));

	/* lock order: pool, reclaimer, partial releases (the leaf locks come
	 * after every region's) */
	if (phase == HPR__FORK_PARENT) {
		hpr__fork_mutex(&r->lazy_mu, phase);
		hpr__fork_mutex(&r->partial_mu, phase);
		hpr__release_atfork(r, phase);
		hpr__pool_atfork(r, phase);
		return true;
	}
	hpr__pool_atfork(r, phase);
	hpr__release_atfork(r, phase);
	if (!hpr__fork_mutex(&r->partial_mu, phase)) {
		hpr__fork_mutex(&r->lazy_mu, phase); /* PREPARE: last */
		return true;
	}
	hpr__fork_mutex(&r->lazy_mu, phase);
	hpr__fault_table_child(r);
	hpr__release_held_child(r);
	/* the parent's workers are not here to collapse what it queued */
	hpr__cq_clear(r);
	/* mlock is not inherited (fork(2)) */
	r->locked = false;
	if (r->backend != HPR_BACKEND_THP && !(r->flags & HPR_F_SHARED)) {
		/* MADV_DONTFORK (backend.c): the range is free here and may
		 * be mapped again by anyone; never touch it */
		r->not_mapped = true;
		r->base = NULL;
	}
	return true;
}

/* Track a live region across fork. */
static void fork_track(hpr_region *r)
{
	r->fork.atfork = region_atfork;
	hpr__fork_lock();
	hpr__fork_handle_add(&r->fork);
	hpr__fork_unlock();
}

/* The one teardown, of a region in any state hpr_create leaves it in:
 * each step undoes only what was set up (a failed backend leaves no
 * mapping, fd or file; the pool and the reclaimer stop only if started).
 * Returns the unmap's result. */
static int region_free(hpr_region *r)
{
	int rc;

	hpr__lazy_destroy(r);
	hpr__pool_destroy(r);
	hpr__release_destroy(r);
	if (r->locked)
		hpr__os->munlock(r->base, r->size);
	/* the recycled pool (off unless hpr_pool_configure turned it on)
	 * takes the region's huge pages before the mapping goes */
	hpr__rpool_donate(r);
	rc = hpr__backend_destroy(r);
	if (r->partial)
		for (size_t i = 0; i < r->npages; i++)
			free(atomic_load(&r->partial[i]));
	free(r->partial);
	free(r->state);
	free(r->held_ns);
	hpr__cq_free(r);
	pthread_mutex_destroy(&r->partial_mu);
	pthread_mutex_destroy(&r->rel_mu);
	pthread_mutex_destroy(&r->lazy_mu);
	free(r);
	return rc;
}

/* The workers' idle work: released pages whose delay is over go to the
 * kernel (release.c), then the background collapse (collapse.c). */
static bool region_idle(hpr_region *r)
{
	hpr__release_idle(r);
	return hpr__collapse_idle(r);
}

/* A region with nothing set up yet: what region_free() can always undo. */
static hpr_region *region_alloc(const struct hpr_config *c)
{
	hpr_region *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->fd = -1;
	r->dir_fd = -1;
	/* a kept region's file outlives it (attach.c) */
	r->flags = c->flags | (c->flags & HPR__F_ATTACHING ? HPR_F_KEEP_FILE : 0);
	r->lazy_budget = c->lazy_budget;
	r->psi_stall_us = c->psi_stall_us ? c->psi_stall_us : 100000;
	r->release_delay_ns = c->release_delay_ms * 1000000ULL;
	snprintf(r->name, sizeof(r->name), "%s", c->name ? c->name : "region");
	pthread_mutex_init(&r->partial_mu, NULL);
	pthread_mutex_init(&r->rel_mu, NULL);
	pthread_mutex_init(&r->lazy_mu, NULL);
	atomic_store(&r->fault_err_off, (size_t)-1);
	r->reclaimer_pipe[0] = r->reclaimer_pipe[1] = -1;
	r->psi_fd = -1;
	hpr__pool_init(r);
	r->pool.idle = region_idle;
	r->pool.due = hpr__release_due;
	return r;
}

/* The memory: NUMA policy, the backend's mapping, the fault table. */
static int region_map(hpr_region *r, const struct hpr_config *c)
{
	int rc = hpr__numa_setup(&r->numa, c->numa_policy, c->numa_nodes);
	bool holds;

	if (rc)
		return rc;
	r->nworkers = c->workers ? c->workers : default_workers(r);
	rc = hpr__backend_create(r, c);
	if (rc)
		return rc;
	r->state = calloc(r->npages, sizeof(*r->state));
	holds = r->release_delay_ns && r->backend == HPR_BACKEND_THP;
	r->partial = calloc(r->npages, sizeof(*r->partial));
	/* release_delay_ms: when each held page was released (release.c) */
	if (holds)
		r->held_ns = calloc(r->npages, sizeof(*r->held_ns));
	if (!r->state || !r->partial || hpr__cq_init(r) || (holds && !r->held_ns))
		return hpr__fail(-ENOMEM,
				 "hpr_create: cannot allocate the fault table for %zu pages",
				 r->npages);
	return 0;
}

/* What the flags ask for at create: prefault, mlock, the reclaimer's
 * trigger, a background prefault. */
static int region_start(hpr_region *r, const struct hpr_config *c)
{
	int rc;

	if (c->flags & (HPR_F_PREFAULT | HPR_F_LOCK)) {
		/* HPR_F_LOCK: mlock would fault everything in on one thread;
		 * do it in parallel first */
		rc = hpr_fault_in(r, 0, r->size);
		if (rc)
			return rc;
	}
	if (c->flags & HPR_F_LOCK) {
		rc = hpr__os->mlock(r->base, r->size);
		if (rc) {
			char sz[32];

			return hpr__fail(rc,
					 "hpr_create: mlock of %s failed (%s): raise "
					 "RLIMIT_MEMLOCK (ulimit -l) or run with "
					 "CAP_IPC_LOCK",
					 hpr__fmt_size(r->size, sz, sizeof(sz)), strerror(-rc));
		}
		r->locked = true;
	}
	rc = hpr__release_init(r);
	if (rc)
		return rc;
	if (c->flags & HPR_F_PREFAULT_ASYNC)
		return hpr_prefault_start(r, 0, r->size);
	return 0;
}

int hpr_create(const struct hpr_config *cfg, hpr_region **out)
{
	char why[HPR__ERR_MSG];
	struct hpr_config c;
	hpr_region *r;
	int rc;

	hpr__err_clear();
	if (!out)
		return hpr__fail(-EINVAL, "hpr_create: out is NULL");
	*out = NULL;
	if ((rc = config_copy(cfg, &c)) || (rc = config_check(&c)))
		return rc;
	/* the process-wide state a create starts to use (the probe cache,
	 * the slot table, the pagemap fd) is fork-safe from here on: a fork
	 * while this create prefaults must not copy a half-done setup */
	hpr__fork_leaf(HPR__FORK_LEAF_FAULT, hpr__fault_atfork);
	hpr__fork_leaf(HPR__FORK_LEAF_PROBE, hpr__probe_atfork);
	r = region_alloc(&c);
	if (!r)
		return hpr__fail(-ENOMEM, "hpr_create: out of memory");
	rc = region_map(r, &c);
	if (!rc)
		rc = region_start(r, &c);
	if (rc) {
		/* the clean-up calls public functions that start by clearing
		 * this thread's detail: keep the failure's */
		hpr__err_save(rc, why, sizeof(why));
		r->flags &= ~HPR_F_KEEP_FILE; /* a failed create leaves no file */
		region_free(r);
		return hpr__err_adopt(rc, why);
	}
	/* the last attach, for hpr stat --kept: the kept file's access time,
	 * set once the attach has succeeded (best effort) */
	if (r->attached)
		hpr__os->touch_atime(r->fd);
	fork_track(r);
	*out = r;
	/* a successful create has no error: drop the detail of an attempt
	 * the AUTO chain or HPR_F_FALLBACK fell back from */
	hpr__err_clear();
	return 0;
}

int hpr_destroy(hpr_region *r)
{
	hpr__err_clear();
	if (!r)
		return 0;
	hpr__fork_lock();
	hpr__fork_handle_del(&r->fork);
	hpr__fork_unlock();
	return region_free(r);
}

void *hpr_base(const hpr_region *r)
{
	return r ? r->base : NULL;
}

size_t hpr_size(const hpr_region *r)
{
	return r ? r->size : 0;
}

size_t hpr_page_size(const hpr_region *r)
{
	return r ? r->page_size : 0;
}

enum hpr_backend hpr_backend_of(const hpr_region *r)
{
	return r ? r->backend : HPR_BACKEND_AUTO;
}

bool hpr_attached(const hpr_region *r)
{
	return r && r->attached;
}

int hpr_fd(const hpr_region *r)
{
	return r ? r->fd : -1;
}

const char *hpr_name(const hpr_region *r)
{
	return r ? r->name : NULL;
}
