/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD shim for tests/kvmlite-guest.sh: a /dev/kvm that lacks what
 * some KVMs lack, so kvm-lite's run-time checks are tested on any KVM.
 *   KVMLITE_SHIM_NO_CAP=IMMEDIATE_EXIT,XCRS,XSAVE,DEBUGREGS,VCPU_EVENTS,MP_STATE
 *       KVM_CHECK_EXTENSION answers 0 for these
 *   KVMLITE_SHIM_MMAP_SIZE=N
 *       KVM_GET_VCPU_MMAP_SIZE answers N (0: a KVM that gives no kvm_run)
 * Everything else goes to the real ioctl.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static const struct {
	const char *name;
	long cap;
} caps[] = {
	{ "IMMEDIATE_EXIT", KVM_CAP_IMMEDIATE_EXIT }, { "XCRS", KVM_CAP_XCRS },
	{ "XSAVE", KVM_CAP_XSAVE },		      { "DEBUGREGS", KVM_CAP_DEBUGREGS },
	{ "VCPU_EVENTS", KVM_CAP_VCPU_EVENTS },	      { "MP_STATE", KVM_CAP_MP_STATE },
};

static int denied(long cap)
{
	const char *e = getenv("KVMLITE_SHIM_NO_CAP");

	if (!e)
		return 0;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		size_t n = strlen(caps[i].name);
		const char *p = e;

		if (caps[i].cap != cap)
			continue;
		while ((p = strstr(p, caps[i].name))) {
			if ((p == e || p[-1] == ',') && (p[n] == ',' || !p[n]))
				return 1;
			p += n;
		}
	}
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	const char *m = getenv("KVMLITE_SHIM_MMAP_SIZE");
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (req == KVM_CHECK_EXTENSION && denied((long)arg))
		return 0;
	if (req == KVM_GET_VCPU_MMAP_SIZE && m)
		return atoi(m);
	return real(fd, req, arg);
}
