/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite guest program. The VMM copies the bytes between kl_guest_start
 * and kl_guest_end to GPA KL_CODE and starts the vCPU there in 64-bit long
 * mode at CPL 0 on its boot page tables, interrupts off. The code is
 * position independent (RIP-relative), so it is assembled into the VMM
 * binary as read-only data and never runs on the host.
 *
 * CPL 0: build identity page tables over all RAM with 4 KiB or 2 MiB
 * leaves (user-accessible), a GDT with CPL 3 segments and a TSS, an IDT of
 * 32 exception gates that report to the VMM but for #BP, whose DPL 3
 * gate is how CPL 3 calls the VMM, then iretq to CPL 3 with IOPL 0.
 * CPL 3: the measured loops (memset, memset again, 4 KiB stride, random
 * xorshift updates), each timed with rdtsc; a checksum of the data area;
 * the free page reporting rounds; a checkpoint for snapshot/restore.
 *
 * CPL 3 never does port I/O. kvm-pvm runs a guest's CPL 3 code natively
 * in host user mode and does not honour IOPL 3 there, so an `out` at CPL 3
 * raises #GP on it (hardware KVM would allow it). CPL 3 reaches the VMM
 * with `int3`: the #BP gate (DPL 3) enters vmm_call at CPL 0, which does
 * the `out` (port in dx, values in eax/rbx/rsi as the VMM reads them) and
 * returns with iretq; #BP is a trap, so the saved RIP is past the int3.
 * Measured on kvm-pvm (Linux 6.18 host): `int $n` from CPL 3 raises #UD,
 * and `syscall` enters LSTAR without leaving CPL 3, so neither serves;
 * int3 is delivered through the guest's IDT like any exception. The timed
 * loops run at CPL 3 between calls, natively on every KVM.
 * tests/kvmlite-noport.sh checks that the CPL 3 part, between
 * kl_guest_user_start and kl_guest_user_end, holds no in/out/ins/outs.
 */
#include "layout.h"

	.section .note.GNU-stack, "", @progbits
	.section .rodata.kl_guest, "a"
	.globl kl_guest_start
	.globl kl_guest_end
	.code64

.macro tsc reg
	lfence
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, \reg
.endm

/* CPL 3 -> VMM: out %eax to port through the #BP gate; clobbers rdx (the
 * port), keeps every other register. */
.macro vmm port
	mov $\port, %edx
	int3
.endm

.macro report ev
	mov $\ev, %eax
	vmm KL_PORT_REPORT
.endm

/* The same from CPL 0, which does port I/O itself. */
.macro report0 ev
	mov $\ev, %eax
	out %eax, $KL_PORT_REPORT
.endm

#define CPD_CHECKED 0
#define CPD_TSC 8
#define CPD_CPUID 16
#define CP_DR7 0x00f50400	/* RW/LEN fields set, no breakpoint enabled */

	.balign 4096
kl_guest_start:
	tsc %r14
	mov $KL_PARAMS, %r15

	/* Page tables at KL_GUEST_PT: PML4, PDPT, npd PDs, then npt PTs. */
	mov $KL_GUEST_PT, %rdi
	mov KLP_PT_BYTES(%r15), %rcx
	shr $3, %rcx
	xor %eax, %eax
	rep stosq
	mov $KL_GUEST_PT, %rbx
	lea 0x1007(%rbx), %rax		/* PML4[0] -> PDPT, P|RW|US */
	mov %rax, (%rbx)
	mov KLP_RAM(%r15), %r8
	lea 0x3fffffff(%r8), %r10
	shr $30, %r10			/* npd */
	xor %ecx, %ecx
1:	mov %rcx, %rax
	shl $12, %rax
	lea 0x2007(%rbx,%rax), %rax
	mov %rax, 0x1000(%rbx,%rcx,8)	/* PDPT[i] -> PD i */
	inc %rcx
	cmp %r10, %rcx
	jb 1b
	mov %r8, %r11
	shr $21, %r11			/* PD entries */
	lea 0x2000(%rbx), %rsi		/* the PDs, contiguous */
	testq $KL_P_GUEST_2M, KLP_FLAGS(%r15)
	jz 3f
	xor %ecx, %ecx
2:	mov %rcx, %rax
	shl $21, %rax
	or $0x87, %rax			/* 2 MiB leaf: P|RW|US|PS */
	mov %rax, (%rsi,%rcx,8)
	inc %rcx
	cmp %r11, %rcx
	jb 2b
	jmp 5f
3:	mov %r10, %rdx
	shl $12, %rdx
	lea (%rsi,%rdx), %rdi		/* the PTs, after the PDs */
	xor %ecx, %ecx
4:	mov %rcx, %rax
	shl $12, %rax
	lea 7(%rdi,%rax), %rax
	mov %rax, (%rsi,%rcx,8)		/* PD[j] -> PT j */
	inc %rcx
	cmp %r11, %rcx
	jb 4b
	mov %r8, %r12
	shr $12, %r12
	xor %ecx, %ecx
6:	mov %rcx, %rax
	shl $12, %rax
	or $7, %rax			/* 4 KiB leaf: P|RW|US */
	mov %rax, (%rdi,%rcx,8)
	inc %rcx
	cmp %r12, %rcx
	jb 6b
5:	mov %rbx, %cr3

	/* GDT (in this image), reload CS through a far return, then SS/DS. */
	sub $16, %rsp
	movw $(gdt_end - gdt - 1), (%rsp)
	lea gdt(%rip), %rax
	mov %rax, 2(%rsp)
	lgdt (%rsp)
	add $16, %rsp
	pushq $KL_SEL_KCODE
	lea 7f(%rip), %rax
	push %rax
	lretq
7:	mov $KL_SEL_KDATA, %eax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	mov %ax, %fs
	mov %ax, %gs
	/* TSS: the CPL 0 stack for exceptions taken at CPL 3; the I/O map
	 * base past the limit means no bitmap (IOPL 3 decides). */
	movq $KL_KSTACK_TOP, KL_TSS+4
	movw $104, KL_TSS+0x66
	mov $KL_SEL_TSS, %eax
	ltr %ax

	/* IDT: 32 interrupt gates to the stubs below; #BP's goes to vmm_call
	 * with DPL 3 instead. */
	mov $KL_IDT, %rdi
	lea isr_stubs(%rip), %rsi
	movabs $0x00008e0000000000, %r9	/* present, DPL 0, 64-bit int gate */
	xor %ecx, %ecx
8:	call set_gate
	add $16, %rdi
	add $16, %rsi
	inc %ecx
	cmp $32, %ecx
	jb 8b
	mov $(KL_IDT + 6 * 16), %rdi
	lea ud_stub(%rip), %rsi
	call set_gate			/* #UD: the AVX probe's, or a real one */
	mov $(KL_IDT + 3 * 16), %rdi
	lea vmm_call(%rip), %rsi
	movabs $0x0000ee0000000000, %r9	/* present, DPL 3, 64-bit int gate */
	call set_gate
	sub $16, %rsp
	movw $(32 * 16 - 1), (%rsp)
	movq $KL_IDT, 2(%rsp)
	lidt (%rsp)
	add $16, %rsp

	/* XSAVE with AVX where CPUID offers both: CR4.OSFXSR|OSXMMEXCPT|
	 * OSXSAVE and XCR0 = x87|SSE|AVX, so the CPL 3 code can hold state
	 * only XSAVE/XCRs save (the upper YMM halves); avx_on says so, and
	 * where not, avx_why says why (the VMM tells its user). */
	testq $KL_P_NO_AVX, KLP_FLAGS(%r15)
	jnz 8f
	mov $1, %eax
	xor %ecx, %ecx
	cpuid
	and $((1 << 26) | (1 << 28)), %ecx	/* XSAVE, AVX */
	cmp $((1 << 26) | (1 << 28)), %ecx
	jne 8f
	mov $0xd, %eax
	xor %ecx, %ecx
	cpuid
	and $7, %eax
	cmp $7, %eax
	jne 8f
	mov %cr4, %rax
	or $((1 << 9) | (1 << 10) | (1 << 18)), %rax
	mov %rax, %cr4
	xor %ecx, %ecx
	xor %edx, %edx
	mov $7, %eax
	xsetbv
	movq $1, avx_on(%rip)
	jmp 9f
8:	movq $KL_VS_NOAVX_CPUID, avx_why(%rip)
9:
	/* --test-hostile, the CPL 0 part: `in` from ports nobody serves and
	 * from a port that only takes `out`, and MMIO outside RAM (a 2 MiB
	 * leaf at GPA 1 GiB - 2 MiB, where RAM is smaller): the VMM's policy
	 * reads all ones and ignores writes (run.c) */
	testq $KL_P_HOSTILE, KLP_FLAGS(%r15)
	jz 9f
	in $0x61, %al
	mov $0x1234, %edx
	in %dx, %eax
	in $KL_PORT_REPORT, %eax
	cmpq $0x3fe00000, KLP_RAM(%r15)
	ja 9f
	mov $(KL_GUEST_PT + 0x2000 + 511 * 8), %rdi
	movq $(0x3fe00000 | 0x83), (%rdi)	/* P|RW|PS */
	invlpg 0x3fe00000
	mov 0x3fe00000, %rax
	movl $0x12345678, 0x3fe00010
	movq $0, (%rdi)
	invlpg 0x3fe00000
9:
	tsc %rbx
	sub %r14, %rbx
	report0 KL_EV_SETUP

	/* To CPL 3: SS, RSP, RFLAGS (IOPL 0, IF off), CS, RIP. */
	pushq $KL_SEL_UDATA
	pushq $KL_USTACK_TOP
	pushq $0x0002
	pushq $KL_SEL_UCODE
	lea user_main(%rip), %rax
	push %rax
	iretq

/* Write the IDT gate at rdi: handler rsi, type/attributes r9 (bits 40-47);
 * clobbers rax, rdx. */
set_gate:
	mov %rsi, %rdx
	and $0xffff, %edx
	or $(KL_SEL_KCODE << 16), %rdx
	or %r9, %rdx
	mov %rsi, %rax
	shr $16, %rax
	and $0xffff, %rax
	shl $48, %rax
	or %rax, %rdx
	mov %rdx, (%rdi)
	mov %rsi, %rdx
	shr $32, %rdx
	mov %rdx, 8(%rdi)
	ret

	.balign 16
isr_stubs:
	.set vec, 0
	.rept 32
	.balign 16
	pushq $vec
	jmp isr_common
	.set vec, vec + 1
	.endr
	.balign 16
isr_common:
	/* eax: vector; rbx, rcx, rdx: the next stack words (error code or
	 * RIP, CS or RIP, ...). The VMM prints them and stops. */
	mov (%rsp), %rax
	mov 8(%rsp), %rbx
	mov 16(%rsp), %rcx
	mov 24(%rsp), %rdx
	out %eax, $KL_PORT_FAULT
9:	hlt
	jmp 9b

	/* int3 from CPL 3: the only port I/O on its behalf. The VMM handles
	 * the exit (and may save and restore the vCPU here, for the
	 * checkpoint); iretq returns past the int3 with every register but
	 * rdx as the caller left it. */
	/* #UD at avx_probe: CPUID offered AVX and XCR0 has it, but the CPU
	 * does not run it (qemu 7.2's TCG for a nested guest): no AVX, and on
	 * past the 4-byte probe. Any other #UD is the guest's exception. */
	.balign 16
ud_stub:
	push %rax
	lea avx_probe(%rip), %rax
	cmp %rax, 8(%rsp)
	pop %rax
	jne 1f
	addq $4, (%rsp)
	movq $0, avx_on(%rip)
	movq $KL_VS_NOAVX_UD, avx_why(%rip)
	iretq
1:	pushq $6
	jmp isr_common

	.balign 16
vmm_call:
	cmp $KL_PORT_CHECKPOINT, %edx
	je cp_call
	out %eax, %dx
	iretq

/* The checkpoint, at CPL 0: set the state only CPL 0 can (MSRs, debug
 * registers) to values a new vCPU would not have, note the TSC and the
 * KL_CPUID_LEAF, stop for the VMM, then check each after the restore and
 * report KL_EV_VSTATE (rbx = checked << 32 | differing). Every register
 * but rdx is the caller's again at the iretq. */
cp_call:
	push %rax
	push %rbx
	push %rcx
	push %rsi
	push %rdi
	push %r8
	push %r9
	lea cp_data(%rip), %rsi
	movq $(KL_VS_STAR | KL_VS_LSTAR | KL_VS_CSTAR | KL_VS_SFMASK | KL_VS_KGSBASE | KL_VS_PAT | KL_VS_DR0_3 | KL_VS_DR7 | KL_VS_TSC | KL_VS_CPUID), CPD_CHECKED(%rsi)
	/* TSC_AUX exists for the guest when CPUID has RDTSCP or RDPID */
	mov $0x80000001, %eax
	xor %ecx, %ecx
	cpuid
	bt $27, %edx
	jc 1f
	mov $7, %eax
	xor %ecx, %ecx
	cpuid
	bt $22, %ecx
	jnc 2f
1:	orq $KL_VS_TSC_AUX, CPD_CHECKED(%rsi)
2:	lea cp_msrs(%rip), %rdi
3:	mov (%rdi), %ecx			/* MSR index, 0 ends */
	test %ecx, %ecx
	jz 5f
	cmp $0xc0000103, %ecx
	jne 4f
	testq $KL_VS_TSC_AUX, CPD_CHECKED(%rsi)
	jz 6f
4:	mov 8(%rdi), %eax
	mov 12(%rdi), %edx
	wrmsr
6:	add $16, %rdi
	jmp 3b
5:	mov $0x1000, %rax
	mov %rax, %dr0
	mov $0x2008, %rax
	mov %rax, %dr1
	mov $0x3010, %rax
	mov %rax, %dr2
	mov $0x4018, %rax
	mov %rax, %dr3
	mov $CP_DR7, %rax
	mov %rax, %dr7
	mov $KL_CPUID_LEAF, %eax
	xor %ecx, %ecx
	cpuid
	mov %ebx, CPD_CPUID(%rsi)
	mov %ecx, CPD_CPUID+4(%rsi)
	mov %eax, CPD_CPUID+8(%rsi)
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, CPD_TSC(%rsi)

	mov $KL_PORT_CHECKPOINT, %edx
	out %eax, %dx
	/* restored (or not snapshotted at all): check */

	lea cp_data(%rip), %rsi
	xor %r8d, %r8d				/* differing */
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	cmp CPD_TSC(%rsi), %rax
	jae 1f
	or $KL_VS_TSC, %r8
1:	lea cp_msrs(%rip), %rdi
3:	mov (%rdi), %ecx
	test %ecx, %ecx
	jz 5f
	cmp $0xc0000103, %ecx
	jne 4f
	testq $KL_VS_TSC_AUX, CPD_CHECKED(%rsi)
	jz 6f
4:	rdmsr
	cmp 8(%rdi), %eax
	jne 7f
	cmp 12(%rdi), %edx
	je 6f
7:	mov 4(%rdi), %eax			/* its KL_VS_ bit */
	or %rax, %r8
6:	add $16, %rdi
	jmp 3b
5:	xor %r9d, %r9d
	mov %dr0, %rax
	cmp $0x1000, %rax
	setne %r9b
	mov %dr1, %rax
	cmp $0x2008, %rax
	setne %al
	or %al, %r9b
	mov %dr2, %rax
	cmp $0x3010, %rax
	setne %al
	or %al, %r9b
	mov %dr3, %rax
	cmp $0x4018, %rax
	setne %al
	or %al, %r9b
	test %r9b, %r9b
	jz 1f
	or $KL_VS_DR0_3, %r8
1:	mov %dr7, %rax
	and $CP_DR7, %rax
	cmp $CP_DR7, %rax
	je 1f
	or $KL_VS_DR7, %r8
1:	mov $KL_CPUID_LEAF, %eax
	xor %ecx, %ecx
	cpuid
	cmp CPD_CPUID(%rsi), %ebx
	jne 2f
	cmp CPD_CPUID+4(%rsi), %ecx
	jne 2f
	cmp CPD_CPUID+8(%rsi), %eax
	jne 2f
	cmp $KL_CPUID_SIG, %eax
	je 1f
2:	or $KL_VS_CPUID, %r8
1:	mov CPD_CHECKED(%rsi), %rbx
	shl $32, %rbx
	or %r8, %rbx
	mov $KL_EV_VSTATE, %eax
	out %eax, $KL_PORT_REPORT
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rcx
	pop %rbx
	pop %rax
	iretq

/* MSR, its KL_VS_ bit, the value the guest sets: none of them a reset
 * value. PAT: entries 0-3 as at reset (the page tables use entry 0, WB),
 * entries 6 and 7 changed. LSTAR/CSTAR canonical, never called. */
	.balign 16
cp_msrs:
	.long 0xc0000081, KL_VS_STAR
	.quad 0x001b000800000000
	.long 0xc0000082, KL_VS_LSTAR
	.quad 0xffffffff81234560
	.long 0xc0000083, KL_VS_CSTAR
	.quad 0xffffffff81234580
	.long 0xc0000084, KL_VS_SFMASK
	.quad 0x47700
	.long 0xc0000102, KL_VS_KGSBASE
	.quad 0x00007fffdeadb000
	.long 0x277, KL_VS_PAT
	.quad 0x0105040600070406
	.long 0xc0000103, KL_VS_TSC_AUX
	.quad 0x2a
	.long 0, 0
	.quad 0

/* ---------------- CPL 3 ---------------- */
	.globl kl_guest_user_start
	.globl kl_guest_user_end
kl_guest_user_start:

/* rdi start, rcx bytes, rax pattern -> rbx tsc cycles of the rep stosq */
fill:
	push %rax
	tsc %r14
	pop %rax
	shr $3, %rcx
	rep stosq
	tsc %rbx
	sub %r14, %rbx
	ret

/* rdi start, rsi bytes -> rbx checksum; the same loop as kl_checksum() */
checksum:
	xor %ebx, %ebx
	movabs $0x9e3779b97f4a7c15, %r11
	shr $3, %rsi
	jz 2f
1:	xor (%rdi), %rbx
	imul %r11, %rbx
	add $8, %rdi
	dec %rsi
	jnz 1b
2:	ret

/* eax: 0 release lazily, 1 release and reclaim; then acquire and refill */
fpr_round:
	mov KLP_FPR(%r15), %rbx
	mov KLP_FPR_LEN(%r15), %rsi
	vmm KL_PORT_FREE
	mov KLP_FPR(%r15), %rbx
	mov KLP_FPR_LEN(%r15), %rsi
	vmm KL_PORT_ACQUIRE
	mov KLP_FPR(%r15), %rdi
	mov KLP_FPR_LEN(%r15), %rcx
	mov %r8, %rax
	jmp fill

/* ymm0-15 = their patterns, where the CPL 0 setup turned AVX on */
ymm_set:
	cmpq $0, avx_on(%rip)
	je 1f
	.irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	vbroadcastsd ymm_pat+8*\n(%rip), %ymm\n
	.endr
1:	ret

/* After the restore: rbx = checked << 32 | differing (KL_VS_XCR0,
 * KL_VS_YMM); without AVX, nothing checked: rbx = why << 32
 * (KL_VS_NOAVX_*). Clobbers rax, rcx, rdx. */
ymm_check:
	mov avx_why(%rip), %rbx
	shl $32, %rbx
	cmpq $0, avx_on(%rip)
	je 9f
	xor %ebx, %ebx
	xor %ecx, %ecx
	xgetbv
	and $7, %eax
	cmp $7, %eax
	je 1f
	or $KL_VS_XCR0, %ebx
	jmp 8f				/* no AVX state: ymm would #UD */
1:	sub $32, %rsp
	.irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	vmovdqu %ymm\n, (%rsp)
	mov ymm_pat+8*\n(%rip), %rax
	xor %ecx, %ecx
	.irp q, 0,8,16,24
	cmp \q(%rsp), %rax
	setne %dl
	or %dl, %cl
	.endr
	test %cl, %cl
	jz 2f
	or $KL_VS_YMM, %ebx
2:
	.endr
	add $32, %rsp
8:	movabs $((KL_VS_XCR0 | KL_VS_YMM) << 32), %rax
	or %rax, %rbx
9:	ret

/* --test-hostile: requests no VMM may act on. Each must come back with
 * rax = -EINVAL (or, for a port nobody serves, be ignored); rbx = how
 * many were refused as the guest saw it, reported as KL_EV_HOSTILE. */
hostile:
	xor %r9d, %r9d
	lea hostile_reqs(%rip), %r10
1:	mov (%r10), %edx			/* port, 0 ends */
	test %edx, %edx
	jz 3f
	mov 8(%r10), %rbx
	mov 16(%r10), %rsi
	mov 24(%r10), %rax
	int3
	cmp $-22, %rax				/* -EINVAL */
	jne 2f
	inc %r9
2:	add $32, %r10
	jmp 1b
3:	mov %r9, %rbx
	report KL_EV_HOSTILE
	ret

user_main:
	mov $KL_PARAMS, %r15
	cmpq $0, avx_on(%rip)
	je 1f
avx_probe:
	vxorps %ymm0, %ymm0, %ymm0	/* 4 bytes; ud_stub skips it on #UD */
1:	testq $KL_P_UD2, KLP_FLAGS(%r15)
	jz 1f
	ud2
1:	testq $KL_P_HANG, KLP_FLAGS(%r15)
	jz 1f
2:	pause
	jmp 2b					/* never exits: the watchdog's case */
1:	testq $KL_P_HOSTILE, KLP_FLAGS(%r15)
	jz 1f
	call hostile
1:
	mov KLP_DATA(%r15), %r12
	mov KLP_DATA_LEN(%r15), %r13

	mov %r12, %rdi
	mov %r13, %rcx
	movabs $0x1111111111111111, %rax
	call fill
	report KL_EV_MEMSET1

	mov %r12, %rdi
	mov %r13, %rcx
	movabs $0x2222222222222222, %rax
	call fill
	report KL_EV_MEMSET2

	/* one byte per 4 KiB page, stride_reps passes */
	tsc %r14
	mov KLP_STRIDE_REPS(%r15), %r8
	test %r8, %r8
	jz 12f
10:	mov %r12, %rdi
	lea (%r12,%r13), %rsi
11:	incb (%rdi)
	add $4096, %rdi
	cmp %rsi, %rdi
	jb 11b
	dec %r8
	jnz 10b
12:	tsc %rbx
	sub %r14, %rbx
	report KL_EV_STRIDE

	/* xorshift64: add x to a random 8-byte word, rand_iters times */
	tsc %r14
	mov KLP_SEED(%r15), %r9
	mov KLP_RAND_ITERS(%r15), %r8
	mov %r13, %r10
	shr $3, %r10
	test %r8, %r8
	jz 14f
13:	mov %r9, %rax
	shl $13, %rax
	xor %rax, %r9
	mov %r9, %rax
	shr $7, %rax
	xor %rax, %r9
	mov %r9, %rax
	shl $17, %rax
	xor %rax, %r9
	mov %r9, %rax
	shr $32, %rax
	mul %r10			/* (x >> 32) * words < 2^64 */
	shr $32, %rax
	add %r9, (%r12,%rax,8)
	dec %r8
	jnz 13b
14:	tsc %rbx
	sub %r14, %rbx
	report KL_EV_RANDOM

	mov %r12, %rdi
	mov %r13, %rsi
	call checksum
	report KL_EV_CHECKSUM

	testq $KL_P_FPR, KLP_FLAGS(%r15)
	jz 20f
	mov KLP_FPR(%r15), %rdi
	mov KLP_FPR_LEN(%r15), %rcx
	movabs $0x3333333333333333, %rax
	call fill
	report KL_EV_FPR_WARM
	movabs $0x4444444444444444, %r8
	xor %eax, %eax
	call fpr_round
	report KL_EV_FPR_LAZY
	movabs $0x5555555555555555, %r8
	mov $1, %eax
	call fpr_round
	report KL_EV_FPR_RECLAIMED
	mov %r12, %rdi
	mov %r13, %rsi
	call checksum
	report KL_EV_CHECKSUM_FPR

20:	testq $KL_P_CHECKPOINT, KLP_FLAGS(%r15)
	jz 21f
	call ymm_set
	vmm KL_PORT_CHECKPOINT
	call ymm_check
	report KL_EV_VSTATE_USER
	/* Read one word per 4 KiB of the data area from the top down, the
	 * opposite of the file order a lazy restore (--restore-lazy) fills
	 * in: pages the guest touches ahead of the fill are demand loads,
	 * which the VMM counts. Then the checksum reads all of it. */
	lea (%r12,%r13), %rdi
23:	sub $4096, %rdi
	mov (%rdi), %rax
	cmp %r12, %rdi
	ja 23b
	mov %r12, %rdi
	mov %r13, %rsi
	call checksum
	report KL_EV_CHECKSUM_RESTORED

21:	vmm KL_PORT_DONE
22:	jmp 22b
kl_guest_user_end:

	.balign 8
avx_on:	.quad 0
avx_why: .quad 0	/* KL_VS_NOAVX_*: why avx_on is 0 */
/* the checkpoint's notes (cp_call) */
cp_data:
	.quad 0		/* CPD_CHECKED */
	.quad 0		/* CPD_TSC */
	.quad 0, 0	/* CPD_CPUID: ebx, ecx, eax */
ymm_pat:
	.irp n, 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16
	.quad 0x0101010101010101 * \n ^ 0x8040201008040201
	.endr
/* port, rbx (gpa), rsi (len), rax: each one refused with -EINVAL but the
 * ports nobody serves (ignored: rax comes back unchanged, 0) */
hostile_reqs:
	.quad KL_PORT_FREE, 0, 0x200000, 0		/* the VMM's page tables, setup */
	.quad KL_PORT_FREE, 0x7ffffffffffff000, 0x2000, 0	/* far outside RAM */
	.quad KL_PORT_FREE, 0x400000, 0xfffffffffffff000, 0	/* wraps around */
	.quad KL_PORT_FREE, 0x400000, 0, 0		/* empty */
	.quad KL_PORT_FREE, 0x400001, 0x200000, 1	/* not page aligned */
	.quad KL_PORT_ACQUIRE, 0x400000, 0x1001, 0	/* not page aligned */
	.quad KL_PORT_ACQUIRE, 0xffffffffffe00000, 0x200000, 0	/* beyond */
	.quad KL_PORT_FREE, KL_KEEP_REC, 0x1000, 0	/* the checkpoint record */
	.quad 0x1234, 0x400000, 0x200000, 0		/* nobody's port */
	.quad 0x80, 0, 0, 0				/* POST code port */
	.quad 0, 0, 0, 0

	.balign 16
gdt:
	.quad 0
	.quad 0x00af9a000000ffff	/* 0x08 CPL 0 code, 64-bit */
	.quad 0x00cf92000000ffff	/* 0x10 CPL 0 data */
	.quad 0x00cff2000000ffff	/* 0x18 CPL 3 data */
	.quad 0x00affa000000ffff	/* 0x20 CPL 3 code, 64-bit */
	.quad (0x67 | ((KL_TSS & 0xffff) << 16) | (((KL_TSS >> 16) & 0xff) << 32) | (0x89 << 40) | (((KL_TSS >> 24) & 0xff) << 56))
	.quad 0				/* 0x28 TSS, 16 bytes */
gdt_end:
kl_guest_end:
