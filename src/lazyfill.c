/* SPDX-License-Identifier: MIT */
/*
 * The lazy load's page work (lazyload.c has the API and the life cycle;
 * docs/snapshot.md "Lazy load"): each saved page read into a bounce
 * buffer, verified, mapped through the userfaultfd (UFFDIO_COPY,
 * page cache + UFFDIO_CONTINUE) and published in the fault table; holes
 * answered with zeros; the demand queue the fill job's workers serve
 * before each page in file order; hpr-uffd, which reads the faults and,
 * at the end, unregisters the region and collapses what is not huge, or
 * after an error makes the unloaded saved pages PROT_NONE first.
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

/* A page-sized bounce buffer: a free one, or a new mapping; NULL. */
static void *buf_get(struct hpr__lazy *L)
{
	struct lazy_buf *b;
	void *p = NULL;

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
	if (hpr__os->mmap(NULL, L->r->page_size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p))
		return NULL;
	return p;
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

/* An answer to page idx's faults (UFFDIO_COPY, _CONTINUE or _ZEROPAGE on
 * arg): -EAGAIN (the mm is changing) is retried for the part not done, of
 * which the kernel reports *done bytes (start, len and src, for a copy,
 * move past them). */
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

/* Map src over page idx (MISSING mode). */
static int uffd_copy(struct hpr__lazy *L, size_t idx, const void *src)
{
	struct uffdio_copy c = {
		.dst = (uintptr_t)L->r->base + hpr__page_off(L->r, idx),
		.src = (uintptr_t)src,
		.len = L->r->page_size,
		.mode = UFFDIO_COPY_MODE_DONTWAKE,
	};

	return uffd_answer(L, UFFDIO_COPY, &c, &c.dst, &c.len, &c.src, &c.copy);
}

/* Map page idx from the page cache (MINOR mode). */
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

/* Put the bytes at src (verified) in place as page idx. */
static int map_page(struct hpr__lazy *L, size_t idx, const void *src)
{
	hpr_region *r = L->r;
	int rc;

	if (!L->minor)
		return uffd_copy(L, idx, src);
	rc = hpr__os->pwrite_full(r->fd, src, r->page_size, (off_t)hpr__page_off(r, idx));
	return rc ? rc : uffd_continue(L, idx);
}

/* Read, verify and map saved page idx (FAULTING, ours). */
static int fetch_page(struct hpr__lazy *L, size_t idx)
{
	hpr_region *r = L->r;
	uint64_t fo = L->data_off + hpr__page_off(r, idx);
	void *buf = buf_get(L);
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
	else if ((rc = map_page(L, idx, buf)))
		rc = hpr__lazy_fail(L, rc, "mapping page %zu (region offset %#zx) failed: %s%s",
				    idx, hpr__page_off(r, idx), strerror(-rc),
				    r->backend == HPR_BACKEND_HUGETLB && rc == -ENOMEM ?
					    ": the hugetlb pool ran out" :
					    "");
	buf_put(L, buf);
	if (!rc && r->backend == HPR_BACKEND_THP && hpr__caps()->info.have_collapse)
		/* UFFDIO_COPY mapped 512 small pages; a refusal is retried
		 * after the region is unregistered */
		hpr__collapse_one(r, r->base + hpr__page_off(r, idx), true);
	return rc;
}

/* Load saved page idx exactly once, whoever asks; demand counts it as
 * loaded because a thread touched it. */
int hpr__lazy_load_one(struct hpr__lazy *L, size_t idx, bool demand)
{
	hpr_region *r = L->r;
	uint8_t was;
	int rc = atomic_load(&L->err);

	if (rc)
		return rc;
	if (hpr__page_take(r, idx, HPR_PS_BIT(HPR_PS_ABSENT), HPR_PS_FAULTING, true, &was) != 1) {
		uffd_wake(L, idx); /* mapped already: a late message */
		return 0;
	}
	rc = atomic_load(&L->err);
	if (!rc)
		rc = fetch_page(L, idx);
	if (!rc && demand)
		atomic_fetch_add(&L->demanded, 1);
	if (!rc && atomic_fetch_add(&L->loaded, 1) + 1 == L->ndata)
		hpr__lazy_kick(L);
	hpr__page_put(r, idx, HPR_PS_ABSENT, rc ? HPR_PS_ABSENT : HPR_PS_PRESENT);
	if (!rc)
		uffd_wake(L, idx);
	return rc;
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
		uffd_wake(L, idx);
		return;
	}
	if (r->backend == HPR_BACKEND_THP)
		rc = uffd_zeropage(L, idx);
	else
		rc = map_page(L, idx, L->zero);
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

/* ---- demand queue ---- */

static void demand_push(struct hpr__lazy *L, size_t idx)
{
	size_t cap = L->r->npages;

	pthread_mutex_lock(&L->mu);
	if (!L->queued[idx]) {
		L->queued[idx] = 1;
		L->q[(L->qhead + L->qn) % cap] = idx;
		L->qn++;
	}
	pthread_mutex_unlock(&L->mu);
}

static bool demand_pop(struct hpr__lazy *L, size_t *idx)
{
	bool got = false;

	pthread_mutex_lock(&L->mu);
	if (L->qn) {
		*idx = L->q[L->qhead];
		L->qhead = (L->qhead + 1) % L->r->npages;
		L->qn--;
		L->queued[*idx] = 0;
		got = true;
	}
	pthread_mutex_unlock(&L->mu);
	return got;
}

/* One fault message. */
static void on_fault(struct hpr__lazy *L, uintptr_t addr)
{
	hpr_region *r = L->r;
	size_t idx;

	if (addr < (uintptr_t)r->base || addr >= (uintptr_t)r->base + r->size)
		return;
	idx = (addr - (uintptr_t)r->base) >> r->page_shift;
	if (!hpr__lazy_is_data(L, idx))
		serve_hole(L, idx);
	else if (hpr__page_state(r, idx) == HPR_PS_PRESENT)
		uffd_wake(L, idx);
	else if (atomic_load(&L->fill_done))
		hpr__lazy_load_one(L, idx, true); /* no worker left to ask */
	else
		demand_push(L, idx);
}

/* ---- the fill job (hpr-lazyfill and the workers) ---- */

static int fill_page(hpr_region *r, size_t idx, void *arg)
{
	struct hpr__lazy *L = arg;
	size_t d;
	int rc;

	(void)r;
	while (!atomic_load_explicit(&L->err, memory_order_relaxed) && demand_pop(L, &d))
		hpr__lazy_load_one(L, d, true);
	rc = atomic_load(&L->err);
	if (rc)
		return rc;
	return hpr__lazy_is_data(L, idx) ? hpr__lazy_load_one(L, idx, false) : 0;
}

void *hpr__lazy_driver(void *arg)
{
	struct hpr__lazy *L = arg;

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
		while ((n = read(L->uffd, m, sizeof(m))) > 0)
			for (size_t i = 0; i < (size_t)n / sizeof(m[0]); i++)
				if (m[i].event == UFFD_EVENT_PAGEFAULT)
					on_fault(L, (uintptr_t)m[i].arg.pagefault.address);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			hpr__lazy_fail(L, -errno, "reading the userfaultfd failed: %s",
				       strerror(errno));
	}
	/* the fill ends at its next page once err is set */
	if (L->driver_on)
		pthread_join(L->driver, NULL);
	rc = atomic_load(&L->err);
	if (rc)
		hpr__lazy_protect(L);
	hpr__lazy_unregister(L);
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
