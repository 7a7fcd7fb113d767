/* SPDX-License-Identifier: MIT */
/*
 * Lazy snapshot load: hpr_load(r, fd, HPR_SNAP_LAZY, ...), hpr_load_wait,
 * hpr_load_progress, hpr_load_cancel (docs/snapshot.md, "Lazy load").
 *
 * hpr_load checks that the region is empty, all at once (the st_blocks of
 * a shmem or hugetlb region's file; PAGEMAP_SCAN over a THP region, mincore
 * before Linux 6.7), and the snapshot as for an eager load (header, table,
 * extents -- none to walk in a file without holes --, room), and hands its
 * page table to hpr__lazy_load, which registers the region with a
 * userfaultfd and returns: nothing before the return is per page. Two
 * library threads and the region's workers then do the load:
 *
 *  - "hpr-uffd" reads the userfaultfd and serves each fault itself: a saved
 *    page is read into a bounce buffer, verified and mapped right there,
 *    never queued behind the fill (a page the fill has in hand is left to
 *    it: it wakes the page's waiters). A hole of the snapshot is answered
 *    with zeros (UFFDIO_ZEROPAGE on THP, where no copy is needed; a copy
 *    from a zero mapping elsewhere, which the kernel requires). While it
 *    serves faults, the fill waits at its next page (pending).
 *  - "hpr-lazyfill" runs a job over all pages in file order on the
 *    region's workers (hpr__run), once hpr_load has returned.
 *
 * Loading a page (load_one) takes it in the fault table (ABSENT ->
 * FAULTING: exactly once, whoever asks), reads it into a bounce buffer,
 * verifies its checksum, and only then maps it:
 *  - hugetlb: MISSING mode, UFFDIO_COPY of the whole huge page;
 *  - shmem: MISSING and MINOR modes: pwrite() into the page cache through
 *    the region's fd (a huge folio on a huge= tmpfs). The fill stops there
 *    (the page is PRESENT: verified, in the file); a fault on such a page
 *    is a minor one, answered with UFFDIO_CONTINUE, and the end of the
 *    load maps the rest with one MADV_POPULATE_WRITE. UFFDIO_COPY would
 *    allocate 4 KiB pages;
 *  - THP: MISSING mode; the bounce buffer is a huge-aligned THP, which
 *    UFFDIO_MOVE (Linux 6.8) puts in place as one PMD: no copy, no
 *    collapse. Without UFFDIO_MOVE, or where the kernel refuses it,
 *    UFFDIO_COPY, which maps 4 KiB pages, then MADV_COLLAPSE of the page
 *    (retried after unregistering if refused).
 * The ioctls do not wake the threads blocked on the page (DONTWAKE): the
 * page is published PRESENT and counted first, then UFFDIO_WAKE, so a
 * woken thread finds the table and hpr_load_progress up to date.
 *
 * When every saved page is mapped, hpr-uffd unregisters the region and
 * collapses what is not PMD-mapped (shmem's UFFDIO_CONTINUE maps PTEs).
 *
 * Errors (a bad checksum, a short or unreadable file, no memory) fail the
 * whole load, as hpr_load_cancel and a fork (in the child) do: the fill
 * stops, the saved pages not mapped yet become PROT_NONE, and the region
 * is unregistered, which wakes blocked threads into a SIGSEGV, never into
 * zeros or unverified data. hpr_load_wait returns the error and empties the
 * region. (UFFDIO_POISON, Linux 6.6, would give SIGBUS, but only to the
 * faults answered with it; mprotect covers later touches too and every
 * kernel has it.)
 *
 * This file: the API, the set-up (checks, userfaultfd, threads), the
 * fallback to an eager load, the end of a failed load (hpr_load_wait
 * empties the region), fork and destroy. lazyfill.c does the pages.
 */
#define _GNU_SOURCE
#include "lazyload.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The load's error as this thread's detail (hpr_strerror). */
static int lazy_err(struct hpr__lazy *L, int err)
{
	char m[HPR__ERR_MSG];

	pthread_mutex_lock(&L->mu);
	snprintf(m, sizeof(m), "%s", L->msg);
	pthread_mutex_unlock(&L->mu);
	return hpr__fail(err, "hpr_load (lazy) of region '%s': %s", L->r->name,
			 m[0] ? m : "failed");
}

/* ---- set-up ---- */

/* Open and register the userfaultfd for r's backend; -errno when the
 * kernel or the privileges do not allow it (the caller falls back). */
static int uffd_setup(struct hpr__lazy *L, const char **why)
{
	hpr_region *r = L->r;
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)r->base, .len = r->size },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	uint64_t need_ioctls = (uint64_t)1 << _UFFDIO_COPY;
	int rc, fd = hpr__os->uffd_open(false);
	bool move;

	if (fd < 0) {
		*why = "no userfaultfd: /dev/userfaultfd cannot be opened and userfaultfd(2) is "
		       "refused (vm.unprivileged_userfaultfd = 0 needs CAP_SYS_PTRACE)";
		return fd;
	}
	L->uffd = fd;
	if (r->backend == HPR_BACKEND_HUGETLB) {
		api.features = UFFD_FEATURE_MISSING_HUGETLBFS;
	} else if (r->backend == HPR_BACKEND_SHMEM) {
		api.features = UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM;
		reg.mode |= UFFDIO_REGISTER_MODE_MINOR;
		need_ioctls = (uint64_t)1 << _UFFDIO_CONTINUE;
		L->minor = true;
	} else {
		need_ioctls |= (uint64_t)1 << _UFFDIO_ZEROPAGE;
		api.features = UFFD_FEATURE_MOVE;
	}
	rc = hpr__lazy_ioctl(L, UFFDIO_API, &api);
	move = !rc && r->backend == HPR_BACKEND_THP;
	if (rc == -EINVAL && r->backend == HPR_BACKEND_THP) {
		/* a kernel before 6.8: no UFFDIO_MOVE. A failed UFFDIO_API
		 * may not be repeated on every kernel: a new descriptor. */
		hpr__os->close(L->uffd);
		L->uffd = fd = hpr__os->uffd_open(false);
		if (fd < 0) {
			*why = "no userfaultfd: /dev/userfaultfd cannot be opened again";
			return fd;
		}
		api = (struct uffdio_api){ .api = UFFD_API };
		rc = hpr__lazy_ioctl(L, UFFDIO_API, &api);
	}
	if (rc) {
		*why = "the kernel's userfaultfd lacks this backend's mode (shmem minor faults "
		       "need Linux 5.14)";
		return rc == -EINVAL ? -EOPNOTSUPP : rc;
	}
	rc = hpr__lazy_ioctl(L, UFFDIO_REGISTER, &reg);
	if (rc) {
		*why = "UFFDIO_REGISTER of the region failed";
		return rc;
	}
	/* the kernel answers UFFDIO_API with every feature it has, asked
	 * for or not: move says the descriptor has UFFD_FEATURE_MOVE */
	L->move = move && (reg.ioctls & ((uint64_t)1 << _UFFDIO_MOVE));
	if ((reg.ioctls & need_ioctls) != need_ioctls) {
		hpr__lazy_unregister(L);
		*why = "the kernel cannot resolve this backend's faults (no UFFDIO_COPY, "
		       "UFFDIO_CONTINUE or UFFDIO_ZEROPAGE here)";
		return -EOPNOTSUPP;
	}
	return 0;
}

static void lazy_free(struct hpr__lazy *L)
{
	struct lazy_buf *b, *n;

	if (!L)
		return;
	hpr__fork_lock();
	hpr__fork_handle_del(&L->fh);
	hpr__fork_unlock();
	if (L->uffd >= 0)
		hpr__os->close(L->uffd);
	if (L->evfd >= 0)
		close(L->evfd);
	if (L->fd >= 0)
		hpr__os->close(L->fd);
	for (b = L->bufs; b; b = n) {
		n = b->next;
		hpr__os->munmap(b->p, L->r->page_size);
		free(b);
	}
	if (L->zero)
		hpr__os->munmap(L->zero, L->r->page_size);
	free(L->tab);
	pthread_mutex_destroy(&L->mu);
	pthread_cond_destroy(&L->cv);
	pthread_mutex_destroy(&L->wait_mu);
	free(L);
}

/* A fork: the child's copy of a lazy load is cancelled there (its
 * threads and its userfaultfd registration are not inherited: without
 * UFFD_FEATURE_EVENT_FORK the child's VMAs are not registered, and its
 * unloaded pages would read as zeros), so they are PROT_NONE there. */
static bool lazy_atfork(struct hpr__fork_handle *h, int phase)
{
	struct hpr__lazy *L = (struct hpr__lazy *)((char *)h - offsetof(struct hpr__lazy, fh));
	hpr_region *r = L->r;
	int zero = 0;

	if (!hpr__fork_mutex(&L->mu, phase))
		return true;
	pthread_mutex_init(&L->wait_mu, NULL);
	/* the parent's fill may wait on cv: a copy with its waiters would
	 * hold up pthread_cond_destroy here */
	pthread_cond_init(&L->cv, NULL);
	L->fill_waits = 0;
	/* the bounce buffers are MADV_DONTFORK: not here, and their
	 * addresses may be another mapping's later; forget them */
	for (struct lazy_buf *b = L->bufs, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	L->bufs = NULL;
	L->child = true;
	L->threads = L->driver_on = false;
	atomic_compare_exchange_strong(&L->err, &zero, -ECANCELED);
	if (!atomic_load(&L->ended)) {
		snprintf(L->msg, sizeof(L->msg),
			 "the lazy load was running in the parent when this process was "
			 "forked; a child does not inherit it");
		if (r->backend == HPR_BACKEND_THP || (r->flags & HPR_F_SHARED))
			hpr__lazy_protect(L);
		L->result = atomic_load(&L->err);
		atomic_store(&L->ended, true);
	}
	if (L->uffd >= 0)
		hpr__os->close(L->uffd);
	L->uffd = -1;
	return false;
}

static int lazy_alloc(hpr_region *r, int fd, struct hpr__lazy **out)
{
	struct hpr__lazy *L = calloc(1, sizeof(*L));

	*out = L;
	if (!L)
		return hpr__fail(-ENOMEM, "hpr_load: out of memory");
	L->r = r;
	L->uffd = L->evfd = -1;
	pthread_mutex_init(&L->mu, NULL);
	pthread_cond_init(&L->cv, NULL);
	pthread_mutex_init(&L->wait_mu, NULL);
	L->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (L->fd < 0)
		return hpr__fail(-errno, "hpr_load: cannot duplicate fd %d: %s", fd,
				 strerror(errno));
	L->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (L->evfd < 0 || hpr__os->mmap(NULL, r->page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
					 -1, 0, &L->zero))
		return hpr__fail(-ENOMEM, "hpr_load: out of memory");
	L->fh.atfork = lazy_atfork;
	return 0;
}

/*
 * Does any page of r's range have a resident page, without a look at
 * each page? 1 yes, 0 no, -errno: cannot tell this way.
 *  - The file of a shmem or hugetlb region (shared: the page cache is the
 *    memory): its st_blocks, which both filesystems keep (SEEK_DATA is no
 *    help: hugetlbfs says all of a file is data), less the stamp of a new
 *    kept region (HPR_F_ATTACH), which lives in the file past the region's
 *    end (stamp.h): a 4 KiB page on tmpfs, a huge page on hugetlbfs. Without
 *    that, a lazy load into a freshly made kept region was refused as "holds
 *    pages" (cassandra-like's --restart --cache-image).
 *  - The mapping: PAGEMAP_SCAN (Linux 6.7) for one present or swapped
 *    page, which walks only the page tables there are.
 * mincore over the range (one byte a 4 KiB page, and for a file mapping
 * a page cache lookup each) is the fallback: an emptiness scan of a
 * 4 GiB shmem region cost more than the rest of the lazy hpr_load.
 */
static int region_resident(hpr_region *r)
{
	struct stat st;
	int rc;

	if (r->fd >= 0) {
		if (hpr__os->fstat(r->fd, &st))
			return hpr__os->any_resident(r->base, r->size);
		/* a MAP_SHARED mapping of it (backend.c) */
		return (uint64_t)st.st_blocks * 512 > hpr__stamp_len(r);
	}
	rc = hpr__pagemap_any((uintptr_t)r->base, (uintptr_t)r->base + r->size);
	return rc >= 0 ? rc : hpr__os->any_resident(r->base, r->size);
}

/* The region holds nothing: no page faulted in, released or resident. */
int hpr__lazy_check_region(hpr_region *r)
{
	if (r->attached || (r->flags & HPR_F_GUARD) || r->locked)
		return hpr__fail(-EINVAL,
				 "hpr_load: HPR_SNAP_LAZY cannot load region '%s': it is %s",
				 r->name,
				 r->attached ? "attached to a kept file" :
				 r->locked   ? "locked (HPR_F_LOCK)" :
					       "in guard mode (HPR_F_GUARD)");
	if (atomic_load(&r->present_pages) || atomic_load(&r->lazy_pages) ||
	    region_resident(r) != 0)
		return hpr__fail(-EBUSY,
				 "hpr_load: HPR_SNAP_LAZY loads into an empty region, and region "
				 "'%s' holds pages: load it eagerly, or create a new region",
				 r->name);
	return 0;
}

/* The previous load of r, ended and waited for, is freed here; one still
 * running or not waited for is -EBUSY (hpr__lazy_busy, checked before). */
static void reap(hpr_region *r)
{
	struct hpr__lazy *L;

	pthread_mutex_lock(&r->lazy_mu);
	L = atomic_load(&r->lazy);
	if (L && atomic_load(&L->ended) && !L->users) {
		atomic_store(&r->lazy, NULL);
		pthread_mutex_unlock(&r->lazy_mu);
		pthread_mutex_lock(&L->wait_mu);
		if (L->threads && !L->joined)
			pthread_join(L->handler, NULL);
		L->joined = true;
		pthread_mutex_unlock(&L->wait_mu);
		lazy_free(L);
		return;
	}
	pthread_mutex_unlock(&r->lazy_mu);
}

/* userfaultfd cannot be had: say why, and hpr_load loads eagerly (1) */
static int eager(hpr_region *r, int why_err, const char *why)
{
	hpr__log(HPR_LOG_WARN,
		 "hpr_load (HPR_SNAP_LAZY) of region '%s': %s (%s); loading it eagerly: run as "
		 "root, give the process access to /dev/userfaultfd (Linux 6.1), or set "
		 "vm.unprivileged_userfaultfd = 1",
		 r->name, why, strerror(-why_err));
	atomic_store(&r->lazy_load, HPR_LAZY_EAGER);
	atomic_store(&r->lazy_fallback_err, why_err);
	return 1;
}

static int lazy_start(struct hpr__lazy *L)
{
	hpr_region *r = L->r;
	int rc;

	atomic_store(&r->lazy_load, HPR_LAZY_UFFD);
	atomic_store(&r->lazy_fallback_err, 0);
	atomic_store(&r->snapshot_io, HPR_IO_PREADWRITE);
	/* the driver first: hpr-uffd joins it, so driver_on is set before
	 * hpr-uffd can read it (TSan saw hpr-uffd read it while it was set) */
	hpr__fork_lock();
	hpr__fork_handle_add(&L->fh);
	rc = hpr__thread_start(&L->driver, hpr__lazy_driver, L, "hpr-lazyfill", NULL, 256 * 1024);
	L->driver_on = !rc;
	if (!rc) {
		rc = hpr__thread_start(&L->handler, hpr__lazy_handler, L, "hpr-uffd", NULL,
				       256 * 1024);
		L->threads = !rc;
	}
	hpr__fork_unlock();
	if (rc)
		hpr__lazy_fail(L, rc, "cannot start the load's threads: %s", strerror(-rc));
	if (rc)
		hpr__lazy_go(L);
	if (rc && L->driver_on && !L->threads) { /* the fill stops at its next page */
		pthread_join(L->driver, NULL);
		L->driver_on = false;
	}
	return rc;
}

int hpr__lazy_load(hpr_region *r, int fd, struct hpr__snap_ent **tab, uint64_t data_off,
		   size_t *changed)
{
	struct hpr__lazy *L = NULL;
	const char *why = "";
	int rc;

	reap(r); /* hpr_load checked the region (hpr__lazy_check_region) */
	rc = lazy_alloc(r, fd, &L);
	if (rc) {
		lazy_free(L);
		return rc;
	}
	L->tab = *tab; /* borrowed until the load starts: an eager load reads it */
	L->data_off = data_off;
	for (size_t i = 0; i < r->npages; i++)
		L->ndata += hpr__lazy_is_data(L, i);
	rc = L->ndata ? uffd_setup(L, &why) : 0;
	if (rc || !L->ndata) { /* no data: all holes, the empty region is the snapshot */
		L->tab = NULL;
		lazy_free(L);
		if (rc)
			return eager(r, rc, why);
		atomic_store(&r->lazy_load, HPR_LAZY_UFFD);
		atomic_store(&r->lazy_fallback_err, 0);
		return 0;
	}
	*tab = NULL;
	rc = lazy_start(L);
	if (rc && !L->threads) { /* nobody to hpr__lazy_unregister: do it here */
		hpr__lazy_unregister(L);
		lazy_free(L);
		return hpr__fail(rc, "hpr_load: cannot start a thread: %s", strerror(-rc));
	}
	pthread_mutex_lock(&r->lazy_mu);
	atomic_store(&r->lazy, L);
	pthread_mutex_unlock(&r->lazy_mu);
	if (changed)
		*changed = L->ndata << r->page_shift;
	if (rc)
		return hpr_load_wait(r);
	hpr__lazy_go(L); /* the fill does not take the CPU from this return */
	return 0;
}

/* ---- the rest of the library asks ---- */

/*
 * hpr_fault_in during a lazy load loads the saved pages of its range in the
 * caller. Once the load has failed -- whether or not hpr-uffd has ended it
 * yet, and even if the range's pages were mapped before the failure -- it
 * returns the load's own error (the errno and cause hpr_load_wait will
 * return), until hpr_load_wait has emptied the region. It used to answer
 * -EBUSY ("being loaded lazily") once hpr-uffd had ended the failed load,
 * and the load's error only when it asked before that: which one a caller
 * saw depended on thread timing (cass_image's damaged case, 2 in 17).
 */
static int failed(struct hpr__lazy *L, int err)
{
	char m[HPR__ERR_MSG];

	pthread_mutex_lock(&L->mu);
	snprintf(m, sizeof(m), "%s", L->msg);
	pthread_mutex_unlock(&L->mu);
	return hpr__fail(err,
			 "hpr_fault_in: the lazy load of region '%s' failed: %s; hpr_load_wait() "
			 "returns this error and empties the region",
			 L->r->name, m[0] ? m : strerror(-err));
}

int hpr__lazy_fault_range(hpr_region *r, size_t first, size_t last)
{
	struct hpr__lazy *L = atomic_load_explicit(&r->lazy, memory_order_acquire);
	int rc;

	if (!L)
		return 0;
	rc = atomic_load(&L->err);
	if (rc) /* failed: ended or not yet */
		return atomic_load(&L->undone) ? 0 : failed(L, rc);
	if (atomic_load(&L->ended))
		return 0;
	for (size_t i = first; i < last; i++) {
		if (!hpr__lazy_is_data(L, i) || hpr__page_state(r, i) == HPR_PS_PRESENT)
			continue;
		rc = hpr__lazy_load_one(L, i, true, true);
		if (rc) /* the load's first error, as hpr_load_wait will say */
			return failed(L, atomic_load(&L->err) ? atomic_load(&L->err) : rc);
	}
	return 0;
}

/* A failed load: the region empty again, read-write. */
static void undo(struct hpr__lazy *L)
{
	hpr_region *r = L->r;
	unsigned any = HPR_PS_BIT(HPR_PS_ABSENT) | HPR_PS_BIT(HPR_PS_PRESENT);

	if (L->child && r->backend != HPR_BACKEND_THP)
		return; /* a shared file the parent is loading: not ours to punch */
	for (size_t i = 0; i < r->npages; i++) {
		uint8_t st;

		if (hpr__page_take(r, i, any, HPR_PS_BUSY, true, &st) != 1)
			continue;
		hpr__discard_page(r, i);
		hpr__page_put(r, i, st, HPR_PS_ABSENT);
	}
	hpr__os->mprotect(r->base, r->size, PROT_READ | PROT_WRITE);
}

/* The API's way in: r's lazy load (NULL: none), held (users) so that
 * the next load cannot free it until unhold; -EINVAL without a region. */
static int hold(hpr_region *r, const char *fn, struct hpr__lazy **out)
{
	hpr__err_clear();
	*out = NULL;
	if (!r)
		return hpr__fail(-EINVAL, "%s: region is NULL", fn);
	pthread_mutex_lock(&r->lazy_mu);
	*out = atomic_load(&r->lazy);
	if (*out)
		(*out)->users++;
	pthread_mutex_unlock(&r->lazy_mu);
	return 0;
}

static void unhold(struct hpr__lazy *L)
{
	pthread_mutex_lock(&L->r->lazy_mu);
	L->users--;
	pthread_mutex_unlock(&L->r->lazy_mu);
}

int hpr_load_wait(hpr_region *r)
{
	struct hpr__lazy *L;
	int rc = hold(r, "hpr_load_wait", &L);

	if (!L)
		return rc;
	pthread_mutex_lock(&L->wait_mu);
	if (L->threads && !L->joined)
		pthread_join(L->handler, NULL);
	L->joined = true;
	rc = L->result;
	if (rc && !atomic_load(&L->undone)) {
		undo(L);
		atomic_store(&L->undone, true);
	}
	L->waited = true;
	pthread_mutex_unlock(&L->wait_mu);
	if (rc)
		rc = lazy_err(L, rc);
	unhold(L);
	return rc;
}

int hpr_load_progress(hpr_region *r, size_t *loaded, size_t *demanded, size_t *total)
{
	struct hpr__lazy *L;
	int rc = hold(r, "hpr_load_progress", &L);

	if (loaded)
		*loaded = L ? atomic_load(&L->loaded) << r->page_shift : 0;
	if (demanded)
		*demanded = L ? atomic_load(&L->demanded) << r->page_shift : 0;
	if (total)
		*total = L ? L->ndata << r->page_shift : 0;
	if (L)
		unhold(L);
	return rc;
}

int hpr_load_cancel(hpr_region *r)
{
	struct hpr__lazy *L;
	int rc = hold(r, "hpr_load_cancel", &L);

	if (!L)
		return rc;
	/* not under lazy_mu: L->mu comes first in the fork handlers' order */
	if (!atomic_load(&L->ended))
		hpr__lazy_fail(L, -ECANCELED, "the lazy load was cancelled (hpr_load_cancel)");
	unhold(L);
	return 0;
}

void hpr__lazy_destroy(hpr_region *r)
{
	struct hpr__lazy *L = atomic_load(&r->lazy);

	if (!L)
		return;
	if (!atomic_load(&L->ended))
		hpr__lazy_fail(L, -ECANCELED, "the region was destroyed during the lazy load");
	if (L->threads && !L->joined)
		pthread_join(L->handler, NULL);
	atomic_store(&r->lazy, NULL);
	lazy_free(L);
}
