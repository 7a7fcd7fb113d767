/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: KVM ioctls. Works unchanged on hardware KVM (VMX/SVM) and on
 * kvm-pvm: long mode is entered directly with KVM_SET_SREGS (no real-mode
 * firmware), which kvm-pvm needs and hardware KVM allows.
 */
#define _GNU_SOURCE
#include "kvm.h"
#include "layout.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

/* Setup ioctls can return EINTR when a signal arrives while KVM waits on a
 * lock (KVM_CREATE_VM, KVM_SET_USER_MEMORY_REGION on hugetlb memory); they
 * have no side effect then and are simply retried. */
long kl_xioctl(int fd, unsigned long req, unsigned long arg)
{
	long rc;

	do
		rc = ioctl(fd, req, arg);
	while (rc < 0 && errno == EINTR);
	return rc;
}

int kl_kvm_open(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	int v;

	if (fd < 0)
		return -errno;
	v = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (v != KVM_API_VERSION) {
		/* ENOTTY: the path is no KVM device (a file bound over it) */
		v = v < 0 ? (errno == ENOTTY ? -ENODEV : -errno) : -EPROTO;
		close(fd);
		return v;
	}
	/* A device node that answers the API version can still refuse VMs
	 * (a KVM module that loaded but cannot run guests here): usable means
	 * a VM can be created. */
	v = (int)kl_xioctl(fd, KVM_CREATE_VM, 0);
	if (v < 0) {
		v = -errno;
		close(fd);
		return v == -ENOENT || v == -EACCES ? -ENODEV : v;
	}
	close(v);
	return fd;
}

static int read_param(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

void kl_kvm_describe(int kvm, char *buf, size_t len)
{
	const char *mod = "unknown module", *kind = "";
	char np[16] = "?", hv[13] = "";
	unsigned a, b, c, d;

	if (!access("/sys/module/kvm_intel", F_OK)) {
		mod = "kvm_intel";
		kind = "hardware VMX";
		read_param("/sys/module/kvm_intel/parameters/ept", np, sizeof(np));
	} else if (!access("/sys/module/kvm_amd", F_OK)) {
		mod = "kvm_amd";
		kind = "hardware SVM";
		read_param("/sys/module/kvm_amd/parameters/npt", np, sizeof(np));
	} else if (!access("/sys/module/kvm_pvm", F_OK)) {
		mod = "kvm_pvm";
		kind = "paravirtual, no VMX/SVM: CPL 0 guest code is emulated";
		snprintf(np, sizeof(np), "shadow");
	}
	/* CPUID.1:ECX bit 31: the host kernel itself runs under a hypervisor,
	 * whose vendor is at leaf 0x40000000 (KVMKVMKVM, TCGTCGTCGTCG, ...). */
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 31))) {
		__cpuid(0x40000000, a, b, c, d);
		memcpy(hv, &b, 4);
		memcpy(hv + 4, &c, 4);
		memcpy(hv + 8, &d, 4);
		hv[12] = 0;
	}
	snprintf(buf, len, "%s (%s), nested paging %s, API %d, %d memslots, host %s%s%s", mod, kind,
		 np, ioctl(kvm, KVM_GET_API_VERSION, 0),
		 ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_NR_MEMSLOTS),
		 hv[0] ? "runs under hypervisor '" : "is bare metal", hv, hv[0] ? "'" : "");
}

/* The boot CPUID: what this KVM supports for a guest, plus leaf
 * KL_CPUID_LEAF with a value of this boot (kvm.h), so a restore that
 * loaded another vCPU's CPUID -- the host's, not the saved one -- is seen
 * by the guest. */
static int set_cpuid(int kvm, int vcpu)
{
	struct kvm_cpuid2 *c;
	struct kvm_cpuid_entry2 *e;
	uint64_t id = 0;
	int n = 100, rc;

	for (;;) {
		c = calloc(1, sizeof(*c) + ((size_t)n + 1) * sizeof(c->entries[0]));
		if (!c)
			return -ENOMEM;
		c->nent = (unsigned)n;
		if (ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c) == 0)
			break;
		rc = -errno;
		free(c);
		if (rc != -E2BIG || n > 4000)
			return rc;
		n *= 2;
	}
	if (getrandom(&id, sizeof(id), 0) != sizeof(id))
		id = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	e = &c->entries[c->nent++];
	memset(e, 0, sizeof(*e));
	e->function = KL_CPUID_LEAF;
	e->eax = KL_CPUID_SIG;
	e->ebx = (uint32_t)id;
	e->ecx = (uint32_t)(id >> 32) | 1; /* never all zero */
	rc = ioctl(vcpu, KVM_SET_CPUID2, c) ? -errno : 0;
	free(c);
	return rc;
}

/* Every failure returns the errno of the call that failed (never a stale
 * one, never 0 with the VM destroyed). */
int kl_vm_create(struct kl_vm *v, int kvm, void *ram, size_t size)
{
	struct kvm_userspace_memory_region slot = {
		.slot = 0,
		.guest_phys_addr = 0,
		.memory_size = size,
		.userspace_addr = (uintptr_t)ram,
	};
	int rc, sz;

	memset(v, 0, sizeof(*v));
	v->vm = v->vcpu = -1;
	v->kvm = kvm;
	v->vm = (int)kl_xioctl(kvm, KVM_CREATE_VM, (unsigned long)(0));
	if (v->vm < 0)
		return -errno;
	/* VMX needs a TSS area for real-mode emulation even if we never use
	 * real mode; outside RAM (KL_MAX_RAM keeps it so). SVM ignores it. */
	if (ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_SET_TSS_ADDR) > 0 &&
	    kl_xioctl(v->vm, KVM_SET_TSS_ADDR, (unsigned long)(KL_TSS_ADDR)) < 0)
		goto fail_errno;
	if (kl_xioctl(v->vm, KVM_SET_USER_MEMORY_REGION, (unsigned long)(&slot)) < 0)
		goto fail_errno;
	v->vcpu = (int)kl_xioctl(v->vm, KVM_CREATE_VCPU, (unsigned long)(0));
	if (v->vcpu < 0)
		goto fail_errno;
	sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (sz < 0)
		goto fail_errno;
	if ((size_t)sz < sizeof(struct kvm_run)) {
		rc = -EPROTO; /* a KVM whose kvm_run is smaller than ours */
		goto fail;
	}
	v->run_size = (size_t)sz;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		goto fail_errno;
	}
	v->immediate_exit = ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) > 0;
	if ((rc = set_cpuid(kvm, v->vcpu)))
		goto fail;
	return 0;
fail_errno:
	rc = -errno;
fail:
	kl_vm_destroy(v);
	return rc ? rc : -EIO;
}

void kl_vm_destroy(struct kl_vm *v)
{
	if (v->run)
		munmap(v->run, v->run_size);
	if (v->vcpu >= 0)
		close(v->vcpu);
	if (v->vm >= 0)
		close(v->vm);
	v->run = NULL;
	v->vcpu = v->vm = -1;
}

static void seg(struct kvm_segment *s, uint16_t sel, uint8_t type, int code)
{
	memset(s, 0, sizeof(*s));
	s->base = 0;
	s->limit = 0xffffffff;
	s->selector = sel;
	s->type = type;
	s->present = 1;
	s->dpl = 0;
	s->s = 1;
	s->g = 1;
	s->l = code;   /* 64-bit code segment */
	s->db = !code; /* L and D must not both be set */
}

int kl_vcpu_enter_long_mode(struct kl_vm *v, uint64_t rip, uint64_t rsp)
{
	struct kvm_sregs s;
	struct kvm_regs r;

	if (ioctl(v->vcpu, KVM_GET_SREGS, &s) < 0)
		return -errno;
	seg(&s.cs, KL_SEL_KCODE, 11, 1);
	seg(&s.ds, KL_SEL_KDATA, 3, 0);
	s.es = s.fs = s.gs = s.ss = s.ds;
	/* VMX entry checks want a busy 64-bit TSS in TR; the guest loads its
	 * own with ltr before it could need it. */
	memset(&s.tr, 0, sizeof(s.tr));
	s.tr.type = 11;
	s.tr.present = 1;
	s.tr.limit = 0x67;
	s.cr3 = KL_BOOT_PML4;
	s.cr4 = 0x20;						 /* PAE */
	s.cr0 = 0x80000000u | 0x10000 | 0x20 | 0x10 | 0x2 | 0x1; /* PG WP NE ET MP PE */
	s.efer = 0x500;						 /* LME | LMA */
	if (kl_xioctl(v->vcpu, KVM_SET_SREGS, (unsigned long)(&s)) < 0)
		return -errno;
	memset(&r, 0, sizeof(r));
	r.rip = rip;
	r.rsp = rsp;
	r.rdi = KL_PARAMS;
	r.rflags = 0x2;
	if (kl_xioctl(v->vcpu, KVM_SET_REGS, (unsigned long)(&r)) < 0)
		return -errno;
	return 0;
}
