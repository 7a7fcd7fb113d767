/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite --keep (see keep.h): boot or resume on kept guest RAM, the
 * checkpoint, and the evidence that a resume copied nothing -- the kept
 * file's blocks, /proc/meminfo's shmem or hugetlb counters, smaps'
 * huge-mapped bytes, and the RAM's checksum against the checkpoint's.
 */
#define _GNU_SOURCE
#include "keep.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void vcpu_path(const struct kl_opts *o, char *p, size_t n, const char *ext)
{
	snprintf(p, n, "%s.%s", o->snapshot, ext);
}

/* statfs of the directory a path is in. */
static int dir_statfs(const char *path, struct statfs *sf)
{
	char *copy = strdup(path);
	int rc;

	if (!copy)
		return -ENOMEM;
	rc = statfs(dirname(copy), sf) ? -errno : 0;
	free(copy);
	return rc;
}

int kl_snapshot_check_path(const char *prefix, char *msg, size_t len)
{
	struct statfs sf;

	if (!dir_statfs(prefix, &sf) && (long)sf.f_type == (long)HUGETLBFS_MAGIC) {
		snprintf(msg, len,
			 "--snapshot %s: its files would be on hugetlbfs, whose files cannot "
			 "be written with write(2): put them on another file system (the kept "
			 "RAM may stay on hugetlbfs), e.g. --snapshot /var/tmp/%s",
			 prefix, strrchr(prefix, '/') ? strrchr(prefix, '/') + 1 : prefix);
		return -EINVAL;
	}
	return 0;
}

int kl_keep_check_paths(const struct kl_opts *o, enum kl_backing *backing, size_t *page, char *msg,
			size_t len)
{
	struct statfs sf;
	int rc;

	if (statfs(o->keep_dir, &sf)) {
		rc = -errno;
		snprintf(msg, len, "--keep %s: %s: %s", o->keep, o->keep_dir, strerror(errno));
		return rc;
	}
	if ((long)sf.f_type == (long)TMPFS_MAGIC) {
		*backing = KB_SHMEM_HUGE;
		*page = kl_backing_page(KB_SHMEM_HUGE);
	} else if ((long)sf.f_type == (long)HUGETLBFS_MAGIC) {
		*page = (size_t)sf.f_bsize;
		*backing = *page == (1ul << 30) ? KB_HUGETLB_1G : KB_HUGETLB;
	} else {
		snprintf(msg, len,
			 "--keep %s: %s is not a tmpfs or hugetlbfs (type %#lx): kept guest "
			 "RAM lives in memory, on a tmpfs mounted huge=always or on hugetlbfs",
			 o->keep, o->keep_dir, (unsigned long)sf.f_type);
		return -EINVAL;
	}
	if (o->backend_set && o->backend != *backing) {
		snprintf(msg, len,
			 "--keep %s: %s is %s, whose RAM is %s, but -b asks %s: with --keep "
			 "the mount decides; leave -b out",
			 o->keep, o->keep_dir, *backing == KB_SHMEM_HUGE ? "a tmpfs" : "hugetlbfs",
			 kl_backing_names[*backing], kl_backing_names[o->backend]);
		return -EINVAL;
	}
	return kl_snapshot_check_path(o->snapshot, msg, len);
}

static long long meminfo(const char *key)
{
	char buf[8192];
	long long v = -1;
	int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return kl_meminfo_parse(buf, key, &v) ? -1 : v;
}

static long long hugetlb_free(size_t page)
{
	char p[128];
	long long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages",
		 page >> 10);
	f = fopen(p, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The counters a copy or a zeroing would move: shmem's, or the pool's. */
static void sample_mem(enum kl_backing b, size_t page, long long m[2])
{
	if (b == KB_SHMEM_HUGE) {
		m[0] = meminfo("Shmem");
		m[1] = meminfo("ShmemHugePages");
	} else {
		m[0] = hugetlb_free(page);
		m[1] = 0;
	}
}

static int refuse(const struct kl_opts *o, struct kl_ram *ram, int rc, const char *what)
{
	fprintf(stderr, "kvm-lite: cannot resume from kept guest RAM %s with %s.vcpu: %s\n",
		o->keep, o->snapshot, what);
	kl_ram_destroy(ram);
	return rc;
}

/* The vCPU file of a resume: ours (version), a --keep one, for this RAM. */
static int read_vcpu(const struct kl_opts *o, const struct kl_layout *l, int fd,
		     struct kl_vcpu_state *st)
{
	uint32_t v = 0;
	int rc = kl_vcpu_state_read(fd, st, &v);
	char m[256];

	if (rc == -EPROTO)
		snprintf(m, sizeof(m),
			 "%s.vcpu is format version %u, this kvm-lite reads version %d "
			 "(the whole vCPU state): it cannot resume with it; remove it and "
			 "the kept file to boot afresh",
			 o->snapshot, v, KL_VCPU_VERSION);
	else if (rc)
		snprintf(m, sizeof(m), "%s.vcpu: %s", o->snapshot,
			 rc == -EINVAL	? "not a kvm-lite vCPU file" :
			 rc == -EBADMSG ? "truncated or corrupt (CRC)" :
					  strerror(-rc));
	else if (!st->keep_id)
		snprintf(m, sizeof(m),
			 "%s.vcpu is a plain --snapshot's (its RAM is in %s.ram), not a "
			 "--keep checkpoint's",
			 o->snapshot, o->snapshot);
	else if (st->ram != l->ram || st->guest_page != l->guest_page)
		snprintf(m, sizeof(m),
			 "%s.vcpu is for %llu MiB of RAM with %s guest pages, the command "
			 "line asks %zu MiB with %s",
			 o->snapshot, (unsigned long long)(st->ram >> 20),
			 st->guest_page == 4096 ? "4 KiB" : "2 MiB", l->ram >> 20,
			 l->guest_page == 4096 ? "4 KiB" : "2 MiB");
	else
		return 0;
	fprintf(stderr, "kvm-lite: cannot resume from kept guest RAM %s: %s\n", o->keep, m);
	return rc ? rc : -ESTALE;
}

static int resume(const struct kl_opts *o, const struct kl_layout *l, struct kl_ram *ram, int vfd)
{
	struct kl_keep_run *k = o->keep_run;
	struct kl_keep_want w;
	struct stat st;
	enum kl_backing b;
	char msg[512];
	size_t page;
	bool attached = false;
	double t;
	int rc;

	if ((rc = read_vcpu(o, l, vfd, &k->vcpu)))
		return rc;
	if (fstatat(AT_FDCWD, o->keep, &st, AT_SYMLINK_NOFOLLOW)) {
		rc = -errno;
		fprintf(stderr,
			"kvm-lite: cannot resume: no kept guest RAM %s (%s), but %s.vcpu is a "
			"checkpoint of kept RAM id %016llx: the RAM is gone (a reboot, an "
			"unmount, a rm); remove %s.vcpu to boot afresh\n",
			o->keep, strerror(errno), o->snapshot, (unsigned long long)k->vcpu.keep_id,
			o->snapshot);
		return rc;
	}
	if ((rc = kl_keep_check_paths(o, &b, &page, msg, sizeof(msg)))) {
		fprintf(stderr, "kvm-lite: %s\n", msg);
		return rc;
	}
	k->blocks[0] = (long long)st.st_blocks;
	sample_mem(b, page, k->mem[0]);
	if ((rc = kl_ram_keep(ram, o->keep_dir, o->keep_name, l->ram, &o->ram_opts, true, &attached,
			      &k->create_ms)))
		return rc;
	/* Check the record before anything is faulted in: a refusal touches
	 * one page, the record's, read only. */
	kl_keep_rec_get(ram->base, &k->rec);
	w = (struct kl_keep_want){ .ram = l->ram,
				   .page_size = kl_ram_page(ram),
				   .guest_page = l->guest_page,
				   .id = k->vcpu.keep_id,
				   .checkpoint = k->vcpu.checkpoint };
	if ((rc = kl_keep_check(&k->rec, &w, msg, sizeof(msg))))
		return refuse(o, ram, rc, msg);
	if ((rc = kl_ram_prefault(ram, &k->prefault_ms)))
		return refuse(o, ram, rc, "prefault failed");
	t = now_ms();
	k->ram_sum = kl_keep_ram_sum(ram->base, l->ram);
	k->sum_ms = now_ms() - t;
	if (k->ram_sum != k->rec.ram_sum) {
		snprintf(msg, sizeof(msg),
			 "its RAM's checksum is %#llx, checkpoint %llu's was %#llx: the RAM "
			 "changed after the stop; the vCPU is not run on it",
			 (unsigned long long)k->ram_sum, (unsigned long long)k->rec.checkpoint,
			 (unsigned long long)k->rec.ram_sum);
		return refuse(o, ram, -EIO, msg);
	}
	k->blocks[1] = kl_ram_file_blocks(ram);
	sample_mem(b, page, k->mem[1]);
	k->huge_mapped = kl_ram_huge_mapped(ram);
	k->resume = true;
	k->id = k->rec.id;
	printf("re-attach: %s (%s, %zu KiB pages), checkpoint %llu: hpr_create %.2f ms, prefault "
	       "%.2f ms, RAM checksum %.1f ms\n",
	       o->keep, kl_backing_names[ram->backing], kl_ram_page(ram) >> 10,
	       (unsigned long long)k->rec.checkpoint, k->create_ms, k->prefault_ms, k->sum_ms);
	printf("re-attach: guest RAM checksum %#llx equals checkpoint %llu's\n",
	       (unsigned long long)k->ram_sum, (unsigned long long)k->rec.checkpoint);
	fflush(stdout);
	return 0;
}

int kl_keep_open(const struct kl_opts *o, const struct kl_layout *l, struct kl_ram *ram)
{
	struct kl_keep_run *k = o->keep_run;
	char vp[4096];
	struct stat st;
	bool attached = false;
	int vfd, rc;
	unsigned reattaches = k->reattaches;

	memset(k, 0, sizeof(*k));
	k->reattaches = reattaches;
	vcpu_path(o, vp, sizeof(vp), "vcpu");
	vfd = open(vp, O_RDONLY | O_CLOEXEC);
	if (vfd >= 0) {
		rc = resume(o, l, ram, vfd);
		close(vfd);
		return rc;
	}
	if (errno != ENOENT) {
		rc = -errno;
		fprintf(stderr, "kvm-lite: %s: %s\n", vp, strerror(errno));
		return rc;
	}
	if (!fstatat(AT_FDCWD, o->keep, &st, AT_SYMLINK_NOFOLLOW)) {
		fprintf(stderr,
			"kvm-lite: kept guest RAM %s exists but %s does not: nothing to resume "
			"it with; give the --snapshot PREFIX it was stopped with, or remove %s "
			"to boot afresh\n",
			o->keep, vp, o->keep);
		return -EEXIST;
	}
	if ((rc = kl_ram_keep(ram, o->keep_dir, o->keep_name, l->ram, &o->ram_opts, false,
			      &attached, &k->create_ms)))
		return rc;
	if (attached) { /* made by someone else since the fstatat: not ours to boot on */
		fprintf(stderr, "kvm-lite: kept guest RAM %s appeared while starting: refused\n",
			o->keep);
		kl_ram_destroy(ram);
		return -EEXIST;
	}
	if (getrandom(&k->id, sizeof(k->id), 0) != sizeof(k->id) || !k->id)
		k->id = ((uint64_t)getpid() << 32) ^ (uint64_t)now_ms() ^ 1;
	return 0;
}

void kl_keep_abandon(const struct kl_opts *o, struct kl_ram *ram)
{
	bool made = ram->r && !o->keep_run->resume;

	kl_ram_destroy(ram);
	if (made)
		unlink(o->keep);
}

void kl_keep_boot(const struct kl_opts *o, const struct kl_layout *l, struct kl_ram *ram)
{
	struct kl_keep_rec r;

	kl_keep_rec_init(&r, o->keep_run->id, l->ram, kl_ram_page(ram), l->guest_page);
	kl_keep_rec_put(ram->base, &r);
}

void kl_keep_running(struct kl_ram *ram)
{
	struct kl_keep_rec r;

	kl_keep_rec_get(ram->base, &r);
	r.state = KL_KEEP_RUNNING;
	kl_keep_rec_put(ram->base, &r);
}

int kl_keep_stop(const struct kl_opts *o, struct kl_ram *ram, struct kl_vcpu_state *st,
		 uint64_t guest_sum)
{
	char vp[4096], tp[4096];
	struct kl_keep_rec r;
	uint64_t sum;
	double t = now_ms();
	int fd, rc;

	kl_keep_rec_get(ram->base, &r);
	st->keep_id = r.id;
	st->checkpoint = r.checkpoint + 1;
	vcpu_path(o, vp, sizeof(vp), "vcpu");
	vcpu_path(o, tp, sizeof(tp), "vcpu.new");
	/* The vCPU file first, whole (written, fsynced, renamed): the record
	 * says STOPPED only once the state it pairs with is on disk. */
	fd = open(tp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		fprintf(stderr, "kvm-lite: %s: %s\n", tp, strerror(errno));
		return rc;
	}
	rc = kl_vcpu_state_write(fd, st);
	close(fd);
	if (!rc && rename(tp, vp))
		rc = -errno;
	if (rc) {
		fprintf(stderr, "kvm-lite: writing %s: %s\n", vp, strerror(-rc));
		unlink(tp);
		return rc;
	}
	sum = kl_keep_ram_sum(ram->base, ram->size);
	r.checkpoint = st->checkpoint;
	r.ram_sum = sum;
	r.guest_sum = guest_sum;
	r.blocks = (uint64_t)kl_ram_file_blocks(ram);
	r.state = KL_KEEP_STOPPED;
	kl_keep_rec_put(ram->base, &r);
	printf("checkpoint %llu: stopped in %.1f ms, guest RAM checksum %#llx, kept file blocks "
	       "%llu; %s written, the RAM stays in %s\n",
	       (unsigned long long)r.checkpoint, now_ms() - t, (unsigned long long)sum,
	       (unsigned long long)r.blocks, vp, o->keep);
	fflush(stdout);
	return 0;
}

void kl_keep_print(const struct kl_opts *o, const struct kl_ram *ram)
{
	const struct kl_keep_run *k = o->keep_run;
	size_t size = ram->size;

	printf("re-attach: restore (VM + vCPU) %.2f ms; total %.2f ms for %zu MiB, none of it "
	       "copied\n",
	       k->restore_ms, k->create_ms + k->prefault_ms + k->sum_ms + k->restore_ms,
	       size >> 20);
	printf("re-attach: kept file blocks %lld before, %lld after (checkpoint %llu), %s\n",
	       k->blocks[0], k->blocks[1], (unsigned long long)k->rec.blocks,
	       k->blocks[0] == k->blocks[1] && (unsigned long long)k->blocks[1] == k->rec.blocks ?
		       "unchanged" :
		       "CHANGED");
	if (ram->backing == KB_SHMEM_HUGE)
		printf("re-attach: meminfo Shmem %+lld kB, ShmemHugePages %+lld kB (whole system)\n",
		       k->mem[1][0] - k->mem[0][0], k->mem[1][1] - k->mem[0][1]);
	else
		printf("re-attach: hugetlb %zu KiB pages free %+lld (whole system)\n",
		       kl_ram_page(ram) >> 10, k->mem[1][0] - k->mem[0][0]);
	printf("re-attach: huge-mapped %zu of %zu MiB after the prefault (smaps)\n",
	       k->huge_mapped >> 20, size >> 20);
}
