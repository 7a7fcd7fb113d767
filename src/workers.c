/* SPDX-License-Identifier: MIT */
/*
 * The worker pool: runs jobs over a region's pages.
 *
 * Each region owns a pool of threads, created and pinned (to the CPUs of its
 * NUMA nodes) the first time there is parallel work, all before that work is
 * published: creating a thread takes the mm's mmap lock, and spawning
 * threads while others populate convoys behind it. Workers pull batches of
 * huge pages from an atomic cursor, so there is no static split and no
 * straggler. A job is what to do with each page, or with each batch of
 * pages (struct hpr__job_ops: fault-in, collapse, snapshot), over a page
 * range; the pool knows nothing of what that is.
 *
 * A synchronous job (hpr_fault_in, hpr_collapse) runs on the caller plus the
 * workers. While a background prefault owns the pool, a synchronous caller
 * does its own pages at once (demand first) rather than queueing; the fault
 * table keeps every page exactly-once whoever gets there first.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pool_start(hpr_region *r);

struct worker_arg {
	hpr_region *r;
	unsigned id;
};

/*
 * Pages per cursor grab: up to 16 MiB (a populate call and a page walk per
 * batch instead of per huge page), but at least 8 grabs per worker so the
 * last batches still balance. An attached region's pages exist already:
 * mapping one costs about 1/100 of a fresh one's clear, so its grabs go up
 * to 1 GiB (fault.c HPR_RUN_MAX_ATTACHED) and the calls stay few -- an 8
 * GiB attach with prefault on 2 workers made 512 populate calls of 16 MiB,
 * now 16.
 */
static size_t batch_for(const hpr_region *r, size_t npages)
{
	size_t b = (r->attached ? 1UL << 30 : 16UL << 20) >> r->page_shift;
	size_t fair = npages / ((size_t)(r->nworkers ? r->nworkers : 1) * 8);

	if (b > fair)
		b = fair;
	return b ? b : 1;
}

static void job_record_err(struct hpr__job *j, int rc, size_t idx)
{
	int zero = 0;

	if (atomic_compare_exchange_strong(&j->err, &zero, rc)) {
		/* the detail was recorded in this thread: the job carries it
		 * to the caller's (read once every thread has left the job) */
		hpr__err_save(rc, j->err_msg, sizeof(j->err_msg));
		atomic_store(&j->err_idx, idx);
	} else {
		/* keep the lowest failing page: CAS loop on the index */
		size_t cur = atomic_load(&j->err_idx);

		while (idx < cur && !atomic_compare_exchange_weak(&j->err_idx, &cur, idx))
			;
	}
	/* out of backing memory does not get better further on */
	atomic_store(&j->cancel, true);
}

static void run_job(hpr_region *r, struct hpr__job *j)
{
	/* a worker's detail from an earlier job must not pass for this one's
	 * (a page function may return an errno without recording words) */
	hpr__err_clear();
	for (;;) {
		size_t b, e;

		if (atomic_load_explicit(&j->cancel, memory_order_relaxed))
			break;
		b = atomic_fetch_add_explicit(&j->cursor, j->batch, memory_order_relaxed);
		if (b >= j->last)
			break;
		e = b + j->batch < j->last ? b + j->batch : j->last;
		if (j->ops.batch) {
			size_t done = 0, err_idx = 0;
			int rc = j->ops.batch(r, b, e, j->arg, &j->cancel, &done, &err_idx);

			atomic_fetch_add_explicit(&j->done, done, memory_order_relaxed);
			if (rc)
				job_record_err(j, rc, err_idx);
			continue;
		}
		for (size_t i = b; i < e; i++) {
			int rc;

			if (atomic_load_explicit(&j->cancel, memory_order_relaxed))
				break;
			rc = j->ops.page(r, i, j->arg);
			if (rc)
				job_record_err(j, rc, i);
			else
				atomic_fetch_add_explicit(&j->done, 1, memory_order_relaxed);
		}
	}
}

static void job_leave(struct hpr__pool *p, struct hpr__job *j, bool is_async)
{
	pthread_mutex_lock(&p->mu);
	if (atomic_fetch_sub(&j->running, 1) == 1) {
		j->finished = true;
		if (is_async && p->job == j)
			p->job = NULL;
		pthread_cond_broadcast(&p->done_cv);
	}
	pthread_mutex_unlock(&p->mu);
}

/*
 * Idle work (the background collapse), one piece at a time, by one worker
 * at a time: between pieces the worker looks at the pool again, so a new
 * job or a stop waits for at most one piece. p->mu held on entry and on
 * return, not while the piece runs.
 */
static void run_idle(hpr_region *r, struct hpr__pool *p)
{
	bool more;

	p->idle_busy = true;
	atomic_store(&p->idle_want, false); /* a kick while the piece runs sets it again */
	pthread_mutex_unlock(&p->mu);
	more = p->idle(r);
	pthread_mutex_lock(&p->mu);
	p->idle_busy = false;
	if (more)
		atomic_store(&p->idle_want, true);
}

int hpr__pool_kick(hpr_region *r)
{
	struct hpr__pool *p = &r->pool;
	int rc;

	/* wanted already: a worker will look (it clears the flag before it
	 * looks at the work, so work added before this is seen). The reuse
	 * path kicks once per page it queues; this keeps that to an atomic
	 * exchange while the queue is not empty. */
	if (atomic_exchange(&p->idle_want, true))
		return 0;
	pthread_mutex_lock(&p->mu);
	rc = pool_start(r);
	if (!rc && !p->nthreads)
		rc = -EAGAIN;
	if (!rc)
		pthread_cond_broadcast(&p->cv);
	else
		atomic_store(&p->idle_want, false);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Wait on the pool's condvar until due (CLOCK_MONOTONIC ns) at most. The
 * condvar's clock is CLOCK_REALTIME: the wait is converted, and a clock
 * step only makes it end early or late once (the caller looks again). */
static void wait_until(struct hpr__pool *p, uint64_t due)
{
	uint64_t now = hpr__now_ns(), rel = due > now ? due - now : 0, abs;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	abs = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + rel;
	ts.tv_sec = (time_t)(abs / 1000000000ULL);
	ts.tv_nsec = (long)(abs % 1000000000ULL);
	pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

static void *worker_main(void *argp)
{
	struct worker_arg *wa = argp;
	hpr_region *r = wa->r;
	struct hpr__pool *p = &r->pool;
	uint64_t seen = 0;
	unsigned wa_id = wa->id;

	free(wa);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct hpr__job *j;
		bool is_async;

		while (!p->stopping && (!p->job || p->gen == seen)) {
			uint64_t due;

			if (atomic_load(&p->idle_want) && !p->idle_busy) {
				run_idle(r, p);
				continue;
			}
			/* idle work that falls due by itself (release.c's held
			 * pages): sleep until then at most */
			due = p->idle_busy || !p->due ? 0 : p->due(r);
			if (!due) {
				pthread_cond_wait(&p->cv, &p->mu);
			} else if (due <= hpr__now_ns()) {
				atomic_store(&p->idle_want, true);
			} else {
				wait_until(p, due);
			}
		}
		if (p->stopping)
			break;
		seen = p->gen;
		j = p->job;
		is_async = j == &p->async;
		if (wa_id >= p->job_workers)
			continue; /* not needed for this job (the caller runs it too) */
		pthread_mutex_unlock(&p->mu);
		run_job(r, j);
		job_leave(p, j, is_async);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int hpr__pool_init(hpr_region *r)
{
	struct hpr__pool *p = &r->pool;

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	return 0;
}

int hpr__thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *name,
		      const void *cpus, size_t stack)
{
	pthread_attr_t attr;
	sigset_t block, old;
	int rc;

	rc = -pthread_attr_init(&attr);
	if (rc)
		return rc;
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	/* pinned on purpose (hpr__numa_cpus), never left with the affinity
	 * of whichever thread happened to start us, which may be a vCPU
	 * thread pinned to one CPU */
	if (cpus)
		pthread_attr_setaffinity_np(&attr, sizeof(cpu_set_t), cpus);
	/* the application's signals go to the application's threads; the
	 * synchronous fault signals stay open (blocking them turns a fault
	 * into a kill, and the touch fallback catches SIGBUS) */
	sigfillset(&block);
	sigdelset(&block, SIGBUS);
	sigdelset(&block, SIGSEGV);
	sigdelset(&block, SIGFPE);
	sigdelset(&block, SIGILL);
	sigdelset(&block, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &block, &old);
	rc = -pthread_create(th, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	/* named by the starter, not by the thread: visible in top -H, ps -L
	 * and /proc/PID/task/TID/comm from the moment the start returns (a
	 * thread naming itself may not have run yet) */
	if (!rc)
		pthread_setname_np(*th, name);
	return rc;
}

/* Create and pin every worker before any job is published. Pool lock held. */
static int pool_start(hpr_region *r)
{
	struct hpr__pool *p = &r->pool;
	cpu_set_t set;
	bool pin;
	char name[16];
	int rc = 0;

	if (p->started)
		return 0;
	p->threads = calloc(r->nworkers, sizeof(*p->threads));
	if (!p->threads)
		return hpr__fail(-ENOMEM, "cannot allocate %u worker handles", r->nworkers);
	pin = !hpr__numa_cpus(&r->numa, &set);
	for (unsigned i = 0; i < r->nworkers; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));

		if (!wa) {
			rc = -ENOMEM;
			break;
		}
		wa->r = r;
		wa->id = i;
		snprintf(name, sizeof(name), "hpr-fault/%hu", (unsigned short)i); /* <= 1024 */
		rc = hpr__thread_start(&p->threads[i], worker_main, wa, name, pin ? &set : NULL,
				       256 * 1024);
		if (rc) {
			free(wa);
			break;
		}
		p->nthreads++;
	}
	p->started = true;
	if (rc && !p->nthreads)
		return hpr__fail(rc, "cannot start worker threads: %s", strerror(-rc));
	return 0; /* fewer workers than asked still works */
}

void hpr__pool_destroy(hpr_region *r)
{
	struct hpr__pool *p = &r->pool;

	hpr_prefault_cancel(r);
	hpr_prefault_wait(r);
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	p->threads = NULL;
	p->nthreads = 0;
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_cond_destroy(&p->done_cv);
}

void hpr__pool_atfork(hpr_region *r, int phase)
{
	struct hpr__pool *p = &r->pool;

	if (!hpr__fork_mutex(&p->mu, phase))
		return;
	/* child: none of the workers exists here, nor any thread that was
	 * inside a synchronous job; condvars may count waiters that are gone */
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	free(p->threads);
	p->threads = NULL;
	p->nthreads = 0;
	p->started = false; /* pool_start runs again on demand */
	p->stopping = false;
	p->job = NULL;
	atomic_store(&p->idle_want, false); /* the queue is emptied too (region.c) */
	p->idle_busy = false;
	if (p->async_active && !p->async.finished) {
		int zero = 0;

		atomic_compare_exchange_strong(&p->async.err, &zero, -ECANCELED);
		atomic_store(&p->async.cancel, true);
		atomic_store(&p->async.running, 0);
		p->async.finished = true;
		p->async_forked = true;
	}
}

static void job_init(struct hpr__job *j, hpr_region *r, const struct hpr__job_ops *ops, void *arg,
		     size_t first, size_t last)
{
	memset(j, 0, sizeof(*j));
	j->ops = *ops;
	j->arg = arg;
	j->first = first;
	j->last = last;
	j->batch = batch_for(r, last - first);
	atomic_store(&j->cursor, first);
	atomic_store(&j->err_idx, (size_t)-1);
}

/* Another caller's synchronous job with the same operation covers
 * [first, last) and already runs on all the region's threads (p->mu held). */
static bool job_covers(const struct hpr__pool *p, const struct hpr__job_ops *ops, const void *arg,
		       size_t first, size_t last)
{
	const struct hpr__job *o = p->job;

	return o && o != &p->async && o->ops.page == ops->page && o->ops.batch == ops->batch &&
	       o->arg == arg && o->first <= first && o->last >= last;
}

/* Run j on the caller and nworkers - 1 pool threads: nworkers threads in
 * all, not one more than asked. p->mu held on entry, released on return. */
static int run_shared(hpr_region *r, struct hpr__job *j)
{
	struct hpr__pool *p = &r->pool;
	unsigned nw = p->nthreads < r->nworkers - 1 ? p->nthreads : r->nworkers - 1;

	atomic_store(&j->running, nw + 1);
	p->job_workers = nw;
	p->job = j;
	p->gen++;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	run_job(r, j);
	pthread_mutex_lock(&p->mu);
	if (atomic_fetch_sub(&j->running, 1) == 1)
		j->finished = true;
	while (!j->finished)
		pthread_cond_wait(&p->done_cv, &p->mu);
	p->job = NULL;
	/* wake a prefault_start waiting for the pool */
	pthread_cond_broadcast(&p->done_cv);
	pthread_mutex_unlock(&p->mu);
	return hpr__err_adopt(atomic_load(&j->err), j->err_msg);
}

int hpr__run(hpr_region *r, const struct hpr__job_ops *ops, void *arg, size_t first, size_t last)
{
	struct hpr__pool *p = &r->pool;
	struct hpr__job j;

again:
	job_init(&j, r, ops, arg, first, last);
	if (r->nworkers > 1 && last - first > 1) {
		pthread_mutex_lock(&p->mu);
		if (job_covers(p, ops, arg, first, last)) {
			/* wait for it instead of adding a thread that competes
			 * for the same CPUs (measured: 9 populating threads on
			 * 2 CPUs take 1.1-1.5x as long as 2), then pick up what
			 * it left (after an error or a cancel) */
			uint64_t gen = p->gen;

			while (p->job && p->gen == gen)
				pthread_cond_wait(&p->done_cv, &p->mu);
			pthread_mutex_unlock(&p->mu);
			if (ops->pending && (first = ops->pending(r, first, last)) == last)
				return 0;
			goto again;
		}
		if (!p->job && !pool_start(r) && p->nthreads)
			return run_shared(r, &j);
		pthread_mutex_unlock(&p->mu);
	}
	/* one worker, a single page, or the pool is busy with a background
	 * job or another range: the caller does its own pages now (demand
	 * first) */
	run_job(r, &j);
	return atomic_load(&j.err);
}

int hpr__range_of(const char *fn, const hpr_region *r, size_t off, size_t len, size_t *first,
		  size_t *last)
{
	const char *sep = fn ? ": " : "";

	fn = fn ? fn : "";
	if (!r)
		return hpr__fail(-EINVAL, "%s%sregion is NULL", fn, sep);
	if (r->not_mapped)
		return hpr__region_mapped(r);
	if (off > r->size || len > r->size - off)
		return hpr__fail(-EINVAL,
				 "%s%srange [%#zx, +%#zx) is outside region '%s' of %#zx bytes", fn,
				 sep, off, len, r->name, r->size);
	*first = off >> r->page_shift;
	*last = len ? (off + len + r->page_size - 1) >> r->page_shift : *first;
	return 0;
}

int hpr__range(const hpr_region *r, size_t off, size_t len, size_t *first, size_t *last)
{
	return hpr__range_of(NULL, r, off, len, first, last);
}

int hpr__run_async(hpr_region *r, const struct hpr__job_ops *ops, void *arg, size_t first,
		   size_t last)
{
	struct hpr__pool *p = &r->pool;
	int rc;

	pthread_mutex_lock(&p->mu);
	/* The check is made again after every wait: the wait drops the lock,
	 * and another hpr_prefault_start may have taken the pool meanwhile
	 * (two callers both waiting here used to both start, the second
	 * overwriting the first's job). */
	for (;;) {
		if (p->async_active) {
			pthread_mutex_unlock(&p->mu);
			return hpr__fail(-EBUSY,
					 "region '%s' already has a background prefault: "
					 "hpr_prefault_wait() or hpr_prefault_cancel() first",
					 r->name);
		}
		if (!p->job)
			break;
		/* a synchronous job is finishing */
		pthread_cond_wait(&p->done_cv, &p->mu);
	}
	rc = pool_start(r);
	if (rc || !p->nthreads) {
		pthread_mutex_unlock(&p->mu);
		return rc ? rc : hpr__fail(-EAGAIN, "no worker thread could be started");
	}
	job_init(&p->async, r, ops, arg, first, last);
	p->async_forked = false;
	atomic_store(&p->async.running, p->nthreads);
	p->job_workers = p->nthreads;
	p->async_active = true;
	p->job = &p->async;
	p->gen++;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int hpr_prefault_wait(hpr_region *r)
{
	struct hpr__pool *p;
	bool forked;
	int rc;

	hpr__err_clear();
	if (!r)
		return hpr__fail(-EINVAL, "region is NULL");
	p = &r->pool;
	pthread_mutex_lock(&p->mu);
	if (!p->async_active) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	while (!p->async.finished)
		pthread_cond_wait(&p->done_cv, &p->mu);
	p->async_active = false;
	rc = atomic_load(&p->async.err);
	/* the first error with the detail the job carried back from the
	 * worker that hit it */
	hpr__err_adopt(rc, p->async.err_msg);
	forked = p->async_forked;
	pthread_mutex_unlock(&p->mu);
	if (rc == -ECANCELED && forked)
		return hpr__fail(rc,
				 "the background prefault of region '%s' was running in the "
				 "parent when this process was forked; a child does not "
				 "inherit it: hpr_fault_in() or hpr_prefault_start() here",
				 r->name);
	if (rc == -ECANCELED)
		return hpr__fail(rc, "the background prefault of region '%s' was cancelled",
				 r->name);
	return rc;
}

int hpr_prefault_progress(hpr_region *r, size_t *done, size_t *total)
{
	struct hpr__pool *p;

	hpr__err_clear();
	if (!r)
		return hpr__fail(-EINVAL, "region is NULL");
	p = &r->pool;
	pthread_mutex_lock(&p->mu);
	if (done)
		*done = atomic_load(&p->async.done) << r->page_shift;
	if (total)
		*total = (p->async.last - p->async.first) << r->page_shift;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int hpr_prefault_cancel(hpr_region *r)
{
	struct hpr__pool *p;
	int zero = 0;

	hpr__err_clear();
	if (!r)
		return hpr__fail(-EINVAL, "region is NULL");
	p = &r->pool;
	pthread_mutex_lock(&p->mu);
	if (p->async_active && !p->async.finished) {
		atomic_compare_exchange_strong(&p->async.err, &zero, -ECANCELED);
		atomic_store(&p->async.cancel, true);
	}
	pthread_mutex_unlock(&p->mu);
	return 0;
}
