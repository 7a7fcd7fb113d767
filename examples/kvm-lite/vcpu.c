/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite: the whole vCPU state of a snapshot (kvm.h, vcpustate.h):
 * regs, sregs, fpu, vCPU events, mp_state, XSAVE, XCRs, debug registers,
 * the MSRs (the 64-bit syscall MSRs, PAT, TSC_AUX, the TSC, and every MSR
 * KVM_GET_MSR_INDEX_LIST reports) and the CPUID the vCPU was given.
 *
 * Each class but regs/sregs/fpu depends on a capability; one the KVM
 * lacks is said once and left out of the file (st->have), never a crash.
 * The TSC is the MSR IA32_TSC: a host-initiated write of it on the new
 * vCPU makes the guest's TSC go on from the saved value, so rdtsc after
 * the restore never reads less than before the checkpoint.
 */
#define _GNU_SOURCE
#include "kick.h"
#include "kvm.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_IA32_TSC 0x10
#define MSR_IA32_CR_PAT 0x277
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102
#define MSR_TSC_AUX 0xc0000103

/* The MSRs a 64-bit guest uses, saved even where the index list leaves
 * one out; a KVM that cannot read one of them is said, not hidden. */
static const uint32_t must_msrs[] = { MSR_STAR,		MSR_LSTAR,	    MSR_CSTAR,
				      MSR_SYSCALL_MASK, MSR_KERNEL_GS_BASE, MSR_IA32_CR_PAT,
				      MSR_TSC_AUX,	MSR_IA32_TSC };

static const struct {
	uint32_t bit;
	int cap;
	const char *name;
} classes[] = {
	{ KL_HAVE_EVENTS, KVM_CAP_VCPU_EVENTS, "events" },
	{ KL_HAVE_MP_STATE, KVM_CAP_MP_STATE, "mp_state" },
	{ KL_HAVE_XSAVE, KVM_CAP_XSAVE, "xsave" },
	{ KL_HAVE_XCRS, KVM_CAP_XCRS, "xcrs" },
	{ KL_HAVE_DEBUGREGS, KVM_CAP_DEBUGREGS, "debugregs" },
	{ KL_HAVE_MSRS, 0, "msrs" },
	{ KL_HAVE_CPUID, KVM_CAP_EXT_CPUID, "cpuid" },
};

static bool has_cap(const struct kl_vm *v, int cap)
{
	return !cap || ioctl(v->kvm, KVM_CHECK_EXTENSION, cap) > 0;
}

/* The classes this KVM offers; those it lacks are said once. */
static uint32_t offered(const struct kl_vm *v)
{
	static bool said;
	uint32_t have = 0;
	int x;

	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		if (has_cap(v, classes[i].cap)) {
			have |= classes[i].bit;
			continue;
		}
		if (!said)
			fprintf(stderr,
				"kvm-lite: this KVM lacks the capability for the vCPU's %s: "
				"not saved\n",
				classes[i].name);
	}
	/* XSAVE areas larger than the legacy 4 KiB (AMX) do not fit the file:
	 * the legacy area then still has x87/SSE/AVX, the rest is lost */
	x = ioctl(v->kvm, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	if (!said && x > KL_VCPU_XSAVE)
		fprintf(stderr,
			"kvm-lite: this KVM's XSAVE area is %d bytes; the vCPU file keeps "
			"the first %d (no AMX state)\n",
			x, KL_VCPU_XSAVE);
	said = true;
	return have;
}

static bool listed(const uint32_t *idx, size_t n, uint32_t msr)
{
	for (size_t i = 0; i < n; i++)
		if (idx[i] == msr)
			return true;
	return false;
}

/* The MSRs to save: must_msrs, then the KVM's index list. */
static int msr_list(const struct kl_vm *v, uint32_t **out, size_t *n)
{
	struct kvm_msr_list *l;
	uint32_t *idx;
	size_t k = 0;
	unsigned want = 64;

	for (;;) {
		l = calloc(1, sizeof(*l) + want * sizeof(uint32_t));
		if (!l)
			return -ENOMEM;
		l->nmsrs = want;
		if (!ioctl(v->kvm, KVM_GET_MSR_INDEX_LIST, l))
			break;
		if (errno != E2BIG || l->nmsrs <= want || l->nmsrs > 65536) {
			int rc = -errno;

			free(l);
			return rc;
		}
		want = l->nmsrs;
		free(l);
	}
	idx = calloc(l->nmsrs + sizeof(must_msrs) / sizeof(must_msrs[0]), sizeof(*idx));
	if (!idx) {
		free(l);
		return -ENOMEM;
	}
	for (size_t i = 0; i < sizeof(must_msrs) / sizeof(must_msrs[0]); i++)
		idx[k++] = must_msrs[i];
	for (unsigned i = 0; i < l->nmsrs; i++)
		if (!listed(idx, k, l->indices[i]))
			idx[k++] = l->indices[i];
	free(l);
	*out = idx;
	*n = k;
	return 0;
}

static int msr_rw(int vcpu, unsigned long req, struct kvm_msr_entry *e)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e;
	} m;

	memset(&m, 0, sizeof(m));
	m.h.nmsrs = 1;
	m.e = *e;
	if (ioctl(vcpu, req, &m) != 1)
		return -EINVAL; /* 0: KVM refused this MSR */
	*e = m.e;
	return 0;
}

/* Each MSR on its own: one KVM_GET_MSRS stops at the first it refuses. */
static int save_msrs(const struct kl_vm *v, struct kl_vcpu_state *st)
{
	uint32_t *idx = NULL;
	size_t n = 0;
	int rc = msr_list(v, &idx, &n);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct kvm_msr_entry e = { .index = idx[i] };

		if (msr_rw(v->vcpu, KVM_GET_MSRS, &e)) {
			if (i < sizeof(must_msrs) / sizeof(must_msrs[0]))
				fprintf(stderr,
					"kvm-lite: this KVM does not read MSR %#x: not saved\n",
					idx[i]);
			st->msrs_skipped++;
			continue;
		}
		if (st->nmsrs == KL_VCPU_MAX_MSRS) {
			fprintf(stderr, "kvm-lite: more than %d MSRs to save\n", KL_VCPU_MAX_MSRS);
			free(idx);
			return -E2BIG;
		}
		st->msrs[st->nmsrs++] = e;
	}
	free(idx);
	return 0;
}

static int save_cpuid(const struct kl_vm *v, struct kl_vcpu_state *st)
{
	struct {
		struct kvm_cpuid2 h;
		struct kvm_cpuid_entry2 e[KL_VCPU_MAX_CPUID];
	} *c = calloc(1, sizeof(*c));
	int rc = 0;

	if (!c)
		return -ENOMEM;
	c->h.nent = KL_VCPU_MAX_CPUID;
	if (ioctl(v->vcpu, KVM_GET_CPUID2, c)) {
		rc = -errno;
		if (rc == -E2BIG)
			fprintf(stderr,
				"kvm-lite: the vCPU has more than %d CPUID leaves, more than "
				"the vCPU file holds\n",
				KL_VCPU_MAX_CPUID);
	} else if (c->h.nent > KL_VCPU_MAX_CPUID)
		rc = -E2BIG;
	/* Linux 6.1 leaves nent as given (the kernel of the nested guest,
	 * kvm_amd): the entries past the vCPU's are the zeroes calloc left.
	 * No real entry is all zero (leaf 0 names the vendor), so they go. */
	while (!rc && c->h.nent &&
	       !memcmp(&c->e[c->h.nent - 1], &(struct kvm_cpuid_entry2){ 0 }, sizeof(c->e[0])))
		c->h.nent--;
	if (!rc) {
		st->ncpuid = c->h.nent;
		memcpy(st->cpuid, c->e, c->h.nent * sizeof(c->e[0]));
	}
	free(c);
	return rc;
}

/* Complete a pending I/O exit (api.rst, KVM_EXIT_IO: userspace re-enters
 * once before reading state it will migrate): a KVM_RUN that is kicked
 * before it starts returns -EINTR with RIP past the OUT. */
static int complete_io(struct kl_vm *v)
{
	int rc, e;

	kl_kick_target(v);
	kl_kick_self();
	rc = ioctl(v->vcpu, KVM_RUN, 0);
	e = errno;
	kl_kick_clear(v);
	if (rc == 0)
		return -EIO;
	return e == EINTR ? 0 : -e;
}

int kl_vcpu_save(struct kl_vm *v, struct kl_vcpu_state *st)
{
	uint32_t have = offered(v);
	int rc;

	if ((rc = complete_io(v)))
		return rc;
	if (ioctl(v->vcpu, KVM_GET_REGS, &st->regs) < 0 ||
	    ioctl(v->vcpu, KVM_GET_SREGS, &st->sregs) < 0 ||
	    ioctl(v->vcpu, KVM_GET_FPU, &st->fpu) < 0)
		return -errno;
	st->have = 0;
	if ((have & KL_HAVE_EVENTS) && ioctl(v->vcpu, KVM_GET_VCPU_EVENTS, &st->events) < 0)
		return -errno;
	if ((have & KL_HAVE_MP_STATE) && ioctl(v->vcpu, KVM_GET_MP_STATE, &st->mp_state) < 0)
		return -errno;
	if ((have & KL_HAVE_XSAVE) && ioctl(v->vcpu, KVM_GET_XSAVE, st->xsave) < 0)
		return -errno;
	if ((have & KL_HAVE_XCRS) && ioctl(v->vcpu, KVM_GET_XCRS, &st->xcrs) < 0)
		return -errno;
	if ((have & KL_HAVE_DEBUGREGS) && ioctl(v->vcpu, KVM_GET_DEBUGREGS, &st->debugregs) < 0)
		return -errno;
	if ((have & KL_HAVE_MSRS) && (rc = save_msrs(v, st)))
		return rc;
	if ((have & KL_HAVE_CPUID) && (rc = save_cpuid(v, st)))
		return rc;
	st->have = have;
	return 0;
}

static int load_msrs(const struct kl_vm *v, const struct kl_vcpu_state *st)
{
	unsigned refused = 0;
	uint32_t first = 0;

	for (uint32_t i = 0; i < st->nmsrs && i < KL_VCPU_MAX_MSRS; i++) {
		struct kvm_msr_entry e = st->msrs[i], now = { .index = e.index };

		/* the new vCPU has it already (most of KVM's own MSRs are 0) */
		if (!msr_rw(v->vcpu, KVM_GET_MSRS, &now) && now.data == e.data)
			continue;
		if (!msr_rw(v->vcpu, KVM_SET_MSRS, &e))
			continue;
		for (size_t k = 0; k < sizeof(must_msrs) / sizeof(must_msrs[0]); k++)
			if (must_msrs[k] == e.index) {
				fprintf(stderr,
					"kvm-lite: this KVM refuses MSR %#x = %#llx from the "
					"vCPU file\n",
					e.index, (unsigned long long)e.data);
				return -EINVAL;
			}
		if (!refused++)
			first = e.index;
	}
	/* An MSR the saving KVM listed and this one refuses (a feature the
	 * vCPU's CPUID lacks, an MSR of a device model kvm-lite has not) is
	 * said, not fatal: the guest never used it. */
	if (refused)
		fprintf(stderr, "kvm-lite: this KVM refused %u of the %u saved MSRs (first %#x)\n",
			refused, st->nmsrs, first);
	return 0;
}

static int load_cpuid(const struct kl_vm *v, const struct kl_vcpu_state *st)
{
	struct {
		struct kvm_cpuid2 h;
		struct kvm_cpuid_entry2 e[KL_VCPU_MAX_CPUID];
	} *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->h.nent = st->ncpuid < KL_VCPU_MAX_CPUID ? st->ncpuid : KL_VCPU_MAX_CPUID;
	memcpy(c->e, st->cpuid, c->h.nent * sizeof(c->e[0]));
	rc = kl_xioctl(v->vcpu, KVM_SET_CPUID2, (unsigned long)c) ? -errno : 0;
	free(c);
	return rc;
}

/* One class onto the vCPU: -errno and what failed. */
static int set1(const struct kl_vm *v, unsigned long req, const void *p, const char *what)
{
	if (kl_xioctl(v->vcpu, req, (unsigned long)p) >= 0)
		return 0;
	fprintf(stderr, "kvm-lite: restoring the vCPU's %s: %s\n", what, strerror(errno));
	return -errno;
}

/* QEMU's order (kvm_arch_put_registers): CPUID before all (it decides
 * which MSRs and XSAVE features are valid), regs, XSAVE, XCRs, sregs,
 * MSRs, mp_state, events, debug registers. */
int kl_vcpu_load(struct kl_vm *v, const struct kl_vcpu_state *st)
{
	uint32_t lack = st->have & ~offered(v);
	int rc;

	if (lack) {
		for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
			if (lack & classes[i].bit)
				fprintf(stderr,
					"kvm-lite: the vCPU file has the vCPU's %s, this KVM "
					"cannot restore them\n",
					classes[i].name);
		return -EOPNOTSUPP;
	}
	if ((st->have & KL_HAVE_CPUID) && (rc = load_cpuid(v, st))) {
		fprintf(stderr, "kvm-lite: restoring the vCPU's CPUID: %s\n", strerror(-rc));
		return rc;
	}
	if ((rc = set1(v, KVM_SET_REGS, &st->regs, "regs")))
		return rc;
	if (!(st->have & KL_HAVE_XSAVE) && (rc = set1(v, KVM_SET_FPU, &st->fpu, "fpu")))
		return rc;
	if ((st->have & KL_HAVE_XSAVE) && (rc = set1(v, KVM_SET_XSAVE, st->xsave, "XSAVE")))
		return rc;
	if ((st->have & KL_HAVE_XCRS) && (rc = set1(v, KVM_SET_XCRS, &st->xcrs, "XCRs")))
		return rc;
	if ((rc = set1(v, KVM_SET_SREGS, &st->sregs, "sregs")))
		return rc;
	if ((st->have & KL_HAVE_MSRS) && (rc = load_msrs(v, st)))
		return rc;
	if ((st->have & KL_HAVE_MP_STATE) &&
	    (rc = set1(v, KVM_SET_MP_STATE, &st->mp_state, "mp_state")))
		return rc;
	if ((st->have & KL_HAVE_EVENTS) &&
	    (rc = set1(v, KVM_SET_VCPU_EVENTS, &st->events, "events")))
		return rc;
	if ((st->have & KL_HAVE_DEBUGREGS) &&
	    (rc = set1(v, KVM_SET_DEBUGREGS, &st->debugregs, "debug registers")))
		return rc;
	return 0;
}

void kl_vcpu_describe(const struct kl_vcpu_state *st, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "regs sregs fpu");

	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]) && o < len; i++) {
		if (!(st->have & classes[i].bit))
			continue;
		if (classes[i].bit == KL_HAVE_MSRS)
			o += (size_t)snprintf(buf + o, len - o, " %u MSRs", st->nmsrs);
		else if (classes[i].bit == KL_HAVE_CPUID)
			o += (size_t)snprintf(buf + o, len - o, " %u CPUID leaves", st->ncpuid);
		else
			o += (size_t)snprintf(buf + o, len - o, " %s", classes[i].name);
	}
}

static int differs(const char *what, bool quiet)
{
	if (!quiet)
		fprintf(stderr, "kvm-lite: after the restore the vCPU's %s differ from the file\n",
			what);
	return 1;
}

int kl_vcpu_verify(struct kl_vm *v, const struct kl_vcpu_state *st, bool quiet)
{
	struct kl_vcpu_state *now = calloc(1, sizeof(*now));
	int bad = 0;

	if (!now)
		return -ENOMEM;
	/* read back without running the vCPU */
	if (ioctl(v->vcpu, KVM_GET_REGS, &now->regs) ||
	    ioctl(v->vcpu, KVM_GET_SREGS, &now->sregs)) {
		free(now);
		return -errno;
	}
	if (memcmp(&now->regs, &st->regs, sizeof(st->regs)))
		bad |= differs("regs", quiet);
	/* the interrupt bitmap and APIC base are KVM's; compare the rest */
	if (memcmp(&now->sregs, &st->sregs, offsetof(struct kvm_sregs, apic_base)))
		bad |= differs("sregs", quiet);
	if ((st->have & KL_HAVE_XCRS) &&
	    (ioctl(v->vcpu, KVM_GET_XCRS, &now->xcrs) || now->xcrs.nr_xcrs != st->xcrs.nr_xcrs ||
	     memcmp(now->xcrs.xcrs, st->xcrs.xcrs, st->xcrs.nr_xcrs * sizeof(st->xcrs.xcrs[0]))))
		bad |= differs("XCRs", quiet);
	if ((st->have & KL_HAVE_DEBUGREGS) &&
	    (ioctl(v->vcpu, KVM_GET_DEBUGREGS, &now->debugregs) ||
	     memcmp(now->debugregs.db, st->debugregs.db, sizeof(st->debugregs.db)) ||
	     now->debugregs.dr7 != st->debugregs.dr7))
		bad |= differs("debug registers", quiet);
	if ((st->have & KL_HAVE_MP_STATE) && (ioctl(v->vcpu, KVM_GET_MP_STATE, &now->mp_state) ||
					      now->mp_state.mp_state != st->mp_state.mp_state))
		bad |= differs("mp_state", quiet);
	if ((st->have & KL_HAVE_EVENTS) &&
	    (ioctl(v->vcpu, KVM_GET_VCPU_EVENTS, &now->events) ||
	     memcmp(&now->events.exception, &st->events.exception, sizeof(st->events.exception)) ||
	     memcmp(&now->events.interrupt, &st->events.interrupt, sizeof(st->events.interrupt)) ||
	     memcmp(&now->events.nmi, &st->events.nmi, sizeof(st->events.nmi))))
		bad |= differs("events", quiet);
	/* XMM0-15 at byte 160 of the XSAVE area, the upper YMM halves at 576
	 * when XSTATE_BV (byte 512) has AVX */
	if ((st->have & KL_HAVE_XSAVE) &&
	    (ioctl(v->vcpu, KVM_GET_XSAVE, now->xsave) ||
	     memcmp((char *)now->xsave + 160, (const char *)st->xsave + 160, 256) ||
	     ((st->xsave[128] & 4) &&
	      memcmp((char *)now->xsave + 576, (const char *)st->xsave + 576, 256))))
		bad |= differs("XSAVE area", quiet);
	for (uint32_t i = 0; (st->have & KL_HAVE_MSRS) && i < st->nmsrs; i++) {
		struct kvm_msr_entry e = { .index = st->msrs[i].index };

		for (size_t k = 0; k < sizeof(must_msrs) / sizeof(must_msrs[0]); k++) {
			if (must_msrs[k] != e.index)
				continue;
			if (msr_rw(v->vcpu, KVM_GET_MSRS, &e) ||
			    (e.index == MSR_IA32_TSC ? e.data < st->msrs[i].data :
						       e.data != st->msrs[i].data)) {
				if (!quiet)
					fprintf(stderr,
						"kvm-lite: after the restore MSR %#x is %#llx, the "
						"file has %#llx\n",
						e.index, (unsigned long long)e.data,
						(unsigned long long)st->msrs[i].data);
				bad = 1;
			}
		}
	}
	free(now);
	return bad ? -EIO : 0;
}
