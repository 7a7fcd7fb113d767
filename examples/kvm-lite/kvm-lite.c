/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite — a minimal VMM that backs guest RAM with an hpregion region.
 *
 * Guest RAM is a region (backend from the command line; shmem and hugetlb
 * are shared, so hpr_fd() could be handed to another process as a
 * vhost-user backend would), pre-faulted in parallel with hpr_fault_in()
 * before the vCPU starts, and given to KVM as memory slot 0. The guest
 * (guest.S) builds its own page tables with 4 KiB or 2 MiB leaves, drops to
 * CPL 3 and runs timed loops; it reports through port I/O. Free page
 * reporting maps onto hpr_release_lazy()/hpr_reclaim()/hpr_fault_in(), and
 * snapshot/restore onto hpr_save()/hpr_load() plus a vCPU state file.
 *
 * Everything that can be checked without /dev/kvm (sizes, page-size
 * multiples, whether the hugetlb pool or tmpfs can hold the RAM) is checked
 * first, so bad input is a clear error (exit 2) even where there is no KVM;
 * no /dev/kvm, or no permission, is exit 77.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <hpregion/hpregion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvm.h"
#include "layout.h"
#include "vcpustate.h"

extern const unsigned char kl_guest_start[], kl_guest_end[];

enum hb { HB_4K, HB_THP, HB_SHMEM, HB_SHMEM_HUGE, HB_HUGETLB, HB_N };
static const char *const hb_names[HB_N] = { "4k", "thp", "shmem", "shmem-huge", "hugetlb" };

#define EXIT_INPUT 2
#define EXIT_SKIP 77
#define NEV 16

struct opts {
	size_t ram;
	enum hb backend;
	size_t guest_page;
	const char *shmem_dir;
	const char *snapshot;
	bool matrix, fpr, verbose, ud2, quick;
	const char *json;
	unsigned repeat, workers;
	uint64_t rand_iters, stride_reps;
};

struct result {
	uint64_t ev[NEV];
	bool have[NEV];
	double prefault_ms, release_ms[2], acquire_ms[2], save_ms, load_ms;
	size_t lazy_after_release;
	size_t guest_leaf;	/* leaf size the guest really mapped data with */
	struct hpr_stats st;
	int sum_mismatch;	/* guest checksum != host view of its RAM */
	int restored_mismatch;	/* checksum after restore != before */
	bool restored;
};

static char tmpfs_dir[64];

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvm-lite [options]\n"
		"  -m, --ram SIZE         guest RAM (default 64M; multiple of 2M, or of\n"
		"                         the host page size)\n"
		"  -b, --backend B        host backing: 4k thp shmem shmem-huge hugetlb\n"
		"                         (default thp; shmem/hugetlb are shared fds)\n"
		"  -g, --guest-page P     guest page tables: 4k or 2m (default 2m)\n"
		"      --shmem-dir DIR    tmpfs mounted huge=always for shmem-huge (default:\n"
		"                         a private one in a new mount namespace)\n"
		"      --matrix           run host {4k,thp,hugetlb,shmem-huge} x guest\n"
		"                         {4k,2m} and print ratios vs 4k+4k\n"
		"      --repeat N         matrix rounds, interleaved (default 3); the\n"
		"                         matrix runs no --fpr/--snapshot rounds\n"
		"      --fpr              free page reporting rounds (release, reuse);\n"
		"                         with --matrix: after the matrix, interleaved\n"
		"                         FPR rounds on thp, hugetlb and shmem-huge\n"
		"      --json FILE        with --matrix: the results as JSON (bench/run)\n"
		"      --quick            with --matrix: 1 round and short loops unless\n"
		"                         --repeat/--rand-iters/--stride-reps say otherwise\n"
		"      --snapshot PREFIX  pause at the guest's checkpoint, save RAM to\n"
		"                         PREFIX.ram (hpr_save) and the vCPU to\n"
		"                         PREFIX.vcpu, restore into a new VM, resume\n"
		"      --rand-iters N     random updates (default 1M)\n"
		"      --stride-reps N    passes of the 4 KiB stride (default 4)\n"
		"      --workers N        prefault threads (default: one per CPU)\n"
		"  -v, --verbose          print every guest report\n"
		"      --test-guest-fault the guest executes ud2 at CPL 3 (tests its\n"
		"                         IDT/TSS; the run fails with exception 6)\n"
		"      --probe            only say whether /dev/kvm is usable (opens it,\n"
		"                         creates a VM) and which KVM it is: exit 0 or 77\n"
		"exit: 0 ok, 1 run failed, 2 bad input, 77 no usable /dev/kvm\n");
}

static int parse_backend(const char *s, enum hb *b)
{
	for (int i = 0; i < HB_N; i++)
		if (!strcmp(s, hb_names[i])) {
			*b = (enum hb)i;
			return 0;
		}
	return -1;
}

static size_t host_page(enum hb b)
{
	struct hpr_probe_info pi;

	if (b == HB_4K)
		return 4096;
	if (hpr_probe(&pi))
		return 2ul << 20;
	/* hugetlb: the library's default size, the PMD size when offered */
	if (b == HB_HUGETLB && pi.nr_hugetlb_sizes) {
		for (unsigned i = 0; i < pi.nr_hugetlb_sizes && i < 4; i++)
			if (pi.hugetlb[i].page_size == pi.thp_pmd_size)
				return pi.thp_pmd_size;
		return pi.hugetlb[0].page_size;
	}
	return pi.thp_pmd_size ? pi.thp_pmd_size : (2ul << 20);
}

/* A tmpfs mounted huge=always in a mount namespace of our own: vanishes
 * with the process, changes nothing anyone else sees. */
static int private_huge_tmpfs(size_t need)
{
	char opt[64];

	if (tmpfs_dir[0])
		return 0;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -errno;
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "/tmp/kvm-lite.XXXXXX");
	if (!mkdtemp(tmpfs_dir)) {
		tmpfs_dir[0] = 0;
		return -errno;
	}
	snprintf(opt, sizeof(opt), "huge=always,size=%zu", need);
	if (mount("kvm-lite", tmpfs_dir, "tmpfs", 0, opt)) {
		int e = -errno;

		rmdir(tmpfs_dir);
		tmpfs_dir[0] = 0;
		return e;
	}
	return 0;
}

static void cleanup_tmpfs(void)
{
	if (tmpfs_dir[0]) {
		umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
		tmpfs_dir[0] = 0;
	}
}

/* Create (not fault in) guest RAM. Errors are printed with the library's
 * advice; they are input/config errors (exit 2) before any guest runs. */
static int create_ram(const struct opts *o, enum hb b, hpr_region **out)
{
	struct hpr_config c;
	int rc;

	hpr_config_init(&c);
	c.size = o->ram;
	c.name = "kvm-lite-ram";
	c.workers = o->workers;
	switch (b) {
	case HB_4K:
		/* Private anonymous memory that must stay small: THP backend with
		 * fallback, then MADV_NOHUGEPAGE before anything is faulted, so
		 * neither the fault path, MADV_COLLAPSE nor khugepaged makes it
		 * huge. The baseline a VMM gets with THP off. */
		c.backend = HPR_BACKEND_THP;
		c.flags = HPR_F_FALLBACK;
		break;
	case HB_THP:
		c.backend = HPR_BACKEND_THP; /* private anonymous: no fd to share */
		break;
	case HB_SHMEM:
		c.backend = HPR_BACKEND_SHMEM; /* memfd; huge via MADV_COLLAPSE */
		c.flags = HPR_F_SHARED;
		break;
	case HB_SHMEM_HUGE:
		c.backend = HPR_BACKEND_SHMEM;
		c.flags = HPR_F_SHARED;
		if (o->shmem_dir) {
			c.path = o->shmem_dir;
		} else {
			rc = private_huge_tmpfs(o->ram * 2 + (64ul << 20));
			if (rc) {
				fprintf(stderr,
					"kvm-lite: shmem-huge: cannot mount a private tmpfs "
					"huge=always (%s): pass --shmem-dir DIR on a tmpfs "
					"mounted huge=always\n",
					strerror(-rc));
				return rc;
			}
			c.path = tmpfs_dir;
		}
		break;
	case HB_HUGETLB:
		c.backend = HPR_BACKEND_HUGETLB; /* MFD_HUGETLB memfd, reserved now */
		c.flags = HPR_F_SHARED;
		break;
	default:
		return -EINVAL;
	}
	rc = hpr_create(&c, out);
	if (rc) {
		fprintf(stderr, "kvm-lite: cannot create %s guest RAM of %zu MiB: %s\n",
			hb_names[b], o->ram >> 20, hpr_strerror(rc));
		return rc;
	}
	if (b == HB_4K && madvise(hpr_base(*out), hpr_size(*out), MADV_NOHUGEPAGE)) {
		rc = -errno;
		fprintf(stderr, "kvm-lite: madvise(MADV_NOHUGEPAGE): %s\n", strerror(errno));
		hpr_destroy(*out);
		*out = NULL;
	}
	return rc;
}

static void load_guest(void *ram, const struct kl_layout *l, const struct opts *o,
		       unsigned flags)
{
	struct kl_params p = {
		.ram = l->ram,
		.flags = flags,
		.pt_bytes = l->pt_bytes,
		.data = l->data,
		.data_len = l->data_len,
		.stride_reps = o->stride_reps,
		.rand_iters = o->rand_iters,
		.seed = 0x2545f4914f6cdd1dull,
		.fpr = l->fpr,
		.fpr_len = l->fpr_len,
	};

	kl_boot_pt_build(ram, l->ram);
	memcpy((char *)ram + KL_PARAMS, &p, sizeof(p));
	memcpy((char *)ram + KL_CODE, kl_guest_start, (size_t)(kl_guest_end - kl_guest_start));
}

static const char *ev_name(unsigned ev)
{
	static const char *const n[] = { "?", "setup", "memset1", "memset2", "stride",
					 "random", "checksum", "fpr-warm", "fpr-lazy",
					 "fpr-reclaimed", "checksum-fpr", "checksum-restored" };
	return ev < sizeof(n) / sizeof(n[0]) ? n[ev] : "?";
}

/* Pause at the checkpoint: save RAM and vCPU, throw the VM and its RAM
 * away, restore both into new ones. On success *v and *r are the new VM
 * and region. */
static int snapshot_restore(const struct opts *o, int kvm, enum hb b, const struct kl_layout *l,
			    unsigned flags, struct kl_vm *v, hpr_region **r, struct result *res)
{
	char path[4096];
	struct kl_vcpu_state st, back;
	hpr_region *r2 = NULL;
	size_t changed = 0;
	int rfd = -1, vfd = -1, rc;
	double t;

	memset(&st, 0, sizeof(st));
	if ((rc = kl_vcpu_save(v, &st))) {
		fprintf(stderr, "kvm-lite: saving the vCPU: %s\n", strerror(-rc));
		return rc;
	}
	st.ram = l->ram;
	st.guest_page = (uint32_t)l->guest_page;
	st.flags = flags;
	snprintf(path, sizeof(path), "%s.ram", o->snapshot);
	rfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (rfd < 0) {
		rc = -errno;
		fprintf(stderr, "kvm-lite: %s: %s\n", path, strerror(errno));
		goto out;
	}
	t = now_ms();
	rc = hpr_save(*r, rfd, 0);
	res->save_ms = now_ms() - t;
	if (rc) {
		fprintf(stderr, "kvm-lite: hpr_save to %s: %s\n", path, hpr_strerror(rc));
		goto out;
	}
	snprintf(path, sizeof(path), "%s.vcpu", o->snapshot);
	vfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (vfd < 0 || (rc = kl_vcpu_state_write(vfd, &st))) {
		rc = vfd < 0 ? -errno : rc;
		fprintf(stderr, "kvm-lite: writing %s: %s\n", path, strerror(-rc));
		goto out;
	}
	/* The old VM and RAM are gone before the new ones exist: nothing of
	 * the first run survives except the two files. */
	kl_vm_destroy(v);
	hpr_destroy(*r);
	*r = NULL;
	if ((rc = create_ram(o, b, &r2)))
		goto out;
	t = now_ms();
	rc = hpr_load(r2, rfd, 0, &changed);
	res->load_ms = now_ms() - t;
	if (rc) {
		fprintf(stderr, "kvm-lite: hpr_load: %s\n", hpr_strerror(rc));
		goto out;
	}
	if ((rc = kl_vcpu_state_read(vfd, &back))) {
		fprintf(stderr, "kvm-lite: reading %s: %s\n", path, strerror(-rc));
		goto out;
	}
	if (back.ram != l->ram || back.guest_page != l->guest_page) {
		rc = -EINVAL;
		fprintf(stderr, "kvm-lite: %s is for another guest\n", path);
		goto out;
	}
	if ((rc = kl_vm_create(v, kvm, hpr_base(r2), l->ram)) || (rc = kl_vcpu_load(v, &back))) {
		fprintf(stderr, "kvm-lite: restoring the VM: %s\n", strerror(-rc));
		goto out;
	}
	*r = r2;
	r2 = NULL;
	res->restored = true;
out:
	if (r2)
		hpr_destroy(r2);
	if (rfd >= 0)
		close(rfd);
	if (vfd >= 0)
		close(vfd);
	return rc;
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

/* Run the guest on region *rp until it says DONE. Returns 0 or -errno
 * (a message is printed). */
static int run_guest(const struct opts *o, int kvm, enum hb b, const struct kl_layout *l,
		     hpr_region **rp, struct result *res)
{
	unsigned flags = (l->guest_page == 4096 ? 0 : KL_P_GUEST_2M) | (o->fpr ? KL_P_FPR : 0) |
			 (o->snapshot ? KL_P_CHECKPOINT : 0) | (o->ud2 ? KL_P_UD2 : 0);
	struct kl_vm v;
	uint64_t before_snap = 0;
	double t;
	int rc;

	memset(res, 0, sizeof(*res));
	t = now_ms();
	rc = hpr_fault_in(*rp, 0, l->ram);
	res->prefault_ms = now_ms() - t;
	if (rc) {
		fprintf(stderr, "kvm-lite: prefault: %s\n", hpr_strerror(rc));
		return rc;
	}
	load_guest(hpr_base(*rp), l, o, flags);
	if ((rc = kl_vm_create(&v, kvm, hpr_base(*rp), l->ram))) {
		fprintf(stderr, "kvm-lite: creating the VM: %s\n", strerror(-rc));
		return rc;
	}
	if ((rc = kl_vcpu_enter_long_mode(&v, KL_CODE, KL_KSTACK_TOP))) {
		fprintf(stderr, "kvm-lite: KVM_SET_SREGS (long mode): %s\n", strerror(-rc));
		goto out;
	}
	for (;;) {
		struct kvm_run *run = v.run;
		struct kvm_regs g;

		if (ioctl(v.vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			fprintf(stderr, "kvm-lite: KVM_RUN: %s\n", strerror(errno));
			dump_regs(&v);
			goto out;
		}
		if (run->exit_reason != KVM_EXIT_IO || run->io.direction != KVM_EXIT_IO_OUT) {
			rc = -EIO;
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
			dump_regs(&v);
			goto out;
		}
		if (run->io.port == KL_PORT_DONE)
			break;
		if (ioctl(v.vcpu, KVM_GET_REGS, &g) < 0) {
			rc = -errno;
			goto out;
		}
		switch (run->io.port) {
		case KL_PORT_REPORT: {
			unsigned ev = (unsigned)g.rax;

			if (o->verbose)
				fprintf(stderr, "  guest: %-17s %llu\n", ev_name(ev), g.rbx);
			if (ev < NEV) {
				res->ev[ev] = g.rbx;
				res->have[ev] = true;
			}
			if (ev == KL_EV_CHECKSUM || ev == KL_EV_CHECKSUM_FPR ||
			    ev == KL_EV_CHECKSUM_RESTORED) {
				uint64_t h = kl_checksum(hpr_base(*rp), l->data, l->data_len);

				if (h != g.rbx) {
					res->sum_mismatch++;
					fprintf(stderr,
						"kvm-lite: %s: guest says %#llx, host view of "
						"guest RAM %#llx\n",
						ev_name(ev), g.rbx, (unsigned long long)h);
				}
			}
			if (ev == KL_EV_CHECKSUM_RESTORED && g.rbx != before_snap)
				res->restored_mismatch++;
			break;
		}
		case KL_PORT_FREE: {
			int k = g.rax ? 1 : 0;
			size_t rec = 0;
			struct hpr_stats st;

			t = now_ms();
			rc = hpr_release_lazy(*rp, g.rbx, g.rsi);
			if (!rc && k)
				rc = hpr_reclaim(*rp, 0, &rec);
			res->release_ms[k] = now_ms() - t;
			if (rc) {
				fprintf(stderr, "kvm-lite: free page report [%#llx, +%#llx): %s\n",
					g.rbx, g.rsi, hpr_strerror(rc));
				goto out;
			}
			if (!k && !hpr_stats(*rp, &st))
				res->lazy_after_release = st.lazy;
			break;
		}
		case KL_PORT_ACQUIRE:
			t = now_ms();
			rc = hpr_fault_in(*rp, g.rbx, g.rsi);
			res->acquire_ms[g.rax ? 1 : 0] = now_ms() - t;
			if (rc) {
				fprintf(stderr, "kvm-lite: fault-in for reuse: %s\n", hpr_strerror(rc));
				goto out;
			}
			break;
		case KL_PORT_CHECKPOINT:
			if (!o->snapshot)
				break;
			before_snap = res->ev[KL_EV_CHECKSUM_FPR] ? res->ev[KL_EV_CHECKSUM_FPR]
								 : res->ev[KL_EV_CHECKSUM];
			if ((rc = snapshot_restore(o, kvm, b, l, flags, &v, rp, res)))
				goto out;
			break;
		case KL_PORT_FAULT:
			/* stack at the stub: error code (vectors 8, 10-14, 17)
			 * or RIP first */
			fprintf(stderr,
				"kvm-lite: guest exception %llu%s at CPL %llu (stack: %#llx "
				"%#llx %#llx)\n",
				g.rax & 0xff, (g.rax & 0xff) == 6 ? " (#UD)"
					      : (g.rax & 0xff) == 13 ? " (#GP)"
					      : (g.rax & 0xff) == 14 ? " (#PF)" : "",
				((g.rax & 0xff) == 8 || ((g.rax & 0xff) >= 10 &&
				 (g.rax & 0xff) <= 14) || (g.rax & 0xff) == 17 ? g.rdx : g.rcx) & 3,
				g.rbx, g.rcx, g.rdx);
			dump_regs(&v);
			rc = -EFAULT;
			goto out;
		default:
			fprintf(stderr, "kvm-lite: out to unknown port %#x\n", run->io.port);
			rc = -EIO;
			goto out;
		}
	}
	/* What did the guest really build? Walk its CR3 over the data area. */
	{
		struct kvm_sregs s;
		uint64_t pa;
		size_t leaf = 0;
		int user = 0;

		if (!ioctl(v.vcpu, KVM_GET_SREGS, &s) &&
		    !kl_pt_walk(hpr_base(*rp), l->ram, s.cr3, l->data + 4096, &pa, &leaf, &user) &&
		    pa == l->data + 4096 && user)
			res->guest_leaf = leaf;
	}
	if ((rc = hpr_stats(*rp, &res->st)))
		fprintf(stderr, "kvm-lite: hpr_stats: %s\n", hpr_strerror(rc));
out:
	kl_vm_destroy(&v);
	return rc;
}

/*
 * The point of HPR_F_SHARED for a VMM: another process (a vhost-user
 * backend, a migration helper) maps the same guest RAM through the fd. A
 * child maps hpr_fd() on its own and checksums the guest's data area; it
 * must see exactly what the guest last reported. 1 match, 0 differs,
 * -errno when it could not check.
 */
static int second_process_sees(hpr_region *r, const struct kl_layout *l, uint64_t want)
{
	int p[2], st = 0;
	uint64_t got = 0;
	pid_t pid;

	if (hpr_fd(r) < 0)
		return -EBADF;
	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		void *m = mmap(NULL, l->ram, PROT_READ, MAP_SHARED, hpr_fd(r), 0);
		uint64_t h;

		if (m == MAP_FAILED)
			_exit(1);
		h = kl_checksum(m, l->data, l->data_len);
		_exit(write(p[1], &h, sizeof(h)) == sizeof(h) ? 0 : 1);
	}
	close(p[1]);
	if (read(p[0], &got, sizeof(got)) != sizeof(got))
		got = ~want;
	close(p[0]);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -EIO;
	return got == want;
}

static double mc(uint64_t c)
{
	return (double)c / 1e6;
}

/* Print one run; returns 1 if the second-process check failed. */
static int print_single(const struct opts *o, enum hb b, const struct kl_layout *l,
			hpr_region *r, const struct result *res)
{
	int bad = 0;

	static const unsigned evs[] = { KL_EV_MEMSET1, KL_EV_MEMSET2, KL_EV_STRIDE, KL_EV_RANDOM };

	printf("host %s (hpregion %s, %s, %s), guest %s pages (page-table walk: %s), "
	       "%zu MiB RAM, %zu MiB measured\n",
	       hb_names[b], hpr_backend_name(hpr_backend_of(r)),
	       b == HB_4K ? "MADV_NOHUGEPAGE" : hpr_page_size(r) == (2ul << 20) ? "2 MiB pages"
									 : "1 GiB pages",
	       hpr_fd(r) >= 0 ? "shared fd" : "private", l->guest_page == 4096 ? "4 KiB" : "2 MiB",
	       res->guest_leaf == 4096 ? "4 KiB" : res->guest_leaf ? "2 MiB" : "?",
	       l->ram >> 20, l->data_len >> 20);
	printf("prefault %.1f ms; guest setup at CPL 0: %.2f Mcycles\n", res->prefault_ms,
	       mc(res->ev[KL_EV_SETUP]));
	for (unsigned i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		printf("  %-8s %10.2f Mcycles\n", ev_name(evs[i]), mc(res->ev[evs[i]]));
	printf("host coverage: %zu of %zu MiB huge-mapped (%.0f%%), resident %zu MiB\n",
	       res->st.huge_mapped >> 20, res->st.size >> 20,
	       res->st.size ? 100.0 * (double)res->st.huge_mapped / (double)res->st.size : 0.0,
	       res->st.resident >> 20);
	printf("checksum %#llx: %s\n", (unsigned long long)res->ev[KL_EV_CHECKSUM],
	       res->sum_mismatch ? "MISMATCH with the host view" : "matches the host view of guest RAM");
	if (o->fpr) {
		double w = (double)res->ev[KL_EV_FPR_WARM];

		printf("free page reporting, %zu MiB: refill warm %.2f Mc; after release_lazy "
		       "%.2f ms + fault_in %.2f ms: %.2f Mc (%.2fx); after release+reclaim "
		       "%.2f ms + fault_in %.2f ms: %.2f Mc (%.2fx); lazily released per "
		       "hpr_stats: %zu MiB\n",
		       l->fpr_len >> 20, mc(res->ev[KL_EV_FPR_WARM]), res->release_ms[0],
		       res->acquire_ms[0], mc(res->ev[KL_EV_FPR_LAZY]),
		       w ? (double)res->ev[KL_EV_FPR_LAZY] / w : 0, res->release_ms[1],
		       res->acquire_ms[1], mc(res->ev[KL_EV_FPR_RECLAIMED]),
		       w ? (double)res->ev[KL_EV_FPR_RECLAIMED] / w : 0,
		       res->lazy_after_release >> 20);
		printf("checksum after reuse %#llx: %s\n",
		       (unsigned long long)res->ev[KL_EV_CHECKSUM_FPR],
		       res->sum_mismatch ? "MISMATCH" : "matches the host view");
	}
	if (hpr_fd(r) >= 0) {
		uint64_t last = o->snapshot ? res->ev[KL_EV_CHECKSUM_RESTORED]
			      : o->fpr	    ? res->ev[KL_EV_CHECKSUM_FPR]
					    : res->ev[KL_EV_CHECKSUM];
		int k = second_process_sees(r, l, last);

		bad = k != 1;

		printf("another process mapping hpr_fd(): %s\n",
		       k == 1 ? "sees the guest's memory (same checksum)"
		       : k == 0 ? "SEES OTHER DATA" : strerror(-k));
	}
	if (o->snapshot)
		printf("snapshot: hpr_save %.1f ms, hpr_load %.1f ms, restored into a new VM; "
		       "checksum after restore %#llx: %s\n",
		       res->save_ms, res->load_ms,
		       (unsigned long long)res->ev[KL_EV_CHECKSUM_RESTORED],
		       !res->restored ? "NOT RESTORED"
		       : res->restored_mismatch ? "DIFFERS from before the snapshot"
						: "identical to before the snapshot");
	return bad;
}

static int check_result(const struct opts *o, const struct result *res)
{
	if (res->sum_mismatch || !res->have[KL_EV_CHECKSUM] || !res->guest_leaf)
		return 1;
	if (o->fpr && !res->have[KL_EV_CHECKSUM_FPR])
		return 1;
	if (o->snapshot &&
	    (!res->restored || res->restored_mismatch || !res->have[KL_EV_CHECKSUM_RESTORED]))
		return 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#define NCELL 8
#define MAXREP 32
#define NFPR 3

static const enum hb mx_rows[4] = { HB_4K, HB_THP, HB_HUGETLB, HB_SHMEM_HUGE };
static const char *const mx_ev_names[4] = { "memset1", "memset2", "stride 4K", "random" };
static const enum hb fpr_rows[NFPR] = { HB_THP, HB_HUGETLB, HB_SHMEM_HUGE };

/* Medians of the matrix and of the free page reporting rounds. */
struct bench_out {
	int done[NCELL];
	uint64_t med[NCELL][4];
	double cov[NCELL];
	char why[NCELL][320];
	int fpr_done[NFPR];
	char fpr_why[NFPR][320];
	/* Mcycles of the guest refilling its reported range: warm (never
	 * released), after release_lazy + fault_in, after reclaim + fault_in */
	double fpr_warm[NFPR], fpr_lazy[NFPR], fpr_recl[NFPR];
	/* host ms: release_lazy, fault_in after it; release+reclaim, fault_in */
	double fpr_rel[NFPR][2], fpr_acq[NFPR][2];
	size_t fpr_len;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run_matrix(struct opts *o, int kvm, struct bench_out *out)
{
	static const unsigned evs[4] = { KL_EV_MEMSET1, KL_EV_MEMSET2, KL_EV_STRIDE, KL_EV_RANDOM };
	uint64_t m[NCELL][4][MAXREP];
	double *cov = out->cov, pf[NCELL];
	size_t leaf[NCELL];
	int *done = out->done, bad = 0;
	char (*why)[320] = out->why;
	uint64_t (*med)[4] = out->med;
	bool fpr = o->fpr;

	memset(leaf, 0, sizeof(leaf));
	memset(pf, 0, sizeof(pf));
	o->fpr = false;
	o->snapshot = NULL;
	for (unsigned rep = 0; rep < o->repeat; rep++) {
		/* Interleave: each round starts at another cell, so drift of the
		 * machine (other load, host reclaim) spreads over all cells. */
		for (unsigned k = 0; k < NCELL; k++) {
			unsigned c = (k + rep * 3) % NCELL;
			enum hb b = mx_rows[c / 2];
			struct kl_layout l;
			struct result res;
			hpr_region *r = NULL;
			char msg[256];
			int rc;

			if (why[c][0])
				continue;
			if (kl_layout_init(&l, o->ram, c % 2 ? (2ul << 20) : 4096, host_page(b),
					   hb_names[b], msg, sizeof(msg))) {
				snprintf(why[c], sizeof(why[c]), "%.300s", msg);
				continue;
			}
			rc = create_ram(o, b, &r);
			if (rc) {
				snprintf(why[c], sizeof(why[c]), "unavailable: %.290s", hpr_strerror(rc));
				continue;
			}
			rc = run_guest(o, kvm, b, &l, &r, &res);
			if (rc || check_result(o, &res)) {
				snprintf(why[c], sizeof(why[c]), "run FAILED (%s)",
					 rc ? strerror(-rc) : "checksum or page-table check");
				bad = 1;
			} else {
				for (int e = 0; e < 4; e++)
					m[c][e][done[c]] = res.ev[evs[e]];
				/* coverage summed over rounds, averaged below */
				cov[c] += res.st.size ? (double)res.st.huge_mapped / (double)res.st.size
						      : 0;
				pf[c] += res.prefault_ms;
				leaf[c] = res.guest_leaf;
				done[c]++;
			}
			hpr_destroy(r);
		}
	}
	for (int c = 0; c < NCELL; c++)
		for (int e = 0; e < 4; e++) {
			med[c][e] = 0;
			if (done[c]) {
				qsort(m[c][e], (size_t)done[c], sizeof(uint64_t), cmp_u64);
				med[c][e] = m[c][e][done[c] / 2];
			}
		}
	printf("\nhost backing x guest page, %zu MiB guest RAM, median of %u interleaved "
	       "rounds,\nMcycles (ratio vs host 4k + guest 4k; < 1 is faster)\n",
	       o->ram >> 20, o->repeat);
	printf("%-11s %-6s %-16s %-16s %-16s %-16s %-9s %-10s %s\n", "host", "guest", "memset1",
	       "memset2", "stride 4K", "random", "host huge", "guest leaf", "prefault");
	for (int c = 0; c < NCELL; c++) {
		printf("%-11s %-6s ", hb_names[mx_rows[c / 2]], c % 2 ? "2m" : "4k");
		if (!done[c]) {
			printf("%s\n", why[c][0] ? why[c] : "no run");
			continue;
		}
		for (int e = 0; e < 4; e++) {
			char cell[32];

			if (done[0] && med[0][e])
				snprintf(cell, sizeof(cell), "%.2f (%.2f)", mc(med[c][e]),
					 (double)med[c][e] / (double)med[0][e]);
			else
				snprintf(cell, sizeof(cell), "%.2f", mc(med[c][e]));
			printf("%-16s ", cell);
		}
		printf("%7.0f%%   %-10s %.0f ms\n", 100.0 * cov[c] / done[c],
		       leaf[c] == 4096 ? "4 KiB" : leaf[c] ? "2 MiB" : "?", pf[c] / done[c]);
		cov[c] /= done[c];
	}
	o->fpr = fpr;
	return bad;
}

/*
 * Free page reporting, the cost of reuse: the guest fills the upper half of
 * its RAM (warm), reports it free (hpr_release_lazy), takes it back
 * (hpr_fault_in) and fills it again; then the same with hpr_reclaim after
 * the release, so the memory really went back to the host. Interleaved
 * rounds per host backend, guest 2 MiB pages; medians.
 */
static int run_fpr_rounds(struct opts *o, int kvm, struct bench_out *out)
{
	double w[NFPR][MAXREP], lz[NFPR][MAXREP], rc_[NFPR][MAXREP];
	double rel[NFPR][2][MAXREP], acq[NFPR][2][MAXREP];
	int bad = 0;

	o->fpr = true;
	for (unsigned rep = 0; rep < o->repeat; rep++) {
		for (unsigned k = 0; k < NFPR; k++) {
			unsigned c = (k + rep) % NFPR;
			enum hb b = fpr_rows[c];
			struct kl_layout l;
			struct result res;
			hpr_region *r = NULL;
			char msg[256];
			int rc, n = out->fpr_done[c];

			if (out->fpr_why[c][0])
				continue;
			if (kl_layout_init(&l, o->ram, 2ul << 20, host_page(b), hb_names[b], msg,
					   sizeof(msg))) {
				snprintf(out->fpr_why[c], sizeof(out->fpr_why[c]), "%.300s", msg);
				continue;
			}
			out->fpr_len = l.fpr_len;
			rc = create_ram(o, b, &r);
			if (rc) {
				snprintf(out->fpr_why[c], sizeof(out->fpr_why[c]),
					 "unavailable: %.290s", hpr_strerror(rc));
				continue;
			}
			rc = run_guest(o, kvm, b, &l, &r, &res);
			if (rc || check_result(o, &res)) {
				snprintf(out->fpr_why[c], sizeof(out->fpr_why[c]), "run FAILED (%s)",
					 rc ? strerror(-rc) : "checksum or page-table check");
				bad = 1;
			} else {
				w[c][n] = mc(res.ev[KL_EV_FPR_WARM]);
				lz[c][n] = mc(res.ev[KL_EV_FPR_LAZY]);
				rc_[c][n] = mc(res.ev[KL_EV_FPR_RECLAIMED]);
				for (int j = 0; j < 2; j++) {
					rel[c][j][n] = res.release_ms[j];
					acq[c][j][n] = res.acquire_ms[j];
				}
				out->fpr_done[c]++;
			}
			hpr_destroy(r);
		}
	}
	printf("\nfree page reporting, guest refills %zu MiB it reported free, median of %u "
	       "interleaved rounds\n(Mcycles in the guest, ratio vs warm; host ms for the "
	       "report and the reuse)\n",
	       out->fpr_len >> 20, o->repeat);
	printf("%-11s %-8s %-22s %-22s %-18s %s\n", "host", "warm", "after release_lazy",
	       "after reclaim", "lazy: rel+reuse", "reclaim: rel+reuse");
	for (int c = 0; c < NFPR; c++) {
		int n = out->fpr_done[c];
		char a[32], bb[32];

		printf("%-11s ", hb_names[fpr_rows[c]]);
		if (!n) {
			printf("%s\n", out->fpr_why[c][0] ? out->fpr_why[c] : "no run");
			continue;
		}
		out->fpr_warm[c] = median(w[c], n);
		out->fpr_lazy[c] = median(lz[c], n);
		out->fpr_recl[c] = median(rc_[c], n);
		for (int j = 0; j < 2; j++) {
			out->fpr_rel[c][j] = median(rel[c][j], n);
			out->fpr_acq[c][j] = median(acq[c][j], n);
		}
		snprintf(a, sizeof(a), "%.2f (%.2fx)", out->fpr_lazy[c],
			 out->fpr_lazy[c] / out->fpr_warm[c]);
		snprintf(bb, sizeof(bb), "%.2f (%.2fx)", out->fpr_recl[c],
			 out->fpr_recl[c] / out->fpr_warm[c]);
		printf("%-8.2f %-22s %-22s %6.2f+%-6.2f ms    %6.2f+%.2f ms\n", out->fpr_warm[c], a,
		       bb, out->fpr_rel[c][0], out->fpr_acq[c][0], out->fpr_rel[c][1],
		       out->fpr_acq[c][1]);
	}
	return bad;
}

/* bench/run's convention: {"headline": [{measure, ours, baseline, ratio,
 * anchor}], "matrix": [...], "fpr": [...]} */
static int write_json(const char *path, const struct opts *o, const char *kvm_desc,
		      const struct bench_out *out)
{
	FILE *f = fopen(path, "w");
	bool first = true;

	if (!f) {
		fprintf(stderr, "kvm-lite: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fputs("{\"kvm\": \"", f);
	for (const char *p = kvm_desc; *p; p++)
		if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
			fputc(*p, f);
	fprintf(f, "\", \"ram_mib\": %zu, \"repeat\": %u,\n \"headline\": [", o->ram >> 20,
		o->repeat);
	/* random access: host huge + guest 2m against host 4k + guest 4k */
	for (int c = 3; c < NCELL; c += 2) {
		if (!out->done[c] || !out->done[0] || !out->med[0][3])
			continue;
		fprintf(f,
			"%s\n  {\"measure\": \"guest random access, host %s + guest 2M vs host "
			"4K + guest 4K, Mcycles\", \"ours\": %.2f, \"baseline\": %.2f, "
			"\"ratio\": %.3f, \"anchor\": \"1-16 %% apart across host x guest "
			"page sizes\"}",
			first ? "" : ",", hb_names[mx_rows[c / 2]], mc(out->med[c][3]),
			mc(out->med[0][3]), (double)out->med[c][3] / (double)out->med[0][3]);
		first = false;
	}
	for (int c = 0; c < NFPR; c++) {
		if (!out->fpr_done[c])
			continue;
		fprintf(f,
			"%s\n  {\"measure\": \"guest refill of reported memory after "
			"release_lazy vs warm, %s, Mcycles\", \"ours\": %.2f, \"baseline\": "
			"%.2f, \"ratio\": %.3f, \"anchor\": \"reuse after free page reporting "
			"costs nothing extra once freed lazily (MADV_FREE)\"},",
			first ? "" : ",", hb_names[fpr_rows[c]], out->fpr_lazy[c], out->fpr_warm[c],
			out->fpr_lazy[c] / out->fpr_warm[c]);
		fprintf(f,
			"\n  {\"measure\": \"guest refill after release + reclaim vs warm, %s, "
			"Mcycles\", \"ours\": %.2f, \"baseline\": %.2f, \"ratio\": %.3f},",
			hb_names[fpr_rows[c]], out->fpr_recl[c], out->fpr_warm[c],
			out->fpr_recl[c] / out->fpr_warm[c]);
		fprintf(f,
			"\n  {\"measure\": \"host reuse cost (release + fault_in), reclaim vs "
			"lazy, %s, ms\", \"ours\": %.2f, \"baseline\": %.2f, \"ratio\": %.2f}",
			hb_names[fpr_rows[c]], out->fpr_rel[c][1] + out->fpr_acq[c][1],
			out->fpr_rel[c][0] + out->fpr_acq[c][0],
			(out->fpr_rel[c][1] + out->fpr_acq[c][1]) /
				(out->fpr_rel[c][0] + out->fpr_acq[c][0]));
		first = false;
	}
	fprintf(f, "\n ],\n \"matrix\": [");
	for (int c = 0; c < NCELL; c++) {
		fprintf(f, "%s\n  {\"host\": \"%s\", \"guest\": \"%s\", \"rounds\": %d",
			c ? "," : "", hb_names[mx_rows[c / 2]], c % 2 ? "2m" : "4k", out->done[c]);
		for (int e = 0; e < 4 && out->done[c]; e++)
			fprintf(f, ", \"%s_mcycles\": %.3f", mx_ev_names[e], mc(out->med[c][e]));
		if (out->done[c])
			fprintf(f, ", \"host_huge\": %.3f", out->cov[c]);
		fprintf(f, "}");
	}
	fprintf(f, "\n ],\n \"fpr\": [");
	for (int c = 0; c < NFPR; c++) {
		fprintf(f, "%s\n  {\"host\": \"%s\", \"rounds\": %d", c ? "," : "",
			hb_names[fpr_rows[c]], out->fpr_done[c]);
		if (out->fpr_done[c])
			fprintf(f,
				", \"warm_mcycles\": %.3f, \"lazy_mcycles\": %.3f, "
				"\"reclaimed_mcycles\": %.3f, \"lazy_release_ms\": %.3f, "
				"\"lazy_fault_in_ms\": %.3f, \"reclaim_release_ms\": %.3f, "
				"\"reclaim_fault_in_ms\": %.3f",
				out->fpr_warm[c], out->fpr_lazy[c], out->fpr_recl[c],
				out->fpr_rel[c][0], out->fpr_acq[c][0], out->fpr_rel[c][1],
				out->fpr_acq[c][1]);
		fprintf(f, "}");
	}
	fprintf(f, "\n ]\n}\n");
	return fclose(f) ? -1 : 0;
}

/* Open a usable KVM and say which one, or say why there is none. */
static int open_kvm(char *msg, size_t len)
{
	int kvm = kl_kvm_open();

	if (kvm < 0) {
		fprintf(stderr, "kvm-lite: SKIP: no usable /dev/kvm: %s — %s\n", strerror(-kvm),
			kvm == -ENOENT || kvm == -ENODEV || kvm == -ENXIO
				? "this machine offers no KVM (no vmx/svm, module not loaded, "
				  "or a KVM that cannot create VMs); run it on a KVM host or in "
				  "a nested guest (docs/kvm-lite-nested.md)"
			: kvm == -EPROTO ? "unexpected KVM API version"
			: kvm == -EACCES || kvm == -EPERM
				? "not permitted: run as root or join the kvm group"
				: "KVM_CREATE_VM failed");
		return kvm;
	}
	kl_kvm_describe(kvm, msg, len);
	printf("kvm-lite %s on KVM: %s\n", hpr_version(), msg);
	return kvm;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ram", required_argument, NULL, 'm' },
		{ "backend", required_argument, NULL, 'b' },
		{ "guest-page", required_argument, NULL, 'g' },
		{ "shmem-dir", required_argument, NULL, 'D' },
		{ "matrix", no_argument, NULL, 'M' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "fpr", no_argument, NULL, 'F' },
		{ "snapshot", required_argument, NULL, 'S' },
		{ "rand-iters", required_argument, NULL, 'R' },
		{ "stride-reps", required_argument, NULL, 'T' },
		{ "workers", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "test-guest-fault", no_argument, NULL, 'U' },
		{ "json", required_argument, NULL, 'J' },
		{ "quick", no_argument, NULL, 'Q' },
		{ "probe", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.ram = 64ul << 20,
		.backend = HB_THP,
		.guest_page = 2ul << 20,
		.repeat = 3,
		.rand_iters = 1ul << 20,
		.stride_reps = 4,
	};
	struct kl_layout l;
	hpr_region *r = NULL;
	struct result res;
	char msg[512];
	bool set_repeat = false, set_rand = false, set_stride = false;
	int c, kvm, rc;

	while ((c = getopt_long(argc, argv, "m:b:g:vh", lo, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'm':
			o.ram = kl_parse_size(optarg);
			if (!o.ram) {
				fprintf(stderr, "kvm-lite: bad RAM size '%s' (use e.g. 64M, 1G)\n",
					optarg);
				return EXIT_INPUT;
			}
			break;
		case 'b':
			if (parse_backend(optarg, &o.backend)) {
				fprintf(stderr, "kvm-lite: unknown backend '%s' (4k thp shmem "
						"shmem-huge hugetlb)\n", optarg);
				return EXIT_INPUT;
			}
			break;
		case 'g':
			if (!strcmp(optarg, "4k") || !strcmp(optarg, "4K")) {
				o.guest_page = 4096;
			} else if (!strcmp(optarg, "2m") || !strcmp(optarg, "2M")) {
				o.guest_page = 2ul << 20;
			} else {
				fprintf(stderr, "kvm-lite: guest page '%s': use 4k or 2m\n", optarg);
				return EXIT_INPUT;
			}
			break;
		case 'D':
			o.shmem_dir = optarg;
			break;
		case 'M':
			o.matrix = true;
			break;
		case 'F':
			o.fpr = true;
			break;
		case 'S':
			o.snapshot = optarg;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'P':
			/* usable KVM? Scripts decide with this, not with [ -c ] */
			kvm = open_kvm(msg, sizeof(msg));
			if (kvm < 0)
				return EXIT_SKIP;
			close(kvm);
			return 0;
		case 'U':
			o.ud2 = true;
			break;
		case 'J':
			o.json = optarg;
			break;
		case 'Q':
			o.quick = true;
			break;
		case 'r':
		case 'R':
		case 'T':
		case 'w': {
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg || *optarg == '-' ||
			    (c == 'r' && (v < 1 || v > MAXREP)) || (c == 'w' && v > 1024)) {
				fprintf(stderr, "kvm-lite: bad number '%s' for --%s\n", optarg,
					c == 'r' ? "repeat" : c == 'R' ? "rand-iters"
						  : c == 'T' ? "stride-reps" : "workers");
				return EXIT_INPUT;
			}
			if (c == 'r')
				o.repeat = (unsigned)v, set_repeat = true;
			else if (c == 'R')
				o.rand_iters = v, set_rand = true;
			else if (c == 'T')
				o.stride_reps = v, set_stride = true;
			else
				o.workers = (unsigned)v;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_INPUT;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvm-lite: unexpected argument '%s'\n", argv[optind]);
		return EXIT_INPUT;
	}
	if ((o.json || o.quick) && !o.matrix) {
		fprintf(stderr, "kvm-lite: --json and --quick go with --matrix\n");
		return EXIT_INPUT;
	}
	if (o.quick) {
		if (!set_repeat)
			o.repeat = 1;
		if (!set_rand)
			o.rand_iters = 1ul << 18;
		if (!set_stride)
			o.stride_reps = 2;
	}

	/* 1. Everything checkable without KVM. */
	if (o.matrix) {
		for (int i = 0; i < 4; i++)
			for (size_t gp = 4096; gp <= (2ul << 20); gp <<= 9)
				if (kl_layout_init(&l, o.ram, gp, host_page(mx_rows[i]),
						   hb_names[mx_rows[i]], msg, sizeof(msg))) {
					fprintf(stderr, "kvm-lite: %s\n", msg);
					return EXIT_INPUT;
				}
	} else {
		if (kl_layout_init(&l, o.ram, o.guest_page, host_page(o.backend),
				   hb_names[o.backend], msg, sizeof(msg))) {
			fprintf(stderr, "kvm-lite: %s\n", msg);
			return EXIT_INPUT;
		}
		/* The region is created (hugetlb reserved, tmpfs space checked)
		 * before /dev/kvm is opened, so a pool too small is reported
		 * here; it is faulted in only once KVM is there. */
		if (create_ram(&o, o.backend, &r)) {
			cleanup_tmpfs();
			return EXIT_INPUT;
		}
	}

	/* 2. KVM. */
	kvm = open_kvm(msg, sizeof(msg));
	if (kvm < 0) {
		hpr_destroy(r);
		cleanup_tmpfs();
		return EXIT_SKIP;
	}

	if (o.matrix) {
		struct bench_out *out = calloc(1, sizeof(*out));

		if (!out) {
			rc = 1;
		} else {
			rc = run_matrix(&o, kvm, out);
			if (o.fpr)
				rc |= run_fpr_rounds(&o, kvm, out);
			if (o.json && write_json(o.json, &o, msg, out))
				rc = 1;
			free(out);
		}
	} else {
		rc = run_guest(&o, kvm, o.backend, &l, &r, &res);
		if (!rc) {
			rc = print_single(&o, o.backend, &l, r, &res);
			rc |= check_result(&o, &res);
		} else {
			rc = 1;
		}
		hpr_destroy(r);
	}
	close(kvm);
	cleanup_tmpfs();
	if (rc)
		fprintf(stderr, "kvm-lite: FAILED\n");
	return rc ? 1 : 0;
}
