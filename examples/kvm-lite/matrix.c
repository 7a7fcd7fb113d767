/* SPDX-License-Identifier: MIT */
/*
 * kvm-lite --matrix (see matrix.h). Every cell, of the matrix and of the
 * free page reporting rounds, is one create/run/destroy of guest RAM and a
 * VM (run_cell), and both go through the same loop of interleaved rounds
 * (interleave): rounds start at another cell each time, so drift of the
 * machine spreads over all cells; what differs is what each collects.
 */
#define _GNU_SOURCE
#include "matrix.h"
#include "kick.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#define NCELL 8
#define KL_MAXREP 32
#define NFPR 3

static const enum kl_backing mx_rows[4] = { KB_4K, KB_THP, KB_HUGETLB, KB_SHMEM_HUGE };
static const char *const mx_ev_names[4] = { "memset1", "memset2", "stride 4K", "random" };
static const enum kl_backing fpr_rows[NFPR] = { KB_THP, KB_HUGETLB, KB_SHMEM_HUGE };

/* Medians of the matrix and of the free page reporting rounds. */
struct bench_out {
	int done[NCELL];
	uint64_t med[NCELL][4];
	double cov[NCELL];
	char why[NCELL][320];
	int fpr_done[NFPR];
	char fpr_why[NFPR][320];
	/* Mcycles of the guest refilling its reported range: warm (never
	 * released), after release_lazy + fault_in, after reclaim + fault_in */
	double fpr_warm[NFPR], fpr_lazy[NFPR], fpr_recl[NFPR];
	/* host ms: release_lazy, fault_in after it; release+reclaim, fault_in */
	double fpr_rel[NFPR][2], fpr_acq[NFPR][2];
	size_t fpr_len;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One create/run/destroy. 0: ran and passed, res filled; 1: could not run
 * here (why says so); -1: ran and failed (why says so). */
static int run_cell(const struct kl_opts *o, int kvm, enum kl_backing b, size_t guest_page,
		    struct kl_result *res, size_t *fpr_len, char *why, size_t whylen)
{
	struct kl_layout l;
	struct kl_ram ram;
	char msg[256];
	int rc;

	if (kl_layout_init(&l, o->ram, guest_page, kl_backing_page(b), kl_backing_names[b], msg,
			   sizeof(msg))) {
		snprintf(why, whylen, "%.300s", msg);
		return 1;
	}
	if (fpr_len)
		*fpr_len = l.fpr_len;
	if ((rc = kl_ram_create(&ram, b, o->ram, &o->ram_opts))) {
		snprintf(why, whylen, "unavailable: %.290s", kl_ram_error(rc));
		return 1;
	}
	rc = kl_run_guest(o, kvm, &l, &ram, res);
	kl_ram_destroy(&ram);
	if (rc || kl_check_result(o, res)) {
		snprintf(why, whylen, "run FAILED (%s)",
			 rc ? strerror(-rc) : "checksum or page-table check");
		return -1;
	}
	return 0;
}

/* The cells of one experiment: what each runs on, where its results go. */
struct cells {
	unsigned n, step; /* cells; round r starts at cell r * step */
	const enum kl_backing *backing;
	bool matrix; /* cell c: backing[c / 2], guest 4k or 2m; else backing[c], 2m */
	char (*why)[320];
	int *done;
	size_t *fpr_len;
	void (*collect)(void *ctx, unsigned c, int n, const struct kl_result *res);
	void *ctx;
};

/* The one create/run/destroy loop of --matrix and of the FPR rounds:
 * o->repeat interleaved rounds over the cells, each round starting at
 * another cell so that drift of the machine spreads over all of them; a
 * cell that cannot run here is not tried again. 1 if a cell failed. */
static int interleave(const struct kl_opts *o, int kvm, const struct cells *cs)
{
	int bad = 0;

	for (unsigned rep = 0; rep < o->repeat; rep++) {
		for (unsigned k = 0; k < cs->n; k++) {
			unsigned c = (k + rep * cs->step) % cs->n;
			enum kl_backing b = cs->backing[cs->matrix ? c / 2 : c];
			size_t gp = cs->matrix && !(c % 2) ? 4096 : 2ul << 20;
			struct kl_result res;
			int rc;

			if (kl_stop_signal())
				return 1; /* SIGINT/SIGTERM: no more cells */
			if (cs->why[c][0])
				continue;
			rc = run_cell(o, kvm, b, gp, &res, cs->fpr_len, cs->why[c],
				      sizeof(cs->why[c]));
			bad |= rc < 0;
			if (rc == 0) {
				cs->collect(cs->ctx, c, cs->done[c], &res);
				cs->done[c]++;
			}
		}
	}
	return bad;
}

/* One matrix cell's run: its four loops, host coverage, prefault, leaf. */
struct matrix_ctx {
	uint64_t (*m)[4][KL_MAXREP];
	double *cov, pf[NCELL];
	size_t leaf[NCELL];
};

static void matrix_collect(void *ctx, unsigned c, int n, const struct kl_result *res)
{
	static const unsigned evs[4] = { KL_EV_MEMSET1, KL_EV_MEMSET2, KL_EV_STRIDE, KL_EV_RANDOM };
	struct matrix_ctx *mc = ctx;

	for (int e = 0; e < 4; e++)
		mc->m[c][e][n] = res->ev[evs[e]];
	/* coverage summed over rounds, averaged below */
	mc->cov[c] += res->st.size ? (double)res->st.huge_mapped / (double)res->st.size : 0;
	mc->pf[c] += res->prefault_ms;
	mc->leaf[c] = res->guest_leaf;
}

static int run_matrix(const struct kl_opts *o, int kvm, struct bench_out *out)
{
	struct kl_opts mo = *o; /* the matrix runs no FPR or snapshot rounds */
	uint64_t m[NCELL][4][KL_MAXREP];
	double *cov = out->cov, *pf;
	size_t *leaf;
	struct matrix_ctx mc;
	int *done = out->done, bad;
	char(*why)[320] = out->why;
	uint64_t(*med)[4] = out->med;

	pf = mc.pf;
	leaf = mc.leaf;

	memset(&mc, 0, sizeof(mc));
	mc.m = m;
	mc.cov = cov;
	mo.fpr = false;
	mo.snapshot = NULL;
	bad = interleave(&mo, kvm,
			 &(struct cells){ .n = NCELL,
					  .step = 3,
					  .backing = mx_rows,
					  .matrix = true,
					  .why = why,
					  .done = done,
					  .collect = matrix_collect,
					  .ctx = &mc });
	for (int c = 0; c < NCELL; c++)
		for (int e = 0; e < 4; e++) {
			med[c][e] = 0;
			if (done[c]) {
				qsort(m[c][e], (size_t)done[c], sizeof(uint64_t), cmp_u64);
				med[c][e] = m[c][e][done[c] / 2];
			}
		}
	printf("\nhost backing x guest page, %zu MiB guest RAM, median of %u interleaved "
	       "rounds,\nMcycles (ratio vs host 4k + guest 4k; < 1 is faster)\n",
	       o->ram >> 20, o->repeat);
	printf("%-11s %-6s %-16s %-16s %-16s %-16s %-9s %-10s %s\n", "host", "guest", "memset1",
	       "memset2", "stride 4K", "random", "host huge", "guest leaf", "prefault");
	for (int c = 0; c < NCELL; c++) {
		printf("%-11s %-6s ", kl_backing_names[mx_rows[c / 2]], c % 2 ? "2m" : "4k");
		if (!done[c]) {
			printf("%s\n", why[c][0] ? why[c] : "no run");
			continue;
		}
		for (int e = 0; e < 4; e++) {
			char cell[32];

			if (done[0] && med[0][e])
				snprintf(cell, sizeof(cell), "%.2f (%.2f)", kl_mc(med[c][e]),
					 (double)med[c][e] / (double)med[0][e]);
			else
				snprintf(cell, sizeof(cell), "%.2f", kl_mc(med[c][e]));
			printf("%-16s ", cell);
		}
		printf("%7.0f%%   %-10s %.0f ms\n", 100.0 * cov[c] / done[c],
		       leaf[c] == 4096 ? "4 KiB" :
		       leaf[c]	       ? "2 MiB" :
					 "?",
		       pf[c] / done[c]);
		cov[c] /= done[c];
	}
	return bad;
}

/* One FPR round's run: the guest's refills and the host's ms. */
struct fpr_ctx {
	double w[NFPR][KL_MAXREP], lz[NFPR][KL_MAXREP], rc[NFPR][KL_MAXREP];
	double rel[NFPR][2][KL_MAXREP], acq[NFPR][2][KL_MAXREP];
};

static void fpr_collect(void *ctx, unsigned c, int n, const struct kl_result *res)
{
	struct fpr_ctx *fc = ctx;

	fc->w[c][n] = kl_mc(res->ev[KL_EV_FPR_WARM]);
	fc->lz[c][n] = kl_mc(res->ev[KL_EV_FPR_LAZY]);
	fc->rc[c][n] = kl_mc(res->ev[KL_EV_FPR_RECLAIMED]);
	for (int j = 0; j < 2; j++) {
		fc->rel[c][j][n] = res->release_ms[j];
		fc->acq[c][j][n] = res->acquire_ms[j];
	}
}

/*
 * Free page reporting, the cost of reuse: the guest fills the upper half of
 * its RAM (warm), reports it free (hpr_release_lazy), takes it back
 * (hpr_fault_in) and fills it again; then the same with hpr_reclaim after
 * the release, so the memory really went back to the host. Interleaved
 * rounds per host backend, guest 2 MiB pages; medians.
 */
static int run_fpr_rounds(const struct kl_opts *o, int kvm, struct bench_out *out)
{
	struct kl_opts fo = *o;
	struct fpr_ctx fc;
	double(*w)[KL_MAXREP] = fc.w, (*lz)[KL_MAXREP] = fc.lz, (*rc_)[KL_MAXREP] = fc.rc;
	double(*rel)[2][KL_MAXREP] = fc.rel, (*acq)[2][KL_MAXREP] = fc.acq;
	int bad;

	fo.fpr = true;
	fo.snapshot = NULL;
	bad = interleave(&fo, kvm,
			 &(struct cells){ .n = NFPR,
					  .step = 1,
					  .backing = fpr_rows,
					  .why = out->fpr_why,
					  .done = out->fpr_done,
					  .fpr_len = &out->fpr_len,
					  .collect = fpr_collect,
					  .ctx = &fc });
	printf("\nfree page reporting, guest refills %zu MiB it reported free, median of %u "
	       "interleaved rounds\n(Mcycles in the guest, ratio vs warm; host ms for the "
	       "report and the reuse)\n",
	       out->fpr_len >> 20, o->repeat);
	printf("%-11s %-8s %-22s %-22s %-18s %s\n", "host", "warm", "after release_lazy",
	       "after reclaim", "lazy: rel+reuse", "reclaim: rel+reuse");
	for (int c = 0; c < NFPR; c++) {
		int n = out->fpr_done[c];
		char a[32], bb[32];

		printf("%-11s ", kl_backing_names[fpr_rows[c]]);
		if (!n) {
			printf("%s\n", out->fpr_why[c][0] ? out->fpr_why[c] : "no run");
			continue;
		}
		out->fpr_warm[c] = median(w[c], n);
		out->fpr_lazy[c] = median(lz[c], n);
		out->fpr_recl[c] = median(rc_[c], n);
		for (int j = 0; j < 2; j++) {
			out->fpr_rel[c][j] = median(rel[c][j], n);
			out->fpr_acq[c][j] = median(acq[c][j], n);
		}
		snprintf(a, sizeof(a), "%.2f (%.2fx)", out->fpr_lazy[c],
			 out->fpr_lazy[c] / out->fpr_warm[c]);
		snprintf(bb, sizeof(bb), "%.2f (%.2fx)", out->fpr_recl[c],
			 out->fpr_recl[c] / out->fpr_warm[c]);
		printf("%-8.2f %-22s %-22s %6.2f+%-6.2f ms    %6.2f+%.2f ms\n", out->fpr_warm[c], a,
		       bb, out->fpr_rel[c][0], out->fpr_acq[c][0], out->fpr_rel[c][1],
		       out->fpr_acq[c][1]);
	}
	return bad;
}

/* bench/run's convention: {"headline": [{measure, ours, baseline, ratio,
 * anchor}], "matrix": [...], "fpr": [...]} */
static int write_json(const char *path, const struct kl_opts *o, const char *kvm_desc,
		      const struct bench_out *out)
{
	FILE *f = fopen(path, "w");
	bool first = true;

	if (!f) {
		fprintf(stderr, "kvm-lite: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fputs("{\"kvm\": \"", f);
	for (const char *p = kvm_desc; *p; p++)
		if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
			fputc(*p, f);
	fprintf(f, "\", \"ram_mib\": %zu, \"repeat\": %u,\n \"headline\": [", o->ram >> 20,
		o->repeat);
	/* random access: host huge + guest 2m against host 4k + guest 4k */
	for (int c = 3; c < NCELL; c += 2) {
		if (!out->done[c] || !out->done[0] || !out->med[0][3])
			continue;
		fprintf(f,
			"%s\n  {\"measure\": \"guest random access, host %s + guest 2M vs host "
			"4K + guest 4K, Mcycles\", \"ours\": %.2f, \"baseline\": %.2f, "
			"\"ratio\": %.3f, \"anchor\": \"1-16 %% apart across host x guest "
			"page sizes\"}",
			first ? "" : ",", kl_backing_names[mx_rows[c / 2]], kl_mc(out->med[c][3]),
			kl_mc(out->med[0][3]), (double)out->med[c][3] / (double)out->med[0][3]);
		first = false;
	}
	for (int c = 0; c < NFPR; c++) {
		if (!out->fpr_done[c])
			continue;
		fprintf(f,
			"%s\n  {\"measure\": \"guest refill of reported memory after "
			"release_lazy vs warm, %s, Mcycles\", \"ours\": %.2f, \"baseline\": "
			"%.2f, \"ratio\": %.3f, \"anchor\": \"reuse after free page reporting "
			"costs nothing extra once freed lazily (MADV_FREE)\"},",
			first ? "" : ",", kl_backing_names[fpr_rows[c]], out->fpr_lazy[c],
			out->fpr_warm[c], out->fpr_lazy[c] / out->fpr_warm[c]);
		fprintf(f,
			"\n  {\"measure\": \"guest refill after release + reclaim vs warm, %s, "
			"Mcycles\", \"ours\": %.2f, \"baseline\": %.2f, \"ratio\": %.3f},",
			kl_backing_names[fpr_rows[c]], out->fpr_recl[c], out->fpr_warm[c],
			out->fpr_recl[c] / out->fpr_warm[c]);
		fprintf(f,
			"\n  {\"measure\": \"host reuse cost (release + fault_in), reclaim vs "
			"lazy, %s, ms\", \"ours\": %.2f, \"baseline\": %.2f, \"ratio\": %.2f}",
			kl_backing_names[fpr_rows[c]], out->fpr_rel[c][1] + out->fpr_acq[c][1],
			out->fpr_rel[c][0] + out->fpr_acq[c][0],
			(out->fpr_rel[c][1] + out->fpr_acq[c][1]) /
				(out->fpr_rel[c][0] + out->fpr_acq[c][0]));
		first = false;
	}
	fprintf(f, "\n ],\n \"matrix\": [");
	for (int c = 0; c < NCELL; c++) {
		fprintf(f, "%s\n  {\"host\": \"%s\", \"guest\": \"%s\", \"rounds\": %d",
			c ? "," : "", kl_backing_names[mx_rows[c / 2]], c % 2 ? "2m" : "4k",
			out->done[c]);
		for (int e = 0; e < 4 && out->done[c]; e++)
			fprintf(f, ", \"%s_mcycles\": %.3f", mx_ev_names[e], kl_mc(out->med[c][e]));
		if (out->done[c])
			fprintf(f, ", \"host_huge\": %.3f", out->cov[c]);
		fprintf(f, "}");
	}
	fprintf(f, "\n ],\n \"fpr\": [");
	for (int c = 0; c < NFPR; c++) {
		fprintf(f, "%s\n  {\"host\": \"%s\", \"rounds\": %d", c ? "," : "",
			kl_backing_names[fpr_rows[c]], out->fpr_done[c]);
		if (out->fpr_done[c])
			fprintf(f,
				", \"warm_mcycles\": %.3f, \"lazy_mcycles\": %.3f, "
				"\"reclaimed_mcycles\": %.3f, \"lazy_release_ms\": %.3f, "
				"\"lazy_fault_in_ms\": %.3f, \"reclaim_release_ms\": %.3f, "
				"\"reclaim_fault_in_ms\": %.3f",
				out->fpr_warm[c], out->fpr_lazy[c], out->fpr_recl[c],
				out->fpr_rel[c][0], out->fpr_acq[c][0], out->fpr_rel[c][1],
				out->fpr_acq[c][1]);
		fprintf(f, "}");
	}
	fprintf(f, "\n ]\n}\n");
	return fclose(f) ? -1 : 0;
}

int kl_matrix(const struct kl_opts *o, int kvm, const char *kvm_desc)
{
	struct bench_out *out = calloc(1, sizeof(*out));
	int rc;

	if (!out)
		return 1;
	rc = run_matrix(o, kvm, out);
	if (o->fpr)
		rc |= run_fpr_rounds(o, kvm, out);
	if (o->json && write_json(o->json, o, kvm_desc, out))
		rc = 1;
	free(out);
	return rc;
}

int kl_matrix_check(const struct kl_opts *o, char *msg, size_t len)
{
	struct kl_layout l;

	for (int i = 0; i < 4; i++)
		for (size_t gp = 4096; gp <= (2ul << 20); gp <<= 9)
			if (kl_layout_init(&l, o->ram, gp, kl_backing_page(mx_rows[i]),
					   kl_backing_names[mx_rows[i]], msg, len))
				return -EINVAL;
	return 0;
}
