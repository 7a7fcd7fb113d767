/* SPDX-License-Identifier: MIT */
/*
 * The database object, shared by db.c (open, put, get) and lsm.c (tables,
 * flush, compaction). Not part of the engine's API: use engine.h.
 *
 * Lock order: row stripe -> lsm rwlock -> memtable mu -> log mu, and
 * lsm -> bg_mu. Nobody takes lsm while holding bg_mu. switch_mu comes
 * first of all: a writer lets go of its row lock and lsm before it
 * switches memtables, and the switch takes bg_mu, memtable mu, log mu and
 * (briefly, for writing) lsm one at a time under it.
 */
#ifndef KV_DB_H
#define KV_DB_H

#include "engine.h"

#define NSTRIPES 4096

struct kv_db {
	struct kv_opts o;
	char dir[PATH_MAX];    /* data dir, resolved */
	char mount[128];       /* "tmpfs huge=always", "ext4 (not tmpfs)" */
	int lockfd;	       /* flock on DIR/LOCK: one process per data dir */
	char logdir[PATH_MAX]; /* the commit log's dir, resolved: dir by default */
	int loglockfd;	       /* flock on LOGDIR/LOCK when it is not dir */
	struct kv_log log;
	bool log_open;
	struct kv_mem mtmem;	   /* the memtable region: two halves */
	struct kv_kept_hdr *mthdr; /* keep: its header, a huge page before the halves */
	bool mt_check;		   /* keep: kept memtables to check against the log */
	uint64_t keep_id;	   /* keep: the data dir's KEEPID */
	struct kv_keep_info keep;
	struct kv_memtable mt[2];
	struct kv_memtable *active, *imm; /* imm: being flushed, or NULL */
	pthread_rwlock_t lsm;		  /* guards active, imm, tables, ntables */
	pthread_mutex_t switch_mu;	  /* one memtable switch at a time */
	struct kv_sst **tables;		  /* newest first */
	size_t ntables;
	_Atomic uint64_t next_gen; /* file number of the next table */
	struct kv_rowcache cache;
	bool cache_on;
	/* The cache in use: &cache, or after a failed image load the cold one
	 * that replaced it (image.c). Loaded under the row lock by whoever
	 * fills or invalidates, so a put never misses the cache a read fills. */
	struct kv_rowcache *_Atomic rc;
	struct kv_rowcache *_Atomic cold;
	/* the row cache image (image.c) */
	char img_path[PATH_MAX]; /* kv_opts.cache_image, resolved; "": none */
	uint64_t img_seq;	 /* the log position the loaded image was saved at */
	bool img_check;		 /* open: clear the slots of keys written after it */
	char img_drop[256];	 /* open: why the loaded image must go after all */
	pthread_t img_watcher;	 /* waits for the lazy load's end */
	bool img_watch_on;
	pthread_t img_fetch[2]; /* image_nowait: kv_rc_fetcher() */
	int img_nfetch;
	uint64_t img_t0;		   /* when the load began (ns), for the note */
	pthread_mutex_t stripes[NSTRIPES]; /* row locks, by key hash */
	pthread_t flusher, compactor;
	bool threads_on;
	pthread_mutex_t bg_mu; /* guards the flags below; bg_cv signals them */
	pthread_cond_t bg_cv;
	bool stop, imm_busy, compact_wanted, compacting;
	int bg_err;	  /* a failed flush: no more memtable switches */
	char bg_msg[512]; /* bg_err's message, for the writers it stops */
	int compact_err;  /* a failed compaction: no more compactions */
	_Atomic uint64_t puts, gets, flushes, compactions, stalls, stall_ns;
};

void kv__note(struct kv_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* open every table in the data dir, newest first; drop compaction leftovers */
int kv__load_tables(struct kv_db *db);
/* write a memtable out as a table (newest version of each key) */
int kv__flush_mt(struct kv_db *db, struct kv_memtable *mt, struct kv_sst **out);
/* caller holds lsm for writing, or is alone (open) */
int kv__add_table_front(struct kv_db *db, struct kv_sst *t);
void *kv__flusher_main(void *arg);
/* restart.c: check the kept memtables and reconcile them with the commit
 * log (records after tmax); -ESTALE (db->keep.mt_why): start cold */
int kv__mt_recover(struct kv_db *db, uint64_t tmax, uint64_t *max_gen, uint64_t *max_seq,
		   uint64_t *torn);
void *kv__compactor_main(void *arg);

/* the row cache in use (see kv_db.rc) */
static inline struct kv_rowcache *kv__cache(struct kv_db *db)
{
	return atomic_load_explicit(&db->rc, memory_order_acquire);
}
/* image.c: the image for kv_rc_init (img->fd -1: none, img->why says why) */
void kv__image_find(struct kv_db *db, struct kv_rc_image *img, uint64_t *seq);
/* open, with the tables loaded: clear the cache slots of keys the tables
 * hold writes of newer than the image; the log's are cleared in replay
 * (kv__image_stale_key), or here from min_seq when replay_log is set */
int kv__image_stale(struct kv_db *db, bool replay_log, uint64_t min_seq);
void kv__image_stale_key(struct kv_db *db, uint64_t key, uint64_t seq);
/* open, at the end: an image newer than the data dir is dropped; a lazy
 * load still running gets its watcher */
int kv__image_start(struct kv_db *db);
/* close: wait for the load, save the image */
void kv__image_close(struct kv_db *db, uint64_t log_seq);

#endif /* KV_DB_H */
