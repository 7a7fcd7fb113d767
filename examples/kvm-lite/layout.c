/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: the parts of the VMM that need no /dev/kvm — RAM size checks,
 * the guest memory layout, the boot page tables, a page-table walker (to
 * check what the guest built) and the memory checksum the guest also
 * computes. Unit-tested by kvm-lite-unit on machines without KVM.
 */
#include "layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTE_P 0x1ull
#define PTE_RW 0x2ull
#define PTE_US 0x4ull
#define PTE_PS 0x80ull
#define PTE_ADDR 0x000ffffffffff000ull

static void fmt_size(size_t v, char *b, size_t n)
{
	if (v >= (1ul << 30) && !(v & ((1ul << 30) - 1)))
		snprintf(b, n, "%zu GiB", v >> 30);
	else if (v >= (1ul << 20) && !(v & ((1ul << 20) - 1)))
		snprintf(b, n, "%zu MiB", v >> 20);
	else if (v >= 1024 && !(v & 1023))
		snprintf(b, n, "%zu KiB", v >> 10);
	else
		snprintf(b, n, "%zu bytes", v);
}

int kl_layout_init(struct kl_layout *l, size_t ram, size_t guest_page, size_t host_page,
		   const char *host_name, char *msg, size_t msglen)
{
	/* The guest builds whole page tables of 2 MiB reach, so RAM is whole
	 * 2 MiB pages even for 4 KiB guest pages; a host backing with bigger
	 * pages (1 GiB hugetlb) needs whole host pages too: the memslot must
	 * cover exactly the region. */
	size_t unit = 2ul << 20, npd, npt = 0;
	char a[32], b[32];

	memset(l, 0, sizeof(*l));
	if (guest_page != 4096 && guest_page != (2ul << 20)) {
		snprintf(msg, msglen, "guest page size must be 4k or 2m");
		return -EINVAL;
	}
	if (host_page > unit)
		unit = host_page;
	if (ram < KL_MIN_RAM || ram > KL_MAX_RAM) {
		fmt_size(ram, a, sizeof(a));
		snprintf(msg, msglen, "guest RAM %s is out of range: use 8 MiB to 3 GiB", a);
		return -EINVAL;
	}
	if (ram % unit) {
		fmt_size(ram, a, sizeof(a));
		fmt_size(unit, b, sizeof(b));
		snprintf(msg, msglen,
			 "guest RAM %s is not a multiple of the %s page size "
			 "(%s backing, %s guest pages): use a multiple of %s",
			 a, b, host_name, guest_page == 4096 ? "4 KiB" : "2 MiB", b);
		return -EINVAL;
	}
	npd = (ram + (1ul << 30) - 1) >> 30;
	if (guest_page == 4096)
		npt = ram >> 21;
	l->ram = ram;
	l->guest_page = guest_page;
	l->pt_bytes = 4096 * (2 + npd + npt);
	l->data = (KL_GUEST_PT + l->pt_bytes + unit - 1) & ~(unit - 1);
	if (l->data + (4ul << 20) > ram) {
		fmt_size(ram, a, sizeof(a));
		snprintf(msg, msglen,
			 "guest RAM %s leaves less than 4 MiB to measure after the "
			 "guest's page tables: give more RAM",
			 a);
		return -EINVAL;
	}
	l->data_len = ram - l->data;
	/* FPR range: the upper half of the data area, whole 2 MiB pages (and
	 * whole host pages), so release_lazy never has to remember a part. */
	l->fpr_len = (l->data_len / 2) & ~(unit - 1);
	if (!l->fpr_len)
		l->fpr_len = unit;
	l->fpr = ram - l->fpr_len;
	return 0;
}

void kl_boot_pt_build(void *ram, size_t ram_size)
{
	uint64_t *pml4 = (uint64_t *)((char *)ram + KL_BOOT_PML4);
	uint64_t *pdpt = (uint64_t *)((char *)ram + KL_BOOT_PDPT);
	uint64_t *pd = (uint64_t *)((char *)ram + KL_BOOT_PD);
	size_t n = ram_size >> 21;

	if (n > 512)
		n = 512;
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	memset(pd, 0, 4096);
	pml4[0] = KL_BOOT_PDPT | PTE_P | PTE_RW;
	pdpt[0] = KL_BOOT_PD | PTE_P | PTE_RW;
	for (size_t i = 0; i < n; i++)
		pd[i] = (i << 21) | PTE_P | PTE_RW | PTE_PS;
}

static int read_entry(const void *ram, size_t ram_size, uint64_t table, unsigned idx,
		      uint64_t *e)
{
	uint64_t a = (table & PTE_ADDR) + idx * 8ull;

	if (a + 8 > ram_size)
		return -EFAULT;
	memcpy(e, (const char *)ram + a, 8);
	return 0;
}

int kl_pt_walk(const void *ram, size_t ram_size, uint64_t cr3, uint64_t va, uint64_t *pa,
	       size_t *leaf, int *user)
{
	uint64_t t = cr3, e = 0;
	int us = 1;

	for (int level = 3; level >= 0; level--) {
		unsigned idx = (va >> (12 + 9 * level)) & 511;
		int rc = read_entry(ram, ram_size, t, idx, &e);

		if (rc)
			return rc;
		if (!(e & PTE_P))
			return -ENOENT;
		us &= !!(e & PTE_US);
		if (level == 0 || ((e & PTE_PS) && level <= 2)) {
			size_t sz = 1ul << (12 + 9 * level);

			*pa = (e & PTE_ADDR & ~(uint64_t)(sz - 1)) | (va & (sz - 1));
			*leaf = sz;
			if (user)
				*user = us;
			return 0;
		}
		t = e;
	}
	return -ENOENT;
}

uint64_t kl_checksum(const void *ram, size_t off, size_t len)
{
	/* Same loop as guest.S: h = (h ^ q) * golden, over 8-byte words. */
	const unsigned char *p = (const unsigned char *)ram + off;
	uint64_t h = 0, q;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		memcpy(&q, p + i, 8);
		h = (h ^ q) * 0x9e3779b97f4a7c15ull;
	}
	return h;
}

size_t kl_parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	unsigned sh = 0;

	if (!s || !*s || *s == '-')
		return 0;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k': case 'K': sh = 10; end++; break;
	case 'm': case 'M': sh = 20; end++; break;
	case 'g': case 'G': sh = 30; end++; break;
	default: break;
	}
	if (v > (SIZE_MAX >> sh))
		return 0;
	v <<= sh;
	if (*end == 'i' && (end[1] == 'B' || end[1] == 'b'))
		end += 2;
	else if (*end == 'B' || *end == 'b')
		end++;
	return *end ? 0 : (size_t)v;
}
