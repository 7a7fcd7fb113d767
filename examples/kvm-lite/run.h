/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: one guest run — load the guest program into RAM, create the
 * VM, run the vCPU and serve its exits (one handler per exit reason and
 * port) until the guest says DONE; snapshot/restore at its checkpoint.
 */
#ifndef KVM_LITE_RUN_H
#define KVM_LITE_RUN_H

#include "keeprec.h"
#include "layout.h"
#include "ram.h"

#include <stdbool.h>
#include <stdint.h>

#define KL_NEV 16	     /* guest report events, KL_EV_* < KL_NEV */
#define KL_HOSTILE_REFUSED 8 /* --test-hostile: requests the guest must see refused */
#define KL_HOSTILE_IGNORED 5 /* and port accesses ignored, + 2 MMIO where RAM < 1 GiB - 2 MiB */

/* --keep: what the kept RAM was found to be and what re-attaching cost,
 * for one start of the VMM or a re-attach at the checkpoint (keep.c). */
struct kl_keep_run {
	bool resume;		   /* RAM attached, the vCPU from PREFIX.vcpu */
	uint64_t id;		   /* the kept RAM's id */
	struct kl_vcpu_state vcpu; /* resume: the state to load */
	struct kl_keep_rec rec;	   /* resume: the record as found */
	double create_ms, prefault_ms, sum_ms, restore_ms;
	long long blocks[2]; /* the kept file's st_blocks: before the attach,
			      * after the prefault */
	long long mem[2][2]; /* Shmem, ShmemHugePages kB (shmem) or free huge
			      * pages (hugetlb): before, after */
	size_t huge_mapped;  /* smaps, after the prefault */
	uint64_t ram_sum;    /* recomputed after the attach */
	unsigned reattaches; /* in this process, at the checkpoint */
};

struct kl_opts {
	size_t ram;
	enum kl_backing backend;
	size_t guest_page;
	struct kl_ram_opts ram_opts;
	const char *snapshot; /* PREFIX: pause at the checkpoint, save, restore */
	bool restore_lazy;    /* --restore-lazy: the restore loads RAM on demand */
	const char *keep;     /* --keep DIR/NAME: guest RAM is a kept region */
	const char *keep_dir, *keep_name;
	double pause_s;		      /* --checkpoint-pause S: stop there, or < 0 */
	struct kl_keep_run *keep_run; /* --keep: this run's kept-RAM state */
	bool backend_set;	      /* -b given */
	bool matrix, fpr, verbose, ud2, quick;
	bool hostile;	   /* --test-hostile: the guest sends bad requests */
	bool hang;	   /* --test-guest-hang: the guest never exits */
	bool no_avx;	   /* --test-no-avx: the guest leaves AVX off */
	bool test_partial; /* --test-restore-v2: restore only regs/sregs/fpu */
	double watchdog_s; /* --watchdog S: stop a guest that has not exited
			    * for S seconds (0: never) */
	const char *json;
	unsigned repeat;
	uint64_t rand_iters, stride_reps;
};

/* --snapshot: the restore's timeline, in ms from its start (the old VM and
 * RAM gone, nothing of the new made yet). */
struct kl_restore {
	double created;	   /* new RAM created */
	double loaded;	   /* hpr_load returned */
	double vm;	   /* new VM, vCPU state loaded and read back */
	double entered;	   /* the first KVM_RUN after the restore is entered */
	double first_exit; /* the guest's first exit after the resume: its
			    * first port write (CPL 0 code, stack, tables
			    * touched) */
	double sum;	   /* the guest reports its checksum of all its data
			    * (it has read every page of it by then) */
	double resident;   /* every saved page mapped: hpr_load (eager) or
			    * hpr_load_wait (lazy) returned */
	size_t demanded_first_exit; /* lazy: bytes demanded by the first exit */
	struct kl_lazy_info lazy;   /* --restore-lazy: what the load did */
};

struct kl_result {
	uint64_t ev[KL_NEV];
	bool have[KL_NEV];
	double prefault_ms, release_ms[2], acquire_ms[2], save_ms, load_ms;
	size_t lazy_after_release;
	size_t guest_leaf; /* leaf size the guest really mapped data with */
	struct hpr_stats st;
	int sum_mismatch;      /* guest checksum != host view of its RAM */
	int restored_mismatch; /* checksum after restore != before */
	int bad_requests;      /* guest requests refused as out of range */
	int host_errors;       /* guest requests hpregion failed (-errno to the guest) */
	unsigned ignored;      /* accesses the policy ignores (run.c) */
	uint64_t vstate_bad;   /* KL_VS_* the guest found changed after the restore
				 * (CPL 3's shifted by 16) */
	int stop_signal;       /* SIGINT/SIGTERM stopped the run */
	bool watchdog;	       /* the watchdog stopped the run */
	bool restored;
	bool stopped;			  /* --checkpoint-pause: stopped at the checkpoint */
	enum kl_backing restored_backing; /* --snapshot: the new RAM's backing */
	size_t restored_page;		  /* and its page size */
	struct kl_restore rs;		  /* --snapshot: the restore's timeline */
};

/* Run the guest on ram (with --snapshot, ram is a new region afterwards).
 * 0 or -errno (a message is printed). */
int kl_run_guest(const struct kl_opts *o, int kvm, const struct kl_layout *l, struct kl_ram *ram,
		 struct kl_result *res);
/* 0 when every check of a finished run held (checksums, page walk,
 * restore), 1 otherwise. */
int kl_check_result(const struct kl_opts *o, const struct kl_result *res);
const char *kl_ev_name(unsigned ev);
static inline double kl_mc(uint64_t cycles)
{
	return (double)cycles / 1e6;
}

#endif
