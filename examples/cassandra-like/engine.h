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
 * Fast restart (kv_opts.keep, restart.c): the row cache and the memtables
 * in kept regions (hpregion's HPR_F_ATTACH) that the next process attaches
 * to; each is checked at open, the memtables against the commit log, and
 * whatever fails its checks starts cold.
 *
 * Row cache image (kv_opts.cache_image, image.c): the row cache saved with
 * hpr_save at a clean close and loaded lazily (hpr_load, HPR_SNAP_LAZY) at
 * the next open when no kept cache is attached; valid only for the data
 * dir's last save (a token in DIR/CACHEIMAGE), with the keys written since
 * cleared; a failed load makes a cold cache, never a wrong row or a crash.
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
	size_t unit;   /* fault/release granularity: the huge page size */
	bool attached; /* a kept region found from a previous process */
	/* KV_MEM_BASE background prefault: a plain thread */
	pthread_t toucher;
	bool toucher_on;
	_Atomic size_t touch_done;
	int touch_err;
};

int kv_mem_create(struct kv_mem *m, const char *name, size_t size, enum kv_backing b,
		  const char *dir);
/* A kept SHMEM region: the file dir/name (hpregion HPR_F_ATTACH), attached
 * if it is there with this size (m->attached), else made anew. A file of
 * another size or that is not a kept region is replaced. */
int kv_mem_create_kept(struct kv_mem *m, const char *name, size_t size, const char *dir);
void kv_mem_destroy(struct kv_mem *m);
int kv_mem_fault(struct kv_mem *m, size_t off, size_t len);
int kv_mem_release(struct kv_mem *m, size_t off, size_t len);
int kv_mem_prefault_start(struct kv_mem *m);
int kv_mem_prefault_progress(struct kv_mem *m, size_t *done, size_t *total);
int kv_mem_prefault_wait(struct kv_mem *m);
/* hpr_fault_in() of [off, off+len), quietly: 0 once it is mapped (during a
 * lazy load: loaded and verified), else -errno with no message */
int kv_mem_ready(struct kv_mem *m, size_t off, size_t len);
/* A row cache image (image.c): hpr_save() of the region; hpr_load() of
 * one into a fresh region with HPR_SNAP_LAZY, which returns once the
 * image is checked and pages then arrive on first touch or from the
 * background fill; _wait: its end (0, or the error that emptied the
 * region); _cancel: end it now (then _wait) */
int kv_mem_save(struct kv_mem *m, int fd);
int kv_mem_load_lazy(struct kv_mem *m, int fd);
int kv_mem_load_wait(struct kv_mem *m);
void kv_mem_load_cancel(struct kv_mem *m);
void kv_mem_load_progress(struct kv_mem *m, size_t *loaded, size_t *demanded, size_t *total);
/* resident bytes and how many of them are huge-mapped, from the kernel */
int kv_mem_coverage(struct kv_mem *m, size_t *resident, size_t *huge);
const char *kv_backing_name(enum kv_backing b);
/* Sum Rss and PMD-mapped bytes of the mappings of files under dir. */
int kv_smaps_files(const char *dir, size_t *resident, size_t *huge);

/* ---- kept regions (restart.c) ---- */

/*
 * With kv_opts.keep the row cache and the memtables live in kept regions
 * (hpregion's HPR_F_ATTACH: files on the tmpfs huge= mount that outlive the
 * process), and a restart attaches to them instead of starting cold. Each
 * begins with this header; a region whose header does not match -- other
 * magic, version, size or geometry, or kept for another data dir -- is
 * started afresh. The fields up to crc are written once, at create; state
 * is one aligned 64-bit word, changed by single stores.
 */
#define KV_KEPT_VERSION 1
#define KV_KEPT_RC_MAGIC 0x4548434143525656ull /* "VVRCACHE" */
#define KV_KEPT_MT_MAGIC 0x4c42544d454d5656ull /* "VVMEMTBL" */

struct kv_kept_hdr {
	uint64_t magic;
	uint32_t version, hdr_bytes;
	uint64_t region_size;
	uint64_t owner;		/* the data dir's KEEPID */
	uint64_t geo[4];	/* layout: row cache nbuckets, nframes, frame_size,
				   frames_off; memtables: half size, half 0's offset */
	uint32_t crc, pad;	/* crc32c of the fields above */
	_Atomic uint64_t state; /* row cache: the frame being filled; memtables:
				   KV_MT_STATE() */
};

/* the memtable region's state: which half takes writes, and whether the
 * other is immutable (switched out, not yet flushed) with the log segments
 * up to imm_gen */
#define KV_MT_STATE(active, imm, imm_gen) \
	((uint64_t)(active) | (uint64_t)(imm) << 1 | (uint64_t)(imm_gen) << 2)

/* The data dir's id for kept regions (DIR/KEEPID, made on first use). A
 * region is attached only if it was kept for this id; an open without keep
 * removes the file, so no region kept before it is ever attached again (its
 * row cache would no longer match the tables). */
int kv_keep_id(const char *dir, bool keep, uint64_t *id);
void kv_kept_stamp(struct kv_kept_hdr *h, uint64_t magic, size_t size, uint64_t owner,
		   const uint64_t geo[4], uint64_t state);
/* true if h is a header kv_kept_stamp() wrote with these values; else why */
bool kv_kept_match(const struct kv_kept_hdr *h, uint64_t magic, size_t size, uint64_t owner,
		   const uint64_t geo[4], char *why, size_t n);

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

/* A record as replay hands it over: val is valid during the call only. */
struct kv_log_rec {
	uint64_t key, seq;
	uint64_t gen; /* the segment it is in */
	uint32_t len, crc;
	const void *val;
};
typedef int (*kv_replay_fn)(const struct kv_log_rec *r, void *arg);
/* Replay every segment in dir, oldest first, calling fn for records with
 * seq > min_seq. *max_gen / *max_seq: highest segment and sequence seen. */
int kv_log_replay(const char *dir, uint64_t min_seq, kv_replay_fn fn, void *arg, uint64_t *max_gen,
		  uint64_t *max_seq, uint64_t *torn_bytes);
int kv_log_open(struct kv_log *l, const char *dir, uint64_t gen, uint64_t last_seq,
		void (*hook)(void *arg), void *hook_arg);
void kv_log_close(struct kv_log *l);
/* Append a record; assigns and returns its sequence number in *seq and
 * its checksum (kv_log_crc) in *crc. */
int kv_log_append(struct kv_log *l, uint64_t key, const void *val, uint32_t len, uint64_t *seq,
		  uint32_t *crc);
/* A record's crc32c (of seq, key, len and the value): the log's and the
 * memtable node's, so a kept memtable is checked against the log by it. */
uint32_t kv_log_crc(uint64_t key, uint64_t seq, const void *val, uint32_t len);
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

/* Links are offsets from the arena's base (0: none; the head is at 0),
 * not pointers: a kept memtable (restart.c) maps at another address in the
 * next process and its list is still whole. */
struct kv_mt_node {
	uint64_t key, seq;
	uint32_t vlen;
	uint32_t height;
	uint32_t crc, pad;	 /* kv_log_crc(key, seq, value): its log record's */
	_Atomic uint64_t next[]; /* [height], then the value */
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
	int idx;	       /* which half of the region: 0 or 1 */
};

int kv_mt_init(struct kv_memtable *mt, struct kv_mem *mem, size_t off, size_t size);
int kv_mt_reset(struct kv_memtable *mt);    /* fault the arena in, empty list */
void kv_mt_release(struct kv_memtable *mt); /* give the arena back lazily */
bool kv_mt_has_room(const struct kv_memtable *mt, uint32_t vlen);
/* caller holds mt->mu and checked kv_mt_has_room(); crc: kv_log_crc() */
void kv_mt_insert(struct kv_memtable *mt, uint64_t key, uint64_t seq, const void *val,
		  uint32_t vlen, uint32_t crc);
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
const struct kv_mt_node *kv_mt_next_key(const struct kv_memtable *mt, const struct kv_mt_node *n);
/* a node's size in the arena, and the node at offset off (0: NULL) */
size_t kv_mt_node_size(unsigned height, uint32_t vlen);
static inline struct kv_mt_node *kv_mt_at(const struct kv_memtable *mt, uint64_t off)
{
	return off ? (struct kv_mt_node *)(mt->base + off) : NULL;
}

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

/* in the region, after its header: a kept cache keeps them too */
struct kv_rc_frame {
	_Atomic uint32_t gen; /* bumped on eviction: stale index entries */
	uint32_t used;
	uint32_t live, pad;
};

struct kv_rc_slot {
	_Atomic uint64_t key;
	_Atomic uint64_t loc; /* 0: empty; else gen | frame | offset */
};

struct kv_rowcache {
	struct kv_mem mem; /* [header, frame table, index][frame 0][frame 1]... */
	struct kv_kept_hdr *hdr;
	size_t frame_size, nframes, frames_off;
	size_t nbuckets; /* power of two, KV_RC_WAYS slots each */
	struct kv_rc_slot *slots;
	struct kv_rc_frame *frames;
	pthread_mutex_t alloc_mu;
	size_t cur;			  /* frame being filled; nframes: none yet */
	size_t free_ahead;		  /* frames kept released ahead of the writer */
	bool check_crc;			  /* kept: a hit's row is checked against its crc */
	uint64_t kept_rows, kept_dropped; /* a kept cache: index slots kept and cleared */
	char cold_why[160];		  /* a kept cache started cold: why */
	/* An image being loaded lazily (image.c): while loading, a frame's
	 * rows are touched only once kv_mem_ready() mapped it (ready[f]), so
	 * nobody ever touches a page a failed load left PROT_NONE. */
	_Atomic bool loading;
	_Atomic uint8_t *ready; /* per frame: 0, KV_RC_QUEUED, KV_RC_READY */
	/* nowait (kv_opts.image_nowait): a read of a frame not mapped yet is a
	 * miss, and the frame goes on a queue that kv_rc_fetcher() threads map
	 * (demand first in the library), instead of the read waiting for it */
	bool nowait;
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv;
	size_t *q, q_head, q_tail; /* a ring of nframes: each frame queued once */
	bool q_stop;
	/* the load failed and a cold cache replaced this one (image.c): every
	 * call is a miss or does nothing from now on */
	_Atomic bool dead;
	_Atomic uint64_t hits, misses, inserts, evictions, torn, crc_dropped;
};
#define KV_RC_WAYS 8

/* An image to load (image.c): fd of the file, and the token the data dir's
 * CACHEIMAGE file says it must carry; out: whether it was taken, or why not */
struct kv_rc_image {
	int fd;
	uint64_t token;
	bool nowait; /* kv_opts.image_nowait */
	bool loaded;
	char why[256];
};

/* keep_id != 0: a kept region (restart.c), attached and checked if it is
 * there and was kept for keep_id; *warm says whether its rows were kept.
 * img != NULL: rows carry a crc (for the image saved at close); with
 * img->fd >= 0 and no kept cache attached, the image is loaded lazily. */
int kv_rc_init(struct kv_rowcache *rc, size_t bytes, size_t row_hint, size_t nstripes,
	       enum kv_backing b, const char *dir, uint64_t keep_id, bool *warm,
	       struct kv_rc_image *img);
/* the image's lazy load ended well: every frame is mapped, no more checks */
void kv_rc_loaded(struct kv_rowcache *rc);
/* nowait: a thread that maps the frames reads queued, until kv_rc_fetch_stop */
void *kv_rc_fetcher(void *rc);
void kv_rc_fetch_stop(struct kv_rowcache *rc);
#define KV_RC_QUEUED 1
#define KV_RC_READY 2
void kv_rc_destroy(struct kv_rowcache *rc);
/* Lock-free (a seqlock-style copy): a hit is an intact row that was in
 * the cache during the call. */
bool kv_rc_get(struct kv_rowcache *rc, uint64_t key, void *buf, uint32_t cap, uint32_t *len,
	       uint64_t *seq);
/* The same for bytes [off, off + cap) of the row: *len copied (0 where off
 * is past its end), *vlen the row's length; nothing else is copied. */
bool kv_rc_get_part(struct kv_rowcache *rc, uint64_t key, uint32_t off, void *buf, uint32_t cap,
		    uint32_t *len, uint32_t *vlen, uint64_t *seq);
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
	/* Row cache and memtables in kept regions (restart.c): files "rowcache"
	 * and "memtable" in region_dir, on a tmpfs huge= mount, that the next
	 * open attaches to and checks. Both backings must be KV_MEM_SHMEM. */
	bool keep;
	/* The row cache image (image.c): a file (relative: in the data dir)
	 * that kv_close() saves the row cache to and kv_open() loads it from,
	 * lazily, when no kept cache is attached -- a warm start after the
	 * tmpfs (and the kept regions on it) was lost. NULL: none. */
	const char *cache_image;
	/* while the image loads, a read of a row whose page is not there yet
	 * is a miss (the page is asked for in the background) instead of
	 * waiting for the page: for a store whose misses cost less than a
	 * page's read from the image's disk */
	bool image_nowait;
	/* tests only: called by the commit-log syncer before it writes each
	 * batch, with no lock held (tests/cass_*.c stall the syncer here) */
	void (*log_hook)(void *arg);
	void *log_hook_arg;
	/* tests only: called by the flusher with an immutable memtable in
	 * hand, before it writes the table, with no lock held */
	void (*flush_hook)(void *arg);
	void *flush_hook_arg;
	/* tests only: called by the image's watcher thread when the lazy load
	 * has ended well, before the cache leaves its loading state, with no
	 * lock held (tests/cass_image.c holds the store in that state) */
	void (*image_hook)(void *arg);
	void *image_hook_arg;
};

/* What an open with keep found (kv_db_keep_info) */
struct kv_keep_info {
	bool on;
	bool cache_attached, cache_warm;  /* a kept cache found; its rows kept */
	bool mt_attached, mt_warm;	  /* kept memtables found; checked and kept */
	bool imm_recovered;		  /* an immutable half came back, to flush */
	bool imm_flushed;		  /* an immutable half was in the tables already */
	uint64_t cache_rows;		  /* row cache slots kept */
	uint64_t cache_dropped;		  /* slots cleared: not in a live frame */
	uint64_t mt_kept;		  /* memtable nodes kept: in the log */
	uint64_t mt_discarded;		  /* nodes unlinked: not in the log */
	uint64_t mt_replayed;		  /* log records missing from the kept nodes */
	char cache_why[160], mt_why[160]; /* why either started cold */
	/* the row cache image (kv_opts.cache_image) */
	bool image_on;	      /* an image was asked for */
	bool image_loaded;    /* its lazy load began: the cache is warm from it */
	bool image_failed;    /* the load failed later: the cache went cold */
	uint64_t image_rows;  /* index slots it brought */
	uint64_t image_seq;   /* the commit log's position it was saved at */
	uint64_t image_stale; /* keys written after it: their slots cleared */
	double image_load_ms; /* the load's end, from its start (0: running) */
	char image_why[256];  /* why it was not used, or why it failed */
};

struct kv_stats {
	uint64_t puts, gets, flushes, compactions, tables, stalls, stall_ns;
	uint64_t log_batches, log_bytes;
	uint64_t cache_hits, cache_misses, cache_evictions;
	uint64_t cache_crc_dropped; /* kept rows that failed their crc: never returned */
	uint64_t sst_bytes;
	size_t prefault_done, prefault_total;
	/* the image's lazy load: bytes mapped, of them on demand, in all; and
	 * whether it is still running */
	size_t image_loaded, image_demanded, image_total;
	bool image_loading;
};

struct kv_db;

int kv_open(const struct kv_opts *o, struct kv_db **out);
void kv_close(struct kv_db *db);
/* Durable when it returns 0; *seq (may be NULL) is the write's sequence
 * number: a later write to the same key always gets a larger one. */
int kv_put(struct kv_db *db, uint64_t key, const void *val, uint32_t len, uint64_t *seq);
/* 0 and the newest value, -ENOENT, -ENOBUFS (cap too small: *len = need) */
int kv_get(struct kv_db *db, uint64_t key, void *buf, uint32_t cap, uint32_t *len, uint64_t *seq);
/* kv_get that does not fill the row cache on a miss (a scan, a check) */
int kv_get_nofill(struct kv_db *db, uint64_t key, void *buf, uint32_t cap, uint32_t *len,
		  uint64_t *seq);
/*
 * Part of key's newest value, e.g. one field of a row (YCSB's read with
 * readallfields=false): bytes [off, off + cap) into buf, copied from the
 * row cache, a memtable or a table without the rest of the value. 0: *len
 * bytes copied (fewer than cap where the value ends first), *vlen (may be
 * NULL) the whole value's length; -ENOENT; -ERANGE: off is past the
 * value's end. The same versions as kv_get (none not yet durable). A miss
 * fills the row cache with the whole value, as kv_get does: that copy
 * goes through a buffer of the call's own, not through buf, so that the
 * lsm lock is not held across a cache frame's fault-in.
 */
int kv_get_part(struct kv_db *db, uint64_t key, uint32_t off, void *buf, uint32_t cap,
		uint32_t *len, uint32_t *vlen, uint64_t *seq);
void kv_db_keep_info(struct kv_db *db, struct kv_keep_info *ki);
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
