/* SPDX-License-Identifier: MIT */
/*
 * Fast restart (issue #17): with kv_opts.keep the row cache and the two
 * memtables live in kept regions -- files on the data dir's tmpfs huge=
 * mount that hpregion attaches to again (HPR_F_ATTACH) -- so a store that
 * was killed comes back with its row cache warm and its memtable whole,
 * instead of an empty cache and a replay of the commit log.
 *
 * Nothing in a kept region is believed until it is checked:
 *
 *   header      every kept region starts with struct kv_kept_hdr: magic,
 *               version, size, layout, and the data dir's KEEPID (a region
 *               kept for another data dir, or before a run without keep,
 *               is not used), under a crc. Any mismatch: start cold.
 *   row cache   the frame table and every index slot are checked at open
 *               (rowcache.c, adopt()); each row carries a crc that a read
 *               checks before it returns the row, so a damaged row is
 *               dropped (a miss) and never returned.
 *   memtables   (here) each node carries its log record's crc and links by
 *               offsets, so the list is the same at any address. Both
 *               halves are walked: every node inside the arena, its crc
 *               good, level 0 in order, every higher level a sublist of
 *               level 0. Then the commit log decides: a node whose record
 *               (seq, key, crc) is not in the log was never acknowledged
 *               and is unlinked; a record in the log that no node holds
 *               (the process died between the log write and the insert) is
 *               inserted from the log. So the memtable ends up holding
 *               exactly what a replay into an empty one would, and no
 *               acknowledged write is lost, no unacknowledged one seen.
 *               Anything else -- a damaged node or link, no room for a
 *               missing record -- and the memtable starts cold: both
 *               halves emptied and the log replayed, as without keep.
 *
 * The region's state word says which half takes writes and whether the
 * other was switched out and not yet flushed (kv_opts.flush_hook's window):
 * then that half comes back as the immutable memtable, its records those
 * of the log segments up to the one recorded at the switch, and the
 * flusher writes it out as it would have.
 *
 * Why the row cache needs no check against the tables: a put invalidates
 * the key's cache slot before it appends its record to the log, and a
 * read fills the cache only with a durable version (db.c), both in the
 * kept region, so after a kill -9 the cache holds no row older than what
 * the log holds -- acknowledged or not. That holds for this data dir's
 * history only, hence KEEPID.
 */
#define _GNU_SOURCE
#include "db.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---- the data dir's id, and the headers ---- */

int kv_keep_id(const char *dir, bool keep, uint64_t *id)
{
	char p[PATH_MAX + 16];
	uint64_t v = 0;
	int fd, rc = 0;

	snprintf(p, sizeof(p), "%s/KEEPID", dir);
	if (!keep) {
		if (unlink(p) && errno != ENOENT)
			return kv_fail(-errno, "cannot remove %s: %s", p, strerror(errno));
		return 0;
	}
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, &v, sizeof(v));

		close(fd);
		if (n == (ssize_t)sizeof(v) && v) {
			*id = v;
			return 0;
		}
	}
	while (!v)
		if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
			v = kv_hash64(kv_now_ns() ^ (uint64_t)getpid());
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return kv_fail(-errno, "cannot create %s: %s", p, strerror(errno));
	rc = kv_write_all(fd, &v, sizeof(v));
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (!rc)
		rc = kv_fsync_dir(dir);
	if (rc)
		return kv_fail(rc, "cannot write %s: %s", p, strerror(-rc));
	*id = v;
	return 0;
}

static uint32_t hdr_crc(const struct kv_kept_hdr *h)
{
	return kv_crc32c(0, h, offsetof(struct kv_kept_hdr, crc));
}

void kv_kept_stamp(struct kv_kept_hdr *h, uint64_t magic, size_t size, uint64_t owner,
		   const uint64_t geo[4], uint64_t state)
{
	h->magic = 0; /* not a valid header until the crc is written */
	h->version = KV_KEPT_VERSION;
	h->hdr_bytes = sizeof(*h);
	h->region_size = size;
	h->owner = owner;
	memcpy(h->geo, geo, sizeof(h->geo));
	h->pad = 0;
	atomic_store(&h->state, state);
	h->magic = magic;
	h->crc = hdr_crc(h);
}

bool kv_kept_match(const struct kv_kept_hdr *h, uint64_t magic, size_t size, uint64_t owner,
		   const uint64_t geo[4], char *why, size_t n)
{
	if (h->magic != magic || h->crc != hdr_crc(h))
		snprintf(why, n, "no valid header (a new region, or one killed while it was made)");
	else if (h->version != KV_KEPT_VERSION || h->hdr_bytes != sizeof(*h))
		snprintf(why, n, "format version %u, this engine writes %u", h->version,
			 KV_KEPT_VERSION);
	else if (h->owner != owner)
		snprintf(why, n, "kept for another data dir, or before a run without keep");
	else if (h->region_size != size || memcmp(h->geo, geo, sizeof(h->geo)))
		snprintf(why, n, "kept with another size or layout");
	else
		return true;
	return false;
}

/* ---- the memtables: checked, then reconciled with the commit log ---- */

/* a record of the log since the tables: what the memtables must hold */
struct lrec {
	uint64_t seq, key, gen;
	uint32_t crc;
	bool have; /* a kept node holds it */
};

struct lrecs {
	struct lrec *v;
	size_t n, cap;
	bool sorted;
};

static int collect(const struct kv_log_rec *r, void *arg)
{
	struct lrecs *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		struct lrec *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return kv_fail(-ENOMEM, "out of memory");
		l->v = v;
		l->cap = cap;
	}
	if (l->n && l->v[l->n - 1].seq >= r->seq)
		l->sorted = false;
	l->v[l->n++] = (struct lrec){ r->seq, r->key, r->gen, r->crc, false };
	return 0;
}

static int cmp_seq(const void *a, const void *b)
{
	const struct lrec *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct lrec *find_seq(struct lrecs *l, uint64_t seq)
{
	struct lrec k = { .seq = seq };

	return bsearch(&k, l->v, l->n, sizeof(k), cmp_seq);
}

/* what a walk of one half found */
struct walk {
	uint64_t *offs; /* nodes in level-0 order */
	size_t n;
	size_t used; /* end of the furthest node: where inserts go on */
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* list order: key ascending, then newest (highest seq) first */
static bool before(const struct kv_mt_node *a, uint64_t key, uint64_t seq)
{
	return a->key < key || (a->key == key && a->seq > seq);
}

static uint64_t next_off(const struct kv_mt_node *n, int lvl)
{
	return atomic_load_explicit(&((struct kv_mt_node *)n)->next[lvl], memory_order_relaxed);
}

/*
 * Walk a half as a reader would, trusting nothing: every offset inside the
 * arena and aligned, every node's height, length and crc good, level 0
 * strictly in list order (so no cycle), every higher level a sublist of
 * level 0 in order. -ESTALE and why on the first fault.
 */
static int walk_half(struct kv_memtable *mt, struct walk *w, char *why, size_t wn)
{
	const size_t hsz = kv_mt_node_size(KV_MT_MAXH, 0);
	const struct kv_mt_node *h = (const struct kv_mt_node *)mt->base, *prev = NULL;
	uint64_t *sorted = NULL, off;
	size_t cap = 0;
	int rc = -ESTALE;

	memset(w, 0, sizeof(*w));
	w->used = hsz;
	if (h->height != KV_MT_MAXH || h->key || h->seq || h->vlen) {
		snprintf(why, wn, "memtable half %d: no list head", mt->idx);
		return -ESTALE;
	}
	for (off = next_off(h, 0); off; off = next_off(prev, 0)) {
		const struct kv_mt_node *n = kv_mt_at(mt, off);
		size_t sz;

		if (off < hsz || off % 8 || off + sizeof(*n) > mt->size || n->height < 1 ||
		    n->height > KV_MT_MAXH || n->vlen > (1u << 16) ||
		    off + (sz = kv_mt_node_size(n->height, n->vlen)) > mt->size) {
			snprintf(why, wn,
				 "memtable half %d: node %zu at offset %" PRIu64 " is damaged",
				 mt->idx, w->n, off);
			goto out;
		}
		if (kv_log_crc(n->key, n->seq, kv_mt_value(n), n->vlen) != n->crc) {
			snprintf(why, wn,
				 "memtable half %d: node %zu (key %" PRIu64 ") fails its crc",
				 mt->idx, w->n, n->key);
			goto out;
		}
		if (prev && !before(prev, n->key, n->seq)) {
			snprintf(why, wn, "memtable half %d: node %zu is out of order", mt->idx,
				 w->n);
			goto out;
		}
		if (w->n == cap) {
			uint64_t *v = realloc(w->offs, (cap = cap ? cap * 2 : 4096) * sizeof(*v));

			if (!v) {
				rc = kv_fail(-ENOMEM, "out of memory");
				goto out;
			}
			w->offs = v;
		}
		w->offs[w->n++] = off;
		if (off + sz > w->used)
			w->used = off + sz;
		prev = n;
	}
	if (w->n && !(sorted = malloc(w->n * sizeof(*sorted)))) {
		rc = kv_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if (w->n)
		memcpy(sorted, w->offs, w->n * sizeof(*sorted));
	qsort(sorted, w->n, sizeof(*sorted), cmp_u64);
	for (int lvl = 1; lvl < KV_MT_MAXH; lvl++) {
		const struct kv_mt_node *p = NULL;

		for (off = next_off(h, lvl); off; off = next_off(p, lvl)) {
			const struct kv_mt_node *n = kv_mt_at(mt, off);

			if (!bsearch(&off, sorted, w->n, sizeof(off), cmp_u64) ||
			    n->height <= (uint32_t)lvl || (p && !before(p, n->key, n->seq))) {
				snprintf(why, wn,
					 "memtable half %d: level %d links to offset %" PRIu64
					 ", not a node of level 0 in order",
					 mt->idx, lvl, off);
				goto out;
			}
			p = n;
		}
	}
	rc = 0;
out:
	free(sorted);
	if (rc) {
		free(w->offs);
		w->offs = NULL;
	}
	return rc;
}

/* Unlink n from every level, top down: a process killed midway leaves n
 * linked at the lower levels only, which the next walk accepts. Open is
 * single-threaded: no reader races this. */
static void unlink_node(struct kv_memtable *mt, struct kv_mt_node *n)
{
	struct kv_mt_node *x = mt->head, *prev[KV_MT_MAXH];
	uint64_t noff = (uint64_t)((char *)n - mt->base), o;

	for (int lvl = KV_MT_MAXH - 1; lvl >= 0; lvl--) {
		while ((o = next_off(x, lvl)) && o != noff &&
		       before(kv_mt_at(mt, o), n->key, n->seq))
			x = kv_mt_at(mt, o);
		prev[lvl] = x;
	}
	for (int lvl = (int)n->height - 1; lvl >= 0; lvl--)
		if (next_off(prev[lvl], lvl) == noff)
			atomic_store_explicit(&prev[lvl]->next[lvl], next_off(n, lvl),
					      memory_order_relaxed);
}

/* entries, seq range and height of a half from its list */
static void settle(struct kv_memtable *mt, size_t used)
{
	uint64_t n = 0;
	int h = 1;

	mt->head = (struct kv_mt_node *)mt->base;
	mt->used = used;
	mt->min_seq = UINT64_MAX;
	mt->max_seq = 0;
	for (const struct kv_mt_node *x = kv_mt_first(mt); x; x = kv_mt_at(mt, next_off(x, 0))) {
		n++;
		if (x->seq < mt->min_seq)
			mt->min_seq = x->seq;
		if (x->seq > mt->max_seq)
			mt->max_seq = x->seq;
	}
	if (!n)
		mt->min_seq = 0;
	for (int lvl = KV_MT_MAXH - 1; lvl > 0; lvl--)
		if (next_off(mt->head, lvl)) {
			h = lvl + 1;
			break;
		}
	atomic_store(&mt->height, h);
	atomic_store(&mt->entries, n);
	mt->rng = kv_hash64(kv_now_ns() ^ mt->off) | 1;
}

struct fill_ctx {
	struct kv_db *db;
	struct lrecs *l;
	struct kv_memtable *a, *imm;
	uint64_t imm_gen, inserted;
	char *why;
	size_t wn;
};

/* the log's records that no kept node holds: insert them */
static int fill_missing(const struct kv_log_rec *r, void *arg)
{
	struct fill_ctx *c = arg;
	struct lrec *e = find_seq(c->l, r->seq);
	struct kv_memtable *mt = c->imm && r->gen <= c->imm_gen ? c->imm : c->a;

	if (e && e->have)
		return 0;
	if (!kv_mt_has_room(mt, r->len)) {
		/* a flush here would put newer kept nodes in a table under
		 * older replayed ones: start cold instead */
		snprintf(c->why, c->wn,
			 "no room in the kept memtable for the log's missing records");
		return -ESTALE;
	}
	kv_mt_insert(mt, r->key, r->seq, r->val, r->len, r->crc);
	c->inserted++;
	return 0;
}

int kv__mt_recover(struct kv_db *db, uint64_t tmax, uint64_t *max_gen, uint64_t *max_seq,
		   uint64_t *torn)
{
	uint64_t st = atomic_load(&db->mthdr->state), imm_gen = st >> 2;
	struct kv_memtable *a = &db->mt[st & 1], *imm = st & 2 ? &db->mt[!(st & 1)] : NULL;
	struct kv_keep_info *ki = &db->keep;
	struct lrecs l = { .sorted = true };
	struct walk wa = { 0 }, wi = { 0 };
	struct fill_ctx fc;
	int rc;

	rc = walk_half(a, &wa, ki->mt_why, sizeof(ki->mt_why));
	if (!rc && imm)
		rc = walk_half(imm, &wi, ki->mt_why, sizeof(ki->mt_why));
	if (rc)
		goto out;
	a->head = (struct kv_mt_node *)a->base;
	if (imm) {
		imm->head = (struct kv_mt_node *)imm->base;
		settle(imm, wi.used);
		if (!wi.n || imm->max_seq <= tmax) {
			/* killed after its table was renamed into place:
			 * flushed already, its records are in the tables */
			imm = NULL;
			ki->imm_flushed = true;
		}
	}
	rc = kv_log_replay(db->logdir, tmax, collect, &l, max_gen, max_seq, torn);
	if (rc)
		goto out;
	if (!l.sorted)
		qsort(l.v, l.n, sizeof(*l.v), cmp_seq);

	/* every kept node must be a record of the log, in its half's
	 * segments; the others were never acknowledged (or are in the
	 * tables already): unlink them */
	for (int h = 0; h < 2; h++) {
		struct kv_memtable *mt = h ? imm : a;
		struct walk *w = h ? &wi : &wa;

		for (size_t i = 0; mt && i < w->n; i++) {
			struct kv_mt_node *n = kv_mt_at(mt, w->offs[i]);
			struct lrec *e = find_seq(&l, n->seq);
			bool ours = e && (!imm || (mt == imm) == (e->gen <= imm_gen));

			if (e && !e->have && e->key == n->key && e->crc == n->crc && ours) {
				e->have = true;
				ki->mt_kept++;
			} else {
				unlink_node(mt, n);
				ki->mt_discarded++;
			}
		}
	}
	settle(a, wa.used);
	if (imm)
		settle(imm, wi.used);

	/* the log's records no node holds, from the log */
	fc = (struct fill_ctx){ .db = db,
				.l = &l,
				.a = a,
				.imm = imm,
				.imm_gen = imm_gen,
				.why = ki->mt_why,
				.wn = sizeof(ki->mt_why) };
	rc = kv_log_replay(db->logdir, tmax, fill_missing, &fc, max_gen, max_seq, torn);
	ki->mt_replayed = fc.inserted;
	if (rc)
		goto out;
	settle(a, a->used);
	a->sealed = false;
	a->last_log_gen = 0;
	db->active = a;
	if (imm) {
		settle(imm, imm->used);
		imm->sealed = true;
		imm->last_log_gen = imm_gen;
		db->imm = imm;
		db->imm_busy = true; /* the flusher takes it when it starts */
		ki->imm_recovered = true;
	}
	atomic_store(&db->mthdr->state, KV_MT_STATE(a->idx, imm != NULL, imm ? imm_gen : 0));
out:
	free(l.v);
	free(wa.offs);
	free(wi.offs);
	return rc;
}
