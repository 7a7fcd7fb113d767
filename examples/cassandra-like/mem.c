/* SPDX-License-Identifier: MIT */
/*
 * The engine's memory: every big arena (memtables, row cache) is a
 * struct kv_mem. In huge-page mode it is an hpregion region and this file
 * is the whole of the engine's use of hpregion:
 *
 *   hpr_create            the arena (SHMEM on a tmpfs huge= dir, memfd, THP)
 *   hpr_fault_in          before a frame/arena is first written
 *   hpr_release_lazy      when a frame is evicted or a memtable flushed
 *   hpr_prefault_start/   background fault-in of the cache at startup while
 *   _progress/_wait       requests are already served
 *   hpr_stats             huge-page coverage, measured from smaps
 *   hpr_save, hpr_load    the row cache image (image.c): saved at close,
 *   (HPR_SNAP_LAZY)       loaded lazily at open; _wait/_cancel/_progress
 *
 * KV_MEM_BASE is what the engine would do without hpregion, used for the
 * base-page comparison run: mmap + MADV_NOHUGEPAGE, MADV_POPULATE_WRITE to
 * fault in, MADV_FREE to release, a plain thread to prefault. (It cannot be
 * an hpregion SHMEM region on a huge=never tmpfs: hpregion populates and
 * then MADV_COLLAPSEs such memory, so it ends up huge anyway.)
 */
#define _GNU_SOURCE
#include "engine.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define BASE_UNIT (2u << 20)
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

const char *kv_backing_name(enum kv_backing b)
{
	switch (b) {
	case KV_MEM_SHMEM:
		return "hpregion shmem (tmpfs file)";
	case KV_MEM_MEMFD:
		return "hpregion shmem (memfd)";
	case KV_MEM_THP:
		return "hpregion THP";
	case KV_MEM_BASE:
		return "plain mmap, 4 KiB pages";
	}
	return "?";
}

int kv_mem_create(struct kv_mem *m, const char *name, size_t size, enum kv_backing b,
		  const char *dir)
{
	struct hpr_config c;
	void *p;
	int rc;

	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->backing = b;
	if (b == KV_MEM_BASE) {
		size = (size + BASE_UNIT - 1) & ~(size_t)(BASE_UNIT - 1);
		p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return kv_fail(-errno, "%s: cannot map %zu bytes: %s", name, size,
				       strerror(errno));
		/* keep khugepaged and THP=always away: this run is the baseline */
		madvise(p, size, MADV_NOHUGEPAGE);
		/* a name (5.17+) keeps the kernel from merging this VMA with its
		 * neighbours, so smaps can tell the arenas apart */
		{
			char nm[48];

			snprintf(nm, sizeof(nm), "kv-base:%s", name);
			prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, size, nm);
		}
		m->base = p;
		m->size = size;
		m->unit = BASE_UNIT;
		return 0;
	}
	hpr_config_init(&c);
	c.size = size;
	c.name = name;
	c.backend = b == KV_MEM_THP ? HPR_BACKEND_THP : HPR_BACKEND_SHMEM;
	c.path = b == KV_MEM_SHMEM ? dir : NULL;
	/* No HPR_F_FALLBACK: a "huge" run that silently got 4 KiB pages would
	 * make the comparison a lie. hpr_strerror() says which knob to turn. */
	c.flags = 0;
	rc = hpr_create(&c, &m->r);
	if (rc)
		return kv_fail(rc, "%s region (%s, %zu MiB): %s", name, kv_backing_name(b),
			       size >> 20, hpr_strerror(rc));
	m->base = hpr_base(m->r);
	m->size = hpr_size(m->r);
	m->unit = hpr_page_size(m->r);
	return 0;
}

int kv_mem_create_kept(struct kv_mem *m, const char *name, size_t size, const char *dir)
{
	struct hpr_config c;
	char path[PATH_MAX];
	int rc;

	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->backing = KV_MEM_SHMEM;
	hpr_config_init(&c);
	c.size = size;
	c.name = name;
	c.backend = HPR_BACKEND_SHMEM;
	c.path = dir;
	/* shared: writes go to the file, and the next process sees them */
	c.flags = HPR_F_ATTACH | HPR_F_SHARED;
	rc = hpr_create(&c, &m->r);
	if (rc == -ERANGE || rc == -EBADMSG) {
		/* another size (the options changed), or not a kept region:
		 * its contents are of no use to this configuration */
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (unlink(path) == 0)
			rc = hpr_create(&c, &m->r);
	}
	if (rc)
		return kv_fail(rc, "%s: kept region %s/%s (%zu MiB): %s", name, dir, name,
			       size >> 20, hpr_strerror(rc));
	m->attached = hpr_attached(m->r);
	m->base = hpr_base(m->r);
	m->size = hpr_size(m->r);
	m->unit = hpr_page_size(m->r);
	return 0;
}

void kv_mem_destroy(struct kv_mem *m)
{
	if (m->toucher_on) {
		pthread_join(m->toucher, NULL);
		m->toucher_on = false;
	}
	if (m->r) {
		hpr_prefault_cancel(m->r);
		hpr_prefault_wait(m->r);
		hpr_destroy(m->r);
	} else if (m->base) {
		munmap(m->base, m->size);
	}
	m->r = NULL;
	m->base = NULL;
}

static int base_populate(char *p, size_t len)
{
	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* kernel < 5.14: touch one byte per page */
	for (size_t o = 0; o < len; o += 4096)
		((volatile char *)p)[o] = ((volatile char *)p)[o];
	return 0;
}

int kv_mem_fault(struct kv_mem *m, size_t off, size_t len)
{
	int rc;

	if (!m->r)
		return base_populate(m->base + off, len);
	rc = hpr_fault_in(m->r, off, len);
	if (rc)
		return kv_fail(rc, "%s: fault-in failed: %s", m->name, hpr_strerror(rc));
	return 0;
}

int kv_mem_release(struct kv_mem *m, size_t off, size_t len)
{
	if (!m->r)
		return madvise(m->base + off, len, MADV_FREE) ? -errno : 0;
	return hpr_release_lazy(m->r, off, len);
}

int kv_mem_ready(struct kv_mem *m, size_t off, size_t len)
{
	if (!m->r)
		return 0;
	return hpr_fault_in(m->r, off, len);
}

int kv_mem_save(struct kv_mem *m, int fd)
{
	int rc;

	if (!m->r)
		return kv_fail(-EOPNOTSUPP, "%s: base-page memory has no image", m->name);
	/* HPR_SNAP_SYNC: the data, then the header, each fdatasync'ed, so a
	 * crash mid-save leaves a file hpr_load refuses, never a torn image */
	rc = hpr_save(m->r, fd, HPR_SNAP_SYNC);
	if (rc)
		return kv_fail(rc, "%s: %s", m->name, hpr_strerror(rc));
	return 0;
}

int kv_mem_load_lazy(struct kv_mem *m, int fd)
{
	int rc;

	if (!m->r)
		return kv_fail(-EOPNOTSUPP, "%s: base-page memory cannot load an image", m->name);
	rc = hpr_load(m->r, fd, HPR_SNAP_LAZY, NULL);
	if (rc)
		return kv_fail(rc, "%s: %s", m->name, hpr_strerror(rc));
	return 0;
}

int kv_mem_load_wait(struct kv_mem *m)
{
	int rc = m->r ? hpr_load_wait(m->r) : 0;

	if (rc)
		return kv_fail(rc, "%s: %s", m->name, hpr_strerror(rc));
	return 0;
}

void kv_mem_load_cancel(struct kv_mem *m)
{
	if (m->r)
		hpr_load_cancel(m->r);
}

void kv_mem_load_progress(struct kv_mem *m, size_t *loaded, size_t *demanded, size_t *total)
{
	*loaded = *demanded = *total = 0;
	if (m->r)
		hpr_load_progress(m->r, loaded, demanded, total);
}

static void *toucher(void *arg)
{
	struct kv_mem *m = arg;

	for (size_t off = 0; off < m->size; off += m->unit) {
		int rc = base_populate(m->base + off, m->unit);

		if (rc) {
			m->touch_err = rc;
			break;
		}
		atomic_store(&m->touch_done, off + m->unit);
	}
	return NULL;
}

int kv_mem_prefault_start(struct kv_mem *m)
{
	if (m->r)
		return hpr_prefault_start(m->r, 0, m->size);
	if (pthread_create(&m->toucher, NULL, toucher, m))
		return -EAGAIN;
	m->toucher_on = true;
	return 0;
}

int kv_mem_prefault_progress(struct kv_mem *m, size_t *done, size_t *total)
{
	if (m->r)
		return hpr_prefault_progress(m->r, done, total);
	*done = m->toucher_on ? atomic_load(&m->touch_done) : 0;
	*total = m->toucher_on ? m->size : 0;
	return 0;
}

int kv_mem_prefault_wait(struct kv_mem *m)
{
	if (m->r)
		return hpr_prefault_wait(m->r);
	if (m->toucher_on) {
		pthread_join(m->toucher, NULL);
		m->toucher_on = false;
	}
	return m->touch_err;
}

/*
 * Walk /proc/self/smaps and sum Rss and the PMD-mapped counters of the
 * mappings that overlap [lo, hi) or (dir != NULL) map a file under dir.
 */
static int smaps_sum(uintptr_t lo, uintptr_t hi, const char *dir, size_t *res, size_t *huge)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[4096];
	bool in = false;
	size_t dl = dir ? strlen(dir) : 0;
	double part = 1.0; /* share of the VMA inside [lo, hi) */

	*res = *huge = 0;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char *path;
		size_t kb;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			if (dir) {
				path = strchr(line, '/');
				/* the tables only: kept regions are files there too */
				in = path && !strncmp(path, dir, dl) && path[dl] == '/' &&
				     !strncmp(path + dl + 1, "sst-", 4);
			} else {
				in = a < hi && b > lo;
				/* a VMA merged with a neighbour: count our share */
				part = in ? (double)((b < hi ? b : hi) - (a > lo ? a : lo)) /
						       (double)(b - a) :
					    0;
			}
			continue;
		}
		if (!in)
			continue;
		if (sscanf(line, "Rss: %zu kB", &kb) == 1)
			*res += (size_t)((double)(kb << 10) * part);
		else if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1 ||
			 sscanf(line, "ShmemPmdMapped: %zu kB", &kb) == 1 ||
			 sscanf(line, "FilePmdMapped: %zu kB", &kb) == 1)
			*huge += (size_t)((double)(kb << 10) * part);
	}
	fclose(f);
	return 0;
}

int kv_mem_coverage(struct kv_mem *m, size_t *resident, size_t *huge)
{
	struct hpr_stats st;
	int rc;

	if (!m->r)
		return smaps_sum((uintptr_t)m->base, (uintptr_t)m->base + m->size, NULL, resident,
				 huge);
	rc = hpr_stats(m->r, &st);
	if (rc)
		return rc;
	*resident = st.resident;
	*huge = st.huge_mapped;
	return 0;
}

int kv_smaps_files(const char *dir, size_t *resident, size_t *huge)
{
	char real[PATH_MAX];

	if (!realpath(dir, real))
		return -errno;
	return smaps_sum(0, 0, real, resident, huge);
}
