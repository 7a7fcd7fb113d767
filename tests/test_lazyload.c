/* SPDX-License-Identifier: MIT */
/*
 * Lazy snapshot load (hpr_load with HPR_SNAP_LAZY, hpr_load_wait,
 * hpr_load_progress, hpr_load_cancel): every backend, with threads
 * touching pages in random order while the fill runs and every byte
 * checked; demand first; corruption at the first, a middle and the last
 * saved page and a file truncated during the load (the toucher of a bad
 * page gets SIGSEGV, never other bytes; the region is empty after
 * hpr_load_wait); cancel; destroy and fork during the load; the eager
 * fallback without userfaultfd; the refusal of a region that is not
 * empty (PAGEMAP_SCAN, and mincore forced); a snapshot with every page
 * saved (the extents shortcut); THP by UFFDIO_MOVE and its fallbacks,
 * forced. Residency and huge mappings from smaps.
 */
#include "common.h"
#include "lazyload.h" /* the load's counters (demanded, moved, copied) */
#include "os.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NPAGES 16
#define PS (2 * MiB)
static const size_t data_pages[] = { 0, 2, 3, 7, 10, 15 };
#define NDATA (sizeof(data_pages) / sizeof(data_pages[0]))

static bool is_data_page(size_t p)
{
	for (size_t i = 0; i < NDATA; i++)
		if (data_pages[i] == p)
			return true;
	return false;
}

static uint64_t pattern(size_t page, size_t word)
{
	uint64_t x = (page << 40) ^ word ^ 0x9e3779b97f4a7c15ULL;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

/* The first word of page p at base that differs from what it must hold
 * (the pattern, or zeros for a hole), or (size_t)-1. Every word; with
 * HPR_TEST_QUICK one in 16 (a wrong page or zeros still show): in the VM
 * guests, which emulate the CPU, reading the pages word by word was most
 * of the suite's time (83 s on 6.1 under TCG, 4 touchers). */
static size_t page_bad(const char *base, size_t p)
{
	const volatile uint64_t *w = (const volatile uint64_t *)(base + p * PS);
	bool data = is_data_page(p);
	size_t step = t_quick() ? 16 : 1;

	for (size_t i = 0; i < PS / 8; i += step)
		if (w[i] != (data ? pattern(p, i) : 0))
			return i;
	return (size_t)-1;
}

/* A snapshot of NDATA pattern pages on a tmpfs file (page cache I/O). */
static int saved(void)
{
	static const char *dir;
	/* a memfd with fallback: the snapshot does not depend on THP modes */
	hpr_region *s = t_region(HPR_BACKEND_SHMEM, NULL, NPAGES * PS, 0, HPR_F_FALLBACK);
	int fd, rc;

	if (!dir)
		dir = t_mount_tmpfs("size=256m");
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "O_TMPFILE: %s", strerror(errno));
	for (size_t i = 0; i < NDATA; i++) {
		uint64_t *w = (uint64_t *)((char *)hpr_base(s) + data_pages[i] * PS);

		ck_assert_int_eq(hpr_fault_in(s, data_pages[i] * PS, PS), 0);
		for (size_t k = 0; k < PS / 8; k++)
			w[k] = pattern(data_pages[i], k);
	}
	rc = hpr_save(s, fd, 0);
	ck_assert_msg(rc == 0, "save: %s", hpr_strerror(rc));
	hpr_destroy(s);
	return fd;
}

static off_t file_page(size_t p)
{
	uint64_t end = HPR__SNAP_TABLE_OFF + NPAGES * sizeof(struct hpr__snap_ent);

	return (off_t)((end + PS - 1) / PS * PS + p * PS);
}

/* ---- a slow file: each page read sleeps, so that the touchers run
 * while the fill does; and a gate: while it is shut, the reads of pages
 * GATE_PAGE to gate_end - 1 wait, except the test thread's own
 * (hpr_fault_in), so the load surely still runs when the test acts --
 * however long this (nice) process waits for a CPU; sleeps alone were not
 * enough on a loaded machine ---- */
static struct hpr_os_ops slow_ops;
static _Atomic unsigned slow_us;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_shut;
static pthread_t gate_owner;
static size_t gate_end;
static unsigned gate_held; /* reads waiting at the gate now */
#define GATE_PAGE 7

static ssize_t slow_pread_full(int fd, void *buf, size_t len, off_t off)
{
	if (len >= PS && slow_us)
		usleep(slow_us);
	if (len >= PS && off >= file_page(GATE_PAGE)) {
		pthread_mutex_lock(&gate_mu);
		while (gate_shut && off < file_page(gate_end) &&
		       !pthread_equal(pthread_self(), gate_owner)) {
			gate_held++;
			pthread_cond_broadcast(&gate_cv); /* gate_wait_held */
			pthread_cond_wait(&gate_cv, &gate_mu);
			gate_held--;
		}
		pthread_mutex_unlock(&gate_mu);
	}
	return hpr__os_real.pread_full(fd, buf, len, off);
}

static void gate_close(size_t end)
{
	pthread_mutex_lock(&gate_mu);
	gate_shut = true;
	gate_end = end;
	gate_owner = pthread_self();
	pthread_mutex_unlock(&gate_mu);
}

/* until a read (a fill worker's) waits at the gate: the fill cannot end */
static void gate_wait_held(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	pthread_mutex_lock(&gate_mu);
	while (!gate_held && pthread_cond_timedwait(&gate_cv, &gate_mu, &ts) == 0)
		;
	ck_assert_msg(gate_held, "no read reached the gate in 30 s");
	pthread_mutex_unlock(&gate_mu);
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_shut = false;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

static void slow_begin(unsigned us)
{
	slow_ops = hpr__os_real;
	slow_ops.pread_full = slow_pread_full;
	slow_us = us;
	hpr__os_set(&slow_ops);
}

/* ---- touchers: threads reading pages in random order ---- */
struct touch {
	hpr_region *r;
	unsigned seed;
	size_t bad_page, bad_word; /* first difference seen */
	unsigned segv;		   /* pages that raised SIGSEGV */
};

static __thread sigjmp_buf *tls_jmp;

static void on_segv(int sig)
{
	(void)sig;
	if (tls_jmp)
		siglongjmp(*tls_jmp, 1);
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
}

static void *toucher(void *arg)
{
	struct touch *t = arg;
	unsigned order[NPAGES];
	const char *base = hpr_base(t->r);
	sigjmp_buf jb;

	t->bad_page = (size_t)-1;
	for (unsigned i = 0; i < NPAGES; i++)
		order[i] = i;
	for (unsigned i = NPAGES - 1; i > 0; i--) { /* shuffle */
		unsigned j = (unsigned)rand_r(&t->seed) % (i + 1), x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	tls_jmp = &jb;
	for (unsigned i = 0; i < NPAGES; i++) {
		volatile unsigned p = order[i];
		size_t w;

		if (sigsetjmp(jb, 1)) {
			t->segv++;
			continue;
		}
		w = page_bad(base, p);
		if (w != (size_t)-1 && t->bad_page == (size_t)-1) {
			t->bad_page = p;
			t->bad_word = w;
		}
	}
	tls_jmp = NULL;
	return NULL;
}

#define NTOUCH 4

/* touchers: NTOUCH, 2 with HPR_TEST_QUICK (the VM guests have 2 CPUs) */
static unsigned ntouch(void)
{
	return t_quick() ? 2 : NTOUCH;
}

static void touch_all(hpr_region *r, struct touch *t)
{
	pthread_t th[NTOUCH];
	struct sigaction sa = { .sa_handler = on_segv };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	for (unsigned i = 0; i < ntouch(); i++) {
		t[i] = (struct touch){ .r = r, .seed = 12345 + i * 7 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, toucher, &t[i]), 0);
	}
	for (unsigned i = 0; i < ntouch(); i++)
		pthread_join(th[i], NULL);
}

static void corrupt_at(enum hpr_backend b, size_t page);
static void destroy_midway(enum hpr_backend b, int fd);

static hpr_region *mk(enum hpr_backend b, const char *path)
{
	hpr_region *r = t_region(b, path, NPAGES * PS, 2,
				 b == HPR_BACKEND_SHMEM && !path ? HPR_F_FALLBACK : 0);

	ck_assert_uint_eq(hpr_page_size(r), PS);
	return r;
}

static void lazy_ok(hpr_region *r, int fd)
{
	size_t changed = 0;
	int rc = hpr_load(r, fd, HPR_SNAP_LAZY, &changed);

	ck_assert_msg(rc == 0, "lazy load: %s", hpr_strerror(rc));
	ck_assert_uint_eq(changed, NDATA * PS);
}

/* After a successful lazy load: every byte, residency and huge mappings
 * from the kernel, the counters. */
static void check_done(hpr_region *r, bool holes_touched)
{
	struct hpr_stats st;
	struct t_smaps k;
	size_t loaded = 0, demanded = 0, total = 0;

	ck_assert_int_eq(hpr_load_progress(r, &loaded, &demanded, &total), 0);
	ck_assert_uint_eq(total, NDATA * PS);
	ck_assert_uint_eq(loaded, NDATA * PS);
	ck_assert_uint_le(demanded, loaded);
	for (size_t p = 0; p < NPAGES; p++) {
		size_t w = page_bad(hpr_base(r), p);

		ck_assert_msg(w == (size_t)-1, "page %zu word %zu differs after the load", p, w);
	}
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_int_eq(st.lazy_load, HPR_LAZY_UFFD);
	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	/* the saved pages are resident and huge; holes were zero-filled where
	 * they were touched (hugetlb and shmem: resident too), THP holes map
	 * the shared zero page */
	ck_assert_uint_ge(k.rss + k.hugetlb, NDATA * PS);
	if (!holes_touched || hpr_backend_of(r) == HPR_BACKEND_THP)
		ck_assert_uint_eq(st.pages_present, NDATA);
	ck_assert_msg(k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb >= NDATA * PS,
		      "%zu bytes huge-mapped (smaps), want >= %zu (resident %zu)",
		      k.anon_huge + k.shmem_pmd + k.file_pmd + k.hugetlb, NDATA * PS,
		      k.rss + k.hugetlb);
	ck_assert_uint_ge(st.huge_mapped, NDATA * PS);
}

/* Touchers in random order while the fill runs, then the end: every byte
 * they read right, no SIGSEGV, hpr_load_wait 0, the region complete. */
static void touched_then_done(hpr_region *r, struct touch *t)
{
	int rc;

	touch_all(r, t);
	for (unsigned i = 0; i < ntouch(); i++) {
		ck_assert_msg(t[i].bad_page == (size_t)-1, "toucher %u: page %zu word %zu wrong", i,
			      t[i].bad_page, t[i].bad_word);
		ck_assert_uint_eq(t[i].segv, 0);
	}
	rc = hpr_load_wait(r);
	ck_assert_msg(rc == 0, "wait: %s", hpr_strerror(rc));
	hpr__os_set(NULL);
	check_done(r, true);
}

/* The whole path on backend b: load, touchers while it fills, wait. */
static void lazy_backend(enum hpr_backend b, const char *path)
{
	int fd = saved();
	hpr_region *r = mk(b, path);
	struct touch t[NTOUCH];

	slow_begin(3000); /* the touchers run while the fill does */
	lazy_ok(r, fd);
	close(fd); /* the load holds its own descriptor */
	touched_then_done(r, t);
	ck_assert_int_eq(hpr_destroy(r), 0);
}

START_TEST(lazy_thp)
{
	lazy_backend(HPR_BACKEND_THP, NULL);
}
END_TEST

START_TEST(lazy_shmem_memfd)
{
	lazy_backend(HPR_BACKEND_SHMEM, NULL);
}
END_TEST

START_TEST(lazy_shmem_tmpfs)
{
	lazy_backend(HPR_BACKEND_SHMEM, t_mount_tmpfs("huge=always,size=64m"));
}
END_TEST

/* A kept region made new (HPR_F_ATTACH, nothing to attach to) is empty
 * though its file holds the stamp past the region's end: a lazy load into
 * it runs, and the next process attaches to what it loaded. */
static hpr_region *kept(const char *dir)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	t_config(&c, HPR_BACKEND_SHMEM, dir, NPAGES * PS, 2, HPR_F_ATTACH | HPR_F_SHARED);
	c.name = "kept";
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create the kept region: %s", hpr_strerror(rc));
	return r;
}

START_TEST(lazy_kept_new)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	hpr_region *r = kept(dir);
	int fd = saved(), rc;

	ck_assert(!hpr_attached(r));
	lazy_ok(r, fd);
	close(fd);
	rc = hpr_load_wait(r);
	ck_assert_msg(rc == 0, "wait: %s", hpr_strerror(rc));
	check_done(r, false);
	ck_assert_int_eq(hpr_destroy(r), 0);
	/* kept: attached again, with the loaded bytes */
	r = kept(dir);
	ck_assert(hpr_attached(r));
	for (size_t i = 0; i < NPAGES; i++)
		ck_assert_msg(page_bad(hpr_base(r), i) == (size_t)-1, "page %zu differs", i);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(lazy_hugetlb)
{
	unsigned long free0;
	int fd;

	t_need_pool_2m(NPAGES + 2);
	free0 = t_hugetlb_free(2048);
	lazy_backend(HPR_BACKEND_HUGETLB, NULL);
	ck_assert_uint_eq(t_hugetlb_free(2048), free0);
	/* a corrupt middle page: SIGSEGV or the right bytes, then empty */
	corrupt_at(HPR_BACKEND_HUGETLB, 7);
	ck_assert_uint_eq(t_hugetlb_free(2048), free0);
	/* destroyed during the load: every page back in the pool */
	fd = saved();
	destroy_midway(HPR_BACKEND_HUGETLB, fd);
	ck_assert_uint_eq(t_hugetlb_free(2048), free0);
	close(fd);
}
END_TEST

/* A page loaded on demand: hpr-uffd serves a fault itself, whatever the
 * fill is doing (here: waiting at the gate). */
static void wait_demand(hpr_region *r)
{
	struct hpr__lazy *L = atomic_load(&r->lazy);
	size_t demanded = 0;

	for (int i = 0; i < 10000 && !demanded; i++) {
		demanded = atomic_load(&L->demanded);
		if (!demanded)
			usleep(1000);
	}
	ck_assert_msg(demanded, "no fault was served on demand in 10 s");
}

static void *touch_last(void *arg)
{
	return (void *)(uintptr_t)(page_bad(hpr_base(arg), 15) == (size_t)-1);
}

/* Untouched: the fill alone; demand: the last page touched first. */
static void demand_first(enum hpr_backend b)
{
	int fd = saved(), rc;
	hpr_region *r = mk(b, NULL);
	size_t demanded = 0;
	pthread_t th;
	void *ok;

	slow_begin(1000);
	gate_close(15); /* the fill stops before page 7; page 15 passes on demand */
	lazy_ok(r, fd);
	/* the rest of the API refuses while the load runs */
	ck_assert_int_eq(hpr_release_lazy(r, 0, PS), -EBUSY);
	ck_assert_int_eq(hpr_save(r, fd, 0), -EBUSY);
	ck_assert_int_eq(hpr_load(r, fd, 0, NULL), -EBUSY);
	/* the last page, touched while the fill cannot get there, is served
	 * on demand as soon as a worker is free */
	ck_assert_int_eq(pthread_create(&th, NULL, touch_last, r), 0);
	wait_demand(r);
	gate_open();
	ck_assert_int_eq(pthread_join(th, &ok), 0);
	ck_assert_msg(ok, "page 15 differs after its demand load");
	ck_assert_int_eq(hpr_load_progress(r, NULL, &demanded, NULL), 0);
	ck_assert_uint_ge(demanded, PS);
	/* hpr_fault_in of a saved page loads it in the caller */
	ck_assert_int_eq(hpr_fault_in(r, 10 * PS, PS), 0);
	ck_assert_uint_eq(page_bad(hpr_base(r), 10), (size_t)-1);
	rc = hpr_load_wait(r);
	ck_assert_msg(rc == 0, "wait: %s", hpr_strerror(rc));
	hpr__os_set(NULL);
	check_done(r, false);
	ck_assert_int_eq(hpr_destroy(r), 0);
	close(fd);
}

START_TEST(demand_first_thp)
{
	demand_first(HPR_BACKEND_THP);
}
END_TEST

START_TEST(demand_first_shmem)
{
	demand_first(HPR_BACKEND_SHMEM);
}
END_TEST

static size_t resident(hpr_region *r)
{
	struct t_smaps k;

	ck_assert_int_eq(t_smaps(hpr_base(r), hpr_size(r), &k), 0);
	return k.rss + k.hugetlb;
}

/* A load that fails part-way (err): the touchers see the right bytes or
 * SIGSEGV, never others; hpr_load_wait gives err and an empty region. */
static void failed_load(enum hpr_backend b, int fd, int err, const char *why, unsigned us,
			void (*act)(hpr_region *r, int fd))
{
	hpr_region *r = mk(b, NULL);
	struct touch t[NTOUCH];
	unsigned segv = 0;
	int rc;

	slow_begin(us);
	if (act)
		gate_close(NPAGES); /* act while the fill waits before page 7 */
	lazy_ok(r, fd);
	if (act) {
		act(r, fd);
		gate_open();
	}
	touch_all(r, t);
	for (unsigned i = 0; i < ntouch(); i++) {
		ck_assert_msg(t[i].bad_page == (size_t)-1,
			      "%s: toucher %u read wrong bytes: page %zu word %zu", why, i,
			      t[i].bad_page, t[i].bad_word);
		segv += t[i].segv;
	}
	ck_assert_msg(segv > 0, "%s: no toucher saw SIGSEGV", why);
	rc = hpr_load_wait(r);
	ck_assert_msg(rc == err, "%s: wait gave %d (%s), want %d", why, rc, hpr_strerror(rc), err);
	hpr__os_set(NULL);
	/* defined state: empty, read-write, usable */
	ck_assert_uint_eq(resident(r), 0);
	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0);
	memset(hpr_base(r), 1, hpr_size(r));
	ck_assert_int_eq(hpr_destroy(r), 0);
}

static void corrupt(int fd, size_t page)
{
	char c;

	ck_assert_int_eq(pread(fd, &c, 1, file_page(page) + 4242), 1);
	c ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &c, 1, file_page(page) + 4242), 1);
}

static void corrupt_at(enum hpr_backend b, size_t page)
{
	int fd = saved();
	char why[64];

	corrupt(fd, page);
	snprintf(why, sizeof(why), "%s, page %zu corrupt", hpr_backend_name(b), page);
	failed_load(b, fd, -EBADMSG, why, 1000, NULL);
	close(fd);
}

START_TEST(corrupt_first_thp)
{
	corrupt_at(HPR_BACKEND_THP, 0);
}
END_TEST

START_TEST(corrupt_middle_shmem)
{
	corrupt_at(HPR_BACKEND_SHMEM, 7);
}
END_TEST

START_TEST(corrupt_last_thp)
{
	corrupt_at(HPR_BACKEND_THP, 15);
}
END_TEST

START_TEST(corrupt_last_shmem)
{
	corrupt_at(HPR_BACKEND_SHMEM, 15);
}
END_TEST

static void cut_file(hpr_region *r, int fd)
{
	(void)r;
	ck_assert_int_eq(ftruncate(fd, file_page(10) + 1000), 0);
}

START_TEST(truncated)
{
	int fd = saved(), rc;
	hpr_region *r = mk(HPR_BACKEND_THP, NULL);
	struct stat st;

	/* before: refused by the checks, the region untouched */
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(ftruncate(fd, st.st_size - PS), 0);
	rc = hpr_load(r, fd, HPR_SNAP_LAZY, NULL);
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert_int_eq(hpr_load_wait(r), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(ftruncate(fd, st.st_size), 0);
	close(fd);
	/* during the load: pages 10 and 15 are cut off */
	fd = saved();
	failed_load(HPR_BACKEND_THP, fd, -EBADMSG, "truncated", 3000, cut_file);
	close(fd);
}
END_TEST

static void cancel_it(hpr_region *r, int fd)
{
	(void)fd;
	ck_assert_int_eq(hpr_load_cancel(r), 0);
}

START_TEST(cancel)
{
	int fd = saved();

	failed_load(HPR_BACKEND_SHMEM, fd, -ECANCELED, "cancelled", 3000, cancel_it);
	close(fd);
}
END_TEST

/* Destroyed while the fill is at its first pages (20 ms a page), after
 * a demand load of page 3. */
static void destroy_midway(enum hpr_backend b, int fd)
{
	hpr_region *r = mk(b, NULL);

	slow_begin(20000);
	gate_close(NPAGES);
	lazy_ok(r, fd);
	ck_assert_uint_eq(page_bad(hpr_base(r), 3), (size_t)-1);
	gate_open(); /* the fill's last pages still to come (the destroy joins it) */
	ck_assert_int_eq(hpr_destroy(r), 0);
	hpr__os_set(NULL);
}

START_TEST(destroy_during_load)
{
	int fd = saved();
	int maps;

	/* twice: the first round fills glibc's cache of thread stacks */
	for (int round = 0; round < 2; round++) {
		maps = t_maps_count();
		for (int b = HPR_BACKEND_THP; b <= HPR_BACKEND_SHMEM; b++)
			destroy_midway((enum hpr_backend)b, fd);
	}
	if (!T_SANITIZED)
		ck_assert_int_le(t_maps_count(), maps);
	close(fd);
}
END_TEST

/* A fork while the load of r still runs (the gate holds it), after a demand
 * load of page 2: the child exits with child(r); in the parent the
 * touchers read every byte right and the load ends well. */
static void fork_midway(hpr_region *r, int (*child)(hpr_region *r))
{
	int fd = saved(), rc, st;
	struct touch t[NTOUCH];
	pid_t pid;

	slow_begin(20000);
	gate_close(NPAGES); /* the load surely runs at the fork */
	lazy_ok(r, fd);
	ck_assert_uint_eq(page_bad(hpr_base(r), 2), (size_t)-1);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child(r));
	gate_open();
	touch_all(r, t);
	for (unsigned i = 0; i < ntouch(); i++) {
		ck_assert_uint_eq(t[i].bad_page, (size_t)-1);
		ck_assert_uint_eq(t[i].segv, 0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	rc = hpr_load_wait(r);
	ck_assert_msg(rc == 0, "wait: %s", hpr_strerror(rc));
	hpr__os_set(NULL);
	check_done(r, true);
	hpr_destroy(r);
	close(fd);
}

/* The child does not inherit the load: cancelled there, its private
 * region emptied by hpr_load_wait. */
static int child_private(hpr_region *r)
{
	if (hpr_load_wait(r) != -ECANCELED)
		return 10;
	if (resident(r) != 0)
		return 11;
	for (size_t p = 0; p < NPAGES; p++)
		if (((char *)hpr_base(r))[p * PS + 5])
			return 12;
	return 0;
}

START_TEST(fork_during_load)
{
	fork_midway(mk(HPR_BACKEND_THP, NULL), child_private);
}
END_TEST

/* The shared file is the parent's to fill: the child keeps what was
 * loaded at the fork and punches nothing. */
static int child_shared(hpr_region *r)
{
	if (hpr_load_wait(r) != -ECANCELED)
		return 10;
	return page_bad(hpr_base(r), 2) != (size_t)-1 ? 11 : 0;
}

START_TEST(fork_during_load_shared)
{
	fork_midway(t_region(HPR_BACKEND_SHMEM, NULL, NPAGES * PS, 2,
			     HPR_F_SHARED | HPR_F_FALLBACK),
		    child_shared);
}
END_TEST

/* ---- hpr_fault_in after the load failed, before hpr_load_wait: the
 * load's own error, whether hpr-uffd has ended the load yet or not, and
 * for pages mapped before the failure too; the -EBUSY calls name it ---- */
static void fault_in_gives_load_error(hpr_region *r, const char *when)
{
	int rc;

	for (size_t p = 0; p < 2; p++) { /* 0: saved (mapped before, or the bad one); 1: a hole */
		rc = hpr_fault_in(r, p * PS, PS);
		ck_assert_msg(rc == -EBADMSG && strstr(hpr_strerror(rc), "checksum"),
			      "%s: hpr_fault_in of page %zu gave %d (%s), want -EBADMSG, checksum",
			      when, p, rc, hpr_strerror(rc));
	}
	rc = hpr_prefault_start(r, 0, PS);
	ck_assert_msg(rc == -EBUSY && strstr(hpr_strerror(rc), "checksum"),
		      "%s: hpr_prefault_start gave %d (%s)", when, rc, hpr_strerror(rc));
}

START_TEST(failed_then_fault_in)
{
	int fd = saved(), rc;
	hpr_region *r = mk(HPR_BACKEND_THP, NULL);
	struct hpr__lazy *L;

	/* ended: page 0, the fill's first, is bad; wait until hpr-uffd has
	 * ended the load (unregistered, PROT_NONE) */
	corrupt(fd, 0);
	lazy_ok(r, fd);
	L = atomic_load(&r->lazy);
	for (int i = 0; i < 10000 && !atomic_load(&L->ended); i++)
		usleep(1000);
	ck_assert_msg(atomic_load(&L->ended), "the failed load did not end in 10 s");
	fault_in_gives_load_error(r, "ended");
	ck_assert_int_eq(hpr_load_wait(r), -EBADMSG);
	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0); /* empty, usable */
	ck_assert_int_eq(hpr_destroy(r), 0);
	close(fd);

	/* not ended: the fill held at the gate before page 7 (so hpr-uffd,
	 * which joins it, cannot end the load), page 15 bad, loaded by this
	 * thread's hpr_fault_in (the gate lets the test's own reads pass) */
	fd = saved();
	corrupt(fd, 15);
	r = mk(HPR_BACKEND_THP, NULL);
	slow_begin(0);
	gate_close(NPAGES);
	lazy_ok(r, fd);
	ck_assert_uint_eq(page_bad(hpr_base(r), 0), (size_t)-1); /* page 0 mapped */
	/* a fill worker waits at the gate (the job, and so hpr-uffd, cannot
	 * end before it); without this the fill, not there yet, could stop
	 * at the error and the load end (ASan: 5 in 51) */
	gate_wait_held();
	rc = hpr_fault_in(r, 15 * PS, PS);
	ck_assert_msg(rc == -EBADMSG, "fault-in of the bad page: %d (%s)", rc, hpr_strerror(rc));
	L = atomic_load(&r->lazy);
	ck_assert(!atomic_load(&L->ended));
	fault_in_gives_load_error(r, "not ended");
	gate_open();
	ck_assert_int_eq(hpr_load_wait(r), -EBADMSG);
	hpr__os_set(NULL);
	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0);
	ck_assert_int_eq(hpr_destroy(r), 0);
	close(fd);
}
END_TEST

/* ---- the end of the load wakes a fault queued after its unregister ----
 * UFFDIO_UNREGISTER wakes the faults queued when it runs; a fault taken
 * under the per-VMA lock that has seen the range registered can queue
 * itself just after that wake (test_lazyload lazy_hugetlb hung so, once,
 * on a loaded machine). The hook below makes that state for sure, with
 * no timing: when hpr-uffd ends the load, a thread touches hole page
 * LATE_PAGE and, once its fault is queued (the userfaultfd polls
 * readable: nobody reads it any more), that page's registration is
 * dropped by mapping it again, which wakes nobody -- as the kernel's
 * unregister had already passed its wake -- and then the real
 * UFFDIO_UNREGISTER runs. The toucher must still get its zeros. */
#define LATE_PAGE 1 /* a hole nobody else touches */
static struct hpr_os_ops late_ops;
static hpr_region *late_r;
static pthread_t late_th;
static _Atomic int late_state; /* 0 not yet; 1 set up; -1 could not */

static void *late_touch(void *arg)
{
	const volatile uint64_t *w =
		(const volatile uint64_t *)((const char *)hpr_base(late_r) + LATE_PAGE * PS);

	(void)arg;
	/* The first read blocks in the fault until the load's end wakes it;
	 * by then the hook has mapped the page again and published
	 * late_state = 1. Reading late_state after it orders that mmap
	 * before the reads of the page for TSan, which cannot see that the
	 * kernel held this thread until then (its mmap interceptor counts
	 * as a write of the page: a data race on the hook's thread). */
	(void)w[0];
	(void)atomic_load(&late_state);
	return (void *)(uintptr_t)(page_bad(hpr_base(late_r), LATE_PAGE) == (size_t)-1);
}

static int late_ioctl(int fd, unsigned long req, void *arg)
{
	int zero = 0;

	if (req == UFFDIO_UNREGISTER && atomic_compare_exchange_strong(&late_state, &zero, -1)) {
		char *pg = (char *)hpr_base(late_r) + LATE_PAGE * PS;
		struct pollfd pf = { .fd = fd, .events = POLLIN };

		if (!pthread_create(&late_th, NULL, late_touch, NULL)) {
			atomic_store(&late_state, -2); /* started, not queued */
			if (poll(&pf, 1, 10000) == 1 &&
			    mmap(pg, PS, PROT_READ | PROT_WRITE,
				 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
				 0) == pg)
				atomic_store(&late_state, 1);
		}
	}
	return hpr__os_real.ioctl(fd, req, arg);
}

START_TEST(late_fault_at_end)
{
	int fd = saved(), rc, st;
	hpr_region *r = mk(HPR_BACKEND_THP, NULL);
	struct timespec ts;
	void *ok = NULL;

	late_r = r;
	late_ops = hpr__os_real;
	late_ops.ioctl = late_ioctl;
	hpr__os_set(&late_ops);
	lazy_ok(r, fd);
	rc = hpr_load_wait(r);
	hpr__os_set(NULL);
	ck_assert_msg(rc == 0, "wait: %s", hpr_strerror(rc));
	st = atomic_load(&late_state);
	ck_assert_msg(st != 0 && st != -1, "the hook did not start the late toucher (%d)", st);
	if (st == 1) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 20;
		rc = pthread_timedjoin_np(late_th, &ok, &ts);
		ck_assert_msg(rc == 0,
			      "a fault queued after UFFDIO_UNREGISTER's wake was never woken "
			      "(page %d, 20 s)",
			      LATE_PAGE);
		ck_assert_msg(ok, "page %d is not zeros", LATE_PAGE);
	} else {
		/* its fault never queued (the page is not registered?): the
		 * state this test makes was not reached; no verdict */
		ck_assert_int_eq(pthread_join(late_th, &ok), 0);
	}
	ck_assert_int_eq(hpr_destroy(r), 0);
	close(fd);
}
END_TEST

/* ---- no userfaultfd: the eager load, and the stats say why ---- */
static int no_uffd(bool user_only)
{
	(void)user_only;
	return -EPERM;
}

START_TEST(fallback_no_uffd)
{
	struct hpr_os_ops ops = hpr__os_real;
	int fd = saved(), rc;
	hpr_region *r = mk(HPR_BACKEND_SHMEM, NULL);
	struct hpr_stats st;
	size_t changed = 0;

	ops.uffd_open = no_uffd;
	hpr__os_set(&ops);
	rc = hpr_load(r, fd, HPR_SNAP_LAZY, &changed);
	hpr__os_set(NULL);
	ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
	ck_assert_uint_eq(changed, NDATA * PS);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_int_eq(st.lazy_load, HPR_LAZY_EAGER);
	ck_assert_int_eq(st.lazy_fallback_err, -EPERM);
	ck_assert_int_eq(hpr_load_wait(r), 0);
	ck_assert_uint_eq(resident(r), NDATA * PS); /* before reading the holes */
	for (size_t p = 0; p < NPAGES; p++)
		ck_assert_uint_eq(page_bad(hpr_base(r), p), (size_t)-1);
	hpr_destroy(r);
	close(fd);
}
END_TEST

START_TEST(refusals)
{
	int fd = saved();
	hpr_region *r = mk(HPR_BACKEND_THP, NULL);

	/* not empty */
	ck_assert_int_eq(hpr_fault_in(r, PS, PS), 0);
	ck_assert_int_eq(hpr_load(r, fd, HPR_SNAP_LAZY, NULL), -EBUSY);
	ck_assert_int_eq(hpr_save(r, fd, HPR_SNAP_LAZY), -EINVAL);
	/* nothing running */
	ck_assert_int_eq(hpr_load_cancel(r), 0);
	ck_assert_int_eq(hpr_load_wait(r), 0);
	ck_assert_int_eq(hpr_load_progress(r, NULL, NULL, NULL), 0);
	ck_assert_int_eq(hpr_load_wait(NULL), -EINVAL);
	hpr_destroy(r);
	/* a second lazy load after the first was waited for */
	r = mk(HPR_BACKEND_THP, NULL);
	lazy_ok(r, fd);
	ck_assert_int_eq(hpr_load_wait(r), 0);
	ck_assert_int_eq(hpr_load(r, fd, HPR_SNAP_LAZY, NULL), -EBUSY); /* not empty */
	hpr_destroy(r);
	close(fd);
}
END_TEST

/* ---- the emptiness check before a lazy load: whole-region, with the
 * mincore fallback forced (no PAGEMAP_SCAN before 6.7) ---- */
static int no_pagemap_any(int fd, uintptr_t lo, uintptr_t hi)
{
	(void)fd;
	(void)lo;
	(void)hi;
	return -EOPNOTSUPP;
}

START_TEST(refusals_not_empty)
{
	struct hpr_os_ops ops = hpr__os_real;
	int fd = saved();

	ops.pagemap_any = no_pagemap_any;
	for (int fallback = 0; fallback < 2; fallback++) {
		if (fallback)
			hpr__os_set(&ops);
		for (int b = HPR_BACKEND_THP; b <= HPR_BACKEND_SHMEM; b++) {
			hpr_region *r = mk((enum hpr_backend)b, NULL);

			/* written without hpr_fault_in: the table knows nothing */
			((volatile char *)hpr_base(r))[11 * PS + 4096] = 1;
			ck_assert_int_eq(hpr_load(r, fd, HPR_SNAP_LAZY, NULL), -EBUSY);
			ck_assert_msg(strstr(hpr_strerror(-EBUSY), "holds pages"), "%s",
				      hpr_strerror(-EBUSY));
			hpr_destroy(r);
			/* read only: THP maps the zero page there, refused too */
			r = mk((enum hpr_backend)b, NULL);
			(void)((volatile char *)hpr_base(r))[NPAGES * PS - 1];
			ck_assert_int_eq(hpr_load(r, fd, HPR_SNAP_LAZY, NULL), -EBUSY);
			hpr_destroy(r);
			/* empty: loads */
			r = mk((enum hpr_backend)b, NULL);
			lazy_ok(r, fd);
			ck_assert_int_eq(hpr_load_wait(r), 0);
			for (size_t p = 0; p < NPAGES; p++)
				ck_assert_uint_eq(page_bad(hpr_base(r), p), (size_t)-1);
			hpr_destroy(r);
		}
	}
	hpr__os_set(NULL);
	close(fd);
}
END_TEST

/* ---- a snapshot with every page saved: its file has no hole, and
 * hpr_load skips the per-page extents check ---- */
static uint64_t full_pattern(size_t p, size_t k)
{
	return pattern(p, k) ^ 0x5a5a;
}

static int saved_full(void)
{
	static const char *dir;
	hpr_region *s = t_region(HPR_BACKEND_SHMEM, NULL, NPAGES * PS, 0, HPR_F_FALLBACK);
	uint64_t *w = hpr_base(s);
	int fd, rc;

	if (!dir)
		dir = t_mount_tmpfs("size=256m");
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "O_TMPFILE: %s", strerror(errno));
	ck_assert_int_eq(hpr_fault_in(s, 0, NPAGES * PS), 0);
	for (size_t p = 0; p < NPAGES; p++)
		for (size_t k = 0; k < PS / 8; k++)
			w[p * (PS / 8) + k] = full_pattern(p, k);
	rc = hpr_save(s, fd, 0);
	ck_assert_msg(rc == 0, "save: %s", hpr_strerror(rc));
	hpr_destroy(s);
	return fd;
}

static void check_full(hpr_region *r)
{
	const uint64_t *w = hpr_base(r);

	for (size_t p = 0; p < NPAGES; p++)
		for (size_t k = 0; k < PS / 8; k += t_quick() ? 16 : 1)
			ck_assert_msg(w[p * (PS / 8) + k] == full_pattern(p, k),
				      "page %zu word %zu differs", p, k);
}

START_TEST(full_snapshot)
{
	int fd = saved_full(), rc;
	off_t end = lseek(fd, 0, SEEK_END), pg5 = end - (off_t)(NPAGES - 5) * (off_t)PS;
	struct stat st;

	ck_assert_int_eq(fstat(fd, &st), 0);
	/* the shortcut: more blocks than the pages but one, after the table */
	ck_assert_int_gt((off_t)st.st_blocks * 512, file_page(NPAGES - 1));
	for (int b = HPR_BACKEND_THP; b <= HPR_BACKEND_SHMEM; b++) {
		hpr_region *r = mk((enum hpr_backend)b, NULL);
		size_t changed = 0;

		rc = hpr_load(r, fd, HPR_SNAP_LAZY, &changed);
		ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
		ck_assert_uint_eq(changed, NPAGES * PS);
		ck_assert_int_eq(hpr_load_wait(r), 0);
		check_full(r);
		hpr_destroy(r);
	}
	/* page 5 punched: the file has a hole, the extents check finds it */
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, pg5, PS), 0);
	{
		hpr_region *r = mk(HPR_BACKEND_THP, NULL);

		rc = hpr_load(r, fd, HPR_SNAP_LAZY, NULL);
		ck_assert_msg(rc == -EBADMSG && strstr(hpr_strerror(rc), "punched"), "%d %s", rc,
			      hpr_strerror(rc));
		hpr_destroy(r);
	}
	/* ...and blocks allocated past the end hide the hole from the
	 * shortcut: the page's checksum fails the load */
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_KEEP_SIZE, end, 2 * PS), 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_gt((off_t)st.st_blocks * 512, file_page(NPAGES - 1));
	{
		hpr_region *r = mk(HPR_BACKEND_SHMEM, NULL);

		rc = hpr_load(r, fd, HPR_SNAP_LAZY, NULL);
		ck_assert_msg(rc == 0, "%s", hpr_strerror(rc));
		rc = hpr_load_wait(r);
		ck_assert_msg(rc == -EBADMSG && strstr(hpr_strerror(rc), "checksum"), "%d %s", rc,
			      hpr_strerror(rc));
		ck_assert_uint_eq(resident(r), 0);
		hpr_destroy(r);
	}
	close(fd);
}
END_TEST

/* ---- THP: UFFDIO_MOVE of whole huge pages, and its fallbacks (no
 * UFFDIO_MOVE before 6.8: forced here) ---- */
static struct hpr_os_ops move_ops;
static _Atomic int move_mode; /* 1: MOVE -ENOTTY; 2: API with MOVE -EINVAL; 3: MOVE -EBUSY once */
static _Atomic unsigned move_calls;

static int move_ioctl(int fd, unsigned long req, void *arg)
{
	int mode = atomic_load(&move_mode);

	if (req == UFFDIO_MOVE) {
		unsigned n = atomic_fetch_add(&move_calls, 1);

		if (mode == 1)
			return -ENOTTY;
		if (mode == 3 && n == 1)
			return -EBUSY;
	}
	if (req == UFFDIO_API && mode == 2 &&
	    (((struct uffdio_api *)arg)->features & UFFD_FEATURE_MOVE))
		return -EINVAL;
	return hpr__os_real.ioctl(fd, req, arg);
}

static void thp_move(int mode)
{
	int fd = saved();
	hpr_region *r = mk(HPR_BACKEND_THP, NULL);
	struct touch t[NTOUCH];
	struct hpr__lazy *L;
	bool has_move;

	move_ops = hpr__os_real;
	move_ops.ioctl = move_ioctl;
	move_ops.pread_full = slow_pread_full; /* the touchers run during the fill */
	slow_us = 3000;
	atomic_store(&move_mode, mode);
	atomic_store(&move_calls, 0);
	hpr__os_set(&move_ops);
	lazy_ok(r, fd);
	L = atomic_load(&r->lazy);
	has_move = L->move;
	touched_then_done(r, t);
	if (mode == 2)
		ck_assert_msg(!has_move, "UFFDIO_MOVE in use though UFFDIO_API refused it");
	if (!has_move || mode == 1 || mode == 2) {
		ck_assert_uint_eq(atomic_load(&L->moved), 0);
		ck_assert_uint_eq(atomic_load(&L->copied), NDATA);
	} else if (mode == 3) {
		ck_assert_uint_eq(atomic_load(&L->moved), NDATA - 1);
		ck_assert_uint_eq(atomic_load(&L->copied), 1);
		ck_assert(!atomic_load(&L->move_off)); /* one page's refusal only */
	} else {
		ck_assert_uint_eq(atomic_load(&L->moved), NDATA);
		ck_assert_uint_eq(atomic_load(&L->copied), 0);
	}
	if (mode == 1 && has_move)
		ck_assert(atomic_load(&L->move_off));
	ck_assert_int_eq(hpr_destroy(r), 0);
	close(fd);
}

START_TEST(thp_move_whole)
{
	thp_move(0);
}
END_TEST

START_TEST(thp_move_enotty)
{
	thp_move(1);
}
END_TEST

START_TEST(thp_move_no_feature)
{
	thp_move(2);
}
END_TEST

START_TEST(thp_move_busy_once)
{
	thp_move(3);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lazyload");
	TCase *be = tcase_create("backends"), *err = tcase_create("errors");
	TCase *life = tcase_create("lifecycle"), *ht = tcase_create("hugetlb");

	tcase_add_test(be, lazy_thp);
	tcase_add_test(be, lazy_shmem_memfd);
	tcase_add_test(be, lazy_shmem_tmpfs);
	tcase_add_test(be, lazy_kept_new);
	tcase_add_test(be, demand_first_thp);
	tcase_add_test(be, demand_first_shmem);
	tcase_add_test(err, corrupt_first_thp);
	tcase_add_test(err, corrupt_middle_shmem);
	tcase_add_test(err, corrupt_last_thp);
	tcase_add_test(err, corrupt_last_shmem);
	tcase_add_test(err, truncated);
	tcase_add_test(err, failed_then_fault_in);
	tcase_add_test(life, cancel);
	tcase_add_test(life, destroy_during_load);
	tcase_add_test(life, fork_during_load);
	tcase_add_test(life, fork_during_load_shared);
	tcase_add_test(life, fallback_no_uffd);
	tcase_add_test(life, refusals);
	tcase_add_test(life, late_fault_at_end);
	tcase_add_test(life, refusals_not_empty);
	tcase_add_test(be, full_snapshot);
	tcase_add_test(be, thp_move_whole);
	tcase_add_test(be, thp_move_enotty);
	tcase_add_test(be, thp_move_no_feature);
	tcase_add_test(be, thp_move_busy_once);
	/* the only case that changes the system: the pool, under the lock */
	tcase_add_unchecked_fixture(ht, t_system_lock_begin, t_system_lock_end);
	tcase_add_test(ht, lazy_hugetlb);
	suite_add_tcase(s, be);
	suite_add_tcase(s, err);
	suite_add_tcase(s, life);
	suite_add_tcase(s, ht);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_MOUNTS)
