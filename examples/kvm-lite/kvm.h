/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: the KVM ioctls — open /dev/kvm, say which KVM it is, create a
 * VM with one memory slot and one vCPU, enter long mode directly through
 * KVM_SET_SREGS, and save/restore vCPU state.
 */
#ifndef KVM_LITE_KVM_H
#define KVM_LITE_KVM_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "vcpustate.h"

struct kl_vm {
	int kvm, vm, vcpu; /* kvm: /dev/kvm, not owned */
	struct kvm_run *run;
	size_t run_size;
	bool immediate_exit; /* KVM_CAP_IMMEDIATE_EXIT: kicks through run->immediate_exit */
};

/* ioctl, retried on EINTR (setup ioctls have no side effect then). */
long kl_xioctl(int fd, unsigned long req, unsigned long arg);

/* Open /dev/kvm, check the API version and that a VM can be created (a
 * device node alone is not a usable KVM). Returns the fd or -errno
 * (-ENOENT/-ENODEV/-ENXIO: no usable KVM here; -EACCES/-EPERM: not
 * permitted; -EPROTO: API version; others: KVM_CREATE_VM's error). */
int kl_kvm_open(void);
/* One line naming the KVM flavour: module (kvm_intel, kvm_amd, kvm_pvm),
 * nested paging, API version, and the hypervisor the host runs under. */
void kl_kvm_describe(int kvm, char *buf, size_t len);

/* VM + memory slot 0 = [0, size) at ram + vCPU 0 with the host's CPUID
 * and KL_CPUID_LEAF. 0, or the -errno of the call that failed (nothing
 * left open then). */
int kl_vm_create(struct kl_vm *v, int kvm, void *ram, size_t size);
void kl_vm_destroy(struct kl_vm *v);
/* 64-bit long mode at CPL 0, paging on KL_BOOT_PML4, rip/rsp as given. */
int kl_vcpu_enter_long_mode(struct kl_vm *v, uint64_t rip, uint64_t rsp);

/* vcpu.c: the whole vCPU state. kl_vcpu_save completes a pending I/O exit
 * (KVM_RUN with immediate_exit, or a signal mask without it) so the state
 * is consistent, then reads regs, sregs, fpu and each class this KVM
 * offers (st->have; a missing capability is said once on stderr).
 * kl_vcpu_load sets them on a vCPU that has not run (CPUID first), and
 * fails with a message on a class the file has and this KVM cannot set.
 * kl_vcpu_verify reads the state back after a load and compares it with
 * st (the TSC may only have moved forward); it prints one line and
 * returns 0, or -EIO with each difference printed. */
int kl_vcpu_save(struct kl_vm *v, struct kl_vcpu_state *st);
int kl_vcpu_load(struct kl_vm *v, const struct kl_vcpu_state *st);
int kl_vcpu_verify(struct kl_vm *v, const struct kl_vcpu_state *st, bool quiet);
/* "regs sregs fpu events mp_state xsave xcrs debugregs 152 MSRs 40 CPUID" */
void kl_vcpu_describe(const struct kl_vcpu_state *st, char *buf, size_t len);
#endif
