/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: one guest run (see run.h). The guest talks to the VMM only by
 * `out` from its CPL 0 code (guest.S); each exit reason has a handler
 * here, and each port of KL_PORT_* one under the I/O handler.
 *
 * What a guest may do to its VMM (README, "What a guest cannot do"):
 *  - every value it hands over is checked here before it reaches hpregion
 *    or host memory: a range to release or reuse lies in the guest's data
 *    area (never the VMM's page tables, parameters or checkpoint record),
 *    is page aligned for the RAM's host pages, non-empty, without
 *    overflow. A bad one is refused with rax = -EINVAL for the guest to
 *    see; an error of hpregion on a good one goes back as rax = -errno.
 *    Either way the run goes on.
 *  - `out` to a port nobody serves is ignored, `in` from any port reads
 *    all ones, MMIO outside RAM reads all ones and drops writes (as on a
 *    PC bus with nothing there); HLT is resumed (kvm-lite has no
 *    interrupts to wait for). Each is logged (the first few of a kind,
 *    then a count), never injected as a fault.
 *  - the guest's own exception report (KL_PORT_FAULT), a triple fault
 *    (SHUTDOWN), an entry failure, an internal error, a system event or
 *    an exit reason kvm-lite does not know end the run: logged with the
 *    registers, the VM and its RAM released, exit 1.
 *  - SIGINT, SIGTERM and the watchdog (kick.h) stop the guest from
 *    outside; the VM and RAM are released the same way.
 */
#define _GNU_SOURCE
#include "run.h"
#include "keep.h"
#include "kick.h"
#include "kvm.h"
#include "vcpustate.h"

#include <errno.h>
#include <stdarg.h>
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
	unsigned logged[8];   /* ignored exits logged, per kind (log_ignored) */
	double restore_t0;    /* --snapshot: when the restore began (now_ms) */
	enum rs_mark { RS_NONE, RS_ENTRY, RS_EXIT } rs_wait; /* the restore's next mark */
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
	static const char *const n[] = {
		"?",	      "setup",		 "memset1",	   "memset2",
		"stride",     "random",		 "checksum",	   "fpr-warm",
		"fpr-lazy",   "fpr-reclaimed",	 "checksum-fpr",   "checksum-restored",
		"vcpu-state", "vcpu-state-cpl3", "hostile-refused"
	};
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

/* A range the guest asks the VMM to act on: inside its data area (the
 * pages below it are the VMM's boot page tables, parameters, checkpoint
 * record and the guest's code and tables), non-empty, no overflow, and
 * whole host pages of the RAM (hugetlb cannot release part of one). */
static bool guest_range_ok(const struct guest *gu, uint64_t gpa, uint64_t len)
{
	uint64_t page = kl_ram_page(gu->ram);

	return len && gpa >= gu->l->data && gpa < gu->l->ram && len <= gu->l->ram - gpa &&
	       !(gpa % page) && !(len % page);
}

/* rax for the guest: 0 or -errno of its request. */
static int answer(struct guest *gu, int err)
{
	gu->g.rax = (uint64_t)(int64_t)err;
	return ioctl(gu->v.vcpu, KVM_SET_REGS, &gu->g) < 0 ? -errno : GO_ON;
}

/* Refuse a guest request: -EINVAL in its rax, and go on. */
static int refuse(struct guest *gu, const char *what)
{
	fprintf(stderr,
		"kvm-lite: guest %s [%#llx, +%#llx) is not whole %zu KiB pages of its data area "
		"[%#zx, %#zx): refused with -EINVAL\n",
		what, gu->g.rbx, gu->g.rsi, kl_ram_page(gu->ram) >> 10, gu->l->data, gu->l->ram);
	gu->res->bad_requests++;
	return answer(gu, -EINVAL);
}

/* Something the policy ignores: say the first few of a kind, count all. */
enum { IGN_PORT_OUT, IGN_PORT_IN, IGN_MMIO, IGN_HLT, IGN_REPORT, IGN_N };
static void log_ignored(struct guest *gu, unsigned kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void log_ignored(struct guest *gu, unsigned kind, const char *fmt, ...)
{
	va_list ap;

	gu->res->ignored++;
	if (gu->logged[kind]++ >= 4) {
		if (gu->logged[kind] == 5)
			fprintf(stderr, "kvm-lite: (more of these are ignored without a word)\n");
		return;
	}
	va_start(ap, fmt);
	fputs("kvm-lite: guest ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(": ignored\n", stderr);
	va_end(ap);
}

static int on_report(struct guest *gu)
{
	struct kl_result *res = gu->res;
	unsigned ev = (unsigned)gu->g.rax;
	uint64_t val = gu->g.rbx;

	if (gu->o->verbose)
		fprintf(stderr, "  guest: %-17s %llu\n", kl_ev_name(ev), (unsigned long long)val);
	if (ev >= KL_NEV || !ev) {
		log_ignored(gu, IGN_REPORT, "report of unknown event %#llx", gu->g.rax);
		return GO_ON;
	}
	res->ev[ev] = val;
	res->have[ev] = true;
	if (ev == KL_EV_CHECKSUM_RESTORED && gu->restore_t0 > 0)
		res->rs.sum = now_ms() - gu->restore_t0; /* before the VMM's own pass */
	if (ev == KL_EV_CHECKSUM || ev == KL_EV_CHECKSUM_FPR || ev == KL_EV_CHECKSUM_RESTORED) {
		uint64_t h = kl_checksum(gu->ram->base, gu->l->data, gu->l->data_len);

		if (h != val) {
			res->sum_mismatch++;
			fprintf(stderr,
				"kvm-lite: %s: guest says %#llx, host view of guest RAM %#llx\n",
				kl_ev_name(ev), (unsigned long long)val, (unsigned long long)h);
		}
	}
	if (ev == KL_EV_CHECKSUM_RESTORED && val != gu->before_snap)
		res->restored_mismatch++;
	if (ev == KL_EV_VSTATE || ev == KL_EV_VSTATE_USER)
		res->vstate_bad |= (val & 0xffffffffu) << (ev == KL_EV_VSTATE_USER ? 16 : 0);
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
	gu->res->host_errors += rc != 0;
	return answer(gu, rc);
}

static int on_acquire(struct guest *gu)
{
	double t = now_ms();
	int rc;

	if (!guest_range_ok(gu, gu->g.rbx, gu->g.rsi))
		return refuse(gu, "reuse request");
	rc = kl_ram_acquire(gu->ram, gu->g.rbx, gu->g.rsi);
	gu->res->acquire_ms[gu->g.rax ? 1 : 0] = now_ms() - t;
	gu->res->host_errors += rc != 0;
	return answer(gu, rc);
}

/* --test-restore-v2: what kvm-lite restored up to format 2 (regs, sregs,
 * fpu, the host's CPUID), to show that the guest's checks catch it. */
static const struct kl_vcpu_state *old_restore(const struct kl_vcpu_state *st)
{
	static struct kl_vcpu_state c;

	c = *st;
	c.have = 0;
	return &c;
}

/* A new VM on ram, kickable (kick.h); st: the vCPU to load, or NULL. */
static int new_vm(struct guest *gu, void *ram, const struct kl_vcpu_state *st)
{
	int rc;

	if ((rc = kl_vm_create(&gu->v, gu->kvm, ram, gu->l->ram)))
		return rc;
	if ((rc = kl_kick_setup(&gu->v)) ||
	    (st && (rc = kl_vcpu_load(&gu->v, gu->o->test_partial ? old_restore(st) : st)))) {
		kl_vm_destroy(&gu->v);
		return rc;
	}
	if (st && !gu->o->test_partial) {
		char d[160];

		if ((rc = kl_vcpu_verify(&gu->v, st, false))) {
			kl_vm_destroy(&gu->v);
			return rc;
		}
		kl_vcpu_describe(st, d, sizeof(d));
		printf("vCPU restored and read back equal: %s\n", d);
	}
	return 0;
}

/* The VM goes; no signal may kick its kvm_run any more. */
static void drop_vm(struct guest *gu)
{
	kl_kick_target(NULL);
	kl_vm_destroy(&gu->v);
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

/* The vCPU's whole state, with the RAM's shape, for a .vcpu file. */
static int vcpu_state(struct guest *gu, struct kl_vcpu_state *st)
{
	int rc;

	memset(st, 0, sizeof(*st));
	if ((rc = kl_vcpu_save(&gu->v, st))) {
		fprintf(stderr, "kvm-lite: saving the vCPU: %s\n", strerror(-rc));
		return rc;
	}
	st->ram = gu->l->ram;
	st->guest_page = (uint32_t)gu->l->guest_page;
	st->flags = gu->flags;
	return 0;
}

/* Save RAM and vCPU to the two files. */
static int save_vm(struct guest *gu, int rfd, int vfd)
{
	struct kl_vcpu_state st;
	double t;
	int rc;

	if ((rc = vcpu_state(gu, &st)))
		return rc;
	t = now_ms();
	rc = kl_ram_save(gu->ram, rfd);
	gu->res->save_ms = now_ms() - t;
	if (rc)
		return rc;
	if ((rc = kl_vcpu_state_write(vfd, &st)))
		fprintf(stderr, "kvm-lite: writing the vCPU file: %s\n", strerror(-rc));
	return rc;
}

/* Create a new VM on new RAM of backing b from the two files. With
 * --restore-lazy the RAM is loaded on demand: the vCPU runs as soon as
 * the load returns, and its first touches of pages not loaded yet (KVM's
 * own accesses through the host page tables) are served first. */
static int restore_vm(struct guest *gu, enum kl_backing b, int rfd, int vfd)
{
	struct kl_restore *rs = &gu->res->rs;
	struct kl_vcpu_state back;
	struct kl_ram r2;
	double t0 = now_ms(), t;
	int rc;

	gu->restore_t0 = t0;
	if ((rc = kl_ram_create(&r2, b, gu->l->ram, &gu->o->ram_opts)))
		return rc;
	gu->res->restored_backing = b;
	gu->res->restored_page = kl_ram_page(&r2);
	t = now_ms();
	rs->created = t - t0;
	rc = gu->o->restore_lazy ? kl_ram_load_lazy(&r2, rfd, &rs->lazy) : kl_ram_load(&r2, rfd);
	gu->res->load_ms = now_ms() - t;
	rs->loaded = rs->resident = now_ms() - t0; /* lazy: resident later */
	if (!rc && (rc = kl_vcpu_state_read(vfd, &back, NULL)))
		fprintf(stderr, "kvm-lite: reading the vCPU file: %s\n", strerror(-rc));
	if (!rc && (back.ram != gu->l->ram || back.guest_page != gu->l->guest_page)) {
		rc = -EINVAL;
		fprintf(stderr, "kvm-lite: the vCPU file is for another guest\n");
	}
	if (!rc && (rc = new_vm(gu, r2.base, &back)))
		fprintf(stderr, "kvm-lite: restoring the VM: %s\n", strerror(-rc));
	if (rc) {
		kl_ram_destroy(&r2); /* a lazy load is cancelled first */
		return rc;
	}
	*gu->ram = r2;
	rs->vm = now_ms() - t0;
	gu->rs_wait = RS_ENTRY;
	return 0;
}

/* The restore's first KVM_RUN (at RS_ENTRY, before it) and the guest's
 * first exit after it (at RS_EXIT, after a KVM_RUN that returned one). */
static void restore_mark(struct guest *gu, enum rs_mark at)
{
	struct kl_restore *rs = &gu->res->rs;

	if (gu->rs_wait != at)
		return;
	if (at == RS_ENTRY) {
		rs->entered = now_ms() - gu->restore_t0;
		gu->rs_wait = RS_EXIT;
	} else {
		rs->first_exit = now_ms() - gu->restore_t0;
		if (rs->lazy.on_demand)
			rs->demanded_first_exit = kl_ram_load_demanded(gu->ram);
		gu->rs_wait = RS_NONE;
	}
}

/* --restore-lazy: the end of the load. After a good run the VMM waits for
 * it (the guest may have finished first); after a failed one it cancels
 * it, and says the load's own error if it had one (a guest whose RAM
 * could not be loaded fails in KVM_RUN with EFAULT). */
static int restore_end(struct guest *gu, bool run_ok)
{
	struct kl_restore *rs = &gu->res->rs;
	int rc;

	if (!gu->o->restore_lazy || !gu->res->restored)
		return 0;
	rc = kl_ram_load_end(gu->ram, &rs->lazy, !run_ok);
	if (rs->lazy.on_demand) /* else eager: resident when hpr_load returned */
		rs->resident = rs->lazy.resident_at - gu->restore_t0;
	return rc;
}

/* --keep: a new VM on the kept RAM, the vCPU as PREFIX.vcpu holds it, the
 * record RUNNING; what it took is the restore time. */
static int resume_vm(struct guest *gu)
{
	struct kl_keep_run *k = gu->o->keep_run;
	double t = now_ms();
	int rc;

	if ((rc = new_vm(gu, gu->ram->base, &k->vcpu))) {
		fprintf(stderr, "kvm-lite: restoring the VM on kept RAM: %s\n", strerror(-rc));
		return rc;
	}
	k->restore_ms = now_ms() - t;
	gu->before_snap = k->rec.guest_sum;
	gu->res->restored = true;
	gu->res->restored_backing = gu->ram->backing;
	gu->res->restored_page = kl_ram_page(gu->ram);
	kl_keep_running(gu->ram);
	kl_keep_print(gu->o, gu->ram);
	return 0;
}

/* Sleep s seconds, or until SIGINT/SIGTERM. */
static void sleep_s(double s)
{
	struct timespec t = { .tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&t, &t) && errno == EINTR && !kl_stop_signal())
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

	if ((rc = vcpu_state(gu, &st)))
		return rc;
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
	drop_vm(gu);
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
	gu->before_snap = res->ev[KL_EV_CHECKSUM_FPR] ? res->ev[KL_EV_CHECKSUM_FPR] :
							res->ev[KL_EV_CHECKSUM];
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

		drop_vm(gu);
		kl_ram_destroy(gu->ram);
		rc = restore_vm(gu, b, rfd, vfd);
		res->restored = !rc;
	}
	close(rfd);
	close(vfd);
	return rc;
}

/* The guest's exception stub: eax vector; rbx, rcx, rdx the stack words
 * (error code or RIP first). The guest says it cannot go on: the run ends. */
static int on_fault(struct guest *gu)
{
	unsigned vec = gu->g.rax & 0xff;
	bool err_code = vec == 8 || (vec >= 10 && vec <= 14) || vec == 17;

	fprintf(stderr, "kvm-lite: guest exception %u%s at CPL %llu (stack: %#llx %#llx %#llx)\n",
		vec,
		vec == 6  ? " (#UD)" :
		vec == 13 ? " (#GP)" :
		vec == 14 ? " (#PF)" :
			    "",
		(err_code ? gu->g.rdx : gu->g.rcx) & 3, gu->g.rbx, gu->g.rcx, gu->g.rdx);
	dump_regs(&gu->v);
	return -EFAULT;
}

/* `in`: all ones, as from a bus with nothing there. The data lies in the
 * kvm_run page at an offset KVM gives; checked before it is written. */
static int on_port_in(struct guest *gu)
{
	struct kvm_run *run = gu->v.run;
	size_t n = (size_t)run->io.size * run->io.count;

	if (run->io.data_offset >= gu->v.run_size || n > gu->v.run_size - run->io.data_offset) {
		fprintf(stderr, "kvm-lite: KVM gave I/O data outside kvm_run (%llu + %zu)\n",
			(unsigned long long)run->io.data_offset, n);
		return -EIO;
	}
	memset((char *)run + run->io.data_offset, 0xff, n);
	log_ignored(gu, IGN_PORT_IN, "in from port %#x (%u bytes): reads all ones", run->io.port,
		    run->io.size);
	return GO_ON;
}

/* KVM_EXIT_IO: the guest's calls are `out` to a KL_PORT_*. */
static int on_exit_io(struct guest *gu)
{
	struct kvm_run *run = gu->v.run;

	if (run->io.direction != KVM_EXIT_IO_OUT)
		return on_port_in(gu);
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
		log_ignored(gu, IGN_PORT_OUT, "out to port %#x, which nobody serves", run->io.port);
		return GO_ON;
	}
}

/* KVM_EXIT_MMIO: a guest access outside RAM (there is no device). */
static int on_exit_mmio(struct guest *gu)
{
	struct kvm_run *run = gu->v.run;
	size_t len = run->mmio.len <= sizeof(run->mmio.data) ? run->mmio.len : 0;

	if (!run->mmio.is_write)
		memset(run->mmio.data, 0xff, len);
	log_ignored(gu, IGN_MMIO, "MMIO %s of %u bytes at GPA %#llx, outside RAM%s",
		    run->mmio.is_write ? "write" : "read", run->mmio.len,
		    (unsigned long long)run->mmio.phys_addr,
		    run->mmio.is_write ? "" : ": reads all ones");
	return GO_ON;
}

/* KVM_EXIT_HLT: without interrupts nothing would wake the guest; resume
 * it past the HLT (a guest that only halts is caught by the watchdog no
 * more than one that loops: each HLT is an exit). */
static int on_exit_hlt(struct guest *gu)
{
	log_ignored(gu, IGN_HLT, "HLT: kvm-lite has no interrupts to wait for, resumed");
	return GO_ON;
}

/* The exits after which the guest cannot go on. */
static int on_exit_fatal(struct guest *gu)
{
	struct kvm_run *run = gu->v.run;

	fprintf(stderr, "kvm-lite: guest stopped: ");
	switch (run->exit_reason) {
	case KVM_EXIT_FAIL_ENTRY:
		fprintf(stderr, "entry failure %#llx",
			(unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_INTERNAL_ERROR:
		fprintf(stderr, "KVM internal error %u", run->internal.suberror);
		break;
	case KVM_EXIT_SHUTDOWN:
		fprintf(stderr, "shutdown (triple fault)");
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		fprintf(stderr, "system event %u", run->system_event.type);
		break;
	default:
		fprintf(stderr, "exit %u", run->exit_reason);
	}
	fprintf(stderr, "\n");
	dump_regs(&gu->v);
	return -EIO;
}

/* An exit reason kvm-lite does not know: nothing to emulate, so nothing
 * to resume safely either. */
static int on_exit_unknown(struct guest *gu)
{
	fprintf(stderr, "kvm-lite: exit reason %u is unknown to kvm-lite\n",
		gu->v.run->exit_reason);
	return on_exit_fatal(gu);
}

static int (*const exit_handler[])(struct guest *) = {
	[KVM_EXIT_IO] = on_exit_io,
	[KVM_EXIT_MMIO] = on_exit_mmio,
	[KVM_EXIT_HLT] = on_exit_hlt,
	[KVM_EXIT_SHUTDOWN] = on_exit_fatal,
	[KVM_EXIT_FAIL_ENTRY] = on_exit_fatal,
	[KVM_EXIT_INTERNAL_ERROR] = on_exit_fatal,
	[KVM_EXIT_SYSTEM_EVENT] = on_exit_fatal,
};

/* SIGINT/SIGTERM or the watchdog: stop the guest where it is. */
static int stopped_from_outside(struct guest *gu)
{
	struct kvm_regs g;
	int sig = kl_stop_signal();

	if (!sig && !kl_watchdog_fired())
		return 0;
	if (ioctl(gu->v.vcpu, KVM_GET_REGS, &g))
		memset(&g, 0, sizeof(g));
	if (sig) {
		fprintf(stderr,
			"kvm-lite: %s: stopping the guest at rip %#llx; its VM and RAM "
			"are released\n",
			kl_signal_name(sig), g.rip);
		gu->res->stop_signal = sig;
		return -EINTR;
	}
	fprintf(stderr,
		"kvm-lite: watchdog: the guest has not exited to the VMM for %.0f s (--watchdog), "
		"rip %#llx: stopped; its VM and RAM are released\n",
		gu->o->watchdog_s, g.rip);
	gu->res->watchdog = true;
	return -ETIMEDOUT;
}

/* Run the vCPU until the guest says DONE, something ends the run, or it
 * is stopped from outside. */
static int run_vcpu(struct guest *gu)
{
	kl_watchdog_reset(gu->o->watchdog_s);
	for (;;) {
		unsigned reason;
		int rc, e;

		kl_kick_target(&gu->v); /* a restore may have made a new VM */
		if ((rc = stopped_from_outside(gu)))
			return rc;
		restore_mark(gu, RS_ENTRY);
		kl_watchdog_arm();
		rc = ioctl(gu->v.vcpu, KVM_RUN, 0);
		e = errno;
		kl_watchdog_disarm();
		if (rc < 0) {
			kl_kick_clear(&gu->v);
			if (e == EINTR || e == EAGAIN)
				continue;
			fprintf(stderr, "kvm-lite: KVM_RUN: %s\n", strerror(e));
			dump_regs(&gu->v);
			return -e;
		}
		kl_watchdog_reset(gu->o->watchdog_s);
		restore_mark(gu, RS_EXIT);
		reason = gu->v.run->exit_reason;
		if (reason < sizeof(exit_handler) / sizeof(exit_handler[0]) && exit_handler[reason])
			rc = exit_handler[reason](gu);
		else
			rc = on_exit_unknown(gu);
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
			 (o->snapshot ? KL_P_CHECKPOINT : 0) | (o->ud2 ? KL_P_UD2 : 0) |
			 (o->hostile ? KL_P_HOSTILE : 0) | (o->hang ? KL_P_HANG : 0) |
			 (o->no_avx ? KL_P_NO_AVX : 0),
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
		if ((rc = new_vm(&gu, ram->base, NULL))) {
			fprintf(stderr, "kvm-lite: creating the VM: %s\n", strerror(-rc));
			return rc;
		}
		if ((rc = kl_vcpu_enter_long_mode(&gu.v, KL_CODE, KL_KSTACK_TOP)))
			fprintf(stderr, "kvm-lite: KVM_SET_SREGS (long mode): %s\n", strerror(-rc));
	}
	if (!rc) {
		rc = run_vcpu(&gu);
		rc = restore_end(&gu, !rc) ?: rc;
	}
	if (!rc) {
		res->guest_leaf = guest_leaf(&gu);
		rc = kl_ram_stats(ram, &res->st);
	}
	if (res->ignored)
		fprintf(stderr,
			"kvm-lite: %u guest accesses ignored (ports nobody serves, MMIO "
			"outside RAM, HLT, unknown reports)\n",
			res->ignored);
	drop_vm(&gu);
	return rc;
}

/* --snapshot: the guest's checks of the vCPU state after the restore. */
static int check_vstate(const struct kl_result *res)
{
	static const char *const n[] = { "STAR", "LSTAR",   "CSTAR",   "SFMASK", "KERNEL_GS_BASE",
					 "PAT",	 "TSC_AUX", "DR0-DR3", "DR7",	 "TSC",
					 "CPUID" };
	uint64_t k = res->ev[KL_EV_VSTATE] >> 32, u = res->ev[KL_EV_VSTATE_USER] >> 32;

	if (!res->have[KL_EV_VSTATE] || !res->have[KL_EV_VSTATE_USER]) {
		fprintf(stderr, "kvm-lite: the guest did not report its vCPU state checks\n");
		return 1;
	}
	if (!(u & (KL_VS_XCR0 | KL_VS_YMM)))
		fprintf(stderr,
			"kvm-lite: NOTE: the AVX state (XCR0, the upper halves of ymm0-15) was "
			"not covered by the guest's checks: %s\n",
			u & KL_VS_NOAVX_UD    ? "its CPUID offers AVX and XSAVE, but AVX at CPL 3 "
						"raised #UD" :
			u & KL_VS_NOAVX_CPUID ? "its CPUID offers no AVX or no XSAVE" :
						"the guest did not say why");
	if (!res->vstate_bad) {
		printf("guest after the restore: %u of 11 CPL 0 checks (MSRs, debug registers, "
		       "TSC, CPUID) and %s equal to before the checkpoint\n",
		       (unsigned)__builtin_popcountll(k),
		       u & (KL_VS_XCR0 | KL_VS_YMM) ? "XCR0 and ymm0-15" :
						      "no AVX checks (no AVX here)");
		return 0;
	}
	fprintf(stderr, "kvm-lite: after the restore the guest found changed:");
	for (unsigned b = 0; b < 11; b++)
		if (res->vstate_bad & (1ull << b))
			fprintf(stderr, " %s", n[b]);
	if (res->vstate_bad & ((uint64_t)KL_VS_XCR0 << 16))
		fprintf(stderr, " XCR0");
	if (res->vstate_bad & ((uint64_t)KL_VS_YMM << 16))
		fprintf(stderr, " YMM");
	fprintf(stderr, "\n");
	return 1;
}

int kl_check_result(const struct kl_opts *o, const struct kl_result *res)
{
	bool resumed = o->keep && o->keep_run->resume && !o->keep_run->reattaches;

	if (res->sum_mismatch || !res->guest_leaf || res->host_errors)
		return 1;
	/* a hostile guest's requests are all refused, and only those */
	if (o->hostile ?
		    res->bad_requests != KL_HOSTILE_REFUSED ||
			    res->ev[KL_EV_HOSTILE] != KL_HOSTILE_REFUSED ||
			    res->ignored != KL_HOSTILE_IGNORED + (o->ram <= 0x3fe00000 ? 2 : 0) :
		    res->bad_requests != 0)
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
	if (o->snapshot && check_vstate(res))
		return 1;
	/* a lazy load that ran on demand ended with every saved page loaded */
	if (o->restore_lazy && res->rs.lazy.on_demand &&
	    (res->rs.lazy.err || res->rs.lazy.loaded != res->rs.lazy.total))
		return 1;
	return 0;
}
