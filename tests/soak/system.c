/* SPDX-License-Identifier: MIT */
/*
 * What the soak sets up around the library and must leave as it found it:
 * the 2 MiB hugetlb pool, its mounts (in the private namespace the harness
 * made), the fd table, the memory cgroup, snapshot files.
 */
#define _GNU_SOURCE
#include "common.h"
#include "soak.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int sk_count_fds(bool list)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char p[300], t[300];
		ssize_t l;

		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		l = readlink(p, t, sizeof(t) - 1);
		t[l > 0 ? l : 0] = 0;
		/* the library's per-process /proc/self/pagemap handle, opened
		 * on first use (after the soak's first count) and kept */
		if (strstr(t, "/pagemap"))
			continue;
		if (list)
			fprintf(stderr, "soak:   fd %s -> %s\n", e->d_name, t);
		n++;
	}
	closedir(d);
	return n;
}

int sk_count_mounts(void)
{
	return t_count_lines("/proc/self/mountinfo");
}

static unsigned long pool(const char *what)
{
	char p[128], b[32];
	FILE *f;
	unsigned long v = 0;

	snprintf(p, sizeof(p), "/sys/kernel/mm/hugepages/hugepages-2048kB/%s", what);
	f = fopen(p, "re");
	if (!f)
		return 0;
	if (fgets(b, sizeof(b), f))
		v = strtoul(b, NULL, 10);
	fclose(f);
	return v;
}

void sk_baseline(struct sk_baseline *b)
{
	b->fds = sk_count_fds(false);
	b->mounts = sk_count_mounts();
	b->pool_nr = pool("nr_hugepages");
	b->pool_free = pool("free_hugepages");
	b->pool_resv = pool("resv_hugepages");
	b->pool_surp = pool("surplus_hugepages");
}

int sk_baseline_check(const struct sk_baseline *b, bool wait_pool)
{
	struct sk_baseline now;
	int bad = 0;

	for (int i = 0;; i++) {
		sk_baseline(&now);
		if (!wait_pool || i == 50 || now.pool_free == b->pool_free)
			break;
		nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
	}
	if (now.fds != b->fds) {
		bad++, fprintf(stderr, "soak: FAIL %d fds open at the start, %d at the end:\n",
			       b->fds, now.fds);
		sk_count_fds(true);
	}
	if (now.mounts != b->mounts)
		bad++, fprintf(stderr,
			       "soak: FAIL %d mountinfo lines at the start, %d at the end\n",
			       b->mounts, now.mounts);
	if (now.pool_nr != b->pool_nr || now.pool_free != b->pool_free ||
	    now.pool_resv != b->pool_resv || now.pool_surp != b->pool_surp)
		bad++, fprintf(stderr,
			       "soak: FAIL 2 MiB pool nr/free/resv/surplus %lu/%lu/%lu/%lu at the "
			       "start, %lu/%lu/%lu/%lu at the end\n",
			       b->pool_nr, b->pool_free, b->pool_resv, b->pool_surp, now.pool_nr,
			       now.pool_free, now.pool_resv, now.pool_surp);
	return bad;
}

int sk_system_setup(struct sk_opts *o)
{
	static char disk[] = "/var/tmp/hpr-soak-XXXXXX";

	/* huge=always: faults give PMD-mapped shmem pages (shmem_enabled
	 * is "never" here, so a memfd would not) */
	o->shmem_dir = t_mount_tmpfs("huge=always,size=1g");
	o->snap_dir = t_mount_tmpfs("size=1g");
	if (!mkdtemp(disk)) {
		fprintf(stderr, "soak: mkdtemp %s: %s\n", disk, strerror(errno));
		return -errno;
	}
	o->disk_dir = disk;
	if (!o->no_hugetlb) {
		if (t_hugetlb_pool(2048, o->pool_pages) < o->pool_pages) {
			t_compact();
			if (t_hugetlb_pool(2048, o->pool_pages) < o->pool_pages)
				t_skip("the kernel gave fewer than %u 2 MiB hugetlb pages",
				       o->pool_pages);
		}
		if (t_sysfs_set("/sys/kernel/mm/hugepages/hugepages-2048kB/"
				"nr_overcommit_hugepages",
				"0"))
			t_skip("cannot set nr_overcommit_hugepages (need root)");
		/* pages an earlier process's snapshot fd pinned come back
		 * about 1 s after it exited (issue 15 #10) */
		for (int i = 0; i < 50 && pool("free_hugepages") < pool("nr_hugepages"); i++)
			nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
	}
	return 0;
}

static int unmount(const char *dir)
{
	int bad = 0;

	if (dir && umount2(dir, 0)) {
		/* EBUSY: something of ours still open on it */
		fprintf(stderr, "soak: FAIL umount %s: %s\n", dir, strerror(errno));
		umount2(dir, MNT_DETACH);
		bad = 1;
	}
	if (dir)
		rmdir(dir);
	return bad;
}

int sk_system_teardown(const struct sk_opts *o)
{
	int bad = unmount(o->shmem_dir) + unmount(o->snap_dir);

	if (o->disk_dir && rmdir(o->disk_dir))
		bad++, fprintf(stderr, "soak: FAIL %s is not empty at the end: %s\n", o->disk_dir,
			       strerror(errno));
	return bad;
}

/* Our own memory cgroup (v1): the "N:memory:/path" line. */
static int own_memcg(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[512];
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (!c || strncmp(c + 1, "memory:", 7))
			continue;
		c[strcspn(c, "\n")] = 0;
		snprintf(out, len, "/sys/fs/cgroup/memory%s", c + 8);
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

int sk_cgroup_create(char *dir, size_t len, size_t limit)
{
	char parent[400], v[32];
	int rc = own_memcg(parent, sizeof(parent));

	if (rc)
		return rc;
	snprintf(dir, len, "%s/hpr-soak-%d", parent, (int)getpid());
	if (mkdir(dir, 0755))
		return -errno;
	snprintf(v, sizeof(v), "%zu", limit);
	rc = t_write_at(dir, "memory.limit_in_bytes", v);
	if (!rc)
		rc = t_write_at(dir, "memory.oom_control", "1");
	if (rc)
		rmdir(dir);
	return rc;
}

int sk_cgroup_join(const char *dir)
{
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)getpid());
	return t_write_at(dir, "cgroup.procs", v);
}

bool sk_cgroup_unstick(const char *dir)
{
	char p[512], line[128];
	bool under = false;
	FILE *f;

	snprintf(p, sizeof(p), "%s/memory.oom_control", dir);
	f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strcmp(line, "under_oom 1\n"))
			under = true;
	if (f)
		fclose(f);
	t_write_at(dir, "memory.limit_in_bytes", "-1");
	return under;
}

int sk_cgroup_remove(const char *dir)
{
	/* the worker has exited; its page cache charges move to the parent */
	for (int i = 0; i < 50; i++) {
		if (!rmdir(dir))
			return 0;
		if (errno != EBUSY)
			break;
		nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
	}
	fprintf(stderr, "soak: FAIL rmdir %s: %s\n", dir, strerror(errno));
	return -errno;
}

int sk_sparse_copy(const char *src, const char *dst)
{
	static const char zero[SK_BLOCK];
	char *buf = malloc(SK_BLOCK);
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
	off_t off = 0;
	ssize_t n;

	if (!buf || in < 0) {
		rc = in < 0 ? -errno : -ENOMEM;
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		goto out;
	}
	while ((n = pread(in, buf, SK_BLOCK, off)) > 0) {
		if (memcmp(buf, zero, (size_t)n) && pwrite(out, buf, (size_t)n, off) != n) {
			rc = -EIO;
			goto out;
		}
		off += n;
	}
	if (n < 0 || ftruncate(out, off))
		rc = -errno;
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(buf);
	return rc;
}
