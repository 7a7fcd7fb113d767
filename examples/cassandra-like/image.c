/* SPDX-License-Identifier: MIT */
/*
 * The row cache image (kv_opts.cache_image, --cache-image; issue #18 part
 * 3): kv_close() saves the row cache region to a file with hpr_save(), and
 * kv_open() loads it back with hpr_load(HPR_SNAP_LAZY) when no kept cache
 * is attached -- a warm start without attach, for when the tmpfs holding
 * the kept regions was lost (a reboot) and the image is on a disk. The
 * load returns once the file's header and page table are checked; the
 * cache's index is then mapped at once and checked (rowcache.c,
 * load_image), and the frames arrive on first touch (served first) or from
 * the library's background fill. Requests are served from the start.
 *
 * When is an image right? Its rows were the newest durable version of
 * their keys when it was saved (the cache's own rule: a put invalidates
 * the key's slot before it appends its record, and a read fills only a
 * durable version), so an image is stale exactly for the keys written
 * after it. Hence:
 *
 *   token   each save draws a random token, written into the image's cache
 *           header (the kept-region header's owner field) and, after the
 *           image is in place, into the data dir's CACHEIMAGE file with the
 *           commit log's position at the save. An image whose token is not
 *           the data dir's -- another data dir's, an older save's, a save
 *           killed before CACHEIMAGE was written, a data dir restored from
 *           a copy made before the save -- is not used.
 *   seq     every key with a write of a sequence number above the saved
 *           position has its slot cleared at open: from the tables (only
 *           those whose max_seq is above it are read) and from the commit
 *           log as it is replayed, before the first request. Sequence
 *           numbers only grow in a data dir, so nothing else can be newer.
 *           A saved position above the data dir's newest sequence number
 *           (a data dir restored from an older copy beside a newer image
 *           with the same token) drops the image.
 *   rows    each row carries its crc, checked on every hit; each page of
 *           the image its checksum, checked by hpr_load before the page is
 *           mapped; the header, frame table and index are checked as a kept
 *           cache's are (rowcache.c, adopt()).
 *
 * A damaged or truncated image is refused by hpr_load or at the index
 * check: the cache starts cold. The reason kept (kv_keep_info.image_why)
 * is the load's own error, taken from hpr_load_wait (rowcache.c,
 * load_image), also when the background fill met a bad page -- any page,
 * on a loaded machine even the last -- before the index was checked. A page that fails its checksum later
 * fails the whole lazy load: the library makes the pages it had not
 * mapped PROT_NONE until hpr_load_wait() returns the error and empties the
 * region. The cache never touches such a page -- while the load runs, a
 * frame is used only after hpr_fault_in() mapped it (rowcache.c,
 * frame_ready) -- and the watcher thread here, on the error, puts a new
 * empty cache in its place (kv_db.rc) and marks the failed one dead: every
 * call on it from then on is a miss or does nothing. A kill -9 during the
 * load leaves the image file as it was: the next open loads it again.
 */
#define _GNU_SOURCE
#include "db.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define IMG_ID_MAGIC 0x4547414d49435656ull /* "VVCIMAGE" */
#define IMG_ID_VERSION 1

/* DIR/CACHEIMAGE: the data dir's last saved image */
struct img_id {
	uint64_t magic;
	uint32_t version, pad;
	uint64_t token; /* in the image's cache header (owner) */
	uint64_t seq;	/* the commit log's durable position at the save */
	uint32_t crc, pad2;
};

static uint32_t id_crc(const struct img_id *id)
{
	return kv_crc32c(0, id, offsetof(struct img_id, crc));
}

static void id_path(struct kv_db *db, char *p, size_t n)
{
	snprintf(p, n, "%s/CACHEIMAGE", db->dir);
}

void kv__image_find(struct kv_db *db, struct kv_rc_image *img, uint64_t *seq)
{
	const char *f = db->o.cache_image;
	char p[PATH_MAX + 16];
	struct img_id id;
	ssize_t n = -1;
	int fd;

	img->fd = -1;
	if (f[0] == '/')
		snprintf(db->img_path, sizeof(db->img_path), "%s", f);
	else
		snprintf(db->img_path, sizeof(db->img_path), "%.2000s/%.2000s", db->dir, f);
	id_path(db, p, sizeof(p));
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, &id, sizeof(id));
		close(fd);
	}
	if (fd < 0) {
		snprintf(img->why, sizeof(img->why),
			 "no image saved for this data dir (%.100s: %s)", p, strerror(errno));
		return;
	}
	if (n != (ssize_t)sizeof(id) || id.magic != IMG_ID_MAGIC || id.crc != id_crc(&id) ||
	    id.version != IMG_ID_VERSION || !id.token) {
		snprintf(img->why, sizeof(img->why), "%.120s is damaged", p);
		return;
	}
	img->fd = open(db->img_path, O_RDONLY | O_CLOEXEC);
	if (img->fd < 0) {
		snprintf(img->why, sizeof(img->why), "image %.100s: %s", db->img_path,
			 strerror(errno));
		return;
	}
	img->token = id.token;
	*seq = id.seq;
}

void kv__image_stale_key(struct kv_db *db, uint64_t key, uint64_t seq)
{
	if (seq <= db->img_seq)
		return;
	kv_rc_invalidate(&db->cache, key);
	db->keep.image_stale++;
}

static int stale_rec(const struct kv_log_rec *r, void *arg)
{
	kv__image_stale_key(arg, r->key, r->seq);
	return 0;
}

int kv__image_stale(struct kv_db *db, bool replay_log, uint64_t min_seq)
{
	uint64_t g, s, torn;

	for (size_t i = 0; i < db->ntables; i++) {
		const struct kv_sst *t = db->tables[i];

		const struct kv_sst_rec *r;

		if (t->f.max_seq <= db->img_seq)
			continue; /* all of it older than the image */
		for (r = kv_sst_first(t); r && kv_sst_rec_ok(r); r = kv_sst_next(t, r))
			kv__image_stale_key(db, r->key, r->seq);
		if (r) { /* a damaged record: its key unknown, so is what is stale */
			snprintf(db->img_drop, sizeof(db->img_drop),
				 "table %.100s has a damaged record: the keys written after the "
				 "image are not known",
				 t->path);
			return 0;
		}
	}
	if (!replay_log)
		return 0;
	return kv_log_replay(db->logdir, min_seq > db->img_seq ? min_seq : db->img_seq, stale_rec,
			     db, &g, &s, &torn);
}

/* The image's load failed (or the image is no good after all): a new,
 * empty cache takes the failed one's place, and the failed one is dead. */
static void go_cold(struct kv_db *db, const char *why)
{
	const struct kv_opts *o = &db->o;
	struct kv_rowcache *c = calloc(1, sizeof(*c));
	struct kv_rc_image none = { .fd = -1 };
	bool warm;

	kv_rc_fetch_stop(&db->cache);
	pthread_mutex_lock(&db->bg_mu);
	db->keep.image_failed = true;
	snprintf(db->keep.image_why, sizeof(db->keep.image_why), "%s", why);
	pthread_mutex_unlock(&db->bg_mu);
	kv__note(db, "row cache image: %s: the row cache starts cold", why);
	/* not kept (the kept file is the failed cache's, and the failed load
	 * emptied it, header too: the next open does not attach to it) */
	if (c && !kv_rc_init(c, o->cache_bytes, o->row_hint ? o->row_hint : 2048, NSTRIPES,
			     o->cache_backing, o->region_dir ? o->region_dir : db->dir, 0, &warm,
			     &none)) {
		kv_mem_prefault_start(&c->mem);
		atomic_store(&db->cold, c);
		atomic_store(&db->rc, c);
	} else {
		free(c); /* no memory for one: no row cache, every read a miss */
	}
	atomic_store(&db->cache.dead, true);
}

static void *watch(void *arg)
{
	struct kv_db *db = arg;
	int rc = kv_mem_load_wait(&db->cache.mem);

	if (rc) {
		char why[256];

		snprintf(why, sizeof(why), "the lazy load failed: %s", kv_errmsg(rc));
		go_cold(db, why);
		return NULL;
	}
	if (db->o.image_hook)
		db->o.image_hook(db->o.image_hook_arg);
	kv_rc_loaded(&db->cache);
	pthread_mutex_lock(&db->bg_mu);
	db->keep.image_load_ms = (double)(kv_now_ns() - db->img_t0) / 1e6;
	pthread_mutex_unlock(&db->bg_mu);
	kv__note(db, "row cache image loaded in %.1f ms", db->keep.image_load_ms);
	/* the frames the image had none of: faulted in now, as at any start */
	kv_mem_prefault_start(&db->cache.mem);
	return NULL;
}

int kv__image_start(struct kv_db *db)
{
	uint64_t newest = db->log.appended;

	if (!db->img_check)
		return 0;
	db->img_check = false;
	if (db->img_drop[0] || db->img_seq > newest) {
		char why[256];

		if (db->img_drop[0])
			snprintf(why, sizeof(why), "%s", db->img_drop);
		else
			snprintf(why, sizeof(why),
				 "saved at sequence number %" PRIu64
				 ", after the data dir's newest (%" PRIu64
				 "): the data dir is older than the image",
				 db->img_seq, newest);
		kv_mem_load_cancel(&db->cache.mem);
		kv_mem_load_wait(&db->cache.mem);
		go_cold(db, why);
		return 0;
	}
	kv__note(db,
		 "row cache image %s: %" PRIu64 " rows, loading lazily; %" PRIu64
		 " newer writes cleared theirs",
		 db->img_path, db->keep.image_rows, db->keep.image_stale);
	/* nowait: reads do not wait for a page, these threads fetch it */
	while (db->cache.nowait && db->img_nfetch < 2 &&
	       !pthread_create(&db->img_fetch[db->img_nfetch], NULL, kv_rc_fetcher, &db->cache))
		db->img_nfetch++;
	if (pthread_create(&db->img_watcher, NULL, watch, db)) {
		kv_mem_load_cancel(&db->cache.mem);
		kv_mem_load_wait(&db->cache.mem);
		go_cold(db, "cannot start the thread that waits for its load");
		return 0;
	}
	db->img_watch_on = true;
	return 0;
}

/* write all of buf to path.tmp, fsync, rename to path, fsync its dir */
static int put_file(const char *path, const void *buf, size_t n)
{
	char tmp[PATH_MAX + 32], dir[PATH_MAX + 32];
	int fd, rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = kv_write_all(fd, buf, n);
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	return kv_fsync_dir(dirname(dir));
}

/* save c to db->img_path with a new token, then CACHEIMAGE */
static int save(struct kv_db *db, struct kv_rowcache *c, uint64_t seq)
{
	uint64_t geo[4] = { c->nbuckets, c->nframes, c->frame_size, c->frames_off };
	uint64_t owner = c->hdr->owner, t0 = kv_now_ns();
	struct img_id id = { .magic = IMG_ID_MAGIC, .version = IMG_ID_VERSION, .seq = seq };
	char tmp[PATH_MAX + 8], dir[PATH_MAX], p[PATH_MAX + 16] = "";
	int fd, rc;

	while (!id.token)
		if (getrandom(&id.token, sizeof(id.token), 0) != (ssize_t)sizeof(id.token))
			id.token = kv_hash64(kv_now_ns() ^ (uint64_t)getpid());
	id.crc = id_crc(&id);
	kv_mem_prefault_wait(&c->mem); /* a save wants the region quiet */
	kv_kept_stamp(c->hdr, KV_KEPT_RC_MAGIC, c->mem.size, id.token, geo,
		      atomic_load(&c->hdr->state));
	snprintf(tmp, sizeof(tmp), "%s.tmp", db->img_path);
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	rc = fd < 0 ? kv_fail(-errno, "%s: %s", tmp, strerror(errno)) : kv_mem_save(&c->mem, fd);
	if (fd >= 0)
		close(fd);
	/* the image first, then the token that makes it valid */
	if (!rc && rename(tmp, db->img_path))
		rc = kv_fail(-errno, "rename %s: %s", tmp, strerror(errno));
	if (rc) {
		unlink(tmp);
	} else {
		snprintf(dir, sizeof(dir), "%s", db->img_path);
		kv_fsync_dir(dirname(dir));
		id_path(db, p, sizeof(p));
		rc = put_file(p, &id, sizeof(id));
		if (rc)
			kv_fail(rc, "%s: %s", p, strerror(-rc));
	}
	/* a kept cache's header is its owner's again */
	kv_kept_stamp(c->hdr, KV_KEPT_RC_MAGIC, c->mem.size, owner, geo,
		      atomic_load(&c->hdr->state));
	if (rc)
		return rc;
	kv__note(db, "row cache image saved to %s at sequence number %" PRIu64 " in %.1f ms",
		 db->img_path, seq, (double)(kv_now_ns() - t0) / 1e6);
	return 0;
}

void kv__image_close(struct kv_db *db, uint64_t log_seq)
{
	struct kv_rowcache *c;
	int rc;

	if (db->img_watch_on) {
		/* the load ends on its own; close waits for it (a save needs it) */
		pthread_join(db->img_watcher, NULL);
		db->img_watch_on = false;
	}
	if (db->cache_on)
		kv_rc_fetch_stop(&db->cache); /* ended well or not, the watcher is done */
	while (db->img_nfetch > 0)
		pthread_join(db->img_fetch[--db->img_nfetch], NULL);
	if (!db->o.cache_image || !db->threads_on || !log_seq || !db->cache_on)
		return;
	c = kv__cache(db);
	if (atomic_load(&c->dead) || atomic_load(&c->loading) || !c->mem.r)
		return;
	rc = save(db, c, log_seq);
	if (rc)
		kv__note(db, "row cache image not saved: %s", kv_errmsg(rc));
}
