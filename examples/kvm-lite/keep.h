/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite --keep DIR/NAME: guest RAM that outlives the VMM. The RAM is a
 * kept hpregion region (HPR_F_ATTACH, shared) on a tmpfs mounted huge= or
 * on hugetlbfs; at the guest's checkpoint the VMM writes the vCPU to
 * PREFIX.vcpu (--snapshot PREFIX) and marks the checkpoint record in guest
 * RAM STOPPED (keeprec.h). A later VMM -- after a clean stop or a kill -9
 * -- re-attaches to the same file: nothing is copied or zeroed, the RAM is
 * checked against the record and the vCPU resumes where it stopped.
 *
 * Whether a start boots or resumes is PREFIX.vcpu's presence:
 *   no PREFIX.vcpu, no kept file   boot; the RAM is created and kept
 *   PREFIX.vcpu and the kept file  resume, if the record allows it
 *   one without the other          refused (exit 2), before /dev/kvm
 */
#ifndef KVM_LITE_KEEP_H
#define KVM_LITE_KEEP_H

#include "run.h"

#include <stddef.h>

/* Checks that need no file of the run yet: DIR is a tmpfs or hugetlbfs
 * (*backing, *page: what RAM there gets), PREFIX.vcpu is not on hugetlbfs
 * (no write(2) there), -b agrees with DIR. 0 or -errno with msg. */
int kl_keep_check_paths(const struct kl_opts *o, enum kl_backing *backing, size_t *page, char *msg,
			size_t len);
/* A plain --snapshot's files cannot be on hugetlbfs either. */
int kl_snapshot_check_path(const char *prefix, char *msg, size_t len);

/* Boot or resume (above): create or attach the RAM; on resume read
 * PREFIX.vcpu, fault the RAM in (MADV_POPULATE_READ: nothing written),
 * check the record and recompute the RAM checksum, measuring what it
 * costs and what it allocates (o->keep_run). 0, or -errno with a
 * message printed and nothing left mapped. */
int kl_keep_open(const struct kl_opts *o, const struct kl_layout *l, struct kl_ram *ram);
/* Boot: a new record (RUNNING, checkpoint 0) in the fresh RAM. */
void kl_keep_boot(const struct kl_opts *o, const struct kl_layout *l, struct kl_ram *ram);
/* The guest is at its checkpoint and st holds its vCPU: write PREFIX.vcpu
 * (a new file renamed over the old one), then mark the record STOPPED
 * with the RAM's checksum. 0 or -errno. */
int kl_keep_stop(const struct kl_opts *o, struct kl_ram *ram, struct kl_vcpu_state *st,
		 uint64_t guest_sum);
/* The vCPU is about to run on the RAM: mark the record RUNNING. */
void kl_keep_running(struct kl_ram *ram);
/* Boot, but no usable KVM: remove the kept file kl_keep_open() has just
 * made, so that the next start does not find RAM without a checkpoint. */
void kl_keep_abandon(const struct kl_opts *o, struct kl_ram *ram);
/* What re-attaching cost and what it proved (after the VM is restored). */
void kl_keep_print(const struct kl_opts *o, const struct kl_ram *ram);

#endif
