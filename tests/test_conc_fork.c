/* SPDX-License-Identifier: MIT */
/*
 * fork(2) while the library is busy: during a background prefault, during
 * releases and reclaims with a PSI reclaimer running, during a save over
 * io_uring. The child must neither hang (a bounded alarm() turns a hang
 * into a failed status) nor read its parent's page tables: it creates,
 * uses and destroys regions of its own, checked against its own smaps, and
 * uses the inherited ones as hpregion(7) says. The parent's job completes
 * and its bytes and smaps are right.
 *
 * Children report through their exit status and stderr, never through
 * Check (they are grandchildren of the Check runner).
 *
 * The sanitizer builds run it too (clang 19's runtimes lock their state
 * around fork(); GCC 12's ASan did not, and its children could hang in
 * their first malloc). TSan runs it with die_after_fork=0.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096UL
#define CHILD_ALARM 120 /* seconds; a hang fails instead of stalling */

#define C_FAIL(...)                                                              \
	do {                                                                     \
		fprintf(stderr, "child %d, line %d: ", (int)getpid(), __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                    \
		fputc('\n', stderr);                                             \
		_exit(10);                                                       \
	} while (0)
#define C_OK(call)                                                             \
	do {                                                                   \
		int rc_ = (call);                                              \
		if (rc_)                                                       \
			C_FAIL("%s = %d (%s)", #call, rc_, hpr_strerror(rc_)); \
	} while (0)
#define C_REQ(cond, ...)                                    \
	do {                                                \
		if (!(cond))                                \
			C_FAIL("(" #cond ") " __VA_ARGS__); \
	} while (0)

static uint64_t tag(size_t o, size_t i, unsigned gen)
{
	return ((uint64_t)gen << 48) ^ (o + i * 8) ^ 0x5a5a5a5a00000000ULL;
}

static void fill(char *base, size_t off, size_t len, unsigned gen)
{
	for (size_t o = off; o < off + len; o += PG) {
		uint64_t *w = (uint64_t *)(base + o);

		for (size_t i = 0; i < PG / 8; i += 64)
			w[i] = tag(o, i, gen);
	}
}

/* first page in [off, off+len) without gen's tags, or (size_t)-1 */
static size_t bad_page(const char *base, size_t off, size_t len, unsigned gen)
{
	for (size_t o = off; o < off + len; o += PG) {
		const uint64_t *w = (const uint64_t *)(base + o);

		for (size_t i = 0; i < PG / 8; i += 64)
			if (w[i] != tag(o, i, gen))
				return o;
	}
	return (size_t)-1;
}

static hpr_region *mk(enum hpr_backend b, const char *path, size_t size, unsigned flags)
{
	return t_region(b, path, size, 2, flags);
}

/* First thing in a child: a hang becomes death by SIGALRM. The default
 * action, not the handler inherited from Check's runner (which kills the
 * whole process group, the parent test with it). */
static void child_alarm(void)
{
	signal(SIGALRM, SIG_DFL);
	alarm(CHILD_ALARM);
}

/* wait for a child and assert it exited 0 */
static void reap(pid_t pid, const char *what)
{
	int status;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child %s (status %#x%s)",
		      what, WIFSIGNALED(status) ? "was killed" : "failed", status,
		      WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ?
			      ": hung, killed by its alarm" :
			      "");
}

/*
 * In a child: a fresh region of each kind available, used end to end and
 * checked against this process's smaps (not the library's counters, and not
 * the parent's page tables).
 */
static void child_fresh_thp(void)
{
	size_t size = 16 * MiB, col = 0;
	struct hpr_config c;
	struct hpr_stats st;
	struct t_smaps k;
	hpr_region *n;
	char *b;

	t_config(&c, HPR_BACKEND_THP, NULL, size, 2, 0);
	C_OK(hpr_create(&c, &n));
	b = hpr_base(n);
	C_OK(hpr_fault_in(n, 0, size));
	fill(b, 0, size, 7);
	C_REQ(bad_page(b, 0, size, 7) == (size_t)-1, "lost bytes");
	C_REQ(!t_smaps(b, size, &k) && k.anon_huge == size,
	      "the child's smaps show %zu of %zu bytes huge", k.anon_huge, size);
	C_OK(hpr_collapse(n, 0, size, &col));
	C_REQ(col == size, "hpr_collapse says %zu of %zu bytes are huge", col, size);
	C_OK(hpr_stats(n, &st));
	C_REQ(st.huge_mapped == size && st.resident == size, "stats: huge %zu resident %zu",
	      st.huge_mapped, st.resident);
	C_OK(hpr_release_lazy(n, 0, size));
	C_OK(hpr_reclaim(n, 0, NULL));
	C_REQ(!t_smaps(b, size, &k) && k.rss == 0, "reclaim left %zu bytes resident", k.rss);
	C_OK(hpr_fault_in(n, 0, size));
	fill(b, 0, size, 8);
	C_REQ(bad_page(b, 0, size, 8) == (size_t)-1, "lost bytes after reuse");
	C_REQ(!t_smaps(b, size, &k) && k.anon_huge == size,
	      "after reuse the child's smaps show %zu of %zu bytes huge", k.anon_huge, size);
	C_OK(hpr_destroy(n));
}

static void child_fresh_shmem(const char *tmpfs)
{
	size_t size = 8 * MiB;
	struct hpr_config c;
	struct t_smaps k;
	hpr_region *n;
	char *b;

	t_config(&c, HPR_BACKEND_SHMEM, tmpfs, size, 2, HPR_F_SHARED);
	C_OK(hpr_create(&c, &n));
	b = hpr_base(n);
	C_OK(hpr_fault_in(n, 0, size));
	fill(b, 0, size, 9);
	C_REQ(!t_smaps(b, size, &k) && k.shmem_pmd == size,
	      "the child's smaps show %zu of %zu shmem bytes PMD-mapped", k.shmem_pmd, size);
	C_OK(hpr_release_lazy(n, 0, size / 2));
	C_OK(hpr_reclaim(n, 0, NULL));
	C_OK(hpr_fault_in(n, 0, size));
	C_REQ(bad_page(b, size / 2, size / 2, 9) == (size_t)-1, "lost bytes");
	C_OK(hpr_destroy(n));
}

/* ---- fork during a background prefault ---- */

START_TEST(fork_during_prefault)
{
	size_t size = 256 * MiB, done = 0, total = 0;
	hpr_region *r = mk(HPR_BACKEND_THP, NULL, size, 0);
	const char *tmpfs = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_stats st;
	struct t_smaps k;
	char *b = hpr_base(r);
	pid_t pid;

	ck_assert_int_eq(hpr_prefault_start(r, 0, size), 0);
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc;

		child_alarm();
		/* the parent's job is not the child's: it ended at the fork
		 * (or had finished before it) */
		rc = hpr_prefault_wait(r);
		C_REQ(rc == 0 || rc == -ECANCELED, "hpr_prefault_wait = %d", rc);
		if (rc)
			C_REQ(strstr(hpr_strerror(rc), "forked"), "message: %s", hpr_strerror(rc));
		/* the inherited (copy-on-write) region: fault the rest in
		 * here, on new workers; pages that were in flight at the
		 * fork must not hang anyone */
		C_OK(hpr_fault_in(r, 0, size));
		fill(b, 0, 32 * MiB, 3);
		C_REQ(bad_page(b, 0, 32 * MiB, 3) == (size_t)-1, "lost bytes");
		C_OK(hpr_prefault_start(r, 0, size));
		C_OK(hpr_prefault_wait(r));
		child_fresh_thp();
		child_fresh_shmem(tmpfs);
		C_OK(hpr_destroy(r));
		_exit(0);
	}
	/* the parent's job is unaffected: it completes while the child
	 * runs, every page PMD-mapped in the parent */
	ck_assert_int_eq(hpr_prefault_wait(r), 0);
	ck_assert_int_eq(hpr_prefault_progress(r, &done, &total), 0);
	ck_assert_uint_eq(done, size);
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	ck_assert_uint_eq(k.rss, size);
	ck_assert_uint_eq(k.anon_huge, size);
	ck_assert_int_eq(hpr_stats(r, &st), 0);
	ck_assert_uint_eq(st.huge_mapped, size);
	/* (writing now, while the child still maps the pages it shares,
	 * would split the parent's PMDs: the kernel copies a shared THP
	 * 4 KiB at a time, see hpregion(7)) */
	reap(pid, "fork during prefault");
	fill(b, 0, size, 1);
	ck_assert_uint_eq(bad_page(b, 0, size, 1), (size_t)-1);
	ck_assert_int_eq(t_smaps(b, size, &k), 0);
	ck_assert_uint_eq(k.anon_huge, size);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- fork during releases and reclaims, PSI reclaimer on ---- */

struct churn {
	hpr_region *r;
	size_t size;
	unsigned id, nthreads;
	_Atomic bool stop;
	_Atomic unsigned long ops;
	_Atomic int err;
	char msg[512]; /* the failing call's hpr_strerror(), set with err */
};

/* Each thread owns the huge pages i with i % nthreads == id: fault in,
 * write, verify, release, sometimes reclaim. */
static void *churn_main(void *arg)
{
	struct churn *c = ((struct churn **)arg)[0];
	unsigned id = (unsigned)(uintptr_t)((void **)arg)[1];
	size_t hp = hpr_page_size(c->r), n = c->size / hp;
	char *b = hpr_base(c->r);
	unsigned gen = 1;

	while (!atomic_load(&c->stop)) {
		for (size_t i = id; i < n; i += c->nthreads) {
			int rc = hpr_fault_in(c->r, i * hp, hp);

			if (!rc) {
				fill(b, i * hp, hp, gen);
				if (bad_page(b, i * hp, hp, gen) != (size_t)-1)
					rc = -EIO;
			}
			if (!rc)
				rc = hpr_release_lazy(c->r, i * hp, hp);
			if (!rc && (i / c->nthreads) % 3 == 0)
				rc = hpr_reclaim(c->r, hp, NULL);
			if (rc) {
				/* the detail is the failing thread's: keep it */
				snprintf(c->msg, sizeof(c->msg), "page %zu, gen %u: %s", i, gen,
					 hpr_strerror(rc));
				atomic_store(&c->err, rc);
				return NULL;
			}
			atomic_fetch_add(&c->ops, 1);
		}
		gen++;
	}
	return NULL;
}

static void fork_during_churn(enum hpr_backend be, const char *path, unsigned flags)
{
	enum { NT = 3, FORKS = 24 };
	size_t size = 32 * MiB, TAIL = 8 * MiB;
	const char *tmpfs = t_mount_tmpfs("huge=always,size=64m");
	struct churn c = { .size = size, .nthreads = NT };
	void *args[NT][2];
	pthread_t th[NT];
	struct t_smaps k;
	struct hpr_stats st;

	/* the churn runs on [0, size); [size, size + TAIL) holds data
	 * nobody changes, which a child reads back */
	c.r = mk(be, path, size + TAIL, flags | HPR_F_PSI_RECLAIM);
	ck_assert_int_eq(hpr_fault_in(c.r, size, TAIL), 0);
	fill(hpr_base(c.r), size, TAIL, 42);
	for (unsigned i = 0; i < NT; i++) {
		args[i][0] = &c;
		args[i][1] = (void *)(uintptr_t)i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn_main, args[i]), 0);
	}
	for (int f = 0; f < FORKS; f++) {
		pid_t pid;

		/* let the churn get going between forks */
		for (unsigned long o = atomic_load(&c.ops);
		     atomic_load(&c.ops) < o + 8 && !atomic_load(&c.err);)
			sched_yield();
		fflush(NULL);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			char *b = hpr_base(c.r);

			child_alarm();
			/* the inherited region: whatever the parent's
			 * threads had in flight, pages can be faulted in
			 * and used here */
			C_OK(hpr_fault_in(c.r, size, TAIL));
			C_REQ(bad_page(b, size, TAIL, 42) == (size_t)-1, "inherited bytes differ");
			if (be == HPR_BACKEND_THP) {
				/* a private copy: the child may write,
				 * release and reclaim it (its reclaimer
				 * starts again) */
				C_OK(hpr_fault_in(c.r, 0, size));
				fill(b, 0, size, 100);
				C_REQ(bad_page(b, 0, size, 100) == (size_t)-1, "lost bytes");
				C_OK(hpr_release_lazy(c.r, 0, size / 2));
				C_OK(hpr_reclaim(c.r, 0, NULL));
				C_OK(hpr_fault_in(c.r, 0, size));
				C_REQ(bad_page(b, size / 2, size / 2, 100) == (size_t)-1,
				      "lost bytes after a release of the other half");
			} else {
				/* shared with the parent, whose threads
				 * release and reclaim [0, size): sharers
				 * must agree on who releases what, so the
				 * child leaves that range alone */
				C_REQ(!t_smaps(b + size, TAIL, &k) && k.shmem_pmd == TAIL,
				      "the child's smaps show %zu of %zu bytes PMD-mapped",
				      k.shmem_pmd, TAIL);
			}
			{
				struct hpr_stats cs;

				C_OK(hpr_stats(c.r, &cs));
			}
			if (f % 4 == 0) {
				child_fresh_thp();
				child_fresh_shmem(tmpfs);
			}
			C_OK(hpr_destroy(c.r));
			_exit(0);
		}
		reap(pid, "fork during release/reclaim");
	}
	atomic_store(&c.stop, true);
	for (unsigned i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(!atomic_load(&c.err), "a churn thread failed: %s", c.msg);
	/* the parent's region still works and the kernel agrees. Writes to
	 * THP pages a child still mapped split the parent's PMDs (the
	 * kernel copies shared THP 4 KiB at a time): hpr_collapse restores
	 * them, as hpregion(7) says */
	ck_assert_uint_eq(bad_page(hpr_base(c.r), size, TAIL, 42), (size_t)-1);
	ck_assert_int_eq(hpr_fault_in(c.r, 0, size), 0);
	ck_assert_int_eq(hpr_collapse(c.r, 0, size + TAIL, NULL), 0);
	fill(hpr_base(c.r), 0, size, 5);
	ck_assert_uint_eq(bad_page(hpr_base(c.r), 0, size, 5), (size_t)-1);
	ck_assert_int_eq(t_smaps(hpr_base(c.r), size + TAIL, &k), 0);
	ck_assert_int_eq(hpr_stats(c.r, &st), 0);
	ck_assert_uint_eq(st.huge_mapped, size + TAIL);
	if (be == HPR_BACKEND_THP)
		ck_assert_uint_eq(k.anon_huge, size + TAIL);
	else
		ck_assert_uint_eq(k.shmem_pmd, size + TAIL);
	ck_assert_int_eq(hpr_destroy(c.r), 0);
}

START_TEST(fork_during_churn_thp)
{
	fork_during_churn(HPR_BACKEND_THP, NULL, 0);
}
END_TEST

START_TEST(fork_during_churn_shared_shmem)
{
	fork_during_churn(HPR_BACKEND_SHMEM, t_mount_tmpfs("huge=always,size=64m"), HPR_F_SHARED);
}
END_TEST

/* ---- fork during a save ---- */

struct saver {
	hpr_region *r;
	int fd, rc;
	_Atomic bool done;
};

static void *save_main(void *arg)
{
	struct saver *s = arg;

	s->rc = hpr_save(s->r, s->fd, 0);
	atomic_store(&s->done, true);
	return NULL;
}

/* io_uring fds and ring mappings this process holds */
static int uring_handles(void)
{
	char path[64], link[256], line[512];
	int n = 0;
	FILE *f;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t got;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		got = readlink(path, link, sizeof(link) - 1);
		if (got > 0) {
			link[got] = 0;
			n += strstr(link, "io_uring") != NULL;
		}
	}
	f = fopen("/proc/self/maps", "r");
	if (f) {
		while (fgets(line, sizeof(line), f))
			n += strstr(line, "io_uring") != NULL;
		fclose(f);
	}
	return n;
}

static int tmpfile_on_disk(void)
{
	char path[] = "/var/tmp/hpr-fork-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

START_TEST(fork_during_save)
{
	size_t size = 128 * MiB, changed = 0;
	hpr_region *r = mk(HPR_BACKEND_THP, NULL, size, HPR_F_PREFAULT);
	hpr_region *back;
	char *b = hpr_base(r);
	struct saver s = { .r = r };
	struct hpr_stats st;
	pthread_t th;
	pid_t pid;

	fill(b, 0, size, 1);
	s.fd = tmpfile_on_disk();
	ck_assert_int_eq(pthread_create(&th, NULL, save_main, &s), 0);
	/* fork while the save's rings exist (unless it is over already) */
	while (!atomic_load(&s.done) && !uring_handles())
		sched_yield();
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t csize = 16 * MiB, ch = 0;
		struct hpr_config c;
		struct hpr_stats cs;
		hpr_region *n, *m;
		int fd;

		child_alarm();
		/* the parent's rings are not the child's: kept, they would
		 * keep the parent's registered (pinned) pages */
		C_REQ(uring_handles() == 0, "the child holds %d io_uring fds or mappings",
		      uring_handles());
		/* the inherited region holds the parent's bytes at the fork */
		C_OK(hpr_fault_in(r, 0, size));
		C_REQ(bad_page(b, 0, size, 1) == (size_t)-1, "inherited bytes differ");
		/* a save and a load of the child's own, on its own rings */
		t_config(&c, HPR_BACKEND_THP, NULL, csize, 2, HPR_F_PREFAULT);
		C_OK(hpr_create(&c, &n));
		fill(hpr_base(n), 0, csize, 4);
		fd = tmpfile_on_disk();
		C_OK(hpr_save(n, fd, 0));
		C_OK(hpr_create(&c, &m));
		C_OK(hpr_load(m, fd, 0, &ch));
		C_REQ(bad_page(hpr_base(m), 0, csize, 4) == (size_t)-1, "loaded bytes differ");
		C_OK(hpr_stats(m, &cs));
		C_REQ(cs.snapshot_io == HPR_IO_URING, "snapshot_io %d", cs.snapshot_io);
		close(fd);
		C_OK(hpr_destroy(m));
		C_OK(hpr_destroy(n));
		child_fresh_thp();
		/* and a save of the inherited region from the child */
		fd = tmpfile_on_disk();
		C_OK(hpr_save(r, fd, 0));
		close(fd);
		C_OK(hpr_destroy(r));
		_exit(0);
	}
	pthread_join(th, NULL);
	ck_assert_msg(s.rc == 0, "hpr_save: %s", hpr_strerror(s.rc));
	back = mk(HPR_BACKEND_THP, NULL, size, 0);
	ck_assert_int_eq(hpr_load(back, s.fd, 0, &changed), 0);
	ck_assert_uint_eq(bad_page(hpr_base(back), 0, size, 1), (size_t)-1);
	ck_assert_int_eq(hpr_stats(back, &st), 0);
	ck_assert_int_eq(st.snapshot_io, HPR_IO_URING);
	reap(pid, "fork during save");
	ck_assert_int_eq(hpr_destroy(back), 0);
	close(s.fd);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- private file-backed regions are not inherited ---- */

START_TEST(fork_private_file_not_inherited)
{
	size_t size = 8 * MiB;
	const char *tmpfs = t_mount_tmpfs("huge=always,size=64m");
	hpr_region *p = mk(HPR_BACKEND_SHMEM, tmpfs, size, HPR_F_KEEP_FILE);
	char *pb = hpr_base(p);
	int entries;
	pid_t pid;

	ck_assert_int_eq(hpr_fault_in(p, 0, size), 0);
	fill(pb, 0, size, 1);
	entries = t_dir_entries(tmpfs);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct hpr_stats cs;
		size_t got = 0;
		void *mine;
		int rc;

		child_alarm();
		C_REQ(hpr_base(p) == NULL, "hpr_base = %p", hpr_base(p));
		rc = hpr_fault_in(p, 0, size);
		C_REQ(rc == -ENXIO, "hpr_fault_in = %d", rc);
		C_REQ(strstr(hpr_strerror(rc), "HPR_F_SHARED"), "message: %s", hpr_strerror(rc));
		C_REQ(hpr_release_lazy(p, 0, size) == -ENXIO, "release");
		C_REQ(hpr_reclaim(p, 0, &got) == -ENXIO, "reclaim");
		C_REQ(hpr_stats(p, &cs) == -ENXIO, "stats");
		C_REQ(hpr_collapse(p, 0, size, NULL) == -ENXIO, "collapse");
		C_REQ(hpr_prefault_start(p, 0, size) == -ENXIO, "prefault");
		/* the range is free here: something else of the child's may
		 * live there, and destroying the parent's region must not
		 * unmap it, nor unlink the parent's file */
		mine = mmap(pb, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		C_REQ(mine == pb, "the parent's range is mapped in the child");
		memset(mine, 0x77, size);
		C_OK(hpr_destroy(p));
		C_REQ(((volatile char *)mine)[size - 1] == 0x77, "child's mapping changed");
		C_REQ(t_dir_entries(tmpfs) == entries, "the parent's file was unlinked");
		_exit(0);
	}
	reap(pid, "private region");
	ck_assert_uint_eq(bad_page(pb, 0, size, 1), (size_t)-1);
	ck_assert_int_eq(t_dir_entries(tmpfs), entries);
	ck_assert_int_eq(hpr_destroy(p), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("conc_fork");
	TCase *tc = tcase_create("fork");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, fork_during_prefault);
	tcase_add_test(tc, fork_during_churn_thp);
	tcase_add_test(tc, fork_during_churn_shared_shmem);
	tcase_add_test(tc, fork_during_save);
	tcase_add_test(tc, fork_private_file_not_inherited);
	suite_add_tcase(s, tc);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_ROOT)
