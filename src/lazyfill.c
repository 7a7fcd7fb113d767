/* SPDX-License-Identifier: MIT */
/*
 * The lazy load's page work (lazyload.c has the API and the life cycle;
 * docs/snapshot.md "Lazy load"): each saved page read into a bounce
 * buffer, verified, mapped through the userfaultfd (UFFDIO_MOVE or _COPY,
 * page cache + UFFDIO_CONTINUE) and published in the fault table; holes
 * answered with zeros; hpr-uffd, which serves the faults itself and, at the
 * end, unregisters the region, maps shmem's page cache and collapses what
 * is not huge, or after an error makes the unloaded saved pages PROT_NONE
 * first; the fill job, which waits while hpr-uffd serves a fault.
 *
 * Beside the OS layer this file calls poll(2), read(2) on the userfaultfd
 * and write(2) on an eventfd directly, as the reclaimer does with its pipe.
 */
#define _GNU_SOURCE
#include "lazyload.h"

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
#include <unistd.h>

int hpr__lazy_ioctl(struct hpr__lazy *L, unsigned long req, void *arg)
{
	return hpr__os->ioctl(L->uffd, req, arg);
}

void hpr__lazy_kick(struct hpr__lazy *L)
{
	uint64_t one = 1;

	if (write(L->evfd, &one, sizeof(one)) < 0) {
		/* the counter is not zero: hpr-uffd wakes anyway */
	}
}

/* The load's first error, with its message; wakes hpr-uffd. */
int hpr__lazy_fail(struct hpr__lazy *L, int err, const char *fmt, ...)
{
	va_list ap;
	int zero = 0;

	pthread_mutex_lock(&L->mu);
	if (atomic_compare_exchange_strong(&L->err, &zero, err)) {
		va_start(ap, fmt);
		vsnprintf(L->msg, sizeof(L->msg), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&L->mu);
	hpr__lazy_kick(L);
	return err;
}

/*
 * A page-sized bounce buffer: a free one, or a new mapping; NULL. It is
 * huge-aligned and MADV_HUGEPAGE, so the read into it makes it one huge
 * page, which for THP UFFDIO_MOVE puts in place whole; MADV_DONTFORK keeps a
 * child from sharing it (the kernel moves only pages this mm alone has).
 */
static void *buf_get(struct hpr__lazy *L)
{
	size_t ps = L->r->page_size;
	struct lazy_buf *b;
	void *p = NULL;
	char *a;

	pthread_mutex_lock(&L->mu);
	b = L->bufs;
	if (b)
		L->bufs = b->next;
	pthread_mutex_unlock(&L->mu);
	if (b) {
		p = b->p;
		free(b);
		return p;
	}
	if (hpr__os->mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0,
			  &p))
		return NULL;
	a = (char *)(((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1));
	if (a > (char *)p)
		hpr__os->munmap(p, (size_t)(a - (char *)p));
	if (a + ps < (char *)p + 2 * ps)
		hpr__os->munmap(a + ps, (size_t)((char *)p + 2 * ps - (a + ps)));
	/* THP or not: fewer TLB misses for the copies into it */
	hpr__os->madvise(a, ps, MADV_HUGEPAGE);
	hpr__os->madvise(a, ps, MADV_DONTFORK);
	return a;
}

static void buf_put(struct hpr__lazy *L, void *p)
{
	struct lazy_buf *b = malloc(sizeof(*b));

	if (!b) {
		hpr__os->munmap(p, L->r->page_size);
		return;
	}
	b->p = p;
	pthread_mutex_lock(&L->mu);
	b->next = L->bufs;
	L->bufs = b;
	pthread_mutex_unlock(&L->mu);
}

/* ---- the userfaultfd answers ---- */

static void uffd_wake(struct hpr__lazy *L, size_t idx)
{
	struct uffdio_range rg = { .start = (uintptr_t)L->r->base + hpr__page_off(L->r, idx),
				   .len = L->r->page_size };

	if (L->uffd >= 0)
		hpr__lazy_ioctl(L, UFFDIO_WAKE, &rg);
}

/* An answer to page idx's faults (UFFDIO_COPY, _CONTINUE, _ZEROPAGE or
 * _MOVE on arg): -EAGAIN (the mm is changing, or part done) is retried for
 * the part not done, of which the kernel reports *done bytes (start, len
 * and src, for a copy or a move, move past them). */
static int uffd_answer(struct hpr__lazy *L, unsigned long req, void *arg, __u64 *start, __u64 *len,
		       __u64 *src, __s64 *done)
{
	for (;;) {
		int rc = hpr__lazy_ioctl(L, req, arg);

		if (rc != -EAGAIN)
			return rc;
		if (*done > 0) {
			*start += (__u64)*done;
			*len -= (__u64)*done;
			if (src)
				*src += (__u64)*done;
		}
		*done = 0;
	}
}

/* Copy len bytes from src to dst in the region (MISSING mode). */
static int uffd_copy_at(struct hpr__lazy *L, uintptr_t dst, const void *src, size_t len)
{
	struct uffdio_copy c = {
		.dst = dst,
		.src = (uintptr_t)src,
		.len = len,
		.mode = UFFDIO_COPY_MODE_DONTWAKE,
	};

	return uffd_answer(L, UFFDIO_COPY, &c, &c.dst, &c.len, &c.src, &c.copy);
}

/* Map page idx from the page cache (MINOR mode); -EEXIST: mapped. */
static int uffd_continue(struct hpr__lazy *L, size_t idx)
{
	struct uffdio_continue c = {
		.range = { .start = (uintptr_t)L->r->base + hpr__page_off(L->r, idx),
			   .len = L->r->page_size },
		.mode = UFFDIO_CONTINUE_MODE_DONTWAKE,
	};

	return uffd_answer(L, UFFDIO_CONTINUE, &c, &c.range.start, &c.range.len, NULL, &c.mapped);
}

static int uffd_zeropage(struct hpr__lazy *L, size_t idx)
{
	struct uffdio_zeropage z = {
		.range = { .start = (uintptr_t)L->r->base + hpr__page_off(L->r, idx),
			   .len = L->r->page_size },
		.mode = UFFDIO_ZEROPAGE_MODE_DONTWAKE,
	};

	return uffd_answer(L, UFFDIO_ZEROPAGE, &z, &z.range.start, &z.range.len, NULL, &z.zeropage);
}

/*
 * THP: move the bounce page src, a huge page already (see buf_get), into
 * page idx whole: UFFDIO_MOVE (Linux 6.8) moves the PMD, no copy and no
 * collapse. Where the kernel has no UFFDIO_MOVE (6.1-6.7), or refuses it
 * (-EINVAL, -ENOTTY: never again in this load; -EBUSY and the like: this
 * page only), what is not moved yet is copied (UFFDIO_COPY, 4 KiB pages)
 * and collapsed below. src is empty after a move: the next read into it
 * faults a new huge page in.
 */
static int thp_map(struct hpr__lazy *L, size_t idx, void *src)
{
	hpr_region *r = L->r;
	struct uffdio_move m = {
		.dst = (uintptr_t)r->base + hpr__page_off(r, idx),
		.src = (uintptr_t)src,
		.len = r->page_size,
		.mode = UFFDIO_MOVE_MODE_DONTWAKE,
	};
	int rc = -EOPNOTSUPP;

	if (L->move && !atomic_load_explicit(&L->move_off, memory_order_relaxed)) {
		rc = uffd_answer(L, UFFDIO_MOVE, &m, &m.dst, &m.len, &m.src, &m.move);
		if (rc == -EINVAL || rc == -ENOTTY || rc == -EOPNOTSUPP || rc == -EPERM) {
			if (!atomic_exchange(&L->move_off, true))
				hpr__log(
					HPR_LOG_INFO,
					"hpr_load (lazy) of region '%s': UFFDIO_MOVE refused (%s); "
					"copying pages and collapsing them instead",
					r->name, strerror(-rc));
		}
	}
	if (!rc) {
		atomic_fetch_add(&L->moved, 1);
	} else {
		if (m.len < r->page_size) /* the part moved before the refusal */
			atomic_fetch_add(&L->moved, 1);
		else
			atomic_fetch_add(&L->copied, 1);
		rc = uffd_copy_at(L, (uintptr_t)m.dst, (void *)(uintptr_t)m.src, (size_t)m.len);
		if (rc)
			return rc;
	}
	/* UFFDIO_COPY mapped 512 small pages, and a move of a bounce page
	 * the kernel could not make huge moved small ones; a refusal is
	 * retried after the region is unregistered */
	if (hpr__caps()->info.have_collapse &&
	    hpr__range_is_huge(r->base + hpr__page_off(r, idx), r->page_size) != 1)
		hpr__collapse_one(r, r->base + hpr__page_off(r, idx), true);
	return 0;
}

/*
 * Put the bytes at src (verified) in place as page idx. shmem: into the
 * page cache through the region's file (a huge folio on a huge= tmpfs);
 * map (a thread waits on the page) also maps it (UFFDIO_CONTINUE), else
 * the end of the load maps all such pages at once.
 */
static int map_page(struct hpr__lazy *L, size_t idx, void *src, bool map)
{
	hpr_region *r = L->r;
	int rc;

	if (r->backend == HPR_BACKEND_THP)
		return thp_map(L, idx, src);
	if (!L->minor)
		return uffd_copy_at(L, (uintptr_t)r->base + hpr__page_off(r, idx), src,
				    r->page_size);
	rc = hpr__os->pwrite_full(r->fd, src, r->page_size, (off_t)hpr__page_off(r, idx));
	if (!rc && map)
		rc = uffd_continue(L, idx);
	return rc == -EEXIST ? 0 : rc;
}

/*
 * hpr-uffd's own bounce buffer, kept populated: a touch's page is read
 * into memory that is there (a fresh huge page costs its zeroing, 2 MiB,
 * about what the read costs), and is refilled after the touch is answered
 * when UFFDIO_MOVE took its page. NULL in other threads.
 */
static __thread void *tls_hbuf;
static __thread bool tls_hbuf_moved;

static void hbuf_refill(void)
{
	if (!tls_hbuf_moved)
		return;
	tls_hbuf_moved = false;
	*(volatile char *)tls_hbuf = 0; /* one huge page (or the first 4 KiB) */
}

/* Read, verify and map saved page idx (FAULTING, ours). */
static int fetch_page(struct hpr__lazy *L, size_t idx, bool map)
{
	hpr_region *r = L->r;
	uint64_t fo = L->data_off + hpr__page_off(r, idx);
	void *buf = tls_hbuf ? tls_hbuf : buf_get(L);
	ssize_t n;
	int rc;

	if (!buf)
		return hpr__lazy_fail(L, -ENOMEM, "no memory for a %zu-byte read buffer",
				      r->page_size);
	n = hpr__os->pread_full(L->fd, buf, r->page_size, (off_t)fo);
	if (n < 0)
		rc = hpr__lazy_fail(L, (int)n, "snapshot read at file offset %#llx failed: %s",
				    (unsigned long long)fo, strerror((int)-n));
	else if ((size_t)n < r->page_size)
		rc = hpr__lazy_fail(L, -EBADMSG,
				    "snapshot read at file offset %#llx: unexpected end of file: "
				    "the file was truncated",
				    (unsigned long long)(fo + (uint64_t)n));
	else if (hpr__page_sum(buf, r->page_size, idx) != L->tab[idx].sum)
		rc = hpr__lazy_fail(L, -EBADMSG,
				    "snapshot page %zu (file offset %#llx): checksum mismatch: the "
				    "file is corrupted",
				    idx, (unsigned long long)fo);
	else if ((rc = map_page(L, idx, buf, map)))
		rc = hpr__lazy_fail(L, rc, "mapping page %zu (region offset %#zx) failed: %s%s",
				    idx, hpr__page_off(r, idx), strerror(-rc),
				    r->backend == HPR_BACKEND_HUGETLB && rc == -ENOMEM ?
					    ": the hugetlb pool ran out" :
					    "");
	if (buf == tls_hbuf)
		tls_hbuf_moved = r->backend == HPR_BACKEND_THP;
	else
		buf_put(L, buf);
	return rc;
}

/* Page idx, taken (FAULTING): load it, publish it, wake its waiters. */
static int load_taken(struct hpr__lazy *L, size_t idx, bool demand)
{
	int rc = atomic_load(&L->err);

	if (!rc)
		rc = fetch_page(L, idx, demand);
	if (!rc && demand)
		atomic_fetch_add(&L->demanded, 1);
	if (!rc && atomic_fetch_add(&L->loaded, 1) + 1 == L->ndata)
		hpr__lazy_kick(L);
	hpr__page_put(L->r, idx, HPR_PS_ABSENT, rc ? HPR_PS_ABSENT : HPR_PS_PRESENT);
	if (!rc)
		uffd_wake(L, idx);
	return rc;
}

/* Load saved page idx exactly once, whoever asks; demand counts it as
 * loaded because a thread touched it. Without wait, a page another
 * thread is loading is left to it (it wakes the page's waiters). */
int hpr__lazy_load_one(struct hpr__lazy *L, size_t idx, bool demand, bool wait)
{
	uint8_t was;
	int t, rc = atomic_load(&L->err);

	if (rc)
		return rc;
	t = hpr__page_take(L->r, idx, HPR_PS_BIT(HPR_PS_ABSENT), HPR_PS_FAULTING, wait, &was);
	if (t == 1)
		return load_taken(L, idx, demand);
	if (t == 0) { /* loaded already: a late message, or shmem not mapped yet */
		if (L->minor && demand)
			uffd_continue(L, idx);
		uffd_wake(L, idx);
	}
	return 0;
}

/* A fault on a hole of the snapshot: zeros, no file I/O. hugetlb and
 * shmem zeros are resident pages: PRESENT in the table. THP gets the
 * shared zero page (UFFDIO_ZEROPAGE: no copy, nothing allocated), so the
 * page stays ABSENT there. A page someone is populating (hpr_fault_in of
 * a hole: its populate is the fault being answered) is answered without
 * the table. */
static void serve_hole(struct hpr__lazy *L, size_t idx)
{
	hpr_region *r = L->r;
	uint8_t was = 0;
	int t = -1, rc;

	if (r->backend != HPR_BACKEND_THP)
		t = hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_ABSENT), HPR_PS_FAULTING, false, &was);
	if (t == 0) {
		if (L->minor)
			uffd_continue(L, idx);
		uffd_wake(L, idx);
		return;
	}
	if (r->backend == HPR_BACKEND_THP)
		rc = uffd_zeropage(L, idx);
	else if (L->minor)
		rc = map_page(L, idx, L->zero, true);
	else
		rc = uffd_copy_at(L, (uintptr_t)r->base + hpr__page_off(r, idx), L->zero,
				  r->page_size);
	if (rc == -EEXIST)
		rc = 0;
	if (t == 1)
		hpr__page_put(r, idx, HPR_PS_ABSENT, rc ? HPR_PS_ABSENT : HPR_PS_PRESENT);
	if (!rc)
		uffd_wake(L, idx);
	if (rc)
		hpr__lazy_fail(L, rc, "zero-filling page %zu (a hole of the snapshot) failed: %s",
			       idx, strerror(-rc));
}

/*
 * One fault message, served here in hpr-uffd: read, verified and mapped
 * at once, never queued behind the fill's pages. A page the fill (or an
 * hpr_fault_in caller) has in hand is left to it: it wakes the page's
 * waiters when it is mapped, and a shmem page it only put in the page
 * cache faults again (MINOR) and is mapped here then.
 */
static void on_fault(struct hpr__lazy *L, uintptr_t addr)
{
	hpr_region *r = L->r;
	size_t idx;

	if (addr < (uintptr_t)r->base || addr >= (uintptr_t)r->base + r->size)
		return;
	idx = (addr - (uintptr_t)r->base) >> r->page_shift;
	if (!hpr__lazy_is_data(L, idx))
		serve_hole(L, idx);
	else
		hpr__lazy_load_one(L, idx, true, false);
}

/* ---- the fill job (hpr-lazyfill and the workers) ---- */

void hpr__lazy_go(struct hpr__lazy *L)
{
	pthread_mutex_lock(&L->mu);
	L->go = true;
	pthread_cond_broadcast(&L->cv);
	pthread_mutex_unlock(&L->mu);
}

/* hpr-uffd serves faults: the fill waits (a bounded while, should a
 * fault take long), so the CPU and the memory bandwidth are the touch's */
static void fill_yield(struct hpr__lazy *L)
{
	struct timespec ts;

	if (!atomic_load_explicit(&L->pending, memory_order_relaxed))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 20 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&L->mu);
	L->fill_waits++;
	while (atomic_load(&L->pending) && !atomic_load(&L->err) &&
	       pthread_cond_timedwait(&L->cv, &L->mu, &ts) == 0)
		;
	L->fill_waits--;
	pthread_mutex_unlock(&L->mu);
}

static int fill_page(hpr_region *r, size_t idx, void *arg)
{
	struct hpr__lazy *L = arg;
	int rc;

	(void)r;
	fill_yield(L);
	rc = atomic_load(&L->err);
	if (rc)
		return rc;
	return hpr__lazy_is_data(L, idx) ? hpr__lazy_load_one(L, idx, false, false) : 0;
}

void *hpr__lazy_driver(void *arg)
{
	struct hpr__lazy *L = arg;

	pthread_mutex_lock(&L->mu);
	while (!L->go)
		pthread_cond_wait(&L->cv, &L->mu);
	pthread_mutex_unlock(&L->mu);
	hpr__run(L->r, &(struct hpr__job_ops){ .page = fill_page }, L, 0, L->r->npages);
	atomic_store(&L->fill_done, true);
	hpr__lazy_kick(L);
	return NULL;
}

/* ---- the end ---- */

/* Saved pages not mapped: PROT_NONE, in runs. */
void hpr__lazy_protect(struct hpr__lazy *L)
{
	hpr_region *r = L->r;

	for (size_t i = 0; i < r->npages;) {
		size_t j = i;

		while (j < r->npages && hpr__lazy_is_data(L, j) &&
		       hpr__page_state(r, j) != HPR_PS_PRESENT)
			j++;
		if (j > i) {
			hpr__os->mprotect(r->base + hpr__page_off(r, i), (j - i) << r->page_shift,
					  PROT_NONE);
			i = j;
		} else {
			i++;
		}
	}
}

void hpr__lazy_unregister(struct hpr__lazy *L)
{
	struct uffdio_range rg = { .start = (uintptr_t)L->r->base, .len = L->r->size };
	int rc;

	if (L->uffd < 0 || L->unregistered)
		return;
	/* Wakes every thread still blocked on the region: it faults again,
	 * now without userfaultfd. The descriptor stays open until the load
	 * is freed: an hpr_fault_in caller may still answer or wake on it
	 * (the kernel refuses, harmlessly), and a closed number could be
	 * another file's by then (TSan saw the close race such a wake). */
	rc = hpr__lazy_ioctl(L, UFFDIO_UNREGISTER, &rg);
	if (rc)
		hpr__log(HPR_LOG_ERROR,
			 "hpr_load (lazy) of region '%s': UFFDIO_UNREGISTER failed: %s; threads "
			 "touching pages it had not loaded wait until the region is destroyed",
			 L->r->name, strerror(-rc));
	/*
	 * ...but UFFDIO_UNREGISTER's own wake is not enough. It wakes the
	 * waiters queued when it runs (fs/userfaultfd.c: wake_userfault, then
	 * userfaultfd_clear_vma), and a fault taken under the per-VMA lock
	 * rather than the mmap lock (newer kernels, 6.18 here) that has seen the VMA
	 * registered but is not queued yet -- preempted, or asleep on the
	 * hugetlb fault mutex, which every process's hugetlb faults share --
	 * queues itself after that wake: the unregister waits for it only
	 * when it write-locks the VMA, after the wake. Nobody reads the
	 * userfaultfd any more, so that thread slept until hpr_destroy closed
	 * it (test_lazyload lazy_hugetlb: a toucher stuck 300 s on a loaded
	 * machine). Every fault that saw the range registered is queued by
	 * the time UFFDIO_UNREGISTER returns, so one more wake over the whole
	 * range reaches it; it is refused by no kernel (a wake needs no
	 * registration) and costs nothing when nobody waits.
	 */
	hpr__lazy_ioctl(L, UFFDIO_WAKE, &rg);
	L->unregistered = true;
}

/* shmem, unregistered: the saved pages the fill put in the page cache
 * mapped in one MADV_POPULATE_WRITE a run (huge folios map as PMDs),
 * not one UFFDIO_CONTINUE each; where the kernel refuses, a touch maps
 * them. Holes stay unmapped: they take no memory. */
static void map_all(struct hpr__lazy *L)
{
	hpr_region *r = L->r;

	for (size_t i = 0; i < r->npages;) {
		size_t j = i;

		while (j < r->npages && hpr__lazy_is_data(L, j))
			j++;
		if (j > i &&
		    hpr__os->madvise(r->base + hpr__page_off(r, i), (j - i) << r->page_shift,
				     MADV_POPULATE_WRITE) == -EINVAL)
			return; /* before Linux 5.14 */
		i = j > i ? j : i + 1;
	}
}

/* Every page present: PMD-mapped, collapsing what is not (shmem's
 * UFFDIO_CONTINUE maps PTEs; a THP collapse refused while registered). */
static void huge_pass(struct hpr__lazy *L)
{
	hpr_region *r = L->r;
	size_t small = 0;

	if (r->backend == HPR_BACKEND_HUGETLB || r->degraded || !hpr__caps()->info.have_collapse)
		return;
	for (size_t i = 0; i < r->npages; i++) {
		char *a = r->base + hpr__page_off(r, i);

		if (hpr__page_state(r, i) != HPR_PS_PRESENT ||
		    hpr__range_is_huge(a, r->page_size) == 1)
			continue;
		if (hpr__collapse_one(r, a, true)) {
			small++;
			if (r->flags & HPR_F_FALLBACK)
				atomic_fetch_add(&r->small_pages, 1);
		}
	}
	if (small)
		hpr__log(HPR_LOG_WARN,
			 "hpr_load (lazy) of region '%s': %zu pages stayed small (MADV_COLLAPSE "
			 "refused); hpr_stats().small_mapped counts them",
			 r->name, small);
}

void *hpr__lazy_handler(void *arg)
{
	struct hpr__lazy *L = arg;
	struct pollfd pf[2] = { { .fd = L->uffd, .events = POLLIN },
				{ .fd = L->evfd, .events = POLLIN } };
	struct uffd_msg m[16];
	int rc;

	tls_hbuf = buf_get(L); /* NULL: the shared ones, as the fill does */
	if (tls_hbuf)
		memset(tls_hbuf, 0, L->r->page_size);
	for (;;) {
		ssize_t n;

		if (atomic_load(&L->err) ||
		    (atomic_load(&L->loaded) == L->ndata && atomic_load(&L->fill_done)))
			break;
		if (poll(pf, 2, -1) < 0)
			continue; /* EINTR */
		if (pf[1].revents & POLLIN) {
			uint64_t v;

			if (read(L->evfd, &v, sizeof(v)) < 0) {
				/* EAGAIN: another read took it */
			}
		}
		if (!(pf[0].revents & POLLIN))
			continue;
		/* the fill waits at its next page until these are served */
		atomic_fetch_add(&L->pending, 1);
		while ((n = read(L->uffd, m, sizeof(m))) > 0)
			for (size_t i = 0; i < (size_t)n / sizeof(m[0]); i++)
				if (m[i].event == UFFD_EVENT_PAGEFAULT)
					on_fault(L, (uintptr_t)m[i].arg.pagefault.address);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			hpr__lazy_fail(L, -errno, "reading the userfaultfd failed: %s",
				       strerror(errno));
		atomic_fetch_sub(&L->pending, 1);
		pthread_mutex_lock(&L->mu);
		if (L->fill_waits)
			pthread_cond_broadcast(&L->cv);
		pthread_mutex_unlock(&L->mu);
		if (tls_hbuf)
			hbuf_refill();
	}
	if (tls_hbuf)
		buf_put(L, tls_hbuf);
	tls_hbuf = NULL;
	/* the fill ends at its next page once err is set */
	if (L->driver_on)
		pthread_join(L->driver, NULL);
	rc = atomic_load(&L->err);
	if (rc)
		hpr__lazy_protect(L);
	hpr__lazy_unregister(L);
	if (!rc && L->minor)
		map_all(L);
	if (!rc)
		huge_pass(L);
	L->result = rc;
	atomic_store(&L->ended, true);
	if (rc)
		hpr__log(HPR_LOG_ERROR, "hpr_load (lazy) of region '%s' failed: %s", L->r->name,
			 L->msg);
	else
		hpr__log(HPR_LOG_INFO,
			 "hpr_load (lazy) of region '%s': %zu pages loaded, %zu "
			 "on demand",
			 L->r->name, atomic_load(&L->loaded), atomic_load(&L->demanded));
	return NULL;
}
