/* SPDX-License-Identifier: MIT */
/*
 * The commit log: every write is appended here before it is applied, and a
 * put is acknowledged only when its record is on stable storage.
 *
 * Group commit: appenders copy their record into an in-memory buffer and
 * wait; one syncer thread swaps the buffer out, writes it with a single
 * write() and fdatasync(), then wakes every appender whose record was in
 * the batch. Under load a batch holds many records, so the cost of the
 * sync is shared (Cassandra's "batch" commitlog_sync mode).
 *
 * Segments: commitlog-<gen>.log. A new segment starts when the memtable is
 * switched; a segment is deleted once the memtable holding its records has
 * been flushed to a table. Each record carries a CRC, so replay stops at a
 * torn tail (a crash mid-write, or a write cut short by a full tmpfs).
 */
#define _GNU_SOURCE
#include "engine.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MAGIC 0x4b564c47u /* "KVLG" */

struct logrec {
	uint32_t magic, len;
	uint32_t crc, pad; /* crc32c of seq, key, len and the value */
	uint64_t seq, key;
};

static size_t rec_size(uint32_t len)
{
	return sizeof(struct logrec) + ((len + 7u) & ~7u);
}

uint32_t kv_log_crc(uint64_t key, uint64_t seq, const void *val, uint32_t len)
{
	uint64_t sk[2] = { seq, key }; /* as they lie in struct logrec */
	uint32_t c = kv_crc32c(0, sk, 16);

	c = kv_crc32c(c, &len, 4);
	return kv_crc32c(c, val, len);
}

static uint32_t rec_crc(const struct logrec *h, const void *val)
{
	return kv_log_crc(h->key, h->seq, val, h->len);
}

static void seg_path(char *p, size_t n, const char *dir, uint64_t gen)
{
	snprintf(p, n, "%s/commitlog-%016" PRIu64 ".log", dir, gen);
}

/* The sticky error, with the syncer's message, on the caller's thread.
 * Caller holds l->mu. */
static int log_err(struct kv_log *l)
{
	return l->errmsg[0] ? kv_fail(l->err, "%s", l->errmsg) : l->err;
}

static void *syncer_main(void *arg)
{
	struct kv_log *l = arg;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		char *b;
		size_t n, cap;
		uint64_t target;
		int fd, rc, sticky, cut;

		while (!l->stop && l->len == 0)
			pthread_cond_wait(&l->work, &l->mu);
		if (l->len == 0)
			break; /* stopping and drained */
		/* take the batch: appenders go on filling the other buffer */
		b = l->buf;
		cap = l->cap;
		l->buf = l->spare;
		l->cap = l->spare_cap;
		l->spare = b;
		l->spare_cap = cap;
		n = l->len;
		l->len = 0;
		target = l->appended;
		fd = l->fd;
		l->syncing = true;
		sticky = l->err;
		pthread_mutex_unlock(&l->mu);

		if (l->hook)
			l->hook(l->hook_arg);
		rc = sticky ? sticky : kv_write_all(fd, b, n);
		if (!rc && fdatasync(fd))
			rc = -errno;
		/* A failed batch is never acknowledged: cut what of it reached
		 * the file, so a reopen does not replay writes whose put failed. */
		cut = rc && !sticky && ftruncate(fd, l->synced_off) ? errno : 0;

		pthread_mutex_lock(&l->mu);
		l->syncing = false;
		if (!rc)
			l->synced_off += (off_t)n;
		if (rc && !l->err) {
			l->err = kv_fail(rc, "commit log write failed: %s%s%s%s", strerror(-rc),
					 rc == -ENOSPC ? " (the tmpfs is full: raise its "
							 "size= with mount -o remount,size=...)" :
							 "",
					 cut ? "; the failed batch could not be cut off the "
					       "log, so a reopen may replay it: " :
					       "",
					 cut ? strerror(cut) : "");
			/* kv_fail's message is this thread's: keep it for the
			 * clients, whose puts fail with it (log_err) */
			snprintf(l->errmsg, sizeof(l->errmsg), "%s", kv_errmsg(rc));
		}
		if (!l->err) {
			/* release: a reader that sees it sees the records' nodes */
			atomic_store_explicit(&l->durable, target, memory_order_release);
			l->batches++;
			l->synced_bytes += n;
		}
		pthread_cond_broadcast(&l->done);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static int open_segment(struct kv_log *l)
{
	char p[PATH_MAX + 64];
	int fd, rc;

	seg_path(p, sizeof(p), l->dir, l->gen);
	fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return kv_fail(-errno, "cannot create commit log %s: %s", p, strerror(errno));
	rc = kv_fsync_dir(l->dir); /* the new name must survive a crash */
	if (rc) {
		close(fd);
		return kv_fail(rc, "fsync of %s: %s", l->dir, strerror(-rc));
	}
	l->fd = fd;
	l->synced_off = lseek(fd, 0, SEEK_END);
	if (l->synced_off < 0)
		l->synced_off = 0;
	return 0;
}

int kv_log_open(struct kv_log *l, const char *dir, uint64_t gen, uint64_t last_seq,
		void (*hook)(void *arg), void *hook_arg)
{
	int rc;

	memset(l, 0, sizeof(*l));
	l->hook = hook;
	l->hook_arg = hook_arg;
	snprintf(l->dir, sizeof(l->dir), "%s", dir);
	l->gen = gen;
	l->appended = last_seq;
	atomic_store(&l->durable, last_seq);
	l->cap = l->spare_cap = 1 << 20;
	l->buf = malloc(l->cap);
	l->spare = malloc(l->spare_cap);
	if (!l->buf || !l->spare) {
		free(l->buf);
		free(l->spare);
		return kv_fail(-ENOMEM, "out of memory for the commit log buffers");
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->work, NULL);
	pthread_cond_init(&l->done, NULL);
	rc = open_segment(l);
	if (!rc && pthread_create(&l->syncer, NULL, syncer_main, l))
		rc = kv_fail(-EAGAIN, "cannot start the commit log thread");
	if (rc) {
		if (l->fd > 0)
			close(l->fd);
		free(l->buf);
		free(l->spare);
	}
	return rc;
}

void kv_log_close(struct kv_log *l)
{
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->work);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->syncer, NULL);
	close(l->fd);
	free(l->buf);
	free(l->spare);
}

int kv_log_append(struct kv_log *l, uint64_t key, const void *val, uint32_t len, uint64_t *seq,
		  uint32_t *crc)
{
	struct logrec h = { .magic = LOG_MAGIC, .len = len, .key = key };
	size_t need = rec_size(len);
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	if (l->err) {
		rc = log_err(l);
		goto out;
	}
	if (l->len + need > l->cap) {
		size_t cap = l->cap * 2 > l->len + need ? l->cap * 2 : l->len + need;
		char *b = realloc(l->buf, cap);

		if (!b) {
			rc = kv_fail(-ENOMEM, "out of memory for the commit log buffer");
			goto out;
		}
		l->buf = b;
		l->cap = cap;
	}
	h.seq = ++l->appended;
	h.crc = rec_crc(&h, val);
	memcpy(l->buf + l->len, &h, sizeof(h));
	memcpy(l->buf + l->len + sizeof(h), val, len);
	memset(l->buf + l->len + sizeof(h) + len, 0, need - sizeof(h) - len);
	l->len += need;
	*seq = h.seq;
	*crc = h.crc;
	if (!l->syncing)
		pthread_cond_signal(&l->work);
out:
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int kv_log_wait(struct kv_log *l, uint64_t seq)
{
	int rc;

	pthread_mutex_lock(&l->mu);
	while (l->durable < seq && !l->err) {
		/* a batch in flight leaves work for the next round */
		if (l->len && !l->syncing)
			pthread_cond_signal(&l->work);
		pthread_cond_wait(&l->done, &l->mu);
	}
	rc = l->durable >= seq ? 0 : log_err(l);
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int kv_log_rotate(struct kv_log *l, uint64_t *old_gen)
{
	int old_fd, rc;

	pthread_mutex_lock(&l->mu);
	while ((l->len || l->syncing) && !l->err) {
		pthread_cond_signal(&l->work);
		pthread_cond_wait(&l->done, &l->mu);
	}
	if (l->err) {
		rc = log_err(l);
		goto out;
	}
	old_fd = l->fd;
	*old_gen = l->gen++;
	rc = open_segment(l);
	if (rc) {
		l->gen--;
		l->fd = old_fd;
		goto out;
	}
	close(old_fd);
out:
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* gens of the segments in dir, sorted; caller frees */
static int list_segments(const char *dir, uint64_t **out, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint64_t *v = NULL, g;
	size_t cnt = 0, cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return kv_fail(-errno, "cannot list %s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		char tail[8];

		if (sscanf(e->d_name, "commitlog-%" SCNu64 ".%4s", &g, tail) != 2 ||
		    strcmp(tail, "log"))
			continue;
		if (cnt == cap) {
			uint64_t *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv) {
				free(v);
				closedir(d);
				return kv_fail(-ENOMEM, "out of memory");
			}
			v = nv;
		}
		v[cnt++] = g;
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_u64);
	*out = v;
	*n = cnt;
	return 0;
}

static int replay_one(const char *p, uint64_t gen, uint64_t min_seq, kv_replay_fn fn, void *arg,
		      uint64_t *max_seq, uint64_t *torn)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	struct stat st;
	const char *m;
	size_t off = 0;
	int rc = 0;

	if (fd < 0)
		return kv_fail(-errno, "cannot open %s: %s", p, strerror(errno));
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	if (st.st_size == 0) {
		close(fd);
		return 0;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return kv_fail(-errno, "cannot map %s: %s", p, strerror(errno));
	while (off + sizeof(struct logrec) <= (size_t)st.st_size) {
		struct logrec h;

		memcpy(&h, m + off, sizeof(h));
		if (h.magic != LOG_MAGIC || rec_size(h.len) > (size_t)st.st_size - off ||
		    rec_crc(&h, m + off + sizeof(h)) != h.crc)
			break; /* torn tail: this record was never acknowledged */
		if (h.seq > *max_seq)
			*max_seq = h.seq;
		if (h.seq > min_seq) {
			struct kv_log_rec r = { .key = h.key,
						.seq = h.seq,
						.gen = gen,
						.len = h.len,
						.crc = h.crc,
						.val = m + off + sizeof(h) };

			rc = fn(&r, arg);
			if (rc)
				break;
		}
		off += rec_size(h.len);
	}
	*torn += (size_t)st.st_size - off;
	munmap((void *)m, (size_t)st.st_size);
	return rc;
}

int kv_log_replay(const char *dir, uint64_t min_seq, kv_replay_fn fn, void *arg, uint64_t *max_gen,
		  uint64_t *max_seq, uint64_t *torn_bytes)
{
	uint64_t *gens;
	size_t n;
	int rc;

	*max_gen = 0;
	*torn_bytes = 0;
	rc = list_segments(dir, &gens, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !rc; i++) {
		char p[PATH_MAX + 64];

		seg_path(p, sizeof(p), dir, gens[i]);
		rc = replay_one(p, gens[i], min_seq, fn, arg, max_seq, torn_bytes);
		*max_gen = gens[i];
	}
	free(gens);
	return rc;
}

void kv_log_drop(const char *dir, uint64_t upto)
{
	uint64_t *gens;
	size_t n;

	if (list_segments(dir, &gens, &n))
		return;
	for (size_t i = 0; i < n && gens[i] <= upto; i++) {
		char p[PATH_MAX + 64];

		seg_path(p, sizeof(p), dir, gens[i]);
		unlink(p);
	}
	free(gens);
	kv_fsync_dir(dir);
}

size_t kv_log_segments(const char *dir)
{
	uint64_t *gens;
	size_t n;

	if (list_segments(dir, &gens, &n))
		return 0;
	free(gens);
	return n;
}
