/* SPDX-License-Identifier: MIT */
/*
 * Kept regions (HPR_F_ATTACH, HPR_F_ATTACH_ONLY, hpr_attached; docs/attach.md):
 *  - a creator killed with SIGKILL leaves its file, and an attach gets every
 *    byte back (a pattern checked word by word), huge: smaps' PMD-mapped
 *    bytes after the attach equal the creator's, and the file's allocated
 *    blocks do not change (nothing was zeroed or allocated);
 *  - each invalid file is refused with its own errno and advice, with
 *    nothing left mapped (the library's mmap ledger) and the file unchanged
 *    (its length, blocks, mtime and ctime and a hash of its bytes); so is
 *    every bad config, and an attach that fails after mapping keeps the
 *    file; a create that loses the race for the name attaches instead;
 *  - exclusivity both ways, across processes: shared vs shared and private
 *    vs shared are -EBUSY, private views coexist, and a killed creator's
 *    forked worker still holds the file; hpr stat --kept shows holders;
 *  - a private attach is copy-on-write: its writes never reach the file;
 *  - hugetlbfs, under the system lock (its test case grows the pool and
 *    gives it back).
 * The suite mounts its tmpfs in a private mount namespace (T_NEED_MOUNTS)
 * and changes nothing system-wide but in the hugetlb case.
 */
#include "common.h"
#include "os.h"	      /* hpr__os_set: a prefault that fails */
#include "snapshot.h" /* hpr__xxh64: forge a stamp with a valid checksum */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SZ (8 * MiB)
#define NAME "kept"

static uint64_t word(size_t off, uint64_t seed)
{
	uint64_t z = off + seed * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill(void *base, size_t size, uint64_t seed)
{
	uint64_t *w = base;

	for (size_t i = 0; i < size / 8; i++)
		w[i] = word(i * 8, seed);
}

/* The first offset whose word differs from the pattern, or -1. */
static size_t bad_word(const void *base, size_t size, uint64_t seed)
{
	const uint64_t *w = base;

	for (size_t i = 0; i < size / 8; i++)
		if (w[i] != word(i * 8, seed))
			return i * 8;
	return (size_t)-1;
}

static void cfg(struct hpr_config *c, enum hpr_backend b, const char *dir, size_t size,
		unsigned flags)
{
	t_config(c, b, dir, size, 1, flags);
	c->name = NAME;
}

static const char *kept_path(const char *dir)
{
	static char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, NAME);
	return p;
}

/* A kept region of size bytes filled with seed's pattern, made and
 * destroyed in this process. */
static void make_kept(enum hpr_backend b, const char *dir, size_t size, uint64_t seed)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	cfg(&c, b, dir, size, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create kept: %s", hpr_strerror(rc));
	ck_assert(!hpr_attached(r));
	fill(hpr_base(r), hpr_size(r), seed);
	ck_assert_int_eq(hpr_destroy(r), 0);
}

static hpr_region *attach(enum hpr_backend b, const char *dir, size_t size, unsigned flags)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	cfg(&c, b, dir, size, flags);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "attach %s: %s", hpr_backend_name(b), hpr_strerror(rc));
	ck_assert_msg(hpr_attached(r), "hpr_create created a region instead of attaching");
	return r;
}

/* What "unchanged" means for a file: its inode's numbers and its bytes. */
struct fstate {
	struct stat st;
	uint64_t hash;
	bool exists;
};

static void file_state(const char *path, struct fstate *f)
{
	int fd;

	memset(f, 0, sizeof(*f));
	if (lstat(path, &f->st))
		return;
	f->exists = true;
	if (!S_ISREG(f->st.st_mode))
		return;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	/* read(2), not a mapping: a read fault on a tmpfs hole allocates a
	 * page there (read(2) gives the zero page) */
	for (off_t off = 0; off < f->st.st_size; off += 1 << 20) {
		static char buf[1 << 20];
		ssize_t n = pread(fd, buf, sizeof(buf), off);

		ck_assert_int_gt(n, 0);
		f->hash = hpr__xxh64(buf, (size_t)n, f->hash);
	}
	close(fd);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The file is as it was; with attached, but for the access time (and so
 * the change time) a successful attach sets. */
static void same_file_but(const char *what, const struct fstate *a, const struct fstate *b,
			  bool attached)
{
	ck_assert_msg(a->exists == b->exists, "%s: the file appeared or vanished", what);
	/* (not the access time: a read(2) of the stamp, or of the file here,
	 * may move it) */
	ck_assert_msg(attached || same_time(&a->st.st_ctim, &b->st.st_ctim),
		      "%s: the file's change time moved", what);
	ck_assert_msg(a->st.st_ino == b->st.st_ino && a->st.st_size == b->st.st_size &&
			      a->st.st_blocks == b->st.st_blocks && a->st.st_uid == b->st.st_uid &&
			      a->st.st_mode == b->st.st_mode &&
			      same_time(&a->st.st_mtim, &b->st.st_mtim),
		      "%s: the file's inode changed (size %lld -> %lld, blocks %lld -> %lld)", what,
		      (long long)a->st.st_size, (long long)b->st.st_size,
		      (long long)a->st.st_blocks, (long long)b->st.st_blocks);
	ck_assert_msg(a->hash == b->hash, "%s: the file's bytes changed", what);
}

static void same_file(const char *what, const struct fstate *a, const struct fstate *b)
{
	same_file_but(what, a, b, false);
}

/*
 * hpr_create(c) must fail with err and a message holding advice, leave
 * nothing mapped (the library's mmap ledger, and /proc/self/maps outside
 * sanitizer builds) and the kept file exactly as it was.
 */
static void refused(const char *what, const struct hpr_config *c, int err, const char *advice)
{
	const char *p = kept_path(c->path);
	struct fstate before, after;
	hpr_region *r = (hpr_region *)0x1;
	int maps, rc;
	size_t left;

	file_state(p, &before);
	t_maps_count();
	maps = t_maps_count();
	t_track_begin();
	rc = hpr_create(c, &r);
	left = t_track_end();
	ck_assert_msg(rc == err, "%s: hpr_create = %d (%s), want %d", what, rc, hpr_strerror(rc),
		      err);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(hpr_strerror(rc), advice), "%s: message without \"%s\": %s", what,
		      advice, hpr_strerror(rc));
	printf("%s: %d: %s\n", what, rc, hpr_strerror(rc));
	ck_assert_msg(left == 0, "%s: %zu bytes left mapped", what, left);
	if (!T_SANITIZED)
		ck_assert_int_eq(t_maps_count(), maps);
	file_state(p, &after);
	same_file(what, &before, &after);
}

/* ---- create, keep, attach ---- */

START_TEST(create_then_attach)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	hpr_region *r = NULL;
	struct stat st;

	/* ATTACH_ONLY with nothing there: -ENOENT, nothing made */
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
	refused("attach-only, no file", &c, -ENOENT, "HPR_F_ATTACH creates it");
	ck_assert_int_eq(t_dir_entries(dir), 0);
	/* ATTACH creates the file under its name, stamped past the end */
	cfg(&c, HPR_BACKEND_AUTO, dir, SZ, HPR_F_ATTACH);
	ck_assert_int_eq(hpr_create(&c, &r), 0);
	ck_assert(!hpr_attached(r));
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_SHMEM);
	ck_assert_int_eq(stat(kept_path(dir), &st), 0);
	ck_assert_int_eq((long long)st.st_size, (long long)(SZ + 4096));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(hpr_fault_in(r, 0, SZ), 0);
	fill(hpr_base(r), SZ, 1);
	ck_assert_int_eq(hpr_destroy(r), 0);
	/* the stamp took one base page, not a huge one (huge=always) */
	ck_assert_int_eq(stat(kept_path(dir), &st), 0);
	ck_assert_msg((size_t)st.st_blocks * 512 == SZ + 4096,
		      "the file holds %lld bytes, region and stamp are %zu",
		      (long long)st.st_blocks * 512, SZ + 4096);
	/* the same config again attaches, and marks the last attach in the
	 * file's access time (hpr stat --kept) */
	r = attach(HPR_BACKEND_AUTO, dir, SZ, HPR_F_ATTACH);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 1), (size_t)-1);
	{
		struct hpr_stats hs;

		ck_assert_int_eq(hpr_stats(r, &hs), 0);
		ck_assert_int_eq(hs.requested, HPR_BACKEND_AUTO);
		ck_assert_int_eq(hs.backend, HPR_BACKEND_SHMEM);
		ck_assert_uint_eq(hs.fallback, 0);
	}
	{
		struct stat now;

		ck_assert_int_eq(stat(kept_path(dir), &now), 0);
		ck_assert(!same_time(&now.st_atim, &st.st_atim));
		ck_assert(same_time(&now.st_mtim, &st.st_mtim));
	}
	ck_assert_int_eq(hpr_destroy(r), 0);
	ck_assert_int_eq(t_dir_entries(dir), 1); /* kept */
	ck_assert_int_eq(unlink(kept_path(dir)), 0);
}
END_TEST

/* What the creator child saw, sent to the parent before it is killed. */
struct seen {
	size_t shmem_pmd, hugetlb, rss;
};

/*
 * A child creates the region (HPR_F_ATTACH, shared), fills it, reports its
 * smaps and waits to be killed with SIGKILL: no hpr_destroy, no exit path.
 */
static void killed_creator(enum hpr_backend b, const char *dir, size_t size, uint64_t seed,
			   struct seen *seen)
{
	int pfd[2];
	pid_t pid;
	int st;

	ck_assert_int_eq(pipe(pfd), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct hpr_config c;
		struct t_smaps k;
		struct seen s;
		hpr_region *r = NULL;
		int rc;

		close(pfd[0]);
		cfg(&c, b, dir, size, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT);
		rc = hpr_create(&c, &r);
		if (rc) {
			fprintf(stderr, "creator: %s\n", hpr_strerror(rc));
			_exit(1);
		}
		fill(hpr_base(r), hpr_size(r), seed);
		t_smaps(hpr_base(r), hpr_size(r), &k);
		s.shmem_pmd = k.shmem_pmd + k.file_pmd;
		s.hugetlb = k.hugetlb;
		s.rss = k.rss;
		if (write(pfd[1], &s, sizeof(s)) != (ssize_t)sizeof(s))
			_exit(1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], seen, sizeof(*seen)), (ssize_t)sizeof(*seen));
	close(pfd[0]);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

START_TEST(attach_after_kill9)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct stat before, after;
	struct hpr_stats hs;
	struct t_smaps k;
	struct seen seen;
	hpr_region *r;

	killed_creator(HPR_BACKEND_SHMEM, dir, SZ, 7, &seen);
	ck_assert_msg(seen.shmem_pmd == SZ, "the creator had %zu of %zu bytes PMD-mapped",
		      seen.shmem_pmd, (size_t)SZ);
	ck_assert_int_eq(stat(kept_path(dir), &before), 0);
	/* prefault with a read-populate: every page mapped, nothing written */
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED | HPR_F_PREFAULT);
	ck_assert_int_eq(t_smaps(hpr_base(r), SZ, &k), 0);
	printf("after attach: rss %zu, PMD-mapped %zu (creator: %zu)\n", k.rss,
	       k.shmem_pmd + k.file_pmd, seen.shmem_pmd);
	ck_assert_uint_eq(k.shmem_pmd + k.file_pmd, seen.shmem_pmd);
	ck_assert_uint_eq(k.rss, seen.rss);
	ck_assert_int_eq(hpr_stats(r, &hs), 0);
	ck_assert_uint_eq(hs.resident, SZ);
	ck_assert_uint_eq(hs.huge_mapped, seen.shmem_pmd);
	ck_assert_int_eq(hs.backend, HPR_BACKEND_SHMEM);
	ck_assert_uint_eq(hs.pages_present, SZ / hpr_page_size(r));
	/* every byte the killed creator wrote */
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 7), (size_t)-1);
	ck_assert_int_eq(stat(kept_path(dir), &after), 0);
	ck_assert_msg(after.st_blocks == before.st_blocks,
		      "attach changed the file's blocks: %lld -> %lld (allocated or zeroed)",
		      (long long)before.st_blocks, (long long)after.st_blocks);
	/* a shared attach writes through; the next attach sees it */
	fill(hpr_base(r), SZ, 8);
	ck_assert_int_eq(hpr_destroy(r), 0);
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	ck_assert_int_eq(hpr_fault_in(r, 0, SZ), 0);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 8), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- private views ---- */

START_TEST(private_is_copy_on_write)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct fstate before, after;
	hpr_region *a, *b;
	char *pa;

	make_kept(HPR_BACKEND_SHMEM, dir, SZ, 3);
	file_state(kept_path(dir), &before);
	/* two private views at once, one of them prefaulted */
	a = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY);
	b = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_PREFAULT);
	ck_assert_int_eq(fcntl(hpr_fd(a), F_GETFL) & O_ACCMODE, O_RDONLY);
	pa = hpr_base(a);
	ck_assert_int_eq(hpr_fault_in(a, 0, SZ), 0);
	ck_assert_uint_eq(bad_word(pa, SZ, 3), (size_t)-1);
	/* writes stay in a's copies */
	fill(pa, SZ, 4);
	ck_assert_uint_eq(bad_word(pa, SZ, 4), (size_t)-1);
	ck_assert_uint_eq(bad_word(hpr_base(b), SZ, 3), (size_t)-1);
	/* a discard drops the copies: the kept bytes show through again */
	ck_assert_int_eq(hpr_release_lazy(a, 0, SZ), 0);
	ck_assert_int_eq(hpr_reclaim(a, 0, NULL), 0);
	ck_assert_int_eq(hpr_fault_in(a, 0, SZ), 0);
	ck_assert_uint_eq(bad_word(pa, SZ, 3), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(a), 0);
	ck_assert_int_eq(hpr_destroy(b), 0);
	file_state(kept_path(dir), &after);
	same_file_but("private views", &before, &after, true);
}
END_TEST

/* ---- exclusivity, across processes ---- */

/* A child that attaches with flags and holds the region until told. */
struct holder {
	pid_t pid;
	int go; /* write a byte: let it go */
};

static struct holder hold(const char *dir, unsigned flags)
{
	int ready[2], go[2];
	struct holder h;
	char x;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	fflush(NULL);
	h.pid = fork();
	ck_assert_int_ge(h.pid, 0);
	if (h.pid == 0) {
		struct hpr_config c;
		hpr_region *r = NULL;
		int rc;

		close(ready[0]);
		close(go[1]);
		alarm(60);
		cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, flags);
		rc = hpr_create(&c, &r);
		x = rc ? 'E' : 'k';
		if (rc)
			fprintf(stderr, "holder: %s\n", hpr_strerror(rc));
		if (write(ready[1], &x, 1) != 1 || read(go[0], &x, 1) != 1)
			_exit(1);
		_exit(hpr_destroy(r) ? 1 : 0);
	}
	close(ready[1]);
	close(go[0]);
	ck_assert_int_eq(read(ready[0], &x, 1), 1);
	ck_assert_msg(x == 'k', "the holder could not attach");
	close(ready[0]);
	h.go = go[1];
	return h;
}

static void release(struct holder *h)
{
	int st;

	ck_assert_int_eq(write(h->go, "x", 1), 1);
	close(h->go);
	ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

START_TEST(exclusive_shared)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	struct holder h;
	hpr_region *r;

	/* the creator holds its new file */
	h = hold(dir, HPR_F_ATTACH | HPR_F_SHARED);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
	refused("shared attach while the creator lives", &c, -EBUSY, "held by another process");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH);
	refused("private attach while the creator lives", &c, -EBUSY, "held by another process");
	release(&h);
	/* a shared attacher holds it the same way */
	h = hold(dir, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	refused("shared vs shared", &c, -EBUSY, "any holder excludes a shared attach");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY);
	refused("private vs shared", &c, -EBUSY, "a shared holder excludes private views");
	release(&h);
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* hpr stat --kept lists the kept region in dir and who holds it (holder,
 * a private view: from /proc/locks), and hpr stat PID finds the holder's
 * view by its stamp. */
static void hpr_stat_lists(const char *dir, pid_t holder)
{
	char args[600], out[4096], want[64];

	if (!t_hpr_path()) {
		printf("the hpr command is not built: hpr stat --kept not checked\n");
		return;
	}
	snprintf(args, sizeof(args), "stat --kept '%s' --json", dir);
	snprintf(want, sizeof(want), "\"held\":\"shared:pid%d\"", (int)holder);
	ck_assert_int_eq(t_hpr(args, out, sizeof(out)), 0);
	printf("hpr stat --kept: %s\n", out);
	ck_assert_msg(strstr(out, "\"name\":\"kept\",\"kept\":true,\"why\":null,"
				  "\"backend\":\"shmem\",\"size\":8388608,"
				  "\"page_size\":2097152"),
		      "hpr stat --kept: %s", out);
	ck_assert_msg(strstr(out, want), "hpr stat --kept: no %s in %s", want, out);
	snprintf(args, sizeof(args), "stat %d --json", (int)holder);
	ck_assert_int_eq(t_hpr(args, out, sizeof(out)), 0);
	printf("hpr stat PID: %s\n", out);
	ck_assert_msg(strstr(out, "\"name\":\"kept\",\"backend\":\"shmem\",\"kind\":\"file\""),
		      "hpr stat PID: %s", out);
}

START_TEST(exclusive_private)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	struct holder h;
	hpr_region *r;

	make_kept(HPR_BACKEND_SHMEM, dir, SZ, 5);
	h = hold(dir, HPR_F_ATTACH_ONLY);
	hpr_stat_lists(dir, h.pid);
	/* private views coexist */
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_PREFAULT);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 5), (size_t)-1);
	/* a shared attach waits for every private view */
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
	refused("shared vs private", &c, -EBUSY, "held by another process");
	ck_assert_int_eq(hpr_destroy(r), 0);
	refused("shared vs private (other process)", &c, -EBUSY, "held by another process");
	release(&h);
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/*
 * The crashed server's old child: the creator forked a worker (it holds
 * the file's descriptor, and with it the lock) and was killed; the worker
 * still runs. The successor's attach is -EBUSY until the worker is gone.
 */
START_TEST(killed_creator_child_holds)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	pid_t creator, worker;
	int pfd[2], st;
	hpr_region *r;

	/* the worker is reparented to us when the creator dies */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe(pfd), 0);
	fflush(NULL);
	creator = fork();
	ck_assert_int_ge(creator, 0);
	if (creator == 0) {
		hpr_region *k = NULL;
		pid_t w;

		close(pfd[0]);
		cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT);
		if (hpr_create(&c, &k))
			_exit(1);
		fill(hpr_base(k), SZ, 41);
		w = fork();
		if (w == 0) {
			alarm(60);
			for (;;)
				pause();
		}
		if (write(pfd[1], &w, sizeof(w)) != (ssize_t)sizeof(w))
			_exit(1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &worker, sizeof(worker)), (ssize_t)sizeof(worker));
	close(pfd[0]);
	ck_assert_int_eq(kill(creator, SIGKILL), 0);
	ck_assert_int_eq(waitpid(creator, &st, 0), creator);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	refused("the killed creator's worker still runs", &c, -EBUSY, "held by another process");
	ck_assert_int_eq(kill(worker, SIGKILL), 0);
	ck_assert_int_eq(waitpid(worker, &st, 0), worker);
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 41), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- refusals ---- */

/* An attach that fails after mapping (here its prefault) unmaps, and
 * leaves the kept file where and as it was. */
static struct hpr_os_ops fake_os;

static int fail_populate_read(void *addr, size_t len, int advice)
{
	if (advice == MADV_POPULATE_READ)
		return -ENOMEM;
	return hpr__os_real.madvise(addr, len, advice);
}

/* Another process wins the create between our look and our O_EXCL open:
 * with plant, it made a file there (we attach to that: here junk, so
 * -EBADMSG); without, the file is gone again by our next look. */
static bool plant;
static int creates;

static int racing_openat(int dirfd, const char *name, int flags, unsigned mode)
{
	if ((flags & O_CREAT) && !strcmp(name, NAME)) {
		creates++;
		if (plant) {
			int fd = hpr__os_real.openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL, 0600);

			ck_assert_int_ge(fd, 0);
			ck_assert_int_eq(ftruncate(fd, (off_t)(SZ + 4096)), 0);
			close(fd);
		}
		return -EEXIST;
	}
	return hpr__os_real.openat(dirfd, name, flags, mode);
}

START_TEST(create_race)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;

	fake_os = hpr__os_real;
	fake_os.openat = racing_openat;
	hpr__os_set(&fake_os);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	plant = true;
	creates = 0;
	{
		hpr_region *r = NULL;
		struct stat st;
		int rc = hpr_create(&c, &r);

		/* (not refused(): the file appears during the call) */
		ck_assert_msg(rc == -EBADMSG && strstr(hpr_strerror(rc), "no hpregion stamp"),
			      "lost the create to a junk file: %d %s", rc, hpr_strerror(rc));
		ck_assert_int_eq(stat(kept_path(dir), &st), 0);
		ck_assert_int_eq((long long)st.st_size, (long long)(SZ + 4096));
		ck_assert_int_eq((long long)st.st_blocks, 0); /* not written */
	}
	ck_assert_int_eq(creates, 1);
	ck_assert_int_eq(unlink(kept_path(dir)), 0);
	plant = false;
	creates = 0;
	refused("made and gone twice", &c, -EBUSY, "appeared and vanished");
	ck_assert_int_eq(creates, 2);
	hpr__os_set(NULL);
	ck_assert_int_eq(t_dir_entries(dir), 0);
}
END_TEST

START_TEST(failed_attach_keeps_file)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	hpr_region *r;

	make_kept(HPR_BACKEND_SHMEM, dir, SZ, 51);
	fake_os = hpr__os_real;
	fake_os.madvise = fail_populate_read;
	hpr__os_set(&fake_os);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT);
	refused("prefault fails after the attach", &c, -ENOMEM, "out of memory");
	hpr__os_set(NULL);
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED | HPR_F_PREFAULT);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 51), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

START_TEST(refuse_config)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;

	cfg(&c, HPR_BACKEND_THP, NULL, SZ, HPR_F_ATTACH);
	refused("thp", &c, -EINVAL, "no file to keep");
	cfg(&c, HPR_BACKEND_SHMEM, NULL, SZ, HPR_F_ATTACH);
	refused("memfd", &c, -EINVAL, "needs path");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH);
	c.name = NULL;
	refused("no name", &c, -EINVAL, "needs path");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_FALLBACK);
	refused("fallback", &c, -EINVAL, "exclude each other");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_ATTACH_ONLY);
	refused("both", &c, -EINVAL, "exclude each other");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_LOCK);
	refused("private lock", &c, -EINVAL, "HPR_F_SHARED");
	cfg(&c, HPR_BACKEND_HUGETLB, dir, SZ, HPR_F_ATTACH);
	refused("hugetlb on tmpfs", &c, -EINVAL, "needs hugetlbfs");
	ck_assert_int_eq(t_dir_entries(dir), 0);
}
END_TEST

/* A file of len bytes of junk (or text) under the kept name. */
static void junk_file(const char *dir, size_t len, const char *text)
{
	int fd = open(kept_path(dir), O_RDWR | O_CREAT | O_EXCL, 0600);
	char buf[4096];

	ck_assert_int_ge(fd, 0);
	if (text) {
		ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	} else {
		for (size_t off = 0; off < len; off += sizeof(buf)) {
			for (size_t i = 0; i < sizeof(buf); i++)
				buf[i] = (char)word(off + i, 99);
			ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), (off_t)off),
					 (ssize_t)sizeof(buf));
		}
	}
	close(fd);
}

START_TEST(refuse_other_files)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;

	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	/* another file with the same name: never overwritten, even by
	 * create-or-attach */
	junk_file(dir, SZ + 4096, NULL);
	refused("junk of the right length", &c, -EBADMSG, "no hpregion stamp");
	ck_assert_int_eq(unlink(kept_path(dir)), 0);
	junk_file(dir, 0, "hello\n");
	refused("a text file", &c, -ERANGE, "truncated or is another file");
	ck_assert_int_eq(unlink(kept_path(dir)), 0);
	ck_assert_int_eq(mkdir(kept_path(dir), 0700), 0);
	refused("a directory", &c, -EBADMSG, "not a regular file");
	ck_assert_int_eq(rmdir(kept_path(dir)), 0);
	ck_assert_int_eq(mkfifo(kept_path(dir), 0600), 0);
	refused("a fifo", &c, -EBADMSG, "not a regular file");
	ck_assert_int_eq(unlink(kept_path(dir)), 0);
	/* a symlink to a real kept region */
	{
		const char *other = t_mount_tmpfs("huge=always,size=64m");
		char target[512];

		make_kept(HPR_BACKEND_SHMEM, other, SZ, 1);
		snprintf(target, sizeof(target), "%s", kept_path(other));
		ck_assert_int_eq(symlink(target, kept_path(dir)), 0);
		refused("symlink", &c, -ELOOP, "symbolic link");
		ck_assert_int_eq(unlink(kept_path(dir)), 0);
	}
}
END_TEST

/* Rewrite the stamp's 32-bit field at off (fix the checksum if fix). */
static void poke_stamp(const char *dir, size_t size, size_t off, uint32_t v, bool fix)
{
	int fd = open(kept_path(dir), O_RDWR);
	unsigned char s[136];

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, s, sizeof(s), (off_t)size), (ssize_t)sizeof(s));
	memcpy(s + off, &v, sizeof(v));
	if (fix) {
		/* the stamp's layout (attach.c): the checksum of bytes
		 * [0, 128) at 128 */
		uint64_t sum = hpr__xxh64(s, 128, 0x6870726b657074ULL);

		memcpy(s + 128, &sum, sizeof(sum));
	}
	ck_assert_int_eq(pwrite(fd, s, sizeof(s), (off_t)size), (ssize_t)sizeof(s));
	close(fd);
}

START_TEST(refuse_damaged)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	hpr_region *r;

	make_kept(HPR_BACKEND_SHMEM, dir, SZ, 11);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	/* shape */
	c.size = 2 * SZ;
	refused("larger size", &c, -ERANGE, "holds 8388608 bytes, config asks 16777216");
	c.size = SZ / 2;
	refused("smaller size", &c, -ERANGE, "holds 8388608 bytes, config asks 4194304");
	c.size = SZ;
	c.page_size = 1 * GiB;
	refused("page size", &c, -ERANGE, "pages, config and mount ask");
	c.page_size = 0;
	/* the stamp: one bit flipped (backend field, offset 12), then the
	 * same change with a valid checksum (a stamp of another backend) */
	poke_stamp(dir, SZ, 12, HPR_BACKEND_HUGETLB, false);
	refused("damaged stamp", &c, -EBADMSG, "damaged (checksum)");
	poke_stamp(dir, SZ, 12, HPR_BACKEND_HUGETLB, true);
	refused("other backend", &c, -ERANGE, "is a hugetlb region");
	poke_stamp(dir, SZ, 12, HPR_BACKEND_SHMEM, true);
	/* owner: the file's, then the stamp's creator uid (offset 40) */
	ck_assert_int_eq(chown(kept_path(dir), 65534, 65534), 0);
	refused("owner", &c, -EPERM, "owned by uid 65534");
	ck_assert_int_eq(chown(kept_path(dir), geteuid(), getegid()), 0);
	poke_stamp(dir, SZ, 40, 65534, true);
	refused("creator", &c, -EPERM, "made by uid 65534");
	poke_stamp(dir, SZ, 40, (uint32_t)geteuid(), true);
	/* all put back: it attaches, every byte there */
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED | HPR_F_PREFAULT);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 11), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
	/* truncated: the stamp cut off, then half the region too */
	ck_assert_int_eq(truncate(kept_path(dir), (off_t)SZ), 0);
	refused("stamp cut off", &c, -ERANGE, "truncated");
	ck_assert_int_eq(truncate(kept_path(dir), (off_t)SZ / 2), 0);
	refused("truncated", &c, -ERANGE, "truncated");
}
END_TEST

/* smaps' PMD-mapped bytes of the kept file mapped here by hand */
static size_t raw_pmd_mapped(const char *path, size_t size)
{
	int fd = open(path, O_RDONLY);
	char *res, *p;
	struct t_smaps k;

	ck_assert_int_ge(fd, 0);
	res = mmap(NULL, size + 2 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(res, MAP_FAILED);
	p = (char *)(((uintptr_t)res + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	ck_assert_ptr_eq(mmap(p, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0), p);
	close(fd);
	ck_assert_int_eq(madvise(p, size, MADV_POPULATE_READ), 0);
	ck_assert_int_eq(t_smaps(p, size, &k), 0);
	munmap(res, size + 2 * MiB);
	return k.shmem_pmd + k.file_pmd;
}

START_TEST(refuse_small_mount)
{
	const char *dir = t_mount_tmpfs("huge=always,size=64m");
	struct hpr_config c;
	hpr_region *r;
	size_t pmd;

	make_kept(HPR_BACKEND_SHMEM, dir, SZ, 21);
	ck_assert_int_eq(mount(NULL, dir, NULL, MS_REMOUNT, "huge=never"), 0);
	/* what the kernel does with the pages a huge= mount kept */
	pmd = raw_pmd_mapped(kept_path(dir), SZ);
	printf("kernel: after remount huge=never the kept file maps %zu of %zu bytes "
	       "PMD-mapped (its huge pages stay huge; new ones would be small)\n",
	       pmd, (size_t)SZ);
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH | HPR_F_SHARED);
	refused("huge=never", &c, -EMEDIUMTYPE, "remount,huge=always");
	cfg(&c, HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY);
	refused("huge=never, private", &c, -EMEDIUMTYPE, "does not give huge pages");
	/* nor is one made there, where it could not come back */
	{
		const char *small = t_mount_tmpfs("huge=never,size=64m");

		cfg(&c, HPR_BACKEND_SHMEM, small, SZ, HPR_F_ATTACH | HPR_F_SHARED);
		refused("create on huge=never", &c, -EMEDIUMTYPE, "does not give huge pages");
		ck_assert_int_eq(t_dir_entries(small), 0);
	}
	ck_assert_int_eq(mount(NULL, dir, NULL, MS_REMOUNT, "huge=within_size"), 0);
	r = attach(HPR_BACKEND_SHMEM, dir, SZ, HPR_F_ATTACH_ONLY | HPR_F_SHARED | HPR_F_PREFAULT);
	ck_assert_uint_eq(bad_word(hpr_base(r), SZ, 21), (size_t)-1);
	ck_assert_int_eq(hpr_destroy(r), 0);
}
END_TEST

/* ---- hugetlbfs (under the system lock) ---- */

START_TEST(hugetlb_attach)
{
	const size_t size = 4 * MiB; /* 2 pages + 1 for the stamp */
	const char *dir;
	struct fstate before, after;
	struct hpr_stats hs;
	struct t_smaps k;
	struct seen seen;
	unsigned long free0, empty;
	hpr_region *r, *v;

	t_need_pool_2m(8);
	dir = t_mount_hugetlbfs("pagesize=2M");
	empty = t_hugetlb_free(2048);
	killed_creator(HPR_BACKEND_HUGETLB, dir, size, 31, &seen);
	ck_assert_uint_eq(seen.hugetlb, size);
	/* the killed creator's file keeps its 2 pages and the stamp's */
	free0 = t_hugetlb_free(2048);
	ck_assert_uint_eq(free0, empty - 3);
	r = attach(HPR_BACKEND_AUTO, dir, size, HPR_F_ATTACH | HPR_F_SHARED | HPR_F_PREFAULT);
	ck_assert_int_eq(hpr_backend_of(r), HPR_BACKEND_HUGETLB);
	ck_assert_uint_eq(t_hugetlb_free(2048), free0); /* the kept pages, no new ones */
	ck_assert_int_eq(t_smaps(hpr_base(r), size, &k), 0);
	ck_assert_uint_eq(k.hugetlb, seen.hugetlb);
	ck_assert_int_eq(hpr_stats(r, &hs), 0);
	ck_assert_uint_eq(hs.huge_mapped, size);
	ck_assert_uint_eq(bad_word(hpr_base(r), size, 31), (size_t)-1);
	/* a second shared attach: -EBUSY */
	{
		struct hpr_config c;

		cfg(&c, HPR_BACKEND_HUGETLB, dir, size, HPR_F_ATTACH_ONLY | HPR_F_SHARED);
		refused("hugetlb shared vs shared", &c, -EBUSY, "held by another process");
	}
	ck_assert_int_eq(hpr_destroy(r), 0);
	/* a private view reserves its copy-on-write pages, never touches the
	 * file, and gives the pages back */
	file_state(kept_path(dir), &before);
	v = attach(HPR_BACKEND_HUGETLB, dir, size, HPR_F_ATTACH_ONLY);
	ck_assert_uint_eq(t_hugetlb_resv(2048), size / (2 * MiB));
	ck_assert_int_eq(hpr_fault_in(v, 0, size), 0);
	ck_assert_uint_eq(bad_word(hpr_base(v), size, 31), (size_t)-1);
	fill(hpr_base(v), size, 32);
	ck_assert_uint_eq(t_hugetlb_free(2048), free0 - size / (2 * MiB));
	ck_assert_int_eq(hpr_destroy(v), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), free0);
	ck_assert_uint_eq(t_hugetlb_resv(2048), 0);
	file_state(kept_path(dir), &after);
	same_file_but("hugetlb private view", &before, &after, true);
	/* the kept file's pages go back to the pool when it is removed */
	ck_assert_int_eq(unlink(kept_path(dir)), 0);
	ck_assert_uint_eq(t_hugetlb_free(2048), empty);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("attach");
	TCase *tc = tcase_create("shmem"), *ref = tcase_create("refusals"),
	      *ex = tcase_create("exclusive"), *ht = tcase_create("hugetlb");

	tcase_add_test(tc, create_then_attach);
	tcase_add_test(tc, attach_after_kill9);
	tcase_add_test(tc, private_is_copy_on_write);
	tcase_add_test(ref, refuse_config);
	tcase_add_test(ref, failed_attach_keeps_file);
	tcase_add_test(ref, create_race);
	tcase_add_test(ref, refuse_other_files);
	tcase_add_test(ref, refuse_damaged);
	tcase_add_test(ref, refuse_small_mount);
	tcase_add_test(ex, exclusive_shared);
	tcase_add_test(ex, exclusive_private);
	tcase_add_test(ex, killed_creator_child_holds);
	/* the only case that changes the system: the pool, under the lock */
	tcase_add_unchecked_fixture(ht, t_system_lock_begin, t_system_lock_end);
	tcase_add_test(ht, hugetlb_attach);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, ref);
	suite_add_tcase(s, ex);
	suite_add_tcase(s, ht);
	return s;
}

HPR_TEST_MAIN(suite, T_NEED_MOUNTS)
