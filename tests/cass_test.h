/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the cassandra-like engine's tests (tests/cass_*.c): a data
 * dir (a tmpfs of our own in a private mount namespace when root, else a
 * directory under /tmp), an engine on plain base-page memory (so nothing
 * depends on the machine's THP settings), values that say which write they
 * are, and a stall of the commit log's syncer through kv_opts.log_hook:
 * while it is stalled, every put is appended and applied but not durable.
 */
#ifndef CASS_TEST_H
#define CASS_TEST_H

#define _GNU_SOURCE
#include "engine.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int cass_fails;

#define CHECK(cond, ...)                  \
	do {                              \
		if (cond) {               \
			printf("ok: ");   \
		} else {                  \
			printf("FAIL: "); \
			cass_fails++;     \
		}                         \
		printf(__VA_ARGS__);      \
		putchar('\n');            \
		fflush(stdout);           \
	} while (0)

/* ---- the syncer stall ---- */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed, stalled, go;
} stall = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false };

static inline void stall_hook(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&stall.mu);
	if (stall.armed) {
		stall.stalled = true;
		pthread_cond_broadcast(&stall.cv);
		while (!stall.go)
			pthread_cond_wait(&stall.cv, &stall.mu);
		stall.armed = stall.stalled = stall.go = false;
		pthread_cond_broadcast(&stall.cv);
	}
	pthread_mutex_unlock(&stall.mu);
}

/* the next batch the syncer takes waits in stall_hook until stall_release */
static inline void stall_arm(void)
{
	pthread_mutex_lock(&stall.mu);
	stall.armed = true;
	stall.stalled = stall.go = false;
	pthread_mutex_unlock(&stall.mu);
}

/* wait until the syncer holds a batch in the hook: false after 10 s */
static inline bool stall_wait(void)
{
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&stall.mu);
	while (!stall.stalled && pthread_cond_timedwait(&stall.cv, &stall.mu, &ts) == 0)
		;
	ok = stall.stalled;
	pthread_mutex_unlock(&stall.mu);
	return ok;
}

static inline void stall_release(void)
{
	pthread_mutex_lock(&stall.mu);
	stall.go = true;
	pthread_cond_broadcast(&stall.cv);
	pthread_mutex_unlock(&stall.mu);
}

/* ---- the engine ---- */

/* A tmpfs of `size` when root (in a private mount namespace, gone with the
 * process), else a directory under /tmp. Returns whether it is a tmpfs. */
static inline bool cass_data_dir(char *dir, size_t n, const char *size)
{
	static bool ns;
	char opts[64];

	snprintf(dir, n, "/tmp/cass-test.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	if (geteuid() != 0)
		return false;
	if (!ns && (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL)))
		return false;
	ns = true;
	snprintf(opts, sizeof(opts), "size=%s", size);
	return mount("none", dir, "tmpfs", 0, opts) == 0;
}

/* A tmpfs of `size` (e.g. "256m,huge=always") of our own, or exit 77 with
 * why: `needs` is what the suite needs root for. */
static inline void cass_huge_dir(char *dir, size_t n, const char *size, const char *needs)
{
	if (geteuid() != 0) {
		printf("SKIP: %s: run as root\n", needs);
		exit(77);
	}
	if (!cass_data_dir(dir, n, size)) {
		printf("SKIP: cannot mount a tmpfs %s in a private mount namespace\n", size);
		exit(77);
	}
}

/* Flip one bit of the byte at pat[at] in the first (or last) run of the n
 * bytes pat in file p at or past offset from; false if there is none. */
static inline bool cass_flip(const char *p, const void *pat, size_t n, size_t at, size_t from,
			     bool last)
{
	struct stat sb;
	char *m, *hit, *nx;
	int fd = open(p, O_RDWR | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &sb) || (size_t)sb.st_size <= from) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	hit = memmem(m + from, (size_t)sb.st_size - from, pat, n);
	while (last && hit && (nx = memmem(hit + n, (size_t)(m + sb.st_size - (hit + n)), pat, n)))
		hit = nx;
	if (hit)
		hit[at] ^= 0x20;
	munmap(m, (size_t)sb.st_size);
	return hit != NULL;
}

static inline void cass_rm_dir(const char *dir)
{
	char cmd[PATH_MAX + 32];

	umount2(dir, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/* the tests' options: plain base-page memory, small sizes, the syncer's
 * stall hook; a test changes what it needs before cass_open_opts */
static inline void cass_opts(struct kv_opts *o, const char *dir)
{
	memset(o, 0, sizeof(*o));
	o->data_dir = dir;
	o->cache_backing = KV_MEM_BASE;
	o->memtable_backing = KV_MEM_BASE;
	o->cache_bytes = 8 << 20;
	o->memtable_bytes = 2 << 20;
	o->row_hint = 512;
	o->allow_disk = true;
	o->quiet = true;
	o->log_hook = stall_hook;
}

/* kv_open, or FAIL and exit 1 */
static inline struct kv_db *cass_open_opts(const struct kv_opts *o)
{
	struct kv_db *db;
	int rc = kv_open(o, &db);

	if (rc) {
		printf("FAIL: kv_open%s %s: %s\n", o->keep ? " (keep)" : "", o->data_dir,
		       kv_errmsg(rc));
		exit(1);
	}
	return db;
}

static inline struct kv_db *cass_open(const char *dir)
{
	struct kv_opts o;

	cass_opts(&o, dir);
	return cass_open_opts(&o);
}

/* a value of len bytes, every byte `tag` */
static inline void *cass_val(char tag, uint32_t len)
{
	static __thread char buf[1 << 16];

	memset(buf, tag, len);
	return buf;
}

/* the tag of key's value ('-' for none, '?' for a mixed value, '!' error) */
static inline char cass_tag(struct kv_db *db, uint64_t key)
{
	static __thread char buf[1 << 16];
	uint32_t len = 0;
	int rc = kv_get(db, key, buf, sizeof(buf), &len, NULL);

	if (rc == -ENOENT)
		return '-';
	if (rc || !len)
		return '!';
	for (uint32_t i = 1; i < len; i++)
		if (buf[i] != buf[0])
			return '?';
	return buf[0];
}

/* a put on a thread of its own: start, then join for its result */
struct cass_put {
	pthread_t t;
	struct kv_db *db;
	uint64_t key;
	char tag;
	uint32_t len;
	int rc;
	char msg[512];
	_Atomic bool done;
};

static inline void *cass_put_main(void *arg)
{
	struct cass_put *p = arg;

	p->rc = kv_put(p->db, p->key, cass_val(p->tag, p->len), p->len, NULL);
	if (p->rc)
		snprintf(p->msg, sizeof(p->msg), "%s", kv_errmsg(p->rc));
	atomic_store(&p->done, true);
	return NULL;
}

static inline void cass_put_start(struct cass_put *p, struct kv_db *db, uint64_t key, char tag,
				  uint32_t len)
{
	p->db = db;
	p->key = key;
	p->tag = tag;
	p->len = len;
	p->rc = 0;
	p->msg[0] = 0;
	atomic_store(&p->done, false);
	if (pthread_create(&p->t, NULL, cass_put_main, p)) {
		printf("FAIL: pthread_create\n");
		exit(1);
	}
}

/* The tag a reader sees during ms milliseconds: the first that is not
 * `want`, else want. (The put in flight applies its write within
 * microseconds of its append; polling covers the gap either way.) */
static inline char cass_watch(struct kv_db *db, uint64_t key, char want, int ms)
{
	uint64_t end = kv_now_ns() + (uint64_t)ms * 1000000;

	do {
		char t = cass_tag(db, key);

		if (t != want)
			return t;
		usleep(1000);
	} while (kv_now_ns() < end);
	return want;
}

/* ---- a store killed with -9 while a put waits in the stalled syncer ---- */

/* kill -9 pid and reap it: whether it died of that */
static inline bool cass_kill(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

/*
 * A child opens dir with open_fn and runs setup (after which key holds a
 * value of tag want), then puts 100 bytes of tag to key and is killed
 * with -9 while that put's batch is stalled in the syncer: its record is
 * never durable. Returns what a reader of key saw in the child during ms
 * milliseconds of that window ('!': the syncer never stalled); *killed:
 * the child died of the kill.
 */
static inline char cass_kill_stalled(const char *dir, struct kv_db *(*open_fn)(const char *),
				     void (*setup)(struct kv_db *), uint64_t key, char want,
				     char tag, int ms, bool *killed)
{
	char seen = '!';
	int pfd[2];
	pid_t pid;

	if (pipe(pfd)) {
		perror("pipe");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		struct kv_db *db;
		struct cass_put p;
		char t;

		close(pfd[0]);
		db = open_fn(dir);
		setup(db);
		stall_arm();
		cass_put_start(&p, db, key, tag, 100);
		t = stall_wait() ? cass_watch(db, key, want, ms) : '!';
		if (write(pfd[1], &t, 1) != 1)
			_exit(1);
		pause(); /* killed here */
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &seen, 1) != 1)
		seen = '!';
	*killed = cass_kill(pid);
	close(pfd[0]);
	return seen;
}

#endif /* CASS_TEST_H */
