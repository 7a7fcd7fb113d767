/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #22 item 2: an update writes one field
 * (YCSB's writeallfields=false) and leaves the row's other fields as they
 * were. The driver's update is row_update_field (row.c), a read-modify-
 * write of the whole row under a lock on the key, since the engine stores
 * rows whole:
 *
 *   - after an update of field 3, field 3 is new and fields 0-2 and 4-9 are
 *     byte for byte what they were, and the row is intact (row_check);
 *   - with the commit log's syncer stalled, an update waits in kv_put
 *     (holding its key's lock) until its row is durable; once the syncer
 *     goes on, 300 updates of field 5 changed field 5 and nothing else;
 *   - threads updating different fields of one row at once lose none of
 *     each other's fields: at the end, every field is what its thread
 *     wrote last (without the key lock, two threads that read the row at
 *     once each write back the other's field as it was: this fails);
 *   - row_update_all (--writeallfields) changes every field.
 */
#include "cass_test.h"
#include "row.h"

#define KEY 7
#define NTHR 5
#define ROUNDS 300

static const struct row_fmt fmt = { .fields = 10, .fieldlen = 100 };

static int get_row(struct kv_db *db, uint64_t key, uint8_t *buf)
{
	uint32_t len = 0;
	int rc = kv_get(db, key, buf, row_len(&fmt), &len, NULL);

	if (!rc && row_check(buf, len, &fmt, key))
		rc = -EBADMSG;
	return rc;
}

/* fields that differ between rows a and b, as a bit mask */
static unsigned diff_fields(uint8_t *a, uint8_t *b)
{
	unsigned m = 0;

	for (unsigned i = 0; i < fmt.fields; i++)
		if (memcmp(row_field(a, &fmt, i), row_field(b, &fmt, i), fmt.fieldlen))
			m |= 1u << i;
	return m;
}

struct upd {
	pthread_t t;
	struct kv_db *db;
	unsigned field;
	uint64_t rng;
	int rc;
	uint8_t last[ROW_HDR + 10 * 100]; /* the row this thread wrote last */
	_Atomic bool done;
};

static void *upd_main(void *arg)
{
	struct upd *u = arg;
	uint64_t seq;

	for (int r = 0; r < ROUNDS && !u->rc; r++)
		u->rc = row_update_field(u->db, &fmt, KEY, u->field, &u->rng, u->last, &seq);
	atomic_store(&u->done, true);
	return NULL;
}

int main(void)
{
	char dir[64];
	static uint8_t a[ROW_HDR + 10 * 100], b[sizeof(a)], c[sizeof(a)];
	struct kv_db *db;
	uint64_t rng = 42, seq;
	struct upd u[NTHR], second = { 0 };
	unsigned m;
	int rc;

	cass_data_dir(dir, sizeof(dir), "256m");
	db = cass_open(dir);

	/* one field changes, the other nine stay */
	row_make(a, &fmt, KEY, &rng);
	rc = kv_put(db, KEY, a, row_len(&fmt), &seq);
	CHECK(rc == 0, "a row of 10 x 100 B put: %s", rc ? kv_errmsg(rc) : "ok");
	rc = row_update_field(db, &fmt, KEY, 3, &rng, c, &seq);
	CHECK(rc == 0 && get_row(db, KEY, b) == 0, "update of field 3, row read back intact");
	m = diff_fields(a, b);
	CHECK(m == 1u << 3, "only field 3 changed (changed fields: mask %#x, want %#x)", m,
	      1u << 3);
	CHECK(memcmp(b, c, row_len(&fmt)) == 0, "the row read back is the row the update wrote");

	/* an update waits for the stalled syncer, then changes its field only */
	memcpy(a, b, sizeof(a));
	stall_arm();
	second.db = db;
	second.rng = 1;
	{
		struct cass_put p; /* a plain put of key 99 to hold the syncer */

		cass_put_start(&p, db, 99, 'x', 64);
		CHECK(stall_wait(), "the commit log's syncer is stalled");
		struct upd *s = &second; /* updates of field 5, on a thread */

		s->field = 5;
		pthread_create(&s->t, NULL, upd_main, s);
		usleep(200000);
		CHECK(!atomic_load(&s->done), "the update waits for the stalled syncer");
		stall_release();
		pthread_join(p.t, NULL);
		pthread_join(s->t, NULL);
	}
	CHECK(second.rc == 0 && get_row(db, KEY, b) == 0, "stalled updates done, row intact");
	m = diff_fields(a, b);
	CHECK(m == 1u << 5, "%d updates of field 5 changed field 5 only (mask %#x)", ROUNDS, m);

	/* threads on different fields of one row lose none of each other's */
	memcpy(a, b, sizeof(a));
	for (int t = 0; t < NTHR; t++) {
		u[t] = (struct upd){ .db = db, .field = (unsigned)t * 2, .rng = (uint64_t)t + 100 };
		pthread_create(&u[t].t, NULL, upd_main, &u[t]);
	}
	for (int t = 0; t < NTHR; t++)
		pthread_join(u[t].t, NULL);
	rc = get_row(db, KEY, b);
	CHECK(rc == 0, "%d threads x %d updates of fields 0, 2, 4, 6, 8: row intact", NTHR, ROUNDS);
	for (int t = 0; t < NTHR; t++) {
		unsigned f = u[t].field;

		CHECK(u[t].rc == 0 && !memcmp(row_field(b, &fmt, f), row_field(u[t].last, &fmt, f),
					      fmt.fieldlen),
		      "field %u is what its thread wrote last", f);
	}
	m = diff_fields(a, b);
	CHECK((m & 0x2aa) == 0, "odd fields, which no thread updated, unchanged (mask %#x)", m);

	/* --writeallfields: every field new */
	memcpy(a, b, sizeof(a));
	rc = row_update_all(db, &fmt, KEY, &rng, c, &seq);
	CHECK(rc == 0 && get_row(db, KEY, b) == 0 && diff_fields(a, b) == 0x3ff,
	      "row_update_all changed every field (mask %#x)", diff_fields(a, b));

	kv_close(db);
	cass_rm_dir(dir);
	printf("%s\n", cass_fails ? "FAILED" : "PASSED");
	return cass_fails ? 1 : 0;
}
