/* SPDX-License-Identifier: MIT */
/*
 * Error reporting: hpr_strerror(), the per-thread detail of the last failure,
 * the optional log callback and hpr_version().
 *
 * The detail belongs to one call: every public function that can fail
 * clears it when it starts (hpr__err_clear), so hpr_strerror() never
 * explains an error with the words of an earlier, unrelated call. Failures
 * on the region's worker threads are recorded in their own thread; the job
 * carries the first one's detail back (hpr__err_save) and the caller's
 * thread adopts it when it returns that error (hpr__err_adopt).
 *
 * Log levels: a failure that reaches the caller is logged at ERROR; one the
 * library handles itself (an AUTO or HPR_F_FALLBACK attempt that it falls
 * back from, inside hpr__err_quiet) at DEBUG.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread int tls_err;
static __thread char tls_msg[HPR__ERR_MSG];
static __thread unsigned tls_quiet; /* nesting of handled attempts */

static _Atomic(hpr_log_fn) log_fn;
static void *_Atomic log_arg;

int hpr__fail(int err, const char *fmt, ...)
{
	va_list ap;

	tls_err = err;
	va_start(ap, fmt);
	vsnprintf(tls_msg, sizeof(tls_msg), fmt, ap);
	va_end(ap);
	hpr__log(tls_quiet ? HPR_LOG_DEBUG : HPR_LOG_ERROR, "%s", tls_msg);
	return err;
}

void hpr__err_clear(void)
{
	tls_err = 0;
	tls_msg[0] = 0;
}

void hpr__err_quiet(bool on)
{
	if (on)
		tls_quiet++;
	else if (tls_quiet)
		tls_quiet--;
}

void hpr__err_save(int err, char *buf, size_t len)
{
	if (len)
		snprintf(buf, len, "%s", err && err == tls_err ? tls_msg : "");
}

int hpr__err_adopt(int err, const char *msg)
{
	tls_err = err;
	snprintf(tls_msg, sizeof(tls_msg), "%s", err && msg ? msg : "");
	return err;
}

void hpr__log(enum hpr_log_level lvl, const char *fmt, ...)
{
	hpr_log_fn fn = atomic_load(&log_fn);
	char buf[512];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fn(lvl, buf, atomic_load(&log_arg));
}

void hpr_set_log(hpr_log_fn fn, void *arg)
{
	atomic_store(&log_arg, arg);
	atomic_store(&log_fn, fn);
}

const char *hpr__fmt_size(size_t b, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int k = 0;

	while (k < 4 && b >= 1024 && !(b & 1023)) {
		b >>= 10;
		k++;
	}
	snprintf(buf, len, "%zu %s", b, u[k]);
	return buf;
}

/* The errors only an attach to a kept region gives (attach.c). */
static const char *generic_kept(int err)
{
	switch (err) {
	case -ERANGE:
		return "the kept region file's size, page size or backend differ "
		       "from the config, or it was truncated";
	case -EMEDIUMTYPE:
		return "the kept region's mount no longer gives huge pages (remount "
		       "the tmpfs huge=always) or is another kind of file system";
	case -ELOOP:
		return "the kept region's name is a symbolic link: never followed";
	}
	return NULL;
}

static const char *generic(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument: check the config (size, backend, flags, "
		       "page size, nodestring) or that the range lies inside the region";
	case -ENOENT:
		return "the directory given as path does not exist, or (HPR_F_ATTACH_ONLY) "
		       "it holds no kept region of that name";
	case -ENOTDIR:
		return "path is not a directory: give a directory on a tmpfs or "
		       "hugetlbfs mount";
	case -EACCES:
	case -EPERM:
		return "permission denied: check the mount's permissions, "
		       "RLIMIT_MEMLOCK for HPR_F_LOCK, or run as root";
	case -ENOMEM:
		return "out of memory: the hugetlb pool, the memory cgroup or the "
		       "machine has no room; raise the pool of the region's page "
		       "size (/sys/kernel/mm/hugepages/hugepages-<size>kB/"
		       "nr_hugepages) or the cgroup limit";
	case -ENOSPC:
		return "the mount is full: remount the tmpfs/hugetlbfs with a "
		       "larger size=";
	case -EOPNOTSUPP:
		return "huge pages cannot be had this way on this system: see "
		       "`hpr probe`, change the THP/shmem setting or mount, or "
		       "pass HPR_F_FALLBACK";
	case -E2BIG:
		return "the config sets fields this version of hpregion does not "
		       "know: rebuild against this library's header";
	case -EBUSY:
		return "a background prefault job is already running "
		       "(hpr_prefault_wait() or hpr_prefault_cancel() first), or a "
		       "kept region is held by another process";
	case -ECANCELED:
		return "the background job was cancelled";
	case -EHWPOISON:
		return "a hardware memory error (poisoned page) hit the region";
	case -EBADMSG:
		return "the snapshot file is corrupt or truncated, or the kept region "
		       "file has no valid hpregion stamp";
	case -EAGAIN:
		return "the kernel could not complete the operation now (pages "
		       "busy); retry later";
	case -EIO:
		return "I/O error";
	case -EFAULT:
		return "bad address";
	case -EINTR:
		return "interrupted";
	}
	return generic_kept(err);
}

const char *hpr_strerror(int err)
{
	const char *g;
	static __thread char buf[64];

	if (err && err == tls_err && tls_msg[0])
		return tls_msg;
	g = generic(err);
	if (g)
		return g;
	if (err < 0) {
		/* strerror_r (GNU) gives a static or filled buffer */
		return strerror_r(-err, buf, sizeof(buf));
	}
	snprintf(buf, sizeof(buf), "unknown error %d", err);
	return buf;
}

const char *hpr_version(void)
{
#define HPR_STR2(x) #x
#define HPR_STR(x) HPR_STR2(x)
	return HPR_STR(HPR_VERSION_MAJOR) "." HPR_STR(HPR_VERSION_MINOR) "." HPR_STR(
		HPR_VERSION_PATCH);
}
