/* SPDX-License-Identifier: MIT */
/*
 * A small LSM key-value store, laid out the way Cassandra lays out a node:
 *
 *   put ──► commit log (group commit: one write+fdatasync per batch)
 *      └──► memtable   (skiplist in an arena: one half of an hpregion region)
 *                │ full: switch halves, flush the old one in the background
 *                ▼
 *           SSTables   (immutable sorted files on a tmpfs huge= mount,
 *                       read through mmap; sparse index + bloom filter;
 *                       size-tiered compaction merges them)
 *   get ──► row cache  (buffer pool of 2 MiB frames in an hpregion region:
 *                       hpr_fault_in on a frame's first use,
 *                       hpr_release_lazy when it is evicted)
 *
 * Where hpregion comes in is all in mem.c (struct kv_mem): a region, or for
 * the comparison run plain 4 KiB-page memory with the same calls.
 *
 * Durability: a put is acknowledged only once its commit-log record is
 * fdatasync'ed. On open the log is replayed into the memtable, so a kill -9
 * loses no acknowledged write. What "acknowledged" promises depends on
 * where the files are. On tmpfs (the default: data dir and log both in
 * the data dir) fsync and fdatasync are no-ops and nothing is on stable
 * storage: an acknowledged write survives the death of the process (kill
 * -9, a crash, OOM), not a host crash, reboot or power loss. For more, put
 * the files on a disk: kv_opts.log_dir (--log-dir) moves the commit log to
 * any directory, and with it on a disk the fdatasync is real; the tables
 * are still on the data dir's tmpfs, though, and a flushed memtable's log
 * segments are deleted, so only a data dir on a disk too (allow_disk,
 * --allow-disk) makes every acknowledged write survive a host crash. No read sees a write before it is durable:
 * a put's version enters the memtable when its record is appended, but
 * readers skip versions newer than the log's durable sequence number (the
 * guarantee of Cassandra's batch commit-log mode), and a batch whose write
 * fails is cut off the log, so neither a read nor a reopen shows a write
 * whose put failed. Tables become visible only by rename after
 * fsync, so a full disk (tmpfs size=) never leaves a half-written table.
 *
 * Concurrency: any number of threads may call kv_put/kv_get. Row locks
 * (striped by key hash) order writes to one key and keep the row cache
 * coherent; one lsm rwlock guards the set of memtables and tables, and
 * readers hold it for the whole lookup, so a table or memtable is freed
 * only after the writer that removed it had the lock exclusively. Readers
 * never wait on a flush or a stalled writer: a row cache hit takes no lock
 * at all, and the lsm lock is taken for writing only to swap pointers --
 * never across a memtable fault-in, a log fdatasync or a table write.
 */
#ifndef KV_ENGINE_H
#define KV_ENGINE_H

#include <hpregion/hpregion.h>

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- memory: an hpregion region or plain base-page memory (mem.c) ---- */

enum kv_backing {
	KV_MEM_SHMEM, /* hpregion SHMEM: a file in a dir on a tmpfs huge= mount */
	KV_MEM_MEMFD, /* hpregion SHMEM on a memfd (no mount needed) */
	KV_MEM_THP,   /* hpregion THP: private anonymous memory */
	KV_MEM_BASE,  /* no hpregion: mmap + MADV_NOHUGEPAGE (4 KiB pages) */
};

struct kv_mem {
	char name[32];
	enum kv_backing backing;
	hpr_region *r; /* NULL for KV_MEM_BASE */
	char *base;
	size_t size;
	size_t unit; /* fault/release granularity: the huge page size */
	/* KV_MEM_BASE background prefault: a plain thread */
	pthread_t toucher;
	bool toucher_on;
	_Atomic size_t touch_done;
	int touch_err;
};

int kv_mem_create(struct kv_mem *m, const char *name, size_t size, enum kv_backing b,
		  const char *dir);
void kv_mem_destroy(struct kv_mem *m);
int kv_mem_fault(struct kv_mem *m, size_t off, size_t len);
int kv_mem_release(struct kv_mem *m, size_t off, size_t len);
int kv_mem_prefault_start(struct kv_mem *m);
int kv_mem_prefault_progress(struct kv_mem *m, size_t *done, size_t *total);
int kv_mem_prefault_wait(struct kv_mem *m);
/* resident bytes and how many of them are huge-mapped, from the kernel */
int kv_mem_coverage(struct kv_mem *m, size_t *resident, size_t *huge);
const char *kv_backing_name(enum kv_backing b);
/* Sum Rss and PMD-mapped bytes of the mappings of files under dir. */
int kv_smaps_files(const char *dir, size_t *resident, size_t *huge);

/* ---- commit log (commitlog.c) ---- */

struct kv_log {
	char dir[PATH_MAX];
	int fd;
	uint64_t gen; /* segment: commitlog-<gen>.log */
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	char *buf, *spare; /* appenders fill buf; the syncer writes spare */
	size_t len, cap, spare_cap;
	uint64_t appended;	  /* last sequence number handed out */
	_Atomic uint64_t durable; /* last sequence number fdatasync'ed */
	off_t synced_off;	  /* the segment's length after the last good batch */
	bool syncing, stop;
	int err;	  /* sticky: after a failed write nothing more is acknowledged */
	char errmsg[256]; /* err's message, for the client threads (kv_fail) */
	pthread_t syncer;
	uint64_t batches, synced_bytes;
	/* tests only: the syncer calls hook(hook_arg) before it writes a batch */
	void (*hook)(void *arg);
	void *hook_arg;
};

typedef int (*kv_replay_fn)(uint64_t key, uint64_t seq, const void *val, uint32_t len, void *arg);
/* Replay every segment in dir, oldest first, calling fn for records with
 * seq > min_seq. *max_gen / *max_seq: highest segment and sequence seen. */
int kv_log_replay(const char *dir, uint64_t min_seq, kv_replay_fn fn, void *arg, uint64_t *max_gen,
		  uint64_t *max_seq, uint64_t *torn_bytes);
int kv_log_open(struct kv_log *l, const char *dir, uint64_t gen, uint64_t last_seq,
		void (*hook)(void *arg), void *hook_arg);
void kv_log_close(struct kv_log *l);
/* Append a record; assigns and returns its sequence number in *seq. */
int kv_log_append(struct kv_log *l, uint64_t key, const void *val, uint32_t len, uint64_t *seq);
/* The last durable sequence number: readers skip anything newer (db.c). */
static inline uint64_t kv_log_durable(struct kv_log *l)
{
	return atomic_load_explicit(&l->durable, memory_order_acquire);
}
/* Wait until seq is durable: 0, or the log's sticky write error. */
int kv_log_wait(struct kv_log *l, uint64_t seq);
/* Start a new segment once everything so far is durable; *old_gen = the
 * segment just finished. Caller guarantees no appends run meanwhile. */
int kv_log_rotate(struct kv_log *l, uint64_t *old_gen);
/* Remove segments with gen <= upto (their records are in tables now). */
void kv_log_drop(const char *dir, uint64_t upto);
/* How many log segments dir holds (0 when it cannot be listed). */
size_t kv_log_segments(const char *dir);

/* ---- memtable (memtable.c) ---- */

#define KV_MT_MAXH 16

struct kv_mt_node {
	uint64_t key, seq;
	uint32_t vlen;
	uint32_t height;
	_Atomic(struct kv_mt_node *) next[]; /* [height], then the value */
};

struct kv_memtable {
	struct kv_mem *mem; /* the arena is [off, off+size) of mem */
	size_t off, size, used;
	char *base;
	struct kv_mt_node *head;
	pthread_mutex_t mu; /* writers; readers take no lock */
	bool sealed;	    /* being switched out: no more writes (under mu) */
	_Atomic int height;
	uint64_t rng;
	_Atomic uint64_t entries;
	uint64_t min_seq, max_seq;
	uint64_t last_log_gen; /* log segments this memtable covers */
};

int kv_mt_init(struct kv_memtable *mt, struct kv_mem *mem, size_t off, size_t size);
int kv_mt_reset(struct kv_memtable *mt);    /* fault the arena in, empty list */
void kv_mt_release(struct kv_memtable *mt); /* give the arena back lazily */
bool kv_mt_has_room(const struct kv_memtable *mt, uint32_t vlen);
/* caller holds mt->mu and checked kv_mt_has_room() */
void kv_mt_insert(struct kv_memtable *mt, uint64_t key, uint64_t seq, const void *val,
		  uint32_t vlen);
/* Newest version of key with seq <= upto, or NULL; lock-free. *newer is
 * set when a version newer than upto was skipped (a write not yet durable). */
const struct kv_mt_node *kv_mt_get(const struct kv_memtable *mt, uint64_t key, uint64_t upto,
				   bool *newer);
static inline const void *kv_mt_value(const struct kv_mt_node *n)
{
	return (const char *)n + sizeof(*n) + n->height * sizeof(n->next[0]);
}
/* first node at level 0, and the next node with a different key */
const struct kv_mt_node *kv_mt_first(const struct kv_memtable *mt);
const struct kv_mt_node *kv_mt_next_key(const struct kv_mt_node *n);

/* ---- SSTables (sstable.c) ---- */

struct kv_sst_rec {
	uint64_t key, seq;
	uint32_t vlen, crc; /* crc32c of key, seq, vlen and the value */
			    /* value, padded to 8 bytes */
};

struct kv_sst_footer {
	uint64_t magic;
	uint64_t count, data_end;
	uint64_t index_off, index_count; /* every KV_SST_INDEX_EVERY-th record */
	uint64_t bloom_off, bloom_bits;
	uint64_t min_key, max_key, min_seq, max_seq;
	uint32_t bloom_k, crc; /* crc32c of the footer before this field */
};

struct kv_sst {
	char path[PATH_MAX];
	uint64_t gen;
	const uint8_t *map;
	size_t size;
	struct kv_sst_footer f;
};

struct kv_sst_writer {
	char tmp[PATH_MAX], path[PATH_MAX], dir[PATH_MAX];
	int fd;
	uint64_t gen;
	char *buf;
	size_t blen, off;
	uint64_t *index; /* pairs: key, offset */
	size_t nindex, capindex;
	uint8_t *bloom;
	struct kv_sst_footer f;
};

int kv_sst_open(const char *path, uint64_t gen, struct kv_sst **out);
void kv_sst_close(struct kv_sst *t, bool unlink_file);
/* the record of key, or NULL; -EIO in *err for a bad checksum */
const struct kv_sst_rec *kv_sst_get(const struct kv_sst *t, uint64_t key, int *err);
static inline const void *kv_sst_value(const struct kv_sst_rec *r)
{
	return r + 1;
}
const struct kv_sst_rec *kv_sst_first(const struct kv_sst *t);
const struct kv_sst_rec *kv_sst_next(const struct kv_sst *t, const struct kv_sst_rec *r);
bool kv_sst_rec_ok(const struct kv_sst_rec *r);
int kv_sst_writer_open(struct kv_sst_writer *w, const char *dir, uint64_t gen, uint64_t max_count);
int kv_sst_writer_add(struct kv_sst_writer *w, uint64_t key, uint64_t seq, const void *val,
		      uint32_t vlen);
/* fsync, rename into place, fsync the dir and open the table */
int kv_sst_writer_finish(struct kv_sst_writer *w, struct kv_sst **out);
void kv_sst_writer_abort(struct kv_sst_writer *w);

/* ---- row cache (rowcache.c) ---- */

struct kv_rc_frame {
	_Atomic uint32_t gen; /* bumped on eviction: stale index entries */
	uint32_t used;
	bool live;
};

struct kv_rc_slot {
	_Atomic uint64_t key;
	_Atomic uint64_t loc; /* 0: empty; else gen | frame | offset */
};

struct kv_rowcache {
	struct kv_mem mem; /* [index][frame 0][frame 1]... */
	size_t frame_size, nframes, frames_off;
	size_t nbuckets; /* power of two, KV_RC_WAYS slots each */
	struct kv_rc_slot *slots;
	struct kv_rc_frame *frames;
	pthread_mutex_t alloc_mu;
	size_t cur;	   /* frame being filled; nframes: none yet */
	size_t free_ahead; /* frames kept released ahead of the writer */
	_Atomic uint64_t hits, misses, inserts, evictions, torn;
};
#define KV_RC_WAYS 8

int kv_rc_init(struct kv_rowcache *rc, size_t bytes, size_t row_hint, size_t nstripes,
	       enum kv_backing b, const char *dir);
void kv_rc_destroy(struct kv_rowcache *rc);
/* Lock-free (a seqlock-style copy): a hit is an intact row that was in
 * the cache during the call. */
bool kv_rc_get(struct kv_rowcache *rc, uint64_t key, void *buf, uint32_t cap, uint32_t *len,
	       uint64_t *seq);
void kv_rc_put(struct kv_rowcache *rc, uint64_t key, uint64_t seq, const void *val, uint32_t len);
/* kv_rc_put and kv_rc_invalidate: the caller holds the row lock of key */
void kv_rc_invalidate(struct kv_rowcache *rc, uint64_t key);

/* ---- the database (db.c) ---- */

struct kv_opts {
	const char *data_dir;
	const char *region_dir; /* tmpfs huge= dir for SHMEM regions; NULL: data_dir */
	const char *log_dir;	/* the commit log's dir, any file system; NULL: data_dir */
	enum kv_backing cache_backing;
	enum kv_backing memtable_backing;
	size_t cache_bytes;    /* row cache size */
	size_t memtable_bytes; /* one memtable; the region holds two */
	size_t row_hint;       /* typical value size, sizes the cache index */
	unsigned compact_min;  /* tables merged at once (size-tiered); 0: 4 */
	bool allow_disk;       /* data dir not on tmpfs: warn instead of fail */
	bool quiet;
	/* tests only: called by the commit-log syncer before it writes each
	 * batch, with no lock held (tests/cass_*.c stall the syncer here) */
	void (*log_hook)(void *arg);
	void *log_hook_arg;
};

struct kv_stats {
	uint64_t puts, gets, flushes, compactions, tables, stalls, stall_ns;
	uint64_t log_batches, log_bytes;
	uint64_t cache_hits, cache_misses, cache_evictions;
	uint64_t sst_bytes;
	size_t prefault_done, prefault_total;
};

struct kv_db;

int kv_open(const struct kv_opts *o, struct kv_db **out);
void kv_close(struct kv_db *db);
/* Durable when it returns 0; *seq (may be NULL) is the write's sequence
 * number: a later write to the same key always gets a larger one. */
int kv_put(struct kv_db *db, uint64_t key, const void *val, uint32_t len, uint64_t *seq);
/* 0 and the newest value, -ENOENT, -ENOBUFS (cap too small: *len = need) */
int kv_get(struct kv_db *db, uint64_t key, void *buf, uint32_t cap, uint32_t *len, uint64_t *seq);
void kv_db_stats(struct kv_db *db, struct kv_stats *st);
/* coverage of the cache, memtable and table mappings (resident, huge) */
void kv_db_coverage(struct kv_db *db, size_t res[3], size_t huge[3]);
/* what the data dir is: "tmpfs huge=always", "ext4 (not tmpfs)" */
const char *kv_db_mount(struct kv_db *db);
/* Read every record of every table and check its CRC and key order. */
int kv_db_verify(struct kv_db *db, uint64_t *records);
/* wait for background flush/compaction to go idle (tests, benchmarks) */
void kv_db_quiesce(struct kv_db *db);
/* Check a data dir: exists, is a dir, on tmpfs (else -EXDEV unless
 * allow_disk); desc gets "tmpfs huge=never" etc. */
int kv_check_dir(const char *dir, bool allow_disk, char *desc, size_t dlen);

#endif /* KV_ENGINE_H */
