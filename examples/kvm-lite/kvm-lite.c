/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite — a minimal VMM that backs guest RAM with an hpregion region.
 *
 * Guest RAM is a region (ram.c: every hpregion call the VMM makes), faulted
 * in parallel before the vCPU starts and given to KVM as memory slot 0. The
 * guest (guest.S) builds its own page tables with 4 KiB or 2 MiB leaves,
 * drops to CPL 3 and runs timed loops; it reports to the VMM by port I/O
 * from CPL 0 (run.c serves each port). Free page reporting maps onto
 * hpr_release_lazy()/hpr_reclaim()/hpr_fault_in(), and snapshot/restore
 * onto hpr_save()/hpr_load() plus a vCPU state file. With --keep the RAM
 * is a kept region that outlives the VMM and a new VMM resumes on it with
 * nothing copied (keep.c). --matrix (matrix.c) runs every host backing x
 * guest page size.
 *
 * This file is the command: options, the checks that need no KVM, and one
 * run's report. Everything that can be checked without /dev/kvm (sizes,
 * page-size multiples, whether the hugetlb pool or tmpfs can hold the RAM)
 * is checked first, so bad input is a clear error (exit 2) even where
 * there is no KVM; no usable /dev/kvm is exit 77.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keep.h"
#include "kick.h"
#include "kvm.h"
#include "layout.h"
#include "matrix.h"
#include "ram.h"
#include "run.h"

#define EXIT_OK 0
#define EXIT_INPUT 2
#define EXIT_SKIP 77
#define PARSED (-1) /* parse_args: go on */

static void usage(FILE *f)
{
	fprintf(f, "usage: kvm-lite [options]\n"
		   "  -m, --ram SIZE         guest RAM (default 64M; multiple of 2M, or of\n"
		   "                         the host page size)\n"
		   "  -b, --backend B        host backing: 4k thp shmem shmem-huge hugetlb\n"
		   "                         hugetlb-1g (default thp; shmem/hugetlb are\n"
		   "                         shared fds; hugetlb-1g needs -m in whole GiB)\n"
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
		   "      --restore-lazy     with --snapshot: the restore loads RAM on demand\n"
		   "                         (hpr_load HPR_SNAP_LAZY, userfaultfd) and resumes\n"
		   "                         the vCPU at once; prints the time to the guest's\n"
		   "                         first exit, to all RAM resident, and the demand\n"
		   "      --keep DIR/NAME    guest RAM is the kept region NAME on DIR, a tmpfs\n"
		   "                         mounted huge= or hugetlbfs (the mount decides\n"
		   "                         the backing); needs --snapshot PREFIX: at the\n"
		   "                         checkpoint the vCPU goes to PREFIX.vcpu (not\n"
		   "                         on hugetlbfs) and the RAM stays where it is.\n"
		   "                         PREFIX.vcpu there: resume on the kept RAM\n"
		   "                         (nothing copied), else boot and keep it\n"
		   "      --checkpoint-pause S  with --keep: stop at the checkpoint and wait\n"
		   "                         S seconds (kill -9 it there, or it exits 0);\n"
		   "                         resume later with the same command\n"
		   "      --rand-iters N     random updates (default 1M)\n"
		   "      --stride-reps N    passes of the 4 KiB stride (default 4)\n"
		   "      --workers N        prefault threads (default: one per CPU)\n"
		   "  -v, --verbose          print every guest report\n"
		   "      --watchdog S       stop a guest that has not exited to the VMM for\n"
		   "                         S seconds (default 600; 0: never)\n"
		   "      --test-guest-fault the guest executes ud2 at CPL 3 (tests its\n"
		   "                         IDT/TSS; the run fails with exception 6)\n"
		   "      --test-hostile     the guest sends requests the VMM must refuse or\n"
		   "                         ignore (ranges, ports, MMIO); the run passes only\n"
		   "                         if each was, and the VMM survived them\n"
		   "      --test-guest-hang  the guest spins at CPL 3 and never exits (for\n"
		   "                         --watchdog and SIGINT/SIGTERM)\n"
		   "      --test-no-avx      the guest leaves AVX off as if its CPUID had\n"
		   "                         none (its AVX state goes unchecked, said)\n"
		   "      --test-restore-v2  with --snapshot: restore only regs, sregs, fpu\n"
		   "                         and the host's CPUID, as format 2 did (the\n"
		   "                         guest's checks must fail)\n"
		   "      --test-kick signal-mask  kick KVM_RUN through KVM_SET_SIGNAL_MASK\n"
		   "                         even where KVM_CAP_IMMEDIATE_EXIT exists\n"
		   "      --probe            only say whether /dev/kvm is usable (opens it,\n"
		   "                         creates a VM) and which KVM it is: exit 0 or 77\n"
		   "exit: 0 ok, 1 run failed (the guest crashed, the watchdog stopped it),\n"
		   "2 bad input, 77 no usable /dev/kvm, 128+N stopped by signal N\n"
		   "(SIGINT, SIGTERM: the guest is stopped, VM and RAM released)\n");
}

/* Options into o; PARSED, or the exit code for bad input or --help. */
static int parse_args(int argc, char **argv, struct kl_opts *o, bool *probe, bool *sigmask)
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
		{ "restore-lazy", no_argument, NULL, 'L' },
		{ "keep", required_argument, NULL, 'K' },
		{ "checkpoint-pause", required_argument, NULL, 'W' },
		{ "rand-iters", required_argument, NULL, 'R' },
		{ "stride-reps", required_argument, NULL, 'T' },
		{ "workers", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "test-guest-fault", no_argument, NULL, 'U' },
		{ "test-hostile", no_argument, NULL, 'H' },
		{ "test-guest-hang", no_argument, NULL, 'G' },
		{ "test-restore-v2", no_argument, NULL, 'O' },
		{ "test-no-avx", no_argument, NULL, 'X' },
		{ "test-kick", required_argument, NULL, 'k' },
		{ "watchdog", required_argument, NULL, 'd' },
		{ "json", required_argument, NULL, 'J' },
		{ "quick", no_argument, NULL, 'Q' },
		{ "probe", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool set_repeat = false, set_rand = false, set_stride = false;
	int c;

	while ((c = getopt_long(argc, argv, "m:b:g:vh", lo, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'm':
			o->ram = kl_parse_size(optarg);
			if (!o->ram) {
				fprintf(stderr, "kvm-lite: bad RAM size '%s' (use e.g. 64M, 1G)\n",
					optarg);
				return EXIT_INPUT;
			}
			break;
		case 'b':
			if (kl_backing_parse(optarg, &o->backend)) {
				fprintf(stderr,
					"kvm-lite: unknown backend '%s' (4k thp shmem "
					"shmem-huge hugetlb hugetlb-1g)\n",
					optarg);
				return EXIT_INPUT;
			}
			o->backend_set = true;
			break;
		case 'g':
			if (!strcmp(optarg, "4k") || !strcmp(optarg, "4K")) {
				o->guest_page = 4096;
			} else if (!strcmp(optarg, "2m") || !strcmp(optarg, "2M")) {
				o->guest_page = 2ul << 20;
			} else {
				fprintf(stderr, "kvm-lite: guest page '%s': use 4k or 2m\n",
					optarg);
				return EXIT_INPUT;
			}
			break;
		case 'D':
			o->ram_opts.shmem_dir = optarg;
			break;
		case 'M':
			o->matrix = true;
			break;
		case 'F':
			o->fpr = true;
			break;
		case 'S':
			o->snapshot = optarg;
			break;
		case 'L':
			o->restore_lazy = true;
			break;
		case 'K': {
			static char dir[4096], name[256];

			if (kl_keep_split(optarg, dir, sizeof(dir), name, sizeof(name))) {
				fprintf(stderr,
					"kvm-lite: --keep '%s': give DIR/NAME, a file "
					"NAME in a directory DIR on a tmpfs mounted "
					"huge= or on hugetlbfs\n",
					optarg);
				return EXIT_INPUT;
			}
			o->keep = optarg;
			o->keep_dir = dir;
			o->keep_name = name;
			break;
		}
		case 'W':
			errno = 0;
			o->pause_s = strtod(optarg, &end);
			if (errno || *end || end == optarg ||
			    !(o->pause_s >= 0 && o->pause_s <= 86400)) {
				fprintf(stderr,
					"kvm-lite: bad --checkpoint-pause '%s': seconds, "
					"0 to 86400\n",
					optarg);
				return EXIT_INPUT;
			}
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'P':
			*probe = true;
			break;
		case 'U':
			o->ud2 = true;
			break;
		case 'H':
			o->hostile = true;
			break;
		case 'G':
			o->hang = true;
			break;
		case 'O':
			o->test_partial = true;
			break;
		case 'X':
			o->no_avx = true;
			break;
		case 'k':
			if (strcmp(optarg, "signal-mask")) {
				fprintf(stderr,
					"kvm-lite: --test-kick signal-mask is the only one\n");
				return EXIT_INPUT;
			}
			*sigmask = true;
			break;
		case 'd':
			errno = 0;
			o->watchdog_s = strtod(optarg, &end);
			if (errno || *end || end == optarg ||
			    !(o->watchdog_s >= 0 && o->watchdog_s <= 86400)) {
				fprintf(stderr,
					"kvm-lite: bad --watchdog '%s': seconds, 0 (never) to "
					"86400\n",
					optarg);
				return EXIT_INPUT;
			}
			break;
		case 'J':
			o->json = optarg;
			break;
		case 'Q':
			o->quick = true;
			break;
		case 'r':
		case 'R':
		case 'T':
		case 'w': {
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg || *optarg == '-' ||
			    (c == 'r' && (v < 1 || v > KL_MAXREP)) || (c == 'w' && v > 1024)) {
				fprintf(stderr, "kvm-lite: bad number '%s' for --%s\n", optarg,
					c == 'r' ? "repeat" :
					c == 'R' ? "rand-iters" :
					c == 'T' ? "stride-reps" :
						   "workers");
				return EXIT_INPUT;
			}
			if (c == 'r')
				o->repeat = (unsigned)v, set_repeat = true;
			else if (c == 'R')
				o->rand_iters = v, set_rand = true;
			else if (c == 'T')
				o->stride_reps = v, set_stride = true;
			else
				o->ram_opts.workers = (unsigned)v;
			break;
		}
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_INPUT;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvm-lite: unexpected argument '%s'\n", argv[optind]);
		return EXIT_INPUT;
	}
	if ((o->json || o->quick) && !o->matrix) {
		fprintf(stderr, "kvm-lite: --json and --quick go with --matrix\n");
		return EXIT_INPUT;
	}
	if (o->keep && (!o->snapshot || o->matrix)) {
		fprintf(stderr, "kvm-lite: --keep needs --snapshot PREFIX (the vCPU's file) "
				"and runs one guest, not --matrix\n");
		return EXIT_INPUT;
	}
	if (o->restore_lazy && (!o->snapshot || o->keep || o->matrix)) {
		fprintf(stderr, "kvm-lite: --restore-lazy goes with --snapshot PREFIX (not --keep: "
				"kept RAM is not loaded at all; not --matrix)\n");
		return EXIT_INPUT;
	}
	if (o->test_partial && !o->snapshot) {
		fprintf(stderr, "kvm-lite: --test-restore-v2 goes with --snapshot\n");
		return EXIT_INPUT;
	}
	if (o->pause_s >= 0 && !o->keep) {
		fprintf(stderr, "kvm-lite: --checkpoint-pause goes with --keep\n");
		return EXIT_INPUT;
	}
	if (o->quick) {
		if (!set_repeat)
			o->repeat = 1;
		if (!set_rand)
			o->rand_iters = 1ul << 18;
		if (!set_stride)
			o->stride_reps = 2;
	}

	return PARSED;
}

/* --snapshot: how long the restore took the guest back to work, from its
 * start (old VM and RAM gone) to the guest's first exit after the resume,
 * and, for a lazy load, what the guest demanded. The VMM reads no guest
 * RAM between the restore and the guest's checksum report (it checks the
 * guest's sum against its own only after the guest has read every page),
 * so the demand is the guest's. */
static void print_restore(const struct kl_opts *o, const struct kl_result *res)
{
	const struct kl_restore *rs = &res->rs;
	const struct kl_lazy_info *z = &rs->lazy;
	size_t pg = res->restored_page ? res->restored_page : 4096;

	printf("restore (%s): first guest exit %.2f ms after the restore began (RAM created "
	       "%.2f, hpr_load returned %.2f, VM + vCPU %.2f, first KVM_RUN %.2f ms); every "
	       "saved page resident at %.2f ms (%s); the guest's checksum of all its data at "
	       "%.2f ms\n",
	       !o->restore_lazy ? "eager" :
	       z->on_demand	? "lazy, userfaultfd" :
				  "lazy asked, eager ran",
	       rs->first_exit, rs->created, rs->loaded, rs->vm, rs->entered, rs->resident,
	       z->on_demand ? "hpr_load_wait" : "hpr_load", rs->sum);
	if (!o->restore_lazy)
		return;
	if (!z->on_demand) {
		printf("lazy load fell back to an eager load: hpr_stats lazy_load eager, "
		       "lazy_fallback_err %d (%s): no userfaultfd for this process\n",
		       z->fallback_err, strerror(-z->fallback_err));
		return;
	}
	printf("lazy load (hpr_stats lazy_load uffd): demanded %zu KiB (%zu pages of %zu KiB) by "
	       "the first exit, %zu MiB (%zu pages) in all; loaded %zu of %zu MiB saved: %s\n",
	       rs->demanded_first_exit >> 10, rs->demanded_first_exit / pg, pg >> 10,
	       z->demanded >> 20, z->demanded / pg, z->loaded >> 20, z->total >> 20,
	       z->err			  ? kl_ram_error(z->err) :
	       z->loaded == z->total ? "completed" :
				       "INCOMPLETE");
}

/* Print one run; returns 1 if the second-process check failed. */
static int print_single(const struct kl_opts *o, const struct kl_layout *l,
			const struct kl_ram *ram, const struct kl_result *res)
{
	char desc[128];
	int bad = 0;

	static const unsigned evs[] = { KL_EV_MEMSET1, KL_EV_MEMSET2, KL_EV_STRIDE, KL_EV_RANDOM };

	kl_ram_describe(ram, desc, sizeof(desc));
	printf("host %s (%s), guest %s pages (page-table walk: %s), %zu MiB RAM, %zu MiB measured\n",
	       kl_backing_names[ram->backing], desc, l->guest_page == 4096 ? "4 KiB" : "2 MiB",
	       res->guest_leaf == 4096 ? "4 KiB" :
	       res->guest_leaf	       ? "2 MiB" :
					 "?",
	       l->ram >> 20, l->data_len >> 20);
	if (res->have[KL_EV_SETUP]) {
		printf("prefault %.1f ms; guest setup at CPL 0: %.2f Mcycles\n", res->prefault_ms,
		       kl_mc(res->ev[KL_EV_SETUP]));
		for (unsigned i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
			printf("  %-8s %10.2f Mcycles\n", kl_ev_name(evs[i]),
			       kl_mc(res->ev[evs[i]]));
	} else {
		printf("resumed at checkpoint %llu on kept RAM: the guest's loops ran before the "
		       "stop\n",
		       (unsigned long long)o->keep_run->rec.checkpoint);
	}
	printf("host coverage: %zu of %zu MiB huge-mapped (%.0f%%), resident %zu MiB\n",
	       res->st.huge_mapped >> 20, res->st.size >> 20,
	       res->st.size ? 100.0 * (double)res->st.huge_mapped / (double)res->st.size : 0.0,
	       res->st.resident >> 20);
	if (res->have[KL_EV_CHECKSUM])
		printf("checksum %#llx: %s\n", (unsigned long long)res->ev[KL_EV_CHECKSUM],
		       res->sum_mismatch ? "MISMATCH with the host view" :
					   "matches the host view of guest RAM");
	if (o->fpr && res->have[KL_EV_CHECKSUM_FPR]) {
		double w = (double)res->ev[KL_EV_FPR_WARM];

		printf("free page reporting, %zu MiB: refill warm %.2f Mc; after release_lazy "
		       "%.2f ms + fault_in %.2f ms: %.2f Mc (%.2fx); after release+reclaim "
		       "%.2f ms + fault_in %.2f ms: %.2f Mc (%.2fx); lazily released per "
		       "hpr_stats: %zu MiB\n",
		       l->fpr_len >> 20, kl_mc(res->ev[KL_EV_FPR_WARM]), res->release_ms[0],
		       res->acquire_ms[0], kl_mc(res->ev[KL_EV_FPR_LAZY]),
		       w ? (double)res->ev[KL_EV_FPR_LAZY] / w : 0, res->release_ms[1],
		       res->acquire_ms[1], kl_mc(res->ev[KL_EV_FPR_RECLAIMED]),
		       w ? (double)res->ev[KL_EV_FPR_RECLAIMED] / w : 0,
		       res->lazy_after_release >> 20);
		printf("checksum after reuse %#llx: %s\n",
		       (unsigned long long)res->ev[KL_EV_CHECKSUM_FPR],
		       res->sum_mismatch ? "MISMATCH" : "matches the host view");
	}
	if (o->hostile)
		printf("hostile guest: %d guest requests refused, %llu seen refused by the guest, "
		       "%u accesses ignored; the VMM ran on\n",
		       res->bad_requests, (unsigned long long)res->ev[KL_EV_HOSTILE], res->ignored);
	if (kl_ram_fd(ram) >= 0 && !res->stopped) {
		uint64_t last = o->snapshot ? res->ev[KL_EV_CHECKSUM_RESTORED] :
				o->fpr	    ? res->ev[KL_EV_CHECKSUM_FPR] :
					      res->ev[KL_EV_CHECKSUM];
		int k = kl_ram_other_process_sees(ram, l->data, l->data_len, last);

		bad = k != 1;

		printf("another process mapping hpr_fd(): %s\n",
		       k == 1 ? "sees the guest's memory (same checksum)" :
		       k == 0 ? "SEES OTHER DATA" :
				strerror(-k));
	}
	if (res->stopped)
		printf("stopped at the checkpoint; the kept RAM %s and %s.vcpu resume with the "
		       "same command\n",
		       o->keep, o->snapshot);
	else if (o->keep)
		printf("kept RAM: %s the vCPU on %s (%s RAM, %zu KiB pages), nothing copied; "
		       "guest checksum after the resume %#llx: %s\n",
		       o->keep_run->reattaches ? "stopped, re-attached and resumed" : "resumed",
		       o->keep, kl_backing_names[res->restored_backing], res->restored_page >> 10,
		       (unsigned long long)res->ev[KL_EV_CHECKSUM_RESTORED],
		       !res->restored			   ? "NOT RESUMED" :
		       !res->have[KL_EV_CHECKSUM_RESTORED] ? "NOT REPORTED" :
		       res->restored_mismatch		   ? "DIFFERS from before the stop" :
							     "identical to before the stop");
	else if (o->snapshot)
		printf("snapshot: hpr_save %.1f ms, hpr_load %.1f ms, restored into a new VM "
		       "(%s RAM, %zu KiB pages); checksum after restore %#llx: %s\n",
		       res->save_ms, res->load_ms, kl_backing_names[res->restored_backing],
		       res->restored_page >> 10,
		       (unsigned long long)res->ev[KL_EV_CHECKSUM_RESTORED],
		       !res->restored	      ? "NOT RESTORED" :
		       res->restored_mismatch ? "DIFFERS from before the snapshot" :
						"identical to before the snapshot");
	if (o->snapshot && !o->keep && res->restored)
		print_restore(o, res);
	return bad;
}

/* Open a usable KVM and say which one, or say why there is none. */
static int open_kvm(char *msg, size_t len)
{
	int kvm = kl_kvm_open();

	if (kvm < 0) {
		fprintf(stderr, "kvm-lite: SKIP: no usable /dev/kvm: %s — %s\n", strerror(-kvm),
			kvm == -ENOENT || kvm == -ENODEV || kvm == -ENXIO ?
				"this machine offers no KVM (no vmx/svm, module not loaded, "
				"or a KVM that cannot create VMs); run it on a KVM host or in "
				"a nested guest (docs/kvm-lite-nested.md)" :
			kvm == -EPROTO ? "unexpected KVM API version" :
			kvm == -EACCES || kvm == -EPERM ?
					 "not permitted: run as root or join the kvm group" :
					 "KVM_CREATE_VM failed");
		return kvm;
	}
	kl_kvm_describe(kvm, msg, len);
	printf("kvm-lite %s on KVM: %s\n", kl_ram_version(), msg);
	return kvm;
}

/* One guest on ram (created already); 0 when it ran and every check held. */
static int run_single(const struct kl_opts *o, int kvm, const struct kl_layout *l,
		      struct kl_ram *ram)
{
	struct kl_result res;
	int rc = kl_run_guest(o, kvm, l, ram, &res);

	if (rc)
		return 1;
	rc = print_single(o, l, ram, &res);
	return rc | kl_check_result(o, &res);
}

/* The checks that need no KVM: the layout of every configuration that will
 * run, and for one run its RAM, created (hugetlb reserved, tmpfs space
 * checked) but not faulted in, so a pool too small is reported before
 * /dev/kvm is opened. */
static int check_input(const struct kl_opts *o, struct kl_layout *l, struct kl_ram *ram)
{
	char msg[512];

	if (o->matrix) {
		if (kl_matrix_check(o, msg, sizeof(msg))) {
			fprintf(stderr, "kvm-lite: %s\n", msg);
			return EXIT_INPUT;
		}
		return PARSED;
	}
	if (o->keep) {
		enum kl_backing b;
		size_t page;

		/* the mount decides the backing and the page size */
		if (kl_keep_check_paths(o, &b, &page, msg, sizeof(msg))) {
			fprintf(stderr, "kvm-lite: %s\n", msg);
			return EXIT_INPUT;
		}
		if (kl_layout_init(l, o->ram, o->guest_page, page, kl_backing_names[b], msg,
				   sizeof(msg))) {
			fprintf(stderr, "kvm-lite: %s\n", msg);
			return EXIT_INPUT;
		}
		/* boot, or resume: attached, checked, faulted in, before KVM */
		return kl_keep_open(o, l, ram) ? EXIT_INPUT : PARSED;
	}
	if (o->snapshot && kl_snapshot_check_path(o->snapshot, msg, sizeof(msg))) {
		fprintf(stderr, "kvm-lite: %s\n", msg);
		return EXIT_INPUT;
	}
	if (kl_layout_init(l, o->ram, o->guest_page, kl_backing_page(o->backend),
			   kl_backing_names[o->backend], msg, sizeof(msg))) {
		fprintf(stderr, "kvm-lite: %s\n", msg);
		return EXIT_INPUT;
	}
	return kl_ram_create(ram, o->backend, o->ram, &o->ram_opts) ? EXIT_INPUT : PARSED;
}

int main(int argc, char **argv)
{
	struct kl_opts o = {
		.ram = 64ul << 20,
		.backend = KB_THP,
		.guest_page = 2ul << 20,
		.repeat = 3,
		.rand_iters = 1ul << 20,
		.stride_reps = 4,
		.pause_s = -1,
		.watchdog_s = 600,
	};
	struct kl_keep_run keep_run = { 0 };
	struct kl_layout l;
	struct kl_ram ram = { 0 };
	char msg[512];
	bool probe = false, sigmask = false;
	int kvm, rc, sig;

	o.keep_run = &keep_run;
	if ((rc = parse_args(argc, argv, &o, &probe, &sigmask)) != PARSED)
		return rc;
	/* SIGINT/SIGTERM from here on stop the guest and release everything */
	if ((rc = kl_kick_install(sigmask))) {
		fprintf(stderr, "kvm-lite: signal handlers: %s\n", strerror(-rc));
		return 1;
	}
	if (!probe && (rc = check_input(&o, &l, &ram)) != PARSED) {
		kl_ram_cleanup();
		return rc;
	}
	kvm = open_kvm(msg, sizeof(msg));
	if (kvm < 0 || probe) {
		/* --probe: usable KVM? Scripts decide with this, not with [ -c ] */
		if (kvm >= 0)
			close(kvm);
		if (o.keep)
			kl_keep_abandon(&o, &ram); /* a kept file just made: not kept */
		kl_ram_destroy(&ram);
		kl_ram_cleanup();
		return kvm < 0 ? EXIT_SKIP : EXIT_OK;
	}
	if (o.matrix)
		rc = kl_matrix(&o, kvm, msg);
	else
		rc = run_single(&o, kvm, &l, &ram);
	kl_ram_destroy(&ram);
	close(kvm);
	kl_ram_cleanup();
	if ((sig = kl_stop_signal())) {
		fprintf(stderr, "kvm-lite: stopped by %s; VM and guest RAM released\n",
			kl_signal_name(sig));
		return 128 + sig;
	}
	if (rc)
		fprintf(stderr, "kvm-lite: FAILED\n");
	return rc ? 1 : EXIT_OK;
}
