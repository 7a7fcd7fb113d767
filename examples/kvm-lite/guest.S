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
	mov $(KL_IDT + 3 * 16), %rdi
	lea vmm_call(%rip), %rsi
	movabs $0x0000ee0000000000, %r9	/* present, DPL 3, 64-bit int gate */
	call set_gate
	sub $16, %rsp
	movw $(32 * 16 - 1), (%rsp)
	movq $KL_IDT, 2(%rsp)
	lidt (%rsp)
	add $16, %rsp

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
	.balign 16
vmm_call:
	out %eax, %dx
	iretq

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

user_main:
	mov $KL_PARAMS, %r15
	testq $KL_P_UD2, KLP_FLAGS(%r15)
	jz 1f
	ud2
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
	vmm KL_PORT_CHECKPOINT
	mov %r12, %rdi
	mov %r13, %rsi
	call checksum
	report KL_EV_CHECKSUM_RESTORED

21:	vmm KL_PORT_DONE
22:	jmp 22b
kl_guest_user_end:

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
