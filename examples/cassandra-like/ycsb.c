/* SPDX-License-Identifier: MIT */
/*
 * cassandra-like: the engine plus a YCSB-style driver.
 *
 *   cassandra-like --data DIR [--base-data DIR2] [options]
 *
 * Load phase (insert every record), then run phases: YCSB's workloads A
 * (50 % read / 50 % update), B (95 / 5), C (read only) and F (50 % read /
 * 50 % read-modify-write), and U, the seed experiment's update-heavy mix
 * (5 / 95), with N client threads, keys from YCSB's generators (zipfian:
 * YCSB's scrambled zipfian; uniform, latest, hotspot: generator.c), rows
 * of YCSB's 10 fields of 100 B whose updates write one field (row.c), a
 * target rate (--target) with latency from the intended start, a warm-up
 * (--warmup) left out of the figures. Prints YCSB-like progress lines
 * (--status), a table row per run (throughput, p50/p99/p99.9 latency,
 * huge-page coverage) and a summary table; --json FILE gets everything,
 * engine counters included.
 *
 * With --base-data the same workloads run on a second database whose data
 * dir is a tmpfs mounted huge=never and whose memtable and cache are plain
 * 4 KiB-page memory; runs are interleaved (huge, base, base, huge, ...) and
 * printed side by side with the ratio and each run's measured huge-page
 * coverage (hpr_stats for the regions, smaps for the table mappings).
 *
 * Correctness (--verify): every value carries its key and a CRC; the driver
 * keeps the highest acknowledged sequence number per key and checks that
 * every read returns an intact value at least that new. --acklog FILE
 * appends every acknowledged write to FILE; --check FILE reopens the
 * database (replaying its commit log) and checks that none was lost.
 */
#define _GNU_SOURCE
#include "ycsb.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const op_name[NOPS] = { "READ", "UPDATE", "READ-MODIFY-WRITE" };

/* ---- options ---- */

struct ycsb_opts opt = {
	.mt_b = KV_MEM_THP,
	.records = 100000,
	.row = { .fields = 10, .fieldlen = 100 }, /* YCSB's fieldcount, fieldlength */
	.readall = true,			  /* YCSB's readallfields */
	.threads = 20,
	.repeat = 1,
	.status = 10,
	.seconds = 10,
	.workloads = "a,b,u",
	.dist = DIST_ZIPFIAN,
	.cache_mb = 128,
	.memtable_mb = 64,
};

/* ---- key choosers: YCSB's generators (generator.c) ---- */

static struct ycsb_gen keygen;

static double urand(uint64_t *s)
{
	return (double)(kv_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t load_key(uint64_t i);

/* The generators draw YCSB key numbers: the position in the insert
 * order. The load inserted key number i as key load_key(i). */
static uint64_t next_key(uint64_t *s)
{
	return load_key(ycsb_gen_next(&keygen, s));
}

/* ---- values: rows of opt.row.fields fields (row.c) ---- */

static uint32_t value_len(void)
{
	return row_len(&opt.row);
}

/* 0 if v is an intact row of key; stores its crc */
static int check_value(const uint8_t *v, uint32_t len, uint64_t key, uint32_t *crcp)
{
	*crcp = len >= ROW_HDR ? row_crc(v) : 0;
	return row_check(v, len, &opt.row, key);
}

/* ---- one database under test ---- */

static uint64_t minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_minflt;
}

struct run_result results[MAX_RUNS];
int nresults;

_Atomic uint64_t verify_reads, verify_errors;
static int acklog_fd = -1;

/* ---- client threads ---- */

struct client {
	pthread_t thr;
	bool joined;
	int id;
	struct variant *v;
	bool load;
	uint64_t lo, hi;  /* load: index range */
	double read_prop; /* the rest are updates, or (rmw) read-modify-writes */
	bool rmw;
	uint64_t rng;
	uint64_t start, measure_from, end; /* the run's clock (clients_start) */
	uint64_t last_end, warm_ops;	   /* end of its last measured op */
	struct hist h[NOPS], ih[NOPS];	   /* service, intended-start latency */
	_Atomic uint64_t count[NOPS], sum_ns[NOPS];
	uint64_t read_bytes, read_fields; /* measured reads: returned */
	int err;
};

static _Atomic bool stop_run;
static _Atomic int64_t ops_left;

static void ack(struct variant *v, uint64_t key, uint64_t seq, const uint8_t *val)
{
	if (v->acked) {
		uint64_t cur = atomic_load_explicit(&v->acked[key], memory_order_relaxed);

		while (cur < seq && !atomic_compare_exchange_weak(&v->acked[key], &cur, seq))
			;
	}
	if (acklog_fd >= 0) {
		char line[64];
		uint32_t crc = row_crc(val);
		int n;

		n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %08x\n", key, seq, crc);
		if (write(acklog_fd, line, (size_t)n) != n)
			perror("acklog");
	}
}

static void verify_fail(struct variant *v, uint64_t key, const char *what, uint64_t seq,
			uint64_t want)
{
	if (atomic_fetch_add(&verify_errors, 1) < 10)
		fprintf(stderr,
			"VERIFY FAILED (%s): key %" PRIu64 ": %s (read seq %" PRIu64
			", last acknowledged %" PRIu64 ")\n",
			v->name, key, what, seq, want);
}

/*
 * YCSB's read: every field (all), or one chosen uniformly, as YCSB's
 * fieldchooser does with readallfields=false (row_read). *got: the bytes
 * the engine returned. --verify checks a whole row's key and crc and its
 * version; a field alone carries neither key nor crc, so of a one-field
 * read only the version (seq) and the row's length are checked.
 */
static int do_read(struct client *c, uint64_t key, uint8_t *buf, bool all, uint32_t *got)
{
	struct variant *v = c->v;
	uint64_t want = v->acked ? atomic_load(&v->acked[key]) : 0, seq = 0;
	int field = all ? -1 : (int)(kv_rand(&c->rng) % opt.row.fields);
	uint32_t len = 0, crc;
	int rc = row_read(v->db, &opt.row, key, field, buf, &len, &seq);

	*got = rc ? 0 : len;
	if (rc == -ENOENT && !want && !v->acked)
		return 0; /* not loaded (--no-load on a smaller data set) */
	if (rc && rc != -ENOENT && !(rc == -EBADMSG && v->acked))
		return rc;
	if (v->acked) {
		atomic_fetch_add_explicit(&verify_reads, 1, memory_order_relaxed);
		if (rc == -ENOENT)
			verify_fail(v, key, "not found", 0, want);
		else if (rc || (all && check_value(buf, len, key, &crc)))
			verify_fail(v, key, "damaged value", seq, want);
		else if (seq < want)
			verify_fail(v, key, "stale value", seq, want);
	}
	return 0;
}

/* a measured read's bytes and the whole fields in them (a row: its header,
 * then the fields) */
static void note_read(struct client *c, uint32_t got)
{
	c->read_bytes += got;
	c->read_fields += (opt.readall && got >= ROW_HDR ? got - ROW_HDR : got) / opt.row.fieldlen;
}

/* YCSB's update: one field, chosen uniformly (writeallfields=false), the
 * rest of the row as it was; --writeallfields and the load: every field */
static int do_update(struct client *c, uint64_t key, uint8_t *buf)
{
	uint64_t seq;
	int rc;

	if (c->load || opt.writeall)
		rc = row_update_all(c->v->db, &opt.row, key, &c->rng, buf, &seq);
	else
		rc = row_update_field(c->v->db, &opt.row, key,
				      (unsigned)(kv_rand(&c->rng) % opt.row.fields), &c->rng, buf,
				      &seq);
	if (!rc)
		ack(c->v, key, seq, buf);
	return rc;
}

/* insertion order of the load: a permutation of [0, records) */
static uint64_t load_key(uint64_t i)
{
	static const uint64_t primes[] = { 2654435761ull, 805306457ull, 3221225473ull,
					   1610612741ull };
	uint64_t p = primes[0];

	for (int k = 0; k < 4 && opt.records % primes[k] == 0; k++)
		p = primes[(k + 1) % 4];
	return (uint64_t)(((unsigned __int128)i * p) % opt.records);
}

/* a measured operation: its service time dt, and (--target) the latency
 * from its intended start, YCSB's measurement.interval=both */
static void note_op(struct client *c, int op, uint64_t dt, uint64_t intended)
{
	hist_add(&c->h[op], dt);
	if (opt.target > 0)
		hist_add(&c->ih[op], intended);
	atomic_fetch_add_explicit(&c->count[op], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->sum_ns[op], dt, memory_order_relaxed);
}

/* --target: sleep until t (in slices, so a stop is not kept waiting) */
static void sleep_until(uint64_t t)
{
	for (;;) {
		uint64_t now = kv_now_ns(), to = t;
		struct timespec ts;

		if (now >= t || atomic_load_explicit(&stop_run, memory_order_relaxed))
			return;
		if (to - now > 50000000)
			to = now + 50000000;
		ts.tv_sec = (time_t)(to / 1000000000ull);
		ts.tv_nsec = (long)(to % 1000000000ull);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
}

/*
 * A client: one operation after another, or with --target one every
 * `interval` on a schedule fixed in advance (YCSB's throttle: this
 * client's share of the target), so that an operation delayed by a stall
 * keeps its intended start and its latency counts the wait, not only its
 * service time (no coordinated omission). Behind schedule, it does not
 * sleep until it has caught up. Operations that start before measure_from
 * (--warmup) run but are not measured; every time is the client's own
 * clock reading, so a run's length has the clock's resolution.
 */
static void *client_main(void *arg)
{
	struct client *c = arg;
	uint8_t *buf = malloc(value_len());
	uint64_t interval = 0, next = c->start;

	if (!buf) {
		c->err = -ENOMEM;
		return NULL;
	}
	if (opt.target > 0) {
		interval = (uint64_t)(1e9 * opt.threads / opt.target);
		next += interval * (uint64_t)c->id / opt.threads; /* staggered */
	}
	for (uint64_t i = c->lo;; i++) {
		uint64_t key, t0, t1, intended = 0;
		uint32_t got = 0;
		bool measured;
		int op, rc;

		if (atomic_load_explicit(&stop_run, memory_order_relaxed) ||
		    (c->load && i >= c->hi))
			break;
		if (interval) {
			if (next >= c->end)
				break;
			sleep_until(next);
			intended = next;
			next += interval;
		}
		t0 = kv_now_ns();
		if (!interval)
			intended = t0;
		if (t0 >= c->end)
			break;
		measured = t0 >= c->measure_from;
		if (c->load) {
			key = load_key(i);
			op = OP_UPDATE;
		} else {
			if (measured &&
			    atomic_fetch_sub_explicit(&ops_left, 1, memory_order_relaxed) <= 0)
				break;
			key = next_key(&c->rng);
			op = urand(&c->rng) < c->read_prop ? OP_READ : c->rmw ? OP_RMW : OP_UPDATE;
		}
		if (op == OP_RMW) {
			/* YCSB's doTransactionReadModifyWrite: read the row, then
			 * update it (one field); each half counts on its own too,
			 * both from the intended start of the whole */
			rc = do_read(c, key, buf, opt.readall, &got);
			t1 = kv_now_ns();
			if (!rc && measured) {
				note_op(c, OP_READ, t1 - t0, t1 - intended);
				note_read(c, got);
			}
			if (!rc)
				rc = do_update(c, key, buf);
			if (!rc && measured) {
				uint64_t t2 = kv_now_ns();

				note_op(c, OP_UPDATE, t2 - t1, t2 - intended);
			}
		} else {
			rc = op == OP_READ ? do_read(c, key, buf, opt.readall, &got) :
					     do_update(c, key, buf);
			if (!rc && measured && op == OP_READ)
				note_read(c, got);
		}
		t1 = kv_now_ns();
		if (rc) {
			c->err = rc;
			fprintf(stderr, "cassandra-like: %s of key %" PRIu64 " failed: %s\n",
				op_name[op], key, kv_errmsg(rc));
			atomic_store(&stop_run, true);
			break;
		}
		if (measured) {
			note_op(c, op, t1 - t0, t1 - intended);
			c->last_end = t1;
		} else {
			c->warm_ops++;
		}
	}
	free(buf);
	return NULL;
}

/* ---- a phase: start clients, print progress, join ---- */

static void progress_line(struct variant *v, struct client *cl, double secs, uint64_t *last_ops,
			  double dt)
{
	uint64_t cnt[NOPS] = { 0 }, sum[NOPS] = { 0 }, tot;
	struct kv_stats st;
	char pf[64] = "";

	for (unsigned t = 0; t < opt.threads; t++)
		for (int o = 0; o < NOPS; o++) {
			cnt[o] += atomic_load_explicit(&cl[t].count[o], memory_order_relaxed);
			sum[o] += atomic_load_explicit(&cl[t].sum_ns[o], memory_order_relaxed);
		}
	tot = cnt[OP_READ] + cnt[OP_UPDATE] - cnt[OP_RMW]; /* an RMW is one operation */
	kv_db_stats(v->db, &st);
	if (st.prefault_total && st.prefault_done < st.prefault_total)
		snprintf(pf, sizeof(pf), " [cache prefault %zu%% of %zu MiB]",
			 st.prefault_done * 100 / st.prefault_total, st.prefault_total >> 20);
	printf("[%s] %.0f sec: %" PRIu64 " operations; %.1f current ops/sec;", v->name, secs, tot,
	       (double)(tot - *last_ops) / dt);
	for (int o = 0; o < NOPS; o++)
		if (cnt[o])
			printf(" [%s: Count=%" PRIu64 ", Avg=%.1f us]", op_name[o], cnt[o],
			       (double)sum[o] / (double)cnt[o] / 1000.0);
	printf(" [tables=%" PRIu64 " flushes=%" PRIu64 " compactions=%" PRIu64 "]%s\n", st.tables,
	       st.flushes, st.compactions, pf);
	fflush(stdout);
	*last_ops = tot;
}

/* Start opt.threads clients of workload ('L': the load) on v; t0 seeds
 * their generators. NULL: out of memory. */
struct client *clients_start(struct variant *v, char workload, uint64_t t0)
{
	struct client *cl = calloc(opt.threads, sizeof(*cl));
	bool load = workload == 'L';
	uint64_t start = kv_now_ns();
	/* the load is not warmed up, nor --restart's windows (they measure the
	 * recovery itself); --seconds is measured time, after the warm-up */
	uint64_t from = load || opt.restart ? start : start + (uint64_t)(opt.warmup * 1e9);
	uint64_t end = load || opt.ops || opt.restart ? UINT64_MAX :
							from + (uint64_t)(opt.seconds * 1e9);

	if (!cl)
		return NULL;
	atomic_store(&stop_run, false);
	atomic_store(&ops_left, opt.ops ? (int64_t)opt.ops : INT64_MAX);
	for (unsigned t = 0; t < opt.threads; t++) {
		struct client *c = &cl[t];

		c->id = (int)t;
		c->v = v;
		c->load = load;
		c->start = start;
		c->measure_from = from;
		c->end = end;
		c->lo = load ? opt.records * t / opt.threads : 0;
		c->hi = load ? opt.records * (t + 1) / opt.threads : 0;
		/* YCSB's core workloads A, B, C, F, and U, the seed's mix */
		c->read_prop = workload == 'a' ? 0.5 :
			       workload == 'b' ? 0.95 :
			       workload == 'c' ? 1.0 :
			       workload == 'f' ? 0.5 :
						 0.05;
		c->rmw = workload == 'f';
		c->rng = kv_hash64(t0 ^ (t + 1) * 0x9e3779b97f4a7c15ull) | 1;
		if (pthread_create(&c->thr, NULL, client_main, c)) {
			c->joined = true;
			c->err = -EAGAIN;
			atomic_store(&stop_run, true);
		}
	}
	return cl;
}

/* operations the clients have done so far (an RMW is one) */
uint64_t clients_ops(struct client *cl)
{
	uint64_t n = 0;

	for (unsigned t = 0; t < opt.threads; t++)
		n += atomic_load_explicit(&cl[t].count[OP_READ], memory_order_relaxed) +
		     atomic_load_explicit(&cl[t].count[OP_UPDATE], memory_order_relaxed) -
		     atomic_load_explicit(&cl[t].count[OP_RMW], memory_order_relaxed);
	return n;
}

/* stop the clients and free them: the first client's error, or 0 */
int clients_stop(struct client *cl)
{
	int err = 0;

	atomic_store(&stop_run, true);
	for (unsigned t = 0; t < opt.threads; t++) {
		if (!cl[t].joined)
			pthread_join(cl[t].thr, NULL);
		if (cl[t].err && !err)
			err = cl[t].err;
	}
	free(cl);
	return err;
}

int phase(struct variant *v, char workload, struct run_result *res)
{
	struct client *cl;
	uint64_t t0, last = 0, tick, last_ops = 0, from, end = 0;
	int err = 0;

	memset(res, 0, sizeof(*res));
	res->workload = workload;
	res->variant = v->name;
	kv_db_stats(v->db, &res->st0);
	res->minflt = minor_faults();
	t0 = kv_now_ns();
	cl = clients_start(v, workload, t0);
	if (!cl)
		return -ENOMEM;
	from = cl[0].measure_from;
	/* The main thread reports progress until the clients are done; they
	 * stop on their own at the end of --seconds, and the run's length is
	 * taken from their clocks, so this loop's period does not matter. */
	tick = t0;
	for (;;) {
		bool all_done = true;
		uint64_t now;

		usleep(20000);
		now = kv_now_ns();
		for (unsigned t = 0; t < opt.threads && all_done; t++) {
			if (cl[t].joined)
				continue;
			if (pthread_tryjoin_np(cl[t].thr, NULL) == 0)
				cl[t].joined = true;
			else
				all_done = false;
		}
		if (opt.status && now - tick >= (uint64_t)opt.status * 1000000000ull) {
			last += opt.status;
			progress_line(v, cl, (double)last, &last_ops, (double)(now - tick) / 1e9);
			tick = now;
		}
		if (all_done)
			break;
	}
	for (unsigned t = 0; t < opt.threads; t++) {
		if (!cl[t].joined)
			pthread_join(cl[t].thr, NULL);
		for (int o = 0; o < NOPS; o++) {
			hist_merge(&res->h[o], &cl[t].h[o]);
			hist_merge(&res->ih[o], &cl[t].ih[o]);
		}
		if (cl[t].last_end > end)
			end = cl[t].last_end;
		res->warm_ops += cl[t].warm_ops;
		res->read_bytes += cl[t].read_bytes;
		res->read_fields += cl[t].read_fields;
		if (cl[t].err && !err)
			err = cl[t].err;
	}
	res->ops = res->h[OP_READ].n + res->h[OP_UPDATE].n - res->h[OP_RMW].n;
	/* from the start (of the measured part) to the end of the last measured
	 * operation: ns resolution, whatever the polling above */
	res->secs = end > from ? (double)(end - from) / 1e9 : 0;
	res->ops_s = res->secs > 0 ? (double)res->ops / res->secs : 0;
	res->minflt = minor_faults() - res->minflt;
	kv_db_stats(v->db, &res->st1);
	kv_db_coverage(v->db, res->res, res->huge);
	free(cl);
	return err;
}

/* ---- open a variant ---- */

/* what --keep found: kept regions attached and checked, or why not */
void print_keep_info(struct variant *v)
{
	struct kv_keep_info ki;

	kv_db_keep_info(v->db, &ki);
	printf("[%s] kept row cache: %s", v->name,
	       ki.cache_warm	 ? "attached, warm" :
	       ki.cache_attached ? "attached, not usable: started cold" :
				   "new");
	if (ki.cache_warm)
		printf(" (%" PRIu64 " rows; %" PRIu64 " index slots outside live frames cleared)",
		       ki.cache_rows, ki.cache_dropped);
	else if (ki.cache_why[0])
		printf(" (%s)", ki.cache_why);
	printf("; kept memtables: %s", ki.mt_warm     ? "attached, checked against the log" :
				       ki.mt_attached ? "attached, not usable: replayed the log" :
							"new");
	if (ki.mt_warm)
		printf(" (%" PRIu64 " records kept, %" PRIu64 " not in the log discarded, %" PRIu64
		       " replayed from the log%s)",
		       ki.mt_kept, ki.mt_discarded, ki.mt_replayed,
		       ki.imm_recovered ? ", an immutable memtable to flush" : "");
	else if (ki.mt_why[0])
		printf(" (%s)", ki.mt_why);
	printf("\n");
}

/* what --cache-image found */
void print_image_info(struct variant *v)
{
	struct kv_keep_info ki;
	struct kv_stats st;

	kv_db_keep_info(v->db, &ki);
	kv_db_stats(v->db, &st);
	if (ki.image_loaded)
		printf("[%s] row cache image: loading lazily, serving already (%" PRIu64
		       " rows, saved at seq %" PRIu64 "; %" PRIu64 " newer writes cleared theirs; "
		       "%zu of %zu MiB loaded)\n",
		       v->name, ki.image_rows, ki.image_seq, ki.image_stale, st.image_loaded >> 20,
		       st.image_total >> 20);
	else
		printf("[%s] row cache image: not used (%s)\n", v->name,
		       ki.image_why[0] ? ki.image_why : "a kept cache was attached");
}

int open_variant(struct variant *v, bool huge)
{
	struct kv_opts o = { 0 };
	int rc;

	o.data_dir = v->dir;
	o.region_dir = opt.region_dir;
	o.cache_backing = huge ? opt.cache_b : KV_MEM_BASE;
	o.memtable_backing = huge ? opt.mt_b : KV_MEM_BASE;
	/* --keep: the huge run's row cache and memtables in kept regions,
	 * which are shmem files in the region dir */
	o.keep = opt.keep && huge;
	if (o.keep)
		o.cache_backing = o.memtable_backing = KV_MEM_SHMEM;
	o.quiet = opt.restart; /* --restart prints its own report */
	/* the huge run's cache only: base-page memory is no hpregion region */
	o.cache_image = huge ? opt.cache_image : NULL;
	o.image_nowait = opt.image_nowait;
	o.cache_bytes = opt.cache_mb << 20;
	o.memtable_bytes = opt.memtable_mb << 20;
	o.row_hint = value_len();
	o.allow_disk = opt.allow_disk;
	if (opt.log_dir) {
		/* one log dir per database: DIR/huge, DIR/base */
		snprintf(v->logdir, sizeof(v->logdir), "%s/%s", opt.log_dir, v->name);
		if (mkdir(v->logdir, 0755) && errno != EEXIST) {
			fprintf(stderr, "cassandra-like: cannot create %s: %s\n", v->logdir,
				strerror(errno));
			return -errno;
		}
		o.log_dir = v->logdir;
	}
	rc = kv_open(&o, &v->db);
	if (rc) {
		fprintf(stderr, "cassandra-like: cannot open the %s-page database: %s\n", v->name,
			kv_errmsg(rc));
		return rc;
	}
	snprintf(v->mount, sizeof(v->mount), "%s", kv_db_mount(v->db));
	if (o.keep && !opt.restart)
		print_keep_info(v);
	if (o.cache_image && !opt.restart)
		print_image_info(v);
	if (opt.restart)
		return 0;
	{
		/* the cache prefault runs in the background; we serve already */
		struct kv_stats st;

		kv_db_stats(v->db, &st);
		if (st.prefault_total)
			printf("[%s] row cache prefault running in the background: %zu%% of "
			       "%zu MiB done, serving requests already\n",
			       v->name, st.prefault_done * 100 / st.prefault_total,
			       st.prefault_total >> 20);
	}
	printf("[%s] data %s (%s); memtable 2 x %zu MiB on %s; row cache %zu MiB on %s\n", v->name,
	       v->dir, v->mount, opt.memtable_mb, kv_backing_name(o.memtable_backing), opt.cache_mb,
	       kv_backing_name(o.cache_backing));
	return 0;
}

/* Read every key acknowledged in snap (highest seq per key) without
 * filling the row cache: each must be an intact value at least as new.
 * Returns how many were not; *keys: how many were read. */
uint64_t check_acked(struct variant *v, const uint64_t *snap, uint64_t *keys)
{
	uint8_t *buf = malloc(value_len());
	uint64_t lost = 0;

	*keys = 0;
	for (uint64_t k = 0; k < opt.records && buf; k++) {
		uint64_t seq = 0;
		uint32_t len = 0, crc;
		int rc;

		if (!snap[k])
			continue;
		(*keys)++;
		rc = kv_get_nofill(v->db, k, buf, value_len(), &len, &seq);
		if (rc || check_value(buf, len, k, &crc) || seq < snap[k]) {
			if (lost++ < 10)
				fprintf(stderr,
					"LOST: key %" PRIu64 " acknowledged at seq %" PRIu64
					", read %s seq %" PRIu64 "\n",
					k, snap[k], rc ? kv_errmsg(rc) : "ok", seq);
		}
	}
	free(buf);
	return lost;
}

/* Read every key and check it against the shadow model. */
static uint64_t full_check(struct variant *v)
{
	uint8_t *buf = malloc(value_len());
	uint64_t before = atomic_load(&verify_errors);
	struct client c = { .v = v };
	uint32_t got;

	for (uint64_t k = 0; k < opt.records && buf; k++)
		if (atomic_load(&v->acked[k]) && do_read(&c, k, buf, true, &got))
			verify_fail(v, k, "read failed", 0, 0);
	free(buf);
	return atomic_load(&verify_errors) - before;
}

/* --check FILE: is every acknowledged write in FILE still there? */
static int check_acklog(struct variant *v, const char *path)
{
	FILE *f = fopen(path, "re");
	uint64_t key, seq, lines = 0, lost = 0, newer = 0, tables_recs = 0, *mseq;
	uint32_t crc, *mcrc, *buf;
	char line[128];
	int rc;

	if (!f) {
		fprintf(stderr, "cassandra-like: cannot read %s: %s\n", path, strerror(errno));
		return 2;
	}
	rc = kv_db_verify(v->db, &tables_recs);
	if (rc) {
		fprintf(stderr, "cassandra-like: %s\n", kv_errmsg(rc));
		fclose(f);
		return 1;
	}
	mseq = calloc(opt.records, sizeof(*mseq));
	mcrc = calloc(opt.records, sizeof(*mcrc));
	buf = malloc(value_len());
	while (fgets(line, sizeof(line), f)) {
		if (!strchr(line, '\n') ||
		    sscanf(line, "%" SCNu64 " %" SCNu64 " %x", &key, &seq, &crc) != 3 ||
		    key >= opt.records)
			continue; /* a line cut by the kill */
		lines++;
		if (seq > mseq[key]) {
			mseq[key] = seq;
			mcrc[key] = crc;
		}
	}
	fclose(f);
	for (key = 0; key < opt.records; key++) {
		uint64_t got = 0;
		uint32_t len, c;

		if (!mseq[key])
			continue;
		rc = kv_get(v->db, key, buf, value_len(), &len, &got);
		if (rc || check_value((uint8_t *)buf, len, key, &c) || got < mseq[key] ||
		    (got == mseq[key] && c != mcrc[key])) {
			if (lost++ < 10)
				fprintf(stderr,
					"LOST: key %" PRIu64 " acknowledged at seq %" PRIu64
					", read %s seq %" PRIu64 "\n",
					key, mseq[key], rc ? kv_errmsg(rc) : "ok", got);
		} else if (got > mseq[key]) {
			newer++;
		}
	}
	printf("acklog check: %" PRIu64 " acknowledged writes logged, %" PRIu64 " lost; %" PRIu64
	       " keys hold a newer durable write; tables: %" PRIu64
	       " records, all checksums good\n",
	       lines, lost, newer, tables_recs);
	free(mseq);
	free(mcrc);
	free(buf);
	return lost ? 1 : 0;
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr,
		"usage: cassandra-like --data DIR [--base-data DIR] [options]\n"
		"  --data DIR          data dir on a tmpfs mounted huge=always (huge-page run)\n"
		"  --base-data DIR     data dir on a tmpfs mounted huge=never: also run every\n"
		"                      workload on 4 KiB pages and print both side by side\n"
		"  --pages huge|base   which run --data is for when there is no --base-data\n"
		"  --region-dir DIR    where SHMEM regions live (default: the data dir)\n"
		"  --log-dir DIR       the commit log in DIR/huge, DIR/base (default: the data\n"
		"                      dir): on a disk, its fdatasync is real (README: Durability)\n"
		"  --cache-backend shmem|memfd|thp   row cache region (default shmem on tmpfs)\n"
		"  --memtable-backend shmem|memfd|thp  memtable region (default thp)\n"
		"  --records N (100000)  --threads N (20)\n"
		"  --fieldcount N (10)  --fieldlen BYTES (100)   YCSB's fieldcount, fieldlength\n"
		"  --writeallfields[=true|false]  updates write every field (default false, as\n"
		"                      YCSB's: one field, the rest of the row unchanged)\n"
		"  --readallfields[=true|false]   reads read every field (default true, as\n"
		"                      YCSB's); false: one field, chosen uniformly\n"
		"  --workloads a,b,u   YCSB's A 50/50, B 95/5 read/update, C read only, F 50 %%\n"
		"                      read, 50 %% read-modify-write; U 5/95 (the seed's mix)\n"
		"  --seconds S (10) | --ops N   length of each run (after the warm-up)\n"
		"  --warmup S          run each workload S seconds more first, not measured\n"
		"  --target OPS        pace all clients at OPS ops/s (YCSB's -target); then\n"
		"                      latency is also reported from each operation's intended\n"
		"                      start (no coordinated omission), beside service time\n"
		"  --dist zipfian|uniform|latest|hotspot  YCSB's requestdistribution (zipfian:\n"
		"                      its scrambled zipfian)  --repeat N\n"
		"  --status SECONDS    a progress line every SECONDS (10; 0: none)\n"
		"  --cache-mb M (128)  --memtable-mb M (64)\n"
		"  --verify            check every read against the last acknowledged write\n"
		"  --acklog FILE       append acknowledged writes to FILE\n"
		"  --check FILE        reopen (replay the log), check FILE's writes, exit\n"
		"  --no-load           use the data already in --data\n"
		"  --allow-disk        allow a data dir that is not on tmpfs (warns)\n"
		"  --json FILE         write every result (headline rows + summary) to FILE\n"
		"  --keep              row cache and memtables in kept regions (files in the\n"
		"                      region dir): the next open attaches to them, checked\n"
		"  --restart           kill -9 the store mid-run and start it again on the same\n"
		"                      data: warm (--keep's regions attached) vs cold (fresh\n"
		"                      regions), ops/s per 100 ms, time to 90 %% of steady,\n"
		"                      acknowledged writes lost (README: Fast restart)\n"
		"  --cache-image FILE  save the row cache to FILE at close and load it lazily\n"
		"                      at open when no kept cache is attached (relative: in\n"
		"                      the data dir). With --restart: each store shuts down\n"
		"                      cleanly, and the restarts after losing the kept regions\n"
		"                      are cold and from the image, beside warm (README: Row\n"
		"                      cache image)\n"
		"  --image-nowait      while the image loads, a read of a row not loaded yet\n"
		"                      is a miss (its page fetched in the background), not a\n"
		"                      wait for the page\n"
		"       cassandra-like bench [--quick] [--json FILE] [options]\n"
		"  the benchmark: as root, mounts its own tmpfs huge=always and huge=never\n"
		"  (--quick: small sizes for CI)\n");
	exit(2);
}

/* hpregion's backend names (hpr_backend_from_name), plus "memfd": shmem
 * on a memfd instead of a file under --data. */
static enum kv_backing parse_backing(const char *s)
{
	enum hpr_backend b = HPR_BACKEND_AUTO; /* stays AUTO for a bad name */

	if (!strcmp(s, "memfd"))
		return KV_MEM_MEMFD;
	hpr_backend_from_name(s, &b);
	if (b == HPR_BACKEND_SHMEM)
		return KV_MEM_SHMEM;
	if (b == HPR_BACKEND_THP)
		return KV_MEM_THP;
	fprintf(stderr, "cassandra-like: unknown backend '%s' (shmem, memfd, thp)\n", s);
	exit(2);
}

/*
 * `cassandra-like bench`: the benchmark as bench/run runs it. As root it
 * makes its own pair of tmpfs mounts (huge=always, huge=never) in a private
 * mount namespace, so they vanish with the process.
 */
static char bench_dir[64];
static char bench_huge[96], bench_base[96];

static int bench_mounts(void)
{
	if (geteuid() != 0) {
		const char *strict = getenv("HPR_TEST_NO_SKIP");

		printf("cassandra-like bench: skipped: needs root to mount a tmpfs huge=always "
		       "and a tmpfs huge=never (or pass --data/--base-data)\n");
		/* the same values as hpregion's tests/hpr_env.h: a skip fails */
		return strict && *strict && strcmp(strict, "0") ? 1 : 77;
	}
	/* hpregion's test suites change THP modes and hugetlb pools under an
	 * exclusive lock on this file (tests/hpr_env.h HPR_SYSTEM_LOCK; this
	 * example builds on its own, hence the copy): share it, so none does
	 * mid-benchmark. /run is root's alone, and we are root here. */
	int lk = open("/run/hpregion.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (lk >= 0)
		flock(lk, LOCK_SH); /* held until exit */
	if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		fprintf(stderr, "cassandra-like bench: private mount namespace: %s\n",
			strerror(errno));
		return 2;
	}
	snprintf(bench_dir, sizeof(bench_dir), "/tmp/cassandra-bench.XXXXXX");
	if (!mkdtemp(bench_dir)) {
		fprintf(stderr, "cassandra-like bench: mkdtemp: %s\n", strerror(errno));
		return 2;
	}
	snprintf(bench_huge, sizeof(bench_huge), "%s/huge", bench_dir);
	snprintf(bench_base, sizeof(bench_base), "%s/base", bench_dir);
	if (mkdir(bench_huge, 0700) || mkdir(bench_base, 0700) ||
	    mount("none", bench_huge, "tmpfs", 0, "huge=always,size=8g") ||
	    mount("none", bench_base, "tmpfs", 0, "huge=never,size=8g")) {
		fprintf(stderr, "cassandra-like bench: mounting tmpfs in %s: %s\n", bench_dir,
			strerror(errno));
		return 2;
	}
	opt.data = bench_huge;
	opt.base_data = bench_base;
	printf("cassandra-like bench: tmpfs huge=always at %s, tmpfs huge=never at %s\n",
	       bench_huge, bench_base);
	return 0;
}

static void bench_unmount(void)
{
	if (!bench_dir[0])
		return;
	umount2(bench_huge, MNT_DETACH);
	umount2(bench_base, MNT_DETACH);
	rmdir(bench_huge);
	rmdir(bench_base);
	rmdir(bench_dir);
}

/* ---- main, in steps ---- */

static const struct option long_opts[] = {
	{ "data", 1, 0, 'd' },
	{ "base-data", 1, 0, 'D' },
	{ "pages", 1, 0, 'P' },
	{ "region-dir", 1, 0, 'R' },
	{ "cache-backend", 1, 0, 'C' },
	{ "memtable-backend", 1, 0, 'M' },
	{ "records", 1, 0, 'n' },
	{ "fieldlen", 1, 0, 'f' },
	{ "threads", 1, 0, 't' },
	{ "workloads", 1, 0, 'w' },
	{ "seconds", 1, 0, 's' },
	{ "ops", 1, 0, 'o' },
	{ "dist", 1, 0, 'z' },
	{ "repeat", 1, 0, 'r' },
	{ "status", 1, 0, 'i' },
	{ "cache-mb", 1, 0, 'c' },
	{ "memtable-mb", 1, 0, 'm' },
	{ "verify", 0, 0, 'V' },
	{ "acklog", 1, 0, 'a' },
	{ "check", 1, 0, 'k' },
	{ "no-load", 0, 0, 'N' },
	{ "allow-disk", 0, 0, 'A' },
	{ "json", 1, 0, 'j' },
	{ "quick", 0, 0, 'q' },
	{ "log-dir", 1, 0, 'L' },
	{ "help", 0, 0, 'h' },
	{ "keep", 0, 0, 'K' },
	{ "fieldcount", 1, 0, 'F' },
	{ "writeallfields", 2, 0, 'W' }, /* optional argument: YCSB's true or false */
	{ "readallfields", 2, 0, 'E' },
	{ "target", 1, 0, 'T' },
	{ "warmup", 1, 0, 'U' },
	{ "restart", 0, 0, 'S' },
	{ "cache-image", 1, 0, 'I' },
	{ "image-nowait", 0, 0, 'J' },
	{ 0, 0, 0, 0 },
};

/* what main works on: the databases and the workloads, in order */
struct driver {
	struct variant vs[2];
	int nv;
	const char *pages; /* --pages */
	char wls[16];
	size_t nwl;
};

/* The value of --name as a whole number in [lo, hi]; anything else (a
 * sign, a suffix, out of range) ends the program with exit 2 and says why. */
static uint64_t num_opt(const char *name, const char *s, uint64_t lo, uint64_t hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (!*s || strchr(s, '-') || *end || errno || v < lo || v > hi) {
		fprintf(stderr,
			"cassandra-like: --%s %s: want a whole number from %" PRIu64 " to %" PRIu64
			"\n",
			name, s, lo, hi);
		exit(2);
	}
	return v;
}

/* `cassandra-like bench ...`: the benchmark's sizes (--quick: a smoke run
 * for CI), which options given after them still override; drops "bench"
 * from argv. */
static bool bench_defaults(int *argc, char ***argv)
{
	bool quick = false;

	if (*argc < 2 || strcmp((*argv)[1], "bench"))
		return false;
	for (int i = 2; i < *argc; i++)
		quick |= !strcmp((*argv)[i], "--quick");
	(*argv)[1] = (*argv)[0];
	(*argv)++;
	(*argc)--;
	opt.threads = 20;
	/* YCSB's rows of 10 x 100 B: 763 MiB of data (19 MiB quick) */
	opt.records = quick ? 20000 : 800000;
	opt.seconds = quick ? 2 : 15;
	opt.repeat = quick ? 1 : 3;
	opt.status = quick ? 1 : 5;
	opt.cache_mb = quick ? 32 : 512;
	opt.memtable_mb = quick ? 8 : 64;
	return true;
}

/* --name (true), --name=true or --name=false, as YCSB's -p name=...;
 * anything else: exit 2 */
static bool bool_opt(const char *name, const char *s)
{
	if (!s || !strcmp(s, "true"))
		return true;
	if (!strcmp(s, "false"))
		return false;
	fprintf(stderr, "cassandra-like: --%s=%s: want --%s, --%s=true or --%s=false\n", name, s,
		name, name, name);
	exit(2);
}

/* The value of --name as a number in [0, hi] (what: the message); else
 * exit 2. --target must be more than 0. */
static double secs_opt(const char *name, const char *s, double hi, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (!*s || *end || !(v >= 0 && v <= hi) || (!strcmp(name, "target") && !(v > 0))) {
		fprintf(stderr, "cassandra-like: --%s %s: want a %s, at most %g\n", name, s, what,
			hi);
		exit(2);
	}
	return v;
}

static void parse_options(int argc, char **argv, struct driver *d)
{
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			opt.data = optarg;
			break;
		case 'D':
			opt.base_data = optarg;
			break;
		case 'P':
			d->pages = optarg;
			break;
		case 'R':
			opt.region_dir = optarg;
			break;
		case 'L':
			opt.log_dir = optarg;
			break;
		case 'C':
			opt.cache_b = parse_backing(optarg);
			opt.cache_b_set = true;
			break;
		case 'M':
			opt.mt_b = parse_backing(optarg);
			break;
		case 'n':
			opt.records = num_opt("records", optarg, 1, UINT32_MAX);
			break;
		/* a row of up to 64 KiB: checked with --fieldcount below */
		case 'f':
			opt.row.fieldlen = (unsigned)num_opt("fieldlen", optarg, 1, 65000);
			break;
		case 'F':
			opt.row.fields = (unsigned)num_opt("fieldcount", optarg, 1, 1000);
			break;
		case 'W':
			opt.writeall = bool_opt("writeallfields", optarg);
			break;
		case 'E':
			opt.readall = bool_opt("readallfields", optarg);
			break;
		case 'T':
			opt.target = secs_opt("target", optarg, 1e9, "ops/s, more than 0");
			break;
		case 'U':
			opt.warmup =
				secs_opt("warmup", optarg, 86400, "time in seconds, at least 0");
			break;
		case 't':
			opt.threads = (unsigned)num_opt("threads", optarg, 1, MAX_THREADS);
			break;
		case 'w':
			snprintf(opt.workloads, sizeof(opt.workloads), "%s", optarg);
			break;
		case 's':
			opt.seconds = strtod(optarg, &end);
			if (*end || !(opt.seconds > 0 && opt.seconds <= 86400)) {
				fprintf(stderr,
					"cassandra-like: --seconds %s: want a time in seconds, "
					"more than 0 and at most a day\n",
					optarg);
				exit(2);
			}
			break;
		case 'o':
			opt.ops = num_opt("ops", optarg, 0, INT64_MAX);
			break;
		case 'z':
			if (!ycsb_dist_from_name(optarg, &opt.dist)) {
				fprintf(stderr,
					"cassandra-like: --dist %s: want zipfian, uniform, "
					"latest or hotspot\n",
					optarg);
				exit(2);
			}
			break;
		case 'r':
			opt.repeat = (unsigned)num_opt("repeat", optarg, 1, MAX_RUNS);
			break;
		case 'i':
			opt.status = (unsigned)num_opt("status", optarg, 0, 86400);
			break;
		case 'c':
			opt.cache_mb = num_opt("cache-mb", optarg, 0, 1 << 20);
			break;
		case 'm':
			opt.memtable_mb = num_opt("memtable-mb", optarg, 1, 1 << 16);
			break;
		case 'V':
			opt.verify = true;
			break;
		case 'a':
			opt.acklog = optarg;
			break;
		case 'k':
			opt.check = optarg;
			break;
		case 'N':
			opt.no_load = true;
			break;
		case 'A':
			opt.allow_disk = true;
			break;
		case 'j':
			opt.json = optarg;
			break;
		case 'q':
			break; /* bench: handled by bench_defaults */
		case 'K':
			opt.keep = true;
			break;
		case 'S':
			opt.restart = opt.keep = true;
			break;
		case 'I':
			opt.cache_image = optarg;
			break;
		case 'J':
			opt.image_nowait = true;
			break;
		default:
			usage();
		}
	}
}

/* The workload letters, the run count, and the cache's backing. */
static void check_options(struct driver *d)
{
	int nv = opt.base_data ? 2 : 1, runs;

	if ((uint64_t)opt.row.fields * opt.row.fieldlen > 65000) {
		fprintf(stderr,
			"cassandra-like: --fieldcount %u x --fieldlen %u: a row of at most 65000 "
			"bytes\n",
			opt.row.fields, opt.row.fieldlen);
		exit(2);
	}

	for (const char *p = opt.workloads; *p && d->nwl < sizeof(d->wls); p++)
		if (strchr("abcfu", *p | 0x20))
			d->wls[d->nwl++] = (char)(*p | 0x20);
		else if (*p != ',')
			usage();
	/* every run keeps its result until the summary: refuse, rather than
	 * drop, what does not fit */
	runs = (opt.no_load ? 0 : nv) + (int)(d->nwl * opt.repeat) * nv;
	if (runs > MAX_RUNS) {
		fprintf(stderr,
			"cassandra-like: %zu workload(s) x --repeat %u x %d page size(s)%s make "
			"%d runs, at most %d: lower --repeat or run fewer workloads\n",
			d->nwl, opt.repeat, nv, opt.no_load ? "" : " plus the load", runs,
			MAX_RUNS);
		exit(2);
	}
	if (!opt.cache_b_set) {
		/* a SHMEM region's file goes to the region dir, which must be
		 * on a tmpfs huge= mount; elsewhere use a memfd */
		char m[128];

		opt.cache_b = KV_MEM_MEMFD;
		if (!kv_check_dir(opt.region_dir ? opt.region_dir : opt.data, false, m,
				  sizeof(m)) &&
		    strcmp(m, "tmpfs huge=never"))
			opt.cache_b = KV_MEM_SHMEM;
	}
}

/* the variants (huge pages and/or base pages), opened */
static int open_variants(struct driver *d)
{
	if (opt.base_data) {
		d->vs[d->nv++] = (struct variant){ .name = "huge", .dir = opt.data };
		d->vs[d->nv++] = (struct variant){ .name = "base", .dir = opt.base_data };
	} else if (d->pages && !strcmp(d->pages, "base")) {
		d->vs[d->nv++] = (struct variant){ .name = "base", .dir = opt.data };
	} else {
		d->vs[d->nv++] = (struct variant){ .name = "huge", .dir = opt.data };
	}
	for (int i = 0; i < d->nv; i++) {
		if (open_variant(&d->vs[i], !strcmp(d->vs[i].name, "huge")))
			return 2;
		if (opt.verify) {
			d->vs[i].acked = calloc(opt.records, sizeof(*d->vs[i].acked));
			if (!d->vs[i].acked)
				return 2;
		}
	}
	return 0;
}

/* the load, then each workload --repeat times on every variant */
static int run_phases(struct driver *d)
{
	printf("cassandra-like: %" PRIu64 " records x %d fields x %u B = %" PRIu64
	       " MiB, %u threads, %s keys, cache %zu MiB, memtable 2 x %zu MiB; reads read %s, "
	       "updates write %s\n",
	       opt.records, opt.row.fields, opt.row.fieldlen, opt.records * value_len() >> 20,
	       opt.threads, ycsb_dist_name(opt.dist), opt.cache_mb, opt.memtable_mb,
	       opt.readall ? "every field" : "one field",
	       opt.writeall ? "every field" : "one field");
	print_run_header();
	for (int i = 0; i < d->nv && !opt.no_load; i++) {
		struct run_result *r = &results[nresults++];

		if (phase(&d->vs[i], 'L', r))
			return 3;
		print_run(r);
	}
	for (size_t w = 0; w < d->nwl; w++) {
		for (unsigned rep = 0; rep < opt.repeat; rep++) {
			for (int k = 0; k < d->nv; k++) {
				/* interleave: huge,base then base,huge */
				struct variant *v = &d->vs[rep % 2 ? d->nv - 1 - k : k];
				/* check_options() made sure they fit */
				struct run_result *r = &results[nresults++];

				/* let both databases' flushes and compactions finish:
				 * one run's background work must not slow the next */
				for (int q = 0; q < d->nv; q++)
					kv_db_quiesce(d->vs[q].db);
				if (phase(v, d->wls[w], r))
					return 3;
				print_run(r);
			}
		}
	}
	return 0;
}

/* --verify: a full scan of every variant, before and after a reopen */
static int verify_variants(struct driver *d)
{
	for (int i = 0; i < d->nv; i++) {
		struct variant *v = &d->vs[i];
		uint64_t bad;

		kv_db_quiesce(v->db);
		bad = full_check(v);
		/* reopen: the memtable comes back from the commit log */
		kv_close(v->db);
		v->db = NULL;
		if (open_variant(v, !strcmp(v->name, "huge")))
			return 2;
		bad += full_check(v);
		printf("[%s] verify: %" PRIu64 " reads checked, %" PRIu64
		       " errors (including a full scan before and after reopening)\n",
		       v->name, atomic_load(&verify_reads), bad);
	}
	return atomic_load(&verify_errors) ? 1 : 0;
}

/* the side-by-side summary, and --json */
static int report(struct driver *d, int rc)
{
	if (nresults)
		print_summary(d->vs, d->nv, d->wls, d->nwl);
	if (opt.json) {
		if (write_json(opt.json, d->wls, d->nwl, rc))
			rc = rc ? rc : 2;
		else
			printf("cassandra-like: every result, in JSON: %s\n", opt.json);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct driver d = { .nv = 0 };
	bool bench = bench_defaults(&argc, &argv);
	int rc = 0;

	parse_options(argc, argv, &d);
	if (bench && !opt.data && optind == argc) {
		rc = bench_mounts();
		if (rc) {
			bench_unmount();
			return rc;
		}
	}
	if (!opt.data || optind != argc)
		usage();
	check_options(&d);
	signal(SIGPIPE, SIG_IGN);
	ycsb_gen_init(&keygen, opt.dist, opt.records);

	if (opt.restart) {
		if (opt.base_data || d.pages) {
			fprintf(stderr, "cassandra-like: --restart runs huge pages only: no "
					"--base-data or --pages\n");
			return 2;
		}
		rc = run_restart(d.wls[0]);
		bench_unmount();
		return rc;
	}
	rc = open_variants(&d);
	if (!rc && opt.check) {
		rc = check_acklog(&d.vs[0], opt.check);
	} else if (!rc && opt.acklog &&
		   (acklog_fd = open(opt.acklog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) <
			   0) {
		fprintf(stderr, "cassandra-like: %s: %s\n", opt.acklog, strerror(errno));
		rc = 2;
	} else if (!rc) {
		rc = run_phases(&d);
		if (!rc && opt.verify)
			rc = verify_variants(&d);
		if (rc != 2 && rc != 3)
			rc = report(&d, rc);
	}

	for (int i = 0; i < d.nv; i++) {
		kv_close(d.vs[i].db);
		free(d.vs[i].acked);
	}
	if (acklog_fd >= 0)
		close(acklog_fd);
	bench_unmount();
	return rc;
}
