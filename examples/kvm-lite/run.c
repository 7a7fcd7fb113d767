/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: one guest run (see run.h). The guest talks to the VMM only by
 * `out` from its CPL 0 code (guest.S); each port has a handler here. Every
 * value the guest hands over (ranges to release or reuse) is checked
 * against its RAM before it reaches hpregion or host memory: a bad one is
 * refused with rax = -EINVAL for the guest to see, and the run goes on.
 */
#define _GNU_SOURCE
#include "run.h"
#include "keep.h"
#include "kvm.h"
#include "vcpustate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

extern const unsigned char kl_guest_start[], kl_guest_end[];

/* One run in progress: what the exit handlers share. */
struct guest {
	const struct kl_opts *o;
	int kvm;
	const struct kl_layout *l;
	unsigned flags; /* KL_P_* given to the guest */
	struct kl_vm v;
	struct kl_ram *ram;
	struct kl_result *res;
	uint64_t before_snap; /* the guest's last checksum before the snapshot */
	struct kvm_regs g;    /* registers at this exit */
};

enum { GO_ON = 0, DONE = 1, STOPPED = 2 };

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

const char *kl_ev_name(unsigned ev)
{
	static const char *const n[] = { "?", "setup", "memset1", "memset2", "stride",
					 "random", "checksum", "fpr-warm", "fpr-lazy",
					 "fpr-reclaimed", "checksum-fpr", "checksum-restored" };
	return ev < sizeof(n) / sizeof(n[0]) ? n[ev] : "?";
}

static void load_guest(const struct guest *gu)
{
	const struct kl_layout *l = gu->l;
	struct kl_params p = {
		.ram = l->ram,
		.flags = gu->flags,
		.pt_bytes = l->pt_bytes,
		.data = l->data,
		.data_len = l->data_len,
		.stride_reps = gu->o->stride_reps,
		.rand_iters = gu->o->rand_iters,
		.seed = 0x2545f4914f6cdd1dull,
		.fpr = l->fpr,
		.fpr_len = l->fpr_len,
	};
	char *ram = gu->ram->base;

	kl_boot_pt_build(ram, l->ram);
	memcpy(ram + KL_PARAMS, &p, sizeof(p));
	memcpy(ram + KL_CODE, kl_guest_start, (size_t)(kl_guest_end - kl_guest_start));
}

static void dump_regs(struct kl_vm *v)
{
	struct kvm_regs g;
	struct kvm_sregs s;

	if (!ioctl(v->vcpu, KVM_GET_REGS, &g) && !ioctl(v->vcpu, KVM_GET_SREGS, &s))
		fprintf(stderr,
			"  rip %#llx rsp %#llx rax %#llx rbx %#llx rcx %#llx rflags %#llx\n"
			"  cs %#x cr0 %#llx cr3 %#llx cr4 %#llx efer %#llx\n",
			g.rip, g.rsp, g.rax, g.rbx, g.rcx, g.rflags, s.cs.selector, s.cr0, s.cr3,
			s.cr4, s.efer);
}

/* A range the guest asks the VMM to act on: inside its RAM, no overflow. */
static bool guest_range_ok(const struct guest *gu, uint64_t gpa, uint64_t len)
{
	return len && gpa < gu->l->ram && len <= gu->l->ram - gpa;
}

/* Refuse a guest request: -EINVAL in its rax, and go on. */
static int refuse(struct guest *gu, const char *what)
{
	fprintf(stderr, "kvm-lite: guest %s [%#llx, +%#llx) is outside its RAM: refused\n", what,
		gu->g.rbx, gu->g.rsi);
	gu->res->bad_requests++;
	gu->g.rax = (uint64_t)(int64_t)-EINVAL;
	return ioctl(gu->v.vcpu, KVM_SET_REGS, &gu->g) < 0 ? -errno : GO_ON;
}

static int on_report(struct guest *gu)
{
	struct kl_result *res = gu->res;
	unsigned ev = (unsigned)gu->g.rax;
	uint64_t val = gu->g.rbx;

	if (gu->o->verbose)
		fprintf(stderr, "  guest: %-17s %llu\n", kl_ev_name(ev), (unsigned long long)val);
	if (ev >= KL_NEV)
		return GO_ON;
	res->ev[ev] = val;
	res->have[ev] = true;
	if (ev == KL_EV_CHECKSUM || ev == KL_EV_CHECKSUM_FPR || ev == KL_EV_CHECKSUM_RESTORED) {
		uint64_t h = kl_checksum(gu->ram->base, gu->l->data, gu->l->data_len);

		if (h != val) {
			res->sum_mismatch++;
			fprintf(stderr, "kvm-lite: %s: guest says %#llx, host view of guest RAM %#llx\n",
				kl_ev_name(ev), (unsigned long long)val, (unsigned long long)h);
		}
	}
	if (ev == KL_EV_CHECKSUM_RESTORED && val != gu->before_snap)
		res->restored_mismatch++;
	return GO_ON;
}

/* Free page reporting: rax 0 release lazily, 1 also reclaim; rbx, rsi. */
static int on_free(struct guest *gu)
{
	int k = gu->g.rax ? 1 : 0, rc;
	double t = now_ms();

	if (!guest_range_ok(gu, gu->g.rbx, gu->g.rsi))
		return refuse(gu, "free page report");
	rc = kl_ram_report_free(gu->ram, gu->g.rbx, gu->g.rsi, k);
	gu->res->release_ms[k] = now_ms() - t;
	if (!rc && !k)
		gu->res->lazy_after_release = kl_ram_lazy(gu->ram);
	return rc;
}

static int on_acquire(struct guest *gu)
{
	double t = now_ms();
	int rc;

	if (!guest_range_ok(gu, gu->g.rbx, gu->g.rsi))
		return refuse(gu, "reuse request");
	rc = kl_ram_acquire(gu->ram, gu->g.rbx, gu->g.rsi);
	gu->res->acquire_ms[gu->g.rax ? 1 : 0] = now_ms() - t;
	return rc;
}

static int open_snapshot_file(const char *prefix, const char *ext, char *path, size_t len)
{
	int fd;

	snprintf(path, len, "%s.%s", prefix, ext);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		fprintf(stderr, "kvm-lite: %s: %s\n", path, strerror(errno));
	return fd < 0 ? -errno : fd;
}

/* Save RAM and vCPU to the two files. */
static int save_vm(struct guest *gu, int rfd, int vfd)
{
	struct kl_vcpu_state st;
	double t;
	int rc;

	memset(&st, 0, sizeof(st));
	if ((rc = kl_vcpu_save(&gu->v, &st))) {
		fprintf(stderr, "kvm-lite: saving the vCPU: %s\n", strerror(-rc));
		return rc;
	}
	st.ram = gu->l->ram;
	st.guest_page = (uint32_t)gu->l->guest_page;
	st.flags = gu->flags;
	t = now_ms();
	rc = kl_ram_save(gu->ram, rfd);
	gu->res->save_ms = now_ms() - t;
	if (rc)
		return rc;
	if ((rc = kl_vcpu_state_write(vfd, &st)))
		fprintf(stderr, "kvm-lite: writing the vCPU file: %s\n", strerror(-rc));
	return rc;
}

/* Create a new VM on new RAM of backing b from the two files. */
static int restore_vm(struct guest *gu, enum kl_backing b, int rfd, int vfd)
{
	struct kl_vcpu_state back;
	struct kl_ram r2;
	double t;
	int rc;

	if ((rc = kl_ram_create(&r2, b, gu->l->ram, &gu->o->ram_opts)))
		return rc;
	gu->res->restored_backing = b;
	gu->res->restored_page = hpr_page_size(r2.r);
	t = now_ms();
	rc = kl_ram_load(&r2, rfd);
	gu->res->load_ms = now_ms() - t;
	if (!rc && (rc = kl_vcpu_state_read(vfd, &back, NULL)))
		fprintf(stderr, "kvm-lite: reading the vCPU file: %s\n", strerror(-rc));
	if (!rc && (back.ram != gu->l->ram || back.guest_page != gu->l->guest_page)) {
		rc = -EINVAL;
		fprintf(stderr, "kvm-lite: the vCPU file is for another guest\n");
	}
	if (!rc && ((rc = kl_vm_create(&gu->v, gu->kvm, r2.base, gu->l->ram)) ||
		    (rc = kl_vcpu_load(&gu->v, &back))))
		fprintf(stderr, "kvm-lite: restoring the VM: %s\n", strerror(-rc));
	if (rc) {
		kl_ram_destroy(&r2);
		return rc;
	}
	*gu->ram = r2;
	return 0;
}

/* --keep: a new VM on the kept RAM, the vCPU as PREFIX.vcpu holds it, the
 * record RUNNING; what it took is the restore time. */
static int resume_vm(struct guest *gu)
{
	struct kl_keep_run *k = gu->o->keep_run;
	double t = now_ms();
	int rc;

	if ((rc = kl_vm_create(&gu->v, gu->kvm, gu->ram->base, gu->l->ram)) ||
	    (rc = kl_vcpu_load(&gu->v, &k->vcpu))) {
		fprintf(stderr, "kvm-lite: restoring the VM on kept RAM: %s\n", strerror(-rc));
		return rc;
	}
	k->restore_ms = now_ms() - t;
	gu->before_snap = k->rec.guest_sum;
	gu->res->restored = true;
	gu->res->restored_backing = gu->ram->backing;
	gu->res->restored_page = hpr_page_size(gu->ram->r);
	kl_keep_running(gu->ram);
	kl_keep_print(gu->o, gu->ram);
	return 0;
}

static void sleep_s(double s)
{
	struct timespec t = { .tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

/* --keep at the checkpoint: the vCPU to PREFIX.vcpu, the record STOPPED.
 * With --checkpoint-pause: wait there (a kill -9 now leaves a resumable
 * stop) and end the run. Without: the VMM lets go of VM and RAM and
 * re-attaches to the kept file as a new VMM would, in this process. */
static int keep_checkpoint(struct guest *gu)
{
	struct kl_vcpu_state st;
	int rc;

	memset(&st, 0, sizeof(st));
	if ((rc = kl_vcpu_save(&gu->v, &st))) {
		fprintf(stderr, "kvm-lite: saving the vCPU: %s\n", strerror(-rc));
		return rc;
	}
	st.ram = gu->l->ram;
	st.guest_page = (uint32_t)gu->l->guest_page;
	st.flags = gu->flags;
	if ((rc = kl_keep_stop(gu->o, gu->ram, &st, gu->before_snap)))
		return rc;
	if (gu->o->pause_s >= 0) {
		printf("checkpoint: pausing %.0f s (pid %d); kill -9 it now or let it stop\n",
		       gu->o->pause_s, (int)getpid());
		fflush(stdout);
		sleep_s(gu->o->pause_s);
		gu->res->stopped = true;
		return STOPPED;
	}
	kl_vm_destroy(&gu->v);
	kl_ram_destroy(gu->ram);
	gu->o->keep_run->reattaches++;
	if ((rc = kl_keep_open(gu->o, gu->l, gu->ram)))
		return rc;
	return resume_vm(gu);
}

/* Pause at the checkpoint: save RAM and vCPU, throw the VM and its RAM
 * away, restore both into new ones and resume. */
static int on_checkpoint(struct guest *gu)
{
	struct kl_result *res = gu->res;
	char path[4096];
	int rfd, vfd, rc;

	if (!gu->o->snapshot)
		return GO_ON;
	gu->before_snap = res->ev[KL_EV_CHECKSUM_FPR] ? res->ev[KL_EV_CHECKSUM_FPR]
						      : res->ev[KL_EV_CHECKSUM];
	if (gu->o->keep)
		return keep_checkpoint(gu);
	if ((rfd = open_snapshot_file(gu->o->snapshot, "ram", path, sizeof(path))) < 0)
		return rfd;
	if ((vfd = open_snapshot_file(gu->o->snapshot, "vcpu", path, sizeof(path))) < 0) {
		close(rfd);
		return vfd;
	}
	rc = save_vm(gu, rfd, vfd);
	if (!rc) {
		/* The old VM and RAM are gone before the new ones exist:
		 * nothing of the first run survives except the two files.
		 * The new RAM has the old one's backing (read before
		 * kl_ram_destroy() clears it). */
		enum kl_backing b = gu->ram->backing;

		kl_vm_destroy(&gu->v);
		kl_ram_destroy(gu->ram);
		rc = restore_vm(gu, b, rfd, vfd);
		res->restored = !rc;
	}
	close(rfd);
	close(vfd);
	return rc;
}

/* The guest's exception stub: eax vector; rbx, rcx, rdx the stack words
 * (error code or RIP first). */
static int on_fault(struct guest *gu)
{
	unsigned vec = gu->g.rax & 0xff;
	bool err_code = vec == 8 || (vec >= 10 && vec <= 14) || vec == 17;

	fprintf(stderr, "kvm-lite: guest exception %u%s at CPL %llu (stack: %#llx %#llx %#llx)\n",
		vec,
		vec == 6    ? " (#UD)"
		: vec == 13 ? " (#GP)"
		: vec == 14 ? " (#PF)"
			    : "",
		(err_code ? gu->g.rdx : gu->g.rcx) & 3, gu->g.rbx, gu->g.rcx, gu->g.rdx);
	dump_regs(&gu->v);
	return -EFAULT;
}

static int on_io(struct guest *gu)
{
	struct kvm_run *run = gu->v.run;

	if (run->io.port == KL_PORT_DONE)
		return DONE;
	if (ioctl(gu->v.vcpu, KVM_GET_REGS, &gu->g) < 0)
		return -errno;
	switch (run->io.port) {
	case KL_PORT_REPORT:
		return on_report(gu);
	case KL_PORT_FREE:
		return on_free(gu);
	case KL_PORT_ACQUIRE:
		return on_acquire(gu);
	case KL_PORT_CHECKPOINT:
		return on_checkpoint(gu);
	case KL_PORT_FAULT:
		return on_fault(gu);
	default:
		fprintf(stderr, "kvm-lite: out to unknown port %#x\n", run->io.port);
		return -EIO;
	}
}

/* Any exit but an `out`: the guest program never causes one. */
static int on_unexpected(struct guest *gu)
{
	struct kvm_run *run = gu->v.run;

	fprintf(stderr, "kvm-lite: unexpected exit %u", run->exit_reason);
	if (run->exit_reason == KVM_EXIT_FAIL_ENTRY)
		fprintf(stderr, " (entry failure %#llx)",
			(unsigned long long)run->fail_entry.hardware_entry_failure_reason);
	else if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR)
		fprintf(stderr, " (internal error %u)", run->internal.suberror);
	else if (run->exit_reason == KVM_EXIT_MMIO)
		fprintf(stderr, " (MMIO at %#llx: outside guest RAM)",
			(unsigned long long)run->mmio.phys_addr);
	else if (run->exit_reason == KVM_EXIT_SHUTDOWN)
		fprintf(stderr, " (shutdown: triple fault)");
	else if (run->exit_reason == KVM_EXIT_IO)
		fprintf(stderr, " (in from port %#x)", run->io.port);
	fprintf(stderr, "\n");
	dump_regs(&gu->v);
	return -EIO;
}

/* Run the vCPU until the guest says DONE or something fails. */
static int run_vcpu(struct guest *gu)
{
	for (;;) {
		int rc;

		if (ioctl(gu->v.vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			fprintf(stderr, "kvm-lite: KVM_RUN: %s\n", strerror(errno));
			dump_regs(&gu->v);
			return rc;
		}
		if (gu->v.run->exit_reason == KVM_EXIT_IO &&
		    gu->v.run->io.direction == KVM_EXIT_IO_OUT)
			rc = on_io(gu);
		else
			rc = on_unexpected(gu);
		if (rc)
			return rc == DONE || rc == STOPPED ? 0 : rc;
	}
}

/* What did the guest really build? Walk its CR3 over the data area. */
static size_t guest_leaf(struct guest *gu)
{
	struct kvm_sregs s;
	uint64_t pa;
	size_t leaf = 0;
	int user = 0;
	uint64_t va = gu->l->data + 4096;

	if (!ioctl(gu->v.vcpu, KVM_GET_SREGS, &s) &&
	    !kl_pt_walk(gu->ram->base, gu->l->ram, s.cr3, va, &pa, &leaf, &user) && pa == va &&
	    user)
		return leaf;
	return 0;
}

int kl_run_guest(const struct kl_opts *o, int kvm, const struct kl_layout *l, struct kl_ram *ram,
		 struct kl_result *res)
{
	struct guest gu = {
		.o = o,
		.kvm = kvm,
		.l = l,
		.flags = (l->guest_page == 4096 ? 0 : KL_P_GUEST_2M) | (o->fpr ? KL_P_FPR : 0) |
			 (o->snapshot ? KL_P_CHECKPOINT : 0) | (o->ud2 ? KL_P_UD2 : 0),
		.ram = ram,
		.res = res,
	};
	int rc;

	memset(res, 0, sizeof(*res));
	gu.v.vm = gu.v.vcpu = -1;
	if (o->keep && o->keep_run->resume) {
		/* kept RAM, attached, checked and faulted in (kl_keep_open) */
		rc = resume_vm(&gu);
	} else {
		if ((rc = kl_ram_prefault(ram, &res->prefault_ms)))
			return rc;
		load_guest(&gu);
		if (o->keep)
			kl_keep_boot(o, l, ram);
		if ((rc = kl_vm_create(&gu.v, kvm, ram->base, l->ram))) {
			fprintf(stderr, "kvm-lite: creating the VM: %s\n", strerror(-rc));
			return rc;
		}
		if ((rc = kl_vcpu_enter_long_mode(&gu.v, KL_CODE, KL_KSTACK_TOP)))
			fprintf(stderr, "kvm-lite: KVM_SET_SREGS (long mode): %s\n", strerror(-rc));
	}
	if (!rc && !(rc = run_vcpu(&gu))) {
		res->guest_leaf = guest_leaf(&gu);
		rc = kl_ram_stats(ram, &res->st);
	}
	kl_vm_destroy(&gu.v);
	return rc;
}

int kl_check_result(const struct kl_opts *o, const struct kl_result *res)
{
	bool resumed = o->keep && o->keep_run->resume && !o->keep_run->reattaches;

	if (res->sum_mismatch || !res->guest_leaf || res->bad_requests)
		return 1;
	/* a resumed guest starts past its measured loops */
	if (!resumed && !res->have[KL_EV_CHECKSUM])
		return 1;
	if (res->stopped)
		return 0;
	if (o->fpr && !resumed && !res->have[KL_EV_CHECKSUM_FPR])
		return 1;
	if (o->snapshot &&
	    (!res->restored || res->restored_mismatch || !res->have[KL_EV_CHECKSUM_RESTORED]))
		return 1;
	return 0;
}
