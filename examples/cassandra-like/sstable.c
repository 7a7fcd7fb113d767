/* SPDX-License-Identifier: MIT */
/*
 * SSTables: immutable sorted files, one record per key.
 *
 *   [rec][rec]...[rec] [sparse index] [bloom filter] [footer]
 *
 * rec = key, seq, vlen, crc32c, value (8-byte aligned). The sparse index
 * holds (key, offset) of every KV_SST_INDEX_EVERY-th record; the bloom
 * filter (10 bits a key, 7 probes, ~1 % false positives) lets a lookup
 * skip tables that do not hold the key. The footer has its own CRC.
 *
 * Written to <gen>.tmp, fsync'ed, renamed to sst-<gen>.db and the dir
 * fsync'ed: a table exists whole or not at all, so a crash or a full tmpfs
 * (ENOSPC) mid-flush leaves no corrupt table behind, only a .tmp that the
 * next open deletes.
 *
 * Read through a read-only shared mmap, as Cassandra does by default
 * (disk_access_mode: mmap). On a tmpfs mounted huge=always the file's
 * pages are huge pages of the page cache and the mapping is PMD-mapped
 * (the kernel aligns shmem mappings to 2 MiB), so index probes and record
 * reads across a large table cost a TLB entry per 2 MiB, not per 4 KiB.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SST_MAGIC 0x3154535356504831ull /* "1HPVSST1"-ish */
#define KV_SST_INDEX_EVERY 16
#define BLOOM_BITS_PER_KEY 10
#define BLOOM_K 7
#define WBUF (1u << 20)

static size_t rec_size(uint32_t vlen)
{
	return sizeof(struct kv_sst_rec) + ((vlen + 7u) & ~7u);
}

static uint32_t rec_crc(const struct kv_sst_rec *r, const void *val)
{
	uint32_t c = kv_crc32c(0, r, 20); /* key, seq, vlen */

	return kv_crc32c(c, val, r->vlen);
}

bool kv_sst_rec_ok(const struct kv_sst_rec *r)
{
	return rec_crc(r, kv_sst_value(r)) == r->crc;
}

static uint32_t footer_crc(const struct kv_sst_footer *f)
{
	return kv_crc32c(0, f, offsetof(struct kv_sst_footer, crc));
}

/* double hashing: probe i at h1 + i*h2 */
static bool bloom_has(const uint8_t *bits, uint64_t nbits, uint32_t k, uint64_t key)
{
	uint64_t h = kv_hash64(key ^ 0x5bd1e995u), h2 = (h >> 33) | 1;

	for (uint32_t i = 0; i < k; i++, h += h2)
		if (!(bits[(h % nbits) >> 3] & (1u << ((h % nbits) & 7))))
			return false;
	return true;
}

static void bloom_add(uint8_t *bits, uint64_t nbits, uint32_t k, uint64_t key)
{
	uint64_t h = kv_hash64(key ^ 0x5bd1e995u), h2 = (h >> 33) | 1;

	for (uint32_t i = 0; i < k; i++, h += h2)
		bits[(h % nbits) >> 3] |= (uint8_t)(1u << ((h % nbits) & 7));
}

int kv_sst_open(const char *path, uint64_t gen, struct kv_sst **out)
{
	struct kv_sst *t;
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kv_fail(-errno, "cannot open table %s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		close(fd);
		return kv_fail(-ENOMEM, "out of memory");
	}
	snprintf(t->path, sizeof(t->path), "%s", path);
	t->gen = gen;
	t->size = (size_t)st.st_size;
	if (t->size < sizeof(t->f)) {
		rc = kv_fail(-EBADMSG, "table %s is truncated (%zu bytes)", path, t->size);
		goto fail;
	}
	t->map = mmap(NULL, t->size, PROT_READ, MAP_SHARED, fd, 0);
	if (t->map == MAP_FAILED) {
		rc = kv_fail(-errno, "cannot map table %s: %s", path, strerror(errno));
		goto fail;
	}
	/* a tmpfs mounted huge=advise gives huge pages only where asked */
	madvise((void *)t->map, t->size, MADV_HUGEPAGE);
	madvise((void *)t->map, t->size, MADV_RANDOM);
	memcpy(&t->f, t->map + t->size - sizeof(t->f), sizeof(t->f));
	if (t->f.magic != SST_MAGIC || footer_crc(&t->f) != t->f.crc ||
	    t->f.data_end > t->size || t->f.index_off + t->f.index_count * 16 > t->size ||
	    t->f.bloom_off + (t->f.bloom_bits + 7) / 8 > t->size || !t->f.bloom_bits) {
		munmap((void *)t->map, t->size);
		rc = kv_fail(-EBADMSG, "table %s has a bad footer: not written by this "
				       "engine, or damaged",
			     path);
		goto fail;
	}
	close(fd);
	*out = t;
	return 0;
fail:
	close(fd);
	free(t);
	return rc;
}

void kv_sst_close(struct kv_sst *t, bool unlink_file)
{
	if (!t)
		return;
	munmap((void *)t->map, t->size);
	if (unlink_file)
		unlink(t->path);
	free(t);
}

const struct kv_sst_rec *kv_sst_first(const struct kv_sst *t)
{
	return t->f.count ? (const struct kv_sst_rec *)t->map : NULL;
}

const struct kv_sst_rec *kv_sst_next(const struct kv_sst *t, const struct kv_sst_rec *r)
{
	size_t off = (size_t)((const uint8_t *)r - t->map) + rec_size(r->vlen);

	return off < t->f.data_end ? (const struct kv_sst_rec *)(t->map + off) : NULL;
}

const struct kv_sst_rec *kv_sst_get(const struct kv_sst *t, uint64_t key, int *err)
{
	const uint64_t *idx = (const uint64_t *)(t->map + t->f.index_off);
	const struct kv_sst_rec *r;
	size_t lo = 0, hi = t->f.index_count;

	if (key < t->f.min_key || key > t->f.max_key ||
	    !bloom_has(t->map + t->f.bloom_off, t->f.bloom_bits, t->f.bloom_k, key))
		return NULL;
	/* last index entry with key <= wanted */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (idx[2 * mid] <= key)
			lo = mid;
		else
			hi = mid;
	}
	r = (const struct kv_sst_rec *)(t->map + idx[2 * lo + 1]);
	for (int i = 0; r && i < KV_SST_INDEX_EVERY; i++, r = kv_sst_next(t, r)) {
		if (r->key > key)
			return NULL;
		if (r->key == key) {
			if (!kv_sst_rec_ok(r)) {
				*err = kv_fail(-EIO, "table %s: record of key %" PRIu64
						     " fails its checksum",
					       t->path, key);
				return NULL;
			}
			return r;
		}
	}
	return NULL;
}

int kv_sst_writer_open(struct kv_sst_writer *w, const char *dir, uint64_t gen,
		       uint64_t max_count)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	snprintf(w->tmp, sizeof(w->tmp), "%s/sst-%016" PRIu64 ".tmp", dir, gen);
	snprintf(w->path, sizeof(w->path), "%s/sst-%016" PRIu64 ".db", dir, gen);
	w->gen = gen;
	w->f.magic = SST_MAGIC;
	w->f.min_key = UINT64_MAX;
	w->f.min_seq = UINT64_MAX;
	w->f.bloom_k = BLOOM_K;
	w->f.bloom_bits = (max_count ? max_count : 1) * BLOOM_BITS_PER_KEY;
	w->bloom = calloc(1, (w->f.bloom_bits + 7) / 8);
	w->buf = malloc(WBUF);
	if (!w->bloom || !w->buf) {
		free(w->bloom);
		free(w->buf);
		return kv_fail(-ENOMEM, "out of memory for a table writer");
	}
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		int rc = -errno;

		free(w->bloom);
		free(w->buf);
		return kv_fail(rc, "cannot create %s: %s", w->tmp, strerror(-rc));
	}
	return 0;
}

/* A failed table write: say what happened and what to do about it. */
static int werr(struct kv_sst_writer *w, int rc)
{
	return kv_fail(rc, "writing table %s failed: %s%s", w->tmp, strerror(-rc),
		       rc == -ENOSPC ? " (the tmpfs is full: raise its size= with "
				       "mount -o remount,size=...; no table was damaged)"
				     : "");
}

static int wput(struct kv_sst_writer *w, const void *p, size_t n)
{
	while (n) {
		size_t c = WBUF - w->blen < n ? WBUF - w->blen : n;
		int rc;

		memcpy(w->buf + w->blen, p, c);
		w->blen += c;
		w->off += c;
		p = (const char *)p + c;
		n -= c;
		if (w->blen == WBUF) {
			rc = kv_write_all(w->fd, w->buf, w->blen);
			if (rc)
				return werr(w, rc);
			w->blen = 0;
		}
	}
	return 0;
}

int kv_sst_writer_add(struct kv_sst_writer *w, uint64_t key, uint64_t seq, const void *val,
		      uint32_t vlen)
{
	struct kv_sst_rec r = { .key = key, .seq = seq, .vlen = vlen };
	static const char zero[8];
	int rc;

	if (w->f.count % KV_SST_INDEX_EVERY == 0) {
		if (w->nindex == w->capindex) {
			size_t cap = w->capindex ? w->capindex * 2 : 1024;
			uint64_t *n = realloc(w->index, cap * 16);

			if (!n)
				return kv_fail(-ENOMEM, "out of memory for a table index");
			w->index = n;
			w->capindex = cap;
		}
		w->index[2 * w->nindex] = key;
		w->index[2 * w->nindex + 1] = w->off;
		w->nindex++;
	}
	r.crc = rec_crc(&r, val);
	if ((rc = wput(w, &r, sizeof(r))) || (rc = wput(w, val, vlen)) ||
	    (rc = wput(w, zero, rec_size(vlen) - sizeof(r) - vlen)))
		return rc;
	bloom_add(w->bloom, w->f.bloom_bits, w->f.bloom_k, key);
	if (key < w->f.min_key)
		w->f.min_key = key;
	w->f.max_key = key; /* keys come in ascending order */
	if (seq < w->f.min_seq)
		w->f.min_seq = seq;
	if (seq > w->f.max_seq)
		w->f.max_seq = seq;
	w->f.count++;
	return 0;
}

int kv_sst_writer_finish(struct kv_sst_writer *w, struct kv_sst **out)
{
	static const char zero[8];
	int rc;

	w->f.data_end = w->off;
	w->f.index_off = w->off;
	w->f.index_count = w->nindex;
	if ((rc = wput(w, w->index, w->nindex * 16)))
		goto fail;
	w->f.bloom_off = w->off;
	if ((rc = wput(w, w->bloom, (w->f.bloom_bits + 7) / 8)) ||
	    (rc = wput(w, zero, (8 - w->off % 8) % 8)))
		goto fail;
	w->f.crc = footer_crc(&w->f);
	if ((rc = wput(w, &w->f, sizeof(w->f))))
		goto fail;
	if ((rc = kv_write_all(w->fd, w->buf, w->blen))) {
		rc = werr(w, rc);
		goto fail;
	}
	if (fsync(w->fd)) {
		rc = werr(w, -errno);
		goto fail;
	}
	close(w->fd);
	w->fd = -1;
	if (rename(w->tmp, w->path)) {
		rc = werr(w, -errno);
		goto fail;
	}
	rc = kv_fsync_dir(w->dir);
	free(w->index);
	free(w->bloom);
	free(w->buf);
	if (rc)
		return kv_fail(rc, "fsync of %s: %s", w->dir, strerror(-rc));
	return kv_sst_open(w->path, w->gen, out);
fail: /* rc carries its message (werr) */
	kv_sst_writer_abort(w);
	return rc;
}

void kv_sst_writer_abort(struct kv_sst_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	unlink(w->tmp);
	free(w->index);
	free(w->bloom);
	free(w->buf);
	w->index = NULL;
	w->bloom = NULL;
	w->buf = NULL;
}
