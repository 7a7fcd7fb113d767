/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite guest RAM on hpregion (see ram.h): every hpregion call the VMM
 * makes is in this file.
 */
#define _GNU_SOURCE
#include "ram.h"
#include "layout.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *const kl_backing_names[KB_N] = { "4k",	   "thp",     "shmem",
					     "shmem-huge", "hugetlb", "hugetlb-1g" };

static char tmpfs_dir[64];

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int kl_backing_parse(const char *s, enum kl_backing *b)
{
	for (int i = 0; i < KB_N; i++)
		if (!strcmp(s, kl_backing_names[i])) {
			*b = (enum kl_backing)i;
			return 0;
		}
	return -1;
}

size_t kl_backing_page(enum kl_backing b)
{
	struct hpr_probe_info pi;

	if (b == KB_4K)
		return 4096;
	if (b == KB_HUGETLB_1G)
		return 1ul << 30;
	if (hpr_probe(&pi))
		return 2ul << 20;
	/* hugetlb: the library's default size, the PMD size when offered */
	if (b == KB_HUGETLB && pi.nr_hugetlb_sizes) {
		for (unsigned i = 0; i < pi.nr_hugetlb_sizes && i < 4; i++)
			if (pi.hugetlb[i].page_size == pi.thp_pmd_size)
				return pi.thp_pmd_size;
		return pi.hugetlb[0].page_size;
	}
	return pi.thp_pmd_size ? pi.thp_pmd_size : (2ul << 20);
}

/* A tmpfs mounted huge=always in a mount namespace of our own: vanishes
 * with the process, changes nothing anyone else sees. */
static int private_huge_tmpfs(size_t need)
{
	char opt[64];

	if (tmpfs_dir[0])
		return 0;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -errno;
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "/tmp/kvm-lite.XXXXXX");
	if (!mkdtemp(tmpfs_dir)) {
		tmpfs_dir[0] = 0;
		return -errno;
	}
	snprintf(opt, sizeof(opt), "huge=always,size=%zu", need);
	if (mount("kvm-lite", tmpfs_dir, "tmpfs", 0, opt)) {
		int e = -errno;

		rmdir(tmpfs_dir);
		tmpfs_dir[0] = 0;
		return e;
	}
	return 0;
}

void kl_ram_cleanup(void)
{
	if (tmpfs_dir[0]) {
		umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
		tmpfs_dir[0] = 0;
	}
}

/* The region's config for a backing: which backend, shared or not. */
static int backing_config(struct hpr_config *c, enum kl_backing b, size_t size,
			  const struct kl_ram_opts *o)
{
	int rc;

	switch (b) {
	case KB_4K:
		/* Private anonymous memory that must stay small: THP backend with
		 * fallback, then MADV_NOHUGEPAGE before anything is faulted, so
		 * neither the fault path, MADV_COLLAPSE nor khugepaged makes it
		 * huge. The baseline a VMM gets with THP off. */
		c->backend = HPR_BACKEND_THP;
		c->flags = HPR_F_FALLBACK;
		return 0;
	case KB_THP:
		c->backend = HPR_BACKEND_THP; /* private anonymous: no fd to share */
		return 0;
	case KB_SHMEM:
		c->backend = HPR_BACKEND_SHMEM; /* memfd; huge via MADV_COLLAPSE */
		c->flags = HPR_F_SHARED;
		return 0;
	case KB_SHMEM_HUGE:
		c->backend = HPR_BACKEND_SHMEM;
		c->flags = HPR_F_SHARED;
		if (o->shmem_dir) {
			c->path = o->shmem_dir;
			return 0;
		}
		rc = private_huge_tmpfs(size * 2 + (64ul << 20));
		if (rc) {
			fprintf(stderr,
				"kvm-lite: shmem-huge: cannot mount a private tmpfs huge=always "
				"(%s): pass --shmem-dir DIR on a tmpfs mounted huge=always\n",
				strerror(-rc));
			return rc;
		}
		c->path = tmpfs_dir;
		return 0;
	case KB_HUGETLB:
	case KB_HUGETLB_1G:
		c->backend = HPR_BACKEND_HUGETLB; /* MFD_HUGETLB memfd, reserved now */
		c->flags = HPR_F_SHARED;
		c->page_size = b == KB_HUGETLB_1G ? 1ul << 30 : 0; /* 0: the default */
		return 0;
	default:
		return -EINVAL;
	}
}

int kl_ram_create(struct kl_ram *ram, enum kl_backing b, size_t size, const struct kl_ram_opts *o)
{
	struct hpr_config c;
	int rc;

	memset(ram, 0, sizeof(*ram));
	hpr_config_init(&c);
	c.size = size;
	c.name = "kvm-lite-ram";
	c.workers = o->workers;
	if ((rc = backing_config(&c, b, size, o)))
		return rc;
	rc = hpr_create(&c, &ram->r);
	if (rc) {
		fprintf(stderr, "kvm-lite: cannot create %s guest RAM of %zu MiB: %s\n",
			kl_backing_names[b], size >> 20, hpr_strerror(rc));
		return rc;
	}
	ram->backing = b;
	ram->base = hpr_base(ram->r);
	ram->size = hpr_size(ram->r);
	if (b == KB_4K && madvise(ram->base, ram->size, MADV_NOHUGEPAGE)) {
		rc = -errno;
		fprintf(stderr, "kvm-lite: madvise(MADV_NOHUGEPAGE): %s\n", strerror(errno));
		kl_ram_destroy(ram);
	}
	return rc;
}

int kl_ram_keep(struct kl_ram *ram, const char *dir, const char *name, size_t size,
		const struct kl_ram_opts *o, bool attach_only, bool *attached, double *ms)
{
	struct hpr_config c;
	double t;
	int rc;

	memset(ram, 0, sizeof(*ram));
	hpr_config_init(&c);
	c.size = size;
	c.path = dir;
	c.name = name;
	c.workers = o->workers;
	c.backend = HPR_BACKEND_AUTO; /* the mount decides: shmem or hugetlb */
	c.flags = HPR_F_SHARED | (attach_only ? HPR_F_ATTACH_ONLY : HPR_F_ATTACH);
	t = now_ms();
	rc = hpr_create(&c, &ram->r);
	*ms = now_ms() - t;
	if (rc) {
		fprintf(stderr, "kvm-lite: cannot %s kept guest RAM %s/%s: %s\n",
			attach_only ? "attach to" : "attach to or create", dir, name,
			hpr_strerror(rc));
		return rc;
	}
	*attached = hpr_attached(ram->r);
	ram->backing = hpr_backend_of(ram->r) == HPR_BACKEND_SHMEM ? KB_SHMEM_HUGE :
		       hpr_page_size(ram->r) == (1ul << 30)	   ? KB_HUGETLB_1G :
								     KB_HUGETLB;
	ram->base = hpr_base(ram->r);
	ram->size = hpr_size(ram->r);
	return 0;
}

long long kl_ram_file_blocks(const struct kl_ram *ram)
{
	struct stat st;

	if (fstat(hpr_fd(ram->r), &st))
		return -errno;
	return (long long)st.st_blocks;
}

static void waiter_stop(struct kl_ram *ram);

void kl_ram_destroy(struct kl_ram *ram)
{
	waiter_stop(ram); /* hpr_destroy must not race its hpr_load_wait */
	if (ram->r)
		hpr_destroy(ram->r);
	memset(ram, 0, sizeof(*ram));
}

static int say(int rc, const char *what)
{
	if (rc)
		fprintf(stderr, "kvm-lite: %s: %s\n", what, hpr_strerror(rc));
	return rc;
}

int kl_ram_prefault(struct kl_ram *ram, double *ms)
{
	double t = now_ms();
	int rc = hpr_fault_in(ram->r, 0, ram->size);

	*ms = now_ms() - t;
	return say(rc, "prefault");
}

int kl_ram_report_free(struct kl_ram *ram, size_t gpa, size_t len, bool reclaim)
{
	size_t rec = 0;
	int rc = hpr_release_lazy(ram->r, gpa, len);

	if (!rc && reclaim)
		rc = hpr_reclaim(ram->r, 0, &rec);
	if (rc)
		fprintf(stderr, "kvm-lite: free page report [%#zx, +%#zx): %s\n", gpa, len,
			hpr_strerror(rc));
	return rc;
}

int kl_ram_acquire(struct kl_ram *ram, size_t gpa, size_t len)
{
	return say(hpr_fault_in(ram->r, gpa, len), "fault-in for reuse");
}

int kl_ram_save(struct kl_ram *ram, int fd)
{
	return say(hpr_save(ram->r, fd, 0), "hpr_save");
}

int kl_ram_load(struct kl_ram *ram, int fd)
{
	size_t changed = 0;

	return say(hpr_load(ram->r, fd, 0, &changed), "hpr_load");
}

/* The lazy load's waiter: hpr_load_wait in a thread of its own, so the
 * vCPU runs while pages arrive and the moment the last one is mapped is
 * known. On the heap: struct kl_ram is copied by value. */
struct kl_ram_waiter {
	pthread_t thread;
	hpr_region *r;
	int err;
	double done_at;
};

static void *waiter_main(void *arg)
{
	struct kl_ram_waiter *w = arg;

	w->err = hpr_load_wait(w->r);
	w->done_at = now_ms();
	return NULL;
}

/* Join the waiter, if any (the load cancelled first when asked: a VMM
 * that gives up on the guest does not wait for its RAM). */
static void waiter_join(struct kl_ram *ram, bool cancel, struct kl_lazy_info *li)
{
	struct kl_ram_waiter *w = ram->waiter;

	if (!w)
		return;
	if (cancel)
		hpr_load_cancel(ram->r);
	pthread_join(w->thread, NULL);
	if (li) {
		li->err = w->err;
		li->resident_at = w->done_at;
	}
	free(w);
	ram->waiter = NULL;
}

static void waiter_stop(struct kl_ram *ram)
{
	waiter_join(ram, true, NULL);
}

int kl_ram_load_lazy(struct kl_ram *ram, int fd, struct kl_lazy_info *li)
{
	struct kl_ram_waiter *w;
	struct hpr_stats st;
	size_t changed = 0;
	int rc;

	memset(li, 0, sizeof(*li));
	rc = hpr_load(ram->r, fd, HPR_SNAP_LAZY, &changed);
	li->returned_at = li->resident_at = now_ms();
	if (rc)
		return say(rc, "hpr_load(HPR_SNAP_LAZY)");
	if ((rc = kl_ram_stats(ram, &st)))
		return rc;
	li->on_demand = st.lazy_load == HPR_LAZY_UFFD;
	li->fallback_err = st.lazy_load == HPR_LAZY_EAGER ? st.lazy_fallback_err : 0;
	if (!li->on_demand)
		return 0; /* loaded eagerly, done: nothing to wait for */
	w = calloc(1, sizeof(*w));
	if (w) {
		w->r = ram->r;
		if ((rc = pthread_create(&w->thread, NULL, waiter_main, w))) {
			free(w);
			w = NULL;
		}
	}
	if (!w) {
		/* no thread to wait in: wait here, the RAM is whole before
		 * the vCPU runs (correct, only not on demand) */
		rc = hpr_load_wait(ram->r);
		li->resident_at = now_ms();
		return say(rc, "hpr_load_wait");
	}
	ram->waiter = w;
	return 0;
}

size_t kl_ram_load_demanded(struct kl_ram *ram)
{
	size_t demanded = 0;

	hpr_load_progress(ram->r, NULL, &demanded, NULL);
	return demanded;
}

int kl_ram_load_end(struct kl_ram *ram, struct kl_lazy_info *li, bool cancel)
{
	waiter_join(ram, cancel, li);
	hpr_load_progress(ram->r, &li->loaded, &li->demanded, &li->total);
	if (cancel && li->err == -ECANCELED)
		return 0;
	return say(li->err, "the lazy load");
}

int kl_ram_stats(struct kl_ram *ram, struct hpr_stats *st)
{
	return say(hpr_stats(ram->r, st), "hpr_stats");
}

size_t kl_ram_lazy(struct kl_ram *ram)
{
	struct hpr_stats st;

	return hpr_stats(ram->r, &st) ? 0 : st.lazy;
}

const char *kl_ram_version(void)
{
	return hpr_version();
}

const char *kl_ram_error(int rc)
{
	return hpr_strerror(rc);
}

size_t kl_ram_page(const struct kl_ram *ram)
{
	size_t ps = hpr_page_size(ram->r);

	return ps > 4096 ? ps : 4096;
}

size_t kl_ram_huge_mapped(struct kl_ram *ram)
{
	struct hpr_stats st;

	return hpr_stats(ram->r, &st) ? 0 : st.huge_mapped;
}

int kl_ram_fd(const struct kl_ram *ram)
{
	return hpr_fd(ram->r);
}

void kl_ram_describe(const struct kl_ram *ram, char *buf, size_t len)
{
	size_t ps = hpr_page_size(ram->r);

	snprintf(buf, len, "hpregion %s, %s, %s", hpr_backend_name(hpr_backend_of(ram->r)),
		 ram->backing == KB_4K ? "MADV_NOHUGEPAGE" :
		 ps == (2ul << 20)     ? "2 MiB pages" :
		 ps == (1ul << 30)     ? "1 GiB pages" :
					 "base pages",
		 hpr_fd(ram->r) >= 0 ? "shared fd" : "private");
}

int kl_ram_other_process_sees(const struct kl_ram *ram, size_t off, size_t len, uint64_t want)
{
	int p[2], st = 0, fd = kl_ram_fd(ram);
	uint64_t got = 0;
	pid_t pid;

	if (fd < 0)
		return -EBADF;
	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		void *m = mmap(NULL, ram->size, PROT_READ, MAP_SHARED, fd, 0);
		uint64_t h;

		if (m == MAP_FAILED)
			_exit(1);
		h = kl_checksum(m, off, len);
		_exit(write(p[1], &h, sizeof(h)) == sizeof(h) ? 0 : 1);
	}
	close(p[1]);
	if (read(p[0], &got, sizeof(got)) != sizeof(got))
		got = ~want;
	close(p[0]);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -EIO;
	return got == want;
}
