/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite unit tests: what needs no /dev/kvm — RAM size checks and the
 * layout, the VMM's boot page tables and the page-table walker, the memory
 * checksum, size parsing, the vCPU state file, the --keep checkpoint record
 * and what a resume accepts, and the guest image's size.
 * Exit 0 when all pass, 1 otherwise; prints each failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keeprec.h"
#include "layout.h"
#include "vcpustate.h"

extern const unsigned char kl_guest_start[], kl_guest_end[];

static int failures, checks;

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		checks++;                                                               \
		if (!(cond)) {                                                          \
			failures++;                                                     \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
		}                                                                       \
	} while (0)

#define MiB (1ul << 20)

static void test_layout(void)
{
	struct kl_layout l;
	char msg[256];
	int rc;

	rc = kl_layout_init(&l, 64 * MiB, 2 * MiB, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == 0, "64M/2M: %s", msg);
	CHECK(l.pt_bytes == 3 * 4096, "2M guest pages: PML4+PDPT+1 PD, got %zu", l.pt_bytes);
	CHECK(l.data == 4 * MiB, "data at %#zx", l.data);
	CHECK(l.data + l.data_len == 64 * MiB, "data ends at RAM end");
	CHECK(l.fpr % (2 * MiB) == 0 && l.fpr_len % (2 * MiB) == 0 && l.fpr >= l.data &&
		      l.fpr + l.fpr_len == l.ram,
	      "fpr [%#zx,+%#zx) whole 2M pages inside data", l.fpr, l.fpr_len);

	rc = kl_layout_init(&l, 64 * MiB, 4096, 4096, "4k", msg, sizeof(msg));
	CHECK(rc == 0, "64M/4k: %s", msg);
	CHECK(l.pt_bytes == (2 + 1 + 32) * 4096, "4k guest pages: 35 table pages, got %zu",
	      l.pt_bytes / 4096);
	CHECK(l.data >= KL_GUEST_PT + l.pt_bytes && l.data % (2 * MiB) == 0, "data %#zx", l.data);

	rc = kl_layout_init(&l, 2048 * MiB, 4096, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == 0 && l.pt_bytes == (2 + 2 + 1024) * 4096, "2G/4k: %zu pages",
	      l.pt_bytes / 4096);

	rc = kl_layout_init(&l, 65 * MiB, 2 * MiB, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == -EINVAL && strstr(msg, "not a multiple of the 2 MiB page size") &&
		      strstr(msg, "use a multiple of 2 MiB"),
	      "65M: rc %d '%s'", rc, msg);
	rc = kl_layout_init(&l, 64 * MiB + 4096, 4096, 4096, "4k", msg, sizeof(msg));
	CHECK(rc == -EINVAL && strstr(msg, "multiple"), "64M+4K: rc %d '%s'", rc, msg);
	rc = kl_layout_init(&l, 1536 * MiB, 2 * MiB, 1024 * MiB, "hugetlb", msg, sizeof(msg));
	CHECK(rc == -EINVAL && strstr(msg, "1 GiB page size") && strstr(msg, "hugetlb"),
	      "1.5G on 1G pages: rc %d '%s'", rc, msg);
	rc = kl_layout_init(&l, 2 * MiB, 2 * MiB, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == -EINVAL && strstr(msg, "out of range"), "2M: rc %d '%s'", rc, msg);
	rc = kl_layout_init(&l, 4096 * MiB, 2 * MiB, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == -EINVAL && strstr(msg, "out of range"), "4G: rc %d '%s'", rc, msg);
	rc = kl_layout_init(&l, 64 * MiB, 8192, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == -EINVAL, "guest page 8K: rc %d", rc);
	rc = kl_layout_init(&l, 8 * MiB, 4096, 2 * MiB, "thp", msg, sizeof(msg));
	CHECK(rc == 0 && l.data_len >= 4 * MiB, "8M: rc %d '%s'", rc, msg);
}

static void test_boot_pt(void)
{
	size_t ram = 64 * MiB, leaf = 0;
	unsigned char *m = calloc(1, ram);
	uint64_t pa = 0;
	int user = -1, rc;

	if (!m) {
		CHECK(m, "calloc");
		return;
	}
	kl_boot_pt_build(m, ram);
	rc = kl_pt_walk(m, ram, KL_BOOT_PML4, KL_CODE + 0x123, &pa, &leaf, &user);
	CHECK(rc == 0 && pa == KL_CODE + 0x123 && leaf == 2 * MiB && user == 0,
	      "code: rc %d pa %#llx leaf %zu user %d", rc, (unsigned long long)pa, leaf, user);
	rc = kl_pt_walk(m, ram, KL_BOOT_PML4, ram - 8, &pa, &leaf, &user);
	CHECK(rc == 0 && pa == ram - 8, "last byte: rc %d", rc);
	rc = kl_pt_walk(m, ram, KL_BOOT_PML4, ram, &pa, &leaf, &user);
	CHECK(rc == -ENOENT, "beyond RAM is unmapped: rc %d", rc);
	rc = kl_pt_walk(m, ram, KL_BOOT_PML4, 1ull << 39, &pa, &leaf, &user);
	CHECK(rc == -ENOENT, "second PML4 slot unmapped: rc %d", rc);

	/* A hand-built 4 KiB mapping with U bits, and a table outside RAM. */
	{
		uint64_t *pml4 = (uint64_t *)(m + 0x100000), *pdpt = pml4 + 512, *pd = pml4 + 1024,
			 *pt = pml4 + 1536;

		pml4[0] = (0x100000 + 0x1000) | 7;
		pdpt[0] = (0x100000 + 0x2000) | 7;
		pd[3] = (0x100000 + 0x3000) | 7;
		pt[5] = 0x2345000 | 7;
		rc = kl_pt_walk(m, ram, 0x100000, (3ul << 21) | (5 << 12) | 0x42, &pa, &leaf,
				&user);
		CHECK(rc == 0 && pa == 0x2345042 && leaf == 4096 && user == 1,
		      "4K leaf: rc %d pa %#llx leaf %zu user %d", rc, (unsigned long long)pa, leaf,
		      user);
		pd[4] = (0x100000 + 0x3000) | 3; /* supervisor PD entry */
		rc = kl_pt_walk(m, ram, 0x100000, (4ul << 21) | (5 << 12), &pa, &leaf, &user);
		CHECK(rc == 0 && user == 0, "U bit ANDs down the walk: user %d", user);
		pdpt[1] = (1ull << 30) | 0x87; /* 1 GiB leaf */
		rc = kl_pt_walk(m, ram, 0x100000, (1ull << 30) + 77, &pa, &leaf, &user);
		CHECK(rc == 0 && leaf == (1ul << 30) && pa == (1ull << 30) + 77, "1G leaf");
		pdpt[2] = (128 * MiB) | 7; /* next table outside RAM */
		rc = kl_pt_walk(m, ram, 0x100000, 2ull << 30, &pa, &leaf, &user);
		CHECK(rc == -EFAULT, "table outside RAM: rc %d", rc);
	}
	free(m);
}

static void test_checksum(void)
{
	unsigned char b[64];
	uint64_t h0, h1, h2;

	memset(b, 0x11, sizeof(b));
	h0 = kl_checksum(b, 0, sizeof(b));
	b[17] ^= 1;
	h1 = kl_checksum(b, 0, sizeof(b));
	CHECK(h0 != h1, "one bit changes the checksum");
	b[17] ^= 1;
	memset(b, 0x22, 8);
	memset(b + 8, 0x11, 8);
	h1 = kl_checksum(b, 0, 16);
	memset(b, 0x11, 8);
	memset(b + 8, 0x22, 8);
	h2 = kl_checksum(b, 0, 16);
	CHECK(h1 != h2, "order matters");
	CHECK(kl_checksum(b, 0, 0) == 0, "empty is 0");
	/* one word: (0 ^ q) * golden */
	memset(b, 0, 8);
	b[0] = 1;
	CHECK(kl_checksum(b, 0, 8) == 0x9e3779b97f4a7c15ull, "definition");
}

static void test_parse(void)
{
	CHECK(kl_parse_size("64M") == 64 * MiB, "64M");
	CHECK(kl_parse_size("2G") == 2048 * MiB, "2G");
	CHECK(kl_parse_size("1MiB") == MiB, "1MiB");
	CHECK(kl_parse_size("4096") == 4096, "4096");
	CHECK(kl_parse_size("0x1000") == 4096, "hex");
	CHECK(kl_parse_size("") == 0 && kl_parse_size("-1") == 0 && kl_parse_size("12Q") == 0 &&
		      kl_parse_size("M") == 0 && kl_parse_size("99999999999999G") == 0,
	      "bad sizes are 0");
}

static int tmpfd(void)
{
	char p[] = "/tmp/kvm-lite-unit.XXXXXX";
	int fd = mkstemp(p);

	if (fd >= 0)
		unlink(p);
	return fd;
}

/* A version 1 file (before --keep: no keep_id, no checkpoint) is refused
 * as another version, not read as this layout nor called corrupt. */
static void test_vcpu_old_version(void)
{
	struct {
		char magic[8];
		uint32_t version, payload;
		unsigned char s[sizeof(struct kl_vcpu_state) - 16];
	} v1;
	struct kl_vcpu_state b;
	uint32_t crc, ver = 0;
	int fd = tmpfd(), rc;

	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	if (fd < 0)
		return;
	memset(&v1, 0, sizeof(v1));
	memcpy(v1.magic, KL_VCPU_MAGIC, 8);
	v1.version = 1;
	v1.payload = sizeof(v1.s);
	crc = kl_crc32(&v1, sizeof(v1));
	CHECK(write(fd, &v1, sizeof(v1)) == (ssize_t)sizeof(v1) && write(fd, &crc, 4) == 4,
	      "write v1");
	rc = kl_vcpu_state_read(fd, &b, &ver);
	CHECK(rc == -EPROTO && ver == 1, "version 1 file: rc %d version %u", rc, ver);
	/* version 2: regs, sregs and fpu only -- refused the same way */
	v1.version = 2;
	CHECK(pwrite(fd, &v1, 16, 0) == 16, "pwrite");
	rc = kl_vcpu_state_read(fd, &b, &ver);
	CHECK(rc == -EPROTO && ver == 2, "version 2 file: rc %d version %u", rc, ver);
	v1.version = KL_VCPU_VERSION + 1;
	CHECK(pwrite(fd, &v1, 16, 0) == 16, "pwrite");
	rc = kl_vcpu_state_read(fd, &b, &ver);
	CHECK(rc == -EPROTO && ver == KL_VCPU_VERSION + 1, "a newer version: rc %d", rc);
	close(fd);
}

static void test_vcpu_file(void)
{
	struct kl_vcpu_state a, b;
	int fd = tmpfd(), rc;
	off_t len;
	unsigned char byte;

	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	if (fd < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.ram = 64 * MiB;
	a.guest_page = 4096;
	a.flags = 5;
	a.regs.rip = 0x20123;
	a.regs.rsp = 0x1fff0;
	a.regs.rflags = 0x3002;
	a.sregs.cr3 = 0x200000;
	a.sregs.efer = 0x500;
	a.sregs.cs.selector = 0x23;
	a.sregs.cs.l = 1;
	a.fpu.fcw = 0x37f;
	a.keep_id = 0x1234567890abcdefull;
	a.checkpoint = 3;
	/* version 3: every class */
	a.have = KL_HAVE_ALL;
	a.events.nmi.masked = 1;
	a.mp_state.mp_state = KVM_MP_STATE_RUNNABLE;
	a.xsave[128] = 7; /* XSTATE_BV */
	a.xsave[1023] = 0xdeadbeef;
	a.xcrs.nr_xcrs = 1;
	a.xcrs.xcrs[0].value = 7;
	a.debugregs.db[3] = 0x4018;
	a.debugregs.dr7 = 0x00f50400;
	a.nmsrs = KL_VCPU_MAX_MSRS;
	a.msrs[0].index = 0xc0000082;
	a.msrs[0].data = 0xffffffff81234560ull;
	a.msrs[KL_VCPU_MAX_MSRS - 1].index = 0x10;
	a.msrs[KL_VCPU_MAX_MSRS - 1].data = 1ull << 40;
	a.ncpuid = 2;
	a.cpuid[1].function = 0x4b4c0000;
	a.cpuid[1].ebx = 0x1234;
	rc = kl_vcpu_state_write(fd, &a);
	CHECK(rc == 0, "write: %d", rc);
	memset(&b, 0xa5, sizeof(b));
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == 0 && !memcmp(&a.regs, &b.regs, sizeof(a.regs)) &&
		      !memcmp(&a.sregs, &b.sregs, sizeof(a.sregs)) &&
		      !memcmp(&a.fpu, &b.fpu, sizeof(a.fpu)) && b.ram == a.ram &&
		      b.guest_page == a.guest_page && b.flags == a.flags &&
		      b.keep_id == a.keep_id && b.checkpoint == 3,
	      "round trip: rc %d", rc);
	CHECK(rc == 0 && !memcmp(&a, &b, sizeof(a)),
	      "round trip of every class (events, mp_state, XSAVE, XCRs, debug registers, %u MSRs, "
	      "CPUID)",
	      a.nmsrs);
	len = lseek(fd, 0, SEEK_END);

	/* a flipped byte in the middle */
	CHECK(pread(fd, &byte, 1, len / 2) == 1, "pread");
	byte ^= 0x40;
	CHECK(pwrite(fd, &byte, 1, len / 2) == 1, "pwrite");
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == -EBADMSG, "corrupt: rc %d", rc);
	byte ^= 0x40;
	CHECK(pwrite(fd, &byte, 1, len / 2) == 1, "pwrite");
	CHECK(kl_vcpu_state_read(fd, &b, NULL) == 0, "repaired");

	/* trailing garbage, truncation, another file */
	CHECK(pwrite(fd, "x", 1, len) == 1, "append");
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == -EBADMSG, "trailing byte: rc %d", rc);
	CHECK(ftruncate(fd, len - 3) == 0, "truncate");
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == -EBADMSG, "truncated: rc %d", rc);
	CHECK(ftruncate(fd, 100) == 0, "truncate");
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == -EBADMSG, "truncated to 100: rc %d", rc);
	CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, "KLRAM001xxxxxxxxxxxxxxxx", 24, 0) == 24,
	      "other");
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == -EINVAL, "not a vCPU file: rc %d", rc);
	CHECK(ftruncate(fd, 0) == 0, "empty");
	rc = kl_vcpu_state_read(fd, &b, NULL);
	CHECK(rc == -EINVAL, "empty file: rc %d", rc);
	close(fd);
	test_vcpu_old_version();
	CHECK(kl_crc32("123456789", 9) == 0xcbf43926u, "crc32 check value");
}

static struct kl_keep_want want_of(const struct kl_keep_rec *r)
{
	return (struct kl_keep_want){ .ram = r->ram,
				      .page_size = r->page_size,
				      .guest_page = r->guest_page,
				      .id = r->id,
				      .checkpoint = r->checkpoint };
}

/* The record a --keep run leaves in guest RAM and what a resume accepts:
 * STOPPED at the vCPU file's checkpoint of the same RAM, nothing else. */
static void test_keep_record(void)
{
	size_t ram = 8 * MiB;
	unsigned char *m = calloc(1, ram);
	struct kl_keep_rec r, g;
	struct kl_keep_want w;
	char msg[512];
	int rc;

	if (!m) {
		CHECK(m, "calloc");
		return;
	}
	CHECK(sizeof(r) <= 4096 && KL_KEEP_REC + 4096 <= KL_IDT && KL_KEEP_REC >= KL_PARAMS + 4096,
	      "the record has its own page between the params and the IDT");
	kl_keep_rec_init(&r, 0xfeedull, ram, 2 * MiB, 4096);
	CHECK(r.state == KL_KEEP_RUNNING && r.checkpoint == 0, "a new record is RUNNING, at 0");
	kl_keep_rec_put(m, &r);
	kl_keep_rec_get(m, &g);
	CHECK(!memcmp(&r, &g, sizeof(r)), "put/get round trip");
	w = want_of(&g);
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == -EBUSY && strstr(msg, "RUNNING"), "RUNNING is refused: rc %d '%s'", rc, msg);

	/* what a checkpoint writes */
	g.checkpoint = 1;
	g.state = KL_KEEP_STOPPED;
	g.ram_sum = kl_keep_ram_sum(m, ram);
	kl_keep_rec_put(m, &g);
	w = want_of(&g);
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == 0, "STOPPED at the vCPU's checkpoint resumes: rc %d '%s'", rc, msg);

	w.ram = 16 * MiB;
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == -ERANGE && strstr(msg, "8 MiB") && strstr(msg, "give -m 8 MiB"),
	      "another -m: rc %d '%s'", rc, msg);
	w = want_of(&g);
	w.page_size = 1ul << 30;
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == -ERANGE && strstr(msg, "host pages"), "another page size: rc %d '%s'", rc, msg);
	w = want_of(&g);
	w.guest_page = 2 * MiB;
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == -ERANGE && strstr(msg, "give -g 4k"), "another -g: rc %d '%s'", rc, msg);
	w = want_of(&g);
	w.id = 0xbeef;
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == -ESTALE && strstr(msg, "other kept RAM"), "another RAM's vCPU: rc %d '%s'", rc,
	      msg);
	w = want_of(&g);
	w.checkpoint = 2;
	rc = kl_keep_check(&g, &w, msg, sizeof(msg));
	CHECK(rc == -ESTALE && strstr(msg, "checkpoint 2") && strstr(msg, "checkpoint 1"),
	      "another checkpoint: rc %d '%s'", rc, msg);

	/* damaged: a field changed without resealing, no magic, a version */
	w = want_of(&g);
	memcpy(&r, &g, sizeof(r));
	r.state = KL_KEEP_STOPPED + 1;
	rc = kl_keep_check(&r, &w, msg, sizeof(msg));
	CHECK(rc == -EBADMSG && strstr(msg, "damaged"), "unsealed change: rc %d '%s'", rc, msg);
	memset(&r, 0, sizeof(r));
	rc = kl_keep_check(&r, &w, msg, sizeof(msg));
	CHECK(rc == -EBADMSG && strstr(msg, "no kvm-lite checkpoint record"),
	      "zeroed RAM has no record: rc %d '%s'", rc, msg);
	memcpy(&r, &g, sizeof(r));
	r.version = 9;
	kl_keep_rec_seal(&r);
	rc = kl_keep_check(&r, &w, msg, sizeof(msg));
	CHECK(rc == -EBADMSG && strstr(msg, "version 9"), "version: rc %d '%s'", rc, msg);

	/* The RAM checksum: every byte but the record's page, which changes
	 * with the state after the checksum is taken. */
	{
		uint64_t h = kl_keep_ram_sum(m, ram), h2;
		unsigned char *c = malloc(ram - 4096);

		m[KL_KEEP_REC + 100] ^= 0xff;
		CHECK(kl_keep_ram_sum(m, ram) == h, "the record's page is not summed");
		m[KL_KEEP_REC - 1] ^= 1;
		CHECK(kl_keep_ram_sum(m, ram) != h, "the byte before it is");
		m[KL_KEEP_REC - 1] ^= 1;
		m[KL_KEEP_REC + 4096] ^= 1;
		CHECK(kl_keep_ram_sum(m, ram) != h, "the byte after it is");
		m[KL_KEEP_REC + 4096] ^= 1;
		m[ram - 1] ^= 1;
		CHECK(kl_keep_ram_sum(m, ram) != h, "the last byte is");
		m[ram - 1] ^= 1;
		if (c) {
			memcpy(c, m, KL_KEEP_REC);
			memcpy(c + KL_KEEP_REC, m + KL_KEEP_REC + 4096, ram - KL_KEEP_REC - 4096);
			h2 = kl_checksum(c, 0, ram - 4096);
			CHECK(h2 == h, "kl_checksum of RAM without the record's page");
			free(c);
		}
	}
	free(m);
}

static void test_keep_split(void)
{
	char d[64], n[16];

	CHECK(kl_keep_split("/mnt/huge/vm1", d, sizeof(d), n, sizeof(n)) == 0 &&
		      !strcmp(d, "/mnt/huge") && !strcmp(n, "vm1"),
	      "DIR/NAME: '%s' '%s'", d, n);
	CHECK(kl_keep_split("/vm1", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, "/") &&
		      !strcmp(n, "vm1"),
	      "/NAME: '%s' '%s'", d, n);
	CHECK(kl_keep_split("k/vm1", d, sizeof(d), n, sizeof(n)) == 0 && !strcmp(d, "k"),
	      "relative DIR");
	CHECK(kl_keep_split("vm1", d, sizeof(d), n, sizeof(n)) == -EINVAL, "no DIR");
	CHECK(kl_keep_split("/mnt/", d, sizeof(d), n, sizeof(n)) == -EINVAL, "no NAME");
	CHECK(kl_keep_split("/mnt/..", d, sizeof(d), n, sizeof(n)) == -EINVAL, "..");
	CHECK(kl_keep_split("/mnt/.", d, sizeof(d), n, sizeof(n)) == -EINVAL, ".");
	CHECK(kl_keep_split("/mnt/a-name-too-long-here", d, sizeof(d), n, sizeof(n)) ==
		      -ENAMETOOLONG,
	      "long NAME");
}

static void test_meminfo(void)
{
	const char *t = "MemTotal:       24683584 kB\n"
			"ShmemHugePages:  4194304 kB\n"
			"Shmem:           4203684 kB\n"
			"HugePages_Free:        8\n";
	long long v = -1;

	CHECK(kl_meminfo_parse(t, "Shmem", &v) == 0 && v == 4203684, "Shmem: %lld", v);
	CHECK(kl_meminfo_parse(t, "ShmemHugePages", &v) == 0 && v == 4194304,
	      "ShmemHugePages: %lld", v);
	CHECK(kl_meminfo_parse(t, "HugePages_Free", &v) == 0 && v == 8, "HugePages_Free");
	CHECK(kl_meminfo_parse(t, "MemTotal", &v) == 0 && v == 24683584, "first line");
	CHECK(kl_meminfo_parse(t, "Shmem ", &v) == -ENOENT &&
		      kl_meminfo_parse(t, "Mem", &v) == -ENOENT,
	      "whole keys only");
}

static void test_guest_image(void)
{
	size_t n = (size_t)(kl_guest_end - kl_guest_start);

	CHECK(n > 256 && n <= KL_CODE_MAX && KL_CODE + n <= KL_GUEST_PT,
	      "guest image %zu bytes fits at KL_CODE", n);
}

int main(void)
{
	test_layout();
	test_boot_pt();
	test_checksum();
	test_parse();
	test_vcpu_file();
	test_keep_record();
	test_keep_split();
	test_meminfo();
	test_guest_image();
	printf("kvm-lite-unit: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
