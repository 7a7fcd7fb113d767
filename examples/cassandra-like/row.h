/* SPDX-License-Identifier: MIT */
/*
 * The YCSB driver's records: fieldcount fields of fieldlen bytes (YCSB's
 * defaults: 10 x 100 B) behind a small header, stored as one value of the
 * engine. An update writes one field (YCSB's writeallfields=false): the
 * engine keeps whole rows, so the driver reads the row, changes the field
 * and writes the row back, under a lock on the key so that two updates of
 * different fields of one row do not lose each other's field.
 */
#ifndef KV_ROW_H
#define KV_ROW_H

#include "engine.h"

#include <stdint.h>

/* at the head of a row: the key (8), crc32c of the rest of the row (4), pad */
#define ROW_HDR 16

struct row_fmt {
	unsigned fields, fieldlen;
};

static inline uint32_t row_len(const struct row_fmt *f)
{
	return ROW_HDR + f->fields * f->fieldlen;
}

/* field i of a row */
static inline uint8_t *row_field(uint8_t *row, const struct row_fmt *f, unsigned i)
{
	return row + ROW_HDR + (size_t)i * f->fieldlen;
}

/* a new row of key: every field from rng, sealed */
void row_make(uint8_t *row, const struct row_fmt *f, uint64_t key, uint64_t *rng);
/* field i new from rng; the row must be sealed again (row_seal) */
void row_fill_field(uint8_t *row, const struct row_fmt *f, unsigned i, uint64_t *rng);
/* the header's crc over the rest of the row */
void row_seal(uint8_t *row, const struct row_fmt *f);
/* the row's crc (the acknowledged write's fingerprint) */
uint32_t row_crc(const uint8_t *row);
/* 0 if row (len bytes) is an intact row of key */
int row_check(const uint8_t *row, uint32_t len, const struct row_fmt *f, uint64_t key);

/*
 * YCSB's read: field < 0 reads every field (readallfields=true, YCSB's
 * default): the whole row, row_len() bytes into buf, which row_check can
 * check. field >= 0 reads that field alone (readallfields=false): its
 * fieldlen bytes into buf, copied out of the engine without the rest of
 * the row (kv_get_part). *len: the bytes read. Returns kv_get's or
 * kv_get_part's error, or -EBADMSG if the row is not row_len() bytes.
 */
int row_read(struct kv_db *db, const struct row_fmt *f, uint64_t key, int field, uint8_t *buf,
	     uint32_t *len, uint64_t *seq);

/*
 * YCSB's update with writeallfields=false: field `field` of key's row gets
 * new bytes, every other field stays as it was. A read of the row and a
 * put of the whole row (the engine stores rows whole), under a lock on the
 * key: the cost of one row read per update. A key with no row gets a whole
 * new row. buf: row_len() bytes; on 0 it holds the row written, *seq its
 * sequence number. Returns kv_get's or kv_put's error, or -EBADMSG if the
 * row read is damaged (it is not written back).
 */
int row_update_field(struct kv_db *db, const struct row_fmt *f, uint64_t key, unsigned field,
		     uint64_t *rng, uint8_t *buf, uint64_t *seq);
/* the same for every field (writeallfields=true): a put, no read */
int row_update_all(struct kv_db *db, const struct row_fmt *f, uint64_t key, uint64_t *rng,
		   uint8_t *buf, uint64_t *seq);

#endif /* KV_ROW_H */
