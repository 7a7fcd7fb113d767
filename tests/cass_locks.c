/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #22 item 4: readers do not wait on a
 * writer that is stalled switching memtables. The commit log's syncer is
 * stalled (kv_opts.log_hook) with a batch in flight, and a writer W whose
 * value does not fit the active memtable is sent to switch_memtable, where
 * the log rotation waits for that batch. Meanwhile:
 *
 *   - a read of W's own key, whose old value is in the row cache, returns
 *     that value (it used to queue on the row lock W held);
 *   - a read of another key, in no cache, returns from the memtable (it
 *     used to queue on the LSM lock W held for writing across the
 *     rotation's fdatasync);
 *
 * and once the syncer goes on, W's write lands and is read back.
 */
#include "cass_test.h"
#include "db.h"

#define VLEN 8192
#define CACHED 1
#define OTHER 2
#define FIRST_FILL 1000

struct reader {
	pthread_t t;
	struct kv_db *db;
	uint64_t key;
	char tag;
	_Atomic bool done;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->tag = cass_tag(r->db, r->key);
	atomic_store(&r->done, true);
	return NULL;
}

/* start a read of key; true if it returned within ms milliseconds */
static bool read_within(struct reader *r, struct kv_db *db, uint64_t key, int ms)
{
	r->db = db;
	r->key = key;
	r->tag = '!';
	atomic_store(&r->done, false);
	if (pthread_create(&r->t, NULL, reader_main, r)) {
		printf("FAIL: pthread_create\n");
		exit(1);
	}
	for (int i = 0; i < ms && !atomic_load(&r->done); i++)
		usleep(1000);
	return atomic_load(&r->done);
}

static bool has_room(struct kv_db *db, uint32_t len)
{
	bool room;

	pthread_rwlock_rdlock(&db->lsm);
	pthread_mutex_lock(&db->active->mu);
	room = kv_mt_has_room(db->active, len);
	pthread_mutex_unlock(&db->active->mu);
	pthread_rwlock_unlock(&db->lsm);
	return room;
}

int main(void)
{
	struct reader rc, ro;
	struct cass_put j, w;
	struct kv_stats st0, st1;
	struct kv_db *db;
	uint64_t key = FIRST_FILL;
	char dir[64];
	bool in_time;

	setvbuf(stdout, NULL, _IOLBF, 0);
	cass_data_dir(dir, sizeof(dir), "64m");
	db = cass_open(dir);
	kv_put(db, CACHED, cass_val('A', 100), 100, NULL);
	kv_put(db, OTHER, cass_val('O', 100), 100, NULL);
	cass_tag(db, CACHED); /* fills the row cache */
	kv_db_stats(db, &st0);
	CHECK(cass_tag(db, CACHED) == 'A', "the cached key holds A");
	kv_db_stats(db, &st1);
	CHECK(st1.cache_hits == st0.cache_hits + 1, "its read was a row cache hit");

	/* fill the memtable until a value of 2 * VLEN no longer fits, while
	 * a small one still does */
	while (has_room(db, 2 * VLEN))
		kv_put(db, key++, cass_val('f', VLEN), VLEN, NULL);
	CHECK(has_room(db, 8), "filled the memtable with %" PRIu64 " values of %d bytes",
	      key - FIRST_FILL, VLEN);

	/* a batch in flight, held by the stalled syncer */
	stall_arm();
	cass_put_start(&j, db, key++, 'J', 8);
	CHECK(stall_wait(), "the syncer holds a batch");
	/* W does not fit: it switches memtables, and the log rotation waits
	 * for the stalled batch */
	cass_put_start(&w, db, CACHED, 'W', 2 * VLEN);
	usleep(200 * 1000);
	CHECK(!atomic_load(&w.done), "the writer is stalled in the memtable switch");

	in_time = read_within(&rc, db, CACHED, 2000);
	CHECK(in_time && rc.tag == 'A',
	      "a cached read of the stalled writer's key returns at once (%s, got %c)",
	      in_time ? "in time" : "still waiting after 2 s", in_time ? rc.tag : '-');
	in_time = read_within(&ro, db, OTHER, 2000);
	CHECK(in_time && ro.tag == 'O',
	      "an uncached read of another key returns at once (%s, got %c)",
	      in_time ? "in time" : "still waiting after 2 s", in_time ? ro.tag : '-');
	CHECK(!atomic_load(&w.done), "the writer was stalled all along");

	stall_release();
	pthread_join(rc.t, NULL);
	pthread_join(ro.t, NULL);
	pthread_join(j.t, NULL);
	pthread_join(w.t, NULL);
	CHECK(j.rc == 0 && w.rc == 0, "both puts are acknowledged once the syncer goes on (%d, %d)",
	      j.rc, w.rc);
	CHECK(cass_tag(db, CACHED) == 'W', "the switched-in memtable has W's write");
	kv_db_quiesce(db);
	kv_db_stats(db, &st1);
	CHECK(st1.flushes >= 1, "the full memtable was flushed (%" PRIu64 " flushes)", st1.flushes);
	CHECK(cass_tag(db, OTHER) == 'O' && cass_tag(db, FIRST_FILL) == 'f',
	      "what was in it reads back from the table");
	kv_close(db);
	cass_rm_dir(dir);
	printf("%s\n", cass_fails ? "FAILED" : "passed");
	return cass_fails ? 1 : 0;
}
