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
/* 2: keep_id and checkpoint, for --keep; 3: the whole vCPU (events,
 * mp_state, XSAVE, XCRs, debug registers, MSRs with the TSC, CPUID).
 * Files of another version are refused. */
#define KL_VCPU_VERSION 3

#define KL_VCPU_MAX_MSRS 320  /* KVM_GET_MSR_INDEX_LIST has ~100-250 */
#define KL_VCPU_MAX_CPUID 256 /* KVM_GET_CPUID2 entries (kvm_amd under qemu -cpu max: 128) */
#define KL_VCPU_XSAVE 4096    /* legacy KVM_GET_XSAVE area (no AMX) */

/* kl_vcpu_state.have: which classes the saving KVM gave (regs, sregs and
 * fpu always). A class the file has and the restoring KVM cannot set is
 * an error; one the file lacks was not supported where it was saved. */
#define KL_HAVE_EVENTS 0x1
#define KL_HAVE_MP_STATE 0x2
#define KL_HAVE_XSAVE 0x4
#define KL_HAVE_XCRS 0x8
#define KL_HAVE_DEBUGREGS 0x10
#define KL_HAVE_MSRS 0x20
#define KL_HAVE_CPUID 0x40
#define KL_HAVE_ALL 0x7f

struct kl_vcpu_state {
	uint64_t ram;	       /* guest RAM bytes the snapshot belongs to */
	uint32_t guest_page;   /* 4096 or 2 MiB */
	uint32_t flags;	       /* kl_params.flags of the run */
	uint64_t keep_id;      /* --keep: the kept RAM's id (keep.h), else 0 */
	uint64_t checkpoint;   /* --keep: the checkpoint this state was taken at */
	uint32_t have;	       /* KL_HAVE_* */
	uint32_t nmsrs;	       /* entries of msrs[] */
	uint32_t ncpuid;       /* entries of cpuid[] */
	uint32_t msrs_skipped; /* listed by KVM but not readable (not saved) */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_fpu fpu;
	struct kvm_vcpu_events events;
	struct kvm_mp_state mp_state;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs debugregs;
	uint32_t xsave[KL_VCPU_XSAVE / 4]; /* struct kvm_xsave's region */
	struct kvm_msr_entry msrs[KL_VCPU_MAX_MSRS];
	struct kvm_cpuid_entry2 cpuid[KL_VCPU_MAX_CPUID];
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
