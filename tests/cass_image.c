/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #18 part 3: the row cache image
 * (kv_opts.cache_image, image.c). kv_close saves the row cache with
 * hpr_save; kv_open loads it with hpr_load(HPR_SNAP_LAZY) and serves at
 * once while the pages arrive:
 *
 *   warm:     rows read before a clean close are hits from the first
 *             request after the reopen, every one of them right, while the
 *             load is still running; with image_nowait every read is right
 *             while the load runs and every row hits once it is done;
 *   stale:    writes after the save -- by an open without the image, some
 *             flushed to tables, some only in the log -- never return the
 *             image's older value; an older image of the same data dir, and
 *             the image of another data dir, are not used at all;
 *   damaged:  a byte flipped in a row's page (the lazy load fails mid-way:
 *             the cache goes cold), in the index page (refused at open),
 *             and a truncated image (refused by hpr_load): every value
 *             right, no crash, readers running throughout; also with
 *             image_nowait (reads miss instead of waiting for a page);
 *   killed:   kill -9 while the background fill runs, after 10 writes,
 *             with reads and writes under way: the next open (from the
 *             same image) has every acknowledged write and no older value.
 *
 * Needs root (a tmpfs huge=always of our own, and /dev/userfaultfd for the
 * lazy load): exits 77 otherwise.
 */
#include "cass_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define NROWS 4000
#define VLEN 2000
#define IMG "rowcache.img"

/* the killed case: a bigger image, so that its fill takes a while */
#define NBIG 2400
#define VBIG 60000

static bool nowait; /* kv_opts.image_nowait for the next opens */

/* set in the killed case's child: the store stays in its loading state
 * (the watcher held in kv_opts.image_hook) until the kill, however fast
 * the background fill is */
static bool hold_loading;

static void hold_hook(void *arg)
{
	(void)arg;
	for (;;)
		pause();
}

static struct kv_db *open_img2(const char *dir, const char *image, bool big)
{
	struct kv_opts o = { 0 };

	if (hold_loading)
		o.image_hook = hold_hook;

	o.image_nowait = nowait;
	o.data_dir = dir;
	o.cache_backing = KV_MEM_SHMEM; /* a file in the data dir's tmpfs */
	o.memtable_backing = KV_MEM_BASE;
	o.cache_bytes = (big ? 192 : 32) << 20;
	o.memtable_bytes = (big ? 16 : 2) << 20;
	o.row_hint = big ? VBIG : VLEN;
	o.quiet = true;
	o.log_hook = stall_hook;
	o.cache_image = image;
	return cass_open_opts(&o);
}

static struct kv_db *open_img(const char *dir, const char *image)
{
	return open_img2(dir, image, false);
}

static void huge_dir(char *dir, size_t n)
{
	/* the killed case holds ~150 MB of tables (and compaction's copies),
	 * a 192 MiB cache file and its 192 MiB image: room for all of it */
	cass_huge_dir(dir, n, "1g,huge=always",
		      "the image's lazy load needs /dev/userfaultfd and a tmpfs");
}

/* the value each key should have: tag per key and round */
static char tag_of(uint64_t k, int round)
{
	return (char)('a' + (k * 7 + (uint64_t)round * 3) % 26);
}

/* write NROWS rows of round r, then read them all (the cache fills) */
static void fill_n(struct kv_db *db, int round, uint64_t n, uint32_t len)
{
	for (uint64_t k = 0; k < n; k++)
		kv_put(db, k, cass_val(tag_of(k, round), len), len, NULL);
	for (uint64_t k = 0; k < n; k++)
		cass_tag(db, k);
}

static void fill(struct kv_db *db, int round)
{
	fill_n(db, round, NROWS, VLEN);
}

static struct kv_keep_info info(struct kv_db *db)
{
	struct kv_keep_info ki;

	kv_db_keep_info(db, &ki);
	return ki;
}

/* wait until the image's load ended (ok or failed): false after 30 s */
static bool load_end(struct kv_db *db)
{
	for (int i = 0; i < 3000; i++) {
		struct kv_stats st;

		kv_db_stats(db, &st);
		if (!st.image_loading)
			return true;
		usleep(10000);
	}
	return false;
}

/* every key reads want(k): the count of those that do not */
static uint64_t check_all(struct kv_db *db, char (*want)(uint64_t))
{
	uint64_t bad = 0;

	for (uint64_t k = 0; k < NROWS; k++) {
		char t = cass_tag(db, k), w = want(k);

		if (t != w && bad++ < 5)
			printf("  key %" PRIu64 ": read '%c', want '%c'\n", k, t, w);
	}
	return bad;
}

static char want_r1(uint64_t k)
{
	return tag_of(k, 1);
}

/* ---- warm ---- */

static void case_warm(void)
{
	struct kv_keep_info ki;
	struct kv_stats st;
	struct kv_db *db;
	char dir[64];
	uint64_t bad;
	bool loading, first_hit;

	huge_dir(dir, sizeof(dir));
	db = open_img(dir, IMG);
	ki = info(db);
	CHECK(ki.image_on && !ki.image_loaded, "warm: a new data dir has no image (%s)",
	      ki.image_why);
	fill(db, 1);
	kv_close(db);
	db = open_img(dir, IMG);
	kv_db_stats(db, &st);
	loading = st.image_loading;
	ki = info(db);
	CHECK(ki.image_loaded && ki.image_rows >= NROWS && !ki.image_stale,
	      "warm: the image was taken after a clean close (%" PRIu64 " rows, %" PRIu64
	      " stale; %s)",
	      ki.image_rows, ki.image_stale, ki.image_why[0] ? ki.image_why : "ok");
	cass_tag(db, NROWS - 1);
	kv_db_stats(db, &st);
	first_hit = st.cache_hits == 1 && st.cache_misses == 0;
	CHECK(first_hit,
	      "warm: the first request is a hit (%" PRIu64 " hits, %" PRIu64 " misses; "
	      "load %s at open, %zu of %zu KiB mapped, %zu on demand)",
	      st.cache_hits, st.cache_misses, loading ? "running" : "done", st.image_loaded >> 10,
	      st.image_total >> 10, st.image_demanded >> 10);
	bad = check_all(db, want_r1);
	kv_db_stats(db, &st);
	CHECK(!bad && st.cache_misses == 0 && st.cache_hits == NROWS + 1,
	      "warm: all %d rows right and hits (%" PRIu64 " wrong, %" PRIu64 " hits, %" PRIu64
	      " misses)",
	      NROWS, bad, st.cache_hits, st.cache_misses);
	CHECK(load_end(db) && !info(db).image_failed, "warm: the lazy load ended well");
	kv_close(db);
	/* twice: the cache saved after a load is an image too */
	db = open_img(dir, IMG);
	ki = info(db);
	bad = check_all(db, want_r1);
	kv_db_stats(db, &st);
	CHECK(ki.image_loaded && !bad && st.cache_misses == 0,
	      "warm: a second save and load: %" PRIu64 " rows, %" PRIu64 " wrong, %" PRIu64
	      " misses",
	      ki.image_rows, bad, st.cache_misses);
	kv_close(db);
	/* image_nowait: reads never wait for a page; misses until it is there */
	nowait = true;
	db = open_img(dir, IMG);
	ki = info(db);
	bad = check_all(db, want_r1);
	kv_db_stats(db, &st);
	CHECK(ki.image_loaded && !bad,
	      "warm, nowait: every row right while the image loads (%" PRIu64 " wrong, %" PRIu64
	      " hits, %" PRIu64 " misses: pages not there yet)",
	      bad, st.cache_hits, st.cache_misses);
	CHECK(load_end(db) && !info(db).image_failed, "warm, nowait: the lazy load ended well");
	{
		uint64_t h0 = st.cache_hits, m0 = st.cache_misses;

		bad = check_all(db, want_r1);
		kv_db_stats(db, &st);
		CHECK(!bad && st.cache_misses - m0 <= m0 && st.cache_hits - h0 >= NROWS - m0,
		      "warm, nowait: after the load the image's rows hit (%" PRIu64
		      " hits, %" PRIu64 " misses)",
		      st.cache_hits - h0, st.cache_misses - m0);
	}
	kv_close(db);
	nowait = false;
	cass_rm_dir(dir);
}

/* ---- stale ---- */

/* round 2 wrote the even keys below NROWS/2 (tables and log); the rest is round 1 */
static char want_stale(uint64_t k)
{
	return k < NROWS / 2 && !(k & 1) ? tag_of(k, 2) : tag_of(k, 1);
}

static bool copy_file(const char *from, const char *to)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", from, to);
	return system(cmd) == 0;
}

static void case_stale(void)
{
	char dir[64], dir2[64], p[128], old[128];
	struct kv_keep_info ki;
	struct kv_stats st;
	struct kv_db *db;
	uint64_t bad;

	huge_dir(dir, sizeof(dir));
	db = open_img(dir, IMG);
	fill(db, 1);
	kv_close(db); /* image 1 */
	snprintf(p, sizeof(p), "%s/" IMG, dir);
	snprintf(old, sizeof(old), "%s/old.img", dir);
	CHECK(copy_file(p, old), "stale: a copy of image 1 kept aside");
	/* an open without the image: writes after it, 4 MB of them, so some
	 * reach tables (2 MiB memtables) and the last ones only the log */
	db = open_img(dir, NULL);
	for (uint64_t k = 0; k < NROWS / 2; k += 2)
		kv_put(db, k, cass_val(tag_of(k, 2), VLEN), VLEN, NULL);
	kv_db_quiesce(db);
	kv_db_stats(db, &st);
	kv_close(db);
	CHECK(st.flushes > 0, "stale: %d writes after the save, %" PRIu64 " memtables flushed",
	      NROWS / 4, st.flushes);
	db = open_img(dir, IMG);
	ki = info(db);
	CHECK(ki.image_loaded && ki.image_stale >= NROWS / 4,
	      "stale: image 1 taken, the slots of the %d keys written since cleared (%" PRIu64
	      " newer records)",
	      NROWS / 4, ki.image_stale);
	bad = check_all(db, want_stale);
	kv_db_stats(db, &st);
	CHECK(!bad && st.cache_misses == NROWS / 4,
	      "stale: no old value returned (%" PRIu64 " wrong); the %d rewritten keys missed, "
	      "the rest hit (%" PRIu64 " hits, %" PRIu64 " misses)",
	      bad, NROWS / 4, st.cache_hits, st.cache_misses);
	kv_close(db); /* image 2 */
	/* image 1 put back: an older save of this data dir */
	CHECK(copy_file(old, p), "stale: image 1 copied over image 2");
	db = open_img(dir, NULL);
	for (uint64_t k = 1; k < NROWS / 2; k += 2)
		kv_put(db, k, cass_val(tag_of(k, 2), VLEN), VLEN, NULL);
	kv_close(db);
	db = open_img(dir, IMG);
	ki = info(db);
	CHECK(!ki.image_loaded && strstr(ki.image_why, "another data dir"),
	      "stale: an older image of this data dir is not used (%s)", ki.image_why);
	bad = 0;
	for (uint64_t k = 0; k < NROWS; k++)
		bad += cass_tag(db, k) != (k < NROWS / 2 ? tag_of(k, 2) : tag_of(k, 1));
	CHECK(!bad, "stale: every value right after it (%" PRIu64 " wrong)", bad);
	kv_close(db);
	/* another data dir's image (in this one's place) */
	huge_dir(dir2, sizeof(dir2));
	db = open_img(dir2, IMG);
	for (uint64_t k = 0; k < NROWS; k++)
		kv_put(db, k, cass_val('#', 100), 100, NULL);
	kv_close(db);
	snprintf(old, sizeof(old), "%s/" IMG, dir2);
	CHECK(copy_file(p, old), "stale: the first data dir's image copied into a second one");
	db = open_img(dir2, IMG);
	ki = info(db);
	bad = 0;
	for (uint64_t k = 0; k < NROWS; k++)
		bad += cass_tag(db, k) != '#';
	CHECK(!ki.image_loaded && !bad,
	      "stale: another data dir's image is not used (%s), %" PRIu64 " wrong", ki.image_why,
	      bad);
	kv_close(db);
	cass_rm_dir(dir2);
	cass_rm_dir(dir);
}

/* A table newer than the image with a damaged record: which keys changed
 * after the image is not known, so the image must go. */
static void case_stale_table(void)
{
	char dir[64], p[PATH_MAX + 64], pat[VLEN];
	struct kv_keep_info ki;
	struct kv_db *db;
	struct dirent *e;
	bool flipped = false;
	uint64_t bad = 0;
	DIR *d;

	huge_dir(dir, sizeof(dir));
	db = open_img(dir, IMG);
	fill(db, 1);
	kv_close(db);
	db = open_img(dir, NULL);
	for (uint64_t k = 0; k < NROWS / 2; k++)
		kv_put(db, k, cass_val(tag_of(k, 2), VLEN), VLEN, NULL);
	kv_db_quiesce(db);
	kv_close(db);
	memset(pat, tag_of(0, 2), VLEN);
	d = opendir(dir);
	while (d && (e = readdir(d)) && !flipped) {
		uint64_t g;

		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (sscanf(e->d_name, "sst-%" SCNu64 ".db", &g) == 1)
			flipped = cass_flip(p, pat, VLEN, VLEN / 2, 0, false);
	}
	if (d)
		closedir(d);
	CHECK(flipped, "stale, damaged table: a byte of a newer record flipped");
	db = open_img(dir, IMG);
	ki = info(db);
	for (uint64_t k = NROWS / 2; k < NROWS; k++)
		bad += cass_tag(db, k) != tag_of(k, 1);
	CHECK(ki.image_failed && strstr(ki.image_why, "damaged record"),
	      "stale, damaged table: the image is dropped (%s); the keys not rewritten read right "
	      "(%" PRIu64 " wrong)",
	      ki.image_why, bad);
	CHECK(!bad, "stale, damaged table: %" PRIu64 " wrong", bad);
	kv_close(db);
	cass_rm_dir(dir);
}

/* ---- damaged ---- */

/* flip one byte in the middle of the last run of n bytes c in file p (the
 * row the fill reaches last), or of the first 8-byte magic if n == 0; past
 * the snapshot's own header and table, in the region's pages */
static bool flip(const char *p, char c, size_t n, uint64_t magic)
{
	char pat[VLEN];

	if (!n)
		return cass_flip(p, &magic, 8, 0, 4096, false);
	memset(pat, c, n);
	return cass_flip(p, pat, n, n / 2, 4096, true);
}

struct reader {
	pthread_t t;
	struct kv_db *db;
	_Atomic bool *stop;
	uint64_t reads, bad;
	int seed;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(r->seed + 1);

	while (!atomic_load(r->stop)) {
		uint64_t k = kv_rand(&rng) % NROWS;

		r->bad += cass_tag(r->db, k) != tag_of(k, 1);
		r->reads++;
	}
	return NULL;
}

/* an open that must not use the image, and reads every row right */
static void refused(const char *dir)
{
	struct kv_db *db = open_img(dir, IMG);
	struct kv_keep_info ki = info(db);
	uint64_t bad = check_all(db, want_r1);

	CHECK(!ki.image_loaded && !bad, "damaged: the image is not used (%s), %" PRIu64 " wrong",
	      ki.image_why, bad);
	kv_close(db);
}

static void case_damaged(void)
{
	char dir[64], p[128];
	struct kv_keep_info ki;
	struct kv_stats st;
	struct reader rd[3];
	_Atomic bool stop = false;
	struct kv_db *db;
	uint64_t bad, reads = 0;
	int fd;

	huge_dir(dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/" IMG, dir);
	db = open_img(dir, IMG);
	fill(db, 1);
	kv_close(db);
	{
		char good[128];

		snprintf(good, sizeof(good), "%s/good.img", dir);
		copy_file(p, good);
		/* a row's page: the lazy load fails when it gets there */
		CHECK(flip(p, tag_of(NROWS - 1, 1), VLEN, 0),
		      "damaged: a byte of a row flipped in the image");
		db = open_img(dir, IMG);
		for (int i = 0; i < 3; i++) {
			rd[i] = (struct reader){ .db = db, .stop = &stop, .seed = i };
			pthread_create(&rd[i].t, NULL, reader_main, &rd[i]);
		}
		CHECK(load_end(db), "damaged: the lazy load ended");
		usleep(100000);
		atomic_store(&stop, true);
		bad = 0;
		for (int i = 0; i < 3; i++) {
			pthread_join(rd[i].t, NULL);
			bad += rd[i].bad;
			reads += rd[i].reads;
		}
		ki = info(db);
		/* the fill may get to the page before the index is checked (a
		 * loaded machine): then the index check fails with the load's
		 * own error, the checksum, whether or not the library's thread
		 * has ended the failed load yet -- hpr_fault_in returns the
		 * load's error until hpr_load_wait, and load_image reports the
		 * error hpr_load_wait gives (it said "being loaded lazily" when
		 * the thread had got there first: 2 failures in 17 runs) */
		CHECK((ki.image_loaded && ki.image_failed &&
		       strstr(ki.image_why, "lazy load failed")) ||
			      (!ki.image_loaded && strstr(ki.image_why, "checksum")),
		      "damaged: the load %s, and the cache is cold (%s)",
		      ki.image_loaded ? "began, then failed mid-way" :
					"failed before kv_open returned",
		      ki.image_why);
		CHECK(!bad,
		      "damaged: %" PRIu64 " reads by 3 threads during and after the failed "
		      "load, %" PRIu64 " wrong",
		      reads, bad);
		bad = check_all(db, want_r1);
		kv_db_stats(db, &st);
		CHECK(!bad,
		      "damaged: every row right after it (%" PRIu64 " wrong, %" PRIu64
		      " hits, %" PRIu64 " misses)",
		      bad, st.cache_hits, st.cache_misses);
		kv_put(db, 5, cass_val('!', VLEN), VLEN, NULL);
		CHECK(cass_tag(db, 5) == '!' && cass_tag(db, 5) == '!',
		      "damaged: the cold cache takes writes and reads");
		kv_db_stats(db, &st);
		CHECK(st.cache_hits > 0, "damaged: and hits (%" PRIu64 " hits)", st.cache_hits);
		kv_put(db, 5, cass_val(tag_of(5, 1), VLEN), VLEN, NULL);
		kv_close(db); /* saves the cold cache: a good image again */
		db = open_img(dir, IMG);
		ki = info(db);
		bad = check_all(db, want_r1);
		CHECK(ki.image_loaded && !bad,
		      "damaged: the next close saved a good image (%" PRIu64 " rows, %" PRIu64
		      " wrong)",
		      ki.image_rows, bad);
		kv_close(db);
		copy_file(good, p);
	}
	/* the index page (the cache header's magic is in it): refused at open */
	CHECK(flip(p, 0, 0, KV_KEPT_RC_MAGIC), "damaged: a byte of the index page flipped");
	refused(dir);
	/* truncated: hpr_load refuses it */
	fd = open(p, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0 && ftruncate(fd, 8 << 20) == 0, "damaged: the image truncated to 8 MiB");
	if (fd >= 0)
		close(fd);
	refused(dir);
	cass_rm_dir(dir);
}

/* ---- killed during the fill ---- */

struct ack {
	uint64_t key, seq;
	char tag;
	bool loading; /* the image's load was running when it was acknowledged */
};

static void case_killed(void)
{
	static struct ack shadow[NBIG];
	char dir[64], c = 0;
	struct kv_keep_info ki;
	struct ack a;
	struct kv_db *db;
	uint64_t bad = 0, n = 0;
	int pfd[2];
	pid_t pid;
	bool loading = false;
	int st;

	huge_dir(dir, sizeof(dir));
	db = open_img2(dir, IMG, true);
	fill_n(db, 1, NBIG, VBIG);
	kv_close(db);
	for (uint64_t k = 0; k < NBIG; k++)
		shadow[k] = (struct ack){ k, 1, tag_of(k, 1), false };
	if (pipe(pfd))
		exit(1);
	pid = fork();
	if (pid == 0) {
		struct kv_stats s;
		uint64_t rng = 777;

		close(pfd[0]);
		hold_loading = true;
		db = open_img2(dir, IMG, true);
		kv_db_stats(db, &s);
		c = s.image_loading ? 'L' : 'D';
		if (write(pfd[1], &c, 1) != 1)
			_exit(1);
		for (;;) { /* reads and writes until the kill */
			uint64_t r = kv_rand(&rng);

			kv_db_stats(db, &s);
			a.loading = s.image_loading;
			a.key = r % NBIG;
			a.tag = (char)('A' + (r >> 20) % 26);
			cass_tag(db, (r >> 32) % NBIG);
			if (!kv_put(db, a.key, cass_val(a.tag, 1000), 1000, &a.seq) &&
			    write(pfd[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
				_exit(1);
		}
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1)
		c = 0;
	/* 10 acknowledged writes, then the kill, then the rest */
	for (int kill_now = 1; kill_now >= 0; kill_now--) {
		while ((!kill_now || n < 10) && read(pfd[0], &a, sizeof(a)) == (ssize_t)sizeof(a)) {
			if (a.seq > shadow[a.key].seq)
				shadow[a.key] = a;
			n++;
		}
		if (kill_now) {
			loading = a.loading; /* at the last write before the kill */
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		}
	}
	close(pfd[0]);
	CHECK(c == 'L' && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && n >= 10 && loading,
	      "killed: the store was killed -9 while its image loaded, after %" PRIu64
	      " acknowledged writes (the load running at open: %s; at the last write: %s)",
	      n, c == 'L' ? "yes" : "no", loading ? "yes" : "no");
	db = open_img2(dir, IMG, true);
	ki = info(db);
	for (uint64_t k = 0; k < NBIG; k++) {
		static char buf[1 << 16];
		uint32_t len = 0;
		uint64_t seq = 0;
		int rc = kv_get(db, k, buf, sizeof(buf), &len, &seq);

		if ((rc || seq < shadow[k].seq ||
		     (seq == shadow[k].seq && buf[0] != shadow[k].tag)) &&
		    bad++ < 5)
			printf("  key %" PRIu64 ": acknowledged seq %" PRIu64
			       " '%c', read seq %" PRIu64 " '%c' (%d)\n",
			       k, shadow[k].seq, shadow[k].tag, seq, len ? buf[0] : '-', rc);
	}
	CHECK(ki.image_loaded && ki.image_stale >= (n ? 1 : 0) && !bad,
	      "killed: the next open took the image (%" PRIu64 " rows, %" PRIu64
	      " newer records cleared) and every acknowledged write reads back (%" PRIu64 " wrong)",
	      ki.image_rows, ki.image_stale, bad);
	kv_close(db);
	cass_rm_dir(dir);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	case_warm();
	case_stale();
	case_stale_table();
	case_damaged();
	printf("-- the same with image_nowait (reads miss instead of waiting for a page):\n");
	nowait = true;
	case_damaged();
	nowait = false;
	case_killed();
	printf("%s\n", cass_fails ? "FAILED" : "passed");
	return cass_fails ? 1 : 0;
}
