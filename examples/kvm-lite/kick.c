/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: kicks, stop signals and the watchdog (see kick.h). The
 * handlers only set flags and kick: everything else happens in the VMM's
 * run loop after KVM_RUN returned -EINTR.
 */
#define _GNU_SOURCE
#include "kick.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t stop_sig, dog_fired;
static struct kvm_run *volatile target_run;  /* immediate_exit kicks */
static volatile sig_atomic_t target_sigmask; /* signal mask kicks */
static bool force_mask, installed;
static double dog_deadline;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void kick(void)
{
	struct kvm_run *r = target_run;

	if (r)
		r->immediate_exit = 1;
	else if (target_sigmask)
		raise(KL_KICK_SIGNAL); /* blocked here: pending for KVM_RUN */
}

static void on_signal(int sig)
{
	int e = errno;

	if (sig == SIGALRM)
		dog_fired = 1;
	else if (sig == SIGINT || sig == SIGTERM)
		stop_sig = sig;
	if (sig != KL_KICK_SIGNAL)
		kick();
	errno = e;
}

int kl_kick_install(bool force_sigmask)
{
	struct sigaction sa;
	sigset_t s;

	force_mask = force_sigmask;
	if (installed)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART for the stop signals: a blocking call (the checkpoint
	 * pause) returns EINTR and looks at the flag; hpregion retries its
	 * own EINTRs */
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ||
	    sigaction(SIGALRM, &sa, NULL) || sigaction(KL_KICK_SIGNAL, &sa, NULL))
		return -errno;
	/* The kick signal is delivered only inside KVM_RUN (signal mask
	 * kicks) or eaten after it. */
	sigemptyset(&s);
	sigaddset(&s, KL_KICK_SIGNAL);
	if (sigprocmask(SIG_BLOCK, &s, NULL))
		return -errno;
	installed = true;
	return 0;
}

int kl_kick_setup(struct kl_vm *v)
{
	static bool said;
	union {
		struct kvm_signal_mask m;
		char b[sizeof(struct kvm_signal_mask) + 8];
	} km;
	sigset_t set;

	if (force_mask)
		v->immediate_exit = false;
	if (!said && !v->immediate_exit) {
		said = true;
		fprintf(stderr, "kvm-lite: %s: kicks through KVM_SET_SIGNAL_MASK\n",
			force_mask ? "--test-kick signal-mask" :
				     "this KVM lacks KVM_CAP_IMMEDIATE_EXIT");
	}
	if (v->immediate_exit)
		return 0;
	/* inside KVM_RUN: the thread's mask without the kick signal */
	memset(&km, 0, sizeof(km));
	if (sigprocmask(SIG_BLOCK, NULL, &set))
		return -errno;
	sigdelset(&set, KL_KICK_SIGNAL);
	km.m.len = 8; /* the kernel's sigset_t: 64 signals */
	memcpy(km.b + sizeof(struct kvm_signal_mask), &set, 8);
	return ioctl(v->vcpu, KVM_SET_SIGNAL_MASK, &km.m) ? -errno : 0;
}

void kl_kick_target(struct kl_vm *v)
{
	target_run = NULL;
	target_sigmask = 0;
	if (v && v->immediate_exit)
		target_run = v->run;
	else if (v)
		target_sigmask = 1;
	/* a stop asked for before this vCPU was the target */
	if (v && stop_sig)
		kick();
}

void kl_kick_self(void)
{
	kick();
}

void kl_kick_clear(struct kl_vm *v)
{
	if (v->immediate_exit) {
		v->run->immediate_exit = 0;
	} else {
		sigset_t s;
		struct timespec zero = { 0, 0 };

		sigemptyset(&s);
		sigaddset(&s, KL_KICK_SIGNAL);
		while (sigtimedwait(&s, NULL, &zero) == KL_KICK_SIGNAL)
			;
	}
	/* a stop signal stays asked for: kick the next KVM_RUN too */
	if (stop_sig || dog_fired)
		kick();
}

const char *kl_kick_how(const struct kl_vm *v)
{
	return v->immediate_exit ? "immediate_exit" : "signal mask";
}

int kl_stop_signal(void)
{
	return stop_sig;
}

const char *kl_signal_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : strsignal(sig);
}

void kl_watchdog_reset(double s)
{
	dog_deadline = s > 0 ? now_s() + s : 0;
}

void kl_watchdog_arm(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };
	double left;

	if (dog_deadline <= 0)
		return;
	left = dog_deadline - now_s();
	if (left <= 0) {
		dog_fired = 1;
		kick();
		return;
	}
	it.it_value.tv_sec = (time_t)left;
	it.it_value.tv_usec = (suseconds_t)((left - (double)(time_t)left) * 1e6) + 1;
	setitimer(ITIMER_REAL, &it, NULL);
}

void kl_watchdog_disarm(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };

	if (dog_deadline > 0)
		setitimer(ITIMER_REAL, &it, NULL);
}

bool kl_watchdog_fired(void)
{
	return dog_fired;
}
