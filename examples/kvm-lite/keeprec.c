/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite --keep: the checkpoint record in guest RAM and the checks a
 * resume makes with it (see keeprec.h). No /dev/kvm, no hpregion.
 */
#include "keeprec.h"
#include "layout.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull

/* kl_checksum's loop, from h, so ranges chain. */
static uint64_t sum_from(uint64_t h, const unsigned char *p, size_t len)
{
	uint64_t q;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		memcpy(&q, p + i, 8);
		h = (h ^ q) * GOLDEN;
	}
	return h;
}

void kl_keep_rec_seal(struct kl_keep_rec *r)
{
	r->sum = kl_checksum(r, 0, offsetof(struct kl_keep_rec, sum));
}

void kl_keep_rec_init(struct kl_keep_rec *r, uint64_t id, size_t ram, size_t page_size,
		      size_t guest_page)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->magic, KL_KEEP_MAGIC, sizeof(r->magic));
	r->version = KL_KEEP_VERSION;
	r->state = KL_KEEP_RUNNING;
	r->id = id;
	r->ram = ram;
	r->page_size = page_size;
	r->guest_page = guest_page;
	kl_keep_rec_seal(r);
}

void kl_keep_rec_get(const void *ram, struct kl_keep_rec *r)
{
	memcpy(r, (const char *)ram + KL_KEEP_REC, sizeof(*r));
}

void kl_keep_rec_put(void *ram, struct kl_keep_rec *r)
{
	kl_keep_rec_seal(r);
	memcpy((char *)ram + KL_KEEP_REC, r, sizeof(*r));
}

uint64_t kl_keep_ram_sum(const void *ram, size_t size)
{
	const unsigned char *p = ram;
	uint64_t h;

	if (size <= KL_KEEP_REC + 4096)
		return sum_from(0, p, size < KL_KEEP_REC ? size : KL_KEEP_REC);
	h = sum_from(0, p, KL_KEEP_REC);
	return sum_from(h, p + KL_KEEP_REC + 4096, size - KL_KEEP_REC - 4096);
}

static const char *mib(uint64_t v, char *b, size_t n)
{
	if (v >= (1ull << 20) && !(v & ((1ull << 20) - 1)))
		snprintf(b, n, "%llu MiB", (unsigned long long)(v >> 20));
	else
		snprintf(b, n, "%llu KiB", (unsigned long long)(v >> 10));
	return b;
}

/* a failed check: msg gets why, and its error comes back */
__attribute__((format(printf, 4, 5))) static int refuse(int err, char *msg, size_t len,
							const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return err;
}

int kl_keep_check(const struct kl_keep_rec *r, const struct kl_keep_want *w, char *msg, size_t len)
{
	char a[32], b[32];

	if (memcmp(r->magic, KL_KEEP_MAGIC, sizeof(r->magic)))
		return refuse(-EBADMSG, msg, len,
			      "no kvm-lite checkpoint record in it: not guest RAM kvm-lite --keep "
			      "left (remove it to boot afresh)");
	if (r->sum != kl_checksum(r, 0, offsetof(struct kl_keep_rec, sum)))
		return refuse(-EBADMSG, msg, len,
			      "its checkpoint record is damaged (checksum): the VMM died while "
			      "writing it, or the RAM was written by something else");
	if (r->version != KL_KEEP_VERSION)
		return refuse(-EBADMSG, msg, len,
			      "its checkpoint record is version %u, this kvm-lite reads %d",
			      r->version, KL_KEEP_VERSION);
	if (r->ram != w->ram)
		return refuse(-ERANGE, msg, len, "it holds %s of guest RAM, -m asks %s: give -m %s",
			      mib(r->ram, a, sizeof(a)), mib(w->ram, b, sizeof(b)), a);
	if (r->page_size != w->page_size)
		return refuse(-ERANGE, msg, len, "its record says %s host pages, the region has %s",
			      mib(r->page_size, a, sizeof(a)), mib(w->page_size, b, sizeof(b)));
	if (r->guest_page != w->guest_page)
		return refuse(-ERANGE, msg, len,
			      "its guest built %s page tables, -g asks %s: give -g %s",
			      r->guest_page == 4096 ? "4 KiB" : "2 MiB",
			      w->guest_page == 4096 ? "4 KiB" : "2 MiB",
			      r->guest_page == 4096 ? "4k" : "2m");
	if (r->id != w->id)
		return refuse(-ESTALE, msg, len,
			      "the vCPU file belongs to other kept RAM (id %016llx, this RAM is "
			      "%016llx): give the --snapshot PREFIX this RAM was stopped with",
			      (unsigned long long)w->id, (unsigned long long)r->id);
	if (r->state != KL_KEEP_STOPPED)
		return refuse(-EBUSY, msg, len,
			      "its guest ran on past checkpoint %llu (state %s: the VMM was "
			      "killed while the vCPU ran, or the guest went on to finish), so "
			      "the RAM is not the checkpoint the vCPU file holds; remove the "
			      "kept file and the vCPU file to boot afresh",
			      (unsigned long long)r->checkpoint,
			      r->state == KL_KEEP_RUNNING ? "RUNNING" : "unknown");
	if (r->checkpoint != w->checkpoint)
		return refuse(-ESTALE, msg, len,
			      "the vCPU file was taken at checkpoint %llu, the RAM is at "
			      "checkpoint %llu: a vCPU file from an earlier or later stop",
			      (unsigned long long)w->checkpoint, (unsigned long long)r->checkpoint);
	return 0;
}

int kl_keep_split(const char *arg, char *dir, size_t dlen, char *name, size_t nlen)
{
	const char *slash = arg ? strrchr(arg, '/') : NULL;
	size_t dl;

	if (!slash || !slash[1] || !strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
		return -EINVAL;
	dl = slash == arg ? 1 : (size_t)(slash - arg); /* "/name": the root */
	if (dl >= dlen || strlen(slash + 1) >= nlen)
		return -ENAMETOOLONG;
	memcpy(dir, arg, dl);
	dir[dl] = 0;
	strcpy(name, slash + 1);
	return 0;
}

int kl_meminfo_parse(const char *text, const char *key, long long *val)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == ':') {
			*val = strtoll(p + kl + 1, NULL, 10);
			return 0;
		}
	return -ENOENT;
}
