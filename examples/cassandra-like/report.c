/* SPDX-License-Identifier: MIT */
/*
 * The driver's reports: one table row per run, the
 * side-by-side summary (huge vs base pages, ratio as the median of the
 * interleaved pairs) and the JSON file (--json) for scripts and bench/run.
 */
#define _GNU_SOURCE
#include "ycsb.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static double pct(size_t part, size_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

const char *wl_name(char w)
{
	switch (w) {
	case 'L':
		return "load (100% insert)";
	case 'a':
		return "A (50% read, 50% update)";
	case 'b':
		return "B (95% read, 5% update)";
	case 'c':
		return "C (100% read)";
	case 'f':
		return "F (50% read, 50% RMW)";
	case 'u':
		return "U (5% read, 95% update)";
	}
	return "?";
}

void print_run_header(void)
{
	printf("\nruns (load: 100%% insert; A: 50%% read, 50%% update; B: 95/5; C: 100/0; "
	       "F: 50%% read, 50%% read-modify-write; U: 5/95)\n"
	       "latencies in us; cache, memt, tables: %% of the resident memory that is "
	       "huge-mapped (smaps)\n");
	if (opt.target > 0)
		printf("--target %.0f ops/s: each row is followed by the latency from the "
		       "operations' intended start (YCSB's Intended-*), the row's own is "
		       "service time\n",
		       opt.target);
	printf("%-5s %-4s %9s %9s %9s %9s %9s %9s %9s %6s %5s %6s %5s %7s %8s\n", "pages", "run",
	       "ops/s", "read p50", "read p99", "rd p99.9", "upd p50", "upd p99", "up p99.9",
	       "cache", "memt", "tables", "hits", "stall s", "faults");
}

/* one latency column: "-" when the run had no such operation */
static void lat(const struct hist *h, double p)
{
	if (h->n)
		printf(" %9.1f", hist_pct_us(h, p));
	else
		printf(" %9s", "-");
}

void print_run(const struct run_result *r)
{
	uint64_t hits = r->st1.cache_hits - r->st0.cache_hits;
	uint64_t misses = r->st1.cache_misses - r->st0.cache_misses;
	char wl[8];

	if (r->workload == 'L')
		snprintf(wl, sizeof(wl), "load");
	else
		snprintf(wl, sizeof(wl), "%c", r->workload - 32); /* A, B, U */
	printf("%-5s %-4s %9.0f", r->variant, wl, r->ops_s);
	lat(&r->h[OP_READ], .5);
	lat(&r->h[OP_READ], .99);
	lat(&r->h[OP_READ], .999);
	lat(&r->h[OP_UPDATE], .5);
	lat(&r->h[OP_UPDATE], .99);
	lat(&r->h[OP_UPDATE], .999);
	printf(" %5.0f%% %4.0f%% %5.0f%% %4.0f%% %7.2f %8" PRIu64 "\n", pct(r->huge[0], r->res[0]),
	       pct(r->huge[1], r->res[1]), pct(r->huge[2], r->res[2]), pct(hits, hits + misses),
	       (double)(r->st1.stall_ns - r->st0.stall_ns) / 1e9, r->minflt);
	if (opt.target > 0) {
		printf("%-5s %-4s %9s", "", "", "intended");
		lat(&r->ih[OP_READ], .5);
		lat(&r->ih[OP_READ], .99);
		lat(&r->ih[OP_READ], .999);
		lat(&r->ih[OP_UPDATE], .5);
		lat(&r->ih[OP_UPDATE], .99);
		lat(&r->ih[OP_UPDATE], .999);
		printf("\n");
	}
	if (r->warm_ops)
		printf("%-5s %-4s (%" PRIu64 " warm-up operations before it, not measured)\n", "",
		       "", r->warm_ops);
	fflush(stdout);
}

static void json_hist(FILE *f, const struct hist *h)
{
	fprintf(f,
		"{\"count\":%" PRIu64 ",\"avg_us\":%.2f,\"p50_us\":%.2f,\"p99_us\":%.2f,"
		"\"p999_us\":%.2f,\"max_us\":%.2f}",
		h->n, h->n ? (double)h->sum / (double)h->n / 1000.0 : 0, hist_pct_us(h, .5),
		hist_pct_us(h, .99), hist_pct_us(h, .999), (double)h->max / 1000.0);
}

/* mean ops/s and merged histograms of a variant's runs of workload w */
static int aggregate(const char *variant, char w, double *ops_s, struct hist h[NOPS],
		     struct run_result **last)
{
	int n = 0;

	*ops_s = 0;
	memset(h, 0, NOPS * sizeof(*h));
	for (int i = 0; i < nresults; i++) {
		if (results[i].workload != w || strcmp(results[i].variant, variant))
			continue;
		*ops_s += results[i].ops_s;
		for (int o = 0; o < NOPS; o++)
			hist_merge(&h[o], &results[i].h[o]);
		*last = &results[i];
		n++;
	}
	if (n)
		*ops_s /= n;
	return n;
}

/* Ratios huge/base of the runs of workload w paired in order (rep k of
 * huge with rep k of base): their median and range. Robust against one
 * run that a neighbour on the machine slowed down. */
static int pair_ratios(char w, double *median, double *lo, double *hi)
{
	double hu[MAX_RUNS], ba[MAX_RUNS], r[MAX_RUNS];
	int nh = 0, nb = 0, n;

	for (int i = 0; i < nresults; i++) {
		if (results[i].workload != w)
			continue;
		if (!strcmp(results[i].variant, "huge") && nh < MAX_RUNS)
			hu[nh++] = results[i].ops_s;
		else if (!strcmp(results[i].variant, "base") && nb < MAX_RUNS)
			ba[nb++] = results[i].ops_s;
	}
	n = nh < nb ? nh : nb;
	for (int i = 0; i < n; i++)
		r[i] = ba[i] > 0 ? hu[i] / ba[i] : 0;
	for (int i = 1; i < n; i++) /* insertion sort: a handful of runs */
		for (int j = i; j > 0 && r[j - 1] > r[j]; j--) {
			double t = r[j];

			r[j] = r[j - 1];
			r[j - 1] = t;
		}
	if (!n)
		return 0;
	*median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
	*lo = r[0];
	*hi = r[n - 1];
	return n;
}

/* "huge p99 / base p99", or "-" when neither run had that operation */
static void p99_pair(char *out, size_t n, const struct hist *huge, const struct hist *base)
{
	if (huge->n || base->n)
		snprintf(out, n, "%.1f / %.1f", hist_pct_us(huge, .99), hist_pct_us(base, .99));
	else
		snprintf(out, n, "-");
}

/* The table at the end: per workload, ops/s of each run, the ratio and
 * p99s; then each run's measured huge-page coverage. */
void print_summary(struct variant *vs, int nv, const char *wls, size_t nwl)
{
	printf("\n== summary: %s ==\n",
	       nv == 2 ? "huge pages vs base pages (ops/s: mean of the runs; ratio: median "
			 "of the interleaved pairs)" :
			 vs[0].name);
	if (nv == 2)
		printf("%-26s %11s %11s %19s %20s %20s\n", "workload", "huge ops/s", "base ops/s",
		       "huge/base [range]", "read p99 us h / b", "update p99 us h / b");
	else
		printf("%-26s %11s %20s %20s\n", "workload", "ops/s", "read p50/p99/p99.9",
		       "update p50/p99/p99.9");
	for (size_t w = 0; w < nwl + 1; w++) {
		char wl = w == 0 ? 'L' : wls[w - 1];
		double o[2] = { 0, 0 };
		static struct hist h[2][NOPS]; /* 1.5 MiB: not on the stack */
		struct run_result *last = NULL;
		char a[64], b[64];

		aggregate(vs[0].name, wl, &o[0], h[0], &last);
		if (nv == 2)
			aggregate(vs[1].name, wl, &o[1], h[1], &last);
		if (!last)
			continue;
		if (nv == 2) {
			p99_pair(a, sizeof(a), &h[0][OP_READ], &h[1][OP_READ]);
			p99_pair(b, sizeof(b), &h[0][OP_UPDATE], &h[1][OP_UPDATE]);
			double med = 0, lo = 0, hi = 0;
			char rr[48];

			pair_ratios(wl, &med, &lo, &hi);
			if (lo < hi)
				snprintf(rr, sizeof(rr), "%.2f [%.2f-%.2f]", med, lo, hi);
			else
				snprintf(rr, sizeof(rr), "%.2f", med);
			printf("%-26s %11.0f %11.0f %19s %20s %20s\n", wl_name(wl), o[0], o[1], rr,
			       a, b);
		} else {
			snprintf(a, sizeof(a), "%.1f/%.1f/%.1f", hist_pct_us(&h[0][OP_READ], .5),
				 hist_pct_us(&h[0][OP_READ], .99),
				 hist_pct_us(&h[0][OP_READ], .999));
			snprintf(b, sizeof(b), "%.1f/%.1f/%.1f", hist_pct_us(&h[0][OP_UPDATE], .5),
				 hist_pct_us(&h[0][OP_UPDATE], .99),
				 hist_pct_us(&h[0][OP_UPDATE], .999));
			printf("%-26s %11.0f %20s %20s\n", wl_name(wl), o[0], a, b);
		}
	}
	for (int i = 0; i < nv; i++)
		for (int k = nresults - 1; k >= 0; k--) {
			const struct run_result *r = &results[k];

			if (strcmp(r->variant, vs[i].name))
				continue;
			printf("huge-page coverage, %s run (%s): row cache %.0f%%, memtables "
			       "%.0f%%, table mappings %.0f%% of what is resident\n",
			       vs[i].name, vs[i].mount, pct(r->huge[0], r->res[0]),
			       pct(r->huge[1], r->res[1]), pct(r->huge[2], r->res[2]));
			break;
		}
}

/* The machine-readable summary (in the --json file): one JSON object. */
void write_summary(FILE *f, const char *wls, size_t nwl, int rc)
{
	fprintf(f,
		"{\"records\":%" PRIu64 ",\"fields\":%u,\"fieldlen\":%u,\"writeallfields\":%s,"
		"\"readallfields\":%s,\"threads\":%u,\"dist\":\"%s\",\"cache_mb\":%zu,"
		"\"memtable_mb\":%zu,\"target_ops\":%.1f,\"warmup_secs\":%.3f,\"runs\":[",
		opt.records, opt.row.fields, opt.row.fieldlen, opt.writeall ? "true" : "false",
		opt.readall ? "true" : "false", opt.threads, ycsb_dist_name(opt.dist), opt.cache_mb,
		opt.memtable_mb, opt.target, opt.warmup);
	for (int i = 0; i < nresults; i++) {
		const struct run_result *r = &results[i];

		fprintf(f,
			"%s{\"pages\":\"%s\",\"workload\":\"%c\",\"ops\":%" PRIu64
			",\"warmup_ops\":%" PRIu64 ",\"secs\":%.6f,\"ops_per_sec\":%.1f,"
			"\"read_bytes\":%" PRIu64 ",\"read_fields\":%" PRIu64 ",\"read\":",
			i ? "," : "", r->variant, r->workload == 'L' ? 'L' : r->workload - 32,
			r->ops, r->warm_ops, r->secs, r->ops_s, r->read_bytes, r->read_fields);
		json_hist(f, &r->h[OP_READ]);
		fprintf(f, ",\"update\":");
		json_hist(f, &r->h[OP_UPDATE]);
		fprintf(f, ",\"rmw\":");
		json_hist(f, &r->h[OP_RMW]);
		if (opt.target > 0) { /* latency from the intended start */
			fprintf(f, ",\"intended_read\":");
			json_hist(f, &r->ih[OP_READ]);
			fprintf(f, ",\"intended_update\":");
			json_hist(f, &r->ih[OP_UPDATE]);
			fprintf(f, ",\"intended_rmw\":");
			json_hist(f, &r->ih[OP_RMW]);
		}
		fprintf(f,
			",\"huge_pct\":{\"cache\":%.1f,\"memtable\":%.1f,\"tables\":%.1f},"
			"\"flushes\":%" PRIu64 ",\"compactions\":%" PRIu64
			",\"cache_evictions\":%" PRIu64 ",\"stall_secs\":%.3f,"
			"\"page_faults\":%" PRIu64 "}",
			pct(r->huge[0], r->res[0]), pct(r->huge[1], r->res[1]),
			pct(r->huge[2], r->res[2]), r->st1.flushes - r->st0.flushes,
			r->st1.compactions - r->st0.compactions,
			r->st1.cache_evictions - r->st0.cache_evictions,
			(double)(r->st1.stall_ns - r->st0.stall_ns) / 1e9, r->minflt);
	}
	fprintf(f, "],\"ratio\":{");
	for (size_t w = 0, first = 1; w < nwl + 1; w++) {
		char wl = w == 0 ? 'L' : wls[w - 1];
		double med, rlo, rhi;

		if (pair_ratios(wl, &med, &rlo, &rhi)) {
			fprintf(f, "%s\"%c\":{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}",
				first ? "" : ",", wl == 'L' ? 'L' : wl - 32, med, rlo, rhi);
			first = 0;
		}
	}
	fprintf(f,
		"},\"verify\":{\"enabled\":%s,\"reads\":%" PRIu64 ",\"errors\":%" PRIu64
		"},\"exit\":%d}",
		opt.verify ? "true" : "false", atomic_load(&verify_reads),
		atomic_load(&verify_errors), rc);
}

/* --json FILE: what bench/run reads: headline rows (ours = huge pages,
 * baseline = base pages, ratio = median of the interleaved pairs) and the
 * full summary. */
int write_json(const char *path, const char *wls, size_t nwl, int rc)
{
	FILE *f = fopen(path, "we");
	bool first = true;

	if (!f) {
		fprintf(stderr, "cassandra-like: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"headline\":[");
	for (size_t w = 0; w < nwl; w++) {
		static struct hist h[2][NOPS]; /* 1.5 MiB: not on the stack */
		struct run_result *last = NULL;
		double o[2], med, rlo, rhi;
		int op = wls[w] == 'u' ? OP_UPDATE : OP_READ;

		if (!aggregate("huge", wls[w], &o[0], h[0], &last) ||
		    !aggregate("base", wls[w], &o[1], h[1], &last) ||
		    !pair_ratios(wls[w], &med, &rlo, &rhi))
			continue;
		fprintf(f,
			"%s{\"measure\":\"%s: ops/s, huge pages / base pages\",\"ours\":%.0f,"
			"\"baseline\":%.0f,\"ratio\":%.3f,\"range\":[%.3f,%.3f],\"anchor\":\"%s\"}",
			first ? "" : ",", wl_name(wls[w]), o[0], o[1], med, rlo, rhi,
			wls[w] == 'u' ? "Cassandra on huge tmpfs, 95 % update: 36 % apart "
					"between two huge-tmpfs designs" :
					"");
		fprintf(f,
			",{\"measure\":\"%s: %s p99 us (lower is better)\",\"ours\":%.1f,"
			"\"baseline\":%.1f,\"ratio\":%.3f,\"anchor\":\"\"}",
			wl_name(wls[w]), op_name[op], hist_pct_us(&h[0][op], .99),
			hist_pct_us(&h[1][op], .99),
			hist_pct_us(&h[1][op], .99) > 0 ?
				hist_pct_us(&h[0][op], .99) / hist_pct_us(&h[1][op], .99) :
				0);
		first = false;
	}
	fprintf(f, "],\"summary\":");
	write_summary(f, wls, nwl, rc);
	fprintf(f, "}\n");
	return fclose(f) ? -1 : 0;
}
