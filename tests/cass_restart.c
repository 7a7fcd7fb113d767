/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #17 part 2: a restart with the row cache
 * and the memtables in kept regions (kv_opts.keep, restart.c). Each case
 * runs the store in a child that is killed with -9, then opens the same
 * data dir again in this process, attaching to what the child kept:
 *
 *   writes:   kill -9 mid-write (four writers, memtable switches and
 *             flushes under way): the kept memtables are used, and every
 *             acknowledged write is there, intact, no older;
 *   unacked:  kill -9 while a put's batch is stalled in the syncer (its
 *             node is in the kept memtable, its record not in the log):
 *             the node is discarded and the key reads the old value; and
 *             an acknowledged write's node unlinked from the kept memtable
 *             (as if killed between the log write and the insert) is
 *             replayed from the log;
 *   warm:     rows read before the kill are served from the kept cache at
 *             once: the first request after the restart is a hit, and
 *             every one of them;
 *   damaged:  a byte of a kept cache row and a byte of a kept memtable
 *             node flipped between the kill and the restart: the row is
 *             dropped (a miss, never returned, even to a read of a part of
 *             it without the flipped byte), the memtable is not used
 *             (the log is replayed), every value is still right;
 *   switch:   kill -9 between a memtable switch and its flush (the flusher
 *             stalled in kv_opts.flush_hook): the immutable half comes
 *             back and is flushed, nothing acknowledged is lost; and with
 *             the region's state set back to before that flush (as if
 *             killed between the table's rename and the state's update),
 *             the half is seen to be in the tables already, not flushed
 *             twice.
 *
 * Needs root: kept regions live on a tmpfs mounted huge=, made here in a
 * private mount namespace. Exits 77 otherwise.
 */
#include "cass_test.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define NKEYS 3000

/* the flusher waits here for ever once armed: the child is killed there */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed, reached;
} fstall = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };

static void flush_hook(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&fstall.mu);
	if (fstall.armed) {
		fstall.reached = true;
		pthread_cond_broadcast(&fstall.cv);
		for (;;)
			pthread_cond_wait(&fstall.cv, &fstall.mu);
	}
	pthread_mutex_unlock(&fstall.mu);
}

/* kv_opts.keep: the row cache and memtables in kept SHMEM regions */
static struct kv_db *open_kept(const char *dir)
{
	struct kv_opts o;

	cass_opts(&o, dir);
	o.keep = true;
	o.allow_disk = false;
	o.cache_backing = KV_MEM_SHMEM;
	o.memtable_backing = KV_MEM_SHMEM;
	o.cache_bytes = 16 << 20;
	o.flush_hook = flush_hook;
	return cass_open_opts(&o);
}

/* a tmpfs huge=always of our own, or exit 77 */
static void huge_dir(char *dir, size_t n)
{
	cass_huge_dir(dir, n, "256m,huge=always", "kept regions need a tmpfs mounted huge=");
}

/* what a child acknowledged: key, seq, and the value's tag and length */
struct ack {
	uint64_t key, seq;
	uint32_t len;
	char tag;
};

static struct ack shadow[NKEYS];

static void note_ack(const struct ack *a)
{
	if (a->key < NKEYS && a->seq > shadow[a->key].seq)
		shadow[a->key] = *a;
}

/* every acknowledged write is there: intact, and no older */
static void check_shadow(struct kv_db *db, const char *what)
{
	static char buf[1 << 16];
	uint64_t keys = 0, bad = 0;

	for (uint64_t k = 0; k < NKEYS; k++) {
		uint32_t len = 0;
		uint64_t seq = 0;
		int rc;

		if (!shadow[k].seq)
			continue;
		keys++;
		rc = kv_get(db, k, buf, sizeof(buf), &len, &seq);
		bool ok =
			!rc && seq >= shadow[k].seq && len &&
			(seq > shadow[k].seq || (buf[0] == shadow[k].tag && len == shadow[k].len));
		for (uint32_t i = 1; ok && i < len; i++)
			ok = buf[i] == buf[0];
		if (!ok && bad++ < 5)
			printf("  key %" PRIu64 ": acknowledged seq %" PRIu64
			       " '%c' x %u, read %s seq "
			       "%" PRIu64 " '%c' x %u\n",
			       k, shadow[k].seq, shadow[k].tag, shadow[k].len,
			       rc ? kv_errmsg(rc) : "ok", seq, len ? buf[0] : '-', len);
	}
	CHECK(keys && !bad,
	      "%s: all %" PRIu64 " acknowledged keys read back intact and no older "
	      "(%" PRIu64 " wrong)",
	      what, keys, bad);
}

/* ---- writes: kill -9 mid-write ---- */

struct writer {
	pthread_t t;
	struct kv_db *db;
	int fd;
	uint64_t rng;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (;;) {
		struct ack a;
		uint64_t r = kv_rand(&w->rng);
		static __thread char rbuf[1 << 16];
		uint32_t len;

		a.key = r % NKEYS;
		a.tag = (char)('a' + (r >> 20) % 26);
		a.len = 200 + (uint32_t)((r >> 30) % 800);
		if (kv_put(w->db, a.key, cass_val(a.tag, a.len), a.len, &a.seq) == 0 &&
		    write(w->fd, &a, sizeof(a)) != (ssize_t)sizeof(a))
			break;
		/* reads too, so the kept cache holds rows */
		kv_get(w->db, (r >> 40) % NKEYS, rbuf, sizeof(rbuf), &len, NULL);
	}
	return NULL;
}

/* read acks from fd until n have come (or the child is gone) */
static uint64_t take_acks(int fd, uint64_t n)
{
	struct ack a;
	uint64_t got = 0;

	while ((n == 0 || got < n) && read(fd, &a, sizeof(a)) == (ssize_t)sizeof(a)) {
		note_ack(&a);
		got++;
	}
	return got;
}

static void kill_child(pid_t pid, const char *what)
{
	CHECK(cass_kill(pid), "%s: the store died of kill -9", what);
}

static void case_writes(void)
{
	struct kv_keep_info ki;
	struct kv_stats st;
	struct kv_db *db;
	char dir[64];
	int pfd[2];
	uint64_t n;
	pid_t pid;

	memset(shadow, 0, sizeof(shadow));
	huge_dir(dir, sizeof(dir));
	if (pipe(pfd))
		exit(1);
	pid = fork();
	if (pid == 0) {
		struct writer w[4];

		close(pfd[0]);
		db = open_kept(dir);
		for (int i = 0; i < 4; i++) {
			w[i] = (struct writer){ .db = db,
						.fd = pfd[1],
						.rng = 0x9e3779b97f4a7c15ull * (i + 1) };
			pthread_create(&w[i].t, NULL, writer_main, &w[i]);
		}
		pause();
		_exit(0);
	}
	close(pfd[1]);
	/* 2 MiB halves of ~600 B values: several switches and flushes */
	n = take_acks(pfd[0], 12000);
	kill_child(pid, "writes");
	n += take_acks(pfd[0], 0);
	close(pfd[0]);
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	kv_db_stats(db, &st);
	CHECK(ki.mt_warm,
	      "writes: the kept memtables were used after %" PRIu64 " acknowledged writes (%" PRIu64
	      " records kept, %" PRIu64 " discarded, %" PRIu64 " replayed from the log; %s)",
	      n, ki.mt_kept, ki.mt_discarded, ki.mt_replayed, ki.mt_why[0] ? ki.mt_why : "ok");
	CHECK(ki.cache_warm && ki.cache_rows > 0,
	      "writes: the kept row cache was used (%" PRIu64 " rows; %s)", ki.cache_rows,
	      ki.cache_why[0] ? ki.cache_why : "ok");
	CHECK(st.tables > 0, "writes: memtables were flushed before the kill (%" PRIu64 " tables)",
	      st.tables);
	check_shadow(db, "writes");
	kv_db_quiesce(db);
	check_shadow(db, "writes, after the flush of what came back");
	kv_close(db);
	db = open_kept(dir); /* a clean reopen attaches too */
	kv_db_keep_info(db, &ki);
	CHECK(ki.mt_warm && ki.cache_warm, "writes: a clean reopen attaches both again");
	check_shadow(db, "writes, after a clean reopen");
	kv_close(db);
	cass_rm_dir(dir);
}

/* ---- unacked: a node in the kept memtable whose record is not in the log ---- */

#define KEY 42
#define KEY2 43

/* Unlink key's node (the one whose value starts with tag) from the active
 * half of the kept memtable in dir, at every level, as a process killed
 * between its log write and its memtable insert would have left it. */
static bool drop_node(const char *dir, uint64_t key, char tag)
{
	char p[128], *m, *base;
	struct kv_kept_hdr *h;
	struct kv_mt_node *head;
	struct stat sb;
	bool found = false;
	int fd;

	snprintf(p, sizeof(p), "%s/memtable", dir);
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb))
		return false;
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	h = (struct kv_kept_hdr *)m;
	base = m + h->geo[1] + (atomic_load(&h->state) & 1) * h->geo[0];
	head = (struct kv_mt_node *)base;
#define NODE(o) ((struct kv_mt_node *)(base + (o)))
	for (int lvl = KV_MT_MAXH - 1; lvl >= 0; lvl--) {
		struct kv_mt_node *x = head;
		uint64_t o;

		while ((o = x->next[lvl]) &&
		       (NODE(o)->key < key ||
			(NODE(o)->key == key && *(const char *)kv_mt_value(NODE(o)) != tag)))
			x = NODE(o);
		if (o && NODE(o)->key == key) {
			x->next[lvl] = NODE(o)->next[lvl];
			found = true;
		}
	}
#undef NODE
	munmap(m, (size_t)sb.st_size);
	return found;
}

static void put_a_m(struct kv_db *db)
{
	kv_put(db, KEY, cass_val('A', 100), 100, NULL);
	kv_put(db, KEY2, cass_val('M', 100), 100, NULL);
}

static void case_unacked(void)
{
	struct kv_keep_info ki;
	struct kv_db *db;
	char dir[64], seen;
	bool killed;

	huge_dir(dir, sizeof(dir));
	/* killed with B's put stalled: B is in the kept memtable, not in the log */
	seen = cass_kill_stalled(dir, open_kept, put_a_m, KEY, 'A', 'B', 100, &killed);
	CHECK(killed, "unacked: the store died of kill -9");
	CHECK(seen == 'A', "unacked: before the kill a read returned A, B not durable (got %c)",
	      seen);
	CHECK(drop_node(dir, KEY2, 'M'),
	      "unacked: the acknowledged M's node unlinked from the kept "
	      "memtable");
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	CHECK(ki.mt_warm && ki.mt_discarded == 1 && ki.mt_kept == 1 && ki.mt_replayed == 1,
	      "unacked: the kept memtable was used, B's node discarded, M replayed from the log "
	      "(%" PRIu64 " kept, %" PRIu64 " discarded, %" PRIu64 " replayed)",
	      ki.mt_kept, ki.mt_discarded, ki.mt_replayed);
	seen = cass_tag(db, KEY);
	CHECK(seen == 'A', "unacked: after the restart the key reads A, never B (got %c)", seen);
	seen = cass_tag(db, KEY2);
	CHECK(seen == 'M', "unacked: the other key reads M, acknowledged (got %c)", seen);
	kv_put(db, KEY, cass_val('C', 100), 100, NULL);
	seen = cass_tag(db, KEY);
	CHECK(seen == 'C', "unacked: a new write after the restart is read (got %c)", seen);
	kv_close(db);
	cass_rm_dir(dir);
}

/* ---- warm and damaged: the kept row cache ---- */

#define NROWS 500

static char row_tag(uint64_t k)
{
	return k == 7 ? 'Q' : k == 9 ? 'Z' : (char)('a' + k % 20);
}

/* a child that writes and reads NROWS rows, then is killed */
static void fill_and_kill(const char *dir, const char *what)
{
	int pfd[2];
	char c = 0;
	pid_t pid;

	if (pipe(pfd))
		exit(1);
	pid = fork();
	if (pid == 0) {
		struct kv_db *db = open_kept(dir);

		close(pfd[0]);
		for (uint64_t k = 0; k < NROWS; k++)
			kv_put(db, k, cass_val(row_tag(k), 300), 300, NULL);
		for (uint64_t k = 0; k < NROWS; k++)
			cass_tag(db, k); /* fills the cache */
		if (write(pfd[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1)
		c = 0;
	close(pfd[0]);
	CHECK(c == 'x', "%s: the store wrote and read %d rows", what, NROWS);
	kill_child(pid, what);
}

static void case_warm(void)
{
	struct kv_keep_info ki;
	struct kv_stats st;
	struct kv_db *db;
	uint64_t bad = 0;
	char dir[64];
	bool first_hit;

	huge_dir(dir, sizeof(dir));
	fill_and_kill(dir, "warm");
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	CHECK(ki.cache_warm && ki.cache_rows >= NROWS,
	      "warm: the kept row cache was attached with "
	      "%" PRIu64 " rows",
	      ki.cache_rows);
	cass_tag(db, 0);
	kv_db_stats(db, &st);
	first_hit = st.cache_hits == 1 && st.cache_misses == 0;
	CHECK(first_hit, "warm: the first request after the restart is a cache hit");
	for (uint64_t k = 1; k < NROWS; k++)
		bad += cass_tag(db, k) != row_tag(k);
	kv_db_stats(db, &st);
	CHECK(!bad && st.cache_hits == NROWS && st.cache_misses == 0,
	      "warm: all %d rows right and served from the kept cache (%" PRIu64 " hits, %" PRIu64
	      " misses, %" PRIu64 " wrong)",
	      NROWS, st.cache_hits, st.cache_misses, bad);
	kv_close(db);
	cass_rm_dir(dir);
}

/* flip one byte in the middle of the first run of n bytes c in dir/name */
static bool flip(const char *dir, const char *name, char c, size_t n)
{
	char p[128], pat[1024];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	memset(pat, c, n);
	return cass_flip(p, pat, n, n / 2, 0, false);
}

static void case_damaged(void)
{
	struct kv_keep_info ki;
	struct kv_stats st;
	struct kv_db *db;
	uint64_t bad = 0;
	char dir[64], t, part[8];
	uint32_t len;
	int rc;

	huge_dir(dir, sizeof(dir));
	fill_and_kill(dir, "damaged");
	CHECK(flip(dir, "rowcache", 'Q', 300), "damaged: a byte of key 7's row flipped in the kept "
					       "row cache");
	CHECK(flip(dir, "memtable", 'Z', 300),
	      "damaged: a byte of key 9's node flipped in the kept "
	      "memtable");
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	CHECK(ki.cache_warm, "damaged: the kept row cache is still used (%" PRIu64 " rows)",
	      ki.cache_rows);
	CHECK(ki.mt_attached && !ki.mt_warm && strstr(ki.mt_why, "crc"),
	      "damaged: the kept memtable is not used, the log is replayed (%s)", ki.mt_why);
	/* a part of the row that misses the flipped byte (kv_get_part, a
	 * one-field read): the whole row's crc still finds the damage */
	len = 0;
	rc = kv_get_part(db, 7, 0, part, sizeof(part), &len, NULL, NULL);
	kv_db_stats(db, &st);
	CHECK(rc == 0 && len == sizeof(part) && !memcmp(part, cass_val('Q', 8), 8) &&
		      st.cache_crc_dropped == 1 && st.cache_misses == 1,
	      "damaged: 8 intact bytes of key 7 read, its kept row failed its crc and was dropped, "
	      "a miss (%" PRIu64 " dropped, %" PRIu64 " misses)",
	      st.cache_crc_dropped, st.cache_misses);
	t = cass_tag(db, 7);
	kv_db_stats(db, &st);
	CHECK(t == 'Q', "damaged: key 7 reads its intact value (got %c)", t);
	CHECK(st.cache_crc_dropped == 1 && st.cache_misses == 1,
	      "damaged: from the cache, refilled by that miss (%" PRIu64 " dropped, %" PRIu64
	      " misses)",
	      st.cache_crc_dropped, st.cache_misses);
	for (uint64_t k = 0; k < NROWS; k++)
		bad += cass_tag(db, k) != row_tag(k);
	kv_db_stats(db, &st);
	CHECK(!bad, "damaged: all %d rows right (%" PRIu64 " wrong; %" PRIu64 " hits)", NROWS, bad,
	      st.cache_hits);
	kv_close(db);
	cass_rm_dir(dir);
}

/* ---- switch: killed between a memtable switch and its flush ---- */

/* the kept memtable region's state word (which half is active, whether
 * the other is immutable): read, or with set, written first */
static uint64_t mt_state(const char *dir, const uint64_t *set)
{
	struct kv_kept_hdr *h;
	char p[128];
	uint64_t v;
	int fd;

	snprintf(p, sizeof(p), "%s/memtable", dir);
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 0;
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED)
		return 0;
	if (set)
		atomic_store(&h->state, *set);
	v = atomic_load(&h->state);
	munmap(h, sizeof(*h));
	return v;
}

static void case_switch(void)
{
	struct kv_keep_info ki;
	struct kv_stats st;
	struct kv_db *db;
	char dir[64];
	int pfd[2];
	uint64_t n, state;
	pid_t pid;

	memset(shadow, 0, sizeof(shadow));
	huge_dir(dir, sizeof(dir));
	if (pipe(pfd))
		exit(1);
	pid = fork();
	if (pid == 0) {
		uint64_t rng = 12345, after = 0;

		close(pfd[0]);
		fstall.armed = true;
		db = open_kept(dir);
		/* until the flusher holds the switched-out half, then 200 more
		 * writes into the new one. Once a switch is in the kept state,
		 * no write until the flusher has the old half in its hook:
		 * writes that fill the new half before then (a flusher thread
		 * slow to run, on a loaded machine) wait for a flush that the
		 * hook stalls for ever, and the case hangs. */
		while (after < 200) {
			struct ack a;
			uint64_t r = kv_rand(&rng);
			bool switched = !after && (mt_state(dir, NULL) & 2);

			a.key = r % NKEYS;
			a.tag = (char)('a' + (r >> 20) % 26);
			a.len = 1000;
			if (kv_put(db, a.key, cass_val(a.tag, a.len), a.len, &a.seq))
				_exit(1);
			if (write(pfd[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
				_exit(1);
			pthread_mutex_lock(&fstall.mu);
			while (switched && !fstall.reached)
				pthread_cond_wait(&fstall.cv, &fstall.mu);
			after += fstall.reached;
			pthread_mutex_unlock(&fstall.mu);
		}
		close(pfd[1]);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	n = take_acks(pfd[0], 0); /* to the child's close */
	kill_child(pid, "switch");
	close(pfd[0]);
	state = mt_state(dir, NULL);
	CHECK(state & 2, "switch: the kept state says a half is immutable (%#" PRIx64 ")", state);
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	CHECK(ki.mt_warm && ki.imm_recovered,
	      "switch: after %" PRIu64 " writes the switched-out half came back to be flushed "
	      "(%" PRIu64 " records kept, %" PRIu64 " discarded, %" PRIu64 " replayed; %s)",
	      n, ki.mt_kept, ki.mt_discarded, ki.mt_replayed, ki.mt_why[0] ? ki.mt_why : "ok");
	check_shadow(db, "switch, before the flush");
	kv_db_quiesce(db);
	kv_db_stats(db, &st);
	CHECK(st.flushes == 1 && st.tables >= 1,
	      "switch: the flusher wrote it out (%" PRIu64 " flushes, %" PRIu64 " tables)",
	      st.flushes, st.tables);
	check_shadow(db, "switch, after the flush");
	kv_close(db);
	CHECK(!(mt_state(dir, NULL) & 2), "switch: after the flush the kept state has no immutable "
					  "half");
	/* killed after the table's rename, before the state's update */
	mt_state(dir, &state);
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	CHECK(ki.mt_warm && ki.imm_flushed && !ki.imm_recovered,
	      "switch: with the state from before the flush, the half is found in the tables "
	      "already");
	kv_db_quiesce(db);
	kv_db_stats(db, &st);
	CHECK(st.flushes == 0, "switch: and is not flushed again (%" PRIu64 " flushes)",
	      st.flushes);
	check_shadow(db, "switch, after the stale state");
	kv_close(db);
	db = open_kept(dir);
	kv_db_keep_info(db, &ki);
	CHECK(ki.mt_warm && !ki.imm_recovered && !ki.imm_flushed,
	      "switch: a reopen finds no half left to flush");
	check_shadow(db, "switch, after a reopen");
	kv_close(db);
	cass_rm_dir(dir);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	case_writes();
	case_unacked();
	case_warm();
	case_damaged();
	case_switch();
	printf("%s\n", cass_fails ? "FAILED" : "passed");
	return cass_fails ? 1 : 0;
}
