/* SPDX-License-Identifier: MIT */
/*
 * Checksums of the snapshot format (snapshot.h, docs/snapshot.md):
 * XXH64 for the header and page table, and the page checksum -- four-lane
 * CRC32C hashed with XXH64 -- for page data. Implemented here so the
 * library takes no new dependency; tests check both against published
 * reference values.
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

/* ---- XXH64 (Yann Collet's xxHash, 64-bit variant) ---- */
#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline uint32_t rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t xround(uint64_t acc, uint64_t in)
{
	acc += in * P2;
	acc = rotl64(acc, 31);
	return acc * P1;
}

static inline uint64_t xmerge(uint64_t h, uint64_t v)
{
	h ^= xround(0, v);
	return h * P1 + P4;
}

uint64_t hpr__xxh64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data, *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
		const unsigned char *lim = end - 32;

		do {
			v1 = xround(v1, rd64(p));
			v2 = xround(v2, rd64(p + 8));
			v3 = xround(v3, rd64(p + 16));
			v4 = xround(v4, rd64(p + 24));
			p += 32;
		} while (p <= lim);
		h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
		h = xmerge(h, v1);
		h = xmerge(h, v2);
		h = xmerge(h, v3);
		h = xmerge(h, v4);
	} else {
		h = seed + P5;
	}
	h += len;
	for (; p + 8 <= end; p += 8)
		h = rotl64(h ^ xround(0, rd64(p)), 27) * P1 + P4;
	if (p + 4 <= end) {
		h = rotl64(h ^ ((uint64_t)rd32(p) * P1), 23) * P2 + P3;
		p += 4;
	}
	for (; p < end; p++)
		h = rotl64(h ^ (*p * P5), 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

/* ---- CRC32C (Castagnoli), for page data ----
 * SSE4.2's crc32 instruction where the CPU has it, four independent
 * lanes (one per quarter of the page) so its 3-cycle latency is hidden:
 * about twice XXH64's speed, which matters because the checksum is the
 * only CPU work a save adds to the copy. A table-driven fallback gives
 * the same values elsewhere. */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t len)
{
	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2")))
static void crc4_hw(const unsigned char *p, size_t q, uint32_t c[4])
{
	uint64_t a = c[0], b = c[1], x = c[2], y = c[3];

	for (size_t i = 0; i < q; i += 8) {
		a = __builtin_ia32_crc32di(a, rd64(p + i));
		b = __builtin_ia32_crc32di(b, rd64(p + q + i));
		x = __builtin_ia32_crc32di(x, rd64(p + 2 * q + i));
		y = __builtin_ia32_crc32di(y, rd64(p + 3 * q + i));
	}
	c[0] = (uint32_t)a;
	c[1] = (uint32_t)b;
	c[2] = (uint32_t)x;
	c[3] = (uint32_t)y;
}
#endif

uint32_t hpr__crc32c(const void *p, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_sw(~0u, p, len);
}

/* The page checksum: XXH64 (seed = page index) of the CRC32Cs of the
 * page's four quarters (the last takes any remainder), little-endian. */
uint64_t hpr__page_sum(const void *data, size_t len, uint64_t idx)
{
	const unsigned char *p = data;
	size_t q = len / 4 & ~(size_t)7;
	uint32_t c[4] = { ~0u, ~0u, ~0u, ~0u };

	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__) && defined(__GNUC__)
	if (crc_hw)
		crc4_hw(p, q, c);
	else
#endif
		for (int k = 0; k < 4; k++)
			c[k] = crc_sw(c[k], p + k * q, q);
	c[3] = crc_sw(c[3], p + 4 * q, len - 4 * q);
	for (int k = 0; k < 4; k++)
		c[k] = htole32(~c[k]);
	return hpr__xxh64(c, sizeof(c), idx);
}
