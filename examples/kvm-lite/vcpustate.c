/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite vCPU state file: header (magic, version, payload size), the
 * struct kl_vcpu_state as this build lays it out, and a CRC-32 over both,
 * so a truncated or foreign file is refused instead of loaded into a vCPU.
 */
#define _GNU_SOURCE
#include "vcpustate.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

struct kl_vcpu_hdr {
	char magic[8];
	uint32_t version;
	uint32_t payload;	/* sizeof(struct kl_vcpu_state) */
};

uint32_t kl_crc32(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= b[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static ssize_t read_all(int fd, void *p, size_t n)
{
	char *c = p;
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, c + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int kl_vcpu_state_write(int fd, const struct kl_vcpu_state *st)
{
	struct {
		struct kl_vcpu_hdr h;
		struct kl_vcpu_state s;
	} f;
	uint32_t crc;
	int rc;

	memset(&f, 0, sizeof(f));
	memcpy(f.h.magic, KL_VCPU_MAGIC, 8);
	f.h.version = KL_VCPU_VERSION;
	f.h.payload = sizeof(f.s);
	f.s = *st;
	crc = kl_crc32(&f, sizeof(f));
	if (ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET))
		return -errno;
	if ((rc = write_all(fd, &f, sizeof(f))) || (rc = write_all(fd, &crc, 4)))
		return rc;
	return fsync(fd) ? -errno : 0;
}

int kl_vcpu_state_read(int fd, struct kl_vcpu_state *st, uint32_t *version)
{
	struct {
		struct kl_vcpu_hdr h;
		struct kl_vcpu_state s;
	} f;
	uint32_t crc;
	ssize_t n;
	char extra;

	if (lseek(fd, 0, SEEK_SET))
		return -errno;
	n = read_all(fd, &f, sizeof(f));
	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof(f.h) || memcmp(f.h.magic, KL_VCPU_MAGIC, 8))
		return -EINVAL;
	if (version)
		*version = f.h.version;
	/* another version's payload is another layout: never read as ours */
	if (f.h.version != KL_VCPU_VERSION)
		return -EPROTO;
	if (f.h.payload != sizeof(f.s) || (size_t)n < sizeof(f))
		return -EBADMSG;
	n = read_all(fd, &crc, 4);
	if (n != 4 || read_all(fd, &extra, 1) != 0)
		return n < 0 ? (int)n : -EBADMSG;
	if (crc != kl_crc32(&f, sizeof(f)))
		return -EBADMSG;
	*st = f.s;
	return 0;
}
