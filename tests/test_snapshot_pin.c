/* SPDX-License-Identifier: MIT */
/*
 * A snapshot leaves nothing of a hugetlb region's memory behind (issue 15,
 * item 10). The hugetlb pool holds exactly the region's pages and the
 * snapshot fd stays open; right after hpr_save or hpr_load returns:
 *  - hpr_reclaim gives the reclaimed pages back to the pool at once (the
 *    kernel's free_hugepages in sysfs, read without waiting),
 *  - hpr_fault_in of that range gets them again (no -ENOMEM),
 *  - hpr_destroy returns the whole pool at once, and so does the exit of
 *    a process that saved and never destroyed its region (a quick restart
 *    finds its pool).
 * On 2 MiB pages, and on 1 GiB pages where the machine can give two (else
 * those cases skip); snapshot files on tmpfs (page-cache I/O) and on disk
 * (/var/tmp: O_DIRECT where the file system takes it).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DISK_DIR "/var/tmp"

struct pin_case {
	size_t ps;	  /* huge page size */
	unsigned long kb; /* its sysfs pool, in kB */
	size_t npages;	  /* region = pool = npages pages */
};

static const struct pin_case p2m = { 2 * MiB, 2048, 8 };
static const struct pin_case p1g = { 1 * GiB, 1048576, 2 };

/* The pool at exactly c->npages pages, all free; false where this machine
 * has no 1 GiB pages to give (said, and a failure where they are promised:
 * t_unavailable). */
static bool need_pool(const struct pin_case *c)
{
	if (c->kb == 2048)
		t_need_pool_2m(c->npages);
	else if (!t_need_pool_1g(c->npages))
		return false;
	/* a failed earlier test (each runs in its own process) may have left
	 * pages held that come back late: wait for them here, up to 10 s, so
	 * each test fails for what it did itself */
	for (int i = 0; i < 1000 && t_hugetlb_free(c->kb) < c->npages; i++)
		usleep(10000);
	ck_assert_uint_eq(t_hugetlb_free(c->kb), c->npages);
	return true;
}

static hpr_region *mk(const struct pin_case *c)
{
	struct hpr_config cfg;
	hpr_region *r = NULL;
	int rc;

	t_config(&cfg, HPR_BACKEND_HUGETLB, NULL, c->npages * c->ps, 0, 0);
	cfg.page_size = c->ps;
	rc = hpr_create(&cfg, &r);
	ck_assert_msg(rc == 0, "create: %s", hpr_strerror(rc));
	ck_assert_uint_eq(hpr_page_size(r), c->ps);
	return r;
}

/* One word per 4 KiB: every huge page holds data, cheaply even at 1 GiB. */
static uint64_t word(size_t off, uint64_t seed)
{
	return (off * 0x9e3779b97f4a7c15ULL) ^ seed;
}

static void fill(hpr_region *r, uint64_t seed)
{
	char *b = hpr_base(r);

	ck_assert_int_eq(hpr_fault_in(r, 0, hpr_size(r)), 0);
	for (size_t off = 0; off < hpr_size(r); off += 4096)
		*(uint64_t *)(b + off) = word(off, seed);
}

static void check(hpr_region *r, size_t from, uint64_t seed)
{
	const char *b = hpr_base(r);

	for (size_t off = from; off < hpr_size(r); off += 4096)
		ck_assert_msg(*(const uint64_t *)(b + off) == word(off, seed),
			      "region offset %#zx differs", off);
}

/* A snapshot file in dir (NULL: a fresh tmpfs big enough for c). */
static int snap_file(const struct pin_case *c, const char *dir)
{
	char opts[64];
	int fd;

	if (!dir) {
		/* data goes at a page-aligned offset after the table */
		snprintf(opts, sizeof(opts), "size=%zuk", (c->npages + 2) * c->ps / 1024);
		dir = t_mount_tmpfs(opts);
	}
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "O_TMPFILE in %s: %s", dir, strerror(errno));
	return fd;
}

static void note_io(hpr_region *r, const char *what)
{
	struct hpr_stats st;

	ck_assert_int_eq(hpr_stats(r, &st), 0);
	if (st.snapshot_io != HPR_IO_URING)
		fprintf(stderr,
			"NOTE: %s ran on pread/pwrite, not io_uring: the io_uring "
			"part of this check did not run\n",
			what);
}

/* Right after a snapshot call, with its fd still open: reclaim the first
 * half and fault it in again; the pool follows each step at once. Nothing
 * may come between the call and this (a slow check would give a deferred
 * release the time to finish and hide it). */
static void reclaim_refault(const struct pin_case *c, hpr_region *r, uint64_t seed)
{
	size_t half = c->npages / 2, got = 0;
	int rc;

	ck_assert_uint_eq(t_hugetlb_free(c->kb), 0);
	ck_assert_int_eq(hpr_release_lazy(r, 0, half * c->ps), 0);
	ck_assert_int_eq(hpr_reclaim(r, half * c->ps, &got), 0);
	ck_assert_uint_eq(got, half * c->ps);
	ck_assert_msg(t_hugetlb_free(c->kb) == half,
		      "reclaimed %zu pages but the pool has %lu free: something still "
		      "holds the region's pages after the snapshot call returned",
		      half, t_hugetlb_free(c->kb));
	rc = hpr_fault_in(r, 0, half * c->ps);
	ck_assert_msg(rc == 0, "fault-in after reclaim: %s", hpr_strerror(rc));
	ck_assert_uint_eq(t_hugetlb_free(c->kb), 0);
	check(r, half * c->ps, seed);
}

static void destroy_all_back(const struct pin_case *c, hpr_region *r)
{
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_msg(t_hugetlb_free(c->kb) == c->npages,
		      "destroyed the region but the pool has %lu of %zu pages free",
		      t_hugetlb_free(c->kb), c->npages);
}

static void save_case(const struct pin_case *c, const char *dir)
{
	hpr_region *r;
	int fd, rc;

	if (!need_pool(c))
		return;
	r = mk(c);
	fill(r, 1);
	fd = snap_file(c, dir);
	rc = hpr_save(r, fd, 0);
	ck_assert_msg(rc == 0, "save: %s", hpr_strerror(rc));
	reclaim_refault(c, r, 1);
	note_io(r, "hpr_save");
	destroy_all_back(c, r);
	close(fd);
}

static void load_case(const struct pin_case *c, const char *dir)
{
	hpr_region *r;
	size_t changed = 0;
	int fd = snap_file(c, dir), rc;

	if (!need_pool(c))
		return;
	/* the file, made without io_uring (nothing of the source can stay
	 * pinned), from a region that is gone before the load's is made */
	r = mk(c);
	fill(r, 2);
	rc = hpr_save(r, fd, HPR_SNAP_NO_URING);
	ck_assert_msg(rc == 0, "save: %s", hpr_strerror(rc));
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_uint_eq(t_hugetlb_free(c->kb), c->npages);

	/* into a fresh region (page-cache reads fault its pages in), then
	 * again into the now resident pages (a VMM restoring a running guest) */
	r = mk(c);
	rc = hpr_load(r, fd, 0, &changed);
	ck_assert_msg(rc == 0, "load: %s", hpr_strerror(rc));
	ck_assert_uint_eq(changed, c->npages * c->ps);
	check(r, 0, 2);
	rc = hpr_load(r, fd, 0, &changed);
	ck_assert_msg(rc == 0, "load into resident pages: %s", hpr_strerror(rc));
	reclaim_refault(c, r, 2);
	ck_assert_uint_eq(changed, c->npages * c->ps);
	note_io(r, "hpr_load");
	destroy_all_back(c, r);
	close(fd);
}

/* Each variant in its own process (a loop test): a 1 GiB one skips alone. */
static const struct variant {
	const char *name;
	const struct pin_case *c;
	const char *dir; /* NULL: a fresh tmpfs */
	bool load;
} variants[] = {
	{ "save 2M tmpfs", &p2m, NULL, false }, { "save 2M disk", &p2m, DISK_DIR, false },
	{ "load 2M tmpfs", &p2m, NULL, true },	{ "load 2M disk", &p2m, DISK_DIR, true },
	{ "save 1G tmpfs", &p1g, NULL, false }, { "save 1G disk", &p1g, DISK_DIR, false },
	{ "load 1G tmpfs", &p1g, NULL, true },	{ "load 1G disk", &p1g, DISK_DIR, true },
};

START_TEST(pages_come_back)
{
	const struct variant *v = &variants[_i];

	fprintf(stderr, "pages_come_back:%d: %s\n", _i, v->name);
	if (v->load)
		load_case(v->c, v->dir);
	else
		save_case(v->c, v->dir);
}
END_TEST

/* A process saves and exits without hpr_destroy, its snapshot fd open to
 * the end: once it is reaped, its pages are back (a restart finds them). */
START_TEST(exit_returns_pool)
{
	const struct pin_case *c = &p2m;
	int fd, st;
	pid_t pid;

	if (!need_pool(c))
		return;
	fd = snap_file(c, DISK_DIR);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct hpr_config cfg;
		hpr_region *r;

		/* no Check asserts in here: the exit code says what failed */
		t_config(&cfg, HPR_BACKEND_HUGETLB, NULL, c->npages * c->ps, 0, 0);
		if (hpr_create(&cfg, &r))
			_exit(2);
		if (hpr_fault_in(r, 0, hpr_size(r)))
			_exit(3);
		memset(hpr_base(r), 0x5a, hpr_size(r));
		_exit(hpr_save(r, fd, 0) ? 4 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	ck_assert_msg(t_hugetlb_free(c->kb) == c->npages,
		      "the saving process was reaped but the pool has %lu of %zu pages free",
		      t_hugetlb_free(c->kb), c->npages);
	close(fd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("snapshot_pin");
	TCase *m2 = tcase_create("2m"), *g1 = tcase_create("1g");

	tcase_add_loop_test(m2, pages_come_back, 0, 4);
	tcase_add_test(m2, exit_returns_pool);
	tcase_add_loop_test(g1, pages_come_back, 4, 8);
	suite_add_tcase(s, m2);
	suite_add_tcase(s, g1);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
