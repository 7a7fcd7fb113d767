/* SPDX-License-Identifier: MIT */
/* What the benchmark programs share (see common.h). */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

void bench_die(const char *what)
{
	perror(what);
	exit(1);
}

int bench_write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, v, strlen(v));
	close(fd);
	return n < 0 ? -1 : 0;
}

void bench_read_str(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

ssize_t bench_huge_bytes(const void *p, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[256];
	uintptr_t lo = (uintptr_t)p, hi = lo + len;
	size_t huge = 0;
	int in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, v;
		char key[64];

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = a < hi && b > lo;
			continue;
		}
		if (in && sscanf(line, "%63s %lu", key, &v) == 2 &&
		    (!strcmp(key, "AnonHugePages:") || !strcmp(key, "ShmemPmdMapped:") ||
		     !strcmp(key, "FilePmdMapped:") || !strcmp(key, "Shared_Hugetlb:") ||
		     !strcmp(key, "Private_Hugetlb:")))
			huge += v * 1024;
	}
	fclose(f);
	return (ssize_t)huge;
}

int bench_touch(size_t len, bool thp)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	if (thp)
		madvise(p, len, MADV_HUGEPAGE);
	memset(p, 1, len);
	munmap(p, len);
	return 0;
}

/* ---- system set-up, undone by bench_restore() ---- */
static const char *pool_path;
static char pool_old[32];
static char mounts[4][64];
static int nmounts;

void bench_restore(void)
{
	if (*pool_old)
		bench_write_str(pool_path, pool_old);
	*pool_old = 0;
	for (int i = 0; i < nmounts; i++) {
		umount2(mounts[i], MNT_DETACH);
		rmdir(mounts[i]);
	}
	nmounts = 0;
}

static void on_signal(int sig)
{
	bench_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void restore_at_exit(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	atexit(bench_restore);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, on_signal); /* `bench/prefault | head` */
}

int bench_lock_system(void)
{
	return hpr_env_lock_system(false);
}

bool bench_no_skip(void)
{
	return hpr_env_no_skip();
}

int bench_private_ns(void)
{
	return unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ? -1 : 0;
}

void bench_isolate(const char *need_root)
{
	if (geteuid()) {
		fprintf(stderr, "%s\n", need_root);
		exit(bench_no_skip() ? 1 : 77);
	}
	if (bench_lock_system() < 0)
		bench_die("flock " BENCH_LOCK);
	if (bench_private_ns())
		bench_die("private mount namespace");
}

int bench_mount_tmp(const char *fstype, const char *opts, char *dir, size_t len)
{
	char t[] = "/tmp/hpr-bench-XXXXXX";

	if (nmounts == (int)(sizeof(mounts) / sizeof(mounts[0]))) {
		errno = ENOSPC;
		return -1;
	}
	if (!mkdtemp(t) || mount("none", t, fstype, 0, opts))
		return -1;
	snprintf(mounts[nmounts++], sizeof(mounts[0]), "%s", t);
	snprintf(dir, len, "%s", t);
	restore_at_exit();
	return 0;
}

unsigned long bench_pool_save(const char *path)
{
	pool_path = path;
	bench_read_str(path, pool_old, sizeof(pool_old));
	restore_at_exit();
	return strtoul(pool_old, NULL, 10);
}

int bench_pool_set(unsigned long pages, unsigned long *got)
{
	char v[32];
	int rc;

	snprintf(v, sizeof(v), "%lu", pages);
	rc = bench_write_str(pool_path, v);
	if (got) {
		bench_read_str(pool_path, v, sizeof(v));
		*got = strtoul(v, NULL, 10);
	}
	return rc;
}

/* ---- command line ---- */
static int usage(const char *prog, const struct bench_opt *opts)
{
	fprintf(stderr, "usage: %s", prog);
	for (const struct bench_opt *o = opts; o->name; o++) {
		if (o->meta)
			fprintf(stderr, " [%s %s]", o->name, o->meta);
		else
			fprintf(stderr, " [%s]", o->name);
	}
	fprintf(stderr, "\n");
	return 2;
}

int bench_args(int argc, char **argv, const struct bench_opt *opts)
{
	for (int i = 1; i < argc; i++) {
		const struct bench_opt *o = opts;

		while (o->name && strcmp(argv[i], o->name))
			o++;
		if (!o->name || (o->meta && i + 1 >= argc))
			return usage(argv[0], opts);
		switch (o->type) {
		case BENCH_T_CALL:
			o->fn();
			break;
		case BENCH_T_MIB:
			*(size_t *)o->val = strtoul(argv[++i], NULL, 10) << 20;
			break;
		case BENCH_T_INT:
			*(int *)o->val = atoi(argv[++i]);
			break;
		case BENCH_T_DOUBLE:
			*(double *)o->val = atof(argv[++i]);
			break;
		case BENCH_T_STR:
			*(const char **)o->val = argv[++i];
			break;
		}
	}
	return 0;
}

int bench_limits(const char *name, int reps, int max_reps, size_t size, size_t min_mib)
{
	if (reps >= 1 && reps <= max_reps && size >= (min_mib << 20))
		return 0;
	fprintf(stderr, "%s: reps must be 1..%d and size >= %zu MiB\n", name, max_reps, min_mib);
	return 2;
}
