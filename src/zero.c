/* SPDX-License-Identifier: MIT */
/*
 * Writing zeros over huge pages, for the recycled pool (rpool.c): the
 * stores the CPU has -- rep stosb, AVX2, non-temporal SSE2/AVX2 -- and a
 * one-time choice between them by timing each over a few warm huge pages.
 * A pool page is zeroed long before it is used, so stores that bypass the
 * cache (non-temporal) need not be slower to pay: they leave the caches
 * to the application. The choice is the fastest method; a non-temporal one
 * wins a tie within 10 %.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "rpool.h"

#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

static void zero_rep_stosb(void *p, size_t len)
{
	void *d = p;
	size_t n = len;

	__asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(0) : "memory");
}

__attribute__((target("avx2"))) static void zero_avx2(void *p, size_t len)
{
	__m256i z = _mm256_setzero_si256();
	char *c = p;

	for (size_t i = 0; i < len; i += 128) {
		_mm256_store_si256((__m256i *)(c + i), z);
		_mm256_store_si256((__m256i *)(c + i + 32), z);
		_mm256_store_si256((__m256i *)(c + i + 64), z);
		_mm256_store_si256((__m256i *)(c + i + 96), z);
	}
}

static void zero_nt_sse2(void *p, size_t len)
{
	__m128i z = _mm_setzero_si128();
	char *c = p;

	for (size_t i = 0; i < len; i += 64) {
		_mm_stream_si128((__m128i *)(c + i), z);
		_mm_stream_si128((__m128i *)(c + i + 16), z);
		_mm_stream_si128((__m128i *)(c + i + 32), z);
		_mm_stream_si128((__m128i *)(c + i + 48), z);
	}
	/* non-temporal stores are weakly ordered: make them visible before
	 * the page is published as clean */
	_mm_sfence();
}

__attribute__((target("avx2"))) static void zero_nt_avx2(void *p, size_t len)
{
	__m256i z = _mm256_setzero_si256();
	char *c = p;

	for (size_t i = 0; i < len; i += 128) {
		_mm256_stream_si256((__m256i *)(c + i), z);
		_mm256_stream_si256((__m256i *)(c + i + 32), z);
		_mm256_stream_si256((__m256i *)(c + i + 64), z);
		_mm256_stream_si256((__m256i *)(c + i + 96), z);
	}
	_mm_sfence();
}

static bool have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#endif

static void zero_memset(void *p, size_t len)
{
	memset(p, 0, len);
}

static const char *const method_names[] = {
	[HPR_POOL_ZERO_NONE] = "none",		 [HPR_POOL_ZERO_MEMSET] = "memset",
	[HPR_POOL_ZERO_REP_STOSB] = "rep-stosb", [HPR_POOL_ZERO_AVX2] = "avx2",
	[HPR_POOL_ZERO_NT_SSE2] = "nt-sse2",	 [HPR_POOL_ZERO_NT_AVX2] = "nt-avx2",
};

static hpr__zero_fn method_fn(int m)
{
	switch (m) {
#if defined(__x86_64__)
	case HPR_POOL_ZERO_REP_STOSB:
		return zero_rep_stosb;
	case HPR_POOL_ZERO_AVX2:
		return zero_avx2;
	case HPR_POOL_ZERO_NT_SSE2:
		return zero_nt_sse2;
	case HPR_POOL_ZERO_NT_AVX2:
		return zero_nt_avx2;
#endif
	default:
		return zero_memset;
	}
}

const char *hpr__zero_name(int m)
{
	if (m < 0 || m > HPR_POOL_ZERO_NT_AVX2)
		return "unknown";
	return method_names[m];
}

/* Pages the choice times over: more than a core's L2, so that cached
 * stores pay for their write-backs as they would on pool pages. */
#define TRY_PAGES 8
#define TRY_ROUNDS 3

int hpr__zero_choose(size_t page_size, hpr__zero_fn *fn, double gbs[HPR__ZERO_METHODS])
{
	int cand[HPR__ZERO_METHODS], nc = 0, best = HPR_POOL_ZERO_MEMSET;
	size_t len = TRY_PAGES * page_size;
	uint64_t t[HPR__ZERO_METHODS];
	void *buf = NULL;
	double best_rate = 0;

	for (int m = 0; m < HPR__ZERO_METHODS; m++)
		gbs[m] = 0;
	cand[nc++] = HPR_POOL_ZERO_MEMSET;
#if defined(__x86_64__)
	cand[nc++] = HPR_POOL_ZERO_REP_STOSB;
	cand[nc++] = HPR_POOL_ZERO_NT_SSE2;
	if (have_avx2()) {
		cand[nc++] = HPR_POOL_ZERO_AVX2;
		cand[nc++] = HPR_POOL_ZERO_NT_AVX2;
	}
#endif
	*fn = zero_memset;
	if (nc == 1 || hpr__os->mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				     -1, 0, &buf))
		return HPR_POOL_ZERO_MEMSET;
	/* a VM's first touch of memory costs a host fault: warm it, untimed */
	memset(buf, 1, len);
	for (int m = 0; m < HPR__ZERO_METHODS; m++)
		t[m] = UINT64_MAX;
	/* interleaved rounds, best of each: a neighbour's burst on a shared
	 * host hits every method alike */
	for (int round = 0; round < TRY_ROUNDS; round++)
		for (int i = 0; i < nc; i++) {
			int m = cand[(i + round) % nc];
			hpr__zero_fn f = method_fn(m);
			uint64_t t0 = hpr__now_ns(), dt;

			for (size_t off = 0; off < len; off += page_size)
				f((char *)buf + off, page_size);
			dt = hpr__now_ns() - t0;
			if (dt < t[m])
				t[m] = dt;
		}
	hpr__os->munmap(buf, len);
	for (int i = 0; i < nc; i++) {
		int m = cand[i];

		gbs[m] = (double)len / (double)(t[m] ? t[m] : 1);
		if (gbs[m] > best_rate) {
			best_rate = gbs[m];
			best = m;
		}
	}
	for (int i = 0; i < nc; i++) {
		int m = cand[i];

		if ((m == HPR_POOL_ZERO_NT_SSE2 || m == HPR_POOL_ZERO_NT_AVX2) &&
		    gbs[m] >= 0.9 * best_rate &&
		    !(best == HPR_POOL_ZERO_NT_SSE2 || best == HPR_POOL_ZERO_NT_AVX2))
			best = m;
	}
	*fn = method_fn(best);
	return best;
}
