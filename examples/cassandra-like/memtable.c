/* SPDX-License-Identifier: MIT */
/*
 * The memtable: a skiplist of (key, seq, value) nodes bump-allocated in an
 * arena, LevelDB-style. The arena is one half of the memtable region; while
 * one half takes writes, the other is flushed to a table, then given back
 * with hpr_release_lazy and faulted in again (hpr_fault_in) when it takes
 * writes next.
 *
 * An update does not overwrite: it inserts a new node, ordered by key
 * ascending then seq descending, so the first node of a key is its newest
 * version. One writer at a time (mt->mu); readers take no lock: a node is
 * fully written before a release store links it in, and readers follow
 * links with acquire loads.
 *
 * A node is linked in as soon as its commit-log record is appended, before
 * the record is durable; kv_mt_get() skips versions newer than the log's
 * durable sequence number, so no read returns a write that is not yet
 * acknowledged (and may never be, if the log write fails).
 *
 * Links are offsets from the arena's base, not pointers, and every node
 * carries its log record's crc: a kept memtable (kv_opts.keep, restart.c)
 * is found again by the next process, at another address, and checked
 * node by node against the commit log.
 *
 * This is where huge pages pay most: every insert and every lookup chases
 * ~log2(n) pointers scattered over the whole arena -- one TLB miss each
 * with 4 KiB pages once the arena is bigger than the TLB's reach.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "util.h"

#include <string.h>

size_t kv_mt_node_size(unsigned height, uint32_t vlen)
{
	size_t s = sizeof(struct kv_mt_node) + height * sizeof(uint64_t) + vlen;

	return (s + 7) & ~(size_t)7;
}

#define node_size kv_mt_node_size

int kv_mt_init(struct kv_memtable *mt, struct kv_mem *mem, size_t off, size_t size)
{
	memset(mt, 0, sizeof(*mt));
	mt->mem = mem;
	mt->off = off;
	mt->size = size;
	mt->base = mem->base + off;
	mt->rng = 0x9e3779b97f4a7c15ull ^ off;
	pthread_mutex_init(&mt->mu, NULL);
	return 0;
}

int kv_mt_reset(struct kv_memtable *mt)
{
	int rc = kv_mem_fault(mt->mem, mt->off, mt->size);

	if (rc)
		return rc;
	mt->head = (struct kv_mt_node *)mt->base; /* at offset 0: "no node" */
	memset(mt->head, 0, node_size(KV_MT_MAXH, 0));
	mt->head->height = KV_MT_MAXH;
	mt->used = node_size(KV_MT_MAXH, 0);
	atomic_store(&mt->height, 1);
	atomic_store(&mt->entries, 0);
	mt->min_seq = mt->max_seq = 0;
	mt->last_log_gen = 0;
	mt->sealed = false;
	return 0;
}

void kv_mt_release(struct kv_memtable *mt)
{
	mt->head = NULL;
	kv_mem_release(mt->mem, mt->off, mt->size);
}

bool kv_mt_has_room(const struct kv_memtable *mt, uint32_t vlen)
{
	return mt->used + node_size(KV_MT_MAXH, vlen) <= mt->size;
}

/* a < b in list order: key ascending, then newest (highest seq) first */
static bool before(const struct kv_mt_node *n, uint64_t key, uint64_t seq)
{
	return n->key < key || (n->key == key && n->seq > seq);
}

static struct kv_mt_node *next_of(const struct kv_memtable *mt, const struct kv_mt_node *n, int lvl)
{
	return kv_mt_at(mt, atomic_load_explicit(&((struct kv_mt_node *)n)->next[lvl],
						 memory_order_acquire));
}

void kv_mt_insert(struct kv_memtable *mt, uint64_t key, uint64_t seq, const void *val,
		  uint32_t vlen, uint32_t crc)
{
	struct kv_mt_node *prev[KV_MT_MAXH], *x = mt->head, *n;
	int h = 1, top = atomic_load_explicit(&mt->height, memory_order_relaxed);

	/* height: geometric with p = 1/4, as in LevelDB */
	while (h < KV_MT_MAXH && (kv_rand(&mt->rng) & 3) == 0)
		h++;
	for (int lvl = top - 1; lvl >= 0; lvl--) {
		struct kv_mt_node *nx;

		while ((nx = next_of(mt, x, lvl)) && before(nx, key, seq))
			x = nx;
		prev[lvl] = x;
	}
	if (h > top) {
		for (int lvl = top; lvl < h; lvl++)
			prev[lvl] = mt->head;
		/* readers seeing the new height before the links find NULL
		 * there and drop a level: harmless */
		atomic_store_explicit(&mt->height, h, memory_order_relaxed);
	}
	n = (struct kv_mt_node *)(mt->base + mt->used);
	mt->used += node_size((unsigned)h, vlen);
	n->key = key;
	n->seq = seq;
	n->vlen = vlen;
	n->height = (uint32_t)h;
	n->crc = crc;
	n->pad = 0;
	memcpy((char *)kv_mt_value(n), val, vlen);
	/* bottom up: a process killed between two levels leaves a list that
	 * is whole at level 0 and merely skips the node higher up */
	for (int lvl = 0; lvl < h; lvl++) {
		atomic_store_explicit(&n->next[lvl],
				      atomic_load_explicit(&prev[lvl]->next[lvl],
							   memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(&prev[lvl]->next[lvl], (uint64_t)((char *)n - mt->base),
				      memory_order_release);
	}
	if (!mt->min_seq)
		mt->min_seq = seq;
	mt->max_seq = seq;
	atomic_fetch_add_explicit(&mt->entries, 1, memory_order_relaxed);
}

const struct kv_mt_node *kv_mt_get(const struct kv_memtable *mt, uint64_t key, uint64_t upto,
				   bool *newer)
{
	const struct kv_mt_node *x = mt->head, *nx = NULL;

	for (int lvl = atomic_load_explicit(&mt->height, memory_order_relaxed) - 1; lvl >= 0;
	     lvl--) {
		while ((nx = next_of(mt, x, lvl)) && nx->key < key)
			x = nx;
	}
	/* a key's versions are newest first: skip those not yet durable */
	while (nx && nx->key == key && nx->seq > upto) {
		*newer = true;
		nx = next_of(mt, nx, 0);
	}
	return nx && nx->key == key ? nx : NULL;
}

const struct kv_mt_node *kv_mt_first(const struct kv_memtable *mt)
{
	return next_of(mt, mt->head, 0);
}

const struct kv_mt_node *kv_mt_next_key(const struct kv_memtable *mt, const struct kv_mt_node *n)
{
	const struct kv_mt_node *x = next_of(mt, n, 0);

	while (x && x->key == n->key)
		x = next_of(mt, x, 0);
	return x;
}
