/* SPDX-License-Identifier: MIT */
/*
 * The YCSB-style driver's shared pieces: options, the latency histogram,
 * the databases under test and their run results. ycsb.c runs the
 * workloads; report.c prints them (progress, tables, JSON).
 */
#ifndef KV_YCSB_H
#define KV_YCSB_H

#include "engine.h"
#include "generator.h"
#include "hist.h"
#include "row.h"

#include <stdio.h>

/* OP_RMW (workload F): a read, then an update of the same key; its read
 * and update are also counted under OP_READ and OP_UPDATE, as YCSB does */
enum { OP_READ, OP_UPDATE, OP_RMW, NOPS };
extern const char *const op_name[NOPS];

struct ycsb_opts {
	const char *data, *base_data, *region_dir, *log_dir, *acklog, *check, *json;
	const char *cache_image; /* --cache-image FILE (image.c) */
	bool image_nowait;	 /* --image-nowait */
	enum kv_backing cache_b, mt_b;
	bool cache_b_set;
	uint64_t records, ops;
	struct row_fmt row; /* --fieldcount (10), --fieldlen (100): YCSB's defaults */
	bool writeall;	    /* --writeallfields: updates write every field */
	bool readall;	    /* --readallfields=false: reads read one field */
	unsigned threads, repeat, status;
	double seconds;
	double target; /* --target OPS: ops/s over all threads; 0: as fast as possible */
	double warmup; /* --warmup S: seconds of each run not measured */
	char workloads[32];
	enum ycsb_dist dist;
	bool verify, no_load, allow_disk, huge, base;
	bool keep, restart; /* --keep, --restart (ycsb_restart.c) */
	size_t cache_mb, memtable_mb;
};
extern struct ycsb_opts opt;

struct variant {
	const char *name; /* "huge" | "base" */
	const char *dir;
	struct kv_db *db;
	_Atomic uint64_t *acked; /* highest acknowledged seq per key (--verify) */
	char mount[128];
	char logdir[PATH_MAX]; /* --log-dir DIR: DIR/<name> */
};

struct run_result {
	char workload;
	const char *variant;
	uint64_t ops, warm_ops; /* measured; done in the warm-up, not measured */
	double secs, ops_s;	/* secs: from the start (after the warm-up) to the
				 * end of the last measured operation */
	struct hist h[NOPS];	/* service time: the operation's own start to end */
	struct hist ih[NOPS];	/* --target: from its intended start to its end */
	size_t res[3], huge[3];
	struct kv_stats st0, st1;
	uint64_t minflt; /* page faults the process took during the run */
	/* measured reads (a workload F read-modify-write's too): the bytes
	 * the engine returned and the whole fields in them */
	uint64_t read_bytes, read_fields;
};

/* every run of a process: the load and each repeat of each workload, per
 * variant (the driver refuses more) */
#define MAX_RUNS 64
#define MAX_THREADS 1024
extern struct run_result results[MAX_RUNS];
extern int nresults;
extern _Atomic uint64_t verify_reads, verify_errors;

/* the driver's pieces that --restart (ycsb_restart.c) uses */
struct client;
struct client *clients_start(struct variant *v, char workload, uint64_t t0);
uint64_t clients_ops(struct client *cl);
int clients_stop(struct client *cl);
int open_variant(struct variant *v, bool huge);
/* a run of workload ('L': the load) on v, until --seconds or --ops */
int phase(struct variant *v, char workload, struct run_result *res);
void print_keep_info(struct variant *v);
void print_image_info(struct variant *v);
uint64_t check_acked(struct variant *v, const uint64_t *snap, uint64_t *keys);
/* --restart: the whole run; the exit code */
int run_restart(char workload);

const char *wl_name(char w);
/* the per-run table: its header, then one row per run as it ends */
void print_run_header(void);
void print_run(const struct run_result *r);
void print_summary(struct variant *vs, int nv, const char *wls, size_t nwl);
/* the JSON summary object (no newline): every run, ratios, verify */
void write_summary(FILE *f, const char *wls, size_t nwl, int rc);
/* --json FILE for bench/run: headline rows + the summary */
int write_json(const char *path, const char *wls, size_t nwl, int rc);

#endif /* KV_YCSB_H */
