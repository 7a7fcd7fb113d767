/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite guest-physical memory layout and the VMM <-> guest protocol.
 * Shared by the VMM (C) and the guest program (guest.S, preprocessed), so
 * it holds only macros when __ASSEMBLER__ is defined.
 *
 * Guest RAM is one hpregion region mapped at GPA 0. Below 2 MiB live the
 * VMM's boot page tables, the parameter block, the --keep checkpoint
 * record (a page the guest never touches), the guest's GDT/IDT/TSS,
 * its stacks and its code; from 2 MiB the guest builds its own page tables
 * (4 KiB or 2 MiB leaves); the rest, from data_start (2 MiB aligned), is
 * the memory the measured loops run over.
 */
#ifndef KVM_LITE_LAYOUT_H
#define KVM_LITE_LAYOUT_H

#define KL_BOOT_PML4 0x1000	/* VMM-built identity map for the setup code */
#define KL_BOOT_PDPT 0x2000
#define KL_BOOT_PD 0x3000	/* 2 MiB leaves over the first GiB */
#define KL_PARAMS 0x5000	/* struct kl_params, written by the VMM */
#define KL_KEEP_REC 0x6000	/* --keep: checkpoint record (keeprec.h), VMM only */
#define KL_IDT 0x7000		/* 32 interrupt gates, built by the guest */
#define KL_TSS 0x8000		/* 104-byte TSS (rsp0), filled by the guest */
#define KL_KSTACK_TOP 0x10000	/* CPL 0 stack: 0x9000..0x10000 */
#define KL_USTACK_TOP 0x20000	/* CPL 3 stack: 0x10000..0x20000 */
#define KL_CODE 0x20000		/* guest program, at most 64 KiB */
#define KL_CODE_MAX 0x10000
#define KL_GUEST_PT 0x200000	/* guest's own page tables start here */

#define KL_MIN_RAM (8ul << 20)
#define KL_MAX_RAM (3ul << 30)	/* stay below the 3-4 GiB hole (TSS addr) */
#define KL_TSS_ADDR 0xfffbd000	/* KVM_SET_TSS_ADDR (VMX real-mode TSS) */

/* Selectors of the guest's GDT */
#define KL_SEL_KCODE 0x08
#define KL_SEL_KDATA 0x10
#define KL_SEL_UDATA 0x1b	/* index 3, RPL 3 */
#define KL_SEL_UCODE 0x23	/* index 4, RPL 3 */
#define KL_SEL_TSS 0x28

/* I/O ports the guest's CPL 0 code writes with `out %eax`. CPL 3 code
 * calls the VMM with `int3` (port in dx), whose CPL 0 gate does the
 * `out`: kvm-pvm does not honour IOPL 3 at CPL 3. */
#define KL_PORT_REPORT 0xe0	/* eax event, rbx/rcx values */
#define KL_PORT_FREE 0xe1	/* free page report: rbx gpa, rsi len */
#define KL_PORT_ACQUIRE 0xe2	/* about to reuse: rbx gpa, rsi len */
#define KL_PORT_CHECKPOINT 0xe3	/* pause here for snapshot/restore */
#define KL_PORT_FAULT 0xee	/* exception: eax vector, rbx/rcx stack */
#define KL_PORT_DONE 0xef	/* guest program finished */

/* Events on KL_PORT_REPORT; rbx = tsc cycles unless said otherwise */
#define KL_EV_SETUP 1		/* rbx: cycles of the CPL 0 setup */
#define KL_EV_MEMSET1 2
#define KL_EV_MEMSET2 3
#define KL_EV_STRIDE 4
#define KL_EV_RANDOM 5
#define KL_EV_CHECKSUM 6	/* rbx: checksum of the data area */
#define KL_EV_FPR_WARM 7	/* memset of the FPR range, never released */
#define KL_EV_FPR_LAZY 8	/* same after release_lazy + fault_in */
#define KL_EV_FPR_RECLAIMED 9	/* same after release_lazy + reclaim */
#define KL_EV_CHECKSUM_FPR 10	/* rbx: checksum after the FPR rounds */
#define KL_EV_CHECKSUM_RESTORED 11 /* rbx: checksum after restore */
/* After the restore, the guest's checks of the vCPU state it set before
 * the checkpoint; rbx = checked << 32 | differing, bits KL_VS_* */
#define KL_EV_VSTATE 12		/* CPL 0: MSRs, debug registers, TSC, CPUID */
#define KL_EV_VSTATE_USER 13	/* CPL 3: XCR0 and the YMM registers */
#define KL_EV_HOSTILE 14	/* --test-hostile: rbx = requests refused as the guest saw */
#define KL_VS_STAR 0x1
#define KL_VS_LSTAR 0x2
#define KL_VS_CSTAR 0x4
#define KL_VS_SFMASK 0x8
#define KL_VS_KGSBASE 0x10
#define KL_VS_PAT 0x20
#define KL_VS_TSC_AUX 0x40	/* checked when CPUID has RDTSCP or RDPID */
#define KL_VS_DR0_3 0x80
#define KL_VS_DR7 0x100
#define KL_VS_TSC 0x200		/* rdtsc after the restore >= before the checkpoint */
#define KL_VS_CPUID 0x400	/* KL_CPUID_LEAF as at boot */
#define KL_VS_XCR0 0x1		/* (KL_EV_VSTATE_USER) XCR0 has x87|SSE|AVX */
#define KL_VS_YMM 0x2		/* (KL_EV_VSTATE_USER) ymm0-15, upper halves too */
/* (KL_EV_VSTATE_USER, in the checked half with neither bit above) why the
 * AVX state went unchecked: */
#define KL_VS_NOAVX_CPUID 0x100	/* CPUID lacks XSAVE or AVX, or XCR0 cannot hold AVX */
#define KL_VS_NOAVX_UD 0x200	/* CPUID offers AVX, but AVX at CPL 3 raised #UD */

/* kl_params.flags */
#define KL_P_GUEST_2M 0x1	/* 2 MiB leaves in the guest page tables */
#define KL_P_FPR 0x2		/* run the free page reporting rounds */
#define KL_P_CHECKPOINT 0x4	/* stop at KL_PORT_CHECKPOINT once */
#define KL_P_UD2 0x8		/* test: #UD at CPL 3 (IDT, TSS.rsp0 path) */
#define KL_P_HOSTILE 0x10	/* test: hostile requests to the VMM (run.c's policy) */
#define KL_P_HANG 0x20		/* test: spin at CPL 3 after setup, never exit */
#define KL_P_NO_AVX 0x40	/* test: leave AVX off, as if CPUID offered none */

/* A CPUID leaf kvm-lite adds to the boot CPUID: eax KL_CPUID_SIG, ebx:ecx
 * a value chosen at boot. The guest reads it before its checkpoint and
 * after the restore: equal only if the saved CPUID was restored. */
#define KL_CPUID_LEAF 0x4b4c0000
#define KL_CPUID_SIG 0x314c4b21 /* "!KL1" */

/* kl_params field offsets, for guest.S */
#define KLP_RAM 0
#define KLP_FLAGS 8
#define KLP_PT_BYTES 16
#define KLP_DATA 24
#define KLP_DATA_LEN 32
#define KLP_STRIDE_REPS 40
#define KLP_RAND_ITERS 48
#define KLP_SEED 56
#define KLP_FPR 64
#define KLP_FPR_LEN 72

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct kl_params {
	uint64_t ram;		/* guest RAM bytes, from GPA 0 */
	uint64_t flags;		/* KL_P_* */
	uint64_t pt_bytes;	/* bytes at KL_GUEST_PT for the guest's tables */
	uint64_t data;		/* GPA of the measured area */
	uint64_t data_len;
	uint64_t stride_reps;	/* passes of the 4 KiB-strided touch */
	uint64_t rand_iters;	/* random 8-byte updates */
	uint64_t seed;		/* xorshift64 seed, non-zero */
	uint64_t fpr;		/* GPA of the free-page-reporting range */
	uint64_t fpr_len;
};

/* Where everything goes for a RAM size and guest page size. */
struct kl_layout {
	size_t ram;
	size_t guest_page;	/* 4096 or 2 MiB */
	size_t pt_bytes;	/* guest page tables: PML4 + PDPT + PDs (+ PTs) */
	size_t data;		/* measured area [data, ram) */
	size_t data_len;
	size_t fpr, fpr_len;	/* upper half of the data area, 2 MiB aligned */
};

/*
 * Check a RAM size against the guest page size and the host backing's page
 * size and compute the layout. Returns 0, or -EINVAL with a message in msg
 * that says what to use instead. Needs no /dev/kvm.
 */
int kl_layout_init(struct kl_layout *l, size_t ram, size_t guest_page, size_t host_page,
		   const char *host_name, char *msg, size_t msglen);

/*
 * Write the VMM's boot page tables (identity map of min(ram, 1 GiB), 2 MiB
 * leaves, supervisor only) into guest RAM at KL_BOOT_PML4.
 */
void kl_boot_pt_build(void *ram, size_t ram_size);

/*
 * Walk the 4-level page tables rooted at cr3 inside guest RAM (as the CPU
 * would, without NX/protection checks). Returns 0 and the physical address
 * and leaf size, -EFAULT if a table lies outside RAM, -ENOENT if not mapped.
 */
int kl_pt_walk(const void *ram, size_t ram_size, uint64_t cr3, uint64_t va, uint64_t *pa,
	       size_t *leaf, int *user);

/* The guest's checksum of [off, off+len) of RAM, computed by the host. */
uint64_t kl_checksum(const void *ram, size_t off, size_t len);

/* Parse "64M", "2G", "4096": bytes, or 0 on bad input. */
size_t kl_parse_size(const char *s);
#endif
#endif
