/* SPDX-License-Identifier: MIT */
/*
 * fork(2): what a child inherits, and the pthread_atfork handlers that make
 * it consistent.
 *
 * A fork copies the memory of one thread's process and none of its other
 * threads. So a child inherits every lock another thread held at that
 * instant (held for ever: its owner does not exist there), condition
 * variables with waiters that do not exist, worker pools whose threads do
 * not exist, jobs nobody will finish, fault-table pages stuck FAULTING or
 * BUSY, and the parent's kernel handles (an fd on /proc/self/pagemap
 * describes the mm that opened it, not the child's).
 *
 * prepare (in the parent, before the fork): take every library lock, in
 * the one order the rest of the library never inverts: the region list,
 * then per region its pool lock, reclaimer lock and partial-release lock,
 * then the leaf locks (pagemap, the probe cache). No state is mid-update
 * under one of them across the fork. The fault-table slot locks are the
 * exception (hpr__fault_atfork says why): the child makes them new.
 * parent: release them. child: re-initialise them (and the condition
 * variables), then per region: the pool is empty and idle (workers start
 * again on demand), a background prefault of the parent's has ended with
 * -ECANCELED, the reclaimer's fds are closed (it starts again at the next
 * hpr_release_lazy), pages in flight on a parent thread are ABSENT, and a
 * region whose mapping was not inherited (private shmem/hugetlb are
 * MADV_DONTFORK) refuses everything but hpr_destroy. Tracked kernel
 * handles (the snapshot's io_uring rings) are closed. The child's handler
 * starts no thread and its only syscalls close or unmap inherited handles, so
 * a child that only execs pays little more than a walk over the fault
 * tables.
 *
 * This file is the mechanism only: it calls what the owners registered
 * (region.c a region's handler, snapshot.c a ring's, the leaf locks'
 * owners theirs) and knows none of them, so it depends on nothing above it.
 *
 * The contract for callers is in hpregion.h ("fork") and hpregion(7).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>

static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hpr__fork_handle *handles;	    /* regions and rings, under fork_mu */
static void (*leaves[HPR__FORK_LEAVES])(int phase); /* under fork_mu */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned long fork_parties; /* forks seen, as parent or child */

bool hpr__forked(void)
{
	return atomic_load(&fork_parties) != 0;
}

bool hpr__fork_mutex(pthread_mutex_t *mu, int phase)
{
	if (phase == HPR__FORK_PREPARE) {
		pthread_mutex_lock(mu);
		return false;
	}
	if (phase == HPR__FORK_PARENT) {
		pthread_mutex_unlock(mu);
		return false;
	}
	pthread_mutex_init(mu, NULL);
	return true;
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&fork_mu);
	for (struct hpr__fork_handle *h = handles; h; h = h->next)
		h->atfork(h, HPR__FORK_PREPARE);
	for (unsigned i = 0; i < HPR__FORK_LEAVES; i++)
		if (leaves[i])
			leaves[i](HPR__FORK_PREPARE);
}

/* the leaves in the reverse of prepare's order */
static void leaves_after(int phase)
{
	for (unsigned i = HPR__FORK_LEAVES; i-- > 0;)
		if (leaves[i])
			leaves[i](phase);
}

static void fork_parent(void)
{
	atomic_fetch_add(&fork_parties, 1);
	leaves_after(HPR__FORK_PARENT);
	for (struct hpr__fork_handle *h = handles; h; h = h->next)
		h->atfork(h, HPR__FORK_PARENT);
	pthread_mutex_unlock(&fork_mu);
}

static void fork_child(void)
{
	atomic_fetch_add(&fork_parties, 1);
	leaves_after(HPR__FORK_CHILD);
	for (struct hpr__fork_handle *h = handles, *next; h; h = next) {
		next = h->next;
		if (!h->atfork(h, HPR__FORK_CHILD))
			hpr__fork_handle_del(h);
	}
	pthread_mutex_init(&fork_mu, NULL);
}

static void atfork_install(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void hpr__fork_lock(void)
{
	pthread_once(&atfork_once, atfork_install);
	pthread_mutex_lock(&fork_mu);
}

void hpr__fork_unlock(void)
{
	pthread_mutex_unlock(&fork_mu);
}

void hpr__fork_handle_add(struct hpr__fork_handle *h)
{
	h->prev = NULL;
	h->next = handles;
	if (handles)
		handles->prev = h;
	handles = h;
}

void hpr__fork_handle_del(struct hpr__fork_handle *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else if (handles == h)
		handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->prev = h->next = NULL;
}

void hpr__fork_leaf(unsigned slot, void (*fn)(int phase))
{
	hpr__fork_lock();
	leaves[slot] = fn;
	hpr__fork_unlock();
}

int hpr__region_mapped(const hpr_region *r)
{
	if (!r->not_mapped)
		return 0;
	return hpr__fail(-ENXIO,
			 "region '%s' is private %s memory, which a forked child does not "
			 "inherit (MADV_DONTFORK): here only hpr_destroy() is valid on it; "
			 "create it with HPR_F_SHARED to share it with children",
			 r->name, hpr_backend_name(r->backend));
}
