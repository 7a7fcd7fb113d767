/* SPDX-License-Identifier: MIT */
/*
 * Snapshot save and load: a region's contents to a sparse file and back
 * (format in snapshot.h and docs/snapshot.md).
 *
 * Both directions are a page function run on the region's workers
 * (hpr__run), so checksumming, zero detection and population are spread
 * over the CPUs. Each thread that takes part owns one io_uring with up to
 * SNAP_QD chunk I/Os in flight across page boundaries; the caller drains
 * every ring after the job, so no request is left in flight when the call
 * returns.
 *
 * Region memory is never registered with a ring (no fixed buffers):
 * nothing the library does to region memory may outlive the call that did
 * it. A registered buffer is a long-term pin (FOLL_LONGTERM) that the ring
 * owns, and io_uring_queue_exit() only closes the ring's fd; the kernel
 * frees the ring and unpins later, from a workqueue (io_ring_exit_work;
 * ~100 ms on 6.18). Until then a hugetlb page that hpr_reclaim punched out
 * or hpr_destroy unmapped stayed out of the pool (issue 15: an exact pool
 * gave -ENOMEM on the next fault-in while the snapshot fd was open, and a
 * restarted process found its pool empty). An explicit
 * io_uring_unregister_buffers() first is not enough either: since 6.13
 * (io_uring/rsrc.c, per-request node references) a request holds its
 * buffer's node until the request is freed, and one completed on io-wq
 * posts its CQE in io_req_complete_post() and is freed afterwards by
 * task_work (io_wq_free_work -> io_free_req), so the unpin can land after
 * the call returns. Unregistered I/O pins nothing beyond the I/O itself:
 * O_DIRECT pins pages in the block layer while the bio is in flight, and
 * every ring is drained before the call returns; page-cache I/O copies
 * and pins nothing. The price is one get_user_pages per O_DIRECT chunk (a
 * single folio for a huge page) in place of the register call per page:
 * no difference bench/snapshot can see (docs/snapshot.md).
 *
 * The data goes through an O_DIRECT descriptor reopened from
 * /proc/self/fd/N when the file system accepts it (ext4, xfs), else
 * through the caller's descriptor and the page cache (also on tmpfs, which
 * accepts O_DIRECT since 6.6 but still copies through its page cache). Where io_uring_queue_init() fails
 * (kernel.io_uring_disabled, seccomp, ENOSYS) the same page functions use
 * pread/pwrite; hpr_stats().snapshot_io says which ran.
 *
 * Load validates the header, the table and the file's extents
 * (SEEK_HOLE) before it touches the region, then per page: fault in
 * (hpr__fault_page, so the table knows; with page-cache I/O the read's
 * copy faults the page and the table is told after), read, verify the
 * page's checksum. If
 * anything fails, pages that were absent before are discarded again, so a
 * failed load into a fresh region changes nothing; pages that had contents
 * and were overwritten are reported in *changed.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "lazyload.h"
#include "snapshot.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define SNAP_QD 8		 /* chunk I/Os in flight per ring */
#define SNAP_CHUNK hpr__snap_chunk /* bytes per I/O */
#define OFF_END ((off_t)INT64_MAX)
#define HPR_SNAP_ALL_ (HPR_SNAP_NO_URING | HPR_SNAP_NO_DIRECT | HPR_SNAP_SYNC)

size_t hpr__snap_chunk = 2UL << 20;

static bool is_zero(const void *p, size_t len)
{
	const uint64_t *w = p;

	/* 512-byte blocks: the compiler vectorizes the OR, and a page with
	 * data usually fails in the first block */
	for (size_t i = 0; i < len / 8; i += 64) {
		uint64_t acc = 0;

		for (size_t k = 0; k < 64; k++)
			acc |= w[i + k];
		if (acc)
			return false;
	}
	return true;
}

/* ---- the operation ---- */
struct snap_trk { /* a page with chunks in flight on one ring */
	size_t idx;
	unsigned inflight;
	bool busy, all_submitted;
};

struct snap_io { /* one chunk in flight */
	bool busy;
	unsigned trk;
	size_t idx, off, len; /* page, bytes into it, bytes left */
};

struct snap_ctx {
	struct io_uring ring;
	struct hpr__fork_handle fh; /* a forked child closes the ring */
	bool has_ring;
	unsigned inflight;
	struct snap_io io[SNAP_QD];
	struct snap_trk trk[SNAP_QD];
};

struct snap_op {
	hpr_region *r;
	bool save;
	bool direct;	/* op->fd is an O_DIRECT reopen */
	bool uring;	/* io_uring works (probed by the caller's ring) */
	int fd;		/* data I/O: the O_DIRECT reopen or the caller's */
	uint64_t id;
	uint64_t data_off;
	struct hpr__snap_ent *tab; /* host byte order */
	uint8_t *pg;		   /* load: PG_* bits per page */
	struct snap_ctx *ctx;
	unsigned nctx;
	_Atomic unsigned nctx_used;
	_Atomic bool fell_back;
	_Atomic int err;
	pthread_mutex_t mu;
	char msg[400];
};

/* op->pg bits (load) */
#define PG_BEFORE 1  /* had contents before the load */
#define PG_FAULTED 2 /* we faulted it in */
#define PG_WRITTEN 4 /* a read into it was issued */
#define PG_LATE 8    /* absent: the read faults it in, the table is told after */

static _Atomic uint64_t op_ids;
static __thread uint64_t tls_op;
static __thread struct snap_ctx *tls_ctx;

/* Record the op's first error with its message; the caller re-raises it
 * in its own thread (hpr__fail's detail is per thread). */
__attribute__((format(printf, 3, 4)))
static int op_fail(struct snap_op *op, int err, const char *fmt, ...)
{
	va_list ap;
	int zero = 0;

	pthread_mutex_lock(&op->mu);
	if (atomic_compare_exchange_strong(&op->err, &zero, err)) {
		va_start(ap, fmt);
		vsnprintf(op->msg, sizeof(op->msg), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&op->mu);
	return err;
}

/* In a forked child: the parent's ring (its fd and mappings) goes. */
static bool ring_atfork(struct hpr__fork_handle *h, int phase)
{
	struct snap_ctx *c = (struct snap_ctx *)((char *)h - offsetof(struct snap_ctx, fh));

	if (phase != HPR__FORK_CHILD)
		return true;
	io_uring_queue_exit(&c->ring);
	c->has_ring = false;
	return false;
}

static void ctx_init(struct snap_op *op, struct snap_ctx *c)
{
	memset(c, 0, sizeof(*c));
	if (!op->uring)
		return;
	hpr__fork_lock();
	if (io_uring_queue_init(SNAP_QD * 2, &c->ring, 0) < 0) {
		hpr__fork_unlock();
		atomic_store(&op->fell_back, true);
		return;
	}
	c->fh.atfork = ring_atfork;
	hpr__fork_handle_add(&c->fh);
	hpr__fork_unlock();
	c->has_ring = true;
}

/* After drain(): the ring has no request in flight and no buffer of ours,
 * so its deferred teardown in the kernel holds nothing of the region. */
static void ctx_fini(struct snap_ctx *c)
{
	if (c->has_ring) {
		hpr__fork_lock();
		hpr__fork_handle_del(&c->fh);
		io_uring_queue_exit(&c->ring);
		hpr__fork_unlock();
	}
	c->has_ring = false;
}

/* This thread's context for op; NULL means "do synchronous I/O". */
static struct snap_ctx *get_ctx(struct snap_op *op)
{
	unsigned i;

	if (tls_op == op->id)
		return tls_ctx;
	i = atomic_fetch_add(&op->nctx_used, 1);
	tls_op = op->id;
	tls_ctx = i < op->nctx ? &op->ctx[i] : NULL;
	if (tls_ctx)
		ctx_init(op, tls_ctx);
	return tls_ctx;
}

static uint64_t file_off(const struct snap_op *op, size_t idx, size_t off)
{
	return op->data_off + hpr__page_off(op->r, idx) + off;
}

static int verify_page(struct snap_op *op, size_t idx)
{
	hpr_region *r = op->r;
	uint64_t sum = hpr__page_sum(r->base + hpr__page_off(r, idx), r->page_size, idx);

	if (sum != op->tab[idx].sum)
		return op_fail(op, -EBADMSG,
			       "snapshot page %zu (region offset %#zx, file offset %#llx): "
			       "checksum mismatch: the file is corrupted",
			       idx, hpr__page_off(r, idx),
			       (unsigned long long)file_off(op, idx, 0));
	return 0;
}

/* A page's data is in: tell the fault table about a page the read
 * faulted in (PG_LATE), then verify. */
static int page_landed(struct snap_op *op, size_t idx)
{
	if (op->pg[idx] & PG_LATE) {
		int err = hpr__fault_page(op->r, idx);

		if (err)
			return op_fail(op, err, "%s", hpr_strerror(err));
	}
	return verify_page(op, idx);
}

/* The file ended where page data was due (it shrank after load checked
 * its size). */
static int eof_fail(struct snap_op *op, uint64_t fo)
{
	return op_fail(op, -EBADMSG,
		       "snapshot read at file offset %#llx: unexpected end of "
		       "file: the file was truncated (while loading?)",
		       (unsigned long long)fo);
}

/* A read that stopped short at end_in_page bytes into a page: on the
 * O_DIRECT descriptor an end off a 4 KiB boundary can only be the end of
 * the file, and asking for the rest would be an unaligned O_DIRECT read
 * (-EINVAL, which hid the truncation). */
static bool short_read_is_eof(const struct snap_op *op, size_t end_in_page)
{
	return !op->save && op->direct && (end_in_page & 4095);
}

/* A read into page idx failed with err. A page the read's copy was to
 * fault in (PG_LATE) gives -EFAULT when the kernel cannot allocate it (pool
 * or tmpfs exhausted: SIGBUS on a touch); fault it through the table to
 * get the real cause, with its advice. */
static int io_fail(struct snap_op *op, size_t idx, int err, uint64_t fo)
{
	if (err == -EFAULT && !op->save && (op->pg[idx] & PG_LATE)) {
		int e = hpr__fault_page(op->r, idx);

		if (e)
			return op_fail(op, e, "%s", hpr_strerror(e));
	}
	return op_fail(op, err, "snapshot %s at file offset %#llx failed: %s",
		       op->save ? "write" : "read", (unsigned long long)fo, strerror(-err));
}

/* Synchronous I/O of one page: the fallback path, and the path of a
 * thread without a ring. */
static int sync_page(struct snap_op *op, size_t idx)
{
	hpr_region *r = op->r;
	char *base = r->base + hpr__page_off(r, idx);
	size_t done = 0;

	while (done < r->page_size) {
		ssize_t n;
		off_t fo = (off_t)file_off(op, idx, done);

		if (op->save)
			n = hpr__os->pwrite_some(op->fd, base + done, r->page_size - done, fo);
		else
			n = hpr__os->pread_some(op->fd, base + done, r->page_size - done, fo);
		if (n < 0)
			return io_fail(op, idx, (int)n, (uint64_t)fo);
		if (n == 0 && op->save)
			return op_fail(op, -EIO,
				       "snapshot write at file offset %#llx: wrote "
				       "nothing",
				       (unsigned long long)fo);
		if (n == 0)
			return eof_fail(op, fo);
		done += (size_t)n;
		if (done < r->page_size && short_read_is_eof(op, done))
			return eof_fail(op, file_off(op, idx, done));
	}
	return op->save ? 0 : page_landed(op, idx);
}

static int queue_io(struct snap_op *op, struct snap_ctx *c, struct snap_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	char *addr = op->r->base + hpr__page_off(op->r, io->idx) + io->off;
	uint64_t fo = file_off(op, io->idx, io->off);
	unsigned len = (unsigned)io->len; /* <= SNAP_CHUNK */
	int rc;

	if (!sqe) /* the SQ holds 2 * SNAP_QD and is flushed on every submit */
		return op_fail(op, -EBUSY, "snapshot: io_uring submission queue full");
	if (op->save)
		io_uring_prep_write(sqe, op->fd, addr, len, fo);
	else
		io_uring_prep_read(sqe, op->fd, addr, len, fo);
	io_uring_sqe_set_data64(sqe, (uint64_t)(io - c->io));
	do
		rc = io_uring_submit(&c->ring);
	while (rc == -EINTR);
	if (rc < 0)
		return op_fail(op, rc, "snapshot: io_uring_submit failed: %s", strerror(-rc));
	return 0;
}

static void trk_done(struct snap_op *op, struct snap_trk *t)
{
	t->busy = false;
	if (!op->save && !atomic_load(&op->err))
		page_landed(op, t->idx);
}

/* Wait for one completion and handle it: resubmit the rest of a short
 * transfer, finish the page when its last chunk lands. */
static int reap_one(struct snap_op *op, struct snap_ctx *c)
{
	struct io_uring_cqe *cqe;
	struct snap_io *io;
	struct snap_trk *t;
	int rc, res;

	do
		rc = io_uring_wait_cqe(&c->ring, &cqe);
	while (rc == -EINTR);
	if (rc < 0)
		return op_fail(op, rc, "snapshot: io_uring_wait_cqe failed: %s", strerror(-rc));
	io = &c->io[io_uring_cqe_get_data64(cqe)];
	res = cqe->res;
	io_uring_cqe_seen(&c->ring, cqe);
	t = &c->trk[io->trk];

	if (res == -EAGAIN || res == -EINTR) {
		if (queue_io(op, c, io) == 0)
			return 0;
		res = atomic_load(&op->err); /* ends this I/O; drain the rest */
	} else if (res > 0 && (size_t)res < io->len) {
		/* short transfer: queue the rest of this chunk */
		io->off += (size_t)res;
		io->len -= (size_t)res;
		if (short_read_is_eof(op, io->off))
			res = 0;
		else if (queue_io(op, c, io) == 0)
			return 0;
		else
			res = atomic_load(&op->err);
	}
	io->busy = false;
	c->inflight--;
	t->inflight--;
	if (res < 0)
		io_fail(op, io->idx, res, file_off(op, io->idx, io->off));
	else if (res == 0 && op->save)
		op_fail(op, -EIO, "snapshot write at file offset %#llx: wrote nothing",
			(unsigned long long)file_off(op, io->idx, io->off));
	else if (res == 0)
		eof_fail(op, file_off(op, io->idx, io->off));
	if (t->all_submitted && !t->inflight)
		trk_done(op, t);
	return 0;
}

/* Wait for every I/O in flight on c: none may outlive the call. */
static int drain(struct snap_op *op, struct snap_ctx *c)
{
	while (c->has_ring && c->inflight)
		if (reap_one(op, c))
			break; /* io_uring_wait_cqe failed: nothing more will come */
	return atomic_load(&op->err);
}

/* Queue the I/O of page idx on this thread's ring (or do it now). */
static int page_io(struct snap_op *op, size_t idx)
{
	struct snap_ctx *c = get_ctx(op);
	struct snap_trk *t = NULL;
	size_t size = op->r->page_size;
	unsigned ti;

	if (!c || !c->has_ring)
		return sync_page(op, idx);
	for (;;) {
		for (ti = 0; ti < SNAP_QD; ti++)
			if (!c->trk[ti].busy)
				break;
		if (ti < SNAP_QD)
			break;
		if (reap_one(op, c))
			return atomic_load(&op->err);
	}
	t = &c->trk[ti];
	t->idx = idx;
	t->busy = true;
	t->all_submitted = false;
	t->inflight = 0;
	for (size_t off = 0; off < size; off += SNAP_CHUNK) {
		struct snap_io *io = NULL;

		while (c->inflight == SNAP_QD)
			if (reap_one(op, c))
				return atomic_load(&op->err);
		if (atomic_load_explicit(&op->err, memory_order_relaxed))
			break; /* a chunk failed: queue no more of this page */
		for (unsigned k = 0; k < SNAP_QD && !io; k++)
			if (!c->io[k].busy)
				io = &c->io[k];
		io->busy = true;
		io->trk = ti;
		io->idx = idx;
		io->off = off;
		io->len = size - off < SNAP_CHUNK ? size - off : SNAP_CHUNK;
		if (queue_io(op, c, io)) {
			io->busy = false;
			break;
		}
		c->inflight++;
		t->inflight++;
	}
	t->all_submitted = true;
	if (!t->inflight)
		trk_done(op, t);
	return atomic_load(&op->err);
}

/* Does the kernel have any of page idx resident? (A caller may have
 * written an ABSENT page without hpr_fault_in.) Errors say yes. */
static bool page_resident(const hpr_region *r, size_t idx)
{
	return hpr__os->any_resident(r->base + hpr__page_off(r, idx), r->page_size) != 0;
}

static bool has_contents(const hpr_region *r, size_t idx)
{
	uint8_t st = hpr__page_state(r, idx);

	if (st == HPR_PS_PRESENT)
		return true;
	if (st == HPR_PS_LAZY)
		return false; /* contents undefined: not saved */
	return page_resident(r, idx);
}

static int save_page(hpr_region *r, size_t idx, void *arg)
{
	struct snap_op *op = arg;
	struct hpr__snap_ent *e = &op->tab[idx];
	const char *p = r->base + hpr__page_off(r, idx);
	int err = atomic_load_explicit(&op->err, memory_order_relaxed);

	if (err)
		return err;
	if (!(op->pg[idx] & PG_BEFORE))
		return 0;
	if (is_zero(p, r->page_size)) {
		e->flags = HPR__SNAP_PG_ZERO;
		return 0;
	}
	e->sum = hpr__page_sum(p, r->page_size, idx);
	e->flags = HPR__SNAP_PG_DATA;
	return page_io(op, idx);
}

static int load_page(hpr_region *r, size_t idx, void *arg)
{
	struct snap_op *op = arg;
	int err = atomic_load_explicit(&op->err, memory_order_relaxed);

	if (err)
		return err;
	if (!(op->tab[idx].flags & HPR__SNAP_PG_DATA))
		return 0;
	if (hpr__page_state(r, idx) == HPR_PS_ABSENT && !op->direct && !(r->flags & HPR_F_GUARD)) {
		/* page-cache I/O copies into the mapping: let that copy fault
		 * the page in (zeroing it just before it is overwritten, cache
		 * hot, as a plain read() would), then record it in the fault
		 * table (populate finds it present: no second zeroing). Not in
		 * guard mode: a released and reclaimed page is ABSENT but still
		 * PROT_NONE, and only the fault table unprotects it (the copy
		 * would be -EFAULT, part-way through the load) */
		op->pg[idx] |= PG_FAULTED | PG_LATE;
	} else if (hpr__page_state(r, idx) != HPR_PS_PRESENT) {
		err = hpr__fault_page(r, idx);
		if (err)
			return op_fail(op, err, "%s", hpr_strerror(err));
		op->pg[idx] |= PG_FAULTED;
	}
	op->pg[idx] |= PG_WRITTEN;
	return page_io(op, idx);
}

/* Drop page idx back to ABSENT (MADV_DONTNEED / PUNCH_HOLE), whatever
 * state it is in; 0 or -errno. */
static int discard_page(hpr_region *r, size_t idx)
{
	unsigned any = HPR_PS_BIT(HPR_PS_ABSENT) | HPR_PS_BIT(HPR_PS_PRESENT) |
		       HPR_PS_BIT(HPR_PS_LAZY);
	uint8_t st;
	int rc;

	hpr__page_take(r, idx, any, HPR_PS_BUSY, true, &st);
	rc = hpr__discard_page(r, idx);
	hpr__page_put(r, idx, st, rc ? st : HPR_PS_ABSENT);
	return rc;
}

/*
 * Before the save touches the file: note the pages it will read (PG_BEFORE)
 * and make sure it can read them. A page the application mprotect()ed
 * PROT_NONE, or a shared file truncated under the mapping, would be a
 * SIGSEGV or SIGBUS in the zero check, killing the process with the file
 * half written. MADV_POPULATE_READ (Linux 5.14) asks the kernel instead; it
 * maps nothing the save's own reading would not.
 */
static int save_check(struct snap_op *op)
{
	hpr_region *r = op->r;
	bool ask = hpr__caps()->info.have_populate;

	for (size_t i = 0; i < r->npages; i++) {
		size_t off = hpr__page_off(r, i);
		int rc;

		if (!has_contents(r, i))
			continue;
		op->pg[i] = PG_BEFORE;
		if (!ask)
			continue;
		do
			rc = hpr__os_populate_read(r->base + off, r->page_size);
		while (rc == -EINTR);
		if (rc)
			return hpr__fail(-EFAULT,
					 "hpr_save: region '%s' at offset %#zx cannot be "
					 "read (%s): was it mprotect()ed without PROT_READ, "
					 "or its file truncated? The file was not touched",
					 r->name, off, strerror(-rc));
	}
	return 0;
}

/*
 * Make page idx (a hole in the snapshot) read as zeros. Discarded, except
 * on locked memory (HPR_F_LOCK, mlockall): there it is zeroed in place and
 * stays resident and locked -- the kernel refuses MADV_DONTNEED on VM_LOCKED
 * memory, and whoever locked it wants it resident. A released page is
 * faulted back first (in guard mode it is PROT_NONE).
 */
static int zero_page(hpr_region *r, size_t idx, bool locked)
{
	int rc;

	if (!locked)
		return discard_page(r, idx);
	if (hpr__page_state(r, idx) != HPR_PS_PRESENT && hpr__page_state(r, idx) != HPR_PS_ABSENT) {
		rc = hpr__fault_page(r, idx);
		if (rc)
			return rc;
	}
	memset(r->base + hpr__page_off(r, idx), 0, r->page_size);
	return 0;
}

/* Empty the file after a failed save; nothing more to report if that
 * fails too. */
static void truncate_quiet(int fd)
{
	if (hpr__os->ftruncate(fd, 0))
		return;
}

static uint64_t layout_data_off(size_t npages, size_t page_size)
{
	uint64_t a = page_size > 4096 ? page_size : 4096;
	uint64_t end = HPR__SNAP_TABLE_OFF + (uint64_t)npages * sizeof(struct hpr__snap_ent);

	return (end + a - 1) / a * a;
}

/* Check fd for save (write) or load (read); fills *st. */
static int check_fd(const char *fn, int fd, bool write, struct stat *st)
{
	int fl = fd < 0 ? -1 : hpr__os->fd_flags(fd);
	int rc;

	if (fl < 0)
		return hpr__fail(-EBADF, "%s: fd %d is not an open file descriptor", fn, fd);
	if ((fl & O_ACCMODE) == (write ? O_RDONLY : O_WRONLY))
		return hpr__fail(-EBADF, "%s: fd %d is open %s-only: open the snapshot "
					 "file O_RDWR (or %s)",
				 fn, fd, write ? "read" : "write", write ? "O_WRONLY" : "O_RDONLY");
	if (write && (fl & O_APPEND))
		return hpr__fail(-EINVAL, "%s: fd %d is O_APPEND: positioned writes would "
					  "land at the end; open it without O_APPEND", fn, fd);
	rc = hpr__os->fstat(fd, st);
	if (rc)
		return hpr__fail(rc, "%s: fstat(fd %d): %s", fn, fd, strerror(-rc));
	if (!S_ISREG(st->st_mode))
		return hpr__fail(-EINVAL, "%s: fd %d is not a regular file: snapshots are "
					  "sparse files with holes; use a file on a local file "
					  "system or tmpfs", fn, fd);
	return 0;
}

/* tmpfs accepts O_DIRECT since 6.6 but still copies through its page
 * cache: treat it as page-cache I/O. */
static bool fs_is_tmpfs(int fd)
{
	struct statfs sf;

	return hpr__os->fstatfs(fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
}

/* The data descriptor: an O_DIRECT reopen where the file system takes it
 * and gains from it; -1 means page-cache I/O on the caller's fd. */
static int open_data_fd(int fd, bool write, unsigned flags)
{
	char path[64];
	int dfd;

	if (flags & HPR_SNAP_NO_DIRECT)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	dfd = hpr__os->openat(AT_FDCWD, path, (write ? O_WRONLY : O_RDONLY) | O_DIRECT | O_CLOEXEC,
			      0);
	if (dfd >= 0 && fs_is_tmpfs(dfd)) {
		hpr__os->close(dfd);
		return -1;
	}
	/* < 0: EINVAL (no O_DIRECT here), no /proc: page cache */
	return dfd < 0 ? -1 : dfd;
}

static int op_init(struct snap_op *op, hpr_region *r, bool save, int fd, unsigned flags)
{
	memset(op, 0, sizeof(*op));
	op->r = r;
	op->save = save;
	op->fd = fd;
	op->id = atomic_fetch_add(&op_ids, 1) + 1;
	op->uring = !(flags & HPR_SNAP_NO_URING);
	op->nctx = r->nworkers + 2; /* workers + the caller (+1 spare) */
	op->ctx = calloc(op->nctx, sizeof(*op->ctx));
	op->tab = calloc(r->npages, sizeof(*op->tab));
	pthread_mutex_init(&op->mu, NULL);
	if (!op->ctx || !op->tab)
		return hpr__fail(-ENOMEM, "snapshot: cannot allocate the page table "
					  "for %zu pages", r->npages);
	return 0;
}

/* Run fn over the region; returns the op's first error. */
static int op_run(struct snap_op *op, hpr__page_fn fn)
{
	struct snap_ctx *c0;
	unsigned n;
	int rc;

	/* the caller's ring doubles as the probe: if io_uring is off
	 * (io_uring_disabled, seccomp) nobody tries again */
	c0 = get_ctx(op);
	if (op->uring && (!c0 || !c0->has_ring))
		op->uring = false;
	rc = hpr__run(op->r, &(struct hpr__job_ops){ .page = fn }, op, 0, op->r->npages);
	n = atomic_load(&op->nctx_used);
	if (n > op->nctx)
		n = op->nctx;
	for (unsigned i = 0; i < n; i++)
		drain(op, &op->ctx[i]);
	for (unsigned i = 0; i < n; i++)
		ctx_fini(&op->ctx[i]);
	tls_op = 0;
	atomic_store(&op->r->snapshot_io, op->uring && !atomic_load(&op->fell_back) ?
						  HPR_IO_URING : HPR_IO_PREADWRITE);
	if (!atomic_load(&op->err) && rc)
		op_fail(op, rc, "%s", hpr_strerror(rc));
	return atomic_load(&op->err);
}

static void op_free(struct snap_op *op)
{
	free(op->ctx);
	free(op->tab);
	free(op->pg);
	pthread_mutex_destroy(&op->mu);
}

/* The header of a snapshot whose data starts at data_off, for a page table
 * of checksum table_sum with ndata data pages. */
static void save_header(const hpr_region *r, char *hbuf, uint64_t data_off, uint64_t ndata,
			uint64_t table_sum)
{
	struct hpr__snap_hdr *h = (struct hpr__snap_hdr *)hbuf;

	memset(hbuf, 0, HPR__SNAP_HDR_SIZE);
	memcpy(h->magic, HPR__SNAP_MAGIC, 8);
	h->version = htole32(HPR__SNAP_VERSION);
	h->hdr_len = htole32(sizeof(*h));
	h->region_size = htole64(r->size);
	h->page_size = htole64(r->page_size);
	h->npages = htole64(r->npages);
	h->flags = 0;
	h->table_off = htole64(HPR__SNAP_TABLE_OFF);
	h->data_off = htole64(data_off);
	h->file_size = htole64(data_off + r->size);
	h->pages_data = htole64(ndata);
	h->table_sum = htole64(table_sum);
	h->hdr_sum = 0;
	h->hdr_sum = htole64(hpr__xxh64(h, sizeof(*h), 0));
}

/* The data pages: the file emptied (an interrupted save leaves no header:
 * it goes last), sized, and written through op (O_DIRECT where it can). */
static int save_data(struct snap_op *op, int fd, unsigned flags)
{
	hpr_region *r = op->r;
	uint64_t data_off = layout_data_off(r->npages, r->page_size);
	uint64_t file_size = data_off + r->size;
	int rc = hpr__os->ftruncate(fd, 0), dfd;

	if (!rc)
		rc = hpr__os->ftruncate(fd, (off_t)file_size);
	if (rc)
		return hpr__fail(rc, "hpr_save: cannot size the file to %llu bytes: %s",
				 (unsigned long long)file_size, strerror(-rc));
	op->data_off = data_off;
	dfd = open_data_fd(fd, true, flags);
	if (dfd >= 0) {
		op->fd = dfd;
		op->direct = true;
	}
	rc = op_run(op, save_page);
	if (dfd >= 0)
		hpr__os->close(dfd);
	op->fd = fd;
	return rc ? hpr__fail(rc, "hpr_save: %s", op->msg) : 0;
}

/* The page table, then the header that makes the file a snapshot (each
 * made durable first under HPR_SNAP_SYNC). */
static int save_table(const struct snap_op *op, int fd, unsigned flags)
{
	hpr_region *r = op->r;
	size_t tlen = r->npages * sizeof(struct hpr__snap_ent);
	struct hpr__snap_ent *disk = malloc(tlen);
	char hbuf[HPR__SNAP_HDR_SIZE];
	uint64_t ndata = 0;
	int rc;

	if (!disk)
		return hpr__fail(-ENOMEM, "hpr_save: cannot allocate the page table");
	for (size_t i = 0; i < r->npages; i++) {
		disk[i].sum = htole64(op->tab[i].sum);
		disk[i].flags = htole32(op->tab[i].flags);
		disk[i].reserved = 0;
		ndata += op->tab[i].flags & HPR__SNAP_PG_DATA;
	}
	save_header(r, hbuf, op->data_off, ndata, hpr__xxh64(disk, tlen, 0));
	rc = hpr__os->pwrite_full(fd, disk, tlen, HPR__SNAP_TABLE_OFF);
	free(disk);
	if (!rc && (flags & HPR_SNAP_SYNC))
		rc = hpr__os->fdatasync(fd);
	if (!rc)
		rc = hpr__os->pwrite_full(fd, hbuf, sizeof(hbuf), 0);
	if (!rc && (flags & HPR_SNAP_SYNC))
		rc = hpr__os->fdatasync(fd);
	if (rc)
		return hpr__fail(rc, "hpr_save: writing the snapshot's table/header failed: %s",
				 strerror(-rc));
	return 0;
}

int hpr_save(hpr_region *r, int fd, unsigned flags)
{
	struct snap_op op;
	struct stat st;
	int rc;

	hpr__err_clear();
	if (!r)
		return hpr__fail(-EINVAL, "hpr_save: region is NULL");
	if (r->not_mapped)
		return hpr__region_mapped(r);
	if (flags & ~HPR_SNAP_ALL_)
		return hpr__fail(-EINVAL, "hpr_save: unknown flags %#x", flags & ~HPR_SNAP_ALL_);
	if ((rc = hpr__lazy_busy(r, "hpr_save")))
		return rc;
	rc = check_fd("hpr_save", fd, true, &st);
	if (rc)
		return rc;
	/* everything that can be checked is, before the file is touched */
	rc = op_init(&op, r, true, fd, flags);
	if (!rc) {
		op.pg = calloc(r->npages, 1);
		rc = op.pg ? save_check(&op) : hpr__fail(-ENOMEM, "hpr_save: out of memory");
	}
	if (!rc) {
		rc = save_data(&op, fd, flags);
		if (!rc)
			rc = save_table(&op, fd, flags);
		if (rc)
			truncate_quiet(fd); /* no half snapshot left looking valid; frees space */
	}
	op_free(&op);
	return rc;
}

/* The header's bytes: read, recognized as a snapshot, of this format
 * version, intact (checksum) and with no unknown flags. */
static int header_read(int fd, struct hpr__snap_hdr *h)
{
	char buf[HPR__SNAP_HDR_SIZE];
	ssize_t n = hpr__os->pread_full(fd, buf, sizeof(buf), 0);
	size_t got = n < 0 ? 0 : (size_t)n;
	uint64_t sum;

	if (n < 0)
		return hpr__fail((int)n, "hpr_load: reading the header failed: %s",
				 strerror((int)-n));
	if (got < 8 || memcmp(buf, HPR__SNAP_MAGIC, 8)) {
		bool zero = got >= 8 && is_zero(buf, got & ~(size_t)511);

		return hpr__fail(-EINVAL, "hpr_load: not an hpregion snapshot (%s)",
				 got == 0 ? "the file is empty: a failed hpr_save leaves it so" :
				 zero ? "the header is zeros: an interrupted hpr_save? It "
					"writes the header last" :
					"no HPRSNAP magic at offset 0");
	}
	if (got < sizeof(*h))
		return hpr__fail(-EBADMSG, "hpr_load: the snapshot is truncated inside its "
					   "header (%zu bytes)", got);
	memcpy(h, buf, sizeof(*h));
	if (le32toh(h->version) != HPR__SNAP_VERSION)
		return hpr__fail(-EINVAL, "hpr_load: snapshot format version %u; this "
					  "library reads version %u: load it with a newer hpregion",
				 le32toh(h->version), HPR__SNAP_VERSION);
	sum = le64toh(h->hdr_sum);
	h->hdr_sum = 0;
	if (le32toh(h->hdr_len) != sizeof(*h) || hpr__xxh64(h, sizeof(*h), 0) != sum)
		return hpr__fail(-EBADMSG, "hpr_load: header checksum mismatch: the snapshot "
					   "file is corrupted");
	if (h->flags)
		return hpr__fail(-EINVAL, "hpr_load: snapshot uses unknown flags %#llx: load "
					  "it with a newer hpregion",
				 (unsigned long long)le64toh(h->flags));
	return 0;
}

/* Does an intact header describe a snapshot of region r, laid out as this
 * library lays it out, in a file long enough to hold it? */
static int header_fits(const hpr_region *r, const struct hpr__snap_hdr *h,
		       const struct stat *st, uint64_t want_off)
{
	char ps[32], ps2[32];

	if (le64toh(h->page_size) != r->page_size)
		return hpr__fail(-EINVAL, "hpr_load: the snapshot was saved from a region of "
					  "%s pages; region '%s' has %s pages: create the "
					  "region with that page_size (and a backend offering it)",
				 hpr__fmt_size(le64toh(h->page_size), ps, sizeof(ps)), r->name,
				 hpr__fmt_size(r->page_size, ps2, sizeof(ps2)));
	if (le64toh(h->region_size) != r->size)
		return hpr__fail(-EINVAL, "hpr_load: the snapshot is of a %llu-byte region; "
					  "region '%s' is %zu bytes: create it with size = %llu",
				 (unsigned long long)le64toh(h->region_size), r->name, r->size,
				 (unsigned long long)le64toh(h->region_size));
	if (le64toh(h->npages) != r->npages || le64toh(h->table_off) != HPR__SNAP_TABLE_OFF ||
	    le64toh(h->data_off) != want_off || le64toh(h->file_size) != want_off + r->size ||
	    le64toh(h->pages_data) > r->npages)
		return hpr__fail(-EBADMSG, "hpr_load: the snapshot header's layout is "
					   "inconsistent: the file is corrupted");
	if ((uint64_t)st->st_size < want_off + r->size)
		return hpr__fail(-EBADMSG, "hpr_load: the snapshot is truncated: the file has "
					   "%lld bytes, its header says %llu",
				 (long long)st->st_size, (unsigned long long)(want_off + r->size));
	return 0;
}

/* Header checks; fills *data_off, *table_sum, *pages_data. Touches nothing. */
static int load_header(hpr_region *r, int fd, const struct stat *st, uint64_t *data_off,
		       uint64_t *table_sum, uint64_t *pages_data)
{
	struct hpr__snap_hdr h;
	uint64_t want_off = layout_data_off(r->npages, r->page_size);
	int rc = header_read(fd, &h);

	if (!rc)
		rc = header_fits(r, &h, st, want_off);
	if (rc)
		return rc;
	*data_off = want_off;
	*table_sum = le64toh(h.table_sum);
	*pages_data = le64toh(h.pages_data);
	return 0;
}

static int load_table(struct snap_op *op, int fd, uint64_t table_sum, uint64_t pages_data)
{
	hpr_region *r = op->r;
	size_t tlen = r->npages * sizeof(struct hpr__snap_ent), got = 0;
	struct hpr__snap_ent *disk = malloc(tlen);
	uint64_t ndata = 0;
	ssize_t n;
	int rc = 0;

	if (!disk)
		return hpr__fail(-ENOMEM, "hpr_load: cannot allocate the page table");
	n = hpr__os->pread_full(fd, disk, tlen, HPR__SNAP_TABLE_OFF);
	if (n < 0) {
		free(disk);
		return hpr__fail((int)n, "hpr_load: reading the page table failed: %s",
				 strerror((int)-n));
	}
	got = (size_t)n;
	if (got < tlen || hpr__xxh64(disk, tlen, 0) != table_sum) {
		free(disk);
		return hpr__fail(-EBADMSG, "hpr_load: page table checksum mismatch: the "
					   "snapshot file is corrupted");
	}
	for (size_t i = 0; i < r->npages; i++) {
		op->tab[i].sum = le64toh(disk[i].sum);
		op->tab[i].flags = le32toh(disk[i].flags);
		if (op->tab[i].flags & ~HPR__SNAP_PG_ALL_)
			rc = -EBADMSG;
		ndata += op->tab[i].flags & HPR__SNAP_PG_DATA;
	}
	free(disk);
	if (rc || ndata != pages_data)
		return hpr__fail(-EBADMSG, "hpr_load: the page table is inconsistent: the "
					   "snapshot file is corrupted");
	return 0;
}

/*
 * Every data page must have some data in the file. Holes inside a page are
 * fine: copy tools (cp, rsync -S, tar -S) turn zero blocks into holes, which
 * read as the same zeros, and the page's checksum is the integrity check.
 * But a data page is never all zeros (those are saved as ZERO), so a page
 * that is one hole from end to end was punched, or truncated away and the
 * file re-extended: caught here, before the region is touched. SEEK_DATA
 * and SEEK_HOLE, once per data extent of the file.
 */
static int load_extents(struct snap_op *op, int fd)
{
	hpr_region *r = op->r;
	off_t pos = lseek(fd, 0, SEEK_CUR), data = -1;
	int rc = 0;

	/* SEEK_DATA once a page (one lookup where the page is there), no
	 * SEEK_HOLE: on tmpfs that walks the page cache folio by folio to the
	 * end of the extent, 8 ms for 512 MiB of 4 KiB folios on 6.18, which
	 * a lazy load's return waited for */
	for (size_t i = 0; i < r->npages && !rc; i++) {
		off_t a = (off_t)file_off(op, i, 0), b = a + (off_t)r->page_size;

		if (!(op->tab[i].flags & HPR__SNAP_PG_DATA))
			continue;
		if (data < a) { /* the data found so far lies before a */
			data = lseek(fd, a, SEEK_DATA);
			if (data < 0 && errno == EINVAL)
				break; /* no SEEK_DATA here: the checksums still catch it */
			if (data < 0)
				data = OFF_END; /* ENXIO: no data after a */
		}
		if (data >= b)
			rc = hpr__fail(-EBADMSG,
				       "hpr_load: snapshot page %zu (file offset %#llx) "
				       "is a hole in the file from end to end, but the "
				       "page table says it holds data: the file was "
				       "truncated or punched",
				       i, (unsigned long long)a);
	}
	if (pos >= 0)
		lseek(fd, pos, SEEK_SET);
	return rc;
}

/*
 * The pages the load will populate (DATA pages without contents now) need
 * room: in the hugetlb pool (its free pages, reserved ones included, plus
 * what overcommit still allows), or on the tmpfs holding a shmem region
 * (statfs; a memfd's mount has no limit). Short of that, the load would
 * fail with -ENOMEM/-ENOSPC half-way, after overwriting pages: refuse it
 * now. A necessary condition, not a promise (others allocate too, and
 * another region's reservations count as free here).
 */
static int load_room(struct snap_op *op)
{
	hpr_region *r = op->r;
	unsigned long long have;
	size_t need = 0;
	char sz[32], sz2[32];

	for (size_t i = 0; i < r->npages; i++)
		need += (op->tab[i].flags & HPR__SNAP_PG_DATA) && !(op->pg[i] & PG_BEFORE);
	if (!need || r->fd < 0)
		return 0;
	if (r->backend == HPR_BACKEND_HUGETLB) {
		unsigned long free_ = 0, surp = 0, over = hpr__hugetlb_overcommit(r->page_size);

		if (hpr__hugetlb_pool(r->page_size, -1, NULL, &free_, NULL, &surp))
			return 0;
		have = free_ + (over > surp ? over - surp : 0);
		if (need <= have)
			return 0;
		return hpr__fail(-ENOMEM,
				 "hpr_load: the snapshot has %zu pages that region '%s' must "
				 "fault in, and the hugetlb pool has %llu free %s pages: raise "
				 "/sys/kernel/mm/hugepages/hugepages-%zukB/nr_hugepages; the "
				 "region was not changed",
				 need, r->name, have, hpr__fmt_size(r->page_size, sz, sizeof(sz)),
				 r->page_size >> 10);
	}
	{
		struct statfs sf;

		if (hpr__os->fstatfs(r->fd, &sf) || !sf.f_blocks)
			return 0;
		have = (unsigned long long)sf.f_bavail * (unsigned long long)sf.f_bsize;
	}
	if ((unsigned long long)need * r->page_size <= have)
		return 0;
	return hpr__fail(-ENOSPC,
			 "hpr_load: region '%s' must fault in %s for the snapshot, and the "
			 "tmpfs holding it has %s free: remount it with a larger size=; the "
			 "region was not changed",
			 r->name, hpr__fmt_size(need * r->page_size, sz, sizeof(sz)),
			 hpr__fmt_size((size_t)have, sz2, sizeof(sz2)));
}

/* Everything load checks before it touches the region: the header, the
 * page table, the file's extents, the room for the pages to come; which
 * pages had contents before. */
static int load_prepare(struct snap_op *op, hpr_region *r, int fd, bool empty)
{
	uint64_t table_sum = 0, pages_data = 0;
	struct stat st;
	int rc = check_fd("hpr_load", fd, false, &st);

	if (rc)
		return rc;
	rc = load_header(r, fd, &st, &op->data_off, &table_sum, &pages_data);
	if (rc)
		return rc;
	op->pg = calloc(r->npages, 1);
	if (!op->pg)
		return hpr__fail(-ENOMEM, "hpr_load: out of memory");
	rc = load_table(op, fd, table_sum, pages_data);
	/* Every page saved, and the file's blocks more than all but one page
	 * of its data (what lies before the data counted as if allocated):
	 * no page can be a hole from end to end, no per-page SEEK_DATA.
	 * Blocks allocated past the end (fallocate KEEP_SIZE) could hide a
	 * punched page from this check; its checksum still fails the load. */
	if (!rc && !(pages_data == r->npages &&
		     (uint64_t)st.st_blocks * 512 > op->data_off + (r->npages - 1) * r->page_size))
		rc = load_extents(op, fd);
	if (rc)
		return rc;
	/* empty: a lazy load checked the whole region at once (no page has
	 * contents); else page by page */
	for (size_t i = 0; i < r->npages && !empty; i++)
		if (has_contents(r, i) || hpr__page_state(r, i) == HPR_PS_LAZY)
			op->pg[i] |= PG_BEFORE;
	return load_room(op);
}

/* A failed load: pages that were absent go back to absent; overwritten
 * pages are reported. Returns the pages changed. */
static size_t load_undo(const struct snap_op *op)
{
	hpr_region *r = op->r;
	size_t nchanged = 0;

	for (size_t i = 0; i < r->npages; i++) {
		if (op->pg[i] & PG_BEFORE) {
			if (op->pg[i] & PG_WRITTEN)
				nchanged++;
		} else if ((op->pg[i] & (PG_FAULTED | PG_WRITTEN)) && discard_page(r, i)) {
			nchanged++;
		}
	}
	return nchanged;
}

/* After the data landed: the snapshot's holes drop what the region has
 * there. Counts the pages changed into *nchanged. */
static int load_holes(const struct snap_op *op, size_t *nchanged)
{
	hpr_region *r = op->r;
	bool locked = false, locked_known = false;

	for (size_t i = 0; i < r->npages; i++) {
		int rc;

		if (op->tab[i].flags & HPR__SNAP_PG_DATA) {
			++*nchanged;
			continue;
		}
		if (!(op->pg[i] & PG_BEFORE))
			continue;
		if (!locked_known) {
			locked = hpr__mem_locked(r, true);
			locked_known = true;
		}
		++*nchanged;
		rc = zero_page(r, i, locked);
		if (rc)
			return hpr__fail(rc,
					 "hpr_load: dropping page %zu (a hole in the "
					 "snapshot) failed: %s; %zu bytes of region '%s' changed",
					 i, strerror(-rc), *nchanged * r->page_size, r->name);
	}
	return 0;
}

int hpr_load(hpr_region *r, int fd, unsigned flags, size_t *changed)
{
	struct snap_op op;
	size_t nchanged = 0;
	int rc, dfd, lazy = 1;

	hpr__err_clear();
	if (changed)
		*changed = 0;
	if (!r)
		return hpr__fail(-EINVAL, "hpr_load: region is NULL");
	if (r->not_mapped)
		return hpr__region_mapped(r);
	if (flags & ~(HPR_SNAP_ALL_ | HPR_SNAP_LAZY))
		return hpr__fail(-EINVAL, "hpr_load: unknown flags %#x",
				 flags & ~(HPR_SNAP_ALL_ | HPR_SNAP_LAZY));
	if ((rc = hpr__lazy_busy(r, "hpr_load")))
		return rc;
	/* a lazy load needs an empty region: checked first, all at once */
	if ((flags & HPR_SNAP_LAZY) && (rc = hpr__lazy_check_region(r)))
		return rc;
	rc = op_init(&op, r, false, fd, flags);
	if (!rc)
		rc = load_prepare(&op, r, fd, flags & HPR_SNAP_LAZY);
	if (!rc && (flags & HPR_SNAP_LAZY)) /* lazyload.c; 1: eager after all */
		lazy = hpr__lazy_load(r, fd, &op.tab, op.data_off, changed);
	if (rc || lazy <= 0) {
		op_free(&op);
		return rc ? rc : lazy;
	}
	dfd = open_data_fd(fd, false, flags);
	if (dfd >= 0) {
		op.fd = dfd;
		op.direct = true;
	}
	rc = op_run(&op, load_page);
	if (dfd >= 0)
		hpr__os->close(dfd);
	if (rc) {
		nchanged = load_undo(&op);
		rc = hpr__fail(rc, "hpr_load: %s (%s: %zu bytes of region '%s' changed)", op.msg,
			       nchanged ? "pages that had contents were overwritten" :
					  "the region is as it was",
			       nchanged * r->page_size, r->name);
	} else {
		rc = load_holes(&op, &nchanged);
	}
	if (changed)
		*changed = nchanged * r->page_size;
	op_free(&op);
	return rc;
}
