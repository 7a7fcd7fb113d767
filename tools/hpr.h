/* SPDX-License-Identifier: MIT */
/*
 * The hpr command: shared helpers of its subcommands (file reading, size
 * parsing and printing, a small JSON writer, exit codes). Each subcommand
 * lives in its own file: probe.c, pool.c, mount.c, stat.c; hpr.c has main.
 */
#ifndef HPR_TOOL_H
#define HPR_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes: 0 ok, 1 failure (permission, kernel refused), 2 bad usage. */
#define EXIT_USAGE 2

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define HTLB_DIR "/sys/kernel/mm/hugepages"
#define NODE_DIR "/sys/devices/system/node"

extern const char *hpr_prog; /* "hpr" */

int cmd_probe(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_stat(int argc, char **argv);
/* hpr stat --kept DIR (kept.c) */
int stat_kept(const char *dir, bool json);
/* Is the file process pid maps at path (want: its st_dev and st_ino) a
 * kept region (HPR_F_ATTACH)? Its region name into name. Only a regular
 * file on tmpfs or hugetlbfs that is still that inode is opened, through
 * /proc/PID/root. */
struct stat;
bool kept_vma(unsigned long pid, const struct stat *want, const char *path, char *name, size_t len);

/* Print "hpr SUB: msg" and the subcommand's usage to stderr; returns 2. */
int usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last case of a subcommand's getopt switch: for 'h' print usage to
 * stdout and return 0, for anything else usage_error() the unknown option. */
int end_option(int c, const char *usage, char **argv);
/* Print "hpr: msg" to stderr; returns 1. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* strlcpy: copy s into d of size n, truncating, always terminated. */
void scopy(char *d, size_t n, const char *s);

/* Read a whole file into a malloc'd NUL-terminated buffer; NULL and errno
 * on failure. *len (may be NULL) gets the length. */
char *slurp(const char *path, size_t *len);
/* Read a small file into buf (NUL-terminated, trailing newline dropped).
 * 0 or -errno. */
int read_str(const char *path, char *buf, size_t len);
/* First unsigned decimal of a file. 0 or -errno. */
int read_u64(const char *path, uint64_t *v);
/* The bracketed word of a sysfs mode file ("always [madvise] never"), or
 * the whole first word when nothing is bracketed. 0 or -errno. */
int read_mode(const char *path, char *buf, size_t len);
/* Write val to a sysfs/procfs file. 0 or -errno. */
int write_str(const char *path, const char *val);

/* s made safe for a terminal: bytes outside printable ASCII as \xNN and
 * a backslash as two (names read from other processes may carry escape
 * sequences). Truncated to fit buf; returns buf. */
const char *esc_text(const char *s, char *buf, size_t len);
/* "2M", "1G", "2048k", "2MiB", "4096" -> bytes (hpr__parse_size). */
int parse_size_arg(const char *s, uint64_t *out);
/* Decimal count "0".."2^63"; -EINVAL otherwise. */
int parse_count(const char *s, unsigned long *out);
/* "2 MiB", "1 GiB", "1.5 GiB" (exact units when whole). */
const char *fmt_size(uint64_t bytes, char *buf, size_t len);
/* "2M", "1G": the short form hpr takes as an argument. */
const char *fmt_size_arg(uint64_t bytes, char *buf, size_t len);

/* Huge page sizes in /sys/kernel/mm/hugepages, ascending. Returns count. */
unsigned hugetlb_sizes(uint64_t *sizes, unsigned max);
/* Online NUMA node ids (from /sys/devices/system/node). Returns count. */
unsigned numa_nodes(int *nodes, unsigned max);

/* ---- a directory root can act on without following symlinks (safedir.c) ---- */
#define SAFEDIR_MAX_DEPTH 64
struct safedir {
	int fd; /* the directory, O_PATH; -1 when not open */
	int n;
	int fds[SAFEDIR_MAX_DEPTH]; /* each component, from / or . down */
	char *names[SAFEDIR_MAX_DEPTH];
	bool made[SAFEDIR_MAX_DEPTH]; /* created by the walk */
};
/* Walk path with O_NOFOLLOW, creating missing directories (0755). Unless
 * unsafe, refuse symlinks, components owned by others than root or the
 * caller, and parents others can write without the sticky bit. 0, or 1
 * after printing why (nothing left open or created). */
int safedir_open(struct safedir *d, const char *path, bool unsafe);
/* Close the fds; safedir_undo() also removes the directories it made. */
void safedir_close(struct safedir *d);
void safedir_undo(struct safedir *d);

/* ---- hugetlb pools (pool.c) ---- */
#define MAX_NODES 64
struct pool {
	uint64_t page_size;
	uint64_t total, free, resv, surplus, overcommit;
	unsigned nr_nodes;
	struct {
		int node;
		uint64_t total, free, surplus;
	} nodes[MAX_NODES];
};
/* Fresh counters of the pool of page_size, global and per node. 0/-errno. */
int pool_read(uint64_t page_size, struct pool *p);
/* A pool as a JSON object (node >= 0: only that node's entry). */
struct jw;
void json_pool(struct jw *w, const struct pool *p, int node);
/* Path of a pool file: node < 0 global, else per node. */
void pool_path(char *buf, size_t len, uint64_t page_size, int node, const char *file);

/* ---- JSON writer: comma and indentation bookkeeping only ---- */
struct jw {
	FILE *f;
	int depth;
	bool comma[32];
};
void jw_init(struct jw *w, FILE *f);
/* key is NULL inside arrays. */
void jw_obj(struct jw *w, const char *key);
void jw_arr(struct jw *w, const char *key);
void jw_end_obj(struct jw *w);
void jw_end_arr(struct jw *w);
void jw_str(struct jw *w, const char *key, const char *val); /* NULL: null */
void jw_int(struct jw *w, const char *key, long long v);
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_bool(struct jw *w, const char *key, bool v);
void jw_null(struct jw *w, const char *key);
void jw_finish(struct jw *w); /* final newline */

#endif
