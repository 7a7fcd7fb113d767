/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: getting the vCPU out of KVM_RUN from outside -- SIGINT and
 * SIGTERM (stop the guest cleanly, release VM and RAM), the watchdog (a
 * guest that has not exited to the VMM for --watchdog S seconds is
 * stopped), and the kick that completes a pending I/O before a snapshot.
 *
 * A kick must not be lost between the VMM's last check and its entry into
 * KVM_RUN. Two ways, chosen per VM at run time:
 *  - KVM_CAP_IMMEDIATE_EXIT (Linux 4.11+): the signal handler sets
 *    run->immediate_exit, and a KVM_RUN entered after that returns -EINTR
 *    at once (api.rst, "immediate_exit");
 *  - without it: KL_KICK_SIGNAL is blocked in the thread and unblocked only
 *    inside KVM_RUN (KVM_SET_SIGNAL_MASK); the handler raises it, so it is
 *    pending when KVM_RUN starts, which then returns -EINTR; the VMM eats
 *    it with sigtimedwait afterwards (as QEMU does with SIG_IPI).
 * --test-kick signal-mask forces the second way where the first exists.
 */
#ifndef KVM_LITE_KICK_H
#define KVM_LITE_KICK_H

#include "kvm.h"

#include <signal.h>
#include <stdbool.h>

#define KL_KICK_SIGNAL SIGUSR1

/* Install the handlers for SIGINT, SIGTERM, SIGALRM and KL_KICK_SIGNAL
 * (once per process). force_sigmask: never use immediate_exit. */
int kl_kick_install(bool force_sigmask);
/* Make v kickable: the way it will be kicked (above), said once. 0 or
 * -errno of KVM_SET_SIGNAL_MASK. */
int kl_kick_setup(struct kl_vm *v);
/* v is the vCPU a signal kicks from now on (NULL: none). */
void kl_kick_target(struct kl_vm *v);
/* Kick the target now (from the VMM itself: a snapshot's I/O completion). */
void kl_kick_self(void);
/* After KVM_RUN: clear immediate_exit, eat a pending kick signal. */
void kl_kick_clear(struct kl_vm *v);
/* How v is kicked: "immediate_exit" or "signal mask". */
const char *kl_kick_how(const struct kl_vm *v);

/* SIGINT or SIGTERM asked the VMM to stop: the signal, or 0. */
int kl_stop_signal(void);
/* "SIGINT", "SIGTERM" */
const char *kl_signal_name(int sig);
/* The watchdog: a deadline s seconds from now (0: none); arm it for the
 * time left before a KVM_RUN, disarm after; fired once it passed. */
void kl_watchdog_reset(double s);
void kl_watchdog_arm(void);
void kl_watchdog_disarm(void);
bool kl_watchdog_fired(void);

#endif
