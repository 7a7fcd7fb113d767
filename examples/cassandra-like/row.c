/* SPDX-License-Identifier: MIT */
/*
 * The YCSB driver's rows (row.h): their layout, their check, the read of
 * every field or of one, and the one-field update as a read-modify-write
 * of the row under a key lock.
 */
#define _GNU_SOURCE
#include "row.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

void row_fill_field(uint8_t *row, const struct row_fmt *f, unsigned i, uint64_t *rng)
{
	uint8_t *p = row_field(row, f, i);
	uint64_t w = kv_rand(rng);

	for (unsigned o = 0; o < f->fieldlen; o += 8) {
		unsigned n = f->fieldlen - o < 8 ? f->fieldlen - o : 8;

		memcpy(p + o, &w, n);
		w = w * 0x9e3779b97f4a7c15ull + o + 1;
	}
}

uint32_t row_crc(const uint8_t *row)
{
	uint32_t crc;

	memcpy(&crc, row + 8, 4);
	return crc;
}

static uint32_t compute_crc(const uint8_t *row, uint32_t len)
{
	return kv_crc32c(kv_crc32c(0, row, 8), row + ROW_HDR, len - ROW_HDR);
}

void row_seal(uint8_t *row, const struct row_fmt *f)
{
	uint32_t crc = compute_crc(row, row_len(f));

	memcpy(row + 8, &crc, 4);
	memset(row + 12, 0, 4);
}

void row_make(uint8_t *row, const struct row_fmt *f, uint64_t key, uint64_t *rng)
{
	memcpy(row, &key, 8);
	for (unsigned i = 0; i < f->fields; i++)
		row_fill_field(row, f, i, rng);
	row_seal(row, f);
}

int row_check(const uint8_t *row, uint32_t len, const struct row_fmt *f, uint64_t key)
{
	uint64_t k;

	if (len != row_len(f))
		return -1;
	memcpy(&k, row, 8);
	return k == key && row_crc(row) == compute_crc(row, len) ? 0 : -1;
}

int row_read(struct kv_db *db, const struct row_fmt *f, uint64_t key, int field, uint8_t *buf,
	     uint32_t *len, uint64_t *seq)
{
	uint32_t vlen = 0;
	int rc;

	if (field < 0)
		return kv_get(db, key, buf, row_len(f), len, seq);
	rc = kv_get_part(db, key, ROW_HDR + (uint32_t)field * f->fieldlen, buf, f->fieldlen, len,
			 &vlen, seq);
	if (rc == -ERANGE || (!rc && (vlen != row_len(f) || *len != f->fieldlen)))
		rc = -EBADMSG;
	return rc;
}

/* Updates of one key are serialized by one of these: enough stripes that
 * 20-1000 client threads rarely share one by chance. */
#define ROW_LOCKS 4096
static pthread_mutex_t row_locks[ROW_LOCKS];
static pthread_once_t row_locks_once = PTHREAD_ONCE_INIT;

static void row_locks_init(void)
{
	for (int i = 0; i < ROW_LOCKS; i++)
		pthread_mutex_init(&row_locks[i], NULL);
}

int row_update_field(struct kv_db *db, const struct row_fmt *f, uint64_t key, unsigned field,
		     uint64_t *rng, uint8_t *buf, uint64_t *seq)
{
	pthread_mutex_t *mu;
	uint32_t len = 0;
	int rc;

	pthread_once(&row_locks_once, row_locks_init);
	mu = &row_locks[kv_hash64(key) % ROW_LOCKS];
	pthread_mutex_lock(mu);
	/* no cache fill: the put below invalidates the key's cache slot anyway,
	 * and the update's read must not count as a workload read. The read
	 * sees every acknowledged write of the key: a put returns only once
	 * durable, and the lock orders this update after it. */
	rc = kv_get_nofill(db, key, buf, row_len(f), &len, NULL);
	if (rc == -ENOENT) {
		row_make(buf, f, key, rng); /* no row yet: a whole one */
		rc = 0;
	} else if (!rc && row_check(buf, len, f, key)) {
		rc = -EBADMSG; /* never write a damaged row back as if intact */
	} else if (!rc) {
		row_fill_field(buf, f, field, rng);
		row_seal(buf, f);
	}
	if (!rc)
		rc = kv_put(db, key, buf, row_len(f), seq);
	pthread_mutex_unlock(mu);
	return rc;
}

int row_update_all(struct kv_db *db, const struct row_fmt *f, uint64_t key, uint64_t *rng,
		   uint8_t *buf, uint64_t *seq)
{
	row_make(buf, f, key, rng);
	return kv_put(db, key, buf, row_len(f), seq);
}
