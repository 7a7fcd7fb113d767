/* SPDX-License-Identifier: MIT */
/* Parsers for sysfs, smaps, meminfo and mountinfo text (see parse.h). */
#include "parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

const char *const hpr__shmem_mode_names[HPR__SHMEM_MODES] = { "always", "within_size", "advise",
							      "never",	"deny",	       "force" };

const char *hpr__shmem_mode_name(int mode)
{
	return mode >= 0 && mode < HPR__SHMEM_MODES ? hpr__shmem_mode_names[mode] : "?";
}

int hpr__parse_sysfs_mode(const char *buf, size_t len, const char *const *names, int nnames)
{
	size_t i = 0;

	while (i < len && buf[i]) {
		if (buf[i] == '[') {
			size_t s = ++i;

			while (i < len && buf[i] && buf[i] != ']')
				i++;
			if (i >= len || buf[i] != ']')
				return -EINVAL;
			for (int k = 0; k < nnames; k++) {
				size_t nl = strlen(names[k]);

				if (nl == i - s && !memcmp(buf + s, names[k], nl))
					return k;
			}
			return -EINVAL;
		}
		i++;
	}
	return -EINVAL;
}

int hpr__parse_ulong(const char *buf, size_t len, unsigned long *out)
{
	size_t i = 0;
	unsigned long v = 0;
	bool any = false;

	while (i < len && buf[i] && is_space(buf[i]))
		i++;
	while (i < len && buf[i] >= '0' && buf[i] <= '9') {
		unsigned long d = (unsigned long)(buf[i] - '0');

		if (v > (~0UL - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		any = true;
		i++;
	}
	if (!any)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_hex(const char *s, size_t len, size_t *i, uintptr_t *out)
{
	uintptr_t v = 0;
	bool any = false;

	while (*i < len) {
		char c = s[*i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			break;
		if (v >> (sizeof(v) * 8 - 4))
			return -EINVAL;
		v = (v << 4) | d;
		any = true;
		(*i)++;
	}
	if (!any)
		return -EINVAL;
	*out = v;
	return 0;
}

void hpr__smaps_init(struct hpr__smaps_parser *p, uintptr_t lo, uintptr_t hi)
{
	memset(p, 0, sizeof(*p));
	p->lo = lo;
	p->hi = hi;
	p->sum.thp_eligible = -1;
}

static const struct {
	const char *key;
	size_t off;
} smaps_keys[] = {
	{ "Size:", offsetof(struct hpr__smaps_sum, size) },
	{ "Rss:", offsetof(struct hpr__smaps_sum, rss) },
	{ "AnonHugePages:", offsetof(struct hpr__smaps_sum, anon_huge) },
	{ "ShmemPmdMapped:", offsetof(struct hpr__smaps_sum, shmem_pmd) },
	{ "FilePmdMapped:", offsetof(struct hpr__smaps_sum, file_pmd) },
	{ "Shared_Hugetlb:", offsetof(struct hpr__smaps_sum, hugetlb) },
	{ "Private_Hugetlb:", offsetof(struct hpr__smaps_sum, hugetlb) },
	{ "LazyFree:", offsetof(struct hpr__smaps_sum, lazyfree) },
	{ "Locked:", offsetof(struct hpr__smaps_sum, locked) },
	{ "Swap:", offsetof(struct hpr__smaps_sum, swap) },
};

#define SMAPS_MAX_KB (1ULL << 52)

int hpr__smaps_line(struct hpr__smaps_parser *p, const char *line, size_t len)
{
	size_t i = 0;
	uintptr_t a, b;

	if (!len)
		return 0;
	/* VMA header: "start-end perms ..." starts with a hex digit; field
	 * lines start with an upper-case letter. */
	if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')) {
		if (parse_hex(line, len, &i, &a) || i >= len || line[i] != '-')
			return -EINVAL;
		i++;
		if (parse_hex(line, len, &i, &b) || b < a)
			return -EINVAL;
		/* an empty or inverted window overlaps nothing (found by
		 * fuzz_smaps: lo > hi made e - s wrap and frac huge) */
		p->in = p->lo < p->hi && a < p->hi && b > p->lo;
		if (p->in) {
			uintptr_t s = a > p->lo ? a : p->lo;
			uintptr_t e = b < p->hi ? b : p->hi;

			p->frac = b > a ? (double)(e - s) / (double)(b - a) : 0;
			p->sum.vmas++;
		}
		return 0;
	}
	if (!p->in)
		return 0;
	for (size_t k = 0; k < sizeof(smaps_keys) / sizeof(smaps_keys[0]); k++) {
		size_t kl = strlen(smaps_keys[k].key);
		unsigned long v;

		if (len < kl || memcmp(line, smaps_keys[k].key, kl))
			continue;
		/* kB; anything past 2^52 kB (4 EiB) is not a real VMA and would
		 * overflow the conversion to bytes (found by tests/fuzz) */
		if (hpr__parse_ulong(line + kl, len - kl, &v) || v > SMAPS_MAX_KB)
			return -EINVAL;
		*(uint64_t *)((char *)&p->sum + smaps_keys[k].off) +=
			(uint64_t)((double)v * 1024.0 * p->frac + 0.5);
		return 0;
	}
	if (len > 15 && !memcmp(line, "KernelPageSize:", 15)) {
		unsigned long v;

		if (hpr__parse_ulong(line + 15, len - 15, &v) || v > SMAPS_MAX_KB)
			return -EINVAL;
		p->sum.kernel_page_size = (uint64_t)v * 1024;
	}
	if (len > 12 && !memcmp(line, "THPeligible:", 12)) {
		unsigned long v;

		if (hpr__parse_ulong(line + 12, len - 12, &v))
			return -EINVAL;
		p->sum.thp_eligible = v != 0;
	}
	return 0;
}

int hpr__smaps_parse(const char *buf, size_t len, uintptr_t lo, uintptr_t hi,
		     struct hpr__smaps_sum *out)
{
	struct hpr__smaps_parser p;
	size_t s = 0;
	int rc = 0;

	hpr__smaps_init(&p, lo, hi);
	for (size_t i = 0; i <= len; i++) {
		if (i == len || buf[i] == '\n') {
			int r = hpr__smaps_line(&p, buf + s, i - s);

			if (r && !rc)
				rc = r;
			s = i + 1;
		}
	}
	*out = p.sum;
	return rc;
}

int hpr__meminfo_get(const char *buf, size_t len, const char *key, unsigned long long *out)
{
	size_t kl = strlen(key);
	size_t i = 0;

	while (i < len) {
		size_t e = i;

		while (e < len && buf[e] != '\n')
			e++;
		if (e - i > kl && !memcmp(buf + i, key, kl) && buf[i + kl] == ':') {
			unsigned long v;

			if (hpr__parse_ulong(buf + i + kl + 1, e - i - kl - 1, &v))
				return -EINVAL;
			*out = v;
			return 0;
		}
		i = e + 1;
	}
	return -ENOENT;
}

/* Copy the next space-separated field, decoding \ooo escapes. */
static int next_field(const char *line, size_t len, size_t *i, char *dst, size_t dlen)
{
	size_t o = 0;

	while (*i < len && line[*i] == ' ')
		(*i)++;
	if (*i >= len)
		return -EINVAL;
	while (*i < len && line[*i] != ' ') {
		char c = line[*i];

		if (c == '\\' && *i + 3 < len + 0 && line[*i + 1] >= '0' && line[*i + 1] <= '3' &&
		    line[*i + 2] >= '0' && line[*i + 2] <= '7' && line[*i + 3] >= '0' &&
		    line[*i + 3] <= '7') {
			c = (char)((line[*i + 1] - '0') * 64 + (line[*i + 2] - '0') * 8 +
				   (line[*i + 3] - '0'));
			*i += 3;
		}
		if (dst) {
			if (o + 1 >= dlen)
				return -EINVAL;
			dst[o++] = c;
		}
		(*i)++;
	}
	if (dst)
		dst[o] = '\0';
	return 0;
}

int hpr__mountinfo_line(const char *line, size_t len, struct hpr__mount *m)
{
	size_t i = 0;
	char tmp[64];
	char *colon;
	unsigned long v;

	memset(m, 0, sizeof(*m));
	/* mount-id parent-id major:minor root mount-point opts [optional...] - fstype source superopts */
	if (next_field(line, len, &i, NULL, 0) || next_field(line, len, &i, NULL, 0))
		return -EINVAL;
	if (next_field(line, len, &i, tmp, sizeof(tmp)))
		return -EINVAL;
	colon = strchr(tmp, ':');
	if (!colon || hpr__parse_ulong(tmp, (size_t)(colon - tmp), &v) || v > 0xfffff)
		return -EINVAL;
	if ((size_t)(colon - tmp) == 0 || tmp[0] == ' ')
		return -EINVAL;
	m->major = (unsigned)v;
	if (hpr__parse_ulong(colon + 1, strlen(colon + 1), &v) || v > 0xfffff)
		return -EINVAL;
	m->minor = (unsigned)v;
	if (next_field(line, len, &i, m->root, sizeof(m->root)))
		return -EINVAL;
	if (next_field(line, len, &i, m->mnt_point, sizeof(m->mnt_point)))
		return -EINVAL;
	if (next_field(line, len, &i, m->mnt_opts, sizeof(m->mnt_opts)))
		return -EINVAL;
	for (;;) { /* optional fields end with "-" */
		char f[64];

		if (next_field(line, len, &i, f, sizeof(f)))
			return -EINVAL;
		if (!strcmp(f, "-"))
			break;
	}
	if (next_field(line, len, &i, m->fstype, sizeof(m->fstype)) ||
	    next_field(line, len, &i, m->source, sizeof(m->source)) ||
	    next_field(line, len, &i, m->super_opts, sizeof(m->super_opts)))
		return -EINVAL;
	return 0;
}

static size_t prefix_len(const char *mnt, const char *path)
{
	size_t n = strlen(mnt);

	if (!path)
		return 0;
	if (!strcmp(mnt, "/"))
		return 1;
	if (strncmp(mnt, path, n) || (path[n] != '/' && path[n] != '\0'))
		return 0;
	return n;
}

int hpr__mountinfo_find(const char *buf, size_t len, unsigned major, unsigned minor,
			const char *path, struct hpr__mount *out)
{
	size_t i = 0, best = 0;
	bool found = false;
	struct hpr__mount m;

	while (i < len) {
		size_t e = i;

		while (e < len && buf[e] != '\n')
			e++;
		if (!hpr__mountinfo_line(buf + i, e - i, &m) && m.major == major &&
		    m.minor == minor) {
			size_t pl = prefix_len(m.mnt_point, path);

			/* a later mount over the same point wins (>=) */
			if (!found || pl >= best) {
				*out = m;
				best = pl;
				found = true;
			}
		}
		i = e + 1;
	}
	return found ? 0 : -ENOENT;
}

int hpr__opt_get(const char *opts, const char *key, char *val, size_t vlen)
{
	size_t kl = strlen(key);
	const char *p = opts;

	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n >= kl && !memcmp(p, key, kl)) {
			if (n == kl) {
				if (vlen)
					val[0] = '\0';
				return 0;
			}
			if (p[kl] == '=') {
				size_t vl = n - kl - 1;

				if (vl >= vlen)
					vl = vlen ? vlen - 1 : 0;
				if (vlen) {
					memcpy(val, p + kl + 1, vl);
					val[vl] = '\0';
				}
				return 1;
			}
		}
		p = e ? e + 1 : NULL;
	}
	return -ENOENT;
}

int hpr__parse_size(const char *s, uint64_t *out)
{
	unsigned long v;
	size_t i = 0;
	uint64_t mul = 1;

	if (!s || hpr__parse_ulong(s, strlen(s), &v))
		return -EINVAL;
	while (s[i] >= '0' && s[i] <= '9')
		i++;
	switch (s[i]) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ULL << 10;
		break;
	case 'm':
	case 'M':
		mul = 1ULL << 20;
		break;
	case 'g':
	case 'G':
		mul = 1ULL << 30;
		break;
	case 't':
	case 'T':
		mul = 1ULL << 40;
		break;
	default:
		return -EINVAL;
	}
	/* optional "B", "i" or "iB" after the unit: 2M, 2MB, 2Mi, 2MiB */
	if (s[i] && s[i + 1] && strcmp(s + i + 1, "B") && strcmp(s + i + 1, "i") &&
	    strcmp(s + i + 1, "iB"))
		return -EINVAL;
	if (v && mul > UINT64_MAX / v)
		return -EINVAL;
	*out = (uint64_t)v * mul;
	return 0;
}
