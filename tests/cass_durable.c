/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #22 item 1: no read sees a write before it
 * is durable. The commit log's syncer is stalled (kv_opts.log_hook) with a
 * put's record in its batch, so the put is appended but not acknowledged:
 *
 *   window: a kv_get of the key still returns the old value; once the
 *           syncer goes on and the put returns 0, the new one;
 *   full:   the tmpfs is full, so the stalled batch fails with ENOSPC: no
 *           read before or after the failure returns the refused value,
 *           the error names the fix (raise size=, #22 item 6: the
 *           syncer's message reaches the client), and a reopen has only
 *           the old value (root only: needs a tmpfs of its own);
 *   kill:   a child is killed with -9 in the window; what it read there is
 *           what a reopen finds: no read saw a write that was then lost.
 */
#include "cass_test.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#define KEY 42

static void case_window(void)
{
	char dir[64];
	struct kv_db *db;
	struct cass_put p;
	char seen;

	cass_data_dir(dir, sizeof(dir), "64m");
	db = cass_open(dir);
	kv_put(db, KEY, cass_val('A', 100), 100, NULL);
	CHECK(cass_tag(db, KEY) == 'A', "window: the acknowledged value A is read");
	stall_arm();
	cass_put_start(&p, db, KEY, 'B', 100);
	CHECK(stall_wait(), "window: the syncer holds the batch of the put of B");
	seen = cass_watch(db, KEY, 'A', 200);
	CHECK(seen == 'A', "window: a read while B is not durable returns A (got %c)", seen);
	CHECK(!atomic_load(&p.done), "window: the put of B has not returned");
	stall_release();
	pthread_join(p.t, NULL);
	CHECK(p.rc == 0, "window: the put of B is acknowledged once the syncer goes on (%d)", p.rc);
	seen = cass_tag(db, KEY);
	CHECK(seen == 'B', "window: after the acknowledgement a read returns B (got %c)", seen);
	kv_close(db);
	cass_rm_dir(dir);
}

/* fill the file system holding dir: returns the filler's path */
static void fill(const char *dir, char *path, size_t n)
{
	static char chunk[64 << 10];
	int fd;

	snprintf(path, n, "%s/filler", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	memset(chunk, 1, sizeof(chunk));
	for (size_t sz = sizeof(chunk); sz >= 4096; sz /= 2)
		while (write(fd, chunk, sz) == (ssize_t)sz)
			;
	close(fd);
}

/* bytes in the commit log segments under dir */
static long long log_bytes(const char *dir)
{
	char cmd[PATH_MAX + 64];
	long long n = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "cat '%s'/commitlog-*.log 2>/dev/null | wc -c", dir);
	f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%lld", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static void case_full(void)
{
	char dir[64], filler[128];
	long long before, after;
	struct kv_db *db;
	struct cass_put p;
	char seen;

	if (!cass_data_dir(dir, sizeof(dir), "4m")) {
		printf("skip: full: needs root for a tmpfs of its own (size=4m)\n");
		cass_rm_dir(dir);
		return;
	}
	db = cass_open(dir);
	kv_put(db, KEY, cass_val('A', 100), 100, NULL);
	CHECK(cass_tag(db, KEY) == 'A', "full: the acknowledged value A is read");
	fill(dir, filler, sizeof(filler));
	before = log_bytes(dir);
	stall_arm();
	/* 16 KiB: more than the log file's last page can take, so the write
	 * needs pages the full tmpfs does not have */
	cass_put_start(&p, db, KEY, 'B', 16384);
	CHECK(stall_wait(), "full: the syncer holds the batch of the put of B");
	seen = cass_watch(db, KEY, 'A', 200);
	CHECK(seen == 'A', "full: a read between the put of B and its failure returns A (got %c)",
	      seen);
	stall_release();
	pthread_join(p.t, NULL);
	CHECK(p.rc == -ENOSPC, "full: the put of B fails with ENOSPC (%d: %s)", p.rc, p.msg);
	CHECK(strstr(p.msg, "raise its size="), "full: the put's error names the fix: %s", p.msg);
	seen = cass_watch(db, KEY, 'A', 50);
	CHECK(seen == 'A', "full: a read after the failure returns A (got %c)", seen);
	after = log_bytes(dir);
	CHECK(after == before,
	      "full: the failed batch was cut off the log (%lld bytes, %lld before)", after,
	      before);
	kv_close(db);
	unlink(filler);
	db = cass_open(dir);
	seen = cass_tag(db, KEY);
	CHECK(seen == 'A', "full: after a reopen the key holds A, B was never written (got %c)",
	      seen);
	kv_close(db);
	cass_rm_dir(dir);
}

static void put_a(struct kv_db *db)
{
	kv_put(db, KEY, cass_val('A', 100), 100, NULL);
}

static void case_kill(void)
{
	char dir[64], seen;
	struct kv_db *db;
	bool killed;

	cass_data_dir(dir, sizeof(dir), "64m");
	/* killed with B's put stalled, never durable */
	seen = cass_kill_stalled(dir, cass_open, put_a, KEY, 'A', 'B', 200, &killed);
	CHECK(killed, "kill: the child died of kill -9");
	CHECK(seen == 'A', "kill: in the window before the kill a read returned A (got %c)", seen);
	db = cass_open(dir);
	{
		char after = cass_tag(db, KEY);

		CHECK(after == seen,
		      "kill: after the reopen the key holds what was read (%c, read %c)", after,
		      seen);
	}
	kv_close(db);
	cass_rm_dir(dir);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	case_window();
	case_full();
	case_kill();
	printf("%s\n", cass_fails ? "FAILED" : "passed");
	return cass_fails ? 1 : 0;
}
