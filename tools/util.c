/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the hpr subcommands: error and usage reporting, small
 * file reads and writes for sysfs/procfs, size parsing and printing, and a
 * JSON writer that produces valid UTF-8 JSON from any bytes.
 */
#define _GNU_SOURCE
#include "hpr.h"
#include "parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", hpr_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", usage);
	return EXIT_USAGE;
}

int end_option(int c, const char *usage, char **argv)
{
	if (c == 'h') {
		fputs(usage, stdout);
		return 0;
	}
	return usage_error(usage, "unknown option '%s'", argv[optind - 1]);
}

int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", hpr_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

void scopy(char *d, size_t n, const char *s)
{
	size_t l = strlen(s);

	if (!n)
		return;
	if (l >= n)
		l = n - 1;
	memcpy(d, s, l);
	d[l] = '\0';
}

char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 16384, n = 0;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = malloc(cap);
	while (buf) {
		ssize_t got;

		if (n + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				buf = NULL;
				errno = ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		got = read(fd, buf + n, cap - n - 1);
		if (got < 0) {
			int e = errno;

			free(buf);
			buf = NULL;
			errno = e;
			break;
		}
		if (!got)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (buf) {
		buf[n] = '\0';
		if (len)
			*len = n;
	}
	return buf;
}

int read_str(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = read(fd, buf, len - 1);
	if (got < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	close(fd);
	buf[got] = '\0';
	while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
		buf[--got] = '\0';
	return 0;
}

int read_u64(const char *path, uint64_t *v)
{
	char buf[64];
	unsigned long u;
	int rc = read_str(path, buf, sizeof(buf));

	if (rc)
		return rc;
	if (hpr__parse_ulong(buf, strlen(buf), &u))
		return -EINVAL;
	*v = u;
	return 0;
}

int read_mode(const char *path, char *buf, size_t len)
{
	char raw[256];
	char *s, *e;
	int rc = read_str(path, raw, sizeof(raw));

	if (rc)
		return rc;
	s = strchr(raw, '[');
	if (s && (e = strchr(s, ']'))) {
		s++;
	} else {
		s = raw;
		e = s + strcspn(s, " \t\n");
	}
	snprintf(buf, len, "%.*s", (int)(e - s), s);
	return 0;
}

int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(val);
	ssize_t put;

	if (fd < 0)
		return -errno;
	put = write(fd, val, n);
	if (put < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	if (close(fd))
		return -errno;
	return (size_t)put == n ? 0 : -EIO;
}

int parse_size_arg(const char *s, uint64_t *out)
{
	return hpr__parse_size(s, out) || !*out ? -EINVAL : 0;
}

int parse_count(const char *s, unsigned long *out)
{
	unsigned long v;
	size_t n = strlen(s);

	if (!n || strspn(s, "0123456789") != n || hpr__parse_ulong(s, n, &v) || v > (1UL << 62))
		return -EINVAL;
	*out = v;
	return 0;
}

const char *fmt_size(uint64_t b, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int k = 0;
	double d = (double)b;

	while (k < 5 && b >= 1024 && !(b & 1023)) {
		b >>= 10;
		k++;
	}
	if (b < 1024 || k == 5) {
		snprintf(buf, len, "%llu %s", (unsigned long long)b, u[k]);
		return buf;
	}
	/* not a whole number of the next unit: one decimal */
	for (k = 0; k < 5 && d >= 1024; k++)
		d /= 1024;
	snprintf(buf, len, "%.1f %s", d, u[k]);
	return buf;
}

const char *fmt_size_arg(uint64_t b, char *buf, size_t len)
{
	static const char u[] = "\0KMGT";
	int k = 0;

	while (k < 4 && b >= 1024 && !(b & 1023)) {
		b >>= 10;
		k++;
	}
	if (k)
		snprintf(buf, len, "%llu%c", (unsigned long long)b, u[k]);
	else
		snprintf(buf, len, "%llu", (unsigned long long)b);
	return buf;
}

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* The numbers N of the entries PREFIX<N>SUFFIX in dir, ascending. */
static unsigned scan_numbered(const char *dir, const char *prefix, const char *suffix,
			      unsigned long *vals, unsigned max)
{
	size_t plen = strlen(prefix);
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	while (d && (de = readdir(d))) {
		const char *num = de->d_name + plen;
		size_t digits = strspn(num, "0123456789");
		unsigned long v;

		if (strncmp(de->d_name, prefix, plen) || !digits || strcmp(num + digits, suffix) ||
		    hpr__parse_ulong(num, digits, &v))
			continue;
		if (n < max)
			vals[n++] = v;
	}
	if (d)
		closedir(d);
	qsort(vals, n, sizeof(*vals), cmp_ulong);
	return n;
}

unsigned hugetlb_sizes(uint64_t *sizes, unsigned max)
{
	unsigned long kb[16]; /* x86 has 2, arm64 4 */
	unsigned n = scan_numbered(HTLB_DIR, "hugepages-", "kB", kb, max < 16 ? max : 16);

	for (unsigned i = 0; i < n; i++)
		sizes[i] = (uint64_t)kb[i] << 10;
	return n;
}

unsigned numa_nodes(int *nodes, unsigned max)
{
	unsigned long id[MAX_NODES];
	unsigned n = scan_numbered(NODE_DIR, "node", "", id, max < MAX_NODES ? max : MAX_NODES);

	for (unsigned i = 0; i < n; i++)
		nodes[i] = (int)id[i];
	if (!n && max) /* no sysfs node directory: a kernel without NUMA */
		nodes[n++] = 0;
	return n;
}

const char *esc_text(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	if (!len)
		return buf;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e[8];
		size_t n;

		if (*p == '\\')
			n = (size_t)snprintf(e, sizeof(e), "\\\\");
		else if (*p >= 0x20 && *p < 0x7f)
			n = (size_t)snprintf(e, sizeof(e), "%c", *p);
		else
			n = (size_t)snprintf(e, sizeof(e), "\\x%02x", *p);
		if (o + n >= len)
			break;
		memcpy(buf + o, e, n);
		o += n;
	}
	buf[o] = '\0';
	return buf;
}

/* ---- JSON ---- */

void jw_init(struct jw *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. */
static int utf8_len(const unsigned char *s)
{
	int n;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2)
		n = 2;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3;
	else if ((s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0)
		return 0; /* overlong */
	if (n == 3 && s[0] == 0xed && s[1] >= 0xa0)
		return 0; /* surrogate */
	if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
		return 0;
	return n;
}

static void jw_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		int n;

		if (*p == '"' || *p == '\\') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p == '\n') {
			fputs("\\n", f);
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0) {
			/* C1 controls (U+0080-U+009F, e.g. CSI): valid JSON raw,
			 * but a terminal showing the JSON would act on them */
			fprintf(f, "\\u%04x", p[1]);
			p += 2;
		} else if ((n = utf8_len(p)) > 0) {
			fwrite(p, 1, (size_t)n, f);
			p += n;
		} else {
			fputs("\\ufffd", f); /* not UTF-8: replacement char */
			p++;
		}
	}
	fputc('"', f);
}

static void jw_key(struct jw *w, const char *key)
{
	if (w->depth) {
		if (w->comma[w->depth])
			fputc(',', w->f);
		fputc('\n', w->f);
		for (int i = 0; i < w->depth; i++)
			fputs("  ", w->f);
	}
	w->comma[w->depth] = true;
	if (key) {
		jw_string(w->f, key);
		fputs(": ", w->f);
	}
}

static void jw_open(struct jw *w, const char *key, char c)
{
	jw_key(w, key);
	fputc(c, w->f);
	if (w->depth < 31)
		w->depth++;
	w->comma[w->depth] = false;
}

static void jw_close(struct jw *w, char c)
{
	bool any = w->comma[w->depth];

	if (w->depth)
		w->depth--;
	if (any) {
		fputc('\n', w->f);
		for (int i = 0; i < w->depth; i++)
			fputs("  ", w->f);
	}
	fputc(c, w->f);
}

void jw_obj(struct jw *w, const char *key)
{
	jw_open(w, key, '{');
}

void jw_arr(struct jw *w, const char *key)
{
	jw_open(w, key, '[');
}

void jw_end_obj(struct jw *w)
{
	jw_close(w, '}');
}

void jw_end_arr(struct jw *w)
{
	jw_close(w, ']');
}

void jw_str(struct jw *w, const char *key, const char *val)
{
	jw_key(w, key);
	if (val)
		jw_string(w->f, val);
	else
		fputs("null", w->f);
}

void jw_int(struct jw *w, const char *key, long long v)
{
	jw_key(w, key);
	fprintf(w->f, "%lld", v);
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	fprintf(w->f, "%llu", (unsigned long long)v);
}

void jw_bool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct jw *w, const char *key)
{
	jw_key(w, key);
	fputs("null", w->f);
}

void jw_finish(struct jw *w)
{
	fputc('\n', w->f);
}
