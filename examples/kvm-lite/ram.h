/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite guest RAM: the whole of the VMM's use of hpregion, as
 * cassandra-like's mem.c is the whole of the store's. A VMM author reads
 * this file to see which hpregion call serves which VMM need:
 *
 *   guest RAM of a chosen backing      kl_ram_create      hpr_create
 *   RAM faulted in before the vCPU     kl_ram_prefault    hpr_fault_in
 *   free page reporting                kl_ram_report_free hpr_release_lazy (+ hpr_reclaim)
 *   reuse of reported memory           kl_ram_acquire     hpr_fault_in
 *   snapshot / restore                 kl_ram_save/_load  hpr_save / hpr_load
 *   restore on demand (--restore-lazy) kl_ram_load_lazy   hpr_load(HPR_SNAP_LAZY),
 *                                      kl_ram_load_end    hpr_load_wait, hpr_load_progress
 *   "is my guest really huge?"         kl_ram_stats       hpr_stats (smaps)
 *   RAM another process maps           kl_ram_fd          hpr_fd (shmem, hugetlb)
 *   RAM that outlives the VMM (--keep) kl_ram_keep        hpr_create HPR_F_ATTACH(_ONLY),
 *                                                         hpr_attached
 *
 * Errors are printed here with the library's advice (hpr_strerror), so
 * callers only pass the -errno on.
 */
#ifndef KVM_LITE_RAM_H
#define KVM_LITE_RAM_H

#include <hpregion/hpregion.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Host backings of guest RAM, as the command line names them. */
enum kl_backing {
	KB_4K,	       /* private anonymous, MADV_NOHUGEPAGE: the baseline */
	KB_THP,	       /* private anonymous, THP */
	KB_SHMEM,      /* memfd, made huge by MADV_COLLAPSE */
	KB_SHMEM_HUGE, /* file on a tmpfs mounted huge=always */
	KB_HUGETLB,    /* MFD_HUGETLB memfd, reserved at create */
	KB_HUGETLB_1G, /* the same on 1 GiB pages (RAM a multiple of 1 GiB) */
	KB_N
};

extern const char *const kl_backing_names[KB_N];

/* "4k", "thp", ... -> the backing; -1 if unknown. */
int kl_backing_parse(const char *s, enum kl_backing *b);
/* The host page size a backing gets: 4 KiB, or the huge page size. */
size_t kl_backing_page(enum kl_backing b);

struct kl_ram_waiter;

struct kl_ram {
	hpr_region *r;
	enum kl_backing backing;
	void *base;
	size_t size;
	struct kl_ram_waiter *waiter; /* a lazy load's hpr_load_wait thread */
};

struct kl_ram_opts {
	const char *shmem_dir; /* a tmpfs huge=always for KB_SHMEM_HUGE, or NULL:
				* a private one in a new mount namespace */
	unsigned workers;      /* prefault threads, 0: one per CPU */
};

/* Create (not fault in) guest RAM. Nothing is touched yet, but hugetlb is
 * reserved and tmpfs space checked, so a short pool fails here. */
int kl_ram_create(struct kl_ram *ram, enum kl_backing b, size_t size, const struct kl_ram_opts *o);
void kl_ram_destroy(struct kl_ram *ram);
/* --keep: guest RAM as the kept region dir/name (a tmpfs mounted huge= or
 * hugetlbfs; the backing follows the mount). attach_only: it must exist
 * (-ENOENT otherwise); else it is attached if it exists and created if
 * not. Shared, so the guest's writes go to the file and outlive the VMM.
 * Not faulted in; *attached says which happened, *ms how long
 * hpr_create took. */
int kl_ram_keep(struct kl_ram *ram, const char *dir, const char *name, size_t size,
		const struct kl_ram_opts *o, bool attach_only, bool *attached, double *ms);
/* The backing file's allocated 512-byte blocks (st_blocks), or -errno. */
long long kl_ram_file_blocks(const struct kl_ram *ram);
/* Unmount the private tmpfs, if kl_ram_create made one. */
void kl_ram_cleanup(void);

/* Fault all RAM in (parallel); *ms: how long it took. */
int kl_ram_prefault(struct kl_ram *ram, double *ms);
/* The guest reported [gpa, gpa+len) free: release it lazily, and with
 * reclaim also give it back to the host now (what pressure would do). */
int kl_ram_report_free(struct kl_ram *ram, size_t gpa, size_t len, bool reclaim);
/* The guest is about to reuse [gpa, gpa+len). */
int kl_ram_acquire(struct kl_ram *ram, size_t gpa, size_t len);
int kl_ram_save(struct kl_ram *ram, int fd);
int kl_ram_load(struct kl_ram *ram, int fd);

/* --restore-lazy: what the lazy load did. Times are CLOCK_MONOTONIC
 * milliseconds (the caller subtracts its own start). */
struct kl_lazy_info {
	bool on_demand;		/* userfaultfd: pages arrive on first touch */
	int fallback_err;	/* !on_demand: why hpregion loaded eagerly (-errno) */
	double returned_at;	/* hpr_load returned */
	double resident_at;	/* hpr_load_wait returned: every saved page mapped */
	int err;		/* the load's result (hpr_load_wait) */
	size_t loaded, demanded, total; /* hpr_load_progress at kl_ram_load_end */
};
/* Load the snapshot on demand (hpr_load with HPR_SNAP_LAZY): returns once
 * it is checked and the RAM registered with userfaultfd, so the vCPU can
 * run while a thread of this file waits for the end (hpr_load_wait); where
 * userfaultfd cannot be had, hpregion loads eagerly and says why. The RAM
 * must be fresh (kl_ram_create, nothing faulted in). */
int kl_ram_load_lazy(struct kl_ram *ram, int fd, struct kl_lazy_info *li);
/* Bytes of saved pages loaded because something touched them, so far. */
size_t kl_ram_load_demanded(struct kl_ram *ram);
/* Wait for the lazy load's end (cancel: cancel it first, for a VMM that
 * gives up on its guest); li gets its result, the time every saved page
 * was resident and the final progress. 0 (also for a load this call
 * cancelled) or the load's -errno. */
int kl_ram_load_end(struct kl_ram *ram, struct kl_lazy_info *li, bool cancel);
int kl_ram_stats(struct kl_ram *ram, struct hpr_stats *st);
/* Bytes hpregion counts as lazily released right now (0 if unknown). */
size_t kl_ram_lazy(struct kl_ram *ram);
/* hpregion's version, for the banner. */
const char *kl_ram_version(void);
/* The library's explanation of an error a kl_ram_* call returned. */
const char *kl_ram_error(int rc);
/* The RAM's host page size (hpr_page_size, at least 4 KiB): what a
 * release or fault-in range must be a multiple of. */
size_t kl_ram_page(const struct kl_ram *ram);
/* Bytes of the RAM huge-mapped right now (smaps), 0 if unknown. */
size_t kl_ram_huge_mapped(struct kl_ram *ram);
/* The fd another process can map, or -1 (private RAM). */
int kl_ram_fd(const struct kl_ram *ram);
/* "hpregion thp, 2 MiB pages, private" */
void kl_ram_describe(const struct kl_ram *ram, char *buf, size_t len);

/* The point of a shared fd for a VMM: another process (a vhost-user
 * backend, a migration helper) maps the same RAM. A child maps kl_ram_fd()
 * and checksums [off, off+len): 1 it matches want, 0 it differs, -errno
 * when it could not check. */
int kl_ram_other_process_sees(const struct kl_ram *ram, size_t off, size_t len, uint64_t want);

#endif
