/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite --matrix: host backing x guest page size, and (--fpr) free page
 * reporting rounds per backing; interleaved rounds, medians, a table on the
 * terminal and bench/run's JSON.
 */
#ifndef KVM_LITE_MATRIX_H
#define KVM_LITE_MATRIX_H

#include "run.h"

#define KL_MAXREP 32 /* most --repeat rounds */

/* Run the matrix (and the FPR rounds with o->fpr); write o->json if set.
 * kvm_desc names the KVM for the JSON. 0 when every cell that could run
 * passed its checks, 1 otherwise; a cell that cannot run here (a short
 * hugetlb pool) says so in its row and in the JSON (bench/run decides). */
int kl_matrix(const struct kl_opts *o, int kvm, const char *kvm_desc);

/* The layout of every matrix cell for o->ram; -EINVAL with what to use
 * instead in msg. Needs no KVM. */
int kl_matrix_check(const struct kl_opts *o, char *msg, size_t len);

#endif
