/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: the KVM ioctls — open /dev/kvm, say which KVM it is, create a
 * VM with one memory slot and one vCPU, enter long mode directly through
 * KVM_SET_SREGS, and save/restore vCPU state.
 */
#ifndef KVM_LITE_KVM_H
#define KVM_LITE_KVM_H

#include <linux/kvm.h>
#include <stddef.h>
#include <stdint.h>

#include "vcpustate.h"

struct kl_vm {
	int vm, vcpu;
	struct kvm_run *run;
	size_t run_size;
};

/* Open /dev/kvm, check the API version and that a VM can be created (a
 * device node alone is not a usable KVM). Returns the fd or -errno
 * (-ENOENT/-ENODEV/-ENXIO: no usable KVM here; -EACCES/-EPERM: not
 * permitted; -EPROTO: API version; others: KVM_CREATE_VM's error). */
int kl_kvm_open(void);
/* One line naming the KVM flavour: module (kvm_intel, kvm_amd, kvm_pvm),
 * nested paging, API version, and the hypervisor the host runs under. */
void kl_kvm_describe(int kvm, char *buf, size_t len);

/* VM + memory slot 0 = [0, size) at ram + vCPU 0 with the host's CPUID. */
int kl_vm_create(struct kl_vm *v, int kvm, void *ram, size_t size);
void kl_vm_destroy(struct kl_vm *v);
/* 64-bit long mode at CPL 0, paging on KL_BOOT_PML4, rip/rsp as given. */
int kl_vcpu_enter_long_mode(struct kl_vm *v, uint64_t rip, uint64_t rsp);

/* Complete a pending I/O exit (KVM_RUN with immediate_exit) so the state
 * read next is consistent, then read it. */
int kl_vcpu_save(struct kl_vm *v, struct kl_vcpu_state *st);
int kl_vcpu_load(struct kl_vm *v, const struct kl_vcpu_state *st);
#endif
