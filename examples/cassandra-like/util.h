/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every part of the engine uses: monotonic time, CRC32C
 * (hardware where the CPU has it), 64-bit hashing, a fast PRNG, and the
 * engine's error reporting (kv_fail / kv_errmsg: a negative errno plus a
 * sentence for the user, like hpr_strerror()).
 */
#ifndef KV_UTIL_H
#define KV_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t kv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64 finalizer: a good 64-bit mix for keys and bloom filters */
static inline uint64_t kv_hash64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* xorshift64*: per-thread PRNG; state must not be 0 */
static inline uint64_t kv_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* CRC32C (Castagnoli); crc is the running value, start with 0 */
uint32_t kv_crc32c(uint32_t crc, const void *p, size_t n);

/*
 * Record an error: stores a message for kv_errmsg() (thread-local) and
 * returns err (a negative errno) so call sites read `return kv_fail(...)`.
 */
int kv_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the last kv_fail() on this thread, or strerror(-err). */
const char *kv_errmsg(int err);

/* Write all of buf; -errno on failure (ENOSPC from a full tmpfs, EIO). */
int kv_write_all(int fd, const void *buf, size_t n);
/* fsync a directory so renames and unlinks in it are durable. */
int kv_fsync_dir(const char *dir);

#endif /* KV_UTIL_H */
