/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite --keep: the checkpoint record. With --keep the guest's RAM is a
 * kept hpregion region (HPR_F_ATTACH) that outlives the VMM; the record,
 * in guest RAM at KL_KEEP_REC (a page the guest program never touches),
 * says whether that RAM is a checkpoint a new VMM may resume from: the
 * VMM marks it STOPPED only after PREFIX.vcpu is on disk, and RUNNING
 * before the vCPU runs again. A VMM killed between the two leaves RUNNING
 * (refused); one killed while stopped leaves STOPPED (resumable). The
 * record travels with the RAM it describes: it is in the kept file.
 *
 * Pure logic, no /dev/kvm and no hpregion: unit-tested everywhere.
 */
#ifndef KVM_LITE_KEEPREC_H
#define KVM_LITE_KEEPREC_H

#include <stddef.h>
#include <stdint.h>

#include "vcpustate.h"

#define KL_KEEP_MAGIC "KLKEEP01"
#define KL_KEEP_VERSION 1

enum kl_keep_state {
	KL_KEEP_RUNNING = 1, /* the vCPU may have run since the last checkpoint */
	KL_KEEP_STOPPED = 2, /* RAM is checkpoint `checkpoint`, PREFIX.vcpu with it */
};

struct kl_keep_rec {
	char magic[8];
	uint32_t version;
	uint32_t state;	     /* enum kl_keep_state */
	uint64_t id;	     /* random, chosen when the RAM was created */
	uint64_t ram;	     /* guest RAM bytes */
	uint64_t page_size;  /* the host page size of the kept region */
	uint64_t guest_page; /* 4096 or 2 MiB: the guest's page tables */
	uint64_t checkpoint; /* checkpoints taken on this RAM, 0: none yet */
	uint64_t ram_sum;    /* STOPPED: kl_keep_ram_sum() at the checkpoint */
	uint64_t guest_sum;  /* STOPPED: the guest's last checksum of its data */
	uint64_t blocks;     /* STOPPED: the kept file's st_blocks then */
	uint64_t sum;	     /* kl_checksum of everything above */
};

/* What a resume expects: the command line's RAM, the region's page size,
 * and the vCPU file's id and checkpoint. */
struct kl_keep_want {
	size_t ram, page_size, guest_page;
	uint64_t id, checkpoint;
};

/* A new record (RUNNING, checkpoint 0), sealed. */
void kl_keep_rec_init(struct kl_keep_rec *r, uint64_t id, size_t ram, size_t page_size,
		      size_t guest_page);
/* Recompute r->sum after changing fields. */
void kl_keep_rec_seal(struct kl_keep_rec *r);
/* The record in guest RAM (ram: the host mapping of GPA 0). */
void kl_keep_rec_get(const void *ram, struct kl_keep_rec *r);
/* Seal r and store it in guest RAM. */
void kl_keep_rec_put(void *ram, struct kl_keep_rec *r);

/* The checksum of all guest RAM but the record's page: what a resume
 * recomputes and compares with ram_sum (kl_checksum's loop, chained). */
uint64_t kl_keep_ram_sum(const void *ram, size_t size);

/* May a VMM resume from record r with what w expects? 0, or -errno with
 * what to do in msg: -EBADMSG no record or a damaged one (not RAM a
 * kvm-lite --keep left), -ERANGE another RAM size, page size or guest page
 * size, -ESTALE the vCPU file belongs to other RAM (id) or another
 * checkpoint, -EBUSY the record is RUNNING (the VMM was killed while the
 * guest ran, or the guest ran on past its checkpoint). */
int kl_keep_check(const struct kl_keep_rec *r, const struct kl_keep_want *w, char *msg, size_t len);

/* "DIR/NAME" -> dir, name: the name is the last component, non-empty, not
 * "." or ".."; 0 or -EINVAL (-ENAMETOOLONG if a buffer is short). */
int kl_keep_split(const char *arg, char *dir, size_t dlen, char *name, size_t nlen);

/* The value of "Key:" in /proc/meminfo-style text, in kB (the unit
 * meminfo uses; HugePages_* are counts). 0 or -ENOENT. */
int kl_meminfo_parse(const char *text, const char *key, long long *val);

#endif
