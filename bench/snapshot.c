/* SPDX-License-Identifier: MIT */
/*
 * bench/snapshot: hpr_save/hpr_load throughput against fio doing the same
 * sequential I/O on the same file system, and against a plain
 * pread/pwrite loop over the same pages.
 *
 * A THP region of --size MiB is half populated (every other huge page
 * holds data, the rest never faulted), so every variant moves the same
 * bytes: size/2. Per file system (tmpfs: /dev/shm; disk: /var/tmp) and per
 * repetition, in rotating order:
 *   save   hpr_save (io_uring)  | hpr_save (HPR_SNAP_NO_URING: pwrite) |
 *          loop: pwrite of each data page | fio rw=write on a fresh file
 *   load   hpr_load into a fresh region (faults + zeroing included) |
 *          hpr_load with HPR_SNAP_NO_URING | loop: pread of each data page
 *          into a fresh region | fio rw=read of its file into its buffer;
 *          plus hpr_load into a region whose data pages are already
 *          resident ("warm": pure I/O + checksum, no page faults)
 * Disk runs use O_DIRECT for every variant (hpr_* by default, the loop by
 * opening O_DIRECT, fio direct=1), so the page cache plays no part and no
 * drop_caches is needed; tmpfs has no device, its "I/O" is the page cache
 * (hpr treats it as page-cache I/O although it accepts O_DIRECT).
 * Fresh load targets are created right after touching and freeing as much
 * memory, so the host backs it (see warm()).
 * fio is set up as a user would for the same job: ioengine=io_uring,
 * bs=2M, --fixedbufs (registered buffers, no per-I/O page pinning),
 * --iomem=shmhuge (2 MiB hugetlb buffers, like the region's pages),
 * direct=1 on the disk, and the same I/Os in flight as hpregion:
 * hpregion runs one ring per thread (the caller + workers - 1, the
 * region has one worker per CPU here) with 8 I/Os each, so fio runs that
 * many jobs at iodepth 8, each on its own slice of the file
 * (group_reporting). The hugetlb pool for fio's buffers is raised under the
 * system lock and restored at exit (root); not root, fio runs with plain
 * buffers, said in the table -- and under HPR_TEST_NO_SKIP that is a
 * failure.
 * GB/s = bytes moved / wall time; fio's figure is its own bw_bytes (which
 * excludes its start-up). Medians of --reps; memory warmed first. Each
 * baseline (fio, loop) whose slowest rep is more than 30 % below its
 * fastest is flagged "UNSTABLE" in the table and the headline.
 *
 *   snapshot [--quick] [--size MiB] [--reps N] [--json FILE]
 * Holds the system lock (the suites change THP modes under it).
 */
#define _GNU_SOURCE
#include "common.h"

#include <hpregion/hpregion.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { V_HPR, V_NOURING, V_LOOP, V_FIO, V_WARM, NV };
static const char *const vname[NV] = { "hpr", "hpr-pread", "loop", "fio", "hpr-warm" };
enum { OP_SAVE, OP_LOAD, NOP };
static const char *const opname[NOP] = { "save", "load" };
enum { FS_TMPFS, FS_DISK, NFS };
static const char *const fsname[NFS] = { "tmpfs", "disk" };
static const char *fsdir[NFS] = { "/dev/shm", "/var/tmp" };

static size_t size = 2048UL << 20, ps;
static int reps = 5;
static hpr_region *src;
static int io_seen;
static int nthreads = 1; /* hpregion's rings: the region's workers */
static bool fio_huge;	 /* fio's buffers on 2 MiB hugetlb pages */
#define SNAP_QD 8	 /* I/Os in flight per ring (src/snapshot.c) */
static char path_snap[NFS][256], path_loop[NFS][256], path_fio[NFS][256];

static size_t data_bytes(void)
{
	return (size / ps + 1) / 2 * ps;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "snapshot bench: %s: %s\n", what, hpr_strerror(rc));
	exit(1);
}

/* Touch and free size bytes so the next fresh region gets memory the
 * host backs (this VM's host takes back free memory; first touch of it
 * is a host fault): the load variants then compare I/O + population, not
 * the host's page faults. */
static void warm(void)
{
	bench_touch(size, true);
}

static hpr_region *mk(void)
{
	struct hpr_config c;
	hpr_region *r;
	int rc;

	hpr_config_init(&c);
	c.backend = HPR_BACKEND_THP;
	c.size = size;
	c.workers = (unsigned)nthreads;
	rc = hpr_create(&c, &r);
	if (rc)
		die("hpr_create", rc);
	return r;
}

/* every other page: even pages hold data */
static void populate(hpr_region *r, bool fill)
{
	for (size_t p = 0; p < size / ps; p += 2) {
		int rc = hpr_fault_in(r, p * ps, ps);

		if (rc)
			die("hpr_fault_in", rc);
		if (fill) {
			uint64_t *w = (uint64_t *)((char *)hpr_base(r) + p * ps);

			for (size_t i = 0; i < ps / 8; i++)
				w[i] = (p << 32) ^ (i * 0x9e3779b97f4a7c15ULL);
		}
	}
}

static double run_hpr(int fs, int op, unsigned flags, bool resident)
{
	hpr_region *r = NULL;
	double t0, t;
	int rc, fd;

	/* a fresh file, like the loop and fio get: freeing the old one's
	 * blocks is not part of the save */
	if (op == OP_SAVE)
		unlink(path_snap[fs]);
	fd = open(path_snap[fs], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(path_snap[fs]);
		exit(1);
	}
	if (op == OP_LOAD) {
		warm();
		r = mk();
		if (resident)
			populate(r, false);
	}
	t0 = bench_now();
	rc = op == OP_SAVE ? hpr_save(src, fd, flags) : hpr_load(r, fd, flags, NULL);
	t = bench_now() - t0;
	if (rc)
		die(op == OP_SAVE ? "hpr_save" : "hpr_load", rc);
	if (!flags) {
		struct hpr_stats st;

		hpr_stats(op == OP_SAVE ? src : r, &st);
		io_seen = st.snapshot_io;
	}
	if (r)
		hpr_destroy(r);
	close(fd);
	return (double)data_bytes() / t / 1e9;
}

/* What a user would write without the library: one pwrite/pread per data
 * page, O_DIRECT on the disk like fio. */
static double run_loop(int fs, int op)
{
	int fl = O_RDWR | O_CREAT | O_CLOEXEC | (fs == FS_DISK ? O_DIRECT : 0);
	hpr_region *r = src;
	char *base;
	double t0, t;
	int fd;

	if (op == OP_LOAD) {
		warm();
		r = mk();
	}
	base = hpr_base(r);

	if (op == OP_SAVE)
		unlink(path_loop[fs]);
	fd = open(path_loop[fs], fl, 0600);
	if (fd < 0) {
		perror(path_loop[fs]);
		exit(1);
	}
	t0 = bench_now();
	if (op == OP_SAVE && ftruncate(fd, (off_t)size)) {
		perror("ftruncate");
		exit(1);
	}
	for (size_t p = 0; p < size / ps; p += 2) {
		ssize_t n = op == OP_SAVE ? pwrite(fd, base + p * ps, ps, (off_t)(p * ps)) :
					    pread(fd, base + p * ps, ps, (off_t)(p * ps));

		if (n != (ssize_t)ps) {
			fprintf(stderr, "loop %s: %zd: %s\n", opname[op], n, strerror(errno));
			exit(1);
		}
	}
	t = bench_now() - t0;
	close(fd);
	if (op == OP_LOAD)
		hpr_destroy(r);
	return (double)data_bytes() / t / 1e9;
}

static double run_fio(int fs, int op)
{
	char cmd[1024], buf[65536];
	size_t n;
	FILE *p;
	char *s;

	if (op == OP_SAVE) {
		/* a fresh sparse file of the final size, like hpr_save and the
		 * loop make: writes then fill holes and never extend i_size
		 * (ext4 runs extending O_DIRECT writes synchronously) */
		int fd;

		unlink(path_fio[fs]);
		fd = open(path_fio[fs], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)data_bytes())) {
			perror(path_fio[fs]);
			exit(1);
		}
		close(fd);
	}
	/* nthreads jobs, each on its own contiguous slice of the data */
	size_t slice = data_bytes() / (size_t)nthreads / ps * ps;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=hpr --filename=%s --rw=%s --bs=2M --size=%zu --offset_increment=%zu "
		 "--numjobs=%d --group_reporting --ioengine=io_uring --iodepth=%d --fixedbufs %s "
		 "--direct=%d --fallocate=none --output-format=json 2>/dev/null",
		 path_fio[fs], op == OP_SAVE ? "write" : "read", slice, slice, nthreads, SNAP_QD,
		 fio_huge ? "--iomem=shmhuge --hugepage-size=2M" : "", fs == FS_DISK);
	p = popen(cmd, "r");
	if (!p) {
		perror("popen fio");
		exit(1);
	}
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = 0;
	pclose(p);
	s = strstr(buf, op == OP_SAVE ? "\"write\" :" : "\"read\" :");
	s = s ? strstr(s, "\"bw_bytes\" :") : NULL;
	if (!s) {
		fprintf(stderr, "fio gave no bandwidth; command: %s\n", cmd);
		exit(1);
	}
	return strtod(s + strlen("\"bw_bytes\" :"), NULL) / 1e9;
}

static double run(int fs, int op, int v)
{
	switch (v) {
	case V_HPR:
		return run_hpr(fs, op, 0, false);
	case V_NOURING:
		return run_hpr(fs, op, HPR_SNAP_NO_URING, false);
	case V_LOOP:
		return run_loop(fs, op);
	case V_FIO:
		return run_fio(fs, op);
	case V_WARM:
		return op == OP_LOAD ? run_hpr(fs, op, 0, true) : -1;
	}
	return -1;
}

static void cleanup(void)
{
	for (int fs = 0; fs < NFS; fs++) {
		unlink(path_snap[fs]);
		unlink(path_loop[fs]);
		unlink(path_fio[fs]);
	}
}

static void quick(void)
{
	size = 512UL << 20;
	reps = 3;
}

/* As root, 2 MiB hugetlb pages for fio's buffers (iodepth x 2 MiB per job,
 * and some slack for its alignment), restored at exit by bench_restore(). */
static void fio_pool(void)
{
	unsigned long need = (unsigned long)nthreads * (SNAP_QD + 2), old, got = 0;

	if (geteuid())
		return;
	old = bench_pool_save(BENCH_POOL_2M);
	fio_huge = !bench_pool_set(old + need, &got) && got >= old + need;
	if (!fio_huge)
		bench_restore();
}

/* A baseline whose slowest rep is more than 30 % below its fastest. */
static bool unstable(const double *v)
{
	double lo = v[0], hi = v[0];

	for (int i = 1; i < reps; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	return lo < hi * 0.7;
}

int main(int argc, char **argv)
{
	static double res[NFS][NOP][NV][32];
	double med[NFS][NOP][NV];
	bool shaky[NFS][NOP][NV] = { 0 };
	cpu_set_t cpus;
	const char *json = NULL;
	const struct bench_opt opts[] = { BENCH_QUICK(quick), BENCH_SIZE(&size), BENCH_REPS(&reps),
					  BENCH_JSON(&json), BENCH_END };
	FILE *jf;

	if (bench_args(argc, argv, opts) || bench_limits("snapshot", reps, 32, size, 64))
		return 2;
	if (system("fio --version >/dev/null 2>&1")) {
		fprintf(stderr, "snapshot: fio is not installed (apt-get install fio; "
				"HPR_EXTRA_PKGS=fio scripts/deps.sh)\n");
		return 77;
	}
	for (int fs = 0; fs < NFS; fs++) {
		snprintf(path_snap[fs], sizeof(path_snap[fs]), "%s/hpr-bench-snap.%d", fsdir[fs],
			 getpid());
		snprintf(path_loop[fs], sizeof(path_loop[fs]), "%s/hpr-bench-loop.%d", fsdir[fs],
			 getpid());
		snprintf(path_fio[fs], sizeof(path_fio[fs]), "%s/hpr-bench-fio.%d", fsdir[fs],
			 getpid());
	}
	/* the test suites change THP modes and hugetlb pools under this lock:
	 * hold it so THP stays what it is for the whole run */
	bench_lock_system();
	if (!sched_getaffinity(0, sizeof(cpus), &cpus))
		nthreads = CPU_COUNT(&cpus) < 1 ? 1 : CPU_COUNT(&cpus);
	fio_pool();
	if (!fio_huge && bench_no_skip()) {
		fprintf(stderr, "snapshot: no 2 MiB hugetlb pool for fio's buffers (needs root); "
				"HPR_TEST_NO_SKIP is set: an untuned baseline is a failure\n");
		return 1;
	}
	atexit(cleanup);
	src = mk();
	ps = hpr_page_size(src);
	size = hpr_size(src);
	populate(src, true);
	/* warm: make the host back the memory the load targets will use */
	bench_touch(size * 2, false);
	printf("snapshot: THP region %zu MiB, %zu MiB of data (every other 2 MiB page), "
	       "%d repetitions, median GB/s; variants interleaved\n",
	       size >> 20, data_bytes() >> 20, reps);
	printf("fio: %d jobs x iodepth %d (hpregion: %d rings x %d), bs 2M, io_uring, "
	       "--fixedbufs, %s buffers, direct=1 on disk\n",
	       nthreads, SNAP_QD, nthreads, SNAP_QD,
	       fio_huge ? "2 MiB hugetlb (--iomem=shmhuge)" : "plain 4 KiB (not root: no pool)");
	for (int fs = 0; fs < NFS; fs++) {
		/* warm-up round, not counted: files exist, caches settled */
		for (int op = 0; op < NOP; op++)
			for (int v = 0; v < NV; v++)
				run(fs, op, v);
		for (int r = 0; r < reps; r++)
			for (int op = 0; op < NOP; op++) /* saves first: loads read them */
				for (int k = 0; k < NV; k++) {
					int v = (k + r) % NV;

					res[fs][op][v][r] = run(fs, op, v);
				}
	}
	for (int fs = 0; fs < NFS; fs++)
		for (int op = 0; op < NOP; op++)
			for (int v = 0; v < NV; v++) {
				shaky[fs][op][v] = (v == V_LOOP || v == V_FIO) &&
						   unstable(res[fs][op][v]);
				qsort(res[fs][op][v], (size_t)reps, sizeof(double),
				      bench_cmp_double);
				med[fs][op][v] = res[fs][op][v][reps / 2];
			}
	printf("\n%-6s %-5s %9s %10s %9s %9s %9s %8s %8s\n", "fs", "op", "hpr", "hpr-pread", "loop",
	       "fio", "hpr-warm", "hpr/fio", "hpr/loop");
	for (int fs = 0; fs < NFS; fs++)
		for (int op = 0; op < NOP; op++) {
			double *m = med[fs][op];

			printf("%-6s %-5s %9.2f %10.2f %9.2f %9.2f ", fsname[fs], opname[op],
			       m[V_HPR], m[V_NOURING], m[V_LOOP], m[V_FIO]);
			if (m[V_WARM] > 0)
				printf("%9.2f", m[V_WARM]);
			else
				printf("%9s", "-");
			printf(" %7.2fx %7.2fx", m[V_HPR] / m[V_FIO], m[V_HPR] / m[V_LOOP]);
			if (shaky[fs][op][V_FIO] || shaky[fs][op][V_LOOP])
				printf("  UNSTABLE:%s%s (> 30 %% between reps)",
				       shaky[fs][op][V_FIO] ? " fio" : "",
				       shaky[fs][op][V_LOOP] ? " loop" : "");
			printf("\n");
		}
	printf("(GB/s; disk = %s with O_DIRECT everywhere, tmpfs = %s; hpr/loop load\n"
	       " into a fresh region (faulting included), fio reads into a reused buffer,\n"
	       " hpr-warm loads into resident pages; hpr used: %s)\n",
	       fsdir[FS_DISK], fsdir[FS_TMPFS],
	       io_seen == HPR_IO_URING ? "io_uring" : "pread/pwrite");
	jf = json ? fopen(json, "w") : NULL;
	if (jf) {
		int first = 1;

		fprintf(jf,
			"{\"bench\":\"snapshot\",\"size_mib\":%zu,\"data_mib\":%zu,"
			"\"reps\":%d,\"results\":[",
			size >> 20, data_bytes() >> 20, reps);
		for (int fs = 0; fs < NFS; fs++)
			for (int op = 0; op < NOP; op++) {
				fprintf(jf, "%s{\"fs\":\"%s\",\"op\":\"%s\"", first ? "" : ",",
					fsname[fs], opname[op]);
				for (int v = 0; v < NV; v++)
					fprintf(jf, ",\"%s_gbs\":%.3f", vname[v], med[fs][op][v]);
				fprintf(jf, "}");
				first = 0;
			}
		fprintf(jf, "],\"headline\":[");
		first = 1;
		for (int fs = 0; fs < NFS; fs++)
			for (int op = 0; op < NOP; op++) {
				double *m = med[fs][op];

				for (int v = V_LOOP; v <= V_FIO; v++) {
					fprintf(jf,
						"%s{\"measure\":\"%s %s GB/s vs %s\",\"ours\":"
						"\"%.2f GB/s\",\"baseline\":\"%.2f GB/s (%s%s)%s\","
						"\"ratio\":\"%.2fx\"}",
						first ? "" : ",", opname[op], fsname[fs], vname[v],
						m[V_HPR], m[v], vname[v],
						v == V_FIO ? (fio_huge ? ", huge fixed buffers" :
									 ", plain buffers") :
							     "",
						shaky[fs][op][v] ?
							" UNSTABLE: > 30 % between reps" :
							"",
						m[V_HPR] / m[v]);
					first = 0;
				}
			}
		fprintf(jf, "]}\n");
		fclose(jf);
	}
	hpr_destroy(src);
	return 0;
}
