/* SPDX-License-Identifier: MIT */
/*
 * The two things every test, benchmark and script agrees on, defined once
 * for C (tests/common.c, bench/common.c; tests/lib.sh is the shell copy,
 * bench/run the Python one):
 *
 *  - HPR_TEST_NO_SKIP: set to anything but "" or "0" (CI sets 1), a skip --
 *    a missing capability, a row or cell not run -- is a failure.
 *  - HPR_TEST_QUICK, the same values (the VM matrix's emulated guests set
 *    it): suites with long loops run fewer rounds (t_quick()).
 *  - the system lock: suites and benches that change system-wide state
 *    (hugetlb pools, THP sysfs modes) hold an exclusive flock on
 *    HPR_SYSTEM_LOCK; readers that need that state stable hold it shared.
 *    It lives in /run, which only root can write, and is opened with
 *    O_NOFOLLOW: a fixed name in /tmp let any local user plant a symlink
 *    that root then created or truncated (fs.protected_symlinks=0 hosts),
 *    and a root run's leftover broke non-root runs. Only root changes the
 *    system, so only root takes the lock. HPR_SYSTEM_LOCK_FD: a parent
 *    holds it for the suites it runs (hpr_env_lock_inherited).
 */
#ifndef HPR_TEST_ENV_H
#define HPR_TEST_ENV_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define HPR_SYSTEM_LOCK "/run/hpregion.lock"

/* An environment flag is on when set to anything but "" or "0". */
static inline bool hpr_env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

static inline bool hpr_env_no_skip(void)
{
	return hpr_env_flag("HPR_TEST_NO_SKIP");
}

/* A script that runs many suites in a row (scripts/flake.sh) takes the
 * lock once around them and names its descriptor in HPR_SYSTEM_LOCK_FD:
 * then nothing changes the system between its suites, and other runs'
 * suites wait for a whole round rather than slipping in between. A suite
 * that inherited that descriptor holds the lock already (an flock belongs
 * to the open file: its own open would wait for its parent for ever). */
static inline bool hpr_env_lock_inherited(void)
{
	const char *v = getenv("HPR_SYSTEM_LOCK_FD");
	struct stat held, lock;
	char *end;
	long fd;

	if (!v || !*v)
		return false;
	fd = strtol(v, &end, 10);
	if (*end || fd < 0 || fd > 1024)
		return false;
	return !fstat((int)fd, &held) && !stat(HPR_SYSTEM_LOCK, &lock) &&
	       held.st_dev == lock.st_dev && held.st_ino == lock.st_ino;
}

/* Take HPR_SYSTEM_LOCK (exclusive, or shared) and keep it until exit:
 * 0 (also when inherited, above); 1 when not root (no lock: nothing
 * system-wide is changed); -1 with errno when it cannot be opened or
 * locked. */
static inline int hpr_env_lock_system(bool shared)
{
	int fd;

	if (geteuid())
		return 1;
	if (hpr_env_lock_inherited())
		return 0;
	fd = open(HPR_SYSTEM_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	return flock(fd, shared ? LOCK_SH : LOCK_EX) ? -1 : 0;
}

#endif
