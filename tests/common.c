/* SPDX-License-Identifier: MIT */
/* Test harness (see common.h). */
#define _GNU_SOURCE
#include "common.h"
#include "os.h" /* the OS-layer hooks t_track_* wraps */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t main_pid;

struct restore {
	char path[256];
	char val[128];
};
/* Check forks each test: what a test changes is recorded in memory shared
 * with the suite's main process, which restores it at exit. */
struct shared_state {
	struct restore restores[32];
	int nrestores;
	char mounts[64][64];
	int nmounts;
	int skipped; /* test processes that exited 77 (count_skip) */
};
static struct shared_state *sh;
#define restores (sh->restores)
#define nrestores (sh->nrestores)
#define mounts (sh->mounts)
#define nmounts (sh->nmounts)

static void shared_init(void)
{
	if (sh)
		return;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		  -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(sh, 0, sizeof(*sh));
}

void t_skip(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "SKIP: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (hpr_env_no_skip()) {
		fprintf(stderr, "HPR_TEST_NO_SKIP is set: a skip is a failure here\n");
		exit(1);
	}
	exit(77);
}

bool t_required(const char *cap)
{
	const char *req = getenv("HPR_TEST_REQUIRE");
	size_t n = strlen(cap);

	while (req && *req) {
		size_t len;

		req += strspn(req, ", ");
		len = strcspn(req, ", ");
		if (len == n && !strncmp(req, cap, n))
			return true;
		req += len;
	}
	return false;
}

void t_unavailable(const char *cap, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (t_required(cap))
		ck_abort_msg("%s: %s, but HPR_TEST_REQUIRE promises it", cap, why);
	printf("NOTRUN: %s: %s (not run here; HPR_TEST_REQUIRE=%s makes this a failure)\n", cap,
	       why, cap);
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static void restore_settings(void)
{
	for (int i = nrestores - 1; i >= 0; i--)
		write_file(restores[i].path, restores[i].val);
	nrestores = 0;
}

static void restore_all(void)
{
	if (!sh || getpid() != main_pid)
		return;
	restore_settings();
	for (int i = nmounts - 1; i >= 0; i--) {
		umount2(mounts[i], MNT_DETACH);
		rmdir(mounts[i]);
	}
}

/* Killed (a CI timeout, ^C, a closed terminal): restore first, then die of
 * the same signal. Forked test children inherit this and skip the restore
 * (restore_all checks the pid). */
static void restore_and_die(int sig)
{
	restore_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

int t_write_at(const char *dir, const char *file, const char *val)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return write_file(p, val);
}

int t_sysfs_set(const char *path, const char *val)
{
	char old[128];

	shared_init();
	int rc = read_file(path, old, sizeof(old));

	if (rc)
		return rc;
	/* "always [madvise] never" -> "madvise" */
	{
		char *a = strchr(old, '['), *b = a ? strchr(a, ']') : NULL;

		if (a && b) {
			memmove(old, a + 1, (size_t)(b - a - 1));
			old[b - a - 1] = 0;
		}
	}
	if (nrestores < 32) {
		int dup = 0;

		for (int i = 0; i < nrestores; i++)
			if (!strcmp(restores[i].path, path))
				dup = 1;
		if (!dup) {
			snprintf(restores[nrestores].path, sizeof(restores[0].path), "%s", path);
			snprintf(restores[nrestores].val, sizeof(restores[0].val), "%s", old);
			nrestores++;
		}
	}
	return write_file(path, val);
}

static const char *do_mount(const char *type, const char *opts)
{
	char tmpl[] = "/tmp/hprtest-XXXXXX";
	char *d;

	shared_init();
	d = mkdtemp(tmpl);
	if (!d)
		t_skip("mkdtemp: %s", strerror(errno));
	if (mount("none", d, type, 0, opts)) {
		int e = errno;

		rmdir(d);
		t_skip("cannot mount %s (%s): %s", type, opts ? opts : "", strerror(e));
	}
	/* a full table returned the last recorded mount instead of this
	 * one (a test then wrote to the wrong tmpfs) */
	if (nmounts == (int)(sizeof(mounts) / sizeof(mounts[0]))) {
		umount2(d, MNT_DETACH);
		rmdir(d);
		ck_abort_msg("t_mount_tmpfs/hugetlbfs: more than %d mounts in one suite", nmounts);
	}
	snprintf(mounts[nmounts++], sizeof(mounts[0]), "%s", d);
	return mounts[nmounts - 1];
}

const char *t_mount_tmpfs(const char *opts)
{
	return do_mount("tmpfs", opts);
}

const char *t_mount_hugetlbfs(const char *opts)
{
	return do_mount("hugetlbfs", opts);
}

static unsigned long pool_read(unsigned long kb, const char *what)
{
	char p[160], b[64];

	snprintf(p, sizeof(p), "/sys/kernel/mm/hugepages/hugepages-%lukB/%s", kb, what);
	if (read_file(p, b, sizeof(b)))
		return 0;
	return strtoul(b, NULL, 10);
}

unsigned long t_hugetlb_pool(unsigned long kb, unsigned long n)
{
	char p[160], v[32];

	snprintf(p, sizeof(p), "/sys/kernel/mm/hugepages/hugepages-%lukB/nr_hugepages", kb);
	if (access(p, F_OK))
		t_skip("this kernel has no %lu kB hugetlb pages", kb);
	snprintf(v, sizeof(v), "%lu", n);
	if (t_sysfs_set(p, v))
		t_skip("cannot set %s: %s (need root)", p, strerror(errno));
	return pool_read(kb, "nr_hugepages");
}

/* Exactly n pages of size kb and no overcommit for that size, compacting
 * once if the kernel gives fewer; skips (t_skip) if it still cannot. */
static void need_pool(unsigned long kb, unsigned long n, const char *what)
{
	char p[160];
	unsigned long got = t_hugetlb_pool(kb, n);

	if (got < n) {
		t_compact();
		got = t_hugetlb_pool(kb, n);
	}
	if (got < n)
		t_skip("the kernel gave %lu of %lu %s hugetlb pages", got, n, what);
	/* gigantic pages cannot be overcommitted: the kernel refuses any
	 * write there (EINVAL), "0" included */
	if (pool_read(kb, "nr_overcommit_hugepages")) {
		snprintf(p, sizeof(p),
			 "/sys/kernel/mm/hugepages/hugepages-%lukB/nr_overcommit_hugepages", kb);
		ck_assert_int_eq(t_sysfs_set(p, "0"), 0);
	}
}

void t_need_pool_2m(unsigned long n)
{
	need_pool(2048, n, "2 MiB");
}

bool t_need_pool_1g(unsigned long n)
{
	const unsigned long kb = 1048576;
	unsigned long have, got;
	long long avail;
	const char *max;

	if (access("/sys/kernel/mm/hugepages/hugepages-1048576kB", F_OK)) {
		t_unavailable(T_CAP_GIB, "this kernel offers no 1 GiB hugetlb pages (no "
					 "hugepages-1048576kB: no pdpe1gb on this CPU)");
		return false;
	}
	/* pages already in the pool are in use, not in MemAvailable; leave
	 * 1 GiB to everything else on the machine */
	have = pool_read(kb, "nr_hugepages");
	/* HPR_TEST_GIB_MAX: the pool must not grow past this here (the VM
	 * matrix's --quick guests: whether a runtime 1 GiB allocation finds a
	 * free range varies from boot to boot, and under emulation a case it
	 * lets run takes minutes, so the suite's length would be luck) */
	max = getenv("HPR_TEST_GIB_MAX");
	if (max && *max && n > strtoul(max, NULL, 10)) {
		t_unavailable(T_CAP_GIB,
			      "this run keeps the 1 GiB pool at %s pages (HPR_TEST_GIB_MAX) and the "
			      "test needs %lu",
			      max, n);
		return false;
	}
	avail = t_meminfo("MemAvailable");
	if (n > have && (avail < 0 || (unsigned long long)avail < (n - have + 1) * kb)) {
		t_unavailable(T_CAP_GIB,
			      "MemAvailable is %lld kB: too little for %lu more 1 GiB hugetlb "
			      "pages with 1 GiB to spare",
			      avail, n - have);
		return false;
	}
	got = t_hugetlb_pool(kb, n);
	if (got < n) {
		t_compact();
		got = t_hugetlb_pool(kb, n);
	}
	if (got < n) {
		t_unavailable(T_CAP_GIB,
			      "the kernel gave %lu of %lu 1 GiB hugetlb pages (no free, movable "
			      "1 GiB range: memory too small or fragmented)",
			      got, n);
		return false;
	}
	/* gigantic pages cannot be overcommitted: the kernel refuses any
	 * write to nr_overcommit_hugepages there, "0" included, and it
	 * reads 0: the pool is all there is */
	return true;
}

void t_config(struct hpr_config *c, enum hpr_backend b, const char *path, size_t size,
	      unsigned workers, unsigned flags)
{
	hpr_config_init(c);
	c->size = size;
	c->backend = b;
	c->path = path;
	c->workers = workers;
	c->flags = flags;
}

hpr_region *t_region(enum hpr_backend b, const char *path, size_t size, unsigned workers,
		     unsigned flags)
{
	struct hpr_config c;
	hpr_region *r = NULL;
	int rc;

	t_config(&c, b, path, size, workers, flags);
	rc = hpr_create(&c, &r);
	ck_assert_msg(rc == 0, "create %s %zu bytes%s%s: %s", hpr_backend_name(b), size,
		      path ? " in " : "", path ? path : "", hpr_strerror(rc));
	return r;
}

unsigned long t_hugetlb_free(unsigned long kb)
{
	return pool_read(kb, "free_hugepages");
}

unsigned long t_hugetlb_resv(unsigned long kb)
{
	return pool_read(kb, "resv_hugepages");
}

unsigned long t_hugetlb_surp(unsigned long kb)
{
	return pool_read(kb, "surplus_hugepages");
}

int t_smaps(const void *addr, size_t len, struct t_smaps *o)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	int in = 0;
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;

	memset(o, 0, sizeof(*o));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, v;
		char key[64];

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = a < hi && b > lo;
			o->vmas += in;
			continue;
		}
		if (!in || sscanf(line, "%63s %lu", key, &v) != 2)
			continue;
		v *= 1024;
		if (!strcmp(key, "Size:"))
			o->size += v;
		else if (!strcmp(key, "Rss:"))
			o->rss += v;
		else if (!strcmp(key, "AnonHugePages:"))
			o->anon_huge += v;
		else if (!strcmp(key, "ShmemPmdMapped:"))
			o->shmem_pmd += v;
		else if (!strcmp(key, "FilePmdMapped:"))
			o->file_pmd += v;
		else if (!strcmp(key, "Shared_Hugetlb:") || !strcmp(key, "Private_Hugetlb:"))
			o->hugetlb += v;
		else if (!strcmp(key, "LazyFree:"))
			o->lazyfree += v;
	}
	fclose(f);
	return 0;
}

int t_maps_count(void)
{
	return t_count_lines("/proc/self/maps");
}

int t_count_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* ---- t_track_*: a ledger of what the library has mapped ---- */
static struct hpr_os_ops track_ops;
static const struct hpr_os_ops *track_prev;
static pthread_mutex_t track_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t lo, hi;
} track_iv[256];
static int track_n;

/* Remove [lo, hi) from the set (splitting intervals it cuts). */
static void track_sub(uintptr_t lo, uintptr_t hi)
{
	for (int i = 0; i < track_n; i++) {
		uintptr_t a = track_iv[i].lo, b = track_iv[i].hi;

		if (b <= lo || a >= hi)
			continue;
		if (a < lo && b > hi && track_n < 256) { /* split */
			track_iv[track_n].lo = hi;
			track_iv[track_n].hi = b;
			track_n++;
			track_iv[i].hi = lo;
			continue;
		}
		if (a < lo)
			track_iv[i].hi = lo;
		else if (b > hi)
			track_iv[i].lo = hi;
		else {
			track_iv[i--] = track_iv[--track_n];
		}
	}
}

static int track_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off,
		      void **out)
{
	int rc = track_prev->mmap(addr, len, prot, flags, fd, off, out);

	if (!rc) {
		uintptr_t lo = (uintptr_t)*out, hi = lo + ((len + 4095) & ~(size_t)4095);

		pthread_mutex_lock(&track_mu);
		track_sub(lo, hi); /* MAP_FIXED over our own reservation */
		if (track_n < 256) {
			track_iv[track_n].lo = lo;
			track_iv[track_n].hi = hi;
			track_n++;
		}
		pthread_mutex_unlock(&track_mu);
	}
	return rc;
}

static int track_munmap(void *addr, size_t len)
{
	int rc = track_prev->munmap(addr, len);

	if (!rc) {
		pthread_mutex_lock(&track_mu);
		track_sub((uintptr_t)addr, (uintptr_t)addr + ((len + 4095) & ~(size_t)4095));
		pthread_mutex_unlock(&track_mu);
	}
	return rc;
}

void t_track_begin(void)
{
	track_prev = hpr__os;
	track_ops = *track_prev;
	track_ops.mmap = track_mmap;
	track_ops.munmap = track_munmap;
	track_n = 0;
	hpr__os_set(&track_ops);
}

size_t t_track_end(void)
{
	size_t left = 0;

	hpr__os_set(track_prev == &hpr__os_real ? NULL : track_prev);
	for (int i = 0; i < track_n; i++)
		left += track_iv[i].hi - track_iv[i].lo;
	track_n = 0;
	return left;
}

int t_dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

long long t_meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	size_t kl = strlen(key);
	long long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtoll(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

const char *t_hpr_path(void)
{
	static char path[4096 + 16];
	static const char *const rel[] = { "/hpr", "/../tools/hpr" };
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", self, rel[i]);
		if (!access(path, X_OK))
			return path;
	}
	return NULL;
}

int t_hpr(const char *args, char *out, size_t len)
{
	const char *hpr = t_hpr_path();
	char cmd[8192];
	size_t n = 0;
	FILE *p;
	int c, st;

	if (!hpr || !len)
		return -1;
	snprintf(cmd, sizeof(cmd), "'%s' %s", hpr, args);
	fflush(NULL);
	p = popen(cmd, "re");
	if (!p)
		return -1;
	while ((c = fgetc(p)) != EOF)
		if (c != ' ' && c != '\n' && c != '\t' && n + 1 < len)
			out[n++] = (char)c;
	out[n] = 0;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool t_quick(void)
{
	return hpr_env_flag("HPR_TEST_QUICK");
}

void t_compact(void)
{
	write_file("/proc/sys/vm/compact_memory", "1");
}

/* The system lock taken by t_system_lock_begin(), or -1. */
static int syslock_fd = -1;
static bool syslock_whole_run;

void t_system_lock_begin(void)
{
	if (syslock_whole_run || syslock_fd >= 0 || getpid() != main_pid ||
	    hpr_env_lock_inherited())
		return;
	syslock_fd = open(HPR_SYSTEM_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (syslock_fd < 0 || flock(syslock_fd, LOCK_EX)) {
		fprintf(stderr, "cannot take %s: %s\n", HPR_SYSTEM_LOCK, strerror(errno));
		exit(1);
	}
}

void t_system_lock_end(void)
{
	if (syslock_fd < 0 || getpid() != main_pid)
		return;
	restore_settings();
	close(syslock_fd);
	syslock_fd = -1;
}

void t_harness_begin(unsigned needs)
{
	main_pid = getpid();
	/* One malloc arena for every thread, so t_maps_count() counts what
	 * the library mapped and not glibc's allocator. With the default
	 * (8 per CPU) a thread's first malloc or free creates a 64 MiB heap
	 * (two maps lines) unless an exited thread left one free; how many
	 * worker threads overlap at their first free() is scheduling, so a
	 * second equal hpr_create() sometimes added a heap the first had
	 * not (test_fallback failed ~1 run in 20). */
	mallopt(M_ARENA_MAX, 1);
	shared_init();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((needs & (T_NEED_ROOT | T_NEED_MOUNTS)) && geteuid() != 0)
		t_skip("this suite needs root (mounts, hugetlb pool)");
	if (needs & T_NEED_ROOT) {
		/* hugetlb pools and sysfs modes are system-wide: one suite
		 * (or benchmark) that changes them at a time */
		hpr_env_lock_system(false); /* held until exit */
		syslock_whole_run = true;
	}
	if (needs & (T_NEED_ROOT | T_NEED_MOUNTS)) {
		if (unshare(CLONE_NEWNS))
			t_skip("unshare(CLONE_NEWNS): %s", strerror(errno));
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			t_skip("making / private: %s", strerror(errno));
	}
	atexit(restore_all);
	signal(SIGTERM, restore_and_die);
	signal(SIGINT, restore_and_die);
	signal(SIGHUP, restore_and_die);
}

/* Check forks one process per test from the suite's main process. One that
 * exits 77 (t_skip(), or a test's own exit(77)) skipped: counted here, from
 * its exit status, in memory the main process sees. Processes a test forks
 * itself are not counted: their exit status is the test's to judge. */
static void count_skip(int status, void *arg)
{
	(void)arg;
	if (status == 77 && getpid() != main_pid && getppid() == main_pid)
		__atomic_add_fetch(&sh->skipped, 1, __ATOMIC_SEQ_CST);
}

int t_run_suite(Suite *s, unsigned needs)
{
	SRunner *sr;
	int failed, skipped;

	t_harness_begin(needs);
	if (on_exit(count_skip, NULL)) {
		fprintf(stderr, "on_exit failed\n");
		return 1;
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* Check reports a test that exited 77 as an error. When those are
	 * the only failures the suite is a skip: the kernel lacks a feature
	 * (the VM matrix's 6.1 guests count and report these; with
	 * HPR_TEST_NO_SKIP t_skip exits 1 and stays a failure). */
	skipped = __atomic_load_n(&sh->skipped, __ATOMIC_SEQ_CST);
	if (failed && skipped == failed) {
		fprintf(stderr, "SKIP: %d test(s) skipped, the rest passed\n", skipped);
		return 77;
	}
	return failed ? 1 : 0;
}
