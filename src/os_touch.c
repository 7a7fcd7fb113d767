/* SPDX-License-Identifier: MIT */
/*
 * The populate fallback for kernels without MADV_POPULATE_WRITE (< 5.14):
 * write-touch one byte per step, catching the SIGBUS a short hugetlb pool or
 * a full tmpfs raises. The SIGBUS handler is installed once, chained: a
 * SIGBUS that is not at an address this thread is touching goes to the
 * handler that was there before (or to the default action), so the host
 * application's own SIGBUS handling keeps working.
 */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

struct touch_ctx {
	sigjmp_buf jb;
	uintptr_t lo, hi;
	volatile sig_atomic_t active;
};

static __thread struct touch_ctx *tls_touch;
static struct sigaction old_bus;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static int bus_install_err;

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
	struct touch_ctx *t = tls_touch;
	uintptr_t a = (uintptr_t)si->si_addr;

	if (t && t->active && a >= t->lo && a < t->hi) {
		t->active = 0;
		siglongjmp(t->jb, 1);
	}
	/* not ours: forward */
	if (old_bus.sa_flags & SA_SIGINFO) {
		if (old_bus.sa_sigaction) {
			old_bus.sa_sigaction(sig, si, uc);
			return;
		}
	} else if (old_bus.sa_handler != SIG_DFL &&
		   old_bus.sa_handler != SIG_IGN) {
		old_bus.sa_handler(sig);
		return;
	}
	/* default action: restore it and let the fault re-trigger */
	signal(SIGBUS, SIG_DFL);
	if (si->si_code <= 0)
		raise(SIGBUS);
}

static void bus_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = bus_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &old_bus))
		bus_install_err = -errno;
}

int hpr__os_touch(void *addr, size_t len, size_t step_in)
{
	struct touch_ctx ctx;
	volatile char *p = addr;
	volatile size_t i;
	volatile size_t step = step_in;

	pthread_once(&bus_once, bus_install);
	if (bus_install_err)
		return bus_install_err;
	if (!step)
		step = 4096;
	memset(&ctx, 0, sizeof(ctx));
	ctx.lo = (uintptr_t)addr;
	ctx.hi = (uintptr_t)addr + len;
	tls_touch = &ctx;
	if (sigsetjmp(ctx.jb, 1)) {
		tls_touch = NULL;
		return -EFAULT;
	}
	ctx.active = 1;
	for (i = 0; i < len; i += step) {
		/* an atomic add of 0 write-faults the page and keeps data
		 * that another thread writes concurrently */
		__atomic_fetch_add((char *)&p[i], 0, __ATOMIC_RELAXED);
	}
	ctx.active = 0;
	tls_touch = NULL;
	return 0;
}
