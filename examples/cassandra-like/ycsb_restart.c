/* SPDX-License-Identifier: MIT */
/*
 * cassandra-like --restart (issue #17 part 2): how fast the store comes
 * back after a kill -9, with its row cache and memtables kept (warm: the
 * kept regions of --keep attached and checked, restart.c) and without
 * (cold: the same data dir, the kept regions removed first, so the cache
 * starts empty and the memtable is replayed from the commit log).
 *
 *   prime    a store process loads the data (unless --no-load), runs the
 *            workload for 2 x --seconds and is killed with -9 mid-run;
 *            the ops/s of its last --seconds are the steady ops/s
 *   restart  a new process opens the same data dir and runs the same
 *            workload, recording ops and cache hits every 100 ms from the
 *            end of kv_open. After --seconds it stops its clients, reads
 *            every key acknowledged before it started (kv_get_nofill: the
 *            check leaves the cache as it was), starts them again, and is
 *            killed with -9 mid-run. Warm and cold alternate (warm, cold,
 *            then cold, warm, ...), --repeat times each.
 *   final    a last process opens the data dir and reads every key any of
 *            them acknowledged.
 *
 * The store processes are forks of this one; what they measure, and the
 * shadow of acknowledged writes (the highest seq per key, as --verify
 * keeps it), are in memory shared with this process, so they outlive the
 * kills. Every read of every store process is checked against the shadow
 * too. A write counts as acknowledged once kv_put returned 0.
 *
 * With --cache-image (the row cache image, image.c) each store process
 * shuts down cleanly at the end of its window instead (kv_close saves the
 * image), and the restarts are three kinds, after a clean shutdown: warm
 * (the kept regions attached: the tmpfs survived), cold (kept regions and
 * image removed) and image (the kept regions removed, as a reboot loses
 * the tmpfs, and the image's page cache dropped, as a reboot does: the
 * cache is loaded lazily from the image file).
 */
#define _GNU_SOURCE
#include "ycsb.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_NS 100000000ull /* a sample every 100 ms */
#define MAX_SAMPLES 3000     /* 300 s */
#define MAX_WINS (3 * MAX_RUNS + 2)

enum { W_PRIME, W_WARM, W_COLD, W_IMAGE, W_FINAL };
static const char *const kind_name[] = { "prime", "warm", "cold", "image", "final" };

/* one store process, as it reports to the parent */
struct win {
	int kind, round;
	_Atomic int done; /* measured (and checked): the parent kills it now */
	_Atomic int stop; /* --cache-image: the parent asks for a clean shutdown */
	int rc;		  /* its error, if it failed */
	double open_ms;	  /* kv_open, with the kept regions' checks */
	int n;		  /* samples: t[0] = 0 is the end of kv_open */
	uint64_t t[MAX_SAMPLES], ops[MAX_SAMPLES], hits[MAX_SAMPLES], misses[MAX_SAMPLES];
	struct kv_keep_info ki;
	size_t img_demanded, img_total; /* the image's load: bytes on demand, in all */
	uint64_t loaded, check_keys, lost, verify_reads, verify_errors, crc_dropped;
};

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void sample(struct win *w, struct variant *v, struct client *cl, uint64_t t0)
{
	struct kv_stats st;
	int i = w->n;

	if (i >= MAX_SAMPLES)
		return;
	kv_db_stats(v->db, &st);
	w->t[i] = kv_now_ns() - t0;
	w->ops[i] = cl ? clients_ops(cl) : 0;
	w->hits[i] = st.cache_hits;
	w->misses[i] = st.cache_misses;
	w->n = i + 1;
}

/* cold and image: the kept regions go, so the next open makes fresh ones;
 * cold: the image too; image: its page cache dropped, as after a reboot */
static void remove_kept(int kind)
{
	const char *dir = opt.region_dir ? opt.region_dir : opt.data;
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/rowcache", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/memtable", dir);
	unlink(p);
	if (!opt.cache_image)
		return;
	if (opt.cache_image[0] == '/')
		snprintf(p, sizeof(p), "%s", opt.cache_image);
	else
		snprintf(p, sizeof(p), "%.2000s/%.2000s", opt.data, opt.cache_image);
	if (kind == W_COLD) {
		unlink(p);
	} else if ((fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* written and fsync'ed: clean */
		close(fd);
	}
}

/* a store process: never returns */
static void store(struct win *w, char workload, _Atomic uint64_t *acked)
{
	struct variant v = { .name = "huge", .dir = opt.data, .acked = acked };
	uint64_t *snap = NULL, t0, end;
	struct client *cl;
	struct kv_stats st;

	if (w->kind == W_COLD || w->kind == W_IMAGE)
		remove_kept(w->kind);
	if (w->kind != W_PRIME) {
		/* what was acknowledged before this process: the check's list */
		snap = malloc(opt.records * sizeof(*snap));
		if (!snap)
			_exit(2);
		for (uint64_t k = 0; k < opt.records; k++)
			snap[k] = atomic_load(&acked[k]);
	}
	t0 = kv_now_ns();
	if (open_variant(&v, true)) {
		w->rc = 2;
		atomic_store(&w->done, 1);
		_exit(2);
	}
	w->open_ms = (double)(kv_now_ns() - t0) / 1e6;
	kv_db_keep_info(v.db, &w->ki);
	if (w->kind == W_FINAL) {
		w->lost = check_acked(&v, snap, &w->check_keys);
		atomic_store(&w->done, 1);
		kv_close(v.db);
		_exit(0);
	}
	if (w->kind == W_PRIME && !opt.no_load) {
		struct run_result r;

		if (phase(&v, 'L', &r)) {
			w->rc = 3;
			atomic_store(&w->done, 1);
			_exit(3);
		}
		w->loaded = r.ops;
		kv_db_quiesce(v.db);
		t0 = kv_now_ns();
	}
	/* serve, sampling every 100 ms from the end of kv_open */
	t0 = kv_now_ns();
	cl = clients_start(&v, workload, t0);
	if (!cl)
		_exit(2);
	end = (uint64_t)(opt.seconds * (w->kind == W_PRIME ? 2 : 1) * 1e9);
	for (uint64_t i = 0;; i++) {
		sleep_until(t0 + i * TICK_NS);
		sample(w, &v, cl, t0);
		if (w->t[w->n - 1] >= end || w->n == MAX_SAMPLES)
			break;
	}
	if (w->kind != W_PRIME) {
		/* every write acknowledged before we started must be here */
		if (clients_stop(cl))
			w->rc = 3;
		w->lost = check_acked(&v, snap, &w->check_keys);
		cl = clients_start(&v, workload, kv_now_ns());
		if (!cl)
			_exit(2);
	}
	kv_db_stats(v.db, &st);
	w->crc_dropped = st.cache_crc_dropped;
	w->img_demanded = st.image_demanded;
	w->img_total = st.image_total;
	kv_db_keep_info(v.db, &w->ki); /* the image's load time, now known */
	w->verify_reads = atomic_load(&verify_reads);
	w->verify_errors = atomic_load(&verify_errors);
	atomic_store(&w->done, 1);
	if (opt.cache_image) {
		/* serving until the parent asks, then a clean shutdown: kv_close
		 * saves the image the next image restart loads */
		while (!atomic_load(&w->stop))
			usleep(10000);
		if (clients_stop(cl))
			_exit(3);
		kv_close(v.db);
		_exit(0);
	}
	for (;;) /* serving, until the kill */
		pause();
}

/* ---- what the parent makes of it ---- */

/* ops/s between samples i and j */
static double rate(const struct win *w, int i, int j)
{
	return j > i && w->t[j] > w->t[i] ?
		       (double)(w->ops[j] - w->ops[i]) * 1e9 / (double)(w->t[j] - w->t[i]) :
		       0;
}

/* the ops/s of the last `secs` seconds of w */
static double tail_rate(const struct win *w, double secs)
{
	int k = (int)(secs * 10 + 0.5);

	if (w->n < 2)
		return 0;
	if (k > w->n - 1)
		k = w->n - 1;
	return rate(w, w->n - 1 - k, w->n - 1);
}

static double hit_rate(const struct win *w, int i, int j)
{
	uint64_t h = w->hits[j] - w->hits[i], m = w->misses[j] - w->misses[i];

	return h + m ? 100.0 * (double)h / (double)(h + m) : 0;
}

/* Seconds from the start of kv_open until the store serves at 90 % of
 * steady: the end of the first 100 ms at >= 90 % whose next 500 ms
 * average >= 90 % too (one lucky 100 ms is not a recovery; a whole second
 * is too long a test on a shared machine, where a store in its steady state
 * dips under 90 % for a few hundred ms as often as not). -1: never. */
static double t90(const struct win *w, double steady)
{
	for (int i = 1; i < w->n; i++) {
		int j = i + 4 < w->n ? i + 4 : w->n - 1;

		if (rate(w, i - 1, i) >= 0.9 * steady && rate(w, i - 1, j) >= 0.9 * steady)
			return w->open_ms / 1e3 + (double)w->t[i] / 1e9;
	}
	return -1;
}

static void print_win(const struct win *w, double steady)
{
	const struct kv_keep_info *ki = &w->ki;

	printf("[%s %d] kv_open %.1f ms; row cache %s", kind_name[w->kind], w->round, w->open_ms,
	       ki->cache_warm	  ? "warm" :
	       ki->cache_attached ? "cold (kept one unusable)" :
				    "new");
	if (ki->cache_warm)
		printf(" (%" PRIu64 " rows kept)", ki->cache_rows);
	else if (ki->cache_why[0])
		printf(" (%s)", ki->cache_why);
	if (ki->image_loaded)
		printf(" from the image (%" PRIu64 " rows, %" PRIu64 " cleared as newer; loaded in "
		       "%.0f ms, %zu of %zu MiB on demand)",
		       ki->image_rows, ki->image_stale, ki->image_load_ms, w->img_demanded >> 20,
		       w->img_total >> 20);
	else if (w->kind == W_IMAGE)
		printf(" (image not used: %s)", ki->image_why);
	if (ki->image_failed)
		printf(" (image load failed: %s)", ki->image_why);
	printf("; memtables %s", ki->mt_warm	 ? "kept" :
				 ki->mt_attached ? "replayed (kept ones unusable)" :
						   "new, replayed");
	if (ki->mt_warm)
		printf(" (%" PRIu64 " records kept, %" PRIu64 " discarded, %" PRIu64
		       " replayed from the log%s)",
		       ki->mt_kept, ki->mt_discarded, ki->mt_replayed,
		       ki->imm_recovered ? ", an immutable one to flush" : "");
	else if (ki->mt_why[0])
		printf(" (%s)", ki->mt_why);
	printf("\n");
	if (w->kind == W_PRIME) {
		int k = (int)(opt.seconds * 10);

		printf("[prime] %s%.0f s of the workload; steady: %.0f ops/s (its last %.0f s), cache "
		       "hit rate %.1f %%\n",
		       w->loaded ? "loaded the records, then " : "", (double)w->t[w->n - 1] / 1e9,
		       steady, opt.seconds, hit_rate(w, w->n - 1 > k ? w->n - 1 - k : 0, w->n - 1));
		return;
	}
	if (w->kind == W_FINAL) {
		printf("[final] read every acknowledged key: %" PRIu64 " keys, %" PRIu64 " lost\n",
		       w->check_keys, w->lost);
		return;
	}
	{
		double t = t90(w, steady);

		printf("[%s %d] first 100 ms: %.0f ops/s, cache hit rate %.1f %%; 90 %% of steady "
		       "(%.0f ops/s) %s%.2f s after kv_open began; last second: %.0f ops/s, cache "
		       "hit rate %.1f %%\n",
		       kind_name[w->kind], w->round, rate(w, 0, 1), hit_rate(w, 0, 1), 0.9 * steady,
		       t < 0 ? "not reached in " : "", t < 0 ? (double)w->t[w->n - 1] / 1e9 : t,
		       tail_rate(w, 1), hit_rate(w, w->n > 11 ? w->n - 11 : 0, w->n - 1));
	}
	printf("[%s %d] ops/s per 100 ms:", kind_name[w->kind], w->round);
	for (int i = 1; i < w->n && i <= 20; i++)
		printf(" %.0f", rate(w, i - 1, i));
	printf("%s\n[%s %d] ops/s per second:", w->n > 21 ? " ..." : "", kind_name[w->kind],
	       w->round);
	for (int i = 10; i < w->n; i += 10)
		printf(" %.0f", rate(w, i - 10, i));
	printf("\n[%s %d] checked %" PRIu64 " acknowledged keys after the restart: %" PRIu64
	       " lost; %" PRIu64 " reads checked during the run, %" PRIu64 " wrong; %" PRIu64
	       " kept rows failed their crc\n",
	       kind_name[w->kind], w->round, w->check_keys, w->lost, w->verify_reads,
	       w->verify_errors, w->crc_dropped);
}

/* run one store process through its window; 0 when it did its part */
static int run_win(struct win *w, char workload, _Atomic uint64_t *acked)
{
	pid_t pid;
	int st = 0;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		store(w, workload, acked);
	while (!atomic_load(&w->done)) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr,
				"cassandra-like: the %s store process ended on its own (%s %d)\n",
				kind_name[w->kind], WIFSIGNALED(st) ? "signal" : "exit",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			return -ECHILD;
		}
		usleep(10000);
	}
	if (w->kind == W_FINAL) {
		waitpid(pid, &st, 0);
		return w->rc;
	}
	usleep(300000); /* mid-run: its clients are at work again */
	if (opt.cache_image) {
		atomic_store(&w->stop, 1);
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr,
				"cassandra-like: the %s store process did not shut down "
				"cleanly\n",
				kind_name[w->kind]);
			return -ECHILD;
		}
		return w->rc;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		fprintf(stderr, "cassandra-like: the %s store process was not alive at the kill\n",
			kind_name[w->kind]);
		return -ECHILD;
	}
	return w->rc;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	if (!n)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void summary(struct win *ws, int nw, double steady)
{
	static const char *const med[] = { "warm med", "cold med", "image med" };
	double t[3][MAX_RUNS], h[3][MAX_RUNS], o[3][MAX_RUNS], s1[3][MAX_RUNS], h1[3][MAX_RUNS];
	int n[3] = { 0, 0, 0 };
	bool never[3] = { false, false, false };

	if (opt.cache_image)
		printf("\n== restart after a clean shutdown: warm (kept regions attached) vs cold "
		       "(kept regions and image lost) vs image (kept regions lost, row cache "
		       "loaded lazily from the image) ==\n");
	else
		printf("\n== restart after kill -9: warm (kept regions attached) vs cold (fresh "
		       "regions, same data) ==\n");
	printf("steady: %.0f ops/s (the prime run's last %.0f s); workload %s, %u threads\n",
	       steady, opt.seconds, wl_name(opt.workloads[0]), opt.threads);
	printf("%-9s %11s %16s %16s %12s %12s %12s %12s %10s\n", "run", "kv_open ms",
	       "hit % 1st 100ms", "ops/s 1st 100ms", "hit % 1st s", "ops/s 1st s", "ops/s 2nd s",
	       "ops/s 3rd s", "t90 s");
	for (int i = 0; i < nw; i++) {
		struct win *w = &ws[i];
		int k = w->kind == W_WARM ? 0 : w->kind == W_COLD ? 1 : 2;
		double x = t90(w, steady);
		char name[16];

		if (w->kind != W_WARM && w->kind != W_COLD && w->kind != W_IMAGE)
			continue;
		snprintf(name, sizeof(name), "%s %d", kind_name[w->kind], w->round);
		printf("%-9s %11.1f %16.1f %16.0f %12.1f %12.0f %12.0f %12.0f ", name, w->open_ms,
		       hit_rate(w, 0, 1), rate(w, 0, 1), hit_rate(w, 0, 10 < w->n ? 10 : w->n - 1),
		       rate(w, 0, 10 < w->n ? 10 : w->n - 1),
		       rate(w, 10, 20 < w->n ? 20 : w->n - 1),
		       rate(w, 20, 30 < w->n ? 30 : w->n - 1));
		if (x < 0)
			printf("%10s\n", "never");
		else
			printf("%10.2f\n", x);
		never[k] |= x < 0;
		t[k][n[k]] = x < 0 ? 1e9 : x;
		h[k][n[k]] = hit_rate(w, 0, 1);
		o[k][n[k]] = w->open_ms;
		s1[k][n[k]] = rate(w, 0, 10 < w->n ? 10 : w->n - 1);
		h1[k][n[k]] = hit_rate(w, 0, 10 < w->n ? 10 : w->n - 1);
		n[k]++;
	}
	for (int k = 0; k < 3; k++) {
		double mt = median(t[k], n[k]);

		if (!n[k])
			continue;
		printf("%-9s %11.1f %16.1f %16s %12.1f %12.0f %12s %12s ", med[k],
		       median(o[k], n[k]), median(h[k], n[k]), "", median(h1[k], n[k]),
		       median(s1[k], n[k]), "", "");
		if (mt >= 1e9)
			printf("%10s\n", "never");
		else
			printf("%10.2f%s\n", mt, never[k] ? " (some never)" : "");
	}
}

int run_restart(char workload)
{
	size_t wsz = MAX_WINS * sizeof(struct win), asz = opt.records * sizeof(uint64_t);
	struct win *ws;
	_Atomic uint64_t *acked;
	uint64_t lost = 0, verr = 0, checked = 0;
	double steady = 0;
	int nw = 0, rc = 0;

	if (strlen(opt.workloads) > 1 && strchr(opt.workloads, ','))
		printf("cassandra-like --restart: workload %s (the first of --workloads)\n",
		       wl_name(workload));
	ws = mmap(NULL, wsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	acked = mmap(NULL, asz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ws == MAP_FAILED || acked == MAP_FAILED) {
		fprintf(stderr, "cassandra-like: cannot map the shared results: %s\n",
			strerror(errno));
		return 2;
	}
	printf("cassandra-like --restart: %" PRIu64 " records x %d fields x %u B, %u threads, %s "
	       "keys, workload %s, row cache %zu MiB, memtable 2 x %zu MiB, kept in %s; %.0f s "
	       "after each restart, %u x warm and cold\n",
	       opt.records, opt.row.fields, opt.row.fieldlen, opt.threads, ycsb_dist_name(opt.dist),
	       wl_name(workload), opt.cache_mb, opt.memtable_mb,
	       opt.region_dir ? opt.region_dir : opt.data, opt.seconds, opt.repeat);
	ws[nw++].kind = W_PRIME;
	for (unsigned r = 0; r < opt.repeat; r++) {
		/* each kind first, second and last in turn */
		static const int order[3][3] = { { W_WARM, W_COLD, W_IMAGE },
						 { W_COLD, W_IMAGE, W_WARM },
						 { W_IMAGE, W_WARM, W_COLD } };

		for (int i = 0; i < (opt.cache_image ? 3 : 2); i++) {
			ws[nw].kind = opt.cache_image	     ? order[r % 3][i] :
				      (r % 2) == (unsigned)i ? W_WARM :
							       W_COLD;
			ws[nw++].round = (int)r + 1;
		}
	}
	ws[nw++].kind = W_FINAL;
	for (int i = 0; i < nw && !rc; i++) {
		rc = run_win(&ws[i], workload, acked);
		if (rc) {
			fprintf(stderr, "cassandra-like: --restart stopped at the %s run\n",
				kind_name[ws[i].kind]);
			break;
		}
		if (ws[i].kind == W_PRIME)
			steady = tail_rate(&ws[i], opt.seconds);
		print_win(&ws[i], steady);
		lost += ws[i].lost;
		checked += ws[i].check_keys;
		verr += ws[i].verify_errors;
	}
	if (!rc)
		summary(ws, nw, steady);
	printf("acknowledged writes lost: %" PRIu64 " (%" PRIu64 " acknowledged keys read back "
	       "after the restarts; %" PRIu64 " wrong reads during the runs)\n",
	       lost, checked, verr);
	munmap(ws, wsz);
	munmap(acked, asz);
	return rc ? 3 : lost || verr ? 1 : 0;
}
