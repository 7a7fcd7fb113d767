/* SPDX-License-Identifier: MIT */
/*
 * hpr mount: mount a tmpfs with huge=always (or hugetlbfs) with sane
 * options, creating the directory if needed: nosuid,nodev, mode 0700 and
 * owned by root unless --mode/--owner say otherwise (a huge-page mount is
 * memory that is charged to whoever writes it; world-writable is a choice
 * to make on purpose, not a default). Prints what the kernel mounted, read
 * back from mountinfo.
 */
#define _GNU_SOURCE
#include "hpr.h"
#include "parse.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char usage[] =
	"usage: hpr mount DIR [--hugetlbfs] [--size SIZE] [--pagesize SIZE]\n"
	"                 [--huge always|within_size|advise] [--mode MODE]\n"
	"                 [--owner USER[:GROUP]]\n"
	"  --hugetlbfs    mount hugetlbfs instead of a tmpfs huge=always\n"
	"  --size SIZE    limit the mount (tmpfs default: half of RAM; hugetlbfs:\n"
	"                 no limit beyond the pool)\n"
	"  --pagesize SZ  hugetlbfs page size (2M, 1G); default: the default size\n"
	"  --huge MODE    tmpfs huge= mode (default always)\n"
	"  --mode MODE    octal mode of the mount's root (default 0700)\n"
	"  --owner U[:G]  owner of the mount's root (default root)\n";

/* mkdir -p with mode 0755 for the parents and DIR itself. *created gets
 * the offset in dir of the first directory this call made (0: none), so a
 * failed mount can take them away again. */
static int mkdir_p(const char *dir, size_t *created)
{
	char p[4096];
	size_t n = strlen(dir);

	*created = 0;
	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (!mkdir(p, 0755)) {
			if (!*created)
				*created = i;
		} else if (errno != EEXIST) {
			return -errno;
		}
		p[i] = dir[i];
	}
	return 0;
}

/* Remove what mkdir_p made, deepest first. */
static void rmdir_created(const char *dir, size_t created)
{
	char p[4096];
	size_t n = strlen(dir);

	if (!created || n >= sizeof(p))
		return;
	memcpy(p, dir, n + 1);
	while (n >= created) {
		while (n > 1 && p[n - 1] == '/')
			p[--n] = '\0';
		if (rmdir(p))
			return;
		while (n > 0 && p[n - 1] != '/')
			n--;
		if (n <= created)
			return;
		p[n] = '\0';
	}
}

static int parse_owner(const char *s, long *uid, long *gid)
{
	char user[256];
	const char *colon = strchr(s, ':');
	size_t ul = colon ? (size_t)(colon - s) : strlen(s);
	unsigned long v;

	if (!ul || ul >= sizeof(user))
		return -EINVAL;
	memcpy(user, s, ul);
	user[ul] = '\0';
	if (!parse_count(user, &v)) {
		*uid = (long)v;
	} else {
		struct passwd *pw = getpwnam(user);

		if (!pw)
			return -ENOENT;
		*uid = pw->pw_uid;
		if (!colon)
			*gid = pw->pw_gid;
	}
	if (colon) {
		if (!parse_count(colon + 1, &v)) {
			*gid = (long)v;
		} else {
			struct group *gr = getgrnam(colon + 1);

			if (!gr)
				return -ENOENT;
			*gid = gr->gr_gid;
		}
	}
	return 0;
}

static bool pagesize_offered(uint64_t ps, char *offered, size_t len)
{
	uint64_t sizes[8];
	unsigned n = hugetlb_sizes(sizes, 8);
	bool ok = false;
	char a[32];

	offered[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		ok |= sizes[i] == ps;
		snprintf(offered + strlen(offered), len - strlen(offered), "%s%s", i ? ", " : "",
			 fmt_size_arg(sizes[i], a, sizeof(a)));
	}
	return ok;
}

int cmd_mount(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "hugetlbfs", no_argument, NULL, 'H' },
		{ "size", required_argument, NULL, 's' },
		{ "pagesize", required_argument, NULL, 'p' },
		{ "huge", required_argument, NULL, 'u' },
		{ "mode", required_argument, NULL, 'm' },
		{ "owner", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const char *const huge_modes[] = { "always", "within_size", "advise" };
	bool htlb = false;
	uint64_t size = 0, ps = 0;
	const char *huge = NULL, *dir;
	unsigned long mode = 0700;
	long uid = -1, gid = -1;
	char data[256], a[32], offered[128], real[4096];
	struct stat st;
	size_t created = 0;
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "Hs:p:u:m:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			htlb = true;
			break;
		case 's':
			if (parse_size_arg(optarg, &size))
				return usage_error(usage, "bad size '%s' (try 4G, 512M)", optarg);
			break;
		case 'p':
			if (parse_size_arg(optarg, &ps))
				return usage_error(usage, "bad page size '%s' (2M or 1G)", optarg);
			break;
		case 'u': {
			bool ok = false;

			for (size_t k = 0; k < 3; k++)
				ok |= !strcmp(optarg, huge_modes[k]);
			if (!ok)
				return usage_error(usage,
						   "bad --huge '%s' (always, within_size "
						   "or advise)",
						   optarg);
			huge = optarg;
			break;
		}
		case 'm': {
			char *end;

			errno = 0;
			mode = strtoul(optarg, &end, 8);
			if (errno || *end || !*optarg || mode > 07777)
				return usage_error(usage, "bad mode '%s' (octal, e.g. 0700)",
						   optarg);
			break;
		}
		case 'o':
			rc = parse_owner(optarg, &uid, &gid);
			if (rc == -ENOENT)
				return fail("no such user or group in '%s'", optarg);
			if (rc)
				return usage_error(usage, "bad owner '%s' (USER[:GROUP])", optarg);
			break;
		default: /* -h, or an unknown option */
			return end_option(c, usage, argv);
		}
	}
	if (optind >= argc)
		return usage_error(usage, "no directory given");
	dir = argv[optind++];
	if (optind < argc)
		return usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (!*dir)
		return usage_error(usage, "empty directory name");
	if (htlb && huge)
		return usage_error(usage, "--huge is for tmpfs; hugetlbfs pages are always huge");
	if (!htlb && ps)
		return usage_error(usage, "--pagesize is for --hugetlbfs; a huge tmpfs uses "
					  "the PMD size");
	if (htlb) {
		if (!ps) {
			uint64_t s[8];

			if (!hugetlb_sizes(s, 8))
				return fail("this kernel has no hugetlbfs (no %s)", HTLB_DIR);
			ps = 0; /* the kernel's default; left out of the options */
		} else if (!pagesize_offered(ps, offered, sizeof(offered))) {
			return fail("page size %s is not offered here (offered: %s)",
				    fmt_size_arg(ps, a, sizeof(a)), offered[0] ? offered : "none");
		}
	}

	/* options */
	if (htlb)
		snprintf(data, sizeof(data), "mode=%04lo", mode);
	else
		snprintf(data, sizeof(data), "huge=%s,mode=%04lo", huge ? huge : "always", mode);
	if (ps)
		snprintf(data + strlen(data), sizeof(data) - strlen(data), ",pagesize=%s",
			 fmt_size_arg(ps, a, sizeof(a)));
	if (size)
		snprintf(data + strlen(data), sizeof(data) - strlen(data), ",size=%llu",
			 (unsigned long long)size);
	if (uid >= 0)
		snprintf(data + strlen(data), sizeof(data) - strlen(data), ",uid=%ld", uid);
	if (gid >= 0)
		snprintf(data + strlen(data), sizeof(data) - strlen(data), ",gid=%ld", gid);

	rc = mkdir_p(dir, &created);
	if (rc == -EACCES || rc == -EPERM || rc == -EROFS)
		return fail("cannot create %s: %s (mounting needs root anyway: run it as "
			    "root)",
			    dir, strerror(-rc));
	if (rc)
		return fail("cannot create %s: %s", dir, strerror(-rc));
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return fail("%s is not a directory", dir);
	if (mount(htlb ? "hugetlbfs" : "hpr-tmpfs", dir, htlb ? "hugetlbfs" : "tmpfs",
		  MS_NOSUID | MS_NODEV, data)) {
		int e = errno;

		rmdir_created(dir, created);

		if (e == EPERM || e == EACCES)
			return fail("mounting needs root (CAP_SYS_ADMIN): mount %s on %s: %s.\n"
				    "Run it as root, e.g. `sudo hpr mount %s%s`",
				    htlb ? "hugetlbfs" : "tmpfs", dir, strerror(e), dir,
				    htlb ? " --hugetlbfs" : "");
		if (e == EINVAL && !htlb)
			return fail("mount -t tmpfs -o %s %s: %s (kernel without "
				    "CONFIG_TRANSPARENT_HUGEPAGE, or a huge= mode it does not "
				    "know)",
				    data, dir, strerror(e));
		return fail("mount -t %s -o %s none %s: %s", htlb ? "hugetlbfs" : "tmpfs", data,
			    dir, strerror(e));
	}

	/* say what the kernel mounted */
	if (!realpath(dir, real))
		snprintf(real, sizeof(real), "%s", dir);
	{
		size_t len;
		char *mi = slurp("/proc/self/mountinfo", &len);
		struct hpr__mount m;

		if (!stat(dir, &st) && mi &&
		    !hpr__mountinfo_find(mi, len, major(st.st_dev), minor(st.st_dev), real, &m))
			printf("mounted %s on %s: %s\n", m.fstype, m.mnt_point, m.super_opts);
		else
			printf("mounted %s on %s: %s\n", htlb ? "hugetlbfs" : "tmpfs", dir, data);
		free(mi);
	}
	if (htlb)
		printf("pages come from the hugetlb pool: hpr pool%s%s --min N\n", ps ? " " : "",
		       ps ? fmt_size_arg(ps, a, sizeof(a)) : "");
	printf("use it: path=\"%s\" (undo: umount %s)\n", real, real);
	return 0;
}
