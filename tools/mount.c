/* SPDX-License-Identifier: MIT */
/*
 * hpr mount: mount a tmpfs with huge=always (or hugetlbfs) with sane
 * options, creating the directory if needed: nosuid,nodev, mode 0700 and
 * owned by root unless --mode/--owner say otherwise (a huge-page mount is
 * memory that is charged to whoever writes it; world-writable is a choice
 * to make on purpose, not a default). DIR is walked without following
 * symlinks and must be root's (safedir.c) unless --unsafe-path; the mount
 * goes onto the directory fd that was checked. Prints what the kernel
 * mounted, read back from mountinfo.
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
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char usage[] =
	"usage: hpr mount DIR [--hugetlbfs] [--size SIZE] [--pagesize SIZE]\n"
	"                 [--huge always|within_size|advise] [--mode MODE]\n"
	"                 [--owner USER[:GROUP]] [--unsafe-path]\n"
	"  --hugetlbfs    mount hugetlbfs instead of a tmpfs huge=always\n"
	"  --size SIZE    limit the mount (tmpfs default: half of RAM; hugetlbfs:\n"
	"                 no limit beyond the pool)\n"
	"  --pagesize SZ  hugetlbfs page size (2M, 1G); default: the default size\n"
	"  --huge MODE    tmpfs huge= mode (default always)\n"
	"  --mode MODE    octal mode of the mount's root (default 0700)\n"
	"  --owner U[:G]  owner of the mount's root (default root)\n"
	"  --unsafe-path  mount even where DIR or a parent is a symlink, is owned\n"
	"                 by another user, or is writable by others (refused by\n"
	"                 default: they could choose where the mount lands)\n";

#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x00000001
#endif
#ifndef FSCONFIG_SET_STRING
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#endif

/*
 * Mount onto the directory fd, not onto a path: the new mount API (Linux
 * 5.2) builds the superblock from the options (fsopen, fsconfig, fsmount)
 * and move_mount(MOVE_MOUNT_T_EMPTY_PATH) attaches it to exactly the
 * directory that was checked. Without it (ENOSYS), mount(2) on
 * /proc/self/fd/N, which resolves to the same directory. 0 or errno.
 */
static int mount_on_fd(int dirfd, const char *source, const char *fstype, const char *data)
{
#ifdef SYS_fsopen
	int fs = (int)syscall(SYS_fsopen, fstype, 0);

	if (fs >= 0) {
		char opts[256], *save = NULL, *kv;
		int mnt, e = 0;

		if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", source, 0))
			e = errno;
		snprintf(opts, sizeof(opts), "%s", data);
		for (kv = strtok_r(opts, ",", &save); kv && !e; kv = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(kv, '=');

			if (eq)
				*eq = '\0';
			if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, kv, eq ? eq + 1 : NULL,
				    0))
				e = errno;
		}
		if (!e && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
			e = errno;
		mnt = e ? -1 :
			  (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
				       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		if (!e && mnt < 0)
			e = errno;
		close(fs);
		if (!e && syscall(SYS_move_mount, mnt, "", dirfd, "",
				  MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
			e = errno;
		if (mnt >= 0)
			close(mnt);
		return e;
	}
	if (errno != ENOSYS)
		return errno;
#endif
	{
		char self[64];

		snprintf(self, sizeof(self), "/proc/self/fd/%d", dirfd);
		return mount(source, self, fstype, MS_NOSUID | MS_NODEV, data) ? errno : 0;
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
		{ "unsafe-path", no_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const char *const huge_modes[] = { "always", "within_size", "advise" };
	bool htlb = false, unsafe = false;
	uint64_t size = 0, ps = 0;
	const char *huge = NULL, *dir;
	unsigned long mode = 0700;
	long uid = -1, gid = -1;
	char data[256], a[32], offered[128], real[4096], self[64];
	struct safedir sd;
	struct stat st;
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "Hs:p:u:m:o:Uh", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			htlb = true;
			break;
		case 'U':
			unsafe = true;
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

	/* DIR is opened without following symlinks and checked; the mount
	 * goes onto that fd (see safedir.c) */
	if (safedir_open(&sd, dir, unsafe))
		return 1;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", sd.fd);
	if (!realpath(self, real))
		snprintf(real, sizeof(real), "%s", dir);
	rc = mount_on_fd(sd.fd, htlb ? "hugetlbfs" : "hpr-tmpfs", htlb ? "hugetlbfs" : "tmpfs",
			 data);
	if (rc) {
		int e = rc;

		safedir_undo(&sd);
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
	safedir_close(&sd);

	/* say what the kernel mounted */
	{
		size_t len;
		char *mi = slurp("/proc/self/mountinfo", &len);
		struct hpr__mount m;

		if (!stat(real, &st) && mi &&
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
