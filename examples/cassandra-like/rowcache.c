/* SPDX-License-Identifier: MIT */
/*
 * The row cache: a buffer pool of frames (one huge page each, 2 MiB) in an
 * hpregion region, plus a hash index at the head of the same region.
 *
 *   region: [ index: buckets of KV_RC_WAYS slots ][ frame 0 ][ frame 1 ] ...
 *
 * Rows are appended to the frame being filled (log-structured, like
 * Segcache or a slab). Frames are reused in ring order; eviction is a whole
 * frame at a time, which is what makes huge pages and lazy release fit:
 *
 *   - evicting a frame bumps its generation (every index slot pointing
 *     into it goes stale at once, no index walk) and gives its memory back
 *     with hpr_release_lazy(): on shmem a state change with no syscall, on
 *     THP MADV_FREE on the whole huge page, never splitting it;
 *   - a frame is evicted `free_ahead` frames before the writer reaches it,
 *     so released frames sit in the pool where the kernel (or hpregion's
 *     reclaimer, under memory pressure) may take them;
 *   - before a frame takes rows again, hpr_fault_in() makes it present:
 *     free if nothing reclaimed it, one populate call if something did.
 *
 * Locking: the index is striped exactly like the database's row locks
 * (bucket = hash & (nbuckets-1), stripe = hash & (nstripes-1), nstripes
 * divides nbuckets), so a writer (kv_rc_put, kv_rc_invalidate) holding
 * key's row lock owns its bucket. Frame space is handed out under
 * alloc_mu. Readers take no lock: a slot's location is published with a
 * release store after its row is written; a reader copies the row, then
 * re-checks the frame's generation (seqlock style): if the frame was
 * evicted and refilled meanwhile, the copy is discarded as a miss.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rc_row {
	uint64_t key, seq;
	uint32_t len, crc; /* crc32c of key, seq, len and the value (kept caches) */
			   /* value, padded to 8 */
};

#define GEN_BITS 24
#define FRAME_BITS 20
#define OFF_BITS 20 /* in 8-byte units: frames up to 8 MiB */

static uint64_t pack(uint32_t gen, size_t frame, size_t off)
{
	return (uint64_t)gen << (FRAME_BITS + OFF_BITS) | (uint64_t)frame << OFF_BITS | off >> 3;
}

static void unpack(uint64_t loc, uint32_t *gen, size_t *frame, size_t *off)
{
	*gen = (uint32_t)(loc >> (FRAME_BITS + OFF_BITS));
	*frame = (size_t)(loc >> OFF_BITS) & ((1u << FRAME_BITS) - 1);
	*off = (size_t)(loc & ((1u << OFF_BITS) - 1)) << 3;
}

static uint32_t row_crc(uint64_t key, uint64_t seq, uint32_t len, const void *val)
{
	uint64_t ks[2] = { key, seq };

	return kv_crc32c(kv_crc32c(kv_crc32c(0, ks, 16), &len, 4), val, len);
}

/*
 * A kept cache found by a new process: its header matched (kv_kept_match);
 * now the frame table, the frame being filled, and every index slot. A
 * slot that does not point inside a live frame of its generation is
 * cleared; the rows' own bytes are checked by their crc when a read hits
 * them (kv_rc_get), so opening costs one pass over the index, not over
 * the cache. -ESTALE: the frame table is damaged, start cold.
 */
static int adopt(struct kv_rowcache *rc, char *why, size_t n)
{
	uint64_t cur = atomic_load(&rc->hdr->state), kept = 0, dropped = 0;

	for (size_t f = 0; f < rc->nframes; f++) {
		struct kv_rc_frame *fr = &rc->frames[f];
		uint32_t g = atomic_load(&fr->gen);

		if (!g || g >= 1u << GEN_BITS || fr->used > rc->frame_size || fr->live > 1) {
			snprintf(why, n, "frame %zu of the row cache is damaged", f);
			return -ESTALE;
		}
	}
	if (cur > rc->nframes) {
		snprintf(why, n, "the row cache's current frame (%" PRIu64 ") is out of range",
			 cur);
		return -ESTALE;
	}
	/* killed between evicting the next frames and moving on: start a new one */
	rc->cur = cur < rc->nframes && !rc->frames[cur].live ? rc->nframes : (size_t)cur;
	for (size_t i = 0; i < rc->nbuckets * KV_RC_WAYS; i++) {
		uint64_t loc = atomic_load_explicit(&rc->slots[i].loc, memory_order_relaxed);
		uint32_t gen;
		size_t f, off;

		if (!loc)
			continue;
		unpack(loc, &gen, &f, &off);
		if (f < rc->nframes && rc->frames[f].live &&
		    atomic_load(&rc->frames[f].gen) == gen &&
		    off + sizeof(struct rc_row) <= rc->frames[f].used) {
			kept++;
			continue;
		}
		if (f < rc->nframes && atomic_load(&rc->frames[f].gen) != gen)
			continue; /* stale: an evicted frame's row, never read */
		atomic_store_explicit(&rc->slots[i].loc, 0, memory_order_relaxed);
		dropped++;
	}
	rc->kept_rows = kept;
	rc->kept_dropped = dropped;
	return 0;
}

/*
 * The row cache image (image.c) into a fresh region: hpr_load() with
 * HPR_SNAP_LAZY returns once the file's header and page table are checked;
 * the header, frame table and index are then mapped at once (a bad page
 * there fails the load here) and checked as a kept cache's are (the
 * header's owner is the token of the data dir's last save), while the
 * frames arrive on first touch or from the background fill. Anything
 * wrong: the load is cancelled, which empties the region, and false.
 */
static bool load_image(struct kv_rowcache *rc, struct kv_rc_image *img, const uint64_t geo[4],
		       uint64_t owner)
{
	char why[200] = "";
	bool index_err;
	int err;

	err = kv_mem_load_lazy(&rc->mem, img->fd);
	if (err) {
		snprintf(img->why, sizeof(img->why), "%s", kv_errmsg(err));
		return false; /* refused before it touched the region */
	}
	err = kv_mem_ready(&rc->mem, 0, rc->frames_off);
	index_err = err != 0;
	if (err)
		snprintf(why, sizeof(why), "its index pages: %s", hpr_strerror(err));
	else if (!kv_kept_match(rc->hdr, KV_KEPT_RC_MAGIC, rc->mem.size, img->token, geo, why,
				sizeof(why)) ||
		 adopt(rc, why, sizeof(why)))
		err = -ESTALE;
	if (err == -ESTALE && rc->hdr->magic == KV_KEPT_RC_MAGIC && rc->hdr->owner != img->token)
		snprintf(why, sizeof(why),
			 "saved for another data dir, or before the data dir's "
			 "last save (its CACHEIMAGE names another)");
	if (!err && (!(rc->ready = calloc(rc->nframes, sizeof(*rc->ready))) ||
		     !(rc->q = calloc(rc->nframes, sizeof(*rc->q)))))
		err = -ENOMEM;
	if (err) {
		int lerr;

		kv_mem_load_cancel(&rc->mem);
		lerr = kv_mem_load_wait(&rc->mem); /* the region is empty again */
		/* The index could not be mapped because the load had failed (the
		 * fill met a bad page first, on a loaded machine even the last
		 * one): the load's own error says why, whatever hpr_fault_in
		 * answered -- hpregion before the lazyfix branch said -EBUSY,
		 * "being loaded lazily: hpr_load_wait() first", once its thread
		 * had ended the failed load (cass_image damaged, 2 in 17).
		 * -ECANCELED is our cancel: the fault-in's own error stands. */
		if (index_err && lerr && lerr != -ECANCELED)
			snprintf(why, sizeof(why), "its index pages: %s", kv_errmsg(lerr));
		snprintf(img->why, sizeof(img->why), "the image is not usable: %s",
			 why[0] ? why : strerror(-err));
		return false;
	}
	/* from now on the header is this cache's: a kept one's owner again */
	kv_kept_stamp(rc->hdr, KV_KEPT_RC_MAGIC, rc->mem.size, owner, geo,
		      atomic_load(&rc->hdr->state));
	rc->nowait = img->nowait;
	atomic_store(&rc->loading, true);
	img->loaded = true;
	return true;
}

void kv_rc_loaded(struct kv_rowcache *rc)
{
	atomic_store_explicit(&rc->loading, false, memory_order_release);
	kv_rc_fetch_stop(rc);
}

static bool map_frame(struct kv_rowcache *rc, size_t f)
{
	if (kv_mem_ready(&rc->mem, rc->frames_off + f * rc->frame_size, rc->frame_size))
		return false;
	atomic_store_explicit(&rc->ready[f], KV_RC_READY, memory_order_release);
	return true;
}

void *kv_rc_fetcher(void *arg)
{
	struct kv_rowcache *rc = arg;

	pthread_mutex_lock(&rc->q_mu);
	for (;;) {
		size_t f;

		while (!rc->q_stop && rc->q_head == rc->q_tail)
			pthread_cond_wait(&rc->q_cv, &rc->q_mu);
		if (rc->q_stop)
			break;
		f = rc->q[rc->q_head++ % rc->nframes];
		pthread_mutex_unlock(&rc->q_mu);
		map_frame(rc, f); /* a failed load: the watcher goes cold */
		pthread_mutex_lock(&rc->q_mu);
	}
	pthread_mutex_unlock(&rc->q_mu);
	return NULL;
}

void kv_rc_fetch_stop(struct kv_rowcache *rc)
{
	pthread_mutex_lock(&rc->q_mu);
	rc->q_stop = true;
	pthread_cond_broadcast(&rc->q_cv);
	pthread_mutex_unlock(&rc->q_mu);
}

/* May frame f be touched? Always, unless an image is loading and f is not
 * mapped yet: then, if wait, map it now (hpr_fault_in loads it first,
 * verified), else say no -- and with nowait queue it for the fetchers --;
 * false too if the load failed: its unloaded pages are PROT_NONE. */
static bool frame_ready(struct kv_rowcache *rc, size_t f, bool wait)
{
	uint8_t st = 0;

	if (!atomic_load_explicit(&rc->loading, memory_order_acquire) ||
	    atomic_load_explicit(&rc->ready[f], memory_order_acquire) == KV_RC_READY)
		return true;
	if (wait)
		return map_frame(rc, f);
	if (!rc->nowait)
		return false;
	if (atomic_compare_exchange_strong(&rc->ready[f], &st, KV_RC_QUEUED)) {
		pthread_mutex_lock(&rc->q_mu);
		rc->q[rc->q_tail++ % rc->nframes] = f; /* at most nframes, once each */
		pthread_cond_signal(&rc->q_cv);
		pthread_mutex_unlock(&rc->q_mu);
	}
	return false;
}

int kv_rc_init(struct kv_rowcache *rc, size_t bytes, size_t row_hint, size_t nstripes,
	       enum kv_backing b, const char *dir, uint64_t keep_id, bool *warm,
	       struct kv_rc_image *img)
{
	const size_t unit = 2u << 20;
	size_t rows, meta, index_bytes, slots_bytes, nframes_max;
	uint64_t geo[4];
	char why[160] = "";
	int rc_;

	memset(rc, 0, sizeof(*rc));
	*warm = false;
	pthread_mutex_init(&rc->alloc_mu, NULL);
	pthread_mutex_init(&rc->q_mu, NULL);
	pthread_cond_init(&rc->q_cv, NULL);
	rows = bytes / (row_hint + sizeof(struct rc_row));
	rc->nbuckets = nstripes;
	while (rc->nbuckets * KV_RC_WAYS < rows * 2) /* load factor <= 1/2 */
		rc->nbuckets <<= 1;
	bytes = (bytes + unit - 1) & ~(unit - 1);
	if (bytes < 4 * unit)
		bytes = 4 * unit;
	/* [header][frame table][index] in the first huge pages, so a kept
	 * cache keeps its frames' generations with the index */
	nframes_max = bytes / unit;
	meta = sizeof(struct kv_kept_hdr) + nframes_max * sizeof(struct kv_rc_frame);
	meta = (meta + 63) & ~(size_t)63;
	slots_bytes = rc->nbuckets * KV_RC_WAYS * sizeof(struct kv_rc_slot);
	index_bytes = (meta + slots_bytes + unit - 1) & ~(unit - 1);
	if (keep_id)
		rc_ = kv_mem_create_kept(&rc->mem, "rowcache", index_bytes + bytes, dir);
	else
		rc_ = kv_mem_create(&rc->mem, "rowcache", index_bytes + bytes, b, dir);
	if (rc_)
		return rc_;
	rc->frame_size = rc->mem.unit;
	if (rc->frame_size > (size_t)8 << OFF_BITS) {
		kv_mem_destroy(&rc->mem);
		return kv_fail(-EINVAL, "row cache frames of %zu bytes are too big",
			       rc->frame_size);
	}
	rc->frames_off = (index_bytes + rc->frame_size - 1) & ~(rc->frame_size - 1);
	rc->nframes = (rc->mem.size - rc->frames_off) / rc->frame_size;
	if (rc->nframes > nframes_max)
		rc->nframes = nframes_max; /* the frame table's room */
	rc->free_ahead = rc->nframes / 32 ? rc->nframes / 32 : 1;
	rc->cur = rc->nframes;
	rc->hdr = (struct kv_kept_hdr *)rc->mem.base;
	rc->frames = (struct kv_rc_frame *)(rc->mem.base + sizeof(struct kv_kept_hdr));
	rc->slots = (struct kv_rc_slot *)(rc->mem.base + meta);
	/* a kept cache, or one saved as an image: rows carry their crc */
	rc->check_crc = keep_id != 0 || img;
	geo[0] = rc->nbuckets;
	geo[1] = rc->nframes;
	geo[2] = rc->frame_size;
	geo[3] = rc->frames_off;
	if (img && img->fd >= 0 && !rc->mem.attached && load_image(rc, img, geo, keep_id)) {
		*warm = true;
		return 0;
	}
	/* The index is used at once: fault it in now. The frames are
	 * prefaulted in the background by kv_open() while requests run. */
	rc_ = kv_mem_fault(&rc->mem, 0, rc->frames_off);
	if (rc_) {
		kv_mem_destroy(&rc->mem);
		return rc_;
	}
	if (rc->mem.attached) {
		if (kv_kept_match(rc->hdr, KV_KEPT_RC_MAGIC, rc->mem.size, keep_id, geo, why,
				  sizeof(why)) &&
		    !adopt(rc, why, sizeof(why))) {
			*warm = true;
			return 0;
		}
		snprintf(rc->cold_why, sizeof(rc->cold_why), "%s", why);
	}
	/* a new cache. The header goes first, so that a process killed while
	 * this one clears the rest leaves a cache no one attaches to */
	rc->hdr->magic = 0;
	memset(rc->mem.base + sizeof(struct kv_kept_hdr), 0,
	       meta + slots_bytes - sizeof(struct kv_kept_hdr));
	for (size_t i = 0; i < rc->nframes; i++)
		rc->frames[i].gen = 1;
	kv_kept_stamp(rc->hdr, KV_KEPT_RC_MAGIC, rc->mem.size, keep_id, geo, rc->nframes);
	return 0;
}

void kv_rc_destroy(struct kv_rowcache *rc)
{
	kv_mem_destroy(&rc->mem);
	free((void *)rc->ready);
	free(rc->q);
	rc->ready = NULL;
	rc->q = NULL;
}

static struct kv_rc_slot *bucket_of(struct kv_rowcache *rc, uint64_t key)
{
	return &rc->slots[(kv_hash64(key) & (rc->nbuckets - 1)) * KV_RC_WAYS];
}

static char *frame_base(struct kv_rowcache *rc, size_t f)
{
	return rc->mem.base + rc->frames_off + f * rc->frame_size;
}

static bool slot_live(struct kv_rowcache *rc, uint64_t loc)
{
	uint32_t gen;
	size_t f, off;

	if (!loc)
		return false;
	unpack(loc, &gen, &f, &off);
	return atomic_load_explicit(&rc->frames[f].gen, memory_order_acquire) == gen;
}

/*
 * A hit's bytes [off, off + cap) into buf (whole: the row, which must fit
 * in cap); *len the bytes copied, *vlen the row's length. A part copies
 * only its bytes; a kept row's crc is then computed over the row where it
 * lies in the frame, before the generation check that says whether it was
 * intact all along.
 */
static bool lookup(struct kv_rowcache *rc, uint64_t key, uint32_t off_in, bool whole, void *buf,
		   uint32_t cap, uint32_t *len, uint32_t *vlen, uint64_t *seq)
{
	struct kv_rc_slot *s = bucket_of(rc, key);

	for (int i = 0; i < KV_RC_WAYS && !atomic_load_explicit(&rc->dead, memory_order_acquire);
	     i++) {
		/* acquire: pairs with kv_rc_put's release, so the row behind a
		 * loc we see is written */
		uint64_t loc = atomic_load_explicit(&s[i].loc, memory_order_acquire);
		const struct rc_row *row;
		uint64_t rkey, rseq;
		uint32_t gen, rlen, rcrc, n, crc = 0;
		size_t f, off;

		if (atomic_load_explicit(&s[i].key, memory_order_relaxed) != key ||
		    !slot_live(rc, loc))
			continue;
		unpack(loc, &gen, &f, &off);
		if (f >= rc->nframes || !frame_ready(rc, f, !rc->nowait))
			break;
		row = (const struct rc_row *)(frame_base(rc, f) + off);
		/* The frame may be evicted and refilled while we copy (seqlock
		 * style): read each header field once, keep the copy inside the
		 * frame whatever the length says, and believe nothing until the
		 * generation is checked again below. */
		rkey = __atomic_load_n(&row->key, __ATOMIC_RELAXED);
		rseq = __atomic_load_n(&row->seq, __ATOMIC_RELAXED);
		rlen = __atomic_load_n(&row->len, __ATOMIC_RELAXED);
		rcrc = __atomic_load_n(&row->crc, __ATOMIC_RELAXED);
		if (rkey != key || (whole && rlen > cap) ||
		    off + sizeof(*row) + rlen > rc->frame_size)
			break;
		n = whole ? rlen : off_in >= rlen ? 0 : rlen - off_in < cap ? rlen - off_in : cap;
		memcpy(buf, (const char *)(row + 1) + (whole ? 0 : off_in), n);
		if (rc->check_crc && !whole)
			crc = row_crc(rkey, rseq, rlen, row + 1);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&rc->frames[f].gen, memory_order_relaxed) != gen) {
			atomic_fetch_add_explicit(&rc->torn, 1, memory_order_relaxed);
			break; /* evicted while we copied */
		}
		if (rc->check_crc && whole)
			crc = row_crc(rkey, rseq, rlen, buf);
		if (rc->check_crc && crc != rcrc) {
			/* a kept row damaged since it was written: never returned;
			 * the slot goes (unless a writer replaced it meanwhile) */
			atomic_compare_exchange_strong(&s[i].loc, &loc, 0);
			atomic_fetch_add_explicit(&rc->crc_dropped, 1, memory_order_relaxed);
			break;
		}
		*len = n;
		*vlen = rlen;
		*seq = rseq;
		atomic_fetch_add_explicit(&rc->hits, 1, memory_order_relaxed);
		return true;
	}
	atomic_fetch_add_explicit(&rc->misses, 1, memory_order_relaxed);
	return false;
}

bool kv_rc_get(struct kv_rowcache *rc, uint64_t key, void *buf, uint32_t cap, uint32_t *len,
	       uint64_t *seq)
{
	uint32_t vlen;

	return lookup(rc, key, 0, true, buf, cap, len, &vlen, seq);
}

bool kv_rc_get_part(struct kv_rowcache *rc, uint64_t key, uint32_t off, void *buf, uint32_t cap,
		    uint32_t *len, uint32_t *vlen, uint64_t *seq)
{
	return lookup(rc, key, off, false, buf, cap, len, vlen, seq);
}

static void evict(struct kv_rowcache *rc, size_t f)
{
	struct kv_rc_frame *fr = &rc->frames[f];
	uint32_t g = (atomic_load(&fr->gen) + 1) & ((1u << GEN_BITS) - 1);

	/* release: readers that see the new gen after copying discard */
	atomic_store_explicit(&fr->gen, g ? g : 1, memory_order_release);
	fr->live = false;
	kv_mem_release(&rc->mem, rc->frames_off + f * rc->frame_size, rc->frame_size);
	atomic_fetch_add_explicit(&rc->evictions, 1, memory_order_relaxed);
}

/* Move the writer to the next frame in the ring. Caller holds alloc_mu. */
static int next_frame(struct kv_rowcache *rc)
{
	size_t next = rc->cur == rc->nframes ? 0 : (rc->cur + 1) % rc->nframes;
	size_t ahead = (next + rc->free_ahead) % rc->nframes;
	int err;

	if (rc->frames[next].live)
		evict(rc, next);
	if (ahead != next && rc->frames[ahead].live)
		evict(rc, ahead);
	/* first use of this frame (or reuse after eviction): make it present */
	err = kv_mem_fault(&rc->mem, rc->frames_off + next * rc->frame_size, rc->frame_size);
	if (err)
		return err;
	if (rc->ready) /* an image loading: the fault-in mapped it */
		atomic_store_explicit(&rc->ready[next], KV_RC_READY, memory_order_release);
	rc->frames[next].live = true;
	rc->frames[next].used = 0;
	rc->cur = next;
	atomic_store_explicit(&rc->hdr->state, next, memory_order_relaxed);
	return 0;
}

void kv_rc_put(struct kv_rowcache *rc, uint64_t key, uint64_t seq, const void *val, uint32_t len)
{
	size_t need = sizeof(struct rc_row) + ((len + 7u) & ~7u), off;
	struct kv_rc_slot *s = bucket_of(rc, key), *victim = NULL;
	struct rc_row *row;
	uint64_t loc;
	bool full;

	if (need > rc->frame_size || atomic_load_explicit(&rc->dead, memory_order_acquire))
		return;
	pthread_mutex_lock(&rc->alloc_mu);
	full = rc->cur == rc->nframes || rc->frames[rc->cur].used + need > rc->frame_size;
	/* An image loading: the frame the row would go to must be mapped, and
	 * a fill never waits for a page from the image's disk (under alloc_mu
	 * it would stall every other fill, and the readers behind their row
	 * locks): until the frame is there, the row is not cached. */
	if (!frame_ready(
		    rc, full ? (rc->cur == rc->nframes ? 0 : (rc->cur + 1) % rc->nframes) : rc->cur,
		    false) ||
	    (full && next_frame(rc))) {
		/* cannot fault a frame in (tmpfs full?): just don't cache */
		pthread_mutex_unlock(&rc->alloc_mu);
		return;
	}
	off = rc->frames[rc->cur].used;
	rc->frames[rc->cur].used += (uint32_t)need;
	row = (struct rc_row *)(frame_base(rc, rc->cur) + off);
	/* the header as a reader loads it: one access per field */
	__atomic_store_n(&row->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&row->seq, seq, __ATOMIC_RELAXED);
	__atomic_store_n(&row->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&row->crc, rc->check_crc ? row_crc(key, seq, len, val) : 0,
			 __ATOMIC_RELAXED);
	memcpy(row + 1, val, len);
	loc = pack(atomic_load(&rc->frames[rc->cur].gen), rc->cur, off);
	/* copied under the lock so the frame cannot be recycled mid-copy */
	pthread_mutex_unlock(&rc->alloc_mu);

	for (int i = 0; i < KV_RC_WAYS; i++) {
		if (atomic_load_explicit(&s[i].key, memory_order_relaxed) == key) {
			victim = &s[i];
			break;
		}
		if (!victim &&
		    !slot_live(rc, atomic_load_explicit(&s[i].loc, memory_order_relaxed)))
			victim = &s[i];
	}
	if (!victim) /* bucket full of live rows: replace one at random */
		victim = &s[(kv_hash64(seq) >> 7) % KV_RC_WAYS];
	atomic_store_explicit(&victim->key, key, memory_order_relaxed);
	/* release: a reader that sees loc sees the row (and the key) */
	atomic_store_explicit(&victim->loc, loc, memory_order_release);
	atomic_fetch_add_explicit(&rc->inserts, 1, memory_order_relaxed);
}

void kv_rc_invalidate(struct kv_rowcache *rc, uint64_t key)
{
	struct kv_rc_slot *s = bucket_of(rc, key);

	for (int i = 0; i < KV_RC_WAYS; i++)
		if (atomic_load_explicit(&s[i].key, memory_order_relaxed) == key)
			atomic_store_explicit(&s[i].loc, 0, memory_order_release);
}
