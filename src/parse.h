/* SPDX-License-Identifier: MIT */
/*
 * Parsers for the kernel's text interfaces: sysfs mode files, /proc/self/smaps,
 * /proc/meminfo and /proc/self/mountinfo. Pure functions over buffers (no
 * I/O), so they are fuzzed (tests/fuzz/) and unit-tested on fixed inputs.
 * Every parser accepts any bytes, never reads past len, and reports
 * malformed input as -EINVAL rather than guessing.
 */
#ifndef HPR_PARSE_H
#define HPR_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "always [madvise] never" -> index of the bracketed word in names[], by
 * exact match; -EINVAL if none is bracketed or the word is unknown. */
int hpr__parse_sysfs_mode(const char *buf, size_t len, const char *const *names, int nnames);
/* The shmem huge modes as shmem_enabled and tmpfs huge= spell them, indexed
 * by HPR_SHMEM_* (hpregion.h): the one table. */
#define HPR__SHMEM_MODES 6
extern const char *const hpr__shmem_mode_names[HPR__SHMEM_MODES];
/* Its name for mode, "?" outside the table (HPR_SHMEM_UNKNOWN). */
const char *hpr__shmem_mode_name(int mode);
/* First unsigned decimal in buf ("123\n"); -EINVAL if none. */
int hpr__parse_ulong(const char *buf, size_t len, unsigned long *out);

struct hpr__smaps_sum {
	uint64_t size, rss, anon_huge, shmem_pmd, file_pmd, hugetlb, lazyfree, locked, swap;
	unsigned vmas;
	uint64_t kernel_page_size; /* of the last matching VMA */
	int thp_eligible;	   /* its THPeligible: 1, 0, or -1 not reported */
};

/* Streaming smaps parser: feed it whole lines (without '\n'). Sums the
 * fields of VMAs overlapping [lo, hi); a VMA that only partly overlaps
 * contributes its fields in proportion (smaps has no finer detail). */
struct hpr__smaps_parser {
	uintptr_t lo, hi;
	bool in;
	double frac;
	struct hpr__smaps_sum sum;
};
void hpr__smaps_init(struct hpr__smaps_parser *p, uintptr_t lo, uintptr_t hi);
int hpr__smaps_line(struct hpr__smaps_parser *p, const char *line, size_t len);
/* Whole buffer convenience. */
int hpr__smaps_parse(const char *buf, size_t len, uintptr_t lo, uintptr_t hi,
		     struct hpr__smaps_sum *out);

/* "HugePages_Free:      12" -> 12; "Hugetlb: 2048 kB" -> 2048 (as written). */
int hpr__meminfo_get(const char *buf, size_t len, const char *key, unsigned long long *out);

struct hpr__mount {
	unsigned major, minor;
	char root[256]; /* of the mount within its filesystem (bind mounts) */
	char mnt_point[256];
	char fstype[32];
	char source[64];
	char super_opts[256];
	char mnt_opts[128];
};
/* Parse one mountinfo line. -EINVAL if malformed. Octal escapes (\040) in
 * the mount point are decoded. */
int hpr__mountinfo_line(const char *line, size_t len, struct hpr__mount *m);
/* Find the mount whose device is major:minor (prefers the longest mount
 * point that prefixes path, when path is not NULL). 0 found, -ENOENT. */
int hpr__mountinfo_find(const char *buf, size_t len, unsigned major, unsigned minor,
			const char *path, struct hpr__mount *out);
/* Value of option key in a comma list "rw,size=1g,huge=always" into val;
 * 1 found with value, 0 found bare, -ENOENT absent. */
int hpr__opt_get(const char *opts, const char *key, char *val, size_t vlen);
/* "1g", "512m", "2048k", "4096" -> bytes; -EINVAL. */
int hpr__parse_size(const char *s, uint64_t *out);

#endif
