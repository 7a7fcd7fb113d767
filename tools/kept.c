/* SPDX-License-Identifier: MIT */
/*
 * hpr stat --kept DIR: the kept regions (HPR_F_ATTACH, docs/attach.md) in a
 * directory on a tmpfs or hugetlbfs mount. For each regular file: whether
 * it carries a valid stamp (src/stamp.h) and, if so, the region's backend,
 * size and page size, the file's owner, who holds it now (its flock(2)
 * locks in /proc/locks: read, never taken, so a listing cannot make an
 * attach fail) and the last attach (the file's access time, which every
 * successful attach sets). And for hpr stat PID: is a mapped file a kept
 * region (kept_vma)?
 */
#define _GNU_SOURCE
#include "hpr.h"
#include "os.h" /* TMPFS_MAGIC, HUGETLBFS_MAGIC */
#include "stamp.h"

#include <hpregion/hpregion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define MAX_KEPT 1024

struct kept {
	char name[256];
	struct stat st;
	struct hpr__stamp s;
	char why[160]; /* not a kept region: why */
	bool valid;
	char held[96]; /* "free", "exclusive: pid 12", "shared: pids 3 4" */
};

/* The flock holders of the file (dev, ino) from /proc/locks. */
static void holders(const char *locks, const struct stat *st, char *buf, size_t len)
{
	const char *line = locks;
	size_t o = 0;

	snprintf(buf, len, "free");
	while (line && *line) {
		char kind[16], mode[16], rw[16];
		unsigned maj, min;
		unsigned long ino;
		int pid;

		/* "1: FLOCK  ADVISORY  WRITE 6298 fe:00:10747905 0 EOF" */
		if (sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%lu", kind, mode, rw, &pid, &maj,
			   &min, &ino) == 7 &&
		    !strcmp(kind, "FLOCK") && ino == st->st_ino && maj == major(st->st_dev) &&
		    min == minor(st->st_dev) && o + 24 < len) {
			if (!o)
				o = (size_t)snprintf(buf, len, "%s: pid",
						     strcmp(rw, "WRITE") ? "shared" : "exclusive");
			o += (size_t)snprintf(buf + o, len - o, " %d", pid);
		}
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
}

/* Read and check the stamp at the end of the file name in dfd. */
static void read_kept(int dfd, size_t stamp_len, struct kept *k)
{
	int fd = openat(dfd, k->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	off_t at = k->st.st_size - (off_t)stamp_len;

	if (fd < 0) {
		snprintf(k->why, sizeof(k->why), "cannot open it: %s", strerror(errno));
		return;
	}
	if (k->st.st_size < (off_t)stamp_len || at % 4096)
		snprintf(k->why, sizeof(k->why), "too short for a stamp");
	else if (pread(fd, &k->s, sizeof(k->s), at) != (ssize_t)sizeof(k->s))
		snprintf(k->why, sizeof(k->why), "its stamp cannot be read");
	else if (!hpr__stamp_invalid(&k->s, (uint64_t)k->st.st_size, k->why, sizeof(k->why)))
		k->valid = true;
	close(fd);
}

bool kept_vma(unsigned long pid, const struct stat *want, const char *path, char *name, size_t len)
{
	struct hpr__stamp s;
	struct statfs sf;
	struct stat st;
	char p[600], why[160];
	size_t stamp_len;
	bool ok = false;
	int fd;

	/* through the process's root: its mount namespace's view of path */
	if (snprintf(p, sizeof(p), "/proc/%lu/root%s", pid, path) >= (int)sizeof(p) ||
	    lstat(p, &st) || !S_ISREG(st.st_mode) || st.st_ino != want->st_ino ||
	    st.st_dev != want->st_dev || statfs(p, &sf) ||
	    (sf.f_type != TMPFS_MAGIC && sf.f_type != (typeof(sf.f_type))HUGETLBFS_MAGIC))
		return false;
	fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return false;
	stamp_len = sf.f_type == TMPFS_MAGIC ? 4096 : (size_t)sf.f_bsize;
	/* still that file (not swapped since the lstat), with a stamp */
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_ino == want->st_ino &&
	    st.st_dev == want->st_dev && st.st_size >= (off_t)stamp_len &&
	    pread(fd, &s, sizeof(s), st.st_size - (off_t)stamp_len) == (ssize_t)sizeof(s) &&
	    !hpr__stamp_invalid(&s, (uint64_t)st.st_size, why, sizeof(why))) {
		s.name[sizeof(s.name) - 1] = '\0';
		scopy(name, len, s.name);
		ok = true;
	}
	close(fd);
	return ok;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct kept *)a)->name, ((const struct kept *)b)->name);
}

/* The regular files of dir, stamped or not, sorted by name. */
static int scan(const char *dir, struct kept *ks, unsigned *n, bool *truncated)
{
	DIR *d = opendir(dir);
	char *locks = slurp("/proc/locks", NULL);
	struct dirent *e;
	struct statfs sf;
	size_t stamp_len;

	if (!d) {
		free(locks);
		return fail("cannot open %s: %s", dir, strerror(errno));
	}
	if (fstatfs(dirfd(d), &sf) ||
	    (sf.f_type != TMPFS_MAGIC && sf.f_type != (typeof(sf.f_type))HUGETLBFS_MAGIC)) {
		closedir(d);
		free(locks);
		return fail("%s is not on tmpfs or hugetlbfs: kept regions live on those", dir);
	}
	stamp_len = sf.f_type == TMPFS_MAGIC ? 4096 : (size_t)sf.f_bsize;
	*n = 0;
	while ((e = readdir(d))) {
		struct kept *k = &ks[*n];

		if (e->d_name[0] == '.')
			continue;
		if (*n == MAX_KEPT) {
			*truncated = true;
			break;
		}
		memset(k, 0, sizeof(*k));
		scopy(k->name, sizeof(k->name), e->d_name);
		if (fstatat(dirfd(d), k->name, &k->st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(k->st.st_mode))
			continue;
		read_kept(dirfd(d), stamp_len, k);
		holders(locks, &k->st, k->held, sizeof(k->held));
		(*n)++;
	}
	closedir(d);
	free(locks);
	qsort(ks, *n, sizeof(*ks), by_name);
	return 0;
}

static const char *owner(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		scopy(buf, len, pw->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}

static const char *when(const struct timespec *t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t->tv_sec, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static void print_json(const char *dir, const struct kept *ks, unsigned n, bool truncated)
{
	struct jw w;
	char a[64];

	jw_init(&w, stdout);
	jw_obj(&w, NULL);
	jw_str(&w, "dir", dir);
	jw_bool(&w, "truncated", truncated);
	jw_arr(&w, "files");
	for (unsigned i = 0; i < n; i++) {
		const struct kept *k = &ks[i];

		jw_obj(&w, NULL);
		jw_str(&w, "name", k->name);
		jw_bool(&w, "kept", k->valid);
		jw_str(&w, "why", k->valid ? NULL : k->why);
		jw_str(&w, "backend",
		       k->valid ? hpr_backend_name((enum hpr_backend)k->s.backend) : NULL);
		jw_u64(&w, "size", k->valid ? k->s.size : (uint64_t)k->st.st_size);
		jw_u64(&w, "page_size", k->valid ? k->s.page_size : 0);
		jw_u64(&w, "uid", k->st.st_uid);
		jw_str(&w, "owner", owner(k->st.st_uid, a, sizeof(a)));
		jw_str(&w, "held", k->held);
		jw_str(&w, "last_attach", when(&k->st.st_atim, a, sizeof(a)));
		jw_end_obj(&w);
	}
	jw_end_arr(&w);
	jw_end_obj(&w);
	jw_finish(&w);
}

int stat_kept(const char *dir, bool json)
{
	static struct kept ks[MAX_KEPT];
	bool truncated = false;
	char edir[4 * 256];
	unsigned n = 0;

	if (scan(dir, ks, &n, &truncated))
		return 1;
	if (json) {
		print_json(dir, ks, n, truncated);
		return 0;
	}
	printf("%s: %u file%s\n", esc_text(dir, edir, sizeof(edir)), n, n == 1 ? "" : "s");
	if (n)
		printf("%-24s %-7s %9s %7s %-10s %-20s %s\n", "NAME", "BACKEND", "SIZE", "PAGE",
		       "OWNER", "LAST ATTACH", "HELD");
	for (unsigned i = 0; i < n; i++) {
		const struct kept *k = &ks[i];
		char a[32], b[32], o[64], t[64], ename[4 * 256];

		esc_text(k->name, ename, sizeof(ename));
		if (!k->valid) {
			printf("%-24s not a kept region: %s\n", ename, k->why);
			continue;
		}
		printf("%-24s %-7s %9s %7s %-10s %-20s %s\n", ename,
		       hpr_backend_name((enum hpr_backend)k->s.backend),
		       fmt_size_arg(k->s.size, a, sizeof(a)),
		       fmt_size_arg(k->s.page_size, b, sizeof(b)),
		       owner(k->st.st_uid, o, sizeof(o)), when(&k->st.st_atim, t, sizeof(t)),
		       k->held);
	}
	if (truncated)
		printf("(more than %d files: the rest are not shown)\n", MAX_KEPT);
	return 0;
}
