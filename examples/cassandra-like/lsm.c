/* SPDX-License-Identifier: MIT */
/*
 * The log-structured part of the database: the tables on disk (opening
 * them at startup, dropping leftovers of a crashed compaction), the
 * flusher thread (immutable memtable -> new table -> drop its log
 * segments -> give the arena back) and the compactor thread (size-tiered:
 * merge adjacent tables of similar size into one).
 */
#define _GNU_SOURCE
#include "db.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_newest(const void *a, const void *b)
{
	const struct kv_sst *x = *(struct kv_sst *const *)a, *y = *(struct kv_sst *const *)b;

	return x->f.max_seq > y->f.max_seq ? -1 : x->f.max_seq < y->f.max_seq;
}

int kv__load_tables(struct kv_db *db)
{
	DIR *d = opendir(db->dir);
	struct dirent *e;
	size_t cap = 0;
	uint64_t maxgen = 0;
	int rc = 0;

	if (!d)
		return kv_fail(-errno, "cannot list %s: %s", db->dir, strerror(errno));
	while ((e = readdir(d))) {
		char p[PATH_MAX + 300], ext[8];
		uint64_t g;
		struct kv_sst *t;

		if (sscanf(e->d_name, "sst-%" SCNu64 ".%4s", &g, ext) != 2)
			continue;
		snprintf(p, sizeof(p), "%s/%s", db->dir, e->d_name);
		if (g > maxgen)
			maxgen = g;
		if (!strcmp(ext, "tmp")) { /* a flush or compaction cut short */
			unlink(p);
			continue;
		}
		if (strcmp(ext, "db"))
			continue;
		rc = kv_sst_open(p, g, &t);
		if (rc)
			break;
		if (db->ntables == cap) {
			struct kv_sst **n =
				realloc(db->tables, (cap = cap ? cap * 2 : 16) * sizeof(*n));

			if (!n) {
				kv_sst_close(t, false);
				rc = kv_fail(-ENOMEM, "out of memory");
				break;
			}
			db->tables = n;
		}
		db->tables[db->ntables++] = t;
	}
	closedir(d);
	atomic_store(&db->next_gen, maxgen + 1);
	if (rc)
		return rc;
	if (db->ntables)
		qsort(db->tables, db->ntables, sizeof(*db->tables), cmp_newest);
	/* A crash between installing a compaction's output and deleting its
	 * inputs leaves tables whose seq range lies inside the output's. */
	for (size_t j = 0; j < db->ntables; j++) {
		struct kv_sst *t = db->tables[j];

		for (size_t i = 0; i < db->ntables; i++) {
			struct kv_sst *u = db->tables[i];

			if (i == j || !u || !t || u->f.min_seq > t->f.min_seq ||
			    u->f.max_seq < t->f.max_seq || u->gen < t->gen)
				continue;
			kv__note(db, "dropping %s: its records are all in %s", t->path, u->path);
			kv_sst_close(t, true);
			db->tables[j] = NULL;
			break;
		}
	}
	size_t k = 0;
	for (size_t j = 0; j < db->ntables; j++)
		if (db->tables[j])
			db->tables[k++] = db->tables[j];
	db->ntables = k;
	return 0;
}

/* Write a memtable out as a table (newest version of each key only). */
int kv__flush_mt(struct kv_db *db, struct kv_memtable *mt, struct kv_sst **out)
{
	struct kv_sst_writer w;
	int rc;

	rc = kv_sst_writer_open(&w, db->dir, atomic_fetch_add(&db->next_gen, 1),
				atomic_load(&mt->entries));
	if (rc)
		return rc;
	for (const struct kv_mt_node *n = kv_mt_first(mt); n; n = kv_mt_next_key(mt, n)) {
		rc = kv_sst_writer_add(&w, n->key, n->seq, kv_mt_value(n), n->vlen);
		if (rc) {
			kv_sst_writer_abort(&w);
			return rc;
		}
	}
	return kv_sst_writer_finish(&w, out);
}

int kv__add_table_front(struct kv_db *db, struct kv_sst *t)
{
	struct kv_sst **n = realloc(db->tables, (db->ntables + 1) * sizeof(*n));

	if (!n)
		return kv_fail(-ENOMEM, "out of memory");
	memmove(n + 1, n, db->ntables * sizeof(*n));
	n[0] = t;
	db->tables = n;
	db->ntables++;
	return 0;
}

/* ---- background threads ---- */

void *kv__flusher_main(void *arg)
{
	struct kv_db *db = arg;

	pthread_mutex_lock(&db->bg_mu);
	for (;;) {
		struct kv_memtable *mt;
		struct kv_sst *t;
		int rc;

		while (!db->stop && (!db->imm_busy || db->bg_err))
			pthread_cond_wait(&db->bg_cv, &db->bg_mu);
		if (db->stop)
			break;
		pthread_mutex_unlock(&db->bg_mu);

		mt = db->imm;
		if (db->o.flush_hook)
			db->o.flush_hook(db->o.flush_hook_arg);
		rc = kv__flush_mt(db, mt, &t);
		if (!rc) {
			pthread_rwlock_wrlock(&db->lsm);
			rc = kv__add_table_front(db, t);
			if (!rc) {
				db->imm = NULL;
				/* keep: the table is in place; a restart must not
				 * take the half as unflushed (restart.c) */
				if (db->mthdr)
					atomic_store(&db->mthdr->state,
						     KV_MT_STATE(db->active->idx, 0, 0));
			}
			pthread_rwlock_unlock(&db->lsm);
			if (rc)
				kv_sst_close(t, true);
		}
		if (!rc) {
			/* its records are in the table now: drop their log
			 * segments and give the arena back */
			kv_log_drop(db->logdir, mt->last_log_gen);
			kv_mt_release(mt);
			atomic_fetch_add(&db->flushes, 1);
		} else {
			kv__note(
				db,
				"%s; writes will be refused once the memtable is full, reads go on",
				kv_errmsg(rc));
		}
		pthread_mutex_lock(&db->bg_mu);
		if (rc) {
			db->bg_err = rc;
			snprintf(db->bg_msg, sizeof(db->bg_msg), "%s", kv_errmsg(rc));
		} else {
			db->imm_busy = false;
		}
		db->compact_wanted = !rc;
		pthread_cond_broadcast(&db->bg_cv);
	}
	pthread_mutex_unlock(&db->bg_mu);
	return NULL;
}

/* Size-tiered: the newest run of compact_min adjacent tables whose sizes are
 * within 4x of each other. Adjacent, so the output keeps the newest-first
 * order of the list (readers take the first table that has the key). */
static size_t pick_window(struct kv_db *db, size_t *start)
{
	size_t k = db->o.compact_min ? db->o.compact_min : 4;

	for (size_t i = 0; i + k <= db->ntables; i++) {
		size_t lo = SIZE_MAX, hi = 0;

		for (size_t j = i; j < i + k; j++) {
			lo = db->tables[j]->size < lo ? db->tables[j]->size : lo;
			hi = db->tables[j]->size > hi ? db->tables[j]->size : hi;
		}
		if (hi <= 4 * lo) {
			*start = i;
			return k;
		}
	}
	return 0;
}

/* k-way merge of in[0..k) (newest first): keep each key's newest record */
static int merge(struct kv_db *db, struct kv_sst **in, size_t k, struct kv_sst **out)
{
	const struct kv_sst_rec *cur[16];
	struct kv_sst_writer w;
	uint64_t total = 0;
	int rc;

	for (size_t i = 0; i < k; i++) {
		cur[i] = kv_sst_first(in[i]);
		total += in[i]->f.count;
	}
	rc = kv_sst_writer_open(&w, db->dir, atomic_fetch_add(&db->next_gen, 1), total);
	if (rc)
		return rc;
	for (;;) {
		const struct kv_sst_rec *best = NULL;

		for (size_t i = 0; i < k; i++)
			if (cur[i] && (!best || cur[i]->key < best->key ||
				       (cur[i]->key == best->key && cur[i]->seq > best->seq)))
				best = cur[i];
		if (!best)
			break;
		if (!kv_sst_rec_ok(best)) {
			rc = kv_fail(-EIO,
				     "compaction: a record of key %" PRIu64
				     " fails its checksum; table left as it is",
				     best->key);
			break;
		}
		rc = kv_sst_writer_add(&w, best->key, best->seq, kv_sst_value(best), best->vlen);
		if (rc)
			break;
		uint64_t key = best->key;
		for (size_t i = 0; i < k; i++)
			while (cur[i] && cur[i]->key == key)
				cur[i] = kv_sst_next(in[i], cur[i]);
		if (__atomic_load_n(&db->stop, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
	}
	if (rc) {
		kv_sst_writer_abort(&w);
		return rc;
	}
	return kv_sst_writer_finish(&w, out);
}

void *kv__compactor_main(void *arg)
{
	struct kv_db *db = arg;

	pthread_mutex_lock(&db->bg_mu);
	for (;;) {
		while (!db->stop && (!db->compact_wanted || db->compact_err))
			pthread_cond_wait(&db->bg_cv, &db->bg_mu);
		if (db->stop)
			break;
		db->compact_wanted = false;
		db->compacting = true;
		pthread_mutex_unlock(&db->bg_mu);

		for (;;) {
			struct kv_sst *in[16], *t = NULL;
			size_t start = 0, k;
			int rc;

			pthread_rwlock_rdlock(&db->lsm);
			k = pick_window(db, &start);
			if (k)
				memcpy(in, db->tables + start, k * sizeof(*in));
			pthread_rwlock_unlock(&db->lsm);
			if (!k)
				break;
			rc = merge(db, in, k, &t);
			if (rc) {
				if (rc != -ECANCELED)
					kv__note(db, "compaction stopped: %s", kv_errmsg(rc));
				pthread_mutex_lock(&db->bg_mu);
				db->compact_err = rc;
				pthread_mutex_unlock(&db->bg_mu);
				break;
			}
			/* Only the flusher changes the list meanwhile, and only
			 * at its head: find the window again by its first table. */
			pthread_rwlock_wrlock(&db->lsm);
			for (start = 0; db->tables[start] != in[0]; start++)
				;
			db->tables[start] = t;
			memmove(db->tables + start + 1, db->tables + start + k,
				(db->ntables - start - k) * sizeof(*db->tables));
			db->ntables -= k - 1;
			pthread_rwlock_unlock(&db->lsm);
			/* no reader can still hold them: readers keep the lsm
			 * lock for a whole lookup */
			for (size_t i = 0; i < k; i++)
				kv_sst_close(in[i], true);
			kv_fsync_dir(db->dir);
			atomic_fetch_add(&db->compactions, 1);
		}
		pthread_mutex_lock(&db->bg_mu);
		db->compacting = false;
		pthread_cond_broadcast(&db->bg_cv);
	}
	pthread_mutex_unlock(&db->bg_mu);
	return NULL;
}

int kv_db_verify(struct kv_db *db, uint64_t *records)
{
	int rc = 0;

	*records = 0;
	pthread_rwlock_rdlock(&db->lsm);
	for (size_t i = 0; i < db->ntables && !rc; i++) {
		const struct kv_sst *t = db->tables[i];
		uint64_t prev = 0, n = 0;

		for (const struct kv_sst_rec *r = kv_sst_first(t); r; r = kv_sst_next(t, r)) {
			if (!kv_sst_rec_ok(r) || (n && r->key <= prev)) {
				rc = kv_fail(-EIO, "table %s: record %" PRIu64 " is damaged",
					     t->path, n);
				break;
			}
			prev = r->key;
			n++;
		}
		if (!rc && n != t->f.count)
			rc = kv_fail(-EIO, "table %s: %" PRIu64 " records, footer says %" PRIu64,
				     t->path, n, (uint64_t)t->f.count);
		*records += n;
	}
	pthread_rwlock_unlock(&db->lsm);
	return rc;
}
