/* SPDX-License-Identifier: MIT */
/*
 * examples/cassandra-like, issue #22 item 2: a read reads every field
 * unless readallfields=false (YCSB's property), and then one field, chosen
 * uniformly as YCSB's fieldchooser does, copied out of the engine without
 * the rest of the row (kv_get_part):
 *
 *   - the engine: kv_get_part copies exactly the bytes asked for, into a
 *     buffer that holds nothing more (a canary behind it stays), from a
 *     memtable on a miss, from the row cache on a hit and from a table
 *     after a flush; a part past the value's end is -ERANGE, one that runs
 *     over it is cut short; row_read reads a field alone or the whole row;
 *   - the driver (CASS_LIKE, the cassandra-like binary, set by
 *     tests/cassandra.cmake): workloads C and F by default return whole
 *     rows, 1 016 bytes and 10 fields per read; with --readallfields=false,
 *     100 bytes and one field per read. (Before, the driver had no such
 *     option and the engine no kv_get_part: this fails.)
 */
#include "cass_test.h"
#include "row.h"

#include <sys/wait.h>

static const struct row_fmt fmt = { .fields = 10, .fieldlen = 100 };

#define CANARY 0xa5

/* kv_get_part of field i of key's row into a buffer of exactly fieldlen
 * bytes with a canary behind it: 0 if it returned that field of `row` and
 * nothing more */
static int read_field(struct kv_db *db, uint64_t key, unsigned i, uint8_t *row)
{
	uint8_t buf[100 + 16];
	uint32_t len = 0, vlen = 0;
	int rc;

	memset(buf, CANARY, sizeof(buf));
	rc = kv_get_part(db, key, ROW_HDR + i * fmt.fieldlen, buf, fmt.fieldlen, &len, &vlen, NULL);
	if (rc)
		return rc;
	if (len != fmt.fieldlen || vlen != row_len(&fmt) ||
	    memcmp(buf, row_field(row, &fmt, i), fmt.fieldlen))
		return -EBADMSG;
	for (size_t o = fmt.fieldlen; o < sizeof(buf); o++)
		if (buf[o] != CANARY)
			return -EOVERFLOW;
	return 0;
}

static void engine_cases(void)
{
	static uint8_t row[ROW_HDR + 10 * 100], old[sizeof(row)], buf[sizeof(row)];
	struct kv_stats s0, s1;
	uint64_t rng = 7, seq;
	uint32_t len, vlen;
	struct kv_db *db;
	char dir[64];
	int rc;

	cass_data_dir(dir, sizeof(dir), "256m");
	db = cass_open(dir);

	/* key 1 first, so that the rows put after it flush it to a table */
	row_make(old, &fmt, 1, &rng);
	rc = kv_put(db, 1, old, row_len(&fmt), NULL);
	CHECK(rc == 0, "engine: key 1's row put: %s", rc ? kv_errmsg(rc) : "ok");
	for (uint64_t k = 100; k < 5100 && !rc; k++) {
		row_make(buf, &fmt, k, &rng);
		rc = kv_put(db, k, buf, row_len(&fmt), NULL);
	}
	kv_db_quiesce(db);
	kv_db_stats(db, &s0);
	CHECK(rc == 0 && s0.flushes >= 1 && s0.tables >= 1,
	      "engine: 5000 rows more put, %" PRIu64 " flushes, %" PRIu64 " tables", s0.flushes,
	      s0.tables);
	rc = read_field(db, 1, 9, old);
	kv_db_stats(db, &s1);
	CHECK(rc == 0 && s1.cache_misses == s0.cache_misses + 1,
	      "engine: field 9 of key 1, from a table (a miss): its 100 B alone (%s)",
	      rc ? kv_errmsg(rc) : "ok");

	row_make(row, &fmt, 2, &rng);
	rc = kv_put(db, 2, row, row_len(&fmt), &seq);
	CHECK(rc == 0, "engine: key 2's row put");
	kv_db_stats(db, &s0);
	rc = read_field(db, 2, 3, row);
	kv_db_stats(db, &s1);
	CHECK(rc == 0 && s1.cache_misses == s0.cache_misses + 1,
	      "engine: field 3 of key 2, from the memtable (a miss): its 100 B alone (%s)",
	      rc ? kv_errmsg(rc) : "ok");
	for (unsigned i = 0; i < fmt.fields; i++) {
		s0 = s1;
		rc = read_field(db, 2, i, row);
		kv_db_stats(db, &s1);
		CHECK(rc == 0 && s1.cache_hits == s0.cache_hits + 1,
		      "engine: field %u of key 2, from the row cache (a hit): its 100 B alone (%s)",
		      i, rc ? kv_errmsg(rc) : "ok");
	}

	/* the ends of the value, on a hit and (key 1 after an update) a miss */
	for (int k = 0; k < 2; k++) {
		uint64_t key = k ? 1 : 2, got = 0;

		if (k) {
			rc = row_update_all(db, &fmt, 1, &rng, row, &seq);
			CHECK(rc == 0, "engine: key 1 rewritten (its cache slot invalidated)");
		}
		rc = kv_get_part(db, key, row_len(&fmt) + 1, buf, 8, &len, &vlen, &got);
		CHECK(rc == -ERANGE && vlen == row_len(&fmt),
		      "engine: key %" PRIu64 ": a part past the end: %s, value %u B", key,
		      kv_errmsg(rc), vlen);
		rc = kv_get_part(db, key, row_len(&fmt) - 10, buf, 100, &len, &vlen, &got);
		CHECK(rc == 0 && len == 10 && !memcmp(buf, row + row_len(&fmt) - 10, 10) &&
			      got == seq,
		      "engine: key %" PRIu64 ": a part over the end: its last %u B, seq %" PRIu64,
		      key, len, got);
	}

	/* the driver's read: one field, or the whole row (row: key 1's now) */
	rc = row_read(db, &fmt, 1, 6, buf, &len, &seq);
	CHECK(rc == 0 && len == fmt.fieldlen && !memcmp(buf, row_field(row, &fmt, 6), len),
	      "row_read of field 6: %u B, that field", len);
	rc = row_read(db, &fmt, 1, -1, buf, &len, &seq);
	CHECK(rc == 0 && len == row_len(&fmt) && !row_check(buf, len, &fmt, 1),
	      "row_read of every field: the whole row, %u B, intact", len);
	rc = kv_put(db, 3, "short", 5, NULL);
	rc = rc ? rc : row_read(db, &fmt, 3, 0, buf, &len, &seq);
	CHECK(rc == -EBADMSG, "row_read of a field of a value that is no row: %s", kv_errmsg(rc));
	kv_close(db);
	cass_rm_dir(dir);
}

/* the driver: workloads C and F on rows of 10 x 100 B, with `extra`
 * options; per run its reads, the bytes and the whole fields they
 * returned, parsed from --json. Returns the runs found. */
struct run {
	char wl;
	uint64_t reads, bytes, fields;
};

static int driver(const char *bin, const char *extra, struct run *r, int max)
{
	char dir[64], json[96], cmd[1024], *s = NULL, *p;
	size_t n = 0;
	FILE *f;
	int rc, nr = 0;

	cass_data_dir(dir, sizeof(dir), "256m");
	snprintf(json, sizeof(json), "%s.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "'%s' --data '%s' --allow-disk --records 3000 --threads 2 --workloads c,f "
		 "--ops 4000 --cache-mb 8 --memtable-mb 2 --status 0 --verify --json '%s' %s "
		 ">'%s.out' 2>&1",
		 bin, dir, json, extra, dir);
	rc = system(cmd);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc)) {
		snprintf(cmd, sizeof(cmd), "sed 's/^/    /' '%s.out'", dir);
		printf("driver %s: exit %d:\n", extra, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
		fflush(stdout);
		if (system(cmd))
			printf("    (no output)\n");
	}
	f = fopen(json, "re");
	if (f && getdelim(&s, &n, 0, f) > 0) {
		for (p = strstr(s, "\"workload\":\""); p && nr < max;
		     p = strstr(p + 1, "\"workload\":\"")) {
			struct run x = { .wl = p[12] };
			char *q = strstr(p, "\"read_bytes\":");

			if (x.wl == 'L')
				continue;
			if (q && sscanf(q,
					"\"read_bytes\":%" SCNu64 ",\"read_fields\":%" SCNu64
					",\"read\":{\"count\":%" SCNu64,
					&x.bytes, &x.fields, &x.reads) == 3)
				r[nr++] = x;
		}
	}
	if (f)
		fclose(f);
	free(s);
	unlink(json);
	snprintf(cmd, sizeof(cmd), "%s.out", dir);
	unlink(cmd);
	cass_rm_dir(dir);
	return nr;
}

static void driver_cases(const char *bin)
{
	struct run r[4];
	int n;

	n = driver(bin, "", r, 4);
	CHECK(n == 2, "driver, default: runs C and F found in its JSON (%d)", n);
	for (int i = 0; i < n; i++)
		CHECK(r[i].reads > 0 && r[i].bytes == r[i].reads * row_len(&fmt) &&
			      r[i].fields == r[i].reads * fmt.fields,
		      "driver, default, workload %c: %" PRIu64 " reads returned %" PRIu64
		      " B and %" PRIu64 " fields: the whole row, every field, each time",
		      r[i].wl, r[i].reads, r[i].bytes, r[i].fields);
	n = driver(bin, "--readallfields=false", r, 4);
	CHECK(n == 2, "driver, --readallfields=false: runs C and F found in its JSON (%d)", n);
	for (int i = 0; i < n; i++)
		CHECK(r[i].reads > 0 && r[i].bytes == r[i].reads * fmt.fieldlen &&
			      r[i].fields == r[i].reads,
		      "driver, --readallfields=false, workload %c: %" PRIu64
		      " reads returned %" PRIu64 " B and %" PRIu64
		      " fields: one field of 100 B each time",
		      r[i].wl, r[i].reads, r[i].bytes, r[i].fields);
}

int main(void)
{
	const char *bin = getenv("CASS_LIKE");

	engine_cases();
	if (bin && *bin)
		driver_cases(bin);
	else
		CHECK(0, "CASS_LIKE (the cassandra-like binary) is not set: the driver's cases "
			 "cannot run");
	printf("%s\n", cass_fails ? "FAILED" : "PASSED");
	return cass_fails ? 1 : 0;
}
