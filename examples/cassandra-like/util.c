/* SPDX-License-Identifier: MIT */
/* Helpers: CRC32C, error messages, write-all and directory fsync. */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
	static int ready;

	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		crc_table_init(); /* idempotent: racing threads write the same */
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* SSE4.2 crc32 instruction: ~8 bytes a cycle, so checksumming every record
 * read costs little next to the memory access itself. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
							  size_t n)
{
	uint64_t c = ~crc;

	while (n >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

uint32_t kv_crc32c(uint32_t crc, const void *p, size_t n)
{
	static int hw = -1; /* -1: not probed yet */
	int h = __atomic_load_n(&hw, __ATOMIC_RELAXED);

	if (h < 0) {
		h = __builtin_cpu_supports("sse4.2");
		__atomic_store_n(&hw, h, __ATOMIC_RELAXED);
	}
	return h ? crc_hw(crc, p, n) : crc_sw(crc, p, n);
}
#else
uint32_t kv_crc32c(uint32_t crc, const void *p, size_t n)
{
	return crc_sw(crc, p, n);
}
#endif

static __thread char errbuf[512];
static __thread int errcode;

int kv_fail(int err, const char *fmt, ...)
{
	char msg[sizeof(errbuf)];
	va_list ap;

	/* through a copy: callers pass kv_errmsg() on as an argument, and
	 * vsnprintf must not read the buffer it writes */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(errbuf, msg, sizeof(errbuf));
	errcode = err;
	return err;
}

const char *kv_errmsg(int err)
{
	if (err && err == errcode)
		return errbuf;
	return strerror(err < 0 ? -err : err);
}

int kv_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int kv_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}
