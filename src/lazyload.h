/* SPDX-License-Identifier: MIT */
/*
 * The lazy load's state, shared by lazyload.c (the API, set-up, the end
 * of a failed load, fork) and lazyfill.c (loading pages: the
 * userfaultfd answers, the demand queue, the fill job, hpr-uffd).
 * Internal; docs/snapshot.md "Lazy load" says how it works.
 */
#ifndef HPR_LAZYLOAD_H
#define HPR_LAZYLOAD_H

#include "internal.h"
#include "snapshot.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdio.h>

#ifndef UFFDIO_MOVE
/* UFFDIO_MOVE (Linux 6.8) for older uapi headers: linux/userfaultfd.h's
 * numbers and layout */
#define _UFFDIO_MOVE (0x05)
#define UFFD_FEATURE_MOVE (1 << 16)
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
struct uffdio_move {
	__u64 dst, src, len, mode;
	__s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

struct lazy_buf {
	struct lazy_buf *next;
	void *p;
};

struct hpr__lazy {
	hpr_region *r;
	int fd;		       /* the caller's snapshot fd, duplicated */
	int uffd;	       /* open until lazy_free (-1: none, or a forked child's) */
	int evfd;	       /* wakes hpr-uffd: an error, a cancel, the fill's end */
	bool minor;	       /* shmem: page cache through fd, UFFDIO_CONTINUE */
	bool move;	       /* THP: UFFDIO_MOVE offered (Linux 6.8) */
	_Atomic bool move_off; /* ... but refused: UFFDIO_COPY from now on */
	bool unregistered;     /* by the thread that ends the load */
	uint64_t data_off;
	struct hpr__snap_ent *tab;
	size_t ndata;
	_Atomic size_t loaded, demanded; /* pages */
	_Atomic size_t moved, copied;	 /* THP pages mapped by UFFDIO_MOVE / _COPY */
	_Atomic unsigned pending;	 /* faults hpr-uffd is serving: the fill waits */
	_Atomic int err;
	_Atomic bool fill_done; /* the fill job has ended */
	_Atomic bool ended;	/* result is final; the region is unregistered */
	int result;
	char msg[HPR__ERR_MSG];

	pthread_mutex_t mu;  /* buffers, msg, go, fill_waits */
	pthread_cond_t cv;   /* go; pending back to 0 */
	bool go;	     /* hpr_load has returned: the fill may start */
	unsigned fill_waits; /* fill threads waiting for pending to drop */
	struct lazy_buf *bufs;
	void *zero; /* page_size bytes of zeros, read-only */

	pthread_t handler, driver;
	bool threads;	/* handler started; joined under wait_mu */
	bool driver_on; /* driver started (joined by the handler) */
	bool joined, waited;
	_Atomic bool undone; /* a failed load's region emptied (read unlocked) */
	unsigned users;	     /* hpr_load_wait calls inside, under r->lazy_mu */
	pthread_mutex_t wait_mu;
	bool child; /* a forked child's copy: no threads, cancelled */
	struct hpr__fork_handle fh;
};

static inline bool hpr__lazy_is_data(const struct hpr__lazy *L, size_t idx)
{
	return L->tab[idx].flags & HPR__SNAP_PG_DATA;
}

/* Is a lazy load of r running, or has one failed that hpr_load_wait has
 * not emptied yet (it holds the region until then)? One acquire load where
 * none ran. These two are inline so that the files that ask (fault-in,
 * release, collapse, snapshot) do not call into the load, which calls them. */
static inline bool hpr__lazy_running(hpr_region *r)
{
	struct hpr__lazy *L = atomic_load_explicit(&r->lazy, memory_order_acquire);

	return L && (!atomic_load(&L->ended) || (L->result && !atomic_load(&L->undone)));
}

/* -EBUSY with advice while hpr__lazy_running(r) (fn names the caller):
 * the load runs, or it failed (the cause is named) and hpr_load_wait has
 * not emptied the region yet. */
static inline int hpr__lazy_busy(hpr_region *r, const char *fn)
{
	struct hpr__lazy *L = r ? atomic_load_explicit(&r->lazy, memory_order_acquire) : NULL;
	char m[HPR__ERR_MSG];

	if (!L || (atomic_load(&L->ended) && (!L->result || atomic_load(&L->undone))))
		return 0;
	if (!atomic_load(&L->err))
		return hpr__fail(-EBUSY,
				 "%s: region '%s' is being loaded lazily (hpr_load with "
				 "HPR_SNAP_LAZY): hpr_load_wait() first",
				 fn, r->name);
	pthread_mutex_lock(&L->mu);
	snprintf(m, sizeof(m), "%s", L->msg);
	pthread_mutex_unlock(&L->mu);
	return hpr__fail(
		-EBUSY,
		"%s: the lazy load of region '%s' failed (%s): hpr_load_wait() first, which "
		"returns that error and empties the region",
		fn, r->name, m[0] ? m : "no detail");
}

/* ioctl on the load's userfaultfd: 0 or -errno */
int hpr__lazy_ioctl(struct hpr__lazy *L, unsigned long req, void *arg);
/* wake hpr-uffd (an error, a cancel, the fill's end) */
void hpr__lazy_kick(struct hpr__lazy *L);
/* the load's first error and its message; wakes hpr-uffd; returns err */
int hpr__lazy_fail(struct hpr__lazy *L, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* load saved page idx exactly once, whoever asks (demand: a thread
 * touched it or faulted it in; wait: for a page someone else is loading,
 * until it is mapped); 0 or the load's error */
int hpr__lazy_load_one(struct hpr__lazy *L, size_t idx, bool demand, bool wait);
/* the fill may start (hpr_load returns, or gives up) */
void hpr__lazy_go(struct hpr__lazy *L);
/* the threads: hpr-uffd (reads the userfaultfd, ends the load) and
 * hpr-lazyfill (runs the fill job on the region's workers) */
void *hpr__lazy_handler(void *arg);
void *hpr__lazy_driver(void *arg);
/* saved pages not mapped: PROT_NONE */
void hpr__lazy_protect(struct hpr__lazy *L);
/* unregister the region (idempotent); the userfaultfd stays open */
void hpr__lazy_unregister(struct hpr__lazy *L);

#endif
