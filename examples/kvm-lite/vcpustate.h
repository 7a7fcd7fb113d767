/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite vCPU state file: what a snapshot needs besides guest RAM (which
 * hpr_save() writes to its own file). Pure file format, no /dev/kvm, so it
 * is unit-tested everywhere.
 */
#ifndef KVM_LITE_VCPUSTATE_H
#define KVM_LITE_VCPUSTATE_H

#include <linux/kvm.h>
#include <stddef.h>
#include <stdint.h>

#define KL_VCPU_MAGIC "KLVCPU01"
/* 2: keep_id and checkpoint, for --keep (version 1 files are refused) */
#define KL_VCPU_VERSION 2

struct kl_vcpu_state {
	uint64_t ram;		/* guest RAM bytes the snapshot belongs to */
	uint32_t guest_page;	/* 4096 or 2 MiB */
	uint32_t flags;		/* kl_params.flags of the run */
	uint64_t keep_id;	/* --keep: the kept RAM's id (keep.h), else 0 */
	uint64_t checkpoint;	/* --keep: the checkpoint this state was taken at */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_fpu fpu;
};

/* Write st to fd (truncated first). 0 or -errno. */
int kl_vcpu_state_write(int fd, const struct kl_vcpu_state *st);
/* Read and verify (magic, version, size, CRC). -EINVAL: not a kvm-lite
 * vCPU file; -EPROTO: a kvm-lite vCPU file of another format version
 * (*version, when not NULL, is the file's); -EBADMSG: truncated or
 * corrupt; -errno of read. */
int kl_vcpu_state_read(int fd, struct kl_vcpu_state *st, uint32_t *version);

uint32_t kl_crc32(const void *p, size_t n);
#endif
