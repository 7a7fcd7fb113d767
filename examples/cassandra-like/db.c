/* SPDX-License-Identifier: MIT */
/*
 * The database: the data dir check, open (tables, commit log replay),
 * close, put, get, the memtable switch, and stats. The tables, the flusher
 * and the compactor are in lsm.c; struct kv_db is in db.h.
 */
#define _GNU_SOURCE
#include "db.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define TMPFS_MAGIC_ 0x01021994

void kv__note(struct kv_db *db, const char *fmt, ...)
{
	va_list ap;

	if (db->o.quiet)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "kv[%s]: ", db->dir);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static pthread_mutex_t *stripe(struct kv_db *db, uint64_t key)
{
	/* same hash and mask as the row cache's buckets: see rowcache.c */
	return &db->stripes[kv_hash64(key) & (NSTRIPES - 1)];
}

/* ---- the data directory ---- */

static const char *fs_name(long t)
{
	switch (t) {
	case 0xEF53:
		return "ext4";
	case 0x58465342:
		return "xfs";
	case 0x9123683E:
		return "btrfs";
	case 0x794c7630:
		return "overlayfs";
	case 0x958458f6:
		return "hugetlbfs";
	}
	return "a disk file system";
}

/* huge= of the tmpfs holding dir, from /proc/self/mountinfo */
static void tmpfs_huge(const char *dir, char *out, size_t n)
{
	char real[PATH_MAX], line[4096];
	size_t best = 0;
	FILE *f;

	snprintf(out, n, "never");
	if (!realpath(dir, real) || !(f = fopen("/proc/self/mountinfo", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX], *sep, *opt;
		size_t l;

		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		l = strlen(mp);
		if (strncmp(real, mp, l) || (real[l] != '/' && real[l] && l > 1) || l < best)
			continue;
		best = l;
		snprintf(out, n, "never");
		sep = strstr(line, " - ");
		if (sep && (opt = strstr(sep, "huge="))) {
			opt += 5;
			snprintf(out, n, "%.*s", (int)strcspn(opt, ", \n"), opt);
		}
	}
	fclose(f);
}

int kv_check_dir(const char *dir, bool allow_disk, char *desc, size_t dlen)
{
	struct statfs sf;
	struct stat st;
	char huge[32];

	if (!dir || !*dir)
		return kv_fail(-EINVAL, "no data directory given: pass --data DIR, a "
					"directory on a tmpfs mounted huge=always");
	if (stat(dir, &st))
		return kv_fail(-errno,
			       "data directory %s: %s: create it on a tmpfs "
			       "mounted huge=always (mkdir -p %s && mount -t tmpfs "
			       "-o huge=always,size=8g none %s)",
			       dir, strerror(errno), dir, dir);
	if (!S_ISDIR(st.st_mode))
		return kv_fail(-ENOTDIR, "data directory %s is not a directory", dir);
	if (statfs(dir, &sf))
		return kv_fail(-errno, "statfs %s: %s", dir, strerror(errno));
	if (sf.f_type != TMPFS_MAGIC_) {
		snprintf(desc, dlen, "%s (not tmpfs)", fs_name((long)sf.f_type));
		if (!allow_disk)
			return kv_fail(-EXDEV,
				       "data directory %s is on %s, not tmpfs: this engine "
				       "keeps its tables in memory on a tmpfs huge= mount "
				       "(mount -t tmpfs -o huge=always,size=8g none %s), or "
				       "pass --allow-disk to run on disk anyway",
				       dir, fs_name((long)sf.f_type), dir);
		return 0;
	}
	tmpfs_huge(dir, huge, sizeof(huge));
	snprintf(desc, dlen, "tmpfs huge=%s", huge);
	return 0;
}

/* ---- open / close ---- */

struct replay_ctx {
	struct kv_db *db;
	uint64_t records;
};

static int replay_rec(const struct kv_log_rec *r, void *arg)
{
	struct replay_ctx *c = arg;
	struct kv_db *db = c->db;
	struct kv_sst *t;
	int rc;

	if (db->img_check)
		kv__image_stale_key(db, r->key, r->seq);
	if (!kv_mt_has_room(db->active, r->len)) {
		/* replay overflowed a memtable: flush it right here. Its log
		 * segments stay until the memtable holding their tail is
		 * flushed; replay skips what the tables already have. */
		rc = kv__flush_mt(db, db->active, &t);
		if (!rc)
			rc = kv__add_table_front(db, t);
		if (!rc)
			rc = kv_mt_reset(db->active);
		if (rc)
			return rc;
	}
	kv_mt_insert(db->active, r->key, r->seq, r->val, r->len, r->crc);
	c->records++;
	return 0;
}

void kv_close(struct kv_db *db)
{
	if (!db)
		return;
	if (db->threads_on) {
		pthread_mutex_lock(&db->bg_mu);
		db->stop = true;
		pthread_cond_broadcast(&db->bg_cv);
		pthread_mutex_unlock(&db->bg_mu);
		pthread_join(db->flusher, NULL);
		pthread_join(db->compactor, NULL);
	}
	/* The memtables are not flushed: their records are in the commit
	 * log, and the next open replays them (so every open tests replay). */
	if (db->log_open) {
		uint64_t seq = kv_log_durable(&db->log);

		kv_log_close(&db->log);
		/* the row cache image: saved with the log's position, unless a
		 * write failed (then nothing is saved, and the old image is
		 * judged against the log at the next open as always) */
		kv__image_close(db, db->log.err ? 0 : seq);
	} else {
		kv__image_close(db, 0);
	}
	for (size_t i = 0; i < db->ntables; i++)
		kv_sst_close(db->tables[i], false);
	free(db->tables);
	if (db->cold) {
		kv_rc_destroy(db->cold);
		free(db->cold);
	}
	if (db->cache_on)
		kv_rc_destroy(&db->cache);
	kv_mem_destroy(&db->mtmem);
	if (db->lockfd >= 0)
		close(db->lockfd);
	if (db->loglockfd >= 0)
		close(db->loglockfd);
	free(db);
}

static int lock_dir(const char *dir, int *fd)
{
	char p[PATH_MAX + 16];

	snprintf(p, sizeof(p), "%s/LOCK", dir);
	*fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0 || flock(*fd, LOCK_EX | LOCK_NB))
		return kv_fail(-errno, "cannot lock %s: %s%s", p, strerror(errno),
			       errno == EWOULDBLOCK ? " (another process has this "
						      "directory open)" :
						      "");
	return 0;
}

/*
 * kv_open, step 1b: where the commit log lives. A data dir whose log went
 * elsewhere says where in DIR/LOGDIR, so that a reopen with another log
 * dir (or none) is refused instead of silently missing the log's writes.
 */
static int open_log_dir(struct kv_db *db)
{
	char marker[PATH_MAX + 16], prev[PATH_MAX] = "", desc[128];
	struct stat st;
	FILE *f;
	int rc;

	snprintf(db->logdir, sizeof(db->logdir), "%s", db->dir);
	if (db->o.log_dir) {
		if (stat(db->o.log_dir, &st))
			return kv_fail(-errno,
				       "commit log directory %s: %s: create it, on a "
				       "disk for writes that survive a host crash",
				       db->o.log_dir, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return kv_fail(-ENOTDIR, "commit log directory %s is not a directory",
				       db->o.log_dir);
		if (!realpath(db->o.log_dir, db->logdir))
			return kv_fail(-errno, "%s: %s", db->o.log_dir, strerror(errno));
	}
	snprintf(marker, sizeof(marker), "%s/LOGDIR", db->dir);
	if ((f = fopen(marker, "re"))) {
		if (!fgets(prev, sizeof(prev), f))
			prev[0] = 0;
		fclose(f);
		prev[strcspn(prev, "\n")] = 0;
	}
	if (prev[0] && strcmp(prev, db->logdir))
		return kv_fail(-EINVAL,
			       "the commit log of %s is in %s (says %s/LOGDIR): open "
			       "it with that log dir (--log-dir)",
			       db->dir, prev, db->dir);
	if (!strcmp(db->logdir, db->dir))
		return 0;
	if (!prev[0] && kv_log_segments(db->dir))
		return kv_fail(-EINVAL,
			       "the commit log of %s is in the data dir itself: open it "
			       "without --log-dir (or move its commitlog-*.log files to %s)",
			       db->dir, db->logdir);
	rc = lock_dir(db->logdir, &db->loglockfd);
	if (rc)
		return rc;
	if (!prev[0]) {
		int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		rc = fd < 0 ? -errno : kv_write_all(fd, db->logdir, strlen(db->logdir));
		if (!rc && fsync(fd))
			rc = -errno;
		if (fd >= 0)
			close(fd);
		if (!rc)
			rc = kv_fsync_dir(db->dir);
		if (rc)
			return kv_fail(rc, "cannot write %s: %s", marker, strerror(-rc));
	}
	kv_check_dir(db->logdir, true, desc, sizeof(desc));
	kv__note(db, "commit log in %s, on %s", db->logdir, desc);
	return 0;
}

/* kv_open, step 1: the data dir (checked, resolved) and its lock */
static int open_dir(struct kv_db *db)
{
	int rc;

	rc = kv_check_dir(db->o.data_dir, db->o.allow_disk, db->mount, sizeof(db->mount));
	if (rc)
		return rc;
	if (!realpath(db->o.data_dir, db->dir))
		snprintf(db->dir, sizeof(db->dir), "%s", db->o.data_dir);
	if (strstr(db->mount, "not tmpfs"))
		kv__note(db, "warning: data directory is on %s: tables and log go to disk",
			 db->mount);
	rc = lock_dir(db->dir, &db->lockfd);
	return rc ? rc : open_log_dir(db);
}

static void init_locks(struct kv_db *db)
{
	pthread_rwlockattr_t ra;

	pthread_rwlockattr_init(&ra);
	/* glibc's default lets a stream of readers starve the flusher */
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&db->lsm, &ra);
	pthread_mutex_init(&db->switch_mu, NULL);
	pthread_mutex_init(&db->bg_mu, NULL);
	pthread_cond_init(&db->bg_cv, NULL);
	for (int i = 0; i < NSTRIPES; i++)
		pthread_mutex_init(&db->stripes[i], NULL);
}

/* kv_open, step 2 with keep: the memtable region, kept, laid out as
 * [header: one huge page][half 0][half 1]. A region that is there and was
 * kept for this data dir is checked against the log in step 3; anything
 * else starts empty. */
static int open_kept_memtables(struct kv_db *db, const char *rdir)
{
	const size_t hdr = 2u << 20;
	size_t half = db->o.memtable_bytes;
	uint64_t geo[4] = { half, hdr, 0, 0 };
	int rc;

	rc = kv_mem_create_kept(&db->mtmem, "memtable", hdr + 2 * half, rdir);
	if (rc)
		return rc;
	/* attached: map it all now (MADV_POPULATE_READ, nothing zeroed); a
	 * new one: its header here, the halves when they take writes */
	rc = kv_mem_fault(&db->mtmem, 0, db->mtmem.attached ? db->mtmem.size : hdr);
	if (rc)
		return rc;
	db->mthdr = (struct kv_kept_hdr *)db->mtmem.base;
	kv_mt_init(&db->mt[0], &db->mtmem, hdr, half);
	kv_mt_init(&db->mt[1], &db->mtmem, hdr + half, half);
	db->mt[1].idx = 1;
	db->keep.mt_attached = db->mtmem.attached;
	if (db->mtmem.attached &&
	    kv_kept_match(db->mthdr, KV_KEPT_MT_MAGIC, db->mtmem.size, db->keep_id, geo,
			  db->keep.mt_why, sizeof(db->keep.mt_why))) {
		db->mt_check = true; /* step 3 */
		return 0;
	}
	db->mthdr->magic = 0;
	db->active = &db->mt[0];
	rc = kv_mt_reset(db->active);
	if (!rc)
		kv_kept_stamp(db->mthdr, KV_KEPT_MT_MAGIC, db->mtmem.size, db->keep_id, geo,
			      KV_MT_STATE(0, 0, 0));
	return rc;
}

/* kv_open, step 2: the row cache (prefaulting in the background from now
 * on) and the memtable region, its first half faulted in */
static int open_memory(struct kv_db *db)
{
	const struct kv_opts *o = &db->o;
	const char *rdir = o->region_dir ? o->region_dir : db->dir;
	struct kv_rc_image img = { .fd = -1, .nowait = o->image_nowait };
	int rc;

	if (o->keep && (o->cache_backing != KV_MEM_SHMEM || o->memtable_backing != KV_MEM_SHMEM))
		return kv_fail(-EINVAL, "kept regions need the row cache and the memtables on "
					"shmem files in a tmpfs huge= dir (--cache-backend shmem "
					"--memtable-backend shmem)");
	/* with keep, the data dir's id the kept regions must carry; without,
	 * no region kept before is valid any more */
	rc = kv_keep_id(db->dir, o->keep, &db->keep_id);
	if (rc)
		return rc;
	db->keep.on = o->keep;

	/* row cache first, and start prefaulting it: it warms up while the
	 * tables are opened, the log is replayed and requests arrive */
	if (o->cache_image)
		kv__image_find(db, &img, &db->img_seq);
	db->img_t0 = kv_now_ns();
	rc = kv_rc_init(&db->cache, o->cache_bytes, o->row_hint ? o->row_hint : 2048, NSTRIPES,
			o->cache_backing, rdir, o->keep ? db->keep_id : 0, &db->keep.cache_warm,
			o->cache_image ? &img : NULL);
	if (img.fd >= 0)
		close(img.fd); /* a lazy load has its own copy */
	if (rc)
		return rc;
	db->cache_on = true;
	atomic_store(&db->rc, &db->cache);
	db->keep.image_on = o->cache_image != NULL;
	db->keep.image_loaded = db->img_check = img.loaded;
	if (img.loaded) {
		db->keep.cache_warm = false; /* warm from the image, not kept */
		db->keep.image_rows = db->cache.kept_rows;
		db->keep.image_seq = db->img_seq;
	}
	snprintf(db->keep.image_why, sizeof(db->keep.image_why), "%s", img.why);
	db->keep.cache_attached = db->cache.mem.attached;
	db->keep.cache_rows = db->cache.kept_rows;
	db->keep.cache_dropped = db->cache.kept_dropped;
	snprintf(db->keep.cache_why, sizeof(db->keep.cache_why), "%s", db->cache.cold_why);
	/* an image loading: its fill is the prefault (the rest follows it) */
	rc = img.loaded ? 0 : kv_mem_prefault_start(&db->cache.mem);
	if (rc)
		return kv_fail(rc, "cannot start the cache prefault: %s", hpr_strerror(rc));

	/* each half whole huge pages: releasing one half never touches a
	 * huge page the other half still uses */
	db->o.memtable_bytes = (o->memtable_bytes + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	if (o->keep)
		return open_kept_memtables(db, rdir);
	rc = kv_mem_create(&db->mtmem, "memtable", 2 * db->o.memtable_bytes, o->memtable_backing,
			   rdir);
	if (rc)
		return rc;
	kv_mt_init(&db->mt[0], &db->mtmem, 0, db->mtmem.size / 2);
	kv_mt_init(&db->mt[1], &db->mtmem, db->mtmem.size / 2, db->mtmem.size / 2);
	db->mt[1].idx = 1;
	db->active = &db->mt[0];
	return kv_mt_reset(db->active);
}

/* kv_open, step 3: the tables, the commit log replayed over them into the
 * memtable, and a new log segment */
static int open_tables_and_log(struct kv_db *db)
{
	struct replay_ctx rctx = { .db = db };
	uint64_t max_gen, max_seq = 0, torn, t0;
	int rc;

	rc = kv__load_tables(db);
	if (rc)
		return rc;
	for (size_t i = 0; i < db->ntables; i++)
		if (db->tables[i]->f.max_seq > max_seq)
			max_seq = db->tables[i]->f.max_seq;
	if (db->img_check) {
		/* the image's rows of keys written since it was saved go: from
		 * the tables here, from the log as it is replayed (the kept
		 * memtables' reconciliation reads it apart: here too) */
		rc = kv__image_stale(db, db->mt_check, max_seq);
		if (rc)
			return rc;
	}

	t0 = kv_now_ns();
	if (db->mt_check) {
		/* kept memtables: checked, and reconciled with the log */
		uint64_t tmax = max_seq;

		rc = kv__mt_recover(db, tmax, &max_gen, &max_seq, &torn);
		if (!rc) {
			db->keep.mt_warm = true;
			kv__note(db,
				 "kept memtables: %" PRIu64 " records kept, %" PRIu64
				 " not in the log discarded, %" PRIu64 " replayed from the log%s "
				 "in %.1f ms",
				 db->keep.mt_kept, db->keep.mt_discarded, db->keep.mt_replayed,
				 db->keep.imm_recovered ? ", an immutable memtable to flush" : "",
				 (double)(kv_now_ns() - t0) / 1e6);
			goto log_open;
		}
		if (rc != -ESTALE)
			return rc;
		/* start cold: both halves empty, the log replayed */
		kv__note(db, "kept memtables not used (%s): replaying the commit log",
			 db->keep.mt_why);
		db->imm = NULL;
		db->imm_busy = false;
		db->keep.mt_kept = db->keep.mt_discarded = db->keep.mt_replayed = 0;
		db->keep.imm_recovered = false;
		db->mthdr->magic = 0;
		db->active = &db->mt[0];
		rc = kv_mt_reset(db->active);
		if (rc)
			return rc;
		{
			uint64_t geo[4] = { db->mt[0].size, db->mt[0].off, 0, 0 };

			kv_kept_stamp(db->mthdr, KV_KEPT_MT_MAGIC, db->mtmem.size, db->keep_id, geo,
				      KV_MT_STATE(0, 0, 0));
		}
		max_seq = tmax;
	}
	rc = kv_log_replay(db->logdir, max_seq, replay_rec, &rctx, &max_gen, &max_seq, &torn);
	if (rc)
		return rc;
	if (rctx.records || torn)
		kv__note(db, "commit log replay: %" PRIu64 " records in %.1f ms%s", rctx.records,
			 (double)(kv_now_ns() - t0) / 1e6,
			 torn ? " (a torn tail was dropped: writes never acknowledged)" : "");
log_open:
	rc = kv_log_open(&db->log, db->logdir, max_gen + 1, max_seq, db->o.log_hook,
			 db->o.log_hook_arg);
	if (rc)
		return rc;
	db->log_open = true;
	return 0;
}

/* kv_open, step 4: the flusher and the compactor */
static int start_threads(struct kv_db *db)
{
	db->compact_wanted = true;
	if (pthread_create(&db->flusher, NULL, kv__flusher_main, db))
		return kv_fail(-EAGAIN, "cannot start the flush thread");
	if (pthread_create(&db->compactor, NULL, kv__compactor_main, db)) {
		/* the flusher is running: stop it */
		pthread_mutex_lock(&db->bg_mu);
		db->stop = true;
		pthread_cond_broadcast(&db->bg_cv);
		pthread_mutex_unlock(&db->bg_mu);
		pthread_join(db->flusher, NULL);
		return kv_fail(-EAGAIN, "cannot start the compaction thread");
	}
	db->threads_on = true;
	return 0;
}

int kv_open(const struct kv_opts *o, struct kv_db **out)
{
	struct kv_db *db;
	int rc;

	*out = NULL;
	db = calloc(1, sizeof(*db));
	if (!db)
		return kv_fail(-ENOMEM, "out of memory");
	db->o = *o;
	db->lockfd = db->loglockfd = -1;
	init_locks(db);
	rc = open_dir(db);
	if (!rc)
		rc = open_memory(db);
	if (!rc)
		rc = open_tables_and_log(db);
	if (!rc)
		rc = start_threads(db);
	if (!rc)
		rc = kv__image_start(db);
	if (rc) {
		/* kv_close() may overwrite the message: keep it */
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", kv_errmsg(rc));
		kv_close(db);
		return kv_fail(rc, "%s", msg);
	}
	*out = db;
	return 0;
}

/* ---- put / get ---- */

/* Wait for the previous immutable memtable's flush (a write stall).
 * Caller holds switch_mu. */
static int wait_flush(struct kv_db *db)
{
	uint64_t t0 = 0;
	int rc;

	pthread_mutex_lock(&db->bg_mu);
	while (db->imm_busy && !db->bg_err && !db->stop) {
		if (!t0) {
			t0 = kv_now_ns();
			atomic_fetch_add(&db->stalls, 1);
		}
		pthread_cond_wait(&db->bg_cv, &db->bg_mu);
	}
	rc = db->bg_err ? db->bg_err : db->stop ? -ESHUTDOWN : 0;
	if (rc) /* the flusher's message, not just strerror */
		kv_fail(rc, "%s", db->bg_err ? db->bg_msg : kv_errmsg(rc));
	pthread_mutex_unlock(&db->bg_mu);
	if (t0)
		atomic_fetch_add(&db->stall_ns, kv_now_ns() - t0);
	return rc;
}

static void set_sealed(struct kv_memtable *mt, bool sealed)
{
	pthread_mutex_lock(&mt->mu);
	mt->sealed = sealed;
	pthread_mutex_unlock(&mt->mu);
}

/*
 * The active memtable is full: make it immutable and start a new one.
 * Stalls while the previous immutable memtable is still being flushed.
 *
 * Only writers wait here. The slow steps -- faulting the next arena in
 * (hpr_fault_in) and rotating the log, which waits for the batch in
 * flight's fdatasync -- run under switch_mu alone; sealing the old
 * memtable keeps appends out of the rotation instead of the lsm lock, which
 * is taken for writing only to swap the two pointers.
 */
static int switch_memtable(struct kv_db *db)
{
	struct kv_memtable *old, *next;
	bool switched;
	int rc;

	pthread_mutex_lock(&db->switch_mu);
	old = db->active; /* only a switch changes it, and we hold switch_mu */
	pthread_mutex_lock(&old->mu);
	switched = kv_mt_has_room(old, 1 << 16); /* someone switched already */
	pthread_mutex_unlock(&old->mu);
	if (switched) {
		pthread_mutex_unlock(&db->switch_mu);
		return 0;
	}
	rc = wait_flush(db);
	if (rc)
		goto out;
	/* the flush is done and imm is NULL: no reader can reach next */
	next = old == &db->mt[0] ? &db->mt[1] : &db->mt[0];
	rc = kv_mt_reset(next); /* hpr_fault_in of the arena */
	if (rc)
		goto out;
	/* appenders that find old sealed come here and wait for switch_mu;
	 * none is left in the log when rotate starts */
	set_sealed(old, true);
	rc = kv_log_rotate(&db->log, &old->last_log_gen);
	if (rc) {
		set_sealed(old, false);
		goto out;
	}
	/* keep: the kept state says so before anyone writes to next */
	if (db->mthdr)
		atomic_store(&db->mthdr->state, KV_MT_STATE(next->idx, 1, old->last_log_gen));
	pthread_rwlock_wrlock(&db->lsm);
	db->imm = old;
	db->active = next;
	pthread_rwlock_unlock(&db->lsm);
	pthread_mutex_lock(&db->bg_mu);
	db->imm_busy = true;
	pthread_cond_broadcast(&db->bg_cv);
	pthread_mutex_unlock(&db->bg_mu);
out:
	pthread_mutex_unlock(&db->switch_mu);
	return rc;
}

int kv_put(struct kv_db *db, uint64_t key, const void *val, uint32_t len, uint64_t *seqp)
{
	pthread_mutex_t *s = stripe(db, key);
	uint64_t seq = 0;
	uint32_t crc;
	int rc;

	if (len > (1u << 16))
		return kv_fail(-EMSGSIZE, "value of %u bytes: at most 64 KiB", len);
	pthread_mutex_lock(s);
	for (;;) {
		struct kv_memtable *mt;

		pthread_rwlock_rdlock(&db->lsm);
		mt = db->active;
		pthread_mutex_lock(&mt->mu);
		if (!mt->sealed && kv_mt_has_room(mt, len)) {
			/* Cassandra's row cache invalidates on write. Before the
			 * append, not after: the syncer may write the record at
			 * once, and a process killed between that and the
			 * invalidation would leave a kept cache (restart.c) with
			 * a row older than the log. No read refills it meanwhile:
			 * a miss fills under the row lock we hold, and after it
			 * skips this version until it is durable (kv_get). */
			kv_rc_invalidate(kv__cache(db), key);
			/* log and memtable in one critical section: seq order is
			 * memtable order, and a switch (wrlock) sees neither half */
			rc = kv_log_append(&db->log, key, val, len, &seq, &crc);
			if (!rc)
				kv_mt_insert(mt, key, seq, val, len, crc);
			pthread_mutex_unlock(&mt->mu);
			pthread_rwlock_unlock(&db->lsm);
			break;
		}
		pthread_mutex_unlock(&mt->mu);
		pthread_rwlock_unlock(&db->lsm);
		/* without the row lock: reads of this stripe's keys that miss
		 * the cache must not wait for a switch (a flush, a fault-in) */
		pthread_mutex_unlock(s);
		rc = switch_memtable(db);
		pthread_mutex_lock(s);
		if (rc)
			break;
	}
	pthread_mutex_unlock(s);
	if (rc)
		return rc;
	/* group commit: wait, without any lock, for our batch's fdatasync */
	rc = kv_log_wait(&db->log, seq);
	if (rc)
		return kv_fail(rc, "%s", kv_errmsg(rc));
	atomic_fetch_add_explicit(&db->puts, 1, memory_order_relaxed);
	if (seqp)
		*seqp = seq;
	return 0;
}

/* what a get copies out: the whole value (kv_get), or bytes [off, off +
 * cap) of it (kv_get_part) */
struct get_req {
	bool part, fill;
	uint32_t off, cap;
	void *buf;
	uint32_t len, vlen; /* out: bytes copied, the value's length */
	uint64_t seq;
};

/* the request's bytes of val (vlen long): 0, -ENOBUFS or -ERANGE */
static int copy_out(struct get_req *q, const void *val, uint32_t vlen)
{
	q->vlen = vlen;
	if (!q->part) {
		q->len = vlen;
		if (vlen > q->cap)
			return -ENOBUFS;
		memcpy(q->buf, val, vlen);
		return 0;
	}
	if (q->off > vlen)
		return -ERANGE;
	q->len = vlen - q->off < q->cap ? vlen - q->off : q->cap;
	memcpy(q->buf, (const char *)val + q->off, q->len);
	return 0;
}

static int get(struct kv_db *db, uint64_t key, struct get_req *q)
{
	pthread_mutex_t *s = stripe(db, key);
	const struct kv_mt_node *n = NULL;
	const void *val = NULL;
	uint64_t seq = 0, durable;
	uint32_t vlen = 0;
	bool newer = false;
	/* a part's miss fills the cache from a copy of the whole value here */
	char small[4096], *whole = NULL;
	int rc = -ENOENT;

	atomic_fetch_add_explicit(&db->gets, 1, memory_order_relaxed);
	/* the row cache first, with no lock (rowcache.c): a hot key's reads
	 * never queue behind a writer of its stripe. A put invalidates the
	 * cache before it returns, so a hit is never older than an
	 * acknowledged write. */
	if (q->part ? kv_rc_get_part(kv__cache(db), key, q->off, q->buf, q->cap, &q->len, &q->vlen,
				     &q->seq) :
		      kv_rc_get(kv__cache(db), key, q->buf, q->cap, &q->len, &q->seq)) {
		if (!q->part)
			q->vlen = q->len;
		return q->off > q->vlen ? -ERANGE : 0;
	}
	pthread_mutex_lock(s);
	/* No read sees a write before it is durable: versions newer than
	 * the log's durable point are skipped. What is found under such a
	 * version is not cached: the put invalidated the cache when it applied
	 * the newer version, and the older one must not come back into it. */
	durable = kv_log_durable(&db->log);
	pthread_rwlock_rdlock(&db->lsm);
	n = kv_mt_get(db->active, key, durable, &newer);
	if (!n && db->imm)
		n = kv_mt_get(db->imm, key, durable, &newer);
	if (n) {
		val = kv_mt_value(n);
		vlen = n->vlen;
		seq = n->seq;
	} else {
		int err = 0;

		for (size_t i = 0; i < db->ntables && !err; i++) {
			const struct kv_sst_rec *r = kv_sst_get(db->tables[i], key, &err);

			if (r) {
				val = kv_sst_value(r);
				vlen = r->vlen;
				seq = r->seq;
				break;
			}
		}
		if (err)
			rc = err;
	}
	if (val) {
		rc = copy_out(q, val, vlen);
		q->seq = seq;
		if (!rc && q->part && q->fill && !newer) {
			whole = vlen <= sizeof(small) ? small : malloc(vlen);
			if (whole)
				memcpy(whole, val, vlen);
		}
	}
	pthread_rwlock_unlock(&db->lsm);
	if (!rc && !newer && q->fill && (!q->part || whole))
		kv_rc_put(kv__cache(db), key, seq, q->part ? whole : q->buf, vlen);
	pthread_mutex_unlock(s);
	if (whole != small)
		free(whole);
	return rc;
}

static int get_whole(struct kv_db *db, uint64_t key, void *buf, uint32_t cap, uint32_t *len,
		     uint64_t *seqp, bool fill)
{
	struct get_req q = { .fill = fill, .cap = cap, .buf = buf };
	int rc = get(db, key, &q);

	if (!rc || rc == -ENOBUFS)
		*len = q.len;
	if (!rc && seqp)
		*seqp = q.seq;
	return rc;
}

int kv_get(struct kv_db *db, uint64_t key, void *buf, uint32_t cap, uint32_t *len, uint64_t *seqp)
{
	return get_whole(db, key, buf, cap, len, seqp, true);
}

int kv_get_nofill(struct kv_db *db, uint64_t key, void *buf, uint32_t cap, uint32_t *len,
		  uint64_t *seqp)
{
	return get_whole(db, key, buf, cap, len, seqp, false);
}

int kv_get_part(struct kv_db *db, uint64_t key, uint32_t off, void *buf, uint32_t cap,
		uint32_t *len, uint32_t *vlen, uint64_t *seqp)
{
	struct get_req q = { .part = true, .fill = true, .off = off, .cap = cap, .buf = buf };
	int rc = get(db, key, &q);

	*len = rc ? 0 : q.len;
	if (vlen)
		*vlen = rc == -ENOENT ? 0 : q.vlen;
	if (!rc && seqp)
		*seqp = q.seq;
	return rc;
}

void kv_db_keep_info(struct kv_db *db, struct kv_keep_info *ki)
{
	pthread_mutex_lock(&db->bg_mu); /* the image's watcher may write it */
	*ki = db->keep;
	pthread_mutex_unlock(&db->bg_mu);
}

/* ---- observing ---- */

void kv_db_stats(struct kv_db *db, struct kv_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->puts = atomic_load(&db->puts);
	st->gets = atomic_load(&db->gets);
	st->flushes = atomic_load(&db->flushes);
	st->compactions = atomic_load(&db->compactions);
	st->stalls = atomic_load(&db->stalls);
	st->stall_ns = atomic_load(&db->stall_ns);
	for (struct kv_rowcache *c = &db->cache; c; c = c == &db->cache ? db->cold : NULL) {
		st->cache_hits += atomic_load(&c->hits);
		st->cache_misses += atomic_load(&c->misses);
		st->cache_evictions += atomic_load(&c->evictions);
		st->cache_crc_dropped += atomic_load(&c->crc_dropped);
	}
	pthread_mutex_lock(&db->log.mu);
	st->log_batches = db->log.batches;
	st->log_bytes = db->log.synced_bytes;
	pthread_mutex_unlock(&db->log.mu);
	pthread_rwlock_rdlock(&db->lsm);
	st->tables = db->ntables;
	for (size_t i = 0; i < db->ntables; i++)
		st->sst_bytes += db->tables[i]->size;
	pthread_rwlock_unlock(&db->lsm);
	kv_mem_prefault_progress(&kv__cache(db)->mem, &st->prefault_done, &st->prefault_total);
	kv_mem_load_progress(&db->cache.mem, &st->image_loaded, &st->image_demanded,
			     &st->image_total);
	st->image_loading = atomic_load(&db->cache.loading) && !atomic_load(&db->cache.dead);
}

void kv_db_coverage(struct kv_db *db, size_t res[3], size_t huge[3])
{
	res[0] = res[1] = res[2] = huge[0] = huge[1] = huge[2] = 0;
	kv_mem_coverage(&kv__cache(db)->mem, &res[0], &huge[0]);
	kv_mem_coverage(&db->mtmem, &res[1], &huge[1]);
	kv_smaps_files(db->dir, &res[2], &huge[2]);
}

const char *kv_db_mount(struct kv_db *db)
{
	return db->mount;
}

void kv_db_quiesce(struct kv_db *db)
{
	pthread_mutex_lock(&db->bg_mu);
	while ((db->imm_busy && !db->bg_err) ||
	       ((db->compact_wanted || db->compacting) && !db->compact_err))
		pthread_cond_wait(&db->bg_cv, &db->bg_mu);
	pthread_mutex_unlock(&db->bg_mu);
}
